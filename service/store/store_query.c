/* store_query.c - the API's small read queries (query.h): the data span,
 * a process instance's row, the tag names and the figures of /metrics;
 * and what the store's read queries share: read transactions on cached
 * statements, and where to split a history between the hour tier and the
 * raw tier (cw__store_split). Time series are store_series.c's.
 *
 * Every statement is prepared once per handle (cw__store_stmt) and reset
 * after use, so an HTTP worker's requests parse no SQL. */
#include <stdlib.h>
#include <string.h>

#include "commitwatch/event.h"
#include "commitwatch/query.h"
#include "store/store_internal.h"

/* ---- SQL ---------------------------------------------------------------- */

static const char SQL_READ_BEGIN[] = "BEGIN";
static const char SQL_READ_END[] = "COMMIT";
static const char SQL_Q_PROC[] =
    "SELECT pid, start_ns, exit_ns, name, cmdline, tracking_ended_ns, folded FROM processes "
    "WHERE id = ?1";
/* The newest end of tracking (schema/003's partial index answers it). */
static const char SQL_LAST_ENDED[] =
    "SELECT MAX(tracking_ended_ns) FROM processes WHERE tracking_ended_ns IS NOT NULL";
static const char SQL_TAGS[] = "SELECT DISTINCT tag FROM stacks ORDER BY tag";

/* Everything stored, read cheaply: the hour tier's rows before ?1 (the
 * hour it is complete to, cw__store_split) and the raw tier's rows from
 * ?1 on. Per process, per tag outstanding now: */
static const char SQL_OUTSTANDING[] =
    "SELECT x.proc, p.pid, p.name, s.tag, SUM(x.b) FROM ("
    " SELECT proc, stack, bytes AS b FROM commits WHERE tier = 2 AND bucket < ?1"
    " UNION ALL SELECT proc, stack, bytes FROM commits WHERE tier = 0 AND bucket >= ?1"
    " UNION ALL SELECT proc, stack, -bytes FROM releases WHERE tier = 2 AND f < ?1"
    " UNION ALL SELECT proc, stack, -bytes FROM releases WHERE tier = 0 AND f >= ?1"
    ") x JOIN stacks s ON s.id = x.stack JOIN processes p ON p.id = x.proc"
    " GROUP BY x.proc, s.tag HAVING SUM(x.b) != 0 ORDER BY x.proc";

/* The counters by tag, as two statements (one reading commits, one
 * releases) whose rows the same loop takes in (load_counters): a
 * statement of both kinds would have SQLite materialize every row first
 * (15 % slower on a day of 1 s data). Commits, columns 1 and 2: committed
 * bytes and events (rundown and retention baselines, bucket BEFORE, left
 * out). Releases, columns 1-3: released bytes; the transient part, bytes
 * and pieces released within the same minute they were committed in
 * (minute tier before ?2, raw from ?2 on). */
static const char SQL_COMMITTED[] =
    "SELECT s.tag, SUM(x.b), SUM(x.e) FROM ("
    " SELECT stack, bytes AS b, events AS e FROM commits WHERE tier = 2 AND bucket < ?1"
    "  AND bucket > -9223372036854775807 - 1"
    " UNION ALL SELECT stack, bytes, events FROM commits WHERE tier = 0 AND bucket >= ?1"
    "  AND bucket > -9223372036854775807 - 1"
    ") x JOIN stacks s ON s.id = x.stack GROUP BY s.tag ORDER BY s.tag";
static const char SQL_RELEASED[] =
    "SELECT s.tag, SUM(x.b), SUM(x.tb), SUM(x.tp) FROM ("
    " SELECT stack, bytes AS b, 0 AS tb, 0 AS tp FROM releases WHERE tier = 2 AND f < ?1"
    " UNION ALL SELECT stack, bytes, 0, 0 FROM releases WHERE tier = 0 AND f >= ?1"
    " UNION ALL SELECT stack, 0, bytes, pieces FROM releases WHERE tier = 1 AND f < ?2 AND a = f"
    " UNION ALL SELECT stack, 0, bytes, pieces FROM releases WHERE tier = 0 AND f >= ?2"
    "  AND a > -9223372036854775807 - 1"
    "  AND (a - ((a % 60000000000) + 60000000000) % 60000000000)"
    "    = (f - ((f % 60000000000) + 60000000000) % 60000000000)"
    ") x JOIN stacks s ON s.id = x.stack GROUP BY s.tag ORDER BY s.tag";

/* ---- shared by the read queries --------------------------------------------- */

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

int64_t cw__store_split(const cw__tier_t t[CW_TIERS], int k, int64_t x)
{
    int64_t endk = t[k].end, h0 = t[0].horizon;
    if (endk == INT64_MIN) return INT64_MIN;
    int64_t e = x == INT64_MAX ? endk : cw_floor_to(x, t[k].width);
    if (e > endk) e = endk;
    /* Raw rows after e must all still be there (not folded by retention). */
    return h0 != INT64_MIN && h0 > e ? INT64_MIN : e;
}

/* strdup of a text column; NULL for SQL NULL, or when dflt is given, a
 * copy of dflt. 0 or CW_ENOMEM. */
static int col_dup(sqlite3_stmt *st, int col, const char *dflt, char **out)
{
    const char *v = (const char *)sqlite3_column_text(st, col);
    *out = NULL;
    if (!v && !dflt) return 0;
    return (*out = cw_strdup(v ? v : dflt)) ? 0 : CW_ENOMEM;
}

/* ---- data span ------------------------------------------------------------ */

int cw_store_data_span(cw_store_t *s, int64_t *start_ns, int64_t *end_ns, cw_diag_t *d)
{
    cw__tier_t t[CW_TIERS];
    int err = cw__store_read_tiers(s, t, d);
    if (start_ns) *start_ns = err ? INT64_MIN : t[0].start;
    if (end_ns) *end_ns = err ? INT64_MIN : t[0].end;
    return err;
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

int cw_store_data_end(cw_store_t *s, int64_t *end_ns, bool *ended, cw_diag_t *d)
{
    cw__tier_t t[CW_TIERS];
    bool began = false, e = false;
    int64_t end = INT64_MIN;
    int err = cw__store_read_begin(s, &began, d);
    if (!err) err = cw__store_read_tiers(s, t, d);
    if (!err) err = cw__store_data_end(s, t, &end, &e, d);
    cw__store_read_end(s, began);
    if (end_ns) *end_ns = err ? INT64_MIN : end;
    if (ended) *ended = !err && e;
    return err;
}

/* ---- one process instance --------------------------------------------------- */

int cw__store_proc_row(cw_store_t *s, uint32_t id, cw_proc_info_t *out, bool *found, cw_diag_t *d)
{
    sqlite3_stmt *st = NULL;
    int err = cw__store_stmt(s, CW__ST_Q_PROC, SQL_Q_PROC, &st, d), rc;
    memset(out, 0, sizeof *out);
    out->id = id;
    out->exit_ns = CW_TS_NEVER;
    out->tracking_ended_ns = CW_TS_NEVER;
    *found = false;
    if (err) return err;
    sqlite3_bind_int64(st, 1, id);
    rc = sqlite3_step(st);
    if (rc == SQLITE_ROW) {
        *found = true;
        out->pid = (uint32_t)sqlite3_column_int64(st, 0);
        out->start_ns = sqlite3_column_int64(st, 1);
        if (sqlite3_column_type(st, 2) != SQLITE_NULL) out->exit_ns = sqlite3_column_int64(st, 2);
        if (sqlite3_column_type(st, 5) != SQLITE_NULL)
            out->tracking_ended_ns = sqlite3_column_int64(st, 5);
        out->folded = (uint32_t)sqlite3_column_int64(st, 6);
        err = col_dup(st, 3, NULL, &out->name);
        if (!err) err = col_dup(st, 4, NULL, &out->cmdline);
    } else if (rc != SQLITE_DONE) {
        err = cw__store_dberr(s, "reading a process", d);
    }
    cw__store_stmt_done(st);
    if (err) cw_proc_info_clear(out);
    return err;
}

int cw_store_proc_get(cw_store_t *s, uint32_t id, cw_proc_info_t *out, cw_diag_t *d)
{
    bool found;
    int err = cw__store_proc_row(s, id, out, &found, d);
    if (!err && !found) err = cw_diag_set(d, CW_ENOENT, "no process instance %u", (unsigned)id);
    if (!err && !out->name && !(out->name = cw_strdup(""))) err = CW_ENOMEM;
    if (err) cw_proc_info_clear(out);
    return err;
}

void cw_proc_info_clear(cw_proc_info_t *p)
{
    free(p->name);
    free(p->cmdline);
    memset(p, 0, sizeof *p);
}

/* ---- tags ----------------------------------------------------------------- */

int cw_store_tags(cw_store_t *s, cw_tag_list_t *out, cw_diag_t *d)
{
    sqlite3_stmt *st = NULL;
    size_t cap = 0;
    int err = cw__store_stmt(s, CW__ST_TAGS, SQL_TAGS, &st, d), rc;
    memset(out, 0, sizeof *out);
    if (err) return err;
    while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
        const char *tag = (const char *)sqlite3_column_text(st, 0);
        if (!tag) continue;
        if ((err = CW_RESERVE(out->v, cap, out->n + 1))) break;
        if (!(out->v[out->n] = cw_strdup(tag))) {
            err = CW_ENOMEM;
            break;
        }
        out->n++;
    }
    if (!err && rc != SQLITE_DONE) err = cw__store_dberr(s, "listing the tags", d);
    cw__store_stmt_done(st);
    if (err == CW_ENOMEM) cw_diag_set(d, err, "listing the tags: out of memory");
    if (err) cw_tag_list_clear(out);
    return err;
}

void cw_tag_list_clear(cw_tag_list_t *l)
{
    for (size_t i = 0; i < l->n; i++)
        free(l->v[i]);
    free(l->v);
    memset(l, 0, sizeof *l);
}

/* ---- /metrics --------------------------------------------------------------- */

/* Outstanding now, per process and tag. */
static int load_outstanding(cw_store_t *s, int64_t split2, cw_store_metrics_t *m, cw_diag_t *d)
{
    sqlite3_stmt *st = NULL;
    size_t cap = 0;
    int err = cw__store_stmt(s, CW__ST_OUTSTANDING, SQL_OUTSTANDING, &st, d), rc;
    if (err) return err;
    sqlite3_bind_int64(st, 1, split2);
    while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
        if ((err = CW_RESERVE(m->out, cap, m->nout + 1))) break;
        cw_outstanding_row_t *r = &m->out[m->nout];
        memset(r, 0, sizeof *r);
        m->nout++; /* counted now: its strings are freed with the rest */
        r->proc = (uint32_t)sqlite3_column_int64(st, 0);
        r->pid = (uint32_t)sqlite3_column_int64(st, 1);
        r->bytes = sqlite3_column_int64(st, 4);
        if ((err = col_dup(st, 2, "", &r->name)) || (err = col_dup(st, 3, "", &r->tag))) break;
    }
    if (!err && rc != SQLITE_DONE) err = cw__store_dberr(s, "reading outstanding bytes", d);
    cw__store_stmt_done(st);
    return err;
}

/* The counters of tag in m, added in name order when new; NULL on
 * ENOMEM. Tags are few (bounded by the rule set). */
static cw_tag_counters_t *counters_of(cw_store_metrics_t *m, size_t *cap, const char *tag)
{
    size_t i = 0;
    int c = 1;
    while (i < m->ntags && (c = strcmp(m->tags[i].tag, tag)) < 0)
        i++;
    if (i < m->ntags && c == 0) return &m->tags[i];
    char *name = cw_strdup(tag);
    if (!name || CW_RESERVE(m->tags, *cap, m->ntags + 1)) {
        free(name);
        return NULL;
    }
    memmove(&m->tags[i + 1], &m->tags[i], (m->ntags - i) * sizeof *m->tags);
    memset(&m->tags[i], 0, sizeof m->tags[i]);
    m->tags[i].tag = name;
    m->ntags++;
    return &m->tags[i];
}

/* The counters by tag: the committed rows, then the released rows. */
static int load_counters(cw_store_t *s, int64_t split2, int64_t split1, cw_store_metrics_t *m,
                         cw_diag_t *d)
{
    static const struct {
        int slot;
        const char *sql;
    } kinds[] = {{CW__ST_COMMITTED, SQL_COMMITTED}, {CW__ST_RELEASED, SQL_RELEASED}};
    size_t cap = 0;
    int err = 0;
    for (size_t k = 0; k < CW_ARRAY_LEN(kinds) && !err; k++) {
        sqlite3_stmt *st = NULL;
        int rc = SQLITE_DONE;
        if ((err = cw__store_stmt(s, kinds[k].slot, kinds[k].sql, &st, d))) break;
        sqlite3_bind_int64(st, 1, split2);
        if (k == 1) sqlite3_bind_int64(st, 2, split1);
        while (!err && (rc = sqlite3_step(st)) == SQLITE_ROW) {
            const char *tag = (const char *)sqlite3_column_text(st, 0);
            cw_tag_counters_t *c = counters_of(m, &cap, tag ? tag : "");
            if (!c) {
                err = CW_ENOMEM;
            } else if (k == 0) {
                c->has_commits = true;
                c->committed_bytes = sqlite3_column_int64(st, 1);
                c->commit_events = sqlite3_column_int64(st, 2);
            } else {
                c->has_releases = true;
                c->decommitted_bytes = sqlite3_column_int64(st, 1);
                c->transient_bytes = sqlite3_column_int64(st, 2);
                c->transient_pieces = sqlite3_column_int64(st, 3);
            }
        }
        if (!err && rc != SQLITE_DONE) err = cw__store_dberr(s, "reading the counters", d);
        cw__store_stmt_done(st);
    }
    return err;
}

int cw_store_metrics(cw_store_t *s, cw_store_metrics_t **out, cw_diag_t *d)
{
    cw__tier_t t[CW_TIERS];
    bool began = false;
    cw_store_metrics_t *m = calloc(1, sizeof *m);
    int err = m ? 0 : CW_ENOMEM;
    *out = NULL;
    if (!err) err = cw__store_read_begin(s, &began, d);
    if (!err) err = cw__store_read_tiers(s, t, d);
    if (!err) {
        int64_t split2 = cw__store_split(t, 2, INT64_MAX),
                split1 = cw__store_split(t, 1, INT64_MAX);
        m->data_end_ns = t[0].end;
        err = load_outstanding(s, split2, m, d);
        if (!err) err = load_counters(s, split2, split1, m, d);
    }
    cw__store_read_end(s, began);
    if (err == CW_ENOMEM) cw_diag_set(d, err, "reading the figures of /metrics: out of memory");
    if (err) {
        cw_store_metrics_free(m);
        return err;
    }
    *out = m;
    return 0;
}

void cw_store_metrics_free(cw_store_metrics_t *m)
{
    if (!m) return;
    for (size_t i = 0; i < m->nout; i++) {
        free(m->out[i].name);
        free(m->out[i].tag);
    }
    for (size_t i = 0; i < m->ntags; i++)
        free(m->tags[i].tag);
    free(m->out);
    free(m->tags);
    free(m);
}
