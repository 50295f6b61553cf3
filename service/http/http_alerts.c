/* http_alerts.c - the alert resources of the API (docs/ALERTS.md, "API and
 * metrics"): alert series (list with filters, one with its transitions,
 * leak-score components and forecast), the transitions of all series,
 * and the rules in force with a backtest of one over stored history.
 * Silences are http_silences.c's, the reload http_config.c's.
 *
 * Reads go through the worker's read-only store (alertdb.h). A backtest
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

static const char *const state_names[] = {"inactive", "pending", "firing"};
static const char *const severity_names[] = {"none", "warning", "critical"};

static const char *state_name(int s)
{
    return s >= 0 && s <= 2 ? state_names[s] : "unknown";
}

static const char *severity_name(int s)
{
    return s >= 0 && s <= 2 ? severity_names[s] : "unknown";
}

/* ---- JSON pieces ------------------------------------------------------------ */

/* A number, or null when it is NAN or infinite (JSON has neither). */
static cJSON *add_num(cJSON *o, const char *name, double v)
{
    return isfinite(v) ? cJSON_AddNumberToObject(o, name, v) : cJSON_AddNullToObject(o, name);
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
    bool ok = o && cw__json_i64(o, "id", a->id) && cw__json_str_or_null(o, "rule", a->rule) &&
              cw__json_str_or_null(o, "key", a->key) && cw__json_str_or_null(o, "process", a->process) &&
              (a->proc ? cw__json_u64(o, "proc", a->proc) : cJSON_AddNullToObject(o, "proc")) &&
              (a->pid ? cw__json_u64(o, "pid", a->pid) : cJSON_AddNullToObject(o, "pid")) &&
              cw__json_str_or_null(o, "tag", a->tag) &&
              cJSON_AddStringToObject(o, "state", state_name(a->state)) &&
              cJSON_AddStringToObject(o, "severity", severity_name(a->severity)) &&
              cw__json_time(o, "active_since_ns", a->active_since) &&
              cw__json_time(o, "firing_since_ns", a->firing_since) &&
              cw__json_time(o, "false_since_ns", a->false_since) &&
              cw__json_time(o, "last_sent_ns", a->last_sent_ns) &&
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
              cw__json_str_or_null(o, "reason", t->reason) && cJSON_AddBoolToObject(o, "silenced", t->silenced);
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
    return cw__json_time(o, "evaluated_ns", ev) && cw__json_u64(o, "evaluations", n);
}

/* ---- GET /api/alerts -------------------------------------------------------- */

int cw__http_alerts(cw__http_req_t *r)
{
    cw_alert_filter_t f = {.min_state = 1, .severity = -1, .limit = 1000};
    const char *s;
    int rc;
    uint64_t limit = 1000;
    if ((s = cw__http_param(r, "state")) && strcmp(s, "active") != 0) {
        int k = cw__http_name_index(state_names, 3, s);
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
    if ((s = cw__http_param(r, "severity")) && (f.severity = cw__http_name_index(severity_names, 3, s)) < 0)
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
    if ((rc = cw_store_alerts(r->store, &f, &v, &n, &d))) return cw__http_db_fail(r, rc, &d);
    cJSON *root = cJSON_CreateObject(), *arr = NULL;
    bool ok = root && add_progress(r, root) && cw__json_u64(root, "total", n) &&
              (arr = cJSON_AddArrayToObject(root, "alerts")) != NULL;
    for (size_t i = 0; ok && i < n; i++) {
        cJSON *a = alert_json(&v[i], false);
        ok = a && cJSON_AddItemToArray(arr, a);
    }
    rc = cw__http_send_tree(r, ok, root);
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
    if (rc) return cw__http_db_fail(r, rc, &d);
    if ((rc = cw_store_alert_transitions(r->store, id, INT64_MIN, INT64_MAX, 1000, &tv, &n, &d))) {
        cw_alert_row_clear(&a);
        return cw__http_db_fail(r, rc, &d);
    }
    cJSON *root = cJSON_CreateObject(), *aj = alert_json(&a, true), *arr = NULL;
    bool ok = root && aj && cJSON_AddItemToObject(root, "alert", aj);
    if (!ok) cJSON_Delete(aj);
    ok = ok && (arr = cJSON_AddArrayToObject(root, "transitions")) != NULL;
    for (size_t i = 0; ok && i < n; i++) {
        cJSON *t = tr_json(&tv[i]);
        ok = t && cJSON_AddItemToArray(arr, t);
    }
    rc = cw__http_send_tree(r, ok, root);
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
        return cw__http_db_fail(r, rc, &d);
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
        ok = ok && cw__json_str_or_null(t, "rule", a.rule) && cw__json_str_or_null(t, "process", a.process) &&
             (a.pid ? cw__json_u64(t, "pid", a.pid) : cJSON_AddNullToObject(t, "pid")) &&
             cw__json_str_or_null(t, "tag", a.tag);
    }
    cw_alert_row_clear(&a);
    if (rc)
        rc = cw__http_db_fail(r, rc, &d);
    else
        rc = ok ? cw__http_send_json(r, root) : cw__http_oom(r);
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
        *rc = cw__http_db_fail(r, *rc, &d);
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
        return cw__http_db_fail(r, rc, &d);
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
        ok = o && cJSON_AddItemToArray(arr, o) && cw__json_str_or_null(o, "name", name) &&
             cw__json_str_or_null(o, "file",
                     cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(it, "file"))) &&
             (cJSON_IsNumber(line) ? cJSON_AddNumberToObject(o, "line", line->valuedouble)
                                   : cJSON_AddNullToObject(o, "line")) &&
             cw__json_str_or_null(o, "hash",
                     cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(it, "hash"))) &&
             cw__json_str_or_null(o, "text", text) && cw__json_u64(o, "active", pending + firing) &&
             cw__json_u64(o, "pending", pending) && cw__json_u64(o, "firing", firing);
        cJSON *fields = ok ? rule_fields(text) : NULL;
        ok = ok && fields && cJSON_AddItemToObject(o, "fields", fields);
    }
    rc = cw__http_send_tree(r, ok, root);
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
        ok = o && cJSON_AddItemToArray(arr, o) && cw__json_str_or_null(o, "key", s->key) &&
             cw__json_str_or_null(o, "process", s->process) &&
             (s->proc ? cw__json_u64(o, "proc", s->proc) : cJSON_AddNullToObject(o, "proc")) &&
             (s->pid ? cw__json_u64(o, "pid", s->pid) : cJSON_AddNullToObject(o, "pid")) &&
             cw__json_str_or_null(o, "tag", s->tag) && (ta = cJSON_AddArrayToObject(o, "transitions"));
        for (size_t k = 0; ok && k < s->ntr; k++, ntr++) {
            const cw_alert_transition_t *t = &s->tr[k];
            cJSON *x = cJSON_CreateObject();
            ok = x && cJSON_AddItemToArray(ta, x) && cw__json_i64(x, "ts_ns", t->ts_ns) &&
                 cJSON_AddStringToObject(x, "from", state_name((int)t->from)) &&
                 cJSON_AddStringToObject(x, "to", state_name((int)t->to)) &&
                 cJSON_AddStringToObject(x, "severity", severity_name((int)t->severity)) &&
                 add_num(x, "value", t->value) && add_num(x, "threshold", t->threshold) &&
                 add_num(x, "leak_score", t->leak_score) &&
                 add_num(x, "time_to_limit_s", t->ttl_s) && cw__json_str_or_null(x, "reason", t->reason);
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
        rc = rc == CW_EINVAL ? cw__http_fail(r, 400, "%s", d.msg) : cw__http_db_fail(r, rc, &d);
    if (!rc) {
        cJSON *root = backtest_json(bt, name);
        rc = root ? cw__http_send_json(r, root) : cw__http_oom(r);
        cJSON_Delete(root);
    }
    cw_backtest_free(bt);
    cw_alert_rules_free(&rs);
    cJSON_Delete(rules);
    return rc;
}

