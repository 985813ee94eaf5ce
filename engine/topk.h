/* Top-alpha counting of prefill activations (private to the engine): the
 * one host implementation of SelectInfer's per-token vote, shared by the
 * selection's host path (select.c, eng__select_observe) and the CPU
 * backend's topk_count op (backend.h), which is the reference the CUDA
 * kernel (kernels/select.cu, si_cuda_topk_count) is checked against.
 *
 * For each token t of act [n_tokens][n_sel], thr_t is the k-th largest rank
 * value of its row, and every slot j with rank(a[t][j]) >= thr_t gets one
 * count (ties all count) if that value is above zero (a token with fewer
 * than k positive values votes for those only):
 *   abs rank:    rank = |a|, k = max(1, lround(alpha * n_sel));
 *   signed rank: rank = a,   k = max(1, lround(alpha * mean number of
 *                positive a per token over these n_tokens)).
 * The signed k is per call: a prefill cut into chunks takes each chunk's
 * own mean, on the host and on the device alike.
 */
#ifndef ENGINE_TOPK_H
#define ENGINE_TOPK_H

#include <stdbool.h>
#include <stdint.h>

/* k of the rule above, clamped to 1 .. n_sel (n_sel >= 1); act is read only
 * for the signed rank (else it may be NULL). */
int eng__topk_k(const float *act, int n_tokens, int n_sel, float alpha, bool signed_rank);

/* The k-th largest of x[0..n), 1 <= k <= n (NaN below every number); tmp:
 * n 32-bit words of scratch (x is not changed). */
float eng__kth_largest(void *tmp, const float *x, int n, int k);

/* ENG_PICK_TOKEN's choice (backend.h ffn_pick): the indices of the k best
 * of score[0..n), 1 <= k <= n, ties to the lower index, NaN below every
 * number, into out[0..k) ascending. Returns the k-th largest score. tmp:
 * 2 n 32-bit words of scratch. */
float eng__pick_top(const float *score, int n, int k, void *tmp, int32_t *out);

/* The same choice from the m candidates cand[0..m) (ascending indices into
 * score, 1 <= k <= m) when they hold every score at least the row's k-th
 * largest, as every index whose score is at least a bound at most that
 * value does: out is then eng__pick_top's over the whole row. tmp: 2 m
 * 32-bit words. */
float eng__pick_top_of(const float *score, const int32_t *cand, int m, int k, void *tmp,
                       int32_t *out);

/* Adds each slot's count over the tokens of act [n_tokens][n_sel] to
 * fcounts (float, select.c's votes) or ucounts (uint32, the op's), exactly
 * one of them not NULL. tmp: n_sel 32-bit words of scratch. */
void eng__topk_count(const float *act, int n_tokens, int n_sel, float alpha, bool signed_rank,
                     void *tmp, float *fcounts, uint32_t *ucounts);

#endif
