/* CPU backend: the reference every other backend is checked against, and
 * the decode path whose speed matters most.
 *
 * Kernel sets behind one small table: portable scalar C (any machine, or
 * ENG_CPU_SIMD=0 in the environment at creation), x86-64 AVX2+FMA+F16C,
 * and the same with AVX-512 VNNI for the sketch's integer dot products
 * (ENG_CPU_SIMD=avx2 keeps AVX2), chosen at run time with
 * __builtin_cpu_supports; on AArch64 (a Jetson's CPU), NEON.
 *
 * Decode (one token) is bound by memory bandwidth: every weight byte is read
 * once, so the GEMV kernels read several rows at a time (sharing the x loads
 * and giving the prefetcher several streams) and threads take contiguous row
 * ranges. The FFN reads each selected neuron's gate, up and down rows in one
 * pass and accumulates into a per-thread partial output.
 *
 * Prefill (several tokens) reuses each weight row across tokens: f16 rows
 * are converted once per block into per-thread f32 scratch, then a 4 rows x
 * 3 tokens register-blocked dot kernel runs over them; the FFN's down
 * projection is an outer-product kernel (6 tokens x 16 columns). With
 * AVX-512 the matrix products and the FFN's gate/up are outer products too
 * (32 rows packed k-major, 6 tokens at a time), the down projection
 * takes 32 columns, and silu and attention's softmax exponentials run 16
 * lanes at once (exp512).
 * Attention takes up to four query heads of one KV head together (a GQA
 * group shares its K and V rows, converted from f16 once for all of them)
 * and sums a block of keys' weighted V rows in registers.
 *
 * The ops return nothing, so they must not fail: all scratch is allocated
 * when the backend is created, and sizes beyond it take slower paths that
 * need none. Invalid arguments (negative sizes, row ids or slots out of
 * range) are not trusted: ids out of range give zero rows, slots out of
 * range contribute nothing.
 */
#include "backend.h"

#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "gguf.h"
#include "quants.h"
#include "threadpool.h"
#include "topk.h"

#if defined(__x86_64__) || defined(__i386__)
#define HAVE_X86 1
#include <immintrin.h>
#else
#define HAVE_X86 0
#endif
#if defined(__aarch64__)
#define HAVE_NEON 1
#include <arm_neon.h>
#else
#define HAVE_NEON 0
#endif

#define ALWAYS static inline __attribute__((always_inline))

/* Software prefetch distances (rows for GEMV, selected slots for the FFN,
 * sketch slots for the per-token pick's scores). */
#ifndef GEMV_PF_ROWS
#define GEMV_PF_ROWS 8
#endif
#ifndef PICK_PF_SLOTS
#define PICK_PF_SLOTS 4
#endif
/* ffn_pick's bound as a fraction of the last token's k-th best score
 * (pick_run), and the layers it remembers */
#ifndef PICK_HINT
#define PICK_HINT 0.7f
#endif
#define PICK_HINTS 128 /* 2^7: the hash's top 7 bits */
/* positions ahead whose K and V rows decode attention prefetches */
#ifndef ATT_PF
#define ATT_PF 16
#endif
#ifndef FFN_PF_SLOTS
#define FFN_PF_SLOTS 4
#endif

enum {
    MAX_THREADS = 512,
    /* Per-thread scratch: f16 weight blocks converted to f32, and the
     * decode FFN's partial output (n_embd floats). */
    SCRATCH_FLOATS = 64 * 1024,
    /* Rows per converted block in prefill, and the K chunk that fits. */
    BLOCK_ROWS = 16,
    BLOCK_K = SCRATCH_FLOATS / BLOCK_ROWS,
    /* FFN activations for prefill when the caller passes no act buffer. */
    ABUF_FLOATS = 1024 * 1024,
    /* The 8-bit prefill's x (kernels.q8x_row): codes of XQ_BYTES / K
     * tokens at a time, and their blocks' d and s in a quarter of that. */
    XQ_BYTES = 2 * 1024 * 1024,
    /* Attention: scores computed per block of positions. */
    ATT_BLOCK = 64,
    /* Q8_0 cache scores with q in 16 bits: up to this head_dim */
    QI_MAX = 256,
    /* Rope: cos/sin pairs computed per chunk. */
    ROPE_CHUNK = 128,
};

/* ---- f16 <-> f32, scalar ---------------------------------------------- */

#if defined(__aarch64__)
/* The hardware's conversions (fcvt; exact both ways, round to nearest
 * even, as the NEON set's fcvtl/fcvtn): the portable ones below branch on
 * every element, which keeps the compiler from vectorizing the scalar
 * kernels' loops that have no sums. */
static inline float h2f(uint16_t h)
{
    __fp16 x;
    memcpy(&x, &h, 2);
    return (float)x;
}

static inline uint16_t f2h(float f)
{
    __fp16 x = (__fp16)f;
    uint16_t h;
    memcpy(&h, &x, 2);
    return h;
}
#else
static inline float h2f(uint16_t h)
{
    uint32_t sign = (uint32_t)(h & 0x8000) << 16;
    uint32_t exp = (h >> 10) & 0x1f, man = h & 0x3ff, bits;
    if (exp == 0) {
        float f = (float)man * 0x1p-24f; /* zero or subnormal, exact */
        memcpy(&bits, &f, 4);
        bits |= sign;
    } else if (exp == 31) {
        bits = sign | 0x7f800000u | (man << 13);
    } else {
        bits = sign | ((exp + 112) << 23) | (man << 13);
    }
    float f;
    memcpy(&f, &bits, 4);
    return f;
}

/* Round to nearest even, NaN stays NaN (quiet, top payload bits kept), like
 * vcvtps2ph with _MM_FROUND_TO_NEAREST_INT, so both kernel sets agree bit
 * for bit. */
static inline uint16_t f2h(float f)
{
    uint32_t x;
    memcpy(&x, &f, 4);
    uint16_t sign = (uint16_t)((x >> 16) & 0x8000);
    uint32_t ax = x & 0x7fffffffu;
    if (ax >= 0x7f800000u) /* inf or NaN */
        return sign | 0x7c00 | (ax > 0x7f800000u ? (0x200 | ((ax >> 13) & 0x3ff)) : 0);
    if (ax >= 0x477ff000u) /* at or above the midpoint 65504..65536: inf */
        return sign | 0x7c00;
    if (ax < 0x38800000u) { /* below 2^-14: subnormal half */
        /* Adding 0.5 puts the half's quantum 2^-24 at the float's last
         * mantissa bit, so the float addition does the RNE rounding. */
        float a, t;
        memcpy(&a, &ax, 4);
        t = a + 0.5f;
        uint32_t tb;
        memcpy(&tb, &t, 4);
        return sign | (uint16_t)(tb - 0x3f000000u);
    }
    uint32_t odd = (ax >> 13) & 1;
    ax += 0xc8000fffu + odd; /* rebias exponent (-112 << 23) and round */
    return sign | (uint16_t)(ax >> 13);
}
#endif

/* The gate's activation, both as g * sigmoid(z): silu (z = g), or GELU's
 * tanh form, 0.5 g (1 + tanh(u)) = g * sigmoid(2 u), z = 2 u =
 * 1.5957691 (g + 0.044715 g^3); or ReLU (ENG_ACT_RELU_SQR: its slots' one
 * row as both g and u, relu(u) u = relu(u)^2). */
#define GELU_2U 1.5957691216057308f
#define GELU_2UC (1.5957691216057308f * 0.044715f)
/* Gemma 2's soft cap of a score or a logit */
static inline float softcap(float x, float cap)
{
    return cap * tanhf(x / cap);
}

static inline float gate_act(float g, eng_act act)
{
    if (act == ENG_ACT_RELU_SQR)
        return g > 0.0f ? g : 0.0f;
    const float z = act == ENG_ACT_GELU ? g * (GELU_2U + GELU_2UC * g * g) : g;
    return g / (1.0f + expf(-z));
}

/* ---- kernel table ------------------------------------------------------ */

typedef struct ffn_args ffn_args;

/* A token rounded to 8 bits in blocks of 32 for the sketch's dot products:
 * element i is q[i] * d[i / 32]; sum[b] = the sum of block b's q, so that a
 * Q4_0 block's offset of 8 comes off as 8 * sum, not per element. */
typedef struct q8_row {
    const int8_t *q;
    const float *d;
    const int32_t *sum;
    const struct q8_group *g; /* the same regrouped (kernels with groups) */
} q8_row;

/* A token in 16 bits per block of 32 (x16_prep): element i is q[i] *
 * d[i / 32]; for Q4_K rows per block of 256 in bytes (x16_prep_q4k),
 * with ns: per block of 256, minus the sums of h over each 16 elements,
 * then minus those of l (Q6_K's offset). */
typedef struct x16_row {
    const int16_t *q;
    const float *d;
    const int16_t *ns;
    /* where the set has x16_group_q4 and Q4_1 or Q4_0 rows read x~: the
     * same values regrouped for its four-block step (NULL: none) */
    const int16_t *g;
} x16_row;

/* x~ regrouped for 512-bit integer dot products, four blocks a group: the
 * elements 0-15 of the four blocks (where a code row keeps them in low
 * nibbles), then their elements 16-31 (the high nibbles); the products land
 * in 16 int32 lanes, lanes 4i..4i+3 for block i, so d and off (8 * the
 * block's sum, Q4_0's offset) are spread over those lanes. A last group
 * past nb blocks is zero. */
typedef struct q8_group {
    int8_t q[128];
    float d[16];
    int32_t off[16];
} q8_group;

typedef struct kernels {
    const char *name;
    /* y[r] = w[r] . x (+ bias[r]) for r in [r0, r1). */
    void (*gemv)(const void *w, bool f16, long cols, const float *x, const float *bias,
                 float *y, long r0, long r1);
    /* The same over rows of cols / 32 Q8_0 blocks. */
    void (*gemv_q8)(const eng_q8_block *w, long cols, const float *x, const float *bias,
                    float *y, long r0, long r1);
    /* The same over rows of cols / 256 Q4_K blocks; xs = x_sums32(x). */
    void (*gemv_q4k)(const eng_q4k_block *w, long cols, const float *x, const float *xs,
                     const float *bias, float *y, long r0, long r1);
    /* Where a set has them (else NULL): x16_prep rounds x [n] (n a multiple
     * of 32) to 16 bits per block of 32, x = q[i] * d[i / 32]; gemv_q8_x16
     * is gemv_q8 against that, by integer multiply-adds. */
    void (*x16_prep)(const float *x, long n, int16_t *q, float *d);
    void (*gemv_q8_x16)(const eng_q8_block *w, long cols, const x16_row *x,
                        const float *bias, float *y, long r0, long r1);
    /* Where a set has them (else NULL): x16_prep_q4k rounds x [n] (n a
     * multiple of 256) to 16 bits per block of 256, x = q[i] * d[i / 256],
     * each q held as two signed bytes (v_x16_prep_q4k: q as 2n bytes, ns
     * n / 8 int16 as x16_row has them);
     * gemv_q4k_x16 is gemv_q4k against that, by integer multiply-adds (xs:
     * the exact x's sums, for the mins). */
    void (*x16_prep_q4k)(const float *x, long n, int16_t *q, float *d, int16_t *ns);
    void (*gemv_q4k_x16)(const eng_q4k_block *w, long cols, const x16_row *x, const float *xs,
                         const float *bias, float *y, long r0, long r1);
    /* gemv over rows of cols / 256 Q6_K blocks; with gemv_q4k_x16 (else
     * NULL) the same against x in x16_prep_q4k's form */
    void (*gemv_q6k)(const eng_q6k_block *w, long cols, const float *x, const float *bias,
                     float *y, long r0, long r1);
    void (*gemv_q6k_x16)(const eng_q6k_block *w, long cols, const x16_row *x, const float *bias,
                         float *y, long r0, long r1);
    /* gemv_q4k and gemv_q4k_x16 over rows of cols / 256 Q5_K blocks (the
     * second NULL where gemv_q4k_x16 is) */
    void (*gemv_q5k)(const eng_q5k_block *w, long cols, const float *x, const float *xs,
                     const float *bias, float *y, long r0, long r1);
    void (*gemv_q5k_x16)(const eng_q5k_block *w, long cols, const x16_row *x, const float *xs,
                         const float *bias, float *y, long r0, long r1);
    /* gemv over rows of cols / 32 Q4_1 (Q4_0) blocks (xs = x_sums32(x));
     * where a set has x16_prep_q4 (else NULL: x16_prep's form, which Q4_1
     * and Q4_0 rows take on every x86 set, where Q8_0 rows take it only
     * with x16_prep), gemv_q41_x16 (gemv_q40_x16) the same against that */
    void (*gemv_q41)(const eng_q41_block *w, long cols, const float *x, const float *xs,
                     const float *bias, float *y, long r0, long r1);
    void (*gemv_q40)(const eng_q40_block *w, long cols, const float *x, const float *xs,
                     const float *bias, float *y, long r0, long r1);
    void (*x16_prep_q4)(const float *x, long n, int16_t *q, float *d);
    /* Where a set has it (else NULL): x~ of x16_prep_q4 [n] regrouped into
     * g [n / 128 * 128] for gemv_q41_x16's and gemv_q40_x16's four blocks a
     * step (x16_row.g); per group of four blocks, four runs of 32: elements
     * 2k, 2k + 16, 2k + 1 and 2k + 17 of block b at 8 b + k */
    void (*x16_group_q4)(const int16_t *q, long n, int16_t *g);
    void (*gemv_q41_x16)(const eng_q41_block *w, long cols, const x16_row *x, const float *xs,
                         const float *bias, float *y, long r0, long r1);
    void (*gemv_q40_x16)(const eng_q40_block *w, long cols, const x16_row *x, const float *xs,
                         const float *bias, float *y, long r0, long r1);
    /* gemv over rows of cols / 32 MXFP4 blocks (every set); where a set
     * has it (else NULL), the same against x16_prep's form (x16_prep, or
     * x16_prep_q4 where a set has only that: the same rounding) */
    void (*gemv_mxfp4)(const eng_mxfp4_block *w, long cols, const float *x, const float *bias,
                       float *y, long r0, long r1);
    void (*gemv_mxfp4_x16)(const eng_mxfp4_block *w, long cols, const x16_row *x,
                           const float *bias, float *y, long r0, long r1);
    /* dst[i][0..n) = f32(src[i][0..n)), rows of stride lds into stride ldd. */
    void (*cvt_rows)(const uint16_t *const *src, int nrows, long n, float *dst, long ldd);
    /* out[r][t] = w[r] . x[t] over n, 4 rows x 3 tokens. */
    void (*dot4x3)(const float *const *w, const float *const *x, long n, float out[4][3]);
    void (*dot4x3_h)(const uint16_t *const *w, const float *const *x, long n, float out[4][3]);
    /* Prefill by outer products, where a set has them (NULL: dot4x3):
     * pack32 writes rows w[0..nr) (nr <= 32; f16 or f32) over n columns
     * k-major into P [n][32] f32, rows past nr zero; mm6x32 gives
     * out[t][r] = sum_k P[k][r] x[t][k] for 6 tokens, the sum over k in
     * order. */
    void (*pack32)(const void *const *w, bool f16, int nr, long n, float *P);
    /* pack32 of rows of MXFP4 blocks (n a multiple of 32; the sets with
     * mm6x32) */
    void (*pack32_mxfp4)(const eng_mxfp4_block *const *w, int nr, long n, float *P);
    /* pack32 of rows of Q8_0, Q4_1 and Q4_0 blocks (n a multiple of 32), of
     * Q4_K, Q5_K and Q6_K blocks (n a multiple of 256) */
    void (*pack32_q8)(const eng_q8_block *const *w, int nr, long n, float *P);
    void (*pack32_q4k)(const eng_q4k_block *const *w, int nr, long n, float *P);
    void (*pack32_q5k)(const eng_q5k_block *const *w, int nr, long n, float *P);
    void (*pack32_q6k)(const eng_q6k_block *const *w, int nr, long n, float *P);
    void (*pack32_q41)(const eng_q41_block *const *w, int nr, long n, float *P);
    void (*pack32_q40)(const eng_q40_block *const *w, int nr, long n, float *P);
    void (*mm6x32)(const float *P, long n, const float *const *x, float out[6][32]);
    /* Prefill of Q8_0, Q4_1, Q4_0, Q4_K and Q5_K rows in 8 bits (sets with
     * VNNI; NULL: pack32 and mm6x32 in f32). q8x_row rounds a token's n
     * values (a multiple of 32) per block of 32 to codes q, q8_round's,
     * with ds[2 b] = d and ds[2 b + 1] = d * (the block's sum of codes); a
     * block holding a NaN or an infinity (or whose |x| sum overflows) gets
     * codes 0 and d = NaN, so it reaches y as it does in f32. pack32_u8
     * writes rows w[0..nr) over nb blocks of 32 as unsigned codes u with
     * w = d u + m (Q8_0: u = q + 128, m = -128 d; Q4_0: m = -8 d; Q4_K and
     * Q5_K, nb a multiple of 8: sub-block j of a block of 256 is a block
     * of 32 with d = d sc_j, m = -dmin m_j): P [nb][8][32][4], a block's
     * codes in groups of four interleaved by row (vpdpbusd's operand), and
     * D [nb][2][32], each block's d then m (rows past nr: zero). mm6x32_u8
     * gives out[t][r] = sum_b d_rb dx_tb (u_rb . q_tb) + m_rb s_tb, the sum
     * over b in order: the weights times x as rounded, for 6 tokens (xq[t],
     * xds[t] at the chunk's first block). Q6_K rows keep f32: two scales a
     * block of 32. */
    void (*q8x_row)(const float *x, long n, int8_t *q, float *ds);
    void (*pack32_u8)(const void *const *w, eng_dtype dt, int nr, long nb, uint8_t *P, float *D);
    void (*mm6x32_u8)(const uint8_t *P, const float *D, long nb, const int8_t *const *xq,
                      const float *const *xds, float out[6][32]);
    /* out[i] = act(in[2 i]) * in[2 i + 1], i < 16 (with mm6x32) */
    void (*act_mul16)(const float *in, float *out, eng_act act);
    /* Prefill attention, one query row and a block of 32 keys (with
     * mm6x32): s[0..32) their raw scores, the first nv valid (1..32);
     * online softmax state m, l and the output row o[0..hd) move on by
     * them, with v[j * hd ..] the keys' value rows in f32. */
    void (*att_pv32)(const float *s, int nv, float scale, float *m, float *l, float *o,
                     const float *v, long hd);
    /* Decode FFN over slots [j0, j1): acc += a_j * down[s_j]; act[j] = a_j. */
    void (*ffn_fused)(const ffn_args *a, long j0, long j1, float *acc);
    /* Its down half alone, the activations given: acc += av[j] * down[s_j]
     * over [j0, j1), in ffn_fused's order (ffn_top). */
    void (*ffn_axpy)(const ffn_args *a, const float *av, long j0, long j1, float *acc);
    /* y[t][c0..c0+nc) = sum_j A[t][j] * down[s_j][c0..), t < nt; scratch is
     * SCRATCH_FLOATS floats of the calling thread's. */
    void (*ffn_down)(const ffn_args *a, const float *A, long lda, float *y, long ldy, int nt,
                     long c0, long nc, float *scratch);
    /* out = g~ . x~, u~ . x~ for one slot's sketch w (its gate row, then
     * its up row: eng_sketch_row layout, nb blocks each), x~ the token in
     * 8 bits (q8_row). */
    void (*dot2_q4q8)(const uint8_t *w, const q8_row *x, long nb, float out[2]);
    bool q8_groups; /* dot2_q4q8 reads x->g */
    /* Scores of up to 4 queries (a GQA group, G of them) against nb f16 K
     * rows k_i = k + i * stride: s[i][g] = scale * q[g] . k_i over n, and
     * bm[g] = max_i s[i][g]; lanes g >= G repeat lane G - 1. For i < n_pf,
     * the K and V rows ATT_PF further on (k, v + (i + ATT_PF) * stride) are
     * prefetched. */
    void (*scores4_h)(const float *const *q, int G, const uint16_t *k, const uint16_t *v,
                      size_t stride, int nb, int n_pf, long n, float scale, float (*s)[4],
                      float *bm);
    /* o[g][0..n) += sum_i p[4 i + g] * v_i[0..n) for g < G, over nb f16 rows
     * v_i = v + i * stride; p holds 4 weights a row (zeros past G). */
    void (*pv4_h)(float *const *o, int G, const float *p, const uint16_t *v, size_t stride,
                  int nb, long n);
    /* scores4_h and pv4_h over rows of n / 32 Q8_0 blocks (a Q8_0 KV
     * cache; n a multiple of 32, stride in blocks): each block's dot
     * product times its d (the AVX2 and NEON sets' with q rounded to 16
     * bits a head), and p[4 i + g] * d times the block's codes. */
    void (*scores4_q8)(const float *const *q, int G, const eng_q8_block *k,
                       const eng_q8_block *v, size_t stride, int nb, int n_pf, long n,
                       float scale, float (*s)[4], float *bm);
    void (*pv4_q8)(float *const *o, int G, const float *p, const eng_q8_block *v, size_t stride,
                   int nb, long n);
    /* Attention's softmax weights of nb keys, up to 4 heads: s[i][g] =
     * e^(s[i][g] - m[g]) for g < G (0 for the others), added into l[g]. */
    void (*exp4)(float (*s)[4], int nb, const float *m, int G, float *l);
    void (*scale)(float *o, float s, long n);
    void (*add)(float *y, const float *x, long n);
    void (*to_f16)(const float *src, uint16_t *dst, long n);
    void (*to_f32)(const uint16_t *src, float *dst, long n);
    /* A row of n Q8_0, Q4_1, Q4_0, Q4_K, Q5_K or Q6_K weights as f32,
     * with the scalar dequantizers' rounding (NULL: those) */
    void (*dq_row)(eng_dtype dt, const void *src, long n, float *dst);
} kernels;

struct ffn_args {
    const eng_ffn_weights *w;
    const int32_t *sel;
    long n_sel;
    const float *x; /* [n_tokens][n_embd] */
    float *y;
    float *act;     /* [n_tokens][n_sel] */
    int n_tokens;
    /* decode in Q8_0, kernels with x16_prep, and in Q4_1 and Q4_0, kernels
     * with x16_prep_q4: x in 16 bits; in Q4_K, kernels with gemv_q4k_x16: x in
     * 16 bits as x16_prep_q4k holds it */
    const x16_row *x16;
    /* ffn_runs, ffn_top: slots (sel[j], or j) from n1 on are slot - n1
     * of w2 (the decode walks only; NULL: every slot is w's) */
    const eng_ffn_weights *w2;
    long n1;
    const float *xs; /* decode in Q4_K, Q5_K, Q4_1 and Q4_0: x_sums32(x) */
};

/* Slot of selected index j, or -1 when out of range (w's slots only). */
static inline long slot_of(const ffn_args *a, long j)
{
    long s = a->sel ? (long)a->sel[j] : j;
    return (s >= 0 && s < a->w->n_slots) ? s : -1;
}

/* The decode walk's rows of selected index j: its gate row (its up row
 * eng_ffn_up_offset bytes on: rs, or 0 for an un-gated slot, whose one
 * row is both), rows rs bytes each, and its down row, rd bytes; false
 * when its slot is out of range. */
static inline bool slot_rows(const ffn_args *a, long j, size_t rs, size_t rd, const char **gu,
                             const char **down)
{
    const eng_ffn_weights *w = a->w;
    long s = a->sel ? (long)a->sel[j] : j;
    if (a->w2 && s >= a->n1) {
        w = a->w2;
        s -= a->n1;
    }
    if (s < 0 || s >= w->n_slots)
        return false;
    *gu = (const char *)w->gate_up + (size_t)s * (size_t)eng_ffn_rows(w) * rs;
    *down = (const char *)w->down + (size_t)s * rd;
    return true;
}

static inline size_t dsize(bool f16)
{
    return f16 ? 2 : 4;
}

/* ---- scalar kernels ---------------------------------------------------- */

static inline float wval(const void *base, long i, bool f16)
{
    return f16 ? h2f(((const uint16_t *)base)[i]) : ((const float *)base)[i];
}

static float s_dot_w(const void *w, bool f16, const float *x, long n)
{
    float acc[4] = { 0, 0, 0, 0 };
    long k = 0;
    for (; k + 4 <= n; k += 4)
        for (int i = 0; i < 4; i++)
            acc[i] += wval(w, k + i, f16) * x[k + i];
    for (; k < n; k++)
        acc[0] += wval(w, k, f16) * x[k];
    return (acc[0] + acc[1]) + (acc[2] + acc[3]);
}

/* dst[0..n) of Q8_0 blocks (n a multiple of 32) */
static void q8_to_f32(const eng_q8_block *b, long n, float *dst)
{
    for (long i = 0; i < n / 32; i++) {
        const float d = h2f(b[i].d);
        for (int j = 0; j < 32; j++)
            dst[32 * i + j] = d * (float)b[i].q[j];
    }
}

/* A row of n weights of type dt (n whole blocks) as f32: how get_rows, the
 * unconverted prefill and the sketch read any type (k->to_f32 for f16) */
static void row_to_f32(const kernels *k, eng_dtype dt, const void *src, long n, float *dst)
{
    if (k->dq_row && (dt == ENG_DTYPE_Q8_0 || dt == ENG_DTYPE_Q4_1 || dt == ENG_DTYPE_Q4_0 ||
                      dt == ENG_DTYPE_Q4_K || dt == ENG_DTYPE_Q5_K || dt == ENG_DTYPE_Q6_K))
        k->dq_row(dt, src, n, dst);
    else if (dt == ENG_DTYPE_Q8_0)
        q8_to_f32(src, n, dst);
    else if (eng_dtype_block(dt) > 1) /* the K types, Q4_1, Q4_0 */
        eng_dequant_row_f32(ggml_type_of_dtype(dt), src, dst, (size_t)n);
    else if (dt == ENG_DTYPE_F16)
        k->to_f32(src, dst, n);
    else
        memcpy(dst, src, (size_t)n * sizeof(float));
}

/* A row of nb Q8_0 blocks times x: each block's products summed, then
 * scaled by its d, as the vector kernels do. */
static float s_dot_q8(const eng_q8_block *b, const float *x, long nb)
{
    float sum = 0.0f;
    for (long i = 0; i < nb; i++) {
        float s = 0.0f;
        for (int j = 0; j < 32; j++)
            s += (float)b[i].q[j] * x[32 * i + j];
        sum += h2f(b[i].d) * s;
    }
    return sum;
}

static void s_gemv_q8(const eng_q8_block *w, long cols, const float *x, const float *bias,
                      float *y, long r0, long r1)
{
    const long nb = cols / 32;
    for (long r = r0; r < r1; r++)
        y[r] = s_dot_q8(w + (size_t)r * nb, x, nb) + (bias ? bias[r] : 0.0f);
}

/* A Q4_K (or Q5_K) block's eight sub-block factors from its d, dmin and
 * scales: weight i of sub-block j is dsc[j] * q[i] - dmn[j]. */
static inline void qk_factors(uint16_t d16, uint16_t dmin16, const uint8_t *scales, float dsc[8],
                              float dmn[8])
{
    const float d = h2f(d16), dm = h2f(dmin16);
    for (int j = 0; j < 8; j++) {
        uint8_t sc, m;
        eng_q4k_scale_min(scales, j, &sc, &m);
        dsc[j] = d * (float)sc;
        dmn[j] = dm * (float)m;
    }
}

/* xs[j] = the sum of x's 32 elements of block j, j < n / 32: a Q4_K
 * sub-block's min comes off a dot product as dmn * xs, not per weight. */
static void x_sums32(const float *x, long n, float *xs)
{
    for (long j = 0; j < n / 32; j++) {
        float s = 0.0f;
        for (int i = 0; i < 32; i++)
            s += x[32 * j + i];
        xs[j] = s;
    }
}

/* One Q4_K (qh NULL) or Q5_K block times x (its 256; xs: its 8 sums,
 * x_sums32) added to *sum: per sub-block the 32 products of codes and x,
 * times dsc, less dmn times the sub-block's sum, as the vector kernels do;
 * a Q5_K code's fifth bit from qh. */
static inline void s_qk_block(const uint8_t *qs, const uint8_t *qh, const float *x,
                              const float *xs, const float dsc[8], const float dmn[8],
                              float *sum)
{
    for (int p = 0; p < 4; p++) {
        const uint8_t *q = qs + 32 * p;
        float lo = 0.0f, hi = 0.0f;
        for (int l = 0; l < 32; l++) {
            const int h = qh ? qh[l] >> 2 * p : 0;
            lo += (float)((q[l] & 15) | (h & 1) << 4) * x[64 * p + l];
            hi += (float)((q[l] >> 4) | (h & 2) << 3) * x[64 * p + 32 + l];
        }
        *sum += dsc[2 * p] * lo - dmn[2 * p] * xs[2 * p];
        *sum += dsc[2 * p + 1] * hi - dmn[2 * p + 1] * xs[2 * p + 1];
    }
}

/* A row of nb Q4_K blocks times x (xs: x_sums32) */
static float s_dot_q4k(const eng_q4k_block *b, const float *x, const float *xs, long nb)
{
    float sum = 0.0f;
    for (long i = 0; i < nb; i++, b++, x += 256, xs += 8) {
        float dsc[8], dmn[8];
        qk_factors(b->d, b->dmin, b->scales, dsc, dmn);
        s_qk_block(b->qs, NULL, x, xs, dsc, dmn, &sum);
    }
    return sum;
}

static void s_gemv_q4k(const eng_q4k_block *w, long cols, const float *x, const float *xs,
                       const float *bias, float *y, long r0, long r1)
{
    const long nb = cols / 256;
    for (long r = r0; r < r1; r++)
        y[r] = s_dot_q4k(w + (size_t)r * nb, x, xs, nb) + (bias ? bias[r] : 0.0f);
}

/* The same over Q5_K blocks. The reference for the vector kernels, and
 * the GEMV of the sets without them. */
static float s_dot_q5k(const eng_q5k_block *b, const float *x, const float *xs, long nb)
{
    float sum = 0.0f;
    for (long i = 0; i < nb; i++, b++, x += 256, xs += 8) {
        float dsc[8], dmn[8];
        qk_factors(b->d, b->dmin, b->scales, dsc, dmn);
        s_qk_block(b->qs, b->qh, x, xs, dsc, dmn, &sum);
    }
    return sum;
}

static void s_gemv_q5k(const eng_q5k_block *w, long cols, const float *x, const float *xs,
                       const float *bias, float *y, long r0, long r1)
{
    const long nb = cols / 256;
    for (long r = r0; r < r1; r++)
        y[r] = s_dot_q5k(w + (size_t)r * nb, x, xs, nb) + (bias ? bias[r] : 0.0f);
}

/* Element e's code of a Q6_K block, less its offset of 32 (backend.h's
 * layout) */
static inline int q6k_code(const eng_q6k_block *b, int e)
{
    const int h = e / 128, r = e % 128;
    const int lo = (b->ql[64 * h + r % 64] >> (r < 64 ? 0 : 4)) & 15;
    const int hi = (b->qh[32 * h + r % 32] >> (2 * (r / 32))) & 3;
    return (lo | hi << 4) - 32;
}

/* A row of nb Q6_K blocks times x: per sub-block of 16 the products of
 * codes and x, times d * scale. The reference for the vector kernels, and
 * the GEMV of the sets without them. */
static float s_dot_q6k(const eng_q6k_block *b, const float *x, long nb)
{
    float sum = 0.0f;
    for (long i = 0; i < nb; i++, b++, x += 256) {
        const float d = h2f(b->d);
        for (int j = 0; j < 16; j++) {
            float s = 0.0f;
            for (int e = 16 * j; e < 16 * j + 16; e++)
                s += (float)q6k_code(b, e) * x[e];
            sum += d * (float)b->scales[j] * s;
        }
    }
    return sum;
}

static void s_gemv_q6k(const eng_q6k_block *w, long cols, const float *x, const float *bias,
                       float *y, long r0, long r1)
{
    const long nb = cols / 256;
    for (long r = r0; r < r1; r++)
        y[r] = s_dot_q6k(w + (size_t)r * nb, x, nb) + (bias ? bias[r] : 0.0f);
}

/* A Q4_1 block's d and m as floats (CVT: the set's f16 conversion); a
 * Q4_0 block's d and -8 d (its codes' offset of 8 times d is an m): one
 * kernel body serves both types. */
#define Q41_DM(CVT, bb, dw, mw)                                                              \
    const float dw = CVT((bb)->d), mw = CVT((bb)->m)
#define Q40_DM(CVT, bb, dw, mw)                                                              \
    const float dw = CVT((bb)->d), mw = -8.0f * dw

/* A row of nb Q4_1 (Q4_0: DM) blocks times x (xs = x_sums32(x)): per
 * block the 32 products of codes and x, times d, plus m times the block's
 * sum of x, as the vector kernels do. */
#define S_DOT_Q4X_BODY(DM)                                                                   \
    float sum = 0.0f;                                                                        \
    for (long i = 0; i < nb; i++) {                                                          \
        const float *xb = x + 32 * i;                                                        \
        DM(h2f, &b[i], dw, mw);                                                              \
        float s = 0.0f;                                                                      \
        for (int j = 0; j < 16; j++)                                                         \
            s += (float)(b[i].qs[j] & 15) * xb[j] + (float)(b[i].qs[j] >> 4) * xb[j + 16];   \
        sum += dw * s + mw * xs[i];                                                          \
    }                                                                                        \
    return sum;

static float s_dot_q41(const eng_q41_block *b, const float *x, const float *xs, long nb)
{
    S_DOT_Q4X_BODY(Q41_DM)
}

static float s_dot_q40(const eng_q40_block *b, const float *x, const float *xs, long nb)
{
    S_DOT_Q4X_BODY(Q40_DM)
}

static void s_gemv_q41(const eng_q41_block *w, long cols, const float *x, const float *xs,
                       const float *bias, float *y, long r0, long r1)
{
    const long nb = cols / 32;
    for (long r = r0; r < r1; r++)
        y[r] = s_dot_q41(w + (size_t)r * nb, x, xs, nb) + (bias ? bias[r] : 0.0f);
}

static void s_gemv_q40(const eng_q40_block *w, long cols, const float *x, const float *xs,
                       const float *bias, float *y, long r0, long r1)
{
    const long nb = cols / 32;
    for (long r = r0; r < r1; r++)
        y[r] = s_dot_q40(w + (size_t)r * nb, x, xs, nb) + (bias ? bias[r] : 0.0f);
}

/* A row of nb MXFP4 blocks times x: each block's codes' levels times x
 * summed, then scaled by 2^(e - 128). */
static void s_gemv_mxfp4(const eng_mxfp4_block *w, long cols, const float *x, const float *bias,
                         float *y, long r0, long r1)
{
    const long nb = cols / 32;
    for (long r = r0; r < r1; r++) {
        const eng_mxfp4_block *b = w + (size_t)r * nb;
        float sum = 0.0f;
        for (long i = 0; i < nb; i++) {
            float s = 0.0f;
            for (int j = 0; j < 16; j++)
                s += (float)eng_mxfp4_levels[b[i].qs[j] & 15] * x[32 * i + j] +
                     (float)eng_mxfp4_levels[b[i].qs[j] >> 4] * x[32 * i + j + 16];
            sum += eng_e8m0_half(b[i].e) * s;
        }
        y[r] = sum + (bias ? bias[r] : 0.0f);
    }
}

/* An FFN row (f16, f32, Q8_0, Q4_K, Q5_K, Q4_1 or Q4_0; xs = x_sums32(x))
 * times x over n. */
static float s_dot_row(const void *w, eng_dtype dt, const float *x, const float *xs, long n)
{
    return dt == ENG_DTYPE_Q8_0   ? s_dot_q8(w, x, n / 32)
           : dt == ENG_DTYPE_Q4_1 ? s_dot_q41(w, x, xs, n / 32)
           : dt == ENG_DTYPE_Q4_0 ? s_dot_q40(w, x, xs, n / 32)
           : dt == ENG_DTYPE_Q4_K ? s_dot_q4k(w, x, xs, n / 256)
           : dt == ENG_DTYPE_Q5_K ? s_dot_q5k(w, x, xs, n / 256)
                                  : s_dot_w(w, dt == ENG_DTYPE_F16, x, n);
}

/* Element i of an FFN row. */
static inline float wval_dt(const void *row, long i, eng_dtype dt)
{
    if (dt == ENG_DTYPE_Q8_0) {
        const eng_q8_block *b = (const eng_q8_block *)row + i / 32;
        return h2f(b->d) * (float)b->q[i % 32];
    }
    return wval(row, i, dt == ENG_DTYPE_F16);
}

static void s_gemv(const void *w, bool f16, long cols, const float *x, const float *bias,
                   float *y, long r0, long r1)
{
    for (long r = r0; r < r1; r++) {
        const char *row = (const char *)w + (size_t)r * cols * dsize(f16);
        y[r] = s_dot_w(row, f16, x, cols) + (bias ? bias[r] : 0.0f);
    }
}

static void s_cvt_rows(const uint16_t *const *src, int nrows, long n, float *dst, long ldd)
{
    for (int i = 0; i < nrows; i++)
        for (long k = 0; k < n; k++)
            dst[i * ldd + k] = h2f(src[i][k]);
}

static void s_dot4x3(const float *const *w, const float *const *x, long n, float out[4][3])
{
    for (int r = 0; r < 4; r++)
        for (int t = 0; t < 3; t++)
            out[r][t] = s_dot_w(w[r], false, x[t], n);
}

static void s_dot4x3_h(const uint16_t *const *w, const float *const *x, long n, float out[4][3])
{
    for (int r = 0; r < 4; r++)
        for (int t = 0; t < 3; t++)
            out[r][t] = s_dot_w(w[r], true, x[t], n);
}

static void s_exp4(float (*s)[4], int nb, const float *m, int G, float *l)
{
    for (int i = 0; i < nb; i++)
        for (int g = 0; g < 4; g++) {
            s[i][g] = g < G ? expf(s[i][g] - m[g]) : 0.0f;
            l[g] += s[i][g];
        }
}

static void s_ffn_fused(const ffn_args *a, long j0, long j1, float *acc)
{
    const eng_ffn_weights *w = a->w;
    const long E = w->n_embd;
    const eng_dtype dd = eng_ffn_down_dtype(w->dtype);
    const size_t rb = eng_ffn_row_bytes(w->dtype, E), rd = eng_ffn_down_bytes(w->dtype, E);
    const size_t uo = eng_ffn_up_offset(w, rb);
    for (long j = j0; j < j1; j++) {
        const char *g, *d;
        float av = 0.0f;
        if (slot_rows(a, j, rb, rd, &g, &d)) {
            float gs = s_dot_row(g, w->dtype, a->x, a->xs, E);
            float us = s_dot_row(g + uo, w->dtype, a->x, a->xs, E);
            av = gate_act(gs, w->act) * us;
            for (long k = 0; k < E; k++)
                acc[k] += av * wval_dt(d, k, dd);
        }
        if (a->act)
            a->act[j] = av;
    }
}

static void s_ffn_axpy(const ffn_args *a, const float *av, long j0, long j1, float *acc)
{
    const eng_ffn_weights *w = a->w;
    const long E = w->n_embd;
    const eng_dtype dd = eng_ffn_down_dtype(w->dtype);
    const size_t rb = eng_ffn_row_bytes(w->dtype, E), rd = eng_ffn_down_bytes(w->dtype, E);
    for (long j = j0; j < j1; j++) {
        const char *g, *d;
        if (slot_rows(a, j, rb, rd, &g, &d))
            for (long k = 0; k < E; k++)
                acc[k] += av[j] * wval_dt(d, k, dd);
    }
}

static void s_ffn_down(const ffn_args *a, const float *A, long lda, float *y, long ldy, int nt,
                       long c0, long nc, float *scratch)
{
    const eng_ffn_weights *w = a->w;
    const eng_dtype dd = eng_ffn_down_dtype(w->dtype);
    const size_t rb = eng_ffn_down_bytes(w->dtype, w->n_embd);
    for (int t = 0; t < nt; t++)
        for (long c = 0; c < nc; c++)
            y[t * ldy + c0 + c] = 0.0f;
    for (long j = 0; j < a->n_sel; j++) {
        long s = slot_of(a, j);
        if (s < 0)
            continue;
        const char *d = (const char *)w->down + (size_t)s * rb;
        for (int t = 0; t < nt; t++) {
            float av = A[t * lda + j];
            float *yt = y + t * ldy + c0;
            for (long c = 0; c < nc; c++)
                yt[c] += av * wval_dt(d, c0 + c, dd);
        }
    }
}

static float s_dot_h(const float *q, const uint16_t *k, long n)
{
    return s_dot_w(k, true, q, n);
}

static void s_axpy_h(float *o, float a, const uint16_t *v, long n)
{
    for (long i = 0; i < n; i++)
        o[i] += a * h2f(v[i]);
}

static void s_dot4_h(const float *const *q, int G, const uint16_t *k, long n, float *out)
{
    for (int g = 0; g < G; g++)
        out[g] = s_dot_h(q[g], k, n);
}

/* One KV head's rows are strided (every n_head_kv-th head_dim of the
 * cache) and the weights streaming through every layer evict them: the
 * hardware prefetcher did not follow, and decode attention read at ~4 GB/s
 * until row i + ATT_PF was prefetched at row i. */
ALWAYS void att_prefetch_bytes(const void *k, const void *v, size_t stride, long i, long bytes)
{
    const char *kr = (const char *)k + (size_t)(i + ATT_PF) * stride;
    const char *vr = (const char *)v + (size_t)(i + ATT_PF) * stride;
    for (long b = 0; b < bytes; b += 64) {
        __builtin_prefetch(kr + b);
        __builtin_prefetch(vr + b);
    }
    /* a row not aligned to the lines (a Q8_0 head: 68 bytes) ends in one more */
    __builtin_prefetch(kr + bytes - 1);
    __builtin_prefetch(vr + bytes - 1);
}

/* f16 rows: stride and n in values */
ALWAYS void att_prefetch(const uint16_t *k, const uint16_t *v, size_t stride, long i, long n)
{
    att_prefetch_bytes(k, v, stride * sizeof(uint16_t), i, n * (long)sizeof(uint16_t));
}

/* rows of Q8_0 blocks: stride and nb in blocks */
ALWAYS void att_prefetch_q8(const eng_q8_block *k, const eng_q8_block *v, size_t stride, long i,
                            long nb)
{
    att_prefetch_bytes(k, v, stride * sizeof(eng_q8_block), i, nb * (long)sizeof(eng_q8_block));
}

/* Calls F(args..., nq) with nq the constant 1, 2, 3 or 4 (4 for larger
 * groups; those come in runs of 4) for a group of G query heads: the
 * kernels below compile a loop for each count. */
#define BY_GROUP(G, F, ...)                                                                  \
    do {                                                                                     \
        switch (G) {                                                                         \
        case 1:                                                                              \
            F(__VA_ARGS__, 1);                                                               \
            break;                                                                           \
        case 2:                                                                              \
            F(__VA_ARGS__, 2);                                                               \
            break;                                                                           \
        case 3:                                                                              \
            F(__VA_ARGS__, 3);                                                               \
            break;                                                                           \
        default:                                                                             \
            F(__VA_ARGS__, 4);                                                               \
        }                                                                                    \
    } while (0)

/* scores4_h a row at a time. */
static void s_scores4_h(const float *const *q, int G, const uint16_t *k, const uint16_t *v,
                        size_t stride, int nb, int n_pf, long n, float scale, float (*s)[4],
                        float *bm)
{
    const int last = G > 1 ? G - 1 : 0;
    for (int g = 0; g < 4; g++)
        bm[g] = -INFINITY;
    for (int i = 0; i < nb; i++) {
        if (i < n_pf)
            att_prefetch(k, v, stride, i, n);
        s_dot4_h(q, G, k + (size_t)i * stride, n, s[i]);
        for (int g = 0; g < 4; g++) {
            s[i][g] = g < G ? s[i][g] * scale : s[i][last];
            bm[g] = s[i][g] > bm[g] ? s[i][g] : bm[g];
        }
    }
}

static void s_pv4_h(float *const *o, int G, const float *p, const uint16_t *v, size_t stride,
                    int nb, long n)
{
    for (int i = 0; i < nb; i++)
        for (int g = 0; g < G; g++)
            s_axpy_h(o[g], p[4 * i + g], v + (size_t)i * stride, n);
}

static void s_scores4_q8(const float *const *q, int G, const eng_q8_block *k,
                         const eng_q8_block *v, size_t stride, int nb, int n_pf, long n,
                         float scale, float (*s)[4], float *bm)
{
    const int last = G > 1 ? G - 1 : 0;
    for (int g = 0; g < 4; g++)
        bm[g] = -INFINITY;
    for (int i = 0; i < nb; i++) {
        if (i < n_pf)
            att_prefetch_q8(k, v, stride, i, n / 32);
        for (int g = 0; g < G; g++)
            s[i][g] = s_dot_q8(k + (size_t)i * stride, q[g], n / 32);
        for (int g = 0; g < 4; g++) {
            s[i][g] = g < G ? s[i][g] * scale : s[i][last];
            bm[g] = s[i][g] > bm[g] ? s[i][g] : bm[g];
        }
    }
}

static void s_pv4_q8(float *const *o, int G, const float *p, const eng_q8_block *v,
                     size_t stride, int nb, long n)
{
    for (int i = 0; i < nb; i++)
        for (int g = 0; g < G; g++)
            for (long b = 0; b < n / 32; b++) {
                const eng_q8_block *r = v + (size_t)i * stride + b;
                const float pd = p[4 * i + g] * h2f(r->d);
                for (int j = 0; j < 32; j++)
                    o[g][32 * b + j] += pd * (float)r->q[j];
            }
}

/* A group's queries rounded to 16 bits for the Q8_0 scores (the AVX2
 * and NEON sets), by the set's rounding of one head; lanes past G repeat
 * the last head's scale. */
ALWAYS void q16_group(const float *const *q, int G, long n, int16_t (*qi)[QI_MAX], float *dq,
                      void (*head)(const float *, long, int16_t *, float *))
{
    for (int g = 0; g < 4; g++) {
        if (g < G)
            head(q[g], n, qi[g], &dq[g]);
        else
            dq[g] = dq[G - 1];
    }
}

static void s_scale(float *o, float s, long n)
{
    for (long i = 0; i < n; i++)
        o[i] *= s;
}

static void s_add(float *y, const float *x, long n)
{
    for (long i = 0; i < n; i++)
        y[i] += x[i];
}

static void s_to_f16(const float *src, uint16_t *dst, long n)
{
    for (long i = 0; i < n; i++)
        dst[i] = f2h(src[i]);
}

static void s_to_f32(const uint16_t *src, float *dst, long n)
{
    for (long i = 0; i < n; i++)
        dst[i] = h2f(src[i]);
}

static void s_dot2_q4q8(const uint8_t *w, const q8_row *x, long nb, float out[2])
{
    for (int r = 0; r < 2; r++, w += nb * ENG_SKETCH_BLOCK_BYTES) {
        const uint8_t *codes = w + 2 * nb;
        float sum = 0.0f;
        for (long i = 0; i < nb; i++) {
            uint16_t dh;
            memcpy(&dh, w + 2 * i, 2);
            const uint8_t *c = codes + 16 * i;
            const int8_t *xq = x->q + i * 32;
            int32_t b = 0;
            for (int j = 0; j < 16; j++)
                b += (c[j] & 15) * xq[j] + (c[j] >> 4) * xq[j + 16];
            sum += h2f(dh) * x->d[i] * (float)(b - 8 * x->sum[i]);
        }
        out[r] = sum;
    }
}

static const kernels kern_scalar = {
    .gemv_mxfp4 = s_gemv_mxfp4,
    .gemv_q41 = s_gemv_q41,
    .gemv_q40 = s_gemv_q40,
    .gemv_q4k = s_gemv_q4k,
    .gemv_q6k = s_gemv_q6k,
    .gemv_q5k = s_gemv_q5k,
    .name = "scalar",
    .gemv = s_gemv,
    .gemv_q8 = s_gemv_q8,
    .cvt_rows = s_cvt_rows,
    .dot4x3 = s_dot4x3,
    .dot4x3_h = s_dot4x3_h,
    .ffn_fused = s_ffn_fused,
    .ffn_axpy = s_ffn_axpy,
    .ffn_down = s_ffn_down,
    .dot2_q4q8 = s_dot2_q4q8,
    .scores4_h = s_scores4_h,
    .pv4_h = s_pv4_h,
    .scores4_q8 = s_scores4_q8,
    .pv4_q8 = s_pv4_q8,
    .exp4 = s_exp4,
    .scale = s_scale,
    .add = s_add,
    .to_f16 = s_to_f16,
    .to_f32 = s_to_f32,
};

/* ---- walks shared by the vector kernel sets ---------------------------- */

/* Macros, not functions: each expands inside a set's own target
 * attributes with that set's kernels (DOT4, AXPY2, TILES, down_pack), so
 * the compiler inlines and unrolls them per set and weight type. */

/* GEMV over rows of blocks of BE weights (BT: eng_q8_block, 32;
 * eng_q4k_block, 256), four quarters side by side as gemv_impl walks
 * them (four streams), each prefetching its row GEMV_PF_ROWS ahead: a quarter of the
 * f16 row's bytes fewer to read, more instructions a byte. DOT4 is the
 * set's four-row kernel and X the token as it takes it; the rows past the
 * quarters, r0 + 4 * q .. r1, are left to the caller. */
#define GEMV_BLOCKS_BODY(BT, BE, DOT4, X)                                                    \
    const long nb = cols / (BE), q = (r1 - r0) / 4;                                          \
    for (long i0 = 0; i0 < q; i0++) {                                                        \
        const long rr[4] = { r0 + i0, r0 + q + i0, r0 + 2 * q + i0, r0 + 3 * q + i0 };       \
        const BT *b[4];                                                                      \
        const char *pf[4];                                                                   \
        for (int j = 0; j < 4; j++) {                                                        \
            b[j] = w + (size_t)rr[j] * nb;                                                   \
            pf[j] = (const char *)(b[j] + GEMV_PF_ROWS * nb); /* past the end: a hint */     \
        }                                                                                    \
        float o[4];                                                                          \
        DOT4(b[0], b[1], b[2], b[3], X, cols, o, GEMV_PF_ROWS ? pf : NULL);                  \
        for (int j = 0; j < 4; j++)                                                          \
            y[rr[j]] = o[j] + (bias ? bias[rr[j]] : 0.0f);                                   \
    }

/* The decode FFN's walk, shared by the kernel sets and weight types: DOT4
 * (four rows against X, the token as DOT4 takes it, prefetching four
 * more) and AXPY2 (acc += two scaled down rows, prefetching two more) are
 * the set's kernels for the type, rs the bytes of a gate or up row, rd of
 * a down row.
 *
 * Two slots per step, one from each half of [j0, j1): the rows gate, up of
 * both share the x loads, their down rows share the load/store of acc, and
 * the halves are two independent streams for the memory system (with all
 * slots selected, each half is linear in memory). The slots FFN_PF_SLOTS
 * steps ahead are prefetched: selected slots are scattered, so the hardware
 * prefetcher cannot run ahead across them. A slot without a valid partner
 * (odd counts, slots out of range) goes on its own, its rows twice. An
 * un-gated slot has one row (uo 0): DOT4 takes four slots' rows, two of
 * each half, in the same order of slots and sums as the pairs' (where one
 * of the four is out of range, the pairs go on from there, the one row as
 * both gate and up). */
#define FFN_FUSED_BODY(DOT4, AXPY2, rs, rd, X)                                               \
    const long E = a->w->n_embd;                                                             \
    const size_t uo = eng_ffn_up_offset(a->w, rs);                                           \
    const long h = (j1 - j0) / 2;                                                            \
    long i0 = 0;                                                                             \
    for (; uo == 0 && i0 + 1 < h; i0 += 2) {                                                 \
        const long ja = j0 + i0, jb = j0 + h + i0;                                           \
        const char *g[4], *d[4], *pf[4], *pd[4] = { NULL, NULL, NULL, NULL };               \
        if (!slot_rows(a, ja, rs, rd, &g[0], &d[0]) || !slot_rows(a, jb, rs, rd, &g[1], &d[1]) || \
            !slot_rows(a, ja + 1, rs, rd, &g[2], &d[2]) ||                                   \
            !slot_rows(a, jb + 1, rs, rd, &g[3], &d[3]))                                     \
            break;                                                                           \
        bool p = FFN_PF_SLOTS && i0 + 1 + FFN_PF_SLOTS < h;                                  \
        for (int q = 0; q < 4 && p; q++)                                                     \
            p = slot_rows(a, (q & 1 ? jb : ja) + (q >> 1) + FFN_PF_SLOTS, rs, rd, &pf[q],    \
                          &pd[q]);                                                           \
        if (!p)                                                                              \
            pd[0] = pd[1] = pd[2] = pd[3] = NULL;                                            \
        float o[4], av[4];                                                                   \
        DOT4(g[0], g[1], g[2], g[3], X, E, o, p ? pf : NULL);                                \
        for (int q = 0; q < 4; q++)                                                          \
            av[q] = gate_act(o[q], a->w->act) * o[q];                                        \
        AXPY2(acc, av[0], d[0], av[1], d[1], E, pd[0], pd[1]);                               \
        AXPY2(acc, av[2], d[2], av[3], d[3], E, pd[2], pd[3]);                               \
        if (a->act) {                                                                        \
            a->act[ja] = av[0];                                                              \
            a->act[jb] = av[1];                                                              \
            a->act[ja + 1] = av[2];                                                          \
            a->act[jb + 1] = av[3];                                                          \
        }                                                                                    \
    }                                                                                        \
    for (long i = i0; i < h; i++) {                                                          \
        const long ja = j0 + i, jb = j0 + h + i;                                             \
        const char *ga, *gb, *da, *db;                                                       \
        if (!slot_rows(a, ja, rs, rd, &ga, &da) || !slot_rows(a, jb, rs, rd, &gb, &db)) {    \
            ffn_one_slot_##DOT4(a, ja, acc, rs, rd);                                         \
            ffn_one_slot_##DOT4(a, jb, acc, rs, rd);                                         \
            continue;                                                                        \
        }                                                                                    \
        const char *pf[4] = { NULL, NULL, NULL, NULL }, *pd0 = NULL, *pd1 = NULL;            \
        if (FFN_PF_SLOTS && i + FFN_PF_SLOTS < h &&                                          \
            slot_rows(a, ja + FFN_PF_SLOTS, rs, rd, &pf[0], &pd0) &&                         \
            slot_rows(a, jb + FFN_PF_SLOTS, rs, rd, &pf[2], &pd1)) {                         \
            pf[1] = pf[0] + uo;                                                              \
            pf[3] = pf[2] + uo;                                                              \
        } else {                                                                             \
            pf[0] = pd0 = pd1 = NULL;                                                        \
        }                                                                                    \
        float o[4];                                                                          \
        DOT4(ga, ga + uo, gb, gb + uo, X, E, o, pf[0] ? pf : NULL);                          \
        const float ava = gate_act(o[0], a->w->act) * o[1];                                  \
        const float avb = gate_act(o[2], a->w->act) * o[3];                                  \
        AXPY2(acc, ava, da, avb, db, E, pd0, pd1);                                           \
        if (a->act) {                                                                        \
            a->act[ja] = ava;                                                                \
            a->act[jb] = avb;                                                                \
        }                                                                                    \
    }                                                                                        \
    if ((j1 - j0) & 1)                                                                       \
        ffn_one_slot_##DOT4(a, j1 - 1, acc, rs, rd);

/* ffn_axpy's walk: FFN_FUSED_BODY's pairs and prefetch of the down rows,
 * the activations given; a slot out of range adds nothing. */
#define FFN_AXPY_BODY(AXPY2, rd)                                                             \
    const long E = a->w->n_embd;                                                             \
    const size_t rs = eng_ffn_row_bytes(a->w->dtype, E);                                     \
    const long h = (j1 - j0) / 2;                                                            \
    for (long i = 0; i < h; i++) {                                                           \
        const long ja = j0 + i, jb = j0 + h + i;                                             \
        const char *g, *da = NULL, *db = NULL, *pd0 = NULL, *pd1 = NULL;                     \
        const bool oka = slot_rows(a, ja, rs, rd, &g, &da);                                  \
        const bool okb = slot_rows(a, jb, rs, rd, &g, &db);                                  \
        if (!oka || !okb) {                                                                  \
            if (oka)                                                                         \
                AXPY2(acc, av[ja], da, 0.0f, da, E, NULL, NULL);                             \
            if (okb)                                                                         \
                AXPY2(acc, av[jb], db, 0.0f, db, E, NULL, NULL);                             \
            continue;                                                                        \
        }                                                                                    \
        if (!(FFN_PF_SLOTS && i + FFN_PF_SLOTS < h &&                                        \
              slot_rows(a, ja + FFN_PF_SLOTS, rs, rd, &g, &pd0) &&                           \
              slot_rows(a, jb + FFN_PF_SLOTS, rs, rd, &g, &pd1)))                            \
            pd0 = pd1 = NULL;                                                                \
        AXPY2(acc, av[ja], da, av[jb], db, E, pd0, pd1);                                     \
    }                                                                                        \
    const char *g, *d;                                                                       \
    if (((j1 - j0) & 1) && slot_rows(a, j1 - 1, rs, rd, &g, &d))                             \
        AXPY2(acc, av[j1 - 1], d, 0.0f, d, E, NULL, NULL);

/* A set's ffn_axpy body: FFN_AXPY_BODY with its AXPY2 for the down rows'
 * type (Q8_0 under 4- and 5-bit and Q8_0 slots, else the slots' own) */
#define FFN_AXPY_BY_DOWN(AXPY_Q8, AXPY_F16, AXPY_F32)                                       \
    const size_t rd = eng_ffn_down_bytes(a->w->dtype, a->w->n_embd);                         \
    switch (eng_ffn_down_dtype(a->w->dtype)) {                                               \
    case ENG_DTYPE_Q8_0: {                                                                   \
        FFN_AXPY_BODY(AXPY_Q8, rd)                                                           \
        break;                                                                               \
    }                                                                                        \
    case ENG_DTYPE_F16: {                                                                    \
        FFN_AXPY_BODY(AXPY_F16, rd)                                                          \
        break;                                                                               \
    }                                                                                        \
    default: {                                                                               \
        FFN_AXPY_BODY(AXPY_F32, rd)                                                          \
        break;                                                                               \
    }                                                                                        \
    }

/* One slot on its own (a partner out of range): its rows as both pairs. */
#define FFN_ONE_SLOT(DOT4, AXPY2, ATTR, X)                                                   \
    ATTR void ffn_one_slot_##DOT4(const ffn_args *a, long j, float *acc, size_t rs,          \
                                  size_t rd)                                                 \
    {                                                                                        \
        const char *g, *d;                                                                   \
        float av = 0.0f;                                                                     \
        if (slot_rows(a, j, rs, rd, &g, &d)) {                                               \
            float o[4];                                                                      \
            const size_t uo = eng_ffn_up_offset(a->w, rs);                                   \
            DOT4(g, g + uo, g, g + uo, X, a->w->n_embd, o, NULL);                            \
            av = gate_act(o[0], a->w->act) * o[1];                                           \
            AXPY2(acc, av, d, 0.0f, d, a->w->n_embd, NULL, NULL);                            \
        }                                                                                    \
        if (a->act)                                                                          \
            a->act[j] = av;                                                                  \
    }

/* The loops of the prefill's down projection, shared by the kernel sets
 * (v_ffn_down, v512_ffn_down): column chunks, blocks of selected down rows
 * (their columns [c0, c0 + nc)) converted to f32 and packed contiguously in
 * the thread's scratch once, then reused by every block of 6 tokens
 * through TILES (down_tiles or down_tiles512; NT a constant in each case,
 * so that each compiles to its own unrolled kernel): the rows of scattered
 * slots are read once per token chunk instead of once per token block, and
 * the inner loop reads only L1/L2. */
#define FFN_DOWN_CASE(TILES, NT)                                                             \
    case NT:                                                                                 \
        TILES(scratch, ldp, nj, ncc, At, lda, yt, ldy, jb == 0, NT);                         \
        break;
#define FFN_DOWN_BODY(TILES)                                                                 \
    for (long cc = c0; cc < c0 + nc; cc += DOWN_CC) {                                        \
        long ncc = c0 + nc - cc < DOWN_CC ? c0 + nc - cc : DOWN_CC;                          \
        long ldp = (ncc + 7) & ~7L;                                                          \
        long jbs = SCRATCH_FLOATS / ldp;                                                     \
        for (long jb = 0; jb < a->n_sel; jb += jbs) {                                        \
            int nj = (int)(a->n_sel - jb < jbs ? a->n_sel - jb : jbs);                       \
            down_pack(a, jb, nj, cc, ncc, ldp, scratch);                                     \
            for (int t = 0; t < nt; t += 6) {                                                \
                const float *At = A + (size_t)t * lda + jb;                                  \
                float *yt = y + (size_t)t * ldy + cc;                                        \
                switch (nt - t < 6 ? nt - t : 6) {                                           \
                    FFN_DOWN_CASE(TILES, 1)                                                  \
                    FFN_DOWN_CASE(TILES, 2)                                                  \
                    FFN_DOWN_CASE(TILES, 3)                                                  \
                    FFN_DOWN_CASE(TILES, 4)                                                  \
                    FFN_DOWN_CASE(TILES, 5)                                                  \
                    FFN_DOWN_CASE(TILES, 6)                                                  \
                default:                                                                     \
                    break;                                                                   \
                }                                                                            \
            }                                                                                \
        }                                                                                    \
        if (a->n_sel == 0)                                                                   \
            for (int t = 0; t < nt; t++)                                                     \
                memset(y + (size_t)t * ldy + cc, 0, (size_t)ncc * sizeof(float));           \
    }

/* Column chunk of the down projection: at least SCRATCH_FLOATS / DOWN_CC
 * slots per packed block. */
enum { DOWN_CC = 2048 };

/* A set's TILES for FFN_DOWN_BODY: all column tiles of one packed block
 * for NT tokens, BLOCK taking NVW vectors of VW floats, then one, and the
 * last partial tile through a local copy of y. */
#define DOWN_TILES_BODY(BLOCK, VW, NVW)                                                      \
    long c = 0;                                                                              \
    for (; c + (VW) * (NVW) <= nc; c += (VW) * (NVW))                                        \
        BLOCK(P + c, ldp, nj, A, lda, y + c, ldy, first, NT, NVW);                           \
    for (; c + (VW) <= nc; c += (VW))                                                        \
        BLOCK(P + c, ldp, nj, A, lda, y + c, ldy, first, NT, 1);                             \
    if (c < nc) {                                                                            \
        float tmp[6 * (VW)];                                                                 \
        const long r = nc - c;                                                               \
        for (int t = 0; t < NT; t++)                                                         \
            for (long i = 0; i < (VW); i++)                                                  \
                tmp[t * (VW) + i] = (!first && i < r) ? y[t * ldy + c + i] : 0.0f;           \
        BLOCK(P + c, ldp, nj, A, lda, tmp, (VW), first, NT, 1);                              \
        for (int t = 0; t < NT; t++)                                                         \
            for (long i = 0; i < r; i++)                                                     \
                y[t * ldy + c + i] = tmp[t * (VW) + i];                                      \
    }

/* A set's f16 and f32 kernels for FFN_FUSED_BODY, PFX##dot4_f16 and so on,
 * from its PFX##dot4_impl and PFX##axpy2_impl: the dtype is a constant in
 * each, so every load compiles to one branch. */
#define F16_F32_WALK_KERNELS(PFX, ATTR)                                                      \
    ATTR void PFX##dot4_f16(const void *r0, const void *r1, const void *r2, const void *r3,  \
                            const float *x, long n, float out[4], const char *const *pf)     \
    {                                                                                        \
        PFX##dot4_impl(r0, r1, r2, r3, x, n, true, out, pf);                                 \
    }                                                                                        \
    ATTR void PFX##dot4_f32(const void *r0, const void *r1, const void *r2, const void *r3,  \
                            const float *x, long n, float out[4], const char *const *pf)     \
    {                                                                                        \
        PFX##dot4_impl(r0, r1, r2, r3, x, n, false, out, pf);                                \
    }                                                                                        \
    ATTR void PFX##axpy2_f16(float *acc, float a0, const void *d0, float a1, const void *d1, \
                             long n, const char *p0, const char *p1)                         \
    {                                                                                        \
        PFX##axpy2_impl(acc, a0, d0, a1, d1, n, true, p0, p1);                               \
    }                                                                                        \
    ATTR void PFX##axpy2_f32(float *acc, float a0, const void *d0, float a1, const void *d1, \
                             long n, const char *p0, const char *p1)                         \
    {                                                                                        \
        PFX##axpy2_impl(acc, a0, d0, a1, d1, n, false, p0, p1);                              \
    }

/* ---- AVX2 + FMA + F16C kernels ---------------------------------------- */

#if HAVE_X86
#define TGT __attribute__((target("avx2,fma,f16c")))
#define VALWAYS TGT ALWAYS

VALWAYS __m256 ld8(const void *base, long i, bool f16)
{
    if (f16)
        return _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)((const uint16_t *)base + i)));
    return _mm256_loadu_ps((const float *)base + i);
}

VALWAYS float hsum8(__m256 v)
{
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    s = _mm_add_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
}

/* [sum a, sum b, sum c, sum d] */
VALWAYS __m128 hsum4x8(__m256 a, __m256 b, __m256 c, __m256 d)
{
    __m256 t0 = _mm256_hadd_ps(a, b);
    __m256 t1 = _mm256_hadd_ps(c, d);
    __m256 t2 = _mm256_hadd_ps(t0, t1);
    return _mm_add_ps(_mm256_castps256_ps128(t2), _mm256_extractf128_ps(t2, 1));
}

/* Mask selecting the first n (0..8) lanes. */
VALWAYS __m256i tail_mask(long n)
{
    static const int32_t m[16] = { -1, -1, -1, -1, -1, -1, -1, -1, 0, 0, 0, 0, 0, 0, 0, 0 };
    return _mm256_loadu_si256((const __m256i *)(m + 8 - n));
}

/* Four dot products of rows r0..r3 (f16 or f32) with x over n. pf, when
 * not NULL, holds four rows to prefetch at the same column as we go (the
 * rows the caller reads next: the hardware prefetcher loses time at the
 * start of every short row, and cannot guess scattered ones). */
VALWAYS void dot4_impl(const void *r0, const void *r1, const void *r2, const void *r3,
                       const float *x, long n, bool f16, float out[4], const char *const *pf)
{
    __m256 a0 = _mm256_setzero_ps(), a1 = a0, a2 = a0, a3 = a0;
    __m256 b0 = a0, b1 = a0, b2 = a0, b3 = a0;
    const long es = (long)dsize(f16);
    long k = 0;
    for (; k + 32 <= n; k += 32) {
        if (pf) { /* 32 elements: one line per row (f16), two (f32) */
            for (int i = 0; i < 4; i++) {
                _mm_prefetch(pf[i] + k * es, _MM_HINT_T0);
                if (!f16)
                    _mm_prefetch(pf[i] + k * es + 64, _MM_HINT_T0);
            }
        }
        __m256 x0 = _mm256_loadu_ps(x + k), x1 = _mm256_loadu_ps(x + k + 8);
        __m256 x2 = _mm256_loadu_ps(x + k + 16), x3 = _mm256_loadu_ps(x + k + 24);
        a0 = _mm256_fmadd_ps(ld8(r0, k, f16), x0, a0);
        a1 = _mm256_fmadd_ps(ld8(r1, k, f16), x0, a1);
        a2 = _mm256_fmadd_ps(ld8(r2, k, f16), x0, a2);
        a3 = _mm256_fmadd_ps(ld8(r3, k, f16), x0, a3);
        b0 = _mm256_fmadd_ps(ld8(r0, k + 8, f16), x1, b0);
        b1 = _mm256_fmadd_ps(ld8(r1, k + 8, f16), x1, b1);
        b2 = _mm256_fmadd_ps(ld8(r2, k + 8, f16), x1, b2);
        b3 = _mm256_fmadd_ps(ld8(r3, k + 8, f16), x1, b3);
        a0 = _mm256_fmadd_ps(ld8(r0, k + 16, f16), x2, a0);
        a1 = _mm256_fmadd_ps(ld8(r1, k + 16, f16), x2, a1);
        a2 = _mm256_fmadd_ps(ld8(r2, k + 16, f16), x2, a2);
        a3 = _mm256_fmadd_ps(ld8(r3, k + 16, f16), x2, a3);
        b0 = _mm256_fmadd_ps(ld8(r0, k + 24, f16), x3, b0);
        b1 = _mm256_fmadd_ps(ld8(r1, k + 24, f16), x3, b1);
        b2 = _mm256_fmadd_ps(ld8(r2, k + 24, f16), x3, b2);
        b3 = _mm256_fmadd_ps(ld8(r3, k + 24, f16), x3, b3);
    }
    if (pf && k < n)
        for (int i = 0; i < 4; i++)
            _mm_prefetch(pf[i] + k * es, _MM_HINT_T0);
    for (; k + 8 <= n; k += 8) {
        __m256 x0 = _mm256_loadu_ps(x + k);
        a0 = _mm256_fmadd_ps(ld8(r0, k, f16), x0, a0);
        a1 = _mm256_fmadd_ps(ld8(r1, k, f16), x0, a1);
        a2 = _mm256_fmadd_ps(ld8(r2, k, f16), x0, a2);
        a3 = _mm256_fmadd_ps(ld8(r3, k, f16), x0, a3);
    }
    a0 = _mm256_add_ps(a0, b0);
    a1 = _mm256_add_ps(a1, b1);
    a2 = _mm256_add_ps(a2, b2);
    a3 = _mm256_add_ps(a3, b3);
    _mm_storeu_ps(out, hsum4x8(a0, a1, a2, a3));
    for (; k < n; k++) {
        float xv = x[k];
        out[0] += wval(r0, k, f16) * xv;
        out[1] += wval(r1, k, f16) * xv;
        out[2] += wval(r2, k, f16) * xv;
        out[3] += wval(r3, k, f16) * xv;
    }
}

VALWAYS float dot1_impl(const void *r, const float *x, long n, bool f16)
{
    __m256 a0 = _mm256_setzero_ps(), a1 = a0;
    long k = 0;
    for (; k + 16 <= n; k += 16) {
        a0 = _mm256_fmadd_ps(ld8(r, k, f16), _mm256_loadu_ps(x + k), a0);
        a1 = _mm256_fmadd_ps(ld8(r, k + 8, f16), _mm256_loadu_ps(x + k + 8), a1);
    }
    for (; k + 8 <= n; k += 8)
        a0 = _mm256_fmadd_ps(ld8(r, k, f16), _mm256_loadu_ps(x + k), a0);
    float s = hsum8(_mm256_add_ps(a0, a1));
    for (; k < n; k++)
        s += wval(r, k, f16) * x[k];
    return s;
}

/* Rows [r0, r1) as four quarters walked side by side: four independent
 * linear streams keep more lines in flight than one (a single stream is
 * limited by how far the hardware prefetcher runs ahead), and each stream
 * prefetches its row GEMV_PF_ROWS ahead. */
VALWAYS void gemv_impl(const void *w, bool f16, long cols, const float *x, const float *bias,
                       float *y, long r0, long r1)
{
    size_t rs = (size_t)cols * dsize(f16);
    const char *base = w;
    long q = (r1 - r0) / 4;
    for (long i = 0; i < q; i++) {
        long r[4] = { r0 + i, r0 + q + i, r0 + 2 * q + i, r0 + 3 * q + i };
        const char *p[4], *pf[4];
        for (int j = 0; j < 4; j++) {
            p[j] = base + (size_t)r[j] * rs;
            pf[j] = p[j] + GEMV_PF_ROWS * rs; /* past the end: harmless hint */
        }
        float o[4];
        dot4_impl(p[0], p[1], p[2], p[3], x, cols, f16, o, GEMV_PF_ROWS ? pf : NULL);
        for (int j = 0; j < 4; j++)
            y[r[j]] = o[j] + (bias ? bias[r[j]] : 0.0f);
    }
    for (long rr = r0 + 4 * q; rr < r1; rr++)
        y[rr] = dot1_impl(base + (size_t)rr * rs, x, cols, f16) + (bias ? bias[rr] : 0.0f);
}

TGT static void v_gemv(const void *w, bool f16, long cols, const float *x, const float *bias,
                       float *y, long r0, long r1)
{
    if (f16)
        gemv_impl(w, true, cols, x, bias, y, r0, r1);
    else
        gemv_impl(w, false, cols, x, bias, y, r0, r1);
}

/* Eight int8 of a Q8_0 block as floats. */
VALWAYS __m256 ldq8(const int8_t *q)
{
    return _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_loadl_epi64((const __m128i *)q)));
}

/* eight bytes as 32-bit lanes */
VALWAYS __m256i u8x8_epi32(const uint8_t *p)
{
    return _mm256_cvtepu8_epi32(_mm_loadl_epi64((const __m128i *)p));
}

/* dq_row's Q4_K, Q5_K and Q6_K rows, as quants.c's dq_q4_k, dq_q5_k and
 * dq_q6_k round: (d sc) * code - dmin m; (d sc) * (code - 32) */
TGT static void v_dq_row_k(eng_dtype dt, const void *src, long n, float *dst)
{
    const __m256i m4 = _mm256_set1_epi32(15), m3 = _mm256_set1_epi32(3);
    const __m256i k32 = _mm256_set1_epi32(32);
    for (long i = 0; i < n / 256; i++) {
        float *y = dst + 256 * i;
        if (dt == ENG_DTYPE_Q6_K) {
            const eng_q6k_block *b = (const eng_q6k_block *)src + i;
            const float d = _cvtsh_ss(b->d);
            for (int h = 0; h < 2; h++) { /* halves of 128: ql 64, qh 32, scales 8 */
                const uint8_t *ql = b->ql + 64 * h, *qh = b->qh + 32 * h;
                const int8_t *sc = b->scales + 8 * h;
                for (int l = 0; l < 32; l += 8) {
                    const __m256i a = u8x8_epi32(ql + l), c = u8x8_epi32(ql + 32 + l);
                    const __m256i hb = u8x8_epi32(qh + l);
                    /* codes of groups 0-3: a nibble of ql, two bits of qh */
                    const __m256i q[4] = {
                        _mm256_or_si256(_mm256_and_si256(a, m4),
                                        _mm256_slli_epi32(_mm256_and_si256(hb, m3), 4)),
                        _mm256_or_si256(
                            _mm256_and_si256(c, m4),
                            _mm256_slli_epi32(_mm256_and_si256(_mm256_srli_epi32(hb, 2), m3), 4)),
                        _mm256_or_si256(
                            _mm256_srli_epi32(a, 4),
                            _mm256_slli_epi32(_mm256_and_si256(_mm256_srli_epi32(hb, 4), m3), 4)),
                        _mm256_or_si256(_mm256_srli_epi32(c, 4),
                                        _mm256_slli_epi32(_mm256_srli_epi32(hb, 6), 4)),
                    };
                    for (int g = 0; g < 4; g++) {
                        const __m256 f = _mm256_set1_ps(d * (float)sc[l / 16 + 2 * g]);
                        const __m256i qc = _mm256_sub_epi32(q[g], k32);
                        _mm256_storeu_ps(y + 128 * h + 32 * g + l,
                                         _mm256_mul_ps(f, _mm256_cvtepi32_ps(qc)));
                    }
                }
            }
            continue;
        }
        /* Q4_K, Q5_K: d, dmin and scales where Q4_K has them */
        const eng_q4k_block *b = (const eng_q4k_block *)((const char *)src +
                                                         (size_t)i * (dt == ENG_DTYPE_Q5_K
                                                                          ? ENG_Q5K_BLOCK_BYTES
                                                                          : ENG_Q4K_BLOCK_BYTES));
        const uint8_t *qs = dt == ENG_DTYPE_Q5_K ? ((const eng_q5k_block *)b)->qs : b->qs;
        const uint8_t *qh = dt == ENG_DTYPE_Q5_K ? ((const eng_q5k_block *)b)->qh : NULL;
        float f[8], g[8];
        qk_factors(b->d, b->dmin, b->scales, f, g);
        for (int j = 0; j < 4; j++)     /* sub-blocks 2j (low nibbles), 2j + 1 (high) */
            for (int l = 0; l < 32; l += 8) {
                const __m256i c = u8x8_epi32(qs + 32 * j + l);
                __m256i lo = _mm256_and_si256(c, m4), hi = _mm256_srli_epi32(c, 4);
                if (qh) {
                    const __m256i hb = u8x8_epi32(qh + l);
                    lo = _mm256_or_si256(lo, _mm256_slli_epi32(
                                                 _mm256_and_si256(_mm256_srli_epi32(hb, 2 * j),
                                                                  _mm256_set1_epi32(1)),
                                                 4));
                    hi = _mm256_or_si256(hi, _mm256_slli_epi32(
                                                 _mm256_and_si256(_mm256_srli_epi32(hb, 2 * j + 1),
                                                                  _mm256_set1_epi32(1)),
                                                 4));
                }
                _mm256_storeu_ps(y + 64 * j + l,
                                 _mm256_sub_ps(_mm256_mul_ps(_mm256_set1_ps(f[2 * j]),
                                                             _mm256_cvtepi32_ps(lo)),
                                               _mm256_set1_ps(g[2 * j])));
                _mm256_storeu_ps(y + 64 * j + 32 + l,
                                 _mm256_sub_ps(_mm256_mul_ps(_mm256_set1_ps(f[2 * j + 1]),
                                                             _mm256_cvtepi32_ps(hi)),
                                               _mm256_set1_ps(g[2 * j + 1])));
            }
    }
}

/* dq_row: per block d (and m) once, eight values a register, rounded as
 * q8_to_f32 and quants.c's dq_q4_1 / dq_q4_0 round (d * code; code * d +
 * m in two roundings; (code - 8) * d), so the values are theirs. The
 * scalar form (a call per f16 scale) took a fifth of a 4-token prefill on
 * the AVX2 set, which converts every matrix's rows that way (it has no
 * packed prefill). */
TGT static void v_dq_row(eng_dtype dt, const void *src, long n, float *dst)
{
    if (eng_dtype_block(dt) == 256) {
        v_dq_row_k(dt, src, n, dst);
        return;
    }
    const long nb = n / 32;
    const __m256i m4 = _mm256_set1_epi32(15), k8 = _mm256_set1_epi32(8);
    for (long i = 0; i < nb; i++) {
        float *y = dst + 32 * i;
        if (dt == ENG_DTYPE_Q8_0) {
            const eng_q8_block *b = (const eng_q8_block *)src + i;
            const __m256 d = _mm256_set1_ps(_cvtsh_ss(b->d));
            for (int u = 0; u < 32; u += 8)
                _mm256_storeu_ps(y + u, _mm256_mul_ps(d, ldq8(b->q + u)));
            continue;
        }
        const uint8_t *qs;
        __m256 d, m = _mm256_setzero_ps();
        if (dt == ENG_DTYPE_Q4_1) {
            const eng_q41_block *b = (const eng_q41_block *)src + i;
            d = _mm256_set1_ps(_cvtsh_ss(b->d));
            m = _mm256_set1_ps(_cvtsh_ss(b->m));
            qs = b->qs;
        } else {
            const eng_q40_block *b = (const eng_q40_block *)src + i;
            d = _mm256_set1_ps(_cvtsh_ss(b->d));
            qs = b->qs;
        }
        for (int u = 0; u < 16; u += 8) {
            const __m256i c = u8x8_epi32(qs + u);
            __m256i lo = _mm256_and_si256(c, m4), hi = _mm256_srli_epi32(c, 4);
            if (dt == ENG_DTYPE_Q4_1) {
                _mm256_storeu_ps(y + u,
                                 _mm256_add_ps(_mm256_mul_ps(_mm256_cvtepi32_ps(lo), d), m));
                _mm256_storeu_ps(y + 16 + u,
                                 _mm256_add_ps(_mm256_mul_ps(_mm256_cvtepi32_ps(hi), d), m));
            } else {
                lo = _mm256_sub_epi32(lo, k8);
                hi = _mm256_sub_epi32(hi, k8);
                _mm256_storeu_ps(y + u, _mm256_mul_ps(_mm256_cvtepi32_ps(lo), d));
                _mm256_storeu_ps(y + 16 + u, _mm256_mul_ps(_mm256_cvtepi32_ps(hi), d));
            }
        }
    }
}

/* Four Q8_0 rows (n / 32 blocks) against x: per block the 32 products in a
 * register, scaled by its d into the row's sum; the rows pf each a block
 * a step (a 34-byte block: every line is touched). */
VALWAYS void dot4_q8(const void *r0, const void *r1, const void *r2, const void *r3,
                     const float *x, long n, float out[4], const char *const *pf)
{
    const eng_q8_block *b[4] = { r0, r1, r2, r3 };
    __m256 acc[4] = { _mm256_setzero_ps(), _mm256_setzero_ps(), _mm256_setzero_ps(),
                      _mm256_setzero_ps() };
    for (long i = 0; i < n / 32; i++) {
        if (pf)
            for (int j = 0; j < 4; j++)
                _mm_prefetch(pf[j] + i * sizeof(eng_q8_block), _MM_HINT_T0);
        const float *xb = x + 32 * i;
        const __m256 x0 = _mm256_loadu_ps(xb), x1 = _mm256_loadu_ps(xb + 8);
        const __m256 x2 = _mm256_loadu_ps(xb + 16), x3 = _mm256_loadu_ps(xb + 24);
        for (int j = 0; j < 4; j++) {
            const eng_q8_block *bb = b[j] + i;
            __m256 t = _mm256_mul_ps(ldq8(bb->q), x0);
            t = _mm256_fmadd_ps(ldq8(bb->q + 8), x1, t);
            t = _mm256_fmadd_ps(ldq8(bb->q + 16), x2, t);
            t = _mm256_fmadd_ps(ldq8(bb->q + 24), x3, t);
            acc[j] = _mm256_fmadd_ps(_mm256_set1_ps(_cvtsh_ss(bb->d)), t, acc[j]);
        }
    }
    _mm_storeu_ps(out, hsum4x8(acc[0], acc[1], acc[2], acc[3]));
}

TGT static void v_gemv_q8(const eng_q8_block *w, long cols, const float *x, const float *bias,
                          float *y, long r0, long r1)
{
    GEMV_BLOCKS_BODY(eng_q8_block, 32, dot4_q8, x)
    s_gemv_q8(w, cols, x, bias, y, r0 + 4 * q, r1);
}

/* A Q4_K (or Q5_K) block's 12 scale bytes as 8 scale bytes then 8 min
 * bytes (the layout eng_q4k_scale_min reads), in vector registers: the scalar form
 * (three words regrouped in general registers, then moved over) took a
 * third of the decode kernel's time. With B the scale bytes, sc_j = B_j &
 * 63 and m_j = B_(j+4) & 63 for j < 4; for j >= 4 the low four bits come
 * from B_(j+4)'s nibbles and the high two from B_(j-4)'s and B_j's top
 * bits. Shifts are 16-bit, so each is masked to the bits it owns. */
VALWAYS __m128i q4k_scales_mins(const void *b)
{
    const __m128i v = _mm_loadu_si128((const __m128i *)b); /* d, dmin, then B */
    const __m128i a = _mm_shuffle_epi8(v, _mm_setr_epi8(4, 5, 6, 7, 12, 13, 14, 15, 8, 9, 10, 11,
                                                        12, 13, 14, 15));
    const __m128i hi = _mm_shuffle_epi8(v, _mm_setr_epi8(-1, -1, -1, -1, 4, 5, 6, 7, -1, -1, -1,
                                                         -1, 8, 9, 10, 11));
    const __m128i lo = _mm_or_si128(
        _mm_and_si128(a, _mm_setr_epi8(63, 63, 63, 63, 15, 15, 15, 15, 63, 63, 63, 63, 0, 0, 0,
                                       0)),
        _mm_and_si128(_mm_srli_epi16(a, 4),
                      _mm_setr_epi8(0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 15, 15, 15, 15)));
    return _mm_or_si128(lo, _mm_and_si128(_mm_srli_epi16(hi, 2), _mm_set1_epi8(0x30)));
}

/* Four Q4_K rows against x~ in 16 bits a block of 256, q = 256 h + l held
 * as the signed bytes h and l (x16_prep_q4k). Per step of 64 weights a row
 * the two sub-blocks' codes come apart as bytes with one shift and two
 * masks; vpmaddubsw multiplies them with h and with l (pairs of products
 * in int16, at most 2 * 15 * 128), and a multiply-add by the sub-block's
 * scale (DPW: acc + the pairs' products summed in int32; VNNI's vpdpwssd
 * where the set has it) applies the scale in the integers, so a block
 * takes one conversion and one FMA a row. The first form multiplied 16-bit
 * x~ a block of 32 by vpmaddwd, then converted and scaled each sub-block
 * in floats: about 135 instructions a block a row against about 95 here.
 * Exact in the integers: a lane of the h sums is at most 8 * 2 * 3840
 * * 63 (3.9e6) before its shift by 8. The mins come off as dmin * m times
 * x's exact sums, as s_dot_q4k. x~ is within d_x / 2 = max|x_block| /
 * 65278 of x, 2^-16 of the block's largest where llama.cpp's Q8_K takes
 * 2^-8 (docs/benchmark.md).
 *
 * Q5_K rows (BT eng_q5k_block, HIBITS Q5K_HIBITS) take the same steps, each
 * code with its fifth bit from qh put in before the products: codes up to
 * 31, pairs at most 2 * 31 * 128, and a lane of the h sums at most 8 * 2
 * * 7936 * 63 (8.0e6), 2.06e9 with the l sums after the shift by 8: still
 * within int32. Q4_K's HIBITS, QK_NO_HIBITS, is nothing. */
#define QK_NO_HIBITS(c0, c1, bj, p)
#define Q5K_HIBITS(c0, c1, bj, p)                                                            \
    {                                                                                        \
        const __m256i hs =                                                                   \
            _mm256_srli_epi16(_mm256_loadu_si256((const __m256i *)(bj)->qh), 2 * (p));       \
        c0 = _mm256_or_si256(c0, _mm256_and_si256(_mm256_slli_epi16(hs, 4), m16b));          \
        c1 = _mm256_or_si256(c1, _mm256_and_si256(_mm256_slli_epi16(hs, 3), m16b));          \
    }
#define DOT4_QK_X16_BODY(DPW, BT, BYTES, HIBITS)                                             \
    const __m256i m4 = _mm256_set1_epi8(15), m16b = _mm256_set1_epi8(16);                    \
    (void)m16b;                                                                              \
    __m256 acc[4] = { _mm256_setzero_ps(), _mm256_setzero_ps(), _mm256_setzero_ps(),        \
                      _mm256_setzero_ps() };                                                 \
    __m256 mins[4] = { _mm256_setzero_ps(), _mm256_setzero_ps(), _mm256_setzero_ps(),        \
                       _mm256_setzero_ps() };                                                \
    for (long i = 0; i < nb; i++) {                                                          \
        if (pf)                                                                              \
            for (int j = 0; j < 4; j++)                                                      \
                for (int l = 0; l < (BYTES); l += 64)                                        \
                    _mm_prefetch(pf[j] + i * (BYTES) + l, _MM_HINT_T0);                      \
        /* per row: the sub-blocks' scales as int16 pairs (a dword a scale,    \
         * broadcast by the loads below), d * d_x, the mins' term */                         \
        __m256i scw[4];                                                                      \
        float dd[4];                                                                         \
        const __m256 xs8 = _mm256_loadu_ps(xs + 8 * i);                                      \
        for (int j = 0; j < 4; j++) {                                                        \
            const BT *bj = b[j] + i;                                                         \
            const __m128i v = q4k_scales_mins(bj);                                           \
            const __m256i sc = _mm256_cvtepu8_epi32(v);                                      \
            scw[j] = _mm256_or_si256(sc, _mm256_slli_epi32(sc, 16));                         \
            const __m256 mn = _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(_mm_srli_si128(v, 8))); \
            mins[j] = _mm256_fmadd_ps(_mm256_mul_ps(_mm256_set1_ps(_cvtsh_ss(bj->dmin)), mn), \
                                      xs8, mins[j]);                                         \
            dd[j] = _cvtsh_ss(bj->d) * x->d[i];                                              \
        }                                                                                    \
        __m256i ah[4], al[4];                                                                \
        for (int j = 0; j < 4; j++)                                                          \
            ah[j] = al[j] = _mm256_setzero_si256();                                          \
        const int8_t *xh = (const int8_t *)x->q + 512 * i, *xl = xh + 256;                   \
        _Pragma("GCC unroll 4") for (int p = 0; p < 4; p++) {                               \
            const __m256i h0 = _mm256_loadu_si256((const __m256i *)(xh + 64 * p));           \
            const __m256i h1 = _mm256_loadu_si256((const __m256i *)(xh + 64 * p + 32));      \
            const __m256i l0 = _mm256_loadu_si256((const __m256i *)(xl + 64 * p));           \
            const __m256i l1 = _mm256_loadu_si256((const __m256i *)(xl + 64 * p + 32));      \
            for (int j = 0; j < 4; j++) {                                                    \
                const __m256i c = _mm256_loadu_si256((const __m256i *)(b[j][i].qs + 32 * p)); \
                __m256i c0 = _mm256_and_si256(c, m4);                                        \
                __m256i c1 = _mm256_and_si256(_mm256_srli_epi16(c, 4), m4);                  \
                HIBITS(c0, c1, b[j] + i, p)                                                  \
                const __m256i s0 =                                                           \
                    _mm256_permutevar8x32_epi32(scw[j], _mm256_set1_epi32(2 * p));           \
                const __m256i s1 =                                                           \
                    _mm256_permutevar8x32_epi32(scw[j], _mm256_set1_epi32(2 * p + 1));       \
                ah[j] = DPW(ah[j], _mm256_maddubs_epi16(c0, h0), s0);                        \
                al[j] = DPW(al[j], _mm256_maddubs_epi16(c0, l0), s0);                        \
                ah[j] = DPW(ah[j], _mm256_maddubs_epi16(c1, h1), s1);                        \
                al[j] = DPW(al[j], _mm256_maddubs_epi16(c1, l1), s1);                        \
            }                                                                                \
        }                                                                                    \
        for (int j = 0; j < 4; j++)                                                          \
            acc[j] = _mm256_fmadd_ps(                                                        \
                _mm256_cvtepi32_ps(_mm256_add_epi32(_mm256_slli_epi32(ah[j], 8), al[j])),    \
                _mm256_set1_ps(dd[j]), acc[j]);                                              \
    }                                                                                        \
    float o[4], mn[4];                                                                       \
    _mm_storeu_ps(o, hsum4x8(acc[0], acc[1], acc[2], acc[3]));                               \
    _mm_storeu_ps(mn, hsum4x8(mins[0], mins[1], mins[2], mins[3]));                          \
    for (int j = 0; j < 4; j++)                                                              \
        out[j] = o[j] - mn[j];

/* AVX2's DPW: vpmaddwd, then the add */
#define DPW_AVX2(acc, a, b) _mm256_add_epi32((acc), _mm256_madd_epi16((a), (b)))

/* GEMV_BLOCKS_BODY's DOT4 over Q4_K (Q5_K, Q4_1) rows: X the token's x~
 * and sums */
typedef struct q4k_x {
    const x16_row *x;
    const float *xs;
} q4k_x;

/* The GEMV over Q4_K (BT, blocks of BE weights) rows for a set's DOT4
 * (ROWS: its dot4_q4k_x16_rows, DOT: its dot4_q4k_x16); the last rows one
 * at a time, the same kernel. Q5_K's and Q4_1's too. */
#define GEMV_QK_X16_BODY(BT, BE, ROWS, DOT)                                                   \
    const q4k_x X = { x, xs };                                                               \
    GEMV_BLOCKS_BODY(BT, BE, ROWS, &X)                                                       \
    for (long r = r0 + 4 * q; r < r1; r++) {                                                 \
        const BT *row = w + (size_t)r * nb, *b[4] = { row, row, row, row };                  \
        float o[4];                                                                          \
        DOT(b, x, xs, nb, o, NULL);                                                          \
        y[r] = o[0] + (bias ? bias[r] : 0.0f);                                               \
    }

/* A set's kernels over rows of type T (q4k, q5k; BT its block, BYTES its
 * size, HIBITS its fifth bits): dot4_T_x16SFX (four rows, DOT4_QK_X16_BODY
 * with the set's DPW), dot4_T_x16_rowsSFX (GEMV_BLOCKS_BODY's DOT4) and
 * PFX_gemv_T_x16 (the set's gemv_q4k_x16 or gemv_q5k_x16). */
#define QK_X16_KERNELS(T, SFX, PFX, BT, BYTES, HIBITS, DPW, VATTR, TATTR)                     \
    VATTR void dot4_##T##_x16##SFX(const BT *const b[4], const x16_row *x, const float *xs,  \
                                   long nb, float out[4], const char *const *pf)             \
    {                                                                                        \
        DOT4_QK_X16_BODY(DPW, BT, BYTES, HIBITS)                                             \
    }                                                                                        \
    VATTR void dot4_##T##_x16_rows##SFX(const BT *r0, const BT *r1, const BT *r2,            \
                                        const BT *r3, const q4k_x *X, long cols,             \
                                        float out[4], const char *const *pf)                 \
    {                                                                                        \
        const BT *const b[4] = { r0, r1, r2, r3 };                                           \
        dot4_##T##_x16##SFX(b, X->x, X->xs, cols / 256, out, pf);                            \
    }                                                                                        \
    TATTR static void PFX##_gemv_##T##_x16(const BT *w, long cols, const x16_row *x,         \
                                           const float *xs, const float *bias, float *y,     \
                                           long r0, long r1)                                 \
    {                                                                                        \
        GEMV_QK_X16_BODY(BT, 256, dot4_##T##_x16_rows##SFX, dot4_##T##_x16##SFX)             \
    }

QK_X16_KERNELS(q4k, , v, eng_q4k_block, ENG_Q4K_BLOCK_BYTES, QK_NO_HIBITS, DPW_AVX2, VALWAYS,
               TGT)
QK_X16_KERNELS(q5k, , v, eng_q5k_block, ENG_Q5K_BLOCK_BYTES, Q5K_HIBITS, DPW_AVX2, VALWAYS, TGT)

/* The four rows' d and m of block i (b: the rows' blocks) as two vectors:
 * Q4_1's [d, m] pairs in one conversion of eight f16, Q4_0's four d (m =
 * -8 d). */
#define Q41_DM_X4(b, i, vd, vm)                                                              \
    __m128 vd, vm;                                                                           \
    {                                                                                        \
        uint32_t s_[4];                                                                      \
        for (int j_ = 0; j_ < 4; j_++)                                                       \
            memcpy(&s_[j_], &(b)[j_][i], 4);                                                 \
        const __m256 f_ = _mm256_cvtph_ps(                                                   \
            _mm_set_epi32((int)s_[3], (int)s_[2], (int)s_[1], (int)s_[0]));                  \
        const __m128 lo_ = _mm256_castps256_ps128(f_), hi_ = _mm256_extractf128_ps(f_, 1);   \
        vd = _mm_shuffle_ps(lo_, hi_, _MM_SHUFFLE(2, 0, 2, 0));                              \
        vm = _mm_shuffle_ps(lo_, hi_, _MM_SHUFFLE(3, 1, 3, 1));                              \
    }
#define Q40_DM_X4(b, i, vd, vm)                                                              \
    const __m128 vd = _mm_cvtph_ps(_mm_set_epi16(0, 0, 0, 0, (short)(b)[3][i].d,             \
                                                 (short)(b)[2][i].d, (short)(b)[1][i].d,      \
                                                 (short)(b)[0][i].d));                         \
    const __m128 vm = _mm_mul_ps(vd, _mm_set1_ps(-8.0f))

/* Four Q4_1 (Q4_0: DMX4) rows against x~ in x16_prep's form (16 bits a
 * block of 32) and x's exact block sums xs: per block and row the 16 code
 * bytes' low nibbles (elements 0-15) and high ones (16-31) widened to 16
 * bits and multiplied with x~ by vpmaddwd (pairs of at most 2 * 15 *
 * 32767), eight int32 lanes scaled by d_w * d_x into the row's sum; m
 * times the block's sum of x apart. The four rows' scales of a block come
 * in one conversion (DMX4), d_w * d_x for all four in one multiply and m
 * s_x in one FMA, each row's d_w * d_x then spread by a permute: per block
 * a row about four instructions fewer than converting each row's d and m
 * alone (two scalar conversions, a multiply, a broadcast and an FMA).
 * Codes converted to f32 against the f32 x, as dot4_q8, would take four
 * conversions and four FMAs a block a row where this takes one of each. */
#define DOT4_Q4X_X16_BODY(BT, DMX4)                                                          \
    const __m128i m4 = _mm_set1_epi8(15);                                                    \
    const __m256i lane[4] = { _mm256_set1_epi32(0), _mm256_set1_epi32(1), _mm256_set1_epi32(2), \
                              _mm256_set1_epi32(3) };                                        \
    __m256 acc[4] = { _mm256_setzero_ps(), _mm256_setzero_ps(), _mm256_setzero_ps(),         \
                      _mm256_setzero_ps() };                                                 \
    __m128 am = _mm_setzero_ps();                                                            \
    for (long i = 0; i < nb; i++) {                                                          \
        if (pf)                                                                              \
            for (int j = 0; j < 4; j++)                                                      \
                _mm_prefetch(pf[j] + i * sizeof(BT), _MM_HINT_T0);                           \
        const __m256i xa = _mm256_loadu_si256((const __m256i *)(x->q + 32 * i));             \
        const __m256i xb = _mm256_loadu_si256((const __m256i *)(x->q + 32 * i + 16));        \
        DMX4(b, i, vd, vm);                                                                  \
        const __m256 dd = _mm256_castps128_ps256(_mm_mul_ps(vd, _mm_set1_ps(x->d[i])));      \
        am = _mm_fmadd_ps(vm, _mm_set1_ps(xs[i]), am);                                       \
        for (int j = 0; j < 4; j++) {                                                        \
            const __m128i v = _mm_loadu_si128((const __m128i *)b[j][i].qs);                  \
            const __m256i qa = _mm256_cvtepu8_epi16(_mm_and_si128(v, m4));                   \
            const __m256i qb = _mm256_cvtepu8_epi16(_mm_and_si128(_mm_srli_epi16(v, 4), m4)); \
            const __m256i p =                                                                \
                _mm256_add_epi32(_mm256_madd_epi16(qa, xa), _mm256_madd_epi16(qb, xb));      \
            acc[j] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(p), _mm256_permutevar8x32_ps(dd, lane[j]), \
                                     acc[j]);                                                \
        }                                                                                    \
    }                                                                                        \
    _mm_storeu_ps(out, _mm_add_ps(hsum4x8(acc[0], acc[1], acc[2], acc[3]), am));

/* A set's kernels over Q4_1 or Q4_0 rows (T q41 or q40, BT its block):
 * dot4_Tx16SFX (four rows, BODY), dot4_Tx16_rowsSFX (GEMV_BLOCKS_BODY's
 * DOT4), PFX_gemv_T_x16 (the set's gemv_q41_x16 or gemv_q40_x16) and the
 * FFN walk's dot4_Tx16_ffnSFX with its lone-slot walk (AXPY2). */
#define Q4X_X16_KERNELS(T, SFX, PFX, BT, BODY, AXPY2, VATTR, TATTR)                          \
    VATTR void dot4_##T##x16##SFX(const BT *const b[4], const x16_row *x, const float *xs,   \
                                  long nb, float out[4], const char *const *pf)              \
    {                                                                                        \
        BODY                                                                                 \
    }                                                                                        \
    VATTR void dot4_##T##x16_rows##SFX(const BT *r0, const BT *r1, const BT *r2,             \
                                       const BT *r3, const q4k_x *X, long cols,              \
                                       float out[4], const char *const *pf)                  \
    {                                                                                        \
        const BT *const b[4] = { r0, r1, r2, r3 };                                           \
        dot4_##T##x16##SFX(b, X->x, X->xs, cols / 32, out, pf);                              \
    }                                                                                        \
    TATTR static void PFX##_gemv_##T##_x16(const BT *w, long cols, const x16_row *x,         \
                                           const float *xs, const float *bias, float *y,     \
                                           long r0, long r1)                                 \
    {                                                                                        \
        GEMV_QK_X16_BODY(BT, 32, dot4_##T##x16_rows##SFX, dot4_##T##x16##SFX)                \
    }                                                                                        \
    VATTR void dot4_##T##x16_ffn##SFX(const void *r0, const void *r1, const void *r2,        \
                                      const void *r3, const ffn_args *a, long n,             \
                                      float out[4], const char *const *pf)                   \
    {                                                                                        \
        const BT *const b[4] = { r0, r1, r2, r3 };                                           \
        dot4_##T##x16##SFX(b, a->x16, a->xs, n / 32, out, pf);                               \
    }                                                                                        \
    FFN_ONE_SLOT(dot4_##T##x16_ffn##SFX, AXPY2, VATTR, a)

/* Four Q6_K rows against x~ in x16_prep_q4k's form (q = 256 h + l a block
 * of 256), as dot4_q4k_x16: per group of 32 weights a row, the 6-bit codes
 * u come together from a nibble of ql and two bits of qh; vpmaddubsw
 * multiplies them with h and with l (pairs of at most 2 * 63 * 128), and
 * DPW multiplies by the two sub-blocks' signed scales into int32. The
 * codes' offset of 32 comes off once a block a row: the row's 16 scales
 * times the prep's negated sums of h (and of l) over each 16 (one vpmaddwd),
 * times 32, start the sums. Taking it off each group's products instead
 * (32 times the same pairs of x~, a vpsubw each) was 16 instructions a
 * block a row more. So the codes less 32 meet x~ exactly in the
 * integers: a lane of the h sums is at most 8 * 2 * 16128 * 128 + 32 * 2
 * * 128 * 2048 (5.0e7), past int32 once shifted by 8, so h and l sums are
 * converted apart (rounded to 24 bits there), two FMAs a block a row. x~
 * is within d_x / 2 = max|x_block| / 65278 of x, as for Q4_K. */
#define DOT4_Q6K_X16_BODY(DPW)                                                           \
    const __m256i m4 = _mm256_set1_epi8(15), m2 = _mm256_set1_epi8(0x30);                \
    const __m256i m16 = _mm256_set1_epi32(0xffff);                                       \
    __m256 acc[4] = { _mm256_setzero_ps(), _mm256_setzero_ps(), _mm256_setzero_ps(),     \
                      _mm256_setzero_ps() };                                             \
    for (long i = 0; i < nb; i++) {                                                      \
        if (pf)                                                                          \
            for (int j = 0; j < 4; j++)                                                  \
                for (int l = 0; l < ENG_Q6K_BLOCK_BYTES; l += 64)                        \
                    _mm_prefetch(pf[j] + i * ENG_Q6K_BLOCK_BYTES + l, _MM_HINT_T0);      \
        /* per row: the 16 scales as int16 pairs, a dword each (scales                   \
         * 0-7, 8-15), d * d_x, and the sums started at the offset's term */             \
        __m256i scw[4][2], ah[4], al[4];                                                 \
        float dd[4];                                                                     \
        const __m256i nh = _mm256_loadu_si256((const __m256i *)(x->ns + 32 * i));        \
        const __m256i nl = _mm256_loadu_si256((const __m256i *)(x->ns + 32 * i + 16));   \
        for (int j = 0; j < 4; j++) {                                                    \
            const eng_q6k_block *bj = b[j] + i;                                          \
            const __m128i s8 = _mm_loadu_si128((const __m128i *)bj->scales);             \
            for (int hh = 0; hh < 2; hh++) {                                             \
                const __m256i s = _mm256_cvtepi8_epi32(hh ? _mm_srli_si128(s8, 8) : s8); \
                scw[j][hh] =                                                             \
                    _mm256_or_si256(_mm256_and_si256(s, m16), _mm256_slli_epi32(s, 16)); \
            }                                                                            \
            dd[j] = _cvtsh_ss(bj->d) * x->d[i];                                          \
            const __m256i s16 = _mm256_cvtepi8_epi16(s8);                                \
            ah[j] = _mm256_slli_epi32(_mm256_madd_epi16(s16, nh), 5);                    \
            al[j] = _mm256_slli_epi32(_mm256_madd_epi16(s16, nl), 5);                    \
        }                                                                                \
        const int8_t *xh = (const int8_t *)x->q + 512 * i, *xl = xh + 256;               \
        _Pragma("GCC unroll 8") for (int g = 0; g < 8; g++) {                            \
            const int hf = g / 4, gg = g % 4;                                            \
            const __m256i hx = _mm256_loadu_si256((const __m256i *)(xh + 32 * g));       \
            const __m256i lx = _mm256_loadu_si256((const __m256i *)(xl + 32 * g));       \
            const __m256i idx = _mm256_setr_epi32(2 * gg, 2 * gg, 2 * gg, 2 * gg, 2 * gg + 1, \
                                                  2 * gg + 1, 2 * gg + 1, 2 * gg + 1);   \
            for (int j = 0; j < 4; j++) {                                                \
                const eng_q6k_block *bj = b[j] + i;                                      \
                const __m256i c = _mm256_loadu_si256(                                    \
                    (const __m256i *)(bj->ql + 64 * hf + 32 * (gg & 1)));                \
                const __m256i t = _mm256_loadu_si256((const __m256i *)(bj->qh + 32 * hf)); \
                const __m256i lo4 =                                                      \
                    _mm256_and_si256(gg < 2 ? c : _mm256_srli_epi16(c, 4), m4);          \
                const __m256i hi2 = _mm256_and_si256(                                    \
                    gg == 0   ? _mm256_slli_epi16(t, 4)                                  \
                    : gg == 1 ? _mm256_slli_epi16(t, 2)                                  \
                    : gg == 2 ? t                                                        \
                              : _mm256_srli_epi16(t, 2),                                 \
                    m2);                                                                 \
                const __m256i u = _mm256_or_si256(lo4, hi2);                             \
                const __m256i s = _mm256_permutevar8x32_epi32(scw[j][hf], idx);          \
                ah[j] = DPW(ah[j], _mm256_maddubs_epi16(u, hx), s);                      \
                al[j] = DPW(al[j], _mm256_maddubs_epi16(u, lx), s);                      \
            }                                                                            \
        }                                                                                \
        for (int j = 0; j < 4; j++)                                                      \
            acc[j] = _mm256_fmadd_ps(                                                    \
                _mm256_cvtepi32_ps(ah[j]), _mm256_set1_ps(256.0f * dd[j]),               \
                _mm256_fmadd_ps(_mm256_cvtepi32_ps(al[j]), _mm256_set1_ps(dd[j]), acc[j])); \
    }                                                                                    \
    _mm_storeu_ps(out, hsum4x8(acc[0], acc[1], acc[2], acc[3]));

VALWAYS void dot4_q6k_x16(const eng_q6k_block *const b[4], const x16_row *x, long nb,
                          float out[4], const char *const *pf)
{
    DOT4_Q6K_X16_BODY(DPW_AVX2)
}

VALWAYS void dot4_q6k_x16_rows(const eng_q6k_block *r0, const eng_q6k_block *r1,
                               const eng_q6k_block *r2, const eng_q6k_block *r3,
                               const x16_row *x, long cols, float out[4], const char *const *pf)
{
    const eng_q6k_block *const b[4] = { r0, r1, r2, r3 };
    dot4_q6k_x16(b, x, cols / 256, out, pf);
}

/* The GEMV over Q6_K rows, as GEMV_QK_X16_BODY */
#define GEMV_Q6K_X16_BODY(ROWS, DOT)                                                          \
    GEMV_BLOCKS_BODY(eng_q6k_block, 256, ROWS, x)                                            \
    for (long r = r0 + 4 * q; r < r1; r++) {                                                 \
        const eng_q6k_block *row = w + (size_t)r * nb, *b[4] = { row, row, row, row };       \
        float o[4];                                                                          \
        DOT(b, x, nb, o, NULL);                                                              \
        y[r] = o[0] + (bias ? bias[r] : 0.0f);                                               \
    }

TGT static void v_gemv_q6k_x16(const eng_q6k_block *w, long cols, const x16_row *x,
                               const float *bias, float *y, long r0, long r1)
{
    GEMV_Q6K_X16_BODY(dot4_q6k_x16_rows, dot4_q6k_x16)
}

/* Decode's Q8_0 GEMVs with x in 16 bits. Converting every code to f32
 * made them compute-bound on AVX2 (a Zen 3 core: the decode FFN in Q8_0
 * took as long hot in cache as cold); vpmaddwd multiplies 16 codes by 16
 * x's and sums pairs in one instruction. x~ = q * d per block of 32, q in
 * [-32767, 32767]: each element within d / 2 = max|x_block| / 65534 of x,
 * about 2^-16 of the block's largest, where the codes themselves are 2^-8
 * of the weights' largest. Exact in the integers (a lane sums four
 * products of at most 128 * 32767). A NaN in x does not carry through
 * here as through f32 products; the prefill's kernels keep f32. */
/* A block's step for q within +-qmax: d = max|xb[0..n)| / qmax (n a
 * multiple of 8) returned, its inverse (0 for an all-zero block) in *id */
VALWAYS float x16_step(const float *xb, int n, float qmax, __m256 *id)
{
    const __m256 sgn = _mm256_set1_ps(-0.0f);
    __m256 m = _mm256_setzero_ps();
    for (int u = 0; u < n; u += 8)
        m = _mm256_max_ps(m, _mm256_andnot_ps(sgn, _mm256_loadu_ps(xb + u)));
    __m128 h = _mm_max_ps(_mm256_castps256_ps128(m), _mm256_extractf128_ps(m, 1));
    h = _mm_max_ps(h, _mm_movehl_ps(h, h));
    h = _mm_max_ss(h, _mm_movehdup_ps(h));
    const float d = _mm_cvtss_f32(h) / qmax;
    *id = _mm256_set1_ps(d != 0.0f ? 1.0f / d : 0.0f);
    return d;
}

/* xb[0..32) times id rounded to int16 (to nearest even, MXCSR's default),
 * in order: elements 0-15 in *q0, 16-31 in *q1 */
VALWAYS void q16x32(const float *xb, __m256 id, __m256i *q0, __m256i *q1)
{
    __m256i c[4];
    for (int u = 0; u < 4; u++)
        c[u] = _mm256_cvtps_epi32(_mm256_mul_ps(_mm256_loadu_ps(xb + 8 * u), id));
    /* packs works within 128-bit lanes: put elements back in order */
    *q0 = _mm256_permute4x64_epi64(_mm256_packs_epi32(c[0], c[1]), 0xd8);
    *q1 = _mm256_permute4x64_epi64(_mm256_packs_epi32(c[2], c[3]), 0xd8);
}

TGT static void v_x16_prep(const float *x, long n, int16_t *q, float *d)
{
    for (long i = 0; i < n / 32; i++) {
        const float *xb = x + 32 * i;
        __m256 id;
        d[i] = x16_step(xb, 32, 32767.0f, &id);
        __m256i q0, q1;
        q16x32(xb, id, &q0, &q1);
        _mm256_storeu_si256((__m256i *)(q + 32 * i), q0);
        _mm256_storeu_si256((__m256i *)(q + 32 * i + 16), q1);
    }
}

/* The sums of two runs of 16 signed bytes (v's lanes), negated: the
 * biased bytes' sums by vpsadbw, less the bias */
VALWAYS void nsum16x2(__m256i v, int16_t *a, int16_t *b)
{
    const __m256i t = _mm256_sad_epu8(_mm256_xor_si256(v, _mm256_set1_epi8(-128)),
                                      _mm256_setzero_si256());
    const __m256i u = _mm256_add_epi64(t, _mm256_shuffle_epi32(t, 0x4e));
    *a = (int16_t)(16 * 128 - _mm256_extract_epi32(u, 0));
    *b = (int16_t)(16 * 128 - _mm256_extract_epi32(u, 4));
}

/* x rounded to 16 bits a block of 256 for dot4_q4k_x16: q = round(x /
 * d), d = max|x_block| / 32639, so that q = 256 h + l with h and l signed
 * bytes (l = q's low byte as signed, h = (q - l) / 256, both within
 * [-128, 127]); the block stored as its 256 h then its 256 l (q [2n]
 * bytes, d [n / 256]), and for dot4_q6k_x16 minus the sums of each 16 h,
 * then of each 16 l (ns [n / 8], within +-2048). */
TGT static void v_x16_prep_q4k(const float *x, long n, int16_t *q, float *d, int16_t *ns)
{
    for (long i = 0; i < n / 256; i++) {
        const float *xb = x + 256 * i;
        __m256 vid;
        d[i] = x16_step(xb, 256, 32639.0f, &vid);
        int8_t *h = (int8_t *)q + 512 * i, *l = h + 256;
        for (int k = 0; k < 256; k += 32) {
            __m256i q0, q1;
            q16x32(xb + k, vid, &q0, &q1);
            const __m256i l0 = _mm256_srai_epi16(_mm256_slli_epi16(q0, 8), 8);
            const __m256i l1 = _mm256_srai_epi16(_mm256_slli_epi16(q1, 8), 8);
            const __m256i h0 = _mm256_srai_epi16(_mm256_sub_epi16(q0, l0), 8);
            const __m256i h1 = _mm256_srai_epi16(_mm256_sub_epi16(q1, l1), 8);
            const __m256i hv = _mm256_permute4x64_epi64(_mm256_packs_epi16(h0, h1), 0xd8);
            const __m256i lv = _mm256_permute4x64_epi64(_mm256_packs_epi16(l0, l1), 0xd8);
            _mm256_storeu_si256((__m256i *)(h + k), hv);
            _mm256_storeu_si256((__m256i *)(l + k), lv);
            int16_t *s = ns + 32 * i + k / 16;
            nsum16x2(hv, &s[0], &s[1]);
            nsum16x2(lv, &s[16], &s[17]);
        }
    }
}

/* Four Q8_0 rows against x~ (v_x16_prep): per block, 32 products in eight
 * int32 lanes, scaled by d_w * d_x into the row's sum. The DOT4 of the
 * GEMV and FFN walks. */
VALWAYS void dot4_q8x16(const void *r0, const void *r1, const void *r2, const void *r3,
                        const x16_row *x, long n, float out[4], const char *const *pf)
{
    const eng_q8_block *const b[4] = { r0, r1, r2, r3 };
    __m256 acc[4] = { _mm256_setzero_ps(), _mm256_setzero_ps(), _mm256_setzero_ps(),
                      _mm256_setzero_ps() };
    for (long i = 0; i < n / 32; i++) {
        if (pf)
            for (int j = 0; j < 4; j++)
                _mm_prefetch(pf[j] + i * sizeof(eng_q8_block), _MM_HINT_T0);
        const __m256i xa = _mm256_loadu_si256((const __m256i *)(x->q + 32 * i));
        const __m256i xb = _mm256_loadu_si256((const __m256i *)(x->q + 32 * i + 16));
        for (int j = 0; j < 4; j++) {
            const eng_q8_block *bb = b[j] + i;
            const __m256i qa = _mm256_cvtepi8_epi16(_mm_loadu_si128((const __m128i *)bb->q));
            const __m256i qb =
                _mm256_cvtepi8_epi16(_mm_loadu_si128((const __m128i *)(bb->q + 16)));
            const __m256i p =
                _mm256_add_epi32(_mm256_madd_epi16(qa, xa), _mm256_madd_epi16(qb, xb));
            acc[j] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(p),
                                     _mm256_set1_ps(_cvtsh_ss(bb->d) * x->d[i]), acc[j]);
        }
    }
    _mm_storeu_ps(out, hsum4x8(acc[0], acc[1], acc[2], acc[3]));
}

/* Four MXFP4 rows against x~ (v_x16_prep), as dot4_q8x16: a block's
 * codes become their levels (a byte shuffle of the table), 32 products
 * in eight int32 lanes, scaled by 2^(e - 128) * d_x. */
VALWAYS void dot4_mxfp4x16(const void *r0, const void *r1, const void *r2, const void *r3,
                           const x16_row *x, long n, float out[4], const char *const *pf)
{
    const eng_mxfp4_block *const b[4] = { r0, r1, r2, r3 };
    const __m128i lut = _mm_loadu_si128((const __m128i *)eng_mxfp4_levels);
    const __m128i m4 = _mm_set1_epi8(0x0f);
    __m256 acc[4] = { _mm256_setzero_ps(), _mm256_setzero_ps(), _mm256_setzero_ps(),
                      _mm256_setzero_ps() };
    for (long i = 0; i < n / 32; i++) {
        if (pf)
            for (int j = 0; j < 4; j++)
                _mm_prefetch(pf[j] + i * sizeof(eng_mxfp4_block), _MM_HINT_T0);
        const __m256i xa = _mm256_loadu_si256((const __m256i *)(x->q + 32 * i));
        const __m256i xb = _mm256_loadu_si256((const __m256i *)(x->q + 32 * i + 16));
        for (int j = 0; j < 4; j++) {
            const eng_mxfp4_block *bb = b[j] + i;
            const __m128i q = _mm_loadu_si128((const __m128i *)bb->qs);
            const __m256i qa = _mm256_cvtepi8_epi16(_mm_shuffle_epi8(lut, _mm_and_si128(q, m4)));
            const __m256i qb = _mm256_cvtepi8_epi16(
                _mm_shuffle_epi8(lut, _mm_and_si128(_mm_srli_epi16(q, 4), m4)));
            const __m256i p =
                _mm256_add_epi32(_mm256_madd_epi16(qa, xa), _mm256_madd_epi16(qb, xb));
            acc[j] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(p),
                                     _mm256_set1_ps(eng_e8m0_half(bb->e) * x->d[i]), acc[j]);
        }
    }
    _mm_storeu_ps(out, hsum4x8(acc[0], acc[1], acc[2], acc[3]));
}

TGT static void v_gemv_mxfp4_x16(const eng_mxfp4_block *w, long cols, const x16_row *x,
                                 const float *bias, float *y, long r0, long r1)
{
    GEMV_BLOCKS_BODY(eng_mxfp4_block, 32, dot4_mxfp4x16, x)
    for (long r = r0 + 4 * q; r < r1; r++) {
        const eng_mxfp4_block *row = w + (size_t)r * nb;
        float o[4];
        dot4_mxfp4x16(row, row, row, row, x, cols, o, NULL);
        y[r] = o[0] + (bias ? bias[r] : 0.0f);
    }
}

/* The rows left over go one at a time through the same kernel (a row four
 * times), so every row is summed the same way. */
TGT static void v_gemv_q8_x16(const eng_q8_block *w, long cols, const x16_row *x,
                              const float *bias, float *y, long r0, long r1)
{
    GEMV_BLOCKS_BODY(eng_q8_block, 32, dot4_q8x16, x)
    for (long r = r0 + 4 * q; r < r1; r++) {
        const eng_q8_block *row = w + (size_t)r * nb;
        float o[4];
        dot4_q8x16(row, row, row, row, x, cols, o, NULL);
        y[r] = o[0] + (bias ? bias[r] : 0.0f);
    }
}

TGT static void v_cvt_rows(const uint16_t *const *src, int nrows, long n, float *dst, long ldd)
{
    for (int i = 0; i < nrows; i++) {
        const uint16_t *s = src[i];
        float *d = dst + i * ldd;
        long k = 0;
        for (; k + 8 <= n; k += 8)
            _mm256_storeu_ps(d + k, _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(s + k))));
        for (; k < n; k++)
            d[k] = h2f(s[k]);
    }
}

/* 4 rows x 3 tokens; weights f32 (converted scratch) or f16. The tail of n
 * uses masked loads (masked lanes read as 0 and never fault) for f32, a
 * scalar loop for f16. */
VALWAYS void dot4x3_impl(const void *w0, const void *w1, const void *w2, const void *w3,
                         const float *const *x, long n, bool f16, float out[4][3])
{
    const void *w[4] = { w0, w1, w2, w3 };
    const float *x0 = x[0], *x1 = x[1], *x2 = x[2];
    __m256 c00 = _mm256_setzero_ps(), c01 = c00, c02 = c00, c10 = c00, c11 = c00, c12 = c00;
    __m256 c20 = c00, c21 = c00, c22 = c00, c30 = c00, c31 = c00, c32 = c00;
    long k = 0;
#define DOT4X3_STEP(W0, W1, W2, W3, X0, X1, X2)                                            \
    do {                                                                                     \
        __m256 v;                                                                            \
        v = W0;                                                                              \
        c00 = _mm256_fmadd_ps(v, X0, c00);                                                   \
        c01 = _mm256_fmadd_ps(v, X1, c01);                                                   \
        c02 = _mm256_fmadd_ps(v, X2, c02);                                                   \
        v = W1;                                                                              \
        c10 = _mm256_fmadd_ps(v, X0, c10);                                                   \
        c11 = _mm256_fmadd_ps(v, X1, c11);                                                   \
        c12 = _mm256_fmadd_ps(v, X2, c12);                                                   \
        v = W2;                                                                              \
        c20 = _mm256_fmadd_ps(v, X0, c20);                                                   \
        c21 = _mm256_fmadd_ps(v, X1, c21);                                                   \
        c22 = _mm256_fmadd_ps(v, X2, c22);                                                   \
        v = W3;                                                                              \
        c30 = _mm256_fmadd_ps(v, X0, c30);                                                   \
        c31 = _mm256_fmadd_ps(v, X1, c31);                                                   \
        c32 = _mm256_fmadd_ps(v, X2, c32);                                                   \
    } while (0)
    for (; k + 8 <= n; k += 8) {
        __m256 xa = _mm256_loadu_ps(x0 + k), xb = _mm256_loadu_ps(x1 + k),
               xc = _mm256_loadu_ps(x2 + k);
        DOT4X3_STEP(ld8(w0, k, f16), ld8(w1, k, f16), ld8(w2, k, f16), ld8(w3, k, f16), xa, xb,
                    xc);
    }
    if (k < n && !f16) {
        __m256i m = tail_mask(n - k);
        __m256 xa = _mm256_maskload_ps(x0 + k, m), xb = _mm256_maskload_ps(x1 + k, m),
               xc = _mm256_maskload_ps(x2 + k, m);
        DOT4X3_STEP(_mm256_maskload_ps((const float *)w0 + k, m),
                    _mm256_maskload_ps((const float *)w1 + k, m),
                    _mm256_maskload_ps((const float *)w2 + k, m),
                    _mm256_maskload_ps((const float *)w3 + k, m), xa, xb, xc);
        k = n;
    }
#undef DOT4X3_STEP
    float t0[4], t1[4], t2[4];
    _mm_storeu_ps(t0, hsum4x8(c00, c10, c20, c30));
    _mm_storeu_ps(t1, hsum4x8(c01, c11, c21, c31));
    _mm_storeu_ps(t2, hsum4x8(c02, c12, c22, c32));
    for (int r = 0; r < 4; r++) {
        out[r][0] = t0[r];
        out[r][1] = t1[r];
        out[r][2] = t2[r];
    }
    for (; k < n; k++) /* f16 tail */
        for (int r = 0; r < 4; r++) {
            float wv = wval(w[r], k, f16);
            out[r][0] += wv * x0[k];
            out[r][1] += wv * x1[k];
            out[r][2] += wv * x2[k];
        }
}

TGT static void v_dot4x3(const float *const *w, const float *const *x, long n, float out[4][3])
{
    dot4x3_impl(w[0], w[1], w[2], w[3], x, n, false, out);
}

TGT static void v_dot4x3_h(const uint16_t *const *w, const float *const *x, long n,
                           float out[4][3])
{
    dot4x3_impl(w[0], w[1], w[2], w[3], x, n, true, out);
}

/* acc[0..n) += a0 * d0 + a1 * d1; prefetches rows p0, p1 when not NULL. */
VALWAYS void axpy2_impl(float *acc, float a0, const void *d0, float a1, const void *d1, long n,
                        bool f16, const char *p0, const char *p1)
{
    __m256 va0 = _mm256_set1_ps(a0), va1 = _mm256_set1_ps(a1);
    const long es = (long)dsize(f16);
    long k = 0;
    for (; k + 8 <= n; k += 8) {
        if (p0 && (k * es) % 64 == 0) {
            _mm_prefetch(p0 + k * es, _MM_HINT_T0);
            _mm_prefetch(p1 + k * es, _MM_HINT_T0);
        }
        __m256 y = _mm256_loadu_ps(acc + k);
        y = _mm256_fmadd_ps(va0, ld8(d0, k, f16), y);
        y = _mm256_fmadd_ps(va1, ld8(d1, k, f16), y);
        _mm256_storeu_ps(acc + k, y);
    }
    for (; k < n; k++)
        acc[k] += a0 * wval(d0, k, f16) + a1 * wval(d1, k, f16);
}

F16_F32_WALK_KERNELS(, VALWAYS)

/* acc[0..n) += a0 * d0 + a1 * d1 over Q8_0 rows: a block's d folded into
 * its a once. */
VALWAYS void axpy2_q8(float *acc, float a0, const void *d0, float a1, const void *d1, long n,
                      const char *p0, const char *p1)
{
    const eng_q8_block *b0 = d0, *b1 = d1;
    for (long i = 0; i < n / 32; i++) {
        if (p0) {
            _mm_prefetch(p0 + i * sizeof(eng_q8_block), _MM_HINT_T0);
            _mm_prefetch(p1 + i * sizeof(eng_q8_block), _MM_HINT_T0);
        }
        const __m256 s0 = _mm256_set1_ps(a0 * _cvtsh_ss(b0[i].d));
        const __m256 s1 = _mm256_set1_ps(a1 * _cvtsh_ss(b1[i].d));
        for (int u = 0; u < 32; u += 8) {
            __m256 y = _mm256_loadu_ps(acc + 32 * i + u);
            y = _mm256_fmadd_ps(s0, ldq8(b0[i].q + u), y);
            y = _mm256_fmadd_ps(s1, ldq8(b1[i].q + u), y);
            _mm256_storeu_ps(acc + 32 * i + u, y);
        }
    }
}

FFN_ONE_SLOT(dot4_f16, axpy2_f16, VALWAYS, a->x)
FFN_ONE_SLOT(dot4_f32, axpy2_f32, VALWAYS, a->x)
FFN_ONE_SLOT(dot4_q8, axpy2_q8, VALWAYS, a->x)
FFN_ONE_SLOT(dot4_q8x16, axpy2_q8, VALWAYS, a->x16)

/* The walk's DOT4 over Q4_K gate and up rows against x~ (ffn_args.x16 in
 * x16_prep_q4k's form; X is the walk's args, for it and x's sums) */
VALWAYS void dot4_q4k_x16_ffn(const void *r0, const void *r1, const void *r2, const void *r3,
                              const ffn_args *a, long n, float out[4], const char *const *pf)
{
    const eng_q4k_block *const b[4] = { r0, r1, r2, r3 };
    dot4_q4k_x16(b, a->x16, a->xs, n / 256, out, pf);
}

FFN_ONE_SLOT(dot4_q4k_x16_ffn, axpy2_q8, VALWAYS, a)

/* The same over Q5_K gate and up rows */
VALWAYS void dot4_q5k_x16_ffn(const void *r0, const void *r1, const void *r2, const void *r3,
                              const ffn_args *a, long n, float out[4], const char *const *pf)
{
    const eng_q5k_block *const b[4] = { r0, r1, r2, r3 };
    dot4_q5k_x16(b, a->x16, a->xs, n / 256, out, pf);
}

FFN_ONE_SLOT(dot4_q5k_x16_ffn, axpy2_q8, VALWAYS, a)

/* Q4_1's and Q4_0's: the GEMVs and the walk's gate and up rows (x~ in
 * x16_prep's form) */
Q4X_X16_KERNELS(q41, , v, eng_q41_block, DOT4_Q4X_X16_BODY(eng_q41_block, Q41_DM_X4), axpy2_q8,
                VALWAYS, TGT)
Q4X_X16_KERNELS(q40, , v, eng_q40_block, DOT4_Q4X_X16_BODY(eng_q40_block, Q40_DM_X4), axpy2_q8,
                VALWAYS, TGT)

/* Q4_K, Q5_K, Q4_1 and Q4_0 slots (down rows Q8_0) against x~ only:
 * ffn_decode prepares it wherever the set has gemv_q4k_x16 (x16_prep_q4),
 * the scalar walk where it could not. */
TGT static void v_ffn_fused(const ffn_args *a, long j0, long j1, float *acc)
{
    const size_t rs = eng_ffn_row_bytes(a->w->dtype, a->w->n_embd);
    const size_t rd = eng_ffn_down_bytes(a->w->dtype, a->w->n_embd);
    if (a->w->dtype == ENG_DTYPE_Q4_K && a->x16) {
        FFN_FUSED_BODY(dot4_q4k_x16_ffn, axpy2_q8, rs, rd, a)
    } else if (a->w->dtype == ENG_DTYPE_Q5_K && a->x16) {
        FFN_FUSED_BODY(dot4_q5k_x16_ffn, axpy2_q8, rs, rd, a)
    } else if (a->w->dtype == ENG_DTYPE_Q4_1 && a->x16) {
        FFN_FUSED_BODY(dot4_q41x16_ffn, axpy2_q8, rs, rd, a)
    } else if (a->w->dtype == ENG_DTYPE_Q4_0 && a->x16) {
        FFN_FUSED_BODY(dot4_q40x16_ffn, axpy2_q8, rs, rd, a)
    } else if (eng_ffn_down_dtype(a->w->dtype) != a->w->dtype) {
        /* the other slots of 4- and 5-bit gate and up rows (down Q8_0) */
        s_ffn_fused(a, j0, j1, acc);
    } else if (a->w->dtype == ENG_DTYPE_F16) {
        FFN_FUSED_BODY(dot4_f16, axpy2_f16, rs, rd, a->x)
    } else if (a->w->dtype == ENG_DTYPE_Q8_0 && a->x16) {
        FFN_FUSED_BODY(dot4_q8x16, axpy2_q8, rs, rd, a->x16)
    } else if (a->w->dtype == ENG_DTYPE_Q8_0) {
        FFN_FUSED_BODY(dot4_q8, axpy2_q8, rs, rd, a->x)
    } else {
        FFN_FUSED_BODY(dot4_f32, axpy2_f32, rs, rd, a->x)
    }
}

TGT static void v_ffn_axpy(const ffn_args *a, const float *av, long j0, long j1, float *acc)
{
    FFN_AXPY_BY_DOWN(axpy2_q8, axpy2_f16, axpy2_f32)
}

/* Outer-product block over packed f32 down rows P [nj][ldp]: NT tokens x
 * (8 * NV) columns, accumulators in registers over the nj slots, added to
 * y unless first. */
VALWAYS void down_block(const float *P, long ldp, int nj, const float *A, long lda, float *y,
                        long ldy, bool first, const int NT, const int NV)
{
    __m256 acc[6][2];
    for (int t = 0; t < NT; t++)
        for (int v = 0; v < NV; v++)
            acc[t][v] = first ? _mm256_setzero_ps() : _mm256_loadu_ps(y + t * ldy + 8 * v);
    for (int j = 0; j < nj; j++) {
        __m256 wv[2];
        for (int v = 0; v < NV; v++)
            wv[v] = _mm256_load_ps(P + (size_t)j * ldp + 8 * v);
        for (int t = 0; t < NT; t++) {
            __m256 av = _mm256_broadcast_ss(A + t * lda + j);
            for (int v = 0; v < NV; v++)
                acc[t][v] = _mm256_fmadd_ps(av, wv[v], acc[t][v]);
        }
    }
    for (int t = 0; t < NT; t++)
        for (int v = 0; v < NV; v++)
            _mm256_storeu_ps(y + t * ldy + 8 * v, acc[t][v]);
}

VALWAYS void down_tiles(const float *P, long ldp, int nj, long nc, const float *A, long lda,
                        float *y, long ldy, bool first, const int NT)
{
    DOWN_TILES_BODY(down_block, 8, 2)
}

/* Down rows of slots jb .. jb + nj, columns [cc, cc + ncc), converted to
 * f32 into P [nj][ldp]: zeros past ncc, and for slots out of range (their
 * A is 0 too). */
VALWAYS void down_pack(const ffn_args *a, long jb, int nj, long cc, long ncc, long ldp, float *P)
{
    const eng_ffn_weights *w = a->w;
    const eng_dtype dt = eng_ffn_down_dtype(w->dtype);
    const bool f16 = dt == ENG_DTYPE_F16;
    const size_t rb = eng_dtype_bytes(dt, (size_t)w->n_embd);
    for (int i = 0; i < nj; i++) {
        long s = slot_of(a, jb + i), s2 = i + 2 < nj ? slot_of(a, jb + i + 2) : -1;
        float *d = P + (size_t)i * ldp;
        long k = 0;
        if (s >= 0 && dt == ENG_DTYPE_Q8_0) {
            /* cc is a multiple of 8: eight columns never straddle a block;
             * the row two slots on prefetched as this one is read (a
             * selection's slots are scattered, and a row is only ten lines
             * for n_embd 576: short prefills waited on them) */
            const eng_q8_block *b = (const eng_q8_block *)((const char *)w->down + (size_t)s * rb);
            const char *next = s2 >= 0 ? (const char *)w->down + (size_t)s2 * rb : NULL;
            for (; k + 8 <= ncc; k += 8) {
                const eng_q8_block *bb = b + (cc + k) / 32;
                if (next && (cc + k) % 32 == 0)
                    _mm_prefetch(next + (cc + k) / 32 * sizeof(eng_q8_block), _MM_HINT_T0);
                _mm256_store_ps(d + k, _mm256_mul_ps(ldq8(bb->q + (cc + k) % 32),
                                                     _mm256_set1_ps(_cvtsh_ss(bb->d))));
            }
            for (; k < ncc; k++)
                d[k] = wval_dt(b, cc + k, dt);
        } else if (s >= 0) {
            const char *src = (const char *)w->down + (size_t)s * rb + (size_t)cc * dsize(f16);
            if (f16)
                for (; k + 8 <= ncc; k += 8)
                    _mm256_store_ps(d + k, ld8(src, k, true));
            else
                for (; k + 8 <= ncc; k += 8)
                    _mm256_store_ps(d + k, ld8(src, k, false));
            for (; k < ncc; k++)
                d[k] = wval(src, k, f16);
        }
        for (; k < ldp; k++)
            d[k] = 0.0f;
    }
}

TGT static void v_ffn_down(const ffn_args *a, const float *A, long lda, float *y, long ldy,
                           int nt, long c0, long nc, float *scratch)
{
    FFN_DOWN_BODY(down_tiles)
}

/* The sketch's dot products on the regrouped x~ (q8_group), two blocks
 * at a time: 32 code bytes hold blocks b and b + 1, their low nibbles
 * elements 0-15 of each (the group's first 64 bytes hold the same of x~)
 * and their high nibbles elements 16-31 (its last 64). So a pair costs
 * one load, one shift, two masks and two multiply-adds, whose int16 sums
 * add without overflow (4 * 15 * 127 at most); a block per 128-bit lane
 * comes out, 4 int32 lanes each, and a chunk of eight blocks needs three
 * horizontal adds, not six. One block a lane, as q8_row's own layout gave,
 * took about 1.5 times as long (the kernel alone, sketch in cache). With
 * one: block b only, 16 bytes read (the row may end there). xq: the
 * pair's place in its group (q, or q + 32 for the group's second pair). */
VALWAYS __m256i q4q8_pair(const uint8_t *codes, const int8_t *xq, bool one)
{
    const __m256i c = one ? _mm256_zextsi128_si256(_mm_loadu_si128((const __m128i *)codes))
                          : _mm256_loadu_si256((const __m256i *)codes);
    const __m256i m = _mm256_set1_epi8(15);
    const __m256i lo = _mm256_and_si256(c, m), hi = _mm256_and_si256(_mm256_srli_epi16(c, 4), m);
    const __m256i s =
        _mm256_add_epi16(_mm256_maddubs_epi16(lo, _mm256_loadu_si256((const __m256i *)xq)),
                         _mm256_maddubs_epi16(hi, _mm256_loadu_si256((const __m256i *)(xq + 64))));
    return _mm256_madd_epi16(s, _mm256_set1_epi16(1));
}

/* Four pairs' lanes (blocks 0|1, 2|3, 4|5, 6|7) to the eight block sums
 * in order: the adds leave [0 2 4 6 | 1 3 5 7]. */
VALWAYS __m256i q4q8_sums(__m256i v0, __m256i v1, __m256i v2, __m256i v3)
{
    const __m256i h = _mm256_hadd_epi32(_mm256_hadd_epi32(v0, v1), _mm256_hadd_epi32(v2, v3));
    return _mm256_permutevar8x32_epi32(h, _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7));
}

/* One sketch row against x~, eight blocks at a time: their integer sums
 * side by side, the offset (8 * x~'s block sums) off, then scaled by
 * eight scales in one go. The last 1-7 blocks the same, lanes past them
 * masked (their scales are code bytes, x~'s past its end unread). */
VALWAYS float q4q8_row(const uint8_t *w, const q8_row *x, long nb)
{
    const uint8_t *codes = w + 2 * nb;
    const q8_group *g = x->g; /* blocks i .. i + 3 */
    __m256 acc = _mm256_setzero_ps();
    long i = 0;
    for (; i + 8 <= nb; i += 8, g += 2) {
        __m256i s = q4q8_sums(q4q8_pair(codes + 16 * i, g[0].q, false),
                              q4q8_pair(codes + 16 * (i + 2), g[0].q + 32, false),
                              q4q8_pair(codes + 16 * (i + 4), g[1].q, false),
                              q4q8_pair(codes + 16 * (i + 6), g[1].q + 32, false));
        s = _mm256_sub_epi32(
            s, _mm256_slli_epi32(_mm256_loadu_si256((const __m256i *)(x->sum + i)), 3));
        const __m256 d = _mm256_mul_ps(
            _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(w + 2 * i))),
            _mm256_loadu_ps(x->d + i));
        acc = _mm256_fmadd_ps(d, _mm256_cvtepi32_ps(s), acc);
    }
    if (i < nb) {
        const int m = (int)(nb - i);
        __m256i v[4];
        for (int p = 0; p < 4; p++)
            v[p] = 2 * p < m ? q4q8_pair(codes + 16 * (i + 2 * p), g[p / 2].q + 32 * (p % 2),
                                         2 * p + 1 == m)
                             : _mm256_setzero_si256();
        const __m256i mask =
            _mm256_cmpgt_epi32(_mm256_set1_epi32(m), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
        const __m256i s = _mm256_sub_epi32(
            q4q8_sums(v[0], v[1], v[2], v[3]),
            _mm256_slli_epi32(_mm256_maskload_epi32(x->sum + i, mask), 3));
        __m256 d = _mm256_mul_ps(_mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(w + 2 * i))),
                                 _mm256_maskload_ps(x->d + i, mask));
        d = _mm256_and_ps(d, _mm256_castsi256_ps(mask));
        acc = _mm256_fmadd_ps(d, _mm256_cvtepi32_ps(s), acc);
    }
    return hsum8(acc);
}

TGT static void v_dot2_q4q8(const uint8_t *w, const q8_row *x, long nb, float out[2])
{
    out[0] = q4q8_row(w, x, nb);
    out[1] = q4q8_row(w + nb * ENG_SKETCH_BLOCK_BYTES, x, nb);
}

/* Two rows' sums of nq queries' chains into [row a: g0..g3 | row b: g0..g3],
 * lanes past nq repeating the last. */
VALWAYS __m256 sums2x4(__m256 *a, __m256 *b, const int nq)
{
    for (int g = nq; g < 4; g++) {
        a[g] = a[nq - 1];
        b[g] = b[nq - 1];
    }
    /* per row: [g0 g0 g1 g1 | ...] pairs, then [g0 g1 g2 g3] in each half */
    const __m256 ra = _mm256_hadd_ps(_mm256_hadd_ps(a[0], a[1]), _mm256_hadd_ps(a[2], a[3]));
    const __m256 rb = _mm256_hadd_ps(_mm256_hadd_ps(b[0], b[1]), _mm256_hadd_ps(b[2], b[3]));
    return _mm256_add_ps(_mm256_permute2f128_ps(ra, rb, 0x20),
                         _mm256_permute2f128_ps(ra, rb, 0x31));
}

/* Two K rows against nq queries (lanes past nq repeat the last): each row
 * converted once for the group, 2 nq independent FMA chains, and the sums
 * reduced together into [row 0: g0..g3 | row 1: g0..g3]. nq is a constant
 * at every call, so each count compiles to its own registers-only loop and
 * a group of 3 (SmolLM2, Llama-3.2-3B) or 1 does no work for a 4th. */
VALWAYS __m256 dot2xq_h(const float *const *qq, const uint16_t *k0, const uint16_t *k1, long n,
                        const int nq)
{
    __m256 a[4], b[4];
    for (int g = 0; g < 4; g++)
        a[g] = b[g] = _mm256_setzero_ps();
    long i = 0;
    for (; i + 8 <= n; i += 8) {
        const __m256 x = ld8(k0, i, true), y = ld8(k1, i, true);
        for (int g = 0; g < nq; g++) {
            const __m256 qv = _mm256_loadu_ps(qq[g] + i);
            a[g] = _mm256_fmadd_ps(x, qv, a[g]);
            b[g] = _mm256_fmadd_ps(y, qv, b[g]);
        }
    }
    __m256 r = sums2x4(a, b, nq);
    if (i < n) { /* head_dim not a multiple of 8 (qq[g] for g >= nq is the last) */
        float t[8];
        _mm256_storeu_ps(t, r);
        for (; i < n; i++) {
            const float x = h2f(k0[i]), y = h2f(k1[i]);
            for (int g = 0; g < 4; g++) {
                t[g] += x * qq[g][i];
                t[4 + g] += y * qq[g][i];
            }
        }
        r = _mm256_loadu_ps(t);
    }
    return r;
}

VALWAYS void scores_q(const float *const *qq, const uint16_t *k, const uint16_t *v, size_t stride,
                      int nb, int n_pf, long n, float scale, float (*s)[4], float *bm,
                      const int nq)
{
    const __m256 sc = _mm256_set1_ps(scale);
    __m256 mx = _mm256_set1_ps(-INFINITY);
    int i = 0;
    for (; i + 2 <= nb; i += 2) {
        if (i < n_pf)
            att_prefetch(k, v, stride, i, n);
        if (i + 1 < n_pf)
            att_prefetch(k, v, stride, i + 1, n);
        const uint16_t *k0 = k + (size_t)i * stride;
        const __m256 r = _mm256_mul_ps(dot2xq_h(qq, k0, k0 + stride, n, nq), sc);
        _mm256_storeu_ps(&s[i][0], r);
        mx = _mm256_max_ps(r, mx); /* a NaN score is passed over, as before */
    }
    if (i < nb) { /* the odd row, paired with itself */
        if (i < n_pf)
            att_prefetch(k, v, stride, i, n);
        const uint16_t *k0 = k + (size_t)i * stride;
        const __m256 r = _mm256_mul_ps(dot2xq_h(qq, k0, k0, n, nq), sc);
        _mm_storeu_ps(&s[i][0], _mm256_castps256_ps128(r));
        mx = _mm256_max_ps(r, mx);
    }
    _mm_storeu_ps(bm, _mm_max_ps(_mm256_castps256_ps128(mx), _mm256_extractf128_ps(mx, 1)));
}

/* scores4_h two rows at a time: the sums of a pair need one reduction
 * instead of a horizontal sum each, and no row waits on the one before (a
 * call a row spent most of its time on the reduction's latency). */
TGT static void v_scores4_h(const float *const *q, int G, const uint16_t *k, const uint16_t *v,
                            size_t stride, int nb, int n_pf, long n, float scale, float (*s)[4],
                            float *bm)
{
    const float *qq[4];
    for (int g = 0; g < 4; g++)
        qq[g] = q[g < G ? g : G - 1];
    BY_GROUP(G, scores_q, qq, k, v, stride, nb, n_pf, n, scale, s, bm);
}

/* The probabilities of a block of keys times their V rows for nq heads
 * (a constant, as in dot2xq_h): 16 columns at a time, their 2 nq sums in
 * registers over the block's rows (independent FMA chains: one column
 * block of four heads was latency-bound), a row's halves converted once,
 * and o read and written once a block instead of once a key. */
VALWAYS void pv_q(float *const *o, const float *p, const uint16_t *v, size_t stride, int nb,
                  long n, const int nq)
{
    long c = 0;
    for (; c + 16 <= n; c += 16) {
        __m256 a[4], b[4];
        for (int g = 0; g < nq; g++) {
            a[g] = _mm256_loadu_ps(o[g] + c);
            b[g] = _mm256_loadu_ps(o[g] + c + 8);
        }
        for (int i = 0; i < nb; i++) {
            const __m256 vv = ld8(v + (size_t)i * stride, c, true);
            const __m256 vw = ld8(v + (size_t)i * stride, c + 8, true);
            for (int g = 0; g < nq; g++) {
                const __m256 pg = _mm256_broadcast_ss(p + 4 * i + g);
                a[g] = _mm256_fmadd_ps(pg, vv, a[g]);
                b[g] = _mm256_fmadd_ps(pg, vw, b[g]);
            }
        }
        for (int g = 0; g < nq; g++) {
            _mm256_storeu_ps(o[g] + c, a[g]);
            _mm256_storeu_ps(o[g] + c + 8, b[g]);
        }
    }
    for (; c + 8 <= n; c += 8) {
        __m256 a[4];
        for (int g = 0; g < nq; g++)
            a[g] = _mm256_loadu_ps(o[g] + c);
        for (int i = 0; i < nb; i++) {
            const __m256 vv = ld8(v + (size_t)i * stride, c, true);
            for (int g = 0; g < nq; g++)
                a[g] = _mm256_fmadd_ps(_mm256_broadcast_ss(p + 4 * i + g), vv, a[g]);
        }
        for (int g = 0; g < nq; g++)
            _mm256_storeu_ps(o[g] + c, a[g]);
    }
    for (; c < n; c++)
        for (int i = 0; i < nb; i++) {
            const float vv = h2f(v[(size_t)i * stride + c]);
            for (int g = 0; g < nq; g++)
                o[g][c] += p[4 * i + g] * vv;
        }
}

TGT static void v_pv4_h(float *const *o, int G, const float *p, const uint16_t *v, size_t stride,
                        int nb, long n)
{
    BY_GROUP(G, pv_q, o, p, v, stride, nb, n);
}

/* Eight codes of a Q8_0 block as floats. */
VALWAYS __m256 ld8_q8(const int8_t *q)
{
    return _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_loadl_epi64((const __m128i *)q)));
}

/* dot2xq_h over rows of nb Q8_0 blocks, with the queries rounded to 16
 * bits (one scale a head, as x16_prep rounds a GEMV's x a block): a K
 * block's codes widen to 16 bits and madd against them, so a block costs
 * each head two integer multiply-adds, a convert and one FMA, where a
 * float kernel spent a multiply by d and four FMAs (on the pipes the FMAs
 * need: 1.25x the f16 kernel's time in cache). Sums of 32 products stay
 * below 2^24, exact in float. */
VALWAYS __m256 dot2xq_q8i(const int16_t (*qi)[QI_MAX], const eng_q8_block *k0,
                          const eng_q8_block *k1, long nb, const int nq)
{
    __m256 a[4], b[4];
    for (int g = 0; g < 4; g++)
        a[g] = b[g] = _mm256_setzero_ps();
    for (long j = 0; j < nb; j++) {
        const __m256i x0 = _mm256_cvtepi8_epi16(_mm_loadu_si128((const __m128i *)k0[j].q));
        const __m256i x1 = _mm256_cvtepi8_epi16(_mm_loadu_si128((const __m128i *)(k0[j].q + 16)));
        const __m256i y0 = _mm256_cvtepi8_epi16(_mm_loadu_si128((const __m128i *)k1[j].q));
        const __m256i y1 = _mm256_cvtepi8_epi16(_mm_loadu_si128((const __m128i *)(k1[j].q + 16)));
        const __m256 d0 = _mm256_set1_ps(_cvtsh_ss(k0[j].d));
        const __m256 d1 = _mm256_set1_ps(_cvtsh_ss(k1[j].d));
        for (int g = 0; g < nq; g++) {
            const __m256i q0 = _mm256_load_si256((const __m256i *)(qi[g] + 32 * j));
            const __m256i q1 = _mm256_load_si256((const __m256i *)(qi[g] + 32 * j + 16));
            const __m256i sx = _mm256_add_epi32(_mm256_madd_epi16(x0, q0), _mm256_madd_epi16(x1, q1));
            const __m256i sy = _mm256_add_epi32(_mm256_madd_epi16(y0, q0), _mm256_madd_epi16(y1, q1));
            a[g] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(sx), d0, a[g]);
            b[g] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(sy), d1, b[g]);
        }
    }
    return sums2x4(a, b, nq);
}

VALWAYS void scores_q8i(const int16_t (*qi)[QI_MAX], const float *dq, const eng_q8_block *k,
                        const eng_q8_block *v, size_t stride, int nb, int n_pf, long n,
                        float scale, float (*s)[4], float *bm, const int nq)
{
    /* [scale dq_0 .. dq_3 | the same] */
    const __m128 sq = _mm_mul_ps(_mm_loadu_ps(dq), _mm_set1_ps(scale));
    const __m256 sc = _mm256_insertf128_ps(_mm256_castps128_ps256(sq), sq, 1);
    __m256 mx = _mm256_set1_ps(-INFINITY);
    int i = 0;
    for (; i + 2 <= nb; i += 2) {
        if (i < n_pf)
            att_prefetch_q8(k, v, stride, i, n / 32);
        if (i + 1 < n_pf)
            att_prefetch_q8(k, v, stride, i + 1, n / 32);
        const eng_q8_block *k0 = k + (size_t)i * stride;
        const __m256 r = _mm256_mul_ps(dot2xq_q8i(qi, k0, k0 + stride, n / 32, nq), sc);
        _mm256_storeu_ps(&s[i][0], r);
        mx = _mm256_max_ps(r, mx);
    }
    if (i < nb) {
        if (i < n_pf)
            att_prefetch_q8(k, v, stride, i, n / 32);
        const eng_q8_block *k0 = k + (size_t)i * stride;
        const __m256 r = _mm256_mul_ps(dot2xq_q8i(qi, k0, k0, n / 32, nq), sc);
        _mm_storeu_ps(&s[i][0], _mm256_castps256_ps128(r));
        mx = _mm256_max_ps(r, mx);
    }
    _mm_storeu_ps(bm, _mm_max_ps(_mm256_castps256_ps128(mx), _mm256_extractf128_ps(mx, 1)));
}

/* q in 16 bits: q = qi * dq with dq = max|q| / 32767 (0 for a zero row);
 * n a multiple of 16. */
TGT static void q16_head(const float *q, long n, int16_t *qi, float *dq)
{
    __m256 mx = _mm256_setzero_ps();
    const __m256 sign = _mm256_set1_ps(-0.0f);
    for (long i = 0; i < n; i += 8)
        mx = _mm256_max_ps(mx, _mm256_andnot_ps(sign, _mm256_loadu_ps(q + i)));
    const __m128 m4 = _mm_max_ps(_mm256_castps256_ps128(mx), _mm256_extractf128_ps(mx, 1));
    const __m128 m2 = _mm_max_ps(m4, _mm_movehl_ps(m4, m4));
    const float amax = _mm_cvtss_f32(_mm_max_ss(m2, _mm_movehdup_ps(m2)));
    *dq = amax / 32767.0f;
    const __m256 id = _mm256_set1_ps(amax > 0.0f ? 32767.0f / amax : 0.0f);
    for (long i = 0; i < n; i += 16) {
        const __m256i lo = _mm256_cvtps_epi32(_mm256_mul_ps(_mm256_loadu_ps(q + i), id));
        const __m256i hi = _mm256_cvtps_epi32(_mm256_mul_ps(_mm256_loadu_ps(q + i + 8), id));
        /* packs works per 128-bit lane: [lo0-3 hi0-3 lo4-7 hi4-7] back in order */
        _mm256_store_si256((__m256i *)(qi + i),
                           _mm256_permute4x64_epi64(_mm256_packs_epi32(lo, hi), 0xD8));
    }
}

TGT static void v_scores4_q8(const float *const *q, int G, const eng_q8_block *k,
                             const eng_q8_block *v, size_t stride, int nb, int n_pf, long n,
                             float scale, float (*s)[4], float *bm)
{
    if (n > QI_MAX) { /* heads over 256 wide: none of the families we load */
        s_scores4_q8(q, G, k, v, stride, nb, n_pf, n, scale, s, bm);
        return;
    }
    _Alignas(32) int16_t qi[4][QI_MAX];
    float dq[4];
    q16_group(q, G, n, qi, dq, q16_head);
    BY_GROUP(G, scores_q8i, (const int16_t (*)[QI_MAX])qi, dq, k, v, stride, nb, n_pf, n, scale,
             s, bm);
}

/* pv_q over rows of Q8_0 blocks: the weights times each row's d once
 * (pd), then 16 columns (half a block) at a time as pv_q. */
VALWAYS void pv_q8(float *const *o, const float *p, const eng_q8_block *v, size_t stride,
                   int nb, long n, const int nq)
{
    float pd[ATT_BLOCK][4];
    for (long c = 0; c < n; c += 16) {
        const long jb = c / 32, off = c % 32;
        __m256 a[4], b[4];
        if (off == 0) /* a new block of each row: its d */
            for (int i = 0; i < nb; i++)
                _mm_storeu_ps(pd[i],
                              _mm_mul_ps(_mm_loadu_ps(p + 4 * i),
                                         _mm_set1_ps(_cvtsh_ss(v[(size_t)i * stride + jb].d))));
        for (int g = 0; g < nq; g++) {
            a[g] = _mm256_loadu_ps(o[g] + c);
            b[g] = _mm256_loadu_ps(o[g] + c + 8);
        }
        for (int i = 0; i < nb; i++) {
            const int8_t *q = v[(size_t)i * stride + jb].q + off;
            const __m256 vv = ld8_q8(q), vw = ld8_q8(q + 8);
            for (int g = 0; g < nq; g++) {
                const __m256 pg = _mm256_broadcast_ss(&pd[i][g]);
                a[g] = _mm256_fmadd_ps(pg, vv, a[g]);
                b[g] = _mm256_fmadd_ps(pg, vw, b[g]);
            }
        }
        for (int g = 0; g < nq; g++) {
            _mm256_storeu_ps(o[g] + c, a[g]);
            _mm256_storeu_ps(o[g] + c + 8, b[g]);
        }
    }
}

TGT static void v_pv4_q8(float *const *o, int G, const float *p, const eng_q8_block *v,
                         size_t stride, int nb, long n)
{
    BY_GROUP(G, pv_q8, o, p, v, stride, nb, n);
}

/* e^x on eight lanes, as exp512: n = round(x / ln 2), r = x - n ln 2 in
 * two parts, a degree-6 polynomial, times 2^n built in the exponent bits.
 * Below -87 (where 2^n would leave the normal range) the result is 0, as
 * near as expf's denormals; NaN stays NaN. */
VALWAYS __m256 exp256(__m256 x)
{
    const __m256 keep = _mm256_cmp_ps(x, _mm256_set1_ps(-87.0f), _CMP_NLT_UQ);
    x = _mm256_min_ps(_mm256_set1_ps(88.0f), _mm256_max_ps(_mm256_set1_ps(-87.0f), x));
    const __m256 n = _mm256_round_ps(_mm256_mul_ps(x, _mm256_set1_ps(1.44269504f)),
                                     _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    __m256 r = _mm256_fnmadd_ps(n, _mm256_set1_ps(0.693359375f), x);
    r = _mm256_fnmadd_ps(n, _mm256_set1_ps(-2.12194440e-4f), r);
    __m256 p = _mm256_set1_ps(1.0f / 720);
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f / 120));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f / 24));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f / 6));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(0.5f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f));
    const __m256i e = _mm256_slli_epi32(
        _mm256_add_epi32(_mm256_cvtps_epi32(n), _mm256_set1_epi32(127)), 23);
    return _mm256_and_ps(_mm256_mul_ps(p, _mm256_castsi256_ps(e)), keep);
}

/* Two keys of up to four heads a register (decode attention called libm's
 * expf once per score: 4 % of a phi 0.4 decode step at a few hundred
 * positions). l[g] sums the even and the odd keys, then both. */
TGT static void v_exp4(float (*s)[4], int nb, const float *m, int G, float *l)
{
    float mm[8], gm[8];
    for (int g = 0; g < 4; g++) {
        mm[g] = mm[g + 4] = g < G ? m[g] : 0.0f;
        gm[g] = gm[g + 4] = g < G ? 1.0f : 0.0f;
    }
    const __m256 mv = _mm256_loadu_ps(mm);
    const __m256 live = _mm256_cmp_ps(_mm256_loadu_ps(gm), _mm256_setzero_ps(), _CMP_NEQ_OQ);
    __m256 acc = _mm256_setzero_ps();
    int i = 0;
    for (; i + 2 <= nb; i += 2) {
        const __m256 e = _mm256_and_ps(exp256(_mm256_sub_ps(_mm256_loadu_ps(&s[i][0]), mv)), live);
        _mm256_storeu_ps(&s[i][0], e);
        acc = _mm256_add_ps(acc, e);
    }
    if (i < nb) { /* the last key alone, in the low half */
        const __m256 v = _mm256_insertf128_ps(_mm256_setzero_ps(), _mm_loadu_ps(&s[i][0]), 0);
        const __m256 e = _mm256_and_ps(exp256(_mm256_sub_ps(v, mv)), live);
        const __m128 lo = _mm256_castps256_ps128(e);
        _mm_storeu_ps(&s[i][0], lo);
        acc = _mm256_add_ps(acc, _mm256_insertf128_ps(_mm256_setzero_ps(), lo, 0));
    }
    float a[8];
    _mm256_storeu_ps(a, acc);
    for (int g = 0; g < 4; g++)
        l[g] += a[g] + a[g + 4];
}

TGT static void v_scale(float *o, float s, long n)
{
    __m256 vs = _mm256_set1_ps(s);
    long i = 0;
    for (; i + 8 <= n; i += 8)
        _mm256_storeu_ps(o + i, _mm256_mul_ps(_mm256_loadu_ps(o + i), vs));
    for (; i < n; i++)
        o[i] *= s;
}

TGT static void v_add(float *y, const float *x, long n)
{
    long i = 0;
    for (; i + 8 <= n; i += 8)
        _mm256_storeu_ps(y + i, _mm256_add_ps(_mm256_loadu_ps(y + i), _mm256_loadu_ps(x + i)));
    for (; i < n; i++)
        y[i] += x[i];
}

TGT static void v_to_f16(const float *src, uint16_t *dst, long n)
{
    long i = 0;
    for (; i + 8 <= n; i += 8)
        _mm_storeu_si128((__m128i *)(dst + i),
                         _mm256_cvtps_ph(_mm256_loadu_ps(src + i), _MM_FROUND_TO_NEAREST_INT));
    for (; i < n; i++)
        dst[i] = f2h(src[i]);
}

TGT static void v_to_f32(const uint16_t *src, float *dst, long n)
{
    long i = 0;
    for (; i + 8 <= n; i += 8)
        _mm256_storeu_ps(dst + i, ld8(src, i, true));
    for (; i < n; i++)
        dst[i] = h2f(src[i]);
}

/* The AVX2 set's ops, shared with the AVX-512 VNNI set below (which has
 * its own prefill down projection, softmax exponentials and Q8_0 kernels). */
#define AVX2_OPS                                                                             \
    .gemv = v_gemv, .cvt_rows = v_cvt_rows, .dot4x3 = v_dot4x3, .dot4x3_h = v_dot4x3_h,      \
    .scores4_h = v_scores4_h, .pv4_h = v_pv4_h, .scores4_q8 = v_scores4_q8, .pv4_q8 = v_pv4_q8, \
    .scale = v_scale, .add = v_add, .to_f16 = v_to_f16, \
    .to_f32 = v_to_f32, .dq_row = v_dq_row, .gemv_mxfp4 = s_gemv_mxfp4,                     \
    .gemv_mxfp4_x16 = v_gemv_mxfp4_x16

static const kernels kern_avx2 = {
    .name = "avx2",
    AVX2_OPS,
    .ffn_fused = v_ffn_fused,
    .ffn_axpy = v_ffn_axpy,
    .gemv_q8 = v_gemv_q8,
    .gemv_q4k = s_gemv_q4k, /* decode takes gemv_q4k_x16 */
    .gemv_q6k = s_gemv_q6k, /* and gemv_q6k_x16 */
    .gemv_q5k = s_gemv_q5k, /* and gemv_q5k_x16 */
    .gemv_q41 = s_gemv_q41, /* and gemv_q41_x16 */
    .gemv_q40 = s_gemv_q40, /* and gemv_q40_x16 */
    .x16_prep_q4 = v_x16_prep,
    .gemv_q41_x16 = v_gemv_q41_x16,
    .gemv_q40_x16 = v_gemv_q40_x16,
    .x16_prep = v_x16_prep,
    .gemv_q8_x16 = v_gemv_q8_x16,
    .x16_prep_q4k = v_x16_prep_q4k,
    .gemv_q4k_x16 = v_gemv_q4k_x16,
    .gemv_q6k_x16 = v_gemv_q6k_x16,
    .gemv_q5k_x16 = v_gemv_q5k_x16,
    .ffn_down = v_ffn_down,
    .exp4 = v_exp4,
    .dot2_q4q8 = v_dot2_q4q8,
    .q8_groups = true,
};

/* ---- AVX-512 VNNI: the sketch's dot products -------------------------- */

/* Per-token picking scores every loaded neuron's 4-bit sketch, and with
 * AVX2 that is compute-bound (about 9 instructions a block of 32: nibble
 * unpacking, multiply-adds, the horizontal sums). vpdpbusd multiplies
 * unsigned codes by signed bytes and sums each four into an int32 lane, so
 * four blocks take two of them on the regrouped x~ (q8_group): the low
 * nibbles of 64 code bytes meet elements 0-15 of four blocks, the high
 * ones elements 16-31. The rest of the table is AVX2's. */
#define TGT512 __attribute__((target("avx2,fma,f16c,avx512f,avx512bw,avx512vl,avx512vnni")))
#define VALWAYS512 TGT512 ALWAYS

VALWAYS512 float q4q8_row512(const uint8_t *w, const q8_group *g, long nb)
{
    const uint8_t *codes = w + 2 * nb;
    /* lanes 4i..4i+3 take block i's scale */
    const __m512i spread = _mm512_set_epi32(3, 3, 3, 3, 2, 2, 2, 2, 1, 1, 1, 1, 0, 0, 0, 0);
    const __m512i m4 = _mm512_set1_epi8(15);
    __m512 acc = _mm512_setzero_ps();
    for (long b = 0; b < nb; b += 4, g++) {
        __m512i c;
        __m128i dh;
        if (b + 4 <= nb) {
            c = _mm512_loadu_si512(codes + 16 * b);
            dh = _mm_loadl_epi64((const __m128i *)(w + 2 * b));
        } else {
            /* a last group of 1-3 blocks: nothing read past the row */
            const int nl = (int)(nb - b);
            c = _mm512_maskz_loadu_epi8((__mmask64)((1ull << (16 * nl)) - 1), codes + 16 * b);
            dh = _mm_maskz_loadu_epi16((__mmask8)((1u << nl) - 1), w + 2 * b);
        }
        __m512i lo = _mm512_and_si512(c, m4), hi = _mm512_and_si512(_mm512_srli_epi16(c, 4), m4);
        __m512i sum = _mm512_dpbusd_epi32(_mm512_setzero_si512(), lo, _mm512_load_si512(g->q));
        sum = _mm512_dpbusd_epi32(sum, hi, _mm512_load_si512(g->q + 64));
        sum = _mm512_sub_epi32(sum, _mm512_load_si512(g->off));
        __m512 dw = _mm512_permutexvar_ps(spread, _mm512_castps128_ps512(_mm_cvtph_ps(dh)));
        acc = _mm512_fmadd_ps(_mm512_mul_ps(dw, _mm512_load_ps(g->d)), _mm512_cvtepi32_ps(sum),
                              acc);
    }
    return _mm512_reduce_add_ps(acc);
}

TGT512 static void v512_dot2_q4q8(const uint8_t *w, const q8_row *x, long nb, float out[2])
{
    out[0] = q4q8_row512(w, x->g, nb);
    out[1] = q4q8_row512(w + nb * ENG_SKETCH_BLOCK_BYTES, x->g, nb);
}

/* Prefill's products as outer products on 512-bit registers: a row's
 * dot products (dot4x3) end in horizontal sums, and with AVX-512 they ran
 * at 0.6 of AVX2; here a k step loads 32 rows' values (two registers),
 * broadcasts 6 tokens' x[k] and does 12 multiply-adds into 12 registers,
 * and nothing is reduced across lanes (80 GFLOP/s a core against dot4x3's
 * 51 on this project's machine). The rows are transposed into P once per
 * block and reused by every 6 tokens. */

/* 16 x 16 floats: r[i] becomes column i. Unpacks of floats then of
 * pairs leave, in each 128-bit lane L of register 4g + c, column 4L + c of
 * rows 4g .. 4g + 3; two rounds of lane shuffles gather each column's four
 * lanes. */
VALWAYS512 void transpose16(__m512 r[16])
{
    __m512 t[16], u[16];
    for (int i = 0; i < 16; i += 2) {
        t[i] = _mm512_unpacklo_ps(r[i], r[i + 1]);
        t[i + 1] = _mm512_unpackhi_ps(r[i], r[i + 1]);
    }
    for (int g = 0; g < 16; g += 4) {
        const __m512d a = _mm512_castps_pd(t[g]), b = _mm512_castps_pd(t[g + 1]);
        const __m512d c = _mm512_castps_pd(t[g + 2]), d = _mm512_castps_pd(t[g + 3]);
        u[g] = _mm512_castpd_ps(_mm512_unpacklo_pd(a, c));
        u[g + 1] = _mm512_castpd_ps(_mm512_unpackhi_pd(a, c));
        u[g + 2] = _mm512_castpd_ps(_mm512_unpacklo_pd(b, d));
        u[g + 3] = _mm512_castpd_ps(_mm512_unpackhi_pd(b, d));
    }
    for (int c = 0; c < 4; c++) {
        const __m512 v0 = _mm512_shuffle_f32x4(u[c], u[4 + c], 0x88);
        const __m512 v1 = _mm512_shuffle_f32x4(u[c], u[4 + c], 0xdd);
        const __m512 v2 = _mm512_shuffle_f32x4(u[8 + c], u[12 + c], 0x88);
        const __m512 v3 = _mm512_shuffle_f32x4(u[8 + c], u[12 + c], 0xdd);
        r[c] = _mm512_shuffle_f32x4(v0, v2, 0x88);
        r[4 + c] = _mm512_shuffle_f32x4(v1, v3, 0x88);
        r[8 + c] = _mm512_shuffle_f32x4(v0, v2, 0xdd);
        r[12 + c] = _mm512_shuffle_f32x4(v1, v3, 0xdd);
    }
}

/* The 512-bit packs: P [n][32] from up to 32 rows, 16 rows by 16 values
 * (ROW(i, k): row i's values k .. k + 15 as one register) transposed at
 * a time, rows past nr zero; the values past n's last multiple of 16 by
 * TAIL(i, k), one at a time. An empty half of the 32 is only zeroed. With
 * eight rows of eight values a step they took about a third of a short
 * prompt's prefill (they dequantize the whole model whatever its length). */
#define PACK16_BODY(ROW, TAIL)                                                               \
    for (int i0 = 0; i0 < 32; i0 += 16) {                                                    \
        long k = 0;                                                                          \
        for (; k + 16 <= n; k += 16) {                                                       \
            __m512 r[16];                                                                    \
            if (i0 >= nr) {                                                                  \
                for (int j = 0; j < 16; j++)                                                 \
                    _mm512_storeu_ps(P + (k + j) * 32 + i0, _mm512_setzero_ps());            \
                continue;                                                                    \
            }                                                                                \
            for (int i = 0; i < 16; i++)                                                     \
                r[i] = i0 + i < nr ? ROW(i0 + i, k) : _mm512_setzero_ps();                   \
            transpose16(r);                                                                  \
            for (int j = 0; j < 16; j++)                                                     \
                _mm512_storeu_ps(P + (k + j) * 32 + i0, r[j]);                               \
        }                                                                                    \
        for (; k < n; k++)                                                                   \
            for (int i = 0; i < 16; i++)                                                     \
                P[k * 32 + i0 + i] = i0 + i < nr ? TAIL(i0 + i, k) : 0.0f;                   \
    }

/* 16 f16 or f32 values of row w[i] from k */
VALWAYS512 __m512 ld16(const void *base, long k, bool f16)
{
    if (f16)
        return _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)((const uint16_t *)base + k)));
    return _mm512_loadu_ps((const float *)base + k);
}

#define PACK_F_ROW(i, k) ld16(w[i], k, f16)
#define PACK_F_TAIL(i, k) wval(w[i], k, f16)

TGT512 static void v512_pack32(const void *const *w, bool f16, int nr, long n, float *P)
{
    PACK16_BODY(PACK_F_ROW, PACK_F_TAIL)
}

/* Q8_0: code * d, one rounding, as wval_dt; a run of 16 lies in one block */
VALWAYS512 __m512 q8_row16(const eng_q8_block *row, long k)
{
    const eng_q8_block *b = row + k / 32;
    return _mm512_mul_ps(
        _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(_mm_loadu_si128((const __m128i *)(b->q + k % 32)))),
        _mm512_set1_ps(_cvtsh_ss(b->d)));
}

#define PACK_Q8_ROW(i, k) q8_row16(w[i], k)
#define PACK_NO_TAIL(i, k) 0.0f /* n is a multiple of 32 */

TGT512 static void v512_pack32_q8(const eng_q8_block *const *w, int nr, long n, float *P)
{
    PACK16_BODY(PACK_Q8_ROW, PACK_NO_TAIL)
}

/* MXFP4: level * 2^(e - 128), exact; a run of 16 is a block's low (k %
 * 32 = 0) or high nibbles */
VALWAYS512 __m512 mxfp4_row16(const eng_mxfp4_block *row, long k)
{
    const eng_mxfp4_block *b = row + k / 32;
    const __m128i q = _mm_loadu_si128((const __m128i *)b->qs);
    const __m128i c = _mm_and_si128(k % 32 ? _mm_srli_epi16(q, 4) : q, _mm_set1_epi8(0x0f));
    const __m128i v = _mm_shuffle_epi8(_mm_loadu_si128((const __m128i *)eng_mxfp4_levels), c);
    return _mm512_mul_ps(_mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(v)),
                         _mm512_set1_ps(eng_e8m0_half(b->e)));
}

#define PACK_MXFP4_ROW(i, k) mxfp4_row16(w[i], k)

TGT512 static void v512_pack32_mxfp4(const eng_mxfp4_block *const *w, int nr, long n, float *P)
{
    PACK16_BODY(PACK_MXFP4_ROW, PACK_NO_TAIL)
}

/* dot4_q8 on 512-bit registers: a block's 32 codes are two registers
 * (sign-extended and converted), half the instructions of AVX2's, which
 * left the Q8_0 head compute-bound at 16 GB/s. */
VALWAYS512 void dot4_q8_512(const void *r0, const void *r1, const void *r2, const void *r3,
                            const float *x, long n, float out[4], const char *const *pf)
{
    const eng_q8_block *b[4] = { r0, r1, r2, r3 };
    __m512 acc[4] = { _mm512_setzero_ps(), _mm512_setzero_ps(), _mm512_setzero_ps(),
                      _mm512_setzero_ps() };
    for (long i = 0; i < n / 32; i++) {
        if (pf)
            for (int j = 0; j < 4; j++)
                _mm_prefetch(pf[j] + i * sizeof(eng_q8_block), _MM_HINT_T0);
        const __m512 x0 = _mm512_loadu_ps(x + 32 * i), x1 = _mm512_loadu_ps(x + 32 * i + 16);
        for (int j = 0; j < 4; j++) {
            const eng_q8_block *bb = b[j] + i;
            const __m512 q0 = _mm512_cvtepi32_ps(
                _mm512_cvtepi8_epi32(_mm_loadu_si128((const __m128i *)bb->q)));
            const __m512 q1 = _mm512_cvtepi32_ps(
                _mm512_cvtepi8_epi32(_mm_loadu_si128((const __m128i *)(bb->q + 16))));
            const __m512 t = _mm512_fmadd_ps(q1, x1, _mm512_mul_ps(q0, x0));
            acc[j] = _mm512_fmadd_ps(_mm512_set1_ps(_cvtsh_ss(bb->d)), t, acc[j]);
        }
    }
    for (int j = 0; j < 4; j++)
        out[j] = _mm512_reduce_add_ps(acc[j]);
}

/* axpy2_q8 on 512-bit registers */
VALWAYS512 void axpy2_q8_512(float *acc, float a0, const void *d0, float a1, const void *d1,
                             long n, const char *p0, const char *p1)
{
    const eng_q8_block *b0 = d0, *b1 = d1;
    for (long i = 0; i < n / 32; i++) {
        if (p0) {
            _mm_prefetch(p0 + i * sizeof(eng_q8_block), _MM_HINT_T0);
            _mm_prefetch(p1 + i * sizeof(eng_q8_block), _MM_HINT_T0);
        }
        const __m512 s0 = _mm512_set1_ps(a0 * _cvtsh_ss(b0[i].d));
        const __m512 s1 = _mm512_set1_ps(a1 * _cvtsh_ss(b1[i].d));
        for (int u = 0; u < 32; u += 16) {
            __m512 y = _mm512_loadu_ps(acc + 32 * i + u);
            y = _mm512_fmadd_ps(s0, _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(
                                        _mm_loadu_si128((const __m128i *)(b0[i].q + u)))),
                                y);
            y = _mm512_fmadd_ps(s1, _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(
                                        _mm_loadu_si128((const __m128i *)(b1[i].q + u)))),
                                y);
            _mm512_storeu_ps(acc + 32 * i + u, y);
        }
    }
}

TGT512 static void v512_gemv_q8(const eng_q8_block *w, long cols, const float *x,
                                const float *bias, float *y, long r0, long r1)
{
    GEMV_BLOCKS_BODY(eng_q8_block, 32, dot4_q8_512, x)
    s_gemv_q8(w, cols, x, bias, y, r0 + 4 * q, r1);
}

FFN_ONE_SLOT(dot4_q8_512, axpy2_q8_512, VALWAYS512, a->x)

/* pack32 of Q4_1 (Q4_0: DM) rows as v512_pack32_q8: a run of 16 values is
 * one nibble half of a block (the low nibbles of its 16 code bytes hold
 * values 0-15, the high ones 16-31), each code * d + m (one rounding;
 * exact for Q4_0's m = -8 d) */
#define Q4X_ROW16(BT, DM)                                                                    \
    VALWAYS512 __m512 BT##_row16(const BT *row, long k)                                      \
    {                                                                                        \
        const BT *b = row + k / 32;                                                          \
        if (k % 32 == 0) /* four blocks on (past a row's end: a hint) */                     \
            _mm_prefetch((const char *)(b + 4), _MM_HINT_T0);                                \
        DM(_cvtsh_ss, b, dw, mw);                                                            \
        const __m512i c = _mm512_cvtepu8_epi32(_mm_loadu_si128((const __m128i *)b->qs));     \
        const __m512i q = k % 32 ? _mm512_srli_epi32(c, 4)                                   \
                                 : _mm512_and_si512(c, _mm512_set1_epi32(15));               \
        return _mm512_fmadd_ps(_mm512_cvtepi32_ps(q), _mm512_set1_ps(dw), _mm512_set1_ps(mw)); \
    }
Q4X_ROW16(eng_q41_block, Q41_DM)
Q4X_ROW16(eng_q40_block, Q40_DM)

#define PACK_Q41_ROW(i, k) eng_q41_block_row16(w[i], k)
#define PACK_Q40_ROW(i, k) eng_q40_block_row16(w[i], k)

TGT512 static void v512_pack32_q41(const eng_q41_block *const *w, int nr, long n, float *P)
{
    PACK16_BODY(PACK_Q41_ROW, PACK_NO_TAIL)
}

TGT512 static void v512_pack32_q40(const eng_q40_block *const *w, int nr, long n, float *P)
{
    PACK16_BODY(PACK_Q40_ROW, PACK_NO_TAIL)
}

/* pack32 of Q4_K rows, sixteen at a time: each block's factors d * sc and
 * dmin * m once (qk_factors), then sixteen values (half a sub-block) of
 * each row dequantized in a register (code * d sc - dmin m, one rounding)
 * and transposed into P (transpose16). It was the scalar rule, one value
 * at a time, stored 32 floats apart (about an eighth of a Q4_K prefill's
 * time), then eight rows of eight values (still about 40 % of a 4-token
 * prefill of a Llama-3.2-1B shape in Q4_K). Q5_K rows (Q5 1) take each
 * code's fifth bit from qh as well. A half of the 32 rows past nr is only
 * zeroed. */
#define PACK32_QK_BODY(BT, Q5)                                                               \
    const __m512i m4 = _mm512_set1_epi32(15), m16 = _mm512_set1_epi32(16);                   \
    (void)m16;                                                                               \
    for (int i0 = 0; i0 < 32; i0 += 16)                                                      \
        for (long bi = 0; bi < n / 256; bi++) {                                              \
            if (i0 >= nr) {                                                                  \
                for (int k = 0; k < 256; k++)                                                \
                    _mm512_storeu_ps(P + (256 * bi + k) * 32 + i0, _mm512_setzero_ps());     \
                continue;                                                                    \
            }                                                                                \
            float f[16][8], g[16][8]; /* row i0 + i, sub-block s: d * sc, dmin * m */        \
            for (int i = 0; i < 16 && i0 + i < nr; i++) {                                    \
                const BT *b = w[i0 + i] + bi;                                                \
                qk_factors(b->d, b->dmin, b->scales, f[i], g[i]);                            \
            }                                                                                \
            for (int k = 0; k < 256; k += 16) {                                              \
                const int sb = k / 32; /* codes: bytes 32 (sb / 2) + k % 32, nibble sb % 2 */ \
                __m512 r[16];                                                                \
                for (int i = 0; i < 16; i++) {                                               \
                    if (i0 + i >= nr) {                                                      \
                        r[i] = _mm512_setzero_ps();                                          \
                        continue;                                                            \
                    }                                                                        \
                    const uint8_t *qs = w[i0 + i][bi].qs + 32 * (sb / 2) + k % 32;           \
                    __m512i q = _mm512_cvtepu8_epi32(_mm_loadu_si128((const __m128i *)qs));  \
                    q = _mm512_and_si512(sb % 2 ? _mm512_srli_epi32(q, 4) : q, m4);          \
                    PACK_Q5_BIT(Q5, q, w[i0 + i] + bi, k, sb)                                \
                    r[i] = _mm512_fmsub_ps(_mm512_set1_ps(f[i][sb]), _mm512_cvtepi32_ps(q),  \
                                           _mm512_set1_ps(g[i][sb]));                        \
                }                                                                            \
                transpose16(r);                                                              \
                for (int j = 0; j < 16; j++)                                                 \
                    _mm512_storeu_ps(P + (256 * bi + k + j) * 32 + i0, r[j]);                \
            }                                                                                \
        }
#define PACK_Q5_BIT(Q5, q, bj, k, sb) PACK_Q5_BIT_##Q5(q, bj, k, sb)
#define PACK_Q5_BIT_0(q, bj, k, sb)
#define PACK_Q5_BIT_1(q, bj, k, sb)                                                          \
    q = _mm512_or_si512(                                                                     \
        q, _mm512_and_si512(                                                                 \
               _mm512_slli_epi32(                                                            \
                   _mm512_srlv_epi32(_mm512_cvtepu8_epi32(_mm_loadu_si128(                   \
                                         (const __m128i *)((bj)->qh + (k) % 32))),           \
                                     _mm512_set1_epi32(sb)),                                 \
                   4),                                                                       \
               m16));

TGT512 static void v512_pack32_q4k(const eng_q4k_block *const *w, int nr, long n, float *P)
{
    PACK32_QK_BODY(eng_q4k_block, 0)
}

TGT512 static void v512_pack32_q5k(const eng_q5k_block *const *w, int nr, long n, float *P)
{
    PACK32_QK_BODY(eng_q5k_block, 1)
}

/* pack32 of Q6_K rows as v512_pack32_q4k: per row and block the 16
 * factors d * scale, then sixteen values (one sub-block) of each of
 * sixteen rows in a register (sixteen code bytes, a nibble of ql and two
 * bits of qh each, as 32-bit lanes), a 16 x 16 transpose into the packed
 * block. The scalar form, a block through the dequantizer then stored 32
 * floats apart, took 12 % of a perplexity run on a Llama-3.2-1B head in
 * Q6_K. */
TGT512 static void v512_pack32_q6k(const eng_q6k_block *const *w, int nr, long n, float *P)
{
    const __m512i m4 = _mm512_set1_epi32(15), m2 = _mm512_set1_epi32(3);
    const __m512i k32 = _mm512_set1_epi32(32);
    for (int i0 = 0; i0 < 32; i0 += 16)
        for (long bi = 0; bi < n / 256; bi++) {
            if (i0 >= nr) {
                for (int k = 0; k < 256; k++)
                    _mm512_storeu_ps(P + (256 * bi + k) * 32 + i0, _mm512_setzero_ps());
                continue;
            }
            float f[16][16]; /* row i0 + i, sub-block s: d * scale */
            for (int i = 0; i < 16 && i0 + i < nr; i++) {
                const eng_q6k_block *b = w[i0 + i] + bi;
                const float d = h2f(b->d);
                for (int s = 0; s < 16; s++)
                    f[i][s] = d * (float)b->scales[s];
            }
            for (int k = 0; k < 256; k += 16) {
                /* weights k .. k + 15: half hf, group gg of 32 (backend.h) */
                const int hf = k / 128, gg = k % 128 / 32, l = k % 32;
                __m512 r[16];
                for (int i = 0; i < 16; i++) {
                    if (i0 + i >= nr) {
                        r[i] = _mm512_setzero_ps();
                        continue;
                    }
                    const eng_q6k_block *b = w[i0 + i] + bi;
                    const uint8_t *ql = b->ql + 64 * hf + 32 * (gg & 1) + l;
                    const uint8_t *qh = b->qh + 32 * hf + l;
                    __m512i lo = _mm512_cvtepu8_epi32(_mm_loadu_si128((const __m128i *)ql));
                    __m512i hi = _mm512_cvtepu8_epi32(_mm_loadu_si128((const __m128i *)qh));
                    lo = _mm512_and_si512(gg < 2 ? lo : _mm512_srli_epi32(lo, 4), m4);
                    hi = _mm512_and_si512(_mm512_srlv_epi32(hi, _mm512_set1_epi32(2 * gg)), m2);
                    const __m512i q =
                        _mm512_sub_epi32(_mm512_or_si512(lo, _mm512_slli_epi32(hi, 4)), k32);
                    r[i] = _mm512_mul_ps(_mm512_set1_ps(f[i][k / 16]), _mm512_cvtepi32_ps(q));
                }
                transpose16(r);
                for (int j = 0; j < 16; j++)
                    _mm512_storeu_ps(P + (256 * bi + k + j) * 32 + i0, r[j]);
            }
        }
}

TGT512 static void v512_mm6x32(const float *P, long n, const float *const *x, float out[6][32])
{
    __m512 c[6][2];
#pragma GCC unroll 6
    for (int t = 0; t < 6; t++)
        c[t][0] = c[t][1] = _mm512_setzero_ps();
    for (long k = 0; k < n; k++) {
        const __m512 w0 = _mm512_load_ps(P + k * 32), w1 = _mm512_load_ps(P + k * 32 + 16);
#pragma GCC unroll 6
        for (int t = 0; t < 6; t++) {
            const __m512 b = _mm512_set1_ps(x[t][k]);
            c[t][0] = _mm512_fmadd_ps(w0, b, c[t][0]);
            c[t][1] = _mm512_fmadd_ps(w1, b, c[t][1]);
        }
    }
#pragma GCC unroll 6
    for (int t = 0; t < 6; t++) {
        _mm512_storeu_ps(out[t], c[t][0]);
        _mm512_storeu_ps(out[t] + 16, c[t][1]);
    }
}

/* The 8-bit prefill's kernels (kernels.q8x_row, pack32_u8, mm6x32_u8).
 * vpdpbusd multiplies 64 unsigned codes by 64 signed ones and sums each
 * four into a lane, 64 products an instruction against an FMA's 16, so
 * mm6x32_u8 does a block of 32 rows x 6 tokens in 96 of them plus 36
 * float ops for the scales, where mm6x32 takes 384 FMAs. x rounded to 8
 * bits per block of 32 is what llama.cpp's CPU matmuls take as well. */
TGT512 static void v512_q8x_row(const float *x, long n, int8_t *q, float *ds)
{
    for (long b = 0; b < n / 32; b++) {
        const __m512 x0 = _mm512_loadu_ps(x + 32 * b), x1 = _mm512_loadu_ps(x + 32 * b + 16);
        const __m512 a0 = _mm512_abs_ps(x0), a1 = _mm512_abs_ps(x1);
        const float amax = _mm512_reduce_max_ps(_mm512_max_ps(a0, a1));
        if (!isfinite(_mm512_reduce_add_ps(_mm512_add_ps(a0, a1)))) {
            memset(q + 32 * b, 0, 32);
            ds[2 * b] = ds[2 * b + 1] = NAN;
            continue;
        }
        const __m512 inv = _mm512_set1_ps(amax > 0.0f ? 127.0f / amax : 0.0f);
        /* round to nearest even (the default mode), as q8_round; within
         * +-127 already, the saturation only packs */
        const __m512i q0 = _mm512_cvtps_epi32(_mm512_mul_ps(x0, inv)),
                      q1 = _mm512_cvtps_epi32(_mm512_mul_ps(x1, inv));
        _mm_storeu_si128((__m128i *)(q + 32 * b), _mm512_cvtsepi32_epi8(q0));
        _mm_storeu_si128((__m128i *)(q + 32 * b + 16), _mm512_cvtsepi32_epi8(q1));
        const float d = amax / 127.0f;
        ds[2 * b] = d;
        ds[2 * b + 1] = d * (float)_mm512_reduce_add_epi32(_mm512_add_epi32(q0, q1));
    }
}

/* pack32_u8's transpose: rows r (16 of them) hold 8 dwords of codes each,
 * dwords 0-3 in lane r % 4 of lo[r / 4], dwords 4-7 likewise in hi; out
 * [s] gets dword s of every row, row r in lane r. Two vpermt2d and a
 * blend a dword: each source pair gives 8 rows' dword s. */
VALWAYS512 void u8_transpose16(const __m512i lo[4], const __m512i hi[4], uint8_t *out)
{
    for (int s = 0; s < 8; s++) {
        const __m512i *src = s < 4 ? lo : hi;
        const int k = s % 4;
        const __m512i idx = _mm512_add_epi32(
            _mm512_set_epi32(28, 24, 20, 16, 12, 8, 4, 0, 28, 24, 20, 16, 12, 8, 4, 0),
            _mm512_set1_epi32(k)); /* lane p: dword k of row p % 4 of the first or second */
        const __m512i t01 = _mm512_permutex2var_epi32(src[0], idx, src[1]),
                      t23 = _mm512_permutex2var_epi32(src[2], idx, src[3]);
        _mm512_storeu_si512(out + s * 128, _mm512_mask_blend_epi32(0xff00, t01, t23));
    }
}

/* Four rows' 32 bytes at q[0..4): bytes 0-15 of row j in 128-bit lane j of
 * *a, bytes 16-31 in lane j of *b (u8_transpose16's lo and hi). Two 256-bit
 * loads a pair of rows and a lane shuffle each, where 16-byte inserts take
 * eight. */
VALWAYS512 void u8_load4x32(const uint8_t *const q[4], __m512i *a, __m512i *b)
{
    const __m512i x01 = _mm512_inserti64x4(
        _mm512_castsi256_si512(_mm256_loadu_si256((const __m256i *)q[0])),
        _mm256_loadu_si256((const __m256i *)q[1]), 1);
    const __m512i x23 = _mm512_inserti64x4(
        _mm512_castsi256_si512(_mm256_loadu_si256((const __m256i *)q[2])),
        _mm256_loadu_si256((const __m256i *)q[3]), 1);
    *a = _mm512_shuffle_i64x2(x01, x23, _MM_SHUFFLE(2, 0, 2, 0));
    *b = _mm512_shuffle_i64x2(x01, x23, _MM_SHUFFLE(3, 1, 3, 1));
}

/* pack32_u8 of Q4_K and Q5_K rows (nb a multiple of 8): a block of 256 is
 * eight blocks of 32 with w = (d sc_j) q - dmin m_j, so u = q (Q5_K: with
 * its fifth bit), d = d sc_j, m = -dmin m_j, exact in float (an f16 times
 * 6 bits). Per block of 256 and 16 rows: each row's 8 scales and 8 mins
 * unpacked in a register (q4k_scales_mins), times d and -dmin, and one
 * 16 x 16 transpose gives every sub-block's D column; then per pair of
 * sub-blocks 2p, 2p + 1 (the low and high nibbles of qs[32 p .. 32 p +
 * 32)) four rows' 32 code bytes at a time, split into the two sub-blocks'
 * codes 0-15 and 16-31 (Q5_K: bits 2p and 2p + 1 of qh as 16), and
 * u8_transpose16 per sub-block, as the Q4_1 pack. */
VALWAYS512 void pack32_u8_qk(const void *const *w, eng_dtype dt, int nr, long nb, uint8_t *P,
                             float *D)
{
    static const uint8_t zero[ENG_Q5K_BLOCK_BYTES]; /* rows past nr: codes 0, d = m = 0 */
    const __m512i m4 = _mm512_set1_epi8(0x0f), m16 = _mm512_set1_epi8(0x10);
    const bool q5 = dt == ENG_DTYPE_Q5_K;
    const size_t bb = eng_dtype_bytes(dt, 256),
                 qso = q5 ? offsetof(eng_q5k_block, qs) : offsetof(eng_q4k_block, qs);
    const uint8_t *row[32];
    size_t step[32];
    for (int i = 0; i < 32; i++) {
        row[i] = i < nr ? (const uint8_t *)w[i] : zero;
        step[i] = i < nr ? bb : 0;
    }
    for (long bi = 0; bi < nb / 8; bi++) {
        for (int tile = 0; tile < 2; tile++) {
            const uint8_t *blk[16];
            __m512 f[16];
            for (int i = 0; i < 16; i++) {
                const int r = tile * 16 + i;
                blk[i] = row[r] + (size_t)bi * step[r];
                /* the next block (past a row's end: a hint), its lines */
                for (size_t l = 0; l < bb; l += 64)
                    _mm_prefetch((const char *)(blk[i] + step[r] + l), _MM_HINT_T0);
                _mm_prefetch((const char *)(blk[i] + step[r] + bb - 1), _MM_HINT_T0);
                uint16_t h[2]; /* d, dmin */
                memcpy(h, blk[i], 4);
                const __m512 s = _mm512_mask_blend_ps(0xff00, _mm512_set1_ps(_cvtsh_ss(h[0])),
                                                      _mm512_set1_ps(-_cvtsh_ss(h[1])));
                f[i] = _mm512_mul_ps(
                    _mm512_cvtepi32_ps(_mm512_cvtepu8_epi32(q4k_scales_mins(blk[i]))), s);
            }
            transpose16(f); /* f[j]: sub-block j's d, f[8 + j] its m, row i in lane i */
            for (int j = 0; j < 8; j++) {
                _mm512_storeu_ps(D + (8 * bi + j) * 64 + tile * 16, f[j]);
                _mm512_storeu_ps(D + (8 * bi + j) * 64 + 32 + tile * 16, f[8 + j]);
            }
            for (int p = 0; p < 4; p++) {
                __m512i lo0[4], hi0[4], lo1[4], hi1[4];
                for (int g = 0; g < 4; g++) {
                    const uint8_t *q[4], *qh[4];
                    for (int j = 0; j < 4; j++) {
                        q[j] = blk[4 * g + j] + qso + 32 * p;
                        qh[j] = blk[4 * g + j] + offsetof(eng_q5k_block, qh);
                    }
                    __m512i a, b;
                    u8_load4x32(q, &a, &b);
                    lo0[g] = _mm512_and_si512(a, m4);
                    hi0[g] = _mm512_and_si512(b, m4);
                    lo1[g] = _mm512_and_si512(_mm512_srli_epi16(a, 4), m4);
                    hi1[g] = _mm512_and_si512(_mm512_srli_epi16(b, 4), m4);
                    if (q5) { /* bit 2p of a byte to 16 for sub-block 2p, bit 2p + 1 for 2p + 1 */
                        u8_load4x32(qh, &a, &b);
                        a = _mm512_srli_epi16(a, 2 * p);
                        b = _mm512_srli_epi16(b, 2 * p);
                        lo0[g] = _mm512_or_si512(lo0[g],
                                                 _mm512_and_si512(_mm512_slli_epi16(a, 4), m16));
                        hi0[g] = _mm512_or_si512(hi0[g],
                                                 _mm512_and_si512(_mm512_slli_epi16(b, 4), m16));
                        lo1[g] = _mm512_or_si512(lo1[g],
                                                 _mm512_and_si512(_mm512_slli_epi16(a, 3), m16));
                        hi1[g] = _mm512_or_si512(hi1[g],
                                                 _mm512_and_si512(_mm512_slli_epi16(b, 3), m16));
                    }
                }
                u8_transpose16(lo0, hi0, P + (8 * bi + 2 * p) * 1024 + tile * 64);
                u8_transpose16(lo1, hi1, P + (8 * bi + 2 * p + 1) * 1024 + tile * 64);
            }
        }
    }
}

TGT512 static void v512_pack32_u8(const void *const *w, eng_dtype dt, int nr, long nb, uint8_t *P,
                                  float *D)
{
    if (dt == ENG_DTYPE_Q4_K || dt == ENG_DTYPE_Q5_K) {
        pack32_u8_qk(w, dt, nr, nb, P, D);
        return;
    }
    static const uint8_t zero[34]; /* rows past nr: codes 0 (Q8_0: 128), d = m = 0 */
    const __m512i m4 = _mm512_set1_epi8(0x0f), flip = _mm512_set1_epi8((char)0x80);
    const size_t bb = eng_dtype_bytes(dt, 32), qoff = dt == ENG_DTYPE_Q4_1 ? 4 : 2;
    const uint8_t *row[32]; /* a row's first block, and its step a block */
    size_t step[32];
    for (int i = 0; i < 32; i++) {
        row[i] = i < nr ? (const uint8_t *)w[i] : zero;
        step[i] = i < nr ? bb : 0;
    }
    for (long b = 0; b < nb; b++) {
        uint8_t *pb = P + b * 1024;
        float *db = D + b * 64;
        for (int tile = 0; tile < 2; tile++) {
            __m512i lo[4], hi[4];
            uint16_t dh[16], mh[16];
            for (int g = 0; g < 4; g++) {
                const uint8_t *q[4]; /* the four rows' codes: Q8_0 32 bytes, Q4 16 */
                for (int j = 0; j < 4; j++) {
                    const int i = tile * 16 + g * 4 + j;
                    const uint8_t *blk = row[i] + (size_t)b * step[i];
                    /* four blocks on (as pack32_q41; past a row's end: a hint) */
                    _mm_prefetch((const char *)(blk + 4 * step[i]), _MM_HINT_T0);
                    q[j] = blk + qoff;
                    memcpy(&dh[g * 4 + j], blk, 2); /* d, then Q4_1's m */
                    memcpy(&mh[g * 4 + j], blk + 2, 2);
                }
                __m512i a = _mm512_castsi128_si512(_mm_loadu_si128((const __m128i *)q[0]));
                a = _mm512_inserti32x4(a, _mm_loadu_si128((const __m128i *)q[1]), 1);
                a = _mm512_inserti32x4(a, _mm_loadu_si128((const __m128i *)q[2]), 2);
                a = _mm512_inserti32x4(a, _mm_loadu_si128((const __m128i *)q[3]), 3);
                if (dt == ENG_DTYPE_Q8_0) { /* q + 128 as a byte; codes 16.. from the second half */
                    __m512i h = _mm512_castsi128_si512(_mm_loadu_si128((const __m128i *)(q[0] + 16)));
                    h = _mm512_inserti32x4(h, _mm_loadu_si128((const __m128i *)(q[1] + 16)), 1);
                    h = _mm512_inserti32x4(h, _mm_loadu_si128((const __m128i *)(q[2] + 16)), 2);
                    h = _mm512_inserti32x4(h, _mm_loadu_si128((const __m128i *)(q[3] + 16)), 3);
                    lo[g] = _mm512_xor_si512(a, flip);
                    hi[g] = _mm512_xor_si512(h, flip);
                } else { /* codes 0..15 the low nibbles, 16..31 the high */
                    lo[g] = _mm512_and_si512(a, m4);
                    hi[g] = _mm512_and_si512(_mm512_srli_epi16(a, 4), m4);
                }
            }
            u8_transpose16(lo, hi, pb + tile * 64);
            const __m512 d = _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)dh));
            const __m512 m = dt == ENG_DTYPE_Q4_1
                                 ? _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)mh))
                                 : _mm512_mul_ps(d, _mm512_set1_ps(dt == ENG_DTYPE_Q8_0 ? -128.0f
                                                                                     : -8.0f));
            _mm512_storeu_ps(db + tile * 16, d);
            _mm512_storeu_ps(db + 32 + tile * 16, m);
        }
    }
}

TGT512 static void v512_mm6x32_u8(const uint8_t *P, const float *D, long nb,
                                  const int8_t *const *xq, const float *const *xds,
                                  float out[6][32])
{
    __m512 f[6][2];
#pragma GCC unroll 6
    for (int t = 0; t < 6; t++)
        f[t][0] = f[t][1] = _mm512_setzero_ps();
    for (long b = 0; b < nb; b++) {
        __m512i acc[6][2];
#pragma GCC unroll 6
        for (int t = 0; t < 6; t++)
            acc[t][0] = acc[t][1] = _mm512_setzero_si512();
#pragma GCC unroll 8
        for (int s = 0; s < 8; s++) {
            const __m512i w0 = _mm512_loadu_si512(P + b * 1024 + s * 128),
                          w1 = _mm512_loadu_si512(P + b * 1024 + s * 128 + 64);
#pragma GCC unroll 6
            for (int t = 0; t < 6; t++) {
                int32_t x4;
                memcpy(&x4, xq[t] + b * 32 + s * 4, 4);
                const __m512i xb = _mm512_set1_epi32(x4);
                acc[t][0] = _mm512_dpbusd_epi32(acc[t][0], w0, xb);
                acc[t][1] = _mm512_dpbusd_epi32(acc[t][1], w1, xb);
            }
        }
        const float *db = D + b * 64;
#pragma GCC unroll 6
        for (int t = 0; t < 6; t++) {
            const __m512 dx = _mm512_set1_ps(xds[t][2 * b]), sx = _mm512_set1_ps(xds[t][2 * b + 1]);
            for (int v = 0; v < 2; v++) {
                const __m512 dd = _mm512_mul_ps(_mm512_loadu_ps(db + 16 * v), dx);
                f[t][v] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(acc[t][v]), dd, f[t][v]);
                f[t][v] = _mm512_fmadd_ps(_mm512_loadu_ps(db + 32 + 16 * v), sx, f[t][v]);
            }
        }
    }
#pragma GCC unroll 6
    for (int t = 0; t < 6; t++) {
        _mm512_storeu_ps(out[t], f[t][0]);
        _mm512_storeu_ps(out[t] + 16, f[t][1]);
    }
}

/* down_block on 512-bit registers: NT tokens x 16 NV columns (NV 1 or 2),
 * the last tile's columns past its end masked off (m). */
VALWAYS512 void down_block512(const float *P, long ldp, int nj, const float *A, long lda, float *y,
                              long ldy, bool first, const int NT, const int NV, __mmask16 m)
{
    __m512 acc[6][2];
    const __mmask16 mv[2] = { NV == 1 ? m : 0xffff, m };
    for (int t = 0; t < NT; t++)
        for (int v = 0; v < NV; v++)
            acc[t][v] = first ? _mm512_setzero_ps()
                              : _mm512_maskz_loadu_ps(mv[v], y + t * ldy + 16 * v);
    for (int j = 0; j < nj; j++) {
        __m512 wv[2];
        for (int v = 0; v < NV; v++)
            wv[v] = _mm512_maskz_loadu_ps(mv[v], P + (size_t)j * ldp + 16 * v);
        for (int t = 0; t < NT; t++) {
            const __m512 av = _mm512_set1_ps(A[t * lda + j]);
            for (int v = 0; v < NV; v++)
                acc[t][v] = _mm512_fmadd_ps(av, wv[v], acc[t][v]);
        }
    }
    for (int t = 0; t < NT; t++)
        for (int v = 0; v < NV; v++)
            _mm512_mask_storeu_ps(y + t * ldy + 16 * v, mv[v], acc[t][v]);
}

VALWAYS512 void down_tiles512(const float *P, long ldp, int nj, long nc, const float *A, long lda,
                              float *y, long ldy, bool first, const int NT)
{
    long c = 0;
    for (; c + 32 <= nc; c += 32)
        down_block512(P + c, ldp, nj, A, lda, y + c, ldy, first, NT, 2, 0xffff);
    if (c < nc) {
        const long r = nc - c; /* 1 .. 31 */
        const __mmask16 m = (__mmask16)(r >= 16 ? (1u << (r - 16)) - 1 : (1u << r) - 1);
        if (r > 16)
            down_block512(P + c, ldp, nj, A, lda, y + c, ldy, first, NT, 2, m);
        else
            down_block512(P + c, ldp, nj, A, lda, y + c, ldy, first, NT, 1,
                          r == 16 ? 0xffff : m);
    }
}

TGT512 static void v512_ffn_down(const ffn_args *a, const float *A, long lda, float *y, long ldy,
                                 int nt, long c0, long nc, float *scratch)
{
    FFN_DOWN_BODY(down_tiles512)
}

/* e^x for every lane, within a few ulp (test-backend-cpu holds silu to 4
 * of the exact value): x = n ln 2 + r, |r| <= ln 2 / 2,
 * e^r by its Taylor series to r^6 (the rest below 2e-7 relative), times
 * 2^n by scalef (which saturates to 0 and inf as expf does). NaN stays
 * NaN: vmaxps/vminps return their second operand for it. */
VALWAYS512 __m512 exp512(__m512 x)
{
    x = _mm512_min_ps(_mm512_set1_ps(89.0f), _mm512_max_ps(_mm512_set1_ps(-104.0f), x));
    const __m512 n = _mm512_roundscale_ps(_mm512_mul_ps(x, _mm512_set1_ps(1.44269504f)),
                                          _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    __m512 r = _mm512_fnmadd_ps(n, _mm512_set1_ps(0.693359375f), x);
    r = _mm512_fnmadd_ps(n, _mm512_set1_ps(-2.12194440e-4f), r);
    __m512 p = _mm512_set1_ps(1.0f / 720);
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f / 120));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f / 24));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f / 6));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(0.5f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f));
    return _mm512_scalef_ps(p, n);
}

/* Four keys of up to four heads a register, where a libm expf per score
 * was (whole 1536-token prefills took 0.96 of the time with this). l[g]
 * sums in four lanes, then across them. */
TGT512 static void v512_exp4(float (*s)[4], int nb, const float *m, int G, float *l)
{
    float mm[4] = { 0, 0, 0, 0 };
    for (int g = 0; g < G; g++)
        mm[g] = m[g];
    const __m512 mv = _mm512_broadcast_f32x4(_mm_loadu_ps(mm));
    const __mmask16 gm = (__mmask16)(0x1111 * ((1u << G) - 1));
    __m512 acc = _mm512_setzero_ps();
    for (int i = 0; i < nb; i += 4) {
        const __mmask16 km = nb - i >= 4 ? 0xffff : (__mmask16)((1u << (4 * (nb - i))) - 1);
        const __m512 v = _mm512_maskz_loadu_ps(km, &s[i][0]);
        const __m512 e = _mm512_maskz_mov_ps(gm & km, exp512(_mm512_sub_ps(v, mv)));
        _mm512_mask_storeu_ps(&s[i][0], km, e);
        acc = _mm512_add_ps(acc, e);
    }
    float a[16];
    _mm512_storeu_ps(a, acc);
    for (int g = 0; g < 4; g++)
        l[g] += (a[g] + a[4 + g]) + (a[8 + g] + a[12 + g]);
}

/* The masks of a row of 32 whose first n lanes are live, 0 <= n <= 32. */
VALWAYS512 void mask32(int n, __mmask16 *lo, __mmask16 *hi)
{
    *lo = n >= 16 ? 0xffff : (__mmask16)((1u << n) - 1);
    *hi = n >= 32 ? 0xffff : n > 16 ? (__mmask16)((1u << (n - 16)) - 1) : 0;
}

/* o[0..hd) = o * f, or o += sum_j<nv p[j] v[j][0..hd): 64 columns a pass
 * in four registers, the tail masked. */
VALWAYS512 void pv_rows512(float *o, long hd, const float *p, int nv, const float *v, float f,
                           bool scale_only)
{
    for (long d = 0; d < hd; d += 64) {
        __m512 acc[4];
        __mmask16 mk[4];
        for (int u = 0; u < 4; u++) {
            const long r = hd - d - 16 * u;
            mk[u] = r >= 16 ? 0xffff : r > 0 ? (__mmask16)((1u << r) - 1) : 0;
            acc[u] = _mm512_maskz_loadu_ps(mk[u], o + d + 16 * u);
        }
        if (scale_only) {
            for (int u = 0; u < 4; u++)
                acc[u] = _mm512_mul_ps(acc[u], _mm512_set1_ps(f));
        } else {
            for (int j = 0; j < nv; j++) {
                const __m512 pj = _mm512_set1_ps(p[j]);
                for (int u = 0; u < 4; u++)
                    acc[u] = _mm512_fmadd_ps(pj, _mm512_maskz_loadu_ps(mk[u], v + j * hd + d + 16 * u),
                                             acc[u]);
            }
        }
        for (int u = 0; u < 4; u++)
            _mm512_mask_storeu_ps(o + d + 16 * u, mk[u], acc[u]);
    }
}

TGT512 static void v512_att_pv32(const float *s, int nv, float scale, float *m, float *l, float *o,
                                 const float *v, long hd)
{
    __mmask16 k0, k1;
    mask32(nv, &k0, &k1);
    const __m512 sc = _mm512_set1_ps(scale), ninf = _mm512_set1_ps(-INFINITY);
    const __m512 s0 = _mm512_mask_mul_ps(ninf, k0, _mm512_loadu_ps(s), sc);
    const __m512 s1 = _mm512_mask_mul_ps(ninf, k1, _mm512_loadu_ps(s + 16), sc);
    const float bm = _mm512_reduce_max_ps(_mm512_max_ps(s0, s1));
    if (bm > *m) {
        if (*l > 0.0f) {
            const float corr = expf(*m - bm);
            *l *= corr;
            pv_rows512(o, hd, NULL, 0, NULL, corr, true);
        }
        *m = bm;
    }
    const __m512 mv = _mm512_set1_ps(*m);
    const __m512 p0 = _mm512_maskz_mov_ps(k0, exp512(_mm512_sub_ps(s0, mv)));
    const __m512 p1 = _mm512_maskz_mov_ps(k1, exp512(_mm512_sub_ps(s1, mv)));
    *l += _mm512_reduce_add_ps(_mm512_add_ps(p0, p1));
    float p[32];
    _mm512_storeu_ps(p, p0);
    _mm512_storeu_ps(p + 16, p1);
    pv_rows512(o, hd, p, nv, v, 0.0f, false);
}

/* Sixteen gate/up pairs at once: a libm expf per neuron and token took
 * about 8 % of a prefill. */
TGT512 static void v512_act_mul16(const float *in, float *out, eng_act act)
{
    const __m512 lo = _mm512_loadu_ps(in), hi = _mm512_loadu_ps(in + 16);
    const __m512i ev = _mm512_set_epi32(30, 28, 26, 24, 22, 20, 18, 16, 14, 12, 10, 8, 6, 4, 2, 0);
    const __m512i od = _mm512_add_epi32(ev, _mm512_set1_epi32(1));
    const __m512 g = _mm512_permutex2var_ps(lo, ev, hi), u = _mm512_permutex2var_ps(lo, od, hi);
    if (act == ENG_ACT_RELU_SQR) { /* (u, u) pairs: relu(u) u */
        _mm512_storeu_ps(out, _mm512_mul_ps(_mm512_max_ps(g, _mm512_setzero_ps()), u));
        return;
    }
    __m512 z = g; /* gate_act's z */
    if (act == ENG_ACT_GELU)
        z = _mm512_mul_ps(g, _mm512_fmadd_ps(_mm512_set1_ps(GELU_2UC), _mm512_mul_ps(g, g),
                                             _mm512_set1_ps(GELU_2U)));
    const __m512 e = exp512(_mm512_sub_ps(_mm512_setzero_ps(), z));
    const __m512 sg = _mm512_div_ps(g, _mm512_add_ps(_mm512_set1_ps(1.0f), e));
    _mm512_storeu_ps(out, _mm512_mul_ps(sg, u));
}

/* dot4_q4k_x16 with VNNI's vpdpwssd for the multiply-add by the scales */
#define DPW_VNNI(acc, a, b) _mm256_dpwssd_epi32((acc), (a), (b))

/* Q5K_HIBITS with AVX-512BW's byte masks: vptestmb picks the codes whose
 * fifth bit is set, a masked add puts in 16 (two instructions a sub-block
 * where the shifts, mask and or took three, and no shift of qh) */
#define Q5K_HIBITS512(c0, c1, bj, p)                                                         \
    {                                                                                        \
        const __m256i qh = _mm256_loadu_si256((const __m256i *)(bj)->qh);                    \
        c0 = _mm256_mask_add_epi8(                                                           \
            c0, _mm256_test_epi8_mask(qh, _mm256_set1_epi8((char)(1 << 2 * (p)))), c0, m16b); \
        c1 = _mm256_mask_add_epi8(                                                           \
            c1, _mm256_test_epi8_mask(qh, _mm256_set1_epi8((char)(2 << 2 * (p)))), c1, m16b); \
    }

QK_X16_KERNELS(q4k, _512, v512, eng_q4k_block, ENG_Q4K_BLOCK_BYTES, QK_NO_HIBITS, DPW_VNNI,
               VALWAYS512, TGT512)
QK_X16_KERNELS(q5k, _512, v512, eng_q5k_block, ENG_Q5K_BLOCK_BYTES, Q5K_HIBITS512, DPW_VNNI,
               VALWAYS512, TGT512)

/* A pair of Q4_1 blocks' [d0, m0, d1, m1] from one conversion of four
 * f16; Q4_0's [d0, -8 d0, d1, -8 d1] */
VALWAYS512 __m128 q41_dm4(const eng_q41_block *bb)
{
    uint32_t s0, s1;
    memcpy(&s0, &bb[0], 4);
    memcpy(&s1, &bb[1], 4);
    return _mm_cvtph_ps(_mm_set_epi32(0, 0, (int)s1, (int)s0));
}

VALWAYS512 __m128 q40_dm4(const eng_q40_block *bb)
{
    const __m128i h = _mm_set_epi16(0, 0, 0, 0, (short)bb[1].d, (short)bb[1].d, (short)bb[0].d,
                                    (short)bb[0].d);
    return _mm_mul_ps(_mm_cvtph_ps(h), _mm_set_ps(-8.0f, 1.0f, -8.0f, 1.0f));
}

/* DOT4_Q4X_X16_BODY two blocks a step on 512-bit registers: the pair's 32
 * code bytes widen to two registers of 32 words (low nibbles: elements
 * 0-15 of each block, high ones: 16-31), x~ regrouped to match once for
 * the four rows, and vpmaddwd then vpdpwssd leave each block's products in
 * eight int32 lanes. The pair's d and m come as [d0, m0, d1, m1] (DM4): a
 * permute spreads d over its block's lanes, and one FMA against [0, s0, 0,
 * s1] (the blocks' sums of x) adds m's terms in lanes 1 and 3. Per block a
 * row about half the instructions of the 256-bit step, TAIL, which takes
 * an odd last block. With x->g (x16_group_q4) four blocks a step come
 * first: two loads cover the group, vpermt2w by QIDX gathers its code
 * bytes as 32 words, shifts and masks leave each code in a word of its
 * own against x~ regrouped to match (no widening), and vpermw by DMIDX
 * brings the four [d, m] to one conversion (DMFIX: Q4_0's m = -8 d). */
#define DOT4_Q4X_X16_512_BODY(BT, DM4, TAIL, QIDX, DMIDX, DMFIX)                              \
    const __m256i m4 = _mm256_set1_epi8(15);                                                 \
    const __m512i pd = _mm512_set_epi32(2, 2, 2, 2, 2, 2, 2, 2, 0, 0, 0, 0, 0, 0, 0, 0);     \
    __m512 acc[4] = { _mm512_setzero_ps(), _mm512_setzero_ps(), _mm512_setzero_ps(),         \
                      _mm512_setzero_ps() };                                                 \
    __m128 am[4] = { _mm_setzero_ps(), _mm_setzero_ps(), _mm_setzero_ps(), _mm_setzero_ps() }; \
    __m256 am4[4] = { _mm256_setzero_ps(), _mm256_setzero_ps(), _mm256_setzero_ps(),         \
                      _mm256_setzero_ps() };                                                 \
    long i = 0;                                                                              \
    if (x->g) {                                                                              \
        const __m512i qi = _mm512_loadu_si512(QIDX), m15 = _mm512_set1_epi16(15);            \
        const __m512i dmi = _mm512_castsi128_si512(_mm_loadu_si128((const __m128i *)(DMIDX))); \
        const __m512i p4 = _mm512_set_epi32(6, 6, 6, 6, 4, 4, 4, 4, 2, 2, 2, 2, 0, 0, 0, 0);  \
        const __m512i x4 = _mm512_set_epi32(3, 3, 3, 3, 2, 2, 2, 2, 1, 1, 1, 1, 0, 0, 0, 0);  \
        for (; i + 4 <= nb; i += 4) {                                                        \
            if (pf)                                                                          \
                for (int j = 0; j < 4; j++) {                                                \
                    _mm_prefetch(pf[j] + i * sizeof(BT), _MM_HINT_T0);                       \
                    _mm_prefetch(pf[j] + (i + 4) * sizeof(BT) - 1, _MM_HINT_T0);             \
                }                                                                            \
            const int16_t *xg = x->g + 32 * i;                                               \
            const __m512i X0 = _mm512_loadu_si512(xg), X1 = _mm512_loadu_si512(xg + 32);     \
            const __m512i X2 = _mm512_loadu_si512(xg + 64), X3 = _mm512_loadu_si512(xg + 96); \
            const __m512 dx =                                                                \
                _mm512_permutexvar_ps(x4, _mm512_castps128_ps512(_mm_loadu_ps(x->d + i)));   \
            const __m128 s4 = _mm_loadu_ps(xs + i);                                          \
            const __m256 sx = _mm256_insertf128_ps(                                          \
                _mm256_castps128_ps256(_mm_unpacklo_ps(_mm_setzero_ps(), s4)),               \
                _mm_unpackhi_ps(_mm_setzero_ps(), s4), 1);                                   \
            for (int j = 0; j < 4; j++) {                                                    \
                const char *bb = (const char *)(b[j] + i);                                   \
                const __m512i lo = _mm512_loadu_si512(bb);                                   \
                const __m512i hi = _mm512_loadu_si512(bb + 4 * sizeof(BT) - 64);             \
                const __m512i w = _mm512_permutex2var_epi16(lo, qi, hi);                     \
                const __m512i a0 = _mm512_and_si512(w, m15);                                 \
                const __m512i a1 = _mm512_and_si512(_mm512_srli_epi16(w, 4), m15);           \
                const __m512i a2 = _mm512_and_si512(_mm512_srli_epi16(w, 8), m15);           \
                const __m512i a3 = _mm512_srli_epi16(w, 12);                                 \
                __m512i p = _mm512_madd_epi16(a0, X0);                                       \
                p = _mm512_dpwssd_epi32(p, a1, X1);                                          \
                p = _mm512_dpwssd_epi32(p, a2, X2);                                          \
                p = _mm512_dpwssd_epi32(p, a3, X3);                                          \
                const __m256 f = DMFIX(_mm256_cvtph_ps(                                      \
                    _mm512_castsi512_si128(_mm512_permutexvar_epi16(dmi, lo))));             \
                const __m512 dw = _mm512_permutexvar_ps(p4, _mm512_castps256_ps512(f));      \
                acc[j] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(p), _mm512_mul_ps(dw, dx), acc[j]); \
                am4[j] = _mm256_fmadd_ps(f, sx, am4[j]);                                     \
            }                                                                                \
        }                                                                                    \
        for (int j = 0; j < 4; j++)                                                          \
            am[j] = _mm_add_ps(_mm256_castps256_ps128(am4[j]), _mm256_extractf128_ps(am4[j], 1)); \
    }                                                                                        \
    for (; i + 2 <= nb; i += 2) {                                                            \
        if (pf)                                                                              \
            for (int j = 0; j < 4; j++)                                                      \
                _mm_prefetch(pf[j] + i * sizeof(BT), _MM_HINT_T0);                           \
        const int16_t *xq = x->q + 32 * i;                                                   \
        const __m512i xa =                                                                   \
            _mm512_inserti64x4(_mm512_castsi256_si512(_mm256_loadu_si256((const __m256i *)xq)), \
                               _mm256_loadu_si256((const __m256i *)(xq + 32)), 1);           \
        const __m512i xb = _mm512_inserti64x4(                                               \
            _mm512_castsi256_si512(_mm256_loadu_si256((const __m256i *)(xq + 16))),          \
            _mm256_loadu_si256((const __m256i *)(xq + 48)), 1);                              \
        const __m512 dx = _mm512_castpd_ps(                                                  \
            _mm512_insertf64x4(_mm512_castps_pd(_mm512_set1_ps(x->d[i])),                    \
                               _mm256_castps_pd(_mm256_set1_ps(x->d[i + 1])), 1));           \
        const __m128 sx = _mm_set_ps(xs[i + 1], 0.0f, xs[i], 0.0f);                          \
        for (int j = 0; j < 4; j++) {                                                        \
            const BT *bb = b[j] + i;                                                         \
            const __m256i v = _mm256_inserti128_si256(                                       \
                _mm256_castsi128_si256(_mm_loadu_si128((const __m128i *)bb[0].qs)),          \
                _mm_loadu_si128((const __m128i *)bb[1].qs), 1);                              \
            const __m512i qa = _mm512_cvtepu8_epi16(_mm256_and_si256(v, m4));                \
            const __m512i qb =                                                               \
                _mm512_cvtepu8_epi16(_mm256_and_si256(_mm256_srli_epi16(v, 4), m4));         \
            const __m512i p = _mm512_dpwssd_epi32(_mm512_madd_epi16(qa, xa), qb, xb);        \
            const __m128 f = DM4(bb);                                                        \
            const __m512 dw = _mm512_permutexvar_ps(pd, _mm512_castps128_ps512(f));          \
            acc[j] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(p), _mm512_mul_ps(dw, dx), acc[j]);  \
            am[j] = _mm_fmadd_ps(f, sx, am[j]);                                              \
        }                                                                                    \
    }                                                                                        \
    float tail[4] = { 0.0f, 0.0f, 0.0f, 0.0f };                                              \
    if (i < nb) {                                                                            \
        const BT *const bt[4] = { b[0] + i, b[1] + i, b[2] + i, b[3] + i };                  \
        const x16_row xt = { x->q + 32 * i, x->d + i, NULL, NULL };                          \
        TAIL(bt, &xt, xs + i, 1, tail, NULL);                                                \
    }                                                                                        \
    for (int j = 0; j < 4; j++) {                                                            \
        const __m128 h = _mm_add_ps(am[j], _mm_movehl_ps(am[j], am[j]));                     \
        out[j] = _mm512_reduce_add_ps(acc[j]) + _mm_cvtss_f32(_mm_shuffle_ps(h, h, 1)) + tail[j]; \
    }

/* The four-block step's tables: the words of a group's 80 (Q4_1) or 72
 * (Q4_0) bytes that hold its codes, from the loads of its first 64 bytes
 * (indices 0-31) and its last 64 (32-63), block b's 16 code bytes its last;
 * and those of the blocks' [d, m] (Q4_0: [d, d], DMFIX makes it [d, -8 d]) */
static const int16_t q41_qidx[32] = { 2,  3,  4,  5,  6,  7,  8,  9,  12, 13, 14,
                                      15, 16, 17, 18, 19, 22, 23, 24, 25, 26, 27,
                                      28, 29, 56, 57, 58, 59, 60, 61, 62, 63 };
static const int16_t q40_qidx[32] = { 1,  2,  3,  4,  5,  6,  7,  8,  10, 11, 12,
                                      13, 14, 15, 16, 17, 19, 20, 21, 22, 23, 24,
                                      25, 26, 56, 57, 58, 59, 60, 61, 62, 63 };
static const int16_t q41_dmidx[8] = { 0, 1, 10, 11, 20, 21, 30, 31 };
static const int16_t q40_dmidx[8] = { 0, 0, 9, 9, 18, 18, 27, 27 };
#define Q41_DMFIX(f) (f)
#define Q40_DMFIX(f) _mm256_mul_ps((f), _mm256_setr_ps(1, -8, 1, -8, 1, -8, 1, -8))

Q4X_X16_KERNELS(q41, _512, v512, eng_q41_block,
                DOT4_Q4X_X16_512_BODY(eng_q41_block, q41_dm4, dot4_q41x16, q41_qidx, q41_dmidx,
                                      Q41_DMFIX),
                axpy2_q8_512, VALWAYS512, TGT512)
Q4X_X16_KERNELS(q40, _512, v512, eng_q40_block,
                DOT4_Q4X_X16_512_BODY(eng_q40_block, q40_dm4, dot4_q40x16, q40_qidx, q40_dmidx,
                                      Q40_DMFIX),
                axpy2_q8_512, VALWAYS512, TGT512)

/* x16_group_q4: once per decode step, so plain loops */
static void v512_x16_group_q4(const int16_t *q, long n, int16_t *g)
{
    for (long o = 0; o + 128 <= n; o += 128)
        for (int b = 0; b < 4; b++)
            for (int k = 0; k < 8; k++) {
                const int16_t *s = q + o + 32 * b + 2 * k;
                int16_t *t = g + o + 8 * b + k;
                t[0] = s[0];
                t[32] = s[16];
                t[64] = s[1];
                t[96] = s[17];
            }
}

VALWAYS512 void dot4_q6k_x16_512(const eng_q6k_block *const b[4], const x16_row *x, long nb,
                                 float out[4], const char *const *pf)
{
    DOT4_Q6K_X16_BODY(DPW_VNNI)
}

VALWAYS512 void dot4_q6k_x16_rows512(const eng_q6k_block *r0, const eng_q6k_block *r1,
                                     const eng_q6k_block *r2, const eng_q6k_block *r3,
                                     const x16_row *x, long cols, float out[4],
                                     const char *const *pf)
{
    const eng_q6k_block *const b[4] = { r0, r1, r2, r3 };
    dot4_q6k_x16_512(b, x, cols / 256, out, pf);
}

TGT512 static void v512_gemv_q6k_x16(const eng_q6k_block *w, long cols, const x16_row *x,
                                     const float *bias, float *y, long r0, long r1)
{
    GEMV_Q6K_X16_BODY(dot4_q6k_x16_rows512, dot4_q6k_x16_512)
}

/* dot4_q4k_x16_ffn in this set's walk (its own name for FFN_ONE_SLOT) */
VALWAYS512 void dot4_q4k_x16_ffn512(const void *r0, const void *r1, const void *r2,
                                    const void *r3, const ffn_args *a, long n, float out[4],
                                    const char *const *pf)
{
    const eng_q4k_block *const b[4] = { r0, r1, r2, r3 };
    dot4_q4k_x16_512(b, a->x16, a->xs, n / 256, out, pf);
}

FFN_ONE_SLOT(dot4_q4k_x16_ffn512, axpy2_q8_512, VALWAYS512, a)

VALWAYS512 void dot4_q5k_x16_ffn512(const void *r0, const void *r1, const void *r2,
                                    const void *r3, const ffn_args *a, long n, float out[4],
                                    const char *const *pf)
{
    const eng_q5k_block *const b[4] = { r0, r1, r2, r3 };
    dot4_q5k_x16_512(b, a->x16, a->xs, n / 256, out, pf);
}

FFN_ONE_SLOT(dot4_q5k_x16_ffn512, axpy2_q8_512, VALWAYS512, a)


/* The decode FFN: Q8_0 slots, and Q4_K, Q5_K, Q4_1 and Q4_0 ones' down
 * rows, on 512-bit registers; the others as AVX2's */
TGT512 static void v512_ffn_fused(const ffn_args *a, long j0, long j1, float *acc)
{
    const size_t rs = eng_ffn_row_bytes(a->w->dtype, a->w->n_embd);
    const size_t rd = eng_ffn_down_bytes(a->w->dtype, a->w->n_embd);
    if (a->w->dtype == ENG_DTYPE_Q4_K && a->x16) {
        FFN_FUSED_BODY(dot4_q4k_x16_ffn512, axpy2_q8_512, rs, rd, a)
    } else if (a->w->dtype == ENG_DTYPE_Q5_K && a->x16) {
        FFN_FUSED_BODY(dot4_q5k_x16_ffn512, axpy2_q8_512, rs, rd, a)
    } else if (a->w->dtype == ENG_DTYPE_Q4_1 && a->x16) {
        FFN_FUSED_BODY(dot4_q41x16_ffn_512, axpy2_q8_512, rs, rd, a)
    } else if (a->w->dtype == ENG_DTYPE_Q4_0 && a->x16) {
        FFN_FUSED_BODY(dot4_q40x16_ffn_512, axpy2_q8_512, rs, rd, a)
    } else if (a->w->dtype == ENG_DTYPE_Q8_0) {
        FFN_FUSED_BODY(dot4_q8_512, axpy2_q8_512, rs, rd, a->x)
    } else {
        v_ffn_fused(a, j0, j1, acc);
    }
}

TGT512 static void v512_ffn_axpy(const ffn_args *a, const float *av, long j0, long j1,
                                 float *acc)
{
    if (eng_ffn_down_dtype(a->w->dtype) == ENG_DTYPE_Q8_0) {
        const size_t rd = eng_ffn_down_bytes(a->w->dtype, a->w->n_embd);
        FFN_AXPY_BODY(axpy2_q8_512, rd)
    } else {
        v_ffn_axpy(a, av, j0, j1, acc);
    }
}

static const kernels kern_avx512 = {
    .name = "avx512vnni",
    AVX2_OPS,
    .dot2_q4q8 = v512_dot2_q4q8,
    .q8_groups = true,
    .pack32 = v512_pack32,
    .pack32_mxfp4 = v512_pack32_mxfp4,
    .pack32_q8 = v512_pack32_q8,
    .pack32_q4k = v512_pack32_q4k,
    .pack32_q6k = v512_pack32_q6k,
    .pack32_q5k = v512_pack32_q5k,
    .gemv_q8 = v512_gemv_q8,
    .gemv_q4k = s_gemv_q4k,
    .gemv_q6k = s_gemv_q6k,
    .gemv_q5k = s_gemv_q5k,
    .gemv_q41 = s_gemv_q41,
    .gemv_q40 = s_gemv_q40,
    .x16_prep_q4 = v_x16_prep,
    .x16_group_q4 = v512_x16_group_q4,
    .gemv_q41_x16 = v512_gemv_q41_x16,
    .gemv_q40_x16 = v512_gemv_q40_x16,
    .pack32_q41 = v512_pack32_q41,
    .pack32_q40 = v512_pack32_q40,
    .x16_prep_q4k = v_x16_prep_q4k,
    .gemv_q4k_x16 = v512_gemv_q4k_x16,
    .gemv_q6k_x16 = v512_gemv_q6k_x16,
    .gemv_q5k_x16 = v512_gemv_q5k_x16,
    .mm6x32 = v512_mm6x32,
    .q8x_row = v512_q8x_row,
    .pack32_u8 = v512_pack32_u8,
    .mm6x32_u8 = v512_mm6x32_u8,
    .act_mul16 = v512_act_mul16,
    .att_pv32 = v512_att_pv32,
    .exp4 = v512_exp4,
    .ffn_down = v512_ffn_down,
    .ffn_fused = v512_ffn_fused,
    .ffn_axpy = v512_ffn_axpy,
};
#endif /* HAVE_X86 */

/* ---- NEON kernels (AArch64: a Jetson's Cortex-A78AE) -------------------- */

/* Advanced SIMD is part of every AArch64 CPU, so this set needs no runtime
 * check. The scalar kernels cannot stand in for it: without reassociating
 * float sums (which we do not allow the compiler), each of their dot
 * products is one chain of dependent multiply-adds, a few cycles an
 * element. Here every dot product keeps eight independent float32x4
 * chains (an A78 has two 128-bit FMA pipes of four cycles' latency), the
 * shapes and walks are the AVX2 set's, and f16 goes through the hardware's
 * fcvtl/fcvtn (round to nearest even, as f2h). The sums run in another
 * order than the scalar set's, within the tests' stated bounds. */
#if HAVE_NEON

/* Four weights (f16 or f32) from element i, as f32. */
ALWAYS float32x4_t nld4(const void *base, long i, bool f16)
{
    if (f16)
        return vcvt_f32_f16(vreinterpret_f16_u16(vld1_u16((const uint16_t *)base + i)));
    return vld1q_f32((const float *)base + i);
}

/* [sum a, sum b, sum c, sum d] */
ALWAYS float32x4_t nsum4x4(float32x4_t a, float32x4_t b, float32x4_t c, float32x4_t d)
{
    return vpaddq_f32(vpaddq_f32(a, b), vpaddq_f32(c, d));
}

/* Four rows (f16 or f32) against x over n, prefetching the four rows pf
 * (when not NULL) at the same column, as dot4_impl. */
ALWAYS void n_dot4_impl(const void *r0, const void *r1, const void *r2, const void *r3,
                        const float *x, long n, bool f16, float out[4], const char *const *pf)
{
    float32x4_t a0 = vdupq_n_f32(0.0f), a1 = a0, a2 = a0, a3 = a0;
    float32x4_t b0 = a0, b1 = a0, b2 = a0, b3 = a0;
    const long es = (long)dsize(f16);
    long k = 0;
    for (; k + 32 <= n; k += 32) {
        if (pf) { /* 32 elements: one 64-byte line per row (f16), two (f32) */
            for (int i = 0; i < 4; i++) {
                __builtin_prefetch(pf[i] + k * es, 0, 3);
                if (!f16)
                    __builtin_prefetch(pf[i] + k * es + 64, 0, 3);
            }
        }
        for (int u = 0; u < 32; u += 8) {
            const float32x4_t x0 = vld1q_f32(x + k + u), x1 = vld1q_f32(x + k + u + 4);
            a0 = vfmaq_f32(a0, nld4(r0, k + u, f16), x0);
            a1 = vfmaq_f32(a1, nld4(r1, k + u, f16), x0);
            a2 = vfmaq_f32(a2, nld4(r2, k + u, f16), x0);
            a3 = vfmaq_f32(a3, nld4(r3, k + u, f16), x0);
            b0 = vfmaq_f32(b0, nld4(r0, k + u + 4, f16), x1);
            b1 = vfmaq_f32(b1, nld4(r1, k + u + 4, f16), x1);
            b2 = vfmaq_f32(b2, nld4(r2, k + u + 4, f16), x1);
            b3 = vfmaq_f32(b3, nld4(r3, k + u + 4, f16), x1);
        }
    }
    if (pf && k < n)
        for (int i = 0; i < 4; i++)
            __builtin_prefetch(pf[i] + k * es, 0, 3);
    for (; k + 4 <= n; k += 4) {
        const float32x4_t x0 = vld1q_f32(x + k);
        a0 = vfmaq_f32(a0, nld4(r0, k, f16), x0);
        a1 = vfmaq_f32(a1, nld4(r1, k, f16), x0);
        a2 = vfmaq_f32(a2, nld4(r2, k, f16), x0);
        a3 = vfmaq_f32(a3, nld4(r3, k, f16), x0);
    }
    vst1q_f32(out, nsum4x4(vaddq_f32(a0, b0), vaddq_f32(a1, b1), vaddq_f32(a2, b2),
                           vaddq_f32(a3, b3)));
    for (; k < n; k++) {
        const float xv = x[k];
        out[0] += wval(r0, k, f16) * xv;
        out[1] += wval(r1, k, f16) * xv;
        out[2] += wval(r2, k, f16) * xv;
        out[3] += wval(r3, k, f16) * xv;
    }
}

ALWAYS float n_dot1_impl(const void *r, const float *x, long n, bool f16)
{
    float32x4_t a0 = vdupq_n_f32(0.0f), a1 = a0;
    long k = 0;
    for (; k + 8 <= n; k += 8) {
        a0 = vfmaq_f32(a0, nld4(r, k, f16), vld1q_f32(x + k));
        a1 = vfmaq_f32(a1, nld4(r, k + 4, f16), vld1q_f32(x + k + 4));
    }
    for (; k + 4 <= n; k += 4)
        a0 = vfmaq_f32(a0, nld4(r, k, f16), vld1q_f32(x + k));
    float s = vaddvq_f32(vaddq_f32(a0, a1));
    for (; k < n; k++)
        s += wval(r, k, f16) * x[k];
    return s;
}

/* Rows [r0, r1) as four quarters side by side, as gemv_impl. */
ALWAYS void n_gemv_impl(const void *w, bool f16, long cols, const float *x, const float *bias,
                        float *y, long r0, long r1)
{
    const size_t rs = (size_t)cols * dsize(f16);
    const char *base = w;
    const long q = (r1 - r0) / 4;
    for (long i = 0; i < q; i++) {
        const long r[4] = { r0 + i, r0 + q + i, r0 + 2 * q + i, r0 + 3 * q + i };
        const char *p[4], *pf[4];
        for (int j = 0; j < 4; j++) {
            p[j] = base + (size_t)r[j] * rs;
            pf[j] = p[j] + GEMV_PF_ROWS * rs; /* past the end: harmless hint */
        }
        float o[4];
        n_dot4_impl(p[0], p[1], p[2], p[3], x, cols, f16, o, GEMV_PF_ROWS ? pf : NULL);
        for (int j = 0; j < 4; j++)
            y[r[j]] = o[j] + (bias ? bias[r[j]] : 0.0f);
    }
    for (long rr = r0 + 4 * q; rr < r1; rr++)
        y[rr] = n_dot1_impl(base + (size_t)rr * rs, x, cols, f16) + (bias ? bias[rr] : 0.0f);
}

static void n_gemv(const void *w, bool f16, long cols, const float *x, const float *bias,
                   float *y, long r0, long r1)
{
    if (f16)
        n_gemv_impl(w, true, cols, x, bias, y, r0, r1);
    else
        n_gemv_impl(w, false, cols, x, bias, y, r0, r1);
}

/* Sixteen int8 as four float32x4. */
ALWAYS void nq8x16(int8x16_t v, float32x4_t f[4])
{
    const int16x8_t lo = vmovl_s8(vget_low_s8(v)), hi = vmovl_high_s8(v);
    f[0] = vcvtq_f32_s32(vmovl_s16(vget_low_s16(lo)));
    f[1] = vcvtq_f32_s32(vmovl_high_s16(lo));
    f[2] = vcvtq_f32_s32(vmovl_s16(vget_low_s16(hi)));
    f[3] = vcvtq_f32_s32(vmovl_high_s16(hi));
}

/* Sixteen int8 of a Q8_0 block as four float32x4. */
ALWAYS void nldq8x16(const int8_t *q, float32x4_t f[4])
{
    nq8x16(vld1q_s8(q), f);
}

/* A block's 32 values (lo: 0-15, hi: 16-31) times x's (xv) in two chains,
 * summed into four lanes: the products n_dot4_q8 and n_dot4_mxfp4 scale. */
ALWAYS float32x4_t n_dot32(const float32x4_t lo[4], const float32x4_t hi[4],
                           const float32x4_t xv[8])
{
    float32x4_t t0 = vmulq_f32(lo[0], xv[0]), t1 = vmulq_f32(lo[1], xv[1]);
    t0 = vfmaq_f32(t0, lo[2], xv[2]);
    t1 = vfmaq_f32(t1, lo[3], xv[3]);
    t0 = vfmaq_f32(t0, hi[0], xv[4]);
    t1 = vfmaq_f32(t1, hi[1], xv[5]);
    t0 = vfmaq_f32(t0, hi[2], xv[6]);
    t1 = vfmaq_f32(t1, hi[3], xv[7]);
    return vaddq_f32(t0, t1);
}

/* NEON's walk of four rows of blocks of 32 (type BT) against x: each
 * block's 32 values unpacked into lo and hi (float32x4 x 4 each) by
 * UNPACK(bb, lo, hi), their products in two registers (two chains,
 * n_dot32), scaled by SCALE(bb) into the row's sum; pf are prefetched a
 * block a step. n_dot4_q8's and n_dot4_mxfp4's body. */
#define N_DOT4_BODY(BT, UNPACK, SCALE)                                                       \
    const BT *b[4] = { r0, r1, r2, r3 };                                                     \
    float32x4_t acc[4] = { vdupq_n_f32(0.0f), vdupq_n_f32(0.0f), vdupq_n_f32(0.0f),          \
                           vdupq_n_f32(0.0f) };                                              \
    for (long i = 0; i < n / 32; i++) {                                                      \
        if (pf)                                                                              \
            for (int j = 0; j < 4; j++)                                                      \
                __builtin_prefetch(pf[j] + i * sizeof(BT), 0, 3);                            \
        float32x4_t xv[8];                                                                   \
        for (int u = 0; u < 8; u++)                                                          \
            xv[u] = vld1q_f32(x + 32 * i + 4 * u);                                           \
        for (int j = 0; j < 4; j++) {                                                        \
            const BT *bb = b[j] + i;                                                         \
            float32x4_t lo[4], hi[4];                                                        \
            UNPACK(bb, lo, hi);                                                              \
            acc[j] = vfmaq_n_f32(acc[j], n_dot32(lo, hi, xv), SCALE(bb));                    \
        }                                                                                    \
    }                                                                                        \
    vst1q_f32(out, nsum4x4(acc[0], acc[1], acc[2], acc[3]));

/* Four Q8_0 rows against x (f32): a block's codes widened to f32. */
#define N_Q8_UNPACK(bb, lo, hi) (nldq8x16((bb)->q, lo), nldq8x16((bb)->q + 16, hi))
#define N_Q8_SCALE(bb) h2f((bb)->d)
ALWAYS void n_dot4_q8(const void *r0, const void *r1, const void *r2, const void *r3,
                      const float *x, long n, float out[4], const char *const *pf)
{
    N_DOT4_BODY(eng_q8_block, N_Q8_UNPACK, N_Q8_SCALE)
}

static void n_gemv_q8(const eng_q8_block *w, long cols, const float *x, const float *bias,
                      float *y, long r0, long r1)
{
    GEMV_BLOCKS_BODY(eng_q8_block, 32, n_dot4_q8, x)
    s_gemv_q8(w, cols, x, bias, y, r0 + 4 * q, r1);
}

/* Four MXFP4 rows against x, as n_dot4_q8: a block's codes become their
 * levels by a table lookup (vqtbl1q), scaled by 2^(e - 128). */
#define N_MXFP4_UNPACK(bb, lo, hi)                                                           \
    (nq8x16(vqtbl1q_s8(lut, vandq_u8(vld1q_u8((bb)->qs), vdupq_n_u8(0x0f))), lo),          \
     nq8x16(vqtbl1q_s8(lut, vshrq_n_u8(vld1q_u8((bb)->qs), 4)), hi))
#define N_MXFP4_SCALE(bb) eng_e8m0_half((bb)->e)
ALWAYS void n_dot4_mxfp4(const void *r0, const void *r1, const void *r2, const void *r3,
                         const float *x, long n, float out[4], const char *const *pf)
{
    const int8x16_t lut = vld1q_s8(eng_mxfp4_levels);
    N_DOT4_BODY(eng_mxfp4_block, N_MXFP4_UNPACK, N_MXFP4_SCALE)
}

static void n_gemv_mxfp4(const eng_mxfp4_block *w, long cols, const float *x,
                         const float *bias, float *y, long r0, long r1)
{
    GEMV_BLOCKS_BODY(eng_mxfp4_block, 32, n_dot4_mxfp4, x)
    s_gemv_mxfp4(w, cols, x, bias, y, r0 + 4 * q, r1);
}

/* Sixteen 4-bit codes (nibbles already split into 16 bytes) as four
 * float32x4. */
ALWAYS void nldq4x16(uint8x16_t v, float32x4_t f[4])
{
    const uint16x8_t lo = vmovl_u8(vget_low_u8(v)), hi = vmovl_high_u8(v);
    f[0] = vcvtq_f32_u32(vmovl_u16(vget_low_u16(lo)));
    f[1] = vcvtq_f32_u32(vmovl_high_u16(lo));
    f[2] = vcvtq_f32_u32(vmovl_u16(vget_low_u16(hi)));
    f[3] = vcvtq_f32_u32(vmovl_high_u16(hi));
}

/* One Q4_K (qh NULL) or Q5_K block's codes against x (its 256), as
 * s_dot_q4k takes them: per sub-block the products in two chains, times
 * dsc, into acc. A Q5_K code's fifth bit (bit 2p + h of qh's byte at its
 * place in the 32) is moved to 16 and put in before the conversion. */
ALWAYS float32x4_t n_qk_block(const uint8_t *qs, const uint8_t *qh, const float *x,
                              const float dsc[8], float32x4_t acc)
{
    const uint8x16_t m4 = vdupq_n_u8(15), m16 = vdupq_n_u8(16);
    const uint8x16_t qh0 = qh ? vld1q_u8(qh) : m4, qh1 = qh ? vld1q_u8(qh + 16) : m4;
    for (int p = 0; p < 4; p++) {
        const float *xb = x + 64 * p;
        const uint8x16_t c0 = vld1q_u8(qs + 32 * p), c1 = vld1q_u8(qs + 32 * p + 16);
        for (int h = 0; h < 2; h++) {
            uint8x16_t q0 = h ? vshrq_n_u8(c0, 4) : vandq_u8(c0, m4);
            uint8x16_t q1 = h ? vshrq_n_u8(c1, 4) : vandq_u8(c1, m4);
            if (qh) { /* bit 2p + h to bit 4: a shift left by 4 - (2p + h), or right */
                const int8x16_t sh = vdupq_n_s8((int8_t)(4 - 2 * p - h));
                q0 = vorrq_u8(q0, vandq_u8(vshlq_u8(qh0, sh), m16));
                q1 = vorrq_u8(q1, vandq_u8(vshlq_u8(qh1, sh), m16));
            }
            float32x4_t f[8];
            nldq4x16(q0, f);
            nldq4x16(q1, f + 4);
            const float *xh = xb + 32 * h;
            float32x4_t t0 = vmulq_f32(f[0], vld1q_f32(xh)), t1 = vmulq_f32(f[1], vld1q_f32(xh + 4));
            for (int u = 2; u < 8; u += 2) {
                t0 = vfmaq_f32(t0, f[u], vld1q_f32(xh + 4 * u));
                t1 = vfmaq_f32(t1, f[u + 1], vld1q_f32(xh + 4 * u + 4));
            }
            acc = vfmaq_n_f32(acc, vaddq_f32(t0, t1), dsc[2 * p + h]);
        }
    }
    return acc;
}

/* A Q4_K row against x as s_dot_q4k takes it, the mins off at the end. */
static float n_dot_q4k(const eng_q4k_block *b, const float *x, const float *xs, long nb)
{
    float32x4_t acc = vdupq_n_f32(0.0f);
    float mins = 0.0f;
    for (long i = 0; i < nb; i++, b++) {
        float dsc[8], dmn[8];
        qk_factors(b->d, b->dmin, b->scales, dsc, dmn);
        for (int u = 0; u < 8; u++)
            mins += dmn[u] * xs[8 * i + u];
        acc = n_qk_block(b->qs, NULL, x + 256 * i, dsc, acc);
    }
    return vaddvq_f32(acc) - mins;
}

static void n_gemv_q4k(const eng_q4k_block *w, long cols, const float *x, const float *xs,
                       const float *bias, float *y, long r0, long r1)
{
    const long nb = cols / 256;
    for (long r = r0; r < r1; r++) {
        if (r + GEMV_PF_ROWS < r1)
            for (long l = 0; l < nb * ENG_Q4K_BLOCK_BYTES; l += 64)
                __builtin_prefetch((const char *)(w + (size_t)(r + GEMV_PF_ROWS) * nb) + l, 0, 3);
        y[r] = n_dot_q4k(w + (size_t)r * nb, x, xs, nb) + (bias ? bias[r] : 0.0f);
    }
}

/* The same over a Q5_K row */
static float n_dot_q5k(const eng_q5k_block *b, const float *x, const float *xs, long nb)
{
    float32x4_t acc = vdupq_n_f32(0.0f);
    float mins = 0.0f;
    for (long i = 0; i < nb; i++, b++) {
        float dsc[8], dmn[8];
        qk_factors(b->d, b->dmin, b->scales, dsc, dmn);
        for (int u = 0; u < 8; u++)
            mins += dmn[u] * xs[8 * i + u];
        acc = n_qk_block(b->qs, b->qh, x + 256 * i, dsc, acc);
    }
    return vaddvq_f32(acc) - mins;
}

static void n_gemv_q5k(const eng_q5k_block *w, long cols, const float *x, const float *xs,
                       const float *bias, float *y, long r0, long r1)
{
    const long nb = cols / 256;
    for (long r = r0; r < r1; r++) {
        if (r + GEMV_PF_ROWS < r1)
            for (long l = 0; l < nb * ENG_Q5K_BLOCK_BYTES; l += 64)
                __builtin_prefetch((const char *)(w + (size_t)(r + GEMV_PF_ROWS) * nb) + l, 0, 3);
        y[r] = n_dot_q5k(w + (size_t)r * nb, x, xs, nb) + (bias ? bias[r] : 0.0f);
    }
}

/* A Q6_K row against x as s_dot_q6k takes it: per sub-block of 16 the
 * codes as int8 (u - 32: a nibble of ql, two bits of qh), their products in
 * two chains, times d * scale. */
static float n_dot_q6k(const eng_q6k_block *b, const float *x, long nb)
{
    float32x4_t acc = vdupq_n_f32(0.0f);
    const uint8x16_t m4 = vdupq_n_u8(15), m2 = vdupq_n_u8(0x30);
    for (long i = 0; i < nb; i++, b++) {
        const float d = h2f(b->d);
        for (int g = 0; g < 8; g++) { /* 32 weights: two sub-blocks */
            const int hf = g / 4, gg = g % 4;
            for (int s = 0; s < 2; s++) {
                const uint8x16_t c = vld1q_u8(b->ql + 64 * hf + 32 * (gg & 1) + 16 * s);
                const uint8x16_t t = vld1q_u8(b->qh + 32 * hf + 16 * s);
                const uint8x16_t lo = gg < 2 ? vandq_u8(c, m4) : vshrq_n_u8(c, 4);
                const uint8x16_t hi = vandq_u8(gg == 0   ? vshlq_n_u8(t, 4)
                                               : gg == 1 ? vshlq_n_u8(t, 2)
                                               : gg == 2 ? t
                                                         : vshrq_n_u8(t, 2),
                                               m2);
                float32x4_t f[4];
                nq8x16(vsubq_s8(vreinterpretq_s8_u8(vorrq_u8(lo, hi)), vdupq_n_s8(32)), f);
                const float *xb = x + 256 * i + 32 * g + 16 * s;
                float32x4_t t0 = vmulq_f32(f[0], vld1q_f32(xb));
                float32x4_t t1 = vmulq_f32(f[1], vld1q_f32(xb + 4));
                t0 = vfmaq_f32(t0, f[2], vld1q_f32(xb + 8));
                t1 = vfmaq_f32(t1, f[3], vld1q_f32(xb + 12));
                acc = vfmaq_n_f32(acc, vaddq_f32(t0, t1), d * (float)b->scales[2 * g + s]);
            }
        }
    }
    return vaddvq_f32(acc);
}

static void n_gemv_q6k(const eng_q6k_block *w, long cols, const float *x, const float *bias,
                       float *y, long r0, long r1)
{
    const long nb = cols / 256;
    for (long r = r0; r < r1; r++) {
        if (r + GEMV_PF_ROWS < r1)
            for (long l = 0; l < nb * ENG_Q6K_BLOCK_BYTES; l += 64)
                __builtin_prefetch((const char *)(w + (size_t)(r + GEMV_PF_ROWS) * nb) + l, 0, 3);
        y[r] = n_dot_q6k(w + (size_t)r * nb, x, nb) + (bias ? bias[r] : 0.0f);
    }
}

static void n_cvt_rows(const uint16_t *const *src, int nrows, long n, float *dst, long ldd)
{
    for (int i = 0; i < nrows; i++) {
        const uint16_t *s = src[i];
        float *d = dst + i * ldd;
        long k = 0;
        for (; k + 4 <= n; k += 4)
            vst1q_f32(d + k, nld4(s, k, true));
        for (; k < n; k++)
            d[k] = h2f(s[k]);
    }
}

/* 4 rows x 3 tokens, twelve accumulators; weights f32 or f16. */
ALWAYS void n_dot4x3_impl(const void *const *w, const float *const *x, long n, bool f16,
                          float out[4][3])
{
    const float *x0 = x[0], *x1 = x[1], *x2 = x[2];
    float32x4_t c[4][3];
    for (int r = 0; r < 4; r++)
        for (int t = 0; t < 3; t++)
            c[r][t] = vdupq_n_f32(0.0f);
    long k = 0;
    for (; k + 4 <= n; k += 4) {
        const float32x4_t xa = vld1q_f32(x0 + k), xb = vld1q_f32(x1 + k), xc = vld1q_f32(x2 + k);
        for (int r = 0; r < 4; r++) {
            const float32x4_t v = nld4(w[r], k, f16);
            c[r][0] = vfmaq_f32(c[r][0], v, xa);
            c[r][1] = vfmaq_f32(c[r][1], v, xb);
            c[r][2] = vfmaq_f32(c[r][2], v, xc);
        }
    }
    for (int t = 0; t < 3; t++) {
        float s[4];
        vst1q_f32(s, nsum4x4(c[0][t], c[1][t], c[2][t], c[3][t]));
        for (int r = 0; r < 4; r++)
            out[r][t] = s[r];
    }
    for (; k < n; k++)
        for (int r = 0; r < 4; r++) {
            const float wv = wval(w[r], k, f16);
            out[r][0] += wv * x0[k];
            out[r][1] += wv * x1[k];
            out[r][2] += wv * x2[k];
        }
}

static void n_dot4x3(const float *const *w, const float *const *x, long n, float out[4][3])
{
    n_dot4x3_impl((const void *const *)w, x, n, false, out);
}

static void n_dot4x3_h(const uint16_t *const *w, const float *const *x, long n, float out[4][3])
{
    n_dot4x3_impl((const void *const *)w, x, n, true, out);
}

/* acc[0..n) += a0 * d0 + a1 * d1 (f16 or f32 rows); prefetches p0, p1. */
ALWAYS void n_axpy2_impl(float *acc, float a0, const void *d0, float a1, const void *d1, long n,
                         bool f16, const char *p0, const char *p1)
{
    const long es = (long)dsize(f16);
    long k = 0;
    for (; k + 8 <= n; k += 8) {
        if (p0 && (k * es) % 64 == 0) {
            __builtin_prefetch(p0 + k * es, 0, 3);
            __builtin_prefetch(p1 + k * es, 0, 3);
        }
        float32x4_t y0 = vld1q_f32(acc + k), y1 = vld1q_f32(acc + k + 4);
        y0 = vfmaq_n_f32(y0, nld4(d0, k, f16), a0);
        y1 = vfmaq_n_f32(y1, nld4(d0, k + 4, f16), a0);
        y0 = vfmaq_n_f32(y0, nld4(d1, k, f16), a1);
        y1 = vfmaq_n_f32(y1, nld4(d1, k + 4, f16), a1);
        vst1q_f32(acc + k, y0);
        vst1q_f32(acc + k + 4, y1);
    }
    for (; k < n; k++)
        acc[k] += a0 * wval(d0, k, f16) + a1 * wval(d1, k, f16);
}

F16_F32_WALK_KERNELS(n_, ALWAYS)

/* acc[0..n) += a0 * d0 + a1 * d1 over Q8_0 rows, a block's d folded into
 * its a once, as axpy2_q8. */
ALWAYS void n_axpy2_q8(float *acc, float a0, const void *d0, float a1, const void *d1, long n,
                       const char *p0, const char *p1)
{
    const eng_q8_block *b0 = d0, *b1 = d1;
    for (long i = 0; i < n / 32; i++) {
        if (p0) {
            __builtin_prefetch(p0 + i * sizeof(eng_q8_block), 0, 3);
            __builtin_prefetch(p1 + i * sizeof(eng_q8_block), 0, 3);
        }
        const float s0 = a0 * h2f(b0[i].d), s1 = a1 * h2f(b1[i].d);
        for (int u = 0; u < 32; u += 16) {
            float32x4_t q0[4], q1[4];
            nldq8x16(b0[i].q + u, q0);
            nldq8x16(b1[i].q + u, q1);
            float *yp = acc + 32 * i + u;
            for (int v = 0; v < 4; v++) {
                float32x4_t y = vld1q_f32(yp + 4 * v);
                y = vfmaq_n_f32(y, q0[v], s0);
                y = vfmaq_n_f32(y, q1[v], s1);
                vst1q_f32(yp + 4 * v, y);
            }
        }
    }
}

FFN_ONE_SLOT(n_dot4_f16, n_axpy2_f16, ALWAYS, a->x)
FFN_ONE_SLOT(n_dot4_f32, n_axpy2_f32, ALWAYS, a->x)
FFN_ONE_SLOT(n_dot4_q8, n_axpy2_q8, ALWAYS, a->x)

/* The walk's DOT4 over Q4_K (Q5_K: q5) gate and up rows, a row at a time
 * (X: the walk's args, for the token and its sums); the rows pf
 * prefetched whole. */
ALWAYS void n_dot4_qk(const void *const r[4], const ffn_args *a, long n, float out[4],
                      const char *const *pf, bool q5)
{
    const long nb = n / 256;
    const size_t rb = (size_t)nb * (q5 ? ENG_Q5K_BLOCK_BYTES : ENG_Q4K_BLOCK_BYTES);
    for (int j = 0; j < 4; j++) {
        if (pf)
            for (size_t l = 0; l < rb; l += 64)
                __builtin_prefetch(pf[j] + l, 0, 3);
        out[j] = q5 ? n_dot_q5k(r[j], a->x, a->xs, nb) : n_dot_q4k(r[j], a->x, a->xs, nb);
    }
}

ALWAYS void n_dot4_q4k_ffn(const void *r0, const void *r1, const void *r2, const void *r3,
                           const ffn_args *a, long n, float out[4], const char *const *pf)
{
    n_dot4_qk((const void *const[4]){ r0, r1, r2, r3 }, a, n, out, pf, false);
}

FFN_ONE_SLOT(n_dot4_q4k_ffn, n_axpy2_q8, ALWAYS, a)

ALWAYS void n_dot4_q5k_ffn(const void *r0, const void *r1, const void *r2, const void *r3,
                           const ffn_args *a, long n, float out[4], const char *const *pf)
{
    n_dot4_qk((const void *const[4]){ r0, r1, r2, r3 }, a, n, out, pf, true);
}

FFN_ONE_SLOT(n_dot4_q5k_ffn, n_axpy2_q8, ALWAYS, a)

/* GEMV_BLOCKS_BODY's DOT4 over Q4_1 and Q4_0 rows: X the token and its
 * sums */
typedef struct f32_xs {
    const float *x, *xs;
} f32_xs;

/* Four Q4_1 (Q4_0: DM) rows (nb blocks) against x and its block sums xs:
 * per block and row the 32 products of codes and x in two chains, times d,
 * into the row's sum; m times the block's sum apart, as s_dot_q41 takes
 * them. The set's kernels for T (q41, q40): n_dot4_T, its GEMV's DOT4,
 * n_gemv_T (the rows past the quarters one at a time through the same
 * kernel) and the FFN walk's n_dot4_T_ffn with its lone-slot walk. */
#define N_Q4X_KERNELS(T, BT, DM)                                                             \
    ALWAYS void n_dot4_##T(const BT *const b[4], const float *x, const float *xs, long nb,   \
                           float out[4], const char *const *pf)                              \
    {                                                                                        \
        const uint8x16_t m4 = vdupq_n_u8(15);                                                \
        float32x4_t acc[4] = { vdupq_n_f32(0.0f), vdupq_n_f32(0.0f), vdupq_n_f32(0.0f),      \
                               vdupq_n_f32(0.0f) };                                          \
        float am[4] = { 0.0f, 0.0f, 0.0f, 0.0f };                                            \
        for (long i = 0; i < nb; i++) {                                                      \
            if (pf)                                                                          \
                for (int j = 0; j < 4; j++)                                                  \
                    __builtin_prefetch(pf[j] + i * sizeof(BT), 0, 3);                        \
            float32x4_t xv[8];                                                               \
            for (int u = 0; u < 8; u++)                                                      \
                xv[u] = vld1q_f32(x + 32 * i + 4 * u);                                       \
            for (int j = 0; j < 4; j++) {                                                    \
                const BT *bb = b[j] + i;                                                     \
                DM(h2f, bb, dw, mw);                                                         \
                const uint8x16_t v = vld1q_u8(bb->qs);                                       \
                float32x4_t lo[4], hi[4];                                                    \
                nldq4x16(vandq_u8(v, m4), lo);                                               \
                nldq4x16(vshrq_n_u8(v, 4), hi);                                              \
                float32x4_t t0 = vmulq_f32(lo[0], xv[0]), t1 = vmulq_f32(lo[1], xv[1]);      \
                t0 = vfmaq_f32(t0, lo[2], xv[2]);                                            \
                t1 = vfmaq_f32(t1, lo[3], xv[3]);                                            \
                t0 = vfmaq_f32(t0, hi[0], xv[4]);                                            \
                t1 = vfmaq_f32(t1, hi[1], xv[5]);                                            \
                t0 = vfmaq_f32(t0, hi[2], xv[6]);                                            \
                t1 = vfmaq_f32(t1, hi[3], xv[7]);                                            \
                acc[j] = vfmaq_n_f32(acc[j], vaddq_f32(t0, t1), dw);                         \
                am[j] += mw * xs[i];                                                         \
            }                                                                                \
        }                                                                                    \
        vst1q_f32(out, vaddq_f32(nsum4x4(acc[0], acc[1], acc[2], acc[3]), vld1q_f32(am)));   \
    }                                                                                        \
    ALWAYS void n_dot4_##T##_rows(const BT *r0, const BT *r1, const BT *r2, const BT *r3,    \
                                  const f32_xs *X, long cols, float out[4],                  \
                                  const char *const *pf)                                     \
    {                                                                                        \
        const BT *const b[4] = { r0, r1, r2, r3 };                                           \
        n_dot4_##T(b, X->x, X->xs, cols / 32, out, pf);                                      \
    }                                                                                        \
    static void n_gemv_##T(const BT *w, long cols, const float *x, const float *xs,          \
                           const float *bias, float *y, long r0, long r1)                    \
    {                                                                                        \
        const f32_xs X = { x, xs };                                                          \
        GEMV_BLOCKS_BODY(BT, 32, n_dot4_##T##_rows, &X)                                      \
        for (long r = r0 + 4 * q; r < r1; r++) {                                             \
            const BT *row = w + (size_t)r * nb, *b4[4] = { row, row, row, row };             \
            float o[4];                                                                      \
            n_dot4_##T(b4, x, xs, nb, o, NULL);                                              \
            y[r] = o[0] + (bias ? bias[r] : 0.0f);                                           \
        }                                                                                    \
    }                                                                                        \
    ALWAYS void n_dot4_##T##_ffn(const void *r0, const void *r1, const void *r2,             \
                                 const void *r3, const ffn_args *a, long n, float out[4],    \
                                 const char *const *pf)                                      \
    {                                                                                        \
        const BT *const b[4] = { r0, r1, r2, r3 };                                           \
        n_dot4_##T(b, a->x, a->xs, n / 32, out, pf);                                         \
    }                                                                                        \
    FFN_ONE_SLOT(n_dot4_##T##_ffn, n_axpy2_q8, ALWAYS, a)

N_Q4X_KERNELS(q41, eng_q41_block, Q41_DM)
N_Q4X_KERNELS(q40, eng_q40_block, Q40_DM)

static void n_ffn_fused(const ffn_args *a, long j0, long j1, float *acc)
{
    const size_t rs = eng_ffn_row_bytes(a->w->dtype, a->w->n_embd);
    const size_t rd = eng_ffn_down_bytes(a->w->dtype, a->w->n_embd);
    if (a->w->dtype == ENG_DTYPE_Q4_K) {
        FFN_FUSED_BODY(n_dot4_q4k_ffn, n_axpy2_q8, rs, rd, a)
    } else if (a->w->dtype == ENG_DTYPE_Q5_K) {
        FFN_FUSED_BODY(n_dot4_q5k_ffn, n_axpy2_q8, rs, rd, a)
    } else if (a->w->dtype == ENG_DTYPE_Q4_1) {
        FFN_FUSED_BODY(n_dot4_q41_ffn, n_axpy2_q8, rs, rd, a)
    } else if (a->w->dtype == ENG_DTYPE_Q4_0) {
        FFN_FUSED_BODY(n_dot4_q40_ffn, n_axpy2_q8, rs, rd, a)
    } else if (a->w->dtype == ENG_DTYPE_F16) {
        FFN_FUSED_BODY(n_dot4_f16, n_axpy2_f16, rs, rd, a->x)
    } else if (a->w->dtype == ENG_DTYPE_Q8_0) {
        FFN_FUSED_BODY(n_dot4_q8, n_axpy2_q8, rs, rd, a->x)
    } else {
        FFN_FUSED_BODY(n_dot4_f32, n_axpy2_f32, rs, rd, a->x)
    }
}

static void n_ffn_axpy(const ffn_args *a, const float *av, long j0, long j1, float *acc)
{
    FFN_AXPY_BY_DOWN(n_axpy2_q8, n_axpy2_f16, n_axpy2_f32)
}

/* Outer-product block over packed f32 down rows P [nj][ldp]: NT tokens x
 * (4 * NV) columns in registers over the nj slots (at most 24 of the 32
 * vector registers), added to y unless first; as down_block. */
ALWAYS void n_down_block(const float *P, long ldp, int nj, const float *A, long lda, float *y,
                         long ldy, bool first, const int NT, const int NV)
{
    float32x4_t acc[6][4];
    for (int t = 0; t < NT; t++)
        for (int v = 0; v < NV; v++)
            acc[t][v] = first ? vdupq_n_f32(0.0f) : vld1q_f32(y + t * ldy + 4 * v);
    for (int j = 0; j < nj; j++) {
        float32x4_t wv[4];
        for (int v = 0; v < NV; v++)
            wv[v] = vld1q_f32(P + (size_t)j * ldp + 4 * v);
        for (int t = 0; t < NT; t++) {
            const float av = A[t * lda + j];
            for (int v = 0; v < NV; v++)
                acc[t][v] = vfmaq_n_f32(acc[t][v], wv[v], av);
        }
    }
    for (int t = 0; t < NT; t++)
        for (int v = 0; v < NV; v++)
            vst1q_f32(y + t * ldy + 4 * v, acc[t][v]);
}

ALWAYS void n_down_tiles(const float *P, long ldp, int nj, long nc, const float *A, long lda,
                         float *y, long ldy, bool first, const int NT)
{
    DOWN_TILES_BODY(n_down_block, 4, 4)
}

/* Down rows of slots jb .. jb + nj, columns [cc, cc + ncc), as f32 into
 * P [nj][ldp]: zeros past ncc and for slots out of range (as the AVX2
 * set's down_pack). */
ALWAYS void down_pack(const ffn_args *a, long jb, int nj, long cc, long ncc, long ldp, float *P)
{
    const eng_ffn_weights *w = a->w;
    const eng_dtype dt = eng_ffn_down_dtype(w->dtype);
    const bool f16 = dt == ENG_DTYPE_F16;
    const size_t rb = eng_dtype_bytes(dt, (size_t)w->n_embd);
    for (int i = 0; i < nj; i++) {
        const long s = slot_of(a, jb + i), s2 = i + 2 < nj ? slot_of(a, jb + i + 2) : -1;
        float *d = P + (size_t)i * ldp;
        long k = 0;
        if (s >= 0 && dt == ENG_DTYPE_Q8_0) {
            /* cc is a multiple of 8, so sixteen columns from a multiple of
             * 16 of the block never straddle it; others one at a time. The
             * row two slots on prefetched as this one is read (the AVX2
             * set's reason: scattered slots, short prefills waited) */
            const eng_q8_block *b = (const eng_q8_block *)((const char *)w->down + (size_t)s * rb);
            const char *next = s2 >= 0 ? (const char *)w->down + (size_t)s2 * rb : NULL;
            for (; k < ncc && (cc + k) % 16; k++)
                d[k] = wval_dt(b, cc + k, dt);
            for (; k + 16 <= ncc; k += 16) {
                const eng_q8_block *bb = b + (cc + k) / 32;
                if (next && (cc + k) % 32 == 0)
                    __builtin_prefetch(next + (cc + k) / 32 * sizeof(eng_q8_block), 0, 3);
                float32x4_t f[4];
                nldq8x16(bb->q + (cc + k) % 32, f);
                const float dd = h2f(bb->d);
                for (int v = 0; v < 4; v++)
                    vst1q_f32(d + k + 4 * v, vmulq_n_f32(f[v], dd));
            }
            for (; k < ncc; k++)
                d[k] = wval_dt(b, cc + k, dt);
        } else if (s >= 0) {
            const char *src = (const char *)w->down + (size_t)s * rb + (size_t)cc * dsize(f16);
            if (f16)
                for (; k + 4 <= ncc; k += 4)
                    vst1q_f32(d + k, nld4(src, k, true));
            else
                for (; k + 4 <= ncc; k += 4)
                    vst1q_f32(d + k, nld4(src, k, false));
            for (; k < ncc; k++)
                d[k] = wval(src, k, f16);
        }
        for (; k < ldp; k++)
            d[k] = 0.0f;
    }
}

static void n_ffn_down(const ffn_args *a, const float *A, long lda, float *y, long ldy, int nt,
                       long c0, long nc, float *scratch)
{
    FFN_DOWN_BODY(n_down_tiles)
}

/* One block of 4-bit codes against x~'s block: four int32 lanes summing
 * to sum_j q_j x_j (the offset 8 not yet taken off). Products of a code
 * (0..15) and an int8 are at most 1920 in size, so four of them summed in
 * an int16 lane cannot overflow. */
ALWAYS int32x4_t n_q4q8_lanes(const uint8_t *codes, const int8_t *xq)
{
    const uint8x16_t c = vld1q_u8(codes);
    /* low nibbles are elements 0-15, high ones 16-31 */
    const int8x16_t lo = vreinterpretq_s8_u8(vandq_u8(c, vdupq_n_u8(15)));
    const int8x16_t hi = vreinterpretq_s8_u8(vshrq_n_u8(c, 4));
    const int8x16_t x0 = vld1q_s8(xq), x1 = vld1q_s8(xq + 16);
    int16x8_t p = vmull_s8(vget_low_s8(lo), vget_low_s8(x0));
    p = vmlal_high_s8(p, lo, x0);
    p = vmlal_s8(p, vget_low_s8(hi), vget_low_s8(x1));
    p = vmlal_high_s8(p, hi, x1);
    return vpaddlq_s16(p);
}

/* One sketch row against x~, four blocks at a time: their integer sums
 * side by side, the offset off, scaled by four scales in one go. */
ALWAYS float n_q4q8_row(const uint8_t *w, const q8_row *x, long nb)
{
    const uint8_t *codes = w + 2 * nb;
    float32x4_t acc = vdupq_n_f32(0.0f);
    long i = 0;
    for (; i + 4 <= nb; i += 4) {
        int32x4_t s[4];
        for (int b = 0; b < 4; b++)
            s[b] = n_q4q8_lanes(codes + 16 * (i + b), x->q + 32 * (i + b));
        int32x4_t sum = vpaddq_s32(vpaddq_s32(s[0], s[1]), vpaddq_s32(s[2], s[3]));
        sum = vsubq_s32(sum, vshlq_n_s32(vld1q_s32(x->sum + i), 3));
        const float32x4_t d = vmulq_f32(
            vcvt_f32_f16(vreinterpret_f16_u8(vld1_u8(w + 2 * i))), vld1q_f32(x->d + i));
        acc = vfmaq_f32(acc, d, vcvtq_f32_s32(sum));
    }
    float r = vaddvq_f32(acc);
    for (; i < nb; i++) {
        uint16_t dh;
        memcpy(&dh, w + 2 * i, 2);
        const int32_t b = vaddvq_s32(n_q4q8_lanes(codes + 16 * i, x->q + 32 * i));
        r += h2f(dh) * x->d[i] * (float)(b - 8 * x->sum[i]);
    }
    return r;
}

static void n_dot2_q4q8(const uint8_t *w, const q8_row *x, long nb, float out[2])
{
    out[0] = n_q4q8_row(w, x, nb);
    out[1] = n_q4q8_row(w + nb * ENG_SKETCH_BLOCK_BYTES, x, nb);
}

/* Two K rows against nq queries (a constant at each call, as the AVX2
 * set's dot2xq_h): 2 nq chains of four lanes, each row converted once for
 * the group; out holds row 0's four sums, then row 1's (lanes past nq
 * repeat the last). */
ALWAYS void n_dot2xq_h(const float *const *qq, const uint16_t *k0, const uint16_t *k1, long n,
                       float out[8], const int nq)
{
    float32x4_t a[4], b[4];
    for (int g = 0; g < 4; g++)
        a[g] = b[g] = vdupq_n_f32(0.0f);
    long i = 0;
    for (; i + 4 <= n; i += 4) {
        const float32x4_t x = nld4(k0, i, true), y = nld4(k1, i, true);
        for (int g = 0; g < nq; g++) {
            const float32x4_t qv = vld1q_f32(qq[g] + i);
            a[g] = vfmaq_f32(a[g], x, qv);
            b[g] = vfmaq_f32(b[g], y, qv);
        }
    }
    for (int g = nq; g < 4; g++) {
        a[g] = a[nq - 1];
        b[g] = b[nq - 1];
    }
    vst1q_f32(out, nsum4x4(a[0], a[1], a[2], a[3]));
    vst1q_f32(out + 4, nsum4x4(b[0], b[1], b[2], b[3]));
    for (; i < n; i++) { /* head_dim not a multiple of 4 */
        const float x = h2f(k0[i]), y = h2f(k1[i]);
        for (int g = 0; g < 4; g++) {
            out[g] += x * qq[g][i];
            out[4 + g] += y * qq[g][i];
        }
    }
}

ALWAYS void n_scores_q(const float *const *qq, const uint16_t *k, const uint16_t *v,
                       size_t stride, int nb, int n_pf, long n, float scale, float (*s)[4],
                       float *bm, const int nq)
{
    float32x4_t mx = vdupq_n_f32(-INFINITY);
    for (int i = 0; i < nb; i += 2) {
        if (i < n_pf)
            att_prefetch(k, v, stride, i, n);
        if (i + 1 < n_pf)
            att_prefetch(k, v, stride, i + 1, n);
        const uint16_t *k0 = k + (size_t)i * stride;
        float r[8];
        n_dot2xq_h(qq, k0, i + 1 < nb ? k0 + stride : k0, n, r, nq); /* an odd row: itself */
        for (int j = 0; j < 2 && i + j < nb; j++) {
            const float32x4_t x = vmulq_n_f32(vld1q_f32(r + 4 * j), scale);
            vst1q_f32(&s[i + j][0], x);
            /* fmaxnm: a NaN score is passed over, as in the other sets */
            mx = vmaxnmq_f32(mx, x);
        }
    }
    vst1q_f32(bm, mx);
}

/* scores4_h two rows a call of n_dot2xq_h: one pairwise reduction per row
 * and no row waiting on the one before. */
static void n_scores4_h(const float *const *q, int G, const uint16_t *k, const uint16_t *v,
                        size_t stride, int nb, int n_pf, long n, float scale, float (*s)[4],
                        float *bm)
{
    const float *qq[4];
    for (int g = 0; g < 4; g++)
        qq[g] = q[g < G ? g : G - 1];
    BY_GROUP(G, n_scores_q, qq, k, v, stride, nb, n_pf, n, scale, s, bm);
}

/* A block of keys' probabilities times their V rows for nq heads (a
 * constant, as in n_dot2xq_h), eight columns at a time: 2 nq chains in
 * registers over the block's rows, o read and written once a block. */
ALWAYS void n_pv_q(float *const *o, const float *p, const uint16_t *v, size_t stride, int nb,
                   long n, const int nq)
{
    long c = 0;
    for (; c + 8 <= n; c += 8) {
        float32x4_t a[4], b[4];
        for (int g = 0; g < nq; g++) {
            a[g] = vld1q_f32(o[g] + c);
            b[g] = vld1q_f32(o[g] + c + 4);
        }
        for (int i = 0; i < nb; i++) {
            const float32x4_t vv = nld4(v + (size_t)i * stride, c, true);
            const float32x4_t vw = nld4(v + (size_t)i * stride, c + 4, true);
            for (int g = 0; g < nq; g++) {
                const float pg = p[4 * i + g];
                a[g] = vfmaq_n_f32(a[g], vv, pg);
                b[g] = vfmaq_n_f32(b[g], vw, pg);
            }
        }
        for (int g = 0; g < nq; g++) {
            vst1q_f32(o[g] + c, a[g]);
            vst1q_f32(o[g] + c + 4, b[g]);
        }
    }
    for (; c + 4 <= n; c += 4) {
        float32x4_t a[4];
        for (int g = 0; g < nq; g++)
            a[g] = vld1q_f32(o[g] + c);
        for (int i = 0; i < nb; i++) {
            const float32x4_t vv = nld4(v + (size_t)i * stride, c, true);
            for (int g = 0; g < nq; g++)
                a[g] = vfmaq_n_f32(a[g], vv, p[4 * i + g]);
        }
        for (int g = 0; g < nq; g++)
            vst1q_f32(o[g] + c, a[g]);
    }
    for (; c < n; c++)
        for (int i = 0; i < nb; i++) {
            const float vv = h2f(v[(size_t)i * stride + c]);
            for (int g = 0; g < nq; g++)
                o[g][c] += p[4 * i + g] * vv;
        }
}

static void n_pv4_h(float *const *o, int G, const float *p, const uint16_t *v, size_t stride,
                    int nb, long n)
{
    BY_GROUP(G, n_pv_q, o, p, v, stride, nb, n);
}

/* Eight codes of a Q8_0 block as two float vectors. */
ALWAYS void nld8_q8(const int8_t *q, float32x4_t *lo, float32x4_t *hi)
{
    const int16x8_t w = vmovl_s8(vld1_s8(q));
    *lo = vcvtq_f32_s32(vmovl_s16(vget_low_s16(w)));
    *hi = vcvtq_f32_s32(vmovl_s16(vget_high_s16(w)));
}

/* n_dot2xq_h over rows of nb Q8_0 blocks with the queries in 16 bits (one
 * scale a head), as the AVX2 set: a block's codes widen to 16 bits and
 * multiply-accumulate against them into 32 bits (vmlal), one convert and
 * FMA a block and head where a float kernel multiplies by d and does
 * eight FMAs. A lane's eight products can pass 2^24, where the convert
 * rounds (to 6e-8 of the sum). */
ALWAYS void n_dot2xq_q8i(const int16_t (*qi)[QI_MAX], const eng_q8_block *k0,
                         const eng_q8_block *k1, long nb, float out[8], const int nq)
{
    float32x4_t a[4], b[4];
    for (int g = 0; g < 4; g++)
        a[g] = b[g] = vdupq_n_f32(0.0f);
    for (long j = 0; j < nb; j++) {
        int16x8_t x[4], y[4];
        for (int c = 0; c < 4; c++) {
            x[c] = vmovl_s8(vld1_s8(k0[j].q + 8 * c));
            y[c] = vmovl_s8(vld1_s8(k1[j].q + 8 * c));
        }
        const float d0 = h2f(k0[j].d), d1 = h2f(k1[j].d);
        for (int g = 0; g < nq; g++) {
            int32x4_t sx = vdupq_n_s32(0), sy = vdupq_n_s32(0);
            for (int c = 0; c < 4; c++) {
                const int16x8_t qv = vld1q_s16(qi[g] + 32 * j + 8 * c);
                sx = vmlal_s16(sx, vget_low_s16(x[c]), vget_low_s16(qv));
                sx = vmlal_high_s16(sx, x[c], qv);
                sy = vmlal_s16(sy, vget_low_s16(y[c]), vget_low_s16(qv));
                sy = vmlal_high_s16(sy, y[c], qv);
            }
            a[g] = vfmaq_n_f32(a[g], vcvtq_f32_s32(sx), d0);
            b[g] = vfmaq_n_f32(b[g], vcvtq_f32_s32(sy), d1);
        }
    }
    for (int g = nq; g < 4; g++) {
        a[g] = a[nq - 1];
        b[g] = b[nq - 1];
    }
    vst1q_f32(out, nsum4x4(a[0], a[1], a[2], a[3]));
    vst1q_f32(out + 4, nsum4x4(b[0], b[1], b[2], b[3]));
}

ALWAYS void n_scores_q8i(const int16_t (*qi)[QI_MAX], const float *dq, const eng_q8_block *k,
                         const eng_q8_block *v, size_t stride, int nb, int n_pf, long n,
                         float scale, float (*s)[4], float *bm, const int nq)
{
    const float32x4_t sc = vmulq_n_f32(vld1q_f32(dq), scale);
    float32x4_t mx = vdupq_n_f32(-INFINITY);
    for (int i = 0; i < nb; i += 2) {
        if (i < n_pf)
            att_prefetch_q8(k, v, stride, i, n / 32);
        if (i + 1 < n_pf)
            att_prefetch_q8(k, v, stride, i + 1, n / 32);
        const eng_q8_block *k0 = k + (size_t)i * stride;
        float r[8];
        n_dot2xq_q8i(qi, k0, i + 1 < nb ? k0 + stride : k0, n / 32, r, nq);
        for (int j = 0; j < 2 && i + j < nb; j++) {
            const float32x4_t x = vmulq_f32(vld1q_f32(r + 4 * j), sc);
            vst1q_f32(&s[i + j][0], x);
            mx = vmaxnmq_f32(mx, x);
        }
    }
    vst1q_f32(bm, mx);
}

/* q in 16 bits: q = qi * dq, dq = max|q| / 32767 (0 for a zero row); n a
 * multiple of 8. */
static void n_q16_head(const float *q, long n, int16_t *qi, float *dq)
{
    float32x4_t mx = vdupq_n_f32(0.0f);
    for (long i = 0; i < n; i += 4)
        mx = vmaxq_f32(mx, vabsq_f32(vld1q_f32(q + i)));
    const float amax = vmaxvq_f32(mx);
    *dq = amax / 32767.0f;
    const float id = amax > 0.0f ? 32767.0f / amax : 0.0f;
    for (long i = 0; i < n; i += 8) {
        const int32x4_t lo = vcvtnq_s32_f32(vmulq_n_f32(vld1q_f32(q + i), id));
        const int32x4_t hi = vcvtnq_s32_f32(vmulq_n_f32(vld1q_f32(q + i + 4), id));
        vst1q_s16(qi + i, vcombine_s16(vqmovn_s32(lo), vqmovn_s32(hi)));
    }
}

static void n_scores4_q8(const float *const *q, int G, const eng_q8_block *k,
                         const eng_q8_block *v, size_t stride, int nb, int n_pf, long n,
                         float scale, float (*s)[4], float *bm)
{
    if (n > QI_MAX) { /* heads over 256 wide: none of the families we load */
        s_scores4_q8(q, G, k, v, stride, nb, n_pf, n, scale, s, bm);
        return;
    }
    int16_t qi[4][QI_MAX];
    float dq[4];
    q16_group(q, G, n, qi, dq, n_q16_head);
    BY_GROUP(G, n_scores_q8i, (const int16_t (*)[QI_MAX])qi, dq, k, v, stride, nb, n_pf, n,
             scale, s, bm);
}

/* n_pv_q over rows of Q8_0 blocks: the weights times each row's d once a
 * block (pd), then eight columns at a time. */
ALWAYS void n_pv_q8(float *const *o, const float *p, const eng_q8_block *v, size_t stride,
                    int nb, long n, const int nq)
{
    float pd[ATT_BLOCK][4];
    for (long c = 0; c < n; c += 8) {
        const long jb = c / 32, off = c % 32;
        if (off == 0)
            for (int i = 0; i < nb; i++)
                vst1q_f32(pd[i], vmulq_n_f32(vld1q_f32(p + 4 * i),
                                             h2f(v[(size_t)i * stride + jb].d)));
        float32x4_t a[4], b[4];
        for (int g = 0; g < nq; g++) {
            a[g] = vld1q_f32(o[g] + c);
            b[g] = vld1q_f32(o[g] + c + 4);
        }
        for (int i = 0; i < nb; i++) {
            float32x4_t vv, vw;
            nld8_q8(v[(size_t)i * stride + jb].q + off, &vv, &vw);
            for (int g = 0; g < nq; g++) {
                a[g] = vfmaq_n_f32(a[g], vv, pd[i][g]);
                b[g] = vfmaq_n_f32(b[g], vw, pd[i][g]);
            }
        }
        for (int g = 0; g < nq; g++) {
            vst1q_f32(o[g] + c, a[g]);
            vst1q_f32(o[g] + c + 4, b[g]);
        }
    }
}

static void n_pv4_q8(float *const *o, int G, const float *p, const eng_q8_block *v,
                     size_t stride, int nb, long n)
{
    BY_GROUP(G, n_pv_q8, o, p, v, stride, nb, n);
}

/* e^x on four lanes, as exp256: 2^n built in the exponent bits, 0 below
 * -87, NaN kept. */
ALWAYS float32x4_t nexp4(float32x4_t x)
{
    const uint32x4_t keep = vmvnq_u32(vcltq_f32(x, vdupq_n_f32(-87.0f)));
    x = vminq_f32(vdupq_n_f32(88.0f), vmaxq_f32(vdupq_n_f32(-87.0f), x));
    const float32x4_t n = vrndnq_f32(vmulq_n_f32(x, 1.44269504f));
    float32x4_t r = vfmsq_n_f32(x, n, 0.693359375f);
    r = vfmsq_n_f32(r, n, -2.12194440e-4f);
    float32x4_t p = vdupq_n_f32(1.0f / 720);
    p = vfmaq_f32(vdupq_n_f32(1.0f / 120), p, r);
    p = vfmaq_f32(vdupq_n_f32(1.0f / 24), p, r);
    p = vfmaq_f32(vdupq_n_f32(1.0f / 6), p, r);
    p = vfmaq_f32(vdupq_n_f32(0.5f), p, r);
    p = vfmaq_f32(vdupq_n_f32(1.0f), p, r);
    p = vfmaq_f32(vdupq_n_f32(1.0f), p, r);
    const int32x4_t e = vshlq_n_s32(vaddq_s32(vcvtq_s32_f32(n), vdupq_n_s32(127)), 23);
    const float32x4_t y = vmulq_f32(p, vreinterpretq_f32_s32(e));
    return vreinterpretq_f32_u32(vandq_u32(vreinterpretq_u32_f32(y), keep));
}

/* One key of up to four heads a register, as v_exp4. */
static void n_exp4(float (*s)[4], int nb, const float *m, int G, float *l)
{
    float mm[4], gm[4];
    for (int g = 0; g < 4; g++) {
        mm[g] = g < G ? m[g] : 0.0f;
        gm[g] = g < G ? 1.0f : 0.0f;
    }
    const float32x4_t mv = vld1q_f32(mm);
    const uint32x4_t live = vmvnq_u32(vceqzq_f32(vld1q_f32(gm)));
    float32x4_t acc = vdupq_n_f32(0.0f);
    for (int i = 0; i < nb; i++) {
        const float32x4_t e = vreinterpretq_f32_u32(
            vandq_u32(vreinterpretq_u32_f32(nexp4(vsubq_f32(vld1q_f32(&s[i][0]), mv))), live));
        vst1q_f32(&s[i][0], e);
        acc = vaddq_f32(acc, e);
    }
    float a[4];
    vst1q_f32(a, acc);
    for (int g = 0; g < 4; g++)
        l[g] += a[g];
}

static void n_scale(float *o, float s, long n)
{
    long i = 0;
    for (; i + 4 <= n; i += 4)
        vst1q_f32(o + i, vmulq_n_f32(vld1q_f32(o + i), s));
    for (; i < n; i++)
        o[i] *= s;
}

static void n_add(float *y, const float *x, long n)
{
    long i = 0;
    for (; i + 4 <= n; i += 4)
        vst1q_f32(y + i, vaddq_f32(vld1q_f32(y + i), vld1q_f32(x + i)));
    for (; i < n; i++)
        y[i] += x[i];
}

static void n_to_f16(const float *src, uint16_t *dst, long n)
{
    long i = 0;
    for (; i + 4 <= n; i += 4)
        vst1_u16(dst + i, vreinterpret_u16_f16(vcvt_f16_f32(vld1q_f32(src + i))));
    for (; i < n; i++)
        dst[i] = f2h(src[i]);
}

static void n_to_f32(const uint16_t *src, float *dst, long n)
{
    long i = 0;
    for (; i + 4 <= n; i += 4)
        vst1q_f32(dst + i, nld4(src, i, true));
    for (; i < n; i++)
        dst[i] = h2f(src[i]);
}

static const kernels kern_neon = {
    .name = "neon",
    .gemv_mxfp4 = n_gemv_mxfp4,
    .gemv = n_gemv,
    .gemv_q8 = n_gemv_q8,
    .gemv_q4k = n_gemv_q4k,
    .gemv_q6k = n_gemv_q6k,
    .gemv_q5k = n_gemv_q5k,
    .gemv_q41 = n_gemv_q41,
    .gemv_q40 = n_gemv_q40,
    .cvt_rows = n_cvt_rows,
    .dot4x3 = n_dot4x3,
    .dot4x3_h = n_dot4x3_h,
    .ffn_fused = n_ffn_fused,
    .ffn_axpy = n_ffn_axpy,
    .ffn_down = n_ffn_down,
    .dot2_q4q8 = n_dot2_q4q8,
    .scores4_h = n_scores4_h,
    .pv4_h = n_pv4_h,
    .scores4_q8 = n_scores4_q8,
    .pv4_q8 = n_pv4_q8,
    .exp4 = n_exp4,
    .scale = n_scale,
    .add = n_add,
    .to_f16 = n_to_f16,
    .to_f32 = n_to_f32,
};
#endif /* HAVE_NEON */

/* ---- backend state ----------------------------------------------------- */

typedef struct cpu_ctx {
    eng_backend be;
    eng_threadpool *pool;
    int n_threads;
    const kernels *k;
    float *scratch; /* [n_threads][SCRATCH_FLOATS] */
    float *abuf;    /* [ABUF_FLOATS] */
    bool prefill_q8; /* the 8-bit prefill asked for (eng_backend_cpu_set_prefill_q8) */
    int8_t *xq;     /* [XQ_BYTES], with kernels.mm6x32_u8 */
    float *xds;     /* [XQ_BYTES / 16] pairs */
    /* rope's cos and sin for the last positions rotated (tab: per token
     * its n_rot / 2 cosines, then as many sines): an eval rotates q and k
     * of every layer at the same positions, and the angles in double (pow,
     * cos, sin for each pair) took about 5 us a layer, serial, for one
     * SmolLM2 token (n_rot 64), and 3 % of a 512-token prefill */
    struct {
        bool valid, has_factors;
        int pos, n, n_rot;
        float base;
        float factors[ROPE_CHUNK];
        float *tab;
        size_t cap; /* floats */
    } rope;
    /* ffn_biased's copy of a selection's gate and up rows (one matmul
     * over them, not one a slot), grown as needed */
    uint8_t *gather;
    size_t gather_cap;
    /* ffn_pick's and ffn_top's bound for each layer (pick_hint_of): the
     * last token's k-th best score, scaled down (pick_run) */
    struct {
        const void *key;
        float bound;
    } pick_hint[PICK_HINTS];
} cpu_ctx;

static inline cpu_ctx *ctx_of(eng_backend *be)
{
    return be->ctx;
}

static inline float *thread_scratch(cpu_ctx *c, int ith)
{
    return c->scratch + (size_t)ith * SCRATCH_FLOATS;
}

/* Runs fn on the pool, or inline on the caller when the work is too small
 * to pay for waking the workers. */
static void run(cpu_ctx *c, eng_task_fn fn, void *arg, bool parallel)
{
    if (parallel && c->n_threads > 1)
        eng_threadpool_run(c->pool, fn, arg);
    else
        fn(arg, 0, 1);
}

/* ---- get_rows ---------------------------------------------------------- */

static void op_get_rows(eng_backend *be, const eng_weight *w, const int32_t *ids, int n,
                        float *out)
{
    cpu_ctx *c = ctx_of(be);
    if (!w || !ids || !out || n <= 0 || w->cols <= 0 || w->cols % eng_dtype_block(w->dtype))
        return;
    long cols = w->cols;
    for (int t = 0; t < n; t++) {
        float *o = out + (size_t)t * cols;
        if (ids[t] < 0 || ids[t] >= w->rows) {
            memset(o, 0, (size_t)cols * sizeof(float));
            continue;
        }
        row_to_f32(c->k, w->dtype,
                   (const char *)w->data + eng_dtype_bytes(w->dtype, (size_t)ids[t] * cols), cols,
                   o);
    }
}

/* ---- matmul ------------------------------------------------------------ */

typedef struct mm_args {
    cpu_ctx *c;
    const eng_weight *w;
    const float *bias;
    const float *x;
    float *y;
    int n_tokens;
    const x16_row *x16; /* decode, Q8_0, Q4_1, Q4_0: x in 16 bits (x16_ready), or NULL */
    const float *xs;    /* decode, Q4_K, Q5_K, Q4_1, Q4_0: x_sums32(x) */
    const x16_row *x4;  /* decode, Q4_K, Q5_K, Q6_K: x in 16 bits (x16_prep_q4k), or NULL */
    const int8_t *xq;   /* prefill in 8 bits (mm_u8): x's codes, K a token */
    const float *xds;   /* and its blocks' d and s, K / 16 a token */
} mm_args;

static void mm_decode_task(void *p, int ith, int nth)
{
    mm_args *a = p;
    long rows = a->w->rows, b, e;
    eng_split((rows + 3) / 4, ith, nth, &b, &e);
    b *= 4;
    e = e * 4 < rows ? e * 4 : rows;
    if (b < e && a->w->dtype == ENG_DTYPE_Q4_K && a->x4)
        a->c->k->gemv_q4k_x16(a->w->data, a->w->cols, a->x4, a->xs, a->bias, a->y, b, e);
    else if (b < e && a->w->dtype == ENG_DTYPE_Q4_K)
        a->c->k->gemv_q4k(a->w->data, a->w->cols, a->x, a->xs, a->bias, a->y, b, e);
    else if (b < e && a->w->dtype == ENG_DTYPE_Q5_K && a->x4)
        a->c->k->gemv_q5k_x16(a->w->data, a->w->cols, a->x4, a->xs, a->bias, a->y, b, e);
    else if (b < e && a->w->dtype == ENG_DTYPE_Q5_K)
        a->c->k->gemv_q5k(a->w->data, a->w->cols, a->x, a->xs, a->bias, a->y, b, e);
    else if (b < e && a->w->dtype == ENG_DTYPE_Q6_K && a->x4 && a->c->k->gemv_q6k_x16)
        a->c->k->gemv_q6k_x16(a->w->data, a->w->cols, a->x4, a->bias, a->y, b, e);
    else if (b < e && a->w->dtype == ENG_DTYPE_Q6_K)
        a->c->k->gemv_q6k(a->w->data, a->w->cols, a->x, a->bias, a->y, b, e);
    else if (b < e && a->w->dtype == ENG_DTYPE_Q4_1 && a->x16)
        a->c->k->gemv_q41_x16(a->w->data, a->w->cols, a->x16, a->xs, a->bias, a->y, b, e);
    else if (b < e && a->w->dtype == ENG_DTYPE_Q4_1)
        a->c->k->gemv_q41(a->w->data, a->w->cols, a->x, a->xs, a->bias, a->y, b, e);
    else if (b < e && a->w->dtype == ENG_DTYPE_Q4_0 && a->x16)
        a->c->k->gemv_q40_x16(a->w->data, a->w->cols, a->x16, a->xs, a->bias, a->y, b, e);
    else if (b < e && a->w->dtype == ENG_DTYPE_Q4_0)
        a->c->k->gemv_q40(a->w->data, a->w->cols, a->x, a->xs, a->bias, a->y, b, e);
    else if (b < e && a->w->dtype == ENG_DTYPE_Q8_0 && a->x16)
        a->c->k->gemv_q8_x16(a->w->data, a->w->cols, a->x16, a->bias, a->y, b, e);
    else if (b < e && a->w->dtype == ENG_DTYPE_MXFP4 && a->x16)
        a->c->k->gemv_mxfp4_x16(a->w->data, a->w->cols, a->x16, a->bias, a->y, b, e);
    else if (b < e && a->w->dtype == ENG_DTYPE_MXFP4)
        a->c->k->gemv_mxfp4(a->w->data, a->w->cols, a->x, a->bias, a->y, b, e);
    else if (b < e && a->w->dtype == ENG_DTYPE_Q8_0)
        a->c->k->gemv_q8(a->w->data, a->w->cols, a->x, a->bias, a->y, b, e);
    else if (b < e)
        a->c->k->gemv(a->w->data, a->w->dtype == ENG_DTYPE_F16, a->w->cols, a->x, a->bias,
                      a->y, b, e);
}

/* The packed prefill's block: 32 rows (pack32's) by a K chunk that fills
 * a thread's scratch as f32 */
enum { PACK_ROWS = 32, PACK_K = SCRATCH_FLOATS / PACK_ROWS };
_Static_assert(PACK_K % 256 == 0, "a K chunk is whole Q4_K, Q5_K and Q6_K blocks");

/* A packed prefill's tile into y: tokens t.. (ntt of them, y's rows of
 * `rows`) by rows r0.. (nr), the first K chunk's sums with the bias, the
 * later ones added to what is there. */
static void mm_tile_store(const mm_args *a, float out[6][32], long t, int ntt, long r0, int nr,
                          bool first)
{
    for (int j = 0; j < ntt; j++) {
        float *yo = a->y + (size_t)(t + j) * a->w->rows + r0;
        for (int q = 0; q < nr; q++)
            yo[q] = first ? out[j][q] + (a->bias ? a->bias[r0 + q] : 0.0f) : yo[q] + out[j][q];
    }
}

/* Prefill by outer products (kernels pack32, mm6x32): blocks of 32 rows
 * and a K chunk packed k-major once, then 6 tokens at a time. Used for
 * every prefill chunk, however few its tokens: a token's result must not
 * depend on how many others share its chunk (eng_session_reset_prefix
 * promises a fresh prefill's logits). */
static void mm_packed_task(void *p, int ith, int nth)
{
    mm_args *a = p;
    const kernels *k = a->c->k;
    const eng_weight *w = a->w;
    const bool f16 = w->dtype == ENG_DTYPE_F16;
    const size_t es = f16 ? 2 : 4;
    const long rows = w->rows, K = w->cols, nt = a->n_tokens;
    long b, e;
    eng_split((rows + PACK_ROWS - 1) / PACK_ROWS, ith, nth, &b, &e);
    b *= PACK_ROWS;
    e = e * PACK_ROWS < rows ? e * PACK_ROWS : rows;
    float *P = thread_scratch(a->c, ith);
    for (long r0 = b; r0 < e; r0 += PACK_ROWS) {
        const int nr = (int)(e - r0 < PACK_ROWS ? e - r0 : PACK_ROWS);
        for (long k0 = 0; k0 < K; k0 += PACK_K) {
            const long kc = K - k0 < PACK_K ? K - k0 : PACK_K;
            if (w->dtype == ENG_DTYPE_Q8_0) {
                const eng_q8_block *src[PACK_ROWS];
                for (int i = 0; i < nr; i++)
                    src[i] = (const eng_q8_block *)w->data + (size_t)(r0 + i) * (K / 32) + k0 / 32;
                k->pack32_q8(src, nr, kc, P);
            } else if (w->dtype == ENG_DTYPE_MXFP4) {
                const eng_mxfp4_block *src[PACK_ROWS];
                for (int i = 0; i < nr; i++)
                    src[i] = (const eng_mxfp4_block *)w->data + (size_t)(r0 + i) * (K / 32) +
                             k0 / 32;
                k->pack32_mxfp4(src, nr, kc, P);
            } else if (w->dtype == ENG_DTYPE_Q4_1) {
                const eng_q41_block *src[PACK_ROWS];
                for (int i = 0; i < nr; i++)
                    src[i] = (const eng_q41_block *)w->data + (size_t)(r0 + i) * (K / 32) + k0 / 32;
                k->pack32_q41(src, nr, kc, P);
            } else if (w->dtype == ENG_DTYPE_Q4_0) {
                const eng_q40_block *src[PACK_ROWS];
                for (int i = 0; i < nr; i++)
                    src[i] = (const eng_q40_block *)w->data + (size_t)(r0 + i) * (K / 32) + k0 / 32;
                k->pack32_q40(src, nr, kc, P);
            } else if (w->dtype == ENG_DTYPE_Q4_K) { /* k0, kc: multiples of 256 */
                const eng_q4k_block *src[PACK_ROWS];
                for (int i = 0; i < nr; i++)
                    src[i] = (const eng_q4k_block *)w->data + ((size_t)(r0 + i) * K + k0) / 256;
                k->pack32_q4k(src, nr, kc, P);
            } else if (w->dtype == ENG_DTYPE_Q5_K) {
                const eng_q5k_block *src[PACK_ROWS];
                for (int i = 0; i < nr; i++)
                    src[i] = (const eng_q5k_block *)w->data + ((size_t)(r0 + i) * K + k0) / 256;
                k->pack32_q5k(src, nr, kc, P);
            } else if (w->dtype == ENG_DTYPE_Q6_K) {
                const eng_q6k_block *src[PACK_ROWS];
                for (int i = 0; i < nr; i++)
                    src[i] = (const eng_q6k_block *)w->data + ((size_t)(r0 + i) * K + k0) / 256;
                k->pack32_q6k(src, nr, kc, P);
            } else {
                const void *src[PACK_ROWS];
                for (int i = 0; i < nr; i++)
                    src[i] = (const char *)w->data + ((size_t)(r0 + i) * K + k0) * es;
                k->pack32(src, f16, nr, kc, P);
            }
            for (long t = 0; t < nt; t += 6) {
                const int ntt = (int)(nt - t < 6 ? nt - t : 6);
                const float *xp[6];
                for (int j = 0; j < 6; j++)
                    xp[j] = a->x + (size_t)(t + (j < ntt ? j : ntt - 1)) * K + k0;
                float out[6][32];
                k->mm6x32(P, kc, xp, out);
                mm_tile_store(a, out, t, ntt, r0, nr, k0 == 0);
            }
        }
    }
}

/* The 8-bit prefill (kernels q8x_row, pack32_u8, mm6x32_u8): x rounded
 * into the context's xq by xq_task first, then mm_packed_task's walk:
 * blocks of 32 rows and U8_KB blocks of K packed once, 6 tokens at a
 * time. A token's result depends on its own x only, whatever shares its
 * chunk. */
enum { U8_KB = 128, U8_P = U8_KB * 32 * 32 }; /* P's bytes; D after them */
_Static_assert(U8_P + U8_KB * 64 * sizeof(float) <= SCRATCH_FLOATS * sizeof(float),
               "a 32-row block of U8_KB blocks, codes and scales, fits the scratch");

_Static_assert(U8_KB % 8 == 0, "a K chunk is whole Q4_K and Q5_K blocks");

/* Q8_0, Q4_1, Q4_0, Q4_K and Q5_K rows: each block of 32 is d u + m. Not
 * Q6_K: its sub-blocks are 16 wide, two scales a block of 32, which D's
 * one d a block cannot hold (nor MXFP4's e2m1 levels, not a d u + m). */
static bool u8_rows(const cpu_ctx *c, eng_dtype dt)
{
    return c->k->mm6x32_u8 && c->prefill_q8 &&
           (dt == ENG_DTYPE_Q8_0 || dt == ENG_DTYPE_Q4_1 || dt == ENG_DTYPE_Q4_0 ||
            dt == ENG_DTYPE_Q4_K || dt == ENG_DTYPE_Q5_K);
}

/* A matrix mm_u8 takes: u8_rows, whole blocks, and at least 6 tokens'
 * x in xq. */
static bool u8_matrix(const cpu_ctx *c, const eng_weight *w)
{
    return u8_rows(c, w->dtype) && w->rows > 0 && w->cols > 0 &&
           w->cols % eng_dtype_block(w->dtype) == 0 && w->cols <= XQ_BYTES / 6;
}

typedef struct xq_args {
    const kernels *k;
    const float *x;
    long K;
    int n_tokens;
    int8_t *q;
    float *ds;
} xq_args;

static void xq_task(void *p, int ith, int nth)
{
    xq_args *a = p;
    long b, e;
    eng_split(a->n_tokens, ith, nth, &b, &e);
    for (long t = b; t < e; t++)
        a->k->q8x_row(a->x + (size_t)t * a->K, a->K, a->q + (size_t)t * a->K,
                      a->ds + (size_t)t * (a->K / 16));
}

/* Rounds n_tokens rows of x (K wide) into c's xq and xds. */
static void xq_fill(cpu_ctx *c, const float *x, long K, int n_tokens)
{
    xq_args q = { c->k, x, K, n_tokens, c->xq, c->xds };
    run(c, xq_task, &q, (long)n_tokens * K >= 16384);
}

static void mm_u8_task(void *p, int ith, int nth)
{
    mm_args *a = p;
    const kernels *k = a->c->k;
    const eng_weight *w = a->w;
    const long rows = w->rows, K = w->cols, NB = K / 32, nt = a->n_tokens;
    long b, e;
    eng_split((rows + PACK_ROWS - 1) / PACK_ROWS, ith, nth, &b, &e);
    b *= PACK_ROWS;
    e = e * PACK_ROWS < rows ? e * PACK_ROWS : rows;
    uint8_t *P = (uint8_t *)thread_scratch(a->c, ith);
    float *D = (float *)(P + U8_P);
    for (long r0 = b; r0 < e; r0 += PACK_ROWS) {
        const int nr = (int)(e - r0 < PACK_ROWS ? e - r0 : PACK_ROWS);
        for (long b0 = 0; b0 < NB; b0 += U8_KB) {
            const long nb = NB - b0 < U8_KB ? NB - b0 : U8_KB;
            const void *src[PACK_ROWS];
            for (int i = 0; i < nr; i++) /* (Q4_K, Q5_K: at a block of 256, U8_KB's) */
                src[i] = (const char *)w->data +
                         eng_dtype_bytes(w->dtype, (size_t)(r0 + i) * K + (size_t)b0 * 32);
            k->pack32_u8(src, w->dtype, nr, nb, P, D);
            for (long t = 0; t < nt; t += 6) {
                const int ntt = (int)(nt - t < 6 ? nt - t : 6);
                const int8_t *xq[6];
                const float *xd[6];
                for (int j = 0; j < 6; j++) {
                    const size_t tj = (size_t)(t + (j < ntt ? j : ntt - 1));
                    xq[j] = a->xq + tj * K + b0 * 32;
                    xd[j] = a->xds + tj * (K / 16) + 2 * b0;
                }
                float out[6][32];
                k->mm6x32_u8(P, D, nb, xq, xd, out);
                mm_tile_store(a, out, t, ntt, r0, nr, b0 == 0);
            }
        }
    }
}

/* n matmuls of one x (of one width, u8_rows) in 8 bits: x rounded once per
 * chunk of tokens that fits xq, then each matrix. */
static void mm_u8(cpu_ctx *c, const mm_args *a, int n)
{
    const long K = a[0].w->cols, chunk = XQ_BYTES / K;
    for (long t0 = 0; t0 < a[0].n_tokens; t0 += chunk) {
        const int nt = (int)(a[0].n_tokens - t0 < chunk ? a[0].n_tokens - t0 : chunk);
        xq_fill(c, a[0].x + (size_t)t0 * K, K, nt);
        for (int i = 0; i < n; i++) {
            mm_args s = a[i];
            s.x = a[i].x + (size_t)t0 * K;
            s.y = a[i].y + (size_t)t0 * a[i].w->rows;
            s.n_tokens = nt;
            s.xq = c->xq;
            s.xds = c->xds;
            run(c, mm_u8_task, &s, (long)a[i].w->rows * K * nt >= 16384);
        }
    }
}

/* Prefill without mm6x32: row blocks of BLOCK_ROWS (converted to f32
 * scratch once per block and K chunk), then 4 rows x 3 tokens register
 * blocks. Rows and tokens beyond the edge point at the last valid one and
 * are discarded. */
static void mm_prefill_task(void *p, int ith, int nth)
{
    mm_args *a = p;
    const kernels *k = a->c->k;
    const eng_weight *w = a->w;
    bool f16 = w->dtype == ENG_DTYPE_F16;
    long rows = w->rows, K = w->cols, nt = a->n_tokens;
    long b, e;
    eng_split((rows + BLOCK_ROWS - 1) / BLOCK_ROWS, ith, nth, &b, &e);
    b *= BLOCK_ROWS;
    e = e * BLOCK_ROWS < rows ? e * BLOCK_ROWS : rows;
    float *scr = thread_scratch(a->c, ith);

    for (long r0 = b; r0 < e; r0 += BLOCK_ROWS) {
        int nr = (int)(e - r0 < BLOCK_ROWS ? e - r0 : BLOCK_ROWS);
        for (long k0 = 0; k0 < K; k0 += BLOCK_K) {
            long kc = K - k0 < BLOCK_K ? K - k0 : BLOCK_K;
            const float *wr[BLOCK_ROWS];
            if (eng_dtype_block(w->dtype) > 1) { /* block types, by row_to_f32 */
                for (int i = 0; i < nr; i++) {
                    row_to_f32(k, w->dtype,
                               (const char *)w->data +
                                   eng_dtype_bytes(w->dtype, (size_t)(r0 + i) * K + k0),
                               kc, scr + (size_t)i * kc);
                    wr[i] = scr + (size_t)i * kc;
                }
            } else if (f16) {
                const uint16_t *src[BLOCK_ROWS];
                for (int i = 0; i < nr; i++)
                    src[i] = (const uint16_t *)w->data + (size_t)(r0 + i) * K + k0;
                k->cvt_rows(src, nr, kc, scr, kc);
                for (int i = 0; i < nr; i++)
                    wr[i] = scr + (size_t)i * kc;
            } else {
                for (int i = 0; i < nr; i++)
                    wr[i] = (const float *)w->data + (size_t)(r0 + i) * K + k0;
            }
            for (long t = 0; t < nt; t += 3) {
                const float *xp[3];
                int ntt = (int)(nt - t < 3 ? nt - t : 3);
                for (int j = 0; j < 3; j++)
                    xp[j] = a->x + (size_t)(t + (j < ntt ? j : ntt - 1)) * K + k0;
                for (int i = 0; i < nr; i += 4) {
                    int nri = nr - i < 4 ? nr - i : 4;
                    const float *wp[4];
                    for (int q = 0; q < 4; q++)
                        wp[q] = wr[i + (q < nri ? q : nri - 1)];
                    float out[4][3];
                    k->dot4x3(wp, xp, kc, out);
                    for (int q = 0; q < nri; q++)
                        for (int j = 0; j < ntt; j++) {
                            float *yo = a->y + (size_t)(t + j) * rows + r0 + i + q;
                            if (k0 == 0)
                                *yo = out[q][j] + (a->bias ? a->bias[r0 + i + q] : 0.0f);
                            else
                                *yo += out[q][j];
                        }
                }
            }
        }
    }
}

/* abuf between ops holds nothing; within a decode step's op, its lower
 * half is ffn_pick's (scores, the pick), its third quarter q4k_prep's and
 * its last x16_ready's, so that a pick's FFN and q, k, v of two types at
 * once each keep their own. */
enum { ABUF_Q4K = ABUF_FLOATS / 2, ABUF_X16 = ABUF_FLOATS / 4 * 3 };

typedef void x16_prep_fn(const float *x, long n, int16_t *q, float *d);

/* Rows of 4-bit blocks of 32 whose decode takes x's block sums for m:
 * Q4_1, and Q4_0 (m = -8 d) */
static bool q4x_rows(eng_dtype dt)
{
    return dt == ENG_DTYPE_Q4_1 || dt == ENG_DTYPE_Q4_0;
}

/* The set's prep of x in 16 bits a block of 32 (x16_prep's form) for
 * rows of type dt in a decode step: Q8_0's (x16_prep), Q4_1's and Q4_0's
 * (x16_prep_q4) where the set has them; NULL: the f32 path. */
static x16_prep_fn *x16_prep_for(const kernels *k, eng_dtype dt)
{
    if (dt == ENG_DTYPE_MXFP4) /* (x16_prep's rounding, under either name) */
        return !k->gemv_mxfp4_x16 ? NULL : k->x16_prep ? k->x16_prep : k->x16_prep_q4;
    return dt == ENG_DTYPE_Q8_0 ? k->x16_prep : q4x_rows(dt) ? k->x16_prep_q4 : NULL;
}

/* x in 16 bits for a decode step's Q8_0, Q4_1 or Q4_0 rows of width cols by
 * prep (x16_prep_for), into abuf's last quarter; q4 (Q4_1 or Q4_0 rows
 * read it): regrouped too where the set has x16_group_q4 and room is left.
 * Returns false to keep the f32 path. */
static bool x16_ready(cpu_ctx *c, x16_prep_fn *prep, bool q4, const float *x, long cols,
                      x16_row *ret)
{
    if (!prep || cols % 32 || cols / 2 + cols / 32 > ABUF_FLOATS - ABUF_X16)
        return false;
    int16_t *q = (int16_t *)(c->abuf + ABUF_X16);
    float *d = c->abuf + ABUF_X16 + cols / 2; /* past cols int16 */
    prep(x, cols, q, d);
    *ret = (x16_row){ q, d, NULL, NULL };
    /* g past d, 64-byte aligned as abuf is (its loads are whole lines) */
    const long g0 = (cols / 2 + cols / 32 + 15) / 16 * 16;
    if (q4 && c->k->x16_group_q4 && cols >= 128 && g0 + cols / 2 <= ABUF_FLOATS - ABUF_X16) {
        int16_t *g = (int16_t *)(c->abuf + ABUF_X16 + g0);
        c->k->x16_group_q4(q, cols, g);
        ret->g = g;
    }
    return true;
}

/* x's block sums x_sums32(x) for a decode step's Q4_K, Q5_K, Q4_1, Q4_0 rows
 * (their mins, m), in abuf's third quarter; NULL where cols is too wide. */
static float *xs_prep(cpu_ctx *c, const float *x, long cols)
{
    if (cols / 32 + 16 > ABUF_X16 - ABUF_Q4K)
        return NULL;
    float *xs = c->abuf + ABUF_Q4K;
    x_sums32(x, cols, xs);
    return xs;
}

/* A decode step's x for Q4_K, Q5_K and Q6_K rows (GEMVs and the FFN's
 * gate and up), in abuf's third quarter: its sums x_sums32(x), returned
 * (NULL where cols is too wide), and where the kernels have gemv_q4k_x16 x
 * in 16 bits as x16_prep_q4k holds it (*x4, and *has_x4 true). */
static const float *q4k_prep(cpu_ctx *c, const float *x, long cols, x16_row *x4, bool *has_x4)
{
    float *xs = xs_prep(c, x, cols);
    *has_x4 = false;
    if (!xs)
        return NULL;
    if (c->k->gemv_q4k_x16 && cols % 256 == 0 &&
        cols / 32 * 2 + cols / 2 + cols / 16 + 16 <= ABUF_X16 - ABUF_Q4K) {
        int16_t *q = (int16_t *)(xs + (cols / 32 + 15) / 16 * 16);
        float *d = (float *)(q + cols);
        int16_t *ns = (int16_t *)(d + cols / 256);
        c->k->x16_prep_q4k(x, cols, q, d, ns);
        *x4 = (x16_row){ q, d, ns, NULL };
        *has_x4 = true;
    }
    return xs;
}

/* Rows whose decode takes q4k_prep's x (x16_prep_q4k's form) */
static bool x4_rows(eng_dtype dt)
{
    return dt == ENG_DTYPE_Q4_K || dt == ENG_DTYPE_Q5_K || dt == ENG_DTYPE_Q6_K;
}

/* x's forms for decode GEMVs of rows of type dt and width cols into a
 * (xr and x4 hold them); false where the rows need x's block sums and
 * cols is too wide for them (the prefill kernels then). */
static bool gemv_prep(cpu_ctx *c, eng_dtype dt, long cols, const float *x, mm_args *a,
                      x16_row *xr, x16_row *x4)
{
    bool has_x4;
    if (x4_rows(dt)) {
        a->xs = q4k_prep(c, x, cols, x4, &has_x4);
        a->x4 = has_x4 ? x4 : NULL;
    }
    if (q4x_rows(dt))
        a->xs = xs_prep(c, x, cols);
    if (x16_ready(c, x16_prep_for(c->k, dt), q4x_rows(dt), x, cols, xr))
        a->x16 = xr;
    /* (a Q6_K row too wide for q4k_prep takes gemv_q6k) */
    const bool need_xs = dt == ENG_DTYPE_Q4_K || dt == ENG_DTYPE_Q5_K || q4x_rows(dt);
    return !(need_xs && !a->xs);
}

static void op_matmul(eng_backend *be, const eng_weight *w, const float *bias, const float *x,
                      float *y, int n_tokens)
{
    cpu_ctx *c = ctx_of(be);
    if (!w || !x || !y || n_tokens <= 0 || w->rows <= 0 || w->cols <= 0 ||
        w->cols % eng_dtype_block(w->dtype))
        return;
    mm_args a = { .c = c, .w = w, .bias = bias, .x = x, .y = y, .n_tokens = n_tokens };
    x16_row xr, x4;
    long work = (long)w->rows * w->cols * n_tokens;
    if (n_tokens == 1 && gemv_prep(c, w->dtype, w->cols, x, &a, &xr, &x4))
        run(c, mm_decode_task, &a, work >= 16384);
    else if (u8_matrix(c, w))
        mm_u8(c, &a, 1);
    else if (c->k->mm6x32 && (w->dtype != ENG_DTYPE_MXFP4 || c->k->pack32_mxfp4))
        run(c, mm_packed_task, &a, work >= 16384); /* (and a row too wide for its sums) */
    else
        run(c, mm_prefill_task, &a, work >= 16384);
}

/* Decode's GEMVs of one x by up to 3 matrices in one dispatch (q, k and
 * v; ffn_top's two runs of gate and up rows): each thread takes the rows
 * of each matrix that op_matmul would give it (so the results are the
 * same bit for bit), and the pool wakes and waits once instead of three
 * times. k and v are small (SmolLM2: 192 rows, tens of microseconds), so
 * the dispatches were a visible part of them. */
typedef struct mm_n_args {
    mm_args a[3];
    int n;
} mm_n_args;

static void mm_n_decode_task(void *p, int ith, int nth)
{
    mm_n_args *m = p;
    for (int i = 0; i < m->n; i++)
        mm_decode_task(&m->a[i], ith, nth);
}

static void matmul_n(eng_backend *be, const eng_weight *const *w, const float *const *bias,
                     const float *x, float *const *y, int n_tokens, int nw)
{
    cpu_ctx *c = ctx_of(be);
    if (!w || !y || !x)
        return;
    /* each as op_matmul would run it in parallel (the same threshold) */
    bool ok = n_tokens == 1 && nw >= 1 && nw <= 3;
    for (int i = 0; i < nw && ok; i++)
        ok = w[i] && y[i] && w[i]->rows > 0 && w[i]->cols > 0 &&
             w[i]->cols % eng_dtype_block(w[i]->dtype) == 0 &&
             (long)w[i]->rows * w[i]->cols >= 16384;
    bool u8 = n_tokens > 1 && nw >= 1 && nw <= 3;
    for (int i = 0; i < nw && u8; i++)
        u8 = w[i] && y[i] && u8_matrix(c, w[i]) && w[i]->cols == w[0]->cols;
    if (u8) { /* prefill of one x: rounded once for the three */
        mm_args a[3];
        for (int i = 0; i < nw; i++)
            a[i] = (mm_args){ .c = c, .w = w[i], .bias = bias ? bias[i] : NULL, .x = x, .y = y[i],
                              .n_tokens = n_tokens };
        mm_u8(c, a, nw);
        return;
    }
    if (!ok) { /* prefill, small, or bad: op_matmul handles (or drops) each */
        for (int i = 0; i < nw; i++)
            op_matmul(be, w[i], bias ? bias[i] : NULL, x, y[i], n_tokens);
        return;
    }
    mm_n_args m = { .n = nw };
    mm_args *a = m.a;
    for (int i = 0; i < nw; i++)
        a[i] = (mm_args){ .c = c, .w = w[i], .bias = bias ? bias[i] : NULL, .x = x, .y = y[i],
                          .n_tokens = 1 };
    /* the same x: its Q4_K forms once, over the widest (a block's sums
     * and 16-bit values do not depend on the row's length); Q6_K rows take
     * the 16-bit values too (a Q4_K_M file's v) */
    long q4_cols = 0;
    bool any_x4 = false;
    for (int i = 0; i < nw; i++) {
        if ((x4_rows(w[i]->dtype) || q4x_rows(w[i]->dtype)) && w[i]->cols > q4_cols)
            q4_cols = w[i]->cols;
        /* any of them, whatever its place: Q4_K rows after a Q4_1 one of
         * the same width took gemv_q4k (x in f32), not what op_matmul
         * gives them */
        any_x4 = any_x4 || x4_rows(w[i]->dtype);
    }
    x16_row x4;
    bool has_x4 = false;
    const float *xs = !q4_cols ? NULL
                      : any_x4 ? q4k_prep(c, x, q4_cols, &x4, &has_x4)
                               : xs_prep(c, x, q4_cols);
    if (q4_cols && !xs) { /* too wide: op_matmul's way */
        for (int i = 0; i < nw; i++)
            op_matmul(be, w[i], bias ? bias[i] : NULL, x, y[i], n_tokens);
        return;
    }
    for (int i = 0; i < nw; i++)
        if (x4_rows(w[i]->dtype)) {
            a[i].xs = xs;
            a[i].x4 = has_x4 ? &x4 : NULL;
        } else if (q4x_rows(w[i]->dtype)) {
            a[i].xs = xs;
        }
    /* one x in 16 bits for the three (of one width, as the model asks):
     * Q8_0's, Q4_1's and Q4_0's preps write the same form */
    x16_row xr;
    x16_prep_fn *prep = NULL;
    bool q4 = false;
    for (int i = 0; i < nw; i++) {
        if (x16_prep_for(c->k, w[i]->dtype))
            prep = x16_prep_for(c->k, w[i]->dtype);
        q4 = q4 || q4x_rows(w[i]->dtype);
    }
    bool same_cols = true;
    for (int i = 1; i < nw; i++)
        same_cols = same_cols && w[i]->cols == w[0]->cols;
    if (prep && same_cols && x16_ready(c, prep, q4, x, w[0]->cols, &xr))
        for (int i = 0; i < nw; i++)
            if (x16_prep_for(c->k, w[i]->dtype))
                a[i].x16 = &xr;
    run(c, mm_n_decode_task, &m, true);
}

static void op_matmul3(eng_backend *be, const eng_weight *const w[3], const float *const bias[3],
                       const float *x, float *const y[3], int n_tokens)
{
    matmul_n(be, w, bias, x, y, n_tokens, 3);
}

/* ---- rmsnorm ----------------------------------------------------------- */

typedef struct norm_args {
    const float *x, *weight;
    float *y;
    int n_tokens, n;
    float eps;
} norm_args;

static void norm_task(void *p, int ith, int nth)
{
    norm_args *a = p;
    long b, e;
    eng_split(a->n_tokens, ith, nth, &b, &e);
    for (long t = b; t < e; t++) {
        const float *x = a->x + (size_t)t * a->n;
        float *y = a->y + (size_t)t * a->n;
        /* Sum of squares in double (like ggml's ggml_float), scale in float. */
        double sum = 0.0;
        for (int i = 0; i < a->n; i++)
            sum += (double)(x[i] * x[i]);
        float mean = (float)(sum / a->n);
        float scale = 1.0f / sqrtf(mean + a->eps);
        for (int i = 0; i < a->n; i++)
            y[i] = (x[i] * scale) * (a->weight ? a->weight[i] : 1.0f);
    }
}

static void op_rmsnorm(eng_backend *be, const float *x, const float *weight, float *y,
                       int n_tokens, int n, float eps)
{
    if (!x || !y || n_tokens <= 0 || n <= 0)
        return;
    norm_args a = { x, weight, y, n_tokens, n, eps };
    run(ctx_of(be), norm_task, &a, n_tokens > 1 && (long)n_tokens * n >= 8192);
}

/* ---- rope -------------------------------------------------------------- */

typedef struct rope_args {
    float *x;
    int n_tokens, n_heads, head_dim, n_rot, pos0;
    float freq_base;
    const float *freq_factors;
    bool neox;
    const float *tab; /* the tokens' angles, computed already (ctx rope.tab), or NULL */
} rope_args;

/* cos and sin of pairs i0 .. i0 + ni - 1 at position pos */
static void rope_angles(const rope_args *a, double pos, int i0, int ni, float *cs, float *sn)
{
    for (int i = 0; i < ni; i++) {
        int ii = i0 + i;
        double theta = pos * pow((double)a->freq_base, -2.0 * ii / a->n_rot);
        if (a->freq_factors)
            theta /= (double)a->freq_factors[ii];
        cs[i] = (float)cos(theta);
        sn[i] = (float)sin(theta);
    }
}

static void rope_task(void *p, int ith, int nth)
{
    rope_args *a = p;
    long b, e;
    int half = a->n_rot / 2;
    /* neox pairs (i, i + n_rot/2); llama pairs (2i, 2i+1) */
    int off = a->neox ? half : 1, stride = a->neox ? 1 : 2;
    eng_split(a->n_tokens, ith, nth, &b, &e);
    for (long t = b; t < e; t++) {
        float *xt = a->x + (size_t)t * a->n_heads * a->head_dim;
        for (int i0 = 0; i0 < half; i0 += ROPE_CHUNK) {
            int ni = half - i0 < ROPE_CHUNK ? half - i0 : ROPE_CHUNK;
            float cbuf[ROPE_CHUNK], sbuf[ROPE_CHUNK];
            const float *cs = cbuf, *sn = sbuf;
            if (a->tab) { /* half <= ROPE_CHUNK */
                cs = a->tab + (size_t)t * 2 * half;
                sn = cs + half;
            } else {
                rope_angles(a, (double)a->pos0 + (double)t, i0, ni, cbuf, sbuf);
            }
            for (int h = 0; h < a->n_heads; h++) {
                float *xh = xt + (size_t)h * a->head_dim;
                for (int i = 0; i < ni; i++) {
                    int ii = i0 + i;
                    float *p0 = xh + (size_t)ii * stride, *p1 = p0 + off;
                    float x0 = *p0, x1 = *p1;
                    *p0 = x0 * cs[i] - x1 * sn[i];
                    *p1 = x0 * sn[i] + x1 * cs[i];
                }
            }
        }
    }
}

/* The table's rows for the tokens split over the threads */
static void rope_fill_task(void *p, int ith, int nth)
{
    const rope_args *a = p;
    const int half = a->n_rot / 2;
    long b, e;
    eng_split(a->n_tokens, ith, nth, &b, &e);
    float *tab = (float *)a->tab;
    for (long t = b; t < e; t++)
        rope_angles(a, (double)a->pos0 + (double)t, 0, half, tab + (size_t)t * 2 * half,
                    tab + (size_t)t * 2 * half + half);
}

static void op_rope(eng_backend *be, float *x, int n_tokens, int n_heads, int head_dim, int n_rot,
                    int pos0, float freq_base, const float *freq_factors, bool neox)
{
    cpu_ctx *c = ctx_of(be);
    if (!x || n_tokens <= 0 || n_heads <= 0 || head_dim <= 0 || n_rot < 2)
        return;
    if (n_rot > head_dim)
        n_rot = head_dim;
    rope_args a = { x, n_tokens, n_heads, head_dim, n_rot, pos0, freq_base, freq_factors, neox,
                    NULL };
    const int half = n_rot / 2;
    const size_t need = (size_t)n_tokens * 2 * half;
    if (half <= ROPE_CHUNK && need > c->rope.cap) {
        /* grown to the largest eval (n_batch tokens); without it each
         * call computes its own angles */
        float *t = realloc(c->rope.tab, need * sizeof(float));
        if (t) {
            c->rope.tab = t;
            c->rope.cap = need;
        }
        c->rope.valid = false;
    }
    if (half <= ROPE_CHUNK && need <= c->rope.cap) {
        /* the same angles as rope_angles gives; the factors compared by
         * value, so a table never outlives the values it was made from */
        if (!c->rope.valid || c->rope.pos != pos0 || c->rope.n != n_tokens ||
            c->rope.n_rot != n_rot || memcmp(&c->rope.base, &freq_base, sizeof(float)) != 0 ||
            c->rope.has_factors != (freq_factors != NULL) ||
            (freq_factors && memcmp(c->rope.factors, freq_factors, half * sizeof(float)) != 0)) {
            a.tab = c->rope.tab;
            run(c, rope_fill_task, &a, n_tokens > 1);
            c->rope.valid = true;
            c->rope.pos = pos0;
            c->rope.n = n_tokens;
            c->rope.n_rot = n_rot;
            c->rope.base = freq_base;
            c->rope.has_factors = freq_factors != NULL;
            if (freq_factors)
                memcpy(c->rope.factors, freq_factors, half * sizeof(float));
        }
        a.tab = c->rope.tab;
    }
    run(c, rope_task, &a, n_tokens > 1);
}

/* ---- attention ---------------------------------------------------------- */

typedef struct att_args {
    cpu_ctx *c;
    const float *q;
    const void *k, *v; /* f16, or Q8_0 blocks (q8) */
    bool q8;
    float *out;
    int n_tokens, pos0, n_head, n_head_kv, head_dim;
    float scale;
    int window; /* > 0: a token sees its last window positions only */
    float softcap; /* > 0: scores through softcap * tanh(s / softcap) */
    const float *sinks; /* [n_head] or NULL: each head's sink logit */
    _Atomic long next; /* the next item of att_task */
} att_args;

/* Head h's softmax denominator from its sum l over positions under their
 * maximum m, with gpt-oss's sink term e^(sink - m) where the heads have
 * one (a sink far above m takes the whole softmax: 1 / inf, out 0). */
static inline float att_denom(const att_args *a, long h, float m, float l)
{
    return a->sinks ? l + expf(a->sinks[h] - m) : l;
}

/* The first position token t (at pos0 + t) attends to. */
static inline long att_lo(const att_args *a, long t)
{
    const long lo = (long)a->pos0 + t + 1 - a->window;
    return a->window > 0 && lo > 0 ? lo : 0;
}

/* One token and up to 4 query heads of one KV head over positions
 * [p_lo, p_hi): online softmax over blocks of positions, accumulating
 * straight into the output rows o (no scratch depends on the context),
 * the heads side by side so that each K and V row is read and converted
 * from f16 once for them, not once per head. With part (m, l [4]), the
 * rows stay unnormalized and the softmax state goes there, for
 * att_combine; else o is the result. */
/* The online softmax of a group of up to 4 query heads of one KV head. */
typedef struct att_group {
    const float *q[4];
    float *o[4];
    float m[4], l[4];
    long kvh, h0;
    int G;
} att_group;

static void att_group_init(att_args *a, att_group *g, long t, long h0, int G, float *const *o)
{
    g->kvh = h0 / (a->n_head / a->n_head_kv);
    g->h0 = h0;
    g->G = G;
    for (int i = 0; i < 4; i++) {
        g->m[i] = -INFINITY;
        g->l[i] = 0.0f;
    }
    for (int i = 0; i < G; i++) {
        g->q[i] = a->q + ((size_t)t * a->n_head + h0 + i) * a->head_dim;
        g->o[i] = o[i];
        memset(o[i], 0, (size_t)a->head_dim * sizeof(float));
    }
}

/* Positions [p0, p0 + nb) of [.., p_hi) into the group's state. */
static void att_group_block(att_args *a, att_group *g, long p0, int nb, long p_hi)
{
    const kernels *k = a->c->k;
    const long hd = a->head_dim;
    const size_t kv_stride = (size_t)a->n_head_kv * hd;
    const int G = g->G;
    /* rows whose row ATT_PF further on is still in range */
    const long pf = p_hi - ATT_PF - p0;
    const int n_pf = pf < 0 ? 0 : pf < nb ? (int)pf : nb;
    const size_t at = (size_t)p0 * kv_stride + g->kvh * hd; /* in values */
    const eng_q8_block *kq = (const eng_q8_block *)a->k + at / 32;
    const eng_q8_block *vq = (const eng_q8_block *)a->v + at / 32;
    const uint16_t *kh = (const uint16_t *)a->k + at, *vh = (const uint16_t *)a->v + at;
    float s[ATT_BLOCK][4], bm[4];
    if (a->q8)
        k->scores4_q8(g->q, G, kq, vq, kv_stride / 32, nb, n_pf, hd, a->scale, s, bm);
    else
        k->scores4_h(g->q, G, kh, vh, kv_stride, nb, n_pf, hd, a->scale, s, bm);
    if (a->softcap > 0.0f) /* monotonic: the block's maxima map to the new maxima */
        for (int i = 0; i <= nb; i++)
            for (int j = 0; j < G; j++) {
                float *x = i < nb ? &s[i][j] : &bm[j];
                *x = softcap(*x, a->softcap);
            }
    for (int i = 0; i < G; i++)
        if (bm[i] > g->m[i]) {
            if (g->l[i] > 0.0f) {
                float corr = expf(g->m[i] - bm[i]);
                g->l[i] *= corr;
                k->scale(g->o[i], corr, hd);
            }
            g->m[i] = bm[i];
        }
    k->exp4(s, nb, g->m, G, g->l);
    if (a->q8)
        k->pv4_q8(g->o, G, &s[0][0], vq, kv_stride / 32, nb, hd);
    else
        k->pv4_h(g->o, G, &s[0][0], vh, kv_stride, nb, hd);
}

/* With part (m, l [4]), the rows stay unnormalized and the softmax state
 * goes there, for att_combine; else o is the result. */
static void att_group_finish(att_args *a, att_group *g, float *part)
{
    if (part) {
        memcpy(part, g->m, sizeof(g->m));
        memcpy(part + 4, g->l, sizeof(g->l));
        return;
    }
    for (int i = 0; i < g->G; i++)
        if (g->l[i] > 0.0f)
            a->c->k->scale(g->o[i], 1.0f / att_denom(a, g->h0 + i, g->m[i], g->l[i]),
                           a->head_dim);
}

/* One token and up to 4 query heads of one KV head over positions
 * [p_lo, p_hi): online softmax over blocks of positions, accumulating
 * straight into the output rows o (no scratch depends on the context),
 * the heads side by side so that each K and V row is read and converted
 * from f16 once for them, not once per head. */
static void att_range(att_args *a, long t, long h0, int G, long p_lo, long p_hi, float *const *o,
                      float *part)
{
    att_group g;
    att_group_init(a, &g, t, h0, G, o);
    for (long p0 = p_lo; p0 < p_hi; p0 += ATT_BLOCK)
        att_group_block(a, &g, p0, (int)(p_hi - p0 < ATT_BLOCK ? p_hi - p0 : ATT_BLOCK), p_hi);
    att_group_finish(a, &g, part);
}

static void att_heads(att_args *a, long t, long h0, int G)
{
    float *o[4];
    for (int g = 0; g < G; g++)
        o[g] = a->out + ((size_t)t * a->n_head + h0 + g) * a->head_dim;
    att_range(a, t, h0, G, att_lo(a, t), a->pos0 + t + 1, o, NULL);
}

/* Items of (token, KV head, run of up to 4 of its query heads), claimed
 * one at a time: causal rows differ in cost. */
static void att_task(void *p, int ith, int nth)
{
    (void)ith;
    (void)nth;
    att_args *a = p;
    const long group = a->n_head / a->n_head_kv, runs = (group + 3) / 4;
    const long n = (long)a->n_tokens * a->n_head_kv * runs;
    for (;;) {
        long i = atomic_fetch_add_explicit(&a->next, 1, memory_order_relaxed);
        if (i >= n)
            break;
        long t = i / (a->n_head_kv * runs), r = i % (a->n_head_kv * runs);
        long h0 = (r / runs) * group + (r % runs) * 4;
        att_heads(a, t, h0, (int)(group - (r % runs) * 4 < 4 ? group - (r % runs) * 4 : 4));
    }
}

/* Decode over a long context: a token has only n_head_kv x runs items
 * (3 for SmolLM2), too few to keep every thread busy, so positions are
 * cut into chunks of ATT_SPLIT (more when there would be over
 * ATT_MAX_SPLITS of them: the cut depends only on the context, never on
 * the threads, so neither do the results). Each item leaves unnormalized
 * rows and (m, l) in abuf; att_combine merges them per head. */
#ifndef ATT_SPLIT
#define ATT_SPLIT 256
#endif
enum { ATT_MAX_SPLITS = 64 };

typedef struct att_split {
    att_args *a;
    long lo; /* the first position (att_lo) */
    long chunk, n_chunks, runs;
    float *buf; /* [n_chunks][n_head][head_dim], then [n_chunks][items][8] */
    _Atomic long next;
    _Atomic long finished; /* chunks done: the thread that finishes the last merges */
} att_split;


/* out[h] = sum_c e^(m_c - m) o_c / sum_c e^(m_c - m) l_c, chunks in order. */
static void att_combine(att_split *sp)
{
    att_args *a = sp->a;
    const long group = a->n_head / a->n_head_kv, hd = a->head_dim, per_chunk = a->n_head_kv * sp->runs;
    for (long h = 0; h < a->n_head; h++) {
        /* the item and lane that held head h */
        const long kvh = h / group, run = (h % group) / 4, g = (h % group) % 4;
        const float *parts = sp->buf + (size_t)sp->n_chunks * a->n_head * hd;
        float m = -INFINITY;
        for (long c = 0; c < sp->n_chunks; c++) {
            const float mc = parts[(size_t)(c * per_chunk + kvh * sp->runs + run) * 8 + g];
            m = mc > m ? mc : m;
        }
        float *out = a->out + (size_t)h * hd, l = 0.0f;
        memset(out, 0, (size_t)hd * sizeof(float));
        for (long c = 0; c < sp->n_chunks; c++) {
            const float *pc = parts + (size_t)(c * per_chunk + kvh * sp->runs + run) * 8;
            if (!(pc[4 + g] > 0.0f))
                continue;
            const float f = expf(pc[g] - m);
            l += f * pc[4 + g];
            const float *oc = sp->buf + ((size_t)c * a->n_head + h) * hd;
            for (long d = 0; d < hd; d++)
                out[d] += f * oc[d];
        }
        if (l > 0.0f)
            a->c->k->scale(out, 1.0f / att_denom(a, h, m, l), hd);
    }
}

/* An item is a chunk of positions with every group of heads (up to
 * ATT_GROUPS at a time), the groups taking turns block by block: a
 * thread then reads whole rows of the cache (all KV heads) over a short
 * span, where an item a KV head read one head's slice of every row, a
 * strided walk the memory system served about 10 % slower. */
enum { ATT_GROUPS = 32 };

static void att_split_task(void *p, int ith, int nth)
{
    (void)ith;
    (void)nth;
    att_split *sp = p;
    att_args *a = sp->a;
    const long group = a->n_head / a->n_head_kv, hd = a->head_dim;
    const long per_chunk = a->n_head_kv * sp->runs, n_kv = a->pos0 + 1;
    float *parts = sp->buf + (size_t)sp->n_chunks * a->n_head * hd;
    att_group gs[ATT_GROUPS];
    for (;;) {
        long c = atomic_fetch_add_explicit(&sp->next, 1, memory_order_relaxed);
        if (c >= sp->n_chunks)
            break;
        const long lo = sp->lo + c * sp->chunk;
        const long hi = lo + sp->chunk < n_kv ? lo + sp->chunk : n_kv;
        for (long r0 = 0; r0 < per_chunk; r0 += ATT_GROUPS) {
            const long nr = per_chunk - r0 < ATT_GROUPS ? per_chunk - r0 : ATT_GROUPS;
            for (long r = r0; r < r0 + nr; r++) {
                const long h0 = (r / sp->runs) * group + (r % sp->runs) * 4;
                const long left = group - (r % sp->runs) * 4;
                float *o[4];
                for (int g = 0; g < 4 && g < left; g++)
                    o[g] = sp->buf + ((size_t)c * a->n_head + h0 + g) * hd;
                att_group_init(a, &gs[r - r0], 0, h0, (int)(left < 4 ? left : 4), o);
            }
            for (long p0 = lo; p0 < hi; p0 += ATT_BLOCK)
                for (long r = 0; r < nr; r++)
                    att_group_block(a, &gs[r], p0, (int)(hi - p0 < ATT_BLOCK ? hi - p0 : ATT_BLOCK),
                                    hi);
            for (long r = 0; r < nr; r++)
                att_group_finish(a, &gs[r], parts + (size_t)(c * per_chunk + r0 + r) * 8);
        }
        /* the merge in the same run of the pool, by the last thread out
         * (acq_rel: it sees every other chunk's rows), not in a second one */
        if (atomic_fetch_add_explicit(&sp->finished, 1, memory_order_acq_rel) == sp->n_chunks - 1)
            att_combine(sp);
    }
}

/* Prefill by outer products (kernels pack32, mm6x32, att_pv32): an item
 * is ATT_TQ tokens and one KV head with all its query heads. Each block
 * of 32 keys is packed k-major and its values converted to f32 once for
 * the item's rows, instead of once per token as att_heads does; the
 * scores come from mm6x32 and need no horizontal sums. A row's arithmetic
 * depends only on its own query and keys, never on the rows beside it, so
 * a token's result does not depend on how a prompt was cut into evals. */
enum { ATT_TQ = 6 };

static void att_tile(att_args *a, long t0, int nt, long kvh, float *scratch)
{
    const kernels *k = a->c->k;
    const long hd = a->head_dim, G = a->n_head / a->n_head_kv, nr = nt * G;
    const size_t kv_stride = (size_t)a->n_head_kv * hd;
    float *PK = scratch, *VF = PK + hd * 32, *S = VF + 32 * hd, *ml = S + ATT_TQ * G * 32;
    float *m = ml, *l = ml + nr;
    for (long r = 0; r < nr; r++) {
        /* row r: token t0 + r / G, query head kvh * G + r % G */
        memset(a->out + ((size_t)(t0 + r / G) * a->n_head + kvh * G + r % G) * hd, 0,
               (size_t)hd * sizeof(float));
        m[r] = -INFINITY;
        l[r] = 0.0f;
    }
    const long n_kv = a->pos0 + t0 + nt;
    /* from the block of the first token's first position (a window) */
    for (long p0 = att_lo(a, t0) / 32 * 32; p0 < n_kv; p0 += 32) {
        const int nb = (int)(n_kv - p0 < 32 ? n_kv - p0 : 32);
        const void *kr[32];
        const uint16_t *vr[32];
        for (int i = 0; i < nb; i++) {
            kr[i] = (const uint16_t *)a->k + (size_t)(p0 + i) * kv_stride + kvh * hd;
            vr[i] = (const uint16_t *)a->v + (size_t)(p0 + i) * kv_stride + kvh * hd;
        }
        k->pack32(kr, true, nb, hd, PK);
        k->cvt_rows(vr, nb, hd, VF, hd);
        for (long g = 0; g < G; g++) {
            const float *x[6];
            for (int i = 0; i < 6; i++)
                x[i] = a->q + ((size_t)(t0 + (i < nt ? i : 0)) * a->n_head + kvh * G + g) * hd;
            k->mm6x32(PK, hd, x, (float (*)[32])(S + g * 6 * 32));
        }
        for (long r = 0; r < nr; r++) {
            const long t = r / G, g = r % G;
            long nv = a->pos0 + t0 + t + 1 - p0; /* this row's keys in the block */
            nv = nv < nb ? nv : nb;
            const long off = att_lo(a, t0 + t) - p0; /* keys before its window */
            if (nv <= 0 || nv <= off)
                continue;
            float *o = a->out + ((size_t)(t0 + t) * a->n_head + kvh * G + g) * hd;
            const float *srow = S + (g * 6 + t) * 32;
            if (off > 0 || a->softcap > 0.0f) {
                /* the row's window starts inside the block (its keys moved
                 * to the front of a row of their own), or its scores go
                 * through the cap here, scaled */
                const long o0 = off > 0 ? off : 0;
                float win[32] = { 0 }, sc = a->scale;
                memcpy(win, srow + o0, (size_t)(nv - o0) * sizeof(float));
                for (long j = 0; a->softcap > 0.0f && j < nv - o0; j++)
                    win[j] = softcap(win[j] * a->scale, a->softcap);
                if (a->softcap > 0.0f)
                    sc = 1.0f;
                k->att_pv32(win, (int)(nv - o0), sc, &m[r], &l[r], o, VF + o0 * hd, hd);
            } else {
                k->att_pv32(srow, (int)nv, a->scale, &m[r], &l[r], o, VF, hd);
            }
        }
    }
    for (long r = 0; r < nr; r++)
        if (l[r] > 0.0f)
            k->scale(a->out + ((size_t)(t0 + r / G) * a->n_head + kvh * G + r % G) * hd,
                     1.0f / att_denom(a, kvh * G + r % G, m[r], l[r]), hd);
}

static void att_tiles_task(void *p, int ith, int nth)
{
    (void)nth;
    att_args *a = p;
    const long tiles = (a->n_tokens + ATT_TQ - 1) / ATT_TQ, n = tiles * a->n_head_kv;
    float *scratch = thread_scratch(a->c, ith);
    for (;;) {
        long i = atomic_fetch_add_explicit(&a->next, 1, memory_order_relaxed);
        if (i >= n)
            break;
        /* the costliest tiles (the last tokens) first */
        const long tile = tiles - 1 - i / a->n_head_kv, kvh = i % a->n_head_kv;
        const long t0 = tile * ATT_TQ;
        att_tile(a, t0, (int)(a->n_tokens - t0 < ATT_TQ ? a->n_tokens - t0 : ATT_TQ), kvh, scratch);
    }
}

static void attention(eng_backend *be, const float *q, const void *k, const void *v, bool q8,
                      float *out, int n_tokens, int pos0, int n_head, int n_head_kv,
                      int head_dim, float scale, int window, float softcap, const float *sinks)
{
    if (!q || !k || !v || !out || n_tokens <= 0 || pos0 < 0 || n_head <= 0 || n_head_kv <= 0 ||
        head_dim <= 0 || n_head % n_head_kv != 0 || (q8 && head_dim % 32 != 0))
        return;
    att_args a = { ctx_of(be), q, k, v, q8, out, n_tokens, pos0, n_head, n_head_kv, head_dim,
                   scale, window, softcap, sinks, 0 };
    atomic_init(&a.next, 0);
    const long kv_lo = att_lo(&a, 0); /* a decode token's first position */
    long work = (long)n_tokens * n_head * (pos0 + n_tokens - kv_lo) * head_dim;
    /* every prefill, whatever its size, by tiles where the kernels have
     * them (the prompt cache's results must not depend on the cut) */
    const kernels *kt = a.c->k;
    const long G = n_head / n_head_kv;
    const long n_kv = (long)pos0 + 1 - kv_lo, runs = (G + 3) / 4;
    long chunk = ATT_SPLIT;
    if (n_kv > chunk * ATT_MAX_SPLITS)
        chunk = (n_kv + ATT_MAX_SPLITS - 1) / ATT_MAX_SPLITS;
    const long n_chunks = (n_kv + chunk - 1) / chunk;
    /* a Q8_0 cache's prefill by att_task (the tiles read f16 rows; they
     * exist in the AVX-512 set only, which no machine of ours can test) */
    if (n_tokens > 1 && !q8 && kt->att_pv32 && kt->mm6x32 &&
        (long)head_dim * 64 + (ATT_TQ * G) * 34 <= SCRATCH_FLOATS) {
        run(ctx_of(be), att_tiles_task, &a, work >= 16384);
    } else if (n_tokens == 1 && n_chunks > 1 &&
               n_chunks * ((long)n_head * head_dim + (long)n_head_kv * runs * 8) <= ABUF_FLOATS) {
        att_split sp = { &a, kv_lo, chunk, n_chunks, runs, a.c->abuf, 0, 0 };
        atomic_init(&sp.next, 0);
        atomic_init(&sp.finished, 0);
        run(ctx_of(be), att_split_task, &sp, true);
    } else {
        run(ctx_of(be), att_task, &a, work >= 16384);
    }
}

static void op_attention(eng_backend *be, const float *q, const uint16_t *k, const uint16_t *v,
                         float *out, int n_tokens, int pos0, int n_head, int n_head_kv,
                         int head_dim, float scale, int window, float softcap,
                         const float *sinks)
{
    attention(be, q, k, v, false, out, n_tokens, pos0, n_head, n_head_kv, head_dim, scale,
              window, softcap, sinks);
}

static void op_attention_q8(eng_backend *be, const float *q, const eng_q8_block *k,
                            const eng_q8_block *v, float *out, int n_tokens, int pos0,
                            int n_head, int n_head_kv, int head_dim, float scale, int window,
                            float softcap, const float *sinks)
{
    attention(be, q, k, v, true, out, n_tokens, pos0, n_head, n_head_kv, head_dim, scale,
              window, softcap, sinks);
}

/* ---- ffn ---------------------------------------------------------------- */

typedef struct ffn_run {
    ffn_args a;
    cpu_ctx *c;
    int t0, nt; /* token chunk for the two-phase path */
    float *A;   /* [nt][n_sel] */
    long lda;
    const int8_t *xq; /* prefill in 8 bits: the chunk's x rounded (xq_fill), or NULL */
    const float *xds;
} ffn_run;

/* Decode, one pass: thread ith takes a contiguous range of slots and sums
 * into its partial (thread 0 straight into y). */
/* Thread ith's range [b, e) of the selection, whole pairs (the kernels
 * walk pairs), and its partial sum, zeroed: y itself for thread 0. */
static float *ffn_part(ffn_run *r, int ith, int nth, long *b, long *e)
{
    eng_split((r->a.n_sel + 1) / 2, ith, nth, b, e);
    *b *= 2;
    *e = *e * 2 < r->a.n_sel ? *e * 2 : r->a.n_sel;
    float *acc = ith == 0 ? r->a.y : thread_scratch(r->c, ith);
    memset(acc, 0, (size_t)r->a.w->n_embd * sizeof(float));
    return acc;
}

/* Runs a decode walk (fn: ffn_part's range into its partial) and sums
 * the threads' partials into y. */
static void ffn_run_summed(cpu_ctx *c, eng_task_fn fn, ffn_run *r, bool parallel)
{
    run(c, fn, r, parallel);
    const int used = parallel && c->n_threads > 1 ? c->n_threads : 1;
    for (int i = 1; i < used; i++)
        c->k->add(r->a.y, thread_scratch(c, i), r->a.w->n_embd);
}

static void ffn_fused_task(void *p, int ith, int nth)
{
    ffn_run *r = p;
    long b, e;
    float *acc = ffn_part(r, ith, nth, &b, &e);
    r->c->k->ffn_fused(&r->a, b, e, acc);
}

/* Phase 1 by outer products (kernels pack32, mm6x32): blocks of 16 slots,
 * their gate and up rows (32) packed once (in K chunks past PACK_K), then
 * 6 tokens at a time. Invalid slots borrow a valid slot's rows and give 0. */
/* ffn_act_packed_task's block of nj slots (rows src): K in one chunk, or
 * past one packed block (n_embd > PACK_K) in chunks of ACT_KC, each token's
 * 32 sums kept across them in acc (the rest of the thread's scratch),
 * ACT_TC tokens at a time. The last chunk's products complete the sums and
 * go through the activation. */
enum { ACT_KC = 1536, ACT_TC = (SCRATCH_FLOATS - PACK_ROWS * ACT_KC) / PACK_ROWS };
_Static_assert(ACT_KC % 256 == 0, "a K chunk is whole Q4_K blocks");


/* act_packed_block in 8 bits (r->xq; n_embd within U8_KB blocks): the
 * 2 nj rows packed once, then 6 tokens at a time. */
/* A block's activations into dst[0..nj) from its products out: gate and
 * up pairs (act_mul16), or an un-gated block's one value a slot, relu(u)^2
 * (u u where u > 0, as relu(u) u); invalid slots 0. */
static void block_act(const kernels *k, eng_act act, const float *out, int nj, const bool *valid,
                      float *dst)
{
    float a[PACK_ROWS];
    if (act == ENG_ACT_RELU_SQR)
        for (int i = 0; i < nj; i++)
            a[i] = out[i] > 0.0f ? out[i] * out[i] : 0.0f;
    else
        k->act_mul16(out, a, act);
    for (int i = 0; i < nj; i++)
        dst[i] = valid[i] ? a[i] : 0.0f;
}

/* A block's rows: two a slot (gate, up), an un-gated slot's one */
static int block_rows(const eng_ffn_weights *w, int nj)
{
    return eng_ffn_rows(w) * nj;
}

static void act_u8_block(ffn_run *r, const void *const *src, int nj, const bool *valid, long j0,
                         uint8_t *P)
{
    const kernels *k = r->c->k;
    const long E = r->a.w->n_embd, nb = E / 32;
    float *D = (float *)(P + U8_P);
    k->pack32_u8(src, r->a.w->dtype, block_rows(r->a.w, nj), nb, P, D);
    for (int t = 0; t < r->nt; t += 6) {
        const int ntt = r->nt - t < 6 ? r->nt - t : 6;
        const int8_t *xq[6];
        const float *xd[6];
        for (int q = 0; q < 6; q++) {
            const size_t tq = (size_t)(t + (q < ntt ? q : ntt - 1));
            xq[q] = r->xq + tq * E;
            xd[q] = r->xds + tq * (E / 16);
        }
        float out[6][32];
        k->mm6x32_u8(P, D, nb, xq, xd, out);
        for (int q = 0; q < ntt; q++)
            block_act(k, r->a.w->act, out[q], nj, valid, r->A + (t + q) * r->lda + j0);
    }
}

static void act_packed_block(ffn_run *r, const void *const *src, int nj, const bool *valid,
                             long j0, float *P)
{
    if (r->xq) {
        act_u8_block(r, src, nj, valid, j0, (uint8_t *)P);
        return;
    }
    const kernels *k = r->c->k;
    const eng_dtype dt = r->a.w->dtype;
    const long E = r->a.w->n_embd;
    const bool one = E <= PACK_K;
    const long KC = one ? E : ACT_KC;
    const int TC = one ? r->nt : ACT_TC;
    float *acc = P + (size_t)PACK_ROWS * KC; /* unused with one chunk */
    for (int tc = 0; tc < r->nt; tc += TC) {
        const int ntc = r->nt - tc < TC ? r->nt - tc : TC;
        for (long k0 = 0; k0 < E; k0 += KC) {
            const long kc = E - k0 < KC ? E - k0 : KC;
            const bool last = k0 + kc == E;
            const void *sk[PACK_ROWS];
            const int nr = block_rows(r->a.w, nj);
            for (int i = 0; i < nr; i++) /* k0 is a multiple of 32 */
                sk[i] = (const char *)src[i] + eng_dtype_bytes(dt, (size_t)k0);
            if (dt == ENG_DTYPE_Q8_0)
                k->pack32_q8((const eng_q8_block *const *)sk, nr, kc, P);
            else if (dt == ENG_DTYPE_Q4_1)
                k->pack32_q41((const eng_q41_block *const *)sk, nr, kc, P);
            else if (dt == ENG_DTYPE_Q4_0)
                k->pack32_q40((const eng_q40_block *const *)sk, nr, kc, P);
            else if (dt == ENG_DTYPE_Q4_K)
                k->pack32_q4k((const eng_q4k_block *const *)sk, nr, kc, P);
            else if (dt == ENG_DTYPE_Q5_K)
                k->pack32_q5k((const eng_q5k_block *const *)sk, nr, kc, P);
            else
                k->pack32(sk, dt == ENG_DTYPE_F16, nr, kc, P);
            for (int t = 0; t < ntc; t += 6) {
                const int ntt = ntc - t < 6 ? ntc - t : 6;
                const float *xp[6];
                for (int q = 0; q < 6; q++)
                    xp[q] = r->a.x + (size_t)(r->t0 + tc + t + (q < ntt ? q : ntt - 1)) * E + k0;
                float out[6][32];
                k->mm6x32(P, kc, xp, out);
                for (int q = 0; q < ntt; q++) {
                    float *a = acc + (size_t)(t + q) * PACK_ROWS;
                    for (int i = 0; k0 > 0 && i < PACK_ROWS; i++)
                        out[q][i] += a[i];
                    if (!last) {
                        memcpy(a, out[q], sizeof(out[q]));
                        continue;
                    }
                    block_act(k, r->a.w->act, out[q], nj, valid,
                              r->A + (tc + t + q) * r->lda + j0);
                }
            }
        }
    }
}

static void ffn_act_packed_task(void *p, int ith, int nth)
{
    ffn_run *r = p;
    const eng_ffn_weights *w = r->a.w;
    const long n_sel = r->a.n_sel;
    const size_t rs = eng_dtype_bytes(w->dtype, (size_t)w->n_embd);
    const size_t rps = (size_t)eng_ffn_rows(w) * rs, uo = eng_ffn_up_offset(w, rs);
    float *P = thread_scratch(r->c, ith);
    long b, e;
    /* 16 slots a block of 32 rows (gate, up), 32 un-gated ones */
    const long S = PACK_ROWS / eng_ffn_rows(w);
    eng_split((n_sel + S - 1) / S, ith, nth, &b, &e);
    b *= S;
    e = e * S < n_sel ? e * S : n_sel;
    for (long j0 = b; j0 < e; j0 += S) {
        const int nj = (int)(e - j0 < S ? e - j0 : S);
        const void *src[PACK_ROWS];
        bool valid[PACK_ROWS];
        for (int i = 0; i < nj; i++) {
            const long sl = slot_of(&r->a, j0 + i);
            valid[i] = sl >= 0;
            const char *g = valid[i] ? (const char *)w->gate_up + (size_t)sl * rps : NULL;
            if (uo == 0) {
                src[i] = g;
                continue;
            }
            src[2 * i] = g;
            src[2 * i + 1] = g ? g + uo : NULL;
        }
        /* an invalid slot's rows: the first valid one's (results dropped),
         * else nothing to compute */
        const void *any = NULL;
        const int nr = block_rows(w, nj);
        for (int i = 0; i < nr && !any; i++)
            any = src[i];
        if (!any) {
            for (int t = 0; t < r->nt; t++)
                for (int i = 0; i < nj; i++)
                    r->A[t * r->lda + j0 + i] = 0.0f;
            continue;
        }
        for (int i = 0; i < nr; i++)
            if (!src[i])
                src[i] = any;
        act_packed_block(r, src, nj, valid, j0, P);
    }
}

/* Phase 1: A[t][j] = act(gate_j . x_t) * (up_j . x_t) for the token chunk,
 * slots split over threads in blocks of 8 (16 rows). */
static void ffn_act_task(void *p, int ith, int nth)
{
    ffn_run *r = p;
    const kernels *k = r->c->k;
    const eng_ffn_weights *w = r->a.w;
    const bool f16 = w->dtype == ENG_DTYPE_F16,
               blk = eng_dtype_block(w->dtype) > 1; /* Q8_0, Q4_K, Q5_K, Q4_1, Q4_0 */
    const size_t rs = eng_dtype_bytes(w->dtype, (size_t)w->n_embd);
    const size_t rps = (size_t)eng_ffn_rows(w) * rs, uo = eng_ffn_up_offset(w, rs);
    long E = w->n_embd, n_sel = r->a.n_sel;
    /* convert when a block of 16 rows fits the scratch (op_ffn sees that
     * rows of block types do) */
    bool convert = (f16 || blk) && (long)BLOCK_ROWS * E <= SCRATCH_FLOATS;
    float *scr = thread_scratch(r->c, ith);
    long b, e;
    eng_split((n_sel + 7) / 8, ith, nth, &b, &e);
    b *= 8;
    e = e * 8 < n_sel ? e * 8 : n_sel;
    /* (un-gated: one row a slot, each converted and dotted once) */
    const bool ug = eng_ffn_rows(w) == 1;
    for (long j0 = b; j0 < e; j0 += 8) {
        int nj = (int)(e - j0 < 8 ? e - j0 : 8);
        /* rows 2i, 2i+1 = gate, up of slot j0 + i (un-gated: row i, its up
         * row); invalid slots borrow a valid row and their results are
         * replaced by 0 */
        const uint16_t *hrows[16];
        const float *frows[16];
        long sl[8];
        long any = -1;
        for (int i = 0; i < nj; i++) {
            sl[i] = slot_of(&r->a, j0 + i);
            if (sl[i] >= 0)
                any = sl[i];
        }
        if (any < 0) {
            for (int t = 0; t < r->nt; t++)
                for (int i = 0; i < nj; i++)
                    r->A[t * r->lda + j0 + i] = 0.0f;
            continue;
        }
        const int nr = ug ? nj : 2 * nj;
        const void *rows[16];
        for (int i = 0; i < nr; i++) {
            const long s_i = sl[ug ? i : i / 2];
            rows[i] = (const char *)w->gate_up + (size_t)(s_i >= 0 ? s_i : any) * rps +
                      (i & 1 && !ug ? uo : 0);
        }
        for (int i = 0; i < nr; i++) {
            hrows[i] = rows[i];
            frows[i] = rows[i];
        }
        if (convert && blk) {
            /* the next block's slots to the cache while these convert (a
             * selection's slots are scattered; the short prefills, whose
             * time this conversion is, waited on them) */
            for (long j = j0 + 8; j < j0 + 16 && j < e; j++) {
                const long sn = slot_of(&r->a, j);
                for (size_t l = 0; sn >= 0 && l < rps; l += 64)
                    __builtin_prefetch((const char *)w->gate_up + (size_t)sn * rps + l, 0, 3);
            }
            for (int i = 0; i < nr; i++)
                row_to_f32(k, w->dtype, rows[i], E, scr + (size_t)i * E);
        } else if (convert) {
            k->cvt_rows(hrows, nr, E, scr, E);
        }
        if (convert)
            for (int i = 0; i < nr; i++)
                frows[i] = scr + (size_t)i * E;
        bool f32rows = !f16 || convert;
        for (int t = 0; t < r->nt; t += 3) {
            int ntt = r->nt - t < 3 ? r->nt - t : 3;
            const float *xp[3];
            for (int q = 0; q < 3; q++)
                xp[q] = r->a.x + (size_t)(r->t0 + t + (q < ntt ? q : ntt - 1)) * E;
            for (int i = 0; i < nr; i += 4) {
                float out[4][3];
                int ri[4];
                for (int q = 0; q < 4; q++)
                    ri[q] = i + q < nr ? i + q : ug ? nr - 1 : nr - 2 + (q & 1);
                if (f32rows) {
                    const float *wp[4] = { frows[ri[0]], frows[ri[1]], frows[ri[2]], frows[ri[3]] };
                    k->dot4x3(wp, xp, E, out);
                } else {
                    const uint16_t *wp[4] = { hrows[ri[0]], hrows[ri[1]], hrows[ri[2]],
                                              hrows[ri[3]] };
                    k->dot4x3_h(wp, xp, E, out);
                }
                for (int q = 0; ug && q < 4 && i + q < nj; q++)
                    for (int tt = 0; tt < ntt; tt++) /* relu(u) u */
                        r->A[(t + tt) * r->lda + j0 + i + q] =
                            sl[i + q] >= 0 ? gate_act(out[q][tt], w->act) * out[q][tt] : 0.0f;
                for (int q = 0; !ug && q < 2 && i / 2 + q < nj; q++) {
                    int jj = i / 2 + q;
                    for (int tt = 0; tt < ntt; tt++)
                        r->A[(t + tt) * r->lda + j0 + jj] =
                            sl[jj] >= 0 ? gate_act(out[2 * q][tt], w->act) * out[2 * q + 1][tt]
                                        : 0.0f;
                }
            }
        }
    }
}

/* Phase 2: y[t] = sum_j A[t][j] * down[s_j], columns split over threads. */
static void ffn_down_task(void *p, int ith, int nth)
{
    ffn_run *r = p;
    long E = r->a.w->n_embd, b, e;
    eng_split((E + 7) / 8, ith, nth, &b, &e);
    b *= 8;
    e = e * 8 < E ? e * 8 : E;
    if (b >= e)
        return;
    float *y = r->a.y + (size_t)r->t0 * E;
    r->c->k->ffn_down(&r->a, r->A, r->lda, y, E, r->nt, b, e - b, thread_scratch(r->c, ith));
}

/* x's forms for a decode walk of w's rows (xr holds them): gate and up
 * against x in 16 bits, where the kernels have it; Q4_K's (Q5_K's) mins
 * and Q4_1's (Q4_0's) m against x's sums. */
static void decode_prep(cpu_ctx *c, ffn_run *r, x16_row *xr)
{
    const eng_ffn_weights *w = r->a.w;
    const long E = w->n_embd;
    bool has_x4;
    if (x16_ready(c, x16_prep_for(c->k, w->dtype), q4x_rows(w->dtype), r->a.x, E, xr))
        r->a.x16 = xr;
    if (q4x_rows(w->dtype))
        r->a.xs = xs_prep(c, r->a.x, E);
    if (w->dtype == ENG_DTYPE_Q4_K || w->dtype == ENG_DTYPE_Q5_K) {
        r->a.xs = q4k_prep(c, r->a.x, E, xr, &has_x4);
        r->a.x16 = has_x4 ? xr : NULL;
    }
}

/* One token through the fused pass (r's runs set, n_embd within the
 * scratch), the threads' partials summed into y. */
static void ffn_decode(cpu_ctx *c, ffn_run *r)
{
    x16_row xr;
    decode_prep(c, r, &xr);
    ffn_run_summed(c, ffn_fused_task, r, r->a.n_sel * r->a.w->n_embd * 3 >= 16384);
}

/* Whether the FFN's rows are whole blocks of their type (and block types
 * within what the decode and prefill paths convert in a scratch). */
static bool ffn_shape_ok(const eng_ffn_weights *w)
{
    if (w->n_embd <= 0 || w->n_embd % eng_dtype_block(w->dtype))
        return false;
    return eng_dtype_block(w->dtype) == 1 || w->n_embd <= SCRATCH_FLOATS;
}

/* gpt-oss's activation (ggml's swiglu_oai, alpha 1.702, limit 7, the
 * same operations in the same order). */
static inline float oai_act(float g, float u)
{
    const float x = g > 7.0f ? 7.0f : g;
    const float y = u < -7.0f ? -7.0f : u > 7.0f ? 7.0f : u;
    return x / (1.0f + expf(1.702f * -x)) * (y + 1.0f);
}

/* a = act(gate . x + bias) * (up . x + bias); ENG_ACT_GELU_TOPK's gate
 * less the token's cut, and none below it */
static inline float biased_act(const eng_ffn_weights *w, long s, float g, float u, float cut)
{
    if (w->bias) {
        g += w->bias[2 * s];
        u += w->bias[2 * s + 1];
    }
    if (w->act == ENG_ACT_GELU_TOPK)
        return g > cut ? gate_act(g - cut, ENG_ACT_GELU) * u : 0.0f;
    return w->act == ENG_ACT_SWIGLU_OAI ? oai_act(g, u) : gate_act(g, w->act) * u;
}

/* ENG_ACT_GELU_TOPK's cut of a token's n gate values (g's even entries,
 * the slots computed): their mean plus w->cut times their standard
 * deviation (of n - 1 degrees, as llama.cpp's) */
static float topk_cut(const eng_ffn_weights *w, const float *g, long n)
{
    double sum = 0.0, sq = 0.0;
    for (long j = 0; j < n; j++)
        sum += g[2 * j];
    const double mean = sum / (double)n;
    for (long j = 0; j < n; j++)
        sq += (g[2 * j] - mean) * (g[2 * j] - mean);
    return (float)(mean + w->cut * sqrt(n > 1 ? sq / (double)(n - 1) : 0.0));
}

static void op_matmul(eng_backend *be, const eng_weight *w, const float *bias, const float *x,
                      float *y, int n_tokens);

/* thread ith's share of the selection's gate and up rows into c->gather */
static void gather_task(void *p, int ith, int nth)
{
    ffn_run *r = p;
    const size_t rb2 = 2 * eng_ffn_row_bytes(r->a.w->dtype, r->a.w->n_embd);
    long b, e;
    eng_split(r->a.n_sel, ith, nth, &b, &e);
    for (long j = b; j < e; j++) {
        const long sl = slot_of(&r->a, j);
        if (sl >= 0)
            memcpy(r->c->gather + j * rb2, (const uint8_t *)r->a.w->gate_up + sl * rb2, rb2);
        else
            memset(r->c->gather + j * rb2, 0, rb2);
    }
}

/* Decode GEMVs of x by one half of the FFN's slots: y[i] = (gate rows,
 * half 0, or up rows, half 1, of selected index idx[i] (NULL: i)) . x for
 * i < n, as op_matmul's kernels compute each row. The rows are strided in
 * the slots ([gate | up] each), so a thread copies up to 32 of them into
 * its scratch and runs the GEMV there: memory gives only the half wanted,
 * and the copy stays in cache. */
typedef struct half_gemv {
    mm_args a; /* x's forms (gemv_prep), shared */
    const ffn_args *f;
    const int32_t *idx;
    long n, ch; /* rows, and rows a copy */
    int half;
    float *y;
} half_gemv;

static void half_gemv_task(void *p, int ith, int nth)
{
    half_gemv *h = p;
    const eng_ffn_weights *w = h->f->w;
    const size_t rb = eng_ffn_row_bytes(w->dtype, w->n_embd);
    uint8_t *buf = (uint8_t *)thread_scratch(h->a.c, ith);
    long b, e;
    eng_split((h->n + h->ch - 1) / h->ch, ith, nth, &b, &e);
    for (long c0 = b * h->ch; c0 < e * h->ch && c0 < h->n; c0 += h->ch) {
        const long m = h->n - c0 < h->ch ? h->n - c0 : h->ch;
        for (long i = 0; i < m; i++) {
            const long sl = slot_of(h->f, h->idx ? h->idx[c0 + i] : c0 + i);
            if (sl >= 0)
                memcpy(buf + i * rb, (const uint8_t *)w->gate_up + (2 * sl + h->half) * rb, rb);
            else
                memset(buf + i * rb, 0, rb);
        }
        const eng_weight cw = { w->dtype, (int)m, (int)w->n_embd, buf };
        mm_args la = h->a;
        la.w = &cw;
        la.y = h->y + c0;
        mm_decode_task(&la, 0, 1);
    }
}

/* gemma3n's cut at decode: the gate rows alone first (the cut is their
 * mean and deviation), then the up and down rows of the neurons above it,
 * about 5 %. Gathering gate and up rows together and a GEMV of both read
 * and wrote every up row (six row reads a neuron on E2B, now one and a
 * twentieth). The same products as ffn_biased's but for summation order.
 * False (nothing done) where the buffers or x's forms do not allow it. */
static bool ffn_cut_decode(cpu_ctx *c, ffn_run *r)
{
    const eng_ffn_weights *w = r->a.w;
    const long E = w->n_embd, n = r->a.n_sel;
    const size_t rb = eng_ffn_row_bytes(w->dtype, E);
    const long ch = (long)(SCRATCH_FLOATS * sizeof(float) / rb) < 32
                        ? (long)(SCRATCH_FLOATS * sizeof(float) / rb)
                        : 32;
    /* g, u, A and the passing slots in abuf's lower half (gemv_prep's
     * forms take the upper) */
    if (w->bias || ch < 4 || 4 * n > ABUF_FLOATS / 2 || w->dtype == ENG_DTYPE_MXFP4)
        return false;
    half_gemv h = { .a = { .c = c, .x = r->a.x, .n_tokens = 1 }, .f = &r->a, .n = n, .ch = ch };
    x16_row xr, x4;
    if (!gemv_prep(c, w->dtype, E, r->a.x, &h.a, &xr, &x4))
        return false;
    float *g = c->abuf, *u = g + n, *A = u + n;
    int32_t *live = (int32_t *)(A + n);
    h.y = g;
    run(c, half_gemv_task, &h, n * E >= 16384);
    double sum = 0.0, sq = 0.0; /* topk_cut's statistics */
    for (long j = 0; j < n; j++)
        sum += g[j];
    const double mean = sum / (double)n;
    for (long j = 0; j < n; j++)
        sq += (g[j] - mean) * (g[j] - mean);
    const float cut = (float)(mean + w->cut * sqrt(n > 1 ? sq / (double)(n - 1) : 0.0));
    long k = 0;
    for (long j = 0; j < n; j++)
        if (g[j] > cut && slot_of(&r->a, j) >= 0)
            live[k++] = (int32_t)j;
    if (r->a.act)
        memset(r->a.act, 0, (size_t)n * sizeof(float));
    if (k == 0) {
        memset(r->a.y, 0, (size_t)E * sizeof(float));
        return true;
    }
    h.idx = live;
    h.n = k;
    h.half = 1;
    h.y = u;
    run(c, half_gemv_task, &h, k * E >= 16384);
    for (long i = 0; i < k; i++) {
        A[i] = gate_act(g[live[i]] - cut, ENG_ACT_GELU) * u[i];
        if (r->a.act)
            r->a.act[live[i]] = A[i];
        live[i] = (int32_t)slot_of(&r->a, live[i]);
    }
    ffn_run rl = *r;
    rl.a.sel = live;
    rl.a.n_sel = k;
    rl.t0 = 0;
    rl.nt = 1;
    rl.A = A;
    rl.lda = k;
    run(c, ffn_down_task, &rl, k * E >= 16384);
    return true;
}

/* An FFN with biases, gpt-oss's activation, gemma3n's cut or MXFP4 rows
 * (its experts), which the fused kernels do not take: gate and up as a
 * matmul whose rows are the slots' gate and up rows (every slot, or a
 * selection's copied together), the activation here, then op_ffn's down
 * phase (a token's cut: over the neurons that pass), or for MXFP4 a matmul
 * by W_down's rows (every slot only). g [nt][2 n_sel] and A [nt][n_sel] of
 * a chunk of tokens in abuf's lower half (a decode matmul's prep takes the
 * upper). */
static void ffn_biased(cpu_ctx *c, ffn_run *r)
{
    const eng_ffn_weights *w = r->a.w;
    const long E = w->n_embd, n = r->a.n_sel, n_tokens = r->a.n_tokens;
    const size_t rb = eng_ffn_row_bytes(w->dtype, E);
    const long chunk = ABUF_FLOATS / 2 / (3 * n);
    const bool down_rows = w->dtype == ENG_DTYPE_MXFP4;
    if (n_tokens == 1 && w->act == ENG_ACT_GELU_TOPK && ffn_cut_decode(c, r))
        return;
    if (chunk < 1 || (down_rows && (r->a.sel || n != w->n_slots || n % 32))) {
        /* (over 174762 slots: no FFN is; MXFP4 slots but some: the loader
         * makes no such call) */
        memset(r->a.y, 0, (size_t)n_tokens * E * sizeof(float));
        return;
    }
    float *g = c->abuf, *two = c->abuf + 2 * chunk * n;
    /* a selection's rows copied together once (a slot of its own: zeros),
     * where the copy can be had; else a matmul a slot */
    bool gathered = false;
    if (r->a.sel) {
        const size_t need = (size_t)n * 2 * rb;
        uint8_t *p = need <= c->gather_cap ? c->gather : realloc(c->gather, need);
        if (p) {
            c->gather = p;
            c->gather_cap = need > c->gather_cap ? need : c->gather_cap;
            run(c, gather_task, r, n * E >= 16384);
            gathered = true;
        }
    }
    for (long t0 = 0; t0 < n_tokens; t0 += chunk) {
        const int nt = (int)(n_tokens - t0 < chunk ? n_tokens - t0 : chunk);
        const float *xt = r->a.x + (size_t)t0 * E;
        if (!r->a.sel) {
            const eng_weight gu = { w->dtype, (int)(2 * n), (int)E, w->gate_up };
            op_matmul(&c->be, &gu, NULL, xt, g, nt);
        } else if (gathered) {
            const eng_weight gu = { w->dtype, (int)(2 * n), (int)E, c->gather };
            op_matmul(&c->be, &gu, NULL, xt, g, nt);
        } else {
            for (long j = 0; j < n; j++) {
                const long sl = slot_of(&r->a, j);
                const eng_weight gu = { w->dtype, 2, (int)E,
                                        (const uint8_t *)w->gate_up + (size_t)(sl < 0 ? 0 : sl) *
                                                                          2 * rb };
                op_matmul(&c->be, &gu, NULL, xt, two, nt);
                for (int t = 0; t < nt; t++)
                    memcpy(g + ((size_t)t * n + j) * 2, two + 2 * t, 2 * sizeof(float));
            }
        }
        float *A = g + (size_t)nt * 2 * n;
        for (int t = 0; t < nt; t++) {
            const float *gt = g + (size_t)t * n * 2;
            const float cut = w->act == ENG_ACT_GELU_TOPK ? topk_cut(w, gt, n) : 0.0f;
            for (long j = 0; j < n; j++) {
                const long sl = slot_of(&r->a, j);
                A[(size_t)t * n + j] = sl >= 0 ? biased_act(w, sl, gt[2 * j], gt[2 * j + 1], cut)
                                               : 0.0f;
            }
        }
        if (r->a.act)
            memcpy(r->a.act + (size_t)t0 * n, A, (size_t)nt * n * sizeof(float));
        if (w->act == ENG_ACT_GELU_TOPK) {
            /* a token's cut leaves about 5 % of the neurons: the down phase
             * of each token reads only theirs (their slots in g's room,
             * their a packed), which in a batch spares the products too */
            for (int t = 0; t < nt; t++) {
                int32_t *live = (int32_t *)g + (size_t)t * n;
                float *At = A + (size_t)t * n;
                long k = 0;
                for (long j = 0; j < n; j++)
                    if (At[j] != 0.0f) {
                        live[k] = (int32_t)slot_of(&r->a, j);
                        At[k++] = At[j];
                    }
                ffn_run rl = *r;
                rl.a.sel = live;
                rl.a.n_sel = k;
                rl.t0 = (int)t0 + t;
                rl.nt = 1;
                rl.A = At;
                rl.lda = k;
                if (k > 0)
                    run(c, ffn_down_task, &rl, k * E >= 16384);
                else
                    memset(r->a.y + (size_t)(t0 + t) * E, 0, (size_t)E * sizeof(float));
            }
            continue;
        }
        if (down_rows) {
            const eng_weight dw = { w->dtype, (int)E, (int)n, w->down };
            op_matmul(&c->be, &dw, NULL, A, r->a.y + (size_t)t0 * E, nt);
            continue;
        }
        r->t0 = (int)t0;
        r->nt = nt;
        r->A = A;
        r->lda = n;
        run(c, ffn_down_task, r, n * E * nt >= 16384);
    }
}

static void op_ffn(eng_backend *be, const eng_ffn_weights *w, const int32_t *sel, int n_sel,
                   const float *x, float *y, int n_tokens, float *act)
{
    cpu_ctx *c = ctx_of(be);
    if (!w || !x || !y || n_tokens <= 0 || !ffn_shape_ok(w) || w->n_slots < 0 || n_sel < 0)
        return;
    long E = w->n_embd;
    if (n_sel == 0) {
        memset(y, 0, (size_t)n_tokens * E * sizeof(float));
        return;
    }
    ffn_run r = { .a = { w, sel, n_sel, x, y, act, n_tokens, NULL }, .c = c };
    /* (ffn_biased walks gated slots: un-gated ones come without biases
     * and in the fused paths' types; none is made otherwise) */
    if (w->act == ENG_ACT_RELU_SQR && (w->bias || w->dtype == ENG_DTYPE_MXFP4)) {
        memset(y, 0, (size_t)n_tokens * E * sizeof(float));
        return;
    }
    if (w->bias || w->act == ENG_ACT_SWIGLU_OAI || w->act == ENG_ACT_GELU_TOPK ||
        w->dtype == ENG_DTYPE_MXFP4) {
        ffn_biased(c, &r);
        return;
    }
    long work = (long)n_sel * E * 3;

    if (n_tokens == 1 && E <= SCRATCH_FLOATS) {
        ffn_decode(c, &r);
        return;
    }

    /* Two phases per token chunk; A is act itself when given, else abuf. */
    long chunk = act ? n_tokens : ABUF_FLOATS / n_sel;
    if (eng_dtype_block(w->dtype) > 1 && !c->k->mm6x32 &&
        (long)BLOCK_ROWS * E > SCRATCH_FLOATS && E <= SCRATCH_FLOATS) {
        /* rows of block types past what ffn_act_task converts (n_embd over
         * 4096 without the packed kernels): a token at a time, fused */
        for (int t = 0; t < n_tokens; t++)
            op_ffn(be, w, sel, n_sel, x + (size_t)t * E, y + (size_t)t * E, 1,
                   act ? act + (size_t)t * n_sel : NULL);
        return;
    }
    if (chunk < 1) {
        /* n_sel beyond the buffer (over a million slots): one token at a
         * time through the fused path when it fits, else nothing sane. */
        if (E > SCRATCH_FLOATS)
            return;
        for (int t = 0; t < n_tokens; t++)
            op_ffn(be, w, sel, n_sel, x + (size_t)t * E, y + (size_t)t * E, 1, NULL);
        return;
    }
    /* gate and up in 8 bits where the kernels have it, x rounded once a
     * chunk (chunks within xq) */
    const bool u8 = u8_rows(c, w->dtype) && E <= (long)U8_KB * 32;
    if (u8 && chunk > XQ_BYTES / E)
        chunk = XQ_BYTES / E;
    for (long t0 = 0; t0 < n_tokens; t0 += chunk) {
        r.t0 = (int)t0;
        r.nt = (int)(n_tokens - t0 < chunk ? n_tokens - t0 : chunk);
        r.A = act ? act + (size_t)t0 * n_sel : c->abuf;
        r.lda = n_sel;
        if (u8) {
            xq_fill(c, x + (size_t)t0 * E, E, r.nt);
            r.xq = c->xq;
            r.xds = c->xds;
        }
        const bool packed = c->k->mm6x32 != NULL;
        run(c, packed ? ffn_act_packed_task : ffn_act_task, &r, work * r.nt >= 16384);
        run(c, ffn_down_task, &r, work * r.nt >= 16384);
    }
}

static void op_ffn_runs(eng_backend *be, const eng_ffn_weights *a, int n_a,
                        const eng_ffn_weights *b, int n_b, const float *x, float *y)
{
    cpu_ctx *c = ctx_of(be);
    if (!a || !b || !x || !y || n_a < 0 || n_b < 0 || n_a > a->n_slots || n_b > b->n_slots ||
        a->dtype != b->dtype || a->n_embd != b->n_embd || !ffn_shape_ok(a) ||
        a->n_embd > SCRATCH_FLOATS || eng_ffn_rows(b) != eng_ffn_rows(a))
        return;
    if (n_a + n_b == 0) {
        memset(y, 0, (size_t)a->n_embd * sizeof(float));
        return;
    }
    /* one walk over both, pairs and threads split as over one list: the
     * same sums, bit for bit, as ffn() over a sel list of the same rows */
    ffn_run r = { .a = { a, NULL, (long)n_a + n_b, x, y, NULL, 1, NULL, b, n_a }, .c = c };
    ffn_decode(c, &r);
}

/* ---- ffn_pick ------------------------------------------------------------ */

/* The k best of a layer's scores: a radix select over every slot took
 * 5 us a SmolLM2 layer (1075 slots) on one thread while the others
 * waited. A token's k-th best score is close to the last token's, so the
 * scoring threads also list the slots scoring at least a bound below the
 * last one (a fraction PICK_HINT of it), and the select runs over those
 * (about 1.5 k of them) when they are at least k: then they hold every
 * slot of the k best, ties included, and the pick is the one over all
 * slots. Fewer than k (the scores fell, a first token): over all. */
typedef struct pick_run {
    cpu_ctx *c;
    const eng_ffn_weights *w;
    q8_row x;       /* one token (ffn_pick) */
    const float *gu; /* [2 n_slots]: each slot's g and u (ffn_top) */
    float *act;     /* [n_slots]: each slot's activation (ffn_top) */
    float *score;   /* [n_slots] */
    float bound;    /* listed: slots scoring at least this (INFINITY: none) */
    int32_t *cand;  /* [n_slots]: a thread's listed slots from the start of its range */
    int *list;      /* [threads][2]: where each thread's range starts, how many it listed */
    int nth;        /* the threads that scored (set by thread 0) */
} pick_run;

/* Lists slot s of a scoring thread's range (from b) when it scores at
 * least the bound; branch-free: an entry not listed is overwritten. */
static inline void pick_list(pick_run *r, long b, long s, float sc, int *m)
{
    r->cand[b + *m] = (int32_t)s;
    *m += sc >= r->bound;
}

static inline void pick_listed(pick_run *r, int ith, int nth, long b, int m)
{
    r->list[2 * ith] = (int)b;
    r->list[2 * ith + 1] = m;
    if (ith == 0)
        r->nth = nth;
}

/* x [n] (a multiple of 32) in 8 bits per block of 32, absmax scaled:
 * codes rint(x * 127 / amax), as the device's k_q8_round. */
static void q8_round(const float *x, long n, int8_t *q, float *d, int32_t *sums)
{
    for (long b = 0; b < n / 32; b++) {
        const float *xb = x + b * 32;
        float amax = 0.0f;
        for (int j = 0; j < 32; j++) {
            const float a = fabsf(xb[j]);
            amax = a > amax ? a : amax; /* NaN passed over, as fmaxf does */
        }
        const float scale = amax / 127.0f, inv = amax > 0.0f ? 127.0f / amax : 0.0f;
        int32_t sum = 0;
        for (int j = 0; j < 32; j++) {
            /* clamped first (NaN, from an infinite x, goes to -127), then
             * rounded to nearest even by the 1.5 * 2^23 trick: lrintf is a
             * call into libm per element and took 4 us a layer */
            float v = xb[j] * inv;
            v = v >= -127.0f ? (v <= 127.0f ? v : 127.0f) : -127.0f;
            v = (v + 12582912.0f) - 12582912.0f;
            q[b * 32 + j] = (int8_t)(int)v;
            sum += (int)v;
        }
        d[b] = scale;
        sums[b] = sum;
    }
}

/* The groups of q8_group from q8_round's output, nb blocks. */
static void q8_regroup(const int8_t *q, const float *d, const int32_t *sums, long nb,
                       q8_group *g)
{
    for (long b0 = 0; b0 < nb; b0 += 4, g++) {
        memset(g, 0, sizeof(*g));
        for (int i = 0; i < 4 && b0 + i < nb; i++) {
            memcpy(g->q + 16 * i, q + 32 * (b0 + i), 16);
            memcpy(g->q + 64 + 16 * i, q + 32 * (b0 + i) + 16, 16);
            for (int l = 0; l < 4; l++)
                g->d[4 * i + l] = d[b0 + i];
            g->off[4 * i] = 8 * sums[b0 + i];
        }
    }
}

/* score[s] = |act(g~ . x) * (u~ . x)| for a contiguous range of slots */
static void pick_score_task(void *p, int ith, int nth)
{
    pick_run *r = p;
    const long nb = r->w->n_embd / 32;
    const size_t sb = eng_sketch_slot_bytes(r->w->n_embd);
    long b, e;
    eng_split(r->w->n_slots, ith, nth, &b, &e);
    const uint8_t *sk = r->w->sketch;
    /* one stream per thread, but the prefetcher alone left the cold scores
     * at two thirds of the read bandwidth */
    int m = 0;
    for (long s = b; s < e; s++) {
        float gu[2];
        if (PICK_PF_SLOTS && s + PICK_PF_SLOTS < e)
            for (size_t o = 0; o < sb; o += 64)
                __builtin_prefetch(sk + (size_t)(s + PICK_PF_SLOTS) * sb + o);
        r->c->k->dot2_q4q8(sk + (size_t)s * sb, &r->x, nb, gu);
        const float sc = fabsf(gate_act(gu[0], r->w->act) * gu[1]);
        r->score[s] = sc;
        pick_list(r, b, s, sc, &m);
    }
    pick_listed(r, ith, nth, b, m);
}

/* The k best of r's scores into sel (eng__pick_top's choice), from the
 * scoring threads' lists when they hold at least k slots; the layer's
 * next bound kept. */
static void pick_select(pick_run *r, int k, void *tmp, int32_t *sel, int hint, const void *key)
{
    const long n = r->w->n_slots;
    long m = 0;
    for (int i = 0; i < r->nth; i++) {
        memmove(r->cand + m, r->cand + r->list[2 * i], (size_t)r->list[2 * i + 1] * sizeof(int32_t));
        m += r->list[2 * i + 1];
    }
    const float thr = m >= k ? eng__pick_top_of(r->score, r->cand, (int)m, k, tmp, sel)
                             : eng__pick_top(r->score, (int)n, k, tmp, sel);
    r->c->pick_hint[hint].key = key;
    r->c->pick_hint[hint].bound = thr * PICK_HINT; /* NaN: nothing listed next time */
}

/* The layer's entry in pick_hint (key: its sketch for ffn_pick, its
 * gate and up rows for ffn_top): its own, else a free one, among a few
 * from the top bits of a multiplicative hash of the key (the low bits of
 * layers' addresses repeat); all taken, the first. */
static int pick_hint_of(cpu_ctx *c, const void *key)
{
    const int h = (int)(((uint64_t)(uintptr_t)key * 0x9e3779b97f4a7c15ull) >> 57);
    for (int i = 0; i < 8; i++) {
        const int j = (h + i) % PICK_HINTS;
        if (c->pick_hint[j].key == key || !c->pick_hint[j].key)
            return j;
    }
    return h;
}

static void op_ffn_pick(eng_backend *be, const eng_ffn_weights *w, int k, const float *x,
                        float *y, int n_tokens)
{
    cpu_ctx *c = ctx_of(be);
    if (!w || !x || !y || n_tokens <= 0 || w->n_embd <= 0 || w->n_slots < 0)
        return;
    const long E = w->n_embd, n = w->n_slots;
    if (k <= 0) {
        memset(y, 0, (size_t)n_tokens * E * sizeof(float));
        return;
    }
    /* scores, the k-best selection's scratch, the pick and the rounded
     * token live in the lower half of abuf (the fused path ffn() takes for
     * one token uses the upper: x16_ready, q4k_prep). Beyond it (over 150k
     * slots) or without a sketch: every slot. */
    const long nb = E / 32, ng = (nb + 3) / 4, gf = (long)(sizeof(q8_group) / sizeof(float));
    if (k >= n || !w->sketch || E % 32 || E > SCRATCH_FLOATS ||
        ng * gf + 5 * n + E / 4 + 2 * nb + 2 * c->n_threads > ABUF_FLOATS / 2) {
        op_ffn(be, w, NULL, (int)n, x, y, n_tokens, NULL);
        return;
    }
    /* the groups first: abuf is 64-byte aligned, and so is a q8_group */
    q8_group *xg = (q8_group *)c->abuf;
    float *score = c->abuf + ng * gf, *tmp = score + n; /* tmp: 2 n */
    int32_t *sel = (int32_t *)(score + 3 * n);
    int8_t *xq = (int8_t *)(score + 4 * n);
    float *xd = score + 4 * n + E / 4;
    int32_t *xs = (int32_t *)(xd + nb);
    int32_t *cand = xs + nb;
    int *list = (int *)(cand + n);
    const int hint = pick_hint_of(c, w->sketch);
    for (int t = 0; t < n_tokens; t++) {
        q8_round(x + (size_t)t * E, E, xq, xd, xs);
        if (c->k->q8_groups)
            q8_regroup(xq, xd, xs, nb, xg);
        const bool hinted = c->pick_hint[hint].key == w->sketch;
        pick_run r = { .c = c,
                       .w = w,
                       .x = { xq, xd, xs, c->k->q8_groups ? xg : NULL },
                       .score = score,
                       .bound = hinted ? c->pick_hint[hint].bound : INFINITY,
                       .cand = cand,
                       .list = list };
        run(c, pick_score_task, &r, n * E >= 16384);
        pick_select(&r, k, tmp, sel, hint, w->sketch);
        op_ffn(be, w, sel, k, x + (size_t)t * E, y + (size_t)t * E, 1, NULL);
    }
}

/* ---- ffn_top (ENG_PICK_EXACT) ------------------------------------------- */

/* Each slot's activation from its g and u (the gate and up rows' GEMV),
 * 16 at a time where the kernels have it; |a| scored and listed as
 * pick_score_task does (a task, though op_ffn_top runs it on one thread). */
static void top_act_task(void *p, int ith, int nth)
{
    pick_run *r = p;
    const long n = r->w->n_slots;
    long b, e;
    eng_split((n + 15) / 16, ith, nth, &b, &e);
    b *= 16;
    e = e * 16 < n ? e * 16 : n;
    long s = b;
    if (r->w->act == ENG_ACT_RELU_SQR) {
        /* un-gated: gu holds each slot's u alone */
        for (; s < e; s++) {
            const float u = r->gu[s] > 0.0f ? r->gu[s] : 0.0f;
            r->act[s] = u * u;
        }
    }
    if (r->c->k->act_mul16)
        for (; s + 16 <= e; s += 16)
            r->c->k->act_mul16(r->gu + 2 * s, r->act + s, r->w->act);
    for (; s < e; s++)
        r->act[s] = gate_act(r->gu[2 * s], r->w->act) * r->gu[2 * s + 1];
    int m = 0;
    for (s = b; s < e; s++) {
        const float sc = fabsf(r->act[s]);
        r->score[s] = sc;
        pick_list(r, b, s, sc, &m);
    }
    pick_listed(r, ith, nth, b, m);
}

/* ffn_fused_task's split and sums for the down rows alone (r->A: the
 * activations of r's selection) */
static void ffn_axpy_task(void *p, int ith, int nth)
{
    ffn_run *r = p;
    long b, e;
    float *acc = ffn_part(r, ith, nth, &b, &e);
    r->c->k->ffn_axpy(&r->a, r->A, b, e, acc);
}

/* Decode's FFN over the slots of a token's k largest |a|: the gate and
 * up rows of each run as one matrix of 2 n rows (slot s's gate row is row
 * 2 s, its up row 2 s + 1; un-gated, n rows, slot s's up row s), so their
 * GEMV is the matmul's (one stream, its kernels); the k best as ffn_pick
 * chooses them; then the down rows of those k alone, with the activations
 * already known (ffn()'s decode walk without its dot products). */
static void op_ffn_top(eng_backend *be, const eng_ffn_weights *a, int n_a,
                       const eng_ffn_weights *b, int n_b, int k, const float *x, float *y,
                       int n_tokens)
{
    cpu_ctx *c = ctx_of(be);
    if (!a || !x || !y || n_tokens <= 0 || a->n_embd <= 0 || n_a < 0 || n_a > a->n_slots ||
        n_b < 0 || (n_b > 0 && (!b || n_b > b->n_slots || b->dtype != a->dtype ||
                                b->n_embd != a->n_embd || eng_ffn_rows(b) != eng_ffn_rows(a))) ||
        !ffn_shape_ok(a) || n_a > INT_MAX / 4 - n_b)
        return;
    const long E = a->n_embd, n = (long)n_a + n_b;
    if (k <= 0 || n == 0) {
        memset(y, 0, (size_t)n_tokens * E * sizeof(float));
        return;
    }
    /* g and u, the activations, scores, the select's scratch, the pick
     * and its activations in the lower half of abuf (the GEMV's x16_ready
     * and sums use the upper); beyond it, or k >= n: every slot */
    if (k >= n || 10 * n + 2 * c->n_threads > ABUF_FLOATS / 2) {
        if (n_b == 0)
            op_ffn(be, a, NULL, n_a, x, y, n_tokens, NULL);
        for (int t = 0; n_b > 0 && t < n_tokens; t++)
            op_ffn_runs(be, a, n_a, b, n_b, x + (size_t)t * E, y + (size_t)t * E);
        return;
    }
    float *gu = c->abuf, *act = gu + 2 * n, *score = act + n, *tmp = score + n; /* tmp: 2 n */
    int32_t *sel = (int32_t *)(tmp + 2 * n), *cand = sel + n;
    float *a_sel = (float *)(cand + n);
    int *list = (int *)(a_sel + n);
    const int rows = eng_ffn_rows(a);
    const eng_weight ga = { a->dtype, rows * n_a, (int)E, a->gate_up };
    const eng_weight gb = { a->dtype, rows * n_b, (int)E, n_b > 0 ? b->gate_up : NULL };
    /* the bound is kept per list: a session's copy (b) is its own */
    const void *key = n_b > 0 ? b->gate_up : a->gate_up;
    const int hint = pick_hint_of(c, key);
    /* the pick walks its slots as one list, n_slots long */
    const eng_ffn_weights one = { .dtype = a->dtype, .n_embd = a->n_embd, .n_slots = (int)n,
                                  .gate_up = a->gate_up, .down = a->down, .act = a->act };
    for (int t = 0; t < n_tokens; t++) {
        const float *xt = x + (size_t)t * E;
        if (n_a > 0 && n_b > 0) { /* both runs' rows in one dispatch */
            const eng_weight *const gw[2] = { &ga, &gb };
            float *const gy[2] = { gu, gu + (size_t)rows * n_a };
            matmul_n(be, gw, NULL, xt, gy, 1, 2);
        } else {
            op_matmul(be, n_a > 0 ? &ga : &gb, NULL, xt, gu, 1);
        }
        const bool hinted = c->pick_hint[hint].key == key;
        pick_run r = { .c = c,
                       .w = &one,
                       .gu = gu,
                       .act = act,
                       .score = score,
                       .bound = hinted ? c->pick_hint[hint].bound : INFINITY,
                       .cand = cand,
                       .list = list };
        /* one thread: on two, SmolLM2's 1075 slots took 5.5k cycles
         * against 3.6k (the pool's wake and wait outweigh the work) */
        top_act_task(&r, 0, 1);
        pick_select(&r, k, tmp, sel, hint, key);
        for (int i = 0; i < k; i++)
            a_sel[i] = act[sel[i]];
        ffn_run d = { .a = { a, sel, k, xt, y + (size_t)t * E, NULL, 1, NULL, n_b > 0 ? b : NULL,
                             n_a },
                      .c = c,
                      .A = a_sel };
        ffn_run_summed(c, ffn_axpy_task, &d, (long)k * E >= 16384);
    }
}

/* The sketch: each slot's gate and up rows as Q4_0 (the one quantizer,
 * quants.c), regrouped into sketch rows; slots split over the threads, a
 * row and its blocks in the thread's scratch. */
static void sketch_task(void *p, int ith, int nth)
{
    pick_run *r = p;
    const eng_ffn_weights *w = r->w;
    const long E = w->n_embd;
    const size_t rs = eng_dtype_bytes(w->dtype, (size_t)E), sb = eng_sketch_slot_bytes((int)E);
    float *row = thread_scratch(r->c, ith);
    uint8_t *q4 = (uint8_t *)(row + E);
    long b, e;
    eng_split(w->n_slots, ith, nth, &b, &e);
    for (long j = b; j < e; j++)
        for (int h = 0; h < 2; h++) {
            const uint8_t *src = (const uint8_t *)w->gate_up + ((size_t)j * 2 + h) * rs;
            row_to_f32(r->c->k, w->dtype, src, E, row);
            eng_quant_row(GGML_TYPE_Q4_0, row, q4, (size_t)E);
            eng_sketch_row(q4, (int)(E / 32), (uint8_t *)w->sketch + j * sb + h * (sb / 2));
        }
}

static void op_build_sketch(eng_backend *be, const eng_ffn_weights *w)
{
    cpu_ctx *c = ctx_of(be);
    /* a row and its blocks fit a thread's scratch up to n_embd 32768 */
    if (!w || !w->sketch || w->n_embd <= 0 || w->n_embd % 32 || 2L * w->n_embd > SCRATCH_FLOATS ||
        w->act == ENG_ACT_RELU_SQR) /* (un-gated: no sketch, pick=token refused) */
        return;
    pick_run r = { .c = c, .w = w };
    run(c, sketch_task, &r, (long)w->n_slots * w->n_embd >= 65536);
}

/* ---- add, store_f16 ------------------------------------------------------ */

typedef struct ew_args {
    cpu_ctx *c;
    float *y;
    const float *x;
    uint16_t *h;
    long n;
} ew_args;

static void add_task(void *p, int ith, int nth)
{
    ew_args *a = p;
    long b, e;
    eng_split(a->n, ith, nth, &b, &e);
    a->c->k->add(a->y + b, a->x + b, e - b);
}

static void store_task(void *p, int ith, int nth)
{
    ew_args *a = p;
    long b, e;
    eng_split(a->n, ith, nth, &b, &e);
    a->c->k->to_f16(a->x + b, a->h + b, e - b);
}

static void op_add(eng_backend *be, float *y, const float *x, long n)
{
    if (!y || !x || n <= 0)
        return;
    ew_args a = { ctx_of(be), y, x, NULL, n };
    run(ctx_of(be), add_task, &a, n >= 65536);
}

static void op_scale(eng_backend *be, float *x, float f, long n)
{
    if (x && n > 0) /* once per eval, over its embeddings: one thread */
        ctx_of(be)->k->scale(x, f, n);
}

typedef struct cap_args {
    float *x, cap;
    long n;
} cap_args;

static void softcap_task(void *p, int ith, int nth)
{
    cap_args *a = p;
    long b, e;
    eng_split(a->n, ith, nth, &b, &e);
    for (long i = b; i < e; i++)
        a->x[i] = softcap(a->x[i], a->cap);
}

/* Over a row of logits per token: 256k tanhf (Gemma 2's vocabulary) cost
 * one thread about 2 ms a decode step. */
static void op_softcap(eng_backend *be, float *x, float cap, long n)
{
    if (!x || !(cap > 0.0f) || n <= 0)
        return;
    cap_args a = { x, cap, n };
    run(ctx_of(be), softcap_task, &a, n >= 16384);
}

static void op_store_f16(eng_backend *be, const float *src, uint16_t *dst, long n)
{
    if (!src || !dst || n <= 0)
        return;
    ew_args a = { ctx_of(be), NULL, src, dst, n };
    run(ctx_of(be), store_task, &a, n >= 65536);
}

static void op_store_kv(eng_backend *be, const float *src, uint16_t *cache, long row, int pos0,
                        int n_tokens)
{
    if (cache && pos0 >= 0)
        op_store_f16(be, src, cache + (size_t)pos0 * row, row * n_tokens);
}

/* On the caller's thread: a decode step stores two rows of a few hundred
 * values, and a prefill's rows are few against its matmuls. */
static void op_store_kv_q8(eng_backend *be, const float *src, eng_q8_block *cache, long row,
                           int pos0, int n_tokens)
{
    (void)be;
    if (src && cache && pos0 >= 0 && row > 0 && row % 32 == 0 && n_tokens > 0)
        eng_quant_row(GGML_TYPE_Q8_0, src, cache + (size_t)pos0 * (row / 32),
                      (size_t)row * n_tokens);
}

/* On the caller's thread too: len multiply-adds per value, against the
 * three n x n matrices around it. The taps in order from the oldest row,
 * as ggml's ssm_conv sums them. */
static void op_shortconv(eng_backend *be, const float *b, const float *c, const float *x,
                         const float *w, int len, float *cache, int pos0, int rows, int n_tokens,
                         int n, float *out)
{
    (void)be;
    if (!b || !c || !x || !w || !cache || !out || len < 1 || pos0 < 0 || n_tokens <= 0 ||
        n <= 0 || len - 1 + n_tokens > rows)
        return;
    for (int t = 0; t < n_tokens; t++) {
        float *row = cache + (size_t)((pos0 + t) % rows) * n;
        for (int i = 0; i < n; i++)
            row[i] = b[(size_t)t * n + i] * x[(size_t)t * n + i];
    }
    for (int t = 0; t < n_tokens; t++) {
        const int first = pos0 + t - len + 1;
        for (int i = 0; i < n; i++) {
            float sum = 0.0f;
            for (int k = first < 0 ? -first : 0; k < len; k++)
                sum += w[(size_t)i * len + k] * cache[(size_t)((first + k) % rows) * n + i];
            out[(size_t)t * n + i] = c[(size_t)t * n + i] * sum;
        }
    }
}

/* ---- ssm (Mamba-2, gated delta net) ------------------------------------- */

typedef struct ssm_args {
    const eng_ssm *w;
    const float *z, *dt, *cache;
    float *xbc, *state, *snap, *out;
    int pos0, rows, snap_t, n_tokens;
} ssm_args;

/* log(1 + e^x), as llama.cpp computes it (x itself past 20) */
static float softplus(float x)
{
    return x > 20.0f ? x : log1pf(expf(x));
}

/* tokens [b, e): the convolution over the ring's rows, its bias and silu,
 * into xbc */
static void ssm_conv_task(void *p, int ith, int nth)
{
    const ssm_args *a = p;
    const eng_ssm *w = a->w;
    const int nc = eng_ssm_conv_ch(w), K = w->d_conv;
    long b, e;
    eng_split(a->n_tokens, ith, nth, &b, &e);
    for (long t = b; t < e; t++) {
        const int first = a->pos0 + (int)t - K + 1;
        float *y = a->xbc + (size_t)t * nc;
        for (int i = 0; i < nc; i++) {
            float sum = w->conv_b ? w->conv_b[i] : 0.0f;
            for (int k = first < 0 ? -first : 0; k < K; k++)
                sum += w->conv[(size_t)i * K + k] *
                       a->cache[(size_t)((first + k) % a->rows) * nc + i];
            y[i] = sum / (1.0f + expf(-sum));
        }
        if (!w->delta)
            continue;
        /* a delta net's q and k heads to unit length, q times 1/sqrt(N) */
        const int N = w->d_state;
        for (int g = 0; g < 2 * w->n_group; g++) {
            float *x = y + (size_t)g * N;
            double ss = 0.0;
            for (int i = 0; i < N; i++)
                ss += (double)x[i] * x[i];
            float r = 1.0f / sqrtf((float)ss + w->eps);
            if (g < w->n_group)
                r /= sqrtf((float)N);
            for (int i = 0; i < N; i++)
                x[i] *= r;
        }
    }
}

/* a . b over n, in eight partial sums so that the loop vectorises */
static float dot8(const float *a, const float *b, int n)
{
    float acc[8] = { 0 };
    int k = 0;
    for (; k + 8 <= n; k += 8)
        for (int j = 0; j < 8; j++)
            acc[j] += a[k + j] * b[k + j];
    float y = ((acc[0] + acc[4]) + (acc[1] + acc[5])) + ((acc[2] + acc[6]) + (acc[3] + acc[7]));
    for (; k < n; k++)
        y += a[k] * b[k];
    return y;
}

/* a delta net's value heads [b, e) over every token in order (backend.h):
 * each row of S (one value dimension) decays, takes its share of the
 * correction b (v - S k) along k, and is read against q */
static void delta_scan_task(void *p, int ith, int nth)
{
    const ssm_args *a = p;
    const eng_ssm *w = a->w;
    const int nc = eng_ssm_conv_ch(w), N = w->d_state, NH = w->n_head, G = w->n_group;
    long b, e;
    eng_split(NH, ith, nth, &b, &e);
    for (int t = 0; t < a->n_tokens; t++) {
        const float *x = a->xbc + (size_t)t * nc, *dt = a->dt + (size_t)t * 2 * NH;
        for (long h = b; h < e; h++) {
            const float *q = x + (h % G) * N, *k = q + (size_t)G * N;
            const float *v = x + 2 * (size_t)G * N + h * N;
            const float beta = 1.0f / (1.0f + expf(-dt[h]));
            const float decay = expf(softplus(dt[NH + h] + w->dt_b[h]) * w->a[h]);
            float *out = a->out + (size_t)t * w->d_inner + h * N;
            for (int j = 0; j < N; j++) {
                float *st = a->state + ((size_t)h * N + j) * N;
                const float d = (v[j] - decay * dot8(st, k, N)) * beta;
                for (int i = 0; i < N; i++)
                    st[i] = st[i] * decay + d * k[i];
                out[j] = dot8(st, q, N);
            }
            if (a->snap && t + 1 == a->snap_t) /* (this thread's heads) */
                memcpy(a->snap + (size_t)h * N * N, a->state + (size_t)h * N * N,
                       (size_t)N * N * sizeof(float));
        }
    }
}

/* heads [b, e) over every token in order: the state's recurrence and
 * y = state . C + D x, into out */
static void ssm_scan_task(void *p, int ith, int nth)
{
    const ssm_args *a = p;
    const eng_ssm *w = a->w;
    const int nc = eng_ssm_conv_ch(w), N = w->d_state, hd = w->d_inner / w->n_head;
    const int per_group = w->n_head / w->n_group;
    long b, e;
    eng_split(w->n_head, ith, nth, &b, &e);
    for (int t = 0; t < a->n_tokens; t++) {
        const float *x = a->xbc + (size_t)t * nc;
        const float *B = x + w->d_inner, *C = B + (size_t)w->n_group * N;
        for (long h = b; h < e; h++) {
            const float s = softplus(a->dt[(size_t)t * w->n_head + h] + w->dt_b[h]);
            const float dA = expf(s * w->a[h]);
            const float *Bg = B + (h / per_group) * N, *Cg = C + (h / per_group) * N;
            for (int i = 0; i < hd; i++) {
                const float xi = x[h * hd + i], xdt = xi * s;
                float *st = a->state + ((size_t)h * hd + i) * N;
                /* eight partial sums, so that the loop vectorises */
                float acc[8] = { 0 };
                int k = 0;
                for (; k + 8 <= N; k += 8)
                    for (int j = 0; j < 8; j++) {
                        st[k + j] = st[k + j] * dA + Bg[k + j] * xdt;
                        acc[j] += st[k + j] * Cg[k + j];
                    }
                float y = ((acc[0] + acc[4]) + (acc[1] + acc[5])) +
                          ((acc[2] + acc[6]) + (acc[3] + acc[7]));
                for (; k < N; k++) {
                    st[k] = st[k] * dA + Bg[k] * xdt;
                    y += st[k] * Cg[k];
                }
                a->out[(size_t)t * w->d_inner + h * hd + i] = y + w->d[h] * xi;
            }
            if (a->snap && t + 1 == a->snap_t) /* (this thread's heads) */
                memcpy(a->snap + (size_t)h * hd * N, a->state + (size_t)h * hd * N,
                       (size_t)hd * N * sizeof(float));
        }
    }
}

/* tokens [b, e): Mamba-2's out times silu(z), RMS-normalised per group;
 * a delta net's RMS-normalised per value head, then times silu(z) */
static void ssm_gate_task(void *p, int ith, int nth)
{
    const ssm_args *a = p;
    const eng_ssm *w = a->w;
    const int D = w->d_inner, n_norm = w->delta ? w->n_head : w->n_group, gs = D / n_norm;
    long b, e;
    eng_split(a->n_tokens, ith, nth, &b, &e);
    for (long t = b; t < e; t++) {
        float *y = a->out + (size_t)t * D;
        const float *z = a->z + (size_t)t * D;
        for (int i = 0; i < D && !w->delta; i++)
            y[i] *= z[i] / (1.0f + expf(-z[i]));
        for (int g = 0; w->norm && g < n_norm; g++) {
            float *yg = y + (size_t)g * gs;
            const float *nw = w->delta ? w->norm : w->norm + (size_t)g * gs;
            double ss = 0.0;
            for (int i = 0; i < gs; i++)
                ss += (double)yg[i] * yg[i];
            const float r = 1.0f / sqrtf((float)(ss / gs) + w->eps);
            for (int i = 0; i < gs; i++)
                yg[i] = yg[i] * r * nw[i];
        }
        for (int i = 0; i < D && w->delta; i++)
            y[i] *= z[i] / (1.0f + expf(-z[i]));
    }
}

static void op_ssm(eng_backend *be, const eng_ssm *w, const float *z, float *xbc, const float *dt,
                   float *cache, int pos0, int rows, float *state, float *snap, int snap_t,
                   int n_tokens, float *out)
{
    if (!w || !w->conv || !w->dt_b || !w->a || (!w->d && !w->delta) || !z || !xbc || !dt ||
        !cache || !state || !out || pos0 < 0 || n_tokens <= 0 || w->d_conv < 1 ||
        w->d_conv - 1 + n_tokens > rows || w->n_head <= 0 || w->n_group <= 0 ||
        w->n_head % w->n_group || w->d_inner % w->n_head || w->d_inner % w->n_group ||
        w->d_state <= 0 || (w->delta && w->d_inner != w->n_head * w->d_state) ||
        (snap && (snap_t < 1 || snap_t > n_tokens)))
        return;
    cpu_ctx *c = ctx_of(be);
    const int nc = eng_ssm_conv_ch(w), hd = w->d_inner / w->n_head;
    for (int t = 0; t < n_tokens; t++)
        memcpy(cache + (size_t)((pos0 + t) % rows) * nc, xbc + (size_t)t * nc,
               (size_t)nc * sizeof(float));
    if (pos0 == 0) /* a context's first tokens start from nothing */
        memset(state, 0, (size_t)w->n_head * hd * w->d_state * sizeof(float));
    ssm_args a = { w, z, dt, cache, xbc, state, snap, out, pos0, rows, snap_t, n_tokens };
    const bool many = n_tokens > 1;
    run(c, ssm_conv_task, &a, many);
    run(c, w->delta ? delta_scan_task : ssm_scan_task, &a, (long)w->d_inner * w->d_state >= 16384);
    run(c, ssm_gate_task, &a, many);
}

/* On the caller's thread: n values a token, against the matrices around */
static void op_mul_sigmoid(eng_backend *be, float *x, const float *g, long n)
{
    (void)be;
    for (long i = 0; x && g && i < n; i++)
        x[i] /= 1.0f + expf(-g[i]);
}

/* On the caller's thread too: a token's P values (gemma4: 256) against
 * the two matrices around them */
static void op_gelu_mul(eng_backend *be, float *g, const float *x, int n_tokens, int n,
                        long x_stride)
{
    (void)be;
    for (int t = 0; t < n_tokens; t++)
        for (int i = 0; i < n; i++)
            g[(size_t)t * n + i] = gate_act(g[(size_t)t * n + i], ENG_ACT_GELU) *
                                   x[(size_t)t * x_stride + i];
}

/* ---- moe --------------------------------------------------------------------- */

/* A decode step's picked experts in one walk (one wake-up of the pool,
 * not one each): thread ith takes its share of each expert's slots as
 * ffn_part splits them, sums them into a partial past its accumulator in
 * its scratch, and adds that times the expert's weight. */
typedef struct moe_run {
    ffn_run r;                 /* x's forms (decode_prep), y, the first expert */
    const eng_ffn_weights *v;  /* [k] the experts' slots */
    const float *g;            /* [k] their weights */
    int k;
} moe_run;

static void moe_decode_task(void *p, int ith, int nth)
{
    moe_run *m = p;
    const long E = m->r.a.w->n_embd;
    float *s = thread_scratch(m->r.c, ith), *acc = ith == 0 ? m->r.a.y : s, *part = s + E;
    memset(acc, 0, (size_t)E * sizeof(float));
    for (int k = 0; k < m->k; k++) {
        ffn_args a = m->r.a;
        a.w = &m->v[k];
        a.n_sel = m->v[k].n_slots; /* (a shared expert's width is its own) */
        long b, e;
        eng_split((a.n_sel + 1) / 2, ith, nth, &b, &e);
        b *= 2;
        e = e * 2 < a.n_sel ? e * 2 : a.n_sel;
        if (b >= e)
            continue;
        memset(part, 0, (size_t)E * sizeof(float));
        m->r.c->k->ffn_fused(&a, b, e, part);
        for (long j = 0; j < E; j++)
            acc[j] += m->g[k] * part[j];
    }
}

enum {
    MOE_DECODE_MAX = 64,    /* experts a token picks, decoded in one walk */
    MOE_EXPERTS_MAX = 1024, /* experts a layer has (the loader's bound) */
};

/* Slots first .. first + n - 1 of w (expert e's: first e * F, n F; the
 * shared expert's after all of them). */
static eng_ffn_weights slot_run(const eng_ffn_weights *w, long first, int n)
{
    const size_t rb = eng_ffn_row_bytes(w->dtype, w->n_embd);
    const size_t rd = eng_ffn_down_bytes(w->dtype, w->n_embd);
    eng_ffn_weights v = *w;
    v.n_slots = n;
    v.gate_up = (const uint8_t *)w->gate_up + (size_t)first * (size_t)eng_ffn_rows(w) * rb;
    v.down = (const uint8_t *)w->down + (size_t)first * rd;
    v.sketch = NULL;
    v.bias = w->bias ? w->bias + 2 * first : NULL;
    return v;
}

/* The router's products on the pool (a matmul), the picks on the caller's
 * thread (n_expert values a token), then a decode step's experts in one
 * walk (moe_decode_task), or expert by expert: its tokens' rows gathered,
 * through ffn() over its slots, and added back weighted. */

/* A token's weight for the shared expert: sigmoid(gate . x), or 1. */
static float shared_weight(const eng_moe *moe, const float *x, long E)
{
    if (!moe->shared_gate)
        return 1.0f;
    double d = 0.0;
    for (long j = 0; j < E; j++)
        d += (double)moe->shared_gate[j] * x[j];
    return (float)(1.0 / (1.0 + exp(-d)));
}

static void op_moe(eng_backend *be, const eng_ffn_weights *w, const eng_moe *moe, const float *x,
                   const float *xr, float *y, int n_tokens, float *work)
{
    cpu_ctx *c = ctx_of(be);
    if (!w || !moe || !moe->router.data || !x || !y || !work || n_tokens <= 0 ||
        moe->n_expert < 2 || moe->n_expert > MOE_EXPERTS_MAX || moe->n_used < 1 ||
        moe->n_used > moe->n_expert ||
        moe->n_ff_exp < 1 || moe->n_ff_shared < 0 ||
        (long)moe->n_expert * moe->n_ff_exp + moe->n_ff_shared > w->n_slots ||
        moe->router.rows != moe->n_expert || moe->router.cols != w->n_embd ||
        !ffn_shape_ok(w))
        return;
    const int NE = moe->n_expert, K = moe->n_used, F = moe->n_ff_exp, n = n_tokens;
    const long E = w->n_embd;
    float *logits = work;                                    /* [n][NE] */
    int32_t *ids = (int32_t *)(logits + (size_t)n * NE);     /* [n][K]  */
    float *gw = (float *)(ids + (size_t)n * K);              /* [n][K]  */
    float *xe = gw + (size_t)n * K, *ye = xe + (size_t)n * E; /* [n][E]  */
    op_matmul(be, &moe->router, moe->router_bias, xr ? xr : x, logits, n);
    for (int t = 0; t < n; t++) {
        float *p = logits + (size_t)t * NE;
        if (moe->sigmoid) {
            for (int e = 0; e < NE; e++)
                p[e] = 1.0f / (1.0f + expf(-p[e]));
        } else {
            float mx = p[0], sum = 0.0f;
            for (int e = 1; e < NE; e++)
                mx = p[e] > mx ? p[e] : mx;
            for (int e = 0; e < NE; e++)
                sum += p[e] = expf(p[e] - mx);
            for (int e = 0; e < NE; e++)
                p[e] /= sum;
        }
        /* the K largest of p + bias, each marked taken once picked */
        uint8_t taken[MOE_EXPERTS_MAX] = { 0 };
        float gsum = 0.0f;
        for (int k = 0; k < K; k++) {
            int best = -1;
            float bv = 0.0f;
            for (int e = 0; e < NE; e++) {
                const float v = p[e] + (moe->bias ? moe->bias[e] : 0.0f);
                if (!taken[e] && (best < 0 || v > bv))
                    best = e, bv = v;
            }
            taken[best] = 1;
            ids[(size_t)t * K + k] = best;
            gsum += gw[(size_t)t * K + k] = p[best];
        }
        /* (llama.cpp's floor on the sum: the smallest normal f16) */
        const float div = moe->norm ? (gsum > 6.103515625e-5f ? gsum : 6.103515625e-5f) : 1.0f;
        for (int k = 0; k < K; k++)
            gw[(size_t)t * K + k] = gw[(size_t)t * K + k] / div * moe->scale;
    }
    /* the shared expert's slots */
    const int S = moe->n_ff_shared;
    const eng_ffn_weights vs = slot_run(w, (long)NE * F, S);
    eng_ffn_weights v[MOE_DECODE_MAX];
    if (n == 1 && K + (S > 0) <= MOE_DECODE_MAX && 2 * E <= SCRATCH_FLOATS && !w->bias &&
        w->act != ENG_ACT_SWIGLU_OAI && w->dtype != ENG_DTYPE_MXFP4) {
        /* decode: the K experts (and the shared one) in one walk (not
         * gpt-oss's, whose biases the fused kernels do not take) */
        float g[MOE_DECODE_MAX];
        for (int k = 0; k < K; k++) {
            v[k] = slot_run(w, (long)ids[k] * F, F);
            g[k] = gw[k];
        }
        if (S > 0) {
            v[K] = vs;
            g[K] = shared_weight(moe, x, E);
        }
        moe_run mr = { .r = { .a = { &v[0], NULL, F, x, y, NULL, 1, NULL }, .c = c },
                       .v = v, .g = g, .k = K + (S > 0) };
        x16_row xr;
        decode_prep(c, &mr.r, &xr);
        const bool par = (long)K * F * E * 3 >= 16384;
        run(c, moe_decode_task, &mr, par);
        for (int i = 1; i < (par && c->n_threads > 1 ? c->n_threads : 1); i++)
            c->k->add(y, thread_scratch(c, i), E);
        return;
    }
    /* the logits are spent: each expert's token list and weights there */
    int32_t *tok = (int32_t *)logits;
    float *tw = logits + n;
    memset(y, 0, (size_t)n * E * sizeof(float));
    for (int e = 0; e < NE; e++) {
        int ne = 0;
        for (int t = 0; t < n; t++)
            for (int k = 0; k < K; k++)
                if (ids[(size_t)t * K + k] == e) {
                    tok[ne] = t;
                    tw[ne] = gw[(size_t)t * K + k];
                    memcpy(xe + (size_t)ne++ * E, x + (size_t)t * E, (size_t)E * sizeof(float));
                }
        if (ne == 0)
            continue;
        const eng_ffn_weights ve = slot_run(w, (long)e * F, F);
        op_ffn(be, &ve, NULL, F, xe, ye, ne, NULL);
        const float *db = moe->down_bias ? moe->down_bias + (size_t)e * E : NULL;
        for (int i = 0; i < ne; i++) {
            float *yt = y + (size_t)tok[i] * E;
            const float *src = ye + (size_t)i * E;
            for (long j = 0; j < E; j++)
                yt[j] += tw[i] * (db ? src[j] + db[j] : src[j]);
        }
    }
    if (S == 0)
        return;
    /* the shared expert: every token (ye holds n rows) */
    op_ffn(be, &vs, NULL, S, x, ye, n, NULL);
    for (int t = 0; t < n; t++) {
        const float g = shared_weight(moe, x + (size_t)t * E, E);
        for (long j = 0; j < E; j++)
            y[(size_t)t * E + j] += g * ye[(size_t)t * E + j];
    }
}

/* ---- topk_count ------------------------------------------------------------ */

/* The reference for GPUs: topk.h's counting, the very code the engine's host
 * path runs, on the caller's thread. The per-token selection needs n_sel
 * words of scratch: all threads' scratch is free between ops, which covers
 * any real FFN width; beyond it, a buffer of its own (and when even that
 * fails, nothing is counted, rather than a crash). */
static void op_topk_count(eng_backend *be, const float *act, int n_tokens, int n_sel, float alpha,
                          bool signed_rank, uint32_t *counts)
{
    cpu_ctx *c = ctx_of(be);
    if (!act || !counts || n_tokens <= 0 || n_sel <= 0 || !(alpha > 0.0f && alpha <= 1.0f))
        return;
    float *tmp = c->scratch, *own = NULL;
    if ((size_t)n_sel > (size_t)c->n_threads * SCRATCH_FLOATS &&
        !(tmp = own = malloc((size_t)n_sel * sizeof(float))))
        return;
    eng__topk_count(act, n_tokens, n_sel, alpha, signed_rank, tmp, NULL, counts);
    free(own);
}

/* ---- memory: backend memory is host memory ------------------------------ */

/* Buffers of MEM_MAP_MIN bytes and more are mappings of their own, so that
 * freed weights (a model, a hot-swap's old layers) go back to the kernel at
 * once. From malloc they came out of its heap whenever they fell under
 * glibc's mmap threshold (128 KiB, and raised to the size of every mapped
 * chunk freed): they stayed resident after a free, and a later load reused
 * them unseen by VmRSS. And scratch never touched is never resident.
 * Smaller buffers come from malloc. A header of one cache line before the
 * buffer says which, and the mapping's length; the buffer itself starts on
 * a cache line (64-byte alignment: whole lines for the SIMD kernels). */
enum { MEM_HDR = 64, MEM_MAP_MIN = 64 * 1024, MEM_MAGIC = 0x5e1ec7 };

typedef struct mem_hdr {
    size_t len;      /* of the mapping; 0: malloc'd */
    uint32_t magic;
} mem_hdr;

static int mem_alloc(eng_backend *be, size_t bytes, void **ret)
{
    (void)be;
    const size_t need = (bytes ? (bytes + 63) & ~(size_t)63 : 64) + MEM_HDR;
    if (need < bytes)
        return -ENOMEM; /* overflow */
    mem_hdr *h;
#if defined(__SANITIZE_ADDRESS__)
    const bool map = false; /* malloc's buffers, whose overruns ASan sees */
#else
    const bool map = need >= MEM_MAP_MIN;
#endif
    if (map) {
        void *p = mmap(NULL, need, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        if (p == MAP_FAILED)
            return -ENOMEM;
        h = p;
        h->len = need;
    } else {
        if (!(h = aligned_alloc(64, need)))
            return -ENOMEM;
        h->len = 0;
    }
    h->magic = MEM_MAGIC;
    *ret = (char *)h + MEM_HDR;
    return 0;
}

static void mem_free(eng_backend *be, void *p)
{
    (void)be;
    if (!p)
        return;
    mem_hdr *h = (mem_hdr *)((char *)p - MEM_HDR);
    if (h->magic != MEM_MAGIC)
        return; /* not ours: leaking beats freeing what malloc never gave */
    h->magic = 0;
    if (h->len)
        munmap(h, h->len);
    else
        free(h);
}

static void mem_info(eng_backend *be, size_t *ret_free, size_t *ret_total)
{
    *ret_free = 0;
    *ret_total = 0;
}

static void mem_copy(eng_backend *be, void *dst, const void *src, size_t bytes)
{
    if (dst != src && bytes)
        memcpy(dst, src, bytes);
}

static void mem_upload_rows(eng_backend *be, void *dst, const int32_t *rows, const void *src,
                            int n, size_t row_bytes)
{
    for (int i = 0; i < n; i++)
        memcpy((uint8_t *)dst + (size_t)rows[i] * row_bytes,
               (const uint8_t *)src + (size_t)i * row_bytes, row_bytes);
}

static int mem_sync(eng_backend *be)
{
    return 0;
}

static const char *mem_error(eng_backend *be)
{
    return "";
}

/* ---- construction ------------------------------------------------------- */

static void op_free(eng_backend *be);

static const eng_backend_iface cpu_iface = {
    .name = "cpu",
    .free = op_free,
    .host_memory = true,
    .dtypes = 1u << ENG_DTYPE_F16 | 1u << ENG_DTYPE_F32 | 1u << ENG_DTYPE_Q8_0 |
              1u << ENG_DTYPE_Q4_K | 1u << ENG_DTYPE_Q5_K | 1u << ENG_DTYPE_Q6_K |
              1u << ENG_DTYPE_Q4_1 | 1u << ENG_DTYPE_Q4_0 | 1u << ENG_DTYPE_MXFP4,
    .alloc = mem_alloc,
    .mem_free = mem_free,
    .mem_info = mem_info,
    .upload = mem_copy,
    .upload_rows = mem_upload_rows,
    .download = mem_copy,
    .copy = mem_copy,
    .sync = mem_sync,
    .error = mem_error,
    .get_rows = op_get_rows,
    .matmul = op_matmul,
    .matmul3 = op_matmul3,
    .rmsnorm = op_rmsnorm,
    .rope = op_rope,
    .attention = op_attention,
    .ffn = op_ffn,
    .add = op_add,
    .scale = op_scale,
    .softcap = op_softcap,
    .store_f16 = op_store_f16,
    .store_kv = op_store_kv,
    .store_kv_q8 = op_store_kv_q8,
    .attention_q8 = op_attention_q8,
    .shortconv = op_shortconv,
    .ssm = op_ssm,
    .mul_sigmoid = op_mul_sigmoid,
    .gelu_mul = op_gelu_mul,
    .moe = op_moe,
    .topk_count = op_topk_count,
    .ffn_pick = op_ffn_pick,
    .ffn_top = op_ffn_top,
    .build_sketch = op_build_sketch,
    .ffn_runs = op_ffn_runs,
};

static void op_free(eng_backend *be)
{
    if (!be)
        return;
    cpu_ctx *c = ctx_of(be);
    eng_threadpool_free(c->pool);
    free(c->rope.tab);
    free(c->gather);
    mem_free(be, c->scratch);
    mem_free(be, c->abuf);
    mem_free(be, c->xq);
    mem_free(be, c->xds);
    free(c);
}

static const kernels *pick_kernels(void)
{
    const char *env = getenv("ENG_CPU_SIMD");
    if (env && env[0] == '0')
        return &kern_scalar;
#if HAVE_X86
    __builtin_cpu_init();
    if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") &&
        __builtin_cpu_supports("f16c")) {
        /* ENG_CPU_SIMD=avx2: the AVX2 set on an AVX-512 machine (tests) */
        if ((!env || strcmp(env, "avx2") != 0) && __builtin_cpu_supports("avx512f") &&
            __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512vl") &&
            __builtin_cpu_supports("avx512vnni"))
            return &kern_avx512;
        return &kern_avx2;
    }
#endif
#if HAVE_NEON
    return &kern_neon;
#else
    return &kern_scalar;
#endif
}

int eng_backend_cpu_new(int n_threads, eng_backend **ret_backend)
{
    if (!ret_backend)
        return -EINVAL;
    if (n_threads <= 0) {
        long n = sysconf(_SC_NPROCESSORS_ONLN);
        n_threads = n > 0 ? (int)n : 1;
    }
    if (n_threads > MAX_THREADS)
        n_threads = MAX_THREADS;

    cpu_ctx *c = calloc(1, sizeof(*c));
    if (!c)
        return -ENOMEM;
    c->be.iface = &cpu_iface;
    c->be.ctx = c;
    c->n_threads = n_threads;
    c->k = pick_kernels();
    /* mappings (mem_alloc): pages become resident as prefill first uses
     * them, not at load (4.5 MB with two threads, most of it abuf) */
    void *scratch = NULL, *abuf = NULL;
    int r = mem_alloc(&c->be, (size_t)n_threads * SCRATCH_FLOATS * sizeof(float), &scratch);
    if (r == 0)
        r = mem_alloc(&c->be, (size_t)ABUF_FLOATS * sizeof(float), &abuf);
    c->scratch = scratch;
    c->abuf = abuf;
    void *xq = NULL, *xds = NULL;
    if (r == 0 && c->k->mm6x32_u8)
        r = mem_alloc(&c->be, XQ_BYTES, &xq);
    if (r == 0 && c->k->mm6x32_u8)
        r = mem_alloc(&c->be, XQ_BYTES / 4, &xds);
    c->xq = xq;
    c->xds = xds;
    if (r == 0)
        r = eng_threadpool_new(n_threads, &c->pool);
    if (r < 0) {
        mem_free(&c->be, c->scratch);
        mem_free(&c->be, c->abuf);
        mem_free(&c->be, c->xq);
        mem_free(&c->be, c->xds);
        free(c);
        return r;
    }
    *ret_backend = &c->be;
    return 0;
}

int eng_backend_cpu_n_threads(const eng_backend *be)
{
    if (!be || be->iface != &cpu_iface)
        return -EINVAL;
    return ((const cpu_ctx *)be->ctx)->n_threads;
}

int eng_backend_cpu_set_prefill_q8(eng_backend *be, bool on)
{
    if (!be || be->iface != &cpu_iface)
        return -EINVAL;
    ((cpu_ctx *)be->ctx)->prefill_q8 = on;
    return 0;
}

bool eng__backend_cpu_prefill_q8(const eng_backend *be, eng_dtype dt)
{
    return be && be->iface == &cpu_iface && u8_rows(be->ctx, dt);
}

/* Which kernel set this backend uses ("avx512vnni", "avx2", "neon" or
 * "scalar"); for tests and tools. */
const char *eng__backend_cpu_kernels(const eng_backend *be)
{
    if (!be || be->iface != &cpu_iface)
        return NULL;
    return ((const cpu_ctx *)be->ctx)->k->name;
}
