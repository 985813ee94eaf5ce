/* libFuzzer target for the GGUF reader. Not built by meson nor run in CI;
 * build and run it by hand with clang:
 *
 *   clang -g -O1 -D_GNU_SOURCE -fsanitize=fuzzer,address,undefined -Iengine \
 *       tests/fuzz-gguf.c engine/gguf.c engine/quants.c -lm -o /tmp/fuzz-gguf
 *   /tmp/fuzz-gguf -max_len=4096 -max_total_time=600 CORPUS_DIR
 *
 * A good seed corpus: a few files from `si-synth --shape tiny`, cut to their
 * first few KiB. Every input is opened from a heap copy of exactly its size;
 * accepted files are walked through the accessors (string arrays, tensor
 * data, dequantization of the first row) so that an out-of-bounds read in
 * any of them shows up, not just in the parser. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "gguf.h"
#include "quants.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    uint8_t *copy = malloc(size ? size : 1);
    if (!copy)
        return 0;
    memcpy(copy, data, size);
    gguf_file *f = NULL;
    eng_error err;
    if (gguf_open_buffer(copy, size, &f, &err) == 0) {
        for (size_t i = 0; i < gguf_n_kv(f); i++) {
            const char *key = gguf_key_name(f, (int)i);
            enum gguf_type et;
            uint64_t n;
            const char *s;
            size_t len;
            uint32_t u;
            float fl;
            gguf_get_u32(f, key, &u);
            gguf_get_f32(f, key, &fl);
            gguf_get_str(f, key, &s, &len);
            if (gguf_get_arr_info(f, key, &et, &n) == 0) {
                for (uint64_t j = 0; j < n && j < 1024; j++) {
                    int32_t v;
                    gguf_get_arr_str(f, key, j, &s, &len);
                    gguf_get_arr_i32(f, key, j, &v);
                    gguf_get_arr_f32(f, key, j, &fl);
                }
            }
        }
        for (size_t i = 0; i < gguf_n_tensors(f); i++) {
            const gguf_tensor *t = gguf_get_tensor(f, i);
            if (gguf_find_tensor(f, t->name) != t)
                abort();
            if (t->ne[0] <= 4096) {
                float row[4096];
                eng_dequant_row_f32(t->type, t->data, row, (size_t)t->ne[0]);
            }
        }
        gguf_close(f);
    }
    free(copy);
    return 0;
}
