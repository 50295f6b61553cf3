/* store_rows.c - the writer's row inserts into the tier tables: an
 * activity row, and the plain multi-row inserts of rows whose key is new
 * by construction (a batch's own rows, a rollup's rows of a bucket not
 * rolled before). Used by store.c (a batch) and store_tiers.c (rollups);
 * writer thread only. */
#include <stdlib.h>
#include <string.h>

#include "commitwatch/platform.h"
#include "store/store_internal.h"

static const char SQL_ACTIVITY_PUT[] =
    "INSERT INTO activity(tier, bucket, proc, events, delta, relpeak, relpeak_ns) "
    "VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)";

int cw__store_put_activity(cw_store_t *s, int tier, int64_t bucket, const cw_row_activity_t *r,
                           cw_diag_t *d)
{
    const int64_t v[] = {tier, bucket, r->proc, (int64_t)r->events, r->delta, r->relpeak,
                         r->relpeak_ns};
    return cw__store_put_ints(s, CW__ST_ACTIVITY_PUT, SQL_ACTIVITY_PUT, v, CW_ARRAY_LEN(v),
                              "storing activity", d);
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
