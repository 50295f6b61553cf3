/* batch.h - one closed time bucket, as the aggregator hands it to the store.
 *
 * The storage model (docs/DESIGN.md, "Storage model") is append-only per
 * bucket: a batch holds only rows about events whose ts falls in
 * [bucket_ns, bucket_ns + width_ns):
 *   - commits:  per (proc, stack, a): new bytes and commit events, where
 *     a is the bucket or CW_TS_BEFORE for rundown commits;
 *   - releases: per (proc, stack, a): bytes, pieces and "closed" (commit
 *     events whose last byte went) released in this bucket, a being the
 *     commit's bucket or CW_TS_BEFORE;
 *   - activity: per proc: events, net delta of outstanding bytes, and the
 *     highest outstanding relative to the bucket start (>= 0, the start
 *     included) with the first time it was reached;
 *   - new processes (and exits), new frames and new stacks (with tags);
 *   - short-lived instances folded into a group (docs/DESIGN.md,
 *     "Short-lived processes"): their rows carry the group's id (a
 *     process row with pid 0), and one folded row each says which
 *     instance it was; it rides in the batch of the instance's exit.
 * With these rows the figures of any bucket-aligned window are exact.
 *
 * A batch owns all its memory; cw_batch_free() releases it. It is built
 * on the core thread and then transferred, whole, to the store writer. */
#ifndef COMMITWATCH_BATCH_H
#define COMMITWATCH_BATCH_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "commitwatch/common.h"

typedef struct cw_row_commit {
    uint32_t proc, stack;
    int64_t a; /* == batch bucket, or CW_TS_BEFORE (rundown) */
    uint64_t bytes;
    uint64_t events;
} cw_row_commit_t;

typedef struct cw_row_release {
    uint32_t proc, stack;
    int64_t a; /* bucket of the commit, or CW_TS_BEFORE */
    uint64_t bytes;
    uint64_t pieces;
    uint64_t closed;
} cw_row_release_t;

typedef struct cw_row_activity {
    uint32_t proc;
    uint64_t events;
    int64_t delta;
    int64_t relpeak;    /* >= 0 */
    int64_t relpeak_ns; /* bucket start when relpeak is the start state */
} cw_row_activity_t;

/* Insert-or-update of a process instance. */
typedef struct cw_row_proc {
    uint32_t id, pid;
    int64_t start_ns;
    int64_t exit_ns; /* CW_TS_NEVER while alive */
    char *name;
    char *cmdline;       /* may be NULL */
    bool tracking_ended; /* exit_ns is where tracking ended, not an exit */
} cw_row_proc_t;

/* A short-lived instance folded into group `group` (a cw_row_proc_t of
 * the same batch or an earlier one, pid 0). */
typedef struct cw_row_folded {
    uint32_t group, pid;
    int64_t start_ns, exit_ns;
    uint64_t bytes; /* bytes it committed in its life */
} cw_row_folded_t;

/* A snapshot of a live instance's committed-memory map (map.h, schema
 * 008_map): its encoded ranges at ts_ns (the batch's bucket end). */
typedef struct cw_row_map {
    uint32_t proc;
    uint32_t nranges;
    int64_t ts_ns;
    uint64_t bytes;       /* committed bytes of the ranges */
    unsigned char *blob;  /* cw_map_encode(); owned by the batch */
    size_t len;
} cw_row_map_t;

/* A correction of a live instance's figures from the OS's own (source.h,
 * correction; schema 007_corrections): the bytes the correction's events
 * committed and decommitted, at ts_ns. */
typedef struct cw_row_correction {
    uint32_t proc;
    int64_t ts_ns;
    uint64_t committed, decommitted;
} cw_row_correction_t;

typedef struct cw_row_frame {
    uint32_t id;
    char *text;
} cw_row_frame_t;

typedef struct cw_row_stack {
    uint32_t id;
    uint32_t nframes;
    uint32_t *frames; /* frame ids, outermost first */
    char *tag; /* NULL: untagged (an aggregator without a tagger, agg.h) */
} cw_row_stack_t;

#define CW__VEC(T)                                                                                 \
    struct {                                                                                       \
        T *v;                                                                                      \
        uint32_t n;                                                                                \
        size_t cap;                                                                                \
    }

typedef struct cw_batch {
    int64_t bucket_ns; /* start of the bucket */
    int64_t width_ns;  /* raw tier width */
    CW__VEC(cw_row_commit_t) commits;
    CW__VEC(cw_row_release_t) releases;
    CW__VEC(cw_row_activity_t) activity;
    CW__VEC(cw_row_proc_t) procs;
    CW__VEC(cw_row_frame_t) frames;
    CW__VEC(cw_row_stack_t) stacks;
    CW__VEC(cw_row_folded_t) folded;
    CW__VEC(cw_row_map_t) maps;
    CW__VEC(cw_row_correction_t) corrections;
    /* 0: the commit layer (VirtualAlloc, mmap); 1: the heap layer (a heap
     * trace's allocations, heaptraces.h). A batch of layer 1 holds rows
     * only: commits, releases and activity. */
    uint8_t layer;
    /* Batches of the heap layer riding this one to the store (layerfeed.h):
     * each of its own bucket of the raw width, which may be earlier than
     * this batch's; their stacks are carried by this batch or an earlier
     * one. Owned. Not in the journal's encoding (cw_batch_encode): a run
     * killed with riders queued loses them, as it loses the heap traces'
     * reports. */
    CW__VEC(struct cw_batch *) riders;
    /* Source counters, cumulative since the service started. */
    uint64_t events_total;
    uint64_t events_lost;
    int64_t drift_bytes;
} cw_batch_t;

/* 0 and *out (zeroed), or CW_ENOMEM. */
int cw_batch_create(int64_t bucket_ns, int64_t width_ns, cw_batch_t **out);
void cw_batch_free(cw_batch_t *b); /* accepts NULL */

/* Append helpers: 0 or CW_ENOMEM. Strings are copied. */
int cw_batch_add_commit(cw_batch_t *b, const cw_row_commit_t *r);
int cw_batch_add_release(cw_batch_t *b, const cw_row_release_t *r);
int cw_batch_add_activity(cw_batch_t *b, const cw_row_activity_t *r);
int cw_batch_add_proc(cw_batch_t *b, uint32_t id, uint32_t pid, int64_t start_ns, int64_t exit_ns,
                      const char *name, const char *cmdline);
int cw_batch_add_folded(cw_batch_t *b, const cw_row_folded_t *r);
/* r->blob moves into the batch on success (the caller frees it on error). */
int cw_batch_add_map(cw_batch_t *b, const cw_row_map_t *r);
int cw_batch_add_correction(cw_batch_t *b, const cw_row_correction_t *r);
/* r (a batch of layer 1) moves into b on success (the caller frees it on
 * error). 0, CW_EINVAL (r is not of layer 1 or is b) or CW_ENOMEM. */
int cw_batch_add_rider(cw_batch_t *b, cw_batch_t *r);
int cw_batch_add_frame(cw_batch_t *b, uint32_t id, const char *text);
int cw_batch_add_stack(cw_batch_t *b, uint32_t id, const uint32_t *frames, uint32_t n,
                       const char *tag);

/* Sort rows in place into key order, (proc, stack, a) or proc; the first
 * two then sum the rows of one key into one and return the new count.
 * Shared by the aggregator (rows remapped onto a folded group) and the
 * store (rows inserted in key order, a hand-built batch's repeats). */
uint32_t cw_batch_merge_commits(cw_row_commit_t *v, uint32_t n);
uint32_t cw_batch_merge_releases(cw_row_release_t *v, uint32_t n);
void cw_batch_sort_activity(cw_row_activity_t *v, uint32_t n);

/* A batch as bytes, for the store's pending-batch journal (store.h): every
 * row and counter, little-endian whatever the host, so a batch decoded is
 * the batch encoded (the bucket and width included). Appends to *out (its
 * owner frees out->p); 0 or CW_ENOMEM. */
int cw_batch_encode(const cw_batch_t *b, cw_buf_t *out);
/* The inverse: a new batch (*out, the caller's), or CW_EPARSE when the
 * bytes are not exactly one encoded batch (cut, too long, a count past
 * the data, a frame or tag that is not text), CW_ENOMEM. */
int cw_batch_decode(const void *p, size_t n, cw_batch_t **out);

#endif
