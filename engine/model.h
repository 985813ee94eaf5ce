/* The model object and the session (private to the engine).
 *
 * model.c loads a GGUF file into this shape and runs the forward pass;
 * selection code (profiles, loading plans, dynamic neurons) reads and fills
 * the FFN slot tables here.
 */
#ifndef ENGINE_MODEL_H
#define ENGINE_MODEL_H

#include <stdint.h>

#include "backend.h"
#include "chat.h"
#include "engine.h"
#include "select.h"
#include "vocab.h"

typedef enum eng_arch {
    ENG_ARCH_LLAMA = 0,
    ENG_ARCH_QWEN2,
    ENG_ARCH_QWEN3,
    ENG_ARCH_PHI3, /* fused attn_qkv and ffn_up (gate rows, then up rows) */
    ENG_ARCH_GEMMA,  /* Gemma 1: GeGLU, embeddings scaled by sqrt(n_embd) */
    ENG_ARCH_GEMMA2, /* GeGLU, norms after attention and FFN too, local/global layers,
                      * soft-capped scores and logits */
    ENG_ARCH_GEMMA3, /* as gemma2 with q/k norms, no soft-capping, 5 local layers to 1 */
    ENG_ARCH_SMOLLM3, /* llama's layers, every fourth without RoPE (NoPE) */
    ENG_ARCH_GRANITE, /* llama's layers, embeddings, residual branches, scores and logits
                       * scaled by the file's factors */
    ENG_ARCH_EXAONE,  /* EXAONE 3.x: llama's layers, NEOX RoPE */
    ENG_ARCH_MINICPM, /* granite's multipliers (defaults where absent), always RoPE */
    ENG_ARCH_OLMO2,   /* OLMo 2 and 3: norms after attention and FFN only, q/k norms over
                       * whole projections, NEOX RoPE; OLMo 3's local layers unscaled */
    ENG_ARCH_EXAONE4, /* EXAONE 4.0: olmo2's norms with per-head q/k norms; where it has
                       * local layers (32B), its global ones without RoPE */
    ENG_ARCH_MISTRAL3, /* Ministral 3: llama's layers, YaRN read from the file, q scaled
                        * by a temperature that grows with the position */
    ENG_ARCH_HUNYUAN,  /* Hunyuan dense: llama's layers, NEOX RoPE, per-head q/k norms
                        * after RoPE */
    ENG_ARCH_LFM2,     /* LFM2: short-convolution blocks in place of attention in most
                        * layers, qwen3's attention (NEOX) in the others */
    ENG_ARCH_OLMOE,    /* OLMoE: llama's pre-norms, olmo2's q/k norms over whole
                        * projections, NEOX RoPE, experts */
    ENG_ARCH_GEMMA4,   /* Gemma 4: gemma3's layers with wider heads in the global ones,
                        * v normalised, scores unscaled, the last layers reading
                        * earlier layers' caches, per-layer embeddings, a scale
                        * per layer; and Gemma 3n, its predecessor, with AltUp's
                        * streams, Laurel's branch and gated activations cut in
                        * its first layers (eng_model.n_altup) */
    ENG_ARCH_GLM4,     /* GLM-4 (0414), GLM-Z1: llama's pre-norms with gemma's norms after
                        * attention and FFN, q/k/v biases, consecutive RoPE pairs over
                        * part of each head, gate and up rows in one ffn_up (phi3's) */
    ENG_ARCH_GPT_OSS,  /* gpt-oss: llama's norms, biases on q, k, v and the output, a sink
                        * logit per head, every other layer local, NEOX RoPE under YaRN,
                        * experts with biases and their own activation */
} eng_arch;

typedef struct eng_layer {
    float *attn_norm;                 /* [n_embd]; NULL: the block reads x as it is */
    /* lfm2's short-convolution block in place of attention (else NULL):
     * wq, wk, wv are its input projection's three parts (b, c, x), wo its
     * output projection, conv its taps [n_embd][conv_len]; the cache row
     * of a position is its b * x in f32 (k_cache; no v_cache), in a ring
     * (eng_session.kv_rows), and window the conv_len positions a token
     * reads */
    float *conv;
    /* granitehybrid's Mamba-2 mixer in place of attention (ssm.a NULL:
     * none): wq, wk, wv its input projection's parts z, xBC and dt, wo its
     * output projection; the cache row of a position is its xBC in f32, in
     * a ring as a convolution block's, window the d_conv positions read.
     * qwen35's gated delta net (ssm.delta) likewise: wq its z, wk its
     * convolution's input (q, k, v), wv [beta; alpha] in f32 */
    eng_ssm ssm;
    /* falcon-h1's Mamba-2 mixer beside attention (data NULL: none), on the
     * same normalised x, its output added to attention's: ssm_in's parts
     * z, xBC and dt and its ssm_out, ssm its shapes, its convolution's
     * rows in eng_session.ring */
    eng_weight sz, sxbc, sdt, sout;
    int conv_ch;                      /* channels of a convolution ring's rows (lfm2:
                                       * n_embd; ssm: eng_ssm_conv_ch); 0: none */
    float *ffn_norm;                  /* [n_embd]; (olmo2, exaone4) */
    eng_weight wq, wk, wv, wo;        /* [n_head*hd][n_embd] ... [n_embd][n_head*hd] */
    eng_weight wg;                    /* qwen35: [n_head*hd][n_embd] attention's output
                                       * gate, out times sigmoid(wg x) before wo; data
                                       * NULL: none */
    float *bq, *bk, *bv;              /* qwen2 biases, NULL for llama */
    float *bo;                        /* gpt-oss: [n_embd] the attention output's bias */
    float *sinks;                     /* gpt-oss: [n_head] each head's sink logit (backend
                                       * attention's sinks), else NULL */
    float *q_norm, *k_norm;           /* qwen3, gemma3, exaone4: [head_dim] RMSNorm of
                                       * each head of q and k before RoPE; olmo2: of
                                       * the whole of q and k (qk_norm_full); else NULL */
    float *attn_post_norm;            /* gemma2/3, olmo2, exaone4: [n_embd] RMSNorm of the
                                       * attention's output before the residual add */
    float *ffn_post_norm;             /* the same for the FFN's output; else NULL */
    int head_dim, n_head_kv, n_rot;   /* this layer's attention: heads of head_dim, n_rot
                                       * of them rotating (gemma4's local and global
                                       * layers differ; else the model's) */
    int kv_src;                       /* the layer whose K/V cache it attends over: il,
                                       * or (gemma4's last layers, no wk/wv) an earlier
                                       * layer's of the same kind */
    bool v_norm;                      /* gemma4: each head of v RMS-normalised (no weight) */
    bool out_scaled;                  /* gemma4: x times out_scale after the layer */
    float out_scale;
    /* gemma4's per-layer embedding block after the FFN: x += norm(W_proj
     * (gelu(W_gate x) * the layer's slice of the token's per-layer input)) */
    eng_weight ple_gate, ple_proj;    /* [P][n_embd], [n_embd][P]; data NULL: none */
    float *ple_norm;                  /* [n_embd] */
    /* gemma3n (eng_model.n_altup): Laurel's low-rank branch beside
     * attention, norm(W_r W_l xn) + xn, and AltUp's mixing of the streams:
     * the router (f32) of a stream's norm (altup_router_norm) gives each
     * token its modalities m = tanh(W m_in / n_embd), the prediction's
     * coefficients [NA * NA][NA] times m and the correction's [NA][NA] */
    eng_weight laurel_l, laurel_r;    /* [rank][n_embd], [n_embd][rank]; data NULL: none */
    float *laurel_norm;               /* [n_embd] */
    eng_weight altup_router;          /* [NA][n_embd] */
    float *altup_router_norm;         /* [n_embd] */
    const float *altup_pred;          /* [NA * NA][NA] */
    const float *altup_corr;          /* [NA][NA] */
    float *altup_scale;               /* [n_embd] the corrected active stream's scale */
    float attn_scale;                 /* scores times this (olmo2's local layers: without
                                       * YaRN's mscale; else the model's) */
    float rope_base;                  /* this layer's RoPE base and divisors (NULL: */
    const float *rope_freqs;          /* none): gemma3's local layers differ */
    int window;                       /* attention over the last window positions
                                       * (gemma's local layers), 0: all */
    bool nope;                        /* no RoPE: keys and queries keep their
                                       * positions out (smollm3's every fourth layer) */
    /* nemotron_h: each layer one block, its residual added alone: an MLP
     * (mlp_only: no attention nor mixer, the FFN's norm the file's
     * attn_norm), or attention or a Mamba-2 mixer without an FFN (no_ffn:
     * ffn has no slots and the FFN block is skipped) */
    bool mlp_only, no_ffn;
    eng_ffn_weights ffn;              /* neuron-major, n_slots loaded neurons */
    eng_moe moe;                      /* experts: runs of ffn's slots and their router
                                       * (router.data NULL: a dense FFN) */
    /* gemma4's experts (26B-A4B) beside a dense MLP of their own inputs:
     * the MLP is mlp, a view of the shared expert's slots after the
     * experts' (moe.n_ff_shared 0: the moe op leaves it), over ffn_norm's
     * x and normalised by mlp_post_norm; the experts read moe_norm's x,
     * the router x's plain norm times router_norm, and their sum is
     * normalised by moe_post_norm; ffn_post_norm then takes both's sum */
    eng_ffn_weights mlp;
    float *mlp_post_norm, *moe_norm, *moe_post_norm, *router_norm; /* [n_embd]; NULL: none */
    int32_t *neuron_of_slot;          /* [ffn.n_slots]: the neuron each slot holds */
    uint8_t *slot_static;             /* [ffn.n_slots]: 1 for static (base) neurons */
    int n_static;
    int slot_cap;                     /* slots the buffers hold */
    bool sparse;                      /* inside the sparsified range */
    int sketch_cap;                   /* slots ffn.sketch holds (0: no sketch) */
} eng_layer;

struct eng_model {
    eng_arch arch;
    eng_model_info info;
    int n_rot;
    float rope_freq_base;
    float rms_eps;
    bool rope_neox;
    int n_swa;                        /* sliding-window attention span, 0: none; phi3:
                                       * a session's context is kept within it; gemma:
                                       * the local layers' window */
    uint8_t *swa_local;               /* [n_layer] 1: a local layer (window n_swa), as
                                       * the file's pattern or the family's says */
    float rope_base_swa;              /* gemma: the local layers' RoPE base */
    float *rope_freqs;                /* [n_rot/2] divisors, NULL when absent */
    float rope_linear;                /* RoPE scaling factor (1: none): positions / this */
    bool rope_yarn;                   /* ... not linearly but by YaRN's ramp (yarn_*) */
    float yarn_ext, yarn_beta_fast, yarn_beta_slow;
    float *rope_freqs_scaled;         /* [n_rot/2] rope_freqs with the scaling, or NULL */
    /* LongRoPE (Phi-3 128k, Phi-3.5): divisors for contexts up to n_ctx_orig
     * (short) and beyond (long), chosen per session; NULL when absent */
    float *rope_short, *rope_long;
    int n_ctx_orig;
    float attn_scale;                 /* scores times this: 1/sqrt(head_dim) mostly */
    float q_rot_scale;                /* partial rotation's mscale^2, in q's rotated dims (1: none) */
    float embd_scale;                 /* token embeddings times this (gemma sqrt(n_embd)), 0: 1 */
    float attn_softcap;               /* gemma2: scores through c * tanh(s / c); 0: none */
    float final_softcap;              /* gemma2: the same for the logits */
    float residual_scale;             /* granite: attention's and FFN's outputs times
                                       * this before they join x; 0: 1 */
    float logit_scale;                /* granite: logits divided by this; 0: 1 */
    float attn_temp_scale;            /* mistral3: q times 1 + this ln(floor(pos / floor)
                                       * + 1), floor attn_temp_floor; 0: none */
    int attn_temp_floor;
    bool qk_norm_after_rope;          /* hunyuan: q/k norms follow RoPE, not precede it */
    bool qk_norm_full;                /* olmo2: q/k norms over rows of H*hd / Hkv*hd */
    bool attn_gate;                   /* qwen35: attention's output gated (eng_layer.wg) */
    int nope_step;                    /* layer il has no RoPE when (il + 1) % this == 0
                                       * (smollm3: 4; granite unrotated: 1); 0: all have */
    int n_ff_shared;                  /* a shared expert's neurons, after the experts'
                                       * (eng_moe.n_ff_shared); 0: none */
    bool moe_shared_gate;             /* ... weighed by a gate of its own (qwen2moe) */
    int n_ff_exp;                     /* an expert's neurons (info.n_ff = info.n_expert *
                                       * this); 0: a dense FFN */
    int n_dense_lead;                 /* experts: the first layers' FFN dense (lfm2moe), */
    int n_ff_dense;                   /* ... of this many neurons */
    bool moe_sigmoid;                 /* eng_moe.sigmoid */
    bool moe_norm;                    /* eng_moe.norm, as the family has it */
    float moe_scale;                  /* eng_moe.scale */
    bool moe_bias;                    /* eng_moe.bias from exp_probs_b: LFM2-MoE's (required),
                                       * ERNIE 4.5's (where the file has it) */
    bool moe_mlp;                     /* gemma4: the shared expert is a dense MLP apart
                                       * (eng_layer.mlp) */
    int conv_len;                     /* lfm2: the short convolutions' taps; 0: none */
    uint8_t *conv_layer;              /* [n_layer] 1: a convolution block (lfm2), or NULL */
    uint8_t *ssm_layer;               /* [n_layer] 1: a Mamba-2 mixer (granitehybrid) or a
                                       * gated delta net (qwen35), or NULL (info.n_ssm
                                       * of them) */
    eng_ssm ssm_shape;                /* their shapes (eng_ssm's ints and eps) */
    bool ssm_beside;                  /* falcon-h1: a Mamba-2 mixer beside attention in
                                       * every layer (eng_layer.sout), info.n_ssm of them */
    /* nemotron_h: one block a layer (eng_layer.mlp_only, no_ffn), the
     * MLPs un-gated, W_down relu(W_up x)^2: slots of an up row and a
     * down row (ENG_ACT_RELU_SQR) */
    bool one_block;
    uint8_t *mlp_layer;               /* [n_layer] 1: an MLP alone (one_block), or NULL */
    /* gemma4: local layers' heads (key_length_swa, rope.dimension_count_swa),
     * a KV head count per layer where the file has an array, the FFN's
     * width per layer where it has one (E2B's last layers twice as wide),
     * and the first layer that reads an earlier layer's cache (n_layer:
     * none) */
    int head_dim_swa, n_rot_swa;
    int32_t *kv_heads;                /* [n_layer] or NULL: info.n_head_kv */
    int32_t *ffn_n;                   /* [n_layer] or NULL: info.n_ff (the widest) */
    int n_kv_from;
    float *ones;                      /* [head_dim] 1s: v's norm, which has no weight */
    /* gemma4's per-layer embeddings (E2B, E4B): a token's [n_layer][P]
     * inputs are its row of per_layer_token_embd times sqrt(P) plus the
     * normalised projection of its embedding, over sqrt(2). The table
     * (n_vocab rows of n_layer * P: more than the rest of the model) stays
     * in the file: a token's row is read (pread) when the token comes, so
     * a file cut short meanwhile is an error, not a fault */
    int n_embd_per_layer;             /* P; 0: none */
    eng_weight ple_model_proj;        /* [n_layer * P][n_embd] */
    float *ple_proj_norm;             /* [P] */
    struct {
        bool open;                    /* fd is the file, open while the model lives */
        int fd;
        uint64_t offset;              /* row r at offset + r * row_bytes */
        uint32_t type;                /* its ggml type */
        size_t row_bytes;
    } ple_tok;

    /* gemma3n's AltUp: the residual is n_altup streams, the embedding and
     * its projections (altup_proj: [n_altup - 1] matrices of [n_embd]
     * [n_embd], scaled to the embedding's magnitude); each layer computes
     * the first stream's prediction and corrects all of them; the output
     * is their mean after altup_unembd's projections of the others
     * (scaled to the first's magnitude). 0: none */
    int n_altup;
    eng_weight altup_proj, altup_unembd; /* [(n_altup - 1) n_embd][n_embd] */
    int laurel_rank;                  /* Laurel's widest (0: none) */
    float *ffn_cut;                   /* [n_layer] ENG_ACT_GELU_TOPK's cut, not finite:
                                       * none (NULL: no layer has one) */

    eng_weight tok_embd;              /* [n_vocab][n_embd] */
    eng_weight output;                /* [n_vocab][n_embd]; shares tok_embd's data when tied */
    float *output_norm;               /* [n_embd] */
    eng_layer *layers;                /* [n_layer] */

    eng_vocab *vocab;
    eng_chat_info chat;
    eng_backend *be;

    char *path;                       /* the GGUF file, re-read by hot-swaps */
    eng_plan_info plan;               /* the loading plan in force */
    uint64_t generation;              /* bumped by every swap */
    uint64_t bytes_fixed;             /* resident weights outside the FFN */
    bool q8_matrices;                 /* eng_model_params.q8_matrices */
    eng_progress_cb progress;         /* eng_model_params.progress */
    void *progress_data;
    float *down_norm;                 /* [n_layer][n_ff] ||W_down column n|| */
    float *layer_sens;                /* [n_layer] ENG_BUDGET_SENS sensitivities, or NULL */

    void **allocs;                    /* every host buffer the model owns */
    size_t n_allocs, cap_allocs;
    void **bufs;                      /* every backend buffer (the weights) */
    size_t n_bufs, cap_bufs;
};

/* A session's buffers marked (backend) are backend memory (backend.h): the
 * host reaches them only through upload/download. */
/* copy_dynamic (select.c): a layer's selection past its leading run of
 * slots 0 .. from - 1, copied contiguous at the end of prefill, so that
 * decode reads two runs (backend ffn_runs) instead of rows scattered over
 * the layer. */
typedef struct eng_dyn_copy {
    eng_ffn_weights w;     /* the copied slots; w.n_slots 0: none */
    int from;              /* the leading run, read in the layer */
    int cap;               /* slots the buffers hold */
    void *gate_up, *down;  /* backend memory, w's rows */
} eng_dyn_copy;

struct eng_session {
    const eng_model *model;
    int n_ctx, n_batch, n_past;
    bool rope_long;                   /* LongRoPE: the long divisors (a context past n_ctx_orig) */

    /* [n_layer] -> [n_ctx][n_head_kv*hd] f16, or in Q8_0 blocks (kv_type) (backend);
     * a convolution layer's k_cache [n_ctx][n_embd] f32 (eng_layer.conv) */
    void **k_cache, **v_cache;
    eng_kv_type kv_type;
    size_t kv_row_bytes;              /* one position's K (or V) row, in attention layers
                                       * (gemma4: the widest layer's; cache_row_bytes) */
    /* [n_layer] rows each layer's cache holds: n_ctx, or for a
     * sliding-window layer (not swa_full, host memory) a ring of its
     * window and one batch, whose row r holds position kv_base + r; the
     * rows of positions below kv_lo are not valid (a context shift left
     * them behind). A full layer's kv_base and kv_lo stay 0. A convolution
     * layer's rows (eng_layer.conv_ch: lfm2's, a Mamba-2 mixer's) are a
     * ring on every backend, position p in row p % kv_rows, so that a
     * decode graph's kernel finds its row; kv_lo as above, kv_base unused.
     * With conv_stage (host memory, not swa_full) the ring is window rows:
     * the window - 1 positions the next token reads, and its own, so that
     * decode runs in it; a batch runs in conv_stage. Else (a GPU) window
     * - 1 + n_batch rows, a batch run in place, and window - 1 more to
     * stage a context shift's moves; swa_full: n_ctx + window - 1, every
     * position held, and those window - 1. */
    int *kv_rows, *kv_base, *kv_lo;
    /* [n_layer] a Mamba-2 layer's state [n_head][hd][d_state] f32
     * (backend; else NULL), after position ssm_pos - 1: it holds one
     * context's whole past, so a prefix that ends elsewhere is evaluated
     * again (-1: after a failed evaluation, none) */
    float **ssm_state;
    int ssm_pos;
    /* their checkpoint (backend memory, restored with memcpy: the mixers
     * run on host-memory backends only): the states a prefill of 3 or more
     * tokens had two tokens before its end (the ssm op copies them at
     * token ckpt_at of the forward pass, 0: none), at ckpt_pos (-1: none),
     * for a prompt cache whose prefix stops short of ssm_pos (the same
     * prompt again; a chat whose history renders the last answer
     * otherwise); ckpt_pos and ckpt_at serve conv_ckpt (below) too */
    float **ssm_ckpt;
    int ckpt_pos, ckpt_at;
    /* [n_layer] falcon-h1: the convolution rows of the mixer beside
     * attention (eng_layer.sout; else NULL), a ring of ring_rows as a
     * convolution layer's (kv_rows above), positions below ring_lo[il]
     * no longer held */
    float **ring;
    int *ring_lo;
    int ring_rows;
    /* The rows a convolution (either kind above) runs a batch over, one
     * buffer for every layer of the session (they run one after another):
     * conv_stage_rows = the widest window - 1 + n_batch rows of the widest
     * channels (backend memory; NULL: the rings hold a batch themselves).
     * Each layer's window - 1 positions before the batch are copied in,
     * the op runs there as on a ring of conv_stage_rows, and the ring's
     * last positions are copied back. */
    float *conv_stage;
    int conv_stage_rows;
    /* [n_layer] with conv_stage: the ring of each convolution layer (or
     * falcon-h1 mixer) as it stood at the checkpoint (ckpt_pos, taken at
     * ckpt_at as ssm_ckpt is; lfm2's too, which has no states), so that
     * the checkpoint stays whole however far the context goes on; NULL
     * where the layer has none. */
    float **conv_ckpt;

    /* Which FFN slots each layer computes; NULL (the default): all loaded.
     * ffn_sel is the host list, ffn_sel_dev its copy the ops read. */
    const int32_t **ffn_sel;          /* [n_layer] */
    int32_t **ffn_sel_dev;            /* [n_layer] -> [n_ff] (backend) */
    int *ffn_n_sel;                   /* [n_layer] */

    /* scratch for n_batch tokens (backend) */
    float *x, *xn, *q, *k, *v, *att, *o, *ff;
    float *gate;                      /* [n_batch][H*hd] attention's output gate (qwen35) */
    float *ple_in;                    /* gemma4: [n_batch][n_layer * P] per-layer inputs */
    float *ple_proj;                  /* [n_batch][n_layer * P] the embeddings' part */
    float *ple_g;                     /* [n_batch][P] */
    void *ple_raw;                    /* a token's table row as the file has it (host) */
    /* gemma3n: AltUp's streams and their predictions [n_altup][n_batch]
     * [n_embd] (stream j's rows at j n_batch n_embd), Laurel's output
     * [n_batch][n_embd] and its rank's [n_batch][rank], the modalities
     * [n_batch][n_altup] */
    float *alt, *alt_pred, *laurel, *laurel_r, *alt_mod;
    float *moe_work;                  /* the moe op's scratch (experts only) */
    float *moe_out;                   /* [n_batch][n_embd] gemma4's experts' sum, beside
                                       * its MLP's in ff (moe_mlp only) */
    int32_t *tokens;                  /* [n_batch] */
    float *logits_dev;                /* [logits_dev_cap][n_vocab], not with host memory */
    int logits_dev_cap;
    float *logits;                    /* [n_logits][n_vocab] (host) */
    int n_logits;                     /* rows in logits from the last eval */
    int logits_cap;                   /* rows logits can hold */
    int logits_first;                 /* token index of logits row 0 */
    /* ENG_EVAL_ARGMAX on a backend with the argmax op: the last row's argmax
     * is computed there and only it comes back (argmax_only; no logits) */
    int32_t *argmax_dev;              /* [1] (backend), NULL without the op */
    int32_t argmax;                   /* its value after the last eval, -1: all NaN */
    bool argmax_only;                 /* the last eval kept argmax, not logits */
    /* ENG_EVAL_CANDIDATES (eng_session_set_candidates) on a backend with the
     * top_cands op: the last row's candidates for cand_k, n_cand floats
     * then n_cand int32 ids, computed there (cand_dev) and brought back
     * (cand_host, cands_only; no logits) */
    void *cand_dev, *cand_host;
    size_t n_cand, cand_cap;          /* entries now, entries the buffers hold */
    int cand_k;                       /* 0: none set */
    bool cands_only;
    int n_last_eval;
    /* Prompt cache (eng_session_reset_prefix): tokens [0, n_reusable) of
     * ctx_tokens are in the KV cache as an evaluation over every loaded
     * neuron left them, for the model generation kv_generation; a reset
     * keeps them (only n_past goes back). */
    int32_t *ctx_tokens;              /* [n_ctx] the token at each position */
    int n_reusable;
    uint64_t kv_generation;
    uint64_t graph_key;               /* names the decode step's ops (backend.h graph_begin) */
    int graph_tail;                   /* how the last step ended: 0 logits, 1 the
                                       * argmax op, 2 + k the top_cands op for k */
    float graph_temp;                 /* mistral3: q's temperature the last step had */
    eng_abort_cb abort_cb;            /* polled between prefill chunks */
    void *abort_data;

    /* selective computation (select.c) */
    eng_compute_params compute;
    bool selected;                    /* dynamic set fixed for this context */
    uint64_t generation;              /* model generation the selection refers to */
    int32_t **sel_buf;                /* [n_layer][n_ff] */
    /* ENG_PICK_TOKEN: the slots layer il computes per decode token, picked
     * by the sketch (backend.h ffn_pick); 0: ffn_sel says */
    int *pick_k;                      /* [n_layer] */
    float **counts;                   /* [n_layer][n_ff]: prefill votes (or |a| mass) per slot */
    float *act;                       /* [n_batch][n_ff] activations of one layer (backend) */
    float *act_host;                  /* act downloaded, when backend memory is not host's */
    /* votes counted by the backend (topk_count) while act stays in its
     * memory; NULL when the backend is host memory or offers no topk_count */
    uint32_t *counts_dev_all;         /* [n_layer][n_ff] (backend), one block */
    uint32_t **counts_dev;            /* [n_layer] -> its row of counts_dev_all */
    bool *counts_dev_live;            /* [n_layer]: counting since the last gather or reset */
    bool counts_dev_zeroed;           /* every layer not live holds zeros */
    uint32_t *counts_stage;           /* [n_layer][n_ff] host side of their copies */
    float *rank_tmp;                  /* [2 * n_ff] */
    double *observe;                  /* profiling sums, or NULL */
    /* The prefill votes (counts, act_sum) of positions [0, votes_n) as the
     * last selection took them, under votes_params; votes_ok until the
     * counts change. A prefix kept with them (eng_session_reset_prefix)
     * does not vote again below votes_from. */
    bool votes_ok;
    bool votes_live;                  /* counts belong to this context (else zeroed at its first vote) */
    int votes_n, votes_from;
    eng_compute_params votes_params;
    bool partial;                     /* decode computes less than every loaded neuron */
    double ffn_share;
    /* copy_dynamic (select.c): per layer, NULL until a selection copies */
    struct eng_dyn_copy *dyn;         /* [n_layer] */

    /* compensation for neurons not computed (select.c): the bias added to
     * layer il's FFN output at this eval, NULL for none */
    const float **ffn_bias;           /* [n_layer], points into bias_buf */
    float **bias_buf;                 /* [n_layer][n_embd], or NULL when unused */
    double **act_sum;                 /* [n_layer][n_ff]: signed sum of a per slot at prefill */
    double act_tokens;                /* prompt tokens act_sum holds */
    /* ENG_COMP_LINEAR (select.c), per layer: the prefill's FFN inputs and
     * loaded slots' activations at up to lin_cap positions (a ring of the
     * latest), and the map fitted from them */
    struct eng_lin *lin;              /* [n_layer], NULL when unused */
    int lin_cap;
    float *lin_z, *lin_y;             /* [n_batch][rank], [n_batch][n_embd] (backend) */
    void *lin_work;                   /* the fit's workspace, lin_work_bytes */
    size_t lin_work_bytes;
};

typedef struct eng_lin {
    float *x;       /* [lin_cap][n_embd] */
    uint16_t *a;    /* [lin_cap][slots] in f16 (the largest part) */
    int slots;      /* a row's room: the layer's slot capacity */
    int n, next;    /* rows held; where the next goes */
    bool fitted;
    eng_weight p;   /* P^T [rank][n_embd], f16 (host memory: comp needs it) */
    eng_weight v;   /* V [n_embd][rank], f16 */
} eng_lin;

/* eng_model_load on a backend the caller made (tests); the model owns be
 * from the call on, also when loading fails. NULL: as params say. */
int eng__model_load_backend(const char *path, const eng_model_params *params, eng_backend *be,
                            eng_model **ret_model, eng_error *err);

/* Anything a decode step's ops take, other than the position, may have
 * changed (selection, buffers, settings): a new graph key, so that a
 * backend never replays a step recorded before. */
void eng__session_changed(eng_session *s);

/* Backend memory for a session's buffers (free with the backend's
 * mem_free); NULL when it does not fit. */
void *eng__session_alloc(const eng_session *s, size_t bytes);

/* Runs one batch of at most n_batch tokens at positions n_past..; writes
 * logits for all tokens (all_logits) or only the last one, or none when
 * logits is NULL. argmax (host), when not NULL (logits NULL, not
 * all_logits, a backend with the argmax op): receives the argmax of the
 * last token's logits, computed by the backend. cands (logits and argmax
 * NULL, a backend with the top_cands op, eng_session_set_candidates done):
 * the last token's candidates into s->cand_host, computed by the backend.
 * hidden, when not NULL (logits and argmax NULL): receives the n rows' last hidden states after
 * the output norm, [n][n_embd] (host), for embeddings. */
int eng__forward(eng_session *s, const int32_t *tokens, int n, bool all_logits, float *logits,
                 int32_t *argmax, bool cands, float *hidden);

#endif
