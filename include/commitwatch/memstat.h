/* memstat.h - the daemon's memory, per component, for /api/health.
 *
 * One process-wide account: each component's owner sets (or adds to) its
 * figure in bytes as it allocates and frees; any thread reads. The figures
 * are what the component counts it holds (its own structures at their
 * allocated sizes), not what the allocator keeps around them. The process
 * totals (cw_plat_self_memory: resident, peak, C heap in use) say the
 * rest: heap in use minus the counted components and SQLite's own figure
 * is what nobody counts (libdw's internals, civetweb).
 *
 * Thread: every figure is an atomic of its own (relaxed); the owner named
 * at each component is its only writer. */
#ifndef COMMITWATCH_MEMSTAT_H
#define COMMITWATCH_MEMSTAT_H

#include <stddef.h>
#include <stdint.h>

typedef enum cw_mem_comp {
    CW_MEM_PERF_RINGS,  /* perf source: the kernel's ring buffers mapped (core thread) */
    CW_MEM_PERF_QUEUE,  /* perf source: records copied out, waiting to be merged */
    CW_MEM_PERF_PROCS,  /* perf source: processes (VMA shadows) and threads' pending calls */
    CW_MEM_UNWINDER,    /* perf source: module table, frame cache, symbol tables */
    CW_MEM_TRACKER,     /* tracker: live pieces and instances (core thread) */
    CW_MEM_STACKS,      /* interned stacks and frames (core thread) */
    CW_MEM_ALERT_SERIES, /* alert engine: the per-series history (alert thread) */
    CW_MEM_STORE_ROLLUPS, /* store: the open buckets' in-memory rollup sums (writer thread) */
    CW_MEM_STORE_CACHES, /* store: read handles' report caches and raw tails (each adds its own) */
    CW_MEM_HEAP_TRACES,  /* heap traces: each reader's model and stacks table (each adds its own) */
    CW_MEM_N
} cw_mem_comp_t;

/* The component's name in /api/health ("perf_rings", ...). */
const char *cw_mem_name(cw_mem_comp_t c);
void cw_mem_set(cw_mem_comp_t c, int64_t bytes);
void cw_mem_add(cw_mem_comp_t c, int64_t delta);
int64_t cw_mem_get(cw_mem_comp_t c);


#endif
