/* cmd_record.c - `commitwatch record`: a live source into a JSONL v1 trace
 * file (trace.h), which replays anywhere (`--source replay:FILE`).
 *
 * DESIGN (threads): this thread runs the source, which calls back here for
 * each event; signal handlers (SIGINT, SIGTERM) and the duration deadline
 * only call the source's stop(). The trace is complete up to the stop:
 * events the source still holds are written before it returns. */
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"
#include "commitwatch/log.h"
#include "commitwatch/platform.h"
#include "commitwatch/source.h"
#include "commitwatch/trace.h"

static const char usage_text[] =
    "usage: commitwatch record [--source SOURCE] --out FILE [--duration S] [--images DIR]\n\n"
    "Writes the events of a live source to FILE as a JSONL trace (version 1).\n\n"
    "  --source SOURCE  perf (Linux, the default there), replay:PATH or etl:FILE\n"
    "                   (a Windows event trace, read on any OS)\n"
    "  --out FILE       the trace to write (- for stdout)\n"
    "  --duration S     stop after S seconds (default: until SIGINT/SIGTERM)\n"
    "  --images DIR     etl: only: copies of the trace's DLLs and EXEs, whose exports\n"
    "                   name the frames in them\n"
    "  --verbose, -v    log the source's statistics\n";

/* The source's session, for the stop hook (a signal handler). */
static cw_source_session_t *_Atomic active;

static void on_stop(void)
{
    cw_source_session_stop(atomic_load(&active));
}

typedef struct record_args {
    const char *source, *out, *images;
    long long duration;
    bool verbose;
} record_args_t;

/* Shaped like analyze's, heap's and run's: each command's options are its own table
 * (data). */
#define F(f) offsetof(record_args_t, f)
static const cw_cli_opt_t opts[] = {
    {"--source", CW_CLI_STR, F(source), 0, NULL},
    {"--out", CW_CLI_STR, F(out), 0, NULL},
    {"--duration", CW_CLI_SECONDS, F(duration), 0, NULL},
    {"--images", CW_CLI_STR, F(images), 0, NULL},
    {"--verbose", CW_CLI_FLAG, F(verbose), 0, "-v"},
    {NULL, CW_CLI_FLAG, 0, 0, NULL},
};
#undef F

typedef struct rec_ctx {
    cw_trace_writer_t *w;
    int64_t deadline; /* cw_plat_mono_ns(), 0 = none */
    bool stopped;
    uint64_t events, lost;
    int64_t drift;
} rec_ctx_t;

static void check_deadline(rec_ctx_t *r)
{
    if (r->deadline && !r->stopped && cw_plat_mono_ns() >= r->deadline) {
        r->stopped = true;
        on_stop();
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
    record_args_t a = {0};
    if (cw_cli_wants_help(argc, argv)) {
        fputs(usage_text, stdout);
        return 0;
    }
    if (cw_cli_parse("record", argc, argv, opts, &a, usage_text) != 0) return 2;
    if (a.verbose) cw_log_set_level(CW_LOG_DEBUG);
    const char *out = a.out, *source_arg = a.source;
    long long duration = a.duration;
    if (!out) {
        fprintf(stderr, "commitwatch record: --out FILE is required\n\n%s", usage_text);
        return 2;
    }
    if (!source_arg) source_arg = cw_source_live();
    const char *source_rest = "";
    const cw_source_ops_t *ops = cw_cli_find_source("record", source_arg, &source_rest);
    if (!ops) return 2;

    cw_diag_t d = {{0}};
    cw_stacks_t *stacks = NULL;
    cw_source_session_t ss = {0};
    rec_ctx_t r = {0};
    int rc = cw_stacks_create(&stacks);
    if (rc) {
        cw_diag_set(&d, rc, "%s", cw_strerror(rc));
        goto done;
    }
    cw_source_opts_t so = {.arg = source_rest, .stacks = stacks, .images = a.images};
    if ((rc = cw_source_session_open(&ss, ops, &so, &d)) != 0) goto done;
    cw_trace_header_t h = {{0}, 8, 0};
    cw_strlcpy(h.platform, cw_source_session_platform(&ss), sizeof h.platform);
    /* The machine's commit limit goes into the header: a replay forecasts
     * against it (docs/ALERTS.md, "Time to limit"). A recorded input
     * passes its own on, when it has one. */
    uint64_t used;
    bool enforced;
    const char *why;
    if (ops->commit_limit ? ops->commit_limit(ss.impl, &h.commit_limit, &why) != 0
                          : cw_plat_commit_limit(&h.commit_limit, &used, &enforced) != 0)
        h.commit_limit = 0;
    if ((rc = cw_trace_writer_open(out, &h, stacks, &r.w, &d))) goto done;
    if (duration) r.deadline = cw_plat_mono_ns() + duration * CW_NS_PER_S;

    atomic_store(&active, &ss);
    cw_plat_catch_stop(on_stop, NULL);
    CW_LOGI("recording from %s into %s%s", source_arg, out,
            duration ? "" : " (SIGINT or SIGTERM stops)");
    cw_source_sink_t sink = {&r, rec_emit, rec_tick, rec_counters, NULL, NULL};
    rc = cw_source_session_run(&ss, &sink, &d);
    cw_plat_catch_stop(NULL, NULL);
    atomic_store(&active, NULL);
done:;
    cw_diag_t wd = {{0}};
    int wrc = cw_trace_writer_close(r.w, &wd);
    if (!rc && wrc) {
        rc = wrc;
        d = wd;
    }
    cw_source_session_close(&ss);
    cw_stacks_destroy(stacks);
    if (rc) {
        fprintf(stderr, "commitwatch record: %s\n", d.msg[0] ? d.msg : cw_strerror(rc));
        return 1;
    }
    CW_LOGI("recorded %llu events into %s (%llu perf records lost, %lld bytes corrected)",
            (unsigned long long)r.events, out, (unsigned long long)r.lost, (long long)r.drift);
    return 0;
}
