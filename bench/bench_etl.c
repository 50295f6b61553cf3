/* bench_etl.c - `--source etl:` on a large generated trace: how many
 * VirtualAlloc/VirtualFree events with stacks per second one core decodes
 * and tracks, and how many go the whole way into SQLite.
 *
 * The workload is gen_core.h's (the core benchmark's busy machine) written
 * by tests/etlgen as a Windows trace: 8 CPUs, 64 KiB buffers, every other
 * buffer XPRESS-compressed, each VirtualAlloc/VirtualFree followed by its
 * stack (one StackWalk event, or stack keys with --stack-form keys),
 * every process loading the workload's images when it starts. Generation
 * is not timed.
 *
 * usage: bench_etl [--events N] [--procs N] [--stacks N] [--seed N]
 *                  [--stack-form walk|keys] [--etl FILE] [--reuse]
 *                  [--mode decode|track|store] [--db FILE]
 *   --events N  VirtualAlloc/VirtualFree events in the trace (default 10 M)
 *   --etl FILE  where the trace goes (default bench_etl.etl); --reuse reads
 *               an existing one instead of writing it again
 *   decode: the source alone (read, decompress, merge CPUs, decode, join
 *           stacks, intern frames and stacks); events are counted
 *   track:  decode + the pipeline's order check and the tracker (a sink
 *           that does nothing): "decode + track"
 *   store:  decode + tracker + aggregator + store writer into --db: what
 *           `commitwatch run --source etl:FILE` does, without HTTP
 * Prints one line: mode, events, VirtualAlloc/Free events, wall seconds,
 * events/s, the core thread's CPU seconds and events per CPU second, the
 * writer's CPU seconds, peak RSS. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "commitwatch/agg.h"
#include "commitwatch/etl.h"
#include "commitwatch/pipeline.h"
#include "commitwatch/stacks.h"
#include "commitwatch/store.h"
#include "commitwatch/tagger.h"
#include "commitwatch/tracker.h"
#include "etl_gen.h"
#include "bench_util.h"
#include "gen_core.h"

static const char *const *gen_frames(void *ctx, uint32_t id, uint32_t *n)
{
    /* Event stack ids are the generator's index + 1 (0: none). */
    if (id == 0) {
        *n = 0;
        return NULL;
    }
    return cwgen_stack_frames(ctx, id - 1, n);
}

/* Writes the trace; the number of VirtualAlloc/VirtualFree events in it. */
static uint64_t write_trace(const char *path, cwgen_opts_t *o, int form, uint64_t want)
{
    o->events = want + want / 2 + 100000; /* process events and rundown besides */
    cwgen_t *g = cwgen_create(o);
    if (!g) return 0;
    cw_etlgen_opts_t eo = {.w = {.ptr_size = 8, .ncpu = 8, .compress = true,
                                 .start_ns = o->start_ns, .start_tick = 1000000,
                                 .freq = 10000000},
                           .stacks = form, .frames = gen_frames, .ctx = g, .preload = true};
    cw_etlgen_t *w;
    if (cw_etlgen_open(path, &eo, &w) != 0) {
        cwgen_destroy(g);
        return 0;
    }
    /* Programs load their DLLs when they start. */
    for (uint32_t s = 0; s + 1 < cwgen_stack_count(g); s++) cw_etlgen_know_stack(w, s + 1);
    uint64_t va = 0;
    cw_event_t ev;
    while (va < want && cwgen_next(g, &ev) == 1) {
        if (ev.rundown) continue;
        if (cw_etlgen_event(w, &ev) != 0) {
            va = 0;
            break;
        }
        if (ev.op <= CW_OP_RELEASE) va++;
    }
    if (cw_etlgen_close(w) != 0) va = 0;
    cwgen_destroy(g);
    return va;
}

typedef struct run_ctx {
    cw_pipeline_t *pipe; /* NULL: count only */
    uint64_t events, va;
    cw_diag_t *d;
} run_ctx_t;

static int on_event(void *ctx, const cw_event_t *ev)
{
    run_ctx_t *r = ctx;
    r->events++;
    if (ev->op <= CW_OP_RELEASE) r->va++;
    return r->pipe ? cw_pipeline_feed(r->pipe, ev, r->d) : 0;
}

static int usage(void)
{
    fprintf(stderr, "usage: bench_etl [--events N] [--procs N] [--stacks N] [--seed N]\n"
                    "                 [--stack-form walk|keys] [--etl FILE] [--reuse]\n"
                    "                 [--mode decode|track|store] [--db FILE]\n");
    return 2;
}

int main(int argc, char **argv)
{
    cwgen_opts_t o;
    cwgen_opts_default(&o);
    uint64_t want = 10000000;
    const char *mode = "track", *db = "bench_etl.db", *etl = "bench_etl.etl";
    int form = CW_ETLGEN_WALK;
    bool reuse = false;
    for (int i = 1; i < argc; i++) {
        const char *k = argv[i];
        if (!strcmp(k, "--reuse")) {
            reuse = true;
            continue;
        }
        if (i + 1 >= argc) return usage();
        const char *v = argv[++i];
        if (!strcmp(k, "--events")) want = strtoull(v, NULL, 10);
        else if (!strcmp(k, "--procs")) o.procs = (uint32_t)strtoul(v, NULL, 10);
        else if (!strcmp(k, "--stacks")) o.nstacks = (uint32_t)strtoul(v, NULL, 10);
        else if (!strcmp(k, "--seed")) o.seed = strtoull(v, NULL, 10);
        else if (!strcmp(k, "--mode")) mode = v;
        else if (!strcmp(k, "--db")) db = v;
        else if (!strcmp(k, "--etl")) etl = v;
        else if (!strcmp(k, "--stack-form"))
            form = !strcmp(v, "walk") ? CW_ETLGEN_WALK : !strcmp(v, "keys") ? CW_ETLGEN_KEYS : -1;
        else return usage();
    }
    bool track = strcmp(mode, "decode") != 0, store_mode = strcmp(mode, "store") == 0;
    if (form < 0 || (track && !store_mode && strcmp(mode, "track") != 0)) return usage();

    struct stat sb;
    if (!reuse || stat(etl, &sb) != 0) {
        double t0 = bench_now_s();
        uint64_t va = write_trace(etl, &o, form, want);
        if (va == 0) {
            fprintf(stderr, "bench_etl: writing %s failed\n", etl);
            return 1;
        }
        stat(etl, &sb);
        fprintf(stderr, "bench_etl: wrote %s: %" PRIu64 " VirtualAlloc/Free events, %.1f MiB, in %.1f s\n",
                etl, va, (double)sb.st_size / 1048576.0, bench_now_s() - t0);
    }

    cw_stacks_t *stacks = NULL;
    cw_tagger_t *tagger = NULL;
    cw_store_t *store = NULL;
    cw_writer_t *writer = NULL;
    cw_agg_t *agg = NULL;
    cw_pipeline_t *pipe = NULL;
    void *src = NULL;
    cw_diag_t d = {{0}};
    int rc = 1;
    if (cw_stacks_create(&stacks) != 0 || cw_tagger_create_builtin(&tagger) != 0) goto out;
    cw_tracker_sink_t sink = bench_nop_sink();
    if (store_mode) {
        if (bench_store_fresh(db, stacks, &store, &d) != 0) goto out;
        if (cw_writer_start(store, 64, &writer) != 0) goto out;
        if (cw_agg_create(1000000000LL, stacks, tagger, 0, 0, bench_to_writer, writer, &agg) != 0)
            goto out;
        sink = cw_agg_sink(agg);
    }
    if (track && cw_pipeline_create(&sink, agg, 1, &pipe) != 0) goto out;
    cw_source_opts_t so = {.arg = etl, .stacks = stacks};
    if (cw_source_etl.open(&src, &so, &d) != 0) goto out;

    run_ctx_t r = {pipe, 0, 0, &d};
    cw_source_sink_t ss = {&r, on_event, NULL, NULL, NULL, NULL};
    double t0 = bench_now_s(), c0 = bench_cpu_s(CLOCK_THREAD_CPUTIME_ID);
    if (cw_source_etl.run(src, &ss, &d) != 0) goto out;
    if (pipe) cw_pipeline_finish(pipe);
    if (agg && cw_agg_flush(agg) != 0) goto out;
    if (writer) {
        int wrc = cw_writer_stop(writer, &d);
        writer = NULL;
        if (wrc != 0) goto out;
    }
    double wall = bench_now_s() - t0, core = bench_cpu_s(CLOCK_THREAD_CPUTIME_ID) - c0;
    double writer_cpu =
        bench_cpu_s(CLOCK_PROCESS_CPUTIME_ID) - bench_cpu_s(CLOCK_THREAD_CPUTIME_ID);
    if (!store_mode) writer_cpu = 0;
    printf("mode=%s form=%s events=%" PRIu64 " valloc_events=%" PRIu64 " etl_mib=%.1f "
           "seconds=%.3f valloc_per_s=%.0f core_cpu_s=%.3f valloc_per_cpu_s=%.0f "
           "writer_cpu_s=%.3f peak_rss_mib=%.1f\n",
           mode, form == CW_ETLGEN_WALK ? "walk" : "keys", r.events, r.va,
           (double)sb.st_size / 1048576.0, wall, (double)r.va / wall, core, (double)r.va / core,
           writer_cpu, bench_peak_rss_mib());
    rc = 0;
out:
    if (rc) fprintf(stderr, "bench_etl: %s\n", d.msg[0] ? d.msg : "failed");
    if (src) cw_source_etl.close(src);
    if (writer) cw_writer_stop(writer, &d);
    cw_pipeline_destroy(pipe);
    cw_agg_destroy(agg);
    cw_store_close(store);
    cw_tagger_destroy(tagger);
    cw_stacks_destroy(stacks);
    return rc;
}
