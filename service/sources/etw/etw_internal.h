/* etw_internal.h - what the files of the Windows sources share
 * (service/sources/etw/): the rundown walk (rundown.c), the snapshot
 * source built on it (snapshot.c), the kernel session (session.c), the
 * live source that reads it (live.c) and the heap session read the same
 * way (heap_launch.c). Windows only. */
#ifndef CW_ETW_INTERNAL_H
#define CW_ETW_INTERNAL_H

#include <windows.h>

#include <evntcons.h>
#include <evntrace.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "commitwatch/error.h"
#include "commitwatch/etl.h"
#include "commitwatch/heap.h"
#include "commitwatch/source.h"
#include "commitwatch/stacks.h"

typedef struct cw_etw_rundown_stats {
    uint32_t processes;       /* in the snapshot (the idle process aside) */
    uint32_t opened;          /* walked */
    uint32_t unopened;        /* could not be opened: counted, not fatal */
    uint64_t regions;         /* rundown commits emitted */
    uint64_t bytes;           /* their bytes */
    uint64_t reserved;        /* rundown reserves emitted (MEM_RESERVE + MEM_PRIVATE) */
    uint64_t reserved_bytes;  /* their bytes */
    char unopened_names[512]; /* "System (4), ..." (truncated) */
} cw_etw_rundown_stats_t;

/* Emits, at time ts, a process_start and the rundown commits and reserves
 * (stacked "(before trace)", interned into stacks) of every process it
 * can open.
 * *stop (set by the source's stop()) ends it between processes. 0, the
 * sink's error, or CW_EIO / CW_ENOMEM with d filled. */
int cw_etw__rundown(cw_stacks_t *stacks, const cw_source_sink_t *sink, int64_t ts,
                    atomic_bool *stop, cw_etw_rundown_stats_t *st, cw_diag_t *d);

/* ---- symbols.c: DbgHelp names frames (the space's symbolizer) ---- */

struct cw_etl__module;
typedef struct cw_etw_syms cw_etw_syms_t;
/* A private DbgHelp session: PDBs and exports with symbol_path (NULL or
 * "": _NT_SYMBOL_PATH; neither: exports only). 0, CW_ENOMEM or CW_EIO
 * (SymInitialize failed) with d filled. Core thread only, like every call
 * below (DbgHelp is not thread-safe). */
int cw_etw__syms_open(const char *symbol_path, cw_etw_syms_t **out, cw_diag_t *d);
void cw_etw__syms_close(cw_etw_syms_t *s); /* accepts NULL */
/* Registers the image the reader names `name` (lowercase base name) from
 * its file as the kernel names it (\Device\HarddiskVolumeN\...,
 * \SystemRoot\..., or a DOS path; NUL-terminated), size bytes. Once per
 * name and size: later calls return the first one's result. 0, CW_ENOENT (DbgHelp
 * could not load it: its frames stay module!+0xOFFSET), CW_ENOMEM. */
int cw_etw__syms_add(cw_etw_syms_t *s, const char *name, const wchar_t *nt_path, uint64_t size);
/* The symbolizer's name() (ctx: the cw_etw_syms_t): "Function" or
 * "Function+0xNN" at offset off of image m, or 0. */
size_t cw_etw__syms_name(void *ctx, const struct cw_etl__module *m, uint64_t off, char *buf,
                         size_t cap);
uint64_t cw_etw__syms_named(const cw_etw_syms_t *s); /* frame addresses named so far */

/* ---- session.c: the private kernel session ---- */

#define CW_ETW_SESSION_NAME_MAX 63
#define CW_ETW_SESSION_NAME "commitwatch"

typedef struct cw_etw_session {
    wchar_t name[CW_ETW_SESSION_NAME_MAX + 1];
    TRACEHANDLE handle;
    EVENT_TRACE_PROPERTIES *props; /* owned; NULL when not started */
    bool replaced;                 /* a session left over by an earlier run was stopped */
    bool stacks;                   /* VirtualAlloc (heap session: Alloc, ReAlloc) stacks are on */
    unsigned long stacks_error;    /* TraceSetInformation's error when not */
} cw_etw_session_t;

/* Enables SeSystemProfilePrivilege and starts the session `name`
 * (replacing a leftover one). 0, or CW_EPERM (not elevated, no
 * privilege), CW_EIO (quota, unsupported Windows, ...) with d saying
 * what to do. A failure to enable stacks is not one (s->stacks false). */
int cw_etw__session_start(cw_etw_session_t *s, const char *name, cw_diag_t *d);
/* The heap drill-down's session (heap_launch.c): the same, with Process
 * and Image events, heap tracing turned on for process pid (the Heap
 * class's events), and stacks on Alloc and ReAlloc (s->stacks). 0, or
 * CW_EPERM / CW_EIO with d naming the call that failed (under Wine: heap
 * tracing is unavailable), the session then stopped. */
int cw_etw__heap_session_start(cw_etw_session_t *s, const char *name, uint32_t pid,
                               cw_diag_t *d);
/* Events and buffers the session lost so far. 0 or CW_EIO. */
int cw_etw__session_query(cw_etw_session_t *s, uint64_t *events_lost, uint64_t *buffers_lost);
/* Stops the session (its consumer's ProcessTrace then returns). */
void cw_etw__session_stop(cw_etw_session_t *s);

/* ---- live.c ---- */

/* One event as it came from the session: the header fields the reader
 * reads and a copy of the payload (owned by the queue). */
typedef struct cw_etw_qev {
    cw_etl_event_t ev;
    uint64_t seq; /* arrival order: equal times keep it */
} cw_etw_qev_t;

typedef struct cw_etw_queue {
    cw_etw_qev_t *v;
    size_t n, cap;
} cw_etw_queue_t;

/* Sorts got by (ts, seq) and merges it into held, which is sorted and
 * whose events all arrived before got's: one sort of the new batch and a
 * linear merge per poll, not a sort of everything held. got is left empty
 * (its events now in held, its array still got's). 0, or CW_ENOMEM with
 * both unchanged. */
int cw_etw__queue_merge(cw_etw_queue_t *held, cw_etw_queue_t *got);

/* A heap session (heap_launch.c): the live source's consumer, queue and
 * reader, reading the Heap class's events of process pid (the reader's
 * heap layer) into emit_heap and its process events into emit (ctx for
 * both). It ends when done(ctx) returns true (polled every 100 ms) or
 * the session fails. 0 (*lost: events and buffers the session lost), or
 * CW_E* with d naming the call that failed. Caller's thread. */
typedef struct cw_etw_heap_args {
    uint32_t pid;
    int (*emit)(void *ctx, const cw_event_t *ev);
    int (*emit_heap)(void *ctx, const cw_heap_ev_t *ev);
    bool (*done)(void *ctx);
    void (*started)(void *ctx); /* NULL, or called once the session is being read */
    void *ctx;
    const char *symbol_path; /* NULL: _NT_SYMBOL_PATH, or exports only */
} cw_etw_heap_args_t;
int cw_etw__heap_run(cw_stacks_t *stacks, const cw_etw_heap_args_t *a, uint64_t *lost,
                     cw_diag_t *d);

/* The .etl reader's view of an EVENT_RECORD of a real-time session: the
 * kernel class from the provider GUID, opcode, version, pointer size (the
 * 32-bit header flag), CPU, ids, raw timestamp; the payload borrowed from
 * er. */
void cw_etw__record_event(const EVENT_RECORD *er, cw_etl_event_t *ev);

#endif
