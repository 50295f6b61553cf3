/* perf.c - the Linux live source (`--source perf`): reads the per-CPU perf
 * rings, merges their records in timestamp order, pairs each syscall's
 * enter with its exit per thread, keeps the process table (fork, exec,
 * exit, names) and each process's VMA shadow (shadow.c), and delivers the
 * resulting events to the sink in ts order.
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
#include "commitwatch/source.h"
#include "sources/perf/perf_internal.h"

#define STACK_BYTES 8192u        /* user stack copied per sample */
#define QUEUE_CAP (96u << 20)    /* bytes of records held: past it the rings overflow */
#define SLACK_NS 2000000         /* see DESIGN */
#define K_CLONE_VM 0x100ull
#define K_CLONE_THREAD 0x10000ull
#define K_PROT_EXEC 0x4u

typedef struct rec {
    int64_t ts;
    uint64_t seq;
    struct perf_event_header h; /* followed by the record's body */
} rec_t;

typedef struct thr {
    uint32_t tid;
    int sc; /* pending enter's syscall, -1 none */
    int64_t ts;
    uint64_t args[6];
    uint32_t nregs;
    uint64_t regs[40];
    uint8_t *stk;
    uint64_t stk_len;
} thr_t;

typedef struct proc {
    uint32_t pid;
    uint32_t alias;       /* CLONE_VM child: its memory is this pid's */
    uint32_t fork_parent; /* fork seen, clone flags not yet */
    int64_t mark;         /* see DESIGN */
    bool started;
    bool has_pend;        /* an exec snapshot waiting for its time (see on_comm) */
    int64_t pend_at;
    cw__snapshot_t pend;
    cw__shadow_t sh;
    cw__aspace_t *as;
    char name[64];
} proc_t;

/* u32 -> pointer, open addressing with backward-shift deletion. */
typedef struct pmap {
    uint32_t *keys;
    void **vals;
    size_t cap, n;
} pmap_t;

typedef struct perf_src {
    cw__events_t ev;
    cw_stacks_t *stacks;
    cw__unwinder_t *unw;
    pmap_t procs, thrs, newtask; /* newtask: child tid -> clone flags + 1 */
    rec_t **q;
    size_t qn, qcap, qbytes;
    uint32_t *pend; /* pids with an exec snapshot pending */
    size_t npend, pend_cap;
    int64_t pend_min;
    uint64_t seq;
    int pipefd[2];
    atomic_int stopping;
    const cw_source_sink_t *sink;
    cw__shadow_env_t env;
    int64_t mono_to_epoch, last_ts, now_mono, t0_epoch; /* now_mono: ts being processed */
    uint32_t self;
    uint32_t st_before, st_exec, st_fork, st_resync;
    uint64_t seen, lost, orphans;
    uint64_t n_enter, n_exit, n_applied, n_marked, n_unknown;
    uint64_t drift;
    bool resync_due;
    int err;
    cw_diag_t *d;
} perf_src_t;

/* ---- small maps ------------------------------------------------------- */

static size_t h32(uint32_t k, size_t cap)
{
    return (size_t)((k * 2654435761u) & (cap - 1));
}

static void *pmap_get(const pmap_t *m, uint32_t k)
{
    if (!m->cap) return NULL;
    for (size_t i = h32(k, m->cap); m->vals[i]; i = (i + 1) & (m->cap - 1))
        if (m->keys[i] == k) return m->vals[i];
    return NULL;
}

static int pmap_put(pmap_t *m, uint32_t k, void *v)
{
    if ((m->n + 1) * 2 > m->cap) {
        pmap_t g = {0};
        g.cap = m->cap ? m->cap * 2 : 256;
        g.keys = calloc(g.cap, sizeof *g.keys);
        g.vals = calloc(g.cap, sizeof *g.vals);
        if (!g.keys || !g.vals) {
            free(g.keys);
            free(g.vals);
            return CW_ENOMEM;
        }
        for (size_t i = 0; i < m->cap; i++)
            if (m->vals[i]) pmap_put(&g, m->keys[i], m->vals[i]);
        free(m->keys);
        free(m->vals);
        *m = g;
    }
    size_t i = h32(k, m->cap);
    while (m->vals[i] && m->keys[i] != k) i = (i + 1) & (m->cap - 1);
    if (!m->vals[i]) m->n++;
    m->keys[i] = k;
    m->vals[i] = v;
    return 0;
}

static void pmap_del(pmap_t *m, uint32_t k)
{
    if (!m->cap) return;
    size_t i = h32(k, m->cap);
    while (m->vals[i] && m->keys[i] != k) i = (i + 1) & (m->cap - 1);
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

static void pmap_free(pmap_t *m)
{
    free(m->keys);
    free(m->vals);
    memset(m, 0, sizeof *m);
}

/* ---- time and emission ------------------------------------------------ */

static int64_t mono_now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (int64_t)t.tv_sec * 1000000000LL + t.tv_nsec;
}

/* Every event goes out through here: monotonic -> epoch, never backwards. */
static int emit_raw(perf_src_t *s, cw_event_t *ev)
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
    return cw__smaps_query_acct(pid, addr, len);
}

static int emit_proc(perf_src_t *s, cw_op_t op, uint32_t pid, int64_t ts, const char *name,
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

/* ---- the process table ------------------------------------------------ */

static proc_t *proc_new(perf_src_t *s, uint32_t pid)
{
    proc_t *p = calloc(1, sizeof *p);
    if (!p) return NULL;
    p->pid = pid;
    cw__shadow_init(&p->sh, pid);
    p->as = cw__aspace_new(pid);
    if (!p->as || pmap_put(&s->procs, pid, p)) {
        cw__aspace_free(p->as);
        free(p);
        return NULL;
    }
    return p;
}

static void proc_drop(perf_src_t *s, proc_t *p)
{
    pmap_del(&s->procs, p->pid);
    cw__snapshot_free(&p->pend);
    cw__shadow_free(&p->sh);
    cw__aspace_free(p->as);
    free(p);
}

/* Ends p's instance (if one was announced) and forgets it. */
static int proc_exit(perf_src_t *s, proc_t *p, int64_t ts)
{
    int rc = p->started ? emit_proc(s, CW_OP_PROCESS_EXIT, p->pid, ts, NULL, NULL) : 0;
    proc_drop(s, p);
    return rc;
}

/* Loads a snapshot into p: shadow synced (pseudo stack for new charges),
 * executable mappings added, mark set. CW_ENOENT if p has no memory. */
static int proc_snapshot(perf_src_t *s, proc_t *p, int64_t ts, uint32_t pseudo, bool rundown,
                         uint64_t *drift)
{
    cw__snapshot_t snap = {0};
    int64_t mark = mono_now();
    int rc = cw__smaps_read(p->pid, &snap);
    if (rc) return rc;
    p->mark = mark;
    if (p->has_pend) { /* this snapshot is newer */
        cw__snapshot_free(&p->pend);
        p->has_pend = false;
    }
    cw__call_t c = {ts, 0, 0};
    rc = cw__shadow_sync(&p->sh, &s->env, &c, snap.seg, snap.n, snap.brk, pseudo, rundown, drift);
    for (size_t i = 0; !rc && i < snap.nx; i++) {
        const cw__xmap_t *x = &snap.x[i];
        rc = cw__aspace_map(s->unw, p->as, x->start, x->end - x->start, x->pgoff, x->dev, x->ino,
                            x->path);
    }
    cw__snapshot_free(&snap);
    return rc;
}

/* A process not seen before (rundown, or its fork was missed): announce
 * it and load its memory. NULL when it is gone or has no memory. */
static proc_t *proc_adopt(perf_src_t *s, uint32_t pid, int64_t ts, uint32_t pseudo, bool rundown)
{
    char cmd[1024];
    proc_t *p = proc_new(s, pid);
    if (!p) {
        s->err = CW_ENOMEM;
        return NULL;
    }
    cw__proc_names(pid, p->name, sizeof p->name, cmd, sizeof cmd);
    /* Read first: a kernel thread or a process already gone is skipped. */
    cw__snapshot_t probe = {0};
    int rc = cw__smaps_read(pid, &probe);
    cw__snapshot_free(&probe);
    if (rc) {
        proc_drop(s, p);
        return NULL;
    }
    p->started = true;
    rc = emit_proc(s, CW_OP_PROCESS_START, pid, ts, p->name[0] ? p->name : "?", cmd);
    if (!rc) {
        uint64_t drift = 0;
        rc = proc_snapshot(s, p, ts, pseudo, rundown, &drift);
        if (rc == CW_ENOENT) rc = 0; /* exited meanwhile: its exit record follows */
    }
    if (rc) s->err = rc;
    return rc ? NULL : p;
}

/* The process whose memory pid's calls change (a CLONE_VM child shares
 * its parent's), or NULL. */
static proc_t *mem_owner(perf_src_t *s, uint32_t pid)
{
    proc_t *p = pmap_get(&s->procs, pid);
    if (p && p->alias) {
        proc_t *o = pmap_get(&s->procs, p->alias);
        if (o) return o;
        p->alias = 0; /* the parent is gone: the child keeps what it saw */
    }
    return p;
}

/* An exec snapshot, read when the exec record was processed, is applied
 * when processing reaches the time it was read: by then the shadow holds
 * the calls the program made since the exec, with their stacks, and the
 * sync commits only what the kernel made without a call (the image's
 * segments), as `(exec image)`. */
static int pend_apply(perf_src_t *s, proc_t *p)
{
    p->has_pend = false;
    cw__call_t c = {p->pend_at, 0, 0};
    uint64_t drift = 0;
    int rc = cw__shadow_sync(&p->sh, &s->env, &c, p->pend.seg, p->pend.n, p->pend.brk,
                             s->st_exec, false, &drift);
    cw__snapshot_free(&p->pend);
    return rc;
}

/* Applies the pending snapshots read at or before upto. */
static int pend_due(perf_src_t *s, int64_t upto)
{
    size_t w = 0;
    int rc = 0;
    s->pend_min = INT64_MAX;
    for (size_t i = 0; i < s->npend; i++) {
        proc_t *p = pmap_get(&s->procs, s->pend[i]);
        if (!p || !p->has_pend) continue;
        if (!rc && p->pend_at <= upto) {
            rc = pend_apply(s, p);
            continue;
        }
        if (p->pend_at < s->pend_min) s->pend_min = p->pend_at;
        s->pend[w++] = s->pend[i];
    }
    s->npend = w;
    return rc;
}

/* Completes a fork once the clone flags are known (or assumed). */
static int fork_resolve(perf_src_t *s, proc_t *p, bool shares_vm, int64_t ts)
{
    uint32_t parent = p->fork_parent;
    p->fork_parent = 0;
    proc_t *pp = mem_owner(s, parent);
    if (!pp) { /* parent unknown: read the child itself */
        uint64_t drift = 0;
        int rc = proc_snapshot(s, p, ts, s->st_resync, false, &drift);
        return rc == CW_ENOENT ? 0 : rc;
    }
    if (shares_vm) {
        p->alias = pp->pid;
        return 0;
    }
    /* The child gets the image too: the parent's snapshot cannot wait. */
    int rc = pp->has_pend ? pend_apply(s, pp) : 0;
    if (!rc) rc = cw__shadow_copy(&p->sh, &pp->sh);
    if (!rc) rc = cw__aspace_copy(p->as, pp->as);
    if (rc) return rc;
    cw__call_t c = {ts, p->pid, 0};
    return cw__shadow_commit_all(&p->sh, &s->env, &c, s->st_fork);
}

static proc_t *proc_ready(perf_src_t *s, uint32_t pid, int64_t ts)
{
    proc_t *p = pmap_get(&s->procs, pid);
    if (p && p->fork_parent) {
        int rc = fork_resolve(s, p, false, ts);
        if (rc) s->err = rc;
    }
    return p;
}

/* ---- records ---------------------------------------------------------- */

static int on_fork(perf_src_t *s, const uint32_t *b, int64_t ts)
{
    uint32_t pid = b[0], ppid = b[1], tid = b[2];
    if (pid == ppid || pid != tid) return 0; /* a new thread */
    proc_t *p = pmap_get(&s->procs, pid);
    if (p && p->mark >= ts) return 0; /* the rundown already saw it */
    if (p) {
        int rc = proc_exit(s, p, ts); /* pid reused, its exit not seen */
        if (rc) return rc;
    }
    proc_t *pp = pmap_get(&s->procs, ppid);
    if (!pp) return 0; /* parent unknown: adopted at its first event */
    p = proc_new(s, pid);
    if (!p) return CW_ENOMEM;
    snprintf(p->name, sizeof p->name, "%s", pp->name);
    p->started = true;
    p->fork_parent = ppid;
    int rc = emit_proc(s, CW_OP_PROCESS_START, pid, ts, p->name, NULL);
    if (rc) return rc;
    uintptr_t flags = (uintptr_t)pmap_get(&s->newtask, pid);
    if (flags) {
        pmap_del(&s->newtask, pid);
        return fork_resolve(s, p, ((flags - 1) & K_CLONE_VM) != 0, ts);
    }
    if (s->ev.newtask_id < 0) return fork_resolve(s, p, false, ts);
    return 0;
}

static int on_newtask(perf_src_t *s, const uint8_t *raw, uint32_t raw_size, int64_t ts)
{
    int32_t child;
    uint64_t flags;
    if ((uint32_t)s->ev.newtask_flags_off + 8 > raw_size) return 0;
    memcpy(&child, raw + s->ev.newtask_pid_off, 4);
    memcpy(&flags, raw + s->ev.newtask_flags_off, 8);
    if (flags & K_CLONE_THREAD) return 0;
    proc_t *p = pmap_get(&s->procs, (uint32_t)child);
    if (p && p->fork_parent) return fork_resolve(s, p, (flags & K_CLONE_VM) != 0, ts);
    if (!p) { /* the fork record may come second */
        if (s->newtask.n > 4096) pmap_free(&s->newtask);
        return pmap_put(&s->newtask, (uint32_t)child, (void *)(uintptr_t)(flags + 1));
    }
    return 0;
}

static int on_exit_rec(perf_src_t *s, const uint32_t *b, int64_t ts)
{
    uint32_t pid = b[0], tid = b[2];
    thr_t *t = pmap_get(&s->thrs, tid);
    if (t) {
        pmap_del(&s->thrs, tid);
        free(t->stk);
        free(t);
    }
    if (pid != tid) return 0;
    pmap_del(&s->newtask, pid);
    proc_t *p = pmap_get(&s->procs, pid);
    return p ? proc_exit(s, p, ts) : 0;
}

static int on_comm(perf_src_t *s, const uint8_t *b, uint16_t misc, int64_t ts)
{
    uint32_t pid, tid;
    memcpy(&pid, b, 4);
    memcpy(&tid, b + 4, 4);
    const char *comm = (const char *)b + 8;
    proc_t *p = pmap_get(&s->procs, pid);
    if (!(misc & PERF_RECORD_MISC_COMM_EXEC)) {
        if (p && pid == tid) snprintf(p->name, sizeof p->name, "%s", comm);
        return 0;
    }
    if (p && p->mark >= ts) return 0; /* its snapshot already shows the new image */
    int rc = 0;
    if (p && p->started) rc = emit_proc(s, CW_OP_PROCESS_EXIT, pid, ts, NULL, NULL);
    if (rc) return rc;
    if (!p && !(p = proc_new(s, pid))) return CW_ENOMEM;
    /* exec: a new instance with nothing of the old image. */
    p->alias = p->fork_parent = 0;
    cw__shadow_clear(&p->sh);
    cw__aspace_clear(p->as);
    char cmd[1024], dummy[64];
    cw__proc_names(pid, dummy, sizeof dummy, cmd, sizeof cmd);
    snprintf(p->name, sizeof p->name, "%s", comm);
    p->started = true;
    rc = emit_proc(s, CW_OP_PROCESS_START, pid, ts, p->name, cmd);
    if (rc) return rc;
    /* The kernel mapped the image without mmap calls: read what it made,
     * to be applied when processing reaches now (pend_apply). */
    if (p->has_pend) cw__snapshot_free(&p->pend);
    p->has_pend = false;
    int64_t at = mono_now();
    rc = cw__smaps_read(pid, &p->pend);
    if (rc) return rc == CW_ENOENT ? 0 : rc; /* gone already: its exit follows */
    if (s->npend == s->pend_cap) {
        size_t c = s->pend_cap ? s->pend_cap * 2 : 64;
        uint32_t *q = realloc(s->pend, c * sizeof *q);
        if (!q) return CW_ENOMEM;
        s->pend = q;
        s->pend_cap = c;
    }
    s->pend[s->npend++] = pid;
    /* Its executable mappings now, whichever order the kernel reported the
     * image's mmap2 records and this exec in (the clear above). */
    for (size_t i = 0; i < p->pend.nx; i++) {
        const cw__xmap_t *x = &p->pend.x[i];
        rc = cw__aspace_map(s->unw, p->as, x->start, x->end - x->start, x->pgoff, x->dev, x->ino,
                            x->path);
        if (rc) return rc;
    }
    p->has_pend = true;
    p->pend_at = at;
    if (s->npend == 1 || at < s->pend_min) s->pend_min = at;
    return 0;
}

static int on_mmap2(perf_src_t *s, const uint8_t *b)
{
    uint32_t pid, maj, min, prot;
    uint64_t addr, len, pgoff, ino;
    memcpy(&pid, b, 4);
    memcpy(&addr, b + 8, 8);
    memcpy(&len, b + 16, 8);
    memcpy(&pgoff, b + 24, 8);
    memcpy(&maj, b + 32, 4);
    memcpy(&min, b + 36, 4);
    memcpy(&ino, b + 40, 8);
    memcpy(&prot, b + 56, 4);
    if (!(prot & K_PROT_EXEC)) return 0;
    proc_t *p = mem_owner(s, pid);
    if (!p) return 0;
    uint64_t dev = ((uint64_t)(maj & 0xfffff000u) << 32) | ((uint64_t)(maj & 0xfffu) << 8) |
                   ((uint64_t)(min & 0xffffff00u) << 12) | (min & 0xffu); /* makedev() */
    return cw__aspace_map(s->unw, p->as, addr, len, pgoff, dev, ino, (const char *)b + 64);
}

static bool is_err(uint64_t ret)
{
    return ret >= (uint64_t)-4095;
}

/* A paired syscall: apply it to the owner's shadow. */
static int apply(perf_src_t *s, thr_t *t, int sc, uint32_t pid, int64_t ts, uint64_t ret)
{
    const uint64_t *a = t->args;
    if (sc != CW__SC_BRK && is_err(ret)) return 0;
    proc_t *p = proc_ready(s, pid, ts);
    if (!p) {
        /* First sight of this process (its fork was lost, or it predates
         * a resync): read it; this call is then in the snapshot. */
        s->n_unknown++;
        proc_adopt(s, pid, ts, s->st_resync, false);
        return s->err;
    }
    proc_t *o = mem_owner(s, pid);
    if (o != p && o->fork_parent) fork_resolve(s, o, false, ts);
    if (ts <= o->mark) {
        s->n_marked++;
        return 0;
    }
    s->n_applied++;
    /* The stack is needed only where memory may be charged. */
    bool want = sc == CW__SC_MMAP || sc == CW__SC_MREMAP ||
                ((sc == CW__SC_MPROTECT || sc == CW__SC_PKEY_MPROTECT) && (a[2] & 2)) ||
                (sc == CW__SC_BRK && CW__PAGE_UP(ret) > o->sh.brk);
    cw__call_t c = {ts, t->tid, 0};
    if (want && t->nregs) {
        int rc = cw__unwind(s->unw, o->as, t->tid, t->regs, t->nregs, t->stk, t->stk_len,
                            &c.stack_id);
        if (rc) return rc;
    }
    switch (sc) {
    case CW__SC_MMAP: return cw__shadow_mmap(&o->sh, &s->env, &c, ret, a[1], a[2], a[3]);
    case CW__SC_MUNMAP:
        cw__aspace_unmap(o->as, a[0], a[0] + CW__PAGE_UP(a[1]));
        return cw__shadow_munmap(&o->sh, &s->env, &c, a[0], a[1]);
    case CW__SC_MREMAP:
        if (ret != a[0]) cw__aspace_unmap(o->as, a[0], a[0] + CW__PAGE_UP(a[1]));
        return cw__shadow_mremap(&o->sh, &s->env, &c, a[0], a[1], a[2], a[3], ret);
    case CW__SC_BRK: return cw__shadow_brk(&o->sh, &s->env, &c, a[0], ret);
    default: return cw__shadow_mprotect(&o->sh, &s->env, &c, a[0], a[1], a[2]);
    }
}

static int on_sample(perf_src_t *s, const uint8_t *b, const uint8_t *end, int64_t ts)
{
    uint32_t pid, tid, raw_size;
    memcpy(&pid, b + 8, 4);
    memcpy(&tid, b + 12, 4);
    const uint8_t *p = b + 24;
    memcpy(&raw_size, p, 4);
    const uint8_t *raw = p + 4;
    p = raw + raw_size;
    if (p > end || raw_size < 24) return 0;
    uint16_t type;
    memcpy(&type, raw, 2);
    int id = type;
    if (id == s->ev.newtask_id) return on_newtask(s, raw, raw_size, ts);
    for (int sc = 0; sc < CW__SC_N; sc++) {
        if (id == s->ev.sc_enter_id[sc]) {
            thr_t *t = pmap_get(&s->thrs, tid);
            if (!t) {
                t = calloc(1, sizeof *t);
                if (!t || pmap_put(&s->thrs, tid, t)) {
                    free(t);
                    return CW_ENOMEM;
                }
                t->tid = tid;
            }
            s->n_enter++;
            t->sc = sc;
            t->ts = ts;
            memcpy(t->args, raw + 16, 6 * 8 <= raw_size - 16 ? 48 : raw_size - 16);
            t->nregs = 0;
            t->stk_len = 0;
            if (sc == CW__SC_MUNMAP) return 0;
            /* REGS_USER: abi, regs; STACK_USER: size, data, dyn_size. */
            uint64_t abi, n = (uint64_t)__builtin_popcountll(cw__unwind_regs_mask());
            if (p + 8 > end) return 0;
            memcpy(&abi, p, 8);
            p += 8;
            /* Only 64-bit code is unwound (the registers are read as such). */
            if (abi != PERF_SAMPLE_REGS_ABI_NONE) {
                if (p + n * 8 > end || n > 40) return 0;
                memcpy(t->regs, p, n * 8);
                if (abi == PERF_SAMPLE_REGS_ABI_64) t->nregs = (uint32_t)n;
                p += n * 8;
            }
            uint64_t size, dyn;
            if (p + 8 > end) return 0;
            memcpy(&size, p, 8);
            p += 8;
            if (size == 0 || p + size + 8 > end) return 0;
            memcpy(&dyn, p + size, 8);
            if (dyn > size) dyn = size;
            if (!t->stk && !(t->stk = malloc(STACK_BYTES))) return CW_ENOMEM;
            if (dyn > STACK_BYTES) dyn = STACK_BYTES;
            memcpy(t->stk, p, dyn);
            t->stk_len = dyn;
            return 0;
        }
        if (id == s->ev.sc_exit_id[sc]) {
            thr_t *t = pmap_get(&s->thrs, tid);
            if (!t || t->sc != sc) {
                s->orphans++; /* enter lost, or before tracing began */
                return 0;
            }
            s->n_exit++;
            t->sc = -1;
            uint64_t ret;
            memcpy(&ret, raw + 16, 8);
            return apply(s, t, sc, pid, ts, ret);
        }
    }
    return 0;
}

static int process_rec(perf_src_t *s, const rec_t *r)
{
    const uint8_t *b = (const uint8_t *)(&r->h + 1);
    const uint8_t *end = (const uint8_t *)&r->h + r->h.size;
    s->now_mono = r->ts;
    s->seen++;
    if (s->npend && r->ts > s->pend_min) {
        int rc = pend_due(s, r->ts - 1);
        if (rc) return rc;
    }
    switch (r->h.type) {
    case PERF_RECORD_SAMPLE: return on_sample(s, b, end, r->ts);
    case PERF_RECORD_FORK: return on_fork(s, (const uint32_t *)b, r->ts);
    case PERF_RECORD_EXIT: return on_exit_rec(s, (const uint32_t *)b, r->ts);
    case PERF_RECORD_COMM: return on_comm(s, b, r->h.misc, r->ts);
    case PERF_RECORD_MMAP2: return on_mmap2(s, b);
    case PERF_RECORD_LOST: {
        uint64_t n;
        memcpy(&n, b + 8, 8);
        CW_LOGD("perf: %llu records lost at +%.3f s", (unsigned long long)n,
                (double)(r->ts + s->mono_to_epoch - s->t0_epoch) / 1e9);
        s->lost += n;
        s->resync_due = true;
        return 0;
    }
    default: return 0;
    }
}

/* ---- rings and the merge ---------------------------------------------- */

static void ring_copy(const cw__ring_t *r, uint64_t pos, void *dst, size_t len)
{
    const uint8_t *data = (const uint8_t *)r->base + sysconf(_SC_PAGESIZE);
    size_t off = (size_t)(pos & (r->data_size - 1));
    size_t first = r->data_size - off < len ? r->data_size - off : len;
    memcpy(dst, data + off, first);
    if (first < len) memcpy((uint8_t *)dst + first, data, len - first);
}

/* The pid a record is about, from its body or its sample_id trailer. */
static uint32_t rec_pid(const rec_t *r)
{
    const uint8_t *b = (const uint8_t *)(&r->h + 1);
    uint32_t pid;
    if (r->h.type == PERF_RECORD_SAMPLE) memcpy(&pid, b + 8, 4);
    else memcpy(&pid, (const uint8_t *)&r->h + r->h.size - 24, 4);
    return pid;
}

static int drain(perf_src_t *s, const cw__ring_t *r)
{
    struct perf_event_mmap_page *mp = r->base;
    uint64_t head = __atomic_load_n(&mp->data_head, __ATOMIC_ACQUIRE);
    uint64_t tail = mp->data_tail;
    int rc = 0;
    while (tail + sizeof(struct perf_event_header) <= head && s->qbytes < QUEUE_CAP) {
        struct perf_event_header h;
        ring_copy(r, tail, &h, sizeof h);
        if (tail + h.size > head) break; /* not possible: the kernel publishes whole records */
        if (h.size < sizeof h + 24) { /* too short for a sample_id: skip (all if size 0) */
            tail += h.size ? h.size : head - tail;
            continue;
        }
        rec_t *x = malloc(sizeof *x - sizeof x->h + h.size);
        if (!x) {
            rc = CW_ENOMEM;
            break;
        }
        ring_copy(r, tail, &x->h, h.size);
        tail += h.size;
        const uint8_t *base = (const uint8_t *)&x->h;
        if (h.type == PERF_RECORD_SAMPLE) memcpy(&x->ts, base + 8 + 16, 8);
        else memcpy(&x->ts, base + h.size - 16, 8);
        if (rec_pid(x) == s->self && h.type != PERF_RECORD_LOST) { /* our own work */
            free(x);
            continue;
        }
        x->seq = s->seq++;
        s->qbytes += h.size;
        if (s->qn == s->qcap) {
            size_t c = s->qcap ? s->qcap * 2 : 4096;
            rec_t **q = realloc(s->q, c * sizeof *q);
            if (!q) {
                free(x);
                rc = CW_ENOMEM;
                break;
            }
            s->q = q;
            s->qcap = c;
        }
        s->q[s->qn++] = x;
    }
    __atomic_store_n(&mp->data_tail, tail, __ATOMIC_RELEASE);
    return rc;
}

static int rec_cmp(const void *a, const void *b)
{
    const rec_t *x = *(rec_t *const *)a, *y = *(rec_t *const *)b;
    if (x->ts != y->ts) return x->ts < y->ts ? -1 : 1;
    return x->seq < y->seq ? -1 : x->seq > y->seq;
}

static int drain_all(perf_src_t *s);

/* After lost records: every process is read again and corrected. */
static int resync_all(perf_src_t *s, int64_t ts)
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
        proc_t *p = pmap_get(&s->procs, pids[i]);
        if (!p || p->alias || p->fork_parent) continue;
        rc = proc_snapshot(s, p, ts, s->st_resync, false, &s->drift);
        if (rc == CW_ENOENT) rc = proc_exit(s, p, ts); /* its exit was lost */
        if (!rc) rc = drain_all(s); /* reading /proc is slow: keep the rings empty */
    }
    free(pids);
    /* Processes whose fork was lost. */
    DIR *dir = opendir("/proc");
    struct dirent *de;
    while (!rc && dir && (de = readdir(dir))) {
        char *endp;
        unsigned long pid = strtoul(de->d_name, &endp, 10);
        if (*endp || pid == 0 || pid == s->self || pmap_get(&s->procs, (uint32_t)pid)) continue;
        proc_adopt(s, (uint32_t)pid, ts, s->st_resync, false);
        rc = s->err;
    }
    if (dir) closedir(dir);
    CW_LOGW("perf: %llu records lost so far; processes resynchronised from smaps, %llu bytes "
            "corrected",
            (unsigned long long)s->lost, (unsigned long long)(s->drift - before));
    if (s->sink->counters) s->sink->counters(s->sink->ctx, s->seen, s->lost, (int64_t)s->drift);
    return rc;
}

static int drain_all(perf_src_t *s)
{
    int rc = 0;
    for (size_t i = 0; !rc && i < s->ev.nrings; i++) rc = drain(s, &s->ev.rings[i]);
    return rc;
}

/* Processes queued records older than horizon (all when horizon is max).
 * Returns to the caller once per pass whatever the load, so stop() and
 * ticks are seen. */
static int process_until(perf_src_t *s, int64_t horizon)
{
    int rc = 0;
    if (s->qn == 0) return 0;
    qsort(s->q, s->qn, sizeof *s->q, rec_cmp);
    size_t i = 0, sorted = s->qn;
    int64_t last_drain = mono_now();
    while (!rc && i < sorted && s->q[i]->ts < horizon) {
        rc = process_rec(s, s->q[i]);
        if (!rc) rc = s->err;
        s->qbytes -= s->q[i]->h.size;
        free(s->q[i++]);
        /* Unwinding a burst can take a while: keep the kernel's rings from
         * overflowing by moving their records to the queue (they are newer
         * than everything sorted, and wait for the next pass). */
        if (!rc && (i & 63) == 0 && mono_now() - last_drain > 5000000) {
            rc = drain_all(s);
            last_drain = mono_now();
        }
    }
    memmove(s->q, s->q + i, (s->qn - i) * sizeof *s->q);
    s->qn -= i;
    return rc;
}

/* ---- the rundown ------------------------------------------------------- */

static int rundown(perf_src_t *s, int64_t ts)
{
    DIR *dir = opendir("/proc");
    if (!dir) return CW_EIO;
    struct dirent *de;
    size_t nproc = 0;
    while ((de = readdir(dir))) {
        char *endp;
        unsigned long pid = strtoul(de->d_name, &endp, 10);
        if (*endp || pid == 0 || pid == s->self) continue;
        if (proc_adopt(s, (uint32_t)pid, ts, s->st_before, true)) nproc++;
        if (!s->err) s->err = drain_all(s); /* reading /proc is slow: keep the rings empty */
        if (s->err) break;
    }
    closedir(dir);
    CW_LOGI("perf: rundown loaded %zu processes", nproc);
    return s->err;
}

/* ---- the source ops ---------------------------------------------------- */

static int perf_open_src(void **impl, const char *arg, cw_stacks_t *stacks, cw_diag_t *d)
{
    (void)arg;
    perf_src_t *s = calloc(1, sizeof *s);
    if (!s) return CW_ENOMEM;
    s->pipefd[0] = s->pipefd[1] = -1;
    s->stacks = stacks;
    char note[256];
    /* Rings: 64 MiB in all, 2 to 16 MiB per CPU (a power of two). A CPU
     * making 50,000 stack samples a second fills 16 MiB in 40 ms. */
    long ncpu = sysconf(_SC_NPROCESSORS_CONF);
    size_t ring = 16u << 20;
    while (ring > (2u << 20) && ring * (size_t)(ncpu > 0 ? ncpu : 1) > (64u << 20)) ring /= 2;
    int rc = cw__events_open(&s->ev, ring, STACK_BYTES, d, note, sizeof note);
    if (rc) goto fail;
    if (note[0]) CW_LOGW("perf: %s", note);
    if ((rc = cw__unwinder_create(stacks, &s->unw))) goto fail;
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
    s->env = (cw__shadow_env_t){s, shadow_emit, shadow_query, oc == 2};
    s->self = (uint32_t)getpid();
    *impl = s;
    return 0;
fail:
    cw__events_close(&s->ev);
    cw__unwinder_destroy(s->unw);
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
    perf_src_t *s = impl;
    s->sink = sink;
    s->d = d;
    struct timespec rt;
    clock_gettime(CLOCK_REALTIME, &rt);
    int64_t m0 = mono_now();
    s->mono_to_epoch = (int64_t)rt.tv_sec * 1000000000LL + rt.tv_nsec - m0;
    if (cw__events_enable(&s->ev) != 0)
        return cw_diag_set(d, CW_EIO, "enabling the perf events failed: %s", strerror(errno));
    s->t0_epoch = m0 + s->mono_to_epoch;
    int rc = rundown(s, mono_now());
    size_t nfd = s->ev.nrings + 1;
    struct pollfd *pfd = calloc(nfd, sizeof *pfd);
    if (!pfd) rc = CW_ENOMEM;
    for (size_t i = 0; pfd && i < s->ev.nrings; i++) pfd[i] = (struct pollfd){s->ev.rings[i].fd, POLLIN, 0};
    if (pfd) pfd[s->ev.nrings] = (struct pollfd){s->pipefd[0], POLLIN, 0};
    int64_t next_tick = mono_now(), next_resync = 0;
    while (!rc && !atomic_load(&s->stopping)) {
        poll(pfd, nfd, 100);
        int64_t t = mono_now();
        rc = drain_all(s);
        if (!rc) rc = process_until(s, t - SLACK_NS);
        /* After a loss, one resync covers every loss of the last second. */
        if (!rc && s->resync_due && t >= next_resync) {
            rc = resync_all(s, s->now_mono);
            next_resync = mono_now() + 1000000000LL;
        }
        if (!rc && s->npend) rc = pend_due(s, t - SLACK_NS);
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
    if (!rc && s->npend) rc = pend_due(s, INT64_MAX);
    if (!rc && s->resync_due) rc = resync_all(s, s->now_mono);
    if (!rc && sink->counters) sink->counters(sink->ctx, s->seen, s->lost, (int64_t)s->drift);
    free(pfd);
    CW_LOGD("perf: %llu records, %llu enters, %llu exits (%llu without enter), %llu applied, "
            "%llu already in a snapshot, %llu of unknown processes",
            (unsigned long long)s->seen, (unsigned long long)s->n_enter,
            (unsigned long long)s->n_exit, (unsigned long long)s->orphans,
            (unsigned long long)s->n_applied, (unsigned long long)s->n_marked,
            (unsigned long long)s->n_unknown);
    if (rc && rc != CW_ENOMEM && rc > -100 && !d->msg[0]) cw_diag_set(d, rc, "perf source: %s", cw_strerror(rc));
    return rc;
}

static void perf_stop(void *impl)
{
    perf_src_t *s = impl;
    atomic_store(&s->stopping, 1);
    ssize_t w = write(s->pipefd[1], "x", 1); /* async-signal-safe */
    (void)w;
}

static void perf_close(void *impl)
{
    perf_src_t *s = impl;
    if (!s) return;
    for (size_t i = 0; i < s->procs.cap; i++)
        if (s->procs.vals[i]) {
            proc_t *p = s->procs.vals[i];
            cw__shadow_free(&p->sh);
            cw__aspace_free(p->as);
            cw__snapshot_free(&p->pend);
            free(p);
        }
    free(s->pend);
    for (size_t i = 0; i < s->thrs.cap; i++)
        if (s->thrs.vals[i]) {
            thr_t *t = s->thrs.vals[i];
            free(t->stk);
            free(t);
        }
    pmap_free(&s->procs);
    pmap_free(&s->thrs);
    pmap_free(&s->newtask);
    for (size_t i = 0; i < s->qn; i++) free(s->q[i]);
    free(s->q);
    cw__events_close(&s->ev);
    cw__unwinder_destroy(s->unw);
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
