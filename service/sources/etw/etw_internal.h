/* etw_internal.h - what the files of the Windows sources share
 * (service/sources/etw/): the rundown walk (rundown.c) and the snapshot
 * source built on it (snapshot.c). Windows only. */
#ifndef CW_ETW_INTERNAL_H
#define CW_ETW_INTERNAL_H

#include <stdatomic.h>
#include <stdint.h>

#include "commitwatch/error.h"
#include "commitwatch/source.h"
#include "commitwatch/stacks.h"

typedef struct cw_etw_rundown_stats {
    uint32_t processes;       /* in the snapshot (the idle process aside) */
    uint32_t opened;          /* walked */
    uint32_t unopened;        /* could not be opened: counted, not fatal */
    uint64_t regions;         /* rundown commits emitted */
    uint64_t bytes;           /* their bytes */
    char unopened_names[512]; /* "System (4), ..." (truncated) */
} cw_etw_rundown_stats_t;

/* Emits, at time ts, a process_start and the rundown commits (stacked
 * "(before trace)", interned into stacks) of every process it can open.
 * *stop (set by the source's stop()) ends it between processes. 0, the
 * sink's error, or CW_EIO / CW_ENOMEM with d filled. */
int cw_etw__rundown(cw_stacks_t *stacks, const cw_source_sink_t *sink, int64_t ts,
                    atomic_bool *stop, cw_etw_rundown_stats_t *st, cw_diag_t *d);

#endif
