/* replay.c - the replay source: a JSONL v1 trace file, streamed, as fast
 * as possible or paced like a live source.
 *
 * Pacing (--speed X): the first event is due now, each later one when
 * (ts - first ts) / X has passed on the monotonic clock: a step of the
 * wall clock (NTP, an administrator) neither stalls the replay (a step
 * back) nor rushes it (forward), and the events keep their own times. While it waits the source
 * ticks, so buckets close and reach the dashboard as they would live; a
 * tick never passes the event about to be delivered (a tick is a
 * promise). --rebase-now shifts every time by (now - first ts), so an old
 * trace replays as if it were happening now. */
#include <stdatomic.h>
#include <stdlib.h>

#include "commitwatch/platform.h"
#include "commitwatch/source.h"
#include "commitwatch/trace.h"

/* Longest sleep between two ticks while pacing. */
#define TICK_NS 200000000LL

typedef struct replay {
    cw_trace_reader_t *reader;
    atomic_bool stop;
    bool rebase;
    double speed;
    bool started;
    int64_t shift;      /* added to every ts (rebase) */
    int64_t mono0, ts0; /* pacing origin: monotonic time of the first event, its ts */
} replay_t;

static int replay_open(void **impl, const cw_source_opts_t *o, cw_diag_t *d)
{
    replay_t *r;
    int rc;
    if (!o->arg || !*o->arg)
        return cw_diag_set(d, CW_EUSAGE, "--source replay needs a file: --source replay:PATH");
    if (!(o->speed >= 0)) return cw_diag_set(d, CW_EUSAGE, "--speed takes a positive number");
    if (!(r = calloc(1, sizeof *r))) return CW_ENOMEM;
    atomic_init(&r->stop, false);
    r->rebase = o->rebase_now;
    r->speed = o->speed;
    if ((rc = cw_trace_reader_open(o->arg, o->stacks, &r->reader, d)) != 0) {
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

/* Waits until ev is due, ticking. 0 (also when stopped: the caller checks
 * the flag) or the tick's error. */
static int pace(replay_t *r, const cw_source_sink_t *sink, int64_t ts)
{
    int64_t due = r->mono0 + (int64_t)((double)(ts - r->ts0) / r->speed);
    for (int64_t now = cw_plat_mono_ns(); now < due && !atomic_load(&r->stop);
         now = cw_plat_mono_ns()) {
        cw_plat_sleep_ns(due - now < TICK_NS ? due - now : TICK_NS);
        int64_t t = (int64_t)((double)(cw_plat_mono_ns() - r->mono0) * r->speed) + r->ts0;
        if (!sink->tick) continue;
        int rc = sink->tick(sink->ctx, (t < ts ? t : ts) + r->shift);
        if (rc) return rc;
    }
    return 0;
}

static int replay_run(void *impl, const cw_source_sink_t *sink, cw_diag_t *d)
{
    replay_t *r = impl;
    cw_event_t ev;
    int rc;
    while (!atomic_load(&r->stop)) {
        rc = cw_trace_reader_next(r->reader, &ev, d);
        if (rc <= 0) return rc;
        if (!r->started) {
            r->started = true;
            r->mono0 = cw_plat_mono_ns();
            r->ts0 = ev.ts;
            if (r->rebase) r->shift = cw_plat_wall_ns() - ev.ts;
        }
        if (r->speed > 0) {
            if ((rc = pace(r, sink, ev.ts)) != 0) return rc;
            if (atomic_load(&r->stop)) return 0;
        }
        ev.ts += r->shift;
        if ((rc = sink->emit(sink->ctx, &ev)) != 0) return rc;
    }
    return 0;
}

static void replay_stop(void *impl)
{
    atomic_store(&((replay_t *)impl)->stop, true);
}

static void replay_close(void *impl)
{
    replay_t *r = impl;
    if (!r) return;
    cw_trace_reader_close(r->reader);
    free(r);
}

static int replay_commit_limit(void *impl, uint64_t *bytes, const char **why)
{
    *bytes = cw_trace_reader_header(((replay_t *)impl)->reader)->commit_limit;
    *why = "the trace's header has no \"commit_limit\"";
    return *bytes ? 0 : CW_ENOENT;
}

/* Every source fills in this table (source.h): the tables are alike by design. */
const cw_source_ops_t cw_source_replay = {
    .name = "replay",
    .open = replay_open,
    .platform = replay_platform,
    .run = replay_run,
    .stop = replay_stop,
    .close = replay_close,
    .commit_limit = replay_commit_limit,
};
