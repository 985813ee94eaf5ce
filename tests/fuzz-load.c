/* libFuzzer target for the files the daemon loads: a GGUF model (loaded,
 * then a short prefill and decode) or a task profile (loaded alone and for
 * a model, then a selectinfer plan made from it and a hot-swap). Not built
 * by meson nor run in CI; build and run it by hand with clang, the engine
 * from source with the sanitizers:
 *
 *   clang -g -O1 -D_GNU_SOURCE -fsanitize=fuzzer,address,undefined \
 *       -fno-sanitize-recover=all -Iengine tests/fuzz-load.c \
 *       $(ls engine/[a-z]*.c | grep -v backend-cuda.c) -lm -lpcre2-8 -lpthread \
 *       -o /tmp/fuzz-load
 *   SI_FUZZ_WHAT=model /tmp/fuzz-load -max_len=480000 -rss_limit_mb=4096 CORPUS
 *   SI_FUZZ_WHAT=profile SI_FUZZ_MODEL=tiny.gguf /tmp/fuzz-load -max_len=8192 CORPUS
 *
 * (clang 14 knows no "f16c" for __builtin_cpu_supports: build a copy of
 * backend-cpu.c with that test replaced by 1.) Seeds for models: small
 * si-synth files (--shape tiny-qwen2 --type q4_k, tiny-gemma3 --type q8_0,
 * tiny-phi3 --type q4_0); for profiles: si-profile run on the model of
 * SI_FUZZ_MODEL with a few prompts, and a merge of two. Most profile
 * inputs get their checksum made right (docs/profile-format.md), or every
 * mutation would stop there. Each input is written to /dev/shm and loaded
 * from there, as the daemon loads files. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "engine.h"

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static bool profiles;
static const char *model_path; /* profiles: the model they are made for */
static eng_model *base;

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc;
    (void)argv;
    const char *what = getenv("SI_FUZZ_WHAT");
    profiles = what && !strcmp(what, "profile");
    if (!profiles)
        return 0;
    model_path = getenv("SI_FUZZ_MODEL");
    eng_model_params mp = eng_model_params_default();
    mp.n_threads = 1;
    eng_error err;
    if (!model_path || eng_model_load(model_path, &mp, &base, &err) < 0) {
        fprintf(stderr, "SI_FUZZ_MODEL: %s\n", model_path ? err.msg : "not set");
        exit(1);
    }
    return 0;
}

static void run_model(const char *path, bool q8)
{
    eng_model_params mp = eng_model_params_default();
    mp.n_threads = 1;
    mp.q8_matrices = q8;
    eng_model *m = NULL;
    eng_error err;
    if (eng_model_load(path, &mp, &m, &err) < 0)
        return;
    eng_model_info in;
    eng_model_get_info(m, &in);
    eng_session_params sp = eng_session_params_default();
    sp.n_ctx = 16;
    eng_session *s = NULL;
    if (eng_session_new(m, &sp, &s) == 0) {
        int32_t toks[4];
        for (int i = 0; i < 4; i++)
            toks[i] = (i + 1) % in.n_vocab;
        if (eng_session_eval(s, toks, 3, 0) == 0)
            (void)eng_session_eval(s, toks + 3, 1, 0);
        size_t n;
        (void)eng_tokenize(m, "Hello, world", 12, ENG_TOK_ADD_SPECIAL, toks, 4, &n);
        eng_session_free(s);
    }
    eng_model_free(m);
}

static void run_profile(const char *path, int variant)
{
    eng_profile *p = NULL;
    eng_error err;
    if (eng_profile_load(path, NULL, &p, &err) == 0)
        eng_profile_free(p);
    if (eng_profile_load(path, base, &p, &err) < 0)
        return;
    uint64_t np, nt;
    const char *task = eng_profile_task(p, 0, &np, &nt);
    eng_model_info in;
    eng_model_get_info(base, &in);
    double *sc = malloc((size_t)in.n_ff * sizeof(*sc));
    if (sc) {
        (void)eng_profile_scores(p, task, 0, sc);
        (void)eng_profile_scores(p, "*", in.n_layer - 1, sc);
        free(sc);
    }
    eng_load_plan_params pp = eng_load_plan_params_default();
    pp.mode = ENG_SELECT_SELECTINFER;
    pp.profile = p;
    pp.task = task;
    pp.gamma = 0.7f;
    pp.delta = 0.3f;
    pp.layer_budget = variant == 1 ? ENG_BUDGET_MASS : variant == 2 ? ENG_BUDGET_SENS : ENG_BUDGET_UNIFORM;
    eng_model_params mp = eng_model_params_default();
    mp.n_threads = 1;
    mp.plan = &pp;
    eng_model *m = NULL;
    if (eng_model_load(model_path, &mp, &m, &err) == 0) {
        if (eng_profile_n_tasks(p) > 1) {
            eng_load_plan_params p2 = pp;
            p2.task = eng_profile_task(p, 1, &np, &nt);
            (void)eng_model_swap(m, &p2, NULL, &err);
        }
        eng_model_free(m);
    }
    eng_profile_free(p);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char path[64];
    snprintf(path, sizeof(path), "/dev/shm/si-fuzz-%d", (int)getpid());
    uint8_t *d = malloc(size ? size : 1);
    if (!d)
        return 0;
    memcpy(d, data, size);
    if (profiles && size >= 16 && !(size & 4)) { /* FNV-1a 64 of what precedes it */
        uint64_t h = 0xcbf29ce484222325ull;
        for (size_t i = 0; i < size - 8; i++) {
            h ^= d[i];
            h *= 0x100000001b3ull;
        }
        memcpy(d + size - 8, &h, 8);
    }
    FILE *f = fopen(path, "wb");
    const bool ok = f && fwrite(d, 1, size, f) == size;
    if (f)
        fclose(f);
    free(d);
    if (ok && profiles)
        run_profile(path, (int)(size % 3));
    else if (ok)
        run_model(path, size & 1);
    unlink(path);
    return 0;
}
