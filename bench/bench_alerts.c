/* bench_alerts.c - the alert engine's cost (docs/ALERTS.md, "Speed"):
 *
 *   eval:  one evaluation over P processes x K tags (default 1,000 x 10)
 *          with a 6 h window at the 1 min step: the kept series are made
 *          up in memory (most flat with churn, 1 % leaking); the rules are
 *          the shipped defaults (likely_leak: leak score over 6 h with its
 *          floors; commit_limit) plus a 6 h impacting_rate rule per
 *          instance and tag and an outstanding rule per name. CPU per
 *          evaluation (median of --evals), the memory of the series.
 *   feed:  the store side: a database of P x K series committing every
 *          10 s (--minutes of it, through tracker -> aggregator -> store),
 *          then the time to rebuild the kept series from it and to read
 *          one 10 s interval of new buckets (what each evaluation adds).
 *
 * Usage: bench_alerts [--procs N] [--tags K] [--evals N] [--minutes M]
 *                     [--db PATH] [--mode eval|feed|both] */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "alerts/alerts_internal.h"
#include "bench_util.h"
#include "commitwatch/agg.h"
#include "commitwatch/event.h"
#include "commitwatch/pipeline.h"
#include "commitwatch/tagger.h"

#define S INT64_C(1000000000)
#define MIN (60 * S)

static uint64_t rng = 0x853c49e6748fea9bull;

static uint64_t rnd(uint64_t n)
{
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return rng % n;
}

static int cmp_d(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static const char EXTRA_RULES[] = "[rule growth]\n"
                                  "metric = impacting_rate\n"
                                  "window = 6h\n"
                                  "warn = 100MiB/h\n"
                                  "for = 15m\n"
                                  "[rule big]\n"
                                  "group_by = name\n"
                                  "tag_by = all\n"
                                  "metric = outstanding\n"
                                  "warn = 8GiB\n";

/* Series of P x K bases, 6 h at 1 min, made up. */
static void fill_set(cw__aset_t *a, int procs, int tags, int64_t head)
{
    char name[64];
    a->head = head;
    for (int p = 0; p < procs; p++) {
        int added;
        snprintf(name, sizeof name, "svc%03d.exe", p % 200);
        cw_keymap_get(&a->procmap, (uint64_t)p + 1, 0, &added);
        CW_RESERVE(a->procs, a->proccap, a->nprocs + 1);
        a->procs[a->nprocs++] = (cw__aproc_t){(uint32_t)p + 1, (uint32_t)(1000 + p), 0,
                                              CW_TS_NEVER, CW_TS_NEVER,
                                              cw__strtab_get(&a->names, name), false};
        bool leak = p % 100 == 7;
        for (int k = 0; k < tags; k++) {
            snprintf(name, sizeof name, "Tag %d", k);
            uint32_t t = cw__strtab_get(&a->tags, name);
            cw_keymap_get(&a->basemap, (uint64_t)p + 1, t, &added);
            CW_RESERVE(a->bases, a->basecap, a->nbases + 1);
            cw__abase_t *b = &a->bases[a->nbases++];
            /* Every step of the window explicit, stored as the feed does
             * (narrow rings where the figures fit, wide where not). */
            *b = (cw__abase_t){(uint32_t)p, t, 0, head - a->len + 1, head - a->len, 0, false, NULL};
            int64_t out = (int64_t)(64 + rnd(512)) << 20;
            for (int64_t s = head - a->len + 1; s <= head; s++) {
                cw__slot_t sl;
                uint32_t c = (uint32_t)(16 + rnd(64)), stay = leak ? c : (uint32_t)rnd(2);
                sl.committed = c;
                sl.commits = c / 4 + 1;
                sl.rem = stay;
                sl.rem_commits = stay ? 1 : 0;
                out += ((int64_t)stay << 12) - (leak ? 0 : (int64_t)rnd(2) << 12);
                sl.out = (uint32_t)(out >> 12);
                if (cw__abase_set(a, b, s, &sl)) abort();
            }
            b->cur = out;
        }
    }
}

static void bench_eval(int procs, int tags, int evals)
{
    cw_alert_rules_t rules = {0};
    cw_diag_t d = {{0}};
    unsigned nbad = 0;
    if (cw_alert_rules_parse(&rules, "(defaults)", cw_alert_default_rules(), stderr, &nbad, &d) ||
        cw_alert_rules_parse(&rules, "(bench)", EXTRA_RULES, stderr, &nbad, &d) || nbad) {
        fprintf(stderr, "bench_alerts: rules: %s\n", d.msg);
        exit(1);
    }
    for (size_t only = 0; only <= rules.n; only++) {
        /* Each rule alone, then all of them. */
        cw_alert_rules_t one = rules;
        if (only < rules.n) {
            one.v = &rules.v[only];
            one.n = 1;
        }
        cw__aeval_t e;
        if (cw__aeval_init(&e, &one, MIN)) exit(1);
        cw__aset_free(&e.set);
        cw__aset_init(&e.set, MIN, 361); /* a 6 h window at 1 min */
        rng = 0x853c49e6748fea9bull;
        int64_t head = 29000000, T = (head + 1) * MIN;
        fill_set(&e.set, procs, tags, head);
        double *cpu = calloc((size_t)evals, sizeof *cpu);
        for (int i = 0; i < evals; i++) {
            double c0 = bench_cpu_s(CLOCK_THREAD_CPUTIME_ID);
            if (cw__aeval_run(&e, T + i * 10 * S)) exit(1);
            cpu[i] = bench_cpu_s(CLOCK_THREAD_CPUTIME_ID) - c0;
            cw__aeval_compact(&e);
        }
        qsort(cpu, (size_t)evals, sizeof *cpu, cmp_d);
        size_t active = 0;
        for (size_t r = 0; r < e.rules.n; r++)
            active += e.r[r].n;
        printf("eval %-14s %d x %d series, 6 h window: %.2f ms CPU per evaluation (median of %d,"
               " min %.2f), %llu leak scores, %zu active series, series memory %.1f MiB\n",
               only < rules.n ? rules.v[only].name : "all rules", procs, tags,
               cpu[evals / 2] * 1e3, evals, cpu[0] * 1e3,
               (unsigned long long)e.leak_computed / (unsigned long long)evals, active,
               (double)cw__aset_bytes(&e.set) / (1 << 20));
        free(cpu);
        cw__aeval_free(&e);
    }
    cw_alert_rules_free(&rules);
}

/* ---- feed ------------------------------------------------------------------------- */

static const char *tag_of(void *impl, const cw_stacks_t *s, uint32_t stack)
{
    static const char *const names[] = {"Tag 0", "Tag 1", "Tag 2", "Tag 3", "Tag 4",
                                        "Tag 5", "Tag 6", "Tag 7", "Tag 8", "Tag 9"};
    (void)impl;
    (void)s;
    return names[stack % 10];
}

static const char *tag_hash(void *impl)
{
    (void)impl;
    return "bench";
}

static int to_store(void *ctx, cw_batch_t *b)
{
    cw_diag_t d = {{0}};
    int rc = cw_store_write(ctx, b, &d);
    if (rc) fprintf(stderr, "store: %s\n", d.msg);
    cw_batch_free(b);
    return rc;
}

static void bench_feed(int procs, int tags, int minutes, const char *db)
{
    static const cw_tagger_ops_t ops = {"bench", tag_of, tag_hash, NULL};
    cw_stacks_t *st;
    cw_store_t *s;
    cw_tagger_t *tg;
    cw_agg_t *agg;
    cw_pipeline_t *pipe;
    cw_diag_t d = {{0}};
    if (cw_stacks_create(&st) || bench_store_fresh(db, st, &s, &d) ||
        cw_tagger_create(&ops, NULL, &tg) || cw_agg_create(S, st, tg, 0, 0, to_store, s, &agg)) {
        fprintf(stderr, "bench_alerts: %s\n", d.msg);
        exit(1);
    }
    cw_tracker_sink_t sink = cw_agg_sink(agg);
    if (cw_pipeline_create(&sink, agg, 1, &pipe)) exit(1);
    uint32_t stack[10];
    for (int k = 0; k < 10; k++) {
        char f[32];
        snprintf(f, sizeof f, "app!site%d", k);
        const char *fr[] = {f};
        cw_stacks_intern_strings(st, fr, 1, &stack[k]);
    }
    int64_t t0 = INT64_C(1750003200) * S;
    uint64_t *last = calloc((size_t)procs * (size_t)tags * 8, sizeof *last);
    double w0 = bench_now_s();
    for (int p = 0; p < procs; p++) {
        cw_event_t e = {.ts = t0, .op = CW_OP_PROCESS_START, .pid = (uint32_t)(1000 + p),
                        .name = "svc.exe"};
        cw_pipeline_feed(pipe, &e, &d);
    }
    uint64_t events = 0;
    for (int64_t t = t0 + S; t < t0 + minutes * MIN; t += S) {
        /* every (proc, tag) commits once per 10 s; its commit of 60 s
         * before is released (a leak keeps 1 in 4) */
        for (int p = 0; p < procs; p++)
            for (int k = 0; k < tags; k++) {
                if ((p * tags + k) % 10 != (t / S) % 10) continue;
                uint32_t pid = (uint32_t)(1000 + p);
                size_t slot = ((size_t)p * (size_t)tags + (size_t)k) * 8, j = (size_t)(t / S / 10) % 6;
                uint64_t addr = ((uint64_t)(k + 1) << 40) + ((uint64_t)(t / S) << 16);
                if (last[slot + j] && (p % 100 != 7 || j % 4)) {
                    cw_event_t r = {.ts = t, .op = CW_OP_RELEASE, .pid = pid, .addr = last[slot + j],
                                    .size = 65536};
                    cw_pipeline_feed(pipe, &r, &d);
                    events++;
                }
                cw_event_t c = {.ts = t, .op = CW_OP_COMMIT, .pid = pid, .addr = addr,
                                .size = 65536, .stack_id = stack[k]};
                if (cw_pipeline_feed(pipe, &c, &d)) {
                    fprintf(stderr, "feed: %s\n", d.msg);
                    exit(1);
                }
                last[slot + j] = addr;
                events++;
            }
    }
    cw_pipeline_tick(pipe, t0 + minutes * MIN);
    printf("feed: stored %d min of %d x %d series (%llu events) in %.1f s\n", minutes, procs, tags,
           (unsigned long long)events, bench_now_s() - w0);
    cw_store_close(s);
    if (cw_store_open(db, NULL, &s, &d)) exit(1);
    /* Rebuild at the end, then incremental 10 s feeds over the last minutes. */
    int64_t end = t0 + minutes * MIN, T1 = cw_floor_to(end - 5 * MIN, 10 * S);
    cw__aset_t a;
    cw__aset_init(&a, MIN, 361);
    double c0 = bench_cpu_s(CLOCK_THREAD_CPUTIME_ID);
    if (cw__aset_feed(&a, s, T1, &d)) {
        fprintf(stderr, "feed: %s\n", d.msg);
        exit(1);
    }
    double rebuild = bench_cpu_s(CLOCK_THREAD_CPUTIME_ID) - c0;
    uint64_t rows0 = a.rows_read;
    int n = 0;
    double *cpu = calloc(64, sizeof *cpu);
    for (int64_t T = T1 + 10 * S; T <= end - 10 * S && n < 64; T += 10 * S, n++) {
        c0 = bench_cpu_s(CLOCK_THREAD_CPUTIME_ID);
        if (cw__aset_feed(&a, s, T, &d)) exit(1);
        cpu[n] = bench_cpu_s(CLOCK_THREAD_CPUTIME_ID) - c0;
    }
    qsort(cpu, (size_t)n, sizeof *cpu, cmp_d);
    printf("feed: rebuild over %d min of history: %.1f ms CPU (%llu rows); one 10 s interval: "
           "%.2f ms CPU (median of %d, %llu rows each)\n",
           (int)((T1 - t0) / MIN), rebuild * 1e3, (unsigned long long)rows0, cpu[n / 2] * 1e3, n,
           (unsigned long long)((a.rows_read - rows0) / (uint64_t)(n ? n : 1)));
    free(cpu);
    free(last);
    cw__aset_free(&a);
    cw_pipeline_destroy(pipe);
    cw_agg_destroy(agg);
    cw_tagger_destroy(tg);
    cw_store_close(s);
    cw_stacks_destroy(st);
}

int main(int argc, char **argv)
{
    int procs = 1000, tags = 10, evals = 9, minutes = 8;
    const char *db = "bench_alerts.db", *mode = "both";
    for (int i = 1; i + 1 < argc; i += 2) {
        if (strcmp(argv[i], "--procs") == 0) procs = atoi(argv[i + 1]);
        else if (strcmp(argv[i], "--tags") == 0) tags = atoi(argv[i + 1]);
        else if (strcmp(argv[i], "--evals") == 0) evals = atoi(argv[i + 1]);
        else if (strcmp(argv[i], "--minutes") == 0) minutes = atoi(argv[i + 1]);
        else if (strcmp(argv[i], "--db") == 0) db = argv[i + 1];
        else if (strcmp(argv[i], "--mode") == 0) mode = argv[i + 1];
        else {
            fprintf(stderr, "usage: bench_alerts [--procs N] [--tags K<=10] [--evals N] "
                            "[--minutes M] [--db PATH] [--mode eval|feed|both]\n");
            return 2;
        }
    }
    if (procs < 1 || tags < 1 || tags > 10 || evals < 1 || minutes < 6) {
        fprintf(stderr, "bench_alerts: bad arguments\n");
        return 2;
    }
    if (strcmp(mode, "feed") != 0) bench_eval(procs, tags, evals);
    if (strcmp(mode, "eval") != 0) bench_feed(procs, tags, minutes, db);
    return 0;
}
