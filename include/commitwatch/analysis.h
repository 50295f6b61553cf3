/* analysis.h - exact window figures straight from a trace.
 *
 * A tracker sink that classifies every piece by its exact commit and
 * release times against one window [from, to), and tracks each instance's
 * peak. After the whole trace has been applied and cw_tracker_finish() has
 * reported the live commits, cw_analysis_report() builds the report. Exact
 * for any window, aligned or not.
 *
 * Thread: the core thread only. */
#ifndef COMMITWATCH_ANALYSIS_H
#define COMMITWATCH_ANALYSIS_H

#include <stdint.h>

#include "commitwatch/report.h"
#include "commitwatch/stacks.h"
#include "commitwatch/tagger.h"
#include "commitwatch/tracker.h"

typedef struct cw_analysis cw_analysis_t;

/* Per (instance, stack): what the window's own commits still hold, in
 * bytes and in commit records not wholly released, and the most bytes
 * they held at once (commits and releases in the window, in order). The
 * heap model's outstanding blocks and peak per stack (heap.h): its window
 * holds every allocation. */
typedef struct cw_analysis_held {
    uint64_t bytes, peak, count;
} cw_analysis_held_t;

/* Window [from_ns, to_ns); from < to. 0 or CW_ENOMEM. */
int cw_analysis_create(int64_t from_ns, int64_t to_ns, cw_analysis_t **out);
void cw_analysis_destroy(cw_analysis_t *a); /* accepts NULL */

/* The sink to give cw_tracker_create(); ctx is a. */
cw_tracker_sink_t cw_analysis_sink(cw_analysis_t *a);

/* Builds the report; stacks and tagger are borrowed (to name frames and
 * tags). On success *out is owned by the caller. 0 or CW_ENOMEM. */
int cw_analysis_report(cw_analysis_t *a, cw_stacks_t *stacks, cw_tagger_t *tagger,
                       bool with_frames, cw_report_t **out);

/* The held figures of (instance id proc, stack): 0, or CW_ENOENT when
 * the window's figures name no such pair. */
int cw_analysis_held(const cw_analysis_t *a, uint32_t proc, uint32_t stack,
                     cw_analysis_held_t *out);
/* Calls cb for every pair that holds a commit record now, in the order
 * the pairs were first seen, with the instance's pid; stops at cb's
 * first non-zero return, which it returns. */
int cw_analysis_each_held(const cw_analysis_t *a,
                          int (*cb)(void *ctx, uint32_t pid, uint32_t stack,
                                    const cw_analysis_held_t *h),
                          void *ctx);
/* The bytes the analyzer holds (its figures, instances and map). */
size_t cw_analysis_memory(const cw_analysis_t *a);

#endif
