/* Top-alpha counting on the host (topk.h): quickselect per token, then one
 * comparison per slot. The engine's host path and the CPU backend's
 * topk_count op both come here, so they cannot drift apart. */
#include "topk.h"

#include <math.h>
#include <string.h>

/* k-th largest of tmp[0..n), in place (tmp is reordered). */
static float select_kth(float *tmp, int n, int k)
{
    int lo = 0, hi = n - 1, want = k - 1;
    while (lo < hi) {
        float pivot = tmp[lo + (hi - lo) / 2];
        int i = lo, j = hi;
        while (i <= j) {
            while (tmp[i] > pivot)
                i++;
            while (tmp[j] < pivot)
                j--;
            if (i <= j) {
                float t = tmp[i];
                tmp[i] = tmp[j];
                tmp[j] = t;
                i++;
                j--;
            }
        }
        if (want <= j)
            hi = j;
        else if (want >= i)
            lo = i;
        else
            break;
    }
    return tmp[want];
}

float eng__kth_largest(float *tmp, const float *x, int n, int k)
{
    memcpy(tmp, x, (size_t)n * sizeof(float));
    return select_kth(tmp, n, k);
}

static inline float num_or_low(float x)
{
    return isnan(x) ? -INFINITY : x;
}

void eng__pick_top(const float *score, int n, int k, float *tmp, int32_t *out)
{
    for (int i = 0; i < n; i++)
        tmp[i] = num_or_low(score[i]);
    const float thr = select_kth(tmp, n, k);
    /* all above the threshold, then the lowest indices equal to it */
    int above = 0;
    for (int i = 0; i < n; i++)
        above += num_or_low(score[i]) > thr;
    int equal = k - above, m = 0;
    for (int i = 0; i < n && m < k; i++) {
        float v = num_or_low(score[i]);
        if (v > thr || (v == thr && equal-- > 0))
            out[m++] = i;
    }
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
                     float *tmp, float *fcounts, uint32_t *ucounts)
{
    if (n_tokens <= 0 || n_sel <= 0)
        return;
    const int k = eng__topk_k(act, n_tokens, n_sel, alpha, signed_rank);
    for (int t = 0; t < n_tokens; t++) {
        const float *a = act + (size_t)t * n_sel;
        float thr;
        if (signed_rank) {
            thr = eng__kth_largest(tmp, a, n_sel, k);
            if (ucounts)
                for (int j = 0; j < n_sel; j++)
                    ucounts[j] += a[j] >= thr;
            else
                for (int j = 0; j < n_sel; j++)
                    fcounts[j] += a[j] >= thr;
        } else {
            for (int j = 0; j < n_sel; j++)
                tmp[j] = fabsf(a[j]);
            thr = select_kth(tmp, n_sel, k);
            if (ucounts)
                for (int j = 0; j < n_sel; j++)
                    ucounts[j] += fabsf(a[j]) >= thr;
            else
                for (int j = 0; j < n_sel; j++)
                    fcounts[j] += fabsf(a[j]) >= thr;
        }
    }
}
