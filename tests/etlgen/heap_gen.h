/* heap_gen.h - the heap truth as a Windows trace: Heap Alloc, ReAlloc and
 * Free events with their stacks, of known figures, through etl_gen.h, for
 * the tests of `commitwatch heap --etl` (tests/unit/test_etl_heap.c,
 * tests/e2e/test_heap_etl.py, tests/e2e/test_win_heap.py).
 *
 * Process 4242 heaptruth.exe (started in the trace) and process 777
 * other.exe (alive at its start), each event 1 ms after the one before:
 * - leak_here: 7 blocks of 100, 200, ... 700 bytes, never freed;
 * - churn: 50 blocks of 64 bytes, each freed at once (0 outstanding);
 * - grow: a block of 16 bytes ReAlloc'd to 32 (moved), 64 (in place) and
 *   128 (moved), left live: 4 allocations of 240 bytes, 3 frees of 112;
 * - 3 Frees of blocks allocated before the trace (unknown frees);
 * - other.exe's main: one block of 999 bytes at an address heaptruth.exe
 *   also uses.
 * Frames are "heaptruth.exe!main", "heaptruth.exe!leak_here", ...,
 * "ntdll.dll!RtlAllocateHeap" (outermost first), named by the images
 * cw_etlgen_write_images() writes. Addresses are below 2 GB, so a 32-bit
 * trace holds the same ones. */
#ifndef CW_TESTS_HEAP_GEN_H
#define CW_TESTS_HEAP_GEN_H

#include <stdbool.h>

#define CW_HEAPGEN_PID 4242u
#define CW_HEAPGEN_OTHER_PID 777u
#define CW_HEAPGEN_LEAK_BYTES 2800u
#define CW_HEAPGEN_LEAK_COUNT 7u
#define CW_HEAPGEN_CHURN_BYTES 3200u
#define CW_HEAPGEN_CHURN_COUNT 50u
#define CW_HEAPGEN_GROW_ALLOC_BYTES 240u
#define CW_HEAPGEN_GROW_FREED_BYTES 112u
#define CW_HEAPGEN_GROW_LIVE_BYTES 128u
#define CW_HEAPGEN_UNKNOWN_FREES 3u
#define CW_HEAPGEN_OTHER_BYTES 999u

enum {
    CW_HEAPGEN_WHOLE,   /* as above */
    CW_HEAPGEN_SHORT,   /* the first leak_here Alloc 4 bytes short: refused, 6 blocks, 2700 bytes */
    CW_HEAPGEN_NO_HEAP, /* the processes only, no heap event */
};

typedef struct cw_heapgen_opts {
    unsigned ptr_size; /* 4 or 8 */
    int stacks;        /* CW_ETLGEN_WALK, _SPLIT (as WALK: user frames only), _KEYS */
    bool compress;
    bool full_header;   /* heap events with FULL headers (the class GUID), not SYSTEM */
    int variant;        /* CW_HEAPGEN_* */
    const char *images; /* non-NULL: the images are written into this folder (it exists) */
} cw_heapgen_opts_t;

/* Writes the trace to path. 0 or -1. */
int cw_heapgen_write(const char *path, const cw_heapgen_opts_t *o);

#endif
