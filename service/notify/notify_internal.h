/* notify_internal.h - what the notifier's files share (notify.c: queues,
 * threads, limits, recording; notify_json.c: the bodies; notify_http.c:
 * URLs and the HTTP client; notify_limit.c: the token bucket and the
 * repeat interval). Not a public header: only service/notify/ and tests
 * include it. */
#ifndef COMMITWATCH_NOTIFY_INTERNAL_H
#define COMMITWATCH_NOTIFY_INTERNAL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "commitwatch/notify.h"
#include "commitwatch/platform.h"

/* ---- bodies (notify_json.c); malloc'd text, NULL when out of memory ---- */

/* Alertmanager's v2 API body: a JSON array of postable alerts. A firing
 * alert's endsAt is its ts_ns + valid_ns (Prometheus' lease); a resolved
 * one's its ends_ns. */
char *cw__notify_am_body(cw_alert_notice_t *const *v, size_t n, int64_t valid_ns);
/* The webhook body for one notice, in Alertmanager's webhook format
 * (version "4"). */
char *cw__notify_webhook_body(const cw_alert_notice_t *a, const char *external_url);
/* The exec hook's stdin: the webhook's alerts[] object of a. */
char *cw__notify_alert_json(const cw_alert_notice_t *a);
/* The system log's entry for a: fills e (fields point into buf and a).
 * Returns e. */
#define CW__NOTIFY_LOG_FIELDS 16
typedef struct cw__notify_log_entry {
    cw_plat_alert_entry_t e;
    cw_plat_alert_field_t f[CW__NOTIFY_LOG_FIELDS];
    char message[1024];
    char num[8][48];
} cw__notify_log_entry_t;
void cw__notify_log_entry(const cw_alert_notice_t *a, cw__notify_log_entry_t *out);
/* The label's value, or NULL. */
const char *cw__notify_label(const cw_alert_label_t *v, size_t n, const char *name);

/* ---- HTTP (notify_http.c) ----------------------------------------------- */

typedef struct cw__url {
    bool tls;
    int port;
    char host[256];
    char path[1024]; /* without a trailing '/'; "" for the root */
} cw__url_t;

/* "http://host[:port][/path]" (https with tls). 0 or CW_EINVAL (d says
 * what is wrong with it). */
int cw__url_parse(const char *s, cw__url_t *u, cw_diag_t *d);
/* POSTs body (JSON) to u's path + suffix. 0 when a response came:
 * *status is its code, detail (for a status that is not 2xx) starts with
 * "HTTP <code>" and a bit of the body. -1 when none came (cannot connect,
 * timed out): detail says why. */
int cw__http_post(const cw__url_t *u, const char *suffix, const char *body, int64_t timeout_ns,
                  int *status, char *detail, size_t dlen);

/* ---- limits (notify_limit.c) --------------------------------------------- */

/* A token bucket of per_min tokens a minute, holding at most per_min
 * (a minute's burst); per_min 0 never limits. */
typedef struct cw__bucket {
    uint64_t per_min;
    double tokens;
    int64_t last_ns;
} cw__bucket_t;

void cw__bucket_init(cw__bucket_t *b, uint64_t per_min, int64_t now_ns);
/* Takes a token if there is one. */
bool cw__bucket_take(cw__bucket_t *b, int64_t now_ns);

/* The repeat interval: when each fingerprint was last delivered. */
typedef struct cw__repeat {
    uint64_t *key; /* fingerprint + 1 (0 = empty slot) */
    int64_t *last_ns;
    size_t cap, n;
} cw__repeat_t;

/* Should a be delivered? Transitions are (and start the interval); a
 * re-send only once repeat_ns has passed since the last delivery of its
 * fingerprint (or when none is known, as after a restart); a resolve is,
 * and forgets the fingerprint. Out of memory: delivered. */
bool cw__repeat_due(cw__repeat_t *r, const cw_alert_notice_t *a, int64_t repeat_ns);
void cw__repeat_free(cw__repeat_t *r);

#endif
