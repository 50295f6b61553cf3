/* heap_preload.c - the heap interposer (libcwheap.so), loaded into a
 * program by LD_PRELOAD in launch mode (`commitwatch heap -- PROGRAM`), or
 * into a running process by commitwatch in attach mode (`commitwatch heap
 * --pid PID`: join_running below).
 *
 * It defines malloc, calloc, realloc, reallocarray, free, posix_memalign,
 * aligned_alloc, memalign, valloc and pvalloc; each calls the C library's
 * own (found with dlsym(RTLD_NEXT)) and writes one record to the ring
 * commitwatch shares (heapring.h, the descriptor in CW_HEAP_RING_FD):
 * kind, address, size, old address for a realloc, time, thread and, for
 * an allocation, the user stack. libstdc++'s operator new and delete call
 * malloc and free, so they are caught here too.
 *
 * Stacks are unwound in the process (unwind() below), from the CFI of
 * .eh_frame: no frame pointers needed. The frames of this library are
 * left out (its text range, read once at load). Each thread keeps a table
 * of the stacks it has sent (heapcache.h): a stack's first record carries
 * its return addresses and a new index, later ones the index alone, one
 * 64-byte slot. The table is mapped at the thread's first stack and
 * unmapped when the thread ends (a pthread key's destructor, which also
 * tells the reader: THREAD_END).
 *
 * Guards:
 * - recursion: the unwinder allocates on its first use (it loads
 *   libgcc_s), and the C library may call malloc inside our calls; a
 *   thread-local flag makes every call made while the thread is inside a
 *   hook go straight to the C library, unrecorded. The first backtrace()
 *   is made at load, under the flag.
 * - before the library is set up: dlsym itself may call calloc; until the
 *   real functions are known, allocations come from a small static buffer
 *   (never freed; a free or realloc of it is recognised by its address).
 * - no ring (the variable unset, or a ring of another layout): every call
 *   goes straight through, nothing recorded.
 * - a full ring: the call waits for commitwatch to read (heapring.h), as
 *   long as it reads; a reader stalled for 0.1 s gets the event counted
 *   in the ring's drop counter instead, and the call returns at once.
 *
 * Threads: any thread of the traced program calls the hooks; the state
 * written at load (the real functions, the ring, the text range) is read
 * only after, and the pid is reset in a fork's child.
 *
 * Built without sanitizers (its own allocations would be the sanitizer's)
 * and linked with nothing but libc (CMakeLists.txt, cw_heap_preload). */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <execinfo.h>
#include <fcntl.h>
#include <link.h>
#include <malloc.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "platform/posix/intarget/got.h"
#include "platform/posix/intarget/inject_peer.h"
#include "sources/heap/heapcache.h"
#include "sources/heap/heapring.h"

#define EXPORT __attribute__((visibility("default")))
#define TLS __thread __attribute__((tls_model("initial-exec")))

static void *(*real_malloc)(size_t);
static void *(*real_calloc)(size_t, size_t);
static void *(*real_realloc)(void *, size_t);
static void (*real_free)(void *);
static int (*real_posix_memalign)(void **, size_t, size_t);
static void *(*real_aligned_alloc)(size_t, size_t);
static void *(*real_memalign)(size_t, size_t);
static void *(*real_valloc)(size_t);
static void *(*real_pvalloc)(size_t);

static cw_heapring_hdr_t *ring;
static uintptr_t self_lo, self_hi; /* this library's text */
static uint32_t self_pid;

static _Atomic int ready; /* the constructor has run: stacks can be unwound */
/* Loaded into a running process (attach mode, not LD_PRELOAD): the calls
 * reach the hooks through GOT slots the constructor rewrote, which the
 * first hook to see the ring closed puts back (unhooked). */
static bool by_attach;
static _Atomic int unhooked;
static _Atomic int attaching;
static bool attach_done; /* the ring mapped, or known to be absent */

static TLS int busy; /* inside a hook: calls go straight through */
static TLS uint32_t self_tid;
/* This thread's copy of the ring's tail (heapring.h, cw_heapring_claim):
 * one ring per process image, so one copy per thread serves. */
static TLS uint64_t seen_tail;
/* This thread's stack table (heapcache.h), mapped at its first stack. */
static TLS cw_heapcache_t *stacks;
static pthread_key_t stacks_key; /* its destructor unmaps the table at the thread's end */
static bool have_stacks_key;

/* ---- before dlsym has answered ---- */

static _Alignas(64) char boot[64 * 1024];
static _Atomic size_t boot_used;

static bool in_boot(const void *p)
{
    return (const char *)p >= boot && (const char *)p < boot + sizeof boot;
}

static void *boot_alloc(size_t n)
{
    size_t need = (n + 63) & ~(size_t)63;
    size_t at = atomic_fetch_add(&boot_used, need);
    if (at + need > sizeof boot) return NULL;
    return boot + at; /* static storage: already zero */
}

static _Atomic int resolving;

static void resolve(void)
{
    if (atomic_exchange(&resolving, 1)) return; /* dlsym's own calls use the buffer */
    real_calloc = (void *(*)(size_t, size_t))dlsym(RTLD_NEXT, "calloc");
    real_malloc = (void *(*)(size_t))dlsym(RTLD_NEXT, "malloc");
    real_realloc = (void *(*)(void *, size_t))dlsym(RTLD_NEXT, "realloc");
    real_free = (void (*)(void *))dlsym(RTLD_NEXT, "free");
    real_posix_memalign = (int (*)(void **, size_t, size_t))dlsym(RTLD_NEXT, "posix_memalign");
    real_aligned_alloc = (void *(*)(size_t, size_t))dlsym(RTLD_NEXT, "aligned_alloc");
    real_memalign = (void *(*)(size_t, size_t))dlsym(RTLD_NEXT, "memalign");
    real_valloc = (void *(*)(size_t))dlsym(RTLD_NEXT, "valloc");
    real_pvalloc = (void *(*)(size_t))dlsym(RTLD_NEXT, "pvalloc");
}

/* ---- recording ---- */

static uint32_t tid_now(void)
{
    if (!self_tid) self_tid = (uint32_t)syscall(SYS_gettid);
    return self_tid;
}

/* The unwinder: libunwind's unw_backtrace when the machine has libunwind
 * 8 (heaptrack's too), with its per-thread cache of unwind tables, else
 * glibc's backtrace() (libgcc's unwinder, which finds and interprets each
 * frame's CFI afresh: about 3 times slower per call in bench/
 * heap_probe_cost). Both read .eh_frame; neither needs frame pointers.
 * CW_HEAP_UNWIND=libgcc picks glibc's. Set in the constructor. */
static int (*unwinder)(void **, int) = backtrace;

static void pick_unwinder(void)
{
    const char *want = getenv("CW_HEAP_UNWIND");
    if (want && strcmp(want, "libgcc") == 0) return;
    /* RTLD_LOCAL: its own backtrace and _Unwind_Backtrace stay its own. */
    void *h = dlopen("libunwind.so.8", RTLD_NOW | RTLD_LOCAL);
    if (!h) return;
    /* The x86-64 names (libunwind prefixes them by architecture). */
    int (*policy)(void *, int) = (int (*)(void *, int))dlsym(h, "_ULx86_64_set_caching_policy");
    void **space = (void **)dlsym(h, "_ULx86_64_local_addr_space");
    int (*bt)(void **, int) = (int (*)(void **, int))dlsym(h, "unw_backtrace");
    if (!policy || !space || !bt) return;
    policy(*space, 2 /* UNW_CACHE_PER_THREAD */);
    unwinder = bt;
}

/* Unwinds into pc (innermost first), leaving out this library's frames. */
static uint16_t unwind(uint64_t *pc, uint32_t *truncated)
{
    void *raw[CW_HEAPRING_FRAMES + 8];
    int n = unwinder(raw, (int)(sizeof raw / sizeof *raw));
    int i = 0;
    while (i < n && (uintptr_t)raw[i] >= self_lo && (uintptr_t)raw[i] < self_hi)
        i++;
    uint16_t k = 0;
    for (; i < n && k < CW_HEAPRING_FRAMES; i++)
        pc[k++] = (uint64_t)(uintptr_t)raw[i];
    *truncated = i < n || n == (int)(sizeof raw / sizeof *raw);
    return k;
}

/* The event's time: CLOCK_REALTIME_COARSE, the time of the kernel's last
 * tick (clock_getres: 4 ms on the build machine), read from the vDSO
 * without reading the clock source: 2.8 ns a call against CLOCK_REALTIME's
 * 22 ns (kvm-clock, 2026-12-05), which was 9 % of the traced program's
 * time (perf record). What the model uses the time for (windows of
 * seconds, snapshots, a stack's peak time) needs no finer; the order of
 * events is the ring's, not the clock's (docs/DESIGN.md). */
static int64_t now_ns(void)
{
    struct timespec t;
    clock_gettime(CLOCK_REALTIME_COARSE, &t);
    return (int64_t)t.tv_sec * 1000000000 + t.tv_nsec;
}

/* Whether events are recorded: a ring mapped and not closed. The first
 * call to see it closed in attach mode puts the GOT slots back, so the
 * process stops paying for the hooks at all. */
static bool live(void)
{
    if (!ring) return false;
    if (!atomic_load_explicit(&ring->closed, memory_order_relaxed)) return true;
    if (by_attach && !atomic_exchange(&unhooked, 1)) cwh_got_unhook();
    return false;
}

/* Fills a claimed record's header (the fields every event has). */
static cw_heapring_slot_t *fill(cw_heapring_slot_t *r, int kind, int fn)
{
    r->kind = (uint8_t)kind;
    r->fn = (uint8_t)fn;
    r->pid = self_pid;
    r->tid = tid_now();
    r->addr = r->size = r->old_addr = 0;
    return r;
}

/* Claims a record's slots (the event's place in the order) and fills its
 * first slot's header; NULL when nothing is to be recorded. */
static cw_heapring_slot_t *begin(uint64_t *pos, int kind, int fn, unsigned conts)
{
    if (!ring) return NULL;
    cw_heapring_slot_t *r = cw_heapring_claim(ring, &seen_tail, conts, pos);
    if (!r) return NULL;
    r->flags = 0;
    r->stack = CW_HEAPRING_NOSTACK;
    return fill(r, kind, fn);
}

/* This thread's stack table; NULL when it cannot be mapped (then every
 * record defines its stack, under index 0). */
static cw_heapcache_t *thread_stacks(void)
{
    if (stacks) return stacks;
    void *m = mmap(NULL, sizeof *stacks, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1,
                   0);
    if (m == MAP_FAILED) return NULL;
    stacks = m;
    if (have_stacks_key) pthread_setspecific(stacks_key, m);
    return stacks;
}

/* begin() for an event with the stack pc[0 .. n): its index when this
 * thread has sent the stack before, else its definition
 * (cw_heapcache_claim). */
static cw_heapring_slot_t *begin_stack(uint64_t *pos, int kind, int fn, const uint64_t *pc,
                                       uint16_t n, uint32_t truncated)
{
    if (!n) return begin(pos, kind, fn, 0); /* no stack: CW_HEAPRING_NOSTACK */
    if (!ring) return NULL;
    cw_heapring_slot_t *r = cw_heapcache_claim(ring, &seen_tail, thread_stacks(), self_pid,
                                               tid_now(), pc, n, truncated != 0, pos);
    return r ? fill(r, kind, fn) : NULL;
}

/* An allocation that returned p (NULL: failed, nothing recorded). */
static void record_alloc(int fn, void *p, size_t size)
{
    if (!p || !live()) return;
    uint64_t pc[CW_HEAPRING_FRAMES];
    uint32_t truncated;
    /* Unwound before the claim: a claimed slot holds up the reader. Not
     * before the constructor has loaded the unwinder (from inside the
     * loader, its dlopen could deadlock): those few blocks have no stack. */
    uint16_t n = atomic_load(&ready) ? unwind(pc, &truncated) : (truncated = 0);
    uint64_t pos;
    cw_heapring_slot_t *r = begin_stack(&pos, CW_HEAPREC_ALLOC, fn, pc, n, truncated);
    if (!r) return;
    r->addr = (uint64_t)(uintptr_t)p;
    r->size = size;
    r->ts = now_ns();
    cw_heapring_publish(r, pos);
}

/* A START record: this process image begins (its first event). */
static void announce(void)
{
    /* The image's name (its comm) travels with the record: a short-lived
     * process may be gone when the reader gets to it. Plain system calls:
     * no allocation here. */
    uint64_t words[CW_HEAPRING_NAME_MAX / 8] = {0};
    ssize_t n = 0;
    int fd = open("/proc/self/comm", O_RDONLY | O_CLOEXEC);
    if (fd >= 0) {
        char *name = (char *)words;
        n = read(fd, name, CW_HEAPRING_NAME_MAX);
        close(fd);
        while (n > 0 && (name[n - 1] == '\n' || name[n - 1] == '\0'))
            n--;
        if (n < 0) n = 0;
    }
    uint16_t nw = (uint16_t)((n + 7) / 8);
    uint64_t pos;
    cw_heapring_slot_t *r = begin(&pos, CW_HEAPREC_START, CW_HEAPFN_MALLOC, CW_HEAPRING_CONTS(nw));
    if (!r) return;
    r->ts = now_ns();
    r->size = (uint64_t)n;
    cw_heapring_put_words(ring, pos, words, nw);
    cw_heapring_publish(r, pos);
}

/* ---- the ring ---- */

/* Maps the ring named by CW_HEAP_RING_FD, once, and announces this image
 * (a START record: an exec ends the image before it). Called by the
 * constructor and, before it has run, by the hooks: the C library and the
 * loader allocate before the constructors run, and a block allocated
 * unseen would make its free unknown. Until the environment is readable it
 * tries again at each call. */
/* Maps the ring in fd, checks its layout and joins it (a START record for
 * this image); false when fd holds no ring of this layout. */
static bool map_ring(int fd)
{
    struct stat st;
    if (fstat(fd, &st) != 0 || st.st_size < CW_HEAPRING_HDR) return false;
    void *m = mmap(NULL, (size_t)st.st_size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (m == MAP_FAILED) return false;
    cw_heapring_hdr_t *h = m;
    if (h->magic != CW_HEAPRING_MAGIC || h->version != CW_HEAPRING_VERSION ||
        h->rec_size != sizeof(cw_heapring_slot_t) ||
        cw_heapring_bytes(h->nslots) > (size_t)st.st_size) {
        munmap(m, (size_t)st.st_size);
        return false;
    }
    atomic_fetch_add(&h->attached, 1);
    ring = h;
    announce();
    return true;
}

static void attach(void)
{
    if (attach_done || atomic_exchange(&attaching, 1)) return;
    const char *v = getenv(CW_HEAPRING_ENV);
    if (!v) {
        attach_done = atomic_load(&ready) || environ != NULL; /* unset, not unreadable yet */
        atomic_store(&attaching, 0);
        return;
    }
    attach_done = true;
    self_pid = (uint32_t)getpid();
    map_ring(atoi(v));
    atomic_store(&attaching, 0);
}

/* ---- the hooks ---- */

#define ENTER()                                                                                    \
    do {                                                                                           \
        if (!real_malloc) resolve();                                                               \
        if (!attach_done) attach();                                                                \
    } while (0)

EXPORT void *malloc(size_t n)
{
    ENTER();
    if (!real_malloc) return boot_alloc(n);
    if (busy) return real_malloc(n);
    busy = 1;
    void *p = real_malloc(n);
    record_alloc(CW_HEAPFN_MALLOC, p, n);
    busy = 0;
    return p;
}

EXPORT void *calloc(size_t n, size_t m)
{
    ENTER();
    size_t bytes;
    if (__builtin_mul_overflow(n, m, &bytes)) {
        errno = ENOMEM;
        return NULL;
    }
    if (!real_calloc) return boot_alloc(bytes);
    if (busy) return real_calloc(n, m);
    busy = 1;
    void *p = real_calloc(n, m);
    record_alloc(CW_HEAPFN_CALLOC, p, bytes);
    busy = 0;
    return p;
}

EXPORT void free(void *p)
{
    if (!p || in_boot(p)) return;
    ENTER();
    if (!real_free) return; /* only while dlsym answers: kept, never reused */
    if (busy || !live()) {
        real_free(p);
        return;
    }
    busy = 1;
    /* Claimed before the block is given back: an allocation of the same
     * address by another thread comes after it in the ring. */
    uint64_t pos;
    cw_heapring_slot_t *r = begin(&pos, CW_HEAPREC_FREE, CW_HEAPFN_FREE, 0);
    if (r) {
        r->addr = (uint64_t)(uintptr_t)p;
        r->ts = now_ns();
        cw_heapring_publish(r, pos);
    }
    real_free(p);
    busy = 0;
}

static void *do_realloc(void *old, size_t n, int fn)
{
    ENTER();
    if (in_boot(old)) { /* from the buffer: moved out (its size unknown: at most the rest) */
        size_t rest = (size_t)(boot + sizeof boot - (char *)old);
        void *p = malloc(n);
        if (p) memcpy(p, old, n < rest ? n : rest);
        return p;
    }
    if (!real_realloc) return boot_alloc(n);
    if (busy || !live()) return real_realloc(old, n);
    busy = 1;
    uint64_t pc[CW_HEAPRING_FRAMES];
    uint32_t truncated;
    uint16_t nf = atomic_load(&ready) ? unwind(pc, &truncated) : (truncated = 0);
    /* Claimed before the call, which may give the old block back. */
    uint64_t pos;
    cw_heapring_slot_t *r = begin_stack(&pos, CW_HEAPREC_REALLOC, fn, pc, nf, truncated);
    void *p = real_realloc(old, n);
    if (r) {
        if (!p && n) {
            /* Failed: the old block stays. A definition the record
             * carries still counts (the reader enters it all the same). */
            r->kind = CW_HEAPREC_NONE;
        } else {
            r->old_addr = (uint64_t)(uintptr_t)old;
            r->addr = (uint64_t)(uintptr_t)p; /* realloc(p, 0): freed, NULL */
            r->size = p ? n : 0;
        }
        r->ts = now_ns();
        cw_heapring_publish(r, pos);
    }
    busy = 0;
    return p;
}

EXPORT void *realloc(void *old, size_t n)
{
    return do_realloc(old, n, CW_HEAPFN_REALLOC);
}

/* glibc's reallocarray calls its realloc internally, past this library. */
EXPORT void *reallocarray(void *old, size_t n, size_t m)
{
    size_t bytes;
    if (__builtin_mul_overflow(n, m, &bytes)) {
        errno = ENOMEM;
        return NULL;
    }
    return do_realloc(old, bytes, CW_HEAPFN_REALLOCARRAY);
}

EXPORT int posix_memalign(void **out, size_t align, size_t n)
{
    ENTER();
    if (!real_posix_memalign) return ENOMEM;
    if (busy) return real_posix_memalign(out, align, n);
    busy = 1;
    int rc = real_posix_memalign(out, align, n);
    if (rc == 0) record_alloc(CW_HEAPFN_POSIX_MEMALIGN, *out, n);
    busy = 0;
    return rc;
}

/* The other aligned allocators: the same shape each. */
#define ALIGNED_HOOK(name, FN, params, args, size)                                                 \
    EXPORT void *name params                                                                       \
    {                                                                                              \
        ENTER();                                                                                   \
        if (!real_##name) return NULL;                                                             \
        if (busy) return real_##name args;                                                         \
        busy = 1;                                                                                  \
        void *p = real_##name args;                                                                \
        record_alloc(FN, p, size);                                                                 \
        busy = 0;                                                                                  \
        return p;                                                                                  \
    }

ALIGNED_HOOK(aligned_alloc, CW_HEAPFN_ALIGNED_ALLOC, (size_t align, size_t n), (align, n), n)
ALIGNED_HOOK(memalign, CW_HEAPFN_MEMALIGN, (size_t align, size_t n), (align, n), n)
ALIGNED_HOOK(valloc, CW_HEAPFN_VALLOC, (size_t n), (n), n)
ALIGNED_HOOK(pvalloc, CW_HEAPFN_PVALLOC, (size_t n), (n), n)

/* ---- set-up ---- */

/* The hooks' own addresses, for the GOT slots: taking `malloc`'s address
 * here would give whatever the process's symbol lookup finds first (the C
 * library's, in attach mode, where this library is loaded RTLD_LOCAL). */
#define HIDDEN_ALIAS(name)                                                                         \
    extern __typeof(name) cwh_##name __attribute__((alias(#name), copy(name), visibility("hidden")))
HIDDEN_ALIAS(malloc);
HIDDEN_ALIAS(calloc);
HIDDEN_ALIAS(realloc);
HIDDEN_ALIAS(reallocarray);
HIDDEN_ALIAS(free);
HIDDEN_ALIAS(posix_memalign);
HIDDEN_ALIAS(aligned_alloc);
HIDDEN_ALIAS(memalign);
HIDDEN_ALIAS(valloc);
HIDDEN_ALIAS(pvalloc);
#undef HIDDEN_ALIAS

/* Attach mode: commitwatch loaded this library into the running process
 * (platform.h, cw_plat_inject_library) and hands it the ring while this
 * constructor runs (inject_peer.h). The ring mapped, every loaded
 * object's calls of the allocation functions are pointed at the hooks
 * (got.h: symbol order cannot interpose in a process already running;
 * libstdc++'s operator new and delete reach them through its own GOT);
 * the answer is how many slots were rewritten, or -1. Objects loaded
 * later keep calling the C library directly. */
static void join_running(void)
{
    int fd = -1, s = cw_inject_peer_fetch(&fd);
    if (s < 0) return; /* not loaded by commitwatch's attach */
    self_pid = (uint32_t)getpid();
    bool ok = map_ring(fd);
    close(fd);
    if (!ok) {
        cw_inject_peer_reply(s, -1);
        return;
    }
    by_attach = true;
    atomic_store(&ready, 1); /* before the first hooked call */
    const cwh_hook_t hooks[] = {
        {"malloc", (void *)cwh_malloc},
        {"calloc", (void *)cwh_calloc},
        {"realloc", (void *)cwh_realloc},
        {"reallocarray", (void *)cwh_reallocarray},
        {"free", (void *)cwh_free},
        {"posix_memalign", (void *)cwh_posix_memalign},
        {"aligned_alloc", (void *)cwh_aligned_alloc},
        {"memalign", (void *)cwh_memalign},
        {"valloc", (void *)cwh_valloc},
        {"pvalloc", (void *)cwh_pvalloc},
    };
    size_t skipped = 0;
    int n = cwh_got_hook(hooks, sizeof hooks / sizeof *hooks, (const void *)join_running, &skipped);
    cw_inject_peer_reply(s, n);
}

static int find_self(struct dl_phdr_info *info, size_t size, void *arg)
{
    (void)size;
    uintptr_t base = (uintptr_t)arg;
    if (info->dlpi_addr != base) return 0;
    for (int i = 0; i < info->dlpi_phnum; i++) {
        const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
        if (ph->p_type == PT_LOAD && (ph->p_flags & PF_X)) {
            self_lo = base + ph->p_vaddr;
            self_hi = self_lo + ph->p_memsz;
        }
    }
    return 1;
}

static void after_fork_child(void)
{
    self_pid = (uint32_t)getpid();
    self_tid = 0;
    if (stacks) cw_heapcache_reset(stacks); /* the reader knows no stack of the new pid */
    announce(); /* a new process: its heap is its parent's copy, unknown here */
}

/* A thread ends (its stack table's key destructor): the reader forgets
 * its stacks (THREAD_END; if the record finds no room, the reader keeps
 * them until a thread of the same id defines its own), and the table is
 * unmapped. */
static void thread_ends(void *table)
{
    if (!busy && live()) {
        busy = 1;
        uint64_t pos;
        cw_heapring_slot_t *r = begin(&pos, CW_HEAPREC_THREAD_END, CW_HEAPFN_MALLOC, 0);
        if (r) {
            r->ts = now_ns();
            cw_heapring_publish(r, pos);
        }
        busy = 0;
    }
    if (stacks == table) stacks = NULL;
    munmap(table, sizeof *stacks);
}

/* At exit: the reader names a record's frames from the process's maps,
 * which go with the process, so the exit waits until the reader has read
 * everything written so far (its tail past the ring's head now), at most
 * EXIT_WAIT_MS: a short-lived process's stacks are then named even when
 * the reader lags. A process ended by _exit or a signal does not wait. */
#define EXIT_WAIT_MS 1000
__attribute__((destructor)) static void heap_preload_fini(void)
{
    if (!ring) return;
    uint64_t want = atomic_load_explicit(&ring->head, memory_order_acquire);
    struct timespec ms = {0, 1000000};
    for (int i = 0; i < EXIT_WAIT_MS; i++) {
        if (atomic_load_explicit(&ring->closed, memory_order_acquire) ||
            atomic_load_explicit(&ring->tail, memory_order_acquire) >= want)
            return;
        nanosleep(&ms, NULL);
    }
}

__attribute__((constructor)) static void heap_preload_init(void)
{
    busy = 1;
    ENTER();
    Dl_info di;
    if (dladdr((void *)heap_preload_init, &di) && di.dli_fbase)
        dl_iterate_phdr(find_self, di.dli_fbase);
    pick_unwinder();
    have_stacks_key = pthread_key_create(&stacks_key, thread_ends) == 0;
    void *warm[2];
    unwinder(warm, 2); /* loads the unwinder now, under the flag */
    pthread_atfork(NULL, NULL, after_fork_child);
    attach();
    if (!ring && !getenv(CW_HEAPRING_ENV)) join_running();
    atomic_store(&ready, 1);
    busy = 0;
}
