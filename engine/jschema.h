/* JSON Schema output (private to the engine): a schema compiled into a
 * tree of value nodes, and a byte-at-a-time recognizer of the prefixes of
 * the documents it admits, so that generation keeps only tokens whose bytes
 * continue one (Ollama's `format: {schema}`, llama.cpp's json_schema).
 *
 * The subset, chosen to be enforced exactly rather than approximately:
 *   type        object (with properties), array (with items), string,
 *               number, integer, boolean, null, or a list of these
 *   properties  emitted in the schema's order; those in `required` must
 *               appear, the others may be left out; no other keys
 *               (additionalProperties absent or false)
 *   items, minItems, maxItems
 *   enum, const strings, true, false, null (not numbers: "1" is a prefix
 *               of "10", so a number's end would be unknown)
 *   anyOf, oneOf alternatives that begin with different bytes (string,
 *               number, object, array, boolean, null: pydantic's Optional)
 *   $ref        "#/$defs/NAME" or "#/definitions/NAME", not recursive
 * Keywords that would change which documents are valid in ways this cannot
 * follow (allOf, not, if, patternProperties, prefixItems, an object without
 * properties, additionalProperties other than false, ...) are refused with
 * -ENOTSUP naming them; assertions on values (minimum, maxLength, pattern,
 * format, ...) and annotations (title, description, ...) are not enforced.
 * The root is an object or an array, so the document's end is its closer.
 *
 *     eng__jschema *s;
 *     if (eng__jschema_compile(text, len, &s, msg, sizeof(msg)) < 0) ...
 *     eng__jsr r;
 *     eng__jsr_init(&r, s);
 *     if (eng__jsr_feed(&r, piece, n) < 0) ... reject the token
 *     if (eng__jsr_done(&r)) ... the document is complete
 */
#ifndef ENGINE_JSCHEMA_H
#define ENGINE_JSCHEMA_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "json.h"

#define ENG__JS_TEXT_MAX (1u << 20) /* schema bytes */
#define ENG__JS_ALT_MAX 64          /* properties of an object, values of an enum */

typedef struct eng__jschema eng__jschema;

/* -EINVAL: not JSON, or not a schema; -ENOTSUP: outside the subset; msg
 * (cap bytes) says where. -ENOMEM. */
int eng__jschema_compile(const char *text, size_t len, eng__jschema **ret, char *msg, size_t cap);
void eng__jschema_free(eng__jschema *s);

/* The recognizer's whole state: tried on a copy for each candidate token. */
typedef struct eng__jsr {
    const eng__jschema *s;
    uint8_t st;       /* what the next byte may be (jschema.c) */
    uint8_t depth;    /* open containers */
    uint8_t ws;       /* whitespace bytes in a row */
    uint8_t hex;      /* \uXXXX: hex digits still due */
    uint16_t node;    /* the value due or being read */
    uint16_t pos;     /* bytes of a literal or key matched */
    uint32_t base;    /* alternatives: the first one bit 0 stands for */
    uint64_t alive;   /* alternatives still matching */
    struct {
        uint16_t node; /* the container's */
        uint16_t idx;  /* object: the next property that may come; array: items so far */
    } fr[ENG__JSON_DEPTH];
} eng__jsr;

void eng__jsr_init(eng__jsr *r, const eng__jschema *s);
/* 0 when every byte continues a valid prefix, else -EILSEQ (r is then in
 * an unspecified state: feed a copy to try a token). */
int eng__jsr_feed(eng__jsr *r, const char *bytes, size_t n);
bool eng__jsr_done(const eng__jsr *r);

#endif
