/* source.h - an event source: replay (any OS), perf (Linux), etw (Windows).
 *
 * A source is a struct of callbacks, in the manner of Fluent Bit inputs.
 * run() delivers normalized events, in ts order, to an emit callback on
 * the calling thread (the core thread) until the input ends or stop() is
 * called; live sources also call tick() about once a second with the
 * current time so idle buckets close.
 *
 * Stacks are interned into the cw_stacks_t given at open; the source is
 * the only writer of that table while run() executes. */
#ifndef COMMITWATCH_SOURCE_H
#define COMMITWATCH_SOURCE_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "commitwatch/error.h"
#include "commitwatch/event.h"
#include "commitwatch/source_sink.h"
#include "commitwatch/stacks.h"

/* How to open a source. Strings are borrowed for the call. */
typedef struct cw_source_opts {
    const char *arg;     /* what follows "name:" in --source (path for replay), or "" */
    cw_stacks_t *stacks; /* stacks are interned here; borrowed for the source's life */
    /* Replay only (cw_source_check_opts refuses them for another
     * source): shift every time so the input starts now, and pace events
     * at `speed` times real time, ticking while it waits so buckets close
     * as they would live (0 = as fast as possible). */
    bool rebase_now;
    double speed;
    /* etl only (cw_source_check_opts refuses it for another source): a
     * folder of copies of the trace's DLLs/EXEs whose exports name the
     * frames in them (NULL: none). */
    const char *images;
    /* etw only (others ignore it): DbgHelp's symbol path for PDBs (NULL:
     * _NT_SYMBOL_PATH, else exports only). */
    const char *symbol_path;
    /* perf only (others ignore them; 0 = the default, docs/DESIGN.md
     * "Memory"): the bytes of all CPUs' ring buffers together, the bytes
     * of records copied out of them and waiting, and the processes whose
     * unwinding state (libdw) is kept between samples. */
    uint64_t perf_ring_bytes, perf_queue_bytes;
    uint32_t perf_unwind_procs;
} cw_source_opts_t;

typedef struct cw_source_ops {
    const char *name; /* "replay", "perf", "etw" */
    /* "windows" / "linux": the platform whose stacks the data holds, for a
     * source that reads one platform only (etl, etw, rundown); NULL when
     * the input says which (replay): then platform() tells. */
    const char *fixed_platform;
    /* 0 and *impl set, or a CW_E* code with d saying what to do. */
    int (*open)(void **impl, const cw_source_opts_t *o, cw_diag_t *d);
    /* The platform of the open source's data, where fixed_platform is
     * NULL (unused otherwise). */
    const char *(*platform)(void *impl);
    /* Blocks delivering events; 0 at the end of input or after stop(),
     * else a CW_E* code (d filled) or the emit callback's return. */
    int (*run)(void *impl, const cw_source_sink_t *sink, cw_diag_t *d);
    /* Must only interrupt blocking work; async-signal-safe and callable
     * from any thread. */
    void (*stop)(void *impl);
    void (*close)(void *impl); /* accepts NULL */
    /* A recorded input (replay, etl): the recorded machine's commit limit,
     * which the alerts' time to limit is computed against instead of this
     * machine's (docs/ALERTS.md, "Time to limit"). 0 and *bytes set, or
     * CW_ENOENT with *why (static text) saying why the input does not
     * tell it. NULL for a live source: the machine it runs on. */
    int (*commit_limit)(void *impl, uint64_t *bytes, const char **why);
} cw_source_ops_t;

/* The sources built into this binary (a registry CMake generates from
 * its source list), looked up by name; NULL if none. */
const cw_source_ops_t *cw_source_find(const char *name);
/* This platform's live source ("perf", "etw"), or NULL where none is
 * built: the default of `run` and `record`. */
const char *cw_source_live(void);
/* --source SPEC ("perf", "etw", "replay:PATH"): the source's ops and, in
 * *arg, what follows the colon ("" when none). NULL with CW_EUSAGE in d
 * (naming the sources this build has) when unknown or spec is NULL. */
const cw_source_ops_t *cw_source_lookup(const char *spec, const char **arg, cw_diag_t *d);
/* CW_EUSAGE with d filled when o has an option that only another source
 * takes: images (--images DIR, etl's) or rebase_now and speed (replay's);
 * else 0. */
int cw_source_check_opts(const cw_source_ops_t *ops, const cw_source_opts_t *o, cw_diag_t *d);

/* Sessions: one source from open to close, the same for `run`, `analyze`
 * and `record` (sources/common/session.c). Thread: the core thread, but
 * cw_source_session_stop(), which any thread or a signal handler may
 * call while the session exists. */
typedef struct cw_source_session {
    const cw_source_ops_t *ops;
    void *impl;              /* the open source; NULL while closed */
    cw_source_opts_t opts;   /* a copy; its strings stay borrowed */
    void *_Atomic stoppable; /* impl while open, for cw_source_session_stop() */
} cw_source_session_t;

/* Fills s (ops and o copied) and opens it: the check of the options only
 * one source takes (cw_source_check_opts), then ops->open. 0, or the error with d
 * filled by the check or the source, and s->impl NULL. */
int cw_source_session_open(cw_source_session_t *s, const cw_source_ops_t *ops,
                           const cw_source_opts_t *o, cw_diag_t *d);
/* Opens a closed session again with the same options (a live source's
 * retry); as cw_source_session_open. */
int cw_source_session_reopen(cw_source_session_t *s, cw_diag_t *d);
/* The open source's platform ("windows", "linux"). */
const char *cw_source_session_platform(const cw_source_session_t *s);
/* ops->run into sink: 0 at the end of input or after a stop, else the
 * source's error (d filled) or the sink's return. */
int cw_source_session_run(cw_source_session_t *s, const cw_source_sink_t *sink, cw_diag_t *d);
/* Interrupts an open session's run (ops->stop), also one about to start;
 * nothing when it is closed or s is NULL. Async-signal-safe. */
void cw_source_session_stop(cw_source_session_t *s);
/* Closes the source (none open: nothing); s may be opened again. */
void cw_source_session_close(cw_source_session_t *s);

extern const cw_source_ops_t cw_source_replay;

#endif
