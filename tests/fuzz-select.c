/* libFuzzer target for selective loading and computation: a loading plan
 * and compute parameters from the input's first bytes, the rest as tokens
 * to prefill and decode, on one valid model with a valid profile. Where
 * fuzz-load.c distrusts the files, this one walks the combinations a
 * client and a configuration can ask for (every mode, layer budget, dense
 * layers, byte budget, gamma/delta/phi/alpha/cand, rank, comp, pick, the
 * session's copy, the KV type, batch sizes, context shifts, hot-swaps
 * between prefill and decode). It looks for crashes and sanitizer reports,
 * and aborts where the engine accepts a combination but an eval it lets
 * through returns non-finite logits or a share outside [0, 1]. Not built
 * by meson nor run in CI; build and run it by hand with clang, the engine
 * from source with the sanitizers (fuzz-load.c's note on clang 14 and
 * "f16c" applies):
 *
 *   clang -g -O1 -D_GNU_SOURCE -fsanitize=fuzzer,address,undefined \
 *       -fno-sanitize-recover=all -Iengine tests/fuzz-select.c \
 *       $(ls engine/[a-z]*.c | grep -v backend-cuda.c) -lm -lpcre2-8 -lpthread \
 *       -o /tmp/fuzz-select
 *   si-synth --shape tiny --type q4_1 --out /tmp/tiny-q41.gguf
 *   SI_FUZZ_MODEL=/tmp/tiny-q41.gguf /tmp/fuzz-select -max_len=512 CORPUS
 *
 * The profile is made here, from the model (two tasks of seeded scores),
 * so any model works. Q4_0/Q4_1 and f16 files take different kernels (the
 * exact pick's 4-bit rows, --q8's down rows): fuzz more than one. */
#include <errno.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine.h"

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define HEADER 16

static const char *model_path;
static eng_profile *prof;
static eng_model_info dense_info;

/* the last plan's model, kept while the next input asks for the same */
typedef struct plan_key {
    eng_load_plan_params pp;
    float sens[64];
    bool q8;
    int n_threads;
} plan_key;
static plan_key cached_key;
static eng_model *cached;

/* what the inputs reached: models loaded, sessions whose selective compute
 * (phi) was accepted and sessions that decoded with it, by pick;
 * hot-swaps and context shifts (test-select-combos checks each comes up) */
static struct {
    long loaded, computed[3], decoded[3], comp[3], swapped, shifted;
} reached;

/* xorshift64: the seeded scores here, test-select-combos' inputs */
static uint64_t next(uint64_t *x)
{
    *x ^= *x << 13;
    *x ^= *x >> 7;
    *x ^= *x << 17;
    return *x >> 16;
}

static float unit(uint8_t b) { return (float)b / 255.0f; }

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc;
    (void)argv;
    model_path = getenv("SI_FUZZ_MODEL");
    eng_model_params mp = eng_model_params_default();
    mp.n_threads = 1;
    eng_model *m = NULL;
    eng_error err;
    if (!model_path || eng_model_load(model_path, &mp, &m, &err) < 0) {
        fprintf(stderr, "SI_FUZZ_MODEL: %s\n", model_path ? err.msg : "not set");
        exit(1);
    }
    eng_model_get_info(m, &dense_info);
    const size_t n = (size_t)dense_info.n_layer * dense_info.n_ff;
    double *sums = malloc(n * sizeof(*sums));
    if (!sums || eng_profile_new(m, &prof) < 0)
        exit(1);
    /* two tasks of seeded scores, each a few prompts; heavy tails as real
     * profiles have, and ties (equal scores) that a ranking must break */
    uint64_t x = 0x2545f4914f6cdd1dull;
    for (int task = 0; task < 2; task++)
        for (int p = 0; p < 3; p++) {
            for (size_t i = 0; i < n; i++) {
                const uint64_t r = next(&x); /* 48 bits */
                const double u = (double)r / 281474976710656.0;
                sums[i] = (r & 15) == 0 ? 0.25 : 10.0 * u * u * u;
            }
            if (eng_profile_add_prompt(prof, task ? "b" : "a", sums, 40) < 0)
                exit(1);
        }
    free(sums);
    eng_model_free(m);
    return 0;
}


static void check_logits(const eng_session *s, const char *what)
{
    const float *lg = eng_session_logits(s, -1);
    for (int i = 0; lg && i < dense_info.n_vocab; i++)
        if (!isfinite(lg[i])) {
            fprintf(stderr, "%s: logit %d is %g\n", what, i, (double)lg[i]);
            abort();
        }
    const double share = eng_session_ffn_share(s);
    if (!(share >= 0.0 && share <= 1.0 + 1e-9)) {
        fprintf(stderr, "%s: share %g\n", what, share);
        abort();
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *d, size_t size)
{
    if (size < HEADER)
        return 0;
    const int NL = dense_info.n_layer, V = dense_info.n_vocab;

    /* the plan */
    plan_key k;
    memset(&k, 0, sizeof(k));
    eng_load_plan_params *pp = &k.pp;
    *pp = eng_load_plan_params_default();
    pp->mode = (eng_select_mode)(d[0] % 5);
    pp->layer_budget = (eng_layer_budget)(d[0] / 5 % 3);
    pp->sketch = (d[0] >> 6) & 1;
    k.q8 = d[0] >> 7;
    pp->profile = prof;
    pp->task = (d[3] >> 6) == 0 ? "a" : (d[3] >> 6) == 1 ? "b" : (d[3] >> 6) == 2 ? "*" : NULL;
    pp->gamma = (d[1] + 1) / 256.0f;
    pp->delta = unit(d[2]);
    pp->dense_first = d[3] & 3;
    pp->dense_last = (d[3] >> 2) & 3;
    pp->score = (eng_score)((d[3] >> 4) & 1);
    if ((d[3] >> 5) & 1) /* a byte budget: from none to more than dense */
        pp->budget_bytes = (uint64_t)((double)dense_info.bytes_weights * unit(d[15]) * 1.2) + 1;
    pp->seed = d[13];
    if (pp->layer_budget == ENG_BUDGET_SENS && (d[13] & 1) && NL <= 64) {
        for (int l = 0; l < NL; l++)
            k.sens[l] = 0.01f + (float)((d[13] * 31 + l * 17) % 97) / 50.0f;
        pp->layer_sens = k.sens;
    }
    k.n_threads = 1 + (d[14] & 1);

    /* the same plan as the last input: its model (a fresh one otherwise) */
    plan_key kc = cached_key;
    kc.pp.layer_sens = NULL;
    plan_key kn = k;
    kn.pp.layer_sens = NULL;
    if (!cached || memcmp(&kc, &kn, sizeof(kn)) != 0) {
        eng_model_free(cached);
        cached = NULL;
        eng_model_params mp = eng_model_params_default();
        mp.n_threads = k.n_threads;
        mp.q8_matrices = k.q8;
        mp.plan = pp;
        eng_error err;
        if (eng_model_load(model_path, &mp, &cached, &err) < 0) {
            cached = NULL;
            return 0;
        }
        cached_key = k;
    }
    eng_model *m = cached;
    reached.loaded++;

    /* the session and how it computes */
    eng_session_params sp = eng_session_params_default();
    sp.n_batch = 1 + d[8] % 32;
    sp.kv_type = (eng_kv_type)((d[8] >> 5) & 1);
    sp.n_ctx = 8 + d[9] % 120;
    eng_session *s = NULL;
    if (eng_session_new(m, &sp, &s) < 0)
        return 0;
    eng_compute_params cp = eng_compute_params_default();
    cp.phi = unit(d[4]);
    cp.alpha = (d[5] + 1) / 256.0f;
    cp.rank = (eng_rank)(d[6] % 4);
    cp.comp = (eng_comp)(d[6] / 4 % 3);
    cp.pick = (eng_pick)(d[6] / 12 % 3);
    cp.copy_dynamic = !((d[6] / 36) & 1);
    cp.cand = unit(d[7]);
    if (eng_session_set_compute(s, &cp) < 0) {
        /* refused: the defaults must still work */
        cp = eng_compute_params_default();
        if (eng_session_set_compute(s, &cp) < 0)
            abort();
    }
    const bool sparse = cp.phi > 0.0f && cp.phi < 1.0f;
    if (sparse)
        reached.computed[cp.pick]++;

    /* the tokens: prompt, then decode one at a time */
    const size_t n_tok = (size_t)(size - HEADER) / 2;
    int32_t *tok = malloc((n_tok ? n_tok : 1) * sizeof(*tok));
    if (!tok) {
        eng_session_free(s);
        return 0;
    }
    for (size_t i = 0; i < n_tok; i++)
        tok[i] = (int32_t)((d[HEADER + 2 * i] | d[HEADER + 2 * i + 1] << 8) % V);
    const size_t n_prompt = n_tok ? 1 + d[10] % n_tok : 0;
    const uint8_t ops = d[11];
    int rc = n_prompt ? eng_session_eval(s, tok, n_prompt, (ops & 1) ? ENG_EVAL_ALL_LOGITS : 0) : -1;
    if (rc == 0)
        check_logits(s, "prefill");
    /* a hot-swap to the other task between prefill and decode: the
     * session's context is stale (-ESTALE) until it is reset */
    if ((ops & 2) && (pp->mode == ENG_SELECT_SELECTINFER || pp->mode == ENG_SELECT_LOAD_ONLY)) {
        eng_load_plan_params sw = *pp;
        sw.task = pp->task && !strcmp(pp->task, "a") ? "b" : "a";
        eng_error err;
        if (eng_model_swap(m, &sw, NULL, &err) == 0) {
            cached_key.pp.task = sw.task;
            reached.swapped++;
            /* (a full context may say -ENOSPC first) */
            if (rc == 0 && (rc = eng_session_eval(s, tok, 1, 0)) != -ESTALE && rc != -ENOSPC) {
                fprintf(stderr, "eval after a swap: %d, not -ESTALE\n", rc);
                abort();
            }
            eng_session_reset(s);
            rc = n_prompt ? eng_session_eval(s, tok, n_prompt, 0) : -1;
            if (rc == 0)
                check_logits(s, "prefill after a swap");
        }
    }
    bool decoded = false;
    for (size_t i = n_prompt; rc == 0 && i < n_tok; i++) {
        rc = eng_session_eval(s, tok + i, 1, 0);
        if (rc == 0) {
            check_logits(s, "decode");
            decoded = true;
        } else if (rc == -ENOSPC && (ops & 4)) { /* a full context: shift, go on */
            const int past = eng_session_n_past(s);
            const int keep = ops >> 5 < past ? ops >> 5 : 0;
            if (eng_session_shift(s, keep, (past - keep) / 2 > 0 ? (past - keep) / 2 : 1) == 0) {
                reached.shifted++;
                rc = eng_session_eval(s, tok + i, 1, 0);
            }
            if (rc == 0)
                check_logits(s, "decode after a shift");
        }
    }
    if (decoded && sparse) {
        reached.decoded[cp.pick]++;
        reached.comp[cp.comp]++;
    }
    (void)eng_session_copy_bytes(s);
    eng_session_free(s);
    free(tok);
    return 0;
}
