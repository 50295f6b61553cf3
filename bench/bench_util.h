/* bench_util.h - what the benchmark programs share: clocks (wall, and a
 * thread's or the process's CPU), peak RSS, the store writer as a batch
 * sink, and a tracker sink that does nothing (the "track" modes). Linux
 * only, as the benchmarks are. */
#ifndef CW_BENCH_UTIL_H
#define CW_BENCH_UTIL_H

#include <stdio.h>
#include <sys/resource.h>
#include <unistd.h>
#include <time.h>

#include "commitwatch/agg.h"
#include "commitwatch/store.h"
#include "commitwatch/tracker.h"

static inline double bench_now_s(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

static inline double bench_cpu_s(clockid_t c)
{
    struct timespec t;
    clock_gettime(c, &t);
    return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

static inline double bench_peak_rss_mib(void)
{
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    return (double)ru.ru_maxrss / 1024.0; /* KiB on Linux */
}

/* A fresh database at db (the file and its WAL removed first), opened
 * with its state loaded into stacks (a fresh one interns nothing). 0 or
 * the store's error with d filled. */
static inline int bench_store_fresh(const char *db, cw_stacks_t *stacks, cw_store_t **store,
                                    cw_diag_t *d)
{
    char wal[1024];
    snprintf(wal, sizeof wal, "%s-wal", db);
    unlink(db);
    unlink(wal);
    uint32_t next_proc;
    int64_t end;
    int rc = cw_store_open(db, NULL, store, d);
    return rc ? rc : cw_store_load_state(*store, stacks, &next_proc, &end, d);
}

/* cw_agg's batch sink into a cw_writer_t (ctx). */
static inline int bench_to_writer(void *ctx, cw_batch_t *b)
{
    return cw_writer_submit(ctx, b);
}

static inline void bench_nop_proc(void *c, const cw_proc_t *p, int64_t ts)
{
    (void)c, (void)p, (void)ts;
}
static inline void bench_nop_commit(void *c, const cw_proc_t *p, const cw_commit_t *k, int64_t ts)
{
    (void)c, (void)p, (void)k, (void)ts;
}
static inline void bench_nop_release(void *c, const cw_proc_t *p, const cw_commit_t *k, uint64_t b,
                                     int64_t ts)
{
    (void)c, (void)p, (void)k, (void)b, (void)ts;
}
static inline void bench_nop_live(void *c, const cw_proc_t *p, const cw_commit_t *k)
{
    (void)c, (void)p, (void)k;
}

/* A tracker sink that does nothing: the tracker's own cost. */
static inline cw_tracker_sink_t bench_nop_sink(void)
{
    cw_tracker_sink_t s = {NULL,           bench_nop_proc, bench_nop_proc, bench_nop_commit,
                           bench_nop_release, bench_nop_proc, bench_nop_live};
    return s;
}

#endif
