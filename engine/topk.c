/* Top-alpha counting on the host (topk.h): a radix select per token, then
 * one comparison per slot. The engine's host path and the CPU backend's
 * topk_count op both come here, so they cannot drift apart. */
#include "topk.h"

#include <errno.h>
#include <math.h>
#include <string.h>

#include "engine.h"

/* Keys whose unsigned order is the float order: the sign-flip map, with
 * -0 folded onto +0 (floats compare them equal) and NaN below every number
 * (key 0; -inf is 0x007fffff). For scores >= 0 this is the device's
 * score_key (kernels/select.cu). */
static inline uint32_t float_key(float v)
{
    uint32_t b;
    memcpy(&b, &v, sizeof(b));
    /* branch-free, so the loops over a row vectorize */
    b = b == 0x80000000u ? 0 : b;
    const uint32_t k = b ^ ((uint32_t)((int32_t)b >> 31) | 0x80000000u);
    return (b & 0x7fffffffu) > 0x7f800000u ? 0 : k;
}

static inline float key_float(uint32_t key)
{
    if (key == 0)
        return NAN;
    uint32_t b = (key & 0x80000000u) ? (key & 0x7fffffffu) : ~key;
    float v;
    memcpy(&v, &b, sizeof(v));
    return v;
}

/* A pass of radix_kth costs its histograms and their scan whatever the
 * number of keys left (about 800 cycles at 400 keys): the last few are
 * sorted instead. */
enum { RADIX_SORT_BELOW = 16 };

/* radix_kth for the few keys of src[0..n) (n <= RADIX_SORT_BELOW; src may
 * be cand): sorted descending in cand. */
static uint32_t sort_kth(const uint32_t *src, int n, int k, uint32_t *cand, int *ret_eq)
{
    for (int i = 0; i < n; i++) {
        const uint32_t v = src[i];
        int j = i;
        for (; j > 0 && cand[j - 1] < v; j--)
            cand[j] = cand[j - 1];
        cand[j] = v;
    }
    const uint32_t kth = cand[k - 1];
    int above = 0;
    while (above < k && cand[above] > kth)
        above++;
    *ret_eq = k - above;
    return kth;
}

/* The k-th largest of key[0..n) (1 <= k <= n) by radix select, 8 bits a
 * pass from the top, like the device's radix_kth: the digit where the count
 * of keys above reaches k, whose keys are compacted into cand (n entries;
 * key itself when the keys may be overwritten) as the next pass's
 * candidates. A quickselect on floats mispredicts a branch per comparison
 * on fresh scores: 20 us against 8 for the pick of a SmolLM2 layer (1075
 * slots) on this project's CPU. *ret_eq: how many keys equal to the result
 * are among the k largest. */
static uint32_t radix_kth(const uint32_t *key, int n, int k, uint32_t *cand, int *ret_eq)
{
    const uint32_t *src = key;
    uint32_t prefix = 0;
    for (int shift = 24;; shift -= 8) {
        if (n <= RADIX_SORT_BELOW)
            return sort_kth(src, n, k, cand, ret_eq);
        /* four histograms: consecutive keys often share a digit, and one
         * counter would make each increment wait for the last */
        uint32_t h[4][256];
        memset(h, 0, sizeof(h));
        int i = 0;
        for (; i + 4 <= n; i += 4) {
            h[0][(src[i] >> shift) & 255u]++;
            h[1][(src[i + 1] >> shift) & 255u]++;
            h[2][(src[i + 2] >> shift) & 255u]++;
            h[3][(src[i + 3] >> shift) & 255u]++;
        }
        for (; i < n; i++)
            h[0][(src[i] >> shift) & 255u]++;
        uint32_t d = 255, cum = 0;
        for (;; d--) {
            const uint32_t c = h[0][d] + h[1][d] + h[2][d] + h[3][d];
            if (d == 0 || cum + c >= (uint32_t)k)
                break;
            cum += c;
        }
        k -= (int)cum;
        prefix |= d << shift;
        if (shift == 0)
            break;
        int m = 0;
        for (i = 0; i < n; i++) {
            const uint32_t v = src[i];
            cand[m] = v;
            m += ((v >> shift) & 255u) == d;
        }
        src = cand;
        n = m;
    }
    *ret_eq = k;
    return prefix;
}

float eng__kth_largest(void *tmp, const float *x, int n, int k)
{
    uint32_t *key = tmp;
    for (int i = 0; i < n; i++)
        key[i] = float_key(x[i]);
    int eq;
    return key_float(radix_kth(key, n, k, key, &eq));
}

/* The k best of the m keys key[i] = float_key(score[idx[i]]) (idx
 * ascending; without idx, i): their indices into out, ascending; the k-th
 * largest returned. */
static float pick_keys(const uint32_t *key, const int32_t *idx, int m, int k, uint32_t *cand,
                       int32_t *out)
{
    int eq; /* keys equal to the threshold to take, lowest indices first */
    const uint32_t thr = radix_kth(key, m, k, cand, &eq);
    int o = 0;
    for (int i = 0; i < m && o < k; i++) {
        /* branch-free: whether a slot is taken is a coin toss */
        const uint32_t v = key[i];
        const int is_eq = v == thr, take = (v > thr) | (is_eq & (eq > 0));
        eq -= is_eq & take;
        out[o] = idx ? idx[i] : i;
        o += take;
    }
    return key_float(thr);
}

float eng__pick_top(const float *score, int n, int k, void *tmp, int32_t *out)
{
    uint32_t *key = tmp;
    for (int i = 0; i < n; i++)
        key[i] = float_key(score[i]);
    return pick_keys(key, NULL, n, k, key + n, out);
}

float eng__pick_top_of(const float *score, const int32_t *cand, int m, int k, void *tmp,
                       int32_t *out)
{
    uint32_t *key = tmp;
    for (int i = 0; i < m; i++)
        key[i] = float_key(score[cand[i]]);
    return pick_keys(key, cand, m, k, key + m, out);
}

int eng__topk_k(const float *act, int n_tokens, int n_sel, float alpha, bool signed_rank)
{
    long k;
    if (signed_rank) {
        /* in double, as the kernel does: the count is exact, the mean the
         * same division */
        double mean_pos = 0;
        for (long i = 0; i < (long)n_tokens * n_sel; i++)
            mean_pos += act[i] > 0;
        mean_pos /= n_tokens;
        k = lround(alpha * mean_pos);
    } else {
        /* a float product, as select.c always computed it (and the kernel) */
        k = lround(alpha * n_sel);
    }
    /* alpha <= 1 keeps k <= n_sel; the clamp is for callers that do not */
    return k < 1 ? 1 : k > n_sel ? n_sel : (int)k;
}

void eng__topk_count(const float *act, int n_tokens, int n_sel, float alpha, bool signed_rank,
                     void *tmp, float *fcounts, uint32_t *ucounts)
{
    if (n_tokens <= 0 || n_sel <= 0)
        return;
    const int k = eng__topk_k(act, n_tokens, n_sel, alpha, signed_rank);
    for (int t = 0; t < n_tokens; t++) {
        const float *a = act + (size_t)t * n_sel;
        float thr;
        /* A rank value of zero or below never votes: where a token has
         * fewer than k positive values (Gemma 3n's cut layers leave 95 %
         * of theirs at exactly 0) the k-th is 0, and every slot tying at it
         * would vote, so the prompt would not choose at all. */
        if (signed_rank) {
            thr = eng__kth_largest(tmp, a, n_sel, k);
            if (ucounts)
                for (int j = 0; j < n_sel; j++)
                    ucounts[j] += (a[j] >= thr) & (a[j] > 0.0f);
            else
                for (int j = 0; j < n_sel; j++)
                    fcounts[j] += (a[j] >= thr) & (a[j] > 0.0f);
        } else {
            uint32_t *key = tmp;
            for (int j = 0; j < n_sel; j++)
                key[j] = float_key(fabsf(a[j]));
            int eq;
            thr = key_float(radix_kth(key, n_sel, k, key, &eq));
            if (ucounts)
                for (int j = 0; j < n_sel; j++)
                    ucounts[j] += (fabsf(a[j]) >= thr) & (fabsf(a[j]) > 0.0f);
            else
                for (int j = 0; j < n_sel; j++)
                    fcounts[j] += (fabsf(a[j]) >= thr) & (fabsf(a[j]) > 0.0f);
        }
    }
}

/* ---- a row's candidates for sampling (engine.h eng_candidates) ---- */

size_t eng_candidates_size(int n, int k)
{
    if (n < 1 || k < 1)
        return 0;
    return (size_t)((n + ENG_CAND_CHUNK - 1) / ENG_CAND_CHUNK) * (size_t)k;
}

int eng_candidates(const float *x, int n, int k, void *tmp, float *vals, int32_t *ids)
{
    if (!x || !tmp || !vals || !ids || n < 1 || k < 1 || k > ENG_CAND_MAX)
        return -EINVAL;
    size_t o = 0;
    for (int base = 0; base < n; base += ENG_CAND_CHUNK) {
        const int len = n - base < ENG_CAND_CHUNK ? n - base : ENG_CAND_CHUNK;
        const int take = k < len ? k : len;
        /* the chunk's k best, ascending: eng__pick_top's rule is the
         * ordering of the whole row restricted to the chunk */
        eng__pick_top(x + base, len, take, tmp, ids + o);
        for (int i = 0; i < take; i++) {
            ids[o + i] += base;
            vals[o + i] = x[ids[o + i]];
        }
        for (int i = take; i < k; i++) {
            ids[o + i] = -1;
            vals[o + i] = 0.0f;
        }
        o += (size_t)k;
    }
    return 0;
}
