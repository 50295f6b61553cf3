/* replay.c - the replay source: a JSONL v1 trace file, streamed. */
#include <signal.h>
#include <stdlib.h>

#include "commitwatch/source.h"
#include "commitwatch/trace.h"

typedef struct replay {
    cw_trace_reader_t *reader;
    volatile sig_atomic_t stop;
} replay_t;

static int replay_open(void **impl, const char *arg, cw_stacks_t *stacks, cw_diag_t *d)
{
    replay_t *r;
    int rc;
    if (!arg || !*arg)
        return cw_diag_set(d, CW_EINVAL, "--source replay needs a file: --source replay:PATH");
    if (!(r = calloc(1, sizeof *r))) return CW_ENOMEM;
    if ((rc = cw_trace_reader_open(arg, stacks, &r->reader, d)) != 0) {
        free(r);
        return rc;
    }
    *impl = r;
    return 0;
}

static const char *replay_platform(void *impl)
{
    return cw_trace_reader_header(((replay_t *)impl)->reader)->platform;
}

static int replay_run(void *impl, const cw_source_sink_t *sink, cw_diag_t *d)
{
    replay_t *r = impl;
    cw_event_t ev;
    int rc;
    while (!r->stop) {
        rc = cw_trace_reader_next(r->reader, &ev, d);
        if (rc <= 0) return rc;
        if ((rc = sink->emit(sink->ctx, &ev)) != 0) return rc;
    }
    return 0;
}

static void replay_stop(void *impl)
{
    ((replay_t *)impl)->stop = 1;
}

static void replay_close(void *impl)
{
    replay_t *r = impl;
    if (!r) return;
    cw_trace_reader_close(r->reader);
    free(r);
}

const cw_source_ops_t cw_source_replay = {
    "replay", replay_open, replay_platform, replay_run, replay_stop, replay_close,
};
