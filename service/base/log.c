/* log.c - the service log: formats one line per message and hands it to
 * the sink (stderr unless the platform layer installed another), so lines
 * from the core, writer and HTTP threads never interleave. */
#include "commitwatch/log.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "commitwatch/error.h"

static const char *const level_names[] = {"debug", "info", "warning", "error"};
static cw_log_level_t min_level = CW_LOG_INFO;
static cw_log_sink_fn sink;

void cw_log_set_level(cw_log_level_t lvl)
{
    min_level = lvl;
}

int cw_log_level_parse(const char *name, cw_log_level_t *out)
{
    for (int l = 0; name && l < (int)CW_ARRAY_LEN(level_names); l++)
        if (strcmp(name, level_names[l]) == 0) {
            *out = (cw_log_level_t)l;
            return 0;
        }
    return CW_EINVAL;
}

void cw_log_set_sink(cw_log_sink_fn fn)
{
    sink = fn;
}

void cw_log(cw_log_level_t lvl, const char *fmt, ...)
{
    char line[2048];
    int n;
    va_list ap;

    if (lvl < min_level) return;
    n = snprintf(line, sizeof line, "commitwatch: %s: ", level_names[lvl]);
    va_start(ap, fmt);
    vsnprintf(line + n, sizeof line - (size_t)n - 1, fmt, ap);
    va_end(ap);
    /* Always end with exactly one newline. */
    n = (int)strlen(line);
    if (n == 0 || line[n - 1] != '\n') {
        line[n] = '\n';
        line[n + 1] = '\0';
    }
    if (sink)
        sink(lvl, line);
    else
        fputs(line, stderr);
}
