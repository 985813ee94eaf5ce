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
 * In the 32-element formats byte j holds element j (low nibble) and element
 * j + 16 (high nibble).
 */
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

/* The 8 six-bit (scale, min) pairs of Q4_K/Q5_K: pairs 0-3 in the low 6
 * bits of bytes 0-7, pairs 4-7 split between bytes 8-11 (low 4 bits) and
 * the top 2 bits of bytes 0-7. */
static void k4_scale_min(int j, const uint8_t *q, uint8_t *sc, uint8_t *m)
{
    if (j < 4) {
        *sc = q[j] & 63;
        *m = q[j + 4] & 63;
    } else {
        *sc = (uint8_t)((q[j + 4] & 0x0f) | ((q[j - 4] >> 6) << 4));
        *m = (uint8_t)((q[j + 4] >> 4) | ((q[j] >> 6) << 4));
    }
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

/* Q4_K / Q5_K: per 32-element sub-block an affine (scale, min) pair with
 * x ~= q * scale - min, q in [0, nmax]; the 8 pairs are then themselves
 * quantized to 6 bits against the block's d and dmin. Values are coded
 * against the quantized scales so the rounding error stays bounded. */
static void k_scales(const float *x, int nmax, uint8_t sc6[8], uint8_t m6[8], float *ret_d,
                     float *ret_dmin)
{
    float scale[8], min[8], max_scale = 0.0f, max_min = 0.0f;
    for (int s = 0; s < 8; s++) {
        float lo = x[32 * s], hi = x[32 * s];
        for (int l = 1; l < 32; l++) {
            lo = fminf(lo, x[32 * s + l]);
            hi = fmaxf(hi, x[32 * s + l]);
        }
        if (lo > 0.0f)
            lo = 0.0f; /* the min is stored unsigned (x = q*sc - m, m >= 0) */
        scale[s] = (hi - lo) / (float)nmax;
        min[s] = -lo;
        max_scale = fmaxf(max_scale, scale[s]);
        max_min = fmaxf(max_min, min[s]);
    }
    /* Round the block scales up a little so the 6-bit codes never exceed 63
     * after the f16 rounding of d and dmin. */
    float d = eng_f16_to_f32(eng_f32_to_f16(max_scale / 63.0f));
    float dmin = eng_f16_to_f32(eng_f32_to_f16(max_min / 63.0f));
    for (int s = 0; s < 8; s++) {
        int a = d > 0.0f ? (int)lrintf(scale[s] / d) : 0;
        int b = dmin > 0.0f ? (int)lrintf(min[s] / dmin) : 0;
        /* a scale rounded down would clip the top of the sub-block: round up */
        if (d > 0.0f && (float)a * d < scale[s] && a < 63)
            a++;
        if (dmin > 0.0f && (float)b * dmin < min[s] && b < 63)
            b++;
        sc6[s] = (uint8_t)(a > 63 ? 63 : a);
        m6[s] = (uint8_t)(b > 63 ? 63 : b);
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
    k_scales(x, 15, sc, m, &d, &dmin);
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
    k_scales(x, 31, sc, m, &d, &dmin);
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
    default: return -ENOTSUP;
    }
    size_t be = ggml_type_block_elems(type), bb = ggml_type_block_bytes(type);
    for (size_t i = 0; i < n / be; i++)
        fn(src + i * be, d + i * bb);
    return 0;
}
