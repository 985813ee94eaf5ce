/* The inference thread: loads the model once (with the loading plan of the
 * configured profile), then serves profile swaps and the fair queue one
 * request at a time, streaming text back to the loop through the outbox.
 * It never touches connections or the configuration the loop may reload:
 * it reads its own copy (srv->wcfg) of the configuration at start. */
#include "daemon.h"
#include "log.h"

#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

void sid_event_free(sid_event *ev)
{
    if (!ev)
        return;
    free(ev->data);
    free(ev->lps.v);
    free(ev);
}

int sid_lps_push(sid_lps *a, const sid_lp *e)
{
    if (a->n == a->cap) {
        size_t cap = a->cap ? a->cap * 2 : 16;
        sid_lp *nv = realloc(a->v, cap * sizeof(*nv));
        if (!nv)
            return -ENOMEM;
        a->v = nv;
        a->cap = cap;
    }
    a->v[a->n++] = *e;
    return 0;
}

/* Appends an event and wakes the loop. Chunks of one request that the loop
 * has not taken yet are merged, so a slow loop sees fewer, larger frames.
 * A chunk may carry a token's log-probability (lp) instead of text. */
static int post(sid_server *srv, enum sid_event_type type, sid_req *req,
                const char *data, size_t len, const sid_lp *lp)
{
    pthread_mutex_lock(&srv->mu);
    sid_event *tail = srv->out_tail;
    if (type == SID_EV_CHUNK && tail && tail->type == SID_EV_CHUNK && tail->req == req) {
        if (lp) {
            int rc = sid_lps_push(&tail->lps, lp);
            pthread_mutex_unlock(&srv->mu);
            return rc;
        }
        if (tail->len + len > tail->cap) {
            /* (a chunk begun by a log-probability has no text buffer yet) */
            size_t cap = tail->cap ? tail->cap * 2 : 256;
            while (cap < tail->len + len)
                cap *= 2;
            char *nd = realloc(tail->data, cap);
            if (!nd) {
                pthread_mutex_unlock(&srv->mu);
                return -ENOMEM;
            }
            tail->data = nd;
            tail->cap = cap;
        }
        memcpy(tail->data + tail->len, data, len);
        tail->len += len;
        pthread_mutex_unlock(&srv->mu);
        return 0; /* an async send for this event is already pending */
    }
    pthread_mutex_unlock(&srv->mu);

    sid_event *ev;
    if (type == SID_EV_DONE && req && req->done_ev) {
        /* preallocated: the request always gets back to the loop */
        ev = req->done_ev;
        req->done_ev = NULL;
    } else if (!(ev = calloc(1, sizeof(*ev)))) {
        return -ENOMEM;
    }
    ev->type = type;
    ev->req = req;
    if (lp && sid_lps_push(&ev->lps, lp) < 0) {
        free(ev);
        return -ENOMEM;
    }
    if (len) {
        ev->cap = len < 256 ? 256 : len;
        ev->data = malloc(ev->cap);
        if (!ev->data) {
            free(ev);
            return -ENOMEM;
        }
        memcpy(ev->data, data, len);
        ev->len = len;
    }
    pthread_mutex_lock(&srv->mu);
    if (type == SID_EV_DONE)
        srv->running = NULL;
    if (srv->out_tail)
        srv->out_tail->next = ev;
    else
        srv->out_head = ev;
    srv->out_tail = ev;
    pthread_mutex_unlock(&srv->mu);
    uv_async_send(&srv->async);
    return 0;
}

static void fail(sid_req *req, int code, const char *fmt, const char *arg)
{
    req->err_code = code;
    snprintf(req->err_msg, sizeof(req->err_msg), fmt, arg);
}

/* ---- SelectInfer: the plan, swaps, per-request computation --------------- */

int sid_profile_path(const char *dir, const char *path, char *out, size_t cap)
{
    int n = path[0] != '/' && dir[0] ? snprintf(out, cap, "%s/%s", dir, path) : snprintf(out, cap, "%s", path);
    if (n < 0 || (size_t)n >= cap) {
        out[0] = '\0';
        return -ENAMETOOLONG;
    }
    return 0;
}

bool sid_mode_uses_profile(eng_select_mode mode)
{
    return mode == ENG_SELECT_LOAD_ONLY || mode == ENG_SELECT_SELECTINFER;
}

const char *sid_plan_name(const sid_plan *p)
{
    return sid_mode_uses_profile(p->mode) ? p->task : eng_select_mode_name(p->mode);
}

static bool profile_has_task(const eng_profile *prof, const char *task)
{
    if (!prof || !task)
        return false;
    if (strcmp(task, "*") == 0) /* the ranking over all tasks */
        return eng_profile_n_tasks(prof) > 0;
    for (int i = 0; i < eng_profile_n_tasks(prof); i++)
        if (strcmp(eng_profile_task(prof, i, NULL, NULL), task) == 0)
            return true;
    return false;
}

static void list_tasks(const eng_profile *prof, char *buf, size_t cap)
{
    buf[0] = '\0';
    int n = prof ? eng_profile_n_tasks(prof) : 0;
    for (int i = 0; i < n; i++) {
        size_t l = strlen(buf);
        snprintf(buf + l, cap - l, "%s%s", i ? ", " : "", eng_profile_task(prof, i, NULL, NULL));
    }
}

/* Refreshes srv->wplan from the model and the profile. path, budget, seed
 * and the request defaults are the caller's. */
static void plan_snapshot(sid_server *srv)
{
    sid_plan *p = &srv->wplan;
    eng_plan_info pi;
    eng_model_get_plan(srv->model, &pi);
    eng_model_info mi;
    eng_model_get_info(srv->model, &mi);
    p->mode = pi.mode;
    snprintf(p->task, sizeof(p->task), "%s", pi.task);
    p->gamma = pi.gamma;
    p->delta = pi.delta;
    p->dense_first = pi.dense_first;
    p->dense_last = pi.dense_last;
    p->neurons_loaded = pi.neurons_loaded;
    p->neurons_total = pi.neurons_total;
    p->weight_bytes = mi.bytes_weights;
    int n = srv->profile ? eng_profile_n_tasks(srv->profile) : 0;
    p->n_tasks = n < SID_MAX_TASKS ? n : SID_MAX_TASKS;
    for (int i = 0; i < p->n_tasks; i++) {
        uint64_t np = 0;
        const char *name = eng_profile_task(srv->profile, i, &np, NULL);
        snprintf(p->tasks[i], sizeof(p->tasks[i]), "%s", name ? name : "");
        p->task_prompts[i] = np;
    }
}

/* Whether phi can be honoured by a plan of this mode, gamma and delta
 * (per_token: nothing is static, delta is no floor). 0: yes; else msg says
 * why. */
static int check_phi(eng_select_mode mode, float gamma, float delta, float phi, bool per_token,
                     char *msg, size_t cap)
{
    const float eps = 1e-6f;
    if (phi <= 0.0f)
        return 0; /* every loaded neuron */
    if (phi > gamma + eps) {
        snprintf(msg, cap, "phi %.4g exceeds gamma %.4g: only loaded neurons can be computed",
                 (double)phi, (double)gamma);
        return -EINVAL;
    }
    if ((mode == ENG_SELECT_DENSE || mode == ENG_SELECT_LOAD_ONLY) && phi < gamma - eps) {
        snprintf(msg, cap, "mode %s computes every loaded neuron: phi must be gamma (%.4g), not %.4g",
                 eng_select_mode_name(mode), (double)gamma, (double)phi);
        return -EINVAL;
    }
    if (!per_token && phi < delta - eps) {
        snprintf(msg, cap, "phi %.4g is below delta %.4g: the static (task) neurons are always computed",
                 (double)phi, (double)delta);
        return -EINVAL;
    }
    return 0;
}

static void plan_params_of(const sid_plan *p, const eng_profile *prof, eng_load_plan_params *pp)
{
    *pp = eng_load_plan_params_default();
    pp->mode = p->mode;
    pp->profile = prof;
    pp->task = p->task[0] ? p->task : NULL;
    pp->gamma = p->gamma;
    pp->delta = p->delta;
    pp->dense_first = p->dense_first;
    pp->dense_last = p->dense_last;
    pp->layer_budget = p->layer_budget;
    pp->budget_bytes = p->budget;
    pp->seed = p->seed;
    pp->sketch = p->pick == ENG_PICK_TOKEN; /* what per-token picking reads */
}

/* Swaps the model to plan pp. On success new_prof (when not NULL) becomes
 * the profile, the sessions are reset (their contexts began on the old plan),
 * and res describes the swap; on failure nothing changed, the old plan
 * keeps serving, and an error code is returned with msg filled. */
static int do_swap(sid_server *srv, const eng_load_plan_params *pp, const char *path,
                   eng_profile *new_prof, uint64_t t0, sid_swap_result *res, char *msg, size_t cap)
{
    eng_error err;
    memset(&err, 0, sizeof(err));
    snprintf(res->from, sizeof(res->from), "%s", sid_plan_name(&srv->wplan));
    int rc = eng_model_swap(srv->model, pp, &res->st, &err);
    if (rc < 0) {
        snprintf(msg, cap, "swap to '%s' failed: %s; '%s' keeps serving",
                 pp->task ? pp->task : eng_select_mode_name(pp->mode),
                 err.msg[0] ? err.msg : strerror(-rc), res->from);
        return rc == -ENOENT ? SELECTINFER__ERROR_CODE__NOT_FOUND : SELECTINFER__ERROR_CODE__SWAP_FAILED;
    }
    for (int i = 0; i < srv->n_slots; i++)
        eng_session_reset(srv->sessions[i]);
    if (new_prof) {
        eng_profile_free(srv->profile);
        srv->profile = new_prof;
    }
    if (path)
        snprintf(srv->wplan.path, sizeof(srv->wplan.path), "%s", path);
    srv->wplan.budget = pp->budget_bytes;
    srv->wplan.seed = pp->seed;
    plan_snapshot(srv);
    /* a default phi the new plan cannot honour falls back to all loaded */
    char why[200];
    if (check_phi(srv->wplan.mode, srv->wplan.gamma, srv->wplan.delta, srv->wplan.phi,
                  srv->wplan.pick != ENG_PICK_REQUEST, why, sizeof(why)) < 0) {
        snprintf(res->note, sizeof(res->note), "default phi reset to 0 (all loaded): %s", why);
        srv->wplan.phi = 0.0f;
    }
    snprintf(res->to, sizeof(res->to), "%s", sid_plan_name(&srv->wplan));
    res->ns = uv_hrtime() - t0;
    res->plan = srv->wplan;
    return 0;
}

/* A use_profile request: re-reads the profile file, plans the named task
 * (or mode) and swaps. */
static void run_swap(sid_server *srv, sid_req *req)
{
    const Selectinfer__UseProfile *u = req->msg->use_profile;
    uint64_t t0 = uv_hrtime();
    const sid_plan *cur = &srv->wplan;
    const char *name = u->name;
    char path[SID_PATH_MAX];
    snprintf(path, sizeof(path), "%s", req->swap_path[0] ? req->swap_path : cur->path);

    eng_select_mode mode = cur->mode;
    bool mode_given = u->mode && u->mode[0];
    if (mode_given && eng_select_mode_parse(u->mode, &mode) < 0) {
        fail(req, SELECTINFER__ERROR_CODE__INVALID_ARGUMENT, "unknown mode '%.64s'", u->mode);
        return;
    }
    /* Read the profile again: the file may have changed since start-up, and
     * a corrupt one must fail here, before the model is touched. */
    eng_profile *np = NULL;
    eng_error err;
    memset(&err, 0, sizeof(err));
    if (path[0]) {
        int rc = eng_profile_load(path, srv->model, &np, &err);
        if (rc < 0) {
            req->err_code = rc == -ENOENT ? SELECTINFER__ERROR_CODE__NOT_FOUND : SELECTINFER__ERROR_CODE__SWAP_FAILED;
            snprintf(req->err_msg, sizeof(req->err_msg), "cannot load profile '%.300s': %.200s; '%s' keeps serving",
                     path, err.msg[0] ? err.msg : strerror(-rc), sid_plan_name(cur));
            req->swap_failed = true;
            return;
        }
    }
    bool has_task = profile_has_task(np, name);
    if (!mode_given) {
        if (!has_task && strcmp(name, "dense") == 0)
            mode = ENG_SELECT_DENSE;
        else if (!sid_mode_uses_profile(mode))
            mode = ENG_SELECT_SELECTINFER; /* a task: rank by it */
    }
    eng_load_plan_params pp;
    plan_params_of(cur, np, &pp);
    pp.mode = mode;
    pp.task = NULL;
    if (sid_mode_uses_profile(mode)) {
        if (!np) {
            fail(req, SELECTINFER__ERROR_CODE__NOT_SUPPORTED,
                 "the daemon runs without a task profile (set profile = PATH, or pass a path); "
                 "task '%.64s' cannot be planned", name);
            return;
        }
        if (!has_task) {
            char have[512];
            list_tasks(np, have, sizeof(have));
            req->err_code = SELECTINFER__ERROR_CODE__NOT_FOUND;
            snprintf(req->err_msg, sizeof(req->err_msg), "profile '%.300s' has no task '%.64s' (it has: %.200s)",
                     path, name, have);
            eng_profile_free(np);
            return;
        }
        pp.task = name;
    }
    if ((cur->mode == ENG_SELECT_DENSE || cur->mode == ENG_SELECT_COREINFER) && mode != cur->mode) {
        /* from a plan that loads everything (gamma 1, delta 0 there): the
         * configured shares, unless the request gives its own */
        pp.gamma = srv->wcfg.gamma;
        pp.delta = srv->wcfg.delta;
        pp.budget_bytes = srv->wcfg.budget;
    }
    if (u->has_gamma) {
        pp.gamma = u->gamma;
        pp.budget_bytes = 0; /* an explicit gamma replaces the budget */
    }
    if (u->has_delta)
        pp.delta = u->delta;
    if (u->has_dense_first)
        pp.dense_first = (int)u->dense_first;
    if (u->has_dense_last)
        pp.dense_last = (int)u->dense_last;
    if (u->has_budget_bytes)
        pp.budget_bytes = u->budget_bytes;
    /* a new default phi must fit the new plan; with a budget gamma is known
     * only after planning, so it is checked once more below */
    float phi = u->has_phi ? u->phi : cur->phi;
    if (u->has_phi) {
        bool all = mode == ENG_SELECT_DENSE || mode == ENG_SELECT_COREINFER;
        float g = all ? 1.0f : pp.gamma, d = mode == ENG_SELECT_DENSE || mode == ENG_SELECT_COREINFER ? 0.0f : pp.delta;
        if (pp.budget_bytes == 0 &&
            check_phi(mode, g, d, phi, cur->pick != ENG_PICK_REQUEST, req->err_msg,
                      sizeof(req->err_msg)) < 0) {
            req->err_code = SELECTINFER__ERROR_CODE__INVALID_ARGUMENT;
            eng_profile_free(np);
            return;
        }
    }
    sid_swap_result *res = calloc(1, sizeof(*res));
    if (!res) {
        fail(req, SELECTINFER__ERROR_CODE__INTERNAL, "%s", "out of memory");
        eng_profile_free(np);
        return;
    }
    float old_phi = srv->wplan.phi;
    srv->wplan.phi = phi;
    int code = do_swap(srv, &pp, path, np, t0, res, req->err_msg, sizeof(req->err_msg));
    if (code) {
        srv->wplan.phi = old_phi;
        req->err_code = code;
        req->swap_failed = true;
        eng_profile_free(np);
        free(res);
        return;
    }
    req->swap = res;
}

/* A generate naming a task other than the active one: swap to it, or
 * refuse (task_switch). Returns false with req failed. */
static bool prepare_task(sid_server *srv, sid_req *req)
{
    const char *want = req->gen->task;
    const sid_plan *cur = &srv->wplan;
    /* modes without a task ranking serve every task alike */
    if (!want || !want[0] || !sid_mode_uses_profile(cur->mode) || strcmp(want, cur->task) == 0)
        return true;
    if (!profile_has_task(srv->profile, want)) {
        char have[512];
        list_tasks(srv->profile, have, sizeof(have));
        req->err_code = SELECTINFER__ERROR_CODE__NOT_FOUND;
        snprintf(req->err_msg, sizeof(req->err_msg), "the profile has no task '%.64s' (it has: %.400s)",
                 want, have);
        return false;
    }
    if (req->task_switch == SID_TASK_SWITCH_REFUSE) {
        req->err_code = SELECTINFER__ERROR_CODE__TASK_MISMATCH;
        snprintf(req->err_msg, sizeof(req->err_msg),
                 "task '%.64s' is not active ('%.64s' is) and task_switch = refuse; "
                 "an admin can switch with use_profile", want, cur->task);
        return false;
    }
    uint64_t t0 = uv_hrtime();
    sid_swap_result *res = calloc(1, sizeof(*res));
    if (!res) {
        fail(req, SELECTINFER__ERROR_CODE__INTERNAL, "%s", "out of memory");
        return false;
    }
    eng_load_plan_params pp;
    plan_params_of(cur, srv->profile, &pp);
    pp.task = want;
    int code = do_swap(srv, &pp, NULL, NULL, t0, res, req->err_msg, sizeof(req->err_msg));
    if (code) {
        req->err_code = code;
        req->swap_failed = true;
        free(res);
        return false;
    }
    req->swap = res;
    return true;
}

/* The request's phi, alpha and rank onto every context slot's session
 * (eng_generate resets the one that serves, which starts the new
 * selection; the others need them to say what they would keep of the
 * prompt). Returns false with req failed. */
static bool set_compute(sid_server *srv, sid_req *req)
{
    const Selectinfer__Generate *g = req->gen;
    const sid_plan *p = &srv->wplan;
    eng_compute_params cp = eng_compute_params_default();
    cp.phi = g->has_phi ? g->phi : p->phi;
    cp.alpha = g->has_alpha ? g->alpha : p->alpha;
    cp.rank = p->rank;
    cp.pick = p->pick;
    cp.cand = p->pick == ENG_PICK_EXACT ? p->candidates : 0.0f;
    cp.comp = p->comp;
    cp.copy_dynamic = p->copy_dynamic;
    if (check_phi(p->mode, p->gamma, p->delta, cp.phi, p->pick != ENG_PICK_REQUEST, req->err_msg,
                  sizeof(req->err_msg)) < 0) {
        req->err_code = SELECTINFER__ERROR_CODE__INVALID_ARGUMENT;
        return false;
    }
    int rc = 0;
    for (int i = 0; i < srv->n_slots && rc == 0; i++)
        rc = eng_session_set_compute(srv->sessions[i], &cp);
    if (rc < 0) {
        req->err_code = SELECTINFER__ERROR_CODE__INVALID_ARGUMENT;
        const bool exact = cp.pick == ENG_PICK_EXACT;
        snprintf(req->err_msg, sizeof(req->err_msg), "phi %.4g / alpha %.4g cannot be used with the active plan: %s%s",
                 (double)cp.phi, (double)cp.alpha, strerror(-rc),
                 rc == -ENOTSUP && exact ? " (pick = exact runs on the CPU backend only)"
                 : rc == -ENOTSUP        ? " (comp = mean and linear run on the CPU backend only)"
                 : !exact                ? ""
                 : cp.cand > 0.0f        ? " (pick = exact: phi too low to read the candidates' gate and up rows, or candidates below delta)"
                                         : " (pick = exact: phi too low to read every loaded gate and up row)");
        return false;
    }
    req->phi = cp.phi;
    return true;
}

typedef struct gen_ctx {
    sid_server *srv;
    sid_req *req;
    bool oom;
} gen_ctx;

/* A sign of life for the watchdog (server.c's on_watchdog). */
static void beat(sid_server *srv)
{
    atomic_store(&srv->beat_ns, eng_time_ns());
}

/* A layer loaded or swapped: a sign of life too. */
static void on_progress(void *ud, int done, int total)
{
    (void)done;
    (void)total;
    beat(ud);
}

/* Called by eng_generate with each piece of text; its return value is how a
 * cancel (explicit, client gone, shutdown) reaches the engine. */
static int on_text(void *ud, const char *text, size_t len)
{
    gen_ctx *g = ud;
    sid_req *req = g->req;
    beat(g->srv);
    if (len > 0) {
        if (req->stream && post(g->srv, SID_EV_CHUNK, req, text, len, NULL) < 0)
            g->oom = true;
        if (!req->stream || req->tools || req->reasoning) { /* the whole text: done.text, calls, thinking */
            if (req->text_len + len > req->text_cap) {
                size_t cap = req->text_cap ? req->text_cap * 2 : 1024;
                while (cap < req->text_len + len)
                    cap *= 2;
                char *nt = realloc(req->text, cap);
                if (!nt) {
                    g->oom = true;
                    return 1;
                }
                req->text = nt;
                req->text_cap = cap;
            }
            memcpy(req->text + req->text_len, text, len);
            req->text_len += len;
        }
    }
    return g->oom || atomic_load(&req->cancelled) || atomic_load(&g->srv->stop_worker);
}

/* Each generated token's log-probability (Generate.logprobs): to the loop
 * in a chunk when streaming, else kept for done. */
static int on_prob(void *ud, int32_t tok, float logprob, const eng_token_prob *top, int n_top)
{
    gen_ctx *g = ud;
    sid_req *req = g->req;
    sid_lp e = {.id = tok, .logprob = logprob, .n_top = n_top};
    memcpy(e.top, top, (size_t)n_top * sizeof(*top));
    const int rc = req->stream ? post(g->srv, SID_EV_CHUNK, req, NULL, 0, &e) : sid_lps_push(&req->lps, &e);
    if (rc < 0)
        g->oom = true;
    return g->oom || atomic_load(&req->cancelled) || atomic_load(&g->srv->stop_worker);
}

/* Polled between chunks of a long prompt: a client that left, or a cancel,
 * does not have to wait for its whole prompt to be evaluated. */
static int on_prefill(void *ud)
{
    gen_ctx *g = ud;
    beat(g->srv);
    return atomic_load(&g->req->cancelled) || atomic_load(&g->srv->stop_worker);
}

/* *code = c and the message: render_input's failures. Returns NULL. */
static char *input_fail(int *code, char *msg, size_t cap, int c, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, cap, fmt, ap);
    va_end(ap);
    *code = c;
    return NULL;
}

/* Renders an input as text: the raw prompt, or the chat turns through the
 * model's template. Returns a malloc'd string, or NULL with *code and msg
 * set. */
static char *render_input(const eng_model *m, const char *prompt, const Selectinfer__ChatMessages *c,
                          const char *tools, bool no_think, size_t *ret_len, int *code, char *msg, size_t cap)
{
    if (!c) {
        char *p = strdup(prompt ? prompt : "");
        if (!p)
            return input_fail(code, msg, cap, SELECTINFER__ERROR_CODE__INTERNAL, "out of memory");
        *ret_len = strlen(p);
        return p;
    }
    size_t n_calls = 0;
    for (size_t i = 0; i < c->n_messages; i++)
        n_calls += c->messages[i]->n_tool_calls;
    eng_chat_msg *msgs = calloc(c->n_messages ? c->n_messages : 1, sizeof(*msgs));
    eng_tool_call *calls = calloc(n_calls ? n_calls : 1, sizeof(*calls));
    if (!msgs || !calls) {
        free(msgs);
        free(calls);
        return input_fail(code, msg, cap, SELECTINFER__ERROR_CODE__INTERNAL, "out of memory");
    }
    size_t total = 256 + (tools ? 2 * strlen(tools) : 0), k = 0;
    for (size_t i = 0; i < c->n_messages; i++) {
        const Selectinfer__ChatMessage *cm = c->messages[i];
        msgs[i].role = cm->role;
        msgs[i].content = cm->content;
        msgs[i].tool_calls = calls + k;
        msgs[i].n_tool_calls = cm->n_tool_calls;
        for (size_t j = 0; j < cm->n_tool_calls; j++, k++) {
            calls[k].name = cm->tool_calls[j]->name;
            calls[k].arguments = cm->tool_calls[j]->arguments;
            total += strlen(calls[k].name) + (calls[k].arguments ? 2 * strlen(calls[k].arguments) : 0) + 64;
        }
        total += strlen(msgs[i].content) + 64;
    }
    char *buf = NULL;
    for (int attempt = 0; attempt < 2; attempt++) {
        char *nb = realloc(buf, total + 1);
        if (!nb) {
            input_fail(code, msg, cap, SELECTINFER__ERROR_CODE__INTERNAL, "out of memory");
            break;
        }
        buf = nb;
        int n = eng_chat_apply_tools(m, msgs, c->n_messages, tools,
                                     ENG_CHAT_ADD_ASSISTANT | (no_think ? ENG_CHAT_NO_THINK : 0), buf, total + 1);
        if (n == -ENOTSUP && eng_model_chat_template(m) != ENG_CHAT_NONE) {
            input_fail(code, msg, cap, SELECTINFER__ERROR_CODE__NOT_SUPPORTED,
                       "the model's chat template has no tool calling (Qwen2.5, Qwen3, Qwen3.5, "
                       "Llama 3.1+, Granite 4, EXAONE 4, LFM2, Gemma 4, Nemotron Nano v2 and 3 "
                       "and gpt-oss have it)");
            break;
        }
        if (n == -ENOTSUP) {
            input_fail(code, msg, cap, SELECTINFER__ERROR_CODE__NOT_SUPPORTED,
                       "the model has no known chat template; send a raw prompt");
            break;
        }
        if (n == -EINVAL && (n_calls > 0 || (tools && tools[0]))) {
            input_fail(code, msg, cap, SELECTINFER__ERROR_CODE__INVALID_ARGUMENT,
                       "tools must be a JSON array, and each tool call's arguments a JSON object "
                       "(Llama 3's template: one call per message, and a message besides the system one)");
            break;
        }
        if (n < 0) {
            input_fail(code, msg, cap, SELECTINFER__ERROR_CODE__INVALID_ARGUMENT, "chat template failed: %s", strerror(-n));
            break;
        }
        if ((size_t)n <= total) {
            free(msgs);
            free(calls);
            *ret_len = (size_t)n;
            return buf;
        }
        total = (size_t)n;
    }
    free(msgs);
    free(calls);
    free(buf);
    if (!*code) /* two sizes and it still did not fit: never expected */
        input_fail(code, msg, cap, SELECTINFER__ERROR_CODE__INTERNAL, "chat template: the size changed");
    return NULL;
}

int sid_input_tokens(const eng_model *m, const char *prompt, const Selectinfer__ChatMessages *chat, const char *tools,
                     bool parse_special, bool no_think, int32_t **ret, size_t *ret_n, char *msg, size_t cap)
{
    int code = 0;
    size_t len = 0;
    *ret = NULL;
    *ret_n = 0;
    char *text = render_input(m, prompt, chat, tools, no_think, &len, &code, msg, cap);
    if (!text)
        return code;
    unsigned flags = ENG_TOK_ADD_SPECIAL;
    if (chat || parse_special)
        flags |= ENG_TOK_PARSE_SPECIAL;
    /* a token holds at least one byte: len + a few specials is enough */
    size_t tcap = len + 8, n = 0;
    int32_t *toks = malloc(tcap * sizeof(*toks));
    int rc = toks ? eng_tokenize(m, text, len, flags, toks, tcap, &n) : -ENOMEM;
    if (rc == -ENOBUFS && n > tcap && n < ((size_t)1 << 28)) {
        int32_t *nt = realloc(toks, n * sizeof(*toks));
        if (nt) {
            toks = nt;
            tcap = n;
            rc = eng_tokenize(m, text, len, flags, toks, tcap, &n);
        } else {
            rc = -ENOMEM;
        }
    }
    free(text);
    if (rc < 0) {
        free(toks);
        snprintf(msg, cap, "tokenizer failed: %s", strerror(-rc));
        return SELECTINFER__ERROR_CODE__INTERNAL;
    }
    *ret = toks;
    *ret_n = n;
    return 0;
}

/* The context slot a prompt goes to: the one that keeps the most of it
 * (eng_session_prefix_len), provided that is at least half of the prompt
 * or half of what the slot holds; otherwise the least recently used slot,
 * so that a prompt sharing only a system prompt with a long conversation
 * does not throw that conversation away while an idler slot could go.
 * (llama.cpp's server weighs only the second half, its slot similarity
 * 0.5; a retried prompt with a long reply before then would never reuse.) */
static int pick_slot(sid_server *srv, const int32_t *toks, size_t n, bool cache)
{
    int best = -1, lru = 0;
    int64_t best_keep = 0;
    for (int i = 0; i < srv->n_slots; i++) {
        if (srv->slot_used[i] < srv->slot_used[lru])
            lru = i;
        if (!cache)
            continue;
        const int64_t keep = eng_session_prefix_len(srv->sessions[i], toks, n);
        const int64_t held = eng_session_n_cached(srv->sessions[i]);
        if (keep > best_keep && (2 * keep >= (int64_t)n || 2 * keep >= held)) {
            best = i;
            best_keep = keep;
        }
    }
    return best >= 0 ? best : lru;
}

/* The longest prefix of toks that one of the slots holds. */
static int64_t held_prefix(sid_server *srv, const int32_t *toks, size_t n)
{
    int64_t best = 0;
    for (int i = 0; i < srv->n_slots; i++) {
        const int64_t keep = eng_session_prefix_len(srv->sessions[i], toks, n);
        if (keep > best)
            best = keep;
    }
    return best;
}

/* Tokens at the start of a prompt that a context shift keeps: a chat's
 * leading system messages and the next message's header (the common
 * prefix with the same system messages and an empty user turn; templates
 * that insert a default system prompt insert it there too), a raw
 * prompt's BOS. */
static size_t keep_tokens(sid_server *srv, const Selectinfer__Generate *g, bool no_think, const int32_t *toks,
                          size_t n)
{
    if (g->input_case != SELECTINFER__GENERATE__INPUT_CHAT)
        return n > 0 && toks[0] == eng_token_bos(srv->model) ? 1 : 0;
    const Selectinfer__ChatMessages *c = g->chat;
    size_t k = 0;
    while (k < c->n_messages && c->messages[k]->role && !strcmp(c->messages[k]->role, "system"))
        k++;
    Selectinfer__ChatMessage empty = SELECTINFER__CHAT_MESSAGE__INIT, **ms = calloc(k + 1, sizeof(*ms));
    if (!ms)
        return 0;
    for (size_t i = 0; i < k; i++)
        ms[i] = c->messages[i];
    empty.role = "user";
    empty.content = "";
    ms[k] = &empty;
    Selectinfer__ChatMessages head = SELECTINFER__CHAT_MESSAGES__INIT;
    head.n_messages = k + 1;
    head.messages = ms;
    int32_t *ht = NULL;
    size_t hn = 0, p = 0;
    char msg[64];
    if (sid_input_tokens(srv->model, NULL, &head, g->tools, false, no_think, &ht, &hn, msg, sizeof(msg)) == 0)
        while (p < hn && p < n && ht[p] == toks[p])
            p++;
    free(ht);
    free(ms);
    return p;
}

/* FNV-1a of a message's role and content: which message a slot's cut
 * started at, recognised in the next turn's history. Never 0. */
static uint64_t msg_hash(const Selectinfer__ChatMessage *m)
{
    uint64_t h = 0xcbf29ce484222325ull;
    for (const char *p = m->role; *p; p++)
        h = (h ^ (unsigned char)*p) * 0x100000001b3ull;
    h = (h ^ 0xff) * 0x100000001b3ull;
    for (const char *p = m->content; *p; p++)
        h = (h ^ (unsigned char)*p) * 0x100000001b3ull;
    return h ? h : 1;
}

/* Where fit_chat may cut: before a user message, or before the last
 * message; and what it learnt of each cut (tokenizing is what costs). */
typedef struct chat_cuts {
    const Selectinfer__ChatMessages *c;
    bool no_think;
    const char *tools;
    Selectinfer__ChatMessage **view; /* room for every message */
    size_t *at;                      /* message index of each cut, ascending */
    size_t *n;                       /* its prompt's tokens; 0: not yet known */
    size_t k;
} chat_cuts;

/* The tokens of the conversation cut before message at[j]: the system
 * messages before it, then everything from it on. */
static int cut_tokens(sid_server *srv, chat_cuts *cc, size_t j, int32_t **toks, size_t *n, char *msg,
                      size_t cap)
{
    const Selectinfer__ChatMessages *c = cc->c;
    size_t k = 0;
    for (size_t i = 0; i < c->n_messages; i++)
        if (i >= cc->at[j] || !strcmp(c->messages[i]->role, "system"))
            cc->view[k++] = c->messages[i];
    Selectinfer__ChatMessages v = *c;
    v.n_messages = k;
    v.messages = cc->view;
    int rc = sid_input_tokens(srv->model, NULL, &v, cc->tools, false, cc->no_think, toks, n, msg, cap);
    if (!rc)
        cc->n[j] = *n;
    return rc;
}

/* The token count of cut j. */
static int cut_len(sid_server *srv, chat_cuts *cc, size_t j, size_t *n, char *msg, size_t cap)
{
    if (cc->n[j]) {
        *n = cc->n[j];
        return 0;
    }
    int32_t *t = NULL;
    int rc = cut_tokens(srv, cc, j, &t, n, msg, cap);
    free(t);
    return rc;
}

/* The earliest cut whose prompt has at most `limit` tokens (a cut's
 * prompt shrinks as it moves later), by bisection: a few tokenizations
 * however long the history. *ret = cc->k when none. */
static int first_within(sid_server *srv, chat_cuts *cc, size_t limit, size_t *ret, char *msg, size_t cap)
{
    size_t lo = 0, hi = cc->k;
    while (lo < hi) {
        const size_t mid = lo + (hi - lo) / 2;
        size_t n;
        int rc = cut_len(srv, cc, mid, &n, msg, cap);
        if (rc)
            return rc;
        if (n <= limit)
            hi = mid;
        else
            lo = mid + 1;
    }
    *ret = lo;
    return 0;
}

/* A conversation too long for the context with `reserve` tokens of room
 * for the reply: which of its oldest turns to leave out (Generate.truncate).
 * A cut keeps the system messages before it and every message from it on;
 * it is made before a user message, or keeps only the last message. It
 * takes
 *  - the cut an earlier turn made (the slots remember its first message),
 *    while that still fits and a slot holds more of its prompt than of
 *    the shortest cut's (the system part): this turn appends to the
 *    cached prompt;
 *  - else the earliest cut within half the context: room for the next
 *    turns to append before the cut must move again (llama.cpp's context
 *    shift also drops half);
 *  - else the shortest cut, if it fits in the context at all.
 * On success *toks and *n are the cut prompt's, *dropped counts the
 * messages left out and *first is the index of the first kept one;
 * otherwise the error code, with msg set. */
static int fit_chat(sid_server *srv, const Selectinfer__ChatMessages *c, const char *tools, bool no_think,
                    size_t reserve, bool cache, int32_t **toks, size_t *n, uint32_t *dropped, size_t *first,
                    char *msg, size_t cap)
{
    const size_t n_ctx = (size_t)srv->n_ctx, m = c->n_messages;
    chat_cuts cc = {c, no_think, tools, malloc(m * sizeof(*cc.view)), malloc(m * sizeof(*cc.at)),
                    calloc(m, sizeof(*cc.n)), 0};
    int32_t *t = NULL;
    size_t nt = 0, pick = SIZE_MAX;
    int rc = 0;
    if (!cc.view || !cc.at || !cc.n) {
        snprintf(msg, cap, "out of memory");
        rc = SELECTINFER__ERROR_CODE__INTERNAL;
        goto out;
    }
    for (size_t i = 1; i < m; i++)
        if (i == m - 1 || !strcmp(c->messages[i]->role, "user"))
            cc.at[cc.k++] = i;
    const size_t last = cc.k - 1;
    if ((rc = cut_tokens(srv, &cc, last, &t, &nt, msg, cap)) != 0)
        goto out;
    const int64_t held_short = cache ? held_prefix(srv, t, nt) : 0;
    free(t);
    t = NULL;
    if (nt >= n_ctx) {
        snprintf(msg, cap, "the last message takes %zu tokens with the system messages; the context holds %zu",
                 nt, n_ctx);
        rc = SELECTINFER__ERROR_CODE__PROMPT_TOO_LONG;
        goto out;
    }
    /* the cuts the slots hold, latest message first among equal ones */
    int64_t best_held = held_short;
    for (int s = 0; cache && s < srv->n_slots; s++) {
        if (!srv->slot_cut[s])
            continue;
        for (size_t j = cc.k; j-- > 0;) {
            if (msg_hash(c->messages[cc.at[j]]) != srv->slot_cut[s])
                continue;
            if ((rc = cut_tokens(srv, &cc, j, &t, &nt, msg, cap)) != 0)
                goto out;
            const int64_t held = nt + reserve <= n_ctx ? held_prefix(srv, t, nt) : 0;
            free(t);
            t = NULL;
            if (held > best_held) {
                best_held = held;
                pick = j;
                break;
            }
        }
    }
    if (pick == SIZE_MAX) {
        if ((rc = first_within(srv, &cc, n_ctx / 2, &pick, msg, cap)) != 0)
            goto out;
        if (pick == cc.k)
            pick = last;
    }
    if ((rc = cut_tokens(srv, &cc, pick, &t, &nt, msg, cap)) != 0)
        goto out;
    free(*toks);
    *toks = t;
    *n = nt;
    *first = cc.at[pick];
    *dropped = 0;
    for (size_t i = 0; i < cc.at[pick]; i++)
        *dropped += strcmp(c->messages[i]->role, "system") != 0;
out:
    free(cc.view);
    free(cc.at);
    free(cc.n);
    return rc;
}

static void run_request(sid_server *srv, sid_req *req)
{
    const Selectinfer__Generate *g = req->gen;
    req->t_started = uv_hrtime();
    req->stats.stop_reason = ENG_STOP_CANCELLED;
    if (atomic_load(&req->cancelled) || atomic_load(&srv->stop_worker))
        return;
    if (!prepare_task(srv, req))
        return;
    snprintf(req->served, sizeof(req->served), "%s", sid_plan_name(&srv->wplan));
    if (!set_compute(srv, req))
        return;

    const bool chat = g->input_case == SELECTINFER__GENERATE__INPUT_CHAT;
    int32_t *toks = NULL;
    size_t n = 0;
    const bool no_think = g->has_think && !g->think;
    int rc = sid_input_tokens(srv->model, g->prompt, chat ? g->chat : NULL, chat ? g->tools : NULL,
                              g->has_parse_special && g->parse_special, no_think, &toks, &n, req->err_msg,
                              sizeof(req->err_msg));
    if (rc) {
        req->err_code = rc;
        return;
    }
    if (n == 0) {
        fail(req, SELECTINFER__ERROR_CODE__INVALID_ARGUMENT, "%s", "the prompt is empty");
        free(toks);
        return;
    }
    /* on unless the request says no (the fields default to true) */
    const bool cache = !g->has_cache_prompt || g->cache_prompt;
    const size_t reserve = req->max_tokens < (uint32_t)srv->n_ctx / 4 ? req->max_tokens : (size_t)srv->n_ctx / 4;
    size_t cut_at = 0; /* the first message a cut chat keeps */
    if (chat && (!g->has_truncate || g->truncate) && g->chat->n_messages > 1 && n + reserve > (size_t)srv->n_ctx) {
        rc = fit_chat(srv, g->chat, g->tools, no_think, reserve, cache, &toks, &n, &req->dropped, &cut_at, req->err_msg,
                      sizeof(req->err_msg));
        if (rc) {
            req->err_code = rc;
            free(toks);
            return;
        }
    }
    if (n >= (size_t)srv->n_ctx) {
        req->err_code = SELECTINFER__ERROR_CODE__PROMPT_TOO_LONG;
        snprintf(req->err_msg, sizeof(req->err_msg),
                 "the prompt has %zu tokens; the context holds %d", n, srv->n_ctx);
        free(toks);
        return;
    }

    eng_gen_params gp = eng_gen_params_default();
    size_t room = (size_t)srv->n_ctx - n;
    gp.context_shift = !g->has_shift || g->shift;
    gp.max_tokens = (int)(req->max_tokens < room || gp.context_shift ? req->max_tokens : room);
    if (gp.context_shift)
        gp.n_keep = (int)keep_tokens(srv, g, no_think, toks, n);
    gp.stop = (const char *const *)g->stop;
    gp.n_stop = g->n_stop;
    gp.cache_prompt = cache;
    if (req->top_logprobs >= 0) {
        gp.on_prob = on_prob;
        gp.n_top_probs = req->top_logprobs;
    }
    if (g->format && g->format[0] == '{') {
        gp.format = ENG_FORMAT_JSON; /* a schema, checked by the loop */
        gp.json_schema = g->format;
    } else if (g->format && g->format[0]) {
        eng_format_parse(g->format, &gp.format); /* checked by the loop */
    }
    const Selectinfer__Sampling *s = g->sampling;
    if (s) {
        if (s->has_temperature) gp.sampler.temperature = s->temperature;
        if (s->has_top_k) gp.sampler.top_k = (int)s->top_k;
        if (s->has_top_p) gp.sampler.top_p = s->top_p;
        if (s->has_min_p) gp.sampler.min_p = s->min_p;
        if (s->has_repeat_penalty) gp.sampler.repeat_penalty = s->repeat_penalty;
        if (s->has_repeat_last_n) gp.sampler.repeat_last_n = (int)s->repeat_last_n;
        if (s->has_frequency_penalty) gp.sampler.freq_penalty = s->frequency_penalty;
        if (s->has_presence_penalty) gp.sampler.presence_penalty = s->presence_penalty;
        if (s->has_seed) gp.sampler.seed = s->seed;
    }
    /* the tokens against the vocabulary, known here; the rest the loop checked */
    eng_logit_bias *bias = s && s->n_logit_bias ? malloc(s->n_logit_bias * sizeof(*bias)) : NULL;
    if (s && s->n_logit_bias && !bias) {
        fail(req, SELECTINFER__ERROR_CODE__INTERNAL, "%s", "out of memory");
        free(toks);
        return;
    }
    for (size_t i = 0; s && i < s->n_logit_bias; i++) {
        if (s->logit_bias[i]->token >= srv->info.n_vocab) {
            req->err_code = SELECTINFER__ERROR_CODE__INVALID_ARGUMENT;
            snprintf(req->err_msg, sizeof(req->err_msg), "logit_bias: token %d is outside the vocabulary (%d)",
                     s->logit_bias[i]->token, srv->info.n_vocab);
            free(bias);
            free(toks);
            return;
        }
        bias[i] = (eng_logit_bias){s->logit_bias[i]->token, s->logit_bias[i]->bias};
    }
    gp.sampler.logit_bias = bias;
    gp.sampler.n_logit_bias = s ? (int)s->n_logit_bias : 0;

    const int slot = pick_slot(srv, toks, n, gp.cache_prompt);
    eng_session *session = srv->sessions[slot];
    srv->slot_used[slot] = ++srv->slot_clock;
    srv->slot_cut[slot] = req->dropped ? msg_hash(g->chat->messages[cut_at]) : 0;
    gen_ctx ctx = {.srv = srv, .req = req};
    eng_gen_stats st;
    memset(&st, 0, sizeof(st));
    req->tools = chat && g->tools && g->tools[0] && eng_model_chat_can_call_tools(srv->model);
    size_t t0, t1, c0;
    req->reasoning = chat && eng_chat_reasoning(srv->model, NULL, 0, &t0, &t1, &c0) == 0;
    eng_session_set_abort(session, on_prefill, &ctx);
    rc = eng_generate(session, toks, n, &gp, on_text, &ctx, &st);
    eng_session_set_abort(session, NULL, NULL);
    free(toks);
    free(bias);
    /* even a failed request changed what the slot holds */
    req->slot = slot;
    req->slot_held = (uint32_t)eng_session_n_cached(session);
    req->slot_copy = (uint64_t)eng_session_copy_bytes(session);
    if (ctx.oom) {
        fail(req, SELECTINFER__ERROR_CODE__INTERNAL, "%s", "out of memory while streaming");
        return;
    }
    if (rc == -EIO) { /* (Gemma 4's per-layer table, read from the file as tokens come) */
        fail(req, SELECTINFER__ERROR_CODE__INTERNAL, "generation failed: the model file %.300s "
             "cannot be read as loaded (changed or cut short since?)", srv->cfg.model);
        return;
    }
    if (rc < 0) {
        fail(req, SELECTINFER__ERROR_CODE__INTERNAL, "generation failed: %s", strerror(-rc));
        return;
    }
    req->stats = st;
    req->ffn_share = eng_session_ffn_share(session);
    if (st.stop_reason == ENG_STOP_CANCELLED)
        return;
    /* the answer's parts: reasoning, then content, then calls */
    size_t c_begin = 0, c_end = req->text_len;
    if (req->reasoning &&
        eng_chat_reasoning(srv->model, req->text, req->text_len, &req->think_off, &req->think_len, &c_begin) == 0 &&
        c_begin > 0)
        req->has_content = true;
    if (req->tools) {
        size_t before_calls = req->text_len;
        if (eng_chat_tool_calls(srv->model, req->text, req->text_len, &req->calls, &req->n_calls, &before_calls) ==
            -ENOMEM) {
            fail(req, SELECTINFER__ERROR_CODE__INTERNAL, "%s", "out of memory reading the tool calls");
            return;
        }
        if (req->n_calls) {
            c_end = before_calls;
            req->has_content = true;
        }
    }
    req->content_off = c_begin;
    req->content_len = c_end > c_begin ? c_end - c_begin : 0;
}

/* An embed request: each input alone, in the least recently used slot,
 * which holds nothing afterwards and so is the next one given away. */
static void run_embed(sid_server *srv, sid_req *req)
{
    const Selectinfer__Embed *e = req->embed;
    req->t_started = uv_hrtime();
    req->stats.stop_reason = ENG_STOP_CANCELLED;
    if (atomic_load(&req->cancelled) || atomic_load(&srv->stop_worker))
        return;
    snprintf(req->served, sizeof(req->served), "%s", sid_plan_name(&srv->wplan));
    eng_pooling pool = ENG_POOL_MEAN;
    if (e->pooling && e->pooling[0])
        eng_pooling_parse(e->pooling, &pool); /* checked by the loop */
    const bool normalize = !e->has_normalize || e->normalize;
    const bool truncate = !e->has_truncate || e->truncate;
    const size_t E = (size_t)srv->info.n_embd;
    req->embd = malloc(e->n_input * E * sizeof(float));
    req->embd_tokens = calloc(e->n_input, sizeof(uint32_t));
    if (!req->embd || !req->embd_tokens) {
        fail(req, SELECTINFER__ERROR_CODE__INTERNAL, "%s", "out of memory");
        return;
    }
    const int slot = pick_slot(srv, NULL, 0, false);
    eng_session *session = srv->sessions[slot];
    gen_ctx ctx = {.srv = srv, .req = req};
    eng_session_set_abort(session, on_prefill, &ctx);
    const uint64_t t0 = eng_time_ns();
    uint64_t total = 0;
    int rc = 0;
    for (size_t i = 0; i < e->n_input && rc == 0; i++) {
        if (on_prefill(&ctx)) {
            rc = -ECANCELED;
            break;
        }
        int32_t *toks = NULL;
        size_t n = 0;
        int code = sid_input_tokens(srv->model, e->input[i], NULL, NULL, e->has_parse_special && e->parse_special,
                                    false, &toks, &n, req->err_msg, sizeof(req->err_msg));
        if (!code && n == 0) {
            code = SELECTINFER__ERROR_CODE__INVALID_ARGUMENT;
            snprintf(req->err_msg, sizeof(req->err_msg), "input %zu has no tokens", i);
        }
        if (!code && n > (size_t)srv->n_ctx) {
            if (truncate) {
                n = (size_t)srv->n_ctx; /* the beginning, as Ollama keeps it */
                req->truncated++;
            } else {
                code = SELECTINFER__ERROR_CODE__PROMPT_TOO_LONG;
                snprintf(req->err_msg, sizeof(req->err_msg),
                         "input %zu has %zu tokens; the context holds %d", i, n, srv->n_ctx);
            }
        }
        if (code) {
            req->err_code = code;
            free(toks);
            break;
        }
        rc = eng_embed(session, toks, n, pool, normalize, req->embd + i * E);
        free(toks);
        req->embd_tokens[i] = (uint32_t)n;
        total += n;
    }
    eng_session_set_abort(session, NULL, NULL);
    /* the slot was reset: nothing to reuse, and first in line */
    req->slot = slot;
    req->slot_held = (uint32_t)eng_session_n_cached(session);
    req->slot_copy = (uint64_t)eng_session_copy_bytes(session);
    srv->slot_used[slot] = 0;
    srv->slot_cut[slot] = 0;
    if (req->err_code || rc == -ECANCELED)
        return;
    if (rc < 0) {
        fail(req, SELECTINFER__ERROR_CODE__INTERNAL, "embedding failed: %s", strerror(-rc));
        return;
    }
    req->stats.n_prompt = (int)total;
    req->stats.prefill_ns = eng_time_ns() - t0;
    req->stats.stop_reason = ENG_STOP_NONE;
}

/* The loading plan of the configuration: mode, profile, task, shares. */
static int load_plan_params(sid_server *srv, eng_load_plan_params *pp, eng_profile **ret_prof)
{
    const sid_config *cfg = &srv->wcfg;
    sid_plan *p = &srv->wplan;
    eng_error err;
    memset(&err, 0, sizeof(err));
    if (cfg->profile[0]) {
        if (sid_profile_path(cfg->profile_dir, cfg->profile, p->path, sizeof(p->path)) < 0) {
            snprintf(srv->load_error, sizeof(srv->load_error), "The profile path is too long");
            return -ENAMETOOLONG;
        }
    }
    eng_select_mode mode = p->path[0] ? ENG_SELECT_SELECTINFER : ENG_SELECT_DENSE;
    if (cfg->mode != SID_MODE_AUTO && eng_select_mode_parse(sid_mode_names[cfg->mode], &mode) < 0) {
        snprintf(srv->load_error, sizeof(srv->load_error), "Unknown mode '%s'", sid_mode_names[cfg->mode]);
        return -EINVAL;
    }
    if (sid_mode_uses_profile(mode) && !p->path[0]) {
        snprintf(srv->load_error, sizeof(srv->load_error),
                 "Mode %s needs a task profile: set profile = PATH", eng_select_mode_name(mode));
        return -EINVAL;
    }
    eng_profile *prof = NULL;
    if (p->path[0]) {
        /* the fingerprint check needs the model: done again after loading */
        int rc = eng_profile_load(p->path, NULL, &prof, &err);
        if (rc < 0) {
            snprintf(srv->load_error, sizeof(srv->load_error), "Failed to load profile '%.300s': %.200s",
                     p->path, err.msg[0] ? err.msg : strerror(-rc));
            return rc;
        }
    }
    /* the configured plan, which plan_snapshot() refreshes once loaded */
    p->mode = mode;
    snprintf(p->task, sizeof(p->task), "%s", cfg->task);
    p->gamma = cfg->gamma;
    p->delta = cfg->delta;
    p->dense_first = (int)cfg->dense_first;
    p->dense_last = (int)cfg->dense_last;
    p->layer_budget = (eng_layer_budget)cfg->layer_budget;
    p->budget = cfg->budget;
    p->seed = cfg->seed;
    p->phi = cfg->phi;
    p->alpha = cfg->alpha;
    p->rank = cfg->rank == SID_RANK_SIGNED ? ENG_RANK_SIGNED : ENG_RANK_ABS;
    p->pick = cfg->pick == SID_PICK_EXACT   ? ENG_PICK_EXACT
              : cfg->pick == SID_PICK_TOKEN ? ENG_PICK_TOKEN
                                            : ENG_PICK_REQUEST;
    p->candidates = cfg->candidates;
    p->comp = (eng_comp)cfg->comp; /* sid_comp_names is eng_comp's order */
    p->copy_dynamic = cfg->copy_dynamic != 0;
    if (p->candidates > 0.0f && p->pick != ENG_PICK_EXACT) {
        snprintf(srv->load_error, sizeof(srv->load_error),
                 "candidates = %g is the exact pick's: set pick = exact, or candidates = 0",
                 (double)p->candidates);
        eng_profile_free(prof);
        return -EINVAL;
    }
    /* what a request leaves out for good: the per-request pick's skipped
     * neurons, or the exact pick's non-candidates */
    if (p->comp != ENG_COMP_NONE &&
        !(p->pick == ENG_PICK_REQUEST || (p->pick == ENG_PICK_EXACT && p->candidates > 0.0f))) {
        snprintf(srv->load_error, sizeof(srv->load_error),
                 "comp = %s needs pick = request, or pick = exact with candidates: pick = %s "
                 "leaves no neuron out for a whole request",
                 sid_comp_names[cfg->comp], sid_pick_names[p->pick]);
        eng_profile_free(prof);
        return -EINVAL;
    }
    plan_params_of(p, prof, pp);
    *ret_prof = prof;
    return 0;
}

static void free_sessions(sid_server *srv)
{
    for (int i = 0; i < srv->n_slots; i++) {
        eng_session_free(srv->sessions[i]);
        srv->sessions[i] = NULL;
    }
    srv->n_slots = 0;
}

/* The configuration's chat template in place of the file's: a name, or
 * a Jinja file (at most 1 MiB) in a format the engine renders. */
static int set_chat_template(sid_server *srv)
{
    const sid_config *cfg = &srv->wcfg;
    if (cfg->chat_template[0] && eng_model_set_chat_template(srv->model, cfg->chat_template) < 0) {
        size_t k = (size_t)snprintf(srv->load_error, sizeof(srv->load_error),
                                    "chat_template '%.64s' is not one of:", cfg->chat_template);
        const char *const *t = eng_chat_template_names();
        for (; *t && k < sizeof(srv->load_error); t++)
            k += (size_t)snprintf(srv->load_error + k, sizeof(srv->load_error) - k, " %s", *t);
        return -EINVAL;
    }
    if (!cfg->chat_template_file[0])
        return 0;
    int rc = -EIO;
    char *buf = NULL;
    struct stat st;
    const int fd = open(cfg->chat_template_file, O_RDONLY | O_CLOEXEC);
    if (fd >= 0 && fstat(fd, &st) == 0 && S_ISREG(st.st_mode) && st.st_size <= (1 << 20) &&
        (buf = malloc((size_t)st.st_size + 1)) != NULL) {
        size_t got = 0;
        ssize_t n = 1;
        while (got < (size_t)st.st_size && (n = read(fd, buf + got, (size_t)st.st_size - got)) > 0)
            got += (size_t)n;
        if (n > 0 || got == (size_t)st.st_size)
            rc = eng_model_set_chat_template_text(srv->model, buf, got);
    }
    if (fd >= 0)
        close(fd);
    free(buf);
    if (rc < 0)
        snprintf(srv->load_error, sizeof(srv->load_error), "chat_template_file '%.300s': %s",
                 cfg->chat_template_file,
                 rc == -EIO ? "cannot read it (a file of at most 1 MiB)"
                            : "not a chat template format the daemon renders");
    return rc < 0 ? -EINVAL : 0;
}

static int load_model(sid_server *srv)
{
    const sid_config *cfg = &srv->wcfg;
    eng_model_params mp = eng_model_params_default();
    if (cfg->threads > 0)
        mp.n_threads = (int)cfg->threads;
    mp.backend = cfg->backend == SID_BACKEND_CUDA   ? ENG_BACKEND_CUDA
                 : cfg->backend == SID_BACKEND_AUTO ? ENG_BACKEND_AUTO
                                                    : ENG_BACKEND_CPU;
    mp.device = (int)cfg->device;
    mp.q8_matrices = cfg->matrices == SID_MATRICES_Q8_0;
    mp.prefill_q8 = cfg->prefill_q8 != 0;
    eng_load_plan_params pp;
    eng_profile *prof = NULL;
    int rc = load_plan_params(srv, &pp, &prof);
    if (rc < 0)
        return rc;
    mp.plan = &pp;
    mp.progress = on_progress; /* loads and swaps beat (the watchdog, start timeout) */
    mp.progress_data = srv;
    eng_error err;
    memset(&err, 0, sizeof(err));
    uint64_t t0 = uv_hrtime();
    rc = eng_model_load(cfg->model, &mp, &srv->model, &err);
    srv->load_ns = uv_hrtime() - t0;
    if (rc < 0) {
        snprintf(srv->load_error, sizeof(srv->load_error), "Failed to load model '%.300s': %.200s",
                 cfg->model, err.msg[0] ? err.msg : strerror(-rc));
        eng_profile_free(prof);
        return rc;
    }
    if (prof) {
        /* now that the model exists: the profile must have been made for it */
        eng_profile *bound = NULL;
        rc = eng_profile_load(srv->wplan.path, srv->model, &bound, &err);
        eng_profile_free(prof);
        if (rc < 0) {
            snprintf(srv->load_error, sizeof(srv->load_error), "Profile '%.300s' does not fit the model: %.200s",
                     srv->wplan.path, err.msg[0] ? err.msg : strerror(-rc));
            eng_model_free(srv->model);
            srv->model = NULL;
            return rc;
        }
        srv->profile = bound;
    }
    plan_snapshot(srv);
    char why[256];
    if (check_phi(srv->wplan.mode, srv->wplan.gamma, srv->wplan.delta, srv->wplan.phi,
                  srv->wplan.pick != ENG_PICK_REQUEST, why, sizeof(why)) < 0) {
        snprintf(srv->load_error, sizeof(srv->load_error), "phi = %g does not fit the plan: %s",
                 (double)srv->wplan.phi, why);
        eng_model_free(srv->model);
        srv->model = NULL;
        return -EINVAL;
    }
    if ((rc = set_chat_template(srv)) < 0) {
        eng_model_free(srv->model);
        srv->model = NULL;
        return rc;
    }
    eng_model_get_info(srv->model, &srv->info);
    eng_session_params sp = eng_session_params_default();
    if (cfg->ctx_size > 0)
        sp.n_ctx = (int)cfg->ctx_size;
    sp.kv_type = cfg->kv_cache_type == 1 ? ENG_KV_Q8_0 : ENG_KV_F16;
    sp.swa_full = cfg->swa_full != 0;
    /* every slot a whole context: what Ollama's parallel requests do */
    const uint32_t n_slots = cfg->slots < 1 ? 1 : cfg->slots > SID_MAX_SLOTS ? SID_MAX_SLOTS : cfg->slots;
    srv->n_slots = 0;
    rc = 0;
    for (uint32_t i = 0; i < n_slots && rc >= 0; i++) {
        rc = eng_session_new(srv->model, &sp, &srv->sessions[i]);
        if (rc >= 0)
            srv->n_slots++;
    }
    if (rc == -ENOTSUP && sp.kv_type != ENG_KV_F16 && srv->info.head_dim % 32) {
        snprintf(srv->load_error, sizeof(srv->load_error),
                 "kv_cache_type = %s needs attention heads a multiple of 32 wide; this model's "
                 "are %d: use f16", eng_kv_type_name(sp.kv_type), srv->info.head_dim);
    } else if (rc == -ENOTSUP && sp.kv_type != ENG_KV_F16) {
        snprintf(srv->load_error, sizeof(srv->load_error),
                 "kv_cache_type = %s is not available on the %s backend, which keeps an f16 KV "
                 "cache: use f16", eng_kv_type_name(sp.kv_type), eng_backend_name(srv->model));
    } else if (rc < 0) {
        snprintf(srv->load_error, sizeof(srv->load_error),
                 "Failed to create context slot %d of %u (context %d): %s", srv->n_slots + 1,
                 n_slots, sp.n_ctx, strerror(-rc));
    }
    if (rc < 0) {
        free_sessions(srv);
        eng_profile_free(srv->profile);
        srv->profile = NULL;
        eng_model_free(srv->model);
        srv->model = NULL;
        return rc;
    }
    eng_backend_info bi;
    if (eng_model_backend_info(srv->model, &bi) == 0 && bi.device[0])
        snprintf(srv->backend, sizeof(srv->backend), "%s (%s)", bi.name, bi.device);
    else
        snprintf(srv->backend, sizeof(srv->backend), "%s", eng_backend_name(srv->model));
    srv->n_ctx = eng_session_n_ctx(srv->sessions[0]);
    srv->kv_bytes = 0;
    for (int i = 0; i < srv->n_slots; i++)
        srv->kv_bytes += eng_session_kv_bytes(srv->sessions[i]);
    srv->plan = srv->wplan; /* the loop's copy, read after EV_LOADED */
    sid_debug("model loaded in %.1f ms (%s, %llu of %llu FFN neurons)", (double)srv->load_ns / 1e6,
              sid_plan_name(&srv->wplan), (unsigned long long)srv->wplan.neurons_loaded,
              (unsigned long long)srv->wplan.neurons_total);
    return 0;
}

static void *worker_main(void *arg)
{
    sid_server *srv = arg;
    srv->load_rc = load_model(srv);
    post(srv, SID_EV_LOADED, NULL, NULL, 0, NULL);
    if (srv->load_rc == 0) {
        for (;;) {
            pthread_mutex_lock(&srv->mu);
            atomic_store(&srv->worker_busy, false);
            while (!atomic_load(&srv->stop_worker) && !srv->swaps_head && sid_queue_len(&srv->queue) == 0)
                pthread_cond_wait(&srv->cv, &srv->mu);
            if (atomic_load(&srv->stop_worker)) {
                pthread_mutex_unlock(&srv->mu);
                break;
            }
            /* Hot-swap point: a profile swap waits only for the request
             * that was running; every queued request runs after it. */
            sid_req *req = srv->swaps_head;
            if (req) {
                srv->swaps_head = req->swap_next;
                if (!srv->swaps_head)
                    srv->swaps_tail = NULL;
                req->swap_next = NULL;
                req->swap_queued = false;
            } else {
                req = (sid_req *)sid_queue_pop(&srv->queue);
            }
            srv->running = req;
            /* requests beat at every prefill chunk and token, swaps at
             * every layer (on_progress) */
            beat(srv);
            atomic_store(&srv->worker_busy, true);
            pthread_mutex_unlock(&srv->mu);
            if (req->kind == SID_REQ_SWAP)
                run_swap(srv, req);
            else if (req->kind == SID_REQ_EMBED)
                run_embed(srv, req);
            else
                run_request(srv, req);
            /* the backend's counters, read on its own thread */
            if (eng_model_backend_info(srv->model, &req->backend) < 0)
                memset(&req->backend, 0, sizeof(req->backend));
            post(srv, SID_EV_DONE, req, NULL, 0, NULL);
        }
    }
    free_sessions(srv);
    eng_profile_free(srv->profile);
    srv->profile = NULL;
    eng_model_free(srv->model);
    srv->model = NULL;
    post(srv, SID_EV_EXITED, NULL, NULL, 0, NULL);
    return NULL;
}

int sid_worker_start(sid_server *srv)
{
    int rc = pthread_create(&srv->worker, NULL, worker_main, srv);
    if (rc != 0)
        return -rc;
    srv->worker_started = true;
    return 0;
}

void sid_worker_join(sid_server *srv)
{
    if (srv->worker_started) {
        pthread_join(srv->worker, NULL);
        srv->worker_started = false;
    }
}
