/* map.h - a process instance's committed memory at one instant (issue 14):
 * the ranges of the tracker's interval map, their compact encoding for the
 * store, the difference of two maps, and the request channel by which an
 * HTTP worker asks the core thread for a live map.
 *
 * A committed range is one piece of the tracker: [addr, addr + size)
 * committed by one commit event (commit_ns, stack_id; commit_ns
 * CW_TS_BEFORE for memory found committed when tracing began). A map also
 * holds the reserved-but-uncommitted ranges (`res`): address space
 * reserved and not committed now, each with the time and stack of what
 * reserved it (a reserve event, or the commit that implied the
 * reservation and was decommitted since; tracker.c, "Reserved space"),
 * in the same fields (commit_ns is then the reserve time). Each list is
 * sorted by address without overlaps, and no reserved range overlaps a
 * committed one.
 *
 * Threads: a cw_map_t is owned by whoever made it (plain data). The
 * request channel (cw_mapreq_*) is the only shared object: any thread may
 * call cw_mapreq_ask(); only the core thread calls cw_mapreq_serve(),
 * which reads the tracker on that thread and copies the ranges into the
 * asker's map, so no other thread ever reads the tracker. See DESIGN.md,
 * "Threads". */
#ifndef COMMITWATCH_MAP_H
#define COMMITWATCH_MAP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "commitwatch/error.h"

typedef struct cw_map_range {
    uint64_t addr, size;
    int64_t commit_ns; /* CW_TS_BEFORE: committed before tracing began */
    uint32_t stack_id;
} cw_map_range_t;

typedef struct cw_map {
    uint32_t proc_id;
    int64_t at_ns; /* the instant the map shows */
    cw_map_range_t *v; /* committed ranges */
    uint32_t n;
    size_t cap;
    cw_map_range_t *res; /* reserved, not committed; commit_ns = reserve time */
    uint32_t nres;
    size_t res_cap;
} cw_map_t;

/* Frees the ranges and zeroes m; accepts a zeroed map. */
void cw_map_clear(cw_map_t *m);
/* Appends one committed range. 0 or CW_ENOMEM. */
int cw_map_push(cw_map_t *m, uint64_t addr, uint64_t size, int64_t commit_ns, uint32_t stack_id);
/* Appends one reserved-but-uncommitted range. 0 or CW_ENOMEM. */
int cw_map_push_reserved(cw_map_t *m, uint64_t addr, uint64_t size, int64_t reserve_ns,
                         uint32_t stack_id);
/* Sum of the committed ranges' sizes. */
uint64_t cw_map_bytes(const cw_map_t *m);
/* Sum of the reserved-but-uncommitted ranges' sizes. */
uint64_t cw_map_reserved_bytes(const cw_map_t *m);

/* The encoding stored by the database (map_snapshots.ranges): a format
 * byte (3 when every range starts and ends on a 4 KiB page, else 2;
 * format 1, still read, had no reserved ranges and no count), the number
 * of committed ranges as a varint, the committed ranges, then the
 * reserved ones to the end. Per range unsigned LEB128 varints of the gap
 * from the previous range's end in its list, the size (both in 4 KiB
 * pages in format 3, in bytes in 2), the stack id, and the zigzag of
 * commit_ns - at_ns in ns (before-tracing ranges: code 0 is reserved for
 * them, others are shifted by one). About 7-15 bytes a range. *out is
 * malloc'd (owner: the caller). 0 or CW_ENOMEM. */
int cw_map_encode(const cw_map_t *m, unsigned char **out, size_t *len);
/* Decodes into m (cleared first; proc_id and at_ns set from the
 * arguments). 0, CW_ENOMEM, or CW_EPARSE with d saying what is wrong. */
int cw_map_decode(const unsigned char *buf, size_t len, uint32_t proc_id, int64_t at_ns,
                  cw_map_t *m, cw_diag_t *d);

/* The difference of the committed ranges of a (earlier) and b (later) of
 * one instance (reserved ranges take no part): each byte
 * committed at b is `kept` when a holds it from the same commit event
 * (commit_ns and stack_id), else `new`; each byte of a not kept is
 * `freed` (released, or recommitted by another event). */
typedef enum cw_map_change { CW_MAP_NEW = 0, CW_MAP_FREED, CW_MAP_KEPT } cw_map_change_t;
typedef struct cw_map_diff_range {
    cw_map_range_t r;
    cw_map_change_t change;
} cw_map_diff_range_t;
typedef struct cw_map_diff {
    cw_map_diff_range_t *v; /* sorted by address; freed ranges may overlap new ones */
    uint32_t n;
    size_t cap;
    uint64_t bytes[3]; /* by cw_map_change_t */
} cw_map_diff_t;
int cw_map_diff(const cw_map_t *a, const cw_map_t *b, cw_map_diff_t *out); /* 0 or CW_ENOMEM */
void cw_map_diff_clear(cw_map_diff_t *d);
const char *cw_map_change_name(cw_map_change_t c); /* "new", "freed", "kept" */

/* ---- the request channel ----------------------------------------------- */

typedef struct cw_mapreq cw_mapreq_t;

/* Fills m with the ranges of live instance proc_id now; returns 0,
 * CW_ENOENT (not live) or CW_ENOMEM. Runs on the core thread. */
typedef int (*cw_map_fill_fn)(void *ctx, uint32_t proc_id, cw_map_t *m);

/* 0 and *out, or CW_ENOMEM. destroy accepts NULL; no ask may be in flight. */
int cw_mapreq_create(cw_mapreq_t **out);
void cw_mapreq_destroy(cw_mapreq_t *q);

/* Any thread: queues a request for proc_id's live map and waits at most
 * timeout_ns for the core thread to serve it. 0 and m filled (owned by
 * the caller), CW_ENOENT (not a live instance), CW_ENOMEM, or CW_ESTOPPED
 * (not served in time, or the channel is closed: nobody serves it). A
 * request still queued at the timeout is withdrawn; one being served is
 * waited for (serving copies the ranges, a bounded time). */
int cw_mapreq_ask(cw_mapreq_t *q, uint32_t proc_id, int64_t timeout_ns, cw_map_t *m);
/* Core thread: is a request waiting? One atomic load. */
bool cw_mapreq_pending(cw_mapreq_t *q);
/* Core thread: serves every queued request with fill(ctx, ...). */
void cw_mapreq_serve(cw_mapreq_t *q, cw_map_fill_fn fill, void *ctx);
/* Core thread: nobody will serve any more (the tracker is gone or
 * emptied): queued and later requests fail at once with CW_ESTOPPED. */
void cw_mapreq_close(cw_mapreq_t *q);

#endif
