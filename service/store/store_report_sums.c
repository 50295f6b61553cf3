/* store_report_sums.c - the sums a window's figures come from
 * (cw_store_report(), store_report.c): which tier's rows answer which
 * stretch of time (segments), the grouped query over one segment, and the
 * two read caches that spare a repeated window most of its rows: the
 * sums before t0 (the report cache) and the raw tier's newest rows (the
 * raw tail), with their share of the store_caches figure. Runs inside the
 * report's read transaction, on the thread that holds the handle; each
 * handle's caches are its own (freed by its release slot CW__REL_REPORT). */
#include <inttypes.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "commitwatch/memstat.h"
#include "store/cells.h"
#include "store/store_report_sums.h"

/* The cells of tier ?1 with bucket in [?2, ?3): their rows are decoded
 * in C (cells.c) and added to the sums of the window (cw__sums_add_cell).
 * The same rows through the views commits and releases, grouped by SQL,
 * cost 5 - 10 times as much (the decoding table-valued functions, then a
 * sort of the rows by (proc, stack)). */
static const char SQL_Q_CELLS[] = "SELECT bucket, proc, data FROM cells WHERE tier = ?1"
                                  " AND layer = cw_layer() AND bucket >= ?2 AND bucket < ?3";
/* The same with the cells' activity rows (events NULL: none), for the
 * segments of the window itself: each process's come in bucket order, so
 * its peak is found in the same pass (cw__sums_add_activity). */
static const char SQL_Q_CELLS_ACT[] =
    "SELECT bucket, proc, data, events, delta, relpeak, bucket + peak_off FROM cells"
    " WHERE tier = ?1 AND layer = cw_layer() AND bucket >= ?2 AND bucket < ?3";
/* The raw tier's cells of [?1, ?2), in time order (the raw tail below),
 * decoded in C as the segments' are. */
static const char SQL_Q_TAIL_CELLS[] =
    "SELECT bucket, proc, data, events, delta, relpeak, bucket + peak_off FROM cells"
    " WHERE tier = 0 AND layer = cw_layer() AND bucket >= ?1 AND bucket < ?2"
    " ORDER BY bucket, proc";
/* How many cells tail_extend would read: each gives at least one row. */
static const char SQL_Q_TAIL_COUNT[] =
    "SELECT count(*) FROM cells WHERE tier = 0 AND layer = cw_layer() AND bucket >= ?1"
    " AND bucket < ?2";

/* Rows of tier k exist for [lo, hi) (lo == INT64_MIN: with BEFORE). */
static bool tier_holds(const cw__tier_t *t, int k, int64_t lo, int64_t hi)
{
    if (t[k].start == INT64_MIN) return false;
    if (lo == INT64_MIN ? t[k].horizon > hi : t[k].horizon > lo) return false;
    return k == 0 || hi <= t[k].end; /* nothing is stored after tier 0's end */
}

static bool aligned(const cw__tier_t *t, int k, int64_t x)
{
    return cw_floor_to(x, t[k].width) == x || x >= t[0].end;
}

/* The window p as the segments read it. A window that starts at or
 * before the first raw bucket, nothing folded out of the raw tier, has no
 * event between the start of its hour and t0 (rundown, in BEFORE, aside),
 * so its figures are those of the window from that hour on: the hour
 * tier answers its whole hours, the minute tier the minutes after them,
 * and the raw tier only what is not rolled up yet (`analyze --db` on the
 * whole database reads its hours, not its seconds). Otherwise p. */
pick_t cw__report_start_floor(const cw__tier_t *t, const pick_t *p)
{
    pick_t q = *p;
    if (t[0].start != INT64_MIN && p->t0 <= t[0].start && t[0].horizon == INT64_MIN)
        q.t0 = cw_floor_to(p->t0, t[CW_TIERS - 1].width);
    return q;
}

/* Fills seg (time order); *nback = how many lie before t0. */
int cw__report_plan(const cw__tier_t *t, const pick_t *p, segment_t *seg, int *nback)
{
    int n = 0;
    int64_t cur = INT64_MIN;
    /* Before t0: coarsest first. */
    for (int k = CW_TIERS - 1; k >= 0 && cur != p->t0; k--) {
        int64_t b = cw_floor_to(p->t0, t[k].width);
        if (cur != INT64_MIN && b <= cur) continue;
        if (!tier_holds(t, k, cur, b)) continue;
        seg[n++] = (segment_t){.tier = k, .lo = cur, .hi = b};
        cur = b;
    }
    /* From t0 on: the coarsest tier aligned to the window, then finer
     * ones from where each coarser one ends. */
    int j = -1;
    for (int k = CW_TIERS - 1; k >= 0 && j < 0; k--)
        if (aligned(t, k, p->t0) && aligned(t, k, p->t1) &&
            tier_holds(t, k, p->t0, k ? (t[k].end > p->t0 ? t[k].end : p->t0) : INT64_MAX))
            j = k;
    if (cur != p->t0 || j < 0) {
        /* Cannot happen for a window pick_tier() accepted; be exact anyway
         * with the window's own tier alone. */
        n = 0;
        j = p->k;
        seg[n++] = (segment_t){.tier = j, .lo = INT64_MIN, .hi = p->t0};
    }
    *nback = n;
    for (int64_t lo = p->t0; j >= 0; j--) {
        int64_t hi = j ? t[j].end : INT64_MAX;
        if (hi <= lo) continue;
        seg[n++] = (segment_t){.tier = j, .lo = lo, .hi = hi};
        lo = hi;
    }
    /* The open hour's cells for its minutes (db.h, CW__TIER_OPEN): before
     * t0, where nothing but "before t0" matters; from t0 on, when their
     * release rows' `a`, floored to the hour, still compare with t0 and
     * t1 as the minutes' do (t0 on an hour, t1 at or past their end). */
    const cw__tier_t *o = &t[CW__TIER_OPEN];
    for (int i = 0; i < n && o->start != INT64_MIN; i++)
        if (seg[i].tier == 1 && seg[i].lo == o->start && seg[i].hi == o->end &&
            (i < *nback || (cw_floor_to(p->t0, o->width) == p->t0 && p->t1 >= o->end)))
            seg[i].tier = CW__TIER_OPEN;
    return n;
}

int cw__report_hour_split(const cw__tier_t *t, const pick_t *p, segment_t *seg, int n, int nback)
{
    const int64_t hw = t[2].width;
    const cw__tier_t *o = &t[CW__TIER_OPEN];
    int64_t h0 = cw_floor_to(p->t0, hw), h1 = h0 + hw;
    if (h0 == p->t0) return n;
    for (int i = nback; i < n; i++) {
        if (seg[i].tier != 1 || seg[i].lo != p->t0) continue;
        int64_t hi = seg[i].hi, hx = hi < t[2].end ? hi : t[2].end;
        if (p->t1 < t[0].end && p->t1 < hx) hx = p->t1;
        hx = cw_floor_to(hx, hw);
        if (hx < h1 || !tier_holds(t, 2, h0, hx)) return n;
        /* The open hour's cells after the hours, as cw__report_plan()
         * takes them from t0 on: t1 at or past their end. */
        bool hours = hx > h1, rest = hx < hi,
             open = rest && o->start == hx && o->end == hi && p->t1 >= o->end;
        int add = 1 + hours + rest;
        if ((!hours && !open) || n + add > MAX_SEGMENTS) return n;
        memmove(&seg[i + 1 + add], &seg[i + 1], (size_t)(n - i - 1) * sizeof *seg);
        seg[i] = (segment_t){.tier = 2, .lo = h0, .hi = h1, .split = CW__SPLIT_SIDES};
        seg[i + 1] = (segment_t){.tier = 1, .lo = p->t0, .hi = h1, .split = CW__SPLIT_NEAR};
        int j = i + 2;
        if (hours) seg[j++] = (segment_t){.tier = 2, .lo = h1, .hi = hx, .split = CW__SPLIT_FAR};
        if (open)
            seg[j] = (segment_t){.tier = CW__TIER_OPEN, .lo = hx, .hi = hi, .split = CW__SPLIT_FAR};
        else if (rest)
            seg[j] = (segment_t){.tier = 1, .lo = hx, .hi = hi};
        return n + add;
    }
    return n;
}

static int cmp_sums(const void *x, const void *y)
{
    const sums_t *a = x, *b = y;
    if (a->proc != b->proc) return a->proc < b->proc ? -1 : 1;
    return a->stack < b->stack ? -1 : a->stack > b->stack;
}

/* ---- arrays sorted by process (cw__proc_row) ---------------------------------- */

static inline uint32_t proc_at(const void *v, size_t size, uint32_t i)
{
    uint32_t p;
    memcpy(&p, (const char *)v + (size_t)i * size, sizeof p);
    return p;
}

uint32_t cw__proc_seek(const void *v, size_t size, uint32_t n, uint32_t i, uint32_t proc)
{
    uint32_t lo = i, hi = i, step = 1;
    while (hi < n && proc_at(v, size, hi) < proc) {
        lo = hi + 1;
        hi = n - hi > step ? hi + step : n;
        step *= 2;
    }
    while (lo < hi) {
        uint32_t mid = lo + (hi - lo) / 2;
        if (proc_at(v, size, mid) < proc)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

/* Puts the m elements that wait after v's n sorted ones (v[n, n + m),
 * sorted, none of their processes among the n) into the sorted array:
 * taken as they are when all are newer, else merged from the back
 * through a copy. 0 or CW_ENOMEM. */
static int proc_merge(void *v, size_t size, uint32_t n, uint32_t m)
{
    char *b = v;
    if (m == 0 || n == 0 || proc_at(b, size, n - 1) < proc_at(b, size, n)) return 0;
    char *add = malloc((size_t)m * size);
    if (!add) return CW_ENOMEM;
    memcpy(add, b + (size_t)n * size, (size_t)m * size);
    uint32_t i = n, j = m, o = n + m;
    while (j > 0 && i > 0) {
        bool old = proc_at(b, size, i - 1) > proc_at(add, size, j - 1);
        const char *from = old ? b + (size_t)--i * size : add + (size_t)--j * size;
        memcpy(b + (size_t)--o * size, from, size);
    }
    memcpy(b, add, (size_t)j * size);
    free(add);
    return 0;
}

int cw__proc_settle(cw__proc_run_t *r, void *items, uint32_t *n, size_t size)
{
    void *v;
    memcpy(&v, items, sizeof v);
    if (proc_merge(v, size, *n, r->m)) return CW_ENOMEM;
    *n += r->m;
    r->m = r->cur = 0;
    r->going = false;
    return 0;
}

void *cw__proc_row(cw__proc_run_t *r, void *items, size_t *cap, uint32_t *n, size_t size,
                   uint32_t proc, bool *added, int *err)
{
    char *v;
    *added = false;
    if (r->going && proc <= r->prev && (*err = cw__proc_settle(r, items, n, size))) return NULL;
    memcpy(&v, items, sizeof v);
    r->going = true;
    r->prev = proc;
    r->cur = cw__proc_seek(v, size, *n, r->cur, proc);
    if (r->cur < *n && proc_at(v, size, r->cur) == proc) return v + (size_t)r->cur * size;
    uint32_t at = *n + r->m;
    if (r->max && at >= r->max) {
        *err = CW_ERANGE;
        return NULL;
    }
    if ((size_t)at + 1 > *cap) {
        if (cw_reserve(items, cap, (size_t)at + 1, size)) {
            *err = CW_ENOMEM;
            return NULL;
        }
        memcpy(&v, items, sizeof v);
    }
    char *x = v + (size_t)at * size;
    memset(x, 0, size);
    memcpy(x, &proc, sizeof proc);
    r->m++;
    *added = true;
    return x;
}

/* ---- sums -------------------------------------------------------------------------- */

_Static_assert(offsetof(cw__sums_proc_t, proc) == 0, "proc_at reads the process first");

/* The handle's room for a sums' processes (cw__sums_acc_init), below. */
static int sums_room_take(cw__sums_acc_t *a, cw_store_t *s);
static void sums_room_give(cw__sums_acc_t *a);

int cw__sums_acc_init(cw__sums_acc_t *a, cw_store_t *s)
{
    memset(a, 0, sizeof *a);
    return s && !s->test.read_cache_off ? sums_room_take(a, s) : 0;
}

/* Frees p's own stack map, if it has one. */
static void proc_map_free(cw__sums_proc_t *p)
{
    if (p->map) cw_keymap_free(p->map);
    free(p->map);
    p->map = NULL;
}

void cw__sums_proc_free(cw__sums_proc_t *p)
{
    free(p->v); /* and p->ids, in its block */
    proc_map_free(p);
    p->v = NULL;
    p->ids = NULL;
    p->n = 0;
    p->cap = 0;
}

void cw__sums_acc_free(cw__sums_acc_t *a)
{
    for (uint32_t i = 0; i < a->np + a->run.m; i++)
        cw__sums_proc_free(&a->p[i]);
    sums_room_give(a);
    memset(a, 0, sizeof *a);
}

/* A process's rows stay sorted up to this many; a row is then found in
 * a few compares, and inserting one moves at most this many. */
#define SUMS_SMALL 32

static sums_t *proc_new_row(cw__sums_acc_t *a, cw__sums_proc_t *p, uint32_t at, uint32_t stack)
{
    if (p->n == p->cap) {
        /* Room for 1 row (by_proc: its only one), else 2, then twice as
         * many: most processes have a few stacks, and a report cache
         * fill holds rows of every instance its cells name (an hour
         * cell of 2 hours of the busy mix: about 140,000), so room for 8
         * would be 900 bytes an instance. The stack ids follow the rows
         * in the same block: one allocation. */
        if (p->cap > UINT32_MAX / 2) return NULL;
        size_t cap = p->cap ? 2 * (size_t)p->cap : a->by_proc ? 1 : 2;
        char *b = realloc(p->v, cap * (sizeof *p->v + sizeof *p->ids));
        if (!b) return NULL;
        memmove(b + cap * sizeof *p->v, b + p->cap * sizeof *p->v, p->n * sizeof *p->ids);
        p->v = (sums_t *)(void *)b;
        p->ids = (uint32_t *)(void *)(b + cap * sizeof *p->v);
        p->cap = (uint32_t)cap;
    }
    if (at < p->n) {
        memmove(&p->v[at + 1], &p->v[at], (p->n - at) * sizeof *p->v);
        memmove(&p->ids[at + 1], &p->ids[at], (p->n - at) * sizeof *p->ids);
    }
    p->ids[at] = stack;
    sums_t *y = &p->v[at];
    memset(y, 0, sizeof *y);
    y->proc = p->proc;
    y->stack = stack;
    p->n++;
    a->n++;
    return y;
}

/* proc_row() for a process with its own stack map, or one that is about
 * to need one. */
static sums_t *proc_row_mapped(cw__sums_acc_t *a, cw__sums_proc_t *p, uint32_t stack)
{
    int added = 0;
    if (!p->map) { /* many stacks: a map of its own from now on */
        if (!(p->map = calloc(1, sizeof *p->map))) return NULL;
        if (cw_keymap_init(p->map, 4 * SUMS_SMALL)) {
            free(p->map);
            p->map = NULL;
            return NULL;
        }
        for (uint32_t j = 0; j < p->n; j++)
            if (cw_keymap_get(p->map, p->ids[j], 0, &added) == UINT32_MAX) return NULL;
    }
    uint32_t i = cw_keymap_get(p->map, stack, 0, &added);
    if (i == UINT32_MAX) return NULL;
    return added ? proc_new_row(a, p, p->n, stack) : &p->v[i];
}

/* p's row of stack, new when it had none; NULL on ENOMEM. Inline: once a
 * row is decoded from a cell (10,000 live processes' whole-day report:
 * 1.25 M times). */
static inline sums_t *proc_row(cw__sums_acc_t *a, cw__sums_proc_t *p, uint32_t stack)
{
    if (p->map) return proc_row_mapped(a, p, stack);
    const uint32_t *ids = p->ids;
    uint32_t i = p->hint < p->n && ids[p->hint] <= stack ? p->hint : 0;
    while (i < p->n && ids[i] < stack)
        i++;
    p->hint = i;
    if (i < p->n && ids[i] == stack) return &p->v[i];
    if (p->n == SUMS_SMALL) return proc_row_mapped(a, p, stack);
    return proc_new_row(a, p, i, stack);
}

static int acc_prune_closed(cw__sums_acc_t *a, uint64_t *dropped);

/* proc's entry, new when it had none; NULL on ENOMEM. A cell's rows
 * are all of one process: the one asked last. Another process's cell
 * starts here, so a fill's closed sums are left out here (prune_over):
 * every sum holds whole rows, and which bucket a process is at does not
 * matter to a closed sum (the report cache, below: "Closed sums are not
 * kept"). */
static cw__sums_proc_t *acc_proc(cw__sums_acc_t *a, uint32_t proc)
{
    if (a->last < a->np + a->run.m && a->p[a->last].proc == proc) return &a->p[a->last];
    bool added;
    int err = 0;
    if (a->prune_over && a->n > a->prune_over) {
        if (acc_prune_closed(a, a->pruned)) return NULL;
        a->prune_over = 2 * a->n + a->prune_slack;
        a->prunes++;
    }
    cw__sums_proc_t *p =
        cw__proc_row(&a->run, &a->p, &a->pcap, &a->np, sizeof *a->p, proc, &added, &err);
    if (p) a->last = (uint32_t)(p - a->p);
    return p;
}

int cw__sums_add_activity(cw__sums_acc_t *a, uint32_t proc, int64_t events, int64_t delta,
                          int64_t relpeak, int64_t relpeak_ns)
{
    cw__sums_proc_t *p = acc_proc(a, proc);
    if (!p) return CW_ENOMEM;
    int64_t cand = p->cum + relpeak;
    if (!p->active || cand > p->best) { /* the first row that reaches it */
        p->best = cand;
        p->best_ns = relpeak_ns;
    }
    p->active = true;
    p->events += events;
    p->cum += delta;
    return 0;
}

/* The row of (proc, stack) for a cell's rows, all of one process: its
 * entry looked up once a cell (*pp), its rows by stack. */
static inline sums_t *cell_row(cw__sums_acc_t *a, cw__sums_proc_t **pp, uint32_t proc,
                               uint32_t stack)
{
    if (!*pp && !(*pp = acc_proc(a, proc))) return NULL;
    return proc_row(a, *pp, a->by_proc ? 0 : stack);
}

sums_t *cw__sums_acc_row(cw__sums_acc_t *a, uint32_t proc, uint32_t stack)
{
    cw__sums_proc_t *p = NULL;
    return cell_row(a, &p, proc, stack);
}

int cw__sums_add_cell_split(cw__sums_acc_t *a, const void *data, size_t size, int64_t bucket,
                            uint32_t proc, int64_t t0, int64_t t1, int64_t alo, int64_t ahi,
                            bool left_out, cw__resolve_a_fn resolve, void *ctx, bool *skipped,
                            cw_diag_t *d)
{
    /* Each row added as it is read (a cell that turns out not to be one
     * fails the report, and its accumulator with it). */
    cw__cell_reader_t c;
    bool sub = bucket >= a->sub_lo && bucket < a->sub_hi;
    bool commits = !left_out && bucket < t1;
    cw__sums_proc_t *pp = NULL; /* proc's entry, looked up at its first row */
    bool has_c;
    uint64_t bytes, events, nrel, pieces, closed;
    int rc = cw__cell_read_begin(&c, data, size, bucket);
    while (!rc && !(rc = cw__cell_read_entry(&c, &has_c, &bytes, &events, &nrel))) {
        if (has_c && commits) {
            sums_t *y = cell_row(a, &pp, proc, c.stack);
            if (!y) return CW_ENOMEM;
            cw__sums_add_commit(y, bucket, (int64_t)bytes, (int64_t)events, t0);
            if (sub) {
                y->v[0] -= (int64_t)bytes;
                y->v[1] -= (int64_t)events;
            }
        }
        for (uint64_t e = 0; e < nrel; e++) {
            int64_t at;
            if ((rc = cw__cell_read_release(&c, &at, &bytes, &pieces, &closed))) break;
            if (at >= t1) continue;
            if (at >= alo && at < ahi) {
                int64_t r = resolve ? resolve(ctx, proc, c.stack, at) : CW__A_SKIP;
                if (r == CW__A_SKIP && !left_out) {
                    if (skipped) *skipped = true;
                    continue;
                }
                if (r != CW__A_SKIP && left_out) continue;
                if (!left_out) at = r;
            } else if (left_out) {
                continue;
            }
            sums_t *y = cell_row(a, &pp, proc, c.stack);
            if (!y) return CW_ENOMEM;
            cw__sums_add_release(y, bucket, at, (int64_t)bytes, (int64_t)pieces, (int64_t)closed,
                                 t0, t1);
            if (sub) {
                y->v[4] -= (int64_t)bytes;
                y->v[12] -= (int64_t)closed;
            }
        }
    }
    if (rc < 0)
        return cw_diag_set(
            d, CW_EDB, "querying window figures: a cell of instance %" PRIu32 " is not readable",
            proc);
    return 0;
}

int cw__sums_add_cell(cw__sums_acc_t *a, const void *data, size_t size, int64_t bucket,
                      uint32_t proc, int64_t t0, int64_t t1, cw_diag_t *d)
{
    return cw__sums_add_cell_split(a, data, size, bucket, proc, t0, t1, 0, 0, false, NULL, NULL,
                                   NULL, d);
}

/* Asks the memory for proc's first rows of sums when it has them
 * already, without changing a (most of a whole-day report's time went to
 * waiting for them: each cell is another process's, its rows a block of
 * their own). */
static void acc_prefetch(const cw__sums_acc_t *a, uint32_t proc)
{
#if defined(__GNUC__)
    uint32_t n = a->np,
             i = cw__proc_seek(a->p, sizeof *a->p, n, a->run.cur < n ? a->run.cur : 0, proc);
    if (i < n && a->p[i].proc == proc && a->p[i].v) {
        const cw__sums_proc_t *x = &a->p[i];
        if (x->ids) __builtin_prefetch(x->ids);
        /* its rows, up to 16 cache lines (a live process has 9 or so) */
        size_t bytes = (size_t)x->n * sizeof *x->v;
        for (size_t o = 0; o < bytes && o < 16 * 64; o += 64)
            __builtin_prefetch((const char *)x->v + o);
    }
#else
    (void)a;
    (void)proc;
#endif
}

/* A cell read from SQL, added after the next one is read (run_segment). */
typedef struct held_cell {
    int64_t bucket;
    uint32_t proc;
    bool act; /* its activity counts: the columns below */
    int64_t events, delta, relpeak, relpeak_ns;
    unsigned char *data; /* a copy: SQLite's is gone at the next step */
    size_t n, cap;
} held_cell_t;

static int hold_cell(held_cell_t *h, sqlite3_stmt *st, bool act, const pick_t *p)
{
    h->bucket = sqlite3_column_int64(st, 0);
    h->proc = (uint32_t)sqlite3_column_int64(st, 1);
    h->n = (size_t)sqlite3_column_bytes(st, 2);
    if (CW_RESERVE(h->data, h->cap, h->n + 1)) return CW_ENOMEM;
    if (h->n) memcpy(h->data, sqlite3_column_blob(st, 2), h->n);
    h->act =
        act && h->bucket >= p->t0 && h->bucket < p->t1 && sqlite3_column_type(st, 3) != SQLITE_NULL;
    if (h->act) {
        h->events = sqlite3_column_int64(st, 3);
        h->delta = sqlite3_column_int64(st, 4);
        h->relpeak = sqlite3_column_int64(st, 5);
        h->relpeak_ns = sqlite3_column_int64(st, 6);
    }
    return 0;
}

/* Adds the cells of one segment, [lo, hi) of tier, as sums for the
 * window p, to a; with act (st is SQL_Q_CELLS_ACT's), their activity rows
 * in [t0, t1) too; a segment of the hour split (split, hs) as it says.
 * Each cell is added once the next one is read: its process's sums are
 * asked of the memory (acc_prefetch) before SQLite steps to the next,
 * and are there when they are added. */
static int run_segment(cw_store_t *s, sqlite3_stmt *st, int tier, const pick_t *p, int64_t lo,
                       int64_t hi, bool act, int split, cw__hsides_t *hs, cw__sums_acc_t *a,
                       cw_diag_t *d)
{
    int err = 0, rc;
    held_cell_t h = {0};
    bool held = false;
    sqlite3_bind_int(st, 1, tier);
    sqlite3_bind_int64(st, 2, lo);
    sqlite3_bind_int64(st, 3, hi);
    act &= split != CW__SPLIT_SIDES;
    do {
        rc = sqlite3_step(st);
        if (rc == SQLITE_ROW) acc_prefetch(a, (uint32_t)sqlite3_column_int64(st, 1));
        if (held) {
            err = split ? cw__hsides_add_cell(hs, split, a, h.data, h.n, h.bucket, h.proc, p, d)
                        : cw__sums_add_cell(a, h.data, h.n, h.bucket, h.proc, p->t0, p->t1, d);
            if (!err && h.act)
                err = cw__sums_add_activity(a, h.proc, h.events, h.delta, h.relpeak, h.relpeak_ns);
        }
        held = !err && rc == SQLITE_ROW;
        if (held) err = hold_cell(&h, st, act, p);
    } while (held && !err);
    free(h.data);
    if (!err && rc != SQLITE_DONE) err = cw__store_dberr(s, "querying window figures", d);
    sqlite3_reset(st);
    return err;
}

int cw__sums_acc_done(cw__sums_acc_t *a, int err, cw_diag_t *d)
{
    if (err) {
        if (err == CW_ENOMEM) cw_diag_set(d, err, "querying window figures: out of memory");
        cw__sums_acc_free(a);
        return err;
    }
    if (cw__proc_settle(&a->run, &a->p, &a->np, sizeof *a->p))
        return cw__sums_acc_done(a, CW_ENOMEM, d);
    for (uint32_t i = 0; i < a->np; i++) {
        cw__sums_proc_t *p = &a->p[i];
        if (p->map && p->n > 1) qsort(p->v, p->n, sizeof *p->v, cmp_sums);
        proc_map_free(p);
        p->ids = NULL; /* (in v's block) no more rows are added */
    }
    return 0;
}

/* ---- the handle's cache of the sums before t0 -----------------------------------
 *
 * Rows before t0 give four sums per (proc, stack), whatever tier they come
 * from: commit bytes and events (columns 2, 3 of sums_t), released
 * bytes (6) and closed (14); a window only needs them for everything before
 * its t0. Every bucket before a tier's end is final (batches are written
 * once, in order; rollups add buckets from the end on), and only retention
 * or the size cap rewrite old ones: they fold a tier's rows before its new
 * horizon into its BEFORE rows. So the handle keeps "the sums of every row
 * before x" without the BEFORE rows of the tier that starts the staircase
 * (the hour tier, normally): rundown of a new instance adds to BEFORE rows
 * at any time, so those are always read. A later window with t0 >= x reads
 * only the rows of [x, t0): its raw seconds up to the next minute, the
 * minute tier's minutes, its raw seconds after the last minute (a report
 * of the last hour, asked every second, reads a second's rows, not the
 * day before it). A change of the BEFORE tier's start or horizon drops the
 * sums (a fold would count the folded rows twice). Two entries (the
 * dashboard's windows: the last hour, the whole day), the least recently
 * used replaced; one needing more than REPORT_CACHE_MAX_GAP of rows is
 * computed afresh from the coarsest tiers. An entry holds at most
 * REPORT_CACHE_MAX_ROWS sums (1.25 MiB): past it the sums serve the
 * report that computed them and are freed (the next window is computed
 * afresh); an entry dropped (folded since) frees its room, and one
 * recomputed smaller gives back what it no longer needs, so a burst of
 * instances that retention has since pruned does not keep the entry at
 * its peak. Each handle is used by one thread at a time, so is its
 * cache.
 *
 * Closed sums are not kept. A window's figures take the sums before t0
 * only as differences: outstanding at t0 is commit bytes less released
 * bytes, its pieces commit events less closed ones (load_figs). So a
 * (proc, stack) whose sums are even (bytes and pieces) adds nothing to
 * any window from x on, and the rows later added to it give the same
 * differences without it. A process left with no sums is not listed by
 * stage 1 but, when it has activity in the window, by stage 2 with what
 * stage 1 would have given it (nothing outstanding at t0, its peak at the
 * window's start), and cw_report_sort orders the processes at the end;
 * without activity finish() would have dropped it. So an ended instance
 * (its exit closes all it held) costs nothing here: the entries follow
 * what the stored processes still hold, not every stack they ever
 * committed from (the soak's thousands of short-lived processes). For the
 * same reason they are left out while an entry is added up, not only at
 * its end: whenever a process's cell starts and the sums have grown past
 * twice what the last pruning kept (plus an eighth of an entry's most),
 * the closed sums go, and the processes left with none (acc_proc); so
 * filling an entry holds what is open plus the sums added since, not a
 * sum for every (instance, stack) the staircase names (30 minutes of the
 * busy mix, 71,564 instances: 22,231 page faults and 480 ms for a fresh
 * handle's first list of the last minute, BENCHMARKS.md "Ranked lists on
 * a busy machine"), nor every instance of an hour cell (2 hours of it:
 * about 140,000 an hour). Every sum then holds whole rows, so where the
 * pruning falls does not matter. */
#define REPORT_CACHE_ENTRIES 2
#define REPORT_CACHE_MAX_GAP (2 * INT64_C(3600000000000))
#define REPORT_CACHE_MAX_ROWS 32768u

typedef cw__before_sums_t before_sums_t;

typedef struct rentry {
    bool valid;
    int tier; /* whose BEFORE rows are not in the sums */
    int64_t start, horizon, x;
    uint64_t used;
    before_sums_t *v; /* by (proc, stack), the open ones */
    uint32_t n;
    size_t cap;
} rentry_t;

struct cw__report_cache {
    rentry_t e[REPORT_CACHE_ENTRIES];
    uint64_t clock;
    uint64_t closed_left_out; /* closed sums not kept (a test's count) */
    uint32_t top_skip;        /* ranked reports left to answer without it */
    cw__sums_proc_t *room;    /* sums' processes, between reports (cw__sums_acc_init) */
    size_t room_cap;
    uint32_t room_spare; /* sums in a row that held less than half of it */
};

static void report_release(cw_store_t *s);

static void report_cache_free(struct cw__report_cache *c)
{
    if (!c) return;
    for (int i = 0; i < REPORT_CACHE_ENTRIES; i++)
        free(c->e[i].v);
    free(c->room);
    free(c);
}

/* The handle's report cache, made when it has none; NULL on ENOMEM. */
static struct cw__report_cache *report_cache(cw_store_t *s)
{
    struct cw__report_cache *c = s->r.report_cache;
    if (!c && !(c = s->r.report_cache = calloc(1, sizeof *c))) return NULL;
    cw__db_on_release(s, CW__REL_REPORT, report_release);
    return c;
}

/* The most processes whose room a handle keeps between reports (16 MiB:
 * 30 minutes of the busy mix name 71,564; a day of it, millions, whose
 * room is freed with the report). */
#define SUMS_ROOM_MAX ((16u << 20) / sizeof(cw__sums_proc_t))

static int sums_room_take(cw__sums_acc_t *a, cw_store_t *s)
{
    struct cw__report_cache *c = report_cache(s);
    if (!c) return CW_ENOMEM;
    a->room = s;
    a->p = c->room;
    a->pcap = c->room_cap;
    c->room = NULL;
    c->room_cap = 0;
    return 0;
}

/* The room kept, of two the larger, unless it held more than
 * SUMS_ROOM_MAX processes (the read caches' bound when a test sets it).
 * Fitted once ROOM_FIT_AFTER sums in a row held less than half of it
 * (a burst of short-lived processes is over), not at the first: a
 * dashboard's lists of short and long windows alternate. */
#define ROOM_FIT_AFTER 8

static void sums_room_give(cw__sums_acc_t *a)
{
    struct cw__report_cache *c = a->room ? a->room->r.report_cache : NULL;
    uint32_t n = a->np + a->run.m;
    size_t max = c && a->room->test.read_cache_rows ? a->room->test.read_cache_rows : SUMS_ROOM_MAX;
    if (!c || n > max || a->pcap <= c->room_cap) {
        free(a->p);
        return;
    }
    if (2 * (size_t)n + 1024 >= a->pcap) {
        c->room_spare = 0;
    } else if (++c->room_spare >= ROOM_FIT_AFTER) {
        CW_RESERVE_FIT(a->p, a->pcap, n, 1024);
        c->room_spare = 0;
    }
    free(c->room);
    c->room = a->p;
    c->room_cap = a->pcap;
}

uint64_t cw__store_report_cache_closed(const cw_store_t *s)
{
    return s->r.report_cache ? s->r.report_cache->closed_left_out : 0;
}

size_t cw__store_sums_room(const cw_store_t *s)
{
    return s->r.report_cache ? s->r.report_cache->room_cap : 0;
}

bool cw__store_report_cache_key(const cw_store_t *s, int *tier, int64_t *horizon)
{
    const struct cw__report_cache *c = s->r.report_cache;
    const rentry_t *best = NULL;
    for (int i = 0; c && i < REPORT_CACHE_ENTRIES; i++)
        if (c->e[i].valid && (!best || c->e[i].used > best->used)) best = &c->e[i];
    if (!best) return false;
    *tier = best->tier;
    *horizon = best->horizon;
    return true;
}

/* Whether the sums before t0 of x add nothing to a window (above). */
static bool sums_closed(const sums_t *x)
{
    return x->v[0] == x->v[4] && x->v[1] == x->v[12];
}

/* Leaves out of a (sums before t0, no activity) the sums that add
 * nothing to a later window and the processes left with none (above); a
 * process with a map of its own keeps its rows. Adds the sums left out to
 * *dropped. 0 or CW_ENOMEM. */
static int acc_prune_closed(cw__sums_acc_t *a, uint64_t *dropped)
{
    uint32_t np = 0, n0 = a->n;
    if (cw__proc_settle(&a->run, &a->p, &a->np, sizeof *a->p)) return CW_ENOMEM;
    for (uint32_t i = 0; i < a->np; i++) {
        cw__sums_proc_t *p = &a->p[i];
        if (!p->map) {
            uint32_t m = 0;
            for (uint32_t j = 0; j < p->n; j++)
                if (!sums_closed(&p->v[j])) {
                    p->ids[m] = p->ids[j];
                    p->v[m++] = p->v[j];
                }
            a->n -= p->n - m;
            p->n = m;
            p->hint = 0;
        }
        if (p->n == 0 && !p->active) {
            cw__sums_proc_free(p);
            continue;
        }
        a->p[np++] = *p;
    }
    a->np = np; /* still sorted */
    a->last = 0;
    *dropped += n0 - a->n;
    return 0;
}

/* Adds the cached sums of e to a, as sums_t's columns. */
static int push_before(const rentry_t *e, cw__sums_acc_t *a)
{
    for (uint32_t i = 0; i < e->n; i++) {
        const before_sums_t *b = &e->v[i];
        sums_t *x = cw__sums_acc_row(a, b->proc, b->stack);
        if (!x) return CW_ENOMEM;
        x->v[0] += b->cb;
        x->v[1] += b->ce;
        x->v[4] += b->rb;
        x->v[12] += b->rc;
    }
    return 0;
}

bool cw__report_delta_segments(const cw__tier_t *t, int64_t x, int64_t y, segment_t *seg, int *n)
{
    int64_t w = t[1].width, m1 = ceil_to(x, w), m2 = cw_floor_to(y, w);
    *n = 0;
    if (!tier_holds(t, 0, x, y)) return false;
    if (m1 < m2 && tier_holds(t, 1, m1, m2)) {
        if (x < m1) seg[(*n)++] = (segment_t){.tier = 0, .lo = x, .hi = m1};
        seg[(*n)++] = (segment_t){.tier = 1, .lo = m1, .hi = m2};
        if (m2 < y) seg[(*n)++] = (segment_t){.tier = 0, .lo = m2, .hi = y};
    } else {
        seg[(*n)++] = (segment_t){.tier = 0, .lo = x, .hi = y};
    }
    return true;
}

/* Forgets entry e and frees its room. */
static void entry_drop(rentry_t *e)
{
    free(e->v);
    e->v = NULL;
    e->n = 0;
    e->cap = 0;
    e->valid = false;
}

/* The rows an entry may keep after its report. */
static uint32_t report_cache_max(const cw_store_t *s)
{
    return s->test.read_cache_rows ? s->test.read_cache_rows : REPORT_CACHE_MAX_ROWS;
}

/* The cache entry holding the sums before t0 (the backward segments
 * seg[0, nback), seg[0] from BEFORE, all before the tiers' ends), their
 * rows read in the caller's read transaction, into *out. 0, CW_ENOMEM or
 * CW_EDB (the entry dropped). */
static int cached_before(cw_store_t *s, sqlite3_stmt *st, const cw__tier_t *t,
                         const segment_t *back, int nback, int64_t t0, rentry_t **out, cw_diag_t *d)
{
    struct cw__report_cache *c = report_cache(s);
    int tier = back[0].tier;
    *out = NULL;
    if (!c) return CW_ENOMEM;
    /* The entry nearest below t0 for this key, else the least recent. */
    rentry_t *e = NULL, *lru = &c->e[0];
    for (int i = 0; i < REPORT_CACHE_ENTRIES; i++) {
        rentry_t *x = &c->e[i];
        if (x->valid &&
            (x->tier != tier || x->start != t[tier].start || x->horizon != t[tier].horizon))
            entry_drop(x); /* folded since */
        if (x->valid && x->x <= t0 && (!e || x->x > e->x)) e = x;
        if (!x->valid || x->used < lru->used) lru = x;
    }
    segment_t seg[MAX_SEGMENTS];
    int nseg = 0;
    if (!e || t0 - e->x > REPORT_CACHE_MAX_GAP ||
        !cw__report_delta_segments(t, e->x, t0, seg, &nseg)) {
        e = e && e->x == t0 ? e : lru; /* afresh: the backward segments without BEFORE */
        e->valid = false;
        e->n = 0;
        e->tier = tier;
        e->start = t[tier].start;
        e->horizon = t[tier].horizon;
        e->x = t0;
        nseg = 0;
        for (int i = 0; i < nback; i++) {
            seg[nseg] = back[i];
            if (i == 0) seg[nseg].lo = INT64_MIN + 1;
            if (seg[nseg].lo < seg[nseg].hi) nseg++;
        }
    }
    e->used = ++c->clock;
    if (e->valid && e->x == t0) {
        *out = e;
        return 0;
    }
    /* The new rows, as sums before t0, added to the cached. */
    cw__sums_acc_t a;
    const pick_t at = {.t0 = t0, .t1 = t0};
    /* (no room: most fills add a few buckets' processes) */
    int err = cw__sums_acc_init(&a, NULL) ? CW_ENOMEM : 0;
    a.prune_over = a.prune_slack = report_cache_max(s) / 8;
    a.pruned = &c->closed_left_out;
    for (int i = 0; i < nseg && !err; i++)
        err = run_segment(s, st, seg[i].tier, &at, seg[i].lo, seg[i].hi, false, 0, NULL, &a, d);
    s->test.before_prunes += a.prunes;
    if (!err && e->valid) err = push_before(e, &a);
    if ((err = cw__sums_acc_done(&a, err, d))) {
        e->valid = false;
        return err;
    }
    /* The open sums kept, closed ones left out (above). */
    uint32_t m = 0;
    for (uint32_t i = 0; i < a.np; i++)
        for (uint32_t j = 0; j < a.p[i].n; j++)
            m += !sums_closed(&a.p[i].v[j]);
    c->closed_left_out += a.n - m;
    e->valid = false;
    CW_RESERVE_FIT(e->v, e->cap, m, 1024); /* far smaller now: give the room back */
    if (CW_RESERVE(e->v, e->cap, m)) {
        cw__sums_acc_free(&a);
        return CW_ENOMEM;
    }
    m = 0;
    for (uint32_t i = 0; i < a.np; i++)
        for (uint32_t j = 0; j < a.p[i].n; j++) {
            const sums_t *x = &a.p[i].v[j];
            if (!sums_closed(x))
                e->v[m++] = (before_sums_t){x->proc, x->stack, x->v[0], x->v[1], x->v[4], x->v[12]};
        }
    cw__sums_acc_free(&a);
    e->n = m;
    e->x = t0;
    e->valid = true;
    *out = e;
    return 0;
}

/* An activity row of the raw tail. */
typedef struct cw__tail_act {
    int64_t bucket, events, delta, relpeak, relpeak_ns;
    uint32_t proc;
} cw__tail_act_t;

/* ---- the handle's copy of the raw tier's newest rows --------------------------
 *
 * A window that is not aligned to minutes (the dashboard's "last hour")
 * reads its rows from the raw tier: from t0 on, a release's `a` must be
 * compared with t0, which a coarser tier's floored `a` cannot do. Those
 * rows are the newest ones, and every raw bucket before the tier's end is
 * final (batches are written once, in order; only retention folds them,
 * moving the horizon). So the handle keeps the raw rows of [lo, hi) as
 * they are (commits, releases, activity, in time order): a later window
 * starting at or after lo reads only the buckets from hi to the new end
 * from SQL, and the rest from memory, with the same per-row arithmetic as
 * cw__sums_add_cell. Dropped when the raw tier's start or horizon change; at
 * most RAW_TAIL_MAX_ROWS rows (about 1.8 MB; a window needing more is
 * read from SQL, and so is any as long until a shorter one is asked), the
 * oldest dropped first when a later window no longer needs them. Used by one thread at a time, as
 * its handle. */
#define RAW_TAIL_MAX_ROWS 32768

typedef struct t_commit {
    int64_t bucket, bytes, events;
    uint32_t proc, stack;
} t_commit_t;

typedef struct t_release {
    int64_t f, a, bytes, pieces, closed;
    uint32_t proc, stack;
} t_release_t;

struct cw__raw_tail {
    bool valid;
    int64_t start, horizon, lo, hi;
    int64_t over; /* > 0: a span this long did not fit (same start, horizon) */
    t_commit_t *c;
    t_release_t *r;
    cw__tail_act_t *a;
    size_t nc, nr, na, capc, capr, capa;
};

static void raw_tail_free(struct cw__raw_tail *c)
{
    if (!c) return;
    free(c->c);
    free(c->r);
    free(c->a);
    free(c);
}

/* The handle's release slot CW__REL_REPORT (db.h): the report cache and
 * the raw tail, and their share of the store_caches figure. */
static void report_release(cw_store_t *s)
{
    report_cache_free(s->r.report_cache);
    raw_tail_free(s->r.raw_tail);
    s->r.report_cache = NULL;
    s->r.raw_tail = NULL;
    cw__report_caches_publish(s, true);
}

size_t cw__store_raw_tail_rows(const cw_store_t *s)
{
    const struct cw__raw_tail *c = s->r.raw_tail;
    return c && c->valid ? c->nc + c->nr + c->na : 0;
}

/* Drops the rows before x (all kinds), keeping the order. */
#define TAIL_TRIM(v, n, field, x)                                                                  \
    do {                                                                                           \
        size_t k_ = 0;                                                                             \
        while (k_ < (n) && (v)[k_].field < (x))                                                    \
            k_++;                                                                                  \
        if (k_) memmove((v), (v) + k_, ((n)-k_) * sizeof *(v));                                    \
        (n) -= k_;                                                                                 \
    } while (0)

enum { TAIL_OVERSIZE = -1 };

/* Whether the raw cells of [lo, hi) may fit c beside what it holds:
 * TAIL_OVERSIZE when they alone pass the bound max (each cell gives one
 * row at least: 40 s of 10,000 live processes are 48,000 cells, 79,000
 * rows), else 0 (or an error). */
static int tail_fits(cw_store_t *s, const struct cw__raw_tail *c, int64_t lo, int64_t hi,
                     size_t max, cw_diag_t *d)
{
    sqlite3_stmt *sc = NULL;
    int err = cw__store_stmt(s, CW__ST_Q_TAIL_COUNT, SQL_Q_TAIL_COUNT, &sc, d);
    if (err) return err;
    sqlite3_bind_int64(sc, 1, lo);
    sqlite3_bind_int64(sc, 2, hi);
    if (sqlite3_step(sc) != SQLITE_ROW) {
        err = cw__store_dberr(s, "counting the newest cells", d);
    } else if (c->nc + c->nr + c->na + (uint64_t)sqlite3_column_int64(sc, 0) > max) {
        err = TAIL_OVERSIZE;
        s->test.tails_counted_out++;
    }
    sqlite3_reset(sc);
    return err;
}

/* Appends the raw rows of [lo, hi) to c: the tier's cells in time order,
 * each decoded in C into its commit and release rows and its activity
 * row. A span tail_fits() refuses is not read; one that passes the bound
 * midway stops at the cell that does. 0, TAIL_OVERSIZE, CW_ENOMEM or
 * CW_EDB. */
static int tail_extend(cw_store_t *s, struct cw__raw_tail *c, int64_t lo, int64_t hi, cw_diag_t *d)
{
    const size_t max = s->test.read_cache_rows ? s->test.read_cache_rows : RAW_TAIL_MAX_ROWS;
    /* A span whose cells alone pass the bound is not read at all (the
     * count walks the primary key's entries, not the cells' data). */
    int err = tail_fits(s, c, lo, hi, max, d), rc = SQLITE_DONE;
    sqlite3_stmt *st = NULL;
    cw__cell_rows_t rows = {0};
    if (!err) err = cw__store_stmt(s, CW__ST_Q_TAIL_CELLS, SQL_Q_TAIL_CELLS, &st, d);
    if (err) return err;
    sqlite3_bind_int64(st, 1, lo);
    sqlite3_bind_int64(st, 2, hi);
    while (!err && (rc = sqlite3_step(st)) == SQLITE_ROW) {
        int64_t bucket = sqlite3_column_int64(st, 0);
        uint32_t proc = (uint32_t)sqlite3_column_int64(st, 1);
        bool act = sqlite3_column_type(st, 3) != SQLITE_NULL;
        rows.c.n = rows.r.n = 0;
        err = cw__cell_decode(sqlite3_column_blob(st, 2), (size_t)sqlite3_column_bytes(st, 2),
                              bucket, proc, &rows, NULL);
        if (err == CW_EDB) {
            err = cw_diag_set(
                d, err, "reading the newest rows: a cell of instance %" PRIu32 " is not readable",
                proc);
            break;
        }
        if (err) break;
        if (c->nc + c->nr + c->na + rows.c.n + rows.r.n + act > max) {
            err = TAIL_OVERSIZE;
            break;
        }
        if ((err = CW_RESERVE(c->c, c->capc, c->nc + rows.c.n)) ||
            (err = CW_RESERVE(c->r, c->capr, c->nr + rows.r.n)) ||
            (err = CW_RESERVE(c->a, c->capa, c->na + act)))
            break;
        for (uint32_t j = 0; j < rows.c.n; j++) {
            const cw_row_commit_t *x = &rows.c.v[j];
            c->c[c->nc++] =
                (t_commit_t){bucket, (int64_t)x->bytes, (int64_t)x->events, proc, x->stack};
        }
        for (uint32_t j = 0; j < rows.r.n; j++) {
            const cw_row_release_t *x = &rows.r.v[j];
            c->r[c->nr++] = (t_release_t){
                bucket, x->a,    (int64_t)x->bytes, (int64_t)x->pieces, (int64_t)x->closed,
                proc,   x->stack};
        }
        if (act)
            c->a[c->na++] = (cw__tail_act_t){bucket,
                                             sqlite3_column_int64(st, 3),
                                             sqlite3_column_int64(st, 4),
                                             sqlite3_column_int64(st, 5),
                                             sqlite3_column_int64(st, 6),
                                             proc};
    }
    if (!err && rc != SQLITE_DONE) err = cw__store_dberr(s, "reading the newest rows", d);
    sqlite3_reset(st);
    cw__cell_rows_free(&rows);
    return err;
}

/* Room far above the rows the tail holds now goes back (the rows of a
 * burst of processes read once, then reset or trimmed): the capacity of
 * a burst is otherwise kept as long as the handle is used, and a handle
 * read every few seconds is never idle long enough to drop it. */
#define TAIL_SLACK_ROWS 1024

static void tail_fit(struct cw__raw_tail *c)
{
    CW_RESERVE_FIT(c->c, c->capc, c->nc, TAIL_SLACK_ROWS);
    CW_RESERVE_FIT(c->r, c->capr, c->nr, TAIL_SLACK_ROWS);
    CW_RESERVE_FIT(c->a, c->capa, c->na, TAIL_SLACK_ROWS);
}

/* The raw tail holding [lo, end of the raw tier), into *out; NULL when it
 * cannot (the cache off, too many rows). 0, CW_ENOMEM or CW_EDB. */
static int raw_tail(cw_store_t *s, const cw__tier_t *t, int64_t lo, struct cw__raw_tail **out,
                    cw_diag_t *d)
{
    struct cw__raw_tail *c = s->r.raw_tail;
    int64_t hi = t[0].end;
    *out = NULL;
    if (s->test.read_cache_off || hi == INT64_MIN || lo >= hi) return 0;
    if (!c && !(c = s->r.raw_tail = calloc(1, sizeof *c))) return CW_ENOMEM;
    cw__db_on_release(s, CW__REL_REPORT, report_release);
    bool same = c->start == t[0].start && c->horizon == t[0].horizon;
    if (!same) c->over = 0;
    if (c->over > 0 && hi - lo >= c->over) return 0; /* would not fit either: SQL */
    if (!c->valid || !same || lo < c->lo || hi < c->hi) {
        c->valid = false;
        c->nc = c->nr = c->na = 0;
        c->start = t[0].start;
        c->horizon = t[0].horizon;
        c->lo = c->hi = lo;
    } else if (c->nc + c->nr + c->na >
                   (s->test.read_cache_rows ? s->test.read_cache_rows : RAW_TAIL_MAX_ROWS) / 2 &&
               lo > c->lo) {
        TAIL_TRIM(c->c, c->nc, bucket, lo); /* older than any window asks now */
        TAIL_TRIM(c->r, c->nr, f, lo);
        TAIL_TRIM(c->a, c->na, bucket, lo);
        c->lo = lo;
    }
    if (c->hi < hi) {
        int err = tail_extend(s, c, c->hi, hi, d);
        if (err) {
            c->valid = false;
            c->nc = c->nr = c->na = 0;
            tail_fit(c);
            if (err == TAIL_OVERSIZE) c->over = hi - c->lo;
            return err == TAIL_OVERSIZE ? 0 : err;
        }
        c->hi = hi;
        c->over = 0;
    }
    tail_fit(c);
    c->valid = true;
    *out = c;
    return 0;
}

/* The sums (sums_t) for window [t0, t1) of the tail's rows in [lo, hi)
 * (commits: bucket < t1 as well; releases: a < t1), added to a. */
static int tail_sums(const struct cw__raw_tail *c, int64_t t0, int64_t t1, int64_t lo, int64_t hi,
                     bool act, cw__sums_acc_t *a)
{
    for (size_t i = 0; act && i < c->na; i++) { /* in bucket order */
        const cw__tail_act_t *x = &c->a[i];
        if (x->bucket < lo || x->bucket >= hi || x->bucket < t0 || x->bucket >= t1) continue;
        int err = cw__sums_add_activity(a, x->proc, x->events, x->delta, x->relpeak, x->relpeak_ns);
        if (err) return err;
    }
    for (size_t i = 0; i < c->nc; i++) {
        const t_commit_t *x = &c->c[i];
        if (x->bucket < lo || x->bucket >= hi || x->bucket >= t1) continue;
        sums_t *y = cw__sums_acc_row(a, x->proc, x->stack);
        if (!y) return CW_ENOMEM;
        cw__sums_add_commit(y, x->bucket, x->bytes, x->events, t0);
    }
    for (size_t i = 0; i < c->nr; i++) {
        const t_release_t *x = &c->r[i];
        if (x->f < lo || x->f >= hi || x->a >= t1) continue;
        sums_t *y = cw__sums_acc_row(a, x->proc, x->stack);
        if (!y) return CW_ENOMEM;
        cw__sums_add_release(y, x->f, x->a, x->bytes, x->pieces, x->closed, t0, t1);
    }
    return 0;
}

/* Runs every segment and sums its rows per (proc, stack), sorted. The
 * segments before t0, when all lie before their tiers' ends, come from the
 * handle's cache of sums (above) and the first one's BEFORE rows; the raw
 * tier's from t0 on, from its raw tail as far as it reaches. */
int cw__report_load_sums(cw_store_t *s, const cw__tier_t *t, const segment_t *seg, int nseg,
                         int nback, const pick_t *p, bool by_proc, cw__sums_acc_t *out,
                         cw_diag_t *d)
{
    sqlite3_stmt *st = NULL, *sa = NULL;
    cw__sums_acc_t *a = out;
    int err = 0, first = 0;
    if (cw__sums_acc_init(a, s))
        return cw_diag_set(d, CW_ENOMEM, "querying window figures: out of memory");
    a->by_proc = by_proc;
    if ((err = cw__store_stmt(s, CW__ST_Q_FIGS, SQL_Q_CELLS, &st, d)) ||
        (err = cw__store_stmt(s, CW__ST_Q_CELLS_ACT, SQL_Q_CELLS_ACT, &sa, d))) {
        cw__sums_acc_free(a);
        return err;
    }
    bool final = true; /* every backward row is in a closed bucket */
    for (int i = 0; i < nback; i++)
        final &= seg[i].hi <= t[seg[i].tier].end;
    cw__hsides_t hs; /* the hour split (cw__report_hour_split) */
    if (cw__hsides_init(&hs, t, p, seg, nseg)) err = CW_ENOMEM;
    if (!err && !s->test.read_cache_off && nback > 0 && seg[0].lo == INT64_MIN && final &&
        seg[nback - 1].hi == p->t0) {
        /* Before t0: its tier's BEFORE rows, and the cached sums. */
        rentry_t *c = NULL;
        err = run_segment(s, st, seg[0].tier, p, INT64_MIN, INT64_MIN + 1, false, 0, NULL, a, d);
        if (!err) err = cached_before(s, st, t, seg, nback, p->t0, &c, d);
        if (!err) err = push_before(c, a);
        if (c && c->n > report_cache_max(s)) entry_drop(c); /* too big to keep */
        first = nback;
    }
    for (int i = first; i < nseg && !err; i++) {
        int k = seg[i].tier;
        int64_t hi = seg[i].hi;
        bool act = i >= nback; /* the window's own */
        if (k == 0 && seg[i].lo >= p->t0) {
            /* From t0 on in the raw tier: the newest rows, from memory up
             * to the tail's end. */
            struct cw__raw_tail *c = NULL;
            int64_t lo = seg[i].lo;
            if ((err = raw_tail(s, t, lo, &c, d))) break;
            if (c) {
                int64_t mid = c->hi < hi ? c->hi : hi;
                if ((err = tail_sums(c, p->t0, p->t1, lo, mid, act, a))) break;
                lo = mid;
            }
            if (lo < hi) err = run_segment(s, act ? sa : st, k, p, lo, hi, act, 0, NULL, a, d);
            continue;
        }
        err = run_segment(s, act ? sa : st, k, p, seg[i].lo, hi, act, seg[i].split, &hs, a, d);
    }
    if (!err) err = cw__hsides_fix(s, t, &hs, p, a, d);
    cw__hsides_free(&hs);
    return cw__sums_acc_done(a, err, d);
}

/* A ranked report whose sums before t0 were too many to keep refilled
 * the entry each time (10,000 live processes: 80,000 sums); the next
 * 1,024 read the cells instead (a dashboard polling every 5 s: 85 min),
 * then try the cache again. */
#define TOP_SKIP_AFTER_OVERSIZE 1024

int cw__report_before(cw_store_t *s, const cw__tier_t *t, const segment_t *seg, int nback,
                      const pick_t *p, const cw__before_sums_t **v, uint32_t *n, cw_diag_t *d)
{
    sqlite3_stmt *st = NULL;
    rentry_t *e = NULL;
    bool final = true;
    *v = NULL;
    *n = 0;
    for (int i = 0; i < nback; i++)
        final &= seg[i].hi <= t[seg[i].tier].end;
    /* As cw__report_load_sums() decides. */
    if (s->test.read_cache_off || nback == 0 || seg[0].lo != INT64_MIN || !final ||
        seg[nback - 1].hi != p->t0)
        return 0;
    if (s->r.report_cache && s->r.report_cache->top_skip) {
        s->r.report_cache->top_skip--;
        return 0;
    }
    int err = cw__store_stmt(s, CW__ST_Q_FIGS, SQL_Q_CELLS, &st, d);
    if (!err) err = cached_before(s, st, t, seg, nback, p->t0, &e, d);
    if (err == CW_ENOMEM) cw_diag_set(d, err, "querying window figures: out of memory");
    if (err) return err;
    static const cw__before_sums_t none;
    *v = e->n ? e->v : &none; /* not NULL: the cache serves */
    *n = e->n;
    return 0;
}

void cw__report_before_done(cw_store_t *s)
{
    struct cw__report_cache *c = s->r.report_cache;
    for (int i = 0; c && i < REPORT_CACHE_ENTRIES; i++)
        if (c->e[i].valid && c->e[i].n > report_cache_max(s)) {
            entry_drop(&c->e[i]);
            c->top_skip = TOP_SKIP_AFTER_OVERSIZE;
        }
}

/* Bytes of the handle's report cache, raw tail and keys cache. */
static size_t caches_bytes(const cw_store_t *s)
{
    size_t b = 0;
    const struct cw__report_cache *c = s->r.report_cache;
    const struct cw__raw_tail *t = s->r.raw_tail;
    if (c) {
        b += sizeof *c + c->room_cap * sizeof *c->room;
        for (int i = 0; i < REPORT_CACHE_ENTRIES; i++)
            b += c->e[i].cap * sizeof *c->e[i].v;
    }
    b += cw__keys_cache_bytes(s);
    if (t)
        b += sizeof *t + t->capc * sizeof *t->c + t->capr * sizeof *t->r + t->capa * sizeof *t->a;
    return b;
}

void cw__report_caches_publish(cw_store_t *s, bool closing)
{
    size_t now = closing ? 0 : caches_bytes(s);
    cw_mem_add(CW_MEM_STORE_CACHES, (int64_t)now - (int64_t)s->r.caches_published);
    s->r.caches_published = now;
}
