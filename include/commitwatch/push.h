/* push.h - each period's commit profiles pushed to a profiling store
 * (Grafana Pyroscope's POST /ingest; docs/FLEET.md, "Profiles to a
 * profiling store").
 *
 * Every period (profile_push_period, whole seconds, aligned to the Unix
 * epoch), once the store holds the period whole, every process instance
 * with activity in it gets one pprof profile of the period: the report of
 * the window (cw_store_report, the same figures as /api/processes) written
 * by the pprof export (export.h: impacting_bytes, transient_bytes,
 * commit_count, commit_bytes). Each is POSTed as multipart/form-data (the
 * profile and its sample_type_config, as Pyroscope takes a pprof with
 * sample types of its own) to
 *
 *   URL/ingest?name=commitwatch.commit{service_name=P,host=H,process=P,...}
 *             &from=<unix s>&until=<unix s>&format=pprof
 *
 * Stage: service/notify (library cw_notify): it reads the store through
 * its own read-only handle, writes with the export and posts with the
 * notifier's HTTP client (notify_http.c).
 *
 * DESIGN. Threads: one push thread owns everything here (the handle, the
 * queue, the HTTP requests); the core thread never waits on it: it reads
 * only what the writer has stored. Profiles wait in a queue bounded by
 * profile_push_buffer bytes: past it the oldest are dropped (counted);
 * a failed try (no response, 408, 429, 5xx) is retried after 1 s, then
 * twice the previous wait, at most 5 min (backoff.h); any other answer
 * drops the profile (counted as rejected). The counters are the status
 * record's push_* fields (status.h), which /metrics and /api/health read. */
#ifndef COMMITWATCH_PUSH_H
#define COMMITWATCH_PUSH_H

#include <stdint.h>

#include "commitwatch/error.h"
#include "commitwatch/status.h"

/* profile_push_buffer's default: 8 MiB, hours of profiles of a busy
 * machine (docs/FLEET.md measures a period's bytes). */
#define CW_PUSH_BUFFER_DEFAULT (UINT64_C(8) << 20)

typedef struct cw_push_opts {
    const char *db_path;   /* the store read (own read-only handle) */
    const char *url;       /* the store's base URL: "http://host:4040" */
    int64_t period_ns;     /* whole seconds, >= 1 s */
    const char *labels;    /* extra labels "k=v,k=v" (cw_push_check_labels); NULL = none */
    uint64_t buffer_bytes; /* the queue's bound; 0 = CW_PUSH_BUFFER_DEFAULT */
    const char *host;      /* the host label; NULL = this machine's name */
    int64_t http_timeout_ns; /* waiting for a response; 0 = 10 s */
    cw_status_t *status;   /* the counters (borrowed; outlives the pusher); may be NULL */
} cw_push_opts_t;

/* Checks profile_push_url's value: an http:// or https:// URL without a
 * query. 0 or CW_EINVAL with d saying what is wrong. Any thread. */
int cw_push_check_url(const char *url, cw_diag_t *d);
/* Checks profile_push_labels's value: "" or comma-separated key=value,
 * keys [A-Za-z_][A-Za-z0-9_]*, not one commitwatch sets (service_name,
 * host, process) nor starting "__", values not empty and without , { } =
 * " or blanks. 0 or CW_EINVAL with d saying which. Any thread. */
int cw_push_check_labels(const char *labels, cw_diag_t *d);

typedef struct cw_pusher cw_pusher_t;

/* Starts the push thread (strings copied). 0, or CW_EINVAL (a bad URL or
 * labels, a period not whole seconds; d says which), CW_ENOMEM, CW_EIO. */
int cw_push_start(const cw_push_opts_t *o, cw_pusher_t **out, cw_diag_t *d);
/* Builds the profiles of the last, partial period (up to the end of the
 * stored data), tries to deliver what is queued for at most timeout_ns
 * (retries' waits included), stops the thread and frees p. What is left
 * is logged as lost. Accepts NULL. */
void cw_push_stop(cw_pusher_t *p, int64_t timeout_ns);

#endif
