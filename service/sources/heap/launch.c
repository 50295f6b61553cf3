/* launch.c - launch mode of the heap drill-down on Linux (heap_launch.h):
 * checks the program, creates the ring (heapring.h) in a memfd the program
 * inherits, starts it with the interposer (LD_PRELOAD, libcwheap.so) and
 * turns the ring's records into heap events for the model (heap.h).
 *
 * Stacks arrive as return addresses, once per thread and stack (a
 * definition; later records name it by index: heapcache.h, kept here per
 * thread by heapstacks.h); they are named here once per definition, while
 * the process lives, by the perf source's symboliser (sources/perf/
 * unwind.c: its address spaces, module symbol tables and frame cache),
 * from the executable mappings of /proc/PID/smaps, read at a process's
 * first event and again when an address falls outside them (a library
 * loaded later). So a heap stack reads like a commit stack:
 * "module!function".
 *
 * DESIGN (threads): the caller's thread does everything (spawn, read,
 * name, apply, reap); a signal handler only sets `stop_asked`. The traced
 * program's threads write the ring; nothing else is shared with them.
 *
 * Memory: the ring (16 MiB by default, mapped by both sides), one address
 * space per traced process (its mapping list), the unwinder's modules and
 * frame cache, the threads' stack tables (heapstacks.h). Released before
 * return; the model's are the model's.
 */
#define _GNU_SOURCE
#include "commitwatch/heap_launch.h"

#include <elf.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <spawn.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <poll.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "commitwatch/common.h"
#include "commitwatch/log.h"
#include "commitwatch/platform.h"
#include "sources/heap/heapring.h"
#include "sources/heap/heapstacks.h"
#include "sources/perf/perf_types.h"

extern char **environ;

#define DEFAULT_SLOTS 262144u /* 16 MiB of 64-byte slots */
#define POLL_NS 1000000        /* the reader's nap when the ring is empty */
/* A drain that took fewer records than this is followed by a nap (POLL_NS)
 * before the next, so a trickle of events is read in batches, at most a
 * thousand times a second, instead of a wake-up per event with the reader
 * never resting (its CPU is another program's on a small machine). The
 * ring (262,144 slots) holds a nap's events up to 200 M a second. */
#define BUSY_BATCH 4096
#define REMAP_GAP_NS 50000000  /* at most one smaps read per process per 50 ms */
#define TORN_WAIT_NS 200000000 /* how long an unpublished slot is waited for at the end */
#define LIB_NAME "libcwheap.so"

static atomic_bool stop_asked;

void cw_heap_launch_stop(void)
{
    atomic_store(&stop_asked, true);
}

/* ---- checks before the start ---- */

/* The program's path: argv0 itself when it has a '/', else its first
 * executable match on PATH. 0, or CW_ENOENT / CW_EPERM with d set. */
static int find_program(const char *argv0, char *out, size_t len, cw_diag_t *d)
{
    struct stat st;
    if (strchr(argv0, '/')) {
        if (stat(argv0, &st) != 0)
            return cw_diag_set(d, CW_ENOENT, "%s: %s", argv0, strerror(errno));
        if (S_ISDIR(st.st_mode) || access(argv0, X_OK) != 0)
            return cw_diag_set(d, CW_EPERM, "%s: not executable (%s)", argv0,
                               S_ISDIR(st.st_mode) ? "a directory" : strerror(errno));
        cw_strlcpy(out, argv0, len);
        return 0;
    }
    const char *path = getenv("PATH");
    if (!path || !*path) path = "/usr/local/bin:/usr/bin:/bin";
    bool seen = false; /* found but not executable */
    for (const char *p = path; *p;) {
        size_t n = strcspn(p, ":");
        int w = snprintf(out, len, "%.*s/%s", (int)n, n ? p : ".", argv0);
        if (w > 0 && (size_t)w < len && stat(out, &st) == 0 && !S_ISDIR(st.st_mode)) {
            if (access(out, X_OK) == 0) return 0;
            seen = true;
        }
        p += n + (p[n] == ':');
    }
    return seen ? cw_diag_set(d, CW_EPERM, "%s: found on PATH but not executable", argv0)
                : cw_diag_set(d, CW_ENOENT, "%s: not found on PATH", argv0);
}

/* Whether the dynamic loader will start the program (so LD_PRELOAD works):
 * an ELF file needs a PT_INTERP and the interposer's class (64-bit); a
 * script is run by its interpreter, checked when it starts (the ring's
 * attached count). 0, or CW_ENOSYS / CW_EIO with d set. */
static int check_loadable(const char *path, cw_diag_t *d)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) return cw_diag_set(d, CW_EIO, "%s: %s", path, strerror(errno));
    Elf64_Ehdr eh;
    int rc = 0;
    ssize_t got = pread(fd, &eh, sizeof eh, 0);
    if (got < (ssize_t)EI_NIDENT || memcmp(eh.e_ident, ELFMAG, SELFMAG) != 0)
        goto out; /* a script */
    if (eh.e_ident[EI_CLASS] != ELFCLASS64 || got < (ssize_t)sizeof eh) {
        rc = cw_diag_set(d, CW_ENOSYS,
                         "%s is a 32-bit program: the heap interposer is 64-bit and cannot be "
                         "loaded into it",
                         path);
        goto out;
    }
    bool interp = false;
    for (unsigned i = 0; i < eh.e_phnum && !interp; i++) {
        Elf64_Phdr ph;
        if (pread(fd, &ph, sizeof ph, (off_t)(eh.e_phoff + (uint64_t)i * eh.e_phentsize)) !=
            (ssize_t)sizeof ph)
            break;
        interp = ph.p_type == PT_INTERP;
    }
    if (!interp)
        rc = cw_diag_set(d, CW_ENOSYS,
                         "%s is statically linked (no dynamic loader): the heap interposer is "
                         "loaded by the dynamic loader (LD_PRELOAD), which a static program does "
                         "not run; trace a dynamically linked build of it",
                         path);
out:
    close(fd);
    return rc;
}

/* The interposer to load. 0, or CW_ENOENT with d set. */
static int find_preload(const char *given, char *out, size_t len, cw_diag_t *d)
{
    const char *env = getenv("CW_HEAP_PRELOAD");
    const char *want = given ? given : (env && *env) ? env : NULL;
    if (want) {
        if (access(want, R_OK) != 0)
            return cw_diag_set(d, CW_ENOENT, "the heap interposer %s: %s", want, strerror(errno));
        if (!realpath(want, out)) cw_strlcpy(out, want, len);
        return 0;
    }
    char exe[PATH_MAX];
    ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
    if (n > 0) {
        exe[n] = 0;
        char *slash = strrchr(exe, '/');
        if (slash) {
            *slash = 0;
            int w = snprintf(out, len, "%s/%s", exe, LIB_NAME);
            if (w > 0 && (size_t)w < len && access(out, R_OK) == 0) return 0;
            /* An installed tree moved elsewhere: PREFIX/bin/commitwatch
             * and PREFIX/lib/commitwatch/libcwheap.so. */
            w = snprintf(out, len, "%s/../lib/commitwatch/%s", exe, LIB_NAME);
            if (w > 0 && (size_t)w < len && access(out, R_OK) == 0) return 0;
        }
    }
    int w = snprintf(out, len, "%s/%s", CW_HEAP_LIBDIR, LIB_NAME);
    if (w > 0 && (size_t)w < len && access(out, R_OK) == 0) return 0;
    return cw_diag_set(d, CW_ENOENT,
                       "the heap interposer (%s) is not beside commitwatch, in its "
                       "../lib/commitwatch, nor in %s: reinstall, or name it in CW_HEAP_PRELOAD",
                       LIB_NAME, CW_HEAP_LIBDIR);
}

/* ---- the program's start ---- */

/* environ with LD_PRELOAD (ours first) and the ring's descriptor; the
 * strings it adds are in extra[2]. NULL on ENOMEM. Freed by the caller
 * (the array and extra's strings; environ's are borrowed). */
static char **child_env(const char *preload, int fd, char *extra[2])
{
    size_t n = 0;
    while (environ[n])
        n++;
    char **env = calloc(n + 3, sizeof *env);
    if (!env) return NULL;
    const char *old = getenv("LD_PRELOAD");
    cw_buf_t b = {0};
    cw_buf_printf(&b, "LD_PRELOAD=%s%s%s", preload, old && *old ? ":" : "", old ? old : "");
    extra[0] = b.p;
    cw_buf_t f = {0};
    cw_buf_printf(&f, "%s=%d", CW_HEAPRING_ENV, fd);
    extra[1] = f.p;
    if (b.failed || f.failed) {
        free(env);
        return NULL;
    }
    size_t k = 0;
    for (size_t i = 0; i < n; i++)
        if (strncmp(environ[i], "LD_PRELOAD=", 11) != 0 &&
            strncmp(environ[i], CW_HEAPRING_ENV "=", sizeof CW_HEAPRING_ENV) != 0)
            env[k++] = environ[i];
    env[k++] = extra[0];
    env[k++] = extra[1];
    env[k] = NULL;
    return env;
}

/* ---- reading ---- */

typedef struct tproc {
    uint32_t pid;
    uint32_t gen; /* bumped when its mappings are read: the stack cache's key */
    cw_perf__aspace_t *as;
    int64_t mapped_ns; /* monotonic, when its mappings were last read */
} tproc_t;

typedef struct reader {
    cw_heapring_t ring;
    cw_stacks_t *stacks;
    cw_heap_model_t *m;
    cw_perf__unwinder_t *unw;
    tproc_t *procs;
    size_t nprocs, cap;
    uint32_t early;          /* the stack of the blocks allocated before the interposer's set-up */
    uint32_t unknown_stack;  /* the stack of an event whose stack index the reader does not hold */
    cw_heapstacks_t *tstacks; /* the threads' stack tables */
    const atomic_bool *stop; /* the caller's own stop flag, or NULL */
    atomic_uint_least64_t *progress; /* events applied, for the caller; or NULL */
    uint64_t applied;
    int64_t snap_every, snap_next; /* periodic snapshots (monotonic ns); 0: none */
    atomic_bool *snap_now;         /* a snapshot asked for now, or NULL */
    uint64_t truncated; /* allocations whose stack had more frames than a record holds */
    cw_heap_account_t mem; /* what this reader adds to heap_traces (memstat.h) */
} reader_t;

/* (Re)reads pid's executable mappings into its address space. */
static int read_maps(reader_t *r, tproc_t *p)
{
    cw_perf__snapshot_t snap = {0};
    p->mapped_ns = cw_plat_mono_ns();
    p->gen++;
    int rc = cw_perf__smaps_read(p->pid, &snap);
    if (rc) return rc == CW_ENOMEM ? rc : 0; /* gone: keep what was read */
    cw_perf__aspace_clear(p->as);
    for (size_t i = 0; i < snap.nx && !rc; i++) {
        const cw_perf__xmap_t *x = &snap.x[i];
        rc = cw_perf__aspace_map(r->unw, p->as, x->start, x->end - x->start, x->pgoff, x->dev,
                                 x->ino, x->path);
    }
    cw_perf__snapshot_free(&snap);
    return rc;
}

/* Names the stack e of p (its interned stack in e->stack_id), unless it
 * was named under p's current mappings; frames outside them have the
 * mappings read again (at most every REMAP_GAP_NS) and are kept as
 * [unknown] until then. */
static int name_stack(reader_t *r, tproc_t *p, cw_heapstk_t *e)
{
    if (e->gen == p->gen && (e->named || cw_plat_mono_ns() - p->mapped_ns < REMAP_GAP_NS))
        return 0;
    uint32_t unmapped;
    int rc = cw_perf__symbolize(r->unw, p->as, e->pc, e->n, &e->stack_id, &unmapped);
    if (!rc && unmapped && cw_plat_mono_ns() - p->mapped_ns >= REMAP_GAP_NS) {
        rc = read_maps(r, p); /* a library loaded since: name the frames again */
        if (!rc) rc = cw_perf__symbolize(r->unw, p->as, e->pc, e->n, &e->stack_id, &unmapped);
    }
    e->gen = p->gen;
    e->named = !rc && !unmapped;
    return rc;
}

/* Announces a process image to the model (a pid seen again begins a new
 * instance: the tracker ends the old one, whose heap the exec dropped)
 * and reads its mappings. */
static int announce(reader_t *r, tproc_t *p, const cw_heapring_rec_t *rec)
{
    char name[256], cmdline[4096];
    int64_t ts = rec->ts;
    cw_perf__proc_names(p->pid, name, sizeof name, cmdline, sizeof cmdline);
    /* A START record names its image itself (the process may be gone by
     * now, its /proc entry with it). */
    if (rec->kind == CW_HEAPREC_START && rec->size && rec->size <= CW_HEAPRING_NAME_MAX &&
        rec->size <= rec->nwords * sizeof *rec->w) {
        memcpy(name, rec->w, (size_t)rec->size);
        name[rec->size] = '\0';
    }
    int rc =
        cw_heap_model_start(r->m, p->pid, ts, name[0] ? name : "?", cmdline[0] ? cmdline : NULL);
    return rc ? rc : read_maps(r, p);
}

/* The traced process pid; *fresh when it was not known before. */
static int proc_of(reader_t *r, uint32_t pid, tproc_t **out, bool *fresh)
{
    *fresh = false;
    for (size_t i = 0; i < r->nprocs; i++)
        if (r->procs[i].pid == pid) {
            *out = &r->procs[i];
            return 0;
        }
    if (CW_RESERVE(r->procs, r->cap, r->nprocs + 1)) return CW_ENOMEM;
    tproc_t *p = &r->procs[r->nprocs];
    *p = (tproc_t){.pid = pid, .as = cw_perf__aspace_new(pid)};
    if (!p->as) return CW_ENOMEM;
    r->nprocs++;
    *out = p;
    *fresh = true;
    return 0;
}

#ifdef CW_HEAP_EV_DUMP
/* Bench builds only (bench/heap_reader.sh): every event the model is
 * given, appended as cw_heap_ev_t bytes to the file $CW_HEAP_EV_DUMP
 * names, for bench_heap_layer --trace to apply again. Reader thread. */
static void dump_ev(const cw_heap_ev_t *ev)
{
    static FILE *f;
    static bool tried;
    if (!tried) {
        tried = true;
        const char *path = getenv("CW_HEAP_EV_DUMP");
        if (path && !(f = fopen(path, "wb")))
            cw_log(CW_LOG_WARN, "CW_HEAP_EV_DUMP: %s: cannot write", path);
    }
    /* Buffered; exit() flushes it. */
    if (f && fwrite(ev, sizeof *ev, 1, f) != 1) {
        cw_log(CW_LOG_WARN, "CW_HEAP_EV_DUMP: write failed: events from here on are not in it");
        fclose(f);
        f = NULL;
    }
}
#else
#define dump_ev(ev) ((void)(ev))
#endif

static int apply_rec(reader_t *r, const cw_heapring_rec_t *rec)
{
    cw_heapstk_t *e;
    bool unknown;
    int rc = cw_heapstacks_take(r->tstacks, rec, &e, &unknown);
    if (rc || rec->kind == CW_HEAPREC_NONE || rec->kind > CW_HEAPREC_START) return rc;
    tproc_t *p;
    bool fresh;
    rc = proc_of(r, rec->pid, &p, &fresh);
    if (!rc && (fresh || rec->kind == CW_HEAPREC_START)) rc = announce(r, p, rec);
    if (rc || rec->kind == CW_HEAPREC_START) return rc;
    cw_heap_ev_t ev = {.ts = rec->ts,
                       .kind = (cw_heap_kind_t)rec->kind,
                       .pid = rec->pid,
                       .tid = rec->tid,
                       .addr = rec->addr,
                       .size = rec->size,
                       .old_addr = rec->old_addr};
    if (e) {
        if (e->truncated) r->truncated++;
        rc = name_stack(r, p, e);
        if (rc) return rc;
        ev.stack_id = e->stack_id;
    } else if (unknown) {
        ev.stack_id = r->unknown_stack; /* counted: cw_heapstacks_unknown */
    } else if (rec->kind != CW_HEAPREC_FREE) {
        ev.stack_id = r->early; /* allocated before the interposer could unwind */
    }
    dump_ev(&ev);
    return cw_heap_model_apply(r->m, &ev);
}

/* Applies what is published now, at most a ring's worth (a program that
 * writes as fast as it is read must not keep the caller from its checks:
 * the program's end, the duration, a stop); *got counts it. */
static int drain(reader_t *r, uint64_t *got)
{
    cw_heapring_rec_t rec;
    uint64_t n = 0, most = r->ring.h->nslots;
    int rc = 0;
    while (!rc && n < most && cw_heapring_next(&r->ring, &rec)) {
        rc = apply_rec(r, &rec);
        if (!rc) n++;
    }
    *got += n;
    r->applied += n;
    if (r->progress && n) atomic_store(r->progress, r->applied);
    if (n) cw_heap_account(&r->mem, r->m, r->stacks, cw_plat_mono_ns());
    return rc;
}

/* After the writers stop: what they published, then the slots they
 * claimed and never published (a writer killed mid-event), skipped after
 * a short wait. */
static int finish_ring(reader_t *r)
{
    int64_t since = cw_plat_mono_ns();
    for (;;) {
        uint64_t got = 0;
        int rc = drain(r, &got);
        if (rc) return rc;
        if (cw_heapring_pending(&r->ring) == 0) return 0;
        if (got == r->ring.h->nslots) continue; /* a full drain: more to read */
        if (cw_plat_mono_ns() - since < TORN_WAIT_NS) {
            cw_plat_sleep_ns(POLL_NS);
            continue;
        }
        cw_heapring_skip(&r->ring);
    }
}

static void reader_free(reader_t *r)
{
    for (size_t i = 0; i < r->nprocs; i++)
        cw_perf__aspace_free(r->procs[i].as);
    free(r->procs);
    cw_heapstacks_destroy(r->tstacks);
    cw_perf__unwinder_destroy(r->unw);
}

/* Whether the process watched by pidfd (not our child: attach mode) has
 * ended; without a pidfd (a kernel before 5.3), whether pid is gone. */
static bool ended(int pidfd, uint32_t pid)
{
    if (pidfd < 0) return kill((pid_t)pid, 0) != 0 && errno == ESRCH;
    struct pollfd p = {.fd = pidfd, .events = POLLIN};
    return poll(&p, 1, 0) > 0;
}

/* The snapshots due after what was read: one asked for now, or the
 * periodic one (the next is a period later, skipping periods the reader
 * was behind for). */
static int snapshots(reader_t *r)
{
    bool now = r->snap_now && atomic_exchange(r->snap_now, false);
    int64_t t = cw_plat_mono_ns();
    if (r->snap_every && t >= r->snap_next) {
        now = true;
        while (r->snap_next <= t)
            r->snap_next += r->snap_every;
    }
    return now ? cw_heap_model_snapshot(r->m, cw_plat_wall_ns()) : 0;
}

/* Reads until the process ends (child: ours, reaped; else pid, watched
 * through pidfd), the deadline passes or a stop is asked. */
static int read_loop(reader_t *r, pid_t child, uint32_t pid, int pidfd, int64_t deadline,
                     cw_heap_launch_result_t *res)
{
    for (;;) {
        uint64_t got = 0;
        int rc = drain(r, &got);
        if (rc) return rc;
        int st;
        if (child > 0 && waitpid(child, &st, WNOHANG) == child) {
            res->exited = 1;
            res->exit_status = WIFEXITED(st) ? WEXITSTATUS(st) : 0;
            res->signal = WIFSIGNALED(st) ? WTERMSIG(st) : 0;
            return 0;
        }
        if (child <= 0 && ended(pidfd, pid)) {
            res->exited = 1; /* not ours: its status is its parent's to read */
            return drain(r, &got);
        }
        if ((rc = snapshots(r))) return rc;
        if (atomic_load(&stop_asked) || (r->stop && atomic_load(r->stop)) ||
            (deadline && cw_plat_mono_ns() >= deadline))
            return 0;
        if (got < BUSY_BATCH) cw_plat_sleep_ns(POLL_NS);
    }
}

/* Copies the interposer at lib to a new file named from tmpl (mkstemps,
 * readable by every user: the traced process may run as another). 0, or
 * CW_EIO with d set (nothing left behind). */
static int copy_lib(const char *lib, char *tmpl, cw_diag_t *d)
{
    int out = mkstemps(tmpl, 3), in = open(lib, O_RDONLY | O_CLOEXEC);
    bool ok = out >= 0 && in >= 0 && fchmod(out, 0644) == 0;
    char buf[65536];
    ssize_t n = 0;
    while (ok && (n = read(in, buf, sizeof buf)) > 0)
        ok = write(out, buf, (size_t)n) == n;
    ok = ok && n == 0;
    int e = errno;
    if (in >= 0) close(in);
    if (out >= 0 && close(out) != 0) ok = false;
    if (ok) return 0;
    if (out >= 0) unlink(tmpl);
    return cw_diag_set(d, CW_EIO, "cannot copy the heap interposer %s to %s: %s", lib, tmpl,
                       strerror(e));
}

/* Where the copy of the interposer goes: a folder the traced process sees
 * too. The service's unit gives it /run/commitwatch (RUNTIME_DIRECTORY;
 * its /tmp is private), else /tmp. */
static void copy_path(char *out, size_t n)
{
    const char *dir = getenv("RUNTIME_DIRECTORY");
    size_t len = dir && dir[0] == '/' ? strcspn(dir, ":") : 0; /* the first of a list */
    if (!len || len > n - 32) {
        dir = "/tmp";
        len = 4;
    }
    snprintf(out, n, "%.*s/commitwatch-heap-XXXXXX.so", (int)len, dir);
}

/* The bound on loading the interposer into a running process (stopping a
 * thread, dlopen, the constructor's hand-over and GOT rewrite). */
#define ATTACH_TIMEOUT_NS (10 * CW_NS_PER_S)

/* Attach mode: the interposer is loaded into the running process pid
 * (cw_plat_inject_library), takes the ring's descriptor from us while its
 * constructor runs, and rewrites the GOT slots of the allocation functions
 * in every object the process has loaded (platform/posix/intarget/got.h);
 * its answer is how many it rewrote. Tracing ends with the process or at
 * the deadline: the ring is closed, and the interposer, seeing it closed,
 * puts the slots back. Blocks allocated before the attach are unknown to
 * the model: their frees are counted as such (heap.h, unknown_frees). */
static int attach_pid(const cw_heap_launch_args_t *a, reader_t *r, int fd, const char *lib,
                      cw_heap_launch_result_t *res, bool *traced, cw_diag_t *d)
{
    *traced = false;
    int pidfd = (int)syscall(SYS_pidfd_open, (pid_t)a->pid, 0);
    if (pidfd < 0 && errno == ESRCH) return cw_diag_set(d, CW_ENOENT, "no process %u", a->pid);
    res->start_ns = cw_plat_wall_ns();
    /* A copy of the interposer under a name of its own: a process keeps a
     * library it loaded (no dlclose under running threads), and a second
     * dlopen of the same file would run no constructor, so each attach
     * loads its own copy (unlinked once loaded; the mapping stays). */
    char copy[PATH_MAX];
    copy_path(copy, sizeof copy);
    int rc = copy_lib(lib, copy, d);
    if (rc) {
        if (pidfd >= 0) close(pidfd);
        return rc;
    }
    int64_t hooked = -1;
    rc = cw_plat_inject_library(a->pid, copy, fd, ATTACH_TIMEOUT_NS, &hooked, d);
    unlink(copy);
    if (!rc && hooked < 0)
        rc = cw_diag_set(d, CW_EIO,
                         "the heap interposer was loaded into process %u but could not map the "
                         "ring commitwatch gave it",
                         a->pid);
    if (!rc && hooked == 0)
        rc = cw_diag_set(d, CW_ENOSYS,
                         "process %u calls none of the C library's allocation functions through "
                         "its symbol tables (a statically linked allocator?): nothing to trace",
                         a->pid);
    if (!rc) {
        CW_LOGI("heap: attached to process %u (%lld call sites of the allocation functions "
                "rewritten)",
                a->pid, (long long)hooked);
        *traced = true;
        if (a->attached) atomic_store(a->attached, true);
        int64_t deadline = a->duration_ns ? cw_plat_mono_ns() + a->duration_ns : 0;
        rc = read_loop(r, 0, a->pid, pidfd, deadline, res);
    }
    if (pidfd >= 0) close(pidfd);
    return rc;
}

int cw_heap_launch(const cw_heap_launch_args_t *a, cw_stacks_t *stacks, cw_heap_model_t *m,
                   cw_heap_launch_result_t *res, cw_diag_t *d)
{
    memset(res, 0, sizeof *res);
    atomic_store(&stop_asked, false);
    char prog[PATH_MAX] = "", lib[PATH_MAX];
    int rc = 0;
    if (!a->pid) {
        if (!a->argv || !a->argv[0]) return cw_diag_set(d, CW_EUSAGE, "no program to run");
        rc = find_program(a->argv[0], prog, sizeof prog, d);
        if (!rc) rc = check_loadable(prog, d);
    }
    if (!rc) rc = find_preload(a->preload, lib, sizeof lib, d);
    if (rc) return rc;

    uint32_t slots = a->ring_slots ? a->ring_slots : DEFAULT_SLOTS;
    size_t bytes = cw_heapring_bytes(slots);
    reader_t r = {.stacks = stacks,
                  .m = m,
                  .stop = a->stop,
                  .progress = a->progress,
                  .snap_every = a->snapshot_every_ns > 0 ? a->snapshot_every_ns : 0,
                  .snap_next =
                      cw_plat_mono_ns() + (a->snapshot_every_ns > 0 ? a->snapshot_every_ns : 0),
                  .snap_now = a->snapshot_now};
    char **env = NULL;
    char *extra[2] = {NULL, NULL};
    void *mem = MAP_FAILED;
    /* Launch: inherited by the program (no close-on-exec), whose
     * interposer maps it; attach: handed over while it loads. */
    int fd = memfd_create("commitwatch-heap", a->pid ? MFD_CLOEXEC : 0);
    if (fd < 0 || ftruncate(fd, (off_t)bytes) != 0) {
        rc = cw_diag_set(d, CW_EIO, "cannot create the heap ring: %s", strerror(errno));
        goto out;
    }
    mem = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (mem == MAP_FAILED) {
        rc = cw_diag_set(d, CW_EIO, "cannot map the heap ring: %s", strerror(errno));
        goto out;
    }
    if ((rc = cw_heapring_init(&r.ring, mem, slots)) != 0) {
        cw_diag_set(d, rc, "the heap ring's size (%u records) is not a power of two", slots);
        goto out;
    }
    rc = CW_ENOMEM;
    if (cw_perf__unwinder_create(stacks, 16, &r.unw) != 0 ||
        (!a->pid && !(env = child_env(lib, fd, extra))) ||
        cw_heapstacks_create(&r.tstacks) != 0)
        goto out;
    static const char *const early[] = {"(heap: allocated before the interposer's set-up)"};
    static const char *const unknown[] = {"(heap: a stack index the reader was not sent)"};
    if (cw_stacks_intern_strings(stacks, early, 1, &r.early) != 0 ||
        cw_stacks_intern_strings(stacks, unknown, 1, &r.unknown_stack) != 0)
        goto out;

    bool traced = true; /* false: attaching failed, d says why */
    if (a->pid) {
        rc = attach_pid(a, &r, fd, lib, res, &traced, d);
    } else {
        res->start_ns = cw_plat_wall_ns();
        pid_t child;
        int e = posix_spawn(&child, prog, NULL, NULL, a->argv, env);
        if (e) {
            rc = cw_diag_set(d, CW_EIO, "%s: cannot start it: %s", prog, strerror(e));
            goto out;
        }
        if (a->attached) atomic_store(a->attached, true);
        int64_t deadline = a->duration_ns ? cw_plat_mono_ns() + a->duration_ns : 0;
        rc = read_loop(&r, child, 0, -1, deadline, res);
    }
    /* A program still running runs on untraced (attach: its interposer
     * puts the GOT slots back when it sees the ring closed). */
    cw_heapring_close(&r.ring);
    if (!traced) goto out;
    if (!rc) rc = finish_ring(&r);
    if (rc) cw_diag_set(d, rc, "reading the heap events: %s", cw_strerror(rc));
    res->attached = atomic_load(&r.ring.h->attached);
    res->losses.dropped = cw_heapring_dropped(&r.ring);
    res->losses.torn = r.ring.torn;
    res->losses.truncated = r.truncated;
    res->losses.unknown_stacks = cw_heapstacks_unknown(r.tstacks);
    if (!rc && !a->pid && res->attached == 0)
        rc = cw_diag_set(d, CW_ENOSYS,
                         "%s ran but the heap interposer was not loaded into it (a set-user-ID "
                         "program ignores LD_PRELOAD; a script's interpreter may be static): "
                         "nothing was traced",
                         prog);
out:
    cw_heap_account_end(&r.mem);
    reader_free(&r);
    if (mem != MAP_FAILED) munmap(mem, bytes);
    if (fd >= 0) close(fd);
    free(extra[0]);
    free(extra[1]);
    free(env);
    return rc;
}
