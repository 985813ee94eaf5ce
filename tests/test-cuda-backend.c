/* The CUDA backend (engine/backend-cuda.c) through its interface, against
 * the CPU backend: memory calls, every op on backend memory, and the error
 * contract of backend.h (first failure wins, sync() returns and clears it,
 * ops do nothing after a failure, alloc() reports without recording).
 *
 * The kernels themselves are checked in detail by test-cuda-ops; here the
 * shapes are small and cover each path once (decode and prefill), so the
 * bounds are the same per-element ones, relative to the magnitudes of the
 * terms summed (a wrong mapping of arguments is off by O(magnitude)):
 *   get_rows, add, store_f16, copies: exact
 *   rmsnorm 2e-6 relative; rope 4e-6 (|x| + 2)
 *   matmul: 3e-5 (one token, f32 GEMV) / 2e-3 (cuBLAS, x in f16) of sum |w x|
 *   attention: 5e-5 (1 + |o|)
 *   ffn: 2e-3 of sum_j |a_j| |d_j| + 2e-3 of the a's own magnitude
 *   topk_count: exact (the same counts)
 *   argmax: exact (against the rule of backend.h; the CPU does not offer it)
 *
 * Exits 77 (skipped) where eng_backend_cuda_new says -ENODEV.
 */
#include <errno.h>
#include <math.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend.h"

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

static eng_backend *gpu, *cpu;
#define G (gpu->iface)
#define C (cpu->iface)

/* ---- helpers ------------------------------------------------------------------------ */

static uint64_t rng_state = 0x9e3779b97f4a7c15ull;

static float frand(float lo, float hi)
{
    uint64_t x = rng_state;
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    rng_state = x;
    return lo + (hi - lo) * (float)((x >> 11) * 0x1p-53);
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

static uint16_t *halves(size_t n, float lo, float hi)
{
    float *f = frandv(n, lo, hi);
    uint16_t *h = xmalloc(n * sizeof(uint16_t));
    C->store_f16(cpu, f, h, (long)n);
    free(f);
    return h;
}

static float h2f(uint16_t h)
{
    float f;
    C->get_rows(cpu, &(eng_weight){ ENG_DTYPE_F16, 1, 1, &h }, &(int32_t){ 0 }, 1, &f);
    return f;
}

/* backend memory holding a copy of host src */
static void *up(const void *src, size_t bytes)
{
    void *p = NULL;
    int r = G->alloc(gpu, bytes, &p);
    if (r < 0) {
        fprintf(stderr, "alloc of %zu bytes: %d (%s)\n", bytes, r, G->error(gpu));
        exit(1);
    }
    if (src)
        G->upload(gpu, p, src, bytes);
    return p;
}

/* host copy of backend memory; the queued work must have succeeded */
static void down(void *dst, const void *src, size_t bytes)
{
    G->download(gpu, dst, src, bytes);
    int r = G->sync(gpu);
    if (r < 0) {
        fprintf(stderr, "[%s] sync: %d (%s)\n", cur, r, G->error(gpu));
        exit(1);
    }
}

static void dfree(void *p)
{
    G->mem_free(gpu, p);
}

/* |got - ref| <= tol[i] for all i; reports the first failure */
static void near(const char *what, const float *got, const float *ref, const double *tol, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (!(fabs((double)got[i] - ref[i]) <= tol[i])) {
            CHECK(0, "%s: element %zu: %g vs %g (tol %g)", what, i, got[i], ref[i], tol[i]);
            return;
        }
}

/* ---- memory ------------------------------------------------------------------------- */

typedef struct up_job {
    uint8_t *dev;        /* one buffer, each thread its own part */
    const uint8_t *host;
    int ith;
} up_job;

enum { UP_THREADS = 4, UP_CHUNKS = 32, UP_CHUNK = 1000, UP_ROW = 24 };

/* uploads and row uploads at once from several threads, as the loader does */
static void *up_task(void *p)
{
    up_job *j = p;
    for (int c = j->ith; c < UP_CHUNKS; c += UP_THREADS)
        G->upload(gpu, j->dev + (size_t)c * UP_CHUNK, j->host + (size_t)c * UP_CHUNK, UP_CHUNK);
    return NULL;
}

static void *up_rows_task(void *p)
{
    up_job *j = p;
    /* rows ith, ith + T, ...: runs of one row, scattered */
    int32_t rows[UP_CHUNKS];
    uint8_t packed[UP_CHUNKS * UP_ROW];
    int n = 0;
    for (int r = j->ith; r < UP_CHUNKS; r += UP_THREADS) {
        rows[n] = r;
        memcpy(packed + (size_t)n * UP_ROW, j->host + (size_t)r * UP_ROW, UP_ROW);
        n++;
    }
    G->upload_rows(gpu, j->dev, rows, packed, n, UP_ROW);
    return NULL;
}

static void test_memory(void)
{
    cur = "memory";
    CHECK(!G->host_memory, "host_memory must be false");
    CHECK(G->dtypes == 1u << ENG_DTYPE_F16, "dtypes %#x", G->dtypes);
    size_t fr = 0, tot = 0;
    G->mem_info(gpu, &fr, &tot);
    CHECK(tot > 0 && fr <= tot, "mem_info %zu of %zu", fr, tot);

    /* round trip, device-to-device copy */
    const size_t n = UP_CHUNKS * UP_CHUNK;
    uint8_t *h = xmalloc(n), *back = xmalloc(n);
    for (size_t i = 0; i < n; i++)
        h[i] = (uint8_t)(i * 7 + 3);
    uint8_t *d = up(h, n), *d2 = up(NULL, n);
    G->copy(gpu, d2, d, n);
    down(back, d2, n);
    CHECK(memcmp(back, h, n) == 0, "upload/copy/download round trip differs");

    /* several threads at once */
    uint8_t *d3 = up(NULL, n);
    pthread_t th[UP_THREADS];
    up_job jobs[UP_THREADS];
    for (int t = 0; t < UP_THREADS; t++) {
        jobs[t] = (up_job){ d3, h, t };
        pthread_create(&th[t], NULL, up_task, &jobs[t]);
    }
    for (int t = 0; t < UP_THREADS; t++)
        pthread_join(th[t], NULL);
    memset(back, 0, n);
    down(back, d3, n);
    CHECK(memcmp(back, h, n) == 0, "concurrent uploads differ");

    uint8_t *d4 = up(NULL, UP_CHUNKS * UP_ROW);
    for (int t = 0; t < UP_THREADS; t++) {
        jobs[t] = (up_job){ d4, h, t };
        pthread_create(&th[t], NULL, up_rows_task, &jobs[t]);
    }
    for (int t = 0; t < UP_THREADS; t++)
        pthread_join(th[t], NULL);
    down(back, d4, UP_CHUNKS * UP_ROW);
    CHECK(memcmp(back, h, UP_CHUNKS * UP_ROW) == 0, "concurrent row uploads differ");

    /* rows in runs (merged into one copy) and out of order, into a buffer
     * whose other rows keep their contents */
    int32_t rows[] = { 5, 6, 7, 0, 9, 2, 3 };
    int nr = (int)(sizeof(rows) / sizeof(rows[0]));
    uint8_t packed[7 * UP_ROW], want[10 * UP_ROW];
    for (size_t i = 0; i < sizeof(packed); i++)
        packed[i] = (uint8_t)(200 - i);
    memset(want, 0x5a, sizeof(want));
    uint8_t *d5 = up(want, sizeof(want));
    for (int i = 0; i < nr; i++)
        memcpy(want + (size_t)rows[i] * UP_ROW, packed + (size_t)i * UP_ROW, UP_ROW);
    G->upload_rows(gpu, d5, rows, packed, nr, UP_ROW);
    G->upload_rows(gpu, d5, rows, packed, 0, UP_ROW); /* nothing */
    down(back, d5, sizeof(want));
    CHECK(memcmp(back, want, sizeof(want)) == 0, "upload_rows differs");

    dfree(d);
    dfree(d2);
    dfree(d3);
    dfree(d4);
    dfree(d5);
    G->mem_free(gpu, NULL);
    free(h);
    free(back);
}

/* ---- ops ------------------------------------------------------------------------------- */

static void test_get_rows(void)
{
    cur = "get_rows";
    const int rows = 29, cols = 72, n = 6;
    int32_t ids[6] = { 0, 28, 3, -1, 29, 3 };
    for (int f16 = 0; f16 < 2; f16++) {
        float *tf = frandv((size_t)rows * cols, -2, 2);
        uint16_t *th = xmalloc((size_t)rows * cols * 2);
        C->store_f16(cpu, tf, th, (long)rows * cols);
        const void *host = f16 ? (const void *)th : (const void *)tf;
        size_t tb = (size_t)rows * cols * (f16 ? 2 : 4);
        eng_weight hw = { f16 ? ENG_DTYPE_F16 : ENG_DTYPE_F32, rows, cols, host };
        eng_weight dw = hw;
        dw.data = up(host, tb);
        int32_t *dids = up(ids, sizeof(ids));
        float *dout = up(NULL, (size_t)n * cols * 4);
        float *ref = xmalloc((size_t)n * cols * 4), *got = xmalloc((size_t)n * cols * 4);
        C->get_rows(cpu, &hw, ids, n, ref);
        G->get_rows(gpu, &dw, dids, n, dout);
        down(got, dout, (size_t)n * cols * 4);
        CHECK(memcmp(got, ref, (size_t)n * cols * 4) == 0, "f16=%d differs", f16);
        dfree((void *)dw.data);
        dfree(dids);
        dfree(dout);
        free(tf);
        free(th);
        free(ref);
        free(got);
    }
}

static void test_matmul(void)
{
    const int R = 96, K = 136;
    for (int T = 1; T <= 5; T += 4) {
        cur = T == 1 ? "matmul (gemv)" : "matmul (cublas)";
        uint16_t *w = halves((size_t)R * K, -1, 1);
        float *x = frandv((size_t)T * K, -2, 2), *b = frandv(R, -1, 1);
        float *ref = xmalloc((size_t)T * R * 4), *got = xmalloc((size_t)T * R * 4);
        eng_weight hw = { ENG_DTYPE_F16, R, K, w }, dw = hw;
        dw.data = up(w, (size_t)R * K * 2);
        float *dx = up(x, (size_t)T * K * 4), *db = up(b, R * 4), *dy = up(NULL, (size_t)T * R * 4);
        C->matmul(cpu, &hw, b, x, ref, T);
        G->matmul(gpu, &dw, db, dx, dy, T);
        down(got, dy, (size_t)T * R * 4);
        double *tol = xmalloc((size_t)T * R * sizeof(double));
        for (int t = 0; t < T; t++)
            for (int r = 0; r < R; r++) {
                double mag = 0;
                for (int k = 0; k < K; k++)
                    mag += fabs(h2f(w[(size_t)r * K + k]) * (double)x[(size_t)t * K + k]);
                tol[(size_t)t * R + r] = (T == 1 ? 3e-5 : 2e-3) * mag + 1e-6 * fabs(b[r]) + 1e-7;
            }
        near("y", got, ref, tol, (size_t)T * R);

        /* matmul3: the rows cut into three weights (q, k, v), each output
         * its own buffer; the same numbers as the one matmul */
        CHECK(G->matmul3 != NULL, "no matmul3");
        const int rows3[3] = { 48, 16, 32 }, off3[3] = { 0, 48, 64 };
        eng_weight w3[3];
        const eng_weight *pw3[3];
        const float *pb3[3];
        float *py3[3];
        for (int i = 0; i < 3; i++) {
            w3[i] = (eng_weight){ ENG_DTYPE_F16, rows3[i], K,
                                  (const uint16_t *)dw.data + (size_t)off3[i] * K };
            pw3[i] = &w3[i];
            pb3[i] = i == 1 ? NULL : db + off3[i];
            py3[i] = up(NULL, (size_t)T * rows3[i] * 4);
        }
        G->matmul3(gpu, pw3, pb3, dx, py3, T);
        for (int i = 0; i < 3; i++) {
            float *g3 = xmalloc((size_t)T * rows3[i] * 4), *r3 = xmalloc((size_t)T * rows3[i] * 4);
            double *t3 = xmalloc((size_t)T * rows3[i] * sizeof(double));
            down(g3, py3[i], (size_t)T * rows3[i] * 4);
            for (int t = 0; t < T; t++)
                for (int r = 0; r < rows3[i]; r++) {
                    const size_t at = (size_t)t * R + off3[i] + r;
                    /* no bias for the second: the CPU's sum less b */
                    r3[(size_t)t * rows3[i] + r] = i == 1 ? ref[at] - b[off3[i] + r] : ref[at];
                    t3[(size_t)t * rows3[i] + r] = tol[at] + (i == 1 ? 1e-6 * fabs(ref[at]) : 0);
                }
            near(i == 0 ? "matmul3 y0" : i == 1 ? "matmul3 y1" : "matmul3 y2", g3, r3, t3,
                 (size_t)T * rows3[i]);
            dfree(py3[i]);
            free(g3);
            free(r3);
            free(t3);
        }
        dfree((void *)dw.data);
        dfree(dx);
        dfree(db);
        dfree(dy);
        free(w);
        free(x);
        free(b);
        free(ref);
        free(got);
        free(tol);
    }
}

static void test_norm_rope(void)
{
    cur = "rmsnorm";
    const int T = 3, n = 192;
    float *x = frandv((size_t)T * n, -3, 3), *w = frandv(n, 0.5f, 1.5f);
    float *ref = xmalloc((size_t)T * n * 4), *got = xmalloc((size_t)T * n * 4);
    double *tol = xmalloc((size_t)T * n * sizeof(double));
    float *dx = up(x, (size_t)T * n * 4), *dw = up(w, n * 4);
    C->rmsnorm(cpu, x, w, ref, T, n, 1e-5f);
    G->rmsnorm(gpu, dx, dw, dx, T, n, 1e-5f); /* in place */
    down(got, dx, (size_t)T * n * 4);
    for (int i = 0; i < T * n; i++)
        tol[i] = 2e-6 * fabs(ref[i]) + 1e-7;
    near("y", got, ref, tol, (size_t)T * n);

    /* add_rmsnorm: the CPU's add then norm; x itself gets the add */
    cur = "add_rmsnorm";
    CHECK(G->add_rmsnorm != NULL, "no add_rmsnorm");
    float *r = frandv((size_t)T * n, -3, 3), *gx = xmalloc((size_t)T * n * 4);
    float *dr = up(r, (size_t)T * n * 4), *dy = up(NULL, (size_t)T * n * 4);
    /* x on the device is now the CPU's ref (the norm above, in place) */
    memcpy(x, got, (size_t)T * n * 4);
    C->add(cpu, x, r, (long)T * n);
    C->rmsnorm(cpu, x, w, ref, T, n, 1e-5f);
    G->add_rmsnorm(gpu, dx, dr, dw, dy, T, n, 1e-5f);
    down(got, dy, (size_t)T * n * 4);
    down(gx, dx, (size_t)T * n * 4);
    CHECK(memcmp(gx, x, (size_t)T * n * 4) == 0, "x after the add differs from the CPU's");
    for (int i = 0; i < T * n; i++)
        tol[i] = 2e-6 * fabs(ref[i]) + 1e-7;
    near("y", got, ref, tol, (size_t)T * n);
    dfree(dr);
    dfree(dy);
    free(r);
    free(gx);
    dfree(dx);
    dfree(dw);
    free(x);
    free(w);
    free(ref);
    free(got);
    free(tol);

    cur = "rope";
    for (int neox = 0; neox < 2; neox++) {
        const int H = 3, hd = 64, nr = neox ? 32 : 64, p0 = 17;
        size_t nx = (size_t)T * H * hd;
        x = frandv(nx, -2, 2);
        float *ff = frandv(nr / 2, 1, 8);
        ref = xmalloc(nx * 4);
        got = xmalloc(nx * 4);
        tol = xmalloc(nx * sizeof(double));
        memcpy(ref, x, nx * 4);
        dx = up(x, nx * 4);
        float *dff = up(ff, (size_t)nr / 2 * 4);
        C->rope(cpu, ref, T, H, hd, nr, p0, 10000.0f, neox ? NULL : ff, neox);
        G->rope(gpu, dx, T, H, hd, nr, p0, 10000.0f, neox ? NULL : dff, neox);
        down(got, dx, nx * 4);
        for (size_t i = 0; i < nx; i++)
            tol[i] = 4e-6 * (fabs(x[i]) + 2.0) + 1e-7;
        near(neox ? "neox" : "pairs", got, ref, tol, nx);
        dfree(dx);
        dfree(dff);
        free(x);
        free(ff);
        free(ref);
        free(got);
        free(tol);
    }
}

static void test_attention(void)
{
    cur = "attention";
    /* window > 0: Gemma 3's local layers (a decode past its window, a
     * prefill whose windows start inside the context) */
    struct {
        int T, pos0, window;
        float cap; /* Gemma 2's soft-capped scores */
    } cases[] = { { 1, 40, 0, 0 }, { 6, 0, 0, 0 }, { 4, 9, 0, 0 }, { 1, 300, 37, 0 }, { 9, 50, 6, 0 },
                  { 1, 300, 0, 0.5f }, { 9, 50, 6, 0.5f } };
    const int H = 4, Hkv = 2, hd = 64;
    for (size_t ci = 0; ci < sizeof(cases) / sizeof(cases[0]); ci++) {
        int T = cases[ci].T, p0 = cases[ci].pos0, n_ctx = p0 + T + 2, win = cases[ci].window;
        size_t nq = (size_t)T * H * hd, nkv = (size_t)n_ctx * Hkv * hd;
        float *q = frandv(nq, -1, 1);
        uint16_t *k = halves(nkv, -1, 1), *v = halves(nkv, -1, 1);
        float *ref = xmalloc(nq * 4), *got = xmalloc(nq * 4);
        double *tol = xmalloc(nq * sizeof(double));
        float *dq = up(q, nq * 4), *dout = up(NULL, nq * 4);
        uint16_t *dk = up(k, nkv * 2), *dv = up(v, nkv * 2);
        float scale = 1.0f / sqrtf((float)hd);
        C->attention(cpu, q, k, v, ref, T, p0, H, Hkv, hd, scale, win, cases[ci].cap, NULL);
        G->attention(gpu, dq, dk, dv, dout, T, p0, H, Hkv, hd, scale, win, cases[ci].cap, NULL);
        down(got, dout, nq * 4);
        for (size_t i = 0; i < nq; i++)
            tol[i] = 5e-5 * (1.0 + fabs(ref[i]));
        near("out", got, ref, tol, nq);
        dfree(dq);
        dfree(dout);
        dfree(dk);
        dfree(dv);
        free(q);
        free(k);
        free(v);
        free(ref);
        free(got);
        free(tol);
    }
}

static void test_ffn(void)
{
    const int E = 64, S = 192;
    /* gelu: GeGLU (Gemma) */
    struct {
        int T, n_sel;
        bool use_sel, gelu;
    } cases[] = { { 1, 192, false, false }, { 1, 77, true, false }, { 4, 192, false, false },
                  { 4, 77, true, false }, { 1, 77, true, true }, { 4, 192, false, true } };
    for (size_t ci = 0; ci < sizeof(cases) / sizeof(cases[0]); ci++) {
        int T = cases[ci].T, n_sel = cases[ci].n_sel;
        cur = T == 1 ? (cases[ci].gelu ? "ffn decode gelu" : "ffn decode")
                     : (cases[ci].gelu ? "ffn prefill gelu" : "ffn prefill");
        uint16_t *gu = halves((size_t)S * 2 * E, -1, 1), *dn = halves((size_t)S * E, -1, 1);
        float *x = frandv((size_t)T * E, -1.5f, 1.5f);
        int32_t *sel = NULL;
        if (cases[ci].use_sel) {
            sel = xmalloc((size_t)n_sel * 4);
            for (int j = 0; j < n_sel; j++)
                sel[j] = (j * 5 + 3) % S; /* distinct: 5 and 192 are coprime */
            sel[n_sel / 2] = S + 4;       /* out of range: contributes nothing */
        }
        eng_ffn_weights hw = { ENG_DTYPE_F16, E, S, gu, dn, NULL,
                               cases[ci].gelu ? ENG_ACT_GELU : ENG_ACT_SILU, NULL, 0.0f }, dw = hw;
        dw.gate_up = up(gu, (size_t)S * 2 * E * 2);
        dw.down = up(dn, (size_t)S * E * 2);
        int32_t *dsel = sel ? up(sel, (size_t)n_sel * 4) : NULL;
        float *dx = up(x, (size_t)T * E * 4), *dy = up(NULL, (size_t)T * E * 4);
        float *dact = up(NULL, (size_t)T * n_sel * 4);
        float *ref = xmalloc((size_t)T * E * 4), *got = xmalloc((size_t)T * E * 4);
        float *aref = xmalloc((size_t)T * n_sel * 4), *agot = xmalloc((size_t)T * n_sel * 4);
        C->ffn(cpu, &hw, sel, n_sel, x, ref, T, aref);
        G->ffn(gpu, &dw, dsel, n_sel, dx, dy, T, dact);
        down(got, dy, (size_t)T * E * 4);
        down(agot, dact, (size_t)T * n_sel * 4);
        double *tola = xmalloc((size_t)T * n_sel * sizeof(double));
        double *toly = xmalloc((size_t)T * E * sizeof(double));
        for (int t = 0; t < T; t++) {
            for (int j = 0; j < n_sel; j++) {
                long s = sel ? sel[j] : j;
                double G2 = 0, U = 0;
                for (int e = 0; s < S && e < E; e++) {
                    G2 += fabs(h2f(gu[(size_t)s * 2 * E + e]) * (double)x[(size_t)t * E + e]);
                    U += fabs(h2f(gu[(size_t)s * 2 * E + E + e]) * (double)x[(size_t)t * E + e]);
                }
                /* a = silu(g) u: each dot off by r of its magnitude */
                tola[(size_t)t * n_sel + j] = 2e-3 * (1.1 * G2 * (U + 1) + (G2 + 1) * U) + 1e-7;
            }
            for (int e = 0; e < E; e++) {
                double mag = 0, ta = 0;
                for (int j = 0; j < n_sel; j++) {
                    long s = sel ? sel[j] : j;
                    if (s >= S)
                        continue;
                    double d = fabs(h2f(dn[(size_t)s * E + e]));
                    mag += fabs(aref[(size_t)t * n_sel + j]) * d;
                    ta += tola[(size_t)t * n_sel + j] * d;
                }
                toly[(size_t)t * E + e] = 2e-3 * mag + ta + 1e-7;
            }
        }
        near("act", agot, aref, tola, (size_t)T * n_sel);
        near("y", got, ref, toly, (size_t)T * E);
        dfree((void *)dw.gate_up);
        dfree((void *)dw.down);
        dfree(dsel);
        dfree(dx);
        dfree(dy);
        dfree(dact);
        free(gu);
        free(dn);
        free(x);
        free(sel);
        free(ref);
        free(got);
        free(aref);
        free(agot);
        free(tola);
        free(toly);
    }
}

/* ENG_PICK_TOKEN: the device builds the CPU's sketch bytes from the
 * slots, and picks the same neurons per token (the CPU's op is the
 * reference: y within the FFN's tolerance of the picked slots' sum, far
 * below one neuron's part of it). */
static void test_ffn_pick(void)
{
    /* E, slots, whether every slot has the same gate and up rows (all
     * scores tie: the k lowest slots are picked), and GELU's scores */
    static const int shapes[][4] = { { 576, 37, 0, 0 }, { 64, 300, 0, 0 }, { 96, 40, 1, 0 },
                                     { 64, 300, 0, 1 } };
    for (size_t si = 0; si < sizeof(shapes) / sizeof(shapes[0]); si++) {
        const int E = shapes[si][0], S = shapes[si][1], T = 2;
        cur = "build_sketch";
        uint16_t *gu = halves((size_t)S * 2 * E, -1, 1), *dn = halves((size_t)S * E, -1, 1);
        for (int s = 1; shapes[si][2] && s < S; s++)
            memcpy(gu + (size_t)s * 2 * E, gu, (size_t)2 * E * 2);
        /* a zero row, and a block whose largest magnitude comes twice with
         * both signs (the first one sets the scale's sign) */
        memset(gu + (size_t)3 * E, 0, (size_t)E * 2);
        gu[5 * E + 7] = 0x3c00;  /* +1 */
        gu[5 * E + 20] = 0xbc00; /* -1 */
        const size_t sb = eng_sketch_slot_bytes(E);
        uint8_t *hsk = xmalloc((size_t)S * sb), *gsk = xmalloc((size_t)S * sb);
        eng_ffn_weights hw = { ENG_DTYPE_F16, E, S, gu, dn, hsk,
                               shapes[si][3] ? ENG_ACT_GELU : ENG_ACT_SILU, NULL, 0.0f }, dw = hw;
        dw.gate_up = up(gu, (size_t)S * 2 * E * 2);
        dw.down = up(dn, (size_t)S * E * 2);
        dw.sketch = up(NULL, (size_t)S * sb);
        C->build_sketch(cpu, &hw);
        G->build_sketch(gpu, &dw);
        down(gsk, dw.sketch, (size_t)S * sb);
        size_t bad = 0;
        while (bad < (size_t)S * sb && gsk[bad] == hsk[bad])
            bad++;
        CHECK(bad == (size_t)S * sb, "E %d: sketch byte %zu: %u, CPU %u", E, bad,
              bad < (size_t)S * sb ? gsk[bad] : 0, bad < (size_t)S * sb ? hsk[bad] : 0);
        if (bad < (size_t)S * sb) {
            /* what a failure looks like: how many bytes differ, and the
             * first scales and codes of the first differing row */
            size_t n_diff = 0, r0 = bad / (sb / 2) * (sb / 2);
            for (size_t i = 0; i < (size_t)S * sb; i++)
                n_diff += gsk[i] != hsk[i];
            fprintf(stderr, "  %zu of %zu bytes differ; row at byte %zu:\n", n_diff,
                    (size_t)S * sb, r0);
            for (int side = 0; side < 2; side++) {
                const uint8_t *b = side ? hsk + r0 : gsk + r0;
                fprintf(stderr, "  %s scales", side ? "CPU " : "CUDA");
                for (int i = 0; i < 8; i++)
                    fprintf(stderr, " %02x", b[i]);
                fprintf(stderr, " codes");
                for (int i = 0; i < 8; i++)
                    fprintf(stderr, " %02x", b[2 * (E / 32) + i]);
                fprintf(stderr, "\n");
            }
        }

        cur = "ffn_pick";
        float *x = frandv((size_t)T * E, -1.5f, 1.5f);
        float *dx = up(x, (size_t)T * E * 4), *dy = up(NULL, (size_t)T * E * 4);
        float *ref = xmalloc((size_t)T * E * 4), *got = xmalloc((size_t)T * E * 4);
        float *act = xmalloc((size_t)S * 4), *tmp = xmalloc((size_t)E * 4);
        double *tol = xmalloc((size_t)T * E * sizeof(double));
        const int ks[] = { S / 3, 1, S - 1, S, 0 };
        for (size_t ki = 0; ki < sizeof(ks) / sizeof(ks[0]); ki++) {
            const int k = ks[ki];
            C->ffn_pick(cpu, &hw, k, x, ref, T);
            G->ffn_pick(gpu, &dw, k, dx, dy, T);
            down(got, dy, (size_t)T * E * 4);
            for (int t = 0; t < T; t++) {
                /* every slot's a bounds the sum of the picked ones */
                C->ffn(cpu, &hw, NULL, S, x + (size_t)t * E, tmp, 1, act);
                for (int e = 0; e < E; e++) {
                    double mag = 0;
                    for (int j = 0; j < S; j++)
                        mag += fabs(act[j] * h2f(dn[(size_t)j * E + e]));
                    tol[(size_t)t * E + e] = 1e-3 * mag + 1e-6;
                }
            }
            char what[48];
            snprintf(what, sizeof(what), "y, E %d, k %d", E, k);
            near(what, got, ref, tol, (size_t)T * E);
        }
        dfree((void *)dw.gate_up);
        dfree((void *)dw.down);
        dfree((void *)dw.sketch);
        dfree(dx);
        dfree(dy);
        free(gu);
        free(dn);
        free(hsk);
        free(gsk);
        free(x);
        free(ref);
        free(got);
        free(act);
        free(tmp);
        free(tol);
    }
    /* a layer larger than any build_sketch reserved for: an error, no fault */
    cur = "ffn_pick unreserved";
    const int E = 64, S = 5000;
    eng_ffn_weights w = { ENG_DTYPE_F16, E, S, NULL, NULL, NULL, ENG_ACT_SILU, NULL, 0.0f };
    w.gate_up = up(NULL, (size_t)S * 2 * E * 2);
    w.down = up(NULL, (size_t)S * E * 2);
    w.sketch = up(NULL, (size_t)S * eng_sketch_slot_bytes(E));
    float *dx = up(NULL, (size_t)E * 4), *dy = up(NULL, (size_t)E * 4);
    G->ffn_pick(gpu, &w, 10, dx, dy, 1);
    int r = G->sync(gpu);
    CHECK(r < 0 && strstr(G->error(gpu), "build_sketch"), "unreserved ffn_pick: %d '%s'", r,
          G->error(gpu));
    dfree((void *)w.gate_up);
    dfree((void *)w.down);
    dfree((void *)w.sketch);
    dfree(dx);
    dfree(dy);
}

static void test_add_store(void)
{
    cur = "add/store_f16";
    const long n = 1000;
    float *y = frandv(n, -100, 100), *x = frandv(n, -100, 100);
    float *dy = up(y, n * 4), *dx = up(x, n * 4), *got = xmalloc(n * 4);
    uint16_t *dh = up(NULL, n * 2), *gh = xmalloc(n * 2), *rh = xmalloc(n * 2);
    C->add(cpu, y, x, n);
    G->add(gpu, dy, dx, n);
    down(got, dy, n * 4);
    CHECK(memcmp(got, y, n * 4) == 0, "add differs");
    C->store_f16(cpu, y, rh, n);
    G->store_f16(gpu, dy, dh, n);
    down(gh, dh, n * 2);
    CHECK(memcmp(gh, rh, n * 2) == 0, "store_f16 differs");
    /* KV rows 3 and 4 of 200-element rows (the rest of the cache untouched) */
    uint16_t *kc = xmalloc(n * 2);
    memset(kc, 0, n * 2);
    uint16_t *dkc = up(kc, n * 2);
    C->store_kv(cpu, y, kc, 200, 3, 2);
    G->store_kv(gpu, dy, dkc, 200, 3, 2);
    down(gh, dkc, n * 2);
    CHECK(memcmp(gh, kc, n * 2) == 0 && kc[600] != 0, "store_kv differs");
    dfree(dkc);
    free(kc);
    dfree(dy);
    dfree(dx);
    dfree(dh);
    free(y);
    free(x);
    free(got);
    free(gh);
    free(rh);

    /* rope_store: the CPU's rope of q and k and store of k and v (GQA 6/2,
     * neox, half the dims rotating, 2 tokens at position 5): q and k within
     * the rope bound, the k cache the f16 of the device's own k, the v cache
     * and every other row exactly the CPU's */
    cur = "rope_store";
    CHECK(G->rope_store != NULL, "no rope_store");
    const int T = 2, H = 6, Hkv = 2, hd = 64, nr = 32, p0 = 5, nctx = 9;
    const size_t nq = (size_t)T * H * hd, nk = (size_t)T * Hkv * hd, nc = (size_t)nctx * Hkv * hd;
    float *q = frandv(nq, -2, 2), *k = frandv(nk, -2, 2), *v = frandv(nk, -2, 2);
    uint16_t *kc0 = xmalloc(nc * 2), *vc0 = xmalloc(nc * 2), *gkc = xmalloc(nc * 2), *gvc = xmalloc(nc * 2);
    for (size_t i = 0; i < nc; i++)
        kc0[i] = vc0[i] = (uint16_t)(0x3c00 + i % 7); /* rows the op must leave */
    float *dq = up(q, nq * 4), *dk = up(k, nk * 4), *dv = up(v, nk * 4);
    uint16_t *dkc0 = up(kc0, nc * 2), *dvc0 = up(vc0, nc * 2);
    float *gq = xmalloc(nq * 4), *gk = xmalloc(nk * 4);
    C->rope(cpu, q, T, H, hd, nr, p0, 10000.0f, NULL, true);
    C->rope(cpu, k, T, Hkv, hd, nr, p0, 10000.0f, NULL, true);
    C->store_kv(cpu, k, kc0, (long)Hkv * hd, p0, T);
    C->store_kv(cpu, v, vc0, (long)Hkv * hd, p0, T);
    G->rope_store(gpu, dq, dk, dv, T, H, Hkv, hd, nr, p0, 10000.0f, NULL, true, dkc0, dvc0);
    down(gq, dq, nq * 4);
    down(gk, dk, nk * 4);
    down(gkc, dkc0, nc * 2);
    down(gvc, dvc0, nc * 2);
    double *tq = xmalloc(nq * sizeof(double));
    for (size_t i = 0; i < nq; i++)
        tq[i] = 4e-6 * (fabs(q[i]) + 2) + 1e-7;
    near("q", gq, q, tq, nq);
    near("k", gk, k, tq, nk);
    uint16_t *own = xmalloc(nk * 2);
    C->store_f16(cpu, gk, own, (long)nk);
    const size_t r0 = (size_t)p0 * Hkv * hd;
    CHECK(memcmp(gkc + r0, own, nk * 2) == 0, "k cache: not the f16 of the device's k");
    CHECK(memcmp(gkc, kc0, r0 * 2) == 0 && memcmp(gkc + r0 + nk, kc0 + r0 + nk, (nc - r0 - nk) * 2) == 0,
          "k cache: rows other than the tokens' changed");
    CHECK(memcmp(gvc, vc0, nc * 2) == 0, "v cache differs");
    dfree(dq);
    dfree(dk);
    dfree(dv);
    dfree(dkc0);
    dfree(dvc0);
    free(q);
    free(k);
    free(v);
    free(kc0);
    free(vc0);
    free(gkc);
    free(gvc);
    free(gq);
    free(gk);
    free(tq);
    free(own);
}

/* The prefill vote (optional op): the counts of the CPU's, exactly, over two
 * calls that add up (two chunks of a prefill; the signed rank's k is each
 * call's own). Ties, zeros of both signs and neighbouring floats are
 * planted, since the thresholds fall on them. */
static void test_topk_count(void)
{
    cur = "topk_count";
    CHECK(G->topk_count && C->topk_count, "topk_count not offered");
    if (!G->topk_count || !C->topk_count)
        return;
    /* zeros: all but every 20th value 0, as Gemma 3n's cut layers leave
     * them, so k passes the nonzero count (zeros never vote) */
    struct {
        int T1, T2, n_sel;
        float alpha;
        bool zeros;
    } cases[] = { { 1, 1, 64, 0.2f, false }, { 7, 3, 1000, 0.2f, false },
                  { 16, 5, 4099, 0.1f, false }, { 4, 4, 333, 1.0f, false },
                  { 6, 2, 2048, 0.2f, true } };
    for (size_t ci = 0; ci < sizeof(cases) / sizeof(cases[0]); ci++)
        for (int sr = 0; sr < 2; sr++) {
            const int n = cases[ci].n_sel, T1 = cases[ci].T1, T2 = cases[ci].T2;
            const size_t N = (size_t)(T1 + T2) * n;
            /* mostly negative for the signed rank, as SiLU-gated products are */
            float *act = frandv(N, -3, sr ? 1 : 3);
            for (size_t i = 0; i < N; i += 7)
                act[i] = act[i / 2];
            for (size_t i = 3; i < N; i += 97)
                act[i] = (i & 1) ? 0.0f : -0.0f;
            for (size_t i = 5; i < N; i += 131)
                act[i] = nextafterf(act[i - 1], INFINITY);
            if (cases[ci].zeros)
                for (size_t i = 0; i < N; i++)
                    act[i] = i % 20 == 7 ? act[i] : (i & 1) ? 0.0f : -0.0f;
            /* counts add to what the buffer holds */
            uint32_t *ref = xmalloc((size_t)n * 4), *got = xmalloc((size_t)n * 4);
            for (int j = 0; j < n; j++)
                ref[j] = (uint32_t)(j % 5);
            float *da = up(act, N * 4);
            uint32_t *dc = up(ref, (size_t)n * 4);
            const float alpha = cases[ci].alpha;
            C->topk_count(cpu, act, T1, n, alpha, sr, ref);
            C->topk_count(cpu, act + (size_t)T1 * n, T2, n, alpha, sr, ref);
            G->topk_count(gpu, da, T1, n, alpha, sr, dc);
            G->topk_count(gpu, da + (size_t)T1 * n, T2, n, alpha, sr, dc);
            down(got, dc, (size_t)n * 4);
            int bad = 0, first = -1;
            uint64_t total = 0;
            for (int j = 0; j < n; j++) {
                if (got[j] != ref[j] && first < 0)
                    first = j;
                bad += got[j] != ref[j];
                total += ref[j] - (uint32_t)(j % 5);
            }
            CHECK(bad == 0, "case %zu signed=%d: %d of %d counts differ (slot %d: %u vs %u)", ci,
                  sr, bad, n, first, first >= 0 ? got[first] : 0, first >= 0 ? ref[first] : 0);
            CHECK(total >= (uint64_t)(T1 + T2), "case %zu signed=%d: nothing counted", ci, sr);
            dfree(da);
            dfree(dc);
            free(act);
            free(ref);
            free(got);
        }
}

/* Greedy (optional op): the rule of backend.h, NaN skipped, ties to the
 * lower index, -1 when all are NaN; on a row in the middle of a buffer of
 * rows, directly and inside a decode graph. */
static int32_t argmax_ref(const float *x, int n)
{
    int32_t b = -1;
    for (int i = 0; i < n; i++)
        if (!isnan(x[i]) && (b < 0 || x[i] > x[b]))
            b = i;
    return b;
}

static void test_argmax(void)
{
    cur = "argmax";
    CHECK(G->argmax, "argmax not offered");
    if (!G->argmax)
        return;
    const int V = 128256, R = 3;
    float *l = frandv((size_t)R * V, -20, 20);
    int32_t *dr = up(NULL, sizeof(int32_t)), got = -2;
    for (int c = 0; c < 6; c++) {
        float *row = l + V; /* row 1 of 3 */
        if (c == 1) {       /* the max tied three times, NaN and -inf around */
            row[9000] = row[70000] = row[100] = 50.0f;
            row[0] = row[V - 1] = NAN;
            row[5] = -INFINITY;
        }
        if (c == 2) /* a NaN where the max was: skipped */
            row[100] = NAN;
        if (c == 3) /* everything NaN but -inf at the end */
            for (int i = 0; i < V; i++)
                row[i] = i == V - 1 ? -INFINITY : NAN;
        if (c == 4) /* everything NaN */
            row[V - 1] = NAN;
        float *dl = up(l, (size_t)R * V * sizeof(float));
        eng_graph_step st = { .key = 0x5e1ec7, .pos = 0, .max_pos = 0 };
        bool graph = c == 5 && G->graph_begin && G->graph_begin(gpu, &st) == 0;
        G->argmax(gpu, dl + V, V, dr);
        if (graph)
            CHECK(G->graph_end(gpu) == 0, "argmax in a graph: not run");
        down(&got, dr, sizeof(got));
        int32_t want = argmax_ref(row, V);
        CHECK(got == want, "case %d%s: %d, want %d", c, graph ? " (graph)" : "", got, want);
        if (c == 5)
            CHECK(graph, "no graph to capture the argmax in");
        dfree(dl);
        if (c == 4) { /* fresh values for the graph case */
            free(l);
            l = frandv((size_t)R * V, -1, 1);
        }
    }
    CHECK(argmax_ref(l + V, V) >= 0, "the reference itself");
    dfree(dr);
    free(l);
}

/* Decode's hints: offered, harmless at every share of the L2 (0 launches
 * nothing; 100 more than the spans), spans past what the op takes
 * ignored, and an FFN that is not f16 refused as every op refuses it. */
/* A second backend with kernel variants (ENG_CUDA_VARIANTS=spec), or NULL
 * after a failed check. */
static eng_backend *variant_backend(const char *spec)
{
    eng_error err;
    eng_backend *b = NULL;
    setenv("ENG_CUDA_VARIANTS", spec, 1);
    int r = eng_backend_cuda_new(0, &b, &err);
    unsetenv("ENG_CUDA_VARIANTS");
    CHECK(r == 0 && b, "%s: %d '%s'", spec, r, err.msg);
    return r == 0 ? b : NULL;
}

static void test_prefetch(void)
{
    cur = "prefetch";
    CHECK(G->prefetch, "prefetch not offered");
    if (!G->prefetch)
        return;
    const int E = 256, S = 64;
    eng_backend *keep = gpu;
    for (int pct = 0; pct <= 100; pct += 50) {
        char spec[32];
        snprintf(spec, sizeof(spec), "l2_prefetch=%d", pct);
        eng_backend *b = variant_backend(spec);
        if (!b)
            continue;
        gpu = b; /* up() and dfree() on this one */
        uint16_t *gu = up(NULL, (size_t)S * 2 * E * 2), *w = up(NULL, (size_t)E * E * 2);
        int32_t sel[3] = { 5, -1, 63 }, *dsel = up(sel, sizeof(sel));
        eng_ffn_weights fw = { .dtype = ENG_DTYPE_F16, .n_embd = E, .n_slots = S, .gate_up = gu };
        const eng_span sp[ENG_PREFETCH_SPANS + 1] = {
            { w, (size_t)E * E * 2 }, { (char *)w + 3, 1000 }, { w, 16 }, { w, 0 }, { w, 16 },
        };
        G->prefetch(b, sp, 4, &fw, dsel, 3);
        G->prefetch(b, sp, 2, &fw, NULL, S);
        G->prefetch(b, sp, 1, NULL, NULL, 0);
        CHECK(G->sync(b) == 0, "%s: %s", spec, G->error(b));
        G->prefetch(b, sp, ENG_PREFETCH_SPANS + 1, NULL, NULL, 0);
        CHECK(G->sync(b) == 0, "%s: too many spans not ignored: %s", spec, G->error(b));
        fw.dtype = ENG_DTYPE_Q8_0;
        G->prefetch(b, sp, 1, &fw, NULL, S);
        CHECK(G->sync(b) == -EINVAL && strstr(G->error(b), "prefetch"), "%s: Q8_0 slots: '%s'",
              spec, G->error(b));
        dfree(gu);
        dfree(w);
        dfree(dsel);
        G->free(b);
        gpu = keep;
    }
}

/* The attention block's norm and q, k, v in one call, as the kernels'
 * two (norm_fold=0) and as one (=1), with a residual and without: x the
 * CPU's add exactly, xn and y as the CPU's add, rmsnorm and matmuls. */
static void test_norm_matmul3(void)
{
    cur = "norm_matmul3";
    CHECK(G->norm_matmul3, "norm_matmul3 not offered");
    if (!G->norm_matmul3)
        return;
    const int K = 256, rows3[3] = { 64, 16, 16 }, R = 96;
    eng_backend *keep = gpu;
    for (int v = 0; v < 4; v++) {
        eng_backend *b = variant_backend(v < 2 ? "norm_fold=0" : "norm_fold=1");
        if (!b)
            continue;
        gpu = b;
        const bool res = v % 2;
        float *x = frandv(K, -3, 3), *r = frandv(K, -3, 3), *nw = frandv(K, 0.5f, 1.5f);
        float *bias = frandv(R, -1, 1), *xn = xmalloc(K * 4), *ref = xmalloc(R * 4);
        uint16_t *w = halves((size_t)R * K, -1, 1);
        float *dx = up(x, K * 4), *dr = up(r, K * 4), *dnw = up(nw, K * 4), *dxn = up(NULL, K * 4);
        float *db = up(bias, R * 4);
        const uint16_t *dw = up(w, (size_t)R * K * 2);
        if (res)
            C->add(cpu, x, r, K);
        C->rmsnorm(cpu, x, nw, xn, 1, K, 1e-5f);
        eng_weight hw = { ENG_DTYPE_F16, R, K, w };
        C->matmul(cpu, &hw, bias, xn, ref, 1);
        eng_weight w3[3];
        const eng_weight *pw3[3];
        const float *pb3[3];
        float *py3[3];
        for (int i = 0, off = 0; i < 3; off += rows3[i], i++) {
            w3[i] = (eng_weight){ ENG_DTYPE_F16, rows3[i], K, dw + (size_t)off * K };
            pw3[i] = &w3[i];
            pb3[i] = db + off;
            py3[i] = up(NULL, rows3[i] * 4);
        }
        G->norm_matmul3(b, dx, res ? dr : NULL, dnw, 1e-5f, dxn, pw3, pb3, py3);
        float got[256], gy[96];
        double tol[256];
        down(got, dx, K * 4);
        CHECK(memcmp(got, x, K * 4) == 0, "variant %d: x differs from the CPU's add", v);
        down(got, dxn, K * 4);
        for (int i = 0; i < K; i++)
            tol[i] = 2e-6 * fabs(xn[i]) + 1e-7;
        near("xn", got, xn, tol, K);
        for (int i = 0, off = 0; i < 3; off += rows3[i], i++)
            down(gy + off, py3[i], rows3[i] * 4);
        for (int o = 0; o < R; o++) {
            double mag = 0;
            for (int k = 0; k < K; k++)
                mag += fabs(h2f(w[(size_t)o * K + k]) * (double)xn[k]);
            tol[o] = 3e-5 * mag + 1e-6 * fabs(bias[o]) + 1e-7;
        }
        near("y", gy, ref, tol, R);
        CHECK(G->sync(b) == 0, "variant %d: %s", v, G->error(b));
        for (int i = 0; i < 3; i++)
            dfree(py3[i]);
        dfree(dx);
        dfree(dr);
        dfree(dnw);
        dfree(dxn);
        dfree(db);
        dfree((void *)dw);
        free(x);
        free(r);
        free(nw);
        free(bias);
        free(xn);
        free(ref);
        free(w);
        G->free(b);
        gpu = keep;
    }
}

/* The FFN block's norm and the FFN in one call, with and without the fold:
 * x the CPU's add exactly, xn as the CPU's norm, y bit for bit the ffn op
 * of that xn. */
static void test_norm_ffn(void)
{
    cur = "norm_ffn";
    CHECK(G->norm_ffn, "norm_ffn not offered");
    if (!G->norm_ffn)
        return;
    const int E = 256, S = 96, n_sel = 40;
    eng_backend *keep = gpu;
    for (int v = 0; v < 2; v++) {
        eng_backend *b = variant_backend(v ? "norm_fold=1" : "norm_fold=0");
        if (!b)
            continue;
        gpu = b;
        float *x = frandv(E, -3, 3), *r = frandv(E, -3, 3), *nw = frandv(E, 0.5f, 1.5f);
        float *xn = xmalloc(E * 4), got[256], y[256], y2[256];
        double tol[256];
        uint16_t *gu = halves((size_t)S * 2 * E, -1, 1), *dn = halves((size_t)S * E, -1, 1);
        int32_t sel[40];
        for (int j = 0; j < n_sel; j++)
            sel[j] = (j * 5) % S;
        float *dx = up(x, E * 4), *dr = up(r, E * 4), *dnw = up(nw, E * 4), *dxn = up(NULL, E * 4);
        float *dy = up(NULL, E * 4), *dy2 = up(NULL, E * 4);
        int32_t *dsel = up(sel, sizeof(sel));
        eng_ffn_weights fw = { ENG_DTYPE_F16, E, S, up(gu, (size_t)S * 2 * E * 2), up(dn, (size_t)S * E * 2),
                               NULL, ENG_ACT_SILU, NULL, 0.0f };
        C->add(cpu, x, r, E);
        C->rmsnorm(cpu, x, nw, xn, 1, E, 1e-5f);
        G->norm_ffn(b, dx, dr, dnw, 1e-5f, dxn, &fw, dsel, n_sel, dy);
        G->ffn(b, &fw, dsel, n_sel, dxn, dy2, 1, NULL);
        down(got, dx, E * 4);
        CHECK(memcmp(got, x, E * 4) == 0, "variant %d: x differs from the CPU's add", v);
        down(got, dxn, E * 4);
        for (int i = 0; i < E; i++)
            tol[i] = 2e-6 * fabs(xn[i]) + 1e-7;
        near("xn", got, xn, tol, E);
        down(y, dy, E * 4);
        down(y2, dy2, E * 4);
        CHECK(memcmp(y, y2, E * 4) == 0, "variant %d: y is not the ffn op's of xn", v);
        CHECK(G->sync(b) == 0, "variant %d: %s", v, G->error(b));
        dfree(dx);
        dfree(dr);
        dfree(dnw);
        dfree(dxn);
        dfree(dy);
        dfree(dy2);
        dfree(dsel);
        dfree((void *)fw.gate_up);
        dfree((void *)fw.down);
        free(x);
        free(r);
        free(nw);
        free(xn);
        free(gu);
        free(dn);
        G->free(b);
        gpu = keep;
    }
}

/* ---- the error contract ------------------------------------------------------------------ */

static void test_errors(void)
{
    cur = "errors";
    /* alloc: -ENOMEM with both numbers, and nothing recorded */
    void *p = (void *)1;
    int r = G->alloc(gpu, (size_t)1 << 52, &p);
    CHECK(r == -ENOMEM && p == (void *)1, "huge alloc: %d", r);
    CHECK(strstr(G->error(gpu), "needs") && strstr(G->error(gpu), "free"),
          "alloc message: '%s'", G->error(gpu));
    CHECK(G->sync(gpu) == 0, "a failed alloc was recorded");

    const int R = 8, K = 16;
    float wf[8 * 16] = { 0 }, x[16], y0[8];
    for (int i = 0; i < K; i++)
        x[i] = (float)i;
    for (int i = 0; i < R; i++)
        y0[i] = 100.0f + (float)i;
    float *dwf = up(wf, sizeof(wf)), *dx = up(x, sizeof(x)), *dy = up(y0, sizeof(y0));
    CHECK(G->sync(gpu) == 0, "setup failed: %s", G->error(gpu));

    /* f32 weights are refused, the first failure wins, later ops do nothing */
    eng_weight w32 = { ENG_DTYPE_F32, R, K, dwf };
    G->matmul(gpu, &w32, NULL, dx, dy, 1);
    G->attention(gpu, dx, (uint16_t *)dwf, (uint16_t *)dwf, dy, 1, 0, 5, 2, 64, 1.0f, 0, 0.0f,
                  NULL); /* bad GQA */
    G->add(gpu, dy, dy, R);
    float got[8];
    G->download(gpu, got, dy, sizeof(got));
    bool zeros = true;
    for (int i = 0; i < R; i++)
        zeros = zeros && got[i] == 0.0f;
    CHECK(zeros, "download after a failure must give zeros");
    r = G->sync(gpu);
    CHECK(r == -EINVAL, "sync after f32 matmul: %d", r);
    CHECK(strstr(G->error(gpu), "f16") != NULL, "first error kept? '%s'", G->error(gpu));
    CHECK(G->sync(gpu) == 0, "sync must forget the error");

    /* the backend works again; the skipped add left y as it was */
    down(got, dy, sizeof(got));
    CHECK(memcmp(got, y0, sizeof(y0)) == 0, "an op ran after the failure");
    G->add(gpu, dy, dy, R);
    down(got, dy, sizeof(got));
    CHECK(got[3] == 2 * y0[3], "add after recovery: %g", got[3]);

    /* bad arguments inside the kernels' checks are recorded too */
    G->attention(gpu, dx, (uint16_t *)dwf, (uint16_t *)dwf, dy, 1, 0, 5, 2, 64, 1.0f, 0, 0.0f,
                  NULL);
    r = G->sync(gpu);
    CHECK(r == -EINVAL && strstr(G->error(gpu), "n_head"), "bad GQA: %d '%s'", r,
          G->error(gpu));
    int32_t bad_row = -3;
    G->upload_rows(gpu, dy, &bad_row, x, 1, 4);
    r = G->sync(gpu);
    CHECK(r == -EINVAL, "negative row: %d '%s'", r, G->error(gpu));
    CHECK(G->sync(gpu) == 0, "still failing: %s", G->error(gpu));

    dfree(dwf);
    dfree(dx);
    dfree(dy);
}

int main(void)
{
    eng_error err = { { 0 } };
    int r = eng_backend_cuda_new(0, &gpu, &err);
    if (r == -ENODEV || r == -ENOTSUP) {
        printf("SKIP: %s\n", err.msg);
        return 77;
    }
    if (r < 0) {
        fprintf(stderr, "eng_backend_cuda_new: %d (%s)\n", r, err.msg);
        return 1;
    }
    if (eng_backend_cpu_new(2, &cpu) < 0) {
        fprintf(stderr, "no CPU backend\n");
        return 1;
    }
    char name[256];
    bool integrated = false;
    double bw = 0;
    cur = "describe";
    CHECK(eng_backend_cuda_describe(gpu, name, sizeof(name), &integrated, &bw) == 0 && name[0],
          "describe failed");
    CHECK(eng_backend_cuda_describe(cpu, name, sizeof(name), NULL, NULL) == -EINVAL,
          "describe of the CPU backend");
    eng_backend_cuda_describe(gpu, name, sizeof(name), &integrated, &bw);
    printf("device: %s (%s, %.0f GB/s nominal)\n", name, integrated ? "integrated" : "discrete", bw);
    /* a device that does not exist */
    eng_backend *none = NULL;
    r = eng_backend_cuda_new(1000, &none, &err);
    cur = "new";
    CHECK(r == -ENODEV && none == NULL && strstr(err.msg, "1000"), "device 1000: %d '%s'", r,
          err.msg);
    /* kernel variants from the environment: refused with the reason, or taken */
    static const struct {
        const char *spec, *why; /* why NULL: accepted */
    } vars[] = {
        { "ffn_decode=9", "ffn_decode=9" },
        { "ffn_decode", "not name=integer" },
        { "ffn_decode=2,bogus=1", "bogus=1" },
        { "ffn_decode=x", "not name=integer" },
        { "ffn_decode=2,ffn_fused_bps=2,attn_combine=1", NULL },
        { "ffn_act_unroll=8,", NULL },
        { "l2_prefetch=50", NULL },
        { "l2_prefetch=101", "l2_prefetch=101" },
        { "norm_fold=1,l2_prefetch=25", NULL },
        { "norm_fold=2", "norm_fold=2" },
        { "", NULL },
    };
    cur = "variants";
    for (size_t i = 0; i < sizeof(vars) / sizeof(vars[0]); i++) {
        eng_backend *b = NULL;
        setenv("ENG_CUDA_VARIANTS", vars[i].spec, 1);
        r = eng_backend_cuda_new(0, &b, &err);
        if (vars[i].why)
            CHECK(r == -EINVAL && !b && strstr(err.msg, "ENG_CUDA_VARIANTS") && strstr(err.msg, vars[i].why),
                  "'%s': %d '%s'", vars[i].spec, r, err.msg);
        else
            CHECK(r == 0 && b, "'%s': %d '%s'", vars[i].spec, r, err.msg);
        if (b)
            b->iface->free(b);
    }
    unsetenv("ENG_CUDA_VARIANTS");

    test_memory();
    test_get_rows();
    test_matmul();
    test_ffn_pick();
    test_norm_rope();
    test_attention();
    test_ffn();
    test_add_store();
    test_topk_count();
    test_argmax();
    test_prefetch();
    test_norm_matmul3();
    test_norm_ffn();
    test_errors();

    cpu->iface->free(cpu);
    gpu->iface->free(gpu);
    if (n_fail) {
        fprintf(stderr, "%d check(s) failed\n", n_fail);
        return 1;
    }
    printf("the CUDA backend matches the CPU backend\n");
    return 0;
}
