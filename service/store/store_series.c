/* store_series.c - time series of a process or of the whole machine
 * (cw_store_series): outstanding by tag, committed, decommitted, transient
 * and peak per step.
 *
 * Reads the storage model's tables (docs/DESIGN.md, "Storage model") from
 * one coarse tier: the coarsest whose bucket width divides the step and
 * the aligned start and whose rollups reach into the window (a live minute
 * or hour not yet rolled up is read from the raw tier). Per step i, the
 * window being aligned down to the step:
 *   outstanding[tag][i]  state at the end of the step, from the state at
 *                        `from` (commits before it minus releases before
 *                        it) plus the step's commits minus its releases;
 *                        rundown (BEFORE) counts from its instance's start
 *                        on, never earlier: a restart's rundown finds the
 *                        memory the previous run's instances held until
 *                        tracking ended, and must not count it twice;
 *   committed / decommitted  bytes committed and released in the step;
 *   transient            releases in the step of commits of the same step
 *                        (AIFI of the step, pieces and bytes);
 *   peak                 process: the highest outstanding at any instant
 *                        of the step, exact (activity.relpeak); machine: an
 *                        upper bound (the per-process peaks of a bucket
 *                        added, as they may fall at different instants).
 * Every query has one text for the machine and one for a process (an
 * "?n = 0 OR proc = ?n" form would keep SQLite from using the proc
 * column), each a slot of the statement cache. */
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "commitwatch/common.h"
#include "commitwatch/query.h"
#include "store/store_internal.h"

/* ---- SQL ---------------------------------------------------------------- */

#define PROC(t, n) " AND " t "proc = ?" #n

/* Outstanding by tag at ?2 (exclusive) [for proc ?3]: the hour tier's rows
 * before ?1 (an hour boundary the hour tier is complete to, see
 * cw__store_split) plus the raw tier's rows from ?1 to ?2. Scanning a day
 * of raw rows for the state at the start of a window is what this avoids.
 * Columns: tag, bytes (negative for releases). */
#define LATER_RUNDOWN                                                                              \
    " AND NOT (bucket = -9223372036854775807 - 1"                                                  \
    " AND proc IN (SELECT id FROM processes WHERE start_ns >= ?2))"
#define SQL_START_COMMITS(F)                                                                       \
    "SELECT s.tag, SUM(x.b) FROM ("                                                                \
    " SELECT stack AS st, bytes AS b FROM commits WHERE tier = 2 AND bucket < ?1" F LATER_RUNDOWN  \
    " UNION ALL SELECT stack, bytes FROM commits"                                                  \
    " WHERE tier = 0 AND bucket >= ?1 AND bucket < ?2" F LATER_RUNDOWN                             \
    ") x JOIN stacks s ON s.id = x.st GROUP BY s.tag"
#define SQL_START_RELEASES(F)                                                                      \
    "SELECT s.tag, -SUM(x.b) FROM ("                                                               \
    " SELECT stack AS st, bytes AS b FROM releases WHERE tier = 2 AND f < ?1" F                    \
    " UNION ALL SELECT stack, bytes FROM releases WHERE tier = 0 AND f >= ?1 AND f < ?2" F         \
    ") x JOIN stacks s ON s.id = x.st GROUP BY s.tag"

/* The steps' rows of tier ?1 in [?4, ?5), steps of ?3 from ?2 [proc ?6].
 * Both have the columns: step, tag, bytes, n1, n2 (see `sinks`). */
#define SQL_STEP_COMMITS(F)                                                                        \
    "SELECT (c.bucket - ?2) / ?3, s.tag, SUM(c.bytes), SUM(c.events), 0"                           \
    " FROM commits c JOIN stacks s ON s.id = c.stack"                                              \
    " WHERE c.tier = ?1 AND c.bucket >= ?4 AND c.bucket < ?5" F " GROUP BY 1, 2"
/* SAME_STEP "col ELSE 0 END)": the sum of column col of the releases of
 * commits made in the same step. */
#define SAME_STEP " SUM(CASE WHEN r.a < ?2 THEN 0 WHEN (r.a - ?2) / ?3 = (r.f - ?2) / ?3 THEN r."
#define SQL_STEP_RELEASES(F)                                                                       \
    "SELECT (r.f - ?2) / ?3, s.tag, SUM(r.bytes)," SAME_STEP "bytes ELSE 0 END)," SAME_STEP        \
    "pieces ELSE 0 END)"                                                                           \
    " FROM releases r JOIN stacks s ON s.id = r.stack"                                             \
    " WHERE r.tier = ?1 AND r.f >= ?4 AND r.f < ?5" F " GROUP BY 1, 2"

/* Rundown (BEFORE) commits of tier ?1 of the instances that start in
 * [?2, ?3) [proc ?4]: they count from that start on (the start state
 * leaves them out, LATER_RUNDOWN). Columns: start, tag, bytes. */
#define SQL_RUNDOWN(F)                                                                             \
    "SELECT p.start_ns, s.tag, SUM(c.bytes) FROM commits c JOIN processes p ON p.id = c.proc"      \
    " JOIN stacks s ON s.id = c.stack WHERE c.tier = ?1 AND c.bucket = -9223372036854775807 - 1"   \
    " AND p.start_ns >= ?2 AND p.start_ns < ?3" F " GROUP BY 1, 2 ORDER BY 1"

/* Activity of tier ?1 in [?2, ?3) [proc ?4], by bucket: net change, and
 * the peaks relative to the bucket start added. */
#define SQL_ACTIVITY(F)                                                                            \
    "SELECT bucket, SUM(delta), SUM(relpeak) FROM activity a"                                      \
    " WHERE a.tier = ?1 AND a.bucket >= ?2 AND a.bucket < ?3" F " GROUP BY bucket ORDER BY bucket"

/* The series cache's rows (below) of tier ?1 in [?2, ?3) [proc ?4], in
 * bucket order: commits by (bucket, tag), releases by (f, a, tag). */
#define SQL_CACHE_COMMITS(F)                                                                       \
    "SELECT c.bucket, s.tag, SUM(c.bytes), SUM(c.events) FROM commits c"                           \
    " JOIN stacks s ON s.id = c.stack WHERE c.tier = ?1 AND c.bucket >= ?2 AND c.bucket < ?3" F    \
    " GROUP BY 1, 2 ORDER BY 1"
#define SQL_CACHE_RELEASES(F)                                                                      \
    "SELECT r.f, r.a, s.tag, SUM(r.bytes), SUM(r.pieces) FROM releases r"                          \
    " JOIN stacks s ON s.id = r.stack WHERE r.tier = ?1 AND r.f >= ?2 AND r.f < ?3" F              \
    " GROUP BY 1, 2, 3 ORDER BY 1"

enum query {
    Q_START_COMMITS,
    Q_START_RELEASES,
    Q_STEP_COMMITS,
    Q_STEP_RELEASES,
    Q_RUNDOWN,
    Q_ACTIVITY,
    Q_CACHE_COMMITS,
    Q_CACHE_RELEASES,
    Q__N
};

static const struct {
    int slot[2]; /* machine, process */
    const char *sql[2];
} queries[Q__N] = {
    /* rows alike by design: one per query, machine and process */
    [Q_START_COMMITS] = {{CW__ST_SER_START_COMMITS, CW__ST_SER_START_COMMITS_PROC},
                         {SQL_START_COMMITS(""), SQL_START_COMMITS(PROC("", 3))}},
    [Q_START_RELEASES] = {{CW__ST_SER_START_RELEASES, CW__ST_SER_START_RELEASES_PROC},
                          {SQL_START_RELEASES(""), SQL_START_RELEASES(PROC("", 3))}},
    [Q_STEP_COMMITS] = {{CW__ST_SER_STEP_COMMITS, CW__ST_SER_STEP_COMMITS_PROC},
                        {SQL_STEP_COMMITS(""), SQL_STEP_COMMITS(PROC("c.", 6))}},
    [Q_STEP_RELEASES] = {{CW__ST_SER_STEP_RELEASES, CW__ST_SER_STEP_RELEASES_PROC},
                         {SQL_STEP_RELEASES(""), SQL_STEP_RELEASES(PROC("r.", 6))}},
    [Q_RUNDOWN] = {{CW__ST_SER_RUNDOWN, CW__ST_SER_RUNDOWN_PROC},
                   {SQL_RUNDOWN(""), SQL_RUNDOWN(PROC("c.", 4))}},
    [Q_ACTIVITY] = {{CW__ST_SER_ACTIVITY, CW__ST_SER_ACTIVITY_PROC},
                    {SQL_ACTIVITY(""), SQL_ACTIVITY(PROC("a.", 4))}},
    [Q_CACHE_COMMITS] = {{CW__ST_SER_CACHE_COMMITS, CW__ST_SER_CACHE_COMMITS_PROC},
                         {SQL_CACHE_COMMITS(""), SQL_CACHE_COMMITS(PROC("c.", 4))}},
    [Q_CACHE_RELEASES] = {{CW__ST_SER_CACHE_RELEASES, CW__ST_SER_CACHE_RELEASES_PROC},
                          {SQL_CACHE_RELEASES(""), SQL_CACHE_RELEASES(PROC("r.", 4))}},
};

/* ---- the handle's cache of closed buckets ------------------------------------
 *
 * A series reads most of its window from a coarse tier (minute or hour),
 * whose buckets before the tier's end never change: rollups and new
 * batches add buckets from the end on, and only retention or the size
 * cap rewrite old ones (folding them into BEFORE, which a series' steps
 * do not read, and moving the horizon). So the handle keeps, per (tier,
 * process or machine), that tier's rows summed per bucket and tag (the
 * processes and stacks added up): commits (bucket, tag, bytes, events),
 * releases (f, a, tag, bytes, pieces: `a` kept, as the transient figures
 * compare it with the steps) and activity (bucket, delta, relpeak), for
 * every bucket before `hi`. A later series reads only the buckets from
 * `hi` to the tier's new end, and computes its steps from the rows in
 * memory, for any step and origin: the same sums, in the same order, as
 * the SQL of the steps. The entry is dropped when the stack tags are
 * rewritten (meta rules_hash, which re-tagging sets in the same
 * transaction), and when the tier's start or horizon change: a fold leaves
 * the rows from the horizon on as they were (a series reads a tier only
 * from its horizon on), but the cached rows before it are of no use. SERIES_CACHE_ENTRIES
 * entries (the machine's and a process's, least recently used replaced),
 * each at most SERIES_CACHE_MAX_ROWS rows (a larger one is read from SQL
 * every time): at most about 2.6 MB per read handle. A handle is used by
 * one thread at a time, so is its cache. */
#define SERIES_CACHE_ENTRIES 2
#define SERIES_CACHE_MAX_ROWS 32768

typedef struct c_commit {
    int64_t bucket, bytes, events;
    uint32_t tag;
} c_commit_t;

typedef struct c_release {
    int64_t f, a, bytes, pieces;
    uint32_t tag;
} c_release_t;

typedef struct c_activity {
    int64_t bucket, delta, relpeak;
} c_activity_t;

typedef struct centry {
    bool valid, oversize; /* oversize: the key's rows do not fit, read SQL */
    int tier;
    uint32_t proc; /* 0: the machine */
    int64_t start, horizon, hi;
    char *hash; /* rules_hash when filled (NULL: none) */
    uint64_t used;
    c_commit_t *c;
    c_release_t *r;
    c_activity_t *a;
    size_t nc, nr, na, capc, capr, capa;
    char **tags;
    uint32_t ntags;
    size_t tagcap;
} centry_t;

struct cw__series_cache {
    centry_t e[SERIES_CACHE_ENTRIES];
    uint64_t clock;
};

/* Drops e's rows and tags (keeping its key and its arrays' memory). */
static void centry_drop_rows(centry_t *e)
{
    e->nc = e->nr = e->na = 0;
    for (uint32_t i = 0; i < e->ntags; i++)
        free(e->tags[i]);
    e->ntags = 0;
}

static void centry_clear(centry_t *e)
{
    centry_drop_rows(e);
    e->valid = e->oversize = false;
    free(e->hash);
    e->hash = NULL;
}

static void series_cache_free(struct cw__series_cache *c)
{
    if (!c) return;
    for (int k = 0; k < SERIES_CACHE_ENTRIES; k++) {
        centry_clear(&c->e[k]);
        free(c->e[k].c);
        free(c->e[k].r);
        free(c->e[k].a);
        free(c->e[k].tags);
    }
    free(c);
}

/* The handle's release slot CW__REL_SERIES (db.h). */
static void series_release(cw_store_t *s)
{
    series_cache_free(s->r.series_cache);
    s->r.series_cache = NULL;
}

size_t cw__store_series_cache_rows(const cw_store_t *s)
{
    size_t n = 0;
    for (int k = 0; s->r.series_cache && k < SERIES_CACHE_ENTRIES; k++) {
        const centry_t *e = &s->r.series_cache->e[k];
        if (e->valid) n += e->nc + e->nr + e->na;
    }
    return n;
}

/* ---- the series under construction -------------------------------------------- */

/* Rundown that starts counting inside the window (SQL_RUNDOWN). */
typedef struct rundown {
    int64_t start, bytes;
} rundown_t;

typedef struct build {
    cw_store_t *s;
    const cw_series_query_t *q;
    cw_series_t *r;
    size_t tagcap;
    cw_diag_t *d;
    rundown_t *rd;             /* by start */
    size_t nrd, rdcap, rdnext; /* rdnext: the next one the peaks apply */
    const centry_t *ce;        /* the cached rows of the coarse part, or NULL */
    int32_t *tagmap;           /* ce's tag -> the series' tag, -1 not yet */
} build_t;

/* The cached statement of query k for this series. */
static int stmt(build_t *b, enum query k, sqlite3_stmt **out)
{
    int p = b->q->proc != 0;
    return cw__store_stmt(b->s, queries[k].slot[p], queries[k].sql[p], out, b->d);
}

/* Index of the tag, added when new; -1 on ENOMEM. */
static int tag_named(build_t *b, const char *tag)
{
    cw_series_t *r = b->r;
    for (uint32_t i = 0; i < r->ntags; i++)
        if (strcmp(r->tags[i].name, tag) == 0) return (int)i;
    if (CW_RESERVE(r->tags, b->tagcap, r->ntags + 1)) return -1;
    cw_series_tag_t *t = &r->tags[r->ntags];
    t->name = cw_strdup(tag);
    t->start = 0;
    t->outstanding = calloc(r->npoints, sizeof *t->outstanding);
    if (!t->name || !t->outstanding) {
        free(t->name);
        free(t->outstanding);
        return -1;
    }
    return (int)r->ntags++;
}

/* Index of the tag in column col, added when new; -1 on ENOMEM. */
static int tag_index(build_t *b, sqlite3_stmt *st, int col)
{
    const unsigned char *txt = sqlite3_column_text(st, col);
    return tag_named(b, txt ? (const char *)txt : "");
}

/* Index of the cached entry's tag k in the series; -1 on ENOMEM. */
static int tag_cached(build_t *b, uint32_t k)
{
    if (b->tagmap[k] < 0) b->tagmap[k] = tag_named(b, b->ce->tags[k]);
    return b->tagmap[k];
}

/* ---- filling the cache ---------------------------------------------------------- */

/* e's index of the tag txt, added when new; -1 on ENOMEM. */
static int64_t centry_tag(centry_t *e, const unsigned char *txt)
{
    const char *tag = txt ? (const char *)txt : "";
    for (uint32_t i = 0; i < e->ntags; i++)
        if (strcmp(e->tags[i], tag) == 0) return i;
    if (CW_RESERVE(e->tags, e->tagcap, e->ntags + 1u)) return -1;
    if (!(e->tags[e->ntags] = cw_strdup(tag))) return -1;
    return e->ntags++;
}

static bool same_text(const char *a, const char *b)
{
    return a ? b && strcmp(a, b) == 0 : !b;
}

enum { OVERSIZE = -1 };

/* Appends the rows of [lo, hi) of e's tier to e (in bucket order, after
 * its rows). 0, OVERSIZE (more than SERIES_CACHE_MAX_ROWS), CW_ENOMEM or
 * CW_EDB. */
static int centry_extend(build_t *b, centry_t *e, int64_t lo, int64_t hi)
{
    static const enum query ks[] = {Q_CACHE_COMMITS, Q_CACHE_RELEASES, Q_ACTIVITY};
    int err = 0;
    for (size_t k = 0; k < CW_ARRAY_LEN(ks) && !err; k++) {
        sqlite3_stmt *st = NULL;
        int rc = SQLITE_DONE;
        if ((err = stmt(b, ks[k], &st))) break;
        sqlite3_bind_int(st, 1, e->tier);
        sqlite3_bind_int64(st, 2, lo);
        sqlite3_bind_int64(st, 3, hi);
        if (e->proc) sqlite3_bind_int64(st, 4, e->proc);
        while (!err && (rc = sqlite3_step(st)) == SQLITE_ROW) {
            uint32_t max =
                b->s->test.read_cache_rows ? b->s->test.read_cache_rows : SERIES_CACHE_MAX_ROWS;
            if (e->nc + e->nr + e->na >= max) {
                err = OVERSIZE;
                break;
            }
            if (ks[k] == Q_ACTIVITY) {
                if (CW_RESERVE(e->a, e->capa, e->na + 1)) {
                    err = CW_ENOMEM;
                    break;
                }
                e->a[e->na++] =
                    (c_activity_t){sqlite3_column_int64(st, 0), sqlite3_column_int64(st, 1),
                                   sqlite3_column_int64(st, 2)};
                continue;
            }
            bool rel = ks[k] == Q_CACHE_RELEASES;
            int64_t tag = centry_tag(e, sqlite3_column_text(st, rel ? 2 : 1));
            if (tag < 0 || (rel ? CW_RESERVE(e->r, e->capr, e->nr + 1)
                                : CW_RESERVE(e->c, e->capc, e->nc + 1))) {
                err = CW_ENOMEM;
            } else if (rel) {
                e->r[e->nr++] = (c_release_t){
                    sqlite3_column_int64(st, 0), sqlite3_column_int64(st, 1),
                    sqlite3_column_int64(st, 3), sqlite3_column_int64(st, 4), (uint32_t)tag};
            } else {
                e->c[e->nc++] =
                    (c_commit_t){sqlite3_column_int64(st, 0), sqlite3_column_int64(st, 2),
                                 sqlite3_column_int64(st, 3), (uint32_t)tag};
            }
        }
        if (!err && rc != SQLITE_DONE) err = cw__store_dberr(b->s, "reading a series' rows", b->d);
        cw__store_stmt_done(st);
    }
    return err;
}

/* The cache entry with every row of tier k before its end, for the
 * series' process or the machine, into *out; NULL when not cached (the
 * raw tier, the cache off, too many rows). 0, CW_ENOMEM or CW_EDB. */
static int cached_rows(build_t *b, const cw__tier_t *t, int k, const centry_t **out)
{
    cw_store_t *s = b->s;
    int64_t hi = t[k].end;
    *out = NULL;
    if (s->test.read_cache_off || k == 0 || hi == INT64_MIN) return 0;
    struct cw__series_cache *c = s->r.series_cache;
    if (!c && !(c = s->r.series_cache = calloc(1, sizeof *c))) return CW_ENOMEM;
    cw__db_on_release(s, CW__REL_SERIES, series_release);
    char *hash = NULL;
    int err = cw__store_rules_hash(s, &hash, b->d);
    if (err) return err;
    uint32_t proc = b->q->proc;
    centry_t *e = NULL, *lru = &c->e[0];
    for (int i = 0; i < SERIES_CACHE_ENTRIES; i++) {
        centry_t *x = &c->e[i];
        bool live = x->valid || x->oversize;
        if (live && x->tier == k && x->proc == proc) e = x;
        if (!live || x->used < lru->used) lru = x;
    }
    if (e && (e->start != t[k].start || e->horizon != t[k].horizon || !same_text(e->hash, hash)))
        centry_clear(e); /* folded, or re-tagged: start again */
    if (!e || (!e->valid && !e->oversize)) {
        e = e ? e : lru;
        centry_clear(e);
        e->valid = true;
        e->tier = k;
        e->proc = proc;
        e->start = t[k].start;
        e->horizon = t[k].horizon;
        e->hi = INT64_MIN + 1; /* BEFORE rows are no step's */
        e->hash = hash;
        hash = NULL;
    }
    free(hash);
    e->used = ++c->clock;
    if (e->oversize) return 0;
    if (e->hi < hi) {
        err = centry_extend(b, e, e->hi, hi);
        if (err) {
            centry_drop_rows(e); /* its key stays, marked too large, or dropped */
            e->valid = false;
            e->oversize = err == OVERSIZE;
            return err == OVERSIZE ? 0 : err;
        }
        e->hi = hi;
    }
    if (e->ntags && !(b->tagmap = malloc(e->ntags * sizeof *b->tagmap))) return CW_ENOMEM;
    for (uint32_t i = 0; i < e->ntags; i++)
        b->tagmap[i] = -1;
    *out = e;
    return 0;
}

/* Steps st to its end; 0, CW_ENOMEM or CW_EDB. The statement is done. */
static int finish_rows(build_t *b, sqlite3_stmt *st, int rc, int err, const char *what)
{
    if (!err && rc != SQLITE_DONE) err = cw__store_dberr(b->s, what, b->d);
    cw__store_stmt_done(st);
    return err;
}

/* Outstanding at from, by tag: commits before it, then releases. */
static int load_start(build_t *b, int64_t split)
{
    static const enum query ks[] = {Q_START_COMMITS, Q_START_RELEASES};
    int err = 0;
    for (size_t k = 0; k < CW_ARRAY_LEN(ks) && !err; k++) {
        sqlite3_stmt *st = NULL;
        int rc = SQLITE_DONE;
        if ((err = stmt(b, ks[k], &st))) break;
        sqlite3_bind_int64(st, 1, split);
        sqlite3_bind_int64(st, 2, b->r->from_ns);
        if (b->q->proc) sqlite3_bind_int64(st, 3, b->q->proc);
        while (!err && (rc = sqlite3_step(st)) == SQLITE_ROW) {
            int t = tag_index(b, st, 0);
            if (t < 0)
                err = CW_ENOMEM;
            else
                b->r->tags[t].start += sqlite3_column_int64(st, 1);
        }
        err = finish_rows(b, st, rc, err, "reading a series' start");
    }
    return err;
}

/* Rundown of the instances that start in the window, from tier (the one
 * whose BEFORE rows the start state read): added to the outstanding of
 * the step of their start, and kept in b->rd for the peaks. */
static int load_rundown(build_t *b, int tier)
{
    cw_series_t *r = b->r;
    sqlite3_stmt *st = NULL;
    int rc = SQLITE_DONE, err = stmt(b, Q_RUNDOWN, &st);
    if (err) return err;
    sqlite3_bind_int(st, 1, tier);
    sqlite3_bind_int64(st, 2, r->from_ns);
    sqlite3_bind_int64(st, 3, r->to_ns);
    if (b->q->proc) sqlite3_bind_int64(st, 4, b->q->proc);
    while (!err && (rc = sqlite3_step(st)) == SQLITE_ROW) {
        int64_t start = sqlite3_column_int64(st, 0), bytes = sqlite3_column_int64(st, 2);
        int64_t i = (start - r->from_ns) / r->step_ns;
        int t = tag_index(b, st, 1);
        if (t < 0 || CW_RESERVE(b->rd, b->rdcap, b->nrd + 1)) {
            err = CW_ENOMEM;
        } else if (i >= 0 && i < r->npoints) {
            r->tags[t].outstanding[i] += bytes;
            b->rd[b->nrd++] = (rundown_t){start, bytes};
        }
    }
    return finish_rows(b, st, rc, err, "reading a series' rundown");
}

/* One part of the window: [lo, hi) read from tier. */
typedef struct part {
    int tier;
    int64_t lo, hi;
} part_t;

/* Where a step row goes: outstanding changes by sign * bytes; bytes, n1
 * and n2 (columns 2, 3, 4) add to their figures (n2 NULL: none). */
typedef struct sink {
    enum query k;
    int sign;
    int64_t *bytes, *n1, *n2;
} sink_t;

/* Adds one step row to the figures of sink sk (a row of SQL_STEP_*). */
static void add_step(build_t *b, const sink_t *sk, int64_t i, int t, int64_t bytes, int64_t n1,
                     int64_t n2)
{
    cw_series_t *r = b->r;
    if (i < 0 || i >= r->npoints) return;
    r->tags[t].outstanding[i] += sk->sign * bytes;
    sk->bytes[i] += bytes;
    sk->n1[i] += n1;
    if (sk->n2) sk->n2[i] += n2;
}

/* The same sums as SQL_STEP_COMMITS / SQL_STEP_RELEASES, from the cached
 * rows of [pt->lo, pt->hi). */
static int cached_steps(build_t *b, const part_t *pt, const sink_t *sk)
{
    const centry_t *e = b->ce;
    int64_t from = b->r->from_ns, step = b->r->step_ns;
    if (sk->k == Q_STEP_COMMITS) {
        for (size_t j = 0; j < e->nc; j++) {
            const c_commit_t *c = &e->c[j];
            if (c->bucket < pt->lo || c->bucket >= pt->hi) continue;
            int t = tag_cached(b, c->tag);
            if (t < 0) return CW_ENOMEM;
            add_step(b, sk, (c->bucket - from) / step, t, c->bytes, c->events, 0);
        }
        return 0;
    }
    for (size_t j = 0; j < e->nr; j++) {
        const c_release_t *x = &e->r[j];
        if (x->f < pt->lo || x->f >= pt->hi) continue;
        int t = tag_cached(b, x->tag);
        if (t < 0) return CW_ENOMEM;
        int64_t i = (x->f - from) / step;
        bool same = x->a >= from && (x->a - from) / step == i; /* SAME_STEP */
        add_step(b, sk, i, t, x->bytes, same ? x->bytes : 0, same ? x->pieces : 0);
    }
    return 0;
}

/* Adds one part's commits or releases to the steps. */
static int load_steps(build_t *b, const part_t *pt, const sink_t *sk, bool cached)
{
    cw_series_t *r = b->r;
    sqlite3_stmt *st = NULL;
    if (cached) return cached_steps(b, pt, sk);
    int rc = SQLITE_DONE, err = stmt(b, sk->k, &st);
    if (err) return err;
    sqlite3_bind_int(st, 1, pt->tier);
    sqlite3_bind_int64(st, 2, r->from_ns);
    sqlite3_bind_int64(st, 3, r->step_ns);
    sqlite3_bind_int64(st, 4, pt->lo);
    sqlite3_bind_int64(st, 5, pt->hi);
    if (b->q->proc) sqlite3_bind_int64(st, 6, b->q->proc);
    while (!err && (rc = sqlite3_step(st)) == SQLITE_ROW) {
        int t = tag_index(b, st, 1);
        if (t < 0)
            err = CW_ENOMEM;
        else
            add_step(b, sk, sqlite3_column_int64(st, 0), t, sqlite3_column_int64(st, 2),
                     sqlite3_column_int64(st, 3), sqlite3_column_int64(st, 4));
    }
    return finish_rows(b, st, rc, err, "reading a series' steps");
}

/* Peaks: the state at each step start, raised by the buckets' peaks, the
 * parts read in time order; *cur is the state, *i the step, carried from
 * one part to the next. One activity row (bucket, net change, relative
 * peak) at a time; false after the last step. */
static bool peak_row(build_t *b, int64_t bucket, int64_t delta, int64_t relpeak, int64_t width,
                     int64_t *cur, uint32_t *i)
{
    cw_series_t *r = b->r;
    uint32_t j = (uint32_t)((bucket - r->from_ns) / r->step_ns);
    if (j >= r->npoints) return false;
    while (*i < j)
        r->peak[++*i] = *cur;
    /* Rundown of an instance that starts in this bucket: there from
     * its start, under the bucket's relative peak (its start is an
     * event of the bucket). */
    while (b->rdnext < b->nrd && b->rd[b->rdnext].start < bucket + width)
        *cur += b->rd[b->rdnext++].bytes;
    if (*cur > r->peak[*i]) r->peak[*i] = *cur;
    int64_t p = *cur + relpeak;
    if (p > r->peak[*i]) r->peak[*i] = p;
    *cur += delta;
    return true;
}

static int load_peaks(build_t *b, const part_t *pt, int64_t width, int64_t *cur, uint32_t *i,
                      bool cached)
{
    if (cached) {
        for (size_t j = 0; j < b->ce->na; j++) {
            const c_activity_t *a = &b->ce->a[j];
            if (a->bucket < pt->lo) continue;
            if (a->bucket >= pt->hi || !peak_row(b, a->bucket, a->delta, a->relpeak, width, cur, i))
                break;
        }
        return 0;
    }
    sqlite3_stmt *st = NULL;
    int rc = SQLITE_DONE, err = stmt(b, Q_ACTIVITY, &st);
    if (err) return err;
    sqlite3_bind_int(st, 1, pt->tier);
    sqlite3_bind_int64(st, 2, pt->lo);
    sqlite3_bind_int64(st, 3, pt->hi);
    if (b->q->proc) sqlite3_bind_int64(st, 4, b->q->proc);
    while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
        if (!peak_row(b, sqlite3_column_int64(st, 0), sqlite3_column_int64(st, 1),
                      sqlite3_column_int64(st, 2), width, cur, i)) {
            rc = SQLITE_DONE;
            break;
        }
    }
    return finish_rows(b, st, rc, err, "reading a series' activity");
}

/* Chooses the coarse tier (see the file comment): the coarsest whose
 * width divides the step and the origin, whose horizon is at or before
 * from (exact figures) and which holds some of the window; *mid is where
 * it stops holding it (the raw tier reads the rest). Tier 0 otherwise. */
static int pick_tier(const cw__tier_t *t, int64_t step, int64_t from, int64_t to, int64_t *mid)
{
    *mid = to;
    for (int k = CW_TIERS - 1; k > 0; k--) {
        if (step % t[k].width || cw_floor_to(from, t[k].width) != from) continue;
        if (t[k].end == INT64_MIN || t[k].horizon > from || t[k].end <= from) continue;
        *mid = t[k].end < to ? t[k].end : to;
        return k;
    }
    return 0;
}

/* Runs the queries into b->r, whose window is set. */
static int fill(build_t *b, const cw__tier_t *t)
{
    cw_series_t *r = b->r;
    int64_t mid;
    int err;
    r->tier = pick_tier(t, r->step_ns, r->from_ns, r->to_ns, &mid);
    /* The steps: [from, mid) from the coarse tier, [mid, to) raw; nothing
     * after the end of the data when it was clipped (the last step holds
     * the state there). */
    int64_t hi = r->to_ns < t[0].end ? r->to_ns : t[0].end;
    if (hi < r->from_ns) hi = r->from_ns;
    if (mid > hi) mid = hi;
    const part_t parts[2] = {{r->tier, r->from_ns, mid}, {0, mid, hi}};
    const sink_t sinks[2] = {
        {Q_STEP_COMMITS, 1, r->committed, r->commit_count, NULL},
        {Q_STEP_RELEASES, -1, r->decommitted, r->transient, r->transient_count},
    };
    int64_t split = cw__store_split(t, 2, r->from_ns);
    /* The coarse part from the handle's cache when it holds it. */
    if (r->tier > 0 && parts[0].lo < parts[0].hi && (err = cached_rows(b, t, r->tier, &b->ce)))
        return err;
    if ((err = load_start(b, split))) return err;
    if ((err = load_rundown(b, split != INT64_MIN ? 2 : 0))) return err;
    for (int k = 0; k < 2 && !err; k++)
        for (int j = 0; j < 2 && !err && parts[k].lo < parts[k].hi; j++)
            err = load_steps(b, &parts[k], &sinks[j], k == 0 && b->ce);
    if (err) return err;
    /* Net changes -> states at step ends. */
    for (uint32_t k = 0; k < r->ntags; k++) {
        int64_t cur = r->tags[k].start;
        r->outstanding_start += cur;
        for (uint32_t i = 0; i < r->npoints; i++) {
            cur += r->tags[k].outstanding[i];
            r->tags[k].outstanding[i] = cur;
            r->outstanding_total[i] += cur;
        }
    }
    int64_t cur = r->outstanding_start;
    uint32_t i = 0;
    if (r->npoints) r->peak[0] = cur;
    for (int k = 0; k < 2 && !err; k++)
        if (parts[k].lo < parts[k].hi)
            err = load_peaks(b, &parts[k], t[parts[k].tier].width, &cur, &i, k == 0 && b->ce);
    if (err) return err;
    while (i + 1 < r->npoints)
        r->peak[++i] = cur;
    /* The step's end state may be above the last bucket's peak when the
     * activity rows are coarser; never report a peak below it. */
    for (uint32_t j = 0; j < r->npoints; j++)
        if (r->outstanding_total[j] > r->peak[j]) r->peak[j] = r->outstanding_total[j];
    return 0;
}

uint64_t cw_series_steps(const cw_series_query_t *q, int64_t *aligned_from)
{
    if (q->step_ns <= 0 || q->from_ns >= q->to_ns) return 0;
    int64_t from = cw_floor_to(q->from_ns, q->step_ns);
    if (aligned_from) *aligned_from = from;
    return ((uint64_t)q->to_ns - (uint64_t)from + (uint64_t)q->step_ns - 1) / (uint64_t)q->step_ns;
}

/* The result with its window and zeroed per-step arrays (one block, owned
 * through r->t); NULL on ENOMEM. */
static cw_series_t *series_new(const cw_series_query_t *q, int64_t from, uint32_t n)
{
    enum { NARRAYS = 8 };
    cw_series_t *r = calloc(1, sizeof *r);
    int64_t *v = calloc((size_t)n * NARRAYS + 1, sizeof *v);
    if (!r || !v) {
        free(r);
        free(v);
        return NULL;
    }
    r->from_ns = from;
    r->step_ns = q->step_ns;
    r->to_ns = from + (int64_t)n * q->step_ns;
    r->npoints = n;
    r->peak_exact = q->proc != 0;
    int64_t **arrays[NARRAYS] = {
        &r->t,           &r->outstanding_total, &r->committed,       &r->commit_count,
        &r->decommitted, &r->transient,         &r->transient_count, &r->peak};
    for (int k = 0; k < NARRAYS; k++)
        *arrays[k] = v + (size_t)k * n;
    for (uint32_t i = 0; i < n; i++)
        r->t[i] = from + (int64_t)i * q->step_ns;
    return r;
}

int cw_store_series(cw_store_t *s, const cw_series_query_t *q, cw_series_t **out, cw_diag_t *d)
{
    cw__tier_t t[CW_TIERS];
    int64_t from = 0, data_end = INT64_MIN;
    uint64_t n = cw_series_steps(q, &from);
    bool began = false, ended = false;
    cw_series_query_t cq = *q;
    build_t b = {s, &cq, NULL, 0, d, NULL, 0, 0, 0, NULL, NULL};
    int err;
    *out = NULL;
    if (n == 0 || n > UINT32_MAX)
        return cw_diag_set(d, CW_EINVAL,
                           "series: a window [from, to) and a positive step of at "
                           "most 2^32 steps are needed");
    if ((err = cw__store_read_begin(s, &began, d))) return err;
    if (!(err = cw__store_read_tiers(s, t, d)))
        err = cw__store_data_end(s, t, &data_end, &ended, d);
    if (!err && q->step_ns % t[0].width)
        err = cw_diag_set(d, CW_EINVAL, "series: the step must be a multiple of %lld ns",
                          (long long)t[0].width);
    if (!err && ended && q->to_ns > data_end) {
        /* Clipped to the end of the data: the steps up to the one holding
         * it (none when the window starts after it). */
        cw__store_tiers_clip(t, data_end);
        cq.to_ns = data_end;
        n = cq.from_ns < cq.to_ns ? cw_series_steps(&cq, &from) : 0;
    }
    if (!err && !(b.r = series_new(&cq, from, (uint32_t)n)))
        err = cw_diag_set(d, CW_ENOMEM, "series: out of memory for %llu points",
                          (unsigned long long)n);
    if (!err) {
        b.r->clipped_at = cq.to_ns != q->to_ns ? data_end : INT64_MIN;
        if (n) err = fill(&b, t);
    }
    cw__store_read_end(s, began);
    free(b.rd);
    free(b.tagmap);
    if (err == CW_ENOMEM) cw_diag_set(d, err, "series: out of memory");
    if (err) {
        cw_series_free(b.r);
        return err;
    }
    *out = b.r;
    return 0;
}

/* What a tag's row owns. */
static const size_t tag_owned[] = {offsetof(cw_series_tag_t, name),
                                   offsetof(cw_series_tag_t, outstanding)};

void cw_series_free(cw_series_t *s)
{
    if (!s) return;
    cw_free_rows(s->tags, s->ntags, sizeof *s->tags, tag_owned, CW_ARRAY_LEN(tag_owned));
    free(s->t); /* the block of every per-step array */
    free(s);
}
