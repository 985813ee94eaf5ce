/* Block formats to f32/f16 and back.
 *
 * Dequantization follows ggml's reference formulas operation for operation
 * (same products, same order, float arithmetic), so the f32 results equal
 * llama.cpp's bit for bit. The quantizers are simple round-to-nearest ones:
 * they are for synthetic models and tests, not for quality.
 *
 * Block layouts (all little-endian, f16 scales):
 *   Q4_0  32 elems  18 B: d, qs[16]            x = (q - 8) * d
 *   Q4_1  32 elems  20 B: d, m, qs[16]         x = q * d + m
 *   Q5_0  32 elems  22 B: d, qh[4], qs[16]     x = (q - 16) * d   (bit 4 in qh)
 *   Q5_1  32 elems  24 B: d, m, qh[4], qs[16]  x = q * d + m
 *   Q8_0  32 elems  34 B: d, qs[32] (int8)     x = q * d
 *   Q4_K 256 elems 144 B: d, dmin, scales[12] (8 x 6-bit scale/min), qs[128]
 *   Q5_K 256 elems 176 B: d, dmin, scales[12], qh[32], qs[128]
 *   Q6_K 256 elems 210 B: ql[128], qh[64], scales[16] (int8), d
 *   Q2_K 256 elems  84 B: scales[16] (4-bit scale | 4-bit min << 4), qs[64], d, dmin
 *   Q3_K 256 elems 110 B: hmask[32], qs[64], scales[12] (16 x 6 bits), d
 *   IQ4_NL 32 elems 18 B: d, qs[16]            x = d * kvalues[q]
 *   IQ4_XS 256 elems 136 B: d, scales_h (u16), scales_l[4], qs[128]
 *   MXFP4  32 elems  17 B: e (u8, E8M0), qs[16]  x = kvalues_fp4[q] * 2^(e - 128)
 * Q2_K and Q3_K: element 128n + 32j + l (n < 2, j < 4, l < 32) has its 2 low
 * bits at bit 2j of qs[32n + l] and sub-block scale 8n + 2j + l / 16; Q3_K's
 * third bit is bit 4n + j of hmask[l], set meaning "no -4".
 * In the 32-element formats byte j holds element j (low nibble) and element
 * j + 16 (high nibble).
 * MXFP4 is OCP's microscaling FP4: E2M1 codes under a power-of-two scale.
 * ggml stores the E2M1 values doubled (0, 0.5, 1, ... 6 as 0, 1, 2, ... 12)
 * and halves the scale, 2^(e - 127) / 2, to make up for it; so do we.
 */
#include "backend.h"
#include "quants.h"

#include <errno.h>
#include <math.h>
#include <stdbool.h>
#include <string.h>

#include "gguf.h"

/* ---- scalar conversions ---- */

float eng_f16_to_f32(uint16_t h)
{
    uint32_t sign = (uint32_t)(h & 0x8000) << 16;
    uint32_t exp = (h >> 10) & 0x1f;
    uint32_t mant = h & 0x3ff;
    uint32_t bits;

    if (exp == 0x1f) {
        bits = sign | 0x7f800000u | (mant << 13); /* inf / NaN, payload kept */
    } else if (exp != 0) {
        bits = sign | ((exp + 112) << 23) | (mant << 13);
    } else if (mant == 0) {
        bits = sign;
    } else {
        /* subnormal half: normalize into a normal float (exact) */
        int e = -1;
        do {
            e++;
            mant <<= 1;
        } while (!(mant & 0x400));
        bits = sign | ((uint32_t)(112 - e) << 23) | ((mant & 0x3ff) << 13);
    }
    float f;
    memcpy(&f, &bits, sizeof(f));
    return f;
}

uint16_t eng_f32_to_f16(float f)
{
    uint32_t x;
    memcpy(&x, &f, sizeof(x));
    uint16_t sign = (uint16_t)((x >> 16) & 0x8000);
    uint32_t ax = x & 0x7fffffffu;

    if (ax > 0x7f800000u) /* NaN: keep it a quiet NaN, keep the top payload bits */
        return (uint16_t)(sign | 0x7e00 | ((ax >> 13) & 0x3ff));
    if (ax >= 0x477ff000u) /* rounds to >= 65520: overflow to infinity */
        return (uint16_t)(sign | 0x7c00);
    if (ax >= 0x38800000u) { /* normal half range (>= 2^-14) */
        uint32_t r = ax - 0x38000000u; /* rebias exponent 127 -> 15 */
        uint32_t lsb = (r >> 13) & 1;
        r += 0xfff + lsb; /* round to nearest, ties to even */
        return (uint16_t)(sign | (r >> 13));
    }
    if (ax < 0x33000000u) /* below half the smallest subnormal: zero */
        return sign;
    /* subnormal half: value = m * 2^-24 with m rounded to nearest even */
    uint32_t e = ax >> 23;
    uint32_t m = (ax & 0x7fffffu) | 0x800000u;
    uint32_t shift = 126 - e; /* 14 + 23 - (e - 127) - 24 + ... = bits dropped */
    /* value = m * 2^(e-150); in units of 2^-24: m * 2^(e-126) => drop (126-e) bits */
    uint32_t q = m >> shift;
    uint32_t rem = m & ((1u << shift) - 1);
    uint32_t half = 1u << (shift - 1);
    if (rem > half || (rem == half && (q & 1)))
        q++;
    return (uint16_t)(sign | q);
}

float eng_bf16_to_f32(uint16_t h)
{
    uint32_t bits = (uint32_t)h << 16;
    float f;
    memcpy(&f, &bits, sizeof(f));
    return f;
}

/* Round to nearest even; NaN stays a quiet NaN (ggml does the same). */
static uint16_t f32_to_bf16(float f)
{
    uint32_t x;
    memcpy(&x, &f, sizeof(x));
    if ((x & 0x7fffffffu) > 0x7f800000u)
        return (uint16_t)((x >> 16) | 64);
    return (uint16_t)((x + (0x7fffu + ((x >> 16) & 1))) >> 16);
}

void eng_f16_to_f32_row(const uint16_t *src, float *dst, size_t n)
{
    for (size_t i = 0; i < n; i++)
        dst[i] = eng_f16_to_f32(src[i]);
}

void eng_f32_to_f16_row(const float *src, uint16_t *dst, size_t n)
{
    for (size_t i = 0; i < n; i++)
        dst[i] = eng_f32_to_f16(src[i]);
}

/* Multi-byte fields of blocks may be unaligned: read and write with memcpy. */
static float ld_f16(const uint8_t *p)
{
    uint16_t h;
    memcpy(&h, p, 2);
    return eng_f16_to_f32(h);
}

static void st_f16(uint8_t *p, float f)
{
    uint16_t h = eng_f32_to_f16(f);
    memcpy(p, &h, 2);
}

/* ---- dequantization, one block at a time ---- */

static void dq_q4_0(const uint8_t *b, float *y)
{
    const float d = ld_f16(b);
    const uint8_t *qs = b + 2;
    for (int j = 0; j < 16; j++) {
        const int x0 = (qs[j] & 0x0f) - 8;
        const int x1 = (qs[j] >> 4) - 8;
        y[j] = x0 * d;
        y[j + 16] = x1 * d;
    }
}

static void dq_q4_1(const uint8_t *b, float *y)
{
    const float d = ld_f16(b);
    const float m = ld_f16(b + 2);
    const uint8_t *qs = b + 4;
    for (int j = 0; j < 16; j++) {
        const int x0 = qs[j] & 0x0f;
        const int x1 = qs[j] >> 4;
        y[j] = x0 * d + m;
        y[j + 16] = x1 * d + m;
    }
}

static void dq_q5_0(const uint8_t *b, float *y)
{
    const float d = ld_f16(b);
    uint32_t qh;
    memcpy(&qh, b + 2, 4);
    const uint8_t *qs = b + 6;
    for (int j = 0; j < 16; j++) {
        const uint8_t xh0 = (uint8_t)(((qh >> j) << 4) & 0x10);
        const uint8_t xh1 = (uint8_t)((qh >> (j + 12)) & 0x10);
        const int x0 = ((qs[j] & 0x0f) | xh0) - 16;
        const int x1 = ((qs[j] >> 4) | xh1) - 16;
        y[j] = x0 * d;
        y[j + 16] = x1 * d;
    }
}

static void dq_q5_1(const uint8_t *b, float *y)
{
    const float d = ld_f16(b);
    const float m = ld_f16(b + 2);
    uint32_t qh;
    memcpy(&qh, b + 4, 4);
    const uint8_t *qs = b + 8;
    for (int j = 0; j < 16; j++) {
        const uint8_t xh0 = (uint8_t)(((qh >> j) << 4) & 0x10);
        const uint8_t xh1 = (uint8_t)((qh >> (j + 12)) & 0x10);
        const int x0 = (qs[j] & 0x0f) | xh0;
        const int x1 = (qs[j] >> 4) | xh1;
        y[j] = x0 * d + m;
        y[j + 16] = x1 * d + m;
    }
}

static void dq_q8_0(const uint8_t *b, float *y)
{
    const float d = ld_f16(b);
    const int8_t *qs = (const int8_t *)(b + 2);
    for (int j = 0; j < 32; j++)
        y[j] = qs[j] * d;
}

/* The 8 six-bit (scale, min) pairs of Q4_K/Q5_K (backend.h's reader) */
static void k4_scale_min(int j, const uint8_t *q, uint8_t *sc, uint8_t *m)
{
    eng_q4k_scale_min(q, j, sc, m);
}

static void dq_q4_k(const uint8_t *b, float *y)
{
    const float d = ld_f16(b);
    const float min = ld_f16(b + 2);
    const uint8_t *scales = b + 4;
    const uint8_t *q = b + 16;
    int is = 0;
    for (int j = 0; j < 256; j += 64) {
        uint8_t sc, m;
        k4_scale_min(is + 0, scales, &sc, &m);
        const float d1 = d * sc;
        const float m1 = min * m;
        k4_scale_min(is + 1, scales, &sc, &m);
        const float d2 = d * sc;
        const float m2 = min * m;
        for (int l = 0; l < 32; l++)
            *y++ = d1 * (q[l] & 0x0f) - m1;
        for (int l = 0; l < 32; l++)
            *y++ = d2 * (q[l] >> 4) - m2;
        q += 32;
        is += 2;
    }
}

static void dq_q5_k(const uint8_t *b, float *y)
{
    const float d = ld_f16(b);
    const float min = ld_f16(b + 2);
    const uint8_t *scales = b + 4;
    const uint8_t *qh = b + 16;
    const uint8_t *ql = b + 48;
    int is = 0;
    uint8_t u1 = 1, u2 = 2;
    for (int j = 0; j < 256; j += 64) {
        uint8_t sc, m;
        k4_scale_min(is + 0, scales, &sc, &m);
        const float d1 = d * sc;
        const float m1 = min * m;
        k4_scale_min(is + 1, scales, &sc, &m);
        const float d2 = d * sc;
        const float m2 = min * m;
        for (int l = 0; l < 32; l++)
            *y++ = d1 * ((ql[l] & 0x0f) + (qh[l] & u1 ? 16 : 0)) - m1;
        for (int l = 0; l < 32; l++)
            *y++ = d2 * ((ql[l] >> 4) + (qh[l] & u2 ? 16 : 0)) - m2;
        ql += 32;
        is += 2;
        u1 = (uint8_t)(u1 << 2);
        u2 = (uint8_t)(u2 << 2);
    }
}

static void dq_q6_k(const uint8_t *b, float *y)
{
    const uint8_t *ql = b;
    const uint8_t *qh = b + 128;
    const int8_t *sc = (const int8_t *)(b + 192);
    const float d = ld_f16(b + 208);
    for (int n = 0; n < 256; n += 128) {
        for (int l = 0; l < 32; l++) {
            const int is = l / 16;
            const int8_t q1 = (int8_t)((ql[l + 0] & 0x0f) | (((qh[l] >> 0) & 3) << 4)) - 32;
            const int8_t q2 = (int8_t)((ql[l + 32] & 0x0f) | (((qh[l] >> 2) & 3) << 4)) - 32;
            const int8_t q3 = (int8_t)((ql[l + 0] >> 4) | (((qh[l] >> 4) & 3) << 4)) - 32;
            const int8_t q4 = (int8_t)((ql[l + 32] >> 4) | (((qh[l] >> 6) & 3) << 4)) - 32;
            y[l + 0] = d * sc[is + 0] * q1;
            y[l + 32] = d * sc[is + 2] * q2;
            y[l + 64] = d * sc[is + 4] * q3;
            y[l + 96] = d * sc[is + 6] * q4;
        }
        y += 128;
        ql += 64;
        qh += 32;
        sc += 8;
    }
}

/* Q2_K: x = d * sc * q - dmin * m over 16 sub-blocks of 16, q in [0, 3]. */
static void dq_q2_k(const uint8_t *b, float *y)
{
    const uint8_t *scales = b;
    const uint8_t *q = b + 16;
    const float d = ld_f16(b + 80);
    const float min = ld_f16(b + 82);
    int is = 0;
    for (int n = 0; n < 256; n += 128) {
        for (int shift = 0; shift < 8; shift += 2) {
            for (int h = 0; h < 2; h++) {
                const uint8_t sc = scales[is++];
                const float dl = d * (float)(sc & 0x0f);
                const float ml = min * (float)(sc >> 4);
                for (int l = 0; l < 16; l++)
                    *y++ = dl * (float)((q[16 * h + l] >> shift) & 3) - ml;
            }
        }
        q += 32;
    }
}

/* The 16 six-bit scales of Q3_K: scale s has its low 4 bits in byte s % 8
 * (low nibble for s < 8, high for s >= 8) and its top 2 bits at bit
 * 2 * (s / 4) of byte 8 + s % 4. Stored with a bias of 32. */
static int q3k_scale(const uint8_t *p, int s)
{
    const int lo = s < 8 ? p[s] & 0x0f : p[s - 8] >> 4;
    const int hi = (p[8 + s % 4] >> (2 * (s / 4))) & 3;
    return (lo | (hi << 4)) - 32;
}

/* Q3_K: x = d * (sc - 32) * q over 16 sub-blocks of 16, q in [-4, 3]. */
static void dq_q3_k(const uint8_t *b, float *y)
{
    const uint8_t *hm = b;
    const uint8_t *q = b + 32;
    const uint8_t *scales = b + 96;
    const float d_all = ld_f16(b + 108);
    int is = 0;
    uint8_t m = 1;
    for (int n = 0; n < 256; n += 128) {
        for (int shift = 0; shift < 8; shift += 2) {
            for (int h = 0; h < 2; h++) {
                const float dl = d_all * (float)q3k_scale(scales, is++);
                for (int l = 0; l < 16; l++) {
                    const int k = 16 * h + l;
                    *y++ = dl * (float)(((q[k] >> shift) & 3) - ((hm[k] & m) ? 0 : 4));
                }
            }
            m = (uint8_t)(m << 1);
        }
        q += 32;
    }
}

/* The 16 non-uniform levels of IQ4_NL and IQ4_XS (ggml's kvalues_iq4nl). */
static const int8_t iq4_levels[16] = { -127, -104, -83, -65, -49, -35, -22, -10,
                                       1,    13,   25,  38,  53,  69,  89,  113 };

static void dq_iq4_nl(const uint8_t *b, float *y)
{
    const float d = ld_f16(b);
    const uint8_t *qs = b + 2;
    for (int j = 0; j < 16; j++) {
        y[j] = d * (float)iq4_levels[qs[j] & 0x0f];
        y[j + 16] = d * (float)iq4_levels[qs[j] >> 4];
    }
}

/* IQ4_XS: IQ4_NL's levels under a 6-bit scale (bias 32) per 32 elements:
 * low 4 bits in the nibbles of scales_l, top 2 bits in scales_h. */
static void dq_iq4_xs(const uint8_t *b, float *y)
{
    const float d = ld_f16(b);
    const unsigned scales_h = (unsigned)b[2] | ((unsigned)b[3] << 8);
    const uint8_t *scales_l = b + 4;
    const uint8_t *qs = b + 8;
    for (int ib = 0; ib < 8; ib++) {
        const int ls = ((scales_l[ib / 2] >> (4 * (ib % 2))) & 0x0f) | (((scales_h >> (2 * ib)) & 3) << 4);
        const float dl = d * (float)(ls - 32);
        for (int j = 0; j < 16; j++) {
            y[j] = dl * (float)iq4_levels[qs[j] & 0x0f];
            y[j + 16] = dl * (float)iq4_levels[qs[j] >> 4];
        }
        y += 32;
        qs += 16;
    }
}

/* MXFP4: its levels and scale (eng_mxfp4_levels, eng_e8m0_half) are
 * backend.h's, which the CPU's kernels share; code 8 is -0, which ggml
 * stores as 0, and e 255 (NaN in E8M0) 2^127, as in ggml. */

static void dq_mxfp4(const uint8_t *b, float *y)
{
    const float d = eng_e8m0_half(b[0]);
    const uint8_t *qs = b + 1;
    for (int j = 0; j < 16; j++) {
        y[j] = (float)eng_mxfp4_levels[qs[j] & 0x0f] * d;
        y[j + 16] = (float)eng_mxfp4_levels[qs[j] >> 4] * d;
    }
}

/* MXFP4 blocks as Q8_0 blocks, value for value: d the f16 2^(e - 128)
 * (exact for e 104..143, 2^-24 to 2^15), the codes the doubled levels;
 * a block whose scale f16 cannot hold is quantized from its values (no
 * trained weights are that small or large). */
int eng_mxfp4_to_q8_0(const void *src, void *dst, size_t n)
{
    if (n % 32)
        return -EINVAL;
    const uint8_t *b = src;
    uint8_t *q = dst;
    for (size_t k = 0; k < n / 32; k++, b += 17, q += 34) {
        const float d = eng_e8m0_half(b[0]);
        const uint16_t h = eng_f32_to_f16(d);
        if (eng_f16_to_f32(h) != d) {
            float y[32];
            dq_mxfp4(b, y);
            eng_quant_row(GGML_TYPE_Q8_0, y, q, 32);
            continue;
        }
        memcpy(q, &h, 2);
        for (int j = 0; j < 16; j++) {
            q[2 + j] = (uint8_t)eng_mxfp4_levels[b[1 + j] & 0x0f];
            q[2 + j + 16] = (uint8_t)eng_mxfp4_levels[b[1 + j] >> 4];
        }
    }
    return 0;
}

typedef void (*dq_fn)(const uint8_t *block, float *y);

static dq_fn dq_block_fn(uint32_t type)
{
    switch (type) {
    case GGML_TYPE_Q4_0: return dq_q4_0;
    case GGML_TYPE_Q4_1: return dq_q4_1;
    case GGML_TYPE_Q5_0: return dq_q5_0;
    case GGML_TYPE_Q5_1: return dq_q5_1;
    case GGML_TYPE_Q8_0: return dq_q8_0;
    case GGML_TYPE_Q4_K: return dq_q4_k;
    case GGML_TYPE_Q5_K: return dq_q5_k;
    case GGML_TYPE_Q6_K: return dq_q6_k;
    case GGML_TYPE_Q2_K: return dq_q2_k;
    case GGML_TYPE_Q3_K: return dq_q3_k;
    case GGML_TYPE_IQ4_NL: return dq_iq4_nl;
    case GGML_TYPE_IQ4_XS: return dq_iq4_xs;
    case GGML_TYPE_MXFP4: return dq_mxfp4;
    default: return NULL;
    }
}

static int check_row(uint32_t type, size_t n)
{
    if (!ggml_type_known(type))
        return -EINVAL;
    size_t be = ggml_type_block_elems(type);
    if (be == 0 || n % be != 0)
        return -EINVAL;
    return 0;
}

int eng_dequant_row_f32(uint32_t type, const void *src, float *dst, size_t n)
{
    int r = check_row(type, n);
    if (r < 0)
        return r;
    const uint8_t *s = src;
    switch (type) {
    case GGML_TYPE_F32:
        memcpy(dst, src, n * sizeof(float));
        return 0;
    case GGML_TYPE_F16:
        for (size_t i = 0; i < n; i++) {
            uint16_t h;
            memcpy(&h, s + 2 * i, 2);
            dst[i] = eng_f16_to_f32(h);
        }
        return 0;
    case GGML_TYPE_BF16:
        for (size_t i = 0; i < n; i++) {
            uint16_t h;
            memcpy(&h, s + 2 * i, 2);
            dst[i] = eng_bf16_to_f32(h);
        }
        return 0;
    default: {
        dq_fn fn = dq_block_fn(type);
        if (!fn)
            return -EINVAL;
        size_t be = ggml_type_block_elems(type), bb = ggml_type_block_bytes(type);
        for (size_t i = 0; i < n / be; i++)
            fn(s + i * bb, dst + i * be);
        return 0;
    }
    }
}

int eng_dequant_row_f16(uint32_t type, const void *src, uint16_t *dst, size_t n)
{
    int r = check_row(type, n);
    if (r < 0)
        return r;
    const uint8_t *s = src;
    if (type == GGML_TYPE_F16) {
        memcpy(dst, src, n * sizeof(uint16_t));
        return 0;
    }
    if (type == GGML_TYPE_F32 || type == GGML_TYPE_BF16) {
        for (size_t i = 0; i < n; i++) {
            float f;
            if (type == GGML_TYPE_F32) {
                memcpy(&f, s + 4 * i, 4);
            } else {
                uint16_t h;
                memcpy(&h, s + 2 * i, 2);
                f = eng_bf16_to_f32(h);
            }
            dst[i] = eng_f32_to_f16(f);
        }
        return 0;
    }
    dq_fn fn = dq_block_fn(type);
    if (!fn)
        return -EINVAL;
    size_t be = ggml_type_block_elems(type), bb = ggml_type_block_bytes(type);
    float tmp[256]; /* largest block */
    for (size_t i = 0; i < n / be; i++) {
        fn(s + i * bb, tmp);
        for (size_t j = 0; j < be; j++)
            dst[i * be + j] = eng_f32_to_f16(tmp[j]);
    }
    return 0;
}

/* ---- quantization, one block at a time ---- */

static float clampf(float v, float lo, float hi)
{
    return v < lo ? lo : v > hi ? hi : v;
}

/* The value of largest magnitude, sign kept: the symmetric 4/5-bit formats
 * map it to the most negative code so that the full range is used. */
static float signed_absmax(const float *x, int n)
{
    float amax = 0.0f, max = 0.0f;
    for (int j = 0; j < n; j++) {
        if (fabsf(x[j]) > amax) {
            amax = fabsf(x[j]);
            max = x[j];
        }
    }
    return max;
}

/* Loading a 4- or 5-bit file with Q8_0 matrices (the daemon's default)
 * quantizes every weight through here, so it must not call libm per
 * element: fmaxf and lrintf were calls (the compiler may not inline them
 * under C's errno and NaN rules), most of such a load's time. The max is a
 * compare that passes over NaN as fmaxf does; the rounding adds and
 * subtracts 1.5 * 2^23, which leaves a float of magnitude <= 127 no
 * fraction bits, rounded to nearest even as lrintf does in the default
 * mode. NaN gives code 0, as lrintf's out-of-range result did. */
static void q_q8_0(const float *x, uint8_t *b)
{
    float amax = 0.0f;
    for (int j = 0; j < 32; j++) {
        const float a = fabsf(x[j]);
        amax = a > amax ? a : amax;
    }
    const float d = amax / 127.0f;
    const float id = d != 0.0f ? 1.0f / d : 0.0f;
    st_f16(b, d);
    int8_t *qs = (int8_t *)(b + 2);
    for (int j = 0; j < 32; j++) {
        const float v = clampf(x[j] * id, -127.0f, 127.0f);
        qs[j] = v == v ? (int8_t)(int)((v + 12582912.0f) - 12582912.0f) : 0;
    }
}

static void q_q4_0(const float *x, uint8_t *b)
{
    const float max = signed_absmax(x, 32);
    const float d = max / -8.0f;
    const float id = d != 0.0f ? 1.0f / d : 0.0f;
    st_f16(b, d);
    uint8_t *qs = b + 2;
    for (int j = 0; j < 16; j++) {
        int q0 = (int)clampf(x[j] * id + 8.5f, 0.0f, 15.0f);
        int q1 = (int)clampf(x[j + 16] * id + 8.5f, 0.0f, 15.0f);
        qs[j] = (uint8_t)(q0 | (q1 << 4));
    }
}

static void q_q4_1(const float *x, uint8_t *b)
{
    float min = x[0], max = x[0];
    for (int j = 1; j < 32; j++) {
        min = fminf(min, x[j]);
        max = fmaxf(max, x[j]);
    }
    const float d = (max - min) / 15.0f;
    const float id = d != 0.0f ? 1.0f / d : 0.0f;
    st_f16(b, d);
    st_f16(b + 2, min);
    uint8_t *qs = b + 4;
    for (int j = 0; j < 16; j++) {
        int q0 = (int)clampf((x[j] - min) * id + 0.5f, 0.0f, 15.0f);
        int q1 = (int)clampf((x[j + 16] - min) * id + 0.5f, 0.0f, 15.0f);
        qs[j] = (uint8_t)(q0 | (q1 << 4));
    }
}

static void q_q5_0(const float *x, uint8_t *b)
{
    const float max = signed_absmax(x, 32);
    const float d = max / -16.0f;
    const float id = d != 0.0f ? 1.0f / d : 0.0f;
    st_f16(b, d);
    uint32_t qh = 0;
    uint8_t *qs = b + 6;
    for (int j = 0; j < 16; j++) {
        int q0 = (int)clampf(x[j] * id + 16.5f, 0.0f, 31.0f);
        int q1 = (int)clampf(x[j + 16] * id + 16.5f, 0.0f, 31.0f);
        qs[j] = (uint8_t)((q0 & 0x0f) | ((q1 & 0x0f) << 4));
        qh |= (uint32_t)((q0 >> 4) & 1) << j;
        qh |= (uint32_t)((q1 >> 4) & 1) << (j + 16);
    }
    memcpy(b + 2, &qh, 4);
}

static void q_q5_1(const float *x, uint8_t *b)
{
    float min = x[0], max = x[0];
    for (int j = 1; j < 32; j++) {
        min = fminf(min, x[j]);
        max = fmaxf(max, x[j]);
    }
    const float d = (max - min) / 31.0f;
    const float id = d != 0.0f ? 1.0f / d : 0.0f;
    st_f16(b, d);
    st_f16(b + 2, min);
    uint32_t qh = 0;
    uint8_t *qs = b + 8;
    for (int j = 0; j < 16; j++) {
        int q0 = (int)clampf((x[j] - min) * id + 0.5f, 0.0f, 31.0f);
        int q1 = (int)clampf((x[j + 16] - min) * id + 0.5f, 0.0f, 31.0f);
        qs[j] = (uint8_t)((q0 & 0x0f) | ((q1 & 0x0f) << 4));
        qh |= (uint32_t)((q0 >> 4) & 1) << j;
        qh |= (uint32_t)((q1 >> 4) & 1) << (j + 16);
    }
    memcpy(b + 4, &qh, 4);
}

/* Q2_K / Q4_K / Q5_K: per sub-block (nsub of len elements) an affine
 * (scale, min) pair with x ~= q * scale - min, q in [0, nmax]; the pairs
 * are then themselves quantized to [0, smax] (6 bits for Q4_K/Q5_K, 4 for
 * Q2_K) against the block's d and dmin. Values are coded against the
 * quantized scales so the rounding error stays bounded. */
static void k_scales(const float *x, int nsub, int len, int nmax, int smax, uint8_t *sc, uint8_t *m,
                     float *ret_d, float *ret_dmin)
{
    float scale[16], min[16], max_scale = 0.0f, max_min = 0.0f;
    for (int s = 0; s < nsub; s++) {
        float lo = x[len * s], hi = x[len * s];
        for (int l = 1; l < len; l++) {
            lo = fminf(lo, x[len * s + l]);
            hi = fmaxf(hi, x[len * s + l]);
        }
        if (lo > 0.0f)
            lo = 0.0f; /* the min is stored unsigned (x = q*sc - m, m >= 0) */
        scale[s] = (hi - lo) / (float)nmax;
        min[s] = -lo;
        max_scale = fmaxf(max_scale, scale[s]);
        max_min = fmaxf(max_min, min[s]);
    }
    /* Round the block scales up a little so the codes never exceed smax
     * after the f16 rounding of d and dmin. */
    float d = eng_f16_to_f32(eng_f32_to_f16(max_scale / (float)smax));
    float dmin = eng_f16_to_f32(eng_f32_to_f16(max_min / (float)smax));
    for (int s = 0; s < nsub; s++) {
        int a = d > 0.0f ? (int)lrintf(scale[s] / d) : 0;
        int b = dmin > 0.0f ? (int)lrintf(min[s] / dmin) : 0;
        /* a scale rounded down would clip the top of the sub-block: round up */
        if (d > 0.0f && (float)a * d < scale[s] && a < smax)
            a++;
        if (dmin > 0.0f && (float)b * dmin < min[s] && b < smax)
            b++;
        sc[s] = (uint8_t)(a > smax ? smax : a);
        m[s] = (uint8_t)(b > smax ? smax : b);
    }
    *ret_d = d;
    *ret_dmin = dmin;
}

static void k_pack_scales(const uint8_t sc[8], const uint8_t m[8], uint8_t *q)
{
    for (int j = 0; j < 4; j++) {
        q[j] = (uint8_t)((sc[j] & 63) | ((sc[j + 4] >> 4) << 6));
        q[j + 4] = (uint8_t)((m[j] & 63) | ((m[j + 4] >> 4) << 6));
        q[j + 8] = (uint8_t)((sc[j + 4] & 0x0f) | ((m[j + 4] & 0x0f) << 4));
    }
}

static int k_code(float x, float d, float dmin, uint8_t sc, uint8_t m, int nmax)
{
    const float ds = d * sc;
    if (ds == 0.0f)
        return 0;
    return (int)clampf(lrintf((x + dmin * m) / ds), 0.0f, (float)nmax);
}

static void q_q4_k(const float *x, uint8_t *b)
{
    uint8_t sc[8], m[8];
    float d, dmin;
    k_scales(x, 8, 32, 15, 63, sc, m, &d, &dmin);
    st_f16(b, d);
    st_f16(b + 2, dmin);
    k_pack_scales(sc, m, b + 4);
    uint8_t *q = b + 16;
    for (int c = 0; c < 4; c++) { /* 64-element chunks: two sub-blocks */
        for (int l = 0; l < 32; l++) {
            int lo = k_code(x[64 * c + l], d, dmin, sc[2 * c], m[2 * c], 15);
            int hi = k_code(x[64 * c + 32 + l], d, dmin, sc[2 * c + 1], m[2 * c + 1], 15);
            q[32 * c + l] = (uint8_t)(lo | (hi << 4));
        }
    }
}

static void q_q5_k(const float *x, uint8_t *b)
{
    uint8_t sc[8], m[8];
    float d, dmin;
    k_scales(x, 8, 32, 31, 63, sc, m, &d, &dmin);
    st_f16(b, d);
    st_f16(b + 2, dmin);
    k_pack_scales(sc, m, b + 4);
    uint8_t *qh = b + 16;
    uint8_t *ql = b + 48;
    memset(qh, 0, 32);
    for (int c = 0; c < 4; c++) {
        for (int l = 0; l < 32; l++) {
            int lo = k_code(x[64 * c + l], d, dmin, sc[2 * c], m[2 * c], 31);
            int hi = k_code(x[64 * c + 32 + l], d, dmin, sc[2 * c + 1], m[2 * c + 1], 31);
            ql[32 * c + l] = (uint8_t)((lo & 0x0f) | ((hi & 0x0f) << 4));
            qh[l] |= (uint8_t)(((lo >> 4) & 1) << (2 * c));
            qh[l] |= (uint8_t)(((hi >> 4) & 1) << (2 * c + 1));
        }
    }
}

/* Q6_K: 16 sub-blocks of 16 with a signed 8-bit scale each against d;
 * codes in [-32, 31]. Sub-block s covers elements 16s .. 16s+15. */
static void q_q6_k(const float *x, uint8_t *b)
{
    float scale[16], amax_scale = 0.0f;
    for (int s = 0; s < 16; s++) {
        float max = signed_absmax(x + 16 * s, 16);
        scale[s] = max / -32.0f;
        amax_scale = fmaxf(amax_scale, fabsf(scale[s]));
    }
    const float d = eng_f16_to_f32(eng_f32_to_f16(amax_scale / 127.0f));
    int8_t sc[16];
    for (int s = 0; s < 16; s++) {
        int v = d > 0.0f ? (int)lrintf(scale[s] / d) : 0;
        sc[s] = (int8_t)(v > 127 ? 127 : v < -127 ? -127 : v);
    }
    uint8_t *ql = b, *qh = b + 128;
    memcpy(b + 192, sc, 16);
    st_f16(b + 208, d);
    memset(ql, 0, 128);
    memset(qh, 0, 64);
    int code[256];
    for (int i = 0; i < 256; i++) {
        const float ds = d * sc[i / 16];
        int q = ds != 0.0f ? (int)lrintf(x[i] / ds) : 0;
        q = q < -32 ? -32 : q > 31 ? 31 : q;
        code[i] = q + 32;
    }
    for (int n = 0; n < 2; n++) {
        const int *c = code + 128 * n;
        uint8_t *l8 = ql + 64 * n, *h8 = qh + 32 * n;
        for (int l = 0; l < 32; l++) {
            l8[l] = (uint8_t)((c[l] & 0x0f) | ((c[l + 64] & 0x0f) << 4));
            l8[l + 32] = (uint8_t)((c[l + 32] & 0x0f) | ((c[l + 96] & 0x0f) << 4));
            h8[l] = (uint8_t)((c[l] >> 4) | ((c[l + 32] >> 4) << 2) | ((c[l + 64] >> 4) << 4) |
                              ((c[l + 96] >> 4) << 6));
        }
    }
}

/* Q2_K: 16 sub-blocks of 16, codes in [0, 3], 4-bit scale and min each. */
static void q_q2_k(const float *x, uint8_t *b)
{
    uint8_t sc[16], m[16];
    float d, dmin;
    k_scales(x, 16, 16, 3, 15, sc, m, &d, &dmin);
    for (int s = 0; s < 16; s++)
        b[s] = (uint8_t)(sc[s] | (m[s] << 4));
    uint8_t *q = b + 16;
    memset(q, 0, 64);
    for (int e = 0; e < 256; e++) {
        const int n = e / 128, j = (e % 128) / 32, l = e % 32, s = 8 * n + 2 * j + l / 16;
        q[32 * n + l] |= (uint8_t)(k_code(x[e], d, dmin, sc[s], m[s], 3) << (2 * j));
    }
    st_f16(b + 80, d);
    st_f16(b + 82, dmin);
}

/* Q3_K / IQ4_XS: per sub-block (nsub of len elements) a signed scale that
 * puts the element of largest magnitude on the code `lowest` (the most
 * negative one), quantized to [-32, 31] against the returned d (f16). */
static float signed_scales6(const float *x, int nsub, int len, float lowest, int *sc)
{
    float scale[16], amax_scale = 0.0f;
    for (int s = 0; s < nsub; s++) {
        scale[s] = signed_absmax(x + len * s, len) / lowest;
        amax_scale = fmaxf(amax_scale, fabsf(scale[s]));
    }
    const float d = eng_f16_to_f32(eng_f32_to_f16(amax_scale / 31.0f));
    for (int s = 0; s < nsub; s++) {
        const int v = d > 0.0f ? (int)lrintf(scale[s] / d) : 0;
        sc[s] = v > 31 ? 31 : v < -32 ? -32 : v;
    }
    return d;
}

/* Q3_K: 16 sub-blocks of 16 with a signed 6-bit scale each against d;
 * codes in [-4, 3]. */
static void q_q3_k(const float *x, uint8_t *b)
{
    int sc[16];
    const float d = signed_scales6(x, 16, 16, -4.0f, sc);
    uint8_t *hm = b, *q = b + 32, *p = b + 96;
    memset(b, 0, 108);
    for (int s = 0; s < 16; s++) {
        const int u = sc[s] + 32;
        p[s % 8] |= (uint8_t)((u & 0x0f) << (s < 8 ? 0 : 4));
        p[8 + s % 4] |= (uint8_t)((u >> 4) << (2 * (s / 4)));
    }
    for (int e = 0; e < 256; e++) {
        const int n = e / 128, j = (e % 128) / 32, l = e % 32, s = 8 * n + 2 * j + l / 16;
        const float ds = d * (float)sc[s];
        int c = ds != 0.0f ? (int)lrintf(x[e] / ds) : 0;
        c = (c < -4 ? -4 : c > 3 ? 3 : c) + 4;
        q[32 * n + l] |= (uint8_t)((c & 3) << (2 * j));
        hm[l] |= (uint8_t)((c >> 2) << (4 * n + j));
    }
    st_f16(b + 108, d);
}

/* The IQ4 level nearest x / d (level 8, value 1, when d is 0). */
static int iq4_code(float x, float d)
{
    if (d == 0.0f)
        return 8;
    const float v = x / d;
    int best = 0;
    for (int k = 1; k < 16; k++)
        if (fabsf(v - (float)iq4_levels[k]) < fabsf(v - (float)iq4_levels[best]))
            best = k;
    return best;
}

/* IQ4_NL: the element of largest magnitude lands on level 0 (-127). */
static void q_iq4_nl(const float *x, uint8_t *b)
{
    const float d = eng_f16_to_f32(eng_f32_to_f16(signed_absmax(x, 32) / -127.0f));
    st_f16(b, d);
    for (int j = 0; j < 16; j++)
        b[2 + j] = (uint8_t)(iq4_code(x[j], d) | (iq4_code(x[j + 16], d) << 4));
}

/* IQ4_XS: as IQ4_NL per 32 elements, the scales 6-bit (bias 32) against d. */
static void q_iq4_xs(const float *x, uint8_t *b)
{
    int sc[8];
    const float d = signed_scales6(x, 8, 32, -127.0f, sc);
    st_f16(b, d);
    unsigned scales_h = 0;
    memset(b + 4, 0, 4);
    for (int s = 0; s < 8; s++) {
        const int u = sc[s] + 32;
        b[4 + s / 2] |= (uint8_t)((u & 0x0f) << (4 * (s % 2)));
        scales_h |= (unsigned)(u >> 4) << (2 * s);
        const float dl = d * (float)sc[s];
        for (int j = 0; j < 16; j++)
            b[8 + 16 * s + j] = (uint8_t)(iq4_code(x[32 * s + j], dl) | (iq4_code(x[32 * s + j + 16], dl) << 4));
    }
    b[2] = (uint8_t)(scales_h & 0xff);
    b[3] = (uint8_t)(scales_h >> 8);
}

/* MXFP4 with ggml's scale (quantize_row_mxfp4_ref): d = 2^(floor(log2(amax))
 * - 3), which puts amax in [8d, 16d), so the top level 12d can clip the
 * largest elements by up to a quarter; every element then takes the level
 * nearest it, the first of equals (ggml's best_index_mxfp4), NaN level 0.
 * floor(log2(amax)) is read off amax's exponent bits: exact, where ggml's
 * log2f rounds up to the next integer for an amax within a few ulps below
 * a power of two (its e is then one more); and e is clamped to [0, 253]
 * where ggml's cast of it would overflow (amax below 2^-125, or infinite). */
static void q_mxfp4(const float *x, uint8_t *b)
{
    float amax = 0.0f;
    for (int j = 0; j < 32; j++)
        amax = fabsf(x[j]) > amax ? fabsf(x[j]) : amax;
    uint32_t bits;
    memcpy(&bits, &amax, sizeof(bits));
    const int be = (int)(bits >> 23); /* biased exponent: floor(log2(amax)) + 127 */
    const uint8_t e = (uint8_t)(be > 2 ? be - 2 : 0);
    const float d = eng_e8m0_half(e);
    b[0] = e;
    for (int j = 0; j < 32; j++) {
        int best = 0;
        float best_err = fabsf((float)eng_mxfp4_levels[0] * d - x[j]);
        for (int k = 1; k < 16; k++) {
            const float err = fabsf((float)eng_mxfp4_levels[k] * d - x[j]);
            if (err < best_err) {
                best = k;
                best_err = err;
            }
        }
        if (j < 16)
            b[1 + j] = (uint8_t)best;
        else
            b[1 + j - 16] |= (uint8_t)(best << 4);
    }
}

typedef void (*q_fn)(const float *x, uint8_t *block);

int eng_quant_row(uint32_t type, const float *src, void *dst, size_t n)
{
    int r = check_row(type, n);
    if (r < 0)
        return r;
    uint8_t *d = dst;
    q_fn fn;
    switch (type) {
    case GGML_TYPE_F32:
        memcpy(dst, src, n * sizeof(float));
        return 0;
    case GGML_TYPE_F16:
        for (size_t i = 0; i < n; i++) {
            uint16_t h = eng_f32_to_f16(src[i]);
            memcpy(d + 2 * i, &h, 2);
        }
        return 0;
    case GGML_TYPE_BF16:
        for (size_t i = 0; i < n; i++) {
            uint16_t h = f32_to_bf16(src[i]);
            memcpy(d + 2 * i, &h, 2);
        }
        return 0;
    case GGML_TYPE_Q4_0: fn = q_q4_0; break;
    case GGML_TYPE_Q4_1: fn = q_q4_1; break;
    case GGML_TYPE_Q5_0: fn = q_q5_0; break;
    case GGML_TYPE_Q5_1: fn = q_q5_1; break;
    case GGML_TYPE_Q8_0: fn = q_q8_0; break;
    case GGML_TYPE_Q4_K: fn = q_q4_k; break;
    case GGML_TYPE_Q5_K: fn = q_q5_k; break;
    case GGML_TYPE_Q6_K: fn = q_q6_k; break;
    case GGML_TYPE_Q2_K: fn = q_q2_k; break;
    case GGML_TYPE_Q3_K: fn = q_q3_k; break;
    case GGML_TYPE_IQ4_NL: fn = q_iq4_nl; break;
    case GGML_TYPE_IQ4_XS: fn = q_iq4_xs; break;
    case GGML_TYPE_MXFP4: fn = q_mxfp4; break;
    default: return -ENOTSUP;
    }
    size_t be = ggml_type_block_elems(type), bb = ggml_type_block_bytes(type);
    for (size_t i = 0; i < n / be; i++)
        fn(src + i * be, d + i * bb);
    return 0;
}
