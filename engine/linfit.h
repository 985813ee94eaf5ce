/* Reduced-rank ridge regression (linfit.c), for ENG_COMP_LINEAR. */
#ifndef ENGINE_LINFIT_H
#define ENGINE_LINFIT_H

#include <stddef.h>

#define ENG_LINFIT_MAX_RANK 64

/* y[t][i] = sum_k w[i][k] x[t][k], t < n, i < rows (w [rows][cols], x
 * [n][cols], y [n][rows]): the products eng__linfit leaves to its caller
 * (the CPU backend's matmul); NULL: plain loops. */
typedef void (*eng_linfit_mm)(void *ctx, const float *w, int rows, int cols, const float *x,
                              float *y, int n);

/* Fits y ~ x P V^T + bias over T rows (x [T][E], y [T][D], row-major):
 * ridge regression of the centred y on the centred x, lambda = ridge x the
 * mean squared norm of the centred x rows, cut to the rank r part of its
 * fitted values (V: D x r orthonormal columns), found within the q leading
 * directions of the centred y (q = D is exact; q is at most min(T, D), and
 * columns past it stay zero). Writes P [E][r], V [D][r] and bias [D];
 * scratch: eng__linfit_scratch() bytes of malloc'd memory. Returns the rank
 * found (<= r; columns past it are zero), -EINVAL for bad sizes (T < 2, r
 * outside 1..ENG_LINFIT_MAX_RANK, q < 1, ridge <= 0, no scratch), or -EDOM
 * when the system is not positive definite (NaN in the data). */
int eng__linfit(const float *x, const float *y, int T, int E, int D, int r, int q, double ridge,
                eng_linfit_mm mm, void *ctx, void *scratch, float *ret_p, float *ret_v,
                float *ret_bias);

size_t eng__linfit_scratch(int T, int E, int D, int r, int q);

#endif
