/* CUDA backend: the ops of backend.h on one GPU, over the kernels of
 * kernels/si-cuda.h.
 *
 * Backend memory is device memory (host_memory false); weights are f16 only.
 * Every op queues kernels on the context's one stream and returns; errors
 * are recorded, never raised:
 *
 *   - the first failure wins: its code and si_cuda_last_error()'s message
 *     (statement, file, line, CUDA's words) are kept until sync() returns
 *     them, and error() gives the message afterwards;
 *   - after a failure the ops and copies do nothing until that sync(): their
 *     inputs may be garbage, and after a kernel fault the CUDA context is
 *     unusable anyway (CUDA's rule), so queuing more only buries the cause;
 *   - alloc() records nothing (the contract): its -ENOMEM message ("needs N
 *     bytes, M free") is what error() says until the next sync().
 *
 * Decode graphs (graph_begin/graph_end): the ops of a step are captured
 * into a CUDA graph and launched at once. While capturing, rope, the KV
 * stores and attention read the position from a device int (pos_dev,
 * written before each step) instead of taking it as an argument, and
 * attention splits the keys for the largest position: so the next step of
 * the same key is the same graph, and graph_begin just uploads the
 * position and launches it (no capture). Another key captures again and
 * updates the kept executable graph in place (si_cuda_graph_end_update) or
 * instantiates one. Any op issued outside a capture (a prefill) drops the
 * graph first, since it may have to grow the scratch the graph points
 * into. An op that fails while capturing records nothing: graph_end says
 * so and the engine runs the step directly, where the failure, if real, is
 * recorded. Three failed captures in a row, or ENG_CUDA_GRAPHS=0 at
 * creation, turn graphs off.
 *
 * Threads: the CUDA runtime keeps the current device per host thread, so
 * every entry point binds the context's device first (a daemon runs the
 * ops on another thread than the one that loaded the model). upload() and
 * upload_rows() come from several loader threads at once: they, and the
 * error record, are serialized by one mutex.
 */
#include "error.h"
#include "backend.h"

#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "si-cuda.h"

typedef struct cuda_ctx {
    eng_backend be;
    si_cuda *c;
    int device;
    pthread_mutex_t lock;   /* uploads, the error record, the row index */
    int err;                /* first failure since the last sync, 0 when none */
    char msg[512];          /* its message */
    char last[512];         /* what error() says: the last failure reported */
    int32_t *iota;          /* 0, 1, 2, ...: the packed source rows of upload_rows */
    int n_iota;
    /* decode graphs; used by the ops' thread only */
    bool graphs_off;
    bool capturing;         /* between graph_begin and graph_end */
    bool capture_failed;    /* an op failed while capturing: the capture is void */
    int failed_in_row;
    si_cuda_graph *graph;   /* the last recorded step's */
    eng_graph_step step;    /* its key and largest position; pos: the one being captured */
    int32_t *pos_dev;       /* the position the graph's ops read (device, one int) */
    eng_graph_stats gs;
    void *pick_work;        /* ffn_pick's scores, slot list and rounded token (device) */
    size_t pick_cap;
} cuda_ctx;

static inline cuda_ctx *ctx_of(eng_backend *be)
{
    return be->ctx;
}

/* Records a failure (first one wins); caller holds the lock. */
static void fail_locked(cuda_ctx *x, int code, const char *what)
{
    if (x->err)
        return;
    x->err = code < 0 ? code : -EIO;
    snprintf(x->msg, sizeof(x->msg), "%s", what && *what ? what : "CUDA error");
}

static void fail(cuda_ctx *x, int code, const char *what)
{
    pthread_mutex_lock(&x->lock);
    fail_locked(x, code, what);
    pthread_mutex_unlock(&x->lock);
}

/* The result r of an si_cuda call: a failure is recorded with the message
 * this thread's si_cuda_last_error() holds. Returns true when r is fine. */
static bool check(cuda_ctx *x, int r)
{
    if (r >= 0)
        return true;
    if (x->capturing)
        x->capture_failed = true; /* the direct rerun records it, if real */
    else
        fail(x, r, si_cuda_last_error());
    return false;
}

/* A memory call between graph_begin and graph_end breaks the contract (and
 * the capture): the engine has a bug, say so at sync(). */
static bool capturing_misuse(cuda_ctx *x, const char *what)
{
    if (!x->capturing)
        return false;
    x->capture_failed = true;
    char m[128];
    snprintf(m, sizeof(m), "%s while a decode graph is being captured", what);
    fail(x, -EINVAL, m);
    return true;
}

static void drop_graph(cuda_ctx *x)
{
    si_cuda_graph_free(x->graph);
    x->graph = NULL;
}

/* Whether an op may run: no failure pending, and the device bound. The
 * flag is read without the lock: ops come from one thread, and a racing
 * upload failure only means one more op queues before sync() reports it. */
static bool ready(cuda_ctx *x)
{
    if (__atomic_load_n(&x->err, __ATOMIC_RELAXED) || (x->capturing && x->capture_failed))
        return false;
    return check(x, si_cuda_bind(x->c));
}

/* ready() for an op: one outside a capture drops the kept graph first */
static bool op_ready(cuda_ctx *x)
{
    if (!x->capturing && x->graph)
        drop_graph(x);
    return ready(x);
}

/* ---- memory -------------------------------------------------------------- */

static int mem_alloc(eng_backend *be, size_t bytes, void **ret)
{
    cuda_ctx *x = ctx_of(be);
    if (!ret)
        return -EINVAL;
    if (capturing_misuse(x, "alloc"))
        return -EINVAL;
    int r = si_cuda_bind(x->c);
    void *p = NULL;
    if (r >= 0)
        r = si_cuda_alloc(x->c, bytes, &p);
    if (r < 0) {
        /* not a recorded error (alloc reports its own), but error() says why */
        pthread_mutex_lock(&x->lock);
        snprintf(x->last, sizeof(x->last), "%s", si_cuda_last_error());
        pthread_mutex_unlock(&x->lock);
        return r;
    }
    *ret = p;
    return 0;
}

static void mem_free(eng_backend *be, void *p)
{
    cuda_ctx *x = ctx_of(be);
    if (!p || capturing_misuse(x, "mem_free"))
        return;
    /* cudaFree on another device's pointer fails: bind first, and free even
     * after a failure (the memory is ours whatever happened). */
    (void)si_cuda_bind(x->c);
    si_cuda_dev_free(x->c, p);
}

static void mem_info(eng_backend *be, size_t *ret_free, size_t *ret_total)
{
    cuda_ctx *x = ctx_of(be);
    size_t f = 0, t = 0;
    if (si_cuda_bind(x->c) < 0 || si_cuda_mem_info(x->c, &f, &t) < 0)
        f = t = 0;
    if (ret_free)
        *ret_free = f;
    if (ret_total)
        *ret_total = t;
}

static void mem_upload(eng_backend *be, void *dst, const void *src, size_t bytes)
{
    cuda_ctx *x = ctx_of(be);
    if (capturing_misuse(x, "upload"))
        return;
    pthread_mutex_lock(&x->lock);
    if (!x->err) {
        int r = si_cuda_bind(x->c);
        if (r >= 0)
            r = si_cuda_upload(x->c, dst, src, bytes);
        if (r < 0)
            fail_locked(x, r, si_cuda_last_error());
    }
    pthread_mutex_unlock(&x->lock);
}

/* Packed source rows are 0 .. n-1: si_cuda_upload_rows takes them as an
 * index array, kept here and grown under the lock. */
static void mem_upload_rows(eng_backend *be, void *dst, const int32_t *rows, const void *src,
                            int n, size_t row_bytes)
{
    cuda_ctx *x = ctx_of(be);
    if (n <= 0 || capturing_misuse(x, "upload_rows"))
        return;
    pthread_mutex_lock(&x->lock);
    if (x->err)
        goto out;
    if (n > x->n_iota) {
        int32_t *p = realloc(x->iota, (size_t)n * sizeof(int32_t));
        if (!p) {
            fail_locked(x, -ENOMEM, "upload_rows: out of host memory for the row index");
            goto out;
        }
        for (int i = x->n_iota; i < n; i++)
            p[i] = i;
        x->iota = p;
        x->n_iota = n;
    }
    int r = si_cuda_bind(x->c);
    if (r >= 0)
        r = si_cuda_upload_rows(x->c, dst, rows, src, x->iota, n, row_bytes);
    if (r < 0)
        fail_locked(x, r, si_cuda_last_error());
out:
    pthread_mutex_unlock(&x->lock);
}

static void mem_download(eng_backend *be, void *dst, const void *src, size_t bytes)
{
    cuda_ctx *x = ctx_of(be);
    if (!bytes)
        return;
    if (!capturing_misuse(x, "download") && ready(x) && check(x, si_cuda_download(x->c, dst, src, bytes)) &&
        check(x, si_cuda_sync(x->c)))
        return;
    /* The caller learns of the failure at sync(); meanwhile it reads zeros,
     * not whatever the buffer held. */
    if (dst)
        memset(dst, 0, bytes);
}

static void mem_copy(eng_backend *be, void *dst, const void *src, size_t bytes)
{
    cuda_ctx *x = ctx_of(be);
    if (bytes && dst != src && !capturing_misuse(x, "copy") && ready(x))
        check(x, si_cuda_copy(x->c, dst, src, bytes));
}

static int mem_sync(eng_backend *be)
{
    cuda_ctx *x = ctx_of(be);
    if (capturing_misuse(x, "sync"))
        return -EINVAL;
    /* Wait even after a failure: queued work may still use host buffers. */
    int r = si_cuda_bind(x->c);
    if (r >= 0)
        r = si_cuda_sync(x->c);
    pthread_mutex_lock(&x->lock);
    if (r < 0)
        fail_locked(x, r, si_cuda_last_error());
    r = x->err;
    if (r) {
        memcpy(x->last, x->msg, sizeof(x->last));
        x->err = 0;
        x->msg[0] = 0;
    }
    pthread_mutex_unlock(&x->lock);
    return r;
}

static const char *mem_error(eng_backend *be)
{
    return ctx_of(be)->last;
}

/* ---- ops ------------------------------------------------------------------- */

static bool f16_only(cuda_ctx *x, eng_dtype dtype, const char *op)
{
    if (dtype == ENG_DTYPE_F16)
        return true;
    char m[128];
    snprintf(m, sizeof(m), "%s: the CUDA backend takes f16 weights only (got dtype %d)", op,
             (int)dtype);
    fail(x, -EINVAL, m);
    return false;
}

/* The kernels' view of an FFN's weights (f16: the caller checked). */
static si_cuda_ffn_weights ffn_of(const eng_ffn_weights *w)
{
    return (si_cuda_ffn_weights){ .n_embd = w->n_embd, .n_slots = w->n_slots, .gate_up = w->gate_up,
                                  .down = w->down, .gelu = w->act == ENG_ACT_GELU };
}

static void op_get_rows(eng_backend *be, const eng_weight *w, const int32_t *ids, int n,
                        float *out)
{
    cuda_ctx *x = ctx_of(be);
    if (!w || n <= 0 || !op_ready(x))
        return;
    /* the kernel reads f32 tables too; only f16 and f32 exist */
    if (w->dtype != ENG_DTYPE_F16 && w->dtype != ENG_DTYPE_F32) {
        f16_only(x, w->dtype, "get_rows");
        return;
    }
    check(x, si_cuda_get_rows(x->c, w->data, w->dtype == ENG_DTYPE_F16, w->rows, w->cols, ids, n,
                              out));
}

static void op_matmul(eng_backend *be, const eng_weight *w, const float *bias, const float *xs,
                      float *y, int n_tokens)
{
    cuda_ctx *x = ctx_of(be);
    if (!w || n_tokens <= 0 || !op_ready(x) || !f16_only(x, w->dtype, "matmul"))
        return;
    check(x, si_cuda_matmul(x->c, w->data, w->rows, w->cols, bias, xs, y, n_tokens));
}

/* matmul3's weights: f16, one width; their pointers and rows */
static bool weights3(cuda_ctx *x, const eng_weight *const w[3], const uint16_t *d[3], int rows[3],
                     const char *op)
{
    for (int i = 0; i < 3; i++) {
        if (!f16_only(x, w[i]->dtype, op))
            return false;
        if (w[i]->cols != w[0]->cols) {
            char m[96];
            snprintf(m, sizeof(m), "%s: weights of different widths", op);
            fail(x, -EINVAL, m);
            return false;
        }
        d[i] = w[i]->data;
        rows[i] = w[i]->rows;
    }
    return true;
}

static void op_matmul3(eng_backend *be, const eng_weight *const w[3], const float *const bias[3],
                       const float *xs, float *const y[3], int n_tokens)
{
    cuda_ctx *x = ctx_of(be);
    const uint16_t *d[3];
    int rows[3];
    if (n_tokens <= 0 || !op_ready(x) || !weights3(x, w, d, rows, "matmul3"))
        return;
    check(x, si_cuda_matmul3(x->c, d, rows, w[0]->cols, bias, xs, y, n_tokens));
}

/* The attention block's norm and q, k, v (kernels/gemv.cu): one kernel with
 * the "norm_fold" variant, the norm's and the GEMV's otherwise. */
static void op_norm_matmul3(eng_backend *be, float *xs, const float *res, const float *weight,
                            float eps, float *xn, const eng_weight *const w[3],
                            const float *const bias[3], float *const y[3])
{
    cuda_ctx *x = ctx_of(be);
    const uint16_t *d[3];
    int rows[3];
    if (!op_ready(x) || !weights3(x, w, d, rows, "norm_matmul3"))
        return;
    check(x, si_cuda_norm_gemv(x->c, xs, res, weight, eps, xn, d, rows, 3, w[0]->cols, bias, y));
}

/* The FFN block's norm and the FFN (kernels/ffn.cu): the norm inside
 * k_ffn_act with the "norm_fold" variant, its own kernel otherwise. */
static void op_norm_ffn(eng_backend *be, float *xs, const float *res, const float *weight, float eps,
                        float *xn, const eng_ffn_weights *w, const int32_t *sel, int n_sel, float *y)
{
    cuda_ctx *x = ctx_of(be);
    if (!w || !op_ready(x) || !f16_only(x, w->dtype, "norm_ffn"))
        return;
    const si_cuda_ffn_weights cw = ffn_of(w);
    check(x, si_cuda_norm_ffn(x->c, xs, res, weight, eps, xn, &cw, sel, n_sel, y));
}

static void op_rmsnorm(eng_backend *be, const float *xs, const float *weight, float *y,
                       int n_tokens, int n, float eps)
{
    cuda_ctx *x = ctx_of(be);
    if (n_tokens <= 0 || n <= 0 || !op_ready(x))
        return;
    check(x, si_cuda_rmsnorm(x->c, xs, weight, y, n_tokens, n, eps));
}

static void op_add_rmsnorm(eng_backend *be, float *xs, const float *res, const float *weight,
                           float *y, int n_tokens, int n, float eps)
{
    cuda_ctx *x = ctx_of(be);
    if (n_tokens <= 0 || n <= 0 || !op_ready(x))
        return;
    check(x, si_cuda_add_rmsnorm(x->c, xs, res, weight, y, n_tokens, n, eps));
}

/* While capturing, the ops that take a position read it from pos_dev.
 * They may only be those of the step graph_begin announced (backend.h):
 * anything else would be replayed at the wrong place, so it voids the
 * capture and is recorded as the engine's error. */
static bool at_step(cuda_ctx *x, int n_tokens, int pos0)
{
    if (!x->capturing)
        return false;
    if (n_tokens != 1 || pos0 != x->step.pos) {
        char m[128];
        snprintf(m, sizeof(m), "decode graph: an op at position %d+%d in the step at %d",
                 pos0, n_tokens, x->step.pos);
        fail(x, -EINVAL, m);
        x->capture_failed = true;
    }
    return true;
}

static void op_rope(eng_backend *be, float *xs, int n_tokens, int n_heads, int head_dim,
                    int n_rot, int pos0, float freq_base, const float *freq_factors, bool neox)
{
    cuda_ctx *x = ctx_of(be);
    if (n_tokens <= 0 || n_heads <= 0 || !op_ready(x))
        return;
    if (at_step(x, n_tokens, pos0))
        check(x, si_cuda_rope_at(x->c, xs, n_tokens, n_heads, head_dim, n_rot, x->pos_dev,
                                 freq_base, freq_factors, neox));
    else
        check(x, si_cuda_rope(x->c, xs, n_tokens, n_heads, head_dim, n_rot, pos0, freq_base,
                              freq_factors, neox));
}

static void op_rope_store(eng_backend *be, float *q, float *k, const float *v, int n_tokens,
                          int n_head, int n_head_kv, int head_dim, int n_rot, int pos0,
                          float freq_base, const float *freq_factors, bool neox,
                          uint16_t *k_cache, uint16_t *v_cache)
{
    cuda_ctx *x = ctx_of(be);
    if (n_tokens <= 0 || !op_ready(x))
        return;
    if (at_step(x, n_tokens, pos0))
        check(x, si_cuda_rope_store_at(x->c, q, k, v, n_tokens, n_head, n_head_kv, head_dim,
                                       n_rot, x->pos_dev, freq_base, freq_factors, neox,
                                       k_cache, v_cache));
    else
        check(x, si_cuda_rope_store(x->c, q, k, v, n_tokens, n_head, n_head_kv, head_dim, n_rot,
                                    pos0, freq_base, freq_factors, neox, k_cache, v_cache));
}

static void op_attention(eng_backend *be, const float *q, const uint16_t *k, const uint16_t *v,
                         float *out, int n_tokens, int pos0, int n_head, int n_head_kv,
                         int head_dim, float scale, int window, float softcap,
                         const float *sinks)
{
    cuda_ctx *x = ctx_of(be);
    if (n_tokens <= 0 || !op_ready(x))
        return;
    if (sinks) { /* (gpt-oss, which loads on the CPU only) */
        fail(x, -ENOTSUP, "attention: the CUDA backend has no attention sinks");
        return;
    }
    if (at_step(x, n_tokens, pos0))
        check(x, si_cuda_attention_at(x->c, q, k, v, out, x->pos_dev, x->step.max_pos, n_head,
                                      n_head_kv, head_dim, scale, window, softcap));
    else
        check(x, si_cuda_attention(x->c, q, k, v, out, n_tokens, pos0, n_head, n_head_kv,
                                   head_dim, scale, window, softcap));
}

static void op_ffn(eng_backend *be, const eng_ffn_weights *w, const int32_t *sel, int n_sel,
                   const float *xs, float *y, int n_tokens, float *act)
{
    cuda_ctx *x = ctx_of(be);
    if (!w || n_tokens <= 0 || !op_ready(x) || !f16_only(x, w->dtype, "ffn"))
        return;
    if (w->bias || w->act == ENG_ACT_SWIGLU_OAI) { /* (gpt-oss: the CPU only) */
        fail(x, -ENOTSUP, "ffn: the CUDA backend has no FFN biases or gpt-oss's activation");
        return;
    }
    const si_cuda_ffn_weights cw = ffn_of(w);
    check(x, si_cuda_ffn(x->c, &cw, sel, n_sel, xs, y, n_tokens, act));
}

static void op_add(eng_backend *be, float *y, const float *xs, long n)
{
    cuda_ctx *x = ctx_of(be);
    if (n <= 0 || !op_ready(x))
        return;
    check(x, si_cuda_add(x->c, y, xs, n));
}

static void op_scale(eng_backend *be, float *xs, float f, long n)
{
    cuda_ctx *x = ctx_of(be);
    if (n <= 0 || !op_ready(x))
        return;
    check(x, si_cuda_scale(x->c, xs, f, n));
}

static void op_softcap(eng_backend *be, float *xs, float cap, long n)
{
    cuda_ctx *x = ctx_of(be);
    if (n <= 0 || !op_ready(x))
        return;
    check(x, si_cuda_softcap(x->c, xs, cap, n));
}

static void op_store_f16(eng_backend *be, const float *src, uint16_t *dst, long n)
{
    cuda_ctx *x = ctx_of(be);
    if (n <= 0 || !op_ready(x))
        return;
    check(x, si_cuda_store_f16(x->c, src, dst, n));
}

static void op_store_kv(eng_backend *be, const float *src, uint16_t *cache, long row, int pos0,
                        int n_tokens)
{
    cuda_ctx *x = ctx_of(be);
    if (row <= 0 || n_tokens <= 0 || pos0 < 0 || !op_ready(x))
        return;
    if (at_step(x, n_tokens, pos0))
        check(x, si_cuda_store_rows_at(x->c, src, cache, row, x->pos_dev, n_tokens));
    else
        check(x, si_cuda_store_f16(x->c, src, cache + (size_t)pos0 * row, row * n_tokens));
}

static void op_shortconv(eng_backend *be, const float *b, const float *c, const float *xs,
                         const float *w, int len, float *cache, int pos0, int rows, int n_tokens,
                         int n, float *out)
{
    cuda_ctx *x = ctx_of(be);
    if (n_tokens <= 0 || n <= 0 || pos0 < 0 || len - 1 + n_tokens > rows || !op_ready(x))
        return;
    const int32_t *pos = at_step(x, n_tokens, pos0) ? x->pos_dev : NULL;
    /* a prefill longer than a grid's height: in parts, each after the
     * rows of the one before */
    for (int t = 0; t < n_tokens; t += 65535) {
        const int k = n_tokens - t < 65535 ? n_tokens - t : 65535;
        const size_t o = (size_t)t * n;
        check(x, si_cuda_shortconv(x->c, b + o, c + o, xs + o, w, len, cache, pos0 + t, rows, pos,
                                   k, n, out + o));
    }
}

/* ---- decode graphs -------------------------------------------------------- */

static int op_graph_begin(eng_backend *be, const eng_graph_step *st)
{
    cuda_ctx *x = ctx_of(be);
    if (!st || st->pos < 0 || st->pos > st->max_pos)
        return -EINVAL;
    if (x->graphs_off || x->capturing || !ready(x))
        return -EAGAIN;
    if (!x->pos_dev) {
        void *p = NULL;
        if (si_cuda_alloc(x->c, sizeof(int32_t), &p) < 0)
            return -EAGAIN; /* without graphs, then */
        x->pos_dev = p;
    }
    /* the position the step's ops read, queued before them (a pageable
     * source: the copy is staged at once, the int may go) */
    int32_t pos = st->pos;
    if (!check(x, si_cuda_upload(x->c, x->pos_dev, &pos, sizeof(pos))))
        return -EAGAIN;
    if (x->graph && x->step.key == st->key && x->step.max_pos == st->max_pos) {
        if (si_cuda_graph_launch(x->c, x->graph) < 0) {
            drop_graph(x);
            return -EAGAIN; /* nothing ran: the engine issues the ops */
        }
        x->gs.steps++;
        x->gs.replayed++;
        return 1;
    }
    if (si_cuda_graph_begin(x->c) < 0) {
        si_cuda_graph_abort(x->c);
        return -EAGAIN;
    }
    x->step = *st;
    x->capturing = true;
    x->capture_failed = false;
    return 0;
}

/* Nothing of the capture ran: the engine issues the step directly. */
static int capture_lost(cuda_ctx *x)
{
    drop_graph(x);
    x->gs.fallbacks++;
    if (++x->failed_in_row >= 3)
        x->graphs_off = true; /* not worth a capture per step any more */
    return -EAGAIN;
}

static int op_graph_end(eng_backend *be)
{
    cuda_ctx *x = ctx_of(be);
    if (!x->capturing)
        return -EINVAL;
    x->capturing = false;
    if (x->capture_failed || si_cuda_bind(x->c) < 0) {
        si_cuda_graph_abort(x->c);
        return capture_lost(x);
    }
    bool updated = false;
    if (si_cuda_graph_end_update(x->c, &x->graph, &updated) < 0 ||
        si_cuda_graph_launch(x->c, x->graph) < 0)
        return capture_lost(x);
    x->failed_in_row = 0;
    x->gs.steps++;
    if (!updated)
        x->gs.instantiated++;
    return 0;
}

/* The prefill vote on the device (kernels/select.cu): the activations stay
 * there, and only the counts come back, once per eval. */
static void op_topk_count(eng_backend *be, const float *act, int n_tokens, int n_sel, float alpha,
                          bool signed_rank, uint32_t *counts)
{
    cuda_ctx *x = ctx_of(be);
    if (n_tokens <= 0 || n_sel <= 0 || !op_ready(x))
        return;
    check(x, si_cuda_topk_count(x->c, act, n_tokens, n_sel, alpha, signed_rank, counts));
}

/* Greedy on the device (kernels/select.cu): a decode step ends with this
 * kernel inside its graph, and 4 bytes come back instead of the logits. */
static void op_argmax(eng_backend *be, const float *xs, int n, int32_t *ret)
{
    cuda_ctx *x = ctx_of(be);
    if (n < 0 || !op_ready(x))
        return;
    check(x, si_cuda_argmax(x->c, xs, n, ret));
}

/* Sampling's candidates on the device (kernels/select.cu): a sampled
 * decode step ends with this kernel inside its graph, and a few thousand
 * values come back instead of the logits. */
static void op_top_cands(eng_backend *be, const float *xs, int n, int k, float *vals, int32_t *ids)
{
    cuda_ctx *x = ctx_of(be);
    if (n <= 0 || !op_ready(x))
        return;
    check(x, si_cuda_top_cands(x->c, xs, n, ENG_CAND_CHUNK, k, vals, ids));
}

/* Decode's hints (kernels/elementwise.cu): the weights the next ops read
 * are brought into the GPU's L2 while the short kernels before them run;
 * nothing is launched unless the "l2_prefetch" variant says how much. */
static void op_prefetch(eng_backend *be, const eng_span *spans, int n, const eng_ffn_weights *w,
                        const int32_t *sel, int n_sel)
{
    cuda_ctx *x = ctx_of(be);
    if (n < 0 || n > ENG_PREFETCH_SPANS || !op_ready(x))
        return;
    const void *p[ENG_PREFETCH_SPANS];
    size_t bytes[ENG_PREFETCH_SPANS];
    for (int i = 0; i < n; i++)
        p[i] = spans[i].p, bytes[i] = spans[i].bytes;
    si_cuda_ffn_weights cw = { 0 };
    if (w) {
        if (!f16_only(x, w->dtype, "prefetch"))
            return;
        cw = ffn_of(w);
    }
    check(x, si_cuda_prefetch(x->c, p, bytes, n, w ? &cw : NULL, sel, w ? n_sel : 0));
}

/* ENG_PICK_TOKEN (kernels/select.cu): the sketch is built on the device
 * from the slots, the same bytes as the CPU's; the work buffer of ffn_pick
 * is reserved here, at load or swap, so that a decode graph never meets an
 * allocation. */
static void op_build_sketch(eng_backend *be, const eng_ffn_weights *w)
{
    cuda_ctx *x = ctx_of(be);
    if (!w || !w->sketch || capturing_misuse(x, "build_sketch") || !op_ready(x) ||
        !f16_only(x, w->dtype, "build_sketch"))
        return;
    size_t need = si_cuda_ffn_pick_work(w->n_slots, w->n_embd);
    if (need > x->pick_cap) {
        void *p = NULL;
        int r = si_cuda_alloc(x->c, need, &p);
        if (r < 0) {
            fail(x, r, si_cuda_last_error());
            return;
        }
        si_cuda_dev_free(x->c, x->pick_work); /* no graph holds it: op_ready dropped it */
        x->pick_work = p;
        x->pick_cap = need;
    }
    const si_cuda_ffn_weights cw = ffn_of(w);
    check(x, si_cuda_sketch_build(x->c, &cw, (uint8_t *)w->sketch));
}

static void op_ffn_pick(eng_backend *be, const eng_ffn_weights *w, int k, const float *xs,
                        float *y, int n_tokens)
{
    cuda_ctx *x = ctx_of(be);
    if (!w || n_tokens <= 0 || !op_ready(x) || !f16_only(x, w->dtype, "ffn_pick"))
        return;
    if (k > 0 && k < w->n_slots && w->sketch &&
        si_cuda_ffn_pick_work(w->n_slots, w->n_embd) > x->pick_cap) {
        fail(x, -EINVAL, "ffn_pick: no work buffer for this layer (build_sketch reserves it)");
        if (x->capturing)
            x->capture_failed = true;
        return;
    }
    const si_cuda_ffn_weights cw = ffn_of(w);
    check(x, si_cuda_ffn_pick(x->c, &cw, (const uint8_t *)w->sketch, k, xs, y, n_tokens,
                              x->pick_work));
}

/* ---- construction ------------------------------------------------------- */

static void op_free(eng_backend *be);

static const eng_backend_iface cuda_iface = {
    .name = "cuda",
    .free = op_free,
    .host_memory = false,
    .dtypes = 1u << ENG_DTYPE_F16,
    .alloc = mem_alloc,
    .mem_free = mem_free,
    .mem_info = mem_info,
    .upload = mem_upload,
    .upload_rows = mem_upload_rows,
    .download = mem_download,
    .copy = mem_copy,
    .sync = mem_sync,
    .error = mem_error,
    .get_rows = op_get_rows,
    .matmul = op_matmul,
    .matmul3 = op_matmul3,
    .add_rmsnorm = op_add_rmsnorm,
    .rope_store = op_rope_store,
    .rmsnorm = op_rmsnorm,
    .rope = op_rope,
    .attention = op_attention,
    .ffn = op_ffn,
    .scale = op_scale,
    .softcap = op_softcap,
    .add = op_add,
    .store_f16 = op_store_f16,
    .store_kv = op_store_kv,
    .shortconv = op_shortconv,
    .graph_begin = op_graph_begin,
    .graph_end = op_graph_end,
    .topk_count = op_topk_count,
    .argmax = op_argmax,
    .top_cands = op_top_cands,
    .prefetch = op_prefetch,
    .norm_matmul3 = op_norm_matmul3,
    .norm_ffn = op_norm_ffn,
    .ffn_pick = op_ffn_pick,
    .build_sketch = op_build_sketch,
};

static void op_free(eng_backend *be)
{
    if (!be)
        return;
    cuda_ctx *x = ctx_of(be);
    (void)si_cuda_bind(x->c);
    if (x->capturing)
        si_cuda_graph_abort(x->c);
    drop_graph(x);
    si_cuda_dev_free(x->c, x->pos_dev);
    si_cuda_dev_free(x->c, x->pick_work);
    si_cuda_free(x->c);
    pthread_mutex_destroy(&x->lock);
    free(x->iota);
    free(x);
}

/* spec: "name=value" pairs separated by commas (NULL or empty: none).
 * Fails at the first that does not parse or that si_cuda_set_variant
 * refuses, with the reason in why. */
static int set_variants(si_cuda *c, const char *spec, char *why, size_t why_size)
{
    while (spec && *spec) {
        const size_t len = strcspn(spec, ",");
        char item[64];
        char *eq = NULL, *num_end = NULL;
        long v = 0;
        if (len < sizeof(item)) {
            memcpy(item, spec, len);
            item[len] = 0;
            eq = strchr(item, '=');
        }
        if (eq) {
            *eq = 0;
            errno = 0;
            v = strtol(eq + 1, &num_end, 10);
        }
        if (!eq || eq[1] == 0 || *num_end || errno || v < INT_MIN || v > INT_MAX) {
            snprintf(why, why_size, "'%.*s' is not name=integer", (int)(len < 48 ? len : 48), spec);
            return -EINVAL;
        }
        int r = si_cuda_set_variant(c, item, (int)v);
        if (r < 0) {
            snprintf(why, why_size, "%s", si_cuda_last_error());
            return r;
        }
        spec += len;
        if (*spec == ',')
            spec++;
    }
    return 0;
}

int eng_backend_cuda_new(int device, eng_backend **ret_backend, eng_error *err)
{
    if (!ret_backend)
        return eng__set_err(err, -EINVAL, "eng_backend_cuda_new: ret_backend is NULL");
    int n = si_cuda_device_count();
    if (n <= 0)
        return eng__set_err(err, -ENODEV, "no usable CUDA device: %s", si_cuda_last_error());
    if (device < 0 || device >= n)
        return eng__set_err(err, -ENODEV, "no CUDA device %d: there %s %d", device,
                            n == 1 ? "is" : "are", n);
    cuda_ctx *x = calloc(1, sizeof(*x));
    if (!x)
        return eng__set_err(err, -ENOMEM, "CUDA device %d: out of host memory", device);
    int r = pthread_mutex_init(&x->lock, NULL);
    if (r != 0) {
        free(x);
        return eng__set_err(err, -r, "CUDA device %d: pthread_mutex_init failed", device);
    }
    r = si_cuda_new(device, &x->c);
    if (r < 0) {
        eng__set_err(err, r, "CUDA device %d: %s", device, si_cuda_last_error());
        pthread_mutex_destroy(&x->lock);
        free(x);
        return r;
    }
    x->device = device;
    const char *env = getenv("ENG_CUDA_GRAPHS");
    x->graphs_off = env && !strcmp(env, "0");
    /* ENG_CUDA_PDL=0: the decode kernels one after another, without
     * programmatic dependent launch (to measure what it gives) */
    env = getenv("ENG_CUDA_PDL");
    si_cuda_set_pdl(x->c, !(env && !strcmp(env, "0")));
    /* ENG_CUDA_VARIANTS=name=value[,name=value...]: kernel variants
     * (si_cuda_set_variant), to compare them through the whole engine */
    char why[160];
    r = set_variants(x->c, getenv("ENG_CUDA_VARIANTS"), why, sizeof(why));
    if (r < 0) {
        eng__set_err(err, r, "ENG_CUDA_VARIANTS: %s", why);
        si_cuda_free(x->c);
        pthread_mutex_destroy(&x->lock);
        free(x);
        return r;
    }
    x->be.iface = &cuda_iface;
    x->be.ctx = x;
    *ret_backend = &x->be;
    return 0;
}

int eng_backend_cuda_describe(const eng_backend *be, char *name, size_t name_size,
                              bool *integrated, double *peak_gbps)
{
    if (!be || be->iface != &cuda_iface)
        return -EINVAL;
    cuda_ctx *x = be->ctx;
    si_cuda_info in;
    int r = si_cuda_bind(x->c);
    if (r >= 0)
        r = si_cuda_get_info(x->c, &in);
    if (r < 0)
        return r;
    if (name && name_size)
        snprintf(name, name_size, "%s", in.name);
    if (integrated)
        *integrated = in.integrated;
    if (peak_gbps)
        *peak_gbps = in.peak_gbps;
    return 0;
}

int eng__backend_graph_stats(const eng_backend *be, eng_graph_stats *ret)
{
    if (!be || !ret || be->iface != &cuda_iface)
        return -EINVAL;
    const cuda_ctx *x = be->ctx;
    *ret = x->gs;
    ret->enabled = !x->graphs_off;
    return 0;
}

#ifdef ENG_CUDA_MODULE
/* The module's one exported symbol (backend-cuda-dl.c opens the module;
 * everything else in it is hidden) */
__attribute__((visibility("default"))) const eng_cuda_module *eng_cuda_module_entry(void);
const eng_cuda_module *eng_cuda_module_entry(void)
{
    static const eng_cuda_module m = { ENG_CUDA_MODULE_ABI, eng_backend_cuda_new,
                                       eng_backend_cuda_describe, eng__backend_graph_stats };
    return &m;
}
#endif
