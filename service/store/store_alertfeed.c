/* store_alertfeed.c - what the alert engine reads of the stored buckets
 * (alertdb.h, "the engine's feed"): the state at a window's start for
 * every process instance at once, the rows of a range of buckets by
 * instance and stack tag, the instances that appeared, exited or stopped
 * being tracked, and the stored span.
 *
 * The engine keeps its own per-step series (service/alerts/series.c), so
 * each evaluation reads only the buckets stored since the last one; the
 * start state is read once, the way store_series.c reads it for one
 * process (the hour tier before the last rolled-up hour boundary, raw
 * rows after it), here grouped by instance. */
#include <string.h>

#include "commitwatch/alertdb.h"
#include "commitwatch/event.h"
#include "store/store_internal.h"

/* ---- SQL ---------------------------------------------------------------- */

/* Rundown (BEFORE) of instances that start at or after ?2 counts from
 * their start, never earlier (docs/DESIGN.md, "Rundown counts from its
 * instance's start"). */
#define LATER_RUNDOWN                                                                              \
    " AND NOT (bucket = -9223372036854775807 - 1"                                                  \
    " AND proc IN (SELECT id FROM processes WHERE start_ns >= ?2))"

/* Outstanding at ?2 per (instance, tag); ?1 is the split (cw__store_split). */
static const char SQL_FEED_START[] =
    "SELECT x.p, s.tag, SUM(x.b) FROM ("
    " SELECT proc AS p, stack AS st, bytes AS b FROM commits"
    " WHERE tier = 2 AND bucket < ?1" LATER_RUNDOWN
    " UNION ALL SELECT proc, stack, bytes FROM commits"
    " WHERE tier = 0 AND bucket >= ?1 AND bucket < ?2" LATER_RUNDOWN
    " UNION ALL SELECT proc, stack, -bytes FROM releases WHERE tier = 2 AND f < ?1"
    " UNION ALL SELECT proc, stack, -bytes FROM releases WHERE tier = 0 AND f >= ?1 AND f < ?2"
    ") x JOIN stacks s ON s.id = x.st GROUP BY x.p, s.tag HAVING SUM(x.b) != 0";

static const char SQL_FEED_COMMITS[] =
    "SELECT c.proc, s.tag, SUM(c.bytes), SUM(c.events) FROM commits c"
    " JOIN stacks s ON s.id = c.stack"
    " WHERE c.tier = ?1 AND c.bucket >= ?2 AND c.bucket < ?3 GROUP BY 1, 2";

/* Grouped by the step of the commit (?4), -1 for BEFORE. */
static const char SQL_FEED_RELEASES[] =
    "SELECT r.proc, s.tag, CASE WHEN r.a < 0 THEN -1 ELSE r.a / ?4 END, SUM(r.bytes),"
    " SUM(r.closed) FROM releases r JOIN stacks s ON s.id = r.stack"
    " WHERE r.tier = ?1 AND r.f >= ?2 AND r.f < ?3 GROUP BY 1, 2, 3";

/* The hour tier's BEFORE rows hold rundown alone (retention of the raw
 * tier folds its own baselines into tier 0's). */
static const char SQL_FEED_RUNDOWN[] =
    "SELECT c.proc, s.tag, SUM(c.bytes) FROM processes p"
    " JOIN commits c ON c.tier = 2 AND c.bucket = -9223372036854775807 - 1 AND c.proc = p.id"
    " JOIN stacks s ON s.id = c.stack WHERE p.start_ns >= ?1 AND p.start_ns < ?2 GROUP BY 1, 2";

#define PROC_COLS "SELECT id, pid, start_ns, exit_ns, tracking_ended_ns, name FROM processes"
static const char SQL_FEED_PROCS[] =
    PROC_COLS " WHERE id > ?1 AND (exit_ns IS NULL OR exit_ns >= ?2)"
              " AND (tracking_ended_ns IS NULL OR tracking_ended_ns >= ?2)"
    " UNION " PROC_COLS " WHERE exit_ns >= ?2 AND id <= ?1"
    " UNION " PROC_COLS " WHERE tracking_ended_ns >= ?2 AND id <= ?1 ORDER BY 1";

/* ---- reads ---------------------------------------------------------------- */

int cw_store_feed_begin(cw_store_t *s, bool *began, cw_diag_t *d)
{
    return cw__store_read_begin(s, began, d);
}

void cw_store_feed_end(cw_store_t *s, bool began)
{
    cw__store_read_end(s, began);
}

int cw_store_feed_bounds(cw_store_t *s, cw_feed_bounds_t *o, cw_diag_t *d)
{
    cw__tier_t t[CW_TIERS];
    bool began = false;
    int err = cw__store_read_begin(s, &began, d);
    memset(o, 0, sizeof *o);
    if (!err) err = cw__store_read_tiers(s, t, d);
    if (!err) err = cw__store_data_end(s, t, &o->data_end_ns, &o->ended, d);
    cw__store_read_end(s, began);
    if (err) return err;
    o->start_ns = t[0].start;
    o->stored_end_ns = t[0].end;
    o->minute_end_ns = t[1].end;
    o->minute_horizon_ns = t[1].horizon;
    o->raw_horizon_ns = t[0].horizon;
    return 0;
}

/* Steps st to its end, handing each row to fn as kind k (columns: proc,
 * tag, then bytes and count or astep, bytes, count). */
static int run_rows(cw_store_t *s, sqlite3_stmt *st, cw_feed_kind_t k, cw_feed_fn fn, void *ctx,
                    cw_diag_t *d)
{
    int rc, err = 0;
    while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
        const unsigned char *tag = sqlite3_column_text(st, 1);
        cw_feed_row_t r = {k, (uint32_t)sqlite3_column_int64(st, 0), tag ? (const char *)tag : "",
                           -1, 0, 0};
        if (k == CW_FEED_RELEASE) {
            r.astep = sqlite3_column_int64(st, 2);
            r.bytes = sqlite3_column_int64(st, 3);
            r.count = sqlite3_column_int64(st, 4);
        } else {
            r.bytes = sqlite3_column_int64(st, 2);
            if (k == CW_FEED_COMMIT) r.count = sqlite3_column_int64(st, 3);
        }
        if ((err = fn(ctx, &r)) != 0) break;
    }
    if (!err && rc != SQLITE_DONE) err = cw__store_dberr(s, "reading the alert feed", d);
    cw__store_stmt_done(st);
    return err;
}

int cw_store_feed_start(cw_store_t *s, int64_t from, cw_feed_fn fn, void *ctx, cw_diag_t *d)
{
    cw__tier_t t[CW_TIERS];
    sqlite3_stmt *st = NULL;
    bool began = false;
    int err = cw__store_read_begin(s, &began, d);
    if (!err) err = cw__store_read_tiers(s, t, d);
    if (!err) err = cw__store_stmt(s, CW__ST_FEED_START, SQL_FEED_START, &st, d);
    if (!err) {
        sqlite3_bind_int64(st, 1, cw__store_split(t, 2, from));
        sqlite3_bind_int64(st, 2, from);
        err = run_rows(s, st, CW_FEED_START, fn, ctx, d);
    }
    cw__store_read_end(s, began);
    return err;
}

int cw_store_feed_rows(cw_store_t *s, int tier, int64_t lo, int64_t hi, int64_t step,
                       cw_feed_fn fn, void *ctx, cw_diag_t *d)
{
    static const struct {
        int slot;
        const char *sql;
        cw_feed_kind_t kind;
    } qs[] = {{CW__ST_FEED_COMMITS, SQL_FEED_COMMITS, CW_FEED_COMMIT},
              {CW__ST_FEED_RELEASES, SQL_FEED_RELEASES, CW_FEED_RELEASE},
              {CW__ST_FEED_RUNDOWN, SQL_FEED_RUNDOWN, CW_FEED_RUNDOWN}};
    bool began = false;
    int err;
    if (step <= 0 || tier < 0 || tier > 1 || lo >= hi)
        return cw_diag_set(d, CW_EINVAL, "alert feed: a range [lo, hi), tier 0 or 1, a step");
    if ((err = cw__store_read_begin(s, &began, d))) return err;
    for (size_t i = 0; i < CW_ARRAY_LEN(qs) && !err; i++) {
        sqlite3_stmt *st = NULL;
        if ((err = cw__store_stmt(s, qs[i].slot, qs[i].sql, &st, d))) break;
        int p = 1;
        if (qs[i].kind != CW_FEED_RUNDOWN) sqlite3_bind_int(st, p++, tier);
        sqlite3_bind_int64(st, p++, lo);
        sqlite3_bind_int64(st, p++, hi);
        if (qs[i].kind == CW_FEED_RELEASE) sqlite3_bind_int64(st, p, step);
        err = run_rows(s, st, qs[i].kind, fn, ctx, d);
    }
    cw__store_read_end(s, began);
    return err;
}

static int64_t col_ts(sqlite3_stmt *st, int col)
{
    return sqlite3_column_type(st, col) == SQLITE_NULL ? CW_TS_NEVER
                                                       : sqlite3_column_int64(st, col);
}

int cw_store_feed_procs(cw_store_t *s, uint32_t after_id, int64_t since,
                        int (*fn)(void *ctx, const cw_feed_proc_t *p), void *ctx, cw_diag_t *d)
{
    sqlite3_stmt *st = NULL;
    int rc = SQLITE_DONE, err = cw__store_stmt(s, CW__ST_FEED_PROCS, SQL_FEED_PROCS, &st, d);
    if (err) return err;
    sqlite3_bind_int64(st, 1, after_id);
    sqlite3_bind_int64(st, 2, since);
    while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
        const unsigned char *name = sqlite3_column_text(st, 5);
        cw_feed_proc_t p = {(uint32_t)sqlite3_column_int64(st, 0),
                            (uint32_t)sqlite3_column_int64(st, 1),
                            sqlite3_column_int64(st, 2),
                            col_ts(st, 3),
                            col_ts(st, 4),
                            name ? (const char *)name : ""};
        if ((err = fn(ctx, &p)) != 0) break;
    }
    if (!err && rc != SQLITE_DONE) err = cw__store_dberr(s, "reading processes for alerts", d);
    cw__store_stmt_done(st);
    return err;
}

/* The first instant at or after ?1 holding stored data: events (activity
 * rows of the raw and minute tiers; a minute bucket may hold them up to
 * its end, so it is looked for one minute early), process starts, exits
 * and ends of tracking. */
static const char SQL_FEED_NEXT[] =
    "SELECT MIN(x) FROM ("
    " SELECT MIN(bucket) AS x FROM activity WHERE tier = 0 AND bucket >= ?1"
    " UNION ALL SELECT MIN(bucket) FROM activity WHERE tier = 1 AND bucket >= ?1 - 60000000000"
    " UNION ALL SELECT MIN(start_ns) FROM processes WHERE start_ns >= ?1"
    " UNION ALL SELECT MIN(exit_ns) FROM processes WHERE exit_ns >= ?1"
    " UNION ALL SELECT MIN(tracking_ended_ns) FROM processes WHERE tracking_ended_ns >= ?1)";

int cw_store_feed_next(cw_store_t *s, int64_t from_ns, int64_t *next_ns, cw_diag_t *d)
{
    sqlite3_stmt *st = NULL;
    *next_ns = CW_TS_NEVER;
    if (sqlite3_prepare_v2(s->db, SQL_FEED_NEXT, -1, &st, NULL) != SQLITE_OK)
        return cw__store_dberr(s, "finding the next stored data", d);
    sqlite3_bind_int64(st, 1, from_ns);
    int rc = sqlite3_step(st);
    if (rc == SQLITE_ROW && sqlite3_column_type(st, 0) != SQLITE_NULL)
        *next_ns = sqlite3_column_int64(st, 0);
    int err = rc == SQLITE_ROW || rc == SQLITE_DONE ? 0
                                                    : cw__store_dberr(s, "finding the next stored data", d);
    sqlite3_finalize(st);
    return err;
}
