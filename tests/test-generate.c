/* eng_generate on the default model: every stop reason, statistics, stop
 * strings against text the model really produces, cancellation, seeded
 * sampling. Skips (77) when the model file is absent. */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine.h"

static int failures;

#define CHECKF(cond, ...)                                                        \
    do {                                                                         \
        if (!(cond)) {                                                           \
            fprintf(stderr, "%s:%d: CHECK failed: %s: ", __FILE__, __LINE__, #cond); \
            fprintf(stderr, __VA_ARGS__);                                        \
            fputc('\n', stderr);                                                 \
            failures++;                                                          \
        }                                                                        \
    } while (0)

#define CHECK(cond)                                                              \
    do {                                                                         \
        if (!(cond)) {                                                           \
            fprintf(stderr, "%s:%d: CHECK failed: %s\n", __FILE__, __LINE__, #cond); \
            failures++;                                                          \
        }                                                                        \
    } while (0)

typedef struct sink {
    char text[8192];
    size_t len;
    int calls;
    int cancel_at; /* cancel on this call (1-based); 0: never */
    bool bad_len;
} sink;

static int on_text(void *ud, const char *text, size_t len) {
    sink *s = ud;
    s->calls++;
    if (len > 0 && !text)
        s->bad_len = true;
    else if (s->len + len < sizeof(s->text)) {
        memcpy(s->text + s->len, text, len);
        s->len += len;
        s->text[s->len] = '\0';
    }
    return s->cancel_at > 0 && s->calls >= s->cancel_at;
}

/* A sink that also records the log-probabilities (on_prob gets the same
 * userdata as on_text: the sink comes first). */
typedef struct probe {
    sink s;
    int n, stop_at;
    int32_t tok[64];
    float lp[64];
    eng_token_prob top[64][5];
} probe;

static int on_prob(void *ud, int32_t tok, float lp, const eng_token_prob *top, int n_top) {
    probe *p = ud;
    if (p->n < 64 && n_top == 5) {
        p->tok[p->n] = tok;
        p->lp[p->n] = lp;
        memcpy(p->top[p->n], top, sizeof(p->top[0]));
    }
    p->n++;
    return p->stop_at > 0 && p->n >= p->stop_at;
}

/* log-softmax of row at id, in double */
static double ref_logprob(const float *row, int n, int id) {
    double m = -INFINITY, s = 0.0;
    for (int i = 0; i < n; i++)
        m = row[i] > m ? row[i] : m;
    for (int i = 0; i < n; i++)
        s += exp((double)row[i] - m);
    return (double)row[id] - m - log(s);
}

/* the generated tokens, through the log-probability callback */
typedef struct idrec {
    int32_t ids[256];
    int n;
} idrec;

static int rec_id(void *ud, int32_t tok, float lp, const eng_token_prob *top, int n_top) {
    idrec *r = ud;
    (void)lp, (void)top, (void)n_top;
    if (r->n < 256)
        r->ids[r->n++] = tok;
    return 0;
}

static int abort_on_second_poll(void *ud) {
    int *polls = ud;
    return ++*polls >= 2;
}

static int gen(eng_session *sess, const int32_t *toks, size_t n, const eng_gen_params *gp,
               sink *s, eng_gen_stats *st) {
    int cancel_at = s->cancel_at;
    memset(s, 0, sizeof(*s));
    s->cancel_at = cancel_at;
    memset(st, 0, sizeof(*st));
    return eng_generate(sess, toks, n, gp, on_text, s, st);
}

static const char *model_path(char *buf, size_t cap) {
    const char *env = getenv("SI_MODEL");
    if (env)
        return env;
    const char *xdg = getenv("XDG_CACHE_HOME"), *home = getenv("HOME");
    if (xdg)
        snprintf(buf, cap, "%s/selectinfer/SmolLM2-135M-Instruct.Q4_1.gguf", xdg);
    else
        snprintf(buf, cap, "%s/.cache/selectinfer/SmolLM2-135M-Instruct.Q4_1.gguf", home ? home : ".");
    return buf;
}

int main(void) {
    char pbuf[4096];
    const char *path = model_path(pbuf, sizeof(pbuf));
    FILE *f = fopen(path, "rb");
    if (!f) {
        fprintf(stderr, "no model at %s: skipped\n", path);
        return 77;
    }
    fclose(f);

    eng_model *model;
    eng_error err;
    eng_model_params mp = eng_model_params_default();
    if (eng_model_load(path, &mp, &model, &err) < 0) {
        fprintf(stderr, "load %s: %s\n", path, err.msg);
        return 1;
    }
    eng_session_params spar = eng_session_params_default();
    spar.n_ctx = 256;
    eng_session *sess;
    if (eng_session_new(model, &spar, &sess) < 0) {
        fprintf(stderr, "session_new failed\n");
        return 1;
    }

    static const char prompt[] = "The history of the Roman Empire";
    int32_t toks[64];
    size_t n = 0;
    CHECK(eng_tokenize(model, prompt, strlen(prompt), ENG_TOK_ADD_SPECIAL, toks, 64, &n) == 0);
    CHECK(n > 0 && n < 64);

    sink s = {0}, s2 = {0};
    eng_gen_stats st, st2;
    eng_gen_params gp = eng_gen_params_default();

    /* length: exactly max_tokens, one callback per token (+ a final flush) */
    gp.max_tokens = 12;
    CHECK(gen(sess, toks, n, &gp, &s, &st) == 0);
    CHECK(st.stop_reason == ENG_STOP_LENGTH);
    CHECK(st.n_generated == 12 && st.n_prompt == (int)n);
    CHECK(st.prefill_ns > 0 && st.decode_ns > 0);
    CHECK(s.calls >= 12 && s.calls <= 13 && !s.bad_len);
    CHECK(s.len > 12);
    printf("greedy: [%s]\n", s.text);

    /* a stop string taken from that text: output is the text before it */
    char stop[8];
    size_t at = s.len / 2;
    memcpy(stop, s.text + at, 4);
    stop[4] = '\0';
    const char *first = strstr(s.text, stop);
    size_t want = first ? (size_t)(first - s.text) : 0;
    const char *stops[] = {"never-matches-xyz", stop};
    gp.stop = stops;
    gp.n_stop = 2;
    CHECK(gen(sess, toks, n, &gp, &s2, &st2) == 0);
    CHECK(st2.stop_reason == ENG_STOP_STRING);
    CHECK(s2.len == want && memcmp(s2.text, s.text, want) == 0);
    CHECK(st2.n_generated <= 12);
    gp.stop = NULL;
    gp.n_stop = 0;

    /* cancellation on the third callback: returns 0, stats filled */
    s2.cancel_at = 3;
    CHECK(gen(sess, toks, n, &gp, &s2, &st2) == 0);
    s2.cancel_at = 0;
    CHECK(st2.stop_reason == ENG_STOP_CANCELLED && st2.n_generated == 3 && st2.n_prompt == (int)n);
    CHECK(s2.len <= s.len && memcmp(s2.text, s.text, s2.len) == 0);

    /* context full: the session ends after n_ctx - n_prompt + 1 tokens (the
     * last one is sampled from the final position and never evaluated) */
    eng_session *small;
    eng_session_params sp2 = spar;
    sp2.n_ctx = (int)n + 4;
    CHECK(eng_session_new(model, &sp2, &small) == 0);
    int n_ctx = eng_session_n_ctx(small);
    gp.max_tokens = 0;
    CHECK(gen(small, toks, n, &gp, &s2, &st2) == 0);
    CHECK(st2.stop_reason == ENG_STOP_CONTEXT);
    CHECK(st2.n_generated == n_ctx - (int)n + 1);
    CHECK(s2.len <= s.len && memcmp(s2.text, s.text, s2.len) == 0);
    /* a prompt longer than the context is refused */
    int32_t many[64];
    for (int i = 0; i < 64; i++)
        many[i] = toks[i % n];
    CHECK(eng_generate(small, many, (size_t)n_ctx + 1, &gp, NULL, NULL, &st2) == -ENOSPC);
    eng_session_free(small);

    /* context shift: a context of 32 goes on past its end, each time
     * without the older half of what follows the first n_keep tokens;
     * rotating the keys (the default) and evaluating again (shift_reeval) */
    for (int reeval = 0; reeval < 2; reeval++) {
        eng_session_params sp4 = spar;
        sp4.n_ctx = 32;
        eng_session *sh = NULL, *ref = NULL;
        CHECK(eng_session_new(model, &sp4, &sh) == 0 && eng_session_new(model, &sp4, &ref) == 0);
        eng_gen_params g4 = eng_gen_params_default();
        g4.on_prob = rec_id;
        idrec plain = {0}, shifted = {0};
        eng_gen_stats s4;
        CHECK(eng_generate(sh, toks, n, &g4, NULL, &plain, &s4) == 0);
        CHECK(s4.stop_reason == ENG_STOP_CONTEXT && s4.n_shifts == 0 && plain.n == 32 - (int)n + 1);
        g4.context_shift = true;
        g4.shift_reeval = reeval;
        g4.n_keep = 4;
        g4.max_tokens = 80;
        CHECK(eng_generate(sh, toks, n, &g4, NULL, &shifted, &s4) == 0);
        /* the shifts the rule makes: at a full context, keep 4, drop half the rest */
        int n_past = (int)n, want = 0, first_at = -1;
        for (int i = 0; i < 80 - 1; i++) {
            if (n_past < 32) {
                n_past++;
                continue;
            }
            const int drop = (n_past - 4) / 2;
            n_past = n_past + 1 - drop;
            if (first_at < 0)
                first_at = i;
            want++;
        }
        CHECKF(s4.stop_reason == ENG_STOP_LENGTH && s4.n_generated == 80 && shifted.n == 80 &&
                   s4.n_shifts == want && want >= 3,
               "stop %d, %d generated, %d shifts (want %d)", s4.stop_reason, s4.n_generated, s4.n_shifts, want);
        /* the same tokens until the context is full */
        CHECK(memcmp(shifted.ids, plain.ids, (size_t)plain.n * sizeof(int32_t)) == 0);
        /* the session holds what the rule leaves: n_past positions, of
         * which a prompt cache may reuse the kept 4 only after a rotation
         * (what moved was computed in the longer context) */
        CHECKF(eng_session_n_past(sh) == n_past, "n_past %d, want %d", eng_session_n_past(sh), n_past);
        CHECKF(reeval || eng_session_n_cached(sh) == 4, "%d cached after rotating",
               eng_session_n_cached(sh));
        /* after the first shift, evaluating again: the token a fresh context
         * of what was kept gives (prompt and answer so far, positions 4 ..
         * 4+drop out); tests/test-shift.c checks the rotated cache */
        if (reeval && first_at >= 0 && shifted.n == 80) {
            int32_t list[64];
            int len = 0;
            for (size_t i = 0; i < n; i++)
                list[len++] = toks[i];
            for (int i = 0; i <= first_at; i++)
                list[len++] = shifted.ids[i];
            const int drop = (len - 1 - 4) / 2;
            memmove(list + 4, list + 4 + drop, (size_t)(len - 4 - drop) * sizeof(int32_t));
            len -= drop;
            eng_session_reset(ref);
            CHECK(eng_session_eval(ref, list, (size_t)len, 0) == 0);
            CHECKF(eng_session_argmax(ref) == shifted.ids[first_at + 1], "after the shift: %d, fresh %d",
                   shifted.ids[first_at + 1], eng_session_argmax(ref));
        }
        g4.n_keep = -1;
        CHECK(eng_generate(sh, toks, n, &g4, NULL, &shifted, &s4) == -EINVAL);
        eng_session_free(sh);
        eng_session_free(ref);
    }

    /* a prompt abandoned between chunks: the abort callback is polled
     * before every n_batch chunk after the first */
    eng_session_params sp3 = spar;
    sp3.n_batch = 4;
    CHECK(eng_session_new(model, &sp3, &small) == 0);
    int polls = 0;
    eng_session_set_abort(small, abort_on_second_poll, &polls);
    CHECK(eng_session_eval(small, many, 16, 0) == -ECANCELED);
    CHECK(polls == 2 && eng_session_n_past(small) == 8); /* two chunks ran */
    eng_session_reset(small);
    polls = 0;
    gp.max_tokens = 4;
    CHECK(gen(small, many, 16, &gp, &s2, &st2) == 0);
    CHECK(st2.stop_reason == ENG_STOP_CANCELLED && st2.n_generated == 0 && s2.calls == 0);
    /* without the callback the same prompt runs through and decodes */
    eng_session_set_abort(small, NULL, NULL);
    CHECK(gen(small, many, 16, &gp, &s2, &st2) == 0);
    CHECK(st2.stop_reason == ENG_STOP_LENGTH && st2.n_generated == 4);
    eng_session_free(small);
    CHECK(eng_generate(sess, toks, 0, &gp, NULL, NULL, &st2) == -EINVAL);
    CHECK(eng_generate(sess, NULL, 3, &gp, NULL, NULL, &st2) == -EINVAL);

    /* end of generation: a chat answer ends with <|im_end|>, not emitted */
    eng_chat_msg msg[] = {{.role = "user", .content = "What is the capital of France?"}};
    char chat[1024];
    int cl = eng_chat_apply(model, msg, 1, true, chat, sizeof(chat));
    CHECK(cl > 0 && cl < (int)sizeof(chat));
    int32_t ctoks[256];
    size_t cn = 0;
    if (cl > 0 && cl < (int)sizeof(chat)) {
        CHECK(eng_tokenize(model, chat, (size_t)cl, ENG_TOK_PARSE_SPECIAL, ctoks, 256, &cn) == 0);
        gp.max_tokens = 40;
        CHECK(gen(sess, ctoks, cn, &gp, &s2, &st2) == 0);
        printf("chat: [%s] (%s)\n", s2.text, eng_stop_reason_name(st2.stop_reason));
        CHECK(st2.stop_reason == ENG_STOP_EOS);
        CHECK(strstr(s2.text, "Paris") != NULL);
        CHECK(strstr(s2.text, "<|im_end|>") == NULL);
    }

    /* log-probabilities of the chat answer's tokens and the 5 most likely
     * at each step, against the logits of a teacher-forced evaluation of
     * the same tokens in another session (prefill kernels, not decode
     * ones: equal up to rounding), log-softmax in double */
    if (cn > 0) {
        probe p;
        memset(&p, 0, sizeof(p));
        eng_gen_params pp = eng_gen_params_default();
        pp.max_tokens = 12;
        pp.on_prob = on_prob;
        pp.n_top_probs = 5;
        eng_gen_stats pst;
        CHECK(eng_generate(sess, ctoks, cn, &pp, on_text, &p, &pst) == 0);
        CHECK(p.n == pst.n_generated && p.n > 3 && p.n <= 12);
        eng_model_info mi;
        eng_model_get_info(model, &mi);
        eng_session *tf = NULL;
        int32_t all[256 + 12];
        memcpy(all, ctoks, cn * sizeof(int32_t));
        memcpy(all + cn, p.tok, (size_t)p.n * sizeof(int32_t));
        CHECK(eng_session_new(model, NULL, &tf) == 0);
        CHECK(tf && eng_session_eval(tf, all, cn + (size_t)p.n, ENG_EVAL_ALL_LOGITS) == 0);
        double worst = 0.0;
        for (int i = 0; tf && i < p.n; i++) {
            const float *row = eng_session_logits(tf, (int)cn - 1 + i);
            CHECK(row != NULL);
            if (!row)
                break;
            const double want = ref_logprob(row, mi.n_vocab, p.tok[i]);
            worst = fmax(worst, fabs(want - p.lp[i]));
            /* greedy: the chosen token is the most likely one */
            CHECK(p.top[i][0].id == p.tok[i] && p.top[i][0].logprob == p.lp[i] && p.lp[i] <= 0.0f);
            double mass = 0.0;
            for (int j = 0; j < 5; j++) {
                const eng_token_prob *t = &p.top[i][j];
                CHECK(t->id >= 0 && (j == 0 || t->logprob <= p.top[i][j - 1].logprob));
                worst = fmax(worst, fabs(ref_logprob(row, mi.n_vocab, t->id) - t->logprob));
                mass += exp(t->logprob);
            }
            CHECK(mass <= 1.0 + 1e-4);
            /* nothing outside the five is more likely than the fifth */
            for (int v = 0; v < mi.n_vocab; v++) {
                bool in = false;
                for (int j = 0; j < 5; j++)
                    in |= p.top[i][j].id == v;
                if (!in && ref_logprob(row, mi.n_vocab, v) > p.top[i][4].logprob + 0.02) {
                    CHECK(!"a token outside the top five is more likely");
                    break;
                }
            }
        }
        printf("logprobs: %d tokens, max |diff| against the teacher-forced logits %.5f\n", p.n, worst);
        CHECK(worst < 0.02);
        eng_session_free(tf);
        /* the callback stops generation like on_text */
        memset(&p, 0, sizeof(p));
        p.stop_at = 2;
        CHECK(eng_generate(sess, ctoks, cn, &pp, on_text, &p, &pst) == 0);
        CHECK(pst.stop_reason == ENG_STOP_CANCELLED && p.n == 2 && pst.n_generated == 1);
        /* a request refused as invalid leaves what the session holds */
        const int held = eng_session_n_past(sess);
        pp.n_top_probs = ENG_MAX_TOP_PROBS + 1;
        CHECK(held > 0 && eng_generate(sess, ctoks, cn, &pp, on_text, &p, &pst) == -EINVAL);
        pp.n_top_probs = 5;
        pp.format = (eng_format)7;
        CHECK(eng_generate(sess, ctoks, cn, &pp, on_text, &p, &pst) == -EINVAL);
        CHECK(eng_session_n_past(sess) == held);
    }

    /* seeded sampling: same seed, same text; the session is reset each time */
    gp.max_tokens = 10;
    gp.sampler.temperature = 1.0f;
    gp.sampler.seed = 1234;
    CHECK(gen(sess, toks, n, &gp, &s, &st) == 0);
    CHECK(gen(sess, toks, n, &gp, &s2, &st2) == 0);
    CHECK(s.len > 0 && s.len == s2.len && memcmp(s.text, s2.text, s.len) == 0);

    CHECK(strcmp(eng_stop_reason_name(ENG_STOP_EOS), "eos") == 0);
    CHECK(strcmp(eng_stop_reason_name((eng_stop_reason)99), "unknown") == 0);
    uint64_t t0 = eng_time_ns(), t1 = eng_time_ns();
    CHECK(t1 >= t0 && t0 > 0);

    eng_session_free(sess);
    eng_model_free(model);
    if (failures) {
        fprintf(stderr, "%d check(s) failed\n", failures);
        return 1;
    }
    printf("ok\n");
    return 0;
}
