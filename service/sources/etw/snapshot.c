/* snapshot.c - the "rundown" source (Windows): one snapshot of every
 * process's committed private memory now, as rundown commits, then the
 * end of input. `commitwatch record --source rundown --out snap.jsonl`
 * writes it as a trace; `run --source rundown` stores and serves it. The
 * live ETW source starts with the same walk (rundown.c). */
#include <stdatomic.h>
#include <stdlib.h>

#include "commitwatch/log.h"
#include "commitwatch/platform.h"
#include "sources/etw/etw_internal.h"

typedef struct snapshot {
    cw_stacks_t *stacks;
    atomic_bool stop;
} snapshot_t;

static int snap_open(void **impl, const cw_source_opts_t *o, cw_diag_t *d)
{
    if (o->arg && o->arg[0]) return cw_diag_set(d, CW_EUSAGE, "--source rundown takes no argument");
    snapshot_t *s = calloc(1, sizeof *s);
    if (!s) return cw_diag_set(d, CW_ENOMEM, "out of memory");
    s->stacks = o->stacks;
    atomic_init(&s->stop, false);
    *impl = s;
    return 0;
}

static int snap_run(void *impl, const cw_source_sink_t *sink, cw_diag_t *d)
{
    snapshot_t *s = impl;
    cw_etw_rundown_stats_t st;
    int rc = cw_etw__rundown(s->stacks, sink, cw_plat_wall_ns(), &s->stop, &st, d);
    if (rc) return rc;
    CW_LOGI(
        "rundown: %u processes, %u walked (%llu committed private regions, %llu bytes; %llu "
        "reserved, %llu bytes), %u could not be opened%s%s",
        st.processes, st.opened, (unsigned long long)st.regions, (unsigned long long)st.bytes,
        (unsigned long long)st.reserved, (unsigned long long)st.reserved_bytes, st.unopened,
        st.unopened ? ": " : "", st.unopened_names);
    if (sink->counters) sink->counters(sink->ctx, st.regions + st.reserved + st.opened, 0, 0);
    return 0;
}

static void snap_stop(void *impl)
{
    atomic_store(&((snapshot_t *)impl)->stop, true);
}

static void snap_close(void *impl)
{
    free(impl);
}

/* Every source fills in this table (source.h): the tables are alike by design. */
const cw_source_ops_t cw_source_rundown = {
    .name = "rundown",
    .fixed_platform = "windows",
    .open = snap_open,
    .run = snap_run,
    .stop = snap_stop,
    .close = snap_close,
};
