/* bench_heap_layer.c - what the heap layer's aggregation costs a heap
 * trace's thread (docs/BENCHMARKS.md, "The heap layer in the store").
 *
 *   bench_heap_layer [--events N] [--stacks K] [--live W] [--rounds R] [--trace FILE]
 *
 * Applies the same N heap events (allocations from K stacks and frees
 * that keep about W blocks live, at 1 M allocations a second of event
 * time) to a heap model (heap.h) alone, then to one that also feeds an
 * aggregator (cw_heap_model_also: 1 s buckets, the batches counted and
 * freed as the feed would take them), R rounds of each alternated, and
 * prints the CPU time per event of each, their ratio, and the rows the
 * aggregator emitted per event. With --trace, the events are FILE's
 * instead: cw_heap_ev_t records as this build lays them out, a real
 * program's stream (its addresses reused as its allocator reuses them,
 * where the generated ones only grow), written by a reader built with
 * CW_HEAP_EV_DUMP (bench/heap_reader.sh). */
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "bench_util.h"
#include "commitwatch/heap.h"

static uint64_t rows, batches;

static int count_batch(void *ctx, cw_batch_t *b)
{
    (void)ctx;
    rows += b->commits.n + b->releases.n + b->activity.n;
    batches++;
    cw_batch_free(b);
    return 0;
}

static long arg(int argc, char **argv, const char *name, long def)
{
    for (int i = 1; i + 1 < argc; i++)
        if (strcmp(argv[i], name) == 0) return strtol(argv[i + 1], NULL, 10);
    return def;
}

/* One run over ev[0..n): CPU seconds of this thread. */
static double run(const cw_heap_ev_t *ev, size_t n, cw_stacks_t *stacks, bool layer)
{
    cw_heap_model_t *m = NULL;
    cw_agg_t *agg = NULL;
    if (cw_heap_model_create(ev[0].ts, &m) != 0) exit(1);
    cw_heap_model_limit(m, 0);
    if (layer) {
        if (cw_agg_create(1000000000, stacks, NULL, 0, 0, count_batch, NULL, &agg) != 0) exit(1);
        cw_heap_model_also(m, agg);
    }
    double t0 = bench_cpu_s(CLOCK_THREAD_CPUTIME_ID);
    if (cw_heap_model_start(m, ev[0].pid, ev[0].ts, "load", NULL) != 0) exit(1);
    uint32_t seen[64] = {ev[0].pid}, nseen = 1, last = ev[0].pid;
    for (size_t i = 0; i < n; i++) {
        /* A recorded stream may name other processes (a forked child):
         * each begins where it is first seen, as the reader announces it. */
        if (ev[i].pid != last) {
            uint32_t j = 0;
            while (j < nseen && seen[j] != ev[i].pid)
                j++;
            if (j == nseen) {
                if (nseen == 64 || cw_heap_model_start(m, ev[i].pid, ev[i].ts, "child", NULL))
                    exit(1);
                seen[nseen++] = ev[i].pid;
            }
            last = ev[i].pid;
        }
        if (cw_heap_model_apply(m, &ev[i]) != 0) exit(1);
    }
    if (layer && cw_heap_model_end(m) != 0) exit(1);
    double t = bench_cpu_s(CLOCK_THREAD_CPUTIME_ID) - t0;
    cw_heap_model_destroy(m);
    cw_agg_destroy(agg);
    return t;
}

/* --trace FILE: the recorded events, R rounds of the model alone. */
static int replay(const char *path, int rounds)
{
    FILE *f = fopen(path, "rb");
    if (!f) {
        fprintf(stderr, "bench_heap_layer: %s: cannot open\n", path);
        return 1;
    }
    fseek(f, 0, SEEK_END);
    long bytes = ftell(f);
    rewind(f);
    size_t n = bytes > 0 ? (size_t)bytes / sizeof(cw_heap_ev_t) : 0;
    cw_heap_ev_t *ev = n ? malloc(n * sizeof *ev) : NULL;
    if (n < 2 || !ev || fread(ev, sizeof *ev, n, f) != n) {
        fprintf(stderr, "bench_heap_layer: %s: not a recorded stream of this build\n", path);
        fclose(f);
        free(ev);
        return 1;
    }
    fclose(f);
    cw_stacks_t *stacks;
    if (cw_stacks_create(&stacks) != 0) return 1;
    double best = 1e9;
    for (int r = 0; r < rounds; r++) {
        double t = run(ev, n, stacks, false);
        if (t < best) best = t;
    }
    printf("bench_heap_layer: %zu recorded events (%s), best of %d\n", n, path, rounds);
    printf("  model alone: %.1f ns an event\n", best * 1e9 / (double)n);
    cw_stacks_destroy(stacks);
    free(ev);
    return 0;
}

int main(int argc, char **argv)
{
    size_t n = (size_t)arg(argc, argv, "--events", 4000000);
    uint32_t k = (uint32_t)arg(argc, argv, "--stacks", 256);
    size_t w = (size_t)arg(argc, argv, "--live", 4096);
    int rounds = (int)arg(argc, argv, "--rounds", 3);
    if (n < 2 || k == 0 || w == 0 || rounds < 1) {
        fprintf(stderr, "bench_heap_layer: bad arguments\n");
        return 2;
    }
    const char *trace = NULL;
    for (int a = 1; a + 1 < argc; a++)
        if (strcmp(argv[a], "--trace") == 0) trace = argv[a + 1];
    if (trace) return replay(trace, rounds);
    cw_stacks_t *stacks;
    uint32_t *sid = calloc(k, sizeof *sid);
    cw_heap_ev_t *ev = calloc(n, sizeof *ev);
    uint64_t *live = calloc(w, sizeof *live);
    if (cw_stacks_create(&stacks) != 0 || !sid || !ev || !live) return 1;
    for (uint32_t s = 0; s < k; s++) {
        char f1[32], f2[32];
        snprintf(f1, sizeof f1, "load!fn_%u", s % 16);
        snprintf(f2, sizeof f2, "load!leaf_%u", s);
        const char *fr[] = {"load!main", f1, f2};
        if (cw_stacks_intern_strings(stacks, fr, 3, &sid[s]) != 0) return 1;
    }
    /* An allocation replaces the block in a slot of the live set (its
     * free first): W blocks live, 2 events an allocation after the start. */
    uint64_t next = 0x10000, x = 88172645463325252ull;
    int64_t ts = INT64_C(1750000000) * 1000000000;
    size_t i = 0;
    while (i < n) {
        x ^= x << 13, x ^= x >> 7, x ^= x << 17;
        size_t slot = x % w;
        if (live[slot] && i < n) {
            ev[i++] = (cw_heap_ev_t){ts, CW_HEAP_FREE, 42, 42, live[slot], 0, 0, 0};
            live[slot] = 0;
        }
        if (i < n) {
            uint64_t size = 16 + (x >> 40) % 240;
            ev[i++] = (cw_heap_ev_t){ts, CW_HEAP_ALLOC, 42, 42, next, size, 0, sid[(x >> 20) % k]};
            live[slot] = next;
            next += 256;
            ts += 1000; /* 1 M allocations a second */
        }
    }
    double alone = 1e9, with = 1e9;
    for (int r = 0; r < rounds; r++) {
        double a = run(ev, n, stacks, false);
        rows = batches = 0;
        double b = run(ev, n, stacks, true);
        if (a < alone) alone = a;
        if (b < with) with = b;
    }
    printf("bench_heap_layer: %zu events, %u stacks, %zu live, best of %d\n", n, k, w, rounds);
    printf("  model alone: %.0f ns an event\n", alone * 1e9 / (double)n);
    printf("  model + heap layer: %.0f ns an event (%.2fx); %" PRIu64 " batches, %.4f rows an "
           "event\n",
           with * 1e9 / (double)n, with / alone, batches, (double)rows / (double)n);
    free(live);
    free(ev);
    free(sid);
    cw_stacks_destroy(stacks);
    return 0;
}
