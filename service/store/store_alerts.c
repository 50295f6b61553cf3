/* store_alerts.c - the SQL of the alert tables (alertdb.h,
 * schema/004_alerts.sql): the engine's series state and transitions, the
 * rules in force (meta), silences, and the API's reads. The notification
 * attempts are store_notify.c's.
 *
 * Every statement is a slot of the handle's statement cache, prepared on
 * first use and reset after it. Writers (the engine's handle, a
 * short-lived handle of the API for silences) hold short IMMEDIATE
 * transactions; every read (an HTTP worker's) is one statement, so one
 * snapshot.
 *
 * NULL in SQL stands for CW_TS_NEVER (times; INT64_MIN is taken as "none"
 * too when writing), NAN (doubles), 0 (proc, pid) and NULL (strings). */
#include "commitwatch/alertdb.h"

#include <inttypes.h>
#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "commitwatch/common.h"
#include "commitwatch/event.h"
#include "commitwatch/platform.h"
#include "store/store_internal.h"

/* ---- SQL ---------------------------------------------------------------- */

#define SERIES_COLS                                                                                \
    "id, rule, rule_hash, key, process, proc, pid, tag, state, severity, active_since, "          \
    "firing_since, false_since, last_sent_ns, value, threshold, leak_score, ttl_s, detail, "      \
    "updated_ns"
#define TR_COLS                                                                                    \
    "id, series, ts_ns, from_state, to_state, severity, value, threshold, leak_score, ttl_s, "    \
    "reason, silenced, detail"
#define SIL_COLS "id, matchers, starts_ns, ends_ns, created_by, comment, created_ns, deleted_ns"

static const char SQL_AL_ACTIVE[] =
    "SELECT " SERIES_COLS " FROM alert_series WHERE state != 0 ORDER BY id";
/* A series row with id 0: new, or a key seen before (a series that went
 * inactive and is active again keeps its row, UNIQUE(rule, key)). */
static const char SQL_AL_INSERT[] =
    "INSERT INTO alert_series(rule, rule_hash, key, process, proc, pid, tag, state, severity, "
    "active_since, firing_since, false_since, last_sent_ns, value, threshold, leak_score, ttl_s, "
    "detail, updated_ns) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, "
    "?15, ?16, ?17, ?18, ?19) ON CONFLICT(rule, key) DO UPDATE SET rule_hash = excluded.rule_hash, "
    "process = excluded.process, proc = excluded.proc, pid = excluded.pid, tag = excluded.tag, "
    "state = excluded.state, severity = excluded.severity, active_since = excluded.active_since, "
    "firing_since = excluded.firing_since, false_since = excluded.false_since, "
    "last_sent_ns = excluded.last_sent_ns, value = excluded.value, "
    "threshold = excluded.threshold, leak_score = excluded.leak_score, ttl_s = excluded.ttl_s, "
    "detail = excluded.detail, updated_ns = excluded.updated_ns";
static const char SQL_AL_ID[] = "SELECT id FROM alert_series WHERE rule = ?1 AND key = ?2";
static const char SQL_AL_UPDATE[] =
    "UPDATE alert_series SET rule = ?1, rule_hash = ?2, key = ?3, process = ?4, proc = ?5, "
    "pid = ?6, tag = ?7, state = ?8, severity = ?9, active_since = ?10, firing_since = ?11, "
    "false_since = ?12, last_sent_ns = ?13, value = ?14, threshold = ?15, leak_score = ?16, "
    "ttl_s = ?17, detail = ?18, updated_ns = ?19 WHERE id = ?20";
static const char SQL_AL_TR_INSERT[] =
    "INSERT INTO alert_transitions(series, ts_ns, from_state, to_state, severity, value, "
    "threshold, leak_score, ttl_s, reason, silenced, detail) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, "
    "?8, ?9, ?10, ?11, ?12)";
/* ?1 state (minimum, or exact when ?7), ?2 severity (-1 any), ?3 rule,
 * ?4 process glob, ?5 tag, ?6 limit. Firing first, then severity, then
 * the newest. */
static const char SQL_AL_LIST[] =
    "SELECT " SERIES_COLS " FROM alert_series WHERE (CASE WHEN ?7 THEN state = ?1 ELSE state >= ?1 "
    "END) AND (?2 < 0 OR severity = ?2) AND (?3 IS NULL OR rule = ?3) AND (?4 IS NULL OR "
    "process GLOB ?4) AND (?5 IS NULL OR tag = ?5) ORDER BY state DESC, severity DESC, "
    "coalesce(active_since, updated_ns) DESC, id DESC LIMIT ?6";
static const char SQL_AL_GET[] = "SELECT " SERIES_COLS " FROM alert_series WHERE id = ?1";
static const char SQL_AL_TRS[] =
    "SELECT " TR_COLS " FROM alert_transitions WHERE (?1 = 0 OR series = ?1) AND ts_ns >= ?2 "
    "AND ts_ns < ?3 ORDER BY ts_ns DESC, id DESC LIMIT ?4";
static const char SQL_SIL_ADD[] =
    "INSERT INTO silences(matchers, starts_ns, ends_ns, created_by, comment, created_ns) "
    "VALUES (?1, ?2, ?3, ?4, ?5, ?6)";
/* Expiring twice keeps the first instant. */
static const char SQL_SIL_DELETE[] =
    "UPDATE silences SET deleted_ns = coalesce(deleted_ns, ?2) WHERE id = ?1";
static const char SQL_SIL_EXISTS[] = "SELECT 1 FROM silences WHERE id = ?1";
static const char SQL_SIL_LIST[] =
    "SELECT " SIL_COLS " FROM silences WHERE ?1 IS NULL OR (starts_ns <= ?1 AND ?1 < ends_ns "
    "AND (deleted_ns IS NULL OR deleted_ns > ?1)) ORDER BY id DESC";

#define META_EVALUATED "alert_evaluated_ns"
#define META_EVALUATIONS "alert_evaluations"
#define META_RULES "alert_rules"

/* ---- binding and reading ------------------------------------------------ */

static bool no_time(int64_t t)
{
    return t == INT64_MIN || t == INT64_MAX;
}

static void bind_time(sqlite3_stmt *st, int i, int64_t t)
{
    if (no_time(t))
        sqlite3_bind_null(st, i);
    else
        sqlite3_bind_int64(st, i, t);
}

static void bind_real(sqlite3_stmt *st, int i, double v)
{
    if (isnan(v))
        sqlite3_bind_null(st, i);
    else
        sqlite3_bind_double(st, i, v);
}

static void bind_text(sqlite3_stmt *st, int i, const char *s)
{
    if (s)
        sqlite3_bind_text(st, i, s, -1, SQLITE_STATIC);
    else
        sqlite3_bind_null(st, i);
}

static void bind_nonzero(sqlite3_stmt *st, int i, int64_t v)
{
    if (v)
        sqlite3_bind_int64(st, i, v);
    else
        sqlite3_bind_null(st, i);
}

static int64_t col_time(sqlite3_stmt *st, int c)
{
    return sqlite3_column_type(st, c) == SQLITE_NULL ? CW_TS_NEVER : sqlite3_column_int64(st, c);
}

static double col_real(sqlite3_stmt *st, int c)
{
    return sqlite3_column_type(st, c) == SQLITE_NULL ? NAN : sqlite3_column_double(st, c);
}

/* A copy of a text column (NULL for SQL NULL); false on ENOMEM. */
static bool col_text(sqlite3_stmt *st, int c, char **out)
{
    const char *v = (const char *)sqlite3_column_text(st, c);
    *out = v ? cw_strdup(v) : NULL;
    return !v || *out;
}

/* The row at st (SERIES_COLS) into *r. 0 or CW_ENOMEM (*r cleared). */
static int read_series(sqlite3_stmt *st, cw_alert_row_t *r)
{
    memset(r, 0, sizeof *r);
    r->id = sqlite3_column_int64(st, 0);
    bool ok = col_text(st, 1, &r->rule) && col_text(st, 2, &r->rule_hash) &&
              col_text(st, 3, &r->key) && col_text(st, 4, &r->process) &&
              col_text(st, 7, &r->tag) && col_text(st, 18, &r->detail);
    r->proc = (uint32_t)sqlite3_column_int64(st, 5);
    r->pid = (uint32_t)sqlite3_column_int64(st, 6);
    r->state = sqlite3_column_int(st, 8);
    r->severity = sqlite3_column_int(st, 9);
    r->active_since = col_time(st, 10);
    r->firing_since = col_time(st, 11);
    r->false_since = col_time(st, 12);
    r->last_sent_ns = col_time(st, 13);
    r->value = col_real(st, 14);
    r->threshold = col_real(st, 15);
    r->leak_score = col_real(st, 16);
    r->ttl_s = col_real(st, 17);
    r->updated_ns = sqlite3_column_int64(st, 19);
    if (ok) return 0;
    cw_alert_row_clear(r);
    return CW_ENOMEM;
}

/* Like read_series and read_silence by shape only: each reads its own table's columns. */
static int read_tr(sqlite3_stmt *st, cw_alert_tr_row_t *r)
{
    memset(r, 0, sizeof *r);
    r->id = sqlite3_column_int64(st, 0);
    r->series = sqlite3_column_int64(st, 1);
    r->ts_ns = sqlite3_column_int64(st, 2);
    r->from_state = sqlite3_column_int(st, 3);
    r->to_state = sqlite3_column_int(st, 4);
    r->severity = sqlite3_column_int(st, 5);
    r->value = col_real(st, 6);
    r->threshold = col_real(st, 7);
    r->leak_score = col_real(st, 8);
    r->ttl_s = col_real(st, 9);
    r->silenced = sqlite3_column_int(st, 11) != 0;
    if (col_text(st, 10, &r->reason) && col_text(st, 12, &r->detail)) return 0;
    cw_alert_tr_row_clear(r);
    return CW_ENOMEM;
}

static int read_silence(sqlite3_stmt *st, cw_silence_row_t *r)
{
    memset(r, 0, sizeof *r);
    r->id = sqlite3_column_int64(st, 0);
    r->starts_ns = sqlite3_column_int64(st, 2);
    r->ends_ns = sqlite3_column_int64(st, 3);
    r->created_ns = sqlite3_column_int64(st, 6);
    r->deleted_ns = col_time(st, 7);
    if (col_text(st, 1, &r->matchers) && col_text(st, 4, &r->created_by) &&
        col_text(st, 5, &r->comment))
        return 0;
    cw_silence_row_clear(r);
    return CW_ENOMEM;
}

/* Reads every row of st (bound by the caller) into a growing array of
 * elem-byte rows with read_row; frees what it read on failure with
 * clear_row. The statement is reset. 0, CW_ENOMEM or CW_EDB. */
static int read_all(cw_store_t *s, sqlite3_stmt *st, size_t elem,
                    int (*read_row)(sqlite3_stmt *, void *), void (*clear_row)(void *), void **out,
                    size_t *n, const char *what, cw_diag_t *d)
{
    char *v = NULL;
    size_t cnt = 0, cap = 0;
    int rc, err = 0;
    while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
        if (cnt == cap) {
            if (cw_reserve(&v, &cap, cnt + 1, elem)) {
                err = CW_ENOMEM;
                break;
            }
        }
        if ((err = read_row(st, v + cnt * elem))) break;
        cnt++;
    }
    if (!err && rc != SQLITE_DONE) err = cw__store_dberr(s, what, d);
    if (err == CW_ENOMEM) cw_diag_set(d, err, "%s: out of memory", what);
    cw__store_stmt_done(st);
    if (err) {
        for (size_t i = 0; i < cnt; i++)
            clear_row(v + i * elem);
        free(v);
        v = NULL;
        cnt = 0;
    }
    *out = v;
    *n = cnt;
    return err;
}

/* Adapters of the row readers to read_all's shape. */
static int rd_series(sqlite3_stmt *st, void *r)
{
    return read_series(st, r);
}
static void cl_series(void *r)
{
    cw_alert_row_clear(r);
}
static int rd_tr(sqlite3_stmt *st, void *r)
{
    return read_tr(st, r);
}
static void cl_tr(void *r)
{
    cw_alert_tr_row_clear(r);
}
static int rd_silence(sqlite3_stmt *st, void *r)
{
    return read_silence(st, r);
}
static void cl_silence(void *r)
{
    cw_silence_row_clear(r);
}

/* ---- rows --------------------------------------------------------------- */

/* What each kind of row owns: its strings (NULL or malloc'd). A clear frees
 * them and zeroes the row; a rows free does so for each row, then frees the
 * array. */
#define AR(f) offsetof(cw_alert_row_t, f)
static const size_t alert_owned[] = {AR(rule),    AR(rule_hash), AR(key),
                                     AR(process), AR(tag),       AR(detail)};
#undef AR
static const size_t tr_owned[] = {offsetof(cw_alert_tr_row_t, reason),
                                  offsetof(cw_alert_tr_row_t, detail)};
static const size_t silence_owned[] = {offsetof(cw_silence_row_t, matchers),
                                       offsetof(cw_silence_row_t, created_by),
                                       offsetof(cw_silence_row_t, comment)};

static void row_clear(void *r, size_t size, const size_t *owned, size_t nowned)
{
    if (!r) return;
    cw_free_members(r, owned, nowned);
    memset(r, 0, size);
}

void cw_alert_row_clear(cw_alert_row_t *r)
{
    row_clear(r, sizeof *r, alert_owned, CW_ARRAY_LEN(alert_owned));
}

void cw_alert_tr_row_clear(cw_alert_tr_row_t *r)
{
    row_clear(r, sizeof *r, tr_owned, CW_ARRAY_LEN(tr_owned));
}

void cw_silence_row_clear(cw_silence_row_t *r)
{
    row_clear(r, sizeof *r, silence_owned, CW_ARRAY_LEN(silence_owned));
}

void cw_alert_rows_free(cw_alert_row_t *v, size_t n)
{
    cw_free_rows(v, n, sizeof *v, alert_owned, CW_ARRAY_LEN(alert_owned));
}

void cw_alert_tr_rows_free(cw_alert_tr_row_t *v, size_t n)
{
    cw_free_rows(v, n, sizeof *v, tr_owned, CW_ARRAY_LEN(tr_owned));
}

void cw_silence_rows_free(cw_silence_row_t *v, size_t n)
{
    cw_free_rows(v, n, sizeof *v, silence_owned, CW_ARRAY_LEN(silence_owned));
}

/* ---- the engine's side -------------------------------------------------- */

int cw_store_alert_active(cw_store_t *s, cw_alert_row_t **out, size_t *n, cw_diag_t *d)
{
    sqlite3_stmt *st = NULL;
    void *v = NULL;
    int err = cw__store_stmt(s, CW__ST_AL_ACTIVE, SQL_AL_ACTIVE, &st, d);
    *out = NULL;
    *n = 0;
    if (err) return err;
    err = read_all(s, st, sizeof(cw_alert_row_t), rd_series, cl_series, &v, n,
                   "reading the active alert series", d);
    *out = v;
    return err;
}

/* Binds the 19 columns of r in SQL_AL_INSERT / SQL_AL_UPDATE's order. */
static void bind_series(sqlite3_stmt *st, const cw_alert_row_t *r)
{
    bind_text(st, 1, r->rule);
    bind_text(st, 2, r->rule_hash ? r->rule_hash : "");
    bind_text(st, 3, r->key);
    bind_text(st, 4, r->process);
    bind_nonzero(st, 5, r->proc);
    bind_nonzero(st, 6, r->pid);
    bind_text(st, 7, r->tag);
    sqlite3_bind_int(st, 8, r->state);
    sqlite3_bind_int(st, 9, r->severity);
    bind_time(st, 10, r->active_since);
    bind_time(st, 11, r->firing_since);
    bind_time(st, 12, r->false_since);
    bind_time(st, 13, r->last_sent_ns);
    bind_real(st, 14, r->value);
    bind_real(st, 15, r->threshold);
    bind_real(st, 16, r->leak_score);
    bind_real(st, 17, r->ttl_s);
    bind_text(st, 18, r->detail);
    sqlite3_bind_int64(st, 19, r->updated_ns);
}

static int save_series(cw_store_t *s, cw_alert_row_t *r, cw_diag_t *d)
{
    sqlite3_stmt *st = NULL;
    int err;
    if (!r->rule || !r->key)
        return cw_diag_set(d, CW_EINVAL, "saving an alert series: the row has no rule or key");
    if (r->id) {
        if ((err = cw__store_stmt(s, CW__ST_AL_UPDATE, SQL_AL_UPDATE, &st, d))) return err;
        bind_series(st, r);
        sqlite3_bind_int64(st, 20, r->id);
        return cw__store_step_done(s, st, "updating an alert series", d);
    }
    if ((err = cw__store_stmt(s, CW__ST_AL_INSERT, SQL_AL_INSERT, &st, d))) return err;
    bind_series(st, r);
    if ((err = cw__store_step_done(s, st, "inserting an alert series", d))) return err;
    /* The id of an upserted row is not last_insert_rowid(): look it up. */
    if ((err = cw__store_stmt(s, CW__ST_AL_ID, SQL_AL_ID, &st, d))) return err;
    sqlite3_bind_text(st, 1, r->rule, -1, SQLITE_STATIC);
    sqlite3_bind_text(st, 2, r->key, -1, SQLITE_STATIC);
    if (sqlite3_step(st) == SQLITE_ROW)
        r->id = sqlite3_column_int64(st, 0);
    else
        err = cw__store_dberr(s, "reading an alert series' id", d);
    cw__store_stmt_done(st);
    return err;
}

/* Binding a row's columns, alike to other statements (store_series.c's load_steps) by
 * shape only. */
static int save_transition(cw_store_t *s, cw_alert_tr_row_t *t, cw_diag_t *d)
{
    sqlite3_stmt *st = NULL;
    int err = cw__store_stmt(s, CW__ST_AL_TR_INSERT, SQL_AL_TR_INSERT, &st, d);
    if (err) return err;
    sqlite3_bind_int64(st, 1, t->series);
    sqlite3_bind_int64(st, 2, t->ts_ns);
    sqlite3_bind_int(st, 3, t->from_state);
    sqlite3_bind_int(st, 4, t->to_state);
    sqlite3_bind_int(st, 5, t->severity);
    bind_real(st, 6, t->value);
    bind_real(st, 7, t->threshold);
    bind_real(st, 8, t->leak_score);
    bind_real(st, 9, t->ttl_s);
    bind_text(st, 10, t->reason ? t->reason : "");
    sqlite3_bind_int(st, 11, t->silenced);
    bind_text(st, 12, t->detail);
    if ((err = cw__store_step_done(s, st, "inserting an alert transition", d))) return err;
    t->id = sqlite3_last_insert_rowid(s->db);
    return 0;
}

/* meta key += 1 (a decimal counter; absent = 0). */
static int meta_count(cw_store_t *s, const char *key, cw_diag_t *d)
{
    char *v = NULL, buf[32];
    int err = cw_store_meta_get(s, key, &v, d);
    if (err) return err;
    uint64_t n = v ? strtoull(v, NULL, 10) : 0;
    free(v);
    snprintf(buf, sizeof buf, "%" PRIu64, n + 1);
    return cw_store_meta_set(s, key, buf, d);
}

/* How long a save waits for the write lock in all. The busy timeout (5 s,
 * CW__STORE_BUSY_MS) is every connection's; the engine's thread can wait
 * longer, and should: the writer's group commit of 32 seconds of 10,000
 * live processes (a replay at full speed, the machine loaded) held the
 * lock past 5 s, and the engine skipped that instant ("database is
 * locked"). */
#define SAVE_PATIENCE_NS (60 * CW_NS_PER_S)

/* BEGIN IMMEDIATE, tried again while the lock is busy, up to
 * SAVE_PATIENCE_NS. */
static int begin_patient(cw_store_t *s, cw_diag_t *d)
{
    int64_t until = cw_plat_mono_ns() + SAVE_PATIENCE_NS;
    for (;;) {
        int err = cw__store_exec(s, "BEGIN IMMEDIATE", "starting to save alert state", d);
        if (!err || (sqlite3_errcode(s->db) & 0xff) != SQLITE_BUSY || cw_plat_mono_ns() >= until)
            return err;
        cw_plat_sleep_ns(CW_NS_PER_S / 1000); /* the busy handler waited already; never a spin */
    }
}

int cw_store_alert_save(cw_store_t *s, cw_alert_row_t *rows, size_t nrows, cw_alert_tr_row_t *tr,
                        const size_t *tr_row, size_t ntr, int64_t eval_ns, cw_diag_t *d)
{
    int64_t *ids = calloc(nrows + ntr + 1, sizeof *ids); /* to restore on failure */
    char buf[32];
    int err = 0;
    if (!ids) return cw_diag_set(d, CW_ENOMEM, "saving alert state: out of memory");
    for (size_t i = 0; i < nrows; i++)
        ids[i] = rows[i].id;
    for (size_t i = 0; i < ntr; i++)
        ids[nrows + i] = tr[i].series;
    if ((err = begin_patient(s, d))) goto out;
    for (size_t i = 0; !err && i < nrows; i++)
        err = save_series(s, &rows[i], d);
    for (size_t i = 0; !err && i < ntr; i++) {
        if (!tr[i].series) {
            if (!tr_row || tr_row[i] >= nrows) {
                err = cw_diag_set(d, CW_EINVAL,
                                  "saving alert state: transition %zu names no series row", i);
                break;
            }
            tr[i].series = rows[tr_row[i]].id;
        }
        err = save_transition(s, &tr[i], d);
    }
    snprintf(buf, sizeof buf, "%" PRId64, eval_ns);
    if (!err) err = cw_store_meta_set(s, META_EVALUATED, buf, d);
    if (!err) err = meta_count(s, META_EVALUATIONS, d);
    if (!err) err = cw__store_exec(s, "COMMIT", "saving alert state", d);
    if (err) {
        cw__store_exec(s, "ROLLBACK", "rolling back alert state", NULL);
        for (size_t i = 0; i < nrows; i++)
            rows[i].id = ids[i];
        for (size_t i = 0; i < ntr; i++) {
            tr[i].series = ids[nrows + i];
            tr[i].id = 0;
        }
        if (err == CW_EINVAL) err = CW_EDB;
    }
out:
    free(ids);
    return err;
}

/* A decimal int64 meta value; def when absent. */
static int meta_i64(cw_store_t *s, const char *key, int64_t def, int64_t *out, cw_diag_t *d)
{
    char *v = NULL;
    int err = cw_store_meta_get(s, key, &v, d);
    *out = def;
    if (!err && v) *out = strtoll(v, NULL, 10);
    free(v);
    return err;
}

int cw_store_alert_evaluated(cw_store_t *s, int64_t *eval_ns, cw_diag_t *d)
{
    return meta_i64(s, META_EVALUATED, CW_TS_NEVER, eval_ns, d);
}

int cw_store_alert_evaluations(cw_store_t *s, uint64_t *n, cw_diag_t *d)
{
    int64_t v = 0;
    int err = meta_i64(s, META_EVALUATIONS, 0, &v, d);
    *n = v > 0 ? (uint64_t)v : 0;
    return err;
}

int cw_store_alert_rules_set(cw_store_t *s, const char *json, cw_diag_t *d)
{
    return cw_store_meta_set(s, META_RULES, json ? json : "[]", d);
}

int cw_store_alert_rules_get(cw_store_t *s, char **json, cw_diag_t *d)
{
    return cw_store_meta_get(s, META_RULES, json, d);
}

/* ---- silences ----------------------------------------------------------- */

int cw_store_silence_add(cw_store_t *s, cw_silence_row_t *r, cw_diag_t *d)
{
    sqlite3_stmt *st = NULL;
    int err;
    if (!r->matchers || !r->created_by || !r->comment)
        return cw_diag_set(d, CW_EINVAL, "adding a silence: matchers, creator and comment are "
                                         "required");
    if ((err = cw__store_stmt(s, CW__ST_SIL_ADD, SQL_SIL_ADD, &st, d))) return err;
    sqlite3_bind_text(st, 1, r->matchers, -1, SQLITE_STATIC);
    sqlite3_bind_int64(st, 2, r->starts_ns);
    sqlite3_bind_int64(st, 3, r->ends_ns);
    sqlite3_bind_text(st, 4, r->created_by, -1, SQLITE_STATIC);
    sqlite3_bind_text(st, 5, r->comment, -1, SQLITE_STATIC);
    sqlite3_bind_int64(st, 6, r->created_ns);
    if ((err = cw__store_step_done(s, st, "adding a silence", d))) return err;
    r->id = sqlite3_last_insert_rowid(s->db);
    r->deleted_ns = CW_TS_NEVER;
    return 0;
}

int cw_store_silence_delete(cw_store_t *s, int64_t id, int64_t now_ns, cw_diag_t *d)
{
    sqlite3_stmt *st = NULL;
    int err = cw__store_stmt(s, CW__ST_SIL_EXISTS, SQL_SIL_EXISTS, &st, d), rc;
    if (err) return err;
    sqlite3_bind_int64(st, 1, id);
    rc = sqlite3_step(st);
    if (rc != SQLITE_ROW && rc != SQLITE_DONE) err = cw__store_dberr(s, "finding a silence", d);
    cw__store_stmt_done(st);
    if (err) return err;
    if (rc == SQLITE_DONE) return cw_diag_set(d, CW_ENOENT, "no silence %" PRId64, id);
    if ((err = cw__store_stmt(s, CW__ST_SIL_DELETE, SQL_SIL_DELETE, &st, d))) return err;
    sqlite3_bind_int64(st, 1, id);
    sqlite3_bind_int64(st, 2, now_ns);
    return cw__store_step_done(s, st, "expiring a silence", d);
}

int cw_store_silences(cw_store_t *s, int64_t active_at, cw_silence_row_t **out, size_t *n,
                      cw_diag_t *d)
{
    sqlite3_stmt *st = NULL;
    void *v = NULL;
    int err = cw__store_stmt(s, CW__ST_SIL_LIST, SQL_SIL_LIST, &st, d);
    *out = NULL;
    *n = 0;
    if (err) return err;
    bind_time(st, 1, active_at);
    err = read_all(s, st, sizeof(cw_silence_row_t), rd_silence, cl_silence, &v, n,
                   "reading silences", d);
    *out = v;
    return err;
}

/* ---- the API's reads ------------------------------------------------------ */

int cw_store_alerts(cw_store_t *s, const cw_alert_filter_t *f, cw_alert_row_t **out, size_t *n,
                    cw_diag_t *d)
{
    sqlite3_stmt *st = NULL;
    void *v = NULL;
    int err = cw__store_stmt(s, CW__ST_AL_LIST, SQL_AL_LIST, &st, d);
    *out = NULL;
    *n = 0;
    if (err) return err;
    sqlite3_bind_int(st, 1, f->min_state);
    sqlite3_bind_int(st, 2, f->severity);
    bind_text(st, 3, f->rule);
    bind_text(st, 4, f->process);
    bind_text(st, 5, f->tag);
    sqlite3_bind_int64(st, 6, f->limit ? (int64_t)f->limit : 1000);
    sqlite3_bind_int(st, 7, f->state_exact);
    err = read_all(s, st, sizeof(cw_alert_row_t), rd_series, cl_series, &v, n,
                   "reading alert series", d);
    *out = v;
    return err;
}

int cw_store_alert_get(cw_store_t *s, int64_t id, cw_alert_row_t *out, cw_diag_t *d)
{
    sqlite3_stmt *st = NULL;
    int err = cw__store_stmt(s, CW__ST_AL_GET, SQL_AL_GET, &st, d), rc;
    memset(out, 0, sizeof *out);
    if (err) return err;
    sqlite3_bind_int64(st, 1, id);
    rc = sqlite3_step(st);
    if (rc == SQLITE_ROW) {
        if ((err = read_series(st, out)))
            cw_diag_set(d, err, "reading alert series %" PRId64 ": out of memory", id);
    } else if (rc == SQLITE_DONE) {
        err = cw_diag_set(d, CW_ENOENT, "no alert series %" PRId64, id);
    } else {
        err = cw__store_dberr(s, "reading an alert series", d);
    }
    cw__store_stmt_done(st);
    return err;
}

int cw_store_alert_transitions(cw_store_t *s, int64_t series, int64_t from_ns, int64_t to_ns,
                               size_t limit, cw_alert_tr_row_t **out, size_t *n, cw_diag_t *d)
{
    sqlite3_stmt *st = NULL;
    void *v = NULL;
    int err = cw__store_stmt(s, CW__ST_AL_TRS, SQL_AL_TRS, &st, d);
    *out = NULL;
    *n = 0;
    if (err) return err;
    sqlite3_bind_int64(st, 1, series);
    sqlite3_bind_int64(st, 2, from_ns);
    sqlite3_bind_int64(st, 3, to_ns);
    sqlite3_bind_int64(st, 4, limit ? (int64_t)limit : 1000);
    err = read_all(s, st, sizeof(cw_alert_tr_row_t), rd_tr, cl_tr, &v, n,
                   "reading alert transitions", d);
    *out = v;
    return err;
}
