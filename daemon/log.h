/* Logging of selectinferd: one line per message on stderr, prefixed with its
 * syslog priority ("<3>" error, "<4>" warning, "<6>" info, "<7>" debug) so
 * that journald files each line under the right priority and a terminal
 * still reads well. Thread-safe (one write per line). */
#ifndef SID_LOG_H
#define SID_LOG_H

#include <stdbool.h>

enum {
    SID_LOG_ERR = 3,
    SID_LOG_WARNING = 4,
    SID_LOG_INFO = 6,
    SID_LOG_DEBUG = 7,
};

void sid_log_set_level(int level);
int sid_log_get_level(void);
/* "err", "warning", "info", "debug" (or 3, 4, 6, 7) -> level; -1 if unknown. */
int sid_log_level_parse(const char *s);

void sid_log(int prio, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* Logs at prio the first time *once is false (then sets it), at debug after:
 * a cap that is hit again and again is reported once, not flooded. */
void sid_log_once(bool *once, int prio, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

#define sid_err(...) sid_log(SID_LOG_ERR, __VA_ARGS__)
#define sid_warn(...) sid_log(SID_LOG_WARNING, __VA_ARGS__)
#define sid_info(...) sid_log(SID_LOG_INFO, __VA_ARGS__)
#define sid_debug(...) sid_log(SID_LOG_DEBUG, __VA_ARGS__)

#endif
