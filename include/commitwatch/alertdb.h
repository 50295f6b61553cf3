/* alertdb.h - the store's alert tables (schema/004_alerts.sql): series
 * state, transitions, silences and notification attempts.
 *
 * Stage: store (the SQL is the store's). The rows are plain C, with no
 * type of the alerts stage above: states and severities are the integers
 * of alerts.h (0 inactive, 1 pending, 2 firing; 0 none, 1 warning,
 * 2 critical); times are ns since the Unix epoch, CW_TS_NEVER (INT64_MIN)
 * for SQL NULL; doubles NAN for NULL.
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

/* ---- the engine's side (store_alerts.c) ----------------------------------- */
/* Declared by the engine's work: loading every non-inactive series at
 * start, saving the changed series and the evaluation's transitions in one
 * transaction (assigning ids), the evaluated-up-to instant (meta). */

/* ---- silences (store_alerts_api.c) ---------------------------------------- */

/* ---- the API's reads (store_alerts_api.c) --------------------------------- */

/* ---- notification attempts (store_alerts_api.c) --------------------------- */

#endif
