/* cells.c - the encoding of a cell (cells.h) and what lets SQL read it:
 * the table-valued functions cw_commit_rows() and cw_release_rows(), the
 * scalar functions cw_cell_merge() and cw_cell_empty(), and the temp
 * views over them. Ground floor, beside db.c: db.c registers them on
 * every connection; any thread, no state of its own.
 *
 * A cell (docs/DESIGN.md, "Cells") is a header and one entry a stack, in
 * ascending stack order, every number a varint (cw_varint_write):
 *
 *   header  h: bit 0 set: byte figures are in 4 KiB pages; bit 1 set: the
 *           time unit u is h >> 3 seconds, else h >> 3 nanoseconds; bit 2
 *           set: every figure below is itself, else zigzag(figure) (set
 *           when no figure is negative and no a after the bucket: always,
 *           but for baselines folded below 0 and hand-made rows)
 *   entry   the stack id less the previous entry's (the first: less 0);
 *           k = (number of release rows << 1) | (1 if a commit row);
 *           commit row: bytes, events;
 *           each release row, in ascending a: code of a (0: BEFORE, else
 *           1 + (bucket - a) / u), bytes, pieces, closed
 *
 * A raw bucket's typical entry takes 4 - 8 bytes where its commits and
 * releases rows took some 40 - 60 each. The sums of a cell's commit and
 * release bytes are columns of its row, for readers that need no more. */
#include "store/cells.h"

#include <stdlib.h>
#include <string.h>

#include "commitwatch/error.h"
#include "commitwatch/event.h"

#define PAGE 4096u

/* ---- the encoding --------------------------------------------------------- */

static inline void put(unsigned char **w, uint64_t v)
{
    *w += cw_varint_write(*w, v);
}

/* A figure as stored: itself in a plain cell, else zigzag-coded; and back. */
static inline uint64_t fig(bool plain, int64_t v)
{
    return plain ? (uint64_t)v : cw_zigzag(v);
}

/* bucket - a, in two's complement (a may be anything but BEFORE). */
static inline int64_t back(int64_t bucket, int64_t a)
{
    return (int64_t)((uint64_t)bucket - (uint64_t)a);
}

int cw__cell_encode(cw_buf_t *out, int64_t bucket, int64_t unit, const cw_row_commit_t *c,
                    uint32_t nc, const cw_row_release_t *r, uint32_t nr, int64_t *bytes,
                    int64_t *released)
{
    if (bucket == CW_TS_BEFORE && nr) return CW_EINVAL;
    int64_t u = unit > 0 && unit < (INT64_C(1) << 58) ? unit : 1;
    bool pages = true;
    for (uint32_t i = 0; i < nc; i++)
        pages = pages && c[i].bytes % PAGE == 0;
    for (uint32_t j = 0; j < nr; j++) {
        pages = pages && r[j].bytes % PAGE == 0;
        if (r[j].a != CW_TS_BEFORE && back(bucket, r[j].a) % u) u = 1;
    }
    uint64_t pu = pages ? PAGE : 1;
    bool plain = true;
    for (uint32_t i = 0; i < nc; i++)
        plain = plain && (int64_t)c[i].bytes >= 0 && (int64_t)c[i].events >= 0;
    for (uint32_t j = 0; j < nr; j++)
        plain = plain && (int64_t)r[j].bytes >= 0 && (int64_t)r[j].pieces >= 0 &&
                (int64_t)r[j].closed >= 0 && (r[j].a == CW_TS_BEFORE || back(bucket, r[j].a) >= 0);
    /* At most: the header, and per row its key (two varints) and four figures. */
    size_t need = out->n + CW_VARINT_MAX * (1 + 6 * ((size_t)nc + nr)) + 1;
    if (CW_RESERVE(out->p, out->cap, need)) {
        out->failed = true;
        return CW_ENOMEM;
    }
    unsigned char *w = (unsigned char *)out->p + out->n;
    uint64_t h = u % CW_NS_PER_S == 0 ? (uint64_t)(u / CW_NS_PER_S) << 3 | 2 : (uint64_t)u << 3;
    put(&w, h | (plain ? 4 : 0) | (pages ? 1 : 0));
    uint64_t sb = 0, sr = 0; /* unsigned: hand-made figures may wrap, never overflow */
    uint32_t i = 0, j = 0, prev = 0;
    while (i < nc || j < nr) {
        uint32_t stack = i < nc && (j >= nr || c[i].stack <= r[j].stack) ? c[i].stack : r[j].stack;
        bool has_c = i < nc && c[i].stack == stack;
        uint32_t e = j;
        while (e < nr && r[e].stack == stack)
            e++;
        put(&w, (uint32_t)(stack - prev));
        put(&w, (uint64_t)(e - j) << 1 | (has_c ? 1 : 0));
        prev = stack;
        if (has_c) {
            put(&w, fig(plain, (int64_t)(c[i].bytes / pu)));
            put(&w, fig(plain, (int64_t)c[i].events));
            sb += c[i].bytes;
            i++;
        }
        for (; j < e; j++) {
            put(&w, r[j].a == CW_TS_BEFORE ? 0 : 1 + fig(plain, back(bucket, r[j].a) / u));
            put(&w, fig(plain, (int64_t)(r[j].bytes / pu)));
            put(&w, fig(plain, (int64_t)r[j].pieces));
            put(&w, fig(plain, (int64_t)r[j].closed));
            sr += r[j].bytes;
        }
    }
    out->n = (size_t)(w - (unsigned char *)out->p);
    out->p[out->n] = '\0';
    if (bytes) *bytes = (int64_t)sb;
    if (released) *released = (int64_t)sr;
    return 0;
}

int cw__cell_read_begin(cw__cell_reader_t *c, const void *data, size_t n, int64_t bucket)
{
    uint64_t h;
    *c = (cw__cell_reader_t){.p = data, .n = n, .bucket = bucket};
    if (cw_varint_read(c->p, n, &c->pos, &h)) return -1;
    c->pu = h & 1 ? PAGE : 1;
    c->plain = h & 4;
    uint64_t v = h >> 3;
    if (!v || v > (uint64_t)INT64_MAX / (uint64_t)CW_NS_PER_S) return -1;
    c->u = h & 2 ? (int64_t)v * CW_NS_PER_S : (int64_t)v;
    return 0;
}

int cw__cell_decode(const void *data, size_t n, int64_t bucket, uint32_t proc, cw__cell_rows_t *out,
                    int64_t *unit)
{
    cw__cell_reader_t c;
    bool has_c;
    uint64_t bytes, events, nrel;
    int rc;
    if (cw__cell_read_begin(&c, data, n, bucket)) return CW_EDB;
    if (unit) *unit = c.u;
    while (!(rc = cw__cell_read_entry(&c, &has_c, &bytes, &events, &nrel))) {
        if (has_c) {
            if (CW_RESERVE(out->c.v, out->c.cap, (size_t)out->c.n + 1)) return CW_ENOMEM;
            out->c.v[out->c.n++] = (cw_row_commit_t){
                .proc = proc, .stack = c.stack, .a = bucket, .bytes = bytes, .events = events};
        }
        if (nrel && CW_RESERVE(out->r.v, out->r.cap, (size_t)out->r.n + nrel)) return CW_ENOMEM;
        for (uint64_t e = 0; e < nrel; e++) {
            cw_row_release_t *rr = &out->r.v[out->r.n++];
            rr->proc = proc;
            rr->stack = c.stack;
            if (cw__cell_read_release(&c, &rr->a, &rr->bytes, &rr->pieces, &rr->closed))
                return CW_EDB;
        }
    }
    return rc < 0 ? CW_EDB : 0;
}

void cw__cell_rows_free(cw__cell_rows_t *rows)
{
    free(rows->c.v);
    free(rows->r.v);
    memset(rows, 0, sizeof *rows);
}

/* ---- SQL functions -------------------------------------------------------- */

/* cw_cell_merge(x, y): both decoded at bucket 0 (a cell's times are
 * relative to its bucket, so the merge is the same at any bucket), summed
 * per key, rows that come to nothing left out, encoded in x's time unit. */
static void fn_merge(sqlite3_context *ctx, int argc, sqlite3_value **argv)
{
    (void)argc;
    if (sqlite3_value_type(argv[0]) == SQLITE_NULL || sqlite3_value_type(argv[1]) == SQLITE_NULL) {
        sqlite3_result_value(ctx, argv[sqlite3_value_type(argv[0]) == SQLITE_NULL ? 1 : 0]);
        return;
    }
    cw__cell_rows_t rows = {0};
    cw_buf_t out = {0};
    int64_t ux = 0, uy = 0;
    int err = 0;
    for (int i = 0; i < 2 && !err; i++)
        err = cw__cell_decode(sqlite3_value_blob(argv[i]), (size_t)sqlite3_value_bytes(argv[i]), 0,
                              0, &rows, i ? &uy : &ux);
    if (!err) {
        uint32_t nc = cw_batch_merge_commits(rows.c.v, rows.c.n), o = 0;
        for (uint32_t i = 0; i < nc; i++)
            if (rows.c.v[i].bytes || rows.c.v[i].events) rows.c.v[o++] = rows.c.v[i];
        nc = o;
        uint32_t nr = cw_batch_merge_releases(rows.r.v, rows.r.n);
        o = 0;
        for (uint32_t i = 0; i < nr; i++)
            if (rows.r.v[i].bytes || rows.r.v[i].pieces || rows.r.v[i].closed)
                rows.r.v[o++] = rows.r.v[i];
        err = cw__cell_encode(&out, 0, ux, rows.c.v, nc, rows.r.v, o, NULL, NULL);
    }
    cw__cell_rows_free(&rows);
    if (err == CW_ENOMEM)
        sqlite3_result_error_nomem(ctx);
    else if (err)
        sqlite3_result_error(ctx, "cw_cell_merge: not a cell", -1);
    else
        sqlite3_result_blob(ctx, out.p, (int)out.n, free), out.p = NULL;
    free(out.p);
}

/* cw_cell_empty(x): 1 when x holds no row. */
static void fn_empty(sqlite3_context *ctx, int argc, sqlite3_value **argv)
{
    (void)argc;
    cw__cell_reader_t c;
    if (cw__cell_read_begin(&c, sqlite3_value_blob(argv[0]), (size_t)sqlite3_value_bytes(argv[0]),
                            0)) {
        sqlite3_result_error(ctx, "cw_cell_empty: not a cell", -1);
        return;
    }
    sqlite3_result_int(ctx, c.pos == c.n);
}

/* ---- the table-valued functions ----------------------------------------------
 *
 * cw_commit_rows(data) and cw_release_rows(data, bucket), eponymous-only
 * virtual tables as json_each(): the arguments are hidden columns that
 * the query constrains with "=", and a cursor decodes its cell at
 * xFilter and walks its rows. */

enum { TV_COMMITS, TV_RELEASES };
/* Columns: the rows' own, then the hidden arguments. */
static const char *const tv_schema[] = {
    "CREATE TABLE x(stack, bytes, events, data HIDDEN)",
    "CREATE TABLE x(stack, a, bytes, pieces, closed, data HIDDEN, bucket HIDDEN)",
};
static const int tv_own[] = {3, 5};

typedef struct tv_tab {
    sqlite3_vtab base;
    int kind;
} tv_tab_t;

typedef struct tv_cursor {
    sqlite3_vtab_cursor base;
    int kind;
    cw__cell_rows_t rows; /* the cell's rows; the vectors are kept between cells */
    uint32_t at;
} tv_cursor_t;

static int tv_connect(sqlite3 *db, void *aux, int argc, const char *const *argv, sqlite3_vtab **out,
                      char **err)
{
    (void)argc, (void)argv, (void)err;
    int kind = (int)(intptr_t)aux;
    int rc = sqlite3_declare_vtab(db, tv_schema[kind]);
    if (rc != SQLITE_OK) return rc;
    tv_tab_t *t = sqlite3_malloc(sizeof *t);
    if (!t) return SQLITE_NOMEM;
    memset(t, 0, sizeof *t);
    t->kind = kind;
    sqlite3_vtab_config(db, SQLITE_VTAB_INNOCUOUS);
    *out = &t->base;
    return SQLITE_OK;
}

static int tv_disconnect(sqlite3_vtab *vt)
{
    sqlite3_free(vt);
    return SQLITE_OK;
}

/* Every hidden argument must be given with "=": argv[0] the data,
 * argv[1] the bucket. */
static int tv_best_index(sqlite3_vtab *vt, sqlite3_index_info *info)
{
    tv_tab_t *t = (tv_tab_t *)vt;
    int own = tv_own[t->kind], args = t->kind == TV_COMMITS ? 1 : 2, found = 0;
    for (int i = 0; i < info->nConstraint; i++) {
        const struct sqlite3_index_constraint *c = &info->aConstraint[i];
        int arg = c->iColumn - own;
        if (arg < 0) continue;
        if (!c->usable || c->op != SQLITE_INDEX_CONSTRAINT_EQ) return SQLITE_CONSTRAINT;
        info->aConstraintUsage[i].argvIndex = arg + 1;
        info->aConstraintUsage[i].omit = 1;
        found |= 1 << arg;
    }
    if (found != (1 << args) - 1) return SQLITE_CONSTRAINT;
    info->estimatedCost = 10;
    info->estimatedRows = 10;
    return SQLITE_OK;
}

static int tv_open(sqlite3_vtab *vt, sqlite3_vtab_cursor **out)
{
    tv_cursor_t *c = sqlite3_malloc(sizeof *c);
    if (!c) return SQLITE_NOMEM;
    memset(c, 0, sizeof *c);
    c->kind = ((tv_tab_t *)vt)->kind;
    *out = &c->base;
    return SQLITE_OK;
}

static int tv_close(sqlite3_vtab_cursor *cur)
{
    tv_cursor_t *c = (tv_cursor_t *)cur;
    cw__cell_rows_free(&c->rows);
    sqlite3_free(c);
    return SQLITE_OK;
}

static int tv_filter(sqlite3_vtab_cursor *cur, int idx, const char *idxs, int argc,
                     sqlite3_value **argv)
{
    (void)idx, (void)idxs;
    tv_cursor_t *c = (tv_cursor_t *)cur;
    c->rows.c.n = c->rows.r.n = 0;
    c->at = 0;
    if (argc < 1 || sqlite3_value_type(argv[0]) == SQLITE_NULL) return SQLITE_OK;
    int64_t bucket = argc > 1 ? sqlite3_value_int64(argv[1]) : 0;
    int err = cw__cell_decode(sqlite3_value_blob(argv[0]), (size_t)sqlite3_value_bytes(argv[0]),
                              bucket, 0, &c->rows, NULL);
    if (err == CW_ENOMEM) return SQLITE_NOMEM;
    if (err) {
        sqlite3_free(cur->pVtab->zErrMsg);
        cur->pVtab->zErrMsg = sqlite3_mprintf("a cell that is not one (corrupt data)");
        return SQLITE_CORRUPT_VTAB;
    }
    return SQLITE_OK;
}

static int tv_next(sqlite3_vtab_cursor *cur)
{
    ((tv_cursor_t *)cur)->at++;
    return SQLITE_OK;
}

static int tv_eof(sqlite3_vtab_cursor *cur)
{
    tv_cursor_t *c = (tv_cursor_t *)cur;
    return c->at >= (c->kind == TV_COMMITS ? c->rows.c.n : c->rows.r.n);
}

static int tv_column(sqlite3_vtab_cursor *cur, sqlite3_context *ctx, int col)
{
    tv_cursor_t *c = (tv_cursor_t *)cur;
    int64_t v = 0;
    if (c->kind == TV_COMMITS) {
        const cw_row_commit_t *r = &c->rows.c.v[c->at];
        v = col == 0 ? r->stack : col == 1 ? (int64_t)r->bytes : (int64_t)r->events;
    } else {
        const cw_row_release_t *r = &c->rows.r.v[c->at];
        switch (col) {
        case 0:
            v = r->stack;
            break;
        case 1:
            v = r->a;
            break;
        case 2:
            v = (int64_t)r->bytes;
            break;
        case 3:
            v = (int64_t)r->pieces;
            break;
        default:
            v = (int64_t)r->closed;
            break;
        }
    }
    sqlite3_result_int64(ctx, v);
    return SQLITE_OK;
}

static int tv_rowid(sqlite3_vtab_cursor *cur, sqlite_int64 *out)
{
    *out = ((tv_cursor_t *)cur)->at;
    return SQLITE_OK;
}

/* A table of callbacks (alike to the sources' cw_source_ops_t tables in
 * form only). */
static const sqlite3_module tv_module = {
    .iVersion = 0,
    .xCreate = NULL, /* eponymous-only */
    .xConnect = tv_connect,
    .xBestIndex = tv_best_index,
    .xDisconnect = tv_disconnect,
    .xOpen = tv_open,
    .xClose = tv_close,
    .xFilter = tv_filter,
    .xNext = tv_next,
    .xEof = tv_eof,
    .xColumn = tv_column,
    .xRowid = tv_rowid,
};

/* cw_layer(): the layer the connection's reads read (its handle's
 * cw_store_set_layer). */
static void fn_layer(sqlite3_context *ctx, int argc, sqlite3_value **argv)
{
    (void)argc;
    (void)argv;
    sqlite3_result_int(ctx, *(const int *)sqlite3_user_data(ctx));
}

int cw__cells_register(sqlite3 *db, const int *layer)
{
    int flags = SQLITE_UTF8 | SQLITE_DETERMINISTIC | SQLITE_INNOCUOUS;
    int rc = sqlite3_create_module(db, "cw_commit_rows", &tv_module, (void *)(intptr_t)TV_COMMITS);
    if (rc == SQLITE_OK)
        rc =
            sqlite3_create_module(db, "cw_release_rows", &tv_module, (void *)(intptr_t)TV_RELEASES);
    if (rc == SQLITE_OK)
        rc = sqlite3_create_function(db, "cw_cell_merge", 2, flags, NULL, fn_merge, NULL, NULL);
    if (rc == SQLITE_OK)
        rc = sqlite3_create_function(db, "cw_cell_empty", 1, flags, NULL, fn_empty, NULL, NULL);
    /* Not deterministic: its value changes between statements. */
    if (rc == SQLITE_OK)
        rc = sqlite3_create_function(db, "cw_layer", 0, SQLITE_UTF8 | SQLITE_INNOCUOUS,
                                     (void *)layer, fn_layer, NULL, NULL);
    return rc;
}

const char cw__cells_views_sql[] =
    "CREATE TEMP VIEW IF NOT EXISTS commits(tier, bucket, proc, stack, bytes, events) AS "
    "SELECT c.tier, c.bucket, c.proc, e.stack, e.bytes, e.events "
    "FROM cells AS c, cw_commit_rows(c.data) AS e WHERE c.layer = cw_layer();"
    "CREATE TEMP VIEW IF NOT EXISTS releases(tier, f, proc, stack, a, bytes, pieces, closed) AS "
    "SELECT c.tier, c.bucket, c.proc, e.stack, e.a, e.bytes, e.pieces, e.closed "
    "FROM cells AS c, cw_release_rows(c.data, c.bucket) AS e WHERE c.layer = cw_layer();"
    "CREATE TEMP VIEW IF NOT EXISTS activity(tier, bucket, proc, events, delta, relpeak, "
    "relpeak_ns) AS SELECT tier, bucket, proc, events, delta, relpeak, bucket + peak_off "
    "FROM cells WHERE layer = cw_layer() AND events IS NOT NULL;";
