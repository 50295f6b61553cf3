/* store_tiers.c - keeping the tiers: rollups of closed minutes and hours,
 * retention folding into BEFORE baselines, and the size cap.
 *
 * Called by cw_store_write() inside the batch's transaction, on a copy of
 * the tier state (cw__tier_t) that the caller keeps only if the commit
 * succeeds. Every tier holds the same history at its own granularity:
 * tier k + 1 gets tier k's rows of every bucket that closed with INSERT ...
 * SELECT ... GROUP BY over [rolled-to, closed), one statement whatever the
 * gap; activity rows are combined in C because their relative peak is
 * ordered. Retention folds a tier's rows before its horizon into one BEFORE
 * row per (proc, stack), which keeps every window starting at or after the
 * horizon exact (docs/DESIGN.md, "Storage model"). */
#include <inttypes.h>
#include <stdbool.h>
#include <stdint.h>

#include "commitwatch/event.h"
#include "commitwatch/log.h"
#include "store/store_internal.h"

#define HOUR_NS (INT64_C(3600) * 1000000000)
#define DAY_NS (24 * HOUR_NS)

/* The size cap never shortens a tier's retention below these. */
static const int64_t min_retention[CW_TIERS] = {HOUR_NS, DAY_NS, 7 * DAY_NS};

/* Rollup of tier ?1 rows in [?2, ?3) into tier ?1 + 1 of width ?4. The
 * floor is written so that it also holds for negative times. */
static const char SQL_ROLL_COMMITS[] =
    "INSERT INTO commits(tier, bucket, proc, stack, bytes, events) "
    "SELECT ?1 + 1, bucket - ((bucket % ?4) + ?4) % ?4 AS fb, proc, stack, SUM(bytes), "
    "SUM(events) FROM commits WHERE tier = ?1 AND bucket >= ?2 AND bucket < ?3 "
    "GROUP BY fb, proc, stack";
/* ?5 = BEFORE, kept as it is (flooring it would overflow). */
static const char SQL_ROLL_RELEASES[] =
    "INSERT INTO releases(tier, f, proc, stack, a, bytes, pieces, closed) "
    "SELECT ?1 + 1, f - ((f % ?4) + ?4) % ?4 AS ff, proc, stack, "
    "CASE WHEN a = ?5 THEN a ELSE a - ((a % ?4) + ?4) % ?4 END AS fa, "
    "SUM(bytes), SUM(pieces), SUM(closed) FROM releases "
    "WHERE tier = ?1 AND f >= ?2 AND f < ?3 GROUP BY ff, proc, stack, fa";
static const char SQL_ROLL_ACTIVITY_GET[] =
    "SELECT proc, bucket, events, delta, relpeak, relpeak_ns FROM activity "
    "WHERE tier = ?1 AND bucket >= ?2 AND bucket < ?3 ORDER BY proc, bucket";
/* Retention: folds tier ?1's rows in [?2, ?3) into its BEFORE (?4)
 * baselines: bytes - released bytes, events - closed events. */
static const char SQL_FOLD[] =
    "INSERT INTO commits(tier, bucket, proc, stack, bytes, events) "
    "SELECT ?1, ?4, proc, stack, SUM(b), SUM(e) FROM ("
    "  SELECT proc, stack, bytes AS b, events AS e FROM commits "
    "   WHERE tier = ?1 AND bucket >= ?2 AND bucket < ?3 "
    "  UNION ALL "
    "  SELECT proc, stack, -bytes, -closed FROM releases "
    "   WHERE tier = ?1 AND f >= ?2 AND f < ?3) "
    "WHERE true GROUP BY proc, stack "
    "ON CONFLICT(tier, bucket, proc, stack) "
    "DO UPDATE SET bytes = bytes + excluded.bytes, events = events + excluded.events";
static const char SQL_DEL_COMMITS[] =
    "DELETE FROM commits WHERE tier = ?1 AND bucket >= ?2 AND bucket < ?3";
static const char SQL_DEL_RELEASES[] =
    "DELETE FROM releases WHERE tier = ?1 AND f >= ?2 AND f < ?3";
static const char SQL_DEL_ACTIVITY[] =
    "DELETE FROM activity WHERE tier = ?1 AND bucket >= ?2 AND bucket < ?3";
/* A baseline with nothing outstanding and no live commit adds nothing. */
static const char SQL_DEL_EMPTY_BASE[] =
    "DELETE FROM commits WHERE tier = ?1 AND bucket = ?2 AND bytes = 0 AND events = 0";

/* Binds (tier, lo, hi) and runs one of the range statements. */
static int run_range(cw_store_t *s, int id, const char *sql, int tier, int64_t lo, int64_t hi,
                     int64_t w, const char *what, cw_diag_t *d)
{
    sqlite3_stmt *st = NULL;
    int err = cw__store_stmt(s, id, sql, &st, d);
    if (err) return err;
    sqlite3_bind_int(st, 1, tier);
    sqlite3_bind_int64(st, 2, lo);
    sqlite3_bind_int64(st, 3, hi);
    if (sqlite3_bind_parameter_count(st) >= 4)
        sqlite3_bind_int64(st, 4, id == CW__ST_FOLD ? CW_TS_BEFORE : w);
    if (sqlite3_bind_parameter_count(st) >= 5) sqlite3_bind_int64(st, 5, CW_TS_BEFORE);
    return cw__store_step_done(s, st, what, d);
}

/* Activity rows of tier k in [lo, hi) combined, per process, into buckets
 * of width w of tier k + 1: events and deltas add up; the relative peak of
 * the coarse bucket is the best of (delta accumulated before a row + that
 * row's relpeak), first reached wins, the coarse bucket start counting as
 * 0 reached at its start. */
static int roll_activity(cw_store_t *s, int k, int64_t lo, int64_t hi, int64_t w, cw_diag_t *d)
{
    sqlite3_stmt *st = NULL;
    cw_row_activity_t acc = {0};
    int64_t acc_bucket = 0;
    bool have = false;
    int err = cw__store_stmt(s, CW__ST_ROLL_ACTIVITY_GET, SQL_ROLL_ACTIVITY_GET, &st, d), rc;
    if (err) return err;
    sqlite3_bind_int(st, 1, k);
    sqlite3_bind_int64(st, 2, lo);
    sqlite3_bind_int64(st, 3, hi);
    /* New rows go to tier k + 1, outside the range being read. */
    while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
        uint32_t proc = (uint32_t)sqlite3_column_int64(st, 0);
        int64_t fb = cw_floor_to(sqlite3_column_int64(st, 1), w);
        if (have && (proc != acc.proc || fb != acc_bucket)) {
            if ((err = cw__store_put_activity(s, k + 1, acc_bucket, &acc, d))) break;
            have = false;
        }
        if (!have) {
            acc = (cw_row_activity_t){.proc = proc, .relpeak_ns = fb};
            acc_bucket = fb;
            have = true;
        }
        int64_t cand = acc.delta + sqlite3_column_int64(st, 4);
        if (cand > acc.relpeak) {
            acc.relpeak = cand;
            acc.relpeak_ns = sqlite3_column_int64(st, 5);
        }
        acc.events += (uint64_t)sqlite3_column_int64(st, 2);
        acc.delta += sqlite3_column_int64(st, 3);
    }
    if (!err && rc != SQLITE_DONE) err = cw__store_dberr(s, "reading activity to roll up", d);
    sqlite3_reset(st);
    if (!err && have) err = cw__store_put_activity(s, k + 1, acc_bucket, &acc, d);
    return err;
}

/* Rolls every closed bucket of tier k + 1 up from tier k. */
int cw__store_rollup(cw_store_t *s, cw__tier_t *t, int k, cw_diag_t *d)
{
    cw__tier_t *up = &t[k + 1];
    int64_t target = cw_floor_to(t[k].end, up->width);
    int err = 0;
    if (t[k].end == INT64_MIN || target <= up->end) return 0;
    err = run_range(s, CW__ST_ROLL_COMMITS, SQL_ROLL_COMMITS, k, up->end, target, up->width,
                    "rolling up commits", d);
    if (!err)
        err = run_range(s, CW__ST_ROLL_RELEASES, SQL_ROLL_RELEASES, k, up->end, target, up->width,
                        "rolling up releases", d);
    if (!err) err = roll_activity(s, k, up->end, target, up->width, d);
    if (!err) up->end = target;
    return err;
}

/* Folds tier k's rows before its new horizon into the BEFORE baselines. */
int cw__store_retain(cw_store_t *s, cw__tier_t *t, int k, cw_diag_t *d)
{
    cw__tier_t *tk = &t[k];
    int64_t end = t[0].end;
    if (tk->retention <= 0 || end == INT64_MIN || tk->start == INT64_MIN) return 0;
    if ((uint64_t)end - (uint64_t)INT64_MIN <= (uint64_t)tk->retention) return 0;
    /* Aligned to the next tier's buckets, and never past what it has
     * rolled up (its rows come from ours). */
    int64_t align = k + 1 < CW_TIERS ? t[k + 1].width : tk->width;
    int64_t limit = k + 1 < CW_TIERS ? t[k + 1].end : tk->end;
    int64_t h = cw_floor_to(end - tk->retention, align);
    if (h > limit) h = limit;
    if (h <= tk->start || h <= tk->horizon) return 0;
    int64_t lo = tk->horizon == INT64_MIN ? INT64_MIN + 1 : tk->horizon;
    int err = run_range(s, CW__ST_FOLD, SQL_FOLD, k, lo, h, 0, "folding old rows", d);
    if (!err)
        err = run_range(s, CW__ST_DEL_COMMITS, SQL_DEL_COMMITS, k, lo, h, 0, "deleting commits", d);
    if (!err)
        err = run_range(s, CW__ST_DEL_RELEASES, SQL_DEL_RELEASES, k, lo, h, 0, "deleting releases",
                        d);
    if (!err)
        err = run_range(s, CW__ST_DEL_ACTIVITY, SQL_DEL_ACTIVITY, k, lo, h, 0, "deleting activity",
                        d);
    if (!err) {
        sqlite3_stmt *st = NULL;
        if (!(err = cw__store_stmt(s, CW__ST_DEL_EMPTY_BASE, SQL_DEL_EMPTY_BASE, &st, d))) {
            sqlite3_bind_int(st, 1, k);
            sqlite3_bind_int64(st, 2, CW_TS_BEFORE);
            err = cw__store_step_done(s, st, "deleting empty baselines", d);
        }
    }
    if (!err) tk->horizon = h;
    return err;
}

/* One integer from a cached PRAGMA statement. */
static int pragma_int(cw_store_t *s, int id, const char *sql, int64_t *out, cw_diag_t *d)
{
    sqlite3_stmt *st = NULL;
    int err = cw__store_stmt(s, id, sql, &st, d);
    if (err) return err;
    if (sqlite3_step(st) == SQLITE_ROW)
        *out = sqlite3_column_int64(st, 0);
    else
        err = cw__store_dberr(s, sql, d);
    sqlite3_reset(st);
    return err;
}

/* While the file (page_count * page_size, as this transaction sees it) is
 * over the cap: return the free pages that folding left, then halve the
 * finest tier's retention still above its minimum (a tier kept forever
 * starts from its span) and fold. Stops when every tier is at its minimum:
 * the cap is a target, not a promise. */
int cw__store_enforce_cap(cw_store_t *s, cw__tier_t *t, cw_diag_t *d)
{
    uint64_t size;
    int err;
    if (!s->opts.size_cap_bytes) return 0;
    bool vacuumed = false;
    for (;;) {
        int64_t pages, free_pages;
        if ((err = pragma_int(s, CW__ST_PAGE_COUNT, "PRAGMA page_count", &pages, d))) break;
        size = (uint64_t)pages * (uint64_t)s->page_size;
        if (size <= s->opts.size_cap_bytes) break;
        if ((err = pragma_int(s, CW__ST_FREELIST, "PRAGMA freelist_count", &free_pages, d))) break;
        if (free_pages > 0 && !vacuumed) { /* pages freed by earlier folding come first */
            if ((err = cw__store_exec(s, "PRAGMA incremental_vacuum", "returning free pages", d)))
                break;
            vacuumed = true;
            continue;
        }
        vacuumed = false;
        int k = 0;
        while (k < CW_TIERS && t[k].retention != 0 && t[k].retention <= min_retention[k])
            k++;
        if (k == CW_TIERS) {
            if (!s->cap_warned)
                CW_LOGW("%s is %" PRIu64 " bytes, over its size cap of %" PRIu64 " bytes, with "
                        "every tier at its shortest retention (1 h raw, 1 d minutes, 7 d "
                        "hours); raise size_cap",
                        s->path, size, s->opts.size_cap_bytes);
            s->cap_warned = true;
            break;
        }
        int64_t r = t[k].retention;
        if (r == 0) r = t[0].end - t[k].start;
        r /= 2;
        t[k].retention = r < min_retention[k] ? min_retention[k] : r;
        if ((err = cw__store_retain(s, t, k, d))) break;
    }
    return err;
}
