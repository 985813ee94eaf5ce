/* CUDA kernels (kernels/si-cuda.h) against the CPU backend, op by op.
 *
 * Exits 77 (skipped) where there is no CUDA device or driver. Random data
 * with odd sizes, both vectorized and scalar kernel paths, decode and
 * prefill shapes, splits of long attention, GQA, selections with slots out
 * of range. Unselected FFN slots hold NaN, so touching one shows up.
 *
 * Error bounds (per element, against magnitudes computed here in double, so
 * they hold for any size; a real bug is off by O(magnitude)):
 *   get_rows, add, store_f16, to_f32, argmax, top-alpha counts: exact.
 *   rmsnorm: |y - cpu| <= 2e-6 |cpu| + 1e-7
 *   rope: |y - cpu| <= 4e-6 (|x0| + |x1|)
 *   GEMV (one token, f32 x): |y - cpu| <= 3e-5 sum_k |w_k x_k| + 1e-6 |bias|
 *   matmul (cuBLAS, x rounded to f16): 2e-3 sum_k |w_k x_k| + 1e-6 |bias|
 *   attention: |o - cpu| <= 5e-5 max|v| + 5e-5 |cpu|
 *   ffn, decode: a_j within tol_a(2e-5), y within 2e-5 sum_j |a_j d_j| +
 *     sum_j tol_a |d_j|; prefill (x and a rounded to f16): the same with
 *     2e-3. tol_a(r) = 1.1 r G (|u| + r U) + (|g| + 0.3 + r G) r U, where
 *     G = sum |g_k x_k|, U = sum |u_k x_k|: how dot errors pass through
 *     silu(g) u.
 */
#include <errno.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend.h"
#include "si-cuda.h"

static int n_fail;
static const char *cur = "";

#define CHECK(cond, ...)                                                                     \
    do {                                                                                     \
        if (!(cond)) {                                                                       \
            if (n_fail < 40) {                                                               \
                fprintf(stderr, "FAIL [%s] %s:%d: ", cur, __FILE__, __LINE__);               \
                fprintf(stderr, __VA_ARGS__);                                                \
                fprintf(stderr, "\n");                                                       \
            }                                                                                \
            n_fail++;                                                                        \
        }                                                                                    \
    } while (0)

/* A CUDA call that must succeed: a failure ends the test with the reason. */
#define OK(call)                                                                             \
    do {                                                                                     \
        int r_ = (call);                                                                     \
        if (r_ < 0) {                                                                        \
            fprintf(stderr, "%s:%d: %s = %d: %s\n", __FILE__, __LINE__, #call, r_,           \
                    si_cuda_last_error());                                                   \
            exit(1);                                                                         \
        }                                                                                    \
    } while (0)

static si_cuda *gc;
static eng_backend *cpu;

/* ---- helpers ---------------------------------------------------------------- */

static uint64_t rng_state = 0x2545f4914f6cdd1dull;

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

static void *xmalloc(size_t n)
{
    void *p = malloc(n ? n : 1);
    if (!p) {
        fprintf(stderr, "out of memory\n");
        exit(1);
    }
    return p;
}

static float *frandv(size_t n, float lo, float hi)
{
    float *p = xmalloc(n * sizeof(float));
    for (size_t i = 0; i < n; i++)
        p[i] = frand(lo, hi);
    return p;
}

/* f16 bits through the CPU backend's own conversion (round to nearest even) */
static uint16_t *to_half(const float *f, size_t n)
{
    uint16_t *h = xmalloc(n * sizeof(uint16_t));
    cpu->iface->store_f16(cpu, f, h, (long)n);
    return h;
}

static float h2f(uint16_t h)
{
    float f;
    cpu->iface->get_rows(cpu, &(eng_weight){ ENG_DTYPE_F16, 1, 1, &h }, &(int32_t){ 0 }, 1, &f);
    return f;
}

static uint16_t *rand_half(size_t n, float lo, float hi)
{
    float *f = frandv(n, lo, hi);
    uint16_t *h = to_half(f, n);
    free(f);
    return h;
}

static void *dev(size_t bytes)
{
    void *p;
    OK(si_cuda_alloc(gc, bytes, &p));
    return p;
}

static void *dev_copy(const void *src, size_t bytes)
{
    void *p = dev(bytes);
    OK(si_cuda_upload(gc, p, src, bytes));
    return p;
}

static void get(void *dst, const void *src, size_t bytes)
{
    OK(si_cuda_download(gc, dst, src, bytes));
    OK(si_cuda_sync(gc));
}

static void dfree(void *p)
{
    si_cuda_dev_free(gc, p);
}

/* ---- elementwise ---------------------------------------------------------------- */

static void test_get_rows(void)
{
    cur = "get_rows";
    const int rows = 37, cols = 203, n = 9;
    for (int f16 = 0; f16 < 2; f16++) {
        float *tf = frandv((size_t)rows * cols, -3, 3);
        uint16_t *th = to_half(tf, (size_t)rows * cols);
        int32_t ids[9] = { 0, 36, 5, -1, 37, 5, 100000, 12, 1 };
        eng_weight w = { f16 ? ENG_DTYPE_F16 : ENG_DTYPE_F32, rows, cols,
                         f16 ? (const void *)th : (const void *)tf };
        float *ref = xmalloc((size_t)n * cols * sizeof(float));
        float *got = xmalloc((size_t)n * cols * sizeof(float));
        cpu->iface->get_rows(cpu, &w, ids, n, ref);
        size_t tb = (size_t)rows * cols * (f16 ? 2 : 4);
        void *dt = dev_copy(f16 ? (void *)th : (void *)tf, tb);
        int32_t *di = dev_copy(ids, sizeof(ids));
        float *dout = dev((size_t)n * cols * sizeof(float));
        OK(si_cuda_get_rows(gc, dt, f16, rows, cols, di, n, dout));
        get(got, dout, (size_t)n * cols * sizeof(float));
        CHECK(memcmp(got, ref, (size_t)n * cols * sizeof(float)) == 0, "f16=%d rows differ", f16);
        dfree(dt);
        dfree(di);
        dfree(dout);
        free(tf);
        free(th);
        free(ref);
        free(got);
    }
}

static void test_add_store(void)
{
    cur = "add/store_f16/to_f32";
    const long n = 100003;
    float *y = frandv(n, -100, 100), *x = frandv(n, -100, 100);
    /* values that stress rounding: halfway cases, overflow, subnormals, NaN */
    x[0] = 65520.0f;
    x[1] = 65519.0f;
    x[2] = 1e-8f;
    x[3] = -0x1.002p-14f;
    x[4] = 1.0f + 0x1p-11f;
    x[5] = INFINITY;
    x[6] = -0.0f;
    float *dy = dev_copy(y, n * 4), *dx = dev_copy(x, n * 4);
    OK(si_cuda_add(gc, dy, dx, n));
    float *got = xmalloc(n * 4);
    get(got, dy, n * 4);
    cpu->iface->add(cpu, y, x, n);
    CHECK(memcmp(got, y, n * 4) == 0, "add differs");

    uint16_t *dh = dev(n * 2), *gh = xmalloc(n * 2), *rh = xmalloc(n * 2);
    OK(si_cuda_store_f16(gc, dx, dh, n));
    get(gh, dh, n * 2);
    cpu->iface->store_f16(cpu, x, rh, n);
    long bad = 0;
    for (long i = 0; i < n; i++)
        bad += gh[i] != rh[i];
    CHECK(bad == 0, "store_f16: %ld of %ld differ (first values %04x vs %04x)", bad, n, gh[0], rh[0]);

    /* rows of a cache at a position read on the device (KV stores in a
     * decode graph): rows 7 and 8 of 1000-element rows, nothing else */
    {
        const long row = 1000;
        int32_t pos = 7, *dpos = dev_copy(&pos, 4);
        uint16_t *dc = dev(12 * row * 2), *gc2 = xmalloc(12 * row * 2);
        uint16_t *fill = xmalloc(12 * row * 2);
        memset(fill, 0x5a, 12 * row * 2);
        OK(si_cuda_upload(gc, dc, fill, 12 * row * 2));
        OK(si_cuda_store_rows_at(gc, dx, dc, row, dpos, 2));
        get(gc2, dc, 12 * row * 2);
        bad = 0;
        for (long i = 0; i < 12 * row; i++)
            bad += gc2[i] != (i >= 7 * row && i < 9 * row ? rh[i - 7 * row] : fill[i]);
        CHECK(bad == 0, "store_rows_at: %ld of %ld differ", bad, 12 * row);
        dfree(dpos);
        dfree(dc);
        free(gc2);
        free(fill);
    }

    float *f = xmalloc(n * 4);
    OK(si_cuda_to_f32(gc, dh, dx, n));
    get(f, dx, n * 4);
    bad = 0;
    for (long i = 0; i < n; i++)
        bad += memcmp(&f[i], &(float){ h2f(rh[i]) }, 4) != 0;
    CHECK(bad == 0, "to_f32: %ld differ", bad);
    dfree(dy);
    dfree(dx);
    dfree(dh);
    free(y);
    free(x);
    free(got);
    free(gh);
    free(rh);
    free(f);
}

/* Gemma's scale (embeddings) and softcap (Gemma 2's logits): the scale
 * exact, the cap within float rounding of the CPU's (device tanhf). */
static void test_scale_softcap(void)
{
    cur = "scale/softcap";
    const long n = 262147;
    float *x = frandv(n, -80, 80), *ref = xmalloc(n * 4), *got = xmalloc(n * 4);
    float *dx = dev_copy(x, n * 4);
    memcpy(ref, x, n * 4);
    OK(si_cuda_scale(gc, dx, 33.941125f, n));
    cpu->iface->scale(cpu, ref, 33.941125f, n);
    get(got, dx, n * 4);
    CHECK(memcmp(got, ref, n * 4) == 0, "scale differs");
    OK(si_cuda_softcap(gc, dx, 30.0f, n));
    cpu->iface->softcap(cpu, ref, 30.0f, n);
    get(got, dx, n * 4);
    long bad = 0;
    for (long i = 0; i < n; i++)
        bad += !(fabsf(got[i] - ref[i]) <= 4e-6f * 30.0f && fabsf(got[i]) <= 30.0f);
    CHECK(bad == 0, "softcap: %ld of %ld beyond float rounding of the CPU's", bad, n);
    CHECK(si_cuda_softcap(gc, dx, 0.0f, n) == -EINVAL, "a cap of 0 accepted");
    dfree(dx);
    free(x);
    free(ref);
    free(got);
}

/* LFM2's short convolution in a ring of 9 rows: a prefill from position
 * 0 (taps before it read 0), one from 7 over the rows the first left,
 * wrapping round the ring, and a step whose position the kernel reads
 * from device memory; outputs and cache rows against the CPU's (sums of
 * 3 products, in the same order: float rounding). */
static void test_shortconv(void)
{
    cur = "shortconv";
    enum { N = 1000, LEN = 3, ROWS = 9 };
    static const int parts[3][2] = { { 0, 7 }, { 7, 5 }, { 12, 1 } };
    float *w = frandv((size_t)N * LEN, -1, 1), *cache = xmalloc((size_t)ROWS * N * 4);
    float *got = xmalloc((size_t)ROWS * N * 4), *out = xmalloc((size_t)8 * N * 4);
    memset(cache, 0, (size_t)ROWS * N * 4);
    float *dw = dev_copy(w, (size_t)N * LEN * 4), *dcache = dev_copy(cache, (size_t)ROWS * N * 4);
    float *dout = dev((size_t)8 * N * 4);
    int32_t *dpos = dev_copy(&parts[2][0], sizeof(int32_t));
    long bad = 0;
    for (int p = 0; p < 3; p++) {
        const int row0 = parts[p][0], nt = parts[p][1];
        float *b = frandv((size_t)nt * N, -2, 2), *c = frandv((size_t)nt * N, -2, 2);
        float *x = frandv((size_t)nt * N, -2, 2);
        float *db = dev_copy(b, (size_t)nt * N * 4), *dc = dev_copy(c, (size_t)nt * N * 4);
        float *dx = dev_copy(x, (size_t)nt * N * 4);
        OK(si_cuda_shortconv(gc, db, dc, dx, dw, LEN, dcache, p == 2 ? 0 : row0, ROWS,
                             p == 2 ? dpos : NULL, nt, N, dout));
        cpu->iface->shortconv(cpu, b, c, x, w, LEN, cache, row0, ROWS, nt, N, out);
        get(got, dout, (size_t)nt * N * 4);
        for (long i = 0; i < (long)nt * N; i++)
            bad += !(fabsf(got[i] - out[i]) <= 1e-5f * (1.0f + fabsf(out[i])));
        dfree(db);
        dfree(dc);
        dfree(dx);
        free(b);
        free(c);
        free(x);
    }
    get(got, dcache, (size_t)ROWS * N * 4);
    CHECK(memcmp(got, cache, (size_t)ROWS * N * 4) == 0, "cache rows differ");
    CHECK(bad == 0, "%ld outputs beyond float rounding of the CPU's", bad);
    dfree(dw);
    dfree(dcache);
    dfree(dout);
    dfree(dpos);
    free(w);
    free(cache);
    free(got);
    free(out);
}

/* ---- rmsnorm, rope ------------------------------------------------------------------ */

static void test_rmsnorm(void)
{
    cur = "rmsnorm";
    const int sizes[] = { 576, 3072, 100, 1 };
    for (size_t si = 0; si < sizeof(sizes) / sizeof(sizes[0]); si++) {
        int n = sizes[si], T = 5;
        for (int inplace = 0; inplace < 2; inplace++)
            for (int hasw = 0; hasw < 2; hasw++) {
                float *x = frandv((size_t)T * n, -4, 4), *w = frandv(n, 0.5f, 1.5f);
                float *ref = xmalloc((size_t)T * n * 4), *got = xmalloc((size_t)T * n * 4);
                cpu->iface->rmsnorm(cpu, x, hasw ? w : NULL, ref, T, n, 1e-5f);
                float *dx = dev_copy(x, (size_t)T * n * 4), *dw = dev_copy(w, (size_t)n * 4);
                float *dy = inplace ? dx : dev((size_t)T * n * 4);
                OK(si_cuda_rmsnorm(gc, dx, hasw ? dw : NULL, dy, T, n, 1e-5f));
                get(got, dy, (size_t)T * n * 4);
                for (long i = 0; i < (long)T * n; i++)
                    if (!(fabsf(got[i] - ref[i]) <= 2e-6f * fabsf(ref[i]) + 1e-7f)) {
                        CHECK(0, "n=%d inplace=%d w=%d i=%ld: %g vs %g", n, inplace, hasw, i,
                              got[i], ref[i]);
                        break;
                    }
                if (!inplace)
                    dfree(dy);
                dfree(dx);
                dfree(dw);
                free(x);
                free(w);
                free(ref);
                free(got);
            }
    }
}

/* x += res, then the norm: x comes back exactly the CPU's add (one float
 * addition each), y within the norm's bound. */
static void test_add_rmsnorm(void)
{
    cur = "add_rmsnorm";
    const int sizes[] = { 576, 3072, 100 };
    for (size_t si = 0; si < sizeof(sizes) / sizeof(sizes[0]); si++) {
        const int n = sizes[si], T = 3;
        const size_t N = (size_t)T * n;
        float *x = frandv(N, -4, 4), *r = frandv(N, -4, 4), *w = frandv(n, 0.5f, 1.5f);
        float *ref = xmalloc(N * 4), *got = xmalloc(N * 4), *gotx = xmalloc(N * 4);
        float *dx = dev_copy(x, N * 4), *dr = dev_copy(r, N * 4), *dw = dev_copy(w, (size_t)n * 4);
        float *dy = dev(N * 4);
        cpu->iface->add(cpu, x, r, (long)N);
        cpu->iface->rmsnorm(cpu, x, w, ref, T, n, 1e-5f);
        OK(si_cuda_add_rmsnorm(gc, dx, dr, dw, dy, T, n, 1e-5f));
        get(got, dy, N * 4);
        get(gotx, dx, N * 4);
        CHECK(memcmp(gotx, x, N * 4) == 0, "n=%d: x after the add differs from the CPU's", n);
        for (size_t i = 0; i < N; i++)
            if (!(fabsf(got[i] - ref[i]) <= 2e-6f * fabsf(ref[i]) + 1e-7f)) {
                CHECK(0, "n=%d i=%zu: %g vs %g", n, i, got[i], ref[i]);
                break;
            }
        dfree(dx);
        dfree(dr);
        dfree(dw);
        dfree(dy);
        free(x);
        free(r);
        free(w);
        free(ref);
        free(got);
        free(gotx);
    }
}

static void test_rope(void)
{
    cur = "rope";
    struct {
        int T, H, hd, n_rot, pos0;
        float base;
        bool ff, neox;
    } cases[] = {
        { 5, 4, 64, 64, 0, 10000.0f, false, false },
        { 3, 8, 128, 128, 100000, 500000.0f, true, false },
        { 7, 3, 64, 32, 17, 10000.0f, false, true },
        { 1, 16, 128, 128, 32000, 1000000.0f, false, true },
        { 2, 2, 80, 80, 5, 10000.0f, true, true },
    };
    for (size_t ci = 0; ci < sizeof(cases) / sizeof(cases[0]); ci++) {
        int T = cases[ci].T, H = cases[ci].H, hd = cases[ci].hd, nr = cases[ci].n_rot;
        size_t n = (size_t)T * H * hd;
        float *x = frandv(n, -2, 2), *ff = frandv(nr / 2, 1.0f, 8.0f);
        float *ref = xmalloc(n * 4), *got = xmalloc(n * 4);
        memcpy(ref, x, n * 4);
        cpu->iface->rope(cpu, ref, T, H, hd, nr, cases[ci].pos0, cases[ci].base,
                         cases[ci].ff ? ff : NULL, cases[ci].neox);
        float *dx = dev_copy(x, n * 4), *dff = dev_copy(ff, (size_t)(nr / 2) * 4);
        OK(si_cuda_rope(gc, dx, T, H, hd, nr, cases[ci].pos0, cases[ci].base,
                        cases[ci].ff ? dff : NULL, cases[ci].neox));
        get(got, dx, n * 4);
        for (size_t i = 0; i < n; i++) {
            /* the pair partner of i (if rotated): bound by both inputs */
            float tol = 4e-6f * (fabsf(x[i]) + 2.0f) + 1e-7f;
            if (!(fabsf(got[i] - ref[i]) <= tol)) {
                CHECK(0, "case %zu i=%zu: %g vs %g (x %g)", ci, i, got[i], ref[i], x[i]);
                break;
            }
        }
        /* the position read from the device (decode graphs): the same bits */
        int32_t *dpos = dev_copy(&cases[ci].pos0, 4);
        float *at = xmalloc(n * 4);
        OK(si_cuda_upload(gc, dx, x, n * 4));
        OK(si_cuda_rope_at(gc, dx, T, H, hd, nr, dpos, cases[ci].base, cases[ci].ff ? dff : NULL,
                           cases[ci].neox));
        get(at, dx, n * 4);
        CHECK(memcmp(at, got, n * 4) == 0, "case %zu: rope_at differs from rope", ci);
        dfree(dpos);
        free(at);
        dfree(dx);
        dfree(dff);
        free(x);
        free(ff);
        free(ref);
        free(got);
    }
}

/* q, k and the two caches, downloaded */
typedef struct {
    float *q, *k;
    uint16_t *kc, *vc;
} qkv_host;

static qkv_host qkv_get(const float *dq, const float *dk, const uint16_t *dkc,
                        const uint16_t *dvc, size_t nq, size_t nk, size_t nc)
{
    qkv_host h = { xmalloc(nq * 4), xmalloc(nk * 4), xmalloc(nc * 2), xmalloc(nc * 2) };
    get(h.q, dq, nq * 4);
    get(h.k, dk, nk * 4);
    get(h.kc, dkc, nc * 2);
    get(h.vc, dvc, nc * 2);
    return h;
}

static void qkv_free(qkv_host *h)
{
    free(h->q);
    free(h->k);
    free(h->kc);
    free(h->vc);
}

/* rope of q and k and the store of k and v in one kernel: the same bits as
 * the separate kernels (rope twice, store twice; those are checked against
 * the CPU above), cache rows other than the tokens' untouched, and the
 * position read from the device the same. */
static void test_rope_store(void)
{
    cur = "rope_store";
    struct {
        int T, H, Hkv, hd, n_rot, pos0;
        bool neox, ff;
    } cases[] = {
        { 1, 24, 8, 128, 128, 700, false, true }, /* Llama-3.2-3B decode */
        { 3, 6, 2, 64, 32, 5, true, false },      /* prefill, half the dims rotate */
        { 2, 4, 4, 80, 80, 0, true, true },
        { 1, 2, 1, 64, 0, 9, false, false },      /* nothing rotates */
    };
    for (size_t ci = 0; ci < sizeof(cases) / sizeof(cases[0]); ci++) {
        const int T = cases[ci].T, H = cases[ci].H, Hkv = cases[ci].Hkv, hd = cases[ci].hd;
        const int nr = cases[ci].n_rot, p0 = cases[ci].pos0, n_ctx = p0 + T + 2;
        const size_t nq = (size_t)T * H * hd, nk = (size_t)T * Hkv * hd;
        const size_t nc = (size_t)n_ctx * Hkv * hd;
        float *q = frandv(nq, -2, 2), *k = frandv(nk, -2, 2), *v = frandv(nk, -2, 2);
        float *ff = frandv(nr / 2 + 1, 1.0f, 8.0f);
        uint16_t *cache0 = rand_half(nc, -1, 1);
        float *dff = dev_copy(ff, (size_t)(nr / 2 + 1) * 4);
        const float *f = cases[ci].ff ? dff : NULL;
        /* reference: the separate kernels */
        float *rq = dev_copy(q, nq * 4), *rk = dev_copy(k, nk * 4), *rv = dev_copy(v, nk * 4);
        uint16_t *rkc = dev_copy(cache0, nc * 2), *rvc = dev_copy(cache0, nc * 2);
        OK(si_cuda_rope(gc, rq, T, H, hd, nr, p0, 10000.0f, f, cases[ci].neox));
        OK(si_cuda_rope(gc, rk, T, Hkv, hd, nr, p0, 10000.0f, f, cases[ci].neox));
        OK(si_cuda_store_f16(gc, rk, rkc + (size_t)p0 * Hkv * hd, (long)nk));
        OK(si_cuda_store_f16(gc, rv, rvc + (size_t)p0 * Hkv * hd, (long)nk));
        qkv_host e = qkv_get(rq, rk, rkc, rvc, nq, nk, nc);
        for (int at = 0; at < 2; at++) {
            float *dq = dev_copy(q, nq * 4), *dk = dev_copy(k, nk * 4), *dv = dev_copy(v, nk * 4);
            uint16_t *dkc = dev_copy(cache0, nc * 2), *dvc = dev_copy(cache0, nc * 2);
            int32_t *dpos = dev_copy(&p0, 4);
            if (at)
                OK(si_cuda_rope_store_at(gc, dq, dk, dv, T, H, Hkv, hd, nr, dpos, 10000.0f, f,
                                         cases[ci].neox, dkc, dvc));
            else
                OK(si_cuda_rope_store(gc, dq, dk, dv, T, H, Hkv, hd, nr, p0, 10000.0f, f,
                                      cases[ci].neox, dkc, dvc));
            qkv_host g = qkv_get(dq, dk, dkc, dvc, nq, nk, nc);
            CHECK(memcmp(g.q, e.q, nq * 4) == 0, "case %zu at %d: q differs", ci, at);
            CHECK(memcmp(g.k, e.k, nk * 4) == 0, "case %zu at %d: k differs", ci, at);
            CHECK(memcmp(g.kc, e.kc, nc * 2) == 0, "case %zu at %d: k cache differs", ci, at);
            CHECK(memcmp(g.vc, e.vc, nc * 2) == 0, "case %zu at %d: v cache differs", ci, at);
            dfree(dq);
            dfree(dk);
            dfree(dv);
            dfree(dkc);
            dfree(dvc);
            dfree(dpos);
            qkv_free(&g);
        }
        dfree(rq);
        dfree(rk);
        dfree(rv);
        dfree(rkc);
        dfree(rvc);
        dfree(dff);
        free(q);
        free(k);
        free(v);
        free(ff);
        free(cache0);
        qkv_free(&e);
    }
}

/* ---- matmul ---------------------------------------------------------------------------- */

/* got against the CPU's ref for y = w x (+ b): within rel of the sum of
 * |w x| per output (3e-5 for the GEMV, 2e-3 for cuBLAS's f16 inputs). */
static void near_matmul(const char *what, const uint16_t *w, int R, int K, int T, const float *x,
                        const float *b, const float *got, const float *ref)
{
    float rel = T == 1 ? 3e-5f : 2e-3f;
    for (int t = 0; t < T; t++)
        for (int r = 0; r < R; r++) {
            double mag = 0;
            for (int k = 0; k < K; k++)
                mag += fabs((double)h2f(w[(size_t)r * K + k]) * x[(size_t)t * K + k]);
            float e = fabsf(got[(size_t)t * R + r] - ref[(size_t)t * R + r]);
            if (!(e <= rel * mag + 1e-6f * fabsf(b[r]) + 1e-7f)) {
                CHECK(0, "%s%dx%d T=%d t=%d r=%d: %g vs %g (mag %g)", what, R, K, T, t, r,
                      got[(size_t)t * R + r], ref[(size_t)t * R + r], mag);
                return;
            }
        }
}

static void test_matmul(void)
{
    struct {
        int rows, cols, T;
        bool bias;
    } cases[] = {
        { 1024, 3072, 1, false }, /* several warps per row */
        { 3072, 2048, 1, true },
        { 7, 100, 1, true },      /* scalar path */
        { 513, 576, 1, false },
        { 1000, 8, 1, false },
        { 300, 576, 7, true },    /* cuBLAS */
        { 1024, 2048, 33, false },
        { 5, 100, 3, false },
    };
    for (size_t ci = 0; ci < sizeof(cases) / sizeof(cases[0]); ci++) {
        int R = cases[ci].rows, K = cases[ci].cols, T = cases[ci].T;
        cur = T == 1 ? "gemv" : "matmul";
        uint16_t *w = rand_half((size_t)R * K, -1, 1);
        float *x = frandv((size_t)T * K, -2, 2), *b = frandv(R, -1, 1);
        float *ref = xmalloc((size_t)T * R * 4), *got = xmalloc((size_t)T * R * 4);
        eng_weight ew = { ENG_DTYPE_F16, R, K, w };
        cpu->iface->matmul(cpu, &ew, cases[ci].bias ? b : NULL, x, ref, T);
        uint16_t *dw = dev_copy(w, (size_t)R * K * 2);
        float *dx = dev_copy(x, (size_t)T * K * 4), *db = dev_copy(b, (size_t)R * 4);
        float *dy = dev((size_t)T * R * 4);
        OK(si_cuda_matmul(gc, dw, R, K, cases[ci].bias ? db : NULL, dx, dy, T));
        get(got, dy, (size_t)T * R * 4);
        near_matmul("", w, R, K, T, x, b, got, ref);
        dfree(dw);
        dfree(dx);
        dfree(db);
        dfree(dy);
        free(w);
        free(x);
        free(b);
        free(ref);
        free(got);
    }
}

/* Three weights on one x (q, k, v): one launch for one token, each output
 * as its own matmul; a matrix of no rows leaves its output alone. */
static void test_matmul3(void)
{
    cur = "matmul3";
    struct {
        int rows[3], cols, T;
        bool bias[3];
    } cases[] = {
        { { 3072, 1024, 1024 }, 3072, 1, { false, false, false } }, /* Llama-3.2-3B */
        { { 2048, 256, 256 }, 2048, 1, { true, true, true } },       /* Qwen2.5: biases */
        { { 7, 0, 300 }, 100, 1, { false, false, true } },           /* scalar path, no rows */
        { { 64, 16, 16 }, 576, 4, { true, false, true } },           /* cuBLAS */
    };
    for (size_t ci = 0; ci < sizeof(cases) / sizeof(cases[0]); ci++) {
        const int K = cases[ci].cols, T = cases[ci].T;
        uint16_t *w[3], *dw[3];
        float *b[3], *db[3], *dy[3], *ref[3], *got[3];
        float *x = frandv((size_t)T * K, -2, 2), *dx = dev_copy(x, (size_t)T * K * 4);
        for (int i = 0; i < 3; i++) {
            const int R = cases[ci].rows[i];
            w[i] = rand_half((size_t)R * K + 1, -1, 1);
            b[i] = frandv((size_t)R + 1, -1, 1);
            ref[i] = xmalloc((size_t)T * R * 4 + 4);
            got[i] = xmalloc((size_t)T * R * 4 + 4);
            eng_weight ew = { ENG_DTYPE_F16, R, K, w[i] };
            cpu->iface->matmul(cpu, &ew, cases[ci].bias[i] ? b[i] : NULL, x, ref[i], T);
            dw[i] = dev_copy(w[i], (size_t)R * K * 2 + 2);
            db[i] = dev_copy(b[i], (size_t)R * 4 + 4);
            /* the output past its rows (and all of it with no rows) holds a
             * marker that must stay */
            float *mark = frandv((size_t)T * R + 1, 5, 6);
            dy[i] = dev_copy(mark, (size_t)T * R * 4 + 4);
            memcpy(got[i], mark, (size_t)T * R * 4 + 4);
            free(mark);
        }
        const uint16_t *cw[3] = { dw[0], dw[1], dw[2] };
        const float *cb[3] = { cases[ci].bias[0] ? db[0] : NULL, cases[ci].bias[1] ? db[1] : NULL,
                               cases[ci].bias[2] ? db[2] : NULL };
        OK(si_cuda_matmul3(gc, cw, cases[ci].rows, K, cb, dx, dy, T));
        for (int i = 0; i < 3; i++) {
            const int R = cases[ci].rows[i];
            const float marker = got[i][(size_t)T * R];
            get(got[i], dy[i], (size_t)T * R * 4 + 4);
            char what[64];
            snprintf(what, sizeof(what), "case %zu matrix %d: ", ci, i);
            near_matmul(what, w[i], R, K, T, x, b[i], got[i], ref[i]);
            CHECK(got[i][(size_t)T * R] == marker, "case %zu matrix %d: written past its %d rows",
                  ci, i, R);
            dfree(dw[i]);
            dfree(db[i]);
            dfree(dy[i]);
            free(w[i]);
            free(b[i]);
            free(ref[i]);
            free(got[i]);
        }
        dfree(dx);
        free(x);
    }
}

/* Decode's norm and q, k, v in one call (si_cuda_norm_gemv), by default
 * (the norm's kernel, then the GEMV's) and with the "norm_fold" variant
 * (the norm in each GEMV block): x + res exactly the CPU's add, xn as
 * add_rmsnorm's bound, y as a GEMV of the CPU's xn. Each case runs three
 * times in a row on fresh inputs: the fold's last block resets its counter,
 * or the next call would write neither x nor xn. */
static void test_norm_gemv(void)
{
    cur = "norm_gemv";
    struct {
        int rows[3], n_w, cols;
        bool res, bias, nw;
    } cases[] = {
        { { 3072, 1024, 1024 }, 3, 3072, true, false, true }, /* Llama-3.2-3B */
        { { 2048, 256, 256 }, 3, 2048, true, true, true },    /* Qwen2.5-3B: biases */
        { { 576, 192, 192 }, 3, 576, false, false, true },    /* SmolLM2, layer 0: no residual */
        { { 5, 0, 300 }, 3, 64, true, true, false },          /* no rows; no norm weight */
        { { 1000, 0, 0 }, 1, 8192, true, false, true },       /* the widest the fold takes */
        { { 300, 0, 0 }, 1, 8200, true, false, true },        /* wider: never folded */
        { { 40, 8, 8 }, 3, 100, true, false, true },          /* cols % 8: never folded */
    };
    for (int fold = 0; fold < 2; fold++) {
        OK(si_cuda_set_variant(gc, "norm_fold", fold));
        for (size_t ci = 0; ci < sizeof(cases) / sizeof(cases[0]); ci++)
            for (int round = 0; round < 3; round++) {
                const int K = cases[ci].cols, nw_ = cases[ci].n_w;
                float *x = frandv(K, -4, 4), *r = frandv(K, -4, 4), *nw = frandv(K, 0.5f, 1.5f);
                float *dx = dev_copy(x, (size_t)K * 4), *dr = dev_copy(r, (size_t)K * 4);
                float *dnw = dev_copy(nw, (size_t)K * 4), *dxn = dev((size_t)K * 4);
                float *xn = xmalloc((size_t)K * 4), *got = xmalloc((size_t)K * 4);
                if (cases[ci].res)
                    cpu->iface->add(cpu, x, r, K);
                cpu->iface->rmsnorm(cpu, x, cases[ci].nw ? nw : NULL, xn, 1, K, 1e-5f);
                uint16_t *w[3] = { 0 }, *dw[3] = { 0 };
                float *b[3] = { 0 }, *db[3] = { 0 }, *dy[3] = { 0 }, *ref[3] = { 0 };
                for (int i = 0; i < nw_; i++) {
                    const int R = cases[ci].rows[i];
                    w[i] = rand_half((size_t)R * K + 1, -1, 1);
                    b[i] = frandv((size_t)R + 1, -1, 1);
                    ref[i] = xmalloc((size_t)R * 4 + 4);
                    eng_weight ew = { ENG_DTYPE_F16, R, K, w[i] };
                    cpu->iface->matmul(cpu, &ew, cases[ci].bias ? b[i] : NULL, xn, ref[i], 1);
                    dw[i] = dev_copy(w[i], (size_t)R * K * 2 + 2);
                    db[i] = dev_copy(b[i], (size_t)R * 4 + 4);
                    dy[i] = dev((size_t)R * 4 + 4);
                }
                const uint16_t *cw[3] = { dw[0], dw[1], dw[2] };
                const float *cb[3] = { db[0], db[1], db[2] };
                OK(si_cuda_norm_gemv(gc, dx, cases[ci].res ? dr : NULL, cases[ci].nw ? dnw : NULL, 1e-5f,
                                     dxn, cw, cases[ci].rows, nw_, K, cases[ci].bias ? cb : NULL, dy));
                char what[80];
                snprintf(what, sizeof(what), "fold %d case %zu round %d: ", fold, ci, round);
                get(got, dx, (size_t)K * 4);
                CHECK(memcmp(got, x, (size_t)K * 4) == 0, "%sx after the add differs from the CPU's",
                      what);
                get(got, dxn, (size_t)K * 4);
                for (int i = 0; i < K; i++)
                    if (!(fabsf(got[i] - xn[i]) <= 2e-6f * fabsf(xn[i]) + 1e-7f)) {
                        CHECK(0, "%sxn[%d]: %g vs %g", what, i, got[i], xn[i]);
                        break;
                    }
                /* and bit for bit the GEMV of its own xn */
                float *dy2[3] = { 0 };
                for (int i = 0; i < nw_; i++)
                    dy2[i] = dev((size_t)cases[ci].rows[i] * 4 + 4);
                int rows2[3] = { 0, 0, 0 };
                memcpy(rows2, cases[ci].rows, (size_t)nw_ * sizeof(int));
                OK(si_cuda_gemv3(gc, cw, rows2, K, dxn, cases[ci].bias ? cb : NULL, dy2));
                for (int i = 0; i < nw_; i++) {
                    const int R = cases[ci].rows[i];
                    float *gy = xmalloc((size_t)R * 4 + 4), *gy2 = xmalloc((size_t)R * 4 + 4);
                    get(gy, dy[i], (size_t)R * 4);
                    get(gy2, dy2[i], (size_t)R * 4);
                    if (round == 0) /* (the bound's sums are slow; later rounds: the bits) */
                        near_matmul(what, w[i], R, K, 1, xn, b[i], gy, ref[i]);
                    CHECK(memcmp(gy, gy2, (size_t)R * 4) == 0, "%smatrix %d: y is not the GEMV's of xn", what,
                          i);
                    free(gy);
                    free(gy2);
                    dfree(dy2[i]);
                    dfree(dw[i]);
                    dfree(db[i]);
                    dfree(dy[i]);
                    free(w[i]);
                    free(b[i]);
                    free(ref[i]);
                }
                dfree(dx);
                dfree(dr);
                dfree(dnw);
                dfree(dxn);
                free(x);
                free(r);
                free(nw);
                free(xn);
                free(got);
            }
    }
    OK(si_cuda_set_variant(gc, "norm_fold", 0));
    CHECK(si_cuda_set_variant(gc, "norm_fold", 2) == -EINVAL, "norm_fold 2 was taken");
}

/* Decode's FFN norm and the FFN in one call (si_cuda_norm_ffn), by
 * default and with "norm_fold" (the norm in k_ffn_act's blocks): x the
 * CPU's add exactly, xn within add_rmsnorm's bound of the CPU's, y bit for
 * bit si_cuda_ffn of that xn (the same kernels but the staging). Three
 * calls in a row on fresh inputs (the counter). */
static void test_norm_ffn(void)
{
    cur = "norm_ffn";
    struct {
        int E, n_slots, n_sel;
        bool res, use_sel, bad, gelu;
    } cases[] = {
        { 576, 1536, 1536, true, false, false, false }, /* all slots */
        { 3072, 2000, 800, true, true, true, false },   /* 40 %, slots out of range */
        { 2048, 900, 300, false, true, false, true },   /* no residual, GeGLU */
        { 100, 300, 123, true, true, false, false },    /* n_embd % 8: never folded */
        { 256, 0, 5, true, false, false, false },       /* no slots */
    };
    for (int fold = 0; fold < 2; fold++) {
        OK(si_cuda_set_variant(gc, "norm_fold", fold));
        for (size_t ci = 0; ci < sizeof(cases) / sizeof(cases[0]); ci++)
            for (int round = 0; round < 3; round++) {
                const int E = cases[ci].E, S = cases[ci].n_slots, n_sel = cases[ci].n_sel;
                const size_t ngu = (size_t)S * 2 * E + 1, nd = (size_t)S * E + 1;
                uint16_t *gu = rand_half(ngu, -1, 1), *dn = rand_half(nd, -1, 1);
                float *x = frandv(E, -3, 3), *r = frandv(E, -3, 3), *nw = frandv(E, 0.5f, 1.5f);
                float *xn = xmalloc((size_t)E * 4), *got = xmalloc((size_t)E * 4), *y = xmalloc((size_t)E * 4);
                float *y2 = xmalloc((size_t)E * 4);
                int32_t *sel = xmalloc((size_t)n_sel * 4 + 4);
                for (int j = 0; j < n_sel; j++)
                    sel[j] = S ? (int32_t)((j * 7L + round) % S) : j;
                if (cases[ci].bad && n_sel > 2)
                    sel[0] = -1, sel[n_sel / 2] = S, sel[n_sel - 1] = 1 << 30;
                float *dx = dev_copy(x, (size_t)E * 4), *dr = dev_copy(r, (size_t)E * 4);
                float *dnw = dev_copy(nw, (size_t)E * 4), *dxn = dev((size_t)E * 4);
                float *dy = dev((size_t)E * 4), *dy2 = dev((size_t)E * 4);
                int32_t *dsel = dev_copy(sel, (size_t)n_sel * 4 + 4);
                si_cuda_ffn_weights dw = { E, S, dev_copy(gu, ngu * 2), dev_copy(dn, nd * 2), cases[ci].gelu };
                const int32_t *use = cases[ci].use_sel ? dsel : NULL;
                if (cases[ci].res)
                    cpu->iface->add(cpu, x, r, E);
                cpu->iface->rmsnorm(cpu, x, nw, xn, 1, E, 1e-5f);
                OK(si_cuda_norm_ffn(gc, dx, cases[ci].res ? dr : NULL, dnw, 1e-5f, dxn, &dw, use, n_sel, dy));
                OK(si_cuda_ffn(gc, &dw, use, n_sel, dxn, dy2, 1, NULL));
                char what[80];
                snprintf(what, sizeof(what), "fold %d case %zu round %d: ", fold, ci, round);
                get(got, dx, (size_t)E * 4);
                CHECK(memcmp(got, x, (size_t)E * 4) == 0, "%sx after the add differs from the CPU's", what);
                get(got, dxn, (size_t)E * 4);
                for (int i = 0; i < E; i++)
                    if (!(fabsf(got[i] - xn[i]) <= 2e-6f * fabsf(xn[i]) + 1e-7f)) {
                        CHECK(0, "%sxn[%d]: %g vs %g", what, i, got[i], xn[i]);
                        break;
                    }
                get(y, dy, (size_t)E * 4);
                get(y2, dy2, (size_t)E * 4);
                CHECK(memcmp(y, y2, (size_t)E * 4) == 0, "%sy is not si_cuda_ffn's of xn", what);
                bool finite = true;
                for (int i = 0; i < E; i++)
                    finite = finite && isfinite(y[i]);
                CHECK(finite, "%sy not finite", what);
                dfree((void *)dw.gate_up);
                dfree((void *)dw.down);
                dfree(dx);
                dfree(dr);
                dfree(dnw);
                dfree(dxn);
                dfree(dy);
                dfree(dy2);
                dfree(dsel);
                free(gu);
                free(dn);
                free(x);
                free(r);
                free(nw);
                free(xn);
                free(got);
                free(y);
                free(y2);
                free(sel);
            }
    }
    OK(si_cuda_set_variant(gc, "norm_fold", 0));
}

/* ---- attention ----------------------------------------------------------------------------- */

static void test_attention(void)
{
    cur = "attention";
    /* window: Gemma 3's local layers see their last window positions */
    struct {
        int T, pos0, H, Hkv, hd, window;
    } cases[] = {
        { 5, 0, 8, 2, 64, 0 },     /* prefill from empty */
        { 1, 1000, 24, 8, 128, 0 },/* decode, split over chunks */
        { 17, 300, 4, 4, 80, 0 },  /* prefill after a context, hd not a multiple of 32 */
        { 1, 0, 2, 1, 32, 0 },     /* first token */
        { 64, 64, 16, 2, 128, 0 },
        { 1, 4095, 9, 3, 64, 0 },  /* SmolLM2 heads, long context */
        { 2, 9, 2, 2, 256, 0 },
        /* decode kernel: a group of 8 (Qwen2.5-3B), hd 80 (two threads per
         * key), hd 256, a group of 16 (the general kernel), short chunks */
        { 1, 700, 16, 2, 128, 0 },
        { 1, 333, 4, 4, 80, 0 },
        { 1, 77, 6, 2, 256, 0 },
        { 1, 50, 32, 2, 64, 0 },
        { 1, 31, 3, 1, 64, 0 },
        /* Gemma 3 1B's heads (4 / 1, 256 wide) in local layers: decode past
         * the window over splits, a prefill across it */
        { 1, 2000, 4, 1, 256, 512 },
        { 40, 600, 4, 1, 256, 512 },
        { 9, 30, 8, 2, 64, 5 },
        { 1, 900, 8, 2, 64, 100 },
    };
    for (size_t ci = 0; ci < sizeof(cases) / sizeof(cases[0]); ci++) {
        int T = cases[ci].T, p0 = cases[ci].pos0, H = cases[ci].H, Hkv = cases[ci].Hkv;
        int hd = cases[ci].hd, n_ctx = p0 + T + 3, win = cases[ci].window;
        /* every third case, and the long window decode, with Gemma 2's
         * soft-capped scores (the sharp scale below makes the cap of 2 bite) */
        const float cap = ci % 3 == 2 || (win > 0 && T == 1 && p0 > 1000) ? 2.0f : 0.0f;
        size_t nq = (size_t)T * H * hd, nkv = (size_t)n_ctx * Hkv * hd;
        float *q = frandv(nq, -1, 1);
        uint16_t *k = rand_half(nkv, -1, 1), *v = rand_half(nkv, -1, 1);
        /* rows past the filled ones hold NaN: reading one shows up; so do
         * the rows before the first token's window */
        for (size_t i = (size_t)(p0 + T) * Hkv * hd; i < nkv; i++)
            k[i] = v[i] = 0x7e00;
        for (size_t i = 0; win > 0 && p0 + 1 > win && i < (size_t)(p0 + 1 - win) * Hkv * hd; i++)
            k[i] = v[i] = 0x7e00;
        float *ref = xmalloc(nq * 4), *got = xmalloc(nq * 4);
        float scale = 1.0f / sqrtf((float)hd) * 3.0f; /* sharper softmax than usual */
        cpu->iface->attention(cpu, q, k, v, ref, T, p0, H, Hkv, hd, scale, win, cap, NULL);
        float *dq = dev_copy(q, nq * 4), *dout = dev(nq * 4);
        uint16_t *dk = dev_copy(k, nkv * 2), *dv = dev_copy(v, nkv * 2);
        OK(si_cuda_attention(gc, dq, dk, dv, dout, T, p0, H, Hkv, hd, scale, win, cap));
        get(got, dout, nq * 4);
        for (size_t i = 0; i < nq; i++)
            if (!(fabsf(got[i] - ref[i]) <= 5e-5f + 5e-5f * fabsf(ref[i]))) {
                CHECK(0, "case %zu (T=%d pos0=%d H=%d/%d hd=%d) i=%zu: %g vs %g", ci, T, p0, H,
                      Hkv, hd, i, got[i], ref[i]);
                break;
            }
        /* decode with the position read on the device, the keys split for a
         * far larger largest position (a decode graph's plan): chunks past
         * the position stay empty, and nothing past it is read (NaN there).
         * Then each again with the splits combined in the decode kernel
         * (the "attn_combine" variant): the same bits. */
        float *got2 = xmalloc(nq * 4);
        for (int mp = p0; T == 1 && mp <= p0 + 8192; mp += 8192) {
            int32_t *dpos = dev_copy(&p0, 4);
            OK(si_cuda_upload(gc, dout, ref, 4)); /* must be overwritten */
            OK(si_cuda_attention_at(gc, dq, dk, dv, dout, dpos, mp, H, Hkv, hd, scale, win, cap));
            get(got, dout, nq * 4);
            for (size_t i = 0; i < nq; i++)
                if (!(fabsf(got[i] - ref[i]) <= 5e-5f + 5e-5f * fabsf(ref[i]))) {
                    CHECK(0, "case %zu at pos %d, max %d: i=%zu: %g vs %g", ci, p0, mp, i, got[i],
                          ref[i]);
                    break;
                }
            OK(si_cuda_set_variant(gc, "attn_combine", 1));
            for (int rep = 0; rep < 2; rep++) { /* twice: the counters are back at 0 */
                OK(si_cuda_upload(gc, dout, ref, 4));
                OK(si_cuda_attention_at(gc, dq, dk, dv, dout, dpos, mp, H, Hkv, hd, scale, win, cap));
                get(got2, dout, nq * 4);
                CHECK(memcmp(got, got2, nq * 4) == 0,
                      "case %zu at pos %d, max %d: combined in the kernel (%d) differs", ci, p0, mp,
                      rep);
            }
            OK(si_cuda_set_variant(gc, "attn_combine", 0));
            dfree(dpos);
        }
        free(got2);
        dfree(dq);
        dfree(dout);
        dfree(dk);
        dfree(dv);
        free(q);
        free(k);
        free(v);
        free(ref);
        free(got);
    }
    /* GQA with n_head not a multiple of n_head_kv is rejected */
    CHECK(si_cuda_attention(gc, (float *)16, (uint16_t *)16, (uint16_t *)16, (float *)16, 1, 0, 5,
                            2, 64, 1.0f, 0, 0.0f) == -EINVAL && strstr(si_cuda_last_error(), "n_head"),
          "bad GQA accepted: %s", si_cuda_last_error());
}

/* ---- ffn ------------------------------------------------------------------------------------ */

static void test_ffn(void)
{
    struct {
        int E, n_slots, n_sel, T;
        bool use_sel, bad_slots, gelu;
    } cases[] = {
        { 576, 1536, 1536, 1, false, false, false },  /* decode, all slots */
        { 576, 1536, 600, 1, true, false, false },    /* decode, 40 % */
        { 3072, 2000, 800, 1, true, true, false },    /* decode, slots out of range */
        { 100, 300, 123, 1, true, false, false },     /* scalar paths */
        { 576, 1536, 1536, 6, false, false, false },  /* prefill, in place */
        { 2048, 2500, 1100, 9, true, true, false },   /* prefill, gathered, 2 chunks */
        { 100, 50, 60, 4, false, false, false },      /* prefill, n_sel > n_slots */
        { 64, 0, 5, 1, false, false, false },         /* no slots at all */
        { 1152, 1000, 400, 1, true, false, true }, /* GeGLU (Gemma 3 1B's n_embd) */
        { 640, 700, 700, 5, false, false, true },
        { 640, 700, 300, 7, true, true, true },
        { 256, 40, 12, 1, true, true, false },     /* decode, a short list (one fused block) */
    };
    /* the defaults (4 gate/up loads in flight a lane), then 8, then the
     * gate and up rows as one GEMV's, then the one-pass kernel */
    static const char *const var_name[5] = { "", " (act unroll 8)", " (gate/up gemv)", " (fused)",
                                              " (fused, 2 blocks an SM)" };
    for (int var = 0; var < 5; var++)
    for (size_t ci = 0; ci < sizeof(cases) / sizeof(cases[0]); ci++) {
        OK(si_cuda_set_variant(gc, "ffn_act_unroll", var == 1 ? 8 : 4));
        OK(si_cuda_set_variant(gc, "ffn_decode", var == 2 ? 1 : var >= 3 ? 2 : 0));
        OK(si_cuda_set_variant(gc, "ffn_fused_bps", var == 4 ? 2 : 1));
        int E = cases[ci].E, S = cases[ci].n_slots, n_sel = cases[ci].n_sel, T = cases[ci].T;
        static char name[64];
        snprintf(name, sizeof(name), "%s%s",
                 T == 1 ? (cases[ci].gelu ? "ffn decode gelu" : "ffn decode")
                        : (cases[ci].gelu ? "ffn prefill gelu" : "ffn prefill"),
                 var_name[var]);
        cur = name;
        size_t ngu = (size_t)S * 2 * E, nd = (size_t)S * E;
        uint16_t *gu = rand_half(ngu ? ngu : 1, -1, 1), *dn = rand_half(nd ? nd : 1, -1, 1);
        float *x = frandv((size_t)T * E, -1.5f, 1.5f);
        int32_t *sel = NULL;
        if (cases[ci].use_sel) {
            /* an ascending random subset, then some entries out of range */
            sel = xmalloc((size_t)n_sel * 4);
            int m = 0;
            for (int s = 0; s < S && m < n_sel; s++)
                if (irand(S - s) < n_sel - m)
                    sel[m++] = s;
            if (cases[ci].bad_slots) {
                sel[0] = -1;
                sel[n_sel / 2] = S;
                sel[n_sel - 1] = 1 << 30;
            }
            /* unselected slots hold NaN */
            uint8_t *used = calloc(S ? S : 1, 1);
            for (int j = 0; j < n_sel; j++)
                if (sel[j] >= 0 && sel[j] < S)
                    used[sel[j]] = 1;
            for (int s = 0; s < S; s++)
                if (!used[s]) {
                    for (int e = 0; e < 2 * E; e++)
                        gu[(size_t)s * 2 * E + e] = 0x7e00;
                    for (int e = 0; e < E; e++)
                        dn[(size_t)s * E + e] = 0x7e00;
                }
            free(used);
        }
        eng_ffn_weights w = { ENG_DTYPE_F16, E, S, gu, dn, NULL,
                              cases[ci].gelu ? ENG_ACT_GELU : ENG_ACT_SILU, NULL, 0.0f };
        float *ref = xmalloc((size_t)T * E * 4), *got = xmalloc((size_t)T * E * 4);
        float *aref = xmalloc((size_t)T * n_sel * 4), *agot = xmalloc((size_t)T * n_sel * 4);
        cpu->iface->ffn(cpu, &w, sel, n_sel, x, ref, T, aref);

        uint16_t *dgu = dev_copy(gu, (ngu ? ngu : 1) * 2), *ddn = dev_copy(dn, (nd ? nd : 1) * 2);
        float *dx = dev_copy(x, (size_t)T * E * 4), *dy = dev((size_t)T * E * 4);
        float *dact = dev((size_t)T * n_sel * 4);
        int32_t *dsel = sel ? dev_copy(sel, (size_t)n_sel * 4) : NULL;
        si_cuda_ffn_weights dw = { E, S, dgu, ddn, cases[ci].gelu };
        OK(si_cuda_ffn(gc, &dw, dsel, n_sel, dx, dy, T, dact));
        get(got, dy, (size_t)T * E * 4);
        get(agot, dact, (size_t)T * n_sel * 4);
        /* without act: same y */
        float *got2 = xmalloc((size_t)T * E * 4);
        OK(si_cuda_ffn(gc, &dw, dsel, n_sel, dx, dy, T, NULL));
        get(got2, dy, (size_t)T * E * 4);
        CHECK(memcmp(got, got2, (size_t)T * E * 4) == 0, "case %zu: y depends on act", ci);

        const float r = T == 1 ? 2e-5f : 2e-3f;
        double *tola = xmalloc((size_t)n_sel * sizeof(double));
        for (int t = 0; t < T; t++) {
            const float *xt = x + (size_t)t * E;
            int bad = 0;
            for (int j = 0; j < n_sel; j++) {
                long s = sel ? sel[j] : j;
                tola[j] = 0;
                if (s < 0 || s >= S) {
                    CHECK(agot[(size_t)t * n_sel + j] == 0.0f, "case %zu: act of a bad slot", ci);
                    continue;
                }
                double g = 0, u = 0, G = 0, U = 0;
                for (int e = 0; e < E; e++) {
                    double gv = h2f(gu[(size_t)s * 2 * E + e]) * (double)xt[e];
                    double uv = h2f(gu[(size_t)s * 2 * E + E + e]) * (double)xt[e];
                    g += gv;
                    u += uv;
                    G += fabs(gv);
                    U += fabs(uv);
                }
                tola[j] = 1.1 * r * G * (fabs(u) + r * U) + (fabs(g) + 0.3 + r * G) * r * U + 1e-7;
                float a = agot[(size_t)t * n_sel + j], ar = aref[(size_t)t * n_sel + j];
                if (!bad && !(fabs(a - ar) <= tola[j])) {
                    CHECK(0, "case %zu t=%d j=%d: a %g vs %g (tol %g)", ci, t, j, a, ar, tola[j]);
                    bad = 1;
                }
            }
            for (int e = 0; e < E && !bad; e++) {
                double mag = 0, ta = 0;
                for (int j = 0; j < n_sel; j++) {
                    long s = sel ? sel[j] : j;
                    if (s < 0 || s >= S)
                        continue;
                    double d = fabs(h2f(dn[(size_t)s * E + e]));
                    mag += fabs(aref[(size_t)t * n_sel + j]) * d;
                    ta += tola[j] * d;
                }
                float yg = got[(size_t)t * E + e], yr = ref[(size_t)t * E + e];
                if (!(fabs(yg - yr) <= r * mag + ta + 1e-6)) {
                    CHECK(0, "case %zu t=%d e=%d: y %g vs %g (mag %g)", ci, t, e, yg, yr, mag);
                    bad = 1;
                }
            }
        }
        free(tola);
        dfree(dgu);
        dfree(ddn);
        dfree(dx);
        dfree(dy);
        dfree(dact);
        dfree(dsel);
        free(gu);
        free(dn);
        free(x);
        free(sel);
        free(ref);
        free(got);
        free(got2);
        free(aref);
        free(agot);
    }
    OK(si_cuda_set_variant(gc, "ffn_act_unroll", 4));
    OK(si_cuda_set_variant(gc, "ffn_decode", 0));
    OK(si_cuda_set_variant(gc, "ffn_fused_bps", 1));
    CHECK(si_cuda_set_variant(gc, "ffn_act_unroll", 6) == -EINVAL, "an unknown variant was taken");
}

/* ---- selection, greedy ------------------------------------------------------------------------ */

/* select.c's rule, written out: per token the k-th largest by sorting. */
static int cmp_desc(const void *a, const void *b)
{
    float x = *(const float *)a, y = *(const float *)b;
    return (x < y) - (x > y);
}

static void ref_counts(const float *act, int T, int n, float alpha, bool signed_rank, uint32_t *counts)
{
    float *tmp = xmalloc((size_t)n * 4);
    double mean_pos = 0;
    for (int i = 0; i < T * n; i++)
        mean_pos += act[i] > 0;
    mean_pos /= T;
    for (int t = 0; t < T; t++) {
        const float *a = act + (size_t)t * n;
        int k = signed_rank ? (int)lround(alpha * mean_pos) : (int)lround(alpha * n);
        if (k < 1)
            k = 1;
        for (int j = 0; j < n; j++)
            tmp[j] = signed_rank ? a[j] : fabsf(a[j]);
        qsort(tmp, n, 4, cmp_desc);
        float thr = tmp[k - 1];
        for (int j = 0; j < n; j++)
            counts[j] += (signed_rank ? a[j] : fabsf(a[j])) >= thr;
    }
    free(tmp);
}

static void test_topk(void)
{
    cur = "topk_count";
    const int T = 9, n = 1000;
    for (int sr = 0; sr < 2; sr++) {
        float *act = frandv((size_t)T * n, -3, 3);
        /* ties, zeros of both signs, values that differ in the low bits only */
        for (int i = 0; i < T * n; i += 7)
            act[i] = act[i / 2];
        for (int i = 3; i < T * n; i += 97)
            act[i] = (i & 1) ? 0.0f : -0.0f;
        for (int i = 5; i < T * n; i += 131)
            act[i] = nextafterf(act[i - 1], INFINITY);
        uint32_t *ref = calloc(n, 4), *got = xmalloc((size_t)n * 4);
        const float alpha = sr ? 0.3f : 0.2f;
        ref_counts(act, T, n, alpha, sr, ref);
        ref_counts(act, T, n, alpha, sr, ref); /* counts accumulate over calls */
        float *da = dev_copy(act, (size_t)T * n * 4);
        uint32_t *dc = dev((size_t)n * 4);
        uint32_t *zero = calloc(n, 4);
        OK(si_cuda_upload(gc, dc, zero, (size_t)n * 4));
        OK(si_cuda_topk_count(gc, da, T, n, alpha, sr, dc));
        OK(si_cuda_topk_count(gc, da, T, n, alpha, sr, dc));
        get(got, dc, (size_t)n * 4);
        int bad = 0;
        for (int j = 0; j < n; j++)
            bad += got[j] != ref[j];
        CHECK(bad == 0, "signed=%d: %d of %d counts differ", sr, bad, n);
        uint64_t total = 0;
        for (int j = 0; j < n; j++)
            total += ref[j];
        CHECK(total >= 2u * T, "reference counted nothing");
        dfree(da);
        dfree(dc);
        free(act);
        free(ref);
        free(got);
        free(zero);
    }
}

static void test_argmax(void)
{
    cur = "argmax";
    const int n = 128256;
    float *x = frandv(n, -10, 10);
    x[777] = 50.0f;
    x[99999] = 50.0f; /* tie: the lower id wins */
    x[5] = NAN;
    x[100000] = NAN;
    float *dx = dev_copy(x, (size_t)n * 4);
    int32_t *did = dev(4), id = -7;
    OK(si_cuda_argmax(gc, dx, n, did));
    get(&id, did, 4);
    CHECK(id == 777, "argmax %d, want 777", id);
    /* the blocks' counter is back at 0: the same again, and a best in the
     * last block's share, and one block alone (n <= 1024) */
    OK(si_cuda_argmax(gc, dx, n, did));
    get(&id, did, 4);
    CHECK(id == 777, "argmax again %d, want 777", id);
    x[n - 2] = 60.0f;
    OK(si_cuda_upload(gc, dx, x, (size_t)n * 4));
    OK(si_cuda_argmax(gc, dx, n, did));
    get(&id, did, 4);
    CHECK(id == n - 2, "argmax %d, want %d", id, n - 2);
    OK(si_cuda_argmax(gc, dx, 1000, did));
    get(&id, did, 4);
    CHECK(id == 777, "argmax of 1000 %d, want 777", id);
    for (int i = 0; i < n; i++)
        x[i] = NAN;
    x[n - 1] = -INFINITY;
    OK(si_cuda_upload(gc, dx, x, (size_t)n * 4));
    OK(si_cuda_argmax(gc, dx, n, did));
    get(&id, did, 4);
    CHECK(id == n - 1, "argmax %d over NaNs and -inf, want %d", id, n - 1);
    x[n - 1] = NAN;
    OK(si_cuda_upload(gc, dx, x, (size_t)n * 4));
    OK(si_cuda_argmax(gc, dx, n, did));
    get(&id, did, 4);
    CHECK(id == -1, "argmax %d over NaNs only, want -1", id);
    dfree(dx);
    dfree(did);
    free(x);
}

/* Sampling's candidates: the device's, bit for bit the host's
 * (eng_candidates), over Llama 3's vocabulary and a short one, with ties,
 * NaN, +-inf and -0, for k from 1 to ENG_CAND_MAX. */
static void test_top_cands(void)
{
    cur = "top_cands";
    static const int ns[] = { 128256, 49152, 1000 }, ks[] = { 1, 40, 104, 1000, ENG_CAND_MAX };
    for (size_t ni = 0; ni < sizeof(ns) / sizeof(ns[0]); ni++)
        for (int kind = 0; kind < 3; kind++) {
            const int n = ns[ni];
            float *x = frandv(n, -10, 10);
            for (int i = 0; i < n; i++) {
                if (kind == 1) /* coarse: every chunk's k-th value a tie */
                    x[i] = floorf(x[i]);
                if (kind == 2 && i % 97 == 3)
                    x[i] = i % 3 == 0 ? NAN : i % 3 == 1 ? -INFINITY : -0.0f;
                if (kind == 2 && i % 997 == 5)
                    x[i] = i % 2 ? INFINITY : 0.0f;
            }
            float *dx = dev_copy(x, (size_t)n * 4);
            for (size_t ki = 0; ki < sizeof(ks) / sizeof(ks[0]); ki++) {
                const int k = ks[ki];
                const size_t m = eng_candidates_size(n, k);
                float *hv = malloc(m * 4), *gv = malloc(m * 4);
                int32_t *hi = malloc(m * 4), *gi = malloc(m * 4);
                uint32_t *tmp = malloc(2 * ENG_CAND_CHUNK * 4);
                OK(eng_candidates(x, n, k, tmp, hv, hi));
                float *dv = dev(m * 4);
                int32_t *di = dev(m * 4);
                OK(si_cuda_top_cands(gc, dx, n, ENG_CAND_CHUNK, k, dv, di));
                get(gv, dv, m * 4);
                get(gi, di, m * 4);
                size_t bad = 0, first = m;
                for (size_t i = 0; i < m; i++)
                    if (gi[i] != hi[i] || memcmp(&gv[i], &hv[i], 4) != 0) {
                        bad++;
                        first = first < i ? first : i;
                    }
                CHECK(bad == 0, "n %d kind %d k %d: %zu of %zu entries differ (first %zu: id %d, want %d)",
                      n, kind, k, bad, m, first, bad ? gi[first] : 0, bad ? hi[first] : 0);
                dfree(dv);
                dfree(di);
                free(hv);
                free(gv);
                free(hi);
                free(gi);
                free(tmp);
            }
            dfree(dx);
            free(x);
        }
    /* a chunk smaller than k is refused */
    CHECK(si_cuda_top_cands(gc, NULL, 10, 32, 64, NULL, NULL) == -EINVAL, "chunk < k accepted");
}

/* ---- memory, graphs, errors ------------------------------------------------------------------ */

static void test_memory(void)
{
    cur = "memory";
    si_cuda_info in;
    OK(si_cuda_get_info(gc, &in));
    CHECK(in.mem_total > 0 && in.mem_free <= in.mem_total, "info: free %zu total %zu", in.mem_free,
          in.mem_total);
    void *p = NULL;
    if (in.integrated) {
        /* Jetson: the free memory counts what the kernel would reclaim for
         * a cudaMalloc (page cache, as MemAvailable), which
         * cudaMemGetInfo leaves out; a buffer bigger than cudaMemGetInfo's
         * free but within MemAvailable is granted */
        size_t raw_free = 0, raw_total = 0;
        CHECK(cudaMemGetInfo(&raw_free, &raw_total) == cudaSuccess, "cudaMemGetInfo");
        unsigned long long kb = 0;
        FILE *f = fopen("/proc/meminfo", "r");
        char line[128];
        while (f && fgets(line, sizeof(line), f) && sscanf(line, "MemAvailable: %llu kB", &kb) != 1)
            ;
        if (f)
            fclose(f);
        size_t avail = (size_t)kb << 10, slack = (size_t)256 << 20;
        if (avail > in.mem_total)
            avail = in.mem_total;
        CHECK(in.mem_free + slack >= avail, "integrated: %zu free, MemAvailable %zu", in.mem_free,
              avail);
        if (avail > raw_free + 2 * slack) {
            size_t want = raw_free + slack;
            int ra = si_cuda_alloc(gc, want, &p);
            CHECK(ra == 0, "integrated: %zu bytes refused with %zu reclaimable: %s", want, avail,
                  si_cuda_last_error());
            if (ra == 0)
                si_cuda_dev_free(gc, p);
            p = NULL;
        }
        printf("integrated: cudaMemGetInfo %zu free, MemAvailable %zu, reported %zu\n", raw_free,
               avail, in.mem_free);
    }
    int r = si_cuda_alloc(gc, in.mem_total * 2 + 12345, &p);
    CHECK(r == -ENOMEM && strstr(si_cuda_last_error(), "needs") && strstr(si_cuda_last_error(), "free"),
          "huge alloc: %d %s", r, si_cuda_last_error());

    /* row uploads: rows 3,4,5 <- 10,11,12 (one run), row 0 <- 2 */
    const int rows = 16;
    const size_t rb = 24;
    uint8_t src[16 * 24], got[16 * 24], want[16 * 24];
    for (size_t i = 0; i < sizeof(src); i++)
        src[i] = (uint8_t)(i * 7 + 1);
    memset(want, 0xab, sizeof(want));
    uint8_t *d = dev(rows * rb);
    OK(si_cuda_upload(gc, d, want, sizeof(want)));
    int32_t dr[] = { 3, 4, 5, 0 }, sr[] = { 10, 11, 12, 2 };
    OK(si_cuda_upload_rows(gc, d, dr, src, sr, 4, rb));
    for (int i = 0; i < 4; i++)
        memcpy(want + dr[i] * rb, src + sr[i] * rb, rb);
    get(got, d, sizeof(got));
    CHECK(memcmp(got, want, sizeof(got)) == 0, "upload_rows");
    int32_t neg[] = { -1 };
    CHECK(si_cuda_upload_rows(gc, d, neg, src, sr, 1, rb) == -EINVAL, "negative row accepted");
    dfree(d);
}

static void test_graph(void)
{
    cur = "graph";
    const int R = 512, K = 576;
    uint16_t *w = rand_half((size_t)R * K, -1, 1);
    float *x = frandv(K, -1, 1), *nw = frandv(K, 0.5f, 1.5f);
    uint16_t *dw = dev_copy(w, (size_t)R * K * 2);
    float *dx = dev_copy(x, K * 4), *dn = dev_copy(nw, K * 4), *dxn = dev(K * 4), *dy = dev(R * 4);
    float *a = xmalloc(R * 4), *b = xmalloc(R * 4);
    OK(si_cuda_rmsnorm(gc, dx, dn, dxn, 1, K, 1e-5f));
    OK(si_cuda_gemv(gc, dw, R, K, dxn, NULL, dy));
    get(a, dy, R * 4);
    OK(si_cuda_upload(gc, dy, (float[1]){ 0 }, 4)); /* must be overwritten by the replay */
    OK(si_cuda_sync(gc));
    si_cuda_graph *g;
    OK(si_cuda_graph_begin(gc));
    OK(si_cuda_rmsnorm(gc, dx, dn, dxn, 1, K, 1e-5f));
    OK(si_cuda_gemv(gc, dw, R, K, dxn, NULL, dy));
    OK(si_cuda_graph_end(gc, &g));
    OK(si_cuda_graph_launch(gc, g));
    OK(si_cuda_graph_launch(gc, g));
    get(b, dy, R * 4);
    CHECK(memcmp(a, b, R * 4) == 0, "graph replay differs from direct launches");
    /* the graph holds the scratch's address: growing it now is refused */
    int r = si_cuda_reserve(gc, (size_t)1 << 30);
    CHECK(r == -EBUSY && strstr(si_cuda_last_error(), "graph"), "scratch grew under a graph: %d %s",
          r, si_cuda_last_error());
    si_cuda_graph_free(g);

    /* A decode step recaptured with other arguments updates the graph in
     * place; other kernels instantiate it afresh; both then compute what
     * direct launches do. */
    g = NULL;
    bool updated = true;
    OK(si_cuda_graph_begin(gc));
    OK(si_cuda_gemv(gc, dw, R, K, dx, NULL, dy));
    OK(si_cuda_graph_end_update(gc, &g, &updated));
    CHECK(g && !updated, "first capture: graph %p, updated %d", (void *)g, updated);
    OK(si_cuda_graph_launch(gc, g));
    OK(si_cuda_gemv(gc, dw, R, K, dxn, NULL, dy)); /* direct, for the reference */
    get(a, dy, R * 4);
    OK(si_cuda_upload(gc, dy, (float[1]){ 0 }, 4));
    OK(si_cuda_graph_begin(gc));
    OK(si_cuda_gemv(gc, dw, R, K, dxn, NULL, dy)); /* same kernel, another input */
    OK(si_cuda_graph_end_update(gc, &g, &updated));
    CHECK(g && updated, "same kernels, other arguments: not updated in place");
    OK(si_cuda_graph_launch(gc, g));
    get(b, dy, R * 4);
    CHECK(memcmp(a, b, R * 4) == 0, "updated graph computes the old arguments");
    OK(si_cuda_graph_begin(gc));
    OK(si_cuda_rmsnorm(gc, dx, dn, dxn, 1, K, 1e-5f)); /* another topology */
    OK(si_cuda_gemv(gc, dw, R, K, dxn, NULL, dy));
    OK(si_cuda_graph_end_update(gc, &g, &updated));
    CHECK(g && !updated, "other kernels: the update claims to have applied");
    OK(si_cuda_upload(gc, dy, (float[1]){ 0 }, 4));
    OK(si_cuda_graph_launch(gc, g));
    get(b, dy, R * 4);
    CHECK(memcmp(a, b, R * 4) == 0, "re-instantiated graph differs from direct launches");
    si_cuda_graph_free(g);

    /* an op that fails while capturing (scratch growth): the capture is
     * abandoned and the stream works directly again */
    OK(si_cuda_graph_begin(gc));
    r = si_cuda_reserve(gc, (size_t)1 << 30);
    CHECK(r < 0, "scratch grew during a capture");
    si_cuda_graph_abort(gc);
    OK(si_cuda_gemv(gc, dw, R, K, dx, NULL, dy));
    OK(si_cuda_sync(gc));
    dfree(dw);
    dfree(dx);
    dfree(dn);
    dfree(dxn);
    dfree(dy);
    free(w);
    free(x);
    free(nw);
    free(a);
    free(b);
}

/* A chain of decode kernels where each reads what the one before wrote
 * (x += res, xn = norm(x), res = W xn or FFN(xn), ...; a selection of FFN
 * neurons and one picked per token), launched with programmatic dependent
 * launch directly and in a graph, and without it: the kernels are
 * deterministic, so all three give the same bits. A kernel that read its
 * input before its wait (si_pdl_wait) would see the previous round's. */
static void pdl_chain(const uint16_t *dw, const uint16_t *dw3, const si_cuda_ffn_weights *fw,
                      const int32_t *dsel, int n_sel, const uint8_t *dsketch, void *work, int E,
                      float *dx, float *dres, const float *dn, float *dxn, float *dq, int rounds,
                      bool prefetch)
{
    const uint16_t *w3[3] = { dw3, dw3 + (size_t)E * E, dw3 + (size_t)2 * E * E };
    const int rows3[3] = { E, E / 4, E / 4 };
    float *y3[3] = { dq, dq + E, dq + E + E / 4 };
    /* the hints as the engine gives them (q, k, v; then the output matrix
     * and the FFN's slots), and one span of odd start and length */
    const void *p3[3] = { w3[0], w3[1], w3[2] };
    const size_t b3[3] = { (size_t)E * E * 2, (size_t)E / 4 * E * 2, (size_t)E / 4 * E * 2 };
    const void *po[2] = { dw, (const char *)dw3 + 3 };
    const size_t bo[2] = { (size_t)E * E * 2, 1001 };
    for (int i = 0; i < rounds; i++) {
        /* the norm and q, k, v: two kernels, or one with "norm_fold" */
        OK(si_cuda_norm_gemv(gc, dx, dres, dn, 1e-5f, dxn, w3, rows3, 3, E, NULL, y3));
        if (prefetch)
            OK(si_cuda_prefetch(gc, po, bo, 2, i % 2 ? fw : NULL, dsel, n_sel));
        OK(si_cuda_add_rmsnorm(gc, dx, dq, dn, dxn, 1, E, 1e-5f));
        OK(si_cuda_gemv(gc, dw, E, E, dxn, NULL, dres));
        if (i % 2) { /* the norm and the FFN: the norm in k_ffn_act with "norm_fold" */
            OK(si_cuda_norm_ffn(gc, dx, dres, dn, 1e-5f, dxn, fw, dsel, n_sel, dres));
        } else {
            OK(si_cuda_add_rmsnorm(gc, dx, dres, dn, dxn, 1, E, 1e-5f));
            OK(si_cuda_ffn_pick(gc, fw, dsketch, n_sel, dxn, dres, 1, work));
        }
        if (prefetch)
            OK(si_cuda_prefetch(gc, p3, b3, 3, NULL, NULL, 0));
    }
}

static void test_pdl(void)
{
    cur = "dependent launch";
    const int E = 1024, S = 4096, n_sel = 1600, rounds = 12;
    uint16_t *w = rand_half((size_t)E * E, -0.05f, 0.05f), *w3 = rand_half((size_t)3 * E * E, -0.05f, 0.05f);
    uint16_t *gu = rand_half((size_t)S * 2 * E, -0.05f, 0.05f), *dn = rand_half((size_t)S * E, -0.05f, 0.05f);
    float *x = frandv(E, -1, 1), *nw = frandv(E, 0.5f, 1.5f);
    int32_t *sel = xmalloc((size_t)n_sel * 4);
    for (int j = 0; j < n_sel; j++)
        sel[j] = (int32_t)((j * 7L) % S);
    uint16_t *dw = dev_copy(w, (size_t)E * E * 2), *dw3 = dev_copy(w3, (size_t)3 * E * E * 2);
    si_cuda_ffn_weights fw = { E, S, dev_copy(gu, (size_t)S * 2 * E * 2), dev_copy(dn, (size_t)S * E * 2), 0 };
    int32_t *dsel = dev_copy(sel, (size_t)n_sel * 4);
    uint8_t *dsketch = dev((size_t)S * 2 * (E / 32) * 18);
    void *work = dev(si_cuda_ffn_pick_work(S, E));
    OK(si_cuda_sketch_build(gc, &fw, dsketch));
    float *dx = dev(E * 4), *dres = dev(E * 4), *dnw = dev_copy(nw, E * 4), *dxn = dev(E * 4);
    float *dq = dev((size_t)(E + E / 2) * 4);
    float *out[3], *first = xmalloc(E * 4);
    const bool have = si_cuda_set_pdl(gc, true);
    /* each way of running the decode FFN (si_cuda_set_variant "ffn_decode"),
     * then the default with L2 prefetches between the kernels (fv 3, 4:
     * "l2_prefetch" at 100 % and at 5 %, where the FFN's slots are cut
     * short): the prefetch kernel lets the next one start before it waits
     * for the one before, so the chain would see stale values if it ended
     * early */
    for (int fv = 0; fv < 7; fv++) {
        /* 5: the norms folded into the q/k/v GEMV and k_ffn_act (their
         * last blocks write x and xn: the kernels after must see them); 6:
         * with the prefetches too */
        const bool pf = fv == 3 || fv == 4 || fv == 6;
        OK(si_cuda_set_variant(gc, "ffn_decode", fv < 3 ? fv : 0));
        OK(si_cuda_set_variant(gc, "l2_prefetch", fv == 3 || fv == 6 ? 100 : fv == 4 ? 5 : 0));
        OK(si_cuda_set_variant(gc, "norm_fold", fv >= 5));
        for (int v = 0; v < 3; v++) {
            /* 0: one after another; 1: dependent launch, direct; 2: in a graph */
            si_cuda_set_pdl(gc, v > 0);
            OK(si_cuda_upload(gc, dx, x, E * 4));
            OK(si_cuda_upload(gc, dres, x, E * 4));
            if (v < 2) {
                pdl_chain(dw, dw3, &fw, dsel, n_sel, dsketch, work, E, dx, dres, dnw, dxn, dq,
                          rounds, pf);
            } else {
                si_cuda_graph *g;
                OK(si_cuda_graph_begin(gc));
                pdl_chain(dw, dw3, &fw, dsel, n_sel, dsketch, work, E, dx, dres, dnw, dxn, dq,
                          rounds, pf);
                OK(si_cuda_graph_end(gc, &g));
                OK(si_cuda_graph_launch(gc, g));
                OK(si_cuda_sync(gc));
                si_cuda_graph_free(g);
            }
            out[v] = xmalloc(E * 4);
            get(out[v], dx, E * 4);
        }
        si_cuda_set_pdl(gc, true);
        bool finite = true;
        for (int i = 0; i < E; i++)
            finite = finite && isfinite(out[0][i]);
        CHECK(finite, "the chain's result is not finite (case %d)", fv);
        CHECK(memcmp(out[0], out[1], E * 4) == 0,
              "dependent launch (%s here) differs from plain launches (case %d)",
              have ? "on" : "not available", fv);
        CHECK(memcmp(out[0], out[2], E * 4) == 0,
              "dependent launch in a graph differs from plain launches (case %d)", fv);
        if (fv == 0)
            memcpy(first, out[0], E * 4);
        /* (the fold's xn may differ in a last bit, and a token's pick then
         * in its slots: cases 5 and 6 are held to their own plain launches;
         * test_norm_gemv holds the fold to the CPU) */
        CHECK(!pf || fv == 6 || memcmp(first, out[0], E * 4) == 0,
              "prefetches changed the result (case %d)", fv);
        for (int v = 0; v < 3; v++)
            free(out[v]);
    }
    free(first);
    OK(si_cuda_set_variant(gc, "ffn_decode", 0));
    OK(si_cuda_set_variant(gc, "l2_prefetch", 0));
    OK(si_cuda_set_variant(gc, "norm_fold", 0));
    CHECK(si_cuda_set_variant(gc, "l2_prefetch", 101) == -EINVAL, "l2_prefetch 101 was taken");
    {
        const void *p5[5] = { dw, dw, dw, dw, dw };
        const size_t b5[5] = { 16, 16, 16, 16, 16 };
        CHECK(si_cuda_prefetch(gc, p5, b5, 5, NULL, NULL, 0) == -EINVAL, "5 spans were taken");
    }
    dfree(dw);
    dfree(dw3);
    dfree((void *)fw.gate_up);
    dfree((void *)fw.down);
    dfree(dsel);
    dfree(dsketch);
    dfree(work);
    dfree(dx);
    dfree(dres);
    dfree(dnw);
    dfree(dxn);
    dfree(dq);
    free(w);
    free(w3);
    free(gu);
    free(dn);
    free(x);
    free(nw);
    free(sel);
}

int main(void)
{
    if (si_cuda_device_count() <= 0) {
        printf("skip: no CUDA device: %s\n", si_cuda_last_error());
        return 77;
    }
    int r = si_cuda_new(0, &gc);
    if (r == -ENODEV) {
        printf("skip: %s\n", si_cuda_last_error());
        return 77;
    }
    if (r < 0) {
        fprintf(stderr, "si_cuda_new: %s\n", si_cuda_last_error());
        return 1;
    }
    if (eng_backend_cpu_new(2, &cpu) < 0) {
        fprintf(stderr, "no CPU backend\n");
        return 1;
    }
    si_cuda_info in;
    OK(si_cuda_get_info(gc, &in));
    printf("device: %s (sm_%d%d, %d SMs, %s, %.1f GiB free)\n", in.name, in.cc_major, in.cc_minor,
           in.n_sm, in.integrated ? "integrated" : "discrete", in.mem_free / 1073741824.0);

    test_get_rows();
    test_add_store();
    test_rmsnorm();
    test_add_rmsnorm();
    test_rope();
    test_rope_store();
    test_matmul();
    test_matmul3();
    test_norm_gemv();
    test_norm_ffn();
    test_attention();
    test_scale_softcap();
    test_shortconv();
    test_ffn();
    test_topk();
    test_argmax();
    test_top_cands();
    test_memory();
    test_graph();
    test_pdl();

    cpu->iface->free(cpu);
    si_cuda_free(gc);
    if (n_fail) {
        fprintf(stderr, "%d checks failed\n", n_fail);
        return 1;
    }
    printf("all CUDA ops match the CPU backend\n");
    return 0;
}
