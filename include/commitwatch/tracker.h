/* tracker.h - committed ranges per process instance, with attribution.
 *
 * Holds, for every live process instance (pid + start time), the committed
 * pages as an interval map of pieces, each pointing at the commit record
 * (time, stack) that created it. Implements the rules of ARCHITECTURE.md
 * "Commit tracking": idempotent commit, decommit/release that splits pieces
 * and charges the removed bytes to the commit that made them, process exit
 * releasing everything, pid reuse starting a new instance, unannounced
 * pids getting an instance named "pid N".
 *
 * It also keeps each instance's reserved address space (for the maps
 * only; no figure or callback depends on it): a reserve event reserves
 * its range, a commit on unreserved space reserves it too (as Windows'
 * MEM_COMMIT | MEM_RESERVE), a decommit leaves the space reserved, a
 * release or the exit drops it. tracker.c, "Reserved space".
 *
 * Output goes to a sink (cw_tracker_sink_t): the window analyzer
 * (analysis.h) or the bucket aggregator (agg.h).
 *
 * A *piece* (the unit the four types count) is the set of bytes of one
 * commit event released by one later event. A release callback fires once
 * per (commit event, release event) pair, with the bytes summed.
 *
 * Cost: O(log n) per event in the live pieces of that process, times the
 * k pieces (gaps) an event touches, usually 1. Memory comes from pools; the hot path
 * does not call malloc per event once the pools are warm.
 *
 * Thread: the core thread only. Sink callbacks run on that thread, inside
 * cw_tracker_apply(). */
#ifndef COMMITWATCH_TRACKER_H
#define COMMITWATCH_TRACKER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "commitwatch/event.h"
#include "commitwatch/map.h"

/* A process instance as the sink sees it. Owned by the tracker; valid
 * during callbacks and, for a live instance, until its exit callback
 * returns. */
typedef struct cw_proc {
    uint32_t id;        /* instance id: dense, starts at first_proc_id */
    uint32_t pid;
    int64_t start_ns;   /* process_start time, or first event for "pid N" */
    int64_t exit_ns;    /* CW_TS_NEVER while alive; see tracking_ended */
    const char *name;
    const char *cmdline; /* may be NULL */
    uint64_t outstanding; /* committed bytes now */
    bool implicit;      /* created by an event for an unannounced pid */
    bool tracking_ended; /* ended by cw_tracker_end_all(), not by an exit */
} cw_proc_t;

/* A commit record: one commit event that committed at least one new byte.
 * Owned by the tracker. */
typedef struct cw_commit {
    int64_t ts;         /* CW_TS_BEFORE for rundown */
    uint32_t stack_id;
    uint64_t bytes;     /* new bytes the event committed */
    uint64_t remaining; /* bytes of it still committed */
} cw_commit_t;

typedef struct cw_tracker_sink {
    void *ctx;
    /* A process instance began (announced or implicit). */
    void (*on_start)(void *ctx, const cw_proc_t *p, int64_t ts);
    /* Every event applied to p (commit, decommit, reserve, release,
     * start, exit), after its effects; for activity and peak tracking. */
    void (*on_event)(void *ctx, const cw_proc_t *p, int64_t ts);
    /* A commit event committed new_bytes > 0 new bytes, creating c. */
    void (*on_commit)(void *ctx, const cw_proc_t *p, const cw_commit_t *c, int64_t ts);
    /* One piece: `bytes` of commit c released at ts. c->remaining is
     * already reduced; it is 0 when this was c's last piece. */
    void (*on_release)(void *ctx, const cw_proc_t *p, const cw_commit_t *c, uint64_t bytes,
                       int64_t ts);
    /* The instance exited (after its memory was released). */
    void (*on_exit)(void *ctx, const cw_proc_t *p, int64_t ts);
    /* From cw_tracker_finish(): a commit still live at the end. */
    void (*on_live)(void *ctx, const cw_proc_t *p, const cw_commit_t *c);
} cw_tracker_sink_t;

typedef struct cw_tracker cw_tracker_t;

/* sink is copied; ctx borrowed. Instance ids start at first_proc_id (>= 1;
 * a database continues its own numbering). 0 or CW_ENOMEM. */
int cw_tracker_create(const cw_tracker_sink_t *sink, uint32_t first_proc_id,
                      cw_tracker_t **out);
void cw_tracker_destroy(cw_tracker_t *t); /* accepts NULL */

/* Applies one event. Events must come in ts order (the caller checks).
 * 0 or CW_ENOMEM (the tracker is then unusable). */
int cw_tracker_apply(cw_tracker_t *t, const cw_event_t *ev);

/* Ends every live instance at ts (tracking ended: the service stops, or
 * the input ends, and a later run starts new instances from its rundown).
 * The sink sees what an exit gives (the memory released at ts, on_event,
 * on_exit with exit_ns = ts) with p->tracking_ended set, so that what is
 * stored can tell it from a real exit. ts must not be before the last
 * event. */
void cw_tracker_end_all(cw_tracker_t *t, int64_t ts);

/* Calls on_live for every commit record still live, process by process.
 * Does not change state. */
void cw_tracker_finish(cw_tracker_t *t);

/* Live figures for tests and the oracle. */
uint32_t cw_tracker_live_processes(const cw_tracker_t *t);
/* The live instance for pid, or NULL. Borrowed. */
const cw_proc_t *cw_tracker_find(const cw_tracker_t *t, uint32_t pid);
/* The committed block that starts at addr in the live instance of pid:
 * its piece there and the pieces of the same commit record that follow it
 * without a gap. 0 and *size set, or CW_ENOENT (no such instance, or no
 * piece starts at addr). The heap layer releases a freed block with it
 * (analysis/heap.c): a free names the address only. */
int cw_tracker_block_at(const cw_tracker_t *t, uint32_t pid, uint64_t addr, uint64_t *size);
/* Releases that block (as cw_tracker_apply would a CW_OP_RELEASE of it
 * at ev->ts; ev's pid, tid, addr and ts are read, its op and size not):
 * one lookup where cw_tracker_block_at and the release took two. 0 and
 * *size set, CW_ENOENT (nothing changed), or CW_ENOMEM. */
int cw_tracker_release_block(cw_tracker_t *t, const cw_event_t *ev, uint64_t *size);
/* Commits ev's range as cw_tracker_apply would a CW_OP_COMMIT (ev's op
 * not read), unless a committed piece starts at ev->addr: then nothing
 * changes and *occupied is set (the heap layer releases that block first,
 * cw_tracker_release_block, and commits again). One lookup fewer than
 * cw_tracker_block_at and the commit. 0 or CW_ENOMEM. */
int cw_tracker_commit_block(cw_tracker_t *t, const cw_event_t *ev, bool *occupied);
/* Number of pieces in the interval map of the live instance of pid. */
uint64_t cw_tracker_piece_count(const cw_tracker_t *t, uint32_t pid);
/* Number of pieces of its reserved space kept apart from the committed
 * pieces (tracker.c, "Reserved space"). */
uint64_t cw_tracker_reserved_piece_count(const cw_tracker_t *t, uint32_t pid);
/* Next instance id the tracker would hand out. */
uint32_t cw_tracker_next_proc_id(const cw_tracker_t *t);
/* Bytes the tracker holds: its pools' chunks (pieces, tree nodes, commit
 * and reservation records, instances; kept at their peak for reuse), the pid table and
 * the gather array; names and command lines not counted. */
size_t cw_tracker_memory(const cw_tracker_t *t);

/* The committed and the reserved-but-uncommitted ranges of live instance
 * proc_id (map.h), stamped at_ns. m's arrays are reused. 0, CW_ENOENT (not live) or CW_ENOMEM. */
int cw_tracker_map(const cw_tracker_t *t, uint32_t proc_id, int64_t at_ns, cw_map_t *m);

/* When a live instance's map is worth keeping (the store's snapshots):
 * its pieces (committed or reserved) changed since its last snapshot, and either min_gap_ns has
 * passed and its committed bytes moved by min_bytes or min_percent of
 * what they were, or max_gap_ns has passed. The first change always is. */
typedef struct cw_map_policy {
    int64_t min_gap_ns, max_gap_ns;
    uint64_t min_bytes;
    unsigned min_percent; /* 0: only min_bytes */
} cw_map_policy_t;
/* Calls cb with the map (stamped now_ns; borrowed for the call) of every
 * live instance due under pol (every changed one when force); an instance
 * counts as snapshotted when cb returns 0. 0, CW_ENOMEM or cb's error. */
int cw_tracker_maps_due(cw_tracker_t *t, int64_t now_ns, const cw_map_policy_t *pol, bool force,
                        int (*cb)(void *ctx, const cw_map_t *m), void *ctx);

#endif
