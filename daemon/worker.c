/* The inference thread: loads the model once, then serves the fair queue one
 * request at a time, streaming text back to the loop through the outbox.
 * It never touches connections or the configuration the loop may reload. */
#include "daemon.h"
#include "log.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

void sid_event_free(sid_event *ev)
{
    if (!ev)
        return;
    free(ev->data);
    free(ev);
}

/* Appends an event and wakes the loop. Chunks of one request that the loop
 * has not taken yet are merged, so a slow loop sees fewer, larger frames. */
static int post(sid_server *srv, enum sid_event_type type, sid_req *req,
                const char *data, size_t len)
{
    pthread_mutex_lock(&srv->mu);
    sid_event *tail = srv->out_tail;
    if (type == SID_EV_CHUNK && tail && tail->type == SID_EV_CHUNK && tail->req == req) {
        if (tail->len + len > tail->cap) {
            size_t cap = tail->cap * 2;
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

    sid_event *ev = calloc(1, sizeof(*ev));
    if (!ev)
        return -ENOMEM;
    ev->type = type;
    ev->req = req;
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

typedef struct gen_ctx {
    sid_server *srv;
    sid_req *req;
    bool oom;
} gen_ctx;

/* Called by eng_generate with each piece of text; its return value is how a
 * cancel (explicit, client gone, shutdown) reaches the engine. */
static int on_text(void *ud, const char *text, size_t len)
{
    gen_ctx *g = ud;
    sid_req *req = g->req;
    if (len > 0) {
        if (req->stream) {
            if (post(g->srv, SID_EV_CHUNK, req, text, len) < 0)
                g->oom = true;
        } else {
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

/* Renders the request's input as text: the raw prompt, or the chat turns
 * through the model's template. Returns a malloc'd string or NULL (req
 * carries the error). */
static char *render_prompt(sid_server *srv, sid_req *req, size_t *ret_len)
{
    const Selectinfer__Generate *g = req->gen;
    if (g->input_case == SELECTINFER__GENERATE__INPUT_PROMPT) {
        char *p = strdup(g->prompt ? g->prompt : "");
        if (!p)
            fail(req, SELECTINFER__ERROR_CODE__INTERNAL, "%s", "out of memory");
        else
            *ret_len = strlen(p);
        return p;
    }
    const Selectinfer__ChatMessages *c = g->chat;
    eng_chat_msg *msgs = calloc(c->n_messages, sizeof(*msgs));
    if (!msgs) {
        fail(req, SELECTINFER__ERROR_CODE__INTERNAL, "%s", "out of memory");
        return NULL;
    }
    size_t total = 256;
    for (size_t i = 0; i < c->n_messages; i++) {
        msgs[i].role = c->messages[i]->role;
        msgs[i].content = c->messages[i]->content;
        total += strlen(msgs[i].content) + 64;
    }
    char *buf = NULL;
    for (int attempt = 0; attempt < 2; attempt++) {
        char *nb = realloc(buf, total + 1);
        if (!nb) {
            fail(req, SELECTINFER__ERROR_CODE__INTERNAL, "%s", "out of memory");
            break;
        }
        buf = nb;
        int n = eng_chat_apply(srv->model, msgs, c->n_messages, true, buf, total + 1);
        if (n == -ENOTSUP) {
            fail(req, SELECTINFER__ERROR_CODE__NOT_SUPPORTED, "%s",
                 "the model has no known chat template; send a raw prompt");
            break;
        }
        if (n < 0) {
            fail(req, SELECTINFER__ERROR_CODE__INVALID_ARGUMENT, "chat template failed: %s", strerror(-n));
            break;
        }
        if ((size_t)n <= total) {
            free(msgs);
            *ret_len = (size_t)n;
            return buf;
        }
        total = (size_t)n;
    }
    free(msgs);
    free(buf);
    return NULL;
}

static void run_request(sid_server *srv, sid_req *req)
{
    const Selectinfer__Generate *g = req->gen;
    req->t_started = uv_hrtime();
    req->stats.stop_reason = ENG_STOP_CANCELLED;
    if (atomic_load(&req->cancelled) || atomic_load(&srv->stop_worker))
        return;

    size_t len = 0;
    char *text = render_prompt(srv, req, &len);
    if (!text)
        return;
    bool chat = g->input_case == SELECTINFER__GENERATE__INPUT_CHAT;
    unsigned flags = ENG_TOK_ADD_SPECIAL;
    if (chat || (g->has_parse_special && g->parse_special))
        flags |= ENG_TOK_PARSE_SPECIAL;
    /* a token holds at least one byte: len + a few specials is enough */
    size_t cap = len + 8, n = 0;
    int32_t *toks = malloc(cap * sizeof(*toks));
    int rc = toks ? eng_tokenize(srv->model, text, len, flags, toks, cap, &n) : -ENOMEM;
    if (rc == -ENOBUFS && n > cap && n < ((size_t)1 << 28)) {
        int32_t *nt = realloc(toks, n * sizeof(*toks));
        if (nt) {
            toks = nt;
            cap = n;
            rc = eng_tokenize(srv->model, text, len, flags, toks, cap, &n);
        } else {
            rc = -ENOMEM;
        }
    }
    free(text);
    if (rc < 0) {
        fail(req, SELECTINFER__ERROR_CODE__INTERNAL, "tokenizer failed: %s", strerror(-rc));
        free(toks);
        return;
    }
    if (n == 0) {
        fail(req, SELECTINFER__ERROR_CODE__INVALID_ARGUMENT, "%s", "the prompt is empty");
        free(toks);
        return;
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
    gp.max_tokens = (int)(req->max_tokens < room ? req->max_tokens : room);
    gp.stop = (const char *const *)g->stop;
    gp.n_stop = g->n_stop;
    const Selectinfer__Sampling *s = g->sampling;
    if (s) {
        if (s->has_temperature) gp.sampler.temperature = s->temperature;
        if (s->has_top_k) gp.sampler.top_k = (int)s->top_k;
        if (s->has_top_p) gp.sampler.top_p = s->top_p;
        if (s->has_min_p) gp.sampler.min_p = s->min_p;
        if (s->has_repeat_penalty) gp.sampler.repeat_penalty = s->repeat_penalty;
        if (s->has_repeat_last_n) gp.sampler.repeat_last_n = (int)s->repeat_last_n;
        if (s->has_seed) gp.sampler.seed = s->seed;
    }

    gen_ctx ctx = {.srv = srv, .req = req};
    eng_gen_stats st;
    memset(&st, 0, sizeof(st));
    rc = eng_generate(srv->session, toks, n, &gp, on_text, &ctx, &st);
    free(toks);
    if (ctx.oom) {
        fail(req, SELECTINFER__ERROR_CODE__INTERNAL, "%s", "out of memory while streaming");
        return;
    }
    if (rc < 0) {
        fail(req, SELECTINFER__ERROR_CODE__INTERNAL, "generation failed: %s", strerror(-rc));
        return;
    }
    req->stats = st;
}

static int load_model(sid_server *srv)
{
    eng_model_params mp = eng_model_params_default();
    if (srv->cfg.threads > 0)
        mp.n_threads = (int)srv->cfg.threads;
    eng_error err;
    memset(&err, 0, sizeof(err));
    uint64_t t0 = uv_hrtime();
    int rc = eng_model_load(srv->cfg.model, &mp, &srv->model, &err);
    if (rc < 0) {
        snprintf(srv->load_error, sizeof(srv->load_error), "Failed to load model '%.300s': %.200s",
                 srv->cfg.model, err.msg[0] ? err.msg : strerror(-rc));
        return rc;
    }
    eng_session_params sp = eng_session_params_default();
    if (srv->cfg.ctx_size > 0)
        sp.n_ctx = (int)srv->cfg.ctx_size;
    rc = eng_session_new(srv->model, &sp, &srv->session);
    if (rc < 0) {
        snprintf(srv->load_error, sizeof(srv->load_error),
                 "Failed to create a session (context %d): %s", sp.n_ctx, strerror(-rc));
        eng_model_free(srv->model);
        srv->model = NULL;
        return rc;
    }
    eng_model_get_info(srv->model, &srv->info);
    snprintf(srv->backend, sizeof(srv->backend), "%s", eng_backend_name(srv->model));
    srv->n_ctx = eng_session_n_ctx(srv->session);
    sid_debug("model loaded in %.1f ms", (double)(uv_hrtime() - t0) / 1e6);
    return 0;
}

static void *worker_main(void *arg)
{
    sid_server *srv = arg;
    srv->load_rc = load_model(srv);
    post(srv, SID_EV_LOADED, NULL, NULL, 0);
    if (srv->load_rc == 0) {
        for (;;) {
            pthread_mutex_lock(&srv->mu);
            while (!atomic_load(&srv->stop_worker) && sid_queue_len(&srv->queue) == 0)
                pthread_cond_wait(&srv->cv, &srv->mu);
            if (atomic_load(&srv->stop_worker)) {
                pthread_mutex_unlock(&srv->mu);
                break;
            }
            sid_req *req = (sid_req *)sid_queue_pop(&srv->queue);
            srv->running = req;
            pthread_mutex_unlock(&srv->mu);
            /* Hot-swap point: a profile swap (UseProfile) will run here, on
             * this thread, between two requests; see server.c use_profile(). */
            run_request(srv, req);
            post(srv, SID_EV_DONE, req, NULL, 0);
        }
    }
    eng_session_free(srv->session);
    srv->session = NULL;
    eng_model_free(srv->model);
    srv->model = NULL;
    post(srv, SID_EV_EXITED, NULL, NULL, 0);
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
