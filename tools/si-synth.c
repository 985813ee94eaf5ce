/* si-synth: writes a synthetic GGUF model with random weights.
 *
 *   si-synth --shape NAME --out FILE [--seed N] [--type T] [--embd-type T] [--layers N]
 *            [--chat-template FILE] [--vocab GGUF] [--kv KEY=TYPE:VALUE]...
 *
 * Shapes mirror real models' hyperparameters, metadata keys, tensor names and
 * tokenizer layout (a byte-level BPE vocabulary with the 256 GPT-2 byte
 * tokens, merges of common English words, the model family's special tokens
 * and chat template), so that the engine and llama.cpp can both load them.
 * Weights are seeded and reproducible: ~N(0,1)/sqrt(fan_in), norms 1.
 *
 * --kv sets (or replaces) one metadata key after the shape's own, TYPE u32,
 * f32, str, bool (0 or 1), i32s or bools (comma-separated arrays): a test's way to an odd
 * file.
 *
 * The file is written tensor by tensor, row by row (the writer's streaming
 * mode), so even the 3B shapes need only a few rows of memory.
 */
#include <errno.h>
#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "gguf.h"
#include "quants.h"

enum vocab_style { VOCAB_SMOL, VOCAB_LLAMA3, VOCAB_QWEN };

typedef struct shape {
    const char *name, *arch, *pre, *model_name;
    int n_layer, n_embd, n_ff, n_head, n_head_kv, n_vocab, n_ctx;
    float rope_base, eps;
    bool qkv_bias;   /* qwen2 */
    bool rope_freqs; /* llama 3.x rope scaling baked into rope_freqs.weight */
    bool tied;       /* no output.weight: logits use token_embd */
    enum vocab_style vocab;
    int n_smol_specials; /* VOCAB_SMOL: specials at ids 0.. */
    int head_dim;        /* 0: n_embd / n_head; else attention.key_length */
    bool qk_norm;        /* qwen3: attn_q_norm / attn_k_norm per head */
    bool fused;          /* phi3: attn_qkv = [q; k; v], ffn_up = [gate; up] */
    int n_swa;           /* attention.sliding_window, 0: none */
    float rope_linear;   /* rope.scaling.factor of type linear, 0: none */
    float softcap[2];    /* attn_logit_softcapping, final_logit_softcapping; 0: not written */
    int longrope;        /* > 0: LongRoPE tables and attn_factor, this original context */
    int n_rot;           /* rope.dimension_count; 0: head_dim (every dimension rotates) */
} shape;

/* Mixtures of experts: a shape's experts, of n_ff neurons each, how many
 * of them a token picks, its first layers' dense FFN of dense_ff neurons
 * (other shapes: a dense FFN everywhere), and a shared expert of
 * shared_ff neurons beside them (0: none; qwen2moe's with a gate). */
static const struct {
    const char *shape;
    int n_expert, n_used, dense_lead, dense_ff, shared_ff;
} expert_shapes[] = {
    {"tiny-lfm2moe", 8, 2, 2, 96, 0},
    {"tiny-qwen3moe", 8, 2, 0, 0, 0},
    {"tiny-qwen3vlmoe", 8, 2, 0, 0, 0},
    {"tiny-olmoe", 8, 3, 0, 0, 0},
    {"tiny-granitemoe", 4, 2, 0, 0, 0},
    {"tiny-granitemoeshared", 4, 2, 0, 0, 48},
    {"tiny-granitehybrid-moe", 4, 2, 0, 0, 48},
    {"tiny-qwen2moe", 4, 2, 0, 0, 48},
    {"tiny-qwen35moe", 4, 2, 0, 0, 48},
    {"tiny-mixtral", 4, 2, 0, 0, 0},
    /* gemma4 26B-A4B's layout: experts beside a dense MLP (shared_ff) */
    {"tiny-gemma4-moe", 8, 2, 0, 0, 48},
    {"tiny-ernie4_5-moe", 8, 2, 1, 96, 48},
    {"tiny-gpt-oss", 8, 3, 0, 0, 0},
    {"gpt-oss-20b", 32, 4, 0, 0, 0},
    {"gpt-oss-120b", 128, 4, 0, 0, 0},
    {"ernie-4.5-21b-a3b", 64, 6, 1, 12288, 3072},
    {"qwen3-30b-a3b", 128, 8, 0, 0, 0},
    {"lfm2-8b-a1b", 32, 4, 2, 7168, 0},
    {"granite-3.1-1b-a400m", 32, 8, 0, 0, 0},
    {"granite-4.0-h-tiny", 64, 6, 0, 0, 1024},
    {"olmoe-1b-7b", 64, 8, 0, 0, 0},
    {"gemma-4-26b-a4b", 128, 8, 0, 0, 2112},
    /* nemotron_h_moe: experts (un-gated) and a shared one in place of
     * nemotron_h's MLPs */
    {"tiny-nemotron-h-moe", 8, 2, 0, 0, 48},
    {"nemotron-3-nano-30b-a3b", 128, 6, 0, 0, 3712},
};

/* Mamba-2 hybrids (granitehybrid): the mixers' inner width, state size,
 * heads, groups and convolution taps; attention in every layer l with
 * l % attn_every == attn_at (hybrid_attention), Mamba-2 in the others.
 * Qwen3.5 (qwen35) likewise, its gated delta nets named as llama.cpp
 * does: value heads (n_head) and key heads (n_group) of d_state, d_inner
 * n_head * d_state; attention in every fourth layer. */
static const struct {
    const char *shape;
    int d_inner, d_state, n_head, n_group, d_conv, attn_every, attn_at;
} ssm_shapes[] = {
    {"tiny-granitehybrid", 128, 16, 8, 2, 4, 3, 1},
    {"tiny-granitehybrid-moe", 128, 16, 8, 2, 4, 3, 1},
    {"granite-4.0-h-tiny", 3072, 128, 48, 1, 4, 8, 5},
    {"granite-4.0-h-350m", 1536, 128, 48, 1, 4, 8, 5},
    {"granite-4.0-h-1b", 3072, 128, 48, 1, 4, 8, 5},
    {"tiny-qwen35", 64, 16, 4, 2, 4, 4, 3},
    /* falcon-h1 (Falcon-H1): a Mamba-2 mixer beside attention in every
     * layer (attn_every 1), d_inner not 2 n_embd, no norm of its output
     * (mamba_rms_norm false, as the published configs) */
    {"tiny-falcon-h1", 96, 16, 6, 2, 4, 1, 0},
    {"falcon-h1-0.5b", 1536, 128, 24, 1, 4, 1, 0},
    {"falcon-h1-1.5b", 3072, 256, 48, 1, 4, 1, 0},
    {"tiny-qwen35moe", 64, 16, 4, 2, 4, 4, 3},
    /* nemotron_h (Nemotron-H): one block a layer as nemotron_layers says,
     * grouped mixers (8 groups in the published models) */
    {"tiny-nemotron-h", 128, 16, 8, 4, 4, 0, 0},
    {"nemotron-h-4b", 7168, 128, 112, 8, 4, 0, 0},
    {"nemotron-h-8b", 8192, 128, 128, 8, 4, 0, 0},
    {"nemotron-nano-9b-v2", 10240, 128, 128, 8, 4, 0, 0},
    {"tiny-nemotron-h-moe", 128, 16, 8, 4, 4, 0, 0},
    {"nemotron-3-nano-30b-a3b", 4096, 128, 64, 8, 4, 0, 0},
    {"qwen3.5-0.8b", 2048, 128, 16, 16, 4, 4, 3},
    {"qwen3.5-2b", 2048, 128, 16, 16, 4, 4, 3},
    {"qwen3.5-4b", 4096, 128, 32, 16, 4, 4, 3},
};

/* nemotron_h: each layer's block, as the published configs'
 * hybrid_override_pattern: M a Mamba-2 mixer, * attention, - an MLP,
 * E (nemotron_h_moe) experts */
static const struct {
    const char *shape, *pattern;
} nemotron_layers[] = {
    /* (consecutive mixers, an MLP first after attention, attention last) */
    {"tiny-nemotron-h", "M-M*-MM*"},
    /* Nemotron-H-8B's 24 mixers, 4 attention layers, 24 MLPs; the 4B
     * (pruned from it) as the same, unverified here */
    {"nemotron-h-4b", "M-M-M-M*-M-M-M-M*-M-M-M-M*-M-M-M-M*-M-M-M-M-M-M-M-M-"},
    {"nemotron-h-8b", "M-M-M-M*-M-M-M-M*-M-M-M-M*-M-M-M-M*-M-M-M-M-M-M-M-M-"},
    {"nemotron-nano-9b-v2", "M-M-M-MM-M-M-M*-M-M-M*-M-M-M-M*-M-M-M-M*-M-MM-M-M-M-M-M-"},
    {"tiny-nemotron-h-moe", "MEM*EEM*"},
    /* 23 mixers, 23 layers of experts, 6 attention layers */
    {"nemotron-3-nano-30b-a3b", "MEMEM*EMEMEM*EMEMEM*EMEMEM*EMEMEM*EMEMEMEM*EMEMEMEME"},
};

/* Gemma 4 (gemma4): the shape's head_dim is the global layers' (key_length);
 * the local layers' heads (key_length_swa, every dimension rotating), a
 * global layer after every period - 1 local ones, the last n_shared
 * layers reading earlier layers' caches, per-layer embeddings of ple
 * (0: none), those last layers' FFN twice as wide (double_wide), the
 * global layers' KV heads (0: the shape's), global layers without attn_v
 * (k_eq_v), and a quarter of a global head rotating as the converter
 * writes it (rope_freqs: 1, then 1e30 for the unrotated pairs). */
static const struct {
    const char *shape;
    int head_dim_swa, period, n_shared, ple, kv_global;
    bool double_wide, k_eq_v;
} gemma4_shapes[] = {
    {"tiny-gemma4", 16, 3, 3, 32, 2, true, false},
    /* as the 31B: no per-layer embeddings nor shared caches, values the
     * keys' in global layers; heads of 32 and 64, whole Q8_0 blocks */
    {"tiny-gemma4-kv", 32, 3, 0, 0, 2, false, true},
    /* as the 26B-A4B: tiny-gemma4-kv's attention, experts beside the MLP */
    {"tiny-gemma4-moe", 32, 3, 0, 0, 2, false, true},
    /* Gemma 4 E2B's published config (layer pattern as llama.cpp's test
     * of it: four local layers to a global one) */
    {"gemma-4-e2b", 256, 5, 20, 256, 0, true, false},
    /* Gemma 4 26B-A4B's: 25 local layers and 5 global ones (two KV heads
     * of 512, values the keys'), no shared caches nor per-layer inputs */
    {"gemma-4-26b-a4b", 256, 6, 0, 0, 2, false, true},
};

static const shape shapes[] = {
    {"tiny", "llama", "smollm", "Synthetic Tiny", 2, 64, 192, 4, 2, 320, 2048, 10000.0f, 1e-5f,
     false, false, true, VOCAB_SMOL, 3, 0, false, false, 0, 0.0f, {0, 0}, 0, 0},
    {"tiny-qwen2", "qwen2", "qwen2", "Synthetic Tiny Qwen2", 2, 64, 192, 4, 2, 320, 4096,
     1000000.0f, 1e-6f, true, false, true, VOCAB_QWEN, 0, 0, false, false, 0, 0.0f, {0, 0}, 0, 0},
    /* heads wider than n_embd / n_head, as Qwen3's (1024 wide, 16 heads of 128) */
    {"tiny-qwen3", "qwen3", "qwen2", "Synthetic Tiny Qwen3", 2, 64, 192, 4, 2, 320, 4096,
     1000000.0f, 1e-6f, false, false, true, VOCAB_QWEN, 0, 32, true, false, 0, 0.0f, {0, 0}, 0, 0},
    {"tiny-llama3", "llama", "llama-bpe", "Synthetic Tiny Llama 3", 2, 64, 192, 4, 2, 1024, 8192,
     500000.0f, 1e-5f, false, true, true, VOCAB_LLAMA3, 0, 0, false, false, 0, 0.0f, {0, 0}, 0, 0},
    /* fused q/k/v and gate/up, NEOX RoPE, an output matrix of its own and
     * a sliding window, as Phi-3-mini-4k (its window 2047, its vocabulary
     * SentencePiece: --vocab). Not named Phi-3: llama.cpp gives the special
     * tokens of a model so named Phi-3's attributes, and needs its tokens */
    {"tiny-phi3", "phi3", "smollm", "Synthetic Tiny Fused", 2, 64, 192, 4, 2, 320, 4096, 10000.0f, 1e-5f,
     false, false, false, VOCAB_SMOL, 3, 0, false, true, 2047, 0.0f, {0, 0}, 0, 0},
    /* Phi-3's 128k layout (LongRoPE: rope_factors_long / _short, the
     * attn_factor of a 32x longer context), with an original context of 8
     * positions, so that a test's context takes the long factors */
    {"tiny-phi3-128k", "phi3", "smollm", "Synthetic Tiny Fused LongRoPE", 2, 64, 192, 4, 2, 320, 4096,
     10000.0f, 1e-5f, false, false, false, VOCAB_SMOL, 3, 0, false, true, 262144, 0.0f, {0, 0}, 8, 0},
    /* Phi-4-mini's layout: tiny-phi3-128k with 3/4 of each head rotating
     * (12 of 16; Phi-4-mini 96 of 128), so LongRoPE's attn_factor scales
     * only part of a score, and the output tied to the embeddings */
    {"tiny-phi4", "phi3", "smollm", "Synthetic Tiny Fused Partial", 2, 64, 192, 4, 2, 320, 4096,
     10000.0f, 1e-5f, false, false, true, VOCAB_SMOL, 3, 0, false, true, 262144, 0.0f, {0, 0}, 8, 12},
    /* the same with rows of 256 (heads of 64, 48 rotating): whole blocks of
     * Q4_K, whose q rows' scaling goes into the blocks' scales */
    {"tiny-phi4-k", "phi3", "smollm", "Synthetic Tiny Fused Partial K", 2, 256, 512, 4, 2, 320,
     4096, 10000.0f, 1e-5f, false, false, true, VOCAB_SMOL, 3, 0, false, true, 262144, 0.0f, {0, 0},
     8, 48},
    /* gemma3: q/k norms, norms after attention and FFN, GeGLU, embeddings
     * scaled by sqrt(n_embd), five local layers (window, RoPE base 10000)
     * to a global one (RoPE 1e6, linear scaling as Gemma 3 4B's); heads
     * wider than n_embd / n_head and one KV head, as Gemma 3 1B's. The
     * window of 4 makes a short test cross it. */
    {"tiny-gemma3", "gemma3", "smollm", "Synthetic Tiny Gemma3", 7, 64, 192, 4, 1, 320, 4096,
     1000000.0f, 1e-6f, false, false, true, VOCAB_SMOL, 3, 32, true, false, 4, 8.0f, {0, 0}, 0, 0},
    /* gemma (1): GeGLU and scaled embeddings on Llama's layers */
    {"tiny-gemma", "gemma", "smollm", "Synthetic Tiny Gemma", 3, 64, 192, 4, 1, 320, 4096,
     10000.0f, 1e-6f, false, false, true, VOCAB_SMOL, 3, 32, false, false, 0, 0.0f, {0, 0}, 0, 0},
    /* gemma2: gemma3's layers without q/k norms, a local layer before each
     * global one, soft-capped scores and logits; caps far below Gemma 2's
     * (50 and 30) so that they bite on a small random model */
    /* gemma4 (gemma4_shapes): 9 layers, every third global, the last three
     * reading layers 4 (local) and 5 (global); local heads of 16 and one
     * KV head, global ones of 32 and two; a window of 4 */
    {"tiny-gemma4", "gemma4", "smollm", "Synthetic Tiny Gemma4", 9, 64, 96, 4, 1, 320, 4096,
     1000000.0f, 1e-6f, false, false, true, VOCAB_SMOL, 3, 32, true, false, 4, 0.0f, {0, 0}, 0, 0},
    {"tiny-gemma4-kv", "gemma4", "smollm", "Synthetic Tiny Gemma4 KV", 6, 64, 96, 4, 1, 320, 4096,
     1000000.0f, 1e-6f, false, false, true, VOCAB_SMOL, 3, 64, true, false, 4, 0.0f, {0, 0}, 0, 0},
    /* the same with 2 of 8 experts of 32 beside a dense MLP of 48
     * (expert_shapes), gate and up rows in one tensor in even layers */
    {"tiny-gemma4-moe", "gemma4", "smollm", "Synthetic Tiny Gemma4 MoE", 6, 64, 32, 4, 1, 320,
     4096, 1000000.0f, 1e-6f, false, false, true, VOCAB_SMOL, 3, 64, true, false, 4, 0.0f, {0, 0},
     0, 0},
    /* gemma3n (Gemma 3n): four AltUp streams, LAuReL, per-layer inputs of
     * 256, norms not shifted, every fifth layer global, the layers from 20
     * on reading layers 18 (local) and 19 (global), the first 10 FFNs
     * sparse; llama.cpp fixes those numbers, so only the width, heads and
     * window are the shape's */
    {"tiny-gemma3n", "gemma3n", "smollm", "Synthetic Tiny Gemma3n", 25, 64, 128, 4, 2, 320, 4096,
     1000000.0f, 1e-6f, false, false, true, VOCAB_SMOL, 3, 32, true, false, 4, 0.0f, {0, 30.0f},
     0, 0},
    {"tiny-gemma2", "gemma2", "smollm", "Synthetic Tiny Gemma2", 6, 64, 192, 4, 2, 320, 4096,
     10000.0f, 1e-6f, false, false, true, VOCAB_SMOL, 3, 32, false, false, 4, 0.0f, {1.0f, 2.0f}, 0, 0},
    /* glm4 (GLM-4-0414): q/k/v biases, half of each head rotating in
     * consecutive pairs, norms after attention and the FFN too, the FFN's
     * gate and up rows in one ffn_up; its pre-tokenizer, no BOS */
    {"tiny-glm4", "glm4", "glm4", "Synthetic Tiny GLM4", 3, 64, 192, 4, 2, 1024, 8192, 10000.0f,
     1e-5f, true, false, false, VOCAB_LLAMA3, 0, 0, false, false, 0, 0.0f, {0, 0}, 0, 8},
    /* gpt-oss: biases on q, k, v and the output, a sink logit per head,
     * every other layer local (a window of 4 here, 128 there), NEOX RoPE
     * under YaRN (factor 32 of 4096, written below), heads wider than
     * n_embd / n_head (gpt-oss-20b: 64 of 64 on 2880), 3 of 8 experts
     * with biases (expert_shapes), an output matrix of its own */
    {"tiny-gpt-oss", "gpt-oss", "gpt-4o", "Synthetic Tiny GPT-OSS", 4, 64, 32, 4, 2, 1024, 4096,
     150000.0f, 1e-5f, true, false, false, VOCAB_LLAMA3, 0, 32, false, false, 4, 0.0f, {0, 0}, 0,
     0},
    /* smollm3: llama's layers, the fourth without RoPE (NoPE), five so
     * that layers on both sides of it rotate */
    {"tiny-smollm3", "smollm3", "llama-bpe", "Synthetic Tiny SmolLM3", 5, 64, 192, 4, 2, 1024, 8192,
     5000000.0f, 1e-6f, false, false, true, VOCAB_LLAMA3, 0, 0, false, false, 0, 0.0f, {0, 0}, 0, 0},
    /* granite: llama's layers under Granite's four multipliers (written
     * below; values that bite on a small random model) and SmolLM2's
     * pattern under the name Granite 3.x files give it */
    {"tiny-granite", "granite", "refact", "Synthetic Tiny Granite", 3, 64, 192, 4, 2, 320, 4096,
     10000.0f, 1e-5f, false, false, true, VOCAB_SMOL, 3, 0, false, false, 0, 0.0f, {0, 0}, 0, 0},
    /* granitehybrid (Granite 4.0-H): Mamba-2 mixers in place of attention
     * in most layers (ssm_shapes), Granite's multipliers, no RoPE (as
     * Granite 4.0-H's files: rope.scaling.finetuned false) */
    {"tiny-granitehybrid", "granitehybrid", "refact", "Synthetic Tiny GraniteHybrid", 5, 64, 192,
     4, 2, 320, 4096, 10000.0f, 1e-5f, false, false, true, VOCAB_SMOL, 3, 0, false, false, 0, 0.0f,
     {0, 0}, 0, 0},
    /* the same with 2 of 4 experts of 32 and a shared one of 48 in every
     * layer (expert_shapes), as Granite 4.0-H Tiny and Small */
    {"tiny-granitehybrid-moe", "granitehybrid", "refact", "Synthetic Tiny GraniteHybrid MoE", 5,
     64, 32, 4, 2, 320, 4096, 10000.0f, 1e-5f, false, false, true, VOCAB_SMOL, 3, 0, false, false,
     0, 0.0f, {0, 0}, 0, 0},
    /* falcon-h1 (Falcon-H1): attention and a Mamba-2 mixer side by side
     * on the same norm in every layer (ssm_shapes), heads of 32 on 64,
     * NEOX RoPE, Llama 3's pre-tokenizer under its own name */
    {"tiny-falcon-h1", "falcon-h1", "falcon-h1", "Synthetic Tiny Falcon-H1", 5, 64, 192, 4, 2,
     1024, 8192, 100000000000.0f, 1e-5f, false, false, false, VOCAB_LLAMA3, 0, 32, false, false,
     0, 0.0f, {0, 0}, 0, 0},
    /* nemotron_h (Nemotron-H): a mixer (4 groups of 32), attention without
     * RoPE or an un-gated MLP in each layer (nemotron_layers), Mistral
     * Nemo's pre-tokenizer ("tekken", as its converter names it) */
    {"tiny-nemotron-h", "nemotron_h", "tekken", "Synthetic Tiny Nemotron-H", 8, 64, 192, 4, 2,
     1024, 8192, 10000.0f, 1e-5f, false, false, false, VOCAB_LLAMA3, 0, 16, false, false,
     0, 0.0f, {0, 0}, 0, 0},
    /* nemotron_h_moe (Nemotron 3 Nano): tiny-nemotron-h with 2 of 8
     * un-gated experts of 32 and a shared one of 48 (expert_shapes) in
     * place of the MLPs, picked by sigmoid plus a bias, weights normalised
     * and scaled by 2.5 */
    {"tiny-nemotron-h-moe", "nemotron_h_moe", "tekken", "Synthetic Tiny Nemotron-H MoE", 8, 64,
     32, 4, 2, 1024, 8192, 10000.0f, 1e-5f, false, false, false, VOCAB_LLAMA3, 0, 16, false,
     false, 0, 0.0f, {0, 0}, 0, 0},
    /* qwen35 (Qwen3.5): gated delta nets (two value heads on one key head
     * here, as Qwen3.5-4B's) in three layers of four, Qwen3's attention
     * with an output gate, a quarter of each head rotating (8 of 32) */
    {"tiny-qwen35", "qwen35", "qwen35", "Synthetic Tiny Qwen3.5", 5, 64, 192, 4, 2, 320, 4096,
     10000000.0f, 1e-6f, false, false, true, VOCAB_QWEN, 0, 32, true, false, 0, 0.0f, {0, 0}, 0,
     8},
    /* qwen35moe (Qwen3.5-35B-A3B's layout): the same with 2 of 4 experts
     * of 32 and a gated shared one of 48 in every layer (expert_shapes) */
    {"tiny-qwen35moe", "qwen35moe", "qwen35", "Synthetic Tiny Qwen3.5 MoE", 5, 64, 32, 4, 2, 320,
     4096, 10000000.0f, 1e-6f, false, false, true, VOCAB_QWEN, 0, 32, true, false, 0, 0.0f, {0, 0},
     0, 8},
    /* exaone (3.x): llama's layers with NEOX RoPE and Llama 3's frequency
     * factors (EXAONE 3.5's files carry them), under its pre-tokenizer's name */
    {"tiny-exaone", "exaone", "exaone", "Synthetic Tiny EXAONE", 2, 64, 192, 4, 2, 320, 4096,
     1000000.0f, 1e-5f, false, true, true, VOCAB_SMOL, 3, 0, false, false, 0, 0.0f, {0, 0}, 0, 0},
    /* minicpm: granite's layers with MiniCPM's three multipliers (its
     * converter's keys, written below) */
    {"tiny-minicpm", "minicpm", "smollm", "Synthetic Tiny MiniCPM", 3, 64, 192, 4, 2, 320, 4096,
     10000.0f, 1e-5f, false, false, true, VOCAB_SMOL, 3, 0, false, false, 0, 0.0f, {0, 0}, 0, 0},
    /* hunyuan-dense: NEOX RoPE, per-head q/k norms after it, heads wider
     * than n_embd / n_head (Hunyuan-0.5B: 16 heads of 128 on 1024) */
    {"tiny-hunyuan", "hunyuan-dense", "hunyuan-dense", "Synthetic Tiny Hunyuan", 2, 64, 192, 4, 2, 320,
     4096, 10000.0f, 1e-5f, false, false, true, VOCAB_QWEN, 0, 32, true, false, 0, 0.0f, {0, 0}, 0, 0},
    /* lfm2: LFM2's short-convolution blocks (3 taps) with attention in
     * layers 2 and 4 (LFM2-350M: 6 of 16), whose heads have q/k norms and
     * NEOX RoPE; the output tied to the embeddings */
    {"tiny-lfm2", "lfm2", "lfm2", "Synthetic Tiny LFM2", 5, 64, 192, 4, 2, 1024, 4096,
     1000000.0f, 1e-5f, false, false, true, VOCAB_LLAMA3, 0, 0, true, false, 0, 0.0f, {0, 0}, 0, 0},
    /* ernie4_5: ERNIE-4.5-0.3B's layout (Llama's layers, heads of 128
     * there) under its own name */
    {"tiny-ernie4_5", "ernie4_5", "smollm", "Synthetic Tiny ERNIE4.5", 2, 64, 192, 4, 2, 320, 4096,
     500000.0f, 1e-5f, false, false, true, VOCAB_SMOL, 3, 32, false, false, 0, 0.0f, {0, 0}, 0, 0},
    /* ernie4_5-moe (ERNIE-4.5-21B-A3B's layout): the same attention, a
     * dense first layer of 96, then 2 of 8 experts of 32 picked by
     * softmax plus a bias, beside a shared expert of 48 (expert_shapes) */
    {"tiny-ernie4_5-moe", "ernie4_5-moe", "smollm", "Synthetic Tiny ERNIE4.5 MoE", 3, 64, 32, 4,
     2, 320, 4096, 500000.0f, 1e-5f, false, false, true, VOCAB_SMOL, 3, 32, false, false, 0, 0.0f,
     {0, 0}, 0, 0},
    /* qwen2vl, qwen3vl: the language models of Qwen2.5-VL and Qwen3-VL
     * (multi-section RoPE, written below; Qwen3-VL's deepstack count) */
    {"tiny-qwen2vl", "qwen2vl", "qwen2", "Synthetic Tiny Qwen2VL", 2, 64, 192, 4, 2, 320, 4096,
     1000000.0f, 1e-6f, true, false, true, VOCAB_QWEN, 0, 0, false, false, 0, 0.0f, {0, 0}, 0, 0},
    {"tiny-qwen3vl", "qwen3vl", "qwen2", "Synthetic Tiny Qwen3VL", 2, 64, 192, 4, 2, 320, 4096,
     5000000.0f, 1e-6f, false, false, true, VOCAB_QWEN, 0, 32, true, false, 0, 0.0f, {0, 0}, 0, 0},
    /* olmo2: norms only after attention and the FFN, q/k norms over whole
     * projections, NEOX RoPE, an output matrix of its own (required), the
     * pre-tokenizer name OLMo 2's files carry */
    {"tiny-olmo2", "olmo2", "dbrx", "Synthetic Tiny OLMo2", 3, 64, 192, 4, 2, 1024, 4096,
     500000.0f, 1e-6f, false, false, false, VOCAB_LLAMA3, 0, 0, false, false, 0, 0.0f, {0, 0}, 0, 0},
    /* OLMo 3's layout: the same with three local layers (window 4) to a
     * global one, written as the converter does (a flag per layer) */
    {"tiny-olmo3", "olmo2", "dbrx", "Synthetic Tiny OLMo3", 5, 64, 192, 4, 2, 1024, 4096,
     500000.0f, 1e-6f, false, false, false, VOCAB_LLAMA3, 0, 0, false, false, 4, 0.0f, {0, 0}, 0, 0},
    /* exaone4: olmo2's norms with per-head q/k norms, Llama 3's frequency
     * factors, tied output */
    {"tiny-exaone4", "exaone4", "exaone4", "Synthetic Tiny EXAONE4", 3, 64, 192, 4, 2, 320, 4096,
     1000000.0f, 1e-5f, false, true, true, VOCAB_SMOL, 3, 0, true, false, 0, 0.0f, {0, 0}, 0, 0},
    /* EXAONE 4.0 32B's layout (64 layers, where llama.cpp runs local
     * layers): three local layers to a global one without RoPE */
    {"tiny-exaone4-swa", "exaone4", "exaone4", "Synthetic Tiny EXAONE4 SWA", 64, 64, 128, 4, 2, 320,
     4096, 1000000.0f, 1e-5f, false, true, true, VOCAB_SMOL, 3, 0, true, false, 4, 0.0f, {0, 0}, 0, 0},
    /* mistral3 (Ministral 3): llama's layers under YaRN (factor 16) read
     * with its betas and log multiplier, and q's temperature (written
     * below), over an original context of 4 so that 12 positions meet it */
    {"tiny-ministral3", "mistral3", "tekken", "Synthetic Tiny Ministral3", 3, 64, 192, 4, 2, 1024,
     4096, 1000000.0f, 1e-5f, false, false, false, VOCAB_LLAMA3, 0, 0, false, false, 0, 0.0f,
     {0, 0}, 0, 0},
    /* mixtures of experts (n_ff: an expert's neurons; expert_shapes
     * says how many): Qwen3-MoE's layout (Qwen3's attention, experts of
     * their own length, 128 picking 8 in Qwen3-30B-A3B), Qwen3-VL-MoE's
     * language model (the same with RoPE sections), OLMoE's (whole-row
     * q/k norms, no grouped heads, an output matrix, 64 picking 8, the
     * weights not normalised), Granite MoE's (granite's multipliers) and
     * Mixtral's (llama with experts) */
    {"tiny-qwen3moe", "qwen3moe", "qwen2", "Synthetic Tiny Qwen3MoE", 2, 64, 32, 4, 2, 320, 4096,
     1000000.0f, 1e-6f, false, false, true, VOCAB_QWEN, 0, 32, true, false, 0, 0.0f, {0, 0}, 0, 0},
    /* LFM2-MoE's layout: tiny-lfm2's blocks, the first two FFNs dense, the
     * others experts picked by sigmoid with a bias (LFM2-8B-A1B: 32
     * experts picking 4, its first 2 layers dense) */
    {"tiny-lfm2moe", "lfm2moe", "lfm2", "Synthetic Tiny LFM2MoE", 5, 64, 32, 4, 2, 1024, 4096,
     1000000.0f, 1e-5f, false, false, true, VOCAB_LLAMA3, 0, 0, true, false, 0, 0.0f, {0, 0}, 0,
     0},
    {"tiny-qwen3vlmoe", "qwen3vlmoe", "qwen2", "Synthetic Tiny Qwen3VLMoE", 2, 64, 32, 4, 2, 320,
     4096, 5000000.0f, 1e-6f, false, false, true, VOCAB_QWEN, 0, 32, true, false, 0, 0.0f, {0, 0},
     0, 0},
    {"tiny-olmoe", "olmoe", "dbrx", "Synthetic Tiny OLMoE", 2, 64, 32, 4, 4, 1024, 4096,
     10000.0f, 1e-5f, false, false, false, VOCAB_LLAMA3, 0, 0, false, false, 0, 0.0f, {0, 0}, 0,
     0},
    {"tiny-granitemoe", "granitemoe", "refact", "Synthetic Tiny GraniteMoE", 2, 64, 32, 4, 2, 320,
     4096, 10000.0f, 1e-5f, false, false, true, VOCAB_SMOL, 3, 0, false, false, 0, 0.0f, {0, 0},
     0, 0},
    /* shared experts: Granite MoE's (ungated, beside 2 of 4), Qwen2-MoE's
     * (qwen2's attention with biases, 2 of 4 not normalised, a shared
     * expert weighed by a gate of its own) */
    {"tiny-granitemoeshared", "granitemoe", "refact", "Synthetic Tiny GraniteMoEShared", 2, 64,
     32, 4, 2, 320, 4096, 10000.0f, 1e-5f, false, false, true, VOCAB_SMOL, 3, 0, false, false, 0,
     0.0f, {0, 0}, 0, 0},
    {"tiny-qwen2moe", "qwen2moe", "qwen2", "Synthetic Tiny Qwen2MoE", 2, 64, 32, 4, 2, 320, 4096,
     1000000.0f, 1e-6f, true, false, false, VOCAB_QWEN, 0, 0, false, false, 0, 0.0f, {0, 0}, 0,
     0},
    {"tiny-mixtral", "llama", "smollm", "Synthetic Tiny Mixtral", 2, 64, 64, 4, 2, 320, 4096,
     1000000.0f, 1e-5f, false, false, false, VOCAB_SMOL, 3, 0, false, false, 0, 0.0f, {0, 0}, 0,
     0},
    /* rows of 256 and 512, whole blocks of the 256-element K and IQ4_XS
     * formats, so that a file of those types uses them in every matrix */
    {"tiny-k", "llama", "smollm", "Synthetic Tiny K", 2, 256, 512, 4, 2, 320, 2048, 10000.0f, 1e-5f,
     false, false, false, VOCAB_SMOL, 3, 0, false, false, 0, 0.0f, {0, 0}, 0, 0},
    {"gemma-4-e2b", "gemma4", "smollm", "Synthetic Gemma 4 E2B", 35, 1536, 6144, 8, 1, 262144,
     131072, 1000000.0f, 1e-6f, false, false, true, VOCAB_SMOL, 17, 512, true, false, 512, 0.0f,
     {0, 0}, 0, 0},
    /* Gemma 4 26B-A4B's (25.2 B parameters as published): 128 experts of
     * 704 picking 8 beside an MLP of 2112 (expert_shapes), heads of 256
     * (local, 8 KV heads) and 512 (global), a window of 1024 */
    {"gemma-4-26b-a4b", "gemma4", "smollm", "Synthetic Gemma 4 26B-A4B", 30, 2816, 704, 16, 8,
     262144, 262144, 1000000.0f, 1e-6f, false, false, true, VOCAB_SMOL, 17, 512, true, false,
     1024, 0.0f, {0, 0}, 0, 0},
    /* Gemma 3n E2B's and E4B's published configs (the vocabulary with the
     * 256 rows the converter pads for vision and audio tokens) */
    {"gemma3n-e2b", "gemma3n", "smollm", "Synthetic Gemma 3n E2B", 30, 2048, 8192, 8, 2, 262400,
     32768, 1000000.0f, 1e-6f, false, false, true, VOCAB_SMOL, 17, 256, true, false, 512, 0.0f,
     {0, 30.0f}, 0, 0},
    {"gemma3n-e4b", "gemma3n", "smollm", "Synthetic Gemma 3n E4B", 35, 2048, 16384, 8, 2, 262400,
     32768, 1000000.0f, 1e-6f, false, false, true, VOCAB_SMOL, 17, 256, true, false, 512, 0.0f,
     {0, 30.0f}, 0, 0},
    {"gemma-3-1b", "gemma3", "smollm", "Synthetic Gemma 3 1B", 26, 1152, 6912, 4, 1, 262144,
     32768, 1000000.0f, 1e-6f, false, false, true, VOCAB_SMOL, 17, 256, true, false, 512, 0.0f, {0, 0}, 0, 0},
    {"smollm2-135m", "llama", "smollm", "Synthetic SmolLM2 135M", 30, 576, 1536, 9, 3, 49152,
     8192, 100000.0f, 1e-5f, false, false, true, VOCAB_SMOL, 17, 0, false, false, 0, 0.0f, {0, 0}, 0, 0},
    /* LFM2-350M's shape: attention in layers 2, 5, 8, 10, 12 and 14 */
    {"lfm2-350m", "lfm2", "lfm2", "Synthetic LFM2 350M", 16, 1024, 4608, 16, 8, 65536, 128000,
     1000000.0f, 1e-5f, false, false, true, VOCAB_LLAMA3, 0, 0, true, false, 0, 0.0f, {0, 0}, 0, 0},
    /* Qwen3-30B-A3B's shape: 128 experts of 768 picking 8, heads of 128
     * (17 GB in Q4_1: --layers N for a slice of it) */
    {"qwen3-30b-a3b", "qwen3moe", "qwen2", "Synthetic Qwen3 30B-A3B", 48, 2048, 768, 32, 4,
     151936, 40960, 1000000.0f, 1e-6f, false, false, false, VOCAB_QWEN, 0, 128, true, false, 0,
     0.0f, {0, 0}, 0, 0},
    /* LFM2-8B-A1B's shape: 32 experts of 1792 picking 4 after two dense
     * FFNs of 7168; attention in six layers */
    {"lfm2-8b-a1b", "lfm2moe", "lfm2", "Synthetic LFM2 8B-A1B", 24, 2048, 1792, 32, 8, 65536,
     128000, 1000000.0f, 1e-5f, false, false, true, VOCAB_LLAMA3, 0, 0, true, false, 0, 0.0f,
     {0, 0}, 0, 0},
    /* Granite 4.0-H Tiny's shape (7B-A1B: 64 experts of 512 picking 6 and
     * a shared one of 1024, Mamba-2 in 35 of 40 layers) */
    {"granite-4.0-h-tiny", "granitehybrid", "refact", "Synthetic Granite 4.0 H Tiny", 40, 1536,
     512, 12, 4, 100352, 32768, 10000.0f, 1e-5f, false, false, true, VOCAB_SMOL, 17, 0, false,
     false, 0, 0.0f, {0, 0}, 0, 0},
    /* Granite 4.0-H 350M's and 1B's shapes (Mamba-2 in 28 of 32 and 35 of
     * 40 layers: ssm_shapes) */
    {"granite-4.0-h-350m", "granitehybrid", "refact", "Synthetic Granite 4.0 H 350M", 32, 768,
     2048, 12, 4, 100352, 32768, 10000.0f, 1e-5f, false, false, true, VOCAB_SMOL, 17, 0, false,
     false, 0, 0.0f, {0, 0}, 0, 0},
    {"granite-4.0-h-1b", "granitehybrid", "refact", "Synthetic Granite 4.0 H 1B", 40, 1536,
     4096, 12, 4, 100352, 32768, 10000.0f, 1e-5f, false, false, true, VOCAB_SMOL, 17, 0, false,
     false, 0, 0.0f, {0, 0}, 0, 0},
    /* Granite 3.1 1B-A400M's shape: 32 experts of 512 picking 8 */
    {"granite-3.1-1b-a400m", "granitemoe", "refact", "Synthetic Granite 3.1 1B-A400M", 24, 1024,
     512, 16, 8, 49152, 131072, 10000.0f, 1e-6f, false, false, true, VOCAB_SMOL, 17, 0, false,
     false, 0, 0.0f, {0, 0}, 0, 0},
    /* OLMoE-1B-7B's shape: 64 experts of 1024 picking 8 */
    {"olmoe-1b-7b", "olmoe", "dbrx", "Synthetic OLMoE 1B-7B", 16, 2048, 1024, 16, 16, 50304,
     4096, 10000.0f, 1e-5f, false, false, false, VOCAB_LLAMA3, 0, 0, false, false, 0, 0.0f,
     {0, 0}, 0, 0},
    /* Qwen3.5 0.8B's, 2B's and 4B's shapes (their configs: heads of 256,
     * 64 dimensions rotating, delta nets of 128-wide heads) */
    {"qwen3.5-0.8b", "qwen35", "qwen35", "Synthetic Qwen3.5 0.8B", 24, 1024, 3584, 8, 2, 248320,
     262144, 10000000.0f, 1e-6f, false, false, true, VOCAB_QWEN, 0, 256, true, false, 0, 0.0f,
     {0, 0}, 0, 64},
    {"qwen3.5-2b", "qwen35", "qwen35", "Synthetic Qwen3.5 2B", 24, 2048, 6144, 8, 2, 248320,
     262144, 10000000.0f, 1e-6f, false, false, true, VOCAB_QWEN, 0, 256, true, false, 0, 0.0f,
     {0, 0}, 0, 64},
    {"qwen3.5-4b", "qwen35", "qwen35", "Synthetic Qwen3.5 4B", 32, 2560, 9216, 16, 4, 248320,
     262144, 10000000.0f, 1e-6f, false, false, true, VOCAB_QWEN, 0, 256, true, false, 0, 0.0f,
     {0, 0}, 0, 64},
    {"llama-3.2-1b", "llama", "llama-bpe", "Synthetic Llama 3.2 1B", 16, 2048, 8192, 32, 8,
     128256, 131072, 500000.0f, 1e-5f, false, true, true, VOCAB_LLAMA3, 0, 0, false, false, 0, 0.0f, {0, 0}, 0, 0},
    {"llama-3.2-3b", "llama", "llama-bpe", "Synthetic Llama 3.2 3B", 28, 3072, 8192, 24, 8,
     128256, 131072, 500000.0f, 1e-5f, false, true, true, VOCAB_LLAMA3, 0, 0, false, false, 0, 0.0f, {0, 0}, 0, 0},
    /* ERNIE-4.5-21B-A3B's: a dense first layer of 12288, then 64 experts
     * of 1536 picking 6 beside two shared ones (3072; expert_shapes) */
    {"ernie-4.5-21b-a3b", "ernie4_5-moe", "smollm", "Synthetic ERNIE 4.5 21B-A3B", 28, 2560, 1536,
     20, 4, 103424, 131072, 500000.0f, 1e-5f, false, false, true, VOCAB_SMOL, 3, 128, false,
     false, 0, 0.0f, {0, 0}, 0, 0},
    /* GLM-4-9B-0414's (heads of 128, half rotating; q/k/v biases) */
    /* gpt-oss-20b's and 120b's published configs */
    {"gpt-oss-20b", "gpt-oss", "gpt-4o", "Synthetic GPT-OSS 20B", 24, 2880, 2880, 64, 8, 201088,
     131072, 150000.0f, 1e-5f, true, false, false, VOCAB_LLAMA3, 0, 64, false, false, 128, 0.0f,
     {0, 0}, 0, 0},
    {"gpt-oss-120b", "gpt-oss", "gpt-4o", "Synthetic GPT-OSS 120B", 36, 2880, 2880, 64, 8, 201088,
     131072, 150000.0f, 1e-5f, true, false, false, VOCAB_LLAMA3, 0, 64, false, false, 128, 0.0f,
     {0, 0}, 0, 0},
    {"glm-4-9b", "glm4", "glm4", "Synthetic GLM-4 9B", 40, 4096, 13696, 32, 2, 151552, 32768,
     10000.0f, 1e-5f, true, false, false, VOCAB_LLAMA3, 0, 128, false, false, 0, 0.0f, {0, 0}, 0,
     64},
    {"qwen2.5-3b", "qwen2", "qwen2", "Synthetic Qwen2.5 3B", 36, 2048, 11008, 16, 2, 151936,
     32768, 1000000.0f, 1e-6f, true, false, true, VOCAB_QWEN, 0, 0, false, false, 0, 0.0f, {0, 0}, 0, 0},
    /* Falcon-H1 0.5B and 1.5B: depth, widths, heads and states as
     * published; the FFN's width and the vocabulary as their parameter
     * counts imply (2048 and 32784; 4096 and 65537), unverified here */
    {"falcon-h1-0.5b", "falcon-h1", "falcon-h1", "Synthetic Falcon-H1 0.5B", 36, 1024, 2048, 8, 2,
     32784, 16384, 100000000000.0f, 1e-5f, false, false, false, VOCAB_LLAMA3, 0, 64, false,
     false, 0, 0.0f, {0, 0}, 0, 0},
    {"falcon-h1-1.5b", "falcon-h1", "falcon-h1", "Synthetic Falcon-H1 1.5B", 24, 2048, 4096, 8, 2,
     65537, 131072, 100000000000.0f, 1e-5f, false, false, false, VOCAB_LLAMA3, 0, 128, false,
     false, 0, 0.0f, {0, 0}, 0, 0},
    /* Nemotron-H 4B and 8B, NVIDIA-Nemotron-Nano-9B-v2: depth, widths,
     * heads and mixers as published (their vocabulary of 131072) */
    {"nemotron-h-4b", "nemotron_h", "tekken", "Synthetic Nemotron-H 4B", 52, 3072, 12288, 32, 8,
     131072, 8192, 10000.0f, 1e-5f, false, false, false, VOCAB_LLAMA3, 0, 128, false, false, 0,
     0.0f, {0, 0}, 0, 0},
    {"nemotron-h-8b", "nemotron_h", "tekken", "Synthetic Nemotron-H 8B", 52, 4096, 21504, 32, 8,
     131072, 8192, 10000.0f, 1e-5f, false, false, false, VOCAB_LLAMA3, 0, 128, false, false, 0,
     0.0f, {0, 0}, 0, 0},
    {"nemotron-nano-9b-v2", "nemotron_h", "tekken", "Synthetic NVIDIA Nemotron Nano 9B v2", 56,
     4480, 15680, 40, 8, 131072, 131072, 10000.0f, 1e-5f, false, false, false, VOCAB_LLAMA3, 0,
     128, false, false, 0, 0.0f, {0, 0}, 0, 0},
    /* NVIDIA-Nemotron-3-Nano-30B-A3B (nemotron_h_moe): 128 experts of 1856
     * (n_ff), 6 a token, a shared one of 3712, mixers of 64 heads of 64 */
    {"nemotron-3-nano-30b-a3b", "nemotron_h_moe", "tekken",
     "Synthetic NVIDIA Nemotron 3 Nano 30B-A3B", 52, 2688, 1856, 32, 2, 131072, 262144, 10000.0f,
     1e-5f, false, false, false, VOCAB_LLAMA3, 0, 128, false, false, 0, 0.0f, {0, 0}, 0, 0},
};

static const char *const smol_specials[] = {
    "<|endoftext|>", "<|im_start|>", "<|im_end|>", "<repo_name>", "<reponame>", "<file_sep>",
    "<filename>", "<gh_stars>", "<issue_start>", "<issue_comment>", "<issue_closed>",
    "<jupyter_start>", "<jupyter_text>", "<jupyter_code>", "<jupyter_output>",
    "<jupyter_script>", "<empty_output>",
};

static const char *const qwen_specials[] = {
    "<|endoftext|>", "<|im_start|>", "<|im_end|>", "<|object_ref_start|>", "<|object_ref_end|>",
    "<|box_start|>", "<|box_end|>", "<|quad_start|>", "<|quad_end|>", "<|vision_start|>",
    "<|vision_end|>", "<|vision_pad|>", "<|image_pad|>", "<|video_pad|>", "<tool_call>",
    "</tool_call>", "<|fim_prefix|>", "<|fim_middle|>", "<|fim_suffix|>", "<|fim_pad|>",
    "<|repo_name|>", "<|file_sep|>",
};

static const char *const tmpl_smol =
    "{% for message in messages %}{% if loop.first and messages[0]['role'] != 'system' %}"
    "{{ '<|im_start|>system\nYou are a helpful AI assistant named SmolLM, trained by Hugging "
    "Face<|im_end|>\n' }}{% endif %}{{'<|im_start|>' + message['role'] + '\n' + "
    "message['content'] + '<|im_end|>' + '\n'}}{% endfor %}{% if add_generation_prompt %}"
    "{{ '<|im_start|>assistant\n' }}{% endif %}";

static const char *const tmpl_llama3 =
    "{{- bos_token }}{%- for message in messages %}{{- '<|start_header_id|>' + message['role'] "
    "+ '<|end_header_id|>\n\n' + message['content'] | trim + '<|eot_id|>' }}{%- endfor %}"
    "{%- if add_generation_prompt %}{{- '<|start_header_id|>assistant<|end_header_id|>\n\n' }}"
    "{%- endif %}";

static const char *const tmpl_qwen =
    "{%- for message in messages %}{%- if loop.first and messages[0]['role'] != 'system' %}"
    "{{- '<|im_start|>system\nYou are Qwen, created by Alibaba Cloud. You are a helpful "
    "assistant.<|im_end|>\n' }}{%- endif %}{{- '<|im_start|>' + message['role'] + '\n' + "
    "message['content'] + '<|im_end|>\n' }}{%- endfor %}{%- if add_generation_prompt %}"
    "{{- '<|im_start|>assistant\n' }}{%- endif %}";

/* Words whose left-to-right merge chains seed the vocabulary (with and
 * without the leading space), most common first. */
static const char *const words[] = {
    "the", "and", "of", "to", "in", "is", "that", "it", "for", "was", "on", "are", "with", "as",
    "be", "this", "have", "not", "you", "by", "at", "from", "or", "but", "they", "his", "her",
    "she", "he", "we", "can", "all", "one", "will", "there", "what", "about", "which", "when",
    "your", "more", "their", "if", "has", "would", "so", "time", "people", "like", "just",
    "hello", "world", "model", "language", "question", "answer", "system", "user", "assistant",
    "help", "helpful", "name", "day", "good", "how", "do", "does", "why", "where", "who", "some",
    "other", "than", "then", "these", "them", "into", "only", "also", "new", "first", "any",
    "know", "could", "make", "because", "most", "many", "well", "very", "after", "should",
    "write", "story", "short", "explain", "simple", "number", "sun", "water", "city", "capital",
    "France", "Paris", "The", "It", "I", "A", "In", "This", "What", "How", "Hello", "ing", "ed",
    "tion", "er", "ly", "es", "ment", "ness", "able",
};

/* ---- deterministic random numbers ---- */

static uint64_t splitmix(uint64_t *s)
{
    uint64_t z = (*s += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

/* Approximately N(0,1): the sum of four 16-bit uniforms (Irwin-Hall), which
 * is cheap enough to fill 3B weights in seconds. */
static float rand_normal(uint64_t *s)
{
    uint64_t r = splitmix(s);
    float sum = (float)(r & 0xffff) + (float)((r >> 16) & 0xffff) + (float)((r >> 32) & 0xffff) +
                (float)(r >> 48);
    return (sum / 65536.0f - 2.0f) * 1.7320508f;
}

/* U(0, 1) */
static float rand_uniform(uint64_t *s)
{
    return (float)(splitmix(s) >> 40) / 16777216.0f;
}

static uint64_t hash_str(const char *s)
{
    uint64_t h = 1469598103934665603ull;
    for (; *s; s++)
        h = (h ^ (uint8_t)*s) * 1099511628211ull;
    return h;
}

/* ---- vocabulary ---- */

typedef struct vocab {
    char **tok;
    int32_t *type;
    size_t n, cap;
    char **merge;
    size_t n_merge, cap_merge;
    /* open-addressing set of token texts, for uniqueness */
    char **set;
    int64_t *mset; /* merge index by "a b" text, -1 empty; same capacity */
    size_t set_cap;
} vocab;

static void *xrealloc(void *p, size_t n)
{
    p = realloc(p, n);
    if (!p) {
        fprintf(stderr, "si-synth: out of memory\n");
        exit(1);
    }
    return p;
}

static char *xstrdup(const char *s)
{
    char *d = strdup(s);
    if (!d) {
        fprintf(stderr, "si-synth: out of memory\n");
        exit(1);
    }
    return d;
}

static bool set_has(const vocab *v, const char *s)
{
    for (size_t i = hash_str(s) & (v->set_cap - 1);; i = (i + 1) & (v->set_cap - 1)) {
        if (!v->set[i])
            return false;
        if (strcmp(v->set[i], s) == 0)
            return true;
    }
}

static void add_token(vocab *v, const char *s, int32_t type)
{
    if (v->n == v->cap) {
        v->cap = v->cap ? 2 * v->cap : 1024;
        v->tok = xrealloc(v->tok, v->cap * sizeof(*v->tok));
        v->type = xrealloc(v->type, v->cap * sizeof(*v->type));
    }
    char *d = xstrdup(s);
    v->tok[v->n] = d;
    v->type[v->n] = type;
    v->n++;
    size_t i = hash_str(s) & (v->set_cap - 1);
    while (v->set[i])
        i = (i + 1) & (v->set_cap - 1);
    v->set[i] = d;
}

/* Merge ranks by text "a b", for simulating BPE while building. */
static size_t merge_slot(const vocab *v, const char *m)
{
    size_t i = hash_str(m) & (v->set_cap - 1);
    while (v->mset[i] >= 0 && strcmp(v->merge[v->mset[i]], m) != 0)
        i = (i + 1) & (v->set_cap - 1);
    return i;
}

/* Appends the merge "a b" (the lowest priority so far) and the token ab
 * unless it exists. */
static void add_merge(vocab *v, const char *a, const char *b)
{
    size_t la = strlen(a), lb = strlen(b);
    char *m = xrealloc(NULL, la + lb + 2);
    memcpy(m, a, la);
    m[la] = ' ';
    memcpy(m + la + 1, b, lb + 1);
    size_t slot = merge_slot(v, m);
    if (v->mset[slot] >= 0) {
        free(m);
        return;
    }
    if (v->n_merge == v->cap_merge) {
        v->cap_merge = v->cap_merge ? 2 * v->cap_merge : 1024;
        v->merge = xrealloc(v->merge, v->cap_merge * sizeof(*v->merge));
    }
    v->mset[slot] = (int64_t)v->n_merge;
    v->merge[v->n_merge++] = m;
    char *tok = xrealloc(NULL, la + lb + 1);
    memcpy(tok, a, la);
    memcpy(tok + la, b, lb + 1);
    if (!set_has(v, tok))
        add_token(v, tok, 1);
    free(tok);
}

#define MAX_PIECES 64
#define PIECE_LEN 128

/* Byte-pair encodes pieces in place with the merges so far (lowest rank first). */
static void bpe(const vocab *v, char (*p)[PIECE_LEN], int *np)
{
    char m[2 * PIECE_LEN + 2];
    for (;;) {
        int best = -1;
        int64_t best_rank = INT64_MAX;
        for (int i = 0; i + 1 < *np; i++) {
            snprintf(m, sizeof(m), "%s %s", p[i], p[i + 1]);
            int64_t r = v->mset[merge_slot(v, m)];
            if (r >= 0 && r < best_rank) {
                best_rank = r;
                best = i;
            }
        }
        if (best < 0 || strlen(p[best]) + strlen(p[best + 1]) >= PIECE_LEN)
            return;
        strcat(p[best], p[best + 1]);
        memmove(p[best + 1], p[best + 2], (size_t)(*np - best - 2) * PIECE_LEN);
        (*np)--;
    }
}

/* GPT-2's byte -> code point map: printable bytes map to themselves, the
 * others to 256 + n in byte order. */
static int byte_cp(int b)
{
    if ((b >= 33 && b <= 126) || (b >= 161 && b <= 172) || (b >= 174 && b <= 255))
        return b;
    int n = 0;
    for (int c = 0; c < b; c++)
        if (!((c >= 33 && c <= 126) || (c >= 161 && c <= 172) || (c >= 174 && c <= 255)))
            n++;
    return 256 + n;
}

static void cp_utf8(int cp, char *out)
{
    if (cp < 0x80) {
        out[0] = (char)cp;
        out[1] = 0;
    } else {
        out[0] = (char)(0xc0 | (cp >> 6));
        out[1] = (char)(0x80 | (cp & 0x3f));
        out[2] = 0;
    }
}

/* Adds merges until word (with a leading space if asked) is one token:
 * encode it with the merges so far, merge the first two pieces, repeat.
 * Each new merge has the lowest priority, so the word stays reachable. */
static void add_word(vocab *v, const char *word, bool space, size_t limit)
{
    char p[MAX_PIECES][PIECE_LEN];
    int np = 0;
    if (space)
        cp_utf8(byte_cp(' '), p[np++]);
    for (const char *c = word; *c && np < MAX_PIECES; c++)
        cp_utf8(byte_cp((uint8_t)*c), p[np++]);
    for (;;) {
        bpe(v, p, &np);
        if (np <= 1 || v->n >= limit)
            return;
        if (strlen(p[0]) + strlen(p[1]) >= PIECE_LEN)
            return;
        add_merge(v, p[0], p[1]);
    }
}

static void build_vocab(vocab *v, const shape *sh, uint64_t seed)
{
    memset(v, 0, sizeof(*v));
    v->set_cap = 1;
    while (v->set_cap < 4 * (size_t)sh->n_vocab)
        v->set_cap <<= 1;
    v->set = calloc(v->set_cap, sizeof(*v->set));
    v->mset = malloc(v->set_cap * sizeof(*v->mset));
    if (v->mset)
        memset(v->mset, 0xff, v->set_cap * sizeof(*v->mset));
    if (!v->set || !v->mset) {
        fprintf(stderr, "si-synth: out of memory\n");
        exit(1);
    }

    size_t n_normal; /* token count before trailing specials */
    if (sh->vocab == VOCAB_SMOL) {
        for (int i = 0; i < sh->n_smol_specials; i++)
            add_token(v, smol_specials[i], 3);
        n_normal = (size_t)sh->n_vocab;
    } else if (sh->vocab == VOCAB_LLAMA3) {
        n_normal = (size_t)sh->n_vocab - 256;
    } else {
        /* Qwen2.5: 151643 normal tokens, 22 added, the rest padding; tiny
         * shapes keep just <|endoftext|>, <|im_start|>, <|im_end|>. */
        n_normal = sh->n_vocab > 1000 ? 151643 : (size_t)sh->n_vocab - 3;
    }

    /* the 256 byte tokens in GPT-2 order: printable bytes first */
    char piece[4];
    for (int pass = 0; pass < 2; pass++) {
        for (int b = 0; b < 256; b++) {
            bool printable = byte_cp(b) == b;
            if (printable == (pass == 0)) {
                cp_utf8(byte_cp(b), piece);
                add_token(v, piece, 1);
            }
        }
    }

    /* a few whitespace merges real vocabularies have early on */
    char sp[4], nl[4], sp2[8], nl2[8];
    cp_utf8(byte_cp(' '), sp);
    cp_utf8(byte_cp('\n'), nl);
    snprintf(sp2, sizeof(sp2), "%s%s", sp, sp);
    snprintf(nl2, sizeof(nl2), "%s%s", nl, nl);
    if (v->n < n_normal)
        add_merge(v, sp, sp);
    if (v->n < n_normal)
        add_merge(v, nl, nl);
    if (v->n < n_normal)
        add_merge(v, sp2, sp2);

    for (size_t w = 0; w < sizeof(words) / sizeof(words[0]) && v->n < n_normal; w++) {
        add_word(v, words[w], true, n_normal);
        add_word(v, words[w], false, n_normal);
    }

    /* fill with pronounceable pseudo-words */
    static const char cons[] = "bcdfghjklmnprstvwyz";
    static const char vow[] = "aeiou";
    uint64_t s = seed ^ 0x5eed0fb0ca75ull;
    while (v->n < n_normal) {
        char word[24];
        int syl = 1 + (int)(splitmix(&s) % 4), len = 0;
        for (int i = 0; i < syl; i++) {
            uint64_t r = splitmix(&s);
            word[len++] = cons[r % (sizeof(cons) - 1)];
            word[len++] = vow[(r >> 8) % (sizeof(vow) - 1)];
            if ((r >> 16) % 3 == 0)
                word[len++] = cons[(r >> 24) % (sizeof(cons) - 1)];
        }
        word[len] = 0;
        add_word(v, word, (splitmix(&s) & 3) != 0, n_normal);
    }

    if (sh->vocab == VOCAB_LLAMA3) {
        static const char *const named[] = {
            "<|begin_of_text|>", "<|end_of_text|>", "<|reserved_special_token_0|>",
            "<|reserved_special_token_1|>", "<|finetune_right_pad_id|>",
            "<|reserved_special_token_2|>", "<|start_header_id|>", "<|end_header_id|>",
            "<|eom_id|>", "<|eot_id|>", "<|python_tag|>",
        };
        /* (lfm2: LFM2's markers of turns, tools and reasoning in place of
         * the first reserved ones) */
        static const char *const lfm2[] = {
            "<|im_start|>", "<|im_end|>", "<|tool_list_start|>", "<|tool_list_end|>",
            "<|tool_call_start|>", "<|tool_call_end|>", "<|tool_response_start|>",
            "<|tool_response_end|>", "<think>", "</think>",
        };
        const bool lf = !strncmp(sh->arch, "lfm2", 4);
        for (int i = 0; i < 256; i++) {
            char buf[64];
            if (i < 11)
                snprintf(buf, sizeof(buf), "%s", named[i]);
            else if (lf && i - 11 < (int)(sizeof(lfm2) / sizeof(lfm2[0])))
                snprintf(buf, sizeof(buf), "%s", lfm2[i - 11]);
            else
                snprintf(buf, sizeof(buf), "<|reserved_special_token_%d|>", i - 11 + 3);
            add_token(v, buf, 3);
        }
    } else if (sh->vocab == VOCAB_QWEN) {
        size_t n_spec = sh->n_vocab > 1000 ? sizeof(qwen_specials) / sizeof(qwen_specials[0]) : 3;
        for (size_t i = 0; i < n_spec; i++)
            add_token(v, qwen_specials[i], qwen_specials[i][1] == '|' ? 3 : 4);
        while (v->n < (size_t)sh->n_vocab) {
            char buf[32];
            snprintf(buf, sizeof(buf), "[PAD%zu]", v->n);
            add_token(v, buf, 5); /* unused */
        }
    }
}

static int32_t find_tok(const vocab *v, const char *s)
{
    for (size_t i = 0; i < v->n; i++)
        if (strcmp(v->tok[i], s) == 0)
            return (int32_t)i;
    return -1;
}

static void free_vocab(vocab *v)
{
    for (size_t i = 0; i < v->n; i++)
        free(v->tok[i]);
    for (size_t i = 0; i < v->n_merge; i++)
        free(v->merge[i]);
    free(v->tok);
    free(v->type);
    free(v->merge);
    free(v->set);
    free(v->mset);
}

/* ---- tensors ---- */

typedef struct tdesc {
    char name[64];
    uint32_t type;
    uint32_t n_dims;
    uint64_t ne[3];
    enum { INIT_RANDOM, INIT_ONES, INIT_BIAS, INIT_ROPE, INIT_NORM, INIT_ROPE_LONG, INIT_ROPE_SHORT,
           INIT_SSM_A, INIT_SSM_DT, INIT_ROPE_PROP, INIT_SCALE, INIT_QNORM, INIT_RSCALE,
           INIT_OSS_BIAS, INIT_SINK, INIT_ALTUP, INIT_ROUTER } init;
} tdesc;

static const struct {
    const char *name;
    uint32_t type;
    uint32_t ftype; /* general.file_type (llama_ftype) */
} type_opts[] = {
    {"f32", GGML_TYPE_F32, 0},   {"f16", GGML_TYPE_F16, 1},   {"bf16", GGML_TYPE_BF16, 32},
    {"q8_0", GGML_TYPE_Q8_0, 7}, {"q4_0", GGML_TYPE_Q4_0, 2}, {"q4_1", GGML_TYPE_Q4_1, 3},
    {"q5_0", GGML_TYPE_Q5_0, 8}, {"q5_1", GGML_TYPE_Q5_1, 9}, {"q4_k", GGML_TYPE_Q4_K, 15},
    {"q5_k", GGML_TYPE_Q5_K, 17}, {"q6_k", GGML_TYPE_Q6_K, 18}, {"q2_k", GGML_TYPE_Q2_K, 10},
    {"q3_k", GGML_TYPE_Q3_K, 11}, {"iq4_nl", GGML_TYPE_IQ4_NL, 25}, {"iq4_xs", GGML_TYPE_IQ4_XS, 30},
    {"mxfp4", GGML_TYPE_MXFP4, 38}, /* LLAMA_FTYPE_MOSTLY_MXFP4_MOE: see matrix_type */
};

/* The type the matrix name of row length ne0 gets: MXFP4 only for the
 * experts' (llama-quantize's MXFP4_MOE, gpt-oss's files, gives the 3-D
 * tensors, here the *_exps ones, MXFP4 and every other matrix Q8_0); K
 * types fall back as llama-quantize does when rows are not a multiple of
 * 256, then F16. */
static uint32_t matrix_type(uint32_t want, const char *name, uint64_t ne0)
{
    if (want == GGML_TYPE_MXFP4 && !strstr(name, "_exps"))
        want = GGML_TYPE_Q8_0;
    if (ne0 % ggml_type_block_elems(want) == 0)
        return want;
    switch (want) {
    case GGML_TYPE_Q4_K: want = GGML_TYPE_Q5_0; break;
    case GGML_TYPE_Q5_K: want = GGML_TYPE_Q5_1; break;
    case GGML_TYPE_Q6_K: want = GGML_TYPE_Q8_0; break;
    case GGML_TYPE_Q2_K:
    case GGML_TYPE_Q3_K:
    case GGML_TYPE_IQ4_XS: want = GGML_TYPE_IQ4_NL; break;
    default: break;
    }
    return ne0 % ggml_type_block_elems(want) == 0 ? want : GGML_TYPE_F16;
}

static void push(tdesc *t, size_t *n, const char *name, uint32_t type, uint32_t n_dims,
                 uint64_t ne0, uint64_t ne1, int init)
{
    tdesc *d = &t[(*n)++];
    snprintf(d->name, sizeof(d->name), "%s", name);
    d->n_dims = n_dims;
    d->ne[0] = ne0;
    d->ne[1] = ne1;
    d->ne[2] = 1;
    d->type = n_dims == 1 ? GGML_TYPE_F32 : matrix_type(type, name, ne0);
    d->init = init;
}

/* experts' matrices, [ne0, ne1, n_expert] */
static void push3(tdesc *t, size_t *n, const char *name, uint32_t type, uint64_t ne0,
                  uint64_t ne1, uint64_t ne2)
{
    push(t, n, name, type, 2, ne0, ne1, INIT_RANDOM);
    t[*n - 1].n_dims = 3;
    t[*n - 1].ne[2] = ne2;
}

/* Llama 3 rope scaling ("llama3": factor 32, low 1, high 4, original
 * context 8192) expressed as per-frequency divisors, as convert_hf_to_gguf
 * stores them in rope_freqs.weight. */
static float llama3_rope_factor(int i, int head_dim, float base)
{
    const double factor = 32.0, low = 1.0, high = 4.0, old_ctx = 8192.0;
    double freq = 1.0 / pow(base, (2.0 * i) / head_dim);
    double wavelen = 2.0 * M_PI / freq;
    double low_wl = old_ctx / low, high_wl = old_ctx / high;
    if (wavelen < high_wl)
        return 1.0f;
    if (wavelen > low_wl)
        return (float)factor;
    double smooth = (old_ctx / wavelen - low) / (high - low);
    return (float)(1.0 / ((1.0 - smooth) / factor + smooth));
}

/* Copies every tokenizer.* key of src (a model's, or a vocabulary-only
 * GGUF) but the chat template when skip_template; returns 0 or -1. */
static int copy_tokenizer(gguf_writer *w, const gguf_file *src, bool skip_template)
{
    for (size_t i = 0; i < gguf_n_kv(src); i++) {
        const char *k = gguf_key_name(src, (int)i);
        if (strncmp(k, "tokenizer.", 10) != 0 || (skip_template && !strcmp(k, "tokenizer.chat_template")))
            continue;
        enum gguf_type t = gguf_key_type(src, (int)i);
        int r = -1;
        if (t == GGUF_TYPE_STRING) {
            const char *v;
            size_t n;
            char *z = gguf_get_str(src, k, &v, &n) == 0 ? strndup(v, n) : NULL;
            r = z ? gguf_writer_set_str(w, k, z) : -1;
            free(z);
        } else if (t == GGUF_TYPE_BOOL) {
            bool b;
            r = gguf_get_bool(src, k, &b) == 0 ? gguf_writer_set_bool(w, k, b) : -1;
        } else if (t == GGUF_TYPE_FLOAT32 || t == GGUF_TYPE_FLOAT64) {
            float f;
            r = gguf_get_f32(src, k, &f) == 0 ? gguf_writer_set_f32(w, k, f) : -1;
        } else if (t == GGUF_TYPE_INT32 || t == GGUF_TYPE_INT8 || t == GGUF_TYPE_INT16 || t == GGUF_TYPE_INT64) {
            int32_t x;
            r = gguf_get_i32(src, k, &x) == 0 ? gguf_writer_set_i32(w, k, x) : -1;
        } else if (t != GGUF_TYPE_ARRAY) {
            uint32_t x;
            r = gguf_get_u32(src, k, &x) == 0 ? gguf_writer_set_u32(w, k, x) : -1;
        } else {
            enum gguf_type et;
            uint64_t n;
            if (gguf_get_arr_info(src, k, &et, &n) < 0 || n > (1u << 24)) {
                fprintf(stderr, "si-synth: %s: not an array of at most 2^24 values\n", k);
                return -1;
            }
            if (et == GGUF_TYPE_STRING) {
                char **sv = calloc(n ? n : 1, sizeof(*sv));
                r = sv ? 0 : -1;
                for (uint64_t j = 0; r == 0 && j < n; j++) {
                    const char *v;
                    size_t len;
                    r = gguf_get_arr_str(src, k, j, &v, &len) == 0 && (sv[j] = strndup(v, len)) ? 0 : -1;
                }
                if (r == 0)
                    r = gguf_writer_set_arr_str(w, k, (const char *const *)sv, n);
                for (uint64_t j = 0; sv && j < n; j++)
                    free(sv[j]);
                free(sv);
            } else {
                /* numbers: scores as f32, the rest (token types) as i32 */
                const bool f32 = et == GGUF_TYPE_FLOAT32;
                union { float f; int32_t i; } *nv = malloc((n ? n : 1) * sizeof(*nv));
                r = nv ? 0 : -1;
                for (uint64_t j = 0; r == 0 && j < n; j++)
                    r = f32 ? gguf_get_arr_f32(src, k, j, &nv[j].f) : gguf_get_arr_i32(src, k, j, &nv[j].i);
                if (r == 0)
                    r = gguf_writer_set_arr(w, k, f32 ? GGUF_TYPE_FLOAT32 : GGUF_TYPE_INT32, nv, n);
                free(nv);
            }
        }
        if (r < 0) {
            fprintf(stderr, "si-synth: cannot copy %s\n", k);
            return -1;
        }
    }
    return 0;
}

/* --kv KEY=TYPE:VALUE into w; -1 when malformed. */
static int set_kv(gguf_writer *w, const char *spec)
{
    char key[128];
    const char *eq = strchr(spec, '='), *colon = eq ? strchr(eq, ':') : NULL;
    if (!eq || !colon || (size_t)(eq - spec) >= sizeof(key) || eq == spec)
        return -1;
    memcpy(key, spec, (size_t)(eq - spec));
    key[eq - spec] = '\0';
    const size_t tl = (size_t)(colon - eq - 1);
    const char *v = colon + 1;
    char *end;
    errno = 0;
    if (tl == 3 && !strncmp(eq + 1, "u32", 3)) {
        unsigned long x = strtoul(v, &end, 0);
        return errno || *end || !*v || x > UINT32_MAX ? -1 : gguf_writer_set_u32(w, key, (uint32_t)x);
    }
    if (tl == 3 && !strncmp(eq + 1, "f32", 3)) {
        float x = strtof(v, &end);
        return errno || *end || !*v ? -1 : gguf_writer_set_f32(w, key, x);
    }
    if (tl == 3 && !strncmp(eq + 1, "str", 3))
        return gguf_writer_set_str(w, key, v);
    if (tl == 4 && !strncmp(eq + 1, "bool", 4) && (!strcmp(v, "0") || !strcmp(v, "1")))
        return gguf_writer_set_bool(w, key, *v == '1');
    if (tl == 5 && !strncmp(eq + 1, "bools", 5)) {
        uint8_t a[128];
        size_t n = 0;
        for (const char *p = v;; p += 2) { /* "0" or "1", then "," or the end */
            if ((*p != '0' && *p != '1') || n == 128 || (p[1] != ',' && p[1] != '\0'))
                return -1;
            a[n++] = (uint8_t)(*p == '1');
            if (p[1] == '\0')
                break;
        }
        return gguf_writer_set_arr(w, key, GGUF_TYPE_BOOL, a, n);
    }
    if (tl == 4 && !strncmp(eq + 1, "i32s", 4)) {
        int32_t a[64];
        size_t n = 0;
        for (const char *p = v; *p && n < 64; p = *end == ',' ? end + 1 : end) {
            long x = strtol(p, &end, 0);
            if (end == p || errno || x < INT32_MIN || x > INT32_MAX || (*end && *end != ','))
                return -1;
            a[n++] = (int32_t)x;
        }
        return n == 0 ? -1 : gguf_writer_set_arr_i32(w, key, a, n);
    }
    return -1;
}

/* lfm2: whether layer l of n is an attention layer (else a convolution):
 * LFM2-350M's and 1.2B's six of 16, LFM2-8B-A1B's six of 24, or every
 * third and the last */
static bool lfm2_attention(int l, int n)
{
    if (n == 16)
        return l == 2 || l == 5 || l == 8 || l == 10 || l == 12 || l == 14;
    if (n == 24) /* LFM2-8B-A1B's */
        return l == 2 || l == 6 || l == 10 || l == 14 || l == 18 || l == 21;
    return l % 3 == 2 || l == n - 1;
}

/* granitehybrid: whether layer l is an attention layer (else Mamba-2) */
static bool hybrid_attention(int l, int every, int at)
{
    return l % every == at;
}

static void usage(FILE *f)
{
    fprintf(f, "usage: si-synth --shape NAME --out FILE [--seed N] [--type T] [--embd-type T] "
               "[--layers N]\n                [--chat-template FILE (a model's Jinja template instead of "
               "the family's plain one)]\n                [--vocab GGUF (the tokenizer.* keys of another "
               "GGUF: its vocabulary, size and template)]\n                [--kv KEY=u32:N|f32:X|str:S|bool:0|1|i32s:N,N,...|bools:0,1,... "
               "(a metadata key set last; repeatable)]\nshapes:");
    for (size_t i = 0; i < sizeof(shapes) / sizeof(shapes[0]); i++)
        fprintf(f, " %s", shapes[i].name);
    fprintf(f, "\ntypes:");
    for (size_t i = 0; i < sizeof(type_opts) / sizeof(type_opts[0]); i++)
        fprintf(f, " %s", type_opts[i].name);
    fprintf(f, " (default f16; norms and biases are always f32)\n");
}

static int parse_type(const char *s, uint32_t *type, uint32_t *ftype)
{
    for (size_t i = 0; i < sizeof(type_opts) / sizeof(type_opts[0]); i++) {
        if (strcasecmp(s, type_opts[i].name) == 0) {
            *type = type_opts[i].type;
            if (ftype)
                *ftype = type_opts[i].ftype;
            return 0;
        }
    }
    return -1;
}

#define CHECK(expr)                                                                              \
    do {                                                                                         \
        int r_ = (expr);                                                                         \
        if (r_ < 0) {                                                                            \
            fprintf(stderr, "si-synth: %s failed: %s\n", #expr, strerror(-r_));                  \
            goto fail;                                                                           \
        }                                                                                        \
    } while (0)

/* Layer l's Mamba-2 mixer (ssm_shapes[i]) as llama.cpp's converter
 * writes it: its convolution, A (-exp(A_log)), D, dt's bias and the
 * output norm of n_group groups (none where !norm) in f32, ssm_in and
 * ssm_out in wtype. */
static void push_mixer(tdesc *td, size_t *nt, int l, int i, uint32_t wtype, uint64_t E, bool norm)
{
    const uint64_t D = (uint64_t)ssm_shapes[i].d_inner;
    const uint64_t G = (uint64_t)ssm_shapes[i].n_group;
    const uint64_t NH = (uint64_t)ssm_shapes[i].n_head;
    const uint64_t NC = D + 2 * G * (uint64_t)ssm_shapes[i].d_state;
    char n[64];
    snprintf(n, sizeof(n), "blk.%d.ssm_a", l);
    push(td, nt, n, GGML_TYPE_F32, 2, 1, NH, INIT_SSM_A);
    snprintf(n, sizeof(n), "blk.%d.ssm_conv1d.weight", l);
    push(td, nt, n, GGML_TYPE_F32, 2, (uint64_t)ssm_shapes[i].d_conv, NC, INIT_RANDOM);
    snprintf(n, sizeof(n), "blk.%d.ssm_conv1d.bias", l);
    push(td, nt, n, wtype, 1, NC, 1, INIT_BIAS);
    snprintf(n, sizeof(n), "blk.%d.ssm_d", l);
    push(td, nt, n, GGML_TYPE_F32, 2, 1, NH, INIT_NORM);
    snprintf(n, sizeof(n), "blk.%d.ssm_dt.bias", l);
    push(td, nt, n, wtype, 1, NH, 1, INIT_SSM_DT);
    snprintf(n, sizeof(n), "blk.%d.ssm_in.weight", l);
    push(td, nt, n, wtype, 2, E, D + NC + NH, INIT_RANDOM);
    if (norm) {
        snprintf(n, sizeof(n), "blk.%d.ssm_norm.weight", l);
        push(td, nt, n, GGML_TYPE_F32, 2, D / G, G, INIT_NORM);
    }
    snprintf(n, sizeof(n), "blk.%d.ssm_out.weight", l);
    push(td, nt, n, wtype, 2, D, E, INIT_RANDOM);
}

int main(int argc, char **argv)
{
    const char *shape_name = NULL, *out = NULL;
    uint64_t seed = 1;
    uint32_t wtype = GGML_TYPE_F16, ftype = 1, etype = UINT32_MAX;
    long layers = -1;
    const char *tmpl_path = NULL, *vocab_path = NULL;
    const char *kvs[16];
    size_t n_kv = 0;

    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
            usage(stdout);
            return 0;
        }
        if (i + 1 >= argc) {
            fprintf(stderr, "si-synth: %s needs a value\n", a);
            usage(stderr);
            return 2;
        }
        const char *val = argv[++i];
        char *end;
        if (!strcmp(a, "--shape")) {
            shape_name = val;
        } else if (!strcmp(a, "--out")) {
            out = val;
        } else if (!strcmp(a, "--seed")) {
            errno = 0;
            seed = strtoull(val, &end, 0);
            if (errno || *end || !*val) {
                fprintf(stderr, "si-synth: bad seed '%s'\n", val);
                return 2;
            }
        } else if (!strcmp(a, "--type")) {
            if (parse_type(val, &wtype, &ftype) < 0) {
                fprintf(stderr, "si-synth: unknown type '%s'\n", val);
                usage(stderr);
                return 2;
            }
        } else if (!strcmp(a, "--embd-type")) {
            if (parse_type(val, &etype, NULL) < 0) {
                fprintf(stderr, "si-synth: unknown type '%s'\n", val);
                return 2;
            }
        } else if (!strcmp(a, "--chat-template")) {
            tmpl_path = val;
        } else if (!strcmp(a, "--kv")) {
            if (n_kv == sizeof(kvs) / sizeof(kvs[0]) || !strchr(val, '=')) {
                fprintf(stderr, "si-synth: --kv KEY=TYPE:VALUE, at most %zu\n", sizeof(kvs) / sizeof(kvs[0]));
                return 2;
            }
            kvs[n_kv++] = val;
        } else if (!strcmp(a, "--vocab")) {
            vocab_path = val;
        } else if (!strcmp(a, "--layers")) {
            errno = 0;
            layers = strtol(val, &end, 10);
            if (errno || *end || layers < 1 || layers > 1000) {
                fprintf(stderr, "si-synth: bad layer count '%s' (1 to 1000)\n", val);
                return 2;
            }
        } else {
            fprintf(stderr, "si-synth: unknown option '%s'\n", a);
            usage(stderr);
            return 2;
        }
    }
    if (!shape_name || !out) {
        usage(stderr);
        return 2;
    }
    const shape *sh0 = NULL;
    for (size_t i = 0; i < sizeof(shapes) / sizeof(shapes[0]); i++)
        if (!strcmp(shapes[i].name, shape_name))
            sh0 = &shapes[i];
    if (!sh0) {
        fprintf(stderr, "si-synth: unknown shape '%s'\n", shape_name);
        usage(stderr);
        return 2;
    }
    shape shc = *sh0;
    if (layers > 0)
        shc.n_layer = (int)layers;
    gguf_file *vf = NULL;
    if (vocab_path) {
        eng_error verr = { "" };
        enum gguf_type et;
        uint64_t nv = 0;
        if (gguf_open(vocab_path, &vf, &verr) < 0 ||
            gguf_get_arr_info(vf, "tokenizer.ggml.tokens", &et, &nv) < 0 || nv == 0 || nv > (1u << 22)) {
            fprintf(stderr, "si-synth: %s: no vocabulary %s\n", vocab_path, verr.msg);
            gguf_close(vf);
            return 1;
        }
        shc.n_vocab = (int)nv;
    }
    const shape *sh = &shc;
    int n_expert = 0, n_used = 0, dense_lead = 0, dense_ff = 0, shared_ff = 0;
    for (size_t i = 0; i < sizeof(expert_shapes) / sizeof(expert_shapes[0]); i++)
        if (!strcmp(expert_shapes[i].shape, sh->name)) {
            n_expert = expert_shapes[i].n_expert;
            n_used = expert_shapes[i].n_used;
            dense_lead = expert_shapes[i].dense_lead;
            dense_ff = expert_shapes[i].dense_ff;
            shared_ff = expert_shapes[i].shared_ff;
        }
    int g4 = -1; /* gemma4_shapes' entry, -1: none */
    for (size_t i = 0; i < sizeof(gemma4_shapes) / sizeof(gemma4_shapes[0]); i++)
        if (!strcmp(gemma4_shapes[i].shape, sh->name))
            g4 = (int)i;
    /* (gemma3n: llama.cpp's layers from 20 on read earlier layers' caches) */
    const bool g3n = !strcmp(sh->arch, "gemma3n");
    const int g3n_shared = g3n && sh->n_layer > 20 ? sh->n_layer - 20 : 0;
    int ssm = -1; /* ssm_shapes' entry, -1: none */
    for (size_t i = 0; i < sizeof(ssm_shapes) / sizeof(ssm_shapes[0]); i++)
        if (!strcmp(ssm_shapes[i].shape, sh->name))
            ssm = (int)i;
    const char *nem = NULL; /* nemotron_layers' pattern, NULL: none */
    for (size_t i = 0; i < sizeof(nemotron_layers) / sizeof(nemotron_layers[0]); i++)
        if (!strcmp(nemotron_layers[i].shape, sh->name))
            nem = nemotron_layers[i].pattern;
    /* (--layers N: the pattern's first N layers, a slice of a big shape) */
    if (nem && strlen(nem) < (size_t)sh->n_layer) {
        fprintf(stderr, "si-synth: %s: --layers %d, but its pattern has %zu\n", sh->name,
                sh->n_layer, strlen(nem));
        return 1;
    }
    if (etype == UINT32_MAX)
        etype = wtype;

    const int head_dim = sh->head_dim ? sh->head_dim : sh->n_embd / sh->n_head;
    const int n_rot = sh->n_rot ? sh->n_rot : head_dim;
    const char *arch = sh->arch;
    char key[128];
    gguf_writer *w = NULL;
    vocab v;
    tdesc *td = NULL;
    float *row = NULL;
    void *qrow = NULL;
    int rc = 1;

    memset(&v, 0, sizeof(v));
    if (!vf)
        build_vocab(&v, sh, seed);
    if (!vf && v.n != (size_t)sh->n_vocab) {
        fprintf(stderr, "si-synth: internal error: vocabulary has %zu tokens, expected %d\n", v.n,
                sh->n_vocab);
        free_vocab(&v);
        return 1;
    }

    CHECK(gguf_writer_new(&w));
#define KEY(suffix) (snprintf(key, sizeof(key), "%s.%s", arch, suffix), key)
    CHECK(gguf_writer_set_str(w, "general.architecture", arch));
    CHECK(gguf_writer_set_str(w, "general.type", "model"));
    CHECK(gguf_writer_set_str(w, "general.name", sh->model_name));
    CHECK(gguf_writer_set_u32(w, KEY("block_count"), (uint32_t)sh->n_layer));
    CHECK(gguf_writer_set_u32(w, KEY("context_length"), (uint32_t)sh->n_ctx));
    CHECK(gguf_writer_set_u32(w, KEY("embedding_length"), (uint32_t)sh->n_embd));
    /* (qwen3moe: feed_forward_length is not an expert's, which has its own
     * key; lfm2moe: it is the dense layers') */
    const bool q3moe = !strcmp(arch, "qwen3moe") || !strcmp(arch, "qwen3vlmoe") ||
                       !strcmp(arch, "qwen2moe") || !strcmp(arch, "qwen35moe");
    /* (gemma4: it is the dense MLP's beside the experts) */
    const bool g4moe = g4 >= 0 && n_expert;
    const bool ernie = !strcmp(arch, "ernie4_5-moe");
    const bool oss = !strcmp(arch, "gpt-oss");
    const bool nem_moe = !strcmp(arch, "nemotron_h_moe");
    const bool own_ff = q3moe || !strcmp(arch, "lfm2moe") || g4moe || ernie || oss || nem_moe;
    const uint32_t ff = dense_lead ? (uint32_t)dense_ff
                        : g4moe    ? (uint32_t)shared_ff
                                   : (uint32_t)sh->n_ff * (q3moe ? 3 : 1);
    CHECK(gguf_writer_set_u32(w, KEY("feed_forward_length"), ff));
    if (n_expert) {
        CHECK(gguf_writer_set_u32(w, KEY("expert_count"), (uint32_t)n_expert));
        CHECK(gguf_writer_set_u32(w, KEY("expert_used_count"), (uint32_t)n_used));
    }
    if (own_ff)
        CHECK(gguf_writer_set_u32(w, KEY("expert_feed_forward_length"), (uint32_t)sh->n_ff));
    if (shared_ff && !g4moe)
        CHECK(gguf_writer_set_u32(w, KEY("expert_shared_feed_forward_length"),
                                  (uint32_t)shared_ff));
    if (dense_lead) /* LFM2-MoE's: and sigmoid gating */
        CHECK(gguf_writer_set_u32(w, KEY("leading_dense_block_count"), (uint32_t)dense_lead));
    if (!strcmp(arch, "lfm2moe"))
        CHECK(gguf_writer_set_u32(w, KEY("expert_gating_func"), 2));
    if (ernie)
        CHECK(gguf_writer_set_u32(w, KEY("interleave_moe_layer_step"), 1));
    if (nem_moe) { /* as its converter writes them (Nemotron 3 Nano's values) */
        CHECK(gguf_writer_set_u32(w, KEY("expert_shared_count"), 1));
        CHECK(gguf_writer_set_bool(w, KEY("expert_weights_norm"), true));
        CHECK(gguf_writer_set_f32(w, KEY("expert_weights_scale"), 2.5f));
        CHECK(gguf_writer_set_u32(w, KEY("expert_group_count"), 1));
    }
    CHECK(gguf_writer_set_u32(w, KEY("attention.head_count"), (uint32_t)sh->n_head));
    const bool lfm2 = !strncmp(arch, "lfm2", 4); /* (lfm2moe too) */
    const bool falcon = !strcmp(arch, "falcon-h1");
    if (lfm2) { /* a KV head count per layer, 0 where a convolution replaces attention */
        int32_t kvh[1000];
        for (int l = 0; l < sh->n_layer; l++)
            kvh[l] = lfm2_attention(l, sh->n_layer) ? sh->n_head_kv : 0;
        CHECK(gguf_writer_set_arr_i32(w, KEY("attention.head_count_kv"), kvh,
                                      (size_t)sh->n_layer));
        CHECK(gguf_writer_set_u32(w, KEY("shortconv.l_cache"), 3));
    } else if (nem) {
        /* nemotron_h: KV heads in the attention layers, neurons in the
         * MLPs', 0 elsewhere (a mixer where both are) */
        int32_t kvh[1000], ffl[1000];
        for (int l = 0; l < sh->n_layer; l++) {
            kvh[l] = nem[l] == '*' ? sh->n_head_kv : 0;
            ffl[l] = nem[l] == '-' || nem[l] == 'E' ? sh->n_ff : 0;
        }
        CHECK(gguf_writer_set_arr_i32(w, KEY("attention.head_count_kv"), kvh,
                                      (size_t)sh->n_layer));
        CHECK(gguf_writer_set_arr_i32(w, KEY("feed_forward_length"), ffl, (size_t)sh->n_layer));
        CHECK(gguf_writer_set_f32(w, KEY("attention.layer_norm_epsilon"), sh->eps));
    } else if (ssm >= 0 && !strncmp(arch, "qwen35", 6)) { /* the attention layers' interval */
        CHECK(gguf_writer_set_u32(w, KEY("attention.head_count_kv"), (uint32_t)sh->n_head_kv));
        CHECK(gguf_writer_set_u32(w, KEY("full_attention_interval"),
                                  (uint32_t)ssm_shapes[ssm].attn_every));
    } else if (ssm >= 0 && !falcon) { /* the same, 0 where Mamba-2 replaces attention */
        int32_t kvh[1000];
        const int every = ssm_shapes[ssm].attn_every, at = ssm_shapes[ssm].attn_at;
        for (int l = 0; l < sh->n_layer; l++)
            kvh[l] = hybrid_attention(l, every, at) ? sh->n_head_kv : 0;
        CHECK(gguf_writer_set_arr_i32(w, KEY("attention.head_count_kv"), kvh,
                                      (size_t)sh->n_layer));
        CHECK(gguf_writer_set_bool(w, KEY("rope.scaling.finetuned"), false));
    } else {
        CHECK(gguf_writer_set_u32(w, KEY("attention.head_count_kv"), (uint32_t)sh->n_head_kv));
    }
    if (ssm >= 0) {
        CHECK(gguf_writer_set_u32(w, KEY("ssm.conv_kernel"), (uint32_t)ssm_shapes[ssm].d_conv));
        CHECK(gguf_writer_set_u32(w, KEY("ssm.inner_size"), (uint32_t)ssm_shapes[ssm].d_inner));
        CHECK(gguf_writer_set_u32(w, KEY("ssm.state_size"), (uint32_t)ssm_shapes[ssm].d_state));
        CHECK(gguf_writer_set_u32(w, KEY("ssm.time_step_rank"), (uint32_t)ssm_shapes[ssm].n_head));
        CHECK(gguf_writer_set_u32(w, KEY("ssm.group_count"), (uint32_t)ssm_shapes[ssm].n_group));
    }
    CHECK(gguf_writer_set_f32(w, KEY("rope.freq_base"), sh->rope_base));
    if (!nem) /* (nemotron_h's converter writes attention.layer_norm_epsilon only) */
        CHECK(gguf_writer_set_f32(w, KEY("attention.layer_norm_rms_epsilon"), sh->eps));
    CHECK(gguf_writer_set_u32(w, "general.file_type", ftype));
    CHECK(gguf_writer_set_u32(w, KEY("vocab_size"), (uint32_t)sh->n_vocab));
    CHECK(gguf_writer_set_u32(w, KEY("rope.dimension_count"), (uint32_t)n_rot));
    if (sh->n_swa)
        CHECK(gguf_writer_set_u32(w, KEY("attention.sliding_window"), (uint32_t)sh->n_swa));
    if (sh->n_swa && !strcmp(arch, "olmo2")) { /* OLMo 3's converter: a flag per layer */
        uint8_t pat[64];
        for (int l = 0; l < sh->n_layer && l < 64; l++)
            pat[l] = (l + 1) % 4 != 0;
        CHECK(gguf_writer_set_arr(w, KEY("attention.sliding_window_pattern"), GGUF_TYPE_BOOL, pat,
                                  (size_t)(sh->n_layer < 64 ? sh->n_layer : 64)));
    }
    if (sh->longrope > 0) {
        /* sqrt(1 + ln(32) / ln(4096)), as the converter computes it for a
         * 128k model of 4k */
        CHECK(gguf_writer_set_f32(w, KEY("rope.scaling.attn_factor"),
                                  sqrtf(1.0f + logf(32.0f) / logf(4096.0f))));
        CHECK(gguf_writer_set_u32(w, KEY("rope.scaling.original_context_length"), (uint32_t)sh->longrope));
    }
    if (sh->softcap[0] > 0.0f)
        CHECK(gguf_writer_set_f32(w, KEY("attn_logit_softcapping"), sh->softcap[0]));
    if (sh->softcap[1] > 0.0f)
        CHECK(gguf_writer_set_f32(w, KEY("final_logit_softcapping"), sh->softcap[1]));
    if (sh->rope_linear > 0.0f) {
        CHECK(gguf_writer_set_str(w, KEY("rope.scaling.type"), "linear"));
        CHECK(gguf_writer_set_f32(w, KEY("rope.scaling.factor"), sh->rope_linear));
    }
    if (!strcmp(arch, "minicpm")) { /* scale_emb, scale_depth / sqrt(layers), n_embd / 256 */
        CHECK(gguf_writer_set_f32(w, KEY("embedding_scale"), 12.0f));
        CHECK(gguf_writer_set_f32(w, KEY("residual_scale"), 1.4f / sqrtf((float)sh->n_layer)));
        CHECK(gguf_writer_set_f32(w, KEY("logit_scale"), (float)sh->n_embd / 256.0f));
    }
    if (!strncmp(arch, "qwen35", 6)) { /* its converter's default (n_rot 64), or n_rot / 2 */
        const int32_t big[4] = { 11, 11, 10, 0 }, small[4] = { 2, 1, 1, 0 };
        CHECK(gguf_writer_set_arr_i32(w, KEY("rope.dimension_sections"),
                                      n_rot == 64 ? big : small, 4));
    }
    if (!strncmp(arch, "qwen2vl", 7) || !strncmp(arch, "qwen3vl", 7)) { /* sections of n_rot / 2 */
        const int32_t q2[4] = { 2, 3, 3, 0 }, q3[4] = { 6, 5, 5, 0 };
        CHECK(gguf_writer_set_arr_i32(w, KEY("rope.dimension_sections"), arch[4] == '2' ? q2 : q3, 4));
        if (arch[4] == '3')
            CHECK(gguf_writer_set_u32(w, KEY("n_deepstack_layers"), 1));
    }
    if (oss) { /* as gpt-oss's files */
        CHECK(gguf_writer_set_str(w, KEY("rope.scaling.type"), "yarn"));
        CHECK(gguf_writer_set_f32(w, KEY("rope.scaling.factor"), 32.0f));
        CHECK(gguf_writer_set_u32(w, KEY("rope.scaling.original_context_length"), 4096));
    }
    if (!strcmp(arch, "mistral3")) { /* Ministral 3 3B's, but its original context 16384 */
        CHECK(gguf_writer_set_str(w, KEY("rope.scaling.type"), "yarn"));
        CHECK(gguf_writer_set_f32(w, KEY("rope.scaling.factor"), 16.0f));
        CHECK(gguf_writer_set_u32(w, KEY("rope.scaling.original_context_length"), 4));
        CHECK(gguf_writer_set_f32(w, KEY("rope.scaling.yarn_beta_fast"), 32.0f));
        CHECK(gguf_writer_set_f32(w, KEY("rope.scaling.yarn_beta_slow"), 1.0f));
        CHECK(gguf_writer_set_f32(w, KEY("rope.scaling.yarn_log_multiplier"), 1.0f));
        CHECK(gguf_writer_set_f32(w, KEY("attention.temperature_scale"), 0.1f));
    }
    if (!strncmp(arch, "granite", 7)) { /* Granite 3.x 2B's are 12, 0.22, 1/64 and 8 */
        CHECK(gguf_writer_set_f32(w, KEY("embedding_scale"), 12.0f));
        CHECK(gguf_writer_set_f32(w, KEY("residual_scale"), 0.22f));
        CHECK(gguf_writer_set_f32(w, KEY("attention.scale"), 0.5f));
        CHECK(gguf_writer_set_f32(w, KEY("logit_scale"), 3.0f));
    }
    if (sh->head_dim) {
        CHECK(gguf_writer_set_u32(w, KEY("attention.key_length"), (uint32_t)head_dim));
        CHECK(gguf_writer_set_u32(w, KEY("attention.value_length"), (uint32_t)head_dim));
    }
    if (g4 >= 0) { /* as Gemma 4's converter writes them */
        const int hs = gemma4_shapes[g4].head_dim_swa, per = gemma4_shapes[g4].period;
        const int from = sh->n_layer - gemma4_shapes[g4].n_shared;
        uint8_t pat[1000];
        int32_t ffa[1000], kva[1000];
        for (int l = 0; l < sh->n_layer && l < 1000; l++) {
            pat[l] = l % per != per - 1;
            ffa[l] = sh->n_ff * (gemma4_shapes[g4].double_wide && l >= from ? 2 : 1);
            kva[l] = pat[l] || !gemma4_shapes[g4].kv_global ? sh->n_head_kv
                                                             : gemma4_shapes[g4].kv_global;
        }
        CHECK(gguf_writer_set_arr(w, KEY("attention.sliding_window_pattern"), GGUF_TYPE_BOOL, pat,
                                  (size_t)sh->n_layer));
        CHECK(gguf_writer_set_u32(w, KEY("attention.shared_kv_layers"),
                                  (uint32_t)gemma4_shapes[g4].n_shared));
        CHECK(gguf_writer_set_u32(w, KEY("embedding_length_per_layer_input"),
                                  (uint32_t)gemma4_shapes[g4].ple));
        CHECK(gguf_writer_set_u32(w, KEY("attention.key_length_swa"), (uint32_t)hs));
        CHECK(gguf_writer_set_u32(w, KEY("attention.value_length_swa"), (uint32_t)hs));
        CHECK(gguf_writer_set_u32(w, KEY("rope.dimension_count_swa"), (uint32_t)hs));
        CHECK(gguf_writer_set_f32(w, KEY("rope.freq_base_swa"), 10000.0f));
        CHECK(gguf_writer_set_f32(w, KEY("final_logit_softcapping"), 30.0f));
        if (gemma4_shapes[g4].double_wide)
            CHECK(gguf_writer_set_arr_i32(w, KEY("feed_forward_length"), ffa,
                                          (size_t)sh->n_layer));
        if (gemma4_shapes[g4].kv_global)
            CHECK(gguf_writer_set_arr_i32(w, KEY("attention.head_count_kv"), kva,
                                          (size_t)sh->n_layer));
    }
    if (g3n) { /* as Gemma 3n's converter writes them: its config's lists */
        uint8_t pat[1000];
        int32_t ffa[1000];
        float sparsity[1000]; /* normal icdf(0.95) in the first 10 layers, icdf(0) after */
        for (int l = 0; l < sh->n_layer && l < 1000; l++) {
            pat[l] = l % 5 != 4;
            ffa[l] = sh->n_ff;
            sparsity[l] = l < 10 ? 1.6448533535003662f : -INFINITY;
        }
        CHECK(gguf_writer_set_arr_i32(w, KEY("feed_forward_length"), ffa, (size_t)sh->n_layer));
        CHECK(gguf_writer_set_u32(w, KEY("altup.active_idx"), 0));
        CHECK(gguf_writer_set_u32(w, KEY("altup.num_inputs"), 4));
        CHECK(gguf_writer_set_u32(w, KEY("embedding_length_per_layer_input"), 256));
        CHECK(gguf_writer_set_u32(w, KEY("attention.shared_kv_layers"), (uint32_t)g3n_shared));
        CHECK(gguf_writer_set_arr_f32(w, KEY("activation_sparsity_scale"), sparsity,
                                      (size_t)sh->n_layer));
        CHECK(gguf_writer_set_arr(w, KEY("attention.sliding_window_pattern"), GGUF_TYPE_BOOL, pat,
                                  (size_t)sh->n_layer));
    }

    static char tbuf[1 << 20];
    const char *tmpl_file = NULL; /* a real template, to test what the engine makes of it */
    if (tmpl_path) {
        FILE *tf = fopen(tmpl_path, "rb");
        size_t tn = tf ? fread(tbuf, 1, sizeof(tbuf) - 1, tf) : 0;
        if (!tf || ferror(tf) || tn == 0 || tn == sizeof(tbuf) - 1) {
            fprintf(stderr, "si-synth: cannot read the template %s (at most 1 MiB)\n", tmpl_path);
            if (tf)
                fclose(tf);
            goto fail;
        }
        fclose(tf);
        tbuf[tn] = '\0';
        tmpl_file = tbuf;
    }
    if (vf) {
        if (copy_tokenizer(w, vf, tmpl_file != NULL) < 0)
            goto fail;
        if (tmpl_file)
            CHECK(gguf_writer_set_str(w, "tokenizer.chat_template", tmpl_file));
    } else {
        CHECK(gguf_writer_set_str(w, "tokenizer.ggml.model", "gpt2"));
        CHECK(gguf_writer_set_str(w, "tokenizer.ggml.pre", sh->pre));
        CHECK(gguf_writer_set_arr_str(w, "tokenizer.ggml.tokens", (const char *const *)v.tok, v.n));
        CHECK(gguf_writer_set_arr_i32(w, "tokenizer.ggml.token_type", v.type, v.n));
        CHECK(gguf_writer_set_arr_str(w, "tokenizer.ggml.merges", (const char *const *)v.merge,
                                      v.n_merge));
        {
            int32_t bos, eos, pad, unk = -1;
            bool add_bos;
            const char *tmpl;
            if (sh->vocab == VOCAB_SMOL) {
                unk = find_tok(&v, "<|endoftext|>");
                bos = find_tok(&v, "<|im_start|>");
                eos = pad = find_tok(&v, "<|im_end|>");
                add_bos = false;
                tmpl = tmpl_smol;
            } else if (sh->vocab == VOCAB_LLAMA3) {
                bos = find_tok(&v, "<|begin_of_text|>");
                eos = find_tok(&v, "<|eot_id|>");
                pad = find_tok(&v, "<|finetune_right_pad_id|>");
                add_bos = true;
                tmpl = tmpl_llama3;
            } else {
                bos = pad = find_tok(&v, "<|endoftext|>");
                eos = find_tok(&v, "<|im_end|>");
                add_bos = false;
                tmpl = tmpl_qwen;
            }
            CHECK(gguf_writer_set_bool(w, "tokenizer.ggml.add_space_prefix", false));
            CHECK(gguf_writer_set_bool(w, "tokenizer.ggml.add_bos_token", add_bos));
            CHECK(gguf_writer_set_u32(w, "tokenizer.ggml.bos_token_id", (uint32_t)bos));
            CHECK(gguf_writer_set_u32(w, "tokenizer.ggml.eos_token_id", (uint32_t)eos));
            if (unk >= 0)
                CHECK(gguf_writer_set_u32(w, "tokenizer.ggml.unknown_token_id", (uint32_t)unk));
            CHECK(gguf_writer_set_u32(w, "tokenizer.ggml.padding_token_id", (uint32_t)pad));
            CHECK(gguf_writer_set_str(w, "tokenizer.chat_template", tmpl_file ? tmpl_file : tmpl));
        }
    }
    for (size_t k = 0; k < n_kv; k++)
        if (set_kv(w, kvs[k]) < 0) {
            fprintf(stderr, "si-synth: bad --kv '%s'\n", kvs[k]);
            goto fail;
        }
    if (wtype != GGML_TYPE_F32 && wtype != GGML_TYPE_F16 && wtype != GGML_TYPE_BF16)
        CHECK(gguf_writer_set_u32(w, "general.quantization_version", 2));

    /* tensor list, in the order llama.cpp's converter writes them; at most
     * 6 outside the layers (rope tables, embeddings, output) */
    size_t max_t = 8 + (size_t)sh->n_layer * 24, nt = 0;
    const bool gemma = !strcmp(arch, "gemma2") || !strcmp(arch, "gemma3");
    const bool olmo2 = !strcmp(arch, "olmo2"), post_only = olmo2 || !strcmp(arch, "exaone4");
    const bool glm4 = !strcmp(arch, "glm4"); /* (gemma's norms after, gate and up fused) */
    const bool q35 = !strncmp(arch, "qwen35", 6); /* (qwen35moe too) */
    td = calloc(max_t, sizeof(*td));
    if (!td) {
        fprintf(stderr, "si-synth: out of memory\n");
        goto fail;
    }
    const uint64_t E = (uint64_t)sh->n_embd, F = (uint64_t)sh->n_ff;
    const uint64_t Q = (uint64_t)sh->n_head * head_dim, KV = (uint64_t)sh->n_head_kv * head_dim;
    if (sh->rope_freqs)
        push(td, &nt, "rope_freqs.weight", GGML_TYPE_F32, 1, (uint64_t)n_rot / 2, 1, INIT_ROPE);
    if (sh->longrope > 0) {
        push(td, &nt, "rope_factors_long.weight", GGML_TYPE_F32, 1, (uint64_t)n_rot / 2, 1, INIT_ROPE_LONG);
        push(td, &nt, "rope_factors_short.weight", GGML_TYPE_F32, 1, (uint64_t)n_rot / 2, 1, INIT_ROPE_SHORT);
    }
    push(td, &nt, "token_embd.weight", etype, 2, E, (uint64_t)sh->n_vocab, INIT_RANDOM);
    const uint64_t PLE = g4 >= 0 ? (uint64_t)gemma4_shapes[g4].ple : g3n ? 256 : 0;
    if (g4 >= 0)
        push(td, &nt, "rope_freqs.weight", GGML_TYPE_F32, 1, (uint64_t)head_dim / 2, 1,
             INIT_ROPE_PROP);
    if (g3n) { /* gemma3n: the three other AltUp streams' projections in and out */
        push3(td, &nt, "altup_proj.weight", wtype, E, E, 3);
        push3(td, &nt, "altup_unembd_proj.weight", wtype, E, E, 3);
    }
    if (PLE) {
        const uint64_t LP = PLE * (uint64_t)sh->n_layer;
        push(td, &nt, "per_layer_token_embd.weight", etype, 2, LP, (uint64_t)sh->n_vocab,
             INIT_RANDOM);
        push(td, &nt, "per_layer_model_proj.weight", wtype, 2, E, LP, INIT_RANDOM);
        push(td, &nt, "per_layer_proj_norm.weight", GGML_TYPE_F32, 1, PLE, 1, INIT_NORM);
    }
    for (int l = 0; l < sh->n_layer; l++) {
        char n[64];
#define T(suffix, nd, a, b, init)                                                                \
    (snprintf(n, sizeof(n), "blk.%d.%s", l, suffix), push(td, &nt, n, wtype, nd, a, b, init))
        if (g4 >= 0) {
            /* gemma4: the layer's heads, its keys and values unless it
             * reads an earlier layer's cache, its FFN's width */
            const int per = gemma4_shapes[g4].period;
            const bool local = l % per != per - 1;
            const bool own = l < sh->n_layer - gemma4_shapes[g4].n_shared;
            const uint64_t hd = local ? (uint64_t)gemma4_shapes[g4].head_dim_swa
                                      : (uint64_t)head_dim;
            const uint64_t kvh = local || !gemma4_shapes[g4].kv_global
                                     ? (uint64_t)sh->n_head_kv
                                     : (uint64_t)gemma4_shapes[g4].kv_global;
            const uint64_t FL = n_expert ? (uint64_t)shared_ff
                                         : F * (gemma4_shapes[g4].double_wide && !own ? 2 : 1);
            const uint64_t QL = (uint64_t)sh->n_head * hd;
            T("attn_norm.weight", 1, E, 1, INIT_NORM);
            T("attn_q.weight", 2, E, QL, INIT_RANDOM);
            T("attn_q_norm.weight", 1, hd, 1, INIT_QNORM);
            if (own) {
                T("attn_k.weight", 2, E, kvh * hd, INIT_RANDOM);
                T("attn_k_norm.weight", 1, hd, 1, INIT_NORM);
                if (local || !gemma4_shapes[g4].k_eq_v)
                    T("attn_v.weight", 2, E, kvh * hd, INIT_RANDOM);
            }
            T("attn_output.weight", 2, QL, E, INIT_RANDOM);
            T("post_attention_norm.weight", 1, E, 1, INIT_NORM);
            T("ffn_norm.weight", 1, E, 1, INIT_NORM);
            T("ffn_gate.weight", 2, E, FL, INIT_RANDOM);
            T("ffn_up.weight", 2, E, FL, INIT_RANDOM);
            T("ffn_down.weight", 2, FL, E, INIT_RANDOM);
            T("post_ffw_norm.weight", 1, E, 1, INIT_NORM);
            T("layer_output_scale.weight", 1, 1, 1, INIT_SCALE);
            if (n_expert) {
                /* the router (f32) and its scale, the experts' norms,
                 * their gate and up rows in one tensor in even layers as
                 * a converter that fuses them writes them, each expert's
                 * scale */
                const uint64_t NE = (uint64_t)n_expert;
                T("ffn_gate_inp.weight", 2, E, NE, INIT_RANDOM);
                td[nt - 1].type = GGML_TYPE_F32;
                T("ffn_gate_inp.scale", 1, E, 1, INIT_RSCALE);
                T("pre_ffw_norm_2.weight", 1, E, 1, INIT_NORM);
                T("post_ffw_norm_1.weight", 1, E, 1, INIT_NORM);
                T("post_ffw_norm_2.weight", 1, E, 1, INIT_NORM);
                snprintf(n, sizeof(n), "blk.%d.ffn_down_exps.weight", l);
                push3(td, &nt, n, wtype, F, E, NE);
                T("ffn_down_exps.scale", 1, NE, 1, INIT_SCALE);
                snprintf(n, sizeof(n), "blk.%d.ffn_gate%s_exps.weight", l, l % 2 ? "" : "_up");
                push3(td, &nt, n, wtype, E, l % 2 ? F : 2 * F, NE);
                snprintf(n, sizeof(n), "blk.%d.ffn_up_exps.weight", l);
                if (l % 2)
                    push3(td, &nt, n, wtype, E, F, NE);
            }
            if (PLE) {
                T("inp_gate.weight", 2, E, PLE, INIT_RANDOM);
                T("proj.weight", 2, PLE, E, INIT_RANDOM);
                T("post_norm.weight", 1, E, 1, INIT_NORM);
            }
            continue;
        }
        if (g3n) {
            /* gemma3n: k and v in every layer (llama.cpp requires them in
             * the ones reading earlier caches too), the q norm tempering
             * unscaled scores as gemma4's, LAuReL of rank 64; the AltUp
             * coefficients f32 whatever the type, as the converter keeps
             * them */
            const uint64_t hd = (uint64_t)head_dim;
            T("attn_norm.weight", 1, E, 1, INIT_NORM);
            T("attn_q.weight", 2, E, Q, INIT_RANDOM);
            T("attn_k.weight", 2, E, KV, INIT_RANDOM);
            T("attn_v.weight", 2, E, KV, INIT_RANDOM);
            T("attn_output.weight", 2, Q, E, INIT_RANDOM);
            T("attn_q_norm.weight", 1, hd, 1, INIT_QNORM);
            T("attn_k_norm.weight", 1, hd, 1, INIT_NORM);
            T("post_attention_norm.weight", 1, E, 1, INIT_NORM);
            T("ffn_norm.weight", 1, E, 1, INIT_NORM);
            T("ffn_gate.weight", 2, E, F, INIT_RANDOM);
            T("ffn_up.weight", 2, E, F, INIT_RANDOM);
            T("ffn_down.weight", 2, F, E, INIT_RANDOM);
            T("post_ffw_norm.weight", 1, E, 1, INIT_NORM);
            T("inp_gate.weight", 2, E, PLE, INIT_RANDOM);
            T("proj.weight", 2, PLE, E, INIT_RANDOM);
            T("post_norm.weight", 1, E, 1, INIT_NORM);
            T("altup_correct_coef.weight", 2, 4, 4, INIT_ALTUP);
            td[nt - 1].type = GGML_TYPE_F32;
            T("altup_correct_scale.weight", 1, E, 1, INIT_NORM);
            T("altup_predict_coef.weight", 2, 4, 16, INIT_ALTUP);
            td[nt - 1].type = GGML_TYPE_F32;
            T("altup_router.weight", 2, E, 4, INIT_ROUTER);
            T("altup_router_norm.weight", 1, E, 1, INIT_NORM);
            T("laurel_l.weight", 2, E, 64, INIT_RANDOM);
            T("laurel_r.weight", 2, 64, E, INIT_RANDOM);
            T("laurel_post_norm.weight", 1, E, 1, INIT_NORM);
            continue;
        }
        if (nem) {
            /* nemotron_h: the layer's norm, then its one block */
            T("attn_norm.weight", 1, E, 1, INIT_NORM);
            if (nem[l] == '-') {
                T("ffn_down.weight", 2, F, E, INIT_RANDOM);
                T("ffn_up.weight", 2, E, F, INIT_RANDOM);
            } else if (nem[l] == 'E') {
                /* the router and the bias to pick by (f32), the experts'
                 * and the shared expert's up rows and down columns */
                const uint64_t NE = (uint64_t)n_expert, SF = (uint64_t)shared_ff;
                T("ffn_gate_inp.weight", 2, E, NE, INIT_RANDOM);
                td[nt - 1].type = GGML_TYPE_F32;
                snprintf(n, sizeof(n), "blk.%d.exp_probs_b.bias", l);
                push(td, &nt, n, GGML_TYPE_F32, 1, NE, 1, INIT_RANDOM);
                snprintf(n, sizeof(n), "blk.%d.ffn_down_exps.weight", l);
                push3(td, &nt, n, wtype, F, E, NE);
                snprintf(n, sizeof(n), "blk.%d.ffn_up_exps.weight", l);
                push3(td, &nt, n, wtype, E, F, NE);
                T("ffn_down_shexp.weight", 2, SF, E, INIT_RANDOM);
                T("ffn_up_shexp.weight", 2, E, SF, INIT_RANDOM);
            } else if (nem[l] == '*') {
                T("attn_k.weight", 2, E, KV, INIT_RANDOM);
                T("attn_output.weight", 2, Q, E, INIT_RANDOM);
                T("attn_q.weight", 2, E, Q, INIT_RANDOM);
                T("attn_v.weight", 2, E, KV, INIT_RANDOM);
            } else {
                /* a Mamba-2 mixer as granitehybrid's, its norm of
                 * n_group groups */
                push_mixer(td, &nt, l, ssm, wtype, E, true);
            }
            continue;
        }
        if (!post_only)
            T("attn_norm.weight", 1, E, 1, INIT_ONES);
        if (sh->fused) { /* llama.cpp's converter's order for phi3 */
            T("attn_qkv.weight", 2, E, Q + 2 * KV, INIT_RANDOM);
            T("attn_output.weight", 2, Q, E, INIT_RANDOM);
            T("ffn_norm.weight", 1, E, 1, INIT_ONES);
            T("ffn_up.weight", 2, E, 2 * F, INIT_RANDOM);
            T("ffn_down.weight", 2, F, E, INIT_RANDOM);
            continue;
        }
        if (n_expert && l >= dense_lead) { /* the router in f32, as converters keep it */
            const uint64_t NE = (uint64_t)n_expert;
            T("ffn_gate_inp.weight", 2, E, NE, INIT_RANDOM);
            td[nt - 1].type = GGML_TYPE_F32;
            if (lfm2 || ernie) { /* the bias to pick by, f32 */
                snprintf(n, sizeof(n), "blk.%d.exp_probs_b.bias", l);
                push(td, &nt, n, GGML_TYPE_F32, 1, NE, 1, INIT_RANDOM);
            }
            if (oss) { /* gpt-oss: the router's bias, the experts' (f32 [F, NE], [E, NE]) */
                snprintf(n, sizeof(n), "blk.%d.ffn_gate_inp.bias", l);
                push(td, &nt, n, GGML_TYPE_F32, 1, NE, 1, INIT_OSS_BIAS);
                static const char *const eb[3] = { "down", "gate", "up" };
                for (int b = 0; b < 3; b++) {
                    snprintf(n, sizeof(n), "blk.%d.ffn_%s_exps.bias", l, eb[b]);
                    push(td, &nt, n, GGML_TYPE_F32, 2, b ? F : E, NE, INIT_OSS_BIAS);
                    td[nt - 1].type = GGML_TYPE_F32;
                }
            }
            snprintf(n, sizeof(n), "blk.%d.ffn_down_exps.weight", l);
            push3(td, &nt, n, wtype, F, E, NE);
            snprintf(n, sizeof(n), "blk.%d.ffn_gate_exps.weight", l);
            push3(td, &nt, n, wtype, E, F, NE);
            snprintf(n, sizeof(n), "blk.%d.ffn_up_exps.weight", l);
            push3(td, &nt, n, wtype, E, F, NE);
            if (shared_ff) { /* the shared expert, Qwen2-MoE's with its gate */
                const uint64_t SF = (uint64_t)shared_ff;
                if (!strcmp(arch, "qwen2moe") || q35)
                    T("ffn_gate_inp_shexp.weight", 1, E, 1, INIT_RANDOM);
                T("ffn_down_shexp.weight", 2, SF, E, INIT_RANDOM);
                T("ffn_gate_shexp.weight", 2, E, SF, INIT_RANDOM);
                T("ffn_up_shexp.weight", 2, E, SF, INIT_RANDOM);
            }
        } else if (glm4) {
            T("ffn_down.weight", 2, F, E, INIT_RANDOM);
            T("ffn_up.weight", 2, E, 2 * F, INIT_RANDOM);
        } else {
            const uint64_t FD = dense_lead ? (uint64_t)dense_ff : F;
            T("ffn_down.weight", 2, FD, E, INIT_RANDOM);
            T("ffn_gate.weight", 2, E, FD, INIT_RANDOM);
            T("ffn_up.weight", 2, E, FD, INIT_RANDOM);
        }
        /* (qwen35's and gpt-oss's under the name llama.cpp gives it;
         * falcon-h1's without ".weight", as its converter writes it) */
        if (!post_only)
            T(q35 || oss ? "post_attention_norm.weight" : falcon ? "ffn_norm" : "ffn_norm.weight",
              1, E, 1, gemma || q35 || oss || falcon ? INIT_NORM : INIT_ONES);
        if (q35 && !hybrid_attention(l, ssm_shapes[ssm].attn_every, ssm_shapes[ssm].attn_at)) {
            /* a gated delta net: A (-exp(A_log)), the taps, dt's bias and
             * the norm in f32, as converted */
            const uint64_t N = (uint64_t)ssm_shapes[ssm].d_state;
            const uint64_t NH = (uint64_t)ssm_shapes[ssm].n_head, D = NH * N;
            const uint64_t NC = D + 2 * (uint64_t)ssm_shapes[ssm].n_group * N;
            T("attn_gate.weight", 2, E, D, INIT_RANDOM);
            T("attn_qkv.weight", 2, E, NC, INIT_RANDOM);
            snprintf(n, sizeof(n), "blk.%d.ssm_a", l);
            push(td, &nt, n, GGML_TYPE_F32, 1, NH, 1, INIT_SSM_A);
            T("ssm_alpha.weight", 2, E, NH, INIT_RANDOM);
            T("ssm_beta.weight", 2, E, NH, INIT_RANDOM);
            snprintf(n, sizeof(n), "blk.%d.ssm_conv1d.weight", l);
            push(td, &nt, n, GGML_TYPE_F32, 2, (uint64_t)ssm_shapes[ssm].d_conv, NC, INIT_RANDOM);
            T("ssm_dt.bias", 1, NH, 1, INIT_SSM_DT);
            T("ssm_norm.weight", 1, N, 1, INIT_NORM);
            T("ssm_out.weight", 2, D, E, INIT_RANDOM);
            continue;
        }
        if (ssm >= 0 &&
            (falcon || !hybrid_attention(l, ssm_shapes[ssm].attn_every, ssm_shapes[ssm].attn_at))) {
            /* a Mamba-2 mixer; falcon-h1's beside attention, without
             * the norm */
            push_mixer(td, &nt, l, ssm, wtype, E, !falcon);
            if (!falcon)
                continue;
        }
        if (lfm2 && !lfm2_attention(l, sh->n_layer)) { /* its taps in f32, as converted */
            snprintf(n, sizeof(n), "blk.%d.shortconv.conv.weight", l);
            push(td, &nt, n, GGML_TYPE_F32, 2, 3, E, INIT_RANDOM);
            T("shortconv.in_proj.weight", 2, E, 3 * E, INIT_RANDOM);
            T("shortconv.out_proj.weight", 2, E, E, INIT_RANDOM);
            continue;
        }
        if (olmo2 || !strcmp(arch, "olmoe")) {
            T("attn_k_norm.weight", 1, KV, 1, INIT_NORM);
            T("attn_q_norm.weight", 1, Q, 1, INIT_NORM);
        }
        if (gemma || post_only || glm4) {
            T("post_attention_norm.weight", 1, E, 1, INIT_NORM);
            T("post_ffw_norm.weight", 1, E, 1, INIT_NORM);
        }
        if (sh->qkv_bias)
            T("attn_k.bias", 1, KV, 1, oss ? INIT_OSS_BIAS : INIT_BIAS);
        if (sh->qk_norm)
            T("attn_k_norm.weight", 1, (uint64_t)head_dim, 1, INIT_NORM);
        T("attn_k.weight", 2, E, KV, INIT_RANDOM);
        T("attn_output.weight", 2, Q, E, INIT_RANDOM);
        if (oss) { /* gpt-oss: the output's bias, each head's sink */
            T("attn_output.bias", 1, E, 1, INIT_OSS_BIAS);
            T("attn_sinks.weight", 1, (uint64_t)sh->n_head, 1, INIT_SINK);
        }
        if (sh->qkv_bias)
            T("attn_q.bias", 1, Q, 1, oss ? INIT_OSS_BIAS : INIT_BIAS);
        if (sh->qk_norm)
            T("attn_q_norm.weight", 1, (uint64_t)head_dim, 1, INIT_NORM);
        T("attn_q.weight", 2, E, q35 ? 2 * Q : Q, INIT_RANDOM); /* (qwen35: and a gate) */
        if (sh->qkv_bias)
            T("attn_v.bias", 1, KV, 1, oss ? INIT_OSS_BIAS : INIT_BIAS);
        T("attn_v.weight", 2, E, KV, INIT_RANDOM);
#undef T
    }
    /* (lfm2's final norm under the name its converter gives it) */
    push(td, &nt, lfm2 ? "token_embd_norm.weight" : "output_norm.weight", GGML_TYPE_F32, 1, E, 1,
         lfm2 ? INIT_NORM : INIT_ONES);
    if (!sh->tied)
        push(td, &nt, "output.weight", wtype, 2, E, (uint64_t)sh->n_vocab, INIT_RANDOM);

    uint64_t max_row = 0;
    for (size_t i = 0; i < nt; i++) {
        CHECK(gguf_writer_add_tensor_info(w, td[i].name, td[i].type, td[i].n_dims, td[i].ne));
        if (td[i].ne[0] > max_row)
            max_row = td[i].ne[0];
    }
    row = malloc((size_t)max_row * sizeof(float));
    qrow = malloc((size_t)max_row * sizeof(float));
    if (!row || !qrow) {
        fprintf(stderr, "si-synth: out of memory\n");
        goto fail;
    }

    CHECK(gguf_writer_begin(w, out));
    for (size_t i = 0; i < nt; i++) {
        const tdesc *t = &td[i];
        uint64_t s = seed * 0x9e3779b97f4a7c15ull ^ hash_str(t->name);
        const float scale = 1.0f / sqrtf((float)t->ne[0]);
        const size_t rb = ggml_row_bytes(t->type, t->ne[0]);
        const uint64_t rows = t->n_dims == 1 ? 1 : t->ne[1] * t->ne[2];
        for (uint64_t r = 0; r < rows; r++) {
            for (uint64_t j = 0; j < t->ne[0]; j++) {
                switch (t->init) {
                case INIT_RANDOM: row[j] = rand_normal(&s) * scale; break;
                case INIT_ONES: row[j] = 1.0f; break;
                /* not all ones, so that a weight applied to the wrong
                 * element shows */
                case INIT_NORM: row[j] = 1.0f + 0.25f * rand_normal(&s); break;
                case INIT_BIAS: row[j] = rand_normal(&s) * 0.02f; break;
                case INIT_ROPE: row[j] = llama3_rope_factor((int)j, n_rot, sh->rope_base); break;
                /* growing with the wavelength, as Phi-3's tables do */
                case INIT_ROPE_LONG: row[j] = 1.0f + 20.0f * (float)j / (float)(t->ne[0] - 1); break;
                case INIT_ROPE_SHORT: row[j] = 1.0f + 0.5f * (float)j / (float)(t->ne[0] - 1); break;
                /* Mamba-2's: A = -exp(A_log), A_log ~ U(0, ln 16) at
                 * initialisation; dt's bias the inverse softplus of dt ~
                 * 0.001-0.1 */
                case INIT_SSM_A: row[j] = -expf(2.77f * rand_uniform(&s)); break;
                case INIT_SSM_DT: row[j] = -4.5f + 2.2f * rand_uniform(&s); break;
                /* (gemma4: a quarter of a global head's pairs rotate) */
                case INIT_ROPE_PROP: row[j] = j < t->ne[0] / 4 ? 1.0f : 1e30f; break;
                case INIT_SCALE: row[j] = 0.5f + 0.5f * rand_uniform(&s); break;
                /* (gemma4's q norm, whose scores are not scaled: as trained
                 * ones temper them, or a random model's attention would be
                 * one-hot) */
                case INIT_QNORM:
                    row[j] = (1.0f + 0.25f * rand_normal(&s)) / sqrtf((float)t->ne[0]);
                    break;
                /* (gemma4's router scale, against the 1/sqrt(n_embd) it
                 * comes with: logits as large as other routers', so that
                 * picks are not near ties) */
                case INIT_RSCALE:
                    row[j] = (1.0f + 0.25f * rand_normal(&s)) * sqrtf((float)t->ne[0]);
                    break;
                /* (gpt-oss's biases, as large as the products beside them,
                 * so that one left out shows; its sinks about the scores'
                 * size, so that they take part of the softmax, not all) */
                case INIT_OSS_BIAS: row[j] = 0.5f * rand_normal(&s); break;
                case INIT_SINK: row[j] = 1.0f + rand_normal(&s); break;
                /* (gemma3n's AltUp coefficients, added to 1 or to the
                 * streams themselves: a fifth of the default keeps 25
                 * layers of them from compounding) */
                case INIT_ALTUP: row[j] = 0.2f * rand_normal(&s) * scale; break;
                /* (gemma3n's AltUp router, whose input llama.cpp scales by
                 * 1 / n_embd: tanh's inputs about 0.15 rather than 1 / n_embd,
                 * so that the coefficients above matter, yet not so large
                 * that they make the model chaotic) */
                case INIT_ROUTER: row[j] = 0.15f * rand_normal(&s) * sqrtf((float)t->ne[0]); break;
                }
            }
            CHECK(eng_quant_row(t->type, row, qrow, (size_t)t->ne[0]));
            CHECK(gguf_writer_write_data(w, qrow, rb));
        }
    }
    CHECK(gguf_writer_end(w));
    rc = 0;
fail:
    if (rc != 0)
        fprintf(stderr, "si-synth: could not write '%s'\n", out);
    gguf_writer_free(w);
    free(td);
    free(row);
    free(qrow);
    free_vocab(&v);
    gguf_close(vf);
    return rc;
}
