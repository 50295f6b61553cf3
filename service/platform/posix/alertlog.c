/* alertlog.c - alert entries in the system log on Linux (platform.h):
 * journald with structured fields, else syslog.
 *
 * journald: the native protocol (https://systemd.io/JOURNAL_NATIVE_PROTOCOL/,
 * as sd_journal_sendv() speaks it): one datagram per entry to the unix
 * socket /run/systemd/journal/socket, each field "NAME=value\n", or, for a
 * value holding a newline, "NAME\n" + the value's length as 64-bit little
 * endian + the value + "\n". Entries too large for one datagram (the
 * socket's buffer) are refused with an error rather than passed in a memfd
 * as libsystemd does: ours are a few hundred bytes. libsystemd is not one
 * of the project's dependencies; this is the small writer it would be.
 *
 * syslog: the datagram syslog(3) sends to /dev/log, "<PRI>Mmm dd hh:mm:ss
 * commitwatch[PID]: MESSAGE NAME=value ...", facility daemon. Written here
 * rather than through syslog(3) so that a test can point it at its own
 * socket (syslog(3) always writes to /dev/log); the bytes are the same.
 *
 * Thread: one thread at a time per handle (the notifier's log channel). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "commitwatch/common.h"
#include "commitwatch/platform.h"

#define JOURNAL_SOCKET "/run/systemd/journal/socket"
#define SYSLOG_SOCKET "/dev/log"
#define LOG_DAEMON_FACILITY (3 << 3)

struct cw_plat_alert_log {
    bool journald;
    int fd;
    struct sockaddr_un addr;
    socklen_t addr_len;
};

/* MESSAGE_IDs, one per kind (stable: tools filter on them). */
static const char *const message_ids[] = {
    "5c1e8b0f6a2d4f0e9b7a3c21d4e6f801", /* firing */
    "5c1e8b0f6a2d4f0e9b7a3c21d4e6f802", /* severity rose */
    "5c1e8b0f6a2d4f0e9b7a3c21d4e6f803", /* severity fell */
    "5c1e8b0f6a2d4f0e9b7a3c21d4e6f804", /* still firing */
    "5c1e8b0f6a2d4f0e9b7a3c21d4e6f805", /* resolved */
};

/* syslog priorities: err, warning, info. */
static int priority(cw_plat_alert_level_t l)
{
    return l == CW_PLAT_ALERT_ERROR ? 3 : l == CW_PLAT_ALERT_WARNING ? 4 : 6;
}

static bool is_socket(const char *path)
{
    struct stat st;
    return stat(path, &st) == 0 && S_ISSOCK(st.st_mode);
}

int cw_plat_alert_log_open(const char *kind, const char *root, cw_plat_alert_log_t **out,
                           cw_diag_t *d)
{
    *out = NULL;
    if (!kind) kind = "auto";
    if (!root) root = "";
    char journal[CW_PATH_MAX], sys[CW_PATH_MAX];
    snprintf(journal, sizeof journal, "%s%s", root, JOURNAL_SOCKET);
    snprintf(sys, sizeof sys, "%s%s", root, SYSLOG_SOCKET);
    bool journald;
    if (strcmp(kind, "journald") == 0)
        journald = true;
    else if (strcmp(kind, "syslog") == 0)
        journald = false;
    else if (strcmp(kind, "auto") == 0)
        journald = is_socket(journal);
    else
        return cw_diag_set(d, CW_EINVAL,
                           "alert_log = %s: not a system log here (known: auto, journald, "
                           "syslog, no)",
                           kind);
    const char *path = journald ? journal : sys;
    cw_plat_alert_log_t *l = calloc(1, sizeof *l);
    if (!l) return cw_diag_set(d, CW_ENOMEM, "out of memory");
    l->journald = journald;
    l->addr.sun_family = AF_UNIX;
    if (strlen(path) >= sizeof l->addr.sun_path) {
        free(l);
        return cw_diag_set(d, CW_EINVAL, "%s: socket path too long", path);
    }
    cw_strlcpy(l->addr.sun_path, path, sizeof l->addr.sun_path);
    l->addr_len = (socklen_t)sizeof l->addr;
    l->fd = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    if (l->fd < 0) {
        free(l);
        return cw_diag_set(d, CW_EIO, "cannot create a unix socket: %s", strerror(errno));
    }
    *out = l;
    return 0;
}

const char *cw_plat_alert_log_name(const cw_plat_alert_log_t *l)
{
    return l->journald ? "journald" : "syslog";
}

/* One journal field, in the protocol's plain or binary-safe form. */
static void journal_field(cw_buf_t *b, const char *name, const char *value)
{
    if (!value) value = "";
    cw_buf_puts(b, name);
    size_t n = strlen(value);
    if (!strchr(value, '\n')) {
        cw_buf_put(b, "=", 1);
        cw_buf_put(b, value, n);
    } else {
        unsigned char len[8];
        cw_put_le(len, (uint64_t)n, 8);
        cw_buf_put(b, "\n", 1);
        cw_buf_put(b, len, 8);
        cw_buf_put(b, value, n);
    }
    cw_buf_put(b, "\n", 1);
}

static void build_journal(cw_buf_t *b, const cw_plat_alert_entry_t *e)
{
    char prio[4];
    snprintf(prio, sizeof prio, "%d", priority(e->level));
    journal_field(b, "MESSAGE", e->message);
    journal_field(b, "PRIORITY", prio);
    journal_field(b, "MESSAGE_ID", message_ids[e->kind]);
    journal_field(b, "SYSLOG_IDENTIFIER", "commitwatch");
    for (size_t i = 0; i < e->nfields; i++)
        journal_field(b, e->fields[i].name, e->fields[i].value);
}

static void build_syslog(cw_buf_t *b, const cw_plat_alert_entry_t *e)
{
    char head[96], stamp[32];
    time_t now = time(NULL);
    struct tm tm;
    localtime_r(&now, &tm);
    strftime(stamp, sizeof stamp, "%b %e %H:%M:%S", &tm);
    snprintf(head, sizeof head,
             "<%d>%s commitwatch[%ld]: ", LOG_DAEMON_FACILITY | priority(e->level), stamp,
             (long)getpid());
    cw_buf_puts(b, head);
    cw_buf_puts(b, e->message ? e->message : "");
    for (size_t i = 0; i < e->nfields; i++) {
        const char *v = e->fields[i].value ? e->fields[i].value : "";
        cw_buf_put(b, " ", 1);
        cw_buf_puts(b, e->fields[i].name);
        cw_buf_put(b, "=", 1);
        /* One line: a value's newlines become spaces. */
        for (; *v; v++)
            cw_buf_put(b, *v == '\n' ? " " : v, 1);
    }
}

int cw_plat_alert_log_write(cw_plat_alert_log_t *l, const cw_plat_alert_entry_t *e, cw_diag_t *d)
{
    cw_buf_t b = {0};
    if (l->journald)
        build_journal(&b, e);
    else
        build_syslog(&b, e);
    if (b.failed) {
        free(b.p);
        return cw_diag_set(d, CW_ENOMEM, "out of memory");
    }
    ssize_t n =
        sendto(l->fd, b.p, b.n, MSG_NOSIGNAL, (const struct sockaddr *)&l->addr, l->addr_len);
    int err = errno;
    size_t want = b.n;
    free(b.p);
    if (n < 0)
        return cw_diag_set(d, CW_EIO, "%s: cannot write to %s: %s", cw_plat_alert_log_name(l),
                           l->addr.sun_path, strerror(err));
    if ((size_t)n != want)
        return cw_diag_set(d, CW_EIO, "%s: short write to %s", cw_plat_alert_log_name(l),
                           l->addr.sun_path);
    return 0;
}

void cw_plat_alert_log_close(cw_plat_alert_log_t *l)
{
    if (!l) return;
    close(l->fd);
    free(l);
}
