/* pipeline.h - the core path every source feeds: order check, bucket
 * advance, tracker.
 *
 * cw_pipeline_feed() checks that time never goes back, closes the
 * aggregator's bucket when the event is past it (when there is an
 * aggregator), and applies the event to the tracker, whose sink (the
 * aggregator or the window analyzer) sees the effects.
 *
 * Thread: the core thread only. */
#ifndef COMMITWATCH_PIPELINE_H
#define COMMITWATCH_PIPELINE_H

#include <stdint.h>

#include "commitwatch/agg.h"
#include "commitwatch/error.h"
#include "commitwatch/event.h"
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

uint64_t cw_pipeline_events(const cw_pipeline_t *p);
int64_t cw_pipeline_first_ts(const cw_pipeline_t *p); /* INT64_MIN before any event */
int64_t cw_pipeline_last_ts(const cw_pipeline_t *p);
cw_tracker_t *cw_pipeline_tracker(cw_pipeline_t *p);

#endif
