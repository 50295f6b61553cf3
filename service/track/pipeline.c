/* pipeline.c - order check, bucket advance and tracking, and the source
 * sink that feeds them; for the service also the per-event work of a live
 * database: status, live maps and their snapshots, corrections (see
 * pipeline.h). */
#include "commitwatch/pipeline.h"

#include <inttypes.h>
#include <stdlib.h>

#include "commitwatch/common.h"
#include "commitwatch/log.h"

struct cw_pipeline {
    cw_tracker_t *tracker;
    cw_agg_t *agg;
    uint64_t events;
    int64_t first_ts, last_ts;
    int64_t watermark; /* last tick: no event may be older */
    /* The source sink's (cw_pipeline_source_sink). */
    cw_diag_t *d;
    bool failed;
    /* A served pipeline's (cw_pipeline_serve; served false: none). */
    bool served;
    cw_pipeline_serve_opts_t serve;
    cw_batch_t *map_pending; /* snapshots taken, for the next batch emitted (maps only) */
    /* The time the pipeline is advancing to (the event or tick being fed),
     * INT64_MIN at the end of tracking: see emit_batch(). */
    int64_t advance_to;
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
    p->first_ts = p->last_ts = p->watermark = p->advance_to = INT64_MIN;
    *out = p;
    return 0;
}

void cw_pipeline_destroy(cw_pipeline_t *p)
{
    if (!p) return;
    cw_tracker_destroy(p->tracker);
    cw_batch_free(p->map_pending);
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

/* Accessors of the private struct: one line each, alike by design. */
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

/* ---- the source sink -------------------------------------------------------- */

static int failed(cw_pipeline_t *p, int rc)
{
    if (rc) p->failed = true;
    return rc;
}

/* A live map for an HTTP worker (cw_mapreq_serve, this thread). */
static int fill_map(void *ctx, uint32_t proc_id, cw_map_t *m)
{
    cw_pipeline_t *p = ctx;
    /* Every event before last + 1 is applied. */
    return cw_tracker_map(p->tracker, proc_id, p->last_ts == INT64_MIN ? INT64_MIN : p->last_ts + 1,
                          m);
}

void cw_pipeline_serve_maps(cw_pipeline_t *p)
{
    cw_mapreq_t *q = p->serve.maps;
    if (q && cw_mapreq_pending(q)) cw_mapreq_serve(q, fill_map, p);
}

static int plain_event(void *ctx, const cw_event_t *ev)
{
    cw_pipeline_t *p = ctx;
    return failed(p, cw_pipeline_feed(p, ev, p->d));
}

static int served_event(void *ctx, const cw_event_t *ev)
{
    cw_pipeline_t *p = ctx;
    const cw_pipeline_serve_opts_t *o = &p->serve;
    int rc;
    if (o->control && atomic_load(o->control) && (rc = o->between(o->ctx, false)) != 0)
        return failed(p, rc);
    cw_pipeline_serve_maps(p);
    p->advance_to = ev->ts;
    /* The message names the service's options: only `run` serves. */
    if (p->events == 0 && ev->ts < o->stored_end)
        return failed(p, cw_diag_set(p->d, CW_ETIME,
                                     "the database already holds data up to %" PRId64
                                     " ns but this input starts at %" PRId64
                                     " ns; use another --db, or --rebase-now to replay it as new",
                                     o->stored_end, ev->ts));
    rc = cw_pipeline_feed(p, ev, p->d);
    atomic_store_explicit(&o->status->events_ingested, p->events, memory_order_relaxed);
    return failed(p, rc);
}

static int served_tick(void *ctx, int64_t now)
{
    cw_pipeline_t *p = ctx;
    int rc;
    if ((rc = p->serve.between(p->serve.ctx, true)) != 0) return failed(p, rc);
    p->advance_to = now;
    if ((rc = cw_pipeline_tick(p, now)) != 0)
        return failed(p, cw_diag_set(p->d, rc, "storing a bucket failed: %s", cw_strerror(rc)));
    cw_pipeline_serve_maps(p);
    return 0;
}

static void served_counters(void *ctx, uint64_t seen, uint64_t lost, int64_t drift)
{
    cw_pipeline_t *p = ctx;
    cw_status_t *st = p->serve.status;
    cw_agg_set_counters(p->agg, seen, lost, drift);
    atomic_store_explicit(&st->source_records, seen, memory_order_relaxed);
    atomic_store_explicit(&st->events_lost, lost, memory_order_relaxed);
    atomic_store_explicit(&st->drift_bytes, drift, memory_order_relaxed);
}

/* Losses and corrections (source_sink.h; docs/LINUX.md, "Losses and drift"). */
static void served_drops(void *ctx, const cw_source_drops_t *dr)
{
    cw_status_t *st = ((cw_pipeline_t *)ctx)->serve.status;
    atomic_store_explicit(&st->records_foreign, dr->foreign, memory_order_relaxed);
    atomic_store_explicit(&st->records_unpaired, dr->unpaired, memory_order_relaxed);
    atomic_store_explicit(&st->records_malformed, dr->malformed, memory_order_relaxed);
    atomic_store_explicit(&st->resyncs, dr->resyncs, memory_order_relaxed);
    atomic_store_explicit(&st->corrections, dr->corrections, memory_order_relaxed);
    atomic_store_explicit(&st->corrected_bytes, dr->corrected_bytes, memory_order_relaxed);
    atomic_store_explicit(&st->resync_pending, dr->resync_pending, memory_order_relaxed);
    atomic_store_explicit(&st->last_resync_ns, dr->last_resync_ns, memory_order_relaxed);
}

/* A correction of pid's live instance: stored on it (agg.h). The source
 * emitted its events just before, so the instance is the tracker's live
 * one; none (a process with no instance) has nothing to mark. */
static void served_correction(void *ctx, uint32_t pid, int64_t ts, uint64_t committed,
                              uint64_t decommitted)
{
    cw_pipeline_t *p = ctx;
    const cw_proc_t *proc = cw_tracker_find(p->tracker, pid);
    if (!proc) return;
    if (cw_agg_add_correction(p->agg, proc->id, ts, committed, decommitted) != 0)
        CW_LOGE("out of memory recording a correction of pid %" PRIu32, pid);
}

cw_source_sink_t cw_pipeline_source_sink(cw_pipeline_t *p, cw_diag_t *d)
{
    p->d = d;
    p->failed = false;
    if (!p->served) return (cw_source_sink_t){p, plain_event, NULL, NULL, NULL, NULL};
    return (cw_source_sink_t){p,           served_event, served_tick, served_counters,
                              served_drops, served_correction};
}

bool cw_pipeline_failed(const cw_pipeline_t *p)
{
    return p->failed;
}

/* ---- map snapshots (the store's copies of the live maps) ------------------- */

static int add_snapshot(void *ctx, const cw_map_t *m)
{
    cw_pipeline_t *p = ctx;
    cw_row_map_t r = {m->proc_id, m->n, m->at_ns, cw_map_bytes(m), NULL, 0};
    int rc = cw_map_encode(m, &r.blob, &r.len);
    if (rc == 0 && (rc = cw_batch_add_map(p->map_pending, &r)) != 0) free(r.blob);
    return rc;
}

/* Takes the snapshots due at `at` (all changed ones when force) into
 * map_pending, which the next emitted batch carries to the store. */
static int take_snapshots(cw_pipeline_t *p, int64_t at, bool force)
{
    if (!p->map_pending && cw_batch_create(0, 0, &p->map_pending) != 0) return CW_ENOMEM;
    return cw_tracker_maps_due(p->tracker, at, p->serve.map_policy, force, add_snapshot, p);
}

/* The aggregator's emit (cw_agg_set_emit): the snapshots join the batch,
 * which goes on to the owner's emit. */
static int emit_batch(void *ctx, cw_batch_t *b)
{
    cw_pipeline_t *p = ctx;
    /* A batch is emitted while the pipeline advances to the event (or
     * tick) at advance_to, not applied yet, past the end of the last
     * closed bucket: the tracker holds every event before that bucket
     * boundary and none after, whichever bucket b is (the aggregator may
     * have held it back). At the end of tracking the snapshots were taken
     * before the instances ended (advance_to INT64_MIN). */
    int rc = 0;
    if (p->advance_to != INT64_MIN)
        rc = take_snapshots(p, cw_floor_to(p->advance_to, b->width_ns), false);
    if (rc == 0 && p->map_pending) { /* the snapshots move into b */
        cw_batch_t *m = p->map_pending;
        for (uint32_t i = 0; i < m->maps.n && rc == 0; i++)
            if ((rc = cw_batch_add_map(b, &m->maps.v[i])) == 0) m->maps.v[i].blob = NULL;
        for (uint32_t i = 0; i < m->maps.n; i++) free(m->maps.v[i].blob); /* not moved: error */
        m->maps.n = 0;
    }
    if (rc != 0) {
        cw_batch_free(b);
        return rc;
    }
    return p->serve.emit(p->serve.emit_ctx, b);
}

void cw_pipeline_serve(cw_pipeline_t *p, const cw_pipeline_serve_opts_t *o)
{
    p->served = true;
    p->serve = *o;
    cw_agg_set_emit(p->agg, emit_batch, p);
}

void cw_pipeline_set_emit(cw_pipeline_t *p, cw_agg_emit_fn emit, void *emit_ctx)
{
    p->serve.emit = emit;
    p->serve.emit_ctx = emit_ctx;
}

int cw_pipeline_end_tracking(cw_pipeline_t *p)
{
    p->advance_to = INT64_MIN; /* the snapshots are taken here */
    int rc = p->last_ts == INT64_MIN ? 0 : take_snapshots(p, p->last_ts + 1, true);
    return rc == 0 ? cw_pipeline_end_all(p) : rc;
}
