/* log.c - the service log on stderr, one fputs per line so lines from the
 * core and writer threads never interleave. */
#include "commitwatch/log.h"

#include <stdarg.h>
#include <stdio.h>

static cw_log_level_t min_level = CW_LOG_INFO;

void cw_log_set_level(cw_log_level_t lvl)
{
    min_level = lvl;
}

void cw_log(cw_log_level_t lvl, const char *fmt, ...)
{
    static const char *const names[] = {"debug", "info", "warning", "error"};
    char line[2048];
    int n;
    va_list ap;

    if (lvl < min_level) return;
    n = snprintf(line, sizeof line, "commitwatch: %s: ", names[lvl]);
    va_start(ap, fmt);
    vsnprintf(line + n, sizeof line - (size_t)n - 1, fmt, ap);
    va_end(ap);
    /* Always end with exactly one newline. */
    for (n = 0; line[n]; n++) {
    }
    if (n == 0 || line[n - 1] != '\n') {
        line[n] = '\n';
        line[n + 1] = '\0';
    }
    fputs(line, stderr);
}
