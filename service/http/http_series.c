/* http_series.c - time series of a process or of the whole machine:
 * outstanding by tag, committed, decommitted, transient and peak per step.
 *
 * Reads the storage model's tables directly (docs/DESIGN.md, "Storage
 * model"), from one tier: the coarsest whose bucket width divides the
 * step and whose rollups reach the end of the window (a live minute or
 * hour not yet rolled up falls back to a finer tier). Per step i, the
 * window being aligned down to the tier's buckets:
 *   outstanding[tag][i]  state at the end of the step, from the state at
 *                        `from` (commits before it minus releases before
 *                        it) plus the step's commits minus its releases;
 *   committed / decommitted  bytes committed and released in the step;
 *   transient            releases in the step of commits of the same step
 *                        (AIFI of the step, pieces and bytes);
 *   peak                 process: the highest outstanding at any instant
 *                        of the step, exact (activity.relpeak); system: an
 *                        upper bound (the per-process peaks of a bucket
 *                        added, as they may fall at different instants).
 * The JSON is columnar (one array per figure) for the dashboard's charts. */
#include "http/http_internal.h"

#include <cjson/cJSON.h>
#include <inttypes.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define NS ((int64_t)1000000000)
static const int64_t tier_width[CW_TIERS] = {NS, 60 * NS, 3600 * NS};

/* The tiers table (schema 001): per tier, the first bucket it holds
 * (start_ns), the retention horizon (exact for windows from it on) and
 * the end of what it holds completely (end_ns); INT64_MIN while empty. */
#define SQL_DATA_END "SELECT end_ns FROM tiers WHERE tier = 0"
#define SQL_DATA_START "SELECT start_ns FROM tiers WHERE tier = 0"
#define SQL_TIER "SELECT end_ns, horizon_ns FROM tiers WHERE tier = ?1"

/* ?1 tier, ?2 the series' first step start (origin), ?6 .. ?3 the rows
 * read from this tier, ?4 step, ?5 proc. */
/* One text per query for a process (F = "AND proc = ?n") and one for the
 * whole system (F = ""): an "?n = 0 OR" form would keep SQLite from using
 * the proc column. */
#define PROC_FILTER(t) " AND " t ".proc = ?5"
/* Outstanding by tag at ?2 (exclusive) for proc ?3 (0 = all): the hour
 * tier's rows before ?1 (an hour boundary the hour tier is complete to)
 * plus the raw tier's rows from ?1 to ?2. Scanning a day of raw rows
 * for the state at the start of a window is what this avoids. */
#define SQL_START_COMMITS(F)                                                                       \
    "SELECT s.tag, SUM(x.b) FROM ("                                                                \
    " SELECT stack AS st, bytes AS b FROM commits WHERE tier = 2 AND bucket < ?1" F                \
    " UNION ALL SELECT stack, bytes FROM commits WHERE tier = 0 AND bucket >= ?1 AND bucket < "    \
    "?2" F ") x JOIN stacks s ON s.id = x.st GROUP BY s.tag"
#define SQL_START_RELEASES(F)                                                                      \
    "SELECT s.tag, -SUM(x.b) FROM ("                                                               \
    " SELECT stack AS st, bytes AS b FROM releases WHERE tier = 2 AND f < ?1" F                    \
    " UNION ALL SELECT stack, bytes FROM releases WHERE tier = 0 AND f >= ?1 AND f < ?2" F         \
    ") x JOIN stacks s ON s.id = x.st GROUP BY s.tag"
#define SQL_STEP_COMMITS(F)                                                                        \
    "SELECT (c.bucket - ?2) / ?4, s.tag, SUM(c.bytes), SUM(c.events)"                              \
    " FROM commits c JOIN stacks s ON s.id = c.stack"                                              \
    " WHERE c.tier = ?1 AND c.bucket >= ?6 AND c.bucket < ?3" F " GROUP BY 1, 2"
#define SQL_STEP_RELEASES(F)                                                                       \
    "SELECT (r.f - ?2) / ?4, s.tag, SUM(r.bytes),"                                                 \
    " SUM(CASE WHEN r.a < ?2 THEN 0 WHEN (r.a - ?2) / ?4 = (r.f - ?2) / ?4 THEN r.bytes ELSE 0 "   \
    "END),"                                                                                        \
    " SUM(CASE WHEN r.a < ?2 THEN 0 WHEN (r.a - ?2) / ?4 = (r.f - ?2) / ?4 THEN r.pieces ELSE 0 "  \
    "END)"                                                                                         \
    " FROM releases r JOIN stacks s ON s.id = r.stack"                                             \
    " WHERE r.tier = ?1 AND r.f >= ?6 AND r.f < ?3" F " GROUP BY 1, 2"
#define SQL_ACTIVITY(F)                                                                            \
    "SELECT bucket, SUM(delta), SUM(relpeak) FROM activity a"                                      \
    " WHERE a.tier = ?1 AND a.bucket >= ?6 AND a.bucket < ?3 AND ?4 = ?4 AND ?2 = ?2" F                        \
    " GROUP BY bucket ORDER BY bucket"
#define SQL_PROC_NAME "SELECT pid, name, cmdline, start_ns, exit_ns FROM processes WHERE id = ?1"

/* Column text, "" for NULL. */
static const char *col_text(sqlite3_stmt *st, int col)
{
    const unsigned char *t = sqlite3_column_text(st, col);
    return t ? (const char *)t : "";
}

static int one_i64(sqlite3 *db, const char *sql, int64_t bind, bool has_bind, int64_t *out)
{
    sqlite3_stmt *st;
    *out = INT64_MIN;
    if (sqlite3_prepare_v2(db, sql, -1, &st, NULL) != SQLITE_OK) return CW_EDB;
    if (has_bind) sqlite3_bind_int64(st, 1, bind);
    int rc = sqlite3_step(st);
    if (rc == SQLITE_ROW && sqlite3_column_type(st, 0) != SQLITE_NULL)
        *out = sqlite3_column_int64(st, 0);
    sqlite3_finalize(st);
    return rc == SQLITE_ROW || rc == SQLITE_DONE ? 0 : CW_EDB;
}

int cw__http_data_end(cw_store_t *s, int64_t *end_ns)
{
    return one_i64(cw_store_db(s), SQL_DATA_END, 0, false, end_ns);
}

int cw__http_data_start(cw_store_t *s, int64_t *start_ns)
{
    return one_i64(cw_store_db(s), SQL_DATA_START, 0, false, start_ns);
}

/* Floor division for possibly negative times. */
static int64_t floor_to(int64_t t, int64_t w)
{
    int64_t q = t / w;
    if (t % w && t < 0) q--;
    return q * w;
}

/* Reads a tier's end and horizon; false when unknown. */
static bool tier_info(sqlite3 *db, int k, int64_t *end, int64_t *horizon)
{
    sqlite3_stmt *st;
    bool ok = false;
    if (sqlite3_prepare_v2(db, SQL_TIER, -1, &st, NULL) != SQLITE_OK) return false;
    sqlite3_bind_int(st, 1, k);
    if (sqlite3_step(st) == SQLITE_ROW) {
        *end = sqlite3_column_int64(st, 0);
        *horizon = sqlite3_column_int64(st, 1);
        ok = true;
    }
    sqlite3_finalize(st);
    return ok;
}

int64_t cw__http_split(sqlite3 *db, int tier, int64_t t)
{
    int64_t endk, hk, end0, h0;
    if (!tier_info(db, tier, &endk, &hk) || !tier_info(db, 0, &end0, &h0) || endk == INT64_MIN)
        return INT64_MIN;
    int64_t e = t == INT64_MAX ? endk : floor_to(t, tier_width[tier]);
    if (e > endk) e = endk;
    /* Raw rows after e must all still be there (not folded by retention). */
    return h0 != INT64_MIN && h0 > e ? INT64_MIN : e;
}

/* A step that gives at most ~1000 points. */
static int64_t auto_step(int64_t span)
{
    static const int64_t nice[] = {1,     2,     5,     10,    15,     30,    60,
                                   120,   300,   600,   900,   1800,   3600,  7200,
                                   10800, 21600, 43200, 86400, 172800, 604800};
    for (size_t i = 0; i < sizeof nice / sizeof nice[0]; i++)
        if (span / (nice[i] * NS) <= 1000) return nice[i] * NS;
    return 604800 * NS;
}

typedef struct series {
    uint32_t npoints;
    uint32_t ntags, captags;
    char **tags;
    int64_t **out;  /* [tag][i]: starts as the step's net change */
    int64_t *start; /* [tag]: outstanding at from */
    int64_t *committed, *commit_count, *decommitted, *transient, *transient_count, *peak;
} series_t;

static void series_free(series_t *s)
{
    for (uint32_t i = 0; i < s->ntags; i++) {
        free(s->tags[i]);
        free(s->out[i]);
    }
    free(s->tags);
    free(s->out);
    free(s->start);
    free(s->committed);
    free(s->commit_count);
    free(s->decommitted);
    free(s->transient);
    free(s->transient_count);
    free(s->peak);
}

/* Index of tag, added when new; -1 on ENOMEM. */
static int tag_index(series_t *s, const char *tag)
{
    for (uint32_t i = 0; i < s->ntags; i++)
        if (strcmp(s->tags[i], tag) == 0) return (int)i;
    if (s->ntags == s->captags) {
        uint32_t cap = s->captags ? s->captags * 2 : 8;
        char **t = realloc(s->tags, cap * sizeof *t);
        if (t) s->tags = t;
        int64_t **o = realloc(s->out, cap * sizeof *o);
        if (o) s->out = o;
        int64_t *st = realloc(s->start, cap * sizeof *st);
        if (st) s->start = st;
        if (!t || !o || !st) return -1;
        s->captags = cap;
    }
    s->tags[s->ntags] = strdup(tag);
    s->out[s->ntags] = calloc(s->npoints, sizeof(int64_t));
    s->start[s->ntags] = 0;
    if (!s->tags[s->ntags] || !s->out[s->ntags]) {
        free(s->tags[s->ntags]);
        free(s->out[s->ntags]);
        return -1;
    }
    return (int)s->ntags++;
}

typedef struct qargs {
    int tier;          /* the coarse tier of the first part */
    int64_t from, to, step;
    int64_t mid;       /* [from, mid) from `tier`, [mid, to) from the raw tier */
    uint32_t proc;
    int64_t lo, hi;    /* the part being read */
    int part_tier;
} qargs_t;

static int prepare(sqlite3 *db, const char *sql, const qargs_t *q, sqlite3_stmt **st)
{
    if (sqlite3_prepare_v2(db, sql, -1, st, NULL) != SQLITE_OK) return CW_EDB;
    sqlite3_bind_int(*st, 1, q->part_tier);
    sqlite3_bind_int64(*st, 2, q->from);
    sqlite3_bind_int64(*st, 3, q->hi);
    sqlite3_bind_int64(*st, 4, q->step);
    if (q->proc) sqlite3_bind_int64(*st, 5, q->proc);
    sqlite3_bind_int64(*st, 6, q->lo);
    return 0;
}

/* Adds one part's commits and releases to the steps. */
static int fill_steps(sqlite3 *db, const qargs_t *q, series_t *s)
{
    sqlite3_stmt *st = NULL;
    int rc = 0;
    if (!rc &&
        !(rc = prepare(db, q->proc ? SQL_STEP_COMMITS(PROC_FILTER("c")) : SQL_STEP_COMMITS(""), q,
                       &st))) {
        while (!rc && sqlite3_step(st) == SQLITE_ROW) {
            int64_t i = sqlite3_column_int64(st, 0);
            int t = tag_index(s, col_text(st, 1));
            if (t < 0)
                rc = CW_ENOMEM;
            else if (i >= 0 && i < s->npoints) {
                int64_t b = sqlite3_column_int64(st, 2);
                s->out[t][i] += b;
                s->committed[i] += b;
                s->commit_count[i] += sqlite3_column_int64(st, 3);
            }
        }
        sqlite3_finalize(st);
    }
    if (!rc &&
        !(rc = prepare(db, q->proc ? SQL_STEP_RELEASES(PROC_FILTER("r")) : SQL_STEP_RELEASES(""), q,
                       &st))) {
        while (!rc && sqlite3_step(st) == SQLITE_ROW) {
            int64_t i = sqlite3_column_int64(st, 0);
            int t = tag_index(s, col_text(st, 1));
            if (t < 0)
                rc = CW_ENOMEM;
            else if (i >= 0 && i < s->npoints) {
                int64_t b = sqlite3_column_int64(st, 2);
                s->out[t][i] -= b;
                s->decommitted[i] += b;
                s->transient[i] += sqlite3_column_int64(st, 3);
                s->transient_count[i] += sqlite3_column_int64(st, 4);
            }
        }
        sqlite3_finalize(st);
    }
    return rc;
}

/* Runs the queries into s. 0, CW_EDB or CW_ENOMEM. */
static int fill(sqlite3 *db, const qargs_t *q, series_t *s)
{
    sqlite3_stmt *st = NULL;
    int rc = 0;
    /* Outstanding at from, by tag. */
    const char *start_sql[2] = {
        q->proc ? SQL_START_COMMITS(" AND proc = ?3") : SQL_START_COMMITS(""),
        q->proc ? SQL_START_RELEASES(" AND proc = ?3") : SQL_START_RELEASES("")};
    int64_t split = cw__http_split(db, 2, q->from);
    for (int k = 0; k < 2 && !rc; k++) {
        if (sqlite3_prepare_v2(db, start_sql[k], -1, &st, NULL) != SQLITE_OK) {
            rc = CW_EDB;
            break;
        }
        sqlite3_bind_int64(st, 1, split);
        sqlite3_bind_int64(st, 2, q->from);
        sqlite3_bind_int64(st, 3, q->proc);
        while (!rc && sqlite3_step(st) == SQLITE_ROW) {
            int t = tag_index(s, col_text(st, 0));
            if (t < 0)
                rc = CW_ENOMEM;
            else
                s->start[t] += sqlite3_column_int64(st, 1);
        }
        sqlite3_finalize(st);
    }
    /* The steps: [from, mid) from the coarse tier, [mid, to) raw. */
    qargs_t part = *q;
    for (int k = 0; k < 2 && !rc; k++) {
        part.part_tier = k == 0 ? q->tier : 0;
        part.lo = k == 0 ? q->from : q->mid;
        part.hi = k == 0 ? q->mid : q->to;
        if (part.lo < part.hi) rc = fill_steps(db, &part, s);
    }
    if (rc) return rc;
    /* Net changes -> states at step ends. */
    int64_t total = 0;
    for (uint32_t t = 0; t < s->ntags; t++) {
        int64_t cur = s->start[t];
        total += cur;
        for (uint32_t i = 0; i < s->npoints; i++) {
            cur += s->out[t][i];
            s->out[t][i] = cur;
        }
    }
    /* Peaks: the state at each step start, raised by the buckets' peaks,
     * the parts read in time order. */
    int64_t cur = total;
    uint32_t i = 0;
    if (s->npoints) s->peak[0] = cur;
    for (int k = 0; k < 2; k++) {
        part.part_tier = k == 0 ? q->tier : 0;
        part.lo = k == 0 ? q->from : q->mid;
        part.hi = k == 0 ? q->mid : q->to;
        if (part.lo >= part.hi) continue;
        if ((rc = prepare(db, q->proc ? SQL_ACTIVITY(PROC_FILTER("a")) : SQL_ACTIVITY(""), &part,
                          &st)))
            return rc;
        while (sqlite3_step(st) == SQLITE_ROW) {
            int64_t b = sqlite3_column_int64(st, 0);
            uint32_t j = (uint32_t)((b - q->from) / q->step);
            if (j >= s->npoints) break;
            while (i < j)
                s->peak[++i] = cur;
            int64_t p = cur + sqlite3_column_int64(st, 2);
            if (p > s->peak[i]) s->peak[i] = p;
            cur += sqlite3_column_int64(st, 1);
        }
        sqlite3_finalize(st);
    }
    while (i + 1 < s->npoints)
        s->peak[++i] = cur;
    /* The step's end state may be above the last bucket's peak when the
     * activity rows are coarser; never report a peak below it. */
    for (uint32_t j = 0; j < s->npoints; j++) {
        int64_t end = 0;
        for (uint32_t t = 0; t < s->ntags; t++)
            end += s->out[t][j];
        if (end > s->peak[j]) s->peak[j] = end;
    }
    return 0;
}

static cJSON *i64_array(const int64_t *v, uint32_t n)
{
    cJSON *a = cJSON_CreateArray();
    for (uint32_t i = 0; a && i < n; i++)
        if (!cJSON_AddItemToArray(a, cw__json_raw_i64(v[i]))) {
            cJSON_Delete(a);
            return NULL;
        }
    return a;
}

static bool add_array(cJSON *o, const char *name, const int64_t *v, uint32_t n)
{
    cJSON *a = i64_array(v, n);
    if (!a) return false;
    cJSON_AddItemToObject(o, name, a);
    return true;
}

/* Chooses the coarse tier (see the file comment): the coarsest whose
 * width divides the step and the origin, whose horizon is at or before
 * from (exact figures) and which holds some of the window; *mid is where
 * it stops holding it (the raw tier reads the rest). Tier 0 otherwise. */
static int pick_tier(sqlite3 *db, int64_t step, int64_t from, int64_t to, int64_t *mid)
{
    *mid = to;
    for (int k = CW_TIERS - 1; k > 0; k--) {
        int64_t endk, hk;
        if (step % tier_width[k] || floor_to(from, tier_width[k]) != from) continue;
        if (!tier_info(db, k, &endk, &hk) || endk == INT64_MIN || hk > from || endk <= from)
            continue;
        *mid = endk < to ? endk : to;
        return k;
    }
    return 0;
}

int cw__http_series(cw__http_req_t *r, uint32_t proc)
{
    int64_t from, to, step = 0;
    const char *ss = cw__http_param(r, "step");
    int rc = cw__http_window(r, &from, &to);
    if (rc) return rc;
    if (ss) {
        if ((rc = cw__http_parse_duration(r, "step", ss, &step))) return rc;
        if (step % NS)
            return cw__http_fail(r, 400, "step: must be a whole number of seconds (1s, 60s, 5m)");
    } else
        step = auto_step(to - from);
    sqlite3 *db = cw_store_db(r->store);
    uint32_t pid = 0;
    char *name = NULL, *cmdline = NULL;
    int64_t start_ns = 0, exit_ns = INT64_MAX;
    if (proc) {
        sqlite3_stmt *st;
        if (sqlite3_prepare_v2(db, SQL_PROC_NAME, -1, &st, NULL) != SQLITE_OK)
            return cw__http_fail(r, 500, "query failed: %s", sqlite3_errmsg(db));
        sqlite3_bind_int64(st, 1, proc);
        if (sqlite3_step(st) == SQLITE_ROW) {
            pid = (uint32_t)sqlite3_column_int64(st, 0);
            name = strdup(col_text(st, 1));
            if (sqlite3_column_type(st, 2) != SQLITE_NULL) cmdline = strdup(col_text(st, 2));
            start_ns = sqlite3_column_int64(st, 3);
            if (sqlite3_column_type(st, 4) != SQLITE_NULL) exit_ns = sqlite3_column_int64(st, 4);
        }
        sqlite3_finalize(st);
        if (!name) return cw__http_fail(r, 404, "id: no process instance %" PRIu32, proc);
    }
    qargs_t q = {.step = step, .proc = proc};
    q.from = floor_to(from, step);
    uint64_t n = ((uint64_t)to - (uint64_t)q.from + (uint64_t)step - 1) / (uint64_t)step;
    if (n > CW__HTTP_MAX_POINTS) {
        free(name);
        free(cmdline);
        return cw__http_fail(r, 400,
                             "step: the window has %" PRIu64 " steps of %" PRId64
                             " s, more than %d; use a larger step or a shorter window",
                             n, (int64_t)(step / NS), CW__HTTP_MAX_POINTS);
    }
    q.to = q.from + (int64_t)n * step;
    q.tier = pick_tier(db, step, q.from, q.to, &q.mid);

    series_t s = {.npoints = (uint32_t)n};
    s.committed = calloc(n, sizeof(int64_t));
    s.commit_count = calloc(n, sizeof(int64_t));
    s.decommitted = calloc(n, sizeof(int64_t));
    s.transient = calloc(n, sizeof(int64_t));
    s.transient_count = calloc(n, sizeof(int64_t));
    s.peak = calloc(n, sizeof(int64_t));
    int64_t *tv = calloc(n, sizeof(int64_t)), *tot = calloc(n, sizeof(int64_t));
    cJSON *o = NULL;
    if (!s.committed || !s.commit_count || !s.decommitted || !s.transient || !s.transient_count ||
        !s.peak || !tv || !tot) {
        rc = cw__http_fail(r, 500, "out of memory for %" PRIu64 " points", n);
        goto out;
    }
    if ((rc = fill(db, &q, &s))) {
        rc = rc == CW_ENOMEM ? cw__http_fail(r, 500, "out of memory")
                             : cw__http_fail(r, 500, "query failed: %s", sqlite3_errmsg(db));
        goto out;
    }
    int64_t start_total = 0;
    for (uint32_t t = 0; t < s.ntags; t++)
        start_total += s.start[t];
    for (uint32_t i = 0; i < n; i++) {
        tv[i] = q.from + (int64_t)i * step;
        for (uint32_t t = 0; t < s.ntags; t++)
            tot[i] += s.out[t][i];
    }
    cJSON *outs, *tags, *pj;
    o = cJSON_CreateObject();
    bool ok = o && cw__json_window(o, q.from, q.to) && cw__json_i64(o, "step_ns", step) &&
              cJSON_AddNumberToObject(o, "tier", q.tier) &&
              cw__json_i64(o, "outstanding_start_bytes", start_total);
    if (ok && proc)
        ok = (pj = cJSON_AddObjectToObject(o, "process")) && cw__json_u64(pj, "id", proc) &&
             cw__json_u64(pj, "pid", pid) && cJSON_AddStringToObject(pj, "name", name) &&
             (cmdline ? cJSON_AddStringToObject(pj, "cmdline", cmdline)
                      : cJSON_AddNullToObject(pj, "cmdline")) &&
             cw__json_i64(pj, "start_ns", start_ns) &&
             (exit_ns == INT64_MAX ? cJSON_AddNullToObject(pj, "exit_ns")
                                   : cw__json_i64(pj, "exit_ns", exit_ns));
    ok = ok && add_array(o, "t", tv, s.npoints) && (tags = cJSON_AddArrayToObject(o, "tags")) &&
         (outs = cJSON_AddObjectToObject(o, "outstanding"));
    for (uint32_t t = 0; ok && t < s.ntags; t++)
        ok = cJSON_AddItemToArray(tags, cJSON_CreateString(s.tags[t])) &&
             add_array(outs, s.tags[t], s.out[t], s.npoints);
    ok = ok && add_array(o, "outstanding_total", tot, s.npoints) &&
         add_array(o, "committed_bytes", s.committed, s.npoints) &&
         add_array(o, "commit_count", s.commit_count, s.npoints) &&
         add_array(o, "decommitted_bytes", s.decommitted, s.npoints) &&
         add_array(o, "transient_bytes", s.transient, s.npoints) &&
         add_array(o, "transient_count", s.transient_count, s.npoints) &&
         add_array(o, "peak_bytes", s.peak, s.npoints) &&
         cJSON_AddStringToObject(o, "peak_kind", proc ? "exact" : "upper_bound");
    rc = ok ? cw__http_send_json(r, o) : cw__http_fail(r, 500, "out of memory");
out:
    cJSON_Delete(o);
    series_free(&s);
    free(tv);
    free(tot);
    free(name);
    free(cmdline);
    return rc;
}
