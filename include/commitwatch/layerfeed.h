/* layerfeed.h - the heap layer's batches on their way to the store.
 *
 * A heap trace (heaptraces.h) sums its allocations into batches of an
 * aggregator of its own (agg.h, without a tagger), in its own numbers:
 * its stacks table's frames and stacks, its tracker's instances. The
 * store keeps one dictionary of frames and stacks and one numbering of
 * instances, both the core thread's. So a trace's thread pushes each of
 * its batches here, and the core thread, between events, drains them:
 * it interns a batch's new frames and stacks into the service's table
 * (keeping each trace's map from its ids to the service's), keeps the rows
 * of the traced process only, under the id of that process's instance in
 * the commit layer, and attaches the batch to the aggregator's open
 * bucket as a rider (batch.h, cw_agg_add_rider). The aggregator tags the
 * new stacks when it sends them, and the writer stores a rider as cells
 * of layer 1 in its own bucket (docs/DESIGN.md, "The heap layer in the
 * store").
 *
 * Bounded: at most CW_LAYERFEED_MAX batches wait; one more is dropped and
 * counted (cw_layerfeed_counts), never silently.
 *
 * Threads: cw_layerfeed_push from any thread (a trace's), drain from the
 * core thread; the mutex guards the queue only, the maps are the core
 * thread's. */
#ifndef COMMITWATCH_LAYERFEED_H
#define COMMITWATCH_LAYERFEED_H

#include <stdbool.h>
#include <stdint.h>

#include "commitwatch/agg.h"
#include "commitwatch/batch.h"
#include "commitwatch/stacks.h"

#define CW_LAYERFEED_MAX 1024u

typedef struct cw_layerfeed cw_layerfeed_t;

/* 0 with *out set, or CW_ENOMEM. */
int cw_layerfeed_create(cw_layerfeed_t **out);
void cw_layerfeed_destroy(cw_layerfeed_t *f); /* accepts NULL; drops what waits */

/* Queues b, a batch of src's aggregator (moved in, always). src: the
 * producer's number, unique for the feed's life (a trace's id); pid: the
 * traced process, whose instances' rows are kept; proc: its instance in
 * the commit layer (0: unknown, b's rows are left out and counted); last:
 * src pushes no more after b (b may be NULL), and its map is freed once
 * drained. 0, or CW_ENOMEM / CW_ERANGE (the queue is full): b dropped and
 * counted. */
int cw_layerfeed_push(cw_layerfeed_t *f, int64_t src, uint32_t pid, uint32_t proc, cw_batch_t *b,
                      bool last);

/* Drains the queue: each batch re-keyed to stacks (the service's table)
 * and attached to agg's open bucket. 0, or CW_ENOMEM or agg's error (the
 * batch in hand dropped and counted; the rest stay queued). Core thread. */
int cw_layerfeed_drain(cw_layerfeed_t *f, cw_stacks_t *stacks, cw_agg_t *agg);

/* Since creation: batches dropped (a full queue, memory, an error of the
 * aggregator's), batches attached, and rows left out (another process
 * than the traced one, or a trace without an instance). Any thread. */
typedef struct cw_layerfeed_counts {
    uint64_t dropped, attached, rows_left_out;
} cw_layerfeed_counts_t;
void cw_layerfeed_counts(cw_layerfeed_t *f, cw_layerfeed_counts_t *out);

#endif
