/* heap_gen.c - the heap truth as a Windows trace (heap_gen.h says what it
 * holds). */
#include "heap_gen.h"

#include "etl_gen.h"

#define MS 1000000LL
#define T0 1700000000000000000LL

enum { S_LEAK = 1, S_CHURN, S_GROW, S_OTHER, NSTACKS };

static const char *const leak_fr[] = {"heaptruth.exe!main", "heaptruth.exe!leak_here",
                                      "ntdll.dll!RtlAllocateHeap"};
static const char *const churn_fr[] = {"heaptruth.exe!main", "heaptruth.exe!churn",
                                       "ntdll.dll!RtlAllocateHeap"};
static const char *const grow_fr[] = {"heaptruth.exe!main", "heaptruth.exe!grow",
                                      "ntdll.dll!RtlReAllocateHeap"};
static const char *const other_fr[] = {"other.exe!main", "ntdll.dll!RtlAllocateHeap"};

static const char *const *frames(void *ctx, uint32_t id, uint32_t *n)
{
    (void)ctx;
    *n = id == S_OTHER ? 2 : id > 0 && id < NSTACKS ? 3 : 0;
    return id == S_LEAK    ? leak_fr
           : id == S_CHURN ? churn_fr
           : id == S_GROW  ? grow_fr
           : id == S_OTHER ? other_fr
                           : NULL;
}

typedef struct gen {
    cw_etlgen_t *g;
    int64_t ts;
    int rc;
    int variant;
    bool cut_next; /* the next Alloc goes out short (CW_HEAPGEN_SHORT) */
} gen_t;

static void heap(gen_t *s, cw_heap_kind_t kind, uint32_t pid, uint64_t addr, uint64_t size,
                 uint64_t old, uint32_t stack)
{
    s->ts += MS;
    if (s->rc || s->variant == CW_HEAPGEN_NO_HEAP) return;
    cw_heap_ev_t ev = {.ts = s->ts,
                       .kind = kind,
                       .pid = pid,
                       .tid = pid + 4,
                       .addr = addr,
                       .size = size,
                       .old_addr = old,
                       .stack_id = stack};
    s->rc = cw_etlgen_heap(s->g, &ev, s->cut_next ? 4 : 0);
    s->cut_next = false;
}

static void proc(gen_t *s, uint32_t pid, int64_t ts, const char *name, const char *cmdline)
{
    cw_event_t ev = {
        .ts = ts, .op = CW_OP_PROCESS_START, .pid = pid, .name = name, .cmdline = cmdline};
    if (!s->rc) s->rc = cw_etlgen_event(s->g, &ev);
}

int cw_heapgen_write(const char *path, const cw_heapgen_opts_t *o)
{
    cw_etlgen_opts_t go = {.w = {.ptr_size = o->ptr_size,
                                 .ncpu = 2,
                                 .compress = o->compress,
                                 .start_ns = T0,
                                 .start_tick = 5000000000ull,
                                 .freq = 1000000000,
                                 .build = 19045},
                           .stacks = o->stacks,
                           .process_version = 4,
                           .image_version = 3,
                           .frames = frames,
                           .preload = true,
                           .heap_header = o->full_header ? CW_ETLW_FULL : CW_ETLW_SYSTEM};
    gen_t s = {.ts = T0, .variant = o->variant};
    if (cw_etlgen_open(path, &go, &s.g) != 0) return -1;
    for (uint32_t id = 1; id < NSTACKS; id++)
        cw_etlgen_know_stack(s.g, id);
    proc(&s, CW_HEAPGEN_OTHER_PID, T0, "other.exe", "other.exe");
    proc(&s, CW_HEAPGEN_PID, T0 + MS / 2, "heaptruth.exe", "heaptruth.exe --truth");
    const uint32_t P = CW_HEAPGEN_PID;
    s.cut_next = o->variant == CW_HEAPGEN_SHORT;
    for (uint64_t i = 0; i < 7; i++)
        heap(&s, CW_HEAP_ALLOC, P, 0x01000000 + i * 0x1000, 100 * (i + 1), 0, S_LEAK);
    for (int i = 0; i < 50; i++) {
        heap(&s, CW_HEAP_ALLOC, P, 0x02000000, 64, 0, S_CHURN);
        heap(&s, CW_HEAP_FREE, P, 0x02000000, 0, 0, 0);
    }
    heap(&s, CW_HEAP_ALLOC, P, 0x03000000, 16, 0, S_GROW);
    heap(&s, CW_HEAP_REALLOC, P, 0x03100000, 32, 0x03000000, S_GROW);
    heap(&s, CW_HEAP_REALLOC, P, 0x03100000, 64, 0x03100000, S_GROW);
    heap(&s, CW_HEAP_REALLOC, P, 0x03200000, 128, 0x03100000, S_GROW);
    for (uint64_t i = 0; i < 3; i++)
        heap(&s, CW_HEAP_FREE, P, 0x00500000 + i * 0x100, 0, 0, 0);
    heap(&s, CW_HEAP_ALLOC, CW_HEAPGEN_OTHER_PID, 0x01000000, 999, 0, S_OTHER);
    if (!s.rc && o->images && cw_etlgen_write_images(s.g, o->images, NULL, 0) != 0) s.rc = -1;
    if (cw_etlgen_close(s.g) != 0) s.rc = -1;
    return s.rc ? -1 : 0;
}
