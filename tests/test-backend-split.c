/* The forward pass on a backend whose memory is not host memory, without a
 * GPU: a wrapper around the CPU backend plays the device.
 *
 * Its memory comes from one arena that is mapped PROT_NONE except while one
 * of its own calls runs (on the small synthetic models), and starts out as
 * NaN. So the engine cannot read or
 * write backend memory behind the backend's back (the test dies on the
 * fault), every op argument must point into the arena (host pointers are
 * caught), and anything not uploaded reads as NaN. Logits, profiling sums,
 * selective decoding and hot-swaps must then equal those of the plain CPU
 * backend bit for bit: the kernels are the same, only the memory moves.
 * This is the path a CUDA backend takes (staging, row uploads, device
 * copies of neuron slots, selections uploaded at the end of the prefill).
 * The wrapper offers topk_count (the CPU's, on arena memory), so a
 * selective prefill counts its votes "on the device" and brings back only
 * the counts; a second wrapper without it downloads the activations, as a
 * backend without the op does. Both must agree with the CPU on the votes
 * themselves, not only on the logits.
 *
 * The wrapper also offers decode graphs as CUDA does: between graph_begin
 * and graph_end the ops are recorded, not run (a memory call there fails
 * the test), and graph_end runs them; every third capture is lost instead,
 * and then the engine must issue the step again itself. A step whose key
 * was recorded before is replayed at its own position without the engine
 * issuing anything, as CUDA replays a graph whose ops read the position on
 * the device; every other time it is recorded again instead and must be
 * the recording op for op, but positions: else the engine kept a key over
 * a change, and a GPU would have replayed stale arguments.
 *
 * And it offers argmax (the kernel's rule, a loop on arena memory), so
 * that greedy generation (ENG_EVAL_ARGMAX) picks its tokens "on the
 * device": the same text as on the CPU, with 4 bytes downloaded per eval
 * where the other samplers download a row of logits; and top_cands (the
 * host's eng_candidates on arena memory), so that a top-k sampler
 * (ENG_EVAL_CANDIDATES) draws from the candidates brought back: the same
 * text again, with the candidates' bytes downloaded per eval.
 *
 * It offers CUDA's fused matmul3, rope_store, add_rmsnorm, norm_matmul3
 * and norm_ffn as the CPU's ops in turn, so the engine's pending residual
 * (the FFN's output added by the next norm) and its decode calls for a
 * norm and the op that reads it run here as on a GPU; ffn_pick and
 * build_sketch (the CPU's, on arena memory), so per-token picking does; and the prefetch hints, each of which must lie in one allocation
 * and be read, before the next hint, by the op it announced.
 *
 * usage: test-backend-split SI_SYNTH  (the default model too when present)
 */
#include <errno.h>
#include <math.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include "backend.h"
#include "model.h"
#include "test-util.h"

/* ---- the pretend device ---- */

#define ARENA_BYTES ((size_t)2 << 30)

typedef struct span {
    uintptr_t b, e;
} span;

/* one recorded op: its kind and arguments */
typedef enum {
    R_GET_ROWS, R_MATMUL, R_RMSNORM, R_ROPE, R_ATTENTION, R_FFN, R_ADD, R_SCALE, R_SOFTCAP, R_STORE,
    R_STORE_KV, R_SHORTCONV,
    R_ARGMAX, R_TOP_CANDS, R_PREFETCH, R_FFN_PICK,
    R_NORM_MATMUL3, R_NORM_FFN /* markers: their ops follow */
} rkind;
typedef struct rec {
    rkind k;
    int pos; /* the step's position, for the ops that take one; else 0 */
    eng_weight w;
    eng_ffn_weights fw;
    const void *p[6];
    int i[6];
    long n;
    float f[2];
    bool b;
    size_t z[ENG_PREFETCH_SPANS];
} rec;

typedef struct split {
    eng_backend be;
    eng_backend *cpu;
    const eng_backend_iface *op; /* the CPU's */
    uint8_t *base;
    size_t used;
    span *live;
    int n_live, cap_live;
    pthread_mutex_t lock;
    bool guard; /* arena unmapped between calls */
    long n_ops, n_up, n_down, n_copy, n_topk, n_argmax, n_cands;
    size_t down_bytes;
    bool recording;
    eng_graph_step step;  /* the step being recorded, or the last recorded */
    bool have_graph;      /* recs hold step.key's ops */
    rec *recs, *saved;    /* being recorded; the kept recording */
    int n_recs, cap_recs, n_saved;
    long n_graphs, n_graph_fails, n_replays, n_verified;
    long n_replans; /* steps of the step before's key with another max_pos */
    eng_graph_step last_step;
    int nan_rows; /* > 0: a matmul of that many rows (the output head) gives NaN */
    /* prefetch hints not yet followed by the op that reads them: spans
     * (their starts), and an FFN's gate_up with its selection */
    const void *pf_p[ENG_PREFETCH_SPANS];
    size_t pf_bytes[ENG_PREFETCH_SPANS];
    int n_pf;
    const void *pf_gu;
    const int32_t *pf_sel;
    int pf_n_sel;
    long n_prefetch, n_prefetch_ffn; /* run: issued directly, or in a graph's run */
    long n_norm_matmul3, n_norm_ffn; /* likewise */
    long n_pick;                     /* ffn_pick ops run */
} split;

static split *S_of(eng_backend *be)
{
    return be->ctx;
}

static size_t page_round(size_t n)
{
    size_t pg = (size_t)sysconf(_SC_PAGESIZE);
    return (n + pg - 1) / pg * pg;
}

static void arena_open(split *S)
{
    pthread_mutex_lock(&S->lock);
    if (S->used && S->guard)
        CHECK(mprotect(S->base, page_round(S->used), PROT_READ | PROT_WRITE) == 0);
}

static void arena_close(split *S)
{
    if (S->used && S->guard)
        CHECK(mprotect(S->base, page_round(S->used), PROT_NONE) == 0);
    pthread_mutex_unlock(&S->lock);
}

/* p .. p + bytes inside one live allocation (bytes 0: just p) */
static bool dev(split *S, const void *p, size_t bytes)
{
    uintptr_t a = (uintptr_t)p;
    for (int i = 0; i < S->n_live; i++)
        if (a >= S->live[i].b && a < S->live[i].e)
            return a + bytes <= S->live[i].e;
    return false;
}

static bool host(split *S, const void *p)
{
    uintptr_t a = (uintptr_t)p, b = (uintptr_t)S->base;
    return p && (a < b || a >= b + ARENA_BYTES);
}

#define DEV(p) CHECKF(dev(S, (p), 0), "%s: %s = %p is not backend memory", __func__, #p, (void *)(p))
#define DEV_OR_NULL(p) do { if (p) DEV(p); } while (0)

/* no memory call while a graph is being recorded (backend.h) */
#define NOT_RECORDING() CHECKF(!S->recording, "%s while recording a graph", __func__)

static int sp_alloc(eng_backend *be, size_t bytes, void **ret)
{
    split *S = S_of(be);
    NOT_RECORDING();
    pthread_mutex_lock(&S->lock);
    size_t at = (S->used + 63) & ~(size_t)63, n = bytes ? bytes : 1;
    if (at + n > ARENA_BYTES) {
        pthread_mutex_unlock(&S->lock);
        return -ENOMEM;
    }
    if (S->n_live == S->cap_live) {
        S->cap_live = S->cap_live ? 2 * S->cap_live : 256;
        S->live = realloc(S->live, (size_t)S->cap_live * sizeof(span));
        CHECK(S->live);
    }
    S->used = at + n;
    S->live[S->n_live++] = (span){ (uintptr_t)S->base + at, (uintptr_t)S->base + at + n };
    /* NaN until written: what was never uploaded poisons the results */
    CHECK(mprotect(S->base, page_round(S->used), PROT_READ | PROT_WRITE) == 0);
    memset(S->base + at, 0xff, n);
    if (S->guard)
        CHECK(mprotect(S->base, page_round(S->used), PROT_NONE) == 0);
    pthread_mutex_unlock(&S->lock);
    *ret = S->base + at;
    return 0;
}

static void sp_free(eng_backend *be, void *p)
{
    split *S = S_of(be);
    NOT_RECORDING();
    if (!p)
        return;
    pthread_mutex_lock(&S->lock);
    int i = 0;
    while (i < S->n_live && S->live[i].b != (uintptr_t)p)
        i++;
    CHECKF(i < S->n_live, "mem_free of %p, which alloc did not return", p);
    S->live[i] = S->live[--S->n_live]; /* the space is not reused: stale pointers fault */
    pthread_mutex_unlock(&S->lock);
}

static void sp_info(eng_backend *be, size_t *f, size_t *t)
{
    split *S = S_of(be);
    *t = ARENA_BYTES;
    *f = ARENA_BYTES - S->used;
}

static void sp_upload(eng_backend *be, void *dst, const void *src, size_t bytes)
{
    split *S = S_of(be);
    NOT_RECORDING();
    arena_open(S);
    CHECKF(dev(S, dst, bytes) && host(S, src), "upload %p <- %p", dst, src);
    memcpy(dst, src, bytes);
    S->n_up++;
    arena_close(S);
}

static void sp_upload_rows(eng_backend *be, void *dst, const int32_t *rows, const void *src, int n,
                           size_t row_bytes)
{
    split *S = S_of(be);
    NOT_RECORDING();
    arena_open(S);
    CHECK(host(S, rows) && host(S, src));
    for (int i = 0; i < n; i++) {
        uint8_t *d = (uint8_t *)dst + (size_t)rows[i] * row_bytes;
        CHECKF(dev(S, d, row_bytes), "upload_rows: row %d outside the buffer", rows[i]);
        memcpy(d, (const uint8_t *)src + (size_t)i * row_bytes, row_bytes);
    }
    S->n_up++;
    arena_close(S);
}

static void sp_download(eng_backend *be, void *dst, const void *src, size_t bytes)
{
    split *S = S_of(be);
    NOT_RECORDING();
    arena_open(S);
    CHECKF(dev(S, src, bytes) && host(S, dst), "download %p <- %p", dst, src);
    memcpy(dst, src, bytes);
    S->n_down++;
    S->down_bytes += bytes;
    arena_close(S);
}

static void sp_copy(eng_backend *be, void *dst, const void *src, size_t bytes)
{
    split *S = S_of(be);
    NOT_RECORDING();
    arena_open(S);
    CHECK(dev(S, dst, bytes) && dev(S, src, bytes));
    memcpy(dst, src, bytes);
    S->n_copy++;
    arena_close(S);
}

static void pf_all_read(split *S, const char *when);

static int sp_sync(eng_backend *be)
{
    split *S = S_of(be);
    NOT_RECORDING();
    pf_all_read(S, "sync");
    return 0;
}

static const char *sp_error(eng_backend *be)
{
    return "";
}

/* While recording, an op keeps its arguments for graph_end's replay. */
static rec *record(split *S, rkind k)
{
    if (!S->recording)
        return NULL;
    if (S->n_recs == S->cap_recs) {
        S->cap_recs = S->cap_recs ? 2 * S->cap_recs : 512;
        S->recs = realloc(S->recs, (size_t)S->cap_recs * sizeof(rec));
        CHECK(S->recs);
    }
    rec *r = &S->recs[S->n_recs++];
    memset(r, 0, sizeof(*r));
    r->k = k;
    return r;
}

/* ops: check the pointers, then the CPU's op with the arena open */
#define CALL(...)                       \
    do {                                \
        arena_open(S);                  \
        S->n_ops++;                     \
        S->op->__VA_ARGS__;             \
        arena_close(S);                 \
    } while (0)

/* Prefetch hints: every span must lie in one live allocation, and the
 * next hint (or the step's end: sync, graph_end) must come after ops that
 * read each of them: a matmul of a weight that starts there and is no
 * shorter, the ffn of that gate_up with the same selection. A hint for
 * weights no op reads would have a GPU fill its cache for nothing. */
static void pf_read(split *S, const void *p, size_t bytes)
{
    for (int i = 0; i < S->n_pf; i++)
        if (S->pf_p[i] == p) {
            CHECKF(S->pf_bytes[i] <= bytes, "prefetch of %zu bytes at %p, a weight of %zu",
                   S->pf_bytes[i], p, bytes);
            S->pf_p[i] = S->pf_p[--S->n_pf];
            S->pf_bytes[i] = S->pf_bytes[S->n_pf];
            return;
        }
}

static void pf_all_read(split *S, const char *when)
{
    CHECKF(S->n_pf == 0 && !S->pf_gu, "%s: %d prefetched spans%s not read since", when, S->n_pf,
           S->pf_gu ? " and an FFN's slots" : "");
}

static void sp_prefetch(eng_backend *be, const eng_span *spans, int n, const eng_ffn_weights *w,
                        const int32_t *sel, int n_sel)
{
    split *S = S_of(be);
    pf_all_read(S, "prefetch");
    CHECKF(n >= 0 && n <= ENG_PREFETCH_SPANS && (n == 0 || spans) && n_sel >= 0,
           "prefetch: %d spans, %d slots", n, n_sel);
    for (int i = 0; i < n; i++) {
        CHECKF(spans[i].bytes > 0 && dev(S, spans[i].p, spans[i].bytes),
               "prefetch: span %d (%p, %zu bytes) is not within one backend allocation", i,
               spans[i].p, spans[i].bytes);
        S->pf_p[i] = spans[i].p, S->pf_bytes[i] = spans[i].bytes;
    }
    S->n_pf = n;
    if (w) {
        DEV(w->gate_up); DEV_OR_NULL(sel);
        CHECKF(n_sel <= w->n_slots && (!sel || dev(S, sel, (size_t)n_sel * sizeof(int32_t))),
               "prefetch: %d slots of %d", n_sel, w->n_slots);
        S->pf_gu = w->gate_up, S->pf_sel = sel, S->pf_n_sel = n_sel;
    }
    rec *r = record(S, R_PREFETCH);
    if (r) { /* recorded for the comparison of steps; running it only counts */
        for (int i = 0; i < n; i++)
            r->p[i] = spans[i].p, r->z[i] = spans[i].bytes;
        r->i[0] = n, r->p[4] = sel, r->i[1] = n_sel, r->b = w != NULL;
        if (w)
            r->fw = *w;
        return;
    }
    S->n_prefetch++;
    S->n_prefetch_ffn += w != NULL;
}

static void sp_get_rows(eng_backend *be, const eng_weight *w, const int32_t *ids, int n,
                        float *out)
{
    split *S = S_of(be);
    DEV(w->data); DEV(ids); DEV(out);
    rec *r = record(S, R_GET_ROWS);
    if (r) {
        r->w = *w, r->p[0] = ids, r->i[0] = n, r->p[1] = out;
        return;
    }
    CALL(get_rows(S->cpu, w, ids, n, out));
}

static void matmul_run(split *S, const eng_weight *w, const float *bias, const float *x,
                       float *y, int nt)
{
    CALL(matmul(S->cpu, w, bias, x, y, nt));
    if (S->nan_rows && w->rows == S->nan_rows) {
        arena_open(S);
        for (size_t i = 0; i < (size_t)nt * w->rows; i++)
            y[i] = NAN;
        arena_close(S);
    }
}

static void sp_matmul(eng_backend *be, const eng_weight *w, const float *bias, const float *x,
                      float *y, int nt)
{
    split *S = S_of(be);
    DEV(w->data); DEV_OR_NULL(bias); DEV(x); DEV(y);
    pf_read(S, w->data, eng_dtype_bytes(w->dtype, (size_t)w->rows * w->cols));
    rec *r = record(S, R_MATMUL);
    if (r) {
        r->w = *w, r->p[0] = bias, r->p[1] = x, r->p[2] = y, r->i[0] = nt;
        return;
    }
    matmul_run(S, w, bias, x, y, nt);
}

static void sp_rmsnorm(eng_backend *be, const float *x, const float *w, float *y, int nt, int n,
                       float eps)
{
    split *S = S_of(be);
    DEV(x); DEV(w); DEV(y);
    rec *r = record(S, R_RMSNORM);
    if (r) {
        r->p[0] = x, r->p[1] = w, r->p[2] = y, r->i[0] = nt, r->i[1] = n, r->f[0] = eps;
        return;
    }
    CALL(rmsnorm(S->cpu, x, w, y, nt, n, eps));
}

static void sp_rope(eng_backend *be, float *x, int nt, int nh, int hd, int nr, int pos0,
                    float base, const float *ff, bool neox)
{
    split *S = S_of(be);
    DEV(x); DEV_OR_NULL(ff);
    rec *r = record(S, R_ROPE);
    if (r) {
        CHECKF(pos0 == S->step.pos && nt == 1, "rope at %d+%d in the step at %d", pos0, nt,
               S->step.pos);
        r->p[0] = x, r->i[0] = nt, r->i[1] = nh, r->i[2] = hd, r->i[3] = nr, r->pos = pos0;
        r->f[0] = base, r->p[1] = ff, r->b = neox;
        return;
    }
    CALL(rope(S->cpu, x, nt, nh, hd, nr, pos0, base, ff, neox));
}

static void sp_attention(eng_backend *be, const float *q, const uint16_t *k, const uint16_t *v,
                         float *out, int nt, int pos0, int nh, int nkv, int hd, float scale,
                         int window, float softcap, const float *sinks)
{
    split *S = S_of(be);
    DEV(q); DEV(k); DEV(v); DEV(out);
    rec *r = record(S, R_ATTENTION);
    if (r) {
        CHECKF(pos0 == S->step.pos && nt == 1, "attention at %d+%d in the step at %d", pos0, nt,
               S->step.pos);
        r->p[0] = q, r->p[1] = k, r->p[2] = v, r->p[3] = out, r->i[0] = nt, r->pos = pos0;
        r->i[2] = nh, r->i[3] = nkv, r->i[4] = hd, r->i[5] = window, r->f[0] = scale;
        r->f[1] = softcap, r->p[4] = sinks;
        return;
    }
    CALL(attention(S->cpu, q, k, v, out, nt, pos0, nh, nkv, hd, scale, window, softcap, sinks));
}

static void sp_ffn(eng_backend *be, const eng_ffn_weights *w, const int32_t *sel, int n_sel,
                   const float *x, float *y, int nt, float *act)
{
    split *S = S_of(be);
    DEV(w->gate_up); DEV(w->down); DEV_OR_NULL(sel); DEV(x); DEV(y); DEV_OR_NULL(act);
    if (S->pf_gu && S->pf_gu == w->gate_up) {
        CHECKF(S->pf_sel == sel && S->pf_n_sel == n_sel,
               "prefetch of the FFN's slots (sel %p, %d) before an ffn of others (sel %p, %d)",
               (const void *)S->pf_sel, S->pf_n_sel, (const void *)sel, n_sel);
        S->pf_gu = NULL;
    }
    rec *r = record(S, R_FFN);
    if (r) {
        r->fw = *w, r->p[0] = sel, r->i[0] = n_sel, r->p[1] = x, r->p[2] = y, r->i[1] = nt;
        r->p[3] = act;
        return;
    }
    CALL(ffn(S->cpu, w, sel, n_sel, x, y, nt, act));
}

/* ENG_PICK_TOKEN: the CPU's per-token pick and its sketch, built "on the
 * device" (arena memory) as CUDA builds it. */
static void sp_ffn_pick(eng_backend *be, const eng_ffn_weights *w, int k, const float *x, float *y,
                        int nt)
{
    split *S = S_of(be);
    DEV(w->gate_up); DEV(w->down); DEV(w->sketch); DEV(x); DEV(y);
    rec *r = record(S, R_FFN_PICK);
    if (r) {
        r->fw = *w, r->i[0] = k, r->p[0] = x, r->p[1] = y, r->i[1] = nt;
        return;
    }
    S->n_pick++;
    CALL(ffn_pick(S->cpu, w, k, x, y, nt));
}

static void sp_build_sketch(eng_backend *be, const eng_ffn_weights *w)
{
    split *S = S_of(be);
    NOT_RECORDING();
    DEV(w->gate_up);
    CHECKF(w->sketch && dev(S, w->sketch, (size_t)w->n_slots * eng_sketch_slot_bytes(w->n_embd)),
           "build_sketch: the sketch is not %d slots of backend memory", w->n_slots);
    CALL(build_sketch(S->cpu, w));
}

static void sp_add(eng_backend *be, float *y, const float *x, long n)
{
    split *S = S_of(be);
    DEV(y); DEV(x);
    rec *r = record(S, R_ADD);
    if (r) {
        r->p[0] = y, r->p[1] = x, r->n = n;
        return;
    }
    CALL(add(S->cpu, y, x, n));
}

/* The ops CUDA fuses, as the CPU's ops in turn (so bit for bit the CPU's):
 * q, k, v (the CPU's matmul3 is its three matmuls, bit for bit), and the
 * ropes with the cache stores. */
static void sp_matmul3(eng_backend *be, const eng_weight *const w[3], const float *const b[3],
                       const float *x, float *const y[3], int nt)
{
    for (int i = 0; i < 3; i++)
        sp_matmul(be, w[i], b[i], x, y[i], nt);
}

static void sp_store_kv(eng_backend *be, const float *src, uint16_t *cache, long row, int pos0,
                        int nt);

static void sp_rope_store(eng_backend *be, float *q, float *k, const float *v, int nt, int nh,
                          int nkv, int hd, int nr, int pos0, float base, const float *ff,
                          bool neox, uint16_t *kc, uint16_t *vc)
{
    sp_rope(be, q, nt, nh, hd, nr, pos0, base, ff, neox);
    sp_rope(be, k, nt, nkv, hd, nr, pos0, base, ff, neox);
    sp_store_kv(be, k, kc, (long)nkv * hd, pos0, nt);
    sp_store_kv(be, v, vc, (long)nkv * hd, pos0, nt);
}

/* The fused ops as the CPU's ops in turn (so bit for bit the CPU's): the
 * engine's pending residual and its decode norm-and-q/k/v call then run
 * here as on a GPU. */
static void sp_add_rmsnorm(eng_backend *be, float *x, const float *y, const float *w, float *out,
                           int nt, int n, float eps)
{
    sp_add(be, x, y, (long)nt * n);
    sp_rmsnorm(be, x, w, out, nt, n, eps);
}

/* norm_matmul3's and norm_ffn's norm: x, res (or NULL) and xn rows of n
 * floats of backend memory, xn apart from x; recorded as the op's marker
 * (running it counts the op), then the CPU's add and rmsnorm in turn */
static void norm_first(eng_backend *be, rkind k, float *x, const float *res, const float *w,
                       float eps, float *xn, int n)
{
    split *S = S_of(be);
    CHECKF(dev(S, x, (size_t)n * sizeof(float)) && dev(S, xn, (size_t)n * sizeof(float)) &&
               (!res || dev(S, res, (size_t)n * sizeof(float))),
           "op %d: x, res, xn not %d floats of backend memory", (int)k, n);
    CHECKF(xn + n <= x || x + n <= xn, "op %d: xn overlaps x", (int)k);
    if (!record(S, k))
        *(k == R_NORM_FFN ? &S->n_norm_ffn : &S->n_norm_matmul3) += 1;
    if (res)
        sp_add(be, x, res, n);
    sp_rmsnorm(be, x, w, xn, 1, n, eps);
}

static void sp_norm_matmul3(eng_backend *be, float *x, const float *res, const float *w,
                            float eps, float *xn, const eng_weight *const w3[3],
                            const float *const b3[3], float *const y3[3])
{
    const int n = w3[0]->cols;
    CHECKF(w3[1]->cols == n && w3[2]->cols == n, "norm_matmul3: widths %d %d %d", n, w3[1]->cols,
           w3[2]->cols);
    norm_first(be, R_NORM_MATMUL3, x, res, w, eps, xn, n);
    for (int i = 0; i < 3; i++)
        sp_matmul(be, w3[i], b3[i], xn, y3[i], 1);
}

static void sp_norm_ffn(eng_backend *be, float *x, const float *res, const float *w, float eps,
                        float *xn, const eng_ffn_weights *fw, const int32_t *sel, int n_sel, float *y)
{
    norm_first(be, R_NORM_FFN, x, res, w, eps, xn, fw->n_embd);
    sp_ffn(be, fw, sel, n_sel, xn, y, 1, NULL);
}

static void sp_scale(eng_backend *be, float *x, float f, long n)
{
    split *S = S_of(be);
    DEV(x);
    rec *r = record(S, R_SCALE);
    if (r) {
        r->p[0] = x, r->f[0] = f, r->n = n;
        return;
    }
    CALL(scale(S->cpu, x, f, n));
}

static void sp_softcap(eng_backend *be, float *x, float cap, long n)
{
    split *S = S_of(be);
    DEV(x);
    rec *r = record(S, R_SOFTCAP);
    if (r) {
        r->p[0] = x, r->f[0] = cap, r->n = n;
        return;
    }
    CALL(softcap(S->cpu, x, cap, n));
}

static void sp_store(eng_backend *be, const float *src, uint16_t *dst, long n)
{
    split *S = S_of(be);
    DEV(src); DEV(dst);
    rec *r = record(S, R_STORE);
    if (r) {
        r->p[0] = src, r->p[1] = dst, r->n = n;
        return;
    }
    CALL(store_f16(S->cpu, src, dst, n));
}

/* The rule of kernels/select.cu's k_argmax: NaN skipped, ties to the lower
 * index, -1 when every value is NaN. */
static void argmax_run(split *S, const float *x, int n, int32_t *ret)
{
    arena_open(S);
    S->n_ops++;
    S->n_argmax++;
    int32_t best = -1;
    for (int i = 0; i < n; i++)
        if (!isnan(x[i]) && (best < 0 || x[i] > x[best]))
            best = i;
    *ret = best;
    arena_close(S);
}

static void sp_argmax(eng_backend *be, const float *x, int n, int32_t *ret)
{
    split *S = S_of(be);
    DEV(x); DEV(ret);
    CHECKF(dev(S, x, (size_t)n * sizeof(float)) && dev(S, ret, sizeof(int32_t)),
           "argmax: buffers too small");
    rec *r = record(S, R_ARGMAX);
    if (r) {
        r->p[0] = x, r->i[0] = n, r->p[1] = ret;
        return;
    }
    argmax_run(S, x, n, ret);
}

/* The candidates of x for k, as kernels/select.cu's k_top_cands: the
 * host's eng_candidates, which that kernel matches bit for bit. */
static void cands_run(split *S, const float *x, int n, int k, float *vals, int32_t *ids)
{
    arena_open(S);
    S->n_ops++;
    S->n_cands++;
    uint32_t *tmp = malloc(2 * ENG_CAND_CHUNK * sizeof(uint32_t));
    CHECK(tmp && eng_candidates(x, n, k, tmp, vals, ids) == 0);
    free(tmp);
    arena_close(S);
}

static void sp_top_cands(eng_backend *be, const float *x, int n, int k, float *vals, int32_t *ids)
{
    split *S = S_of(be);
    DEV(x); DEV(vals); DEV(ids);
    const size_t m = eng_candidates_size(n, k);
    CHECKF(dev(S, x, (size_t)n * sizeof(float)) && dev(S, vals, m * sizeof(float)) &&
               dev(S, ids, m * sizeof(int32_t)),
           "top_cands: buffers too small");
    rec *r = record(S, R_TOP_CANDS);
    if (r) {
        r->p[0] = x, r->p[1] = vals, r->p[2] = ids, r->i[0] = n, r->i[1] = k;
        return;
    }
    cands_run(S, x, n, k, vals, ids);
}

static void sp_store_kv(eng_backend *be, const float *src, uint16_t *cache, long row, int pos0,
                        int nt)
{
    split *S = S_of(be);
    DEV(src);
    CHECKF(dev(S, cache + (size_t)pos0 * row, (size_t)row * nt * sizeof(uint16_t)),
           "store_kv: rows %d..%d outside the cache", pos0, pos0 + nt - 1);
    rec *r = record(S, R_STORE_KV);
    if (r) {
        CHECKF(pos0 == S->step.pos && nt == 1, "store_kv at %d+%d in the step at %d", pos0, nt,
               S->step.pos);
        r->p[0] = src, r->p[1] = cache, r->n = row, r->pos = pos0, r->i[0] = nt;
        return;
    }
    CALL(store_kv(S->cpu, src, cache, row, pos0, nt));
}

static void sp_shortconv(eng_backend *be, const float *b, const float *c, const float *x,
                         const float *w, int len, float *cache, int pos0, int rows, int nt, int n,
                         float *out)
{
    split *S = S_of(be);
    DEV(b); DEV(c); DEV(x); DEV(w); DEV(out);
    CHECKF(dev(S, cache, (size_t)n * rows * sizeof(float)) && len - 1 + nt <= rows,
           "shortconv: a ring of %d rows outside the cache or short of %d + %d", rows, len - 1,
           nt);
    rec *r = record(S, R_SHORTCONV);
    if (r) {
        CHECKF(pos0 == S->step.pos && nt == 1, "shortconv at %d+%d in the step at %d", pos0, nt,
               S->step.pos);
        r->p[0] = b, r->p[1] = c, r->p[2] = x, r->p[3] = w, r->p[4] = cache, r->p[5] = out;
        r->i[0] = len, r->i[1] = nt, r->i[2] = n, r->i[3] = rows, r->pos = pos0;
        return;
    }
    CALL(shortconv(S->cpu, b, c, x, w, len, cache, pos0, rows, nt, n, out));
}

/* Runs a recording at position pos (the ops that take one get pos). */
static void run_recs(split *S, const rec *recs, int n, int pos)
{
    for (int i = 0; i < n; i++) {
        const rec *r = &recs[i];
        switch (r->k) {
        case R_GET_ROWS:
            CALL(get_rows(S->cpu, &r->w, r->p[0], r->i[0], (float *)r->p[1]));
            break;
        case R_MATMUL:
            matmul_run(S, &r->w, r->p[0], r->p[1], (float *)r->p[2], r->i[0]);
            break;
        case R_RMSNORM:
            CALL(rmsnorm(S->cpu, r->p[0], r->p[1], (float *)r->p[2], r->i[0], r->i[1], r->f[0]));
            break;
        case R_ROPE:
            CALL(rope(S->cpu, (float *)r->p[0], r->i[0], r->i[1], r->i[2], r->i[3], pos, r->f[0],
                      r->p[1], r->b));
            break;
        case R_ATTENTION:
            CALL(attention(S->cpu, r->p[0], r->p[1], r->p[2], (float *)r->p[3], r->i[0], pos,
                           r->i[2], r->i[3], r->i[4], r->f[0], r->i[5], r->f[1], r->p[4]));
            break;
        case R_FFN:
            CALL(ffn(S->cpu, &r->fw, r->p[0], r->i[0], r->p[1], (float *)r->p[2], r->i[1],
                     (float *)r->p[3]));
            break;
        case R_SOFTCAP:
            CALL(softcap(S->cpu, (float *)r->p[0], r->f[0], r->n));
            break;
        case R_SCALE:
            CALL(scale(S->cpu, (float *)r->p[0], r->f[0], r->n));
            break;
        case R_ADD:
            CALL(add(S->cpu, (float *)r->p[0], r->p[1], r->n));
            break;
        case R_STORE:
            CALL(store_f16(S->cpu, r->p[0], (uint16_t *)r->p[1], r->n));
            break;
        case R_STORE_KV:
            CALL(store_kv(S->cpu, r->p[0], (uint16_t *)r->p[1], r->n, pos, r->i[0]));
            break;
        case R_SHORTCONV:
            CALL(shortconv(S->cpu, r->p[0], r->p[1], r->p[2], r->p[3], r->i[0],
                           (float *)r->p[4], pos, r->i[3], r->i[1], r->i[2], (float *)r->p[5]));
            break;
        case R_ARGMAX:
            argmax_run(S, r->p[0], r->i[0], (int32_t *)r->p[1]);
            break;
        case R_TOP_CANDS:
            cands_run(S, r->p[0], r->i[0], r->i[1], (float *)r->p[1], (int32_t *)r->p[2]);
            break;
        case R_FFN_PICK:
            S->n_pick++;
            CALL(ffn_pick(S->cpu, &r->fw, r->i[0], r->p[0], (float *)r->p[1], r->i[1]));
            break;
        case R_PREFETCH:
            S->n_prefetch++;
            S->n_prefetch_ffn += r->b;
            break;
        case R_NORM_MATMUL3:
            S->n_norm_matmul3++;
            break;
        case R_NORM_FFN:
            S->n_norm_ffn++;
            break;
        }
    }
}

static int sp_graph_begin(eng_backend *be, const eng_graph_step *st)
{
    split *S = S_of(be);
    CHECKF(!S->recording, "graph_begin twice");
    CHECK(st && st->pos >= 0 && st->pos <= st->max_pos);
    if (st->key == S->last_step.key && st->max_pos != S->last_step.max_pos) {
        CHECKF(st->max_pos > S->last_step.max_pos && st->pos > S->last_step.max_pos,
               "max_pos %d -> %d at position %d", S->last_step.max_pos, st->max_pos, st->pos);
        S->n_replans++;
    }
    S->last_step = *st;
    bool same = S->have_graph && st->key == S->step.key && st->max_pos == S->step.max_pos;
    if (same && S->n_replays % 2 == 0) {
        S->n_replays++;
        S->step.pos = st->pos;
        run_recs(S, S->saved, S->n_saved, st->pos);
        return 1;
    }
    if (same)
        S->n_replays++; /* this time recorded, and checked against the kept one */
    else
        S->have_graph = false;
    S->step = *st;
    S->recording = true;
    S->n_recs = 0;
    return 0;
}

/* Runs the recording and keeps it; every third one is lost instead, as a
 * capture whose op failed (then nothing of it may have run). A recording
 * under the kept key must be the kept one but positions. */
static int sp_graph_end(eng_backend *be)
{
    split *S = S_of(be);
    CHECKF(S->recording, "graph_end without graph_begin");
    S->recording = false;
    pf_all_read(S, "graph_end");
    if ((S->n_graphs + S->n_graph_fails) % 3 == 2) {
        S->n_graph_fails++;
        S->have_graph = false;
        return -EAGAIN;
    }
    S->n_graphs++;
    if (S->have_graph) {
        CHECKF(S->n_recs == S->n_saved, "step key %llu: %d ops recorded, %d before",
               (unsigned long long)S->step.key, S->n_recs, S->n_saved);
        for (int i = 0; i < S->n_recs; i++) {
            rec a = S->recs[i], b = S->saved[i];
            a.pos = b.pos = 0;
            CHECKF(memcmp(&a, &b, sizeof(rec)) == 0,
                   "step key %llu: op %d (kind %d) has other arguments than when recorded: "
                   "the key should have changed", (unsigned long long)S->step.key, i, (int)a.k);
        }
        S->n_verified++;
    }
    if (S->n_recs > S->n_saved || !S->saved) {
        S->saved = realloc(S->saved, (size_t)S->cap_recs * sizeof(rec));
        CHECK(S->saved);
    }
    memcpy(S->saved, S->recs, (size_t)S->n_recs * sizeof(rec));
    S->n_saved = S->n_recs;
    S->have_graph = true;
    run_recs(S, S->recs, S->n_recs, S->step.pos);
    return 0;
}

static void sp_topk_count(eng_backend *be, const float *act, int nt, int n_sel, float alpha,
                          bool signed_rank, uint32_t *counts)
{
    split *S = S_of(be);
    NOT_RECORDING(); /* a prefill's: never in a decode graph */
    DEV(act); DEV(counts);
    CHECKF(dev(S, act, (size_t)nt * n_sel * sizeof(float)) &&
           dev(S, counts, (size_t)n_sel * sizeof(uint32_t)), "topk_count: buffers too small");
    S->n_topk++;
    CALL(topk_count(S->cpu, act, nt, n_sel, alpha, signed_rank, counts));
}

static split *last_split; /* the counters of the latest one, for the checks */

static void sp_destroy(eng_backend *be)
{
    split *S = S_of(be);
    CHECKF(S->n_live == 0, "%d backend buffers leaked", S->n_live);
    S->op->free(S->cpu);
    munmap(S->base, ARENA_BYTES);
    free(S->live);
    free(S->recs);
    free(S->saved);
    pthread_mutex_destroy(&S->lock);
    if (last_split == S)
        last_split = NULL;
    free(S);
}

static const eng_backend_iface split_iface = {
    .name = "split",
    .free = sp_destroy,
    .host_memory = false,
    /* the CPU's kernels (the default model's Q4_1 layers among them) */
    .dtypes = 1u << ENG_DTYPE_F16 | 1u << ENG_DTYPE_F32 | 1u << ENG_DTYPE_Q8_0 |
              1u << ENG_DTYPE_Q4_K | 1u << ENG_DTYPE_Q5_K | 1u << ENG_DTYPE_Q6_K |
              1u << ENG_DTYPE_Q4_1 | 1u << ENG_DTYPE_Q4_0,
    .alloc = sp_alloc,
    .mem_free = sp_free,
    .mem_info = sp_info,
    .upload = sp_upload,
    .upload_rows = sp_upload_rows,
    .download = sp_download,
    .copy = sp_copy,
    .sync = sp_sync,
    .error = sp_error,
    .get_rows = sp_get_rows,
    .matmul = sp_matmul,
    .rmsnorm = sp_rmsnorm,
    .rope = sp_rope,
    .attention = sp_attention,
    .ffn = sp_ffn,
    .add = sp_add,
    .scale = sp_scale,
    .softcap = sp_softcap,
    .store_f16 = sp_store,
    .store_kv = sp_store_kv,
    .shortconv = sp_shortconv,
    .graph_begin = sp_graph_begin,
    .graph_end = sp_graph_end,
    .topk_count = sp_topk_count,
    .argmax = sp_argmax,
    .top_cands = sp_top_cands,
    .prefetch = sp_prefetch,
    .add_rmsnorm = sp_add_rmsnorm,
    .matmul3 = sp_matmul3,
    .rope_store = sp_rope_store,
    .ffn_pick = sp_ffn_pick,
    .build_sketch = sp_build_sketch,
    .norm_matmul3 = sp_norm_matmul3,
    .norm_ffn = sp_norm_ffn,
};

/* the same without topk_count: the activations come back to the host;
 * or (no_pick) without ffn_pick and build_sketch */
static eng_backend_iface split_iface_dl, split_iface_nopick;
static bool no_pick;

static eng_backend *split_new(bool guard, bool counts)
{
    split *S = calloc(1, sizeof(*S));
    CHECK(S);
    CHECK(eng_backend_cpu_new(2, &S->cpu) == 0);
    S->op = S->cpu->iface;
    S->base = mmap(NULL, ARENA_BYTES, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE,
                   -1, 0);
    CHECK(S->base != MAP_FAILED);
    pthread_mutex_init(&S->lock, NULL);
    S->guard = guard;
    split_iface_dl = split_iface;
    split_iface_dl.topk_count = NULL;
    split_iface_nopick = split_iface;
    split_iface_nopick.ffn_pick = NULL;
    split_iface_nopick.build_sketch = NULL;
    S->be = (eng_backend){ .iface = no_pick ? &split_iface_nopick : counts ? &split_iface : &split_iface_dl,
                           .ctx = S };
    last_split = S;
    return &S->be;
}

/* ---- the comparison ---- */

static bool guard;
static bool dev_counts; /* the split backend offers topk_count */

static eng_model *load(const char *path, const eng_load_plan_params *plan, bool on_split)
{
    eng_model_params mp = eng_model_params_default();
    mp.n_threads = 2;
    mp.plan = plan;
    eng_model *m = NULL;
    eng_error err;
    int r = eng__model_load_backend(path, &mp, on_split ? split_new(guard, dev_counts) : NULL,
                                    &m, &err);
    CHECKF(r == 0, "%s: %s", path, err.msg);
    return m;
}

static int V, NL; /* the model's vocabulary and layers */

static void same_logits(eng_session *a, eng_session *b, int i, const char *what)
{
    const float *la = eng_session_logits(a, i), *lb = eng_session_logits(b, i);
    CHECK(la && lb);
    for (int v = 0; v < V; v++)
        CHECKF(isfinite(la[v]) && memcmp(&la[v], &lb[v], sizeof(float)) == 0,
               "%s: logits of row %d differ at %d: %.9g vs %.9g", what, i, v, la[v], lb[v]);
}

static int32_t argmax(const float *l)
{
    int32_t best = 0;
    for (int v = 1; v < V; v++)
        if (l[v] > l[best])
            best = v;
    return best;
}

/* The prefill's votes and the selection they made, equal on both: a wrong
 * vote need not move the logits of a tiny model, a wrong count always
 * shows here. */
static void same_selection(const eng_session *a, const eng_session *b, const char *what)
{
    const eng_model *m = a->model;
    CHECK(a->selected == b->selected);
    for (int il = 0; il < m->info.n_layer; il++) {
        const int n_slots = m->layers[il].ffn.n_slots;
        CHECK(n_slots == b->model->layers[il].ffn.n_slots);
        CHECKF(memcmp(a->counts[il], b->counts[il], (size_t)n_slots * sizeof(float)) == 0,
               "%s: layer %d: the prefill's votes differ", what, il);
        CHECKF(a->ffn_n_sel[il] == b->ffn_n_sel[il] && !a->ffn_sel[il] == !b->ffn_sel[il],
               "%s: layer %d: selections of %d and %d slots", what, il, a->ffn_n_sel[il],
               b->ffn_n_sel[il]);
        if (a->ffn_sel[il])
            CHECKF(memcmp(a->ffn_sel[il], b->ffn_sel[il],
                          (size_t)a->ffn_n_sel[il] * sizeof(int32_t)) == 0,
                   "%s: layer %d: different slots selected", what, il);
    }
}

static int cancel_now(void *userdata)
{
    return 1;
}

/* A reset, then a prefill of toks on both sessions that the abort callback
 * stops after its first chunk. */
static void cancelled_prefill(eng_session *a, eng_session *b, const int32_t *toks, int n)
{
    eng_session_reset(a);
    eng_session_reset(b);
    eng_session_set_abort(a, cancel_now, NULL);
    eng_session_set_abort(b, cancel_now, NULL);
    CHECK(eng_session_eval(a, toks, n, 0) == -ECANCELED);
    CHECK(eng_session_eval(b, toks, n, 0) == -ECANCELED);
    eng_session_set_abort(a, NULL, NULL);
    eng_session_set_abort(b, NULL, NULL);
}

/* A prompt (every row's logits) then greedy decode steps, on both. */
static void compare(eng_session *a, eng_session *b, const int32_t *prompt, int n, int steps,
                    const char *what)
{
    eng_session_reset(a);
    eng_session_reset(b);
    CHECK(eng_session_eval(a, prompt, n, ENG_EVAL_ALL_LOGITS) == 0);
    CHECK(eng_session_eval(b, prompt, n, ENG_EVAL_ALL_LOGITS) == 0);
    same_selection(a, b, what);
    for (int i = 0; i < n; i++)
        same_logits(a, b, i, what);
    const long pf0 = last_split->n_prefetch, pff0 = last_split->n_prefetch_ffn,
               nm0 = last_split->n_norm_matmul3, nf0 = last_split->n_norm_ffn;
    for (int t = 0; t < steps; t++) {
        int32_t tok = argmax(eng_session_logits(a, -1));
        CHECK(tok == argmax(eng_session_logits(b, -1)));
        CHECK(eng_session_eval(a, &tok, 1, 0) == 0);
        CHECK(eng_session_eval(b, &tok, 1, 0) == 0);
        same_logits(a, b, -1, what);
    }
    CHECK(eng_session_ffn_share(a) == eng_session_ffn_share(b));
    /* each step's hints ran: per layer the attention's output and the FFN,
     * then the next layer's q, k, v or the head (the prompt's evals are
     * no decode, and give none) */
    /* (a layer that picks its slots per token hints no FFN slots, and runs
     * its norm and ffn_pick as two ops) */
    int picking = 0;
    for (int il = 0; il < NL; il++)
        picking += b->selected && b->pick_k[il] > 0;
    CHECKF(last_split->n_prefetch - pf0 == 2L * steps * NL &&
               last_split->n_prefetch_ffn - pff0 == (long)steps * (NL - picking),
           "%s: %ld prefetches (%ld of an FFN) in %d steps of %d layers (%d picking)", what,
           last_split->n_prefetch - pf0, last_split->n_prefetch_ffn - pff0, steps, NL, picking);
    /* and each layer's norm and q, k, v came in one call, its norm and FFN
     * in another (a layer without norms before its blocks, olmo2's and
     * exaone4's, has neither) */
    int fused3 = 0, fused_ffn = 0;
    for (int il = 0; il < NL; il++) {
        const eng_layer *L = &b->model->layers[il];
        fused3 += L->attn_norm != NULL;
        fused_ffn += L->ffn_norm != NULL && !(b->selected && b->pick_k[il] > 0);
    }
    CHECKF(last_split->n_norm_matmul3 - nm0 == (long)steps * fused3 &&
               last_split->n_norm_ffn - nf0 == (long)steps * fused_ffn,
           "%s: %ld norm_matmul3 and %ld norm_ffn in %d steps of %d layers", what,
           last_split->n_norm_matmul3 - nm0, last_split->n_norm_ffn - nf0, steps, NL);
}

/* Greedy by ENG_EVAL_ARGMAX: the split backend picks the token itself and
 * keeps no logits, the CPU keeps its logits and eng_session_argmax reads
 * them: the same tokens, those of the logits. With ENG_EVAL_ALL_LOGITS the
 * flag does nothing. */
static void compare_argmax(eng_session *a, eng_session *b, const int32_t *prompt, int n,
                           int steps, const char *what)
{
    eng_session_reset(a);
    eng_session_reset(b);
    CHECK(eng_session_argmax(a) == -ENODATA && eng_session_argmax(b) == -ENODATA);
    long am0 = last_split->n_argmax, flagged = 1;
    CHECK(eng_session_eval(a, prompt, n, ENG_EVAL_ARGMAX) == 0);
    CHECK(eng_session_eval(b, prompt, n, ENG_EVAL_ARGMAX) == 0);
    /* every third decode step asks for the logits: its graph ends
     * otherwise, and a replay of the other one would be wrong */
    unsigned flags = ENG_EVAL_ARGMAX;
    for (int t = 0;; t++) {
        int32_t tok = eng_session_argmax(a);
        CHECKF(tok >= 0 && tok == eng_session_argmax(b), "%s: step %d: argmax %d vs %d", what, t,
               tok, eng_session_argmax(b));
        CHECK(eng_session_logits(a, -1) && tok == argmax(eng_session_logits(a, -1)));
        if (flags)
            CHECKF(!eng_session_logits(b, -1), "%s: logits kept under ENG_EVAL_ARGMAX", what);
        else
            same_logits(a, b, -1, what);
        if (t == steps)
            break;
        flags = t % 3 == 1 ? 0 : ENG_EVAL_ARGMAX;
        flagged += flags != 0;
        CHECK(eng_session_eval(a, &tok, 1, flags) == 0);
        CHECK(eng_session_eval(b, &tok, 1, flags) == 0);
    }
    CHECKF(last_split->n_argmax - am0 == flagged, "%s: %ld argmax ops for %ld evals", what,
           last_split->n_argmax - am0, flagged);
    CHECK(eng_session_ffn_share(a) == eng_session_ffn_share(b));

    eng_session_reset(a);
    eng_session_reset(b);
    CHECK(eng_session_eval(a, prompt, n, ENG_EVAL_ALL_LOGITS | ENG_EVAL_ARGMAX) == 0);
    CHECK(eng_session_eval(b, prompt, n, ENG_EVAL_ALL_LOGITS | ENG_EVAL_ARGMAX) == 0);
    for (int i = 0; i < n; i++)
        same_logits(a, b, i, what);
    CHECK(eng_session_argmax(b) == argmax(eng_session_logits(b, n - 1)));
    CHECK(eng_session_argmax(a) == eng_session_argmax(b));
}

/* ENG_EVAL_CANDIDATES: the split backend brings back the last row's
 * candidates (eng_candidates of the CPU's logits, bit for bit) and keeps no
 * logits; the CPU offers none. Steps alternate between candidates, the
 * row and the argmax, whose graphs end differently: a replay of one for
 * another would bring back stale candidates or skip the op. */
static void compare_cands(eng_session *a, eng_session *b, const int32_t *prompt, int n, int steps,
                          const char *what)
{
    enum { K = 40 + 64 };
    CHECK(eng_session_set_candidates(a, K) == -ENOTSUP);
    CHECK(eng_session_set_candidates(b, 0) == -EINVAL);
    CHECK(eng_session_set_candidates(b, ENG_CAND_MAX + 1) == -EINVAL);
    CHECK(eng_session_set_candidates(b, K) == 0);
    const size_t m = eng_candidates_size(V, K);
    float *vals = malloc(m * sizeof(float));
    int32_t *ids = malloc(m * sizeof(int32_t));
    uint32_t *tmp = malloc(2 * ENG_CAND_CHUNK * sizeof(uint32_t));
    CHECK(vals && ids && tmp);
    eng_session_reset(a);
    eng_session_reset(b);
    const float *bv;
    const int32_t *bi;
    CHECK(eng_session_candidates(b, &bv, &bi) == -ENODATA);
    long cd0 = last_split->n_cands, asked = 0;
    static const unsigned rot[] = { ENG_EVAL_CANDIDATES, ENG_EVAL_CANDIDATES, 0, ENG_EVAL_ARGMAX,
                                    ENG_EVAL_CANDIDATES };
    unsigned flags = ENG_EVAL_CANDIDATES;
    CHECK(eng_session_eval(a, prompt, n, 0) == 0);
    CHECK(eng_session_eval(b, prompt, n, flags) == 0);
    for (int t = 0;; t++) {
        const float *la = eng_session_logits(a, -1);
        CHECK(la);
        const int32_t tok = argmax(la);
        if (flags == ENG_EVAL_CANDIDATES) {
            asked++;
            CHECK(eng_candidates(la, V, K, tmp, vals, ids) == 0);
            const long got = eng_session_candidates(b, &bv, &bi);
            CHECKF(got == (long)m && !memcmp(bv, vals, m * sizeof(float)) &&
                       !memcmp(bi, ids, m * sizeof(int32_t)),
                   "%s: step %d: candidates differ from the CPU logits'", what, t);
            CHECKF(!eng_session_logits(b, -1), "%s: logits kept with candidates", what);
        } else {
            CHECK(eng_session_candidates(b, &bv, &bi) == -ENODATA);
            if (flags == ENG_EVAL_ARGMAX)
                CHECK(eng_session_argmax(b) == tok);
            else
                same_logits(a, b, -1, what);
        }
        if (t == steps)
            break;
        flags = rot[t % 5];
        CHECK(eng_session_eval(a, &tok, 1, 0) == 0);
        CHECK(eng_session_eval(b, &tok, 1, flags) == 0);
    }
    CHECKF(last_split->n_cands - cd0 == asked, "%s: %ld top_cands ops for %ld evals", what,
           last_split->n_cands - cd0, asked);
    free(vals);
    free(ids);
    free(tmp);
}

/* eng_embed on both: the hidden states come back from backend memory (one
 * download per chunk), the same bits for both poolings and for one token
 * (no graph) */
static void same_embeddings(eng_session *a, eng_session *b, const int32_t *prompt, int n,
                            const char *what)
{
    eng_model_info info;
    eng_model_get_info(eng_session_model(a), &info);
    float *ea = malloc((size_t)info.n_embd * sizeof(float)), *eb = malloc((size_t)info.n_embd * sizeof(float));
    CHECK(ea && eb);
    for (int k = 0; ea && eb && k < 3; k++) {
        const int nk = k == 2 ? 1 : n;
        const eng_pooling pool = k == 1 ? ENG_POOL_LAST : ENG_POOL_MEAN;
        long d0 = last_split->n_down;
        CHECK(eng_embed(a, prompt, (size_t)nk, pool, k != 1, ea) == 0);
        CHECK(eng_embed(b, prompt, (size_t)nk, pool, k != 1, eb) == 0);
        CHECKF(memcmp(ea, eb, (size_t)info.n_embd * sizeof(float)) == 0 && isfinite(ea[0]),
               "%s: embedding %d differs", what, k);
        CHECKF(last_split->n_down > d0, "%s: no download for embedding %d", what, k);
    }
    free(ea);
    free(eb);
}

typedef struct sink {
    char text[4096];
    size_t len;
    int calls;
    size_t lens[256]; /* of each call: one per token */
} sink;

static int on_text(void *userdata, const char *text, size_t len)
{
    sink *k = userdata;
    CHECK(k->len + len < sizeof(k->text) && k->calls < 256);
    memcpy(k->text + k->len, text, len);
    k->len += len;
    k->lens[k->calls++] = len;
    return 0;
}

/* eng_generate on both: the same text, piece by piece. Plain greedy picks
 * on the backend: 4 bytes downloaded per eval (the prompt, then every
 * token that is not the last); a penalty (it only lowers logits) or top-k
 * brings back the candidates (eng_sampler_candidates' k per 4096 ids); a
 * temperature alone (no top-k) needs the logits, a row per eval. count:
 * the split model downloads nothing else (a dense one; a selective
 * prefill also brings back its votes). */
static void compare_generate(eng_session *a, eng_session *b, const int32_t *prompt, int n,
                             int steps, bool count, const char *what)
{
    static const struct {
        const char *name;
        float temperature, penalty;
        int top_k, cands; /* cands: the k of the candidates, 0: the row */
        bool greedy;
    } cases[] = {
        { "greedy", 0.0f, 1.0f, 0, 0, true },
        { "greedy, penalty 1.3", 0.0f, 1.3f, 0, 1 + 64, false },
        { "temperature 0.8", 0.8f, 1.0f, 0, 0, false },
        { "top-k 40, penalty 1.1", 0.8f, 1.1f, 40, 40 + 64, false },
    };
    for (size_t c = 0; c < sizeof(cases) / sizeof(cases[0]); c++) {
        eng_gen_params gp = eng_gen_params_default();
        gp.max_tokens = steps;
        gp.sampler.temperature = cases[c].temperature;
        gp.sampler.repeat_penalty = cases[c].penalty;
        gp.sampler.top_k = cases[c].top_k;
        gp.sampler.seed = 5;
        sink ka = { 0 }, kb = { 0 };
        eng_gen_stats sa, sb;
        CHECK(eng_generate(a, prompt, n, &gp, on_text, &ka, &sa) == 0);
        long down0 = last_split->n_down, am0 = last_split->n_argmax, cd0 = last_split->n_cands;
        size_t bytes0 = last_split->down_bytes;
        CHECK(eng_generate(b, prompt, n, &gp, on_text, &kb, &sb) == 0);
        long downs = last_split->n_down - down0, ams = last_split->n_argmax - am0,
             cds = last_split->n_cands - cd0;
        size_t bytes = last_split->down_bytes - bytes0;
        CHECKF(sa.n_generated == sb.n_generated && sa.stop_reason == sb.stop_reason &&
                   ka.calls == kb.calls && ka.len == kb.len &&
                   memcmp(ka.text, kb.text, ka.len) == 0 &&
                   memcmp(ka.lens, kb.lens, (size_t)ka.calls * sizeof(size_t)) == 0,
               "%s, %s: %d tokens (%s), %zu bytes of text on the CPU; %d (%s), %zu bytes on "
               "the split backend", what, cases[c].name, sa.n_generated,
               eng_stop_reason_name(sa.stop_reason), ka.len, sb.n_generated,
               eng_stop_reason_name(sb.stop_reason), kb.len);
        /* a selective tiny model may stop at once: EOS first */
        CHECK(sb.n_generated > 0 || sb.stop_reason == ENG_STOP_EOS);
        long evals = 1 + sb.n_generated - (sb.stop_reason == ENG_STOP_LENGTH);
        size_t per = cases[c].greedy ? sizeof(int32_t)
                     : cases[c].cands ? eng_candidates_size(V, cases[c].cands) * 8
                                      : (size_t)V * sizeof(float);
        CHECKF(ams == (cases[c].greedy ? evals : 0), "%s, %s: %ld argmax ops in %ld evals",
               what, cases[c].name, ams, evals);
        CHECKF(cds == (cases[c].cands ? evals : 0), "%s, %s: %ld top_cands ops in %ld evals",
               what, cases[c].name, cds, evals);
        if (count)
            CHECKF(downs == evals && bytes == (size_t)evals * per,
                   "%s, %s: %ld downloads of %zu bytes in all for %ld evals (want %zu each)",
                   what, cases[c].name, downs, bytes, evals, per);
    }
}

/* eng_session_argmax on the host (the CPU keeps its logits, written here
 * through the private session): NaN skipped, ties to the lower id, -EDOM
 * when every logit is NaN, -ENODATA when nothing was kept; and it is what
 * a greedy sampler picks, except that one takes 0 where all are NaN. */
static void argmax_rules(eng_session *a)
{
    eng_sampler *smp;
    eng_sampler_params p = eng_sampler_params_default();
    CHECK(eng_sampler_new(&p, V, &smp) == 0 && eng_sampler_is_greedy(smp));
    eng_session_reset(a);
    CHECK(eng_session_argmax(a) == -ENODATA);
    int32_t tok = 1;
    CHECK(eng_session_eval(a, &tok, 1, ENG_EVAL_ARGMAX) == 0);
    float *l = (float *)eng_session_logits(a, -1);
    CHECK(l && l == a->logits && eng_session_argmax(a) == argmax(l));
    struct {
        int i;
        float v;
        int32_t want;
    } steps[] = {
        { -1, NAN, -EDOM },            /* every logit NaN */
        { V - 1, -INFINITY, V - 1 },   /* -inf beats NaN */
        { 5, -1e30f, 5 },
        { 7, 2.0f, 7 },
        { 3, 2.0f, 3 },                /* a tie: the lower id */
        { 4, NAN, 3 },
        { 6, INFINITY, 6 },
        { 0, INFINITY, 0 },
    };
    for (size_t k = 0; k < sizeof(steps) / sizeof(steps[0]); k++) {
        if (steps[k].i < 0)
            for (int v = 0; v < V; v++)
                l[v] = steps[k].v;
        else
            l[steps[k].i] = steps[k].v;
        int32_t got = eng_session_argmax(a);
        CHECKF(got == steps[k].want, "argmax rule %zu: %d, want %d", k, got, steps[k].want);
        CHECK(eng_sampler_sample(smp, l) == (got < 0 ? 0 : got));
    }
    eng_session_reset(a);
    CHECK(eng_session_argmax(a) == -ENODATA);
    eng_sampler_free(smp);
}

/* Every logit NaN (the split backend's output head poisoned): greedy on the
 * backend finds no token (-EDOM), and eng_generate then picks token 0 as
 * eng_sampler_sample does on the logits (with a penalty, which leaves NaN
 * as it is). */
static void all_nan(eng_session *b, const int32_t *prompt, int n)
{
    last_split->nan_rows = V;
    CHECK(eng_session_eval(b, prompt, n, ENG_EVAL_ARGMAX) == 0);
    CHECK(eng_session_argmax(b) == -EDOM && !eng_session_logits(b, -1));
    CHECK(eng_session_eval(b, prompt, 1, ENG_EVAL_ARGMAX) == 0); /* a decode step */
    CHECK(eng_session_argmax(b) == -EDOM);
    sink k[2];
    eng_gen_stats st[2];
    memset(k, 0, sizeof(k));
    for (int c = 0; c < 2; c++) {
        eng_gen_params gp = eng_gen_params_default();
        gp.max_tokens = 3;
        gp.sampler.repeat_penalty = c ? 1.3f : 1.0f;
        CHECK(eng_generate(b, prompt, n, &gp, on_text, &k[c], &st[c]) == 0);
    }
    char piece[64];
    const eng_model *m = eng_session_model(b);
    int np = eng_token_to_piece(m, 0, false, piece, sizeof(piece));
    CHECK(np >= 0 && np < (int)sizeof(piece));
    CHECKF(st[0].n_generated == st[1].n_generated && st[0].stop_reason == st[1].stop_reason &&
               k[0].len == k[1].len && memcmp(k[0].text, k[1].text, k[0].len) == 0,
           "all NaN: %d tokens, %zu bytes greedy; %d, %zu with a penalty", st[0].n_generated,
           k[0].len, st[1].n_generated, k[1].len);
    /* token 0 each time (or at once the end, when 0 ends a generation) */
    CHECK(st[0].n_generated == (eng_token_is_eog(m, 0) ? 0 : 3));
    CHECK(eng_token_is_eog(m, 0) || (k[0].len == 3 * (size_t)np &&
                                            memcmp(k[0].text, piece, (size_t)np) == 0));
    last_split->nan_rows = 0;
}

static void prompt_of(int32_t *toks, int n, int seed)
{
    uint64_t x = 0x9e3779b97f4a7c15ull * (uint64_t)(seed + 1);
    for (int i = 0; i < n; i++) {
        x ^= x << 13, x ^= x >> 7, x ^= x << 17;
        toks[i] = (int32_t)(x % (uint64_t)V);
    }
}

/* ENG_PICK_TOKEN on the split backend: decode steps picking per token
 * (ffn_pick, in graphs), prompts and steps equal to the CPU's bit for bit. */
static void compare_pick(const char *path, const eng_load_plan_params *kp)
{
    eng_model *a = load(path, kp, false), *b = load(path, kp, true);
    eng_model_info info;
    eng_model_get_info(a, &info);
    V = info.n_vocab;
    NL = info.n_layer;
    eng_session *sa, *sb;
    CHECK(eng_session_new(a, NULL, &sa) == 0 && eng_session_new(b, NULL, &sb) == 0);
    eng_compute_params cp = eng_compute_params_default();
    cp.phi = 0.4f;
    cp.pick = ENG_PICK_TOKEN;
    CHECK(eng_session_set_compute(sa, &cp) == 0 && eng_session_set_compute(sb, &cp) == 0);
    int32_t toks[12];
    prompt_of(toks, 12, 40);
    const long pick0 = last_split->n_pick;
    compare(sa, sb, toks, 12, 6, "pick token");
    int picking = 0;
    for (int il = 0; il < NL; il++)
        picking += sb->pick_k[il] > 0;
    CHECKF(picking > 0 && last_split->n_pick - pick0 == 6L * picking,
           "%ld ffn_pick ops in 6 steps of %d picking layers", last_split->n_pick - pick0, picking);
    CHECK(eng_session_ffn_share(sb) < 0.9);
    printf("pick token   equal on the split backend: %ld ffn_pick ops in 6 steps, %d of %d layers "
           "picking, FFN share %.2f\n", last_split->n_pick - pick0, picking, NL,
           eng_session_ffn_share(sb));
    eng_session_free(sa);
    eng_session_free(sb);
    eng_model_free(a);
    eng_model_free(b);
}

static void run(const char *path, const char *name, int n_prompt, int steps)
{
    eng_model *a = load(path, NULL, false), *b = load(path, NULL, true);
    eng_model_info info;
    eng_model_get_info(a, &info);
    V = info.n_vocab;
    NL = info.n_layer;
    const int NF = info.n_ff;
    CHECK(strcmp(eng_backend_name(b), "split") == 0);
    CHECK(last_split && last_split->n_up > 0);

    int32_t *toks = malloc((size_t)n_prompt * sizeof(int32_t));
    CHECK(toks);
    eng_session *sa, *sb;
    CHECK(eng_session_new(a, NULL, &sa) == 0 && eng_session_new(b, NULL, &sb) == 0);
    /* a Q8_0 KV cache needs the backend's store_kv_q8 and attention_q8,
     * which the wrapper (as CUDA) does not offer */
    {
        eng_session_params kp = eng_session_params_default();
        kp.kv_type = ENG_KV_Q8_0;
        eng_session *sq = NULL;
        CHECK(eng_session_new(b, &kp, &sq) == -ENOTSUP && sq == NULL);
    }

    /* dense, and the profiling sums (activations come back to the host) */
    prompt_of(toks, n_prompt, 0);
    compare(sa, sb, toks, n_prompt, steps, "dense");
    compare_argmax(sa, sb, toks, n_prompt, steps, "dense");
    compare_generate(sa, sb, toks, n_prompt, steps, true, "dense");
    compare_cands(sa, sb, toks, n_prompt, steps, "dense");
    argmax_rules(sa);
    all_nan(sb, toks, n_prompt);
    same_embeddings(sa, sb, toks, n_prompt, "dense");
    {
        /* decode across position 256, where a graph's attention plan
         * doubles (another graph, the same key) */
        int32_t *lt = malloc(250 * sizeof(int32_t));
        CHECK(lt);
        prompt_of(lt, 250, 9);
        long r0 = last_split->n_replans;
        compare(sa, sb, lt, 250, 12, "across 256");
        CHECKF(last_split->n_replans - r0 == 1, "%ld graph plans changed across position 256",
               last_split->n_replans - r0);
        free(lt);
    }
    double *ua = calloc((size_t)NL * NF, sizeof(double)), *ub = calloc((size_t)NL * NF, sizeof(double));
    eng_profile *prof;
    CHECK(ua && ub && eng_profile_new(a, &prof) == 0);
    for (int task = 0; task < 2; task++)
        for (int p = 0; p < 3; p++) {
            prompt_of(toks, n_prompt, 10 + 3 * task + p);
            memset(ua, 0, (size_t)NL * NF * sizeof(double));
            memset(ub, 0, (size_t)NL * NF * sizeof(double));
            eng_session_reset(sa);
            eng_session_reset(sb);
            CHECK(eng_session_observe_ffn(sa, ua) == 0 && eng_session_observe_ffn(sb, ub) == 0);
            CHECK(eng_session_eval(sa, toks, n_prompt, 0) == 0);
            CHECK(eng_session_eval(sb, toks, n_prompt, 0) == 0);
            CHECK(eng_session_observe_ffn(sa, NULL) == 0 && eng_session_observe_ffn(sb, NULL) == 0);
            CHECK(memcmp(ua, ub, (size_t)NL * NF * sizeof(double)) == 0);
            CHECK(eng_profile_add_prompt(prof, task ? "u" : "t", ua, n_prompt) == 0);
        }
    eng_session_free(sa);
    eng_session_free(sb);
    eng_model_free(a);
    eng_model_free(b);

    /* selective loading and computation, then hot-swaps that shrink the
     * FFN (slots compacted by device copies) and grow it (new buffers) */
    eng_load_plan_params pp = eng_load_plan_params_default();
    pp.mode = ENG_SELECT_SELECTINFER;
    pp.profile = prof;
    pp.task = "t";
    pp.gamma = 0.7f;
    pp.delta = 0.3f;
    a = load(path, &pp, false);
    b = load(path, &pp, true);
    CHECK(eng_session_new(a, NULL, &sa) == 0 && eng_session_new(b, NULL, &sb) == 0);
    eng_compute_params cp = eng_compute_params_default();
    cp.phi = 0.4f;
    cp.alpha = 0.2f;
    CHECK(eng_session_set_compute(sa, &cp) == 0 && eng_session_set_compute(sb, &cp) == 0);
    prompt_of(toks, n_prompt, 1);
    long topk0 = last_split->n_topk, down0 = last_split->n_down;
    compare(sa, sb, toks, n_prompt, steps, "selectinfer");
    CHECK(eng_session_ffn_share(sa) < 0.5);
    /* the votes were counted where the activations are (downloads: every
     * layer's counts in one copy, the logits of the prompt and of each
     * step), or every layer's activations came home */
    {
        long n_sparse = 0;
        for (int il = 0; il < NL; il++)
            n_sparse += b->layers[il].sparse;
        long downs = last_split->n_down - down0;
        CHECK(dev_counts ? last_split->n_topk > topk0 : last_split->n_topk == 0);
        CHECKF(downs == (dev_counts ? 1 : NL) + 1 + steps,
               "%ld downloads in a selective prompt and %d steps, %ld sparse layers", downs,
               steps, n_sparse);
    }
    same_embeddings(sa, sb, toks, n_prompt, "selectinfer");
    /* every ranking, on sessions whose prefill comes in chunks of 5 (the
     * counts add up over calls; the signed rank's k is per chunk): abs and
     * signed counted by topk_count, contrib and mass downloaded */
    {
        eng_session_params sp = eng_session_params_default();
        sp.n_batch = 5;
        eng_session *ca, *cb;
        CHECK(eng_session_new(a, &sp, &ca) == 0 && eng_session_new(b, &sp, &cb) == 0);
        const eng_rank ranks[] = { ENG_RANK_ABS, ENG_RANK_SIGNED, ENG_RANK_CONTRIB,
                                   ENG_RANK_MASS };
        for (size_t i = 0; i < sizeof(ranks) / sizeof(ranks[0]); i++) {
            eng_compute_params rp = cp;
            rp.rank = ranks[i];
            rp.alpha = ranks[i] == ENG_RANK_SIGNED ? 0.3f : 0.2f;
            CHECK(eng_session_set_compute(ca, &rp) == 0 && eng_session_set_compute(cb, &rp) == 0);
            long topk1 = last_split->n_topk;
            char what[64];
            snprintf(what, sizeof(what), "rank %d in chunks of 5", (int)ranks[i]);
            prompt_of(toks, n_prompt, 20 + (int)i);
            /* a prefill cancelled after its first chunk, then the rest of
             * the prompt in a second eval: the votes of both add up */
            cancelled_prefill(ca, cb, toks, n_prompt);
            int done = eng_session_n_past(ca);
            CHECK(done == sp.n_batch && eng_session_n_past(cb) == done);
            CHECK(eng_session_eval(ca, toks + done, n_prompt - done, 0) == 0);
            CHECK(eng_session_eval(cb, toks + done, n_prompt - done, 0) == 0);
            same_selection(ca, cb, what);
            same_logits(ca, cb, -1, what);
            /* and one cancelled, then reset: its votes are forgotten */
            prompt_of(toks, n_prompt, 30 + (int)i);
            cancelled_prefill(ca, cb, toks, n_prompt);
            prompt_of(toks, n_prompt, 20 + (int)i);
            compare(ca, cb, toks, n_prompt, steps, what);
            bool counted = dev_counts && ranks[i] <= ENG_RANK_SIGNED;
            CHECKF(counted == (last_split->n_topk > topk1), "%s: topk_count %s", what,
                   counted ? "unused" : "used");
        }
        eng_session_free(ca);
        eng_session_free(cb);
    }

    struct {
        const char *task;
        float gamma;
    } swaps[] = { { "u", 0.5f }, { "t", 0.9f }, { "u", 0.7f } };
    for (size_t k = 0; k < sizeof(swaps) / sizeof(swaps[0]); k++) {
        pp.task = swaps[k].task;
        pp.gamma = swaps[k].gamma;
        eng_swap_stats st;
        eng_error err;
        long copies = last_split->n_copy;
        CHECKF(eng_model_swap(a, &pp, &st, &err) == 0, "%s", err.msg);
        CHECKF(eng_model_swap(b, &pp, &st, &err) == 0, "%s", err.msg);
        CHECK(st.neurons_in + st.neurons_out > 0);
        if (k < 2) /* a shrink compacts, a grow copies the staying slots */
            CHECK(last_split->n_copy > copies);
        char what[64];
        snprintf(what, sizeof(what), "after swap %zu to %s, gamma %.1f", k, pp.task, pp.gamma);
        prompt_of(toks, n_prompt, 2 + (int)k);
        compare(sa, sb, toks, n_prompt, steps, what);
    }
    compare_argmax(sa, sb, toks, n_prompt, steps, "selectinfer, swapped");
    compare_generate(sa, sb, toks, n_prompt, steps, false, "selectinfer, swapped");
    compare_cands(sa, sb, toks, n_prompt, steps, "selectinfer, swapped");
    /* mean compensation folds W_down on the host: refused off host memory */
    eng_compute_params comp = cp;
    comp.comp = ENG_COMP_MEAN;
    CHECK(eng_session_set_compute(sb, &comp) == -ENOTSUP);
    CHECK(eng_session_set_compute(sa, &comp) == 0);
    CHECK(eng_session_set_compute(sa, &cp) == 0);

    /* per-layer budgets by sensitivity with the first layer dense: uneven
     * slot counts per layer, swapped in */
    pp.layer_budget = ENG_BUDGET_SENS;
    pp.dense_first = 1;
    pp.gamma = 0.7f;
    pp.task = "t";
    {
        eng_error err;
        eng_swap_stats st;
        CHECKF(eng_model_swap(a, &pp, &st, &err) == 0, "%s", err.msg);
        CHECKF(eng_model_swap(b, &pp, &st, &err) == 0, "%s", err.msg);
        prompt_of(toks, n_prompt, 7);
        compare(sa, sb, toks, n_prompt, steps, "lb=sens df=1");
    }
    printf("%-12s equal on the split backend: %ld ops, %ld uploads, %ld downloads, %ld copies, "
           "%ld decode graphs recorded (%ld lost and reissued), %ld steps of a known key (%ld "
           "recorded again and found equal), %ld argmax, %ld top_cands, %ld prefetches (%ld of "
           "an FFN's slots), %ld norm_matmul3, %ld norm_ffn\n",
           name, last_split->n_ops, last_split->n_up, last_split->n_down, last_split->n_copy,
           last_split->n_graphs, last_split->n_graph_fails, last_split->n_replays,
           last_split->n_verified, last_split->n_argmax, last_split->n_cands,
           last_split->n_prefetch, last_split->n_prefetch_ffn, last_split->n_norm_matmul3,
           last_split->n_norm_ffn);
    CHECK(last_split->n_graphs > 0 && last_split->n_graph_fails > 0 &&
          last_split->n_replays > last_split->n_verified && last_split->n_verified > 0);
    eng_session_free(sa);
    eng_session_free(sb);
    eng_model_free(a);
    eng_model_free(b); /* checks nothing leaked */
    eng_profile_free(prof);
    free(ua);
    free(ub);
    free(toks);
}

int main(int argc, char **argv)
{
    setvbuf(stdout, NULL, _IOLBF, 0);
    if (argc != 2) {
        fprintf(stderr, "usage: test-backend-split SI_SYNTH\n");
        return 2;
    }
    /* ... and blocks without pre-norms (olmo3, exaone4), q's temperature
     * (ministral3, written with an original context of 14: crossed at 14
     * and 252 while decoding, where a graph must be recorded anew, and not
     * at 256, where the plan doubles), q/k norms after RoPE (hunyuan),
     * short convolutions whose decode step reads its position (lfm2) */
    const char *shapes[] = { "tiny", "tiny-qwen2", "tiny-qwen3", "tiny-llama3", "tiny-phi3-128k",
                             "tiny-gemma2", "tiny-gemma3", "tiny-olmo3", "tiny-exaone4",
                             "tiny-ministral3", "tiny-hunyuan", "tiny-lfm2" };
    for (size_t i = 0; i < sizeof(shapes) / sizeof(shapes[0]); i++) {
        char path[32];
        test_synth_args(argv[1], shapes[i], "f16",
                        strcmp(shapes[i], "tiny-ministral3") ? ""
                            : " --kv mistral3.rope.scaling.original_context_length=u32:14", path);
        guard = true;
        dev_counts = true;
        run(path, shapes[i], 12, 6);
        if (i == 0) {
            /* a plan with a neuron sketch (per-token picking) needs a backend
             * that offers ffn_pick: refused with a reason without it */
            eng_load_plan_params kp = eng_load_plan_params_default();
            kp.mode = ENG_SELECT_COREINFER;
            kp.sketch = true;
            eng_model_params mp = eng_model_params_default();
            mp.plan = &kp;
            eng_model *m = NULL;
            eng_error err;
            no_pick = true;
            CHECK(eng__model_load_backend(path, &mp, split_new(guard, dev_counts), &m, &err) ==
                      -ENOTSUP && !m);
            no_pick = false;
            CHECKF(strstr(err.msg, "per token"), "%s", err.msg);
            /* with it, the sketch is built on the "device" and each step
             * picks there: the CPU's logits bit for bit */
            compare_pick(path, &kp);
            /* a backend without topk_count: the activations come home */
            dev_counts = false;
            run(path, "tiny (no topk_count)", 12, 6);
            dev_counts = true;
        }
        unlink(path);
    }
    {
        /* experts on a backend without the moe op: refused with a reason */
        char path[32];
        test_synth(argv[1], "tiny-qwen3moe", path);
        eng_model *m = NULL;
        eng_error err;
        CHECK(eng__model_load_backend(path, NULL, split_new(guard, dev_counts), &m, &err) ==
                  -ENOTSUP && !m);
        CHECKF(strstr(err.msg, "mixture-of-experts"), "%s", err.msg);
        unlink(path);
        printf("tiny-qwen3moe refused where the backend has no moe op: %s\n", err.msg);
    }
    const char *dflt = test_model_path(), *use = getenv("SI_TEST_DEFAULT_MODEL");
    if (use && strcmp(use, "0") == 0) {
        /* the aarch64 run under qemu (scripts/test-aarch64.sh) */
        printf("default model: skipped (SI_TEST_DEFAULT_MODEL=0)\n");
    } else if (access(dflt, R_OK) == 0) {
        /* a real model's thousands of slot copies in a swap make the
         * guard's mprotect calls too slow: pointer checks and NaN only */
        guard = false;
        run(dflt, "smollm2-135m", 8, 3);
    }
    else
        printf("default model not found (%s): synthetic models only\n", dflt);
    return 0;
}
