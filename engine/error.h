/* Filling an eng_error: the one helper every engine file reports through. */
#ifndef ENGINE_ERROR_H
#define ENGINE_ERROR_H

#include "engine.h"

/* Writes the message (printf format) into err when err is not NULL, and
 * returns code, so that a failure reads `return eng__set_err(err, -EINVAL,
 * "...", ...)`. */
int eng__set_err(eng_error *err, int code, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

#endif
