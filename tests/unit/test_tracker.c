/* test_tracker.c - every rule of ARCHITECTURE.md "Commit tracking", one
 * hand-written case each, checked at the tracker's callbacks (what it
 * tells its sink) and through the window analyzer (the figures a user
 * sees). The randomised counterpart is test_tracker_random.c. */
#include <inttypes.h>
#include <stdbool.h>
#include <stdint.h>
#include <string.h>

#include "commitwatch/analysis.h"
#include "commitwatch/error.h"
#include "commitwatch/report.h"
#include "commitwatch/stacks.h"
#include "commitwatch/tagger.h"
#include "commitwatch/tracker.h"
#include "test.h"
#include "test_port.h"

#define P 4096ull /* one page */
#define BASE 0x7ff600000000ull

/* ---- a recording sink ------------------------------------------------------ */

typedef struct call {
    char kind; /* s)tart e)vent c)ommit r)elease x)exit l)ive */
    uint32_t id, pid;
    int64_t ts, commit_ts;
    uint32_t stack;
    uint64_t bytes, remaining;
    bool tracking_ended; /* the instance's flag when the call was made */
} call_t;

static call_t calls[256];
static int ncalls;

static void rec(char kind, const cw_proc_t *p, int64_t ts, const cw_commit_t *c, uint64_t bytes)
{
    ASSERT_TRUE(ncalls < 256);
    call_t *k = &calls[ncalls++];
    memset(k, 0, sizeof *k);
    k->kind = kind;
    k->id = p->id;
    k->pid = p->pid;
    k->ts = ts;
    k->tracking_ended = p->tracking_ended;
    if (c) {
        k->commit_ts = c->ts;
        k->stack = c->stack_id;
        k->remaining = c->remaining;
    }
    k->bytes = bytes;
}
static void r_start(void *x, const cw_proc_t *p, int64_t ts)
{
    (void)x;
    rec('s', p, ts, NULL, 0);
}
static void r_event(void *x, const cw_proc_t *p, int64_t ts)
{
    (void)x;
    rec('e', p, ts, NULL, 0);
}
static void r_commit(void *x, const cw_proc_t *p, const cw_commit_t *c, int64_t ts)
{
    (void)x;
    rec('c', p, ts, c, c->bytes);
}
static void r_release(void *x, const cw_proc_t *p, const cw_commit_t *c, uint64_t b, int64_t ts)
{
    (void)x;
    rec('r', p, ts, c, b);
}
static void r_exit(void *x, const cw_proc_t *p, int64_t ts)
{
    (void)x;
    rec('x', p, ts, NULL, 0);
}
static void r_live(void *x, const cw_proc_t *p, const cw_commit_t *c)
{
    (void)x;
    rec('l', p, 0, c, c->remaining);
}

static cw_tracker_t *new_recorder(void)
{
    cw_tracker_sink_t s = {NULL, r_start, r_event, r_commit, r_release, r_exit, r_live};
    cw_tracker_t *t;
    ASSERT_OK(cw_tracker_create(&s, 1, &t));
    ncalls = 0;
    return t;
}

static int count_calls(char kind)
{
    int n = 0;
    for (int i = 0; i < ncalls; i++)
        n += calls[i].kind == kind;
    return n;
}

/* The i-th call of this kind. */
static const call_t *nth(char kind, int i)
{
    for (int k = 0; k < ncalls; k++)
        if (calls[k].kind == kind && i-- == 0) return &calls[k];
    CW_FAIL("no call '%c' number %d", kind, i);
}

/* ---- events ------------------------------------------------------------------ */

static cw_stacks_t *stacks;
static cw_tagger_t *tagger;
static uint32_t S1, S2, S3, SRD;

static cw_event_t E(int64_t ts, cw_op_t op, uint32_t pid, uint64_t addr, uint64_t size,
                    uint32_t stack)
{
    cw_event_t ev;
    memset(&ev, 0, sizeof ev);
    ev.ts = ts;
    ev.op = op;
    ev.pid = pid;
    ev.addr = addr;
    ev.size = size;
    ev.stack_id = stack;
    return ev;
}

static cw_event_t START(int64_t ts, uint32_t pid, const char *name)
{
    cw_event_t ev = E(ts, CW_OP_PROCESS_START, pid, 0, 0, 0);
    ev.name = name;
    ev.cmdline = "cmd line";
    return ev;
}

static cw_event_t RUNDOWN(int64_t ts, uint32_t pid, uint64_t addr, uint64_t size)
{
    cw_event_t ev = E(ts, CW_OP_COMMIT, pid, addr, size, SRD);
    ev.rundown = true;
    return ev;
}

static void apply(cw_tracker_t *t, cw_event_t ev)
{
    ASSERT_OK(cw_tracker_apply(t, &ev));
}

/* Runs evs through a fresh tracker into an analysis of [t0, t1). */
static cw_report_t *analyze(const cw_event_t *evs, int n, int64_t t0, int64_t t1)
{
    cw_analysis_t *a;
    ASSERT_OK(cw_analysis_create(t0, t1, &a));
    cw_tracker_sink_t s = cw_analysis_sink(a);
    cw_tracker_t *t;
    ASSERT_OK(cw_tracker_create(&s, 1, &t));
    for (int i = 0; i < n; i++)
        ASSERT_OK(cw_tracker_apply(t, &evs[i]));
    cw_tracker_finish(t);
    cw_report_t *r;
    ASSERT_OK(cw_analysis_report(a, stacks, tagger, true, &r));
    cw_tracker_destroy(t);
    cw_analysis_destroy(a);
    return r;
}

static const cw_proc_report_t *proc_by_id(const cw_report_t *r, uint32_t id)
{
    for (uint32_t i = 0; i < r->nprocs; i++)
        if (r->procs[i].id == id) return &r->procs[i];
    return NULL;
}

static const cw_stack_report_t *stack_of(const cw_proc_report_t *p, uint32_t stack)
{
    for (uint32_t i = 0; i < p->nstacks; i++)
        if (p->stacks[i].stack_id == stack) return &p->stacks[i];
    return NULL;
}

#define ASSERT_TYPE(figs, type, b, c)                                                              \
    do {                                                                                           \
        ASSERT_U64_EQ((figs).types[type].bytes, (b));                                              \
        ASSERT_U64_EQ((figs).types[type].count, (c));                                              \
    } while (0)

/* ---- the rules ------------------------------------------------------------------ */

/* commit: only uncommitted pages become committed, attributed to this
 * event; overlapping commits never double count. */
static void test_overlapping_commits(void)
{
    cw_tracker_t *t = new_recorder();
    apply(t, START(10, 7, "app.exe"));
    apply(t, E(20, CW_OP_COMMIT, 7, BASE, 4 * P, S1));          /* [0,4) */
    apply(t, E(30, CW_OP_COMMIT, 7, BASE + 2 * P, 4 * P, S2));  /* [2,6): 2 new */
    apply(t, E(40, CW_OP_COMMIT, 7, BASE - 2 * P, 10 * P, S3)); /* [-2,8): 4 new, 2 runs */
    ASSERT_EQ(count_calls('c'), 3);
    ASSERT_U64_EQ(nth('c', 0)->bytes, 4 * P);
    ASSERT_U64_EQ(nth('c', 1)->bytes, 2 * P);
    ASSERT_U64_EQ(nth('c', 2)->bytes, 4 * P);
    ASSERT_EQ(nth('c', 2)->stack, S3);
    const cw_proc_t *p = cw_tracker_find(t, 7);
    ASSERT_TRUE(p != NULL);
    ASSERT_U64_EQ(p->outstanding, 10 * P);
    ASSERT_U64_EQ(cw_tracker_piece_count(t, 7), 4); /* S3 | S1 | S2 | S3 */
    cw_tracker_destroy(t);

    cw_event_t evs[] = {START(10, 7, "app.exe"), E(20, CW_OP_COMMIT, 7, BASE, 4 * P, S1),
                        E(30, CW_OP_COMMIT, 7, BASE + 2 * P, 4 * P, S2),
                        E(40, CW_OP_COMMIT, 7, BASE - 2 * P, 10 * P, S3)};
    cw_report_t *r = analyze(evs, 4, 0, 100);
    ASSERT_EQ(r->nprocs, 1);
    const cw_proc_report_t *pr = &r->procs[0];
    ASSERT_U64_EQ(pr->figs.size_bytes, 10 * P);
    ASSERT_U64_EQ(pr->figs.commit_count, 3);
    ASSERT_TYPE(pr->figs, CW_AIFO, 10 * P, 3); /* live: one piece per commit */
    ASSERT_U64_EQ(stack_of(pr, S2)->figs.size_bytes, 2 * P);
    ASSERT_U64_EQ(stack_of(pr, S3)->figs.types[CW_AIFO].count, 1); /* two runs, one piece */
    ASSERT_U64_EQ(pr->outstanding_end, 10 * P);
    ASSERT_U64_EQ(pr->peak_bytes, 10 * P);
    ASSERT_EQ(pr->peak_ns, 40);
    ASSERT_U64_EQ(pr->events, 4);
    cw_report_free(r);
}

/* A commit over pages that are all committed already changes nothing: no
 * commit record, not in Size or Count, attribution kept. */
static void test_commit_over_committed(void)
{
    cw_tracker_t *t = new_recorder();
    apply(t, START(10, 7, "app.exe"));
    apply(t, E(20, CW_OP_COMMIT, 7, BASE, 8 * P, S1));
    apply(t, E(30, CW_OP_COMMIT, 7, BASE + P, 2 * P, S2));
    ASSERT_EQ(count_calls('c'), 1);
    ASSERT_EQ(count_calls('e'), 3); /* still an event */
    apply(t, E(40, CW_OP_DECOMMIT, 7, BASE, 8 * P, 0));
    ASSERT_EQ(count_calls('r'), 1);
    ASSERT_EQ(nth('r', 0)->stack, S1); /* charged to the commit that made them */
    ASSERT_U64_EQ(nth('r', 0)->bytes, 8 * P);
    cw_tracker_destroy(t);

    cw_event_t evs[] = {START(10, 7, "app.exe"), E(20, CW_OP_COMMIT, 7, BASE, 8 * P, S1),
                        E(30, CW_OP_COMMIT, 7, BASE + P, 2 * P, S2)};
    cw_report_t *r = analyze(evs, 3, 25, 100); /* the second commit only */
    ASSERT_EQ(r->nprocs, 1);
    ASSERT_U64_EQ(r->procs[0].figs.size_bytes, 0);
    ASSERT_U64_EQ(r->procs[0].figs.commit_count, 0);
    ASSERT_TYPE(r->procs[0].figs, CW_AOFO, 8 * P, 1);
    ASSERT_TRUE(stack_of(&r->procs[0], S2) == NULL);
    ASSERT_U64_EQ(r->procs[0].events, 1);
    cw_report_free(r);
}

/* A partial decommit splits a piece; the bytes removed count against the
 * commit's stack, timestamped with the decommit. Non-contiguous bytes of
 * one commit removed by one event make one piece (DESIGN.md). */
static void test_partial_decommit(void)
{
    cw_tracker_t *t = new_recorder();
    apply(t, START(10, 7, "app.exe"));
    apply(t, E(20, CW_OP_COMMIT, 7, BASE, 10 * P, S1));
    apply(t, E(30, CW_OP_DECOMMIT, 7, BASE + 4 * P, 2 * P, S2)); /* the middle */
    ASSERT_U64_EQ(cw_tracker_piece_count(t, 7), 2);
    ASSERT_EQ(count_calls('r'), 1);
    ASSERT_EQ(nth('r', 0)->stack, S1);
    ASSERT_EQ(nth('r', 0)->ts, 30);
    ASSERT_EQ(nth('r', 0)->commit_ts, 20);
    ASSERT_U64_EQ(nth('r', 0)->bytes, 2 * P);
    ASSERT_U64_EQ(nth('r', 0)->remaining, 8 * P);
    apply(t, E(40, CW_OP_COMMIT, 7, BASE + 4 * P, 1 * P, S2)); /* refill half the hole */
    ASSERT_U64_EQ(cw_tracker_piece_count(t, 7), 3);
    /* One decommit over both remaining runs of S1 and the S2 page: */
    apply(t, E(50, CW_OP_DECOMMIT, 7, BASE + 2 * P, 6 * P, 0));
    ASSERT_EQ(count_calls('r'), 3); /* S1 (two runs, one piece) and S2 */
    uint64_t s1 = 0, s2 = 0;
    for (int i = 1; i < 3; i++) {
        if (nth('r', i)->stack == S1) s1 += nth('r', i)->bytes;
        if (nth('r', i)->stack == S2) s2 += nth('r', i)->bytes;
    }
    ASSERT_U64_EQ(s1, 4 * P); /* S1's pages 2, 3 and 6, 7 */
    ASSERT_U64_EQ(s2, 1 * P);
    ASSERT_U64_EQ(cw_tracker_piece_count(t, 7), 2); /* [0,2) and [8,10) */
    ASSERT_U64_EQ(cw_tracker_find(t, 7)->outstanding, 4 * P);
    cw_tracker_destroy(t);

    cw_event_t evs[] = {START(10, 7, "app.exe"), E(20, CW_OP_COMMIT, 7, BASE, 10 * P, S1),
                        E(30, CW_OP_DECOMMIT, 7, BASE + 4 * P, 2 * P, S2),
                        E(40, CW_OP_COMMIT, 7, BASE + 4 * P, 1 * P, S2),
                        E(50, CW_OP_DECOMMIT, 7, BASE + 2 * P, 6 * P, 0)};
    cw_report_t *r = analyze(evs, 5, 0, 100);
    const cw_proc_report_t *p = &r->procs[0];
    const cw_stack_report_t *a = stack_of(p, S1), *b = stack_of(p, S2);
    ASSERT_TYPE(a->figs, CW_AIFI, 6 * P, 2); /* 2 pages at 30, 4 at 50 */
    ASSERT_TYPE(a->figs, CW_AIFO, 4 * P, 1);
    ASSERT_TYPE(b->figs, CW_AIFI, 1 * P, 1);
    ASSERT_U64_EQ(b->figs.size_bytes, 1 * P);
    ASSERT_U64_EQ(p->peak_bytes, 10 * P);
    ASSERT_EQ(p->peak_ns, 20);
    cw_report_free(r);
    /* A window cutting the pieces: [35, 45) sees AOFO for S1, the S2 commit
     * as AIFO, and no release. */
    r = analyze(evs, 5, 35, 45);
    p = &r->procs[0];
    ASSERT_TYPE(stack_of(p, S1)->figs, CW_AOFO, 8 * P, 2); /* released at 50, and live */
    ASSERT_TYPE(stack_of(p, S2)->figs, CW_AIFO, 1 * P, 1);
    ASSERT_U64_EQ(p->peak_bytes, 9 * P);
    ASSERT_EQ(p->peak_ns, 40);
    cw_report_free(r);
}

/* Decommitting pages that were never committed changes nothing (and is
 * still an event of the process). */
static void test_decommit_uncommitted(void)
{
    cw_tracker_t *t = new_recorder();
    apply(t, START(10, 7, "app.exe"));
    apply(t, E(20, CW_OP_COMMIT, 7, BASE, 2 * P, S1));
    apply(t, E(30, CW_OP_DECOMMIT, 7, BASE + 100 * P, 50 * P, 0));
    apply(t, E(40, CW_OP_RELEASE, 7, BASE + 2 * P, 1 * P, 0)); /* right after */
    ASSERT_EQ(count_calls('r'), 0);
    ASSERT_U64_EQ(cw_tracker_find(t, 7)->outstanding, 2 * P);
    ASSERT_U64_EQ(cw_tracker_piece_count(t, 7), 1);
    /* A decommit for an unknown pid creates its instance, nothing else. */
    apply(t, E(50, CW_OP_DECOMMIT, 9, BASE, P, 0));
    ASSERT_TRUE(cw_tracker_find(t, 9) != NULL);
    ASSERT_U64_EQ(cw_tracker_find(t, 9)->outstanding, 0);
    ASSERT_EQ(count_calls('r'), 0);
    /* reserve never changes commit figures */
    apply(t, E(60, CW_OP_RESERVE, 7, BASE + 10 * P, 64 * P, S2));
    ASSERT_U64_EQ(cw_tracker_find(t, 7)->outstanding, 2 * P);
    ASSERT_EQ(count_calls('c'), 1);
    cw_tracker_destroy(t);
}

/* pid reuse: a new process_start ends the live instance (its memory
 * released at that time) and starts another; two instances, never merged. */
static void test_pid_reuse(void)
{
    cw_event_t evs[] = {
        START(10, 7, "first.exe"),
        E(20, CW_OP_COMMIT, 7, BASE, 4 * P, S1),
        START(30, 7, "second.exe"), /* no exit in between */
        E(40, CW_OP_COMMIT, 7, BASE, 2 * P, S2),
        E(50, CW_OP_PROCESS_EXIT, 7, 0, 0, 0),
        START(60, 7, "third.exe"), /* after a proper exit */
        E(70, CW_OP_COMMIT, 7, BASE + P, P, S3),
    };
    cw_tracker_t *t = new_recorder();
    for (int i = 0; i < 7; i++)
        apply(t, evs[i]);
    ASSERT_EQ(count_calls('s'), 3);
    ASSERT_EQ(count_calls('x'), 2);
    ASSERT_EQ(nth('x', 0)->id, 1);
    ASSERT_EQ(nth('x', 0)->ts, 30);
    ASSERT_EQ(nth('r', 0)->id, 1); /* first's memory, released at 30 */
    ASSERT_EQ(nth('r', 0)->ts, 30);
    ASSERT_U64_EQ(nth('r', 0)->bytes, 4 * P);
    ASSERT_EQ(nth('s', 1)->id, 2);
    ASSERT_EQ(nth('s', 2)->id, 3);
    ASSERT_EQ(cw_tracker_find(t, 7)->id, 3);
    ASSERT_STR_EQ(cw_tracker_find(t, 7)->name, "third.exe");
    ASSERT_U64_EQ(cw_tracker_find(t, 7)->outstanding, P);
    ASSERT_EQ(cw_tracker_live_processes(t), 1);
    ASSERT_EQ(cw_tracker_next_proc_id(t), 4);
    cw_tracker_destroy(t);

    cw_report_t *r = analyze(evs, 7, 0, 100);
    ASSERT_EQ(r->nprocs, 3);
    const cw_proc_report_t *a = proc_by_id(r, 1), *b = proc_by_id(r, 2), *c = proc_by_id(r, 3);
    ASSERT_TRUE(a && b && c);
    ASSERT_STR_EQ(a->name, "first.exe");
    ASSERT_STR_EQ(b->name, "second.exe");
    ASSERT_STR_EQ(c->name, "third.exe");
    ASSERT_EQ(a->pid, 7);
    ASSERT_EQ(b->pid, 7);
    ASSERT_EQ(a->exit_ns, 30);
    ASSERT_EQ(b->exit_ns, 50);
    ASSERT_EQ(c->exit_ns, CW_TS_NEVER);
    ASSERT_EQ(b->start_ns, 30);
    ASSERT_TYPE(a->figs, CW_AIFI, 4 * P, 1);
    ASSERT_TYPE(b->figs, CW_AIFI, 2 * P, 1);
    ASSERT_TYPE(c->figs, CW_AIFO, 1 * P, 1);
    ASSERT_U64_EQ(a->figs.size_bytes + b->figs.size_bytes + c->figs.size_bytes, 7 * P);
    ASSERT_STR_EQ(c->cmdline, "cmd line");
    cw_report_free(r);
    /* A window after the first instance ended does not show it. */
    r = analyze(evs, 7, 31, 100);
    ASSERT_TRUE(proc_by_id(r, 1) == NULL);
    ASSERT_EQ(r->nprocs, 2);
    cw_report_free(r);
}

/* process_exit releases everything still committed, at the exit time. */
static void test_exit_with_outstanding(void)
{
    cw_event_t evs[] = {
        START(10, 7, "app.exe"),
        E(20, CW_OP_COMMIT, 7, BASE, 4 * P, S1),
        E(25, CW_OP_COMMIT, 7, BASE + 8 * P, 2 * P, S2),
        E(30, CW_OP_DECOMMIT, 7, BASE + P, P, 0),
        E(40, CW_OP_PROCESS_EXIT, 7, 0, 0, 0),
    };
    cw_tracker_t *t = new_recorder();
    for (int i = 0; i < 5; i++)
        apply(t, evs[i]);
    ASSERT_TRUE(cw_tracker_find(t, 7) == NULL);
    ASSERT_EQ(cw_tracker_live_processes(t), 0);
    ASSERT_EQ(count_calls('r'), 3); /* the decommit, then S1's rest, S2 */
    uint64_t at_exit = 0;
    for (int i = 0; i < 3; i++)
        if (nth('r', i)->ts == 40) {
            at_exit += nth('r', i)->bytes;
            ASSERT_U64_EQ(nth('r', i)->remaining, 0);
        }
    ASSERT_U64_EQ(at_exit, 5 * P);
    cw_tracker_finish(t);
    ASSERT_EQ(count_calls('l'), 0);
    cw_tracker_destroy(t);

    cw_report_t *r = analyze(evs, 5, 0, 100);
    const cw_proc_report_t *p = &r->procs[0];
    ASSERT_EQ(p->exit_ns, 40);
    ASSERT_TYPE(p->figs, CW_AIFI, 6 * P, 3);
    ASSERT_EQ(cw_figs_impacting(&p->figs), 0);
    ASSERT_U64_EQ(p->outstanding_end, 0);
    cw_report_free(r);
    /* Seen from a window that starts after the commits: AOFI at the exit. */
    r = analyze(evs, 5, 35, 100);
    p = &r->procs[0];
    ASSERT_TYPE(p->figs, CW_AOFI, 5 * P, 2);
    ASSERT_EQ(cw_figs_impacting(&p->figs), -(int64_t)(5 * P));
    ASSERT_U64_EQ(p->peak_bytes, 5 * P);
    ASSERT_EQ(p->peak_ns, 35); /* the state at the window start */
    cw_report_free(r);
    /* A window that ends at the exit: the exit is not in it. */
    r = analyze(evs, 5, 35, 40);
    ASSERT_TYPE(r->procs[0].figs, CW_AOFO, 5 * P, 2);
    ASSERT_EQ(r->procs[0].exit_ns, 40); /* the instance's facts, not the window's */
    cw_report_free(r);
}

/* Events for a pid with no process_start make an instance "pid N", which
 * starts at that event; events after an exit make a new one. */
static void test_unannounced_pid(void)
{
    cw_event_t evs[] = {
        E(20, CW_OP_COMMIT, 42, BASE, 2 * P, S1), E(30, CW_OP_PROCESS_EXIT, 42, 0, 0, 0),
        E(40, CW_OP_COMMIT, 42, BASE, 1 * P, S2), /* after the exit */
        E(50, CW_OP_PROCESS_EXIT, 43, 0, 0, 0),   /* exit of a pid never seen */
    };
    cw_tracker_t *t = new_recorder();
    for (int i = 0; i < 4; i++)
        apply(t, evs[i]);
    const cw_proc_t *p = cw_tracker_find(t, 42);
    ASSERT_TRUE(p != NULL);
    ASSERT_STR_EQ(p->name, "pid 42");
    ASSERT_TRUE(p->implicit);
    ASSERT_EQ(p->id, 2);
    ASSERT_EQ(p->start_ns, 40);
    ASSERT_EQ(count_calls('s'), 3);
    cw_tracker_destroy(t);

    cw_report_t *r = analyze(evs, 4, 0, 100);
    ASSERT_EQ(r->nprocs, 3);
    ASSERT_STR_EQ(proc_by_id(r, 1)->name, "pid 42");
    ASSERT_EQ(proc_by_id(r, 1)->start_ns, 20);
    ASSERT_EQ(proc_by_id(r, 1)->exit_ns, 30);
    ASSERT_TRUE(proc_by_id(r, 1)->cmdline == NULL);
    ASSERT_STR_EQ(proc_by_id(r, 2)->name, "pid 42");
    ASSERT_EQ(proc_by_id(r, 2)->exit_ns, CW_TS_NEVER);
    ASSERT_STR_EQ(proc_by_id(r, 3)->name, "pid 43");
    ASSERT_EQ(proc_by_id(r, 3)->exit_ns, 50);
    cw_report_free(r);
}

/* Rundown commits are "before trace": never in Size or Count, AOFO or AOFI
 * in every window, outstanding at every time before their release. */
static void test_rundown(void)
{
    cw_event_t evs[] = {
        START(10, 7, "svc.exe"),
        RUNDOWN(10, 7, BASE, 4 * P),
        RUNDOWN(10, 7, BASE + 2 * P, 4 * P), /* overlaps: 2 new pages */
        E(20, CW_OP_COMMIT, 7, BASE + 8 * P, P, S1),
        E(30, CW_OP_DECOMMIT, 7, BASE, P, 0),
    };
    cw_tracker_t *t = new_recorder();
    for (int i = 0; i < 5; i++)
        apply(t, evs[i]);
    ASSERT_EQ(nth('c', 0)->commit_ts, CW_TS_BEFORE);
    ASSERT_U64_EQ(nth('c', 1)->bytes, 2 * P);
    ASSERT_EQ(nth('r', 0)->commit_ts, CW_TS_BEFORE);
    cw_tracker_destroy(t);

    cw_report_t *r = analyze(evs, 5, 0, 100); /* starts before the rundown events */
    const cw_proc_report_t *p = &r->procs[0];
    ASSERT_U64_EQ(p->figs.size_bytes, P);
    ASSERT_U64_EQ(p->figs.commit_count, 1);
    ASSERT_TYPE(p->figs, CW_AOFI, P, 1);
    ASSERT_TYPE(p->figs, CW_AOFO, 5 * P, 2);
    ASSERT_TYPE(p->figs, CW_AIFO, P, 1);
    ASSERT_U64_EQ(p->peak_bytes, 7 * P);
    ASSERT_EQ(p->peak_ns, 20);
    const cw_stack_report_t *s = stack_of(p, SRD);
    ASSERT_TRUE(s != NULL);
    ASSERT_STR_EQ(s->tag, "(before trace)");
    ASSERT_EQ(s->nframes, 1);
    ASSERT_STR_EQ(s->frames[0], "(before trace)");
    cw_report_free(r);
    /* A window between events: the rundown is outstanding at its start. */
    r = analyze(evs, 5, 12, 15);
    ASSERT_EQ(r->nprocs, 1);
    ASSERT_U64_EQ(r->procs[0].events, 0);
    ASSERT_TYPE(r->procs[0].figs, CW_AOFO, 6 * P, 3); /* the decommit at 30 is after */
    ASSERT_U64_EQ(r->procs[0].peak_bytes, 6 * P);
    ASSERT_EQ(r->procs[0].peak_ns, 12);
    cw_report_free(r);
    /* Rundown never reaches back before its instance started (DESIGN.md,
     * "Reported processes"): a window before the start shows nothing. */
    r = analyze(evs, 5, 0, 5);
    ASSERT_EQ(r->nprocs, 0);
    cw_report_free(r);
}

/* Window edges: [t0, t1) includes t0 and excludes t1; events of equal
 * time apply in order; peak is per event, ties to the earliest. */
static void test_window_edges(void)
{
    cw_event_t evs[] = {
        START(10, 7, "app.exe"),
        E(20, CW_OP_COMMIT, 7, BASE, 2 * P, S1),
        E(20, CW_OP_RELEASE, 7, BASE, 2 * P, 0), /* same instant: AIFI */
        E(30, CW_OP_COMMIT, 7, BASE + 4 * P, 3 * P, S2),
        E(40, CW_OP_RELEASE, 7, BASE + 4 * P, 3 * P, 0),
        E(40, CW_OP_COMMIT, 7, BASE, 3 * P, S3), /* peak 3P again, later */
    };
    cw_report_t *r = analyze(evs, 6, 20, 21);
    const cw_proc_report_t *p = &r->procs[0];
    ASSERT_TYPE(p->figs, CW_AIFI, 2 * P, 1);
    ASSERT_U64_EQ(p->peak_bytes, 2 * P); /* between the two events at 20 */
    ASSERT_EQ(p->peak_ns, 20);
    ASSERT_U64_EQ(p->events, 2);
    cw_report_free(r);
    r = analyze(evs, 6, 30, 40); /* ends at the release */
    p = &r->procs[0];
    ASSERT_TYPE(p->figs, CW_AIFO, 3 * P, 1);
    ASSERT_U64_EQ(p->outstanding_end, 3 * P);
    cw_report_free(r);
    r = analyze(evs, 6, 40, 50); /* starts at the release */
    p = &r->procs[0];
    ASSERT_TYPE(p->figs, CW_AOFI, 3 * P, 1);
    ASSERT_TYPE(p->figs, CW_AIFO, 3 * P, 1);
    ASSERT_EQ(cw_figs_impacting(&p->figs), 0);
    ASSERT_U64_EQ(p->peak_bytes, 3 * P);
    ASSERT_EQ(p->peak_ns, 40); /* the state at t0, and again after the commit */
    cw_report_free(r);
    r = analyze(evs, 6, 0, 100);
    ASSERT_U64_EQ(r->procs[0].peak_bytes, 3 * P);
    ASSERT_EQ(r->procs[0].peak_ns, 30); /* the first time 3P was reached */
    cw_report_free(r);
    /* A window with nothing in it and nothing outstanding: no process. */
    r = analyze(evs, 6, 21, 30);
    ASSERT_EQ(r->nprocs, 0);
    cw_report_free(r);
}

/* Commits past CW_COMMIT_END_MAX (2^63 - 1), where no memory is
 * committed but a trace or an .etl may put some, change nothing, so
 * outstanding bytes and a window's change of them stay within int64_t (a
 * trace's commits up to 2^64 overflowed the analyzer: fuzz_trace,
 * 2026-12-02); other ranges may lie above (Linux's [vsyscall] page is a
 * rundown reserve at 0xffffffffff600000). Up to it, figures are exact. */
static void test_huge_ranges(void)
{
    const uint64_t END = CW_COMMIT_END_MAX, VSYSCALL = 0xffffffffff600000ull;
    ASSERT_TRUE(cw_commit_ok(0, END) && cw_commit_ok(END - 1, 1) && cw_commit_ok(P, END - P));
    ASSERT_TRUE(!cw_commit_ok(END, 1) && !cw_commit_ok(1, END) && !cw_commit_ok(P, 0) &&
                !cw_commit_ok(VSYSCALL, P) && !cw_commit_ok(UINT64_MAX, 2));
    ASSERT_TRUE(cw_range_ok(VSYSCALL, P) && cw_range_ok(0, UINT64_MAX) &&
                cw_range_ok(UINT64_MAX - P, P) && !cw_range_ok(UINT64_MAX - P + 1, P) &&
                !cw_range_ok(P, 0));
    cw_tracker_t *t = new_recorder();
    apply(t, START(1, 7, "app.exe"));
    apply(t, E(2, CW_OP_RESERVE, 7, VSYSCALL, P, 0));
    ASSERT_U64_EQ(cw_tracker_reserved_piece_count(t, 7), 1);
    apply(t, E(3, CW_OP_COMMIT, 7, VSYSCALL, P, S1)); /* nothing */
    ASSERT_U64_EQ(cw_tracker_piece_count(t, 7), 0);
    cw_tracker_destroy(t);
    cw_event_t evs[] = {
        START(10, 7, "app.exe"),
        E(20, CW_OP_COMMIT, 7, P, END - P, S1),     /* [P, 2^63 - 1) */
        E(25, CW_OP_COMMIT, 7, END - P, 2 * P, S2), /* past the end: nothing */
        E(26, CW_OP_COMMIT, 7, END + 1, P, S2),     /* ... */
        E(27, CW_OP_COMMIT, 7, UINT64_MAX - P, P, S2),
        E(30, CW_OP_COMMIT, 7, 0, P, S2),               /* outstanding INT64_MAX */
        E(40, CW_OP_RELEASE, 7, P, UINT64_MAX, 0),      /* wraps: nothing */
        E(45, CW_OP_DECOMMIT, 7, P, UINT64_MAX - P, 0), /* outstanding P */
        E(50, CW_OP_RELEASE, 7, 0, END, 0),             /* outstanding 0 */
        E(60, CW_OP_COMMIT, 7, P, END - P, S1),
    };
    cw_report_t *r = analyze(evs, 10, 0, 100);
    const cw_proc_report_t *p = &r->procs[0];
    ASSERT_U64_EQ(p->peak_bytes, END);
    ASSERT_EQ(p->peak_ns, 30);
    ASSERT_U64_EQ(p->events, 10); /* the ignored ones too */
    ASSERT_TYPE(p->figs, CW_AIFI, END, 2);
    ASSERT_TYPE(p->figs, CW_AIFO, END - P, 1);
    cw_report_free(r);
    /* All of it released inside the window: the change reaches -INT64_MAX. */
    r = analyze(evs, 10, 35, 55);
    p = &r->procs[0];
    ASSERT_TYPE(p->figs, CW_AOFI, END, 2);
    ASSERT_U64_EQ(p->peak_bytes, END); /* the state at t0 */
    ASSERT_EQ(p->peak_ns, 35);
    ASSERT_EQ(cw_figs_impacting(&p->figs), -INT64_MAX);
    /* The table prints the limits. */
    cw_test_scratch_t sc;
    char text[4096];
    ASSERT_TRUE(cw_test_scratch_open(&sc, "table") != NULL);
    ASSERT_OK(cw_report_print_table(r, false, sc.f));
    cw_test_scratch_read(&sc, text, sizeof text);
    ASSERT_TRUE(strstr(text, " 8388608 TB ") != NULL);  /* the peak */
    ASSERT_TRUE(strstr(text, " -8388608 TB ") != NULL); /* impacting */
    cw_report_free(r);
    r = analyze(evs, 10, 55, 100);
    p = &r->procs[0];
    ASSERT_U64_EQ(p->peak_bytes, END - P);
    ASSERT_EQ(p->peak_ns, 60);
    cw_report_free(r);
}

/* Impacting is held within int64_t; the byte formatter takes both ends. */
static void test_impacting_limits(void)
{
    cw_figs_t f;
    memset(&f, 0, sizeof f);
    f.types[CW_AIFO].bytes = UINT64_MAX;
    ASSERT_EQ(cw_figs_impacting(&f), INT64_MAX);
    f.types[CW_AIFO].bytes = UINT64_C(1) << 63;
    ASSERT_EQ(cw_figs_impacting(&f), INT64_MAX);
    f.types[CW_AOFI].bytes = 1;
    ASSERT_EQ(cw_figs_impacting(&f), INT64_MAX);
    f.types[CW_AOFI].bytes = 2;
    ASSERT_EQ(cw_figs_impacting(&f), INT64_MAX - 1);
    f.types[CW_AIFO].bytes = 0;
    f.types[CW_AOFI].bytes = UINT64_C(1) << 63;
    ASSERT_EQ(cw_figs_impacting(&f), INT64_MIN);
    f.types[CW_AOFI].bytes = UINT64_MAX;
    ASSERT_EQ(cw_figs_impacting(&f), INT64_MIN);
    f.types[CW_AIFO].bytes = 5;
    f.types[CW_AOFI].bytes = 7;
    ASSERT_EQ(cw_figs_impacting(&f), -2);
    char b[32];
    cw_format_bytes(INT64_MIN, b, sizeof b);
    ASSERT_STR_EQ(b, "-8388608 TB");
    cw_format_bytes(-1000, b, sizeof b);
    ASSERT_STR_EQ(b, "-1000 B");
    cw_format_bytes(2048, b, sizeof b);
    ASSERT_STR_EQ(b, "2.00 KB");
    cw_format_ubytes(UINT64_MAX, b, sizeof b);
    ASSERT_STR_EQ(b, "16777216 TB");
}

/* The end of a run: cw_tracker_end_all ends every live instance as an exit
 * would, releasing its memory at that time, but flagged as the end of
 * tracking (what is stored tells it from a real exit). */
static void test_end_all(void)
{
    cw_tracker_t *t = new_recorder();
    apply(t, START(10, 7, "a.exe"));
    apply(t, E(20, CW_OP_COMMIT, 7, BASE, 4 * P, S1));
    apply(t, E(30, CW_OP_COMMIT, 9, BASE, 2 * P, S2)); /* implicit "pid 9" */
    apply(t, E(40, CW_OP_PROCESS_EXIT, 9, 0, 0, 0));
    apply(t, E(50, CW_OP_COMMIT, 11, BASE, P, S3));
    /* The real exit of pid 9 was not the end of tracking. */
    for (int i = 0; i < ncalls; i++)
        ASSERT_TRUE(!calls[i].tracking_ended);
    ASSERT_TRUE(!cw_tracker_find(t, 7)->tracking_ended);
    ncalls = 0;
    cw_tracker_end_all(t, 60);
    ASSERT_EQ(cw_tracker_live_processes(t), 0);
    ASSERT_TRUE(cw_tracker_find(t, 7) == NULL);
    ASSERT_EQ(count_calls('x'), 2); /* pid 7 and pid 11; pid 9 had exited */
    for (int i = 0; i < 2; i++)
        ASSERT_TRUE(nth('x', i)->tracking_ended && nth('x', i)->ts == 60);
    for (int i = 0; i < 2; i++)
        ASSERT_TRUE(nth('r', i)->tracking_ended);
    ASSERT_EQ(count_calls('r'), 2);
    for (int i = 0; i < 2; i++)
        ASSERT_EQ(nth('r', i)->ts, 60);
    cw_tracker_finish(t);
    ASSERT_EQ(count_calls('l'), 0);
    cw_tracker_end_all(t, 70); /* nothing left: a no-op */
    ASSERT_EQ(count_calls('x'), 2);
    cw_tracker_destroy(t);
}

/* Many pieces: a commit fragmented page by page and decommitted in one go. */
static void test_many_pieces(void)
{
    cw_tracker_t *t = new_recorder();
    apply(t, START(1, 7, "app.exe"));
    for (int i = 0; i < 200; i += 2)
        apply(t, E(2, CW_OP_COMMIT, 7, BASE + (uint64_t)i * P, P, S1));
    ASSERT_U64_EQ(cw_tracker_piece_count(t, 7), 100);
    apply(t, E(3, CW_OP_COMMIT, 7, BASE, 200 * P, S2)); /* fills the 100 holes */
    ASSERT_U64_EQ(cw_tracker_piece_count(t, 7), 200);
    ncalls = 0;
    apply(t, E(4, CW_OP_DECOMMIT, 7, BASE + P, 198 * P, 0)); /* all but the ends */
    ASSERT_EQ(count_calls('r'), 100); /* 99 S1 commits touched, and S2 once */
    ASSERT_U64_EQ(cw_tracker_find(t, 7)->outstanding, 2 * P);
    ASSERT_U64_EQ(cw_tracker_piece_count(t, 7), 2);
    cw_tracker_destroy(t);
}

/* cw_tracker_memory: the pools grow by whole chunks as pieces are made,
 * and keep them (for reuse) once the pieces are gone. */
static void test_memory(void)
{
    cw_tracker_t *t = new_recorder();
    size_t empty = cw_tracker_memory(t);
    ASSERT_TRUE(empty > 0);
    apply(t, START(1, 7, "app.exe"));
    for (int i = 0; i < 20000; i += 2) {
        apply(t, E(2, CW_OP_COMMIT, 7, BASE + (uint64_t)i * P, P, S1));
        ncalls = 0; /* the recorder holds 256 calls */
    }
    size_t full = cw_tracker_memory(t);
    /* 10,000 pieces, each a commit record and a leaf slot at least. */
    ASSERT_TRUE(full >= empty + 10000 * (sizeof(uint64_t) * 4));
    /* Released, not decommitted: a decommit leaves reserved pieces, whose
     * records come from a pool of their own. */
    for (int i = 0; i < 20000; i += 200) {
        apply(t, E(3, CW_OP_RELEASE, 7, BASE + (uint64_t)i * P, 200 * P, 0));
        ncalls = 0;
    }
    ASSERT_U64_EQ(cw_tracker_piece_count(t, 7), 0);
    ASSERT_TRUE(cw_tracker_memory(t) == full);
    /* Reservations are counted: the first takes a chunk of that pool. */
    apply(t, E(4, CW_OP_RESERVE, 7, BASE, P, 0));
    ASSERT_U64_EQ(cw_tracker_reserved_piece_count(t, 7), 1);
    ASSERT_TRUE(cw_tracker_memory(t) > full);
    /* Stacks: the interner's figure grows with a new frame's text. */
    size_t sb = cw_stacks_memory(stacks);
    const char *fr[] = {"app.exe!a_function_with_a_long_name_that_takes_room_0123456789"};
    uint32_t id;
    ASSERT_OK(cw_stacks_intern_strings(stacks, fr, 1, &id));
    ASSERT_TRUE(cw_stacks_memory(stacks) >= sb + strlen(fr[0]));
    cw_tracker_destroy(t);
}

/* cw_tracker_block_at: byte ranges, not pages (a heap block is one
 * commit of its exact size); a block cut by a later commit's pieces of
 * another record ends where its own pieces stop; only a piece's start
 * names a block. */
static void test_block_at(void)
{
    cw_tracker_t *t = new_recorder();
    uint64_t sz = 0;
    ASSERT_EQ(cw_tracker_block_at(t, 7, BASE, &sz), CW_ENOENT); /* no instance */
    apply(t, START(1, 7, "app"));
    apply(t, E(2, CW_OP_COMMIT, 7, BASE + 16, 24, S1)); /* [16, 40) */
    apply(t, E(3, CW_OP_COMMIT, 7, BASE + 40, 8, S2));  /* adjacent, another record */
    ASSERT_OK(cw_tracker_block_at(t, 7, BASE + 16, &sz));
    ASSERT_U64_EQ(sz, 24);
    ASSERT_OK(cw_tracker_block_at(t, 7, BASE + 40, &sz));
    ASSERT_U64_EQ(sz, 8);
    ASSERT_EQ(cw_tracker_block_at(t, 7, BASE + 17, &sz), CW_ENOENT); /* inside a block */
    ASSERT_EQ(cw_tracker_block_at(t, 7, BASE + 48, &sz), CW_ENOENT); /* past them */
    ASSERT_U64_EQ(cw_tracker_find(t, 7)->outstanding, 32);
    /* A commit over [0, 100) fills the gaps around them with one record:
     * its block at 0 is [0, 16), the next piece being another record's. */
    apply(t, E(4, CW_OP_COMMIT, 7, BASE, 100, S3));
    ASSERT_OK(cw_tracker_block_at(t, 7, BASE, &sz));
    ASSERT_U64_EQ(sz, 16);
    /* Releasing [16, 40) exactly leaves the byte counts exact. */
    ncalls = 0;
    apply(t, E(5, CW_OP_RELEASE, 7, BASE + 16, 24, 0));
    ASSERT_EQ(count_calls('r'), 1);
    ASSERT_U64_EQ(cw_tracker_find(t, 7)->outstanding, 76);
    ASSERT_EQ(cw_tracker_block_at(t, 7, BASE + 16, &sz), CW_ENOENT);
    cw_tracker_destroy(t);
}

/* cw_tracker_release_block: what cw_tracker_block_at and a release of
 * its size do, in one lookup: the same block, the same release calls,
 * the same outstanding; nothing changed where no block starts. */
static void test_release_block(void)
{
    cw_tracker_t *t = new_recorder();
    uint64_t sz = 0;
    cw_event_t rel = E(5, CW_OP_RELEASE, 7, BASE + 16, 0, 0);
    ASSERT_EQ(cw_tracker_release_block(t, &rel, &sz), CW_ENOENT); /* no instance */
    apply(t, START(1, 7, "app"));
    apply(t, E(2, CW_OP_COMMIT, 7, BASE + 16, 24, S1)); /* [16, 40) */
    apply(t, E(3, CW_OP_COMMIT, 7, BASE + 40, 8, S2));  /* adjacent, another record */
    apply(t, E(4, CW_OP_COMMIT, 7, BASE, 100, S3));     /* [0, 16) and [48, 100) */
    ncalls = 0;
    rel.addr = BASE + 17; /* inside a block */
    ASSERT_EQ(cw_tracker_release_block(t, &rel, &sz), CW_ENOENT);
    ASSERT_EQ(ncalls, 0);
    ASSERT_U64_EQ(cw_tracker_find(t, 7)->outstanding, 100);
    rel.addr = BASE + 16;
    ASSERT_OK(cw_tracker_release_block(t, &rel, &sz));
    ASSERT_U64_EQ(sz, 24);
    ASSERT_EQ(count_calls('r'), 1);
    ASSERT_U64_EQ(cw_tracker_find(t, 7)->outstanding, 76);
    ASSERT_EQ(cw_tracker_block_at(t, 7, BASE + 16, &sz), CW_ENOENT);
    /* The block at 0 is [0, 16) (the piece after it, [40, 48), another
     * record's): released alone; then [40, 48) and the rest of S3's. */
    rel.addr = BASE;
    ASSERT_OK(cw_tracker_release_block(t, &rel, &sz));
    ASSERT_U64_EQ(sz, 16);
    rel.addr = BASE + 40;
    ASSERT_OK(cw_tracker_release_block(t, &rel, &sz));
    ASSERT_U64_EQ(sz, 8);
    rel.addr = BASE + 48;
    ASSERT_OK(cw_tracker_release_block(t, &rel, &sz));
    ASSERT_U64_EQ(sz, 52);
    ASSERT_EQ(count_calls('r'), 4);
    ASSERT_U64_EQ(cw_tracker_find(t, 7)->outstanding, 0);
    ASSERT_U64_EQ(cw_tracker_piece_count(t, 7), 0);
    cw_tracker_destroy(t);
}

/* cw_tracker_commit_block: a commit as cw_tracker_apply makes it, unless
 * a piece starts at its address (then nothing changes, and it says so);
 * a range that only overlaps a block commits its gaps, as a commit does. */
static void test_commit_block(void)
{
    cw_tracker_t *t = new_recorder();
    bool occupied = true;
    cw_event_t ev = E(2, CW_OP_COMMIT, 7, BASE + 16, 24, S1);
    ASSERT_OK(cw_tracker_commit_block(t, &ev, &occupied)); /* a new instance */
    ASSERT_TRUE(!occupied);
    ASSERT_U64_EQ(cw_tracker_find(t, 7)->outstanding, 24);
    ncalls = 0;
    ev = E(3, CW_OP_COMMIT, 7, BASE + 16, 8, S2); /* at the block's start */
    ASSERT_OK(cw_tracker_commit_block(t, &ev, &occupied));
    ASSERT_TRUE(occupied);
    ASSERT_EQ(ncalls, 0);
    ASSERT_U64_EQ(cw_tracker_find(t, 7)->outstanding, 24);
    ev = E(4, CW_OP_COMMIT, 7, BASE + 8, 16, S2); /* [8, 24): only [8, 16) is new */
    ASSERT_OK(cw_tracker_commit_block(t, &ev, &occupied));
    ASSERT_TRUE(!occupied);
    ASSERT_EQ(count_calls('c'), 1);
    ASSERT_U64_EQ(cw_tracker_find(t, 7)->outstanding, 32);
    uint64_t sz;
    ASSERT_OK(cw_tracker_block_at(t, 7, BASE + 8, &sz));
    ASSERT_U64_EQ(sz, 8);
    ASSERT_OK(cw_tracker_block_at(t, 7, BASE + 16, &sz));
    ASSERT_U64_EQ(sz, 24);
    ev = E(5, CW_OP_COMMIT, 7, BASE + 64, 0, S2); /* empty: nothing */
    ASSERT_OK(cw_tracker_commit_block(t, &ev, &occupied));
    ASSERT_TRUE(!occupied);
    ASSERT_U64_EQ(cw_tracker_piece_count(t, 7), 2);
    cw_tracker_destroy(t);
}

/* The held figures per (instance, stack): the window's own commits still
 * held, their records not wholly released, and the bytes' peak. */
static int count_held(void *ctx, uint32_t pid, uint32_t stack, const cw_analysis_held_t *h)
{
    ASSERT_EQ(pid, 7);
    ASSERT_EQ(stack, S1);
    ASSERT_U64_EQ(h->bytes, 1 * P);
    ++*(int *)ctx;
    return 0;
}

static void test_held(void)
{
    cw_analysis_t *a;
    ASSERT_OK(cw_analysis_create(100, 200, &a));
    cw_tracker_sink_t s = cw_analysis_sink(a);
    cw_tracker_t *t;
    ASSERT_OK(cw_tracker_create(&s, 1, &t));
    apply(t, START(10, 7, "app.exe"));
    apply(t, E(50, CW_OP_COMMIT, 7, BASE, 1 * P, S1));           /* before t0: not held */
    apply(t, E(110, CW_OP_COMMIT, 7, BASE + 8 * P, 2 * P, S1));  /* held 2 */
    apply(t, E(120, CW_OP_COMMIT, 7, BASE + 16 * P, 1 * P, S1)); /* held 3: the peak */
    apply(t, E(130, CW_OP_DECOMMIT, 7, BASE + 8 * P, 1 * P, 0)); /* half a record: 2 of 2 */
    apply(t, E(140, CW_OP_RELEASE, 7, BASE, 1 * P, 0));          /* before t0's: no change */
    apply(t, E(150, CW_OP_RELEASE, 7, BASE + 16 * P, 1 * P, 0)); /* 1 of 1 */
    apply(t, E(250, CW_OP_COMMIT, 7, BASE + 32 * P, 4 * P, S1)); /* after t1: not held */
    apply(t, E(260, CW_OP_DECOMMIT, 7, BASE + 9 * P, 1 * P, 0)); /* after t1: still held */
    cw_analysis_held_t h;
    const cw_proc_t *p = cw_tracker_find(t, 7);
    ASSERT_OK(cw_analysis_held(a, p->id, S1, &h));
    ASSERT_U64_EQ(h.bytes, 1 * P);
    ASSERT_U64_EQ(h.count, 1);
    ASSERT_U64_EQ(h.peak, 3 * P);
    ASSERT_EQ(cw_analysis_held(a, p->id, S2, &h), CW_ENOENT);
    int n = 0;
    ASSERT_OK(cw_analysis_each_held(a, count_held, &n));
    ASSERT_EQ(n, 1);
    ASSERT_TRUE(cw_analysis_memory(a) > sizeof(cw_analysis_held_t));
    cw_tracker_destroy(t);
    cw_analysis_destroy(a);
}

/* A block committed between others, in a leaf with room, and in a full
 * one: each piece where an address lookup finds it, none lost. */
static void test_commit_between(void)
{
    cw_tracker_t *t = new_recorder();
    apply(t, START(10, 7, "app.exe"));
    /* 24 blocks of a page, two pages apart: a full leaf (16) and one
     * with room (8). */
    for (int i = 0; i < 24; i++)
        apply(t, E(20 + i, CW_OP_COMMIT, 7, BASE + (uint64_t)i * 2 * P, P, S1));
    /* Into the gaps, from the top down (never after the last piece). */
    for (int i = 22; i >= 0; i--) {
        bool occupied;
        cw_event_t ev = E(100 + i, CW_OP_COMMIT, 7, BASE + (uint64_t)i * 2 * P + P, P, S2);
        ASSERT_OK(cw_tracker_commit_block(t, &ev, &occupied));
        ASSERT_TRUE(!occupied);
    }
    ASSERT_U64_EQ(cw_tracker_piece_count(t, 7), 47);
    for (int i = 0; i < 47; i++) {
        uint64_t size;
        ASSERT_OK(cw_tracker_block_at(t, 7, BASE + (uint64_t)i * P, &size));
        ASSERT_U64_EQ(size, P);
    }
    for (int i = 0; i < 47; i++) {
        uint64_t size;
        cw_event_t ev = E(300 + i, CW_OP_RELEASE, 7, BASE + (uint64_t)i * P, 0, 0);
        ASSERT_OK(cw_tracker_release_block(t, &ev, &size));
        ASSERT_U64_EQ(size, P);
    }
    ASSERT_U64_EQ(cw_tracker_piece_count(t, 7), 0);
    ASSERT_U64_EQ(cw_tracker_find(t, 7)->outstanding, 0);
    cw_tracker_destroy(t);
}

/* A deep tree's leaf hints (tracker.c): a lookup finds its piece through
 * them; a leaf emptied and freed, then taken by another process's tree,
 * is never found through a hint again. */
static void test_hints_after_free(void)
{
    cw_tracker_t *t = new_recorder();
    uint64_t size;
    bool occupied;
    /* 600 blocks of a page, two pages apart: 38 leaves, two inner levels. */
    for (int i = 0; i < 600; i++) {
        cw_event_t ev = E(20, CW_OP_COMMIT, 7, BASE + (uint64_t)i * 2 * P, P, S1);
        ASSERT_OK(cw_tracker_commit_block(t, &ev, &occupied));
        ncalls = 0;
    }
    /* Lookups in blocks 160 - 175 (a leaf of its own: 16 a leaf, from 0)
     * and in the gaps beside them: each slot's hint is that leaf. */
    for (int i = 160; i < 176; i++) {
        ASSERT_OK(cw_tracker_block_at(t, 7, BASE + (uint64_t)i * 2 * P, &size));
        ASSERT_U64_EQ(size, P);
        ASSERT_EQ(cw_tracker_block_at(t, 7, BASE + (uint64_t)i * 2 * P + P, &size), CW_ENOENT);
        ASSERT_OK(cw_tracker_block_at(t, 7, BASE + (uint64_t)i * 2 * P, &size)); /* hinted */
    }
    /* The leaf emptied: freed. */
    for (int i = 160; i < 176; i++) {
        cw_event_t ev = E(30, CW_OP_RELEASE, 7, BASE + (uint64_t)i * 2 * P, 0, 0);
        ASSERT_OK(cw_tracker_release_block(t, &ev, &size));
        ncalls = 0;
    }
    ASSERT_U64_EQ(cw_tracker_piece_count(t, 7), 584);
    /* Another process's first leaf is the freed one (the pool's last
     * freed), with a block just below an address looked up above. */
    cw_event_t ev = E(40, CW_OP_COMMIT, 8, BASE + 170 * 2 * P - P, P, S2);
    ASSERT_OK(cw_tracker_commit_block(t, &ev, &occupied));
    ncalls = 0;
    for (int i = 160; i < 176; i++) {
        ASSERT_EQ(cw_tracker_block_at(t, 7, BASE + (uint64_t)i * 2 * P, &size), CW_ENOENT);
        ASSERT_EQ(cw_tracker_block_at(t, 7, BASE + (uint64_t)i * 2 * P + P, &size), CW_ENOENT);
    }
    ASSERT_OK(cw_tracker_block_at(t, 7, BASE + 176 * 2 * P, &size));
    ASSERT_OK(cw_tracker_block_at(t, 8, BASE + 170 * 2 * P - P, &size));
    cw_tracker_destroy(t);
}

int main(void)
{
    ASSERT_OK(cw_stacks_create(&stacks));
    ASSERT_OK(cw_tagger_create_builtin(&tagger));
    const char *f1[] = {"app.exe!main", "KernelBase.dll!VirtualAlloc"};
    const char *f2[] = {"app.exe!main", "app.exe!Work", "KernelBase.dll!VirtualAlloc"};
    const char *f3[] = {"app.exe!main", "ntdll.dll!RtlAllocateHeap"};
    const char *rd[] = {"(before trace)"};
    ASSERT_OK(cw_stacks_intern_strings(stacks, f1, 2, &S1));
    ASSERT_OK(cw_stacks_intern_strings(stacks, f2, 3, &S2));
    ASSERT_OK(cw_stacks_intern_strings(stacks, f3, 2, &S3));
    ASSERT_OK(cw_stacks_intern_strings(stacks, rd, 1, &SRD));

    test_overlapping_commits();
    test_commit_over_committed();
    test_partial_decommit();
    test_decommit_uncommitted();
    test_pid_reuse();
    test_exit_with_outstanding();
    test_unannounced_pid();
    test_rundown();
    test_window_edges();
    test_huge_ranges();
    test_impacting_limits();
    test_end_all();
    test_many_pieces();
    test_memory();
    test_block_at();
    test_release_block();
    test_commit_block();
    test_held();
    test_commit_between();
    test_hints_after_free();

    cw_tagger_destroy(tagger);
    cw_stacks_destroy(stacks);
    TEST_DONE();
}
