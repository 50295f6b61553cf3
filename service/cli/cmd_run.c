/* cmd_run.c - `commitwatch run`: the service. A source feeds the pipeline
 * (tracker + bucket aggregator) on this thread; closed buckets go to the
 * store writer thread; SIGINT/SIGTERM stop the source, the open bucket is
 * flushed, the writer drains, and the database is closed cleanly.
 *
 * DESIGN (threads): this (core) thread owns the source, stacks, tagger,
 * tracker and aggregator; the writer thread owns the read-write store.
 * Signal handlers only set flags and call the source's stop(). */
#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cli/cli.h"
#include "commitwatch/config.h"
#include "commitwatch/http.h"
#include "commitwatch/log.h"
#include "commitwatch/pipeline.h"
#include "commitwatch/retag.h"
#include "commitwatch/source.h"
#include "commitwatch/store.h"

static const char usage_text[] =
    "usage: commitwatch run [--source SOURCE] [--db FILE] [--config FILE]\n"
    "                       [--stacktags FILE]... [--rebase-now] [--speed X]\n"
    "                       [--listen ADDR:PORT] [--token TOKEN] [--no-http] [--exit-at-end]\n\n"
    "Runs the service: ingests commit events from SOURCE into the database.\n\n"
    "  --source SOURCE    perf (Linux, default there), etw (Windows), or replay:PATH\n"
    "  --db FILE          the SQLite database (created if missing; default from the\n"
    "                     config, else commitwatch.db)\n"
    "  --config FILE      configuration file (`key = value` lines)\n"
    "  --stacktags FILE   stack-tag rules (repeatable; default: the platform's rules)\n"
    "  --rebase-now       replay only: shift the trace's times so it starts now\n"
    "  --speed X          replay only: pace events at X times real time (1 = live)\n"
    "  --listen ADDR:PORT serve the API, /metrics and the dashboard there\n"
    "                     (default 127.0.0.1:8470)\n"
    "  --token TOKEN      allow state-changing requests carrying this bearer token\n"
    "  --no-http          run without the HTTP server\n"
    "  --exit-at-end      replay: exit at the end of input instead of serving on\n\n"
    "SIGINT/SIGTERM flush the open bucket and exit. A replay keeps serving its\n"
    "data after its end until then (or exits at once with --exit-at-end or\n"
    "--no-http).\n"
    "SIGHUP reloads the configuration file and the stack-tag rules; stored stacks\n"
    "are re-tagged when the rules changed.\n";

static volatile sig_atomic_t stop_requested;
static volatile sig_atomic_t reload_requested;
static const cw_source_ops_t *active_ops;
static void *active_src;

static void on_signal(int sig)
{
    if (sig == SIGHUP) {
        reload_requested = 1;
        return;
    }
    stop_requested = 1;
    if (active_ops && active_src) active_ops->stop(active_src);
}

typedef struct run_ctx {
    cw_http_status_t *status; /* what the HTTP server shows (atomics) */
    cw_pipeline_t *pipe;
    cw_agg_t *agg;
    cw_diag_t *d;
    /* What a reload replaces (SIGHUP). */
    const char *config_path;
    const cw_cli_rules_t *cli_rules; /* --stacktags: win over the config */
    const char *platform;
    cw_store_t *store;
    cw_stacks_t *stacks;
    cw_tagger_t *tagger;
    cw_writer_t *writer; /* the agg emits through this ctx */
    int64_t stored_end; /* end of the last stored bucket, INT64_MIN if none */
    bool rebase;
    double speed;
    bool started;
    int64_t shift;       /* added to every ts (rebase) */
    int64_t wall0, ts0;  /* pacing origin */
} run_ctx_t;

static int64_t now_ns(void)
{
    struct timespec t;
    clock_gettime(CLOCK_REALTIME, &t);
    return (int64_t)t.tv_sec * 1000000000LL + t.tv_nsec;
}

static void sleep_ns(int64_t ns)
{
    struct timespec t = {(time_t)(ns / 1000000000LL), (long)(ns % 1000000000LL)};
    while (nanosleep(&t, &t) != 0 && !stop_requested) {
    }
}

/* Re-tags the stored stacks when the tagger's rules differ from the
 * database's (the caller owns the store: the writer is not running). */
static int retag(run_ctx_t *r, cw_diag_t *d)
{
    cw_retag_result_t rt;
    int rc = cw_retag_store(r->store, r->tagger, &rt, d);
    if (rc == 0 && rt.ran && rt.stacks > 0)
        CW_LOGI("stack-tag rules %s: re-tagged %" PRIu64 " of %" PRIu64 " stored stacks",
                cw_tagger_rules_hash(r->tagger), rt.changed, rt.stacks);
    return rc;
}

/* The stack-tag rule files in force: --stacktags, else the config's. */
static int rules_from(const run_ctx_t *r, const cw_config_t *cfg, cw_cli_rules_t *out)
{
    const cw_cli_rules_t *src = r->cli_rules;
    for (size_t i = 0; i < src->n; i++)
        if (cw_cli_rules_add(out, src->files[i]) != 0) return CW_ENOMEM;
    for (size_t i = 0; src->n == 0 && i < cfg->nstacktags; i++)
        if (cw_cli_rules_add(out, cfg->stacktags[i]) != 0) return CW_ENOMEM;
    return 0;
}

static void apply_log_level(const char *level)
{
    static const char *const levels[] = {"debug", "info", "warning", "error"};
    for (int l = 0; level && l < 4; l++)
        if (strcmp(level, levels[l]) == 0) cw_log_set_level((cw_log_level_t)l);
}

/* SIGHUP: reload the configuration and the rules. On any error the old
 * configuration and rules stay in force, and the log says why. The writer
 * is paused (drained and joined) so this thread may use the store. */
static int reload(run_ctx_t *r)
{
    cw_config_t cfg;
    cw_cli_rules_t rules = {0};
    cw_tagger_t *nt = NULL;
    cw_diag_t d = {{0}};
    int rc;

    reload_requested = 0;
    CW_LOGI("SIGHUP: reloading %s", r->config_path ? r->config_path : "the stack-tag rules");
    if ((rc = cw_config_init(&cfg)) != 0) return rc;
    if (r->config_path && cw_config_load(&cfg, r->config_path, stderr, &d) != 0) {
        CW_LOGE("reload: %s; keeping the running configuration", d.msg);
        goto done;
    }
    if ((rc = rules_from(r, &cfg, &rules)) != 0) goto done;
    if (cw_cli_make_tagger(r->platform, &rules, &nt, &d) != 0) {
        CW_LOGE("reload: %s; keeping the running rules", d.msg);
        goto done;
    }
    apply_log_level(cfg.log_level);
    if ((rc = cw_writer_stop(r->writer, &d)) != 0) {
        r->writer = NULL;
        cw_diag_set(r->d, rc, "%s", d.msg);
        goto done;
    }
    r->writer = NULL;
    cw_tagger_t *old = r->tagger;
    r->tagger = nt;
    if (retag(r, &d) != 0) {
        CW_LOGE("reload: re-tagging failed: %s; keeping the running rules", d.msg);
        r->tagger = old;
    } else {
        nt = old; /* freed below */
        cw_stacks_clear_tags(r->stacks);
        cw_agg_set_tagger(r->agg, r->tagger);
    }
    if ((rc = cw_writer_start(r->store, 64, &r->writer)) != 0)
        cw_diag_set(r->d, rc, "cannot restart the store writer: %s", cw_strerror(rc));
done:
    cw_tagger_destroy(nt);
    cw_cli_rules_free(&rules);
    cw_config_free(&cfg);
    return rc;
}

static int run_emit(void *ctx, const cw_event_t *in)
{
    run_ctx_t *r = ctx;
    int rc;
    if (reload_requested && (rc = reload(r)) != 0) return rc;
    cw_event_t ev = *in;
    if (!r->started) {
        r->started = true;
        r->wall0 = now_ns();
        r->ts0 = ev.ts;
        if (r->rebase) r->shift = r->wall0 - ev.ts;
        if (ev.ts + r->shift < r->stored_end)
            return cw_diag_set(r->d, CW_ETIME, "the database already holds data up to %" PRId64 " ns but this input starts at %" PRId64 " ns; use another --db, or --rebase-now to replay it as new", r->stored_end, ev.ts + r->shift);
    }
    if (r->speed > 0) {
        int64_t due = r->wall0 + (int64_t)((double)(ev.ts - r->ts0) / r->speed);
        /* Close buckets while waiting so the dashboard sees them live. */
        for (int64_t now = now_ns(); now < due && !stop_requested; now = now_ns()) {
            int64_t step = due - now < 200000000 ? due - now : 200000000;
            sleep_ns(step);
            /* Never past the event about to be fed (a tick is a promise). */
            int64_t t = (int64_t)((double)(now_ns() - r->wall0) * r->speed) + r->ts0;
            rc = cw_pipeline_tick(r->pipe, (t < ev.ts ? t : ev.ts) + r->shift);
            if (rc) return cw_diag_set(r->d, rc, "storing a bucket failed: %s", cw_strerror(rc));
        }
        if (stop_requested) return 0;
    }
    ev.ts += r->shift;
    rc = cw_pipeline_feed(r->pipe, &ev, r->d);
    atomic_store_explicit(&r->status->events_total, cw_pipeline_events(r->pipe),
                          memory_order_relaxed);
    return rc;
}

static int run_tick(void *ctx, int64_t now)
{
    run_ctx_t *r = ctx;
    int rc;
    if (reload_requested && (rc = reload(r)) != 0) return rc;
    return cw_pipeline_tick(r->pipe, now);
}

static void run_counters(void *ctx, uint64_t seen, uint64_t lost, int64_t drift)
{
    run_ctx_t *r = ctx;
    cw_agg_set_counters(r->agg, seen, lost, drift);
    cw_http_status_counters(r->status, seen, lost, drift);
}

static int emit_to_writer(void *ctx, cw_batch_t *b)
{
    run_ctx_t *r = ctx;
    return cw_writer_submit(r->writer, b);
}

int cw_cmd_run(int argc, char **argv)
{
    cw_config_t cfg;
    cw_cli_rules_t cli_rules = {0}, rules = {0};
    const char *config_path = NULL, *db_arg = NULL, *source_arg = NULL;
    bool rebase = false, no_http = false, exit_at_end = false;
    const char *listen_arg = NULL, *token_arg = NULL;
    cw_http_t *http = NULL;
    cw_http_status_t status;
    double speed = 0;
    cw_diag_t d = {{0}}, wd = {{0}};
    int rc = 0, exit_code = 1;
    run_ctx_t ctx = {0};
    cw_pipeline_t *pipe = NULL;
    const cw_source_ops_t *ops = NULL;
    void *src = NULL;
    char *stored_platform = NULL;

    if (cw_cli_wants_help(argc, argv)) {
        fputs(usage_text, stdout);
        return 0;
    }
    if (cw_config_init(&cfg) != 0) {
        fprintf(stderr, "commitwatch run: out of memory\n");
        return 1;
    }
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (strcmp(a, "--rebase-now") == 0) {
            rebase = true;
            continue;
        }
        if (strcmp(a, "--no-http") == 0 || strcmp(a, "--exit-at-end") == 0) {
            *(a[2] == 'n' ? &no_http : &exit_at_end) = true;
            continue;
        }
        if (!v || strncmp(a, "--", 2) != 0) {
            fprintf(stderr, "commitwatch run: %s '%s'\n%s", v ? "unknown argument" : "missing value or unknown option", a, usage_text);
            exit_code = 2;
            goto out;
        }
        i++;
        if (strcmp(a, "--source") == 0) source_arg = v;
        else if (strcmp(a, "--db") == 0) db_arg = v;
        else if (strcmp(a, "--config") == 0) config_path = v;
        else if (strcmp(a, "--listen") == 0) listen_arg = v;
        else if (strcmp(a, "--token") == 0) token_arg = v;
        else if (strcmp(a, "--stacktags") == 0) {
            if (cw_cli_rules_add(&cli_rules, v) != 0) goto out;
        } else if (strcmp(a, "--speed") == 0) {
            char *end;
            speed = strtod(v, &end);
            if (*end || !(speed > 0)) {
                fprintf(stderr, "commitwatch run: --speed takes a positive number, not '%s'\n", v);
                exit_code = 2;
                goto out;
            }
        } else {
            fprintf(stderr, "commitwatch run: unknown option '%s'\n%s", a, usage_text);
            exit_code = 2;
            goto out;
        }
    }
    if (config_path && (rc = cw_config_load(&cfg, config_path, stderr, &d)) != 0) {
        fprintf(stderr, "commitwatch run: %s\n", d.msg);
        goto out;
    }
    ctx.cli_rules = &cli_rules;
    ctx.config_path = config_path;
    if (rules_from(&ctx, &cfg, &rules) != 0) goto out;
    apply_log_level(cfg.log_level);
    if (!source_arg) source_arg = cfg.source;
    if (!source_arg) source_arg = cw_cli_live_source();
    const char *db_path = db_arg ? db_arg : cfg.db;
    const char *source_rest = "";
    if (!(ops = cw_cli_find_source("run", source_arg, &source_rest))) {
        exit_code = 2;
        goto out;
    }
    if ((rebase || speed > 0) && strcmp(ops->name, "replay") != 0) {
        fprintf(stderr, "commitwatch run: --rebase-now and --speed are for replay sources only\n");
        exit_code = 2;
        goto out;
    }

    /* Open the store and continue its numbering. */
    cw_http_status_init(&status, source_arg, strcmp(ops->name, "replay") == 0);
    ctx.status = &status;
    ctx.d = &d;
    ctx.rebase = rebase;
    ctx.speed = speed;
    uint32_t next_proc = 1;
    if ((rc = cw_stacks_create(&ctx.stacks)) != 0) goto fail;
    if ((rc = cw_store_open(db_path, &cfg.store, &ctx.store, &d)) != 0) goto fail;
    if ((rc = cw_store_load_state(ctx.store, ctx.stacks, &next_proc, &ctx.stored_end, &d)) != 0) goto fail;
    uint32_t stored_frames = cw_stacks_frame_count(ctx.stacks), stored_stacks = cw_stacks_count(ctx.stacks);
    if (stored_stacks <= 1) stored_stacks = 0; /* nothing stored yet: send stack 0 too */

    if ((rc = ops->open(&src, source_rest, ctx.stacks, &d)) != 0) goto fail;
    /* One database holds the data of one platform: its stacks are tagged
     * with that platform's rules. */
    ctx.platform = ops->platform(src);
    if ((rc = cw_store_meta_get(ctx.store, "platform", &stored_platform, &d)) != 0) goto fail;
    if (stored_platform && strcmp(stored_platform, ctx.platform) != 0) {
        rc = cw_diag_set(&d, CW_EINVAL, "%s holds %s data and this source gives %s data; use another --db", db_path, stored_platform, ctx.platform);
        goto fail;
    }
    if (!stored_platform && (rc = cw_store_meta_set(ctx.store, "platform", ctx.platform, &d)) != 0) goto fail;
    if ((rc = cw_cli_make_tagger(ctx.platform, &rules, &ctx.tagger, &d)) != 0) goto fail;
    if ((rc = retag(&ctx, &d)) != 0) goto fail;
    if ((rc = cw_writer_start(ctx.store, 64, &ctx.writer)) != 0) {
        cw_diag_set(&d, rc, "cannot start the store writer: %s", cw_strerror(rc));
        goto fail;
    }
    if ((rc = cw_agg_create(1000000000LL, ctx.stacks, ctx.tagger, stored_frames, stored_stacks, emit_to_writer, &ctx, &ctx.agg)) != 0) goto fail;
    cw_tracker_sink_t sink = cw_agg_sink(ctx.agg);
    if ((rc = cw_pipeline_create(&sink, ctx.agg, next_proc, &pipe)) != 0) goto fail;
    ctx.pipe = pipe;
    /* HTTP workers read the database through their own connections. A
     * replay's API clock is its data's end, so "the last hour" shows it. */
    if (!no_http) {
        cw_http_opts_t ho = {0};
        ho.listen = listen_arg ? listen_arg : cfg.listen;
        ho.db_path = db_path;
        ho.web_root = cfg.web_root;
        ho.token = token_arg ? token_arg : cfg.token;
        ho.access_log = cfg.access_log;
        ho.rule_files = (const char *const *)rules.files; /* the startup rules */
        ho.nrule_files = (unsigned)rules.n;
        ho.status = &status;
        if ((rc = cw_http_start(&ho, &http, &d)) != 0) goto fail;
    }

    active_ops = ops;
    active_src = src;
    cw_cli_catch_signals(on_signal, 1);

    CW_LOGI("ingesting from %s into %s (stack tags: %s)", source_arg, db_path, cw_tagger_rules_hash(ctx.tagger));
    cw_source_sink_t ss = {&ctx, run_emit, run_tick, run_counters};
    rc = ops->run(src, &ss, &d);
    atomic_store(&status.events_total, cw_pipeline_events(pipe));
    /* Instances still alive end here: tracking ends with this run. */
    int flush_rc = cw_pipeline_end_all(pipe);
    if (flush_rc == 0) flush_rc = cw_agg_flush(ctx.agg);
    if (rc == 0 && flush_rc != 0) rc = cw_diag_set(&d, flush_rc, "storing the last bucket failed: %s", cw_strerror(flush_rc));
fail:
    active_ops = NULL;
    active_src = NULL;
    if (ctx.writer) {
        int wrc = cw_writer_stop(ctx.writer, &wd);
        if (wrc != 0 && rc == 0) {
            rc = wrc;
            d = wd;
        } else if (wrc != 0) {
            fprintf(stderr, "commitwatch run: %s\n", wd.msg);
        }
    }
    if (http && rc == 0 && !exit_at_end && !stop_requested) {
        /* The input has ended (a replay) and every bucket is stored: keep
         * serving it until SIGINT/SIGTERM. */
        atomic_store(&status.ingest_done, true);
        CW_LOGI("end of input: %" PRIu64 " events stored; still serving (SIGINT/SIGTERM to exit, "
                "--exit-at-end to leave at once)", pipe ? cw_pipeline_events(pipe) : 0);
        while (!stop_requested) sleep_ns(100000000);
    }
    cw_http_stop(http);
    if (rc == 0) {
        CW_LOGI("%s: %" PRIu64 " events stored in %s", stop_requested ? "stopped" : "end of input",
                pipe ? cw_pipeline_events(pipe) : 0, db_path);
        exit_code = 0;
    } else {
        fprintf(stderr, "commitwatch run: %s\n", d.msg[0] ? d.msg : cw_strerror(rc));
        if (pipe && cw_pipeline_events(pipe) > 0)
            fprintf(stderr, "commitwatch run: the %" PRIu64 " events before the error are stored in %s\n", cw_pipeline_events(pipe), db_path);
    }
    cw_pipeline_destroy(pipe);
    cw_agg_destroy(ctx.agg);
    if (ops && src) ops->close(src);
    cw_tagger_destroy(ctx.tagger);
    cw_store_close(ctx.store);
    cw_stacks_destroy(ctx.stacks);
    free(stored_platform);
out:
    cw_cli_rules_free(&rules);
    cw_cli_rules_free(&cli_rules);
    cw_config_free(&cfg);
    return exit_code;
}
