/* si-perplexity: perplexity of a model over a text file.
 *
 * The method is llama.cpp's llama-perplexity (default mode), so that the two
 * numbers can be compared: the whole file is tokenized once (special tokens
 * added as the model's metadata says, "<|...|>" not parsed), cut into
 * n_chunk = n_tokens / n_ctx chunks of n_ctx tokens, and each chunk is
 * evaluated from an empty context (its first token replaced by BOS when the
 * model adds one). Only the second half of each chunk is scored, so every
 * scored token has at least n_ctx/2 tokens of context: the logits at positions
 * first = n_ctx/2 .. n_ctx-2 predict the tokens at first+1 .. n_ctx-1. The
 * perplexity is exp(mean negative log-likelihood) over all scored tokens; the
 * value printed after chunk i is the running value over chunks 1..i, like
 * llama.cpp's "[i]ppl" list.
 *
 * Usage: si-perplexity [-m MODEL] -f FILE [-c N_CTX] [--chunks N] [-t THREADS]
 *                      [--f32] [--q8] [--prefill-q8] [--kv-type f16|q8_0] [--json]
 * --kv-type q8_0 keeps the KV cache in Q8_0 blocks (llama.cpp's -ctk/-ctv
 * q8_0). --prefill-q8 scores with x rounded to 8 bits per block of 32 in
 * the products with Q8_0, Q4_1, Q4_0, Q4_K and Q5_K rows where the CPU's
 * kernels do that (eng_model_params.prefill_q8), as llama.cpp does: what
 * the rounding costs in perplexity.
 */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine.h"
#include "si-util.h"

#define MAX_FILE_BYTES (64u << 20)

static void usage(FILE *f) {
    fprintf(f, "usage: si-perplexity [-m MODEL] -f FILE [-c N_CTX (512)] [--chunks N] "
               "[-t THREADS] [--f32] [--q8] [--prefill-q8] [--kv-type f16|q8_0] [--json]\n");
}

static char *read_file(const char *path, size_t *ret_len) {
    FILE *f = fopen(path, "rb");
    if (!f)
        return NULL;
    char *buf = NULL;
    size_t len = 0, cap = 0;
    for (;;) {
        if (len == cap) {
            if (cap >= MAX_FILE_BYTES) {
                free(buf);
                fclose(f);
                errno = EFBIG;
                return NULL;
            }
            cap = cap ? cap * 2 : 65536;
            char *nb = realloc(buf, cap + 1);
            if (!nb) {
                free(buf);
                fclose(f);
                return NULL;
            }
            buf = nb;
        }
        size_t n = fread(buf + len, 1, cap - len, f);
        if (n == 0)
            break;
        len += n;
    }
    fclose(f);
    buf[len] = 0;
    *ret_len = len;
    return buf;
}

/* -log softmax(logits)[target], in double. */
static double nll_of(const float *logits, int n_vocab, int32_t target) {
    float mx = logits[0];
    for (int i = 1; i < n_vocab; i++)
        if (logits[i] > mx)
            mx = logits[i];
    double sum = 0;
    for (int i = 0; i < n_vocab; i++)
        sum += exp((double)logits[i] - mx);
    return log(sum) - ((double)logits[target] - mx);
}

int main(int argc, char **argv) {
    const char *file = NULL;
    char *model_path = NULL;
    int n_ctx = 512, max_chunks = -1, n_threads = 0;
    bool json = false, f32 = false, q8 = false, pq8 = false;
    eng_kv_type kv_type = ENG_KV_F16;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        bool has = i + 1 < argc;
        if (!strcmp(a, "-m") && has) {
            free(model_path);
            model_path = strdup(argv[++i]);
        } else if (!strcmp(a, "-f") && has)
            file = argv[++i];
        else if (!strcmp(a, "-c") && has)
            n_ctx = atoi(argv[++i]);
        else if (!strcmp(a, "--chunks") && has)
            max_chunks = atoi(argv[++i]);
        else if (!strcmp(a, "-t") && has)
            n_threads = atoi(argv[++i]);
        else if (!strcmp(a, "--json"))
            json = true;
        else if (!strcmp(a, "--f32"))
            f32 = true;
        else if (!strcmp(a, "--q8"))
            q8 = true;
        else if (!strcmp(a, "--prefill-q8"))
            pq8 = true;
        else if (!strcmp(a, "--kv-type") && has) {
            if (eng_kv_type_parse(argv[++i], &kv_type) < 0) {
                fprintf(stderr, "--kv-type takes f16 or q8_0, not '%s'\n", argv[i]);
                return 2;
            }
        } else if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
            usage(stdout);
            return 0;
        } else {
            usage(stderr);
            return 2;
        }
    }
    if (!file || n_ctx < 8 || n_ctx > 32768) {
        usage(stderr);
        return 2;
    }
    if (!model_path) {
        char buf[4096];
        model_path = strdup(si_default_model(buf, sizeof buf));
    }

    size_t text_len;
    char *text = read_file(file, &text_len);
    if (!text) {
        fprintf(stderr, "Failed to read '%s': %s\n", file, strerror(errno));
        return 1;
    }

    eng_model_params mp = eng_model_params_default();
    mp.storage = f32 ? ENG_DTYPE_F32 : ENG_DTYPE_F16;
    mp.q8_matrices = q8;
    mp.prefill_q8 = pq8;
    mp.n_threads = n_threads;
    eng_model *m;
    eng_error err = {{0}};
    int rc = eng_model_load(model_path, &mp, &m, &err);
    if (rc < 0) {
        fprintf(stderr, "Failed to load model '%s': %s (%s)\n", model_path, err.msg, strerror(-rc));
        return 1;
    }
    eng_model_info info;
    eng_model_get_info(m, &info);
    const int n_vocab = info.n_vocab;

    /* Whether the model adds BOS: tokenize nothing with special tokens on. */
    int32_t probe[4];
    size_t n_probe = 0;
    bool add_bos = eng_tokenize(m, "", 0, ENG_TOK_ADD_SPECIAL, probe, 4, &n_probe) >= 0 &&
                   n_probe >= 1 && probe[0] == eng_token_bos(m);

    size_t cap = text_len + 16, n_tok = 0;
    int32_t *tokens = malloc(cap * sizeof(int32_t));
    if (!tokens || (rc = eng_tokenize(m, text, text_len, ENG_TOK_ADD_SPECIAL, tokens, cap, &n_tok)) < 0) {
        fprintf(stderr, "Failed to tokenize '%s': %s\n", file, strerror(tokens ? -rc : ENOMEM));
        return 1;
    }
    free(text);
    if (n_tok < 2 * (size_t)n_ctx) {
        fprintf(stderr, "'%s' has %zu tokens; a context of %d needs at least %d\n", file, n_tok,
                n_ctx, 2 * n_ctx);
        return 1;
    }
    int n_chunk = (int)(n_tok / (size_t)n_ctx);
    if (max_chunks > 0 && max_chunks < n_chunk)
        n_chunk = max_chunks;

    eng_session_params sp = eng_session_params_default();
    sp.n_ctx = n_ctx;
    sp.n_batch = n_ctx;
    sp.kv_type = kv_type;
    eng_session *s;
    if ((rc = eng_session_new(m, &sp, &s)) < 0) {
        fprintf(stderr, "Failed to create a session: %s\n", strerror(-rc));
        return 1;
    }

    double *chunk_ppl = calloc((size_t)n_chunk, sizeof(double));
    double *running = calloc((size_t)n_chunk, sizeof(double));
    int32_t *chunk = malloc((size_t)n_ctx * sizeof(int32_t));
    if (!chunk_ppl || !running || !chunk) {
        fprintf(stderr, "Out of memory\n");
        return 1;
    }
    const int first = n_ctx / 2;
    double nll = 0;
    long count = 0;
    uint64_t t0 = eng_time_ns();
    if (!json)
        printf("%s: %zu tokens, %d chunks of %d, BOS %s, %d threads\n", file, n_tok, n_chunk,
               n_ctx, add_bos ? "added" : "not added", info.n_threads);
    for (int c = 0; c < n_chunk; c++) {
        memcpy(chunk, tokens + (size_t)c * n_ctx, (size_t)n_ctx * sizeof(int32_t));
        if (add_bos)
            chunk[0] = eng_token_bos(m);
        eng_session_reset(s);
        rc = eng_session_eval(s, chunk, (size_t)n_ctx, ENG_EVAL_ALL_LOGITS);
        if (rc < 0) {
            fprintf(stderr, "Failed to evaluate chunk %d: %s\n", c + 1, strerror(-rc));
            return 1;
        }
        double cnll = 0;
        for (int j = first; j < n_ctx - 1; j++) {
            const float *lg = eng_session_logits(s, j);
            if (!lg) {
                fprintf(stderr, "No logits for token %d of chunk %d\n", j, c + 1);
                return 1;
            }
            cnll += nll_of(lg, n_vocab, tokens[(size_t)c * n_ctx + j + 1]);
        }
        int scored = n_ctx - 1 - first;
        nll += cnll;
        count += scored;
        chunk_ppl[c] = exp(cnll / scored);
        running[c] = exp(nll / count);
        if (!json) {
            printf("[%d]%.4f ", c + 1, running[c]);
            fflush(stdout);
        }
    }
    double secs = (double)(eng_time_ns() - t0) / 1e9;
    double ppl = exp(nll / count);
    if (json) {
        printf("{\"file\": \"%s\", \"n_ctx\": %d, \"n_tokens\": %zu, \"n_chunks\": %d, "
               "\"scored_tokens\": %ld, \"threads\": %d, \"storage\": \"%s\", \"seconds\": %.3f,\n",
               file, n_ctx, n_tok, n_chunk, count, info.n_threads, f32 ? "f32" : "f16", secs);
        printf(" \"chunk_ppl\": [");
        for (int c = 0; c < n_chunk; c++)
            printf("%s%.6f", c ? ", " : "", chunk_ppl[c]);
        printf("],\n \"running_ppl\": [");
        for (int c = 0; c < n_chunk; c++)
            printf("%s%.6f", c ? ", " : "", running[c]);
        eng_backend_info bi;
        const bool x8 = eng_model_backend_info(m, &bi) == 0 && bi.prefill_q8;
        printf("],\n \"prefill_x\": \"%s\", \"ppl\": %.6f}\n", x8 ? "8-bit" : "f32", ppl);
    } else {
        printf("\nfinal PPL over %d chunks (%ld scored tokens): %.4f  (%.1f s)\n", n_chunk, count,
               ppl, secs);
    }
    free(chunk);
    free(chunk_ppl);
    free(running);
    free(tokens);
    eng_session_free(s);
    eng_model_free(m);
    free(model_path);
    return 0;
}
