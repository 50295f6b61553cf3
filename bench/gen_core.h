/* gen_core.h - the synthetic workload of the core benchmark.
 *
 * A deterministic (seeded) stream of normalized events that looks like a
 * busy machine: `procs` process instances alive from the start (with
 * rundown commits), each committing and freeing memory through a few of
 * `nstacks` distinct stacks; most commits are transient (freed within
 * milliseconds), some live long and are freed later (whole, or in part by
 * a decommit), some leak; a few commits overlap committed pages; now and
 * then a process exits and its pid is reused by a new one. Timestamps
 * increase over `span_ns`.
 *
 * The same stream feeds bench/gen_trace.c (which prints it as a JSONL v1
 * trace) and bench/bench_pipeline.c (which drives the pipeline with it, no
 * JSON involved), so both benchmarks measure the same workload.
 *
 * Events carry ev->stack_id = the generator's stack index + 1 (0 = none);
 * cwgen_stack_frames() gives the frames of index i (outermost first). */
#ifndef CW_BENCH_GEN_CORE_H
#define CW_BENCH_GEN_CORE_H

#include <stdint.h>

#include "commitwatch/event.h"

typedef struct cwgen_opts {
    uint64_t events;  /* stop after this many events */
    uint32_t procs;   /* concurrent process instances */
    uint32_t nstacks; /* distinct stacks (the rundown pseudo-stack aside) */
    uint64_t seed;
    int64_t start_ns; /* first timestamp */
    int64_t span_ns;  /* the events spread over about this long */
    uint32_t burst;   /* mean run of consecutive steps in one process:
                       * 1 = every step picks a process at random (the
                       * worst case for caches); larger = more locality */
} cwgen_opts_t;

typedef struct cwgen cwgen_t;

void cwgen_opts_default(cwgen_opts_t *o);
/* NULL on out of memory. */
cwgen_t *cwgen_create(const cwgen_opts_t *o);
void cwgen_destroy(cwgen_t *g);

/* 1 and *ev filled (strings borrowed until the next call), 0 at the end. */
int cwgen_next(cwgen_t *g, cw_event_t *ev);

/* Stack indexes 0 .. cwgen_stack_count()-1; the last is "(before trace)". */
uint32_t cwgen_stack_count(const cwgen_t *g);
const char *const *cwgen_stack_frames(const cwgen_t *g, uint32_t idx, uint32_t *n);

#endif
