/* cw_notify_send - starts a notifier (notify.h) with the options given,
 * submits the notices of a JSON file, stops it, and exits.
 *
 *   cw_notify_send [--db PATH] [--alertmanager URL] [--webhook URL]
 *                  [--exec PATH] [--exec-timeout-ms N] [--log KIND]
 *                  [--log-root DIR] [--rate-limit N] [--retries N]
 *                  [--backoff-ms N] [--repeat-s N] [--resend-s N]
 *                  [--interval-s N] [--external-url URL]
 *                  [--stop-timeout-s N] FILE
 *
 * FILE: a JSON array of submits, each {"sleep_ms": N (before it),
 * "notices": [notice...]}; a notice: {"series", "transition", "resolved",
 * "resend", "severity" ("warning"|"critical"), "rule", "reason", "labels"
 * {}, "annotations" {}, "process", "pid", "tag", "value", "threshold",
 * "leak_score", "ttl_s", "starts_ms", "ends_ms", "ts_ms" (ms since the
 * epoch), "generator_url"}. The fingerprint is computed from the labels
 * (cw_alert_fingerprint); labels are sorted by name as the engine sorts
 * them. Exit 0, or 2 on bad usage or input, 1 when the notifier fails to
 * start (its message on stderr). */
#include <cjson/cJSON.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "commitwatch/notify.h"
#include "commitwatch/platform.h"

static char *slurp(const char *path)
{
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    size_t cap = 1 << 16, n = 0;
    char *s = malloc(cap);
    size_t r;
    while (s && (r = fread(s + n, 1, cap - n - 1, f)) > 0) {
        n += r;
        if (n + 1 == cap) s = realloc(s, cap *= 2);
    }
    fclose(f);
    if (s) s[n] = '\0';
    return s;
}

static const char *str(const cJSON *o, const char *k)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, k);
    return cJSON_IsString(v) ? v->valuestring : NULL;
}

static double num(const cJSON *o, const char *k, double dflt)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, k);
    return cJSON_IsNumber(v) ? v->valuedouble : dflt;
}

static int by_name(const void *a, const void *b)
{
    return strcmp(((const cw_alert_label_t *)a)->name, ((const cw_alert_label_t *)b)->name);
}

static cw_alert_label_t *labels(const cJSON *o, size_t *n)
{
    *n = (size_t)cJSON_GetArraySize(o);
    cw_alert_label_t *v = calloc(*n + 1, sizeof *v);
    size_t i = 0;
    const cJSON *it;
    cJSON_ArrayForEach(it, o)
    {
        v[i].name = it->string;
        v[i].value = cJSON_IsString(it) ? it->valuestring : "";
        i++;
    }
    qsort(v, *n, sizeof *v, by_name);
    return v;
}

static void notice(const cJSON *o, cw_alert_notice_t *a)
{
    memset(a, 0, sizeof *a);
    a->series_id = (uint64_t)num(o, "series", 0);
    a->transition_id = (uint64_t)num(o, "transition", 0);
    a->resolved = cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(o, "resolved"));
    a->resend = cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(o, "resend"));
    const char *sev = str(o, "severity");
    a->severity = sev && strcmp(sev, "critical") == 0 ? CW_SEV_CRITICAL : CW_SEV_WARNING;
    a->rule = str(o, "rule");
    a->reason = str(o, "reason");
    a->labels = labels(cJSON_GetObjectItemCaseSensitive(o, "labels"), &a->nlabels);
    a->annotations = labels(cJSON_GetObjectItemCaseSensitive(o, "annotations"), &a->nannotations);
    a->process = str(o, "process");
    a->pid = (uint32_t)num(o, "pid", 0);
    a->tag = str(o, "tag");
    a->value = num(o, "value", NAN);
    a->threshold = num(o, "threshold", NAN);
    a->leak_score = num(o, "leak_score", NAN);
    a->ttl_s = num(o, "ttl_s", INFINITY);
    int64_t now = cw_plat_wall_ns();
    a->ts_ns = (int64_t)num(o, "ts_ms", (double)(now / 1000000)) * 1000000;
    a->starts_ns = (int64_t)num(o, "starts_ms", (double)(a->ts_ns / 1000000)) * 1000000;
    a->ends_ns =
        a->resolved ? (int64_t)num(o, "ends_ms", (double)(a->ts_ns / 1000000)) * 1000000 : 0;
    a->generator_url = str(o, "generator_url");
    cw_alert_fingerprint(a->labels, a->nlabels, a->fingerprint);
}

int main(int argc, char **argv)
{
    cw_notify_opts_t o = {0};
    o.log = "no";
    double stop_s = 30;
    const char *file = NULL;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (a[0] != '-') {
            file = a;
            continue;
        }
        if (!v) {
            fprintf(stderr, "cw_notify_send: %s needs a value\n", a);
            return 2;
        }
        i++;
        if (!strcmp(a, "--db"))
            o.db_path = v;
        else if (!strcmp(a, "--alertmanager"))
            o.alertmanager_url = v;
        else if (!strcmp(a, "--webhook"))
            o.webhook_url = v;
        else if (!strcmp(a, "--exec"))
            o.exec_path = v;
        else if (!strcmp(a, "--exec-timeout-ms"))
            o.exec_timeout_ns = atoll(v) * 1000000;
        else if (!strcmp(a, "--log"))
            o.log = v;
        else if (!strcmp(a, "--log-root"))
            o.log_root = v;
        else if (!strcmp(a, "--rate-limit"))
            o.rate_limit = strtoull(v, NULL, 10);
        else if (!strcmp(a, "--retries"))
            o.retries = (unsigned)atoi(v);
        else if (!strcmp(a, "--backoff-ms"))
            o.backoff_ns = atoll(v) * 1000000;
        else if (!strcmp(a, "--repeat-s"))
            o.repeat_ns = (int64_t)(atof(v) * 1e9);
        else if (!strcmp(a, "--resend-s"))
            o.resend_ns = (int64_t)(atof(v) * 1e9);
        else if (!strcmp(a, "--interval-s"))
            o.interval_ns = (int64_t)(atof(v) * 1e9);
        else if (!strcmp(a, "--external-url"))
            o.external_url = v;
        else if (!strcmp(a, "--stop-timeout-s"))
            stop_s = atof(v);
        else {
            fprintf(stderr, "cw_notify_send: unknown option %s\n", a);
            return 2;
        }
    }
    char *text = file ? slurp(file) : NULL;
    cJSON *root = text ? cJSON_Parse(text) : NULL;
    free(text);
    if (!cJSON_IsArray(root)) {
        fprintf(stderr, "cw_notify_send: %s: not a JSON array of submits\n",
                file ? file : "(no file)");
        cJSON_Delete(root);
        return 2;
    }
    cw_notifier_t *nf;
    cw_diag_t d = {{0}};
    if (cw_notifier_start(&o, &nf, &d)) {
        fprintf(stderr, "cw_notify_send: %s\n", d.msg);
        cJSON_Delete(root);
        return 1;
    }
    const cJSON *sub;
    cJSON_ArrayForEach(sub, root)
    {
        cw_plat_sleep_ns((int64_t)(num(sub, "sleep_ms", 0) * 1e6));
        const cJSON *ns = cJSON_GetObjectItemCaseSensitive(sub, "notices");
        size_t n = (size_t)cJSON_GetArraySize(ns), i = 0;
        cw_alert_notice_t *v = calloc(n + 1, sizeof *v);
        const cJSON *it;
        cJSON_ArrayForEach(it, ns) notice(it, &v[i++]);
        cw_notifier_submit(nf, v, n);
        for (i = 0; i < n; i++) {
            free((void *)v[i].labels);
            free((void *)v[i].annotations);
        }
        free(v);
    }
    cw_notifier_stop(nf, (int64_t)(stop_s * 1e9));
    cJSON_Delete(root);
    return 0;
}
