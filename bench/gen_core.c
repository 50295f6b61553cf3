/* gen_core.c - the synthetic workload of the core benchmark (gen_core.h).
 *
 * Owns a small simulation of a machine: per process, a bump allocator of
 * 64 KB-aligned regions and the list of its long-lived allocations; a
 * binary heap of pending frees (the transients); an output queue, because
 * one step of the simulation can produce several events (a process start
 * and its rundown commits). Everything is drawn from one splitmix64 PRNG,
 * so a seed gives the same stream on every machine. */
#include "gen_core.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define PAGE 4096u
#define GRAN 65536u
#define LIVE_CAP 256u
#define STACKS_PER_PROC 12u
#define QCAP 64u

typedef struct alloc {
    uint64_t addr, size;
} alloc_t;

typedef struct proc {
    uint32_t pid;
    uint32_t gen; /* instance generation, to drop stale pending frees */
    int alive;
    int64_t restart_at;
    uint32_t name;
    uint64_t next_addr;
    uint32_t stacks[STACKS_PER_PROC];
    alloc_t live[LIVE_CAP];
    uint32_t nlive;
} proc_t;

typedef struct pending {
    int64_t due;
    uint32_t proc, gen;
    uint64_t addr, size;
} pending_t;

struct cwgen {
    cwgen_opts_t o;
    uint64_t rng;
    uint64_t emitted;
    int64_t now;
    int64_t avg_gap;
    proc_t *procs;
    pending_t *heap;
    uint32_t nheap, capheap;
    cw_event_t q[QCAP];
    uint32_t qhead, qn;
    /* stacks: frames as strings, per stack an array of pointers */
    char **frame_text;
    uint32_t nframe_text;
    const char ***stack_frames;
    uint32_t *stack_len;
    uint32_t nstacks; /* including the rundown pseudo-stack (last) */
    uint32_t next_pid;
    uint32_t last_proc;
};

static const char *const proc_names[] = {
    "svchost.exe", "chrome.exe",  "msedge.exe",     "explorer.exe",      "Code.exe",
    "Teams.exe",   "OUTLOOK.EXE", "WINWORD.EXE",    "MsMpEng.exe",       "RuntimeBroker.exe",
    "dllhost.exe", "conhost.exe", "SearchHost.exe", "sqlservr.exe",      "java.exe",
    "node.exe",    "python.exe",  "devenv.exe",     "MemoryTestApp.exe", "firefox.exe",
};
#define NPROC_NAMES (sizeof proc_names / sizeof proc_names[0])

static const char *const tails[][6] = {
    /* Windows heap growth */
    {"ucrtbase.dll!_malloc_base", "ntdll.dll!RtlAllocateHeap", "ntdll.dll!RtlpAllocateHeapInternal",
     "ntdll.dll!RtlpExtendHeap", "ntdll.dll!NtAllocateVirtualMemory", NULL},
    /* direct VirtualAlloc */
    {"KernelBase.dll!VirtualAlloc", "ntdll.dll!NtAllocateVirtualMemory", NULL},
    /* thread stack */
    {"KernelBase.dll!CreateRemoteThreadEx", "ntdll.dll!RtlpCreateUserStack",
     "ntdll.dll!NtAllocateVirtualMemory", NULL},
    /* heap, large block */
    {"ntdll.dll!RtlAllocateHeap", "ntdll.dll!RtlpAllocateHeapInternal",
     "ntdll.dll!RtlpHpLargeAlloc", "ntdll.dll!NtAllocateVirtualMemory", NULL},
    /* CLR */
    {"coreclr.dll!WKS::gc_heap::grow_heap_segment", "coreclr.dll!GCToOSInterface::VirtualCommit",
     "KernelBase.dll!VirtualAlloc", "ntdll.dll!NtAllocateVirtualMemory", NULL},
    /* V8 */
    {"chrome.dll!v8::internal::Heap::AllocateRaw", "chrome.dll!base::AllocPages",
     "KernelBase.dll!VirtualAlloc", "ntdll.dll!NtAllocateVirtualMemory", NULL},
};
#define NTAILS (sizeof tails / sizeof tails[0])
#define NMIDDLE 400u

static uint64_t rnd(cwgen_t *g)
{
    /* splitmix64 */
    uint64_t z = (g->rng += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

static uint64_t below(cwgen_t *g, uint64_t n)
{
    return n ? rnd(g) % n : 0;
}

void cwgen_opts_default(cwgen_opts_t *o)
{
    o->events = 10000000;
    o->procs = 1000;
    o->nstacks = 300;
    o->seed = 1;
    o->start_ns = 1750000000LL * 1000000000LL;
    o->span_ns = 3600LL * 1000000000LL;
    o->burst = 1;
}

static char *dupf(const char *fmt, unsigned a, unsigned b)
{
    char buf[160];
    snprintf(buf, sizeof buf, fmt, a, b);
    return strdup(buf);
}

static int build_stacks(cwgen_t *g)
{
    /* A pool of NMIDDLE application frames, then nstacks stacks of
     * thread base + 2..8 middle frames + one allocation tail. */
    g->frame_text = calloc(NMIDDLE + 2, sizeof *g->frame_text);
    if (!g->frame_text) return -1;
    g->frame_text[0] = strdup("ntdll.dll!RtlUserThreadStart");
    g->frame_text[1] = strdup("KERNEL32.DLL!BaseThreadInitThunk");
    for (uint32_t i = 0; i < NMIDDLE; i++)
        g->frame_text[2 + i] = dupf("mod%u.dll!Function%u", i % 37, i);
    g->nframe_text = NMIDDLE + 2;
    for (uint32_t i = 0; i < g->nframe_text; i++)
        if (!g->frame_text[i]) return -1;

    g->nstacks = g->o.nstacks + 1;
    g->stack_frames = calloc(g->nstacks, sizeof *g->stack_frames);
    g->stack_len = calloc(g->nstacks, sizeof *g->stack_len);
    if (!g->stack_frames || !g->stack_len) return -1;
    for (uint32_t s = 0; s < g->o.nstacks; s++) {
        const char *const *tail = tails[s % NTAILS];
        uint32_t ntail = 0;
        while (tail[ntail])
            ntail++;
        uint32_t mid = 2 + (uint32_t)below(g, 7);
        const char **f = calloc(2 + mid + ntail, sizeof *f);
        if (!f) return -1;
        uint32_t n = 0;
        f[n++] = g->frame_text[0];
        f[n++] = g->frame_text[1];
        for (uint32_t k = 0; k < mid; k++)
            f[n++] = g->frame_text[2 + below(g, NMIDDLE)];
        for (uint32_t k = 0; k < ntail; k++)
            f[n++] = tail[k];
        g->stack_frames[s] = f;
        g->stack_len[s] = n;
    }
    static const char *const rundown[] = {"(before trace)"};
    g->stack_frames[g->o.nstacks] = (const char **)rundown;
    g->stack_len[g->o.nstacks] = 1;
    return 0;
}

uint32_t cwgen_stack_count(const cwgen_t *g)
{
    return g->nstacks;
}

const char *const *cwgen_stack_frames(const cwgen_t *g, uint32_t idx, uint32_t *n)
{
    *n = g->stack_len[idx];
    return g->stack_frames[idx];
}

static cw_event_t *push(cwgen_t *g)
{
    cw_event_t *ev = &g->q[(g->qhead + g->qn++) % QCAP];
    memset(ev, 0, sizeof *ev);
    return ev;
}

/* Pending-free min-heap on due time. */
static int heap_push(cwgen_t *g, pending_t p)
{
    if (g->nheap == g->capheap) {
        uint32_t cap = g->capheap ? g->capheap * 2 : 4096;
        pending_t *h = realloc(g->heap, cap * sizeof *h);
        if (!h) return -1;
        g->heap = h;
        g->capheap = cap;
    }
    uint32_t i = g->nheap++;
    while (i && g->heap[(i - 1) / 2].due > p.due) {
        g->heap[i] = g->heap[(i - 1) / 2];
        i = (i - 1) / 2;
    }
    g->heap[i] = p;
    return 0;
}

static pending_t heap_pop(cwgen_t *g)
{
    pending_t top = g->heap[0], last = g->heap[--g->nheap];
    uint32_t i = 0;
    for (;;) {
        uint32_t c = 2 * i + 1;
        if (c >= g->nheap) break;
        if (c + 1 < g->nheap && g->heap[c + 1].due < g->heap[c].due) c++;
        if (g->heap[c].due >= last.due) break;
        g->heap[i] = g->heap[c];
        i = c;
    }
    if (g->nheap) g->heap[i] = last;
    return top;
}

static uint64_t draw_pages(cwgen_t *g)
{
    uint64_t r = below(g, 1000);
    if (r < 700) return 1 + below(g, 4);
    if (r < 900) return 5 + below(g, 60);
    if (r < 990) return 65 + below(g, 960);
    return 1025 + below(g, 3072);
}

static void start_proc(cwgen_t *g, uint32_t i, int64_t ts, int with_rundown)
{
    proc_t *p = &g->procs[i];
    p->alive = 1;
    p->gen++;
    p->nlive = 0;
    p->name = (uint32_t)below(g, NPROC_NAMES);
    p->next_addr = (0x10000ull + below(g, 0x7000000ull)) * GRAN;
    /* Popular stacks are shared by many processes: pick with a skew. */
    for (uint32_t k = 0; k < STACKS_PER_PROC; k++) {
        uint64_t a = below(g, g->o.nstacks), b = below(g, g->o.nstacks);
        p->stacks[k] = (uint32_t)(a < b ? a : b);
    }
    cw_event_t *ev = push(g);
    ev->ts = ts;
    ev->op = CW_OP_PROCESS_START;
    ev->pid = p->pid;
    ev->name = proc_names[p->name];
    if (!with_rundown) return;
    uint32_t n = 1 + (uint32_t)below(g, 3);
    for (uint32_t k = 0; k < n; k++) {
        uint64_t size = draw_pages(g) * PAGE;
        ev = push(g);
        ev->ts = ts;
        ev->op = CW_OP_COMMIT;
        ev->pid = p->pid;
        ev->addr = p->next_addr;
        ev->size = size;
        ev->rundown = true;
        ev->stack_id = g->o.nstacks + 1;
        p->next_addr += (size + GRAN - 1) / GRAN * GRAN;
    }
}

cwgen_t *cwgen_create(const cwgen_opts_t *o)
{
    cwgen_t *g = calloc(1, sizeof *g);
    if (!g) return NULL;
    g->o = *o;
    if (g->o.procs == 0) g->o.procs = 1;
    if (g->o.nstacks == 0) g->o.nstacks = 1;
    g->rng = o->seed * 0x2545F4914F6CDD1Dull + 1;
    g->now = o->start_ns;
    g->avg_gap = o->events ? o->span_ns / (int64_t)o->events : 1;
    if (g->avg_gap < 1) g->avg_gap = 1;
    g->procs = calloc(g->o.procs, sizeof *g->procs);
    if (!g->procs || build_stacks(g) != 0) {
        cwgen_destroy(g);
        return NULL;
    }
    for (uint32_t i = 0; i < g->o.procs; i++)
        g->procs[i].pid = 4 * (1000 + i);
    g->next_pid = 0;
    return g;
}

void cwgen_destroy(cwgen_t *g)
{
    if (!g) return;
    for (uint32_t i = 0; i < g->nframe_text; i++)
        free(g->frame_text[i]);
    free(g->frame_text);
    for (uint32_t s = 0; s + 1 < g->nstacks; s++)
        free((void *)g->stack_frames[s]);
    free(g->stack_frames);
    free(g->stack_len);
    free(g->procs);
    free(g->heap);
    free(g);
}

static void do_commit(cwgen_t *g, uint32_t i, proc_t *p)
{
    uint64_t size = draw_pages(g) * PAGE, addr;
    uint64_t kind = below(g, 100); /* <70 transient, <97 long-lived, else leak */
    if (below(g, 100) < 3 && p->nlive) {
        /* Commit over pages partly committed already. */
        alloc_t *a = &p->live[below(g, p->nlive)];
        addr = a->addr + (a->size / 2) / PAGE * PAGE;
        size = a->size;
        kind = 99; /* the new part leaks */
    } else {
        addr = p->next_addr;
        p->next_addr += (size + GRAN - 1) / GRAN * GRAN;
    }
    if (kind < 97 && kind >= 70 && p->nlive == LIVE_CAP) kind = 0;
    if (kind >= 70 && kind < 97) p->live[p->nlive++] = (alloc_t){addr, size};
    cw_event_t *ev = push(g);
    ev->ts = g->now;
    ev->op = CW_OP_COMMIT;
    ev->pid = p->pid;
    ev->tid = p->pid + 4;
    ev->addr = addr;
    ev->size = size;
    ev->stack_id = p->stacks[below(g, STACKS_PER_PROC)] + 1;
    if (kind < 70) {
        /* Transient: freed 1 ms .. 100 ms later, a few up to 3 s. */
        int64_t life = (int64_t)(1 + below(g, 100)) * 1000000;
        if (below(g, 20) == 0) life = (int64_t)(1 + below(g, 3000)) * 1000000;
        heap_push(g, (pending_t){g->now + life, i, p->gen, addr, size});
    }
}

static void do_free(cwgen_t *g, proc_t *p)
{
    uint32_t k = (uint32_t)below(g, p->nlive);
    alloc_t *a = &p->live[k];
    cw_event_t *ev = push(g);
    ev->ts = g->now;
    ev->pid = p->pid;
    if (a->size >= 2 * PAGE && below(g, 100) < 30) {
        /* Decommit the first half; the rest stays live. */
        uint64_t half = (a->size / 2) / PAGE * PAGE;
        ev->op = CW_OP_DECOMMIT;
        ev->addr = a->addr;
        ev->size = half;
        a->addr += half;
        a->size -= half;
        return;
    }
    ev->op = CW_OP_RELEASE;
    ev->addr = a->addr;
    ev->size = a->size;
    *a = p->live[--p->nlive];
}

static void step(cwgen_t *g)
{
    int64_t next = g->now + 1 + (int64_t)below(g, 2 * (uint64_t)g->avg_gap);
    /* Pending frees that fall due first go first. */
    while (g->nheap && g->heap[0].due <= next) {
        pending_t f = heap_pop(g);
        proc_t *p = &g->procs[f.proc];
        if (!p->alive || p->gen != f.gen) continue; /* its process exited */
        if (f.due > g->now) g->now = f.due;
        cw_event_t *ev = push(g);
        ev->ts = g->now;
        ev->op = CW_OP_RELEASE;
        ev->pid = p->pid;
        ev->addr = f.addr;
        ev->size = f.size;
        return;
    }
    g->now = next;
    uint32_t i = g->last_proc;
    if (g->o.burst <= 1 || below(g, g->o.burst) == 0) i = (uint32_t)below(g, g->o.procs);
    g->last_proc = i;
    proc_t *p = &g->procs[i];
    if (!p->alive) {
        if (g->now >= p->restart_at)
            start_proc(g, i, g->now, 0); /* pid reuse */
        else
            do_commit(g, (i + 1) % g->o.procs, &g->procs[(i + 1) % g->o.procs]);
        return;
    }
    uint64_t r = below(g, 100000);
    if (r < 20) {
        cw_event_t *ev = push(g);
        ev->ts = g->now;
        ev->op = CW_OP_PROCESS_EXIT;
        ev->pid = p->pid;
        p->alive = 0;
        p->restart_at = g->now + (int64_t)(1 + below(g, 30)) * 1000000000;
        return;
    }
    r %= 100;
    if (r < 2) {
        cw_event_t *ev = push(g);
        ev->ts = g->now;
        ev->op = CW_OP_RESERVE;
        ev->pid = p->pid;
        ev->addr = p->next_addr;
        ev->size = 16 * GRAN;
        p->next_addr += 16 * GRAN;
        return;
    }
    if (r < 30 && p->nlive) {
        do_free(g, p);
        return;
    }
    do_commit(g, i, p);
}

int cwgen_next(cwgen_t *g, cw_event_t *ev)
{
    if (g->emitted >= g->o.events) return 0;
    if (g->emitted == 0 && g->qn == 0 && g->next_pid == 0) {
        /* Start-up: every process with its rundown, 1 us apart. */
        g->next_pid = 1;
    }
    while (g->qn == 0) {
        if (g->next_pid && g->next_pid <= g->o.procs) {
            start_proc(g, g->next_pid - 1, g->now, 1);
            g->now += 1000;
            g->next_pid++;
            continue;
        }
        step(g);
    }
    *ev = g->q[g->qhead];
    g->qhead = (g->qhead + 1) % QCAP;
    g->qn--;
    g->emitted++;
    return 1;
}
