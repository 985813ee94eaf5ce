/* GGUF writer -> reader round trips, the real SmolLM2 file, and the block
 * formats: known-answer dequantization of hand-built blocks, f16/bf16
 * conversion edge cases, and quantize -> dequantize error bounds. */
#include <errno.h>
#include <float.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "gguf.h"
#include "quants.h"

static int failures;

#define CHECK(cond)                                                                              \
    do {                                                                                         \
        if (!(cond)) {                                                                           \
            fprintf(stderr, "%s:%d: check failed: %s\n", __FILE__, __LINE__, #cond);            \
            failures++;                                                                          \
        }                                                                                        \
    } while (0)

static uint64_t rng = 0x1234567887654321ull;
static double urand(void)
{
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return (double)(rng >> 11) / 9007199254740992.0;
}
static float nrand(void)
{
    double u1 = urand() + 1e-12, u2 = urand();
    return (float)(sqrt(-2.0 * log(u1)) * cos(2.0 * M_PI * u2));
}

static char tmpdir[256];

static void path_in_tmp(char *buf, size_t cap, const char *name)
{
    snprintf(buf, cap, "%s/%s", tmpdir, name);
}

static const uint32_t all_types[] = {
    GGML_TYPE_F32,  GGML_TYPE_F16,  GGML_TYPE_BF16, GGML_TYPE_Q8_0, GGML_TYPE_Q4_0, GGML_TYPE_Q4_1,
    GGML_TYPE_Q5_0, GGML_TYPE_Q5_1, GGML_TYPE_Q4_K, GGML_TYPE_Q5_K, GGML_TYPE_Q6_K,
    GGML_TYPE_MXFP4, /* 17-byte blocks: rows of odd sizes, padding after each */
};
#define N_TYPES (sizeof(all_types) / sizeof(all_types[0]))

static bool streq(const char *s, size_t n, const char *want)
{
    return s && n == strlen(want) && memcmp(s, want, n) == 0;
}

/* ---- metadata round trip ---- */

static void test_metadata(void)
{
    char path[512];
    path_in_tmp(path, sizeof(path), "meta.gguf");
    gguf_writer *w;
    CHECK(gguf_writer_new(&w) == 0);
    CHECK(gguf_writer_set_u8(w, "t.u8", 200) == 0);
    CHECK(gguf_writer_set_i8(w, "t.i8", -100) == 0);
    CHECK(gguf_writer_set_u16(w, "t.u16", 60000) == 0);
    CHECK(gguf_writer_set_i16(w, "t.i16", -30000) == 0);
    CHECK(gguf_writer_set_u32(w, "t.u32", 4000000000u) == 0);
    CHECK(gguf_writer_set_i32(w, "t.i32", -2000000000) == 0);
    CHECK(gguf_writer_set_u64(w, "t.u64", 0x123456789abcdefull) == 0);
    CHECK(gguf_writer_set_i64(w, "t.i64", -5) == 0);
    CHECK(gguf_writer_set_f32(w, "t.f32", 1.5f) == 0);
    CHECK(gguf_writer_set_f64(w, "t.f64", 0.1) == 0);
    CHECK(gguf_writer_set_bool(w, "t.bool", true) == 0);
    CHECK(gguf_writer_set_str(w, "t.str", "first") == 0);
    CHECK(gguf_writer_set_str(w, "t.str", "héllo wörld") == 0); /* replaces */
    CHECK(gguf_writer_set_str(w, "t.empty", "") == 0);
    const char *strs[] = {"a", "", "<|im_start|>", "Ġthe"};
    CHECK(gguf_writer_set_arr_str(w, "t.arr_str", strs, 4) == 0);
    const int32_t i32s[] = {1, -2, 2147483647, -2147483647 - 1};
    CHECK(gguf_writer_set_arr_i32(w, "t.arr_i32", i32s, 4) == 0);
    const float f32s[] = {0.5f, -1e-6f, 3e38f};
    CHECK(gguf_writer_set_arr_f32(w, "t.arr_f32", f32s, 3) == 0);
    const uint8_t u8s[] = {0, 255, 7};
    CHECK(gguf_writer_set_arr(w, "t.arr_u8", GGUF_TYPE_UINT8, u8s, 3) == 0);
    const int16_t i16s[] = {-300, 300};
    CHECK(gguf_writer_set_arr(w, "t.arr_i16", GGUF_TYPE_INT16, i16s, 2) == 0);
    const uint64_t u64s[] = {1, 1ull << 40};
    CHECK(gguf_writer_set_arr(w, "t.arr_u64", GGUF_TYPE_UINT64, u64s, 2) == 0);
    const double f64s[] = {2.25, -8};
    CHECK(gguf_writer_set_arr(w, "t.arr_f64", GGUF_TYPE_FLOAT64, f64s, 2) == 0);
    const uint8_t bools[] = {1, 0};
    CHECK(gguf_writer_set_arr(w, "t.arr_bool", GGUF_TYPE_BOOL, bools, 2) == 0);
    CHECK(gguf_writer_set_arr_i32(w, "t.arr_empty", NULL, 0) == 0);
    /* rejected inputs */
    CHECK(gguf_writer_set_u32(w, "", 1) < 0);
    CHECK(gguf_writer_set_arr(w, "t.bad", GGUF_TYPE_STRING, strs, 1) < 0);
    CHECK(gguf_writer_set_arr(w, "t.bad", GGUF_TYPE_ARRAY, strs, 1) < 0);
    CHECK(gguf_writer_write(w, path) == 0);
    gguf_writer_free(w);

    gguf_file *f = NULL;
    eng_error err = {{0}};
    int r = gguf_open(path, &f, &err);
    CHECK(r == 0);
    if (r != 0) {
        fprintf(stderr, "open: %s\n", err.msg);
        return;
    }
    CHECK(gguf_version(f) == 3);
    CHECK(gguf_n_kv(f) == 22);
    CHECK(gguf_n_tensors(f) == 0);
    CHECK(strcmp(gguf_key_name(f, 0), "t.u8") == 0); /* insertion order kept */
    CHECK(gguf_key_type(f, gguf_find_key(f, "t.i16")) == GGUF_TYPE_INT16);
    CHECK(gguf_key_type(f, gguf_find_key(f, "t.arr_str")) == GGUF_TYPE_ARRAY);
    CHECK(gguf_find_key(f, "t.missing") == -1);
    CHECK(gguf_key_name(f, -1) == NULL && gguf_key_name(f, 22) == NULL);

    uint32_t u32;
    int32_t i32;
    uint64_t u64;
    float f32;
    bool b;
    const char *s;
    size_t n;
    CHECK(gguf_get_u32(f, "t.u8", &u32) == 0 && u32 == 200);
    CHECK(gguf_get_i32(f, "t.i8", &i32) == 0 && i32 == -100);
    CHECK(gguf_get_u32(f, "t.u16", &u32) == 0 && u32 == 60000);
    CHECK(gguf_get_i32(f, "t.i16", &i32) == 0 && i32 == -30000);
    CHECK(gguf_get_u32(f, "t.u32", &u32) == 0 && u32 == 4000000000u);
    CHECK(gguf_get_i32(f, "t.i32", &i32) == 0 && i32 == -2000000000);
    CHECK(gguf_get_u64(f, "t.u64", &u64) == 0 && u64 == 0x123456789abcdefull);
    CHECK(gguf_get_i32(f, "t.i64", &i32) == 0 && i32 == -5);
    CHECK(gguf_get_f32(f, "t.f32", &f32) == 0 && f32 == 1.5f);
    CHECK(gguf_get_f32(f, "t.f64", &f32) == 0 && f32 == 0.1f);
    CHECK(gguf_get_bool(f, "t.bool", &b) == 0 && b);
    CHECK(gguf_get_str(f, "t.str", &s, &n) == 0 && streq(s, n, "héllo wörld"));
    CHECK(gguf_get_str(f, "t.empty", &s, &n) == 0 && n == 0);
    /* range and type checks; out-parameters untouched on failure */
    u32 = 77;
    CHECK(gguf_get_u32(f, "t.i8", &u32) == -EINVAL && u32 == 77);
    CHECK(gguf_get_i32(f, "t.u32", &i32) == -EINVAL);
    CHECK(gguf_get_u32(f, "t.u64", &u32) == -EINVAL);
    CHECK(gguf_get_u64(f, "t.i64", &u64) == -EINVAL);
    CHECK(gguf_get_u32(f, "t.f32", &u32) == -EINVAL);
    CHECK(gguf_get_f32(f, "t.u32", &f32) == -EINVAL);
    CHECK(gguf_get_bool(f, "t.u8", &b) == -EINVAL);
    CHECK(gguf_get_str(f, "t.u8", &s, &n) == -EINVAL);
    CHECK(gguf_get_u32(f, "t.missing", &u32) == -ENOENT);
    CHECK(gguf_get_str(f, "t.missing", &s, &n) == -ENOENT);

    enum gguf_type et;
    uint64_t cnt;
    CHECK(gguf_get_arr_info(f, "t.arr_str", &et, &cnt) == 0 && et == GGUF_TYPE_STRING && cnt == 4);
    for (uint64_t i = 0; i < 4; i++)
        CHECK(gguf_get_arr_str(f, "t.arr_str", i, &s, &n) == 0 && streq(s, n, strs[i]));
    CHECK(gguf_get_arr_str(f, "t.arr_str", 4, &s, &n) == -EINVAL);
    CHECK(gguf_get_arr_i32(f, "t.arr_str", 0, &i32) == -EINVAL);
    CHECK(gguf_get_arr_info(f, "t.u8", &et, &cnt) == -EINVAL);
    CHECK(gguf_get_arr_info(f, "t.arr_i32", &et, &cnt) == 0 && et == GGUF_TYPE_INT32 && cnt == 4);
    for (uint64_t i = 0; i < 4; i++)
        CHECK(gguf_get_arr_i32(f, "t.arr_i32", i, &i32) == 0 && i32 == i32s[i]);
    for (uint64_t i = 0; i < 3; i++)
        CHECK(gguf_get_arr_f32(f, "t.arr_f32", i, &f32) == 0 && f32 == f32s[i]);
    CHECK(gguf_get_arr_i32(f, "t.arr_f32", 0, &i32) == -EINVAL);
    CHECK(gguf_get_arr_i32(f, "t.arr_u8", 1, &i32) == 0 && i32 == 255);
    CHECK(gguf_get_arr_f32(f, "t.arr_u8", 2, &f32) == 0 && f32 == 7.0f);
    CHECK(gguf_get_arr_i32(f, "t.arr_i16", 0, &i32) == 0 && i32 == -300);
    CHECK(gguf_get_arr_i32(f, "t.arr_u64", 0, &i32) == 0 && i32 == 1);
    CHECK(gguf_get_arr_i32(f, "t.arr_u64", 1, &i32) == -EINVAL); /* does not fit */
    CHECK(gguf_get_arr_f32(f, "t.arr_f64", 0, &f32) == 0 && f32 == 2.25f);
    CHECK(gguf_get_arr_f32(f, "t.arr_f64", 1, &f32) == 0 && f32 == -8.0f);
    CHECK(gguf_get_arr_info(f, "t.arr_bool", &et, &cnt) == 0 && et == GGUF_TYPE_BOOL && cnt == 2);
    CHECK(gguf_get_arr_info(f, "t.arr_empty", &et, &cnt) == 0 && cnt == 0);
    CHECK(gguf_get_arr_i32(f, "t.arr_empty", 0, &i32) == -EINVAL);
    CHECK(gguf_get_arr_i32(f, "t.missing", 0, &i32) == -ENOENT);
    gguf_close(f);
    unlink(path);
}

/* ---- tensors of every type, in memory and streamed ---- */

static int read_file(const char *path, uint8_t **ret, size_t *ret_n)
{
    FILE *fp = fopen(path, "rb");
    if (!fp)
        return -1;
    fseek(fp, 0, SEEK_END);
    long n = ftell(fp);
    fseek(fp, 0, SEEK_SET);
    uint8_t *b = malloc(n > 0 ? (size_t)n : 1);
    if (!b || fread(b, 1, (size_t)n, fp) != (size_t)n) {
        free(b);
        fclose(fp);
        return -1;
    }
    fclose(fp);
    *ret = b;
    *ret_n = (size_t)n;
    return 0;
}

static void test_tensors(uint32_t alignment)
{
    char path[512], path2[512];
    path_in_tmp(path, sizeof(path), "tensors.gguf");
    path_in_tmp(path2, sizeof(path2), "tensors-stream.gguf");
    enum { NE0 = 512, NE1 = 3 };
    static float src[NE0 * NE1];
    static uint8_t q[N_TYPES][NE0 * NE1 * 4];
    gguf_writer *w, *ws;
    CHECK(gguf_writer_new(&w) == 0);
    CHECK(gguf_writer_new(&ws) == 0);
    if (alignment != GGUF_DEFAULT_ALIGNMENT) {
        CHECK(gguf_writer_set_u32(w, "general.alignment", alignment) == 0);
        CHECK(gguf_writer_set_u32(ws, "general.alignment", alignment) == 0);
    }
    CHECK(gguf_writer_set_str(w, "general.architecture", "test") == 0);
    CHECK(gguf_writer_set_str(ws, "general.architecture", "test") == 0);
    for (size_t t = 0; t < N_TYPES; t++) {
        char name[32];
        for (size_t i = 0; i < NE0 * NE1; i++)
            src[i] = nrand();
        CHECK(eng_quant_row(all_types[t], src, q[t], NE0 * NE1) == 0);
        snprintf(name, sizeof(name), "t.%s", ggml_type_name(all_types[t]));
        uint64_t ne[2] = {NE0, NE1};
        CHECK(gguf_writer_add_tensor(w, name, all_types[t], 2, ne, q[t]) == 0);
        CHECK(gguf_writer_add_tensor_info(ws, name, all_types[t], 2, ne) == 0);
    }
    /* a 4-D and a 1-D tensor with odd byte sizes (padding between tensors) */
    static float four[2 * 3 * 5 * 7], one[3];
    for (size_t i = 0; i < sizeof(four) / sizeof(four[0]); i++)
        four[i] = (float)i;
    one[0] = 1, one[1] = 2, one[2] = 3;
    const uint64_t ne4[4] = {2, 3, 5, 7}, ne1[1] = {3};
    CHECK(gguf_writer_add_tensor(w, "four", GGML_TYPE_F32, 4, ne4, four) == 0);
    CHECK(gguf_writer_add_tensor(w, "one", GGML_TYPE_F32, 1, ne1, one) == 0);
    CHECK(gguf_writer_add_tensor_info(ws, "four", GGML_TYPE_F32, 4, ne4) == 0);
    CHECK(gguf_writer_add_tensor_info(ws, "one", GGML_TYPE_F32, 1, ne1) == 0);
    /* rejected tensors */
    const uint64_t bad_ne[2] = {100, 2};
    CHECK(gguf_writer_add_tensor(w, "four", GGML_TYPE_F32, 4, ne4, four) == -EEXIST);
    CHECK(gguf_writer_add_tensor(w, "badq", GGML_TYPE_Q4_0, 2, bad_ne, four) < 0);
    CHECK(gguf_writer_add_tensor(w, "badt", 23, 1, ne1, one) < 0);
    CHECK(gguf_writer_add_tensor(w, "badd", GGML_TYPE_F32, 5, ne4, four) < 0);
    CHECK(gguf_writer_add_tensor(w, "", GGML_TYPE_F32, 1, ne1, one) < 0);
    CHECK(gguf_writer_write(ws, path2) < 0); /* streamed tensors have no data here */
    CHECK(gguf_writer_write(w, path) == 0);
    gguf_writer_free(w);

    /* streaming: the same bytes, in chunks of odd sizes */
    CHECK(gguf_writer_begin(ws, path2) == 0);
    CHECK(gguf_writer_set_u32(ws, "late", 1) < 0); /* no metadata after begin */
    for (size_t t = 0; t < N_TYPES; t++) {
        size_t nb = ggml_row_bytes(all_types[t], NE0) * NE1, off = 0;
        while (off < nb) {
            size_t c = nb - off < 777 ? nb - off : 777;
            CHECK(gguf_writer_write_data(ws, q[t] + off, c) == 0);
            off += c;
        }
    }
    CHECK(gguf_writer_write_data(ws, four, sizeof(four)) == 0);
    CHECK(gguf_writer_write_data(ws, one, sizeof(one) + 4) == -EINVAL); /* crosses the end */
    CHECK(gguf_writer_write_data(ws, one, sizeof(one)) == 0);
    CHECK(gguf_writer_write_data(ws, one, 1) == -EINVAL); /* nothing left */
    CHECK(gguf_writer_end(ws) == 0);
    gguf_writer_free(ws);

    uint8_t *b1 = NULL, *b2 = NULL;
    size_t n1 = 0, n2 = 0;
    CHECK(read_file(path, &b1, &n1) == 0);
    CHECK(read_file(path2, &b2, &n2) == 0);
    CHECK(b1 && b2 && n1 == n2 && memcmp(b1, b2, n1) == 0);
    CHECK(n1 % alignment == 0); /* the last tensor is padded too */

    for (int via_buffer = 0; via_buffer < 2; via_buffer++) {
        gguf_file *f = NULL;
        eng_error err = {{0}};
        int r = via_buffer ? gguf_open_buffer(b1, n1, &f, &err) : gguf_open(path, &f, &err);
        CHECK(r == 0);
        if (r != 0) {
            fprintf(stderr, "open: %s\n", err.msg);
            continue;
        }
        CHECK(gguf_file_size(f) == n1);
        CHECK(gguf_n_tensors(f) == N_TYPES + 2);
        const uint8_t *base = gguf_file_data(f);
        for (size_t t = 0; t < N_TYPES; t++) {
            const gguf_tensor *ti = gguf_get_tensor(f, t);
            char name[32];
            snprintf(name, sizeof(name), "t.%s", ggml_type_name(all_types[t]));
            CHECK(ti && strcmp(ti->name, name) == 0);
            CHECK(gguf_find_tensor(f, name) == ti);
            CHECK(ti->type == all_types[t] && ti->n_dims == 2);
            CHECK(ti->ne[0] == NE0 && ti->ne[1] == NE1 && ti->ne[2] == 1 && ti->ne[3] == 1);
            CHECK(ti->nbytes == ggml_row_bytes(all_types[t], NE0) * NE1);
            CHECK(ti->offset % alignment == 0);
            CHECK(((const uint8_t *)ti->data - base) % alignment == 0);
            CHECK(memcmp(ti->data, q[t], ti->nbytes) == 0);
        }
        const gguf_tensor *t4 = gguf_find_tensor(f, "four");
        CHECK(t4 && t4->n_dims == 4 && t4->ne[3] == 7 && t4->nbytes == sizeof(four) &&
              memcmp(t4->data, four, sizeof(four)) == 0);
        const gguf_tensor *t1 = gguf_find_tensor(f, "one");
        CHECK(t1 && t1->n_dims == 1 && t1->ne[1] == 1 && memcmp(t1->data, one, sizeof(one)) == 0);
        CHECK(gguf_find_tensor(f, "nope") == NULL);
        CHECK(gguf_get_tensor(f, N_TYPES + 2) == NULL);
        gguf_close(f);
    }
    free(b1);
    free(b2);
    unlink(path);
    unlink(path2);

    /* an unfinished stream leaves no file behind */
    CHECK(gguf_writer_new(&ws) == 0);
    CHECK(gguf_writer_add_tensor_info(ws, "one", GGML_TYPE_F32, 1, ne1) == 0);
    CHECK(gguf_writer_begin(ws, path2) == 0);
    CHECK(gguf_writer_end(ws) == -EINVAL);
    gguf_writer_free(ws);
    CHECK(access(path2, F_OK) != 0);
    char tmp[600];
    snprintf(tmp, sizeof(tmp), "%s.tmp", path2);
    CHECK(access(tmp, F_OK) != 0);
}

/* ---- f16 / bf16 ---- */

static uint32_t fbits(float f)
{
    uint32_t u;
    memcpy(&u, &f, 4);
    return u;
}
static float bitsf(uint32_t u)
{
    float f;
    memcpy(&f, &u, 4);
    return f;
}

static void test_half(void)
{
    CHECK(eng_f16_to_f32(0x3c00) == 1.0f);
    CHECK(eng_f16_to_f32(0xc000) == -2.0f);
    CHECK(eng_f16_to_f32(0x7bff) == 65504.0f);
    CHECK(eng_f16_to_f32(0x0001) == ldexpf(1.0f, -24));
    CHECK(eng_f16_to_f32(0x03ff) == ldexpf(1023.0f, -24));
    CHECK(eng_f16_to_f32(0x0400) == ldexpf(1.0f, -14));
    CHECK(fbits(eng_f16_to_f32(0x8000)) == 0x80000000u);
    CHECK(isinf(eng_f16_to_f32(0x7c00)) && eng_f16_to_f32(0xfc00) < 0);
    CHECK(isnan(eng_f16_to_f32(0x7e00)));

    CHECK(eng_f32_to_f16(1.0f) == 0x3c00);
    CHECK(eng_f32_to_f16(-2.0f) == 0xc000);
    CHECK(eng_f32_to_f16(65504.0f) == 0x7bff);
    CHECK(eng_f32_to_f16(65519.99f) == 0x7bff);
    CHECK(eng_f32_to_f16(65520.0f) == 0x7c00); /* tie rounds to even = overflow */
    CHECK(eng_f32_to_f16(1e10f) == 0x7c00 && eng_f32_to_f16(-1e10f) == 0xfc00);
    CHECK(eng_f32_to_f16(1.0f + ldexpf(1, -11)) == 0x3c00);     /* tie -> even */
    CHECK(eng_f32_to_f16(1.0f + 3 * ldexpf(1, -11)) == 0x3c02); /* tie -> even */
    CHECK(eng_f32_to_f16(1.0f + ldexpf(1, -11) + ldexpf(1, -20)) == 0x3c01);
    CHECK(eng_f32_to_f16(ldexpf(1, -25)) == 0x0000);             /* tie -> 0 */
    CHECK(eng_f32_to_f16(ldexpf(1.0001f, -25)) == 0x0001);
    CHECK(eng_f32_to_f16(ldexpf(3, -25)) == 0x0002);             /* 1.5 ulp -> 2 */
    CHECK(eng_f32_to_f16(ldexpf(1023.5f, -24)) == 0x0400);       /* rounds up into normals */
    CHECK(eng_f32_to_f16(-0.0f) == 0x8000);
    CHECK(eng_f32_to_f16(1e-30f) == 0x0000);
    uint16_t hn = eng_f32_to_f16(NAN);
    CHECK((hn & 0x7c00) == 0x7c00 && (hn & 0x3ff) != 0);
    /* every half survives f16 -> f32 -> f16 */
    int bad = 0;
    for (uint32_t h = 0; h < 65536; h++) {
        float f = eng_f16_to_f32((uint16_t)h);
        if (isnan(f))
            continue;
        if (eng_f32_to_f16(f) != h)
            bad++;
    }
    CHECK(bad == 0);
#if defined(__FLT16_MAX__)
    /* against the compiler's own (round-to-nearest-even) conversion */
    bad = 0;
    for (uint32_t i = 0; i < (1u << 22); i++) {
        uint32_t u = (uint32_t)(i * 1024u + (uint32_t)(urand() * 1024));
        float f = bitsf(u);
        if (isnan(f))
            continue;
        _Float16 h = (_Float16)f;
        uint16_t hb;
        memcpy(&hb, &h, 2);
        if (eng_f32_to_f16(f) != hb)
            bad++;
    }
    CHECK(bad == 0);
#endif
    /* bf16 */
    CHECK(eng_bf16_to_f32(0x3f80) == 1.0f);
    CHECK(eng_bf16_to_f32(0xc040) == -3.0f);
    uint16_t bf[4];
    const float bsrc[4] = {bitsf(0x3f808000u), bitsf(0x3f818000u), bitsf(0x3f808001u), -1.0f};
    CHECK(eng_quant_row(GGML_TYPE_BF16, bsrc, bf, 4) == 0);
    CHECK(bf[0] == 0x3f80 && bf[1] == 0x3f82 && bf[2] == 0x3f81 && bf[3] == 0xbf80);
    /* row helpers */
    float row[3] = {1, -0.5f, 2048};
    uint16_t hr[3];
    float back[3];
    eng_f32_to_f16_row(row, hr, 3);
    eng_f16_to_f32_row(hr, back, 3);
    CHECK(memcmp(row, back, sizeof(row)) == 0);
}

/* ---- known-answer dequantization of hand-built blocks ---- */

static void put16(uint8_t *p, uint16_t v) { memcpy(p, &v, 2); }

static void expect_block(uint32_t type, const uint8_t *blk, const float *want, size_t n)
{
    float got[256];
    uint16_t goth[256];
    CHECK(eng_dequant_row_f32(type, blk, got, n) == 0);
    CHECK(eng_dequant_row_f16(type, blk, goth, n) == 0);
    int bad = 0, badh = 0;
    for (size_t i = 0; i < n; i++) {
        if (got[i] != want[i]) {
            if (bad++ < 3)
                fprintf(stderr, "  %s[%zu] = %g, expected %g\n", ggml_type_name(type), i,
                        (double)got[i], (double)want[i]);
        }
        if (goth[i] != eng_f32_to_f16(want[i]))
            badh++;
    }
    CHECK(bad == 0);
    CHECK(badh == 0);
}

static void test_known_blocks(void)
{
    uint8_t b[256];
    float want[256];

    /* Q4_0: d = 0.5, element j = low nibble j, element j+16 = high nibble; codes - 8 */
    memset(b, 0, sizeof(b));
    put16(b, 0x3800);
    for (int j = 0; j < 16; j++)
        b[2 + j] = (uint8_t)(j | ((15 - j) << 4));
    for (int j = 0; j < 16; j++) {
        want[j] = (j - 8) * 0.5f;
        want[j + 16] = (7 - j) * 0.5f;
    }
    expect_block(GGML_TYPE_Q4_0, b, want, 32);

    /* Q4_1: d = 0.25, m = -1 */
    put16(b, 0x3400);
    put16(b + 2, 0xbc00);
    for (int j = 0; j < 16; j++)
        b[4 + j] = (uint8_t)(j | ((15 - j) << 4));
    for (int j = 0; j < 16; j++) {
        want[j] = j * 0.25f - 1.0f;
        want[j + 16] = (15 - j) * 0.25f - 1.0f;
    }
    expect_block(GGML_TYPE_Q4_1, b, want, 32);

    /* Q5_0: d = 2, qh bit i is bit 4 of element i; codes - 16 */
    uint32_t qh = 0xa5c3f00fu;
    put16(b, 0x4000);
    memcpy(b + 2, &qh, 4);
    for (int j = 0; j < 16; j++)
        b[6 + j] = (uint8_t)(((j * 5) & 15) | (((j * 3 + 1) & 15) << 4));
    for (int j = 0; j < 16; j++) {
        int c0 = ((j * 5) & 15) | (int)(((qh >> j) & 1) << 4);
        int c1 = ((j * 3 + 1) & 15) | (int)(((qh >> (j + 16)) & 1) << 4);
        want[j] = (c0 - 16) * 2.0f;
        want[j + 16] = (c1 - 16) * 2.0f;
    }
    expect_block(GGML_TYPE_Q5_0, b, want, 32);

    /* Q5_1: d = 0.5, m = 3 */
    put16(b, 0x3800);
    put16(b + 2, 0x4200);
    memcpy(b + 4, &qh, 4);
    for (int j = 0; j < 16; j++)
        b[8 + j] = (uint8_t)(((j * 5) & 15) | (((j * 3 + 1) & 15) << 4));
    for (int j = 0; j < 16; j++) {
        int c0 = ((j * 5) & 15) | (int)(((qh >> j) & 1) << 4);
        int c1 = ((j * 3 + 1) & 15) | (int)(((qh >> (j + 16)) & 1) << 4);
        want[j] = c0 * 0.5f + 3.0f;
        want[j + 16] = c1 * 0.5f + 3.0f;
    }
    expect_block(GGML_TYPE_Q5_1, b, want, 32);

    /* Q8_0: d = 0.125, signed codes */
    put16(b, 0x3000);
    for (int j = 0; j < 32; j++)
        b[2 + j] = (uint8_t)(int8_t)(j * 8 - 128);
    for (int j = 0; j < 32; j++)
        want[j] = (float)(j * 8 - 128) * 0.125f;
    expect_block(GGML_TYPE_Q8_0, b, want, 32);

    /* Q4_K / Q5_K: d = 1, dmin = 0.5, eight 6-bit (scale, min) pairs with
     * values above 15 so the split high bits matter. Element e of 256:
     * chunk c = e / 64 holds sub-blocks 2c (low nibbles) and 2c+1 (high). */
    static const uint8_t sc[8] = {1, 2, 63, 4, 17, 33, 50, 63};
    static const uint8_t mn[8] = {0, 1, 40, 3, 20, 40, 60, 63};
    uint8_t scales[12];
    for (int j = 0; j < 4; j++) {
        scales[j] = (uint8_t)(sc[j] | ((sc[j + 4] >> 4) << 6));
        scales[j + 4] = (uint8_t)(mn[j] | ((mn[j + 4] >> 4) << 6));
        scales[j + 8] = (uint8_t)((sc[j + 4] & 15) | ((mn[j + 4] & 15) << 4));
    }
    int code[256];
    for (int e = 0; e < 256; e++)
        code[e] = (e * 7 + e / 16) & 31;
    memset(b, 0, sizeof(b));
    put16(b, 0x3c00);
    put16(b + 2, 0x3800);
    memcpy(b + 4, scales, 12);
    for (int c = 0; c < 4; c++)
        for (int l = 0; l < 32; l++)
            b[16 + 32 * c + l] = (uint8_t)((code[64 * c + l] & 15) | ((code[64 * c + 32 + l] & 15) << 4));
    for (int e = 0; e < 256; e++) {
        int s = e / 32;
        want[e] = 1.0f * sc[s] * (code[e] & 15) - 0.5f * mn[s];
    }
    expect_block(GGML_TYPE_Q4_K, b, want, 256);

    /* Q5_K: qh[l] bit 2c is bit 4 of element 64c + l, bit 2c+1 of element 64c + 32 + l */
    memset(b, 0, sizeof(b));
    put16(b, 0x3c00);
    put16(b + 2, 0x3800);
    memcpy(b + 4, scales, 12);
    for (int c = 0; c < 4; c++) {
        for (int l = 0; l < 32; l++) {
            int lo = code[64 * c + l], hi = code[64 * c + 32 + l];
            b[48 + 32 * c + l] = (uint8_t)((lo & 15) | ((hi & 15) << 4));
            b[16 + l] |= (uint8_t)(((lo >> 4) << (2 * c)) | ((hi >> 4) << (2 * c + 1)));
        }
    }
    for (int e = 0; e < 256; e++) {
        int s = e / 32;
        want[e] = 1.0f * sc[s] * code[e] - 0.5f * mn[s];
    }
    expect_block(GGML_TYPE_Q5_K, b, want, 256);

    /* Q6_K: ql[128], qh[64], int8 scales[16], d. In each 128-element half n,
     * element 32g + l (g 0..3, l 0..31) has low 4 bits in ql[64n + l + 32(g&1)]
     * (nibble g>>1), high 2 bits at qh[32n + l] bits 2g; sub-block of 16 = its scale. */
    static const int8_t s6[16] = {1, -2, 3, -4, 5, 127, -128, 8, 9, 10, -11, 12, 13, 14, 15, -16};
    memset(b, 0, sizeof(b));
    for (int e = 0; e < 256; e++)
        code[e] = (e * 13 + 5) & 63;
    for (int e = 0; e < 256; e++) {
        int n = e / 128, r = e % 128, g = r / 32, l = r % 32;
        uint8_t *ql = b + 64 * n + l + 32 * (g & 1);
        *ql |= (uint8_t)((code[e] & 15) << (4 * (g >> 1)));
        b[128 + 32 * n + l] |= (uint8_t)((code[e] >> 4) << (2 * g));
    }
    memcpy(b + 192, s6, 16);
    put16(b + 208, 0x3000); /* 0.125 */
    for (int e = 0; e < 256; e++)
        want[e] = 0.125f * s6[e / 16] * (code[e] - 32);
    expect_block(GGML_TYPE_Q6_K, b, want, 256);

    /* plain formats */
    const float fv[2] = {1.25f, -3.0f};
    expect_block(GGML_TYPE_F32, (const uint8_t *)fv, fv, 2);
    uint16_t hv[2] = {0x3d00, 0xc200};
    expect_block(GGML_TYPE_F16, (const uint8_t *)hv, fv, 2);
    uint16_t bv[2] = {0x3fa0, 0xc040};
    expect_block(GGML_TYPE_BF16, (const uint8_t *)bv, fv, 2);

    /* partial blocks and unknown types are refused */
    float out[64];
    CHECK(eng_dequant_row_f32(GGML_TYPE_Q4_0, b, out, 31) == -EINVAL);
    CHECK(eng_dequant_row_f32(GGML_TYPE_Q4_K, b, out, 32) == -EINVAL);
    CHECK(eng_dequant_row_f32(23, b, out, 32) == -EINVAL);
    CHECK(eng_quant_row(GGML_TYPE_Q8_0, out, b, 16) == -EINVAL);
    CHECK(eng_dequant_row_f32(16, b, out, 32) == -EINVAL); /* IQ2_XXS */
    CHECK(eng_quant_row(GGML_TYPE_Q8_K, out, b, 256) < 0);
}

/* ---- MXFP4 ---- */

/* E2M1's eight magnitudes (OCP MX spec): codes 8..15 are the negatives of
 * 0..7, and -0 (code 8) dequantizes to +0 as in ggml. */
static const float e2m1[8] = {0.0f, 0.5f, 1.0f, 1.5f, 2.0f, 3.0f, 4.0f, 6.0f};

/* What code q under scale byte e is worth: e2m1[q] * 2^(e - 127), worked
 * out in double (exact) apart from the implementation's doubled levels and
 * half scale; beyond FLT_MAX it overflows to infinity, as in float. */
static float mxfp4_value(int q, int e)
{
    const double v = (q & 8 ? -1.0 : 1.0) * e2m1[q & 7] * ldexp(1.0, e - 127);
    if (fabs(v) > FLT_MAX)
        return v > 0 ? INFINITY : -INFINITY;
    return (q & 7) == 0 ? 0.0f : (float)v;
}

/* Blocks of scale bytes 0 and 1 (whose scales 2^-128 and 2^-127 are float
 * denormals), 2, 127, 128, 254 and 255, each with every code in both
 * nibbles: element j the low nibble j, element j + 16 the high nibble
 * 15 - j. One row, so the 17-byte stride is crossed too. Compared bit for
 * bit, so that a -0 or a flushed denormal shows. */
static void test_mxfp4_blocks(void)
{
    static const int es[] = {0, 1, 2, 127, 128, 254, 255};
    enum { NB = sizeof(es) / sizeof(es[0]) };
    uint8_t b[NB * 17];
    float want[NB * 32], got[NB * 32];
    uint16_t goth[NB * 32];
    for (int k = 0; k < NB; k++) {
        b[17 * k] = (uint8_t)es[k];
        for (int j = 0; j < 16; j++) {
            b[17 * k + 1 + j] = (uint8_t)(j | ((15 - j) << 4));
            want[32 * k + j] = mxfp4_value(j, es[k]);
            want[32 * k + j + 16] = mxfp4_value(15 - j, es[k]);
        }
    }
    /* spot values written out: 0.5 and 6 times 2^-127 denormal, 2 * 2^127 inf */
    CHECK(want[1] == 0x1p-128f && want[7] == 0x1.8p-125f && want[32 + 1] == 0x1p-127f);
    CHECK(want[64 + 7] == 0x1.8p-123f && want[96 + 7] == 6.0f && want[128 + 16] == -12.0f);
    CHECK(want[160 + 3] == 0x1.8p127f && want[160 + 4] == INFINITY && want[160 + 16] == -INFINITY);
    CHECK(eng_dequant_row_f32(GGML_TYPE_MXFP4, b, got, NB * 32) == 0);
    CHECK(eng_dequant_row_f16(GGML_TYPE_MXFP4, b, goth, NB * 32) == 0);
    int bad = 0, badh = 0;
    for (int i = 0; i < NB * 32; i++) {
        if (memcmp(&got[i], &want[i], sizeof(float)) != 0 && bad++ < 5)
            fprintf(stderr, "  MXFP4 e %d elem %d: %a, expected %a\n", es[i / 32], i % 32,
                    (double)got[i], (double)want[i]);
        badh += goth[i] != eng_f32_to_f16(want[i]);
    }
    CHECK(bad == 0);
    CHECK(badh == 0);
    float out[32];
    CHECK(eng_dequant_row_f32(GGML_TYPE_MXFP4, b, out, 16) == -EINVAL);
    CHECK(eng_dequant_row_f32(GGML_TYPE_MXFP4, b, out, 33) == -EINVAL);
}

/* eng_mxfp4_to_q8_0: Q8_0 blocks of the same values, bit for bit, for
 * every scale byte f16 holds (104..143: 2^-24 to 2^15) and every code;
 * below them (e 0, 100) Q8_0's own rounding of values under 2^-24, which
 * f16's d flushes toward 0. (Above, from 2^16, Q8_0 holds none.) */
static void test_mxfp4_to_q8(void)
{
    static const int es[] = { 104, 105, 117, 120, 127, 128, 131, 143, 0, 100 };
    enum { NB = sizeof(es) / sizeof(es[0]), EXACT = 8 };
    uint8_t b[NB * 17], q8[NB * 34];
    float want[NB * 32], got[NB * 32];
    uint32_t s = 12345;
    for (int k = 0; k < NB; k++) {
        b[17 * k] = (uint8_t)es[k];
        for (int j = 0; j < 16; j++) {
            s = s * 1103515245u + 12345u;
            b[17 * k + 1 + j] = (uint8_t)(j == 0 ? 0x7f : j == 1 ? 0xf8 : s >> 24);
        }
    }
    CHECK(eng_mxfp4_to_q8_0(b, q8, NB * 32) == 0);
    CHECK(eng_mxfp4_to_q8_0(b, q8, 33) == -EINVAL);
    CHECK(eng_dequant_row_f32(GGML_TYPE_MXFP4, b, want, NB * 32) == 0);
    CHECK(eng_dequant_row_f32(GGML_TYPE_Q8_0, q8, got, NB * 32) == 0);
    CHECK(memcmp(want, got, EXACT * 32 * sizeof(float)) == 0);
    for (int i = EXACT * 32; i < NB * 32; i++)
        CHECK(fabsf(got[i] - want[i]) <= fabsf(want[i]) && fabsf(want[i]) < 0x1p-24f);
}

/* eng_quant_row(MXFP4) against ggml's scale and level choice: e =
 * floor(log2(amax)) + 125 (clamped to the byte), then per element the
 * nearest level, the first of equals. */
static void test_mxfp4_quant(void)
{
    /* hand-picked: amax 15 gives e 128, scale 1, so the levels are ggml's
     * doubled ones, 0 1 2 3 4 6 8 12 and their negatives; ties go to the
     * lower code, values beyond 12 clip */
    static const struct { float x; int code; } hand[] = {
        {15.0f, 7},  {-15.0f, 15}, {0.5f, 0},   {-0.5f, 0}, {0.75f, 1},  {2.5f, 2},
        {-2.5f, 10}, {3.5f, 3},    {5.0f, 4},   {7.0f, 5},  {-7.0f, 13}, {10.0f, 6},
        {10.5f, 7},  {13.0f, 7},   {-0.0f, 0},  {1e-9f, 0}, {NAN, 0},    {-9.9f, 14},
        {1.0f, 1},   {-1.5f, 9},  {4.0f, 4},   {-4.0f, 12}, {6.0f, 5},  {8.0f, 6},
        {-12.0f, 15}, {11.0f, 7},  {-3.0f, 11}, {2.0f, 2},  {-5.5f, 13}, {0.25f, 0},
        {-0.75f, 9}, {9.0f, 6},
    };
    float x[32];
    uint8_t q[17];
    for (int j = 0; j < 32; j++)
        x[j] = hand[j].x;
    CHECK(eng_quant_row(GGML_TYPE_MXFP4, x, q, 32) == 0);
    CHECK(q[0] == 128);
    for (int j = 0; j < 32; j++) {
        const int got = j < 16 ? q[1 + j] & 15 : q[1 + j - 16] >> 4;
        if (got != hand[j].code)
            fprintf(stderr, "  MXFP4 quant of %g: code %d, want %d\n", (double)hand[j].x, got,
                    hand[j].code);
        CHECK(got == hand[j].code);
    }

    /* the scale byte at the edges: just below a power of two (log2f would
     * round up to it), the largest floats, values too small for ggml's
     * formula (clamped to 0), and zeros */
    static const struct { float amax; int e; } edge[] = {
        {8.0f, 128},       {0x1.fffffep2f, 127}, {1.0f, 125},  {0x1.fffffep127f, 252},
        {0x1p-125f, 0},    {0x1p-124f, 1},       {0x1p-130f, 0}, {0x1p-149f, 0}, {0.0f, 0},
    };
    for (size_t k = 0; k < sizeof(edge) / sizeof(edge[0]); k++) {
        for (int j = 0; j < 32; j++)
            x[j] = j == 5 ? -edge[k].amax : edge[k].amax / 4;
        CHECK(eng_quant_row(GGML_TYPE_MXFP4, x, q, 32) == 0);
        if (q[0] != edge[k].e)
            fprintf(stderr, "  MXFP4 amax %a: e %d, want %d\n", (double)edge[k].amax, q[0],
                    edge[k].e);
        CHECK(q[0] == edge[k].e);
    }

    /* random blocks over many magnitudes: e as above from frexp, and each
     * element's value the nearest level's (an error equal to the least
     * over the 16 levels, in double) */
    enum { NB = 512 };
    static float xr[NB * 32], yr[NB * 32];
    static uint8_t qr[NB * 17];
    for (int i = 0; i < NB * 32; i++)
        xr[i] = nrand() * ldexpf(1.0f, (i / 32) % 61 - 30);
    CHECK(eng_quant_row(GGML_TYPE_MXFP4, xr, qr, NB * 32) == 0);
    CHECK(eng_dequant_row_f32(GGML_TYPE_MXFP4, qr, yr, NB * 32) == 0);
    int bad_e = 0, bad_v = 0;
    for (int b = 0; b < NB; b++) {
        /* (compares, not fmax and fmin: gcc 12 for aarch64 dies
         * vectorizing those reductions) */
        double amax = 0;
        for (int j = 0; j < 32; j++)
            if (fabs(xr[32 * b + j]) > amax)
                amax = fabs(xr[32 * b + j]);
        int ex;
        frexp(amax, &ex); /* amax = m * 2^ex, m in [0.5, 1): floor(log2) = ex - 1 */
        const int e = amax > 0 ? ex - 1 + 125 : 0;
        bad_e += qr[17 * b] != e;
        for (int j = 0; j < 32; j++) {
            const double v = xr[32 * b + j];
            double best = INFINITY;
            for (int c = 0; c < 16; c++)
                if (fabs(mxfp4_value(c, qr[17 * b]) - v) < best)
                    best = fabs(mxfp4_value(c, qr[17 * b]) - v);
            if (fabs(yr[32 * b + j] - v) != best && bad_v++ < 5)
                fprintf(stderr, "  MXFP4 block %d elem %d: %a -> %a, not the nearest level\n", b,
                        j, v, (double)yr[32 * b + j]);
        }
    }
    CHECK(bad_e == 0);
    CHECK(bad_v == 0);
}

/* ---- Q8_0 quantization, exactly ---- */

/* The codes of eng_quant_row(Q8_0) against d = amax / 127 and lrintf
 * (round half to even) of x / d, on blocks whose scaled values are exact
 * halves (the ties), random values, and NaN (code 0). */
static void test_quant_q8_exact(void)
{
    enum { NB = 64 };
    static float x[NB * 32];
    static uint8_t q[NB * 34];
    for (int b = 0; b < NB; b++) {
        float *xb = x + 32 * b;
        if (b < NB / 2) {
            /* amax 127 / 8: d = 1/8 exactly, so x / d = m + 0.5 exactly */
            xb[0] = (b & 1) ? -127.0f / 8 : 127.0f / 8;
            for (int j = 1; j < 32; j++)
                xb[j] = ((float)((b * 31 + j * 17) % 253 - 126) + 0.5f) / 8;
        } else {
            for (int j = 0; j < 32; j++)
                xb[j] = (float)nrand() * (float)(1 + b % 7);
            if (b % 5 == 0)
                xb[b % 32] = NAN;
        }
    }
    CHECK(eng_quant_row(GGML_TYPE_Q8_0, x, q, NB * 32) == 0);
    int bad = 0;
    for (int b = 0; b < NB; b++) {
        const float *xb = x + 32 * b;
        float amax = 0;
        for (int j = 0; j < 32; j++)
            if (fabsf(xb[j]) > amax)
                amax = fabsf(xb[j]);
        const float d = amax / 127.0f, id = d != 0 ? 1.0f / d : 0.0f;
        for (int j = 0; j < 32; j++) {
            const float v = xb[j] * id;
            const int want = isnan(v) ? 0 : (int)lrintf(v < -127 ? -127 : v > 127 ? 127 : v);
            const int got = (int8_t)q[34 * b + 2 + j];
            if (got != want && bad++ < 5)
                fprintf(stderr, "q8_0 block %d elem %d: x %.9g scaled %.9g: code %d, want %d\n",
                        b, j, xb[j], v, got, want);
        }
    }
    CHECK(bad == 0);
}

/* ---- every format against gguf-py, bit for bit ---- */

/* tests/data/quant-blocks.bin (make-quant-blocks.py): random blocks of each
 * format with the values llama.cpp's gguf-py dequantizes them to. Random
 * bytes reach every bit of every field, which hand-built blocks do not. */
static void test_random_blocks(const char *path)
{
    FILE *f = fopen(path, "rb");
    CHECK(f != NULL);
    if (!f)
        return;
    int records = 0;
    uint32_t hdr[2];
    while (fread(hdr, sizeof(uint32_t), 2, f) == 2) {
        const uint32_t type = hdr[0], nb = hdr[1];
        const size_t be = ggml_type_block_elems(type), bb = ggml_type_block_bytes(type);
        CHECK(be > 0 && nb > 0 && nb <= 16);
        if (!(be > 0 && nb > 0 && nb <= 16))
            break;
        uint8_t blk[16 * 256];
        float want[16 * 256], got[16 * 256];
        uint16_t h[16 * 256];
        CHECK(fread(blk, bb, nb, f) == nb && fread(want, sizeof(float), nb * be, f) == nb * be);
        CHECK(eng_dequant_row_f32(type, blk, got, nb * be) == 0);
        CHECK(eng_dequant_row_f16(type, blk, h, nb * be) == 0);
        int bad = 0, bad16 = 0;
        for (size_t i = 0; i < nb * be; i++) {
            bad += memcmp(&got[i], &want[i], sizeof(float)) != 0;
            bad16 += h[i] != eng_f32_to_f16(want[i]);
        }
        if (bad || bad16)
            fprintf(stderr, "  %s: %d of %zu values differ from gguf-py's (%d as f16)\n",
                    ggml_type_name(type), bad, nb * be, bad16);
        CHECK(bad == 0 && bad16 == 0);
        records++;
    }
    fclose(f);
    CHECK(records == 13); /* the formats make-quant-blocks.py writes */
}

/* ---- quantize -> dequantize error bounds ---- */

static void test_quant_error(void)
{
    /* relative RMS error bounds for N(0,1) data (simple round-to-nearest
     * quantizers; llama.cpp's are a little better) */
    static const struct { uint32_t type; double bound; } bounds[] = {
        {GGML_TYPE_F32, 0.0},    {GGML_TYPE_F16, 5e-4},  {GGML_TYPE_BF16, 4e-3},
        {GGML_TYPE_Q8_0, 8e-3},  {GGML_TYPE_Q4_0, 0.12}, {GGML_TYPE_Q4_1, 0.12},
        {GGML_TYPE_Q5_0, 0.06},  {GGML_TYPE_Q5_1, 0.06}, {GGML_TYPE_Q4_K, 0.12},
        {GGML_TYPE_Q5_K, 0.06},  {GGML_TYPE_Q6_K, 0.03}, {GGML_TYPE_Q2_K, 0.40},
        {GGML_TYPE_Q3_K, 0.18},  {GGML_TYPE_IQ4_NL, 0.09}, {GGML_TYPE_IQ4_XS, 0.09},
        {GGML_TYPE_MXFP4, 0.13},
    };
    enum { N = 8192 };
    static float x[N], y[N], z[N];
    static uint8_t q[N * 4];
    static uint16_t h[N];
    for (size_t t = 0; t < sizeof(bounds) / sizeof(bounds[0]); t++) {
        for (int dist = 0; dist < 3; dist++) {
            for (int i = 0; i < N; i++) {
                float v = nrand();
                x[i] = dist == 0 ? v : dist == 1 ? v * 1000.0f + 500.0f : v * 1e-3f;
            }
            if (dist == 2) /* a block of zeros must stay zero */
                for (int i = 0; i < 256; i++)
                    x[i] = 0.0f;
            uint32_t type = bounds[t].type;
            CHECK(eng_quant_row(type, x, q, N) == 0);
            CHECK(eng_dequant_row_f32(type, q, y, N) == 0);
            CHECK(eng_dequant_row_f16(type, q, h, N) == 0);
            double e = 0, s = 0;
            int bad16 = 0;
            for (int i = 0; i < N; i++) {
                e += (double)(y[i] - x[i]) * (y[i] - x[i]);
                s += (double)x[i] * x[i];
                if (h[i] != eng_f32_to_f16(y[i]))
                    bad16++;
            }
            eng_f16_to_f32_row(h, z, N);
            double rel = sqrt(e / s);
            if (!(rel <= bounds[t].bound))
                fprintf(stderr, "  %s dist %d: relative rms error %.5f > %.5f\n",
                        ggml_type_name(type), dist, rel, bounds[t].bound);
            CHECK(rel <= bounds[t].bound);
            CHECK(bad16 == 0);
            if (dist == 2)
                for (int i = 0; i < 256; i++)
                    CHECK(y[i] == 0.0f);
        }
    }
}

/* ---- type traits ---- */

static void test_traits(void)
{
    CHECK(ggml_type_known(GGML_TYPE_Q4_K) && ggml_type_known(GGML_TYPE_Q2_K) && ggml_type_known(23) &&
          !ggml_type_known(16) && !ggml_type_known(4) && !ggml_type_known(1000));
    CHECK(strcmp(ggml_type_name(GGML_TYPE_Q4_K), "Q4_K") == 0);
    CHECK(strcmp(ggml_type_name(23), "IQ4_XS") == 0);
    CHECK(strcmp(ggml_type_name(4), "unknown") == 0);
    CHECK(strcmp(ggml_type_name(UINT32_MAX), "unknown") == 0);
    CHECK(ggml_type_block_elems(GGML_TYPE_Q4_0) == 32 && ggml_type_block_bytes(GGML_TYPE_Q4_0) == 18);
    CHECK(ggml_type_block_elems(GGML_TYPE_Q6_K) == 256 && ggml_type_block_bytes(GGML_TYPE_Q6_K) == 210);
    CHECK(ggml_type_block_bytes(GGML_TYPE_Q4_K) == 144 && ggml_type_block_bytes(GGML_TYPE_Q5_K) == 176);
    CHECK(ggml_type_block_elems(GGML_TYPE_Q2_K) == 256 && ggml_type_block_bytes(GGML_TYPE_Q2_K) == 84);
    CHECK(ggml_type_block_elems(GGML_TYPE_Q3_K) == 256 && ggml_type_block_bytes(GGML_TYPE_Q3_K) == 110);
    CHECK(ggml_type_block_elems(GGML_TYPE_IQ4_NL) == 32 && ggml_type_block_bytes(GGML_TYPE_IQ4_NL) == 18);
    CHECK(ggml_type_block_elems(GGML_TYPE_IQ4_XS) == 256 && ggml_type_block_bytes(GGML_TYPE_IQ4_XS) == 136);
    CHECK(ggml_type_known(39) && strcmp(ggml_type_name(39), "MXFP4") == 0);
    CHECK(ggml_type_block_elems(GGML_TYPE_MXFP4) == 32);
    CHECK(ggml_type_block_bytes(GGML_TYPE_MXFP4) == 17);
    CHECK(ggml_row_bytes(GGML_TYPE_MXFP4, 2880) == 90 * 17); /* gpt-oss's rows */
    CHECK(ggml_row_bytes(GGML_TYPE_MXFP4, 48) == 0);
    CHECK(ggml_row_bytes(GGML_TYPE_Q8_0, 64) == 68);
    CHECK(ggml_row_bytes(GGML_TYPE_Q8_0, 65) == 0);
    CHECK(ggml_row_bytes(GGML_TYPE_F32, 3) == 12);
    CHECK(ggml_row_bytes(GGML_TYPE_F32, 1ull << 62) == 0); /* overflows size_t */
}

/* ---- the real model file ---- */

static void test_smollm2(void)
{
    char buf[1024];
    const char *path = getenv("SI_MODEL");
    if (!path || !*path) {
        const char *cache = getenv("XDG_CACHE_HOME"), *home = getenv("HOME");
        if (cache && *cache)
            snprintf(buf, sizeof(buf), "%s/selectinfer/SmolLM2-135M-Instruct.Q4_1.gguf", cache);
        else
            snprintf(buf, sizeof(buf), "%s/.cache/selectinfer/SmolLM2-135M-Instruct.Q4_1.gguf",
                     home ? home : "");
        path = buf;
    }
    if (access(path, R_OK) != 0) {
        fprintf(stderr, "note: %s not found, skipping the real-model checks\n", path);
        return;
    }
    if (!strstr(path, "SmolLM2-135M-Instruct.Q4_1")) {
        fprintf(stderr, "note: SI_MODEL is not the default SmolLM2 file, skipping its checks\n");
        return;
    }
    gguf_file *f = NULL;
    eng_error err = {{0}};
    int r = gguf_open(path, &f, &err);
    CHECK(r == 0);
    if (r) {
        fprintf(stderr, "open %s: %s\n", path, err.msg);
        return;
    }
    const char *s;
    size_t n;
    uint32_t u;
    float fl;
    CHECK(gguf_version(f) == 3);
    CHECK(gguf_n_tensors(f) == 272);
    CHECK(gguf_n_kv(f) == 33);
    CHECK(gguf_get_str(f, "general.architecture", &s, &n) == 0 && streq(s, n, "llama"));
    CHECK(gguf_get_str(f, "tokenizer.ggml.model", &s, &n) == 0 && streq(s, n, "gpt2"));
    CHECK(gguf_get_str(f, "tokenizer.ggml.pre", &s, &n) == 0 && streq(s, n, "smollm"));
    CHECK(gguf_get_u32(f, "llama.block_count", &u) == 0 && u == 30);
    CHECK(gguf_get_u32(f, "llama.embedding_length", &u) == 0 && u == 576);
    CHECK(gguf_get_u32(f, "llama.feed_forward_length", &u) == 0 && u == 1536);
    CHECK(gguf_get_u32(f, "llama.attention.head_count", &u) == 0 && u == 9);
    CHECK(gguf_get_u32(f, "llama.attention.head_count_kv", &u) == 0 && u == 3);
    CHECK(gguf_get_f32(f, "llama.rope.freq_base", &fl) == 0 && fl == 100000.0f);
    CHECK(gguf_get_u32(f, "tokenizer.ggml.bos_token_id", &u) == 0 && u == 1);
    CHECK(gguf_get_u32(f, "tokenizer.ggml.eos_token_id", &u) == 0 && u == 2);
    CHECK(gguf_get_str(f, "tokenizer.chat_template", &s, &n) == 0 && n > 0 &&
          memmem(s, n, "<|im_start|>", 12) != NULL);
    enum gguf_type et;
    uint64_t cnt;
    CHECK(gguf_get_arr_info(f, "tokenizer.ggml.tokens", &et, &cnt) == 0 &&
          et == GGUF_TYPE_STRING && cnt == 49152);
    CHECK(gguf_get_arr_str(f, "tokenizer.ggml.tokens", 1, &s, &n) == 0 &&
          streq(s, n, "<|im_start|>"));
    CHECK(gguf_get_arr_str(f, "tokenizer.ggml.tokens", 49151, &s, &n) == 0 && n > 0);
    CHECK(gguf_get_arr_info(f, "tokenizer.ggml.merges", &et, &cnt) == 0 && cnt == 48900);
    CHECK(gguf_get_arr_str(f, "tokenizer.ggml.merges", 0, &s, &n) == 0 && streq(s, n, "Ġ t"));
    int32_t tt;
    CHECK(gguf_get_arr_i32(f, "tokenizer.ggml.token_type", 0, &tt) == 0 && tt == 3);
    CHECK(gguf_get_arr_i32(f, "tokenizer.ggml.token_type", 100, &tt) == 0 && tt == 1);

    const gguf_tensor *t = gguf_find_tensor(f, "token_embd.weight");
    CHECK(t && t->type == GGML_TYPE_Q8_0 && t->ne[0] == 576 && t->ne[1] == 49152);
    t = gguf_find_tensor(f, "blk.0.ffn_down.weight");
    CHECK(t && t->type == GGML_TYPE_Q4_1 && t->ne[0] == 1536 && t->ne[1] == 576);
    t = gguf_find_tensor(f, "blk.29.attn_norm.weight");
    CHECK(t && t->type == GGML_TYPE_F32 && t->n_dims == 1 && t->ne[0] == 576);
    CHECK(gguf_find_tensor(f, "output.weight") == NULL); /* tied embeddings */
    /* every tensor dequantizes to finite values; totals match the file */
    uint64_t total = 0;
    static float row[1536];
    int nonfinite = 0;
    for (size_t i = 0; i < gguf_n_tensors(f); i++) {
        t = gguf_get_tensor(f, i);
        total += t->nbytes;
        size_t rb = ggml_row_bytes(t->type, t->ne[0]);
        uint64_t rows = t->ne[1] * t->ne[2] * t->ne[3];
        for (uint64_t rr = 0; rr < rows; rr += 97) {
            CHECK(eng_dequant_row_f32(t->type, (const uint8_t *)t->data + rr * rb, row,
                                      (size_t)t->ne[0]) == 0);
            for (uint64_t j = 0; j < t->ne[0]; j++)
                if (!isfinite(row[j]))
                    nonfinite++;
        }
    }
    CHECK(nonfinite == 0);
    CHECK(total <= gguf_file_size(f) && total > gguf_file_size(f) / 2);
    gguf_close(f);
}

int main(int argc, char **argv)
{
    if (argc != 2) {
        fprintf(stderr, "usage: test-gguf tests/data/quant-blocks.bin\n");
        return 2;
    }
    const char *base = getenv("TMPDIR");
    snprintf(tmpdir, sizeof(tmpdir), "%s/test-gguf-XXXXXX", base && *base ? base : "/tmp");
    if (!mkdtemp(tmpdir)) {
        perror("mkdtemp");
        return 1;
    }
    test_traits();
    test_metadata();
    test_tensors(GGUF_DEFAULT_ALIGNMENT);
    test_tensors(64);
    test_tensors(1);
    test_half();
    test_known_blocks();
    test_mxfp4_blocks();
    test_mxfp4_quant();
    test_mxfp4_to_q8();
    test_random_blocks(argv[1]);
    test_quant_q8_exact();
    test_quant_error();
    test_smollm2();
    rmdir(tmpdir);
    if (failures) {
        fprintf(stderr, "%d check(s) failed\n", failures);
        return 1;
    }
    printf("ok\n");
    return 0;
}
