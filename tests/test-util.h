/* Small helpers shared by the C tests. */
#ifndef TEST_UTIL_H
#define TEST_UTIL_H

#include <stdio.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#define CHECK(cond)                                                              \
    do {                                                                         \
        if (!(cond)) {                                                           \
            fprintf(stderr, "%s:%d: check failed: %s\n", __FILE__, __LINE__, #cond); \
            exit(1);                                                             \
        }                                                                        \
    } while (0)

#define CHECKF(cond, ...)                                                        \
    do {                                                                         \
        if (!(cond)) {                                                           \
            fprintf(stderr, "%s:%d: check failed: %s: ", __FILE__, __LINE__, #cond); \
            fprintf(stderr, __VA_ARGS__);                                        \
            fputc('\n', stderr);                                                 \
            exit(1);                                                             \
        }                                                                        \
    } while (0)

/* The default model: $SI_MODEL, else the cache path scripts/fetch-model.sh uses. */
static inline const char *test_model_path(void)
{
    static char buf[4096];
    const char *p = getenv("SI_MODEL");
    if (p && *p)
        return p;
    const char *cache = getenv("XDG_CACHE_HOME");
    if (cache && *cache)
        snprintf(buf, sizeof(buf), "%s/selectinfer/SmolLM2-135M-Instruct.Q4_1.gguf", cache);
    else
        snprintf(buf, sizeof(buf), "%s/.cache/selectinfer/SmolLM2-135M-Instruct.Q4_1.gguf",
                 getenv("HOME") ? getenv("HOME") : "/root");
    return buf;
}

/* Writes the synthetic model `shape` (tools/si-synth at synth, seed 7, f16)
 * to a new temporary file whose name goes into path (at least 32 bytes);
 * the caller unlinks it. SI_EXE_WRAPPER (a command prefix: the tests
 * cross-built for aarch64 run under qemu, scripts/test-aarch64.sh) runs
 * the tool through it. */
static inline void test_synth_args(const char *synth, const char *shape, const char *type,
                                   const char *extra, char *path)
{
    snprintf(path, 32, "/tmp/si-synth-XXXXXX");
    int fd = mkstemp(path);
    CHECK(fd >= 0);
    close(fd);
    const char *wrap = getenv("SI_EXE_WRAPPER");
    char cmd[8192];
    snprintf(cmd, sizeof(cmd), "%s '%s' --shape '%s' --out '%s' --seed 7 --type %s%s", wrap ? wrap : "",
             synth, shape, path, type, extra);
    int st = system(cmd);
    CHECKF(st != -1 && WIFEXITED(st) && WEXITSTATUS(st) == 0, "si-synth --shape %s%s failed", shape, extra);
}

static inline void test_synth_type(const char *synth, const char *shape, const char *type,
                                   char *path)
{
    test_synth_args(synth, shape, type, "", path);
}

static inline void test_synth(const char *synth, const char *shape, char *path)
{
    test_synth_type(synth, shape, "f16", path);
}

#endif
