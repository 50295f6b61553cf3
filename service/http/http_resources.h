/* http_resources.h - the resources of the API: the handlers the route
 * table (http_routes.c) names, one block per resource file, and the few
 * helpers one resource lends another.
 *
 * Every handler takes the request (http_req.h) and returns 0 after
 * sending its answer, or an HTTP status with r->err filled. A handler
 * whose route needs the database finds r->store set; "{id}" routes get
 * the id, a positive 32-bit integer, and "{name}" routes the name, 1 to
 * 127 bytes without '/'. Thread: the civetweb worker answering the
 * request. */
#ifndef CW_HTTP_RESOURCES_H
#define CW_HTTP_RESOURCES_H

#include <stdbool.h>
#include <stdint.h>

#include "http/http_req.h"

struct cJSON;

/* ---- http_api.c: health, processes, stacks, diff, tags ---- */
int cw__http_health(cw__http_req_t *r);
int cw__http_processes(cw__http_req_t *r);
int cw__http_process(cw__http_req_t *r, uint32_t id);
int cw__http_stacks(cw__http_req_t *r, uint32_t id);
/* /api/stacks: every process's stacks of the window (the machine's flame graph). */
int cw__http_system_stacks(cw__http_req_t *r);
/* The folded instances of a group (or the instance itself). */
int cw__http_instances(cw__http_req_t *r, uint32_t id);
int cw__http_diff(cw__http_req_t *r);
int cw__http_tags(cw__http_req_t *r);
/* Adds "config" to o: the last load's outcome (status.h,
 * cw_status_config_t): {"ok", "error", "file", "line", "at_ns",
 * "loaded_by"}; null without a status. false on ENOMEM. */
bool cw__http_config_json(struct cJSON *o, cw_status_t *st);

/* ---- http_series.c ---- */
int cw__http_series(cw__http_req_t *r, uint32_t id); /* id 0: the whole system */
int cw__http_system_series(cw__http_req_t *r);       /* /api/system/series */

/* ---- http_map.c ---- */
int cw__http_map(cw__http_req_t *r, uint32_t id);

/* ---- http_metrics.c ---- */
int cw__http_metrics(cw__http_req_t *r);

/* ---- http_openapi.c ---- */
int cw__http_openapi(cw__http_req_t *r);

/* ---- http_alerts.c (alerts.h, alertdb.h): GET lists and details, the
 * backtest, silences (POST and DELETE need the token), reload ---- */
int cw__http_alerts(cw__http_req_t *r);
int cw__http_alert(cw__http_req_t *r, uint32_t id);
int cw__http_alert_transitions(cw__http_req_t *r);
int cw__http_alert_rules(cw__http_req_t *r);
int cw__http_alert_backtest(cw__http_req_t *r, const char *rule);
int cw__http_silences(cw__http_req_t *r);
int cw__http_silence_add(cw__http_req_t *r);
int cw__http_silence_delete(cw__http_req_t *r, uint32_t id);
int cw__http_reload(cw__http_req_t *r);

/* ---- http_static.c: the dashboard's files; 0 after sending (404 included) ---- */
int cw__http_static(cw__http_req_t *r);

#endif
