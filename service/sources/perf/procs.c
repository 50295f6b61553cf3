/* procs.c - the perf source's process table and the records that change
 * it: fork (with the clone flags of task:task_newtask), exec (a new
 * instance and its image, from a snapshot applied when processing reaches
 * the moment it was read), exit, names, executable mappings; and the
 * syscall samples, each enter paired with its thread's exit and applied
 * to the shadow of the process whose memory it changes; the events all
 * this emits go out through emit_raw (monotonic -> epoch, never
 * backwards), the shadow's too (cw_perf__procs_env). See perf.c for
 * threads and ordering. */
#define _GNU_SOURCE
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "commitwatch/log.h"
#include "sources/perf/perf_types.h"

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

static int shadow_query(void *ctx, uint32_t pid, int64_t call_ts, uint64_t addr, uint64_t len)
{
    cw_perf__t *s = ctx;
    return cw_perf__smaps_query_acct(&s->acct, pid, call_ts, addr, len);
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

void cw_perf__procs_env(cw_perf__t *s, bool overcommit_never)
{
    s->env = (cw_perf__shadow_env_t){s, shadow_emit, shadow_query, overcommit_never};
}

/* ---- the process table ------------------------------------------------ */

static cw_perf__proc_t *proc_new(cw_perf__t *s, uint32_t pid)
{
    cw_perf__proc_t *p = calloc(1, sizeof *p);
    if (!p) return NULL;
    p->pid = pid;
    cw_perf__shadow_init(&p->sh, pid);
    p->as = cw_perf__aspace_new(pid);
    if (!p->as || cw_perf__pmap_put(&s->procs, pid, p)) {
        cw_perf__aspace_free(p->as);
        free(p);
        return NULL;
    }
    return p;
}

static void proc_drop(cw_perf__t *s, cw_perf__proc_t *p)
{
    cw_perf__pmap_del(&s->procs, p->pid);
    cw_perf__snapshot_free(&p->pend);
    cw_perf__shadow_free(&p->sh);
    cw_perf__aspace_free(p->as);
    free(p);
}

/* Ends p's instance (if one was announced) and forgets it. */
int cw_perf__proc_exit(cw_perf__t *s, cw_perf__proc_t *p, int64_t ts)
{
    int rc = p->started ? cw_perf__emit_proc(s, CW_OP_PROCESS_EXIT, p->pid, ts, NULL, NULL) : 0;
    proc_drop(s, p);
    return rc;
}

/* Loads a snapshot into p: shadow synced (pseudo stack for new charges),
 * executable mappings added, mark set. CW_ENOENT if p has no memory. */
int cw_perf__proc_snapshot(cw_perf__t *s, cw_perf__proc_t *p, int64_t ts, uint32_t pseudo,
                           bool rundown, uint64_t *drift)
{
    cw_perf__snapshot_t snap = {0};
    int64_t mark = cw_plat_mono_ns();
    int rc = cw_perf__smaps_read(p->pid, &snap);
    if (rc) return rc;
    p->mark = mark;
    if (p->has_pend) { /* this snapshot is newer */
        cw_perf__snapshot_free(&p->pend);
        p->has_pend = false;
    }
    cw_perf__call_t c = {ts, 0, 0};
    rc = cw_perf__shadow_sync(&p->sh, &s->env, &c, snap.seg, snap.n, snap.brk, pseudo, rundown,
                              drift);
    for (size_t i = 0; !rc && i < snap.nx; i++) {
        const cw_perf__xmap_t *x = &snap.x[i];
        rc = cw_perf__aspace_map(s->unw, p->as, x->start, x->end - x->start, x->pgoff, x->dev,
                                 x->ino, x->path);
    }
    cw_perf__snapshot_free(&snap);
    return rc;
}

/* A process not seen before (rundown, or its fork was missed): announce
 * it and load its memory. NULL when it is gone or has no memory. */
cw_perf__proc_t *cw_perf__proc_adopt(cw_perf__t *s, uint32_t pid, int64_t ts, uint32_t pseudo,
                                     bool rundown)
{
    char cmd[1024];
    cw_perf__proc_t *p = proc_new(s, pid);
    if (!p) {
        s->err = CW_ENOMEM;
        return NULL;
    }
    cw_perf__proc_names(pid, p->name, sizeof p->name, cmd, sizeof cmd);
    /* Read first: a kernel thread or a process already gone is skipped. */
    cw_perf__snapshot_t probe = {0};
    int rc = cw_perf__smaps_read(pid, &probe);
    cw_perf__snapshot_free(&probe);
    if (rc) {
        proc_drop(s, p);
        return NULL;
    }
    p->started = true;
    p->born = ts;
    rc = cw_perf__emit_proc(s, CW_OP_PROCESS_START, pid, ts, p->name[0] ? p->name : "?", cmd);
    if (!rc) {
        uint64_t drift = 0;
        rc = cw_perf__proc_snapshot(s, p, ts, pseudo, rundown, &drift);
        if (rc == CW_ENOENT) rc = 0; /* exited meanwhile: its exit record follows */
        /* It is the image its name and snapshot show: an exec before the
         * snapshot is not one of its (on_comm). */
        p->born = p->mark;
    }
    if (rc) s->err = rc;
    return rc ? NULL : p;
}

/* The process whose memory pid's calls change (a CLONE_VM child shares
 * its parent's), or NULL. */
static cw_perf__proc_t *mem_owner(cw_perf__t *s, uint32_t pid)
{
    cw_perf__proc_t *p = cw_perf__pmap_get(&s->procs, pid);
    if (p && p->alias) {
        cw_perf__proc_t *o = cw_perf__pmap_get(&s->procs, p->alias);
        if (o) return o;
        p->alias = 0; /* the parent is gone: the child keeps what it saw */
    }
    return p;
}

/* An exec snapshot, read when the exec record was processed (or a
 * child's, forked before its parent's was applied: fork_resolve), is
 * applied when processing reaches the time it was read: by then the
 * shadow holds the calls the program made since, with their stacks, and
 * the sync commits only what the kernel made without a call (the image's
 * segments), as `(exec image)`. Never before that time: the snapshot may
 * show a later image than the calls still to come (a shell exec'd three
 * images within 30 ms, and the snapshot read after the first exec showed
 * the last), and a break is relative: the first image's brk() applied
 * over it moved the last image's break, committing the distance between
 * the two heaps (660 GB, when a fork applied it early). Its time becomes
 * the process's mark, as any snapshot's (perf.c, "Snapshots and the
 * mark"). */
static int pend_apply(cw_perf__t *s, cw_perf__proc_t *p)
{
    p->has_pend = false;
    if (p->pend_at > p->mark) p->mark = p->pend_at;
    cw_perf__call_t c = {p->pend_at, 0, 0};
    uint64_t drift = 0;
    int rc = cw_perf__shadow_sync(&p->sh, &s->env, &c, p->pend.seg, p->pend.n, p->pend.brk,
                                  s->st_exec, false, &drift);
    cw_perf__snapshot_free(&p->pend);
    return rc;
}

/* Reads p's smaps now, to be applied when processing reaches now
 * (pend_apply), in place of a snapshot waiting already. 0, CW_ENOENT
 * (gone), CW_EPERM or CW_ENOMEM. */
static int pend_read(cw_perf__t *s, cw_perf__proc_t *p)
{
    if (p->has_pend) cw_perf__snapshot_free(&p->pend);
    p->has_pend = false;
    int64_t at = cw_plat_mono_ns();
    int rc = cw_perf__smaps_read(p->pid, &p->pend);
    if (rc) return rc;
    if (CW_RESERVE(s->pend, s->pend_cap, s->npend + 1)) return CW_ENOMEM;
    s->pend[s->npend++] = p->pid;
    p->has_pend = true;
    p->pend_at = at;
    if (s->npend == 1 || at < s->pend_min) s->pend_min = at;
    return 0;
}

/* Applies the pending snapshots read at or before upto. */
int cw_perf__pend_due(cw_perf__t *s, int64_t upto)
{
    size_t w = 0;
    int rc = 0;
    s->pend_min = INT64_MAX;
    for (size_t i = 0; i < s->npend; i++) {
        cw_perf__proc_t *p = cw_perf__pmap_get(&s->procs, s->pend[i]);
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
static int fork_resolve(cw_perf__t *s, cw_perf__proc_t *p, bool shares_vm, int64_t ts)
{
    uint32_t parent = p->fork_parent;
    p->fork_parent = 0;
    cw_perf__proc_t *pp = mem_owner(s, parent);
    if (!pp) { /* parent unknown: read the child itself */
        uint64_t drift = 0;
        int rc = cw_perf__proc_snapshot(s, p, ts, s->st_resync, false, &drift);
        return rc == CW_ENOENT ? 0 : rc;
    }
    if (shares_vm) {
        p->alias = pp->pid;
        return 0;
    }
    int rc = cw_perf__shadow_copy(&p->sh, &pp->sh);
    if (!rc) rc = cw_perf__aspace_copy(p->as, pp->as);
    if (rc) return rc;
    cw_perf__call_t c = {ts, p->pid, 0};
    rc = cw_perf__shadow_commit_all(&p->sh, &s->env, &c, s->st_fork);
    /* The parent's exec snapshot waits for its time (pend_apply), so the
     * image the kernel made, which only it shows, is in neither shadow
     * yet: the child's own memory is read now and applied at its time,
     * as an exec's. Gone already (a command substitution's subshell
     * lives a few ms) or not readable, the child has the copy alone. */
    if (rc || !pp->has_pend) return rc;
    rc = pend_read(s, p);
    if (rc == CW_ENOMEM) return rc;
    if (rc) s->n_fork_unread++;
    return 0;
}

static cw_perf__proc_t *proc_ready(cw_perf__t *s, uint32_t pid, int64_t ts)
{
    cw_perf__proc_t *p = cw_perf__pmap_get(&s->procs, pid);
    if (p && p->fork_parent) {
        int rc = fork_resolve(s, p, false, ts);
        if (rc) s->err = rc;
    }
    return p;
}

/* Does task id (a process or a thread) exist? kill(id, 0) finds a
 * thread's id too; EPERM means it exists. */
static bool task_exists(uint32_t id)
{
    return kill((pid_t)id, 0) == 0 || errno != ESRCH;
}

/* Notes whether task id exists now in *gone; true when it was missing at
 * the previous sweep too. */
static bool gone_twice(uint32_t id, bool *gone)
{
    bool was = *gone;
    *gone = !task_exists(id);
    return was && *gone;
}

int cw_perf__sweep(cw_perf__t *s, int64_t ts, size_t *ended, size_t *freed)
{
    *ended = *freed = 0;
    /* Collected first: the tables change while walking them. */
    size_t n = 0, cap = s->thrs.n > s->procs.n ? s->thrs.n : s->procs.n;
    uint32_t *ids = malloc((cap + 1) * sizeof *ids);
    if (!ids) return CW_ENOMEM;
    for (size_t i = 0; i < s->thrs.cap; i++) {
        cw_perf__thr_t *t = s->thrs.vals[i];
        if (t && gone_twice(t->tid, &t->gone)) ids[n++] = t->tid;
    }
    for (size_t i = 0; i < n; i++) {
        cw_perf__thr_t *t = cw_perf__pmap_get(&s->thrs, ids[i]);
        cw_perf__pmap_del(&s->thrs, ids[i]);
        free(t->stk);
        free(t);
    }
    *freed = n;
    n = 0;
    for (size_t i = 0; i < s->procs.cap; i++) {
        cw_perf__proc_t *p = s->procs.vals[i];
        if (p && gone_twice(p->pid, &p->gone)) ids[n++] = p->pid;
    }
    int rc = 0;
    for (size_t i = 0; !rc && i < n; i++) {
        cw_perf__proc_t *p = cw_perf__pmap_get(&s->procs, ids[i]);
        if (p) rc = cw_perf__proc_exit(s, p, ts);
    }
    *ended = n;
    free(ids);
    return rc;
}

/* ---- records ---------------------------------------------------------- */

static int on_fork(cw_perf__t *s, const uint32_t *b, int64_t ts)
{
    uint32_t pid = b[0], ppid = b[1], tid = b[2];
    if (pid == ppid || pid != tid) return 0; /* a new thread */
    cw_perf__proc_t *p = cw_perf__pmap_get(&s->procs, pid);
    if (p && p->mark >= ts) return 0; /* the rundown already saw it */
    if (p) {
        int rc = cw_perf__proc_exit(s, p, ts); /* pid reused, its exit not seen */
        if (rc) return rc;
    }
    cw_perf__proc_t *pp = cw_perf__pmap_get(&s->procs, ppid);
    if (!pp) return 0; /* parent unknown: adopted at its first event */
    p = proc_new(s, pid);
    if (!p) return CW_ENOMEM;
    cw_strlcpy(p->name, pp->name, sizeof p->name);
    p->started = true;
    p->fork_parent = ppid;
    p->born = ts;
    int rc = cw_perf__emit_proc(s, CW_OP_PROCESS_START, pid, ts, p->name, NULL);
    if (rc) return rc;
    uintptr_t flags = (uintptr_t)cw_perf__pmap_get(&s->newtask, pid);
    if (flags) {
        cw_perf__pmap_del(&s->newtask, pid);
        return fork_resolve(s, p, ((flags - 1) & K_CLONE_VM) != 0, ts);
    }
    if (s->ev.newtask_id < 0) return fork_resolve(s, p, false, ts);
    return 0;
}

static int on_newtask(cw_perf__t *s, const uint8_t *raw, uint32_t raw_size, int64_t ts)
{
    int32_t child;
    uint64_t flags;
    if ((uint32_t)s->ev.newtask_flags_off + 8 > raw_size) return 0;
    memcpy(&child, raw + s->ev.newtask_pid_off, 4);
    memcpy(&flags, raw + s->ev.newtask_flags_off, 8);
    if (flags & K_CLONE_THREAD) return 0;
    cw_perf__proc_t *p = cw_perf__pmap_get(&s->procs, (uint32_t)child);
    if (p && p->fork_parent) return fork_resolve(s, p, (flags & K_CLONE_VM) != 0, ts);
    if (!p) { /* the fork record may come second */
        if (s->newtask.n > 4096) cw_perf__pmap_free(&s->newtask);
        return cw_perf__pmap_put(&s->newtask, (uint32_t)child, (void *)(uintptr_t)(flags + 1));
    }
    return 0;
}

static int on_exit_rec(cw_perf__t *s, const uint32_t *b, int64_t ts)
{
    uint32_t pid = b[0], tid = b[2];
    cw_perf__thr_t *t = cw_perf__pmap_get(&s->thrs, tid);
    if (t) {
        cw_perf__pmap_del(&s->thrs, tid);
        free(t->stk);
        free(t);
    }
    if (pid != tid) return 0;
    cw_perf__pmap_del(&s->newtask, pid);
    cw_perf__proc_t *p = cw_perf__pmap_get(&s->procs, pid);
    return p ? cw_perf__proc_exit(s, p, ts) : 0;
}

/* An exec of p at ts: its instance (if any) ends, a new one named comm
 * begins, no longer an alias or a fork waiting for its flags (on_comm). */
static int exec_instance(cw_perf__t *s, cw_perf__proc_t *p, const char *comm, int64_t ts)
{
    char cmd[1024], dummy[64];
    int rc = p->started ? cw_perf__emit_proc(s, CW_OP_PROCESS_EXIT, p->pid, ts, NULL, NULL) : 0;
    if (rc) return rc;
    p->alias = p->fork_parent = 0;
    cw_perf__proc_names(p->pid, dummy, sizeof dummy, cmd, sizeof cmd);
    cw_strlcpy(p->name, comm, sizeof p->name);
    p->started = true;
    p->born = ts;
    return cw_perf__emit_proc(s, CW_OP_PROCESS_START, p->pid, ts, p->name, cmd);
}

static int on_comm(cw_perf__t *s, const uint8_t *b, uint16_t misc, int64_t ts)
{
    uint32_t pid, tid;
    memcpy(&pid, b, 4);
    memcpy(&tid, b + 4, 4);
    const char *comm = (const char *)b + 8;
    cw_perf__proc_t *p = cw_perf__pmap_get(&s->procs, pid);
    if (!(misc & PERF_RECORD_MISC_COMM_EXEC)) {
        if (p && pid == tid) cw_strlcpy(p->name, comm, sizeof p->name);
        return 0;
    }
    if (p && p->mark >= ts) {
        /* Its snapshot already shows the new image. An exec after the
         * instance began (a resync's snapshot, or one applied at its time
         * with this record coming after it) still ends it: the next one
         * holds what the snapshot shows, as its image. */
        if (!p->started || ts <= p->born) return 0;
        cw_perf__call_t c = {ts, 0, 0};
        int rc = exec_instance(s, p, comm, ts);
        return rc ? rc : cw_perf__shadow_commit_all(&p->sh, &s->env, &c, s->st_exec);
    }
    if (!p && !(p = proc_new(s, pid))) return CW_ENOMEM;
    /* exec: a new instance with nothing of the old image. */
    int rc = exec_instance(s, p, comm, ts);
    if (rc) return rc;
    cw_perf__shadow_clear(&p->sh);
    cw_perf__aspace_clear(p->as);
    /* The kernel mapped the image without mmap calls: read what it made. */
    rc = pend_read(s, p);
    if (rc) return rc == CW_ENOENT ? 0 : rc; /* gone already: its exit follows */
    /* Its executable mappings now, whichever order the kernel reported the
     * image's mmap2 records and this exec in (the clear above). */
    for (size_t i = 0; i < p->pend.nx && !rc; i++) {
        const cw_perf__xmap_t *x = &p->pend.x[i];
        rc = cw_perf__aspace_map(s->unw, p->as, x->start, x->end - x->start, x->pgoff, x->dev,
                                 x->ino, x->path);
    }
    return rc;
}

static int on_mmap2(cw_perf__t *s, const uint8_t *b)
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
    cw_perf__proc_t *p = mem_owner(s, pid);
    if (!p) return 0;
    uint64_t dev = ((uint64_t)(maj & 0xfffff000u) << 32) | ((uint64_t)(maj & 0xfffu) << 8) |
                   ((uint64_t)(min & 0xffffff00u) << 12) | (min & 0xffu); /* makedev() */
    return cw_perf__aspace_map(s->unw, p->as, addr, len, pgoff, dev, ino, (const char *)b + 64);
}

static bool is_err(uint64_t ret)
{
    return ret >= (uint64_t)-4095;
}

/* A paired syscall: apply it to the owner's shadow. */
static int apply(cw_perf__t *s, cw_perf__thr_t *t, int sc, uint32_t pid, int64_t ts, uint64_t ret)
{
    const uint64_t *a = t->args;
    if (sc != CW__SC_BRK && is_err(ret)) return 0;
    cw_perf__proc_t *p = proc_ready(s, pid, ts);
    if (!p) {
        /* First sight of this process (its fork was lost, or it predates
         * a resync): read it; this call is then in the snapshot. */
        s->n_unknown++;
        cw_perf__proc_adopt(s, pid, ts, s->st_resync, false);
        return s->err;
    }
    cw_perf__proc_t *o = mem_owner(s, pid);
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
    cw_perf__call_t c = {ts, t->tid, 0};
    if (want && t->nregs) {
        int rc = cw_perf__unwind(s->unw, o->as, t->tid, t->regs, t->nregs, t->stk, t->stk_len,
                                 &c.stack_id);
        if (rc) return rc;
    }
    switch (sc) {
    case CW__SC_MMAP:
        return cw_perf__shadow_mmap(&o->sh, &s->env, &c, ret, a[1], a[2], a[3]);
    case CW__SC_MUNMAP:
        cw_perf__aspace_unmap(o->as, a[0], a[0] + CW__PAGE_UP(a[1]));
        return cw_perf__shadow_munmap(&o->sh, &s->env, &c, a[0], a[1]);
    case CW__SC_MREMAP:
        if (ret != a[0]) cw_perf__aspace_unmap(o->as, a[0], a[0] + CW__PAGE_UP(a[1]));
        return cw_perf__shadow_mremap(&o->sh, &s->env, &c, a[0], a[1], a[2], a[3], ret);
    case CW__SC_BRK:
        return cw_perf__shadow_brk(&o->sh, &s->env, &c, a[0], ret);
    default:
        return cw_perf__shadow_mprotect(&o->sh, &s->env, &c, a[0], a[1], a[2]);
    }
}

/* Half of a call of pid at ts was lost (its enter, or its exit). A call
 * in flight when tracing began is in the process's rundown snapshot (its
 * mark is later); any other is counted. The half was lost in a full ring,
 * whose LOST record asks for the resync that corrects the call's effect
 * (asking here too made the soak's daemon resync, and adopt every
 * process, far more often: its files and RSS grew). */
static void unpaired(cw_perf__t *s, uint32_t pid, int64_t ts)
{
    cw_perf__proc_t *p = mem_owner(s, pid);
    if (p && ts <= p->mark) return;
    s->n_unpaired++;
}

static int on_sample(cw_perf__t *s, const uint8_t *b, const uint8_t *end, int64_t ts)
{
    uint32_t pid, tid, raw_size;
    memcpy(&pid, b + 8, 4);
    memcpy(&tid, b + 12, 4);
    const uint8_t *p = b + 24;
    memcpy(&raw_size, p, 4);
    const uint8_t *raw = p + 4;
    p = raw + raw_size;
    if (p > end || raw_size < 24) {
        s->n_malformed++;
        return 0;
    }
    uint16_t type;
    memcpy(&type, raw, 2);
    int id = type;
    if (id == s->ev.newtask_id) return on_newtask(s, raw, raw_size, ts);
    for (int sc = 0; sc < CW__SC_N; sc++) {
        if (id == s->ev.sc_enter_id[sc]) {
            cw_perf__thr_t *t = cw_perf__pmap_get(&s->thrs, tid);
            if (!t) {
                t = calloc(1, sizeof *t);
                if (!t || cw_perf__pmap_put(&s->thrs, tid, t)) {
                    free(t);
                    return CW_ENOMEM;
                }
                t->tid = tid;
                t->sc = -1;
            }
            s->n_enter++;
            if (t->sc >= 0) unpaired(s, pid, ts); /* the exit of its last call was lost */
            t->sc = sc;
            t->ts = ts;
            memcpy(t->args, raw + 16, 6 * 8 <= raw_size - 16 ? 48 : raw_size - 16);
            t->nregs = 0;
            t->stk_len = 0;
            if (sc == CW__SC_MUNMAP) return 0;
            /* REGS_USER: abi, regs; STACK_USER: size, data, dyn_size. */
            uint64_t abi, n = (uint64_t)__builtin_popcountll(cw_perf__unwind_regs_mask());
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
            if (dyn > STACK_BYTES) dyn = STACK_BYTES;
            /* Held only until the exit (apply frees it): a thread costs
             * no stack copy between calls. */
            free(t->stk);
            if (!(t->stk = malloc(dyn ? dyn : 1))) return CW_ENOMEM;
            memcpy(t->stk, p, dyn);
            t->stk_len = dyn;
            return 0;
        }
        if (id == s->ev.sc_exit_id[sc]) {
            cw_perf__thr_t *t = cw_perf__pmap_get(&s->thrs, tid);
            if (!t || t->sc != sc) {
                s->orphans++; /* enter lost, or before tracing began */
                unpaired(s, pid, ts);
                return 0;
            }
            s->n_exit++;
            t->sc = -1;
            uint64_t ret;
            memcpy(&ret, raw + 16, 8);
            int rc = apply(s, t, sc, pid, ts, ret);
            free(t->stk);
            t->stk = NULL;
            t->stk_len = 0;
            return rc;
        }
    }
    return 0;
}

int cw_perf__process_rec(cw_perf__t *s, const cw_perf__rec_t *r)
{
    const uint8_t *b = (const uint8_t *)(&r->h + 1);
    const uint8_t *end = (const uint8_t *)&r->h + r->h.size;
    s->now_mono = r->ts;
    s->seen++;
    if (s->npend && r->ts > s->pend_min) {
        int rc = cw_perf__pend_due(s, r->ts - 1);
        if (rc) return rc;
    }
    switch (r->h.type) {
    case PERF_RECORD_SAMPLE:
        return on_sample(s, b, end, r->ts);
    case PERF_RECORD_FORK:
        return on_fork(s, (const uint32_t *)b, r->ts);
    case PERF_RECORD_EXIT:
        return on_exit_rec(s, (const uint32_t *)b, r->ts);
    case PERF_RECORD_COMM:
        return on_comm(s, b, r->h.misc, r->ts);
    case PERF_RECORD_MMAP2:
        return on_mmap2(s, b);
    case PERF_RECORD_LOST: {
        uint64_t n;
        memcpy(&n, b + 8, 8);
        CW_LOGD("perf: %llu records lost at +%.3f s", (unsigned long long)n,
                (double)(r->ts + s->mono_to_epoch - s->t0_epoch) / 1e9);
        s->lost += n;
        s->resync_due = true;
        return 0;
    }
    default:
        return 0;
    }
}
