/* perf.c - the Linux live source (`--source perf`): reads the per-CPU perf
 * rings, merges their records in timestamp order, hands each to the
 * process table (procs.c), which keeps each process's VMA shadow
 * (shadow.c), and delivers the resulting events to the sink in ts order;
 * the rundown, resynchronisation after losses, the source ops.
 *
 * DESIGN (threads and ordering). Everything runs on the thread that calls
 * run(); stop() only sets a flag and writes a byte to a pipe (async-signal-
 * safe). Each pass: note the monotonic time T, copy every ring's records
 * out, then process, sorted by (ts, arrival), those older than T - 2 ms;
 * a record is written within microseconds of its timestamp (the kernel
 * writes it with preemption off), so nothing older can still arrive.
 *
 * Snapshots and the mark. /proc/PID/smaps is read at the rundown, after an
 * exec, for a process seen for the first time, and after lost records. A
 * snapshot shows the state at the time it was read, later than the
 * records being processed; so the process remembers that time (its mark)
 * and syscall exits at or before the mark are not applied again: they are
 * in the snapshot. Exits after it are (mmap, munmap, brk are idempotent
 * over a snapshot that already had them, which covers a call in flight
 * while smaps was read).
 *
 * Memory: a process's state is dropped at its exit; a thread's pending
 * enter at the thread's exit; records are freed once processed. */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/perf_event.h>
#include <poll.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "commitwatch/log.h"
#include "commitwatch/platform.h"
#include "commitwatch/source.h"
#include "sources/perf/perf_internal.h"

/* ---- small maps ------------------------------------------------------- */

static size_t h32(uint32_t k, size_t cap)
{
    return (size_t)((k * 2654435761u) & (cap - 1));
}

void *cw_perf__pmap_get(const cw_perf__pmap_t *m, uint32_t k)
{
    if (!m->cap) return NULL;
    for (size_t i = h32(k, m->cap); m->vals[i]; i = (i + 1) & (m->cap - 1))
        if (m->keys[i] == k) return m->vals[i];
    return NULL;
}

int cw_perf__pmap_put(cw_perf__pmap_t *m, uint32_t k, void *v)
{
    if ((m->n + 1) * 2 > m->cap) {
        cw_perf__pmap_t g = {0};
        g.cap = m->cap ? m->cap * 2 : 256;
        g.keys = calloc(g.cap, sizeof *g.keys);
        g.vals = calloc(g.cap, sizeof *g.vals);
        if (!g.keys || !g.vals) {
            free(g.keys);
            free(g.vals);
            return CW_ENOMEM;
        }
        for (size_t i = 0; i < m->cap; i++)
            if (m->vals[i]) cw_perf__pmap_put(&g, m->keys[i], m->vals[i]);
        free(m->keys);
        free(m->vals);
        *m = g;
    }
    size_t i = h32(k, m->cap);
    while (m->vals[i] && m->keys[i] != k)
        i = (i + 1) & (m->cap - 1);
    if (!m->vals[i]) m->n++;
    m->keys[i] = k;
    m->vals[i] = v;
    return 0;
}

void cw_perf__pmap_del(cw_perf__pmap_t *m, uint32_t k)
{
    if (!m->cap) return;
    size_t i = h32(k, m->cap);
    while (m->vals[i] && m->keys[i] != k)
        i = (i + 1) & (m->cap - 1);
    if (!m->vals[i]) return;
    m->vals[i] = NULL;
    m->n--;
    /* Shift back the entries of the cluster that follows. */
    for (size_t j = (i + 1) & (m->cap - 1); m->vals[j]; j = (j + 1) & (m->cap - 1)) {
        size_t home = h32(m->keys[j], m->cap);
        bool between = i <= j ? (i < home && home <= j) : (i < home || home <= j);
        if (between) continue;
        m->keys[i] = m->keys[j];
        m->vals[i] = m->vals[j];
        m->vals[j] = NULL;
        i = j;
    }
}

void cw_perf__pmap_free(cw_perf__pmap_t *m)
{
    free(m->keys);
    free(m->vals);
    memset(m, 0, sizeof *m);
}

/* ---- time and emission ------------------------------------------------ */

/* Every event goes out through here: monotonic -> epoch, never backwards. */
static int emit_raw(cw_perf__t *s, cw_event_t *ev)
{
    int64_t ts = ev->ts + s->mono_to_epoch;
    if (ts < s->last_ts) ts = s->last_ts;
    s->last_ts = ts;
    ev->ts = ts;
    return s->sink->emit(s->sink->ctx, ev);
}

static int shadow_emit(void *ctx, const cw_event_t *in)
{
    cw_event_t ev = *in;
    return emit_raw(ctx, &ev);
}

static int shadow_query(void *ctx, uint32_t pid, uint64_t addr, uint64_t len)
{
    (void)ctx;
    return cw_perf__smaps_query_acct(pid, addr, len);
}

int cw_perf__emit_proc(cw_perf__t *s, cw_op_t op, uint32_t pid, int64_t ts, const char *name,
                       const char *cmdline)
{
    cw_event_t ev = {0};
    ev.ts = ts;
    ev.op = op;
    ev.pid = pid;
    ev.name = name;
    ev.cmdline = cmdline && *cmdline ? cmdline : NULL;
    return emit_raw(s, &ev);
}

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

static int drain(cw_perf__t *s, const cw_perf__ring_t *r)
{
    struct perf_event_mmap_page *mp = r->base;
    uint64_t head = __atomic_load_n(&mp->data_head, __ATOMIC_ACQUIRE);
    uint64_t tail = mp->data_tail;
    int rc = 0;
    while (tail + sizeof(struct perf_event_header) <= head && s->qbytes < QUEUE_CAP) {
        struct perf_event_header h;
        ring_copy(r, tail, &h, sizeof h);
        if (tail + h.size > head) break; /* not possible: the kernel publishes whole records */
        if (h.size < sizeof h + 24) {    /* too short for a sample_id: skip (all if size 0) */
            tail += h.size ? h.size : head - tail;
            continue;
        }
        cw_perf__rec_t *x = malloc(sizeof *x - sizeof x->h + h.size);
        if (!x) {
            rc = CW_ENOMEM;
            break;
        }
        ring_copy(r, tail, &x->h, h.size);
        tail += h.size;
        const uint8_t *base = (const uint8_t *)&x->h;
        if (h.type == PERF_RECORD_SAMPLE)
            memcpy(&x->ts, base + 8 + 16, 8);
        else
            memcpy(&x->ts, base + h.size - 16, 8);
        if (rec_pid(x) == s->self && h.type != PERF_RECORD_LOST) { /* our own work */
            free(x);
            continue;
        }
        x->seq = s->seq++;
        s->qbytes += h.size;
        if (CW_RESERVE(s->q, s->qcap, s->qn + 1)) {
            free(x);
            rc = CW_ENOMEM;
            break;
        }
        s->q[s->qn++] = x;
    }
    __atomic_store_n(&mp->data_tail, tail, __ATOMIC_RELEASE);
    return rc;
}

static int rec_cmp(const void *a, const void *b)
{
    const cw_perf__rec_t *x = *(cw_perf__rec_t *const *)a, *y = *(cw_perf__rec_t *const *)b;
    if (x->ts != y->ts) return x->ts < y->ts ? -1 : 1;
    return x->seq < y->seq ? -1 : x->seq > y->seq;
}

static int drain_all(cw_perf__t *s);

/* After lost records: every process is read again and corrected. */
static int resync_all(cw_perf__t *s, int64_t ts)
{
    s->resync_due = false;
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
        if (!p || p->alias || p->fork_parent) continue;
        rc = cw_perf__proc_snapshot(s, p, ts, s->st_resync, false, &s->drift);
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
        cw_perf__proc_adopt(s, (uint32_t)pid, ts, s->st_resync, false);
        rc = s->err;
    }
    if (dir) closedir(dir);
    CW_LOGW("perf: %llu records lost so far; processes resynchronised from smaps, %llu bytes "
            "corrected",
            (unsigned long long)s->lost, (unsigned long long)(s->drift - before));
    if (s->sink->counters) s->sink->counters(s->sink->ctx, s->seen, s->lost, (int64_t)s->drift);
    return rc;
}

static int drain_all(cw_perf__t *s)
{
    int rc = 0;
    for (size_t i = 0; !rc && i < s->ev.nrings; i++)
        rc = drain(s, &s->ev.rings[i]);
    return rc;
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
        rc = cw_perf__process_rec(s, s->q[i]);
        if (!rc) rc = s->err;
        s->qbytes -= s->q[i]->h.size;
        free(s->q[i++]);
        /* Unwinding a burst can take a while: keep the kernel's rings from
         * overflowing by moving their records to the queue (they are newer
         * than everything sorted, and wait for the next pass). */
        if (!rc && (i & 63) == 0 && cw_plat_mono_ns() - last_drain > 5000000) {
            rc = drain_all(s);
            last_drain = cw_plat_mono_ns();
        }
    }
    memmove(s->q, s->q + i, (s->qn - i) * sizeof *s->q);
    s->qn -= i;
    return rc;
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
    /* Rings: 64 MiB in all, 2 to 16 MiB per CPU (a power of two). A CPU
     * making 50,000 stack samples a second fills 16 MiB in 40 ms. */
    long ncpu = sysconf(_SC_NPROCESSORS_CONF);
    size_t ring = 16u << 20;
    while (ring > (2u << 20) && ring * (size_t)(ncpu > 0 ? ncpu : 1) > (64u << 20))
        ring /= 2;
    int rc = cw_perf__events_open(&s->ev, ring, STACK_BYTES, d, note, sizeof note);
    if (rc) goto fail;
    if (note[0]) CW_LOGW("perf: %s", note);
    if ((rc = cw_perf__unwinder_create(stacks, &s->unw))) goto fail;
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
    s->env = (cw_perf__shadow_env_t){s, shadow_emit, shadow_query, oc == 2};
    s->self = (uint32_t)getpid();
    *impl = s;
    return 0;
fail:
    cw_perf__events_close(&s->ev);
    cw_perf__unwinder_destroy(s->unw);
    if (s->pipefd[0] >= 0) close(s->pipefd[0]);
    if (s->pipefd[1] >= 0) close(s->pipefd[1]);
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
    int64_t next_tick = cw_plat_mono_ns(), next_resync = 0;
    while (!rc && !atomic_load(&s->stopping)) {
        poll(pfd, nfd, 100);
        int64_t t = cw_plat_mono_ns();
        rc = drain_all(s);
        if (!rc) rc = process_until(s, t - SLACK_NS);
        /* After a loss, one resync covers every loss of the last second. */
        if (!rc && s->resync_due && t >= next_resync) {
            rc = resync_all(s, s->now_mono);
            next_resync = cw_plat_mono_ns() + 1000000000LL;
        }
        if (!rc && s->npend) rc = cw_perf__pend_due(s, t - SLACK_NS);
        if (!rc && t >= next_tick) {
            next_tick = t + 1000000000LL;
            int64_t now = t - SLACK_NS + s->mono_to_epoch;
            if (now < s->last_ts) now = s->last_ts;
            s->last_ts = now;
            if (sink->tick) rc = sink->tick(sink->ctx, now);
            if (sink->counters) sink->counters(sink->ctx, s->seen, s->lost, (int64_t)s->drift);
        }
    }
    /* Stopped: what the rings hold still goes out. */
    if (!rc) rc = drain_all(s);
    if (!rc) rc = process_until(s, INT64_MAX);
    if (!rc && s->npend) rc = cw_perf__pend_due(s, INT64_MAX);
    if (!rc && s->resync_due) rc = resync_all(s, s->now_mono);
    if (!rc && sink->counters) sink->counters(sink->ctx, s->seen, s->lost, (int64_t)s->drift);
    free(pfd);
    CW_LOGD("perf: %llu records, %llu enters, %llu exits (%llu without enter), %llu applied, "
            "%llu already in a snapshot, %llu of unknown processes",
            (unsigned long long)s->seen, (unsigned long long)s->n_enter,
            (unsigned long long)s->n_exit, (unsigned long long)s->orphans,
            (unsigned long long)s->n_applied, (unsigned long long)s->n_marked,
            (unsigned long long)s->n_unknown);
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
        free(s->q[i]);
    free(s->q);
    cw_perf__events_close(&s->ev);
    cw_perf__unwinder_destroy(s->unw);
    close(s->pipefd[0]);
    close(s->pipefd[1]);
    free(s);
}

const cw_source_ops_t cw_source_perf = {
    .name = "perf",
    .open = perf_open_src,
    .platform = perf_platform,
    .run = perf_run,
    .stop = perf_stop,
    .close = perf_close,
};
