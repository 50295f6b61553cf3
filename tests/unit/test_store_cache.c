/* test_store_cache.c - the store's read caches (store_report.c: sums before
 * a report's window; store_series.c: a coarse tier's rows per bucket)
 * give the answers the rows alone give.
 *
 * A random history (processes coming and going, rundown of new instances
 * at any time, commits, partial releases, gaps) is written batch by batch
 * while two read handles on the same file answer random reports and series
 * (unaligned windows, windows from before the data, the whole database,
 * the machine and single processes, steps of seconds to hours): one with
 * its caches, one with them off. After every few batches both must agree
 * on every figure. Three databases: everything kept; retention folding
 * the raw, minute and hour tiers while the caches hold sums; a size cap
 * that halves retentions. Midway the stack tags are rewritten (as
 * re-tagging does, with a new meta rules_hash). The caches must have been
 * used, and refreshed after each fold. Every report is also asked ranked
 * (cw_store_report_top, by each key, cut to 1, 3 and all processes): the
 * processes it chooses and their figures must be the full report's
 * (among them, windows from a t0 inside a minute that the ranked path
 * reads through the minute tier: there must have been some, with rows
 * taken from raw seconds). First, the report's accumulator alone against sums added one by one
 * (acc_rows). */
#include <ctype.h>
#include <inttypes.h>
#include <stdbool.h>
#include <stdint.h>
#include <string.h>

#include "commitwatch/batch.h"
#include "commitwatch/event.h"
#include "commitwatch/memstat.h"
#include "commitwatch/platform.h"
#include "commitwatch/query.h"
#include "commitwatch/store.h"
#include "report_check.h"
#include "rng.h"
#include "store/store_internal.h"
#include "store/store_report_sums.h"
#include "test.h"
#include "test_port.h"

#define S INT64_C(1000000000)
#define MIN (60 * S)
#define HOUR (3600 * S)
#define NSTACK 5
#define MAXP 20000
#define MAXPROC 40

static const char *const tags[2][NSTACK] = {
    {"Heap", "Other", "VirtualAlloc", "Heap", "Stack"},
    {"Heap", "Heap", "Other", "Mapped", "Stack"}, /* after re-tagging */
};

static char dir[256];
static uint64_t minute_fixes; /* rows the minute split took from raw seconds */
static uint64_t before_whole; /* ranked reports before t0 from t0's hour's cell, less [t0, c1) */
static uint64_t before_whole_open; /* and of those, from the open hour's cell */
static uint64_t keys_down;    /* keys cache fills from the open hour downwards */
static uint64_t keys_open;    /* keys cache minute segments read as the open hour's cells */
static uint64_t keys_hours;   /* keys cache minute segments read as the hour tier's cells */
static uint64_t keys_snaps;   /* keys cache afresh fills that left a copy at their coarse end */
static uint64_t keys_minute_sums; /* keys cache minutes read from their row of minute_sums */
static uint64_t keys_second_sums; /* and raw seconds from theirs of second_sums */
static uint64_t keys_hour_sums;   /* and hours from theirs of hour_sums */
static uint64_t sums_checked;     /* rows of bucket sums checked against their bucket's cells */
static uint64_t keys_checked; /* processes whose cached keys were checked against the cells' */
static uint64_t closed_dropped; /* closed sums the report cache had left out when dropped */

/* Drops c's read caches, keeping the count of closed sums left out. */
static void drop_caches(cw_store_t *c)
{
    closed_dropped += cw__store_report_cache_closed(c);
    cw_store_drop_read_caches(c);
}
static uint64_t hour_splits;  /* reports through the hour split */
static uint64_t hour_fixes;   /* (hour, process) cells it took from minutes */
static uint64_t prunes;       /* report cache fills that left closed sums out midway */

static uint64_t rnd(uint64_t n)
{
    return test_rng_next() % n;
}

typedef struct piece {
    uint32_t proc, stack;
    int64_t a; /* bucket, or CW_TS_BEFORE */
    uint64_t left;
} piece_t;

static piece_t pc[MAXP];
static uint32_t npc, nproc, nended;
static int64_t proc_start[MAXPROC + 1];
static bool proc_ended[MAXPROC + 1];
static int64_t t0, end0;
static uint32_t checks_report, checks_series, checks_top, checks_match;

/* ---- comparing answers ------------------------------------------------------ */

static bool same_note(const char *a, const char *b)
{
    return a ? b && strcmp(a, b) == 0 : !b;
}

/* Two reports of [from, to) agree on every figure. */
static void reports_same(const cw_report_t *x, const cw_report_t *y, int64_t from, int64_t to)
{
    if (x->nprocs != y->nprocs)
        fprintf(stderr, "report [%" PRId64 ", %" PRId64 "): %u vs %u processes\n", from, to,
                x->nprocs, y->nprocs);
    ASSERT_EQ(x->from_ns, y->from_ns);
    ASSERT_EQ(x->to_ns, y->to_ns);
    ASSERT_TRUE(same_note(x->note, y->note));
    ASSERT_EQ(x->nprocs, y->nprocs);
    for (uint32_t i = 0; i < x->nprocs; i++)
        test_proc_eq(&x->procs[i], &y->procs[i]);
}

/* The key cw_store_report_top() ranks p by, from p's figures. */
static int64_t rank_key(const cw_proc_report_t *p, cw_rank_t k)
{
    switch (k) {
    case CW_RANK_IMPACTING:
        return cw_figs_impacting(&p->figs);
    case CW_RANK_SIZE:
        return (int64_t)p->figs.size_bytes;
    case CW_RANK_PEAK:
        return (int64_t)p->peak_bytes;
    case CW_RANK_OUTSTANDING:
        return (int64_t)p->outstanding_end;
    case CW_RANK_TRANSIENT:
        return (int64_t)p->figs.types[CW_AIFI].bytes;
    }
    return 0;
}

/* x's process i comes before j in the ranking by k. */
static bool ranks_before(const cw_report_t *x, uint32_t i, uint32_t j, cw_rank_t k)
{
    int64_t a = rank_key(&x->procs[i], k), b = rank_key(&x->procs[j], k);
    return a != b ? a > b : x->procs[i].id < x->procs[j].id;
}

/* The ranked report (cw_store_report_top: processes ranked from the
 * cells' columns, only the chosen ones decoded) is the full report x cut
 * to its first processes by each key: the same processes, each with every
 * figure, stack and name x gives it. */
static void top_eq(cw_store_t *h, const cw_report_t *x, int64_t from, int64_t to)
{
    static const uint32_t limits[] = {1, 3, 1000};
    cw_diag_t d = {{0}};
    for (int k = CW_RANK_IMPACTING; k <= CW_RANK_TRANSIENT; k++) {
        for (size_t l = 0; l < CW_ARRAY_LEN(limits); l++) {
            cw_report_t *z;
            uint32_t total;
            ASSERT_OK(cw_store_report_top(h, from, to, (cw_rank_t)k, limits[l], false, &z, &total,
                                          &d));
            ASSERT_EQ(total, x->nprocs);
            ASSERT_EQ(z->from_ns, x->from_ns);
            ASSERT_EQ(z->to_ns, x->to_ns);
            ASSERT_TRUE(same_note(z->note, x->note));
            ASSERT_EQ(z->nprocs, x->nprocs < limits[l] ? x->nprocs : limits[l]);
            for (uint32_t i = 0; i < x->nprocs; i++) {
                /* x's process i is chosen when fewer than limit rank before it. */
                uint32_t before = 0;
                for (uint32_t j = 0; j < x->nprocs; j++)
                    before += ranks_before(x, j, i, (cw_rank_t)k);
                const cw_proc_report_t *got = NULL, *want = &x->procs[i];
                for (uint32_t m = 0; m < z->nprocs; m++)
                    if (z->procs[m].id == want->id) got = &z->procs[m];
                ASSERT_EQ(got != NULL, before < limits[l]);
                if (!got) continue;
                test_proc_eq(got, want);
                ASSERT_STR_EQ(got->name, want->name);
                ASSERT_EQ(got->pid, want->pid);
                ASSERT_EQ(got->start_ns, want->start_ns);
                ASSERT_EQ(got->exit_ns, want->exit_ns);
                ASSERT_EQ(got->folded, want->folded);
            }
            /* in cw_report_sort() order, as cw_store_report() lists them */
            for (uint32_t m = 0, i = 0; m < z->nprocs; m++, i++) {
                while (i < x->nprocs && x->procs[i].id != z->procs[m].id)
                    i++;
                ASSERT_TRUE(i < x->nprocs);
            }
            cw_report_free(z);
            checks_top++;
        }
    }
}

/* The ranked report filtered by m (cw_store_report_match) is x's
 * processes that m keeps, cut to their first by each key, as the HTTP
 * list filters the full report. */
static void match_eq(cw_store_t *h, const cw_report_t *x, int64_t from, int64_t to,
                     const cw_proc_match_t *m)
{
    static const uint32_t limits[] = {2, 1000};
    cw_diag_t d = {{0}};
    bool keeps[256];
    uint32_t nkept = 0;
    ASSERT_TRUE(x->nprocs <= CW_ARRAY_LEN(keeps));
    for (uint32_t i = 0; i < x->nprocs; i++) {
        const cw_proc_report_t *p = &x->procs[i];
        keeps[i] = (!m->name || cw_contains_ci(p->name ? p->name : "", m->name)) &&
                   (!m->by_pid || p->pid == m->pid);
        nkept += keeps[i];
    }
    for (int k = CW_RANK_IMPACTING; k <= CW_RANK_TRANSIENT; k++)
        for (size_t l = 0; l < CW_ARRAY_LEN(limits); l++) {
            cw_report_t *z;
            uint32_t total;
            ASSERT_OK(cw_store_report_match(h, from, to, (cw_rank_t)k, limits[l], m, false, &z,
                                            &total, &d));
            ASSERT_EQ(total, nkept);
            ASSERT_EQ(z->nprocs, nkept < limits[l] ? nkept : limits[l]);
            for (uint32_t i = 0; i < x->nprocs; i++) {
                uint32_t before = 0;
                for (uint32_t j = 0; j < x->nprocs; j++)
                    before += keeps[j] && ranks_before(x, j, i, (cw_rank_t)k);
                const cw_proc_report_t *got = NULL, *want = &x->procs[i];
                for (uint32_t q = 0; q < z->nprocs; q++)
                    if (z->procs[q].id == want->id) got = &z->procs[q];
                ASSERT_EQ(got != NULL, keeps[i] && before < limits[l]);
                if (!got) continue;
                test_proc_eq(got, want);
                ASSERT_STR_EQ(got->name, want->name);
                ASSERT_EQ(got->pid, want->pid);
            }
            cw_report_free(z);
            checks_match++;
        }
}

static void report_eq(cw_store_t *c, cw_store_t *n, int64_t from, int64_t to)
{
    cw_report_t *x, *y;
    cw_diag_t d = {{0}};
    int rx = cw_store_report(c, from, to, false, &x, &d);
    int ry = cw_store_report(n, from, to, false, &y, &d);
    ASSERT_EQ(rx, ry);
    if (rx) return;
    reports_same(x, y, from, to);
    top_eq(c, y, from, to);
    if (y->nprocs && y->nprocs <= 256 && checks_report % 7 == 0) {
        /* A part of a listed name, in the other case; a listed pid; a
         * name no process has. */
        const cw_proc_report_t *p = &y->procs[(uint32_t)checks_report % y->nprocs];
        char part[8] = {0};
        for (size_t i = 0; i < 3 && p->name && p->name[i + 1]; i++)
            part[i] = (char)toupper((unsigned char)p->name[i + 1]);
        match_eq(c, y, from, to, &(cw_proc_match_t){.name = part});
        match_eq(c, y, from, to, &(cw_proc_match_t){.by_pid = true, .pid = p->pid});
        match_eq(c, y, from, to, &(cw_proc_match_t){.name = "no such name"});
    }
    cw_report_free(x);
    cw_report_free(y);
    checks_report++;
}

static void arr_eq(const int64_t *a, const int64_t *b, uint32_t n)
{
    for (uint32_t i = 0; i < n; i++)
        ASSERT_EQ(a[i], b[i]);
}

static void series_same(const cw_series_t *x, const cw_series_t *y)
{
    ASSERT_EQ(x->npoints, y->npoints);
    ASSERT_EQ(x->tier, y->tier);
    ASSERT_EQ(x->outstanding_start, y->outstanding_start);
    ASSERT_EQ(x->ntags, y->ntags);
    for (uint32_t k = 0; k < x->ntags; k++) {
        const cw_series_tag_t *ty = NULL;
        for (uint32_t j = 0; j < y->ntags; j++)
            if (strcmp(x->tags[k].name, y->tags[j].name) == 0) ty = &y->tags[j];
        ASSERT_TRUE(ty != NULL);
        ASSERT_EQ(x->tags[k].start, ty->start);
        arr_eq(x->tags[k].outstanding, ty->outstanding, x->npoints);
    }
    arr_eq(x->outstanding_total, y->outstanding_total, x->npoints);
    arr_eq(x->committed, y->committed, x->npoints);
    arr_eq(x->commit_count, y->commit_count, x->npoints);
    arr_eq(x->decommitted, y->decommitted, x->npoints);
    arr_eq(x->transient, y->transient, x->npoints);
    arr_eq(x->transient_count, y->transient_count, x->npoints);
    arr_eq(x->peak, y->peak, x->npoints);
}

static void series_eq(cw_store_t *c, cw_store_t *n, const cw_series_query_t *q)
{
    cw_series_t *x, *y;
    cw_diag_t d = {{0}};
    int rx = cw_store_series(c, q, &x, &d);
    int ry = cw_store_series(n, q, &y, &d);
    ASSERT_EQ(rx, ry);
    if (rx) return;
    series_same(x, y);
    cw_series_free(x);
    cw_series_free(y);
    checks_series++;
}

/* A time in [lo, hi): whole seconds, minutes or hours, or any ns. */
static int64_t some_time(int64_t lo, int64_t hi)
{
    int64_t t = lo + (int64_t)rnd((uint64_t)(hi - lo));
    static const int64_t w[] = {1, S, MIN, HOUR};
    return t - t % w[rnd(4)];
}

static void compare(cw_store_t *c, cw_store_t *n)
{
    cw__tier_t t[CW_TIERS];
    cw_diag_t d = {{0}};
    ASSERT_OK(cw__store_read_tiers(n, t, &d));
    int64_t lo = t[0].horizon != INT64_MIN ? t[0].horizon : t0;
    /* Reports: the last hour as the dashboard asks it, random windows
     * (some reaching back into the coarse tiers' history), the whole. */
    report_eq(c, n, end0 - HOUR + (int64_t)rnd(S), end0);
    for (int i = 0; i < 3; i++) {
        int64_t a = some_time(lo - 10 * MIN, end0), b = some_time(a + 1, end0 + MIN);
        if (b > a) report_eq(c, n, a, b);
    }
    report_eq(c, n, INT64_MIN, INT64_MAX);
    /* The dashboard's long ranges, from a whole minute: the hours between
     * are read through the hour split, to the end or to a minute. */
    int64_t a = end0 - 2 * HOUR - (int64_t)rnd(3 * HOUR), b = a + 2 * HOUR + (int64_t)rnd(HOUR);
    a -= a % MIN;
    a += a % HOUR ? 0 : MIN;
    if (a >= (t[1].horizon != INT64_MIN ? t[1].horizon : t0))
        report_eq(c, n, a, rnd(2) || b >= end0 ? end0 : b - b % MIN);
    /* A window of the last minutes with the caches empty: the keys cache
     * fills afresh, from the open hour's cells less the minutes after t0
     * where that reads fewer (keys_down, store_report_keys.c). */
    if (rnd(4) == 0) {
        drop_caches(c);
        report_eq(c, n, end0 - (int64_t)rnd(20 * MIN), end0);
    }
    /* The last hour or two with the caches empty: t1's entry moves on
     * from t0's over the closed hours and the open one, read as their
     * cells where that reads fewer minutes (keys_hours, keys_open); then
     * a window from inside the open hour whose end moves on from its
     * start's entry, the minutes before it taken away from the open
     * hour's cells. The keys the cache gives are checked against every
     * cell's (keys_check). */
    if (checks_report % 5 == 1) { /* (the random stream left as the other checks draw it) */
        int64_t h = end0 - end0 % HOUR, r = (int64_t)(checks_report * 7919u) % 3600 * S;
        drop_caches(c);
        c->test.keys_check = true;
        report_eq(c, n, end0 - HOUR - r, end0);
        if (end0 - h > 6 * MIN) {
            drop_caches(c);
            report_eq(c, n, h + r % ((end0 - h) / 4), end0);
        }
        c->test.keys_check = false;
    }
    /* Series: the machine and a process, over windows read from the
     * minute and hour tiers and the raw tail. */
    static const int64_t steps[] = {S, 30 * S, MIN, 2 * MIN, 5 * MIN, HOUR, 2 * HOUR};
    for (int i = 0; i < 4; i++) {
        int64_t step = steps[rnd(CW_ARRAY_LEN(steps))];
        int64_t from = some_time(t0 - HOUR, end0), to = from + step * (1 + (int64_t)rnd(300));
        cw_series_query_t q = {rnd(3) ? 0 : 1 + (uint32_t)rnd(nproc), from, to, step};
        if (cw_series_steps(&q, NULL) <= 5000) series_eq(c, n, &q);
    }
}

/* Every row of second_sums (tier 0), minute_sums (tier 1) or hour_sums
 * (tier 2) holds its bucket's commit cells' columns
 * (schema/012_bucket_sums.sql, 013_hour_sums.sql); none is
 * left below the tier's horizon, nor (seconds) more than
 * CW__SECOND_SUMS_KEEP_NS before its end; every bucket of the tier above
 * those that has cells has one, but for those whose rows were deleted
 * by hand (buckets below thinned, every third one). */
static void sums_eq(cw_store_t *n, int k, int64_t thinned)
{
    static const char *const table[] = {"second_sums", "minute_sums", "hour_sums"};
    static const int64_t width[] = {S, MIN, HOUR};
    cw__tier_t t[CW_TIERS];
    cw_diag_t d = {{0}};
    sqlite3_stmt *rows, *cells;
    char sql[200];
    ASSERT_OK(cw__store_read_tiers(n, t, &d));
    int64_t low = t[k].horizon;
    if (k == 0 && t[0].end - CW__SECOND_SUMS_KEEP_NS > low)
        low = t[0].end - CW__SECOND_SUMS_KEEP_NS;
    snprintf(sql, sizeof sql, "SELECT bucket, procs, data FROM %s", table[k]);
    ASSERT_EQ(sqlite3_prepare_v2(n->db, sql, -1, &rows, NULL), SQLITE_OK);
    ASSERT_EQ(sqlite3_prepare_v2(n->db,
                                 "SELECT proc, bytes, released, coalesce(events, 0) FROM cells "
                                 "WHERE tier = ?1 AND bucket = ?2 AND layer = 0",
                                 -1, &cells, NULL),
              SQLITE_OK);
    sqlite3_bind_int(cells, 1, k);
    uint64_t nrows = 0;
    while (sqlite3_step(rows) == SQLITE_ROW) {
        int64_t b = sqlite3_column_int64(rows, 0), procs = sqlite3_column_int64(rows, 1);
        const unsigned char *p = sqlite3_column_blob(rows, 2);
        size_t len = (size_t)sqlite3_column_bytes(rows, 2), pos = 0;
        uint64_t proc = 0, flags;
        ASSERT_TRUE(b >= low && b < t[k].end && b % width[k] == 0);
        ASSERT_EQ(cw_varint_read(p, len, &pos, &flags), 0);
        ASSERT_TRUE(flags <= 1);
        sqlite3_bind_int64(cells, 2, b);
        int64_t seen = 0;
        while (sqlite3_step(cells) == SQLITE_ROW) {
            uint64_t v[4];
            for (int j = 0; j < 4; j++)
                ASSERT_EQ(cw_varint_read(p, len, &pos, &v[j]), 0);
            proc += v[0];
            ASSERT_EQ(proc, (uint64_t)sqlite3_column_int64(cells, 0));
            for (int j = 1; j < 4; j++)
                ASSERT_EQ(cw_unzigzag(v[j]) * (flags && j < 3 ? 4096 : 1),
                          sqlite3_column_int64(cells, j));
            seen++;
        }
        sqlite3_reset(cells);
        ASSERT_EQ(pos, len);
        ASSERT_EQ(seen, procs);
        nrows++;
    }
    sqlite3_finalize(rows);
    sqlite3_finalize(cells);
    /* The buckets with cells and no row: only the thinned ones. */
    snprintf(sql, sizeof sql,
             "SELECT DISTINCT bucket FROM cells WHERE tier = ?1 AND layer = 0 AND bucket >= ?2 "
             "AND bucket NOT IN (SELECT bucket FROM %s)",
             table[k]);
    ASSERT_EQ(sqlite3_prepare_v2(n->db, sql, -1, &rows, NULL), SQLITE_OK);
    sqlite3_bind_int(rows, 1, k);
    sqlite3_bind_int64(rows, 2, low == INT64_MIN ? INT64_MIN + 1 : low);
    while (sqlite3_step(rows) == SQLITE_ROW) {
        int64_t b = sqlite3_column_int64(rows, 0);
        ASSERT_TRUE(b < thinned && b / width[k] % 3 == 0);
    }
    sqlite3_finalize(rows);
    ASSERT_TRUE(nrows > 0);
    sums_checked += nrows;
}

/* ---- the history -------------------------------------------------------------- */

/* A new instance, with rundown (commits from before tracking) at `at`, or
 * (one in four) none: an instance started while tracked. */
static void new_proc(cw_batch_t *b, int64_t at)
{
    ASSERT_TRUE(nproc < MAXPROC);
    uint32_t id = ++nproc;
    char name[32];
    snprintf(name, sizeof name, "p%u.exe", id);
    proc_start[id] = at;
    proc_ended[id] = false;
    ASSERT_OK(cw_batch_add_proc(b, id, 1000 + id, at, CW_TS_NEVER, name, NULL));
    for (int i = 0, n = (int)rnd(4); i < n && npc < MAXP; i++) {
        uint64_t bytes = 4096 * (1 + rnd(64));
        pc[npc++] = (piece_t){id, (uint32_t)rnd(NSTACK), CW_TS_BEFORE, bytes};
        ASSERT_OK(cw_batch_add_commit(
            b, &(cw_row_commit_t){id, pc[npc - 1].stack, CW_TS_BEFORE, bytes, 1}));
    }
}

/* One batch at bucket bk with a few random events. */
static void write_batch(cw_store_t *w, int64_t bk, bool first)
{
    static const uint32_t fr[] = {1, 2};
    cw_diag_t d = {{0}};
    cw_batch_t *b;
    ASSERT_OK(cw_batch_create(bk, S, &b));
    if (first) {
        ASSERT_OK(cw_batch_add_frame(b, 1, "app!main"));
        ASSERT_OK(cw_batch_add_frame(b, 2, "kernelbase!VirtualAlloc"));
        for (uint32_t k = 0; k < NSTACK; k++)
            ASSERT_OK(cw_batch_add_stack(b, k, fr, 1 + k % 2, tags[0][k]));
        for (int i = 0; i < 4; i++)
            new_proc(b, bk);
    } else if (rnd(60) == 0 && nproc < MAXPROC) {
        new_proc(b, bk); /* rundown into BEFORE rows long after the start */
    }
    cw_row_activity_t act[MAXPROC + 1];
    memset(act, 0, sizeof act);
    if (!first && rnd(120) == 0 && nproc - nended > 2) {
        /* An exit: every piece of the process closed, then no more
         * events (all its sums closed: left out of the report cache). */
        uint32_t proc = 1 + (uint32_t)rnd(nproc);
        if (!proc_ended[proc]) {
            int64_t released = 0, ev = 0;
            for (uint32_t i = 0; i < npc; i++) {
                if (pc[i].proc != proc || !pc[i].left) continue;
                ASSERT_OK(cw_batch_add_release(
                    b, &(cw_row_release_t){proc, pc[i].stack, pc[i].a, pc[i].left, 1, true}));
                released += (int64_t)pc[i].left;
                pc[i].left = 0;
                ev++;
            }
            char name[32];
            snprintf(name, sizeof name, "p%u.exe", proc);
            ASSERT_OK(
                cw_batch_add_proc(b, proc, 1000 + proc, proc_start[proc], bk + S / 2, name, NULL));
            proc_ended[proc] = true;
            nended++;
            if (ev) act[proc] = (cw_row_activity_t){proc, (uint64_t)ev, -released, 0, bk};
        }
    }
    for (int n = 1 + (int)rnd(4); n > 0; n--) {
        uint32_t proc = 1 + (uint32_t)rnd(nproc), live[64], nlive = 0;
        if (proc_ended[proc]) continue;
        for (uint32_t i = npc; i-- > 0 && nlive < 64;)
            if (pc[i].proc == proc && pc[i].left) live[nlive++] = i;
        int64_t ts = bk + (int64_t)rnd(S), delta;
        if (nlive == 0 && rnd(3) == 0) {
            delta = 0; /* an event that commits nothing (a free of nothing) */
        } else if ((nlive == 0 || rnd(100) < 52) && npc < MAXP) {
            uint64_t bytes = 4096 * (1 + rnd(32));
            pc[npc++] = (piece_t){proc, (uint32_t)rnd(NSTACK), bk, bytes};
            ASSERT_OK(
                cw_batch_add_commit(b, &(cw_row_commit_t){proc, pc[npc - 1].stack, bk, bytes, 1}));
            delta = (int64_t)bytes;
        } else if (nlive) {
            piece_t *p = &pc[live[rnd(nlive)]];
            uint64_t pages = p->left / 4096,
                     take = pages > 1 && rnd(3) ? 1 + rnd(pages - 1) : pages;
            p->left -= take * 4096;
            ASSERT_OK(cw_batch_add_release(
                b, &(cw_row_release_t){proc, p->stack, p->a, take * 4096, 1, p->left == 0}));
            delta = -(int64_t)(take * 4096);
        } else {
            continue;
        }
        cw_row_activity_t *a = &act[proc];
        if (!a->events) *a = (cw_row_activity_t){proc, 0, 0, 0, bk};
        a->events++;
        a->delta += delta;
        if (a->delta > a->relpeak) {
            a->relpeak = a->delta;
            a->relpeak_ns = ts; /* events of a batch in any order: good enough here */
        }
    }
    for (uint32_t p = 1; p <= nproc; p++)
        if (act[p].events) ASSERT_OK(cw_batch_add_activity(b, &act[p]));
    ASSERT_OK(cw_store_write(w, b, &d));
    cw_batch_free(b);
    end0 = bk + S;
}

/* What re-tagging does (store_retag.c): new tags, a new rules_hash, one
 * transaction. */
static void retag(cw_store_t *w)
{
    char sql[256];
    ASSERT_EQ(sqlite3_exec(w->db, "BEGIN", NULL, NULL, NULL), SQLITE_OK);
    for (int k = 0; k < NSTACK; k++) {
        snprintf(sql, sizeof sql, "UPDATE stacks SET tag = '%s' WHERE id = %d", tags[1][k], k);
        ASSERT_EQ(sqlite3_exec(w->db, sql, NULL, NULL, NULL), SQLITE_OK);
    }
    ASSERT_OK(cw_store_meta_set(w, "rules_hash", "retagged", NULL));
    ASSERT_EQ(sqlite3_exec(w->db, "COMMIT", NULL, NULL, NULL), SQLITE_OK);
}

/* cut: c lists by transient bytes from every process's cells (load_figs'
 * cut), never from its candidates (report_top). */
static void run(const char *name, const cw_store_opts_t *o, int64_t span, bool expect_fold,
                uint32_t cache_rows, uint32_t seeks_max, bool cut)
{
    char path[400];
    cw_store_t *w, *c, *n;
    cw_diag_t d = {{0}};
    snprintf(path, sizeof path, "%s/%s", dir, name);
    npc = nproc = nended = 0;
    t0 = INT64_C(470011) * HOUR;
    ASSERT_OK(cw_store_open(path, o, &w, &d));
    int64_t bk = t0 + 17 * S;
    write_batch(w, bk, true);
    ASSERT_OK(cw_store_open_readonly(path, &c, &d));
    ASSERT_OK(cw_store_open_readonly(path, &n, &d));
    n->test.read_cache_off = true;
    c->test.read_cache_rows = cache_rows;
    c->test.seeks_max = seeks_max;
    c->test.transient_cands_max = cut ? 1 : 0;
    int64_t horizon[CW_TIERS] = {INT64_MIN, INT64_MIN, INT64_MIN};
    int folds = 0, batches = 0, reports_cached = 0;
    bool retagged = false;
    int64_t thinned = INT64_MIN;
    while (bk < t0 + span) {
        uint64_t k = rnd(100);
        bk += k < 70 ? S : k < 98 ? S * (int64_t)(1 + rnd(40)) : MIN * (int64_t)(1 + rnd(30));
        write_batch(w, bk, false);
        if (++batches % 25) continue;
        compare(c, n);
        cw__tier_t t[CW_TIERS];
        ASSERT_OK(cw__store_read_tiers(n, t, &d));
        bool folded = false;
        for (int j = 0; j < CW_TIERS; j++) {
            folded |= t[j].horizon != horizon[j];
            horizon[j] = t[j].horizon;
        }
        folds += folded;
        /* Whatever the report cache holds was refreshed after a fold. */
        int tier;
        int64_t h;
        if (cw__store_report_cache_key(c, &tier, &h)) {
            ASSERT_EQ(h, t[tier].horizon);
            reports_cached++;
        }
        if (!retagged && bk > t0 + span / 2) {
            retag(w);
            retagged = true;
            compare(c, n);
        }
        /* A third of the rows of bucket sums deleted by hand: the keys
         * cache reads those buckets from their cells. */
        if (thinned == INT64_MIN && bk > t0 + span / 3) {
            ASSERT_EQ(sqlite3_exec(w->db,
                                   "DELETE FROM minute_sums WHERE bucket / 60000000000 % 3 = 0;"
                                   "DELETE FROM hour_sums WHERE bucket / 3600000000000 % 3 = 0;"
                                   "DELETE FROM second_sums WHERE bucket / 1000000000 % 3 = 0",
                                   NULL, NULL, NULL),
                      SQLITE_OK);
            thinned = bk;
            compare(c, n);
        }
    }
    compare(c, n);
    sums_eq(n, 0, thinned);
    sums_eq(n, 1, thinned);
    sums_eq(n, 2, thinned);
    /* The caches were used (not every answer from the rows). */
    ASSERT_TRUE(reports_cached > batches / 80);
    if (!cache_rows) ASSERT_TRUE(cw__store_series_cache_rows(c) > 0);
    /* (each of the series cache's 2 entries holds at most cache_rows) */
    if (cache_rows) ASSERT_TRUE(cw__store_series_cache_rows(c) <= 2 * (size_t)cache_rows);
    if (cache_rows) ASSERT_TRUE(cw__store_raw_tail_rows(c) <= cache_rows);
    ASSERT_TRUE(n->r.report_cache == NULL && n->r.series_cache == NULL);
    if (expect_fold) ASSERT_TRUE(folds > 1);
    /* Sums of (process, stack) whose pieces were all closed were left out
     * of the cached entries, and the answers above still agreed. */
    uint64_t closed = closed_dropped + cw__store_report_cache_closed(c);
    closed_dropped = 0;
    printf("%s: %d batches, %u processes (%u ended), %d fold(s) seen, %" PRIu64
           " closed sums left out, %" PRIu64 " ranked reports keyed from the keys cache\n",
           name, batches, nproc, nended, folds, closed, c->test.keys_served);
    ASSERT_TRUE(closed > 0);
    ASSERT_TRUE(c->test.keys_served > 0 && n->test.keys_served == 0);
    /* Lists by transient bytes decoded their candidates alone, or (cut)
     * every process's cells. */
    printf("  %" PRIu64 " candidates decoded for lists by transient bytes\n",
           c->test.transient_cands);
    ASSERT_TRUE(cut ? c->test.transient_cands == 0 : c->test.transient_cands > 0);
    /* The sums' processes kept their room between reports, but for the
     * handle with its caches off. */
    if (!cache_rows) ASSERT_TRUE(cw__store_sums_room(c) >= nproc / 2);
    ASSERT_TRUE(cw__store_sums_room(n) == 0);
    /* The open hour's cells answered some segments, and the handle with
     * its caches off read those from the minute tier (db.h). */
    printf("  %" PRIu64 " segments read from the open hour's cells, %" PRIu64
           " keys cache fills taking minutes away from them\n",
           c->test.open_segments, c->test.keys_down);
    ASSERT_TRUE(c->test.open_segments > 0 && n->test.open_segments == 0);
    ASSERT_TRUE(n->test.keys_down == 0);
    keys_down += c->test.keys_down;
    ASSERT_TRUE(n->test.keys_open == 0 && n->test.keys_hours == 0);
    keys_open += c->test.keys_open;
    keys_hours += c->test.keys_hours;
    ASSERT_TRUE(n->test.keys_snaps == 0);
    keys_snaps += c->test.keys_snaps;
    ASSERT_TRUE(n->test.keys_minute_sums == 0);
    keys_minute_sums += c->test.keys_minute_sums;
    ASSERT_TRUE(n->test.keys_second_sums == 0);
    keys_second_sums += c->test.keys_second_sums;
    ASSERT_TRUE(n->test.keys_hour_sums == 0);
    keys_hour_sums += c->test.keys_hour_sums;
    /* ... and the keys it gave then were every cell's. */
    ASSERT_EQ(c->test.keys_mismatch, 0);
    keys_checked += c->test.keys_checked;
    printf("  minute tier from an unaligned t0: %" PRIu64 " ranked reports, %" PRIu64
           " rows from raw seconds\n",
           c->test.minute_splits + n->test.minute_splits,
           c->test.minute_fixes + n->test.minute_fixes);
    ASSERT_TRUE(c->test.minute_splits + n->test.minute_splits > 0);
    minute_fixes += c->test.minute_fixes + n->test.minute_fixes;
    /* Some ranked reports took their sums before t0 from t0's hour's
     * cell less the rows after t0; the handle with its caches off read
     * them from the minutes and seconds before t0 (store_test.h). */
    ASSERT_TRUE(n->test.before_whole == 0);
    before_whole += c->test.before_whole;
    before_whole_open += c->test.before_whole_open;
    /* The hour split answered some windows, and the handle with its
     * caches off read those from the minute tier (store_test.h). */
    printf("  hour tier from a minute not on an hour: %" PRIu64 " reports, %" PRIu64
           " (hour, process) cells from minutes\n",
           c->test.hour_splits, c->test.hour_fixes);
    ASSERT_TRUE(n->test.hour_splits == 0);
    hour_splits += c->test.hour_splits;
    /* Closed sums left out while report cache entries were added up
     * (store_report_sums.c), the answers still the same. */
    printf("  report cache fills pruned midway: %" PRIu64 "\n", c->test.before_prunes);
    ASSERT_TRUE(n->test.before_prunes == 0);
    prunes += c->test.before_prunes;
    hour_fixes += c->test.hour_fixes;
    cw_store_close(n);
    cw_store_close(c);
    cw_store_close(w);
}

/* ---- minute and hour sums of a database from before them --------------------------
 *
 * The database run() just wrote, its minute and hour sums deleted as if
 * it had been stored before schemas 12 and 13: the writer's next batches
 * write them, SUMS_BACKFILL_BUCKETS a batch and tier (store_tiers.c), and
 * then every minute and hour has its row, each equal to its cells. */
static void backfill(const char *name, const cw_store_opts_t *o)
{
    char path[400];
    cw_store_t *w, *n;
    cw_diag_t d = {{0}};
    snprintf(path, sizeof path, "%s/%s", dir, name);
    ASSERT_OK(cw_store_open(path, o, &w, &d));
    /* (what migrations 012 and 013 do on a database holding minutes and hours) */
    ASSERT_EQ(sqlite3_exec(w->db,
                           "DELETE FROM minute_sums; INSERT INTO meta(key, value) SELECT "
                           "'minute_sums_below', end_ns FROM tiers WHERE tier = 1;"
                           "DELETE FROM hour_sums; INSERT INTO meta(key, value) SELECT "
                           "'hour_sums_below', end_ns FROM tiers WHERE tier = 2",
                           NULL, NULL, NULL),
              SQLITE_OK);
    cw_store_close(w);
    ASSERT_OK(cw_store_open(path, o, &w, &d));
    ASSERT_TRUE(w->w->sums_low[0] != INT64_MIN && w->w->sums_low[1] != INT64_MIN);
    int batches = 0;
    int64_t bk = end0;
    uint64_t rng = test_rng_state; /* (the runs after draw as they did without these batches) */
    while (w->w->sums_low[0] != INT64_MIN || w->w->sums_low[1] != INT64_MIN) {
        ASSERT_TRUE(batches < 1000);
        write_batch(w, bk, false);
        bk += S;
        batches++;
    }
    test_rng_state = rng;
    char *v = NULL;
    ASSERT_OK(cw_store_meta_get(w, "minute_sums_below", &v, &d));
    ASSERT_TRUE(v == NULL);
    ASSERT_OK(cw_store_meta_get(w, "hour_sums_below", &v, &d));
    ASSERT_TRUE(v == NULL);
    ASSERT_OK(cw_store_open_readonly(path, &n, &d));
    sums_eq(n, 1, INT64_MIN);
    sums_eq(n, 2, INT64_MIN);
    printf("%s: the minute and hour sums of its minutes and hours written again in %d batches\n",
           name, batches);
    ASSERT_TRUE(batches > 5);
    cw_store_close(n);
    cw_store_close(w);
}

/* Every row of minute_sums of the finished database dir/name damaged: a
 * keys fill that meets one drops itself and the list is read from every
 * cell, then that handle's fills read the minutes' cells; every answer
 * is still the reference handle's. */
static void damaged_sums(const char *name, const cw_store_opts_t *o)
{
    char path[400];
    cw_store_t *w, *c, *n;
    cw_diag_t d = {{0}};
    snprintf(path, sizeof path, "%s/%s", dir, name);
    ASSERT_OK(cw_store_open(path, o, &w, &d));
    ASSERT_EQ(sqlite3_exec(w->db, "UPDATE minute_sums SET data = x'05'", NULL, NULL, NULL),
              SQLITE_OK);
    ASSERT_TRUE(sqlite3_changes(w->db) > 10);
    cw_store_close(w);
    ASSERT_OK(cw_store_open_readonly(path, &c, &d));
    ASSERT_OK(cw_store_open_readonly(path, &n, &d));
    n->test.read_cache_off = true;
    for (int i = 0; i < 6; i++) {
        int64_t from = end0 - HOUR - (int64_t)(i * 7 * MIN) + (int64_t)(i * 13 * S);
        report_eq(c, n, from, end0);
    }
    printf("%s, its minutes' sums damaged: %" PRIu64 " found, %" PRIu64
           " ranked reports keyed from the cache after, %" PRIu64 " minutes read from sums\n",
           name, c->test.keys_sums_damaged, c->test.keys_served, c->test.keys_minute_sums);
    ASSERT_EQ(c->test.keys_sums_damaged, 1);
    ASSERT_EQ(c->test.keys_minute_sums, 0);
    ASSERT_TRUE(c->test.keys_served > 10);
    cw_store_close(c);
    cw_store_close(n);
}

/* A database keeping every row at dir/name (into path[400]), for the
 * small cases below. */
static cw_store_t *small_db(const char *name, char *path)
{
    cw_store_t *w;
    cw_diag_t d = {{0}};
    cw_store_opts_t keep = {{0, 0, 0}, 0};
    snprintf(path, 400, "%s/%s", dir, name);
    ASSERT_OK(cw_store_open(path, &keep, &w, &d));
    return w;
}

/* The small cases' batch of second bk; the first one has their frame,
 * their two stacks (0 "Heap", 1 "Stack") and process 1, named name. */
static cw_batch_t *small_batch(int64_t bk, bool first, const char *name)
{
    static const uint32_t fr[] = {1};
    cw_batch_t *b;
    ASSERT_OK(cw_batch_create(bk, S, &b));
    if (first) {
        ASSERT_OK(cw_batch_add_frame(b, 1, "app!main"));
        ASSERT_OK(cw_batch_add_stack(b, 0, fr, 1, "Heap"));
        ASSERT_OK(cw_batch_add_stack(b, 1, fr, 1, "Stack"));
        ASSERT_OK(cw_batch_add_proc(b, 1, 1001, bk, CW_TS_NEVER, name, NULL));
    }
    return b;
}

/* ---- a process whose sums are all closed -------------------------------------------
 *
 * The report cache leaves closed sums out, so a process whose sums are
 * all closed is not in the cached entry at all. It must still be listed as
 * the rows list it: here a process started while tracked (no rundown)
 * commits from two stacks, frees everything, then has an event that
 * commits nothing (a free of nothing) in the window: active with nothing
 * outstanding, its peak (0 bytes) at the window's start. */
static void closed_proc(void)
{
    char path[400];
    cw_store_t *w = small_db("closed.db", path), *c, *n;
    cw_diag_t d = {{0}};
    int64_t base = INT64_C(470011) * HOUR;
    for (int64_t k = 0; k < 60; k++) {
        int64_t bk = base + k * S;
        cw_batch_t *b = small_batch(bk, k == 0, "closed.exe");
        if (k == 0) ASSERT_OK(cw_batch_add_proc(b, 2, 1002, bk, CW_TS_NEVER, "busy.exe", NULL));
        cw_row_activity_t a1 = {1, 1, 0, 0, bk}, a2 = {2, 1, 4096, 4096, bk + 5};
        uint32_t st = (uint32_t)(k % 10);
        if (k == 10 || k == 11) { /* process 1: two stacks committed, then freed */
            ASSERT_OK(cw_batch_add_commit(b, &(cw_row_commit_t){1, st, bk, 8192, 1}));
            a1 = (cw_row_activity_t){1, 1, 8192, 8192, bk + 5};
        } else if (k == 20 || k == 21) {
            ASSERT_OK(
                cw_batch_add_release(b, &(cw_row_release_t){1, st, bk - 10 * S, 8192, 1, true}));
            a1 = (cw_row_activity_t){1, 1, -8192, 0, bk};
        }
        if (k == 10 || k == 11 || k == 20 || k == 21 || k == 40)
            ASSERT_OK(cw_batch_add_activity(b, &a1));
        ASSERT_OK(cw_batch_add_commit(b, &(cw_row_commit_t){2, 0, bk, 4096, 1}));
        ASSERT_OK(cw_batch_add_activity(b, &a2));
        ASSERT_OK(cw_store_write(w, b, &d));
        cw_batch_free(b);
    }
    ASSERT_OK(cw_store_open_readonly(path, &c, &d));
    ASSERT_OK(cw_store_open_readonly(path, &n, &d));
    n->test.read_cache_off = true;
    for (int i = 0; i < 3; i++) { /* the entry made, then brought forward */
        cw_report_t *x, *y;
        int64_t from = base + (30 + i) * S, to = base + 50 * S;
        ASSERT_OK(cw_store_report(c, from, to, false, &x, &d));
        ASSERT_OK(cw_store_report(n, from, to, false, &y, &d));
        reports_same(x, y, from, to);
        ASSERT_EQ(x->nprocs, 2);
        const cw_proc_report_t *p = x->procs[0].id == 1 ? &x->procs[0] : &x->procs[1];
        ASSERT_EQ(p->id, 1);
        ASSERT_U64_EQ(p->events, 1);
        ASSERT_U64_EQ(p->peak_bytes, 0);
        ASSERT_EQ(p->peak_ns, from);
        ASSERT_EQ(p->nstacks, 0);
        cw_report_free(x);
        cw_report_free(y);
    }
    /* Process 1's two sums were left out (and process 2's stack 1 never
     * existed): nothing of process 1 is cached. */
    ASSERT_TRUE(cw__store_report_cache_closed(c) >= 2);
    cw_store_close(n);
    cw_store_close(c);
    cw_store_close(w);
}

/* ---- settled processes in the keys cache -------------------------------------------
 *
 * A busy machine's short processes: every batch a few start, commit and
 * exit a few seconds later, most releasing everything (settled once they
 * exited: left out of the keys cache's entries), one in four leaving a
 * piece (outstanding in every later window: never left out); a group of
 * folded instances per hour of starts gains members (commit and release
 * in one second) all hour, its exit moving on with each. The dashboard's
 * polled windows (the last minute, hour and two hours) and random ones,
 * ranked, on a handle with its caches (c) and one that settles at every
 * bucket's start of an afresh fill (f), against a handle with its caches
 * off (report_eq). */
typedef struct short_proc {
    uint32_t id, stack;
    int64_t start, exit; /* the buckets it starts and exits in */
    uint64_t bytes;
    bool keep; /* exits with its piece outstanding */
} short_proc_t;

static void settled_procs(void)
{
    char path[400];
    cw_store_t *w = small_db("settled.db", path), *c, *f, *g, *m, *n;
    cw_diag_t d = {{0}};
    int64_t base = INT64_C(470011) * HOUR + 17 * S, bk = base;
    uint32_t next = 2, group = 0;
    int64_t group_hour = INT64_MIN, group_exit = CW_TS_NEVER;
    short_proc_t live[256];
    uint32_t nlive = 0, nshort = 0, nmembers = 0;
    int64_t fixed = 0;
    int late = 0;
    ASSERT_OK(cw_store_open_readonly(path, &c, &d));
    ASSERT_OK(cw_store_open_readonly(path, &f, &d));
    ASSERT_OK(cw_store_open_readonly(path, &g, &d));
    ASSERT_OK(cw_store_open_readonly(path, &m, &d));
    m->test.read_cache_rows = 64;
    ASSERT_OK(cw_store_open_readonly(path, &n, &d));
    n->test.read_cache_off = true;
    f->test.keys_settle_over = 1;
    /* g settles at every bucket's start of an afresh fill and leaves no
     * copy below its windows (a copy's x would be the entries' lowest,
     * so nothing after it would be settled). */
    g->test.keys_settle_over = 1;
    g->test.keys_no_snap = true;
    for (int i = 0; i < 560; i++) {
        cw_batch_t *b = small_batch(bk, i == 0, "long.exe");
        /* process 1 lives throughout, committing now and then */
        if (i % 3 == 0) {
            ASSERT_OK(cw_batch_add_commit(b, &(cw_row_commit_t){1, 1, bk, 4096, 1}));
            ASSERT_OK(cw_batch_add_activity(b, &(cw_row_activity_t){1, 1, 4096, 4096, bk + 1}));
        }
        /* the short ones that exit now */
        for (uint32_t j = 0; j < nlive;) {
            short_proc_t *x = &live[j];
            if (x->exit != bk) {
                j++;
                continue;
            }
            char name[32];
            snprintf(name, sizeof name, "short%u", x->id % 7);
            if (!x->keep) {
                ASSERT_OK(cw_batch_add_release(
                    b, &(cw_row_release_t){x->id, x->stack, x->start, x->bytes, 1, true}));
                ASSERT_OK(cw_batch_add_activity(
                    b, &(cw_row_activity_t){x->id, 1, -(int64_t)x->bytes, 0, bk}));
            }
            ASSERT_OK(cw_batch_add_proc(b, x->id, 5000 + x->id, x->start, bk + S / 3, name, NULL));
            live[j] = live[--nlive];
        }
        /* three start, living 1 - 4 s (a jump of the clock ends them at
         * the next batch) */
        for (int k = 0; k < 3 && nlive < CW_ARRAY_LEN(live); k++) {
            short_proc_t x = {next++,
                              (uint32_t)rnd(2),
                              bk,
                              bk + (int64_t)(1 + rnd(4)) * S,
                              4096 * (1 + rnd(8)),
                              rnd(4) == 0};
            char name[32];
            snprintf(name, sizeof name, "short%u", x.id % 7);
            ASSERT_OK(cw_batch_add_proc(b, x.id, 5000 + x.id, bk, CW_TS_NEVER, name, NULL));
            ASSERT_OK(cw_batch_add_commit(b, &(cw_row_commit_t){x.id, x.stack, bk, x.bytes, 1}));
            ASSERT_OK(cw_batch_add_activity(
                b, &(cw_row_activity_t){x.id, 1, (int64_t)x.bytes, (int64_t)x.bytes, bk + 2}));
            live[nlive++] = x;
            nshort++;
        }
        /* a member of this hour's group: committed and freed in its second */
        if (cw_floor_to(bk, HOUR) != group_hour) {
            group = next++;
            group_hour = cw_floor_to(bk, HOUR);
        }
        if ((rnd(2) && i != 121 && i != 122) || i == 120 || i == 123) {
            group_exit = bk + S / 2;
            ASSERT_OK(cw_batch_add_proc(b, group, 0, group_hour + S, group_exit, "sh", NULL));
            ASSERT_OK(cw_batch_add_folded(
                b, &(cw_row_folded_t){group, 9000 + (uint32_t)i, bk, group_exit, 8192}));
            ASSERT_OK(cw_batch_add_commit(b, &(cw_row_commit_t){group, 0, bk, 8192, 1}));
            ASSERT_OK(cw_batch_add_release(b, &(cw_row_release_t){group, 0, bk, 8192, 1, true}));
            ASSERT_OK(cw_batch_add_activity(b, &(cw_row_activity_t){group, 2, 0, 8192, bk + 3}));
            nmembers++;
        }
        ASSERT_OK(cw_store_write(w, b, &d));
        cw_batch_free(b);
        int64_t end = bk + S;
        if (i == 121) fixed = end;
        /* the next batch: a second on, or a jump; the short ones due
         * before it exit in it */
        uint64_t k = rnd(100);
        bk += k < 75 ? S : k < 98 ? S * (int64_t)(1 + rnd(40)) : MIN * (int64_t)(1 + rnd(30));
        /* Batches 120 - 123 a second apart, 10 minutes into an hour: the
         * group of batch 120's member gains one in batch 123, after g's
         * first window from `fixed` (its exit moves past it). */
        if (i == 119) bk = cw_floor_to(bk, HOUR) + HOUR + 10 * MIN;
        if (i >= 120 && i <= 122) bk = end;
        /* and hours at once, if the clock has not yet gone that far,
         * so g's late window below comes */
        if (i == 420 && bk + S - fixed <= 5 * HOUR / 2) bk = fixed + 5 * HOUR / 2;
        for (uint32_t j = 0; j < nlive; j++)
            if (live[j].exit < bk) live[j].exit = bk;
        bool late_now = i > 122 && end - fixed > 5 * HOUR / 2 && !late;
        if (i % 16 && i != 122 && !late_now) continue;
        static const int64_t spans[] = {MIN, HOUR, 2 * HOUR};
        for (int q = 0; q < 3; q++) {
            report_eq(c, n, end - spans[q], end);
            if (q) report_eq(f, n, end - spans[q], end);
        }
        /* m's entries hold 64 processes, and its first window comes
         * late: more ended in its two hours, so its fill is not tried
         * (keys_fit), and the cells answer. */
        if (i >= 300) report_eq(m, n, end - 2 * HOUR, end);
        /* On g, a window from a time in a group's hour of starts, just
         * after its latest member's exit (batch 120's; none in batches
         * 121 and 122, one in 123), to
         * now; none for hours, then
         * the same window from that time: its start's entry is still
         * there, its end's is made afresh, more than
         * KEYS_CACHE_MAX_GAP above it. A group left out as settled at
         * the first (before its last member) would be left out of one
         * and not the other. */
        if (i == 122 || late_now) report_eq(g, n, fixed, end);
        late += late_now;
        int64_t a = some_time(base - 10 * MIN, end), z = some_time(a + 1, end + MIN);
        if (z > a) report_eq(rnd(2) ? c : f, n, a, z);
    }
    printf("settled: %u short processes (%u members of groups), %" PRIu64 " and %" PRIu64
           " left out of keys cache entries as settled, %" PRIu64
           " times by an afresh fill; %" PRIu64 " and %" PRIu64 " ranked reports keyed from it\n",
           nshort, nmembers, c->test.keys_settled, f->test.keys_settled, f->test.keys_settle_fills,
           c->test.keys_served, f->test.keys_served);
    ASSERT_TRUE(c->test.keys_settled > nshort / 2 && f->test.keys_settle_fills > 0);
    ASSERT_TRUE(c->test.keys_served > 100 && f->test.keys_served > 100);
    ASSERT_TRUE(late == 1 && g->test.keys_served >= 2);
    /* ... and after the first count, the exits since the last start
     * said so (keys_fit). */
    printf("  m: %" PRIu64 " windows too big for the keys cache, %" PRIu64 " counted\n",
           m->test.keys_too_many, m->test.keys_fit_counts);
    ASSERT_TRUE(m->test.keys_too_many > 2 && m->test.keys_fit_counts < m->test.keys_too_many);
    cw_store_close(m);
    cw_store_close(n);
    cw_store_close(g);
    cw_store_close(f);
    cw_store_close(c);
    cw_store_close(w);
}

/* ---- the raw tail after a burst ---------------------------------------------------
 *
 * A burst of processes fills the raw tail (a window from before it, not
 * aligned to minutes; commits, releases, activity); a later window, after
 * it, trims the burst's rows:
 * the room they took goes back (cw_reserve_fit), and the answers stay
 * those of the rows. Before, the arrays kept the burst's capacity for as
 * long as the handle was used (docs/RELIABILITY.md, "Soak"). */
#define BURST_PROCS 300
#define BURST_SECS 5

static void burst_tail(void)
{
    char path[400];
    cw_store_t *w = small_db("burst.db", path), *c, *n;
    cw_diag_t d = {{0}};
    int64_t base = INT64_C(470011) * HOUR;
    for (int64_t k = 0; k < 40; k++) {
        int64_t bk = base + k * S;
        cw_batch_t *b = small_batch(bk, k == 0, "steady.exe");
        if (k < BURST_SECS) /* short-lived processes, each a second */
            for (uint32_t i = 0; i < BURST_PROCS; i++) {
                uint32_t id = 2 + (uint32_t)k * BURST_PROCS + i;
                ASSERT_OK(cw_batch_add_proc(b, id, 2000 + id, bk, bk + S / 2, "burst.exe", NULL));
                for (uint32_t st = 0; st < 2; st++) { /* committed and freed: closed sums */
                    ASSERT_OK(cw_batch_add_commit(b, &(cw_row_commit_t){id, st, bk, 4096, 1}));
                    ASSERT_OK(cw_batch_add_release(b, &(cw_row_release_t){id, st, bk, 4096, 1, 1}));
                }
                ASSERT_OK(
                    cw_batch_add_activity(b, &(cw_row_activity_t){id, 4, 0, 8192, bk + S / 4}));
            }
        ASSERT_OK(cw_batch_add_commit(b, &(cw_row_commit_t){1, 0, bk, 4096, 1}));
        ASSERT_OK(cw_batch_add_activity(b, &(cw_row_activity_t){1, 1, 4096, 4096, bk + 5}));
        ASSERT_OK(cw_store_write(w, b, &d));
        cw_batch_free(b);
    }
    ASSERT_OK(cw_store_open_readonly(path, &c, &d));
    ASSERT_OK(cw_store_open_readonly(path, &n, &d));
    n->test.read_cache_off = true;
    /* Room for the burst's rows, and a trim at half of it. */
    c->test.read_cache_rows = BURST_SECS * BURST_PROCS * 5 * 3 / 2;
    int64_t before = cw_mem_get(CW_MEM_STORE_CACHES);
    report_eq(c, n, base + S / 2, base + 40 * S);
    size_t rows_burst = cw__store_raw_tail_rows(c);
    /* The keys cache keeps the burst's processes until retention prunes
     * them (store_report_keys.c): not counted here. */
    int64_t held_burst =
        cw_mem_get(CW_MEM_STORE_CACHES) - before - (int64_t)cw__keys_cache_bytes(c);
    ASSERT_TRUE(rows_burst >= BURST_SECS * BURST_PROCS * 5 - 5 * BURST_PROCS);
    /* Windows after the burst: its rows are trimmed, their room given
     * back; so is the sums' room once 8 reports in a row used less than
     * half of it (ROOM_FIT_AFTER: each window's full report uses it). */
    for (int64_t k = 20; k < 30; k++)
        report_eq(c, n, base + k * S + S / 2, base + 40 * S);
    size_t rows_after = cw__store_raw_tail_rows(c);
    int64_t held_after =
        cw_mem_get(CW_MEM_STORE_CACHES) - before - (int64_t)cw__keys_cache_bytes(c);
    printf("burst: the raw tail held %zu rows in %" PRId64 " bytes, then %zu rows in %" PRId64
           " bytes\n",
           rows_burst, held_burst, rows_after, held_after);
    ASSERT_TRUE(rows_after > 0 && rows_after < 100);
    ASSERT_TRUE(held_burst > 100 * 1024);
    ASSERT_TRUE(held_after < held_burst / 4);
    /* A keys cache too small for the burst's processes: the ranked
     * reports are read from the cells, and still agree. */
    cw_store_t *k;
    ASSERT_OK(cw_store_open_readonly(path, &k, &d));
    k->test.read_cache_rows = 100;
    for (int64_t x = 0; x < 25; x += 6)
        report_eq(k, n, base + x * S + S / 2, base + 40 * S);
    ASSERT_TRUE(k->test.keys_served == 0 && c->test.keys_served > 0);
    /* The burst's seconds have more cells than such a tail holds rows:
     * counted, not read. */
    ASSERT_TRUE(k->test.tails_counted_out > 0);
    cw_store_close(k);
    cw_store_close(n);
    cw_store_close(c);
    ASSERT_EQ(cw_mem_get(CW_MEM_STORE_CACHES), before);
    cw_store_close(w);
}

/* ---- a damaged cell ---------------------------------------------------------------
 *
 * A cell that is not one fails the report with an error naming its
 * process, whichever way it is read: a raw second's into the raw tail or
 * by a segment, a minute's by a segment. A segment adds each row to the
 * sums as it reads it, so it finds a cell cut short after adding the
 * rows before the cut; once the cell is mended, the caching handle agrees
 * with one that caches nothing: no half-read cell stayed behind in its
 * caches. report_fails' what: how the message begins (which read met
 * the cell). */
static void report_fails(cw_store_t *h, int64_t from, int64_t to, const char *what)
{
    cw_report_t *r = NULL;
    cw_diag_t d = {{0}};
    uint32_t total;
    ASSERT_EQ(cw_store_report(h, from, to, false, &r, &d), CW_EDB);
    ASSERT_TRUE(r == NULL && strstr(d.msg, "a cell of instance 2 is not readable"));
    ASSERT_TRUE(strncmp(d.msg, what, strlen(what)) == 0);
    memset(&d, 0, sizeof d);
    ASSERT_EQ(cw_store_report_top(h, from, to, CW_RANK_IMPACTING, 2, false, &r, &total, &d),
              CW_EDB);
    ASSERT_TRUE(r == NULL && strstr(d.msg, "a cell of instance 2 is not readable"));
}

static void damaged_cells(void)
{
    char path[400];
    cw_store_t *w = small_db("damaged.db", path), *c, *n;
    cw_diag_t d = {{0}};
    int64_t base = INT64_C(470011) * HOUR, end = base + 150 * S;
    for (int64_t k = 0; k < 150; k++) {
        int64_t bk = base + k * S;
        cw_batch_t *b = small_batch(bk, k == 0, "steady.exe");
        if (k == 0) ASSERT_OK(cw_batch_add_proc(b, 2, 1002, bk, CW_TS_NEVER, "other.exe", NULL));
        for (uint32_t p = 1; p <= 2; p++) {
            uint64_t bytes = 4096 * p;
            ASSERT_OK(cw_batch_add_commit(b, &(cw_row_commit_t){p, p - 1, bk, bytes, 1}));
            bool rel = k % 3 == 2; /* the commit of 2 s before freed */
            if (rel)
                ASSERT_OK(cw_batch_add_release(
                    b, &(cw_row_release_t){p, p - 1, bk - 2 * S, bytes, 1, 1}));
            ASSERT_OK(cw_batch_add_activity(b, &(cw_row_activity_t){p, rel ? 2 : 1,
                                                                    rel ? 0 : (int64_t)bytes,
                                                                    (int64_t)bytes, bk + 5}));
        }
        ASSERT_OK(cw_store_write(w, b, &d));
        cw_batch_free(b);
    }
    ASSERT_OK(cw_store_open_readonly(path, &c, &d));
    ASSERT_OK(cw_store_open_readonly(path, &n, &d));
    n->test.read_cache_off = true;
    /* A raw second's cell, then a minute's, of process 2, and windows
     * whose figures need it (from inside the raw seconds: the raw tail,
     * unaligned; from the data's start or the minute: a segment). */
    static const struct {
        int tier;
        int64_t at, from[2]; /* ms after base */
        const char *cached;  /* which read meets it with the caches on */
    } cells[] = {{0, 140, {125500, 0}, "reading the newest rows"},
                 {1, 60, {60000, 60000}, "querying window figures"}};
    for (size_t i = 0; i < CW_ARRAY_LEN(cells); i++) {
        char sql[400], where[160];
        snprintf(where, sizeof where,
                 "WHERE tier = %d AND bucket = %" PRId64 " AND proc = 2 AND layer = 0",
                 cells[i].tier, base + cells[i].at * S);
        sqlite3_stmt *st;
        snprintf(sql, sizeof sql, "SELECT hex(data) FROM cells %s", where);
        ASSERT_EQ(sqlite3_prepare_v2(w->db, sql, -1, &st, NULL), SQLITE_OK);
        ASSERT_EQ(sqlite3_step(st), SQLITE_ROW); /* it is there */
        char *hex = cw_strdup((const char *)sqlite3_column_text(st, 0));
        sqlite3_finalize(st);
        /* Its last byte cut: its last row is not whole, the rows before
         * it are. */
        snprintf(sql, sizeof sql, "UPDATE cells SET data = substr(data, 1, length(data) - 1) %s",
                 where);
        ASSERT_EQ(sqlite3_exec(w->db, sql, NULL, NULL, NULL), SQLITE_OK);
        ASSERT_EQ(sqlite3_changes(w->db), 1);
        for (int j = 0; j < 2; j++) {
            int64_t from = base + cells[i].from[j] * (S / 1000);
            report_fails(c, from, end, cells[i].cached);
            report_fails(n, from, end, "querying window figures");
        }
        snprintf(sql, sizeof sql, "UPDATE cells SET data = x'%s' %s", hex, where);
        ASSERT_EQ(sqlite3_exec(w->db, sql, NULL, NULL, NULL), SQLITE_OK);
        free(hex);
        for (int64_t from = base; from < end; from += 17 * S + S / 3) {
            cw_report_t *x, *y;
            ASSERT_OK(cw_store_report(c, from, end, false, &x, &d));
            ASSERT_OK(cw_store_report(n, from, end, false, &y, &d));
            ASSERT_EQ(y->nprocs, 2);
            reports_same(x, y, from, end);
            cw_report_free(x);
            cw_report_free(y);
        }
    }
    printf("damaged cells: a raw second's and a minute's refused with their process named\n");
    cw_store_close(n);
    cw_store_close(c);
    cw_store_close(w);
}

/* ---- shared handles (store_pool.c) ------------------------------------------------ */

#define NPQ 6      /* queries per round */
#define NREADER 4  /* threads sharing the pool */
#define POOL_MAX 2 /* fewer handles than threads: they wait and take turns */

typedef struct pool_query {
    bool series;
    int64_t from, to;
    cw_series_query_t q;
    cw_report_t *rep; /* the uncached handle's answers */
    cw_series_t *ser;
} pool_query_t;

static pool_query_t pq[NPQ];
static cw_store_pool_t *pool;

typedef struct reader {
    int k;
    uint32_t checks;
    cw_thread_t *t;
} reader_t;

/* Each reader asks every query three times, each time on whatever handle
 * the pool gives it, and compares with the uncached answer. */
static void reader_main(void *arg)
{
    reader_t *rd = arg;
    cw_diag_t d = {{0}};
    for (int it = 0; it < 3 * NPQ; it++) {
        pool_query_t *x = &pq[(it + rd->k) % NPQ];
        cw_store_t *s;
        ASSERT_OK(cw_store_pool_get(pool, &s, &d));
        if (x->series) {
            cw_series_t *y;
            ASSERT_OK(cw_store_series(s, &x->q, &y, &d));
            series_same(y, x->ser);
            cw_series_free(y);
        } else {
            cw_report_t *y;
            ASSERT_OK(cw_store_report(s, x->from, x->to, false, &y, &d));
            reports_same(y, x->rep, x->from, x->to);
            cw_report_free(y);
        }
        cw_store_pool_put(pool, s);
        rd->checks++;
    }
}

/* Handles shared by threads through a pool (as the HTTP workers do): the
 * history is written between rounds; in each round NREADER threads share
 * POOL_MAX handles, each handle moving between threads with its caches,
 * and every answer must be the uncached handle's. */
static void pooled(void)
{
    char path[400];
    cw_store_t *w, *n, *s1, *s2;
    cw_diag_t d = {{0}};
    snprintf(path, sizeof path, "%s/pool.db", dir);
    npc = nproc = nended = 0;
    t0 = INT64_C(470011) * HOUR;
    cw_store_opts_t o = {{HOUR, 2 * HOUR, 0}, 0};
    ASSERT_OK(cw_store_open(path, &o, &w, &d));
    int64_t bk = t0 + 17 * S;
    write_batch(w, bk, true);
    ASSERT_OK(cw_store_open_readonly(path, &n, &d));
    n->test.read_cache_off = true;
    ASSERT_EQ(cw_store_pool_create(path, 0, &pool, &d), CW_EINVAL);
    ASSERT_OK(cw_store_pool_create(path, POOL_MAX, &pool, &d));
    /* The most recently returned handle comes back first. */
    ASSERT_OK(cw_store_pool_get(pool, &s1, &d));
    ASSERT_OK(cw_store_pool_get(pool, &s2, &d));
    ASSERT_TRUE(s1 != s2);
    cw_store_pool_put(pool, s1);
    cw_store_pool_put(pool, s2);
    ASSERT_OK(cw_store_pool_get(pool, &s1, &d));
    ASSERT_TRUE(s1 == s2);
    cw_store_pool_put(pool, s1);
    uint32_t checks = 0;
    for (int round = 0; round < 14; round++) {
        for (int b = 0; b < 30; b++) {
            uint64_t k = rnd(100);
            bk += k < 80 ? S : k < 98 ? S * (int64_t)(1 + rnd(40)) : MIN * (int64_t)(1 + rnd(30));
            write_batch(w, bk, false);
        }
        if (round == 7) retag(w);
        pq[0] = (pool_query_t){.from = end0 - HOUR + (int64_t)rnd(S), .to = end0};
        pq[1] = (pool_query_t){.from = INT64_MIN, .to = INT64_MAX};
        pq[2] = (pool_query_t){.from = some_time(t0, end0), .to = end0 + MIN};
        pq[3] = (pool_query_t){.series = true, .q = {0, t0 - HOUR, end0, MIN}};
        pq[4] = (pool_query_t){.series = true, .q = {1, t0, end0, 30 * S}};
        pq[5] = (pool_query_t){.series = true, .q = {1 + (uint32_t)rnd(nproc), t0, end0, HOUR}};
        for (int i = 0; i < NPQ; i++) {
            if (pq[i].series)
                ASSERT_OK(cw_store_series(n, &pq[i].q, &pq[i].ser, &d));
            else
                ASSERT_OK(cw_store_report(n, pq[i].from, pq[i].to, false, &pq[i].rep, &d));
        }
        reader_t rd[NREADER];
        for (int i = 0; i < NREADER; i++) {
            rd[i] = (reader_t){.k = i};
            ASSERT_OK(cw_thread_start(&rd[i].t, reader_main, &rd[i]));
        }
        for (int i = 0; i < NREADER; i++) {
            cw_thread_join(rd[i].t);
            checks += rd[i].checks;
        }
        ASSERT_TRUE(cw_store_pool_open_count(pool) <= POOL_MAX);
        for (int i = 0; i < NPQ; i++) {
            cw_report_free(pq[i].rep);
            cw_series_free(pq[i].ser);
        }
    }
    /* The handles' caches were used. */
    ASSERT_OK(cw_store_pool_get(pool, &s1, &d));
    int tier;
    int64_t h;
    ASSERT_TRUE(cw__store_report_cache_key(s1, &tier, &h));
    ASSERT_TRUE(cw__store_series_cache_rows(s1) > 0);
    cw_store_pool_put(pool, s1);
    ASSERT_EQ(checks, 14 * NREADER * 3 * NPQ);
    printf("pool: %u answers from %u shared handles, %d threads\n", checks,
           cw_store_pool_open_count(pool), NREADER);
    /* Idle handles give their room back (tidy): nothing before they have
     * been idle long enough; then the top one drops its caches and the
     * others are closed; the answers stay those of the rows. */
    cw_store_drop_read_caches(n); /* store_caches: the pool's handles only */
    int64_t held = cw_mem_get(CW_MEM_STORE_CACHES);
    uint32_t open = cw_store_pool_open_count(pool);
    printf("pool: %u handles hold %lld bytes of caches\n", open, (long long)held);
    ASSERT_TRUE(held > 0 && open >= 2);
    ASSERT_EQ(cw_store_pool_tidy(pool, cw_plat_mono_ns(), CW_STORE_POOL_IDLE_NS), 0);
    ASSERT_EQ(cw_mem_get(CW_MEM_STORE_CACHES), held);
    ASSERT_EQ(cw_store_pool_open_count(pool), open);
    int64_t later = cw_plat_mono_ns() + CW_STORE_POOL_IDLE_NS;
    ASSERT_EQ(cw_store_pool_tidy(pool, later, CW_STORE_POOL_IDLE_NS), open - 1);
    ASSERT_EQ(cw_mem_get(CW_MEM_STORE_CACHES), 0);
    ASSERT_EQ(cw_store_pool_open_count(pool), 1);
    ASSERT_OK(cw_store_pool_get(pool, &s1, &d));
    ASSERT_TRUE(!cw__store_report_cache_key(s1, &tier, &h));
    ASSERT_EQ(cw__store_series_cache_rows(s1), 0);
    for (int i = 0; i < NPQ; i++)
        if (!pq[i].series) report_eq(s1, n, pq[i].from, pq[i].to);
    cw_store_pool_put(pool, s1);
    cw_store_pool_destroy(pool);
    cw_store_close(n);
    cw_store_close(w);
}

/* The report's accumulator (store_report_sums.c) on its own: rows of
 * processes with few stacks (kept sorted) and with many (past
 * SUMS_SMALL, through a map of their own), asked in a cell's ascending
 * order or in any order, and activity rows: every (proc, stack) once,
 * processes and their rows sorted, every sum and each process's peak as
 * applying its rows one by one gives. */
#define ACC_NP 12
#define ACC_NS 90
static void acc_rows(void)
{
    for (int round = 0; round < 20; round++) {
        static int64_t ref[ACC_NP][ACC_NS];
        static bool seen[ACC_NP][ACC_NS];
        int64_t out0[ACC_NP], level[ACC_NP], peak[ACC_NP], peak_ns[ACC_NP], events[ACC_NP];
        bool active[ACC_NP] = {false};
        memset(ref, 0, sizeof ref);
        memset(seen, 0, sizeof seen);
        for (int i = 0; i < ACC_NP; i++) {
            out0[i] = (int64_t)rnd(1000) - 100;
            level[i] = out0[i];
            peak[i] = out0[i] > 0 ? out0[i] : 0;
            peak_ns[i] = -1;
            events[i] = 0;
        }
        cw__sums_acc_t a;
        ASSERT_EQ(cw__sums_acc_init(&a, NULL), 0);
        for (int cell = 0; cell < 400; cell++) {
            int pi = (int)rnd(ACC_NP);
            uint32_t proc = 1000 - 37 * (uint32_t)pi; /* not in id order */
            /* few stacks for the even processes, many for the odd */
            int ns = pi % 2 ? ACC_NS : 6, nrow = 1 + (int)rnd(8);
            int st = (int)rnd((uint64_t)ns);
            bool any_order = rnd(4) == 0;
            for (int r = 0; r < nrow; r++) {
                int k = any_order ? (int)rnd((uint64_t)ns) : st;
                if (!any_order && (st += 1 + (int)rnd(4)) >= ns) st = ns - 1;
                sums_t *y = cw__sums_acc_row(&a, proc, 3 * (uint32_t)k + 1);
                ASSERT_TRUE(y != NULL);
                ASSERT_EQ(y->proc, proc);
                ASSERT_EQ(y->stack, 3 * (uint32_t)k + 1);
                int64_t v = (int64_t)rnd(1 << 20);
                y->v[0] += v;
                y->v[12] += 1;
                ref[pi][k] += v;
                seen[pi][k] = true;
            }
            if (rnd(3) == 0) { /* an activity row, as the old pass applied it */
                int64_t ev = 1 + (int64_t)rnd(9), delta = (int64_t)rnd(200) - 100;
                int64_t rel = (int64_t)rnd(300) - 50, ns_at = cell * 10 + 3;
                ASSERT_EQ(cw__sums_add_activity(&a, proc, ev, delta, rel, ns_at), 0);
                if (level[pi] + rel > peak[pi]) {
                    peak[pi] = level[pi] + rel;
                    peak_ns[pi] = ns_at;
                }
                level[pi] += delta;
                events[pi] += ev;
                active[pi] = true;
            }
        }
        ASSERT_EQ(cw__sums_acc_done(&a, 0, NULL), 0);
        uint32_t rows = 0, procs = 0;
        for (int i = 0; i < ACC_NP; i++) {
            bool any = active[i];
            for (int k = 0; k < ACC_NS; k++) {
                rows += seen[i][k];
                any |= seen[i][k];
            }
            procs += any;
        }
        ASSERT_EQ(a.n, rows);
        ASSERT_EQ(a.np, procs);
        for (uint32_t i = 0; i < a.np; i++) {
            const cw__sums_proc_t *p = &a.p[i];
            int pi = (int)(1000 - p->proc) / 37;
            ASSERT_TRUE(i == 0 || a.p[i - 1].proc < p->proc);
            uint32_t n = 0;
            for (int k = 0; k < ACC_NS; k++)
                n += seen[pi][k];
            ASSERT_EQ(p->n, n);
            for (uint32_t j = 0; j < p->n; j++) {
                const sums_t *y = &p->v[j];
                ASSERT_TRUE(j == 0 || p->v[j - 1].stack < y->stack);
                ASSERT_EQ(y->proc, p->proc);
                ASSERT_EQ(y->v[0], ref[pi][(y->stack - 1) / 3]);
                ASSERT_TRUE(y->v[12] > 0);
            }
            /* The peak as load_figs() makes it from out0 and best. */
            ASSERT_EQ(p->active, active[pi]);
            int64_t pk = out0[pi] > 0 ? out0[pi] : 0, pk_ns = -1;
            if (p->active && out0[pi] + p->best > pk) {
                pk = out0[pi] + p->best;
                pk_ns = p->best_ns;
            }
            ASSERT_EQ(pk, peak[pi]);
            ASSERT_EQ(pk_ns, peak_ns[pi]);
            ASSERT_EQ(p->events, events[pi]);
        }
        cw__sums_acc_free(&a);
    }
}

int main(void)
{
    test_rng_seed(12, 0x5ca7e);
    snprintf(dir, sizeof dir, "%s/cw_test_store_cache_XXXXXX", cw_test_tmpdir());
    ASSERT_TRUE(cw_test_mkdtemp(dir) != NULL);
    acc_rows();
    cw_store_opts_t keep = {{0, 0, 0}, 0};
    run("keep.db", &keep, 5 * HOUR, false, 0, 0, false);
    backfill("keep.db", &keep);
    damaged_sums("keep.db", &keep);
    /* Caches too small for some windows: those are read from SQL, the
     * others from the caches; lists by transient bytes from every
     * process's cells. */
    run("small.db", &keep, 3 * HOUR, false, 300, 0, true);
    cw_store_opts_t ret = {{HOUR, 2 * HOUR, 3 * HOUR}, 0};
    run("retention.db", &ret, 7 * HOUR, true, 0, 0, false);
    backfill("retention.db", &ret);
    cw_store_opts_t hour = {{0, 0, 2 * HOUR}, 0};
    /* Only the hour tier folds: cached sums outlive the raw tier's rows.
     * Every read of cells in key order, the others' passed over, none
     * looked up by key (as the reads of many processes are made). */
    run("hour.db", &hour, 6 * HOUR, true, 0, 1, false);
    /* The size cap folds through the same retention (shortest 1 h raw). */
    cw_store_opts_t cap = {{0, 0, 0}, 64 * 1024};
    run("cap.db", &cap, 3 * HOUR, true, 0, 0, false);
    closed_proc();
    settled_procs();
    burst_tail();
    damaged_cells();
    pooled();
    printf("%u filtered ranked reports compared\n", checks_match);
    ASSERT_TRUE(checks_match > 100);
    printf("%u reports, %u ranked reports and %u series compared\n", checks_report, checks_top,
           checks_series);
    ASSERT_TRUE(checks_report > 100 && checks_series > 100 && checks_top > 1000);
    /* Some minute rows of commits on both sides of an unaligned t0 were
     * taken from raw seconds. */
    ASSERT_TRUE(minute_fixes > 0);
    printf("%" PRIu64 " ranked reports took the sums before t0 from a whole hour's cells, %" PRIu64
           " of them the open hour's\n",
           before_whole, before_whole_open);
    ASSERT_TRUE(before_whole_open > 10 && before_whole - before_whole_open > 10);
    ASSERT_TRUE(keys_down > 20);
    printf("%" PRIu64 " keys cache minute segments read as the open hour's cells, %" PRIu64
           " as the hour tier's\n",
           keys_open, keys_hours);
    printf("%" PRIu64 " processes' cached keys checked against the cells', %" PRIu64
           " afresh fills left a copy at their coarse end\n",
           keys_checked, keys_snaps);
    ASSERT_TRUE(keys_open > 10 && keys_hours > 10 && keys_checked > 100 && keys_snaps > 10);
    printf("%" PRIu64 " minutes and %" PRIu64 " seconds read from their bucket sums by the keys "
           "cache, %" PRIu64 " rows of bucket sums checked against their cells\n",
           keys_minute_sums, keys_second_sums, sums_checked);
    printf("%" PRIu64 " hours read from their bucket sums by the keys cache\n", keys_hour_sums);
    ASSERT_TRUE(keys_minute_sums > 100 && keys_second_sums > 100 && sums_checked > 100);
    ASSERT_TRUE(keys_hour_sums > 100);
    ASSERT_TRUE(prunes > 10);
    ASSERT_TRUE(hour_splits > 20 && hour_fixes > 0);
    ASSERT_EQ(cw_test_rmtree(dir), 0);
    TEST_DONE();
}
