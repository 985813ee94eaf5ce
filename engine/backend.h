/* Backend interface (private to the engine): memory and the ops of one
 * forward pass.
 *
 * The CPU backend (backend-cpu.c) is the reference every other backend is
 * checked against; the CUDA backend (backend-cuda.c) runs the same ops on a
 * GPU.
 *
 * Memory: every pointer an op takes (weights, KV cache, activations, token
 * ids, neuron selections) is BACKEND memory, from alloc(). The engine fills
 * it with upload()/upload_rows() and reads results back with download().
 * For the CPU backend, backend memory is host memory (host_memory true):
 * the loader converts weights straight into it and the copies are memcpy.
 * For a GPU it is device memory, and the host never dereferences it.
 *
 * Errors: ops queue work and return nothing. A backend that can fail (a GPU:
 * out of memory, a kernel fault) records the first failure; sync() waits for
 * the queued work and returns that error (0 when none) and error() its
 * message. The CPU backend never fails after alloc().
 *
 * Threads: ops and memory calls come from one thread at a time (not
 * necessarily the one that made the backend: the daemon loads on one thread
 * and serves on another), except upload() and upload_rows(), which the
 * loader calls from its conversion threads at once.
 *
 * Shapes are written [outer][inner], inner contiguous. Activations are f32;
 * weights are f16 or f32 (eng_dtype; a GPU backend takes f16 only), and
 * a matrix or an FFN's slots may be Q8_0 where dtypes says so: rows of
 * cols / 32 blocks of eng_q8_block; a matrix or an FFN's gate and up
 * rows may be Q4_K there: rows of cols / 256 eng_q4k_block (a Q4_K FFN's
 * down rows are Q8_0: eng_ffn_down_dtype); a matrix may be Q6_K or Q5_K
 * there: rows of cols / 256 eng_q6k_block or eng_q5k_block; a matrix or
 * an FFN's gate and up rows may be Q4_1 or Q4_0 there: rows of cols / 32
 * eng_q41_block or eng_q40_block (down rows Q8_0); the KV cache is f16.
 */
#ifndef ENGINE_BACKEND_H
#define ENGINE_BACKEND_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "engine.h"

/* ENG_DTYPE_Q8_0: x[i] = d * q[i] over a block of 32, as ggml's block_q8_0. */
typedef struct eng_q8_block {
    uint16_t d; /* f16 */
    int8_t q[32];
} eng_q8_block;
_Static_assert(sizeof(eng_q8_block) == 34, "a Q8_0 block is 34 bytes, as in the GGUF");

/* ENG_DTYPE_Q4_K: ggml's block_q4_K, 256 weights. Sub-block j (32
 * weights) is x[i] = d * sc_j * q[i] - dmin * m_j, sc_j and m_j 6-bit
 * (packed in scales[12] as ggml packs them), q 4-bit: the 64 weights of
 * sub-blocks 2p and 2p + 1 are the low and high nibbles of qs[32p ..
 * 32p + 32). */
#define ENG_Q4K_BLOCK_BYTES 144
typedef struct eng_q4k_block {
    uint16_t d, dmin; /* f16 */
    uint8_t scales[12];
    uint8_t qs[128];
} eng_q4k_block;
_Static_assert(sizeof(eng_q4k_block) == ENG_Q4K_BLOCK_BYTES, "a Q4_K block is 144 bytes");

/* Sub-block j's 6-bit scale and min from a Q4_K block's scales: pairs 0-3
 * in the low 6 bits of bytes 0-7, pairs 4-7 in bytes 8-11's nibbles with
 * the top 2 bits of bytes 0-7. */
static inline void eng_q4k_scale_min(const uint8_t *q, int j, uint8_t *sc, uint8_t *m)
{
    if (j < 4) {
        *sc = q[j] & 63;
        *m = q[j + 4] & 63;
    } else {
        *sc = (uint8_t)((q[j + 4] & 0x0f) | ((q[j - 4] >> 6) << 4));
        *m = (uint8_t)((q[j + 4] >> 4) | ((q[j] >> 6) << 4));
    }
}

/* ENG_DTYPE_Q6_K: ggml's block_q6_K, 256 weights. Weight i is d *
 * scales[i / 16] * (u - 32), u its 6-bit code: in half h (128 weights),
 * element e's low four bits are ql[64h + e % 64]'s low nibble for e < 64,
 * its high nibble for e >= 64, its top two bits qh[32h + e % 32]'s bits
 * 2 (e / 32) and up. */
#define ENG_Q6K_BLOCK_BYTES 210
typedef struct eng_q6k_block {
    uint8_t ql[128];
    uint8_t qh[64];
    int8_t scales[16];
    uint16_t d; /* f16 */
} eng_q6k_block;
_Static_assert(sizeof(eng_q6k_block) == ENG_Q6K_BLOCK_BYTES, "a Q6_K block is 210 bytes");

/* ENG_DTYPE_Q5_K: ggml's block_q5_K, 256 weights: eng_q4k_block's d,
 * dmin, scales and qs (at other offsets), each code with a fifth bit, 16:
 * weight l of sub-block j (l < 32) has bit j of qh[l]. */
#define ENG_Q5K_BLOCK_BYTES 176
typedef struct eng_q5k_block {
    uint16_t d, dmin; /* f16 */
    uint8_t scales[12];
    uint8_t qh[32];
    uint8_t qs[128];
} eng_q5k_block;
_Static_assert(sizeof(eng_q5k_block) == ENG_Q5K_BLOCK_BYTES, "a Q5_K block is 176 bytes");
_Static_assert(offsetof(eng_q5k_block, scales) == offsetof(eng_q4k_block, scales),
               "Q5_K's d, dmin and scales lie where Q4_K's do");

/* ENG_DTYPE_Q4_1: ggml's block_q4_1, 32 weights: weight i is d * q_i + m,
 * q_i the low nibble of qs[i] for i < 16, the high nibble of qs[i - 16]
 * past. */
typedef struct eng_q41_block {
    uint16_t d, m; /* f16 */
    uint8_t qs[16];
} eng_q41_block;
_Static_assert(sizeof(eng_q41_block) == 20 && offsetof(eng_q41_block, m) == 2,
               "a Q4_1 block is 20 bytes, its d and m first, as in the GGUF");

/* ENG_DTYPE_Q4_0: ggml's block_q4_0, 32 weights: weight i is d * (q_i -
 * 8), q_i as in Q4_1. */
typedef struct eng_q40_block {
    uint16_t d; /* f16 */
    uint8_t qs[16];
} eng_q40_block;
_Static_assert(sizeof(eng_q40_block) == 18, "a Q4_0 block is 18 bytes, as in the GGUF");

/* ENG_DTYPE_MXFP4: ggml's block_mxfp4, 32 weights: e (E8M0), then qs[16]
 * with code j in the low nibble of byte j and code j + 16 in its high
 * nibble; weight i is 2^(e - 128) * level(code_i), the levels the E2M1
 * values doubled: 0 1 2 3 4 6 8 12 and their negatives (codes 8-15). */
#define ENG_MXFP4_BLOCK_BYTES 17
typedef struct eng_mxfp4_block {
    uint8_t e;
    uint8_t qs[16];
} eng_mxfp4_block;
_Static_assert(sizeof(eng_mxfp4_block) == ENG_MXFP4_BLOCK_BYTES, "an MXFP4 block is 17 bytes");

/* MXFP4's doubled E2M1 levels by code, and its scale's half 2^(e - 128)
 * (ggml's kvalues_mxfp4 and ggml_e8m0_to_fp32_half: e 0 and 1 the float
 * denormals 2^-128 and 2^-127), which its weights are exactly */
static const int8_t eng_mxfp4_levels[16] = { 0, 1, 2, 3, 4, 6, 8, 12,
                                             0, -1, -2, -3, -4, -6, -8, -12 };
static inline float eng_e8m0_half(uint8_t e)
{
    const uint32_t bits = e < 2 ? 0x00200000u << e : (uint32_t)(e - 1) << 23;
    float f;
    memcpy(&f, &bits, sizeof(f));
    return f;
}

/* Bytes of n weights of type dt (n a multiple of 32 for Q8_0, Q4_1, Q4_0
 * and MXFP4, of 256 for Q4_K, Q5_K and Q6_K). */
static inline size_t eng_dtype_bytes(eng_dtype dt, size_t n)
{
    switch (dt) {
    case ENG_DTYPE_Q8_0: return n / 32 * sizeof(eng_q8_block);
    case ENG_DTYPE_Q4_K: return n / 256 * ENG_Q4K_BLOCK_BYTES;
    case ENG_DTYPE_Q6_K: return n / 256 * ENG_Q6K_BLOCK_BYTES;
    case ENG_DTYPE_Q5_K: return n / 256 * ENG_Q5K_BLOCK_BYTES;
    case ENG_DTYPE_Q4_1: return n / 32 * sizeof(eng_q41_block);
    case ENG_DTYPE_Q4_0: return n / 32 * sizeof(eng_q40_block);
    case ENG_DTYPE_MXFP4: return n / 32 * ENG_MXFP4_BLOCK_BYTES;
    case ENG_DTYPE_F32: return 4 * n;
    default: return 2 * n;
    }
}

/* The elements a row of type dt must be a whole number of (1: any). */
static inline long eng_dtype_block(eng_dtype dt)
{
    return dt == ENG_DTYPE_Q8_0 || dt == ENG_DTYPE_Q4_1 || dt == ENG_DTYPE_Q4_0 ||
                   dt == ENG_DTYPE_MXFP4                                          ? 32
           : dt == ENG_DTYPE_Q4_K || dt == ENG_DTYPE_Q5_K || dt == ENG_DTYPE_Q6_K ? 256
                                                                                  : 1;
}

/* An FFN slot of type dt: its gate and up rows in dt, its down row in
 * eng_ffn_down_dtype(dt), which is dt but for Q4_K, Q5_K, Q4_1 and Q4_0,
 * whose down rows are Q8_0: a down row is a column of the file's W_down,
 * requantized from blocks across the file's rows either way, and 8 bits
 * keep it within the file's rounding where 4 or 5 would add their own.
 * MXFP4 slots (experts) keep W_down as the file has it instead, its rows
 * (eng_ffn_weights), as many bytes. */
static inline eng_dtype eng_ffn_down_dtype(eng_dtype dt)
{
    return dt == ENG_DTYPE_Q4_K || dt == ENG_DTYPE_Q5_K || dt == ENG_DTYPE_Q4_1 ||
                   dt == ENG_DTYPE_Q4_0
               ? ENG_DTYPE_Q8_0
               : dt;
}

/* Bytes of a slot's gate (or up) row and of its down row, n_embd wide. */
static inline size_t eng_ffn_row_bytes(eng_dtype dt, long n_embd)
{
    return eng_dtype_bytes(dt, (size_t)n_embd);
}

static inline size_t eng_ffn_down_bytes(eng_dtype dt, long n_embd)
{
    return eng_dtype_bytes(eng_ffn_down_dtype(dt), (size_t)n_embd);
}

/* A neuron's resident bytes: the rows of its slot's gate_up (rows: 2, its
 * gate row and up row, or 1, an un-gated neuron's up row alone:
 * eng_ffn_rows below) and its down row. */
static inline size_t eng_ffn_slot_bytes(eng_dtype dt, long n_embd, int rows)
{
    return (size_t)rows * eng_ffn_row_bytes(dt, n_embd) + eng_ffn_down_bytes(dt, n_embd);
}

typedef struct eng_weight {
    eng_dtype dtype;
    int rows, cols; /* [rows][cols] */
    const void *data;
} eng_weight;

/* The FFN of one layer, stored neuron-major so that any subset of neurons
 * can be computed while reading only their weights. Slot s holds one neuron
 * (which one is the model's business): gate_up[s] = [gate row | up row],
 * down[s] = that neuron's column of W_down. Each of the three is a row of
 * n_embd values: gate and up in dtype (eng_ffn_row_bytes), down in
 * eng_ffn_down_dtype(dtype) (eng_ffn_down_bytes); n_embd a multiple of 32
 * for Q8_0, of 256 for Q4_K. An un-gated FFN (ENG_ACT_RELU_SQR) has no
 * gate rows: gate_up[s] = [up row], one row a slot (eng_ffn_rows). */
/* The FFN's gate activation: a = act(gate . x) * (up . x). */
typedef enum eng_act {
    ENG_ACT_SILU = 0, /* SwiGLU: silu(g) = g * sigmoid(g) (Llama, Qwen, Phi-3) */
    ENG_ACT_GELU,     /* GeGLU, GELU's tanh form (Gemma): g * sigmoid(1.5957691 (g + 0.044715 g^3)) */
    /* gpt-oss's: with g' = min(g, 7), a = g' sigmoid(1.702 g') (clamp(u, -7, 7) + 1);
     * its FFNs have biases too (eng_ffn_weights.bias) */
    ENG_ACT_SWIGLU_OAI,
    /* gemma3n's first layers: GeGLU of the gate's values above a cut, the
     * mean of the token's gate values plus eng_ffn_weights.cut standard
     * deviations (of every slot computed): gelu(max(g - cut, 0)) u, as
     * llama.cpp's gaussian top-k (about 5 % of the neurons pass) */
    ENG_ACT_GELU_TOPK,
    /* nemotron_h's un-gated squared ReLU, a = relu(u)^2: no gate rows, a
     * slot holds its up row and its down row (eng_ffn_rows 1). An op that
     * walks a slot as a (gate, up) pair may take the up row for both (up
     * offset 0: eng_ffn_up_offset): relu(g) u, the same row read again
     * from the cache, gives relu(u) u = relu(u)^2 (the CPU's decode walk
     * and packed prefill take each row once) */
    ENG_ACT_RELU_SQR,
} eng_act;

typedef struct eng_ffn_weights {
    eng_dtype dtype;
    int n_embd;
    int n_slots;
    const void *gate_up; /* [n_slots][eng_ffn_rows(w)][row] */
    const void *down;    /* [n_slots][row]; MXFP4: W_down's rows [n_embd][n_slots] (an
                          * expert's, as the file's; the ffn op takes every slot) */
    /* ENG_PICK_TOKEN's sketch, NULL when the plan keeps none: slot s's gate
     * row, then its up row, each Q4_0 regrouped (eng_sketch_row below). */
    const void *sketch;
    eng_act act;         /* every op below applies it where it says silu */
    /* [n_slots][2] slot s's gate and up biases, added to gate . x and up . x
     * before the activation (gpt-oss's experts), or NULL: none. The ffn op
     * takes them over every slot (sel NULL), the selective ops never. */
    const float *bias;
    float cut; /* ENG_ACT_GELU_TOPK's standard deviations */
} eng_ffn_weights;

/* Rows of a slot's gate_up under act: 2 (gate, up), 1 un-gated (up). */
static inline int eng_ffn_act_rows(eng_act act)
{
    return act == ENG_ACT_RELU_SQR ? 1 : 2;
}

static inline int eng_ffn_rows(const eng_ffn_weights *w)
{
    return eng_ffn_act_rows(w->act);
}

/* Bytes from a slot's first row (its gate row) to its up row, rows rs
 * bytes each: rs, or 0 un-gated (the one row is both). */
static inline size_t eng_ffn_up_offset(const eng_ffn_weights *w, size_t rs)
{
    return w->act == ENG_ACT_RELU_SQR ? 0 : rs;
}

/* A sketch row: n_embd (a multiple of 32) values in nb = n_embd / 32
 * blocks of 32, value (q - 8) * d with q a 4-bit code and d the block's f16
 * scale: Q4_0, with the nb scales first (so that a kernel converts eight at
 * once) and then the nb blocks of 16 code bytes (element j of a block in
 * byte j % 16, the low nibble for j < 16, as in Q4_0). */
#define ENG_SKETCH_BLOCK_BYTES 18
static inline size_t eng_sketch_slot_bytes(int n_embd)
{
    return (size_t)2 * (size_t)(n_embd / 32) * ENG_SKETCH_BLOCK_BYTES;
}

/* Q4_0 blocks (2-byte scale, 16 code bytes each) into a sketch row. */
static inline void eng_sketch_row(const uint8_t *q4_0, int nb, uint8_t *row)
{
    for (int b = 0; b < nb; b++) {
        row[2 * b] = q4_0[b * ENG_SKETCH_BLOCK_BYTES];
        row[2 * b + 1] = q4_0[b * ENG_SKETCH_BLOCK_BYTES + 1];
        for (int j = 0; j < 16; j++)
            row[2 * nb + 16 * b + j] = q4_0[b * ENG_SKETCH_BLOCK_BYTES + 2 + j];
    }
}

/* A mixture-of-experts FFN (Qwen3-MoE, Mixtral, OLMoE, Granite MoE): the
 * experts are runs of one eng_ffn_weights' slots, expert e's neurons in
 * slots [e * n_ff_exp, (e + 1) * n_ff_exp), and the router picks n_used of
 * them per token (backend moe below); a shared expert (Granite 4.0-H's,
 * Qwen2-MoE's), which every token computes, has the n_ff_shared slots
 * after them. */
typedef struct eng_moe {
    eng_weight router; /* [n_expert][n_embd], f32; data NULL: a dense FFN */
    int n_expert, n_used, n_ff_exp;
    bool sigmoid;      /* each expert's probability sigmoid(logit), not a softmax */
    const float *bias; /* [n_expert] added to the probabilities to pick by (not to
                        * weigh by; LFM2-MoE), or NULL */
    bool norm;         /* the picked experts' weights divided by their sum */
    float scale;       /* ... then times this (1: none) */
    int n_ff_shared;   /* the shared expert's neurons, 0: none */
    const float *shared_gate; /* [n_embd] its weight sigmoid(shared_gate . x), or
                               * NULL: 1 */
    const float *router_bias; /* [n_expert] added to the router's logits, or NULL */
    const float *down_bias;   /* [n_expert][n_embd] added to expert e's output, or
                               * NULL (gpt-oss's experts have both) */
} eng_moe;

/* Floats of scratch the moe op takes for n_tokens: the router's logits,
 * each token's picks (ids stored as int32 in float slots) and weights, and
 * one expert's inputs and outputs. */
static inline size_t eng_moe_work_floats(const eng_moe *moe, int n_tokens, int n_embd)
{
    return (size_t)n_tokens * ((size_t)moe->n_expert + 2 * (size_t)moe->n_used +
                               2 * (size_t)n_embd);
}

/* Mamba-2's mixer (the recurrent layers of Granite 4.0-H), or (delta) a
 * gated delta net (Qwen3.5's linear attention): weights and shapes for the
 * backend's ssm op. Its input projection's parts (z, the convolution's
 * input, dt or beta and alpha) and its output projection are ordinary
 * matrices of the layer; these are the rest, in f32 (backend memory). a
 * NULL: not such a layer. A delta net names its shapes as llama.cpp does:
 * d_state the width of a key head and of a value head, n_head its value
 * heads (d_inner / n_head = d_state), n_group its key heads. */
typedef struct eng_ssm {
    const float *conv;   /* [n_conv][d_conv] the convolution's taps, n_conv =
                          * d_inner + 2 n_group d_state (x, B and C; a
                          * delta net's q, k and v) */
    const float *conv_b; /* [n_conv] its bias, or NULL */
    const float *dt_b;   /* [n_head] added to dt (alpha) before the softplus */
    const float *a;      /* [n_head] A (negative: the state decays by exp(dt A)) */
    const float *d;      /* [n_head] the skip: y += D x (NULL in a delta net) */
    const float *norm;   /* [d_inner] the gated output's RMSNorm, per group of
                          * d_inner / n_group, or NULL; a delta net's [d_state],
                          * per value head */
    int d_inner, d_state, n_head, n_group, d_conv;
    float eps;
    bool delta;          /* a gated delta net */
} eng_ssm;

static inline int eng_ssm_conv_ch(const eng_ssm *w)
{
    return w->d_inner + 2 * w->n_group * w->d_state;
}

typedef struct eng_backend eng_backend;

/* A range of backend memory (prefetch below). */
typedef struct eng_span {
    const void *p;
    size_t bytes;
} eng_span;

/* The most spans one prefetch() takes (a layer's q, k and v). */
#define ENG_PREFETCH_SPANS 4

/* A decode step, for graph_begin() below. */
typedef struct eng_graph_step {
    uint64_t key;  /* same key: the same ops with the same arguments, but positions */
    int pos;       /* this step's position (pos0 of its ops) */
    int max_pos;   /* the largest position the graph serves (another: another graph) */
} eng_graph_step;

typedef struct eng_backend_iface {
    const char *name;
    void (*free)(eng_backend *be);

    /* ---- memory ---- */

    /* Backend memory is host memory: the engine may read and write it. */
    bool host_memory;
    /* Weights the backend takes: a mask of 1 << eng_dtype. */
    unsigned dtypes;
    /* bytes of backend memory, 64-byte aligned; -ENOMEM when it does not
     * fit (mem_info then says how much is free). Never records an error. */
    int (*alloc)(eng_backend *be, size_t bytes, void **ret);
    void (*mem_free)(eng_backend *be, void *p); /* NULL: no-op */
    /* Free and total backend memory in bytes; 0, 0 when the backend cannot
     * tell (host memory). */
    void (*mem_info)(eng_backend *be, size_t *ret_free, size_t *ret_total);
    /* host src -> backend dst. src may be reused once it returns. */
    void (*upload)(eng_backend *be, void *dst, const void *src, size_t bytes);
    /* Row rows[i] of the backend array dst <- row i of the packed host array
     * src, i < n, rows of row_bytes (selective loading and hot-swaps write
     * neuron slots this way). */
    void (*upload_rows)(eng_backend *be, void *dst, const int32_t *rows, const void *src, int n,
                        size_t row_bytes);
    /* backend src -> host dst, after the queued work; waits. */
    void (*download)(eng_backend *be, void *dst, const void *src, size_t bytes);
    /* backend -> backend, regions do not overlap. */
    void (*copy)(eng_backend *be, void *dst, const void *src, size_t bytes);
    /* Waits for the queued work; returns the first error recorded since the
     * last sync (and forgets it), 0 when none. */
    int (*sync)(eng_backend *be);
    /* One line about the last failure sync() returned, or alloc() met (a GPU
     * says "needs N bytes, M free"); "" when none. */
    const char *(*error)(eng_backend *be);

    /* ---- ops ---- */

    /* out[t][:] = row ids[t] of w, as f32. */
    void (*get_rows)(eng_backend *be, const eng_weight *w, const int32_t *ids, int n, float *out);

    /* y[t][r] = sum_k w[r][k] * x[t][k] (+ bias[r] when bias), t < n_tokens.
     * x [n_tokens][w->cols], y [n_tokens][w->rows]. */
    void (*matmul)(eng_backend *be, const eng_weight *w, const float *bias,
                   const float *x, float *y, int n_tokens);

    /* y[t] = x[t] / rms(x[t]) * weight; x [n_tokens][n]; y may equal x. */
    void (*rmsnorm)(eng_backend *be, const float *x, const float *weight, float *y,
                    int n_tokens, int n, float eps);

    /* Rotates x [n_tokens][n_heads][head_dim] in place; token t at position
     * pos0 + t. The first n_rot dims of each head rotate: pairs (2i, 2i+1)
     * (neox false, llama) or (i, i + n_rot/2) (neox true, qwen2). theta_i =
     * pos * freq_base^(-2i/n_rot) / freq_factors[i] (factors NULL: 1).
     * pos0 may be negative: a rotation back (eng_session_shift). */
    void (*rope)(eng_backend *be, float *x, int n_tokens, int n_heads, int head_dim,
                 int n_rot, int pos0, float freq_base, const float *freq_factors, bool neox);

    /* Causal grouped-query attention. q [n_tokens][n_head][head_dim];
     * k, v f16 caches [n_ctx][n_head_kv][head_dim] whose rows 0 .. pos0 +
     * n_tokens - 1 are filled; token t attends to rows 0 .. pos0 + t, or
     * with window > 0 (sliding-window layers) to the last window of them,
     * max(0, pos0 + t - window + 1) .. pos0 + t; head h uses kv head h /
     * (n_head / n_head_kv). out [n_tokens][n_head][head_dim]. A score is
     * scale * q.k, with softcap > 0 then softcap * tanh(score / softcap)
     * (Gemma 2), before the softmax. sinks [n_head] (gpt-oss), or NULL:
     * head h's softmax has one more term e^sinks[h] in its denominator,
     * a position no value comes from. */
    void (*attention)(eng_backend *be, const float *q, const uint16_t *k, const uint16_t *v,
                      float *out, int n_tokens, int pos0, int n_head, int n_head_kv,
                      int head_dim, float scale, int window, float softcap, const float *sinks);

    /* Gated FFN over a subset of slots (silu: w->act's activation):
     *   a[t][j] = silu(gate[s] . x[t]) * (up[s] . x[t]),  s = sel[j] (sel NULL: s = j)
     *   y[t]    = sum_j a[t][j] * down[s]
     * Reads only the weights of the selected slots. x, y [n_tokens][n_embd]
     * (y is overwritten); act, when not NULL, receives a [n_tokens][n_sel].
     * Un-gated slots (ENG_ACT_RELU_SQR): a = relu(up[s] . x)^2, and so in
     * every op below (ffn_runs' and ffn_top's runs of one kind). */
    void (*ffn)(eng_backend *be, const eng_ffn_weights *w, const int32_t *sel, int n_sel,
                const float *x, float *y, int n_tokens, float *act);

    /* y[i] += x[i] */
    void (*add)(eng_backend *be, float *y, const float *x, long n);

    /* x[i] *= f (Gemma's embeddings: by sqrt(n_embd)) */
    void (*scale)(eng_backend *be, float *x, float f, long n);

    /* x[i] = cap * tanh(x[i] / cap) (Gemma 2's logits), cap > 0 */
    void (*softcap)(eng_backend *be, float *x, float cap, long n);

    /* dst[i] = f16(src[i]) */
    void (*store_f16)(eng_backend *be, const float *src, uint16_t *dst, long n);

    /* KV cache store: rows pos0 .. pos0 + n_tokens - 1 of cache [][row] =
     * f16(src [n_tokens][row]). (store_f16 at cache + pos0 * row; its own op
     * so that a decode graph can take the row from the step's position.) */
    void (*store_kv)(eng_backend *be, const float *src, uint16_t *cache, long row, int pos0,
                     int n_tokens);

    /* ---- optional ops: NULL when the backend does not offer them ---- */

    /* LFM2's short convolution over n channels, len taps, token t at
     * position p = pos0 + t, whose row in cache [rows][n] (f32) is p % rows
     * (a ring; len - 1 + n_tokens <= rows): every token's row = b[t] *
     * x[t], then
     *   out[t][i] = c[t][i] * sum_k w[i][k] * row(p - len + 1 + k)[i],
     * k < len, positions below 0 reading as 0. b, c, x, out [n_tokens][n];
     * w [n][len] (backend memory). */
    void (*shortconv)(eng_backend *be, const float *b, const float *c, const float *x,
                      const float *w, int len, float *cache, int pos0, int rows, int n_tokens,
                      int n, float *out);

    /* A mixture-of-experts FFN over x [n_tokens][n_embd] into y (overwritten):
     * per token, p = softmax(router x + router_bias) (moe->sigmoid: sigmoid of each), the
     * n_used experts of largest p + bias (the lower index first among
     * equals), g_e = p_e (over the picked ones' sum where moe->norm) times
     * moe->scale, and
     *   y[t] = sum_e g_e * (ffn_e(x[t]) + down_bias[e]) + g_s * ffn_s(x[t])
     * with ffn_e the ffn op over expert e's slots of w, ffn_s over the
     * shared expert's (none where n_ff_shared is 0), g_s =
     * sigmoid(shared_gate . x[t]) or 1. The router reads xr [n_tokens][n_embd]
     * where it is not NULL (gemma4: another norm of the stream), else x.
     * work: backend memory of eng_moe_work_floats(moe, n_tokens, n_embd)
     * floats. */
    void (*moe)(eng_backend *be, const eng_ffn_weights *w, const eng_moe *moe, const float *x,
                const float *xr, float *y, int n_tokens, float *work);

    /* Mamba-2's mixer over n_tokens at positions pos0 + t, from the input
     * projection's parts z [n_tokens][d_inner], xbc [n_tokens][n_conv]
     * (overwritten) and dt [n_tokens][n_head]:
     *  - xbc's rows go to the convolution's ring (cache [rows][n_conv] f32,
     *    position p in row p % rows, d_conv - 1 + n_tokens <= rows, as
     *    shortconv's), then xbc[t] = silu(conv_b + sum_k conv[.][k] *
     *    row(p - d_conv + 1 + k)), positions below 0 reading as 0;
     *  - its parts x [d_inner] (n_head heads of hd = d_inner / n_head), B
     *    and C [n_group][d_state] (head h reads group h / (n_head /
     *    n_group)) advance the state [n_head][hd][d_state] (zeroed first
     *    where pos0 is 0): with s = softplus(dt + dt_b),
     *      state[h][i] = exp(s A[h]) state[h][i] + s x[h][i] B[g],
     *      y[h][i] = state[h][i] . C[g] + D[h] x[h][i];
     *  - out[t] = RMSNorm_groups(y silu(z)) * norm.
     * A delta net (w->delta) reads beta and alpha from dt [n_tokens][2
     * n_head], convolves as above (no bias), then per token t and value
     * head h, with key head g = h % n_group (llama.cpp's converter orders
     * the value heads so), q and k each of d_state scaled to unit length
     * (x / sqrt(|x|^2 + eps)), q times 1 / sqrt(d_state), b = sigmoid(
     * beta[h]), decay = exp(softplus(alpha[h] + dt_b[h]) A[h]) and the
     * state S [n_head][d_state rows of v][d_state columns of k]:
     *      S = decay S,  S += b (v - S k) k^T,  y = S q,
     *   out[t] = RMSNorm_head(y) * norm * silu(z).
     * The state and the ring are the session's (backend memory); snap
     * (NULL: none) receives a copy of the state as it stood after token
     * snap_t - 1, 1 <= snap_t <= n_tokens (a prompt cache's checkpoint). */
    void (*ssm)(eng_backend *be, const eng_ssm *w, const float *z, float *xbc, const float *dt,
                float *cache, int pos0, int rows, float *state, float *snap, int snap_t,
                int n_tokens, float *out);

    /* x[i] *= sigmoid(g[i]) for i < n: attention's output gate (qwen35).
     * Optional, as ssm. */
    void (*mul_sigmoid)(eng_backend *be, float *x, const float *g, long n);

    /* g[t][i] = gelu(g[t][i]) * x[t * x_stride + i] for t < n_tokens, i <
     * n (GELU's tanh form): gemma4's per-layer embedding gate, x a layer's
     * slice of each token's per-layer inputs. Optional, as ssm. */
    void (*gelu_mul)(eng_backend *be, float *g, const float *x, int n_tokens, int n,
                     long x_stride);

    /* A Q8_0 KV cache (ENG_KV_Q8_0): store_kv() into rows of row / 32
     * blocks, each block of 32 quantized as ggml's Q8_0 (d = max |x| / 127,
     * q = round(x / d)); attention() over such caches, head_dim a multiple
     * of 32 (a head's row is head_dim / 32 blocks). */
    void (*store_kv_q8)(eng_backend *be, const float *src, eng_q8_block *cache, long row,
                        int pos0, int n_tokens);
    void (*attention_q8)(eng_backend *be, const float *q, const eng_q8_block *k,
                         const eng_q8_block *v, float *out, int n_tokens, int pos0, int n_head,
                         int n_head_kv, int head_dim, float scale, int window, float softcap,
                         const float *sinks);

    /* rope() of q [n_tokens][n_head][head_dim] and of k [n_tokens]
     * [n_head_kv][head_dim], then store_kv() of k and of v into the caches
     * (row n_head_kv * head_dim): the forward pass's four ops in one call
     * (a GPU: one kernel). */
    void (*rope_store)(eng_backend *be, float *q, float *k, const float *v, int n_tokens,
                       int n_head, int n_head_kv, int head_dim, int n_rot, int pos0,
                       float freq_base, const float *freq_factors, bool neox, uint16_t *k_cache,
                       uint16_t *v_cache);

    /* add() then rmsnorm(): x[t] += y[t], then out[t] = x[t] / rms(x[t]) *
     * weight; x, y, out [n_tokens][n] (the residual add and the next norm
     * of the forward pass: a GPU runs one kernel instead of two). */
    void (*add_rmsnorm)(eng_backend *be, float *x, const float *y, const float *weight,
                        float *out, int n_tokens, int n, float eps);

    /* matmul() of three weights of the same cols on the same x, in one
     * call: y[i] = w[i] x (+ bias[i] when bias[i]), i < 3 (the forward
     * pass's q, k and v: a GPU runs one kernel for one token). */
    void (*matmul3)(eng_backend *be, const eng_weight *const w[3], const float *const bias[3],
                    const float *x, float *const y[3], int n_tokens);

    /* One token: add_rmsnorm() (res NULL: rmsnorm()) of x into xn, then
     * matmul3() of xn: x += res, xn = x / rms(x) * weight, y[i] = w[i] xn
     * (+ bias[i]), i < 3, the weights of one cols = n (the attention
     * block's norm and its q, k and v: a GPU may compute the norm inside
     * the GEMV's blocks, one kernel for the two). */
    void (*norm_matmul3)(eng_backend *be, float *x, const float *res, const float *weight,
                         float eps, float *xn, const eng_weight *const w[3],
                         const float *const bias[3], float *const y[3]);

    /* One token: add_rmsnorm() (res NULL: rmsnorm()) of x into xn, then
     * ffn() of xn over sel (no act): the FFN block's norm and the FFN, x
     * and xn of w->n_embd (a GPU may compute the norm inside the FFN's
     * first kernel). */
    void (*norm_ffn)(eng_backend *be, float *x, const float *res, const float *weight, float eps,
                     float *xn, const eng_ffn_weights *w, const int32_t *sel, int n_sel, float *y);

    /* SelectInfer's prefill vote (engine/topk.h has the rule): per token t
     * of act [n_tokens][n_sel], thr_t = the k-th largest rank value, rank
     * |a| (k = max(1, lround(alpha * n_sel))) or, with signed_rank, a (k =
     * max(1, lround(alpha * mean number of positive a per token over these
     * n_tokens))); then counts[j] += #{t : rank(a[t][j]) >= thr_t}. counts
     * (n_sel uint32) accumulates across calls; 0 < alpha <= 1. Exact: the
     * same counts on every backend. A GPU offers it so that the activations
     * of a selective prefill never leave the device. */
    void (*topk_count)(eng_backend *be, const float *act, int n_tokens, int n_sel, float alpha,
                       bool signed_rank, uint32_t *counts);

    /* ENG_PICK_TOKEN's decode FFN: per token t, every slot s gets the score
     *   |silu(g~_s . x~) * (u~_s . x~)|  (g~, u~: its rows in w->sketch; x~:
     *   x[t] rounded to 8 bits per block of 32, absmax scaled), and the FFN
     *   of ffn() runs over the k best slots (NaN below every number)
     *   (ties to the lower slot) for that token alone. k >= n_slots: all
     *   slots (no sketch read); k <= 0: y = 0. Reads the sketch and the
     *   weights of the k picked slots only. x, y [n_tokens][n_embd]. */
    void (*ffn_pick)(eng_backend *be, const eng_ffn_weights *w, int k, const float *x, float *y,
                     int n_tokens);
    /* ENG_PICK_EXACT's decode FFN over the slots 0 .. n_a - 1 of a, then
     * 0 .. n_b - 1 of b (b NULL when n_b is 0; as ffn_runs takes them), one
     * list of n = n_a + n_b: per token t, every slot s's activation
     *   a_s = act(g_s . x) * (u_s . x)  (its own gate and up rows)
     * and y = sum of a_s * d_s over the k slots of largest |a_s| (NaN below
     * every number, ties to the earlier in the list) for that token alone.
     * k >= n: ffn() over all; k <= 0: y = 0. Reads every slot's gate and up
     * rows and the down rows of the k picked. x, y [n_tokens][n_embd].
     * Optional: without it ENG_PICK_EXACT is refused. */
    void (*ffn_top)(eng_backend *be, const eng_ffn_weights *a, int n_a, const eng_ffn_weights *b,
                    int n_b, int k, const float *x, float *y, int n_tokens);
    /* (Re)builds w->sketch (backend memory, n_slots slots) from the slots'
     * gate and up rows, each quantized as Q4_0 (quants.c), and reserves
     * what ffn_pick needs for that many slots (so that no decode step
     * allocates). Offered together with ffn_pick; not while recording.
     * Un-gated slots have no sketch (nothing built; the loader refuses). */
    void (*build_sketch)(eng_backend *be, const eng_ffn_weights *w);

    /* ffn() of one token over two runs of slots, as one list: slots 0 ..
     * n_a - 1 of a, then 0 .. n_b - 1 of b (the same dtype and n_embd; no
     * sketch read). Decode over a layer's static slots and the session's
     * contiguous copy of its dynamic ones (select.c): a CPU reads two
     * streams where a sel list scatters the dynamic reads over the layer.
     * x, y [n_embd]. */
    void (*ffn_runs)(eng_backend *be, const eng_ffn_weights *a, int n_a,
                     const eng_ffn_weights *b, int n_b, const float *x, float *y);

    /* Greedy decoding: *ret (one int32) = the index of the largest of x[0..n),
     * NaN skipped, ties to the lower index, -1 when every value is NaN (or
     * n is 0). A GPU offers it so that a greedy step brings back 4 bytes, not
     * a row of logits; it may be issued inside a decode graph. The CPU does
     * not: its memory is the host's, and the engine reads the logits. */
    void (*argmax)(eng_backend *be, const float *x, int n, int32_t *ret);

    /* Sampling: the candidates of x[0..n) for k (engine.h eng_candidates,
     * the reference: per ENG_CAND_CHUNK ids the k best, ascending, padded
     * with id -1 and value 0) into vals and ids (eng_candidates_size(n, k)
     * entries each), bit for bit the host's. A GPU offers it so that a
     * sampled step brings back those instead of the row of logits, and the
     * host's sampler reads a few thousand values, not n; it may be issued
     * inside a decode graph. The CPU does not, as for argmax. */
    void (*top_cands)(eng_backend *be, const float *x, int n, int k, float *vals, int32_t *ids);

    /* A hint, for decode: the ops queued next read these weights, in this
     * order: the n spans (at most ENG_PREFETCH_SPANS), then, with ffn, the
     * gate and up rows of slots sel[0 .. n_sel) (sel NULL: 0 .. n_sel - 1;
     * else backend memory that no op of the step writes). A GPU starts
     * bringing as many of them as its cache holds into it while the ops
     * already queued run (short kernels that leave its memory idle), and
     * the ops that read them find them there. Changes no result; may be
     * issued inside a decode graph. The CPU does not offer it. */
    void (*prefetch)(eng_backend *be, const eng_span *spans, int n, const eng_ffn_weights *ffn,
                     const int32_t *sel, int n_sel);

    /* ---- optional: one launch per decode step (NULL: not offered) ---- */

    /* A decode step is hundreds of small ops; launching each one costs a
     * GPU more than running it on a small model.
     *
     * graph_begin(st) says which step comes: its key, its position, and the
     * largest position any step of that key may have. It returns
     *   1: a step recorded under st->key was run again at st->pos (one
     *      launch): the caller issues nothing;
     *   0: recording: the ops that follow are queued into a graph, not run,
     *      until graph_end(), which runs them with one launch and keeps them
     *      under st->key (0, or < 0 when nothing of them ran and nothing is
     *      recorded: issue the same ops again directly; an op may have
     *      failed while recording, run directly it fails again and sync()
     *      says why);
     *   < 0: not now, issue the ops directly.
     * While recording: one token, every op's pos0 is st->pos, KV rows are
     * written with store_kv, and no memory call comes (upload before,
     * download after). The backend may make the recorded ops read the
     * position when they run: so the caller must change the key whenever
     * anything else a step's ops take changes (pointers, sizes, selections,
     * biases), and only then; the contents of the buffers are read when
     * the ops run, as always. */
    int (*graph_begin)(eng_backend *be, const eng_graph_step *st);
    int (*graph_end)(eng_backend *be);
} eng_backend_iface;

struct eng_backend {
    const eng_backend_iface *iface;
    void *ctx;
};

/* CPU backend with its own thread pool; n_threads <= 0: online CPUs. */
int eng_backend_cpu_new(int n_threads, eng_backend **ret_backend);
int eng_backend_cpu_n_threads(const eng_backend *be);
/* The kernels in use: "avx2" or "scalar" (ENG_CPU_SIMD=0 forces scalar). */
const char *eng__backend_cpu_kernels(const eng_backend *be);
/* Whether a prefill's products with Q8_0, Q4_1, Q4_0, Q4_K and Q5_K rows
 * take x rounded to 8 bits per block of 32 (on, where the kernels have it:
 * AVX-512 VNNI) or in f32 (off, the default; Q6_K and the float types
 * always). -EINVAL: not a CPU backend. */
int eng_backend_cpu_set_prefill_q8(eng_backend *be, bool on);
/* Whether a prefill of dt rows runs in 8 bits now (for tests and tools). */
bool eng__backend_cpu_prefill_q8(const eng_backend *be, eng_dtype dt);

/* CUDA backend on GPU `device` (backend-cuda.c, built with -Dcuda). err
 * says why when it fails: -ENODEV no usable device or driver, -ENOTSUP built
 * without CUDA, -ENOENT or -ENOEXEC no module or another build's (below). */
int eng_backend_cuda_new(int device, eng_backend **ret_backend, eng_error *err);
/* Facts for reports: the GPU's name, whether it shares memory with the host
 * (Jetson), its nominal bandwidth in GB/s (0: unknown). */
int eng_backend_cuda_describe(const eng_backend *be, char *name, size_t name_size,
                              bool *integrated, double *peak_gbps);
/* Decode-graph counters of a CUDA backend (-EINVAL for another backend). */
int eng__backend_graph_stats(const eng_backend *be, eng_graph_stats *ret);

/* With CUDA the three above live in a module (backend-cuda.c and the
 * kernels as libselectinfer-cuda.so), which backend-cuda-dl.c opens when a
 * CUDA backend is first asked for: its one exported function gives them,
 * and abi, which must be this build's (the interface's and the FFN
 * weights' sizes, and a number raised when their meaning changes). */
#define ENG_CUDA_MODULE_ABI \
    ((unsigned)sizeof(eng_backend_iface) * 31u + (unsigned)sizeof(eng_ffn_weights) * 7u + \
     (unsigned)sizeof(eng_backend) + 2u)
typedef struct eng_cuda_module {
    unsigned abi;
    int (*backend_new)(int device, eng_backend **ret_backend, eng_error *err);
    int (*describe)(const eng_backend *be, char *name, size_t name_size, bool *integrated,
                    double *peak_gbps);
    int (*graph_stats)(const eng_backend *be, eng_graph_stats *ret);
} eng_cuda_module;

#endif
