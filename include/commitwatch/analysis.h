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

/* Window [from_ns, to_ns); from < to. 0 or CW_ENOMEM. */
int cw_analysis_create(int64_t from_ns, int64_t to_ns, cw_analysis_t **out);
void cw_analysis_destroy(cw_analysis_t *a); /* accepts NULL */

/* The sink to give cw_tracker_create(); ctx is a. */
cw_tracker_sink_t cw_analysis_sink(cw_analysis_t *a);

/* Builds the report; stacks and tagger are borrowed (to name frames and
 * tags). On success *out is owned by the caller. 0 or CW_ENOMEM. */
int cw_analysis_report(cw_analysis_t *a, cw_stacks_t *stacks, cw_tagger_t *tagger,
                       bool with_frames, cw_report_t **out);

#endif
