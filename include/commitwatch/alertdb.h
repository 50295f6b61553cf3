/* alertdb.h - the store's alert tables (schema/004_alerts.sql): series
 * state, transitions, silences and notification attempts.
 *
 * Stage: store (the SQL is the store's). The rows are plain C, with no
 * type of the alerts stage above: states and severities are the integers
 * of alerts.h (0 inactive, 1 pending, 2 firing; 0 none, 1 warning,
 * 2 critical); times are ns since the Unix epoch, CW_TS_NEVER (event.h,
 * INT64_MAX) for SQL NULL (INT64_MIN is taken as NULL too when writing);
 * doubles NAN for NULL; proc and pid 0 for NULL.
 *
 * Writers: the alert engine's thread (series, transitions), the notifier
 * (attempts) and the HTTP API (silences), each on its own read-write
 * handle (cw_store_open on the service's file; WAL and the busy timeout
 * serialise the short transactions). Readers: any read-only handle.
 *
 * Ownership as in query.h: results are allocated by the call and freed by
 * the caller with the function named next to them. */
#ifndef COMMITWATCH_ALERTDB_H
#define COMMITWATCH_ALERTDB_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "commitwatch/error.h"
#include "commitwatch/store.h"

typedef struct cw_alert_row {
    int64_t id; /* 0 = not stored yet */
    char *rule, *rule_hash, *key;
    char *process; /* NULL for the machine */
    uint32_t proc, pid;
    char *tag; /* NULL when summed */
    int state, severity;
    int64_t active_since, firing_since, false_since, last_sent_ns;
    double value, threshold, leak_score, ttl_s;
    char *detail; /* JSON text or NULL */
    int64_t updated_ns;
} cw_alert_row_t;

typedef struct cw_alert_tr_row {
    int64_t id, series, ts_ns;
    int from_state, to_state, severity;
    double value, threshold, leak_score, ttl_s;
    char *reason;
    bool silenced;
    char *detail; /* JSON text or NULL */
} cw_alert_tr_row_t;

typedef struct cw_silence_row {
    int64_t id;
    char *matchers; /* JSON array text */
    int64_t starts_ns, ends_ns;
    char *created_by, *comment;
    int64_t created_ns, deleted_ns;
} cw_silence_row_t;

typedef struct cw_notify_row {
    int64_t id, ts_ns;
    char *channel;
    int64_t series, transition; /* 0 = none */
    int attempt;
    char *result; /* "ok", "error", "dropped" */
    char *detail;
} cw_notify_row_t;

void cw_alert_row_clear(cw_alert_row_t *r);
void cw_alert_tr_row_clear(cw_alert_tr_row_t *r);
void cw_silence_row_clear(cw_silence_row_t *r);
void cw_notify_row_clear(cw_notify_row_t *r);

/* ---- the engine's side -------------------------------------------------- */

/* Every series row whose state is not inactive (the engine's state to
 * resume after a restart). *out (free each with cw_alert_row_clear, then
 * the array) and *n. 0, CW_ENOMEM or CW_EDB. */
int cw_store_alert_active(cw_store_t *s, cw_alert_row_t **out, size_t *n, cw_diag_t *d);

/* One evaluation's changes in one transaction: each row of rows is
 * inserted (id 0: rows[i].id receives the new id) or updated (by id);
 * then each transition is inserted with its series id taken from
 * rows[tr_row[i]].id when tr[i].series is 0 (tr[i].id receives the new
 * id); then meta "alert_evaluated_ns" = eval_ns and meta
 * "alert_evaluations" += 1 (call it once per evaluated instant, with or
 * without changes: /metrics counts evaluations so). A row with id 0 whose
 * (rule, key) is stored already (a series active again) updates that row
 * and receives its id. 0 or CW_EDB (nothing of it stored; ids as they
 * were). */
int cw_store_alert_save(cw_store_t *s, cw_alert_row_t *rows, size_t nrows, cw_alert_tr_row_t *tr,
                        const size_t *tr_row, size_t ntr, int64_t eval_ns, cw_diag_t *d);

/* The instant evaluated last (meta "alert_evaluated_ns"); CW_TS_NEVER when
 * none. 0 or CW_EDB. */
int cw_store_alert_evaluated(cw_store_t *s, int64_t *eval_ns, cw_diag_t *d);
/* Evaluations saved so far (meta "alert_evaluations"; 0 when none). 0 or
 * CW_EDB. */
int cw_store_alert_evaluations(cw_store_t *s, uint64_t *n, cw_diag_t *d);

/* The rules in force, as the API shows them and a backtest re-parses
 * them: meta "alert_rules", a JSON array of {"name", "file", "line",
 * "hash", "text"} (text: the rule's section, its `[rule NAME]` line
 * included). Written by the engine on start and on every reload. */
int cw_store_alert_rules_set(cw_store_t *s, const char *json, cw_diag_t *d);
/* *json malloc'd; NULL when none was stored. */
int cw_store_alert_rules_get(cw_store_t *s, char **json, cw_diag_t *d);

/* ---- silences ------------------------------------------------------------- */

/* Inserts r (r->id receives the id; deleted_ns is not written). 0,
 * CW_EINVAL (matchers, created_by or comment NULL), CW_EDB. */
int cw_store_silence_add(cw_store_t *s, cw_silence_row_t *r, cw_diag_t *d);
/* Expires silence id at now_ns (deleted_ns; a second call keeps the
 * first instant). 0, CW_ENOENT, CW_EDB. */
int cw_store_silence_delete(cw_store_t *s, int64_t id, int64_t now_ns, cw_diag_t *d);
/* Silences, newest first; active_at != CW_TS_NEVER keeps those active at
 * that instant (starts <= t < ends, not deleted before t). */
int cw_store_silences(cw_store_t *s, int64_t active_at, cw_silence_row_t **out, size_t *n,
                      cw_diag_t *d);
void cw_silence_rows_free(cw_silence_row_t *v, size_t n);

/* ---- the API's reads ------------------------------------------------------ */

typedef struct cw_alert_filter {
    int min_state;      /* rows with state >= this (1: pending and firing) */
    bool state_exact;   /* rows with state == min_state instead */
    int severity;       /* -1 = any */
    const char *rule;   /* NULL = any; exact */
    const char *process; /* NULL = any; glob (SQLite GLOB: '*', '?', '[...]', '[^...]') */
    const char *tag;    /* NULL = any; exact */
    size_t limit;       /* 0 = 1000 */
} cw_alert_filter_t;

/* Series rows matching f, firing first, then by severity, then newest. */
int cw_store_alerts(cw_store_t *s, const cw_alert_filter_t *f, cw_alert_row_t **out, size_t *n,
                    cw_diag_t *d);
void cw_alert_rows_free(cw_alert_row_t *v, size_t n);
/* One series row. 0, CW_ENOENT, CW_EDB. */
int cw_store_alert_get(cw_store_t *s, int64_t id, cw_alert_row_t *out, cw_diag_t *d);
/* Transitions of series (0 = all) in [from, to), newest first, at most
 * limit (0 = 1000). */
int cw_store_alert_transitions(cw_store_t *s, int64_t series, int64_t from_ns, int64_t to_ns,
                               size_t limit, cw_alert_tr_row_t **out, size_t *n, cw_diag_t *d);
void cw_alert_tr_rows_free(cw_alert_tr_row_t *v, size_t n);

/* ---- notification attempts ------------------------------------------------ */

/* Inserts attempts (ids assigned). 0, CW_EDB. */
int cw_store_notify_add(cw_store_t *s, cw_notify_row_t *v, size_t n, cw_diag_t *d);

typedef struct cw_notify_count {
    char *channel, *result; /* owned */
    uint64_t count;
} cw_notify_count_t;

/* Attempts counted by channel and result, over everything stored. */
int cw_store_notify_counts(cw_store_t *s, cw_notify_count_t **out, size_t *n, cw_diag_t *d);
void cw_notify_counts_free(cw_notify_count_t *v, size_t n);

/* ---- the engine's feed (store_alertfeed.c) -------------------------------- */

/* What the alert engine reads of the stored buckets, by process instance
 * and stack tag (stacks.tag), incrementally: the state at a window's start
 * once (at start, or when a longer window needs more history), then the
 * rows of the buckets stored since the last evaluation. Read on the
 * engine's own handle (or a backtest's). */

/* The stored span: tier 0's first bucket and end (CW_TS_NEVER while
 * empty), the end of the data (cw_store_data_end(): where tracking ended
 * when the last run has ended, else the stored end), and the minute
 * tier's rolled-up end and horizon (where its rows are exact). */
typedef struct cw_feed_bounds {
    int64_t start_ns, stored_end_ns, data_end_ns;
    bool ended;
    int64_t minute_end_ns, minute_horizon_ns, raw_horizon_ns;
} cw_feed_bounds_t;
int cw_store_feed_bounds(cw_store_t *s, cw_feed_bounds_t *out, cw_diag_t *d);

/* A read transaction around several feed calls, so they see one snapshot
 * (end it before writing on the same handle). 0 or CW_EDB. Inside a
 * transaction already open on s (the caller's), nothing is begun and
 * *began is false; cw_store_feed_end ends only what its begin began. */
int cw_store_feed_begin(cw_store_t *s, bool *began, cw_diag_t *d);
void cw_store_feed_end(cw_store_t *s, bool began);

typedef enum cw_feed_kind {
    CW_FEED_START,   /* outstanding bytes at the window start (bytes) */
    CW_FEED_COMMIT,  /* bytes and commit events (count) committed in the range */
    CW_FEED_RELEASE, /* bytes released in the range of commits made in step
                        astep (-1: rundown or before the epoch), count = commit
                        events whose last byte went (releases.closed) */
    CW_FEED_RUNDOWN  /* rundown (BEFORE) bytes of an instance that starts in
                        the range: outstanding from its start on */
} cw_feed_kind_t;

typedef struct cw_feed_row {
    cw_feed_kind_t kind;
    uint32_t proc;
    const char *tag; /* borrowed for the call */
    int64_t astep;
    int64_t bytes, count;
} cw_feed_row_t;

/* Called per row; a non-zero return stops the read and is returned. */
typedef int (*cw_feed_fn)(void *ctx, const cw_feed_row_t *r);

/* Outstanding at from per (instance, tag), every instance at once (the
 * state "before from" as cw_store_series() computes it for one: the hour
 * tier's rows before the last rolled-up hour boundary plus raw rows after
 * it; rundown of instances starting at or after from left out). Rows of
 * kind CW_FEED_START, non-zero only. */
int cw_store_feed_start(cw_store_t *s, int64_t from_ns, cw_feed_fn fn, void *ctx, cw_diag_t *d);

/* Rows of tier (0 raw, 1 minute) in [lo, hi): commits, then releases
 * (astep = the commit's bucket / step_ns, -1 for BEFORE), then rundown of
 * instances starting in [lo, hi) (tier 2's BEFORE rows, which hold rundown
 * alone). */
int cw_store_feed_rows(cw_store_t *s, int tier, int64_t lo, int64_t hi, int64_t step_ns,
                       cw_feed_fn fn, void *ctx, cw_diag_t *d);

typedef struct cw_feed_proc {
    uint32_t id, pid;
    int64_t start_ns, exit_ns, ended_ns; /* CW_TS_NEVER when not */
    const char *name;                    /* borrowed for the call */
} cw_feed_proc_t;

/* Instances with id > after_id alive at since_ns or later (not exited nor
 * ended before it), and instances with id <= after_id that exited or
 * whose tracking ended at or after since_ns. */
int cw_store_feed_procs(cw_store_t *s, uint32_t after_id, int64_t since_ns,
                        int (*fn)(void *ctx, const cw_feed_proc_t *p), void *ctx, cw_diag_t *d);

/* The first instant at or after from_ns at which anything is stored (an
 * event's bucket, a process start, exit or end of tracking), CW_TS_NEVER
 * when none: the engine skips evaluating across a stretch with no data
 * (a replay rebased long after the stored history). 0 or CW_EDB. */
int cw_store_feed_next(cw_store_t *s, int64_t from_ns, int64_t *next_ns, cw_diag_t *d);

#endif
