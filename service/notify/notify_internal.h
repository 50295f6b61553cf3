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

#include "commitwatch/backoff.h"
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
/* The same for any body: len bytes of content_type (a binary or
 * multipart body; the profile push's, push.c). */
int cw__http_post_raw(const cw__url_t *u, const char *suffix, const char *content_type,
                      const void *body, size_t len, int64_t timeout_ns, int *status, char *detail,
                      size_t dlen);

/* ---- the profile push's queue (push_queue.c) ----------------------------
 * Profiles waiting to be sent, oldest first, bounded in bytes, with the
 * retry schedule of the oldest. Pure (the caller passes the times); the
 * push thread alone uses it (push.c). */

typedef struct cw__push_item {
    char *query; /* "/ingest?name=...": the URL's suffix */
    char *body;  /* the multipart body */
    size_t len;  /* body bytes */
} cw__push_item_t;

typedef struct cw__pushq {
    cw__push_item_t *v; /* a ring: head .. head + n - 1 (mod cap) */
    size_t cap, head, n;
    uint64_t bytes, max_bytes; /* body bytes queued; the bound */
    /* what happened to the profiles, for /metrics */
    uint64_t sent, sent_bytes, retries, dropped_full, rejected;
    cw_backoff_t bo; /* the oldest's retries */
} cw__pushq_t;

/* What a try came to: accepted (2xx), to be tried again (no response,
 * 408, 429, 5xx) or refused for good (any other status). */
typedef enum { CW__PUSH_OK, CW__PUSH_RETRY, CW__PUSH_REJECTED } cw__push_outcome_t;

void cw__pushq_init(cw__pushq_t *q, uint64_t max_bytes);
void cw__pushq_free(cw__pushq_t *q); /* frees what is queued */
/* Queues *it (its strings owned by the queue from now, also on error:
 * then freed), dropping the oldest while the bytes would pass the bound;
 * a profile larger than the bound alone is dropped itself. Each drop
 * counts in dropped_full. 0 or CW_ENOMEM. */
int cw__pushq_add(cw__pushq_t *q, cw__push_item_t *it);
/* The oldest profile when its try is due at now (monotonic), else NULL. */
const cw__push_item_t *cw__pushq_due(const cw__pushq_t *q, int64_t now);
/* When the next try is due: INT64_MIN now (or nothing queued: then n
 * is 0), else the backoff's time. */
int64_t cw__pushq_next(const cw__pushq_t *q);
/* Records the oldest's try: OK and REJECTED take it off (counted), RETRY
 * keeps it and schedules the next try (backoff). */
void cw__pushq_result(cw__pushq_t *q, cw__push_outcome_t r, int64_t now);
/* The outcome of cw__http_post_raw's rc and status. */
cw__push_outcome_t cw__push_outcome(int rc, int status);

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
