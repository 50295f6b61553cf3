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
 * One service per process: the stop and reload flags are process-wide so
 * that signal handlers and the Windows service control handler can set
 * them. */
#include "commitwatch/service.h"

#include <inttypes.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "commitwatch/alerts.h"
#include "commitwatch/backoff.h"
#include "commitwatch/config.h"
#include "commitwatch/downtime.h"
#include "commitwatch/http.h"
#include "commitwatch/log.h"
#include "commitwatch/map.h"
#include "commitwatch/memstat.h"
#include "commitwatch/notify.h"
#include "commitwatch/pipeline.h"
#include "commitwatch/platform.h"
#include "commitwatch/retag.h"
#include "commitwatch/source.h"
#include "commitwatch/stacktags.h"
#include "commitwatch/status.h"
#include "commitwatch/store.h"

/* Batches that may wait for the writer before the core thread blocks
 * (queued or being stored): what a SIGKILL may lose beside the open
 * bucket, and the writer's largest transaction is half of it
 * (docs/RELIABILITY.md, "Crash consistency", says why 64). A build may
 * set another (-DWRITER_QUEUE=N) to measure the trade. */
#ifndef WRITER_QUEUE
#define WRITER_QUEUE 64
#endif

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

static atomic_bool stop_flag;
static atomic_bool reload_flag;
/* The source's session, for cw_service_stop(); set while the service runs. */
static cw_source_session_t *_Atomic active_session;
/* The running writer, for cw_service_stop() to end a wait for disk space. */
static cw_writer_t *_Atomic active_writer;

void cw_service_stop(void)
{
    atomic_store(&stop_flag, true);
    cw_source_session_stop(atomic_load(&active_session));
    cw_writer_abandon(atomic_load(&active_writer));
}

void cw_service_reload(void)
{
    atomic_store(&reload_flag, true);
}

bool cw_service_stopping(void)
{
    return atomic_load(&stop_flag);
}

/* Everything the core thread owns while the service runs. */
typedef struct svc {
    const cw_service_args_t *args;
    cw_diag_t *d;
    cw_status_t status;   /* the one owner of every status figure */
    const char *platform; /* of the data: the source's */
    cw_store_t *store;    /* read-write; the writer's while it runs */
    cw_stacks_t *stacks;
    cw_tagger_t *tagger;
    cw_source_session_t src; /* the source; closed (src.impl NULL) while down */
    cw_writer_t *writer;
    cw_agg_t *agg;
    cw_pipeline_t *pipe;
    int64_t stored_end; /* end of the last stored bucket, INT64_MIN if none */
    int64_t mem_at;     /* monotonic time of the last memory figures (on_tick) */
    int64_t clock_off;  /* wall - monotonic clock at the last tick (cw_clock_step) */
    cw_alert_engine_t *alerts; /* evaluates the alert rules on its own thread; NULL: none */
    cw_notifier_t *notifier;   /* delivers the engine's notices; NULL: none */
    const char *db_path;       /* the database (the config's or the command line's) */
    cw_config_t cfg;           /* the configuration file, read at the start */
    const char **files;        /* the stack-tag files in force (rules_from) */
    size_t nfiles;
    const char *spec;          /* --source's (or the configuration's, or the live default) */
    bool degrade;              /* a live source: its failures degrade the service */
    char *stored_platform;     /* the database's platform, NULL for a new one */
    uint32_t next_proc;        /* the next instance id (open_store) */
    uint32_t stored_frames, stored_stacks; /* ids already stored: only newer ones are sent */
    cw_http_t *http;
    cw_mapreq_t *maps;  /* HTTP workers' requests for live maps, served by the pipeline */
    /* A live source that fails (docs/RELIABILITY.md, "A source that
     * fails"): its retry schedule and since when it is down (wall). */
    cw_backoff_t backoff;
    int64_t down_since;
    /* The intervals the source was down, as stored (downtime.h), through
     * a side handle of this thread's own (the writer owns the read-write
     * one while it runs); opened at the first failure. */
    cw_store_t *side;
    cw_downtime_t down;
} svc_t;

static int writer_start(svc_t *s);
static int writer_stop(svc_t *s, cw_diag_t *d);

/* ---- configuration ------------------------------------------------------- */

/* The stack-tag rule files in force: the command line's, else the config's.
 * *files (malloc'd array, borrowed strings) is freed by the caller. */
static int rules_from(const cw_service_args_t *a, const cw_config_t *cfg, const char ***files,
                      size_t *n)
{
    const char *const *src = a->nstacktags ? a->stacktags : (const char *const *)cfg->stacktags;
    size_t cnt = a->nstacktags ? a->nstacktags : cfg->nstacktags;
    *files = NULL;
    *n = 0;
    if (!cnt) return 0;
    if (!(*files = malloc(cnt * sizeof **files))) return CW_ENOMEM;
    memcpy(*files, src, cnt * sizeof **files);
    *n = cnt;
    return 0;
}

static void apply_log_level(const cw_config_t *cfg)
{
    cw_log_level_t l;
    if (cw_log_level_parse(cfg->log_level, &l) == 0) cw_log_set_level(l);
}

/* Loads the configuration file (if any) over the defaults. */
static int load_config(const cw_service_args_t *a, cw_config_t *cfg, cw_diag_t *d)
{
    int rc = cw_config_init(cfg);
    if (rc) return cw_diag_set(d, rc, "out of memory");
    if (a->config_path && (rc = cw_config_load(cfg, a->config_path, stderr, d)) != 0) return rc;
    return 0;
}

/* Re-tags the stored stacks when the tagger's rules differ from the
 * database's (the caller owns the store: the writer is not running). */
static int retag(svc_t *s, cw_diag_t *d)
{
    cw_retag_result_t rt;
    int rc = cw_retag_store(s->store, s->tagger, &rt, d);
    if (rc == 0 && rt.ran && rt.stacks > 0)
        CW_LOGI("stack-tag rules %s: re-tagged %" PRIu64 " of %" PRIu64 " stored stacks",
                cw_tagger_rules_hash(s->tagger), rt.changed, rt.stacks);
    return rc;
}

/* Records the rule files in force in the database (meta 'rule_files'),
 * which /api/tags shows: the startup rules, then each reload's. The caller
 * owns the store (the writer is not running). */
static int record_rules(svc_t *s, const char *const *files, size_t n, cw_diag_t *d)
{
    size_t len = 1;
    for (size_t i = 0; i < n; i++)
        len += strlen(files[i]) + 1;
    char *v = malloc(len), *p = v;
    if (!v) return cw_diag_set(d, CW_ENOMEM, "out of memory");
    *p = '\0';
    for (size_t i = 0; i < n; i++)
        p += sprintf(p, "%s%s", i ? "\n" : "", files[i]);
    int rc = cw_store_meta_set(s->store, CW_RULE_FILES_META_KEY, v, d);
    free(v);
    return rc;
}

/* ---- alerts -------------------------------------------------------------- */

/* Records whose commit limit the alerts forecast against for this data
 * (CW_COMMIT_LIMIT_META_KEY): this machine's for a live source, a
 * recorded input's own (a trace header's commit_limit), or none, with one
 * log line saying why. The caller owns the store. */
static int record_commit_limit(svc_t *s, const cw_source_ops_t *ops, void *src, cw_diag_t *d)
{
    char v[32] = "live";
    uint64_t bytes = 0;
    const char *why = "";
    if (ops->commit_limit && ops->commit_limit(src, &bytes, &why) == 0) {
        snprintf(v, sizeof v, "%" PRIu64, bytes);
        CW_LOGI("alerts: time to limit is computed against the recorded machine's commit limit, "
                "%" PRIu64 " bytes (%.1f GiB), never this machine's",
                bytes, (double)bytes / (1 << 30));
    } else if (ops->commit_limit) {
        cw_strlcpy(v, "none", sizeof v);
        CW_LOGI("alerts: %s, and this machine's limit says nothing of the recorded one: rules "
                "against the machine's or a process's commit limit (the default commit_limit) "
                "are not evaluated for this input",
                why);
    }
    return cw_store_meta_set(s->store, CW_COMMIT_LIMIT_META_KEY, v, d);
}

/* ---- the configuration's outcome (status.h, cw_status_config_t) ---- */

/* Fills c from an error message d, naming the file at fault (the one of
 * files[0..n) the message starts with, "FILE:" or "FILE:LINE:") and its
 * line. */
static void config_fault(cw_status_config_t *c, const char *msg, const char *const *files,
                         size_t n)
{
    c->ok = false;
    cw_strlcpy(c->error, msg, sizeof c->error);
    for (size_t i = 0; i < n; i++) {
        size_t len = files[i] ? strlen(files[i]) : 0;
        if (!len || strncmp(msg, files[i], len) != 0 || msg[len] != ':') continue;
        cw_strlcpy(c->file, files[i], sizeof c->file);
        char *end;
        unsigned long line = strtoul(msg + len + 1, &end, 10);
        if (end > msg + len + 1 && *end == ':' && line <= UINT32_MAX) c->line = (uint32_t)line;
        return;
    }
}

/* The alert rules of the configuration: the shipped defaults (unless
 * alert_default_rules = no), then each alert_rules file. At the start
 * (strict false) a bad rule is warned about with file:line and the rest
 * load; a file that cannot be read is logged and skipped; the first such
 * fault goes to *c. On a reload (strict) either is CW_EPARSE (or CW_EIO)
 * with *c saying where, and rs is freed: nothing changes. 0 or CW_ENOMEM. */
static int alert_rules_load(const cw_config_t *cfg, cw_alert_rules_t *rs, bool strict,
                            cw_status_config_t *c)
{
    unsigned nbad = 0;
    cw_diag_t d = {{0}};
    int rc;
    memset(rs, 0, sizeof *rs);
    if (cfg->alert_default_rules &&
        (rc = cw_alert_rules_parse(rs, "(default rules)", cw_alert_default_rules(), stderr, &nbad,
                                   &d)) != 0)
        CW_LOGE("alerts: the default rules: %s", d.msg);
    for (size_t i = 0; i < cfg->nalert_rules; i++) {
        unsigned had = nbad;
        d.msg[0] = '\0';
        const char *file = cfg->alert_rules[i];
        rc = cw_alert_rules_load(rs, file, stderr, &nbad, &d);
        if (rc == CW_ENOMEM) return rc;
        if ((rc != 0 || nbad > had) && c->ok) config_fault(c, d.msg, &file, 1);
        if (rc != 0 && !strict) CW_LOGE("alerts: %s: %s; its rules are not loaded", file, d.msg);
        if ((rc != 0 || nbad > had) && strict) {
            cw_alert_rules_free(rs);
            return rc ? rc : CW_EPARSE;
        }
    }
    if (nbad) CW_LOGW("alerts: %u bad rule(s) refused (see above); %zu loaded", nbad, rs->n);
    return 0;
}

/* The base of the alerts' links: external_url, else http://LISTEN. */
static void external_url(const cw_config_t *cfg, const cw_service_args_t *a, char *buf, size_t n)
{
    if (cfg->external_url) {
        cw_strlcpy(buf, cfg->external_url, n);
        size_t len = strlen(buf);
        while (len > 0 && buf[len - 1] == '/')
            buf[--len] = '\0';
        return;
    }
    snprintf(buf, n, "http://%s", a->listen ? a->listen : cfg->listen ? cfg->listen : "127.0.0.1:8470");
}

/* Starts the alert engine over rules (its own handle on db_path), and
 * first the notifier it hands notices to. Nothing when there are no
 * rules. At the service's start (d given) bad delivery settings (a URL,
 * alert_exec, alert_log: the notifier refuses them, naming the key) stop
 * the start: CW_EINVAL with d set (docs/ALERTS.md, "Delivery"). Any other
 * failure, and any on a reload (d NULL), is logged and the service runs
 * without alerts (or without their delivery). */
static int alerts_start(svc_t *s, const cw_config_t *cfg, const cw_alert_rules_t *rules,
                        cw_diag_t *startd)
{
    cw_diag_t d = {{0}};
    char url[512];
    if (!rules->n) return 0;
    external_url(cfg, s->args, url, sizeof url);
    cw_notify_opts_t no = {0};
    no.db_path = s->db_path;
    no.alertmanager_url = cfg->alertmanager_url;
    no.webhook_url = cfg->webhook_url;
    no.exec_path = cfg->alert_exec;
    no.exec_timeout_ns = cfg->alert_exec_timeout_ns;
    no.log = cfg->alert_log;
    no.repeat_ns = cfg->alert_repeat_ns;
    no.rate_limit = cfg->alert_rate_limit;
    no.retries = (unsigned)cfg->alert_retries;
    no.resend_ns = cfg->alert_resend_ns;
    no.interval_ns = cfg->alert_interval_ns;
    no.external_url = url;
    int nrc;
    if (!s->notifier && (nrc = cw_notifier_start(&no, &s->notifier, &d)) != 0) {
        s->notifier = NULL;
        if (startd && nrc == CW_EINVAL) return cw_diag_set(startd, nrc, "%s", d.msg);
        CW_LOGE("alerts: %s; alerts are evaluated and stored but not delivered", d.msg);
    }
    cw_alert_engine_opts_t eo = {0};
    eo.db_path = s->db_path;
    eo.interval_ns = cfg->alert_interval_ns;
    eo.step_ns = cfg->alert_step_ns;
    eo.on_notices = s->notifier ? cw_notifier_submit : NULL;
    eo.ctx = s->notifier;
    eo.generator_url = url;
    eo.resend_ns = cfg->alert_resend_ns;
    if (cw_alert_engine_start(&eo, rules, &s->alerts, &d) != 0) {
        CW_LOGE("alerts: cannot start the alert engine: %s; alerts are off", d.msg);
        s->alerts = NULL;
    } else {
        int64_t iv = cfg->alert_interval_ns > 0 ? cfg->alert_interval_ns : (10 * CW_NS_PER_S);
        CW_LOGI("alerts: %zu rule(s) in force, evaluated every %" PRId64 " ms", rules->n,
                iv / 1000000);
    }
    return 0;
}

/* The alert rules in force: at start (startd given: bad delivery settings
 * stop it, alerts_start), and on each reload (startd NULL; the running
 * engine keeps the state of unchanged rules; the first rules of a reload
 * start it). rules are borrowed. Logs what fails. */
static int alerts_apply(svc_t *s, const cw_config_t *cfg, const cw_alert_rules_t *rules,
                        cw_diag_t *startd)
{
    cw_diag_t d = {{0}};
    int rc = 0;
    if (!s->alerts)
        rc = alerts_start(s, cfg, rules, startd);
    else if (cw_alert_engine_set_rules(s->alerts, rules, &d) != 0)
        CW_LOGE("alerts: new rules: %s; keeping the running ones", d.msg);
    return rc;
}

static void alerts_stop(svc_t *s)
{
    cw_alert_engine_stop(s->alerts);
    s->alerts = NULL;
    cw_notifier_stop(s->notifier, 5000000000LL);
    s->notifier = NULL;
}

/* A reload: the configuration file, the stack-tag rules and the alert
 * rules. Everything is read and checked first; on any error (a bad line,
 * a file that cannot be read) nothing changes: the running configuration
 * and rules stay, and the log, /api/health ("config") and the reload's
 * reply say which file and line (docs/DESIGN.md, "Reload"). The writer,
 * when it runs, is paused (drained and joined) so this thread may use
 * the store; after the end of a replay (still serving) it no longer runs.
 * Returns 0 or an error that stops the service (the writer could not be
 * restarted). */
static int reload(svc_t *s)
{
    bool writing = s->writer != NULL;
    cw_config_t cfg;
    const char **files = NULL;
    size_t nfiles = 0;
    cw_tagger_t *nt = NULL;
    cw_alert_rules_t arules = {0};
    cw_diag_t d = {{0}};
    cw_status_config_t c = {.ok = true, .reload = true, .at_ns = cw_plat_wall_ns()};
    const char *path = s->args->config_path;
    int rc = 0;

    atomic_fetch_add(&s->status.config_loads_begun, 1);
    atomic_store(&reload_flag, false);
    CW_LOGI("reload requested: reloading %s", path ? path : "the stack-tag rules");
    if (load_config(s->args, &cfg, &d) != 0) {
        config_fault(&c, d.msg, &path, 1);
        goto refused;
    }
    if ((rc = rules_from(s->args, &cfg, &files, &nfiles)) != 0) goto done;
    if (cw_stacktags_tagger_for(cw_stacktags_platform(s->platform), files, nfiles, &nt, &d) != 0) {
        config_fault(&c, d.msg, files, nfiles);
        goto refused;
    }
    if ((rc = alert_rules_load(&cfg, &arules, true, &c)) == CW_ENOMEM) goto done;
    if (rc != 0) {
        rc = 0;
        goto refused;
    }
    rc = writer_stop(s, &d);
    if (rc != 0) {
        cw_diag_set(s->d, rc, "%s", d.msg);
        goto done;
    }
    cw_tagger_t *old = s->tagger;
    s->tagger = nt;
    if (retag(s, &d) != 0) {
        CW_LOGE("reload: re-tagging failed: %s; keeping the running rules", d.msg);
        s->tagger = old;
        config_fault(&c, d.msg, NULL, 0);
    } else {
        nt = old; /* freed below */
        cw_stacks_clear_tags(s->stacks);
        cw_agg_set_tagger(s->agg, s->tagger);
        if (record_rules(s, files, nfiles, &d) != 0)
            CW_LOGE("reload: recording the rule files for /api/tags failed: %s", d.msg);
        apply_log_level(&cfg);
        alerts_apply(s, &cfg, &arules, NULL);
        CW_LOGI("reload: done");
    }
    if (writing && (rc = writer_start(s)) != 0)
        cw_diag_set(s->d, rc, "cannot restart the store writer: %s", cw_strerror(rc));
    goto done;
refused:
    CW_LOGE("reload: %s; keeping the running configuration and rules (nothing changed)", c.error);
done:
    if (rc == CW_ENOMEM) config_fault(&c, "out of memory reading the configuration", NULL, 0);
    cw_status_config_set(&s->status, &c);
    cw_alert_rules_free(&arules);
    cw_tagger_destroy(nt);
    free(files);
    cw_config_free(&cfg);
    return rc;
}

/* ---- what the source calls (core thread) ----------------------------------- */

/* A run killed while its writer was behind: the batches it had queued
 * are in the journal beside the database (journal.c); stored first. */
static int recover_journal(svc_t *s, cw_diag_t *d)
{
    cw_journal_recovered_t r;
    char from[CW_UTC_TEXT], to[CW_UTC_TEXT];
    int rc = cw_journal_recover(s->store, &r, d);
    if (rc != 0) return rc;
    if (r.batches)
        CW_LOGW("the last run into this database did not stop: the %" PRIu32 " closed "
                "bucket(s) it had queued but not stored, %s to %s, are stored now from its "
                "pending-batch journal",
                r.batches, cw_utc_text(r.from_ns, 3, from), cw_utc_text(r.end_ns, 3, to));
    if (r.torn_bytes)
        CW_LOGI("the pending-batch journal ended in %" PRIu64 " bytes of a record cut by the "
                "kill (the bucket being queued then): ignored",
                r.torn_bytes);
    if (r.after_gap)
        CW_LOGW("the pending-batch journal had %" PRIu32 " record(s) past a missing one: not "
                "stored (they may need rows of the missing one)",
                r.after_gap);
    return 0;
}

/* A run that did not stop (killed, power lost) left its instances open:
 * they are ended where its data ends, as a stop would have, before this
 * run stores anything (store_recover.c). */
static int end_open(svc_t *s, cw_diag_t *d)
{
    cw_store_ended_t e;
    int rc = cw_store_end_open(s->store, &e, d);
    if (rc != 0 || !e.instances) return rc;
    char at[CW_UTC_TEXT];
    CW_LOGW("the last run into this database did not stop (killed, crashed or the power lost): "
            "its %" PRIu32 " instance(s) still open are ended where its data ends (%s), as a "
            "stop would have; their %" PRIu64 " outstanding bytes are released there, so this "
            "run's rundown does not count them twice",
            e.instances, cw_utc_text(e.at_ns, 0, at), e.bytes);
    if (e.odd)
        CW_LOGW("%" PRIu64 " of the stored sums of those instances did not add up (more released "
                "than committed): left as they are",
                e.odd);
    s->stored_end = e.end_ns;
    return 0;
}

/* The core thread's figures for /api/health (memstat.h): once a second
 * while ticking, and when the source ends (a replay at full speed does
 * not tick). */
static void publish_memory(svc_t *s, bool now)
{
    int64_t mono = cw_plat_mono_ns();
    if (!now && mono - s->mem_at < CW_NS_PER_S) return;
    s->mem_at = mono;
    cw_mem_set(CW_MEM_TRACKER, (int64_t)cw_tracker_memory(cw_pipeline_tracker(s->pipe)));
    cw_mem_set(CW_MEM_STACKS, (int64_t)cw_stacks_memory(s->stacks));
}

/* A wall-clock step larger than this is noted in the log. */
#define CLOCK_STEP_NOTE_NS CW_NS_PER_S

/* Notes a step of the wall clock in the log. Buckets never follow it: their
 * times are the source's (perf: the monotonic clock, anchored to the wall
 * clock once at start; replay: the trace's, paced by the monotonic clock),
 * so a step reorders and drops nothing; it only leaves the stored times
 * apart from the new wall time until the service restarts. */
static void note_clock_step(svc_t *s)
{
    int64_t step = cw_clock_step(&s->clock_off, cw_plat_wall_ns(), cw_plat_mono_ns(),
                                 CLOCK_STEP_NOTE_NS);
    if (!step) return;
    char at[CW_UTC_TEXT];
    CW_LOGW("the wall clock stepped %s by %.3f s (now %s); buckets keep the source's own clock "
            "(%s), so none is reordered or dropped, and until a restart stored times differ "
            "from the wall clock by that much",
            step > 0 ? "forward" : "back", (double)(step > 0 ? step : -step) / 1e9,
            cw_utc_text(cw_plat_wall_ns(), 0, at),
            s->status.data_clock ? "the input's times, paced by the monotonic clock"
                                 : "the monotonic clock, anchored to the wall clock at start");
}

/* The service's work between two events (cw_pipeline_serve_opts_t.between):
 * at every tick the clock and the memory figures, and a reload when one
 * was asked for. An error (a reload that cannot restart the writer) stops
 * the service. */
static int between_events(void *ctx, bool tick)
{
    svc_t *s = ctx;
    int rc;
    if (tick) note_clock_step(s);
    if (atomic_load(&reload_flag) && (rc = reload(s)) != 0) return rc;
    if (tick) publish_memory(s, false);
    return 0;
}

/* After each batch queued for the writer (cw_writer_on_submit): the alert
 * engine, which reads what is stored, is woken. The engine in force
 * (a reload may replace it) is read at each call. */
static void kick_alerts(void *ctx)
{
    svc_t *s = ctx;
    cw_alert_engine_kick(s->alerts);
}

/* The writer thread's state (cw_writer_on_state): a full disk that it
 * retries, then its end. Logged once each, and shown by /api/health. */
static void on_writer_state(void *ctx, int err, const char *msg)
{
    svc_t *s = ctx;
    if (err) {
        CW_LOGE("%s; ingestion is paused (nothing stored is lost or damaged, the API still "
                "answers) and resumes once the database's disk has room: retrying every second",
                msg);
        atomic_store(&s->status.store_error_since_ns, cw_plat_wall_ns());
    } else {
        CW_LOGI("the database's disk has room again: ingestion resumes");
    }
    atomic_store(&s->status.store_error, err);
}

static int writer_start(svc_t *s)
{
    int rc = cw_writer_start(s->store, WRITER_QUEUE, &s->writer);
    if (rc == 0) {
        cw_journal_t *j;
        cw_diag_t jd = {{0}};
        if (cw_journal_open(s->store, &j, &jd) == 0)
            cw_writer_set_journal(s->writer, j);
        else
            CW_LOGW("%s: running without it, so a kill while the writer is behind loses the "
                    "buckets queued for it", jd.msg);
        cw_writer_on_state(s->writer, on_writer_state, s, 0);
        cw_writer_on_submit(s->writer, kick_alerts, s, s->d);
        /* The pipeline's batches go to the writer straight (restarted by
         * a reload: the new one). */
        if (s->pipe) cw_pipeline_set_emit(s->pipe, cw_writer_emit, s->writer);
        atomic_store(&active_writer, s->writer);
        if (atomic_load(&stop_flag)) cw_writer_abandon(s->writer);
    }
    return rc;
}

static int writer_stop(svc_t *s, cw_diag_t *d)
{
    atomic_store(&active_writer, NULL);
    if (s->pipe) cw_pipeline_set_emit(s->pipe, cw_writer_emit, NULL);
    int rc = cw_writer_stop(s->writer, d);
    s->writer = NULL;
    if (rc == CW_ENOSPC) {
        char why[sizeof d->msg];
        snprintf(why, sizeof why, "%s", d->msg);
        cw_diag_set(d, rc, "%s; stopped before there was room: the buckets not yet stored were "
                    "dropped", why);
    }
    return rc;
}

/* POST /api/reload (an HTTP worker): the same request as SIGHUP, served
 * by the core thread between events. */
/* A configured HTTP timeout in ms for cw_http_opts_t: 0 (the default)
 * for 0, at least 1, and past an hour enough for cw_http_start to refuse. */
static unsigned http_ms(int64_t ns)
{
    if (ns <= 0) return 0;
    int64_t ms = ns / 1000000;
    return ms < 1 ? 1 : ms > 3600001 ? 3600001 : (unsigned)ms;
}

static int http_reload(void *ctx, char *msg, size_t msglen)
{
    (void)ctx;
    cw_service_reload();
    if (msglen) msg[0] = '\0';
    return 0;
}

/* ---- the service ------------------------------------------------------------ */

/* Starts the HTTP server (unless --no-http) over db_path, reading the
 * service's status. read_only (`serve`): no token, so no state-changing
 * request (silences, reload) is served, and no live maps. */
static int http_start(svc_t *s, const cw_config_t *cfg, const char *db_path, const char **files,
                      size_t nfiles, bool read_only, cw_http_t **http, cw_diag_t *d)
{
    const cw_service_args_t *a = s->args;
    *http = NULL;
    if (a->no_http) return 0;
    cw_http_opts_t ho = {0};
    ho.listen = a->listen ? a->listen : cfg->listen;
    ho.db_path = db_path;
    ho.web_root = cfg->web_root;
    ho.token = read_only ? NULL : a->token ? a->token : cfg->token;
    ho.access_log = cfg->access_log;
    ho.threads = cfg->http_threads > CW_HTTP_MAX_THREADS ? CW_HTTP_MAX_THREADS + 1
                                                         : (unsigned)cfg->http_threads;
    ho.request_timeout_ms = http_ms(cfg->http_request_timeout_ns);
    ho.idle_timeout_ms = http_ms(cfg->http_idle_timeout_ns);
    ho.client_connections = cfg->http_client_connections > UINT32_MAX
                                ? UINT32_MAX
                                : (unsigned)cfg->http_client_connections;
    ho.rule_files = files; /* the startup rules */
    ho.nrule_files = (unsigned)nfiles;
    ho.status = &s->status;
    ho.on_reload = read_only ? NULL : http_reload;
    ho.maps = read_only ? NULL : s->maps;
    return cw_http_start(&ho, http, d);
}

/* The service with no source (docs/DESIGN.md, "One path without a
 * source"): it serves what is stored (HTTP workers, the alert engine's
 * thread) while this thread waits, until the monotonic time `until`
 * (INT64_MAX: for good) or a stop request. Reload requests are served
 * meanwhile when `reloads` (a database served read-only has nothing to
 * reload into: they are logged). Returns true when a stop was requested. */
static bool serve_without_source(svc_t *s, int64_t until, bool reloads)
{
    while (!atomic_load(&stop_flag)) {
        if (atomic_load(&reload_flag)) {
            if (!reloads) {
                atomic_store(&reload_flag, false);
                CW_LOGI("reload requested: a database served read-only has nothing to reload");
            } else if (reload(s) != 0) {
                CW_LOGE("reload failed: %s", s->d->msg);
            }
        }
        if (s->pipe && !atomic_load(&s->status.ingest_done)) cw_pipeline_serve_maps(s->pipe);
        int64_t left = until == INT64_MAX ? INT64_MAX : until - cw_plat_mono_ns();
        if (left <= 0) return false;
        cw_plat_sleep_ns(left < 100000000 ? left : 100000000);
    }
    return true;
}

/* Stores that the source is down from `at` (down) or up again at `at`
 * (!down), so the series show a gap there and the "source_down" rule
 * sees it (downtime.h). A failure is logged, and only loses the gap. */
static void record_downtime(svc_t *s, bool down, int64_t at)
{
    cw_diag_t dd = {{0}};
    if (!s->side && cw_store_open_side(s->db_path, &s->side, &dd) != 0) {
        CW_LOGW("recording the source's down time in %s failed: %s", s->db_path, dd.msg);
        s->side = NULL;
        return;
    }
    if (cw_store_downtime_get(s->side, &s->down, &dd) == 0) {
        if (down)
            cw_downtime_begin(&s->down, at);
        else if (!cw_downtime_end(&s->down, at))
            return;
        if (cw_store_downtime_set(s->side, &s->down, &dd) == 0) return;
    }
    CW_LOGW("recording the source's down time in %s failed: %s", s->db_path, dd.msg);
}

/* The live source failed (at open, or while it ran: why says how; the
 * data ends at `at`): the service is degraded (status, /api/health,
 * /metrics, the stored down time) and tries it again on the backoff
 * schedule; the log says so at most once a minute. */
static void source_failed(svc_t *s, const char *name, const char *why, int64_t at)
{
    int64_t mono = cw_plat_mono_ns(), wall = cw_plat_wall_ns();
    bool first = s->backoff.failures == 0;
    if (first) {
        s->down_since = wall;
        record_downtime(s, true, at);
    }
    int64_t next = cw_backoff_fail(&s->backoff, mono);
    cw_status_source_down(&s->status, why, s->down_since, s->backoff.failures,
                          wall + (next - mono));
    if (!cw_backoff_log_due(&s->backoff, mono)) return;
    if (first)
        CW_LOGE("the %s source failed: %s. The service goes on serving the stored data "
                "(degraded: /api/health says why) and tries the source again in %.0f s, then at "
                "doubling intervals up to 5 min",
                name, why, (double)(next - mono) / 1e9);
    else
        CW_LOGE("the %s source still fails after %" PRIu32 " tries: %s; next try in %.0f s "
                "(logged at most once a minute)",
                name, s->backoff.failures, why, (double)(next - mono) / 1e9);
}

/* The source is open: up again after failures (logged), or for the first
 * time. */
static void source_opened(svc_t *s, const char *name)
{
    uint32_t failed = cw_backoff_success(&s->backoff);
    int64_t now = cw_plat_wall_ns();
    cw_status_source_up(&s->status, now);
    if (failed) {
        record_downtime(s, false, now);
        char at[CW_UTC_TEXT];
        CW_LOGI("the %s source works again after %" PRIu32 " failed tries (down since %s): "
                "ingesting",
                name, failed, cw_utc_text(s->down_since, 0, at));
    }
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

/* `commitwatch serve`: the database at db_path, read-only, with no
 * source: the HTTP server over it until stopped. Nothing opens the file
 * for writing (no writer, no alert engine, no journal, no migration; HTTP
 * takes no token). Any platform's database. */
static int serve_stored(svc_t *s, const cw_config_t *cfg, const char *db_path, const char **files,
                        size_t nfiles, cw_diag_t *d)
{
    cw_store_t *ro = NULL;
    char *platform = NULL;
    cw_http_t *http = NULL;
    int rc = cw_store_open_readonly(db_path, &ro, d);
    if (rc == 0) rc = cw_store_meta_get(ro, "platform", &platform, d);
    cw_store_close(ro);
    if (rc != 0) return rc;
    s->status.no_source = true;
    if ((rc = http_start(s, cfg, db_path, files, nfiles, true, &http, d)) != 0) goto out;
    if (s->args->on_running) s->args->on_running(s->args->ctx);
    CW_LOGI("serving %s read-only (%s data), with no source, until stopped", db_path,
            platform ? platform : "no");
    serve_without_source(s, INT64_MAX, false);
    CW_LOGI("stopped");
out:
    cw_http_stop(http);
    free(platform);
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
        (rc = recover_journal(s, s->d)) != 0 ||
        (rc = cw_store_load_state(s->store, s->stacks, &s->next_proc, &s->stored_end, s->d)) != 0 ||
        (rc = end_open(s, s->d)) != 0)
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
        source_failed(s, ops->name, sd.msg[0] ? sd.msg : cw_strerror(rc), cw_plat_wall_ns());
    } else {
        source_opened(s, ops->name);
    }
    if ((rc = cw_store_meta_get(s->store, "platform", &s->stored_platform, s->d)) != 0) return rc;
    /* One database holds the data of one platform: its stacks are tagged
     * with that platform's rules. A live source that did not open gives
     * this machine's data when it does. */
    s->platform = s->src.impl           ? cw_source_session_platform(&s->src)
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
    return record_commit_limit(s, ops, s->src.impl, s->d);
}

/* The tagger of the data's platform; the stored stacks re-tagged when the
 * rules changed, and the rules recorded. */
static int prepare_tagging(svc_t *s)
{
    int rc = cw_stacktags_tagger_for(cw_stacktags_platform(s->platform), s->files, s->nfiles,
                                     &s->tagger, s->d);
    if (rc == 0) rc = retag(s, s->d);
    if (rc == 0) rc = record_rules(s, s->files, s->nfiles, s->d);
    return rc;
}

/* The writer thread, then the alert engine that reads what it stores. */
static int start_writer_and_alerts(svc_t *s)
{
    int rc = writer_start(s);
    if (rc != 0) return cw_diag_set(s->d, rc, "cannot start the store writer: %s", cw_strerror(rc));
    /* A bad alert rule at the start is warned about and the rest load;
     * /api/health names it ("config"). */
    cw_alert_rules_t arules;
    cw_status_config_t c = {.ok = true, .at_ns = cw_plat_wall_ns()};
    if ((rc = alert_rules_load(&s->cfg, &arules, false, &c)) != 0) return oom(s->d, rc);
    cw_status_config_set(&s->status, &c);
    rc = alerts_apply(s, &s->cfg, &arules, s->d);
    cw_alert_rules_free(&arules);
    return rc;
}

/* The event path: source -> pipeline (tracker) -> aggregator -> pipeline
 * (map snapshots) -> writer. The service only wires it; the pipeline does
 * the per-event work and calls back between events (between_events). */
static int build_pipeline(svc_t *s)
{
    int rc = cw_agg_create(CW_NS_PER_S, s->stacks, s->tagger, s->stored_frames,
                           s->stored_stacks, cw_writer_emit, s->writer, &s->agg);
    if (rc != 0) return oom(s->d, rc);
    cw_agg_set_fold(s->agg, s->cfg.fold_lifetime_ns, s->cfg.fold_size_bytes);
    cw_tracker_sink_t sink = cw_agg_sink(s->agg);
    if ((rc = cw_pipeline_create(&sink, s->agg, s->next_proc, &s->pipe)) != 0 ||
        (rc = cw_mapreq_create(&s->maps)) != 0)
        return oom(s->d, rc);
    cw_pipeline_serve_opts_t po = {&s->status,     s->maps, &map_policy,    s->stored_end,
                                   &reload_flag,   between_events, s, cw_writer_emit, s->writer};
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
    if (!atomic_load(&stop_flag)) rc = cw_source_session_run(&s->src, &feed, s->degrade ? &sd : d);
    if (!s->degrade || cw_pipeline_failed(s->pipe)) {
        if (s->degrade && rc != 0 && !d->msg[0]) *d = sd;
        return rc;
    }
    /* A stop: what the live source said as it ended is no error of the
     * service's (a stop may land while it fails at a retry). */
    if (atomic_load(&stop_flag)) return 0;
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
    source_failed(s, name, why, end == INT64_MIN ? cw_plat_wall_ns() : end);
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
    while (again && !atomic_load(&stop_flag)) {
        if (!s->src.impl) {
            cw_diag_t sd = {{0}};
            if (serve_without_source(s, s->backoff.next_ns, true)) break;
            if ((rc = cw_source_session_reopen(&s->src, &sd)) != 0) {
                source_failed(s, name, sd.msg[0] ? sd.msg : cw_strerror(rc), cw_plat_wall_ns());
                rc = 0;
                continue;
            }
            const char *got = cw_source_session_platform(&s->src);
            if (strcmp(got, s->platform) != 0)
                return cw_diag_set(s->d, CW_EINVAL,
                                   "the %s source gives %s data and %s holds %s data", name, got,
                                   s->db_path, s->platform);
            source_opened(s, name);
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
    if (s->backoff.failures) record_downtime(s, false, cw_plat_wall_ns());
    atomic_store(&s->status.events_ingested, cw_pipeline_events(s->pipe));
    publish_memory(s, true);
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
        int wrc = writer_stop(s, &wd);
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
    if (s->http && rc == 0 && !a->exit_at_end && !atomic_load(&stop_flag)) {
        /* The input has ended (a replay) and every bucket is stored: keep
         * serving it until stopped. SIGHUP still reloads: the rules re-tag
         * the stored stacks. */
        atomic_store(&s->status.ingest_done, true);
        CW_LOGI("end of input: %" PRIu64 " events stored; still serving until stopped "
                "(--exit-at-end to leave at once)",
                s->pipe ? cw_pipeline_events(s->pipe) : 0);
        serve_without_source(s, INT64_MAX, true);
    }
    cw_http_stop(s->http);
    if (s->maps) cw_mapreq_close(s->maps); /* an error path may not have closed it */
    alerts_stop(s);
    uint64_t events = s->pipe ? cw_pipeline_events(s->pipe) : 0;
    if (rc == 0 && !a->serve)
        CW_LOGI("%s: %" PRIu64 " events stored in %s",
                atomic_load(&stop_flag) ? "stopped" : "end of input", events, s->db_path);
    else if (rc != 0 && events > 0)
        CW_LOGE("the %" PRIu64 " events before the error are stored in %s", events, s->db_path);
    cw_pipeline_destroy(s->pipe);
    cw_mapreq_destroy(s->maps);
    cw_agg_destroy(s->agg);
    atomic_store(&active_session, NULL);
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
 * tagger -> writer and alerts -> pipeline -> HTTP, then the source's run
 * (with the degraded mode's retries), then the end in reverse order. */
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
    atomic_store(&active_session, &s->src);
    cw_backoff_init(&s->backoff);
    atomic_store(&stop_flag, false);
    atomic_store(&reload_flag, false);
    cw_plat_heap_mmap_threshold(HEAP_MMAP_THRESHOLD);
    if ((rc = load_config(a, &s->cfg, d)) != 0 ||
        (rc = rules_from(a, &s->cfg, &s->files, &s->nfiles)) != 0)
        return finish(s, rc);
    apply_log_level(&s->cfg);
    s->db_path = a->db ? a->db : s->cfg.db;
    if (a->serve) {
        cw_status_init(&s->status, "none", true, cw_plat_wall_ns(), cw_plat_mono_ns());
        return finish(s, serve_stored(s, &s->cfg, s->db_path, s->files, s->nfiles, d));
    }
    if ((rc = resolve_source(s, &ops, &arg)) != 0 || (rc = open_store(s)) != 0 ||
        (rc = open_source(s, ops, arg)) != 0 || (rc = prepare_tagging(s)) != 0 ||
        (rc = start_writer_and_alerts(s)) != 0 || (rc = build_pipeline(s)) != 0)
        return finish(s, rc);
    /* HTTP workers read the database through their own connections. A
     * replay's API clock is its data's end, so "the last hour" shows it. */
    rc = http_start(s, &s->cfg, s->db_path, s->files, s->nfiles, false, &s->http, d);
    if (rc != 0) return finish(s, rc);
    if (a->on_running) a->on_running(a->ctx);
    rc = run_source_loop(s);
    return finish(s, finish_ingest(s, rc));
}
