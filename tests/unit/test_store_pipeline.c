/* test_store_pipeline.c - the database's figures equal the exact trace
 * analysis, through the real core path.
 *
 * A generated workload (three processes, four stacks, rundown, commits
 * over committed pages, partial decommits and releases, exits and pid
 * reuse, bursts and gaps over three hours) goes once through tracker ->
 * aggregator -> store, and once per window through tracker -> window
 * analyzer. For windows aligned to seconds, minutes and hours, answered
 * by the raw, minute and hour tiers (retention 1 h and 2 h), every figure
 * of every process and stack must be equal. */
#include <stdbool.h>
#include <stdint.h>

#include "commitwatch/agg.h"
#include "commitwatch/analysis.h"
#include "commitwatch/event.h"
#include "commitwatch/pipeline.h"
#include "commitwatch/stacks.h"
#include "commitwatch/store.h"
#include "commitwatch/tagger.h"
#include "exact.h"
#include "report_check.h"
#include "store/store_internal.h"
#include "test.h"
#include "test_port.h"

#define S INT64_C(1000000000)
#define MIN (60 * S)
#define HOUR (3600 * S)
#define MAXEV 6000

static cw_event_t ev[MAXEV];
static const char *ev_stack[MAXEV][3]; /* frames, NULL-terminated */
static uint32_t nev;
static uint64_t rng = 0x9e3779b97f4a7c15ull;

static uint64_t rnd(uint64_t n)
{
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return rng % n;
}

static const char *const frames[][2] = {{"app!main", "kernelbase!VirtualAlloc"},
                                        {"app!main", "ntdll!RtlAllocateHeap"},
                                        {"app!worker", "kernelbase!VirtualAlloc"},
                                        {NULL, NULL}};

typedef struct range {
    uint64_t addr, size;
} range_t;

static void add(int64_t ts, cw_op_t op, uint32_t pid, uint64_t addr, uint64_t size, int stack,
                bool rundown, const char *name)
{
    ASSERT_TRUE(nev < MAXEV);
    ev[nev] = (cw_event_t){.ts = ts,
                           .op = op,
                           .pid = pid,
                           .addr = addr,
                           .size = size,
                           .rundown = rundown,
                           .name = name};
    ev_stack[nev][0] = stack >= 0 ? frames[stack][0] : NULL;
    ev_stack[nev][1] = stack >= 0 ? frames[stack][1] : NULL;
    nev++;
}

static void generate(int64_t t0)
{
    static const uint32_t pids[3] = {100, 200, 300};
    static range_t live[3][512];
    uint32_t nlive[3] = {0};
    uint64_t next[3];
    int64_t t = t0;
    for (int p = 0; p < 3; p++) {
        add(t, CW_OP_PROCESS_START, pids[p], 0, 0, -1, false, "gen.exe");
        next[p] = 0x10000000;
        for (int i = 0; i < 2; i++) {
            uint64_t sz = 4096 * (1 + rnd(8));
            add(t, CW_OP_COMMIT, pids[p], next[p], sz, (int)rnd(4), true, NULL);
            live[p][nlive[p]++] = (range_t){next[p], sz};
            next[p] += sz + 4 * 4096;
        }
    }
    while (t < t0 + 3 * HOUR) {
        uint64_t r = rnd(100);
        t += r < 85   ? (int64_t)rnd(2 * S)
             : r < 98 ? (int64_t)rnd(90 * S)
                      : 10 * MIN + (int64_t)rnd(20 * MIN);
        for (int n = 1 + (int)rnd(3); n > 0; n--) {
            int p = (int)rnd(3);
            if (!nlive[p] || rnd(100) < 55) {
                uint64_t sz = 4096 * (1 + rnd(16)), a = next[p];
                next[p] += sz + 4096 * rnd(3);
                if (nlive[p] && rnd(10) == 0) { /* over pages already committed */
                    range_t *o = &live[p][rnd(nlive[p])];
                    a = o->addr + 4096 * rnd(o->size / 4096);
                }
                add(t, CW_OP_COMMIT, pids[p], a, sz, (int)rnd(4), false, NULL);
                if (nlive[p] < 512) live[p][nlive[p]++] = (range_t){a, sz};
            } else {
                uint32_t i = (uint32_t)rnd(nlive[p]);
                range_t *o = &live[p][i];
                uint64_t off = 4096 * rnd(o->size / 4096);
                uint64_t sz = 4096 * (1 + rnd((o->size - off) / 4096));
                add(t, rnd(2) ? CW_OP_DECOMMIT : CW_OP_RELEASE, pids[p], o->addr + off, sz, -1,
                    false, NULL);
                if (off == 0 && sz == o->size) live[p][i] = live[p][--nlive[p]];
            }
            t += (int64_t)rnd(1000);
        }
        if (rnd(300) == 0) { /* exit, and the pid comes back */
            int p = (int)rnd(3);
            add(t, CW_OP_PROCESS_EXIT, pids[p], 0, 0, -1, false, NULL);
            add(t + 1, CW_OP_PROCESS_START, pids[p], 0, 0, -1, false, "again.exe");
            nlive[p] = 0;
            t += 2;
        }
    }
}

/* Interns the event's stack into st (same order, so same ids). */
static void feed_all(cw_pipeline_t *pipe, cw_stacks_t *st, cw_agg_t *agg)
{
    cw_diag_t d = {{0}};
    (void)agg;
    for (uint32_t i = 0; i < nev; i++) {
        cw_event_t e = ev[i];
        uint32_t n = ev_stack[i][0] ? 2 : 0;
        if (e.op == CW_OP_COMMIT)
            ASSERT_OK(cw_stacks_intern_strings(st, ev_stack[i], n, &e.stack_id));
        ASSERT_OK(cw_pipeline_feed(pipe, &e, &d));
    }
}

static void fill_store(cw_store_t *s)
{
    test_fill_store(s, feed_all, 0, 0);
}

static cw_report_t *exact(int64_t t0, int64_t t1)
{
    return test_exact(feed_all, t0, t1);
}

static void check(cw_store_t *s, int64_t t0, int64_t t1)
{
    cw_report_t *db, *tr;
    cw_diag_t d = {{0}};
    ASSERT_OK(cw_store_report(s, t0, t1, false, &db, &d));
    if (db->note) fprintf(stderr, "[%" PRId64 ", %" PRId64 "): %s\n", t0, t1, db->note);
    ASSERT_TRUE(db->note == NULL);
    tr = exact(t0, t1);
    if (db->nprocs != tr->nprocs) fprintf(stderr, "window [%" PRId64 ", %" PRId64 ")\n", t0, t1);
    ASSERT_EQ(db->nprocs, tr->nprocs);
    for (uint32_t i = 0; i < tr->nprocs; i++) {
        cw_proc_report_t *x = &tr->procs[i], *y = NULL;
        for (uint32_t j = 0; j < db->nprocs; j++)
            if (db->procs[j].id == x->id) y = &db->procs[j];
        ASSERT_TRUE(y != NULL);
        ASSERT_EQ(y->pid, x->pid);
        ASSERT_STR_EQ(y->name, x->name);
        ASSERT_EQ(y->exit_ns, x->exit_ns);
        test_proc_eq(y, x);
    }
    cw_report_free(db);
    cw_report_free(tr);
}

static void windows(cw_store_t *s, int64_t lo, int64_t hi, int64_t w, int n)
{
    test_windows(s, lo, hi, w, n, 60, rnd, check);
}

int main(void)
{
    char dir[256], path[300];
    snprintf(dir, sizeof dir, "%s/cw_test_store_pipeline_XXXXXX", cw_test_tmpdir());
    ASSERT_TRUE(cw_test_mkdtemp(dir) != NULL);
    int64_t t0 = INT64_C(1700000000) * S;
    generate(t0);
    int64_t end = ev[nev - 1].ts - ev[nev - 1].ts % S + S;

    cw_store_t *s;
    cw_diag_t d = {{0}};
    cw_store_opts_t o = {{0, 0, 0}, 0};
    cw__tier_t t[CW_TIERS];

    snprintf(path, sizeof path, "%s/full.db", dir);
    ASSERT_OK(cw_store_open(path, &o, &s, &d));
    fill_store(s);
    /* Windows from the start of the data or before it: read from the hour
     * and minute tiers from the start's hour on (store_report.c,
     * start_floor). */
    ASSERT_OK(cw__store_read_tiers(s, t, &d));
    check(s, t[0].start, end);
    check(s, t0 - 7 * MIN - 3 * S, end);
    for (int i = 0; i < 8; i++)
        check(s, t[0].start - (int64_t)rnd(3) * MIN, t[0].start + (1 + (int64_t)rnd(3 * 3600)) * S);
    windows(s, t0 - MIN, end + MIN, S, 60);
    windows(s, t0, end, MIN, 20);
    windows(s, t0, end, HOUR, 4);
    cw_store_close(s);

    snprintf(path, sizeof path, "%s/ret.db", dir);
    o.retention_ns[0] = HOUR;
    o.retention_ns[1] = 2 * HOUR;
    ASSERT_OK(cw_store_open(path, &o, &s, &d));
    fill_store(s);
    ASSERT_OK(cw__store_read_tiers(s, t, &d));
    ASSERT_TRUE(t[0].horizon > t0 && t[1].horizon > t0);
    windows(s, t[0].horizon, end + 5 * S, S, 40);
    windows(s, t[1].horizon, t[0].horizon, MIN, 20);
    windows(s, t0, t[2].end, HOUR, 6);
    cw_store_close(s);

    ASSERT_OK(cw_test_rmtree(dir));
    printf("%u events\n", nev);
    TEST_DONE();
}
