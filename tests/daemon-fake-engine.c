/* A stand-in for the engine behind engine.h, for daemon tests that need
 * exact control of timing: selectinferd-fake links it instead of the real
 * engine. Tokens are bytes; generation emits "w0 w1 w2 ..." one word per
 * token, SI_FAKE_TOKEN_US microseconds apart (default 2000), until
 * max_tokens (STOP_LENGTH); a prompt containing "EOS" ends after 3 tokens
 * (STOP_EOS). Loading takes SI_FAKE_LOAD_MS milliseconds (default 0) and
 * fails for a path that does not exist. Profiles are text files: the line
 * "fake-profile", then one task name per line; a swap takes SI_FAKE_SWAP_MS
 * (default 0) and moves 100 neurons per changed task; with a task active,
 * words read "TASK:wN". phi sets ffn_share (1 without). A prompt with
 * "HANG" first stalls SI_FAKE_HANG_MS (default 2000) without a callback,
 * as a hung GPU call would. Its chat template has a thinking switch:
 * ENG_CHAT_NO_THINK ends the prompt with " <think></think>". An answer
 * that would overrun the context with context_shift starts "keepN " (N:
 * n_keep) and counts one shift. Embeddings
 * A prompt with "CALLTOOL" is answered with FAKE_CALL, one with "THINK"
 * with FAKE_THINK (a reasoning model's answer), 8 bytes a token, then
 * STOP_EOS. Embeddings
 * have 8 values: byte sums by position mod 8, polling the abort callback
 * every 64 bytes, SI_FAKE_TOKEN_US apart. The real-model
 * tests cover the real engine; this one proves the daemon's own logic. */
#include "engine.h"
#include "chat.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define FAKE_CALL                                                                            \
    "Checking.\n<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\":\"Paris\"}}\n"  \
    "</tool_call>\n<tool_call>\n{\"name\": \"now\"}\n</tool_call>"

#define FAKE_THINK "<think>\nweighing it\n</think>\n\nThe answer."

struct eng_model {
    char tmpl[64]; /* a template set by name or text: "template: NAME" heads each chat */
    eng_plan_info plan;
    eng_progress_cb progress;
    void *progress_data;
};

static void sleep_us(long us);

/* ms milliseconds in 20 steps, each reported as a layer done, as the
 * engine reports loads and swaps */
static void progress_sleep(eng_progress_cb cb, void *ud, long ms)
{
    for (int i = 1; i <= 20; i++) {
        sleep_us(ms * 1000 / 20);
        if (cb)
            cb(ud, i, 20);
    }
}

struct eng_session {
    const eng_model *model;
    int n_ctx;
    eng_kv_type kv_type;
    eng_compute_params compute;
    double share;
    eng_abort_cb abort_cb;
    void *abort_data;
    /* the prompt cache: the last prompt, all of it reusable (as a
     * selective session's prompt is, without its decode steps) */
    int32_t *held;
    size_t n_held;
    /* the dynamic copy's bytes, as the engine keeps them: a buffer that
     * grows to the largest selection (here 1 KiB a prompt token of a
     * request computed below gamma) and stays through resets */
    size_t copy;
};

struct eng_profile {
    int n;
    char tasks[8][64];
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
    progress_sleep(params ? params->progress : NULL, params ? params->progress_data : NULL,
                   env_long("SI_FAKE_LOAD_MS", 0));
    if (access(path, R_OK) != 0) {
        if (err)
            snprintf(err->msg, sizeof(err->msg), "cannot open '%s'", path);
        return -ENOENT;
    }
    eng_model *m = calloc(1, sizeof(*m));
    if (!m)
        return -ENOMEM;
    if (params) {
        m->progress = params->progress;
        m->progress_data = params->progress_data;
    }
    eng_error e2;
    int rc = eng_model_swap(m, params ? params->plan : NULL, NULL, err ? err : &e2);
    if (rc < 0) {
        free(m);
        return rc;
    }
    *ret_model = m;
    return 0;
}

/* ---- SelectInfer stand-ins ---- */

static const char *const fake_modes[] = {"dense", "load-only", "random-load", "coreinfer", "selectinfer"};

const char *eng_select_mode_name(eng_select_mode mode)
{
    return (unsigned)mode < 5 ? fake_modes[mode] : "unknown";
}

int eng_select_mode_parse(const char *name, eng_select_mode *ret_mode)
{
    for (int i = 0; i < 5; i++)
        if (strcmp(name, fake_modes[i]) == 0) {
            *ret_mode = (eng_select_mode)i;
            return 0;
        }
    return -EINVAL;
}

eng_load_plan_params eng_load_plan_params_default(void)
{
    return (eng_load_plan_params){.mode = ENG_SELECT_DENSE, .gamma = 1.0f};
}

eng_compute_params eng_compute_params_default(void)
{
    return (eng_compute_params){.phi = 0.0f, .alpha = 0.2f, .rank = ENG_RANK_ABS};
}

int eng_profile_load(const char *path, const eng_model *model, eng_profile **ret_profile, eng_error *err)
{
    FILE *f = fopen(path, "r");
    if (!f) {
        if (err)
            snprintf(err->msg, sizeof(err->msg), "cannot open '%s'", path);
        return -ENOENT;
    }
    eng_profile *p = calloc(1, sizeof(*p));
    char line[128];
    bool ok = p && fgets(line, sizeof(line), f) && strcmp(line, "fake-profile\n") == 0;
    while (ok && p->n < 8 && fgets(line, sizeof(line), f)) {
        line[strcspn(line, "\n")] = '\0';
        if (line[0])
            snprintf(p->tasks[p->n++], sizeof(p->tasks[0]), "%.63s", line);
    }
    fclose(f);
    if (!ok || p->n == 0) {
        free(p);
        if (err)
            snprintf(err->msg, sizeof(err->msg), "'%s' is not a fake profile (bad magic)", path);
        return -EINVAL;
    }
    *ret_profile = p;
    return 0;
}

void eng_profile_free(eng_profile *profile)
{
    free(profile);
}

int eng_profile_n_tasks(const eng_profile *profile)
{
    return profile->n;
}

const char *eng_profile_task(const eng_profile *profile, int i, uint64_t *ret_n_prompts, uint64_t *ret_n_tokens)
{
    if (i < 0 || i >= profile->n)
        return NULL;
    if (ret_n_prompts)
        *ret_n_prompts = 3;
    if (ret_n_tokens)
        *ret_n_tokens = 30;
    return profile->tasks[i];
}

int eng_model_swap(eng_model *model, const eng_load_plan_params *plan, eng_swap_stats *ret_stats,
                   eng_error *err)
{
    eng_load_plan_params pp = plan ? *plan : eng_load_plan_params_default();
    bool uses = pp.mode == ENG_SELECT_LOAD_ONLY || pp.mode == ENG_SELECT_SELECTINFER;
    const char *task = pp.task && pp.task[0] ? pp.task : "*";
    if (uses) {
        bool found = pp.profile && strcmp(task, "*") == 0;
        for (int i = 0; pp.profile && i < pp.profile->n; i++)
            found |= strcmp(pp.profile->tasks[i], task) == 0;
        if (!found) {
            snprintf(err->msg, sizeof(err->msg), "the profile has no task '%s'", task);
            return -ENOENT;
        }
    }
    if (pp.mode == ENG_SELECT_DENSE || pp.mode == ENG_SELECT_COREINFER)
        pp.gamma = 1.0f, pp.delta = pp.mode == ENG_SELECT_DENSE ? 0.0f : pp.delta;
    if (pp.mode == ENG_SELECT_COREINFER)
        pp.delta = 0.0f;
    if (!(pp.gamma > 0 && pp.gamma <= 1) || !(pp.delta >= 0 && pp.delta <= pp.gamma)) {
        snprintf(err->msg, sizeof(err->msg), "need 0 < gamma <= 1 and 0 <= delta <= gamma");
        return -EINVAL;
    }
    progress_sleep(model->progress, model->progress_data, env_long("SI_FAKE_SWAP_MS", 0));
    eng_plan_info *pi = &model->plan;
    bool changed = strcmp(pi->task, uses ? task : "") != 0 || pi->mode != pp.mode;
    pi->mode = pp.mode;
    snprintf(pi->task, sizeof(pi->task), "%s", uses ? task : "");
    pi->gamma = pp.gamma;
    pi->delta = pp.delta;
    pi->dense_first = pp.dense_first;
    pi->dense_last = pp.dense_last;
    pi->neurons_total = 2 * 1000;
    pi->neurons_loaded = (uint64_t)(pp.gamma * 2000.0f + 0.5f);
    if (ret_stats) {
        memset(ret_stats, 0, sizeof(*ret_stats));
        ret_stats->neurons_in = ret_stats->neurons_out = changed ? 100 : 0;
    }
    return 0;
}

void eng_model_get_plan(const eng_model *model, eng_plan_info *ret_info)
{
    *ret_info = model->plan;
}

int eng_session_set_compute(eng_session *session, const eng_compute_params *params)
{
    eng_compute_params p = params ? *params : eng_compute_params_default();
    if (!(p.phi >= 0.0f && p.phi <= 1.0f) || !(p.alpha > 0.0f && p.alpha <= 1.0f) ||
        (p.phi > 0.0f && p.phi < session->model->plan.delta - 1e-6f))
        return -EINVAL;
    session->compute = p;
    return 0;
}

double eng_session_ffn_share(const eng_session *session)
{
    return session->share;
}

void eng_session_reset(eng_session *session)
{
    session->n_held = 0; /* what the daemon calls after a swap */
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
    ret_info->n_embd = 8;
    ret_info->n_vocab = 256;
    ret_info->n_ctx_train = 512;
    ret_info->n_threads = 1;
}

const char *eng_backend_name(const eng_model *model)
{
    return "fake";
}

/* Decode steps "launched as graphs": one per generated token, so that the
 * daemon's status can be checked to pass the backend's counters on. */
static long fake_graph_steps;

int eng_model_backend_info(const eng_model *model, eng_backend_info *ret)
{
    memset(ret, 0, sizeof(*ret));
    snprintf(ret->name, sizeof(ret->name), "fake");
    ret->graphs.enabled = true;
    ret->graphs.steps = fake_graph_steps;
    ret->graphs.replayed = fake_graph_steps / 2;
    return 0;
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

/* tokens are bytes (eng_tokenize above) */
int eng_token_to_piece(const eng_model *model, int32_t token, bool special, char *buf, size_t cap)
{
    (void)model;
    (void)special;
    if (token < 0 || token > 255)
        return -EINVAL;
    if (cap >= 1)
        buf[0] = (char)token;
    return 1;
}

eng_chat_template eng_model_chat_template(const eng_model *model)
{
    return ENG_CHAT_CHATML;
}

/* the engine's own names and recognition (engine/chat.c, linked in) */
int eng_model_set_chat_template(eng_model *model, const char *name)
{
    eng_chat_info info;
    eng_chat_named(name, &info);
    if (info.kind == ENG_CHAT_NONE)
        return -ENOTSUP;
    snprintf(model->tmpl, sizeof(model->tmpl), "%s", name);
    return 0;
}

int eng_model_set_chat_template_text(eng_model *model, const char *jinja, size_t len)
{
    eng_chat_info info;
    eng_chat_detect(jinja, len, &info);
    if (info.kind == ENG_CHAT_NONE)
        return -ENOTSUP;
    snprintf(model->tmpl, sizeof(model->tmpl), "kind %d", (int)info.kind);
    return 0;
}

static void put_str(char *buf, size_t cap, size_t *n, const char *s)
{
    size_t l = strlen(s);
    if (*n + l < cap)
        memcpy(buf + *n, s, l);
    *n += l;
}

int eng_chat_apply(const eng_model *model, const eng_chat_msg *msgs, size_t n_msgs,
                   unsigned flags, char *buf, size_t cap)
{
    return eng_chat_apply_tools(model, msgs, n_msgs, NULL, flags, buf, cap);
}

bool eng_model_chat_can_call_tools(const eng_model *model)
{
    return true;
}

/* "role: content\n" per message; tools first as "tools: TOOLS\n" (not
 * "[]"; not starting with '[': -EINVAL), a call as " call:NAME(ARGS)" */
int eng_chat_apply_tools(const eng_model *model, const eng_chat_msg *msgs, size_t n_msgs,
                         const char *tools, unsigned flags, char *buf, size_t cap)
{
    const bool add_assistant = flags & ENG_CHAT_ADD_ASSISTANT;
    size_t n = 0;
    if (model->tmpl[0]) {
        put_str(buf, cap, &n, "template: ");
        put_str(buf, cap, &n, model->tmpl);
        put_str(buf, cap, &n, "\n");
    }
    if (tools && tools[0] && strcmp(tools, "[]") != 0) {
        if (tools[0] != '[')
            return -EINVAL;
        put_str(buf, cap, &n, "tools: ");
        put_str(buf, cap, &n, tools);
        put_str(buf, cap, &n, "\n");
    }
    for (size_t i = 0; i <= n_msgs; i++) {
        if (i < n_msgs) {
            put_str(buf, cap, &n, msgs[i].role);
            put_str(buf, cap, &n, ": ");
            put_str(buf, cap, &n, msgs[i].content);
            for (size_t j = 0; j < msgs[i].n_tool_calls; j++) {
                put_str(buf, cap, &n, " call:");
                put_str(buf, cap, &n, msgs[i].tool_calls[j].name);
                put_str(buf, cap, &n, "(");
                put_str(buf, cap, &n, msgs[i].tool_calls[j].arguments ? msgs[i].tool_calls[j].arguments : "{}");
                put_str(buf, cap, &n, ")");
            }
        } else if (add_assistant) {
            /* the thinking switch, as a Qwen3 template has it */
            put_str(buf, cap, &n, "assistant:");
            put_str(buf, cap, &n, flags & ENG_CHAT_NO_THINK ? " <think></think>" : "");
        } else {
            break;
        }
        put_str(buf, cap, &n, "\n");
    }
    if (cap)
        buf[n < cap ? n : cap - 1] = '\0';
    return (int)n;
}

/* the engine's own split (engine/chat.c, linked in), as for Qwen3 */
int eng_chat_reasoning(const eng_model *model, const char *text, size_t len, size_t *ret_think_off,
                       size_t *ret_think_len, size_t *ret_content_off)
{
    const eng_chat_info info = {.kind = ENG_CHAT_CHATML, .reasoning = true};
    return eng_chat_split_reasoning(&info, text, len, ret_think_off, ret_think_len, ret_content_off);
}

/* the engine's own reader (engine/chat.c, linked in), as for Qwen */
int eng_chat_tool_calls(const eng_model *model, const char *text, size_t len,
                        eng_tool_call **ret_calls, size_t *ret_n, size_t *ret_content_len)
{
    const eng_chat_info info = {.kind = ENG_CHAT_CHATML, .tools = true};
    return eng_chat_parse_calls(&info, text, len, ret_calls, ret_n, ret_content_len);
}

int eng_format_parse(const char *name, eng_format *ret_format)
{
    if (!strcmp(name, "text") || !strcmp(name, "json")) {
        *ret_format = name[0] == 'j' ? ENG_FORMAT_JSON : ENG_FORMAT_TEXT;
        return 0;
    }
    return -EINVAL;
}

eng_session_params eng_session_params_default(void)
{
    eng_session_params p = {0, 0, ENG_KV_F16, false};
    return p;
}

int eng_session_new(const eng_model *model, const eng_session_params *params, eng_session **ret_session)
{
    eng_session *s = calloc(1, sizeof(*s));
    if (!s)
        return -ENOMEM;
    s->n_ctx = params->n_ctx > 0 ? params->n_ctx : 512;
    s->kv_type = params->kv_type;
    s->model = model;
    s->compute = eng_compute_params_default();
    *ret_session = s;
    return 0;
}

void eng_session_free(eng_session *session)
{
    if (session)
        free(session->held);
    free(session);
}

/* the engine's rule: the common prefix, at most n - 2 */
int eng_session_prefix_len(const eng_session *s, const int32_t *tokens, size_t n)
{
    size_t p = 0;
    while (p < s->n_held && p < n && s->held[p] == tokens[p])
        p++;
    return n < 2 ? 0 : (int)(p < n - 2 ? p : n - 2);
}

int eng_session_n_cached(const eng_session *s)
{
    return (int)s->n_held;
}

size_t eng_session_copy_bytes(const eng_session *s)
{
    return s->copy;
}

int eng_session_n_ctx(const eng_session *session)
{
    return session->n_ctx;
}

/* 1 KiB a position in f16, 17/32 of it in q8_0 (the real ratio) */
size_t eng_session_kv_bytes(const eng_session *session)
{
    return (size_t)session->n_ctx * (session->kv_type == ENG_KV_Q8_0 ? 544 : 1024);
}

const char *eng_kv_type_name(eng_kv_type type)
{
    return type == ENG_KV_Q8_0 ? "q8_0" : "f16";
}

/* (its weights are f16: eng_model_info's zeros) */
const char *eng_dtype_name(eng_dtype dt)
{
    return dt == ENG_DTYPE_F16 ? "f16" : "?";
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

void eng_session_set_abort(eng_session *session, eng_abort_cb cb, void *userdata)
{
    session->abort_cb = cb;
    session->abort_data = userdata;
}

/* whether the byte tokens at t spell s */
static bool memcmp_tokens(const int32_t *t, const char *s)
{
    for (size_t i = 0; s[i]; i++)
        if (t[i] != (unsigned char)s[i])
            return true;
    return false;
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
    if (params->cache_prompt)
        st.n_cached = eng_session_prefix_len(session, prompt, n_prompt);
    int32_t *held = malloc((n_prompt + 1) * sizeof(*held));
    if (!held)
        return -ENOMEM;
    memcpy(held, prompt, n_prompt * sizeof(*held));
    free(session->held);
    session->held = held;
    session->n_held = n_prompt;
    const eng_plan_info *pi = &session->model->plan;
    float phi = session->compute.phi;
    session->share = phi > 0.0f && phi < pi->gamma ? phi : pi->gamma;
    if (session->share < pi->gamma && session->compute.copy_dynamic && 1024 * n_prompt > session->copy)
        session->copy = 1024 * n_prompt;
    uint64_t t0 = eng_time_ns();
    /* "LONG" in the prompt: a prompt that takes a minute to evaluate, in
     * chunks that poll the abort callback as eng_session_eval does */
    bool long_prompt = false;
    for (size_t i = 0; i + 3 < n_prompt; i++)
        if (prompt[i] == 'L' && prompt[i + 1] == 'O' && prompt[i + 2] == 'N' && prompt[i + 3] == 'G')
            long_prompt = true;
    /* "HANG": SI_FAKE_HANG_MS (default 2000) in one call that reports
     * nothing, as a hung GPU call would */
    for (size_t i = 0; i + 3 < n_prompt; i++)
        if (prompt[i] == 'H' && prompt[i + 1] == 'A' && prompt[i + 2] == 'N' && prompt[i + 3] == 'G') {
            sleep_us(env_long("SI_FAKE_HANG_MS", 2000) * 1000);
            break;
        }
    for (long waited = 0; long_prompt && waited < 60000000; waited += 5000) {
        if (session->abort_cb && session->abort_cb(session->abort_data)) {
            st.stop_reason = ENG_STOP_CANCELLED;
            st.prefill_ns = eng_time_ns() - t0;
            *ret_stats = st;
            return 0;
        }
        sleep_us(5000);
    }
    sleep_us(delay);
    st.prefill_ns = eng_time_ns() - t0;
    t0 = eng_time_ns();
    int max = params->max_tokens > 0 ? params->max_tokens : session->n_ctx - (int)n_prompt;
    /* an answer that would overrun the context with context_shift on: one
     * shift, and a first word that tells what it would keep */
    if (params->context_shift && (long)n_prompt + max > session->n_ctx) {
        char kw[32];
        int kn = snprintf(kw, sizeof(kw), "keep%d ", params->n_keep);
        st.n_shifts = 1;
        if (on_text(userdata, kw, (size_t)kn)) {
            st.stop_reason = ENG_STOP_CANCELLED;
            *ret_stats = st;
            return 0;
        }
    }
    bool call = false, think = false;
    for (size_t i = 0; i + 7 < n_prompt; i++)
        if (!memcmp_tokens(prompt + i, "CALLTOOL"))
            call = true;
    for (size_t i = 0; i + 4 < n_prompt; i++)
        if (!memcmp_tokens(prompt + i, "THINK"))
            think = true;
    const char *canned = call ? FAKE_CALL : FAKE_THINK;
    call = call || think;
    const size_t call_len = strlen(canned);
    for (int i = 0; i < max; i++) {
        if ((eos && i == 3) || (call && (size_t)i * 8 >= call_len)) {
            st.stop_reason = ENG_STOP_EOS;
            break;
        }
        sleep_us(delay);
        char word[32];
        int n = call ? snprintf(word, sizeof(word), "%.8s", canned + (size_t)i * 8)
              : pi->task[0] ? snprintf(word, sizeof(word), "%.16s:w%d ", pi->task, i)
                            : snprintf(word, sizeof(word), "w%d ", i);
        st.n_generated++;
        fake_graph_steps++; /* as a GPU backend counts its decode graphs */
        if (on_text(userdata, word, (size_t)n)) {
            st.stop_reason = ENG_STOP_CANCELLED;
            break;
        }
    }
    st.decode_ns = eng_time_ns() - t0;
    *ret_stats = st;
    return 0;
}

int eng_pooling_parse(const char *name, eng_pooling *ret)
{
    if (name && !strcmp(name, "mean"))
        *ret = ENG_POOL_MEAN;
    else if (name && !strcmp(name, "last"))
        *ret = ENG_POOL_LAST;
    else
        return -EINVAL;
    return 0;
}

int eng_embed(eng_session *s, const int32_t *tokens, size_t n, eng_pooling pool, bool normalize, float *out)
{
    if (n == 0 || n > (size_t)s->n_ctx)
        return n ? -ENOSPC : -EINVAL;
    free(s->held);
    s->held = NULL;
    s->n_held = 0;
    float v[8] = {0};
    for (size_t i = 0; i < n; i++) {
        if (i % 64 == 0) {
            if (i > 0 && s->abort_cb && s->abort_cb(s->abort_data))
                return -ECANCELED;
            sleep_us(env_long("SI_FAKE_TOKEN_US", 2000));
        }
        if (pool == ENG_POOL_MEAN || i + 1 == n)
            v[i % 8] += (float)tokens[i];
    }
    float norm = 0.0f;
    for (int j = 0; j < 8; j++)
        norm += v[j] * v[j];
    for (int j = 0; j < 8; j++)
        out[j] = normalize && norm > 0.0f ? v[j] / __builtin_sqrtf(norm) : v[j];
    return 0;
}

/* any text in braces passes: the real check is the engine's (test-jschema) */
int eng_json_schema_check(const char *schema, char *msg, size_t cap)
{
    const size_t n = schema ? strlen(schema) : 0;
    if (n >= 2 && schema[0] == '{' && schema[n - 1] == '}')
        return 0;
    if (cap)
        snprintf(msg, cap, "not a schema");
    return -EINVAL;
}

int32_t eng_token_bos(const eng_model *model)
{
    (void)model;
    return -1; /* byte tokens: no BOS */
}
