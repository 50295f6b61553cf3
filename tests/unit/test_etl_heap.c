/* test_etl_heap.c - the Heap class of an .etl (etl.h: cw_etl_decode_heap,
 * cw_etl_heap_read): the decoder on payloads laid out as documented
 * (docs/ETW.md, "Heap events"), then the heap truth (tests/etlgen/heap_gen.h)
 * written as 64- and 32-bit traces with stacks as walks and as keys, the
 * heap events with SYSTEM headers (hook id) and FULL ones (class GUID), read
 * into a heap model: exactly the leaked bytes and count at leak_here, 0
 * outstanding at churn, the ReAlloc chain at grow, the frees of blocks from
 * before the trace counted as unknown, the frames named from the images;
 * --pid's filter; and the bad inputs: an Alloc too short for its layout (a
 * counted skip, the rest read), a file without heap events, a truncated
 * file (read as far as it goes). Runs in the Windows build under Wine too. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "commitwatch/etl.h"
#include "commitwatch/heap.h"
#include "commitwatch/stacks.h"
#include "etl_gen.h"
#include "heap_gen.h"
#include "test.h"
#include "test_port.h"

static char dir[1024], images[1200];

static const char *path_of(const char *name)
{
    static char p[1400];
    snprintf(p, sizeof p, "%s/%s", dir, name);
    return p;
}

/* ---- the decoder ---- */

/* A Heap payload: the pointer-sized fields v[0..n-1), each of ptr bytes,
 * then Source (v[n-1]) as a u32, little-endian. Its length. */
static size_t payload(uint8_t *b, unsigned ptr, const uint64_t *v, size_t n)
{
    size_t at = 0;
    for (size_t k = 0; k < n; k++)
        for (unsigned i = 0; i < (k + 1 < n ? ptr : 4); i++)
            b[at++] = (uint8_t)(v[k] >> (8 * i));
    return at;
}

static void decoder(void)
{
    uint8_t b[64];
    cw_etl_heap_t h;
    /* Alloc, 64-bit: HeapHandle, Size, Address, Source. */
    size_t n = payload(b, 8, (const uint64_t[]){0x1E0000, 0x48, 0x1E5A30, 2}, 4);
    ASSERT_OK(cw_etl_decode_heap(b, n, CW_ETL_T_HEAP_ALLOC, 2, 8, &h));
    ASSERT_U64_EQ(h.heap, 0x1E0000);
    ASSERT_U64_EQ(h.size, 0x48);
    ASSERT_U64_EQ(h.addr, 0x1E5A30);
    ASSERT_EQ(h.source, 2);
    ASSERT_EQ(cw_etl_decode_heap(b, n - 1, CW_ETL_T_HEAP_ALLOC, 2, 8, &h), CW_EPARSE);
    ASSERT_EQ(cw_etl_decode_heap(b, n, CW_ETL_T_HEAP_ALLOC, 3, 8, &h), CW_ENOSYS);
    ASSERT_EQ(cw_etl_decode_heap(b, n, 0x20, 2, 8, &h), CW_ENOSYS); /* HeapCreate */
    /* ReAlloc, 32-bit: HeapHandle, NewAddress, OldAddress, NewSize, OldSize, Source. */
    n = payload(b, 4, (const uint64_t[]){0x3A0000, 0x3A2000, 0x3A1000, 300, 100, 3}, 6);
    ASSERT_EQ(n, 24);
    ASSERT_OK(cw_etl_decode_heap(b, n, CW_ETL_T_HEAP_REALLOC, 2, 4, &h));
    ASSERT_U64_EQ(h.addr, 0x3A2000);
    ASSERT_U64_EQ(h.old_addr, 0x3A1000);
    ASSERT_U64_EQ(h.size, 300);
    ASSERT_U64_EQ(h.old_size, 100);
    ASSERT_EQ(h.source, 3);
    /* Free, 64-bit: HeapHandle, Address, Source; one byte short. */
    n = payload(b, 8, (const uint64_t[]){0x1E0000, 0x1E5A30, 1}, 3);
    ASSERT_EQ(n, 20);
    ASSERT_OK(cw_etl_decode_heap(b, n, CW_ETL_T_HEAP_FREE, 2, 8, &h));
    ASSERT_U64_EQ(h.addr, 0x1E5A30);
    ASSERT_U64_EQ(h.size, 0);
    ASSERT_EQ(cw_etl_decode_heap(b, n - 1, CW_ETL_T_HEAP_FREE, 2, 8, &h), CW_EPARSE);
    ASSERT_EQ(cw_etl_decode_heap(b, n, CW_ETL_T_HEAP_FREE, 2, 2, &h), CW_ENOSYS);
}

/* ---- the truth ---- */

typedef struct read {
    cw_stacks_t *stacks;
    cw_heap_model_t *m;
    cw_heap_report_t *r;
    cw_etl_heap_result_t res;
} read_t;

static int read_file(const char *file, uint32_t pid, read_t *x)
{
    memset(x, 0, sizeof *x);
    ASSERT_OK(cw_stacks_create(&x->stacks));
    ASSERT_OK(cw_heap_model_create(1700000000000000000LL, &x->m));
    cw_diag_t d = {{0}};
    cw_etl_heap_opts_t o = {.path = file, .pid = pid, .images = images};
    int rc = cw_etl_heap_read(&o, x->stacks, x->m, &x->res, &d);
    if (rc) return rc;
    ASSERT_OK(cw_heap_model_report(x->m, x->stacks, &x->res.losses, &x->r));
    return 0;
}

static void read_free(read_t *x)
{
    cw_heap_report_free(x->r);
    cw_heap_model_destroy(x->m);
    cw_stacks_destroy(x->stacks);
}

static const cw_heap_proc_report_t *proc_of(const cw_heap_report_t *r, uint32_t pid)
{
    for (uint32_t i = 0; i < r->nprocs; i++)
        if (r->procs[i].pid == pid) return &r->procs[i];
    CW_FAIL("no process %u in the report", pid);
    return NULL;
}

/* The stack whose caller of the heap function is fn (frames outermost
 * first: main, fn, the heap's own). */
static const cw_heap_figs_t *stack_of(const cw_heap_proc_report_t *p, const char *fn)
{
    for (uint32_t i = 0; i < p->nstacks; i++) {
        const cw_heap_stack_report_t *s = &p->stacks[i];
        if (s->nframes >= 2 && strcmp(s->frames[s->nframes - 2], fn) == 0) return &s->figs;
    }
    CW_FAIL("no stack with %s in process %u", fn, p->pid);
    return NULL;
}

static void write_truth(const char *file, unsigned ptr, int stacks, bool compress, bool full,
                        int variant)
{
    cw_heapgen_opts_t o = {.ptr_size = ptr,
                           .stacks = stacks,
                           .compress = compress,
                           .full_header = full,
                           .variant = variant,
                           .images = images};
    ASSERT_OK(cw_heapgen_write(file, &o));
}

static void truth(unsigned ptr, int stacks, bool compress, bool full)
{
    const char *file = path_of("truth.etl");
    write_truth(file, ptr, stacks, compress, full, CW_HEAPGEN_WHOLE);
    read_t x;
    ASSERT_OK(read_file(file, 0, &x));
    ASSERT_U64_EQ(x.res.heap_events, 7 + 100 + 4 + 3 + 1);
    ASSERT_U64_EQ(x.res.heap_applied, x.res.heap_events);
    ASSERT_U64_EQ(x.res.heap_skipped, 0);
    ASSERT_U64_EQ(x.res.stacks.joined, 7 + 50 + 4 + 1);
    ASSERT_TRUE(!x.res.truncated);
    ASSERT_U64_EQ(x.r->unknown_frees, CW_HEAPGEN_UNKNOWN_FREES);
    ASSERT_EQ(x.r->nprocs, 2);

    const cw_heap_proc_report_t *p = proc_of(x.r, CW_HEAPGEN_PID);
    ASSERT_STR_EQ(p->name, "heaptruth.exe");
    ASSERT_U64_EQ(p->totals.outstanding_bytes, CW_HEAPGEN_LEAK_BYTES + CW_HEAPGEN_GROW_LIVE_BYTES);
    ASSERT_U64_EQ(p->totals.outstanding_count, CW_HEAPGEN_LEAK_COUNT + 1);
    /* The leak: largest outstanding first, its frames as the images name them. */
    const cw_heap_stack_report_t *top = &p->stacks[0];
    ASSERT_EQ(top->nframes, 3);
    ASSERT_STR_EQ(top->frames[0], "heaptruth.exe!main");
    ASSERT_STR_EQ(top->frames[1], "heaptruth.exe!leak_here");
    ASSERT_STR_EQ(top->frames[2], "ntdll.dll!RtlAllocateHeap");
    const cw_heap_figs_t *f = stack_of(p, "heaptruth.exe!leak_here");
    ASSERT_U64_EQ(f->outstanding_bytes, CW_HEAPGEN_LEAK_BYTES);
    ASSERT_U64_EQ(f->outstanding_count, CW_HEAPGEN_LEAK_COUNT);
    ASSERT_U64_EQ(f->alloc_bytes, CW_HEAPGEN_LEAK_BYTES);
    ASSERT_U64_EQ(f->freed_count, 0);
    f = stack_of(p, "heaptruth.exe!churn");
    ASSERT_U64_EQ(f->outstanding_bytes, 0);
    ASSERT_U64_EQ(f->outstanding_count, 0);
    ASSERT_U64_EQ(f->alloc_bytes, CW_HEAPGEN_CHURN_BYTES);
    ASSERT_U64_EQ(f->alloc_count, CW_HEAPGEN_CHURN_COUNT);
    ASSERT_U64_EQ(f->freed_bytes, CW_HEAPGEN_CHURN_BYTES);
    ASSERT_U64_EQ(f->freed_count, CW_HEAPGEN_CHURN_COUNT);
    ASSERT_U64_EQ(f->peak_bytes, 64);
    f = stack_of(p, "heaptruth.exe!grow");
    ASSERT_U64_EQ(f->outstanding_bytes, CW_HEAPGEN_GROW_LIVE_BYTES);
    ASSERT_U64_EQ(f->outstanding_count, 1);
    ASSERT_U64_EQ(f->alloc_bytes, CW_HEAPGEN_GROW_ALLOC_BYTES);
    ASSERT_U64_EQ(f->alloc_count, 4);
    ASSERT_U64_EQ(f->freed_bytes, CW_HEAPGEN_GROW_FREED_BYTES);
    ASSERT_U64_EQ(f->freed_count, 3);
    ASSERT_U64_EQ(f->peak_bytes, CW_HEAPGEN_GROW_LIVE_BYTES);
    /* The other process: its own block at an address heaptruth.exe used too. */
    p = proc_of(x.r, CW_HEAPGEN_OTHER_PID);
    ASSERT_STR_EQ(p->name, "other.exe");
    ASSERT_U64_EQ(p->totals.outstanding_bytes, CW_HEAPGEN_OTHER_BYTES);
    ASSERT_U64_EQ(stack_of(p, "other.exe!main")->outstanding_count, 1);
    read_free(&x);

    /* --pid: that process's events only. */
    ASSERT_OK(read_file(file, CW_HEAPGEN_PID, &x));
    ASSERT_EQ(x.r->nprocs, 1);
    ASSERT_EQ(x.r->procs[0].pid, CW_HEAPGEN_PID);
    ASSERT_U64_EQ(x.res.heap_other, 1);
    ASSERT_U64_EQ(x.r->procs[0].totals.outstanding_bytes,
                  CW_HEAPGEN_LEAK_BYTES + CW_HEAPGEN_GROW_LIVE_BYTES);
    read_free(&x);
}

/* ---- bad input ---- */

/* A 64-bit trace of the variant, read whole. */
static void read_variant(const char *name, int variant, read_t *x)
{
    const char *file = path_of(name);
    write_truth(file, 8, CW_ETLGEN_WALK, false, false, variant);
    ASSERT_OK(read_file(file, 0, x));
}

static void short_event(void)
{
    read_t x;
    read_variant("short.etl", CW_HEAPGEN_SHORT, &x);
    ASSERT_U64_EQ(x.res.heap_skipped, 1);
    ASSERT_TRUE(strstr(x.res.skips, "Heap/33 v2: 1 (payload too short or malformed)") != NULL);
    const cw_heap_figs_t *f = stack_of(proc_of(x.r, CW_HEAPGEN_PID), "heaptruth.exe!leak_here");
    ASSERT_U64_EQ(f->outstanding_bytes, CW_HEAPGEN_LEAK_BYTES - 100);
    ASSERT_U64_EQ(f->outstanding_count, CW_HEAPGEN_LEAK_COUNT - 1);
    read_free(&x);
}

static void no_heap(void)
{
    read_t x;
    read_variant("noheap.etl", CW_HEAPGEN_NO_HEAP, &x);
    ASSERT_U64_EQ(x.res.heap_events, 0);
    ASSERT_TRUE(x.res.events > 0);
    ASSERT_U64_EQ(x.r->events, 0);
    read_free(&x);
}

static void truncated(void)
{
    const char *file = path_of("truth.etl"), *cut = path_of("cut.etl");
    write_truth(file, 8, CW_ETLGEN_WALK, false, false, CW_HEAPGEN_WHOLE);
    FILE *in = fopen(file, "rb");
    ASSERT_TRUE(in != NULL);
    static uint8_t buf[1 << 20];
    size_t n = fread(buf, 1, sizeof buf, in);
    fclose(in);
    ASSERT_TRUE(n > 65536 && n < sizeof buf); /* the header buffer and more */
    FILE *out = fopen(cut, "wb");
    ASSERT_TRUE(out != NULL);
    size_t keep = n - 100; /* inside the last buffer: one CPU's events */
    ASSERT_EQ(fwrite(buf, 1, keep, out), keep);
    ASSERT_EQ(fclose(out), 0);
    read_t x;
    ASSERT_OK(read_file(cut, 0, &x));
    ASSERT_TRUE(x.res.truncated);
    ASSERT_TRUE(x.res.heap_applied > 0 && x.res.heap_applied < 115);
    read_free(&x);
}

int main(void)
{
    decoder();
    const char *build = getenv("CW_BUILD");
    snprintf(dir, sizeof dir, "%s/test_etl_heap.XXXXXX", build ? build : ".");
    ASSERT_TRUE(cw_test_mkdtemp(dir) != NULL);
    snprintf(images, sizeof images, "%s", dir);
    truth(8, CW_ETLGEN_WALK, false, false);
    truth(8, CW_ETLGEN_KEYS, true, false);
    truth(4, CW_ETLGEN_WALK, true, false);
    truth(4, CW_ETLGEN_KEYS, false, false);
    /* As a user-mode classic provider writes them: FULL headers, the class GUID. */
    truth(8, CW_ETLGEN_KEYS, false, true);
    truth(4, CW_ETLGEN_WALK, true, true);
    short_event();
    no_heap();
    truncated();
    ASSERT_OK(cw_test_rmtree(dir)); /* the traces and images this run wrote */
    TEST_DONE();
}
