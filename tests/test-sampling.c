/* Sampler: greedy, determinism, distribution, truncations, repetition penalty,
 * the whole chain token for token against a plain re-implementation, and
 * sampling from a row's candidates against sampling from the row. */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine.h"

static int failures;

#define CHECK(cond)                                                              \
    do {                                                                         \
        if (!(cond)) {                                                           \
            fprintf(stderr, "%s:%d: CHECK failed: %s\n", __FILE__, __LINE__, #cond); \
            failures++;                                                          \
        }                                                                        \
    } while (0)

static eng_sampler *mk(eng_sampler_params p, int n_vocab) {
    eng_sampler *s = NULL;
    int r = eng_sampler_new(&p, n_vocab, &s);
    if (r < 0 || !s) {
        fprintf(stderr, "eng_sampler_new failed: %d\n", r);
        exit(1);
    }
    return s;
}

static eng_sampler_params temp(float t, uint64_t seed) {
    eng_sampler_params p = eng_sampler_params_default();
    p.temperature = t;
    p.seed = seed;
    return p;
}

/* test-local PRNG for logits (not the sampler's) */
static uint64_t lcg_state = 12345;
static float frand(void) {
    lcg_state = lcg_state * 6364136223846793005ull + 1442695040888963407ull;
    return (float)((lcg_state >> 40) & 0xffffff) / (float)(1 << 24);
}

static void test_defaults_and_params(void) {
    eng_sampler_params p = eng_sampler_params_default();
    CHECK(p.temperature == 0.0f && p.top_k == 0 && p.top_p == 1.0f && p.min_p == 0.0f &&
          p.repeat_penalty == 1.0f && p.repeat_last_n == 64 && p.freq_penalty == 0.0f &&
          p.presence_penalty == 0.0f);
    eng_sampler *s = (eng_sampler *)0x1;
    CHECK(eng_sampler_new(&p, 0, &s) == -EINVAL && s == (eng_sampler *)0x1);
    CHECK(eng_sampler_new(NULL, 10, &s) == -EINVAL);
    eng_sampler_params b = p;
    b.top_p = 1.5f;
    CHECK(eng_sampler_new(&b, 10, &s) == -EINVAL);
    b = p;
    b.temperature = NAN;
    CHECK(eng_sampler_new(&b, 10, &s) == -EINVAL);
    b = p;
    b.repeat_penalty = 0.0f;
    CHECK(eng_sampler_new(&b, 10, &s) == -EINVAL);
    b = p;
    b.top_k = -1;
    CHECK(eng_sampler_new(&b, 10, &s) == -EINVAL);
    b = p;
    b.min_p = NAN;
    CHECK(eng_sampler_new(&b, 10, &s) == -EINVAL);
    b = p;
    b.freq_penalty = NAN;
    CHECK(eng_sampler_new(&b, 10, &s) == -EINVAL);
    b = p;
    b.presence_penalty = -101.0f;
    CHECK(eng_sampler_new(&b, 10, &s) == -EINVAL);
    /* logit bias: tokens in range, no NaN or +inf, a bounded list */
    eng_logit_bias lb[2] = {{3, 1.0f}, {10, 1.0f}};
    b = p;
    b.logit_bias = lb;
    b.n_logit_bias = 2;
    CHECK(eng_sampler_new(&b, 10, &s) == -EINVAL);
    lb[1] = (eng_logit_bias){-1, 1.0f};
    CHECK(eng_sampler_new(&b, 10, &s) == -EINVAL);
    lb[1] = (eng_logit_bias){4, NAN};
    CHECK(eng_sampler_new(&b, 10, &s) == -EINVAL);
    lb[1] = (eng_logit_bias){4, INFINITY};
    CHECK(eng_sampler_new(&b, 10, &s) == -EINVAL);
    b.n_logit_bias = ENG_MAX_LOGIT_BIAS + 1;
    CHECK(eng_sampler_new(&b, 10, &s) == -EINVAL);
    b.n_logit_bias = 1;
    b.logit_bias = NULL;
    CHECK(eng_sampler_new(&b, 10, &s) == -EINVAL);
    eng_sampler_free(NULL);
    CHECK(eng_sampler_sample(NULL, NULL) < 0);
}

static void test_greedy(void) {
    enum { N = 1000 };
    float l[N];
    eng_sampler *s = mk(eng_sampler_params_default(), N);
    for (int trial = 0; trial < 20; trial++) {
        int best = 0;
        for (int i = 0; i < N; i++) {
            l[i] = frand() * 20.0f - 10.0f;
            if (l[i] > l[best])
                best = i;
        }
        CHECK(eng_sampler_sample(s, l) == best);
    }
    /* ties: the lowest id */
    for (int i = 0; i < N; i++)
        l[i] = 0.0f;
    l[700] = 5.0f;
    l[300] = 5.0f;
    l[900] = 5.0f;
    CHECK(eng_sampler_sample(s, l) == 300);
    /* NaN is never chosen, even at id 0 */
    l[0] = NAN;
    CHECK(eng_sampler_sample(s, l) == 300);
    l[300] = INFINITY;
    CHECK(eng_sampler_sample(s, l) == 300);
    /* every logit NaN: token 0 (eng_session_argmax says -EDOM there) */
    for (int i = 0; i < N; i++)
        l[i] = NAN;
    CHECK(eng_sampler_sample(s, l) == 0);
    eng_sampler_free(s);

    /* plain greedy, which eng_generate hands to eng_session_argmax: no
     * temperature and no penalty that could act; truncations do not matter */
    eng_sampler_params g = eng_sampler_params_default();
    s = mk(g, N);
    CHECK(eng_sampler_is_greedy(s));
    eng_sampler_free(s);
    g.top_k = 40;
    g.top_p = 0.9f;
    g.min_p = 0.05f;
    g.temperature = -1.0f;
    s = mk(g, N);
    CHECK(eng_sampler_is_greedy(s));
    eng_sampler_free(s);
    g.repeat_penalty = 1.3f;
    s = mk(g, N);
    CHECK(!eng_sampler_is_greedy(s));
    eng_sampler_free(s);
    g.repeat_last_n = 0; /* a penalty over no history */
    s = mk(g, N);
    CHECK(eng_sampler_is_greedy(s));
    eng_sampler_free(s);
    s = mk(temp(0.7f, 1), N);
    CHECK(!eng_sampler_is_greedy(s));
    eng_sampler_free(s);
    CHECK(!eng_sampler_is_greedy(NULL));

    /* top_k = 1 with a temperature is greedy too */
    eng_sampler_params p = temp(1.5f, 7);
    p.top_k = 1;
    s = mk(p, N);
    for (int trial = 0; trial < 50; trial++) {
        int best = 0;
        for (int i = 0; i < N; i++) {
            l[i] = frand();
            if (l[i] > l[best])
                best = i;
        }
        CHECK(eng_sampler_sample(s, l) == best);
    }
    eng_sampler_free(s);
}

static void test_determinism(void) {
    enum { N = 500, DRAWS = 2000 };
    float l[N];
    for (int i = 0; i < N; i++)
        l[i] = frand() * 4.0f;
    eng_sampler_params p = temp(1.0f, 42);
    p.top_k = 100;
    p.top_p = 0.95f;
    eng_sampler *a = mk(p, N), *b = mk(p, N);
    p.seed = 43;
    eng_sampler *c = mk(p, N);
    static int32_t sa[DRAWS];
    int same_b = 0, same_c = 0;
    for (int i = 0; i < DRAWS; i++) {
        sa[i] = eng_sampler_sample(a, l);
        int32_t tb = eng_sampler_sample(b, l), tc = eng_sampler_sample(c, l);
        CHECK(sa[i] >= 0 && sa[i] < N);
        same_b += sa[i] == tb;
        same_c += sa[i] == tc;
    }
    CHECK(same_b == DRAWS);
    CHECK(same_c < DRAWS / 2); /* ~100 candidates: agreement is rare */
    /* reset restarts the sequence */
    eng_sampler_reset(a);
    int again = 0;
    for (int i = 0; i < DRAWS; i++)
        again += eng_sampler_sample(a, l) == sa[i];
    CHECK(again == DRAWS);
    eng_sampler_free(a);
    eng_sampler_free(b);
    eng_sampler_free(c);
}

/* Draws many tokens and compares counts with expected probabilities by a
 * chi-square statistic; returns it. The sampler's seed is fixed, so the
 * result is reproducible; the bound is loose enough for any seed. */
static double chi2(eng_sampler *s, const float *l, const double *want, int n, int draws,
                   int *ret_counts) {
    for (int i = 0; i < n; i++)
        ret_counts[i] = 0;
    for (int d = 0; d < draws; d++) {
        int32_t t = eng_sampler_sample(s, l);
        if (t < 0 || t >= n) {
            failures++;
            return INFINITY;
        }
        ret_counts[t]++;
    }
    double x = 0.0;
    for (int i = 0; i < n; i++) {
        double e = want[i] * draws;
        if (e == 0.0) {
            if (ret_counts[i] != 0)
                return INFINITY;
            continue;
        }
        x += (ret_counts[i] - e) * (ret_counts[i] - e) / e;
    }
    return x;
}

static void test_distribution(void) {
    enum { N = 8, DRAWS = 200000 };
    const float l[N] = {1.0f, 0.5f, 2.0f, -1.0f, 0.0f, 1.5f, -0.5f, 0.25f};
    const float T = 0.7f;
    double want[N], sum = 0.0;
    for (int i = 0; i < N; i++)
        sum += want[i] = exp(l[i] / T);
    for (int i = 0; i < N; i++)
        want[i] /= sum;
    eng_sampler *s = mk(temp(T, 1234), N);
    int counts[N];
    double x = chi2(s, l, want, N, DRAWS, counts);
    /* 7 degrees of freedom: P(chi2 > 35) ~ 1e-5 */
    CHECK(x < 35.0);
    /* the wrong temperature must be rejected by the same statistic */
    double wrong[N], ws = 0.0;
    for (int i = 0; i < N; i++)
        ws += wrong[i] = exp(l[i] / 1.0);
    double xw = 0.0;
    for (int i = 0; i < N; i++) {
        double e = wrong[i] / ws * DRAWS;
        xw += (counts[i] - e) * (counts[i] - e) / e;
    }
    CHECK(xw > 100.0);
    eng_sampler_free(s);
}

static void test_truncation(void) {
    enum { N = 6, DRAWS = 100000 };
    /* probabilities at T = 1: 0.40 0.25 0.15 0.10 0.06 0.04 (shuffled ids) */
    const double p[N] = {0.10, 0.40, 0.04, 0.25, 0.06, 0.15};
    float l[N];
    for (int i = 0; i < N; i++)
        l[i] = logf((float)p[i]) + 3.0f;
    int counts[N];
    double want[N];

    /* top-p 0.7: 0.40 + 0.25 = 0.65 < 0.7, + 0.15 = 0.80: keep ids 1, 3, 5 */
    eng_sampler_params sp = temp(1.0f, 5);
    sp.top_p = 0.7f;
    eng_sampler *s = mk(sp, N);
    for (int i = 0; i < N; i++)
        want[i] = (i == 1 || i == 3 || i == 5) ? p[i] / 0.80 : 0.0;
    CHECK(chi2(s, l, want, N, DRAWS, counts) < 30.0);
    eng_sampler_free(s);

    /* top-p 0.6: 0.40 + 0.25 reaches it: ids 1, 3 */
    sp.top_p = 0.6f;
    s = mk(sp, N);
    for (int i = 0; i < N; i++)
        want[i] = (i == 1 || i == 3) ? p[i] / 0.65 : 0.0;
    CHECK(chi2(s, l, want, N, DRAWS, counts) < 30.0);
    eng_sampler_free(s);

    /* top-p 0: at least one token (the best) */
    sp.top_p = 0.0f;
    s = mk(sp, N);
    for (int d = 0; d < 100; d++)
        CHECK(eng_sampler_sample(s, l) == 1);
    eng_sampler_free(s);

    /* min-p 0.3: p >= 0.3 * 0.40 = 0.12: ids 1, 3, 5 */
    sp = temp(1.0f, 6);
    sp.min_p = 0.3f;
    s = mk(sp, N);
    for (int i = 0; i < N; i++)
        want[i] = (i == 1 || i == 3 || i == 5) ? p[i] / 0.80 : 0.0;
    CHECK(chi2(s, l, want, N, DRAWS, counts) < 30.0);
    eng_sampler_free(s);

    /* top-k 2: ids 1, 3 */
    sp = temp(1.0f, 8);
    sp.top_k = 2;
    s = mk(sp, N);
    for (int i = 0; i < N; i++)
        want[i] = (i == 1 || i == 3) ? p[i] / 0.65 : 0.0;
    CHECK(chi2(s, l, want, N, DRAWS, counts) < 30.0);
    eng_sampler_free(s);

    /* top-k then temperature: T = 2 flattens among the kept ones */
    sp = temp(2.0f, 9);
    sp.top_k = 3;
    s = mk(sp, N);
    double z = sqrt(0.40) + sqrt(0.25) + sqrt(0.15);
    for (int i = 0; i < N; i++)
        want[i] = (i == 1 || i == 3 || i == 5) ? sqrt(p[i]) / z : 0.0;
    CHECK(chi2(s, l, want, N, DRAWS, counts) < 30.0);
    eng_sampler_free(s);

    /* top-k boundary among equal logits: the lowest ids */
    float flat[10] = {0};
    sp = temp(1.0f, 10);
    sp.top_k = 3;
    s = mk(sp, 10);
    int seen[10] = {0};
    for (int d = 0; d < 3000; d++) {
        int32_t t = eng_sampler_sample(s, flat);
        CHECK(t >= 0 && t < 10);
        if (t >= 0 && t < 10)
            seen[t]++;
    }
    CHECK(seen[0] > 0 && seen[1] > 0 && seen[2] > 0);
    for (int i = 3; i < 10; i++)
        CHECK(seen[i] == 0);
    eng_sampler_free(s);

    /* -inf is impossible; NaN too */
    float inf_l[4] = {-INFINITY, 0.0f, NAN, -INFINITY};
    s = mk(temp(1.0f, 11), 4);
    for (int d = 0; d < 1000; d++)
        CHECK(eng_sampler_sample(s, inf_l) == 1);
    eng_sampler_free(s);
}

/* A large vocabulary: the token drawn is always inside the top-k set and
 * the top-p set computed here by sorting everything. */
static int cmp_desc(const void *a, const void *b) {
    float x = *(const float *)a, y = *(const float *)b;
    return (x < y) - (x > y);
}

static void test_large_vocab(void) {
    enum { N = 49152 };
    float *l = malloc(N * sizeof(float)), *sorted = malloc(N * sizeof(float));
    eng_sampler_params sp = temp(0.8f, 99);
    sp.top_k = 40;
    sp.top_p = 0.9f;
    eng_sampler *s = mk(sp, N);
    eng_sampler_params sp2 = temp(1.0f, 98);
    sp2.top_p = 0.5f;
    eng_sampler *s2 = mk(sp2, N);
    for (int trial = 0; trial < 20; trial++) {
        for (int i = 0; i < N; i++)
            l[i] = frand() * 12.0f;
        memcpy(sorted, l, N * sizeof(float));
        qsort(sorted, N, sizeof(float), cmp_desc);
        int32_t t = eng_sampler_sample(s, l);
        CHECK(t >= 0 && t < N && l[t] >= sorted[39]);
        /* top-p 0.5 alone: the smallest prefix reaching half the mass */
        double sum = 0.0, cum = 0.0;
        for (int i = 0; i < N; i++)
            sum += exp(sorted[i] - sorted[0]);
        int m = 0;
        while (m < N && cum < 0.5 * sum)
            cum += exp(sorted[m++] - sorted[0]);
        for (int d = 0; d < 20; d++) {
            t = eng_sampler_sample(s2, l);
            CHECK(t >= 0 && t < N && l[t] >= sorted[m - 1]);
        }
    }
    eng_sampler_free(s);
    eng_sampler_free(s2);
    free(l);
    free(sorted);
}

static void test_penalty(void) {
    enum { N = 8 };
    float l[N] = {3.0f, 1.5f, -1.0f, -1.1f, -5.0f, -5.0f, -5.0f, -5.0f};
    float orig[N];
    memcpy(orig, l, sizeof(l));
    eng_sampler_params p = eng_sampler_params_default();
    p.repeat_penalty = 1.5f;
    p.repeat_last_n = 3;
    eng_sampler *s = mk(p, N);
    CHECK(eng_sampler_sample(s, l) == 0);
    /* positive logit divided: 3 / 1.5 = 2 > 1.5 still wins */
    eng_sampler_accept(s, 0);
    CHECK(eng_sampler_sample(s, l) == 0);
    /* repeated in the window: penalised once, not twice (3/2.25 < 1.5 would flip) */
    eng_sampler_accept(s, 0);
    CHECK(eng_sampler_sample(s, l) == 0);
    /* the window forgets: after three other tokens, 0 is unpenalised */
    eng_sampler_accept(s, 5);
    eng_sampler_accept(s, 6);
    eng_sampler_accept(s, 7);
    eng_sampler_reset(s);
    CHECK(eng_sampler_sample(s, l) == 0);
    eng_sampler_free(s);

    /* bigger penalty flips the choice */
    p.repeat_penalty = 2.5f;
    s = mk(p, N);
    eng_sampler_accept(s, 0);
    CHECK(eng_sampler_sample(s, l) == 1);
    eng_sampler_accept(s, 4);
    eng_sampler_accept(s, 5);
    eng_sampler_accept(s, 6); /* 0 leaves the window of 3 */
    CHECK(eng_sampler_sample(s, l) == 0);
    eng_sampler_free(s);

    /* negative logits are multiplied: -1 * 1.2 = -1.2 < -1.1 */
    float neg[N] = {-5.0f, -5.0f, -1.0f, -1.1f, -5.0f, -5.0f, -5.0f, -5.0f};
    p.repeat_penalty = 1.2f;
    p.repeat_last_n = 64;
    s = mk(p, N);
    CHECK(eng_sampler_sample(s, neg) == 2);
    eng_sampler_accept(s, 2);
    CHECK(eng_sampler_sample(s, neg) == 3);
    /* out-of-range tokens are ignored by accept */
    eng_sampler_accept(s, -1);
    eng_sampler_accept(s, N);
    CHECK(eng_sampler_sample(s, neg) == 3);
    eng_sampler_free(s);

    /* frequency and presence penalties (OpenAI's, llama.cpp's): minus
     * count x frequency and the presence once, for tokens in the window */
    float fp[N] = {2.0f, 1.9f, 1.0f, -5.0f, -5.0f, -5.0f, -5.0f, -5.0f};
    static const struct { float freq, pres, rep; int want; } fc[] = {
        { 0.04f, 0.0f, 1.0f, 1 },  /* 2 - 3 x 0.04 = 1.88 < 1.9 */
        { 0.03f, 0.0f, 1.0f, 0 },  /* 1.91 */
        { 0.0f, 0.05f, 1.0f, 0 },  /* 1.95: presence counts once */
        { 0.0f, 0.11f, 1.0f, 1 },  /* 1.89 */
        { 0.02f, 0.02f, 1.0f, 0 }, /* 2 - 0.06 - 0.02 = 1.92 */
        { 0.02f, 0.05f, 1.0f, 1 }, /* 1.89 */
        { 0.0f, 0.0f, 1.04f, 0 },  /* 2 / 1.04 = 1.923 */
        { 0.01f, 0.0f, 1.04f, 1 }, /* 1.923 - 0.03 = 1.893: after the division */
        { -0.5f, 0.0f, 1.0f, 0 },  /* negative: favours the repeated */
    };
    for (size_t i = 0; i < sizeof(fc) / sizeof(fc[0]); i++) {
        eng_sampler_params q = eng_sampler_params_default();
        q.freq_penalty = fc[i].freq;
        q.presence_penalty = fc[i].pres;
        q.repeat_penalty = fc[i].rep;
        s = mk(q, N);
        CHECK(!eng_sampler_is_greedy(s));
        CHECK(eng_sampler_sample(s, fp) == 0); /* nothing in the window yet */
        for (int k = 0; k < 3; k++)
            eng_sampler_accept(s, 0);
        eng_sampler_accept(s, 2);
        int got = eng_sampler_sample(s, fp);
        if (got != fc[i].want)
            fprintf(stderr, "freq %g presence %g repeat %g: token %d, want %d\n", (double)fc[i].freq,
                    (double)fc[i].pres, (double)fc[i].rep, got, fc[i].want);
        CHECK(got == fc[i].want);
        eng_sampler_free(s);
        /* the same through top-k's pass, which penalises the window's
         * tokens on the side (top-k 1 at any temperature is greedy) */
        eng_sampler_params t = temp(0.8f, 5);
        t.top_k = 1;
        t.freq_penalty = fc[i].freq;
        t.presence_penalty = fc[i].pres;
        t.repeat_penalty = fc[i].rep;
        s = mk(t, N);
        for (int k = 0; k < 3; k++)
            eng_sampler_accept(s, 0);
        eng_sampler_accept(s, 2);
        CHECK(eng_sampler_sample(s, fp) == fc[i].want);
        eng_sampler_free(s);
    }

    /* logit bias: added first, before the penalties; -inf bans; a token
     * listed twice gets both; greedy and through top-k's pass alike */
    static const struct { eng_logit_bias b[2]; int nb; float rep; int hist; float l1; int want; } bc[] = {
        { {{0, -0.2f}}, 1, 1.0f, -1, 1.9f, 1 },
        { {{2, 1.9f}}, 1, 1.0f, -1, 1.9f, 2 },  /* 2.1 */
        { {{0, -INFINITY}}, 1, 1.0f, -1, 1.9f, 1 },
        { {{1, 0.06f}, {1, 0.06f}}, 2, 1.0f, -1, 1.9f, 1 }, /* 2.02 > 2 */
        { {{1, 0.06f}}, 1, 1.0f, -1, 1.9f, 0 },
        { {{0, -1.0f}}, 1, 2.0f, 0, 0.3f, 0 },  /* (2 - 1) / 2 = 0.5 > 0.3; the other order: 0 */
        { {{0, -1.0f}}, 1, 1.0f, 0, 1.2f, 1 },
    };
    for (size_t i = 0; i < sizeof(bc) / sizeof(bc[0]); i++) {
        float bl[N] = {2.0f, bc[i].l1, 0.2f, -5.0f, -5.0f, -5.0f, -5.0f, -5.0f};
        for (int path = 0; path < 2; path++) {
            eng_sampler_params q = path ? temp(0.8f, 9) : eng_sampler_params_default();
            q.top_k = path; /* top-k 1: the pass that adjusts on the side */
            q.repeat_penalty = bc[i].rep;
            q.logit_bias = bc[i].b;
            q.n_logit_bias = bc[i].nb;
            s = mk(q, N);
            CHECK(!eng_sampler_is_greedy(s));
            if (bc[i].hist >= 0)
                eng_sampler_accept(s, bc[i].hist);
            int got = eng_sampler_sample(s, bl);
            if (got != bc[i].want)
                fprintf(stderr, "logit bias case %zu path %d: token %d, want %d\n", i, path, got, bc[i].want);
            CHECK(got == bc[i].want);
            eng_sampler_free(s);
        }
    }

    /* the caller's logits are never modified, whatever the chain does */
    p = temp(0.9f, 3);
    p.repeat_penalty = 1.3f;
    p.freq_penalty = 0.4f;
    p.presence_penalty = 0.3f;
    p.top_k = 4;
    p.top_p = 0.9f;
    p.min_p = 0.05f;
    s = mk(p, N);
    for (int i = 0; i < N; i++)
        eng_sampler_accept(s, i);
    for (int d = 0; d < 100; d++)
        eng_sampler_sample(s, l);
    CHECK(memcmp(l, orig, sizeof(l)) == 0);
    eng_sampler_free(s);
}

/* ---- the whole chain, token for token, against a plain re-implementation ----
 *
 * The chain as sampling.c documents it, written the slow and obvious way:
 * the penalty on a copy (each distinct window token once), every possible
 * token sorted best first (logit, then lower id; +inf ones alone when
 * there are any), top-k the first k, top-p the smallest best-first prefix
 * reaching p of the mass (kept worst first, as the sampler leaves them),
 * min-p, then the temperature softmax and a draw with the sampler's own
 * generator (xoshiro256** seeded through splitmix64). Same seed, same
 * tokens: whatever the sampler does to go faster (its top-k never builds a
 * candidate per token, nor copies the row) must not change one draw. */
typedef struct { float l; int32_t id; } rcand;

static int rcmp(const void *a, const void *b) {
    const rcand *x = a, *y = b;
    if (x->l != y->l)
        return x->l > y->l ? -1 : 1;
    return x->id < y->id ? -1 : 1;
}

static uint64_t r_sm(uint64_t *x) {
    uint64_t z = (*x += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

static uint64_t r_rotl(uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }

static double r_uniform(uint64_t st[4]) {
    uint64_t r = r_rotl(st[1] * 5, 7) * 9, t = st[1] << 17;
    st[2] ^= st[0];
    st[3] ^= st[1];
    st[1] ^= st[2];
    st[0] ^= st[3];
    st[2] ^= t;
    st[3] = r_rotl(st[3], 45);
    return (double)(r >> 11) * 0x1.0p-53;
}

static int32_t ref_sample(const eng_sampler_params *p, const float *logits, int n_vocab,
                          const int32_t *hist, int n_hist, uint64_t rng[4]) {
    float *l = malloc(sizeof(float) * n_vocab);
    rcand *c = malloc(sizeof(rcand) * n_vocab);
    memcpy(l, logits, sizeof(float) * n_vocab);
    for (int i = 0; i < p->n_logit_bias; i++)
        l[p->logit_bias[i].token] += p->logit_bias[i].bias;
    for (int h = 0; h < n_hist; h++) {
        int seen = 0, count = 0;
        for (int g = 0; g < n_hist; g++) {
            seen |= g < h && hist[g] == hist[h];
            count += hist[g] == hist[h];
        }
        if (!seen) {
            float v = l[hist[h]];
            v = v > 0.0f ? v / p->repeat_penalty : v * p->repeat_penalty;
            l[hist[h]] = v - ((float)count * p->freq_penalty + p->presence_penalty);
        }
    }
    size_t n = 0;
    int inf = 0;
    for (int i = 0; i < n_vocab; i++)
        if (!isnan(l[i]) && l[i] != -INFINITY) {
            c[n++] = (rcand){l[i], i};
            inf |= l[i] == INFINITY;
        }
    if (inf) {
        size_t m = 0;
        for (size_t i = 0; i < n; i++)
            if (c[i].l == INFINITY)
                c[m++] = (rcand){0.0f, c[i].id};
        n = m;
    }
    int32_t tok = 0;
    if (n > 0) {
        qsort(c, n, sizeof(*c), rcmp);
        if (p->top_k > 0 && (size_t)p->top_k < n)
            n = (size_t)p->top_k;
        if (p->top_p < 1.0f && n > 1) {
            double sum = 0, cum = 0;
            for (size_t i = 0; i < n; i++)
                sum += exp((double)c[i].l - c[0].l);
            size_t m = 0;
            while (m < n) {
                cum += exp((double)c[m].l - c[0].l);
                m++;
                if (cum >= (double)p->top_p * sum)
                    break;
            }
            for (size_t i = 0; i < m / 2; i++) { /* worst first */
                rcand t = c[i];
                c[i] = c[m - 1 - i];
                c[m - 1 - i] = t;
            }
            n = m;
        }
        if (p->min_p > 0.0f && n > 1) {
            float mx = -INFINITY;
            for (size_t i = 0; i < n; i++)
                mx = c[i].l > mx ? c[i].l : mx;
            float floor = mx + logf(p->min_p);
            size_t m = 0;
            for (size_t i = 0; i < n; i++)
                if (c[i].l >= floor)
                    c[m++] = c[i];
            n = m;
        }
        double inv_t = 1.0 / (double)p->temperature, mx = -INFINITY, sum = 0;
        for (size_t i = 0; i < n; i++)
            if (c[i].l * inv_t > mx)
                mx = c[i].l * inv_t;
        for (size_t i = 0; i < n; i++) {
            double e = exp(c[i].l * inv_t - mx);
            c[i].l = (float)e;
            sum += e;
        }
        double u = r_uniform(rng) * sum, cum = 0;
        tok = c[n - 1].id;
        for (size_t i = 0; i < n; i++) {
            cum += c[i].l;
            if (u < cum) {
                tok = c[i].id;
                break;
            }
        }
    }
    free(l);
    free(c);
    return tok;
}

/* A chain's parameters, as the chain tests' tables give them. */
static eng_sampler_params chain_params(float t, uint64_t seed, int k, float top_p, float min_p,
                                       float pen, int last_n, float freq, float pres) {
    eng_sampler_params p = temp(t, seed);
    p.top_k = k;
    p.top_p = top_p;
    p.min_p = min_p;
    p.repeat_penalty = pen;
    p.repeat_last_n = last_n;
    p.freq_penalty = freq;
    p.presence_penalty = pres;
    return p;
}

/* The test's copy of the sampler's window of the last last_n tokens. */
static void window_push(int32_t *hist, int *n_hist, int *pos, int last_n, int32_t tok) {
    if (last_n <= 0)
        return;
    hist[*pos] = tok;
    *pos = (*pos + 1) % last_n;
    if (*n_hist < last_n)
        (*n_hist)++;
}

static void test_chain_exact(void) {
    enum { N = 3000, STEPS = 60 };
    static const struct { int k; float top_p, min_p, pen; int last_n; float freq, pres; } cfg[] = {
        { 40, 1.0f, 0.0f, 1.0f, 0, 0, 0 },   { 40, 0.9f, 0.0f, 1.3f, 64, 0, 0 },
        { 5, 1.0f, 0.05f, 1.1f, 16, 0, 0 },  { 1, 1.0f, 0.0f, 1.0f, 0, 0, 0 },
        { 40, 0.9f, 0.05f, 0.8f, 32, 0, 0 }, /* a penalty that raises */
        { N - 1, 0.95f, 0.0f, 1.2f, 64, 0, 0 }, { 0, 0.9f, 0.0f, 1.3f, 64, 0, 0 },
        { 200, 1.0f, 0.0f, 1.5f, 8, 0, 0 },
        { 0, 0.05f, 0.0f, 1.1f, 16, 0, 0 }, /* top-p alone keeping fewer than its first 64 */
        /* frequency and presence penalties, with and without the repeat one */
        { 40, 0.9f, 0.0f, 1.0f, 64, 0.6f, 0.4f }, { 0, 0.95f, 0.05f, 1.2f, 32, 0.3f, 0.0f },
        { 200, 0.95f, 0.0f, 1.0f, 16, 0.0f, 1.5f }, { 0, 0.9f, 0.0f, 1.1f, 64, -0.2f, 0.5f },
        /* the same two again with a logit bias (below) */
        { 40, 0.9f, 0.0f, 1.0f, 64, 0.6f, 0.4f }, { 0, 0.9f, 0.0f, 1.1f, 64, -0.2f, 0.5f },
    };
    const size_t first_biased = sizeof(cfg) / sizeof(cfg[0]) - 2;
    eng_logit_bias bias[12];
    for (int i = 0; i < 12; i++) /* ten tokens, two of them twice, one banned */
        bias[i] = (eng_logit_bias){ i % 10, i == 3 ? -INFINITY : (float)(i % 5) - 2.0f + 0.25f * (float)i };
    float *l = malloc(sizeof(float) * N);
    int32_t hist[64];
    for (size_t ci = 0; ci < sizeof(cfg) / sizeof(cfg[0]); ci++)
        for (int kind = 0; kind < 3; kind++) {
            eng_sampler_params p = chain_params(0.7f, 1000 + ci * 3 + kind, cfg[ci].k, cfg[ci].top_p,
                                                cfg[ci].min_p, cfg[ci].pen, cfg[ci].last_n,
                                                cfg[ci].freq, cfg[ci].pres);
            if (ci >= first_biased) {
                p.logit_bias = bias;
                p.n_logit_bias = 12;
            }
            eng_sampler *s = mk(p, N);
            uint64_t rng[4], x = p.seed;
            for (int i = 0; i < 4; i++)
                rng[i] = r_sm(&x);
            int n_hist = 0, pos = 0, same = 0;
            for (int step = 0; step < STEPS; step++) {
                for (int i = 0; i < N; i++) {
                    /* kind 0: spread; 1: coarse (many ties); 2: with NaN,
                     * -inf, and now and then +inf logits */
                    float v = kind == 1 ? floorf(frand() * 8.0f) : frand() * 10.0f - 3.0f;
                    if (kind == 2) {
                        uint32_t r = (uint32_t)(frand() * 1000.0f);
                        v = r < 5 ? NAN : r < 300 ? -INFINITY : v;
                        if (step % 7 == 3 && r == 999)
                            v = INFINITY;
                    }
                    l[i] = v;
                }
                /* the window's tokens near the top, where the penalty matters */
                for (int h = 0; h < n_hist; h++)
                    if (kind != 2 || !isinf(l[hist[h]]))
                        l[hist[h]] = 6.5f + 0.1f * (h % 5);
                int32_t want = ref_sample(&p, l, N, hist, n_hist, rng);
                int32_t got = eng_sampler_sample(s, l);
                same += got == want;
                if (got != want && same == step)
                    fprintf(stderr, "chain: config %zu kind %d step %d: %d, want %d\n", ci, kind,
                            step, got, want);
                eng_sampler_accept(s, got);
                window_push(hist, &n_hist, &pos, p.repeat_last_n, got);
            }
            CHECK(same == STEPS);
            eng_sampler_free(s);
        }
    free(l);
}

/* a ranks before b in a row x: the larger value (-0 == +0), NaN last, ties
 * to the lower index (the candidates' order, engine.h) */
static const float *g_row;
static int cmp_rank(const void *a, const void *b) {
    const int i = *(const int *)a, j = *(const int *)b;
    const float u = g_row[i], v = g_row[j];
    if (isnan(u) != isnan(v))
        return isnan(u) ? 1 : -1;
    if (!isnan(u) && u != v)
        return u > v ? -1 : 1;
    return i < j ? -1 : i > j;
}

static int cmp_int(const void *a, const void *b) {
    const int i = *(const int *)a, j = *(const int *)b;
    return i < j ? -1 : i > j;
}

/* A row of n logits: kind 0 spread, 1 coarse (ties), 2 NaN, +-inf, -0. */
static void fill_row(float *l, int n, int kind) {
    for (int i = 0; i < n; i++) {
        float v = kind == 1 ? floorf(frand() * 8.0f) : frand() * 10.0f - 3.0f;
        if (kind == 2) {
            uint32_t r = (uint32_t)(frand() * 1000.0f);
            v = r < 5 ? NAN : r < 200 ? -INFINITY : r < 210 ? -0.0f : r < 220 ? 0.0f : r == 999 ? INFINITY : v;
        }
        l[i] = v;
    }
}

static void test_candidates_ref(void) {
    enum { N = 2 * ENG_CAND_CHUNK + 777 };
    float *l = malloc(sizeof(float) * N), *vals = malloc(sizeof(float) * 3 * ENG_CAND_MAX);
    int32_t *ids = malloc(sizeof(int32_t) * 3 * ENG_CAND_MAX);
    int *order = malloc(sizeof(int) * ENG_CAND_CHUNK);
    uint32_t *tmp = malloc(sizeof(uint32_t) * 2 * ENG_CAND_CHUNK);
    CHECK(eng_candidates_size(N, 40) == 3 * 40 && eng_candidates_size(10, 40) == 40);
    CHECK(eng_candidates_size(0, 40) == 0 && eng_candidates_size(N, 0) == 0);
    CHECK(eng_candidates(l, N, 0, tmp, vals, ids) == -EINVAL);
    CHECK(eng_candidates(l, N, ENG_CAND_MAX + 1, tmp, vals, ids) == -EINVAL);
    CHECK(eng_candidates(l, 0, 4, tmp, vals, ids) == -EINVAL);
    static const int ks[] = { 1, 40, 300, ENG_CAND_MAX };
    for (int kind = 0; kind < 3; kind++)
        for (size_t ki = 0; ki < sizeof(ks) / sizeof(ks[0]); ki++) {
            const int k = ks[ki];
            fill_row(l, N, kind);
            CHECK(eng_candidates(l, N, k, tmp, vals, ids) == 0);
            int bad = 0;
            for (int c = 0; c < 3; c++) {
                const int base = c * ENG_CAND_CHUNK, len = N - base < ENG_CAND_CHUNK ? N - base : ENG_CAND_CHUNK;
                const int take = k < len ? k : len;
                for (int i = 0; i < len; i++)
                    order[i] = base + i;
                g_row = l;
                qsort(order, (size_t)len, sizeof(int), cmp_rank);
                /* the chunk's best take, by id, are the entries in order */
                qsort(order, (size_t)take, sizeof(int), cmp_int);
                const float *v = vals + (size_t)c * k;
                const int32_t *id = ids + (size_t)c * k;
                for (int i = 0; i < take; i++)
                    bad += id[i] != order[i] || memcmp(&v[i], &l[order[i]], sizeof(float)) != 0;
                for (int i = take; i < k; i++)
                    bad += id[i] != -1 || v[i] != 0.0f;
            }
            if (bad)
                fprintf(stderr, "candidates: kind %d k %d: %d entries wrong\n", kind, k, bad);
            CHECK(bad == 0);
        }
    free(l);
    free(vals);
    free(ids);
    free(order);
    free(tmp);
}

/* Sampling from the candidates for eng_sampler_candidates()'s k, token for
 * token the same as from the row (the same draws); and from too few
 * candidates (top_k alone, without the penalised window's), not: the
 * window is put at the top of the row, where the penalties matter. */
static void test_candidates_sample(void) {
    enum { N = 2 * ENG_CAND_CHUNK + 901, STEPS = 40 };
    static const struct { float t; int k; float top_p, min_p, pen; int last_n; float freq, pres; int bias; } cfg[] = {
        { 0.7f, 40, 1.0f, 0.0f, 1.0f, 0, 0, 0, 0 },      { 0.7f, 40, 0.9f, 0.05f, 1.3f, 64, 0, 0, 0 },
        { 1.5f, 5, 1.0f, 0.0f, 1.1f, 16, 0.5f, 0.2f, 0 }, { 0.7f, 1, 1.0f, 0.0f, 2.0f, 64, 0, 0, 0 },
        { 0.0f, 0, 1.0f, 0.0f, 1.3f, 64, 0, 0, 0 },     /* greedy with a penalty */
        { 0.0f, 40, 1.0f, 0.0f, 1.0f, 32, 0.3f, 1.0f, 1 }, /* and frequency/presence, biases */
        { 0.8f, 40, 0.95f, 0.0f, 1.1f, 64, 0, 0, 1 },   { 0.7f, 300, 0.9f, 0.0f, 1.0f, 8, 0, 0.7f, 0 },
    };
    eng_logit_bias bias[6];
    float *l = malloc(sizeof(float) * N), *vals = malloc(sizeof(float) * 3 * ENG_CAND_MAX);
    int32_t *ids = malloc(sizeof(int32_t) * 3 * ENG_CAND_MAX);
    uint32_t *tmp = malloc(sizeof(uint32_t) * 2 * ENG_CAND_CHUNK);
    int32_t hist[64];
    int short_differs = 0;
    for (size_t ci = 0; ci < sizeof(cfg) / sizeof(cfg[0]); ci++)
        for (int kind = 0; kind < 3; kind++) {
            eng_sampler_params p = chain_params(cfg[ci].t, 77 + ci * 3 + kind, cfg[ci].k, cfg[ci].top_p,
                                                cfg[ci].min_p, cfg[ci].pen, cfg[ci].last_n,
                                                cfg[ci].freq, cfg[ci].pres);
            if (cfg[ci].bias) {
                for (int i = 0; i < 6; i++) /* lowered or banned, one token twice */
                    bias[i] = (eng_logit_bias){ 5000 + i % 5, i == 2 ? -INFINITY : -0.5f * (float)(i + 1) };
                p.logit_bias = bias;
                p.n_logit_bias = 6;
            }
            eng_sampler *row = mk(p, N), *cand = mk(p, N), *few = mk(p, N);
            const int K = eng_sampler_candidates(cand);
            const int base_k = p.temperature <= 0.0f ? 1 : p.top_k;
            CHECK(K == base_k + (p.repeat_penalty != 1.0f || p.freq_penalty != 0.0f || p.presence_penalty != 0.0f
                                     ? p.repeat_last_n : 0) + (cfg[ci].bias ? 5 : 0));
            int n_hist = 0, pos = 0, same = 0;
            for (int step = 0; step < STEPS; step++) {
                fill_row(l, N, kind);
                /* the window above the rest: only its penalties move it down */
                for (int h = 0; h < n_hist; h++)
                    if (kind != 2 || !isinf(l[hist[h]]))
                        l[hist[h]] = 8.0f + 0.1f * (h % 5);
                for (int i = 0; cfg[ci].bias && i < 5; i++)
                    l[5000 + i] = 7.0f + 0.01f * (float)i; /* the biased at the very top */
                const int32_t want = eng_sampler_sample(row, l);
                CHECK(eng_candidates(l, N, K, tmp, vals, ids) == 0);
                const int32_t got = eng_sampler_sample_candidates(cand, vals, ids, eng_candidates_size(N, K));
                same += got == want;
                if (got != want && same == step)
                    fprintf(stderr, "candidates: config %zu kind %d step %d: %d, want %d\n", ci, kind,
                            step, got, want);
                /* the control: top_k's candidates only, with the same draws */
                CHECK(eng_candidates(l, N, base_k, tmp, vals, ids) == 0);
                short_differs += eng_sampler_sample_candidates(few, vals, ids, eng_candidates_size(N, base_k)) != want;
                eng_sampler_accept(row, want);
                eng_sampler_accept(cand, want);
                eng_sampler_accept(few, want);
                window_push(hist, &n_hist, &pos, p.repeat_last_n, want);
            }
            CHECK(same == STEPS);
            eng_sampler_free(row);
            eng_sampler_free(cand);
            eng_sampler_free(few);
        }
    CHECK(short_differs > 0);

    /* where the choice may depend on every logit: no candidates */
    static const struct { float t; int k; float pen; int last_n; float freq, pres, bias; } none[] = {
        { 0.7f, 0, 1.0f, 0, 0, 0, 0 },       /* top-p alone normalises over the row */
        { 0.7f, N, 1.0f, 0, 0, 0, 0 },       /* top_k as large as the vocabulary */
        { 0.7f, 40, 0.9f, 64, 0, 0, 0 },     /* a repeat penalty that raises */
        { 0.7f, 40, 1.0f, 64, -0.1f, 0, 0 }, /* a negative frequency penalty */
        { 0.7f, 40, 1.0f, 64, 0, -0.1f, 0 }, /* a negative presence penalty */
        { 0.7f, 40, 1.0f, 0, 0, 0, 0.5f },   /* a bias that raises */
        { 0.7f, ENG_CAND_MAX, 1.1f, 64, 0, 0, 0 }, /* more than ENG_CAND_MAX */
    };
    for (size_t i = 0; i < sizeof(none) / sizeof(none[0]); i++) {
        eng_sampler_params p = temp(none[i].t, 1);
        p.top_k = none[i].k;
        p.repeat_penalty = none[i].pen;
        p.repeat_last_n = none[i].last_n;
        p.freq_penalty = none[i].freq;
        p.presence_penalty = none[i].pres;
        eng_logit_bias b = { 7, none[i].bias };
        if (none[i].bias != 0.0f) {
            p.logit_bias = &b;
            p.n_logit_bias = 1;
        }
        eng_sampler *s = mk(p, N);
        CHECK(eng_sampler_candidates(s) == 0);
        CHECK(eng_sampler_sample_candidates(s, vals, ids, 1) == -EINVAL);
        CHECK(eng_sampler_eval_flags(s, NULL) == 0);
        eng_sampler_free(s);
    }
    /* a raising penalty with no window to act on is no adjustment */
    eng_sampler_params p = temp(0.7f, 1);
    p.top_k = 40;
    p.repeat_penalty = 0.9f;
    p.repeat_last_n = 0;
    eng_sampler *s = mk(p, N);
    CHECK(eng_sampler_candidates(s) == 40);
    const int32_t bad_id = N;
    const float v = 1.0f;
    CHECK(eng_sampler_sample_candidates(s, &v, &bad_id, 1) == -EINVAL);
    eng_sampler_free(s);
    s = mk(temp(0.0f, 1), N); /* plain greedy: the argmax, not candidates */
    CHECK(eng_sampler_candidates(s) == 1 && eng_sampler_eval_flags(s, NULL) == ENG_EVAL_ARGMAX);
    eng_sampler_free(s);
    free(l);
    free(vals);
    free(ids);
    free(tmp);
}

int main(void) {
    test_defaults_and_params();
    test_greedy();
    test_determinism();
    test_distribution();
    test_truncation();
    test_large_vocab();
    test_chain_exact();
    test_penalty();
    test_candidates_ref();
    test_candidates_sample();
    if (failures) {
        fprintf(stderr, "%d check(s) failed\n", failures);
        return 1;
    }
    printf("ok\n");
    return 0;
}
