/* Helpers shared by the SelectInfer command-line tools (si-profile,
 * si-eval): the default model path, prompt rendering and /proc figures.
 * Header-only so each tool stays one translation unit.
 */
#ifndef SI_UTIL_H
#define SI_UTIL_H

#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine.h"

#define SI_DEFAULT_MODEL "SmolLM2-135M-Instruct.Q4_1.gguf"

/* $SI_MODEL, else where scripts/fetch-model.sh puts the default model.
 * Writes into buf (cap bytes) and returns it. */
static inline const char *si_default_model(char *buf, size_t cap)
{
    const char *env = getenv("SI_MODEL");
    if (env && *env)
        return env;
    const char *xdg = getenv("XDG_CACHE_HOME"), *home = getenv("HOME");
    if (xdg && *xdg)
        snprintf(buf, cap, "%s/selectinfer/%s", xdg, SI_DEFAULT_MODEL);
    else
        snprintf(buf, cap, "%s/.cache/selectinfer/%s", home ? home : ".", SI_DEFAULT_MODEL);
    return buf;
}

/* "cpu", "cuda" or "auto" (the --backend option of the tools); -EINVAL
 * for anything else. */
/* A whole file of at most max bytes, NUL-terminated (its length in *len),
 * or NULL: not there, unreadable or longer. Free it. */
static inline char *si_read_file(const char *path, size_t max, size_t *len)
{
    FILE *f = fopen(path, "rb");
    char *buf = f ? malloc(max + 1) : NULL;
    size_t n = buf ? fread(buf, 1, max + 1, f) : 0;
    const bool ok = buf && !ferror(f) && n <= max;
    if (f)
        fclose(f);
    if (!ok) {
        free(buf);
        return NULL;
    }
    buf[n] = '\0';
    *len = n;
    return buf;
}

static inline int si_backend_parse(const char *name, eng_backend_kind *ret)
{
    static const char *const names[] = { "cpu", "cuda", "auto" };
    static const eng_backend_kind kinds[] = { ENG_BACKEND_CPU, ENG_BACKEND_CUDA,
                                              ENG_BACKEND_AUTO };
    for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++)
        if (name && !strcmp(name, names[i])) {
            *ret = kinds[i];
            return 0;
        }
    return -EINVAL;
}

/* Tokenizes text into a malloc'ed array (*ret_toks, caller frees) of at
 * most max_tokens tokens; -E2BIG when longer. */
static inline int si_tokenize(const eng_model *m, const char *text, size_t len, unsigned flags,
                              size_t max_tokens, int32_t **ret_toks, size_t *ret_n)
{
    size_t n = 0;
    int r = eng_tokenize(m, text, len, flags, NULL, 0, &n);
    if (r < 0 && r != -ENOBUFS)
        return r;
    if (n > max_tokens)
        return -E2BIG;
    int32_t *t = malloc((n + 1) * sizeof(*t));
    if (!t)
        return -ENOMEM;
    if ((r = eng_tokenize(m, text, len, flags, t, n + 1, &n)) < 0) {
        free(t);
        return r;
    }
    *ret_toks = t;
    *ret_n = n;
    return 0;
}

/* A prompt-set record as the model sees it: system (may be "") and user
 * message rendered with the chat template, assistant header appended,
 * tokenized with special tokens. Falls back to the raw prompt when the
 * model has no chat template. */
static inline int si_render_prompt(const eng_model *m, const char *system, const char *user,
                                   size_t max_tokens, int32_t **ret_toks, size_t *ret_n)
{
    eng_chat_msg msgs[2];
    size_t nm = 0;
    if (system && *system)
        msgs[nm++] = (eng_chat_msg){ .role = "system", .content = system };
    msgs[nm++] = (eng_chat_msg){ .role = "user", .content = user };
    int len = eng_chat_apply(m, msgs, nm, true, NULL, 0);
    if (len == -ENOTSUP)
        return si_tokenize(m, user, strlen(user), ENG_TOK_ADD_SPECIAL, max_tokens, ret_toks,
                           ret_n);
    if (len < 0)
        return len;
    /* gpt-oss: the answer's final message opened, so that a reference is
     * scored (and an answer generated) in its format, not as the analysis
     * that would come first */
    static const char oss_final[] = "<|channel|>final<|message|>";
    const size_t extra = eng_model_chat_template(m) == ENG_CHAT_GPT_OSS ? sizeof(oss_final) - 1
                                                                         : 0;
    char *text = malloc((size_t)len + extra + 1);
    if (!text)
        return -ENOMEM;
    eng_chat_apply(m, msgs, nm, true, text, (size_t)len + 1);
    if (extra)
        memcpy(text + len, oss_final, extra + 1);
    int r = si_tokenize(m, text, (size_t)len + extra, ENG_TOK_ADD_SPECIAL | ENG_TOK_PARSE_SPECIAL,
                        max_tokens, ret_toks, ret_n);
    free(text);
    return r;
}

/* "Key:   N kB" from /proc/self/status, in bytes; 0 when absent. */
static inline uint64_t si_proc_status_bytes(const char *key)
{
    FILE *f = fopen("/proc/self/status", "r");
    char line[256];
    uint64_t v = 0;
    size_t kl = strlen(key);
    if (!f)
        return 0;
    while (fgets(line, sizeof line, f))
        if (!strncmp(line, key, kl) && line[kl] == ':') {
            v = strtoull(line + kl + 1, NULL, 10) * 1024;
            break;
        }
    fclose(f);
    return v;
}

/* Index of the largest logit (lowest index on ties). */
static inline int32_t si_argmax(const float *l, int n)
{
    int32_t best = 0;
    for (int i = 1; i < n; i++)
        if (l[i] > l[best])
            best = i;
    return best;
}

static inline void si_fmt_duration(char *buf, size_t cap, double s)
{
    if (!(s >= 0) || s > 360000)
        snprintf(buf, cap, "?");
    else if (s >= 3600)
        snprintf(buf, cap, "%dh%02dm", (int)(s / 3600), (int)(s / 60) % 60);
    else if (s >= 60)
        snprintf(buf, cap, "%dm%02ds", (int)(s / 60), (int)s % 60);
    else
        snprintf(buf, cap, "%.0fs", s);
}

#endif
