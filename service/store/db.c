/* db.c - the store's ground floor: the only file that knows SQLite's
 * handle lifecycle. Opening a database (refusing files that are not ours
 * before SQLite may write to them, the schema migrations, the WAL bound of
 * size_cap), closing it, the cache of prepared statements, read
 * transactions, the tiers table, the meta table, and turning SQLite's
 * errors into CW_E* codes with a message.
 *
 * It calls nothing in the files above it: what they hang on a handle (the
 * writer's rollup sums, the readers' caches) they free themselves through
 * the release slots they register (cw__db_on_release), which closing calls.
 * A handle is used by one thread at a time (docs/DESIGN.md, "Threads"). */
#include "store/db.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "commitwatch/downtime.h"
#include "commitwatch/platform.h"
#include "store/cells.h"

#define HOUR_NS (3600 * CW_NS_PER_S)
#define DAY_NS (24 * HOUR_NS)

static const char SQL_META_SET[] = "INSERT INTO meta(key, value) VALUES (?1, ?2) "
                                   "ON CONFLICT(key) DO UPDATE SET value = excluded.value";
static const char SQL_META_GET[] = "SELECT value FROM meta WHERE key = ?1";
static const char SQL_READ_BEGIN[] = "BEGIN";
static const char SQL_READ_END[] = "COMMIT";

/* ---- statements and errors ---------------------------------------------- */

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
                           "%s failed on %s: %s; another writer held it too long (this "
                           "service's writer under a heavy load, or a second commitwatch service "
                           "writing to the same database?)",
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

int cw__store_put_ints(cw_store_t *s, int id, const char *sql, const int64_t *v, size_t n,
                       const char *what, cw_diag_t *d)
{
    sqlite3_stmt *st = NULL;
    int err = cw__store_stmt(s, id, sql, &st, d);
    if (err) return err;
    for (size_t i = 0; i < n; i++)
        sqlite3_bind_int64(st, (int)i + 1, v[i]);
    return cw__store_step_done(s, st, what, d);
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

/* Schema 8's tables not converted to cells yet, or schema 9's folded rows
 * not converted to runs (store_upgrade.c). */
static const char SQL_CONVERTING[] = "SELECT count(*) FROM sqlite_schema WHERE type = 'table' "
                                     "AND name IN ('v8_commits', 'v9_folded')";

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
    /* The heap layer has the raw tier only: to its readers the coarser
     * tiers hold nothing. */
    if (!err && s->layer != 0)
        for (int k = 1; k < CW_TIERS; k++)
            t[k].end = t[k].start;
    return err;
}

int cw__store_read_open(cw_store_t *s, cw__tier_t t[CW__TIERS_READ], cw_diag_t *d)
{
    _Static_assert(CW__TIER_OPEN == 3, "the open hour's tier number is in its SQL");
    static const char sql[] = "SELECT start_ns, end_ns FROM tiers WHERE tier = 3";
    cw__tier_t *o = &t[CW__TIER_OPEN];
    sqlite3_stmt *st = NULL;
    *o = (cw__tier_t){t[2].width, INT64_MIN, INT64_MIN, INT64_MIN, 0};
    int err = cw__store_stmt(s, CW__ST_OPEN_GET, sql, &st, d);
    if (err) return err;
    int64_t start = INT64_MIN, end = INT64_MIN;
    int rc = sqlite3_step(st);
    if (rc == SQLITE_ROW) {
        start = sqlite3_column_int64(st, 0);
        end = sqlite3_column_int64(st, 1);
    } else if (rc != SQLITE_DONE) {
        err = cw__store_dberr(s, "reading the tiers", d);
    }
    sqlite3_reset(st);
    /* The writer keeps the row in step with the two tiers' ends (in the
     * same transactions); a database written by a build without it holds
     * none, and the heap layer has no minute tier. */
    if (!err && start != INT64_MIN && start == t[2].end && end == t[1].end && start < end &&
        s->layer == 0 && !s->test.read_cache_off) {
        o->start = start;
        o->end = end;
    }
    return err;
}

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

/* readonly: a reader; side: a writer of the side tables (alerts,
 * silences, notifications) on an existing database at the current
 * schema, which leaves the tiers to the service's writer; neither: the
 * writer (creates and migrates). */
int cw__db_open(const char *path, const cw_store_opts_t *opts, bool readonly, bool side, int target,
                cw_store_t **out, cw_diag_t *d)
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
            if ((err = cw__db_open(path, NULL, true, false, 0, &s, d))) return err;
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
    if (cw__cells_register(s->db, &s->layer) != SQLITE_OK) {
        err = cw__store_dberr(s, "registering the cell functions", d);
        goto fail;
    }
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
        int64_t converting = 0;
        if ((err = cw__store_query_int(s, SQL_CONVERTING, &converting, d))) goto fail;
        if (converting) {
            err = cw_diag_set(d, CW_EDB,
                              "%s is being converted to schema version %d by the commitwatch "
                              "service (its log says how far); open it when that has ended",
                              path, (int)cw__schema_count);
            goto fail;
        }
    } else {
        if ((err = migrate(s, target, d))) goto fail;
    }
    /* The readers' rows over the cells (cells.h), on a database at the
     * current schema only: they would hide an older schema's tables. */
    if ((readonly || side || target == (int)cw__schema_count) &&
        (err = cw__store_exec(s, cw__cells_views_sql, "creating the cell views", d)))
        goto fail;
    *out = s;
    return 0;
fail:
    cw_store_close(s);
    return err;
}

int cw_store_open_readonly(const char *path, cw_store_t **out, cw_diag_t *d)
{
    return cw__db_open(path, NULL, true, false, 0, out, d);
}

int cw_store_open_side(const char *path, cw_store_t **out, cw_diag_t *d)
{
    return cw__db_open(path, NULL, false, true, 0, out, d);
}

void cw__db_on_release(cw_store_t *s, enum cw__release slot, cw__release_fn *fn)
{
    s->release[slot] = fn;
}

void cw_store_close(cw_store_t *s)
{
    if (!s) return;
    for (int i = 0; i < CW__ST__COUNT; i++)
        sqlite3_finalize(s->stmts[i]);
    for (int i = 0; i < CW__REL__COUNT; i++)
        if (s->release[i]) s->release[i](s);
    sqlite3_close(s->db);
    free(s->path);
    free(s);
}

void cw_store_drop_read_caches(cw_store_t *s)
{
    for (int i = CW__REL_READERS; i < CW__REL__COUNT; i++)
        if (s->release[i]) s->release[i](s);
}

int cw__db_check_new(const char *path, cw_diag_t *d)
{
    enum probe kind;
    int err = probe_file(path, &kind, d);
    if (!err && kind != PROBE_NEW)
        err = cw_diag_set(d, CW_EINVAL, "%s exists; the test hook only creates new files", path);
    return err;
}

/* ---- the meta table ------------------------------------------------------ */

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

/* ---- read transactions --------------------------------------------------- */

void cw__store_stmt_done(sqlite3_stmt *st)
{
    sqlite3_reset(st);
    sqlite3_clear_bindings(st);
}

/* Steps one of the cached statements that return no row. */
static int step_cached(cw_store_t *s, int id, const char *sql, const char *what, cw_diag_t *d)
{
    sqlite3_stmt *st = NULL;
    int err = cw__store_stmt(s, id, sql, &st, d);
    if (!err) err = cw__store_step_done(s, st, what, d);
    return err;
}

int cw__store_read_begin(cw_store_t *s, bool *began, cw_diag_t *d)
{
    *began = false;
    if (!sqlite3_get_autocommit(s->db)) return 0; /* inside the caller's transaction */
    int err = step_cached(s, CW__ST_READ_BEGIN, SQL_READ_BEGIN, "starting a read", d);
    *began = err == 0;
    return err;
}

void cw__store_read_end(cw_store_t *s, bool began)
{
    /* Ending a read transaction releases its snapshot; it cannot lose
     * anything, so a failure has nothing to report. */
    if (began) step_cached(s, CW__ST_READ_END, SQL_READ_END, "ending a read", NULL);
}
