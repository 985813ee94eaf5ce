/* A stand-in for the engine behind engine.h, for daemon tests that need
 * exact control of timing: selectinferd-fake links it instead of the real
 * engine. Tokens are bytes; generation emits "w0 w1 w2 ..." one word per
 * token, SI_FAKE_TOKEN_US microseconds apart (default 2000), until
 * max_tokens (STOP_LENGTH); a prompt containing "EOS" ends after 3 tokens
 * (STOP_EOS). Loading takes SI_FAKE_LOAD_MS milliseconds (default 0) and
 * fails for a path that does not exist. The real-model tests cover the
 * real engine; this one proves the daemon's own logic. */
#include "engine.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

struct eng_model {
    int dummy;
};

struct eng_session {
    int n_ctx;
};

static long env_long(const char *name, long def)
{
    const char *v = getenv(name);
    return v && v[0] ? strtol(v, NULL, 10) : def;
}

static void sleep_us(long us)
{
    struct timespec ts = {us / 1000000, (us % 1000000) * 1000};
    while (nanosleep(&ts, &ts) < 0 && errno == EINTR)
        ;
}

uint64_t eng_time_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

eng_model_params eng_model_params_default(void)
{
    eng_model_params p;
    memset(&p, 0, sizeof(p));
    p.storage = ENG_DTYPE_F16;
    return p;
}

int eng_model_load(const char *path, const eng_model_params *params, eng_model **ret_model, eng_error *err)
{
    sleep_us(env_long("SI_FAKE_LOAD_MS", 0) * 1000);
    if (access(path, R_OK) != 0) {
        if (err)
            snprintf(err->msg, sizeof(err->msg), "cannot open '%s'", path);
        return -ENOENT;
    }
    eng_model *m = calloc(1, sizeof(*m));
    if (!m)
        return -ENOMEM;
    *ret_model = m;
    return 0;
}

void eng_model_free(eng_model *model)
{
    free(model);
}

void eng_model_get_info(const eng_model *model, eng_model_info *ret_info)
{
    memset(ret_info, 0, sizeof(*ret_info));
    snprintf(ret_info->arch, sizeof(ret_info->arch), "fake");
    snprintf(ret_info->name, sizeof(ret_info->name), "fake-model");
    ret_info->n_layer = 2;
    ret_info->n_vocab = 256;
    ret_info->n_ctx_train = 512;
    ret_info->n_threads = 1;
}

const char *eng_backend_name(const eng_model *model)
{
    return "fake";
}

int eng_tokenize(const eng_model *model, const char *text, size_t len, unsigned flags,
                 int32_t *tokens, size_t cap, size_t *ret_n)
{
    *ret_n = len;
    if (len > cap)
        return -ENOBUFS;
    for (size_t i = 0; i < len; i++)
        tokens[i] = (unsigned char)text[i];
    return 0;
}

eng_chat_template eng_model_chat_template(const eng_model *model)
{
    return ENG_CHAT_CHATML;
}

int eng_chat_apply(const eng_model *model, const eng_chat_msg *msgs, size_t n_msgs,
                   bool add_assistant, char *buf, size_t cap)
{
    size_t n = 0;
    char tmp[64];
    for (size_t i = 0; i <= n_msgs; i++) {
        const char *parts[3];
        if (i < n_msgs) {
            parts[0] = msgs[i].role;
            parts[1] = ": ";
            parts[2] = msgs[i].content;
        } else if (add_assistant) {
            parts[0] = "assistant";
            parts[1] = ":";
            parts[2] = "";
        } else {
            break;
        }
        for (int k = 0; k < 3; k++) {
            size_t l = strlen(parts[k]);
            if (n + l < cap)
                memcpy(buf + n, parts[k], l);
            n += l;
        }
        snprintf(tmp, sizeof(tmp), "\n");
        if (n + 1 < cap)
            buf[n] = '\n';
        n++;
    }
    if (cap)
        buf[n < cap ? n : cap - 1] = '\0';
    return (int)n;
}

eng_session_params eng_session_params_default(void)
{
    eng_session_params p = {0, 0};
    return p;
}

int eng_session_new(const eng_model *model, const eng_session_params *params, eng_session **ret_session)
{
    eng_session *s = calloc(1, sizeof(*s));
    if (!s)
        return -ENOMEM;
    s->n_ctx = params->n_ctx > 0 ? params->n_ctx : 512;
    *ret_session = s;
    return 0;
}

void eng_session_free(eng_session *session)
{
    free(session);
}

int eng_session_n_ctx(const eng_session *session)
{
    return session->n_ctx;
}

eng_gen_params eng_gen_params_default(void)
{
    eng_gen_params p;
    memset(&p, 0, sizeof(p));
    p.sampler.top_p = 1.0f;
    p.sampler.repeat_penalty = 1.0f;
    p.sampler.repeat_last_n = 64;
    return p;
}

int eng_generate(eng_session *session, const int32_t *prompt, size_t n_prompt,
                 const eng_gen_params *params, eng_text_cb on_text, void *userdata,
                 eng_gen_stats *ret_stats)
{
    long delay = env_long("SI_FAKE_TOKEN_US", 2000);
    bool eos = false;
    for (size_t i = 0; i + 2 < n_prompt; i++)
        if (prompt[i] == 'E' && prompt[i + 1] == 'O' && prompt[i + 2] == 'S')
            eos = true;
    eng_gen_stats st = {.n_prompt = (int)n_prompt, .stop_reason = ENG_STOP_LENGTH};
    uint64_t t0 = eng_time_ns();
    sleep_us(delay);
    st.prefill_ns = eng_time_ns() - t0;
    t0 = eng_time_ns();
    int max = params->max_tokens > 0 ? params->max_tokens : session->n_ctx - (int)n_prompt;
    for (int i = 0; i < max; i++) {
        if (eos && i == 3) {
            st.stop_reason = ENG_STOP_EOS;
            break;
        }
        sleep_us(delay);
        char word[32];
        int n = snprintf(word, sizeof(word), "w%d ", i);
        st.n_generated++;
        if (on_text(userdata, word, (size_t)n)) {
            st.stop_reason = ENG_STOP_CANCELLED;
            break;
        }
    }
    st.decode_ns = eng_time_ns() - t0;
    *ret_stats = st;
    return 0;
}
