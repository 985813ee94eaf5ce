/* SelectInfer: loading plans (which neurons become resident) and the
 * per-request dynamic selection at prefill (which of them decode computes).
 * SELECTINFER.md defines both; the choices that depart from the published
 * code are parameters (eng_rank, dense_first/dense_last) so the evaluation
 * can compare them.
 */
#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "error.h"
#include "gguf.h"
#include "linfit.h"
#include "model.h"
#include "quants.h"
#include "select.h"
#include "topk.h"

static const char *const mode_names[] = {
    [ENG_SELECT_DENSE] = "dense",         [ENG_SELECT_LOAD_ONLY] = "load-only",
    [ENG_SELECT_RANDOM] = "random-load",  [ENG_SELECT_COREINFER] = "coreinfer",
    [ENG_SELECT_SELECTINFER] = "selectinfer",
};

/* names[i] for i, or "unknown"; the index of a name, or -EINVAL */
static const char *name_of(const char *const *names, size_t n, unsigned i)
{
    return i < n ? names[i] : "unknown";
}

static int index_of(const char *const *names, size_t n, const char *name)
{
    for (size_t i = 0; name && i < n; i++)
        if (!strcmp(name, names[i]))
            return (int)i;
    return -EINVAL;
}

#define N_NAMES(a) (sizeof(a) / sizeof((a)[0]))

const char *eng_select_mode_name(eng_select_mode mode)
{
    return name_of(mode_names, N_NAMES(mode_names), (unsigned)mode);
}

int eng_select_mode_parse(const char *name, eng_select_mode *ret)
{
    int i = index_of(mode_names, N_NAMES(mode_names), name);
    if (i < 0 && name && !strcmp(name, "random"))
        i = ENG_SELECT_RANDOM;
    if (i < 0)
        return i;
    *ret = (eng_select_mode)i;
    return 0;
}

static const char *const pick_names[] = { "request", "token", "exact" };

const char *eng_pick_name(eng_pick pick)
{
    return name_of(pick_names, N_NAMES(pick_names), (unsigned)pick);
}

int eng_pick_parse(const char *name, eng_pick *ret)
{
    const int i = index_of(pick_names, N_NAMES(pick_names), name);
    if (i < 0)
        return i;
    *ret = (eng_pick)i;
    return 0;
}

static const char *const comp_names[] = { "none", "mean", "linear" };

const char *eng_comp_name(eng_comp comp)
{
    return name_of(comp_names, N_NAMES(comp_names), (unsigned)comp);
}

int eng_comp_parse(const char *name, eng_comp *ret)
{
    const int i = index_of(comp_names, N_NAMES(comp_names), name);
    if (i < 0)
        return i;
    *ret = (eng_comp)i;
    return 0;
}

eng_load_plan_params eng_load_plan_params_default(void)
{
    return (eng_load_plan_params){ .mode = ENG_SELECT_DENSE, .gamma = 1.0f, .delta = 0.0f };
}

eng_compute_params eng_compute_params_default(void)
{
    return (eng_compute_params){ .phi = 0.0f, .alpha = 0.2f, .rank = ENG_RANK_ABS,
                                 .copy_dynamic = true };
}

/* ---- plans ---- */

void eng__plan_free(eng_plan *p)
{
    if (!p)
        return;
    for (int l = 0; l < p->n_layer; l++) {
        if (p->loaded)
            free(p->loaded[l]);
        if (p->is_static)
            free(p->is_static[l]);
    }
    free(p->loaded);
    free(p->is_static);
    free(p->layer_sens);
    free(p->n_loaded);
    free(p->sparse);
    free(p);
}

static int cmp_i32(const void *a, const void *b)
{
    int32_t x = *(const int32_t *)a, y = *(const int32_t *)b;
    return (x > y) - (x < y);
}

/* Descending by score, ascending by id on ties (deterministic). */
static int cmp_score_desc(const void *a, const void *b, void *ctx)
{
    const double *s = ctx;
    int32_t x = *(const int32_t *)a, y = *(const int32_t *)b;
    if (s[x] != s[y])
        return s[x] > s[y] ? -1 : 1;
    return (x > y) - (x < y);
}

static uint64_t splitmix64(uint64_t *state)
{
    uint64_t z = (*state += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

static int round_count(double frac, int n)
{
    long k = lround(frac * n);
    return (int)(k < 0 ? 0 : k > n ? n : k);
}

/* Per-layer neuron counts that keep the same share m of every sparsified
 * layer's model-wide score mass, with m chosen (by bisection) so the total is
 * the uniform plan's n_sparse * n_load. Layers whose mass is spread thin get
 * more neurons, layers dominated by a few get fewer. NULL on OOM. */
static int *mass_budget(const eng_profile *prof, const eng_plan_shape *sh, int first, int n_sparse,
                        int n_load, int n_static, eng_score score)
{
    const int F = sh->n_ff;
    double *cum = malloc((size_t)n_sparse * F * sizeof(double)); /* cumulative share, sorted */
    double *sc = malloc((size_t)F * sizeof(double));
    int32_t *ord = malloc((size_t)F * sizeof(int32_t));
    int *counts = malloc((size_t)sh->n_layer * sizeof(int));
    if (!cum || !sc || !ord || !counts) {
        free(cum), free(sc), free(ord), free(counts);
        return NULL;
    }
    for (int i = 0; i < n_sparse; i++) {
        int l = first + i;
        eng_profile_scores(prof, "*", l, sc);
        if (score == ENG_SCORE_CONTRIB && sh->down_norm)
            for (int n = 0; n < F; n++)
                sc[n] *= sh->down_norm[(size_t)l * F + n];
        for (int n = 0; n < F; n++)
            ord[n] = n;
        qsort_r(ord, F, sizeof(int32_t), cmp_score_desc, sc);
        double total = 0, run = 0;
        for (int n = 0; n < F; n++)
            total += sc[n];
        for (int k = 0; k < F; k++) {
            run += sc[ord[k]];
            cum[(size_t)i * F + k] = total > 0 ? run / total : (double)(k + 1) / F;
        }
    }
    /* count for layer i at share m: the fewest top neurons reaching m */
    double lo = 0, hi = 1;
    long target = (long)n_sparse * n_load;
    for (int it = 0; it < 60; it++) {
        double m = (lo + hi) / 2;
        long sum = 0;
        for (int i = 0; i < n_sparse; i++) {
            int k = 0;
            while (k < F - 1 && cum[(size_t)i * F + k] < m)
                k++;
            k++;
            sum += k < n_static ? n_static : k;
        }
        if (sum < target)
            lo = m;
        else
            hi = m;
    }
    long sum = 0;
    for (int i = 0; i < n_sparse; i++) {
        int k = 0;
        while (k < F - 1 && cum[(size_t)i * F + k] < hi)
            k++;
        k++;
        counts[first + i] = k < n_static ? n_static : k;
        sum += counts[first + i];
    }
    /* bisection overshoots by a few neurons at most: take them back from the
     * largest layers so the plan never exceeds the uniform one's memory */
    while (sum > target) {
        int big = first;
        for (int i = 0; i < n_sparse; i++)
            if (counts[first + i] > counts[big])
                big = first + i;
        if (counts[big] <= n_static)
            break;
        counts[big]--;
        sum--;
    }
    free(cum);
    free(sc);
    free(ord);
    return counts;
}

void eng__split_drops(const float *sens, const bool *sparse, int L, long total, int max_drop,
                      int *drop)
{
    long cap = 0;
    for (int l = 0; l < L; l++) {
        drop[l] = 0;
        cap += sparse[l] ? max_drop : 0;
    }
    if (total <= 0 || max_drop <= 0)
        return;
    if (total >= cap) {
        for (int l = 0; l < L; l++)
            drop[l] = sparse[l] ? max_drop : 0;
        return;
    }
    /* x_l(c) = min(max_drop, c / sens_l) grows with c: bisect c so the sum is total */
    double lo = 0, hi = 1;
    for (;;) {
        double sum = 0;
        for (int l = 0; l < L; l++)
            if (sparse[l])
                sum += fmin(max_drop, hi / fmax(sens[l], 1e-12));
        if (sum >= total || hi > 1e300)
            break;
        hi *= 2;
    }
    for (int it = 0; it < 200; it++) {
        double mid = (lo + hi) / 2, sum = 0;
        for (int l = 0; l < L; l++)
            if (sparse[l])
                sum += fmin(max_drop, mid / fmax(sens[l], 1e-12));
        if (sum < total)
            lo = mid;
        else
            hi = mid;
    }
    /* whole neurons: floor, then the remainder to the largest fractions */
    double frac[L > 0 ? L : 1];
    long sum = 0;
    for (int l = 0; l < L; l++) {
        if (!sparse[l]) {
            frac[l] = -1;
            continue;
        }
        double x = fmin(max_drop, hi / fmax(sens[l], 1e-12));
        drop[l] = (int)floor(x);
        frac[l] = drop[l] < max_drop ? x - drop[l] : -1;
        sum += drop[l];
    }
    while (sum < total) {
        int best = -1;
        for (int l = 0; l < L; l++)
            if (frac[l] >= 0 && (best < 0 || frac[l] > frac[best]))
                best = l;
        if (best < 0)
            break;
        drop[best]++;
        frac[best] = drop[best] < max_drop ? 0 : -1;
        sum++;
    }
    while (sum > total) { /* bisection lands at or just above total */
        int best = -1;
        for (int l = 0; l < L; l++)
            if (sparse[l] && drop[l] > 0 && (best < 0 || drop[l] > drop[best]))
                best = l;
        drop[best]--;
        sum--;
    }
}

int eng__plan_build(const eng_plan_shape *sh, const eng_load_plan_params *pp, eng_plan **ret,
                    eng_error *err)
{
    const int L = sh->n_layer, F = sh->n_ff;
    eng_load_plan_params prm = pp ? *pp : eng_load_plan_params_default();
    bool uses_profile = prm.mode == ENG_SELECT_LOAD_ONLY || prm.mode == ENG_SELECT_SELECTINFER;
    bool loads_all = prm.mode == ENG_SELECT_DENSE || prm.mode == ENG_SELECT_COREINFER;

    if ((unsigned)prm.layer_budget > ENG_BUDGET_SENS)
        return eng__set_err(err, -EINVAL, "unknown layer budget %d", (int)prm.layer_budget);
    if (prm.layer_budget == ENG_BUDGET_SENS && prm.layer_sens) {
        for (int l = 0; l < L; l++)
            if (!(prm.layer_sens[l] > 0) || !isfinite(prm.layer_sens[l]))
                return eng__set_err(err, -EINVAL, "layer %d: sensitivity %g is not a positive number",
                                    l, prm.layer_sens[l]);
    }
    if ((unsigned)prm.score > ENG_SCORE_CONTRIB)
        return eng__set_err(err, -EINVAL, "unknown score %d", (int)prm.score);
    if ((unsigned)prm.mode > ENG_SELECT_SELECTINFER)
        return eng__set_err(err, -EINVAL, "unknown selection mode %d", (int)prm.mode);
    if (prm.dense_first < 0 || prm.dense_last < 0 || prm.dense_first + prm.dense_last > L)
        return eng__set_err(err, -EINVAL, "dense layers %d + %d exceed the model's %d layers",
                            prm.dense_first, prm.dense_last, L);
    int n_sparse = L - prm.dense_first - prm.dense_last;
    if (prm.sketch && !sh->sketch_per_neuron)
        return eng__set_err(err, -ENOTSUP,
                            "a neuron sketch needs n_embd to be a multiple of 32 (it is %d)",
                            sh->n_embd);
    /* a sparsified layer's neuron costs its sketch too */
    const size_t sparse_bpn = sh->bytes_per_neuron + (prm.sketch ? sh->sketch_per_neuron : 0);
    if (loads_all) {
        prm.gamma = 1.0f;
        if (prm.mode == ENG_SELECT_COREINFER || prm.mode == ENG_SELECT_DENSE)
            prm.delta = 0.0f;
    } else if (prm.budget_bytes > 0) {
        /* (neurons of the dense layers and of the sparsified ones) */
        uint64_t n_dense = 0, n_sp = 0;
        for (int l = 0; l < L; l++) {
            const bool sp = l >= prm.dense_first && l < L - prm.dense_last;
            *(sp ? &n_sp : &n_dense) += (uint64_t)(sh->layer_ff ? sh->layer_ff[l] : F);
        }
        uint64_t dense_ffn = n_dense * sh->bytes_per_neuron;
        uint64_t floor_bytes = sh->bytes_fixed + dense_ffn;
        uint64_t per_gamma = n_sp * sparse_bpn;
        uint64_t min_bytes = floor_bytes + (uint64_t)(prm.delta * (double)per_gamma);
        if (prm.budget_bytes < min_bytes || per_gamma == 0)
            return eng__set_err(err, -ENOSPC,
                                "memory budget %llu bytes is below the minimum %llu bytes "
                                "(weights outside the FFN, dense layers and the static neurons)",
                                (unsigned long long)prm.budget_bytes, (unsigned long long)min_bytes);
        double g = (double)(prm.budget_bytes - floor_bytes) / (double)per_gamma;
        /* floor to whole neurons so the plan never exceeds the budget */
        prm.gamma = (float)(g > 1.0 ? 1.0 : floor(g * F) / F);
    }
    if (!(prm.gamma > 0.0f && prm.gamma <= 1.0f) || !(prm.delta >= 0.0f && prm.delta <= prm.gamma))
        return eng__set_err(err, -EINVAL, "need 0 < gamma <= 1 and 0 <= delta <= gamma (gamma %g, delta %g)",
                            prm.gamma, prm.delta);

    double *base = NULL, *second = NULL;
    int32_t *order = NULL;
    int *layer_load = NULL; /* per-layer counts under ENG_BUDGET_MASS */
    eng_plan *p = calloc(1, sizeof(*p));
    int r = -ENOMEM;
    if (!p)
        return eng__set_err(err, -ENOMEM, "out of memory");
    p->n_layer = L;
    p->n_ff = F;
    p->sparse = calloc(L, sizeof(*p->sparse));
    p->loaded = calloc(L, sizeof(*p->loaded));
    p->n_loaded = calloc(L, sizeof(*p->n_loaded));
    p->is_static = calloc(L, sizeof(*p->is_static));
    base = malloc(F * sizeof(double));
    second = malloc(F * sizeof(double));
    order = malloc(F * sizeof(int32_t));
    if (!p->sparse || !p->loaded || !p->n_loaded || !p->is_static || !base || !second || !order)
        goto fail;

    if (uses_profile) {
        if (!prm.profile) {
            r = eng__set_err(err, -EINVAL, "selection mode '%s' needs a profile",
                             eng_select_mode_name(prm.mode));
            goto fail;
        }
        if (!eng__profile_matches_shape(prm.profile, sh, err)) {
            r = -EMEDIUMTYPE;
            goto fail;
        }
        const char *task = prm.task && *prm.task ? prm.task : "*";
        if (eng_profile_scores(prm.profile, task, 0, base) < 0) {
            char have[160] = "";
            for (int i = 0; i < eng_profile_n_tasks(prm.profile); i++) {
                size_t k = strlen(have);
                snprintf(have + k, sizeof(have) - k, "%s%s", i ? ", " : "",
                         eng_profile_task(prm.profile, i, NULL, NULL));
            }
            r = eng__set_err(err, -ENOENT, "the profile has no task '%s' (it has: %s)", task, have);
            goto fail;
        }
    }

    int n_load = round_count(prm.gamma, F), n_static = round_count(prm.delta, F);
    /* per-layer budgets share one count over n_ff-wide layers */
    if (sh->layer_ff && prm.layer_budget != ENG_BUDGET_UNIFORM && uses_profile) {
        r = eng__set_err(err, -ENOTSUP, "per-layer budgets over FFNs of different widths "
                         "are not supported (uniform only)");
        goto fail;
    }
    uint64_t seed = prm.seed;
    uint64_t total_loaded = 0, total_all = 0;
    if (prm.layer_budget == ENG_BUDGET_MASS && uses_profile && n_sparse > 0) {
        layer_load = mass_budget(prm.profile, sh, prm.dense_first, n_sparse, n_load, n_static,
                                 prm.score);
        if (!layer_load)
            goto fail;
    }
    if (prm.layer_budget == ENG_BUDGET_SENS && uses_profile) {
        /* gamma is model-wide: L * gamma * F neurons in all (with a byte
         * budget: what fits it), the dense layers' included; the sparsified
         * layers leave out the rest, spread by sensitivity, each keeping at
         * least its static neurons */
        p->layer_sens = malloc((size_t)L * sizeof(float));
        layer_load = malloc((size_t)L * sizeof(int));
        if (!p->layer_sens || !layer_load)
            goto fail;
        for (int l = 0; l < L; l++) {
            p->layer_sens[l] = prm.layer_sens ? prm.layer_sens[l] : 1.0f;
            p->sparse[l] = l >= prm.dense_first && l < L - prm.dense_last;
        }
        long total = prm.budget_bytes > 0 ? (long)(L - n_sparse) * F + (long)n_sparse * n_load
                                          : (long)L * n_load;
        long drop = (long)L * F - total; /* dense layers leave out nothing */
        eng__split_drops(p->layer_sens, p->sparse, L, drop, F - n_static, layer_load);
        for (int l = 0; l < L; l++)
            layer_load[l] = F - layer_load[l];
    }
    for (int l = 0; l < L; l++) {
        bool sparse = l >= prm.dense_first && l < L - prm.dense_last;
        p->sparse[l] = sparse;
        p->is_static[l] = calloc(F, 1);
        p->loaded[l] = malloc(F * sizeof(int32_t));
        if (!p->is_static[l] || !p->loaded[l])
            goto fail;
        /* (a layer of its own width: gamma and delta of its neurons) */
        const int FL = sh->layer_ff ? sh->layer_ff[l] : F;
        const int n_load_l = sh->layer_ff ? round_count(prm.gamma, FL) : n_load;
        const int n_static_l = sh->layer_ff ? round_count(prm.delta, FL) : n_static;
        total_all += (uint64_t)FL;
        int nl = 0;
        if (!sparse || loads_all) {
            for (int n = 0; n < FL; n++)
                p->loaded[l][nl++] = n;
        } else {
            uint8_t *taken = p->is_static[l]; /* reused below: 1 static, 2 loaded */
            for (int n = 0; n < FL; n++)
                order[n] = n;
            if (prm.mode == ENG_SELECT_RANDOM) {
                for (int n = FL - 1; n > 0; n--) {
                    int j = (int)(splitmix64(&seed) % (uint64_t)(n + 1));
                    int32_t t = order[n];
                    order[n] = order[j];
                    order[j] = t;
                }
                for (int i = 0; i < n_load_l; i++)
                    taken[order[i]] = i < n_static_l ? 1 : 2;
            } else {
                const char *task = prm.task && *prm.task ? prm.task : "*";
                eng_profile_scores(prm.profile, task, l, base);
                eng_profile_scores(prm.profile, "*", l, second);
                if (prm.score == ENG_SCORE_CONTRIB && sh->down_norm)
                    for (int n = 0; n < F; n++) {
                        base[n] *= sh->down_norm[(size_t)l * F + n];
                        second[n] *= sh->down_norm[(size_t)l * F + n];
                    }
                qsort_r(order, FL, sizeof(int32_t), cmp_score_desc, base);
                for (int i = 0; i < n_static_l; i++)
                    taken[order[i]] = 1;
                int have = n_static_l, want = layer_load ? layer_load[l] : n_load_l;
                for (int n = 0; n < FL; n++)
                    order[n] = n;
                qsort_r(order, FL, sizeof(int32_t), cmp_score_desc, second);
                for (int i = 0; i < FL && have < want; i++)
                    if (!taken[order[i]]) {
                        taken[order[i]] = 2;
                        have++;
                    }
            }
            for (int n = 0; n < FL; n++) {
                if (taken[n])
                    p->loaded[l][nl++] = n;
                taken[n] = taken[n] == 1;
            }
        }
        p->n_loaded[l] = nl;
        total_loaded += nl;
        qsort(p->loaded[l], nl, sizeof(int32_t), cmp_i32);
    }

    p->info.mode = prm.mode;
    snprintf(p->info.task, sizeof(p->info.task), "%s",
             uses_profile ? (prm.task && *prm.task ? prm.task : "*") : "");
    p->info.gamma = prm.gamma;
    p->info.delta = prm.delta;
    p->info.dense_first = prm.dense_first;
    p->info.dense_last = prm.dense_last;
    p->info.neurons_loaded = total_loaded;
    p->info.neurons_total = total_all;
    p->info.sketch = prm.sketch;
    for (int l = 0; prm.sketch && l < L; l++)
        if (p->sparse[l])
            p->info.bytes_sketch += (uint64_t)p->n_loaded[l] * sh->sketch_per_neuron;
    p->info.bytes_ffn = total_loaded * sh->bytes_per_neuron + p->info.bytes_sketch;
    free(layer_load);
    free(base);
    free(second);
    free(order);
    *ret = p;
    return 0;
fail:
    if (r == -ENOMEM)
        eng__set_err(err, r, "out of memory building the loading plan");
    free(layer_load);
    free(base);
    free(second);
    free(order);
    eng__plan_free(p);
    return r;
}

/* ---- per-session dynamic selection ---- */

static bool phi_active(const eng_session *s)
{
    const eng_model *m = s->model;
    return s->compute.phi > 0.0f && s->compute.phi < m->plan.gamma;
}

/* ENG_PICK_EXACT's share of candidates per request: cand, at least phi
 * (below it the candidates are phi's, and k takes them all: the
 * per-request pick); 0 where every loaded neuron is one. */
static float cand_of(const eng_compute_params *p, const eng_model *m)
{
    if (p->pick != ENG_PICK_EXACT || !(p->cand > 0.0f))
        return 0.0f;
    const float c = p->cand > p->phi ? p->cand : p->phi;
    return c < m->plan.gamma ? c : 0.0f;
}

static bool cand_active(const eng_session *s)
{
    return cand_of(&s->compute, s->model) > 0.0f;
}

/* Whether prefill casts the votes that choose per request: the
 * per-request pick's neurons, or the exact pick's candidates. */
static bool casts_votes(const eng_session *s)
{
    return phi_active(s) && (s->compute.pick == ENG_PICK_REQUEST || cand_active(s));
}

/* The per-session buffers of ENG_COMP_MEAN, allocated on first use. */
static int comp_alloc(eng_session *s)
{
    const eng_model *m = s->model;
    const int L = m->info.n_layer, F = m->info.n_ff, E = m->info.n_embd;
    if (!s->act_sum && !(s->act_sum = calloc(L, sizeof(*s->act_sum))))
        return -ENOMEM;
    if (!s->bias_buf && !(s->bias_buf = calloc(L, sizeof(*s->bias_buf))))
        return -ENOMEM;
    for (int l = 0; l < L; l++) {
        if (!s->act_sum[l] && !(s->act_sum[l] = calloc((size_t)F, sizeof(double))))
            return -ENOMEM;
        if (!s->bias_buf[l] && !(s->bias_buf[l] = malloc((size_t)E * sizeof(float))))
            return -ENOMEM;
    }
    return 0; /* partial allocations are freed with the session */
}

/* ENG_COMP_LINEAR: the rank of its maps, how many of the targets' leading
 * directions the fit works in, its ridge (relative to the inputs' mean
 * squared norm) and the prompt positions it fits on (the latest). Chosen on
 * 40 summarize prompts of SmolLM2 (docs/selectinfer.md): rank 8 lost 0.03
 * of agreement, 32 gained 0.003 for twice the bytes; ridge 0.01-0.3 within
 * 0.01. */
#define LIN_RANK 16
#define LIN_DIRS 32
#define LIN_RIDGE 0.1
#define LIN_ROWS 256
/* Fewer prompt positions than this fit no map: the request gets
 * ENG_COMP_MEAN's bias instead, and phi's neurons whole. On SmolLM2's
 * short prompts (qa, chat: tens of tokens) the map, whose bytes cost 2 %
 * of n_ff a layer, gained nothing (docs/selectinfer.md). */
#define LIN_MIN_ROWS 64

/* ENG_COMP_LINEAR's rows and maps, allocated on first use. */
static int lin_alloc(eng_session *s)
{
    const eng_model *m = s->model;
    const int L = m->info.n_layer, E = m->info.n_embd;
    s->lin_cap = LIN_ROWS;
    if (!s->lin && !(s->lin = calloc(L, sizeof(*s->lin))))
        return -ENOMEM;
    if (!s->lin_z && !(s->lin_z = eng__session_alloc(s, (size_t)s->n_batch * LIN_RANK * sizeof(float))))
        return -ENOMEM;
    if (!s->lin_y && !(s->lin_y = eng__session_alloc(s, (size_t)s->n_batch * E * sizeof(float))))
        return -ENOMEM;
    /* every layer, for as many slots as its buffers hold: a swap may
     * change both which layers are sparsified and their slots (pages are
     * touched only where prefill writes rows) */
    for (int l = 0; l < L; l++) {
        eng_lin *g = &s->lin[l];
        g->p = (eng_weight){ .dtype = ENG_DTYPE_F16, .rows = LIN_RANK, .cols = E, .data = g->p.data };
        g->v = (eng_weight){ .dtype = ENG_DTYPE_F16, .rows = E, .cols = LIN_RANK, .data = g->v.data };
        if (!g->p.data && !(g->p.data = malloc((size_t)E * LIN_RANK * sizeof(uint16_t))))
            return -ENOMEM;
        if (!g->v.data && !(g->v.data = malloc((size_t)E * LIN_RANK * sizeof(uint16_t))))
            return -ENOMEM;
        if (!g->x && !(g->x = malloc((size_t)s->lin_cap * E * sizeof(float))))
            return -ENOMEM;
        if (!g->a) {
            g->slots = m->layers[l].slot_cap > m->layers[l].ffn.n_slots ? m->layers[l].slot_cap
                                                                        : m->layers[l].ffn.n_slots;
            if (!(g->a = malloc((size_t)s->lin_cap * g->slots * sizeof(uint16_t))))
                return -ENOMEM;
        }
    }
    return 0;
}

static int *layer_counts(const eng_model *m, float phi, bool per_token, int *n_compute);
static long long exact_pick_k(const eng_model *m, int n_compute, const int *count, int n_cand,
                              const int *cand, long long extra);

/* The bytes a layer's ENG_COMP_LINEAR map adds to each decode step (P and
 * V in f16): they count against phi as the sketch's do. */
static long long lin_bytes(const eng_model *m, eng_comp comp)
{
    return comp == ENG_COMP_LINEAR ? 2LL * m->info.n_embd * LIN_RANK * (long long)sizeof(uint16_t)
                                   : 0;
}

int eng_session_set_compute(eng_session *s, const eng_compute_params *c)
{
    eng_compute_params p = c ? *c : eng_compute_params_default();
    if (!(p.phi >= 0.0f && p.phi <= 1.0f) || !(p.alpha > 0.0f && p.alpha <= 1.0f) ||
        (unsigned)p.rank > ENG_RANK_MASS || (unsigned)p.comp > ENG_COMP_LINEAR ||
        (unsigned)p.pick > ENG_PICK_EXACT || !(p.cand >= 0.0f && p.cand <= 1.0f) ||
        (p.cand > 0.0f && p.pick != ENG_PICK_EXACT))
        return -EINVAL;
    /* per token: a sketch to pick with; nothing is left out for good, so
     * there is nothing to compensate */
    if (p.pick == ENG_PICK_TOKEN && (!s->model->plan.sketch || p.comp != ENG_COMP_NONE))
        return -EINVAL;
    /* exact: compensation only for what is not a candidate, fixed per
     * request as the per-request pick's */
    const float cand = cand_of(&p, s->model);
    if (p.pick == ENG_PICK_EXACT && p.comp != ENG_COMP_NONE && !(cand > 0.0f && p.phi > 0.0f))
        return -EINVAL;
    if (p.pick == ENG_PICK_EXACT && !s->model->be->iface->ffn_top)
        return -ENOTSUP;
    /* experts: the router picks what a token computes, nothing else does */
    if (s->model->n_ff_exp && ((p.phi > 0.0f && p.phi < s->model->plan.gamma) ||
                               p.comp != ENG_COMP_NONE || p.pick != ENG_PICK_REQUEST))
        return -ENOTSUP;
    /* exact: reading the candidates' gate and up rows (every loaded one's
     * without cand) must leave a neuron; the candidates, chosen per
     * request, hold the static ones */
    if (p.pick == ENG_PICK_EXACT && p.phi > 0.0f && p.phi < s->model->plan.gamma) {
        if (cand > 0.0f && cand < s->model->plan.delta - 1e-6f)
            return -EINVAL;
        int n_compute, n_cand = 0;
        int *count = layer_counts(s->model, p.phi, true, &n_compute);
        int *cc = cand > 0.0f ? layer_counts(s->model, cand, false, &n_cand) : NULL;
        const long long k =
            exact_pick_k(s->model, n_compute, count, n_cand, cc, lin_bytes(s->model, p.comp));
        free(count);
        free(cc);
        if (k < 1)
            return -EINVAL;
    }
    /* phi below the static share cannot be honoured: static neurons are
     * always computed (per request; per token nothing is static) */
    if (p.pick == ENG_PICK_REQUEST && p.phi > 0.0f && p.phi < s->model->plan.delta - 1e-6f)
        return -EINVAL;
    /* the bias is folded from W_down rows on the host: the CPU's memory */
    if (p.comp != ENG_COMP_NONE && !s->model->be->iface->host_memory)
        return -ENOTSUP;
    if (p.comp != ENG_COMP_NONE && comp_alloc(s) < 0)
        return -ENOMEM;
    if (p.comp == ENG_COMP_LINEAR && lin_alloc(s) < 0)
        return -ENOMEM;
    s->compute = p;
    eng__select_session_reset(s);
    return 0;
}

int eng_session_observe_ffn(eng_session *s, double *sums)
{
    if (sums && s->model->n_ff_exp) /* (a token computes only its experts' neurons) */
        return -ENOTSUP;
    s->observe = sums;
    eng__session_changed(s);
    return 0;
}

double eng_session_ffn_share(const eng_session *s)
{
    return s->ffn_share;
}

size_t eng_session_copy_bytes(const eng_session *s)
{
    size_t bytes = 0;
    for (int l = 0; s->dyn && l < s->model->info.n_layer; l++) {
        const eng_ffn_weights *w = &s->model->layers[l].ffn;
        bytes += (size_t)s->dyn[l].cap * eng_ffn_slot_bytes(w->dtype, w->n_embd, eng_ffn_rows(w));
    }
    return bytes;
}

int eng__select_session_init(eng_session *s)
{
    const eng_model *m = s->model;
    const int L = m->info.n_layer, F = m->info.n_ff;
    s->compute = eng_compute_params_default();
    s->sel_buf = calloc(L, sizeof(*s->sel_buf));
    s->counts = calloc(L, sizeof(*s->counts));
    s->pick_k = calloc(L, sizeof(*s->pick_k));
    s->act = eng__session_alloc(s, (size_t)s->n_batch * F * sizeof(float));
    if (!m->be->iface->host_memory)
        s->act_host = malloc((size_t)s->n_batch * F * sizeof(float));
    s->rank_tmp = malloc((size_t)2 * F * sizeof(float));
    s->ffn_bias = calloc(L, sizeof(*s->ffn_bias));
    if (!s->sel_buf || !s->counts || !s->pick_k || !s->act || !s->rank_tmp || !s->ffn_bias ||
        (!m->be->iface->host_memory && !s->act_host))
        return -ENOMEM;
    for (int l = 0; l < L; l++) {
        s->sel_buf[l] = malloc((size_t)F * sizeof(int32_t));
        s->counts[l] = calloc((size_t)F, sizeof(float));
        if (!s->sel_buf[l] || !s->counts[l])
            return -ENOMEM;
    }
    /* a backend that counts the votes itself: per-layer counts in its
     * memory, so a prefill's activations never come back to the host */
    if (!m->be->iface->host_memory && m->be->iface->topk_count) {
        s->counts_dev = calloc(L, sizeof(*s->counts_dev));
        s->counts_dev_live = calloc(L, sizeof(*s->counts_dev_live));
        s->counts_stage = malloc((size_t)L * F * sizeof(uint32_t));
        if (!s->counts_dev || !s->counts_dev_live || !s->counts_stage ||
            !(s->counts_dev_all = eng__session_alloc(s, (size_t)L * F * sizeof(uint32_t))))
            return -ENOMEM;
        for (int l = 0; l < L; l++)
            s->counts_dev[l] = s->counts_dev_all + (size_t)l * F;
        s->counts_dev_zeroed = false;
    }
    eng__select_session_reset(s);
    return 0;
}

/* A layer's copy of its dynamic neurons (dyn_copy): its buffers, emptied. */
static void dyn_release(eng_session *s, eng_dyn_copy *d)
{
    eng_backend *be = s->model->be;
    be->iface->mem_free(be, d->gate_up);
    be->iface->mem_free(be, d->down);
    *d = (eng_dyn_copy){ 0 };
}

void eng__select_session_free(eng_session *s)
{
    const int L = s->model->info.n_layer;
    for (int l = 0; l < L; l++) {
        if (s->sel_buf)
            free(s->sel_buf[l]);
        if (s->counts)
            free(s->counts[l]);
    }
    for (int l = 0; l < L; l++) {
        if (s->act_sum)
            free(s->act_sum[l]);
        if (s->bias_buf)
            free(s->bias_buf[l]);
    }
    for (int l = 0; s->lin && l < L; l++) {
        free(s->lin[l].x);
        free(s->lin[l].a);
        free((void *)s->lin[l].p.data);
        free((void *)s->lin[l].v.data);
    }
    free(s->lin);
    free(s->lin_work);
    s->model->be->iface->mem_free(s->model->be, s->lin_z);
    s->model->be->iface->mem_free(s->model->be, s->lin_y);
    free(s->act_sum);
    free(s->bias_buf);
    free(s->ffn_bias);
    free(s->sel_buf);
    free(s->counts);
    free(s->pick_k);
    s->model->be->iface->mem_free(s->model->be, s->counts_dev_all);
    free(s->counts_dev);
    free(s->counts_dev_live);
    free(s->counts_stage);
    s->model->be->iface->mem_free(s->model->be, s->act);
    free(s->act_host);
    free(s->rank_tmp);
    for (int l = 0; s->dyn && l < L; l++)
        dyn_release(s, &s->dyn[l]);
    free(s->dyn);
}

static double loaded_share(const eng_model *m)
{
    return (double)m->plan.neurons_loaded / (double)m->plan.neurons_total;
}

void eng__select_session_reset(eng_session *s)
{
    const eng_model *m = s->model;
    s->selected = false;
    s->generation = m->generation;
    eng__session_changed(s);
    for (int l = 0; l < m->info.n_layer; l++) {
        s->ffn_sel[l] = NULL;
        s->ffn_n_sel[l] = 0;
        if (s->dyn)
            s->dyn[l].w.n_slots = 0;
        if (s->pick_k)
            s->pick_k[l] = 0;
        if (s->ffn_bias)
            s->ffn_bias[l] = NULL;
        if (s->lin)
            s->lin[l].fitted = false;
        if (s->counts_dev_live && s->counts_dev_live[l]) {
            s->counts_dev_live[l] = false;
            s->counts_dev_zeroed = false; /* an eval cut short left its counts */
        }
    }
    /* the counts stay for eng_session_reset_prefix; the context's first
     * vote zeroes them (votes_begin) */
    s->votes_live = false;
    s->votes_from = 0;
    s->partial = false;
    s->ffn_share = loaded_share(m);
}

/* Before a context's first vote: counts and sums start from zero, unless
 * a kept prefix's votes count for it (eng__select_keep_votes). */
static void votes_begin(eng_session *s)
{
    const eng_model *m = s->model;
    if (s->votes_live)
        return;
    for (int l = 0; l < m->info.n_layer; l++) {
        memset(s->counts[l], 0, (size_t)m->info.n_ff * sizeof(float));
        if (s->act_sum && s->act_sum[l])
            memset(s->act_sum[l], 0, (size_t)m->info.n_ff * sizeof(double));
        if (s->lin)
            s->lin[l].n = s->lin[l].next = 0;
    }
    s->act_tokens = 0;
    s->votes_ok = false;
    s->votes_live = true;
}

int eng__select_prefix_votes(const eng_session *s)
{
    const eng_compute_params *a = &s->votes_params, *b = &s->compute;
    if (!casts_votes(s))
        return -1;
    /* the counts depend on the loaded slots and on how tokens vote; phi
     * only decides how many are taken from them */
    if (!s->votes_ok || s->generation != s->model->generation || a->alpha != b->alpha ||
        a->rank != b->rank || a->comp != b->comp)
        return 0;
    /* the signed rank's k is a mean over each eval's chunk of tokens, so
     * its votes depend on where the prompt was cut: not reusable */
    if (b->rank == ENG_RANK_SIGNED)
        return 0;
    return s->votes_n;
}

void eng__select_keep_votes(eng_session *s)
{
    s->votes_live = true;
    s->votes_ok = false; /* the counts change from here on */
    s->votes_from = s->votes_n;
}

bool eng__select_wants_act(const eng_session *s)
{
    /* per-token picking casts no votes at prefill, unless the exact pick
     * chooses its candidates per request */
    return s->observe || (!s->selected && casts_votes(s));
}

#define COMP_SKIP 1 /* leading context positions ENG_COMP_MEAN leaves out */

/* The first sparsified layer with an FFN, whose observation counts the
 * prompt's positions (nemotron_h's first layers may have none: no_ffn) */
static int first_sparse(const eng_model *m)
{
    for (int l = 0; l < m->info.n_layer; l++)
        if (m->layers[l].sparse && !m->layers[l].no_ffn)
            return l;
    return -1;
}

void eng__select_observe(eng_session *s, int il, const float *act, int n, const int32_t *sel,
                         int n_sel, const float *x)
{
    const eng_model *m = s->model;
    const eng_layer *L = &m->layers[il];
    const int F = m->info.n_ff;

    if (s->observe) {
        double *sums = s->observe + (size_t)il * F;
        for (int t = 0; t < n; t++)
            for (int j = 0; j < n_sel; j++) {
                int slot = sel ? sel[j] : j;
                sums[L->neuron_of_slot[slot]] += fabsf(act[(size_t)t * n_sel + j]);
            }
    }
    if (!phi_active(s) || s->selected || !L->sparse || sel)
        return;
    /* positions whose votes a kept prefix holds do not vote again */
    const int tv = s->votes_from - s->n_past > 0 ? s->votes_from - s->n_past : 0;
    if (tv >= n)
        return;
    votes_begin(s);

    if (s->compute.comp != ENG_COMP_NONE && s->act_sum) { /* linear too: its fallback */
        /* prefill: every loaded slot's signed activation, summed over the
         * prompt. Position 0 is left out: the first token of a context has
         * outlier activations (the "attention sink": a few neurons fire
         * far outside their usual range) that would dominate the mean, and
         * decode never sees it
         * again (measured: with it, coreinfer's perplexity grows 65x) */
        double *sum = s->act_sum[il];
        int t0 = COMP_SKIP - s->n_past;
        if (t0 < tv)
            t0 = tv;
        for (int t = t0; t < n; t++)
            for (int j = 0; j < n_sel; j++)
                sum[j] += act[(size_t)t * n_sel + j];
        if (il == first_sparse(m) && n > t0)
            s->act_tokens += n - t0;
    }
    if (s->compute.comp == ENG_COMP_LINEAR && s->lin && s->lin[il].a && n_sel <= s->lin[il].slots &&
        x) {
        /* prefill: the FFN's inputs and every loaded slot's activation, the
         * latest lin_cap positions (position 0 left out, as for the mean) */
        eng_lin *g = &s->lin[il];
        const int E = m->info.n_embd;
        int t0 = COMP_SKIP - s->n_past;
        if (t0 < tv)
            t0 = tv;
        for (int t = t0 < 0 ? 0 : t0; t < n; t++) {
            memcpy(g->x + (size_t)g->next * E, x + (size_t)t * E, (size_t)E * sizeof(float));
            eng_f32_to_f16_row(act + (size_t)t * n_sel, g->a + (size_t)g->next * g->slots,
                               (size_t)n_sel);
            g->next = (g->next + 1) % s->lin_cap;
            if (g->n < s->lin_cap)
                g->n++;
        }
    }

    /* prefill over all loaded slots: count, per slot, the tokens that rank
     * it in their top alpha */
    float *tmp = s->rank_tmp;
    float *counts = s->counts[il];
    switch (s->compute.rank) {
    case ENG_RANK_ABS:
    case ENG_RANK_SIGNED:
        /* topk.h: the code the CPU backend's topk_count runs too */
        eng__topk_count(act + (size_t)tv * n_sel, n - tv, n_sel, s->compute.alpha,
                        s->compute.rank == ENG_RANK_SIGNED, tmp, counts, NULL);
        break;
    case ENG_RANK_CONTRIB: {
        /* |a| weighted by the neuron's W_down column norm, k as for abs */
        const float *dn = m->down_norm + (size_t)il * F;
        const int k = eng__topk_k(NULL, n, n_sel, s->compute.alpha, false);
        float *mag = tmp + F; /* the second half of rank_tmp */
        for (int t = tv; t < n; t++) {
            const float *a = act + (size_t)t * n_sel;
            for (int j = 0; j < n_sel; j++)
                mag[j] = fabsf(a[j]) * dn[L->neuron_of_slot[sel ? sel[j] : j]];
            float thr = eng__kth_largest(tmp, mag, n_sel, k);
            for (int j = 0; j < n_sel; j++)
                counts[j] += (mag[j] >= thr) & (mag[j] > 0.0f); /* as topk.c */
        }
        break;
    }
    case ENG_RANK_MASS:
        /* no per-token cut: each slot's summed |a| over the prompt */
        for (int t = tv; t < n; t++)
            for (int j = 0; j < n_sel; j++)
                counts[j] += fabsf(act[(size_t)t * n_sel + j]);
        break;
    }
}

/* Zeros into every layer's device counts, in one copy. Done at the end of
 * an eval (the device idle) rather than at each layer's first count of the
 * next prefill, where a copy from host memory would wait for the queued
 * work of the layers before and so stall the pass. */
static void counts_zero(eng_session *s)
{
    const eng_model *m = s->model;
    const size_t bytes = (size_t)m->info.n_layer * m->info.n_ff * sizeof(uint32_t);
    memset(s->counts_stage, 0, bytes);
    m->be->iface->upload(m->be, s->counts_dev_all, s->counts_stage, bytes);
    s->counts_dev_zeroed = true;
}

bool eng__select_observe_backend(eng_session *s, int il, const float *act, int n,
                                 const int32_t *sel, int n_sel)
{
    const eng_model *m = s->model;
    eng_backend *be = m->be;
    /* what only the host can do: profiling sums, the mean compensation's
     * sums, rankings the op does not count (contrib needs W_down's norms,
     * mass sums magnitudes) */
    if (!s->counts_dev || s->observe || s->compute.comp != ENG_COMP_NONE ||
        (s->compute.rank != ENG_RANK_ABS && s->compute.rank != ENG_RANK_SIGNED))
        return false;
    /* nothing to count: the cases eng__select_observe returns on */
    if (!phi_active(s) || s->selected || !m->layers[il].sparse || sel)
        return true;
    const int tv = s->votes_from - s->n_past > 0 ? s->votes_from - s->n_past : 0;
    if (tv >= n)
        return true;
    votes_begin(s);
    if (!s->counts_dev_zeroed)
        counts_zero(s); /* only after a reset that cut an eval short */
    /* a prefill cut into chunks keeps adding until eng__select_end_eval
     * takes the counts */
    s->counts_dev_live[il] = true;
    be->iface->topk_count(be, act + (size_t)tv * n_sel, n - tv, n_sel, s->compute.alpha,
                          s->compute.rank == ENG_RANK_SIGNED, s->counts_dev[il]);
    return true;
}

/* The backend's votes into the host counts, once per eval: one download per
 * layer instead of one of the activations per layer and chunk. The counts
 * are whole numbers below 2^24, so a sum of ones and the same number added
 * at once are the same float. */
static int counts_gather(eng_session *s)
{
    const eng_model *m = s->model;
    eng_backend *be = m->be;
    const int L = m->info.n_layer, F = m->info.n_ff;
    bool any = false;
    for (int il = 0; s->counts_dev && il < L; il++)
        any = any || s->counts_dev_live[il];
    if (!any)
        return 0;
    /* every layer's counts in one copy (one wait), then zeros for the next
     * eval while the device is idle */
    be->iface->download(be, s->counts_stage, s->counts_dev_all, (size_t)L * F * sizeof(uint32_t));
    int r = be->iface->sync(be);
    if (r < 0)
        return r;
    for (int il = 0; il < L; il++) {
        if (!s->counts_dev_live[il])
            continue;
        const uint32_t *c = s->counts_stage + (size_t)il * F;
        for (int j = 0; j < m->layers[il].ffn.n_slots; j++)
            s->counts[il][j] += (float)c[j];
        s->counts_dev_live[il] = false;
    }
    counts_zero(s);
    return 0;
}

/* ENG_COMP_MEAN at the end of prefill: per layer with a selection, the bias
 * decode adds is, over every loaded slot decode does not compute, its mean
 * prompt activation times its W_down row. */
static void comp_fold(eng_session *s)
{
    const eng_model *m = s->model;
    const int E = m->info.n_embd;
    float *row = s->rank_tmp; /* 2 * n_ff floats; a W_down row is n_embd */
    double *acc = malloc((size_t)E * sizeof(double));
    if (!acc || E > 2 * m->info.n_ff) {
        free(acc);
        return; /* no compensation rather than a failed eval */
    }
    for (int il = 0; il < m->info.n_layer; il++) {
        const eng_layer *L = &m->layers[il];
        const int32_t *sel = s->ffn_sel[il];
        if (!sel)
            continue;
        for (int e = 0; e < E; e++)
            acc[e] = 0.0;
        const size_t rb = eng_ffn_down_bytes(L->ffn.dtype, E);
        for (int j = 0, k = 0; j < L->ffn.n_slots; j++) {
            if (k < s->ffn_n_sel[il] && sel[k] == j) { /* sel is ascending */
                k++;
                continue;
            }
            double mean = s->act_sum[il][j] / s->act_tokens;
            eng_dequant_row_f32(ggml_type_of_dtype(eng_ffn_down_dtype(L->ffn.dtype)),
                                (const uint8_t *)L->ffn.down + (size_t)j * rb, row, (size_t)E);
            for (int e = 0; e < E; e++)
                acc[e] += mean * row[e];
        }
        for (int e = 0; e < E; e++)
            s->bias_buf[il][e] = (float)acc[e];
        s->ffn_bias[il] = s->bias_buf[il];
    }
    free(acc);
}

/* linfit's products on the session's backend (host memory: the CPU's
 * threads and kernels) */
static void lin_mm(void *ctx, const float *w, int rows, int cols, const float *x, float *y, int n)
{
    eng_backend *be = ctx;
    const eng_weight wt = { .dtype = ENG_DTYPE_F32, .rows = rows, .cols = cols, .data = w };
    be->iface->matmul(be, &wt, NULL, x, y, n);
    be->iface->sync(be);
}

/* ENG_COMP_LINEAR at the end of prefill: per layer that leaves loaded
 * neurons out, what they added at each held prompt position (as decode will
 * leave them out: the request's selection, and where the exact pick takes k
 * of the candidates per token, the candidates it drops there too), fitted
 * as a linear map of the FFN's input (linfit.c). A layer whose fit fails
 * gets none: no compensation rather than a failed eval. */
static void lin_fold(eng_session *s)
{
    const eng_model *m = s->model;
    const int E = m->info.n_embd;
    /* one workspace for every layer, kept by the session: fresh pages for
     * each fit cost more than its arithmetic */
    int ns_max = 0;
    for (int il = 0; il < m->info.n_layer; il++)
        if (m->layers[il].ffn.n_slots > ns_max)
            ns_max = m->layers[il].ffn.n_slots;
    const int T_max = s->lin_cap;
    const size_t fit = eng__linfit_scratch(T_max, E, E, LIN_RANK, LIN_DIRS);
    const size_t need = fit + sizeof(float) * ((size_t)ns_max * E + (size_t)T_max * ns_max +
                                               (size_t)T_max * E + (size_t)E + 3 * (size_t)E * LIN_RANK +
                                               2 * (size_t)ns_max) + (size_t)ns_max;
    if (need > s->lin_work_bytes) {
        void *w = realloc(s->lin_work, need);
        if (!w)
            return; /* no compensation rather than a failed eval */
        s->lin_work = w;
        s->lin_work_bytes = need;
    }
    float *dt = (float *)((char *)s->lin_work + fit); /* W_down's columns left out [E][nu] */
    float *am = dt + (size_t)ns_max * E;              /* what is left out [T][ns], then [T][nu] */
    float *y = am + (size_t)T_max * ns_max, *row = y + (size_t)T_max * E;
    float *p = row + E, *v = p + (size_t)E * LIN_RANK, *pt = v + (size_t)E * LIN_RANK;
    float *mag = pt + (size_t)E * LIN_RANK;
    uint8_t *cand = (uint8_t *)(mag + 2 * (size_t)ns_max);
    for (int il = 0; il < m->info.n_layer; il++) {
        const eng_layer *L = &m->layers[il];
        eng_lin *g = &s->lin[il];
        const int32_t *sel = s->ffn_sel[il];
        const int k = s->pick_k[il], ns = L->ffn.n_slots, T = g->n;
        if (!g->a || ns > g->slots || T < 2 || (!sel && !k))
            continue;
        int n_cand = ns;
        memset(cand, !sel, (size_t)ns);
        if (sel) {
            n_cand = s->ffn_n_sel[il];
            for (int i = 0; i < n_cand; i++)
                cand[sel[i]] = 1;
        }
        for (int t = 0; t < T; t++) {
            float *o = am + (size_t)t * ns;
            const float *a = o;
            eng_f16_to_f32_row(g->a + (size_t)t * g->slots, o, (size_t)ns);
            float thr = -1.0f; /* |a| >= thr among the candidates is computed */
            if (k > 0 && k < n_cand) {
                int n = 0;
                for (int j = 0; j < ns; j++)
                    if (cand[j])
                        mag[n++] = fabsf(a[j]);
                thr = eng__kth_largest(mag + ns, mag, n, k);
            }
            for (int j = 0; j < ns; j++)
                o[j] = cand[j] && fabsf(a[j]) >= thr ? 0.0f : a[j];
        }
        /* only the slots some position leaves out (the per-request pick's
         * skipped ones: under half the loaded), so the largest product of
         * the fit, the targets, reads no column of zeros */
        int32_t *cols = (int32_t *)mag;
        int nu = 0;
        for (int j = 0; j < ns; j++) {
            int t = 0;
            while (t < T && am[(size_t)t * ns + j] == 0.0f)
                t++;
            if (t < T)
                cols[nu++] = j;
        }
        if (nu == 0)
            continue;
        for (int t = 0; t < T; t++) /* in place: each read lies at or past its write */
            for (int c = 0; c < nu; c++)
                am[(size_t)t * nu + c] = am[(size_t)t * ns + cols[c]];
        const size_t rb = eng_ffn_down_bytes(L->ffn.dtype, E);
        for (int c = 0; c < nu; c++) {
            eng_dequant_row_f32(ggml_type_of_dtype(eng_ffn_down_dtype(L->ffn.dtype)),
                                (const uint8_t *)L->ffn.down + (size_t)cols[c] * rb, row,
                                (size_t)E);
            for (int e = 0; e < E; e++)
                dt[(size_t)e * nu + c] = row[e];
        }
        lin_mm(m->be, dt, E, nu, am, y, T);
        if (eng__linfit(g->x, y, T, E, E, LIN_RANK, LIN_DIRS, LIN_RIDGE, lin_mm, m->be,
                        s->lin_work, p, v, s->bias_buf[il]) > 0) {
            /* f16 maps: P^T as rows of n_embd for the first product */
            for (int e = 0; e < E; e++)
                for (int i = 0; i < LIN_RANK; i++)
                    pt[(size_t)i * E + e] = p[(size_t)e * LIN_RANK + i];
            eng_f32_to_f16_row(pt, (uint16_t *)g->p.data, (size_t)E * LIN_RANK);
            eng_f32_to_f16_row(v, (uint16_t *)g->v.data, (size_t)E * LIN_RANK);
            g->fitted = true;
            s->ffn_bias[il] = s->bias_buf[il];
        }
    }
}

void eng__select_comp_apply(const eng_session *s, int il, const float *x, float *y, int n)
{
    const eng_lin *g = s->lin ? &s->lin[il] : NULL;
    if (!g || !g->fitted)
        return;
    const eng_backend_iface *op = s->model->be->iface;
    op->matmul(s->model->be, &g->p, NULL, x, s->lin_z, n);         /* z = x P [n][rank] */
    op->matmul(s->model->be, &g->v, NULL, s->lin_z, s->lin_y, n); /* z V^T [n][n_embd] */
    op->add(s->model->be, y, s->lin_y, (long)n * s->model->info.n_embd);
}

/* ENG_BUDGET_SENS: phi is model-wide like gamma, total neurons computed in
 * all; the unsparsified layers compute all theirs, the sparsified ones the
 * same count each (clamped to [static, loaded]; per-token picking has no
 * static floor) for the rest. */
static void compute_counts(const eng_model *m, long total, bool per_token, int *count)
{
    const int NL = m->info.n_layer;
    long rest = total;
    for (int il = 0; il < NL; il++)
        if (!m->layers[il].sparse)
            rest -= m->layers[il].ffn.n_slots;
    /* level c: sum_l clamp(c, static_l, loaded_l) = rest, by bisection */
    int lo = 0, hi = m->info.n_ff;
    while (lo < hi) {
        int c = (lo + hi + 1) / 2;
        long sum = 0;
        for (int il = 0; il < NL; il++) {
            const eng_layer *L = &m->layers[il];
            const int floor = per_token ? 0 : L->n_static;
            if (L->sparse)
                sum += c < floor ? floor : c > L->ffn.n_slots ? L->ffn.n_slots : c;
        }
        if (sum <= rest)
            lo = c;
        else
            hi = c - 1;
    }
    for (int il = 0; il < NL; il++) {
        const eng_layer *L = &m->layers[il];
        const int floor = per_token ? 0 : L->n_static;
        count[il] = !L->sparse ? L->ffn.n_slots
                    : lo < floor ? floor
                    : lo > L->ffn.n_slots ? L->ffn.n_slots : lo;
    }
}

/* copy_dynamic: layer il's selection sel [n] past its leading run of
 * slots 0 .. from - 1 (the static slots, which a load and a swap keep in
 * front, and any picked right after them) into the session's copy, which
 * decode then reads with that run (backend ffn_runs). Only where the
 * backend offers ffn_runs and its memory is the host's; when the buffers
 * do not fit, decode reads sel in place, as without the copy. Not in a
 * layer whose activations are cut per token (gemma3n's first layers):
 * their ffn op takes the cut's statistics over the whole selection and
 * reads it in place (model.c's forward pass never gives them runs), so a
 * copy there would be bytes no step reads (Gemma 3n E2B's shape, phi 0.4,
 * signed rank: 125 MiB of them). */
static void dyn_copy(eng_session *s, int il, const int32_t *sel, int n)
{
    const eng_model *m = s->model;
    const eng_backend_iface *op = m->be->iface;
    const eng_ffn_weights *w = &m->layers[il].ffn;
    if (s->dyn)
        s->dyn[il].w.n_slots = 0; /* the copy of a selection before this one */
    if (!s->compute.copy_dynamic || !op->ffn_runs || !op->host_memory ||
        w->act == ENG_ACT_GELU_TOPK ||
        (!s->dyn && !(s->dyn = calloc(m->info.n_layer, sizeof(*s->dyn)))))
        return;
    eng_dyn_copy *d = &s->dyn[il];
    int from = 0;
    while (from < n && sel[from] == from)
        from++;
    const int k = n - from;
    if (k == 0)
        return; /* one run already */
    /* a slot's gate_up: gate and up rows, or (un-gated) its up row */
    const size_t rg = (size_t)eng_ffn_rows(w) * eng_ffn_row_bytes(w->dtype, w->n_embd);
    const size_t rd = eng_ffn_down_bytes(w->dtype, w->n_embd);
    if (k > d->cap) {
        dyn_release(s, d);
        d->gate_up = eng__session_alloc(s, (size_t)k * rg);
        d->down = eng__session_alloc(s, (size_t)k * rd);
        if (!d->gate_up || !d->down) {
            dyn_release(s, d);
            return;
        }
        d->cap = k;
    }
    char *gu = d->gate_up, *dn = d->down;
    for (int j = 0; j < k; j++) {
        const size_t sl = (size_t)sel[from + j];
        memcpy(gu + (size_t)j * rg, (const char *)w->gate_up + sl * rg, rg);
        memcpy(dn + (size_t)j * rd, (const char *)w->down + sl * rd, rd);
    }
    d->w = (eng_ffn_weights){ .dtype = w->dtype, .n_embd = w->n_embd, .n_slots = k,
                              .gate_up = gu, .down = dn, .act = w->act };
    d->from = from;
}

/* Whether layer il's selection of n slots is the two runs ffn_top picks
 * among: the static run in place and the session's copy of the rest. */
static bool cand_runs(const eng_session *s, int il, int n)
{
    const eng_dyn_copy *d = s->dyn ? &s->dyn[il] : NULL;
    const int32_t *sel = s->ffn_sel[il];
    if (d && d->w.n_slots > 0)
        return d->from + d->w.n_slots == n;
    return n > 0 && sel[n - 1] == n - 1; /* one run: slots 0 .. n - 1 */
}

/* ENG_PICK_TOKEN's k for a layer whose per-request pick would compute
 * n_compute neurons, such that a step reads no more bytes: the sketch,
 * read whole every token, comes off the budget in neurons (*cost, rounded
 * up). At least 1. */
static int sketch_pick_k(const eng_model *m, const eng_layer *L, int n_compute, int *cost)
{
    const size_t bpn = eng_ffn_slot_bytes(L->ffn.dtype, L->ffn.n_embd, eng_ffn_rows(&L->ffn));
    const size_t bytes = (size_t)L->ffn.n_slots * eng_sketch_slot_bytes(m->info.n_embd);
    *cost = (int)((bytes + bpn - 1) / bpn);
    const int k = n_compute - *cost;
    return k < 1 ? 1 : k;
}

/* ENG_PICK_EXACT's k, the same for every sparsified layer: the bytes a
 * per-request pick would read in them (n_compute neurons each, or count[]
 * under a sensitivity spread), less the gate and up rows of every
 * candidate, in down rows (a picked neuron's activation is known: its
 * down row is all it costs). The candidates: every loaded slot when n_cand
 * is 0, else n_cand a layer or cand[]. Layer by layer, a spread that loads
 * more slots than it computes would leave those layers nothing. <= 0: phi
 * does not pay for the gate and up rows. */
static long long exact_pick_k(const eng_model *m, int n_compute, const int *count, int n_cand,
                              const int *cand, long long extra)
{
    long long budget = 0, down = 0;
    for (int il = 0; il < m->info.n_layer; il++) {
        const eng_layer *L = &m->layers[il];
        if (!L->sparse)
            continue;
        const eng_dtype dt = L->ffn.dtype;
        const long E = L->ffn.n_embd;
        const int nr = eng_ffn_rows(&L->ffn); /* gate and up rows, or up alone */
        long long rows = n_cand <= 0 ? L->ffn.n_slots : cand ? cand[il] : n_cand;
        if (rows > L->ffn.n_slots)
            rows = L->ffn.n_slots;
        budget += (long long)(count ? count[il] : n_compute) *
                      (long long)eng_ffn_slot_bytes(dt, E, nr) -
                  rows * nr * (long long)eng_ffn_row_bytes(dt, E) - extra;
        down += (long long)eng_ffn_down_bytes(dt, E);
    }
    return down > 0 ? budget / down : 0;
}

/* The neurons each layer computes per request at phi (NULL: n_compute =
 * lround(phi n_ff) in every layer; FFNs of their own widths, gemma4's:
 * phi of each), malloc'd, per_token as the pick. */
static int *layer_counts(const eng_model *m, float phi, bool per_token, int *n_compute)
{
    *n_compute = (int)lround(phi * m->info.n_ff);
    int *count = NULL;
    if (m->layer_sens && (count = malloc((size_t)m->info.n_layer * sizeof(int))))
        compute_counts(m, (long)m->info.n_layer * *n_compute, per_token, count);
    else if (m->ffn_n && (count = malloc((size_t)m->info.n_layer * sizeof(int))))
        for (int il = 0; il < m->info.n_layer; il++)
            count[il] = (int)lround(phi * m->ffn_n[il]);
    return count;
}

int eng__select_end_eval(eng_session *s)
{
    const eng_model *m = s->model;
    if (!phi_active(s) || s->selected)
        return 0;
    int r = counts_gather(s);
    if (r < 0)
        return r;
    const bool votes = casts_votes(s), narrow = cand_active(s);
    if (votes)
        votes_begin(s); /* a context that cast no vote selects from zeros */
    const int F = m->info.n_ff, NL = m->info.n_layer;
    int n_compute, n_cand = 0;
    uint64_t computed = 0;
    int *count = layer_counts(m, s->compute.phi, s->compute.pick != ENG_PICK_REQUEST, &n_compute);
    int *cand = narrow ? layer_counts(m, cand_of(&s->compute, m), false, &n_cand) : NULL;
    /* ENG_COMP_LINEAR on a prompt too short to fit a map: the mean */
    const int fs = first_sparse(m);
    const bool lin = s->compute.comp == ENG_COMP_LINEAR && s->lin && fs >= 0 &&
                     s->lin[fs].n >= LIN_MIN_ROWS;
    const long long lin_b = lin ? lin_bytes(m, s->compute.comp) : 0;
    const long long k_exact = s->compute.pick == ENG_PICK_EXACT
                                  ? exact_pick_k(m, n_compute, count, n_cand, cand, lin_b)
                                  : 0;
    const int k_cand = k_exact < 1 ? 1 : k_exact > INT_MAX ? INT_MAX : (int)k_exact;
    for (int il = 0; il < NL; il++) {
        const eng_layer *L = &m->layers[il];
        if (count)
            n_compute = count[il];
        /* how many the per-request choice below takes: phi's, or the
         * exact pick's candidates */
        int n_take = !narrow ? n_compute : cand ? cand[il] : n_cand;
        /* where something is left out, the linear map's bytes: off phi's
         * neurons per request, off k (exact_pick_k) per token */
        const int nr = eng_ffn_rows(&L->ffn);
        const long long slot_b = (long long)eng_ffn_slot_bytes(L->ffn.dtype, L->ffn.n_embd, nr);
        const int lin_n = lin_b && L->sparse && n_take < L->ffn.n_slots
                              ? (int)((lin_b + slot_b - 1) / slot_b)
                              : 0;
        if (!narrow)
            n_take -= lin_n;
        if ((s->compute.pick == ENG_PICK_TOKEN && L->sparse && L->ffn.sketch) ||
            (s->compute.pick == ENG_PICK_EXACT && L->sparse &&
             (!narrow || n_take >= L->ffn.n_slots))) {
            /* the sketch (or every gate and up row) is read whole every
             * token: its bytes, in neurons, come off the budget, so the
             * step reads what a per-request pick of n_compute neurons
             * would */
            int cost = 0, k;
            if (L->ffn.act == ENG_ACT_GELU_TOPK) {
                /* gemma3n's cut layers pick per token by their own cut
                 * (model.c's forward pass gives them no pick_k): every
                 * loaded slot is scored, so count them all */
                s->ffn_sel[il] = NULL;
                computed += L->ffn.n_slots;
                continue;
            }
            if (s->compute.pick == ENG_PICK_EXACT)
                k = k_cand;
            else
                k = sketch_pick_k(m, L, n_compute, &cost);
            s->ffn_sel[il] = NULL;
            if (k >= L->ffn.n_slots) {
                computed += L->ffn.n_slots;
            } else if (s->compute.pick == ENG_PICK_EXACT) {
                s->pick_k[il] = k;
                s->partial = true;
                /* every gate and up row, and k down rows, in neurons */
                const eng_dtype dt = L->ffn.dtype;
                const long E = L->ffn.n_embd;
                computed += ((uint64_t)L->ffn.n_slots * nr * eng_ffn_row_bytes(dt, E) +
                             (uint64_t)k * eng_ffn_down_bytes(dt, E)) /
                            eng_ffn_slot_bytes(dt, E, nr);
            } else {
                s->pick_k[il] = k;
                s->partial = true;
                computed += k + cost;
            }
            continue;
        }
        if (!L->sparse || n_take >= L->ffn.n_slots) {
            s->ffn_sel[il] = NULL;
            computed += L->ffn.n_slots;
            continue;
        }
        /* candidates: the non-static slots, most frequently in a token's
         * top alpha, ties to the lower slot: the n_dyn best by one k-th
         * largest selection of the threshold (topk.h), then the static
         * slots and the chosen ones in one pass in slot order. (Two sorts of each
         * layer's slots took about 1 ms a layer of n_ff 8192 on the host,
         * a prefill's whole GPU time for a few layers.) */
        int32_t *sel = s->sel_buf[il];
        const float *cnt = s->counts[il];
        float *score = s->rank_tmp, *tmp = s->rank_tmp + F; /* 2 * n_ff floats */
        int n = 0;
        for (int j = 0; j < L->ffn.n_slots; j++)
            if (!L->slot_static[j])
                score[n++] = cnt[j];
        int n_dyn = n_take - L->n_static;
        if (n_dyn < 0)
            n_dyn = 0;
        if (n_dyn > n)
            n_dyn = n;
        float thr = INFINITY;
        int n_eq = 0; /* candidates equal to the threshold that are taken */
        if (n_dyn > 0) {
            thr = eng__kth_largest(tmp, score, n, n_dyn);
            n_eq = n_dyn;
            for (int i = 0; i < n; i++)
                n_eq -= score[i] > thr;
        }
        int total = 0;
        for (int j = 0, i = 0; j < L->ffn.n_slots; j++) {
            if (L->slot_static[j]) {
                sel[total++] = j;
                continue;
            }
            const float v = score[i++];
            if (v > thr || (v == thr && n_eq-- > 0))
                sel[total++] = j;
        }
        s->ffn_sel[il] = sel;
        s->ffn_n_sel[il] = total;
        s->partial = true;
        computed += lin_n; /* the linear map's bytes, in neurons */
        dyn_copy(s, il, sel, total);
        if (!m->be->iface->host_memory)
            m->be->iface->upload(m->be, s->ffn_sel_dev[il], sel, (size_t)total * sizeof(int32_t));
        if (narrow && k_cand < total && cand_runs(s, il, total)) {
            /* each token: the candidates' gate and up rows, k down rows */
            const eng_dtype dt = L->ffn.dtype;
            const long E = L->ffn.n_embd;
            s->pick_k[il] = k_cand;
            computed += ((uint64_t)total * nr * eng_ffn_row_bytes(dt, E) +
                         (uint64_t)k_cand * eng_ffn_down_bytes(dt, E)) /
                        eng_ffn_slot_bytes(dt, E, nr);
        } else {
            /* every candidate computed: k leaves none out, or there is
             * no copy to pick from (the bytes of phi exceeded) */
            computed += total;
        }
    }
    free(count);
    free(cand);
    /* the votes of [0, n_past) as a later prefix may reuse them */
    if (votes) {
        s->votes_ok = true;
        s->votes_n = s->n_past;
        s->votes_params = s->compute;
    }
    s->selected = true;
    s->generation = m->generation;
    s->ffn_share = (double)computed / (double)m->plan.neurons_total; /* (every layer's) */
    if (lin)
        lin_fold(s);
    else if (s->compute.comp != ENG_COMP_NONE && s->act_sum && s->act_tokens > 0)
        comp_fold(s);
    eng__session_changed(s); /* decode now computes the selection */
    return 0;
}

void eng_model_get_plan(const eng_model *m, eng_plan_info *ret)
{
    *ret = m->plan;
}
