/* query.h - the store's read queries behind the HTTP API: the stored data's
 * span, one process instance's row, the tag names, the time series of a
 * process or of the whole machine, and the figures of /metrics.
 *
 * Window figures (processes, stacks, diff) are cw_store_report() (store.h).
 * Everything here reads the storage model's tables (docs/DESIGN.md,
 * "Storage model") with statements prepared once per store handle and kept
 * in its statement cache; a query that reads several statements does so
 * inside one read transaction, so a writer committing meanwhile (WAL) never
 * makes the tier state and the rows disagree.
 *
 * Ownership: every result is allocated by the call and owned by the
 * caller, who frees it with the function named next to it; strings inside
 * a result belong to it. Arguments are borrowed. On an error nothing is
 * returned (out-parameters are left NULL or zeroed) and d says what failed.
 *
 * Threads: the store's (store.h): a handle is used by one thread at a time;
 * every HTTP worker has its own read-only handle. */
#ifndef COMMITWATCH_QUERY_H
#define COMMITWATCH_QUERY_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "commitwatch/error.h"
#include "commitwatch/map.h"
#include "commitwatch/store.h"

/* ---- data span ---------------------------------------------------------- */

/* The first stored raw bucket (rundown aside) and the end of the last one,
 * each INT64_MIN while the database is empty. Either pointer may be NULL.
 * 0 or CW_EDB. */
int cw_store_data_span(cw_store_t *s, int64_t *start_ns, int64_t *end_ns, cw_diag_t *d);

/* The end of the data: where tracking ended, when the last run ended
 * (end of a replay's or .etl's input, a stopped service) and nothing was
 * stored after it; otherwise (a run still going, or one that left no
 * instance alive) the end of the last stored bucket. *ended (may be NULL)
 * says which. The bucket that holds the end of tracking holds no data:
 * windows reaching past this time are clipped to it (docs/DESIGN.md, "End
 * of a run"). INT64_MIN while the database is empty. 0 or CW_EDB. */
int cw_store_data_end(cw_store_t *s, int64_t *end_ns, bool *ended, cw_diag_t *d);

/* ---- one process instance ----------------------------------------------- */

typedef struct cw_proc_info {
    uint32_t id, pid;
    int64_t start_ns;
    int64_t exit_ns; /* CW_TS_NEVER while it has not exited */
    /* CW_TS_NEVER, or where tracking ended while it was alive (then
     * exit_ns is CW_TS_NEVER: it did not exit) */
    int64_t tracking_ended_ns;
    char *name;    /* owned; "" when the row has none */
    char *cmdline; /* owned; NULL when unknown */
    /* 0: an instance; N: a group of N folded instances (pid 0 when N > 1;
     * a group of one keeps its instance's pid and cmdline) */
    uint32_t folded;
    /* Corrections from the OS's figures after lost events (schema
     * 007_corrections): how many, their bytes, the last one's time
     * (CW_TS_NEVER: none). */
    uint32_t corrections;
    uint64_t corrected_committed, corrected_decommitted;
    int64_t last_correction_ns;
} cw_proc_info_t;

/* The processes row of instance id. 0 and *out filled (free its strings
 * with cw_proc_info_clear()), CW_ENOENT when there is no such instance,
 * CW_ENOMEM or CW_EDB. */
int cw_store_proc_get(cw_store_t *s, uint32_t id, cw_proc_info_t *out, cw_diag_t *d);
/* Frees the strings and zeroes *p; accepts a zeroed struct. */
void cw_proc_info_clear(cw_proc_info_t *p);

/* ---- memory maps (map.h, schema/008_map) ---------------------------------- */

/* The latest stored map snapshot of instance proc at or before at_ns
 * (its at_ns is the snapshot's time). 0 and *m filled (cw_map_clear()),
 * CW_ENOENT (none: the instance had none yet, or they are past the raw
 * tier's retention), CW_ENOMEM, CW_EPARSE (a damaged row) or CW_EDB. */
int cw_store_map_at(cw_store_t *s, uint32_t proc, int64_t at_ns, cw_map_t *m, cw_diag_t *d);
/* The snapshot times of proc, oldest first, at most max (the newest
 * ones when there are more). *out malloc'd (caller frees), *n set. */
int cw_store_map_times(cw_store_t *s, uint32_t proc, size_t max, int64_t **out, size_t *n,
                       cw_diag_t *d);
/* Stack stack_id's tag and (with_frames) frames, outermost first; all
 * owned by the caller (free each frame, the array, the tag). Unknown
 * stacks are tagged "Other" with no frames. 0, CW_ENOMEM or CW_EDB. */
int cw_store_stack_get(cw_store_t *s, uint32_t stack_id, bool with_frames, char **tag,
                       char ***frames, uint32_t *nframes, cw_diag_t *d);

/* ---- folded instances (docs/DESIGN.md, "Short-lived processes") ----------- */

/* One instance folded into a group. */
typedef struct cw_folded_inst {
    uint32_t pid;
    int64_t start_ns, exit_ns;
    uint64_t bytes; /* committed in its life */
} cw_folded_inst_t;

typedef struct cw_folded_list {
    cw_folded_inst_t *v; /* owned, by start time */
    size_t n;
    uint64_t total; /* instances of the group in the window, n aside from limit */
} cw_folded_list_t;

/* The instances of group `group` (a processes row with folded > 0) that
 * were alive in [from_ns, to_ns), the first `limit` of them (0 = all) by
 * start time. 0 and *out (free with cw_folded_list_clear()), CW_ENOMEM or
 * CW_EDB. A group with none gives an empty list. */
int cw_store_folded_list(cw_store_t *s, uint32_t group, int64_t from_ns, int64_t to_ns,
                         size_t limit, cw_folded_list_t *out, cw_diag_t *d);
void cw_folded_list_clear(cw_folded_list_t *l); /* accepts a zeroed struct */

/* ---- tags --------------------------------------------------------------- */

typedef struct cw_tag_list {
    char **v; /* owned, sorted (byte order), distinct */
    size_t n;
} cw_tag_list_t;

/* Every tag some stored stack has. 0 and *out filled (free with
 * cw_tag_list_clear()), CW_ENOMEM or CW_EDB. */
int cw_store_tags(cw_store_t *s, cw_tag_list_t *out, cw_diag_t *d);
void cw_tag_list_clear(cw_tag_list_t *l); /* accepts a zeroed struct */

/* ---- time series -------------------------------------------------------- */

typedef struct cw_series_query {
    uint32_t proc;          /* a process instance id; 0 = the whole machine */
    int64_t from_ns, to_ns; /* from < to */
    int64_t step_ns;        /* > 0; a multiple of the raw tier's width (1 s) */
} cw_series_query_t;

/* How many steps the series of q has: its window aligned down to the step,
 * [floor(from, step), to) rounded up to whole steps. *aligned_from (may be
 * NULL) receives the first step's start. Pure; for checking a limit before
 * cw_store_series(). 0 when the query is not valid. */
uint64_t cw_series_steps(const cw_series_query_t *q, int64_t *aligned_from);

typedef struct cw_series_tag {
    char *name;           /* owned */
    int64_t start;        /* outstanding bytes at from_ns */
    int64_t *outstanding; /* [npoints]: outstanding bytes at each step's end */
} cw_series_tag_t;

/* Per step i, [t[i], t[i] + step_ns): see docs/DESIGN.md, "HTTP", Series. */
typedef struct cw_series {
    int64_t from_ns, to_ns, step_ns; /* the aligned window: to = from + npoints * step */
    /* INT64_MIN, or the end of the data (cw_store_data_end(), tracking
     * ended) when the window asked reached past it: the steps stop at the
     * one holding it, and that step's figures are up to it. */
    int64_t clipped_at;
    int tier; /* the coarse tier the steps were read from (the raw tier after it) */
    uint32_t npoints;
    int64_t outstanding_start; /* at from_ns, all tags */
    cw_series_tag_t *tags;     /* in order of first appearance */
    uint32_t ntags;
    /* [npoints] each: */
    int64_t *t;                 /* step starts */
    int64_t *outstanding_total; /* at step ends, all tags */
    int64_t *committed, *commit_count;
    int64_t *decommitted;
    int64_t *transient, *transient_count; /* released in the step they were committed in */
    int64_t *peak;   /* highest outstanding in the step: exact for a process, an upper
                        bound for the machine (per-process peaks of a bucket added) */
    bool peak_exact; /* q.proc != 0 */
} cw_series_t;

/* The series of q. The steps are read from the coarsest tier whose width
 * divides the step and the aligned start, whose horizon is at or before
 * it and which holds some of the window, up to where that tier is rolled
 * up, and from the raw tier after that; the state at the start from the
 * hour tier up to its last complete hour <= from plus the raw rows after.
 * A proc that has no rows gives zeros (look it up first with
 * cw_store_proc_get() to tell an unknown id). 0 and *out (free with
 * cw_series_free()), CW_EINVAL (q not valid, or more than UINT32_MAX
 * steps), CW_ENOMEM or CW_EDB. */
int cw_store_series(cw_store_t *s, const cw_series_query_t *q, cw_series_t **out, cw_diag_t *d);
void cw_series_free(cw_series_t *s); /* accepts NULL */

/* ---- /metrics ----------------------------------------------------------- */

/* Outstanding bytes now of one process instance and tag (nonzero). */
typedef struct cw_outstanding_row {
    uint32_t proc, pid;
    char *name, *tag; /* owned by the cw_store_metrics_t */
    int64_t bytes;
} cw_outstanding_row_t;

/* Counters of one tag: sums over what is stored (retention folding rows
 * into baselines lowers them, as a counter reset). Rundown and baselines
 * are not commits; transient = released within the same UTC minute it
 * was committed in. */
typedef struct cw_tag_counters {
    char *tag;         /* owned by the cw_store_metrics_t */
    bool has_commits;  /* the tag has stored commit rows (the commit counters apply) */
    bool has_releases; /* the tag has stored release rows (the release counters apply) */
    int64_t committed_bytes, commit_events;
    int64_t decommitted_bytes;
    int64_t transient_bytes, transient_pieces;
} cw_tag_counters_t;

typedef struct cw_store_metrics {
    int64_t data_end_ns;       /* end of the last stored bucket; INT64_MIN when empty */
    cw_outstanding_row_t *out; /* grouped by process (ascending id) */
    size_t nout;
    cw_tag_counters_t *tags; /* by tag name */
    size_t ntags;
} cw_store_metrics_t;

/* Everything stored, read cheaply: the hour tier's rows up to the hour it
 * is complete to and the raw tier's after it (transient: the minute tier
 * and raw), so the cost does not grow with the history kept. 0 and *out
 * (free with cw_store_metrics_free()), CW_ENOMEM or CW_EDB. */
int cw_store_metrics(cw_store_t *s, cw_store_metrics_t **out, cw_diag_t *d);
void cw_store_metrics_free(cw_store_metrics_t *m); /* accepts NULL */

#endif
