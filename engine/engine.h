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
} eng_dtype;

typedef struct eng_model_params {
    eng_dtype storage; /* weight storage type after conversion */
    int n_threads;     /* worker threads; <= 0: number of online CPUs */
} eng_model_params;

eng_model_params eng_model_params_default(void);

/* Loads a GGUF file. On failure returns -errno (-EINVAL bad or unsupported
 * file, -ENOENT missing file or tensor, -ENOMEM) and fills err (may be NULL). */
int eng_model_load(const char *path, const eng_model_params *params,
                   eng_model **ret_model, eng_error *err);
void eng_model_free(eng_model *model);

typedef struct eng_model_info {
    char arch[32];        /* "llama", "qwen2" */
    char name[128];       /* general.name, may be empty */
    int n_layer, n_embd, n_ff, n_head, n_head_kv, head_dim, n_vocab;
    int n_ctx_train;
    eng_dtype storage;
    int n_threads;
    uint64_t n_params;        /* parameters as stored in the file */
    uint64_t bytes_weights;   /* resident weight bytes after conversion */
    uint64_t bytes_per_token; /* weight bytes one decode step reads */
} eng_model_info;

void eng_model_get_info(const eng_model *model, eng_model_info *ret_info);

/* ---- tokenizer -------------------------------------------------------- */

enum {
    ENG_TOK_ADD_SPECIAL = 1 << 0,   /* add BOS/EOS as the model's metadata says */
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

typedef struct eng_chat_msg {
    const char *role; /* "system", "user", "assistant" */
    const char *content;
} eng_chat_msg;

typedef enum eng_chat_template {
    ENG_CHAT_NONE = 0,
    ENG_CHAT_CHATML, /* SmolLM2, Qwen2.5 */
    ENG_CHAT_LLAMA3,
} eng_chat_template;

eng_chat_template eng_model_chat_template(const eng_model *model);

/* Renders messages with the model's template (its default system prompt
 * included where the template adds one), followed by the assistant header
 * when add_assistant. Writes at most cap bytes plus NUL; returns the full
 * length (like snprintf), or -ENOTSUP when the model has no known template. */
int eng_chat_apply(const eng_model *model, const eng_chat_msg *msgs, size_t n_msgs,
                   bool add_assistant, char *buf, size_t cap);

/* ---- sessions: KV cache and forward pass -------------------------------- */

typedef struct eng_session_params {
    int n_ctx;   /* context length in tokens; <= 0: min(model's, 4096) */
    int n_batch; /* tokens per forward step in prefill; <= 0: 256 */
} eng_session_params;

eng_session_params eng_session_params_default(void);

int eng_session_new(const eng_model *model, const eng_session_params *params,
                    eng_session **ret_session);
void eng_session_free(eng_session *session);
void eng_session_reset(eng_session *session); /* forget the context */
int eng_session_n_past(const eng_session *session);
int eng_session_n_ctx(const eng_session *session);

enum {
    ENG_EVAL_ALL_LOGITS = 1 << 0, /* keep logits of every token, not only the last */
};

/* Runs tokens[0..n) through the model after the n_past tokens already in the
 * cache (prefill when n > 1, decode when n == 1). -ENOSPC when the context is
 * full, -EINVAL for an out-of-range token. */
int eng_session_eval(eng_session *session, const int32_t *tokens, size_t n, unsigned flags);

/* Logits of the i-th token of the last eval (i = -1: the last token); NULL
 * when not kept. Valid until the next eval. n_vocab floats. */
const float *eng_session_logits(const eng_session *session, int i);

/* ---- sampling --------------------------------------------------------- */

typedef struct eng_sampler_params {
    float temperature;    /* 0: greedy */
    int top_k;            /* 0: off */
    float top_p;          /* 1: off */
    float min_p;          /* 0: off */
    float repeat_penalty; /* 1: off */
    int repeat_last_n;    /* tokens the penalty looks back over */
    uint64_t seed;
} eng_sampler_params;

eng_sampler_params eng_sampler_params_default(void); /* greedy */

int eng_sampler_new(const eng_sampler_params *params, int n_vocab, eng_sampler **ret_sampler);
void eng_sampler_free(eng_sampler *sampler);
void eng_sampler_reset(eng_sampler *sampler);
/* Chooses a token from logits[0..n_vocab); does not modify logits. */
int32_t eng_sampler_sample(eng_sampler *sampler, const float *logits);
/* Records a token of the context (prompt or generated) for the repetition penalty. */
void eng_sampler_accept(eng_sampler *sampler, int32_t token);

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

typedef struct eng_gen_params {
    int max_tokens;             /* <= 0: until EOS or context full */
    const char *const *stop;    /* stop strings, not emitted */
    size_t n_stop;
    eng_sampler_params sampler;
} eng_gen_params;

eng_gen_params eng_gen_params_default(void);

typedef struct eng_gen_stats {
    int n_prompt;
    int n_generated;
    uint64_t prefill_ns;
    uint64_t decode_ns;
    eng_stop_reason stop_reason;
} eng_gen_stats;

/* Called with each piece of complete UTF-8 text; tokens holds the ids that
 * produced it (may be empty when text was held back). Return nonzero to cancel. */
typedef int (*eng_text_cb)(void *userdata, const char *text, size_t len);

/* Resets the session, evaluates the prompt, and samples until a stop
 * condition. Returns 0 (stats filled even when cancelled) or -errno. */
int eng_generate(eng_session *session, const int32_t *prompt, size_t n_prompt,
                 const eng_gen_params *params, eng_text_cb on_text, void *userdata,
                 eng_gen_stats *ret_stats);

/* ---- misc ------------------------------------------------------------- */

uint64_t eng_time_ns(void); /* CLOCK_MONOTONIC */
const char *eng_backend_name(const eng_model *model);

#ifdef __cplusplus
}
#endif

#endif /* ENGINE_H */
