/* cmd_record.c - `commitwatch record`: a live source into a JSONL v1 trace
 * file (trace.h), which replays anywhere (`--source replay:FILE`).
 *
 * DESIGN (threads): this thread runs the source, which calls back here for
 * each event; signal handlers (SIGINT, SIGTERM) and the duration deadline
 * only call the source's stop(). The trace is complete up to the stop:
 * events the source still holds are written before it returns. */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cli/cli.h"
#include "commitwatch/log.h"
#include "commitwatch/source.h"
#include "commitwatch/trace.h"

static const char usage_text[] =
    "usage: commitwatch record [--source SOURCE] --out FILE [--duration S]\n\n"
    "Writes the events of a live source to FILE as a JSONL trace (version 1).\n\n"
    "  --source SOURCE  perf (Linux, the default there) or replay:PATH\n"
    "  --out FILE       the trace to write (- for stdout)\n"
    "  --duration S     stop after S seconds (default: until SIGINT/SIGTERM)\n"
    "  --verbose, -v    log the source's statistics\n";

static const cw_source_ops_t *active_ops;
static void *active_src;

static void on_signal(int sig)
{
    (void)sig;
    if (active_ops && active_src) active_ops->stop(active_src);
}

typedef struct rec_ctx {
    cw_trace_writer_t *w;
    int64_t deadline; /* CLOCK_MONOTONIC ns, 0 = none */
    bool stopped;
    uint64_t events, lost;
    int64_t drift;
} rec_ctx_t;

static int64_t mono_ns(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (int64_t)t.tv_sec * 1000000000LL + t.tv_nsec;
}

static void check_deadline(rec_ctx_t *r)
{
    if (r->deadline && !r->stopped && mono_ns() >= r->deadline) {
        r->stopped = true;
        active_ops->stop(active_src);
    }
}

static int rec_emit(void *ctx, const cw_event_t *ev)
{
    rec_ctx_t *r = ctx;
    r->events++;
    int rc = cw_trace_writer_write(r->w, ev);
    if ((r->events & 1023) == 0) check_deadline(r);
    return rc;
}

static int rec_tick(void *ctx, int64_t now_ns)
{
    (void)now_ns;
    check_deadline(ctx);
    return 0;
}

static void rec_counters(void *ctx, uint64_t seen, uint64_t lost, int64_t drift)
{
    (void)seen;
    rec_ctx_t *r = ctx;
    r->lost = lost;
    r->drift = drift;
}

int cw_cmd_record(int argc, char **argv)
{
    const char *source_arg = NULL, *out = NULL;
    long long duration = 0;
    if (cw_cli_wants_help(argc, argv)) {
        fputs(usage_text, stdout);
        return 0;
    }
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        const char *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (strcmp(a, "--source") == 0 && v) {
            source_arg = v;
            i++;
        } else if (strcmp(a, "--out") == 0 && v) {
            out = v;
            i++;
        } else if (strcmp(a, "--verbose") == 0 || strcmp(a, "-v") == 0) {
            cw_log_set_level(CW_LOG_DEBUG);
        } else if (strcmp(a, "--duration") == 0 && v) {
            if (cw_cli_parse_i64(v, &duration) != 0 || duration <= 0) {
                fprintf(stderr, "commitwatch record: --duration wants a positive number of "
                                "seconds, not '%s'\n", v);
                return 2;
            }
            i++;
        } else {
            fprintf(stderr, "commitwatch record: unexpected argument '%s'\n\n%s", a, usage_text);
            return 2;
        }
    }
    if (!out) {
        fprintf(stderr, "commitwatch record: --out FILE is required\n\n%s", usage_text);
        return 2;
    }
    if (!source_arg) source_arg = cw_cli_live_source();
    const char *source_rest = "";
    const cw_source_ops_t *ops = cw_cli_find_source("record", source_arg, &source_rest);
    if (!ops) return 2;

    cw_diag_t d = {{0}};
    cw_stacks_t *stacks = NULL;
    void *src = NULL;
    rec_ctx_t r = {0};
    int rc = cw_stacks_create(&stacks);
    if (rc) {
        cw_diag_set(&d, rc, "%s", cw_strerror(rc));
        goto done;
    }
    if ((rc = ops->open(&src, source_rest, stacks, &d))) goto done;
    cw_trace_header_t h = {{0}, 8};
    snprintf(h.platform, sizeof h.platform, "%s", ops->platform(src));
    if ((rc = cw_trace_writer_open(out, &h, stacks, &r.w, &d))) goto done;
    if (duration) r.deadline = mono_ns() + duration * 1000000000LL;

    active_ops = ops;
    active_src = src;
    cw_cli_catch_signals(on_signal, 0);
    CW_LOGI("recording from %s into %s%s", source_arg, out,
            duration ? "" : " (SIGINT or SIGTERM stops)");
    cw_source_sink_t sink = {&r, rec_emit, rec_tick, rec_counters};
    rc = ops->run(src, &sink, &d);
    active_ops = NULL;
    active_src = NULL;
done:;
    cw_diag_t wd = {{0}};
    int wrc = cw_trace_writer_close(r.w, &wd);
    if (!rc && wrc) {
        rc = wrc;
        d = wd;
    }
    if (ops && src) ops->close(src);
    cw_stacks_destroy(stacks);
    if (rc) {
        fprintf(stderr, "commitwatch record: %s\n", d.msg[0] ? d.msg : cw_strerror(rc));
        return 1;
    }
    CW_LOGI("recorded %llu events into %s (%llu perf records lost, %lld bytes corrected)",
            (unsigned long long)r.events, out, (unsigned long long)r.lost, (long long)r.drift);
    return 0;
}
