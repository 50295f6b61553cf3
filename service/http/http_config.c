/* http_config.c - the configuration as the API shows it: the last load's
 * outcome ("config" in /api/health and in the reload's answer) and
 * POST /api/reload, which asks the service to reload its configuration
 * and alert rules (as SIGHUP does) and waits for the outcome.
 *
 * The reload itself runs on the core thread (cw_http_opts_t.on_reload
 * only requests it); this worker polls the status record's counters of
 * loads begun and done. */
#include "http/http_resources.h"

#include <cjson/cJSON.h>
#include <stdio.h>
#include <string.h>

#include "commitwatch/platform.h"

bool cw__http_config_json(cJSON *o, cw_status_t *st)
{
    cw_status_config_t c;
    if (!st) return cJSON_AddNullToObject(o, "config") != NULL;
    cw_status_config_get(st, &c);
    cJSON *j = cJSON_AddObjectToObject(o, "config");
    bool ok = j && cJSON_AddBoolToObject(j, "ok", c.ok);
    ok = ok && (c.ok ? cJSON_AddNullToObject(j, "error") : cJSON_AddStringToObject(j, "error", c.error));
    ok = ok && (c.file[0] ? cJSON_AddStringToObject(j, "file", c.file)
                          : cJSON_AddNullToObject(j, "file"));
    ok = ok && (c.line ? cJSON_AddNumberToObject(j, "line", c.line)
                       : cJSON_AddNullToObject(j, "line"));
    ok = ok && cw__json_i64(j, "at_ns", c.at_ns);
    ok = ok && cJSON_AddStringToObject(j, "loaded_by", c.reload ? "reload" : "start");
    return ok;
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
    if (!text) return cw__http_oom(r);
    rc = cw__http_send(r, !c.ok ? 422 : served || !st ? 200 : 202, "application/json", text,
                       strlen(text));
    cJSON_free(text);
    return rc;
}
