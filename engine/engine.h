/* SelectInfer engine: the one public header.
 *
 * The daemon, the profiler, the command-line tools and the tests see only this
 * header. Every object is an opaque handle; constructors and destructors come
 * in pairs and destructors accept NULL.
 *
 * Errors: functions return 0 (or a count) on success and a negative errno on
 * failure, and leave their ret_ out-parameters untouched on failure. Where a
 * failure needs more words (which tensor, which offset), an eng_error the
 * caller passes in receives a one-line message. The engine never logs and
 * never exits.
 *
 * Threads: an eng_model is immutable once loaded and may be shared; it owns a
 * worker pool, so at most one thread at a time may run sessions of one model
 * (the daemon has exactly one inference thread). Each request owns an
 * eng_session (KV cache, scratch, its neuron selection).
 *
 * Usage:
 *
 *     eng_model *m; eng_error err;
 *     eng_model_params mp = eng_model_params_default();
 *     if (eng_model_load("model.gguf", &mp, &m, &err) < 0) die(err.msg);
 *     eng_session *s;
 *     eng_session_params sp = eng_session_params_default();
 *     eng_session_new(m, &sp, &s);
 *     int32_t toks[512]; size_t n;
 *     eng_tokenize(m, "Hello", 5, ENG_TOK_ADD_SPECIAL, toks, 512, &n);
 *     eng_gen_params gp = eng_gen_params_default();
 *     eng_generate(s, toks, n, &gp, on_text, NULL, &stats);
 *     eng_session_free(s); eng_model_free(m);
 */
#ifndef ENGINE_H
#define ENGINE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct eng_model eng_model;
typedef struct eng_session eng_session;
typedef struct eng_sampler eng_sampler;

typedef struct eng_error {
    char msg[256];
} eng_error;

/* ---- model ------------------------------------------------------------ */

typedef enum eng_dtype {
    ENG_DTYPE_F16 = 0, /* default storage of weights */
    ENG_DTYPE_F32 = 1,
    /* ggml's Q8_0 blocks (32 int8 and their f16 scale, 34 bytes): a matrix
     * the file holds in Q8_0 keeps its own bytes under f16 storage, where
     * the backend computes on them (the CPU), as does everything with
     * q8_matrices below (not a storage choice) */
    ENG_DTYPE_Q8_0 = 2,
    /* ggml's Q4_K blocks (256 weights in 144 bytes: 8 sub-blocks of 32
     * 4-bit codes, each with a 6-bit scale and min under the block's f16
     * d and dmin): a matrix the file holds in Q4_K keeps its own bytes on
     * the CPU, as a Q8_0 one does (Q4_K_M files: 4.5 bits a weight, not
     * 8.5), where its rows are whole blocks */
    ENG_DTYPE_Q4_K = 3,
    /* ggml's Q6_K blocks (256 weights in 210 bytes: 16 sub-blocks of 16
     * 6-bit codes, each with a signed 8-bit scale under the block's f16
     * d): a matrix the file holds in Q6_K keeps its own bytes on the CPU
     * (Q4_K_M files: the tied head and some attn_v; 6.56 bits a weight
     * where Q8_0 would take 8.5 and round them again) */
    ENG_DTYPE_Q6_K = 4,
    /* ggml's Q5_K blocks (256 weights in 176 bytes: Q4_K's scales, mins and
     * nibbles with a fifth bit a weight in qh): a matrix the file holds in
     * Q5_K keeps its own bytes on the CPU (Q5_K_M files: 5.5 bits a weight
     * where Q8_0 would take 8.5 and round them again) */
    ENG_DTYPE_Q5_K = 5,
    /* ggml's Q4_1 blocks (32 weights in 20 bytes: f16 d and m, 16 bytes of
     * 4-bit codes, weight d * q + m): a matrix the file holds in Q4_1
     * keeps its own bytes on the CPU (the default model's layers: 5 bits a
     * weight where Q8_0 would take 8.5 and round them again) */
    ENG_DTYPE_Q4_1 = 6,
    /* ggml's Q4_0 blocks (32 weights in 18 bytes: f16 d, 16 bytes of 4-bit
     * codes, weight d * (q - 8)): kept on the CPU as Q4_1 is (Q4_0 files,
     * Gemma 3's QAT ones among them: 4.5 bits a weight) */
    ENG_DTYPE_Q4_0 = 7,
    /* OCP's MXFP4 blocks as ggml has them (32 weights in 17 bytes: an E8M0
     * scale e, 16 bytes of E2M1 codes, weight 2^(e - 128) times the doubled
     * level): gpt-oss's experts keep their own bytes on the CPU, 4.25 bits
     * a weight, their W_down too (as the file's rows: eng_ffn_weights) */
    ENG_DTYPE_MXFP4 = 8,
} eng_dtype;

/* A storage type's name as the configuration and the tools write it
 * ("q8_0", "q4_k", ...; "f16" for f16 and any value not above). */
const char *eng_dtype_name(eng_dtype dt);

typedef struct eng_load_plan_params eng_load_plan_params;

typedef enum eng_backend_kind {
    ENG_BACKEND_CPU = 0, /* the reference; default */
    ENG_BACKEND_CUDA,    /* an NVIDIA GPU (built with -Dcuda); weights in f16 */
    ENG_BACKEND_AUTO,    /* CUDA when a GPU is usable, else the CPU */
} eng_backend_kind;

/* Loading and hot-swapping report their progress layer by layer (done:
 * layers finished, of total), from the calling thread: a sign of life for whoever watches a long load (a
 * service manager's start timeout, a watchdog). It cannot stop them. */
typedef void (*eng_progress_cb)(void *userdata, int done, int total);

typedef struct eng_model_params {
    eng_dtype storage; /* weight storage type after conversion */
    /* With f16 storage, on a backend that computes on Q8_0 (the CPU):
     * every matrix (attention, embeddings, head) and the FFN's neuron slots
     * in Q8_0 whatever the file holds, where a row is whole blocks of 32
     * (the file's Q8_0 matrices stay Q8_0 either way, and so do FFN slots
     * whose gate and up rows the file holds in Q8_0; FFN slots whose gate
     * and up rows are all Q4_K keep those, their down rows Q8_0). About
     * half the bytes for rounding to 8 bits per block. */
    bool q8_matrices;
    int n_threads;     /* worker threads; <= 0: number of online CPUs */
    /* On the CPU: a prompt's (prefill's) products with Q8_0, Q4_1, Q4_0,
     * Q4_K and Q5_K matrices and FFN gate and up rows (not Q6_K's: two
     * scales a block of 32) against x rounded to 8 bits per block of 32,
     * as llama.cpp's CPU matmuls take it, where the kernels have it
     * (AVX-512 VNNI), instead of x in f32 (off, the default). Those
     * products about twice as fast, the default model's prompts about 1.25x;
     * perplexity moves by a few tenths of a percent and greedy text at
     * near-ties (docs/benchmark.md). Decode is the same either way (x in 16
     * bits). */
    bool prefill_q8;
    eng_backend_kind backend;
    int device;        /* the GPU for ENG_BACKEND_CUDA/AUTO */
    /* Selective loading (SelectInfer section below); NULL: dense. Only
     * read during eng_model_load(). A mixture of experts loads dense only
     * (-ENOTSUP for another mode), on a backend with the moe op (the CPU;
     * ENG_BACKEND_AUTO takes it for such a file). */
    const eng_load_plan_params *plan;
    eng_progress_cb progress;  /* NULL: none; kept for eng_model_swap() */
    void *progress_data;
} eng_model_params;

eng_model_params eng_model_params_default(void);

/* Loads a GGUF file. On failure returns -errno (-EINVAL bad or unsupported
 * file, -ENOENT missing file or tensor, -ENOMEM out of host or GPU memory,
 * -ENODEV no usable GPU, -ENOTSUP built without CUDA) and fills err (may be
 * NULL). */
int eng_model_load(const char *path, const eng_model_params *params,
                   eng_model **ret_model, eng_error *err);
void eng_model_free(eng_model *model);

typedef struct eng_model_info {
    char arch[32];        /* "llama", "qwen2" */
    char name[128];       /* general.name, may be empty */
    int n_layer, n_embd, n_ff, n_head, n_head_kv, head_dim, n_vocab;
    int n_ctx_train;
    /* mixture of experts: n_ff is n_expert experts' neurons together (or
     * LFM2-MoE's first, dense layers' where more), of which each token
     * computes n_expert_used experts'; 0: a dense FFN */
    int n_expert, n_expert_used;
    int n_ff_shared;      /* ... and beside them a shared expert of this many
                           * neurons, every token's (the last of n_ff); 0: none */
    /* Mamba-2 mixers in place of attention (granitehybrid): in n_ssm
     * layers, whose states take bytes_ssm_state a session (f32), read and
     * written by every decode step; 0: none */
    int n_ssm;
    uint64_t bytes_ssm_state;
    /* Gemma 4: n_kv_shared last layers attend over an earlier layer's
     * cache (none of their own); each layer takes a per-layer embedding of
     * n_embd_per_layer, from a table of bytes_ple_table left in the file
     * (a token's row read as it comes); 0: none */
    int n_kv_shared, n_embd_per_layer;
    uint64_t bytes_ple_table;
    eng_dtype storage;
    /* how the FFN's neurons are kept: storage, or ENG_DTYPE_Q8_0 on a
     * backend that computes on it (q8_matrices, or the file's Q8_0 FFN),
     * or with q8_matrices ENG_DTYPE_Q4_K (ENG_DTYPE_Q5_K, ENG_DTYPE_Q4_1,
     * ENG_DTYPE_Q4_0) where the file's gate and up rows all are (their down
     * rows Q8_0), or ENG_DTYPE_MXFP4 where every layer's experts are (their
     * W_down too) */
    eng_dtype ffn_dtype;
    int n_threads;
    uint64_t n_params;        /* parameters as stored in the file */
    uint64_t bytes_weights;   /* resident weight bytes after conversion */
    uint64_t bytes_per_token; /* weight bytes one decode step reads, all loaded neurons */
    uint64_t fingerprint;     /* ties profiles to this model: shapes and sampled weights */
} eng_model_info;

void eng_model_get_info(const eng_model *model, eng_model_info *ret_info);

/* ---- tokenizer -------------------------------------------------------- */

enum {
    ENG_TOK_ADD_SPECIAL = 1 << 0,   /* add BOS/EOS as the model's metadata says (no
                                     * BOS before text that starts with it) */
    ENG_TOK_PARSE_SPECIAL = 1 << 1, /* "<|im_start|>" in text becomes its token */
};

/* Tokenizes text[0..len). Writes at most cap tokens; *ret_n receives the
 * number the full result has (may exceed cap: then -ENOBUFS is returned). */
int eng_tokenize(const eng_model *model, const char *text, size_t len,
                 unsigned flags, int32_t *tokens, size_t cap, size_t *ret_n);

/* The bytes of one token (raw bytes, possibly an incomplete UTF-8 sequence).
 * Control tokens render as their text only when special is true.
 * Returns the byte count (may exceed cap: nothing is written then), or -EINVAL. */
int eng_token_to_piece(const eng_model *model, int32_t token, bool special,
                       char *buf, size_t cap);

int32_t eng_token_bos(const eng_model *model); /* -1 when the model has none */
int32_t eng_token_eos(const eng_model *model);
bool eng_token_is_eog(const eng_model *model, int32_t token); /* EOS, EOT, <|im_end|>, <|eot_id|> */

/* Length of the longest prefix of buf[0..n) that does not end inside a UTF-8
 * sequence: stream that much, keep the rest for the next token. */
size_t eng_utf8_complete_prefix(const char *buf, size_t n);

/* ---- chat templates --------------------------------------------------- */

/* A function call: the function's name and its arguments, a JSON object. */
typedef struct eng_tool_call {
    char *name;
    char *arguments;
} eng_tool_call;

typedef struct eng_chat_msg {
    const char *role; /* "system", "user", "assistant"; "tool" for a call's result */
    const char *content;
    /* an assistant's calls (templates with tool calling only) */
    const eng_tool_call *tool_calls;
    size_t n_tool_calls;
} eng_chat_msg;

typedef enum eng_chat_template {
    ENG_CHAT_NONE = 0,
    ENG_CHAT_CHATML, /* SmolLM2, Qwen2.5, Qwen3 (Qwen3.5, SmolLM3, LFM2, Nemotron 3 Nano) */
    ENG_CHAT_LLAMA3,
    ENG_CHAT_LLAMA2,  /* Llama 2 chat: [INST] <<SYS>> */
    ENG_CHAT_MISTRAL, /* Mistral Instruct v0.1/v0.2, Mixtral: [INST] ... [/INST] */
    ENG_CHAT_ZEPHYR,  /* Zephyr, TinyLlama chat: <|user|> ... </s> */
    ENG_CHAT_PHI3,    /* Phi-3, Phi-3.5: <|user|> ... <|end|> */
    ENG_CHAT_MISTRAL3, /* Mistral's v3 templates (Large and Nemo 2407, and others):
                        * [INST] ...[/INST], the system message in the last turn */
    ENG_CHAT_GEMMA,   /* Gemma 3: <start_of_turn>user ... <end_of_turn> */
    ENG_CHAT_DEEPSEEK_R1, /* DeepSeek-R1 distills: <｜User｜> ... <｜Assistant｜><think> */
    ENG_CHAT_GRANITE, /* Granite 3.x: <|start_of_role|>user<|end_of_role|> ... <|end_of_text|> */
    ENG_CHAT_EXAONE,  /* EXAONE 3.x: [|user|] ... [|assistant|] ... [|endofturn|]; 4.0 */
    ENG_CHAT_TULU,    /* Tulu 3, OLMo 2: <|user|>\n ... \n<|assistant|>\n ... eos */
    ENG_CHAT_MISTRAL7, /* Ministral 3, Mistral Small 3.x: [SYSTEM_PROMPT] ... [INST] ...
                        * [/INST] ... eos */
    ENG_CHAT_GEMMA4,   /* Gemma 4: <|turn>user ... <turn|>, its thinking switch, its calls */
    ENG_CHAT_GLM4,     /* GLM-4, GLM-4-0414, GLM-Z1: [gMASK]<sop><|user|>\n ... <|assistant|>\n */
    ENG_CHAT_ERNIE,    /* ERNIE 4.5: <|begin_of_sentence|>User: ...\nAssistant: ...
                        * <|end_of_sentence|> */
    ENG_CHAT_GPT_OSS,  /* gpt-oss (OpenAI's harmony): <|start|>user<|message|> ... <|end|>,
                        * answers in channels (analysis, final), its calls */
    ENG_CHAT_NEMOTRON, /* NVIDIA Nemotron Nano v2 (nemotron_h): <SPECIAL_11>User\n ...
                        * <SPECIAL_11>Assistant\n<think>\n ... <SPECIAL_12>, "/think" and
                        * "/no_think" in the messages, <TOOLCALL>[...] calls */
} eng_chat_template;

eng_chat_template eng_model_chat_template(const eng_model *model);

/* The template a model's chat is rendered with, in place of the one its
 * file carries (or lacks), as llama.cpp's --chat-template and
 * --chat-template-file: by name (one of eng_chat_template_names(), a
 * NULL-terminated list: "chatml", "llama3", ...), or Jinja text recognised
 * as a file's would be. -ENOTSUP (the model's unchanged) for a name not
 * listed or text not recognised; -EINVAL for NULL. Not while sessions of
 * the model render. */
int eng_model_set_chat_template(eng_model *model, const char *name);
int eng_model_set_chat_template_text(eng_model *model, const char *jinja, size_t len);
const char *const *eng_chat_template_names(void);

/* eng_chat_apply's flags. */
enum {
    ENG_CHAT_ADD_ASSISTANT = 1u << 0, /* end with the assistant's header */
    ENG_CHAT_NO_THINK = 1u << 1,      /* a template with a thinking switch
                                       * (Qwen3's enable_thinking; Nemotron
                                       * Nano v2: as if "/no_think" came
                                       * first in the messages): answer
                                       * without reasoning first; gpt-oss,
                                       * which always reasons: its least
                                       * effort ("Reasoning: low"); others
                                       * ignore it */
};

/* Whether the model's template has the thinking switch of ENG_CHAT_NO_THINK. */
bool eng_model_chat_can_think(const eng_model *model);

/* Renders messages with the model's template (its default system prompt
 * included where the template adds one), followed by the assistant header
 * with ENG_CHAT_ADD_ASSISTANT (true does the same). Writes at most cap
 * bytes plus NUL; returns the full length (like snprintf), or -ENOTSUP
 * when the model has no known template. */
int eng_chat_apply(const eng_model *model, const eng_chat_msg *msgs, size_t n_msgs,
                   unsigned flags, char *buf, size_t cap);

/* Tool calling (function calling), as the model's template does it:
 * Qwen2.5 and Qwen3 (the definitions in the system block, answers with
 * <tool_call> blocks of {"name": ..., "arguments": {...}}; Nemotron Nano
 * v2: one <TOOLCALL>[{...}, ...]</TOOLCALL> block of them; Qwen3.5 and
 * Nemotron 3 Nano: <tool_call> blocks of <function=NAME> XML) and Llama
 * 3.1/3.2 (the definitions in the first user message, an answer that is
 * one {"name": ..., "parameters": {...}}); the results go back as "tool"
 * messages. Whether the model's template has it: */
bool eng_model_chat_can_call_tools(const eng_model *model);

/* eng_chat_apply() with the tools a reply may call: `tools` is a JSON array
 * of definitions (OpenAI's and Ollama's [{"type": "function", "function":
 * {"name", "description", "parameters"}}], printed as the template prints
 * them; NULL or [] : none). -ENOTSUP when there are tools or calls and the
 * template has no tool calling, -EINVAL when the tools or a call's
 * arguments are not valid JSON, or where the template raises (Llama: more
 * than one call in a message, tools without a user message). */
int eng_chat_apply_tools(const eng_model *model, const eng_chat_msg *msgs, size_t n_msgs,
                         const char *tools, unsigned flags, char *buf, size_t cap);

/* The tool calls in a generated answer: every <tool_call> block of the
 * text (Qwen; Gemma 4: its <|tool_call>call:NAME{...}<tool_call|> blocks
 * after its reasoning; Nemotron Nano v2: the JSON array of each
 * <TOOLCALL>[...]</TOOLCALL> block after its reasoning; Nemotron 3 Nano:
 * Qwen3.5's <tool_call> blocks after its reasoning; gpt-oss: each
 * message to "functions.NAME", NAME and its body, a JSON object), or the
 * whole answer (Llama), each a JSON
 * object with a string "name" and an object "arguments" or "parameters"
 * (absent: {}), returned with the arguments in json.dumps form. An answer
 * with no block, or with one that is not such an object (cut short by
 * max_tokens, say), has no calls: *ret_n = 0 and it stays text.
 * *ret_content_len (when not NULL): the length of the answer's text
 * without its calls (what goes back as the assistant message's content;
 * the whole text when there are none; gpt-oss: up to the end of the body
 * eng_chat_reasoning() takes for its answer where that comes before the
 * first call, else 0). Free the calls with eng_tool_calls_free().
 * -ENOTSUP when the template has no tool calling, -ENOMEM. */
int eng_chat_tool_calls(const eng_model *model, const char *text, size_t len,
                        eng_tool_call **ret_calls, size_t *ret_n, size_t *ret_content_len);
void eng_tool_calls_free(eng_tool_call *calls, size_t n);

/* A reasoning model's answer (Qwen3: "<think>\nREASONING\n</think>\n\nANSWER")
 * split as its template splits it for the history: the reasoning is what
 * comes before the first "</think>" and after the last "<think>" there,
 * newlines trimmed (*ret_think_off, *ret_think_len), the answer what comes
 * after the last "</think>", leading newlines dropped (*ret_content_off
 * to the end). An answer without "</think>" is all answer (length 0
 * reasoning). Gemma 4: the reasoning of an answer that opens with
 * "<|channel>thought", from after it and its white space up to the first
 * "<channel|>" (to the end where none closes it), the answer after that.
 * gpt-oss: the body of its first "<|channel|>analysis<|message|>" message
 * (up to "<|end|>", or the end), the answer from the body of its final
 * message (else of a commentary message to no one, else where text
 * follows without a header; none where every message is reasoning or a
 * call, or cut short before its answer; all the text where it has no
 * header at all).
 * -ENOTSUP when the template has no reasoning (ask with text NULL, len 0). */
int eng_chat_reasoning(const eng_model *model, const char *text, size_t len, size_t *ret_think_off,
                       size_t *ret_think_len, size_t *ret_content_off);

/* ---- sessions: KV cache and forward pass -------------------------------- */

/* What the KV cache holds: f16 (the default), or Q8_0 blocks of 32 with
 * an f16 scale, as llama.cpp's `--cache-type-k/v q8_0` (34 bytes per 32
 * values: 0.53 of f16's bytes; a backend offers it or the session gets
 * -ENOTSUP, and it needs head_dim a multiple of 32). */
typedef enum eng_kv_type { ENG_KV_F16 = 0, ENG_KV_Q8_0 = 1 } eng_kv_type;

typedef struct eng_session_params {
    int n_ctx;   /* context length in tokens; <= 0: min(model's, 4096) */
    int n_batch; /* tokens per forward step in prefill; <= 0: 256 */
    eng_kv_type kv_type;
    /* Sliding-window layers (Gemma 2/3's local ones) keep the K/V of every
     * position, as the others do (llama.cpp's --swa-full). Default (false):
     * on a backend in host memory (the CPU) they keep their window's and
     * one batch's: for Gemma 3 1B at 32k positions 0.15 of the cache.
     * Either way attention is the same; such a cache only holds back a
     * prompt-cache prefix, or a context shift, whose window it no longer
     * has (those are evaluated again). */
    bool swa_full;
} eng_session_params;

eng_session_params eng_session_params_default(void);
/* "f16" or "q8_0" (as llama.cpp spells them); -EINVAL for anything else. */
int eng_kv_type_parse(const char *name, eng_kv_type *ret);
const char *eng_kv_type_name(eng_kv_type type);

int eng_session_new(const eng_model *model, const eng_session_params *params,
                    eng_session **ret_session);
void eng_session_free(eng_session *session);
void eng_session_reset(eng_session *session); /* forget the context */
/* Prompt cache: forgets the context but keeps its longest prefix that
 * tokens[0..n) begins with, so that only the rest of them needs an eval.
 * Kept are positions the KV cache holds as an evaluation over every
 * loaded neuron left them (a prompt; decode steps too when the session
 * computed all loaded neurons), under the current loading plan, and at
 * most n - 2 (the rest is then evaluated by the prefill's kernels, as in
 * a fresh prefill). A session that will select its neurons per request
 * (phi below gamma, ENG_PICK_REQUEST) also needs the prefill votes of what
 * it keeps; it holds those of its last prompt only, so it keeps a prefix
 * only when that whole prompt begins tokens (same alpha, rank and comp;
 * not the signed rank, whose votes depend on where a prompt was cut).
 * Returns the positions kept (n_past), 0 when nothing could be. The logits
 * of an eval that follows equal a fresh prefill's when only prompt
 * positions were kept (on the CPU, bit for bit); decode positions were
 * computed by other kernels, equal up to rounding. */
int eng_session_reset_prefix(eng_session *session, const int32_t *tokens, size_t n);
/* What eng_session_reset_prefix(session, tokens, n) would keep under the
 * session's compute parameters (set them first), without resetting: a
 * caller holding several sessions sends a prompt to the one that keeps
 * most of it. */
int eng_session_prefix_len(const eng_session *session, const int32_t *tokens, size_t n);
/* Context shift without a prefill: positions [keep, keep + drop) leave the
 * context, the n_past - keep - drop after them move down by drop (n_past
 * with them), their keys rotated back by drop positions (RoPE is a
 * rotation by position, so the key a token would have at its new position
 * is its key rotated by the difference) and their values copied as they
 * are. What moved keeps what it was computed from, the dropped positions
 * included (llama.cpp's and Ollama's shift): a fresh evaluation of the
 * shorter context would give other keys and values from layer 1 on, and
 * layer 0's only up to rounding. The prompt cache keeps at most the first
 * keep positions. The dynamic neurons a request selected stay selected.
 * Returns 0; -EINVAL for a range outside [0, n_past); -ENOTSUP where the
 * backend cannot read its Q8_0 cache back (evaluate again instead). */
int eng_session_shift(eng_session *session, int keep, int drop);
/* Positions the session holds for reuse (0 after a swap of the model's
 * plan): what a prompt that reuses less of it would throw away. */
int eng_session_n_cached(const eng_session *session);
int eng_session_n_past(const eng_session *session);
const eng_model *eng_session_model(const eng_session *session);
int eng_session_n_ctx(const eng_session *session);
eng_kv_type eng_session_kv_type(const eng_session *session);
/* Bytes of the session's KV cache (both K and V, every layer, n_ctx rows;
 * convolution rings and Mamba-2 states included, with their prompt-cache
 * checkpoint). On the CPU a convolution's ring holds its taps' positions,
 * not a batch's: the batch's rows are staged in one scratch buffer of the
 * session (taps - 1 + n_batch rows), which is not counted here. */
size_t eng_session_kv_bytes(const eng_session *session);

enum {
    ENG_EVAL_ALL_LOGITS = 1 << 0, /* keep logits of every token, not only the last */
    /* The caller needs only the most likely next token: eng_session_argmax()
     * gives it, and eng_session_logits() may then return NULL, which saves a
     * GPU the copy of a row of logits (n_vocab floats) per step. Without
     * effect together with ENG_EVAL_ALL_LOGITS. */
    ENG_EVAL_ARGMAX = 1 << 1,
    /* The caller samples from the best candidates of the last row only
     * (eng_session_set_candidates): eng_session_candidates() gives them,
     * and eng_session_logits() then returns NULL, which saves a GPU the
     * copy of the row and the host the pass over it. Without effect
     * together with ENG_EVAL_ALL_LOGITS or ENG_EVAL_ARGMAX, or before
     * eng_session_set_candidates succeeded. */
    ENG_EVAL_CANDIDATES = 1 << 2,
};

/* Runs tokens[0..n) through the model after the n_past tokens already in the
 * cache (prefill when n > 1, decode when n == 1). -ENOSPC when the context is
 * full, -EINVAL for an out-of-range token, -ESTALE when the model was
 * hot-swapped since this context began (reset the session). */
int eng_session_eval(eng_session *session, const int32_t *tokens, size_t n, unsigned flags);

/* Polled by eng_session_eval before each chunk of n_batch tokens after the
 * first, so that a long prompt can be abandoned (a client that left): a
 * nonzero return stops the eval with -ECANCELED, and the session needs a
 * reset before it is used again. NULL (the default): never. */
typedef int (*eng_abort_cb)(void *userdata);
void eng_session_set_abort(eng_session *session, eng_abort_cb cb, void *userdata);

/* Logits of the i-th token of the last eval (i = -1: the last token); NULL
 * when not kept. Valid until the next eval. n_vocab floats. */
const float *eng_session_logits(const eng_session *session, int i);

/* The most likely next token after the last eval: the argmax of its last
 * row of logits, NaN skipped, ties to the lower id (the backend's own
 * under ENG_EVAL_ARGMAX on a GPU, else from the logits on the host: the
 * same token either way). -EDOM when every logit is NaN, -ENODATA when the
 * last eval kept nothing (none since the reset, or it failed). */
int32_t eng_session_argmax(const eng_session *session);

/* Candidates of a row of logits x[0..n): for each chunk of ENG_CAND_CHUNK
 * consecutive token ids, its k best (NaN below every number, -0 equal to
 * +0, ties to the lower id), in ascending id order; a chunk of fewer than
 * k ids gives all of them and pads its k entries with id -1 (value 0).
 * Together they hold the k best of the row: every token that some
 * sampler's choice can depend on (eng_sampler_candidates). */
#define ENG_CAND_CHUNK 4096
#define ENG_CAND_MAX 1024 /* the largest k */
/* Entries of a row's candidates: k per chunk. */
size_t eng_candidates_size(int n, int k);
/* The host's candidates of x (the reference of a backend's, backend.h
 * top_cands); vals and ids hold eng_candidates_size(n, k) entries. tmp:
 * 2 ENG_CAND_CHUNK 32-bit words of scratch. -EINVAL for k outside
 * [1, ENG_CAND_MAX] or n < 1. */
int eng_candidates(const float *x, int n, int k, void *tmp, float *vals, int32_t *ids);

/* Evaluations with ENG_EVAL_CANDIDATES keep the last row's candidates for
 * this k. -ENOTSUP where the backend offers none (the CPU: the logits are
 * the host's already, and a sampler's pass over them costs less than
 * finding candidates), -EINVAL for k outside [1, ENG_CAND_MAX], -ENOMEM. */
int eng_session_set_candidates(eng_session *session, int k);
/* The last eval's candidates (ENG_EVAL_CANDIDATES): *vals, *ids (valid
 * until the next eval); returns how many entries, padding included, or
 * -ENODATA when the last eval kept none. */
long eng_session_candidates(const eng_session *session, const float **vals, const int32_t **ids);

/* ---- sampling --------------------------------------------------------- */

/* A token's logit raised or lowered (eng_sampler_params.logit_bias). */
typedef struct eng_logit_bias {
    int32_t token;
    float bias;           /* finite, or -INFINITY: never this token */
} eng_logit_bias;

#define ENG_MAX_LOGIT_BIAS 1024

typedef struct eng_sampler_params {
    float temperature;    /* 0: greedy */
    int top_k;            /* 0: off */
    float top_p;          /* 1: off */
    float min_p;          /* 0: off */
    float repeat_penalty; /* 1: off */
    int repeat_last_n;    /* tokens the penalties look back over */
    uint64_t seed;
    /* OpenAI's and llama.cpp's: subtracted from the logit of each token in
     * the window, per occurrence / once, after the repeat penalty; 0: off,
     * negative favours repeats; |x| <= 100 */
    float freq_penalty;
    float presence_penalty;
    /* OpenAI's and llama.cpp's logit_bias: added to those tokens' logits
     * before anything else (penalties included); a token listed twice gets
     * both. Copied by eng_sampler_new; at most ENG_MAX_LOGIT_BIAS entries,
     * tokens in [0, n_vocab). */
    const eng_logit_bias *logit_bias;
    int n_logit_bias;
} eng_sampler_params;

eng_sampler_params eng_sampler_params_default(void); /* greedy */

int eng_sampler_new(const eng_sampler_params *params, int n_vocab, eng_sampler **ret_sampler);
void eng_sampler_free(eng_sampler *sampler);
void eng_sampler_reset(eng_sampler *sampler);
/* Chooses a token from logits[0..n_vocab); does not modify logits. */
int32_t eng_sampler_sample(eng_sampler *sampler, const float *logits);
/* Records a token of the context (prompt or generated) for the repetition penalty. */
void eng_sampler_accept(eng_sampler *sampler, int32_t token);
/* Whether sample() is plain greedy, the argmax of the logits as they are:
 * temperature <= 0 and no repetition penalty (repeat_penalty 1 or
 * repeat_last_n 0). Such a sampler needs only eng_session_argmax(), except
 * that it picks token 0 where every logit is NaN. */
bool eng_sampler_is_greedy(const eng_sampler *sampler);
/* The k for which eng_sampler_sample_candidates() over a row's candidates
 * (eng_candidates) picks what eng_sampler_sample() picks over the row, with
 * the same draws: top_k (1 at temperature 0) plus the tokens the penalties
 * and biases may move, where they can only lower logits (repeat_penalty
 * >= 1, frequency and presence penalties >= 0, biases <= 0). 0 where the
 * choice may depend on every logit (no top_k, a raising adjustment, or k
 * above ENG_CAND_MAX). */
int eng_sampler_candidates(const eng_sampler *sampler);
/* eng_sampler_sample() from candidates of the logits: vals/ids[0..n)
 * (ids < 0 are padding, skipped), for a k of at least
 * eng_sampler_candidates(); -EINVAL where that is 0 or an id is >= n_vocab. */
int32_t eng_sampler_sample_candidates(eng_sampler *sampler, const float *vals, const int32_t *ids,
                                      size_t n);
/* What to pass eng_session_eval for this sampler to pick from afterwards
 * (eng_sampler_sample_session): ENG_EVAL_ARGMAX for plain greedy,
 * ENG_EVAL_CANDIDATES where the sampler can use them and the session keeps
 * them (it is set up for them here), else 0 (the row of logits). */
unsigned eng_sampler_eval_flags(const eng_sampler *sampler, eng_session *session);
/* The next token after the last eval, from whatever it kept: the argmax
 * (token 0 where every logit is NaN, as eng_sampler_sample), the
 * candidates, or the row of logits. -ENODATA when it kept nothing. */
int32_t eng_sampler_sample_session(eng_sampler *sampler, const eng_session *session);

/* ---- generation ------------------------------------------------------- */

typedef enum eng_stop_reason {
    ENG_STOP_NONE = 0,
    ENG_STOP_LENGTH,    /* max_tokens reached */
    ENG_STOP_EOS,       /* end-of-generation token */
    ENG_STOP_STRING,    /* a stop string matched (not emitted) */
    ENG_STOP_CANCELLED, /* the callback asked to stop */
    ENG_STOP_CONTEXT,   /* context full */
} eng_stop_reason;

const char *eng_stop_reason_name(eng_stop_reason reason);

/* What the generated text must be. */
typedef enum eng_format {
    ENG_FORMAT_TEXT = 0,        /* anything */
    ENG_FORMAT_JSON,            /* one JSON object (RFC 8259), nesting at most
                                 * 32 deep: only tokens that continue one are
                                 * sampled, and generation ends (ENG_STOP_EOS)
                                 * where it closes */
} eng_format;

int eng_format_parse(const char *name, eng_format *ret_format); /* "text", "json"; -EINVAL */

/* Whether a JSON Schema (eng_gen_params.json_schema) is one generation can
 * follow: 0; -EINVAL when it is not JSON or not a schema; -ENOTSUP when it
 * uses what is outside the subset engine/jschema.h lists (its root is an
 * object or an array; properties in the schema's order, required ones
 * present, no others; items, minItems, maxItems; enum and const of
 * strings, booleans, null; anyOf of alternatives that begin differently;
 * local $ref). msg (cap bytes) says what and where. */
int eng_json_schema_check(const char *schema, char *msg, size_t cap);

/* A token and its log-probability (eng_prob_cb). */
typedef struct eng_token_prob {
    int32_t id;
    float logprob;
} eng_token_prob;

#define ENG_MAX_TOP_PROBS 20

/* Called once per generated token, before its text, with the token's
 * log-probability under the model (the log-softmax of its logits as they
 * come: before temperature, penalties and truncation, as OpenAI and Ollama
 * report them) and the n_top most likely tokens, most likely first (ties
 * to the lower id). Return nonzero to stop (ENG_STOP_CANCELLED). */
typedef int (*eng_prob_cb)(void *userdata, int32_t token, float logprob, const eng_token_prob *top,
                           int n_top);

typedef struct eng_gen_params {
    int max_tokens;             /* <= 0: until EOS or context full */
    bool cache_prompt;          /* keep what the session holds of the prompt's
                                 * prefix (eng_session_reset_prefix); default off */
    const char *const *stop;    /* stop strings, not emitted */
    size_t n_stop;
    eng_sampler_params sampler;
    eng_format format;
    const char *json_schema;    /* ENG_FORMAT_JSON: the document must also match
                                 * this JSON Schema (eng_json_schema_check);
                                 * NULL: any object */
    eng_prob_cb on_prob;        /* NULL: no log-probabilities; called with
                                 * eng_generate's userdata */
    int n_top_probs;            /* alternatives per token, 0..ENG_MAX_TOP_PROBS */
    /* A full context during generation: false (the default) ends with
     * ENG_STOP_CONTEXT; true drops the older half of what follows the
     * first n_keep tokens (Ollama's shift and num_keep, llama.cpp's
     * --context-shift) and goes on: eng_session_shift() moves what is left
     * down and rotates its keys, no prefill. shift_reeval evaluates what
     * is left again instead (a prefill of about half the context, the
     * first n_keep reused): exact for the shorter context, and slower.
     * n_keep is capped at half the context. */
    bool context_shift;
    bool shift_reeval;
    int n_keep;
} eng_gen_params;

eng_gen_params eng_gen_params_default(void);

typedef struct eng_gen_stats {
    int n_prompt;
    int n_cached;               /* of n_prompt, kept from the session (not evaluated) */
    int n_generated;
    uint64_t prefill_ns;
    uint64_t decode_ns;         /* context shifts included */
    eng_stop_reason stop_reason;
    int n_shifts;               /* context shifts (context_shift) */
} eng_gen_stats;

/* Called once per generated token with the complete UTF-8 text it released
 * (NUL-terminated; len may be 0 when text is held back for a stop string or
 * a split character), so a caller can cancel at every step: return nonzero. */
typedef int (*eng_text_cb)(void *userdata, const char *text, size_t len);

/* Resets the session (keeping the prompt's cached prefix with
 * cache_prompt), evaluates the prompt, and samples until a stop
 * condition. Returns 0 (stats filled even when cancelled) or -errno. A
 * prompt abandoned by the session's abort callback (eng_session_set_abort)
 * also ends with ENG_STOP_CANCELLED and nothing generated. */
int eng_generate(eng_session *session, const int32_t *prompt, size_t n_prompt,
                 const eng_gen_params *params, eng_text_cb on_text, void *userdata,
                 eng_gen_stats *ret_stats);

/* ---- embeddings ------------------------------------------------------- */

typedef enum eng_pooling {
    ENG_POOL_MEAN = 0,          /* the mean over the tokens (llama.cpp's
                                 * --pooling mean, Ollama's default) */
    ENG_POOL_LAST,              /* the last token's (--pooling last) */
} eng_pooling;

int eng_pooling_parse(const char *name, eng_pooling *ret_pooling); /* "mean", "last"; -EINVAL */

/* The embedding of tokens[0..n) into out (n_embd floats): the model's last
 * hidden states after its output norm, the vectors llama.cpp's embeddings
 * are made of, pooled over the tokens and, with normalize, scaled to unit
 * Euclidean length (a zero vector stays zero). The tokens are evaluated
 * over every loaded neuron, whatever the session's phi, in a fresh context:
 * the session is left reset, holding nothing for reuse. -EINVAL for no
 * tokens, an out-of-range token or pooling; -ENOSPC when n exceeds the
 * context; -ECANCELED when the session's abort callback stopped it
 * between chunks. Validated first: a refused call leaves the session as
 * it was. */
int eng_embed(eng_session *session, const int32_t *tokens, size_t n, eng_pooling pooling,
              bool normalize, float *out);

/* ---- SelectInfer: profiles ---------------------------------------------
 *
 * A profile holds, for one model, the raw per-neuron scores of one or more
 * tasks: for task k, sum over its prompts p of s_n(p) = mean_t |a_n(t)|,
 * with the prompt count, so S_n^k = sum / n_prompts and tasks can be merged
 * by adding. It carries the model's fingerprint (architecture, shapes and a
 * hash of some weights); loading it for another model fails. File format:
 * docs/profile-format.md.
 */

typedef struct eng_profile eng_profile;

/* A new, empty profile for model; -ENOTSUP for a mixture of experts. */
int eng_profile_new(const eng_model *model, eng_profile **ret_profile);
void eng_profile_free(eng_profile *profile);

/* Adds one prompt's scores to task (created when new): sums[l * n_ff + n] =
 * sum over the prompt's n_tokens tokens of |a_n(t)| in layer l, as
 * eng_session_observe_ffn() collects them. */
int eng_profile_add_prompt(eng_profile *profile, const char *task, const double *sums,
                           uint64_t n_tokens);
/* Adds every task of src into dst (same model). */
int eng_profile_merge(eng_profile *dst, const eng_profile *src, eng_error *err);

int eng_profile_save(const eng_profile *profile, const char *path);
/* Reads and validates a profile file; with model, also checks it was made
 * for that model (-EMEDIUMTYPE and a message saying how they differ). */
int eng_profile_load(const char *path, const eng_model *model, eng_profile **ret_profile,
                     eng_error *err);

int eng_profile_n_tasks(const eng_profile *profile);
/* Task i's name, prompt and token counts; NULL when i is out of range. */
const char *eng_profile_task(const eng_profile *profile, int i, uint64_t *ret_n_prompts,
                             uint64_t *ret_n_tokens);
/* Mean score S_n of task (NULL or "*": the model-wide ranking, each task
 * normalised by its per-layer mean then averaged) for layer l, n_ff values. */
int eng_profile_scores(const eng_profile *profile, const char *task, int layer, double *ret_scores);

/* ---- SelectInfer: selective loading ------------------------------------ */

typedef enum eng_score {
    ENG_SCORE_ACT = 0, /* mean |a_n| (published) */
    ENG_SCORE_CONTRIB, /* mean |a_n| x ||d_n||: the size of what the neuron adds to the output */
} eng_score;

typedef enum eng_layer_budget {
    ENG_BUDGET_UNIFORM = 0, /* every sparsified layer loads gamma * n_ff (published) */
    ENG_BUDGET_MASS,        /* each layer loads the neurons that hold the same share of
                             * its model-wide score mass; same total as uniform */
    ENG_BUDGET_SENS,        /* gamma and phi are model-wide: n_layer * gamma * n_ff neurons
                             * loaded in all, dense layers included; sparsified layer l
                             * leaves out min(1 - delta, c / sens_l) of its neurons (c
                             * fits the total); decode computes n_layer * phi * n_ff in
                             * all, the sparsified layers an equal count each (never
                             * below their static neurons, so more when phi ~ delta) */
} eng_layer_budget;

typedef enum eng_select_mode {
    ENG_SELECT_DENSE = 0,   /* load and compute every neuron */
    ENG_SELECT_LOAD_ONLY,   /* load base + secondary up to gamma, compute all loaded */
    ENG_SELECT_RANDOM,      /* load a seeded random gamma set; phi: dynamic as selectinfer */
    ENG_SELECT_COREINFER,   /* load all, compute phi dynamic neurons (no static ones) */
    ENG_SELECT_SELECTINFER, /* load base + secondary up to gamma, compute static + dynamic */
} eng_select_mode;

const char *eng_select_mode_name(eng_select_mode mode);
int eng_select_mode_parse(const char *name, eng_select_mode *ret_mode);

struct eng_load_plan_params {
    eng_select_mode mode;
    const eng_profile *profile; /* needed by load-only and selectinfer */
    const char *task;           /* base neurons come from this task */
    float gamma;                /* fraction of each sparsified layer's neurons loaded */
    float delta;                /* fraction that are static (base) neurons */
    int dense_first, dense_last; /* layers at each end kept dense */
    uint64_t budget_bytes;      /* > 0: solve gamma so resident weights fit this */
    uint64_t seed;              /* random-load */
    eng_score score;            /* how profile scores rank neurons */
    eng_layer_budget layer_budget; /* how gamma is spread over the sparsified layers */
    const float *layer_sens;    /* [n_layer], ENG_BUDGET_SENS: the loss when layer l alone is
                                 * sparsified (> 0; copied); NULL: all equal */
    bool sketch;                /* also keep a 4-bit sketch (Q4_0) of each loaded neuron's
                                 * gate and up rows in the sparsified layers, for
                                 * ENG_PICK_TOKEN; counted in the plan's bytes (and budget) */
};

eng_load_plan_params eng_load_plan_params_default(void); /* dense */

/* ---- SelectInfer: selective computation ---------------------------------
 *
 * With phi set, the first eval after a reset (the prompt, i.e. prefill) runs
 * over all loaded neurons and ranks them per token; its end fixes the
 * session's dynamic neurons, and every later eval (decode) computes only
 * static + dynamic neurons: phi * n_ff per sparsified layer.
 */

typedef enum eng_rank {
    ENG_RANK_ABS = 0, /* per-token top-alpha by |a| */
    ENG_RANK_SIGNED,  /* by signed a, alpha scaled by the share of positive a (published) */
    ENG_RANK_CONTRIB, /* by |a| x ||d|| (the norm of the neuron's W_down column) */
    ENG_RANK_MASS,    /* no per-token cut: by |a| summed over the prompt (alpha unused) */
} eng_rank;

/* What decode adds for the loaded neurons it does not compute. */
typedef enum eng_comp {
    ENG_COMP_NONE = 0, /* nothing: they contribute 0 (published) */
    ENG_COMP_MEAN,     /* their mean activation over the prompt: per layer the bias
                        * sum_j mean_t a_j(t) * d_j, fixed at the end of prefill */
    ENG_COMP_LINEAR,   /* a linear map of the FFN's input x to what they would add,
                        * bias + x P V^T (P, V: n_embd x 16, f16), fitted per layer
                        * at the end of prefill on the prompt's latest 256
                        * positions but the first (ridge regression, cut to rank
                        * 16). Its bytes count against phi: the per-request pick
                        * computes that many neurons fewer, the exact pick a
                        * smaller k. Per session it keeps those positions' FFN
                        * inputs and activations (f16) and a fit's workspace. */
} eng_comp;

/* "none", "mean", "linear"; parse: -EINVAL for any other name */
const char *eng_comp_name(eng_comp comp);
int eng_comp_parse(const char *name, eng_comp *ret_comp);

/* When decode chooses the loaded neurons it computes. */
typedef enum eng_pick {
    ENG_PICK_REQUEST = 0, /* once per request, at the end of prefill: static + dynamic
                           * neurons, phi * n_ff per sparsified layer (published) */
    ENG_PICK_TOKEN,       /* at every token: each sparsified layer scores all its loaded
                           * neurons by |silu(g~ . x) * (u~ . x)| from the plan's sketch
                           * (g~, u~: the gate and up rows in 4 bits) and computes the
                           * best k exactly. Reading the sketch counts against phi: k =
                           * phi * n_ff less the sketch's bytes in neurons, so a step
                           * reads what ENG_PICK_REQUEST's would. Needs a plan loaded
                           * with sketch and a backend with the ffn_pick op; no comp,
                           * and prefill casts no votes (alpha and rank are unused). */
    ENG_PICK_EXACT,       /* at every token, by the neurons' own activations: each
                           * sparsified layer computes every loaded neuron's
                           * a = act(g . x) * (u . x) from its gate and up rows and adds
                           * a * d for the k of largest |a| only. Reading all gate and up
                           * rows counts against phi as ENG_PICK_TOKEN's sketch does; where
                           * the rows are 4-bit (Q4_0, Q4_1: the sketch's size) that
                           * buys an exact pick of more neurons than the sketch leaves,
                           * without the sketch's memory. Needs a backend with the
                           * ffn_top op (the CPU's). No votes and no comp unless
                           * cand narrows what it picks from; then comp covers
                           * the neurons that are no candidates. */
} eng_pick;

/* "request", "token", "exact"; parse: -EINVAL for any other name */
const char *eng_pick_name(eng_pick pick);
int eng_pick_parse(const char *name, eng_pick *ret_pick);

typedef struct eng_compute_params {
    float phi;   /* <= 0 or >= gamma: compute every loaded neuron */
    float alpha; /* per-token top fraction of loaded neurons, (0, 1] */
    eng_rank rank;
    eng_comp comp;
    eng_pick pick;
    /* ENG_PICK_EXACT only: the share of n_ff each sparsified layer keeps
     * per request as its candidates, chosen at the end of prefill as
     * ENG_PICK_REQUEST chooses phi's (static + the most voted; alpha and
     * rank count); each token then reads the candidates' gate and up rows
     * and picks the down rows it adds among them. Between phi and gamma:
     * fewer gate and up rows read leave more down rows (k) to phi's bytes.
     * Without the session's copy (copy_dynamic) every candidate is
     * computed. 0, or >= gamma: every loaded neuron is a candidate (no
     * votes); below phi: phi's, which k takes whole (ENG_PICK_REQUEST). */
    float cand;
    /* ENG_PICK_REQUEST (and cand's candidates) on a CPU: copy the
     * request's dynamic neurons into a contiguous buffer of the session at
     * the end of prefill, so that decode streams them instead of gathering
     * rows scattered over the layer: the same numbers, in about 0.8 of the
     * FFN's time (SmolLM2, phi 0.4). Costs their bytes per session
     * (eng_session_copy_bytes); none in layers whose activations are cut
     * per token (gemma3n's first layers), which read theirs in place. */
    bool copy_dynamic;
} eng_compute_params;

eng_compute_params eng_compute_params_default(void); /* everything loaded; copy_dynamic */

/* Sets how this session computes from its next reset on; -EINVAL when out
 * of range, -ENOTSUP for ENG_COMP_MEAN on a backend whose memory is not the
 * host's (a GPU: the bias is folded from W_down on the host) and for
 * ENG_PICK_EXACT on a backend without it; -EINVAL also for ENG_PICK_TOKEN
 * on a model loaded without a sketch, for cand without ENG_PICK_EXACT, for
 * candidates below delta, and where phi's bytes leave no down row;
 * -ENOTSUP for anything but every neuron per request (phi 0 or gamma, no
 * compensation) on a mixture of experts. */
int eng_session_set_compute(eng_session *session, const eng_compute_params *params);

/* Backend bytes the session holds for its copy of the dynamic neurons
 * (copy_dynamic), 0 when none. */
size_t eng_session_copy_bytes(const eng_session *session);

/* Share of the model's FFN neurons the last decode step computed (1.0 dense);
 * with ENG_PICK_TOKEN the sketch read counts as the neurons it weighs, with
 * ENG_PICK_EXACT the gate and up rows read for all. */
double eng_session_ffn_share(const eng_session *session);

/* Profiling hook: while sums is not NULL, every eval adds sum_t |a_n(t)| of
 * each layer into sums[l * n_ff + n] (n the neuron's id in the file).
 * -ENOTSUP for a mixture of experts. */
int eng_session_observe_ffn(eng_session *session, double *sums);

/* The model's loading plan, as loaded or last swapped in. */
typedef struct eng_plan_info {
    eng_select_mode mode;
    char task[64];
    float gamma, delta;
    int dense_first, dense_last;
    uint64_t neurons_loaded, neurons_total; /* over all layers */
    uint64_t bytes_ffn;                      /* resident FFN weight bytes, sketch included */
    uint64_t bytes_sketch;                   /* of which the ENG_PICK_TOKEN sketch */
    bool sketch;
} eng_plan_info;

void eng_model_get_plan(const eng_model *model, eng_plan_info *ret_info);

typedef struct eng_swap_stats {
    uint64_t neurons_in, neurons_out; /* neurons moved */
    uint64_t bytes_read;
    uint64_t ns;
} eng_swap_stats;

/* Hot-swap: re-plans the FFN for another task (or other plan parameters)
 * and loads only the neurons that enter, into the slots of those that
 * leave. No session of the model may run meanwhile; sessions created before
 * stay valid (their dynamic neurons reset at their next reset). On failure
 * the old plan keeps serving. A mixture of experts takes the dense plan
 * only (-ENOTSUP for another mode), as at load. */
int eng_model_swap(eng_model *model, const eng_load_plan_params *plan, eng_swap_stats *ret_stats,
                   eng_error *err);

/* ---- misc ------------------------------------------------------------- */

uint64_t eng_time_ns(void); /* CLOCK_MONOTONIC */
const char *eng_backend_name(const eng_model *model);

/* Decode steps launched as one CUDA graph (all zero on the CPU). */
typedef struct eng_graph_stats {
    bool enabled;      /* off: ENG_CUDA_GRAPHS=0, or captures kept failing */
    long steps;        /* decode steps run as one graph launch */
    long replayed;     /* of those, launched again without capturing (same ops, new position) */
    long instantiated; /* of the captured ones, graphs built afresh; the rest patched the last */
    long fallbacks;    /* steps whose capture failed and that ran op by op */
} eng_graph_stats;

/* Where a model runs, for reports and a GPU's roofline. */
typedef struct eng_backend_info {
    char name[16];     /* as eng_backend_name */
    char device[128];  /* the GPU's name; "" on the CPU */
    bool integrated;   /* the GPU shares memory with the host (Jetson) */
    double peak_gbps;  /* the GPU's nominal memory bandwidth; 0: unknown or CPU */
    eng_graph_stats graphs;
    char kernels[16];  /* the CPU's kernel set: "avx512vnni", "avx2", "neon", "scalar" */
    bool prefill_q8;   /* the CPU's prefill takes x in 8 bits (prefill_q8 and VNNI) */
} eng_backend_info;

int eng_model_backend_info(const eng_model *model, eng_backend_info *ret);

#ifdef __cplusplus
}
#endif

#endif /* ENGINE_H */
