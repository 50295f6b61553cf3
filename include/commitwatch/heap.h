/* heap.h - the heap layer: heap allocations as commits of the same model.
 *
 * A heap allocation is a commit of exactly `size` bytes at its address
 * with the allocating stack, a free the release of that block, a realloc
 * both (the old block released, the new one committed). The heap model
 * feeds them to a tracker (tracker.h, byte ranges: it rounds nothing) whose
 * sink is the window analyzer (analysis.h), so the figures per stack are
 * the commit layer's; it adds what a heap report needs besides: the peak
 * outstanding bytes per stack, and the counts of what it could not apply
 * (frees of blocks it never saw, events the channel dropped).
 *
 * The source of the events (service/sources/heap/: the interposer's ring
 * in launch and attach mode) decodes them into cw_heap_ev_t with interned
 * stacks. The report lives in memory; the service's heap traces store it
 * (heaptraces.h, heapdb.h).
 *
 * Thread: one thread (the caller's) for a model and its report. */
#ifndef COMMITWATCH_HEAP_H
#define COMMITWATCH_HEAP_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "commitwatch/agg.h"
#include "commitwatch/error.h"
#include "commitwatch/stacks.h"

typedef enum cw_heap_kind {
    CW_HEAP_ALLOC = 1,   /* malloc, calloc, memalign, ..., operator new: addr, size */
    CW_HEAP_FREE = 2,    /* free, operator delete: addr */
    CW_HEAP_REALLOC = 3, /* realloc, reallocarray: old_addr freed (0: none), addr, size */
} cw_heap_kind_t;

typedef struct cw_heap_ev {
    int64_t ts; /* Unix ns; the model keeps them non-decreasing */
    cw_heap_kind_t kind;
    uint32_t pid, tid;
    uint64_t addr, size, old_addr;
    uint32_t stack_id; /* interned in the stacks given to the report */
} cw_heap_ev_t;

typedef struct cw_heap_model cw_heap_model_t;

/* A model whose window starts at from_ns (events before it are counted
 * from it). 0 or CW_ENOMEM. */
int cw_heap_model_create(int64_t from_ns, cw_heap_model_t **out);
void cw_heap_model_destroy(cw_heap_model_t *m); /* accepts NULL */

/* The most live blocks a model holds (the bound on its memory: with
 * 300,000 held, `bench/heap_rss.py --leak-every 1` peaked at 49 MiB,
 * its 16 MiB ring included; the goal is 128 MiB). An allocation past it
 * is counted (the report's capped) and not held: its free is then a free
 * of an unknown block. */
#define CW_HEAP_DEFAULT_MAX_BLOCKS 300000u

/* Sets the bound on live blocks (0: none); CW_HEAP_DEFAULT_MAX_BLOCKS
 * until called. */
void cw_heap_model_limit(cw_heap_model_t *m, uint64_t max_blocks);

/* Announces a process (its first event, or before it): name and cmdline
 * copied by the tracker (cmdline may be NULL). 0 or CW_ENOMEM. */
int cw_heap_model_start(cw_heap_model_t *m, uint32_t pid, int64_t ts, const char *name,
                        const char *cmdline);
/* Applies one event. A free of an address no live block starts at is
 * counted (unknown_frees), not applied; an allocation at an address
 * whose block is still live (a free the channel lost) releases that block
 * first and is counted (reused). 0 or CW_ENOMEM (the model is then
 * unusable). */
int cw_heap_model_apply(cw_heap_model_t *m, const cw_heap_ev_t *ev);

/* The heap layer for the store: the model's tracker output goes to agg
 * too (agg.h, borrowed for the model's life), whose buckets close as the
 * events pass them; its batches are the heap trace's seconds
 * (layerfeed.h). Call before the first event. */
void cw_heap_model_also(cw_heap_model_t *m, cw_agg_t *agg);
/* The end of the trace for agg, as the end of tracking for the commit
 * layer: every live block released at the start of the bucket after the
 * last event, and agg flushed, so every window up to the last event keeps
 * its figures. After the report (the model's figures change). 0 or agg's
 * error; nothing to do without cw_heap_model_also. */
int cw_heap_model_end(cw_heap_model_t *m);

/* Bytes the model holds: its tracker's blocks and instances, the peaks
 * per stack and the snapshots (not the window analyzer's per-stack sums,
 * nor the heap layer's aggregator). O(snapshots). */
size_t cw_heap_model_memory(const cw_heap_model_t *m);

/* One trace reader's share of /api/health's heap_traces (memstat.h): its
 * model and stacks table. Zero-initialized; owned by the reader's thread. */
typedef struct cw_heap_account {
    int64_t counted; /* bytes this reader has added */
    int64_t next_ns; /* monotonic ns of the next refresh */
} cw_heap_account_t;

/* Sets the reader's share to m's and stacks' bytes when now_ns (monotonic)
 * has reached the next refresh, at most every 100 ms (the stacks' figure
 * walks their frames). */
void cw_heap_account(cw_heap_account_t *a, const cw_heap_model_t *m, const cw_stacks_t *stacks,
                     int64_t now_ns);
/* Takes the reader's share back out (its trace ended). */
void cw_heap_account_end(cw_heap_account_t *a);

/* Marks a snapshot at ts (UMDH's, TraceHeap's): what every stack has
 * outstanding now, bytes and blocks, for a diff between two points
 * (cw_heap_diff_json). At most CW_HEAP_MAX_SNAPSHOTS; one past them is
 * counted (snapshots_skipped), not taken. 0 or CW_ENOMEM. */
#define CW_HEAP_MAX_SNAPSHOTS 64
int cw_heap_model_snapshot(cw_heap_model_t *m, int64_t ts);

/* What the source could not deliver, for the report. */
typedef struct cw_heap_losses {
    uint64_t dropped; /* events the channel had no room for */
    uint64_t torn;    /* events begun by a process that died before finishing them */
    /* allocations whose stack was deeper than the source keeps (the
     * interposer: 57 frames, the innermost kept; heapring.h): counted at
     * the stack of their innermost frames, which may merge stacks that
     * differ only further out */
    uint64_t truncated;
    /* events whose stack the source named by an index it had not been
     * sent (the interposer's per-thread stack tables, heapstacks.h): kept
     * under the frame "(heap: a stack index the reader was not sent)";
     * 0 unless the protocol is broken */
    uint64_t unknown_stacks;
} cw_heap_losses_t;

/* ---- the report ---- */

/* Figures of one stack (or, summed, of one process). */
typedef struct cw_heap_figs {
    uint64_t outstanding_bytes, outstanding_count; /* live at the end */
    uint64_t alloc_bytes, alloc_count;
    uint64_t freed_bytes, freed_count;
    uint64_t peak_bytes; /* most outstanding at once (a process: its own peak) */
} cw_heap_figs_t;

typedef struct cw_heap_stack_report {
    char **frames; /* outermost first, as the commit reports */
    uint32_t nframes;
    cw_heap_figs_t figs;
} cw_heap_stack_report_t;

typedef struct cw_heap_proc_report {
    uint32_t pid;
    char *name;
    char *cmdline; /* may be NULL */
    cw_heap_figs_t totals;
    cw_heap_stack_report_t *stacks; /* largest outstanding first, then allocated */
    uint32_t nstacks;
} cw_heap_proc_report_t;

/* One stack's outstanding at a snapshot. */
typedef struct cw_heap_snap_stack {
    uint32_t pid;
    char **frames; /* outermost first */
    uint32_t nframes;
    uint64_t bytes, count;
} cw_heap_snap_stack_t;

typedef struct cw_heap_snapshot {
    int64_t ts_ns;
    cw_heap_snap_stack_t *stacks; /* those with blocks outstanding, largest first */
    uint32_t nstacks;
} cw_heap_snapshot_t;

typedef struct cw_heap_report {
    int64_t from_ns, to_ns;       /* to: the last event + 1 */
    cw_heap_proc_report_t *procs; /* largest outstanding first */
    uint32_t nprocs;
    uint64_t events;        /* applied */
    uint64_t unknown_frees; /* frees of blocks not seen allocated */
    uint64_t zero_allocs;   /* allocations of 0 bytes (no bytes; their frees unknown) */
    uint64_t reused;        /* allocations at a live block's address */
    uint64_t capped;        /* allocations not held: the bound on live blocks was reached */
    cw_heap_losses_t losses;
    cw_heap_snapshot_t *snapshots; /* in time order */
    uint32_t nsnapshots;
    uint64_t snapshots_skipped; /* past CW_HEAP_MAX_SNAPSHOTS */
} cw_heap_report_t;

/* Ends the trace and builds the report (frames named through stacks,
 * borrowed). The model is then spent: only destroy it. On success *out is
 * owned by the caller. 0 or CW_ENOMEM. */
int cw_heap_model_report(cw_heap_model_t *m, cw_stacks_t *stacks, const cw_heap_losses_t *losses,
                         cw_heap_report_t **out);
void cw_heap_report_free(cw_heap_report_t *r); /* accepts NULL */

/* The report as one JSON document, every stack (docs/DESIGN.md, "Heap
 * drill-down"): a malloc'd string, or NULL on CW_ENOMEM. */
char *cw_heap_report_json(const cw_heap_report_t *r);
/* The same as text, innermost frame first; max_stacks > 0 prints that
 * many stacks per process and says how many it left out. 0 or CW_EIO. */
int cw_heap_report_print(const cw_heap_report_t *r, uint32_t max_stacks, FILE *out);

/* ---- the diff (UMDH's) ---- */

/* The diff of a report (its JSON, as cw_heap_report_json writes it, e.g.
 * stored or saved with --json) between two points, each "start" (nothing
 * outstanding: the trace's beginning), "end" (what was outstanding at the
 * end) or a snapshot's number, 1 for the first: per stack, the growth of
 * outstanding bytes and blocks from a to b, largest growth first, as JSON
 * {"a": {"point", "ts_ns"}, "b": {...}, "bytes_delta", "count_delta",
 * "stacks": [{"pid", "frames", "bytes_delta", "count_delta", "bytes_a",
 * "bytes_b", "count_a", "count_b"}]} (stacks that did not change left out).
 * 0 with *out a malloc'd string, or CW_EPARSE (not a heap report),
 * CW_EINVAL (no such point) or CW_ENOMEM with d set. */
int cw_heap_diff_json(const char *report, const char *a, const char *b, char **out, cw_diag_t *d);
/* A report's JSON as a pprof heap profile (gzipped protobuf, as `go tool
 * pprof` reads it): sample types inuse_space and inuse_objects (outstanding
 * at the end; the default), alloc_space and alloc_objects; one sample per
 * process and stack, labels process and pid. 0 with *out (malloc'd, *len
 * bytes), or CW_EPARSE (not a heap report), CW_ENOMEM or CW_EIO with d. */
int cw_heap_pprof(const char *report, char **out, size_t *len, cw_diag_t *d);
/* That diff as text, innermost frame first; max_stacks > 0 prints that
 * many. 0, CW_EPARSE or CW_EIO. */
int cw_heap_diff_print(const char *diff, uint32_t max_stacks, FILE *out);

#endif
