/* source_sink.h - what a source delivers to: the sink's callbacks and the
 * drop counters it reports (source.h runs a source into one; the
 * pipeline, pipeline.h, is the service's). Types only, so a stage below
 * the sources may implement a sink.
 *
 * Thread: every callback runs on the thread that runs the source. */
#ifndef COMMITWATCH_SOURCE_SINK_H
#define COMMITWATCH_SOURCE_SINK_H

#include <stdbool.h>
#include <stdint.h>

#include "commitwatch/event.h"

struct cw_source_drops;

typedef struct cw_source_sink {
    void *ctx;
    /* One event; a nonzero return stops run(), which returns it. */
    int (*emit)(void *ctx, const cw_event_t *ev);
    /* Live sources: time passes with no events. now_ns is a watermark:
     * a promise that no event delivered later has ts < now_ns (a source
     * with per-CPU buffers passes the oldest time it may still deliver).
     * Buckets before it are closed and stored for good. May be NULL. */
    int (*tick)(void *ctx, int64_t now_ns);
    /* Live sources: counters (events seen, lost, drift corrected). */
    void (*counters)(void *ctx, uint64_t seen, uint64_t lost, int64_t drift_bytes);
    /* Live sources: what was dropped besides `lost`, and the corrections
     * (cumulative; below). Called with counters. May be NULL. */
    void (*drops)(void *ctx, const struct cw_source_drops *dr);
    /* A process's figures were corrected from the OS's own (smaps,
     * VirtualQueryEx) after lost events: the commit and decommit events of
     * the correction were emitted just before, at ts; committed and
     * decommitted are their bytes. The live instance of pid is the one
     * corrected. May be NULL. */
    void (*correction)(void *ctx, uint32_t pid, int64_t ts, uint64_t committed,
                       uint64_t decommitted);
} cw_source_sink_t;

/* Records a live source dropped or could not pair, beside the records its
 * kernel buffers lost (`counters`' lost), and what it corrected; all
 * cumulative since the source started (docs/LINUX.md, "Losses and drift"). */
typedef struct cw_source_drops {
    uint64_t foreign;   /* records of tasks this source cannot see (perf: pid 0, another
                           PID namespace): dropped, never tracked */
    uint64_t unpaired;  /* calls whose other half was lost (an exit without its enter, an
                           enter replaced before its exit): their effect is left to a
                           resync */
    uint64_t malformed; /* records too short to read: skipped */
    uint64_t resyncs;   /* resynchronisations of every process from the OS's figures */
    uint64_t corrections;     /* process corrections they made (a process whose figures
                                 changed, or one adopted because its start was lost) */
    uint64_t corrected_bytes; /* their bytes: committed + decommitted */
    bool resync_pending; /* records were lost since the last resync, which is still to come */
    int64_t last_resync_ns; /* the time (ns since the epoch) of the last resync's events;
                               INT64_MIN before the first */
} cw_source_drops_t;

#endif
