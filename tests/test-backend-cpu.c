/* CPU backend: every op against a naive double-precision reference written
 * here, on random data with odd sizes, both weight dtypes, 1-3 threads, and
 * every kernel set the machine has: the best (AVX-512 VNNI where there is
 * one), AVX2 (ENG_CPU_SIMD=avx2) and scalar (ENG_CPU_SIMD=0); on AArch64,
 * NEON and scalar.
 *
 * Error bounds (per element, stated against magnitudes so they hold for any
 * size; a real bug is off by O(1)):
 *   get_rows, add: exact.   store_f16: bit-exact round-to-nearest-even.
 *   matmul: |y - ref| <= 3e-5 * sum_k |w_k x_k| + 1e-6 * |bias|; decode in
 *           Q8_0 + sum_b max_b|x| / 65534 * sum_(k in b) |w_k| (x in 16 bits
 *           a block b of 32), in Q4_K the same over blocks of 256 and
 *           max_b|x| / 65278 (q within +-32639, two signed bytes)
 *           Q4_K: sum_k over (|d sc q_k| + |dmin m|) |x_k| (the kernels
 *           take the mins off apart)
 *   matmul3: bit for bit three matmuls
 *   rmsnorm: |y - ref| <= 2e-6 * |ref| + 1e-7
 *   rope: |y - ref| <= 3e-6 * (|x0| + |x1|)  (theta in double, cos/sin in float)
 *   attention: |out - ref| <= 2e-5 * max|v| (+ scores' error: 3e-5 * sum|q k|),
 *              over an f16 cache and a Q8_0 one (against its exact values;
 *              + max|q| / 65534 * sum|k| for q rounded to 16 bits)
 *   store_kv_q8: ggml's Q8_0 rule, d within f16 rounding of max|x| / 127
 *   ffn: a_j within 2e-5 * mag_j, y within 2e-5 * sum_j |a_j d_j| + sum_j
 *        tol(a_j) |d_j|, where mag_j bounds how float dot errors propagate
 *        through silu(g) * u; decode in Q8_0 adds x's 16-bit rounding to
 *        the errors of g and u, as for matmul; Q4_K gate and up rows
 *        (Q8_0 down rows) count their terms' magnitudes, as for matmul.
 * Unselected FFN slots hold NaN, so using (not just reading) any weight of
 * a slot outside sel shows up as NaN in y.
 */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend.h"
#include "gguf.h"   /* GGML_TYPE_Q4_K */
#include "quants.h" /* eng_dequant_row_f32: test_sketch_q4k's rows */
#include "si-util.h" /* si_proc_status_bytes */


static int n_fail;

/* The FFN activation the ffn tests give their weights (each runs under
 * both), and its value in double: silu, or GELU's tanh form as Gemma's
 * reference writes it. */
static eng_act g_act = ENG_ACT_SILU;
/* and whether they have biases (gpt-oss's experts, which g_act
 * ENG_ACT_SWIGLU_OAI goes with): the ffn and moe tests' own */
static bool g_bias;
static double act_ref(double g)
{
    if (g_act == ENG_ACT_SWIGLU_OAI) /* (its gate's half: x = min(g, 7)) */
        return fmin(g, 7) / (1 + exp(-1.702 * fmin(g, 7)));
    if (g_act == ENG_ACT_GELU)
        /* 0.5 g (1 + tanh u) as g / (1 + e^-2u), which keeps its digits
         * where tanh u rounds to -1 */
        return g / (1 + exp(-2 * 0.7978845608028654 * (g + 0.044715 * g * g * g)));
    return g / (1 + exp(-g));
}
/* Rows of a slot under g_act (2: gate, up; 1: ENG_ACT_RELU_SQR's up row
 * alone), and the up row's offset in elements, rows n_embd wide. */
static long g_rows(void)
{
    return g_act == ENG_ACT_RELU_SQR ? 1 : 2;
}
static long g_uo(long E)
{
    return g_act == ENG_ACT_RELU_SQR ? 0 : E;
}
static const char *cur_cfg = "";

#define CHECK(cond, ...)                                                                     \
    do {                                                                                     \
        if (!(cond)) {                                                                       \
            if (n_fail < 30) {                                                               \
                fprintf(stderr, "FAIL [%s] %s:%d: ", cur_cfg, __FILE__, __LINE__);           \
                fprintf(stderr, __VA_ARGS__);                                                \
                fprintf(stderr, "\n");                                                       \
            }                                                                                \
            n_fail++;                                                                        \
        }                                                                                    \
    } while (0)

/* ---- helpers ----------------------------------------------------------- */

static uint64_t rng_state = 0x9e3779b97f4a7c15ull;

static uint64_t rnd(void)
{
    uint64_t x = rng_state;
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    return rng_state = x;
}

static float frand(float lo, float hi)
{
    return lo + (hi - lo) * (float)((rnd() >> 11) * 0x1p-53);
}

static int irand(int n)
{
    return (int)(rnd() % (uint64_t)n);
}

/* Exact half -> double, independent of the engine's code. */
static double h2d(uint16_t h)
{
    int s = h >> 15, e = (h >> 10) & 0x1f, m = h & 0x3ff;
    double v;
    if (e == 0)
        v = ldexp(m, -24);
    else if (e == 31)
        v = m ? NAN : INFINITY;
    else
        v = ldexp(1024 + m, e - 25);
    return s ? -v : v;
}

/* Nearest half to f, ties to even, found by bisection over the ordered
 * positive half values (no bit tricks shared with the implementation). */
static uint16_t ref_f2h(float f)
{
    if (isnan(f))
        return 0x7e00;
    uint16_t sign = signbit(f) ? 0x8000 : 0;
    double a = fabs((double)f);
    if (a >= 65520.0) /* 65504 + half an ulp (16): ties go to even = inf */
        return sign | 0x7c00;
    int lo = 0, hi = 0x7bff; /* largest finite */
    while (lo < hi) {        /* largest h with h2d(h) <= a */
        int mid = (lo + hi + 1) / 2;
        if (h2d((uint16_t)mid) <= a)
            lo = mid;
        else
            hi = mid - 1;
    }
    int h = lo;
    if (h < 0x7bff) {
        double d0 = a - h2d((uint16_t)h), d1 = h2d((uint16_t)(h + 1)) - a;
        if (d1 < d0 || (d1 == d0 && (h & 1)))
            h++;
    } else if (a - h2d(0x7bff) > 0) {
        /* between 65504 and 65520: rounds down */
    }
    return sign | (uint16_t)h;
}

/* Random half in [lo, hi) by truncation (fast; only data generation). */
static uint16_t rand_half(float lo, float hi)
{
    float f = frand(lo, hi);
    uint32_t x;
    memcpy(&x, &f, 4);
    uint16_t sign = (uint16_t)((x >> 16) & 0x8000);
    int e = (int)((x >> 23) & 0xff) - 112;
    if (e <= 0)
        return sign;
    return sign | (uint16_t)(e << 10) | (uint16_t)((x >> 13) & 0x3ff);
}

/* Weight buffer of rows x cols in dtype, filled in [-1, 1). */
/* n a multiple of 32 for Q8_0: blocks of codes in [-127, 127] and scales
 * of either sign */
static void *make_weights(eng_dtype dt, long n)
{
    if (dt == ENG_DTYPE_Q4_K) {
        /* random scale bytes cover every 6-bit scale and min */
        eng_q4k_block *b = malloc((size_t)(n / 256 > 0 ? n / 256 : 1) * sizeof(*b));
        for (long i = 0; i < n / 256; i++) {
            b[i].d = rand_half(0.0001f, 0.0005f);
            b[i].dmin = rand_half(0.0001f, 0.0005f);
            for (int j = 0; j < 12; j++)
                b[i].scales[j] = (uint8_t)irand(256);
            for (int j = 0; j < 128; j++)
                b[i].qs[j] = (uint8_t)irand(256);
        }
        return b;
    }
    if (dt == ENG_DTYPE_Q5_K) {
        /* as Q4_K, and every fifth bit */
        eng_q5k_block *b = malloc((size_t)(n / 256 > 0 ? n / 256 : 1) * sizeof(*b));
        for (long i = 0; i < n / 256; i++) {
            b[i].d = rand_half(0.0001f, 0.0005f);
            b[i].dmin = rand_half(0.0001f, 0.0005f);
            for (int j = 0; j < 12; j++)
                b[i].scales[j] = (uint8_t)irand(256);
            for (int j = 0; j < 32; j++)
                b[i].qh[j] = (uint8_t)irand(256);
            for (int j = 0; j < 128; j++)
                b[i].qs[j] = (uint8_t)irand(256);
        }
        return b;
    }
    if (dt == ENG_DTYPE_Q6_K) {
        /* every code and signed scale byte */
        eng_q6k_block *b = malloc((size_t)(n / 256 > 0 ? n / 256 : 1) * sizeof(*b));
        for (long i = 0; i < n / 256; i++) {
            b[i].d = rand_half(0.0001f, 0.0005f);
            for (int j = 0; j < 16; j++)
                b[i].scales[j] = (int8_t)(irand(256) - 128);
            for (int j = 0; j < 128; j++)
                b[i].ql[j] = (uint8_t)irand(256);
            for (int j = 0; j < 64; j++)
                b[i].qh[j] = (uint8_t)irand(256);
        }
        return b;
    }
    if (dt == ENG_DTYPE_Q4_1) {
        /* every code; d > 0 and m of either sign, as a file's (m the
         * block's least value) */
        eng_q41_block *b = malloc((size_t)(n / 32 > 0 ? n / 32 : 1) * sizeof(*b));
        for (long i = 0; i < n / 32; i++) {
            b[i].d = rand_half(0.001f, 0.01f);
            b[i].m = rand_half(-0.08f, 0.02f);
            for (int j = 0; j < 16; j++)
                b[i].qs[j] = (uint8_t)irand(256);
        }
        return b;
    }
    if (dt == ENG_DTYPE_Q4_0) {
        /* every code; d of either sign, as a file's */
        eng_q40_block *b = malloc((size_t)(n / 32 > 0 ? n / 32 : 1) * sizeof(*b));
        for (long i = 0; i < n / 32; i++) {
            b[i].d = rand_half(-0.01f, 0.01f);
            for (int j = 0; j < 16; j++)
                b[i].qs[j] = (uint8_t)irand(256);
        }
        return b;
    }
    if (dt == ENG_DTYPE_MXFP4) {
        /* every code; scales 2^-11 .. 2^-5 (e 117 .. 123), as trained
         * weights' */
        eng_mxfp4_block *b = malloc((size_t)(n / 32 > 0 ? n / 32 : 1) * sizeof(*b));
        for (long i = 0; i < n / 32; i++) {
            b[i].e = (uint8_t)(117 + irand(7));
            for (int j = 0; j < 16; j++)
                b[i].qs[j] = (uint8_t)irand(256);
        }
        return b;
    }
    if (dt == ENG_DTYPE_Q8_0) {
        eng_q8_block *b = malloc((size_t)(n / 32 > 0 ? n / 32 : 1) * sizeof(*b));
        for (long i = 0; i < n / 32; i++) {
            b[i].d = rand_half(-0.01f, 0.01f);
            for (int j = 0; j < 32; j++)
                b[i].q[j] = (int8_t)(irand(255) - 127);
        }
        return b;
    }
    if (dt == ENG_DTYPE_F16) {
        uint16_t *p = malloc((size_t)n * 2);
        for (long i = 0; i < n; i++)
            p[i] = rand_half(-1, 1);
        return p;
    }
    float *p = malloc((size_t)n * 4);
    for (long i = 0; i < n; i++)
        p[i] = frand(-1, 1);
    return p;
}

/* Decode's x in 16 bits: blocks of 32 (Q8_0's kernels) or 256 (Q4_K's,
 * Q5_K's and Q6_K's), each element within max_b|x| times this of x */
static int x16_block(eng_dtype dt)
{
    return eng_dtype_block(dt) == 256 ? 256 : 32;
}

static double x16_unit(eng_dtype dt)
{
    return eng_dtype_block(dt) == 256 ? 1.0 / 65278 : 1.0 / 65534;
}

/* How x reaches dt's products over nt tokens: decode of a block type in
 * 16 bits a block of x16_block(dt); a prefill of Q8_0, Q4_1, Q4_0, Q4_K or
 * Q5_K in 8 bits a block of 32 where the backend says so (its VNNI kernels,
 * prefill_q8 on) and the shape allows (fits: the FFN's rows up to 4096
 * wide): |x~ - x| <= max_b |x| * unit. *blk: the block; 0: x in f32. */
static double x_unit(eng_backend *be, eng_dtype dt, int nt, bool fits, int *blk)
{
    *blk = 0;
    if (nt == 1 && eng_dtype_block(dt) > 1) {
        *blk = x16_block(dt);
        return x16_unit(dt);
    }
    if (nt > 1 && fits && eng__backend_cpu_prefill_q8(be, dt)) {
        *blk = 32;
        return 1.0 / 254;
    }
    return 0;
}

/* Q6_K element i, d * scale * (u - 32), as ggml's dequantizer walks a
 * half of 128: for l < 32, element 32 k + l takes ql[l + 32 (k & 1)]'s
 * low nibble (k < 2) or high one, and qh[l]'s bits 2k, 2k + 1 */
static double q6k_get(const void *p, long i)
{
    const eng_q6k_block *b = (const eng_q6k_block *)p + i / 256;
    const int e = (int)(i % 256), h = e / 128, k = e % 128 / 32, l = e % 32;
    const uint8_t lb = b->ql[64 * h + l + 32 * (k & 1)];
    const int lo = k < 2 ? lb & 15 : lb >> 4;
    const int hi = (b->qh[32 * h + l] >> (2 * k)) & 3;
    return h2d(b->d) * b->scales[e / 16] * ((lo | hi << 4) - 32);
}

/* Q4_K (or Q5_K) element i's two terms, d * sc * q and dmin * m (written
 * out here from ggml's layout, not taken from the engine): a Q5_K code's
 * fifth bit is bit j of qh[l] */
static void qk_terms(eng_dtype dt, const void *p, long i, double *dq, double *dm)
{
    const bool q5 = dt == ENG_DTYPE_Q5_K;
    const eng_q4k_block *b4 = (const eng_q4k_block *)p + i / 256;
    const eng_q5k_block *b5 = (const eng_q5k_block *)p + i / 256;
    const int e = (int)(i % 256), j = e / 32, l = e % 32;
    const uint8_t *s = q5 ? b5->scales : b4->scales;
    const int sc = j < 4 ? s[j] & 63 : (s[j + 4] & 15) | (s[j - 4] >> 6) << 4;
    const int m = j < 4 ? s[j + 4] & 63 : (s[j + 4] >> 4) | (s[j] >> 6) << 4;
    const uint8_t byte = (q5 ? b5->qs : b4->qs)[32 * (j / 2) + l];
    int q = j % 2 ? byte >> 4 : byte & 15;
    if (q5)
        q += (b5->qh[l] >> j & 1) * 16;
    *dq = h2d(q5 ? b5->d : b4->d) * sc * q;
    *dm = h2d(q5 ? b5->dmin : b4->dmin) * m;
}

/* Q4_1 element i's two terms, d * q and m: q the low nibble of qs[i %
 * 32] for i % 32 < 16, the high one of qs[i % 32 - 16] past; Q4_0's, d * q
 * and -8 d (the kernels sum the two apart, as Q4_1's) */
static void q41_terms(eng_dtype dt, const void *p, long i, double *dq, double *m)
{
    const int e = (int)(i % 32);
    if (dt == ENG_DTYPE_Q4_0) {
        const eng_q40_block *b = (const eng_q40_block *)p + i / 32;
        *dq = h2d(b->d) * (e < 16 ? b->qs[e] & 15 : b->qs[e - 16] >> 4);
        *m = -8 * h2d(b->d);
        return;
    }
    const eng_q41_block *b = (const eng_q41_block *)p + i / 32;
    *dq = h2d(b->d) * (e < 16 ? b->qs[e] & 15 : b->qs[e - 16] >> 4);
    *m = h2d(b->m);
}

/* |w_i|, or for Q4_K and Q4_1 the sum of its terms' magnitudes (the
 * kernels sum the two apart, so their rounding scales with both) */
static double wmag(eng_dtype dt, const void *p, long i);

static double wget(eng_dtype dt, const void *p, long i)
{
    if (dt == ENG_DTYPE_Q6_K)
        return q6k_get(p, i);
    if (dt == ENG_DTYPE_Q4_K || dt == ENG_DTYPE_Q5_K) {
        double dq, dm;
        qk_terms(dt, p, i, &dq, &dm);
        return dq - dm;
    }
    if (dt == ENG_DTYPE_Q4_1 || dt == ENG_DTYPE_Q4_0) {
        double dq, m;
        q41_terms(dt, p, i, &dq, &m);
        return dq + m;
    }
    if (dt == ENG_DTYPE_Q8_0) {
        const eng_q8_block *b = (const eng_q8_block *)p + i / 32;
        return h2d(b->d) * b->q[i % 32];
    }
    if (dt == ENG_DTYPE_MXFP4) { /* level * 2^(e - 128), from the format's own definition */
        static const double e2m1[8] = { 0, 0.5, 1, 1.5, 2, 3, 4, 6 };
        const eng_mxfp4_block *b = (const eng_mxfp4_block *)p + i / 32;
        const int c = i % 32 < 16 ? b->qs[i % 32] & 15 : b->qs[i % 32 - 16] >> 4;
        return (c & 8 ? -1 : 1) * e2m1[c & 7] * ldexp(1.0, b->e - 127);
    }
    return dt == ENG_DTYPE_F16 ? h2d(((const uint16_t *)p)[i]) : ((const float *)p)[i];
}

static double wmag(eng_dtype dt, const void *p, long i)
{
    if (dt == ENG_DTYPE_Q4_K || dt == ENG_DTYPE_Q5_K) {
        double dq, dm;
        qk_terms(dt, p, i, &dq, &dm);
        return fabs(dq) + fabs(dm);
    }
    if (dt == ENG_DTYPE_Q4_1 || dt == ENG_DTYPE_Q4_0) {
        double dq, m;
        q41_terms(dt, p, i, &dq, &m);
        return fabs(dq) + fabs(m);
    }
    return fabs(wget(dt, p, i));
}

/* The weights as doubles, converted once (h2d is slow in inner loops). */
static double *to_double(eng_dtype dt, const void *p, long n)
{
    double *d = malloc(sizeof(double) * (size_t)(n > 0 ? n : 1));
    for (long i = 0; i < n; i++)
        d[i] = wget(dt, p, i);
    return d;
}

/* Element i NaN; for Q8_0 and Q4_K its whole block (the scale) */
static void wset_nan(eng_dtype dt, void *p, long i)
{
    if (dt == ENG_DTYPE_Q4_K)
        ((eng_q4k_block *)p)[i / 256].d = 0x7e00;
    else if (dt == ENG_DTYPE_Q6_K)
        ((eng_q6k_block *)p)[i / 256].d = 0x7e00;
    else if (dt == ENG_DTYPE_Q5_K)
        ((eng_q5k_block *)p)[i / 256].d = 0x7e00;
    else if (dt == ENG_DTYPE_Q8_0)
        ((eng_q8_block *)p)[i / 32].d = 0x7e00;
    else if (dt == ENG_DTYPE_Q4_1)
        ((eng_q41_block *)p)[i / 32].d = 0x7e00;
    else if (dt == ENG_DTYPE_Q4_0)
        ((eng_q40_block *)p)[i / 32].d = 0x7e00;
    else if (dt == ENG_DTYPE_MXFP4) /* (no NaN: 2^127, whose products overflow) */
        ((eng_mxfp4_block *)p)[i / 32].e = 255;
    else if (dt == ENG_DTYPE_F16)
        ((uint16_t *)p)[i] = 0x7e00;
    else
        ((float *)p)[i] = NAN;
}

static float *make_f32(long n, float lo, float hi)
{
    float *p = malloc((size_t)(n > 0 ? n : 1) * 4);
    for (long i = 0; i < n; i++)
        p[i] = frand(lo, hi);
    return p;
}

/* ---- ops ----------------------------------------------------------------- */

static void test_get_rows(eng_backend *be, eng_dtype dt)
{
    int rows = 37, cols = eng_dtype_block(dt) == 32 ? 96 : eng_dtype_block(dt) == 256 ? 512 : 100, n = 9;
    void *w = make_weights(dt, (long)rows * cols);
    eng_weight W = { dt, rows, cols, w };
    int32_t ids[9] = { 0, 36, 5, 5, -1, 37, 12, 1000000, 20 };
    float *out = make_f32((long)n * cols, 7, 8);
    be->iface->get_rows(be, &W, ids, n, out);
    for (int t = 0; t < n; t++)
        for (int c = 0; c < cols; c++) {
            double ref = (ids[t] >= 0 && ids[t] < rows) ? wget(dt, w, (long)ids[t] * cols + c) : 0.0;
            CHECK(out[(long)t * cols + c] == (float)ref, "get_rows %s t=%d c=%d: %g vs %g",
                  eng_dtype_name(dt), t, c, out[(long)t * cols + c], ref);
        }
    free(w);
    free(out);
}

static void test_matmul_one(eng_backend *be, eng_dtype dt, int rows, int cols, int nt, bool bias)
{
    void *w = make_weights(dt, (long)rows * cols);
    eng_weight W = { dt, rows, cols, w };
    float *x = make_f32((long)nt * cols, -1, 1);
    float *b = bias ? make_f32(rows, -2, 2) : NULL;
    float *y = make_f32((long)nt * rows, 1e30f, 1e30f);
    be->iface->matmul(be, &W, b, x, y, nt);
    double *wd = to_double(dt, w, (long)rows * cols);
    double *wm = malloc(sizeof(double) * (size_t)rows * cols);
    for (long i = 0; i < (long)rows * cols; i++)
        wm[i] = wmag(dt, w, i);
    int bad = 0, xb;
    const double xu = x_unit(be, dt, nt, true, &xb);
    for (int t = 0; t < nt; t++)
        for (int r = 0; r < rows; r++) {
            double ref = 0, mag = 0;
            for (int k = 0; k < cols; k++) {
                double p = wd[(long)r * cols + k] * x[(long)t * cols + k];
                ref += p;
                mag += wm[(long)r * cols + k] * fabs(x[(long)t * cols + k]);
            }
            if (b)
                ref += b[r];
            double got = y[(long)t * rows + r];
            double tol = 3e-5 * mag + (b ? 1e-6 * fabs(b[r]) : 0) + 1e-30;
            /* decode may round x to 16 bits a block (Q4_K: against the
             * codes' term, within the magnitudes), prefill to 8 */
            for (int k0 = 0; xb && k0 < cols; k0 += xb) {
                double xm = 0, wa = 0;
                for (int k = k0; k < k0 + xb; k++) {
                    xm = fmax(xm, fabs(x[(long)t * cols + k]));
                    wa += wm[(long)r * cols + k];
                }
                tol += wa * xm * xu * 1.001;
            }
            if (!(fabs(got - ref) <= tol) && bad++ < 3)
                CHECK(0, "matmul %s %dx%d nt=%d bias=%d t=%d r=%d: %.9g vs %.9g (tol %.3g)",
                      eng_dtype_name(dt), rows, cols, nt, bias, t, r, got, ref, tol);
        }
    if (bad)
        n_fail++;
    free(wd);
    free(wm);
    free(w);
    free(x);
    free(b);
    free(y);
}

/* A NaN or an infinity in one token's x reaches that token's outputs (as
 * NaN or infinite), in f32 and in the 8-bit prefill alike, and no other
 * token's. */
static void test_matmul_nonfinite(eng_backend *be, eng_dtype dt)
{
    const int rows = 40, cols = eng_dtype_block(dt) == 256 ? 512 : 96, nt = 7;
    void *w = make_weights(dt, (long)rows * cols);
    eng_weight W = { dt, rows, cols, w };
    float *x = make_f32((long)nt * cols, -1, 1);
    float *y = make_f32((long)nt * rows, 0, 0);
    x[2 * cols + 40] = NAN;
    x[5 * cols + 3] = INFINITY;
    be->iface->matmul(be, &W, NULL, x, y, nt);
    for (int t = 0; t < nt; t++)
        for (int r = 0; r < rows; r++) {
            const float v = y[(long)t * rows + r];
            CHECK(t == 2 || t == 5 ? !isfinite(v) : isfinite(v),
                  "matmul %s, x of token 2 NaN and 5 infinite: token %d row %d gave %g",
                  eng_dtype_name(dt), t, r, v);
        }
    free(w);
    free(x);
    free(y);
}

static void test_matmul(eng_backend *be, eng_dtype dt)
{
    static const int shapes[][2] = { { 1, 1 },     { 3, 7 },     { 13, 8 },    { 37, 100 },
                                     { 64, 576 },  { 192, 576 }, { 576, 100 }, { 21, 4100 },
                                     { 5, 200 },   { 9, 300 } };
    /* Q8_0 rows are whole blocks: K of 1, 2, 3 and 18 blocks, and past a
     * packed K chunk (2048) and the dot path's (4096); 5, 7, 16 and 130
     * blocks: AVX-512's four-block Q4_1/Q4_0 step with 1, 3, 0 and 2 left */
    static const int shapes_q8[][2] = { { 1, 32 },    { 3, 64 },    { 13, 96 },  { 37, 576 },
                                        { 64, 576 },  { 197, 576 }, { 576, 160 }, { 21, 4160 },
                                        { 5, 224 },   { 9, 512 } };
    /* Q4_K, Q5_K and Q6_K rows: 1, 2, 3 and 17 blocks of 256 (past both
     * chunks) */
    static const int shapes_q4k[][2] = { { 1, 256 },   { 3, 512 },   { 13, 256 },  { 37, 768 },
                                         { 64, 768 },  { 197, 512 }, { 576, 256 }, { 21, 4352 },
                                         { 5, 1024 },  { 9, 1280 } };
    static const int nts[] = { 1, 2, 3, 5, 7, 17 };
    for (size_t s = 0; s < sizeof(shapes) / sizeof(shapes[0]); s++)
        for (size_t i = 0; i < sizeof(nts) / sizeof(nts[0]); i++) {
            const int *sh = eng_dtype_block(dt) == 32       ? shapes_q8[s]
                            : eng_dtype_block(dt) == 256 ? shapes_q4k[s]
                                                        : shapes[s];
            if (sh[1] > 1000 && nts[i] > 5 && nts[i] != 17) /* 17: chunks of K packed */
                continue;
            test_matmul_one(be, dt, sh[0], sh[1], nts[i], (s + i) % 2 == 0);
        }
}

/* matmul3 (q, k, v in one call, of types dts): bit for bit what three
 * matmuls give, for decode (one dispatch) and prefill, with and without
 * biases, and with a matrix too small to split across threads. */
static void test_matmul3_dts(eng_backend *be, const eng_dtype dts[3])
{
    static const int rows[][3] = { { 576, 192, 192 }, { 13, 37, 64 }, { 1, 96, 5 } };
    int cols = 100; /* whole blocks of every type: 512 with a 256-block one */
    for (int i = 0; i < 3; i++)
        if (eng_dtype_block(dts[i]) == 256)
            cols = 512;
        else if (eng_dtype_block(dts[i]) == 32 && cols == 100)
            cols = 576;
    for (size_t s = 0; s < sizeof(rows) / sizeof(rows[0]); s++)
        for (int nt = 1; nt <= 3; nt += 2) {
            void *w[3];
            eng_weight W[3];
            const eng_weight *wp[3];
            float *b[3], *y3[3], *y1[3];
            float *x = make_f32((long)nt * cols, -1, 1);
            for (int i = 0; i < 3; i++) {
                w[i] = make_weights(dts[i], (long)rows[s][i] * cols);
                W[i] = (eng_weight){ dts[i], rows[s][i], cols, w[i] };
                wp[i] = &W[i];
                b[i] = (s + i) % 2 ? make_f32(rows[s][i], -2, 2) : NULL;
                y3[i] = make_f32((long)nt * rows[s][i], 1e30f, 1e30f);
                y1[i] = make_f32((long)nt * rows[s][i], -1e30f, -1e30f);
                be->iface->matmul(be, &W[i], b[i], x, y1[i], nt);
            }
            const float *bp[3] = { b[0], b[1], b[2] };
            be->iface->matmul3(be, wp, bp, x, y3, nt);
            for (int i = 0; i < 3; i++) {
                CHECK(!memcmp(y3[i], y1[i], (size_t)nt * rows[s][i] * sizeof(float)),
                      "matmul3 %s/%s/%s rows %d/%d/%d nt=%d: matrix %d differs from matmul",
                      eng_dtype_name(dts[0]), eng_dtype_name(dts[1]), eng_dtype_name(dts[2]), rows[s][0],
                      rows[s][1], rows[s][2], nt, i);
                free(w[i]);
                free(b[i]);
                free(y3[i]);
                free(y1[i]);
            }
            free(x);
        }
}

static void test_matmul3(eng_backend *be, eng_dtype dt)
{
    test_matmul3_dts(be, (const eng_dtype[3]){ dt, dt, dt });
}

static void test_rmsnorm(eng_backend *be)
{
    static const int ns[] = { 1, 7, 100, 576 };
    static const int nts[] = { 1, 5 };
    for (size_t a = 0; a < 4; a++)
        for (size_t b = 0; b < 2; b++)
            for (int inplace = 0; inplace < 2; inplace++) {
                int n = ns[a], nt = nts[b];
                float *x = make_f32((long)n * nt, -3, 3), *wt = make_f32(n, 0.5f, 1.5f);
                float *x0 = malloc((size_t)n * nt * 4);
                memcpy(x0, x, (size_t)n * nt * 4);
                float *y = inplace ? x : make_f32((long)n * nt, 0, 0);
                float eps = 1e-5f;
                be->iface->rmsnorm(be, x, wt, y, nt, n, eps);
                for (int t = 0; t < nt; t++) {
                    double ss = 0;
                    for (int i = 0; i < n; i++)
                        ss += (double)x0[t * n + i] * x0[t * n + i];
                    double sc = 1.0 / sqrt(ss / n + eps);
                    for (int i = 0; i < n; i++) {
                        double ref = x0[t * n + i] * sc * wt[i];
                        CHECK(fabs(y[t * n + i] - ref) <= 2e-6 * fabs(ref) + 1e-7,
                              "rmsnorm n=%d nt=%d i=%d: %.9g vs %.9g", n, nt, i, y[t * n + i], ref);
                    }
                }
                free(x);
                free(x0);
                free(wt);
                if (!inplace)
                    free(y);
            }
}

/* x (rotated) against x0 by the reference rotation in double */
static void rope_check(const float *x0, const float *x, int nt, int nh, int hd, int nrot, int pos0,
                       float base, const float *ff, bool neox, const char *what)
{
    for (int t = 0; t < nt; t++)
        for (int h = 0; h < nh; h++) {
            const float *xi = x0 + ((long)t * nh + h) * hd;
            const float *xo = x + ((long)t * nh + h) * hd;
            double ref[512];
            for (int i = 0; i < hd; i++)
                ref[i] = xi[i];
            for (int i = 0; i < nrot / 2; i++) {
                double th = (double)(pos0 + t) * pow(base, -2.0 * i / nrot);
                if (ff)
                    th /= ff[i];
                int i0 = neox ? i : 2 * i, i1 = neox ? i + nrot / 2 : 2 * i + 1;
                ref[i0] = xi[i0] * cos(th) - xi[i1] * sin(th);
                ref[i1] = xi[i0] * sin(th) + xi[i1] * cos(th);
            }
            for (int i = 0; i < hd; i++) {
                double tol = 3e-6 * 4.0 + 1e-30;
                CHECK(fabs(xo[i] - ref[i]) <= tol, "rope %s t=%d h=%d i=%d: %.9g vs %.9g", what,
                      t, h, i, xo[i], ref[i]);
            }
        }
}

static void test_rope(eng_backend *be)
{
    struct {
        int nt, nh, hd, nrot, pos0;
        float base;
        bool ff, neox;
    } cases[] = {
        { 1, 9, 64, 64, 0, 10000, false, false },    { 4, 9, 64, 64, 1000, 10000, false, true },
        { 3, 3, 64, 32, 7, 100000, true, false },     { 5, 2, 128, 128, 4090, 500000, true, true },
        { 2, 4, 20, 20, 3, 10000, true, true },       { 1, 1, 6, 4, 123456, 10000, false, false },
        { 17, 3, 64, 64, 31, 1000000, false, true },
    };
    for (size_t c = 0; c < sizeof(cases) / sizeof(cases[0]); c++) {
        int nt = cases[c].nt, nh = cases[c].nh, hd = cases[c].hd, nrot = cases[c].nrot;
        long n = (long)nt * nh * hd;
        float *x = make_f32(n, -2, 2);
        float *x0 = malloc((size_t)n * 4);
        memcpy(x0, x, (size_t)n * 4);
        float *ff = cases[c].ff ? make_f32(nrot / 2, 1, 8) : NULL;
        be->iface->rope(be, x, nt, nh, hd, nrot, cases[c].pos0, cases[c].base, ff, cases[c].neox);
        char what[32];
        snprintf(what, sizeof(what), "case %zu", c);
        rope_check(x0, x, nt, nh, hd, nrot, cases[c].pos0, cases[c].base, ff, cases[c].neox, what);
        free(x);
        free(x0);
        free(ff);
    }

    /* One token at a time, as decode calls it (the backend keeps the last
     * position's angles): every call right after one that differs in a
     * single argument (position, base, n_rot, the factors' values behind
     * the same pointer, factors or none), and repeats. */
    float ff[32];
    for (int i = 0; i < 32; i++)
        ff[i] = 1.0f + (float)i / 8;
    struct {
        int pos, nrot;
        float base;
        bool ff;
        float ff0; /* ff[0] before the call */
    } seq[] = {
        { 5, 64, 10000, false, 1 },  { 5, 64, 10000, false, 1 },  { 6, 64, 10000, false, 1 },
        { 6, 64, 500000, false, 1 }, { 6, 32, 500000, false, 1 }, { 6, 32, 500000, true, 1 },
        { 6, 32, 500000, true, 4 },  { 6, 32, 500000, true, 4 },  { 6, 32, 500000, false, 4 },
        { 5, 64, 10000, false, 4 },
    };
    enum { NH = 3, HD = 64 };
    for (size_t c = 0; c < sizeof(seq) / sizeof(seq[0]); c++) {
        ff[0] = seq[c].ff0;
        float *x = make_f32(NH * HD, -2, 2), x0[NH * HD];
        memcpy(x0, x, sizeof(x0));
        be->iface->rope(be, x, 1, NH, HD, seq[c].nrot, seq[c].pos, seq[c].base,
                        seq[c].ff ? ff : NULL, c % 2 == 0);
        char what[32];
        snprintf(what, sizeof(what), "one token, call %zu", c);
        rope_check(x0, x, 1, NH, HD, seq[c].nrot, seq[c].pos, seq[c].base, seq[c].ff ? ff : NULL,
                   c % 2 == 0, what);
        free(x);
    }
}

/* Attention over an f16 cache, or (q8) over a Q8_0 cache of random codes
 * and scales, against the reference over the cache's exact values; with
 * sink > 0, each head a sink logit within +-sink (gpt-oss). */
static void test_attention_sink(eng_backend *be, int nt, int pos0, int nh, int nkv, int hd,
                                float qscale, bool q8, int window, float cap, float sink)
{
    int n_ctx = pos0 + nt + 3;
    long kvn = (long)n_ctx * nkv * hd;
    uint16_t *k = NULL, *v = NULL;
    eng_q8_block *kq = NULL, *vq = NULL;
    double *kd = malloc(sizeof(double) * (size_t)kvn), *vd = malloc(sizeof(double) * (size_t)kvn);
    const long filled = (long)(pos0 + nt) * nkv * hd;
    if (q8) {
        kq = malloc((size_t)kvn / 32 * sizeof(eng_q8_block));
        vq = malloc((size_t)kvn / 32 * sizeof(eng_q8_block));
        for (long b = 0; b < kvn / 32; b++) {
            /* scales over two decades, codes over the whole range */
            kq[b].d = rand_half(0.002f, 0.02f);
            vq[b].d = rand_half(0.002f, 0.02f);
            for (int j = 0; j < 32; j++) {
                kq[b].q[j] = (int8_t)(rnd() % 255 - 127);
                vq[b].q[j] = (int8_t)(rnd() % 255 - 127);
                kd[32 * b + j] = h2d(kq[b].d) * kq[b].q[j];
                vd[32 * b + j] = h2d(vq[b].d) * vq[b].q[j];
            }
            if (32 * b >= filled) /* a NaN scale: must never be read */
                kq[b].d = vq[b].d = 0x7e00;
        }
    } else {
        k = malloc((size_t)kvn * 2), v = malloc((size_t)kvn * 2);
        for (long i = 0; i < kvn; i++) {
            k[i] = rand_half(-1, 1);
            v[i] = rand_half(-1, 1);
            kd[i] = h2d(k[i]);
            vd[i] = h2d(v[i]);
        }
        /* rows past pos0 + nt - 1 are not filled: NaN must never be read */
        for (long i = filled; i < kvn; i++)
            k[i] = v[i] = 0x7e00;
    }
    /* nor the rows before the first token's window */
    const long before = window > 0 && pos0 + 1 > window ? (long)(pos0 + 1 - window) * nkv * hd : 0;
    for (long i = 0; i < before; i++) {
        kd[i] = vd[i] = NAN;
        if (q8 && i % 32 == 0)
            kq[i / 32].d = vq[i / 32].d = 0x7e00;
        else if (!q8)
            k[i] = v[i] = 0x7e00;
    }
    float *q = make_f32((long)nt * nh * hd, -qscale, qscale);
    float *out = make_f32((long)nt * nh * hd, 5, 5);
    float *sinks = sink > 0 ? make_f32(nh, -sink, sink) : NULL;
    float scale = 1.0f / sqrtf((float)hd);
#define ATTEND(Q, O, N, P)                                                                   \
    (q8 ? be->iface->attention_q8(be, Q, kq, vq, O, N, P, nh, nkv, hd, scale, window, cap,   \
                                  sinks)                                                     \
        : be->iface->attention(be, Q, k, v, O, N, P, nh, nkv, hd, scale, window, cap, sinks))
    ATTEND(q, out, nt, pos0);
    if (nt >= 4) {
        /* the same tokens in two prefills (each of 2 tokens or more): the
         * same bytes, or a prompt cache's kept prefix would change them */
        const int n1 = nt / 2;
        const long row = (long)nh * hd;
        float *o2 = make_f32((long)nt * row, 5, 5);
        ATTEND(q, o2, n1, pos0);
        ATTEND(q + n1 * row, o2 + n1 * row, nt - n1, pos0 + n1);
        CHECK(memcmp(out, o2, sizeof(float) * (size_t)(nt * row)) == 0,
              "attention%s nt=%d pos0=%d nh=%d nkv=%d hd=%d w=%d cap=%g: cut at %d, other bytes",
              q8 ? " q8" : "", nt, pos0, nh, nkv, hd, window, cap, n1);
        free(o2);
    }
#undef ATTEND
    double *s = malloc(sizeof(double) * (size_t)(pos0 + nt));
    int group = nh / nkv;
    for (int t = 0; t < nt; t++)
        for (int h = 0; h < nh; h++) {
            const float *qq = q + ((long)t * nh + h) * hd;
            int kh = h / group, n_kv = pos0 + t + 1;
            const int lo = window > 0 && n_kv > window ? n_kv - window : 0;
            double m = -INFINITY, mag = 0, vmax = 0, qmax = 0, ksum = 0;
            for (int i = 0; i < hd; i++)
                qmax = fabs(qq[i]) > qmax ? fabs(qq[i]) : qmax;
            for (int p = lo; p < n_kv; p++) {
                double d = 0, dm = 0, ks = 0;
                for (int i = 0; i < hd; i++) {
                    double pr = qq[i] * kd[((long)p * nkv + kh) * hd + i];
                    d += pr;
                    dm += fabs(pr);
                    ks += fabs(kd[((long)p * nkv + kh) * hd + i]);
                    if (fabs(vd[((long)p * nkv + kh) * hd + i]) > vmax)
                        vmax = fabs(vd[((long)p * nkv + kh) * hd + i]);
                }
                s[p] = cap > 0 ? cap * tanh(d * scale / cap) : d * scale;
                if (dm * scale > mag)
                    mag = dm * scale;
                if (ks > ksum)
                    ksum = ks;
                if (s[p] > m)
                    m = s[p];
            }
            double l = sinks ? exp(sinks[h] - m) : 0;
            for (int p = lo; p < n_kv; p++)
                l += exp(s[p] - m);
            /* score errors up to ~3e-5 * mag shift the weights by that
             * factor; over a Q8_0 cache the AVX2 and NEON kernels round q to 16 bits
             * (max|q| / 65534 an element, times sum|k|) */
            const double qerr = q8 ? scale * qmax / 65534 * ksum : 0;
            double tol = (2e-5 + 2 * (3e-5 * mag + qerr)) * vmax;
            for (int i = 0; i < hd; i++) {
                double ref = 0;
                for (int p = lo; p < n_kv; p++)
                    ref += exp(s[p] - m) / l * vd[((long)p * nkv + kh) * hd + i];
                double got = out[((long)t * nh + h) * hd + i];
                CHECK(fabs(got - ref) <= tol,
                      "attention%s nt=%d pos0=%d nh=%d nkv=%d hd=%d w=%d cap=%g sink=%g qs=%g t=%d "
                      "h=%d i=%d: %.9g vs %.9g",
                      q8 ? " q8" : "", nt, pos0, nh, nkv, hd, window, cap, sink, qscale, t, h, i,
                      got, ref);
            }
        }
    free(s);
    free(kd);
    free(vd);
    free(k);
    free(v);
    free(kq);
    free(vq);
    free(q);
    free(out);
    free(sinks);
}

static void test_attention_win(eng_backend *be, int nt, int pos0, int nh, int nkv, int hd,
                               float qscale, bool q8, int window, float cap)
{
    test_attention_sink(be, nt, pos0, nh, nkv, hd, qscale, q8, window, cap, 0.0f);
}

static void test_attention_one(eng_backend *be, int nt, int pos0, int nh, int nkv, int hd,
                               float qscale, bool q8)
{
    test_attention_win(be, nt, pos0, nh, nkv, hd, qscale, q8, 0, 0.0f);
}

static void test_attention(eng_backend *be)
{
    /* sliding windows (Gemma 3's local layers): decode, one prefill and
     * a prefill cut in two whose windows start inside a block of 32 keys,
     * on a block's edge, and before position 0; decode split over chunks */
    for (int q8 = 0; q8 < 2; q8++) {
        test_attention_win(be, 1, 40, 4, 1, 64, 1, q8, 8, 0.0f);
        test_attention_win(be, 1, 600, 8, 2, 64, 1, q8, 300, 0.0f);
        test_attention_win(be, 1, 3, 4, 1, 64, 1, q8, 8, 0.0f);
        test_attention_win(be, 9, 37, 4, 1, 64, 1, q8, 5, 0.0f);
        test_attention_win(be, 8, 64, 6, 2, 32, 1, q8, 33, 0.0f);
        test_attention_win(be, 13, 90, 4, 1, 256, 1, q8, 40, 0.0f);
        test_attention_win(be, 7, 2, 4, 1, 64, 1, q8, 4, 0.0f);
        /* soft-capped scores (Gemma 2), scores ~ +-100 against a cap of
         * 3: decode, decode split, prefill, with and without a window */
        test_attention_win(be, 1, 40, 4, 2, 64, 30, q8, 0, 3.0f);
        test_attention_win(be, 1, 700, 8, 4, 64, 30, q8, 0, 3.0f);
        test_attention_win(be, 11, 50, 8, 4, 64, 30, q8, 0, 3.0f);
        test_attention_win(be, 9, 70, 4, 2, 256, 30, q8, 20, 3.0f);
        /* sinks (gpt-oss: its heads of 64, 8 a KV head, every other
         * layer a window of 128): decode, decode split over chunks,
         * prefill by tiles cut in two, in and out of a window; sinks
         * far above the scores (most of the softmax) and beside them */
        test_attention_sink(be, 1, 40, 8, 1, 64, 1, q8, 0, 0.0f, 3.0f);
        test_attention_sink(be, 1, 700, 16, 2, 64, 1, q8, 0, 0.0f, 8.0f);
        test_attention_sink(be, 1, 300, 8, 1, 64, 1, q8, 128, 0.0f, 2.0f);
        test_attention_sink(be, 14, 50, 16, 2, 64, 1, q8, 0, 0.0f, 3.0f);
        test_attention_sink(be, 9, 200, 8, 1, 64, 1, q8, 128, 0.0f, 3.0f);
        test_attention_sink(be, 5, 0, 8, 1, 64, 30, q8, 0, 0.0f, 40.0f);
    }
    test_attention_win(be, 1, 17000, 4, 1, 16, 1, false, 1000, 0.0f);
    test_attention_win(be, 20, 100, 16, 2, 80, 1, false, 7, 0.0f);
    for (int q8 = 0; q8 < 2; q8++) {
        test_attention_one(be, 1, 0, 9, 3, 64, 1, q8);
        test_attention_one(be, 1, 5, 9, 3, 64, 1, q8);
        test_attention_one(be, 1, 130, 9, 3, 64, 1, q8);
        test_attention_one(be, 4, 0, 9, 3, 64, 1, q8);
        test_attention_one(be, 7, 61, 9, 3, 64, 1, q8);
        test_attention_one(be, 6, 33, 14, 2, 64, 1, q8);
        test_attention_one(be, 2, 200, 9, 3, 64, 30, q8); /* peaked softmax: scores ~ +-100 */
        test_attention_one(be, 13, 40, 24, 8, 128, 1, q8);
        test_attention_one(be, 12, 0, 9, 3, 64, 1, q8);
        test_attention_one(be, 1, 700, 9, 3, 64, 1, q8);
        test_attention_one(be, 1, 300, 14, 2, 64, 1, q8);
        test_attention_one(be, 1, 520, 9, 3, 64, 30, q8);
        test_attention_one(be, 1, 77, 6, 6, 64, 1, q8);
        test_attention_one(be, 3, 40, 4, 2, 96, 1, q8);
        test_attention_one(be, 1, 300, 40, 40, 32, 1, q8);
        test_attention_one(be, 1, 9000, 4, 1, 32, 1, q8);
        /* heads over 256 wide: the Q8_0 scores' 16-bit queries stop there */
        test_attention_one(be, 3, 40, 2, 1, 288, 1, q8);
    }
    /* f16 only: head_dim not a multiple of 32 */
    test_attention_one(be, 3, 10, 4, 4, 20, 1, false);
    test_attention_one(be, 5, 70, 8, 1, 36, 1, false);
    /* prefill takes a group's query heads four at a time: groups of 7
     * (Qwen2.5's 14 / 2: runs of 4 and 3, above) and 5 */
    test_attention_one(be, 3, 0, 5, 1, 16, 1, false);
    /* prefill on AVX-512 takes 6 tokens and a KV head's query heads at
     * once, keys 32 at a time: Llama-3.2-3B's heads (24 / 8, 128 wide,
     * above) over several tiles and key blocks, a group of 8 over 80 */
    test_attention_one(be, 9, 90, 16, 2, 80, 1, false);
    /* decode past 256 positions: the context cut into chunks of 256 over
     * the threads (each with all heads), then merged; past 64 chunks,
     * longer ones */
    test_attention_one(be, 1, 17000, 4, 1, 16, 1, false);
    /* a chunk's groups of heads past the 32 an item holds at a time */
    test_attention_one(be, 1, 300, 40, 40, 16, 1, false);
}

static void test_ffn_one(eng_backend *be, eng_dtype dt, int E, int n_slots, int n_sel_req,
                         bool use_sel, int nt, bool with_act)
{
    const eng_dtype ddt = eng_ffn_down_dtype(dt); /* Q4_K's down rows: Q8_0 */
    const long R = g_rows(), UO = g_uo(E); /* a slot's rows, its up row's offset */
    void *gu = make_weights(dt, (long)n_slots * R * E);
    void *dn = make_weights(ddt, (long)n_slots * E);
    int n_sel = use_sel ? n_sel_req : n_slots;
    int32_t *sel = NULL;
    if (use_sel) {
        int *perm = calloc((size_t)n_slots + 1, sizeof(int));
        for (int i = 0; i < n_slots; i++)
            perm[i] = i;
        for (int i = n_slots - 1; i > 0; i--) {
            int j = irand(i + 1), tmp = perm[i];
            perm[i] = perm[j];
            perm[j] = tmp;
        }
        sel = malloc(sizeof(int32_t) * (size_t)(n_sel > 0 ? n_sel : 1));
        for (int i = 0; i < n_sel; i++)
            sel[i] = perm[i];
        /* slots out of range contribute nothing (backend.h) */
        if (n_sel >= 4) {
            sel[1] = -1;
            sel[3] = n_slots + 3;
        }
        /* poison every slot not selected */
        char *used = calloc((size_t)n_slots + 1, 1);
        for (int i = 0; i < n_sel; i++)
            if (sel[i] >= 0 && sel[i] < n_slots)
                used[sel[i]] = 1;
        for (int s = 0; s < n_slots; s++)
            if (!used[s]) {
                for (long i = 0; i < R * E; i++)
                    wset_nan(dt, gu, (long)s * R * E + i);
                for (long i = 0; i < E; i++)
                    wset_nan(ddt, dn, (long)s * E + i);
            }
        free(used);
        free(perm);
    }
    /* biases of gates around their products' size, of ups up to past
     * the clamp at 7 */
    float *fb = g_bias ? make_f32(2L * n_slots, -2, 2) : NULL;
    for (long i = 1; fb && i < 2L * n_slots; i += 2)
        fb[i] *= 4;
    eng_ffn_weights W = { dt, E, n_slots, gu, dn, NULL, g_act, fb, 0.0f };
    float *x = make_f32((long)nt * E, -1, 1);
    float *y = make_f32((long)nt * E, 1e30f, 1e30f);
    float *act = with_act ? make_f32((long)nt * (n_sel > 0 ? n_sel : 1), 9, 9) : NULL;
    be->iface->ffn(be, &W, sel, n_sel, x, y, nt, act);

    double *gud = to_double(dt, gu, (long)n_slots * R * E);
    double *dnd = to_double(ddt, dn, (long)n_slots * E);
    /* the magnitudes a row's float rounding scales with: |w|, for Q4_K
     * both terms' */
    double *gmg = eng_dtype_block(dt) > 1 && dt != ENG_DTYPE_Q8_0
                      ? malloc(sizeof(double) * (size_t)n_slots * R * E)
                      : NULL;
    for (long i = 0; gmg && i < (long)n_slots * R * E; i++)
        gmg[i] = wmag(dt, gu, i);
    double *a = malloc(sizeof(double) * (size_t)(n_sel > 0 ? n_sel : 1));
    double *atol = malloc(sizeof(double) * (size_t)(n_sel > 0 ? n_sel : 1));
    int bad = 0, xb;
    const double xu = x_unit(be, dt, nt, E <= 4096, &xb);
    for (int t = 0; t < nt; t++) {
        const float *xt = x + (long)t * E;
        for (int j = 0; j < n_sel; j++) {
            long s = sel ? sel[j] : j;
            if (s < 0 || s >= n_slots) {
                a[j] = 0;
                atol[j] = 0;
                if (act && act[(long)t * n_sel + j] != 0.0f && bad++ < 3)
                    CHECK(0, "ffn act of an invalid slot: %g", act[(long)t * n_sel + j]);
                continue;
            }
            double g = 0, u = 0, gm = 0, um = 0;
            for (int k = 0; k < E; k++) {
                g += gud[s * R * E + k] * xt[k];
                u += gud[s * R * E + UO + k] * xt[k];
                const long ig = s * R * E + k, iu = ig + UO;
                gm += (gmg ? gmg[ig] : fabs(gud[ig])) * fabs(xt[k]);
                um += (gmg ? gmg[iu] : fabs(gud[iu])) * fabs(xt[k]);
            }
            /* decode in Q8_0 and Q4_K may round x to 16 bits per block
             * (x16_unit), prefill to 8 (x_unit): that much more in g and u */
            double eg = 0, eu = 0;
            for (int k0 = 0; xb && k0 < E; k0 += xb) {
                double xm = 0, wg = 0, wu = 0;
                for (int k = k0; k < k0 + xb && k < E; k++) {
                    const long ig = s * R * E + k, iu = ig + UO;
                    xm = fmax(xm, fabs(xt[k]));
                    wg += gmg ? gmg[ig] : fabs(gud[ig]);
                    wu += gmg ? gmg[iu] : fabs(gud[iu]);
                }
                eg += wg * xm * xu * 1.001;
                eu += wu * xm * xu * 1.001;
            }
            if (fb) {
                g += fb[2 * s];
                u += fb[2 * s + 1];
            }
            /* the up half: u, or gpt-oss's clamp(u, -7, 7) + 1 */
            const bool oai = g_act == ENG_ACT_SWIGLU_OAI;
            const double lin = oai ? fmin(fmax(u, -7), 7) + 1 : u;
            double sg = act_ref(g);
            a[j] = sg * lin;
            if (g_act == ENG_ACT_RELU_SQR) { /* un-gated: relu(u)^2, no gate */
                sg = u > 0 ? u : 0;
                a[j] = u > 0 ? u * u : 0;
            }
            /* d(silu)/dg is within [-0.1, 1.1], d(gelu)/dg within [-0.17,
             * 1.13]: errors 3e-5*gm (+ eg) in g and 3e-5*um (+ eu) in u
             * give this much in a, plus float rounding of a (GELU's
             * exponent carries its own float error, relative to |g|^3) */
            atol[j] = 1.2 * (3e-5 * gm + eg) * fabs(lin) + fabs(sg) * (3e-5 * um + eu) +
                      (2e-6 + 1e-6 * fabs(g * g * g)) * fabs(a[j]) + 1e-30;
            /* (relu(u)^2 also moves by du^2: a u at or below 0 that x's
             * rounding takes just above it) */
            if (g_act == ENG_ACT_RELU_SQR)
                atol[j] += (3e-5 * um + eu) * (3e-5 * um + eu);
            if (act) {
                double got = act[(long)t * n_sel + j];
                if (!(fabs(got - a[j]) <= atol[j]) && bad++ < 3)
                    CHECK(0, "ffn act %s E=%d slots=%d n_sel=%d sel=%d nt=%d t=%d j=%d: %.9g vs %.9g",
                          eng_dtype_name(dt), E, n_slots, n_sel, use_sel, nt, t, j, got, a[j]);
            }
        }
        /* MXFP4 slots: W_down's rows [E][n_slots], a matmul by them (a
         * decode's a in 16 bits a block of 32: that much more) */
        const bool dn_rows = dt == ENG_DTYPE_MXFP4;
        double amax = 0;
        for (int j = 0; dn_rows && nt == 1 && j < n_sel; j++)
            amax = fabs(a[j]) > amax ? fabs(a[j]) : amax;
        for (int c = 0; c < E; c++) {
            double ref = 0, tol = 0;
            for (int j = 0; j < n_sel; j++) {
                long s = sel ? sel[j] : j;
                if (s < 0 || s >= n_slots)
                    continue;
                double d = dn_rows ? dnd[(long)c * n_slots + s] : dnd[s * E + c];
                ref += a[j] * d;
                tol += 3e-5 * fabs(a[j] * d) + (atol[j] + amax / 65534 * 1.001) * fabs(d);
            }
            double got = y[(long)t * E + c];
            if (!(fabs(got - ref) <= tol + 1e-30) && bad++ < 3)
                CHECK(0, "ffn y %s%s%s E=%d slots=%d n_sel=%d sel=%d nt=%d act=%d t=%d c=%d: "
                      "%.9g vs %.9g (tol %.3g)",
                      eng_dtype_name(dt),
                      g_act == ENG_ACT_GELU         ? " gelu"
                      : g_act == ENG_ACT_RELU_SQR ? " relu^2"
                      : g_act                     ? " oai"
                                                  : "",
                      fb ? " biased" : "", E, n_slots, n_sel, use_sel, nt, with_act, t, c, got,
                      ref, tol);
        }
    }
    if (bad)
        n_fail++;
    free(a);
    free(atol);
    free(gud);
    free(gmg);
    free(dnd);
    free(gu);
    free(dn);
    free(sel);
    free(x);
    free(y);
    free(act);
    free(fb);
}

static void test_ffn(eng_backend *be, eng_dtype dt)
{
    if (dt == ENG_DTYPE_MXFP4) {
        /* every slot only, whole blocks of them (W_down's rows): an
         * expert's width, and past a packed K chunk (2048) in both */
        static const int mx[][2] = { { 64, 32 }, { 576, 64 }, { 96, 1536 }, { 2880, 96 } };
        static const int nts[] = { 1, 2, 7, 13 };
        for (size_t e = 0; e < sizeof(mx) / sizeof(mx[0]); e++)
            for (size_t i = 0; i < sizeof(nts) / sizeof(nts[0]); i++)
                test_ffn_one(be, dt, mx[e][0], mx[e][1], mx[e][1], false, nts[i], (e + i) % 2);
        return;
    }
    /* Q8_0 and Q4_K slots take n_embd in whole blocks: the next multiples
     * of 32 or 256 */
    static const int embd[][2] = { { 576, 1536 }, { 100, 37 }, { 13, 7 }, { 8, 64 }, { 40, 300 } };
    /* Q4_K and Q5_K: two blocks a row and one (rounding the others up to
     * 256 would cost its reference, under qemu too, several times Q8_0's) */
    static const int embd4[][2] = { { 512, 300 }, { 256, 37 } };
    static const int nts[] = { 1, 2, 7, 13 };
    const bool q8 = eng_dtype_block(dt) == 32, q4k = eng_dtype_block(dt) == 256; /* q8: Q4_1 too */
    const int blk = q8 ? 32 : q4k ? 256 : 1;
#define QE(e) (((e) + blk - 1) / blk * blk)
    const size_t n_embd = q4k ? 2 : sizeof(embd) / sizeof(embd[0]);
    for (size_t e = 0; e < n_embd; e++) {
        int E = QE(q4k ? embd4[e][0] : embd[e][0]), S = q4k ? embd4[e][1] : embd[e][1];
        for (size_t i = 0; i < sizeof(nts) / sizeof(nts[0]); i++) {
            int nt = nts[i];
            if (E >= 576 && nt == 7)
                continue; /* 13: the packed prefill path on the real shape */
            bool act = (e + i) % 2 == 0;
            test_ffn_one(be, dt, E, S, S, false, nt, act);           /* all slots, sel NULL */
            test_ffn_one(be, dt, E, S, S * 2 / 5, true, nt, !act);   /* 40 %, shuffled */
            test_ffn_one(be, dt, E, S, 1, true, nt, act);            /* one slot */
            test_ffn_one(be, dt, E, S, 0, true, nt, act);            /* none: y = 0 */
            if (S <= 64)
                test_ffn_one(be, dt, E, S, S, true, nt, !act);       /* all, permuted */
        }
    }
    /* without act, tokens x slots beyond the backend's buffer: chunks of
     * tokens, the second starting at token 255 (the same walk for every
     * type: not at Q4_K's 256 wide rows, which cost the reference 8 times
     * as much) */
    if (!q4k)
        test_ffn_one(be, dt, QE(8), 4100, 4100, false, 300, false);
    /* n_embd past one packed block (AVX-512 prefill: K in chunks), and
     * more tokens than its sums' buffer holds at once */
    test_ffn_one(be, dt, QE(2100), 37, 37 * 2 / 5, true, 13, true);
    test_ffn_one(be, dt, QE(2100), 5, 5, false, 520, true);
    /* Q8_0 and Q4_K past what the AVX2 prefill converts in its scratch
     * (4096): a token at a time */
    if (q8 || q4k)
        test_ffn_one(be, dt, QE(4097), 9, 9, false, 3, true);
#undef QE
}

/* build_sketch from Q8_0, Q4_K or Q5_K slots: the sketch of the same
 * values held in f32, byte for byte. Q8_0's d * q is exact in float (the
 * values from this test's own reading); Q4_K's and Q5_K's rows come
 * dequantized by the engine's rule (quants.c; the FFN tests check the
 * values themselves): the sketch finds each slot's rows. */
static void test_sketch_dt(eng_backend *be, eng_dtype dt, const int E, const int S)
{
    void *gu = make_weights(dt, 2L * S * E), *dn = make_weights(eng_ffn_down_dtype(dt), (long)S * E);
    float *gf = malloc(sizeof(float) * 2 * S * E), *df = calloc((size_t)S * E, sizeof(float));
    if (eng_dtype_block(dt) > 1 && dt != ENG_DTYPE_Q8_0)
        eng_dequant_row_f32(ggml_type_of_dtype(dt), gu, gf, 2L * S * E);
    else
        for (long i = 0; i < 2L * S * E; i++)
            gf[i] = (float)wget(dt, gu, i);
    const size_t sb = eng_sketch_slot_bytes(E);
    uint8_t *sq = malloc(S * sb), *s32 = malloc(S * sb);
    memset(sq, 1, S * sb);
    memset(s32, 2, S * sb);
    eng_ffn_weights wq = { dt, E, S, gu, dn, sq, ENG_ACT_SILU, NULL, 0.0f },
                    w32 = { ENG_DTYPE_F32, E, S, gf, df, s32, ENG_ACT_SILU, NULL, 0.0f };
    be->iface->build_sketch(be, &wq);
    be->iface->build_sketch(be, &w32);
    CHECK(memcmp(sq, s32, S * sb) == 0, "build_sketch of %s slots differs from f32's", eng_dtype_name(dt));
    free(gu);
    free(dn);
    free(gf);
    free(df);
    free(sq);
    free(s32);
}

/* The activation over its whole range, through the prefill FFN (one
 * slot: gate row e0, up row e1; token t's x = (v_t, 1, 0, ...), so act[t]
 * = silu(v_t)): within 4 float ulps of the double value (1e-37 absolutely,
 * where float runs out of range), NaN for NaN. GELU's exponent z = 1.6 (g
 * + 0.045 g^3) is itself rounded to float, which moves e^-z by about |z|
 * ulps more. */
static void test_silu(eng_backend *be)
{
    static const float v[] = { -200.0f, -104.0f, -88.7f, -87.3f, -20.0f, -9.5f, -1.0f, -1e-3f,
                               0.0f, 1e-3f, 0.5f, 1.0f, 3.0f, 9.5f, 20.0f, 88.0f, 89.0f, 200.0f,
                               NAN }; /* (an infinite x makes the up row's 0 * x NaN) */
    enum { E = 32, NT = sizeof(v) / sizeof(v[0]) };
    uint16_t gu[2 * E] = { 0 }, dn[E] = { 0 };
    gu[0] = 0x3c00;     /* gate . x = x[0] */
    gu[E + 1] = 0x3c00; /* up . x = x[1] */
    eng_ffn_weights W = { ENG_DTYPE_F16, E, 1, gu, dn, NULL, g_act, NULL, 0.0f };
    float x[NT * E], y[NT * E], act[NT];
    memset(x, 0, sizeof(x));
    for (int t = 0; t < NT; t++) {
        x[t * E] = v[t];
        x[t * E + 1] = 1.0f;
    }
    be->iface->ffn(be, &W, NULL, 1, x, y, NT, act);
    for (int t = 0; t < NT; t++) {
        double g = v[t], want = act_ref(g);
        /* e^-z's own error counts where it is not negligible: g < 0, or z
         * small (e^-z near 1) */
        double z = g_act == ENG_ACT_GELU ? 1.6 * fabs(g + 0.045 * g * g * g) : 0;
        if (g > 0 && z > 20)
            z = 0;
        bool ok = isnan(g) ? isnan(act[t])
                           : fabs(act[t] - want) <= (4 + 2 * z) * 1.2e-7 * fabs(want) + 1e-37;
        CHECK(ok, "%s(%g) = %.9g, want %.9g", g_act ? "gelu" : "silu", g, act[t], want);
    }
}

/* ---- ffn_runs ----------------------------------------------------------- */

/* gemma3n's cut activations (ENG_ACT_GELU_TOPK): each token's cut is the
 * mean of its computed gate values plus cut standard deviations (of n -
 * 1), the neurons below it give nothing and the others gelu(g - cut) u,
 * over every slot or a selection (its statistics the selection's); the
 * act buffer holds a. Rows of dt (decode: the gate rows first, then the up
 * and down rows of the neurons that pass, each GEMV as the type's
 * kernels compute it; x in 16 bits for the block types, so the bound
 * scales with each dot's terms). */
static void test_ffn_cut(eng_backend *be, eng_dtype dt, int E)
{
    enum { S = 200, NT = 4 };
    const eng_dtype dd = eng_ffn_down_dtype(dt);
    void *gu = make_weights(dt, 2L * S * E), *dn = make_weights(dd, (long)S * E);
    float *x = make_f32((long)NT * E, -1, 1), *y = malloc(sizeof(float) * NT * E);
    float act[NT * S];
    double *yr = malloc(sizeof(double) * E), *tol = malloc(sizeof(double) * E);
    int32_t sel[120];
    for (int j = 0; j < 120; j++)
        sel[j] = (j * 7 + 3) % S; /* (7 and 200 coprime: 120 distinct slots) */
    const eng_ffn_weights W = { dt, E, S, gu, dn, NULL, ENG_ACT_GELU_TOPK, NULL, 1.6448533f };
    const double rel = dt == ENG_DTYPE_F32 ? 1e-6 : 2e-4; /* of a dot's terms' magnitudes */
    int passed_all = 0, values_all = 0;
    for (int k = 0; k < 4; k++) {
        const int nt = k & 1 ? NT : 1, n = k & 2 ? 120 : S;
        const int32_t *sl = k & 2 ? sel : NULL;
        be->iface->ffn(be, &W, sl, n, x, y, nt, act);
        int bad = 0, passed = 0;
        for (int t = 0; t < nt; t++) {
            double g[S], u[S], eg[S], eu[S], sum = 0, sq = 0;
            for (int j = 0; j < n; j++) {
                const long s0 = sl ? sl[j] : j;
                g[j] = u[j] = eg[j] = eu[j] = 0;
                for (int e = 0; e < E; e++) {
                    const double wg = wget(dt, gu, s0 * 2 * E + e);
                    const double wu = wget(dt, gu, s0 * 2 * E + E + e);
                    g[j] += wg * x[t * E + e];
                    u[j] += wu * x[t * E + e];
                    eg[j] += rel * fabs(wg * x[t * E + e]);
                    eu[j] += rel * fabs(wu * x[t * E + e]);
                }
                sum += g[j];
            }
            for (int j = 0; j < n; j++)
                sq += (g[j] - sum / n) * (g[j] - sum / n);
            const double cut = sum / n + 1.6448533 * sqrt(sq / (n - 1));
            for (int e = 0; e < E; e++)
                yr[e] = tol[e] = 0;
            for (int j = 0; j < n; j++) {
                const long s0 = sl ? sl[j] : j;
                double a = 0;
                if (g[j] > cut) {
                    const double z = g[j] - cut;
                    a = z / (1 + exp(-2 * 0.7978845608028654 * (z + 0.044715 * z * z * z))) * u[j];
                    passed++;
                }
                /* a's bound: z's (g's and the cut's) and u's errors */
                const double ta = 1e-4 * (fabs(u[j]) + 1) + 2 * eg[j] * fabs(u[j]) +
                                  fabs(g[j] - cut) * eu[j];
                bad += fabs(act[t * n + j] - a) > ta;
                for (int e = 0; e < E; e++) {
                    const double d = wget(dd, dn, s0 * E + e);
                    yr[e] += a * d;
                    tol[e] += (ta + rel * fabs(a)) * fabs(d);
                }
            }
            for (int e = 0; e < E; e++)
                bad += !(fabs(y[t * E + e] - yr[e]) <= tol[e] + 1e-6);
        }
        /* (about 5 % of the neurons pass a normal distribution's 95 %;
         * random block types' rows, whose scales spread the values wider,
         * fewer: a case of one token may see none pass, so the lower
         * bound is over all four cases) */
        CHECK(!bad && passed < nt * n / 8,
              "ffn cut %s E %d nt=%d n=%d: %d values off, %d of %d passed", eng_dtype_name(dt), E,
              nt, n, bad, passed, nt * n);
        passed_all += passed;
        values_all += nt * n;
    }
    CHECK(passed_all > values_all / 200, "ffn cut %s E %d: %d of %d passed in all",
          eng_dtype_name(dt), E, passed_all, values_all);
    free(gu);
    free(dn);
    free(x);
    free(y);
    free(yr);
    free(tol);
}

/* ffn_runs over slots 0 .. n_a - 1 of w and a copy of n_b other slots of
 * w (random, ascending, as select.c copies a request's dynamic neurons) is
 * ffn() over the sel list of the same rows, bit for bit. */
static void test_ffn_runs_one(eng_backend *be, eng_dtype dt, int E, int S, int n_a, int n_b)
{
    /* rows whole blocks of the type */
    E = (int)((E + eng_dtype_block(dt) - 1) / eng_dtype_block(dt) * eng_dtype_block(dt));
    const size_t rs = g_rows() * eng_ffn_row_bytes(dt, E), rd = eng_ffn_down_bytes(dt, E);
    char *gu = make_weights(dt, (long)S * g_rows() * E);
    char *dn = make_weights(eng_ffn_down_dtype(dt), (long)S * E);
    char *gu2 = malloc((size_t)(n_b ? n_b : 1) * rs), *dn2 = malloc((size_t)(n_b ? n_b : 1) * rd);
    int32_t *sel = malloc((size_t)(n_a + n_b + 1) * sizeof(int32_t));
    int n = 0;
    for (int j = 0; j < n_a; j++)
        sel[n++] = j;
    for (int j = n_a, left = S - n_a, want = n_b; j < S; j++, left--)
        if (irand(left) < want) { /* n_b of the S - n_a, ascending */
            memcpy(gu2 + (size_t)(n - n_a) * rs, gu + (size_t)j * rs, rs);
            memcpy(dn2 + (size_t)(n - n_a) * rd, dn + (size_t)j * rd, rd);
            sel[n++] = j;
            want--;
        }
    CHECK(n == n_a + n_b, "ffn_runs setup: %d slots", n);
    eng_ffn_weights W = { dt, E, S, gu, dn, NULL, g_act, NULL, 0.0f },
                    W2 = { dt, E, n_b, gu2, dn2, NULL, g_act, NULL, 0.0f };
    float *x = make_f32(E, -1, 1), *y = make_f32(E, 0, 0), *want = make_f32(E, 0, 0);
    be->iface->ffn(be, &W, sel, n, x, want, 1, NULL);
    be->iface->ffn_runs(be, &W, n_a, &W2, n_b, x, y);
    CHECK(memcmp(y, want, (size_t)E * sizeof(float)) == 0,
          "ffn_runs %s E=%d slots=%d runs %d + %d: not ffn() over the same rows", eng_dtype_name(dt), E, S,
          n_a, n_b);
    /* runs longer than their weights, or of another type: y untouched */
    memcpy(want, y, (size_t)E * sizeof(float));
    be->iface->ffn_runs(be, &W, S + 1, &W2, n_b, x, y);
    W2.dtype = dt == ENG_DTYPE_F32 ? ENG_DTYPE_F16 : ENG_DTYPE_F32;
    be->iface->ffn_runs(be, &W, n_a, &W2, n_b, x, y);
    CHECK(memcmp(y, want, (size_t)E * sizeof(float)) == 0, "ffn_runs wrote y on bad runs");
    free(gu), free(dn), free(gu2), free(dn2), free(sel), free(x), free(y), free(want);
}

static void test_ffn_runs(eng_backend *be, eng_dtype dt)
{
    CHECK(be->iface->ffn_runs, "no ffn_runs");
    if (!be->iface->ffn_runs)
        return;
    /* SmolLM2's shape (static 461 and 153 of the rest) past the prefetch
     * distance, odd counts, one run empty */
    test_ffn_runs_one(be, dt, 576, 1075, 461, 153);
    test_ffn_runs_one(be, dt, 64, 37, 11, 9);
    test_ffn_runs_one(be, dt, 64, 37, 0, 13);
    test_ffn_runs_one(be, dt, 96, 40, 20, 0);
    test_ffn_runs_one(be, dt, 32, 5, 1, 1);
}

/* ---- moe ------------------------------------------------------------------ */

/* The moe op against its definition (backend.h): the router's softmax (or
 * sigmoid, picking by it plus a bias) in double, the K largest (the lower
 * index among equals), their weights, and
 * each picked expert through ffn() over its own slots for that token
 * alone. A decode step (one walk over K experts) and prefills (tokens
 * grouped by expert) both. */
static void test_moe_one(eng_backend *be, eng_dtype dt, int E, int NE, int F, int K, int n,
                         bool norm, float scale, bool sigmoid, int S, bool gated, bool own_xr)
{
    E = (int)((E + eng_dtype_block(dt) - 1) / eng_dtype_block(dt) * eng_dtype_block(dt));
    const size_t rs = eng_ffn_row_bytes(dt, E), rd = eng_ffn_down_bytes(dt, E);
    char *gu = make_weights(dt, ((long)NE * F + S) * 2 * E);
    char *dn = make_weights(eng_ffn_down_dtype(dt), ((long)NE * F + S) * E);
    float *router = make_f32((long)NE * E, -1, 1), *x = make_f32((long)n * E, -1, 1);
    float *y = make_f32((long)n * E, 0, 0), *ye = make_f32(E, 0, 0);
    /* gpt-oss's biases (g_bias): the slots', the router's, each
     * expert's output's */
    float *fb = g_bias ? make_f32(2L * (NE * F + S), -1, 1) : NULL;
    float *rbias = g_bias ? make_f32(NE, -2, 2) : NULL;
    float *dbias = g_bias ? make_f32((long)NE * E, -0.5f, 0.5f) : NULL;
    eng_ffn_weights W = { dt, E, NE * F + S, gu, dn, NULL, g_act, fb, 0.0f };
    /* sigmoid gating comes with a bias to pick by (LFM2-MoE); a shared
     * expert of S neurons after the others, gated (Qwen2-MoE) or not */
    float *bias = sigmoid ? make_f32(NE, -0.5f, 0.5f) : NULL;
    float *sgate = gated ? make_f32(E, -0.2f, 0.2f) : NULL;
    eng_moe moe = { .router = { ENG_DTYPE_F32, NE, E, router }, .n_expert = NE, .n_used = K,
                    .n_ff_exp = F, .sigmoid = sigmoid, .bias = bias, .norm = norm,
                    .scale = scale, .n_ff_shared = S, .shared_gate = sgate,
                    .router_bias = rbias, .down_bias = dbias };
    float *work = make_f32((long)eng_moe_work_floats(&moe, n, E), 0, 0);
    /* the router over an input of its own (gemma4), or x */
    float *xr = own_xr ? make_f32((long)n * E, -1, 1) : NULL;
    const float *rin = xr ? xr : x;
    /* a token the same in two rows: the same picks, the same output */
    if (n > 2)
        memcpy(x + (size_t)(n - 1) * E, x, (size_t)E * sizeof(float));
    if (n > 2 && xr)
        memcpy(xr + (size_t)(n - 1) * E, xr, (size_t)E * sizeof(float));
    be->iface->moe(be, &W, &moe, x, xr, y, n, work);
    double worst = 0;
    for (int t = 0; t < n; t++) {
        double p[64], sum = 0, mx = -1e300;
        for (int e = 0; e < NE; e++) {
            p[e] = 0;
            for (int j = 0; j < E; j++)
                p[e] += (double)router[(size_t)e * E + j] * rin[(size_t)t * E + j];
            p[e] += rbias ? rbias[e] : 0;
            mx = p[e] > mx ? p[e] : mx;
        }
        for (int e = 0; e < NE; e++)
            sum += p[e] = sigmoid ? 1 / (1 + exp(-p[e])) : exp(p[e] - mx);
        if (sigmoid)
            sum = 1;
        int pick[64];
        double g[64], gs = 0;
        bool taken[64] = { false };
        for (int k = 0; k < K; k++) {
            int best = -1;
            for (int e = 0; e < NE; e++) {
                const double v = p[e] + (bias ? bias[e] : 0), bv = best < 0 ? 0 :
                                 p[best] + (bias ? bias[best] : 0);
                if (!taken[e] && (best < 0 || v > bv))
                    best = e;
            }
            pick[k] = best;
            taken[best] = true;
            gs += g[k] = p[best] / sum;
        }
        double want[1024] = { 0 };
        for (int k = 0; k < K; k++) {
            const double gk = (norm ? g[k] / gs : g[k]) * scale;
            eng_ffn_weights V = { dt, E, F, gu + (size_t)pick[k] * F * 2 * rs,
                                  dn + (size_t)pick[k] * F * rd, NULL, g_act,
                                  fb ? fb + 2L * pick[k] * F : NULL, 0.0f };
            be->iface->ffn(be, &V, NULL, F, x + (size_t)t * E, ye, 1, NULL);
            for (int j = 0; j < E; j++)
                want[j] += gk * (ye[j] + (dbias ? dbias[(size_t)pick[k] * E + j] : 0));
        }
        if (S > 0) {
            double gd = 0;
            for (int j = 0; gated && j < E; j++)
                gd += (double)sgate[j] * x[(size_t)t * E + j];
            const double gs = gated ? 1 / (1 + exp(-gd)) : 1;
            eng_ffn_weights V = { dt, E, S, gu + (size_t)NE * F * 2 * rs,
                                  dn + (size_t)NE * F * rd, NULL, g_act,
                                  fb ? fb + 2L * NE * F : NULL, 0.0f };
            be->iface->ffn(be, &V, NULL, S, x + (size_t)t * E, ye, 1, NULL);
            for (int j = 0; j < E; j++)
                want[j] += gs * ye[j];
        }
        double mag = 1e-3;
        for (int j = 0; j < E; j++)
            mag = fabs(want[j]) > mag ? fabs(want[j]) : mag;
        for (int j = 0; j < E; j++) {
            const double d = fabs(y[(size_t)t * E + j] - want[j]) / mag;
            worst = d > worst || isnan(d) ? d : worst;
        }
    }
    if (n > 2)
        CHECK(memcmp(y, y + (size_t)(n - 1) * E, (size_t)E * sizeof(float)) == 0,
              "moe %s: one token twice, two outputs", eng_dtype_name(dt));
    /* (x in 16 or 8 bits against quantized rows; prefill and decode both) */
    CHECK(worst < (dt == ENG_DTYPE_F32 ? 1e-5 : 2e-2),
          "moe %s E=%d %d experts of %d picking %d, %d tokens%s, shared %d%s%s%s: %g off "
          "(relative)",
          eng_dtype_name(dt), E, NE, F, K, n, norm ? ", normalised" : "", S, gated ? " gated" : "",
          xr ? ", router's own input" : "", fb ? ", gpt-oss's biases" : "", worst);
    free(gu), free(dn), free(router), free(x), free(y), free(ye), free(work), free(bias);
    free(sgate), free(xr), free(fb), free(rbias), free(dbias);
}

static void test_moe(eng_backend *be, eng_dtype dt)
{
    CHECK(be->iface->moe, "no moe");
    if (!be->iface->moe)
        return;
    if (dt == ENG_DTYPE_MXFP4) {
        /* (experts and shared expert whole blocks of slots: W_down's rows)
         * decode, prefill, a shared expert; gpt-oss's biases */
        test_moe_one(be, dt, 64, 8, 32, 2, 1, true, 1.0f, false, 0, false, false);
        test_moe_one(be, dt, 64, 8, 32, 2, 9, true, 1.0f, false, 0, false, false);
        test_moe_one(be, dt, 64, 8, 32, 2, 6, true, 1.0f, false, 64, false, false);
        g_bias = true;
        g_act = ENG_ACT_SWIGLU_OAI;
        test_moe_one(be, dt, 64, 8, 32, 2, 1, true, 1.0f, false, 0, false, false);
        test_moe_one(be, dt, 96, 8, 64, 4, 7, true, 1.0f, false, 0, false, false);
        g_act = ENG_ACT_SILU;
        g_bias = false;
        return;
    }
    test_moe_one(be, dt, 64, 8, 32, 2, 1, true, 1.0f, false, 0, false, false);  /* decode */
    test_moe_one(be, dt, 64, 8, 32, 2, 9, true, 1.0f, false, 0, false, false);  /* prefill */
    /* odd slots, no norm, a scale */
    test_moe_one(be, dt, 96, 6, 33, 3, 1, false, 0.5f, false, 0, false, false);
    test_moe_one(be, dt, 96, 6, 33, 3, 5, false, 0.5f, false, 0, false, false);
    test_moe_one(be, dt, 64, 4, 16, 4, 3, true, 1.0f, false, 0, false, false);  /* every expert */
    /* sigmoid and a bias */
    test_moe_one(be, dt, 64, 8, 32, 2, 1, true, 1.0f, true, 0, false, false);
    test_moe_one(be, dt, 64, 8, 32, 3, 7, true, 1.0f, true, 0, false, false);
    /* a shared expert of another width, ungated (Granite) and gated (Qwen2-MoE) */
    test_moe_one(be, dt, 64, 8, 32, 2, 1, true, 1.0f, false, 48, false, false);
    test_moe_one(be, dt, 64, 8, 32, 2, 6, true, 1.0f, false, 48, false, false);
    test_moe_one(be, dt, 96, 4, 33, 2, 1, false, 1.0f, false, 67, true, false);
    test_moe_one(be, dt, 96, 4, 33, 2, 5, false, 1.0f, false, 67, true, false);
    /* the router over another input than the experts' (gemma4) */
    test_moe_one(be, dt, 64, 8, 32, 2, 1, true, 1.0f, false, 0, false, true);
    test_moe_one(be, dt, 64, 8, 32, 3, 6, true, 1.0f, false, 0, false, true);
    /* gpt-oss's experts: biases everywhere, its activation; decode and
     * prefill */
    g_bias = true;
    g_act = ENG_ACT_SWIGLU_OAI;
    test_moe_one(be, dt, 64, 8, 32, 2, 1, true, 1.0f, false, 0, false, false);
    test_moe_one(be, dt, 96, 8, 33, 4, 7, true, 1.0f, false, 0, false, false);
    g_act = ENG_ACT_SILU;
    g_bias = false;
}

/* ---- ssm (Mamba-2) -------------------------------------------------------- */

/* max |a - ref| over the largest |ref| (at least 1e-3); NaN counts */
static double max_rel(const float *a, const double *ref, size_t n)
{
    double worst = 0, mag = 1e-3;
    for (size_t i = 0; i < n; i++)
        mag = fabs(ref[i]) > mag ? fabs(ref[i]) : mag;
    for (size_t i = 0; i < n; i++) {
        const double d = fabs(a[i] - ref[i]) / mag;
        worst = d > worst || isnan(d) ? d : worst;
    }
    return worst;
}

/* max |a - ref| / max(|ref|, 1) element by element; NaN counts */
static double max_rel_each(const float *a, const double *ref, size_t n)
{
    double worst = 0;
    for (size_t i = 0; i < n; i++) {
        const double d = fabs(a[i] - ref[i]) / (fabs(ref[i]) > 1 ? fabs(ref[i]) : 1);
        worst = d > worst || isnan(d) ? d : worst;
    }
    return worst;
}

/* The ssm op against its definition (backend.h) in double, token by token:
 * three calls (a prefill of 5, a decode step, a prefill of 4) over a ring
 * of d_conv - 1 + 5 rows, so that positions wrap and the state and ring
 * carry over; the state starts as garbage, which position 0 must clear.
 * The first call's snapshot after its third token is the reference's. */
static void test_ssm_one(eng_backend *be, int D, int N, int NH, int G, int K, bool bias, bool norm)
{
    const int NC = D + 2 * G * N, hd = D / NH, rows = K - 1 + 5, T = 10;
    const int chunk[3] = { 5, 1, 4 };
    float *conv = make_f32((long)NC * K, -0.6f, 0.6f), *conv_b = make_f32(NC, -0.2f, 0.2f);
    float *dt_b = make_f32(NH, -4.0f, -1.0f), *A = make_f32(NH, -8.0f, -0.5f);
    float *Dk = make_f32(NH, 0.5f, 1.5f), *nw = make_f32(D, 0.5f, 1.5f);
    float *z = make_f32((long)T * D, -2, 2), *xbc = make_f32((long)T * NC, -2, 2);
    float *dt = make_f32((long)T * NH, -2, 2), *out = make_f32((long)T * D, 0, 0);
    float *cache = make_f32((long)rows * NC, 0, 0), *state = make_f32((long)D * N, -9, 9);
    float *in = malloc((size_t)T * NC * sizeof(float)), *snap = make_f32((long)D * N, 0, 0);
    memcpy(in, xbc, (size_t)T * NC * sizeof(float));
    const eng_ssm w = { conv, bias ? conv_b : NULL, dt_b, A, Dk, norm ? nw : NULL,
                        D, N, NH, G, K, 1e-5f, false };
    for (int c = 0, t0 = 0; c < 3; t0 += chunk[c++])
        be->iface->ssm(be, &w, z + (size_t)t0 * D, xbc + (size_t)t0 * NC, dt + (size_t)t0 * NH,
                       cache, t0, rows, state, c ? NULL : snap, c ? 0 : 3, chunk[c],
                       out + (size_t)t0 * D);
    double *st = calloc((size_t)D * N, sizeof(double)), *xc = malloc((size_t)NC * sizeof(double));
    double *y = malloc((size_t)D * sizeof(double)), worst = 0, snap_d = 0;
    for (int t = 0; t < T; t++) {
        for (int i = 0; i < NC; i++) {
            double sum = bias ? conv_b[i] : 0;
            for (int k = 0; k < K; k++)
                if (t - K + 1 + k >= 0)
                    sum += (double)conv[(size_t)i * K + k] * in[(size_t)(t - K + 1 + k) * NC + i];
            xc[i] = sum / (1 + exp(-sum));
        }
        for (int h = 0; h < NH; h++) {
            const double v = dt[(size_t)t * NH + h] + dt_b[h], sp = v > 20 ? v : log1p(exp(v));
            const double dA = exp(sp * A[h]);
            const int g = h / (NH / G);
            for (int i = 0; i < hd; i++) {
                const double xi = xc[h * hd + i];
                double acc = 0;
                for (int n = 0; n < N; n++) {
                    double *sv = &st[((size_t)h * hd + i) * N + n];
                    *sv = *sv * dA + xc[D + g * N + n] * xi * sp;
                    acc += *sv * xc[D + G * N + g * N + n];
                }
                const double zz = z[(size_t)t * D + h * hd + i];
                y[h * hd + i] = (acc + Dk[h] * xi) * zz / (1 + exp(-zz));
            }
        }
        for (int g = 0; norm && g < G; g++) {
            const int gs = D / G;
            double ss = 0;
            for (int i = 0; i < gs; i++)
                ss += y[g * gs + i] * y[g * gs + i];
            const double r = 1 / sqrt(ss / gs + 1e-5);
            for (int i = 0; i < gs; i++)
                y[g * gs + i] *= r * nw[g * gs + i];
        }
        const double d = max_rel(out + (size_t)t * D, y, (size_t)D);
        worst = d > worst || isnan(d) ? d : worst;
        if (t == 2)
            snap_d = max_rel_each(snap, st, (size_t)D * N);
    }
    const double sd = max_rel(state, st, (size_t)D * N); /* the state the op leaves */
    CHECK(worst < 1e-4 && sd < 1e-4 && snap_d < 1e-4, "ssm D=%d N=%d %d heads, %d "
          "groups, %d taps%s%s: output %g, state %g, snapshot %g off (relative)", D, N, NH, G, K,
          bias ? ", bias" : "", norm ? ", norm" : "", worst, sd, snap_d);
    free(conv), free(conv_b), free(dt_b), free(A), free(Dk), free(nw), free(z), free(xbc);
    free(dt), free(out), free(cache), free(state), free(in), free(st), free(xc), free(y), free(snap);
}

static void test_ssm(eng_backend *be)
{
    CHECK(be->iface->ssm, "no ssm");
    if (!be->iface->ssm)
        return;
    test_ssm_one(be, 64, 16, 4, 2, 4, true, true);
    test_ssm_one(be, 96, 13, 3, 1, 3, false, false); /* a state size of no eights */
    test_ssm_one(be, 256, 128, 8, 1, 4, true, true); /* Granite 4.0-H's state, threads split it */
}

/* A gated delta net (w.delta) against its definition (backend.h) in
 * double, as test_ssm_one: three calls over a wrapping ring, a garbage
 * first state, the snapshot after the third token. NH value heads of N
 * over G key heads, value head h reading key head h % G. */
static void test_delta_one(eng_backend *be, int NH, int G, int N, int K)
{
    const int D = NH * N, NC = D + 2 * G * N, rows = K - 1 + 5, T = 10;
    const int chunk[3] = { 5, 1, 4 };
    const double eps = 1e-6;
    float *conv = make_f32((long)NC * K, -0.6f, 0.6f), *dt_b = make_f32(NH, -4.0f, -1.0f);
    float *A = make_f32(NH, -8.0f, -0.5f), *nw = make_f32(N, 0.5f, 1.5f);
    float *z = make_f32((long)T * D, -2, 2), *xbc = make_f32((long)T * NC, -2, 2);
    float *ba = make_f32((long)T * 2 * NH, -3, 3), *out = make_f32((long)T * D, 0, 0);
    float *cache = make_f32((long)rows * NC, 0, 0), *state = make_f32((long)D * N, -9, 9);
    float *in = malloc((size_t)T * NC * sizeof(float)), *snap = make_f32((long)D * N, 0, 0);
    memcpy(in, xbc, (size_t)T * NC * sizeof(float));
    const eng_ssm w = { conv, NULL, dt_b, A, NULL, nw, D, N, NH, G, K, (float)eps, true };
    for (int c = 0, t0 = 0; c < 3; t0 += chunk[c++])
        be->iface->ssm(be, &w, z + (size_t)t0 * D, xbc + (size_t)t0 * NC,
                       ba + (size_t)t0 * 2 * NH, cache, t0, rows, state, c ? NULL : snap,
                       c ? 0 : 3, chunk[c], out + (size_t)t0 * D);
    double *st = calloc((size_t)D * N, sizeof(double)), *xc = malloc((size_t)NC * sizeof(double));
    double *y = malloc((size_t)D * sizeof(double)), worst = 0, snap_d = 0;
    for (int t = 0; t < T; t++) {
        for (int i = 0; i < NC; i++) {
            double sum = 0;
            for (int k = 0; k < K; k++)
                if (t - K + 1 + k >= 0)
                    sum += (double)conv[(size_t)i * K + k] * in[(size_t)(t - K + 1 + k) * NC + i];
            xc[i] = sum / (1 + exp(-sum));
        }
        for (int g = 0; g < 2 * G; g++) { /* q's and k's heads to unit length */
            double ss = 0;
            for (int i = 0; i < N; i++)
                ss += xc[g * N + i] * xc[g * N + i];
            for (int i = 0; i < N; i++)
                xc[g * N + i] /= sqrt(ss + eps) * (g < G ? sqrt((double)N) : 1.0);
        }
        for (int h = 0; h < NH; h++) {
            const double *q = xc + (h % G) * N, *k = xc + G * N + (h % G) * N;
            const double *v = xc + 2 * G * N + h * N;
            const double b = 1 / (1 + exp(-(double)ba[(size_t)t * 2 * NH + h]));
            const double a = ba[(size_t)t * 2 * NH + NH + h] + dt_b[h];
            const double decay = exp((a > 20 ? a : log1p(exp(a))) * A[h]);
            double *S = st + (size_t)h * N * N, sk[1024];
            for (int j = 0; j < N; j++) { /* S = decay S; sk = S k */
                sk[j] = 0;
                for (int i = 0; i < N; i++)
                    sk[j] += (S[j * N + i] *= decay) * k[i];
            }
            for (int j = 0; j < N; j++) { /* S += b (v - S k) k^T; y = S q */
                double acc = 0;
                for (int i = 0; i < N; i++) {
                    S[j * N + i] += b * (v[j] - sk[j]) * k[i];
                    acc += S[j * N + i] * q[i];
                }
                y[h * N + j] = acc;
            }
            double ss = 0; /* RMSNorm per head, times silu(z) */
            for (int j = 0; j < N; j++)
                ss += y[h * N + j] * y[h * N + j];
            for (int j = 0; j < N; j++) {
                const double zz = z[(size_t)t * D + h * N + j];
                y[h * N + j] *= nw[j] / sqrt(ss / N + eps) * zz / (1 + exp(-zz));
            }
        }
        const double d = max_rel(out + (size_t)t * D, y, (size_t)D);
        worst = d > worst || isnan(d) ? d : worst;
        if (t == 2)
            snap_d = max_rel_each(snap, st, (size_t)D * N);
    }
    const double sd = max_rel(state, st, (size_t)D * N); /* the state the op leaves */
    CHECK(worst < 1e-4 && sd < 1e-4 && snap_d < 1e-4, "delta net %d value heads of %d, "
          "%d key heads, %d taps: output %g, state %g, snapshot %g off (relative)", NH, N, G, K,
          worst, sd, snap_d);
    free(conv), free(dt_b), free(A), free(nw), free(z), free(xbc), free(ba), free(out);
    free(cache), free(state), free(in), free(st), free(xc), free(y), free(snap);
}

static void test_delta(eng_backend *be)
{
    if (!be->iface->ssm)
        return;
    test_delta_one(be, 4, 2, 16, 4);
    test_delta_one(be, 3, 1, 13, 3);  /* a width of no eights, one key head */
    test_delta_one(be, 16, 16, 128, 4); /* Qwen3.5-0.8B's: threads split the heads */
    test_delta_one(be, 32, 16, 128, 4); /* Qwen3.5-4B's: two value heads a key head */
    /* attention's output gate */
    CHECK(be->iface->mul_sigmoid, "no mul_sigmoid");
    if (!be->iface->mul_sigmoid)
        return;
    float x[5] = { 1, -2, 3, 0.5f, 4 }, g[5] = { 0, 1, -1, 30, -30 };
    be->iface->mul_sigmoid(be, x, g, 5);
    double worst = 0;
    const float x0[5] = { 1, -2, 3, 0.5f, 4 };
    for (int i = 0; i < 5; i++) {
        const double d = fabs(x[i] - x0[i] / (1 + exp(-(double)g[i])));
        worst = d > worst || isnan(d) ? d : worst;
    }
    CHECK(worst < 1e-6, "mul_sigmoid %g off", worst);
}

/* ---- ffn_pick ----------------------------------------------------------- */

/* Sketch row (backend.h) of n_embd / 32 blocks: in every block, elements
 * 0-15 are (lo - 8) * d and elements 16-31 (hi - 8) * d (element j in byte
 * j % 16, the low nibble for j < 16); the scales first, then the codes. */
static void sketch_row(uint8_t *row, int E, uint16_t d, int lo, int hi)
{
    const int nb = E / 32;
    for (int b = 0; b < nb; b++) {
        memcpy(row + 2 * b, &d, 2);
        for (int j = 0; j < 16; j++)
            row[2 * nb + 16 * b + j] = (uint8_t)(lo | hi << 4);
    }
}

/* The picks are the sketch's: slots whose sketched scores are far apart (or
 * equal, for the tie rule), against random exact weights, so that y must
 * equal ffn() over the expected slots bit for bit. E = 64 (two blocks) or
 * a multiple of 64 (the scores scale with E / 64; the order stays). */
static void test_ffn_pick_e(eng_backend *be, eng_dtype dt, const int E)
{
    enum { S = 10 };
    /* slot: gate sketch (d, lo, hi nibble), up sketch nibble (d 0.125). With
     * x = 1 on elements 0-15 of each block and 0.25 on 16-31 (token 0), at
     * E = 64: g = 0.5 * (32 (lo - 8) + 8 (hi - 8)), u = 40 * 0.125 * (up - 8) */
    static const struct { float d; int lo, hi, up; } sl[S] = {
        { 0.5f, 9, 8, 9 },  /* 0: g 16,  score  80 */
        { 0.5f, 8, 9, 9 },  /* 1: g 4,   score  19.6 (80 if nibbles were swapped) */
        { 0.5f, 10, 8, 9 }, /* 2: g 32,  score 160 */
        { 0.5f, 10, 8, 9 }, /* 3: the same: a tie with 2 */
        { 0.5f, 5, 8, 7 },  /* 4: g -48, score ~0; token 1: g 48, u -5: 240 */
        { NAN, 9, 9, 9 },   /* 5: NaN, never picked while numbers remain */
        { 0.5f, 11, 8, 7 }, /* 6: g 48, u -5: 240 */
        { 0.5f, 9, 10, 9 }, /* 7: g 24, score 120 */
        { 0.25f, 8, 11, 9 },/* 8: g 6,   score  29.9 */
        { 1.0f, 9, 9, 9 },  /* 9: g 40,  score 200 */
    };
    const size_t sb = eng_sketch_slot_bytes(E);
    uint8_t *sk = calloc(S, sb);
    for (int s = 0; s < S; s++) {
        uint16_t d = isnan(sl[s].d) ? 0x7e00 : ref_f2h(sl[s].d);
        sketch_row(sk + s * sb, E, d, sl[s].lo, sl[s].hi);
        sketch_row(sk + s * sb + sb / 2, E, ref_f2h(0.125f), sl[s].up, sl[s].up);
    }
    void *gu = make_weights(dt, (long)S * 2 * E);
    void *dn = make_weights(eng_ffn_down_dtype(dt), (long)S * E);
    /* the expected slots follow from silu's scores */
    eng_ffn_weights w = { dt, E, S, gu, dn, sk, ENG_ACT_SILU, NULL, 0.0f };
    float *x = malloc(sizeof(float) * 2 * E), *y = malloc(sizeof(float) * 2 * E);
    float *want = malloc(sizeof(float) * 2 * E);
    for (int i = 0; i < E; i++) {
        x[i] = i % 32 < 16 ? 1.0f : 0.25f;
        x[E + i] = -x[i]; /* token 1: every g changes sign */
    }
    static const struct { int k; int n0, t0[9]; int n1, t1[3]; } cases[] = {
        { 1, 1, { 6 }, 1, { 4 } },
        { 3, 3, { 2, 6, 9 }, 3, { 1, 4, 8 } },
        { 4, 4, { 2, 3, 6, 9 }, 0, { 0 } },
        { 9, 9, { 0, 1, 2, 3, 4, 6, 7, 8, 9 }, 0, { 0 } },
    };
    for (size_t c = 0; c < sizeof(cases) / sizeof(cases[0]); c++) {
        int k = cases[c].k, nt = cases[c].n1 ? 2 : 1;
        be->iface->ffn_pick(be, &w, k, x, y, nt);
        be->iface->ffn(be, &w, cases[c].t0, k, x, want, 1, NULL);
        if (nt == 2)
            be->iface->ffn(be, &w, cases[c].t1, k, x + E, want + E, 1, NULL);
        CHECK(memcmp(y, want, sizeof(float) * (size_t)nt * E) == 0,
              "ffn_pick k %d (%s, E %d): not the FFN of the expected slots", k, eng_dtype_name(dt), E);
    }
    /* k >= n_slots: every slot (the sketch unread); k 0: nothing */
    be->iface->ffn_pick(be, &w, S, x, y, 2);
    be->iface->ffn(be, &w, NULL, S, x, want, 2, NULL);
    CHECK(memcmp(y, want, sizeof(float) * 2 * E) == 0, "ffn_pick k = n_slots is not ffn()");
    w.sketch = NULL; /* never read */
    be->iface->ffn_pick(be, &w, S + 5, x, y, 1);
    be->iface->ffn(be, &w, NULL, S, x, want, 1, NULL);
    CHECK(memcmp(y, want, sizeof(float) * E) == 0, "ffn_pick k > n_slots is not ffn()");
    w.sketch = sk;
    for (int i = 0; i < E; i++)
        y[i] = 1.0f;
    be->iface->ffn_pick(be, &w, 0, x, y, 1);
    bool zero = true;
    for (int i = 0; i < E; i++)
        zero = zero && y[i] == 0.0f;
    CHECK(zero, "ffn_pick k 0: y not zero");
    free(sk);
    free(gu);
    free(dn);
    free(x);
    free(y);
    free(want);
}

/* The sketch's score of one slot for token x, in double from the
 * documented formats: x rounded to 8 bits per block of 32 (scale amax /
 * 127, codes rint(x * 127 / amax) in float, as the op does), each sketch
 * row's Q4_0 blocks decoded, |silu(g~ . x~) * (u~ . x~)|. */
static double ref_pick_score(const uint8_t *slot, const float *x, int E)
{
    const int nb = E / 32;
    double gu[2];
    for (int r = 0; r < 2; r++) {
        const uint8_t *row = slot + (size_t)r * nb * 18;
        double acc = 0;
        for (int b = 0; b < nb; b++) {
            float amax = 0;
            for (int j = 0; j < 32; j++)
                amax = fabsf(x[32 * b + j]) > amax ? fabsf(x[32 * b + j]) : amax;
            const float inv = amax > 0 ? 127.0f / amax : 0.0f;
            uint16_t dh;
            memcpy(&dh, row + 2 * b, 2);
            for (int j = 0; j < 32; j++) {
                const uint8_t c = row[2 * nb + 16 * b + j % 16];
                const int q = j < 16 ? c & 15 : c >> 4;
                acc += h2d(dh) * (q - 8) * (double)(amax / 127.0f) * rintf(x[32 * b + j] * inv);
            }
        }
        gu[r] = acc;
    }
    return fabs(act_ref(gu[0]) * gu[1]);
}

static const double *sort_score;
static int cmp_idx_desc(const void *a, const void *b)
{
    double x = sort_score[*(const int *)a], y = sort_score[*(const int *)b];
    return x > y ? -1 : x < y ? 1 : *(const int *)a - *(const int *)b;
}

/* Random sketches and tokens: every kernel set's pick is the reference's
 * k best (k chosen where the reference's k-th and (k+1)-th scores are
 * apart by far more than float rounding), so y is bit for bit ffn() over
 * them. E of 1-3 blocks past a multiple of four (the 512-bit kernel's
 * masked last group), of 1-7 past a multiple of eight (AVX2's last chunk,
 * its last pair of blocks half empty when odd) and of whole groups.
 * The tokens of a layer come in an order that drives the op's select both
 * ways (pick_run: over the slots scoring near the last token's k-th best,
 * or over all): a new token, the same again (its k best all listed), half
 * of it (every score smaller: too few listed), twice it (every slot
 * listed), a new one. */
static void test_ffn_pick_random(eng_backend *be, eng_dtype dt)
{
    static const int Es[] = { 32, 64, 96, 160, 224, 576, 640 };
    enum { S = 300 };
    for (size_t ei = 0; ei < sizeof(Es) / sizeof(Es[0]); ei++) {
        const int E = Es[ei], nb = E / 32;
        const size_t sb = eng_sketch_slot_bytes(E);
        uint8_t *sk = malloc(S * sb);
        for (int s = 0; s < S; s++)
            for (int r = 0; r < 2; r++) {
                uint8_t *row = sk + s * sb + r * sb / 2;
                for (int b = 0; b < nb; b++) {
                    uint16_t d = rand_half(0.01f, 0.1f);
                    memcpy(row + 2 * b, &d, 2);
                }
                for (int i = 0; i < 16 * nb; i++)
                    row[2 * nb + i] = (uint8_t)rnd();
            }
        void *gu = make_weights(dt, (long)S * 2 * E);
        void *dn = make_weights(eng_ffn_down_dtype(dt), (long)S * E);
        eng_ffn_weights w = { dt, E, S, gu, dn, sk, g_act, NULL, 0.0f };
        float *x = malloc(sizeof(float) * E), *y = malloc(sizeof(float) * E);
        float *want = malloc(sizeof(float) * E);
        double *score = malloc(sizeof(double) * S);
        int *idx = malloc(sizeof(int) * S), *sel = malloc(sizeof(int) * S);
        for (int tok = 0; tok < 5; tok++) {
            static const float scale[5] = { 0, 1.0f, 0.5f, 4.0f, 0 };
            for (int i = 0; i < E; i++)
                x[i] = scale[tok] > 0 ? x[i] * scale[tok] : frand(-2, 2) * (i % 7 == 3 ? 8.0f : 1.0f);
            for (int s = 0; s < S; s++) {
                score[s] = ref_pick_score(sk + s * sb, x, E);
                idx[s] = s;
            }
            sort_score = score;
            qsort(idx, S, sizeof(int), cmp_idx_desc);
            /* k near 0.38 S whose gap to the next is at least 1e-3 relative */
            int k = (int)(0.38 * S);
            while (k < S - 1 && score[idx[k - 1]] - score[idx[k]] < 1e-3 * score[idx[k - 1]])
                k++;
            CHECK(k < S - 1, "pick random: no gap in the scores (E %d)", E);
            int m = 0;
            for (int s = 0; s < S; s++)
                for (int i = 0; i < k; i++)
                    if (idx[i] == s) {
                        sel[m++] = s;
                        break;
                    }
            be->iface->ffn_pick(be, &w, k, x, y, 1);
            be->iface->ffn(be, &w, sel, k, x, want, 1, NULL);
            CHECK(memcmp(y, want, sizeof(float) * E) == 0,
                  "ffn_pick random (%s, E %d, k %d): not the FFN of the reference's k best",
                  eng_dtype_name(dt), E, k);
        }
        free(sk);
        free(gu);
        free(dn);
        free(x);
        free(y);
        free(want);
        free(score);
        free(idx);
        free(sel);
    }
}

/* ffn_top (ENG_PICK_EXACT): each token's FFN over the k slots of largest
 * |a| of its own activations. Against the activations in double from the
 * weights (k where the k-th and the next differ by 2 %, far more than x's
 * rounding moves them), y within 1e-3 of the largest sum of |a_j d_j| of
 * ffn() over those slots: a slot swapped for the next moves y by a whole
 * term. The tokens come as for ffn_pick (the same again, half, twice,
 * new), so the op's select runs both ways; k >= n_slots is ffn() over
 * all, bit for bit; k 0 gives 0. The same again over two runs, as the
 * pick among a request's candidates reads them: w's first n_a slots in
 * place, the others from a copy in reverse order (a slot read from the
 * wrong run is another slot); k >= n is ffn_runs() over them. */
static void test_ffn_top_e(eng_backend *be, eng_dtype dt, const int E, const int S)
{
    const long R = g_rows(), UO = g_uo(E); /* a slot's rows, its up row's offset */
    void *gu = make_weights(dt, (long)S * R * E);
    void *dn = make_weights(eng_ffn_down_dtype(dt), (long)S * E);
    double *gd = to_double(dt, gu, (long)S * R * E);
    double *dd = to_double(eng_ffn_down_dtype(dt), dn, (long)S * E);
    eng_ffn_weights w = { dt, E, S, gu, dn, NULL, g_act, NULL, 0.0f };
    const int n_a = S / 3 + 1, n_b = S - n_a; /* n_a odd: a pair spans both runs */
    const size_t rs = R * eng_ffn_row_bytes(dt, E), rd = eng_ffn_down_bytes(dt, E);
    char *gu2 = malloc((size_t)n_b * rs), *dn2 = malloc((size_t)n_b * rd);
    for (int j = 0; j < n_b; j++) {
        const int s = S - 1 - j;
        memcpy(gu2 + (size_t)j * rs, (const char *)gu + (size_t)s * rs, rs);
        memcpy(dn2 + (size_t)j * rd, (const char *)dn + (size_t)s * rd, rd);
    }
    eng_ffn_weights w2 = { dt, E, n_b, gu2, dn2, NULL, g_act, NULL, 0.0f };
    float *y2 = malloc(sizeof(float) * E);
    float *x = malloc(sizeof(float) * E), *y = malloc(sizeof(float) * E);
    float *want = malloc(sizeof(float) * E);
    double *score = malloc(sizeof(double) * S), *a = malloc(sizeof(double) * S);
    int *idx = malloc(sizeof(int) * S), *sel = malloc(sizeof(int) * S);
    char *in = malloc(S);
    for (int tok = 0; tok < 5; tok++) {
        static const float scale[5] = { 0, 1.0f, 0.5f, 4.0f, 0 };
        for (int i = 0; i < E; i++)
            x[i] = scale[tok] > 0 ? x[i] * scale[tok] : frand(-1, 1);
        for (int s = 0; s < S; s++) {
            double g = 0, u = 0;
            for (int i = 0; i < E; i++) {
                g += gd[s * R * E + i] * x[i];
                u += gd[s * R * E + UO + i] * x[i];
            }
            a[s] = g_act == ENG_ACT_RELU_SQR ? (u > 0 ? u * u : 0) : act_ref(g) * u;
            score[s] = fabs(a[s]);
            idx[s] = s;
        }
        sort_score = score;
        qsort(idx, S, sizeof(int), cmp_idx_desc);
        int k = S / 3;
        while (k < S - 1 && score[idx[k - 1]] - score[idx[k]] < 2e-2 * score[idx[k - 1]])
            k++;
        CHECK(k < S - 1, "ffn_top: no gap in the activations (E %d)", E);
        memset(in, 0, S);
        for (int i = 0; i < k; i++)
            in[idx[i]] = 1;
        int m = 0;
        for (int s = 0; s < S; s++)
            if (in[s])
                sel[m++] = s;
        be->iface->ffn_top(be, &w, S, NULL, 0, k, x, y, 1);
        be->iface->ffn_top(be, &w, n_a, &w2, n_b, k, x, y2, 1);
        be->iface->ffn(be, &w, sel, k, x, want, 1, NULL);
        double worst = 0, worst2 = 0, mag = 0;
        for (int c = 0; c < E; c++) {
            double sum = 0;
            for (int i = 0; i < k; i++)
                sum += fabs(a[sel[i]] * dd[(long)sel[i] * E + c]);
            mag = sum > mag ? sum : mag;
            worst = fabs(y[c] - want[c]) > worst ? fabs(y[c] - want[c]) : worst;
            worst2 = fabs(y2[c] - want[c]) > worst2 ? fabs(y2[c] - want[c]) : worst2;
        }
        CHECK(worst <= 1e-3 * mag + 1e-6,
              "ffn_top (%s, E %d, k %d, token %d): off by %g of %g: not the FFN of the k largest |a|",
              eng_dtype_name(dt), E, k, tok, worst, mag);
        CHECK(worst2 <= 1e-3 * mag + 1e-6,
              "ffn_top over two runs (%s, E %d, k %d, token %d): off by %g of %g", eng_dtype_name(dt), E,
              k, tok, worst2, mag);
    }
    be->iface->ffn_top(be, &w, n_a, &w2, n_b, S, x, y2, 1);
    be->iface->ffn_runs(be, &w, n_a, &w2, n_b, x, want);
    CHECK(memcmp(y2, want, sizeof(float) * E) == 0, "ffn_top of two runs, k = n, is not ffn_runs()");
    be->iface->ffn_top(be, &w, S, NULL, 0, S, x, y, 1);
    be->iface->ffn(be, &w, NULL, S, x, want, 1, NULL);
    CHECK(memcmp(y, want, sizeof(float) * E) == 0, "ffn_top k = n_slots is not ffn()");
    for (int i = 0; i < E; i++)
        y[i] = 1.0f;
    be->iface->ffn_top(be, &w, S, NULL, 0, 0, x, y, 1);
    bool zero = true;
    for (int i = 0; i < E; i++)
        zero = zero && y[i] == 0.0f;
    CHECK(zero, "ffn_top k 0: y not zero");
    free(gu);
    free(dn);
    free(gu2);
    free(dn2);
    free(gd);
    free(dd);
    free(x);
    free(y);
    free(y2);
    free(want);
    free(score);
    free(a);
    free(idx);
    free(sel);
    free(in);
}

static void test_ffn_pick(eng_backend *be, eng_dtype dt)
{
    test_ffn_top_e(be, dt, eng_dtype_block(dt) == 256 ? 256 : 576, 300);
    if (eng_dtype_block(dt) == 256) { /* the pick is the same for every type: its FFN on these rows */
        test_ffn_pick_e(be, dt, 256);
        return;
    }
    test_ffn_pick_e(be, dt, 64);  /* two blocks: a kernel's tail */
    test_ffn_pick_e(be, dt, 640); /* twenty: groups of eight and a tail */
    test_ffn_pick_random(be, dt);
}

/* Un-gated slots (nemotron_h's squared ReLU: one row a slot, its up
 * row, against relu(u)^2): ffn decode and prefill, over every slot and
 * selections, ffn_runs and ffn_top, in each type an un-gated model's
 * FFN loads as */
static void test_ffn_ungated(eng_backend *be)
{
    static const eng_dtype dts[] = { ENG_DTYPE_F32, ENG_DTYPE_F16, ENG_DTYPE_Q8_0,
                                     ENG_DTYPE_Q4_1, ENG_DTYPE_Q4_K };
    const eng_act saved = g_act;
    g_act = ENG_ACT_RELU_SQR;
    for (size_t i = 0; i < sizeof(dts) / sizeof(dts[0]); i++) {
        test_ffn(be, dts[i]);
        test_ffn_runs(be, dts[i]);
        test_ffn_top_e(be, dts[i], eng_dtype_block(dts[i]) == 256 ? 256 : 576, 300);
    }
    g_act = saved;
}

/* A kept block type's matrices: get_rows, matmul, matmul3 */
static void test_mats(eng_backend *be, eng_dtype dt)
{
    test_get_rows(be, dt);
    test_matmul(be, dt);
    test_matmul3(be, dt);
}

/* Its FFN slots (down rows Q8_0): ffn, ffn_runs, ffn_pick, and the
 * sketch of E columns, seed S */
static void test_slots(eng_backend *be, eng_dtype dt, int E, int S)
{
    test_ffn(be, dt);
    test_ffn_runs(be, dt);
    test_ffn_pick(be, dt);
    test_sketch_dt(be, dt, E, S);
}

/* store_kv_q8: rows pos0.. of a Q8_0 cache, ggml's rule: d = f16(max|x| /
 * 127), q = round(x / d) (ties away from zero), so every code is in
 * [-127, 127], the largest value's code is +-127, and d * q is within d / 2
 * of x plus d's own rounding; rows outside [pos0, pos0 + n) untouched. */
static void test_store_kv_q8(eng_backend *be)
{
    static const struct { long row; int pos0, n; } cs[] = { { 192, 0, 1 }, { 192, 5, 7 },
                                                            { 32, 3, 300 }, { 1024, 1, 2 } };
    for (size_t c = 0; c < sizeof(cs) / sizeof(cs[0]); c++) {
        const long row = cs[c].row, nb = row / 32, n_ctx = cs[c].pos0 + cs[c].n + 2;
        float *src = make_f32(row * cs[c].n, -3, 3);
        for (long i = 0; i < row * cs[c].n; i += 97) /* blocks of mixed magnitudes, one zero */
            src[i] *= (i / 97) % 3 == 0 ? 1000.0f : (i / 97) % 3 == 1 ? 1e-3f : 1.0f;
        for (int j = 0; j < 32 && row * cs[c].n >= 64; j++)
            src[32 + j] = 0.0f;
        eng_q8_block *cache = malloc((size_t)(n_ctx * nb) * sizeof(eng_q8_block));
        memset(cache, 0x5a, (size_t)(n_ctx * nb) * sizeof(eng_q8_block));
        be->iface->store_kv_q8(be, src, cache, row, cs[c].pos0, cs[c].n);
        const unsigned char *raw = (const unsigned char *)cache;
        for (long b = 0; b < n_ctx * nb; b++) {
            const long r = b / nb;
            if (r < cs[c].pos0 || r >= cs[c].pos0 + cs[c].n) {
                for (size_t i = 0; i < sizeof(eng_q8_block); i++)
                    CHECK(raw[b * sizeof(eng_q8_block) + i] == 0x5a,
                          "store_kv_q8 row %ld (pos0 %d, n %d) written", r, cs[c].pos0, cs[c].n);
                continue;
            }
            const float *x = src + (b - (long)cs[c].pos0 * nb) * 32;
            double amax = 0;
            int qmax = 0;
            for (int j = 0; j < 32; j++)
                amax = fabs(x[j]) > amax ? fabs(x[j]) : amax;
            const double d = h2d(cache[b].d);
            CHECK(fabs(d - amax / 127) <= amax / 127 / 1024,
                  "store_kv_q8 block %ld: d %.9g for max %.9g", b, d, amax);
            for (int j = 0; j < 32; j++) {
                const int qj = cache[b].q[j];
                qmax = abs(qj) > qmax ? abs(qj) : qmax;
                CHECK(qj >= -127 && qj <= 127 && fabs(d * qj - x[j]) <= d / 2 + amax / 1024 + 1e-30,
                      "store_kv_q8 block %ld [%d]: %d * %.9g for %.9g", b, j, qj, d, x[j]);
            }
            CHECK(amax == 0 ? qmax == 0 : qmax == 127, "store_kv_q8 block %ld: largest code %d",
                  b, qmax);
        }
        free(src);
        free(cache);
    }
}

static void test_add_store(eng_backend *be)
{
    static const long ns[] = { 1, 7, 8, 100, 70001 };
    for (size_t c = 0; c < sizeof(ns) / sizeof(ns[0]); c++) {
        long n = ns[c];
        float *y = make_f32(n, -5, 5), *x = make_f32(n, -5, 5), *y0 = malloc((size_t)n * 4);
        memcpy(y0, y, (size_t)n * 4);
        be->iface->add(be, y, x, n);
        for (long i = 0; i < n; i++)
            CHECK(y[i] == y0[i] + x[i], "add n=%ld i=%ld", n, i);

        /* store_f16: random values over the half range, subnormals, specials */
        float *src = malloc((size_t)n * 4);
        for (long i = 0; i < n; i++) {
            switch (i % 5) {
            case 0: src[i] = frand(-70000, 70000); break;
            case 1: src[i] = frand(-1, 1) * 1e-5f; break;   /* subnormal halves */
            case 2: src[i] = frand(-1, 1) * 1e-8f; break;   /* underflow to 0 */
            case 3: src[i] = frand(-2, 2); break;
            default: { /* exact midpoints between neighbouring halves */
                uint16_t h = (uint16_t)(rnd() & 0x7bfe);
                src[i] = (float)((h2d(h) + h2d((uint16_t)(h + 1))) / 2) * ((i & 8) ? -1 : 1);
            }
            }
        }
        static const float special[] = { 0.0f, -0.0f, 65504.0f, 65519.99f, 65520.0f, -65520.0f,
                                          INFINITY, -INFINITY, 5.9604645e-08f, 2.9802322e-08f,
                                          2.9802326e-08f, 6.1035156e-05f, 6.1035153e-05f,
                                          1e10f, -1e-30f };
        for (size_t i = 0; i < sizeof(special) / sizeof(special[0]) && (long)i < n; i++)
            src[i] = special[i];
        uint16_t *dst = malloc((size_t)n * 2);
        be->iface->store_f16(be, src, dst, n);
        for (long i = 0; i < n; i++)
            CHECK(dst[i] == ref_f2h(src[i]), "store_f16 %.9g: %04x vs %04x", src[i], dst[i],
                  ref_f2h(src[i]));
        float nanv[9] = { NAN, -NAN, 1, 2, 3, 4, 5, 6, 7 };
        uint16_t nh[9];
        be->iface->store_f16(be, nanv, nh, 9);
        CHECK((nh[0] & 0x7c00) == 0x7c00 && (nh[0] & 0x3ff) != 0, "store_f16 NaN -> %04x", nh[0]);
        CHECK((nh[1] & 0x7c00) == 0x7c00 && (nh[1] & 0x3ff) != 0, "store_f16 -NaN -> %04x", nh[1]);
        free(y);
        free(x);
        free(y0);
        free(src);
        free(dst);
    }
}

/* Backend memory: aligned to a cache line, small and large; a freed large
 * buffer goes back to the kernel at once (weights freed by a hot-swap
 * must not stay resident), and a buffer not yet written is not resident. */
static void test_mem(eng_backend *be)
{
    static const size_t sizes[] = { 0, 1, 100, 4096, 65536 - 64, 65536, 200 * 1024, 64u << 20 };
    for (size_t i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++) {
        void *p = NULL;
        CHECK(be->iface->alloc(be, sizes[i], &p) == 0 && p, "alloc %zu", sizes[i]);
        if (!p)
            continue;
        CHECK(((uintptr_t)p & 63) == 0, "alloc %zu: %p not on a cache line", sizes[i], p);
        memset(p, 0x5a, sizes[i]);
        be->iface->mem_free(be, p);
    }
    be->iface->mem_free(be, NULL);
    /* glibc raises its mmap threshold to the size of a mapped chunk freed
     * (the 64 MiB above): from malloc, 16 MiB would now come out of the
     * heap and stay resident after its free */
    const size_t big = 16u << 20;
    void *p = NULL;
    long r0 = (long)(si_proc_status_bytes("VmRSS") >> 10);
    CHECK(be->iface->alloc(be, big, &p) == 0 && p, "alloc 16 MiB");
    long r1 = (long)(si_proc_status_bytes("VmRSS") >> 10);
    if (p)
        memset(p, 1, big);
    long r2 = (long)(si_proc_status_bytes("VmRSS") >> 10);
    be->iface->mem_free(be, p);
    long r3 = (long)(si_proc_status_bytes("VmRSS") >> 10);
    CHECK(r1 - r0 < 1024, "an untouched 16 MiB buffer is resident: +%ld kB", r1 - r0);
    CHECK(r2 - r1 > 15 * 1024, "16 MiB written: VmRSS +%ld kB", r2 - r1);
#ifndef __SANITIZE_ADDRESS__ /* ASan holds freed memory in its quarantine */
    CHECK(r2 - r3 > 15 * 1024, "16 MiB freed: VmRSS -%ld kB only", r2 - r3);
#else
    (void)r3;
#endif
}

int main(void)
{
    /* the reference conversion itself, on a few known values */
    if (ref_f2h(1.0f) != 0x3c00 || ref_f2h(-2.0f) != 0xc000 || ref_f2h(65504.0f) != 0x7bff ||
        ref_f2h(5.9604645e-08f) != 0x0001 || h2d(0x3555) != 0.333251953125) {
        fprintf(stderr, "reference f16 conversion broken\n");
        return 1;
    }
    /* the best set the machine has, AVX2 forced (on an AVX-512 VNNI
     * machine the two differ in the sketch's dot products), scalar */
    for (int simd = 2; simd >= 0; simd--) {
#if !defined(__x86_64__)
        if (simd == 1) /* no second vector set to force */
            continue;
#endif
        if (simd == 2)
            unsetenv("ENG_CPU_SIMD");
        else
            setenv("ENG_CPU_SIMD", simd ? "avx2" : "0", 1);
        for (int nth = 1; nth <= 3; nth++) {
            eng_backend *be = NULL;
            if (eng_backend_cpu_new(nth, &be) < 0 || !be) {
                fprintf(stderr, "eng_backend_cpu_new(%d) failed\n", nth);
                return 1;
            }
            const char *kn = eng__backend_cpu_kernels(be);
            char cfg[64];
            snprintf(cfg, sizeof(cfg), "%s, %d threads", kn ? kn : "?", nth);
            cur_cfg = cfg;
            CHECK(eng_backend_cpu_n_threads(be) == nth, "n_threads %d", eng_backend_cpu_n_threads(be));
            if (!simd)
                CHECK(kn && strcmp(kn, "scalar") == 0, "ENG_CPU_SIMD=0 ignored: %s", kn);
#if defined(__x86_64__)
            else if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") &&
                     __builtin_cpu_supports("f16c")) {
                bool vnni = __builtin_cpu_supports("avx512f") &&
                            __builtin_cpu_supports("avx512bw") &&
                            __builtin_cpu_supports("avx512vl") &&
                            __builtin_cpu_supports("avx512vnni");
                const char *want = simd == 2 && vnni ? "avx512vnni" : "avx2";
                CHECK(kn && strcmp(kn, want) == 0, "%s machine got %s (ENG_CPU_SIMD %s)",
                      vnni ? "AVX-512 VNNI" : "AVX2", kn, simd == 2 ? "unset" : "avx2");
            }
#elif defined(__aarch64__)
            else
                CHECK(kn && strcmp(kn, "neon") == 0, "AArch64 got %s, not neon", kn);
#endif
            const bool vnni_set = kn && strcmp(kn, "avx512vnni") == 0;
            int before = n_fail;
            for (int d = 0; d < 2; d++) {
                eng_dtype dt = d ? ENG_DTYPE_F32 : ENG_DTYPE_F16;
                test_get_rows(be, dt);
                test_matmul(be, dt);
                test_matmul3(be, dt);
                test_ffn(be, dt);
                test_ffn_runs(be, dt);
                test_ffn_pick(be, dt);
                test_moe(be, dt);
            }
            /* matrices and FFN slots in Q8_0 */
            test_get_rows(be, ENG_DTYPE_Q8_0);
            test_matmul(be, ENG_DTYPE_Q8_0);
            test_matmul3(be, ENG_DTYPE_Q8_0);
            test_ffn(be, ENG_DTYPE_Q8_0);
            test_ffn_runs(be, ENG_DTYPE_Q8_0);
            test_ffn_pick(be, ENG_DTYPE_Q8_0);
            test_sketch_dt(be, ENG_DTYPE_Q8_0, 96, 23);
            test_ssm(be);
            test_delta(be);
            /* matrices in Q4_K (a Q4_K_M file's), and FFN slots (down
             * rows Q8_0) */
            test_get_rows(be, ENG_DTYPE_Q4_K);
            test_matmul(be, ENG_DTYPE_Q4_K);
            test_matmul3(be, ENG_DTYPE_Q4_K);
            test_ffn(be, ENG_DTYPE_Q4_K);
            test_ffn_runs(be, ENG_DTYPE_Q4_K);
            test_ffn_pick(be, ENG_DTYPE_Q4_K);
            test_sketch_dt(be, ENG_DTYPE_Q4_K, 512, 13);
            /* matrices in Q6_K (a Q4_K_M file's head and some v), and
             * beside others in one matmul3: x's forms share abuf */
            test_get_rows(be, ENG_DTYPE_Q6_K);
            test_matmul(be, ENG_DTYPE_Q6_K);
            test_matmul3(be, ENG_DTYPE_Q6_K);
            test_matmul3_dts(be, (const eng_dtype[3]){ ENG_DTYPE_Q4_K, ENG_DTYPE_Q4_K,
                                                       ENG_DTYPE_Q6_K });
            test_matmul3_dts(be, (const eng_dtype[3]){ ENG_DTYPE_Q6_K, ENG_DTYPE_Q8_0,
                                                       ENG_DTYPE_F16 });
            /* matrices in Q5_K (a Q5_K_M file's; its v Q6_K), and beside
             * Q4_K rows, which take the same x */
            test_mats(be, ENG_DTYPE_Q5_K);
            test_matmul3_dts(be, (const eng_dtype[3]){ ENG_DTYPE_Q5_K, ENG_DTYPE_Q5_K,
                                                       ENG_DTYPE_Q6_K });
            test_matmul3_dts(be, (const eng_dtype[3]){ ENG_DTYPE_Q4_K, ENG_DTYPE_Q5_K,
                                                       ENG_DTYPE_Q8_0 });
            /* and FFN slots in Q5_K (down rows Q8_0) */
            test_slots(be, ENG_DTYPE_Q5_K, 512, 13);
            /* matrices and FFN slots (down rows Q8_0) in Q4_1 (the default
             * model's layers), and beside Q8_0 rows, whose x in 16 bits is
             * the same form where they take it */
            test_mats(be, ENG_DTYPE_Q4_1);
            test_matmul3_dts(be, (const eng_dtype[3]){ ENG_DTYPE_Q4_1, ENG_DTYPE_Q8_0,
                                                       ENG_DTYPE_Q4_1 });
            test_matmul3_dts(be, (const eng_dtype[3]){ ENG_DTYPE_Q4_K, ENG_DTYPE_Q4_1,
                                                       ENG_DTYPE_Q6_K });
            test_slots(be, ENG_DTYPE_Q4_1, 96, 23);
            test_moe(be, ENG_DTYPE_Q4_1);
            test_moe(be, ENG_DTYPE_Q8_0);
            /* MXFP4 (gpt-oss's experts): matrices, FFN slots with
             * W_down's rows, experts */
            test_mats(be, ENG_DTYPE_MXFP4);
            test_ffn(be, ENG_DTYPE_MXFP4);
            test_moe(be, ENG_DTYPE_MXFP4);
            g_act = ENG_ACT_SWIGLU_OAI;
            g_bias = true;
            test_ffn(be, ENG_DTYPE_MXFP4);
            g_bias = false;
            g_act = ENG_ACT_SILU;
            /* and Q4_0 (Gemma 3's QAT files), m = -8 d */
            test_mats(be, ENG_DTYPE_Q4_0);
            test_matmul3_dts(be, (const eng_dtype[3]){ ENG_DTYPE_Q4_0, ENG_DTYPE_Q4_1,
                                                       ENG_DTYPE_Q8_0 });
            test_slots(be, ENG_DTYPE_Q4_0, 96, 23);
            /* prefill with x in 8 bits (prefill_q8): the VNNI set's kernels
             * against the bounds with x's rounding (x_unit); the others
             * keep f32 and their bounds */
            CHECK(!eng__backend_cpu_prefill_q8(be, ENG_DTYPE_Q4_1), "8-bit prefill by default");
            CHECK(eng_backend_cpu_set_prefill_q8(be, true) == 0, "set_prefill_q8");
            CHECK(eng__backend_cpu_prefill_q8(be, ENG_DTYPE_Q4_1) == vnni_set &&
                      eng__backend_cpu_prefill_q8(be, ENG_DTYPE_Q8_0) == vnni_set &&
                      eng__backend_cpu_prefill_q8(be, ENG_DTYPE_Q4_K) == vnni_set &&
                      eng__backend_cpu_prefill_q8(be, ENG_DTYPE_Q5_K) == vnni_set &&
                      !eng__backend_cpu_prefill_q8(be, ENG_DTYPE_Q6_K) &&
                      !eng__backend_cpu_prefill_q8(be, ENG_DTYPE_F16),
                  "8-bit prefill where the %s set has it", kn);
            /* (Q4_K and Q5_K: their sub-blocks of 32 as blocks, every
             * matmul shape (rows past a 32-row block, K in U8_KB chunks)
             * and FFN shape) */
            static const eng_dtype q8dts[] = { ENG_DTYPE_Q8_0, ENG_DTYPE_Q4_1, ENG_DTYPE_Q4_0,
                                               ENG_DTYPE_Q4_K, ENG_DTYPE_Q5_K };
            for (int i = 0; i < 5 && vnni_set; i++) {
                test_mats(be, q8dts[i]);
                test_ffn(be, q8dts[i]);
                test_matmul_nonfinite(be, q8dts[i]);
            }
            /* un-gated slots (32 one-row slots a packed block) likewise */
            g_act = ENG_ACT_RELU_SQR;
            for (int i = 0; i < 5 && vnni_set; i++)
                test_ffn(be, q8dts[i]);
            g_act = ENG_ACT_SILU;
            test_matmul3_dts(be, (const eng_dtype[3]){ ENG_DTYPE_Q4_1, ENG_DTYPE_Q8_0,
                                                       ENG_DTYPE_Q4_1 });
            /* (and Q4_K after a Q4_1 matrix of its width: x's Q4_K form is
             * made for it wherever it stands; it was not, off by 5e-5) */
            test_matmul3_dts(be, (const eng_dtype[3]){ ENG_DTYPE_Q4_1, ENG_DTYPE_Q4_K,
                                                       ENG_DTYPE_Q4_0 });
            /* a Q4_K_M file's q, k and v: Q6_K's f32 beside the 8-bit ones */
            test_matmul3_dts(be, (const eng_dtype[3]){ ENG_DTYPE_Q4_K, ENG_DTYPE_Q5_K,
                                                       ENG_DTYPE_Q6_K });
            CHECK(eng_backend_cpu_set_prefill_q8(be, false) == 0, "set_prefill_q8");
            for (int i = 0; i < 5; i++)
                test_matmul_nonfinite(be, q8dts[i]);
            test_silu(be);
            /* GeGLU (Gemma): the FFN's kernels under the other activation */
            g_act = ENG_ACT_GELU;
            test_ffn(be, ENG_DTYPE_F16);
            test_ffn(be, ENG_DTYPE_Q8_0);
            test_ffn(be, ENG_DTYPE_Q4_K);
            test_ffn_runs(be, ENG_DTYPE_F16);
            test_ffn_pick(be, ENG_DTYPE_F16);
            test_silu(be);
            g_act = ENG_ACT_SILU;
            test_ffn_ungated(be);
            /* gpt-oss's experts: biases and its activation (the ffn op's
             * own path for them, over every slot or a selection: a matmul
             * and the down phase, whose types the tests above cover) */
            g_act = ENG_ACT_SWIGLU_OAI;
            g_bias = true;
            test_ffn(be, ENG_DTYPE_Q8_0);
            g_bias = false;
            g_act = ENG_ACT_SILU;
            test_ffn_cut(be, ENG_DTYPE_F32, 64);
            test_ffn_cut(be, ENG_DTYPE_F16, 96);
            test_ffn_cut(be, ENG_DTYPE_Q8_0, 256);
            test_ffn_cut(be, ENG_DTYPE_Q4_1, 256);
            test_ffn_cut(be, ENG_DTYPE_Q4_K, 512);
            test_rmsnorm(be);
            test_rope(be);
            test_attention(be);
            test_add_store(be);
            test_store_kv_q8(be);
            printf("%-22s %s\n", cfg, n_fail == before ? "ok" : "FAILED");
            be->iface->free(be);
        }
    }
    eng_backend *be = NULL;
    if (eng_backend_cpu_new(0, &be) < 0 || eng_backend_cpu_n_threads(be) < 1) {
        fprintf(stderr, "eng_backend_cpu_new(0) failed\n");
        return 1;
    }
    /* memory is the same whatever the kernels and threads: once */
    cur_cfg = "memory";
    test_mem(be);
    be->iface->free(be);
    if (eng_backend_cpu_new(1, NULL) != -22) {
        fprintf(stderr, "NULL ret_backend accepted\n");
        return 1;
    }
    printf("%d failures\n", n_fail);
    return n_fail ? 1 : 0;
}
