/* store_query.c - the API's small read queries (query.h): the data span,
 * a process instance's row, the tag names and the figures of /metrics,
 * with the /metrics cache a handle keeps (shared between handles through
 * cw_store_share). What the read queries share is store_read.c's; time
 * series are store_series.c's.
 *
 * Every statement is prepared once per handle (cw__store_stmt) and reset
 * after use, so an HTTP worker's requests parse no SQL. */
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "commitwatch/common.h"
#include "commitwatch/event.h"
#include "commitwatch/platform.h"
#include "commitwatch/query.h"
#include "store/store_internal.h"

/* ---- SQL ---------------------------------------------------------------- */

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

/* The same figures as sums per (process, tag) over bounded ranges, so a
 * handle can keep the part of closed buckets (cw_store_metrics' cache)
 * and read only the rest. Bounds are inclusive: hour tier [?1, ?2] and
 * raw tier [?3, ?4] (commits by bucket, releases by f); transients from
 * the minute tier [?5, ?6] and [?7, ?8] (a = f), the raw tier [?9, ?10]
 * (a and f in one minute). Columns 2-10: outstanding, committed bytes,
 * events and rows (rundown and baselines, bucket BEFORE, count only as
 * outstanding), released bytes and rows, transient bytes, pieces, rows. */
#define M_NOT_BEFORE "bucket > -9223372036854775807 - 1"
static const char SQL_M_SUMS[] =
    "SELECT x.proc, s.tag, SUM(x.ob), SUM(x.cb), SUM(x.ce), SUM(x.cn), SUM(x.rb), SUM(x.rn),"
    " SUM(x.tb), SUM(x.tp), SUM(x.tn) FROM ("
    " SELECT proc, stack, bytes AS ob, CASE WHEN " M_NOT_BEFORE " THEN bytes ELSE 0 END AS cb,"
    "  CASE WHEN " M_NOT_BEFORE " THEN events ELSE 0 END AS ce, " M_NOT_BEFORE " AS cn,"
    "  0 AS rb, 0 AS rn, 0 AS tb, 0 AS tp, 0 AS tn"
    "  FROM commits WHERE tier = 2 AND bucket >= ?1 AND bucket <= ?2"
    " UNION ALL SELECT proc, stack, bytes, CASE WHEN " M_NOT_BEFORE " THEN bytes ELSE 0 END,"
    "  CASE WHEN " M_NOT_BEFORE " THEN events ELSE 0 END, " M_NOT_BEFORE ", 0, 0, 0, 0, 0"
    "  FROM commits WHERE tier = 0 AND bucket >= ?3 AND bucket <= ?4"
    " UNION ALL SELECT proc, stack, -bytes, 0, 0, 0, bytes, 1, 0, 0, 0 FROM releases"
    "  WHERE tier = 2 AND f >= ?1 AND f <= ?2"
    " UNION ALL SELECT proc, stack, -bytes, 0, 0, 0, bytes, 1, 0, 0, 0 FROM releases"
    "  WHERE tier = 0 AND f >= ?3 AND f <= ?4"
    " UNION ALL SELECT proc, stack, 0, 0, 0, 0, 0, 0, bytes, pieces, 1 FROM releases"
    "  WHERE tier = 1 AND f >= ?5 AND f <= ?6 AND a = f"
    " UNION ALL SELECT proc, stack, 0, 0, 0, 0, 0, 0, bytes, pieces, 1 FROM releases"
    "  WHERE tier = 1 AND f >= ?7 AND f <= ?8 AND a = f"
    " UNION ALL SELECT proc, stack, 0, 0, 0, 0, 0, 0, bytes, pieces, 1 FROM releases"
    "  WHERE tier = 0 AND f >= ?9 AND f <= ?10 AND a > -9223372036854775807 - 1"
    "  AND (a - ((a % 60000000000) + 60000000000) % 60000000000)"
    "    = (f - ((f % 60000000000) + 60000000000) % 60000000000)"
    ") x JOIN stacks s ON s.id = x.stack GROUP BY x.proc, s.tag";

/* ---- data span ------------------------------------------------------------ */

int cw_store_data_span(cw_store_t *s, int64_t *start_ns, int64_t *end_ns, cw_diag_t *d)
{
    cw__tier_t t[CW_TIERS];
    int err = cw__store_read_tiers(s, t, d);
    if (start_ns) *start_ns = err ? INT64_MIN : t[0].start;
    if (end_ns) *end_ns = err ? INT64_MIN : t[0].end;
    return err;
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

int cw_store_proc_get(cw_store_t *s, uint32_t id, cw_proc_info_t *out, cw_diag_t *d)
{
    bool found;
    int err = cw__store_proc_row(s, id, out, &found, d);
    if (!err && !found) err = cw_diag_set(d, CW_ENOENT, "no process instance %u", (unsigned)id);
    if (!err && !out->name && !(out->name = cw_strdup(""))) err = CW_ENOMEM;
    if (err) cw_proc_info_clear(out);
    return err;
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
    cw_free_strv(l->v, l->n);
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
        if ((err = cw__store_col_dup(st, 2, "", &r->name)) ||
            (err = cw__store_col_dup(st, 3, "", &r->tag)))
            break;
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

/* ---- /metrics from a cache of the closed hours ------------------------------
 *
 * The figures are sums over rows, so they split: the hour tier's rows
 * before split2 and the minute tier's (transients) before min(split1,
 * split2), BEFORE rows left out, are final (batches are written once, in
 * order, and rollups add buckets from a tier's end on) until retention or
 * the size cap fold them (the tiers' start and horizon change) or
 * re-tagging changes their tags (meta rules_hash). The handle keeps their
 * sums per (process, tag), keyed by those, and a scrape reads the rest
 * with SQL_M_SUMS: the BEFORE rows (rundown adds to them at any time), the
 * raw rows from split2 on and the transients after the cached part. So a
 * scrape reads at most about an hour of raw rows, and the cached part is
 * read again once an hour (when the hour tier advances). The merged sums
 * give the rows of the direct queries above (SQL_OUTSTANDING' HAVING and
 * its join with processes; a counter family lists a tag with rows of its
 * kind); the randomised test in tests/unit/test_store_query.c compares
 * both after every batch. Each handle is used by one thread at a time, so
 * is its cache. */
enum { MS_OB, MS_CB, MS_CE, MS_CN, MS_RB, MS_RN, MS_TB, MS_TP, MS_TN, MS_N };

typedef struct msum {
    uint32_t proc;
    char *tag; /* owned */
    int64_t v[MS_N];
} msum_t;

typedef struct msums {
    msum_t *v; /* by (proc, tag) */
    size_t n, cap;
} msums_t;

/* The cached sums and their key: immutable once published, refcounted
 * (the handles holding it, and the share's current one). */
typedef struct msnap {
    uint32_t refs;  /* under the share's lock when shared */
    int64_t x2, xm; /* hour rows before x2, minute rows before xm */
    int64_t start[CW_TIERS], horizon[CW_TIERS];
    char *hash; /* rules_hash (NULL: none) */
    msums_t sums;
} msnap_t;

/* A handle's: the snapshot it last used. */
struct cw__metrics_cache {
    msnap_t *snap;
    struct cw_store_share *share;
};

struct cw_store_share {
    cw_mutex_t *lock;
    msnap_t *cur; /* the newest published snapshot; NULL: none */
};

static void msums_clear(msums_t *m)
{
    for (size_t i = 0; i < m->n; i++)
        free(m->v[i].tag);
    free(m->v);
    memset(m, 0, sizeof *m);
}

/* Drops a reference (under the share's lock when shared). */
static void snap_release(struct cw_store_share *sh, msnap_t *x)
{
    if (!x) return;
    if (sh) cw_mutex_lock(sh->lock);
    bool last = --x->refs == 0;
    if (sh) cw_mutex_unlock(sh->lock);
    if (!last) return;
    msums_clear(&x->sums);
    free(x->hash);
    free(x);
}

static void metrics_cache_free(struct cw__metrics_cache *c)
{
    if (!c) return;
    snap_release(c->share, c->snap);
    free(c);
}

/* The handle's release slot CW__REL_METRICS (db.h). */
static void metrics_release(cw_store_t *s)
{
    metrics_cache_free(s->r.metrics_cache);
    s->r.metrics_cache = NULL;
}

int cw_store_share_create(cw_store_share_t **out)
{
    cw_store_share_t *sh = calloc(1, sizeof *sh);
    if (!sh || cw_mutex_create(&sh->lock)) {
        free(sh);
        *out = NULL;
        return CW_ENOMEM;
    }
    *out = sh;
    return 0;
}

void cw_store_share_free(cw_store_share_t *sh)
{
    if (!sh) return;
    snap_release(sh, sh->cur);
    cw_mutex_destroy(sh->lock);
    free(sh);
}

void cw_store_set_share(cw_store_t *s, cw_store_share_t *sh)
{
    if (s->r.share == sh) return;           /* keeps the cache taken from it */
    metrics_cache_free(s->r.metrics_cache); /* a cache of the old share's */
    s->r.metrics_cache = NULL;
    s->r.share = sh;
}

static bool same_hash(const char *a, const char *b)
{
    return a ? b && strcmp(a, b) == 0 : !b;
}

static int cmp_msum(const void *x, const void *y)
{
    const msum_t *a = x, *b = y;
    if (a->proc != b->proc) return a->proc < b->proc ? -1 : 1;
    return strcmp(a->tag, b->tag);
}

/* Inclusive bounds of SQL_M_SUMS' ranges; lo > hi: none. */
typedef struct mrange {
    int64_t lo, hi;
} mrange_t;

#define M_NONE ((mrange_t){1, 0})

/* The sums of SQL_M_SUMS over r[0..5) (hour, raw, minute, minute, raw
 * transients) into *out, sorted by (proc, tag). 0, CW_ENOMEM or CW_EDB. */
static int load_sums(cw_store_t *s, const mrange_t r[5], msums_t *out, cw_diag_t *d)
{
    sqlite3_stmt *st = NULL;
    int err = cw__store_stmt(s, CW__ST_M_SUMS, SQL_M_SUMS, &st, d), rc;
    if (err) return err;
    for (int i = 0; i < 5; i++) {
        sqlite3_bind_int64(st, 2 * i + 1, r[i].lo);
        sqlite3_bind_int64(st, 2 * i + 2, r[i].hi);
    }
    while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
        if ((err = CW_RESERVE(out->v, out->cap, out->n + 1))) break;
        msum_t *m = &out->v[out->n];
        memset(m, 0, sizeof *m);
        if ((err = cw__store_col_dup(st, 1, "", &m->tag))) break;
        out->n++;
        m->proc = (uint32_t)sqlite3_column_int64(st, 0);
        for (int k = 0; k < MS_N; k++)
            m->v[k] = sqlite3_column_int64(st, 2 + k);
    }
    if (!err && rc != SQLITE_DONE) err = cw__store_dberr(s, "reading the figures of /metrics", d);
    cw__store_stmt_done(st);
    if (!err && out->n > 1) qsort(out->v, out->n, sizeof *out->v, cmp_msum);
    return err;
}

/* One merged (proc, tag) row into m: its counters, and its outstanding
 * row when nonzero and the process is stored (SQL_OUTSTANDING's join). */
static int put_sum(cw_store_t *s, const msum_t *x, cw_store_metrics_t *m, size_t *tcap,
                   size_t *ocap, cw_diag_t *d)
{
    if (x->v[MS_CN] || x->v[MS_RN] || x->v[MS_TN]) {
        cw_tag_counters_t *c = counters_of(m, tcap, x->tag);
        if (!c) return CW_ENOMEM;
        if (x->v[MS_CN]) {
            c->has_commits = true;
            c->committed_bytes += x->v[MS_CB];
            c->commit_events += x->v[MS_CE];
        }
        if (x->v[MS_RN] || x->v[MS_TN]) {
            c->has_releases = true;
            c->decommitted_bytes += x->v[MS_RB];
            c->transient_bytes += x->v[MS_TB];
            c->transient_pieces += x->v[MS_TP];
        }
    }
    if (!x->v[MS_OB]) return 0;
    cw_proc_info_t p;
    bool found;
    int err = cw__store_proc_row(s, x->proc, &p, &found, d);
    if (!err && found && !(err = CW_RESERVE(m->out, *ocap, m->nout + 1))) {
        cw_outstanding_row_t *r = &m->out[m->nout];
        *r = (cw_outstanding_row_t){x->proc, p.pid, p.name, NULL, x->v[MS_OB]};
        p.name = NULL;
        m->nout++;
        if (!r->name && !(r->name = cw_strdup(""))) err = CW_ENOMEM;
        if (!err && !(r->tag = cw_strdup(x->tag))) err = CW_ENOMEM;
    }
    cw_proc_info_clear(&p);
    return err;
}

/* Whether x holds the sums of the closed hours for this state. */
static bool snap_fits(const msnap_t *x, const cw__tier_t *t, int64_t split2, int64_t xm,
                      const char *hash)
{
    if (!x || x->x2 != split2 || x->xm != xm || !same_hash(x->hash, hash)) return false;
    for (int k = 1; k < CW_TIERS; k++)
        if (x->start[k] != t[k].start || x->horizon[k] != t[k].horizon) return false;
    return true;
}

/* The cached sums, and the rest read now, merged into m. */
static int metrics_cached(cw_store_t *s, const cw__tier_t *t, int64_t split2, int64_t split1,
                          cw_store_metrics_t *m, cw_diag_t *d)
{
    struct cw__metrics_cache *c = s->r.metrics_cache;
    if (!c && !(c = s->r.metrics_cache = calloc(1, sizeof *c))) return CW_ENOMEM;
    cw__db_on_release(s, CW__REL_METRICS, metrics_release);
    c->share = s->r.share;
    int64_t xm = split1 < split2 ? split1 : split2;
    char *hash = NULL;
    int err = cw__store_rules_hash(s, &hash, d);
    if (err) return err;
    if (!snap_fits(c->snap, t, split2, xm, hash)) {
        /* Another handle's, when it fits; else read here and published. */
        msnap_t *x = NULL;
        if (s->r.share) {
            cw_mutex_lock(s->r.share->lock);
            if (snap_fits(s->r.share->cur, t, split2, xm, hash)) (x = s->r.share->cur)->refs++;
            cw_mutex_unlock(s->r.share->lock);
        }
        if (!x) {
            /* Hour rows in [MIN + 1, split2), minute rows in [MIN + 1, xm). */
            mrange_t r[5] = {M_NONE, M_NONE, M_NONE, M_NONE, M_NONE};
            if (split2 > INT64_MIN + 1) r[0] = (mrange_t){INT64_MIN + 1, split2 - 1};
            if (xm > INT64_MIN + 1) r[2] = (mrange_t){INT64_MIN + 1, xm - 1};
            if (!(x = calloc(1, sizeof *x))) err = CW_ENOMEM;
            if (!err) {
                x->refs = 1;
                x->hash = hash;
                hash = NULL;
                x->x2 = split2;
                x->xm = xm;
                for (int k = 0; k < CW_TIERS; k++) {
                    x->start[k] = t[k].start;
                    x->horizon[k] = t[k].horizon;
                }
                err = load_sums(s, r, &x->sums, d);
                s->test.metrics_reads++;
            }
            if (err) {
                snap_release(NULL, x);
                free(hash);
                return err;
            }
            if (s->r.share) {
                cw_mutex_lock(s->r.share->lock);
                msnap_t *old = s->r.share->cur;
                x->refs++;
                s->r.share->cur = x;
                cw_mutex_unlock(s->r.share->lock);
                snap_release(s->r.share, old);
            }
        }
        snap_release(s->r.share, c->snap);
        c->snap = x;
    }
    free(hash);
    /* The rest: BEFORE rows of the hour and minute tiers (when those tiers
     * are read at all), raw rows from split2 on, minutes in [xm, split1),
     * raw transients from split1 on. */
    mrange_t r[5] = {M_NONE, {split2, INT64_MAX}, M_NONE, M_NONE, {split1, INT64_MAX}};
    if (split2 > INT64_MIN) r[0] = (mrange_t){INT64_MIN, INT64_MIN};
    if (split1 > INT64_MIN) r[2] = (mrange_t){INT64_MIN, INT64_MIN};
    int64_t lo = xm > INT64_MIN + 1 ? xm : INT64_MIN + 1;
    if (split1 > lo) r[3] = (mrange_t){lo, split1 - 1};
    msums_t tail = {0};
    if ((err = load_sums(s, r, &tail, d))) {
        msums_clear(&tail);
        return err;
    }
    /* Merge the two sorted lists. */
    size_t i = 0, j = 0, tcap = 0, ocap = 0;
    const msums_t *a = &c->snap->sums;
    while (!err && (i < a->n || j < tail.n)) {
        int o = i == a->n ? 1 : j == tail.n ? -1 : cmp_msum(&a->v[i], &tail.v[j]);
        msum_t x = o <= 0 ? a->v[i] : tail.v[j];
        if (o == 0)
            for (int k = 0; k < MS_N; k++)
                x.v[k] += tail.v[j].v[k];
        i += o <= 0;
        j += o >= 0;
        err = put_sum(s, &x, m, &tcap, &ocap, d);
    }
    msums_clear(&tail);
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
        if (!s->test.read_cache_off) {
            err = metrics_cached(s, t, split2, split1, m, d);
            if (err) {
                metrics_cache_free(s->r.metrics_cache);
                s->r.metrics_cache = NULL;
            }
        } else {
            err = load_outstanding(s, split2, m, d);
            if (!err) err = load_counters(s, split2, split1, m, d);
        }
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

/* What the figures' rows own: their strings. */
static const size_t out_owned[] = {offsetof(cw_outstanding_row_t, name),
                                   offsetof(cw_outstanding_row_t, tag)};
static const size_t tag_owned[] = {offsetof(cw_tag_counters_t, tag)};

void cw_store_metrics_free(cw_store_metrics_t *m)
{
    if (!m) return;
    cw_free_rows(m->out, m->nout, sizeof *m->out, out_owned, CW_ARRAY_LEN(out_owned));
    cw_free_rows(m->tags, m->ntags, sizeof *m->tags, tag_owned, CW_ARRAY_LEN(tag_owned));
    free(m);
}
