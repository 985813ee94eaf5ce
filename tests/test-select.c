/* SelectInfer in the engine, on the default model: profiles (collection,
 * file round trip, model binding, corruption), loading plans (sizes,
 * budgets, the gamma = 1 identity), selective computation (the computed
 * share, equivalence at phi = gamma), per-token picking by a sketch (its
 * bytes, its share, the sketch following hot-swaps; model.h for that) and
 * hot-swap (same numbers as a fresh load, failed swaps keep serving, stale
 * sessions refused).
 */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "engine.h"
#include "gguf.h"
#include "model.h"
#include "quants.h"
#include "test-util.h"

static const char *texts_a[] = {
    "What is the capital of France? The capital of France is Paris.",
    "Who wrote Hamlet? William Shakespeare wrote Hamlet around 1600.",
    "How many legs does a spider have? A spider has eight legs.",
};
static const char *texts_b[] = {
    "Translate to German: The house is small. Das Haus ist klein.",
    "Translate to German: I like to read books. Ich lese gern Buecher.",
    "Translate to German: Where is the station? Wo ist der Bahnhof?",
};

static int V, NL, NF;

static bool q8_slots; /* load() with q8_matrices */

/* Progress reports of loads and swaps (eng_model_params.progress): how
 * many, and whether each counted one more layer of the same total. */
static struct {
    int calls, last, total;
    bool in_order;
} prog;

static void on_progress(void *ud, int done, int total)
{
    (void)ud;
    prog.in_order &= done >= 0 && done <= total && (prog.calls == 0 || (done == prog.last + 1 && total == prog.total));
    prog.calls++;
    prog.last = done;
    prog.total = total;
}

static void prog_reset(void)
{
    prog.calls = prog.last = prog.total = 0;
    prog.in_order = true;
}

static eng_model *load(const char *path, const eng_load_plan_params *plan, eng_error *err)
{
    eng_model_params mp = eng_model_params_default();
    mp.n_threads = 2;
    mp.plan = plan;
    mp.progress = on_progress;
    mp.q8_matrices = q8_slots;
    eng_model *m = NULL;
    int r = eng_model_load(path, &mp, &m, err);
    return r < 0 ? NULL : m;
}

static void add_prompts(eng_model *m, eng_profile *p, const char *task, const char **texts, int n)
{
    eng_session *s;
    CHECK(eng_session_new(m, NULL, &s) == 0);
    double *sums = malloc((size_t)NL * NF * sizeof(double));
    CHECK(sums);
    for (int i = 0; i < n; i++) {
        int32_t toks[256];
        size_t nt;
        CHECK(eng_tokenize(m, texts[i], strlen(texts[i]), 0, toks, 256, &nt) == 0);
        memset(sums, 0, (size_t)NL * NF * sizeof(double));
        eng_session_reset(s);
        CHECK(eng_session_observe_ffn(s, sums) == 0);
        CHECK(eng_session_eval(s, toks, nt, 0) == 0);
        CHECK(eng_session_observe_ffn(s, NULL) == 0);
        double total = 0;
        for (size_t k = 0; k < (size_t)NL * NF; k++)
            total += sums[k];
        CHECK(total > 0 && isfinite(total));
        CHECK(eng_profile_add_prompt(p, task, sums, nt) == 0);
    }
    free(sums);
    eng_session_free(s);
}

/* Last-token logits of a fixed prompt, then greedy decode steps. */
static void logits_of(eng_model *m, const eng_compute_params *cp, int steps, float *out,
                      double *share)
{
    const char *text = "The weather today is sunny and warm, so we decided to";
    int32_t toks[64];
    size_t nt;
    CHECK(eng_tokenize(m, text, strlen(text), 0, toks, 64, &nt) == 0);
    eng_session *s;
    CHECK(eng_session_new(m, NULL, &s) == 0);
    if (cp)
        CHECK(eng_session_set_compute(s, cp) == 0);
    CHECK(eng_session_eval(s, toks, nt, 0) == 0);
    for (int i = 0; i < steps; i++) {
        const float *l = eng_session_logits(s, -1);
        int32_t best = 0;
        for (int k = 1; k < V; k++)
            if (l[k] > l[best])
                best = k;
        CHECK(eng_session_eval(s, &best, 1, 0) == 0);
    }
    memcpy(out, eng_session_logits(s, -1), V * sizeof(float));
    if (share)
        *share = eng_session_ffn_share(s);
    eng_session_free(s);
}

/* The gamma a plan with a byte budget solved, after checking that the
 * loaded weights fit the budget within one neuron (of bytes_per_neuron,
 * its sketch included) per sparsified layer; -1 when it did not load. */
static float budget_gamma(const char *path, const eng_load_plan_params *plan,
                          uint64_t bytes_per_neuron, int n_sparse)
{
    eng_error err;
    eng_model *m = load(path, plan, &err);
    CHECKF(m, "%s", err.msg);
    if (!m)
        return -1;
    eng_model_info mi;
    eng_plan_info pi;
    eng_model_get_info(m, &mi);
    eng_model_get_plan(m, &pi);
    CHECKF(mi.bytes_weights <= plan->budget_bytes &&
               mi.bytes_weights > plan->budget_bytes - (uint64_t)n_sparse * bytes_per_neuron,
           "budget %llu, resident %llu%s", (unsigned long long)plan->budget_bytes,
           (unsigned long long)mi.bytes_weights, plan->sketch ? " with the sketch" : "");
    eng_model_free(m);
    return pi.gamma;
}

/* Whether every sketch holds its slot's gate and up rows as they are now:
 * the number of layers with a sketch that does, -1 if one does not. */
static int sketch_follows_slots(const eng_model *m)
{
    int n = 0;
    for (int il = 0; il < m->info.n_layer; il++) {
        const eng_layer *L = &m->layers[il];
        if (!L->ffn.sketch)
            continue;
        const int E = L->ffn.n_embd;
        const size_t sb = eng_sketch_slot_bytes(E), rb = eng_dtype_bytes(L->ffn.dtype, E);
        float *row = malloc(E * sizeof(float));
        uint8_t *q = malloc(sb / 2), *r = malloc(sb / 2);
        for (int j = 0; j < L->ffn.n_slots; j++)
            for (int h = 0; h < 2; h++) {
                const uint8_t *src = (const uint8_t *)L->ffn.gate_up + ((size_t)j * 2 + h) * rb;
                eng_dequant_row_f32(ggml_type_of_dtype(L->ffn.dtype), src, row, E);
                eng_quant_row(GGML_TYPE_Q4_0, row, q, E);
                eng_sketch_row(q, E / 32, r);
                if (memcmp(r, (const uint8_t *)L->ffn.sketch + j * sb + h * (sb / 2), sb / 2)) {
                    free(row);
                    free(q);
                    free(r);
                    return -1;
                }
            }
        free(row);
        free(q);
        free(r);
        n++;
    }
    return n;
}

static float maxdiff(const float *a, const float *b)
{
    float m = 0;
    for (int i = 0; i < V; i++) {
        float d = fabsf(a[i] - b[i]);
        m = d > m || isnan(d) ? d : m;
    }
    return m;
}

/* copy_dynamic (on by default): decode reads a request's dynamic neurons
 * from the session's contiguous copy, with the same sums, bit for bit, as
 * reading them where they lie; and it does read the copy (zeroed, the
 * logits move). The copy holds each sparsified layer's selection past the
 * run of slots 0, 1, ... it starts with (its static slots), no more. */
static void copy_check(eng_model *m, const char *what)
{
    const char *text = "The weather today is sunny and warm, so we decided to";
    int32_t toks[64], next = 1000;
    size_t nt;
    CHECK(eng_tokenize(m, text, strlen(text), 0, toks, 64, &nt) == 0);
    eng_compute_params cp = eng_compute_params_default();
    CHECK(cp.copy_dynamic);
    cp.phi = 0.4f;
    float *l[3]; /* copy, in place, copy zeroed */
    for (int k = 0; k < 3; k++) {
        CHECK((l[k] = malloc(V * sizeof(float))));
        eng_session *s;
        CHECK(eng_session_new(m, NULL, &s) == 0);
        cp.copy_dynamic = k != 1;
        CHECK(eng_session_set_compute(s, &cp) == 0);
        CHECK(eng_session_eval(s, toks, nt, 0) == 0);
        size_t want = 0;
        int copied = 0;
        for (int il = 0; il < NL && k != 1; il++) {
            const eng_layer *L = &m->layers[il];
            const size_t rd = eng_ffn_down_bytes(L->ffn.dtype, L->ffn.n_embd);
            if (!L->sparse)
                continue;
            /* the leading run: the static slots, and the dynamic ones
             * that happen to follow them */
            int from = 0;
            while (from < s->ffn_n_sel[il] && s->ffn_sel[il][from] == from)
                from++;
            const eng_dyn_copy *d = s->dyn ? &s->dyn[il] : NULL;
            CHECKF(d && from >= L->n_static && d->from == from &&
                       d->w.n_slots == s->ffn_n_sel[il] - from,
                   "%s: layer %d copies %d slots from %d", what, il, d ? d->w.n_slots : -1,
                   d ? d->from : -1);
            if (!d)
                continue;
            want += (size_t)(s->ffn_n_sel[il] - from) *
                    eng_ffn_slot_bytes(L->ffn.dtype, L->ffn.n_embd, eng_ffn_rows(&L->ffn));
            copied += d->w.n_slots > 0;
            if (k == 2)
                memset(d->down, 0, (size_t)d->w.n_slots * rd);
        }
        CHECKF(eng_session_copy_bytes(s) == want && (k == 1 || copied == NL - 4),
               "%s: %zu bytes copied, want %zu, %d layers", what, eng_session_copy_bytes(s), want,
               copied);
        CHECK(eng_session_eval(s, &next, 1, 0) == 0);
        memcpy(l[k], eng_session_logits(s, -1), V * sizeof(float));
        eng_session_free(s);
    }
    CHECKF(memcmp(l[0], l[1], V * sizeof(float)) == 0, "%s: copy vs in place: %g", what,
           maxdiff(l[0], l[1]));
    CHECKF(maxdiff(l[0], l[2]) > 0.1f, "%s: zeroing the copy moved the logits by %g", what,
           maxdiff(l[0], l[2]));
    for (int k = 0; k < 3; k++)
        free(l[k]);
}

/* The static slots of every layer as slots 0 .. n_static - 1; returns
 * their count over all layers, -1 where one is out of place. */
static long statics_lead(const eng_model *m)
{
    long n = 0;
    for (int il = 0; il < m->info.n_layer; il++) {
        const eng_layer *L = &m->layers[il];
        for (int j = 0; j < L->ffn.n_slots; j++)
            if (L->slot_static[j] != (j < L->n_static))
                return -1;
        n += L->n_static;
    }
    return n;
}

int main(void)
{
    const char *path = test_model_path();
    eng_error err;
    eng_model *dense = load(path, NULL, &err);
    CHECKF(dense, "%s", err.msg);
    eng_model_info info;
    eng_model_get_info(dense, &info);
    V = info.n_vocab, NL = info.n_layer, NF = info.n_ff;
    eng_plan_info pi;
    eng_model_get_plan(dense, &pi);
    CHECK(pi.mode == ENG_SELECT_DENSE && pi.neurons_loaded == (uint64_t)NL * NF);

    /* ---- profiles ---- */
    eng_profile *prof;
    CHECK(eng_profile_new(dense, &prof) == 0);
    add_prompts(dense, prof, "qa", texts_a, 3);
    add_prompts(dense, prof, "translate", texts_b, 3);
    CHECK(eng_profile_add_prompt(prof, "bad name!", (double[1]){ 0 }, 1) == -EINVAL);
    CHECK(eng_profile_n_tasks(prof) == 2);
    uint64_t np, ntk;
    CHECK(strcmp(eng_profile_task(prof, 0, &np, &ntk), "qa") == 0 && np == 3 && ntk > 30);
    CHECK(eng_profile_task(prof, 2, NULL, NULL) == NULL);

    char ppath[] = "/tmp/si-test-profile-XXXXXX";
    int fd = mkstemp(ppath);
    CHECK(fd >= 0);
    close(fd);
    CHECK(eng_profile_save(prof, ppath) == 0);
    eng_profile *back;
    CHECKF(eng_profile_load(ppath, dense, &back, &err) == 0, "%s", err.msg);
    double *s1 = malloc(NF * sizeof(double)), *s2 = malloc(NF * sizeof(double));
    for (int l = 0; l < NL; l += 7) {
        for (int t = 0; t < 3; t++) {
            const char *task = t == 0 ? "qa" : t == 1 ? "translate" : "*";
            CHECK(eng_profile_scores(prof, task, l, s1) == 0);
            CHECK(eng_profile_scores(back, task, l, s2) == 0);
            CHECK(memcmp(s1, s2, NF * sizeof(double)) == 0);
        }
    }
    /* the two tasks rank neurons differently, but far from independently */
    CHECK(eng_profile_scores(back, "qa", 10, s1) == 0);
    CHECK(eng_profile_scores(back, "translate", 10, s2) == 0);
    CHECK(memcmp(s1, s2, NF * sizeof(double)) != 0);
    CHECK(eng_profile_scores(back, "nope", 0, s1) == -ENOENT);
    CHECK(eng_profile_scores(back, "qa", NL, s1) == -EINVAL);

    /* corrupt, truncated and foreign profiles are refused with a reason */
    {
        FILE *f = fopen(ppath, "r+b");
        CHECK(f);
        fseek(f, 1000, SEEK_SET);
        int c = fgetc(f);
        fseek(f, 1000, SEEK_SET);
        fputc(c ^ 0x40, f);
        fclose(f);
        eng_profile *x = NULL;
        CHECK(eng_profile_load(ppath, dense, &x, &err) == -EINVAL && x == NULL);
        CHECKF(strstr(err.msg, "checksum"), "%s", err.msg);
        CHECK(truncate(ppath, 500) == 0);
        CHECK(eng_profile_load(ppath, dense, &x, &err) == -EINVAL);
        CHECKF(strstr(err.msg, "truncated"), "%s", err.msg);
        CHECK(truncate(ppath, 10) == 0);
        CHECK(eng_profile_load(ppath, dense, &x, &err) == -EINVAL);
        CHECK(eng_profile_load("/nonexistent/profile", dense, &x, &err) == -ENOENT);
        CHECK(eng_profile_save(prof, ppath) == 0);
    }

    /* ---- loading plans ---- */
    eng_load_plan_params pp = eng_load_plan_params_default();
    pp.mode = ENG_SELECT_SELECTINFER;
    pp.profile = back;
    pp.task = "qa";
    pp.gamma = 0.7f;
    pp.delta = 0.3f;
    pp.dense_first = 2;
    pp.dense_last = 2;
    eng_model *sel = load(path, &pp, &err);
    CHECKF(sel, "%s", err.msg);
    eng_model_info si;
    eng_model_get_info(sel, &si);
    eng_model_get_plan(sel, &pi);
    uint64_t per_neuron = 3ull * info.n_embd * 2;
    uint64_t loaded = (uint64_t)(NL - 4) * lround(0.7 * NF) + 4ull * NF;
    CHECK(pi.neurons_loaded == loaded && pi.mode == ENG_SELECT_SELECTINFER);
    CHECK(strcmp(pi.task, "qa") == 0);
    CHECK(pi.bytes_ffn == loaded * per_neuron);
    CHECK(info.bytes_weights - si.bytes_weights == ((uint64_t)NL * NF - loaded) * per_neuron);
    CHECK(si.bytes_per_token < info.bytes_per_token);

    /* a mass-based per-layer budget spends the same neurons, differently */
    {
        eng_load_plan_params mass = pp;
        mass.layer_budget = ENG_BUDGET_MASS;
        eng_model *mm = load(path, &mass, &err);
        CHECKF(mm, "%s", err.msg);
        eng_plan_info mi;
        eng_model_get_plan(mm, &mi);
        CHECKF(mi.neurons_loaded == loaded, "mass budget loads %llu neurons, uniform %llu",
               (unsigned long long)mi.neurons_loaded, (unsigned long long)loaded);
        float *la = malloc(V * sizeof(float)), *lb = malloc(V * sizeof(float));
        logits_of(sel, NULL, 0, la, NULL);
        logits_of(mm, NULL, 0, lb, NULL);
        CHECK(maxdiff(la, lb) > 0);
        free(la);
        free(lb);
        eng_model_free(mm);
        mass.layer_budget = (eng_layer_budget)7;
        CHECK(load(path, &mass, &err) == NULL && strstr(err.msg, "budget"));
    }

    /* a sensitivity budget: gamma and phi are model-wide (the dense layers
     * count), the sparsified layers share the rest by sensitivity */
    {
        eng_load_plan_params sb = pp;
        float *sens = malloc(NL * sizeof(float));
        for (int l = 0; l < NL; l++)
            sens[l] = 1.0f;
        sens[5] = 50.0f; /* leaves out almost nothing */
        sens[6] = 0.5f;  /* leaves out twice as many as the others */
        sb.dense_first = 1;
        sb.dense_last = 0;
        sb.layer_budget = ENG_BUDGET_SENS;
        sb.layer_sens = sens;
        eng_model *ms = load(path, &sb, &err);
        CHECKF(ms, "%s", err.msg);
        eng_plan_info spi;
        eng_model_get_plan(ms, &spi);
        uint64_t uniform_total = (uint64_t)NL * lround(0.7 * NF);
        CHECKF(spi.neurons_loaded == uniform_total, "sens budget loads %llu, uniform %llu",
               (unsigned long long)spi.neurons_loaded, (unsigned long long)uniform_total);
        /* phi 0.4 model-wide: the computed share is at most 0.4 and within
         * one neuron per layer of it */
        eng_compute_params c4 = eng_compute_params_default();
        c4.phi = 0.4f;
        float *lsb = malloc(V * sizeof(float));
        double sh;
        logits_of(ms, &c4, 2, lsb, &sh);
        double want = (double)lround(0.4 * NF) / NF;
        CHECKF(sh <= want + 1e-9 && sh > want - (double)NL / ((double)NL * NF),
               "sens budget computes %g, want %g", sh, want);
        for (int i = 0; i < V; i++)
            CHECK(isfinite(lsb[i]));
        sens[3] = -1.0f;
        CHECK(load(path, &sb, &err) == NULL && strstr(err.msg, "sensitivity"));
        eng_model_free(ms);
        free(lsb);
        free(sens);
    }

    /* errors: missing task, missing profile, bad fractions, foreign profile */
    {
        eng_load_plan_params bad = pp;
        bad.task = "summarize";
        CHECK(load(path, &bad, &err) == NULL);
        CHECKF(strstr(err.msg, "summarize") && strstr(err.msg, "qa"), "%s", err.msg);
        bad = pp;
        bad.profile = NULL;
        CHECK(load(path, &bad, &err) == NULL && strstr(err.msg, "profile"));
        bad = pp;
        bad.delta = 0.8f;
        CHECK(load(path, &bad, &err) == NULL && strstr(err.msg, "delta"));
        bad = pp;
        bad.dense_first = 20;
        bad.dense_last = 20;
        CHECK(load(path, &bad, &err) == NULL);
    }

    /* gamma = 1 through the selectinfer path is the dense model: bit for bit
     * without static neurons (same slot order); with them only the slot
     * order (static first) and so the summation order differs */
    float *ld = malloc(V * sizeof(float)), *lx = malloc(V * sizeof(float));
    float *ly = malloc(V * sizeof(float));
    logits_of(dense, NULL, 3, ld, NULL);
    {
        eng_load_plan_params full = pp;
        full.gamma = 1.0f;
        full.delta = 0.0f;
        eng_model *m1 = load(path, &full, &err);
        CHECKF(m1, "%s", err.msg);
        logits_of(m1, NULL, 3, lx, NULL);
        CHECK(memcmp(ld, lx, V * sizeof(float)) == 0);
        eng_model_free(m1);
        full.delta = 0.3f;
        m1 = load(path, &full, &err);
        CHECKF(m1, "%s", err.msg);
        logits_of(m1, NULL, 3, lx, NULL);
        CHECKF(maxdiff(ld, lx) < 5e-2f, "static-first order vs dense: %g", maxdiff(ld, lx));
        eng_model_free(m1);
    }

    /* selective computation: phi = gamma computes everything loaded; phi =
     * 0.4 computes 0.4 of the sparsified layers after prefill */
    float *l_load = malloc(V * sizeof(float));
    double share;
    logits_of(sel, NULL, 3, l_load, &share);
    CHECK(fabs(share - (double)loaded / ((double)NL * NF)) < 1e-9);
    eng_compute_params cp = eng_compute_params_default();
    cp.phi = 0.7f;
    logits_of(sel, &cp, 3, lx, &share);
    CHECK(memcmp(l_load, lx, V * sizeof(float)) == 0);
    cp.phi = 0.4f;
    logits_of(sel, &cp, 3, lx, &share);
    double want_share = ((NL - 4) * (double)lround(0.4 * NF) + 4.0 * NF) / ((double)NL * NF);
    CHECKF(fabs(share - want_share) < 1e-9, "share %g, want %g", share, want_share);
    CHECK(maxdiff(lx, l_load) > 0); /* it really computed less */
    for (int i = 0; i < V; i++)
        CHECK(isfinite(lx[i]));
    copy_check(sel, "f16");
    cp.phi = 0.2f; /* below delta: static neurons are always computed */
    {
        eng_session *s;
        CHECK(eng_session_new(sel, NULL, &s) == 0);
        CHECK(eng_session_set_compute(s, &cp) == -EINVAL);
        cp.phi = 0.4f;
        cp.alpha = 0;
        CHECK(eng_session_set_compute(s, &cp) == -EINVAL);
        cp.alpha = 0.2f;
        cp.rank = ENG_RANK_SIGNED;
        CHECK(eng_session_set_compute(s, &cp) == 0);
        eng_session_free(s);
    }
    logits_of(sel, &cp, 3, ly, &share);
    CHECK(fabs(share - want_share) < 1e-9);
    /* the other dynamic rankings pick the same number of neurons, other ones */
    {
        eng_compute_params cm = cp;
        float *lm = malloc(V * sizeof(float));
        for (int rk = ENG_RANK_CONTRIB; rk <= ENG_RANK_MASS; rk++) {
            cm.rank = (eng_rank)rk;
            logits_of(sel, &cm, 3, lm, &share);
            CHECK(fabs(share - want_share) < 1e-9);
            CHECK(maxdiff(lm, lx) > 0 && maxdiff(lm, ly) > 0);
        }
        cm.rank = (eng_rank)(ENG_RANK_MASS + 1);
        eng_session *s;
        CHECK(eng_session_new(sel, NULL, &s) == 0);
        CHECK(eng_session_set_compute(s, &cm) == -EINVAL);
        eng_session_free(s);
        free(lm);
    }

    /* mean compensation of the neurons decode skips: same share, other
     * numbers; with nothing skipped (phi = gamma) it changes nothing */
    {
        eng_compute_params cc = eng_compute_params_default();
        float *lc = malloc(V * sizeof(float));
        cc.phi = 0.4f;
        cc.comp = ENG_COMP_MEAN;
        logits_of(sel, &cc, 3, lc, &share);
        CHECK(fabs(share - want_share) < 1e-9);
        CHECK(maxdiff(lc, lx) > 0);
        for (int i = 0; i < V; i++)
            CHECK(isfinite(lc[i]));
        cc.phi = 0.7f;
        logits_of(sel, &cc, 3, lc, &share);
        CHECK(memcmp(lc, l_load, V * sizeof(float)) == 0);
        free(lc);
    }

    /* the exact pick among per-request candidates (ENG_PICK_EXACT with
     * cand): chosen by the prefill's votes as the per-request pick's, each
     * token reads their gate and up rows and adds the down rows of its k
     * largest |a|, k what phi's bytes leave (f16: a neuron is 3 rows, so
     * k = 3 n_phi - 2 n_cand and a step reads phi's share) */
    {
        eng_compute_params ce = eng_compute_params_default();
        ce.phi = 0.4f;
        ce.cand = 0.55f;
        eng_session *s;
        CHECK(eng_session_new(sel, NULL, &s) == 0);
        CHECK(eng_session_set_compute(s, &ce) == -EINVAL); /* cand is the exact pick's */
        ce.pick = ENG_PICK_EXACT;
        CHECK(eng_session_set_compute(s, &ce) == 0);
        /* compensation for the neurons that are no candidates (fixed per
         * request); without candidates nothing is left out for good */
        ce.comp = ENG_COMP_MEAN;
        CHECK(eng_session_set_compute(s, &ce) == 0);
        ce.cand = 0.0f;
        CHECK(eng_session_set_compute(s, &ce) == -EINVAL);
        ce.comp = ENG_COMP_NONE;
        ce.phi = 0.2f; /* candidates below delta: the static ones are candidates */
        ce.cand = 0.25f;
        CHECK(eng_session_set_compute(s, &ce) == -EINVAL);
        ce.phi = 0.4f;
        ce.cand = 0.55f;
        eng_session_free(s);

        float *le = malloc(V * sizeof(float)), *lr = malloc(V * sizeof(float));
        float *a = malloc(V * sizeof(float));
        eng_compute_params cr = eng_compute_params_default();
        cr.phi = 0.4f;
        logits_of(sel, &cr, 3, lr, NULL);
        /* cand = phi: k takes every candidate, the per-request pick; so
         * does a cand below phi (phi's candidates) */
        ce.cand = 0.4f;
        logits_of(sel, &ce, 3, le, &share);
        CHECK(memcmp(le, lr, V * sizeof(float)) == 0);
        CHECKF(fabs(share - want_share) < 1e-9, "exact cand = phi share %g, want %g", share,
               want_share);
        ce.cand = 0.35f;
        logits_of(sel, &ce, 3, le, &share);
        CHECK(memcmp(le, lr, V * sizeof(float)) == 0);
        /* and with compensation, the per-request pick's */
        cr.comp = ce.comp = ENG_COMP_MEAN;
        logits_of(sel, &cr, 3, lr, NULL);
        logits_of(sel, &ce, 3, le, NULL);
        CHECK(memcmp(le, lr, V * sizeof(float)) == 0);
        /* among more candidates the bias is there too */
        ce.cand = 0.55f;
        logits_of(sel, &ce, 3, a, NULL);
        cr.comp = ce.comp = ENG_COMP_NONE;
        logits_of(sel, &ce, 3, le, NULL);
        CHECK(maxdiff(a, le) > 0);
        cr.phi = 0.4f;
        logits_of(sel, &cr, 3, lr, NULL);
        logits_of(sel, &ce, 3, le, &share);
        CHECKF(fabs(share - want_share) < 1e-9, "exact cand share %g, want %g", share, want_share);
        CHECK(maxdiff(le, lr) > 0);
        for (int i = 0; i < V; i++)
            CHECK(isfinite(le[i]));
        /* without the session's copy there is nothing to pick from: every
         * candidate computed, the per-request pick at phi = cand */
        ce.copy_dynamic = cr.copy_dynamic = false;
        cr.phi = 0.55f;
        logits_of(sel, &cr, 3, lr, NULL);
        logits_of(sel, &ce, 3, le, &share);
        CHECK(memcmp(le, lr, V * sizeof(float)) == 0);
        CHECK(share > want_share + 0.1);
        ce.copy_dynamic = cr.copy_dynamic = true;
        /* one candidate more than phi's neurons: k leaves out each token's
         * 3 smallest |a| of the candidates, which moves one step's logits
         * far less than leaving out one whole voted neuron does (per
         * request at phi against phi + 1 neuron); the wrong slots would
         * move them as much */
        const int n_phi = (int)lround(0.4 * NF);
        ce.cand = cr.phi = (n_phi + 1.0f) / NF;
        logits_of(sel, &cr, 1, lr, NULL);
        logits_of(sel, &ce, 1, le, &share);
        cr.phi = 0.4f;
        logits_of(sel, &cr, 1, a, NULL);
        CHECKF(maxdiff(le, lr) < 0.25f * maxdiff(a, lr),
               "3 of %d candidates left out moved the logits by %g, one neuron by %g", n_phi + 1,
               maxdiff(le, lr), maxdiff(a, lr));
        CHECK(maxdiff(le, lr) > 0);
        /* cand at gamma: every loaded neuron a candidate, the exact pick
         * without cand (phi 0.6: at 0.4 the f16 gate and up rows of all
         * 0.7 cost more than phi) */
        ce.phi = 0.6f;
        ce.cand = 0.0f;
        logits_of(sel, &ce, 3, lr, NULL);
        ce.cand = 0.7f;
        logits_of(sel, &ce, 3, le, NULL);
        CHECK(memcmp(le, lr, V * sizeof(float)) == 0);
        ce.cand = 0.65f;
        logits_of(sel, &ce, 3, le, NULL);
        CHECK(maxdiff(le, lr) > 0);
        free(le);
        free(lr);
        free(a);
    }

    /* per-token picking by a sketch (ENG_PICK_TOKEN): the plan pays for the
     * sketch in bytes, a step reads what phi says, and the pick is the
     * sketch's per token: closer to everything loaded than the per-request
     * pick at the same share */
    eng_load_plan_params pk = pp;
    pk.sketch = true;
    prog_reset();
    eng_model *msk = load(path, &pk, &err);
    CHECKF(msk, "%s", err.msg);
    /* the load reports every layer, 1 of NL to NL of NL */
    CHECK(prog.in_order && prog.calls == NL && prog.last == NL && prog.total == NL);
    const uint64_t sketch_slot = 2ull * (info.n_embd / 32) * 18;
    {
        eng_plan_info ki;
        eng_model_info kinfo;
        eng_model_get_plan(msk, &ki);
        eng_model_get_info(msk, &kinfo);
        uint64_t sparse_loaded = (uint64_t)(NL - 4) * lround(0.7 * NF);
        CHECK(ki.sketch && ki.neurons_loaded == loaded);
        CHECKF(ki.bytes_sketch == sparse_loaded * sketch_slot, "sketch %llu bytes, want %llu",
               (unsigned long long)ki.bytes_sketch,
               (unsigned long long)(sparse_loaded * sketch_slot));
        CHECK(ki.bytes_ffn == loaded * per_neuron + ki.bytes_sketch);
        CHECK(kinfo.bytes_weights == si.bytes_weights + ki.bytes_sketch);

        eng_compute_params ck = eng_compute_params_default();
        ck.phi = 0.4f;
        ck.pick = ENG_PICK_TOKEN;
        eng_session *s;
        CHECK(eng_session_new(sel, NULL, &s) == 0);
        CHECK(eng_session_set_compute(s, &ck) == -EINVAL); /* no sketch loaded */
        eng_session_free(s);
        CHECK(eng_session_new(msk, NULL, &s) == 0);
        ck.comp = ENG_COMP_MEAN;
        CHECK(eng_session_set_compute(s, &ck) == -EINVAL);
        ck.comp = ENG_COMP_NONE;
        ck.pick = (eng_pick)2;
        CHECK(eng_session_set_compute(s, &ck) == -EINVAL);
        ck.pick = ENG_PICK_TOKEN;
        ck.phi = 0.2f; /* below delta is fine: per token nothing is static */
        CHECK(eng_session_set_compute(s, &ck) == 0);
        eng_session_free(s);

        float *lk = malloc(V * sizeof(float));
        ck.phi = 0.7f; /* = gamma: everything loaded, the sketch unused */
        logits_of(msk, &ck, 3, lk, &share);
        CHECK(memcmp(lk, l_load, V * sizeof(float)) == 0);
        ck.phi = 0.4f;
        logits_of(msk, &ck, 3, lk, &share);
        /* the sketch's bytes come off the neurons: the same share as the
         * per-request pick */
        CHECKF(fabs(share - want_share) < 1e-9, "pick share %g, want %g", share, want_share);
        for (int i = 0; i < V; i++)
            CHECK(isfinite(lk[i]));
        /* one decode step after the same prefill (all loaded neurons, so the
         * same token in all three): the sketch's pick stays closer to
         * computing everything loaded than the request's pick does */
        {
            float *a = malloc(V * sizeof(float)), *r1 = malloc(V * sizeof(float));
            float *k1 = malloc(V * sizeof(float));
            eng_compute_params cr = eng_compute_params_default();
            cr.phi = 0.4f;
            logits_of(sel, NULL, 1, a, NULL);
            logits_of(sel, &cr, 1, r1, NULL);
            logits_of(msk, &ck, 1, k1, NULL);
            CHECKF(maxdiff(k1, a) < 0.75f * maxdiff(r1, a),
                   "per-token pick %g from everything loaded, per-request %g", maxdiff(k1, a),
                   maxdiff(r1, a));
            free(a);
            free(r1);
            free(k1);
        }

        /* hot-swaps move neurons between slots; the sketch must follow: a
         * task swap (holes refilled in place), a bigger gamma (new buffers),
         * a smaller one (compaction). (Logits cannot be compared with a
         * fresh load here: another slot order sums in another order, and a
         * per-token pick amplifies that at its k-th boundary.) */
        CHECK(sketch_follows_slots(msk) == NL - 4);
        float *lf = malloc(V * sizeof(float));
        eng_swap_stats st;
        eng_load_plan_params kb = pk;
        kb.task = "translate";
        static const float gammas[] = { 0.7f, 0.9f, 0.5f };
        for (int step = 0; step < 3; step++) {
            kb.gamma = gammas[step];
            prog_reset();
            CHECKF(eng_model_swap(msk, &kb, &st, &err) == 0, "%s", err.msg);
            /* a swap reports each layer as it starts on it: 0 .. NL - 1 */
            CHECK(prog.in_order && prog.calls == NL && prog.last == NL - 1);
            CHECKF(st.neurons_in + st.neurons_out > 0, "swap %d moved nothing", step);
            CHECKF(sketch_follows_slots(msk) == NL - 4, "swap %d: a stale sketch", step);
            logits_of(msk, &ck, 2, lk, &share);
            for (int i = 0; i < V; i++)
                CHECK(isfinite(lk[i]));
        }
        /* a swap to a plan without a sketch frees it, and picking is refused */
        CHECK(eng_model_swap(msk, &pp, &st, &err) == 0);
        eng_model_get_info(msk, &kinfo);
        CHECK(kinfo.bytes_weights == si.bytes_weights);
        CHECK(eng_session_new(msk, NULL, &s) == 0);
        CHECK(eng_session_set_compute(s, &ck) == -EINVAL);
        eng_session_free(s);
        /* and back */
        CHECK(eng_model_swap(msk, &pk, &st, &err) == 0);
        logits_of(msk, &ck, 3, lf, &share);
        CHECK(fabs(share - want_share) < 1e-9);

        /* a memory budget pays for the sketch too: a lower gamma */
        eng_load_plan_params kbud = pk;
        kbud.budget_bytes = info.bytes_weights * 85 / 100;
        float g_sketch = budget_gamma(path, &kbud, per_neuron + sketch_slot, NL - 4);
        kbud.sketch = false;
        CHECK(g_sketch > 0.3f && g_sketch < budget_gamma(path, &kbud, per_neuron, NL - 4));
        free(lk);
        free(lf);
    }
    eng_model_free(msk);

    /* ---- hot-swap ---- */
    /* a session that began before the swap is refused until reset */
    eng_session *old;
    CHECK(eng_session_new(sel, NULL, &old) == 0);
    int32_t t3[3] = { 100, 200, 300 };
    CHECK(eng_session_eval(old, t3, 3, 0) == 0);

    eng_load_plan_params pb = pp;
    pb.task = "translate";
    eng_swap_stats st;
    CHECKF(eng_model_swap(sel, &pb, &st, &err) == 0, "%s", err.msg);
    CHECK(st.neurons_in == st.neurons_out && st.neurons_in > 0);
    CHECK(st.neurons_in < (uint64_t)(NL - 4) * lround(0.7 * NF));
    eng_model_get_plan(sel, &pi);
    CHECK(strcmp(pi.task, "translate") == 0 && pi.neurons_loaded == loaded);
    CHECK(eng_session_eval(old, t3, 1, 0) == -ESTALE);
    eng_session_reset(old);
    CHECK(eng_session_eval(old, t3, 3, 0) == 0);
    eng_session_free(old);

    /* the swap keeps the static slots in front, as a load lays them out */
    CHECK(statics_lead(sel) > 0);
    eng_model *fresh = load(path, &pb, &err);
    CHECKF(fresh, "%s", err.msg);
    CHECK(statics_lead(fresh) > 0);
    logits_of(fresh, NULL, 3, lx, NULL);
    logits_of(sel, NULL, 3, ly, NULL);
    /* same neurons in other slots: only the summation order differs (typically
     * 5e-3 over logits of O(10), as prefill vs decode in test-model) */
    CHECKF(maxdiff(lx, ly) < 5e-2f, "swapped vs fresh: %g", maxdiff(lx, ly));
    eng_model_free(fresh);

    /* shrink and grow gamma through swaps, back to the first plan */
    eng_load_plan_params small = pp, big = pp;
    small.gamma = 0.5f;
    big.gamma = 0.9f;
    CHECK(eng_model_swap(sel, &small, &st, &err) == 0);
    eng_model_get_info(sel, &si);
    CHECK(si.bytes_weights ==
          info.bytes_weights - (uint64_t)(NL - 4) * (NF - lround(0.5 * NF)) * per_neuron);
    CHECK(eng_model_swap(sel, &big, &st, &err) == 0);
    fresh = load(path, &big, &err);
    CHECK(fresh);
    logits_of(fresh, NULL, 2, lx, NULL);
    logits_of(sel, NULL, 2, ly, NULL);
    CHECKF(maxdiff(lx, ly) < 5e-2f, "grown vs fresh: %g", maxdiff(lx, ly));
    eng_model_free(fresh);
    CHECK(eng_model_swap(sel, &pp, &st, &err) == 0);
    logits_of(sel, NULL, 3, lx, NULL);
    CHECKF(maxdiff(lx, l_load) < 5e-2f, "back to the first plan: %g", maxdiff(lx, l_load));

    /* a failed swap leaves the old plan serving */
    {
        eng_load_plan_params bad = pp;
        bad.task = "nope";
        CHECK(eng_model_swap(sel, &bad, &st, &err) == -ENOENT);
        logits_of(sel, NULL, 3, ly, NULL);
        CHECK(memcmp(lx, ly, V * sizeof(float)) == 0);
        eng_model_get_plan(sel, &pi);
        CHECK(strcmp(pi.task, "qa") == 0);
    }

    /* a memory budget becomes gamma, and the plan fits it */
    {
        eng_load_plan_params bud = pp;
        bud.budget_bytes = info.bytes_weights * 85 / 100;
        float g = budget_gamma(path, &bud, per_neuron, NL - 4);
        CHECK(g > 0.3f && g < 0.9f);
        bud.budget_bytes = info.bytes_weights / 4;
        CHECK(load(path, &bud, &err) == NULL && strstr(err.msg, "budget"));
    }

    /* random-load: seeded, reproducible, different seeds differ */
    {
        eng_load_plan_params r1 = eng_load_plan_params_default();
        r1.mode = ENG_SELECT_RANDOM;
        r1.gamma = 0.7f;
        r1.delta = 0.3f;
        r1.seed = 1;
        eng_model *a = load(path, &r1, &err), *b = load(path, &r1, &err);
        r1.seed = 2;
        eng_model *c = load(path, &r1, &err);
        CHECK(a && b && c);
        logits_of(a, NULL, 0, lx, NULL);
        logits_of(b, NULL, 0, ly, NULL);
        CHECK(memcmp(lx, ly, V * sizeof(float)) == 0);
        logits_of(c, NULL, 0, ly, NULL);
        CHECK(maxdiff(lx, ly) > 0);
        eng_model_free(a);
        eng_model_free(b);
        eng_model_free(c);
    }

    /* a profile made for another model is refused */
    {
        eng_select_mode mode;
        CHECK(eng_select_mode_parse("coreinfer", &mode) == 0 && mode == ENG_SELECT_COREINFER);
        CHECK(eng_select_mode_parse("bogus", &mode) == -EINVAL);
        CHECK(strcmp(eng_select_mode_name(ENG_SELECT_LOAD_ONLY), "load-only") == 0);
    }

    /* Q4_1 slots (q8_matrices on the default model's Q4_1 file): a plan
     * prices a neuron at its gate and up rows of 18 Q4_1 blocks (the
     * file's) and its down row of 18 Q8_0 ones; swaps (a task, a bigger
     * gamma, a smaller one) move those slots and their sketches as they
     * move f16 ones, and give what a fresh load of the plan gives */
    {
        q8_slots = true;
        eng_model *dq = load(path, NULL, &err), *mq = load(path, &pk, &err);
        CHECKF(dq && mq, "%s", err.msg);
        eng_model_info qi, qs;
        eng_model_get_info(dq, &qi);
        eng_model_get_info(mq, &qs);
        const uint64_t q8_neuron = (info.n_embd / 32) * (2ull * 20 + 34);
        CHECK(mq->layers[5].ffn.dtype == ENG_DTYPE_Q4_1 && dense->layers[5].ffn.dtype == ENG_DTYPE_F16);
        CHECKF(qi.bytes_weights - qs.bytes_weights ==
                   ((uint64_t)NL * NF - loaded) * q8_neuron - (uint64_t)(NL - 4) * lround(0.7 * NF) * sketch_slot,
               "q8 plan: %llu of %llu bytes", (unsigned long long)qs.bytes_weights,
               (unsigned long long)qi.bytes_weights);
        CHECK(sketch_follows_slots(mq) == NL - 4);
        eng_load_plan_params kb = pk;
        kb.task = "translate";
        static const float gammas[] = { 0.7f, 0.9f, 0.5f };
        for (int step = 0; step < 3; step++) {
            kb.gamma = gammas[step];
            eng_swap_stats st;
            CHECKF(eng_model_swap(mq, &kb, &st, &err) == 0, "%s", err.msg);
            CHECKF(sketch_follows_slots(mq) == NL - 4, "q8 swap %d: a stale sketch", step);
            eng_model *fresh = load(path, &kb, &err);
            CHECKF(fresh, "%s", err.msg);
            logits_of(fresh, NULL, 2, lx, NULL);
            logits_of(mq, NULL, 2, ly, NULL);
            CHECKF(maxdiff(lx, ly) < 5e-2f, "q8 swap %d vs fresh: %g", step, maxdiff(lx, ly));
            eng_model_free(fresh);
        }
        copy_check(mq, "q8_0 after swaps");
        /* and near the f16 slots' logits: the down rows' 8 bits a block */
        logits_of(dq, NULL, 2, lx, NULL);
        logits_of(dense, NULL, 2, ly, NULL);
        CHECKF(maxdiff(lx, ly) > 0 && maxdiff(lx, ly) < 3.0f, "q8 vs f16 slots: %g", maxdiff(lx, ly));
        eng_model_free(dq);
        eng_model_free(mq);
        q8_slots = false;
    }

    unlink(ppath);
    free(s1);
    free(s2);
    free(ld);
    free(lx);
    free(ly);
    free(l_load);
    eng_profile_free(prof);
    eng_profile_free(back);
    eng_model_free(sel);
    eng_model_free(dense);
    printf("ok\n");
    return 0;
}
