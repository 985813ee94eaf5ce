/* libFuzzer target for what clients send as JSON: the JSON Schema compiler
 * and recognizer (format = {schema}), the whole-document reader and the
 * streaming recognizer (tools, format = json). Not built by meson nor run
 * in CI; build and run it by hand with clang:
 *
 *   clang -g -O1 -D_GNU_SOURCE -fsanitize=fuzzer,address,undefined \
 *       -fno-sanitize-recover=all -Iengine tests/fuzz-jschema.c \
 *       engine/json.c engine/jschema.c -lm -o /tmp/fuzz-jschema
 *   /tmp/fuzz-jschema -max_len=2048 -max_total_time=600 CORPUS_DIR
 *
 * The first byte picks what runs (mod 4): 0 the document reader, its
 * indented form and the member walk; 1 the streaming recognizer, a byte at
 * a time; 2 and 3 a schema (up to the first 0x01 byte) compiled, then the
 * rest fed to its recognizer a byte at a time (3: also the whole rest at
 * each step). Seeds: a few schemas of tests/test-jschema.c, each followed
 * by 0x01 and a document. Two bugs it found (a \u escape's overflow, a
 * count past UINT32_MAX) are tests in test-jschema.c. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "jschema.h"
#include "json.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void sink(void *ctx, const char *bytes, size_t n)
{
    volatile char *acc = ctx;
    for (size_t i = 0; i < n; i++)
        *acc ^= bytes[i];
}

/* every member and element, nested, with keys and strings unquoted */
static void walk(const char *s, size_t n, int depth)
{
    size_t pos = 0, kl, vl;
    const char *k, *v;
    while (depth < 40 && eng__json_next(s, n, &pos, &k, &kl, &v, &vl) == 1) {
        char *u = NULL;
        if (k && eng__json_unquote(k, kl, &u) == 0)
            free(u);
        if (k)
            (void)eng__json_key_is(k, kl, "type");
        if (vl && (v[0] == '{' || v[0] == '['))
            walk(v, vl, depth + 1);
        else if (vl && v[0] == '"' && eng__json_unquote(v, vl, &u) == 0)
            free(u);
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1)
        return 0;
    const int mode = data[0] % 4;
    size--;
    /* a heap copy of exactly the input: an over-read shows */
    char *buf = malloc(size ? size : 1);
    if (!buf)
        return 0;
    memcpy(buf, data + 1, size);
    char acc = 0;
    if (mode == 0) {
        const int64_t n = eng__json_value(buf, size, sink, &acc);
        if (n >= 0) {
            (void)eng__json_value_indent(buf, size, 2, sink, &acc);
            walk(buf, (size_t)n, 0);
        }
        eng__json_quote(buf, size, sink, &acc);
    } else if (mode == 1) {
        eng__json j;
        eng__json_init(&j);
        for (size_t i = 0; i < size; i++) {
            eng__json t = j;
            if (eng__json_feed(&t, buf + i, 1) == 0)
                j = t;
        }
        (void)eng__json_done(&j);
    } else {
        const char *sep = memchr(buf, 1, size);
        const size_t sl = sep ? (size_t)(sep - buf) : size;
        eng__jschema *s = NULL;
        char msg[256];
        if (eng__jschema_compile(buf, sl, &s, msg, sizeof(msg)) == 0) {
            const char *in = sep ? sep + 1 : buf + size;
            const size_t il = sep ? size - sl - 1 : 0;
            eng__jsr r;
            eng__jsr_init(&r, s);
            for (size_t i = 0; i < il; i++) {
                eng__jsr t = r;
                if (eng__jsr_feed(&t, in + i, 1) == 0)
                    r = t;
                t = r;
                if (mode == 3 && eng__jsr_feed(&t, in + i, il - i) == 0)
                    r = t;
            }
            (void)eng__jsr_done(&r);
            eng__jschema_free(s);
        }
    }
    free(buf);
    return 0;
}
