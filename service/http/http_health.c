/* http_health.c - GET /api/health: is the service well (ok, starting,
 * degraded and why), what it has read and lost, what its database holds,
 * the source's state, the memory each component holds, the profile push
 * and the last configuration load.
 *
 * Reads the status record's atomics (status.h) and, when the database
 * exists, its data span; a missing database is "starting", not an error. */
#include "http/http_resources.h"

#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>

#include "commitwatch/memstat.h"
#include "commitwatch/platform.h"

/* /api/health's "losses": every record the source dropped or could not
 * pair, and what the resyncs corrected (docs/LINUX.md, "Losses and
 * drift"). False on out of memory. */
static bool losses(cJSON *o, const cw_status_t *st)
{
    cJSON *l = cJSON_AddObjectToObject(o, "losses");
    bool ok = l != NULL;
    ok = ok && cw__json_u64(l, "lost", st ? atomic_load(&st->events_lost) : 0);
    ok = ok && cw__json_u64(l, "foreign", st ? atomic_load(&st->records_foreign) : 0);
    ok = ok && cw__json_u64(l, "unpaired", st ? atomic_load(&st->records_unpaired) : 0);
    ok = ok && cw__json_u64(l, "malformed", st ? atomic_load(&st->records_malformed) : 0);
    ok = ok && cw__json_u64(l, "resyncs", st ? atomic_load(&st->resyncs) : 0);
    ok = ok && cw__json_u64(l, "corrections", st ? atomic_load(&st->corrections) : 0);
    ok = ok && cw__json_u64(l, "corrected_bytes", st ? atomic_load(&st->corrected_bytes) : 0);
    ok = ok && cJSON_AddBoolToObject(l, "resync_pending",
                                     st ? atomic_load(&st->resync_pending) : false);
    ok = ok && cw__json_i64_or_null(l, "last_resync_ns",
                                    st ? atomic_load(&st->last_resync_ns) : INT64_MIN, INT64_MIN);
    return ok;
}

/* "memory": bytes per component (memstat.h), SQLite's, the process's
 * resident set now and at its peak, the C heap in use, and the heap no
 * component counts ("heap_other": libdw's and civetweb's, mostly). */
static bool memory(cJSON *o)
{
    cJSON *m = cJSON_AddObjectToObject(o, "memory");
    bool ok = m != NULL;
    int64_t counted = 0, sq = 0, sq_peak = 0;
    for (int c = 0; c < CW_MEM_N; c++) {
        int64_t v = cw_mem_get((cw_mem_comp_t)c);
        /* The rings and the queue's record chunks are pages mapped apart,
         * not heap (the queue's array, in heap_other, is small). */
        if (c != CW_MEM_PERF_RINGS && c != CW_MEM_PERF_QUEUE) counted += v;
        ok = ok && cw__json_i64(m, cw_mem_name((cw_mem_comp_t)c), v);
    }
    cw_store_sqlite_memory(&sq, &sq_peak);
    cw_plat_self_mem_t pm;
    cw_plat_self_memory(&pm);
    int64_t other = pm.heap ? (int64_t)pm.heap - counted - sq : 0;
    ok = ok && cw__json_i64(m, "sqlite", sq);
    ok = ok && cw__json_i64(m, "sqlite_peak", sq_peak);
    ok = ok && cw__json_u64(m, "heap_in_use", pm.heap);
    ok = ok && cw__json_i64(m, "heap_other", other > 0 ? other : 0);
    ok = ok && cw__json_u64(m, "resident", pm.rss);
    ok = ok && cw__json_u64(m, "resident_peak", pm.peak);
    return ok;
}

/* "source_state" (docs/RELIABILITY.md, "A source that fails"): whether
 * the source is up, why it is down and since when, its failed tries and
 * the next one; null when a database is served with no source. */
static bool source_state(cJSON *o, const cw_status_t *st, const cw_source_state_t *ss)
{
    if (!st || st->no_source) return cJSON_AddNullToObject(o, "source_state") != NULL;
    cJSON *s = cJSON_AddObjectToObject(o, "source_state");
    bool ok = s && cJSON_AddBoolToObject(s, "up", ss->up);
    ok = ok && (ss->up ? cJSON_AddNullToObject(s, "error") != NULL
                       : cJSON_AddStringToObject(s, "error", ss->error) != NULL);
    ok = ok && cw__json_i64_or_null(s, "since_ns", ss->since_ns, INT64_MIN);
    ok = ok && cw__json_u64(s, "retries", ss->retries);
    ok = ok && cw__json_i64_or_null(s, "next_retry_ns", ss->next_try_ns, INT64_MIN);
    return ok;
}

/* "profile_push" (push.h; docs/FLEET.md): null when off; else "ok" or
 * "retrying" (the last try had no response or one to try again, and
 * profiles wait), what was sent, retried and dropped, what waits, the
 * last accepted push and how far the profiles are built. */
static bool profile_push(cJSON *o, const cw_status_t *st)
{
    if (!st || !st->push_on) return cJSON_AddNullToObject(o, "profile_push") != NULL;
    cJSON *p = cJSON_AddObjectToObject(o, "profile_push");
    int last = atomic_load(&st->push_last_status);
    uint64_t queued = atomic_load(&st->push_queued);
    bool failing = last == -1 || last == 408 || last == 429 || last >= 500;
    bool ok = p && cJSON_AddStringToObject(p, "state", failing && queued ? "retrying" : "ok");
    ok = ok && cw__json_u64(p, "sent", atomic_load(&st->push_sent));
    ok = ok && cw__json_u64(p, "sent_bytes", atomic_load(&st->push_sent_bytes));
    ok = ok && cw__json_u64(p, "retries", atomic_load(&st->push_retries));
    ok = ok && cw__json_u64(p, "dropped_buffer_full", atomic_load(&st->push_dropped_full));
    ok = ok && cw__json_u64(p, "dropped_rejected", atomic_load(&st->push_dropped_rejected));
    ok = ok && cw__json_u64(p, "queued", queued);
    ok = ok && cw__json_u64(p, "queued_bytes", atomic_load(&st->push_queued_bytes));
    ok = ok && cw__json_i64_or_null(p, "last_status", last, 0);
    ok = ok && cw__json_i64_or_null(p, "last_success_ns", atomic_load(&st->push_last_ok_ns),
                                    INT64_MIN);
    ok = ok && cw__json_i64_or_null(p, "built_until_ns", atomic_load(&st->push_until_ns),
                                    INT64_MIN);
    return ok;
}

int cw__http_health(cw__http_req_t *r)
{
    const cw_status_t *st = r->ctx->status;
    cJSON *o = cJSON_CreateObject();
    int64_t now = cw_plat_wall_ns(), end = INT64_MIN, start = INT64_MIN, data_end = INT64_MIN;
    bool ok = o != NULL, ended = false;
    bool db = cw__http_need_store(r) == 0;
    r->err[0] = 0;
    if (db) cw_store_data_span(r->store, &start, &end, NULL);
    if (db) cw_store_data_end(r->store, &data_end, &ended, NULL);
    int serr = st ? atomic_load(&st->store_error) : 0;
    char serr_text[CW_PATH_MAX + 256];
    if (serr)
        snprintf(serr_text, sizeof serr_text,
                 "%s: storing into %s failed; ingestion is paused and retried every second "
                 "until the disk has room (free space, or lower size_cap and retention)",
                 cw_strerror(serr), r->ctx->db_path);
    cw_source_state_t ss = {.up = true};
    if (st && !st->no_source) cw_status_source_get(st, &ss);
    bool src_down = !ss.up && ss.error[0];
    ok = ok && cJSON_AddStringToObject(o, "status", !db                  ? "starting"
                                                    : serr || src_down ? "degraded"
                                                                       : "ok");
    ok = ok && (serr ? cJSON_AddStringToObject(o, "store_error", serr_text) != NULL
                     : cJSON_AddNullToObject(o, "store_error") != NULL);
    ok = ok && cw__json_i64_or_null(o, "store_error_since_ns",
                                    serr ? atomic_load(&st->store_error_since_ns) : INT64_MIN,
                                    INT64_MIN);
    ok = ok && cJSON_AddStringToObject(o, "version", CW_VERSION);
    ok = ok && cJSON_AddStringToObject(o, "source", st ? st->source : "");
    ok = ok && cw__json_i64(o, "now_ns", now);
    ok = ok && cw__json_i64(o, "started_ns", st ? st->start_ns : now);
    ok = ok && cJSON_AddNumberToObject(
                   o, "uptime_s", st ? (double)cw_status_uptime_ns(st, cw_plat_mono_ns()) / 1e9 : 0);
    ok = ok && cw__json_u64(o, "events_ingested", st ? atomic_load(&st->events_ingested) : 0);
    ok = ok && cw__json_u64(o, "source_records", st ? atomic_load(&st->source_records) : 0);
    ok = ok && cw__json_u64(o, "events_lost", st ? atomic_load(&st->events_lost) : 0);
    ok = ok && cw__json_i64(o, "drift_corrected_bytes", st ? atomic_load(&st->drift_bytes) : 0);
    ok = ok && cJSON_AddBoolToObject(o, "ingest_done", st ? atomic_load(&st->ingest_done) : false);
    ok = ok && cJSON_AddBoolToObject(o, "heap_tracing", r->ctx->heap != NULL);
    ok = ok && cJSON_AddStringToObject(o, "db_path", r->ctx->db_path);
    ok = ok && cw__json_u64(o, "db_size_bytes", cw_store_disk_bytes(r->ctx->db_path));
    ok = ok && cw__json_i64_or_null(o, "last_bucket_end_ns", end, INT64_MIN);
    ok = ok && cw__json_i64_or_null(o, "first_bucket_ns", start, INT64_MIN);
    ok = ok && cw__json_i64_or_null(o, "data_end_ns", data_end, INT64_MIN);
    ok =
        ok && cw__json_i64_or_null(o, "tracking_ended_ns", ended ? data_end : INT64_MIN, INT64_MIN);
    ok = ok && cJSON_AddBoolToObject(o, "data_clock", st ? st->data_clock : false);
    ok = ok && losses(o, st);
    /* The source's state, and the database served read-only with no
     * source (`commitwatch serve`) with the platform of its data. */
    ok = ok && source_state(o, st, &ss);
    ok = ok && cJSON_AddBoolToObject(o, "read_only", st && st->no_source);
    char *platform = NULL;
    cw_diag_t pd = {{0}};
    if (db) cw_store_meta_get(r->store, "platform", &platform, &pd);
    ok = ok && (platform ? cJSON_AddStringToObject(o, "platform", platform) != NULL
                         : cJSON_AddNullToObject(o, "platform") != NULL);
    free(platform);
    ok = ok && memory(o);
    ok = ok && profile_push(o, st);
    ok = ok && cw__http_config_json(o, r->ctx->status);
    int rc = ok ? cw__http_send_json(r, o) : cw__http_oom(r);
    cJSON_Delete(o);
    return rc;
}
