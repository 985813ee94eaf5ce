/* ENG_COMP_MEAN on a hand-built layer (no model file): the bias decode adds
 * for the loaded neurons it does not compute is exactly
 * sum_j mean_{t >= 1} a_j(t) * d_j over those neurons, position 0 is left
 * out, so when the dropped neurons' activation is the same at every token
 * the sparse FFN output plus the bias reproduces the full one; computed
 * neurons, unsparsified layers and ENG_COMP_NONE get no bias. And the
 * per-layer split of ENG_BUDGET_SENS (eng__split_drops).
 */
#include <errno.h>
#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "model.h"
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
    cp.comp = (eng_comp)(ENG_COMP_MEAN + 1);
    CHECK(eng_session_set_compute(s, &cp) == -EINVAL);
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
        eng__select_observe(s, l, &act[0][0], T, NULL, F);
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
        eng__select_observe(s, l, &act[0][0], T, NULL, F);
    s->n_past = T;
    eng__select_end_eval(s);
    CHECK(s->selected && s->ffn_bias[0] == NULL && s->ffn_bias[1] == NULL);

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
