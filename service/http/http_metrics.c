/* http_metrics.c - /metrics in the Prometheus text exposition format 0.0.4.
 *
 * Cardinality is bounded: per-process series exist for the top N
 * processes by outstanding commit (cw_http_opts_t.metrics_top: 20, no
 * option or key changes it), the rest
 * summed into one process="other" series; tags are bounded by the rule
 * set. Label values are made scrape-safe: backslash, quote and newline
 * escaped, other control characters replaced, at most 128 bytes.
 *
 * The figures are cw_store_metrics()'s (query.h): read from the hour tier
 * up to the hour it is complete to and from the raw tier after it
 * (transients: the minute tier), so a scrape costs little however much
 * history is stored; the sums of the closed hours are kept and shared by
 * the workers (cw_store_share, store_query.c), so a scrape reads only the
 * rows after the last closed hour. The counters (committed, decommitted, transient) are
 * sums over what is stored; retention folding old rows into baselines
 * shows up as a counter reset, which rate() and increase() handle.
 * Transient = committed and released within the same (UTC) minute. This
 * file owns the text: the top N, the "other" series, labels.
 *
 * Alerts (docs/ALERTS.md, "API and metrics"): commitwatch_alerts, as
 * Prometheus' ALERTS, is 1 per pending or firing series (alertname,
 * alertstate, severity, process, pid, tag; pid "" unless the rule groups
 * by instance, so two instances of one program stay two series), with
 * the leak score and time to limit of those series, the notification
 * attempts by channel and result (alertdb.h) and the evaluations run.
 * Their cardinality is that of the active series, which the rules bound.
 *
 * The machine's commit and its limit (node_exporter's Committed_AS and
 * CommitLimit) follow the data's machine (alerts.h,
 * CW_COMMIT_LIMIT_META_KEY): a live source's is read from the OS at each
 * scrape; a replay's limit is its trace header's, and its commit the sum
 * of the outstanding bytes stored (the trace's processes); an input that
 * does not tell the limit, and a database served with no source, have
 * neither. The profile push's counters (push.h) exist when it is on. */
#include "http/http_resources.h"

#include <inttypes.h>
#include <math.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "commitwatch/alertdb.h"
#include "commitwatch/alerts.h"
#include "commitwatch/platform.h"
#include "commitwatch/query.h"

/* Escapes a label value into out (len >= 2 * 128 + 1): at most 128 bytes
 * of the input, never cutting a UTF-8 sequence; backslash, quote and
 * newline escaped, other control characters replaced by '_'. */
static const char *label(const char *in, char *out, size_t len)
{
    const unsigned char *p = (const unsigned char *)(in ? in : "");
    size_t o = 0, used = 0;
    while (*p) {
        size_t n = *p >= 0xF0 ? 4 : *p >= 0xE0 ? 3 : *p >= 0xC0 ? 2 : 1;
        if (used + n > 128 || o + 2 * n + 1 > len) break;
        bool bad = (*p >= 0x80 && *p < 0xC0) || *p >= 0xF8;
        for (size_t k = 1; k < n && !bad; k++)
            bad = (p[k] & 0xC0) != 0x80;
        if (bad) n = 1; /* not UTF-8: replaced, Prometheus wants UTF-8 */
        if (n == 1 && (*p == '\\' || *p == '"' || *p == '\n')) {
            out[o++] = '\\';
            out[o++] = *p == '\n' ? 'n' : (char)*p;
        } else if (n == 1 && (bad || *p < 0x20 || *p == 0x7f))
            out[o++] = '_';
        else
            for (size_t k = 0; k < n; k++)
                out[o++] = (char)p[k];
        p += n;
        used += n;
    }
    out[o] = 0;
    return out;
}

/* One sample of a metric without labels, with its HELP and TYPE lines. */
static void metric_u64(cw_buf_t *b, const char *name, const char *type, const char *help,
                       uint64_t v)
{
    cw_buf_printf(b, "# HELP %s %s\n# TYPE %s %s\n%s %" PRIu64 "\n", name, help, name, type, name,
                  v);
}

/* Outstanding bytes by process and tag, top N processes + other. */
static int outstanding(cw__http_req_t *r, const cw_store_metrics_t *m, cw_buf_t *b)
{
    const cw_outstanding_row_t *rows = m->out;
    size_t n = m->nout, nt = 0;
    /* Rows come grouped by process: totals per process. */
    /* Processes by outstanding bytes (key) desc, then id. */
    cw__http_rank_t *tots = calloc(n ? n : 1, sizeof *tots);
    if (!tots) return cw__http_fail(r, 500, "out of memory");
    for (size_t i = 0; i < n; i++) {
        if (!nt || tots[nt - 1].id != rows[i].proc)
            tots[nt++] = (cw__http_rank_t){0, rows[i].proc, 0};
        tots[nt - 1].key += rows[i].bytes;
    }
    qsort(tots, nt, sizeof *tots, cw__http_rank_cmp);
    size_t top = nt < r->ctx->metrics_top ? nt : r->ctx->metrics_top;

    char l1[300], l2[300];
    cw_buf_printf(
        b,
        "# HELP commitwatch_process_outstanding_bytes Committed bytes now outstanding, per "
        "process (top %u by outstanding; the rest as process=\"other\") and stack tag.\n"
        "# TYPE commitwatch_process_outstanding_bytes gauge\n",
        r->ctx->metrics_top);
    /* "other": per tag sums of the processes outside the top. Tags are few. */
    typedef struct otag {
        const char *tag;
        int64_t bytes;
    } otag_t;
    otag_t *other = calloc(n ? n : 1, sizeof *other);
    size_t no = 0;
    if (!other) {
        free(tots);
        return cw__http_fail(r, 500, "out of memory");
    }
    for (size_t i = 0; i < n; i++) {
        bool in_top = false;
        for (size_t k = 0; k < top && !in_top; k++)
            in_top = tots[k].id == rows[i].proc;
        if (in_top) {
            cw_buf_printf(b,
                          "commitwatch_process_outstanding_bytes{process=\"%s\",pid=\"%" PRIu32
                          "\",id=\"%" PRIu32 "\",tag=\"%s\"} %" PRId64 "\n",
                          label(rows[i].name, l1, sizeof l1), rows[i].pid, rows[i].proc,
                          label(rows[i].tag, l2, sizeof l2), rows[i].bytes);
            continue;
        }
        size_t k = 0;
        while (k < no && strcmp(other[k].tag, rows[i].tag) != 0)
            k++;
        if (k == no) other[no++] = (otag_t){rows[i].tag, 0};
        other[k].bytes += rows[i].bytes;
    }
    for (size_t k = 0; k < no; k++)
        cw_buf_printf(
            b,
            "commitwatch_process_outstanding_bytes{process=\"other\",pid=\"\",id=\"\",tag=\"%s\"} "
            "%" PRId64 "\n",
            label(other[k].tag, l2, sizeof l2), other[k].bytes);
    free(other);
    int64_t all = 0;
    for (size_t i = 0; i < nt; i++)
        all += tots[i].key;
    cw_buf_printf(b,
                  "# HELP commitwatch_outstanding_bytes Committed bytes now outstanding, all "
                  "processes.\n# TYPE commitwatch_outstanding_bytes gauge\n"
                  "commitwatch_outstanding_bytes %" PRId64 "\n"
                  "# HELP commitwatch_processes Process instances with outstanding commit.\n"
                  "# TYPE commitwatch_processes gauge\ncommitwatch_processes %zu\n",
                  all, nt);
    free(tots);
    return 0;
}

/* The counters by tag, one family after the other; a family lists the
 * tags that have rows of its kind (commits, or releases). */
static const struct counter {
    const char *name, *help;
    bool releases;
    size_t off; /* of the figure in cw_tag_counters_t */
} counter_families[] = {
    {"commitwatch_committed_bytes_total", "Bytes newly committed, by stack tag.", false,
     offsetof(cw_tag_counters_t, committed_bytes)},
    {"commitwatch_commit_events_total", "Commit events that committed new bytes, by stack tag.",
     false, offsetof(cw_tag_counters_t, commit_events)},
    {"commitwatch_decommitted_bytes_total",
     "Bytes decommitted or released, by the stack tag of the commit that made them.", true,
     offsetof(cw_tag_counters_t, decommitted_bytes)},
    {"commitwatch_transient_bytes_total",
     "Bytes committed and released within the same minute, by stack tag.", true,
     offsetof(cw_tag_counters_t, transient_bytes)},
    {"commitwatch_transient_pieces_total",
     "Pieces committed and released within the same minute, by stack tag.", true,
     offsetof(cw_tag_counters_t, transient_pieces)},
};

/* The records the source dropped or could not pair, by reason, and the
 * corrections from the OS's figures (docs/LINUX.md, "Losses and drift"). */
static void source_losses(const cw_status_t *st, cw_buf_t *b)
{
    cw_buf_printf(b,
                  "# HELP commitwatch_source_records_dropped_total Source records not applied, "
                  "by reason (lost: the kernel's buffers were full; foreign: tasks outside "
                  "this PID namespace; unpaired: a call whose other half was lost; malformed).\n"
                  "# TYPE commitwatch_source_records_dropped_total counter\n");
    const char *why[4] = {"lost", "foreign", "unpaired", "malformed"};
    uint64_t n[4] = {0};
    if (st) {
        n[0] = atomic_load(&st->events_lost);
        n[1] = atomic_load(&st->records_foreign);
        n[2] = atomic_load(&st->records_unpaired);
        n[3] = atomic_load(&st->records_malformed);
    }
    for (int i = 0; i < 4; i++)
        cw_buf_printf(b, "commitwatch_source_records_dropped_total{reason=\"%s\"} %" PRIu64 "\n",
                      why[i], n[i]);
    metric_u64(b, "commitwatch_resyncs_total", "counter",
               "Resynchronisations from the OS's figures after losses.",
               st ? atomic_load(&st->resyncs) : 0);
    metric_u64(b, "commitwatch_corrections_total", "counter",
               "Process corrections the resyncs made.", st ? atomic_load(&st->corrections) : 0);
    metric_u64(b, "commitwatch_corrected_bytes_total", "counter",
               "Bytes the corrections committed and decommitted.",
               st ? atomic_load(&st->corrected_bytes) : 0);
}

static void counters(const cw_store_metrics_t *m, cw_buf_t *b)
{
    char l[300];
    for (size_t f = 0; f < CW_ARRAY_LEN(counter_families); f++) {
        const struct counter *c = &counter_families[f];
        cw_buf_printf(b, "# HELP %s %s\n# TYPE %s counter\n", c->name, c->help, c->name);
        for (size_t i = 0; i < m->ntags; i++) {
            const cw_tag_counters_t *t = &m->tags[i];
            if (!(c->releases ? t->has_releases : t->has_commits)) continue;
            int64_t v = *(const int64_t *)(const void *)((const char *)t + c->off);
            cw_buf_printf(b, "%s{tag=\"%s\"} %" PRId64 "\n", c->name, label(t->tag, l, sizeof l),
                          v);
        }
    }
}

/* The labels of an alert series (without alertstate and severity):
 * alertname, process, pid, tag. */
static const char *alert_labels(const cw_alert_row_t *a, char *out, size_t len)
{
    char l1[300], l2[300], l3[300], pid[16] = "";
    if (a->pid) snprintf(pid, sizeof pid, "%" PRIu32, a->pid);
    snprintf(out, len, "alertname=\"%s\",process=\"%s\",pid=\"%s\",tag=\"%s\"",
             label(a->rule, l1, sizeof l1), label(a->process, l2, sizeof l2), pid,
             label(a->tag, l3, sizeof l3));
    return out;
}

static const char *const alert_state_names[] = {"inactive", "pending", "firing"};
static const char *const alert_severity_names[] = {"none", "warning", "critical"};

/* The alert families; 0 or 500. */
static int alerts(cw__http_req_t *r, cw_buf_t *b)
{
    cw_alert_filter_t f = {.min_state = 1, .severity = -1, .limit = 100000};
    cw_alert_row_t *v = NULL;
    cw_notify_count_t *c = NULL;
    size_t n = 0, nc = 0;
    uint64_t evals = 0;
    cw_diag_t d = {{0}};
    char l[1024], l1[300], l2[300];
    int rc = cw_store_alerts(r->store, &f, &v, &n, &d);
    if (!rc) rc = cw_store_notify_counts(r->store, &c, &nc, &d);
    if (!rc) rc = cw_store_alert_evaluations(r->store, &evals, &d);
    if (rc) {
        cw_alert_rows_free(v, n);
        return rc == CW_ENOMEM ? cw__http_fail(r, 500, "out of memory")
                               : cw__http_fail(r, 500, "query failed: %s", d.msg);
    }
    cw_buf_printf(b, "# HELP commitwatch_alerts Alert series pending or firing (1 each), as "
                     "Prometheus' ALERTS.\n# TYPE commitwatch_alerts gauge\n");
    for (size_t i = 0; i < n; i++) {
        int st = v[i].state, sev = v[i].severity;
        cw_buf_printf(b, "commitwatch_alerts{%s,alertstate=\"%s\",severity=\"%s\"} 1\n",
                      alert_labels(&v[i], l, sizeof l),
                      st >= 0 && st <= 2 ? alert_state_names[st] : "unknown",
                      sev >= 0 && sev <= 2 ? alert_severity_names[sev] : "unknown");
    }
    /* The gauges of the active series, a sample where the figure is finite. */
    static const struct {
        const char *name, *help;
        size_t off;
    } gauges[] = {
        {"commitwatch_alert_leak_score",
         "Leak score (0 to 1) of the pending and firing alert series.",
         offsetof(cw_alert_row_t, leak_score)},
        {"commitwatch_alert_time_to_limit_seconds",
         "Seconds until the pending and firing alert series reach their limit at the median "
         "slope (absent when not growing).",
         offsetof(cw_alert_row_t, ttl_s)},
    };
    for (size_t g = 0; g < CW_ARRAY_LEN(gauges); g++) {
        cw_buf_printf(b, "# HELP %s %s\n# TYPE %s gauge\n", gauges[g].name, gauges[g].help,
                      gauges[g].name);
        for (size_t i = 0; i < n; i++) {
            double x = *(const double *)(const void *)((const char *)&v[i] + gauges[g].off);
            if (isfinite(x))
                cw_buf_printf(b, "%s{%s} %.6g\n", gauges[g].name, alert_labels(&v[i], l, sizeof l),
                              x);
        }
    }
    cw_buf_printf(b, "# HELP commitwatch_alert_notifications_total Alert notification attempts, by "
                     "channel and result (ok, error, dropped).\n"
                     "# TYPE commitwatch_alert_notifications_total counter\n");
    for (size_t i = 0; i < nc; i++)
        cw_buf_printf(
            b, "commitwatch_alert_notifications_total{channel=\"%s\",result=\"%s\"} %" PRIu64 "\n",
            label(c[i].channel, l1, sizeof l1), label(c[i].result, l2, sizeof l2), c[i].count);
    cw_buf_printf(b,
                  "# HELP commitwatch_alert_evaluations_total Alert evaluations run.\n"
                  "# TYPE commitwatch_alert_evaluations_total counter\n"
                  "commitwatch_alert_evaluations_total %" PRIu64 "\n",
                  evals);
    cw_alert_rows_free(v, n);
    cw_notify_counts_free(c, nc);
    return 0;
}

/* commitwatch_machine_commit_bytes and _limit_bytes, when the data's
 * machine is known (above). */
static void machine_commit(cw__http_req_t *r, const cw_store_metrics_t *m, cw_buf_t *b)
{
    const cw_status_t *st = r->ctx->status;
    char *v = NULL;
    cw_diag_t d = {{0}};
    if (cw_store_meta_get(r->store, CW_COMMIT_LIMIT_META_KEY, &v, &d) != 0) return;
    uint64_t limit = 0, used = 0;
    bool known = false;
    if (!v || strcmp(v, "live") == 0) {
        cw_limit_info_t li;
        if (st && !st->no_source && cw_alert_machine_limit(&li) == 0 && li.known) {
            limit = li.limit;
            used = li.used;
            known = true;
        }
    } else if (strcmp(v, "none") != 0) {
        char *end;
        unsigned long long n = strtoull(v, &end, 10);
        if (end > v && !*end && n > 0) {
            limit = n;
            for (size_t i = 0; i < m->nout; i++)
                if (m->out[i].bytes > 0) used += (uint64_t)m->out[i].bytes;
            known = true;
        }
    }
    free(v);
    if (!known) return;
    metric_u64(b, "commitwatch_machine_commit_bytes", "gauge",
               "Commit charged against the machine's commit limit (Linux Committed_AS, Windows "
               "CommitTotal; a replay: its processes' outstanding bytes).",
               used);
    metric_u64(b, "commitwatch_machine_commit_limit_bytes", "gauge",
               "The machine's commit limit (Linux CommitLimit, Windows CommitLimit; a replay: "
               "its trace's).",
               limit);
}

/* The profile push's counters (push.h), when it is on. */
static void profile_push(const cw_status_t *st, cw_buf_t *b)
{
    if (!st || !st->push_on) return;
    metric_u64(b, "commitwatch_profile_push_sent_total", "counter",
               "Profiles the profiling store accepted.", atomic_load(&st->push_sent));
    metric_u64(b, "commitwatch_profile_push_sent_bytes_total", "counter",
               "Bytes of the profiles the profiling store accepted (request bodies).",
               atomic_load(&st->push_sent_bytes));
    metric_u64(b, "commitwatch_profile_push_retries_total", "counter",
               "Pushes that failed and are tried again (no response, HTTP 408, 429, 5xx).",
               atomic_load(&st->push_retries));
    cw_buf_printf(b,
                  "# HELP commitwatch_profile_push_dropped_total Profiles dropped: the oldest "
                  "past profile_push_buffer while the store is down (buffer_full), or refused "
                  "by it (rejected).\n# TYPE commitwatch_profile_push_dropped_total counter\n"
                  "commitwatch_profile_push_dropped_total{reason=\"buffer_full\"} %" PRIu64 "\n"
                  "commitwatch_profile_push_dropped_total{reason=\"rejected\"} %" PRIu64 "\n",
                  atomic_load(&st->push_dropped_full), atomic_load(&st->push_dropped_rejected));
    metric_u64(b, "commitwatch_profile_push_queued_bytes", "gauge",
               "Bytes of the profiles waiting to be pushed.", atomic_load(&st->push_queued_bytes));
}

int cw__http_metrics(cw__http_req_t *r)
{
    const cw_status_t *st = r->ctx->status;
    cw_buf_t b = {0};
    /* A scrape is a few KiB to a few 100 KiB: start at 16 KiB. */
    if (CW_RESERVE(b.p, b.cap, 16384)) b.failed = true;
    char l[300];
    int rc;
    cw_buf_printf(&b,
                  "# HELP commitwatch_build_info The running commitwatch.\n"
                  "# TYPE commitwatch_build_info gauge\n"
                  "commitwatch_build_info{version=\"%s\",source=\"%s\"} 1\n",
                  CW_VERSION, label(st ? st->source : "", l, sizeof l));
    cw_buf_printf(&b,
                  "# HELP commitwatch_uptime_seconds Seconds since the service started.\n"
                  "# TYPE commitwatch_uptime_seconds gauge\ncommitwatch_uptime_seconds %.3f\n",
                  st ? (double)cw_status_uptime_ns(st, cw_plat_mono_ns()) / 1e9 : 0.0);
    if (st && !st->no_source) {
        /* The source's state (docs/RELIABILITY.md, "A source that fails");
         * none when a database is served without a source. */
        cw_source_state_t ss;
        cw_status_source_get(st, &ss);
        cw_buf_printf(&b,
                      "# HELP commitwatch_source_up 1 while the event source is open and "
                      "delivering, 0 while it is down (the service is degraded and retries it).\n"
                      "# TYPE commitwatch_source_up gauge\n"
                      "commitwatch_source_up{source=\"%s\"} %d\n",
                      label(st->source, l, sizeof l), ss.up ? 1 : 0);
    }
    metric_u64(&b, "commitwatch_events_ingested_total", "counter", "Events read from the source.",
               st ? atomic_load(&st->events_ingested) : 0);
    metric_u64(&b, "commitwatch_events_lost_total", "counter", "Events the source reported lost.",
               st ? atomic_load(&st->events_lost) : 0);
    cw_buf_printf(&b,
                  "# HELP commitwatch_drift_corrected_bytes Bytes of drift between the tracker "
                  "and the OS's figures, corrected.\n# TYPE commitwatch_drift_corrected_bytes "
                  "gauge\ncommitwatch_drift_corrected_bytes %" PRId64 "\n",
                  st ? atomic_load(&st->drift_bytes) : 0);
    if (r->ctx->status) { /* Prometheus' own name for it */
        cw_status_config_t c;
        cw_status_config_get(r->ctx->status, &c);
        cw_buf_printf(&b,
                      "# HELP commitwatch_config_last_reload_successful Whether the last load of "
                      "the configuration and its rule files succeeded (/api/health, config).\n"
                      "# TYPE commitwatch_config_last_reload_successful gauge\n"
                      "commitwatch_config_last_reload_successful %d\n",
                      c.ok ? 1 : 0);
    }
    source_losses(st, &b);
    profile_push(st, &b);
    cw_store_metrics_t *m = NULL;
    cw_diag_t d = {{0}};
    if ((rc = cw_store_metrics(r->store, &m, &d))) {
        free(b.p);
        return rc == CW_ENOMEM ? cw__http_fail(r, 500, "out of memory")
                               : cw__http_fail(r, 500, "query failed: %s", d.msg);
    }
    if (m->data_end_ns != INT64_MIN)
        cw_buf_printf(&b,
                      "# HELP commitwatch_last_bucket_end_seconds End of the last stored bucket "
                      "(Unix time).\n# TYPE commitwatch_last_bucket_end_seconds gauge\n"
                      "commitwatch_last_bucket_end_seconds %.3f\n",
                      (double)m->data_end_ns / 1e9);
    cw_buf_printf(&b,
                  "# HELP commitwatch_db_size_bytes Size of the database file and its WAL.\n"
                  "# TYPE commitwatch_db_size_bytes gauge\ncommitwatch_db_size_bytes %" PRIu64 "\n",
                  cw_store_disk_bytes(r->ctx->db_path));
    machine_commit(r, m, &b);
    rc = outstanding(r, m, &b);
    if (!rc) counters(m, &b);
    if (!rc) rc = alerts(r, &b);
    cw_store_metrics_free(m);
    if (rc) {
        free(b.p);
        return rc;
    }
    if (b.failed) {
        free(b.p);
        return cw__http_fail(r, 500, "out of memory");
    }
    cw__http_send(r, 200, "text/plain; version=0.0.4; charset=utf-8", b.p, b.n);
    free(b.p);
    return 0;
}
