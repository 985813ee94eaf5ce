/* Golden runs: greedy decoding of SmolLM2-135M-Instruct against llama.cpp.
 *
 * Two reference sets made by llama.cpp (tests/data/README.md says how), each a
 * TSV with, for 14 chat prompts rendered with the model's ChatML template,
 * the prompt token ids and llama.cpp's greedy continuation (up to 64 tokens)
 * with the top-5 logits of every step, plus a file with the full logit vector
 * at step 0 of the first 3 prompts:
 *   - "Q4_1": the model file as shipped (golden-smollm2.tsv);
 *   - "F16": the same weights written as F16 (golden-smollm2-f16.tsv).
 *
 * For each set and prompt the test checks:
 *   - eng_chat_apply() renders the message exactly as the golden text;
 *   - eng_tokenize(rendered, PARSE_SPECIAL) gives the golden prompt ids;
 *   - greedy decoding from the golden prompt ids gives the golden tokens, or
 *     diverges only at a near-tie (llama.cpp's top-2 gap and our gap between
 *     the two candidates both below tie_tol) after every earlier step matched;
 *   - at every matched step, our logits of llama.cpp's top-5 tokens are within
 *     logit_tol of llama.cpp's;
 *   - at step 0 of the first prompts, over the whole vocabulary, the RMS and
 *     the largest absolute difference stay within step0_rms_tol / step0_max_tol.
 *
 * Why these tolerances. llama.cpp runs Q4_1 weights with activations quantized
 * to Q8_1 (8 bits per block of 32) inside every matrix product; we dequantize
 * the weights to f16 and keep f32 activations. That rounding alone moves
 * llama.cpp's own step-0 logits between its Q4_1 and its F16 run by RMS up to
 * 0.32, max 1.04, and ours sit at the same distance from the Q4_1 run
 * (measured: top-5 |dlogit| max 1.02, near-tie divergences with gaps up to
 * 0.37). So the Q4_1 set gets loose bounds (about 1.5x what was measured) and
 * mainly guards the greedy text as shipped. The F16 set computes with exactly
 * our weights (llama.cpp rounds activations to f16 there): measured top-5
 * |dlogit| max 0.051, step-0 RMS at most 0.018 and max 0.040, all 14 prompts
 * token-identical; its bounds are 2-3x that. They were checked against
 * deliberately broken engines: RoPE base x2, attention scale x1.1, RoPE
 * pairing (neox/normal) swapped, and K rotated one position off each fail with
 * step-0 RMS 0.3-10 (bound 0.04) and diverging text.
 *
 * Usage: test-golden [q4_1.tsv q4_1.bin [f16.tsv f16.bin]]; by default the
 * files under $SI_SOURCE_ROOT/tests/data. The model comes from SI_MODEL or the
 * cache (scripts/fetch-model.sh). Exit 0 pass, 1 fail, 77 skip (no model).
 *
 * SI_GOLDEN_QUICK=N checks only the first N prompts of each set, at most
 * QUICK_STEPS steps each, with the step-0 logits of those among them: the
 * same bounds on a few hundred token evaluations instead of a few thousand,
 * for an emulated CPU (scripts/test-aarch64.sh: the NEON kernels on the real
 * model, against llama.cpp).
 */
#include <errno.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine.h"

typedef struct golden_set {
    const char *name;
    const char *tsv, *bin;  /* file names under tests/data */
    float logit_tol;        /* |ours - llama.cpp| for llama.cpp's top-5 tokens */
    float tie_tol;          /* a divergence is a near-tie when both gaps are below this */
    double step0_rms_tol;   /* RMS over the whole vocabulary at step 0 */
    double step0_max_tol;   /* largest |difference| over the whole vocabulary at step 0 */
    bool prefill_q8;        /* the model loaded with x in 8 bits at prefill (eng_model_params) */
} golden_set;

/* See the header comment for where these numbers come from. */
static const golden_set g_sets[] = {
    {"llama.cpp Q4_1", "golden-smollm2.tsv", "golden-logits-step0.bin", 1.5f, 0.75f, 0.6, 2.0, true},
    {"llama.cpp F16", "golden-smollm2-f16.tsv", "golden-logits-step0-f16.bin", 0.15f, 0.1f, 0.04, 0.2,
     false},
};

#define MAX_PROMPTS 64
#define MAX_TOKENS 1024
#define MAX_STEPS 64
#define MAX_LINE (256 * 1024)

typedef struct step {
    int32_t chosen;
    float logit;
    int32_t top_id[5];
    float top_logit[5];
} step;

typedef struct golden {
    char *message;
    char *rendered;
    int32_t prompt[MAX_TOKENS];
    int n_prompt;
    step steps[MAX_STEPS];
    int n_steps;
} golden;

static golden g_prompts[MAX_PROMPTS];
static int g_n_prompts;
/* SI_GOLDEN_QUICK: prompts checked (all when 0) and their steps */
enum { QUICK_STEPS = 8 };
static int g_quick;

/* Undoes the escaping of the generator: \n \t \r \\ \xHH. */
static char *unescape(const char *s, size_t len) {
    char *o = malloc(len + 1);
    size_t j = 0;
    if (!o)
        return NULL;
    for (size_t i = 0; i < len; i++) {
        if (s[i] == '\\' && i + 1 < len) {
            char c = s[++i];
            if (c == 'n')
                o[j++] = '\n';
            else if (c == 't')
                o[j++] = '\t';
            else if (c == 'r')
                o[j++] = '\r';
            else if (c == 'x' && i + 2 < len) {
                char hex[3] = {s[i + 1], s[i + 2], 0};
                o[j++] = (char)strtol(hex, NULL, 16);
                i += 2;
            } else
                o[j++] = c;
        } else
            o[j++] = s[i];
    }
    o[j] = 0;
    return o;
}

/* Splits line in place at tabs; returns the field count (at most cap). */
static int split_tabs(char *line, char **f, int cap) {
    int n = 0;
    f[n++] = line;
    for (char *p = line; *p && n < cap; p++)
        if (*p == '\t') {
            *p = 0;
            f[n++] = p + 1;
        }
    return n;
}

static int parse_ids(const char *s, int32_t *ids, int cap) {
    int n = 0;
    while (*s) {
        char *end;
        long v = strtol(s, &end, 10);
        if (end == s || n >= cap || v < 0 || v > INT32_MAX)
            return -1;
        ids[n++] = (int32_t)v;
        s = end;
        if (*s == ',')
            s++;
        else if (*s)
            return -1;
    }
    return n;
}

static void free_golden(void) {
    for (int p = 0; p < g_n_prompts; p++) {
        free(g_prompts[p].message);
        free(g_prompts[p].rendered);
    }
    memset(g_prompts, 0, sizeof g_prompts);
    g_n_prompts = 0;
}

static int load_golden(const char *path) {
    free_golden();
    FILE *f = fopen(path, "r");
    if (!f) {
        fprintf(stderr, "cannot open %s: %s\n", path, strerror(errno));
        return -1;
    }
    char *line = malloc(MAX_LINE);
    int rc = 0;
    while (line && fgets(line, MAX_LINE, f)) {
        size_t len = strlen(line);
        if (len && line[len - 1] == '\n')
            line[--len] = 0;
        if (!len || line[0] == '#')
            continue;
        char *fld[8];
        int nf = split_tabs(line, fld, 8);
        int idx = nf > 1 ? atoi(fld[1]) : -1;
        if (!strcmp(fld[0], "prompt") && nf == 5) {
            if (idx != g_n_prompts || idx >= MAX_PROMPTS) {
                rc = -1;
                break;
            }
            golden *g = &g_prompts[g_n_prompts++];
            g->message = unescape(fld[2], strlen(fld[2]));
            g->rendered = unescape(fld[3], strlen(fld[3]));
            g->n_prompt = parse_ids(fld[4], g->prompt, MAX_TOKENS);
            if (!g->message || !g->rendered || g->n_prompt <= 0) {
                rc = -1;
                break;
            }
        } else if (!strcmp(fld[0], "step") && nf == 6) {
            if (idx != g_n_prompts - 1) {
                rc = -1;
                break;
            }
            golden *g = &g_prompts[idx];
            if (atoi(fld[2]) != g->n_steps || g->n_steps >= MAX_STEPS) {
                rc = -1;
                break;
            }
            step *s = &g->steps[g->n_steps++];
            s->chosen = atoi(fld[3]);
            s->logit = strtof(fld[4], NULL);
            char *p = fld[5];
            for (int k = 0; k < 5; k++) {
                char *end;
                s->top_id[k] = (int32_t)strtol(p, &end, 10);
                if (*end != ':') {
                    rc = -1;
                    break;
                }
                s->top_logit[k] = strtof(end + 1, &end);
                p = *end == ',' ? end + 1 : end;
            }
            if (rc < 0 || s->top_id[0] != s->chosen) {
                rc = -1;
                break;
            }
        } else if (!strcmp(fld[0], "gen")) {
            continue;
        } else {
            rc = -1;
            break;
        }
    }
    free(line);
    fclose(f);
    if (rc < 0 || g_n_prompts == 0)
        fprintf(stderr, "%s: malformed golden file\n", path);
    return rc < 0 || g_n_prompts == 0 ? -1 : 0;
}

static char *default_model_path(void) {
    const char *env = getenv("SI_MODEL");
    if (env && *env)
        return strdup(env);
    const char *xdg = getenv("XDG_CACHE_HOME"), *home = getenv("HOME");
    char buf[4096];
    if (xdg && *xdg)
        snprintf(buf, sizeof buf, "%s/selectinfer/SmolLM2-135M-Instruct.Q4_1.gguf", xdg);
    else
        snprintf(buf, sizeof buf, "%s/.cache/selectinfer/SmolLM2-135M-Instruct.Q4_1.gguf",
                 home ? home : ".");
    return strdup(buf);
}

static int32_t argmax(const float *x, int n) {
    int32_t best = 0;
    for (int i = 1; i < n; i++)
        if (x[i] > x[best])
            best = i;
    return best;
}

/* Compares step-0 logits over the whole vocabulary; the file is
 * "SIGL", version 1, n_prompts, n_vocab (u32 LE), then per prompt its index
 * (u32) and n_vocab f32. */
static int check_step0(eng_session *s, const golden_set *set, const char *path, int n_vocab) {
    FILE *f = fopen(path, "rb");
    if (!f) {
        fprintf(stderr, "cannot open %s: %s\n", path, strerror(errno));
        return 1;
    }
    uint32_t hdr[4];
    int fails = 0;
    float *ref = malloc(sizeof(float) * (size_t)n_vocab);
    if (!ref || fread(hdr, 4, 4, f) != 4 || hdr[0] != 0x4c474953u || hdr[1] != 1 ||
        hdr[3] != (uint32_t)n_vocab || hdr[2] > (uint32_t)g_n_prompts) {
        fprintf(stderr, "%s: bad header\n", path);
        hdr[2] = 0;
        fails++;
    }
    for (uint32_t p = 0; p < hdr[2]; p++) {
        uint32_t idx;
        if (fread(&idx, 4, 1, f) != 1 || idx >= (uint32_t)g_n_prompts ||
            fread(ref, sizeof(float), (size_t)n_vocab, f) != (size_t)n_vocab) {
            fprintf(stderr, "%s: truncated\n", path);
            fails++;
            break;
        }
        if (g_quick && idx >= (uint32_t)g_quick)
            continue;
        const golden *g = &g_prompts[idx];
        eng_session_reset(s);
        const float *lg = NULL;
        if (eng_session_eval(s, g->prompt, (size_t)g->n_prompt, 0) < 0 ||
            !(lg = eng_session_logits(s, -1))) {
            fails++;
            break;
        }
        double sum2 = 0, maxd = 0;
        for (int i = 0; i < n_vocab; i++) {
            double d = fabs((double)lg[i] - ref[i]);
            sum2 += d * d;
            if (!(d <= maxd)) /* NaN counts as the worst */
                maxd = d;
        }
        double rms = sqrt(sum2 / n_vocab);
        bool ok = rms <= set->step0_rms_tol && maxd <= set->step0_max_tol;
        printf("  step-0 logits, prompt %u: rms %.4f max %.4f (tol %.2f / %.2f) %s\n", idx, rms,
               maxd, set->step0_rms_tol, set->step0_max_tol, ok ? "ok" : "FAIL");
        fails += !ok;
    }
    free(ref);
    fclose(f);
    return fails;
}

/* Runs every prompt of one golden set; returns the number of failures. */
static int run_set(eng_model *m, eng_session *s, const golden_set *set, const char *tsv,
                   const char *bin) {
    eng_model_info info;
    eng_model_get_info(m, &info);
    const int n_vocab = info.n_vocab;
    int fails = 0, n_exact = 0, n_tie = 0, total_steps = 0;
    float max_dlogit = 0;
    double sum_d2 = 0;
    long n_d = 0;
    static char rendered[64 * 1024];
    static int32_t toks[MAX_TOKENS];

    printf("%s (%s):\n", set->name, tsv);
    if (load_golden(tsv) < 0)
        return 1;
    const int n_prompts = g_quick && g_quick < g_n_prompts ? g_quick : g_n_prompts;
    for (int p = 0; p < n_prompts; p++) {
        const golden *g = &g_prompts[p];
        const int n_steps = g_quick && g->n_steps > QUICK_STEPS ? QUICK_STEPS : g->n_steps;

        /* Template and tokenizer. */
        eng_chat_msg msg = {.role = "user", .content = g->message};
        int len = eng_chat_apply(m, &msg, 1, true, rendered, sizeof rendered);
        if (len < 0 || (size_t)len >= sizeof rendered || strcmp(rendered, g->rendered) != 0) {
            printf("  prompt %d: FAIL chat template renders differently (rc %d)\n", p, len);
            fails++;
        }
        size_t n_tok = 0;
        int rc = eng_tokenize(m, g->rendered, strlen(g->rendered), ENG_TOK_PARSE_SPECIAL, toks,
                              MAX_TOKENS, &n_tok);
        if (rc < 0 || n_tok != (size_t)g->n_prompt ||
            memcmp(toks, g->prompt, n_tok * sizeof(int32_t)) != 0) {
            printf("  prompt %d: FAIL tokenization differs (rc %d, %zu vs %d tokens)\n", p, rc,
                   n_tok, g->n_prompt);
            fails++;
        }

        /* Greedy decoding from llama.cpp's prompt ids, so that a tokenizer
         * defect does not hide the state of the forward pass. */
        eng_session_reset(s);
        rc = eng_session_eval(s, g->prompt, (size_t)g->n_prompt, 0);
        int st = 0;
        const char *verdict = "exact";
        float prompt_max = 0;
        for (; rc >= 0 && st < n_steps; st++) {
            const step *gs = &g->steps[st];
            const float *lg = eng_session_logits(s, -1);
            if (!lg) {
                rc = -EINVAL;
                break;
            }
            int bad = -1;
            for (int k = 0; k < 5; k++) {
                float d = fabsf(lg[gs->top_id[k]] - gs->top_logit[k]);
                if (!(d <= set->logit_tol)) {
                    bad = k;
                    break;
                }
                if (d > prompt_max)
                    prompt_max = d;
                sum_d2 += (double)d * d;
                n_d++;
            }
            if (bad >= 0) {
                printf("  prompt %d step %d: FAIL logit of token %d: ours %.4f llama.cpp %.4f\n", p,
                       st, gs->top_id[bad], lg[gs->top_id[bad]], gs->top_logit[bad]);
                fails++;
                verdict = "FAIL logits differ";
                break;
            }
            int32_t ours = argmax(lg, n_vocab);
            if (ours != gs->chosen) {
                float gap_ref = gs->top_logit[0] - gs->top_logit[1];
                float gap_ours = lg[ours] - lg[gs->chosen];
                if (gap_ref < set->tie_tol && gap_ours < set->tie_tol) {
                    printf("  prompt %d step %d: near-tie, chose %d, llama.cpp %d (gaps: llama.cpp "
                           "%.4f ours %.4f)\n",
                           p, st, ours, gs->chosen, gap_ref, gap_ours);
                    verdict = "near-tie divergence";
                    n_tie++;
                } else {
                    printf("  prompt %d step %d: FAIL chose %d, llama.cpp %d (gaps: llama.cpp %.4f "
                           "ours %.4f)\n",
                           p, st, ours, gs->chosen, gap_ref, gap_ours);
                    verdict = "FAIL diverged";
                    fails++;
                }
                break;
            }
            total_steps++;
            if (st + 1 < n_steps)
                rc = eng_session_eval(s, &ours, 1, 0);
        }
        if (rc < 0) {
            printf("  prompt %d: FAIL eval returned %d\n", p, rc);
            fails++;
            verdict = "FAIL eval error";
        }
        if (!strcmp(verdict, "exact"))
            n_exact++;
        if (prompt_max > max_dlogit)
            max_dlogit = prompt_max;
        printf("  prompt %2d: %2d/%2d steps matched, max |dlogit| %.4f: %s\n", p, st, n_steps,
               prompt_max, verdict);
    }

    fails += check_step0(s, set, bin, n_vocab);
    printf("  %d prompts: %d exact, %d near-tie divergences (tol %.2f); %d steps matched; top-5 "
           "|dlogit| max %.4f rms %.4f (tol %.2f)\n",
           n_prompts, n_exact, n_tie, set->tie_tol, total_steps, max_dlogit,
           n_d ? sqrt(sum_d2 / n_d) : 0.0, set->logit_tol);
    free_golden();
    return fails;
}

int main(int argc, char **argv) {
    const char *root = getenv("SI_SOURCE_ROOT"), *quick = getenv("SI_GOLDEN_QUICK");
    g_quick = quick ? atoi(quick) : 0;
    if (g_quick < 0)
        g_quick = 0;
    char *model_path = default_model_path();
    FILE *probe = fopen(model_path, "rb");
    if (!probe) {
        printf("SKIP: model %s not found (run scripts/fetch-model.sh or set SI_MODEL)\n", model_path);
        free(model_path);
        return 77;
    }
    fclose(probe);

    /* Files: argv[1..] pairs (tsv, bin) in the order of g_sets, or the
     * defaults under $SI_SOURCE_ROOT/tests/data. */
    int fails = 0;
    for (size_t i = 0; i < sizeof g_sets / sizeof g_sets[0]; i++) {
        /* The F16 set holds our exact products to llama.cpp's f16 ones, so
         * its model takes x in f32 at prefill; the Q4_1 set's takes it in 8
         * bits where the kernels have that (prefill_q8), as llama.cpp's
         * Q4_1 products do */
        eng_model_params mp = eng_model_params_default();
        mp.storage = ENG_DTYPE_F16;
        mp.n_threads = 2;
        mp.prefill_q8 = g_sets[i].prefill_q8;
        eng_model *m;
        eng_error err = {{0}};
        int rc = eng_model_load(model_path, &mp, &m, &err);
        if (rc < 0) {
            fprintf(stderr, "FAIL: load %s: %s (%d)\n", model_path, err.msg, rc);
            free(model_path);
            return 1;
        }
        eng_session_params sp = eng_session_params_default();
        sp.n_ctx = 512;
        eng_session *s;
        if (eng_session_new(m, &sp, &s) < 0) {
            fprintf(stderr, "FAIL: session\n");
            eng_model_free(m);
            free(model_path);
            return 1;
        }
        char tsv[4096], bin[4096];
        if ((int)(2 * i + 2) < argc) {
            snprintf(tsv, sizeof tsv, "%s", argv[2 * i + 1]);
            snprintf(bin, sizeof bin, "%s", argv[2 * i + 2]);
        } else {
            snprintf(tsv, sizeof tsv, "%s/tests/data/%s", root ? root : ".", g_sets[i].tsv);
            snprintf(bin, sizeof bin, "%s/tests/data/%s", root ? root : ".", g_sets[i].bin);
        }
        fails += run_set(m, s, &g_sets[i], tsv, bin);
        eng_session_free(s);
        eng_model_free(m);
    }
    free(model_path);
    printf("%s\n", fails ? "FAIL" : "PASS");
    return fails ? 1 : 0;
}
