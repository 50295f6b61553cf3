/* heaptraces.h - the service's heap traces: the heap drill-down
 * (heap_launch.h, attach mode) of one process at a time per process, asked
 * for by the API or by an alert rule's heap_trace, bounded in time and in
 * number, each recorded in the store (heapdb.h) from the moment it is
 * asked for, with its report when it ends, or the reason it could not
 * start.
 *
 * Stage: drill (above sources and store). Threads: each trace runs on a
 * thread of its own (the reader of its ring), which writes its row on its
 * own store handle; cw_heaptraces_ask, _stop_one and _progress may be
 * called from any thread (the HTTP workers, the alert engine's thread);
 * cw_heaptraces_stop from the one that started the set, once. */
#ifndef COMMITWATCH_HEAPTRACES_H
#define COMMITWATCH_HEAPTRACES_H

#include <stdbool.h>
#include <stdint.h>

#include "commitwatch/error.h"
#include "commitwatch/layerfeed.h"

typedef struct cw_heaptraces cw_heaptraces_t;

typedef struct cw_heaptraces_opts {
    const char *db_path;         /* the service's database (borrowed; copied) */
    uint32_t max_running;        /* traces at once over all processes; 0: 2 */
    int64_t max_duration_ns;     /* the longest trace asked for; 0: 1 h */
    int64_t default_duration_ns; /* a trace asked without a duration; 0: 5 min (at
                                  * most max_duration_ns) */
    const char *preload;         /* the interposer, NULL: found as heap_launch.h says */
    /* Where each trace's seconds go for the store's heap layer (borrowed,
     * outliving the set); NULL: the traces' reports only. */
    cw_layerfeed_t *feed;
} cw_heaptraces_opts_t;

/* 0 with *out set, or CW_ENOMEM or CW_EINVAL (a path too long). Rows a killed service left
 * "running" are marked failed (logged). */
int cw_heaptraces_start(const cw_heaptraces_opts_t *o, cw_heaptraces_t **out, cw_diag_t *d);
/* Stops every running trace (each stores what it read, state "stopped",
 * end_reason "shutdown") and waits for them; asks are refused from then
 * on ("the service is stopping"). The set stays until cw_heaptraces_stop.
 * The thread that started the set; accepts NULL. */
void cw_heaptraces_end(cw_heaptraces_t *h);
/* Ends the traces as cw_heaptraces_end (if not done) and frees the set.
 * Accepts NULL. */
void cw_heaptraces_stop(cw_heaptraces_t *h);

typedef struct cw_heaptrace_ask {
    uint32_t pid;
    uint32_t proc;             /* the instance id, if known; 0: none */
    const char *process;       /* its name, or NULL */
    const char *trigger;       /* "api" or "alert" */
    int64_t alert_series;      /* trigger "alert": alert_series.id */
    const char *rule;          /* trigger "alert": the rule */
    int64_t duration_ns;       /* 0: the default */
    int64_t snapshot_every_ns; /* a snapshot this often (heap.h); 0: none */
} cw_heaptrace_ask_t;

/* Records a trace of a->pid and starts it. A trace that cannot start is
 * recorded too, state "failed" with the reason, and answered with the
 * error: CW_EINVAL (a duration over the maximum), CW_ERANGE (the limit of
 * running traces is reached), CW_ESTOPPED (that process is traced
 * already: *id is then the running trace), CW_ENOMEM, or the store's
 * error. The attach itself (no such process, permission, a static
 * program) happens on the trace's thread: its failure is recorded in the
 * row. *id: the row's id (0 if none could be written). */
int cw_heaptraces_ask(cw_heaptraces_t *h, const cw_heaptrace_ask_t *a, int64_t *id, cw_diag_t *d);
/* Asks trace id to end now (it stores what it read, state "stopped").
 * 0, or CW_ENOENT when it is not running. */
int cw_heaptraces_stop_one(cw_heaptraces_t *h, int64_t id);
/* Trace id is running: true with the events applied so far and whether
 * the interposer is in place yet (attaching takes up to 10 s). */
bool cw_heaptraces_progress(cw_heaptraces_t *h, int64_t id, uint64_t *events, bool *attached);
/* How many run now. */
uint32_t cw_heaptraces_running(cw_heaptraces_t *h);

#endif
