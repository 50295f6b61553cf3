/* notify.h - delivering alerts where operators look: Prometheus
 * Alertmanager (v2 API), a webhook in Alertmanager's webhook format, the
 * system log (journald with structured fields, else syslog; the Windows
 * Event Log), and an exec hook (docs/ALERTS.md, "Delivery").
 *
 * Stage: service/notify (library cw_notify), above alerts. The engine
 * (alerts.h) hands each evaluation's notices to cw_notifier_submit() on its
 * thread; the notifier copies them and delivers on its own thread(s), so a
 * slow or dead receiver never delays evaluation. Every attempt is recorded
 * (alertdb.h, notifications) and counted for /metrics. */
#ifndef COMMITWATCH_NOTIFY_H
#define COMMITWATCH_NOTIFY_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "commitwatch/alerts.h"
#include "commitwatch/error.h"

/* A deep copy of a notice (every string and label owned by the copy). */
cw_alert_notice_t *cw_alert_notice_copy(const cw_alert_notice_t *n);
void cw_alert_notice_free(cw_alert_notice_t *n); /* a copy's; accepts NULL */

typedef struct cw_notify_opts {
    const char *db_path;          /* attempts are recorded here (own handle) */
    const char *alertmanager_url; /* NULL = none */
    const char *webhook_url;      /* NULL = none */
    const char *exec_path;        /* NULL = none */
    int64_t exec_timeout_ns;
    const char *log;          /* "auto", "journald", "syslog", "eventlog", "no"; NULL = auto */
    int64_t repeat_ns;        /* webhook, exec, log: a firing alert at most this often */
    uint64_t rate_limit;      /* per channel per minute; 0 = unlimited */
    unsigned retries;         /* attempts per notification (HTTP channels); 0 = 1 */
    int64_t resend_ns;        /* alert_resend (1 min) and alert_interval (10 s): a */
    int64_t interval_ns;      /* firing alert's endsAt = ts + 4 x the larger */
    const char *external_url; /* the webhook's externalURL ("") */
    int64_t backoff_ns;       /* first retry's delay, doubling (1 s; at most 1 min) */
    int64_t http_timeout_ns;  /* waiting for an HTTP response (10 s) */
    const char *log_root;     /* tests: the system log's sockets under this folder */
} cw_notify_opts_t;

typedef struct cw_notifier cw_notifier_t;

/* Starts the delivery thread(s) for the channels o names (strings copied);
 * db_path NULL: attempts are not recorded (tools). The fields below
 * retries were added with the delivery: 0 or NULL takes the default in ().
 * 0, or CW_EINVAL (a bad URL, an exec path that is not an executable
 * file: d says which) / CW_ENOMEM / CW_EIO. */
int cw_notifier_start(const cw_notify_opts_t *o, cw_notifier_t **out, cw_diag_t *d);
/* Queues copies of v for every channel; never blocks on a receiver (a full
 * queue drops the oldest and counts it). Matches the engine's on_notices
 * (ctx = the notifier). Any thread. */
void cw_notifier_submit(void *notifier, const cw_alert_notice_t *v, size_t n);
/* Delivers what is queued (bounded by the retries' backoff, at most
 * timeout_ns), stops the threads, frees n. Accepts NULL. */
void cw_notifier_stop(cw_notifier_t *n, int64_t timeout_ns);

#endif
