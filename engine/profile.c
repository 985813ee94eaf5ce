/* Task profiles: per-neuron scores, their file format and the rankings
 * built from them (SELECTINFER.md, "Definitions").
 *
 * File layout (little-endian; docs/profile-format.md):
 *
 *   0   magic "SIPROF\0\0"          8 bytes
 *   8   version (1)                 u32
 *   12  n_layer, n_ff, n_embd, n_vocab   u32 x 4
 *   28  n_tasks                     u32
 *   32  fingerprint                 u64
 *   40  arch                        char[32], NUL-padded
 *   72  n_tasks x { name char[64] NUL-padded, n_prompts u64, n_tokens u64,
 *                   sums f64[n_layer * n_ff] }
 *   end checksum                    u64, FNV-1a 64 of every byte before it
 *
 * sums hold, per task, the sum over its prompts of s_n(p) = mean_t |a_n(t)|,
 * so merging adds and S_n = sums / n_prompts.
 */
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "error.h"
#include "model.h"
#include "select.h"

#define PROFILE_MAGIC "SIPROF\0\0"
#define PROFILE_VERSION 1
#define HEADER_BYTES 72
#define TASK_HEADER_BYTES 80
#define MAX_TASKS 256
#define NAME_LEN 64

typedef struct profile_task {
    char name[NAME_LEN];
    uint64_t n_prompts, n_tokens;
    double *sums; /* [n_layer * n_ff] */
} profile_task;

struct eng_profile {
    uint64_t fingerprint;
    char arch[32];
    uint32_t n_layer, n_ff, n_embd, n_vocab;
    int n_tasks;
    profile_task *tasks;
};

uint64_t eng__fnv1a(uint64_t h, const void *data, size_t n)
{
    const uint8_t *p = data;
    for (size_t i = 0; i < n; i++) {
        h ^= p[i];
        h *= 0x100000001b3ull;
    }
    return h;
}

void eng_profile_free(eng_profile *p)
{
    if (!p)
        return;
    for (int i = 0; i < p->n_tasks; i++)
        free(p->tasks[i].sums);
    free(p->tasks);
    free(p);
}

int eng_profile_new(const eng_model *m, eng_profile **ret)
{
    if (m->info.n_expert > 0) /* (a token computes only its experts' neurons) */
        return -ENOTSUP;
    eng_profile *p = calloc(1, sizeof(*p));
    if (!p)
        return -ENOMEM;
    p->fingerprint = m->info.fingerprint;
    snprintf(p->arch, sizeof(p->arch), "%s", m->info.arch);
    p->n_layer = m->info.n_layer;
    p->n_ff = m->info.n_ff;
    p->n_embd = m->info.n_embd;
    p->n_vocab = m->info.n_vocab;
    *ret = p;
    return 0;
}

static size_t n_scores(const eng_profile *p)
{
    return (size_t)p->n_layer * p->n_ff;
}

static profile_task *find_task(const eng_profile *p, const char *name)
{
    for (int i = 0; i < p->n_tasks; i++)
        if (!strcmp(p->tasks[i].name, name))
            return &p->tasks[i];
    return NULL;
}

static bool valid_name(const char *name)
{
    size_t n = strlen(name);
    if (n == 0 || n >= NAME_LEN || !strcmp(name, "*"))
        return false;
    for (size_t i = 0; i < n; i++) {
        char c = name[i];
        if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
              c == '-' || c == '_' || c == '.'))
            return false;
    }
    return true;
}

static int add_task(eng_profile *p, const char *name, profile_task **ret)
{
    if (!valid_name(name))
        return -EINVAL;
    if (p->n_tasks == MAX_TASKS)
        return -E2BIG;
    profile_task *t = realloc(p->tasks, (p->n_tasks + 1) * sizeof(*t));
    if (!t)
        return -ENOMEM;
    p->tasks = t;
    t = &p->tasks[p->n_tasks];
    memset(t, 0, sizeof(*t));
    snprintf(t->name, sizeof(t->name), "%s", name);
    t->sums = calloc(n_scores(p), sizeof(double));
    if (!t->sums)
        return -ENOMEM;
    p->n_tasks++;
    *ret = t;
    return 0;
}

int eng_profile_add_prompt(eng_profile *p, const char *task, const double *sums, uint64_t n_tokens)
{
    if (!p || !task || !sums || n_tokens == 0)
        return -EINVAL;
    profile_task *t = find_task(p, task);
    int r;
    if (!t && (r = add_task(p, task, &t)) < 0)
        return r;
    for (size_t i = 0; i < n_scores(p); i++)
        t->sums[i] += sums[i] / (double)n_tokens;
    t->n_prompts++;
    t->n_tokens += n_tokens;
    return 0;
}

static int check_same_model(const eng_profile *a, uint64_t fingerprint, const char *arch,
                            uint32_t n_layer, uint32_t n_ff, uint32_t n_embd, uint32_t n_vocab,
                            eng_error *err)
{
    if (strcmp(a->arch, arch) || a->n_layer != n_layer || a->n_ff != n_ff ||
        a->n_embd != n_embd || a->n_vocab != n_vocab)
        return eng__set_err(err, -EMEDIUMTYPE,
                            "profile is for a %s model with %u layers, n_ff %u, n_embd %u, vocab %u; "
                            "this is a %s model with %u layers, n_ff %u, n_embd %u, vocab %u",
                            a->arch, a->n_layer, a->n_ff, a->n_embd, a->n_vocab, arch, n_layer, n_ff,
                            n_embd, n_vocab);
    if (a->fingerprint != fingerprint)
        return eng__set_err(err, -EMEDIUMTYPE,
                            "profile was made for another model of the same shape "
                            "(fingerprint %016llx, this model %016llx)",
                            (unsigned long long)a->fingerprint, (unsigned long long)fingerprint);
    return 0;
}

int eng_profile_merge(eng_profile *dst, const eng_profile *src, eng_error *err)
{
    int r = check_same_model(dst, src->fingerprint, src->arch, src->n_layer, src->n_ff,
                             src->n_embd, src->n_vocab, err);
    if (r < 0)
        return r;
    for (int i = 0; i < src->n_tasks; i++) {
        const profile_task *s = &src->tasks[i];
        profile_task *t = find_task(dst, s->name);
        if (!t && (r = add_task(dst, s->name, &t)) < 0)
            return eng__set_err(err, r, "cannot add task '%s'", s->name);
        for (size_t j = 0; j < n_scores(dst); j++)
            t->sums[j] += s->sums[j];
        t->n_prompts += s->n_prompts;
        t->n_tokens += s->n_tokens;
    }
    return 0;
}

/* ---- file I/O ---- */

static void put_u32(uint8_t *b, uint32_t v)
{
    for (int i = 0; i < 4; i++)
        b[i] = (uint8_t)(v >> (8 * i));
}

static void put_u64(uint8_t *b, uint64_t v)
{
    for (int i = 0; i < 8; i++)
        b[i] = (uint8_t)(v >> (8 * i));
}

static uint32_t get_u32(const uint8_t *b)
{
    uint32_t v = 0;
    for (int i = 0; i < 4; i++)
        v |= (uint32_t)b[i] << (8 * i);
    return v;
}

static uint64_t get_u64(const uint8_t *b)
{
    uint64_t v = 0;
    for (int i = 0; i < 8; i++)
        v |= (uint64_t)b[i] << (8 * i);
    return v;
}

static double get_f64(const uint8_t *b)
{
    uint64_t u = get_u64(b);
    double d;
    memcpy(&d, &u, sizeof(d));
    return d;
}

static size_t file_bytes(const eng_profile *p)
{
    return HEADER_BYTES + (size_t)p->n_tasks * (TASK_HEADER_BYTES + 8 * n_scores(p)) + 8;
}

int eng_profile_save(const eng_profile *p, const char *path)
{
    size_t size = file_bytes(p);
    uint8_t *buf = calloc(1, size);
    if (!buf)
        return -ENOMEM;
    memcpy(buf, PROFILE_MAGIC, 8);
    put_u32(buf + 8, PROFILE_VERSION);
    put_u32(buf + 12, p->n_layer);
    put_u32(buf + 16, p->n_ff);
    put_u32(buf + 20, p->n_embd);
    put_u32(buf + 24, p->n_vocab);
    put_u32(buf + 28, (uint32_t)p->n_tasks);
    put_u64(buf + 32, p->fingerprint);
    memcpy(buf + 40, p->arch, strnlen(p->arch, 31));
    uint8_t *q = buf + HEADER_BYTES;
    for (int i = 0; i < p->n_tasks; i++) {
        const profile_task *t = &p->tasks[i];
        memcpy(q, t->name, strnlen(t->name, NAME_LEN - 1));
        put_u64(q + 64, t->n_prompts);
        put_u64(q + 72, t->n_tokens);
        q += TASK_HEADER_BYTES;
        for (size_t j = 0; j < n_scores(p); j++, q += 8) {
            uint64_t u;
            memcpy(&u, &t->sums[j], 8);
            put_u64(q, u);
        }
    }
    put_u64(q, eng__fnv1a(0xcbf29ce484222325ull, buf, size - 8));

    /* write to a temporary name and rename: a crash never leaves half a profile */
    char tmp[4096];
    if (snprintf(tmp, sizeof(tmp), "%s.tmp", path) >= (int)sizeof(tmp)) {
        free(buf);
        return -ENAMETOOLONG;
    }
    int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd < 0) {
        free(buf);
        return -errno;
    }
    size_t off = 0;
    while (off < size) {
        ssize_t w = write(fd, buf + off, size - off);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0) {
            int e = w < 0 ? -errno : -EIO;
            close(fd);
            unlink(tmp);
            free(buf);
            return e;
        }
        off += (size_t)w;
    }
    free(buf);
    if (fsync(fd) < 0 || close(fd) < 0) {
        unlink(tmp);
        return -errno;
    }
    if (rename(tmp, path) < 0) {
        int e = -errno;
        unlink(tmp);
        return e;
    }
    return 0;
}

int eng_profile_load(const char *path, const eng_model *m, eng_profile **ret, eng_error *err)
{
    if (err)
        err->msg[0] = 0;
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return eng__set_err(err, -errno, "cannot open profile: %s", strerror(errno));
    struct stat st;
    if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode)) {
        close(fd);
        return eng__set_err(err, -EINVAL, "profile is not a regular file");
    }
    size_t size = (size_t)st.st_size;
    if (size < HEADER_BYTES + 8 || size > ((size_t)1 << 34)) {
        close(fd);
        return eng__set_err(err, -EINVAL, "profile has %zu bytes: %s", size,
                            size < HEADER_BYTES + 8 ? "truncated" : "too large");
    }
    uint8_t *buf = malloc(size);
    if (!buf) {
        close(fd);
        return eng__set_err(err, -ENOMEM, "out of memory reading the profile");
    }
    size_t off = 0;
    while (off < size) {
        ssize_t r = read(fd, buf + off, size - off);
        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0)
            break;
        off += (size_t)r;
    }
    close(fd);
    int r = 0;
    eng_profile *p = NULL;
    if (off != size) {
        r = eng__set_err(err, -EIO, "short read on the profile");
        goto out;
    }
    if (memcmp(buf, PROFILE_MAGIC, 8)) {
        r = eng__set_err(err, -EINVAL, "not a profile file (bad magic)");
        goto out;
    }
    uint32_t version = get_u32(buf + 8);
    if (version != PROFILE_VERSION) {
        r = eng__set_err(err, -EINVAL, "profile version %u is not supported (expected %d)", version,
                         PROFILE_VERSION);
        goto out;
    }
    p = calloc(1, sizeof(*p));
    if (!p) {
        r = eng__set_err(err, -ENOMEM, "out of memory");
        goto out;
    }
    p->n_layer = get_u32(buf + 12);
    p->n_ff = get_u32(buf + 16);
    p->n_embd = get_u32(buf + 20);
    p->n_vocab = get_u32(buf + 24);
    uint32_t n_tasks = get_u32(buf + 28);
    p->fingerprint = get_u64(buf + 32);
    if (p->n_layer == 0 || p->n_layer > 512 || p->n_ff == 0 || p->n_ff > (1u << 20) ||
        n_tasks > MAX_TASKS) {
        r = eng__set_err(err, -EINVAL, "profile header is invalid (%u layers, n_ff %u, %u tasks)",
                         p->n_layer, p->n_ff, n_tasks);
        goto out;
    }
    if (buf[40 + 31] != 0) {
        r = eng__set_err(err, -EINVAL, "profile architecture name is not terminated");
        goto out;
    }
    memcpy(p->arch, buf + 40, 32);
    size_t want = HEADER_BYTES + (size_t)n_tasks * (TASK_HEADER_BYTES + 8 * n_scores(p)) + 8;
    if (size != want) {
        r = eng__set_err(err, -EINVAL, "profile has %zu bytes, its header implies %zu (%s)", size,
                         want, size < want ? "truncated" : "trailing data");
        goto out;
    }
    uint64_t sum = get_u64(buf + size - 8);
    if (sum != eng__fnv1a(0xcbf29ce484222325ull, buf, size - 8)) {
        r = eng__set_err(err, -EINVAL, "profile checksum mismatch: the file is corrupt");
        goto out;
    }
    p->tasks = calloc(n_tasks ? n_tasks : 1, sizeof(*p->tasks));
    if (!p->tasks) {
        r = eng__set_err(err, -ENOMEM, "out of memory");
        goto out;
    }
    const uint8_t *q = buf + HEADER_BYTES;
    for (uint32_t i = 0; i < n_tasks; i++) {
        profile_task *t = &p->tasks[i];
        if (q[NAME_LEN - 1] != 0) {
            r = eng__set_err(err, -EINVAL, "task %u: name is not terminated", i);
            goto out;
        }
        memcpy(t->name, q, NAME_LEN);
        if (!valid_name(t->name) || find_task(p, t->name)) {
            r = eng__set_err(err, -EINVAL, "task %u: invalid or duplicate name", i);
            goto out;
        }
        t->n_prompts = get_u64(q + 64);
        t->n_tokens = get_u64(q + 72);
        q += TASK_HEADER_BYTES;
        t->sums = malloc(n_scores(p) * sizeof(double));
        if (!t->sums) {
            r = eng__set_err(err, -ENOMEM, "out of memory");
            goto out;
        }
        p->n_tasks++;
        if (t->n_prompts == 0) {
            r = eng__set_err(err, -EINVAL, "task '%s' has no prompts", t->name);
            goto out;
        }
        for (size_t j = 0; j < n_scores(p); j++, q += 8) {
            double d = get_f64(q);
            if (!isfinite(d) || d < 0) {
                r = eng__set_err(err, -EINVAL, "task '%s': score %zu is not a finite non-negative "
                                 "number", t->name, j);
                goto out;
            }
            t->sums[j] = d;
        }
    }
    if (m) {
        r = check_same_model(p, m->info.fingerprint, m->info.arch, m->info.n_layer,
                             m->info.n_ff, m->info.n_embd, m->info.n_vocab, err);
        if (r < 0)
            goto out;
    }
    *ret = p;
    p = NULL;
out:
    eng_profile_free(p);
    free(buf);
    return r;
}

int eng_profile_n_tasks(const eng_profile *p)
{
    return p->n_tasks;
}

const char *eng_profile_task(const eng_profile *p, int i, uint64_t *ret_n_prompts,
                             uint64_t *ret_n_tokens)
{
    if (i < 0 || i >= p->n_tasks)
        return NULL;
    if (ret_n_prompts)
        *ret_n_prompts = p->tasks[i].n_prompts;
    if (ret_n_tokens)
        *ret_n_tokens = p->tasks[i].n_tokens;
    return p->tasks[i].name;
}

int eng_profile_scores(const eng_profile *p, const char *task, int layer, double *out)
{
    if (layer < 0 || (uint32_t)layer >= p->n_layer)
        return -EINVAL;
    const size_t F = p->n_ff;
    if (task && strcmp(task, "*")) {
        const profile_task *t = find_task(p, task);
        if (!t)
            return -ENOENT;
        for (size_t n = 0; n < F; n++)
            out[n] = t->sums[(size_t)layer * F + n] / (double)t->n_prompts;
        return 0;
    }
    /* model-wide: each task normalised by its layer mean, then averaged */
    if (p->n_tasks == 0)
        return -ENOENT;
    for (size_t n = 0; n < F; n++)
        out[n] = 0;
    for (int i = 0; i < p->n_tasks; i++) {
        const double *s = p->tasks[i].sums + (size_t)layer * F;
        double mean = 0;
        for (size_t n = 0; n < F; n++)
            mean += s[n];
        mean /= (double)F;
        if (mean <= 0)
            continue;
        for (size_t n = 0; n < F; n++)
            out[n] += s[n] / mean / p->n_tasks;
    }
    return 0;
}

bool eng__profile_matches_shape(const eng_profile *p, const eng_plan_shape *sh, eng_error *err)
{
    return check_same_model(p, sh->fingerprint, sh->arch, (uint32_t)sh->n_layer,
                            (uint32_t)sh->n_ff, (uint32_t)sh->n_embd, sh->n_vocab, err) == 0;
}
