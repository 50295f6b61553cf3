/* store_fold.c - short-lived instances stored folded (schema/005_folded,
 * docs/DESIGN.md "Short-lived processes"): writing a batch's folded rows
 * and listing a group's instances on demand.
 *
 * The aggregator (track/agg.c) decides what folds and gives the folded
 * instances' rows their group's id; the store only keeps the record of
 * each instance and the count in its group's processes row. */
#include <stdlib.h>
#include <string.h>

#include "commitwatch/query.h"
#include "store/store_internal.h"

static const char SQL_FOLDED_PUT[] =
    "INSERT INTO folded(grp, start_ns, pid, exit_ns, bytes) VALUES (?1, ?2, ?3, ?4, ?5) "
    "ON CONFLICT(grp, start_ns, pid) DO UPDATE SET exit_ns = excluded.exit_ns, "
    "bytes = excluded.bytes";
static const char SQL_FOLDED_COUNT[] =
    "UPDATE processes SET folded = coalesce(folded, 0) + 1 WHERE id = ?1";
/* Alive in [?2, ?3): started before the end, exited at or after the start. */
static const char SQL_FOLDED_LIST[] =
    "SELECT pid, start_ns, exit_ns, bytes FROM folded WHERE grp = ?1 AND start_ns < ?3 "
    "AND exit_ns >= ?2 ORDER BY start_ns, pid";

int cw__store_put_folded(cw_store_t *s, const cw_batch_t *b, cw_diag_t *d)
{
    int err = 0;
    for (uint32_t i = 0; i < b->folded.n && !err; i++) {
        const cw_row_folded_t *r = &b->folded.v[i];
        const int64_t v[] = {r->group, r->start_ns, r->pid, r->exit_ns, (int64_t)r->bytes};
        err = cw__store_put_ints(s, CW__ST_FOLDED_PUT, SQL_FOLDED_PUT, v, CW_ARRAY_LEN(v),
                                 "storing a folded instance", d);
        if (!err)
            err = cw__store_put_ints(s, CW__ST_FOLDED_COUNT, SQL_FOLDED_COUNT, v, 1,
                                     "counting a folded instance", d);
    }
    return err;
}

int cw_store_folded_list(cw_store_t *s, uint32_t group, int64_t from_ns, int64_t to_ns,
                         size_t limit, cw_folded_list_t *out, cw_diag_t *d)
{
    sqlite3_stmt *st = NULL;
    size_t cap = 0;
    int rc, err = cw__store_stmt(s, CW__ST_FOLDED_LIST, SQL_FOLDED_LIST, &st, d);
    memset(out, 0, sizeof *out);
    if (err) return err;
    sqlite3_bind_int64(st, 1, group);
    sqlite3_bind_int64(st, 2, from_ns);
    sqlite3_bind_int64(st, 3, to_ns);
    while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
        out->total++;
        if (limit && out->n >= limit) continue;
        if (CW_RESERVE(out->v, cap, out->n + 1)) {
            err = cw_diag_set(d, CW_ENOMEM, "listing folded instances: out of memory");
            break;
        }
        out->v[out->n++] = (cw_folded_inst_t){(uint32_t)sqlite3_column_int64(st, 0),
                                              sqlite3_column_int64(st, 1),
                                              sqlite3_column_int64(st, 2),
                                              (uint64_t)sqlite3_column_int64(st, 3)};
    }
    if (!err && rc != SQLITE_DONE) err = cw__store_dberr(s, "listing folded instances", d);
    cw__store_stmt_done(st);
    if (err) cw_folded_list_clear(out);
    return err;
}

void cw_folded_list_clear(cw_folded_list_t *l)
{
    free(l->v);
    memset(l, 0, sizeof *l);
}
