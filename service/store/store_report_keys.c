/* store_report_keys.c - what a ranked report (cw_store_report_top(),
 * store_report.c) reads: the per-process sums that rank a window's
 * processes without decoding a cell (commit and release bytes before the
 * window and in it, from the cells' columns bytes and released, schema
 * 009_cells), and then the per-stack sums of the chosen processes alone,
 * their cells decoded in C; both over the same segments of tiers as the
 * full report (store_report_sums.c).
 *
 * Why they are exact: a window's bytes figures are sums over stacks of
 * differences of the sums of sums_t, and none of them needs a
 * release's commit time `a` once f is known: outstanding(t0) is the commit
 * bytes before t0 less the bytes released before t0 (a < f < t0), Size
 * the commit bytes in the window, impacting Size less the bytes released
 * in it (AIFO - AOFI), outstanding at the end outstanding(t0) plus
 * impacting. A cell's bytes and released are exactly its rows' sums
 * (cells.c), so one row per cell is read and nothing is decoded. Runs
 * inside the report's read transaction, on the thread that holds the
 * handle.
 *
 * The keys cache (below) spares a repeated window its cells: per process,
 * the sums of every cell before x, kept for a few x; a window's keys are
 * differences of its two ends' sums. It is the handle's, freed by its
 * release slot CW__REL_KEYS. */
#include <inttypes.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "commitwatch/keymap.h"
#include "commitwatch/log.h"
#include "store/cells.h"
#include "store/store_report_sums.h"

/* The cells of tier ?1 with bucket in [?2, ?3), in the order of the
 * primary key (tier DESC, bucket, proc, layer): each process's rows come in
 * bucket order with no sort, as its peak needs them. */
static const char SQL_Q_KEYS[] =
    "SELECT bucket, proc, bytes, released, events, delta, relpeak, peak_off FROM cells"
    " WHERE tier = ?1 AND layer = cw_layer() AND bucket >= ?2 AND bucket < ?3 ORDER BY bucket";

/* err, with ENOMEM named in d. */
static int list_done(int err, cw_diag_t *d)
{
    if (err == CW_ENOMEM) cw_diag_set(d, err, "querying window figures: out of memory");
    return err;
}

/* From the window's first forward segment on: outstanding at t0 is known,
 * the peak starts there (at `at`), as load_figs() (store_report.c) starts it. */
static void start_window(cw__proc_keys_t *k, int64_t at)
{
    k->level = k->cb0 - k->rb0;
    k->peak = k->level > 0 ? k->level : 0;
    k->peak_ns = at;
}

_Static_assert(offsetof(cw__proc_keys_t, proc) == 0, "proc_at reads the process first");

static int keys_room(cw_store_t *s, cw__proc_keys_t **v, size_t *cap);
static void keys_room_keep(cw_store_t *s, cw__proc_keys_t *v, size_t cap);

int cw__report_load_keys(cw_store_t *s, const segment_t *seg, int nseg, int nback, const pick_t *p,
                         int64_t at, const cw__before_sums_t *bv, uint32_t bn,
                         cw__proc_keys_t **out, uint32_t *nout, cw_diag_t *d)
{
    sqlite3_stmt *st = NULL;
    /* The keys, sorted by process (cw__proc_row). */
    cw__proc_keys_t *k = NULL;
    size_t cap = 0;
    uint32_t n = 0;
    cw__proc_run_t run = {0};
    int err = cw__store_stmt(s, CW__ST_Q_KEYS, SQL_Q_KEYS, &st, d), rc = SQLITE_DONE;
    *out = NULL;
    *nout = 0;
    if (!err) err = keys_room(s, &k, &cap);
    if (err) return list_done(err, d);
    /* bv is sorted by (process, stack): a process's sums come together. */
    cw__proc_keys_t *y = NULL;
    for (uint32_t j = 0; j < bn && !err; j++) {
        bool added;
        if (!y || y->proc != bv[j].proc)
            y = cw__proc_row(&run, &k, &cap, &n, sizeof *k, bv[j].proc, &added, &err);
        if (!y) break;
        y->cb0 += bv[j].cb;
        y->rb0 += bv[j].rb;
    }
    if (!err) err = cw__proc_settle(&run, &k, &n, sizeof *k);
    for (int i = 0; i <= nseg && !err; i++) {
        bool fwd = i >= nback;
        if (i == nback)
            for (uint32_t j = 0; j < n; j++)
                start_window(&k[j], at);
        if (i == nseg) break;
        /* Rows from t1 on add nothing (their commits and releases are
         * after the window). */
        int64_t hi = seg[i].hi < p->t1 ? seg[i].hi : p->t1;
        /* The hour split's sides are for the stacks' figures alone:
         * these sums need no commit time. */
        if (seg[i].lo >= hi || seg[i].split == CW__SPLIT_SIDES) continue;
        sqlite3_bind_int(st, 1, seg[i].tier);
        sqlite3_bind_int64(st, 2, seg[i].lo);
        sqlite3_bind_int64(st, 3, hi);
        while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
#define I(col) sqlite3_column_int64(st, (col))
            int64_t bucket = I(0);
            uint32_t proc = (uint32_t)I(1);
            bool added;
            cw__proc_keys_t *x = cw__proc_row(&run, &k, &cap, &n, sizeof *k, proc, &added, &err);
            if (!x) break;
            if (added && fwd) start_window(x, at);
            bool before = bucket < p->t0;
            x->cb0 += before ? I(2) : 0;
            x->rb0 += before ? I(3) : 0;
            x->cbw += before ? 0 : I(2);
            x->rbw += before ? 0 : I(3);
            if (!fwd || sqlite3_column_type(st, 4) == SQLITE_NULL) continue;
            /* An activity row, as cw__sums_add_activity() applies it. */
            int64_t cand = x->level + I(6);
            if (cand > x->peak) {
                x->peak = cand;
                x->peak_ns = bucket + I(7);
            }
            x->events += I(4);
            x->level += I(5);
            x->active = true;
#undef I
        }
        if (!err && rc != SQLITE_DONE) err = cw__store_dberr(s, "querying window figures", d);
        if (!err) err = cw__proc_settle(&run, &k, &n, sizeof *k);
        sqlite3_reset(st);
    }
    keys_room_keep(s, k, cap);
    if ((err = list_done(err, d))) return err;
    *out = k;
    *nout = n;
    return 0;
}

/* The cells of the raw tier with bucket in [?1, ?2): how many a raw
 * second holds, near a segment's end. */
static const char SQL_Q_CELLS_COUNT[] = "SELECT count(*) FROM cells WHERE tier = 0"
                                        " AND layer = cw_layer() AND bucket >= ?1 AND bucket < ?2";

/* Cell lookups a segment may take before it is read in key order
 * instead. A minute or an hour holds a cell per live process, so a
 * lookup saves passing over the others'. A raw second holds only the
 * processes active in it (10,000 live processes: a tenth of them; the
 * busy mix: a few hundred), so a raw segment is looked up only when its
 * seconds, counted near its end, hold more than LOOKUP_CELLS cells per
 * process asked (a lookup costs about as much as passing over that many
 * cells in key order: 2026-12-05, read_latency.py on both databases). */
#define LOOKUP_CELLS 4
#define DENSITY_PROBE (5 * INT64_C(1000000000))

char *cw__ids_json(const uint32_t *v, uint32_t n)
{
    char *j = malloc(12 * (size_t)n + 3), *w = j;
    if (!j) return NULL;
    *w++ = '[';
    for (uint32_t i = 0; i < n; i++)
        w += sprintf(w, i ? ",%" PRIu32 : "%" PRIu32, v[i]);
    memcpy(w, "]", 2);
    return j;
}

uint32_t cw__ids_find(const uint32_t *v, uint32_t n, uint32_t id)
{
    uint32_t lo = 0, hi = n;
    while (lo < hi) {
        uint32_t mid = lo + (hi - lo) / 2;
        if (v[mid] < id)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo < n && v[lo] == id ? lo : UINT32_MAX;
}

/* The index of id in only, or UINT32_MAX. */
static uint32_t find_id(const cw__proc_set_t *only, uint32_t id)
{
    return cw__ids_find(only->id, only->n, id);
}

/* How segment x is read for m processes: bucket by bucket (*seek true)
 * or in key order; [*lo, *hi) what it can hold (x->lo INT64_MIN: BEFORE
 * alone). 0 or CW_EDB. */
static int seek_segment(cw_store_t *s, const cw__tier_t *t, const segment_t *x, uint32_t m,
                        int64_t *lo, int64_t *hi, bool *seek, cw_diag_t *d)
{
    const cw__tier_t *k = &t[x->tier];
    *lo = x->lo;
    *hi = x->hi < t[0].end ? x->hi : t[0].end; /* nothing is stored after tier 0's end */
    *seek = true;
    if (*hi <= *lo) return 0;
    uint64_t buckets = x->lo == INT64_MIN ? 1 : (uint64_t)((*hi - *lo) / k->width + 1);
    *seek = buckets * m <= cw__seeks_max(s);
    if (!*seek || x->tier != 0 || x->lo == INT64_MIN) return 0;
    sqlite3_stmt *st = NULL;
    int64_t from = *hi - DENSITY_PROBE > *lo ? *hi - DENSITY_PROBE : *lo;
    int err = cw__store_stmt(s, CW__ST_Q_CELLS_COUNT, SQL_Q_CELLS_COUNT, &st, d);
    if (err) return err;
    sqlite3_bind_int64(st, 1, from);
    sqlite3_bind_int64(st, 2, *hi);
    if (sqlite3_step(st) != SQLITE_ROW) err = cw__store_dberr(s, "querying window figures", d);
    int64_t n = err ? 0 : sqlite3_column_int64(st, 0),
            secs = (*hi - from + k->width - 1) / k->width;
    sqlite3_reset(st);
    *seek = n > (int64_t)m * LOOKUP_CELLS * secs;
    return err;
}

/* A window whose t0 is not on a minute (an hour "from now") is read from
 * the raw tier from t0 on (cw__report_plan): a minute cell's release rows
 * say only in which minute their commit was, and for the minute m0 that
 * holds t0, that does not tell before t0 from after it. For the few
 * processes of a ranked report, the minute tier can serve all the same:
 * the raw tier's seconds [m0, m1) (m1 the next minute; [m0, t0) for its
 * commit rows only, see sides_t), then the minute tier's [m1, M), then
 * the raw tier from M on. A minute cell's release rows of commits made
 * in m0 are put on their side of t0 by their stack (sides_t); those of a
 * stack that committed on both sides are left out and taken from the raw
 * tier instead, with their commit's own second: the cell's minute f and
 * process are noted (cw__fixes_t), and its raw seconds [f, f + 1 min) are
 * read by key for those rows (they are what the minute's rows summed).
 * The 10,000 live processes' hour from an unaligned t0: 3.6 M raw cells
 * passed over -> 60 seconds and 60 minutes of the 100 processes shown,
 * and a minute of seconds for each (minute, process) noted. */
/* The sides: when a process's stack committed in m0 only before t0, or
 * only from t0 on, its rows of commits in m0 are all on that side. The
 * raw seconds [m0, m1)'s commit rows give each (process, stack) that
 * committed in m0 its sides (1 before t0, 2 from t0 on); only the rows
 * of a stack that committed on both sides are taken from raw seconds.
 * The raw tier's horizon is on a minute, so where it
 * holds t0 it holds m0; were it not to, every row would be taken from
 * raw seconds. */
typedef struct sides {
    bool known;      /* [m0, t0) was read */
    int64_t m0, t0;  /* the split minute and the window's start */
    cw_keymap_t map; /* (proc, stack) -> f */
    uint8_t *f;
    size_t cap;
    cw__cell_rows_t rows;
} sides_t;

/* Notes the sides of a raw cell of [m0, m1)'s commit rows. */
static int sides_add(sides_t *x, const void *data, size_t size, int64_t bucket, uint32_t proc)
{
    x->rows.c.n = x->rows.r.n = 0;
    int err = cw__cell_decode(data, size, bucket, proc, &x->rows, NULL);
    for (uint32_t j = 0; j < x->rows.c.n && !err; j++) {
        int added = 0;
        uint32_t i = cw_keymap_get(&x->map, proc, x->rows.c.v[j].stack, &added);
        if (i == UINT32_MAX || CW_RESERVE(x->f, x->cap, i + 1u)) return CW_ENOMEM;
        if (added) x->f[i] = 0;
        x->f[i] |= bucket < x->t0 ? 1 : 2;
    }
    return err;
}

/* cw__resolve_a_fn: a row of a commit in m0, as its stack's sides say. */
static int64_t sides_resolve(void *ctx, uint32_t proc, uint32_t stack, int64_t a)
{
    const sides_t *x = ctx;
    (void)a;
    uint32_t i = x->known ? cw_keymap_find(&x->map, proc, stack) : UINT32_MAX;
    if (i == UINT32_MAX || x->f[i] == 3) return CW__A_SKIP;
    return x->f[i] == 1 ? x->m0 : x->t0; /* before t0, or from it on */
}

/* The segments sv[0, *ns) with the raw tier's forward segment split as
 * above, when the minute tier holds at least two whole minutes of it:
 * the index of the minute segment (*head: of [m0, t0), read for the
 * sides alone, or -1), else -1 (sv unchanged). */
static int minute_split(const cw__tier_t *t, const pick_t *p, segment_t *sv, int *ns, int *head)
{
    const cw__tier_t *m = &t[1];
    int64_t w = m->width, m0 = cw_floor_to(p->t0, w), m1 = m0 + w, end = m->end;
    *head = -1;
    if (m0 == p->t0 || m->start == INT64_MIN || m->horizon > m1) return -1;
    if (p->t1 < end && p->t1 < t[0].end) end = cw_floor_to(p->t1, w);
    if (end < m1 + 2 * w) return -1;
    for (int i = 0; i < *ns; i++) {
        if (sv[i].tier != 0 || sv[i].lo != p->t0 || sv[i].hi < end) continue;
        int h = t[0].horizon <= m0 ? 1 : 0;
        memmove(&sv[i + 3 + h], &sv[i + 1], (size_t)(*ns - i - 1) * sizeof *sv);
        int64_t hi = sv[i].hi;
        if (h) sv[i] = (segment_t){.tier = 0, .lo = m0, .hi = p->t0};
        sv[i + h] = (segment_t){.tier = 0, .lo = p->t0, .hi = m1};
        sv[i + h + 1] = (segment_t){.tier = 1, .lo = m1, .hi = end};
        sv[i + h + 2] = (segment_t){.tier = 0, .lo = end, .hi = hi};
        *ns += 2 + h;
        *head = h ? i : -1;
        return i + h + 1;
    }
    return -1;
}

/* Before t0 from one cell a process. Of t0's own hour h0, the window's
 * backward segments [h0, t0) (its minutes, then its seconds: 26 minutes
 * and 41 seconds of 100 processes are 2,600 minute cells and 4,100
 * lookups) give only the four sums before t0, plain sums of their rows
 * (store_report_sums.c, "the handle's cache of the sums before t0").
 * Those are the sums of one cell a process that covers [h0, c1), c1 > t0
 * (the hour tier's cell of h0 when that hour is closed, else the open
 * hour's cell when h0 is the open hour: db.h, CW__TIER_OPEN), less those
 * of the rows of [t0, c1), which the window's forward segments read
 * anyway: each of those is also taken away from the sums before t0
 * (cw__sums_acc_t.sub_lo, sub_hi). Only when the window reaches c1, the
 * backward segments are [h0, t0) exactly, and no segment is split by
 * sides (the hour split). The segments [h0, t0) of sv[0, *ns) become
 * the cell's; *c1 its end; the cell's tier is returned. -1: sv
 * unchanged. */
static int before_whole(const cw__tier_t *t, const pick_t *p, segment_t *sv, int *ns, int64_t *c1)
{
    const cw__tier_t *h = &t[2], *o = &t[CW__TIER_OPEN];
    int64_t h0 = cw_floor_to(p->t0, h->width), end = h0 + h->width;
    int tier = 2, first = -1, last = -1;
    if (h0 == p->t0) return -1;
    if (h->start == INT64_MIN || h0 < h->start || h->horizon > h0 || end > h->end) {
        if (o->start != h0 || o->end <= p->t0) return -1;
        tier = CW__TIER_OPEN;
        end = o->end;
    }
    if (end > p->t1 || end > t[0].end) return -1;
    for (int i = 0; i < *ns; i++) {
        if (sv[i].split != CW__SPLIT_NONE) return -1;
        if (sv[i].lo == INT64_MIN || sv[i].hi > p->t0 || sv[i].hi <= h0) continue;
        if (sv[i].lo < h0 || (last >= 0 ? sv[last].hi != sv[i].lo : sv[i].lo != h0)) return -1;
        if (first < 0) first = i;
        last = i;
    }
    if (first < 0 || sv[last].hi != p->t0) return -1;
    sv[first] = (segment_t){.tier = tier, .lo = h0, .hi = h0 + 1};
    memmove(&sv[first + 1], &sv[last + 1], (size_t)(*ns - last - 1) * sizeof *sv);
    *ns -= last - first;
    *c1 = end;
    return tier;
}

int cw__report_load_sums_of(cw_store_t *s, const cw__tier_t *t, const segment_t *seg, int nseg,
                            const pick_t *p, const cw__proc_set_t *only, cw__sums_acc_t *out,
                            cw_diag_t *d)
{
    sqlite3_stmt *scan = NULL, *at = NULL;
    cw__sums_acc_t *a = out;
    int err = cw__report_stmt_of(s, &scan, d), rc = SQLITE_DONE;
    if (!err) err = cw__report_stmt_at(s, &at, d);
    memset(a, 0, sizeof *a);
    if (err) return err;
    if (cw__sums_acc_init(a, NULL) || /* a few processes: no room */
        sqlite3_bind_text(scan, 4, only->json, -1, SQLITE_TRANSIENT) != SQLITE_OK ||
        sqlite3_bind_text(at, 4, only->json, -1, SQLITE_TRANSIENT) != SQLITE_OK) {
        cw__sums_acc_free(a);
        return cw_diag_set(d, CW_ENOMEM, "querying window figures: out of memory");
    }
    for (uint32_t j = 0; j < only->bn && !err; j++) {
        const cw__before_sums_t *x = &only->bv[j];
        if (find_id(only, x->proc) == UINT32_MAX) continue;
        sums_t *y = cw__sums_acc_row(a, x->proc, x->stack);
        if (!y) {
            err = CW_ENOMEM;
            break;
        }
        y->v[0] += x->cb; /* as push_before() (store_report_sums.c) */
        y->v[1] += x->ce;
        y->v[4] += x->rb;
        y->v[12] += x->rc;
    }
    /* A segment with BEFORE is read as its BEFORE bucket and the rest. */
    segment_t sv[2 * MAX_SEGMENTS + 3]; /* + minute_split()'s three */
    int ns = 0;
    for (int i = 0; i < nseg; i++) {
        if (seg[i].lo == INT64_MIN) {
            sv[ns++] = (segment_t){.tier = seg[i].tier, .lo = INT64_MIN, .hi = INT64_MIN + 1};
            const cw__tier_t *k = &t[seg[i].tier];
            int64_t first = k->horizon > k->start ? k->horizon : k->start;
            if (first == INT64_MIN) continue; /* nothing stored but BEFORE */
            first = cw_floor_to(first, k->width);
            if (first < seg[i].hi)
                sv[ns++] = (segment_t){.tier = seg[i].tier, .lo = first, .hi = seg[i].hi};
        } else {
            sv[ns++] = seg[i];
        }
    }
    int64_t c1;
    int whole = s->test.read_cache_off ? -1 : before_whole(t, p, sv, &ns, &c1);
    if (whole >= 0) {
        a->sub_lo = p->t0;
        a->sub_hi = c1;
        s->test.before_whole++;
        s->test.before_whole_open += whole == CW__TIER_OPEN;
    }
    int head, mid = minute_split(t, p, sv, &ns, &head);
    int64_t m0 = cw_floor_to(p->t0, t[1].width);
    cw__fixes_t fx = {0};
    sides_t sd = {.known = head >= 0, .m0 = m0, .t0 = p->t0};
    if (mid >= 0 && cw_keymap_init(&sd.map, 64)) err = CW_ENOMEM;
    cw__hsides_t hs; /* the hour split (cw__report_hour_split) */
    if (cw__hsides_init(&hs, t, p, sv, ns)) err = CW_ENOMEM;
    for (int i = 0; i < ns && !err; i++) {
        /* As cw__sums_add_cell: commits with bucket in [lo, min(hi, t1)),
         * releases with f in [lo, hi) and a < t1. */
        int64_t lo, hi;
        bool seek;
        if ((err = seek_segment(s, t, &sv[i], only->n, &lo, &hi, &seek, d))) break;
        sqlite3_stmt *st = seek ? at : scan;
        if (lo >= hi) continue;
        sqlite3_bind_int(st, 1, sv[i].tier);
        sqlite3_bind_int64(st, 2, lo);
        sqlite3_bind_int64(st, 3, hi);
        if (seek) sqlite3_bind_int64(st, 5, lo == INT64_MIN ? 1 : t[sv[i].tier].width);
        bool fwd = only->keys && sv[i].lo >= p->t0;
        while (!err && (rc = sqlite3_step(st)) == SQLITE_ROW) {
            int64_t bucket = sqlite3_column_int64(st, 0);
            uint32_t proc = (uint32_t)sqlite3_column_int64(st, 1), ki;
            if (fwd && bucket < p->t1 && sqlite3_column_type(st, 3) != SQLITE_NULL &&
                (ki = find_id(only, proc)) != UINT32_MAX) {
                /* An activity row, as cw__report_load_keys() applies it. */
                cw__proc_keys_t *k = &only->keys[ki];
                int64_t cand = k->level + sqlite3_column_int64(st, 5);
                if (cand > k->peak) {
                    k->peak = cand;
                    k->peak_ns = bucket + sqlite3_column_int64(st, 6);
                }
                k->level += sqlite3_column_int64(st, 4);
            }
            bool skipped = false;
            const void *data = sqlite3_column_blob(st, 2);
            size_t size = (size_t)sqlite3_column_bytes(st, 2);
            if (sd.known && (i == head || i == head + 1) &&
                (err = sides_add(&sd, data, size, bucket, proc))) {
                if (err == CW_EDB)
                    cw_diag_set(d, err,
                                "querying window figures: a cell of instance %" PRIu32
                                " is not readable",
                                proc);
                break;
            }
            if (i == head) continue; /* before t0: its sides only */
            if (hs.on) {
                err = cw__hsides_add_cell(&hs, sv[i].split, a, data, size, bucket, proc, p, d);
                continue;
            }
            err = cw__sums_add_cell_split(a, data, size, bucket, proc, p->t0, p->t1, m0,
                                          i == mid ? m0 + 1 : m0, false, sides_resolve, &sd,
                                          &skipped, d);
            if (!err && skipped) err = cw__fix_add(&fx, bucket, proc);
        }
        if (!err && rc != SQLITE_DONE) err = cw__store_dberr(s, "querying window figures", d);
        sqlite3_reset(st);
        if (!err && i == mid) {
            /* The rows the minute cells left out (their stack's sides not
             * known), from the raw seconds of each noted (minute, process). */
            cw__fix_read_t r = {.tier = 0,
                                .span = t[1].width,
                                .step = t[0].width,
                                .alo = m0,
                                .ahi = m0 + t[1].width,
                                .resolve = sides_resolve,
                                .ctx = &sd};
            err = cw__fixes_run(s, &r, p, &fx, a, d);
            s->test.minute_fixes += fx.n;
        }
        if (!err && i == mid &&
            (sqlite3_bind_text(at, 4, only->json, -1, SQLITE_TRANSIENT) != SQLITE_OK ||
             sqlite3_bind_text(scan, 4, only->json, -1, SQLITE_TRANSIENT) != SQLITE_OK))
            err = cw_diag_set(d, CW_ENOMEM, "querying window figures: out of memory");
    }
    if (!err) err = cw__hsides_fix(s, t, &hs, p, a, d);
    free(fx.v);
    cw_keymap_free(&sd.map);
    free(sd.f);
    cw__cell_rows_free(&sd.rows);
    cw__hsides_free(&hs);
    if (!err && mid >= 0) s->test.minute_splits++;
    return cw__sums_acc_done(a, err, d);
}

/* ---- the handle's keys cache -------------------------------------------------
 *
 * A ranked report needs per process only sums of its cells' columns
 * (bytes, released, events), and a sum over the
 * window [t0, t1) is the sum of the cells before t1 less that before t0.
 * So the handle keeps, for a few x, per process "the sums of every cell
 * before x" without the BEFORE cells of the tier its staircase starts in
 * (as the report cache, store_report_sums.c: every bucket before a tier's
 * end is final, and only a fold, which moves that tier's start or
 * horizon, rewrites old ones; rundown adds to BEFORE cells at any time, so
 * those are read every time). A later x adds the cells of the buckets
 * between (cw__report_delta_segments): a window polled every few seconds
 * reads the seconds stored since at each of its ends, not every cell of
 * the window (10,000 live processes: an hour holds 600,000 minute
 * cells). Unlike the report cache's, a process's sums are kept when they
 * come to nothing while the process may still have cells: a window's
 * Size and events are differences of gross sums, which an entry without
 * them could not give. A process *settled* before σ (keys_exited: it
 * exited before σ, or, a group of folded instances, GROUP_OPEN_NS after
 * its latest exit; no BEFORE cell; its sums came to nothing, bytes equal
 * to released) has no cell from σ on, so any window from σ on gets from
 * it no activity and nothing outstanding at t0: it ranks nowhere. Every
 * entry of the handle leaves out the processes settled before the same
 * σ, the lowest x of its entries (keys_settle; kentry_t.settled), so a
 * window's two ends left out the same ones with the same sums, and their
 * differences are exact. An entry then holds the processes alive at σ
 * and those that ended after it: a dashboard polling the last hour of a
 * machine starting 40 processes a second keeps an hour of them, not
 * every one its cells name since the start (KEYS_CACHE_MAX_PROCS at most,
 * 32 bytes each; a window that needs more is read from the cells). A
 * window below σ builds its entry afresh and drops the others (they left
 * out processes it must hold); an afresh fill leaves settled processes
 * out as it goes, at a bucket's start, when it holds more than half
 * of KEYS_CACHE_MAX_PROCS. An entry's sums are one array sorted by process,
 * with no map: a bucket's cells come in process order, so each is found
 * from where the previous one was (a gallop, then a binary search), and
 * the processes new to the entry, nearly always newer than all it holds,
 * are appended (else merged) at the end of the bucket; a request's three
 * ends are then joined in one pass. A map's slots held 72 more bytes a
 * process, touched for the first time by a handle's first list (a fresh
 * page costs about 12 us on a VM). Entries: the three ends of the
 * dashboard's two windows (their ends are the same). A handle the pool
 * leaves idle drops them (store_pool.c). Each handle is used by one
 * thread at a time, so is its cache. */
#define KEYS_CACHE_ENTRIES 3
#define KEYS_CACHE_MAX_PROCS 262144u
#define KEYS_CACHE_MAX_GAP (2 * INT64_C(3600000000000))
/* How long after its latest stored exit a group of folded instances
 * (DESIGN.md, "Short-lived processes") may still gain a member: members
 * start within the group's hour and exit within fold_lifetime (at most
 * an hour, config.c) of their start, and the latest exit is not before
 * the group's start. */
#define GROUP_OPEN_NS (2 * INT64_C(3600000000000))

/* A process's sums of cells before x. */
typedef struct ksum {
    uint32_t proc;
    int64_t cb, rb, ev; /* bytes, released, events */
} ksum_t;

typedef struct kentry {
    bool valid;
    int tier; /* whose BEFORE cells are not in the sums */
    int64_t start, horizon, x;
    int64_t settled; /* the processes settled before it are left out (INT64_MIN: none) */
    uint64_t used;
    ksum_t *v; /* sorted by proc */
    uint32_t n;
    size_t cap;
} kentry_t;

/* After a window whose cells named more processes than an entry holds,
 * the next ranked reports of the handle read the cells without trying
 * the cache (each try reads cells until it is too big): 1,024 of them (a
 * dashboard polling every 5 s: 85 min), then it tries again. */
#define KEYS_SKIP_AFTER_OVERSIZE 1024

struct cw__keys_cache {
    kentry_t e[KEYS_CACHE_ENTRIES];
    uint64_t clock;
    uint32_t skip; /* ranked reports left to answer without it */
    /* A row of bucket sums was found damaged (kadd_sums): this handle's
     * fills read the cells those rows sum from then on. */
    bool sums_damaged;
    /* The last window keys_fit found too big: at least nf_n exits in
     * [nf_lo, nf_hi), counted while tier 0's horizon was nf_horizon. */
    int64_t nf_lo, nf_hi, nf_n, nf_horizon;
    /* The room of a ranked report's keys (cw__report_load_keys,
     * cw__report_keys_cached), the handle's: the keys they return are
     * borrowed until the handle's next ranked report. Kept with the
     * cache, so a list polled on a busy machine (71,564 processes: 5 MB
     * of keys) writes into pages it already has instead of fresh ones
     * (blocks of 256 KiB on are given back at free: service.c). */
    cw__proc_keys_t *room;
    size_t room_cap;
    /* Cells read and buckets they span, of the minute (1) and hour (2)
     * tiers, by this handle's fills: what a bucket of each holds on this
     * machine (keys_cost). */
    uint64_t rows[3], buckets[3];
};

/* Per process, the columns of the cells of tier ?1 with bucket in [?2, ?3). */
static const char SQL_Q_KEY_SUMS[] = "SELECT proc, bytes, released, events, bucket FROM cells"
                                     " WHERE tier = ?1 AND layer = cw_layer() AND bucket >= ?2"
                                     " AND bucket < ?3";

/* The instances that exited in [?1, ?2), and whether each is a group of
 * folded ones: from the index processes_exit (exit_ns, folded) alone
 * (schema/011_exit_index.sql). */
static const char SQL_Q_EXITED[] = "SELECT id, exit_ns, folded IS NOT NULL FROM processes"
                                   " WHERE exit_ns >= ?1 AND exit_ns < ?2";

/* The instances that exited in [?1, ?2), up to ?3: a lower bound of the
 * processes an entry at ?2 holds when every entry leaves out those
 * settled before ?1. */
static const char SQL_Q_EXITED_COUNT[] =
    "SELECT count(*) FROM (SELECT 1 FROM processes WHERE exit_ns >= ?1 AND exit_ns < ?2 LIMIT ?3)";

static void kentry_drop(kentry_t *e)
{
    free(e->v);
    memset(e, 0, sizeof *e);
    e->settled = INT64_MIN;
}

/* A process settled at `at` (keys_exited). */
typedef struct settled {
    uint32_t proc;
    int64_t at;
} settled_t;

typedef struct settled_set {
    settled_t *v; /* in the order of their exits */
    uint32_t n;
    size_t cap;
} settled_set_t;

/* Whether the sorted sums v[0, n) name proc. */
static bool ksums_have(const ksum_t *v, uint32_t n, uint32_t proc)
{
    uint32_t i = cw__proc_seek(v, sizeof *v, n, 0, proc);
    return i < n && v[i].proc == proc;
}

/* Adds to *out the instances exited in [a, b) that settled in [lo, hi)
 * and have no BEFORE cell (bf: the BEFORE cells' processes). */
static int exited_scan(cw_store_t *s, sqlite3_stmt *st, int64_t a, int64_t b, int64_t lo,
                       int64_t hi, const kentry_t *bf, settled_set_t *out, cw_diag_t *d)
{
    int rc, err = 0;
    sqlite3_bind_int64(st, 1, a);
    sqlite3_bind_int64(st, 2, b);
    while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
        int64_t exit = sqlite3_column_int64(st, 1);
        bool group = sqlite3_column_int(st, 2) != 0;
        int64_t at =
            group ? (exit > INT64_MAX - GROUP_OPEN_NS ? INT64_MAX : exit + GROUP_OPEN_NS) : exit;
        uint32_t proc = (uint32_t)sqlite3_column_int64(st, 0);
        if (at < lo || at >= hi || ksums_have(bf->v, bf->n, proc)) continue;
        if (CW_RESERVE(out->v, out->cap, out->n + 1u)) {
            err = cw_diag_set(d, CW_ENOMEM, "querying window figures: out of memory");
            break;
        }
        out->v[out->n++] = (settled_t){proc, at};
    }
    if (!err && rc != SQLITE_DONE) err = cw__store_dberr(s, "reading the processes' exits", d);
    sqlite3_reset(st);
    return err;
}

/* The processes settled in [lo, hi) (lo < hi), into *out: the exits of
 * [lo, hi), and the groups' of [lo, hi) less GROUP_OPEN_NS (one scan when
 * the two ranges meet). 0, CW_ENOMEM or CW_EDB. */
static int keys_exited(cw_store_t *s, int64_t lo, int64_t hi, const kentry_t *bf,
                       settled_set_t *out, cw_diag_t *d)
{
    sqlite3_stmt *st = NULL;
    int err = cw__store_stmt(s, CW__ST_Q_EXITED, SQL_Q_EXITED, &st, d);
    out->n = 0;
    if (err) return err;
    if (lo == INT64_MIN || hi - lo >= GROUP_OPEN_NS) {
        int64_t a = lo < INT64_MIN + GROUP_OPEN_NS ? INT64_MIN : lo - GROUP_OPEN_NS;
        err = exited_scan(s, st, a, hi, lo, hi, bf, out, d);
    } else {
        err = exited_scan(s, st, lo, hi, lo, hi, bf, out, d);
        if (!err)
            err = exited_scan(s, st, lo - GROUP_OPEN_NS, hi - GROUP_OPEN_NS, lo, hi, bf, out, d);
    }
    return err;
}

/* Leaves out of e the processes of set settled from e->settled on (all
 * settled before `to`) whose sums came to nothing; e->settled = to. e's
 * sums are sorted (no run waiting), and every cell before `to` is in
 * them. Each one left out is marked (its events -1: a sum of events is
 * never negative), then the others are moved together. */
static void kentry_settle(cw_store_t *s, kentry_t *e, const settled_set_t *set, int64_t to)
{
    uint32_t i = 0, marked = 0;
    for (uint32_t j = 0; j < set->n; j++) {
        if (set->v[j].at < e->settled) continue;
        /* Exits come nearly in the order of the processes' numbers
         * (numbered as they start): one below the last found is sought
         * from the start. */
        if (i > 0 && i <= e->n && e->v[i - 1].proc >= set->v[j].proc) i = 0;
        i = cw__proc_seek(e->v, sizeof *e->v, e->n, i, set->v[j].proc);
        ksum_t *x = &e->v[i];
        if (i < e->n && x->proc == set->v[j].proc && x->cb == x->rb && x->ev != -1) {
            x->ev = -1;
            marked++;
        }
    }
    uint32_t w = 0;
    for (uint32_t k = 0; marked && k < e->n; k++)
        if (e->v[k].ev != -1) e->v[w++] = e->v[k];
    if (marked) e->n = w;
    s->test.keys_settled += marked;
    e->settled = to;
}

/* Brings each entry of es[0, n) (NULL ones skipped) to leave out the
 * processes settled before `to`, which is at most each one's x. */
static int keys_settle(cw_store_t *s, kentry_t *const *es, int n, const kentry_t *bf, int64_t to,
                       cw_diag_t *d)
{
    int64_t lo = to;
    for (int i = 0; i < n; i++)
        if (es[i] && es[i]->settled < lo) lo = es[i]->settled;
    if (lo >= to) return 0;
    settled_set_t set = {0};
    int err = keys_exited(s, lo, to, bf, &set, d);
    for (int i = 0; i < n && !err; i++)
        if (es[i] && es[i]->settled < to) kentry_settle(s, es[i], &set, to);
    free(set.v);
    return err;
}

/* The handle's release slot CW__REL_KEYS. */
static void keys_release(cw_store_t *s)
{
    struct cw__keys_cache *c = s->r.keys_cache;
    for (int i = 0; c && i < KEYS_CACHE_ENTRIES; i++)
        kentry_drop(&c->e[i]);
    if (c) free(c->room);
    free(c);
    s->r.keys_cache = NULL;
    cw__report_caches_publish(s, false);
}

size_t cw__keys_cache_bytes(const cw_store_t *s)
{
    const struct cw__keys_cache *c = s->r.keys_cache;
    size_t b = c ? sizeof *c + c->room_cap * sizeof *c->room : 0;
    for (int i = 0; c && i < KEYS_CACHE_ENTRIES; i++)
        b += c->e[i].cap * sizeof *c->e[i].v;
    return b;
}

/* The handle's keys cache, made when it has none; NULL on ENOMEM. */
static struct cw__keys_cache *keys_cache(cw_store_t *s)
{
    struct cw__keys_cache *c = s->r.keys_cache;
    if (!c && !(c = s->r.keys_cache = calloc(1, sizeof *c))) return NULL;
    cw__db_on_release(s, CW__REL_KEYS, keys_release);
    return c;
}

/* Takes the handle's room for keys (*v, *cap; NULL and 0 when it has
 * none yet), to grow and give back with keys_room_keep. 0 or CW_ENOMEM. */
static int keys_room(cw_store_t *s, cw__proc_keys_t **v, size_t *cap)
{
    struct cw__keys_cache *c = keys_cache(s);
    if (!c) return CW_ENOMEM;
    *v = c->room;
    *cap = c->room_cap;
    c->room = NULL;
    c->room_cap = 0;
    return 0;
}

/* Gives the room taken by keys_room back to the handle, grown. */
static void keys_room_keep(cw_store_t *s, cw__proc_keys_t *v, size_t cap)
{
    struct cw__keys_cache *c = s->r.keys_cache; /* made by keys_room */
    c->room = v;
    c->room_cap = cap;
}

static uint32_t keys_cache_max(const cw_store_t *s)
{
    return s->test.read_cache_rows ? s->test.read_cache_rows : KEYS_CACHE_MAX_PROCS;
}

_Static_assert(offsetof(ksum_t, proc) == 0, "proc_at reads the process first");

/* What an afresh fill may leave out as it goes (kentry_add): the
 * processes settled before the bucket it comes to, up to `to`. */
typedef struct settle_ctx {
    const kentry_t *bf; /* the BEFORE cells' sums */
    int64_t to;
    int64_t fit_to; /* keys_fit found [to, fit_to) fits: no fill up to it counts again */
} settle_ctx_t;

/* One fill's adding of rows to an entry (kentry_add). */
typedef struct kadd {
    cw_store_t *s;
    kentry_t *e;
    const settle_ctx_t *sc;
    int sign;
    uint32_t settle_over;
    cw__proc_run_t run;
    int64_t last; /* the bucket of the last row added */
    uint64_t *rows;
} kadd_t;

/* Adds one cell's sums (process proc, bucket) to the entry; rows come in
 * (bucket, process) order. With sc (an afresh fill whose cells so far are
 * every cell before this one's bucket), at a bucket's start, when the entry
 * holds more than half it may, the processes settled before it (and
 * sc->to) are left out. */
static int kadd_row(kadd_t *a, uint32_t proc, int64_t bucket, int64_t cb, int64_t rb, int64_t ev,
                    cw_diag_t *d)
{
    kentry_t *e = a->e;
    int err = 0;
    bool added;
    if (a->sc && bucket != a->last && e->n + a->run.m > a->settle_over) {
        int64_t to = bucket < a->sc->to ? bucket : a->sc->to;
        kentry_t *one = e;
        if (to > e->settled && !(err = cw__proc_settle(&a->run, &e->v, &e->n, sizeof *e->v))) {
            err = keys_settle(a->s, &one, 1, a->sc->bf, to, d);
            a->s->test.keys_settle_fills++;
        }
        if (err) return err;
    }
    a->last = bucket;
    if (a->rows) ++*a->rows;
    ksum_t *x = cw__proc_row(&a->run, &e->v, &e->cap, &e->n, sizeof *e->v, proc, &added, &err);
    if (!x) return err ? err : CW_ENOMEM;
    x->cb += a->sign * cb;
    x->rb += a->sign * rb;
    x->ev += a->sign * ev;
    return 0;
}

/* Adds the cells of tier k with bucket in [lo, hi), read by st
 * (SQL_Q_KEY_SUMS): they come in the primary key's order, so processes
 * rise within a bucket (cw__proc_row). */
static int kadd_cells(kadd_t *a, sqlite3_stmt *st, int k, int64_t lo, int64_t hi, cw_diag_t *d)
{
    int err = 0, rc;
    sqlite3_bind_int(st, 1, k);
    sqlite3_bind_int64(st, 2, lo);
    sqlite3_bind_int64(st, 3, hi);
    while ((rc = sqlite3_step(st)) == SQLITE_ROW &&
           !(err = kadd_row(a, (uint32_t)sqlite3_column_int64(st, 0), sqlite3_column_int64(st, 4),
                            sqlite3_column_int64(st, 1), sqlite3_column_int64(st, 2),
                            sqlite3_column_int64(st, 3) /* NULL: no activity row, 0 */, d)))
        ;
    if (!err && rc != SQLITE_DONE) err = cw__store_dberr(a->s, "querying window figures", d);
    sqlite3_reset(st);
    return err;
}

static const char *const sums_table[CW_TIERS] = {"second_sums", "minute_sums", "hour_sums"};

/* A bucket's row of second_sums (k 0), minute_sums (k 1) or hour_sums
 * (k 2) (schema/012_bucket_sums.sql, 013_hour_sums.sql), decoded into the
 * entry as its cells would be. */
static int kadd_sums(kadd_t *a, int k, int64_t bucket, const unsigned char *p, size_t n,
                     int64_t procs, cw_diag_t *d)
{
    size_t pos = 0;
    uint64_t proc = 0, flags;
    if (cw_varint_read(p, n, &pos, &flags) || flags > 1) goto damaged;
    int64_t unit = flags ? 4096 : 1; /* (whole pages) */
    for (int64_t i = 0; i < procs; i++) {
        uint64_t v[4];
        for (int j = 0; j < 4; j++)
            if (cw_varint_read(p, n, &pos, &v[j])) goto damaged;
        proc += v[0];
        if (proc > UINT32_MAX) goto damaged;
        int err = kadd_row(a, (uint32_t)proc, bucket, cw_unzigzag(v[1]) * unit,
                           cw_unzigzag(v[2]) * unit, cw_unzigzag(v[3]), d);
        if (err) return err;
    }
    if (pos != n) goto damaged;
    if (k == 0)
        a->s->test.keys_second_sums++;
    else if (k == 1)
        a->s->test.keys_minute_sums++;
    else
        a->s->test.keys_hour_sums++;
    return 0;
damaged:
    /* The rows are derived from the cells (store_tiers.c): the fill is
     * dropped, its list read from every cell (cw__report_keys_cached),
     * and this handle's later fills read the cells. Logged once a handle. */
    if (a->s->r.keys_cache && !a->s->r.keys_cache->sums_damaged) {
        a->s->r.keys_cache->sums_damaged = true;
        CW_LOGW("%s: the row of %s of bucket %" PRId64 " is damaged: reading the cells it sums "
                "instead (run `PRAGMA integrity_check` on a copy of the file)",
                a->s->path, sums_table[k], bucket);
    }
    a->s->test.keys_sums_damaged++;
    return cw_diag_set(d, CW_EDB, "%s: the row of %s of bucket %" PRId64 " is damaged", a->s->path,
                       sums_table[k], bucket);
}

/* The buckets of tier k (0, 1 or 2) of the commit layer in [lo, hi): a
 * row of second_sums, minute_sums or hour_sums for each that has one, the
 * cells of those between (older seconds; minutes and hours whose rows the
 * writer has not written yet after an upgrade). */
static const char SQL_Q_SECOND_SUMS[] =
    "SELECT bucket, procs, data FROM second_sums WHERE bucket >= ?1 AND bucket < ?2";
static const char SQL_Q_MINUTE_SUMS[] =
    "SELECT bucket, procs, data FROM minute_sums WHERE bucket >= ?1 AND bucket < ?2";
static const char SQL_Q_HOUR_SUMS[] =
    "SELECT bucket, procs, data FROM hour_sums WHERE bucket >= ?1 AND bucket < ?2";

static int kadd_sum_rows(kadd_t *a, sqlite3_stmt *st, int k, int64_t width, int64_t lo, int64_t hi,
                         cw_diag_t *d)
{
    sqlite3_stmt *ms = NULL;
    int64_t at = lo;
    int rc, err = k == 2   ? cw__store_stmt(a->s, CW__ST_Q_HOUR_SUMS, SQL_Q_HOUR_SUMS, &ms, d)
                  : k == 1 ? cw__store_stmt(a->s, CW__ST_Q_MINUTE_SUMS, SQL_Q_MINUTE_SUMS, &ms, d)
                           : cw__store_stmt(a->s, CW__ST_Q_SECOND_SUMS, SQL_Q_SECOND_SUMS, &ms, d);
    if (err) return err;
    sqlite3_bind_int64(ms, 1, lo);
    sqlite3_bind_int64(ms, 2, hi);
    while (!err && (rc = sqlite3_step(ms)) == SQLITE_ROW) {
        int64_t b = sqlite3_column_int64(ms, 0);
        if (b > at) err = kadd_cells(a, st, k, at, b, d);
        if (!err)
            err = kadd_sums(a, k, b, sqlite3_column_blob(ms, 2),
                            (size_t)sqlite3_column_bytes(ms, 2), sqlite3_column_int64(ms, 1), d);
        at = b + width;
    }
    if (!err && rc != SQLITE_DONE) err = cw__store_dberr(a->s, "querying bucket sums", d);
    cw__store_stmt_done(ms);
    if (!err && at < hi) err = kadd_cells(a, st, k, at, hi, d);
    return err;
}

/* Adds the cells of tier k with bucket in [lo, hi) to e (its BEFORE cells
 * when lo is INT64_MIN), the raw and minute tiers' commit cells from
 * their rows of bucket sums. With sc (an afresh fill whose cells so far
 * are every cell before lo), at a bucket's start, when e holds more than
 * half it may, the processes settled before it (and sc->to) are left out
 * (kadd_row). 0,
 * CW_ENOMEM, CW_EDB or CW_ERANGE (more processes than an entry holds: the
 * caller drops e). */
static int kentry_add(cw_store_t *s, sqlite3_stmt *st, const cw__tier_t *t, kentry_t *e, int k,
                      int64_t lo, int64_t hi, int sign, const settle_ctx_t *sc, uint64_t *rows,
                      cw_diag_t *d)
{
    uint32_t max = keys_cache_max(s);
    kadd_t a = {
        .s = s,
        .e = e,
        .sc = sc,
        .sign = sign,
        .settle_over = s->test.keys_settle_over ? s->test.keys_settle_over : max / 2,
        .run = {.max = max},
        .last = INT64_MIN,
        .rows = rows,
    };
    bool rows_ok = !(s->r.keys_cache && s->r.keys_cache->sums_damaged);
    int err = k >= 0 && k < CW_TIERS && s->layer == 0 && lo != INT64_MIN && rows_ok
                  ? kadd_sum_rows(&a, st, k, t[k].width, lo, hi, d)
                  : kadd_cells(&a, st, k, lo, hi, d);
    if (!err) err = cw__proc_settle(&a.run, &e->v, &e->n, sizeof *e->v);
    return err;
}

/* The staircase of segments before x (cw__report_plan's backward part),
 * into seg (*n). false when it is not made of final buckets from BEFORE on
 * (then it cannot be kept). */
static bool back_segments(const cw__tier_t *t, int64_t x, segment_t *seg, int *n)
{
    pick_t at = {.k = 0, .t0 = x, .t1 = x};
    int nback;
    cw__report_plan(t, &at, seg, &nback);
    *n = nback;
    if (nback == 0 || seg[0].lo != INT64_MIN || seg[nback - 1].hi != x) return false;
    for (int i = 0; i < nback; i++)
        if (seg[i].hi > t[seg[i].tier].end) return false;
    return true;
}

/* The buckets of tier k (1 or 2) in [lo, hi) that it holds cells of
 * (none before its start or horizon). */
static int64_t buckets_in(const cw__tier_t *t, int k, int64_t lo, int64_t hi)
{
    int64_t from = t[k].start > t[k].horizon ? t[k].start : t[k].horizon;
    if (lo < from) lo = from;
    return hi > lo ? (hi - lo) / t[k].width : 0;
}

/* About the cells a fill reads for `minutes` minutes of the minute tier
 * and `hours` hours of the hour tier (hours -1: the open hour's cells),
 * from the cells a minute and an hour held in this handle's fills so
 * far. With long-lived processes an hour holds about a minute's cells,
 * one a process; on a busy machine whose processes live seconds, each
 * is in one or two minutes, and an hour holds about its minutes' cells
 * together (the busy mix's open hour: 70,417 cells for 29 minutes of
 * 78,049), so taking minutes away from it costs more than it saves.
 * Before the handle has read an hour, an hour is taken for a minute.
 * The open hour's cells are an hour's at most, and its minutes' at
 * most. */
static int64_t keys_cost(const struct cw__keys_cache *c, const cw__tier_t *t, int64_t minutes,
                         int hours)
{
    int64_t dm = c->buckets[1] ? (int64_t)(c->rows[1] / c->buckets[1]) + 1 : 1;
    int64_t dh = c->buckets[2] ? (int64_t)(c->rows[2] / c->buckets[2]) + 1 : dm;
    if (hours >= 0) return minutes * dm + hours * dh;
    const cw__tier_t *o = &t[CW__TIER_OPEN];
    int64_t open = (o->end - o->start) / t[1].width * dm;
    return minutes * dm + (dh < open ? dh : open);
}

/* The staircase add[0, *n) before x (BEFORE left out), with the minutes
 * of the open hour [H, f) (f: x's minute) read downwards when that reads
 * fewer cells (keys_cost): the open hour's cells [H, M) (db.h) less the minutes
 * [c, M) and the raw seconds [x, c) (c: x rounded up to a minute). The
 * sums are plain sums of the cells' columns, so taking some away is
 * exact. x at 50 minutes past the hour, the minute tier ending at 59:
 * the open hour's cells and 8 minutes instead of 50 minutes. */
static void keys_down(cw_store_t *s, const cw__tier_t *t, int64_t x, segment_t *add, int *n)
{
    const cw__tier_t *o = &t[CW__TIER_OPEN];
    int64_t w = t[1].width, f = cw_floor_to(x, w), c = ceil_to(x, w);
    if (o->start == INT64_MIN || x <= o->start || c > o->end) return;
    int i = 0;
    while (i < *n && !(add[i].tier == 1 && add[i].lo == o->start && add[i].hi == f))
        i++;
    if (i == *n || keys_cost(s->r.keys_cache, t, (o->end - c) / w, -1) >=
                       keys_cost(s->r.keys_cache, t, buckets_in(t, 1, o->start, f), 0))
        return;
    /* add[i] is the staircase's minutes, and after it only the raw
     * seconds [f, x) (when x is not on a minute). */
    int m = 0;
    add[i + m++] = (segment_t){.tier = CW__TIER_OPEN, .lo = o->start, .hi = o->end};
    if (c < o->end) add[i + m++] = (segment_t){.tier = 1, .lo = c, .hi = o->end, .minus = true};
    if (x < c) add[i + m++] = (segment_t){.tier = 0, .lo = x, .hi = c, .minus = true};
    *n = i + m;
    s->test.keys_down++;
}

/* Puts r[0, m) in place of add[i] (add holds *n); false, add as it was,
 * when MAX_SEGMENTS would not hold them. */
static bool splice(segment_t *add, int *n, int i, const segment_t *r, int m)
{
    if (*n - 1 + m > MAX_SEGMENTS) return false;
    memmove(&add[i + m], &add[i + 1], (size_t)(*n - i - 1) * sizeof *add);
    memcpy(&add[i], r, (size_t)m * sizeof *r);
    *n += m - 1;
    return true;
}

/* The closed hours in the minute stretches of add[0, *n), read as the
 * hour tier's cells; returns how many stretches it so read. A window's
 * end moving on from its start's entry an hour or more back read every
 * minute between. A stretch [lo, hi) reads the hours [hs, he) as their
 * cells and the rest as minutes: [lo, hs) and [he, hi) added when hs is
 * lo rounded up to an hour and he hi rounded down, [hs, lo) and [hi, he)
 * taken away when they are rounded the other way. The whole hours inside
 * it are always so read; rounding an end the other way is taken where
 * that reads fewer cells (keys_cost): 20 minutes into an hour, the
 * stretch [h, h + 20 min) is read as 20 minutes, 40 minutes into it as the
 * hour less the 20 minutes after. The minutes taken away must be in the
 * minute tier and the hours in the hour tier.
 * An hour's cells are one a process that has any in the hour, so never
 * more than its minutes' (each such process has at least one); the sums
 * are sums of columns, so taking some away is exact, and the minus
 * segments come right after the hours', as in keys_open: before them an
 * afresh fill's sums at a bucket's start are every cell before it, or
 * before lo for processes with no cell in [hs, lo) (a process settled
 * before hs has none). 10,000 live processes, the last hour's first list
 * at 26 minutes past the hour: 33 minutes of the hour before (330,000
 * cells) -> its 10,000 cells and 26 minutes. */
static int keys_hours(const struct cw__keys_cache *c, const cw__tier_t *t, segment_t *add, int *n)
{
    const int64_t hw = t[2].width;
    int done = 0;
    if (t[2].start == INT64_MIN) return 0;
    int64_t from2 = t[2].horizon > t[2].start ? t[2].horizon : t[2].start;
    int64_t from1 = t[1].horizon > t[1].start ? t[1].horizon : t[1].start;
    for (int i = 0; i < *n; i++) {
        segment_t x = add[i];
        /* (from before the hour tier's start: no hour to read; an afresh
         * fill's first stretch starts at INT64_MIN + 1) */
        if (x.tier != 1 || x.minus || x.lo < t[2].start) continue;
        const int64_t los[2] = {ceil_to(x.lo, hw), cw_floor_to(x.lo, hw)};
        int64_t hc = x.hi < t[2].end ? x.hi : t[2].end; /* (the rest may be the open hour's) */
        const int64_t his[2] = {cw_floor_to(hc, hw), ceil_to(hc, hw)};
        /* hs == he: the minutes as they are */
        int64_t hs = 0, he = 0, best = keys_cost(c, t, buckets_in(t, 1, x.lo, x.hi), 0);
        for (int j = 0; j < 4; j++) {
            int64_t a = los[j >> 1], b = his[j & 1];
            if (a >= b || a < from2 || b > t[2].end || (a < x.lo && a < from1) ||
                (b > x.hi && b > t[1].end))
                continue;
            int64_t lm = a < x.lo ? buckets_in(t, 1, a, x.lo) : buckets_in(t, 1, x.lo, a);
            int64_t hm = b > x.hi ? buckets_in(t, 1, x.hi, b) : buckets_in(t, 1, b, x.hi);
            int64_t cost = keys_cost(c, t, lm + hm, (int)((b - a) / hw));
            if (j == 0 || cost < best) { /* (j 0: the whole hours, always read as hours) */
                best = cost;
                hs = a;
                he = b;
            }
        }
        if (hs == he) continue;
        segment_t r[5];
        int m = 0;
        if (x.lo < hs) r[m++] = (segment_t){.tier = 1, .lo = x.lo, .hi = hs};
        r[m++] = (segment_t){.tier = 2, .lo = hs, .hi = he};
        if (hs < x.lo) r[m++] = (segment_t){.tier = 1, .lo = hs, .hi = x.lo, .minus = true};
        if (x.hi < he) r[m++] = (segment_t){.tier = 1, .lo = x.hi, .hi = he, .minus = true};
        if (he < x.hi) r[m++] = (segment_t){.tier = 1, .lo = he, .hi = x.hi};
        if (!splice(add, n, i, r, m)) return done;
        i += m - 1;
        done++;
    }
    return done;
}

/* The minutes of add[0, *n) that overlap the open hour [H, M), read as
 * its cells where that reads fewer (keys_cost): a minute segment [lo, hi)
 * whose part [a, b) inside the hour has more cells than the open hour's
 * and the minutes [H, a) and [b, M) taken away from them (no minute segment
 * goes past M, the minute tier's end: db.h). As in keys_down the
 * sums are plain sums of the cells' columns, so it is exact; the minus
 * segments come right after the open hour's, so an afresh fill's sums at
 * any later bucket's start are still every cell before it. A window's
 * end moving from the previous hour to the open one (a first list of the
 * last hour reads its t1 from t0's entry): the open hour's cells, not
 * every minute of it. */
static int keys_open(const struct cw__keys_cache *c, const cw__tier_t *t, segment_t *add, int *n)
{
    const cw__tier_t *o = &t[CW__TIER_OPEN];
    int64_t w = t[1].width;
    int done = 0;
    if (o->start == INT64_MIN || o->end - o->start < 2 * w) return 0;
    for (int i = 0; i < *n; i++) {
        segment_t x = add[i];
        if (x.tier != 1 || x.minus) continue;
        int64_t a = x.lo > o->start ? x.lo : o->start, b = x.hi < o->end ? x.hi : o->end;
        if (b - a <= w || keys_cost(c, t, buckets_in(t, 1, o->start, a) + (o->end - b) / w, -1) >=
                              keys_cost(c, t, buckets_in(t, 1, a, b), 0))
            continue;
        segment_t r[4];
        int m = 0;
        if (x.lo < a) r[m++] = (segment_t){.tier = 1, .lo = x.lo, .hi = a};
        r[m++] = (segment_t){.tier = CW__TIER_OPEN, .lo = o->start, .hi = o->end};
        if (o->start < a) r[m++] = (segment_t){.tier = 1, .lo = o->start, .hi = a, .minus = true};
        if (b < o->end) r[m++] = (segment_t){.tier = 1, .lo = b, .hi = o->end, .minus = true};
        if (!splice(add, n, i, r, m)) return done;
        i += m - 1;
        done++;
    }
    return done;
}

/* The instances that exited in [lo, hi), up to `most`, into *n. */
static int exited_count(cw_store_t *s, int64_t lo, int64_t hi, int64_t most, int64_t *n,
                        cw_diag_t *d)
{
    sqlite3_stmt *q = NULL;
    int err = cw__store_stmt(s, CW__ST_Q_EXITED_COUNT, SQL_Q_EXITED_COUNT, &q, d);
    *n = 0;
    if (err) return err;
    sqlite3_bind_int64(q, 1, lo);
    sqlite3_bind_int64(q, 2, hi);
    sqlite3_bind_int64(q, 3, most);
    if (sqlite3_step(q) != SQLITE_ROW) err = cw__store_dberr(s, "querying window figures", d);
    if (!err) *n = sqlite3_column_int64(q, 0);
    sqlite3_reset(q);
    return err;
}

/* Counted past an entry's room, so a window polled after it is known too
 * big from the exits since its start alone. */
#define KEYS_FIT_SLACK 65536

/* *fit false when more instances exited in [lo, hi) than an entry
 * holds: an entry at hi leaving out those settled before lo would hold
 * them all, so a fill is not tried (the day of a busy machine is read
 * from the cells). Unlike a fill that turned out too big, this does not
 * keep the handle's next ranked reports from trying the cache: the
 * dashboard's shorter windows, asked in turn with the day, fit. The
 * count (of the index, up to the room and KEYS_FIT_SLACK more) is kept:
 * a later window [lo', hi') with lo' >= lo and hi' >= hi has at least
 * that many less those that exited in [lo, lo'), so a day polled every
 * few seconds counts the exits of those seconds only. 0 or CW_EDB. */
static int keys_fit(cw_store_t *s, const cw__tier_t *t, int64_t lo, int64_t hi, bool *fit,
                    cw_diag_t *d)
{
    struct cw__keys_cache *c = s->r.keys_cache;
    int64_t max = keys_cache_max(s), n, gone;
    int err = 0;
    *fit = true;
    if (c->nf_n > max && lo >= c->nf_lo && hi >= c->nf_hi && c->nf_horizon == t[0].horizon) {
        if ((err = exited_count(s, c->nf_lo, lo, c->nf_n, &gone, d))) return err;
        if (c->nf_n - gone > max) {
            *fit = false;
            s->test.keys_too_many++;
            return 0;
        }
    }
    if ((err = exited_count(s, lo, hi, max + 1 + KEYS_FIT_SLACK, &n, d))) return err;
    if (n > max) {
        *fit = false;
        c->nf_lo = lo;
        c->nf_hi = hi;
        c->nf_n = n;
        c->nf_horizon = t[0].horizon;
        s->test.keys_too_many++;
        s->test.keys_fit_counts++;
    }
    return 0;
}

/* About the cells add[0, n) reads (keys_cost); raw seconds as a minute's
 * cells for each minute they span, and one more. */
static int64_t plan_cost(const struct cw__keys_cache *c, const cw__tier_t *t, const segment_t *add,
                         int n)
{
    int64_t w = t[1].width, cost = 0;
    for (int i = 0; i < n; i++) {
        const segment_t *g = &add[i];
        if (g->tier == CW__TIER_OPEN)
            cost += keys_cost(c, t, 0, -1);
        else if (g->tier == 2)
            cost += keys_cost(c, t, 0, (int)buckets_in(t, 2, g->lo, g->hi));
        else if (g->tier == 1)
            cost += keys_cost(c, t, buckets_in(t, 1, g->lo, g->hi), 0);
        else
            cost += keys_cost(c, t, (g->hi - g->lo) / w + 1, 0);
    }
    return cost;
}

/* Where an afresh fill add[0, n) to x may leave a copy of its sums: after
 * its last coarse segment (the hour tier's, the open hour's) before
 * which every segment adds, each from where the one before ended, so
 * the sums there are every cell before its end. The index of that
 * segment, or -1. A first list of the last hour fills t0's entry from
 * the hours before t0's hour, then that hour's minutes to t0 (or the hour
 * less the minutes after t0): its end moves on from the copy (that hour's
 * cells, the open hour's) instead of from t0 (t0's hour's minutes again,
 * taken away from the hour's cells). */
static int snap_at(const segment_t *add, int n, int64_t x)
{
    int snap = -1;
    for (int i = 0; i + 1 < n; i++) {
        if (add[i].minus || (i > 0 && add[i].lo != add[i - 1].hi)) break;
        if (add[i].tier >= 2 && add[i].hi != x) snap = i;
    }
    return snap;
}

/* A copy of e's sums as they stand into sn, an entry at x; false (sn
 * invalid and empty: CW_RESERVE leaves it as it was) without the room. */
static bool kentry_copy(kentry_t *sn, const kentry_t *e, int64_t x, uint64_t used)
{
    kentry_drop(sn);
    if (e->n && CW_RESERVE(sn->v, sn->cap, e->n)) return false;
    if (e->n) memcpy(sn->v, e->v, (size_t)e->n * sizeof *e->v);
    sn->n = e->n;
    sn->tier = e->tier;
    sn->start = e->start;
    sn->horizon = e->horizon;
    sn->settled = e->settled;
    sn->x = x;
    sn->used = used;
    sn->valid = true;
    return true;
}

/* The entry holding the sums before x, brought up to date, into *out
 * (NULL when the cache cannot hold them): of the entries below x, the
 * one whose move on to x reads the fewest cells (plan_cost: a polled
 * window's ends move on from where they were) moves on, unless it is
 * `pinned` (the request's other end) or too far behind; then the least
 * recently used other entry takes a copy of it, or the staircase's cells
 * afresh (then, with nothing pinned, an invalid entry also takes a copy
 * of its sums where snap_at says). 0, CW_ENOMEM or CW_EDB. */
static int keys_at(cw_store_t *s, sqlite3_stmt *st, const cw__tier_t *t, int64_t x,
                   const kentry_t *pinned, const settle_ctx_t *sc, kentry_t **out, cw_diag_t *d)
{
    struct cw__keys_cache *c = s->r.keys_cache;
    segment_t seg[MAX_SEGMENTS], add[MAX_SEGMENTS];
    int nseg = 0, nadd = 0, nhours = 0, nopen = 0;
    *out = NULL;
    if (!back_segments(t, x, seg, &nseg)) return 0;
    int tier = seg[0].tier;
    if (!c && !(c = keys_cache(s))) return CW_ENOMEM;
    kentry_t *e = NULL, *lru = NULL;
    for (int i = 0; i < KEYS_CACHE_ENTRIES; i++) {
        kentry_t *y = &c->e[i];
        if (y->valid &&
            (y->tier != tier || y->start != t[tier].start || y->horizon != t[tier].horizon))
            kentry_drop(y); /* folded since */
        if (y->valid && y->x == x) {
            y->used = ++c->clock;
            *out = y;
            return 0;
        }
        if (y != pinned && (!lru || !y->valid || (lru->valid && y->used < lru->used))) lru = y;
    }
    int64_t best = INT64_MAX;
    for (int i = 0; i < KEYS_CACHE_ENTRIES; i++) {
        kentry_t *y = &c->e[i];
        segment_t a[MAX_SEGMENTS];
        int na = 0;
        if (!y->valid || y->x > x || x - y->x > KEYS_CACHE_MAX_GAP ||
            !cw__report_delta_segments(t, y->x, x, a, &na))
            continue;
        int h = keys_hours(c, t, a, &na), o = keys_open(c, t, a, &na);
        int64_t cost = plan_cost(c, t, a, na);
        if (cost < best || (cost == best && y->x > e->x)) {
            best = cost;
            e = y;
            memcpy(add, a, (size_t)na * sizeof *a);
            nadd = na;
            nhours = h;
            nopen = o;
        }
    }
    bool afresh = !e;
    if (afresh && sc && x > sc->fit_to) {
        bool fit;
        int err = keys_fit(s, t, sc->to, x, &fit, d);
        if (err || !fit) return err;
    }
    int snap = -1;
    kentry_t *sn = NULL;
    settle_ctx_t scs = sc ? *sc : (settle_ctx_t){0};
    if (afresh) {
        for (int i = 0; i < nseg; i++) { /* the staircase without its BEFORE cells */
            add[nadd] = seg[i];
            if (i == 0) add[nadd].lo = INT64_MIN + 1;
            if (add[nadd].lo < add[nadd].hi) nadd++;
        }
        keys_down(s, t, x, add, &nadd);
        nhours = keys_hours(c, t, add, &nadd);
        nopen = keys_open(c, t, add, &nadd);
        /* (a request's first end: its other end may move on from the copy) */
        for (int i = 0; i < KEYS_CACHE_ENTRIES && !sn && !pinned; i++)
            if (!c->e[i].valid && &c->e[i] != lru) sn = &c->e[i];
        if (sn && !s->test.keys_no_snap) snap = snap_at(add, nadd, x);
        /* the copy settles nothing past its x */
        if (snap >= 0 && add[snap].hi < scs.to) scs.to = add[snap].hi;
    }
    s->test.keys_hours += (uint64_t)nhours;
    s->test.keys_open += (uint64_t)nopen;
    kentry_t *to = e && e != pinned ? e : lru;
    if (to != e && e && !kentry_copy(to, e, e->x, 0)) return CW_ENOMEM;
    if (!e) {
        kentry_drop(to);
        to->tier = tier;
        to->start = t[tier].start;
        to->horizon = t[tier].horizon;
    }
    to->valid = false;
    int err = 0;
    /* An afresh fill's segments rise from the tier's start, the minutes
     * taken away last (keys_down) or right after the hours they are taken
     * from (keys_hours, keys_open): before those, its sums at a bucket's
     * start are every cell before it. */
    for (int i = 0; i < nadd && !err; i++) {
        uint64_t rows = 0;
        err = kentry_add(s, st, t, to, add[i].tier, add[i].lo, add[i].hi, add[i].minus ? -1 : 1,
                         afresh && sc && !add[i].minus ? &scs : NULL, &rows, d);
        int k = add[i].tier;
        if (k == 1 || k == 2) {
            c->rows[k] += rows;
            c->buckets[k] += (uint64_t)buckets_in(t, k, add[i].lo, add[i].hi);
        }
        if (!err && i == snap && kentry_copy(sn, to, add[i].hi, ++c->clock)) s->test.keys_snaps++;
    }
    if (err) {
        kentry_drop(to);
        if (sn) kentry_drop(sn);
        if (err == CW_ERANGE) c->skip = KEYS_SKIP_AFTER_OVERSIZE;
        return err == CW_ERANGE ? 0 : err;
    }
    to->x = x;
    to->valid = true;
    to->used = ++c->clock;
    *out = to;
    return 0;
}

/* Whether c has a valid entry at or below x. */
static bool keys_below(const struct cw__keys_cache *c, int64_t x)
{
    for (int i = 0; i < KEYS_CACHE_ENTRIES; i++)
        if (c->e[i].valid && c->e[i].x <= x) return true;
    return false;
}

/* The lowest x of c's valid entries, and x. */
static int64_t keys_low(const struct cw__keys_cache *c, int64_t x)
{
    for (int i = 0; i < KEYS_CACHE_ENTRIES; i++)
        if (c->e[i].valid && c->e[i].x < x) x = c->e[i].x;
    return x;
}

/* The sums of the lowest process at e's index *i, taken (++*i), when it
 * is proc; else none. */
static const ksum_t *ksum_take(const kentry_t *e, uint32_t *i, uint32_t proc)
{
    static const ksum_t none;
    return *i < e->n && e->v[*i].proc == proc ? &e->v[(*i)++] : &none;
}

int cw__report_keys_cached(cw_store_t *s, const cw__tier_t *t, const pick_t *p, int64_t at,
                           cw__proc_keys_t **out, uint32_t *nout, bool *served, cw_diag_t *d)
{
    sqlite3_stmt *st = NULL;
    kentry_t *k0 = NULL, *k1 = NULL, before = {0};
    cw__proc_keys_t *v = NULL;
    size_t cap = 0;
    uint32_t n = 0;
    *out = NULL;
    *nout = 0;
    *served = false;
    if (s->test.read_cache_off) return 0;
    if (s->r.keys_cache && s->r.keys_cache->skip) {
        s->r.keys_cache->skip--;
        return 0;
    }
    int64_t x1 = p->t1 < t[0].end ? p->t1 : t[0].end;
    if (x1 < p->t0) x1 = p->t0;
    segment_t seg[MAX_SEGMENTS];
    int nseg = 0;
    if (!back_segments(t, p->t0, seg, &nseg)) return 0;
    struct cw__keys_cache *c = keys_cache(s);
    if (!c) return list_done(CW_ENOMEM, d);
    bool damaged = c->sums_damaged;
    int err = cw__store_stmt(s, CW__ST_Q_KEY_SUMS, SQL_Q_KEY_SUMS, &st, d);
    /* The BEFORE cells of the first tier of t0's staircase (keys_at's). */
    before.settled = INT64_MIN;
    if (!err)
        err =
            kentry_add(s, st, t, &before, seg[0].tier, INT64_MIN, INT64_MIN + 1, 1, NULL, NULL, d);
    /* Every entry leaves out the processes settled before the lowest x
     * of them (keys_settle): t0's, or a lower one's. */
    settle_ctx_t sc = {.bf = &before, .to = keys_low(c, p->t0), .fit_to = INT64_MIN};
    /* No entry to start t0's from: the window's end is checked before
     * t0's fill, not after it. */
    bool fit = true;
    if (!err && !keys_below(c, p->t0) && !(err = keys_fit(s, t, sc.to, x1, &fit, d)) && fit)
        sc.fit_to = x1;
    if (!err && fit) err = keys_at(s, st, t, p->t0, NULL, &sc, &k0, d);
    if (!err && k0) {
        /* A new lowest entry: the others left out processes it holds. */
        int64_t low = keys_low(c, p->t0);
        for (int i = 0; i < KEYS_CACHE_ENTRIES; i++)
            if (&c->e[i] != k0 && c->e[i].valid && c->e[i].settled > low) kentry_drop(&c->e[i]);
        sc.to = low; /* (lower than before when t0's fill left a copy below t0) */
        err = keys_at(s, st, t, x1, k0, &sc, &k1, d);
    }
    if (!err && k0 && k1 && k0->tier == k1->tier) {
        kentry_t *es[KEYS_CACHE_ENTRIES];
        for (int i = 0; i < KEYS_CACHE_ENTRIES; i++)
            es[i] = c->e[i].valid && c->e[i].tier == k0->tier ? &c->e[i] : NULL;
        err = keys_settle(s, es, KEYS_CACHE_ENTRIES, &before, keys_low(c, p->t0), d);
    }
    if (err || !k0 || !k1 || k0->tier != k1->tier || k0->settled != k1->settled) {
        kentry_drop(&before);
        if (err == CW_ERANGE) { /* more processes than an entry holds */
            c->skip = KEYS_SKIP_AFTER_OVERSIZE;
            return 0;
        }
        if (err == CW_EDB && c->sums_damaged && !damaged) return 0; /* (kadd_sums) */
        return list_done(err, d);
    }
    err = keys_room(s, &v, &cap);
    /* Every process of the three, once, in process order (a join of the
     * three sorted arrays). Only those the report lists are kept: activity
     * in the window (an activity row counts at least one event:
     * check_batch, store.c) or something outstanding at t0; the others
     * rank nowhere (report_top, finish()), and an entry holds every
     * process its cells name but the settled ones, ended ones too. */
    uint32_t i1 = 0, i0 = 0, ib = 0;
    while (!err && (i1 < k1->n || i0 < k0->n || ib < before.n)) {
        uint32_t proc = UINT32_MAX;
        if (i1 < k1->n && k1->v[i1].proc < proc) proc = k1->v[i1].proc;
        if (i0 < k0->n && k0->v[i0].proc < proc) proc = k0->v[i0].proc;
        if (ib < before.n && before.v[ib].proc < proc) proc = before.v[ib].proc;
        const ksum_t *y1 = ksum_take(k1, &i1, proc), *y0 = ksum_take(k0, &i0, proc),
                     *yb = ksum_take(&before, &ib, proc);
        cw__proc_keys_t x = {.proc = proc,
                             .cb0 = yb->cb + y0->cb,
                             .rb0 = yb->rb + y0->rb,
                             .cbw = y1->cb - y0->cb,
                             .rbw = y1->rb - y0->rb,
                             .events = y1->ev - y0->ev};
        x.active = x.events > 0;
        if (!x.active && x.cb0 - x.rb0 <= 0) continue;
        start_window(&x, at);
        if (CW_RESERVE(v, cap, n + 1u)) {
            err = CW_ENOMEM;
            break;
        }
        v[n++] = x;
    }
    kentry_drop(&before);
    if (v) keys_room_keep(s, v, cap);
    if (err == CW_ERANGE) { /* more processes than an entry holds */
        s->r.keys_cache->skip = KEYS_SKIP_AFTER_OVERSIZE;
        return 0;
    }
    if ((err = list_done(err, d))) return err;
    *out = v;
    *nout = n;
    *served = true;
    s->test.keys_served++;
    return 0;
}
