/* si-kbench: speed of the CPU backend's decode kernels against the
 * machine's read bandwidth.
 *
 *   si-kbench [-t threads] [-q] [-s gemv|ffn|attention|prefill]
 *
 * Roofline: a streaming read of a 512 MiB buffer split over the thread pool.
 * Decode GEMV (f16, one token) and FFN (all slots, 40 % of them, and 25 %
 * picked per call by a 4-bit sketch of all, ENG_PICK_TOKEN) are timed
 * "cold": the weights rotate over copies larger than the last-level cache,
 * as in a real decode step where each layer's weights come from DRAM. "hot"
 * repeats one copy (cache resident for the small shapes). Decode attention
 * (one token over an f16 or a Q8_0 cache of 128 to 2048 positions,
 * SmolLM2's and Llama-3.2-1B's heads) is timed the same two ways. Prefill numbers
 * (GFLOP/s, n_tokens > 1) show the gain of row reuse over n GEMVs.
 */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "backend.h"
#include "threadpool.h"

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#endif


static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

static uint64_t rng = 88172645463325252ull;
static uint64_t rnd(void)
{
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return rng;
}

/* Halves in +-[0.5, 1), floats in (-1, 1): no subnormals to slow anything. */
static void *alloc_weights(eng_dtype dt, size_t n)
{
    size_t bytes = eng_dtype_bytes(dt, n);
    void *p = aligned_alloc(64, (bytes + 63) / 64 * 64);
    if (!p)
        return NULL;
    if (dt == ENG_DTYPE_Q4_K) { /* n a multiple of 256; d, dmin in [2^-10, 2^-9) */
        eng_q4k_block *b = p;
        for (size_t i = 0; i < n / 256; i++) {
            b[i].d = (uint16_t)((rnd() & 0x03ff) | 0x1400);
            b[i].dmin = (uint16_t)((rnd() & 0x03ff) | 0x1400);
            for (int j = 0; j < 12; j++)
                b[i].scales[j] = (uint8_t)rnd();
            for (int j = 0; j < 128; j++)
                b[i].qs[j] = (uint8_t)rnd();
        }
    } else if (dt == ENG_DTYPE_Q5_K) { /* as Q4_K, and the fifth bits */
        eng_q5k_block *b = p;
        for (size_t i = 0; i < n / 256; i++) {
            b[i].d = (uint16_t)((rnd() & 0x03ff) | 0x1400);
            b[i].dmin = (uint16_t)((rnd() & 0x03ff) | 0x1400);
            for (int j = 0; j < 12; j++)
                b[i].scales[j] = (uint8_t)rnd();
            for (int j = 0; j < 32; j++)
                b[i].qh[j] = (uint8_t)rnd();
            for (int j = 0; j < 128; j++)
                b[i].qs[j] = (uint8_t)rnd();
        }
    } else if (dt == ENG_DTYPE_Q6_K) { /* n a multiple of 256; d in [2^-10, 2^-9) */
        eng_q6k_block *b = p;
        for (size_t i = 0; i < n / 256; i++) {
            b[i].d = (uint16_t)((rnd() & 0x03ff) | 0x1400);
            for (int j = 0; j < 16; j++)
                b[i].scales[j] = (int8_t)rnd();
            for (int j = 0; j < 128; j++)
                b[i].ql[j] = (uint8_t)rnd();
            for (int j = 0; j < 64; j++)
                b[i].qh[j] = (uint8_t)rnd();
        }
    } else if (dt == ENG_DTYPE_Q4_1) { /* n a multiple of 32; d in [2^-8, 2^-7), m < 0 */
        eng_q41_block *b = p;
        for (size_t i = 0; i < n / 32; i++) {
            b[i].d = (uint16_t)((rnd() & 0x03ff) | 0x1c00);
            b[i].m = (uint16_t)((rnd() & 0x03ff) | 0xa400);
            for (int j = 0; j < 16; j++)
                b[i].qs[j] = (uint8_t)rnd();
        }
    } else if (dt == ENG_DTYPE_Q8_0) { /* n a multiple of 32; scales in +-[2^-8, 2^-7) */
        eng_q8_block *b = p;
        for (size_t i = 0; i < n / 32; i++) {
            b[i].d = (uint16_t)((rnd() & 0x83ff) | 0x1c00);
            for (int j = 0; j < 32; j++)
                b[i].q[j] = (int8_t)(rnd() % 255 - 127);
        }
    } else if (dt == ENG_DTYPE_F16) {
        uint16_t *h = p;
        for (size_t i = 0; i < n; i++)
            h[i] = (uint16_t)((rnd() & 0x83ff) | 0x3800);
    } else {
        float *f = p;
        for (size_t i = 0; i < n; i++)
            f[i] = (float)((int64_t)(rnd() >> 40) - (1 << 23)) / (1 << 23);
    }
    return p;
}

static float *alloc_f32(size_t n)
{
    float *p = aligned_alloc(64, (n * 4 + 63) / 64 * 64);
    if (p)
        for (size_t i = 0; i < n; i++)
            p[i] = (float)((int64_t)(rnd() >> 40) - (1 << 23)) / (1 << 23);
    return p;
}

/* ---- roofline: streaming read ------------------------------------------ */

typedef struct read_args {
    const uint8_t *buf;
    size_t n;
    int streams;  /* each thread walks its part as this many interleaved streams */
    int prefetch; /* software prefetch distance in bytes, 0: none */
    double sink[64];
} read_args;

#if defined(__x86_64__) || defined(__i386__)
__attribute__((target("avx2"))) static double read_avx2(const uint8_t *p, size_t n, int ns, int pf)
{
    __m256i a0 = _mm256_setzero_si256(), a1 = a0;
    size_t per = n / (size_t)ns / 64 * 64;
    for (size_t i = 0; i + 64 <= per; i += 64)
        for (int q = 0; q < ns; q++) {
            const uint8_t *s = p + (size_t)q * per + i;
            if (pf)
                _mm_prefetch((const char *)s + pf, _MM_HINT_T0);
            a0 = _mm256_xor_si256(a0, _mm256_load_si256((const __m256i *)s));
            a1 = _mm256_xor_si256(a1, _mm256_load_si256((const __m256i *)(s + 32)));
        }
    a0 = _mm256_xor_si256(a0, a1);
    return (double)_mm256_extract_epi64(a0, 0);
}
#endif

static double read_scalar(const uint8_t *p, size_t n, int ns)
{
    uint64_t a = 0, b = 0;
    size_t per = n / (size_t)ns / 64 * 64;
    for (size_t i = 0; i + 64 <= per; i += 64)
        for (int q = 0; q < ns; q++)
            for (int k = 0; k < 64; k += 16) {
                uint64_t x, y;
                memcpy(&x, p + (size_t)q * per + i + k, 8);
                memcpy(&y, p + (size_t)q * per + i + k + 8, 8);
                a ^= x;
                b ^= y;
            }
    return (double)(a ^ b);
}

#if defined(__x86_64__) || defined(__i386__)
static bool have_avx2(void)
{
    return __builtin_cpu_supports("avx2");
}
#endif

static void read_task(void *p, int ith, int nth)
{
    read_args *a = p;
    long b, e;
    long pages = (long)(a->n / 4096);
    eng_split(pages, ith, nth, &b, &e);
    const uint8_t *s = a->buf + (size_t)b * 4096;
    size_t n = (size_t)(e - b) * 4096;
    double r;
#if defined(__x86_64__) || defined(__i386__)
    if (have_avx2())
        r = read_avx2(s, n, a->streams, a->prefetch);
    else
#endif
        r = read_scalar(s, n, a->streams);
    a->sink[ith & 63] += r;
}

/* Best GB/s of a streaming read of 512 MiB on n_threads: *ret_simple for one
 * sequential stream per thread (the plain loop), the return value for the
 * best of several interleaved streams per thread, with and without software
 * prefetch (one core keeps more lines in flight with several streams). */
static double roofline(int n_threads, int reps, double *ret_simple)
{
    size_t n = (size_t)512 << 20;
    uint8_t *buf = aligned_alloc(4096, n);
    if (!buf)
        return 0;
    for (size_t i = 0; i < n; i += 8) {
        uint64_t v = rnd();
        memcpy(buf + i, &v, 8);
    }
    eng_threadpool *pool;
    if (eng_threadpool_new(n_threads, &pool) < 0) {
        free(buf);
        return 0;
    }
    static const int variants[][2] = { { 1, 0 }, { 4, 0 }, { 8, 0 }, { 4, 1024 }, { 8, 1024 } };
    double best = 0;
    for (size_t v = 0; v < sizeof(variants) / sizeof(variants[0]); v++) {
        read_args a = { buf, n, variants[v][0], variants[v][1], { 0 } };
        eng_threadpool_run(pool, read_task, &a); /* warm-up */
        double vbest = 0;
        for (int r = 0; r < reps; r++) {
            double t0 = now_s();
            eng_threadpool_run(pool, read_task, &a);
            double gbs = n / (now_s() - t0) / 1e9;
            if (gbs > vbest)
                vbest = gbs;
        }
        if (v == 0)
            *ret_simple = vbest;
        if (vbest > best)
            best = vbest;
    }
    eng_threadpool_free(pool);
    free(buf);
    return best;
}

/* ---- decode GEMV ---------------------------------------------------------- */

/* Copies of one shape covering at least 'bytes_min' (1 copy: hot). */
static double bench_gemv(eng_backend *be, eng_dtype dt, int rows, int cols, bool cold, double secs,
                         double *ret_gbs)
{
    size_t wbytes = eng_dtype_bytes(dt, (size_t)rows * cols);
    int copies = cold ? (int)((256u << 20) / wbytes + 1) : 1;
    if (copies < 2 && cold)
        copies = 2;
    uint8_t *w = alloc_weights(dt, (size_t)rows * cols * copies);
    float *x = alloc_f32((size_t)cols), *y = alloc_f32((size_t)rows);
    if (!w || !x || !y) {
        free(w);
        free(x);
        free(y);
        return -1;
    }
    eng_weight W = { dt, rows, cols, w };
    long iters = 0;
    for (int i = 0; i < copies; i++) { /* warm-up: touch all */
        W.data = w + (size_t)i * wbytes;
        be->iface->matmul(be, &W, NULL, x, y, 1);
    }
    double t0 = now_s(), t;
    do {
        for (int i = 0; i < copies; i++, iters++) {
            W.data = w + (size_t)i * wbytes;
            be->iface->matmul(be, &W, NULL, x, y, 1);
        }
        t = now_s() - t0;
    } while (t < secs);
    free(w);
    free(x);
    free(y);
    *ret_gbs = (double)wbytes * iters / t / 1e9;
    return t / iters * 1e6;
}

/* ---- decode FFN ----------------------------------------------------------- */

static int cmp_i32(const void *a, const void *b)
{
    int32_t x = *(const int32_t *)a, y = *(const int32_t *)b;
    return (x > y) - (x < y);
}

/* The FFN over frac of S slots: a fixed list (shuffled or sorted), or with
 * pick each call's own k = frac * S slots by a sketch (ffn_pick). GB/s
 * counts the weights of the computed slots and, with pick, the sketch. */
static double bench_ffn(eng_backend *be, eng_dtype dt, int E, int S, double frac, bool sorted,
                        bool cold, bool pick, int n_tokens, double secs, double *ret_gbs)
{
    const size_t rb = eng_ffn_row_bytes(dt, E), rd = eng_ffn_down_bytes(dt, E);
    size_t gub = (size_t)S * 2 * rb, dnb = (size_t)S * rd;
    size_t skb = pick ? (size_t)S * eng_sketch_slot_bytes(E) : 0;
    int copies = cold ? (int)((256u << 20) / (gub + dnb + skb) + 1) : 1;
    uint8_t *gu = alloc_weights(dt, (size_t)S * 2 * E * copies);
    uint8_t *dn = alloc_weights(eng_ffn_down_dtype(dt), (size_t)S * E * copies);
    uint8_t *sk = pick ? malloc(skb * copies) : NULL;
    float *x = alloc_f32((size_t)E * n_tokens), *y = alloc_f32((size_t)E * n_tokens);
    int n_sel = (int)(S * frac + 0.5);
    int32_t *sel = malloc(sizeof(int32_t) * (size_t)S);
    if (!gu || !dn || !x || !y || !sel || (pick && !sk)) {
        free(gu);
        free(dn);
        free(sk);
        free(x);
        free(y);
        free(sel);
        return -1;
    }
    /* random nibbles under a scale of 1.0 (f16 0x3c00) per block */
    for (size_t b = 0; pick && b < skb * copies / ENG_SKETCH_BLOCK_BYTES; b++) {
        uint8_t *blk = sk + b * ENG_SKETCH_BLOCK_BYTES;
        blk[0] = 0x00;
        blk[1] = 0x3c;
        for (int j = 2; j < ENG_SKETCH_BLOCK_BYTES; j++)
            blk[j] = (uint8_t)rnd();
    }
    for (int i = 0; i < S; i++)
        sel[i] = i;
    for (int i = S - 1; i > 0; i--) {
        int j = (int)(rnd() % (uint64_t)(i + 1));
        int32_t tmp = sel[i];
        sel[i] = sel[j];
        sel[j] = tmp;
    }
    if (sorted)
        qsort(sel, (size_t)n_sel, sizeof(int32_t), cmp_i32);
    eng_ffn_weights W = { dt, E, S, gu, dn, NULL, ENG_ACT_SILU, NULL, 0.0f };
    const int32_t *sp = frac >= 1.0 ? NULL : sel;
    long iters = -copies; /* the first round warms up */
    double t0 = 0, t = 0;
    do {
        for (int i = 0; i < copies; i++, iters++) {
            if (iters == 0)
                t0 = now_s();
            W.gate_up = gu + (size_t)i * gub;
            W.down = dn + (size_t)i * dnb;
            if (pick) {
                W.sketch = sk + (size_t)i * skb;
                be->iface->ffn_pick(be, &W, n_sel, x, y, n_tokens);
            } else {
                be->iface->ffn(be, &W, sp, n_sel, x, y, n_tokens, NULL);
            }
        }
        t = iters > 0 ? now_s() - t0 : 0;
    } while (t < secs);
    free(gu);
    free(dn);
    free(sk);
    free(x);
    free(y);
    free(sel);
    *ret_gbs = ((double)n_sel * (2 * rb + rd) + (double)skb) * iters / t / 1e9;
    return t / iters * 1e6;
}

/* Decode attention of one token over n_kv cached positions (f16 K and V,
 * [n_kv][n_head_kv][head_dim], or Q8_0 blocks with q8), cold as the
 * weights are: the caches rotate over copies larger than the last-level
 * cache, as a layer's cache comes back after every other layer's weights
 * went through. GB/s counts K and V. */
static double bench_attention(eng_backend *be, int H, int Hkv, int hd, int n_kv, bool q8,
                              bool cold, double secs, double *ret_gbs)
{
    const eng_dtype dt = q8 ? ENG_DTYPE_Q8_0 : ENG_DTYPE_F16;
    const size_t kvb = eng_dtype_bytes(dt, (size_t)n_kv * Hkv * hd);
    int copies = cold ? (int)((256u << 20) / (2 * kvb) + 1) : 1;
    char *k = alloc_weights(dt, (size_t)n_kv * Hkv * hd * copies);
    char *v = alloc_weights(dt, (size_t)n_kv * Hkv * hd * copies);
    float *q = alloc_f32((size_t)H * hd), *out = alloc_f32((size_t)H * hd);
    if (!k || !v || !q || !out) {
        free(k);
        free(v);
        free(q);
        free(out);
        return -1;
    }
    const size_t step = kvb; /* bytes */
    long iters = -copies; /* the first round warms up */
    double t0 = 0, t = 0;
    do {
        for (int i = 0; i < copies; i++, iters++) {
            if (iters == 0)
                t0 = now_s();
            if (q8)
                be->iface->attention_q8(be, q, (const eng_q8_block *)(k + i * step),
                                        (const eng_q8_block *)(v + i * step), out, 1, n_kv - 1,
                                        H, Hkv, hd, 0.125f, 0, 0.0f, NULL);
            else
                be->iface->attention(be, q, (const uint16_t *)(k + i * step),
                                     (const uint16_t *)(v + i * step), out, 1, n_kv - 1, H, Hkv,
                                     hd, 0.125f, 0, 0.0f, NULL);
        }
        t = iters > 0 ? now_s() - t0 : 0;
    } while (t < secs);
    free(k);
    free(v);
    free(q);
    free(out);
    *ret_gbs = 2.0 * kvb * iters / t / 1e9;
    return t / iters * 1e6;
}

/* ---- prefill --------------------------------------------------------------- */

static double bench_prefill_mm(eng_backend *be, eng_dtype dt, int rows, int cols, int nt,
                               double secs)
{
    void *w = alloc_weights(dt, (size_t)rows * cols);
    float *x = alloc_f32((size_t)cols * nt), *y = alloc_f32((size_t)rows * nt);
    if (!w || !x || !y) {
        free(w);
        free(x);
        free(y);
        return -1;
    }
    eng_weight W = { dt, rows, cols, w };
    be->iface->matmul(be, &W, NULL, x, y, nt);
    long iters = 0;
    double t0 = now_s(), t;
    do {
        be->iface->matmul(be, &W, NULL, x, y, nt);
        iters++;
        t = now_s() - t0;
    } while (t < secs);
    free(w);
    free(x);
    free(y);
    return 2.0 * rows * cols * nt * iters / t / 1e9;
}

static double bench_prefill_ffn(eng_backend *be, eng_dtype dt, int E, int S, int nt, double secs)
{
    double gbs;
    double us = bench_ffn(be, dt, E, S, 1.0, false, false, false, nt, secs, &gbs);
    return us > 0 ? 2.0 * 3 * E * S * nt / (us * 1e-6) / 1e9 : -1;
}

static bool is_section(const char *s)
{
    return !strcmp(s, "gemv") || !strcmp(s, "ffn") || !strcmp(s, "attention") ||
           !strcmp(s, "prefill");
}

int main(int argc, char **argv)
{
    int n_threads = 2;
    bool quick = false;
    const char *only = NULL; /* -s: one section, else all */
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "-t") && i + 1 < argc)
            n_threads = atoi(argv[++i]);
        else if (!strcmp(argv[i], "-q"))
            quick = true;
        else if (!strcmp(argv[i], "-s") && i + 1 < argc && is_section(argv[i + 1]))
            only = argv[++i];
        else {
            fprintf(stderr, "usage: %s [-t threads] [-q] [-s gemv|ffn|attention|prefill]\n",
                    argv[0]);
            return 2;
        }
    }
#define RUN(name) (!only || !strcmp(only, (name)))
    double secs = quick ? 0.3 : 1.0;
    eng_backend *be;
    int r = eng_backend_cpu_new(n_threads, &be);
    if (r < 0) {
        fprintf(stderr, "Failed to create the CPU backend: %s\n", strerror(-r));
        return 1;
    }
    n_threads = eng_backend_cpu_n_threads(be);
    printf("si-kbench: %d threads, kernels %s\n\n", n_threads, eng__backend_cpu_kernels(be));

    double s1, sn;
    double bw1 = roofline(1, quick ? 2 : 4, &s1);
    double bw = n_threads == 1 ? bw1 : roofline(n_threads, quick ? 2 : 4, &sn);
    if (n_threads == 1)
        sn = s1;
    printf("read bandwidth, 512 MiB     1 thread     %d threads\n", n_threads);
    printf("  one stream per thread   %6.2f GB/s  %6.2f GB/s\n", s1, sn);
    printf("  best (streams, prefetch)%6.2f GB/s  %6.2f GB/s   <- roofline for the ratios\n\n",
           bw1, bw);

    if (RUN("gemv")) {
        printf("decode GEMV, f16, 1 token            time/op      GB/s   of roofline\n");
        static const int shapes[][2] = { { 576, 576 }, { 192, 576 }, { 1536, 576 }, { 576, 1536 },
                                         { 49152, 576 } };
        for (int c = 0; c < 2; c++)
            for (size_t s = 0; s < sizeof(shapes) / sizeof(shapes[0]); s++) {
                double gbs = 0, us = bench_gemv(be, ENG_DTYPE_F16, shapes[s][0], shapes[s][1],
                                                c == 0, secs, &gbs);
                printf("  %5d x %-5d %-4s              %9.1f us %8.2f   %5.1f %%\n", shapes[s][0],
                       shapes[s][1], c == 0 ? "cold" : "hot", us, gbs, 100 * gbs / bw);
            }
        {
            double gbs = 0, us = bench_gemv(be, ENG_DTYPE_F32, 49152, 576, true, secs, &gbs);
            printf("  49152 x 576   cold f32          %9.1f us %8.2f   %5.1f %%\n", us, gbs,
                   100 * gbs / bw);
            /* a matrix the file holds in Q8_0 (SmolLM2's tied head) */
            us = bench_gemv(be, ENG_DTYPE_Q8_0, 49152, 576, true, secs, &gbs);
            printf("  49152 x 576   cold q8_0         %9.1f us %8.2f   %5.1f %%\n", us, gbs,
                   100 * gbs / bw);
            us = bench_gemv(be, ENG_DTYPE_Q8_0, 576, 576, true, secs, &gbs);
            printf("    576 x 576   cold q8_0         %9.1f us %8.2f   %5.1f %%\n", us, gbs,
                   100 * gbs / bw);
            /* the default model's layers: Q4_1 in the file, kept so */
            us = bench_gemv(be, ENG_DTYPE_Q4_1, 576, 576, true, secs, &gbs);
            printf("    576 x 576   cold q4_1         %9.1f us %8.2f   %5.1f %%\n", us, gbs,
                   100 * gbs / bw);
            us = bench_gemv(be, ENG_DTYPE_Q4_1, 32768, 2048, true, secs, &gbs);
            printf("  32768 x 2048  cold q4_1         %9.1f us %8.2f   %5.1f %%\n", us, gbs,
                   100 * gbs / bw);
            us = bench_gemv(be, ENG_DTYPE_Q4_1, 512, 2048, false, secs, &gbs);
            printf("    512 x 2048  hot  q4_1         %9.1f us %8.2f   %5.1f %%\n", us, gbs,
                   100 * gbs / bw);
        }
        /* Llama-3.2-1B's width: a Q4_K_M or Q5_K_M file's matrices (Q4_K
         * or Q5_K, and Q6_K for its head and some attn_v) against Q8_0 */
        static const eng_dtype kdt[] = { ENG_DTYPE_Q4_K, ENG_DTYPE_Q5_K, ENG_DTYPE_Q6_K,
                                         ENG_DTYPE_Q8_0 };
        static const char *const kdn[] = { "q4_k", "q5_k", "q6_k", "q8_0" };
        for (int c = 0; c < 2; c++)
            for (int k = 0; k < 4; k++) {
                const int rows = c ? 512 : 32768;
                double gbs = 0, us = bench_gemv(be, kdt[k], rows, 2048, c == 0, secs, &gbs);
                printf("  %5d x 2048  %-4s %-4s         %9.1f us %8.2f   %5.1f %%\n", rows,
                       c ? "hot" : "cold", kdn[k], us, gbs, 100 * gbs / bw);
            }
    }

    struct {
        double frac;
        bool sorted, cold, pick;
        const char *name;
    } fc[] = {
        { 1.0, false, true, false, "all slots, cold" },
        { 0.4, true, true, false, "40 % sorted, cold" },
        { 0.4, false, true, false, "40 % shuffled, cold" },
        { 0.25, false, true, true, "sketch + 25 % picked, cold" },
        { 1.0, false, false, false, "all slots, hot" },
        { 0.4, true, false, false, "40 % sorted, hot" },
        { 0.25, false, false, true, "sketch + 25 % picked, hot" },
        { 0.001, false, true, true, "sketch alone (k 2), cold" },
        { 0.001, false, false, true, "sketch alone (k 2), hot" },
    };
    if (RUN("ffn")) {
        /* the default model's FFN: f16, Q8_0, and the file's Q4_1 gate and
         * up rows (down rows Q8_0) */
        static const eng_dtype sdt[] = { ENG_DTYPE_F16, ENG_DTYPE_Q8_0, ENG_DTYPE_Q4_1 };
        static const char *const sdn[] = { "f16", "q8_0", "q4_1 (down q8_0)" };
        for (int q = 0; q < 3; q++) {
            const eng_dtype dt = sdt[q];
            printf("\ndecode FFN, %s, n_embd 576, 1536 slots\n", sdn[q]);
            for (size_t i = 0; i < sizeof(fc) / sizeof(fc[0]); i++) {
                double gbs = 0, us = bench_ffn(be, dt, 576, 1536, fc[i].frac, fc[i].sorted,
                                               fc[i].cold, fc[i].pick, 1, secs, &gbs);
                printf("  %-26s        %9.1f us %8.2f   %5.1f %%\n", fc[i].name, us, gbs,
                       100 * gbs / bw);
            }
        }

        /* Llama-3.2-1B's FFN: a Q4_K (Q5_K) file's gate and up rows stay
         * Q4_K (Q5_K; down rows Q8_0), against the same in Q8_0 and f16 */
        static const eng_dtype ldt[] = { ENG_DTYPE_F16, ENG_DTYPE_Q8_0, ENG_DTYPE_Q4_K,
                                         ENG_DTYPE_Q5_K };
        static const char *const ldn[] = { "f16", "q8_0", "q4_k (down q8_0)",
                                           "q5_k (down q8_0)" };
        for (int q = 0; q < 4; q++) {
            printf("\ndecode FFN, %s, n_embd 2048, 8192 slots\n", ldn[q]);
            for (size_t i = 0; i < 3; i++) {
                double gbs = 0, us = bench_ffn(be, ldt[q], 2048, 8192, fc[i].frac, fc[i].sorted,
                                               fc[i].cold, fc[i].pick, 1, secs, &gbs);
                printf("  %-26s        %9.1f us %8.2f   %5.1f %%\n", fc[i].name, us, gbs,
                       100 * gbs / bw);
            }
        }
    }

    if (RUN("attention")) {
        static const int ashapes[][3] = { { 9, 3, 64 }, { 32, 8, 64 } };
        static const int n_kvs[] = { 128, 256, 512, 2048 };
        for (int q8 = 0; q8 < 2; q8++) {
            printf("\ndecode attention, %s cache, 1 token\n", q8 ? "q8_0" : "f16");
            for (size_t s = 0; s < 2; s++)
                for (int c = 0; c < 2; c++)
                    for (size_t i = 0; i < 4; i++) {
                        double gbs = 0, us = bench_attention(be, ashapes[s][0], ashapes[s][1],
                                                             ashapes[s][2], n_kvs[i], q8, c == 0,
                                                             secs, &gbs);
                        printf("  %2d/%d heads x %d, %4d pos %-4s  %9.1f us %8.2f   %5.1f %%\n",
                               ashapes[s][0], ashapes[s][1], ashapes[s][2], n_kvs[i],
                               c == 0 ? "cold" : "hot", us, gbs, 100 * gbs / bw);
                    }
        }
    }

    if (RUN("prefill")) {
        printf("\nprefill, f16 (GFLOP/s)\n");
        static const int nts[] = { 1, 8, 64, 256 };
        for (size_t i = 0; i < 4; i++)
            printf("  matmul 576 x 576, %3d tokens         %8.1f\n", nts[i],
                   bench_prefill_mm(be, ENG_DTYPE_F16, 576, 576, nts[i], secs));
        for (size_t i = 0; i < 4; i++)
            printf("  ffn 576 x 1536, %3d tokens           %8.1f\n", nts[i],
                   bench_prefill_ffn(be, ENG_DTYPE_F16, 576, 1536, nts[i], secs));
        printf("  matmul 576 x 576 f32, 64 tokens       %8.1f\n",
               bench_prefill_mm(be, ENG_DTYPE_F32, 576, 576, 64, secs));
    }

    be->iface->free(be);
    return 0;
}
