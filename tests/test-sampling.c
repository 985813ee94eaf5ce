/* Sampler: greedy, determinism, distribution, truncations, repetition penalty. */
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
          p.repeat_penalty == 1.0f && p.repeat_last_n == 64);
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

    /* the caller's logits are never modified, whatever the chain does */
    p = temp(0.9f, 3);
    p.repeat_penalty = 1.3f;
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

int main(void) {
    test_defaults_and_params();
    test_greedy();
    test_determinism();
    test_distribution();
    test_truncation();
    test_large_vocab();
    test_penalty();
    if (failures) {
        fprintf(stderr, "%d check(s) failed\n", failures);
        return 1;
    }
    printf("ok\n");
    return 0;
}
