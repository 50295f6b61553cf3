/* bench_read.c - the store's read path without HTTP (docs/BENCHMARKS.md,
 * "Read path"): on a database (bench/http_bench.sh's day.db),
 * times cw_store_report() for the last hour (not aligned, as
 * /api/processes?from=-1h asks) and for the whole window (analyze --db),
 * and cw_store_series() for a process and for the machine over the first
 * 24 h, each --rounds times on one read handle; prints the median and the
 * slowest round in ms.
 *
 * usage: bench_read --db FILE [--proc ID] [--rounds N] [--only K]
 * (--only K: the K-th query alone, from 0, e.g. under perf) */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench_util.h"
#include "commitwatch/query.h"
#include "commitwatch/store.h"

#define NS ((int64_t)1000000000)

static int cmp_d(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static void report(const char *what, double *v, int n, long long size)
{
    qsort(v, (size_t)n, sizeof *v, cmp_d);
    printf("%-34s median %8.2f ms   max %8.2f ms   (%lld)\n", what, v[n / 2] * 1e3, v[n - 1] * 1e3,
           size);
}

int main(int argc, char **argv)
{
    const char *db = NULL;
    uint32_t proc = 1;
    int rounds = 10, only = -1;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--db") && i + 1 < argc)
            db = argv[++i];
        else if (!strcmp(argv[i], "--proc") && i + 1 < argc)
            proc = (uint32_t)strtoul(argv[++i], NULL, 10);
        else if (!strcmp(argv[i], "--rounds") && i + 1 < argc)
            rounds = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--only") && i + 1 < argc)
            only = atoi(argv[++i]);
        else {
            fprintf(stderr, "usage: bench_read --db FILE [--proc ID] [--rounds N] [--only K]\n");
            return 2;
        }
    }
    if (!db || rounds < 1 || rounds > 10000) {
        fprintf(stderr, "usage: bench_read --db FILE [--proc ID] [--rounds N] [--only K]\n");
        return 2;
    }
    cw_store_t *s = NULL;
    cw_diag_t d = {{0}};
    int64_t start, end;
    if (cw_store_open_readonly(db, &s, &d) || cw_store_data_span(s, &start, &end, &d)) {
        fprintf(stderr, "bench_read: %s\n", d.msg);
        return 1;
    }
    cw_store_tune_for_reads(s);
    double *v = calloc((size_t)rounds, sizeof *v);
    if (!v) return 1;
    int64_t day_to = start + 86400 * NS < end ? start + 86400 * NS : end;
    struct {
        const char *name;
        int kind; /* 0 report, 1 series */
        int64_t from, to, step;
        uint32_t proc;
    } qs[] = {
        {"report, last hour (unaligned)", 0, end - 3600 * NS + NS / 2, end, 0, 0},
        {"report, whole window", 0, INT64_MIN, INT64_MAX, 0, 0},
        {"series, process, 24 h, 180 s", 1, start, day_to, 180 * NS, proc},
        {"series, process, 24 h, 120 s", 1, start, day_to, 120 * NS, proc},
        {"series, machine, 24 h, 120 s", 1, start, day_to, 120 * NS, 0},
    };
    for (size_t k = 0; k < sizeof qs / sizeof qs[0]; k++) {
        long long size = 0;
        if (only >= 0 && (size_t)only != k) continue;
        for (int i = 0; i < rounds; i++) {
            double t0 = bench_now_s();
            int rc;
            if (qs[k].kind == 0) {
                cw_report_t *r = NULL;
                rc = cw_store_report(s, qs[k].from, qs[k].to, false, &r, &d);
                if (!rc) size = r->nprocs;
                cw_report_free(r);
            } else {
                cw_series_query_t q = {.from_ns = qs[k].from,
                                       .to_ns = qs[k].to,
                                       .step_ns = qs[k].step,
                                       .proc = qs[k].proc};
                cw_series_t *r = NULL;
                rc = cw_store_series(s, &q, &r, &d);
                if (!rc) size = r->npoints;
                cw_series_free(r);
            }
            v[i] = bench_now_s() - t0;
            if (rc) {
                fprintf(stderr, "bench_read: %s: %s\n", qs[k].name, d.msg);
                return 1;
            }
        }
        report(qs[k].name, v, rounds, size);
    }
    free(v);
    cw_store_close(s);
    return 0;
}
