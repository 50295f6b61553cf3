/* store_read.c - the readers' ground: what the read queries of
 * store_query.c, store_report.c, store_series.c and store_alertfeed.c
 * share. Where a history splits between a coarser tier and the raw tier
 * (cw__store_split), the end of the data and the tier state clipped to it,
 * a process instance's row, and the stack-tag rules' hash the read caches
 * are keyed on. Each runs inside the caller's read transaction, on the
 * thread that holds the handle. */
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "commitwatch/event.h"
#include "commitwatch/platform.h"
#include "store/store_internal.h"

/* SQL texts of their own (alike to store_alerts.c's by layout only). */
static const char SQL_Q_PROC[] =
    "SELECT pid, start_ns, exit_ns, name, cmdline, tracking_ended_ns, folded, corrections, "
    "corrected_committed, corrected_decommitted, last_correction_ns FROM processes WHERE id = ?1";
/* The same rows in id order from ?1 on (cw__proc_scan_t). */
static const char SQL_Q_PROC_SCAN[] =
    "SELECT pid, start_ns, exit_ns, name, cmdline, tracking_ended_ns, folded, corrections, "
    "corrected_committed, corrected_decommitted, last_correction_ns, id FROM processes "
    "WHERE id >= ?1 ORDER BY id";
/* The newest end of tracking (schema/003's partial index answers it). */
static const char SQL_LAST_ENDED[] =
    "SELECT MAX(tracking_ended_ns) FROM processes WHERE tracking_ended_ns IS NOT NULL";
static const char SQL_RULES_HASH[] = "SELECT value FROM meta WHERE key = 'rules_hash'";

int64_t cw__store_split(const cw__tier_t t[CW_TIERS], int k, int64_t x)
{
    int64_t endk = t[k].end, h0 = t[0].horizon;
    if (endk == INT64_MIN) return INT64_MIN;
    int64_t e = x == INT64_MAX ? endk : cw_floor_to(x, t[k].width);
    if (e > endk) e = endk;
    /* Raw rows after e must all still be there (not folded by retention). */
    return h0 != INT64_MIN && h0 > e ? INT64_MIN : e;
}

int cw__store_col_dup(sqlite3_stmt *st, int col, const char *dflt, char **out)
{
    const char *v = (const char *)sqlite3_column_text(st, col);
    *out = NULL;
    if (!v && !dflt) return 0;
    return (*out = cw_strdup(v ? v : dflt)) ? 0 : CW_ENOMEM;
}

int cw__store_data_end(cw_store_t *s, const cw__tier_t *t, int64_t *end_ns, bool *ended,
                       cw_diag_t *d)
{
    sqlite3_stmt *st = NULL;
    int err = 0, rc;
    *end_ns = t[0].end;
    *ended = false;
    if (t[0].end == INT64_MIN) return 0;
    if ((err = cw__store_stmt(s, CW__ST_Q_LAST_ENDED, SQL_LAST_ENDED, &st, d))) return err;
    rc = sqlite3_step(st);
    if (rc == SQLITE_ROW && sqlite3_column_type(st, 0) != SQLITE_NULL) {
        int64_t e = sqlite3_column_int64(st, 0);
        /* The run that ended there stored the bucket of its end last
         * (release rows only); a later run stores buckets after it. */
        if (e < t[0].end && e >= t[0].end - t[0].width) {
            *end_ns = e;
            *ended = true;
        }
    } else if (rc != SQLITE_ROW) {
        err = cw__store_dberr(s, "reading where tracking ended", d);
    }
    cw__store_stmt_done(st);
    return err;
}

void cw__store_tiers_clip(cw__tier_t t[CW_TIERS], int64_t end)
{
    t[0].end = end;
    for (int k = 1; k < CW_TIERS; k++) {
        int64_t b = cw_floor_to(end, t[k].width);
        if (t[k].end > b) t[k].end = b;
    }
}

/* What a process lookup leaves in *out before its row is read. */
static void proc_info_none(cw_proc_info_t *out, uint32_t id)
{
    memset(out, 0, sizeof *out);
    out->id = id;
    out->exit_ns = CW_TS_NEVER;
    out->tracking_ended_ns = CW_TS_NEVER;
    out->last_correction_ns = CW_TS_NEVER;
}

/* The columns SQL_Q_PROC and SQL_Q_PROC_SCAN share (0 - 10) into *out. */
static int proc_cols(sqlite3_stmt *st, cw_proc_info_t *out)
{
    out->pid = (uint32_t)sqlite3_column_int64(st, 0);
    out->start_ns = sqlite3_column_int64(st, 1);
    if (sqlite3_column_type(st, 2) != SQLITE_NULL) out->exit_ns = sqlite3_column_int64(st, 2);
    if (sqlite3_column_type(st, 5) != SQLITE_NULL)
        out->tracking_ended_ns = sqlite3_column_int64(st, 5);
    out->folded = (uint32_t)sqlite3_column_int64(st, 6);
    out->corrections = (uint32_t)sqlite3_column_int64(st, 7);
    out->corrected_committed = (uint64_t)sqlite3_column_int64(st, 8);
    out->corrected_decommitted = (uint64_t)sqlite3_column_int64(st, 9);
    if (sqlite3_column_type(st, 10) != SQLITE_NULL)
        out->last_correction_ns = sqlite3_column_int64(st, 10);
    int err = cw__store_col_dup(st, 3, NULL, &out->name);
    if (!err) err = cw__store_col_dup(st, 4, NULL, &out->cmdline);
    return err;
}

int cw__store_proc_row(cw_store_t *s, uint32_t id, cw_proc_info_t *out, bool *found, cw_diag_t *d)
{
    sqlite3_stmt *st = NULL;
    int err = cw__store_stmt(s, CW__ST_Q_PROC, SQL_Q_PROC, &st, d), rc;
    proc_info_none(out, id);
    *found = false;
    if (err) return err;
    sqlite3_bind_int64(st, 1, id);
    rc = sqlite3_step(st);
    if (rc == SQLITE_ROW) {
        *found = true;
        err = proc_cols(st, out);
    } else if (rc != SQLITE_DONE) {
        err = cw__store_dberr(s, "reading a process", d);
    }
    cw__store_stmt_done(st);
    if (err) cw_proc_info_clear(out);
    return err;
}

int cw__proc_scan_begin(cw_store_t *s, cw__proc_scan_t *c, uint32_t from, cw_diag_t *d)
{
    memset(c, 0, sizeof *c);
    int err = cw__store_stmt(s, CW__ST_Q_PROC_SCAN, SQL_Q_PROC_SCAN, &c->st, d);
    if (err) return err;
    sqlite3_bind_int64(c->st, 1, from);
    c->s = s;
    c->at = -1; /* no row read yet */
    return 0;
}

int cw__proc_scan_get(cw__proc_scan_t *c, uint32_t id, cw_proc_info_t *out, bool *found,
                      cw_diag_t *d)
{
    proc_info_none(out, id);
    *found = false;
    if (!c->st) return cw_diag_set(d, CW_EINVAL, "reading processes: the scan is over");
    if ((int64_t)id < c->last)
        return cw_diag_set(d, CW_EINVAL, "reading processes: instance %" PRIu32 " out of order",
                           id);
    c->last = id;
    while (!c->done && c->at < (int64_t)id) {
        int rc = sqlite3_step(c->st);
        if (rc == SQLITE_DONE) {
            c->done = true;
        } else if (rc == SQLITE_ROW) {
            c->at = sqlite3_column_int64(c->st, 11);
        } else {
            return cw__store_dberr(c->s, "reading processes", d);
        }
    }
    if (c->done || c->at != (int64_t)id) return 0;
    *found = true;
    int err = proc_cols(c->st, out);
    if (err) cw_proc_info_clear(out);
    return err;
}

void cw__proc_scan_end(cw__proc_scan_t *c)
{
    if (c->st) cw__store_stmt_done(c->st);
    memset(c, 0, sizeof *c);
}

void cw_proc_info_clear(cw_proc_info_t *p)
{
    free(p->name);
    free(p->cmdline);
    memset(p, 0, sizeof *p);
}

int cw__store_rules_hash(cw_store_t *s, char **out, cw_diag_t *d)
{
    sqlite3_stmt *st = NULL;
    int err = cw__store_stmt(s, CW__ST_SER_RULES_HASH, SQL_RULES_HASH, &st, d), rc;
    *out = NULL;
    if (err) return err;
    rc = sqlite3_step(st);
    if (rc == SQLITE_ROW && sqlite3_column_type(st, 0) != SQLITE_NULL) {
        if (!(*out = cw_strdup((const char *)sqlite3_column_text(st, 0)))) err = CW_ENOMEM;
    } else if (rc != SQLITE_ROW && rc != SQLITE_DONE) {
        err = cw__store_dberr(s, "reading the stack-tag rules' hash", d);
    }
    cw__store_stmt_done(st);
    return err;
}

int cw_store_set_layer(cw_store_t *s, cw_layer_t layer)
{
    if ((layer != CW_LAYER_COMMIT && layer != CW_LAYER_HEAP) || s->w) return CW_EINVAL;
    if ((int)layer != s->layer) {
        cw_store_drop_read_caches(s);
        s->layer = (int)layer;
    }
    return 0;
}
