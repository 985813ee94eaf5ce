/* The forward pass on the default model, checked against itself:
 * batched prefill vs one token at a time, batch sizes, the last-logit path
 * vs all logits, f16 vs f32 storage, session isolation and reset, and the
 * session's error returns. Golden runs against llama.cpp are test-golden.c;
 * these catch the bugs that only show between code paths (a KV cache row
 * written at the wrong position, a prefill kernel that differs from decode).
 */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine.h"
#include "test-util.h"

static float max_abs_diff(const float *a, const float *b, int n)
{
    float m = 0;
    for (int i = 0; i < n; i++) {
        float d = fabsf(a[i] - b[i]);
        if (!(d <= m)) /* catches NaN too */
            m = isnan(d) ? INFINITY : d;
    }
    return m;
}

static int argmax(const float *x, int n)
{
    int best = 0;
    for (int i = 1; i < n; i++)
        if (x[i] > x[best])
            best = i;
    return best;
}

static double mean_abs_diff(const float *a, const float *b, size_t n)
{
    double sum = 0;
    for (size_t i = 0; i < n; i++)
        sum += fabs((double)a[i] - b[i]);
    return sum / (double)n;
}

/* Two runs' logits over n positions: the largest difference into *worst,
 * and the positions whose argmax agrees. */
static int compare_runs(const float *a, const float *b, int n, int V, float *worst)
{
    int agree = 0;
    *worst = 0;
    for (int i = 0; i < n; i++) {
        float d = max_abs_diff(a + (size_t)i * V, b + (size_t)i * V, V);
        *worst = d > *worst ? d : *worst;
        agree += argmax(a + (size_t)i * V, V) == argmax(b + (size_t)i * V, V);
    }
    return agree;
}

/* Logits of every prompt position, by whatever eval pattern `step` says:
 * step 0 = the whole prompt in one eval with all logits; step k = evals of
 * k tokens keeping all logits. */
static float *run_kv(eng_model *m, const int32_t *toks, int n, int step, int n_batch, int V,
                     eng_kv_type kv)
{
    eng_session_params sp = eng_session_params_default();
    sp.n_ctx = 256;
    sp.n_batch = n_batch;
    sp.kv_type = kv;
    eng_session *s;
    CHECK(eng_session_new(m, &sp, &s) == 0);
    float *out = malloc((size_t)n * V * sizeof(float));
    CHECK(out != NULL);
    if (step == 0)
        step = n;
    for (int i = 0; i < n; i += step) {
        int k = n - i < step ? n - i : step;
        CHECK(eng_session_eval(s, toks + i, k, ENG_EVAL_ALL_LOGITS) == 0);
        for (int j = 0; j < k; j++) {
            const float *l = eng_session_logits(s, j);
            CHECK(l != NULL);
            memcpy(out + (size_t)(i + j) * V, l, V * sizeof(float));
        }
    }
    CHECK(eng_session_n_past(s) == n);
    eng_session_free(s);
    return out;
}

static float *run(eng_model *m, const int32_t *toks, int n, int step, int n_batch, int V)
{
    return run_kv(m, toks, n, step, n_batch, V, ENG_KV_F16);
}

int main(void)
{
    const char *path = test_model_path();
    eng_error err;
    eng_model *m;
    eng_model_params mp = eng_model_params_default();
    mp.n_threads = 2;
    if (eng_model_load(path, &mp, &m, &err) < 0) {
        fprintf(stderr, "cannot load %s: %s\n", path, err.msg);
        return 1;
    }
    eng_model_info info;
    eng_model_get_info(m, &info);
    CHECK(info.n_layer == 30 && info.n_embd == 576 && info.n_ff == 1536);
    CHECK(info.n_head == 9 && info.n_head_kv == 3 && info.head_dim == 64);
    CHECK(info.n_vocab == 49152 && strcmp(info.arch, "llama") == 0);
    /* f16 storage: 30 layers of q,k,v,o (576x576 + 2x192x576 + 576x576),
     * which the file holds in Q4_1 and the CPU keeps so (20 bytes a block
     * of 32), and the FFN 3x576x1536 in f16; plus the tied 49152x576 head,
     * which the file holds in Q8_0 and the CPU keeps so: 34 bytes a block */
    uint64_t per_layer = (576 * 576 * 2 + 192 * 576 * 2) / 32 * 20 + 2ull * 3 * 576 * 1536;
    CHECK(info.bytes_per_token == 30 * per_layer + 49152ull * 576 / 32 * 34);
    const int V = info.n_vocab;

    const char *text = "The quick brown fox jumps over the lazy dog. It was the best of times, "
                       "it was the worst of times; 1234 + 5678 = 6912.";
    int32_t toks[128];
    size_t nt;
    CHECK(eng_tokenize(m, text, strlen(text), 0, toks, 128, &nt) == 0);
    CHECK(nt > 20 && nt < 128);
    int n = (int)nt;

    /* whole prompt in one batch vs one token at a time vs uneven chunks and a
     * small n_batch: the same numbers up to summation order */
    float *a = run(m, toks, n, 0, 256, V);
    float *b = run(m, toks, n, 1, 256, V);
    float *c = run(m, toks, n, 7, 256, V);
    float *d = run(m, toks, n, 0, 5, V);
    for (int i = 0; i < n; i++) {
        const float *la = a + (size_t)i * V;
        float db = max_abs_diff(la, b + (size_t)i * V, V);
        float dc = max_abs_diff(la, c + (size_t)i * V, V);
        float dd = max_abs_diff(la, d + (size_t)i * V, V);
        /* f32 accumulation in different orders: typically 5e-3, logits are O(10) */
        if (getenv("TEST_VERBOSE")) fprintf(stderr, "pos %d db %g\n", i, db);
        CHECKF(db < 5e-2f && dc < 5e-2f && dd < 5e-2f,
               "position %d: prefill vs decode %g, chunks of 7 %g, n_batch 5 %g", i, db, dc, dd);
        CHECKF(argmax(la, V) == argmax(b + (size_t)i * V, V), "argmax differs at %d", i);
    }

    /* the last-logit path equals the last row of all logits */
    {
        eng_session *s;
        CHECK(eng_session_new(m, NULL, &s) == 0);
        CHECK(eng_session_eval(s, toks, n, 0) == 0);
        CHECK(eng_session_logits(s, 0) == NULL || n == 1);
        const float *l = eng_session_logits(s, -1);
        CHECK(l != NULL);
        float dl = max_abs_diff(l, a + (size_t)(n - 1) * V, V);
        /* only the LM head differs: one row (GEMV) instead of a block
         * (GEMM), and a Q8_0 head (SmolLM2's) on AVX2 takes x rounded to
         * 16 bits a block there (~2^-16 of a block's largest: measured
         * 1.2e-3, where f32 x gave 1.5e-5) */
        CHECKF(dl < 5e-3f, "last-logit path differs by %g", dl);

        /* reset: the same prompt gives bit-identical logits */
        float *first = malloc(V * sizeof(float));
        memcpy(first, l, V * sizeof(float));
        eng_session_reset(s);
        CHECK(eng_session_n_past(s) == 0);
        CHECK(eng_session_eval(s, toks, n, 0) == 0);
        CHECK(memcmp(first, eng_session_logits(s, -1), V * sizeof(float)) == 0);

        /* another session interleaved does not disturb this one */
        eng_session *s2;
        CHECK(eng_session_new(m, NULL, &s2) == 0);
        CHECK(eng_session_eval(s2, toks + 3, 10, 0) == 0);
        int32_t next = argmax(first, V);
        CHECK(eng_session_eval(s, &next, 1, 0) == 0);
        float *after = malloc(V * sizeof(float));
        memcpy(after, eng_session_logits(s, -1), V * sizeof(float));
        eng_session_reset(s);
        CHECK(eng_session_eval(s, toks, n, 0) == 0);
        CHECK(eng_session_eval(s, &next, 1, 0) == 0);
        CHECK(memcmp(after, eng_session_logits(s, -1), V * sizeof(float)) == 0);
        eng_session_free(s2);
        free(after);
        free(first);
        eng_session_free(s);
    }

    /* error returns: context full, out-of-range tokens, empty eval */
    {
        eng_session_params sp = { .n_ctx = 16, .n_batch = 8 };
        eng_session *s;
        CHECK(eng_session_new(m, &sp, &s) == 0);
        CHECK(eng_session_n_ctx(s) == 16);
        CHECK(eng_session_eval(s, toks, 17, 0) == -ENOSPC);
        CHECK(eng_session_n_past(s) == 0);
        CHECK(eng_session_eval(s, toks, 16, 0) == 0);
        CHECK(eng_session_eval(s, toks, 1, 0) == -ENOSPC);
        eng_session_reset(s);
        int32_t bad[2] = { 5, -1 };
        CHECK(eng_session_eval(s, bad, 2, 0) == -EINVAL);
        bad[1] = V;
        CHECK(eng_session_eval(s, bad, 2, 0) == -EINVAL);
        CHECK(eng_session_n_past(s) == 0);
        CHECK(eng_session_eval(s, toks, 0, 0) == -EINVAL);
        eng_session_free(s);
    }

    /* f32 storage: same model up to the f16 rounding of the weights */
    {
        eng_model *m32;
        mp.storage = ENG_DTYPE_F32;
        CHECK(eng_model_load(path, &mp, &m32, &err) == 0);
        eng_model_info i32;
        eng_model_get_info(m32, &i32);
        /* everything in f32, the head included (4 bytes a weight against
         * Q8_0's 34 / 32) and the attention matrices (against Q4_1's 20 / 32) */
        const uint64_t head = 49152ull * 576, att = 30ull * (576 * 576 * 2 + 192 * 576 * 2);
        CHECK(i32.storage == ENG_DTYPE_F32 &&
              i32.bytes_weights ==
                  2 * (info.bytes_weights - head / 32 * 34 - att / 32 * 20) + 4 * (head + att));
        float *e = run(m32, toks, n, 0, 256, V);
        float worst;
        int agree = compare_runs(a, e, n, V, &worst);
        /* Q4_1 values rounded to f16 move by <= 2^-11 relative; through 30
         * layers that stays well under a tenth of a logit */
        CHECKF(worst < 0.25f, "f16 vs f32 storage: max logit difference %g", worst);
        CHECKF(agree >= n - 1, "f16 vs f32 storage: argmax agrees at %d of %d", agree, n);
        free(e);
        eng_model_free(m32);
    }

    /* q8_matrices: the FFN's slots keep the file's Q4_1 gate and up rows
     * and take their down rows (columns of W_down) in Q8_0; 8 bits a block
     * of 32 moves the logits a little */
    {
        eng_model *mq;
        mp.storage = ENG_DTYPE_F16;
        mp.q8_matrices = true;
        CHECK(eng_model_load(path, &mp, &mq, &err) == 0);
        mp.q8_matrices = false;
        eng_model_info iq;
        eng_model_get_info(mq, &iq);
        /* the FFN's f16 (3 x 576 x 1536 a layer) becomes the file's Q4_1
         * gate and up rows and Q8_0 down rows; attention stays Q4_1 */
        const uint64_t ffn = 30ull * 3 * 1536 * 576, q = 30ull * 1536 * 18 * (2 * 20 + 34);
        CHECKF(iq.bytes_weights == info.bytes_weights - 2 * ffn + q &&
                   iq.bytes_per_token == info.bytes_per_token - 2 * ffn + q,
               "q8 matrices: %llu bytes", (unsigned long long)iq.bytes_weights);
        float *e = run(mq, toks, n, 0, 256, V);
        float worst;
        int agree = compare_runs(a, e, n, V, &worst);
        double mean = mean_abs_diff(a, e, (size_t)n * V);
        /* measured: max 2.04 over 49k logits x 42 positions, mean 0.26: a
         * W_down column's blocks run across the residual stream's outlier
         * dimensions (with attention and the gate and up rows requantized to
         * Q8_0 too, before they kept Q4_1: 3.07, 0.31); llama.cpp's own
         * 8-bit activations move its Q4_1 logits from its F16 run's by as
         * much (test-golden: RMS 0.32, max 1.04). */
        CHECKF(worst > 0.0f && worst < 3.0f && mean < 0.35, "f16 vs q8 matrices: logits differ by %g at most, %g on average",
               worst, mean);
        printf("q8 matrices: logits differ by %.3g at most, %.3g on average, argmax %d of %d\n",
               worst, mean, agree, n);
        /* measured 39 of 42 (38 with Q8_0 matrices): near-ties of a 135M
         * model flip */
        CHECKF(agree >= n - 6, "f16 vs q8 matrices: argmax agrees at %d of %d", agree, n);
        free(e);
        eng_model_free(mq);
    }

    /* a Q8_0 KV cache: 6 blocks of 34 bytes a position for K (and V)
     * where f16 takes 384; the logits move a little, the prompt cut into
     * evals of 5 tokens gives what one eval does up to decode's rounding */
    {
        eng_kv_type kt;
        CHECK(eng_kv_type_parse("q8_0", &kt) == 0 && kt == ENG_KV_Q8_0);
        CHECK(eng_kv_type_parse("f16", &kt) == 0 && kt == ENG_KV_F16);
        CHECK(eng_kv_type_parse("q4_0", &kt) == -EINVAL && eng_kv_type_parse(NULL, &kt) == -EINVAL);
        CHECK(strcmp(eng_kv_type_name(ENG_KV_Q8_0), "q8_0") == 0);
        eng_session_params sp = { .n_ctx = 100, .kv_type = ENG_KV_Q8_0 };
        eng_session *s;
        CHECK(eng_session_new(m, &sp, &s) == 0);
        CHECK(eng_session_kv_type(s) == ENG_KV_Q8_0 &&
              eng_session_kv_bytes(s) == 100ull * 30 * 2 * 6 * 34);
        eng_session_free(s);
        sp.kv_type = ENG_KV_F16;
        CHECK(eng_session_new(m, &sp, &s) == 0);
        CHECK(eng_session_kv_bytes(s) == 100ull * 30 * 2 * 192 * 2);
        eng_session_free(s);
        sp.kv_type = (eng_kv_type)7;
        s = NULL;
        CHECK(eng_session_new(m, &sp, &s) == -EINVAL && s == NULL);

        float *e = run_kv(m, toks, n, 0, 256, V, ENG_KV_Q8_0);
        float worst;
        int agree = compare_runs(a, e, n, V, &worst);
        double mean = mean_abs_diff(a, e, (size_t)n * V);
        /* measured: max 0.85, mean 0.10 (q8 matrices: 3.07, 0.31);
         * perplexity 20.818 -> 20.783 (test-perplexity) */
        CHECKF(worst > 0.0f && worst < 2.0f && mean < 0.2,
               "f16 vs q8_0 KV cache: logits differ by %g at most, %g on average", worst, mean);
        printf("q8_0 KV cache: logits differ by %.3g at most, %.3g on average, argmax %d of %d\n",
               worst, mean, agree, n);
        CHECKF(agree >= n - 3, "f16 vs q8_0 KV cache: argmax agrees at %d of %d", agree, n);
        float *e5 = run_kv(m, toks, n, 5, 256, V, ENG_KV_Q8_0);
        agree = compare_runs(e, e5, n, V, &worst);
        CHECKF(worst < 1e-3f && agree == n,
               "q8_0 KV cache, one eval vs evals of 5: logits differ by %g, argmax %d of %d",
               worst, agree, n);
        free(e5);
        free(e);
    }

    free(a);
    free(b);
    free(c);
    free(d);
    eng_model_free(m);
    eng_model_free(NULL);
    eng_session_free(NULL);
    printf("ok\n");
    return 0;
}
