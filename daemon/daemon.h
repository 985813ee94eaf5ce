/* selectinferd's internals, shared by server.c (the libuv loop: sockets,
 * framing, dispatch, status) and worker.c (the inference thread).
 *
 * Threads and ownership:
 * - The loop thread owns connections, the configuration and the counters.
 * - The inference thread owns the model and the sessions (one per context
 *   slot of the prompt cache). It loads the model
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
 * - Profile swaps (use_profile) are requests too, of kind SID_REQ_SWAP: they
 *   wait in their own FIFO (srv->swaps, under mu), which the worker serves
 *   before the fair queue, so a swap runs as soon as the running request
 *   ends and every request still queued runs on the new plan. The worker
 *   owns the model's plan and the profile; the loop keeps a copy of the
 *   active plan (srv->plan) that it updates from the swap results handed
 *   back with EV_DONE, in order, so status and done replies stay coherent.
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
#define SID_MAX_TOOL_CALLS 64 /* per chat message */
#define SID_MAX_REPLY (16u << 20) /* replies may exceed max_frame: a whole text */
#define SID_MAX_TASKS 64         /* tasks of a profile listed by `profiles` */
#define SID_TASK_MAX 64          /* bytes of a task name, with the NUL */
#define SID_MAX_EMBED_INPUTS 256 /* texts of one embed request */

/* The active loading plan and the defaults of each request's computation. */
typedef struct sid_plan {
    char path[SID_PATH_MAX];     /* the profile file; empty: none */
    char task[SID_TASK_MAX];     /* "*": the ranking over all tasks; "": none */
    eng_select_mode mode;
    float gamma, delta;          /* as planned (a budget solved into gamma) */
    int dense_first, dense_last;
    eng_layer_budget layer_budget;
    uint64_t budget, seed;       /* as asked, for the next re-plan */
    float phi, alpha;            /* request defaults; phi 0: all loaded */
    eng_rank rank;
    eng_pick pick;               /* per request or per token (the plan keeps a sketch) */
    float candidates;            /* ENG_PICK_EXACT: eng_compute_params.cand; 0: all loaded */
    eng_comp comp;               /* for the neurons a request leaves out */
    bool copy_dynamic;           /* each context's dynamic neurons copied contiguous */
    uint64_t neurons_loaded, neurons_total, weight_bytes;
    int n_tasks;                 /* of the profile, at most SID_MAX_TASKS listed */
    char tasks[SID_MAX_TASKS][SID_TASK_MAX];
    uint64_t task_prompts[SID_MAX_TASKS];
} sid_plan;

/* What one swap did, and the plan it left. */
typedef struct sid_swap_result {
    char from[SID_TASK_MAX], to[SID_TASK_MAX];
    uint64_t ns;                 /* the whole swap, profile read included */
    eng_swap_stats st;
    char note[256];              /* "" or a remark for the ack */
    sid_plan plan;
} sid_swap_result;

enum sid_req_kind { SID_REQ_GENERATE = 0, SID_REQ_SWAP, SID_REQ_EMBED };

typedef struct sid_server sid_server;
typedef struct sid_conn sid_conn;

struct sid_event;

/* A generated token's log-probability and the most likely tokens at its
 * step (Generate.logprobs); a growing array of them. */
typedef struct sid_lp {
    int32_t id;
    float logprob;
    int n_top;
    eng_token_prob top[ENG_MAX_TOP_PROBS];
} sid_lp;

typedef struct sid_lps {
    sid_lp *v;
    size_t n, cap;
} sid_lps;

int sid_lps_push(sid_lps *a, const sid_lp *e);

typedef struct sid_req {
    sid_qitem q;              /* first: the queue hands back sid_qitem pointers */
    struct sid_event *done_ev; /* allocated with the request, so handing it back cannot fail */
    sid_conn *conn;           /* the owner; outlives the request */
    struct sid_req *next;     /* the connection's live requests (loop) */
    enum sid_req_kind kind;
    struct sid_req *swap_next; /* srv->swaps while queued (kind SWAP) */
    bool swap_queued;
    uint64_t id;
    Selectinfer__Request *msg; /* owned; immutable once queued */
    const Selectinfer__Generate *gen; /* kind GENERATE, else NULL */
    const Selectinfer__Embed *embed;  /* kind EMBED, else NULL */
    uint32_t max_tokens;       /* resolved by the loop from the config */
    int task_switch;           /* SID_TASK_SWITCH_..., resolved by the loop */
    char swap_path[SID_PATH_MAX]; /* kind SWAP: the profile file, resolved; "" */
    bool stream;
    atomic_bool cancelled;
    uint64_t t_queued, t_started;
    /* results, written by the worker before EV_DONE */
    eng_gen_stats stats;
    eng_backend_info backend;  /* after the request: its graph counters */
    int err_code;              /* SELECTINFER__ERROR_CODE__..., 0: done */
    char err_msg[640];
    char *text;                /* stream = false or tools: the whole text */
    size_t text_len, text_cap;
    bool tools;                /* Generate.tools: read the answer's calls */
    eng_tool_call *calls;      /* done.tool_calls */
    size_t n_calls;
    bool reasoning;            /* a reasoning template: split the answer */
    bool has_content;          /* done.content: text[content_off..+content_len) */
    size_t content_off, content_len;
    size_t think_off, think_len; /* done.thinking */
    float phi;                 /* phi used */
    int slot;                  /* the context slot that served it; -1: none */
    uint32_t slot_held;        /* what that slot holds for reuse after it */
    uint64_t slot_copy;        /* the bytes of that slot's dynamic copy after it */
    uint32_t dropped;          /* chat messages left out to fit (done.dropped_messages) */
    int top_logprobs;          /* -1: no logprobs; else alternatives per token */
    sid_lps lps;               /* stream = false: every token's; else the tail */
    double ffn_share;
    char served[SID_TASK_MAX]; /* what served it (done.profile) */
    sid_swap_result *swap;     /* a swap that ran for it; owned */
    bool swap_failed;
    /* kind EMBED: n_embd values per input, the tokens of each, and how
     * many inputs were cut to the context; stats.n_prompt the total */
    float *embd;
    uint32_t *embd_tokens;
    uint32_t truncated;
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
    sid_lps lps; /* EV_CHUNK: log-probabilities (Generate.logprobs) */
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
    uint64_t prompt_tokens, generated_tokens, cached_tokens;
    uint64_t swaps, swaps_failed, reloads, rejected_overloaded, clients_dropped;
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
    uv_timer_t watchdog;      /* WATCHDOG=1 pings (WatchdogSec=) */
    uint64_t watchdog_usec;   /* 0: no watchdog */
    uint64_t extended_ns;     /* the last EXTEND_TIMEOUT_USEC sent while loading */
    bool once_silent;
    bool listening;

    sid_conn *conns;
    unsigned n_conns;
    uint64_t next_serial;

    int state;              /* SELECTINFER__DAEMON_STATE__... (loop) */
    bool stopping;
    int exit_code;
    uint64_t t_start;
    sid_counters n;
    eng_graph_stats graphs; /* the backend's, as of the last request done */
    bool once_conn_cap, once_queue_cap, once_slow, once_frame;

    /* shared with the worker, under mu */
    pthread_mutex_t mu;
    pthread_cond_t cv;
    sid_queue queue;
    sid_req *running;
    sid_req *swaps_head, *swaps_tail; /* use_profile jobs, served first */
    sid_event *out_head, *out_tail;
    atomic_bool stop_worker;
    /* the inference thread's heartbeat: busy while it runs a request, and
     * when it last showed progress (a token, a prefill chunk); the watchdog
     * pings only while it is idle or its last beat is recent */
    atomic_bool worker_busy;
    _Atomic uint64_t beat_ns;

    /* the inference thread and what it owns */
    pthread_t worker;
    bool worker_started;
    eng_model *model;
    eng_session *sessions[SID_MAX_SLOTS]; /* the context slots, n_slots of them */
    int n_slots;
    uint64_t slot_used[SID_MAX_SLOTS];     /* when each last served, for LRU */
    uint64_t slot_cut[SID_MAX_SLOTS];      /* a cut chat's first kept message
                                            * (msg_hash), 0: not cut (fit_chat) */
    uint64_t slot_clock;
    sid_config wcfg;        /* the configuration at start, the worker's copy */
    eng_profile *profile;   /* the profile the plan came from; NULL: none */
    sid_plan wplan;         /* the worker's view of the active plan */
    /* written by the worker before EV_LOADED, read-only after */
    int load_rc;
    char load_error[640];
    eng_model_info info;
    char backend[160];        /* "cpu", or "cuda (the GPU's name)" */
    int n_ctx;
    uint64_t kv_bytes;        /* the KV caches of all context slots */
    uint64_t load_ns;       /* the cold start: eng_model_load with the plan */
    /* the loop's: the active plan (from EV_LOADED, then swap results) */
    sid_plan plan;
    uint32_t slot_held[SID_MAX_SLOTS]; /* tokens each context slot holds, as of the last done */
    uint64_t slot_copy[SID_MAX_SLOTS]; /* bytes of each slot's dynamic copy, the same */
    bool have_last_swap;
    sid_swap_result last_swap; /* its plan member is not used */
};

/* The name a plan serves under: its task where it has one, else its
 * mode's name ("dense", "coreinfer", "random-load"). */
const char *sid_plan_name(const sid_plan *p);
/* dir/path, or path when absolute or dir is empty. -ENAMETOOLONG. */
int sid_profile_path(const char *dir, const char *path, char *out, size_t cap);
/* Whether a mode ranks neurons by a task profile. */
bool sid_mode_uses_profile(eng_select_mode mode);

/* worker.c */
/* The tokens of a request's input, as generate evaluates them: the raw
 * prompt (chat NULL), or the chat rendered through the model's template
 * with the assistant header (no_think: ENG_CHAT_NO_THINK). Returns 0 with *ret malloc'd, or an error
 * code (SELECTINFER__ERROR_CODE_...) with msg. Reads only the model's
 * vocabulary and template, which nothing changes after load: the loop may
 * call it while the worker runs. */
int sid_input_tokens(const eng_model *m, const char *prompt, const Selectinfer__ChatMessages *chat, const char *tools,
                     bool parse_special, bool no_think, int32_t **ret, size_t *ret_n, char *msg, size_t cap);
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
