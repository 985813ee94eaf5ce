/* CUDA kernels of the SelectInfer forward pass: a C API over device memory.
 *
 * Every op here mirrors one op of the backend interface (engine/backend.h)
 * with the same semantics, except that every pointer is a DEVICE pointer
 * (activations f32, weights and KV cache f16 as raw uint16_t bits) and the
 * work is queued on the context's stream: a call returns once the kernels
 * are launched, not when they finish (si_cuda_sync waits).
 *
 * Errors: every function returns 0 or a negative errno (-EINVAL bad
 * arguments, -ENOMEM out of device memory, -ENODEV no usable device, -EBUSY
 * scratch growth while a graph is alive, -EIO any other CUDA or cuBLAS
 * failure) and never aborts. The failing statement,
 * file and line, and CUDA's own message, are kept in a thread-local string
 * (si_cuda_last_error), like ggml's CUDA_CHECK but without the abort. After
 * an -EIO from a kernel fault the CUDA context is unusable (CUDA's rule);
 * free the context and create a new one.
 *
 * Threads: one si_cuda per thread at a time (it owns one stream and its
 * scratch). The scratch is shared by all ops of a context, which is safe
 * because they run in stream order: do not run ops of one context on two
 * streams at once. Ops that need scratch grow it with cudaMalloc, which
 * cannot happen during graph capture nor while a graph (which holds the
 * scratch's address) is alive: call si_cuda_reserve() with the largest
 * shapes before capturing (si_cuda_*_scratch() say how much each op needs),
 * or run the captured sequence once first. Growing then fails with -EBUSY.
 *
 * Usage:
 *     si_cuda *c;
 *     if (si_cuda_device_count() <= 0 || si_cuda_new(0, &c) < 0)
 *         ... CPU only (si_cuda_last_error() says why) ...
 *     uint16_t *w; float *x, *y;
 *     si_cuda_alloc(c, rows * cols * 2, (void **)&w);   (-ENOMEM: "needs N bytes, M free")
 *     si_cuda_upload(c, w, host_w, rows * cols * 2);
 *     si_cuda_gemv(c, w, rows, cols, x, NULL, y);
 *     si_cuda_sync(c);
 *     si_cuda_free(c);
 */
#ifndef SI_CUDA_H
#define SI_CUDA_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <cuda_runtime_api.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct si_cuda si_cuda;

typedef struct si_cuda_info {
    char name[256];
    int device;
    int cc_major, cc_minor;
    int n_sm;
    bool integrated;     /* cudaDevAttrIntegrated: shares memory with the host (Jetson) */
    size_t mem_total;    /* bytes */
    size_t mem_free;     /* bytes, at the time of the query */
    double peak_gbps;    /* memory bandwidth from bus width x clock (0 if unknown) */
} si_cuda_info;

/* Number of usable devices; 0 when there is no device or no driver (the
 * reason is in si_cuda_last_error), never negative. */
int si_cuda_device_count(void);

/* The thread's last error: "statement at file:line: CUDA message". */
const char *si_cuda_last_error(void);

/* ---- context ---------------------------------------------------------- */

int si_cuda_new(int device, si_cuda **ret);
void si_cuda_free(si_cuda *c); /* NULL: no-op; frees scratch, not the caller's buffers */

/* Device facts; mem_free is queried now (cudaMemGetInfo). */
int si_cuda_get_info(si_cuda *c, si_cuda_info *ret);
/* Programmatic dependent launch of the decode kernels (on by default
 * where the device has it, compute capability 9.0 and later): each may
 * start, and load its weights, while the kernel before it finishes. Off
 * launches them one after another as before (for comparison). Returns
 * whether it is on now. */
bool si_cuda_set_pdl(si_cuda *c, bool on);
/* Kernel variants, for benchmarks and tests that compare them in one run:
 * "ffn_act_unroll" 4 (default) or 8: the FFN decode's gate and up loads a
 * lane issues before it uses one (8 of each took 98 registers a thread, 2
 * blocks an SM on an H200; 4 of each 62, and a Llama-3.2-3B token 1.3 %
 * less time dense, 4.4 % less at phi 0.4). "ffn_decode": how a decode
 * FFN runs: 0 (default) a warp a slot for gate and up, then the down
 * kernel; 1 the gate and up rows as the rows of one GEMV (several warps a
 * row where the selection is short), the activation applied by the down
 * kernel; 2 one pass, a block a share of the slots computing their
 * activations and then reading their down rows whole, then a reduction.
 * 1 and 2 are not yet measured on a GPU. "ffn_fused_bps" 1 (default) or
 * 2: variant 2's blocks an SM at most. "attn_combine" 0 (default) or 1:
 * decode attention split over the keys combines its splits in the last
 * block of each KV head instead of a second kernel (the same bits; not yet
 * measured). "l2_prefetch" 0 (default) to 100: the share of the L2 cache
 * in percent that one si_cuda_prefetch brings in (0: it launches nothing;
 * not yet measured). "norm_fold" 0 (default) or 1: si_cuda_norm_gemv and
 * si_cuda_norm_ffn with the norm inside the next kernel (not yet
 * measured). -EINVAL for anything else. */
int si_cuda_set_variant(si_cuda *c, const char *name, int value);
/* Makes c's device the calling thread's current device. The CUDA runtime
 * keeps the current device per host thread (device 0 in a new thread), and
 * kernels launch on it: a thread other than the one that created c (a
 * daemon's inference thread, a loader's conversion thread) calls this
 * before its first op when c->device may not be 0. Cheap when already so. */
int si_cuda_bind(si_cuda *c);
/* Free and total device memory now (cudaMemGetInfo), in bytes. */
int si_cuda_mem_info(si_cuda *c, size_t *ret_free, size_t *ret_total);
cudaStream_t si_cuda_stream(const si_cuda *c);
/* Queue subsequent ops on `stream` (NULL: the context's own stream). The
 * caller keeps ownership of the stream and must outlive its use here. */
void si_cuda_set_stream(si_cuda *c, cudaStream_t stream);
int si_cuda_sync(si_cuda *c);

/* Device memory. si_cuda_alloc checks the free memory first and fails with
 * -ENOMEM and "needs N bytes, M free" in si_cuda_last_error. */
int si_cuda_alloc(si_cuda *c, size_t bytes, void **ret);
void si_cuda_dev_free(si_cuda *c, void *p); /* NULL: no-op */
/* Copies on the context's stream; host memory need not be pinned (then the
 * copy is synchronous with respect to the host buffer). */
int si_cuda_upload(si_cuda *c, void *dst, const void *src, size_t bytes);
int si_cuda_download(si_cuda *c, void *dst, const void *src, size_t bytes);
/* Device to device, on the context's stream; the regions must not overlap. */
int si_cuda_copy(si_cuda *c, void *dst, const void *src, size_t bytes);
/* Uploads rows of a neuron-major host array into a device array with the
 * same row size: dst row dst_rows[i] <- src row src_rows[i] (i < n). The
 * selective loader uploads only the loaded neurons this way, a hot-swap only
 * the changed ones. Consecutive runs on both sides become one copy. */
int si_cuda_upload_rows(si_cuda *c, void *dst, const int32_t *dst_rows, const void *src,
                        const int32_t *src_rows, int n, size_t row_bytes);

/* Scratch: grows to at least `bytes` now (not during graph capture). */
int si_cuda_reserve(si_cuda *c, size_t bytes);

/* ---- elementwise: get_rows, add, f16 stores ----------------------------- */

/* out[t][:] = row ids[t] of table [rows][cols] (f16 when f16, else f32), as
 * f32; ids out of range give zero rows. ids is a device array of n. */
int si_cuda_get_rows(si_cuda *c, const void *table, bool f16, int rows, int cols,
                     const int32_t *ids, int n, float *out);
/* y[i] += x[i] */
int si_cuda_add(si_cuda *c, float *y, const float *x, long n);
/* x[i] *= f */
int si_cuda_scale(si_cuda *c, float *x, float f, long n);
/* x[i] = cap * tanh(x[i] / cap), cap > 0 */
int si_cuda_softcap(si_cuda *c, float *x, float cap, long n);
/* dst[i] = f16(src[i]), round to nearest even */
int si_cuda_store_f16(si_cuda *c, const float *src, uint16_t *dst, long n);
/* Rows *pos_dev .. *pos_dev + n_rows - 1 of dst [][row] = f16(src
 * [n_rows][row]), the row read from device memory when the kernel runs (a
 * KV store in a decode graph replayed at every position). */
int si_cuda_store_rows_at(si_cuda *c, const float *src, uint16_t *dst, long row,
                          const int32_t *pos_dev, int n_rows);
/* LFM2's short convolution (engine/backend.h shortconv): the rows of
 * positions pos0 .. in the ring cache [rows][n] (position p at row p %
 * rows) = b * x, out = c * the len taps w [n][len] over the positions'
 * rows; pos0 read from *pos_dev when that is not NULL (a decode graph). */
int si_cuda_shortconv(si_cuda *c, const float *b, const float *cg, const float *x,
                      const float *w, int len, float *cache, int pos0, int rows,
                      const int32_t *pos_dev, int n_tokens, int n, float *out);
/* dst[i] = f32(src[i]) */
int si_cuda_to_f32(si_cuda *c, const uint16_t *src, float *dst, long n);

/* ---- normalization and rotary embedding -------------------------------- */

/* y[t] = x[t] / rms(x[t]) * weight (weight NULL: 1); y may equal x. */
int si_cuda_rmsnorm(si_cuda *c, const float *x, const float *weight, float *y, int n_tokens,
                    int n, float eps);
/* x[t] += res[t] (written back), then y[t] = rmsnorm(x[t]) * weight: the
 * backend's add then rmsnorm in one kernel. */
int si_cuda_add_rmsnorm(si_cuda *c, float *x, const float *res, const float *weight, float *y,
                        int n_tokens, int n, float eps);
/* In place on x [n_tokens][n_heads][head_dim], as the backend's rope:
 * neox false pairs (2i, 2i+1), true pairs (i, i + n_rot/2); freq_factors
 * (device, n_rot/2 floats) or NULL. */
int si_cuda_rope(si_cuda *c, float *x, int n_tokens, int n_heads, int head_dim, int n_rot,
                 int pos0, float freq_base, const float *freq_factors, bool neox);
/* The same, the position of token 0 read from pos_dev (device, one int32)
 * when the kernel runs. */
int si_cuda_rope_at(si_cuda *c, float *x, int n_tokens, int n_heads, int head_dim, int n_rot,
                    const int32_t *pos_dev, float freq_base, const float *freq_factors, bool neox);
/* The forward pass's rope(q), rope(k), then store of k and v in one kernel:
 * q [n_tokens][n_head][head_dim] and k [n_tokens][n_head_kv][head_dim]
 * rotated in place as si_cuda_rope does, then rows pos0 .. of the f16
 * caches [][n_head_kv * head_dim] = k and v. The _at form reads pos0 from
 * pos_dev (a decode graph). */
int si_cuda_rope_store(si_cuda *c, float *q, float *k, const float *v, int n_tokens, int n_head,
                       int n_head_kv, int head_dim, int n_rot, int pos0, float freq_base,
                       const float *freq_factors, bool neox, uint16_t *k_cache, uint16_t *v_cache);
int si_cuda_rope_store_at(si_cuda *c, float *q, float *k, const float *v, int n_tokens,
                          int n_head, int n_head_kv, int head_dim, int n_rot,
                          const int32_t *pos_dev, float freq_base, const float *freq_factors,
                          bool neox, uint16_t *k_cache, uint16_t *v_cache);

/* ---- matrix products ----------------------------------------------------- */

/* Decode GEMV: y[r] = w[r] . x (+ bias[r]), w f16 [rows][cols], x f32
 * [cols]. Hand-written, bandwidth bound. */
int si_cuda_gemv(si_cuda *c, const uint16_t *w, int rows, int cols, const float *x,
                 const float *bias, float *y);
/* y[t][r] = w[r] . x[t] (+ bias[r]) for t < n_tokens: the GEMV above for
 * one token, cuBLAS (GemmEx, f16 x f16 -> f32, f32 accumulate; x is rounded
 * to f16 in scratch) for more. */
int si_cuda_matmul(si_cuda *c, const uint16_t *w, int rows, int cols, const float *bias,
                   const float *x, float *y, int n_tokens);
size_t si_cuda_matmul_scratch(int rows, int cols, int n_tokens);
/* Three GEMVs of the same x in one launch: y[i] = w[i] x (+ bias[i]), w[i]
 * f16 [rows[i]][cols] (rows[i] 0: y[i] untouched; bias NULL or bias[i]
 * NULL: none). */
int si_cuda_gemv3(si_cuda *c, const uint16_t *const w[3], const int rows[3], int cols,
                  const float *x, const float *const bias[3], float *const y[3]);
/* si_cuda_matmul of three weights on the same x: one launch for one token
 * (si_cuda_gemv3), three matmuls for more. */
int si_cuda_matmul3(si_cuda *c, const uint16_t *const w[3], const int rows[3], int cols,
                    const float *const bias[3], const float *x, float *const y[3], int n_tokens);

/* ---- attention ------------------------------------------------------------ */

/* Causal grouped-query attention, as the backend's attention: q f32
 * [n_tokens][n_head][head_dim]; k, v f16 caches [n_ctx][n_head_kv][head_dim]
 * with rows 0 .. pos0 + n_tokens - 1 filled; out f32 like q. head_dim <= 256.
 * window > 0: a token sees only its last window positions; softcap > 0:
 * scores through softcap * tanh(score / softcap) (Gemma 2). Long contexts
 * are split over blocks (flash-decoding) and combined. */
int si_cuda_attention(si_cuda *c, const float *q, const uint16_t *k, const uint16_t *v,
                      float *out, int n_tokens, int pos0, int n_head, int n_head_kv,
                      int head_dim, float scale, int window, float softcap);
/* One token at the position read from pos_dev (device, one int32) when the
 * kernel runs, at most max_pos: the key range is split for max_pos, so one
 * launch (a decode graph) serves every position up to it. */
int si_cuda_attention_at(si_cuda *c, const float *q, const uint16_t *k, const uint16_t *v,
                         float *out, const int32_t *pos_dev, int max_pos, int n_head,
                         int n_head_kv, int head_dim, float scale, int window, float softcap);
size_t si_cuda_attention_scratch(int n_sm, int n_tokens, int pos0, int n_head, int head_dim);

/* ---- FFN over a subset of neuron slots ------------------------------------ */

/* Neuron-major FFN of one layer in device memory, f16 (see eng_ffn_weights). */
typedef struct si_cuda_ffn_weights {
    int n_embd;
    int n_slots;
    const uint16_t *gate_up; /* [n_slots][2][n_embd] */
    const uint16_t *down;    /* [n_slots][n_embd] */
    int gelu;                /* the gate's activation: 0 silu, 1 GELU (tanh form) */
} si_cuda_ffn_weights;

/* As the backend's ffn: a[t][j] = silu(gate[s].x[t]) * (up[s].x[t]) (GELU
 * with w->gelu), s =
 * sel[j] (sel NULL: j; out of range: a = 0), y[t] = sum_j a[t][j] down[s].
 * sel (device) has n_sel entries; act (device, [n_tokens][n_sel]) receives a
 * when not NULL. One token: hand-written kernels that read only the selected
 * slots; more: the selected slots are gathered in chunks and multiplied with
 * cuBLAS (x and a rounded to f16). */
int si_cuda_ffn(si_cuda *c, const si_cuda_ffn_weights *w, const int32_t *sel, int n_sel,
                const float *x, float *y, int n_tokens, float *act);
size_t si_cuda_ffn_scratch(int n_sm, const si_cuda_ffn_weights *w, int n_sel, int n_tokens);

/* Decode's norm and the GEMVs that read it (the engine's norm_matmul):
 * x += res (res NULL: no residual), xn = rmsnorm(x) * nw (nw NULL: 1),
 * then y[m] = w[m] xn (+ bias[m]) for the n_w (1-3) matrices w[m] of
 * rows[m] x cols, one token. By default si_cuda_add_rmsnorm (or
 * si_cuda_rmsnorm) then si_cuda_gemv3; with the "norm_fold" variant one
 * kernel, each of its blocks computing the norm itself (where cols % 8 ==
 * 0, cols <= 8192 and the pointers are 16-byte aligned). xn must not
 * overlap x or res. */
int si_cuda_norm_gemv(si_cuda *c, float *x, const float *res, const float *nw, float eps, float *xn,
                      const uint16_t *const *w, const int *rows, int n_w, int cols,
                      const float *const *bias, float *const *y);

/* Decode's FFN norm and the FFN (the engine's norm_ffn): x += res (res
 * NULL: none), xn = rmsnorm(x) * nw, then si_cuda_ffn of xn over sel (no
 * act), one token. By default the norm's kernel, then the FFN's; with
 * the "norm_fold" variant and the default "ffn_decode", the norm inside
 * k_ffn_act's blocks (where si_cuda_norm_gemv would fold it). xn must not
 * overlap x or res. */
int si_cuda_norm_ffn(si_cuda *c, float *x, const float *res, const float *nw, float eps, float *xn,
                     const si_cuda_ffn_weights *w, const int32_t *sel, int n_sel, float *y);

/* Decode's hint: the next kernels read the n (<= 4) ranges p[i] .. p[i] +
 * bytes[i] (weights: nothing a kernel of the step writes), then, with ffn,
 * the gate and up rows of slots sel[0 .. n_sel) (sel NULL: 0 .. n_sel - 1;
 * device memory no kernel of the step writes). On Hopper and later one small
 * kernel issues L2 prefetches of them, in that order, up to the
 * "l2_prefetch" share of the L2 (si_cuda_set_variant), and lets the next
 * kernel start at once (si_launch); it ends after the kernels before it, so
 * the ones after still see their writes. Earlier GPUs, or the variant at 0:
 * nothing. Changes no result. */
int si_cuda_prefetch(si_cuda *c, const void *const *p, const size_t *bytes, int n,
                     const si_cuda_ffn_weights *ffn, const int32_t *sel, int n_sel);

/* ---- selection and sampling on the device ---------------------------------- */

/* Dynamic-neuron counting at prefill (engine/topk.h, the backend's
 * topk_count op): for each token t of act [n_tokens][n_sel], the k-th
 * largest rank value thr_t (rank |a| when !signed_rank, with k = max(1,
 * lround(alpha * n_sel));
 * rank a when signed_rank, with k = max(1, lround(alpha * mean number of
 * positive a per token))), then counts[j] += #{t : rank(a[t][j]) >= thr_t}.
 * counts (device, n_sel uint32) accumulates across calls. Exact (radix
 * select on the float bits), deterministic (no float atomics). */
int si_cuda_topk_count(si_cuda *c, const float *act, int n_tokens, int n_sel, float alpha,
                       bool signed_rank, uint32_t *counts);
/* ENG_PICK_TOKEN's sketch of w's slots (engine/backend.h eng_sketch_row:
 * per row the Q4_0 scales, then the codes) into sketch (device, n_slots x
 * 2 x n_embd / 32 x 18 bytes), quantized exactly as the host's Q4_0
 * (quants.c): the same bytes as the CPU backend's. n_embd a multiple of 32. */
int si_cuda_sketch_build(si_cuda *c, const si_cuda_ffn_weights *w, uint8_t *sketch);
/* The backend's ffn_pick: per token, x rounded to 8 bits per block of 32 as
 * the CPU does, every slot scored |silu(g~ . x~) (u~ . x~)| from the sketch (w->gelu: GELU),
 * the k best (NaN lowest, ties to the lower slot) listed ascending, and
 * si_cuda_ffn over them. k >= n_slots: every slot; k <= 0: y = 0. work
 * (device, si_cuda_ffn_pick_work bytes) holds the scores, the list and the
 * rounded token: the caller keeps it, so a captured graph may point into it. */
int si_cuda_ffn_pick(si_cuda *c, const si_cuda_ffn_weights *w, const uint8_t *sketch, int k,
                     const float *x, float *y, int n_tokens, void *work);
size_t si_cuda_ffn_pick_work(int n_slots, int n_embd);
/* Greedy: *ret_id (device) = argmax of logits [n] (NaN skipped, ties to the
 * lower id, -1 when every value is NaN). */
int si_cuda_argmax(si_cuda *c, const float *logits, int n, int32_t *ret_id);
/* Sampling's candidates (engine.h eng_candidates, the host's rule, bit for
 * bit): for each chunk of `chunk` ids of logits [n], its k best (NaN
 * lowest, -0 == +0, ties to the lower id) ascending into vals/ids
 * (device, k entries a chunk), padded with id -1 and value 0. One block a
 * chunk; 1 <= k <= chunk <= 8192. */
int si_cuda_top_cands(si_cuda *c, const float *logits, int n, int chunk, int k, float *vals,
                      int32_t *ids);

/* ---- CUDA graphs ------------------------------------------------------------ */

/* Captures what the ops queue between begin and end into a graph that
 * si_cuda_graph_launch replays with one launch (decode: the whole token).
 * Buffers and arguments are baked in: replay reuses the same pointers.
 * Free every graph before its context. */
typedef struct si_cuda_graph si_cuda_graph;
int si_cuda_graph_begin(si_cuda *c);
int si_cuda_graph_end(si_cuda *c, si_cuda_graph **ret);
/* Ends a capture into *g: a new graph when *g is NULL, else *g is brought
 * up to the new capture in place. A decode step queues the same kernels in
 * the same order every time, only some arguments move (the position, the
 * KV row written): cudaGraphExecUpdate then patches the parameters, far
 * cheaper than instantiating. When the kernels differ (an attention split
 * appeared, another selection) *g is instantiated afresh. *ret_updated
 * (may be NULL) says which. On failure *g is freed and NULL, and nothing of
 * the capture runs. */
int si_cuda_graph_end_update(si_cuda *c, si_cuda_graph **g, bool *ret_updated);
/* Ends a capture whose ops failed (an op's error may have invalidated it):
 * nothing of it runs, the stream is usable again, CUDA's error is cleared. */
void si_cuda_graph_abort(si_cuda *c);
int si_cuda_graph_launch(si_cuda *c, si_cuda_graph *g);
/* The graph's dependency edges, and how many of them are programmatic
 * (si_cuda_set_pdl: the kernel after may start before the one before
 * ends), for benchmarks to show what a capture kept. */
int si_cuda_graph_edges(const si_cuda_graph *g, int *ret_edges, int *ret_programmatic);
void si_cuda_graph_free(si_cuda_graph *g);

#ifdef __cplusplus
}
#endif

#endif
