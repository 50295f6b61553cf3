/* etl_gen.c - normalized events as the kernel events of a Windows trace
 * (etl_gen.h says what becomes what). */
#include "etl_gen.h"

#include <stdlib.h>
#include <string.h>

#include "pe_writer.h"

#define NS 1000000000LL
#define MAX_FRAMES 256

enum {
    G_PAGEFAULT = 0x02,
    G_PROCESS = 0x03,
    G_THREAD = 0x05,
    G_HEAP = 0x10,
    G_IMAGE = 0x14,
    G_STACK = 0x18
};

typedef struct func {
    char *text; /* "module!function" as given */
    uint32_t module;
    uint32_t offset;
} func_t;

typedef struct module {
    char *name; /* as given */
    uint32_t nfuncs;
    bool given;    /* its offsets came from opts.rvas */
    uint64_t size; /* in its Image events (opts.sizes, else 0x100000) */
} module_t;

typedef struct stackinfo {
    bool done;
    uint32_t n;
    uint32_t *funcs; /* outermost first */
    uint64_t key;    /* keys mode: its user key (0 until used) */
} stackinfo_t;

typedef struct pidmods {
    uint32_t pid;
    uint64_t *loaded; /* bitset of module indexes */
    size_t words;
} pidmods_t;

struct cw_etlgen {
    cw_etlgen_opts_t o;
    cw_etlw_t *w;
    unsigned ptr;
    func_t *funcs;
    size_t nfuncs, fcap;
    module_t *mods;
    size_t nmods, mcap;
    stackinfo_t *stacks;
    size_t nstacks;
    pidmods_t *pids;
    size_t npids, pcap;
    int64_t last_ts;
    unsigned cpu;
    bool any;
    cw_event_t pending; /* a reserve waiting to see whether a commit joins it */
    bool has_pending;
    uint64_t next_key;
    uint64_t cpu_tick[64]; /* the newest tick written on each CPU */
    uint8_t pay[8 + 16 + 8 * MAX_FRAMES + 4096];
    uint64_t fr[MAX_FRAMES + 2];
};

static uint64_t tick_of(const cw_etlgen_t *g, int64_t ts)
{
    int64_t d = ts - g->o.w.start_ns;
    return g->o.w.start_tick + (uint64_t)(d / NS * g->o.w.freq + d % NS * g->o.w.freq / NS);
}

static uint64_t kernel_base(const cw_etlgen_t *g)
{
    return g->ptr == 8 ? 0xFFFFF80000000000ull : 0x80400000ull;
}

static uint64_t module_base(const cw_etlgen_t *g, uint32_t m)
{
    return g->ptr == 8 ? 0x7FF800000000ull + (uint64_t)m * 0x1000000 : 0x70000000ull + (uint64_t)m * 0x100000;
}

static uint64_t addr_of(const cw_etlgen_t *g, uint32_t pid, uint64_t a)
{
    return g->o.map_addr ? g->o.map_addr(g->o.ctx, pid, a) : a;
}

static int emit(cw_etlgen_t *g, int kind, unsigned group, unsigned type, unsigned version,
                uint32_t pid, uint32_t tid, uint64_t tick, const cw_etlw_buf_t *b)
{
    if (b->overflow) return -1;
    if (tick > g->cpu_tick[g->cpu]) g->cpu_tick[g->cpu] = tick;
    return cw_etlw_event(g->w, g->cpu, kind, group, type, version, pid, tid, tick, b->p, b->n);
}

static cw_etlw_buf_t buf(cw_etlgen_t *g)
{
    return (cw_etlw_buf_t){g->pay, 0, sizeof g->pay, false};
}

/* ---- frames ------------------------------------------------------------------- */

static uint32_t module_index(cw_etlgen_t *g, const char *name, size_t len)
{
    for (size_t i = 0; i < g->nmods; i++)
        if (strlen(g->mods[i].name) == len && memcmp(g->mods[i].name, name, len) == 0)
            return (uint32_t)i;
    if (g->nmods == g->mcap) {
        g->mcap = g->mcap ? 2 * g->mcap : 16;
        g->mods = realloc(g->mods, g->mcap * sizeof *g->mods);
        if (!g->mods) abort();
    }
    char *s = malloc(len + 1);
    if (!s) abort();
    memcpy(s, name, len);
    s[len] = '\0';
    g->mods[g->nmods] = (module_t){s, 0, false, 0x100000};
    for (size_t i = 0; i < g->o.nsizes; i++)
        if (strcmp(g->o.sizes[i].module, s) == 0) g->mods[g->nmods].size = g->o.sizes[i].size;
    return (uint32_t)g->nmods++;
}

static uint32_t func_index(cw_etlgen_t *g, const char *text)
{
    for (size_t i = 0; i < g->nfuncs; i++)
        if (strcmp(g->funcs[i].text, text) == 0) return (uint32_t)i;
    const char *bang = strchr(text, '!');
    size_t mlen = bang ? (size_t)(bang - text) : strlen(text);
    uint32_t m = module_index(g, text, mlen);
    if (g->nfuncs == g->fcap) {
        g->fcap = g->fcap ? 2 * g->fcap : 64;
        g->funcs = realloc(g->funcs, g->fcap * sizeof *g->funcs);
        if (!g->funcs) abort();
    }
    char *s = malloc(strlen(text) + 1);
    if (!s) abort();
    strcpy(s, text);
    g->funcs[g->nfuncs] = (func_t){s, m, 0x1000 + 0x40 * g->mods[m].nfuncs++};
    for (size_t i = 0; i < g->o.nrvas; i++)
        if (strcmp(g->o.rvas[i].frame, text) == 0) {
            g->funcs[g->nfuncs].offset = g->o.rvas[i].rva;
            g->mods[m].given = true;
        }
    return (uint32_t)g->nfuncs++;
}

static stackinfo_t *stack_info(cw_etlgen_t *g, uint32_t id)
{
    if (id >= g->nstacks) {
        size_t n = id + 64;
        g->stacks = realloc(g->stacks, n * sizeof *g->stacks);
        if (!g->stacks) abort();
        memset(g->stacks + g->nstacks, 0, (n - g->nstacks) * sizeof *g->stacks);
        g->nstacks = n;
    }
    stackinfo_t *s = &g->stacks[id];
    if (!s->done) {
        uint32_t n = 0;
        const char *const *fr = g->o.frames(g->o.ctx, id, &n);
        if (n > MAX_FRAMES) n = MAX_FRAMES;
        /* The rundown pseudo-stack is not a stack a trace can hold. */
        if (n == 1 && fr[0][0] == '(') n = 0;
        s->funcs = n ? malloc(n * sizeof *s->funcs) : NULL;
        for (uint32_t i = 0; i < n; i++) s->funcs[i] = func_index(g, fr[i]);
        s->n = n;
        s->done = true;
    }
    return s;
}

static pidmods_t *pid_mods(cw_etlgen_t *g, uint32_t pid)
{
    for (size_t i = 0; i < g->npids; i++)
        if (g->pids[i].pid == pid) return &g->pids[i];
    if (g->npids == g->pcap) {
        g->pcap = g->pcap ? 2 * g->pcap : 16;
        g->pids = realloc(g->pids, g->pcap * sizeof *g->pids);
        if (!g->pids) abort();
    }
    g->pids[g->npids] = (pidmods_t){pid, NULL, 0};
    return &g->pids[g->npids++];
}

void cw_etlgen_know_stack(cw_etlgen_t *g, uint32_t stack_id)
{
    stack_info(g, stack_id);
}

/* The Image Load (or, for a process running at the start, Image DCStart)
 * event of module m in pid, marking it loaded there. */
static int load_image(cw_etlgen_t *g, pidmods_t *p, uint32_t m, uint32_t tid, uint64_t tick,
                      bool rundown)
{
    size_t wd = m / 64;
    if (wd >= p->words) {
        size_t n = wd + 4;
        p->loaded = realloc(p->loaded, n * sizeof *p->loaded);
        if (!p->loaded) abort();
        memset(p->loaded + p->words, 0, (n - p->words) * sizeof *p->loaded);
        p->words = n;
    }
    p->loaded[wd] |= 1ull << (m % 64);
    char path[512];
    snprintf(path, sizeof path, "\\Device\\HarddiskVolume3\\Windows\\System32\\%s",
             g->mods[m].name);
    cw_etlw_buf_t b = buf(g);
    cw_etlw_image(&b, (unsigned)g->o.image_version, g->ptr, module_base(g, m), g->mods[m].size, p->pid,
                  path);
    return emit(g, CW_ETLW_SYSTEM, rundown ? G_IMAGE : G_PROCESS, rundown ? 3 : 10,
                (unsigned)g->o.image_version, p->pid, tid, tick, &b);
}

/* Image Load events (DCStart for a process running at the start) for
 * every image known, at a process's start. */
static int preload(cw_etlgen_t *g, uint32_t pid, uint32_t tid, uint64_t tick, bool rundown)
{
    pidmods_t *p = pid_mods(g, pid);
    for (uint32_t m = 0; m < g->nmods; m++)
        if (load_image(g, p, m, tid, tick, rundown) != 0) return -1;
    return 0;
}

/* Image Load events for the modules of stack s that pid has not loaded. */
static int load_modules(cw_etlgen_t *g, uint32_t pid, uint32_t tid, uint64_t tick,
                        const stackinfo_t *s)
{
    /* A tick before the event's when the CPU allows: a stack walked at the
     * event's time then has one candidate, as in real traces. */
    if (g->cpu_tick[g->cpu] < tick - 1) tick--;
    pidmods_t *p = pid_mods(g, pid);
    for (uint32_t i = 0; i < s->n; i++) {
        uint32_t m = g->funcs[s->funcs[i]].module;
        if (m / 64 < p->words && (p->loaded[m / 64] >> (m % 64) & 1)) continue;
        if (load_image(g, p, m, tid, tick, false) != 0) return -1;
    }
    return 0;
}

/* The stack of an event at tick, in the chosen form; user: its user
 * frames only (a heap event: the heap is user mode), in one walk or one
 * user key. */
static int write_stack(cw_etlgen_t *g, uint32_t pid, uint32_t tid, uint64_t tick,
                       stackinfo_t *s, bool user)
{
    uint64_t kb = kernel_base(g);
    uint64_t *fr = g->fr;
    size_t n = 0;
    if (!user) {
        fr[n++] = kb + 0x3000; /* MiAllocateVirtualMemory, innermost */
        fr[n++] = kb + 0x2000; /* NtAllocateVirtualMemory */
    }
    for (uint32_t i = s->n; i-- > 0;) {
        const func_t *f = &g->funcs[s->funcs[i]];
        fr[n++] = module_base(g, f->module) + f->offset;
    }
    cw_etlw_buf_t b = buf(g);
    if (user && g->o.stacks != CW_ETLGEN_KEYS) {
        cw_etlw_stackwalk(&b, g->ptr, tick, pid, tid, fr, n);
        return emit(g, CW_ETLW_PERFINFO, G_STACK, 32, 2, 0, 0, tick, &b);
    }
    if (user) {
        if (!s->key) s->key = g->next_key += 0x10;
        cw_etlw_stackref(&b, g->ptr, tick, pid, tid, s->key);
        return emit(g, CW_ETLW_PERFINFO, G_STACK, 38, 2, 0, 0, tick, &b);
    }
    switch (g->o.stacks) {
    case CW_ETLGEN_WALK:
        cw_etlw_stackwalk(&b, g->ptr, tick, pid, tid, fr, n);
        return emit(g, CW_ETLW_PERFINFO, G_STACK, 32, 2, 0, 0, tick, &b);
    case CW_ETLGEN_SPLIT:
        cw_etlw_stackwalk(&b, g->ptr, tick, pid, tid, fr, 2);
        if (emit(g, CW_ETLW_PERFINFO, G_STACK, 32, 2, 0, 0, tick, &b) != 0) return -1;
        b = buf(g);
        cw_etlw_stackwalk(&b, g->ptr, tick, pid, tid, fr + 2, n - 2);
        return emit(g, CW_ETLW_PERFINFO, G_STACK, 32, 2, 0, 0, tick, &b);
    default:
        if (!s->key) s->key = g->next_key += 0x10;
        cw_etlw_stackref(&b, g->ptr, tick, pid, tid, 0x8); /* the one kernel stack's key */
        if (emit(g, CW_ETLW_PERFINFO, G_STACK, 37, 2, 0, 0, tick, &b) != 0) return -1;
        b = buf(g);
        cw_etlw_stackref(&b, g->ptr, tick, pid, tid, s->key);
        return emit(g, CW_ETLW_PERFINFO, G_STACK, 38, 2, 0, 0, tick, &b);
    }
}

/* ---- events ------------------------------------------------------------------- */

/* The stack stack_id of an event of pid's thread tid at tick (*out NULL:
 * none), the images its frames are in loaded first. 0 or -1. */
static int event_stack(cw_etlgen_t *g, uint32_t pid, uint32_t tid, uint64_t tick,
                       uint32_t stack_id, stackinfo_t **out)
{
    stackinfo_t *s = stack_id ? stack_info(g, stack_id) : NULL;
    *out = s && s->n ? s : NULL;
    return *out ? load_modules(g, pid, tid, tick, s) : 0;
}

static int write_valloc(cw_etlgen_t *g, const cw_event_t *ev, uint32_t flags)
{
    uint64_t tick = tick_of(g, ev->ts);
    uint32_t tid = ev->tid ? ev->tid : ev->pid + 4;
    stackinfo_t *s;
    if (event_stack(g, ev->pid, tid, tick, ev->stack_id, &s) != 0) return -1;
    cw_etlw_buf_t b = buf(g);
    cw_etlw_valloc(&b, g->ptr, addr_of(g, ev->pid, ev->addr), ev->size, ev->pid, flags);
    unsigned type = (flags & 0x3000) ? 98 : 99;
    if (emit(g, CW_ETLW_PERFINFO, G_PAGEFAULT, type, 2, 0, 0, tick, &b) != 0) return -1;
    return s ? write_stack(g, ev->pid, tid, tick, s, false) : 0;
}

static int flush_pending(cw_etlgen_t *g)
{
    if (!g->has_pending) return 0;
    g->has_pending = false;
    return write_valloc(g, &g->pending, 0x2000);
}

/* The CPU of an event at ts: the next one for each distinct timestamp. */
static void next_cpu(cw_etlgen_t *g, int64_t ts)
{
    if (!g->any || ts != g->last_ts) {
        if (g->any) g->cpu = (g->cpu + 1) % g->o.w.ncpu;
        g->last_ts = ts;
        g->any = true;
    }
}

int cw_etlgen_heap(cw_etlgen_t *g, const cw_heap_ev_t *ev, size_t cut)
{
    if (flush_pending(g) != 0) return -1;
    next_cpu(g, ev->ts);
    uint64_t tick = tick_of(g, ev->ts);
    uint32_t tid = ev->tid ? ev->tid : ev->pid + 4;
    stackinfo_t *s;
    if (event_stack(g, ev->pid, tid, tick, ev->stack_id, &s) != 0) return -1;
    cw_etlw_buf_t b = buf(g);
    uint64_t heap = addr_of(g, ev->pid, 0x10000); /* one heap handle: the process heap */
    unsigned type = ev->kind == CW_HEAP_ALLOC ? 0x21 : ev->kind == CW_HEAP_REALLOC ? 0x22 : 0x24;
    cw_etlw_ptr(&b, g->ptr, heap);
    if (ev->kind == CW_HEAP_ALLOC) {
        cw_etlw_ptr(&b, g->ptr, ev->size);
        cw_etlw_ptr(&b, g->ptr, ev->addr);
    } else if (ev->kind == CW_HEAP_REALLOC) {
        cw_etlw_ptr(&b, g->ptr, ev->addr);
        cw_etlw_ptr(&b, g->ptr, ev->old_addr);
        cw_etlw_ptr(&b, g->ptr, ev->size);
        cw_etlw_ptr(&b, g->ptr, 0); /* OldSize: the reader takes the block's own */
    } else {
        cw_etlw_ptr(&b, g->ptr, ev->addr);
    }
    cw_etlw_u32(&b, 2); /* Source: MEMORY_FROM_LOWFRAG */
    if (cut && cut < b.n) b.n -= cut;
    if (emit(g, g->o.heap_header, G_HEAP, type, 2, ev->pid, tid, tick, &b) != 0) return -1;
    return s && ev->kind != CW_HEAP_FREE ? write_stack(g, ev->pid, tid, tick, s, true) : 0;
}

static int process(cw_etlgen_t *g, const cw_event_t *ev)
{
    uint64_t tick = tick_of(g, ev->ts);
    uint32_t tid = ev->tid ? ev->tid : ev->pid + 4;
    bool start = ev->op == CW_OP_PROCESS_START;
    bool rundown = start && ev->ts == g->o.w.start_ns;
    cw_etlw_buf_t b = buf(g);
    cw_etlw_process(&b, (unsigned)g->o.process_version, g->ptr, ev->pid, 4,
                    start ? ev->name : "exited.exe", start ? ev->cmdline : NULL);
    unsigned type = start ? (rundown ? 3 : 1) : 2;
    if (emit(g, CW_ETLW_SYSTEM, G_PROCESS, type, (unsigned)g->o.process_version, ev->pid, tid, tick,
             &b) != 0)
        return -1;
    if (start) {
        pidmods_t *p = pid_mods(g, ev->pid); /* a new instance loads its modules again */
        if (p->words) memset(p->loaded, 0, p->words * sizeof *p->loaded);
        b = buf(g);
        cw_etlw_thread(&b, g->ptr, ev->pid, tid);
        if (emit(g, CW_ETLW_SYSTEM, G_THREAD, rundown ? 3 : 1, 3, ev->pid, tid, tick, &b) != 0)
            return -1;
        return g->o.preload ? preload(g, ev->pid, tid, tick, rundown) : 0;
    }
    return 0;
}

int cw_etlgen_event(cw_etlgen_t *g, const cw_event_t *ev)
{
    if (ev->rundown) return 0;
    if (g->has_pending) {
        const cw_event_t *p = &g->pending;
        if (ev->op == CW_OP_COMMIT && ev->ts == p->ts && ev->pid == p->pid &&
            ev->addr == p->addr && ev->size == p->size) {
            g->has_pending = false;
            return write_valloc(g, ev, 0x3000);
        }
        if (flush_pending(g) != 0) return -1;
    }
    next_cpu(g, ev->ts);
    switch (ev->op) {
    case CW_OP_COMMIT: return write_valloc(g, ev, 0x1000);
    case CW_OP_DECOMMIT: return write_valloc(g, ev, 0x4000);
    case CW_OP_RELEASE: return write_valloc(g, ev, 0x8000);
    case CW_OP_RESERVE:
        g->pending = *ev;
        g->has_pending = true;
        return 0;
    case CW_OP_PROCESS_START:
    case CW_OP_PROCESS_EXIT: return process(g, ev);
    default: return 0;
    }
}

int cw_etlgen_open(const char *path, const cw_etlgen_opts_t *o, cw_etlgen_t **out)
{
    cw_etlgen_t *g = calloc(1, sizeof *g);
    if (!g) return -1;
    g->o = *o;
    if (!g->o.w.ncpu) g->o.w.ncpu = 1;
    if (!g->o.w.freq) g->o.w.freq = 10000000;
    if (!g->o.process_version) g->o.process_version = 4;
    if (!g->o.image_version) g->o.image_version = 3;
    g->ptr = o->w.ptr_size;
    if (cw_etlw_open(path, &g->o.w, &g->w) != 0) {
        free(g);
        return -1;
    }
    /* The kernel image, in the system process's rundown. */
    cw_etlw_buf_t b = buf(g);
    cw_etlw_image(&b, (unsigned)g->o.image_version, g->ptr, kernel_base(g), 0x1000000, 0,
                  "\\SystemRoot\\system32\\ntoskrnl.exe");
    if (emit(g, CW_ETLW_SYSTEM, G_IMAGE, 3, (unsigned)g->o.image_version, 0, 0, g->o.w.start_tick,
             &b) != 0) {
        cw_etlw_close(g->w);
        free(g);
        return -1;
    }
    *out = g;
    return 0;
}

static bool hidden(const char *fn, const char *const *hide, size_t nhide)
{
    for (size_t i = 0; i < nhide; i++)
        if (strncmp(fn, hide[i], strlen(hide[i])) == 0) return true;
    return false;
}

int cw_etlgen_write_images(const cw_etlgen_t *g, const char *dir, const char *const *hide,
                           size_t nhide)
{
    cw_pew_export_t *ex = malloc((g->nfuncs + 2) * sizeof *ex);
    char path[1024];
    int rc = ex ? 0 : -1;
    for (size_t m = 0; m < g->nmods && rc == 0; m++) {
        if (g->mods[m].given) continue;
        size_t n = 0;
        for (size_t i = 0; i < g->nfuncs; i++) {
            const char *bang = strchr(g->funcs[i].text, '!');
            if (g->funcs[i].module != m || !bang || !bang[1] || hidden(bang + 1, hide, nhide))
                continue;
            ex[n++] = (cw_pew_export_t){bang + 1, g->funcs[i].offset};
        }
        snprintf(path, sizeof path, "%s/%s", dir, g->mods[m].name);
        rc = cw_pew_write(path, g->mods[m].name, g->ptr == 8, ex, n, (uint32_t)g->mods[m].size);
    }
    if (rc == 0) {
        static const cw_pew_export_t kernel[] = {{"NtAllocateVirtualMemory", 0x2000},
                                                 {"MiAllocateVirtualMemory", 0x3000}};
        size_t n = 0;
        for (size_t i = 0; i < 2; i++)
            if (!hidden(kernel[i].name, hide, nhide)) ex[n++] = kernel[i];
        snprintf(path, sizeof path, "%s/ntoskrnl.exe", dir);
        rc = cw_pew_write(path, "ntoskrnl.exe", g->ptr == 8, ex, n, 0x1000000);
    }
    free(ex);
    return rc;
}

void cw_etlgen_map_json(const cw_etlgen_t *g, FILE *f)
{
    fprintf(f, "{\"frames\": {");
    for (size_t i = 0; i < g->nfuncs; i++) {
        const func_t *fn = &g->funcs[i];
        fprintf(f, "%s\"", i ? ", " : "");
        for (const char *c = fn->text; *c; c++) {
            if (*c == '"' || *c == '\\') fputc('\\', f);
            fputc(*c, f);
        }
        fprintf(f, "\": \"");
        for (const char *c = g->mods[fn->module].name; *c; c++)
            fputc(*c >= 'A' && *c <= 'Z' ? *c - 'A' + 'a' : *c, f);
        fprintf(f, "!+0x%x\"", fn->offset);
    }
    fprintf(f, "}, \"kernel\": [\"ntoskrnl.exe!+0x2000\", \"ntoskrnl.exe!+0x3000\"]}\n");
}

int cw_etlgen_close(cw_etlgen_t *g)
{
    int rc = flush_pending(g);
    uint64_t tick = tick_of(g, g->any ? g->last_ts : g->o.w.start_ns);
    if (g->o.stacks == CW_ETLGEN_KEYS && rc == 0) {
        /* The cache's rundown at the end: every key's frames. */
        uint64_t kb = kernel_base(g), kfr[2] = {kb + 0x3000, kb + 0x2000};
        cw_etlw_buf_t b = buf(g);
        cw_etlw_stackdef(&b, g->ptr, 0x8, kfr, 2);
        rc = emit(g, CW_ETLW_PERFINFO, G_STACK, 36, 2, 0, 0, tick, &b);
        for (size_t i = 0; i < g->nstacks && rc == 0; i++) {
            stackinfo_t *s = &g->stacks[i];
            if (!s->key) continue;
            uint64_t *fr = g->fr;
            for (uint32_t j = 0; j < s->n; j++) {
                const func_t *f = &g->funcs[s->funcs[s->n - 1 - j]];
                fr[j] = module_base(g, f->module) + f->offset;
            }
            b = buf(g);
            cw_etlw_stackdef(&b, g->ptr, s->key, fr, s->n);
            rc = emit(g, CW_ETLW_PERFINFO, G_STACK, 36, 2, 0, 0, tick, &b);
        }
    }
    if (cw_etlw_close(g->w) != 0) rc = -1;
    for (size_t i = 0; i < g->nfuncs; i++) free(g->funcs[i].text);
    for (size_t i = 0; i < g->nmods; i++) free(g->mods[i].name);
    for (size_t i = 0; i < g->nstacks; i++) free(g->stacks[i].funcs);
    for (size_t i = 0; i < g->npids; i++) free(g->pids[i].loaded);
    free(g->funcs);
    free(g->mods);
    free(g->stacks);
    free(g->pids);
    free(g);
    return rc;
}
