/* Text side of generation (private to the engine): turns the bytes of
 * generated tokens into the text a client may see.
 *
 * Tokens are byte sequences: a UTF-8 character can be split over tokens, and
 * a stop string can be split over tokens or begin inside one. The stream
 * therefore keeps a pending buffer and releases only text that
 *   - does not end inside a UTF-8 sequence (eng_utf8_complete_prefix), and
 *   - cannot be the beginning of a stop string (the longest suffix that is a
 *     proper prefix of some stop string is held back).
 * When a stop string occurs in the pending bytes, the text before its
 * earliest occurrence is released and the stream is finished; the stop
 * string and anything after it are dropped. Held text that turns out not to
 * start a stop string is released as soon as that is known.
 *
 * Separate from eng_generate() so it can be tested without a model.
 *
 *     eng__textstream t;
 *     eng__text_init(&t, stop, n_stop);
 *     for each token: r = eng__text_push(&t, piece, n, &text, &len);
 *                     emit(text, len); if (r == 1) break;   // stop string
 *     if no stop string: eng__text_finish(&t, &text, &len); emit(text, len);
 *     eng__text_free(&t);
 */
#ifndef ENGINE_GENERATE_H
#define ENGINE_GENERATE_H

#include <stdbool.h>
#include <stddef.h>

/* Caps on what a request may ask for (the stream compares every stop string
 * against every token's bytes). */
#define ENG__STOP_MAX_COUNT 64
#define ENG__STOP_MAX_LEN 1024

typedef struct eng__textstream {
    const char *const *stop; /* borrowed: must outlive the stream */
    size_t n_stop;
    size_t stop_len[ENG__STOP_MAX_COUNT]; /* 0: an empty stop string, ignored */
    size_t max_stop_len;
    char *pend; /* bytes not yet released */
    size_t n_pend, cap_pend;
    char *out; /* released text of the last call, NUL-terminated */
    size_t cap_out;
    bool done; /* a stop string matched, or finish was called */
} eng__textstream;

/* -EINVAL: stop NULL with n_stop > 0, a NULL string, more than
 * ENG__STOP_MAX_COUNT strings or one longer than ENG__STOP_MAX_LEN bytes.
 * Empty stop strings are ignored. */
int eng__text_init(eng__textstream *t, const char *const *stop, size_t n_stop);
void eng__text_free(eng__textstream *t);

/* Appends bytes[0..n). *ret_text / *ret_len receive the text released by this
 * call (possibly empty; NUL-terminated; valid until the next call).
 * Returns 1 when a stop string matched (the stream is done), 0 otherwise,
 * -ENOMEM, or -EINVAL (bad arguments, or the stream is already done). */
int eng__text_push(eng__textstream *t, const char *bytes, size_t n,
                   const char **ret_text, size_t *ret_len);

/* End of generation without a stop string: releases everything still held.
 * An incomplete UTF-8 sequence at the very end becomes one U+FFFD, so the
 * stream's output never ends inside a character (the wire protocol carries
 * text as protobuf strings, which must be UTF-8). Returns 0, -ENOMEM, or
 * -EINVAL when the stream is already done. */
int eng__text_finish(eng__textstream *t, const char **ret_text, size_t *ret_len);

#endif
