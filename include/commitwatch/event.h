/* event.h - the normalized event every source produces.
 *
 * Sources (replay, perf, etw) turn their input into cw_event_t and hand it
 * to the pipeline. Stacks are already interned (cw_stacks) by the source;
 * stack_id 0 is the empty stack. Strings are borrowed for the duration of
 * the call that receives the event. */
#ifndef COMMITWATCH_EVENT_H
#define COMMITWATCH_EVENT_H

#include <stdbool.h>
#include <stdint.h>

typedef enum cw_op {
    CW_OP_COMMIT = 0,
    CW_OP_DECOMMIT,
    CW_OP_RESERVE,
    CW_OP_RELEASE,
    CW_OP_PROCESS_START,
    CW_OP_PROCESS_EXIT,
    CW_OP__COUNT
} cw_op_t;

/* Timestamps are nanoseconds since the Unix epoch. These two sentinels
 * stand for "before every window" (rundown) and "never" (still live). */
#define CW_TS_BEFORE INT64_MIN
#define CW_TS_NEVER INT64_MAX

/* Whether [addr, addr + size) is non-empty and does not wrap (its end,
 * exclusive, is at most 2^64 - 1). */
static inline bool cw_range_ok(uint64_t addr, uint64_t size)
{
    return size > 0 && size <= UINT64_MAX - addr;
}

/* The highest end (addr + size) of a commit the tracker takes. Memory is
 * committed far below 2^63 (x86-64 user space ends at 2^47, or 2^56 with
 * 5-level paging; arm64's at 2^52), and below it a process's outstanding
 * bytes, a window's or bucket's change of them and the store's sums of
 * those fit int64_t. Other ranges may lie above: Linux lists the
 * [vsyscall] page at 0xffffffffff600000 in every process's maps (a
 * rundown reserve). A commit past it (a hostile trace or .etl) is ignored
 * like a wrapping range; the trace reader refuses it. */
#define CW_COMMIT_END_MAX ((uint64_t)INT64_MAX)

/* Whether a commit of [addr, addr + size) is non-empty and ends by
 * CW_COMMIT_END_MAX. */
static inline bool cw_commit_ok(uint64_t addr, uint64_t size)
{
    return size > 0 && addr < CW_COMMIT_END_MAX && size <= CW_COMMIT_END_MAX - addr;
}

/* A process's committed bytes counted from a start (a bucket's, a
 * window's): delta, what it committed minus what it released since, and
 * peak, delta's highest value after any event (0, the start's, at the
 * least) with peak_ns, when it was first reached. The aggregator keeps
 * one per process and bucket, `analyze` one per process and window.
 * Within +-INT64_MAX: the tracker's commits end by CW_COMMIT_END_MAX. */
typedef struct cw_balance {
    int64_t delta, peak, peak_ns;
} cw_balance_t;

/* After an event at ts that changed b->delta: keeps its peak. */
static inline void cw_balance_note(cw_balance_t *b, int64_t ts)
{
    if (b->delta > b->peak) {
        b->peak = b->delta;
        b->peak_ns = ts;
    }
}

typedef struct cw_event {
    int64_t ts;
    cw_op_t op;
    uint32_t pid;
    uint32_t tid;      /* 0 when unknown */
    uint64_t addr;
    uint64_t size;
    uint32_t stack_id; /* interned; 0 = no stack */
    bool rundown;      /* commit only: found committed when tracing began */
    const char *name;    /* process_start only; borrowed */
    const char *cmdline; /* process_start only, may be NULL; borrowed */
} cw_event_t;

/* "commit", "decommit", ...; NULL for an out-of-range op. */
const char *cw_op_name(cw_op_t op);
/* 0 and *out set, or CW_EINVAL for an unknown name. */
int cw_op_parse(const char *s, cw_op_t *out);

#endif
