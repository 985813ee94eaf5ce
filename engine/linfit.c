/* Reduced-rank ridge regression for ENG_COMP_LINEAR (select.c): a map from
 * an FFN's input to what the neurons decode leaves out would have added,
 * fitted per request on the prompt's tokens.
 *
 * The targets are first cut to their q leading directions U (a randomized
 * range finder with two power iterations). With T tokens, usually fewer
 * than the input's width, the ridge solution is then found in its dual form,
 * through a T x T system: W = Xc^T C, C = (Xc Xc^T + lambda I)^-1 Yc U. Its
 * fitted values Yc U - lambda C are cut to their r largest directions R (the
 * eigenvectors of a q x q matrix, Jacobi's method), so that decode needs two
 * thin matrices a layer (P = Xc^T C R, V = U R) instead of a D x E one. The
 * large products go to the caller's matrix multiply.
 */
#include <errno.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "linfit.h"

/* sum a[i] b[i], i < n, in four independent chains (the Cholesky's inner
 * loop: one chain waits on the adder's latency at every step) */
static double dot(const double *a, const double *b, int n)
{
    double s0 = 0.0, s1 = 0.0, s2 = 0.0, s3 = 0.0;
    int i = 0;
    for (; i + 4 <= n; i += 4) {
        s0 += a[i] * b[i];
        s1 += a[i + 1] * b[i + 1];
        s2 += a[i + 2] * b[i + 2];
        s3 += a[i + 3] * b[i + 3];
    }
    for (; i < n; i++)
        s0 += a[i] * b[i];
    return (s0 + s1) + (s2 + s3);
}

/* Orthonormalizes q vectors of length n in place (modified Gram-Schmidt,
 * twice, which keeps them orthogonal to rounding); a vector that vanishes
 * against those before it becomes zeros. */
static void orthonormalize(double *v, int q, long n)
{
    for (int pass = 0; pass < 2; pass++)
        for (int i = 0; i < q; i++) {
            double *a = v + (size_t)i * n;
            for (int j = 0; j < i; j++) {
                const double *b = v + (size_t)j * n;
                const double d = dot(a, b, (int)n);
                for (long k = 0; k < n; k++)
                    a[k] -= d * b[k];
            }
            double s = dot(a, a, (int)n);
            s = s > 1e-300 ? 1.0 / sqrt(s) : 0.0;
            for (long k = 0; k < n; k++)
                a[k] *= s;
        }
}

/* Eigenvalues (descending) and eigenvectors (columns of vec, n x n,
 * row-major) of the symmetric a (destroyed), by cyclic Jacobi rotations. */
static void jacobi_eigen(double *a, int n, double *val, double *vec)
{
    for (int i = 0; i < n; i++)
        for (int j = 0; j < n; j++)
            vec[i * n + j] = i == j;
    for (int sweep = 0; sweep < 60; sweep++) {
        double off = 0.0, diag = 0.0;
        for (int i = 0; i < n; i++) {
            diag += a[i * n + i] * a[i * n + i];
            for (int j = i + 1; j < n; j++)
                off += a[i * n + j] * a[i * n + j];
        }
        if (off <= 1e-30 * diag || off == 0.0)
            break;
        for (int p = 0; p < n; p++)
            for (int q = p + 1; q < n; q++) {
                const double apq = a[p * n + q];
                if (fabs(apq) < 1e-300)
                    continue;
                const double theta = (a[q * n + q] - a[p * n + p]) / (2.0 * apq);
                const double t = (theta >= 0 ? 1.0 : -1.0) / (fabs(theta) + sqrt(theta * theta + 1.0));
                const double c = 1.0 / sqrt(t * t + 1.0), s = t * c;
                for (int k = 0; k < n; k++) { /* columns p, q */
                    const double akp = a[k * n + p], akq = a[k * n + q];
                    a[k * n + p] = c * akp - s * akq;
                    a[k * n + q] = s * akp + c * akq;
                }
                for (int k = 0; k < n; k++) { /* rows p, q */
                    const double apk = a[p * n + k], aqk = a[q * n + k];
                    a[p * n + k] = c * apk - s * aqk;
                    a[q * n + k] = s * apk + c * aqk;
                }
                for (int k = 0; k < n; k++) {
                    const double vkp = vec[k * n + p], vkq = vec[k * n + q];
                    vec[k * n + p] = c * vkp - s * vkq;
                    vec[k * n + q] = s * vkp + c * vkq;
                }
            }
    }
    for (int i = 0; i < n; i++)
        val[i] = a[i * n + i];
    /* descending, the vectors with them (n is small: selection sort) */
    for (int i = 0; i < n; i++) {
        int b = i;
        for (int j = i + 1; j < n; j++)
            if (val[j] > val[b])
                b = j;
        if (b == i)
            continue;
        double t = val[i];
        val[i] = val[b];
        val[b] = t;
        for (int k = 0; k < n; k++) {
            t = vec[k * n + i];
            vec[k * n + i] = vec[k * n + b];
            vec[k * n + b] = t;
        }
    }
}

/* y[t][i] = sum_k w[i][k] x[t][k]: the plain loops, for callers without a
 * faster product */
static void mm_plain(void *ctx, const float *w, int rows, int cols, const float *x, float *y,
                     int n)
{
    (void)ctx;
    for (int t = 0; t < n; t++)
        for (int i = 0; i < rows; i++) {
            const float *a = w + (size_t)i * cols, *b = x + (size_t)t * cols;
            float s = 0.0f;
            for (int k = 0; k < cols; k++)
                s += a[k] * b[k];
            y[(size_t)t * rows + i] = s;
        }
}

static void transpose(const float *a, int rows, int cols, float *ret)
{
    for (int i = 0; i < rows; i++)
        for (int j = 0; j < cols; j++)
            ret[(size_t)j * rows + i] = a[(size_t)i * cols + j];
}

/* a [rows][cols] (float) -> q vectors of rows (double) orthonormalized */
static void orth_cols(const float *a, int rows, int cols, double *v, float *ret)
{
    for (int j = 0; j < cols; j++)
        for (int i = 0; i < rows; i++)
            v[(size_t)j * rows + i] = a[(size_t)i * cols + j];
    orthonormalize(v, cols, rows);
    for (size_t i = 0; i < (size_t)rows * cols; i++)
        ret[i] = (float)v[i];
}

/* q as eng__linfit clamps it */
static int dirs(int T, int D, int q)
{
    return q > D ? (D < T ? D : T) : q > T ? T : q;
}

size_t eng__linfit_scratch(int T, int E, int D, int r, int q)
{
    q = dirs(T, D, q);
    const size_t W = (size_t)(T > D ? T : D);
    return sizeof(double) * ((size_t)q * W + (size_t)T * T + (size_t)T * q + 2 * (size_t)q * q +
                             q + E + D) +
           sizeof(float) * (2 * (size_t)T * E + 2 * (size_t)T * D + (size_t)q * D + (size_t)q * W +
                            (size_t)q * T + (size_t)T * T + (size_t)r * T);
}

int eng__linfit(const float *x, const float *y, int T, int E, int D, int r, int q, double ridge,
                eng_linfit_mm mm, void *ctx, void *scratch, float *ret_p, float *ret_v,
                float *ret_bias)
{
    if (T < 2 || E < 1 || D < 1 || r < 1 || r > ENG_LINFIT_MAX_RANK || q < 1 || !(ridge > 0.0) ||
        !scratch)
        return -EINVAL;
    if (!mm)
        mm = mm_plain;
    q = dirs(T, D, q); /* r may exceed it: the columns past q stay zero */
    /* every buffer carved from the caller's scratch (eng__linfit_scratch):
     * a fit per layer and request, and fresh allocations of this size
     * cost more in page faults than the arithmetic */
    const int W = T > D ? T : D; /* the longer vectors' length */
    double *v = scratch, *k = v + (size_t)q * W, *c = k + (size_t)T * T, *s = c + (size_t)T * q;
    double *ev = s + (size_t)q * q, *val = ev + (size_t)q * q, *mx = val + q, *my = mx + E;
    float *xc = (float *)(my + D), *yc = xc + (size_t)T * E, *xt = yc + (size_t)T * D;
    float *yt = xt + (size_t)T * E, *u = yt + (size_t)T * D, *zf = u + (size_t)q * D;
    float *zt = zf + (size_t)q * W, *kf = zt + (size_t)q * T, *crt = kf + (size_t)T * T;
    memset(mx, 0, (size_t)E * sizeof(double));
    memset(my, 0, (size_t)D * sizeof(double));

    /* centred rows: the fit's intercept is the means' part */
    for (int t = 0; t < T; t++) {
        for (int e = 0; e < E; e++)
            mx[e] += x[(size_t)t * E + e];
        for (int d = 0; d < D; d++)
            my[d] += y[(size_t)t * D + d];
    }
    for (int e = 0; e < E; e++)
        mx[e] /= T;
    for (int d = 0; d < D; d++)
        my[d] /= T;
    for (int t = 0; t < T; t++) {
        for (int e = 0; e < E; e++)
            xc[(size_t)t * E + e] = (float)(x[(size_t)t * E + e] - mx[e]);
        for (int d = 0; d < D; d++)
            yc[(size_t)t * D + d] = (float)(y[(size_t)t * D + d] - my[d]);
    }
    transpose(xc, T, E, xt);
    transpose(yc, T, D, yt);

    /* U: q directions spanning most of Yc's rows (a range finder from a
     * fixed pseudo-random start, xorshift: the same request fits the same
     * map, then two power iterations). The regression below targets Yc U
     * only: the rank r cut keeps directions of Yc's fit, which lie in its
     * leading ones when q is a few times r. */
    uint64_t seed = 0x9E3779B97F4A7C15ull;
    for (size_t i = 0; i < (size_t)q * D; i++) {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        u[i] = (float)((double)(seed >> 11) * (1.0 / 9007199254740992.0) - 0.5);
    }
    for (int it = 0; it < 2; it++) {
        mm(ctx, u, q, D, yc, zf, T);  /* Z = Yc U [T][q] */
        orth_cols(zf, T, q, v, zt);   /* q vectors of T */
        mm(ctx, zt, q, T, yt, zf, D); /* Yc^T Z [D][q] */
        orth_cols(zf, D, q, v, u);
    }

    /* Yq = Yc U, the targets; K = Xc Xc^T + lambda I, lambda = ridge x the
     * mean of K's diagonal */
    mm(ctx, u, q, D, yc, zf, T);
    mm(ctx, xc, T, E, xc, kf, T);
    double tr = 0.0;
    for (int i = 0; i < T; i++)
        tr += kf[(size_t)i * T + i];
    const double lambda = ridge * (tr > 0.0 ? tr / T : 1.0);
    for (int i = 0; i < T; i++)
        for (int j = 0; j < T; j++) /* symmetric up to the product's rounding */
            k[(size_t)i * T + j] = 0.5 * ((double)kf[(size_t)i * T + j] + kf[(size_t)j * T + i]);
    for (int i = 0; i < T; i++)
        k[(size_t)i * T + i] += lambda;
    for (size_t i = 0; i < (size_t)T * q; i++)
        c[i] = zf[i];

    /* Cholesky, lower triangle in place (K + lambda I is positive definite) */
    for (int j = 0; j < T; j++) {
        const double *kj = k + (size_t)j * T;
        const double d = kj[j] - dot(kj, kj, j);
        if (!(d > 0.0))
            return -EDOM;
        const double l = sqrt(d);
        k[(size_t)j * T + j] = l;
        for (int i = j + 1; i < T; i++) {
            double *ki = k + (size_t)i * T;
            ki[j] = (ki[j] - dot(ki, kj, j)) / l;
        }
    }
    /* C = (L L^T)^-1 Yq */
    for (int i = 0; i < T; i++) {
        double *ci = c + (size_t)i * q;
        for (int p = 0; p < i; p++) {
            const double l = k[(size_t)i * T + p];
            for (int j = 0; j < q; j++)
                ci[j] -= l * c[(size_t)p * q + j];
        }
        for (int j = 0; j < q; j++)
            ci[j] /= k[(size_t)i * T + i];
    }
    for (int i = T - 1; i >= 0; i--) {
        double *ci = c + (size_t)i * q;
        for (int p = i + 1; p < T; p++) {
            const double l = k[(size_t)p * T + i];
            for (int j = 0; j < q; j++)
                ci[j] -= l * c[(size_t)p * q + j];
        }
        for (int j = 0; j < q; j++)
            ci[j] /= k[(size_t)i * T + i];
    }

    /* the fitted values Xc W = K C = Yq - lambda C; their leading right
     * singular vectors R (eigenvectors of F^T F, q x q) */
    for (int i = 0; i < q; i++)
        for (int j = 0; j <= i; j++) {
            double d = 0.0;
            for (int t = 0; t < T; t++)
                d += (zf[(size_t)t * q + i] - lambda * c[(size_t)t * q + i]) *
                     (zf[(size_t)t * q + j] - lambda * c[(size_t)t * q + j]);
            s[i * q + j] = s[j * q + i] = d;
        }
    jacobi_eigen(s, q, val, ev);
    int rank = 0;
    while (rank < r && rank < q && val[0] > 0.0 && val[rank] > 1e-12 * val[0])
        rank++;

    /* V = U R: D x r; P = Xc^T (C R): E x r; columns past the rank zero */
    for (int d = 0; d < D; d++)
        for (int i = 0; i < r; i++) {
            double a = 0.0;
            for (int j = 0; i < rank && j < q; j++)
                a += (double)u[(size_t)j * D + d] * ev[j * q + i];
            ret_v[(size_t)d * r + i] = (float)a;
        }
    for (int i = 0; i < r; i++)
        for (int t = 0; t < T; t++) {
            double a = 0.0;
            for (int j = 0; i < rank && j < q; j++)
                a += c[(size_t)t * q + j] * ev[j * q + i];
            crt[(size_t)i * T + t] = (float)a;
        }
    mm(ctx, crt, r, T, xt, ret_p, E); /* [E][r] */

    /* bias = my - mx P V^T */
    double zm[ENG_LINFIT_MAX_RANK];
    for (int i = 0; i < r; i++) {
        double a = 0.0;
        for (int e = 0; e < E; e++)
            a += mx[e] * ret_p[(size_t)e * r + i];
        zm[i] = a;
    }
    for (int d = 0; d < D; d++) {
        double a = my[d];
        for (int i = 0; i < r; i++)
            a -= zm[i] * ret_v[(size_t)d * r + i];
        ret_bias[d] = (float)a;
    }
    return rank;
}
