#include "config.h"
#include "log.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

enum key_type { KEY_STR, KEY_U32, KEY_U64, KEY_F32, KEY_ENUM, KEY_LOGLEVEL };

const char *const sid_mode_names[] = {"auto", "dense", "load-only", "random-load", "coreinfer",
                                      "selectinfer", NULL};
const char *const sid_rank_names[] = {"abs", "signed", NULL};
const char *const sid_pick_names[] = {"request", "token", "exact", NULL}; /* eng_pick */
const char *const sid_yes_no_names[] = {"no", "yes", NULL};
const char *const sid_comp_names[] = {"none", "mean", "linear", NULL}; /* eng_comp */
const char *const sid_task_switch_names[] = {"swap", "refuse", NULL};
const char *const sid_matrices_names[] = {"f16", "q8_0", NULL};
const char *const sid_kv_cache_type_names[] = {"f16", "q8_0", NULL}; /* eng_kv_type */
const char *const sid_backend_names[] = {"cpu", "cuda", "auto", NULL};
const char *const sid_layer_budget_names[] = {"uniform", "mass", "sens", NULL}; /* eng_layer_budget */

typedef struct key_def {
    const char *name;
    enum key_type type;
    size_t offset;
    size_t size;      /* KEY_STR: buffer size */
    uint64_t min, max;
    bool reloadable;
    float fmin, fmax; /* KEY_F32: [fmin, fmax], or (fmin, fmax] with fmin_open */
    bool fmin_open;
    const char *const *names; /* KEY_ENUM */
} key_def;

#define STR(f, r) {#f, KEY_STR, offsetof(sid_config, f), sizeof(((sid_config *)0)->f), 0, 0, r, 0, 0, false, NULL}
#define U32(f, lo, hi, r) {#f, KEY_U32, offsetof(sid_config, f), sizeof(uint32_t), lo, hi, r, 0, 0, false, NULL}
#define U64(f, lo, hi, r) {#f, KEY_U64, offsetof(sid_config, f), sizeof(uint64_t), lo, hi, r, 0, 0, false, NULL}
#define F32(f, lo, hi, open, r) {#f, KEY_F32, offsetof(sid_config, f), sizeof(float), 0, 0, r, lo, hi, open, NULL}
#define ENUM(f, list, r) {#f, KEY_ENUM, offsetof(sid_config, f), sizeof(int), 0, 0, r, 0, 0, false, list}

static const key_def keys[] = {
    STR(model, false),
    STR(socket, false),
    STR(socket_group, false),
    STR(admin_group, true),
    STR(profile_dir, false),
    /* SelectInfer: the loading plan at start (use_profile changes it at run
     * time, so a reload does not), and the defaults of each request */
    STR(profile, false),
    STR(task, false),
    STR(chat_template, false),
    STR(chat_template_file, false),
    ENUM(mode, sid_mode_names, false),
    F32(gamma, 0.0f, 1.0f, true, false),
    F32(delta, 0.0f, 1.0f, false, false),
    U32(dense_first, 0, 1024, false),
    U32(dense_last, 0, 1024, false),
    ENUM(layer_budget, sid_layer_budget_names, false),
    U64(budget, 0, UINT64_MAX, false),
    U64(seed, 0, UINT64_MAX, false),
    F32(phi, 0.0f, 1.0f, false, false),
    F32(alpha, 0.0f, 1.0f, true, false),
    ENUM(rank, sid_rank_names, false),
    ENUM(pick, sid_pick_names, false),
    F32(candidates, 0.0f, 1.0f, false, false),
    ENUM(comp, sid_comp_names, false),
    ENUM(copy_dynamic, sid_yes_no_names, false),
    ENUM(task_switch, sid_task_switch_names, true),
    U32(max_frame, 1024, 64u << 20, true),
    U32(max_queue, 1, 100000, true),
    U32(max_pending, 1, 100000, true),
    U32(max_connections, 1, 100000, true),
    U32(max_tokens, 1, 1u << 20, true),
    U32(ctx_size, 0, 1u << 20, false),
    U32(slots, 1, SID_MAX_SLOTS, false),
    ENUM(kv_cache_type, sid_kv_cache_type_names, false),
    ENUM(swa_full, sid_yes_no_names, false),
    ENUM(matrices, sid_matrices_names, false),
    ENUM(prefill_q8, sid_yes_no_names, false),
    U32(threads, 0, 1024, false),
    ENUM(backend, sid_backend_names, false),
    U32(device, 0, 1024, false),
    U32(client_write_buffer, 4096, 1u << 30, true),
    U32(client_write_timeout_ms, 10, 3600000, true),
    U32(client_socket_buffer, 0, 64u << 20, true),
    {"log_level", KEY_LOGLEVEL, offsetof(sid_config, log_level), sizeof(int), 0, 7, true, 0, 0, false, NULL},
};
#define N_KEYS (sizeof(keys) / sizeof(keys[0]))

void sid_config_defaults(sid_config *cfg)
{
    memset(cfg, 0, sizeof(*cfg));
    cfg->mode = SID_MODE_AUTO;
    cfg->gamma = 0.7f; /* the published defaults */
    cfg->delta = 0.3f;
    /* measured to win at equal memory and compute (docs/selectinfer.md):
     * layer 0 dense, the other layers sharing the rest */
    cfg->dense_first = 1;
    cfg->layer_budget = SID_LAYER_BUDGET_SENS;
    cfg->alpha = 0.2f;
    cfg->rank = SID_RANK_ABS;
    /* a context's dynamic neurons copied contiguous: decode at phi 0.4
     * 8-12 % faster on the CPU, for 8 MiB a context (docs/benchmark.md) */
    cfg->copy_dynamic = 1;
    cfg->task_switch = SID_TASK_SWITCH_SWAP;
    cfg->max_frame = 1u << 20;
    cfg->max_queue = 64;
    cfg->max_pending = 16;
    cfg->max_connections = 64;
    cfg->max_tokens = 512;
    cfg->ctx_size = 0;
    cfg->slots = 1;
    /* the FFN in the file's Q4_1 (Q4_0, K type) gate and up rows and 8-bit
     * down rows on the CPU, every other matrix 8-bit where the file holds
     * it in none of those: the default model in 103 MiB instead of 196,
     * decode about 2x, perplexity 18.30 -> 18.36 (docs/benchmark.md); the
     * CUDA backend keeps f16 */
    cfg->matrices = SID_MATRICES_Q8_0;
    cfg->threads = 0;
    cfg->client_write_buffer = 1u << 20;
    cfg->client_write_timeout_ms = 30000;
    cfg->log_level = SID_LOG_INFO;
}

static const key_def *find_key(const char *key)
{
    char norm[64];
    size_t n = strlen(key);
    if (n == 0 || n >= sizeof(norm))
        return NULL;
    for (size_t i = 0; i <= n; i++)
        norm[i] = key[i] == '-' ? '_' : key[i];
    for (size_t i = 0; i < N_KEYS; i++)
        if (strcmp(keys[i].name, norm) == 0)
            return &keys[i];
    return NULL;
}

bool sid_config_is_key(const char *key)
{
    return find_key(key) != NULL;
}

int sid_config_set(sid_config *cfg, const char *key, const char *value, char *err, size_t errcap)
{
    const key_def *k = find_key(key);
    if (!k) {
        snprintf(err, errcap, "unknown key '%s'", key);
        return -ENOENT;
    }
    char *field = (char *)cfg + k->offset;
    switch (k->type) {
    case KEY_STR: {
        size_t n = strlen(value);
        if (n >= k->size) {
            snprintf(err, errcap, "%s: value longer than %zu bytes", k->name, k->size - 1);
            return -EINVAL;
        }
        memcpy(field, value, n + 1);
        return 0;
    }
    case KEY_U32:
    case KEY_U64: {
        char *end;
        errno = 0;
        unsigned long long v = strtoull(value, &end, 10);
        /* accept a binary suffix for sizes: "1M", "64k", "2G" */
        unsigned long long mul = 1;
        if (end != value && (*end == 'k' || *end == 'K')) mul = 1024, end++;
        else if (end != value && (*end == 'm' || *end == 'M')) mul = 1024 * 1024, end++;
        else if (end != value && (*end == 'g' || *end == 'G')) mul = 1024ull * 1024 * 1024, end++;
        uint64_t lim = k->type == KEY_U32 ? UINT32_MAX : UINT64_MAX;
        if (errno || end == value || *end != '\0' || value[0] == '-' || v > lim / mul ||
            v * mul < k->min || v * mul > k->max) {
            snprintf(err, errcap, "%s: '%s' is not a number in [%llu, %llu]", k->name, value,
                     (unsigned long long)k->min, (unsigned long long)k->max);
            return -EINVAL;
        }
        if (k->type == KEY_U32) {
            uint32_t u = (uint32_t)(v * mul);
            memcpy(field, &u, sizeof(u));
        } else {
            uint64_t u = (uint64_t)(v * mul);
            memcpy(field, &u, sizeof(u));
        }
        return 0;
    }
    case KEY_F32: {
        char *end;
        errno = 0;
        float v = strtof(value, &end);
        /* the negated test also refuses NaN */
        if (errno || end == value || *end != '\0' || !(v >= k->fmin && v <= k->fmax) ||
            (k->fmin_open && v == k->fmin)) {
            snprintf(err, errcap, "%s: '%s' is not a number in %c%g, %g]", k->name, value,
                     k->fmin_open ? '(' : '[', (double)k->fmin, (double)k->fmax);
            return -EINVAL;
        }
        memcpy(field, &v, sizeof(v));
        return 0;
    }
    case KEY_ENUM: {
        for (int i = 0; k->names[i]; i++) {
            if (strcmp(value, k->names[i]) == 0) {
                memcpy(field, &i, sizeof(i));
                return 0;
            }
        }
        char list[160] = "";
        for (int i = 0; k->names[i]; i++) {
            size_t l = strlen(list);
            snprintf(list + l, sizeof(list) - l, "%s%s", i ? ", " : "", k->names[i]);
        }
        snprintf(err, errcap, "%s: '%s' is not one of %s", k->name, value, list);
        return -EINVAL;
    }
    case KEY_LOGLEVEL: {
        int l = sid_log_level_parse(value);
        if (l < 0) {
            snprintf(err, errcap, "log_level: '%s' is not one of err, warning, info, debug", value);
            return -EINVAL;
        }
        memcpy(field, &l, sizeof(l));
        return 0;
    }
    }
    return -EINVAL;
}

static char *trim(char *s, char *end)
{
    while (s < end && (*s == ' ' || *s == '\t' || *s == '\r'))
        s++;
    while (end > s && (end[-1] == ' ' || end[-1] == '\t' || end[-1] == '\r'))
        end--;
    *end = '\0';
    return s;
}

int sid_config_parse(sid_config *cfg, const char *text, size_t len, const char *name,
                     char *err, size_t errcap)
{
    char line[SID_PATH_MAX + 256];
    size_t pos = 0;
    int lineno = 0;
    while (pos < len) {
        size_t e = pos;
        while (e < len && text[e] != '\n')
            e++;
        lineno++;
        size_t n = e - pos;
        if (n >= sizeof(line)) {
            snprintf(err, errcap, "%s:%d: line too long", name, lineno);
            return -EINVAL;
        }
        memcpy(line, text + pos, n);
        line[n] = '\0';
        pos = e + 1;
        if (memchr(line, '\0', n)) {
            snprintf(err, errcap, "%s:%d: NUL byte", name, lineno);
            return -EINVAL;
        }
        char *s = trim(line, line + n);
        if (*s == '\0' || *s == '#')
            continue;
        char *eq = strchr(s, '=');
        if (!eq) {
            snprintf(err, errcap, "%s:%d: expected 'key = value'", name, lineno);
            return -EINVAL;
        }
        char *key = trim(s, eq);
        char *value = trim(eq + 1, eq + 1 + strlen(eq + 1));
        /* optional quotes around a value */
        size_t vl = strlen(value);
        if (vl >= 2 && value[0] == '"' && value[vl - 1] == '"') {
            value[vl - 1] = '\0';
            value++;
        }
        char why[256];
        if (sid_config_set(cfg, key, value, why, sizeof(why)) < 0) {
            snprintf(err, errcap, "%s:%d: %s", name, lineno, why);
            return -EINVAL;
        }
    }
    return 0;
}

int sid_config_build(sid_config *cfg, const char *file, const sid_override *ov, size_t n_ov,
                     char *err, size_t errcap)
{
    sid_config c;
    sid_config_defaults(&c);
    if (file && file[0]) {
        int fd = open(file, O_RDONLY | O_CLOEXEC);
        if (fd < 0) {
            int e = errno;
            snprintf(err, errcap, "cannot open configuration file '%s': %s", file, strerror(e));
            return -e;
        }
        struct stat st;
        /* a configuration file is small; refuse anything that is not */
        if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode) || st.st_size > (1 << 20)) {
            close(fd);
            snprintf(err, errcap, "configuration file '%s' is not a regular file under 1 MiB", file);
            return -EINVAL;
        }
        size_t len = (size_t)st.st_size;
        char *text = malloc(len + 1);
        if (!text) {
            close(fd);
            return -ENOMEM;
        }
        size_t got = 0;
        while (got < len) {
            ssize_t r = read(fd, text + got, len - got);
            if (r < 0 && errno == EINTR)
                continue;
            if (r <= 0)
                break;
            got += (size_t)r;
        }
        close(fd);
        int rc = sid_config_parse(&c, text, got, file, err, errcap);
        free(text);
        if (rc < 0)
            return rc;
    }
    for (size_t i = 0; i < n_ov; i++) {
        char why[256];
        int rc = sid_config_set(&c, ov[i].key, ov[i].value, why, sizeof(why));
        if (rc < 0) {
            snprintf(err, errcap, "--%s: %s", ov[i].key, why);
            return rc;
        }
    }
    *cfg = c;
    return 0;
}

void sid_config_apply_reload(sid_config *dst, const sid_config *src, const char **ret_fixed)
{
    *ret_fixed = NULL;
    for (size_t i = 0; i < N_KEYS; i++) {
        const key_def *k = &keys[i];
        char *d = (char *)dst + k->offset;
        const char *s = (const char *)src + k->offset;
        if (memcmp(d, s, k->size) == 0)
            continue;
        if (k->reloadable)
            memcpy(d, s, k->size);
        else if (!*ret_fixed)
            *ret_fixed = k->name;
    }
}

void sid_config_print(const sid_config *cfg, void (*out)(void *ud, const char *line), void *ud)
{
    char line[SID_PATH_MAX + 64];
    for (size_t i = 0; i < N_KEYS; i++) {
        const key_def *k = &keys[i];
        const char *f = (const char *)cfg + k->offset;
        if (k->type == KEY_STR) {
            snprintf(line, sizeof(line), "%s = %s", k->name, f);
        } else if (k->type == KEY_U32) {
            uint32_t v;
            memcpy(&v, f, sizeof(v));
            snprintf(line, sizeof(line), "%s = %u", k->name, v);
        } else if (k->type == KEY_U64) {
            uint64_t v;
            memcpy(&v, f, sizeof(v));
            snprintf(line, sizeof(line), "%s = %llu", k->name, (unsigned long long)v);
        } else if (k->type == KEY_F32) {
            float v;
            memcpy(&v, f, sizeof(v));
            snprintf(line, sizeof(line), "%s = %g", k->name, (double)v);
        } else if (k->type == KEY_ENUM) {
            int v;
            memcpy(&v, f, sizeof(v));
            snprintf(line, sizeof(line), "%s = %s", k->name, k->names[v]);
        } else {
            int v;
            memcpy(&v, f, sizeof(v));
            snprintf(line, sizeof(line), "%s = %d", k->name, v);
        }
        out(ud, line);
    }
}
