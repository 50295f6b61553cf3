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
 * sum is the impacting figure of the alerts) and outstanding at T. */
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
         * the window). */
        if (t > t0 + 2 * MIN && nshort < 400) {
            uint32_t pid = 1000 + nshort++;
            ev(t - 4, CW_OP_PROCESS_START, pid, 0, 0, -1, false, "short.exe");
            ev(t - 3, CW_OP_COMMIT, pid, 0x10000, 4096 * (1 + rnd(4)), (int)rnd(4), false, NULL);
            if (rnd(2))
                ev(t - 2, CW_OP_COMMIT, pid, 0x80000, 4096, (int)rnd(4), false, NULL);
            ev(t - 1, CW_OP_PROCESS_EXIT, pid, 0, 0, -1, false, NULL);
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
    cw_store_close(s);
    cw_test_rmtree(dir);
    TEST_DONE();
}
