/* store_report_keys.c - what a ranked report (cw_store_report_top(),
 * store_report.c) reads: the per-process sums that rank a window's
 * processes without decoding a cell (commit and release bytes before the
 * window and in it, from the cells' columns bytes and released, schema
 * 009_cells), and then the per-stack sums of the chosen processes alone,
 * their cells decoded in C; both over the same segments of tiers as the
 * full report (store_report_sums.c).
 *
 * Why they are exact: a window's bytes figures are sums over stacks of
 * differences of the sums SQL_Q_SEGMENT gives, and none of them needs a
 * release's commit time `a` once f is known: outstanding(t0) is the commit
 * bytes before t0 less the bytes released before t0 (a < f < t0), Size
 * the commit bytes in the window, impacting Size less the bytes released
 * in it (AIFO - AOFI), outstanding at the end outstanding(t0) plus
 * impacting. A cell's bytes and released are exactly its rows' sums
 * (cells.c), so one row per cell is read and nothing is decoded. Runs
 * inside the report's read transaction, on the thread that holds the
 * handle. */
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "commitwatch/keymap.h"
#include "store/cells.h"
#include "store/store_report_sums.h"

/* The cells of tier ?1 with bucket in [?2, ?3), in the order of the
 * primary key (tier DESC, bucket, proc, layer): each process's rows come in
 * bucket order with no sort, as its peak needs them. */
static const char SQL_Q_KEYS[] =
    "SELECT bucket, proc, bytes, released, events, delta, relpeak, peak_off FROM cells"
    " WHERE tier = ?1 AND layer = cw_layer() AND bucket >= ?2 AND bucket < ?3 ORDER BY bucket";

/* The end of reading a list of n rows (size bytes each) into v: after an
 * error v is freed (and ENOMEM named), else it is sorted by cmp for the
 * caller. Returns err. */
static int list_done(int err, void *v, uint32_t n, size_t size,
                     int (*cmp)(const void *, const void *), cw_diag_t *d)
{
    if (err) {
        free(v);
        if (err == CW_ENOMEM) cw_diag_set(d, err, "querying window figures: out of memory");
        return err;
    }
    if (n > 1) qsort(v, n, size, cmp);
    return 0;
}

static int cmp_keys(const void *x, const void *y)
{
    const cw__proc_keys_t *a = x, *b = y;
    return a->proc < b->proc ? -1 : a->proc > b->proc;
}

/* From the window's first forward segment on: outstanding at t0 is known,
 * the peak starts there (at `at`), as load_activity() starts it. */
static void start_window(cw__proc_keys_t *k, int64_t at)
{
    k->level = k->cb0 - k->rb0;
    k->peak = k->level > 0 ? k->level : 0;
    k->peak_ns = at;
}

/* The entry of proc in v (map m), zeroed when new; NULL on ENOMEM. */
static cw__proc_keys_t *keys_row(cw_keymap_t *m, cw__proc_keys_t **v, uint32_t *n, size_t *cap,
                                 uint32_t proc, bool *added)
{
    int a = 0;
    uint32_t k = cw_keymap_get(m, proc, 0, &a);
    *added = a;
    if (k == UINT32_MAX || (a && CW_RESERVE(*v, *cap, *n + 1u))) return NULL;
    if (a) (*v)[(*n)++] = (cw__proc_keys_t){.proc = proc};
    return &(*v)[k];
}

int cw__report_load_keys(cw_store_t *s, const segment_t *seg, int nseg, int nback, const pick_t *p,
                         int64_t at, const cw__before_sums_t *bv, uint32_t bn,
                         cw__proc_keys_t **out, uint32_t *nout, cw_diag_t *d)
{
    sqlite3_stmt *st = NULL;
    cw__proc_keys_t *v = NULL;
    size_t cap = 0;
    uint32_t n = 0;
    cw_keymap_t map;
    int err = cw__store_stmt(s, CW__ST_Q_KEYS, SQL_Q_KEYS, &st, d), rc = SQLITE_DONE;
    *out = NULL;
    *nout = 0;
    if (err) return err;
    if (cw_keymap_init(&map, 10))
        return cw_diag_set(d, CW_ENOMEM, "querying window figures: out of memory");
    for (uint32_t j = 0; j < bn && !err; j++) {
        bool added;
        cw__proc_keys_t *x = keys_row(&map, &v, &n, &cap, bv[j].proc, &added);
        if (!x) {
            err = CW_ENOMEM;
            break;
        }
        x->cb0 += bv[j].cb;
        x->rb0 += bv[j].rb;
    }
    for (int i = 0; i <= nseg && !err; i++) {
        bool fwd = i >= nback;
        if (i == nback)
            for (uint32_t j = 0; j < n; j++)
                start_window(&v[j], at);
        if (i == nseg) break;
        /* Rows from t1 on add nothing (their commits and releases are
         * after the window). */
        int64_t hi = seg[i].hi < p->t1 ? seg[i].hi : p->t1;
        if (seg[i].lo >= hi) continue;
        sqlite3_bind_int(st, 1, seg[i].tier);
        sqlite3_bind_int64(st, 2, seg[i].lo);
        sqlite3_bind_int64(st, 3, hi);
        while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
#define I(col) sqlite3_column_int64(st, (col))
            int64_t bucket = I(0);
            uint32_t proc = (uint32_t)I(1);
            bool added;
            cw__proc_keys_t *x = keys_row(&map, &v, &n, &cap, proc, &added);
            if (!x) {
                err = CW_ENOMEM;
                break;
            }
            if (added && fwd) start_window(x, at);
            bool before = bucket < p->t0;
            x->cb0 += before ? I(2) : 0;
            x->rb0 += before ? I(3) : 0;
            x->cbw += before ? 0 : I(2);
            x->rbw += before ? 0 : I(3);
            if (!fwd || sqlite3_column_type(st, 4) == SQLITE_NULL) continue;
            /* An activity row, as load_activity() applies it. */
            int64_t cand = x->level + I(6);
            if (cand > x->peak) {
                x->peak = cand;
                x->peak_ns = bucket + I(7);
            }
            x->events += I(4);
            x->level += I(5);
            x->active = true;
#undef I
        }
        if (!err && rc != SQLITE_DONE) err = cw__store_dberr(s, "querying window figures", d);
        sqlite3_reset(st);
    }
    cw_keymap_free(&map);
    if ((err = list_done(err, v, n, sizeof *v, cmp_keys, d))) return err;
    *out = v;
    *nout = n;
    return 0;
}

/* The chosen processes' cells of tier ?1 with bucket in [?2, ?3). The
 * primary key (tier DESC, bucket, proc, layer) ranges over the buckets; the
 * other processes' rows are passed over without reading their data. */
static const char SQL_Q_CELLS_OF[] =
    "SELECT bucket, proc, data FROM cells WHERE tier = ?1 AND layer = cw_layer() AND bucket >= ?2"
    " AND bucket < ?3 AND proc IN (SELECT value FROM json_each(?4))";

static int cmp_sums(const void *x, const void *y)
{
    const sums_t *a = x, *b = y;
    if (a->proc != b->proc) return a->proc < b->proc ? -1 : 1;
    return a->stack < b->stack ? -1 : a->stack > b->stack;
}

/* The row of (proc, stack) in v (map m), zeroed when new; NULL on ENOMEM. */
static sums_t *sums_row(cw_keymap_t *m, sums_t **v, uint32_t *n, size_t *cap, uint32_t proc,
                        uint32_t stack)
{
    int added = 0;
    uint32_t i = cw_keymap_get(m, proc, stack, &added);
    if (i == UINT32_MAX) return NULL;
    if (!added) return &(*v)[i];
    if (CW_RESERVE(*v, *cap, *n + 1u)) return NULL;
    sums_t *y = &(*v)[(*n)++];
    memset(y, 0, sizeof *y);
    y->proc = proc;
    y->stack = stack;
    return y;
}

/* Whether id is in only (ascending). */
static bool has(const cw__proc_set_t *only, uint32_t id)
{
    uint32_t lo = 0, hi = only->n;
    while (lo < hi) {
        uint32_t mid = lo + (hi - lo) / 2;
        if (only->id[mid] < id)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo < only->n && only->id[lo] == id;
}

int cw__report_load_sums_of(cw_store_t *s, const segment_t *seg, int nseg, const pick_t *p,
                            const cw__proc_set_t *only, sums_t **out, uint32_t *nout, cw_diag_t *d)
{
    sqlite3_stmt *st = NULL;
    sums_t *v = NULL;
    size_t cap = 0;
    uint32_t n = 0;
    cw_keymap_t map;
    cw__cell_rows_t rows = {0};
    int err = cw__store_stmt(s, CW__ST_Q_CELLS_OF, SQL_Q_CELLS_OF, &st, d), rc = SQLITE_DONE;
    *out = NULL;
    *nout = 0;
    if (err) return err;
    if (cw_keymap_init(&map, 10) ||
        sqlite3_bind_text(st, 4, only->json, -1, SQLITE_TRANSIENT) != SQLITE_OK) {
        cw_keymap_free(&map);
        return cw_diag_set(d, CW_ENOMEM, "querying window figures: out of memory");
    }
    for (uint32_t j = 0; j < only->bn && !err; j++) {
        const cw__before_sums_t *x = &only->bv[j];
        if (!has(only, x->proc)) continue;
        sums_t *y = sums_row(&map, &v, &n, &cap, x->proc, x->stack);
        if (!y) {
            err = CW_ENOMEM;
            break;
        }
        y->v[0] += x->cb; /* as push_before() (store_report_sums.c) */
        y->v[1] += x->ce;
        y->v[4] += x->rb;
        y->v[12] += x->rc;
    }
    for (int i = 0; i < nseg && !err; i++) {
        /* As SQL_Q_SEGMENT: commits with bucket in [lo, min(hi, t1)),
         * releases with f in [lo, hi) and a < t1. */
        sqlite3_bind_int(st, 1, seg[i].tier);
        sqlite3_bind_int64(st, 2, seg[i].lo);
        sqlite3_bind_int64(st, 3, seg[i].hi);
        while (!err && (rc = sqlite3_step(st)) == SQLITE_ROW) {
            int64_t bucket = sqlite3_column_int64(st, 0);
            uint32_t proc = (uint32_t)sqlite3_column_int64(st, 1);
            const void *data = sqlite3_column_blob(st, 2);
            rows.c.n = rows.r.n = 0;
            if ((err = cw__cell_decode(data, (size_t)sqlite3_column_bytes(st, 2), bucket, proc,
                                       &rows, NULL))) {
                if (err == CW_EDB)
                    cw_diag_set(d, err,
                                "querying window figures: a cell of instance %" PRIu32
                                " is not readable",
                                proc);
                break;
            }
            for (uint32_t j = 0; j < rows.c.n && !err && bucket < p->t1; j++) {
                const cw_row_commit_t *x = &rows.c.v[j];
                sums_t *y = sums_row(&map, &v, &n, &cap, proc, x->stack);
                if (!y)
                    err = CW_ENOMEM;
                else
                    cw__sums_add_commit(y, bucket, (int64_t)x->bytes, (int64_t)x->events, p->t0);
            }
            for (uint32_t j = 0; j < rows.r.n && !err; j++) {
                const cw_row_release_t *x = &rows.r.v[j];
                if (x->a >= p->t1) continue;
                sums_t *y = sums_row(&map, &v, &n, &cap, proc, x->stack);
                if (!y)
                    err = CW_ENOMEM;
                else
                    cw__sums_add_release(y, bucket, x->a, (int64_t)x->bytes, (int64_t)x->pieces,
                                         (int64_t)x->closed, p->t0, p->t1);
            }
        }
        if (!err && rc != SQLITE_DONE) err = cw__store_dberr(s, "querying window figures", d);
        sqlite3_reset(st);
    }
    cw__cell_rows_free(&rows);
    cw_keymap_free(&map);
    if ((err = list_done(err, v, n, sizeof *v, cmp_sums, d))) return err;
    *out = v;
    *nout = n;
    return 0;
}
