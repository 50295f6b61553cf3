/* log.c - log sinks on Linux. "stderr": one fputs per line; when stderr is
 * connected to the journal (systemd sets JOURNAL_STREAM), each line starts
 * with the kernel-style priority "<N>", which journald turns into the
 * entry's PRIORITY and strips. "syslog": syslog(3) with the same
 * priorities (LOG_DAEMON). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <syslog.h>

#include "commitwatch/log.h"
#include "commitwatch/platform.h"

static int priority(cw_log_level_t lvl)
{
    static const int prio[] = {LOG_DEBUG, LOG_INFO, LOG_WARNING, LOG_ERR};
    return prio[lvl];
}

static void journal_sink(cw_log_level_t lvl, const char *line)
{
    char buf[2100];
    snprintf(buf, sizeof buf, "<%d>%s", priority(lvl), line);
    fputs(buf, stderr);
}

static void syslog_sink(cw_log_level_t lvl, const char *line)
{
    /* syslog adds its own ident; drop ours and the newline. */
    const char *msg = strncmp(line, "commitwatch: ", 13) == 0 ? line + 13 : line;
    syslog(priority(lvl), "%.*s", (int)strcspn(msg, "\n"), msg);
}

/* Is stderr the stream JOURNAL_STREAM ("DEV:INODE") names? */
static bool stderr_is_journal(void)
{
    const char *js = getenv("JOURNAL_STREAM");
    unsigned long long dev, ino;
    struct stat st;
    if (!js || sscanf(js, "%llu:%llu", &dev, &ino) != 2) return false;
    return fstat(2, &st) == 0 && (unsigned long long)st.st_dev == dev &&
           (unsigned long long)st.st_ino == ino;
}

static bool syslog_open;

int cw_plat_log_open(const char *sink, cw_diag_t *d)
{
    if (!sink || strcmp(sink, "stderr") == 0) {
        cw_log_set_sink(stderr_is_journal() ? journal_sink : NULL);
        return 0;
    }
    if (strcmp(sink, "syslog") == 0) {
        openlog("commitwatch", LOG_PID, LOG_DAEMON);
        syslog_open = true;
        cw_log_set_sink(syslog_sink);
        return 0;
    }
    return cw_diag_set(d, CW_EINVAL, "log = %s: unknown log sink (known: stderr, syslog)", sink);
}

void cw_plat_log_close(void)
{
    cw_log_set_sink(NULL);
    if (syslog_open) closelog();
    syslog_open = false;
}
