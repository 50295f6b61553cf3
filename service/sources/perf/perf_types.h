/* perf_types.h - the parts of the Linux perf source, shared between its
 * files (service/sources/perf/): the types, the constants and each
 * file's functions that others call. The ground floor: it includes no
 * file of the folder. Calls run one way: perf.c (the source: rings, merge,
 * rundown, resync) -> procs.c (the process table, emission) -> shadow.c,
 * smaps.c, unwind.c, pmap.c; perf_open.c and recpool.c below perf.c.
 *
 *   shadow.c   the VMA shadow of one process: which pages the kernel
 *              charges to commit (VM_ACCOUNT), kept up by syscall results;
 *              emits commit / decommit / reserve / release. Pure logic, no
 *              OS calls: unit-tested in tests/unit/test_perf_shadow.c.
 *   smaps.c    parsing /proc/PID/smaps into shadow segments (rundown,
 *              exec, resync after loss) and the modules a process maps.
 *   unwind.c   user-stack unwinding (libdw, CFI) and symbolization into
 *              interned stacks; module cache.
 *   perf_open.c  perf_event_open per CPU, ring buffers, user errors.
 *   perf.c     draining the rings, the timestamp merge, resync after
 *              losses, the rundown, the source ops.
 *   procs.c    the process table (fork, exec, exit) and the records:
 *              enter/exit pairing, applying calls to the shadow; the
 *              events emitted (time base, the shadow's callbacks).
 *   pmap.c     small u32 -> pointer maps (the process and thread tables).
 *   recpool.c  the chunks the queued records live in.
 *
 * Thread: everything here runs on the thread that called the source's
 * run() (the core thread); only perf.c's stop() is called from elsewhere. */
#ifndef CW_PERF_TYPES_H
#define CW_PERF_TYPES_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <linux/perf_event.h>

#include "commitwatch/error.h"
#include "commitwatch/event.h"
#include "commitwatch/platform.h"
#include "commitwatch/source.h"
#include "commitwatch/stacks.h"

#define CW__PAGE 4096u
#define CW__PAGE_UP(x) (((x) + (CW__PAGE - 1)) & ~(uint64_t)(CW__PAGE - 1))
#define CW__PAGE_DOWN(x) ((x) & ~(uint64_t)(CW__PAGE - 1))

/* Index of the first of n address ranges whose end is above addr (n if
 * none). The ranges are sorted and do not overlap; each is an element of
 * stride bytes with its uint64_t end at end_off (shadow.c's segments,
 * unwind.c's maps). */
static inline size_t cw_perf__lower_end(const void *ranges, size_t n, size_t stride, size_t end_off,
                                        uint64_t addr)
{
    const unsigned char *b = ranges;
    size_t lo = 0, hi = n;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        uint64_t end;
        memcpy(&end, b + mid * stride + end_off, sizeof end);
        if (end <= addr)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

/* ---- shadow.c ---------------------------------------------------------- */

/* Flags of a shadow segment: the VMA flags that decide the commit charge. */
enum {
    CW__SEG_ACCT = 1u << 0,   /* VM_ACCOUNT: charged (smaps "ac") */
    CW__SEG_WRITE = 1u << 1,  /* VM_WRITE ("wr") */
    CW__SEG_SHARED = 1u << 2, /* VM_SHARED ("sh") */
    CW__SEG_NORES = 1u << 3,  /* VM_NORESERVE ("nr") */
    CW__SEG_HUGE = 1u << 4,   /* VM_HUGETLB ("ht") */
    CW__SEG_ANON = 1u << 5,   /* no file behind it */
    CW__SEG_STACK = 1u << 6,  /* the main thread's [stack]: never counted */
    CW__SEG_HEAP = 1u << 7,   /* the brk area ([heap]) */
};

/* A run of pages with equal flags and one attribution. Segments are kept
 * sorted, never overlapping; they need not be merged (VMA boundaries do
 * not matter to the charge, only per-page flags do). */
typedef struct cw_perf__seg {
    uint64_t start, end; /* page-aligned, start < end */
    uint32_t flags;      /* CW__SEG_* */
    uint32_t stack_id;   /* stack of the call that charged it */
} cw_perf__seg_t;

/* Callbacks the shadow needs from its owner. */
typedef struct cw_perf__shadow_env {
    void *ctx;
    /* One emitted event (pid, ts, tid are filled by the shadow). Nonzero
     * return is passed back to the caller of the shadow function. */
    int (*emit)(void *ctx, const cw_event_t *ev);
    /* After an mprotect removing write from a charged anonymous range
     * (the call of time call_ts): is [addr, addr+len) still charged? 1
     * yes, 0 no, -1 unknown (then the shadow keeps it charged, the common
     * case). May be NULL. */
    int (*query_acct)(void *ctx, uint32_t pid, int64_t call_ts, uint64_t addr, uint64_t len);
    bool overcommit_never; /* vm.overcommit_memory == 2: MAP_NORESERVE ignored */
} cw_perf__shadow_env_t;

typedef struct cw_perf__shadow {
    uint32_t pid;
    cw_perf__seg_t *seg;
    size_t n, cap;
    uint64_t brk;        /* PAGE_UP of the current program break; 0 unknown */
    uint64_t acct_bytes; /* charged bytes outside [stack] (the oracle) */
} cw_perf__shadow_t;

/* What one syscall asked and got. ts/tid/stack_id describe the call. */
typedef struct cw_perf__call {
    int64_t ts;
    uint32_t tid;
    uint32_t stack_id;
} cw_perf__call_t;

void cw_perf__shadow_init(cw_perf__shadow_t *s, uint32_t pid);
void cw_perf__shadow_free(cw_perf__shadow_t *s);
/* Drops every segment without emitting anything. */
void cw_perf__shadow_clear(cw_perf__shadow_t *s);
/* Copies src's segments and brk into dst (cleared first); dst->pid kept.
 * 0 or CW_ENOMEM. */
int cw_perf__shadow_copy(cw_perf__shadow_t *dst, const cw_perf__shadow_t *src);

/* Successful syscalls (the caller drops failed ones). Each returns 0, a
 * CW_E* code, or the emit callback's nonzero return. Addresses and
 * lengths are as passed; the shadow page-rounds as the kernel does. */
/* addr = the address mmap returned; prot/flags as passed. */
int cw_perf__shadow_mmap(cw_perf__shadow_t *s, const cw_perf__shadow_env_t *env,
                         const cw_perf__call_t *c, uint64_t addr, uint64_t len, uint64_t prot,
                         uint64_t flags);
int cw_perf__shadow_munmap(cw_perf__shadow_t *s, const cw_perf__shadow_env_t *env,
                           const cw_perf__call_t *c, uint64_t addr, uint64_t len);
int cw_perf__shadow_mprotect(cw_perf__shadow_t *s, const cw_perf__shadow_env_t *env,
                             const cw_perf__call_t *c, uint64_t addr, uint64_t len, uint64_t prot);
/* old_addr/old_len/new_len/flags as passed, result = the new address. */
int cw_perf__shadow_mremap(cw_perf__shadow_t *s, const cw_perf__shadow_env_t *env,
                           const cw_perf__call_t *c, uint64_t old_addr, uint64_t old_len,
                           uint64_t new_len, uint64_t flags, uint64_t result);
/* arg = the requested break (0 = query), result = the break returned. */
int cw_perf__shadow_brk(cw_perf__shadow_t *s, const cw_perf__shadow_env_t *env,
                        const cw_perf__call_t *c, uint64_t arg, uint64_t result);

/* Makes the shadow equal to segs[0..n) (sorted, e.g. from smaps): pages
 * charged now but not before are committed with pseudo_stack (rundown
 * flag as given), pages charged before but not now are decommitted;
 * pages charged in both keep their attribution. brk is set when nonzero.
 * *drift gets the bytes corrected (added + removed). 0 or an error. */
int cw_perf__shadow_sync(cw_perf__shadow_t *s, const cw_perf__shadow_env_t *env,
                         const cw_perf__call_t *c, const cw_perf__seg_t *segs, size_t n,
                         uint64_t brk, uint32_t pseudo_stack, bool rundown, uint64_t *drift);

/* Commits every charged segment again (a forked child that starts with its
 * parent's memory), attributed to stack_id. */
int cw_perf__shadow_commit_all(cw_perf__shadow_t *s, const cw_perf__shadow_env_t *env,
                               const cw_perf__call_t *c, uint32_t stack_id);

/* ---- smaps.c ----------------------------------------------------------- */

/* An executable file mapping (for unwinding and symbols). */
typedef struct cw_perf__xmap {
    uint64_t start, end, pgoff;
    uint64_t dev, ino; /* makedev(major, minor), inode */
    char *path;        /* owned */
} cw_perf__xmap_t;

/* What /proc/PID/smaps said at one instant. */
typedef struct cw_perf__snapshot {
    cw_perf__seg_t *seg; /* every VMA, flags from perms + VmFlags */
    size_t n, cap;
    cw_perf__xmap_t *x; /* executable file mappings */
    size_t nx, xcap;
    uint64_t brk; /* PAGE_UP of the break: [heap] end, else start_brk; 0 unknown */
} cw_perf__snapshot_t;

/* Reads /proc/PID/smaps (and the start of the break from /proc/PID/stat).
 * 0; CW_ENOENT when the process is gone or has no memory (kernel thread,
 * zombie); CW_EPERM; CW_ENOMEM. snap is reset first; free with
 * cw_perf__snapshot_free(). */
int cw_perf__smaps_read(uint32_t pid, cw_perf__snapshot_t *snap);
void cw_perf__snapshot_free(cw_perf__snapshot_t *snap);
/* The charge queries' smaps reads, kept for the next queries: an answer
 * read after a call is as good for it as one read later (both see the
 * call done, and whatever came after it), so a read serves every query of
 * its process about a call made before the read began and a range it
 * covers. A few processes (the soak's churners: hundreds of queries a
 * second), the least recently read replaced. Used by the perf thread only. */
#define CW_PERF__ACCT_READS 4
typedef struct cw_perf__acct_cache {
    struct {
        uint32_t pid;
        int64_t at;    /* monotonic ns when the read began; 0: empty */
        uint64_t upto; /* VMAs starting below it were read */
        cw_perf__snapshot_t snap;
    } e[CW_PERF__ACCT_READS];
    uint64_t queries, reads;
} cw_perf__acct_cache_t;

/* Is [addr, addr+len) of pid charged now, after its call of time
 * call_ts (monotonic ns)? 1, 0, or -1 (cannot tell). */
int cw_perf__smaps_query_acct(cw_perf__acct_cache_t *c, uint32_t pid, int64_t call_ts,
                              uint64_t addr, uint64_t len);
void cw_perf__acct_cache_free(cw_perf__acct_cache_t *c);
/* comm (name) and the command line (NULs as spaces) of pid; "" if gone. */
void cw_perf__proc_names(uint32_t pid, char *name, size_t nsize, char *cmdline, size_t csize);

/* ---- unwind.c ---------------------------------------------------------- */

typedef struct cw_perf__unwinder cw_perf__unwinder_t;
typedef struct cw_perf__aspace cw_perf__aspace_t; /* one process's executable mappings */

/* stacks borrowed (the source's interner); at most max_live address
 * spaces keep their libdw state between samples. 0 or CW_ENOMEM. */
int cw_perf__unwinder_create(cw_stacks_t *stacks, size_t max_live, cw_perf__unwinder_t **out);
/* Bytes the unwinder's own tables hold (libdw's not counted), of one
 * address space's mapping list, and the address spaces with live libdw
 * state (at most max_live). */
size_t cw_perf__unwinder_bytes(const cw_perf__unwinder_t *u);
size_t cw_perf__aspace_bytes(const cw_perf__aspace_t *as); /* 0 for NULL */
size_t cw_perf__unwinder_live(const cw_perf__unwinder_t *u);
void cw_perf__unwinder_destroy(cw_perf__unwinder_t *u); /* accepts NULL */

cw_perf__aspace_t *cw_perf__aspace_new(uint32_t pid); /* NULL on ENOMEM */
void cw_perf__aspace_free(cw_perf__aspace_t *as);     /* accepts NULL */
/* An executable file mapping appeared (mmap2 record, smaps); path copied. */
int cw_perf__aspace_map(cw_perf__unwinder_t *u, cw_perf__aspace_t *as, uint64_t start, uint64_t len,
                        uint64_t pgoff, uint64_t dev, uint64_t ino, const char *path);
/* [a, b) unmapped or replaced. */
void cw_perf__aspace_unmap(cw_perf__aspace_t *as, uint64_t a, uint64_t b);
void cw_perf__aspace_clear(cw_perf__aspace_t *as);
int cw_perf__aspace_copy(cw_perf__aspace_t *dst, const cw_perf__aspace_t *src);

/* The user registers a sample carries (PERF_SAMPLE_REGS_USER). */
uint64_t cw_perf__unwind_regs_mask(void);
/* Unwinds one sample: regs in the order of cw_perf__unwind_regs_mask() bits,
 * stack = the bytes from the user stack pointer up. *stack_id gets the
 * interned stack, outermost caller first (0 if nothing could be read).
 * Never fails for bad input; CW_ENOMEM only. */
int cw_perf__unwind(cw_perf__unwinder_t *u, cw_perf__aspace_t *as, uint32_t tid,
                    const uint64_t *regs, uint32_t nregs, const uint8_t *stack, uint64_t stack_size,
                    uint32_t *stack_id);

/* Names return addresses pc[0..n) of as (innermost first, as a heap
 * interposer's backtrace gives them; at most 96 kept) and interns them as
 * a stack, outermost first, into *stack_id. *unmapped counts the
 * addresses in no mapping of as (its mappings may need reading again).
 * CW_ENOMEM only. */
int cw_perf__symbolize(cw_perf__unwinder_t *u, cw_perf__aspace_t *as, const uint64_t *pc,
                       uint32_t n, uint32_t *stack_id, uint32_t *unmapped);

/* ---- perf_open.c: events and rings -------------------------------------- */

/* The syscalls followed; enter and exit tracepoints of each. */
enum {
    CW__SC_MMAP,
    CW__SC_MUNMAP,
    CW__SC_MREMAP,
    CW__SC_BRK,
    CW__SC_MPROTECT,
    CW__SC_PKEY_MPROTECT,
    CW__SC_N
};

typedef struct cw_perf__ring {
    int fd; /* the CPU's dummy event, which owns the ring */
    void *base;
    size_t data_size; /* power of two */
    /* Set by the last drain (perf.c): records were left in the ring (the
     * queue was at its cap); next_ts is the first one's timestamp. */
    bool cut;
    int64_t next_ts;
    /* During a drain: the head read when it began, and whether the ring
     * has a record up to it (next_ts is then its time). */
    uint64_t head;
    bool ready;
    uint64_t malformed; /* records too short to read, skipped (perf.c, ring_peek) */
} cw_perf__ring_t;

typedef struct cw_perf__events {
    int sc_enter_id[CW__SC_N], sc_exit_id[CW__SC_N];    /* tracepoint ids, -1 if absent */
    int newtask_id, newtask_pid_off, newtask_flags_off; /* task:task_newtask, -1 if absent */
    int *fds;                                           /* every event fd */
    size_t nfds, fdcap;
    cw_perf__ring_t *rings; /* one per CPU */
    size_t nrings;
    uint32_t stack_bytes; /* PERF_SAMPLE_STACK_USER size on enter events */
    char tracefs[256];
} cw_perf__events_t;

/* Finds tracefs (mounting it when root and it is not), checks privileges,
 * opens the events on every CPU, disabled, with one ring per CPU.
 * 0, or CW_EPERM / CW_ENOSYS / CW_EIO / CW_ENOMEM with d saying what to
 * do. note gets a line to log (e.g. "mounted tracefs at ..."), or "". */
int cw_perf__events_open(cw_perf__events_t *e, size_t ring_bytes, uint32_t stack_bytes,
                         cw_diag_t *d, char *note, size_t note_size);
int cw_perf__events_enable(cw_perf__events_t *e);
void cw_perf__events_close(cw_perf__events_t *e);

/* ---- perf.c and procs.c: the source's state ----------------------------- */

#define STACK_BYTES 8192u     /* user stack copied per sample */
/* Defaults of the caps (config keys perf_ring_size, perf_queue_size,
 * perf_unwind_processes; docs/DESIGN.md "Memory"). */
#define RING_TOTAL_DEF (16u << 20) /* all CPUs' rings together */
#define QUEUE_CAP_DEF (8u << 20)   /* bytes of records held: past it the rings overflow */
#define UNWIND_PROCS_DEF 16u       /* processes whose libdw state is kept */
#define REC_MAX 65536u             /* a record's size is 16 bits */
#define SLACK_NS 2000000      /* see DESIGN */
#define K_CLONE_VM 0x100ull
#define K_CLONE_THREAD 0x10000ull
#define K_PROT_EXEC 0x4u

typedef struct rec {
    int64_t ts;
    uint64_t seq;
    struct perf_event_header h; /* followed by the record's body */
} cw_perf__rec_t;

/* ---- recpool.c: the queue's records -------------------------------------- */

/* Records are cut from chunks of CW_PERF__CHUNK_BYTES mapped from the
 * kernel; a chunk whose records are all freed is kept as the one spare or
 * unmapped (recpool.c says why not malloc). */
#define CW_PERF__CHUNK_BYTES (256u << 10)
/* Defined when built with AddressSanitizer (recpool.c poisons the chunks
 * but for live records; test_perf_core checks it). */
#if defined(__has_feature)
#if __has_feature(address_sanitizer)
#define CW_PERF__ASAN 1
#endif
#endif
#if defined(__SANITIZE_ADDRESS__) && !defined(CW_PERF__ASAN)
#define CW_PERF__ASAN 1
#endif
typedef struct cw_perf__chunk cw_perf__chunk_t;
typedef struct cw_perf__recpool {
    cw_perf__chunk_t *cur;   /* records are cut from it */
    cw_perf__chunk_t *spare; /* empty, kept for the next */
    size_t mapped, peak;     /* chunks mapped now, and at most */
} cw_perf__recpool_t;

/* bytes (at most REC_MAX + sizeof(cw_perf__rec_t)) for one record,
 * 16-byte aligned; NULL when no chunk could be mapped. */
cw_perf__rec_t *cw_perf__recpool_alloc(cw_perf__recpool_t *p, size_t bytes);
void cw_perf__recpool_free(cw_perf__recpool_t *p, cw_perf__rec_t *r); /* accepts NULL */
size_t cw_perf__recpool_bytes(const cw_perf__recpool_t *p);           /* mapped */
void cw_perf__recpool_destroy(cw_perf__recpool_t *p);

typedef struct thr {
    uint32_t tid;
    int sc; /* pending enter's syscall, -1 none */
    int64_t ts;
    uint64_t args[6];
    uint32_t nregs;
    uint64_t regs[40];
    uint8_t *stk;
    uint64_t stk_len;
    bool gone; /* the last sweep found no such thread (cw_perf__sweep) */
} cw_perf__thr_t;

typedef struct proc {
    uint32_t pid;
    uint32_t alias;       /* CLONE_VM child: its memory is this pid's */
    uint32_t fork_parent; /* fork seen, clone flags not yet */
    int64_t mark;         /* see DESIGN */
    int64_t born;         /* its instance's process_start (adopted: its snapshot's time) */
    bool started;
    bool gone;     /* the last sweep found no such process (cw_perf__sweep) */
    bool has_pend; /* an exec snapshot waiting for its time (see on_comm) */
    int64_t pend_at;
    cw_perf__snapshot_t pend;
    cw_perf__shadow_t sh;
    cw_perf__aspace_t *as;
    char name[64];
} cw_perf__proc_t;

/* u32 -> pointer, open addressing with backward-shift deletion. */
typedef struct pmap {
    uint32_t *keys;
    void **vals;
    size_t cap, n;
} cw_perf__pmap_t;

typedef struct cw_perf__perf {
    cw_perf__events_t ev;
    cw_stacks_t *stacks;
    cw_perf__unwinder_t *unw;
    cw_perf__pmap_t procs, thrs, newtask; /* newtask: child tid -> clone flags + 1 */
    cw_perf__rec_t **q;
    cw_perf__recpool_t pool; /* where q's records live */
    size_t qn, qcap, qbytes; /* qbytes: allocated bytes of the queued records */
    size_t qmax;             /* cap of qbytes */
    uint8_t *scratch;        /* REC_MAX bytes: a record being copied out */
    uint32_t *pend; /* pids with an exec snapshot pending */
    size_t npend, pend_cap;
    int64_t pend_min;
    uint64_t seq;
    int pipefd[2];
    atomic_int stopping;
    const cw_source_sink_t *sink;
    cw_perf__shadow_env_t env;
    int64_t mono_to_epoch, last_ts, now_mono, t0_epoch; /* now_mono: ts being processed */
    uint32_t self;
    uint32_t st_before, st_exec, st_fork, st_resync;
    uint64_t seen, lost, orphans;
    uint64_t n_enter, n_exit, n_applied, n_marked, n_unknown;
    /* Forks of a process whose exec snapshot waited, the child gone before
     * it could be read (fork_resolve, procs.c). */
    uint64_t n_fork_unread;
    uint64_t n_foreign; /* records of tasks outside our PID namespace (pid 0), dropped */
    /* Losses the source sees itself (docs/LINUX.md, "Losses and drift"):
     * calls whose other half was lost (an exit without its enter, an enter
     * replaced before its exit; in a process no snapshot covers), and
     * records too short to read. */
    uint64_t n_unpaired, n_malformed;
    /* Corrections (resync_all): resyncs run, processes they corrected
     * and the bytes (committed + decommitted); the last one's time
     * (epoch ns; INT64_MIN: none yet). */
    uint64_t n_resyncs, n_corrections, corrected_bytes;
    int64_t last_resync_ns;
    uint64_t drift;
    uint64_t n_cut, n_forced; /* drains stopped at the cap; records merged past it */
    uint64_t n_swept_procs, n_swept_thrs; /* forgotten by cw_perf__sweep */
    cw_perf__acct_cache_t acct;           /* the shadow's charge queries */
    bool resync_due;
    int err;
    cw_diag_t *d;
    /* Processes one record: cw_perf__process_rec (NULL), or a test's. */
    int (*process)(struct cw_perf__perf *s, const cw_perf__rec_t *r);
} cw_perf__t;

/* pmap.c: small u32 -> pointer maps (open addressing). */
void *cw_perf__pmap_get(const cw_perf__pmap_t *m, uint32_t k);
int cw_perf__pmap_put(cw_perf__pmap_t *m, uint32_t k, void *v); /* 0 or CW_ENOMEM */
void cw_perf__pmap_del(cw_perf__pmap_t *m, uint32_t k);
void cw_perf__pmap_free(cw_perf__pmap_t *m);

/* perf.c: one pass of the merge (the core thread's loop; tests call it on
 * rings they fill). Moves the rings' records to the queue (at most qmax
 * bytes), then processes, in (ts, arrival) order, the queued records older
 * than horizon and than every record still in a ring (less SLACK_NS); when
 * the queue is full and a ring was left behind, merges past the cap until
 * the oldest ring's records are processed. *upto gets the time processed
 * up to: no later record can be older (ticks and exec snapshots wait for
 * it). 0 or an error. */
int cw_perf__merge_pass(cw_perf__t *s, int64_t horizon, int64_t *upto);

/* procs.c: emits process_start / process_exit (ts monotonic). */
int cw_perf__emit_proc(cw_perf__t *s, cw_op_t op, uint32_t pid, int64_t ts, const char *name,
                       const char *cmdline);
/* procs.c: s->env, the shadow's callbacks: its events go out as
 * cw_perf__emit_proc's do, its charge queries to s->acct (smaps.c). */
void cw_perf__procs_env(cw_perf__t *s, bool overcommit_never);
/* procs.c: the process table and the records that change it. */
int cw_perf__process_rec(cw_perf__t *s, const cw_perf__rec_t *r);
/* A process first seen: announced and loaded from smaps; NULL when gone
 * (s->err set on a real error). */
cw_perf__proc_t *cw_perf__proc_adopt(cw_perf__t *s, uint32_t pid, int64_t ts, uint32_t pseudo,
                                     bool rundown);
/* Loads a smaps snapshot into p (sync); CW_ENOENT when p has no memory. */
int cw_perf__proc_snapshot(cw_perf__t *s, cw_perf__proc_t *p, int64_t ts, uint32_t pseudo,
                           bool rundown, uint64_t *drift);
int cw_perf__proc_exit(cw_perf__t *s, cw_perf__proc_t *p, int64_t ts); /* ends and frees p */
int cw_perf__pend_due(cw_perf__t *s, int64_t upto); /* exec snapshots read by upto */
/* Forgets the processes and threads whose exit was never seen (lost, or a
 * CLONE_VM child's the resync does not read): an entry whose pid or tid no
 * longer exists at two sweeps in a row (so that an exit record on its way
 * is processed first) is ended at ts. Returns 0 or an error; *ended gets
 * the processes ended, *freed the threads. */
int cw_perf__sweep(cw_perf__t *s, int64_t ts, size_t *ended, size_t *freed);

#endif
