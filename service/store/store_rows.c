/* store_rows.c - the writer's inserts into the tier table, cells (cells.h):
 * the plain multi-row inserts of cells whose key is new by construction
 * (a batch's own rows, a rollup's rows of a bucket not rolled before, a
 * conversion's), and the sums into a cell that may exist (rundown and
 * retention into the BEFORE baselines). Used by store.c (a batch),
 * store_tiers.c (rollups, retention) and store_upgrade.c; writer thread
 * only. */
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "commitwatch/platform.h"
#include "store/cells.h"
#include "store/store_internal.h"

/* Plain inserts of many cells (cells.h), CW__STORE_MULTI a statement:
 * "INSERT INTO cells(...) VALUES (?1, ?2, ?3, 0, ...), (?1, ?2, ...)"
 * with the tier and the bucket bound once (?1, ?2) and each cell's own
 * columns after them. One statement of many rows costs one step, one
 * reset and one parse of the VDBE program's prologue instead of one each
 * a row. */
#define MULTI CW__STORE_MULTI
#define OWN 8 /* proc, events, delta, relpeak, peak_off, bytes, released, data */

static const char SQL_CELL_INS_HEAD[] = "INSERT INTO cells(tier, bucket, proc, layer, events, "
                                        "delta, relpeak, peak_off, bytes, released, data) VALUES ";

static int ins_stmt(cw_store_t *s, int rows, sqlite3_stmt **out, cw_diag_t *d)
{
    int id = rows == 1 ? CW__ST_CELL_INS : CW__ST_CELL_INS_N;
    if (s->stmts[id]) {
        *out = s->stmts[id];
        return 0;
    }
    cw_buf_t sql = {0};
    cw_buf_puts(&sql, SQL_CELL_INS_HEAD);
    for (int r = 0; r < rows; r++) {
        int p = 3 + r * OWN;
        cw_buf_printf(&sql, "%s(?1, ?2, ?%d, 0", r ? ", " : "", p);
        for (int c = 1; c < OWN; c++)
            cw_buf_printf(&sql, ", ?%d", p + c);
        cw_buf_puts(&sql, ")");
    }
    int err = sql.failed ? CW_ENOMEM : cw__store_stmt(s, id, sql.p, out, d);
    free(sql.p);
    return err;
}

/* One cell being stored: its process, activity row (or NULL) and sums, and
 * where its data lies in the writer's cell buffer. */
typedef struct cell {
    uint32_t proc;
    const cw_row_activity_t *act;
    int64_t bytes, released;
    size_t off, len;
} cell_t;

/* Binds a cell's activity row (act; NULLs when there is none), its sums
 * and its data to parameters p .. p + 6 of st (events, delta, relpeak,
 * peak_off, bytes, released, data), the peak's offset from bucket. */
static void bind_cell(sqlite3_stmt *st, int p, int64_t bucket, const cw_row_activity_t *act,
                      int64_t bytes, int64_t released, const void *data, size_t len)
{
    if (act) {
        sqlite3_bind_int64(st, p, (int64_t)act->events);
        sqlite3_bind_int64(st, p + 1, act->delta);
        sqlite3_bind_int64(st, p + 2, act->relpeak);
        sqlite3_bind_int64(st, p + 3, act->relpeak_ns - bucket);
    } else {
        for (int q = 0; q < 4; q++)
            sqlite3_bind_null(st, p + q);
    }
    sqlite3_bind_int64(st, p + 4, bytes);
    sqlite3_bind_int64(st, p + 5, released);
    sqlite3_bind_blob(st, p + 6, data, (int)len, SQLITE_STATIC);
}

/* Stores cells[0..n) of (tier, bucket): their data is in buf. */
static int ins_cells(cw_store_t *s, int tier, int64_t bucket, const cell_t *cells, uint32_t n,
                     const cw_buf_t *buf, cw_diag_t *d)
{
    int err = 0;
    for (uint32_t i = 0; i < n && !err;) {
        int k = n - i >= MULTI ? MULTI : 1;
        sqlite3_stmt *st = NULL;
        if ((err = ins_stmt(s, k, &st, d))) break;
        sqlite3_bind_int(st, 1, tier);
        sqlite3_bind_int64(st, 2, bucket);
        for (int r = 0; r < k; r++) {
            const cell_t *c = &cells[i + (uint32_t)r];
            int p = 3 + r * OWN;
            sqlite3_bind_int64(st, p, c->proc);
            bind_cell(st, p + 1, bucket, c->act, c->bytes, c->released, buf->p + c->off, c->len);
        }
        /* Every parameter is bound again next time: no clear_bindings. */
        if (sqlite3_step(st) != SQLITE_DONE) err = cw__store_dberr(s, "storing cells", d);
        sqlite3_reset(st);
        i += (uint32_t)k;
    }
    return err;
}

int64_t cw__store_tier_unit(const cw_store_t *s, int tier)
{
    return s->w && tier >= 0 && tier < CW_TIERS ? s->w->tiers[tier].width : 1;
}

/* The next process of rows sorted by process (commits c from ic, releases
 * r from ir, activity a from *ia): its id, the ends of its commit and
 * release rows (*ec, *er), and its activity row in *act (NULL: none; *ia
 * moves past it). */
static uint32_t next_proc(const cw_row_commit_t *c, uint32_t nc, uint32_t ic, uint32_t *ec,
                          const cw_row_release_t *r, uint32_t nr, uint32_t ir, uint32_t *er,
                          const cw_row_activity_t *a, uint32_t na, uint32_t *ia,
                          const cw_row_activity_t **act)
{
    uint32_t proc = UINT32_MAX;
    if (ic < nc && c[ic].proc < proc) proc = c[ic].proc;
    if (ir < nr && r[ir].proc < proc) proc = r[ir].proc;
    if (*ia < na && a[*ia].proc < proc) proc = a[*ia].proc;
    for (*ec = ic; *ec < nc && c[*ec].proc == proc;)
        ++*ec;
    for (*er = ir; *er < nr && r[*er].proc == proc;)
        ++*er;
    *act = *ia < na && a[*ia].proc == proc ? &a[(*ia)++] : NULL;
    return proc;
}

int cw__store_ins_rows(cw_store_t *s, int tier, int64_t bucket, const cw_row_commit_t *c,
                       uint32_t nc, const cw_row_release_t *r, uint32_t nr,
                       const cw_row_activity_t *a, uint32_t na, cw__sums_out_t *sums, cw_diag_t *d)
{
    cell_t cells[MULTI];
    cw_buf_t *buf = &s->w->cellbuf;
    int64_t unit = cw__store_tier_unit(s, tier);
    uint32_t ic = 0, ir = 0, ia = 0, n = 0;
    int err = 0;
    buf->n = 0;
    while (!err && (ic < nc || ir < nr || ia < na)) {
        uint32_t ec, er;
        cell_t *cl = &cells[n++];
        cl->proc = next_proc(c, nc, ic, &ec, r, nr, ir, &er, a, na, &ia, &cl->act);
        cl->off = buf->n;
        err = cw__cell_encode(buf, bucket, unit, c + ic, ec - ic, r + ir, er - ir, &cl->bytes,
                              &cl->released);
        if (err == CW_EINVAL)
            err = cw_diag_set(d, CW_EINVAL, "release rows in the BEFORE bucket (proc %" PRIu32 ")",
                              cl->proc);
        cl->len = buf->n - cl->off;
        if (sums && !sums->failed) {
            if (CW_RESERVE(sums->v, sums->cap, sums->n + 1)) {
                sums->failed = true;
            } else {
                sums->v[sums->n++] = (cw__sums_cell_t){cl->proc, cl->bytes, cl->released,
                                                       cl->act ? (int64_t)cl->act->events : 0};
            }
        }
        ic = ec, ir = er;
        if (!err && n == MULTI) {
            err = ins_cells(s, tier, bucket, cells, n, buf, d);
            n = 0;
            buf->n = 0;
        }
    }
    if (!err && n) err = ins_cells(s, tier, bucket, cells, n, buf, d);
    /* A burst's room is not kept. */
    if (buf->cap > (size_t)1 << 20) {
        free(buf->p);
        memset(buf, 0, sizeof *buf);
    }
    return err;
}

/* The cell of (tier, bucket, proc) plus the rows given, summed per key
 * (cells.c, cw_cell_merge): a new cell when there is none. */
static const char SQL_CELL_ADD[] =
    "INSERT INTO cells(tier, bucket, proc, layer, bytes, released, data) "
    "VALUES (?1, ?2, ?3, 0, ?4, ?5, ?6) ON CONFLICT(tier, bucket, proc, layer) DO UPDATE SET "
    "bytes = bytes + excluded.bytes, released = released + excluded.released, "
    "data = cw_cell_merge(data, excluded.data)";

int cw__store_add_rows(cw_store_t *s, int tier, int64_t bucket, uint32_t proc,
                       const cw_row_commit_t *c, uint32_t nc, const cw_row_release_t *r,
                       uint32_t nr, cw_diag_t *d)
{
    cw_buf_t buf = {0};
    int64_t bytes, released;
    sqlite3_stmt *st = NULL;
    int err = cw__cell_encode(&buf, bucket, cw__store_tier_unit(s, tier), c, nc, r, nr, &bytes,
                              &released);
    if (err == CW_EINVAL)
        err = cw_diag_set(d, CW_EINVAL, "release rows in the BEFORE bucket (proc %" PRIu32 ")",
                          proc);
    if (!err && !(err = cw__store_stmt(s, CW__ST_CELL_ADD, SQL_CELL_ADD, &st, d))) {
        sqlite3_bind_int(st, 1, tier);
        sqlite3_bind_int64(st, 2, bucket);
        sqlite3_bind_int64(st, 3, proc);
        sqlite3_bind_int64(st, 4, bytes);
        sqlite3_bind_int64(st, 5, released);
        sqlite3_bind_blob(st, 6, buf.p, (int)buf.n, SQLITE_STATIC);
        err = cw__store_step_done(s, st, "adding to a cell", d);
    }
    free(buf.p);
    return err;
}

/* A minute's cell of process ?2 added to its cell of the open hour ?1
 * (tier 3, CW__TIER_OPEN): rows per key (cw_cell_merge), and the activity
 * as the hour's rollup combines it (store_tiers.c, roll_into): a new row
 * starts at 0 reached at the hour's start, so its relative peak is the
 * minute's when above 0 (else 0, at offset 0); an existing one takes
 * its delta plus the minute's relative peak when that is higher (the
 * stored minutes came first). ?3 - ?6 are the minute's activity (NULL:
 * none), its peak's offset from the hour. */
static const char SQL_OPEN_ADD[] =
    "INSERT INTO cells(tier, bucket, proc, layer, events, delta, relpeak, peak_off, bytes, "
    "released, data) VALUES (3, ?1, ?2, 0, ?3, ?4, max(?5, 0), "
    "CASE WHEN ?3 IS NULL THEN NULL WHEN ?5 > 0 THEN ?6 ELSE 0 END, ?7, ?8, ?9) "
    "ON CONFLICT(tier, bucket, proc, layer) DO UPDATE SET "
    "events = CASE WHEN ?3 IS NULL THEN events ELSE coalesce(events, 0) + ?3 END, "
    "delta = CASE WHEN ?3 IS NULL THEN delta ELSE coalesce(delta, 0) + ?4 END, "
    "relpeak = CASE WHEN ?3 IS NULL THEN relpeak "
    "WHEN coalesce(delta, 0) + ?5 > coalesce(relpeak, 0) THEN coalesce(delta, 0) + ?5 "
    "ELSE coalesce(relpeak, 0) END, "
    "peak_off = CASE WHEN ?3 IS NULL THEN peak_off "
    "WHEN coalesce(delta, 0) + ?5 > coalesce(relpeak, 0) THEN ?6 ELSE coalesce(peak_off, 0) END, "
    "bytes = bytes + excluded.bytes, released = released + excluded.released, "
    "data = cw_cell_merge(data, excluded.data)";

int cw__store_add_open(cw_store_t *s, int64_t bucket, int64_t w, const cw_row_commit_t *c,
                       uint32_t nc, const cw_row_release_t *r, uint32_t nr,
                       const cw_row_activity_t *a, uint32_t na, cw_diag_t *d)
{
    _Static_assert(CW__TIER_OPEN == 3, "the open hour's tier number is in its SQL");
    cw_buf_t *buf = &s->w->cellbuf;
    uint32_t ic = 0, ir = 0, ia = 0;
    int err = 0;
    while (!err && (ic < nc || ir < nr || ia < na)) {
        uint32_t ec, er;
        const cw_row_activity_t *act;
        uint32_t proc = next_proc(c, nc, ic, &ec, r, nr, ir, &er, a, na, &ia, &act);
        int64_t bytes, released;
        sqlite3_stmt *st = NULL;
        buf->n = 0;
        err = cw__cell_encode(buf, bucket, w, c + ic, ec - ic, r + ir, er - ir, &bytes, &released);
        if (!err && !(err = cw__store_stmt(s, CW__ST_OPEN_ADD, SQL_OPEN_ADD, &st, d))) {
            sqlite3_bind_int64(st, 1, bucket);
            sqlite3_bind_int64(st, 2, proc);
            bind_cell(st, 3, bucket, act, bytes, released, buf->p, buf->n);
            err = cw__store_step_done(s, st, "adding to a cell of the open hour", d);
        }
        ic = ec, ir = er;
    }
    return err;
}

/* A cell of the heap layer (layer ?3) at raw bucket ?1, summed into the
 * one there may be: rows per key (cw_cell_merge), activity in the order
 * the two happened (the stored one first: a later trace's second). */
static const char SQL_CELL_LAYER_ADD[] =
    "INSERT INTO cells(tier, bucket, proc, layer, events, delta, relpeak, peak_off, bytes, "
    "released, data) VALUES (0, ?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10) "
    "ON CONFLICT(tier, bucket, proc, layer) DO UPDATE SET "
    "events = CASE WHEN excluded.events IS NULL THEN events "
    "ELSE coalesce(events, 0) + excluded.events END, "
    "delta = CASE WHEN excluded.events IS NULL THEN delta "
    "ELSE coalesce(delta, 0) + excluded.delta END, "
    "relpeak = CASE WHEN excluded.events IS NULL THEN relpeak WHEN events IS NULL THEN "
    "excluded.relpeak WHEN delta + excluded.relpeak > relpeak THEN delta + excluded.relpeak "
    "ELSE relpeak END, "
    "peak_off = CASE WHEN excluded.events IS NULL THEN peak_off WHEN events IS NULL THEN "
    "excluded.peak_off WHEN delta + excluded.relpeak > relpeak THEN excluded.peak_off "
    "ELSE peak_off END, "
    "bytes = bytes + excluded.bytes, released = released + excluded.released, "
    "data = cw_cell_merge(data, excluded.data)";

int cw__store_put_layer(cw_store_t *s, const cw_batch_t *r, cw_diag_t *d)
{
    int64_t w = cw__store_tier_unit(s, 0);
    if (r->layer != 1 || r->width_ns != w || cw_floor_to(r->bucket_ns, w) != r->bucket_ns ||
        r->frames.n || r->stacks.n || r->procs.n || r->riders.n)
        return cw_diag_set(d, CW_EINVAL,
                           "a heap-layer batch for bucket %" PRId64 " is not a rider of this "
                           "store (layer 1, raw buckets of %" PRId64 " ns, rows only)",
                           r->bucket_ns, w);
    for (uint32_t i = 0; i < r->commits.n; i++)
        if (r->commits.v[i].a != r->bucket_ns)
            return cw_diag_set(d, CW_EINVAL,
                               "a heap-layer batch for bucket %" PRId64 " holds a commit row "
                               "of another bucket (%" PRId64 ")",
                               r->bucket_ns, r->commits.v[i].a);
    /* Rows sorted by process (layerfeed.c sorts them), a cell each. */
    const cw_row_commit_t *c = r->commits.v;
    const cw_row_release_t *x = r->releases.v;
    const cw_row_activity_t *a = r->activity.v;
    uint32_t nc = r->commits.n, nr = r->releases.n, na = r->activity.n, ic = 0, ir = 0, ia = 0;
    cw_buf_t buf = {0};
    int err = 0;
    while (!err && (ic < nc || ir < nr || ia < na)) {
        uint32_t ec, er;
        const cw_row_activity_t *act;
        uint32_t proc = next_proc(c, nc, ic, &ec, x, nr, ir, &er, a, na, &ia, &act);
        int64_t bytes, released;
        sqlite3_stmt *st = NULL;
        buf.n = 0;
        err = cw__cell_encode(&buf, r->bucket_ns, w, c + ic, ec - ic, x + ir, er - ir, &bytes,
                              &released);
        if (err == CW_EINVAL)
            err = cw_diag_set(d, CW_EINVAL, "heap-layer release rows in the BEFORE bucket");
        if (!err && !(err = cw__store_stmt(s, CW__ST_CELL_LAYER_ADD, SQL_CELL_LAYER_ADD, &st, d))) {
            sqlite3_bind_int64(st, 1, r->bucket_ns);
            sqlite3_bind_int64(st, 2, proc);
            sqlite3_bind_int(st, 3, CW__LAYER_HEAP);
            bind_cell(st, 4, r->bucket_ns, act, bytes, released, buf.p, buf.n);
            err = cw__store_step_done(s, st, "storing a heap-layer cell", d);
        }
        ic = ec, ir = er;
    }
    free(buf.p);
    return err;
}
