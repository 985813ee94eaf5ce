/* UTF-8 encoding, shared by the tokenizer and the JSON readers (private to
 * the engine). */
#ifndef ENGINE_UTF8_H
#define ENGINE_UTF8_H

#include <stddef.h>
#include <stdint.h>

/* Writes code point cp (below 0x110000; surrogates are written as three
 * bytes, as WTF-8 does) to out[0..4); returns the bytes written. */
static inline size_t eng__utf8_encode(uint32_t cp, char *out)
{
    if (cp < 0x80) {
        out[0] = (char)cp;
        return 1;
    }
    if (cp < 0x800) {
        out[0] = (char)(0xc0 | (cp >> 6));
        out[1] = (char)(0x80 | (cp & 0x3f));
        return 2;
    }
    if (cp < 0x10000) {
        out[0] = (char)(0xe0 | (cp >> 12));
        out[1] = (char)(0x80 | ((cp >> 6) & 0x3f));
        out[2] = (char)(0x80 | (cp & 0x3f));
        return 3;
    }
    out[0] = (char)(0xf0 | (cp >> 18));
    out[1] = (char)(0x80 | ((cp >> 12) & 0x3f));
    out[2] = (char)(0x80 | ((cp >> 6) & 0x3f));
    out[3] = (char)(0x80 | (cp & 0x3f));
    return 4;
}

#endif
