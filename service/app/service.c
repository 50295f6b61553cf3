/* service.c - the service entry point (service.h): configuration, source,
 * pipeline, writer, HTTP and status, from start to a clean stop.
 *
 * The flow of one event does not pass through here: the source (on this,
 * the core thread) runs into the pipeline's sink, which checks its order
 * and applies it to the tracker, whose sink is the aggregator; when a
 * bucket closes the aggregator hands the batch to the pipeline, which adds
 * the map snapshots and hands it to the writer's sink (cw_writer_emit),
 * which queues it for the writer thread. A tick (live sources, or a paced
 * replay) closes idle buckets the same way. This file wires those stages
 * and does the work between events: reload requests (served between two
 * events or ticks, on this thread), the clock and the memory figures.
 *
 * The rest of the service's work is in the other files of app/ (svc.h
 * lists them); this one calls them in order. */
#include <inttypes.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "app/svc.h"
#include "commitwatch/log.h"

/* Heap blocks from this size on get pages of their own, given back at
 * free (cw_plat_heap_mmap_threshold): a report's sums, the read caches,
 * a burst's rollup vectors. glibc's default threshold rises to the size
 * of each such block freed, after which they came from the heap and their
 * room stayed resident once the load stopped (docs/RELIABILITY.md, "Soak"). */
#define HEAP_MMAP_THRESHOLD (256u << 10)

/* When a live instance's memory map is stored (schema/008_map; DESIGN.md,
 * "Memory maps"): after 10 s if it moved by 1 MiB or 10 %, else after
 * 10 min if it changed at all, and at the end of the run. */
static const cw_map_policy_t map_policy = {10 * CW_NS_PER_S, 600 * CW_NS_PER_S,
                                           UINT64_C(1) << 20, 10};

/* ---- between events (core thread) ------------------------------------------ */

/* The service's work between two events (cw_pipeline_serve_opts_t.between):
 * at every tick the clock and the memory figures, and a reload when one
 * was asked for. An error (a reload that cannot restart the writer) stops
 * the service. */
static int between_events(void *ctx, bool tick)
{
    svc_t *s = ctx;
    int rc;
    if (tick) cw__svc_note_clock_step(s);
    if (tick) cw__svc_heaps_drain(s);
    if (atomic_load(&cw__svc_reload_flag) && (rc = cw__svc_reload(s)) != 0) return rc;
    if (tick) cw__svc_publish_memory(s, false);
    return 0;
}

/* A live source died while instances were alive: tracking ends for them
 * there, as at the end of a run (their last maps stored, their memory
 * released at the next bucket), so the source's rundown when it comes
 * back starts them anew instead of counting their memory twice. That
 * bucket is stored now, not when the source is back: the alert engine
 * evaluates the instants after it meanwhile, and must find it stored. */
static int end_tracking(svc_t *s)
{
    int rc = cw_pipeline_end_tracking(s->pipe);
    if (rc == 0) rc = cw_agg_flush(s->agg);
    return rc;
}

/* ---- the run, step by step (cw_service_run) --------------------------------- */

static int oom(cw_diag_t *d, int rc)
{
    return cw_diag_set(d, rc, "out of memory starting the service");
}

/* --source (or the configuration's, or the live default) to its ops, with
 * the checks of the options that depend on it; the status record starts
 * here. */
static int resolve_source(svc_t *s, const cw_source_ops_t **ops, const char **arg)
{
    const cw_service_args_t *a = s->args;
    s->spec = a->source ? a->source : s->cfg.source ? s->cfg.source : cw_source_live();
    if (!s->spec)
        return cw_diag_set(s->d, CW_EUSAGE,
                           "this build has no live source for %s (perf is Linux's, etw "
                           "Windows'); give --source replay:PATH or --source etl:FILE",
                           cw_plat_name());
    if (!(*ops = cw_source_lookup(s->spec, arg, s->d))) return CW_EUSAGE;
    bool replay = strcmp((*ops)->name, "replay") == 0;
    if ((a->rebase_now || a->speed > 0) && !replay)
        return cw_diag_set(s->d, CW_EUSAGE, "--rebase-now and --speed are for replay sources only");
    /* A file (a JSONL trace or an .etl) is data of the past: the API's
     * clock is its end, as for a replay. The platform's live source (perf,
     * etw) runs until stopped: its errors, and its end, degrade the
     * service, which tries it again; the others' (a file, a rundown
     * snapshot) end the run, and their end is the end of input. */
    bool file = replay || strcmp((*ops)->name, "etl") == 0;
    bool live = cw_source_live() && strcmp((*ops)->name, cw_source_live()) == 0;
    /* Degraded mode shows itself through the HTTP server (health, metrics,
     * banner, the source_down alert); without one nothing would, so with
     * --no-http a live source's failure ends the run like any other's. */
    s->degrade = live && !a->no_http;
    s->live = live;
    cw_status_init(&s->status, s->spec, file, cw_plat_wall_ns(), cw_plat_mono_ns());
    /* The wall clock's offset from now on: a step before the first tick
     * is noted at that tick. */
    s->clock_off = INT64_MIN;
    cw_clock_step(&s->clock_off, cw_plat_wall_ns(), cw_plat_mono_ns(), CLOCK_STEP_NOTE_NS);
    return 0;
}

/* Opens the store, stores what a killed run left, and continues its
 * numbering (stacks, instances, the stored end). */
static int open_store(svc_t *s)
{
    int rc;
    s->next_proc = 1;
    if ((rc = cw_stacks_create(&s->stacks)) != 0) return oom(s->d, rc);
    if ((rc = cw_store_open(s->db_path, &s->cfg.store, &s->store, s->d)) != 0 ||
        (rc = cw__svc_recover_journal(s, s->d)) != 0 ||
        (rc = cw_store_load_state(s->store, s->stacks, &s->next_proc, &s->stored_end, s->d)) != 0 ||
        (rc = cw__svc_end_open(s, s->d)) != 0)
        return rc;
    s->stored_frames = cw_stacks_frame_count(s->stacks);
    s->stored_stacks = cw_stacks_count(s->stacks);
    if (s->stored_stacks <= 1) s->stored_stacks = 0; /* nothing stored yet: send stack 0 too */
    return 0;
}

/* Opens the source (a live one that fails degrades the service instead),
 * and settles the data's platform with the database. */
static int open_source(svc_t *s, const cw_source_ops_t *ops, const char *arg)
{
    const cw_config_t *cfg = &s->cfg;
    cw_source_opts_t so = {
        .arg = arg, .stacks = s->stacks, .rebase_now = s->args->rebase_now,
        .speed = s->args->speed, .images = s->args->images ? s->args->images : cfg->images,
        .symbol_path = cfg->symbol_path, .perf_ring_bytes = cfg->perf_ring_bytes,
        .perf_queue_bytes = cfg->perf_queue_bytes,
        .perf_unwind_procs = cfg->perf_unwind_procs > UINT32_MAX
                                 ? UINT32_MAX
                                 : (uint32_t)cfg->perf_unwind_procs};
    cw_diag_t sd = {{0}};
    int rc = cw_source_session_open(&s->src, ops, &so, &sd);
    if (rc != 0) {
        /* A file that cannot be read, or a usage error, ends the run. */
        if (!s->degrade || rc == CW_EUSAGE || rc == CW_ENOMEM) {
            *s->d = sd;
            return rc;
        }
        cw__svc_source_failed(s, ops->name, sd.msg[0] ? sd.msg : cw_strerror(rc),
                              cw_plat_wall_ns());
    } else {
        cw__svc_source_opened(s, ops->name);
    }
    if ((rc = cw_store_meta_get(s->store, "platform", &s->stored_platform, s->d)) != 0) return rc;
    /* One database holds the data of one platform: its stacks are tagged
     * with that platform's rules. A live source that did not open gives
     * this machine's data when it does. */
    s->platform = s->src.impl          ? cw_source_session_platform(&s->src)
                  : s->stored_platform ? s->stored_platform
                                       : cw_plat_name();
    if (s->stored_platform && strcmp(s->stored_platform, s->platform) != 0)
        return cw_diag_set(s->d, CW_EINVAL,
                           "%s holds %s data and this source gives %s data; use another --db "
                           "(`commitwatch serve --db %s` serves it read-only)",
                           s->db_path, s->stored_platform, s->platform, s->db_path);
    if (!s->stored_platform &&
        (rc = cw_store_meta_set(s->store, "platform", s->platform, s->d)) != 0)
        return rc;
    return cw__svc_record_commit_limit(s, ops, s->src.impl, s->d);
}

/* The tagger of the data's platform; the stored stacks re-tagged when the
 * rules changed, and the rules recorded. */
static int prepare_tagging(svc_t *s)
{
    int rc = cw_stacktags_tagger_for(cw_stacktags_platform(s->platform), s->files, s->nfiles,
                                     &s->tagger, s->d);
    if (rc == 0) rc = cw__svc_retag(s, s->d);
    if (rc == 0) rc = cw__svc_record_rules(s, s->files, s->nfiles, s->d);
    return rc;
}

/* The writer thread, then the alert engine that reads what it stores. */
static int start_writer_and_alerts(svc_t *s)
{
    int rc = cw__svc_writer_start(s);
    if (rc != 0) return cw_diag_set(s->d, rc, "cannot start the store writer: %s", cw_strerror(rc));
    if ((rc = cw__svc_heaps_start(s)) != 0) return rc;
    /* A bad alert rule at the start is warned about and the rest load;
     * /api/health names it ("config"). */
    cw_alert_rules_t arules;
    cw_status_config_t c = {.ok = true, .at_ns = cw_plat_wall_ns()};
    if ((rc = cw__svc_alert_rules_load(&s->cfg, &arules, false, &c)) != 0) return oom(s->d, rc);
    cw_status_config_set(&s->status, &c);
    rc = cw__svc_alerts_apply(s, &s->cfg, &arules, s->d);
    cw_alert_rules_free(&arules);
    return rc;
}

/* The profile push (push.h), when profile_push_url is set: its own thread
 * reads what the writer stores. A push that cannot start (https without
 * TLS, out of memory, no thread) stops the start: the operator asked for
 * it. */
static int start_push(svc_t *s)
{
    const cw_config_t *c = &s->cfg;
    if (!c->profile_push_url || !c->profile_push_url[0]) return 0;
    cw_push_opts_t po = {0};
    po.db_path = s->db_path;
    po.url = c->profile_push_url;
    po.period_ns = c->profile_push_period_ns;
    po.labels = c->profile_push_labels;
    po.buffer_bytes = c->profile_push_buffer_bytes;
    po.status = &s->status;
    cw_diag_t d = {{0}};
    int rc = cw_push_start(&po, &s->pusher, &d);
    if (rc != 0) return cw_diag_set(s->d, rc, "profile push: %s", d.msg);
    CW_LOGI("profile push: each %" PRId64 " s period's profiles to %s/ingest",
            po.period_ns / CW_NS_PER_S, c->profile_push_url);
    return 0;
}

/* The event path: source -> pipeline (tracker) -> aggregator -> pipeline
 * (map snapshots) -> writer. The service only wires it; the pipeline does
 * the per-event work and calls back between events (between_events). */
static int build_pipeline(svc_t *s)
{
    int rc = cw_agg_create(CW_NS_PER_S, s->stacks, s->tagger, s->stored_frames, s->stored_stacks,
                           cw_writer_emit, s->writer, &s->agg);
    if (rc != 0) return oom(s->d, rc);
    cw_agg_set_fold(s->agg, s->cfg.fold_lifetime_ns, s->cfg.fold_size_bytes);
    cw_tracker_sink_t sink = cw_agg_sink(s->agg);
    if ((rc = cw_pipeline_create(&sink, s->agg, s->next_proc, &s->pipe)) != 0 ||
        (rc = cw_mapreq_create(&s->maps)) != 0)
        return oom(s->d, rc);
    cw_pipeline_serve_opts_t po = {
        &s->status,     s->maps, &map_policy,    s->stored_end, &cw__svc_reload_flag,
        between_events, s,       cw_writer_emit, s->writer};
    cw_pipeline_serve(s->pipe, &po);
    return 0;
}

/* One run of the open source into the pipeline. 0 with *again when a
 * live source died (closed, tracking ended: tried again later), else the
 * run's end (0 or the error, d filled). */
static int run_source_once(svc_t *s, bool *again)
{
    cw_diag_t sd = {{0}}, *d = s->d;
    const char *name = s->src.ops->name;
    int rc = 0;
    *again = false;
    CW_LOGI("ingesting from %s into %s (stack tags: %s)", s->spec, s->db_path,
            cw_tagger_rules_hash(s->tagger));
    cw_source_sink_t feed = cw_pipeline_source_sink(s->pipe, d);
    if (!atomic_load(&cw__svc_stop_flag))
        rc = cw_source_session_run(&s->src, &feed, s->degrade ? &sd : d);
    if (!s->degrade || cw_pipeline_failed(s->pipe)) {
        if (s->degrade && rc != 0 && !d->msg[0]) *d = sd;
        return rc;
    }
    /* A stop: what the live source said as it ended is no error of the
     * service's (a stop may land while it fails at a retry). */
    if (atomic_load(&cw__svc_stop_flag)) return 0;
    /* The live source died, or its input ended (a session stopped by
     * someone else). */
    char why[sizeof sd.msg + 64];
    if (rc != 0)
        snprintf(why, sizeof why, "%s", sd.msg[0] ? sd.msg : cw_strerror(rc));
    else
        snprintf(why, sizeof why, "its input ended (the session was stopped from outside)");
    rc = end_tracking(s);
    cw_source_session_close(&s->src);
    if (rc != 0) return cw_diag_set(d, rc, "storing the last bucket failed: %s", cw_strerror(rc));
    /* The data ends where tracking ended: the gap starts there. */
    int64_t end = cw_pipeline_last_ts(s->pipe);
    cw__svc_source_failed(s, name, why, end == INT64_MIN ? cw_plat_wall_ns() : end);
    *again = true;
    return 0;
}

/* Runs the source until its end or a stop; a live one that fails or ends
 * is tried again on the backoff schedule while the stored data is served
 * (degraded). */
static int run_source_loop(svc_t *s)
{
    const char *name = s->src.ops->name;
    int rc = 0;
    bool again = true;
    while (again && !atomic_load(&cw__svc_stop_flag)) {
        if (!s->src.impl) {
            cw_diag_t sd = {{0}};
            if (cw__svc_serve_without_source(s, s->backoff.next_ns, true)) break;
            if ((rc = cw_source_session_reopen(&s->src, &sd)) != 0) {
                cw__svc_source_failed(s, name, sd.msg[0] ? sd.msg : cw_strerror(rc),
                                      cw_plat_wall_ns());
                rc = 0;
                continue;
            }
            const char *got = cw_source_session_platform(&s->src);
            if (strcmp(got, s->platform) != 0)
                return cw_diag_set(s->d, CW_EINVAL,
                                   "the %s source gives %s data and %s holds %s data", name, got,
                                   s->db_path, s->platform);
            cw__svc_source_opened(s, name);
        }
        rc = run_source_once(s, &again);
    }
    return rc;
}

/* The end of ingestion: the down time closed, the last figures, every
 * instance still alive ended (tracking ends with this run; their last
 * maps stored; live maps are no more, the stored ones answer), the last
 * bucket stored. rc: the run's result so far; returns the new one. */
static int finish_ingest(svc_t *s, int rc)
{
    /* Stopped while the source was down: the down time ends with the
     * service. */
    if (s->backoff.failures) cw__svc_record_downtime(s, false, cw_plat_wall_ns());
    atomic_store(&s->status.events_ingested, cw_pipeline_events(s->pipe));
    cw__svc_publish_memory(s, true);
    /* The heap traces end with the ingestion: their last seconds ride the
     * last bucket. */
    cw__svc_heaps_end(s);
    int flush_rc = cw_pipeline_end_tracking(s->pipe);
    cw_mapreq_close(s->maps);
    if (flush_rc == 0) flush_rc = cw_agg_flush(s->agg);
    if (rc == 0 && flush_rc != 0)
        rc = cw_diag_set(s->d, flush_rc, "storing the last bucket failed: %s",
                         cw_strerror(flush_rc));
    return rc;
}

/* Everything stored: the writer stopped, the alert engine drained; a
 * replay's data served on until stopped; then every stage stopped and
 * freed. rc: the run's result; returns the final one. */
static int finish(svc_t *s, int rc)
{
    const cw_service_args_t *a = s->args;
    cw_diag_t wd = {{0}};
    if (s->writer) {
        int wrc = cw__svc_writer_stop(s, &wd);
        if (wrc != 0 && rc == 0) {
            rc = wrc;
            *s->d = wd;
        } else if (wrc != 0) {
            CW_LOGE("%s", wd.msg);
        }
    }
    /* Everything is stored: the engine evaluates up to the end of the
     * data (a replay's last instants) before the service leaves or idles. */
    cw_alert_engine_drain(s->alerts);
    if (s->http && rc == 0 && !a->exit_at_end && !atomic_load(&cw__svc_stop_flag)) {
        /* The input has ended (a replay) and every bucket is stored: keep
         * serving it until stopped. SIGHUP still reloads: the rules re-tag
         * the stored stacks. */
        atomic_store(&s->status.ingest_done, true);
        CW_LOGI("end of input: %" PRIu64 " events stored; still serving until stopped "
                "(--exit-at-end to leave at once)",
                s->pipe ? cw_pipeline_events(s->pipe) : 0);
        cw__svc_serve_without_source(s, INT64_MAX, true);
    }
    cw_http_stop(s->http);
    if (s->maps) cw_mapreq_close(s->maps); /* an error path may not have closed it */
    cw__svc_alerts_stop(s);
    cw_heaptraces_stop(s->heaps); /* after HTTP and alerts, which ask it for traces */
    s->heaps = NULL;
    cw_layerfeed_destroy(s->feed);
    s->feed = NULL;
    /* Everything is stored: the last, partial period is pushed; what the
     * store does not take within 5 s is lost (logged). */
    cw_push_stop(s->pusher, 5000000000LL);
    s->pusher = NULL;
    uint64_t events = s->pipe ? cw_pipeline_events(s->pipe) : 0;
    if (rc == 0 && !a->serve)
        CW_LOGI("%s: %" PRIu64 " events stored in %s",
                atomic_load(&cw__svc_stop_flag) ? "stopped" : "end of input", events, s->db_path);
    else if (rc != 0 && events > 0)
        CW_LOGE("the %" PRIu64 " events before the error are stored in %s", events, s->db_path);
    /* What the start made, released in reverse order: a teardown list, alike
     * to other ones in form only. */
    cw_pipeline_destroy(s->pipe);
    cw_mapreq_destroy(s->maps);
    cw_agg_destroy(s->agg);
    atomic_store(&cw__svc_session, NULL);
    cw_source_session_close(&s->src);
    cw_tagger_destroy(s->tagger);
    cw_store_close(s->side);
    cw_store_close(s->store);
    cw_stacks_destroy(s->stacks);
    free(s->stored_platform);
    free(s->files);
    cw_config_free(&s->cfg);
    free(s);
    return rc;
}

/* The composition root: configuration -> store -> source -> stacks and
 * tagger -> writer and alerts -> profile push -> pipeline -> HTTP, then the
 * source's run (with the degraded mode's retries), then the end in reverse
 * order. */
int cw_service_run(const cw_service_args_t *a, cw_diag_t *d)
{
    const cw_source_ops_t *ops = NULL;
    const char *arg = "";
    int rc;
    svc_t *s = calloc(1, sizeof *s);

    if (!s) return cw_diag_set(d, CW_ENOMEM, "out of memory");
    s->args = a;
    s->d = d;
    s->stored_end = INT64_MIN;
    atomic_store(&cw__svc_session, &s->src);
    cw_backoff_init(&s->backoff);
    atomic_store(&cw__svc_stop_flag, false);
    atomic_store(&cw__svc_reload_flag, false);
    cw_plat_heap_mmap_threshold(HEAP_MMAP_THRESHOLD);
    if ((rc = cw__svc_load_config(a, &s->cfg, d)) != 0 ||
        (rc = cw__svc_rules_from(a, &s->cfg, &s->files, &s->nfiles)) != 0)
        return finish(s, rc);
    cw__svc_apply_log_level(&s->cfg);
    s->db_path = a->db ? a->db : s->cfg.db;
    if (a->serve) {
        cw_status_init(&s->status, "none", true, cw_plat_wall_ns(), cw_plat_mono_ns());
        return finish(s, cw__svc_serve_stored(s, &s->cfg, s->db_path, s->files, s->nfiles, d));
    }
    if ((rc = resolve_source(s, &ops, &arg)) != 0 || (rc = open_store(s)) != 0 ||
        (rc = open_source(s, ops, arg)) != 0 || (rc = prepare_tagging(s)) != 0 ||
        (rc = start_writer_and_alerts(s)) != 0 || (rc = start_push(s)) != 0 ||
        (rc = build_pipeline(s)) != 0)
        return finish(s, rc);
    /* HTTP workers read the database through their own connections. A
     * replay's API clock is its data's end, so "the last hour" shows it. */
    rc = cw__svc_http_start(s, &s->cfg, s->db_path, s->files, s->nfiles, false, &s->http, d);
    if (rc != 0) return finish(s, rc);
    if (a->on_running) a->on_running(a->ctx);
    rc = run_source_loop(s);
    return finish(s, finish_ingest(s, rc));
}
