/* eng_session_shift: the context shift that moves the KV cache instead of
 * evaluating again. After a prefill of 40 tokens and a shift that keeps 5
 * and drops 13, read back from the cache:
 *   - the kept rows, keys and values, are the bytes they were;
 *   - each moved value row is the bytes of the row it came from;
 *   - each moved key row is its old row rotated back by 13 positions,
 *     against a rotation computed here in double from the old row (both
 *     pair conventions, llama.cpp's rope_freqs divisors);
 *   - layer 0's keys and values, which depend on the token and its
 *     position only, are what a fresh session's prefill of the shortened
 *     token list stores, up to rounding;
 * and n_past, the prompt cache's reusable positions, decode after it, and
 * the ranges refused. Synthetic models of three rope layouts (llama,
 * qwen2's neox pairs, llama 3's divisors) and SmolLM3's layers without
 * RoPE (their keys move unrotated) with an f16 cache; the default
 * model with f16 and Q8_0 caches (SI_TEST_DEFAULT_MODEL=0: not).
 *
 * Then sliding-window layers' rings (Gemma 2 and 3 on the CPU, see
 * eng_session_params.swa_full), and LFM2's convolution layers' (the rows
 * of their last 3 positions): the same evaluations, shifts and prompt
 * cache on a ring and on a full cache give the same logits, and the ring
 * holds fewer rows.
 *
 * usage: test-shift SI_SYNTH [cuda]  (cuda: the CUDA backend, exit 77
 * without a GPU; the caches are read back through the backend)
 */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "backend.h"
#include "engine.h"
#include "model.h"
#include "quants.h"
#include "test-util.h"

enum { N_TOK = 40, KEEP = 5, DROP = 13, N_CTX = 64, N_BATCH = 8 };

static bool gpu;

static eng_model *load(const char *path)
{
    eng_model_params mp = eng_model_params_default();
    mp.n_threads = 2;
    mp.backend = gpu ? ENG_BACKEND_CUDA : ENG_BACKEND_CPU;
    eng_model *m = NULL;
    eng_error err;
    int r = eng_model_load(path, &mp, &m, &err);
    if (gpu && (r == -ENODEV || r == -ENOTSUP)) {
        printf("SKIP: no usable GPU (%s)\n", err.msg);
        exit(77);
    }
    CHECKF(r == 0, "%s: %s", path, err.msg);
    return m;
}

/* si-synth's shape, loaded (its file removed). */
static eng_model *load_synth(const char *synth, const char *shape)
{
    char path[64];
    test_synth(synth, shape, path);
    eng_model *m = load(path);
    unlink(path);
    return m;
}

/* Layer l's K (or V) row: its values (its heads: gemma4's layers differ)
 * and bytes. */
static int layer_kvd(const eng_model *m, int l)
{
    return m->layers[l].n_head_kv * m->layers[l].head_dim;
}

static size_t layer_rb(const eng_session *s, int l)
{
    const size_t kvd = (size_t)layer_kvd(s->model, l);
    return s->kv_type == ENG_KV_Q8_0 ? kvd / 32 * sizeof(eng_q8_block) : kvd * sizeof(uint16_t);
}

/* Layer l's K (or V) cache rows [0, n) as f32 into f, their bytes into raw. */
static void read_rows(const eng_session *s, int l, const void *cache, int n, uint8_t *raw,
                      float *f)
{
    eng_backend *be = s->model->be;
    const size_t rb = layer_rb(s, l);
    be->iface->download(be, raw, cache, (size_t)n * rb);
    const int kvd = layer_kvd(s->model, l);
    for (int r = 0; r < n; r++) {
        const uint8_t *row = raw + (size_t)r * rb;
        float *out = f + (size_t)r * kvd;
        if (s->kv_type == ENG_KV_Q8_0) {
            const eng_q8_block *b = (const eng_q8_block *)row;
            for (int j = 0; j < kvd; j++)
                out[j] = eng_f16_to_f32(b[j / 32].d) * (float)b[j / 32].q[j % 32];
        } else {
            const uint16_t *h = (const uint16_t *)row;
            for (int j = 0; j < kvd; j++)
                out[j] = eng_f16_to_f32(h[j]);
        }
    }
}

/* x (one row of layer l's n_head_kv heads) rotated by dpos positions, in
 * double: the rotation by position of backend.h's rope, written out again
 * here */
static void rotate_ref(const eng_model *m, int l, double base, const float *factors,
                       const float *x, int dpos, double *out)
{
    const int hd = m->layers[l].head_dim, Hkv = m->layers[l].n_head_kv;
    const int n_rot = m->layers[l].n_rot < hd ? m->layers[l].n_rot : hd, half = n_rot / 2;
    for (int j = 0; j < Hkv * hd; j++)
        out[j] = x[j];
    for (int h = 0; h < Hkv; h++)
        for (int i = 0; i < half; i++) {
            double th = dpos * pow(base, -2.0 * i / n_rot);
            if (factors)
                th /= factors[i];
            const int a = h * hd + (m->rope_neox ? i : 2 * i);
            const int b = a + (m->rope_neox ? half : 1);
            out[a] = x[a] * cos(th) - x[b] * sin(th);
            out[b] = x[a] * sin(th) + x[b] * cos(th);
        }
}

static double row_amax(const float *x, int n)
{
    double a = 0;
    for (int j = 0; j < n; j++)
        a = fabs(x[j]) > a ? fabs(x[j]) : a;
    return a;
}

static void check_shift(const char *name, eng_model *m, eng_kv_type kv)
{
    eng_model_info info;
    eng_model_get_info(m, &info);
    eng_session_params sp = eng_session_params_default();
    sp.n_ctx = N_CTX;
    sp.n_batch = N_BATCH; /* the keys move in several chunks */
    sp.kv_type = kv;
    sp.swa_full = true; /* the checks read every position's row */
    eng_session *s = NULL, *f = NULL;
    int r = eng_session_new(m, &sp, &s);
    if (r == -ENOTSUP && kv == ENG_KV_Q8_0) {
        printf("%s q8_0: no Q8_0 cache on this backend, skipped\n", name);
        return;
    }
    CHECKF(r == 0, "%s: session: %d", name, r);
    CHECK(eng_session_new(m, &sp, &f) == 0);
    const char *kvn = eng_kv_type_name(kv);

    int32_t t[N_TOK], shortened[N_TOK];
    uint32_t seed = 99;
    for (int i = 0; i < N_TOK; i++) {
        seed = seed * 1664525u + 1013904223u;
        t[i] = (int32_t)((seed >> 8) % (uint32_t)info.n_vocab);
    }
    const int first = KEEP + DROP, n_left = N_TOK - DROP;
    memcpy(shortened, t, KEEP * sizeof(int32_t));
    memcpy(shortened + KEEP, t + first, (size_t)(N_TOK - first) * sizeof(int32_t));

    /* (rows of the widest layer's, a layer's at the start of each) */
    const int NL = info.n_layer;
    int kvd_max = 0;
    for (int l = 0; l < NL; l++)
        kvd_max = layer_kvd(m, l) > kvd_max ? layer_kvd(m, l) : kvd_max;
    const size_t rb_max = s->kv_row_bytes;
    uint8_t *oldk = malloc((size_t)NL * N_TOK * rb_max);
    uint8_t *oldv = malloc((size_t)NL * N_TOK * rb_max);
    uint8_t *raw = malloc(N_TOK * rb_max);
    float *ok = malloc((size_t)NL * N_TOK * kvd_max * sizeof(float));
    float *nk = malloc((size_t)N_TOK * kvd_max * sizeof(float));
    float *fk = malloc((size_t)N_TOK * kvd_max * sizeof(float));
    float *nv = malloc((size_t)N_TOK * kvd_max * sizeof(float));
    float *fv = malloc((size_t)N_TOK * kvd_max * sizeof(float));
    double *ref = malloc((size_t)kvd_max * sizeof(double));
    CHECK(oldk && oldv && raw && ok && nk && fk && nv && fv && ref);
    /* each layer's divisors as the session rotates with them: its own
     * (rope_freqs, a scaled table, none on Gemma 3's local layers), or
     * LongRoPE's long table for a context past the original one */
    int half = 0;
    for (int l = 0; l < NL; l++)
        half = m->layers[l].n_rot / 2 > half ? m->layers[l].n_rot / 2 : half;
    float *factors = calloc((size_t)NL * half, sizeof(float));
    bool *has_f = calloc((size_t)NL, sizeof(bool));
    CHECK(factors && has_f);
    for (int l = 0; l < NL; l++) {
        const float *tab = s->rope_long ? m->rope_long : m->layers[l].rope_freqs;
        if ((has_f[l] = tab != NULL))
            m->be->iface->download(m->be, factors + (size_t)l * half, tab,
                                   (size_t)m->layers[l].n_rot / 2 * sizeof(float));
    }

    CHECK(eng_session_eval(s, t, N_TOK, 0) == 0);
    CHECK(eng_session_n_cached(s) == N_TOK);
    for (int l = 0; l < NL; l++) {
        read_rows(s, l, s->k_cache[l], N_TOK, oldk + (size_t)l * N_TOK * rb_max,
                  ok + (size_t)l * N_TOK * kvd_max);
        read_rows(s, l, s->v_cache[l], N_TOK, oldv + (size_t)l * N_TOK * rb_max, nv);
    }

    /* ranges outside the context, and a shift of nothing */
    CHECK(eng_session_shift(s, -1, 1) == -EINVAL);
    CHECK(eng_session_shift(s, 0, -1) == -EINVAL);
    CHECK(eng_session_shift(s, N_TOK + 1, 0) == -EINVAL);
    CHECK(eng_session_shift(s, KEEP, N_TOK - KEEP + 1) == -EINVAL);
    CHECK(eng_session_shift(s, KEEP, 0) == 0 && eng_session_n_past(s) == N_TOK);

    CHECK(eng_session_shift(s, KEEP, DROP) == 0);
    CHECK(eng_session_n_past(s) == n_left);
    CHECKF(eng_session_n_cached(s) == KEEP, "%d cached", eng_session_n_cached(s));

    CHECK(eng_session_eval(f, shortened, (size_t)n_left, 0) == 0);
    double worst_rot = 0, worst_fresh_k = 0, worst_fresh_v = 0;
    for (int l = 0; l < NL; l++) {
        /* a layer on another layer's cache (gemma4's last ones): that one's
         * rows, checked there */
        const int src = m->layers[l].kv_src;
        CHECKF(src == l || (s->k_cache[l] == s->k_cache[src] && s->v_cache[l] == s->v_cache[src]),
               "%s layer %d: not layer %d's cache", name, l, src);
        if (src != l)
            continue;
        const uint8_t *ko = oldk + (size_t)l * N_TOK * rb_max;
        const uint8_t *vo = oldv + (size_t)l * N_TOK * rb_max;
        const float *kof = ok + (size_t)l * N_TOK * kvd_max;
        const size_t rb = layer_rb(s, l); /* (this layer's rows, one after another) */
        const int kvd = layer_kvd(m, l);
        read_rows(s, l, s->k_cache[l], n_left, raw, nk);
        CHECKF(memcmp(raw, ko, KEEP * rb) == 0, "%s %s layer %d: a kept key changed", name, kvn, l);
        /* a NoPE layer's keys hold no position: they move as they are */
        CHECKF(!m->layers[l].nope ||
               memcmp(raw + KEEP * rb, ko + first * rb, (size_t)(n_left - KEEP) * rb) == 0,
               "%s %s layer %d (NoPE): a moved key changed", name, kvn, l);
        for (int i = 0; i < n_left - KEEP && !m->layers[l].nope; i++) {
            const float *now = nk + (size_t)(KEEP + i) * kvd;
            rotate_ref(m, l, m->layers[l].rope_base,
                       has_f[l] ? factors + (size_t)l * half : NULL,
                       kof + (size_t)(first + i) * kvd, -DROP, ref);
            double amax = 0, d = 0;
            for (int j = 0; j < kvd; j++) {
                amax = fabs(ref[j]) > amax ? fabs(ref[j]) : amax;
                d = fabs(now[j] - ref[j]) > d ? fabs(now[j] - ref[j]) : d;
            }
            /* f16: one rounding of the rotated value; Q8_0: the block's
             * step, its scale taken anew from the rotated values */
            const double rel = d / (amax + 1e-30);
            worst_rot = rel > worst_rot ? rel : worst_rot;
            CHECKF(rel <= (kv == ENG_KV_Q8_0 ? 1.5 / 127 : 1e-3),
                   "%s %s layer %d row %d: rotated key off by %.3g of %.3g", name, kvn, l, KEEP + i,
                   d, amax);
        }
        read_rows(s, l, s->v_cache[l], n_left, raw, nv);
        CHECKF(memcmp(raw, vo, KEEP * rb) == 0, "%s %s layer %d: a kept value changed", name, kvn, l);
        CHECKF(memcmp(raw + KEEP * rb, vo + first * rb, (size_t)(n_left - KEEP) * rb) == 0,
               "%s %s layer %d: a moved value changed", name, kvn, l);
        if (l == 0) {
            /* what a fresh prefill of the shortened list stores */
            read_rows(f, 0, f->k_cache[0], n_left, raw, fk);
            read_rows(f, 0, f->v_cache[0], n_left, raw, fv);
            for (int p = 0; p < n_left; p++) {
                const size_t o = (size_t)p * kvd;
                const double ak = row_amax(fk + o, kvd), av = row_amax(fv + o, kvd);
                double dk = 0, dv = 0;
                for (int j = 0; j < kvd; j++) {
                    dk = fabs(nk[o + j] - fk[o + j]) > dk ? fabs(nk[o + j] - fk[o + j]) : dk;
                    dv = fabs(nv[o + j] - fv[o + j]) > dv ? fabs(nv[o + j] - fv[o + j]) : dv;
                }
                dk /= ak + 1e-30;
                dv /= av + 1e-30;
                worst_fresh_k = dk > worst_fresh_k ? dk : worst_fresh_k;
                worst_fresh_v = dv > worst_fresh_v ? dv : worst_fresh_v;
                /* the old key was rounded once (f16) or quantized, then
                 * rotated and rounded again; a fresh one once, perhaps
                 * from a matmul of another batch */
                const double tol = kv == ENG_KV_Q8_0 ? 3.0 / 127 : 4e-3;
                CHECKF(dk <= tol && dv <= tol, "%s %s layer 0 position %d: key %.3g, value %.3g off",
                       name, kvn, p, dk, dv);
            }
        }
    }
    printf("%s %s: rotated keys within %.2g of the reference, layer 0 within %.2g (keys) "
           "and %.2g (values) of a fresh prefill\n",
           name, kvn, worst_rot, worst_fresh_k, worst_fresh_v);

    /* decode goes on at the new position; the whole rest can go too */
    CHECK(eng_session_eval(s, t, 1, 0) == 0 && eng_session_n_past(s) == n_left + 1);
    const float *lg = eng_session_logits(s, -1);
    CHECK(lg && isfinite(lg[0]));
    CHECK(eng_session_shift(s, KEEP, n_left + 1 - KEEP) == 0 && eng_session_n_past(s) == KEEP);
    CHECK(eng_session_eval(s, t, 2, 0) == 0 && eng_session_n_past(s) == KEEP + 2);

    free(factors);
    free(has_f);
    free(oldk);
    free(oldv);
    free(raw);
    free(ok);
    free(nk);
    free(fk);
    free(nv);
    free(fv);
    free(ref);
    eng_session_free(s);
    eng_session_free(f);
}

/* eng_text_cb: appends to the string *userdata. */
static int collect_text(void *userdata, const char *text, size_t len)
{
    char **acc = userdata;
    const size_t have = *acc ? strlen(*acc) : 0;
    char *p = realloc(*acc, have + len + 1);
    if (!p)
        return -1;
    memcpy(p + have, text, len);
    p[have + len] = '\0';
    *acc = p;
    return 0;
}

/* The logits of the last eval of a and of b: max |diff| into *worst,
 * whether the argmax agrees. */
static bool same_last(eng_session *a, eng_session *b, int n_vocab, double *worst)
{
    const float *x = eng_session_logits(a, -1), *y = eng_session_logits(b, -1);
    CHECK(x && y);
    if (!x || !y)
        return false;
    int ax = 0, ay = 0;
    for (int v = 0; v < n_vocab; v++) {
        const double d = fabs((double)x[v] - y[v]);
        *worst = d > *worst || isnan(d) ? d : *worst;
        ax = x[v] > x[ax] ? v : ax;
        ay = y[v] > y[ay] ? v : ay;
    }
    return ax == ay;
}

/* A ring against a full cache (swa_full) on a sliding-window model: a
 * prefill in batches of 5 over a window of 4 (the ring moves its rows
 * within the prefill), decode steps, a context shift, prompt-cache
 * prefixes the ring holds and one it does not; every eval's logits alike. */
static void check_ring(const char *name, eng_model *m, eng_kv_type kv)
{
    eng_model_info info;
    eng_model_get_info(m, &info);
    eng_session_params sp = eng_session_params_default();
    sp.n_ctx = N_CTX;
    sp.n_batch = 5;
    sp.kv_type = kv;
    eng_session *r = NULL, *f = NULL;
    CHECK(eng_session_new(m, &sp, &r) == 0);
    sp.swa_full = true;
    CHECK(eng_session_new(m, &sp, &f) == 0);
    if (!r || !f)
        return;
    /* (a convolution's rows are a ring on a GPU too: position p in row p %
     * rows, which a decode graph's kernel computes) */
    const bool conv = m->conv_layer != NULL, dev_full = gpu && !conv;
    const size_t rb = eng_session_kv_bytes(r), fb = eng_session_kv_bytes(f);
    CHECKF(dev_full ? rb == fb : rb < fb, "%s: ring %zu bytes, full %zu", name, rb, fb);
    int32_t t[N_CTX];
    uint32_t seed = 7;
    for (int i = 0; i < N_CTX; i++) {
        seed = seed * 1664525u + 1013904223u;
        t[i] = (int32_t)((seed >> 8) % (uint32_t)info.n_vocab);
    }
    eng_session *both[2] = { r, f };
    double worst = 0;
    int agree = 0, evals = 0;
    /* prefill 23, decode to 50 */
    for (int k = 0; k < 2; k++)
        CHECK(eng_session_eval(both[k], t, 23, 0) == 0);
    agree += same_last(r, f, info.n_vocab, &worst), evals++;
    for (int p = 23; p < 50; p++) {
        for (int k = 0; k < 2; k++)
            CHECK(eng_session_eval(both[k], t + p, 1, 0) == 0);
        agree += same_last(r, f, info.n_vocab, &worst), evals++;
    }
    /* a shift (keep 4, drop 20), then decode */
    for (int k = 0; k < 2; k++)
        CHECK(eng_session_shift(both[k], 4, 20) == 0);
    for (int p = 0; p < 8; p++) {
        for (int k = 0; k < 2; k++)
            CHECK(eng_session_eval(both[k], t + p, 1, 0) == 0);
        agree += same_last(r, f, info.n_vocab, &worst), evals++;
    }
    /* a fresh context, then the prompt cache: a prompt that continues it
     * (the ring holds what follows attends to), then one that shares only
     * its first 10 positions (it does not: evaluated from 0 there) */
    int32_t u[40];
    memcpy(u, t, sizeof(u));
    for (int k = 0; k < 2; k++) {
        eng_session_reset(both[k]);
        CHECK(eng_session_eval(both[k], u, 30, 0) == 0);
    }
    u[33] = (u[33] + 1) % info.n_vocab;
    const int kr = eng_session_reset_prefix(r, u, 36), kf = eng_session_reset_prefix(f, u, 36);
    CHECKF(kr == 30 && kf == 30, "%s: prefix kept %d (ring), %d (full)", name, kr, kf);
    for (int k = 0; k < 2; k++)
        CHECK(eng_session_eval(both[k], u + 30, 6, 0) == 0);
    agree += same_last(r, f, info.n_vocab, &worst), evals++;
    u[10] = (u[10] + 1) % info.n_vocab;
    const int kr2 = eng_session_reset_prefix(r, u, 40), kf2 = eng_session_reset_prefix(f, u, 40);
    CHECKF(kf2 == 10 && kr2 == (dev_full ? 10 : 0), "%s: prefix kept %d (ring), %d (full)", name,
           kr2, kf2);
    CHECK(eng_session_eval(r, u + kr2, 40 - (size_t)kr2, 0) == 0);
    CHECK(eng_session_eval(f, u + kf2, 40 - (size_t)kf2, 0) == 0);
    agree += same_last(r, f, info.n_vocab, &worst), evals++;
    /* a shift whose next window would reach into the kept start: a
     * window's ring has not got it (the caller evaluates again; nothing
     * changed), nor on the CPU a convolution's, which holds only the taps'
     * last positions (36 is not among them); a GPU's convolution ring,
     * which holds a batch's rows, has */
    const int np = eng_session_n_past(r);
    CHECK(np == 40 && eng_session_shift(r, 37, 2) == (gpu ? 0 : -ENOTSUP) &&
          eng_session_n_past(r) == (gpu ? 38 : 40));
    if (conv && gpu) { /* ... and the same logits after it as the full cache */
        CHECK(eng_session_shift(f, 37, 2) == 0);
        for (int k = 0; k < 2; k++)
            CHECK(eng_session_eval(both[k], t, 1, 0) == 0);
        agree += same_last(r, f, info.n_vocab, &worst), evals++;
        /* a shift past what the ring holds (position 30, kept) */
        CHECK(eng_session_shift(r, 31, 7) == -ENOTSUP && eng_session_n_past(r) == 39);
    }
    /* generation past a full context, by shifts (keeping 4, then 20 of
     * 64 positions): the same tokens */
    for (int keep = 4; keep <= 20; keep += 16) {
        char *text[2] = { NULL, NULL };
        size_t len[2] = { 0, 0 };
        for (int k = 0; k < 2; k++) {
            eng_session_reset(both[k]);
            eng_gen_params gp = eng_gen_params_default();
            gp.max_tokens = 90;
            gp.context_shift = true;
            gp.n_keep = keep;
            /* (a random model's ends of generation barred: 90 tokens each) */
            eng_logit_bias no_eog[8];
            int n_eog = 0;
            for (int32_t id = 0; id < info.n_vocab && n_eog < 8; id++)
                if (eng_token_is_eog(m, id))
                    no_eog[n_eog++] = (eng_logit_bias){ id, -INFINITY };
            gp.sampler.logit_bias = no_eog;
            gp.sampler.n_logit_bias = n_eog;
            eng_gen_stats st;
            CHECK(eng_generate(both[k], t, 30, &gp, collect_text, &text[k], &st) == 0);
            CHECKF(st.n_generated == 90 && st.n_shifts > 0, "%s: %d tokens, %d shifts", name,
                   st.n_generated, st.n_shifts);
            len[k] = text[k] ? strlen(text[k]) : 0;
        }
        CHECKF(len[0] == len[1] && (len[0] == 0 || !memcmp(text[0], text[1], len[0])),
               "%s: keep %d: generated text differs", name, keep);
        free(text[0]);
        free(text[1]);
    }
    printf("%s %s ring: %zu of %zu bytes; %d/%d evals agree, logits within %.2g\n", name,
           eng_kv_type_name(kv), rb, fb, agree, evals, worst);
    /* the same keys: bit for bit through prefill, decode and the shift;
     * the prefill's attention tiles cut the keys in blocks of 32 rows,
     * which start elsewhere in a ring, and a prompt-cache miss evaluates
     * in other batches: 1.5e-4 measured. A row moved one too far moved
     * the logits by 0.3. */
    CHECKF(agree == evals && worst < 1e-3, "%s: the ring's logits differ", name);
    eng_session_free(r);
    eng_session_free(f);
}

int main(int argc, char **argv)
{
    if (argc < 2 || argc > 3 || (argc == 3 && strcmp(argv[2], "cuda"))) {
        fprintf(stderr, "usage: %s SI_SYNTH [cuda]\n", argv[0]);
        return 2;
    }
    gpu = argc == 3;
    /* tiny-phi3-128k: LongRoPE's long table (the context of 64 is past its
     * original 8); tiny-gemma3: per-layer bases and a linearly scaled table */
    /* tiny-gemma4: layers of two head widths (a quarter of the global
     * ones rotating), the last three on earlier layers' caches */
    static const char *const shapes[] = {"tiny",         "tiny-qwen2",   "tiny-llama3",
                                         "tiny-phi3-128k", "tiny-gemma3", "tiny-smollm3",
                                         "tiny-gemma4",  "tiny-gemma4-kv"};
    for (size_t i = 0; i < sizeof(shapes) / sizeof(*shapes); i++) {
        eng_model *m = load_synth(argv[1], shapes[i]);
        check_shift(shapes[i], m, ENG_KV_F16);
        if (!strcmp(shapes[i], "tiny-gemma4-kv")) /* (a Q8_0 cache's rows of two sizes) */
            check_shift(shapes[i], m, ENG_KV_Q8_0);
        eng_model_free(m);
    }
    /* (lfm2: its convolutions' rows in rings of their 3 taps' positions,
     * on a GPU of those and a batch) */
    /* (tiny-gemma4-kv: heads of 32 and 64, so a Q8_0 cache of two row sizes) */
    static const char *const swa[] = {"tiny-gemma3", "tiny-gemma2", "tiny-lfm2", "tiny-gemma4",
                                      "tiny-gemma4-kv"};
    for (size_t i = 0; i < sizeof(swa) / sizeof(*swa); i++) {
        eng_model *m = load_synth(argv[1], swa[i]);
        check_ring(swa[i], m, ENG_KV_F16);
        bool hd32 = true; /* (every layer's heads whole Q8_0 blocks) */
        for (int l = 0; l < m->info.n_layer; l++)
            hd32 = hd32 && m->layers[l].head_dim % 32 == 0;
        if (!gpu && hd32)
            check_ring(swa[i], m, ENG_KV_Q8_0);
        eng_model_free(m);
    }
    const char *path = test_model_path(), *use = getenv("SI_TEST_DEFAULT_MODEL");
    if (use && !strcmp(use, "0")) {
        printf("default model: skipped (SI_TEST_DEFAULT_MODEL=0)\n");
        return 0;
    }
    if (access(path, R_OK) != 0) {
        printf("no default model at %s: its part skipped\n", path);
        return 0;
    }
    eng_model *m = load(path);
    check_shift("default model", m, ENG_KV_F16);
    check_shift("default model", m, ENG_KV_Q8_0);
    eng_model_free(m);
    return 0;
}
