/* store.c - the SQLite store: opening and creating a database, refusing
 * files that are not ours, schema migrations, and writing batches (tier 0
 * rows, rollups into the minute and hour tiers, retention folding and the
 * size cap), plus metadata and the state a writer needs to continue.
 * Window queries live in store_report.c; the writer thread in writer.c.
 *
 * The storage model is docs/DESIGN.md, "Storage model". In short: every
 * tier holds the same history at its own granularity; tier k is exact for
 * aligned windows inside [horizon, end). A batch is one transaction: its
 * rows go into tier 0 (rundown rows into every tier's BEFORE bucket), then
 * every minute (hour) that closed is rolled up with INSERT ... SELECT ...
 * GROUP BY, so a gap of many empty buckets costs one statement. Retention
 * folds the rows before a tier's horizon into per-(proc, stack) BEFORE
 * baselines. The tier state lives in the `tiers` table and, for the
 * writing handle, in s->tiers, which changes only when a commit succeeded.
 *
 * A file that is not a commitwatch database is refused before SQLite
 * opens it for writing (its header is read by hand), so it is never
 * modified. */
#include "commitwatch/store.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "commitwatch/event.h"
#include "core/store_internal.h"

#define NS_PER_S INT64_C(1000000000)
#define HOUR_NS (3600 * NS_PER_S)
#define DAY_NS (24 * HOUR_NS)

/* The size cap never shortens a tier's retention below these. */
static const int64_t min_retention[CW_TIERS] = {HOUR_NS, DAY_NS, 7 * DAY_NS};

/* ---- SQL ---------------------------------------------------------------- */

static const char SQL_META_SET[] = "INSERT INTO meta(key, value) VALUES (?1, ?2) "
                                   "ON CONFLICT(key) DO UPDATE SET value = excluded.value";
static const char SQL_META_GET[] = "SELECT value FROM meta WHERE key = ?1";
static const char SQL_FRAME_PUT[] = "INSERT INTO frames(id, text) VALUES (?1, ?2) "
                                    "ON CONFLICT(id) DO UPDATE SET text = excluded.text";
static const char SQL_STACK_PUT[] =
    "INSERT INTO stacks(id, frames, tag) VALUES (?1, ?2, ?3) "
    "ON CONFLICT(id) DO UPDATE SET frames = excluded.frames, tag = excluded.tag";
static const char SQL_PROC_PUT[] =
    "INSERT INTO processes(id, pid, start_ns, exit_ns, name, cmdline) "
    "VALUES (?1, ?2, ?3, ?4, ?5, ?6) ON CONFLICT(id) DO UPDATE SET pid = excluded.pid, "
    "start_ns = excluded.start_ns, exit_ns = excluded.exit_ns, name = excluded.name, "
    "cmdline = excluded.cmdline";
/* Adds: a BEFORE row receives rundown from several batches. */
static const char SQL_COMMIT_ADD[] =
    "INSERT INTO commits(tier, bucket, proc, stack, bytes, events) "
    "VALUES (?1, ?2, ?3, ?4, ?5, ?6) ON CONFLICT(tier, bucket, proc, stack) "
    "DO UPDATE SET bytes = bytes + excluded.bytes, events = events + excluded.events";
static const char SQL_RELEASE_ADD[] =
    "INSERT INTO releases(tier, f, proc, stack, a, bytes, pieces, closed) "
    "VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8) ON CONFLICT(tier, f, proc, stack, a) "
    "DO UPDATE SET bytes = bytes + excluded.bytes, pieces = pieces + excluded.pieces, "
    "closed = closed + excluded.closed";
static const char SQL_ACTIVITY_PUT[] =
    "INSERT INTO activity(tier, bucket, proc, events, delta, relpeak, relpeak_ns) "
    "VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)";
static const char SQL_TIER_PUT[] = "UPDATE tiers SET start_ns = ?2, horizon_ns = ?3, end_ns = ?4, "
                                   "retention_ns = ?5 WHERE tier = ?1";
static const char SQL_LOSS_PUT[] =
    "INSERT INTO losses(ts_ns, events_total, lost_events, drift_bytes) VALUES (?1, ?2, ?3, ?4)";
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
static const char SQL_LAST_LOSS[] =
    "SELECT events_total, lost_events, drift_bytes FROM losses ORDER BY rowid DESC LIMIT 1";

/* ---- helpers ------------------------------------------------------------ */

int cw__store_dberr(cw_store_t *s, const char *what, cw_diag_t *d)
{
    int code = sqlite3_errcode(s->db) & 0xff;
    int err =
        (code == SQLITE_IOERR || code == SQLITE_FULL || code == SQLITE_CANTOPEN) ? CW_EIO : CW_EDB;
    return cw_diag_set(d, err, "%s failed on %s: %s", what, s->path, sqlite3_errmsg(s->db));
}

int64_t cw__floor(int64_t t, int64_t w)
{
    int64_t r = t % w;
    return r < 0 ? t - r - w : t - r;
}

int cw__store_stmt(cw_store_t *s, int id, const char *sql, sqlite3_stmt **out, cw_diag_t *d)
{
    if (!s->stmts[id] && sqlite3_prepare_v3(s->db, sql, -1, SQLITE_PREPARE_PERSISTENT,
                                            &s->stmts[id], NULL) != SQLITE_OK)
        return cw__store_dberr(s, "preparing a statement", d);
    *out = s->stmts[id];
    return 0;
}

static int exec(cw_store_t *s, const char *sql, const char *what, cw_diag_t *d)
{
    if (sqlite3_exec(s->db, sql, NULL, NULL, NULL) != SQLITE_OK) return cw__store_dberr(s, what, d);
    return 0;
}

/* Steps a statement that returns no row, then resets it. */
static int step_done(cw_store_t *s, sqlite3_stmt *st, const char *what, cw_diag_t *d)
{
    int rc = sqlite3_step(st);
    int err = rc == SQLITE_DONE ? 0 : cw__store_dberr(s, what, d);
    sqlite3_reset(st);
    sqlite3_clear_bindings(st);
    return err;
}

/* A single integer from a PRAGMA or SELECT. */
static int query_int(cw_store_t *s, const char *sql, int64_t *out, cw_diag_t *d)
{
    sqlite3_stmt *st = NULL;
    int err = 0;
    if (sqlite3_prepare_v2(s->db, sql, -1, &st, NULL) != SQLITE_OK)
        return cw__store_dberr(s, sql, d);
    if (sqlite3_step(st) == SQLITE_ROW)
        *out = sqlite3_column_int64(st, 0);
    else
        err = cw__store_dberr(s, sql, d);
    sqlite3_finalize(st);
    return err;
}

void cw_store_opts_default(cw_store_opts_t *o)
{
    o->retention_ns[0] = 26 * HOUR_NS;
    o->retention_ns[1] = 35 * DAY_NS;
    o->retention_ns[2] = 400 * DAY_NS;
    o->size_cap_bytes = UINT64_C(2) << 30;
}

int cw_store_schema_version(void)
{
    return (int)cw__schema_count;
}

struct sqlite3 *cw_store_db(cw_store_t *s)
{
    return s->db;
}

/* ---- opening ------------------------------------------------------------ */

enum probe { PROBE_NEW, PROBE_OURS, PROBE_EMPTY_SQLITE };

static uint32_t be32(const unsigned char *p)
{
    return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}

/* Decides, without letting SQLite write anything, what path is: absent or
 * empty (new), ours (our application_id in the header), or an SQLite file
 * with application_id 0 (ours only if it has no tables: checked by a
 * read-only open). Anything else is CW_ENOTDB. */
static int probe_file(const char *path, enum probe *out, cw_diag_t *d)
{
    static const char magic[16] = "SQLite format 3";
    unsigned char h[100];
    FILE *f = fopen(path, "rb");
    if (!f) {
        if (errno == ENOENT) {
            *out = PROBE_NEW;
            return 0;
        }
        return cw_diag_set(d, CW_EIO, "cannot open %s: %s; check the path and its permissions",
                           path, strerror(errno));
    }
    size_t n = fread(h, 1, sizeof h, f);
    fclose(f);
    if (n == 0) {
        *out = PROBE_NEW;
        return 0;
    }
    if (n < sizeof h || memcmp(h, magic, sizeof magic) != 0)
        return cw_diag_set(d, CW_ENOTDB,
                           "%s is not a commitwatch database (not an SQLite file); it was left "
                           "unchanged: give --db a new path or move that file away",
                           path);
    uint32_t app = be32(h + 68);
    if (app == CW__STORE_APP_ID) {
        *out = PROBE_OURS;
        return 0;
    }
    if (app != 0)
        return cw_diag_set(d, CW_ENOTDB,
                           "%s is an SQLite database of another application (application_id "
                           "0x%08" PRIx32 "), not a commitwatch database; it was left unchanged: "
                           "give --db a new path",
                           path, app);
    *out = PROBE_EMPTY_SQLITE;
    return 0;
}

/* For PROBE_EMPTY_SQLITE: 0 when the file has no schema at all. */
static int check_no_tables(const char *path, cw_diag_t *d)
{
    sqlite3 *db = NULL;
    sqlite3_stmt *st = NULL;
    int err = CW_ENOTDB;
    if (sqlite3_open_v2(path, &db, SQLITE_OPEN_READONLY, NULL) != SQLITE_OK) goto out;
    if (sqlite3_prepare_v2(db, "SELECT count(*) FROM sqlite_schema", -1, &st, NULL) != SQLITE_OK)
        goto out;
    if (sqlite3_step(st) == SQLITE_ROW && sqlite3_column_int64(st, 0) == 0) err = 0;
out:
    sqlite3_finalize(st);
    sqlite3_close(db);
    if (err)
        cw_diag_set(d, err,
                    "%s is an SQLite database with tables of its own, not a commitwatch "
                    "database; it was left unchanged: give --db a new path",
                    path);
    return err;
}

/* Applies migrations up to `target`, one transaction each. */
static int migrate(cw_store_t *s, int target, cw_diag_t *d)
{
    int64_t v;
    int err = query_int(s, "PRAGMA user_version", &v, d);
    if (err) return err;
    for (; v < target; v++) {
        char setv[64];
        snprintf(setv, sizeof setv, "PRAGMA user_version = %d", (int)v + 1);
        if ((err = exec(s, "BEGIN IMMEDIATE", "starting a migration", d))) return err;
        if (sqlite3_exec(s->db, cw__schema_sql[v], NULL, NULL, NULL) != SQLITE_OK ||
            sqlite3_exec(s->db, setv, NULL, NULL, NULL) != SQLITE_OK) {
            cw_diag_set(d, CW_EDB,
                        "applying schema migration %d to %s failed: %s; the database was left "
                        "at version %" PRId64,
                        (int)v + 1, s->path, sqlite3_errmsg(s->db), v);
            sqlite3_exec(s->db, "ROLLBACK", NULL, NULL, NULL);
            return CW_EDB;
        }
        if ((err = exec(s, "COMMIT", "committing a migration", d))) return err;
    }
    return 0;
}

int cw__store_read_tiers(cw_store_t *s, cw__tier_t t[CW_TIERS], cw_diag_t *d)
{
    static const char sql[] =
        "SELECT tier, width_ns, start_ns, horizon_ns, end_ns, retention_ns FROM tiers";
    sqlite3_stmt *st = NULL;
    int err = cw__store_stmt(s, CW__ST_TIERS_GET, sql, &st, d), rc, seen = 0;
    if (err) return err;
    while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
        int k = sqlite3_column_int(st, 0);
        if (k < 0 || k >= CW_TIERS) continue;
        t[k].width = sqlite3_column_int64(st, 1);
        t[k].start = sqlite3_column_int64(st, 2);
        t[k].horizon = sqlite3_column_int64(st, 3);
        t[k].end = sqlite3_column_int64(st, 4);
        t[k].retention = sqlite3_column_int64(st, 5);
        seen |= 1 << k;
    }
    if (rc != SQLITE_DONE) err = cw__store_dberr(s, "reading the tiers", d);
    sqlite3_reset(st);
    if (!err && seen != (1 << CW_TIERS) - 1)
        err = cw_diag_set(d, CW_EDB, "%s lacks rows of its tiers table; the database is damaged",
                          s->path);
    return err;
}

static int put_tier(cw_store_t *s, int k, const cw__tier_t *t, cw_diag_t *d)
{
    sqlite3_stmt *st = NULL;
    int err = cw__store_stmt(s, CW__ST_TIER_PUT, SQL_TIER_PUT, &st, d);
    if (err) return err;
    sqlite3_bind_int(st, 1, k);
    sqlite3_bind_int64(st, 2, t->start);
    sqlite3_bind_int64(st, 3, t->horizon);
    sqlite3_bind_int64(st, 4, t->end);
    sqlite3_bind_int64(st, 5, t->retention);
    return step_done(s, st, "saving a tier's state", d);
}

/* Takes the retention settings and the last source counters. */
static int load_writer_state(cw_store_t *s, cw_diag_t *d)
{
    sqlite3_stmt *st = NULL;
    int err = cw__store_read_tiers(s, s->tiers, d);
    if (err) return err;
    if ((err = exec(s, "BEGIN IMMEDIATE", "starting a transaction", d))) return err;
    for (int k = 0; k < CW_TIERS && !err; k++) {
        s->tiers[k].retention = s->opts.retention_ns[k];
        err = put_tier(s, k, &s->tiers[k], d);
    }
    if (!err) err = exec(s, "COMMIT", "saving the retention settings", d);
    if (err) {
        sqlite3_exec(s->db, "ROLLBACK", NULL, NULL, NULL);
        return err;
    }
    if (sqlite3_prepare_v2(s->db, SQL_LAST_LOSS, -1, &st, NULL) != SQLITE_OK)
        return cw__store_dberr(s, "reading the source counters", d);
    if (sqlite3_step(st) == SQLITE_ROW) {
        s->last_total = (uint64_t)sqlite3_column_int64(st, 0);
        s->last_lost = (uint64_t)sqlite3_column_int64(st, 1);
        s->last_drift = sqlite3_column_int64(st, 2);
    }
    sqlite3_finalize(st);
    return 0;
}

static int open_impl(const char *path, const cw_store_opts_t *opts, bool readonly, int target,
                     cw_store_t **out, cw_diag_t *d)
{
    cw_store_t *s = NULL;
    enum probe kind;
    int64_t v;
    int err = probe_file(path, &kind, d);
    if (err) return err;
    if (readonly && kind != PROBE_OURS)
        return kind == PROBE_NEW
                   ? cw_diag_set(d, CW_ENOENT,
                                 "%s does not exist yet; start the commitwatch service to "
                                 "create it",
                                 path)
                   : cw_diag_set(d, CW_ENOTDB, "%s is not a commitwatch database", path);
    if (kind == PROBE_EMPTY_SQLITE && (err = check_no_tables(path, d))) return err;

    err = CW_ENOMEM;
    if (!(s = calloc(1, sizeof *s)) || !(s->path = strdup(path))) goto fail;
    s->readonly = readonly;
    if (opts)
        s->opts = *opts;
    else
        cw_store_opts_default(&s->opts);
    int flags = readonly ? SQLITE_OPEN_READONLY : SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE;
    if (sqlite3_open_v2(path, &s->db, flags | SQLITE_OPEN_NOMUTEX, NULL) != SQLITE_OK) {
        err = s->db ? cw__store_dberr(s, "opening the database", d)
                    : cw_diag_set(d, CW_ENOMEM, "out of memory opening %s", path);
        goto fail;
    }
    sqlite3_busy_timeout(s->db, 5000);
    if (!readonly && kind != PROBE_OURS) {
        /* A new file: page layout settings come first, before any table. */
        char sql[160];
        snprintf(sql, sizeof sql,
                 "PRAGMA auto_vacuum = INCREMENTAL; PRAGMA application_id = %d; "
                 "PRAGMA journal_mode = WAL",
                 CW__STORE_APP_ID);
        if ((err = exec(s, sql, "creating the database", d))) goto fail;
    }
    if ((err = query_int(s, "PRAGMA application_id", &v, d))) goto fail;
    if (v != CW__STORE_APP_ID) {
        err = cw_diag_set(d, CW_ENOTDB, "%s is not a commitwatch database", path);
        goto fail;
    }
    /* Refuse a newer schema before anything may write to the file. */
    if ((err = query_int(s, "PRAGMA user_version", &v, d))) goto fail;
    if (v > (int64_t)cw__schema_count) {
        err = cw_diag_set(d, CW_ENEWER,
                          "%s has schema version %" PRId64 ", newer than version %d that "
                          "commitwatch " CW_VERSION " knows; upgrade commitwatch to use it (the "
                          "file was left unchanged)",
                          path, v, (int)cw__schema_count);
        goto fail;
    }
    if (!readonly && (err = exec(s, "PRAGMA journal_mode = WAL; PRAGMA synchronous = NORMAL",
                                 "setting the journal mode", d)))
        goto fail;
    if (readonly) {
        if (v < (int64_t)cw__schema_count) {
            err = cw_diag_set(d, CW_EDB,
                              "%s has the older schema version %" PRId64 "; run the "
                              "commitwatch service on it once to upgrade it",
                              path, v);
            goto fail;
        }
    } else {
        if ((err = migrate(s, target, d))) goto fail;
        if (target == (int)cw__schema_count && (err = load_writer_state(s, d))) goto fail;
    }
    *out = s;
    return 0;
fail:
    cw_store_close(s);
    return err;
}

int cw_store_open(const char *path, const cw_store_opts_t *opts, cw_store_t **out, cw_diag_t *d)
{
    return open_impl(path, opts, false, (int)cw__schema_count, out, d);
}

int cw_store_open_readonly(const char *path, cw_store_t **out, cw_diag_t *d)
{
    return open_impl(path, NULL, true, 0, out, d);
}

int cw__store_create_at_version(const char *path, int version, cw_diag_t *d)
{
    cw_store_t *s = NULL;
    if (version < 1 || version > (int)cw__schema_count)
        return cw_diag_set(d, CW_EINVAL, "schema version %d does not exist", version);
    int err = open_impl(path, NULL, false, version, &s, d);
    cw_store_close(s);
    return err;
}

void cw_store_close(cw_store_t *s)
{
    if (!s) return;
    for (int i = 0; i < CW__ST__COUNT; i++)
        sqlite3_finalize(s->stmts[i]);
    sqlite3_close(s->db);
    free(s->path);
    free(s);
}

/* ---- metadata and continuing a database ----------------------------------- */

int cw_store_meta_set(cw_store_t *s, const char *key, const char *value, cw_diag_t *d)
{
    sqlite3_stmt *st = NULL;
    int err = cw__store_stmt(s, CW__ST_META_SET, SQL_META_SET, &st, d);
    if (err) return err;
    sqlite3_bind_text(st, 1, key, -1, SQLITE_STATIC);
    sqlite3_bind_text(st, 2, value, -1, SQLITE_STATIC);
    return step_done(s, st, "saving a metadata value", d);
}

int cw_store_meta_get(cw_store_t *s, const char *key, char **out, cw_diag_t *d)
{
    sqlite3_stmt *st = NULL;
    int err = cw__store_stmt(s, CW__ST_META_GET, SQL_META_GET, &st, d), rc;
    if (err) return err;
    *out = NULL;
    sqlite3_bind_text(st, 1, key, -1, SQLITE_STATIC);
    rc = sqlite3_step(st);
    if (rc == SQLITE_ROW) {
        const char *v = (const char *)sqlite3_column_text(st, 0);
        if (v && !(*out = strdup(v))) err = CW_ENOMEM;
    } else if (rc != SQLITE_DONE) {
        err = cw__store_dberr(s, "reading a metadata value", d);
    }
    sqlite3_reset(st);
    sqlite3_clear_bindings(st);
    return err;
}

/* Interns every stored frame, then every stored stack, checking that the
 * ids come out equal (they are dense from 1 and 0). */
static int load_dictionary(cw_store_t *s, cw_stacks_t *stacks, cw_diag_t *d)
{
    sqlite3_stmt *st = NULL;
    uint32_t *fr = NULL, id;
    int err = 0, rc;
    if (sqlite3_prepare_v2(s->db, "SELECT id, text FROM frames ORDER BY id", -1, &st, NULL))
        return cw__store_dberr(s, "reading frames", d);
    while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
        const char *text = (const char *)sqlite3_column_text(st, 1);
        int len = sqlite3_column_bytes(st, 1);
        if ((err = cw_stacks_intern_frame(stacks, text ? text : "", (size_t)len, &id))) goto out;
        if (id != (uint32_t)sqlite3_column_int64(st, 0)) {
            err = cw_diag_set(d, CW_EDB, "%s: stored frame ids are not dense (frame %lld)", s->path,
                              (long long)sqlite3_column_int64(st, 0));
            goto out;
        }
    }
    if (rc != SQLITE_DONE) goto dberr;
    sqlite3_finalize(st);
    if (sqlite3_prepare_v2(s->db, "SELECT id, frames FROM stacks ORDER BY id", -1, &st, NULL))
        goto dberr;
    while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
        const unsigned char *blob = sqlite3_column_blob(st, 1);
        uint32_t n = (uint32_t)sqlite3_column_bytes(st, 1) / 4;
        uint32_t *nfr = realloc(fr, (n ? n : 1) * sizeof *fr);
        if (!nfr) {
            err = CW_ENOMEM;
            goto out;
        }
        fr = nfr;
        for (uint32_t i = 0; i < n; i++)
            fr[i] = (uint32_t)blob[4 * i] | (uint32_t)blob[4 * i + 1] << 8 |
                    (uint32_t)blob[4 * i + 2] << 16 | (uint32_t)blob[4 * i + 3] << 24;
        if ((err = cw_stacks_intern(stacks, fr, n, &id))) goto out;
        if (id != (uint32_t)sqlite3_column_int64(st, 0)) {
            err = cw_diag_set(d, CW_EDB, "%s: stored stack ids are not dense (stack %lld)", s->path,
                              (long long)sqlite3_column_int64(st, 0));
            goto out;
        }
    }
    if (rc != SQLITE_DONE) goto dberr;
    goto out;
dberr:
    err = cw__store_dberr(s, "reading stacks", d);
out:
    sqlite3_finalize(st);
    free(fr);
    return err;
}

int cw_store_load_state(cw_store_t *s, cw_stacks_t *stacks, uint32_t *next_proc_id, int64_t *end_ns,
                        cw_diag_t *d)
{
    cw__tier_t t[CW_TIERS];
    int64_t maxid;
    int err = load_dictionary(s, stacks, d);
    if (!err) err = query_int(s, "SELECT coalesce(max(id), 0) FROM processes", &maxid, d);
    if (!err) err = cw__store_read_tiers(s, t, d);
    if (err) return err;
    *next_proc_id = (uint32_t)maxid + 1;
    *end_ns = t[0].end;
    return 0;
}

/* ---- writing a batch -------------------------------------------------------- */

static void bind_u64(sqlite3_stmt *st, int i, uint64_t v)
{
    sqlite3_bind_int64(st, i, (int64_t)v);
}

static int put_dictionary(cw_store_t *s, const cw_batch_t *b, cw_diag_t *d)
{
    sqlite3_stmt *st = NULL;
    unsigned char *blob = NULL;
    int err = 0;
    for (uint32_t i = 0; i < b->frames.n && !err; i++) {
        if ((err = cw__store_stmt(s, CW__ST_FRAME_PUT, SQL_FRAME_PUT, &st, d))) break;
        sqlite3_bind_int64(st, 1, b->frames.v[i].id);
        sqlite3_bind_text(st, 2, b->frames.v[i].text, -1, SQLITE_STATIC);
        err = step_done(s, st, "storing a frame", d);
    }
    for (uint32_t i = 0; i < b->stacks.n && !err; i++) {
        const cw_row_stack_t *r = &b->stacks.v[i];
        unsigned char *nb = realloc(blob, (size_t)r->nframes * 4 + 1);
        if (!nb) {
            err = CW_ENOMEM;
            break;
        }
        blob = nb;
        for (uint32_t j = 0; j < r->nframes; j++)
            for (int k = 0; k < 4; k++)
                blob[4 * j + k] = (unsigned char)(r->frames[j] >> (8 * k));
        if ((err = cw__store_stmt(s, CW__ST_STACK_PUT, SQL_STACK_PUT, &st, d))) break;
        sqlite3_bind_int64(st, 1, r->id);
        sqlite3_bind_blob(st, 2, blob, (int)r->nframes * 4, SQLITE_STATIC);
        sqlite3_bind_text(st, 3, r->tag ? r->tag : "Other", -1, SQLITE_STATIC);
        err = step_done(s, st, "storing a stack", d);
    }
    for (uint32_t i = 0; i < b->procs.n && !err; i++) {
        const cw_row_proc_t *r = &b->procs.v[i];
        if ((err = cw__store_stmt(s, CW__ST_PROC_PUT, SQL_PROC_PUT, &st, d))) break;
        sqlite3_bind_int64(st, 1, r->id);
        sqlite3_bind_int64(st, 2, r->pid);
        sqlite3_bind_int64(st, 3, r->start_ns);
        if (r->exit_ns != CW_TS_NEVER) sqlite3_bind_int64(st, 4, r->exit_ns);
        sqlite3_bind_text(st, 5, r->name ? r->name : "", -1, SQLITE_STATIC);
        if (r->cmdline) sqlite3_bind_text(st, 6, r->cmdline, -1, SQLITE_STATIC);
        err = step_done(s, st, "storing a process", d);
    }
    free(blob);
    return err;
}

static int put_commit(cw_store_t *s, int tier, int64_t bucket, const cw_row_commit_t *r,
                      cw_diag_t *d)
{
    sqlite3_stmt *st = NULL;
    int err = cw__store_stmt(s, CW__ST_COMMIT_ADD, SQL_COMMIT_ADD, &st, d);
    if (err) return err;
    sqlite3_bind_int(st, 1, tier);
    sqlite3_bind_int64(st, 2, bucket);
    sqlite3_bind_int64(st, 3, r->proc);
    sqlite3_bind_int64(st, 4, r->stack);
    bind_u64(st, 5, r->bytes);
    bind_u64(st, 6, r->events);
    return step_done(s, st, "storing commits", d);
}

static int put_activity(cw_store_t *s, int tier, int64_t bucket, const cw_row_activity_t *r,
                        cw_diag_t *d)
{
    sqlite3_stmt *st = NULL;
    int err = cw__store_stmt(s, CW__ST_ACTIVITY_PUT, SQL_ACTIVITY_PUT, &st, d);
    if (err) return err;
    sqlite3_bind_int(st, 1, tier);
    sqlite3_bind_int64(st, 2, bucket);
    sqlite3_bind_int64(st, 3, r->proc);
    bind_u64(st, 4, r->events);
    sqlite3_bind_int64(st, 5, r->delta);
    sqlite3_bind_int64(st, 6, r->relpeak);
    sqlite3_bind_int64(st, 7, r->relpeak_ns);
    return step_done(s, st, "storing activity", d);
}

/* The batch's own rows, into tier 0 (rundown commits into every tier). */
static int put_rows(cw_store_t *s, const cw_batch_t *b, cw_diag_t *d)
{
    sqlite3_stmt *st = NULL;
    int err = 0;
    for (uint32_t i = 0; i < b->commits.n && !err; i++) {
        const cw_row_commit_t *r = &b->commits.v[i];
        if (r->a == CW_TS_BEFORE)
            for (int k = 0; k < CW_TIERS && !err; k++)
                err = put_commit(s, k, CW_TS_BEFORE, r, d);
        else
            err = put_commit(s, 0, b->bucket_ns, r, d);
    }
    for (uint32_t i = 0; i < b->releases.n && !err; i++) {
        const cw_row_release_t *r = &b->releases.v[i];
        if ((err = cw__store_stmt(s, CW__ST_RELEASE_ADD, SQL_RELEASE_ADD, &st, d))) break;
        sqlite3_bind_int(st, 1, 0);
        sqlite3_bind_int64(st, 2, b->bucket_ns);
        sqlite3_bind_int64(st, 3, r->proc);
        sqlite3_bind_int64(st, 4, r->stack);
        sqlite3_bind_int64(st, 5, r->a);
        bind_u64(st, 6, r->bytes);
        bind_u64(st, 7, r->pieces);
        bind_u64(st, 8, r->closed);
        err = step_done(s, st, "storing releases", d);
    }
    for (uint32_t i = 0; i < b->activity.n && !err; i++)
        err = put_activity(s, 0, b->bucket_ns, &b->activity.v[i], d);
    return err;
}

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
    return step_done(s, st, what, d);
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
        int64_t fb = cw__floor(sqlite3_column_int64(st, 1), w);
        if (have && (proc != acc.proc || fb != acc_bucket)) {
            if ((err = put_activity(s, k + 1, acc_bucket, &acc, d))) break;
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
    if (!err && have) err = put_activity(s, k + 1, acc_bucket, &acc, d);
    return err;
}

/* Rolls every closed bucket of tier k + 1 up from tier k. */
static int rollup(cw_store_t *s, cw__tier_t *t, int k, cw_diag_t *d)
{
    cw__tier_t *up = &t[k + 1];
    int64_t target = cw__floor(t[k].end, up->width);
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
static int apply_retention(cw_store_t *s, cw__tier_t *t, int k, cw_diag_t *d)
{
    cw__tier_t *tk = &t[k];
    int64_t end = t[0].end;
    if (tk->retention <= 0 || end == INT64_MIN || tk->start == INT64_MIN) return 0;
    if ((uint64_t)end - (uint64_t)INT64_MIN <= (uint64_t)tk->retention) return 0;
    /* Aligned to the next tier's buckets, and never past what it has
     * rolled up (its rows come from ours). */
    int64_t align = k + 1 < CW_TIERS ? t[k + 1].width : tk->width;
    int64_t limit = k + 1 < CW_TIERS ? t[k + 1].end : tk->end;
    int64_t h = cw__floor(end - tk->retention, align);
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
            err = step_done(s, st, "deleting empty baselines", d);
        }
    }
    if (!err) tk->horizon = h;
    return err;
}

static int db_size(cw_store_t *s, uint64_t *out, cw_diag_t *d)
{
    int64_t pages, psize;
    int err = query_int(s, "PRAGMA page_count", &pages, d);
    if (!err) err = query_int(s, "PRAGMA page_size", &psize, d);
    if (!err) *out = (uint64_t)pages * (uint64_t)psize;
    return err;
}

/* While the file is over the cap: halve the finest tier's retention that
 * is still above its minimum (a tier kept forever starts from its span),
 * fold, and give the freed pages back. Stops when every tier is at its
 * minimum: the cap is a target, not a promise. */
static int enforce_cap(cw_store_t *s, cw__tier_t *t, cw_diag_t *d)
{
    uint64_t size;
    int err;
    if (!s->opts.size_cap_bytes) return 0;
    while (!(err = db_size(s, &size, d)) && size > s->opts.size_cap_bytes) {
        int64_t free_pages;
        if ((err = query_int(s, "PRAGMA freelist_count", &free_pages, d))) break;
        if (free_pages > 0) { /* pages freed by earlier folding come first */
            if ((err = exec(s, "PRAGMA incremental_vacuum", "returning free pages", d))) break;
            continue;
        }
        int k = 0;
        while (k < CW_TIERS && t[k].retention != 0 && t[k].retention <= min_retention[k])
            k++;
        if (k == CW_TIERS) break;
        int64_t r = t[k].retention;
        if (r == 0) r = t[0].end - t[k].start;
        r /= 2;
        t[k].retention = r < min_retention[k] ? min_retention[k] : r;
        if ((err = apply_retention(s, t, k, d))) break;
        if ((err = exec(s, "PRAGMA incremental_vacuum", "returning free pages", d))) break;
    }
    return err;
}

/* Records the source counters when lost events or drift changed. */
static int put_losses(cw_store_t *s, const cw_batch_t *b, cw_diag_t *d)
{
    sqlite3_stmt *st = NULL;
    int err;
    if (b->events_lost == s->last_lost && b->drift_bytes == s->last_drift) return 0;
    if ((err = cw__store_stmt(s, CW__ST_LOSS_PUT, SQL_LOSS_PUT, &st, d))) return err;
    sqlite3_bind_int64(st, 1, b->bucket_ns + b->width_ns);
    bind_u64(st, 2, b->events_total);
    bind_u64(st, 3, b->events_lost);
    sqlite3_bind_int64(st, 4, b->drift_bytes);
    return step_done(s, st, "storing source counters", d);
}

static int check_batch(cw_store_t *s, const cw_batch_t *b, cw_diag_t *d)
{
    if (s->readonly)
        return cw_diag_set(d, CW_EINVAL, "%s was opened read-only; cannot store a batch", s->path);
    if (b->width_ns != s->tiers[0].width || b->bucket_ns == INT64_MIN ||
        cw__floor(b->bucket_ns, b->width_ns) != b->bucket_ns)
        return cw_diag_set(d, CW_EINVAL,
                           "batch bucket %" PRId64 " of width %" PRId64 " is not a raw-tier "
                           "bucket (width %" PRId64 ")",
                           b->bucket_ns, b->width_ns, s->tiers[0].width);
    if (s->tiers[0].end != INT64_MIN && b->bucket_ns < s->tiers[0].end)
        return cw_diag_set(d, CW_EINVAL,
                           "batch for bucket %" PRId64 " arrives after buckets up to %" PRId64
                           " were stored in %s; buckets are written in time order (replay an "
                           "old trace into a new database, or with --rebase-now)",
                           b->bucket_ns, s->tiers[0].end, s->path);
    for (uint32_t i = 0; i < b->commits.n; i++)
        if (b->commits.v[i].a != CW_TS_BEFORE && b->commits.v[i].a != b->bucket_ns)
            return cw_diag_set(d, CW_EINVAL,
                               "batch for bucket %" PRId64 " holds a commit row "
                               "of another bucket (%" PRId64 ")",
                               b->bucket_ns, b->commits.v[i].a);
    return 0;
}

int cw_store_write(cw_store_t *s, const cw_batch_t *b, cw_diag_t *d)
{
    cw__tier_t t[CW_TIERS];
    int err = check_batch(s, b, d);
    if (err) return err;
    memcpy(t, s->tiers, sizeof t);
    if ((err = exec(s, "BEGIN IMMEDIATE", "starting a transaction", d))) return err;
    if ((err = put_dictionary(s, b, d)) || (err = put_rows(s, b, d))) goto fail;
    if (t[0].start == INT64_MIN)
        for (int k = 0; k < CW_TIERS; k++) {
            t[k].start = cw__floor(b->bucket_ns, t[k].width);
            if (k) t[k].end = t[k].start;
        }
    t[0].end = b->bucket_ns + b->width_ns;
    for (int k = 0; k + 1 < CW_TIERS && !err; k++)
        err = rollup(s, t, k, d);
    for (int k = 0; k < CW_TIERS && !err; k++)
        err = apply_retention(s, t, k, d);
    if (err || (err = put_losses(s, b, d)) || (err = enforce_cap(s, t, d))) goto fail;
    for (int k = 0; k < CW_TIERS && !err; k++)
        if (memcmp(&t[k], &s->tiers[k], sizeof t[k]) != 0) err = put_tier(s, k, &t[k], d);
    if (err || (err = exec(s, "COMMIT", "committing a batch", d))) goto fail;
    memcpy(s->tiers, t, sizeof t);
    s->last_total = b->events_total;
    s->last_lost = b->events_lost;
    s->last_drift = b->drift_bytes;
    return 0;
fail:
    sqlite3_exec(s->db, "ROLLBACK", NULL, NULL, NULL);
    return err;
}
