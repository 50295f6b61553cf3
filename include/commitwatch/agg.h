/* agg.h - the bucket aggregator: tracker output -> one batch per bucket.
 *
 * A tracker sink that sums what happened in the current bucket (width
 * fixed at creation, 1 s for the raw tier) into the rows of batch.h, and
 * hands each batch to an emit callback when the bucket closes: when an
 * event of a later bucket arrives (cw_agg_advance) or at cw_agg_flush().
 * It also carries new processes, frames and stacks (with their tags) into
 * the batch that first needs them.
 *
 * Folding (cw_agg_set_fold, off by default): an instance that exits less
 * than `lifetime` after its start having committed less than `max_bytes`
 * in all is folded into a group per (name, hour of its start): its rows
 * carry the group's id, and a folded row records the instance (see
 * docs/DESIGN.md, "Short-lived processes"). Shortness is known only at
 * the exit, so a closed bucket is held back while an undecided instance
 * (younger than `lifetime`, below `max_bytes`, not exited) may have rows
 * in it; everything else leaves as soon as its bucket closes. At most
 * `lifetime` (plus a bucket) of batches are held.
 *
 * Thread: the core thread only; emit runs on it and takes ownership of the
 * batch. */
#ifndef COMMITWATCH_AGG_H
#define COMMITWATCH_AGG_H

#include <stdint.h>

#include "commitwatch/batch.h"
#include "commitwatch/stacks.h"
#include "commitwatch/tagger.h"
#include "commitwatch/tracker.h"

typedef struct cw_agg cw_agg_t;

/* Takes ownership of b (always, also on error). 0 or a CW_E* code, which
 * cw_agg_advance/flush return to their caller. */
typedef int (*cw_agg_emit_fn)(void *ctx, cw_batch_t *b);

/* stacks and tagger are borrowed for the aggregator's life (tagger NULL:
 * stacks go out untagged, for an aggregator whose batches are re-keyed
 * before they are stored: a heap trace's, layerfeed.h). first_frame /
 * first_stack: the ids already stored (a database being continued), so
 * only newer ones are sent. 0 or CW_ENOMEM. */
int cw_agg_create(int64_t width_ns, cw_stacks_t *stacks, cw_tagger_t *tagger,
                  uint32_t stored_frames, uint32_t stored_stacks, cw_agg_emit_fn emit,
                  void *emit_ctx, cw_agg_t **out);
void cw_agg_destroy(cw_agg_t *a); /* accepts NULL; drops an unflushed bucket */
/* Sends the batches to emit from now on (the service's pipeline puts
 * itself in front of the writer: pipeline.h). */
void cw_agg_set_emit(cw_agg_t *a, cw_agg_emit_fn emit, void *emit_ctx);

cw_tracker_sink_t cw_agg_sink(cw_agg_t *a);

/* Call before applying an event at ts: closes the current bucket if ts is
 * past it. Also called by a live source's timer so idle buckets close. */
int cw_agg_advance(cw_agg_t *a, int64_t ts);
/* Start of the first bucket that ts may still add to when the bucket
 * holding ts is closed: the bucket after it. */
int64_t cw_agg_next_bucket(const cw_agg_t *a, int64_t ts);
/* Folds instances that live less than lifetime_ns and commit less than
 * max_bytes (either 0: folding off, the default). Call before the first
 * event. */
void cw_agg_set_fold(cw_agg_t *a, int64_t lifetime_ns, uint64_t max_bytes);
/* Batches closed and held back for folding (tests, health). */
uint32_t cw_agg_held(const cw_agg_t *a);
/* Emits the current bucket if it holds anything, and every batch held
 * back (end of input, shutdown): undecided instances stay unfolded. */
int cw_agg_flush(cw_agg_t *a);
/* Replaces the tagger used for stacks not yet sent (after a rules reload;
 * the caller clears the stacks' cached tags). Borrowed. */
void cw_agg_set_tagger(cw_agg_t *a, cw_tagger_t *tagger);
/* A correction of instance proc (a cw_proc_t id) at ts, carried in the
 * open bucket's batch (schema 007_corrections); the instance is never
 * folded after it. 0 or CW_ENOMEM. */
int cw_agg_add_correction(cw_agg_t *a, uint32_t proc, int64_t ts, uint64_t committed,
                          uint64_t decommitted);
/* A batch of the heap layer (batch.h's riders; layerfeed.h) to ride
 * with the open bucket's batch, or with the next bucket's when none is
 * open (never with one already emitted). r moves in on success. 0,
 * CW_EINVAL (no time has been advanced to yet, or r is not a rider) or
 * CW_ENOMEM. */
int cw_agg_add_rider(cw_agg_t *a, cw_batch_t *r);
/* Source counters carried in the next batch. */
void cw_agg_set_counters(cw_agg_t *a, uint64_t events_total, uint64_t events_lost,
                         int64_t drift_bytes);

#endif
