/* notices.c - what the engine hands to delivery (alerts.h,
 * cw_alert_notice_t): an alert's labels (sorted: alertname, severity,
 * process, pid, tag, the rule's labels), its annotations (summary,
 * description, value, threshold, leak_score, time_to_limit), the
 * Prometheus fingerprint of the labels and the link to the dashboard. */
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "alerts/alerts_internal.h"
#include "commitwatch/common.h"
#include "commitwatch/event.h"

static void fmt_bytes(double v, char *buf, size_t n, const char *suffix)
{
    static const char *const u[] = {"B", "KiB", "MiB", "GiB", "TiB", "PiB"};
    double a = fabs(v);
    size_t k = 0;
    while (a >= 1024 && k + 1 < CW_ARRAY_LEN(u)) {
        a /= 1024;
        v /= 1024;
        k++;
    }
    snprintf(buf, n, k ? "%.1f %s%s" : "%.0f %s%s", v, u[k], suffix);
}

static void fmt_secs(double s, char *buf, size_t n)
{
    if (isnan(s))
        snprintf(buf, n, "unknown");
    else if (isinf(s))
        snprintf(buf, n, "never");
    else if (s >= 86400)
        snprintf(buf, n, "%.1fd", s / 86400);
    else if (s >= 3600)
        snprintf(buf, n, "%.1fh", s / 3600);
    else if (s >= 60)
        snprintf(buf, n, "%.1fm", s / 60);
    else
        snprintf(buf, n, "%.0fs", s);
}

void cw__alert_format(const cw_alert_rule_t *r, double v, char *buf, size_t n)
{
    if (isnan(v)) {
        snprintf(buf, n, "unknown");
        return;
    }
    switch (r->metric) {
    case CW_AM_IMPACTING_RATE:
        fmt_bytes(v, buf, n, "/h");
        break;
    case CW_AM_OUTSTANDING:
        fmt_bytes(v, buf, n, "");
        break;
    case CW_AM_TRANSIENT_RATE:
        if (r->count_unit)
            snprintf(buf, n, "%.0f/h", v);
        else
            fmt_bytes(v, buf, n, "/h");
        break;
    case CW_AM_LEAK_SCORE:
        snprintf(buf, n, "%.2f", v);
        break;
    case CW_AM_TIME_TO_LIMIT:
        fmt_secs(v, buf, n);
        break;
    case CW_AM_SOURCE_DOWN:
        snprintf(buf, n, "%s", v >= 1 ? "down" : "up");
        break;
    }
}

static const char *metric_name(cw_alert_metric_t m)
{
    static const char *const names[] = {"impacting rate", "outstanding", "transient rate",
                                        "leak score", "time to limit", "source down"};
    return (size_t)m < CW_ARRAY_LEN(names) ? names[m] : "value";
}

static int by_name(const void *a, const void *b)
{
    return strcmp(((const cw_alert_label_t *)a)->name, ((const cw_alert_label_t *)b)->name);
}

size_t cw__alert_labels(const cw_alert_rule_t *r, const cw__astate_t *st, cw_alert_severity_t sev,
                        cw_alert_label_t *v, char buf[32])
{
    size_t n = 0;
    v[n++] = (cw_alert_label_t){"alertname", r->name};
    v[n++] = (cw_alert_label_t){"severity", (char *)cw_alert_severity_name(sev)};
    if (st->process) v[n++] = (cw_alert_label_t){"process", st->process};
    if (st->pid) {
        snprintf(buf, 32, "%" PRIu32, st->pid);
        v[n++] = (cw_alert_label_t){"pid", buf};
    }
    if (st->tag) v[n++] = (cw_alert_label_t){"tag", st->tag};
    size_t fixed = n;
    for (size_t i = 0; i < r->nlabels; i++) {
        bool dup = false;
        for (size_t k = 0; k < fixed; k++)
            dup |= strcmp(v[k].name, r->labels[i].name) == 0;
        if (!dup) v[n++] = r->labels[i];
    }
    qsort(v, n, sizeof *v, by_name);
    return n;
}

/* The summary: the rule's template with {process} {pid} {tag} {value}
 * {threshold} filled, or a generated sentence. */
static char *summary(const cw_alert_rule_t *r, const cw__astate_t *st, const char *val,
                     const char *thr)
{
    char pid[16];
    snprintf(pid, sizeof pid, "%" PRIu32, st->pid);
    const char *proc = st->process ? st->process : "machine", *tag = st->tag ? st->tag : "all tags";
    cw_buf_t b = {0};
    static const char *const keys[] = {"{process}", "{pid}", "{tag}", "{value}", "{threshold}"};
    const char *vals[] = {proc, pid, tag, val, thr};
    if (!r->summary) {
        char tmp[512];
        int k = snprintf(tmp, sizeof tmp, "%s%s%s%s, %s: %s %s (threshold %s%s)", proc,
                         st->pid ? " (pid " : "", st->pid ? pid : "", st->pid ? ")" : "", tag,
                         metric_name(r->metric), val, r->below ? "< " : "", thr);
        cw_buf_put(&b, tmp, (size_t)k < sizeof tmp ? (size_t)k : sizeof tmp - 1);
    } else {
        for (const char *s = r->summary; *s;) {
            size_t k = 0;
            while (k < CW_ARRAY_LEN(keys) && strncmp(s, keys[k], strlen(keys[k])) != 0)
                k++;
            if (k < CW_ARRAY_LEN(keys)) {
                cw_buf_put(&b, vals[k], strlen(vals[k]));
                s += strlen(keys[k]);
            } else {
                cw_buf_put(&b, s++, 1);
            }
        }
    }
    if (!b.p) cw_buf_put(&b, "", 0);
    if (b.failed) free(b.p);
    return b.failed ? NULL : b.p;
}

static void notice_free(cw_alert_notice_t *n)
{
    for (size_t i = 0; i < n->nlabels; i++)
        free(n->labels[i].value);
    free((void *)n->labels);
    for (size_t i = 0; i < n->nannotations; i++)
        free(n->annotations[i].value);
    free((void *)n->annotations);
    free((void *)n->generator_url);
}

int cw__notices_add(cw__notices_t *ns, const cw_alert_rule_t *r, const cw__astate_t *st,
                    const cw_alert_transition_t *tr, int64_t tr_id, int64_t ts,
                    const char *generator_url)
{
    if (CW_RESERVE(ns->v, ns->cap, ns->n + 1)) return CW_ENOMEM;
    cw_alert_notice_t *n = &ns->v[ns->n];
    memset(n, 0, sizeof *n);
    bool resolved = tr && tr->to == CW_AS_INACTIVE;
    cw_alert_severity_t sev = tr ? tr->severity : st->sm.severity;
    double value = tr ? tr->value : st->value, thr = tr ? tr->threshold : st->threshold;
    double leak = tr ? tr->leak_score : st->leak, ttl = tr ? tr->ttl_s : st->ttl;
    n->series_id = (uint64_t)st->row_id;
    n->transition_id = (uint64_t)tr_id;
    n->resolved = resolved;
    n->resend = !tr;
    n->severity = sev;
    n->rule = r->name;
    n->reason = tr ? tr->reason : NULL;
    n->process = st->process;
    n->pid = st->pid;
    n->tag = st->tag;
    n->value = value;
    n->threshold = thr;
    n->leak_score = leak;
    n->ttl_s = ttl;
    n->ts_ns = ts;
    n->starts_ns = st->sm.firing_since != CW_TS_NEVER ? st->sm.firing_since : ts;
    n->ends_ns = resolved ? ts : 0;

    char pidbuf[32];
    cw_alert_label_t lab[8 + 64];
    size_t nl = cw__alert_labels(r, st, sev, lab, pidbuf);
    if (nl > CW_ARRAY_LEN(lab)) nl = CW_ARRAY_LEN(lab);
    cw_alert_label_t *labels = calloc(nl, sizeof *labels);
    cw_alert_label_t *ann = calloc(7, sizeof *ann);
    n->labels = labels;
    n->annotations = ann;
    int err = labels && ann ? 0 : CW_ENOMEM;
    for (size_t i = 0; !err && i < nl; i++, n->nlabels++) {
        labels[i].name = lab[i].name; /* static or the rule's: borrowed */
        if (!(labels[i].value = cw_strdup(lab[i].value))) err = CW_ENOMEM;
    }
    if (!err) cw_alert_fingerprint(labels, nl, n->fingerprint);
    char val[64], th[64], lk[32], tl[32], desc[512];
    cw__alert_format(r, value, val, sizeof val);
    cw__alert_format(r, thr, th, sizeof th);
    if (isnan(leak))
        snprintf(lk, sizeof lk, "unknown");
    else
        snprintf(lk, sizeof lk, "%.2f", leak);
    fmt_secs(ttl, tl, sizeof tl);
    snprintf(desc, sizeof desc,
             "Rule %s (%s %s): %s is %s, threshold %s%s; leak score %s, time to limit %s%s%s.",
             r->name, r->file ? r->file : "?", st->key ? st->key : "", metric_name(r->metric), val,
             r->below ? "< " : "", th, lk, tl, resolved ? "; resolved: " : "",
             resolved && tr->reason ? tr->reason : "");
    /* The incident capsule's link (heap_trace): the traces this alert
     * started, with their reports; sorted among the others by name. */
    char *heap = NULL;
    if (r->heap_trace_ns && generator_url && *generator_url) {
        size_t len = strlen(generator_url) + 64;
        if ((heap = malloc(len)))
            snprintf(heap, len, "%s/api/heap-traces?alert=%" PRId64, generator_url, st->row_id);
        else
            err = CW_ENOMEM;
    }
    const char *names[7] = {"description", "heap_report",   "leak_score", "summary",
                            "threshold",   "time_to_limit", "value"};
    char *vals[7] = {cw_strdup(desc), heap,          cw_strdup(lk), summary(r, st, val, th),
                     cw_strdup(th),   cw_strdup(tl), cw_strdup(val)};
    for (size_t i = 0; i < 7; i++) {
        if (i == 1 && !heap) continue;
        if (!err && ann) {
            ann[n->nannotations++] = (cw_alert_label_t){(char *)names[i], vals[i]};
            if (!vals[i]) err = CW_ENOMEM;
        } else {
            free(vals[i]);
        }
    }
    if (!err && generator_url && *generator_url) {
        size_t len = strlen(generator_url) + 48;
        char *u = malloc(len);
        if (u) snprintf(u, len, "%s/#/alerts/%" PRId64, generator_url, st->row_id);
        n->generator_url = u;
        if (!u) err = CW_ENOMEM;
    }
    if (err) {
        notice_free(n);
        return err;
    }
    ns->n++;
    return 0;
}

void cw__notices_clear(cw__notices_t *ns)
{
    for (size_t i = 0; i < ns->n; i++)
        notice_free(&ns->v[i]);
    ns->n = 0;
}

void cw__notices_free(cw__notices_t *ns)
{
    cw__notices_clear(ns);
    free(ns->v);
    memset(ns, 0, sizeof *ns);
}
