/* The loop thread of selectinferd: the Unix socket, framing, dispatch of
 * requests, replies, status, admin operations and the start-up / reload /
 * shutdown phases. See daemon.h for how it shares work with worker.c. */
#include "daemon.h"
#include "log.h"

#include <errno.h>
#include <grp.h>
#include <math.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#ifdef HAVE_SYSTEMD
#include <systemd/sd-daemon.h>
#endif

/* ---- systemd: all no-ops without libsystemd or NOTIFY_SOCKET ------------- */

static void notify(const char *state)
{
#ifdef HAVE_SYSTEMD
    sd_notify(0, state);
#else
    (void)state;
#endif
}

static void notify_status(const char *fmt, const char *arg)
{
    char buf[SID_PATH_MAX + 128];
    snprintf(buf, sizeof(buf), "STATUS=");
    snprintf(buf + 7, sizeof(buf) - 7, fmt, arg);
    notify(buf);
}

/* ---- requests and connections ------------------------------------------ */

void sid_req_free(sid_req *req)
{
    if (!req)
        return;
    si_message_free(req->msg ? &req->msg->base : NULL);
    free(req->text);
    eng_tool_calls_free(req->calls, req->n_calls);
    free(req->swap);
    free(req->done_ev);
    free(req->lps.v);
    free(req->embd);
    free(req->embd_tokens);
    free(req);
}

/* A request with its done event, or NULL when out of memory. */
static sid_req *req_new(void)
{
    sid_req *req = calloc(1, sizeof(*req));
    if (req && !(req->done_ev = calloc(1, sizeof(*req->done_ev)))) {
        free(req);
        req = NULL;
    }
    if (req)
        req->slot = -1;
    return req;
}

static uint64_t now_ns(void)
{
    return uv_hrtime();
}

static void conn_maybe_free(sid_conn *c)
{
    if (!c->closed || c->n_reqs > 0)
        return;
    si_frame_reader_clear(&c->rd);
    free(c);
}

static void conn_unlink_req(sid_conn *c, sid_req *req)
{
    for (sid_req **p = &c->reqs; *p; p = &(*p)->next) {
        if (*p == req) {
            *p = req->next;
            c->n_reqs--;
            return;
        }
    }
}

static void on_conn_closed(uv_handle_t *h)
{
    sid_conn *c = h->data;
    sid_server *srv = c->srv;
    if (c->prev)
        c->prev->next = c->next;
    else
        srv->conns = c->next;
    if (c->next)
        c->next->prev = c->prev;
    c->closed = true;
    conn_maybe_free(c);
}

/* Detaches a connection from the daemon's work: no more reads or replies;
 * queued requests are dropped, the running one is cancelled (the connection
 * is freed once the worker hands it back). Idempotent. */
static void conn_detach(sid_conn *c, const char *why)
{
    if (c->closing)
        return;
    sid_server *srv = c->srv;
    sid_debug("client %llu (pid %d): closing: %s", (unsigned long long)c->serial, (int)c->pid, why);
    c->closing = true;
    srv->n_conns--;
    pthread_mutex_lock(&srv->mu);
    sid_req *keep = NULL, *next;
    for (sid_req *r = c->reqs; r; r = next) {
        next = r->next;
        if (r->q.lane) { /* still queued: the worker never sees it */
            sid_queue_remove(&srv->queue, &r->q);
            srv->n.requests_cancelled++;
            c->n_reqs--;
            sid_req_free(r);
        } else {
            atomic_store(&r->cancelled, true);
            r->next = keep;
            keep = r;
        }
    }
    c->reqs = keep;
    pthread_mutex_unlock(&srv->mu);
    uv_read_stop((uv_stream_t *)&c->pipe);
}

/* Closes a connection now (pending writes are cancelled). */
static void conn_drop(sid_conn *c, const char *why)
{
    conn_detach(c, why);
    if (!uv_is_closing((uv_handle_t *)&c->pipe))
        uv_close((uv_handle_t *)&c->pipe, on_conn_closed);
}

static void on_flushed(uv_shutdown_t *sr, int status)
{
    sid_conn *c = sr->data;
    if (!uv_is_closing((uv_handle_t *)&c->pipe))
        uv_close((uv_handle_t *)&c->pipe, on_conn_closed);
}

/* Detaches, lets the replies already queued reach the peer, then closes. A
 * peer that does not read is closed by the stall check. */
static void conn_close_after_flush(sid_conn *c, const char *why)
{
    conn_detach(c, why);
    if (c->flushing || uv_is_closing((uv_handle_t *)&c->pipe))
        return;
    c->shutdown_req.data = c;
    if (uv_shutdown(&c->shutdown_req, (uv_stream_t *)&c->pipe, on_flushed) == 0) {
        c->flushing = true;
        if (!c->stall_since)
            c->stall_since = uv_hrtime();
    } else {
        uv_close((uv_handle_t *)&c->pipe, on_conn_closed);
    }
}

typedef struct wreq {
    uv_write_t w;
    sid_conn *conn;
    uint8_t *buf;
} wreq;

static void on_written(uv_write_t *w, int status)
{
    wreq *wr = (wreq *)w;
    sid_conn *c = wr->conn;
    free(wr->buf);
    free(wr);
    if (status < 0 || uv_is_closing((uv_handle_t *)&c->pipe))
        return;
    size_t q = uv_stream_get_write_queue_size((uv_stream_t *)&c->pipe);
    c->stall_since = q ? now_ns() : 0; /* progress: the stall clock restarts */
}

/* A reply to request id with its body case set; the caller points the
 * body's member at the message. */
static Selectinfer__Response reply(uint64_t id, Selectinfer__Response__BodyCase body)
{
    Selectinfer__Response r = SELECTINFER__RESPONSE__INIT;
    r.has_id = true;
    r.id = id;
    r.body_case = body;
    return r;
}

static void send_response(sid_conn *c, Selectinfer__Response *r)
{
    if (c->closing)
        return;
    sid_server *srv = c->srv;
    uint8_t *buf;
    size_t len;
    int rc = si_frame_pack(&r->base, SID_MAX_REPLY, &buf, &len);
    if (rc < 0) {
        sid_err("client %llu: cannot pack a reply: %s", (unsigned long long)c->serial, strerror(-rc));
        return;
    }
    wreq *wr = malloc(sizeof(*wr));
    if (!wr) {
        free(buf);
        conn_drop(c, "out of memory");
        return;
    }
    wr->conn = c;
    wr->buf = buf;
    uv_buf_t b = uv_buf_init((char *)buf, (unsigned)len);
    rc = uv_write(&wr->w, (uv_stream_t *)&c->pipe, &b, 1, on_written);
    if (rc < 0) {
        free(buf);
        free(wr);
        conn_drop(c, uv_strerror(rc));
        return;
    }
    size_t q = uv_stream_get_write_queue_size((uv_stream_t *)&c->pipe);
    if (q > srv->cfg.client_write_buffer) {
        sid_log_once(&srv->once_slow, SID_LOG_WARNING,
                     "Client %llu (pid %d) stopped reading: %zu bytes queued (client_write_buffer %u); dropping it",
                     (unsigned long long)c->serial, (int)c->pid, q, srv->cfg.client_write_buffer);
        srv->n.clients_dropped++;
        conn_drop(c, "slow reader");
    } else if (q > 0 && c->stall_since == 0) {
        c->stall_since = now_ns();
    }
}

static void send_error(sid_conn *c, uint64_t id, int code, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

static void send_error(sid_conn *c, uint64_t id, int code, const char *fmt, ...)
{
    char msg[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    Selectinfer__Error e = SELECTINFER__ERROR__INIT;
    e.has_code = true;
    e.code = code;
    e.message = msg;
    Selectinfer__Response r = reply(id, SELECTINFER__RESPONSE__BODY_ERROR);
    r.error = &e;
    send_response(c, &r);
}

static void fill_swap_stats(const sid_server *srv, const sid_swap_result *res, Selectinfer__SwapStats *w)
{
    w->from_task = (char *)res->from;
    w->to_task = (char *)res->to;
    w->has_swap_ns = w->has_neurons_in = w->has_neurons_out = w->has_bytes_read = true;
    w->swap_ns = res->ns;
    w->neurons_in = res->st.neurons_in;
    w->neurons_out = res->st.neurons_out;
    w->bytes_read = res->st.bytes_read;
    w->has_load_ns = w->has_weight_bytes = true;
    w->load_ns = srv->load_ns;
    w->weight_bytes = res->plan.weight_bytes;
}

/* A swap the worker made (use_profile, or a generate naming another
 * task): the loop's copy of the plan follows it. */
static void apply_swap(sid_server *srv, const sid_swap_result *res)
{
    srv->plan = res->plan;
    srv->n.swaps++;
    srv->last_swap = *res;
    srv->have_last_swap = true;
    sid_info("Swapped '%s' -> '%s' in %.1f ms: %llu neurons in, %llu out, %.1f MiB read "
             "(cold start %.1f ms: %.0fx faster)%s%s",
             res->from, res->to, (double)res->ns / 1e6, (unsigned long long)res->st.neurons_in,
             (unsigned long long)res->st.neurons_out, (double)res->st.bytes_read / (1024.0 * 1024.0),
             (double)srv->load_ns / 1e6, res->ns ? (double)srv->load_ns / (double)res->ns : 0.0,
             res->note[0] ? "; " : "", res->note);
    notify_status("Ready, profile %s", sid_plan_name(&srv->plan));
}

static void send_ack_swap(sid_conn *c, uint64_t id, const char *msg, const Selectinfer__SwapStats *sw)
{
    Selectinfer__Ack a = SELECTINFER__ACK__INIT;
    a.message = (char *)msg;
    a.swap = (Selectinfer__SwapStats *)sw;
    Selectinfer__Response r = reply(id, SELECTINFER__RESPONSE__BODY_ACK);
    r.ack = &a;
    send_response(c, &r);
}

static void send_ack(sid_conn *c, uint64_t id, const char *msg)
{
    Selectinfer__Ack a = SELECTINFER__ACK__INIT;
    a.message = (char *)msg;
    Selectinfer__Response r = reply(id, SELECTINFER__RESPONSE__BODY_ACK);
    r.ack = &a;
    send_response(c, &r);
}

static Selectinfer__StopReason stop_reason_wire(eng_stop_reason s)
{
    switch (s) {
    case ENG_STOP_LENGTH: return SELECTINFER__STOP_REASON__STOP_LENGTH;
    case ENG_STOP_EOS: return SELECTINFER__STOP_REASON__STOP_EOS;
    case ENG_STOP_STRING: return SELECTINFER__STOP_REASON__STOP_STRING;
    case ENG_STOP_CANCELLED: return SELECTINFER__STOP_REASON__STOP_CANCELLED;
    case ENG_STOP_CONTEXT: return SELECTINFER__STOP_REASON__STOP_CONTEXT;
    default: return SELECTINFER__STOP_REASON__STOP_UNSPECIFIED;
    }
}

/* Log-probabilities as protobuf messages, with each token's bytes (the
 * vocabulary is read-only after load: the loop may read it). lp_free()
 * releases what lp_build() made, also after a failure (NULL: out of
 * memory; the reply then goes without them). */
typedef struct lp_msgs {
    Selectinfer__TokenLogprob *m, **p, **tp; /* entries, pointers to them, to the tops */
    char *bytes;
    size_t n;
} lp_msgs;

static void lp_free(lp_msgs *o)
{
    free(o->m);
    free(o->p);
    free(o->tp);
    free(o->bytes);
}

static Selectinfer__TokenLogprob *lp_one(const eng_model *model, Selectinfer__TokenLogprob *m, int32_t id,
                                         float logprob, char **b, char *end)
{
    selectinfer__token_logprob__init(m);
    m->has_id = m->has_logprob = m->has_token = true;
    m->id = id;
    m->logprob = logprob;
    int n = id >= 0 ? eng_token_to_piece(model, id, false, *b, (size_t)(end - *b)) : 0;
    if (n < 0 || n > end - *b)
        n = 0; /* (a piece never exceeds its share: lp_build sized it) */
    m->token.data = (uint8_t *)*b;
    m->token.len = (size_t)n;
    *b += n;
    return m;
}

static Selectinfer__TokenLogprob **lp_build(const eng_model *model, const sid_lps *a, lp_msgs *o)
{
    memset(o, 0, sizeof(*o));
    size_t total = a->n, bytes = 0;
    char piece[256];
    for (size_t i = 0; i < a->n; i++) {
        total += (size_t)a->v[i].n_top;
        int n = eng_token_to_piece(model, a->v[i].id, false, piece, sizeof(piece));
        bytes += n > 0 ? (size_t)n : 0;
        for (int j = 0; j < a->v[i].n_top; j++) {
            n = a->v[i].top[j].id >= 0 ? eng_token_to_piece(model, a->v[i].top[j].id, false, piece, sizeof(piece)) : 0;
            bytes += n > 0 ? (size_t)n : 0;
        }
    }
    o->m = calloc(total ? total : 1, sizeof(*o->m));
    o->p = calloc(a->n ? a->n : 1, sizeof(*o->p));
    o->tp = calloc(total ? total : 1, sizeof(*o->tp));
    o->bytes = malloc(bytes + 1);
    if (!o->m || !o->p || !o->tp || !o->bytes)
        return NULL;
    char *b = o->bytes, *end = o->bytes + bytes;
    size_t k = 0, t = 0;
    for (size_t i = 0; i < a->n; i++) {
        const sid_lp *e = &a->v[i];
        Selectinfer__TokenLogprob *m = lp_one(model, &o->m[k++], e->id, e->logprob, &b, end);
        m->top = &o->tp[t];
        m->n_top = (size_t)e->n_top;
        for (int j = 0; j < e->n_top; j++)
            o->tp[t++] = lp_one(model, &o->m[k++], e->top[j].id, e->top[j].logprob, &b, end);
        o->p[i] = m;
    }
    o->n = a->n;
    return o->p;
}

/* The terminal reply of a generate or swap request; counts it. */
/* The answer to an embed request the worker ran. */
static void send_embeddings(sid_server *srv, sid_req *req)
{
    const size_t n_in = req->embed->n_input, E = (size_t)srv->info.n_embd;
    srv->n.requests_served++;
    srv->n.prompt_tokens += (uint64_t)(req->stats.n_prompt > 0 ? req->stats.n_prompt : 0);
    Selectinfer__Embedding *one = calloc(n_in, sizeof(*one));
    Selectinfer__Embedding **all = calloc(n_in, sizeof(*all));
    if (!one || !all) {
        send_error(req->conn, req->id, SELECTINFER__ERROR_CODE__INTERNAL, "%s", "out of memory");
        free(one);
        free(all);
        return;
    }
    for (size_t i = 0; i < n_in; i++) {
        selectinfer__embedding__init(&one[i]);
        one[i].n_values = E;
        one[i].values = req->embd + i * E;
        one[i].has_tokens = true;
        one[i].tokens = req->embd_tokens[i];
        all[i] = &one[i];
    }
    Selectinfer__Embeddings em = SELECTINFER__EMBEDDINGS__INIT;
    em.n_embeddings = n_in;
    em.embeddings = all;
    em.has_prompt_tokens = true;
    em.prompt_tokens = (uint32_t)req->stats.n_prompt;
    em.has_truncated = true;
    em.truncated = req->truncated;
    em.has_embed_ns = true;
    em.embed_ns = req->stats.prefill_ns;
    em.has_queue_ns = true;
    em.queue_ns = req->t_started > req->t_queued ? req->t_started - req->t_queued : 0;
    em.profile = req->served[0] ? req->served : (char *)sid_plan_name(&srv->plan);
    Selectinfer__Response r = reply(req->id, SELECTINFER__RESPONSE__BODY_EMBEDDINGS);
    r.embeddings = &em;
    /* 256 inputs of a model 8192 wide are 8 MiB: within a reply, but the
     * bound is the reply's, not the model's */
    if (protobuf_c_message_get_packed_size(&r.base) + 4 > SID_MAX_REPLY)
        send_error(req->conn, req->id, SELECTINFER__ERROR_CODE__INVALID_ARGUMENT,
                   "%zu embeddings of %zu values do not fit in one reply (%u MiB): ask for fewer at once",
                   n_in, E, SID_MAX_REPLY >> 20);
    else
        send_response(req->conn, &r);
    free(one);
    free(all);
}

static void send_done(sid_server *srv, sid_req *req)
{
    sid_conn *c = req->conn;
    srv->graphs = req->backend.graphs;
    if (req->swap)
        apply_swap(srv, req->swap);
    if (req->swap_failed) {
        srv->n.swaps_failed++;
        sid_warn("Swap failed: %s", req->err_msg);
    }
    if (req->kind == SID_REQ_SWAP) {
        if (req->err_code) {
            send_error(c, req->id, req->err_code, "%s", req->err_msg);
            return;
        }
        Selectinfer__SwapStats sw = SELECTINFER__SWAP_STATS__INIT;
        fill_swap_stats(srv, req->swap, &sw);
        char msg[512];
        snprintf(msg, sizeof(msg), "'%s' active: %llu neurons in, %llu out in %.1f ms (cold start %.1f ms)%s%s",
                 req->swap->to, (unsigned long long)req->swap->st.neurons_in,
                 (unsigned long long)req->swap->st.neurons_out, (double)req->swap->ns / 1e6,
                 (double)srv->load_ns / 1e6, req->swap->note[0] ? "; " : "", req->swap->note);
        send_ack_swap(c, req->id, msg, &sw);
        return;
    }
    if (req->err_code) {
        srv->n.requests_failed++;
        send_error(c, req->id, req->err_code, "%s", req->err_msg);
        return;
    }
    if (req->kind == SID_REQ_EMBED && req->stats.stop_reason != ENG_STOP_CANCELLED) {
        send_embeddings(srv, req);
        return;
    }
    const eng_gen_stats *st = &req->stats;
    if (st->stop_reason == ENG_STOP_CANCELLED)
        srv->n.requests_cancelled++;
    else
        srv->n.requests_served++;
    srv->n.prompt_tokens += (uint64_t)(st->n_prompt > 0 ? st->n_prompt : 0);
    srv->n.generated_tokens += (uint64_t)(st->n_generated > 0 ? st->n_generated : 0);
    srv->n.cached_tokens += (uint64_t)(st->n_cached > 0 ? st->n_cached : 0);
    Selectinfer__Done d = SELECTINFER__DONE__INIT;
    d.has_stop_reason = true;
    d.stop_reason = stop_reason_wire(st->stop_reason);
    d.has_prompt_tokens = true;
    d.prompt_tokens = (uint32_t)(st->n_prompt > 0 ? st->n_prompt : 0);
    d.has_generated_tokens = true;
    d.generated_tokens = (uint32_t)(st->n_generated > 0 ? st->n_generated : 0);
    d.has_cached_tokens = true;
    d.cached_tokens = (uint32_t)(st->n_cached > 0 ? st->n_cached : 0);
    if (req->slot >= 0) {
        d.has_slot = true;
        d.slot = (uint32_t)req->slot;
    }
    if (req->gen && req->gen->input_case == SELECTINFER__GENERATE__INPUT_CHAT) {
        d.has_dropped_messages = true;
        d.dropped_messages = req->dropped;
    }
    d.has_context_shifts = true;
    d.context_shifts = (uint32_t)(st->n_shifts > 0 ? st->n_shifts : 0);
    d.has_prefill_ns = true;
    d.prefill_ns = st->prefill_ns;
    d.has_decode_ns = true;
    d.decode_ns = st->decode_ns;
    d.has_queue_ns = true;
    d.queue_ns = req->t_started > req->t_queued ? req->t_started - req->t_queued : 0;
    /* a request cancelled before it ran computed nothing */
    d.has_ffn_share = true;
    d.ffn_share = (float)req->ffn_share;
    d.has_phi = true;
    d.phi = req->phi;
    d.profile = req->served[0] ? req->served : (char *)sid_plan_name(&srv->plan);
    Selectinfer__SwapStats sw = SELECTINFER__SWAP_STATS__INIT;
    if (req->swap) {
        fill_swap_stats(srv, req->swap, &sw);
        d.swap = &sw;
    }
    if (req->gen && !req->stream) {
        d.has_text = true;
        d.text.data = (uint8_t *)req->text;
        d.text.len = req->text_len;
    }
    lp_msgs lm = {0};
    if (req->lps.n && (d.logprobs = lp_build(srv->model, &req->lps, &lm)) != NULL)
        d.n_logprobs = lm.n;
    Selectinfer__ToolCall *tc = req->n_calls ? calloc(req->n_calls, sizeof(*tc)) : NULL;
    Selectinfer__ToolCall **tcp = req->n_calls ? calloc(req->n_calls, sizeof(*tcp)) : NULL;
    if (tc && tcp) {
        for (size_t i = 0; i < req->n_calls; i++) {
            selectinfer__tool_call__init(&tc[i]);
            tc[i].name = req->calls[i].name;
            tc[i].arguments = req->calls[i].arguments;
            tcp[i] = &tc[i];
        }
        d.tool_calls = tcp;
        d.n_tool_calls = req->n_calls;
    } else if (req->n_calls) {
        sid_warn("Request %llu: out of memory for its tool calls; sent without them",
                 (unsigned long long)req->id);
    }
    if (req->has_content) {
        d.has_content = true;
        d.content.data = (uint8_t *)req->text + req->content_off;
        d.content.len = req->content_len;
    }
    if (req->think_len) {
        d.has_thinking = true;
        d.thinking.data = (uint8_t *)req->text + req->think_off;
        d.thinking.len = req->think_len;
    }
    Selectinfer__Response r = reply(req->id, SELECTINFER__RESPONSE__BODY_DONE);
    r.done = &d;
    /* an unstreamed answer too long for one reply still ends its request:
     * without the log-probabilities, else as an error */
    if (protobuf_c_message_get_packed_size(&r.base) + 4 > SID_MAX_REPLY && d.n_logprobs) {
        sid_warn("Request %llu: its log-probabilities do not fit in a reply; sent without them",
                 (unsigned long long)req->id);
        d.n_logprobs = 0;
    }
    if (protobuf_c_message_get_packed_size(&r.base) + 4 > SID_MAX_REPLY)
        send_error(c, req->id, SELECTINFER__ERROR_CODE__INTERNAL,
                   "the answer does not fit in one reply (%u MiB): ask for it streamed", SID_MAX_REPLY >> 20);
    else
        send_response(c, &r);
    lp_free(&lm);
    free(tc);
    free(tcp);
}

static void send_chunk(sid_server *srv, sid_conn *c, uint64_t id, const char *text, size_t len,
                       const sid_lps *lps)
{
    Selectinfer__Chunk ch = SELECTINFER__CHUNK__INIT;
    ch.has_text = true;
    ch.text.data = (uint8_t *)text;
    ch.text.len = len;
    lp_msgs lm = {0};
    if (lps->n && (ch.logprobs = lp_build(srv->model, lps, &lm)) != NULL)
        ch.n_logprobs = lm.n;
    Selectinfer__Response r = reply(id, SELECTINFER__RESPONSE__BODY_CHUNK);
    r.chunk = &ch;
    send_response(c, &r);
    lp_free(&lm);
}

/* Ends a request the worker never saw (cancelled while queued, shutdown). */
static void finish_unrun(sid_server *srv, sid_req *req, int err_code, const char *msg)
{
    sid_conn *c = req->conn;
    if (err_code) {
        req->err_code = err_code;
        snprintf(req->err_msg, sizeof(req->err_msg), "%s", msg);
    } else {
        req->stats.stop_reason = ENG_STOP_CANCELLED;
    }
    req->t_started = now_ns();
    send_done(srv, req);
    conn_unlink_req(c, req);
    sid_req_free(req);
    conn_maybe_free(c);
}

/* ---- status -------------------------------------------------------------- */

static uint64_t rss_bytes(void)
{
    FILE *f = fopen("/proc/self/statm", "re");
    if (!f)
        return 0;
    unsigned long size = 0, rss = 0;
    int n = fscanf(f, "%lu %lu", &size, &rss);
    fclose(f);
    return n == 2 ? (uint64_t)rss * (uint64_t)sysconf(_SC_PAGESIZE) : 0;
}

/* The active plan (name: what serves), or with task set one task of the
 * profile as a swap to it would plan it. */
static void fill_profile(sid_server *srv, Selectinfer__ProfileInfo *p, const char *task, uint64_t n_prompts)
{
    const sid_plan *a = &srv->plan;
    bool active = !task || (sid_mode_uses_profile(a->mode) && strcmp(task, a->task) == 0);
    p->name = (char *)(task ? task : sid_plan_name(a));
    p->task = (char *)(task ? task : a->task);
    p->path = (char *)a->path;
    p->mode = (char *)eng_select_mode_name(active || sid_mode_uses_profile(a->mode) ? a->mode
                                                                                      : ENG_SELECT_SELECTINFER);
    p->has_gamma = p->has_delta = p->has_phi = p->has_active = p->has_alpha = true;
    p->gamma = a->gamma;
    p->delta = a->delta;
    p->phi = a->phi;
    p->alpha = a->alpha;
    p->rank = a->rank == ENG_RANK_SIGNED ? "signed" : "abs";
    p->pick = (char *)sid_pick_names[a->pick <= ENG_PICK_EXACT ? a->pick : 0]; /* eng_pick order */
    p->has_candidates = a->pick == ENG_PICK_EXACT;
    p->candidates = a->candidates;
    /* sid_comp_names is eng_comp's order */
    p->comp = (char *)sid_comp_names[(unsigned)a->comp <= ENG_COMP_LINEAR ? a->comp : 0];
    p->active = active;
    p->has_dense_first = p->has_dense_last = p->has_budget_bytes = true;
    p->dense_first = (uint32_t)a->dense_first;
    p->dense_last = (uint32_t)a->dense_last;
    p->budget_bytes = a->budget;
    if (active) {
        p->has_neurons_loaded = p->has_neurons_total = true;
        p->neurons_loaded = a->neurons_loaded;
        p->neurons_total = a->neurons_total;
    }
    if (task) {
        p->has_n_prompts = true;
        p->n_prompts = n_prompts;
    }
}

static void handle_status(sid_server *srv, sid_conn *c, uint64_t id)
{
    Selectinfer__Status s = SELECTINFER__STATUS__INIT;
    Selectinfer__ProfileInfo prof = SELECTINFER__PROFILE_INFO__INIT;
    bool loaded = srv->state == SELECTINFER__DAEMON_STATE__STATE_READY ||
                  (srv->state == SELECTINFER__DAEMON_STATE__STATE_STOPPING && srv->n_ctx > 0);
    s.has_state = true;
    s.state = srv->state;
    s.version = SID_VERSION;
    s.has_protocol_version = true;
    s.protocol_version = SI_PROTOCOL_VERSION;
    s.model_path = srv->cfg.model;
    Selectinfer__SwapStats sw = SELECTINFER__SWAP_STATS__INIT;
    s.task_switch = (char *)sid_task_switch_names[srv->cfg.task_switch];
    if (loaded) {
        s.has_load_ns = true;
        s.load_ns = srv->load_ns;
        if (srv->have_last_swap) {
            fill_swap_stats(srv, &srv->last_swap, &sw);
            sw.weight_bytes = srv->plan.weight_bytes;
            s.last_swap = &sw;
        }
        s.model_name = srv->info.name;
        s.model_arch = srv->info.arch;
        s.backend = srv->backend;
        s.weight_type = (char *)eng_dtype_name(srv->info.ffn_dtype);
        s.has_model_params = s.has_weight_bytes = s.has_n_ctx = s.has_n_threads = true;
        s.model_params = srv->info.n_params;
        s.weight_bytes = srv->plan.weight_bytes; /* follows the swaps */
        s.n_ctx = (uint32_t)srv->n_ctx;
        s.n_threads = (uint32_t)(srv->info.n_threads > 0 ? srv->info.n_threads : 0);
        s.has_slots = true;
        s.slots = (uint32_t)srv->n_slots; /* the worker's, fixed since EV_LOADED */
        s.n_slot_tokens = (size_t)srv->n_slots;
        s.slot_tokens = srv->slot_held;
        s.n_slot_copy_bytes = (size_t)srv->n_slots;
        s.slot_copy_bytes = srv->slot_copy;
        s.kv_cache_type = (char *)sid_kv_cache_type_names[srv->cfg.kv_cache_type == 1];
        s.has_kv_bytes = true;
        s.kv_bytes = srv->kv_bytes;
        if (srv->info.n_expert > 0) {
            s.has_experts = s.has_experts_used = true;
            s.experts = (uint32_t)srv->info.n_expert;
            s.experts_used = (uint32_t)srv->info.n_expert_used;
            s.has_shared_expert_ff = srv->info.n_ff_shared > 0;
            s.shared_expert_ff = (uint32_t)srv->info.n_ff_shared;
        }
        if (srv->info.n_ssm > 0) {
            s.has_ssm_layers = true;
            s.ssm_layers = (uint32_t)srv->info.n_ssm;
        }
        s.has_shared_kv_layers = srv->info.n_kv_shared > 0;
        s.shared_kv_layers = (uint32_t)srv->info.n_kv_shared;
        s.has_per_layer_embd = srv->info.n_embd_per_layer > 0;
        s.per_layer_embd = (uint32_t)srv->info.n_embd_per_layer;
        fill_profile(srv, &prof, NULL, 0);
        s.profile = &prof;
    }
    if (srv->state == SELECTINFER__DAEMON_STATE__STATE_FAILED)
        s.load_error = srv->load_error;
    s.has_rss_bytes = true;
    s.rss_bytes = rss_bytes();
    Selectinfer__DecodeGraphs dg = SELECTINFER__DECODE_GRAPHS__INIT;
    if (srv->graphs.enabled || srv->graphs.steps > 0 || srv->graphs.fallbacks > 0) {
        dg.has_enabled = dg.has_steps = dg.has_replayed = dg.has_instantiated = true;
        dg.has_fallbacks = true;
        dg.enabled = srv->graphs.enabled;
        dg.steps = (uint64_t)srv->graphs.steps;
        dg.replayed = (uint64_t)srv->graphs.replayed;
        dg.instantiated = (uint64_t)srv->graphs.instantiated;
        dg.fallbacks = (uint64_t)srv->graphs.fallbacks;
        s.decode_graphs = &dg;
    }
    pthread_mutex_lock(&srv->mu);
    s.queue_length = (uint32_t)sid_queue_len(&srv->queue);
    s.running = srv->running ? 1 : 0;
    /* The worker clears srv->running when it posts EV_DONE; until on_async
     * has handled that event, the done reply is unsent and the counters
     * below do not include it. Still report the request as running, so a
     * client that sees "idle" also sees it counted (a loaded machine can
     * delay the loop between the two for a long time). */
    for (const sid_event *ev = srv->out_head; ev && !s.running; ev = ev->next)
        if (ev->type == SID_EV_DONE)
            s.running = 1;
    pthread_mutex_unlock(&srv->mu);
    s.has_queue_length = s.has_running = s.has_queue_capacity = s.has_connections = true;
    s.queue_capacity = srv->cfg.max_queue;
    s.connections = srv->n_conns;
    s.has_requests_served = s.has_requests_failed = s.has_requests_cancelled = true;
    s.requests_served = srv->n.requests_served;
    s.requests_failed = srv->n.requests_failed;
    s.requests_cancelled = srv->n.requests_cancelled;
    s.has_prompt_tokens = s.has_generated_tokens = s.has_swaps = s.has_reloads = true;
    s.prompt_tokens = srv->n.prompt_tokens;
    s.generated_tokens = srv->n.generated_tokens;
    s.has_cached_tokens = true;
    s.cached_tokens = srv->n.cached_tokens;
    s.swaps = srv->n.swaps;
    s.has_swaps_failed = true;
    s.swaps_failed = srv->n.swaps_failed;
    s.reloads = srv->n.reloads;
    s.has_uptime_ns = s.has_rejected_overloaded = s.has_clients_dropped = true;
    s.uptime_ns = now_ns() - srv->t_start;
    s.rejected_overloaded = srv->n.rejected_overloaded;
    s.clients_dropped = srv->n.clients_dropped;

    Selectinfer__Response r = reply(id, SELECTINFER__RESPONSE__BODY_STATUS);
    r.status = &s;
    send_response(c, &r);
}

/* The tasks of the loaded profile, the active one marked; the active plan
 * first when no task of the profile serves (dense, coreinfer, "*"). */
static void handle_list_profiles(sid_server *srv, sid_conn *c, uint64_t id)
{
    static Selectinfer__ProfileInfo infos[SID_MAX_TASKS + 1];
    Selectinfer__ProfileInfo *list[SID_MAX_TASKS + 1];
    size_t n = 0;
    bool loaded = srv->state == SELECTINFER__DAEMON_STATE__STATE_READY ||
                  (srv->state == SELECTINFER__DAEMON_STATE__STATE_STOPPING && srv->n_ctx > 0);
    const sid_plan *a = &srv->plan;
    if (loaded) {
        bool task_active = false;
        for (int i = 0; i < a->n_tasks; i++)
            task_active |= sid_mode_uses_profile(a->mode) && strcmp(a->tasks[i], a->task) == 0;
        if (!task_active) {
            selectinfer__profile_info__init(&infos[n]);
            fill_profile(srv, &infos[n], NULL, 0);
            list[n] = &infos[n];
            n++;
        }
        for (int i = 0; i < a->n_tasks; i++) {
            selectinfer__profile_info__init(&infos[n]);
            fill_profile(srv, &infos[n], a->tasks[i], a->task_prompts[i]);
            list[n] = &infos[n];
            n++;
        }
    }
    Selectinfer__ProfileList pl = SELECTINFER__PROFILE_LIST__INIT;
    pl.n_profiles = n;
    pl.profiles = list;
    Selectinfer__Response r = reply(id, SELECTINFER__RESPONSE__BODY_PROFILES);
    r.profiles = &pl;
    send_response(c, &r);
}

/* ---- admin: profile swap, reload, shutdown ------------------------------ */

static void sid_server_stop(sid_server *srv, int exit_code);

static bool bad_float(bool has, float v, float lo, float hi, bool lo_open);
static sid_req *find_req(sid_conn *c, uint64_t id);

/* Hot-swap of the task profile: checks what needs no model, then queues a
 * swap job that the worker runs as soon as the running request ends,
 * before the queued ones (worker.c, "Hot-swap point"). The ack (or error)
 * comes when the worker hands the job back; send_done() then updates the
 * loop's copy of the plan. Takes msg. */
static void use_profile(sid_server *srv, sid_conn *c, Selectinfer__Request *msg)
{
    uint64_t id = msg->id;
    const Selectinfer__UseProfile *u = msg->use_profile;
    const char *bad = NULL;
    eng_select_mode mode;
    char path[SID_PATH_MAX] = "";
    if (!u->name || !u->name[0] || strlen(u->name) >= SID_TASK_MAX)
        bad = "use_profile needs a task name (at most 63 bytes) from `profiles`, or \"dense\"";
    else if (bad_float(u->has_gamma, u->gamma, 0.0f, 1.0f, true))
        bad = "gamma must be in (0, 1]";
    else if (bad_float(u->has_delta, u->delta, 0.0f, 1.0f, false))
        bad = "delta must be in [0, 1]";
    else if (u->has_gamma && u->has_delta && u->delta > u->gamma)
        bad = "delta must not exceed gamma";
    else if (bad_float(u->has_phi, u->phi, 0.0f, 1.0f, false))
        bad = "phi must be in [0, 1] (0: every loaded neuron)";
    else if (u->mode && u->mode[0] && eng_select_mode_parse(u->mode, &mode) < 0)
        bad = "mode must be dense, load-only, random-load, coreinfer or selectinfer";
    else if ((u->has_dense_first && u->dense_first > 1024) || (u->has_dense_last && u->dense_last > 1024))
        bad = "dense_first and dense_last must be at most 1024";
    else if (u->path && u->path[0] && sid_profile_path(srv->cfg.profile_dir, u->path, path, sizeof(path)) < 0)
        bad = "the profile path is too long";
    int code = bad ? SELECTINFER__ERROR_CODE__INVALID_ARGUMENT : 0;
    if (!code && srv->stopping)
        code = SELECTINFER__ERROR_CODE__SHUTTING_DOWN, bad = "the daemon is shutting down";
    else if (!code && srv->state == SELECTINFER__DAEMON_STATE__STATE_FAILED)
        code = SELECTINFER__ERROR_CODE__NOT_READY, bad = srv->load_error;
    else if (!code && find_req(c, id))
        code = SELECTINFER__ERROR_CODE__DUPLICATE_ID, bad = "the request id is already in flight";
    else if (!code && c->n_reqs >= srv->cfg.max_pending)
        code = SELECTINFER__ERROR_CODE__OVERLOADED, bad = "this connection has too many requests in flight";
    sid_req *req = code ? NULL : req_new();
    if (!code && !req)
        code = SELECTINFER__ERROR_CODE__INTERNAL, bad = "out of memory";
    if (code) {
        send_error(c, id, code, "%s", bad);
        si_message_free(&msg->base);
        return;
    }
    req->kind = SID_REQ_SWAP;
    req->conn = c;
    req->id = id;
    req->msg = msg;
    req->t_queued = now_ns();
    atomic_init(&req->cancelled, false);
    memcpy(req->swap_path, path, sizeof(path));
    sid_info("Client %llu (pid %d): use_profile '%s'%s%s", (unsigned long long)c->serial, (int)c->pid, u->name,
             req->swap_path[0] ? " from " : "", req->swap_path);
    pthread_mutex_lock(&srv->mu);
    req->swap_queued = true;
    if (srv->swaps_tail)
        srv->swaps_tail->swap_next = req;
    else
        srv->swaps_head = req;
    srv->swaps_tail = req;
    pthread_cond_signal(&srv->cv);
    pthread_mutex_unlock(&srv->mu);
    req->next = c->reqs;
    c->reqs = req;
    c->n_reqs++;
}

static gid_t resolve_group(const char *name)
{
    if (!name || !name[0])
        return (gid_t)-1;
    struct group *g = getgrnam(name);
    if (g)
        return g->gr_gid;
    char *end;
    unsigned long v = strtoul(name, &end, 10);
    if (*end == '\0' && end != name)
        return (gid_t)v;
    sid_warn("Group '%s' does not exist", name);
    return (gid_t)-1;
}

/* Re-reads the configuration file (flags still win) and applies what can
 * change at run time. Returns 0, or -errno with msg filled. */
static int server_reload(sid_server *srv, char *msg, size_t cap)
{
    char mono[64];
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    snprintf(mono, sizeof(mono), "RELOADING=1\nMONOTONIC_USEC=%llu",
             (unsigned long long)ts.tv_sec * 1000000ull + (unsigned long long)ts.tv_nsec / 1000);
    notify(mono);
    sid_config nc;
    char err[512];
    int rc = sid_config_build(&nc, srv->config_file, srv->overrides, srv->n_overrides, err, sizeof(err));
    if (rc < 0) {
        sid_err("Reload failed, keeping the running configuration: %s", err);
        snprintf(msg, cap, "%s", err);
        notify("READY=1");
        return rc;
    }
    const char *fixed = NULL;
    sid_config_apply_reload(&srv->cfg, &nc, &fixed);
    sid_log_set_level(srv->cfg.log_level);
    srv->admin_gid = resolve_group(srv->cfg.admin_group);
    srv->n.reloads++;
    if (fixed) {
        sid_warn("Reload: '%s' changed but takes effect only after a restart", fixed);
        snprintf(msg, cap, "reloaded; '%s' needs a restart", fixed);
    } else {
        snprintf(msg, cap, "reloaded");
    }
    sid_info("Configuration reloaded");
    notify("READY=1");
    return 0;
}

static bool require_admin(sid_conn *c, uint64_t id, const char *what)
{
    if (c->admin)
        return true;
    sid_info("Client %llu (uid %u): %s refused, not an admin", (unsigned long long)c->serial, (unsigned)c->uid, what);
    send_error(c, id, SELECTINFER__ERROR_CODE__PERMISSION_DENIED,
               "%s needs root, the daemon's user or the admin group", what);
    return false;
}

/* ---- generate ------------------------------------------------------------ */

static bool bad_float(bool has, float v, float lo, float hi, bool lo_open)
{
    if (!has)
        return false;
    if (!(v >= lo && v <= hi)) /* also NaN */
        return true;
    return lo_open && v == lo;
}

/* Checks what can be checked without the model. Returns an error code and
 * fills msg, or 0. */
/* The chat turns of generate or tokenize. */
static int validate_chat(const Selectinfer__ChatMessages *c, char *msg, size_t cap)
{
    if (!c || c->n_messages == 0) {
        snprintf(msg, cap, "chat has no messages");
        return SELECTINFER__ERROR_CODE__INVALID_ARGUMENT;
    }
    if (c->n_messages > SID_MAX_CHAT_MSGS) {
        snprintf(msg, cap, "chat has %zu messages; at most %d", c->n_messages, SID_MAX_CHAT_MSGS);
        return SELECTINFER__ERROR_CODE__INVALID_ARGUMENT;
    }
    for (size_t i = 0; i < c->n_messages; i++) {
        const Selectinfer__ChatMessage *m = c->messages[i];
        const char *role = m->role;
        if (!role || (strcmp(role, "system") && strcmp(role, "user") && strcmp(role, "assistant") &&
                      strcmp(role, "tool"))) {
            snprintf(msg, cap, "message %zu: role must be system, user, assistant or tool", i);
            return SELECTINFER__ERROR_CODE__INVALID_ARGUMENT;
        }
        if (!m->content) {
            snprintf(msg, cap, "message %zu has no content", i);
            return SELECTINFER__ERROR_CODE__INVALID_ARGUMENT;
        }
        if (m->n_tool_calls > SID_MAX_TOOL_CALLS) {
            snprintf(msg, cap, "message %zu has %zu tool calls; at most %d", i, m->n_tool_calls,
                     SID_MAX_TOOL_CALLS);
            return SELECTINFER__ERROR_CODE__INVALID_ARGUMENT;
        }
        for (size_t j = 0; j < m->n_tool_calls; j++) {
            if (!m->tool_calls[j]->name || !m->tool_calls[j]->name[0]) {
                snprintf(msg, cap, "message %zu: tool call %zu has no name", i, j);
                return SELECTINFER__ERROR_CODE__INVALID_ARGUMENT;
            }
        }
    }
    return 0;
}

static int validate_generate(sid_server *srv, const Selectinfer__Generate *g, char *msg, size_t cap)
{
    if (g->input_case == SELECTINFER__GENERATE__INPUT_PROMPT) {
        if (!g->prompt) {
            snprintf(msg, cap, "prompt is missing");
            return SELECTINFER__ERROR_CODE__INVALID_ARGUMENT;
        }
        if (g->tools && g->tools[0]) {
            snprintf(msg, cap, "tools need chat input");
            return SELECTINFER__ERROR_CODE__INVALID_ARGUMENT;
        }
    } else if (g->input_case == SELECTINFER__GENERATE__INPUT_CHAT) {
        int code = validate_chat(g->chat, msg, cap);
        if (code)
            return code;
    } else {
        snprintf(msg, cap, "generate needs a prompt or chat messages");
        return SELECTINFER__ERROR_CODE__INVALID_ARGUMENT;
    }
    const Selectinfer__Sampling *s = g->sampling;
    if (s) {
        const char *bad = NULL;
        if (bad_float(s->has_temperature, s->temperature, 0.0f, 100.0f, false)) bad = "temperature must be in [0, 100]";
        else if (bad_float(s->has_top_p, s->top_p, 0.0f, 1.0f, true)) bad = "top_p must be in (0, 1]";
        else if (bad_float(s->has_min_p, s->min_p, 0.0f, 1.0f, false) || (s->has_min_p && s->min_p >= 1.0f))
            bad = "min_p must be in [0, 1)";
        else if (bad_float(s->has_repeat_penalty, s->repeat_penalty, 0.0f, 10.0f, true))
            bad = "repeat_penalty must be in (0, 10]";
        else if (bad_float(s->has_frequency_penalty, s->frequency_penalty, -2.0f, 2.0f, false) ||
                 bad_float(s->has_presence_penalty, s->presence_penalty, -2.0f, 2.0f, false))
            bad = "frequency_penalty and presence_penalty must be in [-2, 2]";
        else if (s->n_logit_bias > ENG_MAX_LOGIT_BIAS)
            bad = "at most 1024 logit_bias entries";
        for (size_t i = 0; !bad && i < s->n_logit_bias; i++)
            if (!s->logit_bias[i]->has_token || s->logit_bias[i]->token < 0 ||
                bad_float(true, s->logit_bias[i]->has_bias ? s->logit_bias[i]->bias : NAN, -100.0f, 100.0f, false))
                bad = "a logit_bias entry needs a token >= 0 and a bias in [-100, 100]";
        else if (s->has_top_k && s->top_k > 1000000) bad = "top_k is too large";
        else if (s->has_repeat_last_n && s->repeat_last_n > 1000000) bad = "repeat_last_n is too large";
        if (bad) {
            snprintf(msg, cap, "%s", bad);
            return SELECTINFER__ERROR_CODE__INVALID_ARGUMENT;
        }
    }
    if (g->n_stop > SID_MAX_STOP) {
        snprintf(msg, cap, "%zu stop strings; at most %d", g->n_stop, SID_MAX_STOP);
        return SELECTINFER__ERROR_CODE__INVALID_ARGUMENT;
    }
    for (size_t i = 0; i < g->n_stop; i++) {
        size_t n = g->stop[i] ? strlen(g->stop[i]) : 0;
        if (n == 0 || n > SID_MAX_STOP_LEN) {
            snprintf(msg, cap, "stop string %zu must have 1 to %d bytes", i, SID_MAX_STOP_LEN);
            return SELECTINFER__ERROR_CODE__INVALID_ARGUMENT;
        }
    }
    /* phi against the plan (delta <= phi <= gamma) is checked by the worker,
     * which knows the plan the request will run on */
    if (bad_float(g->has_phi, g->phi, 0.0f, 1.0f, true)) {
        snprintf(msg, cap, "phi must be in (0, 1]");
        return SELECTINFER__ERROR_CODE__INVALID_ARGUMENT;
    }
    if (bad_float(g->has_alpha, g->alpha, 0.0f, 1.0f, true)) {
        snprintf(msg, cap, "alpha must be in (0, 1]");
        return SELECTINFER__ERROR_CODE__INVALID_ARGUMENT;
    }
    if (g->task && strlen(g->task) >= SID_TASK_MAX) {
        snprintf(msg, cap, "task names have at most %d bytes", SID_TASK_MAX - 1);
        return SELECTINFER__ERROR_CODE__INVALID_ARGUMENT;
    }
    if (g->has_top_logprobs && g->top_logprobs > ENG_MAX_TOP_PROBS) {
        snprintf(msg, cap, "top_logprobs must be in [0, %d]", ENG_MAX_TOP_PROBS);
        return SELECTINFER__ERROR_CODE__INVALID_ARGUMENT;
    }
    eng_format format;
    if (g->format && g->format[0] == '{') {
        /* a JSON Schema: one the engine can follow, else why not */
        char why[256];
        int r = eng_json_schema_check(g->format, why, sizeof(why));
        if (r < 0) {
            snprintf(msg, cap, "format: %s", why);
            return r == -ENOTSUP ? SELECTINFER__ERROR_CODE__NOT_SUPPORTED : SELECTINFER__ERROR_CODE__INVALID_ARGUMENT;
        }
    } else if (g->format && g->format[0] && eng_format_parse(g->format, &format) < 0) {
        snprintf(msg, cap, "format must be \"json\", \"text\" or a JSON Schema");
        return SELECTINFER__ERROR_CODE__INVALID_ARGUMENT;
    }
    (void)srv;
    return 0;
}

static sid_req *find_req(sid_conn *c, uint64_t id)
{
    for (sid_req *r = c->reqs; r; r = r->next)
        if (r->id == id)
            return r;
    return NULL;
}

/* Queues a request for the inference thread (generate, embed) once it
 * passed its own checks: takes msg. */
static void submit(sid_server *srv, sid_conn *c, Selectinfer__Request *msg, enum sid_req_kind kind)
{
    uint64_t id = msg->id;
    if (srv->stopping) {
        send_error(c, id, SELECTINFER__ERROR_CODE__SHUTTING_DOWN, "the daemon is shutting down");
        si_message_free(&msg->base);
        return;
    }
    if (srv->state == SELECTINFER__DAEMON_STATE__STATE_FAILED) {
        send_error(c, id, SELECTINFER__ERROR_CODE__NOT_READY, "%s", srv->load_error);
        si_message_free(&msg->base);
        return;
    }
    if (find_req(c, id)) {
        send_error(c, id, SELECTINFER__ERROR_CODE__DUPLICATE_ID,
                   "request id %llu is already in flight", (unsigned long long)id);
        si_message_free(&msg->base);
        return;
    }
    if (c->n_reqs >= srv->cfg.max_pending) {
        srv->n.rejected_overloaded++;
        send_error(c, id, SELECTINFER__ERROR_CODE__OVERLOADED,
                   "this connection has %u requests in flight (max_pending %u)", c->n_reqs, srv->cfg.max_pending);
        si_message_free(&msg->base);
        return;
    }
    sid_req *req = req_new();
    if (!req) {
        send_error(c, id, SELECTINFER__ERROR_CODE__INTERNAL, "out of memory");
        si_message_free(&msg->base);
        return;
    }
    req->conn = c;
    req->id = id;
    req->msg = msg;
    req->kind = kind;
    req->top_logprobs = -1;
    if (kind == SID_REQ_EMBED) {
        req->embed = msg->embed;
    } else {
        const Selectinfer__Generate *gm = msg->generate;
        req->gen = gm;
        req->stream = !gm->has_stream || gm->stream;
        req->top_logprobs = gm->has_top_logprobs && gm->top_logprobs > 0 ? (int)gm->top_logprobs
                            : gm->has_logprobs && gm->logprobs                 ? 0
                                                                               : -1;
        req->max_tokens = gm->has_max_tokens && gm->max_tokens > 0 ? gm->max_tokens : srv->cfg.max_tokens;
        req->task_switch = srv->cfg.task_switch;
    }
    req->t_queued = now_ns();
    atomic_init(&req->cancelled, false);

    pthread_mutex_lock(&srv->mu);
    size_t qlen = sid_queue_len(&srv->queue);
    int rc = qlen >= srv->cfg.max_queue ? -EAGAIN : sid_queue_push(&srv->queue, c, &req->q);
    if (rc == 0)
        pthread_cond_signal(&srv->cv);
    pthread_mutex_unlock(&srv->mu);
    if (rc < 0) {
        if (rc == -EAGAIN) {
            srv->n.rejected_overloaded++;
            sid_log_once(&srv->once_queue_cap, SID_LOG_WARNING,
                         "Request queue full (max_queue %u): refusing requests with OVERLOADED", srv->cfg.max_queue);
            send_error(c, id, SELECTINFER__ERROR_CODE__OVERLOADED,
                       "the queue is full (%zu requests waiting); retry later", qlen);
        } else {
            send_error(c, id, SELECTINFER__ERROR_CODE__INTERNAL, "out of memory");
        }
        sid_req_free(req);
        return;
    }
    req->next = c->reqs;
    c->reqs = req;
    c->n_reqs++;
}

static void handle_generate(sid_server *srv, sid_conn *c, Selectinfer__Request *msg)
{
    char why[512];
    int code = validate_generate(srv, msg->generate, why, sizeof(why));
    if (code) {
        srv->n.requests_failed++;
        send_error(c, msg->id, code, "%s", why);
        si_message_free(&msg->base);
        return;
    }
    submit(srv, c, msg, SID_REQ_GENERATE);
}

/* ---- embed --------------------------------------------------------------- */

static int validate_embed(const Selectinfer__Embed *e, char *msg, size_t cap)
{
    if (e->n_input == 0 || e->n_input > SID_MAX_EMBED_INPUTS) {
        snprintf(msg, cap, "embed takes 1 to %d inputs, not %zu", SID_MAX_EMBED_INPUTS, e->n_input);
        return SELECTINFER__ERROR_CODE__INVALID_ARGUMENT;
    }
    for (size_t i = 0; i < e->n_input; i++)
        if (!e->input[i] || !e->input[i][0]) {
            snprintf(msg, cap, "input %zu is empty", i);
            return SELECTINFER__ERROR_CODE__INVALID_ARGUMENT;
        }
    eng_pooling pool;
    if (e->pooling && e->pooling[0] && eng_pooling_parse(e->pooling, &pool) < 0) {
        snprintf(msg, cap, "pooling must be \"mean\" or \"last\"");
        return SELECTINFER__ERROR_CODE__INVALID_ARGUMENT;
    }
    return 0;
}

static void handle_embed(sid_server *srv, sid_conn *c, Selectinfer__Request *msg)
{
    char why[512];
    int code = validate_embed(msg->embed, why, sizeof(why));
    if (code) {
        srv->n.requests_failed++;
        send_error(c, msg->id, code, "%s", why);
        si_message_free(&msg->base);
        return;
    }
    submit(srv, c, msg, SID_REQ_EMBED);
}

static void handle_cancel(sid_server *srv, sid_conn *c, uint64_t id, const Selectinfer__Cancel *m)
{
    uint64_t target = m->has_request_id ? m->request_id : 0;
    sid_req *req = NULL;
    for (sid_req *r = c->reqs; r; r = r->next)
        if (r->id == target)
            req = r;
    if (!req) {
        send_error(c, id, SELECTINFER__ERROR_CODE__NOT_FOUND,
                   "no request %llu in flight on this connection", (unsigned long long)target);
        return;
    }
    if (req->kind == SID_REQ_SWAP) {
        send_error(c, id, SELECTINFER__ERROR_CODE__INVALID_ARGUMENT,
                   "request %llu is a profile swap; swaps cannot be cancelled", (unsigned long long)target);
        return;
    }
    pthread_mutex_lock(&srv->mu);
    bool queued = req->q.lane != NULL;
    if (queued)
        sid_queue_remove(&srv->queue, &req->q);
    else
        atomic_store(&req->cancelled, true);
    pthread_mutex_unlock(&srv->mu);
    send_ack(c, id, queued ? "cancelled while queued" : "cancelling");
    if (queued)
        finish_unrun(srv, req, 0, NULL);
}

/* ---- tokenize ------------------------------------------------------------ */

/* Answered on the loop, not queued: it reads only the vocabulary and the
 * template (sid_input_tokens), and the model stays until the worker is
 * told to stop, which only this thread does, after leaving STATE_READY.
 * Its input is bounded by max_frame, so it holds the loop for at most a
 * frame's worth of tokenizing (~0.1 s for 1 MiB here). */
static void handle_tokenize(sid_server *srv, sid_conn *c, uint64_t id, const Selectinfer__Tokenize *t)
{
    char msg[512];
    if (srv->state != SELECTINFER__DAEMON_STATE__STATE_READY) {
        send_error(c, id, srv->state == SELECTINFER__DAEMON_STATE__STATE_STOPPING
                              ? SELECTINFER__ERROR_CODE__SHUTTING_DOWN
                              : SELECTINFER__ERROR_CODE__NOT_READY,
                   "%s", srv->state == SELECTINFER__DAEMON_STATE__STATE_LOADING ? "the model is still loading"
                         : srv->state == SELECTINFER__DAEMON_STATE__STATE_FAILED  ? "the model failed to load"
                                                                                   : "the daemon is stopping");
        return;
    }
    const bool chat = t->input_case == SELECTINFER__TOKENIZE__INPUT_CHAT;
    if (t->input_case == SELECTINFER__TOKENIZE__INPUT_PROMPT ? !t->prompt : !chat) {
        send_error(c, id, SELECTINFER__ERROR_CODE__INVALID_ARGUMENT, "tokenize needs a prompt or chat messages");
        return;
    }
    int code = chat ? validate_chat(t->chat, msg, sizeof(msg)) : 0;
    if (!chat && t->tools && t->tools[0]) {
        snprintf(msg, sizeof(msg), "tools need chat input");
        code = SELECTINFER__ERROR_CODE__INVALID_ARGUMENT;
    }
    int32_t *ids = NULL;
    size_t n = 0;
    if (!code)
        code = sid_input_tokens(srv->model, t->prompt, chat ? t->chat : NULL, chat ? t->tools : NULL,
                                t->has_parse_special && t->parse_special, t->has_think && !t->think, &ids, &n,
                                msg, sizeof(msg));
    if (code) {
        send_error(c, id, code, "%s", msg);
        return;
    }
    Selectinfer__Tokens tk = SELECTINFER__TOKENS__INIT;
    tk.n_ids = n;
    tk.ids = ids;
    tk.has_n_ctx = true;
    tk.n_ctx = (uint32_t)srv->n_ctx;
    ProtobufCBinaryData *pieces = NULL;
    char *bytes = NULL;
    bool ok = true;
    if (t->has_pieces && t->pieces && n > 0) {
        /* each piece's bytes into one buffer, then pointers into it */
        size_t total = 0, at = 0;
        char probe[1];
        for (size_t i = 0; i < n; i++) {
            int len = eng_token_to_piece(srv->model, ids[i], true, probe, 0);
            total += len > 0 ? (size_t)len : 0;
        }
        pieces = calloc(n, sizeof(*pieces));
        bytes = malloc(total + 1);
        ok = pieces && bytes;
        for (size_t i = 0; ok && i < n; i++) {
            int len = eng_token_to_piece(srv->model, ids[i], true, bytes + at, total + 1 - at);
            len = len > 0 && (size_t)len <= total - at ? len : 0;
            pieces[i].data = (uint8_t *)bytes + at;
            pieces[i].len = (size_t)len;
            at += (size_t)len;
        }
        tk.n_pieces = n;
        tk.pieces = pieces;
    }
    Selectinfer__Response r = reply(id, SELECTINFER__RESPONSE__BODY_TOKENS);
    r.tokens = &tk;
    if (!ok)
        send_error(c, id, SELECTINFER__ERROR_CODE__INTERNAL, "%s", "out of memory");
    else if (selectinfer__response__get_packed_size(&r) > SID_MAX_REPLY)
        send_error(c, id, SELECTINFER__ERROR_CODE__INVALID_ARGUMENT,
                   "%zu tokens: the reply would pass %u MiB; ask without pieces, or in parts", n,
                   SID_MAX_REPLY >> 20);
    else
        send_response(c, &r);
    free(pieces);
    free(bytes);
    free(ids);
}

/* ---- frames in ----------------------------------------------------------- */

static void handle_request(sid_server *srv, sid_conn *c, Selectinfer__Request *msg)
{
    uint64_t id = msg->has_id ? msg->id : 0;
    if (id == 0) {
        send_error(c, 0, SELECTINFER__ERROR_CODE__INVALID_ARGUMENT, "a request needs a nonzero id");
        si_message_free(&msg->base);
        return;
    }
    char text[512];
    switch (msg->body_case) {
    case SELECTINFER__REQUEST__BODY_GENERATE:
        handle_generate(srv, c, msg); /* takes msg */
        return;
    case SELECTINFER__REQUEST__BODY_CANCEL:
        handle_cancel(srv, c, id, msg->cancel);
        break;
    case SELECTINFER__REQUEST__BODY_STATUS:
        handle_status(srv, c, id);
        break;
    case SELECTINFER__REQUEST__BODY_LIST_PROFILES:
        handle_list_profiles(srv, c, id);
        break;
    case SELECTINFER__REQUEST__BODY_USE_PROFILE:
        if (require_admin(c, id, "use_profile")) {
            use_profile(srv, c, msg); /* takes msg */
            return;
        }
        break;
    case SELECTINFER__REQUEST__BODY_RELOAD:
        if (require_admin(c, id, "reload")) {
            if (server_reload(srv, text, sizeof(text)) < 0)
                send_error(c, id, SELECTINFER__ERROR_CODE__INVALID_ARGUMENT, "reload failed: %s", text);
            else
                send_ack(c, id, text);
        }
        break;
    case SELECTINFER__REQUEST__BODY_TOKENIZE:
        handle_tokenize(srv, c, id, msg->tokenize);
        break;
    case SELECTINFER__REQUEST__BODY_EMBED:
        handle_embed(srv, c, msg); /* takes msg */
        return;
    case SELECTINFER__REQUEST__BODY_SHUTDOWN:
        if (require_admin(c, id, "shutdown")) {
            sid_info("Shutdown requested by client %llu (pid %d, uid %u)",
                     (unsigned long long)c->serial, (int)c->pid, (unsigned)c->uid);
            send_ack(c, id, "shutting down");
            sid_server_stop(srv, 0);
        }
        break;
    default:
        /* a request type from a newer protocol decodes as an unknown field */
        send_error(c, id, SELECTINFER__ERROR_CODE__NOT_SUPPORTED, "unknown request type");
        break;
    }
    si_message_free(&msg->base);
}

static void on_alloc(uv_handle_t *h, size_t suggested, uv_buf_t *buf)
{
    /* One buffer for all connections: read callbacks consume it at once. */
    static char rbuf[64 * 1024];
    buf->base = rbuf;
    buf->len = sizeof(rbuf);
}

static void on_read(uv_stream_t *s, ssize_t nread, const uv_buf_t *buf)
{
    sid_conn *c = s->data;
    sid_server *srv = c->srv;
    if (nread == 0 || c->closing)
        return;
    if (nread < 0) {
        conn_drop(c, nread == UV_EOF ? "disconnected" : uv_strerror((int)nread));
        return;
    }
    int rc = si_frame_reader_feed(&c->rd, buf->base, (size_t)nread);
    const uint8_t *p;
    size_t len;
    while (rc >= 0 && !c->closing && (rc = si_frame_reader_next(&c->rd, &p, &len)) == 1) {
        Selectinfer__Request *msg =
            (Selectinfer__Request *)si_unpack(&selectinfer__request__descriptor, p, len, 0);
        if (!msg) {
            srv->n.clients_dropped++;
            sid_log_once(&srv->once_frame, SID_LOG_WARNING,
                         "Client %llu (pid %d) sent a frame that does not decode; closing it",
                         (unsigned long long)c->serial, (int)c->pid);
            send_error(c, 0, SELECTINFER__ERROR_CODE__MALFORMED_FRAME,
                       "the frame of %zu bytes is not a valid Request", len);
            conn_close_after_flush(c, "malformed frame");
            return;
        }
        handle_request(srv, c, msg);
    }
    if (rc == -EMSGSIZE && !c->closing) {
        srv->n.clients_dropped++;
        sid_log_once(&srv->once_frame, SID_LOG_WARNING,
                     "Client %llu (pid %d) sent a frame over max_frame (%u bytes); closing it",
                     (unsigned long long)c->serial, (int)c->pid, srv->cfg.max_frame);
        send_error(c, 0, SELECTINFER__ERROR_CODE__FRAME_TOO_LARGE,
                   "frames are limited to %u bytes", srv->cfg.max_frame);
        conn_close_after_flush(c, "frame too large");
    } else if (rc < 0 && !c->closing) {
        conn_drop(c, strerror(-rc));
    }
}

static void peer_credentials(sid_server *srv, sid_conn *c)
{
    uv_os_fd_t fd;
    c->uid = (uid_t)-1;
    c->gid = (gid_t)-1;
    if (uv_fileno((uv_handle_t *)&c->pipe, &fd) < 0)
        return;
    struct ucred cr;
    socklen_t len = sizeof(cr);
    if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cr, &len) < 0)
        return;
    if (srv->cfg.client_socket_buffer > 0) {
        /* bounds what the kernel holds for a client that does not read */
        int sz = (int)srv->cfg.client_socket_buffer;
        setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &sz, sizeof(sz));
    }
    c->pid = cr.pid;
    c->uid = cr.uid;
    c->gid = cr.gid;
    c->admin = cr.uid == 0 || cr.uid == geteuid();
    if (!c->admin && srv->admin_gid != (gid_t)-1) {
        if (cr.gid == srv->admin_gid) {
            c->admin = true;
        } else {
#ifdef SO_PEERGROUPS
            gid_t groups[256];
            socklen_t gl = sizeof(groups);
            if (getsockopt(fd, SOL_SOCKET, SO_PEERGROUPS, groups, &gl) == 0)
                for (size_t i = 0; i < gl / sizeof(gid_t); i++)
                    if (groups[i] == srv->admin_gid)
                        c->admin = true;
#endif
        }
    }
}

static void on_connection(uv_stream_t *server, int status)
{
    sid_server *srv = server->data;
    if (status < 0) {
        sid_warn("accept: %s", uv_strerror(status));
        return;
    }
    sid_conn *c = calloc(1, sizeof(*c));
    if (!c)
        return;
    c->srv = srv;
    c->serial = ++srv->next_serial;
    si_frame_reader_init(&c->rd, srv->cfg.max_frame);
    uv_pipe_init(srv->loop, &c->pipe, 0);
    c->pipe.data = c;
    c->next = srv->conns;
    if (srv->conns)
        srv->conns->prev = c;
    srv->conns = c;
    srv->n_conns++;
    if (uv_accept(server, (uv_stream_t *)&c->pipe) < 0) {
        conn_drop(c, "accept failed");
        return;
    }
    peer_credentials(srv, c);
    sid_debug("client %llu connected (pid %d, uid %u%s)", (unsigned long long)c->serial, (int)c->pid,
              (unsigned)c->uid, c->admin ? ", admin" : "");
    if (srv->n_conns > srv->cfg.max_connections || srv->stopping) {
        if (!srv->stopping) {
            srv->n.clients_dropped++;
            sid_log_once(&srv->once_conn_cap, SID_LOG_WARNING,
                         "Connection limit reached (max_connections %u): refusing clients",
                         srv->cfg.max_connections);
        }
        send_error(c, 0, srv->stopping ? SELECTINFER__ERROR_CODE__SHUTTING_DOWN
                                       : SELECTINFER__ERROR_CODE__TOO_MANY_CONNECTIONS,
                   "%u connections open (max_connections %u)", srv->n_conns - 1, srv->cfg.max_connections);
        conn_close_after_flush(c, "too many connections");
        return;
    }
    uv_read_start((uv_stream_t *)&c->pipe, on_alloc, on_read);
}

/* ---- events from the worker --------------------------------------------- */

static void on_watchdog(uv_timer_t *t);

static void on_loaded(sid_server *srv)
{
    if (srv->load_rc < 0) {
        srv->state = SELECTINFER__DAEMON_STATE__STATE_FAILED;
        sid_err("%s", srv->load_error);
        notify_status("%s", srv->load_error);
        sid_server_stop(srv, 1);
        return;
    }
    if (srv->stopping)
        return;
    srv->state = SELECTINFER__DAEMON_STATE__STATE_READY;
    const sid_plan *p = &srv->plan;
    char slots[32] = "";
    if (srv->n_slots > 1)
        snprintf(slots, sizeof(slots), " x %d slots", srv->n_slots);
    sid_info("Ready: model '%s' (%s, %d layers, %.1f MiB of weights, FFN in %s, loaded in %.1f ms), "
             "backend %s, context %d%s, %s%s%s (mode %s, gamma %.2f, delta %.2f, %llu of %llu FFN "
             "neurons)",
             srv->info.name[0] ? srv->info.name : srv->cfg.model, srv->info.arch, srv->info.n_layer,
             (double)p->weight_bytes / (1024.0 * 1024.0), eng_dtype_name(srv->info.ffn_dtype),
             (double)srv->load_ns / 1e6, srv->backend,
             srv->n_ctx, slots, sid_plan_name(p), p->path[0] ? " from " : "", p->path, eng_select_mode_name(p->mode),
             (double)p->gamma, (double)p->delta, (unsigned long long)p->neurons_loaded,
             (unsigned long long)p->neurons_total);
    notify("READY=1");
    /* systemd watches from the end of start-up: pings from now on */
    if (srv->watchdog_usec) {
        const uint64_t ms = srv->watchdog_usec / 2000;
        uv_timer_start(&srv->watchdog, on_watchdog, ms, ms);
        sid_debug("Watchdog: a ping every %llu ms", (unsigned long long)ms);
    }
    notify_status("Ready, profile %s", sid_plan_name(p));
}

static void finish_shutdown(sid_server *srv);

static void on_async(uv_async_t *a)
{
    sid_server *srv = a->data;
    pthread_mutex_lock(&srv->mu);
    sid_event *ev = srv->out_head;
    srv->out_head = srv->out_tail = NULL;
    pthread_mutex_unlock(&srv->mu);
    while (ev) {
        sid_event *next = ev->next;
        switch (ev->type) {
        case SID_EV_CHUNK:
            send_chunk(srv, ev->req->conn, ev->req->id, ev->data, ev->len, &ev->lps);
            break;
        case SID_EV_DONE: {
            sid_req *req = ev->req;
            sid_conn *c = req->conn;
            /* what the context slots hold, for status: a swap emptied them */
            if (req->swap)
                memset(srv->slot_held, 0, sizeof(srv->slot_held));
            if (req->slot >= 0 && req->slot < SID_MAX_SLOTS) {
                srv->slot_held[req->slot] = req->slot_held;
                srv->slot_copy[req->slot] = req->slot_copy; /* a swap keeps the buffers */
            }
            send_done(srv, req);
            conn_unlink_req(c, req);
            sid_req_free(req);
            conn_maybe_free(c);
            break;
        }
        case SID_EV_LOADED:
            on_loaded(srv);
            break;
        case SID_EV_EXITED:
            sid_worker_join(srv);
            finish_shutdown(srv);
            break;
        }
        sid_event_free(ev);
        ev = next;
    }
}

/* ---- timers and signals --------------------------------------------------- */

/* Nanoseconds since the inference thread's last sign of life. */
static uint64_t beat_age(sid_server *srv)
{
    const uint64_t now = eng_time_ns(), beat = atomic_load(&srv->beat_ns);
    return now > beat ? now - beat : 0;
}

/* While the model loads and its layers keep coming (the worker's beat at
 * every layer), the start timeout is pushed 30 s on every 5 s, so a slow
 * but moving load of a large model is not killed at TimeoutStartSec; a
 * load stuck for 10 s stops the extensions. */
static void extend_start_timeout(sid_server *srv)
{
    const uint64_t now = eng_time_ns();
    if (srv->state != SELECTINFER__DAEMON_STATE__STATE_LOADING || now - srv->extended_ns < 5000000000ull ||
        beat_age(srv) > 10000000000ull)
        return;
    srv->extended_ns = now;
    notify("EXTEND_TIMEOUT_USEC=30000000");
}

static void on_housekeeping(uv_timer_t *t)
{
    sid_server *srv = t->data;
    extend_start_timeout(srv);
    uint64_t now = now_ns(), limit = (uint64_t)srv->cfg.client_write_timeout_ms * 1000000ull;
    sid_conn *next;
    for (sid_conn *c = srv->conns; c; c = next) {
        next = c->next;
        if (!c->stall_since || now - c->stall_since <= limit || uv_is_closing((uv_handle_t *)&c->pipe))
            continue;
        if (!c->closing) {
            srv->n.clients_dropped++;
            sid_log_once(&srv->once_slow, SID_LOG_WARNING,
                         "Client %llu (pid %d) has not read for %u ms (client_write_timeout_ms); dropping it",
                         (unsigned long long)c->serial, (int)c->pid, srv->cfg.client_write_timeout_ms);
        }
        conn_drop(c, "write timeout");
    }
}

/* WATCHDOG=1 at half the interval, but only while the inference thread
 * is idle or showed progress within the interval: a request stuck in one
 * engine call (a hung GPU call) stops the pings, and systemd restarts
 * the daemon. */
static void on_watchdog(uv_timer_t *t)
{
    sid_server *srv = t->data;
    const uint64_t age = beat_age(srv);
    if (!atomic_load(&srv->worker_busy) || age < srv->watchdog_usec * 1000ull) {
        notify("WATCHDOG=1");
        srv->once_silent = false;
        return;
    }
    sid_log_once(&srv->once_silent, SID_LOG_ERR,
                 "The inference thread has shown no progress for %.1f s; watchdog pings withheld",
                 (double)age / 1e9);
}

static void on_signal(uv_signal_t *s, int signum)
{
    sid_server *srv = s->data;
    if (signum == SIGHUP) {
        char msg[512];
        sid_info("SIGHUP: reloading the configuration");
        server_reload(srv, msg, sizeof(msg));
        return;
    }
    sid_info("%s: shutting down", signum == SIGINT ? "SIGINT" : "SIGTERM");
    sid_server_stop(srv, 0);
}

static void on_force_close(uv_timer_t *t)
{
    sid_server *srv = t->data;
    sid_conn *next;
    for (sid_conn *c = srv->conns; c; c = next) {
        next = c->next;
        conn_drop(c, "shutdown");
    }
}

/* At exit: closes every handle still open (connections through conn_drop,
 * so their bookkeeping stays right). */
static void close_walk(uv_handle_t *h, void *arg)
{
    if (uv_is_closing(h))
        return;
    if (h->type == UV_NAMED_PIPE && h->data && h->data != arg) {
        conn_drop(h->data, "shutdown");
        return;
    }
    uv_close(h, NULL);
}

/* ---- start-up and shutdown ------------------------------------------------ */

/* Starts stopping: no new connections or requests, the queue is emptied,
 * the running request is cancelled, the worker told to exit. The rest
 * happens in finish_shutdown() once the worker has exited. */
static void sid_server_stop(sid_server *srv, int exit_code)
{
    if (srv->stopping)
        return;
    srv->stopping = true;
    srv->exit_code = exit_code;
    if (srv->state != SELECTINFER__DAEMON_STATE__STATE_FAILED)
        srv->state = SELECTINFER__DAEMON_STATE__STATE_STOPPING;
    notify("STOPPING=1");
    if (srv->listening) {
        uv_close((uv_handle_t *)&srv->listener, NULL);
        srv->listening = false;
    }
    pthread_mutex_lock(&srv->mu);
    sid_req *unrun = NULL;
    sid_qitem *it;
    while ((it = sid_queue_pop(&srv->queue))) {
        sid_req *r = (sid_req *)it;
        r->q.next = (sid_qitem *)unrun;
        unrun = r;
    }
    while (srv->swaps_head) {
        sid_req *r = srv->swaps_head;
        srv->swaps_head = r->swap_next;
        r->swap_queued = false;
        r->q.next = (sid_qitem *)unrun;
        unrun = r;
    }
    srv->swaps_tail = NULL;
    if (srv->running)
        atomic_store(&srv->running->cancelled, true);
    atomic_store(&srv->stop_worker, true);
    pthread_cond_broadcast(&srv->cv);
    pthread_mutex_unlock(&srv->mu);
    while (unrun) {
        sid_req *next = (sid_req *)unrun->q.next;
        unrun->q.next = NULL;
        finish_unrun(srv, unrun, exit_code == 0 ? SELECTINFER__ERROR_CODE__SHUTTING_DOWN
                                                : SELECTINFER__ERROR_CODE__NOT_READY,
                     exit_code == 0 ? "the daemon is shutting down" : srv->load_error);
        unrun = next;
    }
    uv_signal_stop(&srv->sig_int);
    uv_signal_stop(&srv->sig_term);
}

static void finish_shutdown(sid_server *srv)
{
    /* The worker is gone: flush the last replies to every client, then
     * close everything. A client that does not read gets 2 s. */
    sid_conn *next;
    for (sid_conn *c = srv->conns; c; c = next) {
        next = c->next;
        conn_close_after_flush(c, "shutdown");
    }
    uv_close((uv_handle_t *)&srv->async, NULL);
    uv_close((uv_handle_t *)&srv->sig_int, NULL);
    uv_close((uv_handle_t *)&srv->sig_term, NULL);
    uv_close((uv_handle_t *)&srv->sig_hup, NULL);
    uv_close((uv_handle_t *)&srv->housekeeping, NULL);
    uv_close((uv_handle_t *)&srv->watchdog, NULL);
    uv_timer_start(&srv->force_close, on_force_close, 2000, 0);
    uv_unref((uv_handle_t *)&srv->force_close); /* does not keep the loop alive */
}

/* Connects to path to see whether a daemon is listening there. */
static bool socket_in_use(const char *path)
{
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return false;
    struct sockaddr_un sa = {.sun_family = AF_UNIX};
    snprintf(sa.sun_path, sizeof(sa.sun_path), "%s", path);
    bool used = connect(fd, (struct sockaddr *)&sa, sizeof(sa)) == 0;
    close(fd);
    return used;
}

static int default_socket_path(char *buf, size_t cap)
{
    if (geteuid() == 0) {
        mkdir("/run/selectinfer", 0755); /* systemd's RuntimeDirectory= makes it otherwise */
        return snprintf(buf, cap, "%s", SID_DEFAULT_SOCKET) < (int)cap ? 0 : -ENAMETOOLONG;
    }
    const char *xdg = getenv("XDG_RUNTIME_DIR");
    if (!xdg || xdg[0] != '/')
        return -ENOENT;
    return snprintf(buf, cap, "%s/selectinfer.sock", xdg) < (int)cap ? 0 : -ENAMETOOLONG;
}

static int server_listen(sid_server *srv)
{
    uv_pipe_init(srv->loop, &srv->listener, 0);
    srv->listener.data = srv;
#ifdef HAVE_SYSTEMD
    int n = sd_listen_fds(1);
    if (n > 1) {
        sid_err("systemd passed %d sockets; expected one", n);
        return -EINVAL;
    }
    if (n == 1) {
        int fd = SD_LISTEN_FDS_START;
        if (sd_is_socket_unix(fd, SOCK_STREAM, 1, NULL, 0) <= 0) {
            sid_err("The socket systemd passed is not a listening Unix stream socket");
            return -EINVAL;
        }
        int rc = uv_pipe_open(&srv->listener, fd);
        if (rc < 0) {
            sid_err("Cannot use the socket systemd passed: %s", uv_strerror(rc));
            return rc;
        }
        srv->socket_activated = true;
        rc = uv_listen((uv_stream_t *)&srv->listener, 128, on_connection);
        if (rc < 0) {
            sid_err("listen: %s", uv_strerror(rc));
            return rc;
        }
        srv->listening = true;
        sid_info("Listening on the socket passed by systemd");
        return 0;
    }
#endif
    char path[SID_SOCKET_PATH_MAX];
    if (srv->cfg.socket[0]) {
        snprintf(path, sizeof(path), "%s", srv->cfg.socket);
    } else if (default_socket_path(path, sizeof(path)) < 0) {
        sid_err("No socket path: set socket = ... or --socket (XDG_RUNTIME_DIR is unset for a non-root daemon)");
        return -EINVAL;
    }
    struct stat st;
    if (lstat(path, &st) == 0) {
        if (!S_ISSOCK(st.st_mode)) {
            sid_err("'%s' exists and is not a socket; refusing to replace it", path);
            return -EEXIST;
        }
        if (socket_in_use(path)) {
            sid_err("Another daemon is listening on '%s'", path);
            return -EADDRINUSE;
        }
        unlink(path); /* stale, from a daemon that did not exit cleanly */
    }
    /* Create the socket with mode 0660 at once (no window where everyone may
     * connect), then set it explicitly: the umask only takes bits away. */
    mode_t old = umask(0117);
    int rc = uv_pipe_bind(&srv->listener, path);
    umask(old);
    if (rc < 0) {
        sid_err("Cannot bind '%s': %s", path, uv_strerror(rc));
        return rc;
    }
    snprintf(srv->socket_path, sizeof(srv->socket_path), "%s", path);
    if (chmod(path, 0660) < 0)
        sid_warn("chmod 0660 '%s': %s", path, strerror(errno));
    if (srv->cfg.socket_group[0]) {
        gid_t g = resolve_group(srv->cfg.socket_group);
        if (g != (gid_t)-1 && chown(path, (uid_t)-1, g) < 0)
            sid_warn("chown '%s' to group '%s': %s", path, srv->cfg.socket_group, strerror(errno));
    }
    rc = uv_listen((uv_stream_t *)&srv->listener, 128, on_connection);
    if (rc < 0) {
        sid_err("listen on '%s': %s", path, uv_strerror(rc));
        return rc;
    }
    srv->listening = true;
    sid_info("Listening on %s", path);
    return 0;
}

int sid_daemon_run(const sid_config *cfg, const char *config_file,
                   const sid_override *ov, size_t n_ov)
{
    sid_server *srv = calloc(1, sizeof(*srv));
    if (!srv)
        return 1;
    uv_loop_t loop;
    if (uv_loop_init(&loop) < 0) {
        free(srv);
        return 1;
    }
    signal(SIGPIPE, SIG_IGN);
    srv->loop = &loop;
    srv->cfg = *cfg;
    srv->wcfg = *cfg;
    srv->config_file = config_file;
    srv->overrides = ov;
    srv->n_overrides = n_ov;
    srv->t_start = now_ns();
    srv->state = SELECTINFER__DAEMON_STATE__STATE_LOADING;
    srv->admin_gid = resolve_group(cfg->admin_group);
    sid_log_set_level(cfg->log_level);
    pthread_mutex_init(&srv->mu, NULL);
    pthread_cond_init(&srv->cv, NULL);
    sid_queue_init(&srv->queue);
    atomic_init(&srv->stop_worker, false);

    uv_async_init(&loop, &srv->async, on_async);
    srv->async.data = srv;
    uv_signal_init(&loop, &srv->sig_int);
    uv_signal_init(&loop, &srv->sig_term);
    uv_signal_init(&loop, &srv->sig_hup);
    srv->sig_int.data = srv->sig_term.data = srv->sig_hup.data = srv;
    uv_timer_init(&loop, &srv->housekeeping);
    uv_timer_init(&loop, &srv->force_close);
    uv_timer_init(&loop, &srv->watchdog);
    srv->housekeeping.data = srv->force_close.data = srv->watchdog.data = srv;
    atomic_init(&srv->worker_busy, false);
    atomic_init(&srv->beat_ns, eng_time_ns());
#ifdef HAVE_SYSTEMD
    {
        uint64_t usec = 0;
        if (sd_watchdog_enabled(0, &usec) > 0 && usec >= 2000)
            srv->watchdog_usec = usec;
    }
#endif

    /* Phase 1: the socket, so that clients can ask for status while the
     * model loads. */
    notify_status("%s", "Opening the socket");
    int rc = server_listen(srv);
    if (rc == 0) {
        uv_signal_start(&srv->sig_int, on_signal, SIGINT);
        uv_signal_start(&srv->sig_term, on_signal, SIGTERM);
        uv_signal_start(&srv->sig_hup, on_signal, SIGHUP);
        uv_timer_start(&srv->housekeeping, on_housekeeping, 250, 250);
        /* Phase 2: the model, on the inference thread; on_loaded() is the
         * readiness point (READY=1). */
        notify_status("Loading model %s", srv->cfg.model);
        sid_info("Loading model %s", srv->cfg.model);
        rc = sid_worker_start(srv);
        if (rc < 0)
            sid_err("Cannot start the inference thread: %s", strerror(-rc));
    }
    if (rc < 0) {
        srv->exit_code = 1;
        if (srv->listening)
            uv_close((uv_handle_t *)&srv->listener, NULL);
        srv->listening = false;
        uv_walk(&loop, close_walk, srv);
    }
    uv_run(&loop, UV_RUN_DEFAULT);

    /* Whatever is left (the unref'd force-close timer, connections still
     * flushing at the deadline) is closed now. */
    uv_walk(&loop, close_walk, srv);
    uv_run(&loop, UV_RUN_DEFAULT);
    int exit_code = srv->exit_code;
    if (uv_loop_close(&loop) != 0) {
        sid_err("The event loop still had open handles at exit");
        exit_code = exit_code ? exit_code : 70;
    }
    sid_worker_join(srv);
    if (srv->socket_path[0] && !srv->socket_activated)
        unlink(srv->socket_path);
    sid_queue_clear(&srv->queue);
    sid_event *ev = srv->out_head;
    while (ev) {
        sid_event *next = ev->next;
        sid_event_free(ev);
        ev = next;
    }
    pthread_mutex_destroy(&srv->mu);
    pthread_cond_destroy(&srv->cv);
    free(srv);
    sid_info("Stopped");
    return exit_code;
}
