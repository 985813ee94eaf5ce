/* JSON output (private to the engine): a byte-at-a-time recognizer of the
 * prefixes of one JSON object (RFC 8259), so that generation with
 * ENG_FORMAT_JSON keeps only tokens whose bytes continue a valid document
 * and ends where the object closes. It is a pushdown automaton over a
 * bounded stack; its whole state is this struct, so a candidate token is
 * tried on a copy.
 *
 * Bounds that a grammar leaves open and a model could exploit to never
 * finish: nesting deeper than ENG__JSON_DEPTH is refused, and so is a run of
 * more than ENG__JSON_WS whitespace bytes between tokens (llama.cpp's JSON
 * grammar allows 20 after a newline). Strings accept any byte from 0x20 up
 * (UTF-8 is not checked: a character may arrive split over tokens); control
 * bytes must be escaped, as the RFC says.
 *
 *     eng__json j;
 *     eng__json_init(&j);
 *     if (eng__json_feed(&j, piece, n) < 0) ... reject the token
 *     if (eng__json_done(&j)) ... the object is complete
 */
#ifndef ENGINE_JSON_H
#define ENGINE_JSON_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define ENG__JSON_DEPTH 32
#define ENG__JSON_WS 24

typedef struct eng__json {
    uint8_t state;   /* what the next byte may be (json.c) */
    uint8_t depth;   /* open containers */
    uint8_t lit;     /* true/false/null: the literal, and ... */
    uint8_t lit_pos; /* ... the bytes of it seen */
    uint8_t ws;      /* whitespace bytes in a row */
    uint8_t hex;     /* \uXXXX: hex digits still due */
    bool key;        /* the string being read is an object's key */
    char stack[ENG__JSON_DEPTH]; /* '{' or '[' per open container */
} eng__json;

void eng__json_init(eng__json *j);

/* Feeds bytes[0..n). Returns 0 when every byte continues a valid prefix, or
 * -EILSEQ at the first that does not; j is then left in an unspecified state
 * (feed a copy to try a token). */
int eng__json_feed(eng__json *j, const char *bytes, size_t n);

/* Whether the object is complete: any further byte is refused. */
bool eng__json_done(const eng__json *j);

/* ---- whole documents -----------------------------------------------------
 *
 * Tool definitions and tool calls arrive as JSON text and go into prompts
 * the way the chat templates print them: Python's json.dumps(v,
 * ensure_ascii=False) (Hugging Face's tojson), i.e. ", " and ": " between
 * items, strings re-escaped (only '"', '\\' and control characters),
 * integers as written, other numbers in Python's repr (shortest digits
 * that read back, 1e+16 / 1e-05 outside [1e-4, 1e16), 1.0 for whole
 * values). Members keep their order; a duplicate key is kept as written
 * (Python would keep its last value in the first place). */

/* Receives the output of eng__json_value(). */
typedef void (*eng__json_put)(void *ctx, const char *bytes, size_t n);

/* Reads one value at the start of [s, s + n) (leading whitespace skipped;
 * nesting at most ENG__JSON_DEPTH * 2 deep) and passes it in the form
 * above to put (NULL: only check). Returns the bytes read up to the
 * value's end, or -EINVAL when there is no valid value there. */
int64_t eng__json_value(const char *s, size_t n, eng__json_put put, void *ctx);

/* The same in json.dumps(v, indent=N)'s layout (1 <= N <= 16): each item
 * on its own line, N spaces deeper per level, "," and ": " between; empty
 * containers stay [] and {}. */
int64_t eng__json_value_indent(const char *s, size_t n, int indent, eng__json_put put, void *ctx);

/* Writes the bytes [s, s + n) as a JSON string in json.dumps form (the
 * quotes, '"', '\\' and control bytes escaped, the rest as it is). */
void eng__json_quote(const char *s, size_t n, eng__json_put put, void *ctx);

/* The members of the object, or the elements of the array, [s, s + n):
 * *pos = 0 first; each call returns 1 with the next item's value span
 * (*val, *val_len) and, for an object, its key as written with the
 * quotes (*key, *key_len; NULL for an array), 0 after the last, or
 * -EINVAL where the text is not a valid container. */
int eng__json_next(const char *s, size_t n, size_t *pos, const char **key, size_t *key_len,
                   const char **val, size_t *val_len);

/* Whether a key as eng__json_next() gives it equals want once unescaped. */
bool eng__json_key_is(const char *key, size_t key_len, const char *want);

/* The string value [s, s + n) unescaped into a malloc'd NUL-terminated
 * UTF-8 string: -EINVAL when it is not one string (or holds \u0000),
 * -ENOMEM. */
int eng__json_unquote(const char *s, size_t n, char **ret);

#endif
