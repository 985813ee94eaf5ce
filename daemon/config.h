/* Configuration of selectinferd: defaults, then the configuration file
 * (simple "key = value" lines, '#' comments), then command-line flags
 * ("--key value" or "--key=value", dashes and underscores alike). Reload
 * rebuilds the same way, so flags keep winning over the file. */
#ifndef SID_CONFIG_H
#define SID_CONFIG_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define SID_PATH_MAX 4096
#define SID_SOCKET_PATH_MAX 108 /* sizeof(sun_path) */
#define SID_DEFAULT_CONFIG "/etc/selectinfer/selectinferd.conf"
#define SID_DEFAULT_SOCKET "/run/selectinfer/selectinfer.sock"
#define SID_MAX_SLOTS 64 /* context slots (slots = N) */

typedef struct sid_config {
    char model[SID_PATH_MAX];          /* GGUF file */
    char socket[SID_SOCKET_PATH_MAX];  /* empty: the default path */
    char socket_group[64];             /* group owning the socket (mode 0660) */
    char admin_group[64];              /* members may swap, reload, shut down */
    char profile_dir[SID_PATH_MAX];    /* relative profile paths resolve here */
    char profile[SID_PATH_MAX];        /* .siprof file; empty: none (dense) */
    char task[64];                     /* task at start; empty: the ranking over all */
    char chat_template[64];            /* a named chat format in place of the file's */
    char chat_template_file[SID_PATH_MAX]; /* ... or the Jinja template in this file */
    int mode;                          /* SID_MODE_...; AUTO: selectinfer with a profile */
    float gamma, delta;                /* plan: shares loaded and static */
    uint32_t dense_first, dense_last;  /* layers kept dense at each end */
    int layer_budget;                  /* eng_layer_budget: gamma over the layers */
    uint64_t budget;                   /* bytes of weights; > 0: gamma solved */
    uint64_t seed;                     /* random-load */
    float phi;                         /* default share computed; 0: all loaded */
    float alpha;                       /* per-token vote fraction */
    int rank;                          /* SID_RANK_... */
    int pick;                          /* SID_PICK_...: when decode picks its neurons */
    float candidates;                  /* pick = exact: candidates per request; 0: all loaded */
    int comp;                          /* eng_comp: what stands in for neurons left out */
    int copy_dynamic;                  /* 1: eng_compute_params.copy_dynamic */
    int task_switch;                   /* SID_TASK_SWITCH_... */
    uint32_t max_frame;                /* bytes per frame */
    uint32_t max_queue;                /* queued generate requests, all clients */
    uint32_t max_pending;              /* queued + running per connection */
    uint32_t max_connections;
    uint32_t max_tokens;               /* default when a request sets none */
    uint32_t ctx_size;                 /* 0: min(model's, 4096) */
    uint32_t slots;                    /* contexts kept for the prompt cache */
    int kv_cache_type;                 /* eng_kv_type: f16 or q8_0 */
    int swa_full;                      /* 1: eng_session_params.swa_full */
    int matrices;                      /* SID_MATRICES_...: every matrix and the FFN (CPU) */
    int prefill_q8;                    /* 1: eng_model_params.prefill_q8 */
    uint32_t threads;                  /* 0: online CPUs */
    int backend;                       /* SID_BACKEND_...: where the model runs */
    uint32_t device;                   /* the GPU for cuda and auto */
    uint32_t client_write_buffer;      /* bytes queued to a client that does not read */
    uint32_t client_write_timeout_ms;  /* how long its writes may stall */
    uint32_t client_socket_buffer;     /* SO_SNDBUF of client sockets; 0: the system's */
    int log_level;                     /* syslog priority */
} sid_config;

/* Enumerated keys; the names are the values the file and flags take. The
 * selection modes are the engine's names (eng_select_mode_parse), with
 * "auto" first. */
enum { SID_MODE_AUTO = 0 };
enum { SID_RANK_ABS = 0, SID_RANK_SIGNED };
enum { SID_TASK_SWITCH_SWAP = 0, SID_TASK_SWITCH_REFUSE };
enum { SID_BACKEND_CPU = 0, SID_BACKEND_CUDA, SID_BACKEND_AUTO }; /* eng_backend_kind's order */
enum { SID_MATRICES_F16 = 0, SID_MATRICES_Q8_0 };                 /* eng_model_params.q8_matrices */
enum { SID_LAYER_BUDGET_UNIFORM = 0, SID_LAYER_BUDGET_MASS, SID_LAYER_BUDGET_SENS }; /* eng_layer_budget's */
extern const char *const sid_mode_names[];   /* NULL-terminated */
extern const char *const sid_rank_names[];
extern const char *const sid_matrices_names[];
extern const char *const sid_kv_cache_type_names[];
enum { SID_PICK_REQUEST = 0, SID_PICK_TOKEN, SID_PICK_EXACT }; /* eng_pick's */
extern const char *const sid_pick_names[];
extern const char *const sid_comp_names[];          /* eng_comp's order: none, mean, linear */
extern const char *const sid_yes_no_names[];       /* "no", "yes" */
extern const char *const sid_task_switch_names[];
extern const char *const sid_backend_names[];
extern const char *const sid_layer_budget_names[];

typedef struct sid_override {
    const char *key;
    const char *value;
} sid_override;

void sid_config_defaults(sid_config *cfg);

/* Sets one key (dashes or underscores). -ENOENT unknown key, -EINVAL bad
 * value; err receives a message. */
int sid_config_set(sid_config *cfg, const char *key, const char *value, char *err, size_t errcap);

/* Parses a configuration file's text into cfg. -EINVAL with "file:line: why". */
int sid_config_parse(sid_config *cfg, const char *text, size_t len, const char *name,
                     char *err, size_t errcap);

/* defaults + file (NULL or "": none) + overrides. -errno with err filled. */
int sid_config_build(sid_config *cfg, const char *file, const sid_override *ov, size_t n_ov,
                     char *err, size_t errcap);

/* Whether key names a configuration key. */
bool sid_config_is_key(const char *key);

/* Copies into dst the keys that may change without a restart; names the
 * keys that differ but cannot change in *ret_fixed (NULL when none). */
void sid_config_apply_reload(sid_config *dst, const sid_config *src, const char **ret_fixed);

/* Prints "key = value" for every key (--print-config). */
void sid_config_print(const sid_config *cfg, void (*out)(void *ud, const char *line), void *ud);

#endif
