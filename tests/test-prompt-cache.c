/* The prompt cache (eng_session_reset_prefix, eng_gen_params.cache_prompt)
 * on the default model: what a kept prefix gives must be what a fresh
 * session computes for the whole prompt. Logits are compared bit for bit
 * where only prompt positions are kept, and the per-request selection's
 * votes (model.h: counts, the chosen slots, the mean compensation's bias)
 * slot for slot. Also: which prefix is kept when the votes cannot follow
 * (a prompt that leaves the last one, other alpha, the signed rank), decode
 * positions (kept only when every loaded neuron was computed), a
 * hot-swap, a cancelled prefill, per-token picking and eng_generate.
 *
 * On a GPU (second argument "cuda"; exit 77 without one) the same runs
 * compare within bounds instead: cuBLAS may choose its kernels by the
 * number of tokens, so a prompt evaluated in other pieces rounds otherwise
 * (logits within 5e-3 of their scale, as test-cuda-model's prefill bound),
 * and a vote at a token's cut can then move, so at most 2 % of the votes
 * may differ (their total only by less than one token's), the selection is
 * checked for its size, and decode logits
 * within 0.1 (selective) or 0.2 (per-token pick) of the scale, bounds
 * against gross errors only. The mean
 * compensation is CPU-only and skipped there.
 *
 * Prompts are pseudo-random token ids and the profile is made here from
 * others, so any model runs it: the default model in the model suite,
 * SI_MODEL (a synthetic model) in tests/gpu-check.sh.
 *
 * usage: test-prompt-cache [cuda]   (cuda: exit 77 without a GPU or model)
 */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "engine.h"
#include "model.h"
#include "test-util.h"

static int V, NL, NF;
static bool gpu;
/* bounds on a GPU, relative to 1 + max |logit| (test-cuda-model's) */
#define PREFILL_REL 5e-3
#define SELECT_REL 1e-1
#define PICK_REL 2e-1

static eng_session *session(eng_model *m, const eng_compute_params *cp, int n_batch);

/* n pseudo-random token ids (a fixed sequence per seed) */
static size_t rand_tokens(int32_t *out, size_t n, uint32_t seed)
{
    for (size_t i = 0; i < n; i++) {
        seed = seed * 1664525u + 1013904223u;
        out[i] = (int32_t)((seed >> 8) % (uint32_t)V);
    }
    return n;
}

/* A profile of two tasks, "chat" and "qa", from three prompts each. */
static eng_profile *make_profile(eng_model *m)
{
    eng_profile *p;
    CHECK(eng_profile_new(m, &p) == 0);
    eng_session *s = session(m, NULL, 0);
    double *sums = malloc((size_t)NL * NF * sizeof(double));
    CHECK(sums);
    for (int i = 0; i < 6; i++) {
        int32_t t[48];
        rand_tokens(t, 48, 100 + i);
        memset(sums, 0, (size_t)NL * NF * sizeof(double));
        eng_session_reset(s);
        CHECK(eng_session_observe_ffn(s, sums) == 0);
        CHECK(eng_session_eval(s, t, 48, 0) == 0);
        CHECK(eng_session_observe_ffn(s, NULL) == 0);
        CHECK(eng_profile_add_prompt(p, i < 3 ? "chat" : "qa", sums, 48) == 0);
    }
    free(sums);
    eng_session_free(s);
    return p;
}

/* c[0..na+nb) = a then b */
static size_t cat(int32_t *c, const int32_t *a, size_t na, const int32_t *b, size_t nb)
{
    memmove(c, a, na * sizeof(*a));
    memmove(c + na, b, nb * sizeof(*b));
    return na + nb;
}

static eng_model *load(const char *path, const eng_load_plan_params *plan)
{
    eng_model_params mp = eng_model_params_default();
    mp.n_threads = 2;
    mp.plan = plan;
    mp.backend = gpu ? ENG_BACKEND_CUDA : ENG_BACKEND_CPU;
    eng_model *m = NULL;
    eng_error err;
    int r = eng_model_load(path, &mp, &m, &err);
    if (gpu && (r == -ENODEV || r == -ENOTSUP)) {
        printf("SKIP: no usable GPU (%s)\n", err.msg);
        exit(77);
    }
    CHECKF(r == 0, "%s", err.msg);
    return m;
}

static eng_session *session(eng_model *m, const eng_compute_params *cp, int n_batch)
{
    eng_session_params sp = eng_session_params_default();
    sp.n_ctx = 512;
    sp.n_batch = n_batch;
    eng_session *s;
    CHECK(eng_session_new(m, &sp, &s) == 0);
    if (cp)
        CHECK(eng_session_set_compute(s, cp) == 0);
    return s;
}

/* A fresh session's view of prompt t[0..n), then `steps` decode tokens
 * (d[0..steps)): the state the cached session must reach. */
static eng_session *fresh(eng_model *m, const eng_compute_params *cp, const int32_t *t, size_t n)
{
    eng_session *f = session(m, cp, 0);
    CHECK(eng_session_eval(f, t, n, 0) == 0);
    return f;
}

static double max_diff(const eng_session *a, const eng_session *b)
{
    const float *la = eng_session_logits(a, -1), *lb = eng_session_logits(b, -1);
    CHECK(la && lb);
    double d = 0;
    /* not fmax: it skips NaN (and gcc 12's aarch64 vectorizer dies on it) */
    for (int i = 0; i < V; i++) {
        const double e = fabs((double)la[i] - lb[i]);
        if (!(e <= d))
            d = isnan(e) ? INFINITY : e;
    }
    return d;
}

/* Bit for bit on the CPU; on a GPU within rel of the logits' scale. */
static void close_logits(const eng_session *a, const eng_session *b, double rel, const char *what)
{
    const float *la = eng_session_logits(a, -1), *lb = eng_session_logits(b, -1);
    CHECK(la && lb);
    if (!gpu) {
        CHECKF(memcmp(la, lb, (size_t)V * sizeof(float)) == 0, "%s: logits differ", what);
        return;
    }
    double scale = 0;
    for (int i = 0; i < V; i++) {
        const double e = fabs((double)lb[i]);
        scale = e > scale ? e : scale;
    }
    double d = max_diff(a, b);
    CHECKF(d <= rel * (1 + scale), "%s: logits differ by %g (scale %g)", what, d, scale);
}

static void same_logits(const eng_session *a, const eng_session *b, const char *what)
{
    close_logits(a, b, PREFILL_REL, what);
}

/* The per-request selection of a and b: votes, chosen slots, bias. */
static void same_selection(const eng_session *a, const eng_session *b, const char *what)
{
    CHECKF(a->selected && b->selected, "%s: not selected", what);
    for (int l = 0; l < NL && gpu; l++) {
        /* a vote at a token's cut may move by rounding, a few of them; but
         * every token casts its k (abs rank: alpha of the loaded slots, one
         * more per tie), so the totals tell a token counted twice or not */
        int ns = a->model->layers[l].ffn.n_slots;
        double moved = 0, total_a = 0, total_b = 0;
        for (int j = 0; j < ns; j++) {
            moved += fabs((double)a->counts[l][j] - b->counts[l][j]);
            total_a += a->counts[l][j];
            total_b += b->counts[l][j];
        }
        const double k = lround(a->compute.alpha * ns);
        CHECKF(moved <= 0.02 * total_b, "%s: layer %d: %g of %g votes differ", what, l, moved,
               total_b);
        CHECKF(a->compute.rank != ENG_RANK_ABS || fabs(total_a - total_b) < k / 2,
               "%s: layer %d: %g votes against %g (k %g)", what, l, total_a, total_b, k);
        CHECKF(a->ffn_n_sel[l] == b->ffn_n_sel[l], "%s: layer %d selects %d against %d", what, l,
               a->ffn_n_sel[l], b->ffn_n_sel[l]);
    }
    for (int l = 0; l < NL && !gpu; l++) {
        int ns = a->model->layers[l].ffn.n_slots;
        CHECKF(memcmp(a->counts[l], b->counts[l], (size_t)ns * sizeof(float)) == 0,
               "%s: votes of layer %d differ", what, l);
        CHECKF(a->ffn_n_sel[l] == b->ffn_n_sel[l], "%s: layer %d selects %d against %d", what, l,
               a->ffn_n_sel[l], b->ffn_n_sel[l]);
        CHECK((a->ffn_sel[l] == NULL) == (b->ffn_sel[l] == NULL));
        if (a->ffn_sel[l])
            CHECKF(memcmp(a->ffn_sel[l], b->ffn_sel[l], (size_t)a->ffn_n_sel[l] * 4) == 0,
                   "%s: layer %d selects other slots", what, l);
        CHECK((a->ffn_bias[l] == NULL) == (b->ffn_bias[l] == NULL));
        if (a->ffn_bias[l])
            CHECKF(memcmp(a->ffn_bias[l], b->ffn_bias[l],
                          (size_t)a->model->info.n_embd * sizeof(float)) == 0,
                   "%s: layer %d's compensation differs", what, l);
    }
}

/* One decode step of token t on both; then their logits must agree. */
static void step_both(eng_session *a, eng_session *b, int32_t t, double rel, const char *what)
{
    CHECK(eng_session_eval(a, &t, 1, 0) == 0);
    CHECK(eng_session_eval(b, &t, 1, 0) == 0);
    close_logits(a, b, rel, what);
}

/* eng_session_reset_prefix, after checking that eng_session_prefix_len
 * foretold what it keeps (how the daemon picks a session for a prompt). */
static int keep(eng_session *s, const int32_t *t, size_t n)
{
    const int want = eng_session_prefix_len(s, t, n);
    const int kept = eng_session_reset_prefix(s, t, n);
    CHECKF(kept == want, "prefix_len said %d, reset_prefix kept %d", want, kept);
    return kept;
}

/* s keeps a prefix of t[0..n) (expect positions), evaluates the rest; the
 * logits must equal a fresh session's. Returns the fresh session. */
static eng_session *resume(eng_session *s, eng_model *m, const eng_compute_params *cp,
                           const int32_t *t, size_t n, int expect, const char *what)
{
    int kept = keep(s, t, n);
    CHECKF(kept == expect, "%s: kept %d, expected %d", what, kept, expect);
    CHECK(eng_session_n_past(s) == kept);
    CHECK(eng_session_eval(s, t + kept, n - (size_t)kept, 0) == 0);
    eng_session *f = fresh(m, cp, t, n);
    same_logits(s, f, what);
    return f;
}

static int n_evals, abort_after;
static int abort_cb(void *u)
{
    (void)u;
    return ++n_evals > abort_after;
}

static void test_dense(eng_model *m, const int32_t *a, size_t na, const int32_t *x, size_t nx,
                       const int32_t *y, size_t ny)
{
    int32_t b[512], c[512], d[512];
    size_t nb = cat(b, a, na, x, nx);
    eng_session *s = session(m, NULL, 0), *f;

    /* nothing held yet */
    CHECK(eng_session_n_cached(s) == 0);
    CHECK(keep(s, a, na) == 0);
    CHECK(eng_session_eval(s, a, na, 0) == 0);
    CHECK(eng_session_n_cached(s) == (int)na);
    /* the whole prompt before, then more: all of it kept */
    f = resume(s, m, NULL, b, nb, (int)na, "dense, prompt extended");
    eng_session_free(f);
    /* the same prompt again: all but two tokens */
    f = resume(s, m, NULL, b, nb, (int)nb - 2, "dense, same prompt");
    eng_session_free(f);
    /* a prompt that leaves it after the system prompt */
    size_t common = 12;
    size_t nc = cat(c, a, common, y, ny);
    CHECK(a[common] != y[0] && nc >= common + 2);
    f = resume(s, m, NULL, c, nc, (int)common, "dense, diverging prompt");
    eng_session_free(f);
    /* nothing in common, and the empty and one-token prompts */
    CHECK(keep(s, y, ny) == 0);
    CHECK(keep(s, a, 1) == 0);
    CHECK(keep(s, NULL, 0) == 0);
    CHECK(eng_session_n_past(s) == 0);

    /* decode positions of a dense session are kept too: their kernels sum
     * in another order, so the logits agree up to rounding */
    CHECK(eng_session_eval(s, a, na, 0) == 0);
    int32_t gen[3];
    for (int i = 0; i < 3; i++) {
        gen[i] = eng_session_argmax(s);
        CHECK(gen[i] >= 0);
        CHECK(eng_session_eval(s, &gen[i], 1, 0) == 0);
    }
    CHECK(eng_session_n_cached(s) == (int)na + 3); /* a dense decode's positions count */
    size_t nd = cat(d, a, na, gen, 3);
    nd = cat(d, d, nd, x, nx);
    CHECK(keep(s, d, nd) == (int)na + 3);
    CHECK(eng_session_eval(s, d + na + 3, nd - na - 3, 0) == 0);
    f = fresh(m, NULL, d, nd);
    if (gpu) {
        close_logits(s, f, PREFILL_REL, "dense, decode positions kept");
    } else {
        double diff = max_diff(s, f);
        CHECKF(diff < 0.05, "dense, decode positions kept: logits differ by %g", diff);
        CHECK(eng_session_argmax(s) == eng_session_argmax(f));
    }
    eng_session_free(f);

    /* a prefill cancelled after its first chunk keeps what it finished */
    eng_session *sb = session(m, NULL, 16);
    n_evals = 0;
    abort_after = 0; /* asked before the second chunk */
    eng_session_set_abort(sb, abort_cb, NULL);
    CHECK(eng_session_eval(sb, b, nb, 0) == -ECANCELED);
    eng_session_set_abort(sb, NULL, NULL);
    CHECK(eng_session_n_past(sb) == 16);
    f = resume(sb, m, NULL, b, nb, 16, "dense, after a cancelled prefill");
    eng_session_free(f);
    eng_session_free(sb);
    eng_session_free(s);
}

static void test_selective(eng_model *m, const int32_t *a, size_t na, const int32_t *x,
                           size_t nx, const int32_t *y, size_t ny)
{
    int32_t b[512], c[512];
    size_t nb = cat(b, a, na, x, nx);
    eng_compute_params cp = eng_compute_params_default();
    cp.phi = 0.4f;
    cp.alpha = 0.2f;
    eng_session *s = session(m, &cp, 0), *f;

    CHECK(eng_session_eval(s, a, na, 0) == 0);
    int32_t g = eng_session_argmax(s);
    CHECK(eng_session_eval(s, &g, 1, 0) == 0); /* a decode step: selective, not kept */
    CHECK(eng_session_eval(s, &g, 1, 0) == 0);
    CHECK(eng_session_n_cached(s) == (int)na); /* the prompt, not the steps */

    /* the prompt before and more: kept with its votes, decode positions not */
    int32_t d[512];
    size_t nd = cat(d, a, na, &g, 1);
    nd = cat(d, d, nd, x, nx);
    f = resume(s, m, &cp, d, nd, (int)na, "phi 0.4, prompt extended");
    same_selection(s, f, "phi 0.4, prompt extended");
    step_both(s, f, 42, SELECT_REL, "phi 0.4, prompt extended, decode");
    eng_session_free(f);

    /* the same prompt again: two tokens evaluated, their votes not cast twice */
    f = resume(s, m, &cp, d, nd, (int)nd - 2, "phi 0.4, same prompt");
    same_selection(s, f, "phi 0.4, same prompt");
    step_both(s, f, 42, SELECT_REL, "phi 0.4, same prompt, decode");
    eng_session_free(f);

    /* one token more: of the two evaluated, the first votes no more */
    d[nd] = 7 % V;
    f = resume(s, m, &cp, d, nd + 1, (int)nd - 1, "phi 0.4, one token more");
    same_selection(s, f, "phi 0.4, one token more");
    step_both(s, f, 42, SELECT_REL, "phi 0.4, one token more, decode");
    eng_session_free(f);

    /* a prompt that leaves the last one: the votes of the common part are
     * not held on their own, so nothing is kept */
    f = resume(s, m, &cp, a, na, 0, "phi 0.4, a prefix of the prompt before");
    same_selection(s, f, "phi 0.4, a prefix of the prompt before");
    eng_session_free(f);
    size_t nc = cat(c, a, 12, y, ny);
    f = resume(s, m, &cp, c, nc, 0, "phi 0.4, diverging prompt");
    same_selection(s, f, "phi 0.4, diverging prompt");
    eng_session_free(f);

    /* other alpha: other votes; phi alone does not matter */
    eng_session_free(resume(s, m, &cp, b, nb, 0, "phi 0.4 before b"));
    eng_compute_params c2 = cp;
    c2.alpha = 0.3f;
    CHECK(eng_session_set_compute(s, &c2) == 0);
    f = resume(s, m, &c2, b, nb, 0, "alpha changed");
    same_selection(s, f, "alpha changed");
    eng_session_free(f);
    c2.phi = 0.5f;
    CHECK(eng_session_set_compute(s, &c2) == 0);
    f = resume(s, m, &c2, b, nb, (int)nb - 2, "phi changed");
    same_selection(s, f, "phi changed");
    eng_session_free(f);

    /* the signed rank's votes depend on the prompt's chunks */
    c2.rank = ENG_RANK_SIGNED;
    CHECK(eng_session_set_compute(s, &c2) == 0);
    eng_session_free(resume(s, m, &c2, b, nb, 0, "signed, first"));
    eng_session_free(resume(s, m, &c2, b, nb, 0, "signed, again"));

    /* the mean compensation's sums follow the votes (the CPU's only) */
    c2 = cp;
    c2.comp = ENG_COMP_MEAN;
    if (!gpu) {
        CHECK(eng_session_set_compute(s, &c2) == 0);
        eng_session_free(resume(s, m, &c2, a, na, 0, "comp mean, first"));
        f = resume(s, m, &c2, b, nb, (int)na, "comp mean, extended");
        same_selection(s, f, "comp mean, extended");
        step_both(s, f, 42, SELECT_REL, "comp mean, decode");
        eng_session_free(f);
    }

    /* dense compute (phi 0) casts no votes: any common prefix is kept */
    c2 = eng_compute_params_default();
    CHECK(eng_session_set_compute(s, &c2) == 0);
    eng_session_free(resume(s, m, &c2, b, nb, (int)nb - 2, "phi 0 after comp"));
    eng_session_free(resume(s, m, &c2, c, nc, 12, "phi 0, diverging"));

    /* a prefill cancelled after kept votes leaves none to keep */
    eng_session *sb = session(m, &cp, 8);
    CHECK(eng_session_eval(sb, a, na, 0) == 0);
    n_evals = 0;
    abort_after = 1;
    eng_session_set_abort(sb, abort_cb, NULL);
    CHECK(keep(sb, b, nb) == (int)na);
    CHECK(eng_session_eval(sb, b + na, nb - na, 0) == -ECANCELED);
    eng_session_set_abort(sb, NULL, NULL);
    f = resume(sb, m, &cp, b, nb, 0, "phi 0.4 after a cancelled prefill");
    same_selection(sb, f, "phi 0.4 after a cancelled prefill");
    eng_session_free(f);
    eng_session_free(sb);
    eng_session_free(s);
}

/* Per-token picking casts no votes, and its decode positions computed a
 * pick of the loaded neurons: the prompt is kept, whatever came before. */
static void test_pick(eng_model *m, const int32_t *a, size_t na, const int32_t *x, size_t nx)
{
    int32_t b[512];
    size_t nb = cat(b, a, na, x, nx);
    eng_compute_params cp = eng_compute_params_default();
    cp.phi = 0.4f;
    cp.pick = ENG_PICK_TOKEN;
    eng_session *s = session(m, &cp, 0), *f;
    CHECK(eng_session_eval(s, a, na, 0) == 0);
    int32_t g = eng_session_argmax(s);
    CHECK(eng_session_eval(s, &g, 1, 0) == 0);
    int32_t d[512];
    size_t nd = cat(d, a, na, &g, 1);
    nd = cat(d, d, nd, x, nx);
    f = resume(s, m, &cp, d, nd, (int)na, "pick=token, prompt extended");
    step_both(s, f, 42, PICK_REL, "pick=token, decode");
    eng_session_free(f);
    /* the prompt d is held, the decode step after it is not */
    size_t p = 0;
    while (p < nb && p < nd && b[p] == d[p])
        p++;
    eng_session_free(resume(s, m, &cp, b, nb, (int)p, "pick=token, other tail"));
    eng_session_free(resume(s, m, &cp, b, nb, (int)nb - 2, "pick=token, same prompt"));
    eng_session_free(s);
}

static int collect(void *u, const char *text, size_t len)
{
    (void)text;
    (void)len;
    (void)u;
    return 0;
}

/* eng_generate: what it reports kept, and the same tokens as without. */
static void test_generate(eng_model *m, const int32_t *a, size_t na, const int32_t *x, size_t nx)
{
    int32_t b[512];
    size_t nb = cat(b, a, na, x, nx);
    eng_compute_params cp = eng_compute_params_default();
    cp.phi = 0.4f;
    eng_session *s = session(m, &cp, 0), *f = session(m, &cp, 0);
    eng_gen_params gp = eng_gen_params_default();
    CHECK(!gp.cache_prompt);
    gp.max_tokens = 6;
    gp.cache_prompt = true;
    eng_gen_stats st;
    CHECK(eng_generate(s, a, na, &gp, collect, NULL, &st) == 0);
    CHECK(st.n_cached == 0 && st.n_prompt == (int)na);
    CHECK(eng_generate(s, b, nb, &gp, collect, NULL, &st) == 0);
    CHECKF(st.n_cached == (int)na, "generate kept %d of %zu", st.n_cached, nb);
    int32_t next = eng_session_argmax(s);
    gp.cache_prompt = false;
    eng_gen_stats sf;
    CHECK(eng_generate(f, b, nb, &gp, collect, NULL, &sf) == 0);
    CHECK(sf.n_cached == 0);
    CHECK(gpu || (sf.n_generated == st.n_generated && sf.stop_reason == st.stop_reason));
    if (!gpu)
        CHECK(eng_session_argmax(f) == next);
    same_selection(s, f, "generate");
    /* greedy kept only the argmax on a GPU: one more step with logits */
    step_both(s, f, 42, SELECT_REL, "generate, a step after");
    eng_session_free(f);
    eng_session_free(s);
}

int main(int argc, char **argv)
{
    if (argc > 2 || (argc == 2 && strcmp(argv[1], "cuda"))) {
        fprintf(stderr, "usage: %s [cuda]\n", argv[0]);
        return 2;
    }
    gpu = argc == 2;
    const char *path = test_model_path();
    if (gpu && access(path, R_OK) != 0) {
        printf("SKIP: no model at %s\n", path);
        return 77;
    }
    eng_model *dense = load(path, NULL);
    eng_model_info info;
    eng_model_get_info(dense, &info);
    V = info.n_vocab, NL = info.n_layer, NF = info.n_ff;

    /* a: the first prompt; x: what the next one adds; y: a prompt that
     * shares only a's first 12 tokens */
    int32_t a[64], x[64], y[64];
    size_t na = rand_tokens(a, 30, 1), nx = rand_tokens(x, 29, 2), ny = rand_tokens(y, 14, 3);
    if (y[0] == a[12])
        y[0] = (y[0] + 1) % V;

    test_dense(dense, a, na, x, nx, y, ny);

    eng_error err;
    eng_profile *prof = make_profile(dense);
    eng_load_plan_params pp = eng_load_plan_params_default();
    pp.mode = ENG_SELECT_SELECTINFER;
    pp.profile = prof;
    pp.task = "chat";
    pp.gamma = 0.7f;
    pp.delta = 0.3f;
    eng_model *sel = load(path, &pp);
    test_selective(sel, a, na, x, nx, y, ny);
    test_generate(sel, a, na, x, nx);

    /* a hot-swap: the cache holds the old neurons' keys and values */
    eng_session *s = session(sel, NULL, 0);
    CHECK(eng_session_eval(s, a, na, 0) == 0);
    eng_load_plan_params p2 = pp;
    p2.task = "qa";
    eng_swap_stats sw;
    CHECK(eng_session_n_cached(s) == (int)na);
    CHECKF(eng_model_swap(sel, &p2, &sw, &err) == 0, "%s", err.msg);
    CHECK(eng_session_n_cached(s) == 0);
    CHECK(keep(s, a, na) == 0);
    CHECK(eng_session_eval(s, a, na, 0) == 0);
    CHECK(keep(s, a, na) == (int)na - 2);
    eng_session_free(s);

    pp.sketch = true;
    eng_model *msk = load(path, &pp);
    test_pick(msk, a, na, x, nx);

    eng_model_free(msk);
    eng_model_free(sel);
    eng_profile_free(prof);
    eng_model_free(dense);
    printf("prompt cache: ok\n");
    return 0;
}
