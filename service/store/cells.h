/* cells.h - the encoding of a cell (cells.c): one (tier, bucket, proc,
 * layer)'s commits and releases, per stack, in one BLOB of the `cells`
 * table (schema/009_cells.sql; docs/DESIGN.md, "Cells"), and what lets
 * SQL read them as rows.
 *
 * Ground floor, beside db.c: any thread, no state of its own. Not a
 * public header: only service/store/ and tests include it. */
#ifndef COMMITWATCH_STORE_CELLS_H
#define COMMITWATCH_STORE_CELLS_H

#include <sqlite3.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "commitwatch/batch.h"
#include "commitwatch/common.h"
#include "commitwatch/event.h"
#include "commitwatch/store.h"

/* The layers a cell belongs to (cells.layer): commit figures never mix
 * with heap figures. */
enum cw__layer { CW__LAYER_COMMIT = CW_LAYER_COMMIT, CW__LAYER_HEAP = CW_LAYER_HEAP };

/* Encodes into out (appended) the rows of one cell of bucket `bucket`:
 * c (nc rows) and r (nr rows) of one process, sorted by stack (c) and by
 * (stack, a) (r), one row a key (cw_batch_merge_commits/_releases order),
 * r's a at or before bucket in steps of unit (the tier's width; any other
 * a is stored too, at 1 ns steps). A cell of bucket CW_TS_BEFORE holds
 * commits only. *bytes and *released get the sums of the commits' and the
 * releases' bytes. 0, CW_ENOMEM or CW_EINVAL (releases in BEFORE). */
int cw__cell_encode(cw_buf_t *out, int64_t bucket, int64_t unit, const cw_row_commit_t *c,
                    uint32_t nc, const cw_row_release_t *r, uint32_t nr, int64_t *bytes,
                    int64_t *released);

/* A cell's rows, decoded (appended to the vectors; commits' a is the
 * bucket, both rows' proc is `proc`), in the order they were encoded. The
 * caller owns and frees the vectors. */
typedef struct cw__cell_rows {
    CW__VEC(cw_row_commit_t) c;
    CW__VEC(cw_row_release_t) r;
} cw__cell_rows_t;

/* Reading a cell one row at a time, for readers that add each row to a
 * sum and keep none (a whole-day report of 10,000 live processes reads
 * 1.25 M rows of 90,000 cells): cw__cell_read_begin(), then per entry
 * cw__cell_read_entry() (its stack, its commit row if it has one, how many
 * release rows follow), then as many cw__cell_read_release(). Each is 0,
 * or -1 when data is not a cell (cut short, a figure out of range);
 * cw__cell_read_entry() is 1 at the end. A reader that stops at -1 has
 * been given the rows before it. cw__cell_decode() reads this way. */
typedef struct cw__cell_reader {
    const unsigned char *p;
    size_t n, pos;
    int64_t bucket;
    int64_t u;   /* the time unit */
    uint64_t pu; /* the byte unit */
    bool plain;
    uint32_t stack; /* the entry's */
} cw__cell_reader_t;

int cw__cell_read_begin(cw__cell_reader_t *c, const void *data, size_t n, int64_t bucket);

static inline int64_t cw__cell_unfig(bool plain, uint64_t v)
{
    return plain ? (int64_t)v : cw_unzigzag(v);
}

static inline int cw__cell_read_entry(cw__cell_reader_t *c, bool *has_commit, uint64_t *bytes,
                                      uint64_t *events, uint64_t *nrel)
{
    uint64_t d, k, b, e;
    if (c->pos >= c->n) return 1;
    if (cw_varint_read(c->p, c->n, &c->pos, &d) || cw_varint_read(c->p, c->n, &c->pos, &k) ||
        d > UINT32_MAX)
        return -1;
    c->stack += (uint32_t)d;
    *nrel = k >> 1;
    if (*nrel > (c->n - c->pos) / 4) return -1; /* a release row takes 4 bytes at least */
    *has_commit = k & 1;
    if (*has_commit) {
        if (cw_varint_read(c->p, c->n, &c->pos, &b) || cw_varint_read(c->p, c->n, &c->pos, &e))
            return -1;
        *bytes = (uint64_t)cw__cell_unfig(c->plain, b) * c->pu;
        *events = (uint64_t)cw__cell_unfig(c->plain, e);
    }
    return 0;
}

/* The next release row of the entry: a (CW_TS_BEFORE or the exact time),
 * bytes, pieces, closed. */
static inline int cw__cell_read_release(cw__cell_reader_t *c, int64_t *a, uint64_t *bytes,
                                        uint64_t *pieces, uint64_t *closed)
{
    uint64_t w[4]; /* the code of a, bytes, pieces, closed */
    for (int i = 0; i < 4; i++)
        if (cw_varint_read(c->p, c->n, &c->pos, &w[i])) return -1;
    bool plain = c->plain;
    *a = w[0] == 0 ? CW_TS_BEFORE
                   : (int64_t)((uint64_t)c->bucket -
                               (uint64_t)cw__cell_unfig(plain, w[0] - 1) * (uint64_t)c->u);
    *bytes = (uint64_t)cw__cell_unfig(plain, w[1]) * c->pu;
    *pieces = (uint64_t)cw__cell_unfig(plain, w[2]);
    *closed = (uint64_t)cw__cell_unfig(plain, w[3]);
    return 0;
}

/* 0, CW_ENOMEM, or CW_EDB when data is not a cell (unit: where given, the
 * cell's time unit). */
int cw__cell_decode(const void *data, size_t n, int64_t bucket, uint32_t proc, cw__cell_rows_t *out,
                    int64_t *unit);
void cw__cell_rows_free(cw__cell_rows_t *rows);

/* Registers, on a connection, the SQL functions over cells:
 *   cw_commit_rows(data)            table: stack, bytes, events
 *   cw_release_rows(data, bucket)   table: stack, a, bytes, pieces, closed
 *   cw_cell_merge(x, y)             the cell of x's and y's rows summed
 *                                   per key (rows that come to 0 left out)
 *   cw_cell_empty(x)                1 when x holds no row
 *   cw_layer()                      *layer: the layer the handle reads
 *                                   (cw_store_set_layer), which the views
 *                                   below and the readers' own SQL select
 * SQLITE_OK or an SQLite error code. */
int cw__cells_register(sqlite3 *db, const int *layer);

/* Creates the connection's temp views commits, releases and activity
 * over the cells of the layer cw_layer() names (the commit layer unless
 * the handle was set to another), with the columns of schema 001's tables,
 * so that the readers' SQL reads them as rows. Only on a database at the
 * current schema (they would hide an older schema's tables). */
extern const char cw__cells_views_sql[];

#endif
