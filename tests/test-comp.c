/* ENG_COMP_MEAN and ENG_COMP_LINEAR on a hand-built layer (no model file):
 * the bias decode adds
 * for the loaded neurons it does not compute is exactly
 * sum_j mean_{t >= 1} a_j(t) * d_j over those neurons, position 0 is left
 * out, so when the dropped neurons' activation is the same at every token
 * the sparse FFN output plus the bias reproduces the full one; computed
 * neurons, unsparsified layers and ENG_COMP_NONE get no bias. The linear
 * map is the one eng__linfit fits to the dropped slots' contributions at
 * the prompt's positions but the first. And the per-layer split of
 * ENG_BUDGET_SENS (eng__split_drops).
 */
#include <errno.h>
#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "linfit.h"
#include "model.h"
#include "quants.h"
#include "select.h"
#include "test-util.h"

enum { E = 8, F = 20, NLAYER = 2, T = 5 };

/* deterministic values in [-1, 1) */
static float rnd(unsigned *st)
{
    *st = *st * 1664525u + 1013904223u;
    return (float)((*st >> 8) & 0xffff) / 32768.0f - 1.0f;
}

int main(void)
{
    unsigned st = 12345;
    eng_model *m = calloc(1, sizeof(*m));
    CHECK(m);
    m->info.n_layer = NLAYER;
    m->info.n_ff = F;
    m->info.n_embd = E;
    m->plan.gamma = 1.0f;
    m->plan.delta = 0.2f;
    m->plan.neurons_loaded = m->plan.neurons_total = (uint64_t)NLAYER * F;
    CHECK(eng_backend_cpu_new(1, &m->be) == 0); /* session buffers are backend memory */
    m->layers = calloc(NLAYER, sizeof(*m->layers));
    float *down = malloc(sizeof(float) * NLAYER * F * E);
    int32_t *ids = malloc(sizeof(int32_t) * NLAYER * F);
    uint8_t *stat = calloc(NLAYER * F, 1);
    CHECK(m->layers && down && ids && stat);
    for (int i = 0; i < NLAYER * F * E; i++)
        down[i] = rnd(&st);
    for (int l = 0; l < NLAYER; l++) {
        eng_layer *L = &m->layers[l];
        L->ffn = (eng_ffn_weights){ .dtype = ENG_DTYPE_F32, .n_embd = E, .n_slots = F,
                                    .down = down + (size_t)l * F * E };
        L->neuron_of_slot = ids + l * F;
        L->slot_static = stat + l * F;
        for (int j = 0; j < F; j++)
            L->neuron_of_slot[j] = j;
        /* 4 static slots (0.2 * F) */
        for (int j = 0; j < 4; j++)
            L->slot_static[j] = 1;
        L->n_static = 4;
        L->sparse = l == 1; /* layer 0 stays dense */
        L->slot_cap = F;
    }

    eng_session *s = calloc(1, sizeof(*s));
    CHECK(s);
    s->model = m;
    s->n_batch = T;
    s->ffn_sel = calloc(NLAYER, sizeof(*s->ffn_sel)); /* eng_session_new's part */
    s->ffn_n_sel = calloc(NLAYER, sizeof(*s->ffn_n_sel));
    CHECK(s->ffn_sel && s->ffn_n_sel);
    CHECK(eng__select_session_init(s) == 0);
    eng_compute_params cp = eng_compute_params_default();
    cp.phi = 0.5f;   /* 10 of 20 slots: 4 static + 6 dynamic */
    cp.alpha = 0.3f; /* 6 votes per token: slots 4..9 at every token but the first */
    cp.comp = ENG_COMP_MEAN;
    CHECK(eng_session_set_compute(s, &cp) == 0);
    cp.comp = (eng_comp)(ENG_COMP_LINEAR + 1);
    CHECK(eng_session_set_compute(s, &cp) == -EINVAL);
    /* the names tools and the daemon take */
    for (int c = ENG_COMP_NONE; c <= ENG_COMP_LINEAR; c++) {
        eng_comp back = (eng_comp)-1;
        CHECK(eng_comp_parse(eng_comp_name((eng_comp)c), &back) == 0 && back == (eng_comp)c);
    }
    CHECK(strcmp(eng_comp_name(ENG_COMP_LINEAR), "linear") == 0);
    CHECK(strcmp(eng_comp_name((eng_comp)(ENG_COMP_LINEAR + 1)), "unknown") == 0);
    eng_comp bad = ENG_COMP_MEAN;
    CHECK(eng_comp_parse("median", &bad) == -EINVAL && bad == ENG_COMP_MEAN);
    cp.comp = ENG_COMP_MEAN;
    CHECK(eng_session_set_compute(s, &cp) == 0);

    /* prefill activations [T][F]: slots 0..3 (static) and 4..9 vary, 4..9
     * are the largest (they win the top-alpha votes); slots 10..19 hold a
     * small constant c_j at every token but position 0, where they hold huge
     * outliers that must not enter the mean */
    float act[T][F], c[F];
    for (int j = 0; j < F; j++)
        c[j] = j >= 10 ? 0.01f * (float)(j - 14) : 0.0f;
    for (int t = 0; t < T; t++)
        for (int j = 0; j < F; j++)
            act[t][j] = j < 4    ? (2.0f + 0.5f * rnd(&st)) * (j % 2 ? 1.0f : -1.0f)
                        : j < 10 ? (10.0f + rnd(&st)) * (j % 2 ? 1.0f : -1.0f)
                        : t == 0 ? 1e6f * (float)(j - 9) : c[j];
    /* as the forward pass does: prefill of T tokens at position 0 */
    CHECK(eng__select_wants_act(s));
    for (int l = 0; l < NLAYER; l++)
        eng__select_observe(s, l, &act[0][0], T, NULL, F, NULL);
    s->n_past = T;
    eng__select_end_eval(s);
    CHECK(s->selected);

    /* layer 0 is not sparsified: all computed, no bias */
    CHECK(s->ffn_sel[0] == NULL && s->ffn_bias[0] == NULL);
    /* layer 1 computes slots 0..9 and compensates for 10..19 */
    CHECK(s->ffn_n_sel[1] == 10);
    for (int k = 0; k < 10; k++)
        CHECK(s->ffn_sel[1][k] == k);
    const float *b = s->ffn_bias[1];
    CHECK(b);

    /* a decode token whose computed neurons take fresh values and whose
     * dropped ones keep their constant: full output == sparse + bias */
    const float *d = m->layers[1].ffn.down;
    float a[F];
    for (int j = 0; j < F; j++)
        a[j] = j < 10 ? 3.0f * rnd(&st) : c[j];
    for (int e = 0; e < E; e++) {
        double full = 0, sparse = 0, want_b = 0;
        for (int j = 0; j < F; j++) {
            full += (double)a[j] * d[j * E + e];
            if (j < 10)
                sparse += (double)a[j] * d[j * E + e];
            else
                want_b += (double)c[j] * d[j * E + e];
        }
        CHECKF(fabs(b[e] - want_b) < 1e-6, "bias[%d] %g, want %g", e, b[e], want_b);
        CHECKF(fabs(sparse + b[e] - full) < 1e-5, "dim %d: sparse + bias %g, full %g", e,
               sparse + b[e], full);
    }

    /* a new request starts without bias (prefill computes everything) */
    eng__select_session_reset(s);
    CHECK(s->ffn_bias[0] == NULL && s->ffn_bias[1] == NULL && !s->selected);

    /* without compensation nothing is added */
    cp.comp = ENG_COMP_NONE;
    CHECK(eng_session_set_compute(s, &cp) == 0);
    s->n_past = 0;
    for (int l = 0; l < NLAYER; l++)
        eng__select_observe(s, l, &act[0][0], T, NULL, F, NULL);
    s->n_past = T;
    eng__select_end_eval(s);
    CHECK(s->selected && s->ffn_bias[0] == NULL && s->ffn_bias[1] == NULL);

    /* ENG_COMP_LINEAR: the session fits, on the prompt's positions but
     * the first, what the dropped slots add as a map of the FFN's input,
     * and decode adds it. Checked against eng__linfit (test-linfit) called
     * here on rows and targets computed here; the prompt comes in chunks
     * of n_batch as a long prefill does; the dropped slots' activations
     * are a linear function of x, with an outlier at position 0. */
    {
        enum { TL = 72, R = 16 }; /* 71 rows: at least LIN_MIN_ROWS (64) */
        cp.comp = ENG_COMP_LINEAR;
        cp.phi = 0.8f; /* 16 slots, less the map's bytes: 2 x 8 x 16 f16 = 512, 6 slots of 96 */
        cp.copy_dynamic = false; /* the layer has no gate and up rows to copy */
        CHECK(eng_session_set_compute(s, &cp) == 0);
        float xr[TL][E], al[TL][F], w[F][E], c0[F];
        for (int j = 0; j < F; j++) {
            c0[j] = 0.1f * rnd(&st);
            for (int e = 0; e < E; e++)
                w[j][e] = rnd(&st);
        }
        for (int t = 0; t < TL; t++) {
            for (int e = 0; e < E; e++)
                xr[t][e] = rnd(&st) + 0.2f;
            for (int j = 0; j < F; j++) {
                float lin = c0[j];
                for (int e = 0; e < E; e++)
                    lin += w[j][e] * xr[t][e];
                al[t][j] = j < 4    ? (2.0f + 0.5f * rnd(&st)) * (j % 2 ? 1.0f : -1.0f)
                           : j < 10 ? (10.0f + rnd(&st)) * (j % 2 ? 1.0f : -1.0f)
                           : t == 0 ? 1e6f * (float)(j - 9) : lin;
            }
        }
        s->n_past = 0;
        for (int t0 = 0; t0 < TL; t0 += T) {
            const int n = TL - t0 < T ? TL - t0 : T;
            for (int l = 0; l < NLAYER; l++)
                eng__select_observe(s, l, &al[t0][0], n, NULL, F, &xr[t0][0]);
            s->n_past = t0 + n;
        }
        eng__select_end_eval(s);
        CHECK(s->selected && s->ffn_sel[0] == NULL && s->ffn_bias[0] == NULL);
        CHECKF(s->ffn_n_sel[1] == 10, "%d slots computed", s->ffn_n_sel[1]);
        for (int k = 0; k < 10; k++)
            CHECK(s->ffn_sel[1][k] == k);
        /* the map's bytes count as the 6 slots they displace */
        CHECKF(fabs(eng_session_ffn_share(s) - (20 + 16) / 40.0) < 1e-9, "share %.4f",
               eng_session_ffn_share(s));

        float y[TL - 1][E], p[E * R], v[E * R], bias[E];
        for (int t = 1; t < TL; t++)
            for (int e = 0; e < E; e++) {
                double acc = 0.0;
                for (int j = 10; j < F; j++) /* the session keeps them in f16 */
                    acc += (double)eng_f16_to_f32(eng_f32_to_f16(al[t][j])) * d[j * E + e];
                y[t - 1][e] = (float)acc;
            }
        void *scratch = malloc(eng__linfit_scratch(TL - 1, E, E, R, 32));
        CHECK(scratch);
        CHECK(eng__linfit(&xr[1][0], &y[0][0], TL - 1, E, E, R, 32, 0.1, NULL, NULL, scratch, p, v,
                          bias) > 0);
        free(scratch);
        const float *bl = s->ffn_bias[1];
        CHECK(bl);
        for (int e = 0; e < E; e++)
            CHECKF(fabs(bl[e] - bias[e]) < 1e-4 * (1.0 + fabs(bias[e])), "bias[%d] %g, want %g", e,
                   bl[e], bias[e]);
        /* decode: x -> x P V^T, the maps in f16 */
        float xn[E], out[E], out0[E];
        for (int e = 0; e < E; e++) {
            xn[e] = rnd(&st) + 0.2f;
            out[e] = out0[e] = 1.0f;
        }
        eng__select_comp_apply(s, 1, xn, out, 1);
        eng__select_comp_apply(s, 0, xn, out0, 1);
        double mag = 0.0;
        for (int e = 0; e < E; e++) {
            double want = 1.0, sum = 0.0;
            for (int i = 0; i < R; i++) {
                double z = 0.0;
                for (int k = 0; k < E; k++)
                    z += (double)xn[k] * p[k * R + i];
                want += z * v[e * R + i];
                sum += fabs(z * v[e * R + i]);
            }
            mag += sum;
            CHECKF(fabs(out[e] - want) < 4e-3 * (1.0 + sum), "map[%d] %g, want %g", e, out[e], want);
            CHECK(out0[e] == 1.0f); /* layer 0 leaves nothing out */
        }
        CHECK(mag > 0.1); /* the map is not empty */
        /* a new request fits anew: nothing is added until it does */
        eng__select_session_reset(s);
        for (int e = 0; e < E; e++)
            out[e] = 1.0f;
        eng__select_comp_apply(s, 1, xn, out, 1);
        for (int e = 0; e < E; e++)
            CHECK(out[e] == 1.0f);

        /* a prompt of 30 positions is too short to fit: the mean's bias,
         * and phi's 16 slots whole (nothing charged) */
        s->n_past = 0;
        for (int t0 = 0; t0 < 30; t0 += T) {
            const int n = 30 - t0 < T ? 30 - t0 : T;
            for (int l = 0; l < NLAYER; l++)
                eng__select_observe(s, l, &al[t0][0], n, NULL, F, &xr[t0][0]);
            s->n_past = t0 + n;
        }
        eng__select_end_eval(s);
        CHECKF(s->selected && s->ffn_n_sel[1] == 16, "%d slots computed", s->ffn_n_sel[1]);
        CHECK(!s->lin[1].fitted && s->ffn_bias[1]);
        CHECKF(fabs(eng_session_ffn_share(s) - (20 + 16) / 40.0) < 1e-9, "share %.4f",
               eng_session_ffn_share(s));
        for (int e = 0; e < E; e++) {
            double want = 0.0; /* the mean over positions 1..29 of the slots left out */
            for (int j = 0, k = 0; j < F; j++) {
                if (k < 16 && s->ffn_sel[1][k] == j) {
                    k++;
                    continue;
                }
                double mean = 0.0;
                for (int t = 1; t < 30; t++)
                    mean += al[t][j] / 29.0;
                want += mean * d[j * E + e];
            }
            CHECKF(fabs(s->ffn_bias[1][e] - want) < 1e-4 * (1.0 + fabs(want)), "bias[%d] %g, want %g",
                   e, s->ffn_bias[1][e], want);
        }
    }

    /* eng__split_drops: exact totals, capped, more left out of the less
     * sensitive layers, nothing from unsparsified ones */
    {
        const float sens[6] = { 4.0f, 1.0f, 2.0f, 1.0f, 0.5f, 9.0f };
        const bool sp[6] = { true, true, true, true, true, false };
        int drop[6];
        for (long total = 0; total <= 5 * 100; total += 37) {
            eng__split_drops(sens, sp, 6, total, 100, drop);
            long sum = 0;
            for (int l = 0; l < 6; l++) {
                CHECK(drop[l] >= 0 && drop[l] <= 100);
                sum += drop[l];
            }
            CHECKF(sum == total, "split %ld into %ld", total, sum);
            CHECK(drop[5] == 0);
            CHECK(drop[4] >= drop[1] && drop[1] >= drop[2] && drop[2] >= drop[0]);
            CHECK(abs(drop[1] - drop[3]) <= 1);
        }
        eng__split_drops(sens, sp, 6, 300, 100, drop);
        /* water-filling: drop_l = min(100, c / sens_l); layer 4 would take
         * 300 / 4.75 / 0.5 = 126, so it is capped at 100 and the other 200
         * go c = 200 / 2.75: 18.2 72.7 36.4 72.7 */
        CHECKF(drop[4] == 100 && abs(drop[0] - 18) <= 1 && abs(drop[2] - 36) <= 1 &&
                   abs(drop[1] - 73) <= 1,
               "%d %d %d %d %d", drop[0], drop[1], drop[2], drop[3], drop[4]);
        eng__split_drops(sens, sp, 6, 10000, 100, drop);
        CHECK(drop[0] == 100 && drop[4] == 100 && drop[5] == 0);
    }

    eng__select_session_free(s);
    free(s->ffn_sel);
    free(s->ffn_n_sel);
    free(s);
    free(down);
    free(ids);
    free(stat);
    free(m->layers);
    m->be->iface->free(m->be);
    free(m);
    printf("ok\n");
    return 0;
}
