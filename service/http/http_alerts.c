/* http_alerts.c - the alert resources of the API (docs/ALERTS.md, "API and
 * metrics"): alert series (list with filters, one with its transitions,
 * leak-score components and forecast), the transitions of all series,
 * the rules in force and a backtest of one over stored history, silences
 * (list; create and expire with the token), and POST /api/reload.
 *
 * Reads go through the worker's read-only store (alertdb.h). A silence is
 * written through a short-lived side handle (cw_store_open_side) on the
 * service's database: the engine and the writer have their own handles,
 * WAL and the busy timeout serialise the short transactions. A backtest
 * re-parses the rule's stored text (the rules in force, as the engine
 * recorded them) and runs the engine's evaluation (cw_alert_backtest) on
 * the worker's handle, bounded in window and evaluations so one request
 * cannot hold a worker for long. */
#include "http/http_resources.h"

#include <cjson/cJSON.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "commitwatch/alertdb.h"
#include "commitwatch/common.h"
#include "commitwatch/alerts.h"
#include "commitwatch/event.h"
#include "commitwatch/platform.h"

/* A backtest covers at most this window and this many evaluations. */
#define BACKTEST_MAX_WINDOW_NS (7 * 86400 * CW_NS_PER_S)
#define BACKTEST_MAX_EVALS 20000
#define BACKTEST_MIN_INTERVAL_NS (10 * CW_NS_PER_S)
#define MAX_MATCHERS 32

static const char *const state_names[] = {"inactive", "pending", "firing"};
static const char *const severity_names[] = {"none", "warning", "critical"};

static int oom(cw__http_req_t *r)
{
    return cw__http_fail(r, 500, "out of memory while building the response");
}

static int dbfail(cw__http_req_t *r, int rc, const cw_diag_t *d)
{
    if (rc == CW_ENOMEM) return oom(r);
    return cw__http_fail(r, 500, "query failed: %s", d->msg[0] ? d->msg : cw_strerror(rc));
}

static const char *state_name(int s)
{
    return s >= 0 && s <= 2 ? state_names[s] : "unknown";
}

static const char *severity_name(int s)
{
    return s >= 0 && s <= 2 ? severity_names[s] : "unknown";
}

/* Index of s in names[0..n), or -1. */
static int name_index(const char *const *names, int n, const char *s)
{
    for (int i = 0; i < n; i++)
        if (strcmp(names[i], s) == 0) return i;
    return -1;
}

/* ---- JSON pieces ------------------------------------------------------------ */

/* A number, or null when it is NAN or infinite (JSON has neither). */
static cJSON *add_num(cJSON *o, const char *name, double v)
{
    return isfinite(v) ? cJSON_AddNumberToObject(o, name, v) : cJSON_AddNullToObject(o, name);
}

static cJSON *add_str(cJSON *o, const char *name, const char *v)
{
    return v ? cJSON_AddStringToObject(o, name, v) : cJSON_AddNullToObject(o, name);
}

static cJSON *add_time(cJSON *o, const char *name, int64_t t)
{
    return t == INT64_MIN || t == INT64_MAX ? cJSON_AddNullToObject(o, name)
                                            : cw__json_i64(o, name, t);
}

/* The parsed JSON of a stored detail text, or NULL (none, or not JSON). */
static cJSON *detail_json(const char *detail)
{
    return detail ? cJSON_Parse(detail) : NULL;
}

/* Moves detail's member name (when present) into o as name2. */
static void lift(cJSON *o, cJSON *detail, const char *name, const char *name2)
{
    cJSON *x = detail ? cJSON_DetachItemFromObjectCaseSensitive(detail, name) : NULL;
    if (x) cJSON_AddItemToObject(o, name2, x);
}

/* A series row as the API shows it; with_detail adds the stored detail
 * (leak-score components, forecast, labels) as objects of their own. */
static cJSON *alert_json(const cw_alert_row_t *a, bool with_detail)
{
    cJSON *o = cJSON_CreateObject();
    bool ok = o && cw__json_i64(o, "id", a->id) && add_str(o, "rule", a->rule) &&
              add_str(o, "key", a->key) && add_str(o, "process", a->process) &&
              (a->proc ? cw__json_u64(o, "proc", a->proc) : cJSON_AddNullToObject(o, "proc")) &&
              (a->pid ? cw__json_u64(o, "pid", a->pid) : cJSON_AddNullToObject(o, "pid")) &&
              add_str(o, "tag", a->tag) &&
              cJSON_AddStringToObject(o, "state", state_name(a->state)) &&
              cJSON_AddStringToObject(o, "severity", severity_name(a->severity)) &&
              add_time(o, "active_since_ns", a->active_since) &&
              add_time(o, "firing_since_ns", a->firing_since) &&
              add_time(o, "false_since_ns", a->false_since) &&
              add_time(o, "last_sent_ns", a->last_sent_ns) &&
              cw__json_i64(o, "updated_ns", a->updated_ns) && add_num(o, "value", a->value) &&
              add_num(o, "threshold", a->threshold) && add_num(o, "leak_score", a->leak_score) &&
              add_num(o, "time_to_limit_s", a->ttl_s);
    cJSON *det = detail_json(a->detail);
    if (ok) {
        /* Labels and summary always; the rest on the detail view. */
        lift(o, det, "labels", "labels");
        lift(o, det, "summary", "summary");
        if (with_detail) {
            lift(o, det, "leak", "leak_score_components");
            lift(o, det, "forecast", "forecast");
            lift(o, det, "values", "values");
            if (det) cJSON_AddItemToObject(o, "detail", det);
            det = NULL;
        }
    }
    cJSON_Delete(det);
    if (!ok) {
        cJSON_Delete(o);
        return NULL;
    }
    return o;
}

static cJSON *tr_json(const cw_alert_tr_row_t *t)
{
    cJSON *o = cJSON_CreateObject();
    bool ok = o && cw__json_i64(o, "id", t->id) && cw__json_i64(o, "series", t->series) &&
              cw__json_i64(o, "ts_ns", t->ts_ns) &&
              cJSON_AddStringToObject(o, "from", state_name(t->from_state)) &&
              cJSON_AddStringToObject(o, "to", state_name(t->to_state)) &&
              cJSON_AddStringToObject(o, "severity", severity_name(t->severity)) &&
              add_num(o, "value", t->value) && add_num(o, "threshold", t->threshold) &&
              add_num(o, "leak_score", t->leak_score) && add_num(o, "time_to_limit_s", t->ttl_s) &&
              add_str(o, "reason", t->reason) && cJSON_AddBoolToObject(o, "silenced", t->silenced);
    if (ok && t->detail) {
        cJSON *det = detail_json(t->detail);
        if (det) cJSON_AddItemToObject(o, "detail", det);
    }
    if (!ok) {
        cJSON_Delete(o);
        return NULL;
    }
    return o;
}

/* Evaluation progress, added to the alert listings. */
static bool add_progress(cw__http_req_t *r, cJSON *o)
{
    int64_t ev = CW_TS_NEVER;
    uint64_t n = 0;
    cw_store_alert_evaluated(r->store, &ev, NULL);
    cw_store_alert_evaluations(r->store, &n, NULL);
    return add_time(o, "evaluated_ns", ev) && cw__json_u64(o, "evaluations", n);
}

/* ---- GET /api/alerts -------------------------------------------------------- */

int cw__http_alerts(cw__http_req_t *r)
{
    cw_alert_filter_t f = {.min_state = 1, .severity = -1, .limit = 1000};
    const char *s;
    int rc;
    uint64_t limit = 1000;
    if ((s = cw__http_param(r, "state")) && strcmp(s, "active") != 0) {
        int k = name_index(state_names, 3, s);
        if (strcmp(s, "all") == 0)
            f.min_state = 0;
        else if (k < 0)
            return cw__http_fail(r, 400,
                                 "state: '%s' is not one of active (pending and firing, the "
                                 "default), pending, firing, inactive, all",
                                 s);
        else
            f = (cw_alert_filter_t){.min_state = k, .state_exact = true, .severity = -1};
    }
    if ((s = cw__http_param(r, "severity")) && (f.severity = name_index(severity_names, 3, s)) < 0)
        return cw__http_fail(r, 400, "severity: '%s' is not one of warning, critical, none", s);
    f.rule = cw__http_param(r, "rule");
    f.process = cw__http_param(r, "process");
    f.tag = cw__http_param(r, "tag");
    if ((s = cw__http_param(r, "limit")) &&
        (rc = cw__http_parse_uint(r, "limit", s, 1, 100000, &limit)))
        return rc;
    f.limit = (size_t)limit;

    cw_alert_row_t *v = NULL;
    size_t n = 0;
    cw_diag_t d = {{0}};
    if ((rc = cw_store_alerts(r->store, &f, &v, &n, &d))) return dbfail(r, rc, &d);
    cJSON *root = cJSON_CreateObject(), *arr = NULL;
    bool ok = root && add_progress(r, root) && cw__json_u64(root, "total", n) &&
              (arr = cJSON_AddArrayToObject(root, "alerts")) != NULL;
    for (size_t i = 0; ok && i < n; i++) {
        cJSON *a = alert_json(&v[i], false);
        ok = a && cJSON_AddItemToArray(arr, a);
    }
    rc = ok ? cw__http_send_json(r, root) : oom(r);
    cJSON_Delete(root);
    cw_alert_rows_free(v, n);
    return rc;
}

/* ---- GET /api/alerts/{id} ------------------------------------------------------ */

int cw__http_alert(cw__http_req_t *r, uint32_t id)
{
    cw_alert_row_t a;
    cw_alert_tr_row_t *tv = NULL;
    size_t n = 0;
    cw_diag_t d = {{0}};
    int rc = cw_store_alert_get(r->store, id, &a, &d);
    if (rc == CW_ENOENT) return cw__http_fail(r, 404, "id: no alert series %" PRIu32, id);
    if (rc) return dbfail(r, rc, &d);
    if ((rc = cw_store_alert_transitions(r->store, id, INT64_MIN, INT64_MAX, 1000, &tv, &n, &d))) {
        cw_alert_row_clear(&a);
        return dbfail(r, rc, &d);
    }
    cJSON *root = cJSON_CreateObject(), *aj = alert_json(&a, true), *arr = NULL;
    bool ok = root && aj && cJSON_AddItemToObject(root, "alert", aj);
    if (!ok) cJSON_Delete(aj);
    ok = ok && (arr = cJSON_AddArrayToObject(root, "transitions")) != NULL;
    for (size_t i = 0; ok && i < n; i++) {
        cJSON *t = tr_json(&tv[i]);
        ok = t && cJSON_AddItemToArray(arr, t);
    }
    rc = ok ? cw__http_send_json(r, root) : oom(r);
    cJSON_Delete(root);
    cw_alert_tr_rows_free(tv, n);
    cw_alert_row_clear(&a);
    return rc;
}

/* ---- GET /api/alert-transitions -------------------------------------------- */

int cw__http_alert_transitions(cw__http_req_t *r)
{
    int64_t from = INT64_MIN, to = INT64_MAX;
    uint64_t limit = 200;
    const char *s;
    int rc;
    if ((s = cw__http_param(r, "from")) && (rc = cw__http_parse_time(r, "from", s, &from)))
        return rc;
    if ((s = cw__http_param(r, "to")) && (rc = cw__http_parse_time(r, "to", s, &to))) return rc;
    if (from >= to)
        return cw__http_fail(r, 400, "from: must be before to (windows are [from, to))");
    if ((s = cw__http_param(r, "limit")) &&
        (rc = cw__http_parse_uint(r, "limit", s, 1, 10000, &limit)))
        return rc;
    cw_alert_tr_row_t *tv = NULL;
    size_t n = 0;
    cw_diag_t d = {{0}};
    if ((rc = cw_store_alert_transitions(r->store, 0, from, to, (size_t)limit, &tv, &n, &d)))
        return dbfail(r, rc, &d);
    cJSON *root = cJSON_CreateObject(), *arr = NULL;
    bool ok = root && (arr = cJSON_AddArrayToObject(root, "transitions")) != NULL;
    /* Each with its series' rule, process and tag: transitions come newest
     * first, grouped by few series, so the last series read is reused. */
    cw_alert_row_t a = {0};
    for (size_t i = 0; ok && i < n; i++) {
        cJSON *t = tr_json(&tv[i]);
        ok = t && cJSON_AddItemToArray(arr, t);
        if (ok && a.id != tv[i].series) {
            cw_alert_row_clear(&a);
            if ((rc = cw_store_alert_get(r->store, tv[i].series, &a, &d)) && rc != CW_ENOENT) break;
            rc = 0;
        }
        ok = ok && add_str(t, "rule", a.rule) && add_str(t, "process", a.process) &&
             (a.pid ? cw__json_u64(t, "pid", a.pid) : cJSON_AddNullToObject(t, "pid")) &&
             add_str(t, "tag", a.tag);
    }
    cw_alert_row_clear(&a);
    if (rc)
        rc = dbfail(r, rc, &d);
    else
        rc = ok ? cw__http_send_json(r, root) : oom(r);
    cJSON_Delete(root);
    cw_alert_tr_rows_free(tv, n);
    return rc;
}

/* ---- GET /api/alert-rules ------------------------------------------------------ */

/* The rule's `key = value` lines (after its [rule NAME] line; comments
 * and blank lines skipped) as an object. */
static cJSON *rule_fields(const char *text)
{
    cJSON *o = cJSON_CreateObject();
    const char *p = text ? text : "";
    while (o && *p) {
        const char *e = strchr(p, '\n'), *end = e ? e : p + strlen(p);
        while (p < end && (*p == ' ' || *p == '\t'))
            p++;
        const char *eq = memchr(p, '=', (size_t)(end - p));
        if (eq && *p != '#' && *p != ';' && *p != '[') {
            const char *ke = eq, *vs = eq + 1, *ve = end;
            while (ke > p && (ke[-1] == ' ' || ke[-1] == '\t'))
                ke--;
            while (vs < ve && (*vs == ' ' || *vs == '\t'))
                vs++;
            while (ve > vs && (ve[-1] == ' ' || ve[-1] == '\t' || ve[-1] == '\r'))
                ve--;
            char key[64], val[1024];
            snprintf(key, sizeof key, "%.*s", (int)(ke - p), p);
            snprintf(val, sizeof val, "%.*s", (int)(ve - vs), vs);
            cJSON_DeleteItemFromObjectCaseSensitive(o, key); /* the last one counts */
            if (key[0] && !cJSON_AddStringToObject(o, key, val)) {
                cJSON_Delete(o);
                return NULL;
            }
        }
        p = e ? e + 1 : end;
    }
    return o;
}

/* The stored rules (a JSON array), or NULL with *rc (0: none stored). */
static cJSON *stored_rules(cw__http_req_t *r, int *rc)
{
    char *json = NULL;
    cw_diag_t d = {{0}};
    *rc = cw_store_alert_rules_get(r->store, &json, &d);
    if (*rc) {
        *rc = dbfail(r, *rc, &d);
        return NULL;
    }
    cJSON *a = json ? cJSON_Parse(json) : NULL;
    free(json);
    if (json && !cJSON_IsArray(a)) {
        cJSON_Delete(a);
        *rc = cw__http_fail(r, 500,
                            "the stored alert rules (meta alert_rules) are not a JSON "
                            "array; restart the service to rewrite them");
        return NULL;
    }
    return a;
}

int cw__http_alert_rules(cw__http_req_t *r)
{
    int rc;
    cJSON *rules = stored_rules(r, &rc);
    if (rc) return rc;
    cw_alert_row_t *v = NULL;
    size_t n = 0;
    cw_diag_t d = {{0}};
    cw_alert_filter_t f = {.min_state = 1, .severity = -1, .limit = 100000};
    if ((rc = cw_store_alerts(r->store, &f, &v, &n, &d))) {
        cJSON_Delete(rules);
        return dbfail(r, rc, &d);
    }
    cJSON *root = cJSON_CreateObject(), *arr = NULL, *it;
    bool ok = root && add_progress(r, root) && (arr = cJSON_AddArrayToObject(root, "rules"));
    cJSON_ArrayForEach(it, rules)
    {
        if (!ok) break;
        const char *name = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(it, "name"));
        const char *text = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(it, "text"));
        cJSON *line = cJSON_GetObjectItemCaseSensitive(it, "line");
        uint64_t pending = 0, firing = 0;
        for (size_t i = 0; name && i < n; i++)
            if (v[i].rule && strcmp(v[i].rule, name) == 0) {
                if (v[i].state == 2)
                    firing++;
                else
                    pending++;
            }
        cJSON *o = cJSON_CreateObject();
        ok = o && cJSON_AddItemToArray(arr, o) && add_str(o, "name", name) &&
             add_str(o, "file",
                     cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(it, "file"))) &&
             (cJSON_IsNumber(line) ? cJSON_AddNumberToObject(o, "line", line->valuedouble)
                                   : cJSON_AddNullToObject(o, "line")) &&
             add_str(o, "hash",
                     cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(it, "hash"))) &&
             add_str(o, "text", text) && cw__json_u64(o, "active", pending + firing) &&
             cw__json_u64(o, "pending", pending) && cw__json_u64(o, "firing", firing);
        cJSON *fields = ok ? rule_fields(text) : NULL;
        ok = ok && fields && cJSON_AddItemToObject(o, "fields", fields);
    }
    rc = ok ? cw__http_send_json(r, root) : oom(r);
    cJSON_Delete(root);
    cJSON_Delete(rules);
    cw_alert_rows_free(v, n);
    return rc;
}

/* ---- GET /api/alert-rules/{name}/backtest -------------------------------------- */

static cJSON *backtest_json(const cw_backtest_t *b, const char *rule)
{
    cJSON *root = cJSON_CreateObject(), *arr = NULL;
    bool ok = root && cJSON_AddStringToObject(root, "rule", rule) &&
              cw__json_window(root, b->from_ns, b->to_ns) &&
              cw__json_i64(root, "interval_ns", b->interval_ns) &&
              cw__json_u64(root, "evaluations", b->evaluations) &&
              (arr = cJSON_AddArrayToObject(root, "series")) != NULL;
    size_t ntr = 0;
    for (size_t i = 0; ok && i < b->nseries; i++) {
        const cw_backtest_series_t *s = &b->series[i];
        cJSON *o = cJSON_CreateObject(), *ta = NULL;
        ok = o && cJSON_AddItemToArray(arr, o) && add_str(o, "key", s->key) &&
             add_str(o, "process", s->process) &&
             (s->proc ? cw__json_u64(o, "proc", s->proc) : cJSON_AddNullToObject(o, "proc")) &&
             (s->pid ? cw__json_u64(o, "pid", s->pid) : cJSON_AddNullToObject(o, "pid")) &&
             add_str(o, "tag", s->tag) && (ta = cJSON_AddArrayToObject(o, "transitions"));
        for (size_t k = 0; ok && k < s->ntr; k++, ntr++) {
            const cw_alert_transition_t *t = &s->tr[k];
            cJSON *x = cJSON_CreateObject();
            ok = x && cJSON_AddItemToArray(ta, x) && cw__json_i64(x, "ts_ns", t->ts_ns) &&
                 cJSON_AddStringToObject(x, "from", state_name((int)t->from)) &&
                 cJSON_AddStringToObject(x, "to", state_name((int)t->to)) &&
                 cJSON_AddStringToObject(x, "severity", severity_name((int)t->severity)) &&
                 add_num(x, "value", t->value) && add_num(x, "threshold", t->threshold) &&
                 add_num(x, "leak_score", t->leak_score) &&
                 add_num(x, "time_to_limit_s", t->ttl_s) && add_str(x, "reason", t->reason);
        }
    }
    ok = ok && cw__json_u64(root, "transitions", ntr);
    if (!ok) {
        cJSON_Delete(root);
        return NULL;
    }
    return root;
}

int cw__http_alert_backtest(cw__http_req_t *r, const char *name)
{
    int64_t from, to, interval = 0;
    const char *s;
    int rc = cw__http_window(r, &from, &to);
    if (rc) return rc;
    if (to - from > BACKTEST_MAX_WINDOW_NS)
        return cw__http_fail(r, 400, "from: a backtest covers at most 7 days; shorten [from, to)");
    if ((s = cw__http_param(r, "interval"))) {
        if ((rc = cw__http_parse_duration(r, "interval", s, &interval))) return rc;
        if (interval < BACKTEST_MIN_INTERVAL_NS)
            return cw__http_fail(r, 400, "interval: at least 10s");
    } else {
        /* About 1000 evaluations, a multiple of 10 s. */
        int64_t w = (to - from) / 1000;
        interval = (w + BACKTEST_MIN_INTERVAL_NS - 1) / BACKTEST_MIN_INTERVAL_NS *
                   BACKTEST_MIN_INTERVAL_NS;
        if (interval < BACKTEST_MIN_INTERVAL_NS) interval = BACKTEST_MIN_INTERVAL_NS;
    }
    if ((to - from) / interval > BACKTEST_MAX_EVALS)
        return cw__http_fail(r, 400,
                             "interval: %" PRId64 " evaluations; at most %d are run: raise "
                             "interval or shorten [from, to)",
                             (to - from) / interval, BACKTEST_MAX_EVALS);

    cJSON *rules = stored_rules(r, &rc), *it, *found = NULL;
    if (rc) return rc;
    cJSON_ArrayForEach(it, rules)
    {
        const char *n = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(it, "name"));
        if (n && strcmp(n, name) == 0) found = it;
    }
    const char *text = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(found, "text"));
    const char *file = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(found, "file"));
    if (!text) {
        cJSON_Delete(rules);
        return cw__http_fail(r, 404, "name: no alert rule '%s' is in force (see /api/alert-rules)",
                             name);
    }
    cw_alert_rules_t rs = {0};
    cw_backtest_t *bt = NULL;
    cw_diag_t d = {{0}};
    unsigned nbad = 0;
    const cw_alert_rule_t *rule = NULL;
    rc = cw_alert_rules_parse(&rs, file ? file : name, text, NULL, &nbad, &d);
    for (size_t i = 0; !rc && i < rs.n; i++)
        if (strcmp(rs.v[i].name, name) == 0) rule = &rs.v[i];
    if (rc || !rule)
        rc = cw__http_fail(r, 500, "the stored text of rule '%s' does not parse%s%s", name,
                           d.msg[0] ? ": " : "", d.msg);
    else if ((rc = cw_alert_backtest(r->store, rule, from, to, interval, &bt, &d)))
        rc = rc == CW_EINVAL ? cw__http_fail(r, 400, "%s", d.msg) : dbfail(r, rc, &d);
    if (!rc) {
        cJSON *root = backtest_json(bt, name);
        rc = root ? cw__http_send_json(r, root) : oom(r);
        cJSON_Delete(root);
    }
    cw_backtest_free(bt);
    cw_alert_rules_free(&rs);
    cJSON_Delete(rules);
    return rc;
}

/* ---- silences ------------------------------------------------------------------ */

/* Silences live in wall-clock time, even beside a replay: the engine
 * applies those active at the wall clock (engine.c, silences_load), so
 * "now", relative times and their status are the wall clock's here. */

static const char *silence_state(const cw_silence_row_t *s, int64_t now)
{
    int64_t end =
        s->deleted_ns != CW_TS_NEVER && s->deleted_ns < s->ends_ns ? s->deleted_ns : s->ends_ns;
    return now >= end ? "expired" : now < s->starts_ns ? "pending" : "active";
}

static cJSON *silence_json(const cw_silence_row_t *s, int64_t now)
{
    char t1[CW_UTC_TEXT], t2[CW_UTC_TEXT];
    cJSON *o = cJSON_CreateObject(), *st = NULL, *m = cJSON_Parse(s->matchers);
    bool ok = o && m && cw__json_i64(o, "id", s->id) && cJSON_AddItemToObject(o, "matchers", m);
    if (!ok) cJSON_Delete(m);
    ok = ok && cJSON_AddStringToObject(o, "startsAt", cw_utc_text(s->starts_ns, 3, t1)) &&
         cJSON_AddStringToObject(o, "endsAt", cw_utc_text(s->ends_ns, 3, t2)) &&
         cw__json_i64(o, "starts_ns", s->starts_ns) && cw__json_i64(o, "ends_ns", s->ends_ns) &&
         add_str(o, "createdBy", s->created_by) && add_str(o, "comment", s->comment) &&
         cw__json_i64(o, "created_ns", s->created_ns) && add_time(o, "deleted_ns", s->deleted_ns) &&
         (st = cJSON_AddObjectToObject(o, "status")) &&
         cJSON_AddStringToObject(st, "state", silence_state(s, now));
    if (!ok) {
        cJSON_Delete(o);
        return NULL;
    }
    return o;
}

int cw__http_silences(cw__http_req_t *r)
{
    static const char *const states[] = {"active", "pending", "expired", "all"};
    const char *want = cw__http_param(r, "state");
    if (want && name_index(states, 4, want) < 0)
        return cw__http_fail(r, 400, "state: '%s' is not one of active, pending, expired, all",
                             want);
    if (want && strcmp(want, "all") == 0) want = NULL;
    int64_t now = r->now_ns = cw_plat_wall_ns();
    cw_silence_row_t *v = NULL;
    size_t n = 0;
    cw_diag_t d = {{0}};
    int rc = cw_store_silences(r->store, CW_TS_NEVER, &v, &n, &d);
    if (rc) return dbfail(r, rc, &d);
    cJSON *root = cJSON_CreateObject(), *arr = NULL;
    bool ok = root && cw__json_i64(root, "now_ns", now) &&
              (arr = cJSON_AddArrayToObject(root, "silences"));
    for (size_t i = 0; ok && i < n; i++) {
        if (want && strcmp(silence_state(&v[i], now), want) != 0) continue;
        cJSON *o = silence_json(&v[i], now);
        ok = o && cJSON_AddItemToArray(arr, o);
    }
    rc = ok ? cw__http_send_json(r, root) : oom(r);
    cJSON_Delete(root);
    cw_silence_rows_free(v, n);
    return rc;
}

/* A time of the body: a string as the query's times (RFC 3339, Unix ns,
 * "now", "+2h"), or a number of Unix ns. 0 or 400. */
static int body_time(cw__http_req_t *r, const cJSON *j, const char *name, int64_t *out)
{
    if (cJSON_IsString(j)) return cw__http_parse_time(r, name, j->valuestring, out);
    if (cJSON_IsNumber(j) && j->valuedouble >= 0 && j->valuedouble < 9.2e18) {
        *out = (int64_t)j->valuedouble;
        return 0;
    }
    return cw__http_fail(r, 400,
                         "%s: a time is a string (RFC 3339 such as 2026-11-29T10:00:00Z, or "
                         "relative such as +2h)",
                         name);
}

/* The matchers of a POST body, checked, as the JSON text to store
 * (*text, malloc'd): [{"name","value","isRegex","isEqual"}]. 0 or 400. */
static int body_matchers(cw__http_req_t *r, const cJSON *m, char **text)
{
    int n = cJSON_GetArraySize(m);
    *text = NULL;
    if (!cJSON_IsArray(m) || n < 1 || n > MAX_MATCHERS)
        return cw__http_fail(r, 400,
                             "matchers: an array of 1 to %d {\"name\", \"value\", \"isRegex\", "
                             "\"isEqual\"} objects is required",
                             MAX_MATCHERS);
    cJSON *out = cJSON_CreateArray(), *it;
    int i = 0, rc = 0;
    cJSON_ArrayForEach(it, m)
    {
        const cJSON *name = cJSON_GetObjectItemCaseSensitive(it, "name");
        const cJSON *value = cJSON_GetObjectItemCaseSensitive(it, "value");
        const cJSON *re = cJSON_GetObjectItemCaseSensitive(it, "isRegex");
        const cJSON *eq = cJSON_GetObjectItemCaseSensitive(it, "isEqual");
        if (!cJSON_IsObject(it) || !cJSON_IsString(name) || !name->valuestring[0] ||
            strlen(name->valuestring) > 128) {
            rc = cw__http_fail(r, 400,
                               "matchers[%d].name: a label name (1 to 128 bytes) is "
                               "required",
                               i);
            break;
        }
        if (!cJSON_IsString(value) || strlen(value->valuestring) > 1024) {
            rc = cw__http_fail(r, 400,
                               "matchers[%d].value: a string of at most 1024 bytes is "
                               "required",
                               i);
            break;
        }
        if ((re && !cJSON_IsBool(re)) || (eq && !cJSON_IsBool(eq))) {
            rc = cw__http_fail(r, 400, "matchers[%d]: isRegex and isEqual are true or false", i);
            break;
        }
        cJSON *o = cJSON_CreateObject();
        if (!o || !cJSON_AddItemToArray(out, o) ||
            !cJSON_AddStringToObject(o, "name", name->valuestring) ||
            !cJSON_AddStringToObject(o, "value", value->valuestring) ||
            !cJSON_AddBoolToObject(o, "isRegex", cJSON_IsTrue(re)) ||
            !cJSON_AddBoolToObject(o, "isEqual", !eq || cJSON_IsTrue(eq))) {
            rc = oom(r);
            break;
        }
        i++;
    }
    if (!rc && !(*text = cJSON_PrintUnformatted(out))) rc = oom(r);
    cJSON_Delete(out);
    return rc;
}

/* A required, non-empty string member of at most max bytes. */
static int body_string(cw__http_req_t *r, const cJSON *j, const char *name, size_t max,
                       const char **out)
{
    const cJSON *x = cJSON_GetObjectItemCaseSensitive(j, name);
    if (!cJSON_IsString(x) || !x->valuestring[0] || strlen(x->valuestring) > max)
        return cw__http_fail(r, 400, "%s: a non-empty string of at most %zu bytes is required",
                             name, max);
    *out = x->valuestring;
    return 0;
}

int cw__http_silence_add(cw__http_req_t *r)
{
    static const char *const known[] = {"matchers", "startsAt", "endsAt", "createdBy", "comment"};
    cJSON *j = r->body ? cJSON_ParseWithLength(r->body, r->body_len) : NULL, *it;
    cw_silence_row_t s = {0};
    const char *by = NULL, *comment = NULL;
    char *matchers = NULL;
    int64_t now = r->now_ns = cw_plat_wall_ns();
    int rc = 0;
    if (!r->body)
        return cw__http_fail(r, 400,
                             "request body: a silence is required as JSON: {\"matchers\": "
                             "[...], \"endsAt\": ..., \"createdBy\": ..., \"comment\": "
                             "...}");
    if (!cJSON_IsObject(j)) {
        cJSON_Delete(j);
        return cw__http_fail(r, 400,
                             "request body: not a JSON object (send Alertmanager's "
                             "silence shape)");
    }
    cJSON_ArrayForEach(it, j)
    {
        if (name_index(known, 5, it->string) < 0) {
            rc = cw__http_fail(r, 400,
                               "%s: unknown field of a silence (matchers, startsAt, endsAt, "
                               "createdBy, comment; a silence is not updated: expire it and "
                               "create another)",
                               it->string);
            goto out;
        }
    }
    if ((rc = body_matchers(r, cJSON_GetObjectItemCaseSensitive(j, "matchers"), &matchers)))
        goto out;
    s.starts_ns = now;
    it = cJSON_GetObjectItemCaseSensitive(j, "startsAt");
    if (it && (rc = body_time(r, it, "startsAt", &s.starts_ns))) goto out;
    it = cJSON_GetObjectItemCaseSensitive(j, "endsAt");
    if (!it) {
        rc = cw__http_fail(r, 400, "endsAt: required (e.g. \"+2h\" or an RFC 3339 time)");
        goto out;
    }
    if ((rc = body_time(r, it, "endsAt", &s.ends_ns))) goto out;
    if (s.ends_ns <= s.starts_ns) {
        rc = cw__http_fail(r, 400, "endsAt: must be after startsAt");
        goto out;
    }
    if (s.ends_ns <= now) {
        rc = cw__http_fail(r, 400, "endsAt: already past; a silence must end in the future");
        goto out;
    }
    if ((rc = body_string(r, j, "createdBy", 256, &by)) ||
        (rc = body_string(r, j, "comment", 4096, &comment)))
        goto out;
    s.matchers = matchers;
    s.created_by = (char *)by;
    s.comment = (char *)comment;
    s.created_ns = cw_plat_wall_ns();

    cw_store_t *w = NULL;
    cw_diag_t d = {{0}};
    if ((rc = cw_store_open_side(r->ctx->db_path, &w, &d)) == 0)
        rc = cw_store_silence_add(w, &s, &d);
    cw_store_close(w);
    if (rc) {
        rc = cw__http_fail(r, 503, "saving the silence failed: %s; try again",
                           d.msg[0] ? d.msg : cw_strerror(rc));
        goto out;
    }
    cJSON *root = cJSON_CreateObject();
    rc = root && cw__json_i64(root, "id", s.id) ? cw__http_send_json(r, root) : oom(r);
    cJSON_Delete(root);
out:
    free(matchers);
    cJSON_Delete(j);
    return rc;
}

int cw__http_silence_delete(cw__http_req_t *r, uint32_t id)
{
    cw_store_t *w = NULL;
    cw_diag_t d = {{0}};
    int64_t now = r->now_ns = cw_plat_wall_ns();
    int rc = cw_store_open_side(r->ctx->db_path, &w, &d);
    if (!rc) rc = cw_store_silence_delete(w, id, now, &d);
    cw_store_close(w);
    if (rc == CW_ENOENT) return cw__http_fail(r, 404, "id: no silence %" PRIu32, id);
    if (rc)
        return cw__http_fail(r, 503, "expiring the silence failed: %s; try again",
                             d.msg[0] ? d.msg : cw_strerror(rc));
    cJSON *root = cJSON_CreateObject();
    rc = root && cw__json_u64(root, "id", id) && cw__json_i64(root, "deleted_ns", now)
             ? cw__http_send_json(r, root)
             : oom(r);
    cJSON_Delete(root);
    return rc;
}

/* ---- POST /api/reload ------------------------------------------------------------ */

/* How long a request waits for the core thread to serve its reload (it
 * does between two events or ticks, about once a second when idle). */
#define RELOAD_WAIT_NS (INT64_C(10) * CW_NS_PER_S)

/* Requests a reload and waits for the one that read the files after this
 * request (status.h: loads begun and done) to report: 200 "reloaded",
 * 422 with the file and line at fault (nothing changed), or 202
 * "requested" when it was not served within RELOAD_WAIT_NS. */
int cw__http_reload(cw__http_req_t *r)
{
    char msg[400] = "";
    cw_status_t *st = r->ctx->status;
    if (!r->ctx->on_reload)
        return cw__http_fail(r, 501,
                             "reload: this server was started without a reload hook "
                             "(send SIGHUP to the service instead)");
    uint64_t begun = st ? atomic_load(&st->config_loads_begun) : 0;
    int rc = r->ctx->on_reload(r->ctx->reload_ctx, msg, sizeof msg);
    if (rc) return cw__http_fail(r, 500, "reload failed: %s", msg[0] ? msg : cw_strerror(rc));
    bool served = false;
    for (int64_t waited = 0; st && waited < RELOAD_WAIT_NS; waited += 20000000) {
        if ((served = atomic_load(&st->config_loads_done) > begun)) break;
        cw_plat_sleep_ns(20000000);
    }
    cw_status_config_t c = {.ok = true};
    if (served) cw_status_config_get(st, &c);
    cJSON *root = cJSON_CreateObject();
    bool ok = root != NULL;
    if (!c.ok) {
        char e[sizeof c.error + 96];
        snprintf(e, sizeof e, "reload refused: %s; the running configuration and rules are kept",
                 c.error);
        ok = ok && cJSON_AddStringToObject(root, "error", e);
    } else {
        ok = ok && cJSON_AddStringToObject(root, "status", served || !st ? "reloaded" : "requested");
        ok = ok && cw__json_i64(root, "reloaded_ns", cw_plat_wall_ns());
    }
    ok = ok && (!st || cw__http_config_json(root, st));
    char *text = ok ? cJSON_PrintUnformatted(root) : NULL;
    cJSON_Delete(root);
    if (!text) return oom(r);
    rc = cw__http_send(r, !c.ok ? 422 : served || !st ? 200 : 202, "application/json", text,
                       strlen(text));
    cJSON_free(text);
    return rc;
}
