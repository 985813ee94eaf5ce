/* Whole-model parity: the same model on the CPU backend and on the CUDA
 * backend (eng_model_params.backend), through the public engine API only.
 *
 * On the synthetic models si-synth writes (tiny: llama/SmolLM layout,
 * tiny-qwen2: NEOX RoPE and QKV biases, tiny-qwen3: per-head q/k norms
 * and wide heads, tiny-llama3: rope frequency factors, tiny-phi3: fused
 * tensors split at load, tiny-gemma3: GeGLU, post-norms, scaled
 * embeddings, sliding-window layers, tiny-gemma2: soft-capped scores and
 * logits, tiny-phi3-128k: LongRoPE's long table and attn_factor,
 * tiny-phi4: partial rotation and a tied output, tiny-lfm2: short
 * convolutions, their cache rows read at the step's position), and on
 * the default model when it is present:
 *
 *   1. prefill logits of every position of a fixed token sequence;
 *   2. decode-only logits (one token per eval from an empty context);
 *   3. greedy generation from fixed prompts, dense, then selective
 *      (selectinfer gamma 0.7, delta 0.3, phi 0.4 from a profile made on
 *      the CPU model), then selective again after a hot-swap
 *      (eng_model_swap) of both models to another task;
 *   4. the profiling sums (eng_session_observe_ffn) of one prompt;
 *   5. decode steps as CUDA graphs against the same model launching op by
 *      op (ENG_CUDA_GRAPHS=0), dense and selective: same tokens and logits,
 *      every step a graph launch;
 *   6. greedy on the device (ENG_EVAL_ARGMAX: the argmax kernel ends each
 *      step's graph, 4 bytes come back), dense and selective: the tokens
 *      are the argmax of the logits the same model downloads without the
 *      flag, exactly;
 *   6b. sampling from the device's candidates (ENG_EVAL_CANDIDATES: the
 *      top_cands kernel ends each step's graph), dense and selective: the
 *      tokens a top-k sampler draws from them are those it draws from the
 *      row of logits, exactly;
 *   7. 3, 5 and 6 again with per-token picking (a plan with a sketch, phi
 *      0.4, ENG_PICK_TOKEN), and greedy again after a swap of both.
 *
 * Bounds (|CPU - CUDA| on logits; both hold the same f16 weights, only the
 * arithmetic differs):
 *   prefill:  cuBLAS gets x rounded to f16 (2^-11 relative) for every
 *             matrix product, so logits move by ~1e-3 of their scale per
 *             layer: max <= PREFILL_REL * (1 + max |logit|), rms <= a tenth
 *             of that;
 *   decode:   f32 GEMV, sums in another order: max <= DECODE_REL * (1 + max
 *             |logit|);
 *   greedy:   the same tokens, except where the CPU's own top two are
 *             within the logits bound (a near tie may go either way); the
 *             generation then stops being compared, and says so. Logits
 *             along the way within the prefill bound (the prompt's KV came
 *             from the prefill path);
 *   selective: computing every loaded neuron keeps the prefill bound. With
 *             phi 0.4 the prefill activations pick the neurons decode
 *             computes, and a pick at the cut can go the other way on the
 *             other backend: as published (per-token top alpha) the score
 *             is a count of votes, small integers with many ties broken
 *             by slot, so one activation at a token's cut moving by
 *             rounding moves a vote from one neuron to another (seen in
 *             the emulation: two slots trading one vote, 7 vs 6); ranked
 *             by summed |a| (ENG_RANK_MASS) the score is continuous, and
 *             on the 2-layer tiny models the picks agree, so that case
 *             keeps the prefill bound there; on the default model (30
 *             layers, ~1000 candidates per cut) some pick flips anyway
 *             (logits then move by ~3 % of their scale, with the same
 *             greedy text). Flipping cases get SELECT_REL (0.1 of the
 *             logit scale), a bound against gross errors only;
 *   per-token picking re-picks at every decode token and layer from the
 *             token's own activations rounded to 8 bits: a rounding
 *             difference upstream flips a neuron at some cut nearly every
 *             step (on the default model, seen in the emulation: logits
 *             within 3.5 of a scale of 32 with the same greedy tokens, 4.1
 *             after a swap), so PICK_REL (0.2 of the logit scale) bounds
 *             gross errors only; the op's picks themselves are checked
 *             exactly in cuda-backend. A device that picked the least
 *             promising neurons instead fails it (tokens and logits, on
 *             the synthetic models);
 *   ffn share: identical (the same number of neurons is computed);
 *   profile sums: relative difference <= PREFILL_REL per layer total.
 *
 * usage: test-cuda-model SI_SYNTH
 * Environment: SI_MODEL (default model; skipped when absent), SI_TEST_STEPS
 * (greedy steps, default 12: the host emulation of CUDA runs it with fewer),
 * SI_TEST_DEFAULT_MODEL=0 skips the default model.
 * Exit: 0 pass, 1 fail, 77 no GPU (eng_backend_cuda_new: -ENODEV).
 */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "backend.h"
#include "engine.h"
#include "model.h"
#include "test-util.h"

#define PREFILL_REL 5e-3
#define DECODE_REL 5e-4
#define SELECT_REL 1e-1
#define PICK_REL 2e-1

static int n_fail;

#define EXPECT(cond, ...)                                                                    \
    do {                                                                                     \
        if (!(cond)) {                                                                       \
            fprintf(stderr, "FAIL %s:%d: ", __FILE__, __LINE__);                             \
            fprintf(stderr, __VA_ARGS__);                                                    \
            fputc('\n', stderr);                                                             \
            n_fail++;                                                                        \
        }                                                                                    \
    } while (0)

static const int32_t TOKENS[] = { 5, 17, 99, 250, 300, 12, 7, 64, 128, 200, 31, 42 };
enum { N_TOK = sizeof(TOKENS) / sizeof(TOKENS[0]) };

static const char *prompts[] = {
    "The capital of France is",
    "Once upon a time, in a small village,",
    "1, 2, 3, 4, 5,",
};
enum { N_PROMPTS = sizeof(prompts) / sizeof(prompts[0]) };

static const char *texts_a[] = {
    "What is the capital of France? The capital of France is Paris.",
    "Who wrote Hamlet? William Shakespeare wrote Hamlet around 1600.",
};
static const char *texts_b[] = {
    "Translate to German: The house is small. Das Haus ist klein.",
    "Translate to German: Where is the station? Wo ist der Bahnhof?",
};

static int steps = 12;

/* ---- helpers ------------------------------------------------------------------------- */

static eng_model *load(const char *path, eng_backend_kind be, const eng_load_plan_params *plan)
{
    eng_model_params mp = eng_model_params_default();
    mp.n_threads = 2;
    mp.backend = be;
    mp.device = 0;
    mp.plan = plan;
    eng_model *m = NULL;
    eng_error err = { { 0 } };
    int r = eng_model_load(path, &mp, &m, &err);
    CHECKF(r == 0, "load %s on %s: %s (%d)", path, be == ENG_BACKEND_CUDA ? "cuda" : "cpu",
           err.msg, r);
    return m;
}

static int n_vocab(const eng_model *m)
{
    eng_model_info info;
    eng_model_get_info(m, &info);
    return info.n_vocab;
}

static int32_t argmax(const float *l, int n)
{
    int32_t b = 0;
    for (int i = 1; i < n; i++)
        if (l[i] > l[b])
            b = i;
    return b;
}

static double maxabs(const float *l, int n)
{
    double m = 0;
    for (int i = 0; i < n; i++)
        m = fabs(l[i]) > m ? fabs(l[i]) : m;
    return m;
}

typedef struct diff {
    double max, sq, scale;
    long n;
} diff;

static void diff_add(diff *d, const float *ref, const float *got, int n)
{
    for (int i = 0; i < n; i++) {
        double e = fabs((double)got[i] - ref[i]);
        if (e > d->max || isnan(e))
            d->max = e;
        d->sq += e * e;
    }
    d->n += n;
    double s = maxabs(ref, n);
    d->scale = s > d->scale ? s : d->scale;
}

static double diff_rms(const diff *d)
{
    return d->n ? sqrt(d->sq / (double)d->n) : 0;
}

static size_t tokenize(const eng_model *m, const char *text, int32_t *toks, size_t cap)
{
    size_t n = 0;
    CHECK(eng_tokenize(m, text, strlen(text), ENG_TOK_ADD_SPECIAL, toks, cap, &n) == 0);
    return n;
}

/* ---- 1, 2: logits of a fixed sequence ------------------------------------------------------ */

static void prefill_logits(const char *name, eng_model *mc, eng_model *mg)
{
    int V = n_vocab(mc);
    eng_session *sc, *sg;
    CHECK(eng_session_new(mc, NULL, &sc) == 0);
    CHECK(eng_session_new(mg, NULL, &sg) == 0);
    int32_t toks[N_TOK];
    for (int i = 0; i < N_TOK; i++)
        toks[i] = TOKENS[i] % V;

    /* one eval of every token: the prefill path */
    CHECK(eng_session_eval(sc, toks, N_TOK, ENG_EVAL_ALL_LOGITS) == 0);
    int r = eng_session_eval(sg, toks, N_TOK, ENG_EVAL_ALL_LOGITS);
    CHECKF(r == 0, "%s: CUDA prefill failed: %d", name, r);
    diff d = { 0 };
    int agree = 0, ties = 0;
    for (int t = 0; t < N_TOK; t++) {
        const float *lc = eng_session_logits(sc, t), *lg = eng_session_logits(sg, t);
        CHECK(lc && lg);
        diff_add(&d, lc, lg, V);
        int32_t a = argmax(lc, V), b = argmax(lg, V);
        agree += a == b;
        ties += a != b && lc[a] - lc[b] <= PREFILL_REL * (1 + maxabs(lc, V));
    }
    double bound = PREFILL_REL * (1 + d.scale);
    printf("%-12s prefill  max %.2e  rms %.2e  (bound %.2e, |logit| <= %.1f)  argmax %d/%d\n",
           name, d.max, diff_rms(&d), bound, d.scale, agree, N_TOK);
    EXPECT(d.max <= bound && diff_rms(&d) <= bound / 10, "%s: prefill logits differ", name);
    EXPECT(agree + ties == N_TOK, "%s: prefill argmax differs beyond near ties", name);

    /* one token per eval: the decode path from the first token on */
    eng_session_reset(sc);
    eng_session_reset(sg);
    diff dd = { 0 };
    for (int t = 0; t < N_TOK; t++) {
        CHECK(eng_session_eval(sc, &toks[t], 1, 0) == 0);
        CHECK(eng_session_eval(sg, &toks[t], 1, 0) == 0);
        diff_add(&dd, eng_session_logits(sc, -1), eng_session_logits(sg, -1), V);
    }
    bound = DECODE_REL * (1 + dd.scale);
    printf("%-12s decode   max %.2e  rms %.2e  (bound %.2e)\n", name, dd.max, diff_rms(&dd),
           bound);
    EXPECT(dd.max <= bound, "%s: decode logits differ", name);

    /* embeddings: the output-normed hidden states come back from the
     * device (eng_embed), mean and last pooling, within the prefill's bound */
    eng_model_info info;
    eng_model_get_info(mc, &info);
    float *ec = malloc((size_t)info.n_embd * sizeof(float)), *eg = malloc((size_t)info.n_embd * sizeof(float));
    CHECK(ec && eg);
    for (int k = 0; ec && eg && k < 2; k++) {
        const eng_pooling pool = k ? ENG_POOL_LAST : ENG_POOL_MEAN;
        CHECK(eng_embed(sc, toks, N_TOK, pool, false, ec) == 0);
        r = eng_embed(sg, toks, N_TOK, pool, false, eg);
        CHECKF(r == 0, "%s: CUDA embedding failed: %d", name, r);
        diff de = { 0 };
        diff_add(&de, ec, eg, info.n_embd);
        bound = PREFILL_REL * (1 + de.scale);
        printf("%-12s embed %s max %.2e  (bound %.2e)\n", name, k ? "last" : "mean", de.max, bound);
        EXPECT(de.max <= bound, "%s: embeddings (%s) differ", name, k ? "last" : "mean");
    }
    free(ec);
    free(eg);
    eng_session_free(sc);
    eng_session_free(sg);
}

/* ---- 3: greedy generation ------------------------------------------------------------------- */

/* Greedy from prompt: tokens into out[steps], logits of each step into
 * L[steps][V]. */
static void greedy(eng_model *m, const eng_compute_params *cp, const char *prompt, int32_t *out,
                   float *L, double *share)
{
    int V = n_vocab(m);
    int32_t toks[256];
    size_t n = tokenize(m, prompt, toks, 256);
    eng_session *s;
    CHECK(eng_session_new(m, NULL, &s) == 0);
    if (cp)
        CHECK(eng_session_set_compute(s, cp) == 0);
    int r = eng_session_eval(s, toks, n, 0);
    CHECKF(r == 0, "eval of the prompt: %d", r);
    for (int i = 0; i < steps; i++) {
        const float *l = eng_session_logits(s, -1);
        memcpy(L + (size_t)i * V, l, (size_t)V * sizeof(float));
        out[i] = argmax(l, V);
        if (i + 1 < steps)
            CHECK(eng_session_eval(s, &out[i], 1, 0) == 0);
    }
    if (share)
        *share = eng_session_ffn_share(s);
    eng_session_free(s);
}

/* Same tokens on both, up to a near tie; rel scales the logits bound. */
static void cmp_greedy(const char *name, const char *what, eng_model *mc, eng_model *mg,
                       const eng_compute_params *cp, double rel)
{
    int V = n_vocab(mc);
    int32_t *tc = malloc(steps * sizeof(int32_t)), *tg = malloc(steps * sizeof(int32_t));
    float *lc = malloc((size_t)steps * V * sizeof(float));
    float *lg = malloc((size_t)steps * V * sizeof(float));
    CHECK(tc && tg && lc && lg);
    int same = 0, total = 0;
    diff d = { 0 };
    for (int p = 0; p < N_PROMPTS; p++) {
        double sc = 0, sg = 0;
        greedy(mc, cp, prompts[p], tc, lc, &sc);
        greedy(mg, cp, prompts[p], tg, lg, &sg);
        EXPECT(sc == sg, "%s %s: ffn share %.4f on the CPU, %.4f on CUDA", name, what, sc, sg);
        int i = 0;
        for (; i < steps; i++) {
            const float *c = lc + (size_t)i * V, *g = lg + (size_t)i * V;
            diff_add(&d, c, g, V);
            if (tc[i] != tg[i]) {
                double margin = c[tc[i]] - c[tg[i]], bound = rel * (1 + maxabs(c, V));
                printf("%-12s %s prompt %d: step %d: CPU %d, CUDA %d, CPU margin %.2e (%s)\n",
                       name, what, p, i, tc[i], tg[i], margin,
                       margin <= bound ? "a near tie: not compared further" : "NOT a tie");
                EXPECT(margin <= bound, "%s %s prompt %d: greedy tokens differ at step %d", name,
                       what, p, i);
                break;
            }
        }
        same += i;
        total += steps;
    }
    double bound = rel * (1 + d.scale);
    printf("%-12s %-11s greedy %d/%d steps equal, logits max %.2e rms %.2e (bound %.2e)\n", name,
           what, same, total, d.max, diff_rms(&d), bound);
    EXPECT(d.max <= bound, "%s %s: logits along the greedy run differ", name, what);
    free(tc);
    free(tg);
    free(lc);
    free(lg);
}

/* ---- 4: profiles ----------------------------------------------------------------------------- */

static void observe(eng_model *m, const char *text, double *sums)
{
    int32_t toks[256];
    size_t n = tokenize(m, text, toks, 256);
    eng_session *s;
    CHECK(eng_session_new(m, NULL, &s) == 0);
    CHECK(eng_session_observe_ffn(s, sums) == 0);
    CHECK(eng_session_eval(s, toks, n, 0) == 0);
    CHECK(eng_session_observe_ffn(s, NULL) == 0);
    eng_session_free(s);
}

static eng_profile *make_profile(const char *name, eng_model *mc, eng_model *mg)
{
    eng_model_info info;
    eng_model_get_info(mc, &info);
    size_t n = (size_t)info.n_layer * info.n_ff;
    double *sc = calloc(n, sizeof(double)), *sg = calloc(n, sizeof(double));
    CHECK(sc && sg);
    eng_profile *p;
    CHECK(eng_profile_new(mc, &p) == 0);
    double worst = 0;
    for (int t = 0; t < 2; t++) {
        const char **texts = t == 0 ? texts_a : texts_b;
        for (int i = 0; i < 2; i++) {
            memset(sc, 0, n * sizeof(double));
            memset(sg, 0, n * sizeof(double));
            observe(mc, texts[i], sc);
            observe(mg, texts[i], sg);
            /* per layer: sum |a| is a magnitude; the CUDA prefill rounds x
             * and a to f16 */
            for (int l = 0; l < info.n_layer; l++) {
                double tot = 0, e = 0;
                for (int k = 0; k < info.n_ff; k++) {
                    tot += sc[(size_t)l * info.n_ff + k];
                    e += fabs(sc[(size_t)l * info.n_ff + k] - sg[(size_t)l * info.n_ff + k]);
                }
                double rel = tot > 0 ? e / tot : e;
                worst = rel > worst ? rel : worst;
            }
            int32_t toks[256];
            CHECK(eng_profile_add_prompt(p, t == 0 ? "qa" : "translate", sc,
                                         tokenize(mc, texts[i], toks, 256)) == 0);
        }
    }
    printf("%-12s profile  sums differ by %.2e of each layer's total (bound %.0e)\n", name, worst,
           PREFILL_REL);
    EXPECT(worst <= PREFILL_REL, "%s: profiling sums differ", name);
    free(sc);
    free(sg);
    return p;
}

/* ---- 5: decode graphs ------------------------------------------------------------------------ */

/* mg's decode steps run as CUDA graphs (one launch per step: the first
 * step of a prompt captured, the next ones replayed reading their position
 * from the device); the same model loaded with ENG_CUDA_GRAPHS=0 launches
 * every op. Same kernels and arguments, except that in the graph attention
 * splits the keys for the whole context: the tokens are the same and the
 * logits agree within the decode bound (in the emulation bit for bit). */
static void cmp_graphs(const char *name, const char *what, eng_model *mg, const char *path,
                       const eng_load_plan_params *plan, const eng_compute_params *cp)
{
    setenv("ENG_CUDA_GRAPHS", "0", 1);
    eng_model *direct = load(path, ENG_BACKEND_CUDA, plan);
    unsetenv("ENG_CUDA_GRAPHS");
    eng_backend_info b0, b1, bd;
    CHECK(eng_model_backend_info(mg, &b0) == 0 && eng_model_backend_info(direct, &bd) == 0);
    EXPECT(b0.graphs.enabled && !bd.graphs.enabled, "%s %s: graphs enabled %d, with "
           "ENG_CUDA_GRAPHS=0 %d", name, what, b0.graphs.enabled, bd.graphs.enabled);

    int V = n_vocab(mg);
    int32_t *tg = malloc(steps * sizeof(int32_t)), *td = malloc(steps * sizeof(int32_t));
    float *lg = malloc((size_t)steps * V * sizeof(float));
    float *ld = malloc((size_t)steps * V * sizeof(float));
    CHECK(tg && td && lg && ld);
    diff d = { 0 };
    bool same_bits = true;
    for (int p = 0; p < N_PROMPTS; p++) {
        greedy(mg, cp, prompts[p], tg, lg, NULL);
        greedy(direct, cp, prompts[p], td, ld, NULL);
        EXPECT(memcmp(tg, td, steps * sizeof(int32_t)) == 0,
               "%s %s prompt %d: greedy tokens differ with and without graphs", name, what, p);
        diff_add(&d, ld, lg, steps * V);
        same_bits = same_bits && memcmp(lg, ld, (size_t)steps * V * sizeof(float)) == 0;
    }
    CHECK(eng_model_backend_info(mg, &b1) == 0 && eng_model_backend_info(direct, &bd) == 0);
    long n = b1.graphs.steps - b0.graphs.steps, inst = b1.graphs.instantiated -
                                                       b0.graphs.instantiated;
    long replayed = b1.graphs.replayed - b0.graphs.replayed;
    long want = (long)N_PROMPTS * (steps - 1);
    printf("%-12s %-11s graphs: %ld steps, %ld replayed, %ld instantiated, %ld fallbacks; "
           "logits max %.2e%s\n",
           name, what, n, replayed, inst, b1.graphs.fallbacks - b0.graphs.fallbacks, d.max,
           same_bits ? " (bit-identical)" : "");
    EXPECT(n == want, "%s %s: %ld decode steps ran as graphs, %ld expected", name, what, n, want);
    /* a prefill drops the graph (it may grow the scratch) and changes the
     * step: one capture per prompt, the steps after it replay it */
    EXPECT(inst >= 1 && inst <= N_PROMPTS && replayed == want - N_PROMPTS,
           "%s %s: %ld graphs instantiated, %ld of %ld steps replayed", name, what, inst,
           replayed, n);
    EXPECT(b1.graphs.fallbacks == b0.graphs.fallbacks && bd.graphs.steps == 0,
           "%s %s: %ld fallbacks, %ld graph steps without graphs", name, what,
           b1.graphs.fallbacks - b0.graphs.fallbacks, bd.graphs.steps);
    EXPECT(d.max <= DECODE_REL * (1 + d.scale), "%s %s: logits differ with graphs", name, what);
    eng_model_free(direct);
    free(tg);
    free(td);
    free(lg);
    free(ld);
}

/* ---- 6: greedy on the device -------------------------------------------------------------- */

/* The same greedy run as greedy(), with ENG_EVAL_ARGMAX: the token comes
 * from eng_session_argmax and no logits are kept. The kernels up to the
 * output matmul are the same, so are the logits the kernel reads: the
 * tokens must be those of greedy() exactly, and each step still one graph
 * launch. */
static void cmp_argmax(const char *name, const char *what, eng_model *mg,
                       const eng_compute_params *cp)
{
    int V = n_vocab(mg);
    int32_t *tl = malloc(steps * sizeof(int32_t)), *ta = malloc(steps * sizeof(int32_t));
    float *L = malloc((size_t)steps * V * sizeof(float));
    CHECK(tl && ta && L);
    int same = 0;
    long graph_steps = 0, fallbacks = 0;
    for (int p = 0; p < N_PROMPTS; p++) {
        greedy(mg, cp, prompts[p], tl, L, NULL);
        int32_t toks[256];
        size_t n = tokenize(mg, prompts[p], toks, 256);
        eng_session *s;
        CHECK(eng_session_new(mg, NULL, &s) == 0);
        if (cp)
            CHECK(eng_session_set_compute(s, cp) == 0);
        eng_backend_info b0, b1;
        CHECK(eng_model_backend_info(mg, &b0) == 0);
        int r = eng_session_eval(s, toks, n, ENG_EVAL_ARGMAX);
        CHECKF(r == 0, "eval of the prompt with ENG_EVAL_ARGMAX: %d", r);
        for (int i = 0; i < steps; i++) {
            EXPECT(!eng_session_logits(s, -1), "%s %s: logits kept with ENG_EVAL_ARGMAX", name,
                   what);
            ta[i] = eng_session_argmax(s);
            if (i + 1 < steps)
                CHECK(ta[i] >= 0 && eng_session_eval(s, &ta[i], 1, ENG_EVAL_ARGMAX) == 0);
        }
        CHECK(eng_model_backend_info(mg, &b1) == 0);
        graph_steps += b1.graphs.steps - b0.graphs.steps;
        fallbacks += b1.graphs.fallbacks - b0.graphs.fallbacks;
        eng_session_free(s);
        int i = 0;
        while (i < steps && ta[i] == tl[i])
            i++;
        EXPECT(i == steps, "%s %s prompt %d: step %d: argmax on the device %d, of the logits %d",
               name, what, p, i, i < steps ? ta[i] : -1, i < steps ? tl[i] : -1);
        same += i;
    }
    printf("%-12s %-11s argmax on the device: %d/%d steps equal the logits' argmax, %ld graph "
           "steps, %ld fallbacks\n", name, what, same, N_PROMPTS * steps, graph_steps, fallbacks);
    EXPECT(graph_steps == (long)N_PROMPTS * (steps - 1) && fallbacks == 0,
           "%s %s: %ld of %d argmax steps ran as graphs, %ld fallbacks", name, what, graph_steps,
           N_PROMPTS * (steps - 1), fallbacks);
    free(tl);
    free(ta);
    free(L);
}

/* Sampling from the device's candidates (ENG_EVAL_CANDIDATES, as
 * eng_generate does) against sampling from the row of logits the same model
 * downloads without the flag: the logits are the same computation, the
 * candidates the host's rule bit for bit (cuda-ops), so a chat client's
 * sampler (top-k 40, top-p 0.95, repeat penalty 1.1, the prompt in its
 * window) draws the same tokens, and each step is still one graph launch. */
static void cmp_cands(const char *name, const char *what, eng_model *mg, const eng_compute_params *cp)
{
    int V = n_vocab(mg);
    int32_t *tr = malloc(steps * sizeof(int32_t)), *tc = malloc(steps * sizeof(int32_t));
    CHECK(tr && tc);
    int same = 0;
    long graph_steps = 0, fallbacks = 0;
    for (int p = 0; p < N_PROMPTS; p++) {
        int32_t toks[256];
        size_t n = tokenize(mg, prompts[p], toks, 256);
        eng_sampler_params sp = eng_sampler_params_default();
        sp.temperature = 0.8f;
        sp.top_k = 40;
        sp.top_p = 0.95f;
        sp.repeat_penalty = 1.1f;
        sp.seed = 1234 + (uint64_t)p;
        eng_backend_info b0, b1;
        for (int pass = 0; pass < 2; pass++) {
            int32_t *t = pass ? tc : tr;
            eng_sampler *smp;
            eng_session *s;
            CHECK(eng_sampler_new(&sp, V, &smp) == 0);
            CHECK(eng_session_new(mg, NULL, &s) == 0);
            if (cp)
                CHECK(eng_session_set_compute(s, cp) == 0);
            for (size_t i = 0; i < n; i++)
                eng_sampler_accept(smp, toks[i]);
            const unsigned flags = pass ? eng_sampler_eval_flags(smp, s) : 0;
            if (pass)
                EXPECT(flags == ENG_EVAL_CANDIDATES, "%s %s: eval flags %u for a top-k sampler", name,
                       what, flags);
            CHECK(eng_model_backend_info(mg, &b0) == 0);
            int r = eng_session_eval(s, toks, n, flags);
            CHECKF(r == 0, "eval of the prompt (flags %u): %d", flags, r);
            for (int i = 0; i < steps; i++) {
                if (pass)
                    EXPECT(!eng_session_logits(s, -1), "%s %s: logits kept with candidates", name, what);
                t[i] = eng_sampler_sample_session(smp, s);
                CHECKF(t[i] >= 0, "sampling: %d", t[i]);
                eng_sampler_accept(smp, t[i]);
                if (i + 1 < steps)
                    CHECK(eng_session_eval(s, &t[i], 1, flags) == 0);
            }
            CHECK(eng_model_backend_info(mg, &b1) == 0);
            if (pass) {
                graph_steps += b1.graphs.steps - b0.graphs.steps;
                fallbacks += b1.graphs.fallbacks - b0.graphs.fallbacks;
            }
            eng_session_free(s);
            eng_sampler_free(smp);
        }
        int i = 0;
        while (i < steps && tc[i] == tr[i])
            i++;
        EXPECT(i == steps, "%s %s prompt %d: step %d: sampled from the candidates %d, from the row %d",
               name, what, p, i, i < steps ? tc[i] : -1, i < steps ? tr[i] : -1);
        same += i;
    }
    printf("%-12s %-11s sampling from the device's candidates: %d/%d steps equal the row's, %ld "
           "graph steps, %ld fallbacks\n", name, what, same, N_PROMPTS * steps, graph_steps, fallbacks);
    EXPECT(graph_steps == (long)N_PROMPTS * (steps - 1) && fallbacks == 0,
           "%s %s: %ld of %d candidate steps ran as graphs, %ld fallbacks", name, what, graph_steps,
           N_PROMPTS * (steps - 1), fallbacks);
    free(tr);
    free(tc);
}

/* ---- one model ------------------------------------------------------------------------------ */

/* the selective plan of task and gamma (delta 0.3) */
static eng_load_plan_params plan(const eng_profile *prof, const char *task, float gamma)
{
    eng_load_plan_params pp = eng_load_plan_params_default();
    pp.mode = ENG_SELECT_SELECTINFER;
    pp.profile = prof;
    pp.task = task;
    pp.gamma = gamma;
    pp.delta = 0.3f;
    return pp;
}

/* mass_rel: the bound of phi 0.4 ranked by summed |a| (see the top) */
/* Per-token picking: every layer's sketch on the device, downloaded,
 * byte for byte the CPU model's (the same plan loads the same neurons
 * into the same slots on both). A device whose sketch is off picks other
 * neurons, which the greedy bound (PICK_REL) alone does not show: on the
 * first H200 run the greedy runs stayed within it while the device's
 * sketch bytes were wrong (cuda-backend caught those). */
static void cmp_sketch(const char *name, const char *what, const eng_model *kc,
                       const eng_model *kg)
{
    for (int il = 0; il < kc->info.n_layer; il++) {
        const eng_layer *A = &kc->layers[il], *B = &kg->layers[il];
        const int n = A->ffn.n_slots;
        if (!A->ffn.sketch || !B->ffn.sketch) {
            EXPECT(!A->ffn.sketch && !B->ffn.sketch, "%s %s layer %d: a sketch on one side only",
                   name, what, il);
            continue;
        }
        const bool same_slots = B->ffn.n_slots == n &&
                                memcmp(A->neuron_of_slot, B->neuron_of_slot,
                                       (size_t)n * sizeof(int32_t)) == 0;
        EXPECT(same_slots, "%s %s layer %d: other slots on CUDA", name, what, il);
        if (!same_slots)
            continue;
        const size_t bytes = (size_t)n * eng_sketch_slot_bytes(kc->info.n_embd);
        uint8_t *got = malloc(bytes);
        CHECK(got);
        kg->be->iface->download(kg->be, got, B->ffn.sketch, bytes);
        CHECK(kg->be->iface->sync(kg->be) == 0);
        size_t bad = 0;
        while (bad < bytes && got[bad] == ((const uint8_t *)A->ffn.sketch)[bad])
            bad++;
        EXPECT(bad == bytes, "%s %s layer %d: sketch byte %zu of %zu differs (CUDA %u, CPU %u)",
               name, what, il, bad, bytes, bad < bytes ? got[bad] : 0,
               bad < bytes ? ((const uint8_t *)A->ffn.sketch)[bad] : 0);
        free(got);
    }
}

static void check_model(const char *name, const char *path, double mass_rel)
{
    eng_model *mc = load(path, ENG_BACKEND_CPU, NULL), *mg = load(path, ENG_BACKEND_CUDA, NULL);
    CHECK(strcmp(eng_backend_name(mg), "cuda") == 0);
    prefill_logits(name, mc, mg);
    cmp_greedy(name, "dense", mc, mg, NULL, PREFILL_REL);
    cmp_graphs(name, "dense", mg, path, NULL, NULL);
    cmp_argmax(name, "dense", mg, NULL);
    cmp_cands(name, "dense", mg, NULL);

    eng_profile *prof = make_profile(name, mc, mg);
    eng_model_free(mc);
    eng_model_free(mg);

    /* compute settings: every loaded neuron (tests the selective loading
     * alone), phi 0.4 ranked by summed |a| (a continuous score: CPU and
     * CUDA pick the same neurons unless two are within rounding), and phi
     * 0.4 as published (per-token top alpha: integer counts with many ties,
     * so one activation at the cut moving by rounding changes the pick) */
    eng_compute_params all = eng_compute_params_default();
    eng_compute_params mass = all, abs = all;
    mass.phi = abs.phi = 0.4f;
    mass.rank = ENG_RANK_MASS;

    eng_load_plan_params pa = plan(prof, "qa", 0.7f);
    mc = load(path, ENG_BACKEND_CPU, &pa);
    mg = load(path, ENG_BACKEND_CUDA, &pa);
    eng_plan_info pc, pg;
    eng_model_get_plan(mc, &pc);
    eng_model_get_plan(mg, &pg);
    EXPECT(pc.neurons_loaded == pg.neurons_loaded && pc.bytes_ffn == pg.bytes_ffn,
           "%s: plans differ: %llu vs %llu neurons", name, (unsigned long long)pc.neurons_loaded,
           (unsigned long long)pg.neurons_loaded);
    cmp_greedy(name, "loaded", mc, mg, &all, PREFILL_REL);
    cmp_greedy(name, "phi/mass", mc, mg, &mass, mass_rel);
    cmp_greedy(name, "phi 0.4", mc, mg, &abs, SELECT_REL);
    cmp_graphs(name, "phi 0.4", mg, path, &pa, &abs);
    cmp_argmax(name, "phi 0.4", mg, &abs);
    cmp_cands(name, "phi 0.4", mg, &abs);

    /* per-token picking (pick=token): the same plan with a sketch, built
     * on the device (the CPU's bytes); both backends score with the same
     * integer sums, so the picks agree unless two scores are within the
     * rounding of their inputs (PICK_REL then bounds gross errors only,
     * see the top); graphs against op by op, and greedy on the device, as above;
     * then a swap of both (the sketch follows the slots) */
    {
        eng_load_plan_params pk = pa;
        pk.sketch = true;
        eng_compute_params tok = all;
        tok.phi = 0.4f;
        tok.pick = ENG_PICK_TOKEN;
        eng_model *kc = load(path, ENG_BACKEND_CPU, &pk), *kg = load(path, ENG_BACKEND_CUDA, &pk);
        eng_plan_info kpc, kpg;
        eng_model_get_plan(kc, &kpc);
        eng_model_get_plan(kg, &kpg);
        EXPECT(kpg.sketch && kpc.bytes_sketch == kpg.bytes_sketch && kpg.bytes_sketch > 0,
               "%s: sketch bytes %llu on the CPU, %llu on CUDA", name,
               (unsigned long long)kpc.bytes_sketch, (unsigned long long)kpg.bytes_sketch);
        cmp_sketch(name, "pick/token", kc, kg);
        cmp_greedy(name, "pick/token", kc, kg, &tok, PICK_REL);
        cmp_graphs(name, "pick/token", kg, path, &pk, &tok);
        cmp_argmax(name, "pick/token", kg, &tok);
        eng_load_plan_params pkb = plan(prof, "translate", 0.9f);
        pkb.sketch = true;
        eng_swap_stats kc_st, kg_st;
        eng_error kerr = { { 0 } };
        CHECKF(eng_model_swap(kc, &pkb, &kc_st, &kerr) == 0, "%s: CPU swap: %s", name, kerr.msg);
        CHECKF(eng_model_swap(kg, &pkb, &kg_st, &kerr) == 0, "%s: CUDA swap: %s", name, kerr.msg);
        cmp_sketch(name, "swap/pick", kc, kg);
        cmp_greedy(name, "swap/pick", kc, kg, &tok, PICK_REL);
        eng_model_free(kc);
        eng_model_free(kg);
    }

    /* hot-swap both to another task and a larger gamma (neurons enter,
     * through upload_rows on CUDA), compare again; then the swapped CUDA
     * model against a fresh CUDA load of that plan (same neurons, other
     * slots: only the order of sums differs) */
    eng_load_plan_params pb = plan(prof, "translate", 0.9f);
    eng_swap_stats sc, sg;
    eng_error err = { { 0 } };
    int r = eng_model_swap(mc, &pb, &sc, &err);
    CHECKF(r == 0, "%s: CPU swap: %s", name, err.msg);
    r = eng_model_swap(mg, &pb, &sg, &err);
    CHECKF(r == 0, "%s: CUDA swap: %s", name, err.msg);
    printf("%-12s swap     %llu neurons in, %llu out\n", name,
           (unsigned long long)sg.neurons_in, (unsigned long long)sg.neurons_out);
    EXPECT(sg.neurons_in > 0 && sg.neurons_in == sc.neurons_in &&
               sg.neurons_out == sc.neurons_out,
           "%s: swap moved %llu/%llu neurons on CUDA, %llu/%llu on the CPU", name,
           (unsigned long long)sg.neurons_in, (unsigned long long)sg.neurons_out,
           (unsigned long long)sc.neurons_in, (unsigned long long)sc.neurons_out);
    cmp_greedy(name, "swap/loaded", mc, mg, &all, PREFILL_REL);
    cmp_greedy(name, "swap/mass", mc, mg, &mass, mass_rel);
    cmp_greedy(name, "swap/phi", mc, mg, &abs, SELECT_REL);
    eng_model *fresh = load(path, ENG_BACKEND_CUDA, &pb);
    cmp_greedy(name, "swap=fresh", fresh, mg, &all, PREFILL_REL);

    eng_model_free(fresh);
    eng_model_free(mc);
    eng_model_free(mg);
    eng_profile_free(prof);
}

static void check_synth(const char *synth, const char *shape, double select_rel)
{
    char path[32];
    test_synth(synth, shape, path);
    check_model(shape, path, select_rel);
    unlink(path);
}

int main(int argc, char **argv)
{
    if (argc != 2) {
        fprintf(stderr, "usage: test-cuda-model SI_SYNTH\n");
        return 2;
    }
    eng_backend *probe = NULL;
    eng_error err = { { 0 } };
    int r = eng_backend_cuda_new(0, &probe, &err);
    if (r == -ENODEV || r == -ENOTSUP) {
        printf("SKIP: %s\n", err.msg);
        return 77;
    }
    CHECKF(r == 0, "eng_backend_cuda_new: %s (%d)", err.msg, r);
    probe->iface->free(probe);
    const char *e = getenv("SI_TEST_STEPS");
    if (e && atoi(e) > 0)
        steps = atoi(e);

    check_synth(argv[1], "tiny", PREFILL_REL);
    check_synth(argv[1], "tiny-qwen2", PREFILL_REL);
    check_synth(argv[1], "tiny-qwen3", PREFILL_REL);
    check_synth(argv[1], "tiny-llama3", PREFILL_REL);
    check_synth(argv[1], "tiny-phi3", PREFILL_REL);
    check_synth(argv[1], "tiny-phi3-128k", PREFILL_REL);
    check_synth(argv[1], "tiny-phi4", PREFILL_REL);
    /* six and seven layers: a pick at some cut may flip (as on the default model) */
    check_synth(argv[1], "tiny-gemma", SELECT_REL);
    check_synth(argv[1], "tiny-gemma2", SELECT_REL);
    check_synth(argv[1], "tiny-gemma3", SELECT_REL);
    check_synth(argv[1], "tiny-lfm2", PREFILL_REL); /* short convolutions */

    const char *path = test_model_path();
    e = getenv("SI_TEST_DEFAULT_MODEL");
    if (e && !strcmp(e, "0"))
        printf("default model: skipped (SI_TEST_DEFAULT_MODEL=0)\n");
    else if (access(path, R_OK) != 0)
        printf("default model: %s not found, skipped\n", path);
    else
        check_model("default", path, SELECT_REL);

    if (n_fail) {
        fprintf(stderr, "%d check(s) failed\n", n_fail);
        return 1;
    }
    printf("CPU and CUDA agree\n");
    return 0;
}
