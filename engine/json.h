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

#endif
