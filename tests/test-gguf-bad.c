/* Hostile GGUF files: every one must be refused with a negative errno and a
 * message, without reading outside the buffer. Built with AddressSanitizer
 * and UBSan where the compiler has them (see tests/meson.build), and every
 * mutated file lives in a heap buffer of exactly its size, so an over-read
 * is caught rather than silently tolerated. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "gguf.h"

static int failures;

#define CHECK(cond)                                                                              \
    do {                                                                                         \
        if (!(cond)) {                                                                           \
            fprintf(stderr, "%s:%d: check failed: %s\n", __FILE__, __LINE__, #cond);            \
            failures++;                                                                          \
        }                                                                                        \
    } while (0)

static uint8_t *good;
static size_t good_n;

/* Field offsets of the good file, found by walking it (it is valid). */
static struct {
    size_t n_tensors, n_kv;
    size_t kv_key[16], kv_type[16], kv_val[16];
    size_t t_name[8], t_ndims[8], t_ne[8], t_type[8], t_off[8];
    size_t data_off;
} at;

static uint64_t rd64(const uint8_t *p)
{
    uint64_t v;
    memcpy(&v, p, 8);
    return v;
}
static uint32_t rd32(const uint8_t *p)
{
    uint32_t v;
    memcpy(&v, p, 4);
    return v;
}
static void wr64(uint8_t *p, uint64_t v) { memcpy(p, &v, 8); }
static void wr32(uint8_t *p, uint32_t v) { memcpy(p, &v, 4); }

static size_t skip_value(const uint8_t *p, size_t pos, uint32_t type)
{
    static const size_t sz[] = {1, 1, 2, 2, 4, 4, 4, 1, 0, 0, 8, 8, 8};
    if (type == GGUF_TYPE_STRING)
        return pos + 8 + rd64(p + pos);
    if (type == GGUF_TYPE_ARRAY) {
        uint32_t et = rd32(p + pos);
        uint64_t n = rd64(p + pos + 4);
        pos += 12;
        for (uint64_t i = 0; i < n; i++)
            pos = skip_value(p, pos, et);
        return pos;
    }
    return pos + sz[type];
}

static void walk(void)
{
    size_t pos = 8;
    uint64_t nt = rd64(good + pos), nkv = rd64(good + pos + 8);
    at.n_tensors = 16;
    at.n_kv = 24;
    pos = 24;
    for (uint64_t i = 0; i < nkv; i++) {
        at.kv_key[i] = pos;
        pos += 8 + rd64(good + pos);
        at.kv_type[i] = pos;
        uint32_t t = rd32(good + pos);
        pos += 4;
        at.kv_val[i] = pos;
        pos = skip_value(good, pos, t);
    }
    for (uint64_t i = 0; i < nt; i++) {
        at.t_name[i] = pos;
        pos += 8 + rd64(good + pos);
        at.t_ndims[i] = pos;
        uint32_t nd = rd32(good + pos);
        pos += 4;
        at.t_ne[i] = pos;
        pos += 8 * nd;
        at.t_type[i] = pos;
        pos += 4;
        at.t_off[i] = pos;
        pos += 8;
    }
    at.data_off = (pos + 63) / 64 * 64; /* the file uses alignment 64 */
}

/* Opens a copy of buf[0..n) in a heap block of exactly n bytes. Returns the result. */
static int try_open(const uint8_t *buf, size_t n, eng_error *err)
{
    uint8_t *copy = malloc(n ? n : 1);
    if (!copy)
        abort();
    if (n)
        memcpy(copy, buf, n);
    gguf_file *f = NULL;
    memset(err->msg, 0, sizeof(err->msg));
    int r = gguf_open_buffer(n ? copy : NULL, n, &f, err);
    if (r == 0) {
        /* walk what it accepted: the accessors must stay in bounds too */
        for (size_t i = 0; i < gguf_n_kv(f); i++) {
            const char *key = gguf_key_name(f, (int)i);
            uint64_t cnt;
            enum gguf_type et;
            const char *s;
            size_t len;
            if (gguf_get_arr_info(f, key, &et, &cnt) == 0 && et == GGUF_TYPE_STRING)
                for (uint64_t j = 0; j < cnt; j++)
                    gguf_get_arr_str(f, key, j, &s, &len);
        }
        for (size_t i = 0; i < gguf_n_tensors(f); i++) {
            const gguf_tensor *t = gguf_get_tensor(f, i);
            volatile uint8_t sink = ((const uint8_t *)t->data)[t->nbytes - 1];
            (void)sink;
        }
        gguf_close(f);
    }
    free(copy);
    return r;
}

/* Applies a mutation to a copy of the good file and expects a refusal whose
 * message contains want (when not NULL). */
static void expect_bad(const char *what, const uint8_t *buf, size_t n, const char *want)
{
    eng_error err;
    int r = try_open(buf, n, &err);
    if (getenv("VERBOSE"))
        fprintf(stderr, "%-28s -> %d %s\n", what, r, err.msg);
    if (r >= 0 || err.msg[0] == 0 || (want && !strstr(err.msg, want))) {
        fprintf(stderr, "%s: got %d, message '%s'%s%s\n", what, r, err.msg,
                want ? ", expected it to mention " : "", want ? want : "");
        failures++;
    }
}

typedef void (*mutator)(uint8_t *b, size_t *n);

static void mutate_and_expect(const char *what, mutator m, const char *want)
{
    uint8_t *b = malloc(good_n);
    memcpy(b, good, good_n);
    size_t n = good_n;
    m(b, &n);
    expect_bad(what, b, n, want);
    free(b);
}

/* ---- mutations ---- */
static void m_magic(uint8_t *b, size_t *n) { b[0] = 'X'; }
static void m_v1(uint8_t *b, size_t *n) { wr32(b + 4, 1); }
static void m_v99(uint8_t *b, size_t *n) { wr32(b + 4, 99); }
static void m_vbe(uint8_t *b, size_t *n) { wr32(b + 4, 0x03000000u); }
static void m_kv_huge(uint8_t *b, size_t *n) { wr64(b + 16, 1ull << 60); }
static void m_kv_max(uint8_t *b, size_t *n) { wr64(b + 16, UINT64_MAX); }
static void m_kv_plus1(uint8_t *b, size_t *n) { wr64(b + 16, rd64(b + 16) + 1); }
static void m_t_huge(uint8_t *b, size_t *n) { wr64(b + 8, 1ull << 60); }
static void m_t_plus1(uint8_t *b, size_t *n) { wr64(b + 8, rd64(b + 8) + 1); }
static void m_keylen_huge(uint8_t *b, size_t *n) { wr64(b + at.kv_key[0], 1ull << 40); }
static void m_keylen_eof(uint8_t *b, size_t *n) { wr64(b + at.kv_key[0], *n - at.kv_key[0] - 7); }
static void m_keylen_max(uint8_t *b, size_t *n) { wr64(b + at.kv_key[0], UINT64_MAX); }
static void m_key_empty(uint8_t *b, size_t *n) { wr64(b + at.kv_key[0], 0); }
static void m_key_nul(uint8_t *b, size_t *n) { b[at.kv_key[0] + 9] = 0; }
static void m_strlen_eof(uint8_t *b, size_t *n) { wr64(b + at.kv_val[1], *n); } /* kv1 is a string */
static void m_kv_type_bad(uint8_t *b, size_t *n) { wr32(b + at.kv_type[1], 13); }
static void m_kv_type_huge(uint8_t *b, size_t *n) { wr32(b + at.kv_type[1], 0xffffffffu); }
static void m_arr_count_huge(uint8_t *b, size_t *n) { wr64(b + at.kv_val[2] + 4, 1ull << 62); } /* kv2: string array */
static void m_arr_count_num(uint8_t *b, size_t *n) { wr64(b + at.kv_val[3] + 4, (1ull << 62) + 1); } /* kv3: i32 array */
static void m_arr_str_len(uint8_t *b, size_t *n) { wr64(b + at.kv_val[2] + 12, 1ull << 50); }
static void m_arr_nested(uint8_t *b, size_t *n) { wr32(b + at.kv_val[3], GGUF_TYPE_ARRAY); }
static void m_arr_elem_bad(uint8_t *b, size_t *n) { wr32(b + at.kv_val[3], 77); }
static void m_bool_2(uint8_t *b, size_t *n) { b[at.kv_val[4]] = 2; } /* kv4: bool */
static void m_dup_key(uint8_t *b, size_t *n) { b[at.kv_key[6] + 8 + 3] = 'a'; } /* "dupb" -> "dupa" */
static void m_align_48(uint8_t *b, size_t *n) { wr32(b + at.kv_val[0], 48); } /* kv0: alignment */
static void m_align_0(uint8_t *b, size_t *n) { wr32(b + at.kv_val[0], 0); }
static void m_align_type(uint8_t *b, size_t *n) { wr32(b + at.kv_type[0], GGUF_TYPE_INT32); }
static void m_tname_empty(uint8_t *b, size_t *n) { wr64(b + at.t_name[0], 0); }
static void m_ndims_0(uint8_t *b, size_t *n) { wr32(b + at.t_ndims[0], 0); }
static void m_ndims_5(uint8_t *b, size_t *n) { wr32(b + at.t_ndims[0], 5); }
static void m_ne_0(uint8_t *b, size_t *n) { wr64(b + at.t_ne[0] + 8, 0); }
static void m_ne_overflow(uint8_t *b, size_t *n)
{
    wr64(b + at.t_ne[0], 1ull << 40);
    wr64(b + at.t_ne[0] + 8, 1ull << 40);
}
static void m_ne_huge(uint8_t *b, size_t *n) { wr64(b + at.t_ne[0] + 8, 1ull << 62); }
static void m_ne_negative(uint8_t *b, size_t *n) { wr64(b + at.t_ne[0], UINT64_MAX); }
static void m_ne_partial_block(uint8_t *b, size_t *n) { wr64(b + at.t_ne[1], 48); } /* t1: Q8_0 */
static void m_type_16(uint8_t *b, size_t *n) { wr32(b + at.t_type[0], 16); } /* IQ2_XXS */
static void m_type_huge(uint8_t *b, size_t *n) { wr32(b + at.t_type[0], 0xffffffffu); }
static void m_off_misaligned(uint8_t *b, size_t *n) { wr64(b + at.t_off[1], rd64(b + at.t_off[1]) + 4); }
static void m_off_overlap(uint8_t *b, size_t *n) { wr64(b + at.t_off[1], rd64(b + at.t_off[0])); }
static void m_off_overlap_part(uint8_t *b, size_t *n) { wr64(b + at.t_off[2], rd64(b + at.t_off[2]) - 64); }
static void m_off_huge(uint8_t *b, size_t *n) { wr64(b + at.t_off[1], 1ull << 40); }
static void m_off_wrap(uint8_t *b, size_t *n) { wr64(b + at.t_off[1], UINT64_MAX - 63); }
static void m_off_past_end(uint8_t *b, size_t *n) { wr64(b + at.t_off[2], *n - at.data_off); }
static void m_dup_tensor(uint8_t *b, size_t *n) { b[at.t_name[1] + 8 + 2] = 'a'; } /* "t.b" -> "t.a" */
static void m_cut_data(uint8_t *b, size_t *n) { *n -= 1; }

static void build_good(const char *dir)
{
    char path[512];
    snprintf(path, sizeof(path), "%s/good.gguf", dir);
    gguf_writer *w;
    if (gguf_writer_new(&w) < 0)
        abort();
    /* kv order matters: the mutators address kv0..kv6 */
    gguf_writer_set_u32(w, "general.alignment", 64);                   /* kv0 */
    gguf_writer_set_str(w, "general.architecture", "llama");           /* kv1 */
    const char *toks[] = {"a", "bc", "<|im_start|>"};
    gguf_writer_set_arr_str(w, "tokenizer.ggml.tokens", toks, 3);      /* kv2 */
    const int32_t tt[] = {1, 1, 3};
    gguf_writer_set_arr_i32(w, "tokenizer.ggml.token_type", tt, 3);    /* kv3 */
    gguf_writer_set_bool(w, "tokenizer.ggml.add_bos_token", false);    /* kv4 */
    gguf_writer_set_u32(w, "dupa", 1);                                 /* kv5 */
    gguf_writer_set_u32(w, "dupb", 2);                                 /* kv6 */
    float f[64 * 2];
    for (int i = 0; i < 128; i++)
        f[i] = (float)i / 7.0f;
    uint8_t q[34 * 4];
    memset(q, 0x11, sizeof(q));
    const uint64_t ne0[2] = {32, 3}, ne1[2] = {64, 2}, ne2[1] = {128};
    gguf_writer_add_tensor(w, "t.a", GGML_TYPE_F32, 2, ne0, f);  /* 384 bytes */
    gguf_writer_add_tensor(w, "t.b", GGML_TYPE_Q8_0, 2, ne1, q); /* 136 bytes */
    gguf_writer_add_tensor(w, "t.c", GGML_TYPE_F32, 1, ne2, f);  /* 512 bytes */
    if (gguf_writer_write(w, path) < 0)
        abort();
    gguf_writer_free(w);
    FILE *fp = fopen(path, "rb");
    fseek(fp, 0, SEEK_END);
    good_n = (size_t)ftell(fp);
    fseek(fp, 0, SEEK_SET);
    good = malloc(good_n);
    if (fread(good, 1, good_n, fp) != good_n)
        abort();
    fclose(fp);
    unlink(path);
}

/* MXFP4 tensors (17-byte blocks of 32): a file with one, [64, 2] (68
 * bytes, padded to 96), is refused when cut anywhere inside its data, when
 * its rows are not whole blocks, and when its shape asks for more blocks
 * than the data section holds (96 elements a row: 102 bytes); the
 * messages name the type. */
static void test_mxfp4(const char *dir)
{
    char path[512];
    snprintf(path, sizeof(path), "%s/mxfp4.gguf", dir);
    gguf_writer *w;
    if (gguf_writer_new(&w) < 0)
        abort();
    uint8_t q[4 * 17];
    for (size_t i = 0; i < sizeof(q); i++)
        q[i] = (uint8_t)(i * 37 + 11);
    const uint64_t ne[2] = {64, 2};
    gguf_writer_set_str(w, "general.architecture", "gpt-oss");
    CHECK(gguf_writer_add_tensor(w, "mx.w", GGML_TYPE_MXFP4, 2, ne, q) == 0);
    const uint64_t ne_bad[2] = {48, 2};
    CHECK(gguf_writer_add_tensor(w, "mx.bad", GGML_TYPE_MXFP4, 2, ne_bad, q) == -EINVAL);
    if (gguf_writer_write(w, path) < 0)
        abort();
    gguf_writer_free(w);
    FILE *fp = fopen(path, "rb");
    fseek(fp, 0, SEEK_END);
    const size_t n = (size_t)ftell(fp);
    fseek(fp, 0, SEEK_SET);
    uint8_t *b = malloc(n);
    if (fread(b, 1, n, fp) != n)
        abort();
    fclose(fp);
    unlink(path);

    /* the good file, and where its tensor's data and shape lie */
    gguf_file *f = NULL;
    eng_error err;
    memset(err.msg, 0, sizeof(err.msg));
    CHECK(gguf_open_buffer(b, n, &f, &err) == 0);
    if (!f) {
        fprintf(stderr, "the MXFP4 file is refused: %s\n", err.msg);
        free(b);
        failures++;
        return;
    }
    const gguf_tensor *t = gguf_find_tensor(f, "mx.w");
    CHECK(t && t->type == GGML_TYPE_MXFP4 && t->nbytes == 68 && memcmp(t->data, q, 68) == 0);
    const size_t data = t ? (size_t)((const uint8_t *)t->data - b) : 0;
    gguf_close(f);
    CHECK(data > 0 && n == data + 96);
    const uint8_t *nm = memmem(b, data, "mx.w", 4);
    CHECK(nm != NULL);
    if (!nm || data == 0) {
        free(b);
        return;
    }
    const size_t ne_at = (size_t)(nm - b) + 4 + 4; /* after the name, n_dims */

    CHECK(try_open(b, data + 68, &err) == 0); /* the padding after it is not needed */
    int accepted = 0;
    for (size_t cut = data; cut < data + 68; cut++)
        accepted += try_open(b, cut, &err) >= 0;
    CHECK(accepted == 0);
    expect_bad("MXFP4 data one byte short", b, data + 67,
               "'mx.w' data [0, +68) lies outside the data section (67 bytes)");

    uint8_t *m = malloc(n);
    memcpy(m, b, n);
    wr64(m + ne_at, 48);
    expect_bad("MXFP4 row of 48", m, n, "row length 48, not a multiple of the MXFP4 block size 32");
    memcpy(m, b, n);
    wr64(m + ne_at, 16);
    expect_bad("MXFP4 row of 16", m, n, "MXFP4 block size 32");
    memcpy(m, b, n);
    wr64(m + ne_at, 96);
    expect_bad("MXFP4 rows of 96", m, n, "'mx.w' data [0, +102) lies outside");
    memcpy(m, b, n);
    wr64(m + ne_at + 8, 3); /* three rows: 102 bytes */
    expect_bad("MXFP4 three rows", m, n, "'mx.w' data [0, +102) lies outside");
    free(m);
    free(b);
}

int main(void)
{
    char dir[256];
    const char *base = getenv("TMPDIR");
    snprintf(dir, sizeof(dir), "%s/test-gguf-bad-XXXXXX", base && *base ? base : "/tmp");
    if (!mkdtemp(dir)) {
        perror("mkdtemp");
        return 1;
    }
    build_good(dir);
    walk();

    eng_error err;
    int r = try_open(good, good_n, &err);
    CHECK(r == 0);
    if (r != 0) {
        fprintf(stderr, "the good file is refused: %s\n", err.msg);
        return 1;
    }

    /* truncation at every length: all of the header region and the data */
    int accepted = 0, silent = 0;
    for (size_t n = 0; n < good_n; n++) {
        r = try_open(good, n, &err);
        if (r >= 0)
            accepted++;
        else if (err.msg[0] == 0)
            silent++;
    }
    CHECK(accepted == 0);
    CHECK(silent == 0);
    expect_bad("truncated header", good, 20, "truncated");
    expect_bad("truncated in tensor info", good, at.t_off[1] + 3, "tensor info 1");
    expect_bad("truncated in kv", good, at.kv_val[2] + 20, "kv 2");
    expect_bad("empty", good, 0, NULL);

    static const struct {
        const char *what;
        mutator m;
        const char *want;
    } cases[] = {
        {"wrong magic", m_magic, "magic"},
        {"version 1", m_v1, "version 1"},
        {"version 99", m_v99, "version 99"},
        {"big-endian", m_vbe, "big-endian"},
        {"kv count 2^60", m_kv_huge, "kv count"},
        {"kv count max", m_kv_max, "kv count"},
        {"kv count + 1", m_kv_plus1, NULL},
        {"tensor count 2^60", m_t_huge, "tensor count"},
        {"tensor count + 1", m_t_plus1, NULL},
        {"key length 2^40", m_keylen_huge, "kv 0"},
        {"key length past EOF", m_keylen_eof, "kv 0"},
        {"key length max", m_keylen_max, "kv 0"},
        {"empty key", m_key_empty, "empty"},
        {"NUL in key", m_key_nul, "NUL"},
        {"string length past EOF", m_strlen_eof, "kv 1"},
        {"kv type 13", m_kv_type_bad, "type 13"},
        {"kv type huge", m_kv_type_huge, "invalid value type"},
        {"string array count 2^62", m_arr_count_huge, "kv 2"},
        {"i32 array count 2^62+1", m_arr_count_num, "kv 3"},
        {"string in array past EOF", m_arr_str_len, "kv 2"},
        {"nested array", m_arr_nested, "nested"},
        {"array elem type 77", m_arr_elem_bad, "invalid type 77"},
        {"bool 2", m_bool_2, "bool"},
        {"duplicate key", m_dup_key, "duplicate key 'dupa'"},
        {"alignment 48", m_align_48, "alignment 48"},
        {"alignment 0", m_align_0, "alignment 0"},
        {"alignment int32", m_align_type, "general.alignment"},
        {"empty tensor name", m_tname_empty, "tensor info 0"},
        {"n_dims 0", m_ndims_0, "0 dimensions"},
        {"n_dims 5", m_ndims_5, "5 dimensions"},
        {"ne 0", m_ne_0, "t.a"},
        {"ne product overflow", m_ne_overflow, "t.a"},
        {"ne 2^62", m_ne_huge, "t.a"},
        {"ne UINT64_MAX", m_ne_negative, "t.a"},
        {"row not whole blocks", m_ne_partial_block, "block"},
        {"unknown type 16", m_type_16, "tensor 't.a' has unsupported type 16 (IQ2_XXS)"},
        {"unknown type huge", m_type_huge, "unsupported type"},
        {"misaligned offset", m_off_misaligned, "alignment"},
        {"overlapping tensors", m_off_overlap, "overlap"},
        {"partly overlapping tensors", m_off_overlap_part, "overlap"},
        {"offset 2^40", m_off_huge, "outside"},
        {"offset wraps", m_off_wrap, "outside"},
        {"offset at end", m_off_past_end, "outside"},
        {"duplicate tensor", m_dup_tensor, "duplicate tensor 't.a'"},
        {"data cut by one byte", m_cut_data, NULL},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++)
        mutate_and_expect(cases[i].what, cases[i].m, cases[i].want);

    /* random byte damage in the header region: refused or accepted, never a
     * crash or an out-of-bounds read (the sanitizers watch) */
    uint64_t s = 0x9e3779b97f4a7c15ull;
    uint8_t *b = malloc(good_n);
    int refused = 0, quiet = 0;
    for (int it = 0; it < 3000; it++) {
        memcpy(b, good, good_n);
        int flips = 1 + it % 4;
        for (int k = 0; k < flips; k++) {
            s ^= s << 13;
            s ^= s >> 7;
            s ^= s << 17;
            size_t pos = (size_t)(s % at.data_off);
            b[pos] = (uint8_t)(s >> 32);
        }
        r = try_open(b, good_n, &err);
        if (r < 0) {
            refused++;
            if (err.msg[0] == 0)
                quiet++;
        }
    }
    free(b);
    CHECK(quiet == 0);
    CHECK(refused > 1000);

    test_mxfp4(dir);

    /* gguf_open on paths */
    gguf_file *f = (gguf_file *)0x1;
    memset(err.msg, 0, sizeof(err.msg));
    CHECK(gguf_open("/nonexistent/x.gguf", &f, &err) == -ENOENT && err.msg[0]);
    CHECK(f == (gguf_file *)0x1); /* untouched on failure */
    memset(err.msg, 0, sizeof(err.msg));
    CHECK(gguf_open(dir, &f, &err) < 0 && err.msg[0]); /* a directory */
    char path[512];
    snprintf(path, sizeof(path), "%s/short.gguf", dir);
    FILE *fp = fopen(path, "wb");
    fwrite("GGUF\3\0", 1, 6, fp);
    fclose(fp);
    memset(err.msg, 0, sizeof(err.msg));
    CHECK(gguf_open(path, &f, &err) == -EINVAL && strstr(err.msg, "truncated"));
    fp = fopen(path, "wb");
    fclose(fp);
    memset(err.msg, 0, sizeof(err.msg));
    CHECK(gguf_open(path, &f, &err) == -EINVAL && err.msg[0]);
    /* a bad file through gguf_open too (mmap path) */
    fp = fopen(path, "wb");
    fwrite(good, 1, at.t_off[2], fp);
    fclose(fp);
    memset(err.msg, 0, sizeof(err.msg));
    CHECK(gguf_open(path, &f, &err) == -EINVAL && strstr(err.msg, "truncated"));
    CHECK(gguf_open(path, &f, NULL) == -EINVAL); /* err may be NULL */
    unlink(path);
    rmdir(dir);
    free(good);

    if (failures) {
        fprintf(stderr, "%d check(s) failed\n", failures);
        return 1;
    }
    printf("ok\n");
    return 0;
}
