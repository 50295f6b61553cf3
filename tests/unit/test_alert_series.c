/* test_alert_series.c - the alert engine's kept series (series.c) over
 * the store's feed (store_alertfeed.c) give the exact window figures.
 *
 * A generated workload (a leak, churn, rundown, a late start, an exit,
 * partial decommits, stacks of several tags; 80 minutes) goes through
 * tracker -> aggregator -> store. Then one series set is fed
 * incrementally every 10 s (as the engine does) and, at instants along
 * the way, compared per (instance, tag) with a set rebuilt from the store
 * at that instant (minute tier + raw rows) and with the store's own
 * report of the window [S, T) (cw_store_report, the code of `analyze
 * --db`): committed bytes and commit events (size, commit count), the
 * window's commits still outstanding at T (AIFO: the "remaining" whose
 * sum is the impacting figure of the alerts) and outstanding at T.
 * The rings themselves (series.c, "The rings"): random stores, narrow
 * and wide, read back as a plain array of steps does, and a ring costs
 * at most 10 bytes a step it held. */
#include <stdbool.h>
#include <stdint.h>

#include "alerts/alerts_internal.h"
#include "commitwatch/agg.h"
#include "commitwatch/event.h"
#include "commitwatch/pipeline.h"
#include "commitwatch/stacks.h"
#include "commitwatch/store.h"
#include "commitwatch/tagger.h"
#include "test.h"
#include "test_port.h"

#define S INT64_C(1000000000)
#define MIN (60 * S)
#define STEP MIN
#define WINDOW_STEPS 30
#define MAXEV 40000

typedef struct gev {
    cw_event_t e;
    int stack; /* -1: none */
} gev_t;

static gev_t evs[MAXEV];
static uint32_t nev;
static uint64_t seed = 0x2545f4914f6cdd1dull;

static uint64_t rnd(uint64_t n)
{
    seed ^= seed >> 12;
    seed ^= seed << 25;
    seed ^= seed >> 27;
    return (seed * 0x2545f4914f6cdd1dull >> 11) % n;
}

static const char *const stacks[][2] = {{"app!grow", "ntdll!RtlAllocateHeap"},
                                        {"app!cache", "kernelbase!VirtualAlloc"},
                                        {"app!thread", "kernelbase!CreateThread"},
                                        {"app!misc", "ntdll!NtAllocateVirtualMemory"}};

static void ev(int64_t ts, cw_op_t op, uint32_t pid, uint64_t addr, uint64_t size, int stack,
               bool rundown, const char *name)
{
    ASSERT_TRUE(nev < MAXEV);
    evs[nev++] = (gev_t){{.ts = ts, .op = op, .pid = pid, .addr = addr, .size = size,
                          .rundown = rundown, .name = name},
                         stack};
}

/* Live ranges of a process, for releases. */
typedef struct live {
    uint64_t addr[2048], size[2048];
    uint32_t n;
    uint64_t next;
} live_t;

static void commit(live_t *l, int64_t ts, uint32_t pid, uint64_t size, int stack, bool rundown)
{
    ev(ts, CW_OP_COMMIT, pid, l->next, size, stack, rundown, NULL);
    if (l->n < 2048) {
        l->addr[l->n] = l->next;
        l->size[l->n++] = size;
    }
    l->next += size + 4096;
}

static void release_one(live_t *l, int64_t ts, uint32_t pid, bool newest)
{
    if (!l->n) return;
    uint32_t i = newest ? l->n - 1 : (uint32_t)rnd(l->n);
    if (rnd(3) == 0 && l->size[i] > 4096) { /* a partial decommit of its tail */
        uint64_t keep = 4096 * (1 + rnd(l->size[i] / 4096 - 1));
        ev(ts, CW_OP_DECOMMIT, pid, l->addr[i] + keep, l->size[i] - keep, -1, false, NULL);
        l->size[i] = keep;
        return;
    }
    ev(ts, CW_OP_RELEASE, pid, l->addr[i], l->size[i], -1, false, NULL);
    l->addr[i] = l->addr[l->n - 1];
    l->size[i] = l->size[--l->n];
}

static int64_t t0;

static void generate(void)
{
    static live_t lv[4];
    static const uint32_t pids[4] = {100, 200, 300, 400};
    static const char *const names[4] = {"leaky.exe", "churn.exe", "old.exe", "late.exe"};
    for (int p = 0; p < 4; p++)
        lv[p].next = 0x100000000ull * (uint64_t)(p + 1);
    for (int p = 0; p < 3; p++)
        ev(t0, CW_OP_PROCESS_START, pids[p], 0, 0, -1, false, names[p]);
    for (int i = 0; i < 6; i++) /* rundown of old.exe */
        commit(&lv[2], t0, 300, 4096 * (1 + rnd(64)), (int)rnd(4), true);
    bool late = false, exited = false;
    uint32_t nshort = 0;
    for (int64_t t = t0 + S; t < t0 + 80 * MIN; t += S / 4 + (int64_t)rnd(2 * S)) {
        if (!late && t > t0 + 20 * MIN + 500 * 1000000) {
            ev(t, CW_OP_PROCESS_START, 400, 0, 0, -1, false, names[3]);
            late = true;
        }
        if (!exited && t > t0 + 47 * MIN + 123456789) {
            ev(t, CW_OP_PROCESS_EXIT, 300, 0, 0, -1, false, NULL);
            exited = true;
        }
        /* 400 short-lived processes from +2 min: started, a commit or
         * two, gone (the set must give their room back once they left
         * the window); one a step, and from +6 min bursts of 40 in a
         * second (the evaluator's scratch per base must shrink after). */
        for (uint32_t k = 0, nb = t > t0 + 6 * MIN && rnd(60) == 0 ? 40 : 1;
             k < nb && t > t0 + 2 * MIN && nshort < 400; k++) {
            uint32_t pid = 1000 + nshort++;
            int64_t at = t - 4 * (int64_t)(nb - k);
            ev(at, CW_OP_PROCESS_START, pid, 0, 0, -1, false, "short.exe");
            ev(at + 1, CW_OP_COMMIT, pid, 0x10000, 4096 * (1 + rnd(4)), (int)rnd(4), false, NULL);
            if (rnd(2))
                ev(at + 2, CW_OP_COMMIT, pid, 0x80000, 4096, (int)rnd(4), false, NULL);
            ev(at + 3, CW_OP_PROCESS_EXIT, pid, 0, 0, -1, false, NULL);
        }
        int p = (int)rnd(4);
        if ((p == 3 && !late) || (p == 2 && exited)) continue;
        uint32_t pid = pids[p];
        switch (p) {
        case 0: /* a leak, a little churn */
            commit(&lv[0], t, pid, 4096 * (1 + rnd(16)), rnd(4) ? 0 : 3, false);
            if (rnd(5) == 0) release_one(&lv[0], t + 1000, pid, false);
            break;
        case 1: /* churn: what is committed goes soon */
            if (lv[1].n < 20 && rnd(2))
                commit(&lv[1], t, pid, 4096 * (1 + rnd(32)), 1, false);
            else
                release_one(&lv[1], t, pid, rnd(2));
            break;
        default:
            if (rnd(2))
                commit(&lv[p], t, pid, 4096 * (1 + rnd(8)), (int)rnd(4), false);
            else
                release_one(&lv[p], t, pid, false);
        }
    }
}

/* Tags by stack: three, so one instance has several series. */
static const char *tag_of(void *impl, const cw_stacks_t *st, uint32_t stack)
{
    static const char *const names[] = {"Heap", "Cache", "Thread Stack"};
    (void)impl;
    (void)st;
    return names[stack % 3];
}

static const char *tag_hash(void *impl)
{
    (void)impl;
    return "test-3-tags";
}

/* The store the batches go to, and how many went. */
typedef struct sink_ctx {
    cw_store_t *s;
    unsigned batches;
} sink_ctx_t;

static int store_batch(void *ctx, cw_batch_t *b)
{
    sink_ctx_t *c = ctx;
    cw_diag_t d = {{0}};
    int rc = cw_store_write(c->s, b, &d);
    cw_batch_free(b);
    if (rc) CW_FAIL("storing a batch: %s", d.msg);
    c->batches++;
    return 0;
}

/* The workload through tracker -> aggregator -> store, every bucket
 * closed by a last tick. */
static void fill(cw_store_t *s)
{
    cw_stacks_t *st;
    cw_tagger_t *tg;
    cw_agg_t *agg;
    cw_pipeline_t *pipe;
    cw_diag_t d = {{0}};
    sink_ctx_t ctx = {s, 0};
    ASSERT_OK(cw_stacks_create(&st));
    static const cw_tagger_ops_t ops = {"test", tag_of, tag_hash, NULL};
    ASSERT_OK(cw_tagger_create(&ops, NULL, &tg));
    ASSERT_OK(cw_agg_create(S, st, tg, 0, 0, store_batch, &ctx, &agg));
    cw_tracker_sink_t sk = cw_agg_sink(agg);
    ASSERT_OK(cw_pipeline_create(&sk, agg, 1, &pipe));
    for (uint32_t i = 0; i < nev; i++) {
        cw_event_t e = evs[i].e;
        if (e.op == CW_OP_COMMIT)
            ASSERT_OK(cw_stacks_intern_strings(st, stacks[evs[i].stack], 2, &e.stack_id));
        if (cw_pipeline_feed(pipe, &e, &d)) CW_FAIL("feeding event %u: %s", i, d.msg);
    }
    ASSERT_OK(cw_pipeline_tick(pipe, t0 + 81 * MIN));
    ASSERT_OK(cw_agg_flush(agg));
    ASSERT_TRUE(ctx.batches > 1000);
    cw_pipeline_destroy(pipe);
    cw_agg_destroy(agg);
    cw_tagger_destroy(tg);
    cw_stacks_destroy(st);
}

/* The figures of (proc id, tag) in set a over the window ending at T. */
static cw__afig_t figs_of(const cw__aset_t *a, uint32_t proc, const char *tag, int64_t T)
{
    cw__afig_t f = {0};
    int64_t last = cw_floor_to(T - 1, STEP) / STEP;
    for (size_t i = 0; i < a->nbases; i++) {
        const cw__abase_t *b = &a->bases[i];
        if (a->procs[b->proc].id == proc && strcmp(a->tags.v[b->tag], tag) == 0)
            cw__abase_add(a, b, last - WINDOW_STEPS + 1, last, &f, NULL);
    }
    return f;
}

static void fig_eq(const cw__afig_t *x, const cw__afig_t *y)
{
    ASSERT_EQ(x->committed, y->committed);
    ASSERT_EQ(x->commits, y->commits);
    ASSERT_EQ(x->remaining, y->remaining);
    ASSERT_EQ(x->outstanding, y->outstanding);
}

static int checked_pairs;

static void check(cw_store_t *s, const cw__aset_t *inc, int64_t T)
{
    cw__aset_t fresh;
    cw_diag_t d = {{0}};
    cw_report_t *r = NULL;
    ASSERT_OK(cw__aset_init(&fresh, STEP, WINDOW_STEPS + 1));
    ASSERT_OK(cw__aset_feed(&fresh, s, T, &d));
    int64_t last = cw_floor_to(T - 1, STEP) / STEP, from = (last - WINDOW_STEPS + 1) * STEP;
    ASSERT_OK(cw_store_report(s, from, T, false, &r, &d));
    /* Every (proc, tag) of the report: the sums of its stacks of that tag. */
    for (uint32_t i = 0; i < r->nprocs; i++) {
        const cw_proc_report_t *p = &r->procs[i];
        for (uint32_t k = 0; k < p->nstacks; k++) {
            const char *tag = p->stacks[k].tag;
            bool first = true;
            for (uint32_t j = 0; j < k; j++)
                first &= strcmp(p->stacks[j].tag, tag) != 0;
            if (!first) continue;
            cw__afig_t want = {0};
            for (uint32_t j = k; j < p->nstacks; j++) {
                const cw_figs_t *f = &p->stacks[j].figs;
                if (strcmp(p->stacks[j].tag, tag) != 0) continue;
                want.committed += (int64_t)f->size_bytes;
                want.commits += (int64_t)f->commit_count;
                want.remaining += (int64_t)f->types[CW_AIFO].bytes;
                want.outstanding += (int64_t)(f->types[CW_AIFO].bytes + f->types[CW_AOFO].bytes);
            }
            cw__afig_t a = figs_of(inc, p->id, tag, T), b = figs_of(&fresh, p->id, tag, T);
            if (want.committed != a.committed || want.remaining != a.remaining ||
                want.outstanding != a.outstanding)
                fprintf(stderr, "T=+%llds proc %u (%s) tag %s\n", (long long)((T - t0) / S),
                        p->id, p->name, tag);
            fig_eq(&a, &want);
            fig_eq(&b, &want);
            checked_pairs++;
        }
    }
    /* And nothing the report lacks holds anything. */
    for (size_t i = 0; i < inc->nbases; i++) {
        const cw__abase_t *b = &inc->bases[i];
        bool in = false;
        for (uint32_t k = 0; k < r->nprocs && !in; k++)
            in = r->procs[k].id == inc->procs[b->proc].id;
        if (!in) {
            cw__afig_t f = figs_of(inc, inc->procs[b->proc].id, inc->tags.v[b->tag], T);
            ASSERT_EQ(f.outstanding, 0);
            ASSERT_EQ(f.remaining, 0);
        }
    }
    cw_report_free(r);
    cw__aset_free(&fresh);
}

/* ---- the rings hold what was stored ---------------------------------------- */

/* Bytes of a's rings, from its total (cw__aset_bytes) less its tables. */
static size_t ring_bytes(const cw__aset_t *a)
{
    return cw__aset_bytes(a) - a->basecap * sizeof *a->bases - a->proccap * sizeof *a->procs -
           cw_keymap_bytes(&a->procmap) - cw_keymap_bytes(&a->basemap);
}

/* The rings' memory: 8 bytes a step where every figure of the series fits
 * (all of this workload's), at most a quarter more steps than a series
 * has had in the window, never more than its len. 20 bytes a step, or a
 * ring grown by doubling, break it. */
static void rings_small(const cw__aset_t *a)
{
    size_t steps = 0;
    for (size_t i = 0; i < a->nbases; i++) {
        const cw__abase_t *b = &a->bases[i];
        int64_t had = b->last - b->birth + 1;
        if (had > a->len) had = a->len;
        if (had > 0) steps += (size_t)had;
    }
    ASSERT_TRUE(ring_bytes(a) <= 10 * steps);
}

/* units() of series.c, written plainly. */
static uint32_t ref_units(int64_t bytes)
{
    if (bytes <= 0) return 0;
    int64_t u = (bytes + CW__UNIT / 2) / CW__UNIT;
    return u > UINT32_MAX ? UINT32_MAX : (uint32_t)u;
}

static uint32_t rnd_fig(void)
{
    static const uint32_t edge[] = {
        0, 1, 254, 255, 256, 65534, 65535, 65536, 65537, 1u << 24, UINT32_MAX - 1, UINT32_MAX};
    switch (rnd(8)) {
    case 0:
        return edge[rnd(CW_ARRAY_LEN(edge))];
    case 1:
        return (uint32_t)rnd(UINT64_C(1) << 32);
    case 2:
        return (uint32_t)rnd(70000);
    default:
        return (uint32_t)rnd(40); /* most steps: small figures */
    }
}

static int64_t rnd_cur(void)
{
    switch (rnd(10)) {
    case 0:
        return -(int64_t)rnd(UINT64_C(1) << 40); /* more released than seen */
    case 1:
        return (int64_t)rnd(UINT64_C(1) << 50); /* past 16 TiB: saturates */
    case 2:
        return (int64_t)rnd(UINT64_C(70000)) << CW__UNIT_SHIFT; /* about 256 MiB */
    default:
        return (int64_t)rnd(UINT64_C(1) << 24);
    }
}

static bool slot_same(const cw__slot_t *x, const cw__slot_t *y)
{
    return x->committed == y->committed && x->commits == y->commits && x->out == y->out &&
           x->rem == y->rem && x->rem_commits == y->rem_commits;
}

#define REF_STEPS 40000

/* A series stored through cw__abase_set (narrow, widened, grown, wrapped
 * around, its explicit steps leaving the window) reads back, step by step
 * and as a window's sums and points (cw__abase_add), as a plain array of
 * every step does. */
static void ring_vs_reference(void)
{
    enum { LEN = 37 };
    static cw__slot_t ref[REF_STEPS]; /* by step - h0 */
    int64_t points[LEN + 8], want_points[LEN + 8];
    cw__aset_t a;
    ASSERT_OK(cw__aset_init(&a, STEP, LEN));
    const int64_t h0 = 29000000; /* a minute step of 2025 */
    a.head = h0;
    ASSERT_OK(CW_RESERVE(a.bases, a.basecap, 1));
    a.nbases = 1;
    cw__abase_t *b = &a.bases[0];
    *b = (cw__abase_t){0, 0, 0, h0, h0 - 1, 0, false, NULL};
    size_t tables = cw__aset_bytes(&a);
    int64_t ref_last = h0 - 1;
    uint64_t sets = 0, widened = 0, narrow_sets = 0, compared = 0;
    bool was_wide = false;
    for (int round = 0; round < 60000; round++) {
        /* The head moves on (sometimes past the whole window). */
        if (rnd(4) == 0) {
            int64_t to = a.head + 1 + (rnd(50) == 0 ? LEN + (int64_t)rnd(LEN) : (int64_t)rnd(3));
            if (to - h0 >= REF_STEPS) break;
            a.head = to;
        }
        int64_t lo = a.head - LEN + 1 > b->birth ? a.head - LEN + 1 : b->birth;
        if (ref_last < lo - 1) ref_last = lo - 1;
        if (rnd(20) == 0) b->cur = rnd_cur();
        /* Set a step of the window: mostly the head, as the feed does. */
        int64_t step = rnd(3) ? a.head : lo + (int64_t)rnd((uint64_t)(a.head - lo + 1));
        /* Mostly figures that fit narrow (some at its edges), 1 in 30 any. */
        cw__slot_t v = {(uint32_t)rnd(300), (uint32_t)rnd(9), (uint32_t)rnd(65600),
                        (uint32_t)rnd(300), (uint32_t)rnd(9)};
        if (rnd(30) == 0) v = (cw__slot_t){rnd_fig(), rnd_fig(), rnd_fig(), rnd_fig(), rnd_fig()};
        for (int64_t k = ref_last + 1; k < step; k++)
            ref[k - h0] = (cw__slot_t){0, 0, ref_units(b->cur), 0, 0};
        ref[step - h0] = v;
        if (step > ref_last) ref_last = step;
        ASSERT_OK(cw__abase_set(&a, b, step, &v));
        sets++;
        narrow_sets += !b->wide;
        widened += b->wide && !was_wide;
        was_wide = b->wide;
        if (rnd(100) == 0 && b->wide) {
            /* What prune() does once nothing explicit is left: a new,
             * narrow ring (here: the next window starts empty). */
            free(b->ring);
            b->ring = NULL;
            b->cap = 0;
            b->wide = false;
            was_wide = false;
            a.head += LEN;
            if (a.head - h0 >= REF_STEPS) break;
            b->last = ref_last = a.head - LEN;
            lo = a.head - LEN + 1;
        }
        ASSERT_TRUE(b->cap <= LEN);
        /* Every step of the window, and the sums of a random span. */
        for (int64_t k = lo; k <= a.head; k++) {
            cw__slot_t got = cw__abase_step(b, k),
                       want = k <= ref_last ? ref[k - h0]
                                            : (cw__slot_t){0, 0, ref_units(b->cur), 0, 0};
            if (!slot_same(&got, &want))
                CW_FAIL("round %d step %lld: out %u want %u, committed %u want %u", round,
                        (long long)(k - h0), got.out, want.out, got.committed, want.committed);
            compared++;
        }
        int64_t first = a.head - (int64_t)rnd(LEN + 4), last = first + (int64_t)rnd(8);
        if (last > a.head) last = a.head;
        if (first > last) first = last;
        cw__afig_t f = {0}, want = {0};
        memset(points, 0, sizeof points);
        memset(want_points, 0, sizeof want_points);
        cw__abase_add(&a, b, first, last, &f, points);
        uint64_t c = 0, n = 0, r = 0, rn = 0;
        for (int64_t k = first; k <= last; k++) {
            if (k < lo) continue; /* before its birth or out of the window */
            cw__slot_t x =
                k <= ref_last ? ref[k - h0] : (cw__slot_t){0, 0, ref_units(b->cur), 0, 0};
            c += x.committed;
            n += x.commits;
            r += x.rem;
            rn += x.rem_commits;
            want_points[k - first] = (int64_t)x.out * CW__UNIT;
        }
        want = (cw__afig_t){(int64_t)(c * CW__UNIT), (int64_t)n, (int64_t)(r * CW__UNIT),
                            (int64_t)rn, b->cur};
        ASSERT_EQ(f.committed, want.committed);
        ASSERT_EQ(f.commits, want.commits);
        ASSERT_EQ(f.remaining, want.remaining);
        ASSERT_EQ(f.rem_commits, want.rem_commits);
        ASSERT_EQ(f.outstanding, want.outstanding);
        for (int64_t k = 0; k <= last - first; k++)
            ASSERT_EQ(points[k], want_points[k]);
        /* A narrow ring costs 8 bytes a step of its capacity. */
        ASSERT_EQ(cw__aset_bytes(&a) - tables,
                  (size_t)b->cap * (b->wide ? sizeof(cw__slot_t) : sizeof(cw__nslot_t)));
    }
    printf("rings: %llu steps set (%llu on a narrow ring), widened %llu times, %llu steps "
           "compared with the reference\n",
           (unsigned long long)sets, (unsigned long long)narrow_sets, (unsigned long long)widened,
           (unsigned long long)compared);
    ASSERT_TRUE(sets >= 30000 && narrow_sets >= 1000 && widened >= 20);
    cw__aset_free(&a);
}

/* One series of 100 explicit steps whose figures fit: 8 bytes a step and
 * at most a quarter more (the 20-byte steps grown by doubling were 2,560
 * bytes). */
static void ring_bytes_per_step(void)
{
    cw__aset_t a;
    ASSERT_OK(cw__aset_init(&a, STEP, 360)); /* the 6 h window of likely_leak */
    a.head = 29000000;
    ASSERT_OK(CW_RESERVE(a.bases, a.basecap, 1));
    a.nbases = 1;
    a.bases[0] = (cw__abase_t){0, 0, 0, a.head, a.head - 1, 0, false, NULL};
    size_t tables = cw__aset_bytes(&a);
    a.bases[0].cur = 200 << 20;
    for (int k = 0; k < 100; k++, a.head++) {
        cw__slot_t v = {(uint32_t)k, 1, 51200, (uint32_t)k / 2, 1};
        ASSERT_OK(cw__abase_set(&a, &a.bases[0], a.head, &v));
    }
    size_t per100 = cw__aset_bytes(&a) - tables;
    printf("rings: 100 steps of one series: %zu bytes\n", per100);
    ASSERT_TRUE(per100 <= 1000);
    cw__aset_free(&a);
}

/* ---- compaction changes no rule's result ---------------------------------- */

static cw_alert_rule_t crule(const char *name, cw_alert_metric_t m, cw_alert_group_t g, bool summed,
                             double warn, double crit)
{
    cw_alert_rule_t r = {0};
    r.name = (char *)name;
    r.file = "test";
    r.text = "[rule]";
    r.metric = m;
    r.group_by = g;
    r.tags_summed = summed;
    r.window_ns = (WINDOW_STEPS - 1) * STEP;
    r.has_warn = r.has_crit = true;
    r.warn = warn;
    r.crit = crit;
    r.clear = 1;
    r.limit_kind = CW_AL_SIZE;
    r.limit_bytes = 64u << 20;
    return r;
}

static bool same_double(double x, double y)
{
    return (x != x && y != y) || x == y;
}

static const cw__astate_t *state_by_key(const cw__arule_t *r, const char *key)
{
    for (size_t i = 0; i < r->n; i++)
        if (strcmp(r->st[i].key, key) == 0) return &r->st[i];
    return NULL;
}

/* Two evaluators over the store, one compacting ended instances and one
 * not, fed and run every 10 s as the engine does: every state (by key:
 * its state machine and figures) and every transition (as a set: their
 * order at one instant may differ) are the same at every instant. */
static void compaction_same(cw_store_t *s)
{
    cw_alert_rule_t rs[6];
    /* Warnings at the least value, so every group is active and its
     * value compared at every instant; criticals where values cross. */
    rs[0] = crule("inst", CW_AM_OUTSTANDING, CW_AG_INSTANCE, false, 1, 64 << 10);
    rs[1] = crule("name_impact", CW_AM_IMPACTING_RATE, CW_AG_NAME, true, 1e-9, 5e6);
    rs[2] = crule("machine_transient", CW_AM_TRANSIENT_RATE, CW_AG_MACHINE, false, 1e-9, 1e7);
    rs[3] = crule("name_leak", CW_AM_LEAK_SCORE, CW_AG_NAME, false, 1e-9, 0.5);
    rs[4] = crule("name_out", CW_AM_OUTSTANDING, CW_AG_NAME, false, 1, 64 << 10);
    rs[4].for_ns = 2 * MIN;
    rs[4].keep_firing_for_ns = 3 * MIN;
    rs[5] = crule("machine_ttl", CW_AM_TIME_TO_LIMIT, CW_AG_MACHINE, true, 1e12, 3600);
    rs[5].below = true;
    cw_alert_rules_t set = {rs, 6, {0}};
    cw__aeval_t ec, en;
    cw_diag_t d = {{0}};
    ASSERT_OK(cw__aeval_init(&ec, &set, STEP));
    ASSERT_OK(cw__aeval_init(&en, &set, STEP));
    en.set.no_compact = true;
    size_t ntr = 0, nstates = 0, peak_c = 0, peak_n = 0, end_c = 0, end_n = 0;
    size_t scratch_peak = 0, scratch_end = 0;
    for (int64_t T = cw_floor_to(t0, 10 * S) + 10 * S; T <= t0 + 120 * MIN; T += 10 * S) {
        ASSERT_OK(cw__aset_feed(&ec.set, s, T, &d));
        ASSERT_OK(cw__aset_feed(&en.set, s, T, &d));
        ASSERT_OK(cw__aeval_run(&ec, T));
        ASSERT_OK(cw__aeval_run(&en, T));
        ASSERT_EQ(ec.ntr, en.ntr);
        bool used[256] = {false};
        ASSERT_TRUE(ec.ntr <= 256);
        for (size_t i = 0; i < ec.ntr; i++) {
            const cw__atr_t *x = &ec.tr[i];
            const char *kx = ec.r[x->rule].st[x->state].key;
            bool found = false;
            for (size_t j = 0; j < en.ntr && !found; j++) {
                const cw__atr_t *y = &en.tr[j];
                if (used[j] || y->rule != x->rule ||
                    strcmp(en.r[y->rule].st[y->state].key, kx) != 0)
                    continue;
                ASSERT_EQ(x->tr.ts_ns, y->tr.ts_ns);
                ASSERT_EQ(x->tr.from, y->tr.from);
                ASSERT_EQ(x->tr.to, y->tr.to);
                ASSERT_EQ(x->tr.severity, y->tr.severity);
                ASSERT_STR_EQ(x->tr.reason ? x->tr.reason : "", y->tr.reason ? y->tr.reason : "");
                ASSERT_TRUE(same_double(x->tr.value, y->tr.value));
                ASSERT_TRUE(same_double(x->tr.threshold, y->tr.threshold));
                ASSERT_TRUE(same_double(x->tr.leak_score, y->tr.leak_score));
                used[j] = found = true;
            }
            if (!found) CW_FAIL("T=+%llds: transition of %s only with compaction",
                                (long long)((T - t0) / S), kx);
            ntr++;
        }
        for (size_t ri = 0; ri < set.n; ri++) {
            ASSERT_EQ(ec.r[ri].n, en.r[ri].n);
            for (size_t i = 0; i < ec.r[ri].n; i++) {
                const cw__astate_t *x = &ec.r[ri].st[i], *y = state_by_key(&en.r[ri], x->key);
                if (!y) CW_FAIL("T=+%llds: state %s only with compaction",
                                (long long)((T - t0) / S), x->key);
                ASSERT_EQ(x->sm.state, y->sm.state);
                ASSERT_EQ(x->sm.severity, y->sm.severity);
                ASSERT_EQ(x->sm.active_since, y->sm.active_since);
                ASSERT_EQ(x->sm.firing_since, y->sm.firing_since);
                ASSERT_EQ(x->sm.false_since, y->sm.false_since);
                ASSERT_EQ(x->updated, y->updated);
                ASSERT_TRUE(same_double(x->value, y->value));
                ASSERT_TRUE(same_double(x->threshold, y->threshold));
                ASSERT_TRUE(same_double(x->leak, y->leak));
                ASSERT_TRUE(same_double(x->ttl, y->ttl));
                ASSERT_EQ(x->has_ls, y->has_ls);
                nstates++;
            }
        }
        cw__aeval_compact(&ec);
        cw__aeval_compact(&en);
        size_t bc = cw__aset_bytes(&ec.set), bn = cw__aset_bytes(&en.set);
        if (bc > peak_c) peak_c = bc;
        if (bn > peak_n) peak_n = bn;
        size_t sc = cw__aeval_bytes(&ec) - bc; /* the evaluator's scratch */
        if (sc > scratch_peak) scratch_peak = sc;
        scratch_end = sc;
        if (T == t0 / (10 * S) * (10 * S) + 25 * MIN) {
            end_c = ec.set.nprocs;
            end_n = en.set.nprocs;
        }
    }
    printf("compaction: %zu transitions and %zu states the same with and without; %llu "
           "instances compacted; at +25 min %zu instances and aggregates kept, %zu without; "
           "peak %zu bytes, %zu without\n",
           ntr, nstates, (unsigned long long)ec.set.compacted, end_c, end_n, peak_c, peak_n);
    ASSERT_TRUE(ntr >= 20 && nstates >= 100);
    ASSERT_TRUE(ec.set.compacted >= 300); /* the short-lived instances */
    ASSERT_TRUE(en.set.compacted == 0);
    ASSERT_TRUE(end_c * 4 < end_n);
    ASSERT_TRUE(peak_c < peak_n);
    /* The scratch per base follows the bases: a burst's room went back
     * once its instances were compacted (it stayed at the peak before). */
    printf("compaction: the evaluator's scratch at most %zu bytes, %zu at the end\n",
           scratch_peak, scratch_end);
    ASSERT_TRUE(scratch_end < scratch_peak / 2);
    cw__aeval_free(&ec);
    cw__aeval_free(&en);
}

int main(void)
{
    char dir[512], path[600];
    cw_store_t *s;
    cw_diag_t d = {{0}};
    snprintf(dir, sizeof dir, "%s/cw_alert_series_XXXXXX", cw_test_tmpdir());
    ASSERT_TRUE(cw_test_mkdtemp(dir) != NULL);
    snprintf(path, sizeof path, "%s/a.db", dir);
    t0 = cw_floor_to(INT64_C(1750000000) * S, 3600 * S) + 7 * S; /* not minute-aligned */
    generate();
    ASSERT_OK(cw_store_open(path, NULL, &s, &d));
    fill(s);
    cw__aset_t inc;
    ASSERT_OK(cw__aset_init(&inc, STEP, WINDOW_STEPS + 1));
    int checks = 0;
    size_t peak_procs = 0;
    bool seen_exit = false;
    for (int64_t T = cw_floor_to(t0, 10 * S) + 10 * S; T <= t0 + 80 * MIN; T += 10 * S) {
        ASSERT_OK(cw__aset_feed(&inc, s, T, &d));
        /* every 7 min 10 s: instants on and off minute boundaries */
        if (((T - t0) / (10 * S)) % 43 == 0) {
            check(s, &inc, T);
            checks++;
        }
        rings_small(&inc);
        if (inc.nprocs > peak_procs) peak_procs = inc.nprocs;
        for (size_t i = 0; i < inc.nprocs; i++)
            seen_exit |= inc.procs[i].pid == 300 && inc.procs[i].exit != CW_TS_NEVER;
        /* A series' ring holds at most the window (len steps). */
        for (size_t i = 0; i < inc.nbases; i++)
            ASSERT_TRUE(inc.bases[i].cap <= inc.len);
    }
    ASSERT_TRUE(checks >= 10);
    ASSERT_TRUE(checked_pairs >= 90); /* several tags per instance */
    /* The process that exited: its instance was known with its exit
     * (until it left the window). */
    ASSERT_TRUE(seen_exit);
    /* Two hours on (no data there): the instance that exited leaves the
     * set (pruned once it is out of the ring), the others stay with
     * their outstanding. */
    ASSERT_OK(cw__aset_feed(&inc, s, t0 + 81 * MIN, &d)); /* the end of the data */
    size_t nb = inc.nbases;
    int64_t sum = 0;
    for (size_t i = 0; i < inc.nbases; i++)
        sum += inc.bases[i].cur;
    for (int64_t T = t0 + 81 * MIN + 10 * S; T <= t0 + 200 * MIN; T += 10 * S)
        ASSERT_OK(cw__aset_feed(&inc, s, T, &d)); /* incrementally: the prune path */
    int64_t sum2 = 0;
    for (size_t i = 0; i < inc.nbases; i++) {
        sum2 += inc.bases[i].cur;
        ASSERT_TRUE(inc.procs[inc.bases[i].proc].pid != 300);
        int added;
        uint32_t bi = cw_keymap_get(&inc.basemap, inc.procs[inc.bases[i].proc].id,
                                    inc.bases[i].tag, &added);
        ASSERT_EQ(bi, i); /* the maps were rebuilt */
        ASSERT_TRUE(!added);
    }
    for (size_t i = 0; i < inc.nprocs; i++)
        ASSERT_TRUE(inc.procs[i].pid != 300);
    ASSERT_TRUE(inc.nbases <= nb); /* pid 300 left earlier: pruned at each step */
    ASSERT_EQ(sum2, sum);
    /* Memory: no data for two hours, so every kept series' steps are
     * implicit (outstanding, nothing committed) and its ring is gone; the
     * figures above still hold. */
    for (size_t i = 0; i < inc.nbases; i++)
        ASSERT_TRUE(inc.bases[i].cap == 0 && inc.bases[i].ring == NULL);
    ASSERT_TRUE(cw__aset_bytes(&inc) < 8192 + inc.nbases * 64);
    /* The 400 short-lived instances held room in the arrays and maps
     * until they left: given back (the set holds 4 instances). */
    ASSERT_TRUE(peak_procs >= 100);
    ASSERT_TRUE(inc.nprocs <= 4);
    ASSERT_TRUE(inc.proccap <= 64);
    ASSERT_TRUE(inc.basecap <= 64);
    ASSERT_TRUE(inc.procmap.mask + 1 <= 64);
    ASSERT_TRUE(inc.basemap.mask + 1 <= 128);
    check(s, &inc, t0 + 200 * MIN);
    printf("%d instants, %d (instance, tag) pairs compared, %llu feed rows\n", checks,
           checked_pairs, (unsigned long long)inc.rows_read);
    cw__aset_free(&inc);
    ring_vs_reference();
    ring_bytes_per_step();
    compaction_same(s);
    cw_store_close(s);
    cw_test_rmtree(dir);
    TEST_DONE();
}
