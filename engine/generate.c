/* Generation: prompt -> sampled tokens -> streamed text, stop conditions and
 * timing. The model side uses only engine.h; the text side (UTF-8 and stop
 * strings) is the eng__textstream of generate.h. */
#include <errno.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "engine.h"
#include "generate.h"
#include "jschema.h"
#include "json.h"

uint64_t eng_time_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

const char *eng_stop_reason_name(eng_stop_reason reason) {
    switch (reason) {
    case ENG_STOP_NONE: return "none";
    case ENG_STOP_LENGTH: return "length";
    case ENG_STOP_EOS: return "eos";
    case ENG_STOP_STRING: return "stop";
    case ENG_STOP_CANCELLED: return "cancelled";
    case ENG_STOP_CONTEXT: return "context";
    }
    return "unknown";
}

eng_gen_params eng_gen_params_default(void) {
    return (eng_gen_params){
        .max_tokens = 0,
        .cache_prompt = false,
        .stop = NULL,
        .n_stop = 0,
        .sampler = eng_sampler_params_default(),
    };
}

/* ---- text stream ---- */

int eng__text_init(eng__textstream *t, const char *const *stop, size_t n_stop) {
    if (!t || (!stop && n_stop > 0) || n_stop > ENG__STOP_MAX_COUNT)
        return -EINVAL;
    memset(t, 0, sizeof(*t));
    for (size_t i = 0; i < n_stop; i++) {
        if (!stop[i])
            return -EINVAL;
        size_t len = strnlen(stop[i], ENG__STOP_MAX_LEN + 1);
        if (len > ENG__STOP_MAX_LEN)
            return -EINVAL;
        t->stop_len[i] = len;
        if (len > t->max_stop_len)
            t->max_stop_len = len;
    }
    t->stop = stop;
    t->n_stop = n_stop;
    return 0;
}

void eng__text_free(eng__textstream *t) {
    if (!t)
        return;
    free(t->pend);
    free(t->out);
    t->pend = t->out = NULL;
    t->n_pend = t->cap_pend = t->cap_out = 0;
}

static int grow(char **buf, size_t *cap, size_t need) {
    if (need <= *cap)
        return 0;
    size_t n = *cap ? *cap : 64;
    while (n < need) {
        if (n > SIZE_MAX / 2)
            return -ENOMEM;
        n *= 2;
    }
    char *p = realloc(*buf, n);
    if (!p)
        return -ENOMEM;
    *buf = p;
    *cap = n;
    return 0;
}

/* Moves pend[0..n) to out (NUL-terminated) and drops it from pend. */
static int release(eng__textstream *t, size_t n, const char **ret_text, size_t *ret_len) {
    int r = grow(&t->out, &t->cap_out, n + 1);
    if (r < 0)
        return r;
    if (n > 0)
        memcpy(t->out, t->pend, n);
    t->out[n] = '\0';
    if (t->n_pend > n)
        memmove(t->pend, t->pend + n, t->n_pend - n);
    t->n_pend -= n;
    *ret_text = t->out;
    *ret_len = n;
    return 0;
}

int eng__text_push(eng__textstream *t, const char *bytes, size_t n,
                   const char **ret_text, size_t *ret_len) {
    if (!t || (!bytes && n > 0) || !ret_text || !ret_len || t->done)
        return -EINVAL;
    if (n > SIZE_MAX - t->n_pend - 1)
        return -ENOMEM;
    int r = grow(&t->pend, &t->cap_pend, t->n_pend + n);
    if (r < 0)
        return r;
    size_t old = t->n_pend;
    if (n > 0)
        memcpy(t->pend + old, bytes, n);
    t->n_pend += n;

    /* Earliest stop match. pend[0..old) held none, so a match must end in
     * the new bytes: start each search where such a match could begin. */
    size_t cut = SIZE_MAX;
    for (size_t i = 0; i < t->n_stop; i++) {
        size_t m = t->stop_len[i];
        if (m == 0 || m > t->n_pend)
            continue;
        size_t from = old >= m - 1 ? old - (m - 1) : 0;
        const char *hit = memmem(t->pend + from, t->n_pend - from, t->stop[i], m);
        if (hit && (size_t)(hit - t->pend) < cut)
            cut = (size_t)(hit - t->pend);
    }
    if (cut != SIZE_MAX) {
        t->n_pend = cut; /* drop the stop string and what follows */
        r = release(t, cut, ret_text, ret_len);
        if (r < 0)
            return r;
        t->done = true;
        return 1;
    }

    /* Hold back the longest suffix that is a proper prefix of a stop string. */
    size_t hold = 0;
    for (size_t i = 0; i < t->n_stop; i++) {
        size_t m = t->stop_len[i];
        size_t k = m > 0 ? m - 1 : 0;
        if (k > t->n_pend)
            k = t->n_pend;
        for (; k > hold; k--)
            if (memcmp(t->pend + t->n_pend - k, t->stop[i], k) == 0) {
                hold = k;
                break;
            }
    }
    size_t emit = eng_utf8_complete_prefix(t->pend, t->n_pend - hold);
    return release(t, emit, ret_text, ret_len);
}

int eng__text_finish(eng__textstream *t, const char **ret_text, size_t *ret_len) {
    if (!t || !ret_text || !ret_len || t->done)
        return -EINVAL;
    size_t ok = eng_utf8_complete_prefix(t->pend, t->n_pend);
    if (ok < t->n_pend) {
        /* one U+FFFD for the incomplete tail (at most 3 bytes) */
        t->n_pend = ok;
        int r = grow(&t->pend, &t->cap_pend, ok + 3);
        if (r < 0)
            return r;
        memcpy(t->pend + ok, "\xEF\xBF\xBD", 3);
        t->n_pend = ok + 3;
    }
    int r = release(t, t->n_pend, ret_text, ret_len);
    if (r < 0)
        return r;
    t->done = true;
    return 0;
}

int eng_format_parse(const char *name, eng_format *ret_format) {
    if (!name || !ret_format)
        return -EINVAL;
    if (!strcmp(name, "text"))
        *ret_format = ENG_FORMAT_TEXT;
    else if (!strcmp(name, "json"))
        *ret_format = ENG_FORMAT_JSON;
    else
        return -EINVAL;
    return 0;
}

int eng_json_schema_check(const char *schema, char *msg, size_t cap) {
    if (!schema)
        return -EINVAL;
    eng__jschema *s = NULL;
    int r = eng__jschema_compile(schema, strlen(schema), &s, msg, cap);
    eng__jschema_free(s);
    return r;
}

/* ---- generation ---- */

/* The bytes of one token into *buf (grown as needed). */
static int token_piece(const eng_model *m, int32_t tok, char **buf, size_t *cap) {
    for (int tries = 0; tries < 2; tries++) {
        int n = eng_token_to_piece(m, tok, false, *buf, *cap);
        if (n < 0)
            return n;
        if ((size_t)n <= *cap)
            return n;
        int r = grow(buf, cap, (size_t)n);
        if (r < 0)
            return r;
    }
    return -EIO; /* the piece changed size between two calls */
}

/* ENG_FORMAT_JSON: the recognizer of the text so far (any object, or the
 * documents of a schema), and every token's bytes to try on a copy of it.
 * A token with no bytes (the end-of-turn and other control tokens) never
 * continues the document. */
typedef struct json_guard {
    eng__json state;
    eng__jschema *schema; /* NULL: any object (state) */
    eng__jsr sstate;
    char *bytes;   /* the pieces back to back */
    uint32_t *off; /* token t: bytes[off[t], off[t + 1]) */
    float *masked; /* logits, the tokens that cannot continue at -inf */
    int n_vocab;
} json_guard;

static void guard_free(json_guard *g) {
    eng__jschema_free(g->schema);
    free(g->bytes);
    free(g->off);
    free(g->masked);
}

static int guard_init(json_guard *g, const eng_model *m, int n_vocab, const char *schema) {
    memset(g, 0, sizeof(*g));
    eng__json_init(&g->state);
    if (schema) {
        char msg[8];
        int r = eng__jschema_compile(schema, strlen(schema), &g->schema, msg, 0);
        if (r < 0)
            return r;
        eng__jsr_init(&g->sstate, g->schema);
    }
    g->n_vocab = n_vocab;
    size_t cap = (size_t)n_vocab * 8, len = 0;
    g->bytes = malloc(cap);
    g->off = malloc(((size_t)n_vocab + 1) * sizeof(*g->off));
    g->masked = malloc((size_t)n_vocab * sizeof(*g->masked));
    if (!g->bytes || !g->off || !g->masked)
        return -ENOMEM;
    for (int t = 0; t < n_vocab; t++) {
        g->off[t] = (uint32_t)len;
        if (eng_token_is_eog(m, t))
            continue;
        int n;
        while ((n = eng_token_to_piece(m, t, false, g->bytes + len, cap - len)) >= 0 &&
               (size_t)n > cap - len) {
            char *nb = realloc(g->bytes, cap * 2);
            if (!nb)
                return -ENOMEM;
            g->bytes = nb;
            cap *= 2;
        }
        if (n < 0)
            return n;
        len += (size_t)n;
        if (len > UINT32_MAX)
            return -E2BIG;
    }
    g->off[n_vocab] = (uint32_t)len;
    return 0;
}

/* The text so far continued by bytes[0..n): 0, or -EILSEQ. */
static int guard_feed(json_guard *g, const char *bytes, size_t n) {
    return g->schema ? eng__jsr_feed(&g->sstate, bytes, n) : eng__json_feed(&g->state, bytes, n);
}

static bool guard_done(const json_guard *g) {
    return g->schema ? eng__jsr_done(&g->sstate) : eng__json_done(&g->state);
}

static bool guard_allows(const json_guard *g, int32_t t) {
    const uint32_t a = g->off[t], b = g->off[t + 1];
    if (b <= a)
        return false;
    if (g->schema) {
        eng__jsr r = g->sstate;
        return eng__jsr_feed(&r, g->bytes + a, b - a) == 0;
    }
    eng__json j = g->state;
    return eng__json_feed(&j, g->bytes + a, b - a) == 0;
}

/* The sampler's choice if it continues the object; otherwise the choice
 * among the tokens that do (llama.cpp's grammar sampling does the same:
 * the whole vocabulary is tried only when the first choice fails).
 * -EILSEQ when none does (every logit NaN or -inf). */
static int32_t guard_sample(json_guard *g, eng_sampler *smp, const float *logits) {
    int32_t tok = eng_sampler_sample(smp, logits);
    if (tok < 0 || guard_allows(g, tok))
        return tok;
    for (int t = 0; t < g->n_vocab; t++)
        g->masked[t] = guard_allows(g, t) ? logits[t] : -INFINITY;
    tok = eng_sampler_sample(smp, g->masked);
    if (tok < 0)
        return tok;
    return guard_allows(g, tok) ? tok : -EILSEQ;
}

/* The log-probability of tok in logits[0..n) and the n_top most likely
 * tokens (n_top <= ENG_MAX_TOP_PROBS), most likely first, ties to the
 * lower id: one pass for the maximum and the k best, one for the sum (in
 * double). NaN logits take no part; tok's own NaN gives NaN. */
static float token_logprob(const float *logits, int n, int32_t tok, eng_token_prob *top, int n_top) {
    float m = -INFINITY;
    int k = 0;
    for (int i = 0; i < n; i++) {
        const float v = logits[i];
        if (isnan(v))
            continue;
        m = v > m ? v : m;
        if (k == n_top && (n_top == 0 || v <= top[k - 1].logprob))
            continue;
        int j = k < n_top ? k++ : k - 1; /* the slot v takes, then moved up */
        while (j > 0 && top[j - 1].logprob < v) {
            top[j] = top[j - 1];
            j--;
        }
        top[j] = (eng_token_prob){ i, v };
    }
    double s = 0.0;
    for (int i = 0; i < n; i++)
        if (!isnan(logits[i]))
            s += exp((double)logits[i] - m);
    const float lz = (float)((double)m + log(s));
    for (int j = 0; j < k; j++)
        top[j].logprob -= lz;
    for (int j = k; j < n_top; j++)
        top[j] = (eng_token_prob){ -1, -INFINITY }; /* fewer numbers than asked */
    return logits[tok] - lz;
}

int eng_generate(eng_session *session, const int32_t *prompt, size_t n_prompt,
                 const eng_gen_params *params, eng_text_cb on_text, void *userdata,
                 eng_gen_stats *ret_stats) {
    if (!session || !prompt || n_prompt == 0 || !params ||
        (params->format != ENG_FORMAT_TEXT && params->format != ENG_FORMAT_JSON) ||
        params->n_top_probs < 0 || params->n_top_probs > ENG_MAX_TOP_PROBS || params->n_keep < 0)
        return -EINVAL; /* before the session is touched: a bad request keeps its cache */
    if (params->format == ENG_FORMAT_JSON && params->json_schema) {
        char msg[8];
        int r = eng_json_schema_check(params->json_schema, msg, 0);
        if (r < 0)
            return r;
    }
    const eng_model *model = eng_session_model(session);
    eng_model_info info;
    eng_model_get_info(model, &info);
    int n_ctx = eng_session_n_ctx(session);
    if (n_prompt > (size_t)n_ctx) {
        eng_session_reset(session);
        return -ENOSPC;
    }
    int kept = 0;
    if (params->cache_prompt)
        kept = eng_session_reset_prefix(session, prompt, n_prompt);
    else
        eng_session_reset(session);

    eng_gen_stats st = {.n_prompt = (int)n_prompt, .n_cached = kept,
                        .stop_reason = ENG_STOP_NONE};
    eng__textstream ts;
    eng_sampler *smp = NULL;
    char *piece = NULL;
    size_t piece_cap = 0;
    json_guard guard, *json = NULL;
    /* the context's tokens and the one sampled last (context_shift) */
    int32_t *hist = params->context_shift ? malloc(((size_t)n_ctx + 1) * sizeof(*hist)) : NULL;
    size_t n_hist = 0;
    if (params->context_shift && !hist)
        return -ENOMEM;
    if (hist) {
        memcpy(hist, prompt, n_prompt * sizeof(*hist));
        n_hist = n_prompt;
    }
    int r = eng__text_init(&ts, params->stop, params->n_stop);
    if (r < 0) {
        free(hist);
        return r;
    }
    r = eng_sampler_new(&params->sampler, info.n_vocab, &smp);
    if (r < 0)
        goto out;
    if (params->format == ENG_FORMAT_JSON) {
        json = &guard;
        r = guard_init(json, model, info.n_vocab, params->json_schema);
        if (r < 0)
            goto out;
    }
    r = grow(&piece, &piece_cap, 256);
    if (r < 0)
        goto out;
    for (size_t i = 0; i < n_prompt; i++)
        eng_sampler_accept(smp, prompt[i]);
    /* Plain greedy needs the argmax only: a GPU then picks the token itself
     * and sends back 4 bytes per step instead of a row of logits; top-k
     * sampling needs the row's candidates, a few thousand values. (Not for
     * JSON, where the sampler's choice may not continue the object, nor
     * with log-probabilities, which need the row.) */
    const bool row = json || params->on_prob;
    const unsigned eval_flags = row ? 0 : eng_sampler_eval_flags(smp, session);

    uint64_t t0 = eng_time_ns();
    r = eng_session_eval(session, prompt + kept, n_prompt - (size_t)kept, eval_flags);
    st.prefill_ns = eng_time_ns() - t0;
    if (r == -ECANCELED) {
        /* the session's abort callback gave up on the prompt */
        eng_session_reset(session);
        st.stop_reason = ENG_STOP_CANCELLED;
        if (ret_stats)
            *ret_stats = st;
        r = 0;
        goto out;
    }
    if (r < 0)
        goto out;

    const char *text;
    size_t len;
    uint64_t t1 = eng_time_ns();
    for (;;) {
        int32_t tok;
        if (!row) {
            tok = eng_sampler_sample_session(smp, session);
            if (tok == -ENODATA)
                tok = -EIO; /* the eval kept nothing: as a missing row */
        } else {
            const float *logits = eng_session_logits(session, -1);
            if (!logits) {
                r = -EIO;
                goto out;
            }
            tok = json ? guard_sample(json, smp, logits) : eng_sampler_sample(smp, logits);
        }
        if (tok < 0) {
            r = tok;
            goto out;
        }
        if (eng_token_is_eog(model, tok)) {
            st.stop_reason = ENG_STOP_EOS; /* not emitted, not counted */
            break;
        }
        if (params->on_prob) {
            eng_token_prob top[ENG_MAX_TOP_PROBS];
            const float lp = token_logprob(eng_session_logits(session, -1), info.n_vocab, tok, top,
                                           params->n_top_probs);
            if (params->on_prob(userdata, tok, lp, top, params->n_top_probs) != 0) {
                st.stop_reason = ENG_STOP_CANCELLED;
                break;
            }
        }
        eng_sampler_accept(smp, tok);
        st.n_generated++;

        int n = token_piece(model, tok, &piece, &piece_cap);
        if (n < 0) {
            r = n;
            goto out;
        }
        if (json && guard_feed(json, piece, (size_t)n) < 0) {
            r = -EILSEQ; /* guard_sample tried these very bytes */
            goto out;
        }
        int matched = eng__text_push(&ts, piece, (size_t)n, &text, &len);
        if (matched < 0) {
            r = matched;
            goto out;
        }
        /* Called once per token, with empty text when it was all held back,
         * so a client can cancel at every step. */
        if (on_text && on_text(userdata, text, len) != 0) {
            st.stop_reason = ENG_STOP_CANCELLED;
            break;
        }
        if (matched) {
            st.stop_reason = ENG_STOP_STRING;
            break;
        }
        if (json && guard_done(json)) {
            st.stop_reason = ENG_STOP_EOS; /* the document closed */
            break;
        }
        if (params->max_tokens > 0 && st.n_generated >= params->max_tokens) {
            st.stop_reason = ENG_STOP_LENGTH;
            break;
        }
        if (hist)
            hist[n_hist++] = tok;
        if (eng_session_n_past(session) >= n_ctx) {
            if (!hist) {
                st.stop_reason = ENG_STOP_CONTEXT;
                break;
            }
            /* the older half of what follows the kept start goes */
            const size_t keep = (size_t)params->n_keep < (size_t)n_ctx / 2 ? (size_t)params->n_keep
                                                                             : (size_t)n_ctx / 2;
            const size_t drop = (n_hist - 1 - keep) / 2;
            if (drop == 0) {
                st.stop_reason = ENG_STOP_CONTEXT;
                break;
            }
            memmove(hist + keep, hist + keep + drop, (n_hist - keep - drop) * sizeof(*hist));
            n_hist -= drop;
            st.n_shifts++;
            /* the rest moves down, and tok is evaluated after it below;
             * or (asked for, or a cache the backend cannot read back) the
             * rest, tok last, is evaluated again, its logits the next step's */
            r = params->shift_reeval ? -ENOTSUP : eng_session_shift(session, (int)keep, (int)drop);
            if (r == -ENOTSUP) {
                const int held = eng_session_reset_prefix(session, hist, n_hist);
                r = eng_session_eval(session, hist + held, n_hist - (size_t)held, eval_flags);
                if (r < 0)
                    goto out;
                continue;
            }
            if (r < 0)
                goto out;
        }
        r = eng_session_eval(session, &tok, 1, eval_flags);
        if (r == -ENOSPC) {
            st.stop_reason = ENG_STOP_CONTEXT;
            break;
        }
        if (r < 0)
            goto out;
    }

    if (st.stop_reason == ENG_STOP_EOS || st.stop_reason == ENG_STOP_LENGTH ||
        st.stop_reason == ENG_STOP_CONTEXT) {
        r = eng__text_finish(&ts, &text, &len);
        if (r < 0)
            goto out;
        if (len > 0 && on_text && on_text(userdata, text, len) != 0)
            st.stop_reason = ENG_STOP_CANCELLED;
    }
    st.decode_ns = eng_time_ns() - t1;
    r = 0;
    if (ret_stats)
        *ret_stats = st;
out:
    free(hist);
    if (json)
        guard_free(json);
    eng__text_free(&ts);
    eng_sampler_free(smp);
    free(piece);
    return r;
}
