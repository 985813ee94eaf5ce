/* si-synth: runs the tool (path in argv[1]) for the small shapes and checks
 * the files it writes: metadata, tokenizer, tensor set and shapes, weight
 * statistics, determinism per seed, and (when the real SmolLM2 file is
 * present) that the smollm2-135m shape matches its tensor layout. */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "gguf.h"
#include "quants.h"

static int failures;
static const char *tool;
static char dir[256];

#define CHECK(cond)                                                                              \
    do {                                                                                         \
        if (!(cond)) {                                                                           \
            fprintf(stderr, "%s:%d: check failed: %s\n", __FILE__, __LINE__, #cond);            \
            failures++;                                                                          \
        }                                                                                        \
    } while (0)

/* Runs si-synth with args; returns its exit status. */
static int run(const char *args, const char *out_name)
{
    char cmd[4096];
    /* SI_EXE_WRAPPER: a command prefix (qemu for the aarch64 build) */
    const char *wrap = getenv("SI_EXE_WRAPPER");
    snprintf(cmd, sizeof(cmd), "%s '%s' %s --out '%s/%s' 2>&1", wrap ? wrap : "", tool, args, dir,
             out_name);
    int st = system(cmd);
    return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

static gguf_file *open_out(const char *name)
{
    char path[512];
    snprintf(path, sizeof(path), "%s/%s", dir, name);
    gguf_file *f = NULL;
    eng_error err = {{0}};
    if (gguf_open(path, &f, &err) < 0) {
        fprintf(stderr, "open %s: %s\n", path, err.msg);
        failures++;
        return NULL;
    }
    return f;
}

static bool str_is(const gguf_file *f, const char *key, const char *want)
{
    const char *s;
    size_t n;
    return gguf_get_str(f, key, &s, &n) == 0 && n == strlen(want) && memcmp(s, want, n) == 0;
}

static bool tok_is(const gguf_file *f, uint32_t id, const char *want)
{
    const char *s;
    size_t n;
    return gguf_get_arr_str(f, "tokenizer.ggml.tokens", id, &s, &n) == 0 && n == strlen(want) &&
           memcmp(s, want, n) == 0;
}

static const gguf_tensor *expect_tensor(const gguf_file *f, const char *name, uint32_t n_dims,
                                        uint64_t ne0, uint64_t ne1)
{
    const gguf_tensor *t = gguf_find_tensor(f, name);
    if (!t || t->n_dims != n_dims || t->ne[0] != ne0 || t->ne[1] != ne1) {
        fprintf(stderr, "tensor %s: missing or wrong shape\n", name);
        failures++;
        return NULL;
    }
    return t;
}

/* Mean and standard deviation of a whole tensor. */
static void stats(const gguf_tensor *t, double *mean, double *sd)
{
    size_t rb = ggml_row_bytes(t->type, t->ne[0]);
    float *row = malloc(t->ne[0] * sizeof(float));
    double s = 0, s2 = 0;
    uint64_t rows = t->ne[1] * t->ne[2] * t->ne[3], n = 0;
    for (uint64_t r = 0; r < rows; r++) {
        if (eng_dequant_row_f32(t->type, (const uint8_t *)t->data + r * rb, row, t->ne[0]) < 0)
            failures++;
        for (uint64_t j = 0; j < t->ne[0]; j++, n++) {
            s += row[j];
            s2 += (double)row[j] * row[j];
        }
    }
    free(row);
    *mean = s / (double)n;
    *sd = sqrt(s2 / (double)n - *mean * *mean);
}

static void check_model(const gguf_file *f, const char *arch, int n_layer, int n_embd, int n_ff,
                        int n_head, int n_head_kv, bool bias, uint32_t wtype)
{
    char key[128];
    uint32_t u, n_vocab = 0;
    CHECK(str_is(f, "general.architecture", arch));
#define K(s) (snprintf(key, sizeof(key), "%s.%s", arch, s), key)
    CHECK(gguf_get_u32(f, K("block_count"), &u) == 0 && u == (uint32_t)n_layer);
    CHECK(gguf_get_u32(f, K("embedding_length"), &u) == 0 && u == (uint32_t)n_embd);
    CHECK(gguf_get_u32(f, K("feed_forward_length"), &u) == 0 && u == (uint32_t)n_ff);
    CHECK(gguf_get_u32(f, K("attention.head_count"), &u) == 0 && u == (uint32_t)n_head);
    CHECK(gguf_get_u32(f, K("attention.head_count_kv"), &u) == 0 && u == (uint32_t)n_head_kv);
    CHECK(gguf_get_u32(f, K("rope.dimension_count"), &u) == 0 && u == (uint32_t)(n_embd / n_head));
    CHECK(gguf_get_u32(f, K("context_length"), &u) == 0 && u >= 2048);
    float fl;
    CHECK(gguf_get_f32(f, K("rope.freq_base"), &fl) == 0 && fl >= 10000.0f);
    CHECK(gguf_get_f32(f, K("attention.layer_norm_rms_epsilon"), &fl) == 0 && fl > 0 && fl < 1e-4f);
    CHECK(gguf_get_u32(f, K("vocab_size"), &n_vocab) == 0);
#undef K
    CHECK(str_is(f, "tokenizer.ggml.model", "gpt2"));
    enum gguf_type et;
    uint64_t nt = 0, nm = 0;
    CHECK(gguf_get_arr_info(f, "tokenizer.ggml.tokens", &et, &nt) == 0 && et == GGUF_TYPE_STRING &&
          nt == n_vocab);
    CHECK(gguf_get_arr_info(f, "tokenizer.ggml.token_type", &et, &nt) == 0 && nt == n_vocab);
    CHECK(gguf_get_arr_info(f, "tokenizer.ggml.merges", &et, &nm) == 0 && nm > 20);
    /* merges are "a b" with both halves and their concatenation tokens */
    const char *s;
    size_t n;
    CHECK(gguf_get_arr_str(f, "tokenizer.ggml.merges", 0, &s, &n) == 0 && memchr(s, ' ', n));
    uint32_t bos, eos;
    CHECK(gguf_get_u32(f, "tokenizer.ggml.bos_token_id", &bos) == 0 && bos < n_vocab);
    CHECK(gguf_get_u32(f, "tokenizer.ggml.eos_token_id", &eos) == 0 && eos < n_vocab);
    CHECK(gguf_get_str(f, "tokenizer.chat_template", &s, &n) == 0 && n > 50);
    /* all 256 byte tokens: "!" and "Ġ" (the space) exist exactly once */
    int n_bang = 0, n_space = 0;
    for (uint64_t i = 0; i < n_vocab; i++) {
        n_bang += tok_is(f, (uint32_t)i, "!");
        n_space += tok_is(f, (uint32_t)i, "\xc4\xa0");
    }
    CHECK(n_bang == 1 && n_space == 1);

    /* tensors */
    int per_layer = 9 + (bias ? 3 : 0);
    CHECK(gguf_n_tensors(f) == (size_t)(2 + per_layer * n_layer));
    int hd = n_embd / n_head;
    const gguf_tensor *t = expect_tensor(f, "token_embd.weight", 2, n_embd, n_vocab);
    expect_tensor(f, "output_norm.weight", 1, n_embd, 1);
    CHECK(gguf_find_tensor(f, "output.weight") == NULL); /* tied */
    for (int l = 0; l < n_layer; l++) {
        char name[64];
#define T(sfx, nd, a, b) (snprintf(name, sizeof(name), "blk.%d.%s", l, sfx), expect_tensor(f, name, nd, a, b))
        const gguf_tensor *norm = T("attn_norm.weight", 1, n_embd, 1);
        T("ffn_norm.weight", 1, n_embd, 1);
        const gguf_tensor *q = T("attn_q.weight", 2, n_embd, n_head * hd);
        T("attn_k.weight", 2, n_embd, n_head_kv * hd);
        T("attn_v.weight", 2, n_embd, n_head_kv * hd);
        T("attn_output.weight", 2, n_head * hd, n_embd);
        T("ffn_gate.weight", 2, n_embd, n_ff);
        T("ffn_up.weight", 2, n_embd, n_ff);
        const gguf_tensor *down = T("ffn_down.weight", 2, n_ff, n_embd);
        if (bias) {
            T("attn_q.bias", 1, n_head * hd, 1);
            T("attn_k.bias", 1, n_head_kv * hd, 1);
            T("attn_v.bias", 1, n_head_kv * hd, 1);
        }
#undef T
        double mean, sd;
        if (norm) {
            CHECK(norm->type == GGML_TYPE_F32);
            stats(norm, &mean, &sd);
            CHECK(mean == 1.0 && sd == 0.0);
        }
        if (q) {
            CHECK(q->type == wtype);
            stats(q, &mean, &sd); /* ~N(0, 1/fan_in) */
            CHECK(fabs(mean) < 0.02 && fabs(sd * sqrt((double)n_embd) - 1.0) < 0.15);
        }
        if (down) {
            stats(down, &mean, &sd);
            CHECK(fabs(sd * sqrt((double)n_ff) - 1.0) < 0.15);
        }
    }
    if (t) {
        double mean, sd;
        stats(t, &mean, &sd);
        CHECK(isfinite(sd) && sd > 0);
    }
}

static bool same_files(const char *a, const char *b)
{
    char pa[512], pb[512];
    snprintf(pa, sizeof(pa), "%s/%s", dir, a);
    snprintf(pb, sizeof(pb), "%s/%s", dir, b);
    FILE *fa = fopen(pa, "rb"), *fb = fopen(pb, "rb");
    bool same = fa && fb;
    while (same) {
        int x = fgetc(fa), y = fgetc(fb);
        if (x != y)
            same = false;
        if (x == EOF || y == EOF)
            break;
    }
    if (fa)
        fclose(fa);
    if (fb)
        fclose(fb);
    return same;
}

static void rm(const char *name)
{
    char p[512];
    snprintf(p, sizeof(p), "%s/%s", dir, name);
    unlink(p);
}

/* The real SmolLM2 file, when present: the synthetic shape must have the
 * same metadata values and tensor shapes (first layer). */
static void compare_with_real(const gguf_file *syn)
{
    char buf[1024];
    const char *path = getenv("SI_MODEL");
    if (!path || !*path || !strstr(path, "SmolLM2-135M")) {
        const char *cache = getenv("XDG_CACHE_HOME"), *home = getenv("HOME");
        if (cache && *cache)
            snprintf(buf, sizeof(buf), "%s/selectinfer/SmolLM2-135M-Instruct.Q4_1.gguf", cache);
        else
            snprintf(buf, sizeof(buf), "%s/.cache/selectinfer/SmolLM2-135M-Instruct.Q4_1.gguf",
                     home ? home : "");
        path = buf;
    }
    gguf_file *real = NULL;
    if (access(path, R_OK) != 0 || gguf_open(path, &real, NULL) < 0) {
        fprintf(stderr, "note: real SmolLM2 file not available, skipping the comparison\n");
        return;
    }
    static const char *const keys[] = {
        "llama.embedding_length", "llama.feed_forward_length", "llama.attention.head_count",
        "llama.attention.head_count_kv", "llama.context_length", "llama.vocab_size",
        "llama.rope.dimension_count", "tokenizer.ggml.bos_token_id",
        "tokenizer.ggml.eos_token_id",
    };
    for (size_t i = 0; i < sizeof(keys) / sizeof(keys[0]); i++) {
        uint32_t a = 0, b = 1;
        CHECK(gguf_get_u32(real, keys[i], &a) == 0 && gguf_get_u32(syn, keys[i], &b) == 0 && a == b);
    }
    float fa, fb;
    CHECK(gguf_get_f32(real, "llama.rope.freq_base", &fa) == 0 &&
          gguf_get_f32(syn, "llama.rope.freq_base", &fb) == 0 && fa == fb);
    const char *sa, *sb;
    size_t na, nb;
    CHECK(gguf_get_str(real, "tokenizer.ggml.pre", &sa, &na) == 0 &&
          gguf_get_str(syn, "tokenizer.ggml.pre", &sb, &nb) == 0 && na == nb && !memcmp(sa, sb, na));
    for (uint32_t id = 0; id < 17; id++) { /* the special tokens */
        CHECK(gguf_get_arr_str(real, "tokenizer.ggml.tokens", id, &sa, &na) == 0 &&
              gguf_get_arr_str(syn, "tokenizer.ggml.tokens", id, &sb, &nb) == 0 && na == nb &&
              !memcmp(sa, sb, na));
    }
    for (size_t i = 0; i < gguf_n_tensors(syn); i++) {
        const gguf_tensor *t = gguf_get_tensor(syn, i), *r = gguf_find_tensor(real, t->name);
        CHECK(r && r->n_dims == t->n_dims && !memcmp(r->ne, t->ne, sizeof(r->ne)));
    }
    gguf_close(real);
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        fprintf(stderr, "usage: test-synth PATH-TO-si-synth\n");
        return 1;
    }
    tool = argv[1];
    const char *base = getenv("TMPDIR");
    snprintf(dir, sizeof(dir), "%s/test-synth-XXXXXX", base && *base ? base : "/tmp");
    if (!mkdtemp(dir)) {
        perror("mkdtemp");
        return 1;
    }

    CHECK(run("--shape tiny --seed 7", "tiny.gguf") == 0);
    CHECK(run("--shape tiny --seed 7", "tiny2.gguf") == 0);
    CHECK(run("--shape tiny --seed 8", "tiny3.gguf") == 0);
    CHECK(same_files("tiny.gguf", "tiny2.gguf"));
    CHECK(!same_files("tiny.gguf", "tiny3.gguf"));
    gguf_file *f = open_out("tiny.gguf");
    if (f) {
        check_model(f, "llama", 2, 64, 192, 4, 2, false, GGML_TYPE_F16);
        CHECK(str_is(f, "tokenizer.ggml.pre", "smollm"));
        CHECK(tok_is(f, 1, "<|im_start|>") && tok_is(f, 2, "<|im_end|>"));
        const char *s;
        size_t n;
        CHECK(gguf_get_str(f, "tokenizer.chat_template", &s, &n) == 0 &&
              memmem(s, n, "<|im_start|>", 12));
        gguf_close(f);
    }

    CHECK(run("--shape tiny-qwen2 --type q8_0 --layers 3", "tq.gguf") == 0);
    f = open_out("tq.gguf");
    if (f) {
        check_model(f, "qwen2", 3, 64, 192, 4, 2, true, GGML_TYPE_Q8_0);
        CHECK(str_is(f, "tokenizer.ggml.pre", "qwen2"));
        uint32_t eos;
        CHECK(gguf_get_u32(f, "tokenizer.ggml.eos_token_id", &eos) == 0 && tok_is(f, eos, "<|im_end|>"));
        const gguf_tensor *b = gguf_find_tensor(f, "blk.0.attn_q.bias");
        CHECK(b && b->type == GGML_TYPE_F32);
        gguf_close(f);
    }

    /* experts: the router in f32 and the experts' 3-D tensors in the
     * type asked for; LFM2-MoE's first two layers dense, of their own
     * width, the others with the bias to pick by */
    CHECK(run("--shape tiny-lfm2moe --type q8_0", "tm.gguf") == 0);
    f = open_out("tm.gguf");
    if (f) {
        uint32_t v[5];
        CHECK(gguf_get_u32(f, "lfm2moe.expert_count", &v[0]) == 0 && v[0] == 8 &&
              gguf_get_u32(f, "lfm2moe.expert_used_count", &v[1]) == 0 && v[1] == 2 &&
              gguf_get_u32(f, "lfm2moe.expert_feed_forward_length", &v[2]) == 0 && v[2] == 32 &&
              gguf_get_u32(f, "lfm2moe.feed_forward_length", &v[3]) == 0 && v[3] == 96 &&
              gguf_get_u32(f, "lfm2moe.leading_dense_block_count", &v[4]) == 0 && v[4] == 2);
        expect_tensor(f, "blk.1.ffn_gate.weight", 2, 64, 96);
        CHECK(!gguf_find_tensor(f, "blk.1.ffn_gate_inp.weight"));
        const gguf_tensor *r = expect_tensor(f, "blk.2.ffn_gate_inp.weight", 2, 64, 8);
        const gguf_tensor *g = expect_tensor(f, "blk.2.ffn_gate_exps.weight", 3, 64, 32);
        const gguf_tensor *d = expect_tensor(f, "blk.4.ffn_down_exps.weight", 3, 32, 64);
        const gguf_tensor *b = gguf_find_tensor(f, "blk.2.exp_probs_b.bias");
        CHECK(r && r->type == GGML_TYPE_F32 && g && g->ne[2] == 8 && g->type == GGML_TYPE_Q8_0 &&
              d && d->ne[2] == 8 && b && b->type == GGML_TYPE_F32 && b->ne[0] == 8);
        gguf_close(f);
    }

    /* K types fall back where rows are not whole 256-blocks (n_embd 64) */
    CHECK(run("--shape tiny --type q4_k", "tk.gguf") == 0);
    f = open_out("tk.gguf");
    if (f) {
        const gguf_tensor *t = gguf_find_tensor(f, "blk.0.ffn_gate.weight");
        CHECK(t && t->type == GGML_TYPE_Q5_0);
        gguf_close(f);
    }
    /* Q3_K falls back to IQ4_NL as in llama-quantize; tiny-k keeps it */
    CHECK(run("--shape tiny --type q3_k", "tk.gguf") == 0);
    f = open_out("tk.gguf");
    if (f) {
        const gguf_tensor *t = gguf_find_tensor(f, "blk.0.ffn_gate.weight");
        CHECK(t && t->type == GGML_TYPE_IQ4_NL);
        gguf_close(f);
    }
    CHECK(run("--shape tiny-k --type q3_k", "tk.gguf") == 0);
    f = open_out("tk.gguf");
    if (f) {
        const gguf_tensor *t = gguf_find_tensor(f, "blk.1.ffn_down.weight");
        CHECK(t && t->type == GGML_TYPE_Q3_K && t->ne[0] == 512);
        gguf_close(f);
    }
    /* mxfp4 is llama-quantize's MXFP4_MOE (file type 38): the experts'
     * tensors MXFP4, the other matrices Q8_0 (the shared expert's too, but
     * its 48-long down rows, which fall back to F16) */
    CHECK(run("--shape tiny-qwen2moe --type mxfp4", "tk.gguf") == 0);
    f = open_out("tk.gguf");
    if (f) {
        uint32_t ft = 0;
        const gguf_tensor *g = gguf_find_tensor(f, "blk.0.ffn_gate_exps.weight");
        const gguf_tensor *d = gguf_find_tensor(f, "blk.1.ffn_down_exps.weight");
        const gguf_tensor *s = gguf_find_tensor(f, "blk.0.ffn_up_shexp.weight");
        const gguf_tensor *ds = gguf_find_tensor(f, "blk.0.ffn_down_shexp.weight");
        const gguf_tensor *q = gguf_find_tensor(f, "blk.0.attn_q.weight");
        const gguf_tensor *e = gguf_find_tensor(f, "token_embd.weight");
        const gguf_tensor *o = gguf_find_tensor(f, "output.weight");
        CHECK(gguf_get_u32(f, "general.file_type", &ft) == 0 && ft == 38);
        CHECK(g && g->type == GGML_TYPE_MXFP4 && g->n_dims == 3 && d && d->type == GGML_TYPE_MXFP4);
        CHECK(s && s->type == GGML_TYPE_Q8_0 && ds && ds->type == GGML_TYPE_F16);
        CHECK(q && q->type == GGML_TYPE_Q8_0 && e && e->type == GGML_TYPE_Q8_0 && o &&
              o->type == GGML_TYPE_Q8_0);
        gguf_close(f);
    }

    /* the 135M shape, one layer (full vocabulary) */
    CHECK(run("--shape smollm2-135m --layers 1 --type q4_1 --embd-type q8_0", "sm.gguf") == 0);
    f = open_out("sm.gguf");
    if (f) {
        check_model(f, "llama", 1, 576, 1536, 9, 3, false, GGML_TYPE_Q4_1);
        const gguf_tensor *t = gguf_find_tensor(f, "token_embd.weight");
        CHECK(t && t->type == GGML_TYPE_Q8_0);
        compare_with_real(f);
        gguf_close(f);
    }

    /* bad arguments */
    CHECK(run("--shape nosuch", "x.gguf") != 0);
    CHECK(run("--shape tiny --type iq2_xxs", "x.gguf") != 0);
    CHECK(run("--shape tiny --layers 0", "x.gguf") != 0);

    rm("tiny.gguf");
    rm("tiny2.gguf");
    rm("tiny3.gguf");
    rm("tq.gguf");
    rm("tk.gguf");
    rm("sm.gguf");
    rmdir(dir);
    if (failures) {
        fprintf(stderr, "%d check(s) failed\n", failures);
        return 1;
    }
    printf("ok\n");
    return 0;
}
