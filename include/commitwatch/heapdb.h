/* heapdb.h - the store's heap-trace tables (schema/008_heap.sql): one row
 * per heap trace asked for, with its outcome and totals, and the heap
 * layer's figures per stack of each finished trace. Heap figures live
 * only here: commit figures never mix with them.
 *
 * Stage: store. Writers: the service's heap-trace threads
 * (heaptraces.h), each on its own read-write handle (cw_store_open_side;
 * WAL and the busy timeout serialise the short transactions). Readers:
 * any handle. Times are ns since the Unix epoch, 0 for SQL NULL. Results
 * are allocated by the call and freed by the caller with the function
 * named next to them. */
#ifndef COMMITWATCH_HEAPDB_H
#define COMMITWATCH_HEAPDB_H

#include <stddef.h>
#include <stdint.h>

#include "commitwatch/error.h"
#include "commitwatch/heap.h"
#include "commitwatch/store.h"

/* What a trace read and could not apply (heap.h's report, counted). */
typedef struct cw_heap_trace_counts {
    uint64_t events, unknown_frees, zero_allocs, reused, dropped, torn;
} cw_heap_trace_counts_t;

typedef struct cw_heap_trace_row {
    int64_t id;           /* 0 = not stored yet */
    uint32_t pid;         /* the traced process */
    uint32_t proc;        /* its instance id (processes.id), 0 if not known */
    char *process;        /* its name, or NULL */
    char *trigger;        /* "api", "alert" or "cli" */
    int64_t alert_series; /* alert_series.id for trigger "alert", else 0 */
    char *rule;           /* the rule that asked, or NULL */
    int64_t requested_ns, duration_ns, started_ns, ended_ns;
    char *state;      /* "running", "done", "stopped", "failed" */
    char *end_reason; /* "duration", "exited", "stopped", "shutdown", or NULL */
    char *error;      /* why it failed, or NULL */
    cw_heap_trace_counts_t counts;
    cw_heap_figs_t totals; /* the traced process's (or the report's first) */
    char *report;          /* the report's JSON: only from cw_store_heap_get, else NULL */
} cw_heap_trace_row_t;

void cw_heap_trace_row_clear(cw_heap_trace_row_t *r); /* frees the strings; zeroes r */
/* r's counts and totals from a report (the process pid's totals, or the
 * only process's). The one way a trace's figures reach its row. */
void cw_heap_trace_row_figures(cw_heap_trace_row_t *r, const cw_heap_report_t *rep, uint32_t pid);
void cw_heap_trace_rows_free(cw_heap_trace_row_t *v, size_t n);

/* Inserts r as asked (state and the other fields as given; totals not
 * written) and sets r->id. 0 or the store's error (d set). */
int cw_store_heap_add(cw_store_t *s, cw_heap_trace_row_t *r, cw_diag_t *d);
/* Updates r->id's state, times, reason, error, counts and totals, and,
 * with rep (may be NULL: a trace that failed before it began), stores its
 * per-stack figures (the process's, pid r->pid) and its JSON (json, may
 * be NULL) in one transaction. 0 or the store's error. */
int cw_store_heap_finish(cw_store_t *s, const cw_heap_trace_row_t *r, const cw_heap_report_t *rep,
                         const char *json, cw_diag_t *d);
/* Marks the rows still "running" as "failed" with the reason given (at a
 * start: the service that ran them was killed). *n: how many. */
int cw_store_heap_orphans(cw_store_t *s, int64_t now_ns, const char *why, uint64_t *n,
                          cw_diag_t *d);

typedef struct cw_heap_trace_filter {
    int64_t alert_series; /* 0: any */
    uint32_t pid;         /* 0: any */
    uint32_t proc;        /* 0: any */
    uint32_t limit;       /* 0: 100 */
} cw_heap_trace_filter_t;
/* The traces that match, newest first, without their reports. */
int cw_store_heap_list(cw_store_t *s, const cw_heap_trace_filter_t *f, cw_heap_trace_row_t **out,
                       size_t *n, cw_diag_t *d);
/* Trace id with its report JSON. 0, CW_ENOENT (no such trace) or the
 * store's error. */
int cw_store_heap_get(cw_store_t *s, int64_t id, cw_heap_trace_row_t *out, cw_diag_t *d);

#endif
