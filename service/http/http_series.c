/* http_series.c - /api/processes/{id}/series and /api/system/series: time
 * series of a process or of the whole machine, outstanding by tag,
 * committed, decommitted, transient and peak per step.
 *
 * The figures are cw_store_series()'s (query.h; how they are read is in
 * service/store/store_series.c and docs/DESIGN.md, "HTTP"); this file
 * owns the parameters (the step, its default, the points limit) and the
 * JSON, which is columnar (one array per figure) for the dashboard's
 * charts. */
#include "http/http_resources.h"

#include <cjson/cJSON.h>
#include <inttypes.h>
#include <stdio.h>

#include "commitwatch/downtime.h"
#include "commitwatch/event.h"
#include "commitwatch/query.h"


/* A step that gives at most ~1000 points. */
static int64_t auto_step(int64_t span)
{
    static const int64_t nice[] = {1,     2,     5,     10,    15,     30,    60,
                                   120,   300,   600,   900,   1800,   3600,  7200,
                                   10800, 21600, 43200, 86400, 172800, 604800};
    for (size_t i = 0; i < CW_ARRAY_LEN(nice); i++)
        if (span / (nice[i] * CW_NS_PER_S) <= 1000) return nice[i] * CW_NS_PER_S;
    return 604800 * CW_NS_PER_S;
}

/* The JSON of series s (proc: its row, or NULL for the machine); NULL on
 * ENOMEM. */
static cJSON *series_json(const cw_series_t *s, const cw_proc_info_t *proc)
{
    cJSON *o = cJSON_CreateObject(), *outs, *tags, *pj;
    bool ok = o && cw__json_window(o, s->from_ns, s->to_ns) &&
              cw__json_i64(o, "step_ns", s->step_ns) &&
              cJSON_AddNumberToObject(o, "tier", s->tier) &&
              cw__json_i64(o, "outstanding_start_bytes", s->outstanding_start);
    if (ok && proc)
        ok = (pj = cJSON_AddObjectToObject(o, "process")) && cw__json_u64(pj, "id", proc->id) &&
             cw__json_u64(pj, "pid", proc->pid) &&
             cJSON_AddStringToObject(pj, "name", proc->name) &&
             (proc->cmdline ? cJSON_AddStringToObject(pj, "cmdline", proc->cmdline)
                            : cJSON_AddNullToObject(pj, "cmdline")) &&
             cw__json_i64(pj, "start_ns", proc->start_ns) &&
             cw__json_i64_or_null(pj, "exit_ns", proc->exit_ns, CW_TS_NEVER) &&
             cw__json_i64_or_null(pj, "tracking_ended_ns", proc->tracking_ended_ns, CW_TS_NEVER) &&
             cw__json_u64(pj, "folded", proc->folded > 1 ? proc->folded : 0) &&
             /* corrected from the OS's figures (docs/LINUX.md, "Losses and drift") */
             cw__json_u64(pj, "corrections", proc->corrections) &&
             cw__json_u64(pj, "corrected_bytes",
                          proc->corrected_committed + proc->corrected_decommitted) &&
             cw__json_i64_or_null(pj, "last_correction_ns", proc->last_correction_ns,
                                  CW_TS_NEVER);
    if (ok && s->clipped_at != INT64_MIN) {
        char note[200];
        snprintf(note, sizeof note,
                 "the window is clipped to the end of the data at %" PRId64 ", where tracking "
                 "ended: the last step's figures are up to it",
                 s->clipped_at);
        ok = cJSON_AddStringToObject(o, "note", note) != NULL;
    }
    ok = ok && cw__json_i64_array(o, "t", s->t, s->npoints) &&
         (tags = cJSON_AddArrayToObject(o, "tags")) &&
         (outs = cJSON_AddObjectToObject(o, "outstanding"));
    for (uint32_t t = 0; ok && t < s->ntags; t++)
        ok = cJSON_AddItemToArray(tags, cJSON_CreateString(s->tags[t].name)) &&
             cw__json_i64_array(outs, s->tags[t].name, s->tags[t].outstanding, s->npoints);
    ok = ok && cw__json_i64_array(o, "outstanding_total", s->outstanding_total, s->npoints) &&
         cw__json_i64_array(o, "committed_bytes", s->committed, s->npoints) &&
         cw__json_i64_array(o, "commit_count", s->commit_count, s->npoints) &&
         cw__json_i64_array(o, "decommitted_bytes", s->decommitted, s->npoints) &&
         cw__json_i64_array(o, "transient_bytes", s->transient, s->npoints) &&
         cw__json_i64_array(o, "transient_count", s->transient_count, s->npoints) &&
         cw__json_i64_array(o, "peak_bytes", s->peak, s->npoints) &&
         cJSON_AddStringToObject(o, "peak_kind", s->peak_exact ? "exact" : "upper_bound");
    if (!ok) {
        cJSON_Delete(o);
        return NULL;
    }
    return o;
}

/* The steps that lie wholly inside a stretch the live source was down
 * (downtime.h) have no data: every figure of theirs is null, so a chart
 * draws nothing there (uPlot: a gap), never the flat line or the zeros
 * the stored state would give. "source_down" lists those stretches that
 * meet the window ([from, to], to null while still down). false on ENOMEM. */
static bool gaps_json(cJSON *o, const cw_series_t *s, const cw_downtime_t *dt)
{
    static const char *const figs[] = {"outstanding_total", "committed_bytes", "commit_count",
                                       "decommitted_bytes", "transient_bytes", "transient_count",
                                       "peak_bytes"};
    cJSON *list = cJSON_AddArrayToObject(o, "source_down");
    bool ok = list != NULL;
    for (size_t i = 0; ok && i < dt->n; i++) {
        if (dt->to[i] <= s->from_ns || dt->from[i] >= s->to_ns) continue;
        cJSON *pair = cJSON_CreateArray();
        ok = pair && cJSON_AddItemToArray(list, pair) &&
             cJSON_AddItemToArray(pair, cw__json_raw_i64(dt->from[i])) &&
             cJSON_AddItemToArray(pair, dt->to[i] == INT64_MAX ? cJSON_CreateNull()
                                                               : cw__json_raw_i64(dt->to[i]));
    }
    cJSON *outs = cJSON_GetObjectItem(o, "outstanding");
    for (uint32_t k = 0; ok && k < s->npoints; k++) {
        if (!cw_downtime_covers(dt, s->t[k], s->t[k] + s->step_ns)) continue;
        for (size_t f = 0; ok && f < CW_ARRAY_LEN(figs); f++)
            ok = cJSON_ReplaceItemInArray(cJSON_GetObjectItem(o, figs[f]), (int)k,
                                          cJSON_CreateNull());
        for (cJSON *a = outs ? outs->child : NULL; ok && a; a = a->next)
            ok = cJSON_ReplaceItemInArray(a, (int)k, cJSON_CreateNull());
    }
    return ok;
}

int cw__http_series(cw__http_req_t *r, uint32_t proc)
{
    cw_series_query_t q = {.proc = proc};
    const char *ss = cw__http_param(r, "step");
    int rc = cw__http_window(r, &q.from_ns, &q.to_ns);
    if (rc) return rc;
    if (ss) {
        if ((rc = cw__http_parse_duration(r, "step", ss, &q.step_ns))) return rc;
        if (q.step_ns % CW_NS_PER_S)
            return cw__http_fail(r, 400, "step: must be a whole number of seconds (1s, 60s, 5m)");
    } else
        q.step_ns = auto_step(q.to_ns - q.from_ns);

    cw_proc_info_t info = {0};
    cw_series_t *s = NULL;
    cJSON *o = NULL;
    cw_diag_t d = {{0}};
    if (proc && (rc = cw_store_proc_get(r->store, proc, &info, &d))) {
        return rc == CW_ENOENT ? cw__http_fail(r, 404, "id: no process instance %" PRIu32, proc)
                               : cw__http_fail(r, 500, "query failed: %s", d.msg);
    }
    uint64_t n = cw_series_steps(&q, NULL);
    if (n > CW__HTTP_MAX_POINTS) {
        rc = cw__http_fail(r, 400,
                           "step: the window has %" PRIu64 " steps of %" PRId64
                           " s, more than %d; use a larger step or a shorter window",
                           n, (int64_t)(q.step_ns / CW_NS_PER_S), CW__HTTP_MAX_POINTS);
        goto out;
    }
    if ((rc = cw_store_series(r->store, &q, &s, &d))) {
        rc = rc == CW_ENOMEM ? cw__http_fail(r, 500, "out of memory")
                             : cw__http_fail(r, 500, "query failed: %s", d.msg);
        goto out;
    }
    o = series_json(s, proc ? &info : NULL);
    cw_downtime_t dt;
    if (o && cw_store_downtime_get(r->store, &dt, &d) != 0) dt.n = 0; /* advisory: no gaps */
    if (o && !gaps_json(o, s, &dt)) {
        cJSON_Delete(o);
        o = NULL;
    }
    rc = o ? cw__http_send_json(r, o) : cw__http_fail(r, 500, "out of memory");
out:
    cJSON_Delete(o);
    cw_series_free(s);
    cw_proc_info_clear(&info);
    return rc;
}

int cw__http_system_series(cw__http_req_t *r)
{
    return cw__http_series(r, 0);
}
