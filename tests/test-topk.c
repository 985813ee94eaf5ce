/* The host's selections (engine/topk.c) against a full sort: the k-th
 * largest value, the k best indices of ENG_PICK_TOKEN (ties to the lower
 * index, NaN below every number) and the top-alpha votes, on random rows
 * with ties, signed zeros, infinities and NaN, over the sizes and k where
 * a radix select changes passes (one candidate left, all equal, k = 1 and
 * k = n). */
#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "test-util.h"
#include "topk.h"

static uint64_t rng = 0x9e3779b97f4a7c15ull;
static uint32_t rnd(void)
{
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return (uint32_t)(rng >> 16);
}

/* The float order with NaN below -inf, as a comparison for qsort of
 * indices: descending by value, then ascending by index. */
static const float *sort_vals;
static int rank_of(float v)
{
    return isnan(v) ? 0 : 1;
}
static int cmp_desc(const void *a, const void *b)
{
    int i = *(const int *)a, j = *(const int *)b;
    float x = sort_vals[i], y = sort_vals[j];
    if (rank_of(x) != rank_of(y))
        return rank_of(y) - rank_of(x);
    if (!isnan(x) && x != y)
        return x > y ? -1 : 1;
    return i - j;
}

/* Values of one of several kinds: wide (random magnitudes, both signs),
 * few (8 distinct values: many ties), nonneg (|x| as scores are), special
 * (zeros of both signs, infinities, NaN among ordinary numbers). */
static float value(int kind)
{
    switch (kind) {
    case 0:
        return ldexpf((float)(rnd() % 1000000) / 1e6f, (int)(rnd() % 40) - 20) *
               (rnd() & 1 ? -1.0f : 1.0f);
    case 1:
        return (float)(rnd() % 8) - 3.0f;
    case 2:
        return fabsf(ldexpf((float)(rnd() % 1000) / 1e3f, (int)(rnd() % 12) - 6));
    default: {
        static const float sp[] = { 0.0f, -0.0f, INFINITY, -INFINITY, NAN, 1.0f, -1.0f, 0.5f };
        return rnd() % 3 ? sp[rnd() % 8] : (float)(rnd() % 100) / 7.0f;
    }
    }
}

static void check_row(const float *x, int n, int k, int kind)
{
    int *idx = malloc(sizeof(int) * n);
    uint32_t *tmp = malloc(sizeof(uint32_t) * 2 * n);
    int32_t *out = malloc(sizeof(int32_t) * n);
    CHECK(idx && tmp && out);
    for (int i = 0; i < n; i++)
        idx[i] = i;
    sort_vals = x;
    qsort(idx, n, sizeof(int), cmp_desc);

    /* the k-th largest: the value at position k - 1 (a NaN there: NaN) */
    float want = x[idx[k - 1]], got = eng__kth_largest(tmp, x, n, k);
    CHECKF(isnan(want) ? isnan(got) : got == want, "kth n %d k %d kind %d: %g, want %g", n, k,
           kind, got, want);

    /* the pick: the first k of the sorted order, as ascending indices */
    char *in = calloc(n, 1);
    CHECK(in);
    for (int i = 0; i < k; i++)
        in[idx[i]] = 1;
    memset(out, 0xff, sizeof(int32_t) * n);
    eng__pick_top(x, n, k, tmp, out);
    for (int i = 0, m = 0; i < n; i++)
        if (in[i]) {
            CHECKF(out[m] == i, "pick n %d k %d kind %d: out[%d] = %d, want %d", n, k, kind, m,
                   out[m], i);
            m++;
        }
    for (int i = k; i < n; i++)
        CHECKF(out[i] == -1, "pick n %d k %d: wrote past k", n, k);

    /* the same pick from the indices scoring at least a bound at most the
     * k-th largest (the k-th itself: ties at the edge; below it: more),
     * as ffn_pick lists them */
    if (!isnan(want)) {
        int32_t *cand = malloc(sizeof(int32_t) * n), *out2 = malloc(sizeof(int32_t) * n);
        CHECK(cand && out2);
        for (int b = 0; b < 2; b++) {
            const float bound = b == 0 ? want : want > 0 ? want * 0.5f : want * 2.0f - 1.0f;
            int m = 0;
            for (int i = 0; i < n; i++)
                if (x[i] >= bound)
                    cand[m++] = i;
            memset(out2, 0xff, sizeof(int32_t) * n);
            float thr = eng__pick_top_of(x, cand, m, k, tmp, out2);
            CHECKF(memcmp(out, out2, sizeof(int32_t) * n) == 0 && thr == want,
                   "pick of %d listed (n %d k %d kind %d): not the pick over all", m, n, k,
                   kind);
        }
        free(cand);
        free(out2);
    }
    free(in);
    free(idx);
    free(tmp);
    free(out);
}

/* eng__topk_count: each slot whose rank value (|a|, or a for the signed
 * rank) is >= the k-th largest of its token and above zero gets a vote
 * (all ties vote), k = max(1, lround(alpha n)) for |a|, alpha times the
 * mean count of positive a per token for a. kind 4: 95 % exact zeros, as
 * Gemma 3n's cut layers leave them, where k passes the nonzero count. */
static void check_count(int nt, int n, float alpha, int kind, bool signed_rank)
{
    float *act = malloc(sizeof(float) * nt * n), *absrow = malloc(sizeof(float) * n);
    float *votes = calloc(n, sizeof(float));
    uint32_t *tmp = malloc(sizeof(uint32_t) * n), *want = calloc(n, sizeof(uint32_t));
    CHECK(act && absrow && votes && tmp && want);
    long npos = 0;
    for (int i = 0; i < nt * n; i++) {
        act[i] = kind == 4 ? (rnd() % 20 ? 0.0f : value(0)) : value(kind);
        if (isnan(act[i]))
            act[i] = 0.25f; /* the vote's order with NaN is not specified */
        npos += act[i] > 0;
    }
    long k = signed_rank ? lround(alpha * ((double)npos / nt)) : lroundf(alpha * n);
    k = k < 1 ? 1 : k > n ? n : k;
    long voters = 0;
    for (int t = 0; t < nt; t++) {
        for (int j = 0; j < n; j++)
            absrow[j] = signed_rank ? act[t * n + j] : fabsf(act[t * n + j]);
        int *idx = malloc(sizeof(int) * n);
        CHECK(idx);
        for (int j = 0; j < n; j++)
            idx[j] = j;
        sort_vals = absrow;
        qsort(idx, n, sizeof(int), cmp_desc);
        float thr = absrow[idx[k - 1]];
        for (int j = 0; j < n; j++)
            want[j] += absrow[j] >= thr && absrow[j] > 0;
        free(idx);
    }
    eng__topk_count(act, nt, n, alpha, signed_rank, tmp, votes, NULL);
    for (int j = 0; j < n; j++) {
        CHECKF(votes[j] == (float)want[j],
               "count n %d kind %d signed %d slot %d: %g votes, want %u", n, kind, signed_rank, j,
               votes[j], want[j]);
        voters += want[j] > 0;
    }
    /* the zeros' case: a slot that was 0 at every token has no vote */
    if (kind == 4 && n >= 100)
        CHECKF(voters < n / 2, "count n %d: %ld slots voted for, of mostly zeros", n, voters);
    free(act);
    free(absrow);
    free(votes);
    free(tmp);
    free(want);
}

int main(void)
{
    static const int sizes[] = { 1, 2, 3, 5, 17, 256, 257, 1075, 4096 };
    float *x = malloc(sizeof(float) * 4096);
    CHECK(x);
    int rows = 0;
    for (size_t si = 0; si < sizeof(sizes) / sizeof(sizes[0]); si++) {
        const int n = sizes[si];
        for (int kind = 0; kind < 4; kind++)
            for (int rep = 0; rep < 6; rep++) {
                for (int i = 0; i < n; i++)
                    x[i] = value(kind);
                const int ks[] = { 1, n, n / 2 > 0 ? n / 2 : 1, 1 + (int)(rnd() % n),
                                   (int)(0.38 * n) > 0 ? (int)(0.38 * n) : 1 };
                for (int q = 0; q < 5; q++, rows++)
                    check_row(x, n, ks[q], kind);
            }
    }
    /* all equal, and all equal but one: every pass keeps every candidate */
    for (int i = 0; i < 1075; i++)
        x[i] = 3.0f;
    check_row(x, 1075, 412, 9);
    x[700] = 3.0000002f;
    check_row(x, 1075, 1, 9);
    check_row(x, 1075, 2, 9);
    x[5] = NAN;
    check_row(x, 1075, 1075, 9);
    rows += 4;
    int sets = 0;
    for (int kind = 0; kind < 5; kind++)
        for (int sr = 0; sr < 2; sr++, sets += 3) {
            check_count(5, 1536, 0.2f, kind, sr);
            check_count(3, 7, 0.5f, kind, sr);
            check_count(2, 1, 0.2f, kind, sr);
        }
    free(x);
    printf("topk: %d rows and %d vote sets match a full sort\n", rows, sets);
    return 0;
}
