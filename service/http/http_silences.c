/* http_silences.c - silences (docs/ALERTS.md, "API and metrics"): GET
 * /api/silences lists them with their state; POST creates one from an
 * Alertmanager-shaped body, DELETE /api/silences/{id} expires one (both
 * need the token; the route table and http.c check it).
 *
 * Reads go through the worker's read-only store (alertdb.h). A silence is
 * written through a short-lived side handle (cw_store_open_side) on the
 * service's database: the engine and the writer have their own handles,
 * WAL and the busy timeout serialise the short transactions.
 *
 * Silences live in wall-clock time, even beside a replay: the engine
 * applies those active at the wall clock (engine.c, silences_load), so
 * "now", relative times and their status are the wall clock's here. */
#include "http/http_resources.h"

#include <cjson/cJSON.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "commitwatch/alertdb.h"
#include "commitwatch/common.h"
#include "commitwatch/event.h"
#include "commitwatch/platform.h"

#define MAX_MATCHERS 32

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
         cw__json_str_or_null(o, "createdBy", s->created_by) && cw__json_str_or_null(o, "comment", s->comment) &&
         cw__json_i64(o, "created_ns", s->created_ns) && cw__json_time(o, "deleted_ns", s->deleted_ns) &&
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
    if (want && cw__http_name_index(states, 4, want) < 0)
        return cw__http_fail(r, 400, "state: '%s' is not one of active, pending, expired, all",
                             want);
    if (want && strcmp(want, "all") == 0) want = NULL;
    int64_t now = r->now_ns = cw_plat_wall_ns();
    cw_silence_row_t *v = NULL;
    size_t n = 0;
    cw_diag_t d = {{0}};
    int rc = cw_store_silences(r->store, CW_TS_NEVER, &v, &n, &d);
    if (rc) return cw__http_db_fail(r, rc, &d);
    cJSON *root = cJSON_CreateObject(), *arr = NULL;
    bool ok = root && cw__json_i64(root, "now_ns", now) &&
              (arr = cJSON_AddArrayToObject(root, "silences"));
    for (size_t i = 0; ok && i < n; i++) {
        if (want && strcmp(silence_state(&v[i], now), want) != 0) continue;
        cJSON *o = silence_json(&v[i], now);
        ok = o && cJSON_AddItemToArray(arr, o);
    }
    rc = cw__http_send_tree(r, ok, root);
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
            rc = cw__http_oom(r);
            break;
        }
        i++;
    }
    if (!rc && !(*text = cJSON_PrintUnformatted(out))) rc = cw__http_oom(r);
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
        if (cw__http_name_index(known, 5, it->string) < 0) {
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
    rc = root && cw__json_i64(root, "id", s.id) ? cw__http_send_json(r, root) : cw__http_oom(r);
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
             : cw__http_oom(r);
    cJSON_Delete(root);
    return rc;
}
