/* pipeline.h - the core path every source feeds: order check, bucket
 * advance, tracker.
 *
 * cw_pipeline_feed() checks that time never goes back, closes the
 * aggregator's bucket when the event is past it (when there is an
 * aggregator), and applies the event to the tracker, whose sink (the
 * aggregator or the window analyzer) sees the effects.
 *
 * A source runs straight into it (cw_pipeline_source_sink). The service's
 * pipeline (cw_pipeline_serve) also does the per-event work of a live
 * database: the status figures, the live maps HTTP workers ask for, the
 * map snapshots each batch carries to the store, corrections, and the
 * owner's work between events (a reload) when asked; its batches then go
 * to the owner's emit (the writer).
 *
 * Thread: the core thread only. */
#ifndef COMMITWATCH_PIPELINE_H
#define COMMITWATCH_PIPELINE_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "commitwatch/agg.h"
#include "commitwatch/error.h"
#include "commitwatch/event.h"
#include "commitwatch/map.h"
#include "commitwatch/source_sink.h"
#include "commitwatch/status.h"
#include "commitwatch/tracker.h"

typedef struct cw_pipeline cw_pipeline_t;

/* sink: where tracker output goes; agg: the aggregator behind that sink,
 * or NULL (analysis). Both borrowed. 0 or CW_ENOMEM. */
int cw_pipeline_create(const cw_tracker_sink_t *sink, cw_agg_t *agg, uint32_t first_proc_id,
                       cw_pipeline_t **out);
void cw_pipeline_destroy(cw_pipeline_t *p); /* accepts NULL */

/* 0, CW_ETIME (time went back; d says so), or an error of the aggregator's
 * emit / CW_ENOMEM. */
int cw_pipeline_feed(cw_pipeline_t *p, const cw_event_t *ev, cw_diag_t *d);
/* Time passes without events (live sources): closes a finished bucket.
 * now_ns is a watermark (see source.h): a later event older than it is
 * refused by cw_pipeline_feed with CW_ETIME. */
int cw_pipeline_tick(cw_pipeline_t *p, int64_t now_ns);
/* End of a run into a database: closes the bucket of the last event (or
 * tick) and ends every live instance at the start of the next bucket, so
 * the stored figures of every window up to the last event stay as they
 * were and a later run's instances never overlap these. Needs an
 * aggregator; the caller flushes it afterwards. 0 or the emit error. */
int cw_pipeline_end_all(cw_pipeline_t *p);
/* Reports live commits to the sink (end of an analysis). */
void cw_pipeline_finish(cw_pipeline_t *p);

/* What the service's pipeline does besides tracking. Pointers borrowed
 * for the pipeline's life. */
typedef struct cw_pipeline_serve_opts {
    cw_status_t *status; /* written here: events_ingested, the source's counters and drops */
    cw_mapreq_t *maps;   /* live-map requests, served between events and ticks; NULL: none */
    const cw_map_policy_t *map_policy; /* when a live map is snapshotted into a batch */
    int64_t stored_end; /* the database's data ends here: an input starting before is refused */
    /* The owner's work between events: called at every tick, and before an
     * event when *control is set (a reload request). Nonzero stops the
     * source, and is this side's error (cw_pipeline_failed). */
    const atomic_bool *control;
    int (*between)(void *ctx, bool tick);
    void *ctx;
    /* Where a batch goes once it carries its snapshots (the writer); takes
     * ownership, as cw_agg_emit_fn. */
    cw_agg_emit_fn emit;
    void *emit_ctx;
} cw_pipeline_serve_opts_t;

/* Makes p the service's pipeline (needs an aggregator: its batches pass
 * through p on their way to o->emit). Call before the first event. */
void cw_pipeline_serve(cw_pipeline_t *p, const cw_pipeline_serve_opts_t *o);
/* Points a served pipeline's batches at another emit (the writer's sink,
 * when the writer restarts after a reload, or none while it is stopped).
 * Core thread, between events. */
void cw_pipeline_set_emit(cw_pipeline_t *p, cw_agg_emit_fn emit, void *emit_ctx);
/* The sink a source runs into; its errors are written to d (borrowed).
 * A plain pipeline takes events only; a served one also ticks, counters,
 * drops and corrections. Clears cw_pipeline_failed(). */
cw_source_sink_t cw_pipeline_source_sink(cw_pipeline_t *p, cw_diag_t *d);
/* Whether a sink callback failed since cw_pipeline_source_sink(): the
 * source's run ended by this side's error (a bucket the store refused, an
 * input that goes back in time, a failed reload), not the source's. */
bool cw_pipeline_failed(const cw_pipeline_t *p);
/* Serves the pending live-map requests (a served pipeline; also while no
 * source runs). */
void cw_pipeline_serve_maps(cw_pipeline_t *p);
/* A served pipeline's end of tracking (the run's end, or a live source
 * that died): the last maps of the live instances snapshotted, then
 * cw_pipeline_end_all(). The caller flushes the aggregator. */
int cw_pipeline_end_tracking(cw_pipeline_t *p);

uint64_t cw_pipeline_events(const cw_pipeline_t *p);
int64_t cw_pipeline_first_ts(const cw_pipeline_t *p); /* INT64_MIN before any event */
int64_t cw_pipeline_last_ts(const cw_pipeline_t *p);
cw_tracker_t *cw_pipeline_tracker(cw_pipeline_t *p);

#endif
