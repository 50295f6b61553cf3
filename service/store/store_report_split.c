/* store_report_split.c - reading a window through a tier its t0 is not
 * aligned to (store_report_sums.h): the fixes that take a split's
 * left-out rows from finer cells (the minute split of a ranked report,
 * store_report_keys.c, and the hour split), and the hour split's sides
 * (cw__report_hour_split, store_report_sums.c, says which segments it
 * reads and why the result is exact). Runs inside the report's read
 * transaction, on the thread that holds the handle; everything here
 * lives for one report. */
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "store/cells.h"
#include "store/store_report_sums.h"

/* The cells of tier ?1 at the buckets ?2, ?2 + ?5, ... below ?3 of the
 * processes in the JSON array ?4, each found by its key. CROSS JOIN keeps
 * the buckets the outer loop (SEARCH c USING PRIMARY KEY (tier=? AND
 * bucket=? AND proc=?...)); ordered by the cells' bucket, SQLite would
 * scan the tier. */
static const char SQL_Q_CELLS_AT[] =
    "WITH RECURSIVE b(x) AS (VALUES(?2) UNION ALL SELECT x + ?5 FROM b WHERE x + ?5 < ?3)"
    " SELECT c.bucket, c.proc, c.data, c.events, c.delta, c.relpeak, c.peak_off"
    " FROM b CROSS JOIN cells c WHERE c.tier = ?1 AND c.bucket = b.x"
    " AND c.proc IN (SELECT value FROM json_each(?4)) AND c.layer = cw_layer() ORDER BY b.x";

/* The same cells in bucket order, the primary key (tier DESC, bucket,
 * proc, layer) ranging over the buckets: the other processes' rows are
 * passed over without reading their data. */
static const char SQL_Q_CELLS_OF[] =
    "SELECT bucket, proc, data, events, delta, relpeak, peak_off FROM cells WHERE tier = ?1"
    " AND layer = cw_layer() AND bucket >= ?2 AND bucket < ?3"
    " AND proc IN (SELECT value FROM json_each(?4)) ORDER BY bucket";

int cw__report_stmt_at(cw_store_t *s, sqlite3_stmt **st, cw_diag_t *d)
{
    return cw__store_stmt(s, CW__ST_Q_CELLS_AT, SQL_Q_CELLS_AT, st, d);
}

int cw__report_stmt_of(cw_store_t *s, sqlite3_stmt **st, cw_diag_t *d)
{
    return cw__store_stmt(s, CW__ST_Q_CELLS_OF, SQL_Q_CELLS_OF, st, d);
}

/* ---- fixes ------------------------------------------------------------------ */

int cw__fix_add(cw__fixes_t *x, int64_t f, uint32_t proc)
{
    if (CW_RESERVE(x->v, x->cap, x->n + 1)) return CW_ENOMEM;
    x->v[x->n++] = (cw__fix_t){f, proc};
    return 0;
}

static int cmp_fix(const void *x, const void *y)
{
    const cw__fix_t *a = x, *b = y;
    if (a->f != b->f) return a->f < b->f ? -1 : 1;
    return a->proc < b->proc ? -1 : a->proc > b->proc;
}

int cw__fixes_run(cw_store_t *s, const cw__fix_read_t *r, const pick_t *p, cw__fixes_t *fx,
                  cw__sums_acc_t *a, cw_diag_t *d)
{
    sqlite3_stmt *at = NULL, *of = NULL;
    int err = cw__report_stmt_at(s, &at, d), rc = SQLITE_DONE;
    if (!err) err = cw__report_stmt_of(s, &of, d);
    if (err) return err;
    if (fx->n > 1) qsort(fx->v, fx->n, sizeof *fx->v, cmp_fix);
    uint32_t *ids = fx->n ? malloc(fx->n * sizeof *ids) : NULL;
    if (fx->n && !ids) err = CW_ENOMEM;
    for (size_t i = 0, j; i < fx->n && !err; i = j) {
        uint32_t m = 0; /* the bucket's processes, ascending, each once */
        for (j = i; j < fx->n && fx->v[j].f == fx->v[i].f; j++)
            if (!m || ids[m - 1] != fx->v[j].proc) ids[m++] = fx->v[j].proc;
        /* By key, unless that takes more lookups than a segment would
         * (as a ranked report's segments choose, store_report_keys.c):
         * then in key order, the others' cells passed over. */
        bool seek = (uint64_t)m * (uint64_t)(r->span / r->step) <= cw__seeks_max(s);
        sqlite3_stmt *st = seek ? at : of;
        char *json = cw__ids_json(ids, m);
        if (!json || sqlite3_bind_text(st, 4, json, -1, free) != SQLITE_OK) {
            err = CW_ENOMEM; /* sqlite3_bind_text frees json either way */
            break;
        }
        sqlite3_bind_int(st, 1, r->tier);
        sqlite3_bind_int64(st, 2, fx->v[i].f);
        sqlite3_bind_int64(st, 3, fx->v[i].f + r->span);
        if (seek) sqlite3_bind_int64(st, 5, r->step);
        while (!err && (rc = sqlite3_step(st)) == SQLITE_ROW)
            err = cw__sums_add_cell_split(
                a, sqlite3_column_blob(st, 2), (size_t)sqlite3_column_bytes(st, 2),
                sqlite3_column_int64(st, 0), (uint32_t)sqlite3_column_int64(st, 1), p->t0, p->t1,
                r->alo, r->ahi, true, r->resolve, r->ctx, NULL, d);
        if (!err && rc != SQLITE_DONE) err = cw__store_dberr(s, "querying window figures", d);
        sqlite3_reset(st);
    }
    free(ids);
    if (err == CW_ENOMEM) cw_diag_set(d, err, "querying window figures: out of memory");
    return err;
}

/* ---- the hour split's sides --------------------------------------------------- */

int cw__hsides_init(cw__hsides_t *x, const cw__tier_t *t, const pick_t *p, const segment_t *seg,
                    int nseg)
{
    memset(x, 0, sizeof *x);
    for (int i = 0; i < nseg; i++)
        x->on |= seg[i].split != CW__SPLIT_NONE;
    x->h0 = cw_floor_to(p->t0, t[2].width);
    x->h1 = x->h0 + t[2].width;
    x->t0 = p->t0;
    return x->on ? cw_keymap_init(&x->map, 64) : 0;
}

void cw__hsides_free(cw__hsides_t *x)
{
    cw_keymap_free(&x->map);
    free(x->v);
    cw__cell_rows_free(&x->rows);
    free(x->fx.v);
    memset(x, 0, sizeof *x);
}

static cw__hside_t *side_of(cw__hsides_t *x, uint32_t proc, uint32_t stack)
{
    int added = 0;
    uint32_t i = cw_keymap_get(&x->map, proc, stack, &added);
    if (i == UINT32_MAX || CW_RESERVE(x->v, x->cap, i + 1u)) return NULL;
    if (added) x->v[i] = (cw__hside_t){0};
    return &x->v[i];
}

/* Notes the commit rows of rows (one cell of proc) as h0's (near false)
 * or [t0, h1)'s. */
static int note_commits(cw__hsides_t *x, const cw__cell_rows_t *rows, uint32_t proc, bool near)
{
    for (uint32_t j = 0; j < rows->c.n; j++) {
        const cw_row_commit_t *c = &rows->c.v[j];
        cw__hside_t *y = side_of(x, proc, c->stack);
        if (!y) return CW_ENOMEM;
        *(near ? &y->nb : &y->hb) += (int64_t)c->bytes;
        *(near ? &y->ne : &y->he) += (int64_t)c->events;
    }
    return 0;
}

/* cw__resolve_a_fn: a release row of a commit in h0, put before t0 when
 * its stack committed in h0 only before t0, from t0 on when only from t0
 * on (every commit of h0 is in [t0, h1)), else left out. */
static int64_t hsides_resolve(void *ctx, uint32_t proc, uint32_t stack, int64_t a)
{
    const cw__hsides_t *x = ctx;
    (void)a;
    uint32_t i = cw_keymap_find(&x->map, proc, stack);
    if (i == UINT32_MAX) return CW__A_SKIP;
    const cw__hside_t *y = &x->v[i];
    if (y->he == 0 && y->hb == 0) return CW__A_SKIP; /* h0 knows no commit of it */
    if (y->ne == 0 && y->nb == 0) return x->h0;
    if (y->ne == y->he && y->nb == y->hb) return x->t0;
    return CW__A_SKIP;
}

int cw__hsides_add_cell(cw__hsides_t *x, int split, cw__sums_acc_t *a, const void *data,
                        size_t size, int64_t bucket, uint32_t proc, const pick_t *p, cw_diag_t *d)
{
    int err;
    if (split == CW__SPLIT_SIDES) {
        x->rows.c.n = x->rows.r.n = 0;
        err = cw__cell_decode(data, size, bucket, proc, &x->rows, NULL);
        if (!err) err = note_commits(x, &x->rows, proc, false);
        if (err == CW_EDB)
            cw_diag_set(d, err,
                        "querying window figures: a cell of instance %" PRIu32 " is not readable",
                        proc);
        return err;
    }
    if (split != CW__SPLIT_FAR) {
        err = cw__sums_add_cell(a, data, size, bucket, proc, p->t0, p->t1, d);
        if (err || split != CW__SPLIT_NEAR) return err;
        x->rows.c.n = x->rows.r.n = 0; /* (the cell read twice: h0's cells before t0, few) */
        if ((err = cw__cell_decode(data, size, bucket, proc, &x->rows, NULL))) return err;
        return note_commits(x, &x->rows, proc, true);
    }
    bool skipped = false;
    err = cw__sums_add_cell_split(a, data, size, bucket, proc, p->t0, p->t1, x->h0, x->h1, false,
                                  hsides_resolve, x, &skipped, d);
    if (!err && skipped) err = cw__fix_add(&x->fx, bucket, proc);
    return err;
}

int cw__hsides_fix(cw_store_t *s, const cw__tier_t *t, cw__hsides_t *x, const pick_t *p,
                   cw__sums_acc_t *a, cw_diag_t *d)
{
    if (!x->fx.n) return 0;
    cw__fix_read_t r = {.tier = 1,
                        .span = t[2].width,
                        .step = t[1].width,
                        .alo = x->h0,
                        .ahi = x->h1,
                        .resolve = hsides_resolve,
                        .ctx = x};
    s->test.hour_fixes += x->fx.n;
    return cw__fixes_run(s, &r, p, &x->fx, a, d);
}
