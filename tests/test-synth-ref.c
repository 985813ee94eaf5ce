/* The forward pass of the other code paths against llama.cpp: qwen2 (NEOX
 * RoPE, Q/K/V biases), qwen3 (each head of q and k RMS-normalised before
 * RoPE, heads wider than n_embd / n_head), Llama 3 (rope_freqs frequency factors, llama-bpe
 * vocabulary), phi3 (q, k and v in one tensor, gate and up in another),
 * gemma3 (GeGLU, norms after attention and FFN, scaled embeddings, local
 * layers with a window and their own RoPE base, linear RoPE scaling) and
 * gemma2 (soft-capped scores and logits, every other layer local) and
 * gemma (1: GeGLU and scaled embeddings on Llama's layers), smollm3 (NoPE
 * layers), granite (scaled embeddings, residual branches, scores and
 * logits), exaone (NEOX RoPE with Llama 3's factors), minicpm (granite's
 * with MiniCPM's three multipliers), olmo2 (no pre-norms, q/k norms over
 * whole rows; OLMo 3's local layers), exaone4 (its 64-layer shape's
 * global layers without RoPE), and the block formats
 * (Q2_K to Q6_K, IQ4_NL, IQ4_XS) on tiny-k,
 * on small synthetic models that si-synth writes
 * deterministically (seed 7, f16 weights). tests/data/synth-<shape>.logits
 * holds llama.cpp's f32 logits of every position of TOKENS, made as
 * tests/data/README.md describes. The default model (llama/SmolLM2) has its
 * own golden test.
 *
 * usage: test-synth-ref SI_SYNTH DATA_DIR
 */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "engine.h"
#include "gguf.h"
#include "model.h"
#include "quants.h"
#include "si-util.h" /* si_render_prompt */
#include "test-util.h"

static const int32_t TOKENS[] = { 5, 17, 99, 250, 300, 12, 7, 64, 128, 200, 31, 42 };
enum { N_TOK = sizeof(TOKENS) / sizeof(TOKENS[0]) };

/* si-synth's shape (seed 7, weights of type) into a new temporary file
 * named in path (32 bytes), with metadata keys set by --kv
 * ("KEY=TYPE:VALUE", several separated by spaces) unless kv is NULL. */
static void synth_kv(const char *synth, const char *shape, const char *type, const char *kv, char *path)
{
    char args[2048] = "";
    size_t k = 0;
    for (const char *p = kv ? kv : ""; *p && k < sizeof(args);) {
        const size_t n = strcspn(p, " ");
        k += (size_t)snprintf(args + k, sizeof(args) - k, " --kv '%.*s'", (int)n, p);
        p += n + (p[n] == ' ');
    }
    CHECK(k < sizeof(args));
    test_synth_args(synth, shape, type, args, path);
}

/* The shape's logits (weights of type, kv set, see synth_kv) against
 * llama.cpp's in synth-NAME.logits: at most max_diff apart, rms at most
 * max_rms, the same argmax everywhere. An f32 file is loaded in f32. */
static int check_logits(const char *synth, const char *data_dir, const char *shape, const char *type,
                        const char *kv, const char *name, int n_vocab, double max_diff, double max_rms)
{
    char model[32];
    synth_kv(synth, shape, type, kv, model);

    char ref_path[4096];
    snprintf(ref_path, sizeof(ref_path), "%s/synth-%s.logits", data_dir, name);
    FILE *f = fopen(ref_path, "rb");
    CHECKF(f, "cannot open %s", ref_path);
    float *ref = malloc(sizeof(float) * N_TOK * n_vocab);
    CHECK(fread(ref, sizeof(float), (size_t)N_TOK * n_vocab, f) == (size_t)N_TOK * n_vocab);
    CHECK(fgetc(f) == EOF);
    fclose(f);

    eng_model *m;
    eng_error err;
    eng_model_params mp = eng_model_params_default();
    mp.n_threads = 2;
    if (!strcmp(type, "f32"))
        mp.storage = ENG_DTYPE_F32;
    CHECKF(eng_model_load(model, &mp, &m, &err) == 0, "%s: %s", shape, err.msg);
    unlink(model);
    eng_model_info info;
    eng_model_get_info(m, &info);
    CHECK(info.n_vocab == n_vocab);
    /* what a plan prices (the fixed matrices and the loaded neurons) is
     * what the load made resident */
    eng_plan_info pi;
    eng_model_get_plan(m, &pi);
    CHECKF(m->bytes_fixed + pi.bytes_ffn == info.bytes_weights, "%s: %llu + %llu bytes priced, "
           "%llu resident", name, (unsigned long long)m->bytes_fixed,
           (unsigned long long)pi.bytes_ffn, (unsigned long long)info.bytes_weights);
    eng_session *s;
    CHECK(eng_session_new(m, NULL, &s) == 0);
    CHECK(eng_session_eval(s, TOKENS, N_TOK, ENG_EVAL_ALL_LOGITS) == 0);
    double worst = 0, sq = 0;
    int agree = 0;
    for (int t = 0; t < N_TOK; t++) {
        const float *l = eng_session_logits(s, t), *r = ref + (size_t)t * n_vocab;
        int a = 0, b = 0;
        for (int v = 0; v < n_vocab; v++) {
            double d = fabs((double)l[v] - r[v]);
            worst = d > worst || isnan(d) ? d : worst;
            sq += d * d;
            if (l[v] > l[a])
                a = v;
            if (r[v] > r[b])
                b = v;
        }
        agree += a == b;
    }
    double rms = sqrt(sq / ((double)N_TOK * n_vocab));
    printf("%-12s max |diff| %.5f  rms %.5f  argmax agrees %d/%d\n", name, worst, rms, agree,
           N_TOK);
    CHECKF(worst < max_diff && rms < max_rms, "%s: logits differ from llama.cpp", name);
    CHECK(agree == N_TOK);
    eng_session_free(s);
    eng_model_free(m);
    free(ref);
    return 0;
}

/* f16 files. llama.cpp rounds activations to f16 for f16 matrix products,
 * we keep them in f32: differences stay in the 1e-3 range on these small
 * models, while a wrong rotation convention or a missing bias moves logits
 * by O(0.1..1). */
static int check_shape_kv(const char *synth, const char *data_dir, const char *shape, const char *kv,
                          const char *name, int n_vocab)
{
    return check_logits(synth, data_dir, shape, "f16", kv, name, n_vocab, 0.02, 0.005);
}

static int check_shape(const char *synth, const char *data_dir, const char *shape, int n_vocab)
{
    return check_shape_kv(synth, data_dir, shape, NULL, shape, n_vocab);
}

/* tiny-k's matrices in one block format. The reference,
 * tests/data/synth-tiny-k-TYPE.logits, is llama.cpp run on the same file
 * with every tensor dequantized to F32 by gguf-py (llama.cpp's Python
 * package): llama.cpp on the quantized file itself rounds the activations
 * to 8 bits for these formats' products, which alone moves its logits by
 * 0.05-0.14 and flips argmaxes, too coarse to catch a misread block. Our
 * dequantization is exact, so only the f16 storage of the weights and
 * llama.cpp's f16 activations separate the two, as for the f16 shapes. */
static void check_block_type(const char *synth, const char *data_dir, const char *type)
{
    char name[64];
    snprintf(name, sizeof(name), "tiny-k-%s", type);
    check_logits(synth, data_dir, "tiny-k", type, NULL, name, 320, 0.02, 0.005);
}

/* Every slot's gate and up rows are the file's rows of its neuron, byte
 * for byte (a file whose gate and up tensors are all of type `type`). */
static void check_slots_are_file_rows(const eng_model *m, const char *path, uint32_t type)
{
    gguf_file *f = NULL;
    eng_error err;
    CHECKF(gguf_open(path, &f, &err) == 0, "%s", err.msg);
    const size_t rb = ggml_row_bytes(type, (uint64_t)m->info.n_embd);
    for (int il = 0; il < m->info.n_layer; il++) {
        const eng_layer *L = &m->layers[il];
        for (int h = 0; h < 2; h++) {
            char name[64];
            snprintf(name, sizeof(name), "blk.%d.ffn_%s.weight", il, h ? "up" : "gate");
            const gguf_tensor *t = gguf_find_tensor(f, name);
            CHECK(t && t->type == type);
            for (int j = 0; t && j < L->ffn.n_slots; j++)
                CHECKF(memcmp((const uint8_t *)L->ffn.gate_up + (2 * (size_t)j + h) * rb,
                              (const uint8_t *)t->data + (size_t)L->neuron_of_slot[j] * rb, rb) == 0,
                       "layer %d slot %d: the %s row is not the file's", il, j, name);
        }
    }
    gguf_close(f);
}

/* A Q4_K, Q5_K or Q6_K file's matrices keep its blocks on the CPU (exact,
 * 4.5, 5.5 or 6.56 bits a weight); with q8_matrices a Q4_K or Q5_K FFN's
 * gate and up rows do too, else the FFN is f16 (a Q6_K FFN: Q8_0 with
 * q8_matrices, as the FFN's kernels take no Q6_K). Decode, a token at a time through the
 * type's GEMV, against llama.cpp's logits of the F32 rewrite as
 * check_block_type's prefill. */
static void check_k_native(const char *synth, const char *data_dir, const char *type,
                           eng_dtype dt)
{
    char model[32], ref_path[4096];
    synth_kv(synth, "tiny-k", type, NULL, model);
    snprintf(ref_path, sizeof(ref_path), "%s/synth-tiny-k-%s.logits", data_dir, type);
    FILE *f = fopen(ref_path, "rb");
    CHECKF(f, "cannot open %s", ref_path);
    static float ref[N_TOK * 320];
    CHECK(fread(ref, sizeof(float), N_TOK * 320, f) == N_TOK * 320);
    fclose(f);
    for (int q8 = 0; q8 < 2; q8++) {
        eng_model *m;
        eng_error err;
        eng_model_params mp = eng_model_params_default();
        mp.n_threads = 2;
        mp.q8_matrices = q8;
        CHECKF(eng_model_load(model, &mp, &m, &err) == 0, "tiny-k %s: %s", type, err.msg);
        CHECK(m->layers[0].wq.dtype == dt && m->layers[0].wo.dtype == dt &&
              m->tok_embd.dtype == dt);
        /* with q8_matrices a Q4_K or Q5_K FFN's gate and up rows keep the
         * file's blocks too (their down rows Q8_0); without, the FFN is f16 */
        const bool q4k = dt == ENG_DTYPE_Q4_K || dt == ENG_DTYPE_Q5_K;
        CHECK(m->info.ffn_dtype == (!q8 ? ENG_DTYPE_F16 : q4k ? dt : ENG_DTYPE_Q8_0));
        if (q8 && q4k)
            check_slots_are_file_rows(m, model, ggml_type_of_dtype(dt));
        eng_session *s;
        CHECK(eng_session_new(m, NULL, &s) == 0);
        double worst = 0;
        for (int t = 0; t < N_TOK; t++) {
            CHECK(eng_session_eval(s, TOKENS + t, 1, 0) == 0);
            const float *l = eng_session_logits(s, 0);
            for (int v = 0; v < 320; v++) {
                const double d = fabs((double)l[v] - ref[t * 320 + v]);
                worst = d > worst || isnan(d) ? d : worst;
            }
        }
        printf("tiny-k-%s decode%s: max |diff| %.5f\n", type,
               !q8 ? "" : q4k ? " (q8_matrices: FFN gate/up kept)" : " (q8_matrices: FFN q8_0)",
               worst);
        /* Q8_0 down rows round W_down to 8 bits: about 0.02 apart (0.03
         * with every FFN row in Q8_0) */
        CHECKF(worst < (q8 ? 0.04 : 0.02), "tiny-k %s decode: logits %g from llama.cpp's", type,
               worst);
        eng_session_free(s);
        eng_model_free(m);
    }
    unlink(model);
}

/* A file in Q8_0: its matrices and its FFN's gate and up rows keep the
 * file's blocks byte for byte (a W_down column is requantized across the
 * file's rows), and the logits stay near an f32 load of the same file
 * (exact dequantization everywhere). */
static void check_q8_file(const char *synth)
{
    char path[32];
    test_synth_type(synth, "tiny", "q8_0", path);
    eng_model *q = NULL, *x = NULL;
    eng_error err;
    eng_model_params mp = eng_model_params_default();
    mp.n_threads = 2;
    CHECKF(eng_model_load(path, &mp, &q, &err) == 0, "%s", err.msg);
    mp.storage = ENG_DTYPE_F32;
    CHECKF(eng_model_load(path, &mp, &x, &err) == 0, "%s", err.msg);
    for (int il = 0; il < q->info.n_layer; il++) {
        CHECK(q->layers[il].ffn.dtype == ENG_DTYPE_Q8_0 && q->layers[il].wq.dtype == ENG_DTYPE_Q8_0);
        CHECK(x->layers[il].ffn.dtype == ENG_DTYPE_F32);
    }
    check_slots_are_file_rows(q, path, GGML_TYPE_Q8_0);
    unlink(path);
    float *a = malloc(sizeof(float) * N_TOK * q->info.n_vocab), *b = malloc(sizeof(float) * N_TOK * q->info.n_vocab);
    eng_model *ms[2] = { q, x };
    float *out[2] = { a, b };
    for (int k = 0; k < 2; k++) {
        eng_session *s;
        CHECK(eng_session_new(ms[k], NULL, &s) == 0);
        CHECK(eng_session_eval(s, TOKENS, N_TOK, ENG_EVAL_ALL_LOGITS) == 0);
        for (int t = 0; t < N_TOK; t++)
            memcpy(out[k] + (size_t)t * q->info.n_vocab, eng_session_logits(s, t), sizeof(float) * q->info.n_vocab);
        eng_session_free(s);
    }
    double worst = 0;
    for (size_t i = 0; i < (size_t)N_TOK * q->info.n_vocab; i++) {
        const double d = fabs((double)a[i] - b[i]);
        worst = d > worst || isnan(d) ? d : worst;
    }
    printf("tiny q8_0    max |diff| %.5f against its f32 load\n", worst);
    /* the requantized W_down columns and the f16 KV cache: measured
     * 0.023 (a wrong block or scale moves them by O(1)) */
    CHECKF(worst > 0 && worst < 0.05, "q8_0 file: logits %g from its f32 load", worst);
    free(a);
    free(b);
    eng_model_free(q);
    eng_model_free(x);
}

/* phi3's fused FFN under a loading plan: every loaded slot holds its
 * neuron's row of the gate half and of the up half of the file's ffn_up,
 * byte for byte (f16 file, f16 storage); a hot-swap to the dense plan then
 * gives the dense load's logits. */
static void check_phi3_plan(const char *synth)
{
    char path[32];
    test_synth(synth, "tiny-phi3", path);
    eng_model_params mp = eng_model_params_default();
    mp.n_threads = 2;
    eng_model *dense = NULL, *m = NULL;
    eng_error err;
    CHECKF(eng_model_load(path, &mp, &dense, &err) == 0, "%s", err.msg);
    eng_load_plan_params pp = eng_load_plan_params_default();
    pp.mode = ENG_SELECT_RANDOM;
    pp.gamma = 0.5f;
    pp.seed = 3;
    mp.plan = &pp;
    CHECKF(eng_model_load(path, &mp, &m, &err) == 0, "%s", err.msg);
    gguf_file *f = NULL;
    CHECKF(gguf_open(path, &f, &err) == 0, "%s", err.msg);
    const int E = m->info.n_embd, F = m->info.n_ff;
    const size_t rb = (size_t)E * 2;
    int bad = 0, loaded = 0;
    for (int il = 0; il < m->info.n_layer; il++) {
        const eng_layer *L = &m->layers[il];
        char name[64];
        snprintf(name, sizeof(name), "blk.%d.ffn_up.weight", il);
        const gguf_tensor *t = gguf_find_tensor(f, name);
        CHECK(t && t->type == GGML_TYPE_F16 && t->ne[1] == 2 * (uint64_t)F && L->ffn.dtype == ENG_DTYPE_F16);
        loaded += L->ffn.n_slots;
        for (int j = 0; t && j < L->ffn.n_slots; j++)
            for (int h = 0; h < 2; h++)
                bad += memcmp((const uint8_t *)L->ffn.gate_up + (2 * (size_t)j + h) * rb,
                              (const uint8_t *)t->data + ((size_t)h * F + (size_t)L->neuron_of_slot[j]) * rb,
                              rb) != 0;
    }
    gguf_close(f);
    CHECKF(bad == 0 && loaded == m->info.n_layer * (F / 2), "phi3 plan: %d of %d slots hold other rows", bad, loaded);
    eng_load_plan_params dp = eng_load_plan_params_default();
    CHECKF(eng_model_swap(m, &dp, NULL, &err) == 0, "%s", err.msg); /* reads the file again */
    unlink(path);
    eng_session *a, *b;
    CHECK(eng_session_new(dense, NULL, &a) == 0 && eng_session_new(m, NULL, &b) == 0);
    CHECK(eng_session_eval(a, TOKENS, N_TOK, 0) == 0 && eng_session_eval(b, TOKENS, N_TOK, 0) == 0);
    double worst = 0;
    const float *la = eng_session_logits(a, N_TOK - 1), *lb = eng_session_logits(b, N_TOK - 1);
    for (int v = 0; v < m->info.n_vocab; v++) {
        /* (not fmax: gcc 12 for aarch64 fails to vectorize that reduction) */
        const double d = fabs((double)la[v] - lb[v]);
        worst = d > worst || isnan(d) ? d : worst;
    }
    printf("tiny-phi3    random plan: %d slots from the fused rows; swapped to dense: max |diff| %.2g\n", loaded,
           worst);
    CHECKF(worst < 1e-3, "phi3 swapped to dense: logits %g from the dense load", worst);
    eng_session_free(a);
    eng_session_free(b);
    /* the sliding window (2047): a session's context stays within it */
    eng_session_params sp = eng_session_params_default();
    sp.n_ctx = 4096;
    CHECK(eng_session_new(m, &sp, &a) == 0);
    CHECKF(eng_session_n_ctx(a) == 2047, "phi3 context %d, its window 2047", eng_session_n_ctx(a));
    eng_session_free(a);
    eng_model_free(m);
    eng_model_free(dense);
}

static double max_diff(const float *a, const float *b, int n)
{
    double worst = 0;
    for (int v = 0; v < n; v++) {
        const double d = fabs((double)a[v] - b[v]);
        worst = d > worst || isnan(d) ? d : worst;
    }
    return worst;
}

/* A Q4_K (Q5_K) FFN under selection (tiny-k's Q4_K or Q5_K file): a
 * random plan keeps the file's gate and up rows of its neurons and the
 * dense load's down rows; decode over a request's dynamic neurons gives
 * the same logits, bit for bit, from the session's copy of them
 * (copy_dynamic) as from where they lie; a per-token pick over the sketch
 * of the rows gives finite ones; a swap back to dense gives the dense
 * load's. */
static void check_k_plan(const char *synth, const char *type, eng_dtype dt)
{
    char model[32];
    synth_kv(synth, "tiny-k", type, NULL, model);
    eng_model_params mp = eng_model_params_default();
    mp.n_threads = 2;
    mp.q8_matrices = true;
    eng_model *dense = NULL, *m = NULL;
    eng_error err;
    CHECKF(eng_model_load(model, &mp, &dense, &err) == 0, "%s", err.msg);
    eng_load_plan_params pp = eng_load_plan_params_default();
    pp.mode = ENG_SELECT_RANDOM;
    pp.gamma = 0.5f;
    pp.seed = 5;
    pp.sketch = true;
    mp.plan = &pp;
    CHECKF(eng_model_load(model, &mp, &m, &err) == 0, "%s", err.msg);
    CHECK(m->info.ffn_dtype == dt && dense->info.ffn_dtype == dt);
    check_slots_are_file_rows(m, model, ggml_type_of_dtype(dt));
    const int V = m->info.n_vocab;
    const size_t rd = eng_ffn_down_bytes(dt, m->info.n_embd);
    int bad = 0, loaded = 0;
    for (int il = 0; il < m->info.n_layer; il++) {
        const eng_layer *L = &m->layers[il], *D = &dense->layers[il];
        for (int j = 0; j < L->ffn.n_slots; j++, loaded++) {
            const int n = L->neuron_of_slot[j];
            bad += D->neuron_of_slot[n] != n ||
                   memcmp((const uint8_t *)L->ffn.down + (size_t)j * rd,
                          (const uint8_t *)D->ffn.down + (size_t)n * rd, rd) != 0;
        }
    }
    CHECKF(bad == 0 && loaded < m->info.n_layer * m->info.n_ff,
           "%s plan: %d of %d slots' down rows are not the dense load's", type, bad,
           loaded);
    float *l[4];
    for (int k = 0; k < 4; k++)
        CHECK((l[k] = malloc(sizeof(float) * (size_t)V)));
    /* copied, in place, picked per token; then dense */
    for (int k = 0; k < 3; k++) {
        eng_session *s;
        CHECK(eng_session_new(m, NULL, &s) == 0);
        eng_compute_params cp = eng_compute_params_default();
        cp.phi = 0.25f;
        cp.copy_dynamic = k == 0;
        cp.pick = k == 2 ? ENG_PICK_TOKEN : ENG_PICK_REQUEST;
        CHECK(eng_session_set_compute(s, &cp) == 0);
        CHECK(eng_session_eval(s, TOKENS, N_TOK - 1, 0) == 0);
        CHECK(eng_session_eval(s, TOKENS + N_TOK - 1, 1, 0) == 0);
        CHECKF(eng_session_ffn_share(s) < 0.5, "%s plan %d: computed %g of the FFN", type, k,
               eng_session_ffn_share(s));
        CHECK(k != 0 || eng_session_copy_bytes(s) > 0);
        memcpy(l[k], eng_session_logits(s, -1), sizeof(float) * (size_t)V);
        eng_session_free(s);
    }
    CHECKF(memcmp(l[0], l[1], sizeof(float) * (size_t)V) == 0,
           "%s plan: copied dynamic neurons %g from in place", type, max_diff(l[0], l[1], V));
    bool finite = true;
    for (int v = 0; v < V; v++)
        finite = finite && isfinite(l[2][v]);
    CHECKF(finite, "%s plan: a per-token pick gave non-finite logits", type);
    eng_load_plan_params dp = eng_load_plan_params_default();
    CHECKF(eng_model_swap(m, &dp, NULL, &err) == 0, "%s", err.msg);
    unlink(model);
    eng_session *a, *b;
    CHECK(eng_session_new(dense, NULL, &a) == 0 && eng_session_new(m, NULL, &b) == 0);
    CHECK(eng_session_eval(a, TOKENS, N_TOK, 0) == 0 && eng_session_eval(b, TOKENS, N_TOK, 0) == 0);
    memcpy(l[3], eng_session_logits(a, -1), sizeof(float) * (size_t)V);
    const double swapped = max_diff(l[3], eng_session_logits(b, -1), V);
    printf("tiny-k-%s  random plan: %d slots, phi 0.25 vs dense %.3f, swapped to dense: max |diff| %.2g\n",
           type, loaded, max_diff(l[0], l[3], V), swapped);
    CHECKF(swapped < 1e-3, "%s swapped to dense: logits %g from the dense load", type, swapped);
    eng_session_free(a);
    eng_session_free(b);
    for (int k = 0; k < 4; k++)
        free(l[k]);
    eng_model_free(m);
    eng_model_free(dense);
}

/* The families with local layers (gemma2, gemma3, OLMo 3, EXAONE 4's 64
 * layers) beyond the one batch llama.cpp's logits cover: their windows (4
 * positions here) bound attention, not the session's context; the same
 * tokens one at a time (decode's attention, with its own window code)
 * give the batch's logits; and SelectInfer runs on it: a plan with a
 * sketch, per-request selection with mean compensation (the bias goes in
 * before the norm after the FFN) and per-token picking (GELU in the sketch's
 * scores) over a prompt and decode steps past the window. */
static void check_windows(const char *synth, const char *shape)
{
    char path[32];
    test_synth(synth, shape, path);
    eng_model_params mp = eng_model_params_default();
    mp.n_threads = 2;
    eng_model *m = NULL, *sel = NULL;
    eng_error err;
    CHECKF(eng_model_load(path, &mp, &m, &err) == 0, "%s", err.msg);
    const int V = m->info.n_vocab;
    eng_session_params sp = eng_session_params_default();
    sp.n_ctx = 4096;
    eng_session *a, *b;
    CHECK(eng_session_new(m, &sp, &a) == 0 && eng_session_new(m, NULL, &b) == 0);
    CHECKF(eng_session_n_ctx(a) == 4096, "%s context %d, not its 4096", shape, eng_session_n_ctx(a));
    CHECK(eng_session_eval(a, TOKENS, N_TOK, 0) == 0);
    for (int t = 0; t < N_TOK; t++)
        CHECK(eng_session_eval(b, &TOKENS[t], 1, 0) == 0);
    const double d1 = max_diff(eng_session_logits(a, -1), eng_session_logits(b, -1), V);
    eng_session_free(a);
    eng_session_free(b);

    eng_load_plan_params pp = eng_load_plan_params_default();
    pp.mode = ENG_SELECT_RANDOM;
    pp.gamma = 0.7f;
    pp.seed = 5;
    pp.sketch = true;
    mp.plan = &pp;
    CHECKF(eng_model_load(path, &mp, &sel, &err) == 0, "%s", err.msg);
    double share[2] = { 0, 0 };
    for (int k = 0; k < 2; k++) {
        eng_compute_params cp = eng_compute_params_default();
        cp.phi = 0.4f;
        cp.alpha = 0.2f;
        cp.comp = k ? ENG_COMP_NONE : ENG_COMP_MEAN;
        cp.pick = k ? ENG_PICK_TOKEN : ENG_PICK_REQUEST;
        CHECK(eng_session_new(sel, NULL, &a) == 0 && eng_session_set_compute(a, &cp) == 0);
        CHECK(eng_session_eval(a, TOKENS, N_TOK, 0) == 0);
        int32_t next = 7;
        for (int step = 0; step < 6; step++)
            CHECK(eng_session_eval(a, &next, 1, 0) == 0);
        const float *l = eng_session_logits(a, -1);
        int finite = 0;
        for (int v = 0; v < V; v++)
            finite += isfinite(l[v]);
        share[k] = eng_session_ffn_share(a);
        CHECKF(finite == V, "%s selective: %d of %d logits finite", shape, finite, V);
        eng_session_free(a);
    }
    /* a hot-swap to the dense plan: the dense load's logits (GELU and the
     * norms kept through the swap) */
    eng_load_plan_params dp = eng_load_plan_params_default();
    CHECKF(eng_model_swap(sel, &dp, NULL, &err) == 0, "%s", err.msg);
    unlink(path);
    CHECK(eng_session_new(m, NULL, &a) == 0 && eng_session_new(sel, NULL, &b) == 0);
    CHECK(eng_session_eval(a, TOKENS, N_TOK, 0) == 0 && eng_session_eval(b, TOKENS, N_TOK, 0) == 0);
    const double d2 = max_diff(eng_session_logits(a, -1), eng_session_logits(b, -1), V);
    eng_session_free(a);
    eng_session_free(b);
    printf("%-12s one at a time vs one batch: max |diff| %.2g; selective decode shares %.2f %.2f; "
           "swapped to dense: %.2g\n", shape, d1, share[0], share[1], d2);
    /* (gemma4's unscaled scores of normalised q and k show a sum's order
     * more than others do: 0.001 on aarch64) */
    const double tol = strstr(shape, "gemma4") || strstr(shape, "gemma3n") ? 5e-3 : 1e-3;
    CHECKF(d2 < tol, "%s swapped to dense: logits %g from the dense load", shape, d2);
    CHECKF(d1 < tol, "%s: token by token, logits %g from the batch's", shape, d1);
    CHECKF(share[0] > 0.3 && share[0] < 0.5 && share[1] > 0.3 && share[1] < 0.6,
           "%s: decode computed %.2f / %.2f of the FFN at phi 0.4", shape, share[0], share[1]);
    eng_model_free(sel);
    eng_model_free(m);
}

/* The shape's file (si-synth's default type) loaded as the engine's
 * defaults on 2 threads; the file removed. */
static eng_model *load_synth(const char *synth, const char *shape)
{
    char path[32];
    test_synth(synth, shape, path);
    eng_model_params mp = eng_model_params_default();
    mp.n_threads = 2;
    eng_model *m = NULL;
    eng_error err;
    CHECKF(eng_model_load(path, &mp, &m, &err) == 0, "%s", err.msg);
    unlink(path);
    return m;
}

/* The shape's f32 file (at path, which the caller unlinks) loaded in f32
 * on 2 threads. */
static eng_model *load_f32(const char *synth, const char *shape, char *path)
{
    test_synth_type(synth, shape, "f32", path);
    eng_model_params mp = eng_model_params_default();
    mp.n_threads = 2;
    mp.storage = ENG_DTYPE_F32;
    eng_model *m;
    eng_error err;
    CHECKF(eng_model_load(path, &mp, &m, &err) == 0, "%s: %s", shape, err.msg);
    return m;
}

static void last_logits(const eng_model *m, bool one_by_one, float *out);

/* The last token's logits of TOKENS in one batch, a token at a time and in
 * chunks of 5, each of n_vocab; returns the chunks' session (the caller's). */
static eng_session *three_ways(eng_model *m, float *batch, float *one, float *chunk)
{
    last_logits(m, false, batch);
    last_logits(m, true, one);
    eng_session_params sp = eng_session_params_default();
    sp.n_batch = 5;
    eng_session *s;
    CHECK(eng_session_new(m, &sp, &s) == 0 && eng_session_eval(s, TOKENS, N_TOK, 0) == 0);
    memcpy(chunk, eng_session_logits(s, -1), sizeof(float) * (size_t)m->info.n_vocab);
    return s;
}

/* Last-token logits of TOKENS under model m: one batch, or (one_by_one)
 * a token at a time. */
static void last_logits(const eng_model *m, bool one_by_one, float *out)
{
    eng_session *s;
    CHECK(eng_session_new(m, NULL, &s) == 0);
    for (int t = 0; one_by_one && t < N_TOK; t++)
        CHECK(eng_session_eval(s, &TOKENS[t], 1, 0) == 0);
    if (!one_by_one)
        CHECK(eng_session_eval(s, TOKENS, N_TOK, 0) == 0);
    memcpy(out, eng_session_logits(s, -1), sizeof(float) * (size_t)m->info.n_vocab);
    eng_session_free(s);
}

/* The bytes a decode step of m reads by the rule: the head, every layer's
 * matrices and router, and `slots` of its FFN's slots. */
static uint64_t step_bytes(const eng_model *m, int slots)
{
    const int E = m->info.n_embd;
    uint64_t b = (uint64_t)eng_dtype_bytes(m->output.dtype, (size_t)m->info.n_vocab * E);
    for (int il = 0; il < m->info.n_layer; il++) {
        const eng_layer *L = &m->layers[il];
        const eng_weight *w[6] = { &L->wq, &L->wk, &L->wv, &L->wo, &L->moe.router, &L->wg };
        for (int k = 0; k < 6; k++)
            b += eng_dtype_bytes(w[k]->dtype, (size_t)w[k]->rows * w[k]->cols);
        b += (uint64_t)slots * eng_ffn_slot_bytes(L->ffn.dtype, E, eng_ffn_rows(&L->ffn));
    }
    return b;
}

/* Experts in Q8_0 and Q4_1 files of shape (the daemon's storage: Q8_0,
 * or Q4_1 gate and up rows with Q8_0 down rows): within their rounding of
 * the f32 load (dq[k] below max_dq), decode within 5e-3 of prefill (d2[k]). */
static void check_quant_files(const char *synth, const char *shape, double max_dq, double *dq,
                              double *d2)
{
    static const char *const types[] = { "q8_0", "q4_1" };
    static const eng_dtype dts[] = { ENG_DTYPE_Q8_0, ENG_DTYPE_Q4_1 };
    static float a[320], b[320], c[320];
    eng_model_params mp = eng_model_params_default();
    mp.n_threads = 2;
    eng_error err;
    char path[32];
    for (int k = 0; k < 2; k++) {
        eng_model *m = NULL, *q = NULL;
        test_synth_type(synth, shape, types[k], path);
        mp.storage = ENG_DTYPE_F16;
        mp.q8_matrices = true;
        CHECKF(eng_model_load(path, &mp, &q, &err) == 0, "%s", err.msg);
        mp.storage = ENG_DTYPE_F32;
        mp.q8_matrices = false;
        CHECKF(eng_model_load(path, &mp, &m, &err) == 0, "%s", err.msg);
        unlink(path);
        CHECK(q->info.ffn_dtype == dts[k] && q->info.n_vocab <= 320);
        last_logits(q, false, b);
        last_logits(q, true, c);
        last_logits(m, false, a);
        dq[k] = max_diff(a, b, q->info.n_vocab);
        d2[k] = max_diff(b, c, q->info.n_vocab);
        /* (decode takes x in 8 bits against Q4_1 rows, a prefill in f32) */
        CHECKF(dq[k] > 0 && dq[k] < max_dq && d2[k] < 5e-3, "%s %s: logits %g from the f32 load, "
               "%g by token", shape, types[k], dq[k], d2[k]);
        eng_model_free(q);
        eng_model_free(m);
    }
}

/* Experts (tiny-qwen3moe): decode (one token: each picked expert's rows
 * read alone) equals prefill (tokens grouped by expert); a Q8_0 and a
 * Q4_1 file (the daemon's storage: Q4_1 gate and up rows, Q8_0 down)
 * within their rounding of the f32 load; what counts a step's bytes
 * counts n_used experts; and what would choose neurons otherwise is
 * refused with a reason (a plan, selective decode, profiling, a swap). */
static void check_moe(const char *synth)
{
    char path[32];
    test_synth(synth, "tiny-qwen3moe", path);
    eng_model_params mp = eng_model_params_default();
    mp.n_threads = 2;
    eng_model *m = NULL, *q = NULL;
    eng_error err;
    CHECKF(eng_model_load(path, &mp, &m, &err) == 0, "%s", err.msg);
    const int V = m->info.n_vocab;
    CHECK(m->info.n_expert == 8 && m->info.n_expert_used == 2 && m->info.n_ff == 8 * 32);
    static float a[320], b[320], c[320];
    last_logits(m, false, a);
    last_logits(m, true, b);
    const double d1 = max_diff(a, b, V);
    CHECKF(d1 < 1e-3, "tiny-qwen3moe: token by token, logits %g from the batch's", d1);
    /* a step reads every matrix, the router and 2 of 8 experts */
    const uint64_t want = step_bytes(m, 2 * 32);
    CHECKF(m->info.bytes_per_token == want, "bytes a step reads: %llu, not %llu",
           (unsigned long long)m->info.bytes_per_token, (unsigned long long)want);

    eng_session *s;
    CHECK(eng_session_new(m, NULL, &s) == 0);
    eng_compute_params cp = eng_compute_params_default();
    cp.phi = 0.4f;
    CHECK(eng_session_set_compute(s, &cp) == -ENOTSUP);
    static double sums[2 * 8 * 32];
    CHECK(eng_session_observe_ffn(s, sums) == -ENOTSUP);
    eng_profile *prof = NULL;
    CHECK(eng_profile_new(m, &prof) == -ENOTSUP && !prof);
    eng_session_free(s);
    /* a swap to the dense plan changes nothing; to another is refused */
    eng_load_plan_params pp = eng_load_plan_params_default();
    eng_swap_stats st;
    CHECKF(eng_model_swap(m, &pp, &st, &err) == 0, "%s", err.msg);
    CHECK(st.neurons_in == 0 && st.neurons_out == 0);
    last_logits(m, false, c);
    CHECK(max_diff(a, c, V) == 0);
    pp.mode = ENG_SELECT_RANDOM;
    pp.gamma = 0.7f;
    CHECK(eng_model_swap(m, &pp, NULL, &err) == -ENOTSUP && strstr(err.msg, "experts"));
    pp = eng_load_plan_params_default();
    pp.mode = ENG_SELECT_COREINFER;
    mp.plan = &pp;
    CHECK(eng_model_load(path, &mp, &q, &err) == -ENOTSUP && strstr(err.msg, "experts"));
    mp.plan = NULL;
    mp.storage = ENG_DTYPE_F32;
    CHECKF(eng_model_load(path, &mp, &q, &err) == 0, "%s", err.msg);
    unlink(path);
    last_logits(q, false, a);
    eng_model_free(q);
    eng_model_free(m);

    double dq[2], d2[2];
    check_quant_files(synth, "tiny-qwen3moe", 0.05, dq, d2);
    printf("tiny-qwen3moe q8_0, q4_1: token by token vs one batch %.2g, %.2g; against their f32 "
           "load %.3g, %.3g\n", d2[0], d2[1], dq[0], dq[1]);
    printf("tiny-qwen3moe token by token vs one batch %.2g; plans, selective decode, profiling, "
           "swaps refused\n", d1);
}

/* A shared expert (tiny-qwen2moe's, gated; tiny-granitehybrid-moe's, beside
 * Mamba-2 mixers; tiny-qwen35moe's, gated, beside delta nets): its S neurons in the slots after the NE experts' of F,
 * decode (the picked experts and the shared one in one walk) equal to
 * prefill (the shared one over all tokens), what a step reads counting it
 * whole, and Q8_0 and Q4_1 files (the shared tensors' blocks kept or
 * converted, their W_down columns from their own rows) within their
 * rounding of the f32 load (max_dq). */
static void check_shared(const char *synth, const char *shape, int NE, int F, int S, bool gated,
                         double max_dq)
{
    eng_model *m = load_synth(synth, shape);
    const int V = m->info.n_vocab;
    CHECK(m->info.n_ff == NE * F + S);
    for (int il = 0; il < m->info.n_layer; il++) {
        const eng_layer *L = &m->layers[il];
        CHECK(L->ffn.n_slots == NE * F + S && L->moe.n_ff_shared == S &&
              (L->moe.shared_gate != NULL) == gated);
    }
    const uint64_t want = step_bytes(m, m->info.n_expert_used * F + S);
    CHECKF(m->info.bytes_per_token == want, "%s: a step reads %llu, not %llu", shape,
           (unsigned long long)m->info.bytes_per_token, (unsigned long long)want);
    static float a[320], b[320];
    last_logits(m, false, a);
    last_logits(m, true, b);
    const double d1 = max_diff(a, b, V);
    CHECKF(d1 < 1e-3, "%s: token by token, logits %g from the batch's", shape, d1);
    eng_model_free(m);
    double dq[2], d2[2];
    check_quant_files(synth, shape, max_dq, dq, d2);
    printf("%s shared expert of %d: token by token %.2g; q8_0 %.3g, q4_1 %.3g from f32\n",
           shape, S, d1, dq[0], dq[1]);
}

/* LFM2-MoE (tiny-lfm2moe): two dense FFNs of 96 neurons before layers of
 * 8 experts of 32: each layer holds its own, the plan counts them, decode
 * equals prefill (the convolution rings and the experts together), and a
 * swap to the dense plan changes nothing (the plan's n_ff, the widest
 * layer's, is not every layer's). */
static void check_lfm2moe(const char *synth)
{
    char path[32];
    test_synth(synth, "tiny-lfm2moe", path);
    eng_model_params mp = eng_model_params_default();
    mp.n_threads = 2;
    eng_model *m = NULL;
    eng_error err;
    CHECKF(eng_model_load(path, &mp, &m, &err) == 0, "%s", err.msg);
    CHECK(m->info.n_ff == 256 && m->info.n_expert == 8 && m->info.n_expert_used == 2);
    for (int il = 0; il < m->info.n_layer; il++)
        CHECKF(m->layers[il].ffn.n_slots == (il < 2 ? 96 : 256) &&
                   (m->layers[il].moe.router.data != NULL) == (il >= 2) &&
                   (m->layers[il].moe.bias != NULL) == (il >= 2),
               "layer %d: %d slots", il, m->layers[il].ffn.n_slots);
    eng_plan_info pi;
    eng_model_get_plan(m, &pi);
    CHECK(pi.neurons_loaded == 2 * 96 + 3 * 256 && pi.neurons_total == pi.neurons_loaded);
    static float a[1024], b[1024];
    last_logits(m, false, a);
    last_logits(m, true, b);
    const double d1 = max_diff(a, b, 1024);
    CHECKF(d1 < 1e-3, "tiny-lfm2moe: token by token, logits %g from the batch's", d1);
    eng_load_plan_params pp = eng_load_plan_params_default();
    CHECKF(eng_model_swap(m, &pp, NULL, &err) == 0, "%s", err.msg);
    last_logits(m, false, b);
    CHECK(max_diff(a, b, 1024) == 0);
    eng_model_get_plan(m, &pi);
    CHECK(pi.neurons_loaded == 2 * 96 + 3 * 256);
    unlink(path);
    printf("tiny-lfm2moe dense layers of 96 and experts of 8 x 32; token by token vs one batch "
           "%.2g; a swap to dense changes nothing\n", d1);
    eng_model_free(m);
}

/* Tokens a generation made (eng_generate's text callback). */
static int count_text(void *userdata, const char *text, size_t len)
{
    (void)text;
    (void)len;
    ++*(int *)userdata;
    return 0;
}

/* granitehybrid (tiny-granitehybrid) and qwen35 (tiny-qwen35): a Mamba-2
 * state or a delta net's holds the whole past of one position (n_ssm such
 * layers, attention in layer attn, without RoPE where nope, each state of
 * state_bytes; attn -1: falcon-h1's, a mixer beside attention in every
 * layer, its convolution's ring beside the KV cache). Decode equals
 * prefill (the state and the convolution's ring carried between steps),
 * and so do chunks of 5; a prompt cache keeps a prefix only where the
 * states stand or their checkpoint does, and the ring still holds what
 * follows (elsewhere the prompt is evaluated whole, to the same logits);
 * a context shift is refused, and a generation that fills its context
 * evaluates what it keeps again; a random plan's neurons run beside the
 * mixers. */
static void check_hybrid(const char *synth, const char *shape, int n_ssm, int attn, bool nope,
                         uint64_t state_bytes)
{
    char path[32];
    test_synth(synth, shape, path);
    eng_model_params mp = eng_model_params_default();
    mp.n_threads = 2;
    eng_model *m = NULL, *r = NULL;
    eng_error err;
    CHECKF(eng_model_load(path, &mp, &m, &err) == 0, "%s", err.msg);
    const int V = m->info.n_vocab;
    CHECK(m->info.n_vocab <= 1024 && m->info.n_ssm == n_ssm && m->layers[0].ssm.a &&
          (attn < 0 ? m->layers[0].sout.data && m->layers[0].n_head_kv > 0 &&
                          m->layers[n_ssm - 1].sout.data
                    : !m->layers[attn].ssm.a && m->layers[attn].nope == nope));
    static float a[1024], b[1024]; /* (the widest vocabulary checked here) */
    last_logits(m, false, a);
    last_logits(m, true, b);
    const double d1 = max_diff(a, b, V);
    CHECKF(d1 < 1e-3, "%s: token by token, logits %g from the batch's", shape, d1);

    eng_session_params sp = eng_session_params_default();
    sp.n_batch = 5;
    eng_session *s;
    CHECK(eng_session_new(m, &sp, &s) == 0);
    /* (falcon-h1's caches: every layer's K and V, 2048 rows of two heads
     * of 32 in f16, and its convolution's ring of the 4 positions a token
     * reads and their checkpoint, of x, B and C, 96 + 2 x 2 x 16 f32, not
     * growing with the batch; the states and their checkpoint) */
    const size_t ring = (size_t)n_ssm * (4 + 4) * 160 * 4;
    CHECKF(attn >= 0 || eng_session_kv_bytes(s) == (size_t)n_ssm * 2048 * 64 * 2 * 2 + ring +
                                                     2 * (size_t)n_ssm * state_bytes,
           "%s: %zu bytes of caches", shape, eng_session_kv_bytes(s));
    CHECK(eng_session_eval(s, TOKENS, N_TOK, 0) == 0);
    const double d2 = max_diff(a, eng_session_logits(s, -1), V);
    CHECKF(d2 < 1e-4, "%s: chunks of 5, logits %g from one batch's", shape, d2);

    /* the prompt cache: 8 tokens held, the state after them */
    eng_session_reset(s);
    CHECK(eng_session_eval(s, TOKENS, 8, 0) == 0);
    CHECK(eng_session_reset_prefix(s, TOKENS, N_TOK) == 8);
    CHECK(eng_session_eval(s, TOKENS + 8, N_TOK - 8, 0) == 0);
    const double d3 = max_diff(a, eng_session_logits(s, -1), V);
    CHECKF(d3 < 1e-4, "%s: 8 tokens kept, logits %g off", shape, d3);
    /* a prompt that agrees with the 12 held in its first 6 only: all of
     * it again, the state from nothing */
    int32_t other[N_TOK];
    memcpy(other, TOKENS, sizeof(other));
    other[6] = 3;
    CHECKF(eng_session_reset_prefix(s, other, N_TOK) == 0, "a prefix kept where no state is");
    CHECK(eng_session_eval(s, other, N_TOK, 0) == 0);
    memcpy(b, eng_session_logits(s, -1), sizeof(float) * (size_t)V);
    eng_session *fresh;
    CHECK(eng_session_new(m, &sp, &fresh) == 0);
    CHECK(eng_session_eval(fresh, other, N_TOK, 0) == 0);
    CHECK(max_diff(b, eng_session_logits(fresh, -1), V) == 0);
    eng_session_free(fresh);
    /* the same prompt again: kept up to the checkpoint its prefill took
     * two tokens before its end, those two evaluated from there */
    eng_session_reset(s);
    CHECK(eng_session_eval(s, TOKENS, N_TOK, 0) == 0);
    CHECKF(eng_session_reset_prefix(s, TOKENS, N_TOK) == N_TOK - 2, "no checkpoint kept");
    CHECK(eng_session_eval(s, TOKENS + N_TOK - 2, 2, 0) == 0);
    const double d5 = max_diff(a, eng_session_logits(s, -1), V);
    CHECKF(d5 < 1e-4, "%s: from the checkpoint, logits %g off", shape, d5);
    /* the checkpoint (position 10) again after six more positions, a
     * token at a time: the rings hold only what the next token reads, but
     * the checkpoint keeps what position 10 reads, so it is kept, and the
     * logits are a fresh evaluation's in the same chunks of 5, bit for bit */
    int32_t longer[N_TOK + 3];
    memcpy(longer, TOKENS, sizeof(TOKENS));
    longer[N_TOK] = 9, longer[N_TOK + 1] = 11, longer[N_TOK + 2] = 13;
    for (int t = 0; t < 6; t++)
        CHECK(eng_session_eval(s, &TOKENS[t], 1, 0) == 0);
    CHECKF(eng_session_reset_prefix(s, longer, N_TOK + 3) == N_TOK - 2,
           "%s: the checkpoint not kept after decode went on", shape);
    CHECK(eng_session_eval(s, longer + N_TOK - 2, 5, 0) == 0);
    memcpy(b, eng_session_logits(s, -1), sizeof(float) * (size_t)V);
    CHECK(eng_session_new(m, &sp, &fresh) == 0);
    CHECK(eng_session_eval(fresh, longer, N_TOK + 3, 0) == 0);
    CHECK(max_diff(b, eng_session_logits(fresh, -1), V) == 0);
    eng_session_free(fresh);
    CHECK(m->info.bytes_ssm_state == (uint64_t)n_ssm * state_bytes);
    CHECK(eng_session_shift(s, 2, 4) == -ENOTSUP);
    eng_session_free(s);

    /* a context of 16 filled twice over: shifts that evaluate again */
    sp.n_ctx = 16;
    sp.n_batch = 16;
    CHECK(eng_session_new(m, &sp, &s) == 0);
    eng_gen_params gp = eng_gen_params_default();
    gp.max_tokens = 24;
    gp.context_shift = true;
    gp.n_keep = 2;
    gp.sampler.temperature = 0.0f;
    eng_gen_stats st;
    int pieces = 0;
    CHECK(eng_generate(s, TOKENS, N_TOK, &gp, count_text, &pieces, &st) == 0);
    CHECKF(st.n_generated == 24 && st.n_shifts > 0 && pieces == 24,
           "%s: %d generated, %d shifts", shape, st.n_generated, st.n_shifts);
    eng_session_free(s);

    /* half the FFN's neurons, picked at random, under the mixers (not
     * inside experts, which selection leaves alone: daemon-moe) */
    if (m->info.n_expert > 0) {
        unlink(path);
        printf("%s token by token vs one batch %.2g, chunks of 5 %.2g, a kept prefix %.2g, "
               "from the checkpoint %.2g; shifts evaluate again\n", shape, d1, d2, d3, d5);
        eng_model_free(m);
        return;
    }
    eng_load_plan_params pp = eng_load_plan_params_default();
    pp.mode = ENG_SELECT_RANDOM;
    pp.gamma = 0.5f;
    pp.seed = 3;
    mp.plan = &pp;
    CHECKF(eng_model_load(path, &mp, &r, &err) == 0, "%s", err.msg);
    unlink(path);
    eng_plan_info pi;
    eng_model_get_plan(r, &pi);
    CHECK(pi.neurons_loaded == pi.neurons_total / 2);
    last_logits(r, false, a);
    last_logits(r, true, b);
    const double d4 = max_diff(a, b, V);
    CHECKF(d4 < 1e-3, "%s, half the neurons: token by token %g off", shape, d4);
    printf("%s token by token vs one batch %.2g, chunks of 5 %.2g, a kept prefix "
           "%.2g, from the checkpoint %.2g; shifts evaluate again; half the neurons %.2g\n", shape,
           d1, d2, d3, d5, d4);
    eng_model_free(r);
    eng_model_free(m);
}

/* nemotron_h's un-gated MLP (tiny-nemotron-h, f32): each slot one row,
 * the file's up row of its neuron byte for byte, beside its down row, so
 * the FFN's resident bytes are 2 rows a neuron (n_embd f32 each, counted
 * here without the engine's helpers) dense and at gamma 0.5; a budget of
 * the dense weights less half the FFN's solves to half the neurons, and
 * what loads fits it (the plan prices a neuron as it is stored). */
static void check_ungated(const char *synth)
{
    char path[32];
    eng_model *m = load_f32(synth, "tiny-nemotron-h", path);
    const int E = m->info.n_embd;
    const uint64_t row = (uint64_t)E * sizeof(float);
    gguf_file *f = NULL;
    eng_error err;
    CHECKF(gguf_open(path, &f, &err) == 0, "%s", err.msg);
    int mlps = 0, bad = 0;
    uint64_t slots = 0;
    for (int il = 0; il < m->info.n_layer; il++) {
        const eng_layer *L = &m->layers[il];
        slots += (uint64_t)L->ffn.n_slots;
        if (!L->mlp_only)
            continue;
        mlps++;
        bad += L->ffn.act != ENG_ACT_RELU_SQR || eng_ffn_rows(&L->ffn) != 1;
        char name[64];
        snprintf(name, sizeof(name), "blk.%d.ffn_up.weight", il);
        const gguf_tensor *t = f ? gguf_find_tensor(f, name) : NULL;
        CHECK(t && t->type == GGML_TYPE_F32);
        for (int j = 0; t && j < L->ffn.n_slots; j++)
            bad += memcmp((const uint8_t *)L->ffn.gate_up + (size_t)j * row,
                          (const uint8_t *)t->data + (size_t)L->neuron_of_slot[j] * row, row) != 0;
    }
    gguf_close(f);
    eng_plan_info pi;
    eng_model_get_plan(m, &pi);
    CHECKF(mlps > 0 && bad == 0 && slots == pi.neurons_total && pi.neurons_loaded == slots &&
               pi.bytes_ffn == slots * 2 * row && pi.bytes_sketch == 0,
           "tiny-nemotron-h: %d MLPs, %d slots not one up row as the file's; FFN %llu bytes for "
           "%llu neurons, want 2 rows of %llu each", mlps, bad,
           (unsigned long long)pi.bytes_ffn, (unsigned long long)slots, (unsigned long long)row);
    const uint64_t dense_w = m->info.bytes_weights, dense_ffn = pi.bytes_ffn;
    static float dense[1024], got[1024];
    const int V = m->info.n_vocab;
    CHECK(V <= 1024);
    last_logits(m, false, dense);
    eng_model_free(m);

    /* gamma 0.5 (random), then a budget of the dense weights less half
     * the FFN's */
    eng_model_params mp = eng_model_params_default();
    mp.n_threads = 2;
    mp.storage = ENG_DTYPE_F32;
    eng_load_plan_params pp = eng_load_plan_params_default();
    pp.mode = ENG_SELECT_RANDOM;
    pp.gamma = 0.5f;
    pp.seed = 5;
    mp.plan = &pp;
    eng_model *h = NULL, *b = NULL;
    CHECKF(eng_model_load(path, &mp, &h, &err) == 0, "%s", err.msg);
    eng_plan_info ph = { 0 };
    if (h)
        eng_model_get_plan(h, &ph);
    const uint64_t half_w = h ? h->info.bytes_weights : 0;
    CHECKF(h && ph.neurons_loaded == ph.neurons_total / 2 &&
               ph.bytes_ffn == ph.neurons_loaded * 2 * row &&
               half_w == dense_w - dense_ffn + ph.bytes_ffn,
           "tiny-nemotron-h gamma 0.5: %llu of %llu neurons, FFN %llu bytes, weights %llu",
           (unsigned long long)ph.neurons_loaded, (unsigned long long)ph.neurons_total,
           (unsigned long long)ph.bytes_ffn, (unsigned long long)half_w);
    /* a plan with the sketch (pick=token's): refused, nothing to sketch */
    eng_model *k = NULL;
    pp.sketch = true;
    const int rk = eng_model_load(path, &mp, &k, &err);
    CHECKF(rk == -ENOTSUP && !k && strstr(err.msg, "picked per token"),
           "tiny-nemotron-h with a sketch: %d (%s)", rk, rk < 0 ? err.msg : "loaded");
    eng_model_free(k);
    pp.sketch = false;
    pp.gamma = 0.0f;
    pp.budget_bytes = dense_w - dense_ffn / 2;
    CHECKF(eng_model_load(path, &mp, &b, &err) == 0, "%s", err.msg);
    eng_plan_info pb = { 0 };
    if (b)
        eng_model_get_plan(b, &pb);
    /* phi 0.3 a request (its dynamic neurons copied: 2 rows each), then
     * pick=exact, on the half, then phi 0.3 with comp=mean and linear
     * (which make up for the neurons left out from the un-gated
     * activations: other logits than without); then a hot-swap back to
     * every neuron */
    size_t copied = 0, want = 0;
    static float plain[1024];
    double dcomp[4] = { 0 };
    for (int k = 0; h && k < 4; k++) {
        eng_compute_params cp = eng_compute_params_default();
        cp.phi = k == 1 ? 0.4f : 0.3f;
        cp.pick = k == 1 ? ENG_PICK_EXACT : ENG_PICK_REQUEST;
        cp.comp = k == 2 ? ENG_COMP_MEAN : k == 3 ? ENG_COMP_LINEAR : ENG_COMP_NONE;
        eng_session *s = NULL;
        CHECK(eng_session_new(h, NULL, &s) == 0 && eng_session_set_compute(s, &cp) == 0);
        CHECK(s && eng_session_eval(s, TOKENS, N_TOK, 0) == 0 &&
              eng_session_eval(s, &TOKENS[0], 1, N_TOK) == 0);
        const float *lg = s ? eng_session_logits(s, -1) : NULL;
        bool finite = lg != NULL;
        for (int i = 0; lg && i < V; i++)
            finite = finite && isfinite(lg[i]);
        CHECKF(finite && eng_session_ffn_share(s) < 0.5, "tiny-nemotron-h phi %.1f %s: share %g",
               cp.phi, k == 1 ? "exact" : eng_comp_name(cp.comp),
               s ? eng_session_ffn_share(s) : -1.0);
        if (lg && k == 0)
            memcpy(plain, lg, sizeof(float) * (size_t)V);
        if (lg && k >= 2)
            dcomp[k] = max_diff(plain, lg, V);
        for (int il = 0; k == 0 && s && il < h->info.n_layer; il++) {
            const int32_t *sel = s->ffn_sel[il];
            const int n = sel ? s->ffn_n_sel[il] : 0;
            int from = 0;
            while (from < n && sel[from] == from)
                from++;
            want += (size_t)(n - from) * 2 * row;
        }
        if (k == 0 && s)
            copied = eng_session_copy_bytes(s);
        eng_session_free(s);
    }
    CHECKF(want > 0 && copied == want, "tiny-nemotron-h phi 0.3: %zu bytes copied, want %zu",
           copied, want);
    CHECKF(dcomp[2] > 1e-3 && dcomp[3] > 1e-3, "tiny-nemotron-h phi 0.3: comp=mean %g and "
           "linear %g from the logits without", dcomp[2], dcomp[3]);
    eng_load_plan_params dp = eng_load_plan_params_default();
    CHECKF(h && eng_model_swap(h, &dp, NULL, &err) == 0, "%s", err.msg);
    if (h)
        last_logits(h, false, got);
    const double dswap = h ? max_diff(dense, got, V) : 1.0;
    CHECKF(dswap < 1e-4, "tiny-nemotron-h swapped to every neuron: %g from the dense load", dswap);
    unlink(path);
    CHECKF(b && pb.neurons_loaded == pb.neurons_total / 2 &&
               b->info.bytes_weights <= pp.budget_bytes && b->info.bytes_weights == half_w,
           "tiny-nemotron-h, a budget of %llu bytes: %llu of %llu neurons, %llu bytes of weights",
           (unsigned long long)pp.budget_bytes, (unsigned long long)pb.neurons_loaded,
           (unsigned long long)pb.neurons_total,
           (unsigned long long)(b ? b->info.bytes_weights : 0));
    printf("tiny-nemotron-h: one row a slot, %llu neurons of 2 x %llu bytes; gamma 0.5 and a "
           "budget of %llu bytes both load %llu neurons; phi 0.3 copies %zu bytes, pick=exact, "
           "comp=mean %.2g and linear %.2g from none, a swap to all %.2g\n",
           (unsigned long long)slots, (unsigned long long)row, (unsigned long long)pp.budget_bytes,
           (unsigned long long)pb.neurons_loaded, copied, dcomp[2], dcomp[3], dswap);
    eng_model_free(b);
    eng_model_free(h);
}

/* nemotron_h_moe's experts (tiny-nemotron-h-moe, f32, MEM*EEM*): in its
 * three MLP layers alone, 8 experts of 32 un-gated slots and a shared
 * expert of 48 after them, each slot the file's up row of its neuron
 * (ffn_up_exps', then ffn_up_shexp's), picked by sigmoid plus the file's
 * bias, normalised and scaled by 2.5 as its keys say; a trailing block of
 * multi-token prediction (nextn_predict_layers) is not run: its arrays
 * still cover it. */
static void check_nemotron_moe(const char *synth)
{
    char path[32];
    eng_model *m = load_f32(synth, "tiny-nemotron-h-moe", path);
    const uint64_t row = (uint64_t)m->info.n_embd * sizeof(float);
    gguf_file *f = NULL;
    eng_error err;
    CHECKF(gguf_open(path, &f, &err) == 0, "%s", err.msg);
    int moe = 0, bad = 0;
    for (int il = 0; il < m->info.n_layer; il++) {
        const eng_layer *L = &m->layers[il];
        const bool e = il == 1 || il == 4 || il == 5;
        if (!e) {
            bad += L->moe.router.data != NULL || L->ffn.n_slots != 0;
            continue;
        }
        moe++;
        bad += !L->mlp_only || !L->moe.router.data || !L->moe.bias || !L->moe.sigmoid ||
               !L->moe.norm || L->moe.scale != 2.5f || L->moe.n_expert != 8 ||
               L->moe.n_used != 2 || L->moe.n_ff_exp != 32 || L->moe.n_ff_shared != 48 ||
               L->moe.shared_gate || L->ffn.n_slots != 8 * 32 + 48 ||
               L->ffn.act != ENG_ACT_RELU_SQR || eng_ffn_rows(&L->ffn) != 1;
        char ne[64], ns[64];
        snprintf(ne, sizeof(ne), "blk.%d.ffn_up_exps.weight", il);
        snprintf(ns, sizeof(ns), "blk.%d.ffn_up_shexp.weight", il);
        const gguf_tensor *te = f ? gguf_find_tensor(f, ne) : NULL;
        const gguf_tensor *ts = f ? gguf_find_tensor(f, ns) : NULL;
        CHECK(te && ts && te->type == GGML_TYPE_F32 && ts->type == GGML_TYPE_F32);
        for (int j = 0; te && ts && j < L->ffn.n_slots; j++) {
            const int32_t n = L->neuron_of_slot[j];
            const uint8_t *src = n < 256 ? (const uint8_t *)te->data + (size_t)n * row
                                         : (const uint8_t *)ts->data + (size_t)(n - 256) * row;
            bad += memcmp((const uint8_t *)L->ffn.gate_up + (size_t)j * row, src, row) != 0;
        }
    }
    gguf_close(f);
    CHECKF(moe == 3 && bad == 0 && m->info.n_expert == 8 && m->info.n_ff == 8 * 32 + 48,
           "tiny-nemotron-h-moe: %d layers of experts, %d things not as the file says", moe,
           bad);
    eng_model_free(m);
    unlink(path);

    synth_kv(synth, "tiny-nemotron-h-moe", "f32", "nemotron_h_moe.nextn_predict_layers=u32:1",
             path);
    eng_model_params mp = eng_model_params_default();
    mp.n_threads = 2;
    int r = eng_model_load(path, &mp, &m, &err);
    CHECKF(r == 0 && m->info.n_layer == 7 && m->layers[5].moe.router.data,
           "tiny-nemotron-h-moe, its last block a draft: %d (%s), %d layers", r,
           r < 0 ? err.msg : "loaded", r == 0 ? m->info.n_layer : 0);
    if (r == 0) {
        eng_session *s;
        CHECK(eng_session_new(m, NULL, &s) == 0 && eng_session_eval(s, TOKENS, N_TOK, 0) == 0);
        eng_session_free(s);
        eng_model_free(m);
    }
    unlink(path);
}

/* The bytes of a hybrid's caches in a context of n_ctx (no sliding
 * windows, f16): attention's K and V; a convolution's rows (lfm2's, a
 * Mamba-2 mixer's in place of attention or beside it), the window's
 * positions and as many at the checkpoint, in f32; the states and their
 * checkpoint. Nothing grows with the batch. */
static size_t conv_cache_bytes(const eng_model *m, int n_ctx)
{
    size_t b = 2 * (size_t)m->info.bytes_ssm_state;
    for (int il = 0; il < m->info.n_layer; il++) {
        const eng_layer *L = &m->layers[il];
        if (L->conv_ch)
            b += 2 * (size_t)L->window * (size_t)L->conv_ch * sizeof(float);
        else if (L->kv_src == il && L->n_head_kv > 0 && !L->mlp_only)
            b += 2 * (size_t)n_ctx * (size_t)L->n_head_kv * (size_t)L->head_dim * 2;
        if (L->sout.data)
            b += 2 * (size_t)L->ssm.d_conv * (size_t)eng_ssm_conv_ch(&L->ssm) * sizeof(float);
    }
    return b;
}

/* c (rings of the taps' positions) and f (rings of every position), both
 * after the N_TOK positions of held: a prompt that agrees with them in
 * N_TOK - 1. lfm2's rings hold what position N_TOK - 1 reads (the last
 * chunk copied its rows back), so c keeps N_TOK - 1, as f does; Mamba-2
 * states keep the checkpoint's N_TOK - 2. The same logits, bit for bit. */
static void keep_all_but_last(const eng_model *m, eng_session *c, eng_session *f,
                              const int32_t *held, const char *shape, int B)
{
    int32_t u[N_TOK + 2];
    memcpy(u, held, sizeof(TOKENS));
    u[N_TOK - 1] = 3, u[N_TOK] = 9, u[N_TOK + 1] = 13;
    eng_session *both[2] = { c, f };
    int kept[2];
    for (int k = 0; k < 2; k++) {
        kept[k] = eng_session_reset_prefix(both[k], u, N_TOK + 2);
        CHECK(eng_session_eval(both[k], u + kept[k], N_TOK + 2 - (size_t)kept[k], 0) == 0);
    }
    CHECKF(kept[0] == kept[1] && kept[0] == (m->info.n_ssm ? N_TOK - 2 : N_TOK - 1),
           "%s, batch %d: kept %d of %d (full: %d)", shape, B, kept[0], N_TOK - 1, kept[1]);
    CHECKF(max_diff(eng_session_logits(c, -1), eng_session_logits(f, -1), m->info.n_vocab) == 0,
           "%s, batch %d: %d kept, logits differ from the full rings'", shape, B, kept[0]);
}

/* Convolution rows that keep only what the next token reads (lfm2's
 * layers, the Mamba-2 mixers', falcon-h1's beside attention), a batch run
 * in the session's one staging buffer: at batches of 1 to 64, fewer than
 * the 3 or 4 taps among them, the cache's bytes are conv_cache_bytes()'s
 * whatever the batch; a prompt in chunks, then decode, gives every
 * position's logits of the rings that hold every position (swa_full) bit
 * for bit; the checkpoint two tokens before the prompt's end is kept after
 * decode went past it, to the same logits as those rings' and, where the
 * chunks fall alike, as a fresh evaluation's; a prefix neither the rings
 * nor the checkpoint hold is evaluated again, to a fresh evaluation's
 * logits. */
static void check_conv_rows(const char *synth, const char *shape)
{
    eng_model *m = load_synth(synth, shape);
    const int V = m->info.n_vocab;
    enum { CTX = 64, DEC = 4 };
    const size_t want = conv_cache_bytes(m, CTX);
    static const int batches[] = { 1, 2, 3, 5, 7, 64 };
    int32_t toks[N_TOK + DEC];
    memcpy(toks, TOKENS, sizeof(TOKENS));
    for (int t = 0; t < DEC; t++)
        toks[N_TOK + t] = 3 + 11 * t;
    size_t full_bytes = 0;
    for (size_t bi = 0; bi < sizeof(batches) / sizeof(*batches); bi++) {
        const int B = batches[bi];
        eng_session_params sp = eng_session_params_default();
        sp.n_ctx = CTX;
        sp.n_batch = B;
        eng_session *c, *f, *fresh;
        CHECK(eng_session_new(m, &sp, &c) == 0);
        sp.swa_full = true;
        CHECK(eng_session_new(m, &sp, &f) == 0);
        sp.swa_full = false;
        CHECK(eng_session_new(m, &sp, &fresh) == 0);
        full_bytes = eng_session_kv_bytes(f);
        CHECKF(eng_session_kv_bytes(c) == want, "%s, batch %d: %zu bytes of caches, not %zu",
               shape, B, eng_session_kv_bytes(c), want);
        /* the prompt in chunks of B, every position's logits, then decode */
        eng_session *both[2] = { c, f };
        for (int k = 0; k < 2; k++)
            CHECK(eng_session_eval(both[k], toks, N_TOK, ENG_EVAL_ALL_LOGITS) == 0);
        for (int t = 0; t < N_TOK; t++)
            CHECKF(max_diff(eng_session_logits(c, t), eng_session_logits(f, t), V) == 0,
                   "%s, batch %d: position %d's logits differ from the full rings'", shape, B, t);
        for (int t = N_TOK; t < N_TOK + DEC; t++) {
            for (int k = 0; k < 2; k++)
                CHECK(eng_session_eval(both[k], &toks[t], 1, 0) == 0);
            CHECKF(max_diff(eng_session_logits(c, -1), eng_session_logits(f, -1), V) == 0,
                   "%s, batch %d: decode at %d differs from the full rings'", shape, B, t);
        }
        /* the prompt again: kept up to the checkpoint (N_TOK - 2), which
         * decode went past */
        int kept[2];
        for (int k = 0; k < 2; k++) {
            kept[k] = eng_session_reset_prefix(both[k], TOKENS, N_TOK);
            CHECK(eng_session_eval(both[k], TOKENS + kept[k], N_TOK - (size_t)kept[k], 0) == 0);
        }
        CHECKF(kept[0] == N_TOK - 2 && kept[1] == N_TOK - 2, "%s, batch %d: kept %d (full: %d)",
               shape, B, kept[0], kept[1]);
        CHECKF(max_diff(eng_session_logits(c, -1), eng_session_logits(f, -1), V) == 0,
               "%s, batch %d: from the checkpoint, logits differ from the full rings'", shape, B);
        CHECK(eng_session_eval(fresh, TOKENS, N_TOK, 0) == 0);
        if ((N_TOK - 2) % B == 0) /* (the same chunks) */
            CHECKF(max_diff(eng_session_logits(c, -1), eng_session_logits(fresh, -1), V) == 0,
                   "%s, batch %d: from the checkpoint, logits differ from a fresh eval's", shape,
                   B);
        keep_all_but_last(m, c, f, TOKENS, shape, B);
        /* a prompt that agrees in its first 6 positions only: neither the
         * rings (the last positions) nor the checkpoint (10) hold 6 */
        int32_t other[N_TOK];
        memcpy(other, TOKENS, sizeof(other));
        other[6] = 3;
        CHECKF(eng_session_reset_prefix(c, other, N_TOK) == 0, "%s, batch %d: a prefix kept "
               "that the rows no longer hold", shape, B);
        /* ... evaluated in pieces of 2, too short to take a checkpoint:
         * the checkpoint of TOKENS (position 10) is no longer the
         * context's, so other's own prompt keeps nothing */
        for (int t = 0; t < N_TOK; t += 2)
            CHECK(eng_session_eval(c, other + t, 2, 0) == 0);
        CHECKF(eng_session_reset_prefix(c, other, N_TOK) == 0, "%s, batch %d: the checkpoint of "
               "another context kept", shape, B);
        CHECK(eng_session_eval(c, other, N_TOK, 0) == 0);
        eng_session_reset(f);
        CHECK(eng_session_eval(f, other, N_TOK, 0) == 0);
        keep_all_but_last(m, c, f, other, shape, B);
        eng_session_reset_prefix(c, other, N_TOK);
        CHECK(eng_session_eval(c, other, N_TOK, 0) == 0);
        eng_session_reset(fresh);
        CHECK(eng_session_eval(fresh, other, N_TOK, 0) == 0);
        CHECKF(max_diff(eng_session_logits(c, -1), eng_session_logits(fresh, -1), V) == 0,
               "%s, batch %d: evaluated again, logits differ from a fresh eval's", shape, B);
        eng_session_free(c);
        eng_session_free(f);
        eng_session_free(fresh);
    }
    printf("%s convolution rows: %zu bytes of caches at batches of 1 to 64 (%zu holding every "
           "position); chunks, decode and the checkpoint bit for bit\n", shape, want, full_bytes);
    eng_model_free(m);
}

/* lfm2 in a context as long as the prompt, taken in one batch (which is
 * then the whole context): the logits of a long context's session, every
 * position's. */
static void check_conv_ctx(const char *synth)
{
    eng_model *m = load_synth(synth, "tiny-lfm2");
    eng_session_params sp = eng_session_params_default();
    sp.n_ctx = N_TOK;
    eng_session *a, *b;
    CHECK(eng_session_new(m, &sp, &a) == 0 && eng_session_new(m, NULL, &b) == 0);
    CHECK(eng_session_eval(a, TOKENS, N_TOK, ENG_EVAL_ALL_LOGITS) == 0 &&
          eng_session_eval(b, TOKENS, N_TOK, ENG_EVAL_ALL_LOGITS) == 0);
    double d = 0;
    for (int t = 0; t < N_TOK; t++) {
        const double e = max_diff(eng_session_logits(a, t), eng_session_logits(b, t), m->info.n_vocab);
        d = e > d || isnan(e) ? e : d;
    }
    printf("tiny-lfm2    a context of %d in one batch: logits within %.2g of a long one's\n", N_TOK,
           d);
    CHECKF(d < 1e-4, "tiny-lfm2: a context of %d: logits %g off", N_TOK, d);
    eng_session_free(a);
    eng_session_free(b);
    eng_model_free(m);
}

/* What a model's answer made of text's tokens prints (into out). */
static void answer_text(const eng_model *m, const char *text, char *out, size_t cap)
{
    int32_t ids[32];
    size_t n = 0, len = 0;
    CHECK(eng_tokenize(m, text, strlen(text), ENG_TOK_PARSE_SPECIAL, ids, 32, &n) == 0);
    out[0] = '\0';
    for (size_t i = 0; i < n; i++) {
        const int k = eng_token_to_piece(m, ids[i], false, out + len, cap - 1 - len);
        CHECK(k >= 0);
        len += (size_t)(k > 0 ? k : 0);
        out[len] = '\0';
    }
}

/* LFM2's markers of calls and reasoning are control tokens that answers
 * print where the model's template is LFM2's (the file's, or one set in
 * its place), so that the calls can be read back; its other control
 * tokens print nothing. */
static void check_lfm2_markers(const char *synth, const char *data_dir)
{
    char path[32], tpath[4200], out[256];
    snprintf(tpath, sizeof(tpath), "%s/chat-template-lfm2.jinja", data_dir);
    FILE *tf = fopen(tpath, "rb");
    static char tmpl[8192];
    const size_t tlen = tf ? fread(tmpl, 1, sizeof(tmpl), tf) : 0;
    CHECKF(tf && tlen > 0 && tlen < sizeof(tmpl), "cannot read %s", tpath);
    fclose(tf);
    static const char text[] = "<|tool_call_start|>[f(x=1)]<|tool_call_end|><think><|im_end|>";
    static const char shown[] = "<|tool_call_start|>[f(x=1)]<|tool_call_end|><think>";
    char args[4300];
    snprintf(args, sizeof(args), " --chat-template '%s'", tpath);
    for (int k = 0; k < 2; k++) {
        test_synth_args(synth, "tiny-lfm2", "f16", k ? "" : args, path);
        eng_model_params mp = eng_model_params_default();
        eng_model *m = NULL;
        eng_error err;
        CHECKF(eng_model_load(path, &mp, &m, &err) == 0, "%s", err.msg);
        unlink(path);
        answer_text(m, text, out, sizeof(out));
        CHECKF(!strcmp(out, k ? "[f(x=1)]" : shown), "answer printed as '%s'", out);
        if (k) { /* (si-synth's Llama 3 template), then LFM2's in its place */
            CHECK(eng_model_set_chat_template_text(m, tmpl, tlen) == 0);
            answer_text(m, text, out, sizeof(out));
            CHECKF(!strcmp(out, shown), "answer printed as '%s'", out);
        }
        eng_model_free(m);
    }
    printf("tiny-lfm2    LFM2's call markers printed in answers, its other control tokens not\n");
}

/* A shape (320 tokens) with metadata set by si-synth --kv (see synth_kv),
 * loaded: 0 and its last position's logits in out [320], or the load's
 * error (err's message). */
static int load_kv(const char *synth, const char *shape, const char *kv, float *out, eng_error *err)
{
    char path[32];
    synth_kv(synth, shape, "f16", kv, path);
    eng_model_params mp = eng_model_params_default();
    mp.n_threads = 2;
    eng_model *m = NULL;
    int r = eng_model_load(path, &mp, &m, err);
    unlink(path);
    if (r < 0)
        return r;
    eng_session *s;
    CHECK(eng_session_new(m, NULL, &s) == 0 && eng_session_eval(s, TOKENS, N_TOK, 0) == 0);
    memcpy(out, eng_session_logits(s, -1), 320 * sizeof(float));
    eng_session_free(s);
    eng_model_free(m);
    return 0;
}

/* Gemma metadata beyond the shape's: the local layers' pattern and RoPE
 * base are read (the defaults give the same logits, other values others);
 * a Gemma 3 derivative's logit cap applies (every logit within it, the
 * same argmax). What would run wrong: check_refused. */
static void check_gemma_meta(const char *synth)
{
    static float base[320], got[320];
    eng_error err;
    CHECK(load_kv(synth, "tiny-gemma3", "general.name=str:x", base, &err) == 0);
    static const struct {
        const char *kv;
        int same; /* 1: the default's logits, 0: others */
    } ok[] = {
        { "gemma3.attention.sliding_window_pattern=u32:6", 1 },
        { "gemma3.rope.freq_base_swa=f32:10000", 1 },
        { "gemma3.attention.sliding_window_pattern=u32:2", 0 },
        { "gemma3.rope.freq_base_swa=f32:500", 0 },
        { "gemma3.attention.sliding_window=u32:4294967295", 0 }, /* no cut, still local RoPE */
    };
    for (size_t i = 0; i < sizeof(ok) / sizeof(ok[0]); i++) {
        CHECKF(load_kv(synth, "tiny-gemma3", ok[i].kv, got, &err) == 0, "%s: %s", ok[i].kv, err.msg);
        const double d = max_diff(base, got, 320);
        CHECKF(ok[i].same ? d == 0 : d > 1e-3, "%s: logits %g from the default's", ok[i].kv, d);
    }
    CHECK(load_kv(synth, "tiny-gemma3", "gemma3.final_logit_softcapping=f32:0.5", got, &err) == 0);
    int a = 0, b = 0, inside = 1;
    for (int v = 0; v < 320; v++) {
        a = base[v] > base[a] ? v : a;
        b = got[v] > got[b] ? v : b;
        inside &= fabsf(got[v]) <= 0.5f && fabsf(got[v] - 0.5f * tanhf(base[v] / 0.5f)) < 1e-5f;
    }
    CHECKF(inside && a == b, "gemma3 logit cap: logits not cap * tanh(l / cap), argmax %d vs %d", b, a);
    printf("tiny-gemma3  metadata: %zu variants load as they say\n", sizeof(ok) / sizeof(ok[0]) + 1);
}

/* Phi-4-mini's partial rotation scales q's rotated rows at load, which a
 * Q8_0, Q4_K, Q5_K or Q6_K file's matrices, kept as the file's blocks
 * otherwise, must go through too (Q4_K and Q5_K: the blocks' d and dmin;
 * Q6_K: d): the logits stay near an f32 load of the same file (a skipped
 * scale moves them by O(1)). Loaded with q8_matrices, tiny-phi4-k's FFN is
 * Q4_K (Q5_K) too, from phi3's fused gate/up rows; a Q6_K file's FFN is
 * Q8_0. */
static void check_rot(const char *synth, const char *shape, const char *type, eng_dtype dt)
{
    char path[32];
    test_synth_type(synth, shape, type, path);
    eng_model_params mp = eng_model_params_default();
    mp.n_threads = 2;
    mp.q8_matrices = true;
    eng_model *ms[2] = { NULL, NULL };
    eng_error err;
    CHECKF(eng_model_load(path, &mp, &ms[0], &err) == 0, "%s", err.msg);
    mp.q8_matrices = false;
    mp.storage = ENG_DTYPE_F32;
    CHECKF(eng_model_load(path, &mp, &ms[1], &err) == 0, "%s", err.msg);
    unlink(path);
    CHECK(ms[0]->layers[0].wq.dtype == dt && ms[1]->layers[0].wq.dtype == ENG_DTYPE_F32);
    CHECK(ms[0]->info.ffn_dtype == (dt == ENG_DTYPE_Q6_K ? ENG_DTYPE_Q8_0 : dt));
    const int V = ms[0]->info.n_vocab;
    float *out[2] = { malloc(sizeof(float) * N_TOK * V), malloc(sizeof(float) * N_TOK * V) };
    for (int k = 0; k < 2; k++) {
        eng_session *s;
        CHECK(eng_session_new(ms[k], NULL, &s) == 0);
        CHECK(eng_session_eval(s, TOKENS, N_TOK, ENG_EVAL_ALL_LOGITS) == 0);
        for (int t = 0; t < N_TOK; t++)
            memcpy(out[k] + (size_t)t * V, eng_session_logits(s, t), sizeof(float) * V);
        eng_session_free(s);
    }
    const double d = max_diff(out[0], out[1], N_TOK * V);
    printf("%s %s max |diff| %.5f against its f32 load\n", shape, type, d);
    CHECKF(d > 0 && d < 0.05, "%s %s file: logits %g from its f32 load", shape, type, d);
    free(out[0]);
    free(out[1]);
    eng_model_free(ms[0]);
    eng_model_free(ms[1]);
}

/* Metadata that would run wrong is refused, naming what: Gemma's and
 * every family's RoPE scaling. */
static void check_refused(const char *synth)
{
    static const struct {
        const char *shape, *kv, *needle;
        int err;
    } bad[] = {
        { "tiny-gemma3", "gemma3.attn_logit_softcapping=f32:50", "attn_logit_softcapping", -ENOTSUP },
        { "tiny-gemma3", "gemma3.final_logit_softcapping=f32:-1", "final_logit_softcapping", -EINVAL },
        { "tiny-gemma3", "gemma3.rope.scaling.factor=f32:0.00001", "rope scaling factor", -EINVAL },
        { "tiny-gemma3", "gemma3.attention.sliding_window_pattern=str:LLLG", "sliding_window_pattern", -EINVAL },
        { "tiny-gemma3", "gemma3.attention.sliding_window_pattern=i32s:1,1,0,0,0,0,0,1", "8 entries", -EINVAL },
        { "tiny-gemma3", "gemma3.rope.freq_base_swa=f32:-5", "freq_base_swa", -EINVAL },
        { "tiny-gemma3", "gemma3.rope.scaling.type=str:yarn", "YaRN", -ENOTSUP },
        { "tiny-phi3-128k", "phi3.rope.scaling.attn_factor=f32:0", "attn_factor", -EINVAL },
        { "tiny-phi3-128k", "phi3.rope.dimension_count=u32:8", "rope_factors_long.weight", -EINVAL },
        { "tiny-phi3-128k", "phi3.rope.scaling.factor=f32:4", "LongRoPE", -ENOTSUP },
        { "tiny-qwen2", "qwen2.rope.scaling.type=str:dynamic", "'dynamic'", -ENOTSUP },
        { "tiny-granite", "granite.logit_scale=f32:0", "logit_scale", -EINVAL },
        { "tiny-granite", "granite.residual_scale=f32:-0.5", "residual_scale", -EINVAL },
        { "tiny-granite", "granite.rope.scaling.finetuned=u32:0", "finetuned", -EINVAL },
        { "tiny-olmo3", "olmo2.attention.sliding_window_pattern=bools:1,1,1,0,1,1", "6 entries", -EINVAL },
        { "tiny-olmo2", "olmo2.rope.dimension_count=u32:8", "rotating", -ENOTSUP },
        { "tiny-ministral3", "mistral3.rope.scaling.original_context_length=u32:0", "temperature_scale",
          -EINVAL },
        { "tiny-ministral3", "mistral3.expert_count=u32:8", "mixture of experts", -ENOTSUP },
        { "tiny-qwen2vl", "qwen2vl.rope.dimension_sections=i32s:1,1,1,1,4", "longer than 4", -EINVAL },
        { "tiny-qwen3vl", "qwen3vl.rope.dimension_sections=str:x", "dimension_sections", -EINVAL },
        { "tiny-ministral3", "mistral3.rope.scaling.yarn_beta_fast=f32:-1", "yarn_beta_fast", -EINVAL },
        { "tiny-exaone4", "exaone4.rope.dimension_count=u32:8", "rotating", -ENOTSUP },
        { "tiny-lfm2", "lfm2.attention.head_count_kv=i32s:0,0,2,0", "4 entries", -EINVAL },
        { "tiny-lfm2", "lfm2.attention.head_count_kv=i32s:0,0,2,0,1", "[4]", -EINVAL },
        { "tiny-lfm2", "lfm2.attention.head_count_kv=i32s:0,0,2,-1,2", "[3]", -EINVAL },
        { "tiny-lfm2", "lfm2.shortconv.l_cache=u32:1", "l_cache", -EINVAL },
        { "tiny-lfm2", "lfm2.attention.head_count_kv=i32s:2,0,2,0,2", "blk.0.attn_q.weight", -ENOENT },
        { "tiny-lfm2", "lfm2.attention.head_count_kv=i32s:0,0,0,0,2", "blk.2.shortconv.in_proj",
          -ENOENT },
        { "tiny-qwen3moe", "qwen3moe.expert_used_count=u32:9", "expert_used_count 9", -EINVAL },
        { "tiny-qwen3moe", "qwen3moe.expert_count=u32:1", "expert_count 1", -EINVAL },
        { "tiny-qwen3moe", "qwen3moe.expert_shared_feed_forward_length=u32:64", "shared experts",
          -ENOTSUP },
        { "tiny-qwen3moe", "qwen3moe.expert_feed_forward_length=u32:16", "ffn_gate_exps.weight",
          -EINVAL },
        { "tiny-olmoe", "olmoe.expert_count=u32:16", "ffn_gate_inp.weight", -EINVAL },
        { "tiny-qwen2", "qwen2.expert_count=u32:4", "not supported for qwen2", -ENOTSUP },
        { "tiny-qwen3moe", "qwen3moe.expert_group_count=u32:4", "expert_group_count", -ENOTSUP },
        { "tiny-lfm2moe", "lfm2moe.expert_gating_func=u32:3", "expert_gating_func 3", -ENOTSUP },
        { "tiny-ernie4_5-moe", "ernie4_5-moe.interleave_moe_layer_step=u32:2",
          "interleave_moe_layer_step 2", -ENOTSUP },
        { "tiny-lfm2moe", "lfm2moe.leading_dense_block_count=u32:5", "no layer has experts",
          -EINVAL },
        { "tiny-lfm2moe", "lfm2moe.leading_dense_block_count=u32:1", "blk.1.ffn_gate_inp.weight",
          -ENOENT },
        { "tiny-mixtral", "llama.leading_dense_block_count=u32:1", "leading_dense_block_count",
          -ENOTSUP },
        { "tiny-granitehybrid", "granitehybrid.ssm.inner_size=u32:100", "Mamba-2 shape", -EINVAL },
        { "tiny-granitehybrid", "granitehybrid.ssm.group_count=u32:3", "group_count 3", -EINVAL },
        { "tiny-granitehybrid", "granitehybrid.ssm.conv_kernel=u32:1", "conv_kernel 1", -EINVAL },
        { "tiny-granitehybrid", "granitehybrid.ssm.inner_size=u32:64", "blk.0.ssm_in.weight",
          -EINVAL },
        { "tiny-granitehybrid", "granitehybrid.attention.head_count_kv=i32s:0,2,0,0,0",
          "blk.4.ssm_in.weight", -ENOENT },
        /* falcon-h1: the mixer beside attention as its keys say */
        { "tiny-falcon-h1", "falcon-h1.ssm.inner_size=u32:100", "Mamba-2 shape", -EINVAL },
        { "tiny-falcon-h1", "falcon-h1.ssm.inner_size=u32:48", "blk.0.ssm_in.weight", -EINVAL },
        { "tiny-falcon-h1", "falcon-h1.ssm.conv_kernel=u32:3", "blk.0.ssm_conv1d.weight",
          -EINVAL },
        /* nemotron_h: each layer's block as its two arrays say, and the
         * tensors as those and the mixers' keys say */
        { "tiny-nemotron-h", "nemotron_h.feed_forward_length=i32s:0,192,0,192,192,0,0,0",
          "layer 3 has both attention", -EINVAL },
        { "tiny-nemotron-h", "nemotron_h.attention.head_count_kv=i32s:0,0,0,2,0,0,0",
          "not an array of a count per layer", -EINVAL },
        { "tiny-nemotron-h", "nemotron_h.feed_forward_length=u32:192",
          "not an array of a count per layer", -EINVAL },
        { "tiny-nemotron-h", "nemotron_h.attention.head_count_kv=i32s:0,0,0,2,0,0,0,1",
          "[7] is not a head count like", -EINVAL },
        { "tiny-nemotron-h", "nemotron_h.feed_forward_length=i32s:0,0,0,0,0,0,0,0",
          "without an MLP layer", -EINVAL },
        { "tiny-nemotron-h", "nemotron_h.feed_forward_length=i32s:0,100,0,0,192,0,0,0",
          "blk.1.ffn_up.weight", -EINVAL },
        { "tiny-nemotron-h", "nemotron_h.ssm.group_count=u32:2", "blk.0.ssm_in.weight", -EINVAL },
        { "tiny-nemotron-h", "nemotron_h.attention.head_count_kv=i32s:2,0,0,2,0,0,0,2",
          "blk.0.attn_q.weight", -ENOENT },
        /* nemotron_h_moe: experts as its keys say, not in a latent space */
        { "tiny-nemotron-h-moe", "nemotron_h_moe.moe_latent_size=u32:32", "latent space",
          -ENOTSUP },
        { "tiny-nemotron-h-moe", "nemotron_h_moe.expert_feed_forward_length=u32:16",
          "blk.1.ffn_up_exps.weight", -EINVAL },
        { "tiny-nemotron-h-moe", "nemotron_h_moe.expert_shared_feed_forward_length=u32:40",
          "blk.1.ffn_up_shexp.weight", -EINVAL },
        { "tiny-nemotron-h-moe", "nemotron_h_moe.expert_count=u32:16",
          "blk.1.ffn_gate_inp.weight", -EINVAL },
        { "tiny-nemotron-h-moe", "nemotron_h_moe.expert_weights_norm=u32:1", "valid boolean",
          -EINVAL },
        { "tiny-nemotron-h-moe", "nemotron_h_moe.expert_weights_scale=f32:-1",
          "expert_weights_scale' = -1", -EINVAL },
        { "tiny-nemotron-h-moe", "nemotron_h_moe.nextn_predict_layers=u32:8", "leaves no layer",
          -EINVAL },
        { "tiny-granitemoeshared", "granitemoe.expert_shared_count=u32:2", "(one is)",
          -ENOTSUP },
        { "tiny-granitemoeshared", "granitemoe.expert_shared_feed_forward_length=u32:40",
          "blk.0.ffn_gate_shexp.weight", -EINVAL },
        { "tiny-qwen2moe", "qwen2moe.expert_shared_feed_forward_length=u32:0",
          "blk.0.ffn_gate_shexp.weight", -EINVAL },
        /* qwen35: a delta net's value heads as wide as its state, the
         * layer pattern from its flags or interval, its blocks of
         * multi-token prediction not all of them */
        { "tiny-qwen35", "qwen35.ssm.inner_size=u32:128", "gated delta net shape", -EINVAL },
        { "tiny-qwen35", "qwen35.ssm.group_count=u32:3", "group_count 3", -EINVAL },
        { "tiny-qwen35", "qwen35.attention.recurrent_layers=bools:1,1,1,0", "4 entries for 5",
          -EINVAL },
        { "tiny-qwen35", "qwen35.attention.recurrent_layers=bools:1,1,0,1,1",
          "blk.2.attn_q.weight", -ENOENT },
        { "tiny-qwen35", "qwen35.full_attention_interval=u32:0", "interval' 0",
          -EINVAL },
        { "tiny-qwen35", "qwen35.full_attention_interval=u32:2", "blk.1.attn_q.weight", -ENOENT },
        { "tiny-qwen35", "qwen35.nextn_predict_layers=u32:5", "leaves no layer", -EINVAL },
        { "tiny-glm4", "glm4.nextn_predict_layers=u32:3", "leaves no layer", -EINVAL },
        { "tiny-qwen35", "qwen35.rope.dimension_sections=str:x", "dimension_sections", -EINVAL },
        /* gemma4: a shared layer reads a layer of its own kind (llama.cpp's
         * mapping), local heads as wide as their values and rotation, KV
         * heads and FFN widths per layer; experts (26B-A4B) with their
         * counts and tensors, beside one MLP width */
        { "tiny-gemma4", "gemma4.attention.shared_kv_layers=u32:4", "another kind", -EINVAL },
        { "tiny-gemma4", "gemma4.attention.shared_kv_layers=u32:9", "shared_kv_layers 9", -EINVAL },
        { "tiny-gemma4", "gemma4.attention.value_length_swa=u32:8", "values of another width",
          -ENOTSUP },
        { "tiny-gemma4", "gemma4.rope.dimension_count_swa=u32:32", "16 with 32 rotating",
          -EINVAL },
        { "tiny-gemma4", "gemma4.attention.head_count_kv=i32s:1,1,3,1,1,4,1,1,4",
          "layer 2: 3 KV heads", -EINVAL },
        { "tiny-gemma4", "gemma4.feed_forward_length=i32s:96,96", "2 entries for 9", -EINVAL },
        { "tiny-gemma4", "gemma4.expert_count=u32:8", "expert_used_count", -EINVAL },
        { "tiny-gemma4-moe", "gemma4.expert_feed_forward_length=u32:16",
          "blk.0.ffn_gate_up_exps.weight", -EINVAL },
        { "tiny-gemma4-moe", "gemma4.feed_forward_length=i32s:48,48,48,48,48,48",
          "per layer with experts", -ENOTSUP },
        { "tiny-gemma4", "gemma4.embedding_length_per_layer_input=u32:16",
          "per_layer_model_proj.weight", -EINVAL },
        { "tiny-gemma4", "gemma4.attention.key_length=u32:16", "rope dimension 32", -EINVAL },
        { "tiny-gemma3n", "gemma3n.altup.active_idx=u32:1", "active_idx 1", -ENOTSUP },
        { "tiny-gemma3n", "gemma3n.altup.num_inputs=u32:1", "num_inputs 1", -EINVAL },
        { "tiny-gemma3n", "gemma3n.altup.num_inputs=u32:3", "altup_proj.weight", -EINVAL },
        { "tiny-gemma3n", "gemma3n.activation_sparsity_scale=f32:1.6",
          "activation_sparsity_scale", -EINVAL },
    };
    static float unused[320];
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        eng_error err;
        int r = load_kv(synth, bad[i].shape, bad[i].kv, unused, &err);
        CHECKF(r == bad[i].err && strstr(err.msg, bad[i].needle), "%s: %d (%s)", bad[i].kv, r, err.msg);
    }
    printf("metadata     %zu files refused, each naming its key\n", sizeof(bad) / sizeof(bad[0]));
}

/* gemma4 (tiny-gemma4: local heads of 16 and one KV head, global ones of
 * 32 and two with a quarter rotating, the last three layers reading layers
 * 4 (local) and 5's (global) caches with FFNs twice as wide, per-layer
 * embeddings): a token at a time, in chunks of 5 (past the window of 4)
 * and in one batch alike, a kept prefix as an evaluation from nothing,
 * only the first six layers' caches allocated, the Q8_0 file within its
 * rounding, a loading plan's share of each layer's own width, and the
 * per-layer table cut short under a loaded model an error (-EIO), not a
 * fault. (Shifts, rings and the prompt cache over the shared caches:
 * test-shift.) */
static void check_gemma4(const char *synth)
{
    char path[32];
    eng_model *m = load_f32(synth, "tiny-gemma4", path);
    eng_error err;
    static float batch[320], one[320], chunk[320], kept[320], q8[320];
    eng_session *s = three_ways(m, batch, one, chunk);
    /* the same prompt again keeps all but 2 positions */
    CHECK(eng_session_reset_prefix(s, TOKENS, N_TOK) == N_TOK - 2);
    CHECK(eng_session_eval(s, TOKENS + N_TOK - 2, 2, 0) == 0);
    memcpy(kept, eng_session_logits(s, -1), sizeof(kept));
    eng_session_free(s);
    /* caches: layers 0, 1, 3, 4 local (rings of 3 + 256 rows of one head
     * of 16), 2 and 5 global (2048 rows of two heads of 32), K and V in
     * f16; layers 6 to 8 none */
    CHECK(eng_session_new(m, NULL, &s) == 0);
    const size_t kv = eng_session_kv_bytes(s), want = 4 * 259 * 16 * 2 * 2 + 2 * 2048 * 64 * 2 * 2;
    eng_session_free(s);
    const double d_one = max_diff(batch, one, 320), d_chunk = max_diff(batch, chunk, 320);
    const double d_kept = max_diff(batch, kept, 320);
    /* (scores unscaled, up to head_dim: a sum's order shows more than elsewhere) */
    CHECKF(d_one < 5e-3 && d_chunk < 1e-3 && d_kept < 1e-3, "tiny-gemma4: a token at a time "
           "%g, chunks %g, kept prefix %g from one batch", d_one, d_chunk, d_kept);
    CHECKF(kv == want, "tiny-gemma4: %zu bytes of caches, not %zu", kv, want);
    /* W_down's column norms (ENG_SCORE_CONTRIB) of each layer's own
     * neurons, none past them: rows of n_ff = 192 */
    CHECK(m->info.n_ff == 192 && m->down_norm && m->down_norm[95] > 0 && m->down_norm[96] == 0 &&
          m->down_norm[6 * 192 + 191] > 0);
    /* the table read as tokens come: the file cut after 100 of its rows */
    const off_t cut = (off_t)(m->ple_tok.offset + 100 * m->ple_tok.row_bytes);
    CHECK(truncate(path, cut) == 0);
    CHECK(eng_session_new(m, NULL, &s) == 0);
    const int32_t low[2] = { 5, 17 }, high[2] = { 5, 250 };
    CHECK(eng_session_eval(s, low, 2, 0) == 0);
    eng_session_reset(s);
    const int r_high = eng_session_eval(s, high, 2, 0);
    CHECKF(r_high == -EIO, "tiny-gemma4: a token past the cut table: %d", r_high);
    eng_session_free(s);
    eng_model_free(m);
    unlink(path);

    /* the Q8_0 file (its table Q8_0 too) loads as the daemon does */
    test_synth_type(synth, "tiny-gemma4", "q8_0", path);
    eng_model_params mp = eng_model_params_default();
    mp.n_threads = 2;
    CHECKF(eng_model_load(path, &mp, &m, &err) == 0, "%s", err.msg);
    last_logits(m, false, q8);
    const double d_q8 = max_diff(batch, q8, 320);
    CHECKF(d_q8 < 1.0, "tiny-gemma4: the Q8_0 file's logits %g from the f32 file's", d_q8);
    eng_plan_info dense;
    eng_model_get_plan(m, &dense);
    eng_model_free(m);
    /* a plan over FFNs of two widths: gamma and delta of each layer's
     * neurons (layers 6-8: 192, the others 96), priced as loaded */
    eng_load_plan_params pp = eng_load_plan_params_default();
    pp.mode = ENG_SELECT_RANDOM;
    pp.gamma = 0.5f;
    pp.delta = 0.25f;
    mp.plan = &pp;
    CHECKF(eng_model_load(path, &mp, &m, &err) == 0, "%s", err.msg);
    unlink(path);
    bool halves = true;
    for (int il = 0; il < m->info.n_layer; il++) {
        const int w = il >= 6 ? 192 : 96;
        halves = halves && m->layers[il].ffn.n_slots == w / 2 && m->layers[il].n_static == w / 4;
    }
    eng_plan_info half;
    eng_model_get_plan(m, &half);
    CHECKF(halves && dense.neurons_total == 1152 && dense.neurons_loaded == 1152 &&
           half.neurons_total == 1152 && half.neurons_loaded == 576, "tiny-gemma4: a plan of "
           "gamma 0.5 loads %llu of %llu neurons (dense: %llu of %llu), each layer half its "
           "own: %d", (unsigned long long)half.neurons_loaded,
           (unsigned long long)half.neurons_total, (unsigned long long)dense.neurons_loaded,
           (unsigned long long)dense.neurons_total, halves);
    eng_model_free(m);
    printf("tiny-gemma4  a token at a time %.2g, chunks of 5 %.2g, kept prefix %.2g from one "
           "batch; caches %zu bytes; Q8_0 file %.3f; a cut table -EIO; a plan of gamma 0.5 "
           "half of each layer's own width\n", d_one, d_chunk, d_kept, kv, d_q8);
}

/* gemma3n (tiny-gemma3n: 25 layers, the last five reading layers 18
 * (local) and 19's (global) caches, AltUp's four streams, Laurel of rank
 * 64, per-layer inputs of 256, the first ten layers' gate values cut at
 * their mean plus 1.645 deviations): a token at a time and in chunks of 5
 * as in one batch; the first 20 layers' caches; which layers cut; a
 * decode step priced with AltUp's, Laurel's and the per-layer inputs'
 * matrices; and SelectInfer's plan and per-request selection on it (the
 * cut layers' statistics over the neurons computed). */
static void check_gemma3n(const char *synth)
{
    char path[32];
    eng_model *m = load_f32(synth, "tiny-gemma3n", path);
    unlink(path);
    static float batch[320], one[320], chunk[320];
    eng_session_free(three_ways(m, batch, one, chunk));
    eng_session *s;
    CHECK(eng_session_new(m, NULL, &s) == 0);
    /* 16 local layers (rings of 3 + 256 rows of two heads of 32), 4 global
     * ones (2048 rows), K and V in f16 */
    const size_t kv = eng_session_kv_bytes(s), want = 16 * 259 * 64 * 2 * 2 + 4 * 2048 * 64 * 2 * 2;
    eng_session_free(s);
    int cut = 0;
    for (int il = 0; il < 25; il++) {
        const eng_ffn_weights *w = &m->layers[il].ffn;
        cut += il < 10 ? w->act == ENG_ACT_GELU_TOPK && fabsf(w->cut - 1.6448533f) < 1e-6f
                       : w->act == ENG_ACT_GELU;
    }
    /* a step: step_bytes's, Laurel's and AltUp's routers (f32: 2 x 64 x
     * 64 and 4 x 64 a layer), the per-layer blocks (2 x 256 x 64), a
     * token's row of the per-layer table (6400) and its projection (6400
     * x 64), AltUp's projections (2 x 3 x 64 x 64); less the up and down
     * rows of the cut layers' neurons that do not pass (5 % of 128 pass: 7
     * read, 121 of 64 f32 not) */
    eng_model_info info;
    eng_model_get_info(m, &info);
    const uint64_t step = step_bytes(m, 128) +
                          4 * (25 * (2 * 64 * 64 + 4 * 64 + 2 * 256 * 64) + 6400 + 6400 * 64 +
                               2 * 3 * 64 * 64) -
                          10 * 121 * 2 * 64 * 4;
    const double d_one = max_diff(batch, one, 320), d_chunk = max_diff(batch, chunk, 320);
    CHECKF(d_one < 5e-3 && d_chunk < 5e-3 && kv == want && cut == 25 &&
           info.bytes_per_token == step, "tiny-gemma3n: a token at a time %g, chunks %g from one "
           "batch; %zu bytes of caches (want %zu); %d layers' activations as they should be; "
           "%llu bytes a step (want %llu)", d_one, d_chunk, kv, want, cut,
           (unsigned long long)info.bytes_per_token, (unsigned long long)step);
    eng_model_free(m);
    printf("tiny-gemma3n a token at a time %.2g, chunks of 5 %.2g from one batch; caches %zu "
           "bytes; 10 layers cut; a step %llu bytes\n", d_one, d_chunk, kv,
           (unsigned long long)step);
}

/* gemma3n's cut layers read a request's selection in place (their ffn op
 * takes the cut's statistics over it), so the session copies the dynamic
 * neurons of the other layers only (select.c dyn_copy): its copy's bytes,
 * resident per session, are what decode reads and no more (on Gemma 3n
 * E2B's shape at phi 0.4 the cut layers' copies were 125 MiB). The signed
 * rank leaves the cut layers' selections scattered, so they would have
 * something to copy; decode's logits are the same with the copy and
 * without, bit for bit. */
static void check_gemma3n_copy(const char *synth)
{
    char path[32];
    test_synth_type(synth, "tiny-gemma3n", "f32", path);
    eng_model_params mp = eng_model_params_default();
    mp.n_threads = 2;
    mp.storage = ENG_DTYPE_F32;
    eng_load_plan_params pp = eng_load_plan_params_default();
    pp.mode = ENG_SELECT_COREINFER;
    mp.plan = &pp;
    eng_model *m;
    eng_error err;
    CHECKF(eng_model_load(path, &mp, &m, &err) == 0, "tiny-gemma3n: %s", err.msg);
    unlink(path);
    const int V = m->info.n_vocab, NL = m->info.n_layer;
    static float logits[2][320];
    CHECK(V <= 320);
    size_t bytes = 0, want = 0;
    int cut_spread = 0, copied = 0;
    for (int k = 0; k < 2; k++) {
        eng_compute_params cp = eng_compute_params_default();
        cp.phi = 0.4f;
        cp.rank = ENG_RANK_SIGNED;
        cp.copy_dynamic = k == 0;
        eng_session *s;
        CHECK(eng_session_new(m, NULL, &s) == 0 && eng_session_set_compute(s, &cp) == 0);
        CHECK(eng_session_eval(s, TOKENS, N_TOK, 0) == 0);
        for (int il = 0; il < NL && k == 0; il++) {
            /* a selection past its leading run 0, 1, ...: what a copy holds */
            const eng_layer *L = &m->layers[il];
            const int32_t *sel = s->ffn_sel[il];
            const int n = sel ? s->ffn_n_sel[il] : 0;
            int from = 0;
            while (from < n && sel[from] == from)
                from++;
            if (L->ffn.act == ENG_ACT_GELU_TOPK) {
                cut_spread += from < n;
                continue;
            }
            copied += from < n;
            want += (size_t)(n - from) *
                    eng_ffn_slot_bytes(L->ffn.dtype, L->ffn.n_embd, eng_ffn_rows(&L->ffn));
        }
        if (k == 0)
            bytes = eng_session_copy_bytes(s);
        int32_t next = 7;
        for (int step = 0; step < 3; step++)
            CHECK(eng_session_eval(s, &next, 1, 0) == 0);
        memcpy(logits[k], eng_session_logits(s, -1), (size_t)V * sizeof(float));
        eng_session_free(s);
    }
    /* Under the abs rank (the default) 95 % of a cut layer's activations
     * are 0, fewer nonzero than a token's top alpha: zeros must not vote,
     * else every slot ties and the tie-break's leading run 0, 1, ... is
     * chosen whatever the prompt */
    int cut_layers = 0, cut_run = 0;
    {
        eng_compute_params cp = eng_compute_params_default();
        cp.phi = 0.4f;
        eng_session *s;
        CHECK(eng_session_new(m, NULL, &s) == 0 && eng_session_set_compute(s, &cp) == 0);
        CHECK(eng_session_eval(s, TOKENS, N_TOK, 0) == 0);
        for (int il = 0; il < NL; il++) {
            const int32_t *sel = s->ffn_sel[il];
            const int n = sel ? s->ffn_n_sel[il] : 0;
            if (m->layers[il].ffn.act != ENG_ACT_GELU_TOPK || n == 0)
                continue;
            int from = 0;
            while (from < n && sel[from] == from)
                from++;
            cut_layers++;
            cut_run += from == n;
        }
        eng_session_free(s);
    }
    CHECKF(cut_layers > 0 && cut_run == 0,
           "tiny-gemma3n abs rank: %d of %d cut layers chose the leading run of slots", cut_run,
           cut_layers);
    /* the same selection decoded a token at a time (the cut layers' gate
     * rows, then the up and down rows of the neurons that pass:
     * ffn_cut_decode) and as one batch (gate and up rows of every
     * selected neuron) */
    double d_sel;
    {
        eng_compute_params cp = eng_compute_params_default();
        cp.phi = 0.4f;
        eng_session *a, *b;
        CHECK(eng_session_new(m, NULL, &a) == 0 && eng_session_set_compute(a, &cp) == 0);
        CHECK(eng_session_new(m, NULL, &b) == 0 && eng_session_set_compute(b, &cp) == 0);
        CHECK(eng_session_eval(a, TOKENS, N_TOK, 0) == 0);
        CHECK(eng_session_eval(b, TOKENS, N_TOK, 0) == 0);
        const int32_t more[3] = { 7, 19, 3 };
        for (int t = 0; t < 3; t++)
            CHECK(eng_session_eval(a, &more[t], 1, 0) == 0);
        CHECK(eng_session_eval(b, more, 3, 0) == 0);
        d_sel = max_diff(eng_session_logits(a, -1), eng_session_logits(b, -1), V);
        CHECKF(d_sel < 5e-3 && eng_session_ffn_share(a) < 0.5,
               "tiny-gemma3n phi 0.4: a token at a time %g from one batch (share %.2f)", d_sel,
               eng_session_ffn_share(a));
        eng_session_free(a);
        eng_session_free(b);
    }
    /* pick=exact: the cut layers score every loaded slot (their own cut is
     * the per-token pick), which ffn_share counts whole; the others every
     * gate and up row and pick_k down rows */
    {
        eng_compute_params cp = eng_compute_params_default();
        cp.phi = 0.8f; /* (coreinfer loads all: every f32 gate and up row is 2/3) */
        cp.pick = ENG_PICK_EXACT;
        eng_session *s;
        CHECK(eng_session_new(m, NULL, &s) == 0 && eng_session_set_compute(s, &cp) == 0);
        CHECK(eng_session_eval(s, TOKENS, N_TOK, 0) == 0);
        uint64_t computed = 0;
        int picked = 0;
        for (int il = 0; il < NL; il++) {
            const eng_ffn_weights *w = &m->layers[il].ffn;
            const int k = s->pick_k[il];
            CHECKF(k == 0 || w->act != ENG_ACT_GELU_TOPK, "layer %d: cut, pick_k %d", il, k);
            picked += k > 0;
            const uint64_t rb = eng_ffn_row_bytes(w->dtype, w->n_embd);
            computed += k == 0 ? (uint64_t)w->n_slots
                               : ((uint64_t)w->n_slots * 2 * rb +
                                  (uint64_t)k * eng_ffn_down_bytes(w->dtype, w->n_embd)) /
                                     eng_ffn_slot_bytes(w->dtype, w->n_embd, 2);
        }
        const double want_share = (double)computed / (double)m->plan.neurons_total;
        CHECKF(picked > 0 && fabs(eng_session_ffn_share(s) - want_share) < 1e-9,
               "tiny-gemma3n pick=exact: ffn_share %.4f, want %.4f (%d layers picked)",
               eng_session_ffn_share(s), want_share, picked);
        eng_session_free(s);
    }
    eng_model_free(m);
    const bool same = memcmp(logits[0], logits[1], (size_t)V * sizeof(float)) == 0;
    CHECKF(cut_spread > 0 && copied > 0 && bytes == want && same,
           "tiny-gemma3n copy: %d cut and %d other layers with scattered selections; %zu bytes "
           "copied, want %zu (the other layers'); logits with and without it %s", cut_spread,
           copied, bytes, want, same ? "the same" : "differ");
    printf("tiny-gemma3n phi 0.4, signed rank: %zu bytes copied in %d layers, none in the %d "
           "cut layers with scattered selections; abs rank: a token at a time %.2g from one "
           "batch\n", bytes, copied, cut_spread, d_sel);
}

/* gemma4's experts beside a dense MLP (tiny-gemma4-moe: 2 of 8 experts
 * of 32, gate and up rows in one tensor in even layers, an MLP of 48): a
 * token at a time (the moe op's decode walk) and in chunks of 5 as in one
 * batch, the Q8_0 file (the fused rows' blocks kept as they are) within
 * its rounding, and a decode step priced with the MLP's neurons beside
 * the picked experts'. */
static void check_gemma4_moe(const char *synth)
{
    char path[32];
    eng_model *m = load_f32(synth, "tiny-gemma4-moe", path);
    eng_error err;
    unlink(path);
    static float batch[320], one[320], chunk[320], q8[320];
    eng_session *s = three_ways(m, batch, one, chunk);
    eng_session_free(s);
    eng_model_info info;
    eng_model_get_info(m, &info);
    /* a step's FFN reads 2 experts of 32 and the MLP's 48 a layer */
    uint64_t fixed = 0;
    for (int il = 0; il < info.n_layer; il++) {
        const eng_layer *L = &m->layers[il];
        const eng_weight *w[5] = { &L->wq, &L->wk, &L->wv, &L->wo, &L->moe.router };
        for (int i = 0; i < 5; i++)
            fixed += eng_dtype_bytes(w[i]->dtype, (size_t)w[i]->rows * w[i]->cols);
    }
    fixed += eng_dtype_bytes(m->output.dtype, (size_t)m->output.rows * m->output.cols);
    const uint64_t want = fixed + (uint64_t)info.n_layer * (2 * 32 + 48) *
                                      eng_ffn_slot_bytes(info.ffn_dtype, info.n_embd, 2);
    CHECKF(info.n_expert == 8 && info.n_expert_used == 2 && info.n_ff_shared == 48 &&
           info.n_ff == 8 * 32 + 48 && info.bytes_per_token == want, "tiny-gemma4-moe: %d of "
           "%d experts, %d shared, n_ff %d, %llu bytes a step (want %llu)", info.n_expert_used,
           info.n_expert, info.n_ff_shared, info.n_ff,
           (unsigned long long)info.bytes_per_token, (unsigned long long)want);
    eng_model_free(m);
    const double d_one = max_diff(batch, one, 320), d_chunk = max_diff(batch, chunk, 320);
    CHECKF(d_one < 5e-3 && d_chunk < 1e-3, "tiny-gemma4-moe: a token at a time %g, chunks %g "
           "from one batch", d_one, d_chunk);
    test_synth_type(synth, "tiny-gemma4-moe", "q8_0", path);
    eng_model_params mp = eng_model_params_default();
    mp.n_threads = 2;
    CHECKF(eng_model_load(path, &mp, &m, &err) == 0, "%s", err.msg);
    unlink(path);
    last_logits(m, false, q8);
    eng_model_free(m);
    const double d_q8 = max_diff(batch, q8, 320);
    CHECKF(d_q8 < 1.0, "tiny-gemma4-moe: the Q8_0 file's logits %g from the f32 file's", d_q8);
    printf("tiny-gemma4-moe  a token at a time %.2g, chunks of 5 %.2g from one batch; Q8_0 file "
           "%.3f; %llu bytes a step\n", d_one, d_chunk, d_q8,
           (unsigned long long)info.bytes_per_token);
}

/* gpt-oss: a token at a time and in chunks of 5 as in one batch (its
 * window of 4 crossed inside chunks, its sinks on every attention path),
 * a step's bytes (3 of 8 experts of 32), and its MXFP4 file's experts kept
 * as the file's bytes (layer 1's expert 5: a gate row, W_down's rows),
 * within 0.05 of that file's logits in f32. */
static void check_gpt_oss(const char *synth)
{
    char path[32];
    eng_model *m = load_f32(synth, "tiny-gpt-oss", path);
    unlink(path);
    static float batch[1024], one[1024], chunk[1024], mx[1024], mx1[1024], mx32[1024];
    eng_session_free(three_ways(m, batch, one, chunk));
    eng_model_info info;
    eng_model_get_info(m, &info);
    CHECKF(info.n_expert == 8 && info.n_expert_used == 3 && info.n_ff == 8 * 32 &&
           info.bytes_per_token == step_bytes(m, 3 * 32), "tiny-gpt-oss: %d of %d experts, n_ff "
           "%d, %llu bytes a step (want %llu)", info.n_expert_used, info.n_expert, info.n_ff,
           (unsigned long long)info.bytes_per_token, (unsigned long long)step_bytes(m, 3 * 32));
    /* the tools' prompts (si-eval's, si-profile's) open the answer's final
     * message under its harmony format */
    CHECK(eng_model_set_chat_template(m, "gpt-oss") == 0);
    int32_t *toks;
    size_t nt;
    CHECK(si_render_prompt(m, "Be brief.", "Hi", 4096, &toks, &nt) == 0);
    static char text[8192];
    size_t tl = 0;
    for (size_t i = 0; i < nt; i++) {
        const int k = eng_token_to_piece(m, toks[i], true, text + tl, sizeof(text) - tl);
        CHECK(k >= 0 && tl + (size_t)k < sizeof(text));
        tl += (size_t)k;
    }
    free(toks);
    static const char tail[] = "<|start|>user<|message|>Hi<|end|>"
                               "<|start|>assistant<|channel|>final<|message|>";
    CHECKF(tl >= sizeof(tail) - 1 && !memcmp(text + tl - (sizeof(tail) - 1), tail,
                                             sizeof(tail) - 1),
           "tiny-gpt-oss: a tool's prompt ends '%.*s'", (int)(tl < 80 ? tl : 80),
           text + (tl < 80 ? 0 : tl - 80));
    eng_model_free(m);
    const double d_one = max_diff(batch, one, 1024), d_chunk = max_diff(batch, chunk, 1024);
    CHECKF(d_one < 1e-3 && d_chunk < 1e-3, "tiny-gpt-oss: a token at a time %g, chunks %g from "
           "one batch", d_one, d_chunk);

    test_synth_type(synth, "tiny-gpt-oss", "mxfp4", path);
    eng_model_params mp = eng_model_params_default();
    mp.n_threads = 2;
    eng_error err;
    CHECKF(eng_model_load(path, &mp, &m, &err) == 0, "%s", err.msg);
    eng_model_get_info(m, &info);
    CHECK(info.ffn_dtype == ENG_DTYPE_MXFP4);
    gguf_file *f;
    CHECK(gguf_open(path, &f, &err) == 0);
    const gguf_tensor *t = gguf_find_tensor(f, "blk.1.ffn_gate_exps.weight");
    const gguf_tensor *td = gguf_find_tensor(f, "blk.1.ffn_down_exps.weight");
    CHECK(t && t->type == GGML_TYPE_MXFP4 && td && td->type == GGML_TYPE_MXFP4);
    const size_t row = ggml_row_bytes(t->type, 64), drow = ggml_row_bytes(td->type, 32);
    const eng_layer *L = &m->layers[1];
    CHECKF(!memcmp((const uint8_t *)t->data + 5 * 32 * row, (const uint8_t *)L->ffn.gate_up +
                   5 * 32 * 2 * eng_ffn_row_bytes(L->ffn.dtype, 64), row) &&
           !memcmp((const uint8_t *)td->data + 5 * 64 * drow, (const uint8_t *)L->ffn.down +
                   5 * 32 * eng_ffn_down_bytes(L->ffn.dtype, 64), 64 * drow),
           "tiny-gpt-oss: an MXFP4 expert kept other bytes");
    gguf_close(f);
    last_logits(m, false, mx);
    last_logits(m, true, mx1); /* (decode's kernels: x in 16 bits) */
    eng_model_free(m);
    mp.storage = ENG_DTYPE_F32;
    CHECKF(eng_model_load(path, &mp, &m, &err) == 0, "%s", err.msg);
    unlink(path);
    last_logits(m, false, mx32);
    eng_model_free(m);
    const double d_mx = max_diff(mx, mx32, 1024), d_mx1 = max_diff(mx1, mx32, 1024);
    CHECKF(d_mx < 0.05 && d_mx1 < 0.05, "tiny-gpt-oss: its MXFP4 file %g (a token at a time "
           "%g) from the same in f32", d_mx, d_mx1);
    printf("tiny-gpt-oss  a token at a time %.2g, chunks of 5 %.2g from one batch; MXFP4 file "
           "%.4f (a token at a time %.4f) from f32; %llu bytes a step\n", d_one, d_chunk, d_mx,
           d_mx1, (unsigned long long)info.bytes_per_token);
}

/* qwen35's layer pattern as its flags give it (the default interval's
 * flags: its logits), and its blocks of multi-token prediction left out
 * (5 blocks, the last one such: the logits of the first 4 alone). */
static void check_qwen35_meta(const char *synth)
{
    static float base[320], got[320];
    eng_error err;
    CHECK(load_kv(synth, "tiny-qwen35", "general.name=str:x", base, &err) == 0);
    CHECKF(load_kv(synth, "tiny-qwen35", "qwen35.attention.recurrent_layers=bools:1,1,1,0,1", got,
                   &err) == 0, "%s", err.msg);
    CHECK(max_diff(base, got, 320) == 0);
    CHECKF(load_kv(synth, "tiny-qwen35", "qwen35.nextn_predict_layers=u32:1", got, &err) == 0,
           "%s", err.msg);
    char path[32];
    test_synth_args(synth, "tiny-qwen35", "f16", " --layers 4", path);
    eng_model_params mp = eng_model_params_default();
    mp.n_threads = 2;
    eng_model *m = NULL;
    CHECKF(eng_model_load(path, &mp, &m, &err) == 0, "%s", err.msg);
    unlink(path);
    eng_session *s;
    CHECK(eng_session_new(m, NULL, &s) == 0 && eng_session_eval(s, TOKENS, N_TOK, 0) == 0);
    const double d = max_diff(got, eng_session_logits(s, -1), 320);
    CHECKF(d == 0 && max_diff(base, got, 320) > 0.01, "qwen35 with a prediction block: %g from "
           "its first 4 layers'", d);
    eng_session_free(s);
    eng_model_free(m);
}

/* A Q8_0 phi3 file: its fused matrices and FFN rows stay Q8_0, and what a
 * hot-swap recounts from the plan's fixed bytes is what the load counted
 * (both once priced the file's fused tensors as f16). */
static void check_phi3_q8(const char *synth)
{
    char path[32];
    test_synth_type(synth, "tiny-phi3", "q8_0", path);
    eng_model_params mp = eng_model_params_default();
    mp.n_threads = 2;
    eng_load_plan_params pp = eng_load_plan_params_default();
    pp.mode = ENG_SELECT_RANDOM;
    pp.gamma = 0.5f;
    pp.seed = 3;
    mp.plan = &pp;
    eng_model *m = NULL;
    eng_error err;
    CHECKF(eng_model_load(path, &mp, &m, &err) == 0, "%s", err.msg);
    CHECK(m->layers[0].ffn.dtype == ENG_DTYPE_Q8_0 && m->layers[0].wq.dtype == ENG_DTYPE_Q8_0);
    eng_model_info a, b;
    eng_model_get_info(m, &a);
    CHECKF(eng_model_swap(m, &pp, NULL, &err) == 0, "%s", err.msg);
    unlink(path);
    eng_model_get_info(m, &b);
    CHECKF(a.bytes_weights == b.bytes_weights, "phi3 q8_0: %llu bytes loaded, %llu recounted",
           (unsigned long long)a.bytes_weights, (unsigned long long)b.bytes_weights);
    eng_model_free(m);
}

int main(int argc, char **argv)
{
    if (argc != 3) {
        fprintf(stderr, "usage: test-synth-ref SI_SYNTH DATA_DIR\n");
        return 2;
    }
    check_shape(argv[1], argv[2], "tiny", 320);
    check_shape(argv[1], argv[2], "tiny-qwen2", 320);
    check_shape(argv[1], argv[2], "tiny-qwen3", 320);
    check_shape(argv[1], argv[2], "tiny-llama3", 1024);
    check_shape(argv[1], argv[2], "tiny-phi3", 320);
    /* LongRoPE: a context past the original (8) takes the long factors;
     * one within it (4096) the short ones */
    check_shape(argv[1], argv[2], "tiny-phi3-128k", 320);
    check_shape_kv(argv[1], argv[2], "tiny-phi3-128k", "phi3.rope.scaling.original_context_length=u32:4096",
                   "tiny-phi3-128k-short", 320);
    check_refused(argv[1]);
    {
        /* YaRN's original context 0 is the training context (4096), as in llama.cpp */
        static float a[320], b[320];
        eng_error err;
        CHECK(load_kv(argv[1], "tiny-qwen2", "qwen2.rope.scaling.type=str:yarn qwen2.rope.scaling.factor=f32:4 "
                      "qwen2.rope.scaling.original_context_length=u32:0", a, &err) == 0);
        CHECK(load_kv(argv[1], "tiny-qwen2", "qwen2.rope.scaling.type=str:yarn qwen2.rope.scaling.factor=f32:4 "
                      "qwen2.rope.scaling.original_context_length=u32:4096", b, &err) == 0);
        CHECKF(max_diff(a, b, 320) == 0, "yarn, original context 0: logits %g from 4096's", max_diff(a, b, 320));
    }
    /* YaRN (Qwen's long contexts): factor 4 over an original context of
     * 64, so that the ramp spans the tiny heads' frequencies */
    check_shape_kv(argv[1], argv[2], "tiny-qwen2",
                   "qwen2.rope.scaling.type=str:yarn qwen2.rope.scaling.factor=f32:4 "
                   "qwen2.rope.scaling.original_context_length=u32:64",
                   "tiny-qwen2-yarn", 320);
    check_shape(argv[1], argv[2], "tiny-gemma", 320);
    check_shape(argv[1], argv[2], "tiny-gemma2", 320);
    check_shape(argv[1], argv[2], "tiny-gemma3", 320);
    check_shape(argv[1], argv[2], "tiny-k", 320);
    check_shape(argv[1], argv[2], "tiny-phi4", 320);
    /* glm4: q/k/v biases, consecutive RoPE pairs over half of each head,
     * norms after attention and FFN, gate and up in one ffn_up; GLM-4.1V's
     * sections (text: NEOX) */
    check_shape(argv[1], argv[2], "tiny-glm4", 1024);
    check_shape_kv(argv[1], argv[2], "tiny-glm4",
                   "glm4.rope.dimension_sections=i32s:2,1,1,0 glm4.rope.freq_base=f32:500000",
                   "tiny-glm4v", 1024);
    /* smollm3: every fourth layer without RoPE; granite: its multipliers,
     * and with rope.scaling.finetuned false no layer rotating */
    check_shape(argv[1], argv[2], "tiny-smollm3", 1024);
    check_shape(argv[1], argv[2], "tiny-granite", 320);
    check_shape(argv[1], argv[2], "tiny-exaone", 320); /* NEOX pairs, Llama 3's factors */
    check_shape(argv[1], argv[2], "tiny-minicpm", 320); /* granite's layers, MiniCPM's keys */
    check_shape_kv(argv[1], argv[2], "tiny-granite", "granite.rope.scaling.finetuned=bool:0",
                   "tiny-granite-nope", 320);
    /* olmo2: no norms before the blocks, q/k norms over whole rows; OLMo
     * 3's local layers (a flag per layer), unscaled under YaRN; exaone4:
     * per-head q/k norms, and in the 64-layer shape the global layers
     * without RoPE; gemma3's local layers from an array of flags */
    /* the language models of Qwen2.5-VL and Qwen3-VL: text positions in
     * every RoPE section (NEOX), Qwen3-VL's deepstack inputs zero */
    check_shape(argv[1], argv[2], "tiny-ernie4_5", 320); /* Llama's layers, heads of 32 */
    /* hunyuan-dense: q/k norms after RoPE; its alpha on the base */
    check_shape(argv[1], argv[2], "tiny-hunyuan", 320);
    check_shape_kv(argv[1], argv[2], "tiny-hunyuan", "hunyuan-dense.rope.scaling.alpha=f32:1000",
                   "tiny-hunyuan-alpha", 320);
    check_shape(argv[1], argv[2], "tiny-qwen2vl", 320);
    check_shape(argv[1], argv[2], "tiny-qwen3vl", 320);
    check_shape(argv[1], argv[2], "tiny-olmo2", 1024);
    check_shape(argv[1], argv[2], "tiny-olmo3", 1024);
    check_shape_kv(argv[1], argv[2], "tiny-olmo3",
                   "olmo2.rope.scaling.type=str:yarn olmo2.rope.scaling.factor=f32:4 "
                   "olmo2.rope.scaling.original_context_length=u32:64", "tiny-olmo3-yarn", 1024);
    check_shape(argv[1], argv[2], "tiny-exaone4", 320);
    /* mistral3: q's temperature from position 4 on (original context 4);
     * then YaRN's ramp over an original context of 4096 with the file's
     * betas and log multiplier */
    check_shape(argv[1], argv[2], "tiny-ministral3", 1024);
    check_shape_kv(argv[1], argv[2], "tiny-ministral3",
                   "mistral3.rope.scaling.original_context_length=u32:4096 "
                   "mistral3.rope.scaling.yarn_beta_fast=f32:16 mistral3.rope.scaling.yarn_beta_slow=f32:8 "
                   "mistral3.rope.scaling.yarn_log_multiplier=f32:0.5", "tiny-ministral3-ramp", 1024);
    check_shape(argv[1], argv[2], "tiny-exaone4-swa", 320);
    check_shape_kv(argv[1], argv[2], "tiny-gemma3", "gemma3.attention.sliding_window_pattern=i32s:1,1,0",
                   "tiny-gemma3-pat", 320);
    /* lfm2: short convolutions (3 taps over b * x, gated by c) in three
     * layers, qwen3's attention in two */
    check_shape(argv[1], argv[2], "tiny-lfm2", 1024);
    /* mixtures of experts: Qwen3-MoE (8 experts picking 2, their own
     * length), OLMoE (3 of 8, weights not normalised, whole-row q/k
     * norms), Granite MoE (2 of 4 under granite's multipliers), Mixtral
     * (llama with 2 of 4) */
    check_shape(argv[1], argv[2], "tiny-qwen3moe", 320);
    check_shape(argv[1], argv[2], "tiny-qwen3vlmoe", 320); /* the same with RoPE sections */
    check_shape(argv[1], argv[2], "tiny-olmoe", 1024);
    check_shape(argv[1], argv[2], "tiny-granitemoe", 320);
    check_shape(argv[1], argv[2], "tiny-mixtral", 320);
    /* LFM2-MoE: lfm2's blocks, two dense FFNs, then 2 of 8 experts picked
     * by sigmoid plus a bias, weighted by the sigmoid alone */
    check_shape(argv[1], argv[2], "tiny-lfm2moe", 1024);
    /* ernie4_5-moe: a dense first layer, experts picked by softmax plus a
     * bias, a shared expert beside them */
    check_shape(argv[1], argv[2], "tiny-ernie4_5-moe", 320);
    check_lfm2moe(argv[1]);
    check_moe(argv[1]);
    /* granitehybrid (Granite 4.0-H): Mamba-2 mixers (2 groups of 4 heads,
     * 4 taps, states of 16) in three layers, NoPE attention in two */
    check_shape(argv[1], argv[2], "tiny-granitehybrid", 320);
    /* (states: 8 heads of 16 x 16, f32) */
    check_hybrid(argv[1], "tiny-granitehybrid", 3, 1, true, 8 * 16 * 16 * 4);
    /* qwen35 (Qwen3.5): gated delta nets (4 value heads of 16 on 2 key
     * heads, 4 taps) in four layers, gated attention in the fourth. f32,
     * as llama.cpp's f16 products round q, k and the nets' small outputs,
     * which their normalisations then scale up (0.07 apart in f16) */
    check_logits(argv[1], argv[2], "tiny-qwen35", "f32", NULL, "tiny-qwen35", 320, 0.002, 0.0005);
    check_hybrid(argv[1], "tiny-qwen35", 4, 3, false, 4 * 16 * 16 * 4);
    check_qwen35_meta(argv[1]);
    /* falcon-h1 (Falcon-H1): attention (NEOX, heads of 32 on 64) and a
     * Mamba-2 mixer (6 heads of 16 in 2 groups, states of 16, no norm)
     * side by side on the same norm in all five layers. f32, as qwen35 */
    check_logits(argv[1], argv[2], "tiny-falcon-h1", "f32", NULL, "tiny-falcon-h1", 1024, 0.01,
                 0.002);
    check_hybrid(argv[1], "tiny-falcon-h1", 5, -1, false, 6 * 16 * 16 * 4);
    /* nemotron_h (Nemotron-H): one block a layer, M-M*-MM*: Mamba-2
     * mixers (8 heads of 16, states of 16, the norm over 4 groups of 32),
     * attention without RoPE (heads of 16) and un-gated squared-ReLU MLPs
     * (192 neurons), an MLP first, attention last. f32, as qwen35 */
    check_logits(argv[1], argv[2], "tiny-nemotron-h", "f32", NULL, "tiny-nemotron-h", 1024, 0.01,
                 0.002);
    check_hybrid(argv[1], "tiny-nemotron-h", 4, 3, true, 8 * 16 * 16 * 4);
    check_ungated(argv[1]);
    /* nemotron_h_moe (Nemotron 3 Nano): MEM*EEM*, tiny-nemotron-h's mixers
     * and attention, 2 of 8 un-gated experts of 32 and a shared one of 48
     * in place of the MLPs, picked by sigmoid plus a bias, normalised and
     * scaled by 2.5. f32, as qwen35 */
    check_logits(argv[1], argv[2], "tiny-nemotron-h-moe", "f32", NULL, "tiny-nemotron-h-moe", 1024,
                 0.01, 0.002);
    check_hybrid(argv[1], "tiny-nemotron-h-moe", 3, 3, true, 8 * 16 * 16 * 4);
    check_nemotron_moe(argv[1]);
    /* convolution rows that do not grow with the batch, against rings that
     * hold every position */
    static const char *const conv_shapes[] = { "tiny-lfm2", "tiny-granitehybrid", "tiny-qwen35",
                                               "tiny-falcon-h1", "tiny-nemotron-h" };
    for (size_t i = 0; i < sizeof(conv_shapes) / sizeof(*conv_shapes); i++)
        check_conv_rows(argv[1], conv_shapes[i]);
    /* gemma4 (Gemma 4): local and global layers of different heads, the
     * global ones' proportional RoPE (rope_freqs), v normalised, scores
     * unscaled, a scale per layer; tiny-gemma4 with shared caches, FFNs
     * of two widths and per-layer embeddings, tiny-gemma4-kv with the
     * values the keys' in global layers. f32: unscaled scores show the
     * f16 roundings of llama.cpp's attention products (0.007 apart) */
    check_logits(argv[1], argv[2], "tiny-gemma4", "f32", NULL, "tiny-gemma4", 320, 0.02, 0.004);
    check_logits(argv[1], argv[2], "tiny-gemma4-moe", "f32", NULL, "tiny-gemma4-moe", 320, 0.02,
                 0.004);
    check_logits(argv[1], argv[2], "tiny-gemma4-kv", "f32", NULL, "tiny-gemma4-kv", 320, 0.02,
                 0.004);
    check_gemma4(argv[1]);
    check_gemma4_moe(argv[1]);
    /* gemma3n (Gemma 3n E2B/E4B's layout): gemma4's layers with AltUp's
     * streams, Laurel's branch, the per-layer inputs into the streams and
     * the first ten layers' activations cut, in f32 (0.02 apart: llama.cpp's
     * f16 attention products, as gemma4's, which the cut's few neurons (6
     * of 128 here) carry further; AltUp's predictions mixed the other way
     * round move the logits by 3.9, no cut by 4.9, the streams' outputs
     * unscaled by 1.1) */
    check_logits(argv[1], argv[2], "tiny-gemma3n", "f32", NULL, "tiny-gemma3n", 320, 0.06, 0.015);
    check_gemma3n(argv[1]);
    check_gemma3n_copy(argv[1]);
    check_windows(argv[1], "tiny-gemma3n");
    /* gpt-oss: biases on q, k, v and the output, sinks, every other layer
     * local, NEOX RoPE under YaRN, 3 of 8 experts with biases and its
     * activation, in f32 (0.0017 apart; sinks left out move the logits
     * by 3.9, the output's bias 4.6, the experts' 2.0); its MXFP4 file:
     * llama.cpp rounds the activations to 8 bits against MXFP4 (0.066
     * apart from the file's values in f32 too) */
    check_logits(argv[1], argv[2], "tiny-gpt-oss", "f32", NULL, "tiny-gpt-oss", 1024, 0.005,
                 0.001);
    check_logits(argv[1], argv[2], "tiny-gpt-oss", "mxfp4", NULL, "tiny-gpt-oss-mxfp4", 1024,
                 0.1, 0.03);
    check_gpt_oss(argv[1]);
    /* qwen35moe (Qwen3.5-35B-A3B's layout): the same layers, 2 of 4
     * experts (normalised) and a gated shared expert */
    check_logits(argv[1], argv[2], "tiny-qwen35moe", "f32", NULL, "tiny-qwen35moe", 320, 0.002,
                 0.0005);
    /* (its delta nets normalise q, k and their outputs, which scales the
     * files' rounding up: llama.cpp's own logits of its Q8_0 and f32 files
     * differ by up to 1.7 on this shape) */
    check_shared(argv[1], "tiny-qwen35moe", 4, 32, 48, true, 0.5);
    /* shared experts: Granite MoE's (ungated), Granite 4.0-H Tiny's layout
     * (the mixers, 2 of 4 experts and a shared one), Qwen2-MoE's (gated,
     * its experts' weights not normalised, qwen2's biases) */
    check_shape(argv[1], argv[2], "tiny-granitemoeshared", 320);
    check_shape(argv[1], argv[2], "tiny-granitehybrid-moe", 320);
    check_shape(argv[1], argv[2], "tiny-qwen2moe", 320);
    check_shared(argv[1], "tiny-qwen2moe", 4, 32, 48, true, 0.05);
    check_shared(argv[1], "tiny-granitehybrid-moe", 4, 32, 48, false, 0.05);
    check_rot(argv[1], "tiny-phi4", "q8_0", ENG_DTYPE_Q8_0);
    check_rot(argv[1], "tiny-phi4-k", "q4_k", ENG_DTYPE_Q4_K);
    check_rot(argv[1], "tiny-phi4-k", "q5_k", ENG_DTYPE_Q5_K);
    check_rot(argv[1], "tiny-phi4-k", "q6_k", ENG_DTYPE_Q6_K);
    check_rot(argv[1], "tiny-phi4-k", "q4_1", ENG_DTYPE_Q4_1);
    check_rot(argv[1], "tiny-phi4-k", "q4_0", ENG_DTYPE_Q4_0);
    static const char *const block_types[] = { "q2_k", "q3_k", "q4_k", "q5_k", "q6_k", "iq4_nl", "iq4_xs" };
    for (size_t i = 0; i < sizeof(block_types) / sizeof(block_types[0]); i++)
        check_block_type(argv[1], argv[2], block_types[i]);
    check_k_native(argv[1], argv[2], "q4_k", ENG_DTYPE_Q4_K);
    check_k_native(argv[1], argv[2], "q5_k", ENG_DTYPE_Q5_K);
    check_k_native(argv[1], argv[2], "q6_k", ENG_DTYPE_Q6_K);
    check_k_plan(argv[1], "q4_k", ENG_DTYPE_Q4_K);
    check_k_plan(argv[1], "q5_k", ENG_DTYPE_Q5_K);
    check_k_plan(argv[1], "q4_1", ENG_DTYPE_Q4_1);
    check_k_plan(argv[1], "q4_0", ENG_DTYPE_Q4_0);
    check_phi3_plan(argv[1]);
    check_phi3_q8(argv[1]);
    check_windows(argv[1], "tiny-gemma2");
    check_windows(argv[1], "tiny-gemma3");
    check_windows(argv[1], "tiny-olmo3"); /* and no norm before the FFN: it reads x */
    check_windows(argv[1], "tiny-exaone4-swa");
    check_windows(argv[1], "tiny-gemma4-kv");
    check_windows(argv[1], "tiny-gemma4"); /* (FFNs of two widths) */
    check_windows(argv[1], "tiny-ministral3"); /* no window: q's temperature, token by token */
    check_windows(argv[1], "tiny-lfm2"); /* a convolution's cache rows, token by token */
    check_conv_ctx(argv[1]);
    check_lfm2_markers(argv[1], argv[2]);
    check_gemma_meta(argv[1]);
    check_q8_file(argv[1]);
    printf("ok\n");
    return 0;
}
