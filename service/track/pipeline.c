/* pipeline.c - order check, bucket advance and tracking (see pipeline.h). */
#include "commitwatch/pipeline.h"

#include <inttypes.h>
#include <stdlib.h>

struct cw_pipeline {
    cw_tracker_t *tracker;
    cw_agg_t *agg;
    uint64_t events;
    int64_t first_ts, last_ts;
    int64_t watermark; /* last tick: no event may be older */
};

int cw_pipeline_create(const cw_tracker_sink_t *sink, cw_agg_t *agg, uint32_t first_proc_id,
                       cw_pipeline_t **out)
{
    cw_pipeline_t *p = calloc(1, sizeof *p);
    if (!p) return CW_ENOMEM;
    if (cw_tracker_create(sink, first_proc_id, &p->tracker) != 0) {
        free(p);
        return CW_ENOMEM;
    }
    p->agg = agg;
    p->first_ts = p->last_ts = p->watermark = INT64_MIN;
    *out = p;
    return 0;
}

void cw_pipeline_destroy(cw_pipeline_t *p)
{
    if (!p) return;
    cw_tracker_destroy(p->tracker);
    free(p);
}

int cw_pipeline_feed(cw_pipeline_t *p, const cw_event_t *ev, cw_diag_t *d)
{
    int rc;
    if (ev->ts < p->last_ts)
        return cw_diag_set(d, CW_ETIME,
                           "event at %" PRId64
                           " ns goes back in time (the previous one is at %" PRId64 " ns)",
                           ev->ts, p->last_ts);
    if (ev->ts < p->watermark)
        return cw_diag_set(d, CW_ETIME,
                           "event at %" PRId64
                           " ns arrived after the source promised nothing older than %" PRId64
                           " ns",
                           ev->ts, p->watermark);
    if (p->agg && (rc = cw_agg_advance(p->agg, ev->ts)) != 0)
        return cw_diag_set(d, rc, "storing a bucket failed: %s", cw_strerror(rc));
    if ((rc = cw_tracker_apply(p->tracker, ev)) != 0)
        return cw_diag_set(d, rc, "tracking failed: %s", cw_strerror(rc));
    if (p->events++ == 0) p->first_ts = ev->ts;
    p->last_ts = ev->ts;
    return 0;
}

int cw_pipeline_tick(cw_pipeline_t *p, int64_t now_ns)
{
    if (now_ns <= p->watermark || now_ns < p->last_ts) return 0;
    p->watermark = now_ns;
    return p->agg ? cw_agg_advance(p->agg, now_ns) : 0;
}

int cw_pipeline_end_all(cw_pipeline_t *p)
{
    int64_t last = p->last_ts > p->watermark ? p->last_ts : p->watermark;
    int rc;
    if (!p->agg || last == INT64_MIN || cw_tracker_live_processes(p->tracker) == 0) return 0;
    int64_t at = cw_agg_next_bucket(p->agg, last);
    if ((rc = cw_agg_advance(p->agg, at)) != 0) return rc;
    cw_tracker_end_all(p->tracker, at);
    p->last_ts = at;
    return 0;
}

void cw_pipeline_finish(cw_pipeline_t *p)
{
    cw_tracker_finish(p->tracker);
}

uint64_t cw_pipeline_events(const cw_pipeline_t *p)
{
    return p->events;
}

int64_t cw_pipeline_first_ts(const cw_pipeline_t *p)
{
    return p->first_ts;
}

int64_t cw_pipeline_last_ts(const cw_pipeline_t *p)
{
    return p->last_ts;
}

cw_tracker_t *cw_pipeline_tracker(cw_pipeline_t *p)
{
    return p->tracker;
}
