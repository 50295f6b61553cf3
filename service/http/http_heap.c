/* http_heap.c - the heap traces (heapdb.h; the heap drill-down): POST
 * /api/processes/{id}/heap-trace starts one of a live instance, GET
 * /api/heap-traces lists them (newest first, a running one with its
 * progress), GET /api/heap-traces/{id} gives one with its report (JSON,
 * the folded stacks for flame-graph tools, or a pprof heap profile), GET
 * /api/heap-traces/{id}/diff the growth per stack between two of its
 * points (UMDH's diff: heap.h, cw_heap_diff_json), POST
 * /api/heap-traces/{id}/stop ends one early. Starting and stopping go
 * through the service's hooks (http.h, cw_http_heap_ops_t); reading is
 * the store's. */
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "commitwatch/common.h"
#include "commitwatch/event.h"
#include "commitwatch/heapdb.h"
#include "commitwatch/query.h"
#include "http/http_resources.h"

/* The row as JSON; the report (parsed) when the row has one. */
static cJSON *trace_json(const cw__http_req_t *r, const cw_heap_trace_row_t *t)
{
    cJSON *o = cJSON_CreateObject();
    char url[64];
    snprintf(url, sizeof url, "/api/heap-traces/%" PRId64, t->id);
    uint64_t progress = 0;
    bool attached = false;
    bool running = t->state && strcmp(t->state, "running") == 0 && r->ctx->heap &&
                   r->ctx->heap->progress(r->ctx->heap_ctx, t->id, &progress, &attached);
    bool ok = o && cw__json_i64(o, "id", t->id) && cw__json_u64(o, "pid", t->pid) &&
              cw__json_i64_or_null(o, "process_id", t->proc, 0) &&
              cw__json_str_or_null(o, "process", t->process) &&
              cJSON_AddStringToObject(o, "trigger", t->trigger ? t->trigger : "") &&
              cw__json_i64_or_null(o, "alert_id", t->alert_series, 0) &&
              cw__json_str_or_null(o, "rule", t->rule) &&
              cw__json_i64(o, "requested_ns", t->requested_ns) &&
              cw__json_i64(o, "duration_ns", t->duration_ns) &&
              cw__json_i64_or_null(o, "started_ns", t->started_ns, 0) &&
              cw__json_i64_or_null(o, "ended_ns", t->ended_ns, 0) &&
              cJSON_AddStringToObject(o, "state", t->state ? t->state : "") &&
              cw__json_str_or_null(o, "end_reason", t->end_reason) &&
              cw__json_str_or_null(o, "error", t->error) && cJSON_AddStringToObject(o, "url", url);
    if (ok && running)
        ok = cw__json_u64(o, "events_so_far", progress) &&
             cJSON_AddBoolToObject(o, "attached", attached);
    if (ok && t->state && strcmp(t->state, "running") != 0) {
        const cw_heap_figs_t *f = &t->totals;
        ok = cw__json_u64(o, "events", t->counts.events) &&
             cw__json_u64(o, "unknown_frees", t->counts.unknown_frees) &&
             cw__json_u64(o, "dropped", t->counts.dropped) &&
             cw__json_u64(o, "outstanding_bytes", f->outstanding_bytes) &&
             cw__json_u64(o, "outstanding_count", f->outstanding_count) &&
             cw__json_u64(o, "alloc_bytes", f->alloc_bytes) &&
             cw__json_u64(o, "alloc_count", f->alloc_count) &&
             cw__json_u64(o, "freed_bytes", f->freed_bytes) &&
             cw__json_u64(o, "freed_count", f->freed_count) &&
             cw__json_u64(o, "peak_bytes", f->peak_bytes);
    }
    if (ok && t->report) {
        cJSON *rep = cJSON_Parse(t->report);
        ok = rep && cJSON_AddItemToObject(o, "report", rep);
        if (!ok) cJSON_Delete(rep);
        /* The trace's whole seconds in the store's heap layer (the
         * window queries with layer=heap): up to the second of its last
         * event, before the one where its end released what was live. */
        const cJSON *f = ok ? cJSON_GetObjectItemCaseSensitive(rep, "from_ns") : NULL;
        const cJSON *e = ok ? cJSON_GetObjectItemCaseSensitive(rep, "to_ns") : NULL;
        if (ok && t->proc && cJSON_IsNumber(f) && cJSON_IsNumber(e) && e->valuedouble > 0) {
            int64_t from = cw_floor_to((int64_t)f->valuedouble, CW_NS_PER_S);
            int64_t to = cw_floor_to((int64_t)e->valuedouble + CW_NS_PER_S - 1, CW_NS_PER_S);
            char lurl[160];
            snprintf(lurl, sizeof lurl,
                     "/api/processes/%" PRIu32 "/stacks?layer=heap&from=%" PRId64 "&to=%" PRId64,
                     t->proc, from, to);
            ok = cJSON_AddStringToObject(o, "layer_url", lurl) != NULL;
        }
    }
    if (!ok) {
        cJSON_Delete(o);
        return NULL;
    }
    return o;
}

int cw__http_heap_traces(cw__http_req_t *r)
{
    cw_heap_trace_filter_t f = {0};
    uint64_t v;
    const char *s;
    int rc;
    if ((s = cw__http_param(r, "alert")) &&
        (rc = cw__http_parse_uint(r, "alert", s, 1, INT64_MAX, &v)))
        return rc;
    f.alert_series = s ? (int64_t)v : 0;
    if ((s = cw__http_param(r, "pid")) &&
        (rc = cw__http_parse_uint(r, "pid", s, 1, UINT32_MAX, &v)))
        return rc;
    f.pid = s ? (uint32_t)v : 0;
    if ((s = cw__http_param(r, "process")) &&
        (rc = cw__http_parse_uint(r, "process", s, 1, UINT32_MAX, &v)))
        return rc;
    f.proc = s ? (uint32_t)v : 0;
    if ((s = cw__http_param(r, "limit")) && (rc = cw__http_parse_uint(r, "limit", s, 1, 1000, &v)))
        return rc;
    f.limit = s ? (uint32_t)v : 100;
    cw_heap_trace_row_t *rows = NULL;
    size_t n = 0;
    cw_diag_t d = {{0}};
    if ((rc = cw_store_heap_list(r->store, &f, &rows, &n, &d))) return cw__http_db_fail(r, rc, &d);
    cJSON *root = cJSON_CreateObject(), *arr = root ? cJSON_AddArrayToObject(root, "traces") : NULL;
    bool ok = arr != NULL;
    for (size_t i = 0; ok && i < n; i++) {
        cJSON *o = trace_json(r, &rows[i]);
        ok = o && cJSON_AddItemToArray(arr, o);
    }
    cw_heap_trace_rows_free(rows, n);
    return cw__http_send_tree(r, ok, root);
}

/* The report's stacks of its first process as folded lines
 * ("outer;...;inner BYTES"), the value given by `value`. */
static int send_folded(cw__http_req_t *r, const cw_heap_trace_row_t *t)
{
    const char *value = cw__http_param(r, "value");
    static const char *const values[] = {"outstanding_bytes", "alloc_bytes", "alloc_count",
                                         "outstanding_count", "peak_bytes"};
    if (!value) value = "outstanding_bytes";
    if (cw__http_name_index(values, 5, value) < 0)
        return cw__http_fail(r, 400,
                             "value: one of outstanding_bytes, outstanding_count, alloc_bytes, "
                             "alloc_count, peak_bytes");
    cJSON *rep = t->report ? cJSON_Parse(t->report) : NULL;
    cJSON *procs = cJSON_GetObjectItemCaseSensitive(rep, "processes");
    cJSON *stacks = cJSON_GetObjectItemCaseSensitive(cJSON_GetArrayItem(procs, 0), "stacks"), *k;
    size_t cap = 4096, len = 0;
    char *out = malloc(cap);
    bool ok = out != NULL;
    cJSON_ArrayForEach(k, stacks)
    {
        cJSON *frames = cJSON_GetObjectItemCaseSensitive(k, "frames"), *fr;
        double val = cJSON_GetNumberValue(cJSON_GetObjectItemCaseSensitive(k, value));
        if (!ok || !(val > 0)) continue;
        cJSON_ArrayForEach(fr, frames)
        {
            const char *name = cJSON_IsString(fr) ? fr->valuestring : "?";
            size_t nl = strlen(name);
            if (CW_RESERVE(out, cap, len + nl + 2)) {
                ok = false;
                break;
            }
            if (fr != frames->child) out[len++] = ';';
            for (size_t i = 0; i < nl; i++) /* ';' and ' ' separate: keep them out of names */
                out[len++] = name[i] == ';' || name[i] == '\n' ? ':' : name[i];
        }
        char num[32];
        int nn = snprintf(num, sizeof num, " %.0f\n", val);
        if (ok && CW_RESERVE(out, cap, len + (size_t)nn + 1)) ok = false;
        if (ok) {
            memcpy(out + len, num, (size_t)nn);
            len += (size_t)nn;
        }
    }
    cJSON_Delete(rep);
    if (!ok) {
        free(out);
        return cw__http_oom(r);
    }
    int rc = cw__http_send(r, 200, "text/plain; charset=utf-8", out, len);
    free(out);
    return rc;
}

int cw__http_heap_trace(cw__http_req_t *r, uint32_t id)
{
    const char *format = cw__http_param(r, "format");
    if (format && strcmp(format, "json") != 0 && strcmp(format, "folded") != 0 &&
        strcmp(format, "pprof") != 0)
        return cw__http_fail(r, 400, "format: json (the default), folded or pprof");
    if (cw__http_param(r, "value") && (!format || strcmp(format, "folded") != 0))
        return cw__http_fail(r, 400, "value: only with format=folded");
    cw_heap_trace_row_t t;
    cw_diag_t d = {{0}};
    int rc = cw_store_heap_get(r->store, id, &t, &d);
    if (rc == CW_ENOENT) return cw__http_fail(r, 404, "id: no heap trace %" PRIu32, id);
    if (rc) return cw__http_db_fail(r, rc, &d);
    if (format && strcmp(format, "json") != 0 && !t.report) {
        rc = cw__http_fail(r, 409, "heap trace %" PRIu32 " has no report (%s)", id,
                           t.state ? t.state : "?");
    } else if (format && strcmp(format, "folded") == 0) {
        rc = send_folded(r, &t);
    } else if (format && strcmp(format, "pprof") == 0) {
        char *pb = NULL, name[64];
        size_t len = 0;
        snprintf(name, sizeof name, "heap-%" PRIu32 ".pb.gz", id);
        rc = cw_heap_pprof(t.report, &pb, &len, &d);
        rc = rc == CW_ENOMEM ? cw__http_oom(r)
             : rc            ? cw__http_fail(r, 500, "%s", d.msg)
                  : cw__http_send_attachment(r, "application/octet-stream", name, pb, len);
        free(pb);
    } else {
        cJSON *o = trace_json(r, &t);
        rc = cw__http_send_tree(r, o != NULL, o);
    }
    cw_heap_trace_row_clear(&t);
    return rc;
}

/* POST /api/processes/{id}/heap-trace: {"duration": "5m"} (optional). */
int cw__http_heap_trace_start(cw__http_req_t *r, uint32_t id)
{
    if (!r->ctx->heap)
        return cw__http_fail(r, 501,
                             "heap traces are run by the service with a live source; this "
                             "server has none");
    int64_t duration = 0;
    cJSON *j = r->body ? cJSON_ParseWithLength(r->body, r->body_len) : NULL, *it;
    int rc = 0;
    if (r->body && !cJSON_IsObject(j)) {
        cJSON_Delete(j);
        return cw__http_fail(r, 400,
                             "request body: a JSON object, {\"duration\": \"5m\"}, or none");
    }
    int64_t every = 0;
    cJSON_ArrayForEach(it, j)
    {
        bool dur = strcmp(it->string, "duration") == 0;
        if (!dur && strcmp(it->string, "snapshot_every") != 0) {
            rc = cw__http_fail(r, 400,
                               "%s: unknown field (a heap trace takes \"duration\" and "
                               "\"snapshot_every\")",
                               it->string);
            break;
        }
        if (!cJSON_IsString(it)) {
            rc = cw__http_fail(r, 400, "%s: a string such as \"30s\" or \"5m\"", it->string);
            break;
        }
        rc = cw__http_parse_duration(r, it->string, it->valuestring, dur ? &duration : &every);
        if (rc) break;
    }
    cJSON_Delete(j);
    if (rc) return rc;
    cw_proc_info_t p = {0};
    cw_diag_t d = {{0}};
    rc = cw_store_proc_get(r->store, id, &p, &d);
    if (rc == CW_ENOENT) return cw__http_fail(r, 404, "id: no process instance %" PRIu32, id);
    if (rc) return cw__http_db_fail(r, rc, &d);
    if (p.folded > 1 || !p.pid) {
        cw_proc_info_clear(&p);
        return cw__http_fail(r, 409,
                             "process %" PRIu32 " is a group of folded instances: trace one "
                             "live instance",
                             id);
    }
    if (p.exit_ns != CW_TS_NEVER) {
        cw_proc_info_clear(&p);
        return cw__http_fail(r, 409, "process instance %" PRIu32 " has exited: nothing to trace",
                             id);
    }
    int64_t tid = 0;
    rc = r->ctx->heap->ask(r->ctx->heap_ctx, p.pid, id, p.name, duration, every, &tid, &d);
    cw_proc_info_clear(&p);
    if (rc == CW_ESTOPPED && tid)
        return cw__http_fail(r, 409, "%s (GET /api/heap-traces/%" PRId64 ")", d.msg, tid);
    if (rc == CW_ERANGE) return cw__http_fail(r, 429, "%s", d.msg);
    if (rc == CW_EINVAL) return cw__http_fail(r, 400, "%s", d.msg);
    if (rc) return cw__http_fail(r, 503, "%s", d.msg[0] ? d.msg : cw_strerror(rc));
    cJSON *root = cJSON_CreateObject();
    char url[64];
    snprintf(url, sizeof url, "/api/heap-traces/%" PRId64, tid);
    bool ok = root && cw__json_i64(root, "id", tid) &&
              cJSON_AddStringToObject(root, "state", "running") &&
              cJSON_AddStringToObject(root, "url", url);
    char *text = ok ? cJSON_PrintUnformatted(root) : NULL;
    cJSON_Delete(root);
    if (!text) return cw__http_oom(r);
    rc = cw__http_send(r, 202, "application/json", text, strlen(text));
    cJSON_free(text);
    return rc;
}

int cw__http_heap_trace_stop(cw__http_req_t *r, uint32_t id)
{
    if (!r->ctx->heap)
        return cw__http_fail(r, 501, "heap traces are run by the service with a live source");
    if (r->ctx->heap->stop(r->ctx->heap_ctx, id) != 0)
        return cw__http_fail(r, 409, "heap trace %" PRIu32 " is not running", id);
    cJSON *root = cJSON_CreateObject();
    bool ok =
        root && cw__json_u64(root, "id", id) && cJSON_AddStringToObject(root, "state", "stopping");
    return cw__http_send_tree(r, ok, root);
}

/* GET /api/heap-traces/{id}/diff?a=P&b=P: points "start", "end" or a
 * snapshot's number; by default the first snapshot (or the start) to the
 * end. */
int cw__http_heap_trace_diff(cw__http_req_t *r, uint32_t id)
{
    cw_heap_trace_row_t t;
    cw_diag_t d = {{0}};
    int rc = cw_store_heap_get(r->store, id, &t, &d);
    if (rc == CW_ENOENT) return cw__http_fail(r, 404, "id: no heap trace %" PRIu32, id);
    if (rc) return cw__http_db_fail(r, rc, &d);
    const char *a = cw__http_param(r, "a"), *b = cw__http_param(r, "b");
    if (!a) a = t.report && strstr(t.report, "\"snapshots\":[{") ? "1" : "start";
    char *diff = NULL;
    if (!t.report)
        rc = cw__http_fail(r, 409, "heap trace %" PRIu32 " has no report (%s)", id,
                           t.state ? t.state : "?");
    else if ((rc = cw_heap_diff_json(t.report, a, b ? b : "end", &diff, &d)) != 0)
        rc = rc == CW_ENOMEM ? cw__http_oom(r) : cw__http_fail(r, 400, "a, b: %s", d.msg);
    else
        rc = cw__http_send(r, 200, "application/json", diff, strlen(diff));
    free(diff);
    cw_heap_trace_row_clear(&t);
    return rc;
}
