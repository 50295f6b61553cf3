/* test_agg_random.c - the bucket aggregator against the exact analyzer.
 *
 * DESIGN.md "Storage model" promises that the rows of the batches (commits,
 * releases, activity) give exact figures for any bucket-aligned window,
 * through its table of formulas. This test takes random traces, collects
 * every batch the aggregator emits, evaluates those formulas in C for
 * random aligned windows, and compares every figure, per process and per
 * (process, stack), with the window analyzer (itself checked against a
 * reference model by test_tracker_random.c). A failure here is in the
 * aggregator or in the formulas, not in SQL: the store's queries are
 * tested end to end by tests/e2e/test_analyze.py.
 *
 * Buckets are 100 ns wide so small timestamps give many of them. Fixed
 * seeds; CW_RANDOM_TRACES=N runs more, CW_RANDOM_SEED=S one. */
#include <inttypes.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "commitwatch/agg.h"
#include "commitwatch/analysis.h"
#include "commitwatch/batch.h"
#include "commitwatch/pipeline.h"
#include "commitwatch/report.h"
#include "commitwatch/stacks.h"
#include "commitwatch/tagger.h"
#include "rng.h"
#include "test.h"

#define W 100 /* bucket width, ns */
#define PAGE 4096u
#define NPIDS 4
#define NPAGES 40
#define MAXEV 500
#define NWIN 10
#define NSTACKS 4

static uint64_t seed_now;

/* ---- every row of every batch, with the batch's bucket ---------------------- */

typedef struct crow {
    int64_t bucket;
    cw_row_commit_t r;
} crow_t;
typedef struct rrow {
    int64_t f;
    cw_row_release_t r;
} rrow_t;
typedef struct arow {
    int64_t bucket;
    cw_row_activity_t r;
} arow_t;

static crow_t *C;
static rrow_t *R;
static arow_t *A;
static uint32_t nC, nR, nA, capC, capR, capA;
static int64_t last_bucket;
static int64_t start_of[4096]; /* instance id -> start_ns, from the proc rows */

#define PUSH(arr, n, cap, val)                                                                     \
    do {                                                                                           \
        if ((n) == (cap)) {                                                                        \
            (cap) = (cap) ? (cap)*2 : 1024;                                                        \
            (arr) = realloc((arr), (cap) * sizeof *(arr));                                         \
            ASSERT_TRUE((arr) != NULL);                                                            \
        }                                                                                          \
        (arr)[(n)++] = (val);                                                                      \
    } while (0)

static int capture(void *ctx, cw_batch_t *b)
{
    (void)ctx;
    ASSERT_TRUE(b->bucket_ns > last_bucket); /* one batch per bucket, in order */
    last_bucket = b->bucket_ns;
    ASSERT_EQ(b->width_ns, W);
    for (uint32_t i = 0; i < b->commits.n; i++) {
        const cw_row_commit_t *r = &b->commits.v[i];
        ASSERT_TRUE(r->a == b->bucket_ns || r->a == CW_TS_BEFORE);
        PUSH(C, nC, capC, ((crow_t){b->bucket_ns, *r}));
    }
    for (uint32_t i = 0; i < b->releases.n; i++) {
        const cw_row_release_t *r = &b->releases.v[i];
        ASSERT_TRUE(r->a == CW_TS_BEFORE || (r->a <= b->bucket_ns && r->a % W == 0));
        PUSH(R, nR, capR, ((rrow_t){b->bucket_ns, *r}));
    }
    for (uint32_t i = 0; i < b->procs.n; i++) {
        ASSERT_TRUE(b->procs.v[i].id < 4096);
        start_of[b->procs.v[i].id] = b->procs.v[i].start_ns;
    }
    for (uint32_t i = 0; i < b->activity.n; i++) {
        ASSERT_TRUE(b->activity.v[i].relpeak >= 0);
        PUSH(A, nA, capA, ((arow_t){b->bucket_ns, b->activity.v[i]}));
    }
    cw_batch_free(b);
    return 0;
}

/* ---- DESIGN.md's formulas ------------------------------------------------------ */

typedef struct dfigs {
    cw_figs_t figs;
    int64_t out_t0;
} dfigs_t;

/* Figures of (proc, stack) over [t0, t1); stack UINT32_MAX = all stacks. */
static void design_figs(uint32_t proc, uint32_t stack, int64_t t0, int64_t t1, dfigs_t *o)
{
    memset(o, 0, sizeof *o);
    uint64_t cw_bytes = 0, cw_events = 0, cb_bytes = 0, cb_events = 0;
    uint64_t rww_b = 0, rww_p = 0, rwl_p = 0, rwany_closed = 0;
    uint64_t rbw_b = 0, rbw_p = 0, rbl_p = 0, rbany_closed = 0, r_before_t0 = 0;
    for (uint32_t i = 0; i < nC; i++) {
        const cw_row_commit_t *r = &C[i].r;
        if (r->proc != proc || (stack != UINT32_MAX && r->stack != stack)) continue;
        if (r->a >= t0 && r->a < t1) {
            cw_bytes += r->bytes;
            cw_events += r->events;
        } else if (r->a < t0) {
            cb_bytes += r->bytes;
            cb_events += r->events;
        }
    }
    for (uint32_t i = 0; i < nR; i++) {
        const cw_row_release_t *r = &R[i].r;
        int64_t f = R[i].f;
        if (r->proc != proc || (stack != UINT32_MAX && r->stack != stack)) continue;
        if (f < t0) r_before_t0 += r->bytes;
        if (r->a >= t0 && r->a < t1) {
            rwany_closed += r->closed;
            if (f < t1) {
                rww_b += r->bytes;
                rww_p += r->pieces;
            } else {
                rwl_p += r->pieces;
            }
        } else if (r->a < t0) {
            rbany_closed += r->closed;
            if (f >= t0 && f < t1) {
                rbw_b += r->bytes;
                rbw_p += r->pieces;
            } else if (f >= t1) {
                rbl_p += r->pieces;
            }
        }
    }
    o->figs.size_bytes = cw_bytes;
    o->figs.commit_count = cw_events;
    o->figs.types[CW_AIFI] = (cw_typefig_t){rww_b, rww_p};
    o->figs.types[CW_AIFO] = (cw_typefig_t){cw_bytes - rww_b, rwl_p + cw_events - rwany_closed};
    o->figs.types[CW_AOFI] = (cw_typefig_t){rbw_b, rbw_p};
    o->out_t0 = (int64_t)(cb_bytes - r_before_t0);
    o->figs.types[CW_AOFO] =
        (cw_typefig_t){(uint64_t)o->out_t0 - rbw_b, rbl_p + cb_events - rbany_closed};
}

static int cmp_arow(const void *x, const void *y)
{
    const arow_t *a = x, *b = y;
    return a->bucket < b->bucket ? -1 : a->bucket > b->bucket;
}

#define CHECK(what, got, want)                                                                     \
    do {                                                                                           \
        long long cw__g = (long long)(got), cw__w = (long long)(want);                             \
        cw_test_checks++;                                                                          \
        if (cw__g != cw__w)                                                                        \
            CW_FAIL("seed %" PRIu64 " window [%" PRId64 ", %" PRId64 ") %s: analyzer %lld, "       \
                    "rows %lld",                                                                   \
                    seed_now, t0, t1, what, cw__g, cw__w);                                         \
    } while (0)

static void compare(const char *who, const cw_figs_t *g, const cw_figs_t *w, int64_t t0, int64_t t1)
{
    static const char *const tn[] = {"AIFI", "AIFO", "AOFI", "AOFO"};
    char what[128];
    snprintf(what, sizeof what, "%s size", who);
    CHECK(what, g->size_bytes, w->size_bytes);
    snprintf(what, sizeof what, "%s count", who);
    CHECK(what, g->commit_count, w->commit_count);
    for (int k = 0; k < CW_TYPE__COUNT; k++) {
        snprintf(what, sizeof what, "%s %s bytes", who, tn[k]);
        CHECK(what, g->types[k].bytes, w->types[k].bytes);
        snprintf(what, sizeof what, "%s %s count", who, tn[k]);
        CHECK(what, g->types[k].count, w->types[k].count);
    }
}

static void check_window(const cw_report_t *r, uint32_t nprocs, int64_t t0, int64_t t1)
{
    uint32_t reported = 0;
    for (uint32_t proc = 1; proc < nprocs; proc++) {
        dfigs_t d;
        design_figs(proc, UINT32_MAX, t0, t1, &d);
        uint64_t events = 0;
        int64_t cur = d.out_t0, peak = d.out_t0, peak_ns = t0;
        for (uint32_t i = 0; i < nA; i++) { /* A is in bucket order */
            if (A[i].r.proc != proc || A[i].bucket < t0 || A[i].bucket >= t1) continue;
            events += A[i].r.events;
            if (cur + A[i].r.relpeak > peak) {
                peak = cur + A[i].r.relpeak;
                peak_ns = A[i].r.relpeak_ns;
            }
            cur += A[i].r.delta;
        }
        /* The state at a bucket start is reached no earlier than the instance. */
        if (peak_ns < start_of[proc]) peak_ns = start_of[proc];
        const cw_proc_report_t *p = NULL;
        for (uint32_t k = 0; k < r->nprocs; k++)
            if (r->procs[k].id == proc) p = &r->procs[k];
        char who[64];
        snprintf(who, sizeof who, "instance %u", proc);
        char what[192];
        snprintf(what, sizeof what, "%s reported", who);
        CHECK(what, p != NULL, events > 0 || (d.out_t0 > 0 && start_of[proc] < t1));
        if (!p) continue;
        reported++;
        compare(who, &p->figs, &d.figs, t0, t1);
        snprintf(what, sizeof what, "%s events", who);
        CHECK(what, p->events, events);
        snprintf(what, sizeof what, "%s outstanding(t1) (rows: t0 + deltas)", who);
        CHECK(what, p->outstanding_end, cur);
        snprintf(what, sizeof what, "%s peak", who);
        CHECK(what, p->peak_bytes, peak);
        snprintf(what, sizeof what, "%s peak_ns", who);
        CHECK(what, p->peak_ns, peak_ns);
        for (uint32_t k = 0; k < p->nstacks; k++) {
            dfigs_t ds;
            design_figs(proc, p->stacks[k].stack_id, t0, t1, &ds);
            snprintf(who, sizeof who, "instance %u stack %u", proc, p->stacks[k].stack_id);
            compare(who, &p->stacks[k].figs, &ds.figs, t0, t1);
        }
    }
    CHECK("reported processes", r->nprocs, reported);
}

/* ---- random traces --------------------------------------------------------- */

typedef struct fan {
    cw_tracker_sink_t s[NWIN + 1];
    int n;
} fan_t;
static void f_start(void *c, const cw_proc_t *p, int64_t ts)
{
    fan_t *f = c;
    for (int i = 0; i < f->n; i++)
        if (f->s[i].on_start) f->s[i].on_start(f->s[i].ctx, p, ts);
}
static void f_event(void *c, const cw_proc_t *p, int64_t ts)
{
    fan_t *f = c;
    for (int i = 0; i < f->n; i++)
        if (f->s[i].on_event) f->s[i].on_event(f->s[i].ctx, p, ts);
}
static void f_commit(void *c, const cw_proc_t *p, const cw_commit_t *k, int64_t ts)
{
    fan_t *f = c;
    for (int i = 0; i < f->n; i++)
        if (f->s[i].on_commit) f->s[i].on_commit(f->s[i].ctx, p, k, ts);
}
static void f_release(void *c, const cw_proc_t *p, const cw_commit_t *k, uint64_t b, int64_t ts)
{
    fan_t *f = c;
    for (int i = 0; i < f->n; i++)
        if (f->s[i].on_release) f->s[i].on_release(f->s[i].ctx, p, k, b, ts);
}
static void f_exit(void *c, const cw_proc_t *p, int64_t ts)
{
    fan_t *f = c;
    for (int i = 0; i < f->n; i++)
        if (f->s[i].on_exit) f->s[i].on_exit(f->s[i].ctx, p, ts);
}
static void f_live(void *c, const cw_proc_t *p, const cw_commit_t *k)
{
    fan_t *f = c;
    for (int i = 0; i < f->n; i++)
        if (f->s[i].on_live) f->s[i].on_live(f->s[i].ctx, p, k);
}

static const char *const names[] = {"a.exe", "b.exe", "svchost.exe"};

static void one_trace(cw_stacks_t *stacks, cw_tagger_t *tagger, const uint32_t *sid, uint64_t seed)
{
    test_rng_seed(seed, 11);
    seed_now = seed;
    nC = nR = nA = 0;
    last_bucket = INT64_MIN;
    uint32_t nev = 20 + (uint32_t)(seed % 10 == 0 ? MAXEV - 20 : seed % 200);

    static cw_event_t evs[MAXEV];
    int64_t ts = 1000 + test_rng_below(300);
    for (uint32_t k = 0; k < nev; k++) {
        cw_event_t *ev = &evs[k];
        memset(ev, 0, sizeof *ev);
        uint32_t step = test_rng_below(6);
        if (step == 0)
            ts = (ts / W + 1) * W; /* exactly on the next bucket edge */
        else if (step < 3)
            ts += test_rng_below(60);
        ev->ts = ts;
        ev->pid = 100 + 4 * test_rng_below(NPIDS);
        ev->addr = (uint64_t)test_rng_below(NPAGES) * PAGE;
        ev->size = (uint64_t)(1 + test_rng_below(10)) * PAGE;
        uint32_t r = test_rng_below(100);
        if (k < 8) {
            ev->op = k % 2 ? CW_OP_COMMIT : CW_OP_PROCESS_START;
            ev->rundown = ev->op == CW_OP_COMMIT;
            ev->stack_id = sid[NSTACKS + 1];
            ev->name = names[test_rng_below(3)];
        } else if (r < 38) {
            ev->op = CW_OP_COMMIT;
            ev->stack_id = sid[test_rng_below(NSTACKS + 1)]; /* 0 = no stack, too */
        } else if (r < 64) {
            ev->op = CW_OP_DECOMMIT;
        } else if (r < 76) {
            ev->op = CW_OP_RELEASE;
        } else if (r < 80) {
            ev->op = CW_OP_RESERVE;
        } else if (r < 88) {
            ev->op = CW_OP_PROCESS_START;
            ev->name = names[test_rng_below(3)];
        } else if (r < 95) {
            ev->op = CW_OP_PROCESS_EXIT;
        } else {
            ev->op = CW_OP_COMMIT;
            ev->rundown = true;
            ev->stack_id = sid[NSTACKS + 1];
        }
    }
    int64_t lo = evs[0].ts / W * W, hi = (evs[nev - 1].ts / W + 1) * W;
    int64_t win[NWIN][2];
    win[0][0] = lo;
    win[0][1] = hi;
    for (int w = 1; w < NWIN; w++) {
        int64_t nb = (hi - lo) / W + 2;
        int64_t a = lo - W + (int64_t)test_rng_below((uint32_t)nb) * W;
        int64_t b = lo - W + (int64_t)test_rng_below((uint32_t)nb) * W;
        if (a > b) {
            int64_t t = a;
            a = b;
            b = t;
        }
        if (a == b) b += W;
        win[w][0] = a;
        win[w][1] = b;
    }

    fan_t fan = {.n = 0};
    cw_analysis_t *an[NWIN];
    for (int w = 0; w < NWIN; w++) {
        ASSERT_OK(cw_analysis_create(win[w][0], win[w][1], &an[w]));
        fan.s[fan.n++] = cw_analysis_sink(an[w]);
    }
    cw_agg_t *agg;
    ASSERT_OK(cw_agg_create(W, stacks, tagger, 0, 0, capture, NULL, &agg));
    fan.s[fan.n++] = cw_agg_sink(agg);
    cw_tracker_sink_t sink = {&fan, f_start, f_event, f_commit, f_release, f_exit, f_live};
    cw_pipeline_t *pipe;
    ASSERT_OK(cw_pipeline_create(&sink, agg, 1, &pipe));
    cw_diag_t d;
    for (uint32_t k = 0; k < nev; k++)
        ASSERT_OK(cw_pipeline_feed(pipe, &evs[k], &d));
    ASSERT_OK(cw_agg_flush(agg));
    cw_pipeline_finish(pipe); /* on_live: the analyzers' live pieces */
    uint32_t nprocs = cw_tracker_next_proc_id(cw_pipeline_tracker(pipe));
    qsort(A, nA, sizeof *A, cmp_arow);

    for (int w = 0; w < NWIN; w++) {
        cw_report_t *r;
        ASSERT_OK(cw_analysis_report(an[w], stacks, tagger, false, &r));
        check_window(r, nprocs, win[w][0], win[w][1]);
        cw_report_free(r);
        cw_analysis_destroy(an[w]);
    }
    cw_pipeline_destroy(pipe);
    cw_agg_destroy(agg);
}

int main(void)
{
    cw_stacks_t *stacks;
    cw_tagger_t *tagger;
    ASSERT_OK(cw_stacks_create(&stacks));
    ASSERT_OK(cw_tagger_create_builtin(&tagger));
    uint32_t sid[NSTACKS + 2];
    sid[0] = 0;
    for (int s = 1; s <= NSTACKS; s++) {
        char f[32];
        snprintf(f, sizeof f, "app.exe!f%d", s);
        const char *fr[] = {"app.exe!main", f, "KernelBase.dll!VirtualAlloc"};
        ASSERT_OK(cw_stacks_intern_strings(stacks, fr, 3, &sid[s]));
    }
    const char *rd[] = {"(before trace)"};
    ASSERT_OK(cw_stacks_intern_strings(stacks, rd, 1, &sid[NSTACKS + 1]));

    const char *one = getenv("CW_RANDOM_SEED"), *many = getenv("CW_RANDOM_TRACES");
    uint64_t s0 = 1, s1 = many ? strtoull(many, NULL, 10) : 1500;
    if (one) s0 = s1 = strtoull(one, NULL, 10);
    for (uint64_t s = s0; s <= s1; s++)
        one_trace(stacks, tagger, sid, s);

    free(C);
    free(R);
    free(A);
    cw_tagger_destroy(tagger);
    cw_stacks_destroy(stacks);
    TEST_DONE();
}
