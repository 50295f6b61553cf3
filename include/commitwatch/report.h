/* report.h - the figures of one analysis window, and their printing.
 *
 * A cw_report_t is what `analyze` prints and what the API serves: for a
 * window [from_ns, to_ns), per process instance and per stack, the WPA
 * "VirtualAlloc Commit Lifetimes" figures defined in ARCHITECTURE.md
 * ("Windows of time and the four types"). Two producers fill it the same
 * way: the exact trace analyzer (analysis.h) and the database query
 * (store.h). Process totals are sums over their stacks, except peak.
 *
 * A report owns all its memory (strings included); cw_report_free() frees
 * it. Thread: any, one at a time. */
#ifndef COMMITWATCH_REPORT_H
#define COMMITWATCH_REPORT_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

enum { CW_AIFI = 0, CW_AIFO = 1, CW_AOFI = 2, CW_AOFO = 3, CW_TYPE__COUNT = 4 };

typedef struct cw_typefig {
    uint64_t bytes;
    uint64_t count; /* pieces */
} cw_typefig_t;

/* Figures that add up across stacks. */
typedef struct cw_figs {
    uint64_t size_bytes;   /* bytes newly committed in the window */
    uint64_t commit_count; /* commit events in the window with >= 1 new byte */
    cw_typefig_t types[CW_TYPE__COUNT];
} cw_figs_t;

/* impacting = AIFO - AOFI bytes (held within INT64_MIN..INT64_MAX: the
 * byte counts are unsigned); transient = AIFI. */
int64_t cw_figs_impacting(const cw_figs_t *f);
void cw_figs_add(cw_figs_t *acc, const cw_figs_t *f);

typedef struct cw_stack_report {
    uint32_t stack_id;
    const char *tag; /* one of its report's tags (cw_report_add_tag) */
    char **frames;   /* outermost first */
    uint32_t nframes;
    cw_figs_t figs;
} cw_stack_report_t;

typedef struct cw_proc_report {
    uint32_t id; /* instance id */
    uint32_t pid;
    char *name;
    char *cmdline;   /* may be NULL */
    int64_t start_ns;
    int64_t exit_ns; /* CW_TS_NEVER when it had not exited */
    /* CW_TS_NEVER, or where tracking ended while it was alive (a stored
     * run's end: it did not exit, exit_ns is CW_TS_NEVER) */
    int64_t tracking_ended_ns;
    /* 0: an instance; N >= 2: a group of N short-lived instances folded
     * together (docs/DESIGN.md, "Short-lived processes"; pid 0; its peak
     * is an upper bound, the sum of its members' per-bucket peaks). A
     * group of one is shown as the instance it is. */
    uint32_t folded;
    /* Corrections of its figures from the OS's own after lost events
     * (cw_proc_info_t; 0 and CW_TS_NEVER: none, and from a trace). */
    uint32_t corrections;
    uint64_t corrected_committed, corrected_decommitted;
    int64_t last_correction_ns;
    cw_figs_t figs;  /* sum of stacks */
    uint64_t peak_bytes;
    int64_t peak_ns;
    uint64_t outstanding_end; /* outstanding(to) = AIFO + AOFO bytes */
    uint64_t events;          /* events of this instance in the window */
    cw_stack_report_t *stacks;
    uint32_t nstacks;
} cw_proc_report_t;

typedef struct cw_report {
    int64_t from_ns, to_ns;
    cw_proc_report_t *procs;
    uint32_t nprocs;
    char *note; /* optional, e.g. window snapped to buckets; may be NULL */
    /* The texts the stacks' tags point to, owned here: a report names a
     * few tags for many stacks (10,000 live processes: 90,000 stacks,
     * a few hundred tags), so a tag is not a string per stack. */
    char **tags;
    uint32_t ntags;
    size_t tags_cap;
} cw_report_t;

void cw_report_free(cw_report_t *r); /* accepts NULL */
/* A copy of text that r owns, for its stacks' tags (the caller reuses it
 * for every stack of the same tag); NULL on CW_ENOMEM. */
const char *cw_report_add_tag(cw_report_t *r, const char *text);

/* Sorts processes (impacting desc, then size desc, then id) and each
 * process's stacks (size desc, then impacting desc, then stack id). */
void cw_report_sort(cw_report_t *r);

/* The report as the JSON of `analyze --json` (see README). Returns a
 * malloc'd string or NULL on CW_ENOMEM. with_stacks adds "stacks". */
char *cw_report_json(const cw_report_t *r, bool with_stacks);
/* One element of that JSON's "processes" array (the HTTP API serves the
 * same objects). Returns a new cJSON object owned by the caller
 * (cJSON_Delete), or NULL on CW_ENOMEM. */
struct cJSON;
struct cJSON *cw_report_proc_json(const cw_proc_report_t *p, bool with_stacks);
/* A WPA-like text table. 0 or CW_EIO. */
int cw_report_print_table(const cw_report_t *r, bool with_stacks, FILE *out);

/* "12.3 MB" style (powers of 1024, labelled KB/MB/GB like WPA). */
void cw_format_bytes(int64_t bytes, char *buf, size_t len);
/* The same for a count that may pass 2^63. */
void cw_format_ubytes(uint64_t bytes, char *buf, size_t len);

#endif
