/* store_upgrade.c - converting a database written before the cells
 * (schema 8) into cells, in place (migration 009_cells renamed its
 * tables commits, releases and activity to v8_*), and schema 9's folded
 * rows into runs (010_folded_runs renamed its table folded to v9_folded).
 *
 * The writer converts the old rows a range of buckets at a time (60
 * buckets of the tier's width), each range in a transaction of its own
 * that stores its cells and deletes its old rows, so a conversion cut
 * short (a kill, a full disk) goes on where it stopped at the next start;
 * then it drops the old tables. It logs its progress every 10 s and, at
 * the end, the rows converted and how long it took. Until then readers
 * are refused (db.c). Writer floor; the writer's opening only. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "commitwatch/event.h"
#include "commitwatch/log.h"
#include "commitwatch/platform.h"
#include "store/store_internal.h"

#define CHUNK_BUCKETS 60
#define PROGRESS_NS (10 * CW_NS_PER_S)

int cw__store_upgrade_stop_after;

static const char SQL_HAS_OLD[] =
    "SELECT count(*) FROM sqlite_schema WHERE type = 'table' AND name = 'v8_commits'";
/* The first bucket of a tier that still has old rows, in any table. */
static const char SQL_FIRST[] =
    "SELECT min(b) FROM (SELECT min(bucket) AS b FROM v8_commits WHERE tier = ?1 "
    "UNION ALL SELECT min(f) FROM v8_releases WHERE tier = ?1 "
    "UNION ALL SELECT min(bucket) FROM v8_activity WHERE tier = ?1)";
static const char SQL_COMMITS[] =
    "SELECT bucket, proc, stack, bytes, events FROM v8_commits "
    "WHERE tier = ?1 AND bucket >= ?2 AND bucket < ?3 ORDER BY bucket, proc, stack";
static const char SQL_RELEASES[] =
    "SELECT f, proc, stack, a, bytes, pieces, closed FROM v8_releases "
    "WHERE tier = ?1 AND f >= ?2 AND f < ?3 ORDER BY f, proc, stack, a";
static const char SQL_ACTIVITY[] =
    "SELECT bucket, proc, events, delta, relpeak, relpeak_ns FROM v8_activity "
    "WHERE tier = ?1 AND bucket >= ?2 AND bucket < ?3 ORDER BY bucket, proc";
static const char *const SQL_DELETE[] = {
    "DELETE FROM v8_commits WHERE tier = ?1 AND bucket >= ?2 AND bucket < ?3",
    "DELETE FROM v8_releases WHERE tier = ?1 AND f >= ?2 AND f < ?3",
    "DELETE FROM v8_activity WHERE tier = ?1 AND bucket >= ?2 AND bucket < ?3",
};
static const char SQL_DROP[] =
    "DROP TABLE v8_commits; DROP TABLE v8_releases; DROP TABLE v8_activity";

/* One range's old rows; commit rows' a holds their bucket, the release
 * and activity rows' buckets are beside them. */
typedef struct range_rows {
    CW__VEC(cw_row_commit_t) c;
    CW__VEC(cw_row_release_t) r;
    CW__VEC(cw_row_activity_t) a;
    int64_t *rf, *ab; /* releases' f, activity's bucket */
    size_t rfcap, abcap;
} range_rows_t;

static sqlite3_stmt *prepare(cw_store_t *s, const char *sql, int tier, int64_t lo, int64_t hi)
{
    sqlite3_stmt *st = NULL;
    if (sqlite3_prepare_v2(s->db, sql, -1, &st, NULL) != SQLITE_OK) return NULL;
    sqlite3_bind_int(st, 1, tier);
    if (sqlite3_bind_parameter_count(st) >= 3) {
        sqlite3_bind_int64(st, 2, lo);
        sqlite3_bind_int64(st, 3, hi);
    }
    return st;
}

/* Reads the old rows of [lo, hi) of a tier into rr. */
static int read_range(cw_store_t *s, int tier, int64_t lo, int64_t hi, range_rows_t *rr,
                      cw_diag_t *d)
{
    const char *const sql[] = {SQL_COMMITS, SQL_RELEASES, SQL_ACTIVITY};
    int err = 0;
    rr->c.n = rr->r.n = rr->a.n = 0;
    for (int t = 0; t < 3 && !err; t++) {
        sqlite3_stmt *st = prepare(s, sql[t], tier, lo, hi);
        int rc;
        if (!st) return cw__store_dberr(s, "reading the rows to convert", d);
        while (!err && (rc = sqlite3_step(st)) == SQLITE_ROW) {
            int64_t v[7];
            for (int i = 0; i < sqlite3_column_count(st); i++)
                v[i] = sqlite3_column_int64(st, i);
            /* Room for one more row in each vector and side array. */
            if (CW_RESERVE(rr->c.v, rr->c.cap, (size_t)rr->c.n + 1) ||
                CW_RESERVE(rr->r.v, rr->r.cap, (size_t)rr->r.n + 1) ||
                CW_RESERVE(rr->rf, rr->rfcap, (size_t)rr->r.n + 1) ||
                CW_RESERVE(rr->a.v, rr->a.cap, (size_t)rr->a.n + 1) ||
                CW_RESERVE(rr->ab, rr->abcap, (size_t)rr->a.n + 1)) {
                err = CW_ENOMEM;
                break;
            }
            switch (t) {
            case 0: /* bucket, proc, stack, bytes, events */
                rr->c.v[rr->c.n++] = (cw_row_commit_t){(uint32_t)v[1], (uint32_t)v[2], v[0],
                                                       (uint64_t)v[3], (uint64_t)v[4]};
                break;
            case 1: /* f, proc, stack, a, bytes, pieces, closed */
                rr->rf[rr->r.n] = v[0];
                rr->r.v[rr->r.n++] =
                    (cw_row_release_t){(uint32_t)v[1], (uint32_t)v[2], v[3],
                                       (uint64_t)v[4], (uint64_t)v[5], (uint64_t)v[6]};
                break;
            default: /* bucket, proc, events, delta, relpeak, relpeak_ns */
                rr->ab[rr->a.n] = v[0];
                rr->a.v[rr->a.n++] =
                    (cw_row_activity_t){(uint32_t)v[1], (uint64_t)v[2], v[3], v[4], v[5]};
            }
        }
        if (!err && rc != SQLITE_DONE) err = cw__store_dberr(s, "reading the rows to convert", d);
        sqlite3_finalize(st);
    }
    return err;
}

/* Stores rr's rows as cells, a bucket at a time (each table's rows are in
 * bucket order). */
static int put_range(cw_store_t *s, int tier, range_rows_t *rr, uint64_t *cells, cw_diag_t *d)
{
    uint32_t ic = 0, ir = 0, ia = 0;
    int err = 0;
    while (!err && (ic < rr->c.n || ir < rr->r.n || ia < rr->a.n)) {
        int64_t b = INT64_MAX;
        if (ic < rr->c.n && rr->c.v[ic].a < b) b = rr->c.v[ic].a;
        if (ir < rr->r.n && rr->rf[ir] < b) b = rr->rf[ir];
        if (ia < rr->a.n && rr->ab[ia] < b) b = rr->ab[ia];
        uint32_t ec = ic, er = ir, ea = ia;
        while (ec < rr->c.n && rr->c.v[ec].a == b)
            ec++;
        while (er < rr->r.n && rr->rf[er] == b)
            er++;
        while (ea < rr->a.n && rr->ab[ea] == b)
            ea++;
        err = cw__store_ins_rows(s, tier, b, rr->c.v + ic, ec - ic, rr->r.v + ir, er - ir,
                                 rr->a.v + ia, ea - ia, NULL, d);
        *cells += 1;
        ic = ec, ir = er, ia = ea;
    }
    return err;
}

static int delete_range(cw_store_t *s, int tier, int64_t lo, int64_t hi, cw_diag_t *d)
{
    for (int t = 0; t < 3; t++) {
        sqlite3_stmt *st = prepare(s, SQL_DELETE[t], tier, lo, hi);
        int rc = st ? sqlite3_step(st) : SQLITE_ERROR;
        sqlite3_finalize(st);
        if (rc != SQLITE_DONE) return cw__store_dberr(s, "deleting converted rows", d);
    }
    return 0;
}

/* A conversion's error err, d's message (if any) followed by how far the
 * conversion `what` got and that it goes on at the next start. */
static int stopped(cw_diag_t *d, int err, const char *what, uint64_t rows)
{
    char why[sizeof d->msg];
    snprintf(why, sizeof why, "%s", d && d->msg[0] ? d->msg : "the conversion failed");
    return cw_diag_set(d, err,
                       "%s; the conversion %s stopped after %" PRIu64
                       " rows and goes on at the next start",
                       why, what, rows);
}

int cw__store_upgrade_cells(cw_store_t *s, cw_diag_t *d)
{
    int64_t has = 0, t0 = cw_plat_mono_ns(), last = t0;
    uint64_t rows = 0, buckets = 0;
    int steps = 0;
    bool said = false;
    range_rows_t rr = {0};
    int err = cw__store_query_int(s, SQL_HAS_OLD, &has, d);
    if (err || !has) return err;
    for (int k = 0; k < CW_TIERS && !err; k++) {
        int64_t w = s->w->tiers[k].width;
        for (;;) {
            sqlite3_stmt *st = prepare(s, SQL_FIRST, k, 0, 0);
            int rc = st ? sqlite3_step(st) : SQLITE_ERROR;
            bool none = rc == SQLITE_ROW && sqlite3_column_type(st, 0) == SQLITE_NULL;
            int64_t lo = rc == SQLITE_ROW ? sqlite3_column_int64(st, 0) : 0;
            sqlite3_finalize(st);
            if (rc != SQLITE_ROW) {
                err = cw__store_dberr(s, "finding the rows to convert", d);
                break;
            }
            if (none) break;
            /* BEFORE alone, then CHUNK_BUCKETS buckets (to the end of time at most). */
            int64_t hi = lo == CW_TS_BEFORE                   ? lo + 1
                         : lo > INT64_MAX - CHUNK_BUCKETS * w ? INT64_MAX
                                                              : lo + CHUNK_BUCKETS * w;
            if (cw__store_upgrade_stop_after && steps++ == cw__store_upgrade_stop_after) {
                err = cw_diag_set(d, CW_EIO, "the conversion's test hook stopped it");
                break;
            }
            if (!said) {
                CW_LOGI("%s: converting its rows to the cell encoding of schema version %d; "
                        "readers wait until it has ended",
                        s->path, (int)cw__schema_count);
                said = true;
            }
            if ((err = cw__store_exec(s, "BEGIN IMMEDIATE", "starting a conversion step", d)))
                break;
            if (!(err = read_range(s, k, lo, hi, &rr, d)))
                rows += (uint64_t)rr.c.n + rr.r.n + rr.a.n;
            if (!err) err = put_range(s, k, &rr, &buckets, d);
            if (!err) err = delete_range(s, k, lo, hi, d);
            if (!err) err = cw__store_exec(s, "COMMIT", "committing a conversion step", d);
            if (err) {
                sqlite3_exec(s->db, "ROLLBACK", NULL, NULL, NULL);
                break;
            }
            int64_t now = cw_plat_mono_ns();
            if (now - last >= PROGRESS_NS) {
                CW_LOGI("%s: converted %" PRIu64 " rows so far (tier %d), %.0f s", s->path, rows, k,
                        (double)(now - t0) / 1e9);
                last = now;
            }
        }
    }
    free(rr.c.v);
    free(rr.r.v);
    free(rr.a.v);
    free(rr.rf);
    free(rr.ab);
    if (!err) err = cw__store_exec(s, SQL_DROP, "dropping the converted tables", d);
    if (err) return stopped(d, err, "to cells", rows);
    if (rows)
        CW_LOGI("%s: converted %" PRIu64 " rows into %" PRIu64 " buckets of cells in %.2f s",
                s->path, rows, buckets, (double)(cw_plat_mono_ns() - t0) / 1e9);
    return 0;
}

/* ---- folded rows into runs (010_folded_runs) ------------------------------ */

static const char SQL_HAS_V9_FOLDED[] =
    "SELECT count(*) FROM sqlite_schema WHERE type = 'table' AND name = 'v9_folded'";
static const char SQL_V9_GROUP[] = "SELECT min(grp) FROM v9_folded";
static const char SQL_V9_ROWS[] =
    "SELECT grp, pid, start_ns, exit_ns, bytes FROM v9_folded WHERE grp = ?1";

/* Converts one group's rows: they go through the writer's own path
 * (store_fold.c) as a batch of folded rows would, and the group's count,
 * which that path adds to, is put back as it was. */
static int convert_group(cw_store_t *s, int64_t grp, uint64_t *rows, cw_diag_t *d)
{
    cw_batch_t *b = NULL;
    sqlite3_stmt *st = NULL;
    int rc, err = cw_batch_create(0, 1, &b);
    if (err) return cw_diag_set(d, err, "converting folded rows: out of memory");
    if (sqlite3_prepare_v2(s->db, SQL_V9_ROWS, -1, &st, NULL) != SQLITE_OK) {
        err = cw__store_dberr(s, "reading the folded rows to convert", d);
        goto out;
    }
    sqlite3_bind_int64(st, 1, grp);
    while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
        cw_row_folded_t r = {(uint32_t)sqlite3_column_int64(st, 0),
                             (uint32_t)sqlite3_column_int64(st, 1), sqlite3_column_int64(st, 2),
                             sqlite3_column_int64(st, 3), (uint64_t)sqlite3_column_int64(st, 4)};
        if ((err = cw_batch_add_folded(b, &r))) {
            err = cw_diag_set(d, err, "converting folded rows: out of memory");
            goto out;
        }
    }
    if (rc != SQLITE_DONE) {
        err = cw__store_dberr(s, "reading the folded rows to convert", d);
        goto out;
    }
    sqlite3_finalize(st);
    st = NULL;
    if ((err = cw__store_put_folded(s, b, d))) goto out;
    char sql[160];
    snprintf(sql, sizeof sql,
             "UPDATE processes SET folded = folded - %" PRIu32 " WHERE id = %" PRId64
             "; DELETE FROM v9_folded WHERE grp = %" PRId64,
             b->folded.n, grp, grp);
    err = cw__store_exec(s, sql, "deleting converted folded rows", d);
    *rows += b->folded.n;
out:
    sqlite3_finalize(st);
    cw_batch_free(b);
    return err;
}

int cw__store_upgrade_folded(cw_store_t *s, cw_diag_t *d)
{
    int64_t has = 0, t0 = cw_plat_mono_ns(), last = t0;
    uint64_t rows = 0, groups = 0;
    int steps = 0;
    int err = cw__store_query_int(s, SQL_HAS_V9_FOLDED, &has, d);
    if (err || !has) return err;
    for (;;) {
        int64_t grp = 0;
        sqlite3_stmt *st = NULL;
        int rc = sqlite3_prepare_v2(s->db, SQL_V9_GROUP, -1, &st, NULL) == SQLITE_OK
                     ? sqlite3_step(st)
                     : SQLITE_ERROR;
        bool none = rc == SQLITE_ROW && sqlite3_column_type(st, 0) == SQLITE_NULL;
        if (rc == SQLITE_ROW) grp = sqlite3_column_int64(st, 0);
        sqlite3_finalize(st);
        if (rc != SQLITE_ROW) {
            err = cw__store_dberr(s, "finding the folded rows to convert", d);
            break;
        }
        if (none) break;
        if (cw__store_upgrade_stop_after && steps++ == cw__store_upgrade_stop_after) {
            err = cw_diag_set(d, CW_EIO, "the conversion's test hook stopped it");
            break;
        }
        if (!groups)
            CW_LOGI("%s: converting its folded instances to the runs of schema version %d; "
                    "readers wait until it has ended",
                    s->path, (int)cw__schema_count);
        if ((err = cw__store_exec(s, "BEGIN IMMEDIATE", "starting a conversion step", d))) break;
        if (!(err = convert_group(s, grp, &rows, d)))
            err = cw__store_exec(s, "COMMIT", "committing a conversion step", d);
        if (err) {
            sqlite3_exec(s->db, "ROLLBACK", NULL, NULL, NULL);
            break;
        }
        groups++;
        int64_t now = cw_plat_mono_ns();
        if (now - last >= PROGRESS_NS) {
            CW_LOGI("%s: converted %" PRIu64 " folded rows so far, %.0f s", s->path, rows,
                    (double)(now - t0) / 1e9);
            last = now;
        }
    }
    if (!err) err = cw__store_exec(s, "DROP TABLE v9_folded", "dropping the converted table", d);
    if (err) return stopped(d, err, "of folded rows", rows);
    if (rows)
        CW_LOGI("%s: converted %" PRIu64 " folded rows into the runs of %" PRIu64
                " groups in %.2f s",
                s->path, rows, groups, (double)(cw_plat_mono_ns() - t0) / 1e9);
    return 0;
}
