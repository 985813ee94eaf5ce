/* si-cuda-bench: the CUDA kernels on a model's real shapes, decode and
 * prefill, dense and selective, against the device's memory bandwidth.
 *
 *   si-cuda-bench --model FILE [--name NAME] [--phi 0.4] [--ctx 1024]
 *                 [--prefill 512] [--iters 20] [--json OUT]
 *
 * Only the model's shapes are read (GGUF metadata); the weights are random
 * f16 in device memory, one copy per layer (as many layers as fit), so
 * every decode step streams its weights from memory as a real one does.
 *
 *   bandwidth   a device-to-device copy (read + write) and the peak from the
 *               memory bus width and clock
 *   gemv        each projection of one layer (q, k, o), q, k and v in one
 *               launch as the engine runs them (gemv_qkv), and the output
 *               head, cycling over the layers: time and GB/s; sampling's
 *               candidates of the head's row (top_cands_104: k 40 + 64)
 *               and greedy's argmax of it
 *   ffn         decode over all slots, over phi * n_ff selected slots, and
 *               over as many slots in one run
 *   attention   decode at --ctx positions
 *   token       one whole decode token (every layer, final norm, head,
 *               argmax: the engine's kernels, fused ops included) captured
 *               in a CUDA graph, dense and selective; also launched op by
 *               op, to show what the graph saves
 *   prefill     --prefill tokens through every layer (cuBLAS), FFN dense,
 *               dense + top-alpha counting, and selective
 *
 * Prints a summary and writes JSON (--json) for tests/gpu-check.sh.
 */
#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cuda_runtime_api.h>

#include "gguf.h"
#include "si-cuda.h"

static si_cuda *gc;

static void die(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "si-cuda-bench: ");
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fputc('\n', stderr);
    exit(1);
}

#define OK(call)                                                                             \
    do {                                                                                     \
        int r_ = (call);                                                                     \
        if (r_ < 0)                                                                          \
            die("%s: %s", #call, si_cuda_last_error());                                      \
    } while (0)

#define CU(call)                                                                             \
    do {                                                                                     \
        cudaError_t e_ = (call);                                                             \
        if (e_ != cudaSuccess)                                                               \
            die("%s: %s", #call, cudaGetErrorString(e_));                                    \
    } while (0)

/* ---- model shape ----------------------------------------------------------------- */

typedef struct shape {
    char arch[32];
    int n_layer, E, F, H, Hkv, hd, V;
    bool qkv_bias;
    bool neox;
    float rope_base, eps;
} shape;

static int get_int(gguf_file *f, const char *arch, const char *key, int *ret)
{
    char k[128];
    snprintf(k, sizeof(k), "%s.%s", arch, key);
    uint32_t v;
    if (gguf_get_u32(f, k, &v) < 0 || v == 0 || v > (1u << 24))
        return -EINVAL;
    *ret = (int)v;
    return 0;
}

static void read_shape(const char *path, shape *s)
{
    gguf_file *f;
    eng_error err;
    memset(&err, 0, sizeof(err));
    if (gguf_open(path, &f, &err) < 0)
        die("cannot open '%s'", path);
    memset(s, 0, sizeof(*s));
    const char *a;
    size_t al;
    if (gguf_get_str(f, "general.architecture", &a, &al) < 0 || al == 0 || al >= sizeof(s->arch))
        die("'%s': no general.architecture", path);
    memcpy(s->arch, a, al);
    if (get_int(f, s->arch, "block_count", &s->n_layer) < 0 ||
        get_int(f, s->arch, "embedding_length", &s->E) < 0 ||
        get_int(f, s->arch, "feed_forward_length", &s->F) < 0 ||
        get_int(f, s->arch, "attention.head_count", &s->H) < 0)
        die("'%s': missing shape keys", path);
    if (get_int(f, s->arch, "attention.head_count_kv", &s->Hkv) < 0)
        s->Hkv = s->H;
    s->hd = s->E / s->H;
    const gguf_tensor *te = gguf_find_tensor(f, "token_embd.weight");
    if (!te || te->ne[1] == 0 || te->ne[1] > (1u << 24))
        die("'%s': no token_embd.weight", path);
    s->V = (int)te->ne[1];
    s->qkv_bias = gguf_find_tensor(f, "blk.0.attn_q.bias") != NULL;
    s->neox = strcmp(s->arch, "qwen2") == 0;
    char k[128];
    snprintf(k, sizeof(k), "%s.rope.freq_base", s->arch);
    if (gguf_get_f32(f, k, &s->rope_base) < 0)
        s->rope_base = 10000.0f;
    s->eps = 1e-5f;
    gguf_close(f);
    if (s->H % s->Hkv || s->hd > 256)
        die("'%s': unsupported heads %d/%d, head_dim %d", path, s->H, s->Hkv, s->hd);
}

/* ---- device buffers ------------------------------------------------------------------ */

static uint16_t *host_pattern; /* 16 MiB of small random halves */
enum { PATTERN_BYTES = 16 << 20 };

static void *dalloc(size_t bytes)
{
    void *p;
    OK(si_cuda_alloc(gc, bytes, &p));
    return p;
}

/* Weights: |w| in [2^-7, 2^-6), random sign: values stay tame through layers. */
static void *dweights(size_t n_half)
{
    void *p = dalloc(n_half * 2);
    size_t bytes = n_half * 2;
    for (size_t off = 0; off < bytes; off += PATTERN_BYTES) {
        size_t n = bytes - off < PATTERN_BYTES ? bytes - off : PATTERN_BYTES;
        OK(si_cuda_upload(gc, (char *)p + off, host_pattern, n));
    }
    return p;
}

static float *dfloats(size_t n, float v)
{
    float *h = malloc(n * sizeof(float));
    if (!h)
        die("out of host memory");
    for (size_t i = 0; i < n; i++)
        h[i] = v;
    float *d = dalloc(n * sizeof(float));
    OK(si_cuda_upload(gc, d, h, n * sizeof(float)));
    OK(si_cuda_sync(gc));
    free(h);
    return d;
}

typedef struct layer {
    uint16_t *wq, *wk, *wv, *wo;
    float *bq, *bk, *bv;
    float *attn_norm, *ffn_norm;
    si_cuda_ffn_weights ffn;
    uint16_t *kc, *vc; /* [ctx][Hkv][hd] */
} layer;

typedef struct model {
    shape s;
    int n_alloc; /* layers with their own weights; layer il uses il % n_alloc */
    layer *L;
    uint16_t *embd; /* [V][E], also the (tied) output head */
    float *out_norm;
    int32_t *sel;   /* [n_sel] ascending random subset of the F slots */
    int n_sel;
    int ctx;
    /* activations */
    float *x, *xn, *q, *k, *v, *att, *o, *ff, *act, *logits;
    int32_t *tok, *next;
    uint32_t *counts;
} model;

static size_t layer_bytes(const shape *s)
{
    size_t qd = (size_t)s->H * s->hd, kvd = (size_t)s->Hkv * s->hd;
    return 2 * ((qd + 2 * kvd) * s->E + (size_t)s->E * qd + (size_t)s->F * 3 * s->E);
}

static void model_alloc(model *m, int ctx, int n_tok, double phi)
{
    const shape *s = &m->s;
    si_cuda_info in;
    OK(si_cuda_get_info(gc, &in));
    size_t qd = (size_t)s->H * s->hd, kvd = (size_t)s->Hkv * s->hd;
    size_t fixed = (size_t)s->V * s->E * 2 + (size_t)n_tok * (8 * (size_t)s->E + 4 * qd + s->F) * 4 * 2;
    size_t per = layer_bytes(s) + 2 * (size_t)ctx * kvd * 2;
    size_t budget = in.mem_free > ((size_t)2 << 30) ? in.mem_free - ((size_t)2 << 30) : 0;
    long n = budget > fixed ? (long)((budget - fixed) / per) : 0;
    if (n < 1)
        die("%s: one layer (%zu bytes) does not fit in %zu free bytes", s->arch, per + fixed,
            in.mem_free);
    m->n_alloc = n < s->n_layer ? (int)n : s->n_layer;
    m->ctx = ctx;
    m->L = calloc(m->n_alloc, sizeof(layer));
    for (int il = 0; il < m->n_alloc; il++) {
        layer *L = &m->L[il];
        L->wq = dweights(qd * s->E);
        L->wk = dweights(kvd * s->E);
        L->wv = dweights(kvd * s->E);
        L->wo = dweights((size_t)s->E * qd);
        if (s->qkv_bias) {
            L->bq = dfloats(qd, 0.01f);
            L->bk = dfloats(kvd, 0.01f);
            L->bv = dfloats(kvd, 0.01f);
        }
        L->attn_norm = dfloats(s->E, 1.0f);
        L->ffn_norm = dfloats(s->E, 1.0f);
        L->ffn.n_embd = s->E;
        L->ffn.n_slots = s->F;
        L->ffn.gate_up = dweights((size_t)s->F * 2 * s->E);
        L->ffn.down = dweights((size_t)s->F * s->E);
        L->kc = dweights((size_t)ctx * kvd);
        L->vc = dweights((size_t)ctx * kvd);
    }
    m->embd = dweights((size_t)s->V * s->E);
    m->out_norm = dfloats(s->E, 1.0f);

    m->n_sel = (int)lround(phi * s->F);
    if (m->n_sel < 1)
        m->n_sel = 1;
    int32_t *sel = malloc((size_t)m->n_sel * 4);
    uint64_t r = 0x9e3779b97f4a7c15ull;
    for (int f = 0, k = 0; f < s->F && k < m->n_sel; f++) {
        r ^= r << 13;
        r ^= r >> 7;
        r ^= r << 17;
        if ((long)(r % (uint64_t)(s->F - f)) < m->n_sel - k)
            sel[k++] = f;
    }
    m->sel = dalloc((size_t)m->n_sel * 4);
    OK(si_cuda_upload(gc, m->sel, sel, (size_t)m->n_sel * 4));
    OK(si_cuda_sync(gc));
    free(sel);

    size_t T = (size_t)n_tok;
    m->x = dfloats(T * s->E, 0.1f);
    m->xn = dalloc(T * s->E * 4);
    m->q = dalloc(T * qd * 4);
    m->k = dalloc(T * kvd * 4);
    m->v = dalloc(T * kvd * 4);
    m->att = dalloc(T * qd * 4);
    m->o = dalloc(T * s->E * 4);
    m->ff = dalloc(T * s->E * 4);
    m->act = dalloc(T * s->F * 4);
    m->logits = dalloc((size_t)s->V * 4);
    m->tok = dalloc(T * 4);
    int32_t *ids = calloc(T, 4);
    if (!ids)
        die("out of host memory");
    for (size_t t = 0; t < T; t++)
        ids[t] = (int32_t)(t * 7919 % (size_t)s->V);
    OK(si_cuda_upload(gc, m->tok, ids, T * 4));
    OK(si_cuda_sync(gc));
    free(ids);
    m->next = dalloc(4);
    m->counts = dalloc((size_t)s->F * 4);
    OK(si_cuda_sync(gc));
}

/* ---- the forward pass, as engine/model.c runs it, on device buffers ----------------------- */

/* One eval of n tokens at pos0; selective: the FFN over m->sel; count: also
 * the top-alpha counting of the dynamic selection. */
static void forward(model *m, int n, int pos0, bool selective, bool count, bool logits)
{
    /* the engine's sequence of kernels (engine/model.c forward_ops, with
     * the CUDA backend's fused ops: matmul3, rope_store, add_rmsnorm) */
    const shape *s = &m->s;
    const int E = s->E, H = s->H, Hkv = s->Hkv, hd = s->hd;
    const size_t kvd = (size_t)Hkv * hd;
    const float scale = 1.0f / sqrtf((float)hd);
    OK(si_cuda_get_rows(gc, m->embd, true, s->V, E, m->tok, n, m->x));
    for (int il = 0; il < s->n_layer; il++) {
        layer *L = &m->L[il % m->n_alloc];
        const uint16_t *w3[3] = { L->wq, L->wk, L->wv };
        const int r3[3] = { H * hd, (int)kvd, (int)kvd };
        const float *b3[3] = { L->bq, L->bk, L->bv };
        float *y3[3] = { m->q, m->k, m->v };
        /* the norm (after layer 0 with the previous layer's FFN residual),
         * then q, k, v; one call for decode (the engine's norm_matmul3) */
        const float *res = il == 0 ? NULL : m->ff;
        if (n == 1) {
            OK(si_cuda_norm_gemv(gc, m->x, res, L->attn_norm, s->eps, m->xn, w3, r3, 3, E, b3, y3));
        } else {
            if (res)
                OK(si_cuda_add_rmsnorm(gc, m->x, res, L->attn_norm, m->xn, n, E, s->eps));
            else
                OK(si_cuda_rmsnorm(gc, m->x, L->attn_norm, m->xn, n, E, s->eps));
            OK(si_cuda_matmul3(gc, w3, r3, E, b3, m->xn, y3, n));
        }
        OK(si_cuda_rope_store(gc, m->q, m->k, m->v, n, H, Hkv, hd, hd, pos0, s->rope_base, NULL,
                              s->neox, L->kc, L->vc));
        int n_sel = selective ? m->n_sel : s->F;
        if (n == 1) { /* the engine's hints (nothing unless "l2_prefetch" is set) */
            const void *p = L->wo;
            const size_t b = (size_t)E * H * hd * 2;
            OK(si_cuda_prefetch(gc, &p, &b, 1, &L->ffn, selective ? m->sel : NULL, n_sel));
        }
        OK(si_cuda_attention(gc, m->q, L->kc, L->vc, m->att, n, pos0, H, Hkv, hd, scale, 0, 0.0f));
        OK(si_cuda_matmul(gc, L->wo, E, H * hd, NULL, m->att, m->o, n));
        if (n == 1 && !count) { /* decode: the norm and the FFN in one call (norm_ffn) */
            OK(si_cuda_norm_ffn(gc, m->x, m->o, L->ffn_norm, s->eps, m->xn, &L->ffn,
                                selective ? m->sel : NULL, n_sel, m->ff));
        } else {
            OK(si_cuda_add_rmsnorm(gc, m->x, m->o, L->ffn_norm, m->xn, n, E, s->eps));
            OK(si_cuda_ffn(gc, &L->ffn, selective ? m->sel : NULL, n_sel, m->xn, m->ff, n,
                           count ? m->act : NULL));
        }
        if (n == 1 && il + 1 < s->n_layer) {
            const layer *N = &m->L[(il + 1) % m->n_alloc];
            const void *p[3] = { N->wq, N->wk, N->wv };
            const size_t b[3] = { (size_t)H * hd * E * 2, kvd * E * 2, kvd * E * 2 };
            OK(si_cuda_prefetch(gc, p, b, 3, NULL, NULL, 0));
        } else if (n == 1 && logits) {
            const void *p = m->embd;
            const size_t b = (size_t)s->V * E * 2;
            OK(si_cuda_prefetch(gc, &p, &b, 1, NULL, NULL, 0));
        }
        if (count)
            OK(si_cuda_topk_count(gc, m->act, n, n_sel, 0.2f, false, m->counts));
    }
    if (logits) {
        float *last = m->x + (size_t)(n - 1) * E;
        OK(si_cuda_add_rmsnorm(gc, last, m->ff + (size_t)(n - 1) * E, m->out_norm, m->xn, 1, E,
                               s->eps));
        OK(si_cuda_gemv(gc, m->embd, s->V, E, m->xn, NULL, m->logits));
        OK(si_cuda_argmax(gc, m->logits, s->V, m->next));
    } else {
        OK(si_cuda_add(gc, m->x, m->ff, (long)n * E));
    }
}

/* ---- timing --------------------------------------------------------------------------------- */

static cudaEvent_t ev0, ev1;

static void tstart(void)
{
    CU(cudaEventRecord(ev0, si_cuda_stream(gc)));
}

static double tstop_ms(int iters)
{
    CU(cudaEventRecord(ev1, si_cuda_stream(gc)));
    CU(cudaEventSynchronize(ev1));
    float ms;
    CU(cudaEventElapsedTime(&ms, ev0, ev1));
    return ms / iters;
}

/* ---- JSON ------------------------------------------------------------------------------------ */

static FILE *js;
static bool js_first;

static void jkey(const char *k)
{
    if (!js)
        return;
    fprintf(js, "%s\"%s\": ", js_first ? "" : ", ", k);
    js_first = false;
}

static void jnum(const char *k, double v)
{
    jkey(k);
    if (js)
        fprintf(js, isfinite(v) ? "%.6g" : "null", v);
}

static void jstr(const char *k, const char *v)
{
    jkey(k);
    if (js)
        fprintf(js, "\"%s\"", v); /* our own names: no escaping needed */
}

static void jopen(const char *k)
{
    if (k)
        jkey(k);
    if (js)
        fputc('{', js);
    js_first = true;
}

static void jclose(void)
{
    if (js)
        fputc('}', js);
    js_first = false;
}

/* ---- benchmarks ------------------------------------------------------------------------------- */

static double peak_gbps, d2d_gbps;

static void bench_bandwidth(void)
{
    si_cuda_info in;
    OK(si_cuda_get_info(gc, &in));
    size_t bytes = (size_t)1 << 30;
    if (bytes > in.mem_free / 4)
        bytes = in.mem_free / 4 & ~(size_t)255;
    void *a = dalloc(bytes), *b = dalloc(bytes);
    CU(cudaMemcpyAsync(b, a, bytes, cudaMemcpyDeviceToDevice, si_cuda_stream(gc)));
    tstart();
    for (int i = 0; i < 10; i++)
        CU(cudaMemcpyAsync(b, a, bytes, cudaMemcpyDeviceToDevice, si_cuda_stream(gc)));
    double ms = tstop_ms(10);
    d2d_gbps = 2.0 * bytes / (ms * 1e-3) / 1e9;
    peak_gbps = in.peak_gbps;
    si_cuda_dev_free(gc, a);
    si_cuda_dev_free(gc, b);
    printf("device %s: %d SMs, %.1f GiB free, peak %.0f GB/s, D2D copy %.0f GB/s\n", in.name,
           in.n_sm, in.mem_free / 1073741824.0, peak_gbps, d2d_gbps);
    jopen("device");
    jstr("name", in.name);
    jnum("sm", in.cc_major * 10 + in.cc_minor);
    jnum("n_sm", in.n_sm);
    jnum("integrated", in.integrated);
    jnum("mem_total_bytes", (double)in.mem_total);
    jnum("peak_gbps", peak_gbps);
    jnum("d2d_copy_gbps", d2d_gbps);
    jclose();
}

static double ref_gbps(void)
{
    /* the achievable reference: the measured copy, or the nominal peak */
    return d2d_gbps > 0 ? d2d_gbps : peak_gbps;
}

static void report(const char *what, double us, double bytes)
{
    double gbps = bytes / (us * 1e-6) / 1e9;
    printf("  %-28s %9.1f us %8.0f GB/s  %5.1f %% of copy bw\n", what, us, gbps,
           100.0 * gbps / ref_gbps());
    jopen(what);
    jnum("us", us);
    jnum("bytes", bytes);
    jnum("gbps", gbps);
    jnum("frac_of_copy_bw", gbps / ref_gbps());
    jnum("frac_of_peak", peak_gbps > 0 ? gbps / peak_gbps : NAN);
    jclose();
}

static void bench_kernels(model *m, int iters)
{
    const shape *s = &m->s;
    const int E = s->E, qd = s->H * s->hd, kvd = s->Hkv * s->hd, A = m->n_alloc;
    struct {
        const char *name;
        int rows, cols, which;
    } g[] = {
        { "gemv_q", qd, E, 0 }, { "gemv_k", kvd, E, 1 }, { "gemv_o", E, qd, 3 },
    };
    jopen("kernels");
    for (size_t i = 0; i < sizeof(g) / sizeof(g[0]); i++) {
        tstart();
        for (int it = 0; it < iters * A; it++) {
            layer *L = &m->L[it % A];
            const uint16_t *wp = g[i].which == 0 ? L->wq : g[i].which == 1 ? L->wk : L->wo;
            OK(si_cuda_gemv(gc, wp, g[i].rows, g[i].cols, m->xn, NULL, m->q));
        }
        double us = tstop_ms(iters * A) * 1e3;
        report(g[i].name, us, 2.0 * g[i].rows * g[i].cols);
    }
    /* q, k and v in one launch, as the engine runs them */
    tstart();
    for (int it = 0; it < iters * A; it++) {
        layer *L = &m->L[it % A];
        const uint16_t *w3[3] = { L->wq, L->wk, L->wv };
        const int r3[3] = { qd, kvd, kvd };
        float *y3[3] = { m->q, m->k, m->v };
        OK(si_cuda_gemv3(gc, w3, r3, E, m->xn, NULL, y3));
    }
    report("gemv_qkv", tstop_ms(iters * A) * 1e3, 2.0 * (qd + 2.0 * kvd) * E);
    tstart();
    for (int it = 0; it < iters; it++)
        OK(si_cuda_gemv(gc, m->embd, s->V, E, m->xn, NULL, m->logits));
    report("gemv_output", tstop_ms(iters) * 1e3, 2.0 * s->V * E);
    /* what a sampled step adds on the device: the candidates of the row for
     * a chat client's sampler (top-k 40 and a window of 64), bytes the row's */
    {
        const int k = 40 + 64;
        const size_t nc = eng_candidates_size(s->V, k);
        float *cv = dalloc(nc * 4);
        int32_t *ci = dalloc(nc * 4);
        OK(si_cuda_top_cands(gc, m->logits, s->V, ENG_CAND_CHUNK, k, cv, ci));
        tstart();
        for (int it = 0; it < iters; it++)
            OK(si_cuda_top_cands(gc, m->logits, s->V, ENG_CAND_CHUNK, k, cv, ci));
        report("top_cands_104", tstop_ms(iters) * 1e3, 4.0 * s->V);
        tstart();
        for (int it = 0; it < iters; it++)
            OK(si_cuda_argmax(gc, m->logits, s->V, m->next));
        report("argmax", tstop_ms(iters) * 1e3, 4.0 * s->V);
        si_cuda_dev_free(gc, cv);
        si_cuda_dev_free(gc, ci);
    }

    /* all slots; phi * n_ff scattered over the layer (a request's picks);
     * the same count as one run (slots 0 ..): what scattering costs */
    static const char *const ffn_case[3] = { "ffn_decode_dense", "ffn_decode_selective",
                                             "ffn_decode_run" };
    for (int c = 0; c < 3; c++) {
        const int n_sel = c ? m->n_sel : s->F;
        const int32_t *sel = c == 1 ? m->sel : NULL;
        OK(si_cuda_ffn(gc, &m->L[0].ffn, sel, n_sel, m->xn, m->ff, 1, NULL));
        tstart();
        for (int it = 0; it < iters * A; it++)
            OK(si_cuda_ffn(gc, &m->L[it % A].ffn, sel, n_sel, m->xn, m->ff, 1, NULL));
        report(ffn_case[c], tstop_ms(iters * A) * 1e3, 2.0 * 3 * n_sel * E);
        if (c == 2)
            continue;
        /* the kernel variants: 8 gate/up loads in flight a lane; the gate
         * and up rows as one GEMV's; one pass */
        static const char *const vname[3] = { "act_unroll_8", "gate_up_gemv", "fused" };
        for (int v = 0; v < 3; v++) {
            char name[64];
            snprintf(name, sizeof(name), "%s_%s", ffn_case[c], vname[v]);
            OK(si_cuda_set_variant(gc, "ffn_act_unroll", v == 0 ? 8 : 4));
            OK(si_cuda_set_variant(gc, "ffn_decode", v));
            OK(si_cuda_ffn(gc, &m->L[0].ffn, sel, n_sel, m->xn, m->ff, 1, NULL));
            tstart();
            for (int it = 0; it < iters * A; it++)
                OK(si_cuda_ffn(gc, &m->L[it % A].ffn, sel, n_sel, m->xn, m->ff, 1, NULL));
            report(name, tstop_ms(iters * A) * 1e3, 2.0 * 3 * n_sel * E);
            OK(si_cuda_set_variant(gc, "ffn_decode", 0));
            OK(si_cuda_set_variant(gc, "ffn_act_unroll", 4));
        }
    }
    int pos = m->ctx - 1;
    tstart();
    for (int it = 0; it < iters * A; it++) {
        layer *L = &m->L[it % A];
        OK(si_cuda_attention(gc, m->q, L->kc, L->vc, m->att, 1, pos, s->H, s->Hkv, s->hd,
                             1.0f / sqrtf((float)s->hd), 0, 0.0f));
    }
    report("attention_decode", tstop_ms(iters * A) * 1e3, 2.0 * 2 * (double)(pos + 1) * kvd);
    /* the variant: the splits combined by the decode kernel's last blocks */
    OK(si_cuda_set_variant(gc, "attn_combine", 1));
    tstart();
    for (int it = 0; it < iters * A; it++) {
        layer *L = &m->L[it % A];
        OK(si_cuda_attention(gc, m->q, L->kc, L->vc, m->att, 1, pos, s->H, s->Hkv, s->hd,
                             1.0f / sqrtf((float)s->hd), 0, 0.0f));
    }
    report("attention_decode_combined_in_kernel", tstop_ms(iters * A) * 1e3,
           2.0 * 2 * (double)(pos + 1) * kvd);
    OK(si_cuda_set_variant(gc, "attn_combine", 0));
    jclose();
}

/* A token graph's kernel settings: the defaults, or one variant of them */
typedef struct bench_var {
    const char *name;
    int pdl, act_unroll, ffn_decode, attn_combine, l2_prefetch, norm_fold;
} bench_var;

static void use_variant(const bench_var *v)
{
    si_cuda_set_pdl(gc, v->pdl);
    OK(si_cuda_set_variant(gc, "ffn_act_unroll", v->act_unroll));
    /* ffn_decode 3: the fused kernel with 2 blocks an SM */
    OK(si_cuda_set_variant(gc, "ffn_decode", v->ffn_decode > 2 ? 2 : v->ffn_decode));
    OK(si_cuda_set_variant(gc, "ffn_fused_bps", v->ffn_decode > 2 ? 2 : 1));
    OK(si_cuda_set_variant(gc, "attn_combine", v->attn_combine));
    OK(si_cuda_set_variant(gc, "l2_prefetch", v->l2_prefetch));
    OK(si_cuda_set_variant(gc, "norm_fold", v->norm_fold));
}

static void bench_token(model *m, int iters, int pos)
{
    const shape *s = &m->s;
    double weights_dense = (double)s->n_layer * layer_bytes(s) + 2.0 * s->V * s->E;
    double weights_sel = weights_dense - (double)s->n_layer * 2.0 * 3 * (s->F - m->n_sel) * s->E;
    jopen("decode_token");
    jnum("ctx_pos", pos);
    for (int sel = 0; sel < 2; sel++) {
        /* scratch for the largest op first: no allocation during capture */
        forward(m, 1, pos, sel, false, true);
        OK(si_cuda_sync(gc));
        /* op by op */
        tstart();
        for (int it = 0; it < iters; it++)
            forward(m, 1, pos, sel, false, true);
        double ms_direct = tstop_ms(iters);
        /* one graph each: the defaults, then each kernel variant alone
         * (v 0 the defaults; the others differ from them in one setting) */
        static const bench_var var[] = {
            { "default", 1, 4, 0, 0, 0, 0 },
            { "without_pdl", 0, 4, 0, 0, 0, 0 },
            { "ffn_act_unroll_8", 1, 8, 0, 0, 0, 0 },
            { "ffn_gate_up_gemv", 1, 4, 1, 0, 0, 0 },
            { "ffn_fused", 1, 4, 2, 0, 0, 0 },
            { "ffn_fused_2_per_sm", 1, 4, 3, 0, 0, 0 },
            { "attn_combine", 1, 4, 0, 1, 0, 0 },
            { "l2_prefetch_25", 1, 4, 0, 0, 25, 0 },
            { "l2_prefetch_50", 1, 4, 0, 0, 50, 0 },
            { "l2_prefetch_90", 1, 4, 0, 0, 90, 0 },
            { "norm_fold", 1, 4, 0, 0, 0, 1 },
            { "norm_fold_l2_prefetch_50", 1, 4, 0, 0, 50, 1 },
        };
        enum { N_VAR = sizeof(var) / sizeof(var[0]) };
        double ms_var[N_VAR];
        int edges = 0, prog_edges = 0;
        const bool pdl = si_cuda_set_pdl(gc, true);
        for (int v = 0; v < N_VAR; v++) {
            ms_var[v] = NAN;
            if (var[v].pdl == 0 && !pdl)
                continue; /* the same as the defaults here */
            use_variant(&var[v]);
            forward(m, 1, pos, sel, false, true); /* scratch for this variant */
            OK(si_cuda_sync(gc));
            si_cuda_graph *g;
            OK(si_cuda_graph_begin(gc));
            forward(m, 1, pos, sel, false, true);
            OK(si_cuda_graph_end(gc, &g));
            if (v == 0)
                if (si_cuda_graph_edges(g, &edges, &prog_edges) < 0)
                    edges = prog_edges = -1; /* not known here */
            OK(si_cuda_graph_launch(gc, g));
            tstart();
            for (int it = 0; it < iters; it++)
                OK(si_cuda_graph_launch(gc, g));
            ms_var[v] = tstop_ms(iters);
            si_cuda_graph_free(g);
        }
        use_variant(&var[0]);
        const double ms_graph = ms_var[0];
        double bytes = sel ? weights_sel : weights_dense;
        double gbps = bytes / (ms_graph * 1e-3) / 1e9;
        printf("  token %-9s graph %7.3f ms (%6.1f tok/s, %5.0f GB/s, %4.1f %% of copy bw), "
               "op by op %7.3f ms; graph of %d edges, %d programmatic\n",
               sel ? "selective" : "dense", ms_graph, 1e3 / ms_graph, gbps,
               100.0 * gbps / ref_gbps(), ms_direct, edges, prog_edges);
        for (int v = 1; v < N_VAR; v++)
            if (!isnan(ms_var[v]))
                printf("    variant %-18s %7.3f ms (%.3fx the default's time)\n", var[v].name, ms_var[v],
                       ms_var[v] / ms_graph);
        jopen(sel ? "selective" : "dense");
        jnum("ms_graph", ms_graph);
        jnum("ms_op_by_op", ms_direct);
        jnum("pdl", pdl);
        jnum("graph_edges", edges);
        jnum("graph_programmatic_edges", prog_edges);
        for (int v = 1; v < N_VAR; v++)
            if (!isnan(ms_var[v])) {
                char key[64];
                snprintf(key, sizeof(key), "ms_graph_%s", var[v].name);
                jnum(key, ms_var[v]);
            }
        jnum("tokens_per_s", 1e3 / ms_graph);
        jnum("weight_bytes", bytes);
        jnum("gbps", gbps);
        jnum("frac_of_copy_bw", gbps / ref_gbps());
        jclose();
    }
    jclose();
}

static void bench_prefill(model *m, int n_tok, int iters)
{
    jopen("prefill");
    jnum("tokens", n_tok);
    const char *names[3] = { "dense", "dense_with_counting", "selective" };
    for (int mode = 0; mode < 3; mode++) {
        bool sel = mode == 2, count = mode == 1;
        forward(m, n_tok, 0, sel, count, true); /* warm-up, scratch */
        tstart();
        for (int it = 0; it < iters; it++)
            forward(m, n_tok, 0, sel, count, true);
        double ms = tstop_ms(iters);
        printf("  prefill %-20s %8.2f ms (%7.0f tok/s)\n", names[mode], ms, n_tok * 1e3 / ms);
        jopen(names[mode]);
        jnum("ms", ms);
        jnum("tokens_per_s", n_tok * 1e3 / ms);
        jclose();
    }
    jclose();
}

static void model_free(model *m)
{
    for (int il = 0; il < m->n_alloc; il++) {
        layer *L = &m->L[il];
        void *p[] = { L->wq, L->wk, L->wv, L->wo, L->bq, L->bk, L->bv, L->attn_norm, L->ffn_norm,
                      (void *)L->ffn.gate_up, (void *)L->ffn.down, L->kc, L->vc };
        for (size_t i = 0; i < sizeof(p) / sizeof(p[0]); i++)
            si_cuda_dev_free(gc, p[i]);
    }
    void *p[] = { m->embd, m->out_norm, m->sel, m->x, m->xn, m->q, m->k, m->v, m->att, m->o,
                  m->ff, m->act, m->logits, m->tok, m->next, m->counts };
    for (size_t i = 0; i < sizeof(p) / sizeof(p[0]); i++)
        si_cuda_dev_free(gc, p[i]);
    free(m->L);
}

int main(int argc, char **argv)
{
    const char *path = NULL, *name = NULL, *json = NULL;
    double phi = 0.4;
    int ctx = 1024, n_prefill = 512, iters = 20;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!v)
            die("%s needs a value (see the header of tools/si-cuda-bench.c)", a);
        if (!strcmp(a, "--model"))
            path = v;
        else if (!strcmp(a, "--name"))
            name = v;
        else if (!strcmp(a, "--json"))
            json = v;
        else if (!strcmp(a, "--phi"))
            phi = atof(v);
        else if (!strcmp(a, "--ctx"))
            ctx = atoi(v);
        else if (!strcmp(a, "--prefill"))
            n_prefill = atoi(v);
        else if (!strcmp(a, "--iters"))
            iters = atoi(v);
        else
            die("unknown option %s", a);
        i++;
    }
    if (!path)
        die("usage: si-cuda-bench --model FILE [--name NAME] [--phi 0.4] [--ctx 1024] "
            "[--prefill 512] [--iters 20] [--json OUT]");
    if (!(phi > 0 && phi <= 1) || ctx < 2 || ctx > (1 << 20) || n_prefill < 2 ||
        n_prefill > ctx || iters < 1 || iters > 10000)
        die("bad option values");
    if (si_cuda_device_count() <= 0) {
        fprintf(stderr, "si-cuda-bench: no CUDA device: %s\n", si_cuda_last_error());
        return 77;
    }
    OK(si_cuda_new(0, &gc));
    CU(cudaEventCreate(&ev0));
    CU(cudaEventCreate(&ev1));
    host_pattern = malloc(PATTERN_BYTES);
    if (!host_pattern)
        die("out of host memory");
    uint64_t r = 88172645463325252ull;
    for (size_t i = 0; i < PATTERN_BYTES / 2; i++) {
        r ^= r << 13;
        r ^= r >> 7;
        r ^= r << 17;
        host_pattern[i] = (uint16_t)((r & 0x83ff) | (8u << 10));
    }

    model m;
    memset(&m, 0, sizeof(m));
    read_shape(path, &m.s);
    if (json && !(js = fopen(json, "w")))
        die("cannot write '%s'", json);
    jopen(NULL);
    jstr("model", name ? name : path);
    bench_bandwidth();
    const shape *s = &m.s;
    model_alloc(&m, ctx, n_prefill, phi);
    printf("%s: %s, %d layers (%d with own weights), n_embd %d, n_ff %d, heads %d/%d, "
           "vocab %d; phi %.2f -> %d of %d slots\n",
           name ? name : path, s->arch, s->n_layer, m.n_alloc, s->E, s->F, s->H, s->Hkv, s->V, phi,
           m.n_sel, s->F);
    jopen("shape");
    jstr("arch", s->arch);
    jnum("n_layer", s->n_layer);
    jnum("layers_with_own_weights", m.n_alloc);
    jnum("n_embd", s->E);
    jnum("n_ff", s->F);
    jnum("n_head", s->H);
    jnum("n_head_kv", s->Hkv);
    jnum("n_vocab", s->V);
    jnum("phi", phi);
    jnum("n_sel", m.n_sel);
    jclose();
    bench_kernels(&m, iters);
    bench_token(&m, iters, ctx / 2);
    bench_prefill(&m, n_prefill, iters > 5 ? 5 : iters);
    jclose();
    if (js) {
        fputc('\n', js);
        if (fclose(js) != 0)
            die("writing '%s' failed", json);
    }
    model_free(&m);
    si_cuda_free(gc);
    free(host_pattern);
    return 0;
}
