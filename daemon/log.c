#include "log.h"

#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static atomic_int log_level = SID_LOG_INFO;

void sid_log_set_level(int level)
{
    atomic_store(&log_level, level);
}

int sid_log_get_level(void)
{
    return atomic_load(&log_level);
}

int sid_log_level_parse(const char *s)
{
    static const struct { const char *name; int level; } names[] = {
        {"err", SID_LOG_ERR}, {"error", SID_LOG_ERR}, {"warning", SID_LOG_WARNING},
        {"warn", SID_LOG_WARNING}, {"notice", 5}, {"info", SID_LOG_INFO}, {"debug", SID_LOG_DEBUG},
    };
    for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++)
        if (strcmp(s, names[i].name) == 0)
            return names[i].level;
    if (s[0] >= '0' && s[0] <= '7' && s[1] == '\0')
        return s[0] - '0';
    return -1;
}

static void vlog(int prio, const char *fmt, va_list ap)
{
    if (prio > atomic_load(&log_level))
        return;
    char line[1024];
    int n = snprintf(line, sizeof(line), "<%d>", prio);
    int m = vsnprintf(line + n, sizeof(line) - (size_t)n - 1, fmt, ap);
    size_t len = (size_t)n + (m < 0 ? 0 : (size_t)m);
    if (len > sizeof(line) - 2)
        len = sizeof(line) - 2;
    /* one line per message: a newline inside would lose the priority */
    for (size_t i = (size_t)n; i < len; i++)
        if (line[i] == '\n')
            line[i] = ' ';
    line[len++] = '\n';
    ssize_t w = write(STDERR_FILENO, line, len);
    (void)w;
}

void sid_log(int prio, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vlog(prio, fmt, ap);
    va_end(ap);
}

void sid_log_once(bool *once, int prio, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vlog(*once ? SID_LOG_DEBUG : prio, fmt, ap);
    va_end(ap);
    *once = true;
}
