/* store_map.c - map snapshots of live instances (schema/006_map, a rowid
 * table since 010_folded_runs; map.h): storing a batch's snapshots,
 * pruning them with the raw tier, and reading the one in force at an
 * instant. */
#include <stdlib.h>
#include <string.h>

#include "commitwatch/query.h"
#include "store/store_internal.h"

static const char SQL_MAP_PUT[] =
    "INSERT OR REPLACE INTO map_snapshots(proc, ts_ns, nranges, bytes, ranges) "
    "VALUES (?1, ?2, ?3, ?4, ?5)";
static const char SQL_MAP_PRUNE[] = "DELETE FROM map_snapshots WHERE ts_ns < ?1";
static const char SQL_MAP_AT[] = "SELECT ts_ns, ranges FROM map_snapshots WHERE proc = ?1 "
                                 "AND ts_ns <= ?2 ORDER BY ts_ns DESC LIMIT 1";
static const char SQL_MAP_TIMES[] =
    "SELECT ts_ns FROM map_snapshots WHERE proc = ?1 ORDER BY ts_ns DESC LIMIT ?2";

/* Binds each row itself, like put_dictionary's loops in store.c: the ranges go as a blob,
 * which cw__store_put_ints does not take. */
int cw__store_put_maps(cw_store_t *s, const cw_batch_t *b, cw_diag_t *d)
{
    sqlite3_stmt *st = NULL;
    int err = 0;
    for (uint32_t i = 0; i < b->maps.n && !err; i++) {
        const cw_row_map_t *r = &b->maps.v[i];
        if ((err = cw__store_stmt(s, CW__ST_MAP_PUT, SQL_MAP_PUT, &st, d))) break;
        sqlite3_bind_int64(st, 1, r->proc);
        sqlite3_bind_int64(st, 2, r->ts_ns);
        sqlite3_bind_int64(st, 3, r->nranges);
        sqlite3_bind_int64(st, 4, (int64_t)r->bytes);
        sqlite3_bind_blob(st, 5, r->blob, (int)r->len, SQLITE_STATIC);
        err = cw__store_step_done(s, st, "storing a memory map snapshot", d);
    }
    return err;
}

int cw__store_prune_maps(cw_store_t *s, const cw__tier_t *t, cw_diag_t *d)
{
    sqlite3_stmt *st = NULL;
    int err;
    if (t[0].horizon == INT64_MIN) return 0;
    if ((err = cw__store_stmt(s, CW__ST_MAP_PRUNE, SQL_MAP_PRUNE, &st, d))) return err;
    sqlite3_bind_int64(st, 1, t[0].horizon);
    return cw__store_step_done(s, st, "pruning memory map snapshots", d);
}

int cw_store_map_at(cw_store_t *s, uint32_t proc, int64_t at_ns, cw_map_t *m, cw_diag_t *d)
{
    sqlite3_stmt *st = NULL;
    int rc, err = cw__store_stmt(s, CW__ST_MAP_AT, SQL_MAP_AT, &st, d);
    cw_map_clear(m);
    if (err) return err;
    sqlite3_bind_int64(st, 1, proc);
    sqlite3_bind_int64(st, 2, at_ns);
    rc = sqlite3_step(st);
    if (rc == SQLITE_ROW) {
        const unsigned char *blob = sqlite3_column_blob(st, 1);
        size_t len = (size_t)sqlite3_column_bytes(st, 1);
        err = cw_map_decode(blob, len, proc, sqlite3_column_int64(st, 0), m, d);
        if (err == CW_ENOMEM) cw_diag_set(d, err, "reading a memory map: out of memory");
    } else if (rc == SQLITE_DONE) {
        err = CW_ENOENT;
    } else {
        err = cw__store_dberr(s, "reading a memory map snapshot", d);
    }
    cw__store_stmt_done(st);
    return err;
}

int cw_store_map_times(cw_store_t *s, uint32_t proc, size_t max, int64_t **out, size_t *n,
                       cw_diag_t *d)
{
    sqlite3_stmt *st = NULL;
    int64_t *v = NULL;
    size_t cap = 0, k = 0;
    int rc, err = cw__store_stmt(s, CW__ST_MAP_TIMES, SQL_MAP_TIMES, &st, d);
    *out = NULL;
    *n = 0;
    if (err) return err;
    sqlite3_bind_int64(st, 1, proc);
    sqlite3_bind_int64(st, 2, (int64_t)max);
    while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
        if (CW_RESERVE(v, cap, k + 1)) {
            err = cw_diag_set(d, CW_ENOMEM, "listing memory map snapshots: out of memory");
            break;
        }
        v[k++] = sqlite3_column_int64(st, 0);
    }
    if (!err && rc != SQLITE_DONE) err = cw__store_dberr(s, "listing memory map snapshots", d);
    cw__store_stmt_done(st);
    if (err) {
        free(v);
        return err;
    }
    for (size_t i = 0; i < k / 2; i++) { /* oldest first */
        int64_t x = v[i];
        v[i] = v[k - 1 - i];
        v[k - 1 - i] = x;
    }
    *out = v;
    *n = k;
    return 0;
}
