/* eng__linfit (ENG_COMP_LINEAR's fit) against a reference computed here in
 * double by other means: the primal ridge solution W (an E x E system by
 * Gaussian elimination) and its fitted values F = Xc W.
 *   - with every direction of y kept (q = D), V's columns are orthonormal
 *     eigenvectors of F^T F, in descending order, the first the one power
 *     iteration finds; P = W V; bias = my - mx W V V^T;
 *   - with fewer tokens than inputs (the dual system is the smaller one)
 *     the same holds;
 *   - where y is an exact rank-3 map of x, q = 8 < D gives the q = D
 *     predictions;
 *   - bad sizes give -EINVAL, NaN data -EDOM.
 */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "linfit.h"
#include "test-util.h"

static int failures;

#define EXPECT(cond, ...)                                                        \
    do {                                                                         \
        if (!(cond)) {                                                           \
            fprintf(stderr, "%s:%d: ", __FILE__, __LINE__);                      \
            fprintf(stderr, __VA_ARGS__);                                        \
            fputc('\n', stderr);                                                 \
            failures++;                                                          \
        }                                                                        \
    } while (0)

static double rnd(unsigned *st)
{
    *st = *st * 1664525u + 1013904223u;
    return (double)((*st >> 8) & 0xffff) / 32768.0 - 1.0;
}

/* solves a x = b in place (a n x n, b n x m; partial pivoting) */
static void solve(double *a, double *b, int n, int m)
{
    for (int c = 0; c < n; c++) {
        int piv = c;
        for (int i = c + 1; i < n; i++)
            if (fabs(a[i * n + c]) > fabs(a[piv * n + c]))
                piv = i;
        for (int j = 0; j < n; j++) {
            double t = a[c * n + j];
            a[c * n + j] = a[piv * n + j];
            a[piv * n + j] = t;
        }
        for (int j = 0; j < m; j++) {
            double t = b[c * m + j];
            b[c * m + j] = b[piv * m + j];
            b[piv * m + j] = t;
        }
        for (int i = 0; i < n; i++) {
            if (i == c)
                continue;
            const double f = a[i * n + c] / a[c * n + c];
            for (int j = 0; j < n; j++)
                a[i * n + j] -= f * a[c * n + j];
            for (int j = 0; j < m; j++)
                b[i * m + j] -= f * b[c * m + j];
        }
    }
    for (int i = 0; i < n; i++)
        for (int j = 0; j < m; j++)
            b[i * m + j] /= a[i * n + i];
}

typedef struct fit {
    float *p, *v, *bias;
    int rank;
} fit;

static fit run(const float *x, const float *y, int T, int E, int D, int r, int q, double ridge)
{
    fit f = { malloc(sizeof(float) * E * r), malloc(sizeof(float) * D * r),
              malloc(sizeof(float) * D), 0 };
    void *scratch = malloc(eng__linfit_scratch(T, E, D, r, q));
    CHECK(f.p && f.v && f.bias && scratch);
    f.rank = eng__linfit(x, y, T, E, D, r, q, ridge, NULL, NULL, scratch, f.p, f.v, f.bias);
    free(scratch);
    return f;
}

static void fit_free(fit *f)
{
    free(f->p);
    free(f->v);
    free(f->bias);
}

/* The checks of the header against the double reference; returns the
 * largest relative error seen. */
static double check_exact(const float *x, const float *y, int T, int E, int D, int r,
                          double ridge, const char *what)
{
    fit f = run(x, y, T, E, D, r, D, ridge);
    CHECK(f.rank == r);
    double *mx = calloc(E, sizeof(double)), *my = calloc(D, sizeof(double));
    double *a = calloc((size_t)E * E, sizeof(double)), *w = calloc((size_t)E * D, sizeof(double));
    double *fv = calloc((size_t)T * D, sizeof(double)), *s = calloc((size_t)D * D, sizeof(double));
    CHECK(mx && my && a && w && fv && s);
    for (int t = 0; t < T; t++) {
        for (int e = 0; e < E; e++)
            mx[e] += x[t * E + e] / (double)T;
        for (int d = 0; d < D; d++)
            my[d] += y[t * D + d] / (double)T;
    }
    /* (Xc^T Xc + lambda I) W = Xc^T Yc, lambda = ridge tr(Xc^T Xc) / T */
    double tr = 0.0;
    for (int t = 0; t < T; t++)
        for (int i = 0; i < E; i++) {
            const double xi = x[t * E + i] - mx[i];
            tr += xi * xi;
            for (int j = 0; j < E; j++)
                a[i * E + j] += xi * (x[t * E + j] - mx[j]);
            for (int d = 0; d < D; d++)
                w[i * D + d] += xi * (y[t * D + d] - my[d]);
        }
    for (int i = 0; i < E; i++)
        a[i * E + i] += ridge * tr / T;
    solve(a, w, E, D);
    for (int t = 0; t < T; t++)
        for (int d = 0; d < D; d++)
            for (int e = 0; e < E; e++)
                fv[t * D + d] += (x[t * E + e] - mx[e]) * w[e * D + d];
    for (int i = 0; i < D; i++)
        for (int j = 0; j < D; j++)
            for (int t = 0; t < T; t++)
                s[i * D + j] += fv[t * D + i] * fv[t * D + j];

    double worst = 0.0, snorm = 0.0;
    for (int i = 0; i < D * D; i++)
        snorm = fmax(snorm, fabs(s[i]));
    double prev = INFINITY;
    for (int i = 0; i < r; i++) {
        /* unit length, orthogonal to the others */
        for (int j = 0; j <= i; j++) {
            double d = 0.0;
            for (int k = 0; k < D; k++)
                d += (double)f.v[k * r + i] * f.v[k * r + j];
            const double err = fabs(d - (i == j));
            worst = fmax(worst, err);
            EXPECT(err < 1e-4, "%s: V columns %d, %d: dot %.6f", what, i, j, d);
        }
        /* an eigenvector of F^T F, eigenvalues descending */
        double lam = 0.0, res = 0.0;
        for (int k = 0; k < D; k++) {
            double sv = 0.0;
            for (int j = 0; j < D; j++)
                sv += s[k * D + j] * f.v[j * r + i];
            lam += f.v[k * r + i] * sv;
        }
        for (int k = 0; k < D; k++) {
            double sv = 0.0;
            for (int j = 0; j < D; j++)
                sv += s[k * D + j] * f.v[j * r + i];
            res = fmax(res, fabs(sv - lam * f.v[k * r + i]));
        }
        worst = fmax(worst, res / snorm);
        EXPECT(res < 1e-3 * snorm, "%s: V column %d: |S v - lam v| %.3g of |S| %.3g", what, i,
               res, snorm);
        EXPECT(lam <= prev * (1 + 1e-5), "%s: eigenvalue %d (%.6g) above the one before (%.6g)",
               what, i, lam, prev);
        prev = lam;
        if (i == 0) {
            /* the largest: power iteration from another start */
            double *u = malloc(sizeof(double) * D), *nu = malloc(sizeof(double) * D), top = 0.0;
            CHECK(u && nu);
            for (int k = 0; k < D; k++)
                u[k] = 1.0 + 0.01 * k;
            for (int it = 0; it < 2000; it++) {
                double n2 = 0.0;
                for (int k = 0; k < D; k++) {
                    nu[k] = 0.0;
                    for (int j = 0; j < D; j++)
                        nu[k] += s[k * D + j] * u[j];
                    n2 += nu[k] * nu[k];
                }
                top = sqrt(n2);
                for (int k = 0; k < D; k++)
                    u[k] = nu[k] / top;
            }
            EXPECT(fabs(lam - top) < 1e-4 * top, "%s: top eigenvalue %.8g, power iteration %.8g",
                   what, lam, top);
            free(u);
            free(nu);
        }
    }
    /* P = W V, bias = my - mx W V V^T */
    double pmax = 0.0, perr = 0.0;
    for (int e = 0; e < E; e++)
        for (int i = 0; i < r; i++) {
            double pv = 0.0;
            for (int d = 0; d < D; d++)
                pv += w[e * D + d] * f.v[d * r + i];
            pmax = fmax(pmax, fabs(pv));
            perr = fmax(perr, fabs(pv - f.p[e * r + i]));
        }
    worst = fmax(worst, perr / pmax);
    EXPECT(perr < 1e-3 * pmax, "%s: P differs from W V by %.3g (of %.3g)", what, perr, pmax);
    for (int d = 0; d < D; d++) {
        double b = my[d];
        for (int i = 0; i < r; i++) {
            double z = 0.0;
            for (int e = 0; e < E; e++)
                z += mx[e] * f.p[e * r + i];
            b -= z * f.v[d * r + i];
        }
        EXPECT(fabs(b - f.bias[d]) < 1e-4 * (1 + fabs(b)), "%s: bias %d %.6f, expected %.6f", what,
               d, f.bias[d], b);
    }
    printf("%-28s rank %d, worst relative error %.2e\n", what, f.rank, worst);
    free(mx);
    free(my);
    free(a);
    free(w);
    free(fv);
    free(s);
    fit_free(&f);
    return worst;
}

int main(void)
{
    unsigned st = 7;
    enum { TM = 80, EM = 24, DM = 20 };
    float *x = malloc(sizeof(float) * TM * EM), *y = malloc(sizeof(float) * TM * DM);
    float *a = malloc(sizeof(float) * EM * DM);
    CHECK(x && y && a);

    /* y = x A + 0.5 + noise: a full-rank map, so every rank cut matters */
    for (int i = 0; i < EM * DM; i++)
        a[i] = (float)rnd(&st);
    for (int t = 0; t < TM; t++)
        for (int e = 0; e < EM; e++)
            x[t * EM + e] = (float)(rnd(&st) + 0.3);
    for (int t = 0; t < TM; t++)
        for (int d = 0; d < DM; d++) {
            double v = 0.5 + 0.1 * rnd(&st);
            for (int e = 0; e < EM; e++)
                v += x[t * EM + e] * a[e * DM + d];
            y[t * DM + d] = (float)v;
        }
    check_exact(x, y, TM, EM, DM, 5, 0.05, "more tokens than inputs");
    check_exact(x, y, 16, EM, DM, 4, 0.1, "fewer tokens than inputs");

    /* exact rank 3: the q leading directions of y hold the whole map */
    float *b = malloc(sizeof(float) * EM * 3), *c = malloc(sizeof(float) * 3 * DM);
    CHECK(b && c);
    for (int i = 0; i < EM * 3; i++)
        b[i] = (float)rnd(&st);
    for (int i = 0; i < 3 * DM; i++)
        c[i] = (float)rnd(&st);
    for (int t = 0; t < TM; t++)
        for (int d = 0; d < DM; d++) {
            double v = 0.0;
            for (int k = 0; k < 3; k++) {
                double z = 0.0;
                for (int e = 0; e < EM; e++)
                    z += x[t * EM + e] * b[e * 3 + k];
                v += z * c[k * DM + d];
            }
            y[t * DM + d] = (float)v;
        }
    fit full = run(x, y, TM, EM, DM, 3, DM, 1e-3), cut = run(x, y, TM, EM, DM, 3, 8, 1e-3);
    CHECK(full.rank == 3 && cut.rank == 3);
    double err = 0.0, mag = 0.0;
    for (int t = 0; t < TM; t++)
        for (int d = 0; d < DM; d++) {
            double pf = full.bias[d], pc = cut.bias[d];
            for (int i = 0; i < 3; i++) {
                double zf = 0.0, zc = 0.0;
                for (int e = 0; e < EM; e++) {
                    zf += x[t * EM + e] * full.p[e * 3 + i];
                    zc += x[t * EM + e] * cut.p[e * 3 + i];
                }
                pf += zf * full.v[d * 3 + i];
                pc += zc * cut.v[d * 3 + i];
            }
            err = fmax(err, fabs(pf - pc));
            mag = fmax(mag, fabs(y[t * DM + d]));
            /* and the fit nearly reproduces y (ridge 1e-3 shrinks it a little) */
            EXPECT(fabs(pf - y[t * DM + d]) < 0.02 * (1 + fabs(y[t * DM + d])),
                   "rank-3 map: row %d col %d predicted %.4f, y %.4f", t, d, pf, y[t * DM + d]);
        }
    printf("%-28s q 8 against q %d: %.2e of %.2e\n", "exact rank 3", DM, err, mag);
    EXPECT(err < 1e-3 * mag, "q = 8 predicts %.3g away from q = D", err);
    fit_free(&full);
    fit_free(&cut);

    /* refusals */
    float p[EM * 4], v[DM * 4], bias[DM];
    void *scratch = malloc(eng__linfit_scratch(TM, EM, DM, 4, 8));
    CHECK(scratch);
    CHECK(eng__linfit(x, y, 1, EM, DM, 4, 8, 0.1, NULL, NULL, scratch, p, v, bias) == -EINVAL);
    CHECK(eng__linfit(x, y, TM, EM, DM, 0, 8, 0.1, NULL, NULL, scratch, p, v, bias) == -EINVAL);
    CHECK(eng__linfit(x, y, TM, EM, DM, ENG_LINFIT_MAX_RANK + 1, 8, 0.1, NULL, NULL, scratch, p,
                      v, bias) == -EINVAL);
    CHECK(eng__linfit(x, y, TM, EM, DM, 4, 8, 0.0, NULL, NULL, scratch, p, v, bias) == -EINVAL);
    CHECK(eng__linfit(x, y, TM, EM, DM, 4, 8, 0.1, NULL, NULL, NULL, p, v, bias) == -EINVAL);
    x[5] = NAN;
    CHECK(eng__linfit(x, y, TM, EM, DM, 4, 8, 0.1, NULL, NULL, scratch, p, v, bias) == -EDOM);
    free(scratch);
    free(x);
    free(y);
    free(a);
    free(b);
    free(c);
    if (failures)
        fprintf(stderr, "%d failures\n", failures);
    return failures ? 1 : 0;
}
