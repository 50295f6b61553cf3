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

#include "commitwatch/query.h"
#include "http/http_req.h"

struct cJSON;

/* ---- http_health.c ---- */
int cw__http_health(cw__http_req_t *r);

/* ---- http_config.c: the configuration's state, POST /api/reload ---- */
/* Adds "config" to o: the last load's outcome (status.h,
 * cw_status_config_t): {"ok", "error", "file", "line", "at_ns",
 * "loaded_by"}; null without a status. false on ENOMEM. */
bool cw__http_config_json(struct cJSON *o, cw_status_t *st);
int cw__http_reload(cw__http_req_t *r);

/* ---- http_processes.c ---- */
int cw__http_processes(cw__http_req_t *r);
int cw__http_process(cw__http_req_t *r, uint32_t id);
/* The folded instances of a group (or the instance itself). */
int cw__http_instances(cw__http_req_t *r, uint32_t id);
/* Figures of [from, to) from r->store (with the stacks' frames when
 * frames), sorted (cw_report_sort); *out freed with cw_report_free().
 * ?layer=heap: the heap layer's (heap traces' allocations, on a read
 * handle of the request's own), ?layer=commit (the default) the commit
 * layer's. 0, 400 for another layer, or 500 with the store's message. */
int cw__http_window_report(cw__http_req_t *r, int64_t from, int64_t to, bool frames,
                           cw_report_t **out);
/* A process instance not active in a window: zero figures, its row. */
typedef struct cw__http_idle_proc {
    cw_proc_info_t info; /* owns the strings p borrows */
    cw_proc_report_t p;
} cw__http_idle_proc_t;
/* Instance id in rep (*out borrows from rep), or, when it was not active
 * in the window, a zero-figure report of its row in *tmp (*out borrows
 * tmp; free with cw_proc_info_clear(&tmp->info) in either case, tmp
 * zeroed first). 0, 404 or 500. */
int cw__http_proc_in(cw__http_req_t *r, cw_report_t *rep, uint32_t id, cw__http_idle_proc_t *tmp,
                     const cw_proc_report_t **out);

/* ---- http_stacks.c: stacks (list, tree, profile files) and the diff ---- */
int cw__http_stacks(cw__http_req_t *r, uint32_t id);
/* /api/stacks: every process's stacks of the window (the machine's flame graph). */
int cw__http_system_stacks(cw__http_req_t *r);
int cw__http_diff(cw__http_req_t *r);

/* ---- http_tags.c ---- */
int cw__http_tags(cw__http_req_t *r);

/* ---- http_series.c ---- */
int cw__http_series(cw__http_req_t *r, uint32_t id); /* id 0: the whole system */
int cw__http_system_series(cw__http_req_t *r);       /* /api/system/series */

/* ---- http_map.c ---- */
int cw__http_map(cw__http_req_t *r, uint32_t id);

/* ---- http_metrics.c ---- */
int cw__http_metrics(cw__http_req_t *r);

/* ---- http_openapi.c ---- */
int cw__http_openapi(cw__http_req_t *r);

/* ---- http_alerts.c (alerts.h, alertdb.h): lists, details, rules, the backtest ---- */
int cw__http_alerts(cw__http_req_t *r);
int cw__http_alert(cw__http_req_t *r, uint32_t id);
int cw__http_alert_transitions(cw__http_req_t *r);
int cw__http_alert_rules(cw__http_req_t *r);
int cw__http_alert_backtest(cw__http_req_t *r, const char *rule);

/* ---- http_silences.c: the list; POST and DELETE (they need the token) ---- */
int cw__http_silences(cw__http_req_t *r);
int cw__http_silence_add(cw__http_req_t *r);
int cw__http_silence_delete(cw__http_req_t *r, uint32_t id);

/* ---- http_heap.c: heap traces (heapdb.h); POSTs need the token ---- */
int cw__http_heap_traces(cw__http_req_t *r);
int cw__http_heap_trace(cw__http_req_t *r, uint32_t id);
int cw__http_heap_trace_start(cw__http_req_t *r, uint32_t id); /* id: a process instance */
int cw__http_heap_trace_stop(cw__http_req_t *r, uint32_t id);
int cw__http_heap_trace_diff(cw__http_req_t *r, uint32_t id);

/* ---- http_static.c: the dashboard's files; 0 after sending (404 included) ---- */
int cw__http_static(cw__http_req_t *r);

#endif
