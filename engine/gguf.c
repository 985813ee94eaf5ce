/* GGUF reader and writer.
 *
 * Layout (v2/v3, little-endian):
 *   "GGUF" u32 version, u64 n_tensors, u64 n_kv
 *   n_kv x { string key, u32 type, value }       string = u64 len + bytes
 *                                               array  = u32 elem type, u64 n, n values
 *   n_tensors x { string name, u32 n_dims, u64 ne[n_dims], u32 type, u64 offset }
 *   padding to general.alignment (default 32), then the data section;
 *   tensor offsets are relative to the data section.
 *
 * The reader validates the whole structure in gguf_open_buffer(); the
 * accessors then only index what was checked. Every count is bounded by
 * the bytes left in the file before anything is allocated for it, so a
 * hostile header cannot make us allocate more than a small multiple of the
 * file size.
 */
#include "error.h"
#include "gguf.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#define GGUF_MAGIC 0x46554747u /* "GGUF" read as little-endian u32 */

/* Smallest encodings, used to bound counts before allocating:
 * a kv is at least key (8 + 1) + type (4) + a 1-byte value; a tensor info is
 * at least name (8 + 1) + n_dims (4) + one ne (8) + type (4) + offset (8). */
#define MIN_KV_BYTES 14
#define MIN_TENSOR_INFO_BYTES 33

struct gguf_kv {
    char *key;
    uint32_t type;
    uint32_t elem_type; /* arrays only */
    uint64_t n;         /* arrays: element count; strings: byte length */
    size_t off;         /* scalars and strings: value bytes; arrays: first element */
    size_t *str_off;    /* string arrays: offset of each element's length field */
};

struct gguf_file {
    const uint8_t *base;
    size_t size;
    bool mapped;
    uint32_t version;
    uint32_t alignment;
    size_t data_off;
    size_t n_kv;
    struct gguf_kv *kv;
    size_t *kv_sorted; /* kv indices sorted by key, for bsearch */
    size_t n_tensors;
    gguf_tensor *tensors;
    size_t *t_sorted; /* tensor indices sorted by name */
};

/* ---- ggml type traits ---- */

static const char *const type_names[] = {
    [0] = "F32",      [1] = "F16",     [2] = "Q4_0",    [3] = "Q4_1",    [6] = "Q5_0",
    [7] = "Q5_1",     [8] = "Q8_0",    [9] = "Q8_1",    [10] = "Q2_K",   [11] = "Q3_K",
    [12] = "Q4_K",    [13] = "Q5_K",   [14] = "Q6_K",   [15] = "Q8_K",   [16] = "IQ2_XXS",
    [17] = "IQ2_XS",  [18] = "IQ3_XXS", [19] = "IQ1_S", [20] = "IQ4_NL", [21] = "IQ3_S",
    [22] = "IQ2_S",   [23] = "IQ4_XS", [24] = "I8",      [25] = "I16",    [26] = "I32",
    [27] = "I64",     [28] = "F64",    [29] = "IQ1_M",   [30] = "BF16",   [34] = "TQ1_0",
    [35] = "TQ2_0",   [39] = "MXFP4",
};

bool ggml_type_known(uint32_t type)
{
    return ggml_type_block_elems(type) != 0;
}

const char *ggml_type_name(uint32_t type)
{
    if (type < sizeof(type_names) / sizeof(type_names[0]) && type_names[type])
        return type_names[type];
    return "unknown";
}

size_t ggml_type_block_elems(uint32_t type)
{
    switch (type) {
    case GGML_TYPE_F32:
    case GGML_TYPE_F16:
    case GGML_TYPE_BF16: return 1;
    case GGML_TYPE_Q4_0:
    case GGML_TYPE_Q4_1:
    case GGML_TYPE_Q5_0:
    case GGML_TYPE_Q5_1:
    case GGML_TYPE_Q8_0:
    case GGML_TYPE_IQ4_NL:
    case GGML_TYPE_MXFP4: return 32;
    case GGML_TYPE_Q2_K:
    case GGML_TYPE_Q3_K:
    case GGML_TYPE_IQ4_XS:
    case GGML_TYPE_Q4_K:
    case GGML_TYPE_Q5_K:
    case GGML_TYPE_Q6_K: return 256;
    default: return 0;
    }
}

size_t ggml_type_block_bytes(uint32_t type)
{
    switch (type) {
    case GGML_TYPE_F32: return 4;
    case GGML_TYPE_F16:
    case GGML_TYPE_BF16: return 2;
    case GGML_TYPE_Q4_0: return 18;
    case GGML_TYPE_Q4_1: return 20;
    case GGML_TYPE_Q5_0: return 22;
    case GGML_TYPE_Q5_1: return 24;
    case GGML_TYPE_Q8_0: return 34;
    case GGML_TYPE_IQ4_NL: return 18;
    case GGML_TYPE_MXFP4: return 17;
    case GGML_TYPE_Q2_K: return 84;
    case GGML_TYPE_Q3_K: return 110;
    case GGML_TYPE_IQ4_XS: return 136;
    case GGML_TYPE_Q4_K: return 144;
    case GGML_TYPE_Q5_K: return 176;
    case GGML_TYPE_Q6_K: return 210;
    default: return 0;
    }
}

size_t ggml_row_bytes(uint32_t type, uint64_t n)
{
    size_t be = ggml_type_block_elems(type), bb = ggml_type_block_bytes(type);
    if (be == 0 || n % be != 0)
        return 0;
    uint64_t blocks = n / be;
    if (blocks > SIZE_MAX / bb)
        return 0;
    return (size_t)blocks * bb;
}

/* ---- metadata value types ---- */

static const char *const gguf_type_names[GGUF_TYPE_COUNT] = {
    "uint8", "int8", "uint16", "int16", "uint32", "int32", "float32",
    "bool",  "string", "array", "uint64", "int64", "float64",
};

static const char *gtype_name(uint32_t t)
{
    return t < GGUF_TYPE_COUNT ? gguf_type_names[t] : "invalid";
}

/* Size of a fixed-size value, 0 for string/array/invalid. */
static size_t gtype_size(uint32_t t)
{
    switch (t) {
    case GGUF_TYPE_UINT8:
    case GGUF_TYPE_INT8:
    case GGUF_TYPE_BOOL: return 1;
    case GGUF_TYPE_UINT16:
    case GGUF_TYPE_INT16: return 2;
    case GGUF_TYPE_UINT32:
    case GGUF_TYPE_INT32:
    case GGUF_TYPE_FLOAT32: return 4;
    case GGUF_TYPE_UINT64:
    case GGUF_TYPE_INT64:
    case GGUF_TYPE_FLOAT64: return 8;
    default: return 0;
    }
}

/* ---- bounded cursor ---- */

typedef struct rd {
    const uint8_t *p;
    size_t size;
    size_t pos;
    eng_error *err;
} rd;

static size_t rd_left(const rd *r)
{
    return r->size - r->pos;
}

/* what/idx name the field for the message: "tensor info 12", "kv 3 ('x')". */
static int rd_need(rd *r, size_t n, const char *what, size_t idx)
{
    if (n > rd_left(r))
        return eng__set_err(r->err, -EINVAL, "truncated: %s %zu needs %zu bytes at byte %zu, file has %zu",
                            what, idx, n, r->pos, r->size);
    return 0;
}

static int rd_u32(rd *r, uint32_t *v, const char *what, size_t idx)
{
    int ret = rd_need(r, 4, what, idx);
    if (ret < 0)
        return ret;
    memcpy(v, r->p + r->pos, 4);
    r->pos += 4;
    return 0;
}

static int rd_u64(rd *r, uint64_t *v, const char *what, size_t idx)
{
    int ret = rd_need(r, 8, what, idx);
    if (ret < 0)
        return ret;
    memcpy(v, r->p + r->pos, 8);
    r->pos += 8;
    return 0;
}

/* A string: on success *off is where its bytes start and *len its length. */
static int rd_str(rd *r, size_t *off, uint64_t *len, const char *what, size_t idx)
{
    uint64_t n;
    int ret = rd_u64(r, &n, what, idx);
    if (ret < 0)
        return ret;
    if (n > rd_left(r))
        return eng__set_err(r->err, -EINVAL,
                            "truncated: %s %zu has a string of %llu bytes at byte %zu, file has %zu", what,
                            idx, (unsigned long long)n, r->pos, r->size);
    *off = r->pos;
    *len = n;
    r->pos += (size_t)n;
    return 0;
}

/* A NUL-terminated copy of a name (key or tensor name); names must be
 * non-empty and free of NUL bytes so that the copies compare as the file does. */
static int rd_name(rd *r, char **ret, const char *what, size_t idx)
{
    size_t off = 0;
    uint64_t len = 0;
    int ret2 = rd_str(r, &off, &len, what, idx);
    if (ret2 < 0)
        return ret2;
    if (len == 0)
        return eng__set_err(r->err, -EINVAL, "%s %zu has an empty name", what, idx);
    if (memchr(r->p + off, 0, (size_t)len))
        return eng__set_err(r->err, -EINVAL, "%s %zu has a name containing a NUL byte", what, idx);
    char *s = malloc((size_t)len + 1);
    if (!s)
        return eng__set_err(r->err, -ENOMEM, "out of memory reading %s %zu", what, idx);
    memcpy(s, r->p + off, (size_t)len);
    s[len] = '\0';
    *ret = s;
    return 0;
}

/* ---- sorting helpers (qsort has no context argument: index arrays carry
 * their own key through a small struct) ---- */

typedef struct sort_item {
    const char *name;
    uint64_t off;
    size_t idx;
} sort_item;

static int cmp_name(const void *a, const void *b)
{
    return strcmp(((const sort_item *)a)->name, ((const sort_item *)b)->name);
}

static int cmp_off(const void *a, const void *b)
{
    uint64_t x = ((const sort_item *)a)->off, y = ((const sort_item *)b)->off;
    return x < y ? -1 : x > y;
}

void gguf_close(gguf_file *f)
{
    if (!f)
        return;
    if (f->kv) {
        for (size_t i = 0; i < f->n_kv; i++) {
            free(f->kv[i].key);
            free(f->kv[i].str_off);
        }
    }
    if (f->tensors) {
        for (size_t i = 0; i < f->n_tensors; i++)
            free((char *)f->tensors[i].name);
    }
    free(f->kv);
    free(f->kv_sorted);
    free(f->tensors);
    free(f->t_sorted);
    if (f->mapped && f->base)
        munmap((void *)f->base, f->size);
    free(f);
}

static int parse_kv(rd *r, struct gguf_kv *kv, size_t i)
{
    int ret = rd_name(r, &kv->key, "kv", i);
    if (ret < 0)
        return ret;
    ret = rd_u32(r, &kv->type, "kv", i);
    if (ret < 0)
        return ret;
    if (kv->type >= GGUF_TYPE_COUNT)
        return eng__set_err(r->err, -EINVAL, "kv %zu ('%s') has invalid value type %u", i, kv->key,
                            kv->type);
    if (kv->type == GGUF_TYPE_STRING)
        return rd_str(r, &kv->off, &kv->n, "kv", i);
    if (kv->type != GGUF_TYPE_ARRAY) {
        size_t sz = gtype_size(kv->type);
        ret = rd_need(r, sz, "kv", i);
        if (ret < 0)
            return ret;
        kv->off = r->pos;
        r->pos += sz;
        if (kv->type == GGUF_TYPE_BOOL && r->p[kv->off] > 1)
            return eng__set_err(r->err, -EINVAL, "kv %zu ('%s') has bool value %u", i, kv->key,
                                r->p[kv->off]);
        return 0;
    }
    ret = rd_u32(r, &kv->elem_type, "kv", i);
    if (ret < 0)
        return ret;
    if (kv->elem_type == GGUF_TYPE_ARRAY)
        return eng__set_err(r->err, -EINVAL, "kv %zu ('%s') is a nested array (not supported)", i, kv->key);
    if (kv->elem_type >= GGUF_TYPE_COUNT)
        return eng__set_err(r->err, -EINVAL, "kv %zu ('%s') is an array of invalid type %u", i, kv->key,
                            kv->elem_type);
    ret = rd_u64(r, &kv->n, "kv", i);
    if (ret < 0)
        return ret;
    if (kv->elem_type == GGUF_TYPE_STRING) {
        if (kv->n > rd_left(r) / 8)
            return eng__set_err(r->err, -EINVAL,
                                "truncated: kv %zu ('%s') has %llu strings but only %zu bytes remain", i,
                                kv->key, (unsigned long long)kv->n, rd_left(r));
        kv->off = r->pos;
        kv->str_off = malloc(((size_t)kv->n ? (size_t)kv->n : 1) * sizeof(size_t));
        if (!kv->str_off)
            return eng__set_err(r->err, -ENOMEM, "out of memory reading kv %zu ('%s')", i, kv->key);
        for (uint64_t j = 0; j < kv->n; j++) {
            size_t off = 0;
            uint64_t len = 0;
            kv->str_off[j] = r->pos;
            ret = rd_str(r, &off, &len, "kv", i);
            if (ret < 0)
                return ret;
        }
        return 0;
    }
    size_t sz = gtype_size(kv->elem_type);
    if (kv->n > rd_left(r) / sz)
        return eng__set_err(r->err, -EINVAL,
                            "truncated: kv %zu ('%s') has %llu elements of %zu bytes at byte %zu, file has %zu",
                            i, kv->key, (unsigned long long)kv->n, sz, r->pos, r->size);
    kv->off = r->pos;
    r->pos += (size_t)kv->n * sz;
    return 0;
}

static int parse_tensor_info(rd *r, gguf_tensor *t, size_t i)
{
    char *name = NULL;
    int ret = rd_name(r, &name, "tensor info", i);
    if (ret < 0)
        return ret;
    t->name = name;
    ret = rd_u32(r, &t->n_dims, "tensor info", i);
    if (ret < 0)
        return ret;
    if (t->n_dims < 1 || t->n_dims > GGUF_MAX_DIMS)
        return eng__set_err(r->err, -EINVAL, "tensor '%s' has %u dimensions (1 to %d allowed)", name,
                            t->n_dims, GGUF_MAX_DIMS);
    for (int d = 0; d < GGUF_MAX_DIMS; d++)
        t->ne[d] = 1;
    for (uint32_t d = 0; d < t->n_dims; d++) {
        ret = rd_u64(r, &t->ne[d], "tensor info", i);
        if (ret < 0)
            return ret;
        if (t->ne[d] == 0 || t->ne[d] > (uint64_t)INT64_MAX)
            return eng__set_err(r->err, -EINVAL, "tensor '%s' has invalid dimension %u of size %llu", name,
                                d, (unsigned long long)t->ne[d]);
    }
    ret = rd_u32(r, &t->type, "tensor info", i);
    if (ret < 0)
        return ret;
    return rd_u64(r, &t->offset, "tensor info", i);
}

/* Shape, type and placement of one tensor, after the data section start is known. */
static int check_tensor(gguf_file *f, gguf_tensor *t, eng_error *err)
{
    if (!ggml_type_known(t->type))
        return eng__set_err(err, -EINVAL, "tensor '%s' has unsupported type %u (%s)", t->name, t->type,
                            ggml_type_name(t->type));
    /* element count must fit int64 (ggml's limit) */
    uint64_t nel = 1;
    for (int d = 0; d < GGUF_MAX_DIMS; d++) {
        if (t->ne[d] > (uint64_t)INT64_MAX / nel)
            return eng__set_err(err, -EINVAL, "tensor '%s' has too many elements (shape overflows)",
                                t->name);
        nel *= t->ne[d];
    }
    size_t be = ggml_type_block_elems(t->type);
    if (t->ne[0] % be != 0)
        return eng__set_err(err, -EINVAL,
                            "tensor '%s' has row length %llu, not a multiple of the %s block size %zu",
                            t->name, (unsigned long long)t->ne[0], ggml_type_name(t->type), be);
    size_t row = ggml_row_bytes(t->type, t->ne[0]);
    uint64_t rows = nel / t->ne[0];
    if (row == 0 || rows > UINT64_MAX / row)
        return eng__set_err(err, -EINVAL, "tensor '%s' is too large (byte size overflows)", t->name);
    t->nbytes = (uint64_t)row * rows;
    if (t->offset % f->alignment != 0)
        return eng__set_err(err, -EINVAL, "tensor '%s' has offset %llu, not a multiple of the alignment %u",
                            t->name, (unsigned long long)t->offset, f->alignment);
    size_t data_size = f->size - f->data_off;
    if (t->offset > data_size || t->nbytes > data_size - t->offset)
        return eng__set_err(err, -EINVAL,
                            "tensor '%s' data [%llu, +%llu) lies outside the data section (%zu bytes)",
                    t->name, (unsigned long long)t->offset, (unsigned long long)t->nbytes,
                    data_size);
    t->data = f->base + f->data_off + t->offset;
    return 0;
}

static int parse(gguf_file *f, eng_error *err)
{
    rd r = {.p = f->base, .size = f->size, .pos = 0, .err = err};
    uint32_t magic;
    uint64_t n_tensors, n_kv;
    int ret;

    if (f->size < 24) {
        if (f->size >= 4 && memcmp(f->base, "GGUF", 4) != 0)
            return eng__set_err(err, -EINVAL, "not a GGUF file (bad magic)");
        return eng__set_err(err, -EINVAL, "truncated: file has %zu bytes, a GGUF header needs 24", f->size);
    }
    rd_u32(&r, &magic, "header", 0);
    if (magic != GGUF_MAGIC)
        return eng__set_err(err, -EINVAL, "not a GGUF file (bad magic %02x %02x %02x %02x)", f->base[0],
                            f->base[1], f->base[2], f->base[3]);
    rd_u32(&r, &f->version, "header", 0);
    if (f->version == 1)
        return eng__set_err(err, -EINVAL, "GGUF version 1 is not supported (only versions 2 and 3)");
    if (f->version != 2 && f->version != 3) {
        uint32_t sw = __builtin_bswap32(f->version);
        return eng__set_err(err, -EINVAL, "unsupported GGUF version %u%s", f->version,
                            (sw == 2 || sw == 3) ? " (big-endian file?)" : "");
    }
    rd_u64(&r, &n_tensors, "header", 0);
    rd_u64(&r, &n_kv, "header", 0);
    if (n_kv > rd_left(&r) / MIN_KV_BYTES)
        return eng__set_err(err, -EINVAL, "kv count %llu is impossible in a file of %zu bytes",
                            (unsigned long long)n_kv, f->size);
    if (n_tensors > rd_left(&r) / MIN_TENSOR_INFO_BYTES)
        return eng__set_err(err, -EINVAL, "tensor count %llu is impossible in a file of %zu bytes",
                            (unsigned long long)n_tensors, f->size);

    f->kv = calloc(n_kv ? (size_t)n_kv : 1, sizeof(*f->kv));
    f->kv_sorted = calloc(n_kv ? (size_t)n_kv : 1, sizeof(size_t));
    if (!f->kv || !f->kv_sorted)
        return eng__set_err(err, -ENOMEM, "out of memory for %llu kvs", (unsigned long long)n_kv);
    for (size_t i = 0; i < n_kv; i++) {
        f->n_kv = i + 1; /* so gguf_close frees what this kv allocated */
        ret = parse_kv(&r, &f->kv[i], i);
        if (ret < 0)
            return ret;
    }
    f->n_kv = (size_t)n_kv;

    /* unique keys: sort names, compare neighbours (O(n log n) for hostile counts) */
    {
        sort_item *it = malloc((f->n_kv ? f->n_kv : 1) * sizeof(*it));
        if (!it)
            return eng__set_err(err, -ENOMEM, "out of memory");
        for (size_t i = 0; i < f->n_kv; i++)
            it[i] = (sort_item){.name = f->kv[i].key, .idx = i};
        qsort(it, f->n_kv, sizeof(*it), cmp_name);
        for (size_t i = 0; i < f->n_kv; i++) {
            if (i > 0 && strcmp(it[i - 1].name, it[i].name) == 0) {
                ret = eng__set_err(err, -EINVAL, "duplicate key '%s' (kv %zu and %zu)", it[i].name,
                                   it[i - 1].idx, it[i].idx);
                free(it);
                return ret;
            }
            f->kv_sorted[i] = it[i].idx;
        }
        free(it);
    }

    f->alignment = GGUF_DEFAULT_ALIGNMENT;
    int ai = gguf_find_key(f, "general.alignment");
    if (ai >= 0) {
        uint32_t a;
        if (f->kv[ai].type != GGUF_TYPE_UINT32)
            return eng__set_err(err, -EINVAL, "general.alignment has type %s, expected uint32",
                                gtype_name(f->kv[ai].type));
        memcpy(&a, f->base + f->kv[ai].off, 4);
        if (a == 0 || (a & (a - 1)) != 0)
            return eng__set_err(err, -EINVAL, "general.alignment %u is not a power of two", a);
        f->alignment = a;
    }

    f->tensors = calloc(n_tensors ? (size_t)n_tensors : 1, sizeof(*f->tensors));
    f->t_sorted = calloc(n_tensors ? (size_t)n_tensors : 1, sizeof(size_t));
    if (!f->tensors || !f->t_sorted)
        return eng__set_err(err, -ENOMEM, "out of memory for %llu tensors", (unsigned long long)n_tensors);
    for (size_t i = 0; i < n_tensors; i++) {
        f->n_tensors = i + 1;
        ret = parse_tensor_info(&r, &f->tensors[i], i);
        if (ret < 0)
            return ret;
    }
    f->n_tensors = (size_t)n_tensors;

    /* data section: the end of the tensor infos rounded up to the alignment */
    size_t pad = (f->alignment - r.pos % f->alignment) % f->alignment;
    if (pad > SIZE_MAX - r.pos)
        return eng__set_err(err, -EINVAL, "data section offset overflows");
    f->data_off = r.pos + pad;
    if (f->data_off > f->size) {
        if (f->n_tensors > 0)
            return eng__set_err(err, -EINVAL,
                                "truncated: the data section starts at byte %zu, file has %zu",
                                f->data_off, f->size);
        f->data_off = f->size; /* a metadata-only file need not be padded */
    }

    for (size_t i = 0; i < f->n_tensors; i++) {
        ret = check_tensor(f, &f->tensors[i], err);
        if (ret < 0)
            return ret;
    }

    if (f->n_tensors > 0) {
        sort_item *it = malloc(f->n_tensors * sizeof(*it));
        if (!it)
            return eng__set_err(err, -ENOMEM, "out of memory");
        for (size_t i = 0; i < f->n_tensors; i++)
            it[i] = (sort_item){.name = f->tensors[i].name, .off = f->tensors[i].offset, .idx = i};
        qsort(it, f->n_tensors, sizeof(*it), cmp_name);
        for (size_t i = 0; i < f->n_tensors; i++) {
            if (i > 0 && strcmp(it[i - 1].name, it[i].name) == 0) {
                ret = eng__set_err(err, -EINVAL, "duplicate tensor '%s' (tensors %zu and %zu)",
                                   it[i].name, it[i - 1].idx, it[i].idx);
                free(it);
                return ret;
            }
            f->t_sorted[i] = it[i].idx;
        }
        qsort(it, f->n_tensors, sizeof(*it), cmp_off);
        for (size_t i = 1; i < f->n_tensors; i++) {
            const gguf_tensor *a = &f->tensors[it[i - 1].idx], *b = &f->tensors[it[i].idx];
            if (a->offset + a->nbytes > b->offset) {
                ret = eng__set_err(err, -EINVAL, "tensors '%s' and '%s' overlap (offsets %llu and %llu)",
                                   a->name, b->name, (unsigned long long)a->offset,
                                   (unsigned long long)b->offset);
                free(it);
                return ret;
            }
        }
        free(it);
    }
    return 0;
}

static int open_common(const uint8_t *base, size_t size, bool mapped, gguf_file **ret_file,
                       eng_error *err)
{
    gguf_file *f = calloc(1, sizeof(*f));
    if (!f) {
        if (mapped)
            munmap((void *)base, size);
        return eng__set_err(err, -ENOMEM, "out of memory");
    }
    f->base = base;
    f->size = size;
    f->mapped = mapped;
    int ret = parse(f, err);
    if (ret < 0) {
        gguf_close(f);
        return ret;
    }
    *ret_file = f;
    return 0;
}

int gguf_open_buffer(const void *buf, size_t size, gguf_file **ret_file, eng_error *err)
{
    if (!buf && size > 0)
        return eng__set_err(err, -EINVAL, "no buffer");
    static const uint8_t empty[1];
    return open_common(buf ? buf : empty, size, false, ret_file, err);
}

int gguf_open(const char *path, gguf_file **ret_file, eng_error *err)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        int e = errno;
        return eng__set_err(err, -e, "cannot open: %s", strerror(e));
    }
    struct stat st;
    if (fstat(fd, &st) < 0) {
        int e = errno;
        close(fd);
        return eng__set_err(err, -e, "cannot stat: %s", strerror(e));
    }
    if (!S_ISREG(st.st_mode)) {
        close(fd);
        return eng__set_err(err, -EINVAL, "not a regular file");
    }
    if ((uint64_t)st.st_size > SIZE_MAX) {
        close(fd);
        return eng__set_err(err, -EFBIG, "file too large to map");
    }
    size_t size = (size_t)st.st_size;
    if (size < 24) {
        /* too small to map usefully; let the parser name the problem */
        uint8_t small[24];
        ssize_t n = size ? pread(fd, small, size, 0) : 0;
        close(fd);
        if (n < 0 || (size_t)n != size)
            return eng__set_err(err, -EIO, "cannot read the file");
        gguf_file *f;
        int ret = gguf_open_buffer(small, size, &f, err);
        if (ret == 0) { /* cannot happen: parse rejects < 24 bytes */
            gguf_close(f);
            ret = eng__set_err(err, -EINVAL, "truncated file");
        }
        return ret;
    }
    void *p = mmap(NULL, size, PROT_READ, MAP_PRIVATE, fd, 0);
    int e = errno;
    close(fd);
    if (p == MAP_FAILED)
        return eng__set_err(err, -e, "cannot map %zu bytes: %s", size, strerror(e));
    return open_common(p, size, true, ret_file, err);
}

uint32_t gguf_version(const gguf_file *f) { return f->version; }
size_t gguf_file_size(const gguf_file *f) { return f->size; }
const void *gguf_file_data(const gguf_file *f) { return f->base; }

void gguf_release(const gguf_file *f, const void *p, size_t len)
{
    const uintptr_t base = (uintptr_t)f->base, a = (uintptr_t)p;
    const long ps = sysconf(_SC_PAGESIZE);
    if (!f->mapped || ps <= 0 || a < base || len > f->size || a - base > f->size - len)
        return;
    /* the whole pages inside: those at the ends may hold a neighbour's
     * bytes, still to be read */
    const uintptr_t lo = (a + (uintptr_t)ps - 1) / (uintptr_t)ps * (uintptr_t)ps;
    const uintptr_t hi = (a + len) / (uintptr_t)ps * (uintptr_t)ps;
    if (hi > lo)
        madvise((void *)lo, hi - lo, MADV_DONTNEED);
}

/* ---- metadata accessors ---- */

size_t gguf_n_kv(const gguf_file *f) { return f->n_kv; }

int gguf_find_key(const gguf_file *f, const char *key)
{
    if (!key)
        return -1;
    size_t lo = 0, hi = f->n_kv;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        int c = strcmp(key, f->kv[f->kv_sorted[mid]].key);
        if (c == 0)
            return f->kv_sorted[mid] > (size_t)INT32_MAX ? -1 : (int)f->kv_sorted[mid];
        if (c < 0)
            hi = mid;
        else
            lo = mid + 1;
    }
    return -1;
}

const char *gguf_key_name(const gguf_file *f, int i)
{
    if (i < 0 || (size_t)i >= f->n_kv)
        return NULL;
    return f->kv[i].key;
}

enum gguf_type gguf_key_type(const gguf_file *f, int i)
{
    if (i < 0 || (size_t)i >= f->n_kv)
        return GGUF_TYPE_COUNT;
    return (enum gguf_type)f->kv[i].type;
}

static const struct gguf_kv *kv_get(const gguf_file *f, const char *key)
{
    int i = gguf_find_key(f, key);
    return i < 0 ? NULL : &f->kv[i];
}

/* Numeric value of type t at p, as an integer (is_int) or a double. */
static int load_num(uint32_t t, const uint8_t *p, bool *is_int, int64_t *iv, uint64_t *uv,
                    bool *is_unsigned, double *dv)
{
    *is_int = true;
    *is_unsigned = false;
    switch (t) {
    case GGUF_TYPE_UINT8: *uv = p[0]; *is_unsigned = true; return 0;
    case GGUF_TYPE_INT8: *iv = (int8_t)p[0]; return 0;
    case GGUF_TYPE_UINT16: { uint16_t v; memcpy(&v, p, 2); *uv = v; *is_unsigned = true; return 0; }
    case GGUF_TYPE_INT16: { int16_t v; memcpy(&v, p, 2); *iv = v; return 0; }
    case GGUF_TYPE_UINT32: { uint32_t v; memcpy(&v, p, 4); *uv = v; *is_unsigned = true; return 0; }
    case GGUF_TYPE_INT32: { int32_t v; memcpy(&v, p, 4); *iv = v; return 0; }
    case GGUF_TYPE_UINT64: { uint64_t v; memcpy(&v, p, 8); *uv = v; *is_unsigned = true; return 0; }
    case GGUF_TYPE_INT64: { int64_t v; memcpy(&v, p, 8); *iv = v; return 0; }
    case GGUF_TYPE_FLOAT32: { float v; memcpy(&v, p, 4); *dv = v; *is_int = false; return 0; }
    case GGUF_TYPE_FLOAT64: { double v; memcpy(&v, p, 8); *dv = v; *is_int = false; return 0; }
    default: return -EINVAL;
    }
}

/* An integer value within [lo, hi] (signed view) or [0, uhi] (unsigned). */
static int int_in_range(uint32_t t, const uint8_t *p, int64_t lo, uint64_t uhi, int64_t *ret_s,
                        uint64_t *ret_u)
{
    bool is_int, is_unsigned;
    int64_t iv = 0;
    uint64_t uv = 0;
    double dv;
    if (load_num(t, p, &is_int, &iv, &uv, &is_unsigned, &dv) < 0 || !is_int)
        return -EINVAL;
    if (is_unsigned) {
        if (uv > uhi)
            return -EINVAL;
        if (ret_s)
            *ret_s = (int64_t)uv;
        if (ret_u)
            *ret_u = uv;
        return 0;
    }
    if (iv < lo || (iv > 0 && (uint64_t)iv > uhi))
        return -EINVAL;
    if (ret_s)
        *ret_s = iv;
    if (ret_u)
        *ret_u = (uint64_t)iv;
    return 0;
}

int gguf_get_u32(const gguf_file *f, const char *key, uint32_t *ret)
{
    const struct gguf_kv *kv = kv_get(f, key);
    if (!kv)
        return -ENOENT;
    uint64_t u;
    if (int_in_range(kv->type, f->base + kv->off, 0, UINT32_MAX, NULL, &u) < 0)
        return -EINVAL;
    *ret = (uint32_t)u;
    return 0;
}

int gguf_get_i32(const gguf_file *f, const char *key, int32_t *ret)
{
    const struct gguf_kv *kv = kv_get(f, key);
    if (!kv)
        return -ENOENT;
    int64_t s;
    if (int_in_range(kv->type, f->base + kv->off, INT32_MIN, INT32_MAX, &s, NULL) < 0)
        return -EINVAL;
    *ret = (int32_t)s;
    return 0;
}

int gguf_get_u64(const gguf_file *f, const char *key, uint64_t *ret)
{
    const struct gguf_kv *kv = kv_get(f, key);
    if (!kv)
        return -ENOENT;
    uint64_t u;
    if (int_in_range(kv->type, f->base + kv->off, 0, UINT64_MAX, NULL, &u) < 0)
        return -EINVAL;
    *ret = u;
    return 0;
}

int gguf_get_f32(const gguf_file *f, const char *key, float *ret)
{
    const struct gguf_kv *kv = kv_get(f, key);
    if (!kv)
        return -ENOENT;
    if (kv->type == GGUF_TYPE_FLOAT32) {
        memcpy(ret, f->base + kv->off, 4);
        return 0;
    }
    if (kv->type == GGUF_TYPE_FLOAT64) {
        double d;
        memcpy(&d, f->base + kv->off, 8);
        *ret = (float)d;
        return 0;
    }
    return -EINVAL;
}

int gguf_get_bool(const gguf_file *f, const char *key, bool *ret)
{
    const struct gguf_kv *kv = kv_get(f, key);
    if (!kv)
        return -ENOENT;
    if (kv->type != GGUF_TYPE_BOOL)
        return -EINVAL;
    *ret = f->base[kv->off] != 0;
    return 0;
}

int gguf_get_str(const gguf_file *f, const char *key, const char **ret, size_t *ret_len)
{
    const struct gguf_kv *kv = kv_get(f, key);
    if (!kv)
        return -ENOENT;
    if (kv->type != GGUF_TYPE_STRING)
        return -EINVAL;
    *ret = (const char *)f->base + kv->off;
    *ret_len = (size_t)kv->n;
    return 0;
}

int gguf_get_arr_info(const gguf_file *f, const char *key, enum gguf_type *ret_elem_type,
                      uint64_t *ret_n)
{
    const struct gguf_kv *kv = kv_get(f, key);
    if (!kv)
        return -ENOENT;
    if (kv->type != GGUF_TYPE_ARRAY)
        return -EINVAL;
    if (ret_elem_type)
        *ret_elem_type = (enum gguf_type)kv->elem_type;
    if (ret_n)
        *ret_n = kv->n;
    return 0;
}

static const struct gguf_kv *arr_get(const gguf_file *f, const char *key, uint64_t i, int *ret)
{
    const struct gguf_kv *kv = kv_get(f, key);
    if (!kv) {
        *ret = -ENOENT;
        return NULL;
    }
    if (kv->type != GGUF_TYPE_ARRAY || i >= kv->n) {
        *ret = -EINVAL;
        return NULL;
    }
    return kv;
}

int gguf_get_arr_str(const gguf_file *f, const char *key, uint64_t i, const char **ret,
                     size_t *ret_len)
{
    int r = 0;
    const struct gguf_kv *kv = arr_get(f, key, i, &r);
    if (!kv)
        return r;
    if (kv->elem_type != GGUF_TYPE_STRING)
        return -EINVAL;
    uint64_t len;
    memcpy(&len, f->base + kv->str_off[i], 8);
    *ret = (const char *)f->base + kv->str_off[i] + 8;
    *ret_len = (size_t)len;
    return 0;
}

int gguf_get_arr_i32(const gguf_file *f, const char *key, uint64_t i, int32_t *ret)
{
    int r = 0;
    const struct gguf_kv *kv = arr_get(f, key, i, &r);
    if (!kv)
        return r;
    size_t sz = gtype_size(kv->elem_type);
    if (sz == 0)
        return -EINVAL;
    int64_t s;
    if (int_in_range(kv->elem_type, f->base + kv->off + (size_t)i * sz, INT32_MIN, INT32_MAX, &s,
                     NULL) < 0)
        return -EINVAL;
    *ret = (int32_t)s;
    return 0;
}

/* llama.cpp reads a bool array (a layer pattern) as integers: any
 * non-zero element is true, of a bool array or an integer one. */
int gguf_get_arr_bool(const gguf_file *f, const char *key, uint64_t i, bool *ret)
{
    int r = 0;
    const struct gguf_kv *kv = arr_get(f, key, i, &r);
    if (!kv)
        return r;
    if (kv->elem_type == GGUF_TYPE_BOOL) {
        *ret = f->base[kv->off + i] != 0;
        return 0;
    }
    int32_t v;
    if ((r = gguf_get_arr_i32(f, key, i, &v)) < 0)
        return r;
    *ret = v != 0;
    return 0;
}

int gguf_get_arr_f32(const gguf_file *f, const char *key, uint64_t i, float *ret)
{
    int r = 0;
    const struct gguf_kv *kv = arr_get(f, key, i, &r);
    if (!kv)
        return r;
    size_t sz = gtype_size(kv->elem_type);
    if (sz == 0 || kv->elem_type == GGUF_TYPE_BOOL)
        return -EINVAL;
    bool is_int, is_unsigned;
    int64_t iv = 0;
    uint64_t uv = 0;
    double dv = 0;
    if (load_num(kv->elem_type, f->base + kv->off + (size_t)i * sz, &is_int, &iv, &uv,
                 &is_unsigned, &dv) < 0)
        return -EINVAL;
    *ret = is_int ? (is_unsigned ? (float)uv : (float)iv) : (float)dv;
    return 0;
}

/* ---- tensors ---- */

size_t gguf_n_tensors(const gguf_file *f) { return f->n_tensors; }

const gguf_tensor *gguf_get_tensor(const gguf_file *f, size_t i)
{
    return i < f->n_tensors ? &f->tensors[i] : NULL;
}

const gguf_tensor *gguf_find_tensor(const gguf_file *f, const char *name)
{
    if (!name)
        return NULL;
    size_t lo = 0, hi = f->n_tensors;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        const gguf_tensor *t = &f->tensors[f->t_sorted[mid]];
        int c = strcmp(name, t->name);
        if (c == 0)
            return t;
        if (c < 0)
            hi = mid;
        else
            lo = mid + 1;
    }
    return NULL;
}

/* ---- writer ---- */

struct wkv {
    char *key;
    uint32_t type;
    uint8_t *val; /* the bytes that follow the type field in the file */
    size_t len;
};

struct wtensor {
    char *name;
    uint32_t type, n_dims;
    uint64_t ne[GGUF_MAX_DIMS];
    uint64_t nbytes, offset;
    void *data; /* owned copy; NULL for tensors declared for streaming */
};

struct gguf_writer {
    struct wkv *kv;
    size_t n_kv, cap_kv;
    struct wtensor *t;
    size_t n_t, cap_t;
    /* streaming state */
    FILE *fp;
    char *path, *tmp_path;
    size_t cur;         /* tensor whose data is being written */
    uint64_t cur_done;  /* bytes of it written so far */
    uint32_t alignment; /* in effect for the open stream */
    int error;          /* sticky error of the open stream */
};

int gguf_writer_new(gguf_writer **ret)
{
    gguf_writer *w = calloc(1, sizeof(*w));
    if (!w)
        return -ENOMEM;
    *ret = w;
    return 0;
}

static void stream_abort(gguf_writer *w)
{
    if (w->fp) {
        fclose(w->fp);
        w->fp = NULL;
        unlink(w->tmp_path);
    }
    free(w->path);
    free(w->tmp_path);
    w->path = w->tmp_path = NULL;
}

void gguf_writer_free(gguf_writer *w)
{
    if (!w)
        return;
    stream_abort(w);
    for (size_t i = 0; i < w->n_kv; i++) {
        free(w->kv[i].key);
        free(w->kv[i].val);
    }
    for (size_t i = 0; i < w->n_t; i++) {
        free(w->t[i].name);
        free(w->t[i].data);
    }
    free(w->kv);
    free(w->t);
    free(w);
}

/* Sets key to (type, val[0..len)); takes ownership of val, replaces an existing key. */
static int w_set(gguf_writer *w, const char *key, uint32_t type, uint8_t *val, size_t len)
{
    if (!w || !key || !key[0] || w->fp) {
        free(val);
        return -EINVAL;
    }
    for (size_t i = 0; i < w->n_kv; i++) {
        if (strcmp(w->kv[i].key, key) == 0) {
            free(w->kv[i].val);
            w->kv[i].type = type;
            w->kv[i].val = val;
            w->kv[i].len = len;
            return 0;
        }
    }
    if (w->n_kv == w->cap_kv) {
        size_t cap = w->cap_kv ? 2 * w->cap_kv : 16;
        struct wkv *n = realloc(w->kv, cap * sizeof(*n));
        if (!n) {
            free(val);
            return -ENOMEM;
        }
        w->kv = n;
        w->cap_kv = cap;
    }
    char *k = strdup(key);
    if (!k) {
        free(val);
        return -ENOMEM;
    }
    w->kv[w->n_kv++] = (struct wkv){.key = k, .type = type, .val = val, .len = len};
    return 0;
}

static int w_set_raw(gguf_writer *w, const char *key, uint32_t type, const void *v, size_t len)
{
    uint8_t *val = malloc(len ? len : 1);
    if (!val)
        return -ENOMEM;
    memcpy(val, v, len);
    return w_set(w, key, type, val, len);
}

int gguf_writer_set_u8(gguf_writer *w, const char *key, uint8_t v) { return w_set_raw(w, key, GGUF_TYPE_UINT8, &v, 1); }
int gguf_writer_set_i8(gguf_writer *w, const char *key, int8_t v) { return w_set_raw(w, key, GGUF_TYPE_INT8, &v, 1); }
int gguf_writer_set_u16(gguf_writer *w, const char *key, uint16_t v) { return w_set_raw(w, key, GGUF_TYPE_UINT16, &v, 2); }
int gguf_writer_set_i16(gguf_writer *w, const char *key, int16_t v) { return w_set_raw(w, key, GGUF_TYPE_INT16, &v, 2); }
int gguf_writer_set_u32(gguf_writer *w, const char *key, uint32_t v) { return w_set_raw(w, key, GGUF_TYPE_UINT32, &v, 4); }
int gguf_writer_set_i32(gguf_writer *w, const char *key, int32_t v) { return w_set_raw(w, key, GGUF_TYPE_INT32, &v, 4); }
int gguf_writer_set_u64(gguf_writer *w, const char *key, uint64_t v) { return w_set_raw(w, key, GGUF_TYPE_UINT64, &v, 8); }
int gguf_writer_set_i64(gguf_writer *w, const char *key, int64_t v) { return w_set_raw(w, key, GGUF_TYPE_INT64, &v, 8); }
int gguf_writer_set_f32(gguf_writer *w, const char *key, float v) { return w_set_raw(w, key, GGUF_TYPE_FLOAT32, &v, 4); }
int gguf_writer_set_f64(gguf_writer *w, const char *key, double v) { return w_set_raw(w, key, GGUF_TYPE_FLOAT64, &v, 8); }

int gguf_writer_set_bool(gguf_writer *w, const char *key, bool v)
{
    uint8_t b = v ? 1 : 0;
    return w_set_raw(w, key, GGUF_TYPE_BOOL, &b, 1);
}

int gguf_writer_set_str(gguf_writer *w, const char *key, const char *v)
{
    if (!v)
        return -EINVAL;
    uint64_t n = strlen(v);
    uint8_t *val = malloc(8 + (size_t)n);
    if (!val)
        return -ENOMEM;
    memcpy(val, &n, 8);
    memcpy(val + 8, v, (size_t)n);
    return w_set(w, key, GGUF_TYPE_STRING, val, 8 + (size_t)n);
}

int gguf_writer_set_arr_str(gguf_writer *w, const char *key, const char *const *v, size_t n)
{
    if (!v && n > 0)
        return -EINVAL;
    size_t len = 12;
    for (size_t i = 0; i < n; i++) {
        if (!v[i])
            return -EINVAL;
        size_t l = strlen(v[i]);
        if (l > SIZE_MAX - 8 - len)
            return -EOVERFLOW;
        len += 8 + l;
    }
    uint8_t *val = malloc(len);
    if (!val)
        return -ENOMEM;
    uint32_t et = GGUF_TYPE_STRING;
    uint64_t cnt = n;
    memcpy(val, &et, 4);
    memcpy(val + 4, &cnt, 8);
    size_t pos = 12;
    for (size_t i = 0; i < n; i++) {
        uint64_t l = strlen(v[i]);
        memcpy(val + pos, &l, 8);
        memcpy(val + pos + 8, v[i], (size_t)l);
        pos += 8 + (size_t)l;
    }
    return w_set(w, key, GGUF_TYPE_ARRAY, val, len);
}

int gguf_writer_set_arr(gguf_writer *w, const char *key, enum gguf_type elem_type, const void *v,
                        size_t n)
{
    size_t sz = gtype_size(elem_type);
    if (sz == 0 || (!v && n > 0))
        return -EINVAL;
    if (n > (SIZE_MAX - 12) / sz)
        return -EOVERFLOW;
    uint8_t *val = malloc(12 + n * sz);
    if (!val)
        return -ENOMEM;
    uint32_t et = elem_type;
    uint64_t cnt = n;
    memcpy(val, &et, 4);
    memcpy(val + 4, &cnt, 8);
    if (n)
        memcpy(val + 12, v, n * sz);
    return w_set(w, key, GGUF_TYPE_ARRAY, val, 12 + n * sz);
}

int gguf_writer_set_arr_i32(gguf_writer *w, const char *key, const int32_t *v, size_t n)
{
    return gguf_writer_set_arr(w, key, GGUF_TYPE_INT32, v, n);
}

int gguf_writer_set_arr_f32(gguf_writer *w, const char *key, const float *v, size_t n)
{
    return gguf_writer_set_arr(w, key, GGUF_TYPE_FLOAT32, v, n);
}

/* Shape checks shared by both ways of adding a tensor; returns its byte size. */
static int w_tensor_new(gguf_writer *w, const char *name, uint32_t type, uint32_t n_dims,
                        const uint64_t *ne, struct wtensor **ret)
{
    if (!w || !name || !name[0] || strlen(name) >= 64 || !ne || n_dims < 1 ||
        n_dims > GGUF_MAX_DIMS || !ggml_type_known(type) || w->fp)
        return -EINVAL; /* 64: ggml's GGML_MAX_NAME, so llama.cpp can load the file */
    uint64_t nel = 1;
    for (uint32_t d = 0; d < n_dims; d++) {
        if (ne[d] == 0 || ne[d] > (uint64_t)INT64_MAX / nel)
            return -EINVAL;
        nel *= ne[d];
    }
    size_t row = ggml_row_bytes(type, ne[0]);
    if (row == 0 || nel / ne[0] > SIZE_MAX / row)
        return -EINVAL;
    for (size_t i = 0; i < w->n_t; i++)
        if (strcmp(w->t[i].name, name) == 0)
            return -EEXIST;
    if (w->n_t == w->cap_t) {
        size_t cap = w->cap_t ? 2 * w->cap_t : 64;
        struct wtensor *n = realloc(w->t, cap * sizeof(*n));
        if (!n)
            return -ENOMEM;
        w->t = n;
        w->cap_t = cap;
    }
    struct wtensor *t = &w->t[w->n_t];
    memset(t, 0, sizeof(*t));
    t->name = strdup(name);
    if (!t->name)
        return -ENOMEM;
    t->type = type;
    t->n_dims = n_dims;
    for (int d = 0; d < GGUF_MAX_DIMS; d++)
        t->ne[d] = (uint32_t)d < n_dims ? ne[d] : 1;
    t->nbytes = (uint64_t)row * (nel / ne[0]);
    *ret = t;
    return 0;
}

int gguf_writer_add_tensor_info(gguf_writer *w, const char *name, uint32_t type, uint32_t n_dims,
                                const uint64_t *ne)
{
    struct wtensor *t;
    int r = w_tensor_new(w, name, type, n_dims, ne, &t);
    if (r < 0)
        return r;
    w->n_t++;
    return 0;
}

int gguf_writer_add_tensor(gguf_writer *w, const char *name, uint32_t type, uint32_t n_dims,
                           const uint64_t *ne, const void *data)
{
    if (!data)
        return -EINVAL;
    struct wtensor *t;
    int r = w_tensor_new(w, name, type, n_dims, ne, &t);
    if (r < 0)
        return r;
    t->data = malloc(t->nbytes ? (size_t)t->nbytes : 1);
    if (!t->data) {
        free(t->name);
        return -ENOMEM;
    }
    memcpy(t->data, data, (size_t)t->nbytes);
    w->n_t++;
    return 0;
}

static int w_put(gguf_writer *w, const void *p, size_t n)
{
    if (w->error)
        return w->error;
    if (n && fwrite(p, 1, n, w->fp) != n)
        w->error = errno ? -errno : -EIO;
    return w->error;
}

static int w_put_str(gguf_writer *w, const char *s)
{
    uint64_t n = strlen(s);
    w_put(w, &n, 8);
    return w_put(w, s, (size_t)n);
}

static int w_pad(gguf_writer *w, uint64_t pos)
{
    static const uint8_t zeros[256];
    uint64_t pad = (w->alignment - pos % w->alignment) % w->alignment;
    while (pad > 0) {
        size_t n = pad > sizeof(zeros) ? sizeof(zeros) : (size_t)pad;
        w_put(w, zeros, n);
        pad -= n;
    }
    return w->error;
}

/* After the current tensor is complete: pad it, move on to the next one. */
static void w_advance(gguf_writer *w)
{
    while (w->cur < w->n_t && w->cur_done == w->t[w->cur].nbytes) {
        w_pad(w, w->t[w->cur].nbytes);
        w->cur++;
        w->cur_done = 0;
    }
}

int gguf_writer_begin(gguf_writer *w, const char *path)
{
    if (!w || !path || w->fp)
        return -EINVAL;
    w->alignment = GGUF_DEFAULT_ALIGNMENT;
    for (size_t i = 0; i < w->n_kv; i++) {
        if (strcmp(w->kv[i].key, "general.alignment") == 0) {
            uint32_t a;
            if (w->kv[i].type != GGUF_TYPE_UINT32)
                return -EINVAL;
            memcpy(&a, w->kv[i].val, 4);
            if (a == 0 || (a & (a - 1)) != 0)
                return -EINVAL;
            w->alignment = a;
        }
    }
    /* Tensor data offsets: in order, each padded to the alignment (the layout
     * llama.cpp's reader expects). */
    uint64_t off = 0;
    for (size_t i = 0; i < w->n_t; i++) {
        w->t[i].offset = off;
        uint64_t padded = w->t[i].nbytes + (w->alignment - w->t[i].nbytes % w->alignment) % w->alignment;
        if (padded > UINT64_MAX - off)
            return -EOVERFLOW;
        off += padded;
    }
    size_t plen = strlen(path);
    w->path = strdup(path);
    w->tmp_path = malloc(plen + 5);
    if (!w->path || !w->tmp_path) {
        stream_abort(w);
        return -ENOMEM;
    }
    memcpy(w->tmp_path, path, plen);
    memcpy(w->tmp_path + plen, ".tmp", 5);
    w->fp = fopen(w->tmp_path, "wbx");
    if (!w->fp && errno == EEXIST) { /* a stale temporary from a crashed run */
        unlink(w->tmp_path);
        w->fp = fopen(w->tmp_path, "wbx");
    }
    if (!w->fp) {
        int e = errno;
        stream_abort(w);
        return -e;
    }
    setvbuf(w->fp, NULL, _IOFBF, 1 << 20);
    w->error = 0;
    w->cur = 0;
    w->cur_done = 0;

    uint64_t pos = 0;
    uint32_t magic = GGUF_MAGIC, version = 3;
    uint64_t n_t = w->n_t, n_kv = w->n_kv;
    w_put(w, &magic, 4);
    w_put(w, &version, 4);
    w_put(w, &n_t, 8);
    w_put(w, &n_kv, 8);
    pos += 24;
    for (size_t i = 0; i < w->n_kv; i++) {
        w_put_str(w, w->kv[i].key);
        w_put(w, &w->kv[i].type, 4);
        w_put(w, w->kv[i].val, w->kv[i].len);
        pos += 8 + strlen(w->kv[i].key) + 4 + w->kv[i].len;
    }
    for (size_t i = 0; i < w->n_t; i++) {
        const struct wtensor *t = &w->t[i];
        w_put_str(w, t->name);
        w_put(w, &t->n_dims, 4);
        w_put(w, t->ne, 8 * (size_t)t->n_dims);
        w_put(w, &t->type, 4);
        w_put(w, &t->offset, 8);
        pos += 8 + strlen(t->name) + 4 + 8 * t->n_dims + 4 + 8;
    }
    w_pad(w, pos);
    w_advance(w); /* zero-byte tensors cannot exist, but keep the invariant */
    if (w->error) {
        int e = w->error;
        stream_abort(w);
        return e;
    }
    return 0;
}

int gguf_writer_write_data(gguf_writer *w, const void *data, size_t n)
{
    if (!w || !w->fp || (!data && n > 0))
        return -EINVAL;
    if (w->error)
        return w->error;
    if (w->cur >= w->n_t || n > w->t[w->cur].nbytes - w->cur_done)
        return -EINVAL; /* more data than the declared tensors hold */
    w_put(w, data, n);
    w->cur_done += n;
    w_advance(w);
    return w->error;
}

int gguf_writer_end(gguf_writer *w)
{
    if (!w || !w->fp)
        return -EINVAL;
    int ret = w->error;
    if (!ret && w->cur != w->n_t)
        ret = -EINVAL; /* some tensor data missing */
    if (!ret && fflush(w->fp) != 0)
        ret = errno ? -errno : -EIO;
    if (ret) {
        stream_abort(w);
        return ret;
    }
    FILE *fp = w->fp;
    w->fp = NULL;
    if (fclose(fp) != 0) {
        ret = errno ? -errno : -EIO;
        unlink(w->tmp_path);
    } else if (rename(w->tmp_path, w->path) != 0) {
        ret = -errno;
        unlink(w->tmp_path);
    }
    stream_abort(w); /* frees the paths */
    return ret;
}

int gguf_writer_write(gguf_writer *w, const char *path)
{
    if (!w)
        return -EINVAL;
    for (size_t i = 0; i < w->n_t; i++)
        if (!w->t[i].data)
            return -EINVAL; /* declared for streaming: use begin/write_data/end */
    int ret = gguf_writer_begin(w, path);
    if (ret < 0)
        return ret;
    for (size_t i = 0; i < w->n_t && ret == 0; i++)
        ret = gguf_writer_write_data(w, w->t[i].data, (size_t)w->t[i].nbytes);
    if (ret < 0) {
        stream_abort(w);
        return ret;
    }
    return gguf_writer_end(w);
}
