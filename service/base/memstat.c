/* memstat.c - the process-wide memory account (memstat.h). */
#include "commitwatch/memstat.h"

#include <stdatomic.h>


static _Atomic int64_t figures[CW_MEM_N];

static const char *const names[CW_MEM_N] = {
    [CW_MEM_PERF_RINGS] = "perf_rings",     [CW_MEM_PERF_QUEUE] = "perf_queue",
    [CW_MEM_PERF_PROCS] = "perf_processes", [CW_MEM_UNWINDER] = "unwinder",
    [CW_MEM_TRACKER] = "tracker",           [CW_MEM_STACKS] = "stacks",
    [CW_MEM_ALERT_SERIES] = "alert_series", [CW_MEM_STORE_ROLLUPS] = "store_rollups",
    [CW_MEM_STORE_CACHES] = "store_caches", [CW_MEM_HEAP_TRACES] = "heap_traces",
};

const char *cw_mem_name(cw_mem_comp_t c)
{
    return (unsigned)c < CW_MEM_N ? names[c] : "?";
}

void cw_mem_set(cw_mem_comp_t c, int64_t bytes)
{
    if ((unsigned)c < CW_MEM_N) atomic_store_explicit(&figures[c], bytes, memory_order_relaxed);
}

void cw_mem_add(cw_mem_comp_t c, int64_t delta)
{
    if ((unsigned)c < CW_MEM_N) atomic_fetch_add_explicit(&figures[c], delta, memory_order_relaxed);
}

int64_t cw_mem_get(cw_mem_comp_t c)
{
    return (unsigned)c < CW_MEM_N ? atomic_load_explicit(&figures[c], memory_order_relaxed) : 0;
}
