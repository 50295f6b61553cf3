/* bench_pipeline.c - the core pipeline alone, without JSON parsing.
 *
 * Drives tracker + bucket aggregator (+ the store writer thread) with the
 * workload of gen_core.h, exactly as `commitwatch run` does after its
 * source has parsed an event: cw_pipeline_feed() per event, batches handed
 * to cw_writer_submit(). Stacks are interned once up front, as a source
 * does on first sight. Events are generated in chunks outside the timed
 * part, so the figure is the pipeline's alone.
 *
 * usage: bench_pipeline [--events N] [--procs N] [--stacks N] [--seed N]
 *                       [--span-s N] [--burst N] [--mode track|agg|store] [--db FILE]
 *                       [--queue N] [--journal 0|1]
 *   track: tracker only (a sink that does nothing)
 *   agg:   tracker + aggregator; batches are freed, not stored
 *   store: tracker + aggregator + store writer into --db (default; the
 *          file is replaced)
 *   --queue: batches the store writer may hold (cw_writer_start's
 *          max_queued; default 64)
 *   --journal: 1 (default) gives the writer the pending-batch journal, as
 *          the service does (DB-pending.0/.1 beside --db); 0 none
 * Prints one line: mode, events, wall seconds and events/s of the timed
 * part, the core thread's CPU seconds and events per CPU second, the store
 * writer thread's CPU seconds, peak RSS (MiB), and the tracker's size at
 * the end. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

#include "commitwatch/agg.h"
#include "commitwatch/pipeline.h"
#include "commitwatch/stacks.h"
#include "commitwatch/store.h"
#include "commitwatch/tagger.h"
#include "commitwatch/tracker.h"
#include "bench_util.h"
#include "gen_core.h"

#define CHUNK 262144

static int discard_batch(void *ctx, cw_batch_t *b)
{
    uint64_t *n = ctx;
    (*n)++;
    cw_batch_free(b);
    return 0;
}

static int usage(void)
{
    fprintf(stderr, "usage: bench_pipeline [--events N] [--procs N] [--stacks N] [--seed N] "
                    "[--span-s N] [--burst N] [--mode track|agg|store] [--db FILE] [--queue N] "
                    "[--journal 0|1]\n");
    return 2;
}

int main(int argc, char **argv)
{
    cwgen_opts_t o;
    cwgen_opts_default(&o);
    const char *mode = "store", *db = "bench_pipeline.db";
    bool journal = true;
    uint32_t queue = 64;
    for (int i = 1; i < argc; i++) {
        if (i + 1 >= argc) return usage();
        const char *k = argv[i], *v = argv[++i];
        if (!strcmp(k, "--events"))
            o.events = strtoull(v, NULL, 10);
        else if (!strcmp(k, "--procs"))
            o.procs = (uint32_t)strtoul(v, NULL, 10);
        else if (!strcmp(k, "--stacks"))
            o.nstacks = (uint32_t)strtoul(v, NULL, 10);
        else if (!strcmp(k, "--seed"))
            o.seed = strtoull(v, NULL, 10);
        else if (!strcmp(k, "--burst"))
            o.burst = (uint32_t)strtoul(v, NULL, 10);
        else if (!strcmp(k, "--span-s"))
            o.span_ns = (int64_t)strtoll(v, NULL, 10) * 1000000000LL;
        else if (!strcmp(k, "--mode"))
            mode = v;
        else if (!strcmp(k, "--db"))
            db = v;
        else if (!strcmp(k, "--queue"))
            queue = (uint32_t)strtoul(v, NULL, 10);
        else if (!strcmp(k, "--journal"))
            journal = strcmp(v, "0") != 0;
        else
            return usage();
    }
    bool use_agg = strcmp(mode, "track") != 0, use_store = strcmp(mode, "store") == 0;
    if (!use_agg && strcmp(mode, "track") != 0) return usage();
    if (use_agg && !use_store && strcmp(mode, "agg") != 0) return usage();

    cwgen_t *g = cwgen_create(&o);
    cw_stacks_t *stacks = NULL;
    cw_tagger_t *tagger = NULL;
    cw_store_t *store = NULL;
    cw_writer_t *writer = NULL;
    cw_agg_t *agg = NULL;
    cw_pipeline_t *pipe = NULL;
    cw_diag_t d = {{0}};
    uint64_t batches = 0;
    uint32_t *id = NULL;
    cw_event_t *chunk = NULL;
    int rc = 1;
    if (!g || cw_stacks_create(&stacks) != 0 || cw_tagger_create_builtin(&tagger) != 0) goto out;

    cw_tracker_sink_t sink = bench_nop_sink();
    if (use_store) {
        if (bench_store_fresh(db, stacks, &store, &d) != 0) {
            fprintf(stderr, "bench_pipeline: %s\n", d.msg);
            goto out;
        }
        if (cw_writer_start(store, queue, &writer) != 0) goto out;
        cw_journal_t *j;
        if (journal && cw_journal_open(store, &j, &d) != 0) {
            fprintf(stderr, "bench_pipeline: %s\n", d.msg);
            goto out;
        }
        if (journal) cw_writer_set_journal(writer, j);
        if (cw_agg_create(1000000000LL, stacks, tagger, 0, 0, bench_to_writer, writer, &agg) != 0)
            goto out;
    } else if (use_agg) {
        if (cw_agg_create(1000000000LL, stacks, tagger, 0, 0, discard_batch, &batches, &agg) != 0)
            goto out;
    }
    /* Intern the workload's stacks once (after load_state, which wants an
     * empty table): generator index i -> id[i + 1]. */
    uint32_t nst = cwgen_stack_count(g);
    if (!(id = calloc(nst + 1, sizeof *id))) goto out;
    for (uint32_t s = 0; s < nst; s++) {
        uint32_t n;
        const char *const *f = cwgen_stack_frames(g, s, &n);
        if (cw_stacks_intern_strings(stacks, f, n, &id[s + 1]) != 0) goto out;
    }
    if (agg) sink = cw_agg_sink(agg);
    if (cw_pipeline_create(&sink, agg, 1, &pipe) != 0) goto out;

    if (!(chunk = malloc(CHUNK * sizeof *chunk))) goto out;
    /* Wall time and the core thread's CPU time of the timed parts: on a
     * shared machine the CPU time is the steadier figure. The writer
     * thread's CPU is the process's minus this thread's, at the end. */
    double busy = 0, core_cpu = 0;
    uint64_t total = 0;
    for (;;) {
        uint32_t n = 0;
        while (n < CHUNK && cwgen_next(g, &chunk[n]) == 1) {
            chunk[n].stack_id = id[chunk[n].stack_id];
            n++;
        }
        if (n == 0) break;
        double t0 = bench_now_s(), c0 = bench_cpu_s(CLOCK_THREAD_CPUTIME_ID);
        for (uint32_t i = 0; i < n; i++)
            if (cw_pipeline_feed(pipe, &chunk[i], &d) != 0) {
                fprintf(stderr, "bench_pipeline: %s\n", d.msg);
                goto out;
            }
        busy += bench_now_s() - t0;
        core_cpu += bench_cpu_s(CLOCK_THREAD_CPUTIME_ID) - c0;
        total += n;
    }
    double t0 = bench_now_s(), c0 = bench_cpu_s(CLOCK_THREAD_CPUTIME_ID);
    if (agg && cw_agg_flush(agg) != 0) goto out;
    if (writer) {
        int wrc = cw_writer_stop(writer, &d);
        writer = NULL;
        if (wrc != 0) {
            fprintf(stderr, "bench_pipeline: %s\n", d.msg);
            goto out;
        }
    }
    busy += bench_now_s() - t0;
    core_cpu += bench_cpu_s(CLOCK_THREAD_CPUTIME_ID) - c0;
    double writer_cpu =
        bench_cpu_s(CLOCK_PROCESS_CPUTIME_ID) - bench_cpu_s(CLOCK_THREAD_CPUTIME_ID);
    if (writer_cpu < 0.0005) writer_cpu = 0; /* no writer thread: rounding only */
    /* How big the interval maps got: the tracker's cost is a descent of
     * one of them per event. */
    uint64_t pieces = 0, rpieces = 0;
    cw_tracker_t *tr = cw_pipeline_tracker(pipe);
    for (uint32_t i = 0; i < o.procs; i++) {
        pieces += cw_tracker_piece_count(tr, 4 * (1000 + i));
        rpieces += cw_tracker_reserved_piece_count(tr, 4 * (1000 + i));
    }
    printf("mode=%s journal=%d events=%" PRIu64 " procs=%u stacks=%u burst=%u seconds=%.3f "
           "events_per_s=%.0f core_cpu_s=%.3f events_per_cpu_s=%.0f writer_cpu_s=%.3f "
           "peak_rss_mib=%.1f live_processes=%u live_pieces=%" PRIu64 " reserved_pieces=%" PRIu64
           " tracker_mib=%.1f\n",
           mode, use_store && journal, total, o.procs, o.nstacks, o.burst, busy, (double)total / busy, core_cpu,
           (double)total / core_cpu, writer_cpu, bench_peak_rss_mib(), cw_tracker_live_processes(tr),
           pieces, rpieces, cw_tracker_memory(tr) / 1048576.0);
    rc = 0;
out:
    free(chunk);
    free(id);
    if (writer) cw_writer_stop(writer, &d);
    cw_pipeline_destroy(pipe);
    cw_agg_destroy(agg);
    cw_store_close(store);
    cw_tagger_destroy(tagger);
    cw_stacks_destroy(stacks);
    cwgen_destroy(g);
    return rc;
}
