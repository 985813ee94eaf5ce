/* selectinferd's internals, shared by server.c (the libuv loop: sockets,
 * framing, dispatch, status) and worker.c (the inference thread).
 *
 * Threads and ownership:
 * - The loop thread owns connections, the configuration and the counters.
 * - The inference thread owns the model and the session. It loads the model
 *   once at start-up (the loop already answers status with "loading"), then
 *   takes requests off the fair queue one at a time.
 * - Between them: srv->mu guards the queue, srv->running, the outbox and
 *   stop_worker. Results travel back as events on the outbox followed by
 *   uv_async_send (sends coalesce: the callback drains the whole outbox).
 * - A request belongs to its connection; once queued, only the loop frees
 *   it: when it is taken off the queue by the loop (cancel, disconnect,
 *   shutdown) or when the worker hands it back with an EV_DONE event. A
 *   connection that goes away marks its running request cancelled and is
 *   freed only when the worker has handed back every request of it.
 */
#ifndef SID_DAEMON_H
#define SID_DAEMON_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include <uv.h>

#include "config.h"
#include "engine.h"
#include "queue.h"
#include "selectinfer.pb-c.h"
#include "si-frame.h"

#define SID_VERSION "0.1.0"
#define SID_MAX_STOP 16
#define SID_MAX_STOP_LEN 256
#define SID_MAX_CHAT_MSGS 4096
#define SID_MAX_REPLY (16u << 20) /* replies may exceed max_frame: a whole text */

typedef struct sid_server sid_server;
typedef struct sid_conn sid_conn;

typedef struct sid_req {
    sid_qitem q;              /* in the fair queue while queued */
    sid_conn *conn;           /* the owner; outlives the request */
    struct sid_req *next;     /* the connection's live requests (loop) */
    uint64_t id;
    Selectinfer__Request *msg; /* owned; immutable once queued */
    const Selectinfer__Generate *gen;
    uint32_t max_tokens;       /* resolved by the loop from the config */
    bool stream;
    atomic_bool cancelled;
    uint64_t t_queued, t_started;
    /* results, written by the worker before EV_DONE */
    eng_gen_stats stats;
    int err_code;              /* SELECTINFER__ERROR_CODE__..., 0: done */
    char err_msg[640];
    char *text;                /* stream = false: the whole text */
    size_t text_len, text_cap;
} sid_req;

enum sid_event_type {
    SID_EV_CHUNK,
    SID_EV_DONE,
    SID_EV_LOADED,
    SID_EV_EXITED,
};

typedef struct sid_event {
    struct sid_event *next;
    enum sid_event_type type;
    sid_req *req;
    char *data;  /* EV_CHUNK */
    size_t len, cap;
} sid_event;

struct sid_conn {
    uv_pipe_t pipe;
    uv_shutdown_t shutdown_req;
    sid_server *srv;
    sid_conn *prev, *next; /* srv->conns, while open */
    si_frame_reader rd;
    uint64_t serial;
    pid_t pid;
    uid_t uid;
    gid_t gid;
    bool admin;
    sid_req *reqs;         /* live requests: queued or running */
    unsigned n_reqs;
    bool closing;          /* no more reads or writes */
    bool flushing;         /* uv_shutdown under way */
    bool closed;           /* the close callback ran */
    uint64_t stall_since;  /* ns; writes queued without progress since */
};

typedef struct sid_counters {
    uint64_t requests_served, requests_failed, requests_cancelled;
    uint64_t prompt_tokens, generated_tokens;
    uint64_t swaps, reloads, rejected_overloaded, clients_dropped;
} sid_counters;

struct sid_server {
    uv_loop_t *loop;
    sid_config cfg;
    const char *config_file;
    const sid_override *overrides;
    size_t n_overrides;
    gid_t admin_gid;        /* (gid_t)-1: none */
    char socket_path[SID_SOCKET_PATH_MAX]; /* bound by us; unlinked at exit */
    bool socket_activated;

    uv_pipe_t listener;
    uv_async_t async;
    uv_signal_t sig_int, sig_term, sig_hup;
    uv_timer_t housekeeping, force_close;
    bool listening;

    sid_conn *conns;
    unsigned n_conns;
    uint64_t next_serial;

    int state;              /* SELECTINFER__DAEMON_STATE__... (loop) */
    bool stopping;
    int exit_code;
    uint64_t t_start;
    sid_counters n;
    bool once_conn_cap, once_queue_cap, once_slow, once_frame;

    /* shared with the worker, under mu */
    pthread_mutex_t mu;
    pthread_cond_t cv;
    sid_queue queue;
    sid_req *running;
    sid_event *out_head, *out_tail;
    atomic_bool stop_worker;

    /* the inference thread and what it owns */
    pthread_t worker;
    bool worker_started;
    eng_model *model;
    eng_session *session;
    /* written by the worker before EV_LOADED, read-only after */
    int load_rc;
    char load_error[640];
    eng_model_info info;
    char backend[32];
    int n_ctx;
};

/* worker.c */
int sid_worker_start(sid_server *srv);
void sid_worker_join(sid_server *srv);
/* Frees an event (and its data). */
void sid_event_free(sid_event *ev);

/* server.c */
void sid_req_free(sid_req *req);

/* Runs the daemon until it is shut down; returns the exit status. */
int sid_daemon_run(const sid_config *cfg, const char *config_file,
                   const sid_override *ov, size_t n_ov);

#endif
