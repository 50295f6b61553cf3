/* store.c - the SQLite store: opening and creating a database, refusing
 * files that are not ours, schema migrations, and writing batches (tier 0
 * rows, rollups into the minute and hour tiers, retention folding and the
 * size cap), plus metadata and the state a writer needs to continue.
 * Rollups, retention and the cap live in store_tiers.c, window queries in
 * store_report.c, the writer thread in writer.c.
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
#include "commitwatch/downtime.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "commitwatch/event.h"
#include "commitwatch/memstat.h"
#include "store/store_internal.h"
#include "commitwatch/platform.h"

#define HOUR_NS (3600 * CW_NS_PER_S)
#define DAY_NS (24 * HOUR_NS)

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
    "INSERT INTO processes(id, pid, start_ns, exit_ns, name, cmdline, tracking_ended_ns) "
    "VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7) ON CONFLICT(id) DO UPDATE SET pid = excluded.pid, "
    "start_ns = excluded.start_ns, exit_ns = excluded.exit_ns, name = excluded.name, "
    "cmdline = excluded.cmdline, tracking_ended_ns = excluded.tracking_ended_ns";
/* Adds: a BEFORE row receives rundown from several batches. */
static const char SQL_COMMIT_ADD[] =
    "INSERT INTO commits(tier, bucket, proc, stack, bytes, events) "
    "VALUES (?1, ?2, ?3, ?4, ?5, ?6) ON CONFLICT(tier, bucket, proc, stack) "
    "DO UPDATE SET bytes = bytes + excluded.bytes, events = events + excluded.events";
static const char SQL_ACTIVITY_PUT[] =
    "INSERT INTO activity(tier, bucket, proc, events, delta, relpeak, relpeak_ns) "
    "VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)";
static const char SQL_TIER_PUT[] = "UPDATE tiers SET start_ns = ?2, horizon_ns = ?3, end_ns = ?4, "
                                   "retention_ns = ?5 WHERE tier = ?1";
static const char SQL_CORRECTION_PUT[] =
    "UPDATE processes SET corrections = corrections + 1, "
    "corrected_committed = corrected_committed + ?2, "
    "corrected_decommitted = corrected_decommitted + ?3, last_correction_ns = ?4 WHERE id = ?1";
static const char SQL_LOSS_PUT[] =
    "INSERT INTO losses(ts_ns, events_total, lost_events, drift_bytes) VALUES (?1, ?2, ?3, ?4)";
/* Continuing a database (cw_store_load_state). */
static const char SQL_FRAMES_ALL[] = "SELECT id, text FROM frames ORDER BY id";
static const char SQL_STACKS_ALL[] = "SELECT id, frames FROM stacks ORDER BY id";
static const char SQL_MAX_PROC[] = "SELECT coalesce(max(id), 0) FROM processes";
static const char SQL_LAST_LOSS[] =
    "SELECT events_total, lost_events, drift_bytes FROM losses ORDER BY rowid DESC LIMIT 1";

/* ---- helpers ------------------------------------------------------------ */

int cw__store_dberr(cw_store_t *s, const char *what, cw_diag_t *d)
{
    int code = sqlite3_errcode(s->db) & 0xff;
    int err =
        (code == SQLITE_IOERR || code == SQLITE_FULL || code == SQLITE_CANTOPEN) ? CW_EIO : CW_EDB;
    /* A full disk is SQLITE_FULL, or an I/O error whose write failed with
     * ENOSPC (growing the -shm file): CW_ENOSPC, which the writer retries. */
    if (code == SQLITE_IOERR && sqlite3_system_errno(s->db) == ENOSPC) code = SQLITE_FULL;
    if (code == SQLITE_FULL) err = CW_ENOSPC;
    if (code == SQLITE_BUSY || code == SQLITE_LOCKED)
        return cw_diag_set(d, err,
                           "%s failed on %s: %s; another process holds it (a second commitwatch "
                           "service writing to the same database?)",
                           what, s->path, sqlite3_errmsg(s->db));
    if (code == SQLITE_FULL)
        return cw_diag_set(d, err,
                           "%s failed on %s: the disk is full (no space left for the database "
                           "or its WAL); free space or lower size_cap",
                           what, s->path);
    return cw_diag_set(d, err, "%s failed on %s: %s", what, s->path, sqlite3_errmsg(s->db));
}

int cw__store_stmt(cw_store_t *s, int id, const char *sql, sqlite3_stmt **out, cw_diag_t *d)
{
    if (!s->stmts[id] && sqlite3_prepare_v3(s->db, sql, -1, SQLITE_PREPARE_PERSISTENT,
                                            &s->stmts[id], NULL) != SQLITE_OK)
        return cw__store_dberr(s, "preparing a statement", d);
    *out = s->stmts[id];
    return 0;
}

int cw__store_exec(cw_store_t *s, const char *sql, const char *what, cw_diag_t *d)
{
    if (sqlite3_exec(s->db, sql, NULL, NULL, NULL) != SQLITE_OK) return cw__store_dberr(s, what, d);
    return 0;
}

/* Steps a statement that returns no row, then resets it. */
int cw__store_step_done(cw_store_t *s, sqlite3_stmt *st, const char *what, cw_diag_t *d)
{
    int rc = sqlite3_step(st);
    int err = rc == SQLITE_DONE ? 0 : cw__store_dberr(s, what, d);
    sqlite3_reset(st);
    sqlite3_clear_bindings(st);
    return err;
}

/* A single integer from a PRAGMA or SELECT. */
int cw__store_query_int(cw_store_t *s, const char *sql, int64_t *out, cw_diag_t *d)
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

uint64_t cw_store_disk_bytes(const char *path)
{
    char wal[CW_PATH_MAX + 8];
    uint64_t db = 0, w = 0;
    if (!path) return 0;
    snprintf(wal, sizeof wal, "%s-wal", path);
    cw_plat_file_size(path, &db);
    cw_plat_file_size(wal, &w);
    return db + w;
}

int cw_store_schema_version(void)
{
    return (int)cw__schema_count;
}

void cw_store_tune_for_reads(cw_store_t *s)
{
    /* No file mapping: each read connection's map counted the pages its
     * queries touched in the resident set again (4 - 16 connections on a
     * 24 MB file), and the read caches (store_report.c, store_series.c)
     * leave a warm query a few rows to read, which the OS cache serves.
     * A small page cache: a writer's commit empties it anyway. */
    sqlite3_exec(s->db, "PRAGMA mmap_size = 0; PRAGMA cache_size = -2048", NULL, NULL, NULL);
}

/* ---- opening ------------------------------------------------------------ */

enum probe { PROBE_NEW, PROBE_OURS, PROBE_EMPTY_SQLITE };

static uint32_t be32(const unsigned char *p)
{
    return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}

/* A file of ours must hold every page its header counts, in whole pages:
 * a truncated copy is refused before SQLite may open it for writing (it
 * would read what is left, write into the WAL, and fold the WAL into the
 * damaged file at close). The header's page count is trusted only when
 * its "version valid for" matches the change counter (file format, 1.3).
 * With a WAL beside it the file may lawfully be shorter (a checkpoint cut
 * short by a crash wrote page 1 first; SQLite recovers from the WAL), so
 * then only SQLite judges it. */
static int check_whole(const char *path, const unsigned char h[100], cw_diag_t *d)
{
    char wal[CW_PATH_MAX + 8];
    uint32_t page = (uint32_t)h[16] << 8 | h[17];
    uint64_t size = 0, walsize = 0;
    snprintf(wal, sizeof wal, "%s-wal", path);
    if (cw_plat_file_size(wal, &walsize) == 0 && walsize > 0) return 0;
    if (page == 1) page = 65536;
    if (page < 512 || (page & (page - 1)))
        return cw_diag_set(d, CW_ENOTDB,
                           "%s is damaged (its header gives a page size of %" PRIu32 "); it was "
                           "left unchanged: restore it from a backup or give --db a new path",
                           path, page);
    if (cw_plat_file_size(path, &size) != 0)
        return cw_diag_set(d, CW_EIO, "cannot read the size of %s", path);
    uint64_t pages = be32(h + 28);
    bool counted = be32(h + 24) == be32(h + 92) && pages > 0;
    if (size % page != 0 || (counted && size < pages * page))
        return cw_diag_set(d, CW_ENOTDB,
                           "%s is truncated (%" PRIu64 " bytes; its header counts %" PRIu64
                           " pages of %" PRIu32 " bytes); it was left unchanged: restore it "
                           "from a backup or give --db a new path",
                           path, size, counted ? pages : (size + page - 1) / page, page);
    return 0;
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
        return check_whole(path, h, d);
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
    int err = cw__store_query_int(s, "PRAGMA user_version", &v, d);
    if (err) return err;
    for (; v < target; v++) {
        char setv[64];
        snprintf(setv, sizeof setv, "PRAGMA user_version = %d", (int)v + 1);
        if ((err = cw__store_exec(s, "BEGIN IMMEDIATE", "starting a migration", d))) return err;
        if (sqlite3_exec(s->db, cw__schema_sql[v], NULL, NULL, NULL) != SQLITE_OK ||
            sqlite3_exec(s->db, setv, NULL, NULL, NULL) != SQLITE_OK) {
            cw_diag_set(d, CW_EDB,
                        "applying schema migration %d to %s failed: %s; the database was left "
                        "at version %" PRId64,
                        (int)v + 1, s->path, sqlite3_errmsg(s->db), v);
            sqlite3_exec(s->db, "ROLLBACK", NULL, NULL, NULL);
            return CW_EDB;
        }
        if ((err = cw__store_exec(s, "COMMIT", "committing a migration", d))) return err;
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
    return cw__store_step_done(s, st, "saving a tier's state", d);
}

/* Takes the retention settings and the last source counters. */
static int load_writer_state(cw_store_t *s, cw_diag_t *d)
{
    sqlite3_stmt *st = NULL;
    int err = cw__store_read_tiers(s, s->tiers, d);
    if (err) return err;
    if ((err = cw__store_exec(s, "BEGIN IMMEDIATE", "starting a transaction", d))) return err;
    for (int k = 0; k < CW_TIERS && !err; k++) {
        s->tiers[k].retention = s->opts.retention_ns[k];
        err = put_tier(s, k, &s->tiers[k], d);
    }
    if (!err) err = cw__store_exec(s, "COMMIT", "saving the retention settings", d);
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

/* readonly: a reader; side: a writer of the side tables (alerts,
 * silences, notifications) on an existing database at the current
 * schema, which leaves the tiers to the service's writer; neither: the
 * writer (creates and migrates). */
/* size_cap counts the WAL too. Without a cap SQLite checkpoints when the
 * WAL passes 1000 pages (4 MiB) and never shrinks the file. With a cap,
 * wal_hook (which replaces SQLite's automatic checkpoint) checkpoints
 * after every commit that leaves the WAL past s->wal_bound, an eighth of the
 * cap (4 to 1000 pages), and journal_size_limit truncates the file back
 * to that once the WAL restarts; the main file is held to the rest of the
 * cap (cw__store_enforce_cap). The WAL restarts only when no reader still
 * reads an older snapshot from it: a long read (the alert engine catching
 * up, an API query over a long window) lets it grow. So past four times
 * the bound the hook asks for a TRUNCATE checkpoint, which waits for those
 * readers for up to 250 ms (then a PASSIVE one as below) and blocks new
 * ones meanwhile. Both run on the writer's thread, inside its COMMIT. */
static int wal_hook(void *ctx, sqlite3 *db, const char *name, int frames)
{
    cw_store_t *s = ctx;
    uint64_t pages = s->wal_bound / (uint64_t)s->page_size;
    if ((uint64_t)frames >= 4 * pages) {
        sqlite3_busy_timeout(db, 250); /* the writer waits this long, not 5 s */
        int rc = sqlite3_wal_checkpoint_v2(db, name, SQLITE_CHECKPOINT_TRUNCATE, NULL, NULL);
        sqlite3_busy_timeout(db, CW__STORE_BUSY_MS);
        if (rc == SQLITE_OK) return SQLITE_OK;
    }
    if ((uint64_t)frames >= pages)
        sqlite3_wal_checkpoint_v2(db, name, SQLITE_CHECKPOINT_PASSIVE, NULL, NULL);
    return SQLITE_OK; /* a busy checkpoint is tried again after the next commit */
}

static int bound_wal(cw_store_t *s, cw_diag_t *d)
{
    uint64_t pages = s->opts.size_cap_bytes / 8 / (uint64_t)s->page_size;
    if (pages < 4) pages = 4;
    if (pages > 1000) pages = 1000;
    s->wal_bound = pages * (uint64_t)s->page_size;
    char sql[64];
    snprintf(sql, sizeof sql, "PRAGMA journal_size_limit = %" PRIu64, s->wal_bound);
    int err = cw__store_exec(s, sql, "bounding the WAL for size_cap", d);
    if (!err) sqlite3_wal_hook(s->db, wal_hook, s);
    return err;
}

static int open_impl(const char *path, const cw_store_opts_t *opts, bool readonly, bool side,
                     int target, cw_store_t **out, cw_diag_t *d)
{
    cw_store_t *s = NULL;
    enum probe kind = PROBE_OURS;
    int64_t v;
    int err;
    if (readonly || side) {
        /* A reader or a side writer opens a file the service may hold
         * open in this same process: an fd of our own on it (probe_file)
         * would drop, when closed, every POSIX lock the process's SQLite
         * connections hold on it, and another process's connection could
         * then checkpoint and delete the WAL under them (SQLite's "How To
         * Corrupt", 2.2.1). So no probe: the file must exist, SQLite
         * opens it read-only first, and application_id and the schema
         * version are checked before anything can write. */
        uint64_t size = 0;
        if (cw_plat_file_size(path, &size) != 0 || size == 0)
            return cw_diag_set(d, CW_ENOENT,
                               "%s does not exist yet; start the commitwatch service to "
                               "create it",
                               path);
        if (side) {
            if ((err = open_impl(path, NULL, true, false, 0, &s, d))) return err;
            cw_store_close(s);
            s = NULL;
        }
    } else {
        if ((err = probe_file(path, &kind, d))) return err;
        if (kind == PROBE_EMPTY_SQLITE && (err = check_no_tables(path, d))) return err;
    }

    err = CW_ENOMEM;
    if (!(s = calloc(1, sizeof *s)) || !(s->path = strdup(path))) goto fail;
    s->readonly = readonly;
    s->pruned_to = INT64_MIN;
    if (opts)
        s->opts = *opts;
    else
        cw_store_opts_default(&s->opts);
    int flags = readonly ? SQLITE_OPEN_READONLY
                : side   ? SQLITE_OPEN_READWRITE
                         : SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE;
    if (sqlite3_open_v2(path, &s->db, flags | SQLITE_OPEN_NOMUTEX, NULL) != SQLITE_OK) {
        err = s->db ? cw_diag_set(d, CW_EIO,
                                  "cannot open %s: %s; check that its directory exists and that "
                                  "commitwatch may write there",
                                  path, sqlite3_errmsg(s->db))
                    : cw_diag_set(d, CW_ENOMEM, "out of memory opening %s", path);
        goto fail;
    }
    sqlite3_busy_timeout(s->db, CW__STORE_BUSY_MS);
    /* SQLite opens a file it may not write read-only without a word; the
     * service's writes would then fail later, one by one. */
    if (!readonly && sqlite3_db_readonly(s->db, "main") == 1) {
        err = cw_diag_set(d, CW_EPERM,
                          "%s is read-only (its permissions or its file system); commitwatch "
                          "stores into it and left it unchanged: make it writable for the "
                          "service, or give --db a new path",
                          path);
        goto fail;
    }
    if (!readonly && !side && kind == PROBE_OURS) {
        /* A creation killed half-way leaves our header with a hot
         * rollback journal: SQLite rolls it back at the first read, to
         * the empty file it was. Then the file is new again. */
        int64_t app = 0, tables = 0;
        if (cw__store_query_int(s, "PRAGMA application_id", &app, NULL) == 0 && app == 0 &&
            cw__store_query_int(s, "SELECT count(*) FROM sqlite_schema", &tables, NULL) == 0 &&
            tables == 0)
            kind = PROBE_NEW;
    }
    if (!readonly && kind != PROBE_OURS) {
        /* A new file: page layout settings come first, before any table. */
        char sql[160];
        snprintf(sql, sizeof sql,
                 "PRAGMA auto_vacuum = INCREMENTAL; PRAGMA application_id = %d; "
                 "PRAGMA journal_mode = WAL",
                 CW__STORE_APP_ID);
        if ((err = cw__store_exec(s, sql, "creating the database", d))) goto fail;
    }
    if ((err = cw__store_query_int(s, "PRAGMA application_id", &v, d))) {
        if ((sqlite3_errcode(s->db) & 0xff) == SQLITE_NOTADB)
            err = cw_diag_set(d, CW_ENOTDB, "%s is not a commitwatch database", path);
        goto fail;
    }
    if ((err = cw__store_query_int(s, "PRAGMA page_size", &s->page_size, d))) goto fail;
    if (v != CW__STORE_APP_ID) {
        err = cw_diag_set(d, CW_ENOTDB, "%s is not a commitwatch database", path);
        goto fail;
    }
    /* Refuse a newer schema before anything may write to the file. */
    if ((err = cw__store_query_int(s, "PRAGMA user_version", &v, d))) goto fail;
    if (v > (int64_t)cw__schema_count) {
        err = cw_diag_set(d, CW_ENEWER,
                          "%s has schema version %" PRId64 ", newer than version %d that "
                          "commitwatch " CW_VERSION " knows; upgrade commitwatch to use it (the "
                          "file was left unchanged)",
                          path, v, (int)cw__schema_count);
        goto fail;
    }
    if (!readonly &&
        (err = cw__store_exec(s, "PRAGMA journal_mode = WAL; PRAGMA synchronous = NORMAL",
                              "setting the journal mode", d)))
        goto fail;
    if (!readonly && !side && s->opts.size_cap_bytes && (err = bound_wal(s, d))) goto fail;
    if (readonly || side) {
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
    return open_impl(path, opts, false, false, (int)cw__schema_count, out, d);
}

int cw_store_open_readonly(const char *path, cw_store_t **out, cw_diag_t *d)
{
    return open_impl(path, NULL, true, false, 0, out, d);
}

int cw_store_open_side(const char *path, cw_store_t **out, cw_diag_t *d)
{
    return open_impl(path, NULL, false, true, 0, out, d);
}

int cw__store_create_at_version(const char *path, int version, cw_diag_t *d)
{
    cw_store_t *s = NULL;
    enum probe kind;
    if (version < 1 || version > (int)cw__schema_count)
        return cw_diag_set(d, CW_EINVAL, "schema version %d does not exist", version);
    int err = probe_file(path, &kind, d);
    if (!err && kind != PROBE_NEW)
        err = cw_diag_set(d, CW_EINVAL, "%s exists; the test hook only creates new files", path);
    if (!err) err = open_impl(path, NULL, false, false, version, &s, d);
    cw_store_close(s);
    return err;
}

void cw_store_close(cw_store_t *s)
{
    if (!s) return;
    for (int i = 0; i < CW__ST__COUNT; i++)
        sqlite3_finalize(s->stmts[i]);
    cw__store_roll_reset(s, true);
    if (!s->readonly) cw_mem_set(CW_MEM_STORE_ROLLUPS, 0); /* the writer's */
    cw_store_drop_read_caches(s);
    sqlite3_close(s->db);
    free(s->path);
    free(s);
}

void cw_store_drop_read_caches(cw_store_t *s)
{
    cw__store_report_cache_free(s->report_cache);
    cw__store_raw_tail_free(s->raw_tail);
    cw__store_series_cache_free(s->series_cache);
    cw__store_metrics_cache_free(s->metrics_cache);
    s->report_cache = NULL;
    s->raw_tail = NULL;
    s->series_cache = NULL;
    s->metrics_cache = NULL;
    cw__store_caches_publish(s, true);
}

/* ---- metadata and continuing a database ----------------------------------- */

int cw_store_meta_set(cw_store_t *s, const char *key, const char *value, cw_diag_t *d)
{
    sqlite3_stmt *st = NULL;
    int err = cw__store_stmt(s, CW__ST_META_SET, SQL_META_SET, &st, d);
    if (err) return err;
    sqlite3_bind_text(st, 1, key, -1, SQLITE_STATIC);
    sqlite3_bind_text(st, 2, value, -1, SQLITE_STATIC);
    return cw__store_step_done(s, st, "saving a metadata value", d);
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

int cw_store_downtime_get(cw_store_t *s, cw_downtime_t *dt, cw_diag_t *d)
{
    char *v = NULL;
    int err = cw_store_meta_get(s, CW_DOWNTIME_META_KEY, &v, d);
    cw_downtime_parse(dt, err ? NULL : v);
    free(v);
    return err;
}

int cw_store_downtime_set(cw_store_t *s, const cw_downtime_t *dt, cw_diag_t *d)
{
    char buf[CW_DOWNTIME_TEXT];
    return cw_store_meta_set(s, CW_DOWNTIME_META_KEY, cw_downtime_format(dt, buf, sizeof buf), d);
}

/* Interns every stored frame, then every stored stack, checking that the
 * ids come out equal (they are dense from 1 and 0). */
static int load_dictionary(cw_store_t *s, cw_stacks_t *stacks, cw_diag_t *d)
{
    sqlite3_stmt *st = NULL;
    uint32_t *fr = NULL, id;
    size_t frcap = 0;
    int err = 0, rc;
    if (sqlite3_prepare_v2(s->db, SQL_FRAMES_ALL, -1, &st, NULL))
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
    if (sqlite3_prepare_v2(s->db, SQL_STACKS_ALL, -1, &st, NULL)) goto dberr;
    while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
        const unsigned char *blob = sqlite3_column_blob(st, 1);
        uint32_t n = (uint32_t)sqlite3_column_bytes(st, 1) / 4;
        if (CW_RESERVE(fr, frcap, n ? n : 1)) {
            err = CW_ENOMEM;
            goto out;
        }
        cw__store_frames_decode(blob, n, fr);
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
    if (!err) err = cw__store_query_int(s, SQL_MAX_PROC, &maxid, d);
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
    size_t blobcap = 0;
    int err = 0;
    for (uint32_t i = 0; i < b->frames.n && !err; i++) {
        if ((err = cw__store_stmt(s, CW__ST_FRAME_PUT, SQL_FRAME_PUT, &st, d))) break;
        sqlite3_bind_int64(st, 1, b->frames.v[i].id);
        sqlite3_bind_text(st, 2, b->frames.v[i].text, -1, SQLITE_STATIC);
        err = cw__store_step_done(s, st, "storing a frame", d);
    }
    for (uint32_t i = 0; i < b->stacks.n && !err; i++) {
        const cw_row_stack_t *r = &b->stacks.v[i];
        if (CW_RESERVE(blob, blobcap, (size_t)r->nframes * 4 + 1)) {
            err = CW_ENOMEM;
            break;
        }
        cw__store_frames_encode(r->frames, r->nframes, blob);
        if ((err = cw__store_stmt(s, CW__ST_STACK_PUT, SQL_STACK_PUT, &st, d))) break;
        sqlite3_bind_int64(st, 1, r->id);
        sqlite3_bind_blob(st, 2, blob, (int)r->nframes * 4, SQLITE_STATIC);
        sqlite3_bind_text(st, 3, r->tag ? r->tag : "Other", -1, SQLITE_STATIC);
        err = cw__store_step_done(s, st, "storing a stack", d);
    }
    for (uint32_t i = 0; i < b->procs.n && !err; i++) {
        const cw_row_proc_t *r = &b->procs.v[i];
        if ((err = cw__store_stmt(s, CW__ST_PROC_PUT, SQL_PROC_PUT, &st, d))) break;
        sqlite3_bind_int64(st, 1, r->id);
        sqlite3_bind_int64(st, 2, r->pid);
        sqlite3_bind_int64(st, 3, r->start_ns);
        /* The end of tracking is not an exit (schema/003): the instance's
         * end time goes to its own column, exit_ns stays NULL. */
        if (r->exit_ns != CW_TS_NEVER)
            sqlite3_bind_int64(st, r->tracking_ended ? 7 : 4, r->exit_ns);
        sqlite3_bind_text(st, 5, r->name ? r->name : "", -1, SQLITE_STATIC);
        if (r->cmdline) sqlite3_bind_text(st, 6, r->cmdline, -1, SQLITE_STATIC);
        err = cw__store_step_done(s, st, "storing a process", d);
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
    return cw__store_step_done(s, st, "storing commits", d);
}

int cw__store_put_activity(cw_store_t *s, int tier, int64_t bucket, const cw_row_activity_t *r,
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
    return cw__store_step_done(s, st, "storing activity", d);
}

/* Plain inserts of many rows, CW__STORE_MULTI a statement: "INSERT INTO
 * t(cols) VALUES (?1, ?2, ?3, ...), (?1, ?2, ...), ..." with the tier and
 * the bucket bound once (?1, ?2) and each row's own columns after them.
 * One statement of many rows costs one step, one reset and one parse of
 * the VDBE program's prologue instead of one each a row. */
#define MULTI CW__STORE_MULTI

enum { TB_COMMITS, TB_RELEASES, TB_ACTIVITY };
static const struct {
    const char *head; /* up to VALUES */
    int own;          /* the row's own columns, after tier and bucket */
    int one, many;    /* statement slots */
} ins_tables[] = {
    {"INSERT INTO commits(tier, bucket, proc, stack, bytes, events) VALUES ", 4, CW__ST_COMMIT_INS,
     CW__ST_COMMIT_INS_N},
    {"INSERT INTO releases(tier, f, proc, stack, a, bytes, pieces, closed) VALUES ", 6,
     CW__ST_RELEASE_INS, CW__ST_RELEASE_INS_N},
    {"INSERT INTO activity(tier, bucket, proc, events, delta, relpeak, relpeak_ns) VALUES ", 5,
     CW__ST_ACTIVITY_INS, CW__ST_ACTIVITY_INS_N},
};

static int ins_stmt(cw_store_t *s, int tb, int rows, sqlite3_stmt **out, cw_diag_t *d)
{
    int id = rows == 1 ? ins_tables[tb].one : ins_tables[tb].many, own = ins_tables[tb].own;
    if (s->stmts[id]) {
        *out = s->stmts[id];
        return 0;
    }
    cw_buf_t sql = {0};
    cw_buf_puts(&sql, ins_tables[tb].head);
    for (int r = 0; r < rows; r++) {
        cw_buf_puts(&sql, r ? ", (?1, ?2" : "(?1, ?2");
        for (int c = 0; c < own; c++)
            cw_buf_printf(&sql, ", ?%d", 3 + r * own + c);
        cw_buf_puts(&sql, ")");
    }
    int err = sql.failed ? CW_ENOMEM : cw__store_stmt(s, id, sql.p, out, d);
    free(sql.p);
    return err;
}

/* The own columns of row r of table tb, in the statement's order. */
static void ins_cols(int tb, const void *rows, uint32_t r, int64_t v[6])
{
    if (tb == TB_COMMITS) {
        const cw_row_commit_t *c = (const cw_row_commit_t *)rows + r;
        v[0] = c->proc, v[1] = c->stack, v[2] = (int64_t)c->bytes, v[3] = (int64_t)c->events;
    } else if (tb == TB_RELEASES) {
        const cw_row_release_t *c = (const cw_row_release_t *)rows + r;
        v[0] = c->proc, v[1] = c->stack, v[2] = c->a, v[3] = (int64_t)c->bytes;
        v[4] = (int64_t)c->pieces, v[5] = (int64_t)c->closed;
    } else {
        const cw_row_activity_t *c = (const cw_row_activity_t *)rows + r;
        v[0] = c->proc, v[1] = (int64_t)c->events, v[2] = c->delta, v[3] = c->relpeak;
        v[4] = c->relpeak_ns;
    }
}

static int ins_table(cw_store_t *s, int tb, int tier, int64_t bucket, const void *rows, uint32_t n,
                     cw_diag_t *d)
{
    static const char *const what[] = {"storing commits", "storing releases", "storing activity"};
    int own = ins_tables[tb].own, err = 0;
    for (uint32_t i = 0; i < n && !err;) {
        int k = n - i >= MULTI ? MULTI : 1;
        sqlite3_stmt *st = NULL;
        if ((err = ins_stmt(s, tb, k, &st, d))) break;
        sqlite3_bind_int(st, 1, tier);
        sqlite3_bind_int64(st, 2, bucket);
        for (int r = 0; r < k; r++) {
            int64_t v[6];
            ins_cols(tb, rows, i + (uint32_t)r, v);
            for (int c = 0; c < own; c++)
                sqlite3_bind_int64(st, 3 + r * own + c, v[c]);
        }
        /* Every parameter is bound again next time: no clear_bindings. */
        if (sqlite3_step(st) != SQLITE_DONE) err = cw__store_dberr(s, what[tb], d);
        sqlite3_reset(st);
        i += (uint32_t)k;
    }
    return err;
}

int cw__store_ins_rows(cw_store_t *s, int tier, int64_t bucket, const cw_row_commit_t *c,
                       uint32_t nc, const cw_row_release_t *r, uint32_t nr,
                       const cw_row_activity_t *a, uint32_t na, cw_diag_t *d)
{
    int err = ins_table(s, TB_COMMITS, tier, bucket, c, nc, d);
    if (!err) err = ins_table(s, TB_RELEASES, tier, bucket, r, nr, d);
    if (!err) err = ins_table(s, TB_ACTIVITY, tier, bucket, a, na, d);
    return err;
}

/* Rundown commits add to every tier's BEFORE row (several batches may
 * carry rundown of one (proc, stack)). */
static int put_rundown(cw_store_t *s, const cw_batch_t *b, cw_diag_t *d)
{
    int err = 0;
    for (uint32_t i = 0; i < b->commits.n && !err; i++)
        if (b->commits.v[i].a == CW_TS_BEFORE)
            for (int k = 0; k < CW_TIERS && !err; k++)
                err = put_commit(s, k, CW_TS_BEFORE, &b->commits.v[i], d);
    return err;
}

/* Counts a batch's corrections on their instances (schema
 * 007_corrections). Each instance's row is stored by then: a correction
 * rides in the batch of its bucket, which is that of the instance's start
 * or later (agg.h), and put_dictionary stored this batch's. */
static int put_corrections(cw_store_t *s, const cw_batch_t *b, cw_diag_t *d)
{
    sqlite3_stmt *st = NULL;
    int err = 0;
    for (uint32_t i = 0; i < b->corrections.n && !err; i++) {
        const cw_row_correction_t *r = &b->corrections.v[i];
        if ((err = cw__store_stmt(s, CW__ST_CORRECTION_PUT, SQL_CORRECTION_PUT, &st, d))) break;
        sqlite3_bind_int64(st, 1, r->proc);
        bind_u64(st, 2, r->committed);
        bind_u64(st, 3, r->decommitted);
        sqlite3_bind_int64(st, 4, r->ts_ns);
        err = cw__store_step_done(s, st, "storing a correction", d);
    }
    return err;
}

/* Records the source counters when lost events or drift changed. */
static int put_losses(cw_store_t *s, const cw_batch_t *b, uint64_t last_lost, int64_t last_drift,
                      cw_diag_t *d)
{
    sqlite3_stmt *st = NULL;
    int err;
    if (b->events_lost == last_lost && b->drift_bytes == last_drift) return 0;
    if ((err = cw__store_stmt(s, CW__ST_LOSS_PUT, SQL_LOSS_PUT, &st, d))) return err;
    sqlite3_bind_int64(st, 1, b->bucket_ns + b->width_ns);
    bind_u64(st, 2, b->events_total);
    bind_u64(st, 3, b->events_lost);
    sqlite3_bind_int64(st, 4, b->drift_bytes);
    return cw__store_step_done(s, st, "storing source counters", d);
}

static int check_batch(cw_store_t *s, const cw__tier_t *t, const cw_batch_t *b, cw_diag_t *d)
{
    if (s->readonly)
        return cw_diag_set(d, CW_EINVAL, "%s was opened read-only; cannot store a batch", s->path);
    if (b->width_ns != s->tiers[0].width || b->bucket_ns == INT64_MIN ||
        cw_floor_to(b->bucket_ns, b->width_ns) != b->bucket_ns)
        return cw_diag_set(d, CW_EINVAL,
                           "batch bucket %" PRId64 " of width %" PRId64 " is not a raw-tier "
                           "bucket (width %" PRId64 ")",
                           b->bucket_ns, b->width_ns, s->tiers[0].width);
    if (t[0].end != INT64_MIN && b->bucket_ns < t[0].end)
        return cw_diag_set(d, CW_EINVAL,
                           "batch for bucket %" PRId64 " arrives after buckets up to %" PRId64
                           " were stored in %s; buckets are written in time order (replay an "
                           "old trace into a new database, or with --rebase-now)",
                           b->bucket_ns, t[0].end, s->path);
    for (uint32_t i = 0; i < b->commits.n; i++)
        if (b->commits.v[i].a != CW_TS_BEFORE && b->commits.v[i].a != b->bucket_ns)
            return cw_diag_set(d, CW_EINVAL,
                               "batch for bucket %" PRId64 " holds a commit row "
                               "of another bucket (%" PRId64 ")",
                               b->bucket_ns, b->commits.v[i].a);
    return 0;
}

/* One batch inside the caller's transaction, on its copy t of the tiers:
 * the dictionary, the rundown rows, tier 0 with the minute (hour) it
 * closes rolled up, retention, the source counters. */
static int write_one(cw_store_t *s, cw__tier_t *t, const cw_batch_t *b, uint64_t *last_lost,
                     int64_t *last_drift, cw_diag_t *d)
{
    int err = check_batch(s, t, b, d);
    if (err || (err = put_dictionary(s, b, d)) || (err = put_rundown(s, b, d)) ||
        (err = cw__store_put_folded(s, b, d)) || (err = cw__store_put_maps(s, b, d)) ||
        (err = put_corrections(s, b, d)))
        return err;
    if (t[0].start == INT64_MIN)
        for (int k = 0; k < CW_TIERS; k++) {
            t[k].start = cw_floor_to(b->bucket_ns, t[k].width);
            if (k) t[k].end = t[k].start;
        }
    if ((err = cw__store_put_raw(s, t, b, d))) return err;
    t[0].end = b->bucket_ns + b->width_ns;
    if ((err = cw__store_rollup(s, t, 0, cw_floor_to(t[0].end, t[1].width), d))) return err;
    for (int k = 0; k < CW_TIERS && !err; k++)
        err = cw__store_retain(s, t, k, d);
    if (err || (err = put_losses(s, b, *last_lost, *last_drift, d))) return err;
    *last_lost = b->events_lost;
    *last_drift = b->drift_bytes;
    return 0;
}

int cw_store_write_many(cw_store_t *s, const cw_batch_t *const *b, size_t n, cw_diag_t *d)
{
    cw__tier_t t[CW_TIERS];
    uint64_t last_lost = s->last_lost;
    int64_t last_drift = s->last_drift;
    int err = 0;
    if (!n) return 0;
    if (s->readonly)
        return cw_diag_set(d, CW_EINVAL, "%s was opened read-only; cannot store a batch", s->path);
    memcpy(t, s->tiers, sizeof t);
    if ((err = cw__store_exec(s, "BEGIN IMMEDIATE", "starting a transaction", d))) return err;
    for (size_t i = 0; i < n && !err; i++)
        err = write_one(s, t, b[i], &last_lost, &last_drift, d);
    if (err || (err = cw__store_enforce_cap(s, t, d)) || (err = cw__store_prune(s, t, d)) ||
        (err = cw__store_prune_maps(s, t, d)))
        goto fail;
    for (int k = 0; k < CW_TIERS && !err; k++)
        if (memcmp(&t[k], &s->tiers[k], sizeof t[k]) != 0) err = put_tier(s, k, &t[k], d);
    if (err || (err = cw__store_exec(s, "COMMIT", "committing a batch", d))) goto fail;
    memcpy(s->tiers, t, sizeof t);
    s->transactions++;
    s->last_total = b[n - 1]->events_total;
    s->last_lost = last_lost;
    s->last_drift = last_drift;
    cw_mem_set(CW_MEM_STORE_ROLLUPS, (int64_t)cw__store_roll_bytes(s));
    return 0;
fail:
    sqlite3_exec(s->db, "ROLLBACK", NULL, NULL, NULL);
    s->pruned_to = INT64_MIN; /* the prune's deletes were rolled back too */
    /* The sums hold rows that were rolled back: the buckets they were
     * for go by SQL from what the database holds. */
    cw__store_roll_reset(s, false);
    cw_mem_set(CW_MEM_STORE_ROLLUPS, (int64_t)cw__store_roll_bytes(s));
    return err;
}

int cw_store_write(cw_store_t *s, const cw_batch_t *b, cw_diag_t *d)
{
    return cw_store_write_many(s, &b, 1, d);
}
