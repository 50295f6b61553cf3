/* test_perf_core.c - the perf source's core loop without root or perf:
 * the merge of its per-CPU rings (cw_perf__merge_pass, perf.c), fed rings
 * this test fills in memory the way the kernel does: every record is
 * processed once, in time order across the rings, also when the queue's
 * cap leaves records in a ring; the time reported as processed is never
 * past a record still to come (ticks and exec snapshots wait for it). And
 * the sweep of the process and thread tables (cw_perf__sweep, procs.c):
 * entries of tasks that are gone without an exit record are forgotten.
 * And an exec snapshot that shows a later image waits for its time, a
 * fork before it notwithstanding (procs.c, pend_apply).
 * And the smaps reader (smaps.c) against the test's own mappings. */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include "commitwatch/platform.h"
#include "sources/perf/perf_types.h"
#include "test.h"

#if defined(__linux__)

#ifdef CW_PERF__ASAN
#include <sanitizer/asan_interface.h>
#endif

#define MS 1000000LL
#define REC_SIZE 56 /* header, exit body (pid, ppid, tid, ptid, time), sample_id */
#define MAXREC 4096

static int64_t seen_ts[MAXREC];
static uint32_t seen_tid[MAXREC];
static int nseen;
static int64_t upto_now = INT64_MIN; /* the last pass's upto */
static int early;                    /* records processed after a later upto */

static int on_rec(cw_perf__t *s, const cw_perf__rec_t *r)
{
    (void)s;
    uint32_t tid;
    memcpy(&tid, (const uint8_t *)&r->h + sizeof r->h + 8, 4);
    if (nseen < MAXREC) {
        seen_ts[nseen] = r->ts;
        seen_tid[nseen] = tid;
    }
    nseen++;
    if (r->ts < upto_now) early++; /* a pass said it was done with this time */
    return 0;
}

static void ring_init(cw_perf__ring_t *r, size_t data_size)
{
    long page = sysconf(_SC_PAGESIZE);
    memset(r, 0, sizeof *r);
    r->data_size = data_size;
    r->base = aligned_alloc((size_t)page, (size_t)page + data_size);
    ASSERT_TRUE(r->base != NULL);
    memset(r->base, 0, (size_t)page + data_size);
}

/* Appends an exit record of tid at ts, as the kernel writes one. */
static void ring_put(cw_perf__ring_t *r, uint32_t tid, int64_t ts)
{
    struct perf_event_mmap_page *mp = r->base;
    uint8_t rec[REC_SIZE] = {0};
    struct perf_event_header h = {PERF_RECORD_EXIT, 0, REC_SIZE};
    uint32_t ids[4] = {tid, 1, tid, 1};
    memcpy(rec, &h, sizeof h);
    memcpy(rec + 8, ids, sizeof ids);
    memcpy(rec + 24, &ts, 8);
    memcpy(rec + 32, ids, 8); /* sample_id: pid, tid, time, id */
    memcpy(rec + 40, &ts, 8);
    uint8_t *data = (uint8_t *)r->base + sysconf(_SC_PAGESIZE);
    uint64_t head = mp->data_head;
    ASSERT_TRUE(head + REC_SIZE - mp->data_tail <= r->data_size);
    for (size_t i = 0; i < REC_SIZE; i++)
        data[(head + i) & (r->data_size - 1)] = rec[i];
    __atomic_store_n(&mp->data_head, head + REC_SIZE, __ATOMIC_RELEASE);
}

/* Two rings of size bytes, n records each, alternating: ring 0's at
 * 0, 2 step, 4 step, ..., ring 1's at step, 3 step, ... */
static void two_rings(cw_perf__ring_t *rings, size_t size, int n, int64_t step)
{
    ring_init(&rings[0], size);
    ring_init(&rings[1], size);
    for (int i = 0; i < n; i++) {
        ring_put(&rings[0], 1000 + (uint32_t)i, 2 * i * step);
        ring_put(&rings[1], 5000 + (uint32_t)i, (2 * i + 1) * step);
    }
}

static void src_init(cw_perf__t *s, cw_perf__ring_t *rings, size_t nrings, size_t qmax)
{
    memset(s, 0, sizeof *s);
    s->ev.rings = rings;
    s->ev.nrings = nrings;
    s->qmax = qmax;
    s->scratch = malloc(REC_MAX);
    s->self = UINT32_MAX;
    s->process = on_rec;
    ASSERT_TRUE(s->scratch != NULL);
    nseen = 0;
    early = 0;
    upto_now = INT64_MIN;
}

static void src_free(cw_perf__t *s)
{
    for (size_t i = 0; i < s->qn; i++)
        cw_perf__recpool_free(&s->pool, s->q[i]);
    free(s->q);
    cw_perf__recpool_destroy(&s->pool);
    ASSERT_EQ(s->pool.mapped, 0);
    free(s->scratch);
    for (size_t i = 0; i < s->ev.nrings; i++)
        free(s->ev.rings[i].base);
}

static void check_in_order(int n)
{
    ASSERT_EQ(nseen, n);
    for (int i = 1; i < nseen && i < MAXREC; i++)
        if (seen_ts[i] < seen_ts[i - 1])
            CW_FAIL("record %d (tid %u, %lld ms) processed after one at %lld ms", i, seen_tid[i],
                    (long long)(seen_ts[i] / MS), (long long)(seen_ts[i - 1] / MS));
    ASSERT_EQ(early, 0);
}

static int64_t pass(cw_perf__t *s, int64_t horizon)
{
    int64_t upto = INT64_MIN;
    ASSERT_OK(cw_perf__merge_pass(s, horizon, &upto));
    ASSERT_TRUE(upto <= horizon);
    if (upto > upto_now) upto_now = upto;
    return upto;
}

/* Two CPUs, their records interleaved in time (a fork on one, the child's
 * exit on the other): the queue holds 30 records, ring 0 is drained first
 * and fills it. Ring 1's older records must come first all the same. */
static void test_cut_at_cap(void)
{
    cw_perf__ring_t rings[2];
    cw_perf__t s;
    two_rings(rings, 64 * 1024, 400, MS); /* even ms, odd ms */
    size_t one = sizeof(cw_perf__rec_t) - sizeof(struct perf_event_header) + REC_SIZE;
    src_init(&s, rings, 2, 30 * one);
    int64_t upto = pass(&s, 10000 * MS);
    /* Nothing was processed past what ring 1 still held. */
    ASSERT_TRUE(nseen > 0);
    ASSERT_TRUE(s.n_cut > 0);
    /* The queue was filled with the oldest records of both rings: all but
     * the last SLACK_NS of them went at once. */
    ASSERT_TRUE(nseen >= 25);
    for (int k = 0; k < 200 && (s.qn || rings[0].cut || rings[1].cut); k++)
        upto = pass(&s, 10000 * MS);
    (void)upto;
    check_in_order(800);
    ASSERT_EQ(s.qn, 0);
    ASSERT_EQ(s.qbytes, 0);
    src_free(&s);
}

/* Records keep arriving between passes (the kernel writes while the core
 * thread processes), the horizon moves with the clock, the cap is small:
 * every record once, in order, and no pass claims a time a later record
 * is older than. */
static void test_live(void)
{
    enum { NR = 3 };
    cw_perf__ring_t rings[NR];
    cw_perf__t s;
    for (int r = 0; r < NR; r++)
        ring_init(&rings[r], 256 * 1024);
    size_t one = sizeof(cw_perf__rec_t) - sizeof(struct perf_event_header) + REC_SIZE;
    src_init(&s, rings, NR, 50 * one);
    uint32_t seed = 12345;
    int64_t clock = 0, last[NR] = {0};
    int total = 0;
    for (int step = 0; step < 300; step++) {
        /* 0 - 39 records per ring, each ring's in time order, up to now. */
        clock += 1 * MS;
        for (int r = 0; r < NR; r++) {
            seed = seed * 1103515245u + 12345u;
            int n = (int)((seed >> 16) % 40);
            for (int k = 0; k < n; k++) {
                seed = seed * 1103515245u + 12345u;
                /* Written within the last millisecond (the kernel writes
                 * a record microseconds after its time). */
                int64_t ts = last[r] > clock - MS ? last[r] : clock - MS;
                ts += (int64_t)((seed >> 16) % 50000);
                if (ts > clock) ts = clock;
                last[r] = ts;
                /* tid (and pid) 0 is a task of another PID namespace,
                 * which the source drops (test_drops_counted): never 0 */
                ring_put(&rings[r], (uint32_t)(r * 100000 + total + 1), ts);
                total++;
            }
        }
        pass(&s, clock - SLACK_NS);
    }
    for (int k = 0; k < 1000 && (s.qn || rings[0].cut || rings[1].cut || rings[2].cut); k++)
        pass(&s, INT64_MAX);
    check_in_order(total);
    src_free(&s);
}

/* Two CPUs whose records alternate every 10 us, 4,000 in all, a queue of
 * 4 records: every record is within SLACK_NS of the other ring's first, so
 * only the merge past the cap moves anything. One pass must get through
 * the lot (the merge goes a window of time at a time); merging one ring up
 * to the other's first record moved one record per round, 64 a pass, and
 * on a real machine the rings overflowed. */
static void test_alternating(void)
{
    cw_perf__ring_t rings[2];
    cw_perf__t s;
    two_rings(rings, 256 * 1024, 2000, 10000);
    size_t one = sizeof(cw_perf__rec_t) - sizeof(struct perf_event_header) + REC_SIZE;
    src_init(&s, rings, 2, 4 * one);
    pass(&s, 1000 * MS);
    if (nseen < 4000) CW_FAIL("one pass processed %d of 4000 records", nseen);
    ASSERT_TRUE(s.n_forced > 0);
    check_in_order(4000);
    ASSERT_EQ(s.qn, 0);
    src_free(&s);
}

/* Under the cap nothing changes: records older than the horizon go, the
 * others wait for the next pass. */
static void test_horizon(void)
{
    cw_perf__ring_t rings[2];
    cw_perf__t s;
    two_rings(rings, 64 * 1024, 10, 5 * MS);
    src_init(&s, rings, 2, 1 << 20);
    ASSERT_EQ(pass(&s, 50 * MS), 50 * MS);
    ASSERT_EQ(nseen, 10); /* 0, 5, ..., 45 */
    ASSERT_EQ(s.n_cut, 0);
    ASSERT_EQ(pass(&s, 1000 * MS), 1000 * MS);
    check_in_order(20);
    src_free(&s);
}

/* ---- losses the source sees itself ----------------------------------------- */

/* No record is dropped uncounted (docs/LINUX.md, "Losses and drift"): a
 * task of another PID namespace (pid 0) is dropped as it leaves its ring,
 * counted as foreign; a record too short to read is skipped, counted. */
static void test_drops_counted(void)
{
    cw_perf__ring_t rings[1];
    cw_perf__t s;
    ring_init(&rings[0], 64 * 1024);
    ring_put(&rings[0], 7, 1 * MS);
    ring_put(&rings[0], 0, 2 * MS); /* another PID namespace's */
    ring_put(&rings[0], 8, 3 * MS);
    /* A record of 16 bytes: shorter than a sample_id trailer. */
    struct perf_event_mmap_page *mp = rings[0].base;
    uint8_t *data = (uint8_t *)rings[0].base + sysconf(_SC_PAGESIZE);
    struct perf_event_header h = {PERF_RECORD_EXIT, 0, 16};
    memset(data + mp->data_head, 0, 16);
    memcpy(data + mp->data_head, &h, sizeof h);
    mp->data_head += 16;
    ring_put(&rings[0], 9, 4 * MS);
    src_init(&s, rings, 1, 1 << 20);
    pass(&s, 1000 * MS);
    check_in_order(3);
    ASSERT_EQ(s.n_foreign, 1);
    ASSERT_EQ(rings[0].malformed, 1);
    src_free(&s);
}

/* A syscall record: a PERF_RECORD_SAMPLE of tracepoint `type` by pid (and
 * tid pid) at ts, whose raw data holds args (enter) or the result (exit,
 * args[0]). Freed by the caller. */
static cw_perf__rec_t *sc_rec(uint16_t type, uint32_t pid, int64_t ts, const uint64_t args[6])
{
    enum { RAW = 4 + 16 + 48 };
    size_t body = 24 + RAW + 4; /* ip, pid/tid, time; raw_size, raw; 8-byte multiple */
    cw_perf__rec_t *r = calloc(1, sizeof *r + body);
    ASSERT_TRUE(r != NULL);
    r->ts = ts;
    r->h = (struct perf_event_header){PERF_RECORD_SAMPLE, 0, (uint16_t)(sizeof r->h + body)};
    uint8_t *b = (uint8_t *)(&r->h + 1);
    uint32_t ids[2] = {pid, pid}, raw_size = RAW;
    memcpy(b + 8, ids, 8);
    memcpy(b + 16, &ts, 8);
    memcpy(b + 24, &raw_size, 4);
    memcpy(b + 28, &type, 2);
    memcpy(b + 28 + 16, args, 48);
    return r;
}

/* A source with one syscall traced, sc, its tracepoints' ids enter and
 * enter + 1 (the records sc_rec makes), and no newtask tracepoint. */
static void sc_src_init(cw_perf__t *s, int sc, uint16_t enter)
{
    memset(s, 0, sizeof *s);
    for (int i = 0; i < CW__SC_N; i++)
        s->ev.sc_enter_id[i] = s->ev.sc_exit_id[i] = -1;
    s->ev.sc_enter_id[sc] = enter;
    s->ev.sc_exit_id[sc] = enter + 1;
    s->ev.newtask_id = -1;
}

/* Frees the thread table's entries and both tables. */
static void sc_src_free(cw_perf__t *s)
{
    for (size_t i = 0; i < s->thrs.cap; i++)
        if (s->thrs.vals[i]) {
            cw_perf__thr_t *t = s->thrs.vals[i];
            free(t->stk);
            free(t);
        }
    cw_perf__pmap_free(&s->thrs);
    cw_perf__pmap_free(&s->procs);
}

/* A call whose other half was lost: an exit with no enter before it, an
 * enter replaced by the thread's next one. Each is counted as unpaired
 * (the resync is the LOST record's, in the ring that lost the half). */
static void test_unpaired(void)
{
    cw_perf__t s;
    sc_src_init(&s, CW__SC_MUNMAP, 40);
    uint64_t args[6] = {0x10000, 4096, 0, 0, 0, 0}, err[6] = {(uint64_t)-22, 0, 0, 0, 0, 0};
    cw_perf__rec_t *recs[4] = {sc_rec(41, 77, 1 * MS, err),  /* exit, enter never seen */
                               sc_rec(40, 77, 2 * MS, args), /* enter */
                               sc_rec(40, 77, 3 * MS, args), /* enter: the last one's exit lost */
                               sc_rec(41, 77, 4 * MS, err)}; /* exit of the second: paired */
    ASSERT_OK(cw_perf__process_rec(&s, recs[0]));
    ASSERT_EQ(s.n_unpaired, 1);
    ASSERT_OK(cw_perf__process_rec(&s, recs[1]));
    ASSERT_EQ(s.n_unpaired, 1);
    ASSERT_OK(cw_perf__process_rec(&s, recs[2]));
    ASSERT_EQ(s.n_unpaired, 2);
    ASSERT_OK(cw_perf__process_rec(&s, recs[3]));
    ASSERT_EQ(s.n_unpaired, 2);
    ASSERT_EQ(s.n_exit, 1);
    for (int i = 0; i < 4; i++)
        free(recs[i]);
    sc_src_free(&s);
}

/* ---- the sweep ------------------------------------------------------------ */

static int nexits;
static uint32_t exit_pid;

static int sink_emit(void *ctx, const cw_event_t *ev)
{
    (void)ctx;
    if (ev->op == CW_OP_PROCESS_EXIT) {
        nexits++;
        exit_pid = ev->pid;
    }
    return 0;
}

/* A pid that existed and is gone (a child reaped). */
static uint32_t gone_pid(void)
{
    pid_t c = fork();
    ASSERT_TRUE(c >= 0);
    if (c == 0) _exit(0);
    ASSERT_EQ(waitpid(c, NULL, 0), c);
    return (uint32_t)c;
}

static void add_proc(cw_perf__t *s, uint32_t pid, uint32_t alias)
{
    cw_perf__proc_t *p = calloc(1, sizeof *p);
    ASSERT_TRUE(p != NULL);
    p->pid = pid;
    p->alias = alias;
    p->started = true;
    cw_perf__shadow_init(&p->sh, pid);
    p->as = cw_perf__aspace_new(pid);
    ASSERT_TRUE(p->as != NULL);
    ASSERT_OK(cw_perf__pmap_put(&s->procs, pid, p));
}

static void add_thr(cw_perf__t *s, uint32_t tid)
{
    cw_perf__thr_t *t = calloc(1, sizeof *t);
    ASSERT_TRUE(t != NULL);
    t->tid = tid;
    t->sc = 1;
    t->stk = malloc(64);
    t->stk_len = 64;
    ASSERT_OK(cw_perf__pmap_put(&s->thrs, tid, t));
}

/* ---- an exec snapshot and a fork before its time ----------------------------- */

static int ncommits, nstarts, nends;
static uint64_t commit_bytes, commit_max;

static int sink_commits(void *ctx, const cw_event_t *ev)
{
    (void)ctx;
    if (ev->op == CW_OP_COMMIT) {
        ncommits++;
        commit_bytes += ev->size;
        if (ev->size > commit_max) commit_max = ev->size;
    } else if (ev->op == CW_OP_PROCESS_START) {
        nstarts++;
    } else if (ev->op == CW_OP_PROCESS_EXIT) {
        nends++;
    }
    return 0;
}

/* A brk() pair of pid: enter at ts, exit at ts + 0.5 ms returning ret. */
static void brk_call(cw_perf__t *s, uint32_t pid, int64_t ts, uint64_t ret)
{
    uint64_t args[6] = {ret, 0, 0, 0, 0, 0};
    cw_perf__rec_t *in = sc_rec(42, pid, ts, args), *out = sc_rec(43, pid, ts + MS / 2, args);
    ASSERT_OK(cw_perf__process_rec(s, in));
    ASSERT_OK(cw_perf__process_rec(s, out));
    free(in);
    free(out);
}

/* A record of type with body (n bytes) at ts, as the merge hands it over. */
static void side_rec(cw_perf__t *s, uint32_t type, uint16_t misc, const void *body, size_t n,
                     int64_t ts)
{
    size_t size = sizeof(struct perf_event_header) + n + 24; /* + sample_id */
    cw_perf__rec_t *r = calloc(1, sizeof *r + n + 24);
    ASSERT_TRUE(r != NULL);
    r->ts = ts;
    r->h = (struct perf_event_header){type, misc, (uint16_t)size};
    memcpy(&r->h + 1, body, n);
    ASSERT_OK(cw_perf__process_rec(s, r));
    free(r);
}

static void free_proc(cw_perf__t *s, uint32_t pid)
{
    cw_perf__proc_t *p = cw_perf__pmap_get(&s->procs, pid);
    ASSERT_TRUE(p != NULL);
    cw_perf__shadow_free(&p->sh);
    cw_perf__snapshot_free(&p->pend);
    cw_perf__aspace_free(p->as);
    free(p);
}

/* A shell exec'd, then two more images within 30 ms: the snapshot read
 * after the first exec (at 10 ms) shows the last image (procs.c,
 * pend_apply). The first image forks at 5 ms and grows its heap at 6 ms:
 * the fork leaves the snapshot waiting (the child, gone, gets the
 * parent's shadow), the brk() moves the first image's break (applied
 * over the snapshot, it moved the last image's: 660 GB). At 10 ms the
 * snapshot is applied; a call of before it processed after it is in it
 * (marked), an exec still ends the instance (the next one holds the
 * snapshot's memory); a call after it moves the last image's break. */
static void test_exec_snapshot_waits(void)
{
    cw_perf__t s;
    sc_src_init(&s, CW__SC_BRK, 42);
    cw_source_sink_t sink = {NULL, sink_commits, NULL, NULL, NULL, NULL};
    s.sink = &sink;
    cw_perf__procs_env(&s, false);
    /* Above pid_max (2^22): no /proc entry, as a child already gone. */
    const uint32_t pid = 99999901, child = 99999902;
    const uint64_t old_heap = 0x55f4b83dc000, new_heap = 0x555b2c2f8000;
    add_proc(&s, pid, 0);
    cw_perf__proc_t *p = cw_perf__pmap_get(&s.procs, pid);
    /* The first image: its break learnt, then grown by 132 KiB. */
    brk_call(&s, pid, 1 * MS, old_heap);
    brk_call(&s, pid, 2 * MS, old_heap + 0x21000);
    ASSERT_EQ(ncommits, 1);
    ASSERT_EQ(commit_bytes, 0x21000);
    /* The snapshot read at 10 ms: the last image's heap and break. */
    cw_perf__seg_t *heap = malloc(sizeof *heap);
    ASSERT_TRUE(heap != NULL);
    *heap = (cw_perf__seg_t){new_heap, new_heap + 0x21000,
                             CW__SEG_ACCT | CW__SEG_WRITE | CW__SEG_ANON | CW__SEG_HEAP, 0};
    p->pend = (cw_perf__snapshot_t){.seg = heap, .n = 1, .cap = 1, .brk = new_heap + 0x21000};
    p->has_pend = true;
    p->pend_at = 10 * MS;
    s.pend = malloc(sizeof *s.pend);
    ASSERT_TRUE(s.pend != NULL);
    s.pend[0] = pid;
    s.npend = s.pend_cap = 1;
    s.pend_min = 10 * MS;
    /* The fork at 5 ms: the snapshot waits; the child has the first
     * image's heap. */
    uint32_t fork_body[6] = {child, pid, child, pid, 0, 0};
    side_rec(&s, PERF_RECORD_FORK, 0, fork_body, sizeof fork_body, 5 * MS);
    ASSERT_TRUE(p->has_pend);
    ASSERT_EQ(nstarts, 1);
    ASSERT_EQ(s.n_fork_unread, 1);
    ASSERT_EQ(ncommits, 2);
    ASSERT_EQ(commit_bytes, 2 * 0x21000);
    /* The first image's brk() at 6 ms: 132 KiB more of its heap. */
    brk_call(&s, pid, 6 * MS, old_heap + 0x42000);
    ASSERT_EQ(s.n_marked, 0);
    ASSERT_EQ(ncommits, 3);
    ASSERT_EQ(commit_bytes, 3 * 0x21000);
    /* 10 ms: the last image's heap (exec image), the first's decommitted. */
    ASSERT_OK(cw_perf__pend_due(&s, 11 * MS));
    ASSERT_TRUE(!p->has_pend);
    ASSERT_EQ(ncommits, 4);
    ASSERT_EQ(commit_bytes, 4 * 0x21000);
    /* A call of 9 ms processed now: in the snapshot. */
    brk_call(&s, pid, 9 * MS, old_heap + 0x63000);
    ASSERT_EQ(s.n_marked, 1);
    ASSERT_EQ(ncommits, 4);
    /* An exec of 9.5 ms processed now: the instance (begun at 0) ends,
     * the next one holds the snapshot's heap. */
    uint8_t comm_body[24] = {0};
    memcpy(comm_body, &pid, 4);
    memcpy(comm_body + 4, &pid, 4);
    memcpy(comm_body + 8, "pyenv-exec", 10);
    side_rec(&s, PERF_RECORD_COMM, PERF_RECORD_MISC_COMM_EXEC, comm_body, sizeof comm_body,
             9 * MS + MS / 2);
    ASSERT_EQ(nstarts, 2);
    ASSERT_EQ(nends, 1);
    ASSERT_EQ(strcmp(p->name, "pyenv-exec"), 0);
    ASSERT_EQ(ncommits, 5);
    ASSERT_EQ(commit_bytes, 5 * 0x21000);
    /* The last image's brk() at 12 ms: 4 KiB more of its heap. */
    brk_call(&s, pid, 12 * MS, new_heap + 0x22000);
    ASSERT_EQ(ncommits, 6);
    ASSERT_EQ(commit_bytes, 5 * 0x21000 + 0x1000);
    ASSERT_EQ(commit_max, 0x21000);
    free_proc(&s, pid);
    free_proc(&s, child);
    sc_src_free(&s);
    cw_perf__pmap_free(&s.newtask);
    free(s.pend);
}

/* A process and a CLONE_VM child whose exits were lost, threads likewise,
 * next to this process (alive): the first sweep only notes them, the
 * second forgets them, ending each process's instance once. */
static void test_sweep(void)
{
    cw_perf__t s;
    memset(&s, 0, sizeof s);
    cw_source_sink_t sink = {NULL, sink_emit, NULL, NULL, NULL, NULL};
    s.sink = &sink;
    uint32_t self = (uint32_t)getpid(), dead = gone_pid(), dead_child = gone_pid();
    uint32_t dead_thr = gone_pid();
    add_proc(&s, self, 0);
    add_proc(&s, dead, 0);
    add_proc(&s, dead_child, dead); /* an alias: the resync never reads it */
    add_thr(&s, self);
    add_thr(&s, dead_thr);
    size_t ended = 9, freed = 9;
    ASSERT_OK(cw_perf__sweep(&s, 1000, &ended, &freed));
    ASSERT_EQ(ended, 0);
    ASSERT_EQ(freed, 0);
    ASSERT_EQ(s.procs.n, 3);
    ASSERT_EQ(s.thrs.n, 2);
    cw_perf__proc_t *p = cw_perf__pmap_get(&s.procs, dead_child);
    ASSERT_TRUE(p != NULL && p->gone);
    ASSERT_OK(cw_perf__sweep(&s, 2000, &ended, &freed));
    ASSERT_EQ(ended, 2);
    ASSERT_EQ(freed, 1);
    ASSERT_EQ(nexits, 2);
    ASSERT_EQ(s.procs.n, 1);
    ASSERT_EQ(s.thrs.n, 1);
    ASSERT_TRUE(cw_perf__pmap_get(&s.procs, self) != NULL);
    ASSERT_TRUE(cw_perf__pmap_get(&s.thrs, self) != NULL);
    ASSERT_OK(cw_perf__sweep(&s, 3000, &ended, &freed));
    ASSERT_EQ(ended, 0);
    ASSERT_EQ(nexits, 2);
    cw_perf__proc_t *me = cw_perf__pmap_get(&s.procs, self);
    ASSERT_TRUE(me != NULL && !me->gone);
    cw_perf__shadow_free(&me->sh);
    cw_perf__aspace_free(me->as);
    free(me);
    cw_perf__thr_t *t = cw_perf__pmap_get(&s.thrs, self);
    free(t->stk);
    free(t);
    cw_perf__pmap_free(&s.procs);
    cw_perf__pmap_free(&s.thrs);
}

/* The queue's records (recpool.c): cut from chunks mapped apart, each
 * chunk given back once its records are freed, one empty chunk kept. */
static size_t rec_size(uint32_t *rng)
{
    *rng = *rng * 1103515245u + 12345u;
    uint32_t r = *rng >> 8;
    /* Mostly a sample with its stack (100 B - 8 KiB); now and then one of
     * REC_MAX, the largest a record can be. */
    return r % 97 == 0 ? sizeof(cw_perf__rec_t) + REC_MAX : 100 + r % 8192;
}

static void test_recpool(void)
{
    cw_perf__recpool_t p = {0};
    enum { WINDOW = 600, N = 200000 };
    cw_perf__rec_t *live[WINDOW] = {0};
    uint32_t rng = 1;
    size_t peak_bytes = 0, held = 0, sizes[WINDOW] = {0};
    cw_perf__rec_t *pinned = cw_perf__recpool_alloc(&p, 64);
    ASSERT_TRUE(pinned != NULL);
    pinned->ts = 42;
    /* A queue that holds the last WINDOW records, freed in the order they
     * came (as the merge frees them), with one record held throughout (a
     * ring cut at the cap). */
    for (int i = 0; i < N; i++) {
        int k = i % WINDOW;
        if (live[k]) {
            ASSERT_EQ(live[k]->seq, (uint64_t)(i - WINDOW));
            cw_perf__recpool_free(&p, live[k]);
            held -= sizes[k];
        }
        sizes[k] = rec_size(&rng);
        live[k] = cw_perf__recpool_alloc(&p, sizes[k]);
        ASSERT_TRUE(live[k] != NULL);
        ASSERT_EQ((uintptr_t)live[k] % 16, 0);
        memset(live[k], 0xab, sizes[k]); /* the whole size is usable */
        live[k]->seq = (uint64_t)i;
        held += sizes[k];
        if (held > peak_bytes) peak_bytes = held;
    }
    /* Mapped at most: what the window held at its peak, the chunk with the
     * pinned record, the one being filled, the spare, and the room a chunk
     * wastes at its end (at most a largest record). */
    size_t chunk = CW_PERF__CHUNK_BYTES, room = chunk - sizeof(cw_perf__rec_t) - REC_MAX - 64;
    size_t bound = (peak_bytes + room - 1) / room + 3;
    printf("recpool: window peak %zu bytes, chunks mapped at most %zu (bound %zu)\n", peak_bytes,
           p.peak, bound);
    ASSERT_TRUE(p.peak <= bound);
    for (int k = 0; k < WINDOW; k++)
        cw_perf__recpool_free(&p, live[k]);
    /* The queue is empty but for the pinned record: its chunk, the current
     * one and the spare are left; every other chunk was given back. */
    ASSERT_TRUE(p.mapped <= 3);
    ASSERT_EQ(pinned->ts, 42);
    cw_perf__recpool_free(&p, pinned);
    ASSERT_TRUE(p.mapped <= 2);
#ifdef CW_PERF__ASAN
    /* Under ASan the bytes past a record and a freed record are poisoned,
     * as they were when records came from malloc. */
    cw_perf__rec_t *x = cw_perf__recpool_alloc(&p, 40), *y = cw_perf__recpool_alloc(&p, 40);
    ASSERT_TRUE(!__asan_address_is_poisoned((char *)x + 39));
    ASSERT_TRUE(__asan_address_is_poisoned((char *)x + 40));
    cw_perf__recpool_free(&p, x);
    ASSERT_TRUE(__asan_address_is_poisoned((char *)x));
    ASSERT_TRUE(!__asan_address_is_poisoned((char *)y));
    cw_perf__recpool_free(&p, y);
    printf("recpool: poisoning checked (ASan)\n");
#endif
    /* An empty current chunk is cut again from its start. */
    cw_perf__rec_t *a = cw_perf__recpool_alloc(&p, 100);
    cw_perf__recpool_free(&p, a);
    cw_perf__rec_t *b = cw_perf__recpool_alloc(&p, 100);
    ASSERT_TRUE(a == b);
    cw_perf__recpool_free(&p, b);
    cw_perf__recpool_free(&p, NULL);
    /* Larger than a chunk can hold: refused, nothing mapped for it. */
    size_t before = p.mapped;
    ASSERT_TRUE(cw_perf__recpool_alloc(&p, CW_PERF__CHUNK_BYTES) == NULL);
    ASSERT_EQ(p.mapped, before);
    cw_perf__recpool_destroy(&p);
    ASSERT_EQ(p.mapped, 0);
}

/* Is [a, a + n) of this process charged, after a call made now (so read
 * afresh)? */
static int acct_now(cw_perf__acct_cache_t *c, uint64_t a, uint64_t n)
{
    return cw_perf__smaps_query_acct(c, (uint32_t)getpid(), cw_plat_mono_ns(), a, n);
}

/* The smaps reader against this process (smaps.c): the whole snapshot
 * and the query of one range's charge (read up to that range only), on
 * mappings the kernel charges or not. mprotect removing write keeps the
 * charge of an anonymous VMA that was faulted in, drops it from one that
 * never was (mm/mprotect.c), and the query says which. */
static void test_smaps_self(void)
{
    uint32_t me = (uint32_t)getpid();
    cw_perf__acct_cache_t ac = {0};
    long pg = sysconf(_SC_PAGESIZE);
    size_t len = 8 * (size_t)pg;
    /* Each in the middle of a PROT_NONE reservation of its own, so the
     * kernel merges none of them with a neighbour (a's anon_vma would be
     * b's too). */
    char *res = mmap(NULL, 7 * len, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    ASSERT_TRUE(res != MAP_FAILED);
    int fixed = MAP_FIXED | MAP_ANONYMOUS;
    char *a = mmap(res + len, len, PROT_READ | PROT_WRITE, fixed | MAP_PRIVATE, -1, 0);
    char *b = mmap(res + 3 * len, len, PROT_READ | PROT_WRITE, fixed | MAP_PRIVATE, -1, 0);
    char *c = mmap(res + 5 * len, len, PROT_READ | PROT_WRITE, fixed | MAP_SHARED, -1, 0);
    ASSERT_TRUE(a != MAP_FAILED && b != MAP_FAILED && c != MAP_FAILED);
    a[0] = 1; /* faulted in: an anon_vma */
    uint64_t ua = (uint64_t)(uintptr_t)a, ub = (uint64_t)(uintptr_t)b, uc = (uint64_t)(uintptr_t)c;
    ASSERT_EQ(acct_now(&ac, ua, len), 1);
    ASSERT_EQ(acct_now(&ac, ub, len), 1);
    ASSERT_EQ(acct_now(&ac, uc, len), 0); /* shared: not charged here */
    ASSERT_OK(mprotect(a, len, PROT_READ));
    ASSERT_OK(mprotect(b, len, PROT_READ));
    ASSERT_EQ(acct_now(&ac, ua, len), 1); /* kept */
    ASSERT_EQ(acct_now(&ac, ub, len), 0); /* dropped */
    /* The full snapshot agrees, and lists the break and this test's own
     * executable mapping. */
    cw_perf__snapshot_t snap = {0};
    ASSERT_OK(cw_perf__smaps_read(me, &snap));
    int seen = 0;
    for (size_t i = 0; i < snap.n; i++) {
        const cw_perf__seg_t *g = &snap.seg[i];
        if (g->start <= ua && ua + len <= g->end) {
            seen |= 1;
            ASSERT_TRUE(g->flags & CW__SEG_ACCT);
        }
        if (g->start <= ub && ub + len <= g->end) {
            seen |= 2;
            ASSERT_TRUE(!(g->flags & CW__SEG_ACCT));
        }
        if (g->start <= uc && uc + len <= g->end) {
            seen |= 4;
            ASSERT_TRUE(g->flags & CW__SEG_SHARED);
        }
    }
    ASSERT_EQ(seen, 7);
    ASSERT_TRUE(snap.nx > 0 && snap.brk > 0);
    uint64_t here = (uint64_t)(uintptr_t)&test_smaps_self;
    bool found = false;
    for (size_t i = 0; i < snap.nx; i++)
        found |= snap.x[i].start <= here && here < snap.x[i].end && snap.x[i].path[0] == '/';
    ASSERT_TRUE(found);
    cw_perf__snapshot_free(&snap);
    /* With reads kept: a query about a call made before the last read is
     * answered from it; one about a later call reads again. */
    cw_perf__acct_cache_free(&ac);
    ac = (cw_perf__acct_cache_t){0};
    int64_t t = cw_plat_mono_ns();
    ASSERT_EQ(cw_perf__smaps_query_acct(&ac, me, t, ua, len), 1);
    ASSERT_EQ(ac.reads, 1);
    ASSERT_EQ(cw_perf__smaps_query_acct(&ac, me, t, ua, len), 1);
    ASSERT_EQ(cw_perf__smaps_query_acct(&ac, me, t, ub, len), 0); /* below ua: read already */
    ASSERT_EQ(ac.reads, ub < ua ? 1 : 2);
    uint64_t reads = ac.reads;
    ASSERT_OK(mprotect(b, len, PROT_READ | PROT_WRITE)); /* charged again */
    int64_t t2 = cw_plat_mono_ns();
    ASSERT_EQ(cw_perf__smaps_query_acct(&ac, me, t2, ub, len), 1);
    ASSERT_EQ(ac.reads, reads + 1);
    ASSERT_EQ(cw_perf__smaps_query_acct(&ac, me, t2, ub, len), 1);
    ASSERT_EQ(ac.reads, reads + 1);
    ASSERT_EQ(ac.queries, 5);
    cw_perf__acct_cache_free(&ac);
    /* Nothing mapped there: cannot tell. */
    ASSERT_EQ(acct_now(&ac, 4096, 4096), -1);
    munmap(res, 7 * len);
}

int main(void)
{
    test_smaps_self();
    test_recpool();
    test_horizon();
    test_cut_at_cap();
    test_alternating();
    test_live();
    test_drops_counted();
    test_unpaired();
    test_exec_snapshot_waits();
    test_sweep();
    TEST_DONE();
}

#else
/* tests/CMakeLists.txt builds this test on Linux only; built anywhere else
 * it must not pass with no checks. */
int main(void)
{
    fprintf(stderr, "test_perf_core: FAIL: the perf source is Linux-only; no check ran\n");
    return 1;
}
#endif
