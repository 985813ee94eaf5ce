/* GGUF reader and writer (private to the engine).
 *
 * The reader maps the file read-only and distrusts every byte: magic and
 * version are checked, every count is bounded by the file size and SIZE_MAX,
 * strings and arrays must lie inside the file, keys must be unique, tensor
 * data must be aligned, inside the data section and not overlap. All parsing
 * happens in gguf_open(); accessors never read past what was validated.
 *
 * Multi-byte values in the mapping may be unaligned: read them with memcpy
 * (the accessors do).
 */
#ifndef ENGINE_GGUF_H
#define ENGINE_GGUF_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "engine.h"

enum gguf_type {
    GGUF_TYPE_UINT8 = 0,
    GGUF_TYPE_INT8 = 1,
    GGUF_TYPE_UINT16 = 2,
    GGUF_TYPE_INT16 = 3,
    GGUF_TYPE_UINT32 = 4,
    GGUF_TYPE_INT32 = 5,
    GGUF_TYPE_FLOAT32 = 6,
    GGUF_TYPE_BOOL = 7,
    GGUF_TYPE_STRING = 8,
    GGUF_TYPE_ARRAY = 9,
    GGUF_TYPE_UINT64 = 10,
    GGUF_TYPE_INT64 = 11,
    GGUF_TYPE_FLOAT64 = 12,
    GGUF_TYPE_COUNT
};

/* Tensor element types, numbered as ggml numbers them. */
enum ggml_type {
    GGML_TYPE_F32 = 0,
    GGML_TYPE_F16 = 1,
    GGML_TYPE_Q4_0 = 2,
    GGML_TYPE_Q4_1 = 3,
    GGML_TYPE_Q5_0 = 6,
    GGML_TYPE_Q5_1 = 7,
    GGML_TYPE_Q8_0 = 8,
    GGML_TYPE_Q8_1 = 9,
    GGML_TYPE_Q2_K = 10,
    GGML_TYPE_Q3_K = 11,
    GGML_TYPE_Q4_K = 12,
    GGML_TYPE_Q5_K = 13,
    GGML_TYPE_Q6_K = 14,
    GGML_TYPE_Q8_K = 15,
    GGML_TYPE_IQ4_NL = 20,
    GGML_TYPE_IQ4_XS = 23,
    GGML_TYPE_BF16 = 30,
    GGML_TYPE_MXFP4 = 39,
};

/* The block type whose bytes an engine weight type's are: the file's
 * quantizers and dequantizers read and write engine rows through it. */
static inline uint32_t ggml_type_of_dtype(eng_dtype dt)
{
    return dt == ENG_DTYPE_Q8_0    ? GGML_TYPE_Q8_0
           : dt == ENG_DTYPE_Q4_K  ? GGML_TYPE_Q4_K
           : dt == ENG_DTYPE_Q6_K  ? GGML_TYPE_Q6_K
           : dt == ENG_DTYPE_Q5_K  ? GGML_TYPE_Q5_K
           : dt == ENG_DTYPE_Q4_1  ? GGML_TYPE_Q4_1
           : dt == ENG_DTYPE_Q4_0  ? GGML_TYPE_Q4_0
           : dt == ENG_DTYPE_MXFP4 ? GGML_TYPE_MXFP4
           : dt == ENG_DTYPE_F32   ? GGML_TYPE_F32
                                   : GGML_TYPE_F16;
}

#define GGUF_MAX_DIMS 4
#define GGUF_DEFAULT_ALIGNMENT 32

typedef struct gguf_file gguf_file;

typedef struct gguf_tensor {
    const char *name;          /* NUL-terminated copy */
    uint32_t type;             /* enum ggml_type (any value; check with ggml_type_known) */
    uint32_t n_dims;
    uint64_t ne[GGUF_MAX_DIMS]; /* ne[0] is the row length (contiguous), unused dims are 1 */
    uint64_t offset;           /* relative to the data section */
    uint64_t nbytes;
    const void *data;          /* inside the mapping (gguf_open rejects types it cannot size) */
} gguf_tensor;

/* Opens and validates a file. On failure returns -errno and writes a message
 * naming the problem ("truncated: tensor info 12 ends at byte N of M") to err
 * (err may be NULL). A tensor of a type the engine cannot convert
 * (!ggml_type_known) fails the open: "tensor 'x' has unsupported type 16 (IQ2_XXS)". */
int gguf_open(const char *path, gguf_file **ret_file, eng_error *err);
/* The same over a caller's buffer (for the fuzzer and tests); buf must stay valid. */
int gguf_open_buffer(const void *buf, size_t size, gguf_file **ret_file, eng_error *err);
void gguf_close(gguf_file *file);

uint32_t gguf_version(const gguf_file *file);
size_t gguf_file_size(const gguf_file *file);
const void *gguf_file_data(const gguf_file *file); /* start of the mapping */
/* [p, p + len) of the mapping will not be read again soon: its whole pages
 * leave the process's resident set (a later read brings them back from
 * the page cache). Nothing for a buffer's file or a range outside it. */
void gguf_release(const gguf_file *file, const void *p, size_t len);

/* ---- key/value metadata ---- */
size_t gguf_n_kv(const gguf_file *file);
int gguf_find_key(const gguf_file *file, const char *key); /* index or -1 */
const char *gguf_key_name(const gguf_file *file, int i);
enum gguf_type gguf_key_type(const gguf_file *file, int i);

/* Typed getters by key name. -ENOENT missing, -EINVAL wrong type or out of
 * range. Integer getters accept any integer type whose value fits. */
int gguf_get_u32(const gguf_file *file, const char *key, uint32_t *ret);
int gguf_get_i32(const gguf_file *file, const char *key, int32_t *ret);
int gguf_get_u64(const gguf_file *file, const char *key, uint64_t *ret);
int gguf_get_f32(const gguf_file *file, const char *key, float *ret); /* f32 or f64 */
int gguf_get_bool(const gguf_file *file, const char *key, bool *ret);
/* String value: points into the mapping, NOT NUL-terminated. */
int gguf_get_str(const gguf_file *file, const char *key, const char **ret, size_t *ret_len);

/* Arrays. elem type and count; numeric element i converted to the asked type. */
int gguf_get_arr_info(const gguf_file *file, const char *key, enum gguf_type *ret_elem_type, uint64_t *ret_n);
int gguf_get_arr_str(const gguf_file *file, const char *key, uint64_t i, const char **ret, size_t *ret_len);
int gguf_get_arr_i32(const gguf_file *file, const char *key, uint64_t i, int32_t *ret);
int gguf_get_arr_f32(const gguf_file *file, const char *key, uint64_t i, float *ret);
/* bool, or integer (non-zero: true) */
int gguf_get_arr_bool(const gguf_file *file, const char *key, uint64_t i, bool *ret);

/* ---- tensors ---- */
size_t gguf_n_tensors(const gguf_file *file);
const gguf_tensor *gguf_get_tensor(const gguf_file *file, size_t i);
const gguf_tensor *gguf_find_tensor(const gguf_file *file, const char *name);

/* ---- ggml type traits ---- */
bool ggml_type_known(uint32_t type);             /* one the engine can convert */
const char *ggml_type_name(uint32_t type);       /* "Q4_K", or "unknown" */
size_t ggml_type_block_elems(uint32_t type);      /* 32 for Q4_0, 256 for Q4_K, 1 for F32 */
size_t ggml_type_block_bytes(uint32_t type);
/* Bytes of a row of n elements; 0 when n is not a whole number of blocks. */
size_t ggml_row_bytes(uint32_t type, uint64_t n);

/* ---- writer (synthetic models, tests) ----
 * Collects metadata and tensors in memory and writes a GGUF v3 file laid out
 * as llama.cpp writes them (tensor data in order, each padded to
 * general.alignment, default 32). Setting a key twice replaces its value.
 * Files are written to "<path>.tmp" and renamed into place on success.
 *
 * Two ways to provide tensor data:
 *   in memory:  gguf_writer_add_tensor() for each tensor, then gguf_writer_write();
 *   streaming:  gguf_writer_add_tensor_info() for each tensor (shapes only),
 *               gguf_writer_begin(path) writes the header, then the tensors'
 *               bytes go out in declaration order through any number of
 *               gguf_writer_write_data() calls (a call may not cross the end of
 *               the current tensor; padding is inserted automatically), and
 *               gguf_writer_end() checks that every tensor was completed and
 *               renames the file into place. gguf_writer_free() of an
 *               unfinished stream removes the temporary file.
 * Metadata and tensors cannot be added once a stream has begun.
 * Tensor names must be shorter than 64 bytes (llama.cpp's limit); the type
 * must be ggml_type_known() and ne[0] a whole number of blocks. */
typedef struct gguf_writer gguf_writer;

int gguf_writer_new(gguf_writer **ret);
void gguf_writer_free(gguf_writer *w);
int gguf_writer_set_u32(gguf_writer *w, const char *key, uint32_t v);
int gguf_writer_set_i32(gguf_writer *w, const char *key, int32_t v);
int gguf_writer_set_f32(gguf_writer *w, const char *key, float v);
int gguf_writer_set_bool(gguf_writer *w, const char *key, bool v);
int gguf_writer_set_str(gguf_writer *w, const char *key, const char *v);
int gguf_writer_set_arr_str(gguf_writer *w, const char *key, const char *const *v, size_t n);
int gguf_writer_set_arr_i32(gguf_writer *w, const char *key, const int32_t *v, size_t n);
int gguf_writer_set_arr_f32(gguf_writer *w, const char *key, const float *v, size_t n);
int gguf_writer_set_u8(gguf_writer *w, const char *key, uint8_t v);
int gguf_writer_set_i8(gguf_writer *w, const char *key, int8_t v);
int gguf_writer_set_u16(gguf_writer *w, const char *key, uint16_t v);
int gguf_writer_set_i16(gguf_writer *w, const char *key, int16_t v);
int gguf_writer_set_u64(gguf_writer *w, const char *key, uint64_t v);
int gguf_writer_set_i64(gguf_writer *w, const char *key, int64_t v);
int gguf_writer_set_f64(gguf_writer *w, const char *key, double v);
/* Array of any fixed-size element type (not string/array); v holds n values
 * in host (little-endian) layout. */
int gguf_writer_set_arr(gguf_writer *w, const char *key, enum gguf_type elem_type, const void *v,
                        size_t n);
/* Copies data (ggml_row_bytes(type, ne[0]) * rows bytes). */
int gguf_writer_add_tensor(gguf_writer *w, const char *name, uint32_t type, uint32_t n_dims,
                           const uint64_t *ne, const void *data);
int gguf_writer_write(gguf_writer *w, const char *path);
/* Streaming (see above). -EEXIST for a duplicate tensor name. */
int gguf_writer_add_tensor_info(gguf_writer *w, const char *name, uint32_t type, uint32_t n_dims,
                                const uint64_t *ne);
int gguf_writer_begin(gguf_writer *w, const char *path);
int gguf_writer_write_data(gguf_writer *w, const void *data, size_t n);
int gguf_writer_end(gguf_writer *w);

#endif
