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

#include <stdbool.h>
#include <stdint.h>

#include "commitwatch/error.h"
#include "commitwatch/event.h"
#include "commitwatch/stacks.h"

struct cw_source_drops;

typedef struct cw_source_sink {
    void *ctx;
    /* One event; a nonzero return stops run(), which returns it. */
    int (*emit)(void *ctx, const cw_event_t *ev);
    /* Live sources: time passes with no events. now_ns is a watermark:
     * a promise that no event delivered later has ts < now_ns (a source
     * with per-CPU buffers passes the oldest time it may still deliver).
     * Buckets before it are closed and stored for good. May be NULL. */
    int (*tick)(void *ctx, int64_t now_ns);
    /* Live sources: counters (events seen, lost, drift corrected). */
    void (*counters)(void *ctx, uint64_t seen, uint64_t lost, int64_t drift_bytes);
    /* Live sources: what was dropped besides `lost`, and the corrections
     * (cumulative; below). Called with counters. May be NULL. */
    void (*drops)(void *ctx, const struct cw_source_drops *dr);
    /* A process's figures were corrected from the OS's own (smaps,
     * VirtualQueryEx) after lost events: the commit and decommit events of
     * the correction were emitted just before, at ts; committed and
     * decommitted are their bytes. The live instance of pid is the one
     * corrected. May be NULL. */
    void (*correction)(void *ctx, uint32_t pid, int64_t ts, uint64_t committed,
                       uint64_t decommitted);
} cw_source_sink_t;

/* Records a live source dropped or could not pair, beside the records its
 * kernel buffers lost (`counters`' lost), and what it corrected; all
 * cumulative since the source started (docs/LINUX.md, "Losses and drift"). */
typedef struct cw_source_drops {
    uint64_t foreign;   /* records of tasks this source cannot see (perf: pid 0, another
                           PID namespace): dropped, never tracked */
    uint64_t unpaired;  /* calls whose other half was lost (an exit without its enter, an
                           enter replaced before its exit): their effect is left to a
                           resync */
    uint64_t malformed; /* records too short to read: skipped */
    uint64_t resyncs;   /* resynchronisations of every process from the OS's figures */
    uint64_t corrections;     /* process corrections they made (a process whose figures
                                 changed, or one adopted because its start was lost) */
    uint64_t corrected_bytes; /* their bytes: committed + decommitted */
    bool resync_pending; /* records were lost since the last resync, which is still to come */
    int64_t last_resync_ns; /* the time (ns since the epoch) of the last resync's events;
                               INT64_MIN before the first */
} cw_source_drops_t;

/* How to open a source. Strings are borrowed for the call. */
typedef struct cw_source_opts {
    const char *arg;     /* what follows "name:" in --source (path for replay), or "" */
    cw_stacks_t *stacks; /* stacks are interned here; borrowed for the source's life */
    /* Replay only (other sources refuse them): shift every time so the
     * input starts now, and pace events at `speed` times real time,
     * ticking while it waits so buckets close as they would live (0 = as
     * fast as possible). */
    bool rebase_now;
    double speed;
    /* etl only (others refuse it): a folder of copies of the trace's
     * DLLs/EXEs whose exports name the frames in them (NULL: none). */
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
    /* 0 and *impl set, or a CW_E* code with d saying what to do. */
    int (*open)(void **impl, const cw_source_opts_t *o, cw_diag_t *d);
    /* "windows" / "linux": the platform whose stacks the data holds. */
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
/* CW_EUSAGE with d filled when images (--images DIR; NULL: none) is given
 * for a source that does not take it (every one but etl), else 0. */
int cw_source_check_images(const cw_source_ops_t *ops, const char *images, cw_diag_t *d);

extern const cw_source_ops_t cw_source_replay;

#endif
