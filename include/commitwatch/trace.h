/* trace.h - the JSONL trace format, version 1: streaming reader and writer.
 *
 * Reader: reads one line at a time (never the whole file), validates it
 * against ARCHITECTURE.md "Trace format", interns stacks, and returns
 * normalized events. Any bad line is an error naming the file, the line
 * number and what is wrong; nothing is skipped. A timestamp smaller than
 * the previous event's is an error.
 *
 * Writer: the same format; escapes strings with cJSON; prints integers
 * exactly (64-bit).
 *
 * Thread: one thread per reader/writer. */
#ifndef COMMITWATCH_TRACE_H
#define COMMITWATCH_TRACE_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "commitwatch/error.h"
#include "commitwatch/event.h"
#include "commitwatch/stacks.h"

#define CW_TRACE_FORMAT "commitwatch-trace"
#define CW_TRACE_VERSION 1

typedef struct cw_trace_header {
    char platform[16]; /* "windows", "linux", ... */
    uint32_t pointer_size;
    /* The recorded machine's commit limit in bytes (optional header field
     * "commit_limit"); 0 when the trace does not say. */
    uint64_t commit_limit;
} cw_trace_header_t;

typedef struct cw_trace_reader cw_trace_reader_t;

/* Opens path ("-" = stdin) and reads the header line. stacks is borrowed.
 * 0, or CW_EIO / CW_EPARSE with d naming file and line. */
int cw_trace_reader_open(const char *path, cw_stacks_t *stacks, cw_trace_reader_t **out,
                         cw_diag_t *d);
void cw_trace_reader_close(cw_trace_reader_t *r); /* accepts NULL */
const cw_trace_header_t *cw_trace_reader_header(const cw_trace_reader_t *r);

/* 1 and *ev filled (strings valid until the next call), 0 at end of file,
 * or a negative CW_E* with d filled (CW_EPARSE, CW_ETIME, CW_EIO). */
int cw_trace_reader_next(cw_trace_reader_t *r, cw_event_t *ev, cw_diag_t *d);
/* Line number of the last line read (1 = header). */
uint64_t cw_trace_reader_line(const cw_trace_reader_t *r);

typedef struct cw_trace_writer cw_trace_writer_t;

/* Writes to path ("-" = stdout) and emits the header. stacks borrowed. */
int cw_trace_writer_open(const char *path, const cw_trace_header_t *h, const cw_stacks_t *stacks,
                         cw_trace_writer_t **out, cw_diag_t *d);
/* One event line. 0 or CW_EIO / CW_ENOMEM. */
int cw_trace_writer_write(cw_trace_writer_t *w, const cw_event_t *ev);
/* Flushes and closes; 0 or CW_EIO (d filled). Accepts NULL. */
int cw_trace_writer_close(cw_trace_writer_t *w, cw_diag_t *d);

#endif
