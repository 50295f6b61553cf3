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

#endif
