/* perf.c - the Linux live source (`--source perf`): reads the per-CPU perf
 * rings, merges their records in timestamp order, hands each to the
 * process table (procs.c), which keeps each process's VMA shadow
 * (shadow.c) and delivers the resulting events to the sink in ts order;
 * the rundown, resynchronisation after losses, the source ops.
 *
 * DESIGN (threads and ordering). Everything runs on the thread that calls
 * run(); stop() only sets a flag and writes a byte to a pipe (async-signal-
 * safe). Each pass: note the monotonic time T, copy every ring's records
 * out, then process, sorted by (ts, arrival), those older than T - 2 ms;
 * a record is written within microseconds of its timestamp (the kernel
 * writes it with preemption off), so nothing older can still arrive.
 * Unless the queue's cap stopped a copy: then the records left in a ring
 * may be older than what waits in the queue from other rings, and only
 * records older than each such ring's first one (less 2 ms) are processed,
 * nor does a tick pass it (cw_perf__merge_pass). Processed past it, an
 * exit came before its process's fork (an entry never removed) and a
 * process's calls out of order (drift against smaps). When the queue is
 * full of newer records, the rings behind are merged past the cap, a
 * window of time at a time (cw_perf__merge_pass).
 *
 * Snapshots and the mark. /proc/PID/smaps is read at the rundown, after an
 * exec (and for a child forked before its parent's exec snapshot was
 * applied), for a process seen for the first time, and after lost
 * records. A
 * snapshot shows the state at the time it was read, later than the
 * records being processed; so the process remembers that time (its mark)
 * and syscall exits at or before the mark are not applied again: they are
 * in the snapshot. Exits after it are (mmap, munmap, brk are idempotent
 * over a snapshot that already had them, which covers a call in flight
 * while smaps was read).
 *
 * Memory (docs/DESIGN.md, "Memory"): a process's state is dropped at its
 * exit; a thread's pending enter at the thread's exit, its stack copy at
 * the syscall's exit; records (in chunks of their own, recpool.c) are
 * freed once processed, and at most qmax
 * bytes of them wait (their stack copies cut to what the stack held; the
 * merge past the cap adds at most a window of FORCE_WINDOW_NS, and a batch
 * per ring). Processes and threads whose exit record never came (lost)
 * are forgotten by a sweep every 10 s. */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/kcmp.h>
#include <linux/perf_event.h>
#include <malloc.h>
#include <poll.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "commitwatch/log.h"
#include "commitwatch/memstat.h"
#include "commitwatch/platform.h"
#include "commitwatch/source.h"
#include "sources/perf/perf_types.h"

/* ---- rings and the merge ---------------------------------------------- */

static void ring_copy(const cw_perf__ring_t *r, uint64_t pos, void *dst, size_t len)
{
    const uint8_t *data = (const uint8_t *)r->base + sysconf(_SC_PAGESIZE);
    size_t off = (size_t)(pos & (r->data_size - 1));
    size_t first = r->data_size - off < len ? r->data_size - off : len;
    memcpy(dst, data + off, first);
    if (first < len) memcpy((uint8_t *)dst + first, data, len - first);
}

/* The pid a record is about, from its body or its sample_id trailer. */
static uint32_t rec_pid(const cw_perf__rec_t *r)
{
    const uint8_t *b = (const uint8_t *)(&r->h + 1);
    uint32_t pid;
    if (r->h.type == PERF_RECORD_SAMPLE)
        memcpy(&pid, b + 8, 4);
    else
        memcpy(&pid, (const uint8_t *)&r->h + r->h.size - 24, 4);
    return pid;
}

/* A sample of a syscall enter carries the user stack (STACK_BYTES) of
 * which only dyn_size bytes were below the stack's top: the rest is
 * dropped here, so a queued record costs what the stack holds (a few
 * hundred bytes mostly) instead of STACK_BYTES. rec is the whole record
 * (header first); returns its new size (unchanged if it has no stack). */
static size_t trim_stack(const cw_perf__t *s, uint8_t *rec, size_t size)
{
    const struct perf_event_header *h = (const void *)rec;
    uint8_t *b = rec + sizeof *h, *end = rec + size;
    uint32_t raw_size;
    uint16_t type;
    if (h->type != PERF_RECORD_SAMPLE || size < sizeof *h + 28 + 2) return size;
    memcpy(&raw_size, b + 24, 4);
    uint8_t *p = b + 28 + raw_size;
    if (raw_size < 2 || p > end) return size;
    memcpy(&type, b + 28, 2);
    bool has_stack = false;
    for (int sc = 0; sc < CW__SC_N; sc++)
        has_stack |= sc != CW__SC_MUNMAP && type == s->ev.sc_enter_id[sc];
    if (!has_stack || p + 8 > end) return size;
    uint64_t abi, ssize, dyn;
    memcpy(&abi, p, 8);
    p += 8;
    if (abi != PERF_SAMPLE_REGS_ABI_NONE) p += 8 * (size_t)__builtin_popcountll(cw_perf__unwind_regs_mask());
    if (p + 8 > end) return size;
    memcpy(&ssize, p, 8);
    /* The stack is the record's last field: anything else, keep it whole. */
    if (ssize == 0 || ssize > (uint64_t)(end - p) || p + 8 + ssize + 8 != end) return size;
    memcpy(&dyn, p + 8 + ssize, 8);
    uint64_t keep = (dyn + 7) & ~(uint64_t)7; /* records stay 8-byte multiples */
    if (keep >= ssize) return size;
    memcpy(p, &keep, 8);
    memmove(p + 8 + keep, p + 8 + ssize, 8);
    return (size_t)(p + 8 + keep + 8 - rec);
}

/* The timestamp of the record at pos of r, whose header is h (at least
 * sizeof *h + 24 bytes: a sample_id trailer, or a sample's time). */
static int64_t ring_ts(const cw_perf__ring_t *r, uint64_t pos, const struct perf_event_header *h)
{
    int64_t ts;
    ring_copy(r, h->type == PERF_RECORD_SAMPLE ? pos + sizeof *h + 16 : pos + h->size - 16, &ts,
              sizeof ts);
    return ts;
}

/* The first record of r not yet taken, up to r->head (the head read when
 * the drain began): true with *h and *ts set, false when there is none.
 * Records too short for a sample_id are skipped (all if size 0). */
static bool ring_peek(cw_perf__ring_t *r, struct perf_event_header *h, int64_t *ts)
{
    struct perf_event_mmap_page *mp = r->base;
    uint64_t tail = mp->data_tail;
    while (tail + sizeof *h <= r->head) {
        ring_copy(r, tail, h, sizeof *h);
        if (tail + h->size > r->head) break; /* not possible: the kernel publishes whole records */
        if (h->size < sizeof *h + 24) {
            r->malformed++;
            tail += h->size ? h->size : r->head - tail;
            __atomic_store_n(&mp->data_tail, tail, __ATOMIC_RELEASE);
            continue;
        }
        *ts = ring_ts(r, tail, h);
        return true;
    }
    return false;
}

/* Moves r's first record (its header h, from ring_peek) to the queue. */
static int ring_take(cw_perf__t *s, cw_perf__ring_t *r, const struct perf_event_header *h)
{
    struct perf_event_mmap_page *mp = r->base;
    uint64_t tail = mp->data_tail;
    ring_copy(r, tail, s->scratch, h->size);
    __atomic_store_n(&mp->data_tail, tail + h->size, __ATOMIC_RELEASE);
    size_t size = trim_stack(s, s->scratch, h->size);
    size_t bytes = sizeof(cw_perf__rec_t) - sizeof(struct perf_event_header) + size;
    cw_perf__rec_t *x = cw_perf__recpool_alloc(&s->pool, bytes);
    if (!x) return CW_ENOMEM;
    memcpy(&x->h, s->scratch, size);
    x->h.size = (uint16_t)size;
    const uint8_t *base = (const uint8_t *)&x->h;
    if (h->type == PERF_RECORD_SAMPLE)
        memcpy(&x->ts, base + 8 + 16, 8);
    else
        memcpy(&x->ts, base + size - 16, 8);
    /* Our own work is not traced. A task outside our PID namespace (the
     * service in a container, the host's processes) is pid 0 in its
     * records: it has no /proc entry here to read, so its records are
     * dropped, counted, before they cost a lookup each. */
    uint32_t pid = h->type == PERF_RECORD_LOST ? UINT32_MAX : rec_pid(x);
    if (pid == s->self || pid == 0) {
        if (pid == 0) s->n_foreign++;
        cw_perf__recpool_free(&s->pool, x);
        return 0;
    }
    x->seq = s->seq++;
    s->qbytes += bytes;
    if (CW_RESERVE(s->q, s->qcap, s->qn + 1)) {
        cw_perf__recpool_free(&s->pool, x);
        return CW_ENOMEM;
    }
    s->q[s->qn++] = x;
    return 0;
}

/* Records are left in r (the queue is at its cap); ts is the first one's. */
static void ring_cut(cw_perf__t *s, cw_perf__ring_t *r, int64_t ts)
{
    r->cut = true;
    r->next_ts = ts;
    s->n_cut++;
}

/* Moves r's records to the queue while it is under its cap; past the cap,
 * at most `force` more, and only those at or before `bound` (the merge of
 * the rings left behind, cw_perf__merge_pass). When records are left in
 * the ring, r->cut is set and r->next_ts is the first one's time. */
static int drain(cw_perf__t *s, cw_perf__ring_t *r, int64_t bound, size_t force)
{
    struct perf_event_mmap_page *mp = r->base;
    struct perf_event_header h;
    int64_t ts;
    int rc = 0;
    r->cut = false;
    r->head = __atomic_load_n(&mp->data_head, __ATOMIC_ACQUIRE);
    while (!rc && ring_peek(r, &h, &ts)) {
        if (s->qbytes >= s->qmax) {
            if (force == 0 || ts > bound) {
                ring_cut(s, r, ts);
                break;
            }
            force--;
            s->n_forced++;
        }
        rc = ring_take(s, r, &h);
    }
    return rc;
}

/* The queue's memory: its records' chunks (mapped, not heap), its array
 * and the scratch record. */
static int64_t queue_bytes(const cw_perf__t *s)
{
    return (int64_t)(cw_perf__recpool_bytes(&s->pool) + s->qcap * sizeof *s->q + REC_MAX);
}

/* The allocated bytes of a queued record (as drain counted them). */
static size_t rec_bytes(const cw_perf__rec_t *x)
{
    return sizeof *x - sizeof x->h + x->h.size;
}

static int rec_cmp(const void *a, const void *b)
{
    const cw_perf__rec_t *x = *(cw_perf__rec_t *const *)a, *y = *(cw_perf__rec_t *const *)b;
    if (x->ts != y->ts) return x->ts < y->ts ? -1 : 1;
    return x->seq < y->seq ? -1 : x->seq > y->seq;
}

static int drain_all(cw_perf__t *s);

/* Records too short to read: in the rings' headers and in samples. */
static uint64_t malformed(const cw_perf__t *s)
{
    uint64_t n = s->n_malformed;
    for (size_t i = 0; i < s->ev.nrings; i++)
        n += s->ev.rings[i].malformed;
    return n;
}

/* The counters and the drops (source.h) to the sink. */
static void report(cw_perf__t *s)
{
    const cw_source_sink_t *k = s->sink;
    if (k->counters) k->counters(k->ctx, s->seen, s->lost, (int64_t)s->drift);
    if (!k->drops) return;
    cw_source_drops_t dr = {s->n_foreign, s->n_unpaired, malformed(s), s->n_resyncs,
                            s->n_corrections, s->corrected_bytes, s->resync_due,
                            s->last_resync_ns};
    k->drops(k->ctx, &dr);
}

/* A resync changed pid's charge from acct0 to acct1 bytes, moving `moved`
 * (committed + decommitted; cw_perf__shadow_sync): counted, and told to
 * the sink with the time of the correction's events. */
static void corrected(cw_perf__t *s, uint32_t pid, uint64_t acct0, uint64_t acct1, uint64_t moved)
{
    if (!moved) return;
    /* committed - decommitted = acct1 - acct0; committed + decommitted = moved */
    uint64_t committed = (moved + acct1 - acct0) / 2, decommitted = moved - committed;
    s->n_corrections++;
    s->corrected_bytes += moved;
    if (s->sink->correction)
        s->sink->correction(s->sink->ctx, pid, s->last_ts, committed, decommitted);
}

/* Whether processes a and b still share one address space (a CLONE_VM
 * child and its parent): kcmp(KCMP_VM). True when it cannot tell (no
 * kcmp, no ptrace access), so nothing changes then. */
static bool shares_mm(uint32_t a, uint32_t b)
{
    long r = syscall(SYS_kcmp, (pid_t)a, (pid_t)b, KCMP_VM, 0UL, 0UL);
    return !(r >= 1 && r <= 3) && !(r < 0 && errno == ESRCH);
}

/* After lost records: every process is read again and corrected. */
static int resync_all(cw_perf__t *s, int64_t ts)
{
    s->resync_due = false;
    s->n_resyncs++;
    uint64_t before = s->drift;
    /* Collect first: the table changes while walking it. */
    size_t n = 0;
    uint32_t *pids = malloc((s->procs.n + 1) * sizeof *pids);
    if (!pids) return CW_ENOMEM;
    for (size_t i = 0; i < s->procs.cap; i++)
        if (s->procs.vals[i]) pids[n++] = s->procs.keys[i];
    int rc = 0;
    for (size_t i = 0; !rc && i < n; i++) {
        cw_perf__proc_t *p = cw_perf__pmap_get(&s->procs, pids[i]);
        /* A CLONE_VM child (vfork, posix_spawn) whose exec record was lost
         * would stay its parent's alias, never read: once it has an
         * address space of its own it is corrected as a process (its
         * shadow is empty: all it has is a correction). */
        if (p && p->alias && p->pid != p->alias && !shares_mm(p->pid, p->alias)) p->alias = 0;
        if (!p || p->alias || p->fork_parent) continue;
        uint64_t acct0 = p->sh.acct_bytes, moved = 0;
        rc = cw_perf__proc_snapshot(s, p, ts, s->st_resync, false, &moved);
        s->drift += moved;
        if (!rc) corrected(s, pids[i], acct0, p->sh.acct_bytes, moved);
        if (rc == CW_ENOENT) rc = cw_perf__proc_exit(s, p, ts); /* its exit was lost */
        if (!rc) rc = drain_all(s); /* reading /proc is slow: keep the rings empty */
    }
    free(pids);
    /* Processes whose fork was lost. */
    DIR *dir = opendir("/proc");
    struct dirent *de;
    while (!rc && dir && (de = readdir(dir))) {
        char *endp;
        unsigned long pid = strtoul(de->d_name, &endp, 10);
        if (*endp || pid == 0 || pid == s->self || cw_perf__pmap_get(&s->procs, (uint32_t)pid))
            continue;
        cw_perf__proc_t *p = cw_perf__proc_adopt(s, (uint32_t)pid, ts, s->st_resync, false);
        rc = s->err;
        /* Its start was lost: all its memory is a correction. */
        if (p) corrected(s, (uint32_t)pid, 0, p->sh.acct_bytes, p->sh.acct_bytes);
    }
    if (dir) closedir(dir);
    s->last_resync_ns = s->last_ts;
    CW_LOGW("perf: %llu records lost so far; processes resynchronised from smaps, %llu bytes "
            "corrected",
            (unsigned long long)s->lost, (unsigned long long)(s->drift - before));
    report(s);
    return rc;
}

/* Moves the rings' records to the queue, the oldest first across the
 * rings (a merge of the rings by each one's first record), until they are
 * empty or the queue is at its cap. At the cap, every ring still holding
 * records is cut (cw_perf__merge_pass) at a record no older than what was
 * queued (up to SLACK_NS of the kernel's reordering within a ring): the
 * queue holds the oldest records, which can be processed. (Ring by ring,
 * the first ring's records, spread over seconds after a backlog, filled
 * the queue, and the merge stalled at the next ring's first record.) */
static int drain_all(cw_perf__t *s)
{
    struct perf_event_header h;
    int rc = 0;
    for (size_t i = 0; i < s->ev.nrings; i++) {
        cw_perf__ring_t *r = &s->ev.rings[i];
        r->cut = false;
        r->head = __atomic_load_n(&((struct perf_event_mmap_page *)r->base)->data_head,
                                  __ATOMIC_ACQUIRE);
        r->ready = ring_peek(r, &h, &r->next_ts);
    }
    while (!rc) {
        cw_perf__ring_t *best = NULL;
        for (size_t i = 0; i < s->ev.nrings; i++) {
            cw_perf__ring_t *r = &s->ev.rings[i];
            if (r->ready && (!best || r->next_ts < best->next_ts)) best = r;
        }
        if (!best) break;
        if (s->qbytes >= s->qmax) {
            for (size_t i = 0; i < s->ev.nrings; i++)
                if (s->ev.rings[i].ready) ring_cut(s, &s->ev.rings[i], s->ev.rings[i].next_ts);
            break;
        }
        ring_peek(best, &h, &best->next_ts);
        rc = ring_take(s, best, &h);
        best->ready = !rc && ring_peek(best, &h, &best->next_ts);
    }
    return rc;
}

/* The time before which every record is out of the rings: horizon, or
 * earlier when a drain left records in a ring (records of one ring are in
 * time order up to what nesting in the kernel reorders: SLACK_NS). */
static int64_t rings_floor(const cw_perf__t *s, int64_t horizon)
{
    for (size_t i = 0; i < s->ev.nrings; i++) {
        const cw_perf__ring_t *r = &s->ev.rings[i];
        if (r->cut && r->next_ts - SLACK_NS < horizon) horizon = r->next_ts - SLACK_NS;
    }
    return horizon;
}

/* Is a ring left behind with records older than t? (INT64_MAX: any.) */
static bool rings_behind(const cw_perf__t *s, int64_t t)
{
    for (size_t i = 0; i < s->ev.nrings; i++)
        if (s->ev.rings[i].cut && s->ev.rings[i].next_ts < t) return true;
    return false;
}

/* Processes queued records older than horizon (all when horizon is max).
 * Returns to the caller once per pass whatever the load, so stop() and
 * ticks are seen. */
static int process_until(cw_perf__t *s, int64_t horizon)
{
    int rc = 0;
    if (s->qn == 0) return 0;
    qsort(s->q, s->qn, sizeof *s->q, rec_cmp);
    size_t i = 0, sorted = s->qn;
    int64_t last_drain = cw_plat_mono_ns();
    while (!rc && i < sorted && s->q[i]->ts < horizon) {
        rc = s->process ? s->process(s, s->q[i]) : cw_perf__process_rec(s, s->q[i]);
        if (!rc) rc = s->err;
        s->qbytes -= rec_bytes(s->q[i]);
        cw_perf__recpool_free(&s->pool, s->q[i++]);
        /* Unwinding a burst can take a while: keep the kernel's rings from
         * overflowing by moving their records to the queue (they are not
         * older than horizon: each ring was emptied, or its floor is in
         * horizon; they wait for the next pass, which sorts again). The
         * clock is read after every record (a vDSO call, far cheaper than
         * a record): one record can take milliseconds (a new process's
         * first unwind, an exec's smaps), and 64 of those between two
         * looks at the clock let the rings overflow on a busy machine. */
        if (!rc && cw_plat_mono_ns() - last_drain > 2000000) {
            rc = drain_all(s);
            last_drain = cw_plat_mono_ns();
        }
    }
    memmove(s->q, s->q + i, (s->qn - i) * sizeof *s->q);
    s->qn -= i;
    cw_mem_set(CW_MEM_PERF_QUEUE, queue_bytes(s));
    return rc;
}

/* How often the process and thread tables are swept (cw_perf__sweep). */
#define SWEEP_NS (10 * CW_NS_PER_S)

/* Past the queue's cap: records a ring gives per round at most, rounds
 * per pass, and how far past the oldest ring's first record every ring
 * behind is merged in a round. */
#define FORCE_BATCH 1024
#define FORCE_ROUNDS 64
#define FORCE_WINDOW_NS (4 * SLACK_NS)

int cw_perf__merge_pass(cw_perf__t *s, int64_t horizon, int64_t *upto)
{
    int rc = drain_all(s);
    int64_t h = rings_floor(s, horizon);
    if (!rc) rc = process_until(s, h);
    /* The queue is at its cap and rings were left behind: what waits in
     * the queue may all be newer than their first records, so nothing
     * would move. Every ring behind gives its records up to the oldest
     * one's first plus FORCE_WINDOW_NS (at most FORCE_BATCH) past the
     * cap, and what is then older than every ring's first record (less
     * SLACK_NS) is processed at once: the merge goes on in time order by
     * at least FORCE_WINDOW_NS - SLACK_NS or a batch per round, whichever
     * way the CPUs' records interleave, the queue holds at most that
     * window past its cap, and what the rings cannot hold the kernel drops
     * (counted as lost). (A round that gave only the oldest ring's records
     * up to the next ring's first moved one record per round when the
     * CPUs' records alternate: the rings overflowed, and the resyncs made
     * what was lost '(resync)'.) */
    for (int round = 0; !rc && round < FORCE_ROUNDS && s->qbytes >= s->qmax; round++) {
        int64_t oldest = INT64_MAX;
        for (size_t i = 0; i < s->ev.nrings; i++)
            if (s->ev.rings[i].cut && s->ev.rings[i].next_ts < oldest)
                oldest = s->ev.rings[i].next_ts;
        if (oldest >= horizon) break;
        int64_t bound = oldest < horizon - FORCE_WINDOW_NS ? oldest + FORCE_WINDOW_NS : horizon;
        for (size_t i = 0; !rc && i < s->ev.nrings; i++) {
            cw_perf__ring_t *r = &s->ev.rings[i];
            if (r->cut && r->next_ts <= bound) rc = drain(s, r, bound, FORCE_BATCH);
        }
        h = rings_floor(s, horizon);
        if (!rc) rc = process_until(s, h);
    }
    *upto = h;
    return rc;
}

/* ---- memory ------------------------------------------------------------ */

static size_t pmap_bytes(const cw_perf__pmap_t *m)
{
    return m->cap * (sizeof *m->keys + sizeof *m->vals);
}

/* Publishes the process table's and the unwinder's bytes (memstat.h);
 * once a second: walking 1,000 processes costs microseconds. */
static void account(const cw_perf__t *s)
{
    size_t b = pmap_bytes(&s->procs) + pmap_bytes(&s->thrs) + pmap_bytes(&s->newtask) +
               s->pend_cap * sizeof *s->pend;
    for (size_t i = 0; i < s->procs.cap; i++) {
        const cw_perf__proc_t *p = s->procs.vals[i];
        if (!p) continue;
        b += sizeof *p + p->sh.cap * sizeof *p->sh.seg + p->pend.cap * sizeof *p->pend.seg +
             p->pend.xcap * sizeof *p->pend.x + cw_perf__aspace_bytes(p->as);
    }
    for (size_t i = 0; i < s->thrs.cap; i++) {
        const cw_perf__thr_t *t = s->thrs.vals[i];
        if (t) b += sizeof *t + (t->stk ? t->stk_len : 0);
    }
    for (size_t i = 0; i < CW_PERF__ACCT_READS; i++)
        b += s->acct.e[i].snap.cap * sizeof *s->acct.e[i].snap.seg;
    cw_mem_set(CW_MEM_PERF_PROCS, (int64_t)b);
    cw_mem_set(CW_MEM_UNWINDER, (int64_t)cw_perf__unwinder_bytes(s->unw));
    cw_mem_set(CW_MEM_PERF_QUEUE, queue_bytes(s));
}

/* ---- the rundown ------------------------------------------------------- */

static int rundown(cw_perf__t *s, int64_t ts)
{
    DIR *dir = opendir("/proc");
    if (!dir) return CW_EIO;
    struct dirent *de;
    size_t nproc = 0;
    while ((de = readdir(dir))) {
        char *endp;
        unsigned long pid = strtoul(de->d_name, &endp, 10);
        if (*endp || pid == 0 || pid == s->self) continue;
        if (cw_perf__proc_adopt(s, (uint32_t)pid, ts, s->st_before, true)) nproc++;
        if (!s->err) s->err = drain_all(s); /* reading /proc is slow: keep the rings empty */
        if (s->err) break;
    }
    closedir(dir);
    CW_LOGI("perf: rundown loaded %zu processes", nproc);
    return s->err;
}

/* ---- the source ops ---------------------------------------------------- */

static int perf_open_src(void **impl, const cw_source_opts_t *o, cw_diag_t *d)
{
    cw_stacks_t *stacks = o->stacks;
    if (o->arg && o->arg[0])
        return cw_diag_set(d, CW_EUSAGE, "--source perf takes no argument (got 'perf:%s')", o->arg);
    cw_perf__t *s = calloc(1, sizeof *s);
    if (!s) return CW_ENOMEM;
    s->pipefd[0] = s->pipefd[1] = -1;
    s->stacks = stacks;
    char note[256];
    /* Rings: perf_ring_size in all (default 16 MiB), split between the
     * CPUs, each a power of two from 512 KiB to 16 MiB. A CPU making
     * 50,000 stack samples a second (8 KiB each) fills 8 MiB in 20 ms;
     * the core thread moves records out every 2 ms even while it unwinds,
     * and past the queue's cap the kernel counts what it drops, which a
     * resync from smaps corrects (DESIGN, "Memory"). */
    long ncpu = sysconf(_SC_NPROCESSORS_CONF);
    uint64_t total = o->perf_ring_bytes ? o->perf_ring_bytes : RING_TOTAL_DEF;
    size_t ring = 16u << 20;
    while (ring > (512u << 10) && (uint64_t)ring * (uint64_t)(ncpu > 0 ? ncpu : 1) > total)
        ring /= 2;
    s->qmax = o->perf_queue_bytes ? (size_t)o->perf_queue_bytes : QUEUE_CAP_DEF;
    if (!(s->scratch = malloc(REC_MAX))) {
        free(s);
        return CW_ENOMEM;
    }
    int rc = cw_perf__events_open(&s->ev, ring, STACK_BYTES, d, note, sizeof note);
    if (rc) goto fail;
    if (note[0]) CW_LOGW("perf: %s", note);
    cw_mem_set(CW_MEM_PERF_RINGS, (int64_t)(s->ev.nrings * ((size_t)sysconf(_SC_PAGESIZE) + ring)));
    if ((rc = cw_perf__unwinder_create(stacks, o->perf_unwind_procs ? o->perf_unwind_procs : UNWIND_PROCS_DEF,
                                       &s->unw)))
        goto fail;
    if (pipe2(s->pipefd, O_CLOEXEC | O_NONBLOCK) != 0) {
        rc = cw_diag_set(d, CW_EIO, "pipe: %s", strerror(errno));
        goto fail;
    }
    const char *ps[4] = {"(before trace)", "(exec image)", "(fork)", "(resync)"};
    uint32_t *ids[4] = {&s->st_before, &s->st_exec, &s->st_fork, &s->st_resync};
    for (int i = 0; i < 4; i++)
        if ((rc = cw_stacks_intern_strings(stacks, &ps[i], 1, ids[i]))) goto fail;
    int oc = 0;
    FILE *f = fopen("/proc/sys/vm/overcommit_memory", "re");
    if (f) {
        if (fscanf(f, "%d", &oc) != 1) oc = 0;
        fclose(f);
    }
    cw_perf__procs_env(s, oc == 2);
    s->self = (uint32_t)getpid();
    s->last_resync_ns = INT64_MIN;
    *impl = s;
    return 0;
fail:
    cw_perf__events_close(&s->ev);
    cw_perf__unwinder_destroy(s->unw);
    if (s->pipefd[0] >= 0) close(s->pipefd[0]);
    if (s->pipefd[1] >= 0) close(s->pipefd[1]);
    free(s->scratch);
    free(s);
    return rc;
}

static const char *perf_platform(void *impl)
{
    (void)impl;
    return "linux";
}

static int perf_run(void *impl, const cw_source_sink_t *sink, cw_diag_t *d)
{
    cw_perf__t *s = impl;
    s->sink = sink;
    s->d = d;
    /* perf timestamps are CLOCK_MONOTONIC (use_clockid), which the
     * platform's monotonic clock reads. */
    int64_t w0 = cw_plat_wall_ns(), m0 = cw_plat_mono_ns();
    s->mono_to_epoch = w0 - m0;
    if (cw_perf__events_enable(&s->ev) != 0)
        return cw_diag_set(d, CW_EIO, "enabling the perf events failed: %s", strerror(errno));
    s->t0_epoch = m0 + s->mono_to_epoch;
    int rc = rundown(s, cw_plat_mono_ns());
    size_t nfd = s->ev.nrings + 1;
    struct pollfd *pfd = calloc(nfd, sizeof *pfd);
    if (!pfd) rc = CW_ENOMEM;
    for (size_t i = 0; pfd && i < s->ev.nrings; i++)
        pfd[i] = (struct pollfd){s->ev.rings[i].fd, POLLIN, 0};
    if (pfd) pfd[s->ev.nrings] = (struct pollfd){s->pipefd[0], POLLIN, 0};
    int64_t next_tick = cw_plat_mono_ns(), next_resync = 0, next_sweep = next_tick + SWEEP_NS;
    while (!rc && !atomic_load(&s->stopping)) {
        /* A ring left behind may hold less than its wakeup watermark. */
        poll(pfd, nfd, rings_behind(s, INT64_MAX) ? 1 : 100);
        int64_t t = cw_plat_mono_ns(), upto = t - SLACK_NS;
        rc = cw_perf__merge_pass(s, t - SLACK_NS, &upto);
        /* After a loss, one resync covers every loss of the last second. */
        if (!rc && s->resync_due && t >= next_resync) {
            rc = resync_all(s, s->now_mono);
            next_resync = cw_plat_mono_ns() + CW_NS_PER_S;
        }
        if (!rc && s->npend) rc = cw_perf__pend_due(s, upto);
        /* Entries whose exit was never seen (lost records; CLONE_VM
         * children, which the resync does not read) would stay until
         * their id is reused: up to pid_max of them. */
        if (!rc && t >= next_sweep) {
            size_t ended = 0, freed = 0;
            rc = cw_perf__sweep(s, s->now_mono, &ended, &freed);
            next_sweep = t + SWEEP_NS;
            s->n_swept_procs += ended;
            s->n_swept_thrs += freed;
            if (ended || freed)
                CW_LOGD("perf: %zu processes and %zu threads gone without an exit record "
                        "forgotten",
                        ended, freed);
#ifdef __GLIBC__
            /* What a burst of processes freed (their shadows, records,
             * libdw's state of their modules) stays in glibc's arenas,
             * as resident memory, until trimmed: give it back. */
            malloc_trim(0);
#endif
        }
        if (!rc && t >= next_tick) {
            next_tick = t + CW_NS_PER_S;
            int64_t now = upto + s->mono_to_epoch; /* not past a record still to come */
            if (now < s->last_ts) now = s->last_ts;
            s->last_ts = now;
            account(s);
            if (sink->tick) rc = sink->tick(sink->ctx, now);
            report(s);
        }
    }
    /* Stopped: what the rings hold up to now still goes out, in order.
     * Not what comes after (the events stay enabled until close): on a
     * busy machine the rings would never be empty. */
    int64_t upto = 0, end = cw_plat_mono_ns();
    if (!rc) rc = cw_perf__merge_pass(s, end, &upto);
    while (!rc && rings_behind(s, end))
        rc = cw_perf__merge_pass(s, end, &upto);
    if (!rc) rc = process_until(s, end);
    if (!rc && s->npend) rc = cw_perf__pend_due(s, INT64_MAX);
    if (!rc && s->resync_due) rc = resync_all(s, s->now_mono);
    report(s);
    free(pfd);
    CW_LOGI("perf: %llu drains stopped at the queue's cap, %llu records merged past it; "
            "%llu processes and %llu threads forgotten without an exit record; %llu charge "
            "queries (mprotect) answered from %llu smaps reads",
            (unsigned long long)s->n_cut, (unsigned long long)s->n_forced,
            (unsigned long long)s->n_swept_procs, (unsigned long long)s->n_swept_thrs,
            (unsigned long long)s->acct.queries, (unsigned long long)s->acct.reads);
    CW_LOGD("perf: %llu records, %llu enters, %llu exits (%llu without enter), %llu applied, "
            "%llu already in a snapshot, %llu of unknown processes; %llu forks of an image "
            "not yet read, their child gone or not readable",
            (unsigned long long)s->seen, (unsigned long long)s->n_enter,
            (unsigned long long)s->n_exit, (unsigned long long)s->orphans,
            (unsigned long long)s->n_applied, (unsigned long long)s->n_marked,
            (unsigned long long)s->n_unknown, (unsigned long long)s->n_fork_unread);
    if (s->n_foreign)
        CW_LOGI("perf: %llu records of tasks outside this PID namespace dropped (pid 0: no "
                "/proc entry here)",
                (unsigned long long)s->n_foreign);
    /* Every record that did not count is in this line (docs/LINUX.md,
     * "Losses and drift"). */
    CW_LOGI("perf: losses: %llu records lost by the kernel (full rings), %llu calls unpaired "
            "(half lost), %llu records too short skipped; %llu resyncs from smaps made %llu "
            "process corrections, %llu bytes",
            (unsigned long long)s->lost, (unsigned long long)s->n_unpaired,
            (unsigned long long)malformed(s), (unsigned long long)s->n_resyncs,
            (unsigned long long)s->n_corrections, (unsigned long long)s->corrected_bytes);
    if (rc && rc != CW_ENOMEM && rc > -100 && !d->msg[0])
        cw_diag_set(d, rc, "perf source: %s", cw_strerror(rc));
    return rc;
}

static void perf_stop(void *impl)
{
    cw_perf__t *s = impl;
    atomic_store(&s->stopping, 1);
    ssize_t w = write(s->pipefd[1], "x", 1); /* async-signal-safe */
    (void)w;
}

static void perf_close(void *impl)
{
    cw_perf__t *s = impl;
    if (!s) return;
    for (size_t i = 0; i < s->procs.cap; i++)
        if (s->procs.vals[i]) {
            cw_perf__proc_t *p = s->procs.vals[i];
            cw_perf__shadow_free(&p->sh);
            cw_perf__aspace_free(p->as);
            cw_perf__snapshot_free(&p->pend);
            free(p);
        }
    free(s->pend);
    for (size_t i = 0; i < s->thrs.cap; i++)
        if (s->thrs.vals[i]) {
            cw_perf__thr_t *t = s->thrs.vals[i];
            free(t->stk);
            free(t);
        }
    cw_perf__pmap_free(&s->procs);
    cw_perf__pmap_free(&s->thrs);
    cw_perf__pmap_free(&s->newtask);
    for (size_t i = 0; i < s->qn; i++)
        cw_perf__recpool_free(&s->pool, s->q[i]);
    free(s->q);
    cw_perf__recpool_destroy(&s->pool);
    cw_perf__acct_cache_free(&s->acct);
    cw_perf__events_close(&s->ev);
    cw_perf__unwinder_destroy(s->unw);
    close(s->pipefd[0]);
    close(s->pipefd[1]);
    free(s->scratch);
    free(s);
    for (int c = CW_MEM_PERF_RINGS; c <= CW_MEM_UNWINDER; c++)
        cw_mem_set((cw_mem_comp_t)c, 0);
}

/* The source's ops (source.h): every source fills the same struct, so
 * this reads like theirs by design. */
const cw_source_ops_t cw_source_perf = {
    .name = "perf",
    .open = perf_open_src,
    .platform = perf_platform,
    .run = perf_run,
    .stop = perf_stop,
    .close = perf_close,
};
