/* notify_json.c - what each channel sends: Alertmanager's postable alerts
 * (its v2 API, api/v2/openapi.yaml), the webhook body in Alertmanager's
 * webhook format (version "4", notify/webhook), the exec hook's JSON, and
 * the system log's entry. docs/ALERTS.md, "Delivery", shows each. */
#include <cjson/cJSON.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "commitwatch/common.h"
#include "notify/notify_internal.h"

/* What Alertmanager writes for the zero time.Time (a firing alert's endsAt
 * in its webhook). */
#define ZERO_TIME "0001-01-01T00:00:00Z"

const char *cw__notify_label(const cw_alert_label_t *v, size_t n, const char *name)
{
    for (size_t i = 0; i < n; i++)
        if (strcmp(v[i].name, name) == 0) return v[i].value;
    return NULL;
}

static cJSON *label_object(const cw_alert_label_t *v, size_t n)
{
    cJSON *o = cJSON_CreateObject();
    for (size_t i = 0; o && i < n; i++)
        if (!cJSON_AddStringToObject(o, v[i].name, v[i].value ? v[i].value : "")) {
            cJSON_Delete(o);
            return NULL;
        }
    return o;
}

static bool add_time(cJSON *o, const char *key, int64_t ns)
{
    char t[CW_UTC_TEXT];
    return cJSON_AddStringToObject(o, key, cw_utc_text(ns, 3, t)) != NULL;
}

/* labels, annotations, startsAt: what every alert object has. */
static cJSON *alert_common(const cw_alert_notice_t *a)
{
    cJSON *o = cJSON_CreateObject();
    if (!o) return NULL;
    cJSON *l = label_object(a->labels, a->nlabels),
          *an = label_object(a->annotations, a->nannotations);
    bool ok = l && an;
    if (ok) {
        cJSON_AddItemToObject(o, "labels", l);
        cJSON_AddItemToObject(o, "annotations", an);
    } else {
        cJSON_Delete(l);
        cJSON_Delete(an);
    }
    ok = ok && add_time(o, "startsAt", a->starts_ns);
    if (!ok) {
        cJSON_Delete(o);
        return NULL;
    }
    return o;
}

static char *print(cJSON *o)
{
    char *s = o ? cJSON_PrintUnformatted(o) : NULL;
    cJSON_Delete(o);
    return s;
}

char *cw__notify_am_body(cw_alert_notice_t *const *v, size_t n, int64_t valid_ns)
{
    cJSON *arr = cJSON_CreateArray();
    for (size_t i = 0; arr && i < n; i++) {
        const cw_alert_notice_t *a = v[i];
        cJSON *o = alert_common(a);
        bool ok = o && add_time(o, "endsAt", a->resolved ? a->ends_ns : a->ts_ns + valid_ns);
        if (ok && a->generator_url)
            ok = cJSON_AddStringToObject(o, "generatorURL", a->generator_url) != NULL;
        if (!ok) {
            cJSON_Delete(o);
            cJSON_Delete(arr);
            return NULL;
        }
        cJSON_AddItemToArray(arr, o);
    }
    return print(arr);
}

static cJSON *webhook_alert(const cw_alert_notice_t *a)
{
    cJSON *o = alert_common(a);
    if (!o) return NULL;
    bool ok = cJSON_AddStringToObject(o, "status", a->resolved ? "resolved" : "firing") != NULL;
    if (a->resolved)
        ok = ok && add_time(o, "endsAt", a->ends_ns);
    else
        ok = ok && cJSON_AddStringToObject(o, "endsAt", ZERO_TIME) != NULL;
    ok = ok && cJSON_AddStringToObject(o, "generatorURL", a->generator_url ? a->generator_url : "");
    ok = ok && cJSON_AddStringToObject(o, "fingerprint", a->fingerprint);
    if (!ok) {
        cJSON_Delete(o);
        return NULL;
    }
    return o;
}

char *cw__notify_alert_json(const cw_alert_notice_t *a)
{
    return print(webhook_alert(a));
}

/* Alertmanager's group key for a route that groups by every label
 * (group_by: ['...']) under the root route "{}": `{}:{a="1", b="2"}`,
 * labels sorted by name as model.LabelSet.String() prints them. */
static char *group_key(const cw_alert_notice_t *a)
{
    size_t len = 8;
    for (size_t i = 0; i < a->nlabels; i++)
        len += strlen(a->labels[i].name) + 2 * strlen(a->labels[i].value) + 6;
    char *s = malloc(len), *p = s;
    if (!s) return NULL;
    p += sprintf(p, "{}:{");
    const char *prev = NULL;
    for (size_t k = 0; k < a->nlabels; k++) {
        const cw_alert_label_t *next = NULL;
        for (size_t i = 0; i < a->nlabels; i++)
            if ((!prev || strcmp(a->labels[i].name, prev) > 0) &&
                (!next || strcmp(a->labels[i].name, next->name) < 0))
                next = &a->labels[i];
        if (!next) break;
        p += sprintf(p, "%s%s=\"", k ? ", " : "", next->name);
        for (const char *v = next->value; *v; v++) { /* Go's %q for the common cases */
            if (*v == '"' || *v == '\\') *p++ = '\\';
            *p++ = *v;
        }
        *p++ = '"';
        prev = next->name;
    }
    strcpy(p, "}");
    return s;
}

char *cw__notify_webhook_body(const cw_alert_notice_t *a, const char *external_url)
{
    cJSON *o = cJSON_CreateObject(), *alerts = cJSON_CreateArray(), *al = webhook_alert(a);
    char *gk = group_key(a);
    cJSON *gl = label_object(a->labels, a->nlabels), *cl = label_object(a->labels, a->nlabels);
    cJSON *ca = label_object(a->annotations, a->nannotations);
    bool ok = o && alerts && al && gk && gl && cl && ca;
    if (!ok) {
        cJSON_Delete(o);
        cJSON_Delete(alerts);
        cJSON_Delete(al);
        cJSON_Delete(gl);
        cJSON_Delete(cl);
        cJSON_Delete(ca);
        free(gk);
        return NULL;
    }
    cJSON_AddItemToArray(alerts, al);
    ok = cJSON_AddStringToObject(o, "receiver", "commitwatch") &&
         cJSON_AddStringToObject(o, "status", a->resolved ? "resolved" : "firing");
    cJSON_AddItemToObject(o, "alerts", alerts);
    cJSON_AddItemToObject(o, "groupLabels", gl);
    cJSON_AddItemToObject(o, "commonLabels", cl);
    cJSON_AddItemToObject(o, "commonAnnotations", ca);
    ok = ok && cJSON_AddStringToObject(o, "externalURL", external_url ? external_url : "") &&
         cJSON_AddStringToObject(o, "version", "4") && cJSON_AddStringToObject(o, "groupKey", gk) &&
         cJSON_AddNumberToObject(o, "truncatedAlerts", 0);
    free(gk);
    if (!ok) {
        cJSON_Delete(o);
        return NULL;
    }
    return print(o);
}

/* ---- the system log -------------------------------------------------------- */

static const char *num(char *buf, double v, const char *fmt)
{
    if (!isfinite(v)) return "";
    snprintf(buf, 48, fmt, v);
    return buf;
}

static cw_plat_alert_kind_t kind_of(const cw_alert_notice_t *a)
{
    if (a->resolved) return CW_PLAT_ALERT_RESOLVED;
    if (a->resend) return CW_PLAT_ALERT_REPEAT;
    if (a->reason && strcmp(a->reason, "severity rose") == 0) return CW_PLAT_ALERT_ROSE;
    if (a->reason && strcmp(a->reason, "severity fell") == 0) return CW_PLAT_ALERT_FELL;
    return CW_PLAT_ALERT_FIRING;
}

void cw__notify_log_entry(const cw_alert_notice_t *a, cw__notify_log_entry_t *out)
{
    const cw_alert_label_t *an = a->annotations;
    size_t nan = a->nannotations;
    const char *alertname = cw__notify_label(a->labels, a->nlabels, "alertname");
    if (!alertname) alertname = a->rule ? a->rule : "";
    const char *sev = a->severity == CW_SEV_CRITICAL  ? "critical"
                      : a->severity == CW_SEV_WARNING ? "warning"
                                                      : "none";
    const char *status = a->resolved ? "resolved" : "firing";
    const char *summary = cw__notify_label(an, nan, "summary");
    /* The annotations carry the figures formatted with units; the raw
     * numbers stand in when the engine gave none. */
    const char *value = cw__notify_label(an, nan, "value");
    const char *threshold = cw__notify_label(an, nan, "threshold");
    const char *leak = cw__notify_label(an, nan, "leak_score");
    const char *ttl = cw__notify_label(an, nan, "time_to_limit");
    if (!value) value = num(out->num[0], a->value, "%.6g");
    if (!threshold) threshold = num(out->num[1], a->threshold, "%.6g");
    if (!leak) leak = num(out->num[2], a->leak_score, "%.2f");
    if (!ttl) ttl = num(out->num[3], a->ttl_s, "%.0f");
    const char *pid =
        a->pid ? (snprintf(out->num[4], 48, "%u", (unsigned)a->pid), out->num[4]) : "";
    snprintf(out->num[5], 48, "%llu", (unsigned long long)a->series_id);

    char what[512];
    if (summary)
        cw_strlcpy(what, summary, sizeof what);
    else
        snprintf(what, sizeof what, "%s%s%s%s%s%s: %s (threshold %s)",
                 a->process ? a->process : "the machine", a->pid ? " (pid " : "", pid,
                 a->pid ? ")" : "", a->tag ? ", tag " : "", a->tag ? a->tag : "", value, threshold);
    snprintf(out->message, sizeof out->message, "alert %s %s%s%s: %s", alertname, status,
             a->resolved ? "" : " ", a->resolved ? "" : sev, what);
    out->message[strcspn(out->message, "\n")] = '\0';

    /* Event Log insertion strings %2.. are these values, in this order. */
    const cw_plat_alert_field_t f[] = {
        {"COMMITWATCH_PROCESS", a->process ? a->process : ""},
        {"COMMITWATCH_PID", pid},
        {"COMMITWATCH_TAG", a->tag ? a->tag : ""},
        {"COMMITWATCH_VALUE", value},
        {"COMMITWATCH_THRESHOLD", threshold},
        {"COMMITWATCH_LEAK_SCORE", leak},
        {"COMMITWATCH_TIME_TO_LIMIT", ttl},
        {"COMMITWATCH_ALERTNAME", alertname},
        {"COMMITWATCH_SEVERITY", sev},
        {"COMMITWATCH_STATUS", status},
        {"COMMITWATCH_FINGERPRINT", a->fingerprint},
        {"COMMITWATCH_RULE", a->rule ? a->rule : ""},
        {"COMMITWATCH_REASON", a->reason ? a->reason : (a->resend ? "still firing" : "")},
        {"COMMITWATCH_SERIES", out->num[5]},
    };
    size_t nf = sizeof f / sizeof f[0];
    memcpy(out->f, f, sizeof f);
    out->e.fields = out->f;
    out->e.nfields = nf;
    out->e.message = out->message;
    out->e.kind = kind_of(a);
    out->e.level = a->resolved                      ? CW_PLAT_ALERT_INFO
                   : a->severity == CW_SEV_CRITICAL ? CW_PLAT_ALERT_ERROR
                                                    : CW_PLAT_ALERT_WARNING;
}
