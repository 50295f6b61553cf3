/* store_report_sums.h - what store_report.c (a window's figures) takes from
 * store_report_sums.c (the sums they come from and the read caches): how
 * a tier answers a window, the segments of tiers a window is read from,
 * and the per-(proc, stack) sums. Not a public header (service/store/
 * only). */
#ifndef COMMITWATCH_STORE_REPORT_SUMS_H
#define COMMITWATCH_STORE_REPORT_SUMS_H

#include "commitwatch/keymap.h"
#include "store/cells.h"
#include "store/store_internal.h"

/* How well tier k answers a window. */
typedef struct pick {
    int k;
    int64_t t0, t1;
    int quality; /* 0 exact, 1 widened to buckets, 2 clipped to what is kept */
} pick_t;
static inline int64_t ceil_to(int64_t t, int64_t w)
{
    int64_t f = cw_floor_to(t, w);
    return f == t ? t : f + w;
}

/* Which tier's rows answer which stretch of time. Every tier holds the
 * whole history at its granularity (rows from its horizon on, a BEFORE
 * baseline for what came before), so the sums can be assembled from
 * segments of different tiers, as long as each row's comparisons with t0
 * and t1 come out as they would with exact times:
 *  - before t0, only "before t0" matters: the coarsest tiers serve up to
 *    their last bucket boundary <= t0 (a staircase hour -> minute ->
 *    second), so a long history costs its hours, not its seconds;
 *  - from t0 on, `a` is compared with t0 and t1, so a tier serves only if
 *    both are aligned to it; from its end on the finer tiers take over.
 * With the row counts of a busy raw tier, this is what keeps a query from
 * reading a day of 1 s rows. */
typedef struct segment {
    int tier;
    int64_t lo, hi; /* [lo, hi) in bucket / f; lo INT64_MIN includes BEFORE */
    bool minus;     /* its sums are taken away (only the keys cache's fills) */
    uint8_t split;  /* its part in the hour split (CW__SPLIT_*), or 0 */
} segment_t;

/* + the hour split's three (cw__report_hour_split) */
#define MAX_SEGMENTS (2 * CW_TIERS + 3)

/* The 13 sums of one (proc, stack) a window [t0, t1)'s figures come from
 * (load_figs, store_report.c, names them by these numbers, "columns"
 * 2 - 14): 2, 3 commit bytes and events before t0; 4, 5 in the window;
 * 6 bytes released before t0; of releases of commits made in the window:
 * 7, 8 bytes and pieces released in it, 9 pieces released after it, 10
 * closed; of releases of commits made before t0: 11, 12 bytes and pieces
 * released in the window, 13 pieces released after it, 14 closed. A
 * commit after the window cannot matter (it is released after it too); a
 * release after it does, up to now. */
typedef struct sums {
    uint32_t proc, stack;
    int64_t v[13];
} sums_t;

/* Adding to an array sorted by process, whose elements (`size` bytes)
 * begin with their process (a uint32_t): the sums' processes, a ranked
 * report's keys, a keys cache entry's sums. Cells come in the primary
 * key's order, a bucket's processes rising, so each element is found
 * from where the previous one was (a gallop, then a binary search); a
 * process not above the one before starts the next run. A process not
 * found is new (a rising run names each process once): it waits after
 * the sorted ones, zeroed but for its process, and is taken in when the
 * run ends: appended when all are newer than the last sorted one (nearly
 * always, since processes are numbered as they start), else merged from
 * the back (O(n) for such a run; none in 30 minutes of the busy mix, 16
 * of 200,000 processes added on 10,000 live ones). Any order gives the
 * same elements, only slower. The array itself is the caller's (items:
 * the address of its pointer, as for cw_reserve; *cap, *n its room and
 * sorted count); r holds the run, zeroed to start. */
typedef struct cw__proc_run {
    uint32_t m; /* elements waiting after the *n sorted ones */
    uint32_t cur, prev;
    uint32_t max; /* elements at most (0: no bound) */
    bool going;   /* a run has started */
} cw__proc_run_t;

/* The element of proc (*added when new); NULL with *err CW_ENOMEM, or
 * CW_ERANGE when it would pass r->max. */
void *cw__proc_row(cw__proc_run_t *r, void *items, size_t *cap, uint32_t *n, size_t size,
                   uint32_t proc, bool *added, int *err);
/* The first index from i on whose process is at least proc, in the
 * sorted v[0, n) (every one before i below it): a gallop from i, then a
 * binary search, so a run's processes walk v once. */
uint32_t cw__proc_seek(const void *v, size_t size, uint32_t n, uint32_t i, uint32_t proc);
/* Takes every waiting element in (*n grows): then the array is sorted,
 * and the next element asked starts a run. 0 or CW_ENOMEM. */
int cw__proc_settle(cw__proc_run_t *r, void *items, uint32_t *n, size_t size);

/* One process's rows while they are added up: sorted by stack while
 * they are few (a cell's rows come in stack order, so the next one is
 * looked for from where the last one was found); past SUMS_SMALL, found
 * through a map of their own and sorted when done. */
typedef struct cw__sums_proc {
    uint32_t proc;
    uint32_t n, hint; /* rows; where the last row asked was */
    uint32_t cap;
    sums_t *v;
    uint32_t *ids;    /* v[i].stack, a cache line for a process's few rows (in v's block) */
    cw_keymap_t *map; /* stack -> index into v; NULL while v is sorted */
    /* Its activity rows in the window (cw__sums_add_activity), in time
     * order: their events, the sum of their deltas (cum), and the best of
     * each row's deltas before it plus its relpeak (best, first reached
     * at best_ns): its peak is outstanding(t0) plus best, if higher than
     * outstanding(t0). active: it had a row. */
    int64_t events, cum, best, best_ns;
    bool active;
} cw__sums_proc_t;

/* Sums being added up, one row per (proc, stack), added to in place, so
 * the rows are as many as the pairs, not as the stored rows they come
 * from (a busy hour of the raw tier has a hundred times more rows than
 * pairs). Rows are kept per process: the cells of a bucket come in
 * process order, so a report walks each process's few rows in turn
 * instead of probing one map of every pair at random (10,000 live
 * processes, a minute segment of 100,000 cells into 89,000 pairs: half
 * its time was that map's cache and page misses). p: sorted by process
 * (np of them, run's waiting ones after them: cw__proc_row); last: the
 * process asked last; n: rows in all; rows: the decoding buffer. */
typedef struct cw__sums_acc {
    cw__sums_proc_t *p;
    uint32_t np, last, n;
    size_t pcap;
    cw__proc_run_t run;
    cw_store_t *room; /* the handle whose room p is (cw__sums_acc_init), or NULL */
    /* The report cache's fills (sums before t0, no activity): when a
     * process's cell starts and there are more than prune_over sums, the
     * closed ones are left out (added to *pruned, prunes counted) and
     * prune_over becomes twice the sums kept plus prune_slack. 0: never. */
    uint32_t prune_over, prune_slack;
    uint64_t *pruned, prunes;
    bool by_proc; /* a process's rows all go to one, of stack 0 */
    /* The rows of a bucket in [sub_lo, sub_hi) are also taken away from
     * the sums before t0 (a ranked report's before_whole,
     * store_report_keys.c); an empty range (0, 0): none. */
    int64_t sub_lo, sub_hi;
} cw__sums_acc_t;

/* An empty a. Its processes' array is the room that s (when not NULL,
 * and its read caches are on) keeps between reports: 30 minutes of the
 * busy mix name 71,564 processes, 5.7 MB whose pages a report would
 * otherwise fault in afresh. cw__sums_acc_free gives it back (the larger
 * of two, when two sums were added up at once). 0 or CW_ENOMEM. */
int cw__sums_acc_init(cw__sums_acc_t *a, cw_store_t *s);
void cw__sums_acc_free(cw__sums_acc_t *a);
/* Frees one process's rows once read (n = 0), so that the next
 * process's report entries reuse their memory instead of touching fresh
 * pages (10,000 live processes: 80,000 rows, 10 MB). */
void cw__sums_proc_free(cw__sums_proc_t *p);
/* The row of (proc, stack), zeroed when new; NULL on ENOMEM. */
sums_t *cw__sums_acc_row(cw__sums_acc_t *a, uint32_t proc, uint32_t stack);
/* Adds an activity row of proc (rows of a process come in time order);
 * 0 or CW_ENOMEM. */
int cw__sums_add_activity(cw__sums_acc_t *a, uint32_t proc, int64_t events, int64_t delta,
                          int64_t relpeak, int64_t relpeak_ns);
/* After adding up: on err (returned; ENOMEM named in d) a is freed;
 * else a->p is sorted by process and each a->p[i].v by stack, for the
 * caller to read and free (cw__sums_acc_free); 0. */
int cw__sums_acc_done(cw__sums_acc_t *a, int err, cw_diag_t *d);
/* Adds the rows of one cell (data, size: its BLOB; bucket, proc: its key)
 * to a, as sums for the window [t0, t1): commit rows of a bucket before
 * t1, release rows of a commit before t1. 0, CW_ENOMEM or CW_EDB (a cell
 * that is not one, d says which). */
int cw__sums_add_cell(cw__sums_acc_t *a, const void *data, size_t size, int64_t bucket,
                      uint32_t proc, int64_t t0, int64_t t1, cw_diag_t *d);
/* What a release row whose commit bucket `a` is in a split range is
 * counted as (cw__sums_add_cell_split): the commit time to classify it
 * with, or CW__A_SKIP to leave it out. */
#define CW__A_SKIP INT64_MAX
typedef int64_t (*cw__resolve_a_fn)(void *ctx, uint32_t proc, uint32_t stack, int64_t a);

/* As cw__sums_add_cell, but the release rows whose commit bucket `a` is
 * in [alo, ahi) are classified with the `a` resolve gives, and left out
 * where it gives CW__A_SKIP (or there is no resolve); *skipped (when not
 * NULL) is set if one was. With left_out, the cell adds only the rows
 * that would be left out, each with its own `a` (no commit row, no
 * other release row): a split cell's rows are then added once, whether
 * from its own cell or from finer ones. A cell of a bucket in
 * [a->sub_lo, a->sub_hi) also takes the rows it adds away from the sums
 * before t0 (columns 2, 3, 6 and 14). */
int cw__sums_add_cell_split(cw__sums_acc_t *a, const void *data, size_t size, int64_t bucket,
                            uint32_t proc, int64_t t0, int64_t t1, int64_t alo, int64_t ahi,
                            bool left_out, cw__resolve_a_fn resolve, void *ctx, bool *skipped,
                            cw_diag_t *d);

/* The window p starting where the rows before it are cheapest to read
 * (see the function); the segments of tiers that window is read from, in
 * time order, into seg (MAX_SEGMENTS at most; *nback lie before t0);
 * returns how many. t has CW__TIERS_READ rows (db.h): a segment of the
 * minute tier that the open hour's cells answer is read from them. */
pick_t cw__report_start_floor(const cw__tier_t *t, const pick_t *p);
int cw__report_plan(const cw__tier_t *t, const pick_t *p, segment_t *seg, int *nback);

/* The hour split. A window whose t0 is on a minute but not on an hour
 * (the dashboard's ranges: "the last 24 h" from a whole minute) is read
 * from the minute tier for its whole length by cw__report_plan: an hour
 * cell's release rows say only in which hour their commit was, and for
 * the hour h0 that holds t0 that does not tell before t0 from after it.
 * 10,000 live processes over a day: 14.4 M minute cells, where the hour
 * tier holds 240,000. The split reads the hours all the same:
 *  - SIDES, the hour tier's [h0, h1) (h1 = h0 + 1 h): per (process,
 *    stack), the commit bytes and events of h0, read for this alone;
 *  - NEAR, the minute tier's [t0, h1), summed as ever, its commit rows
 *    taken away from those of h0: a stack whose commits of h0 are all in
 *    [t0, h1) committed only from t0 on, one with none there only
 *    before t0 (cw__hsides_resolve);
 *  - FAR, the hour tier's [h1, hx) (hx: the hour tier's end, or t1's
 *    hour when t1 is inside the data), and the open hour's cells after
 *    it where they answer (t1 at or past their end): their release rows
 *    of commits in h0 are put on their side of t0 by their stack's
 *    sides; those of a stack that committed on both sides (or of which
 *    h0 holds no commit) are left out, the cell's (hour, process) noted,
 *    and taken from that hour's minute cells instead, each with its
 *    commit's minute (cw__hsides_fix);
 *  - then the minute tier from hx on, as before.
 * Only where the hour tier holds h0 and the window has a FAR part: a
 * whole hour of the hour tier, or the open hour's cells. Returns the new
 * count of segments in seg (n when nothing changed). */
enum { CW__SPLIT_NONE, CW__SPLIT_SIDES, CW__SPLIT_NEAR, CW__SPLIT_FAR };
int cw__report_hour_split(const cw__tier_t *t, const pick_t *p, segment_t *seg, int n, int nback);

/* Rows left out of a split's coarse cells, to be read from finer ones:
 * (bucket f, process) of each coarse cell that left one out. */
typedef struct cw__fix {
    int64_t f;
    uint32_t proc;
} cw__fix_t;

typedef struct cw__fixes {
    cw__fix_t *v;
    size_t n, cap;
} cw__fixes_t;

/* 0 or CW_ENOMEM. */
int cw__fix_add(cw__fixes_t *x, int64_t f, uint32_t proc);

/* What the fixes read: for each noted (f, proc), the cells of `tier` in
 * [f, f + span), every `step`, of that process; of their release rows
 * only those whose commit bucket is in [alo, ahi) and that resolve (with
 * ctx) leaves out, each classified with its own commit bucket. */
typedef struct cw__fix_read {
    int tier;
    int64_t span, step, alo, ahi;
    cw__resolve_a_fn resolve;
    void *ctx;
} cw__fix_read_t;

/* The statements that read the cells of tier ?1 of the processes in the
 * JSON array ?4: at the buckets ?2, ?2 + ?5, ... below ?3, each by key
 * (SQL_Q_CELLS_AT), or with bucket in [?2, ?3) in key order
 * (SQL_Q_CELLS_OF). Both give bucket, proc, data, events, delta,
 * relpeak, peak_off. */
int cw__report_stmt_at(cw_store_t *s, sqlite3_stmt **st, cw_diag_t *d);
int cw__report_stmt_of(cw_store_t *s, sqlite3_stmt **st, cw_diag_t *d);

/* Cell lookups one read may take before it is made in key order instead
 * (store_report_keys.c says why). */
#define CW__SEEKS_MAX 16384
static inline uint64_t cw__seeks_max(const cw_store_t *s)
{
    return s->test.seeks_max ? s->test.seeks_max : CW__SEEKS_MAX;
}

/* Runs the fixes fx (sorted here), adding to a; a bucket's fixes are
 * read by key, or in key order when they are many. Leaves ?4 of both
 * statements above bound to the last bucket's processes. 0, CW_ENOMEM
 * (named in d) or CW_EDB. */
int cw__fixes_run(cw_store_t *s, const cw__fix_read_t *r, const pick_t *p, cw__fixes_t *fx,
                  cw__sums_acc_t *a, cw_diag_t *d);

/* The hour split's sides, while a window's segments are read (one
 * report, the thread that holds the handle): per (process, stack), the
 * commit bytes and events of h0 (hb, he) and of [t0, h1) (nb, ne); the
 * fixes its FAR cells noted. */
typedef struct cw__hside {
    int64_t hb, he, nb, ne;
} cw__hside_t;

typedef struct cw__hsides {
    bool on; /* the window is read through the split */
    int64_t h0, h1, t0;
    cw_keymap_t map; /* (proc, stack) -> v */
    cw__hside_t *v;
    size_t cap;
    cw__cell_rows_t rows;
    cw__fixes_t fx;
} cw__hsides_t;

/* For the window p read from seg[0, nseg): x->on when one of them is
 * a part of the hour split (and only then its map, so a report that
 * does not split allocates nothing). 0 or CW_ENOMEM; free with
 * cw__hsides_free() either way. */
int cw__hsides_init(cw__hsides_t *x, const cw__tier_t *t, const pick_t *p, const segment_t *seg,
                    int nseg);
void cw__hsides_free(cw__hsides_t *x);
/* Adds one cell of a segment whose split part is `split` to a (sums for
 * the window p) and to the sides, as the split says: SIDES only noted,
 * NEAR summed and noted, FAR summed with its rows of commits in h0
 * resolved (a fix noted for a row left out), any other summed as
 * cw__sums_add_cell(). 0, CW_ENOMEM or CW_EDB (named in d). */
int cw__hsides_add_cell(cw__hsides_t *x, int split, cw__sums_acc_t *a, const void *data,
                        size_t size, int64_t bucket, uint32_t proc, const pick_t *p, cw_diag_t *d);
/* After every segment: the rows the FAR cells left out, from the minute
 * cells of each noted (hour, process) (none when !x->on). 0, CW_ENOMEM or
 * CW_EDB. */
int cw__hsides_fix(cw_store_t *s, const cw__tier_t *t, cw__hsides_t *x, const pick_t *p,
                   cw__sums_acc_t *a, cw_diag_t *d);

/* The rows of [x, y) as segments whose sums are totals (every row before
 * y): raw seconds to the next minute, the minute tier's whole minutes,
 * raw seconds after them, into seg (3 at most, *n). false when the raw
 * tier does not hold them. */
bool cw__report_delta_segments(const cw__tier_t *t, int64_t x, int64_t y, segment_t *seg, int *n);

/* What one stored row adds to its sums (sums_t) for window [t0, t1): a
 * commit row of bucket `bucket` (< t1), a release row released at f,
 * committed at a (< t1). */
static inline void cw__sums_add_commit(sums_t *y, int64_t bucket, int64_t bytes, int64_t events,
                                       int64_t t0)
{
    bool before = bucket < t0;
    y->v[before ? 0 : 2] += bytes;
    y->v[before ? 1 : 3] += events;
}

static inline void cw__sums_add_release(sums_t *y, int64_t f, int64_t a, int64_t bytes,
                                        int64_t pieces, int64_t closed, int64_t t0, int64_t t1)
{
    bool in = f >= t0 && f < t1, after = f >= t1;
    if (f < t0) y->v[4] += bytes;
    if (a >= t0) {
        y->v[5] += in ? bytes : 0;
        y->v[6] += in ? pieces : 0;
        y->v[7] += after ? pieces : 0;
        y->v[8] += closed;
    } else {
        y->v[9] += in ? bytes : 0;
        y->v[10] += in ? pieces : 0;
        y->v[11] += after ? pieces : 0;
        y->v[12] += closed;
    }
}

/* Runs every segment and sums its rows per (proc, stack) into *out
 * (initialised here; on 0, sorted as cw__sums_acc_done() says, for the
 * caller to free), from the report cache and the raw tail where they
 * hold the rows; with them, per process, the activity rows of the
 * forward segments (seg[nback, nseg)) in [p->t0, p->t1), read from the
 * same cells. by_proc: one row per process (the sums of its stacks, as
 * stack 0; what a ranking by a figure needs). 0, CW_ENOMEM or CW_EDB. */
int cw__report_load_sums(cw_store_t *s, const cw__tier_t *t, const segment_t *seg, int nseg,
                         int nback, const pick_t *p, bool by_proc, cw__sums_acc_t *out,
                         cw_diag_t *d);

/* The sums of one (proc, stack) over every row before a window's t0 but
 * the BEFORE rows of its first tier: commit bytes and events, released
 * bytes, closed pieces (sums_t's columns 2, 3, 6, 14), as the
 * handle's report cache keeps them (the open ones only). */
typedef struct cw__before_sums {
    uint32_t proc, stack;
    int64_t cb, ce, rb, rc;
} cw__before_sums_t;

/* The report cache's sums before p->t0 for the backward segments
 * seg[0, nback) (filled or brought up to date, as cw__report_load_sums()
 * uses them), into *v, *n (borrowed: valid until the next query on s); *v
 * NULL when the cache does not serve this window, or did not hold the
 * sums of a recent ranked report (then every backward segment is to be
 * read). A caller that has *v reads seg[0]'s BEFORE rows and no other
 * backward row, and calls cw__report_before_done() when it no longer uses
 * *v. 0, CW_ENOMEM or CW_EDB. */
int cw__report_before(cw_store_t *s, const cw__tier_t *t, const segment_t *seg, int nback,
                      const pick_t *p, const cw__before_sums_t **v, uint32_t *n, cw_diag_t *d);
/* Frees an entry too big to keep (REPORT_CACHE_MAX_ROWS); the next 1,024
 * cw__report_before() calls then serve nothing. */
void cw__report_before_done(cw_store_t *s);

/* Process ids in ascending order, and the same as a JSON array (for SQL's
 * json_each). Borrowed from the caller. */
typedef struct cw__proc_set {
    const uint32_t *id;
    uint32_t n;
    const char *json;
    const cw__before_sums_t *bv; /* cached sums before t0 (cw__report_before), or NULL */
    uint32_t bn;
    struct cw__proc_keys *keys; /* the keys of the processes of id, index for index, or NULL */
} cw__proc_set_t;

/* v[0, n) as a JSON array ("[1,2,3]"), for cw__proc_set_t's json and
 * SQL's json_each; the caller frees it. NULL on ENOMEM. */
char *cw__ids_json(const uint32_t *v, uint32_t n);
/* The index of id in v[0, n) (ascending), or UINT32_MAX. */
uint32_t cw__ids_find(const uint32_t *v, uint32_t n, uint32_t id);

/* The same sums as cw__report_load_sums() for the processes of only
 * alone, from their cells decoded in C (store_report_keys.c): no other
 * process's cell is decoded; of only's cached sums before t0 (bv, from
 * cw__report_before), its processes' are added. A segment of few buckets
 * for the processes asked is read bucket by bucket, each process's cell
 * found by its key; a longer one is read in key order, the other
 * processes' cells passed over. The raw tail is not used. With only->keys
 * (the chosen processes' keys, ascending, their peak started at the
 * window's start), the activity of the forward segments is applied to
 * their peak as cw__report_load_keys() applies it. 0, CW_ENOMEM or
 * CW_EDB. */
int cw__report_load_sums_of(cw_store_t *s, const cw__tier_t *t, const segment_t *seg, int nseg,
                            const pick_t *p, const cw__proc_set_t *only, cw__sums_acc_t *out,
                            cw_diag_t *d);

/* Per process, what ranks it in a window (cw_store_report_top), from the
 * cells' columns alone (no stack decoded): the sums of bytes and
 * released, and its activity as store_report.c's stage 2 applies it. */
struct cw__proc_keys {
    uint32_t proc;
    bool active;      /* an activity row in the window */
    int64_t cb0, rb0; /* before t0: commit bytes, released bytes */
    int64_t cbw, rbw; /* from t0 to t1 */
    int64_t level;    /* outstanding as the activity rows are applied */
    int64_t events, peak, peak_ns;
};
typedef struct cw__proc_keys cw__proc_keys_t;

/* cw__proc_keys_t over the cached sums bv (bn of them, cw__report_before;
 * NULL: none) and the segments (seg[0, nback) before t0; commits
 * before t1, releases with f before t1: what the bytes figures need;
 * activity of the forward segments, the peak starting at `at` from
 * outstanding at t0), by process in ascending order, into *out (*nout;
 * the handle's, borrowed until its next ranked report: not freed). One
 * pass over the cells in key order: no sort. 0, CW_ENOMEM or CW_EDB
 * (store_report_keys.c). */
int cw__report_load_keys(cw_store_t *s, const segment_t *seg, int nseg, int nback, const pick_t *p,
                         int64_t at, const cw__before_sums_t *bv, uint32_t bn,
                         cw__proc_keys_t **out, uint32_t *nout, cw_diag_t *d);

/* The same keys as cw__report_load_keys() for window p, of the processes
 * a report lists only (activity in the window, or something outstanding
 * at t0), but peak and peak_ns, which are left at outstanding at t0 and
 * `at` (the chosen processes' are applied by
 * cw__report_load_sums_of()): from the handle's per-process sums of the
 * rows before p->t0 and before the window's end (the keys cache), as
 * differences, and the BEFORE rows of their first tier. *served false
 * when the cache does not serve the window (caches off, too many
 * processes, ends whose staircases start in different tiers). *out is
 * the handle's, as cw__report_load_keys()'s. 0, CW_ENOMEM or CW_EDB
 * (store_report_keys.c). */
int cw__report_keys_cached(cw_store_t *s, const cw__tier_t *t, const pick_t *p, int64_t at,
                           cw__proc_keys_t **out, uint32_t *nout, bool *served, cw_diag_t *d);
/* Bytes of the handle's keys cache (its share of store_caches). */
size_t cw__keys_cache_bytes(const cw_store_t *s);

/* Publishes the bytes of this handle's report cache and raw tail as its
 * share of the store_caches component (memstat.h); closing: takes it back. */
void cw__report_caches_publish(cw_store_t *s, bool closing);

#endif
