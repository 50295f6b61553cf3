/* log.h - the service log: one line per message, "commitwatch: LEVEL:
 * message". Lines go to a sink: stderr by default; the platform layer
 * installs others (the journal's priority prefix, syslog, the Windows
 * Event Log: cw_plat_log_open()).
 * Thread-safe: each line is formatted on the caller's stack and handed to
 * the sink whole; sinks write it with one call. */
#ifndef COMMITWATCH_LOG_H
#define COMMITWATCH_LOG_H

#include "commitwatch/common.h"

typedef enum { CW_LOG_DEBUG = 0, CW_LOG_INFO, CW_LOG_WARN, CW_LOG_ERROR } cw_log_level_t;

void cw_log_set_level(cw_log_level_t lvl);
/* "debug", "info", "warning", "error": 0 and *out set, or CW_EINVAL. */
int cw_log_level_parse(const char *name, cw_log_level_t *out);
void cw_log(cw_log_level_t lvl, const char *fmt, ...) CW_PRINTF(2, 3);

/* A sink gets the level and the whole line ("commitwatch: info: ...\n",
 * exactly one newline). NULL restores stderr. Set it before other threads
 * log (the service sets it at start). */
typedef void (*cw_log_sink_fn)(cw_log_level_t lvl, const char *line);
void cw_log_set_sink(cw_log_sink_fn sink);

#define CW_LOGI(...) cw_log(CW_LOG_INFO, __VA_ARGS__)
#define CW_LOGW(...) cw_log(CW_LOG_WARN, __VA_ARGS__)
#define CW_LOGE(...) cw_log(CW_LOG_ERROR, __VA_ARGS__)
#define CW_LOGD(...) cw_log(CW_LOG_DEBUG, __VA_ARGS__)

#endif
