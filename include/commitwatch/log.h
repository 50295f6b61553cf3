/* log.h - the service log: one line per message on stderr (journald and
 * the Windows service wrapper capture it), "LEVEL message".
 * Thread-safe: each line is written with one fputs. */
#ifndef COMMITWATCH_LOG_H
#define COMMITWATCH_LOG_H

typedef enum { CW_LOG_DEBUG = 0, CW_LOG_INFO, CW_LOG_WARN, CW_LOG_ERROR } cw_log_level_t;

void cw_log_set_level(cw_log_level_t lvl);
void cw_log(cw_log_level_t lvl, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 2, 3)))
#endif
    ;

#define CW_LOGI(...) cw_log(CW_LOG_INFO, __VA_ARGS__)
#define CW_LOGW(...) cw_log(CW_LOG_WARN, __VA_ARGS__)
#define CW_LOGE(...) cw_log(CW_LOG_ERROR, __VA_ARGS__)
#define CW_LOGD(...) cw_log(CW_LOG_DEBUG, __VA_ARGS__)

#endif
