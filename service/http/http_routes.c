/* http_routes.c - the route table: method and path pattern to handler,
 * and dispatch through it.
 *
 * One static table, one row a route: the method ("GET" serves GET and
 * HEAD; POST and DELETE change state, and begin_request in http.c has
 * already checked their token and read their body), the path pattern
 * (a "{id}" is a positive 32-bit integer, a "{name}" 1 to 127 bytes
 * without '/'), the query parameters the route takes (any other is a 400
 * naming it), whether it needs the database, and the handler
 * (http_resources.h). The OpenAPI document (http_openapi.c) lists the
 * same routes; test_http checks that they agree.
 *
 * A path some route matches with another method is a 405 with an Allow
 * header listing the methods it takes; an unknown /api/ path a 404; any
 * other path a static file (http_static.c). */
#include "http/http_routes.h"

#include <stdio.h>
#include <string.h>

#include "commitwatch/common.h"
#include "http/http_resources.h"

#define NEEDS_DB 1 /* the handler reads the store: r->store is set first */

typedef struct route {
    const char *method;  /* "GET" (and HEAD), "POST" or "DELETE" */
    const char *pattern; /* "/api/processes/{id}/series" */
    const char *params;  /* allowed query parameters, comma-separated */
    unsigned flags;      /* NEEDS_DB */
    /* The handler: plain, or with the path's {id} or {name}. */
    int (*plain)(cw__http_req_t *r);
    int (*with_id)(cw__http_req_t *r, uint32_t id);
    int (*with_name)(cw__http_req_t *r, const char *name);
} route_t;

static const route_t routes[] = {
    {"GET", "/api/health", "", 0, .plain = cw__http_health},
    {"GET", "/api/openapi.json", "", 0, .plain = cw__http_openapi},
    {"GET", "/api/processes", "from,to,sort,limit,name,pid,layer", NEEDS_DB, .plain = cw__http_processes},
    {"GET", "/api/processes/{id}", "from,to", NEEDS_DB, .with_id = cw__http_process},
    {"GET", "/api/processes/{id}/series", "from,to,step", NEEDS_DB, .with_id = cw__http_series},
    {"GET", "/api/processes/{id}/stacks", "from,to,type,tag,sort,limit,tree,format,value,layer",
     NEEDS_DB,
     .with_id = cw__http_stacks},
    {"GET", "/api/processes/{id}/instances", "from,to,limit", NEEDS_DB,
     .with_id = cw__http_instances},
    {"GET", "/api/processes/{id}/map", "at,t1,t2", NEEDS_DB, .with_id = cw__http_map},
    {"GET", "/api/diff", "process,t1,t2,limit,layer", NEEDS_DB, .plain = cw__http_diff},
    {"GET", "/api/system/series", "from,to,step", NEEDS_DB, .plain = cw__http_system_series},
    {"GET", "/api/stacks", "from,to,type,tag,sort,limit,tree,format,value,layer", NEEDS_DB,
     .plain = cw__http_system_stacks},
    {"GET", "/api/tags", "", NEEDS_DB, .plain = cw__http_tags},
    {"GET", "/metrics", "", NEEDS_DB, .plain = cw__http_metrics},
    {"GET", "/api/alerts", "state,severity,rule,process,tag,limit", NEEDS_DB,
     .plain = cw__http_alerts},
    {"GET", "/api/alerts/{id}", "", NEEDS_DB, .with_id = cw__http_alert},
    {"GET", "/api/alert-transitions", "from,to,limit", NEEDS_DB,
     .plain = cw__http_alert_transitions},
    {"GET", "/api/alert-rules", "", NEEDS_DB, .plain = cw__http_alert_rules},
    {"GET", "/api/alert-rules/{name}/backtest", "from,to,interval", NEEDS_DB,
     .with_name = cw__http_alert_backtest},
    {"GET", "/api/silences", "state", NEEDS_DB, .plain = cw__http_silences},
    {"POST", "/api/silences", "", NEEDS_DB, .plain = cw__http_silence_add},
    {"DELETE", "/api/silences/{id}", "", NEEDS_DB, .with_id = cw__http_silence_delete},
    {"POST", "/api/reload", "", 0, .plain = cw__http_reload},
    {"POST", "/api/processes/{id}/heap-trace", "", NEEDS_DB, .with_id = cw__http_heap_trace_start},
    {"GET", "/api/heap-traces", "alert,pid,process,limit", NEEDS_DB, .plain = cw__http_heap_traces},
    {"GET", "/api/heap-traces/{id}", "format,value", NEEDS_DB, .with_id = cw__http_heap_trace},
    {"GET", "/api/heap-traces/{id}/diff", "a,b", NEEDS_DB, .with_id = cw__http_heap_trace_diff},
    {"POST", "/api/heap-traces/{id}/stop", "", 0, .with_id = cw__http_heap_trace_stop},
};

bool cw__http_route_at(size_t i, const char **method, const char **pattern)
{
    if (i >= CW_ARRAY_LEN(routes)) return false;
    *method = routes[i].method;
    *pattern = routes[i].pattern;
    return true;
}

/* Is name in the comma-separated list? */
static bool allowed(const char *list, const char *name)
{
    size_t n = strlen(name);
    for (const char *p = list; *p;) {
        const char *e = strchr(p, ',');
        size_t len = e ? (size_t)(e - p) : strlen(p);
        if (len == n && strncmp(p, name, n) == 0) return true;
        if (!e) break;
        p = e + 1;
    }
    return false;
}

/* What a path held where its route's pattern has "{id}" or "{name}". */
typedef struct hole {
    uint32_t id;
    bool bad_id; /* "{id}" held something other than a positive 32-bit integer */
    char name[128];
} hole_t;

/* Matches path against the pattern's prefix pfx[0..pl), an id, and the
 * suffix sfx. */
static bool match_id(const char *pfx, size_t pl, const char *sfx, const char *path, hole_t *h)
{
    if (strncmp(path, pfx, pl) != 0) return false;
    const char *p = path + pl, *slash = strchr(p, '/');
    size_t idlen = slash ? (size_t)(slash - p) : strlen(p);
    if (idlen == 0 || strcmp(p + idlen, sfx) != 0) return false;
    uint64_t v = 0;
    for (size_t i = 0; i < idlen; i++) {
        if (p[i] < '0' || p[i] > '9' || v > UINT32_MAX / 10) {
            h->bad_id = true;
            return true;
        }
        v = v * 10 + (uint64_t)(p[i] - '0');
    }
    if (v == 0 || v > UINT32_MAX) h->bad_id = true;
    h->id = (uint32_t)v;
    return true;
}

/* Matches path against the pattern's prefix pfx[0..pl), a name of 1 to
 * 127 bytes without '/', and the suffix sfx; the name is copied into h. */
static bool match_name(const char *pfx, size_t pl, const char *sfx, const char *path, hole_t *h)
{
    size_t sl = strlen(sfx), n = strlen(path);
    if (n <= pl + sl || strncmp(path, pfx, pl) != 0 || strcmp(path + n - sl, sfx)) return false;
    size_t len = n - pl - sl;
    if (len >= sizeof h->name || memchr(path + pl, '/', len)) return false;
    memcpy(h->name, path + pl, len);
    h->name[len] = 0;
    return true;
}

/* Does rt's pattern match path? h receives what its hole held. */
static bool route_matches(const route_t *rt, const char *path, hole_t *h)
{
    const char *hole = strchr(rt->pattern, '{');
    *h = (hole_t){0};
    if (!hole) return strcmp(path, rt->pattern) == 0;
    const char *sfx = strchr(hole, '}') + 1;
    size_t pl = (size_t)(hole - rt->pattern);
    return rt->with_id ? match_id(rt->pattern, pl, sfx, path, h)
                       : match_name(rt->pattern, pl, sfx, path, h);
}

/* Does route rt serve method m? */
static bool serves(const route_t *rt, const char *m)
{
    return strcmp(rt->method, "GET") == 0 ? strcmp(m, "GET") == 0 || strcmp(m, "HEAD") == 0
                                          : strcmp(m, rt->method) == 0;
}

/* The methods r->path takes, for a 405's Allow header, into r->allow. */
static void set_allow(cw__http_req_t *r)
{
    size_t n = 0;
    r->allow = NULL;
    for (size_t i = 0; i < CW_ARRAY_LEN(routes) && n < sizeof r->allow_buf; i++) {
        hole_t h;
        if (!route_matches(&routes[i], r->path, &h)) continue;
        const char *m = strcmp(routes[i].method, "GET") == 0 ? "GET, HEAD" : routes[i].method;
        n += (size_t)snprintf(r->allow_buf + n, sizeof r->allow_buf - n, "%s%s", n ? ", " : "", m);
    }
    if (n) r->allow = r->allow_buf;
}

/* Checks r against route rt (its path matched, h what the hole held) and
 * calls the handler. */
static int answer(cw__http_req_t *r, const route_t *rt, const hole_t *h)
{
    if (h->bad_id)
        return cw__http_fail(r, 400, "id: %s",
                             strncmp(rt->pattern, "/api/processes/", 15) == 0
                                 ? "a process instance id is a positive integer"
                                 : "an id is a positive integer");
    for (int k = 0; k < r->nparams; k++)
        if (!allowed(rt->params, r->params[k].name))
            return cw__http_fail(r, 400, "%s: unknown parameter for %s", r->params[k].name,
                                 rt->pattern);
    if (rt->flags & NEEDS_DB) {
        int rc = cw__http_need_store(r);
        if (rc) return rc;
    }
    return rt->plain     ? rt->plain(r)
           : rt->with_id ? rt->with_id(r, h->id)
                         : rt->with_name(r, h->name);
}

int cw__http_dispatch(cw__http_req_t *r)
{
    bool path_known = false;
    for (size_t i = 0; i < CW_ARRAY_LEN(routes); i++) {
        hole_t h;
        if (!route_matches(&routes[i], r->path, &h)) continue;
        if (serves(&routes[i], r->method)) return answer(r, &routes[i], &h);
        path_known = true;
    }
    if (path_known) {
        set_allow(r);
        return cw__http_fail(r, 405, "method %s: %s takes %s", r->method, r->path,
                             r->allow ? r->allow : "GET, HEAD");
    }
    if (strcmp(r->method, "GET") != 0 && strcmp(r->method, "HEAD") != 0)
        return cw__http_fail(r, 405, "method %s: %s has no state-changing operation", r->method,
                             r->path);
    if (strncmp(r->path, "/api/", 5) == 0 || strcmp(r->path, "/api") == 0)
        return cw__http_fail(r, 404, "no such endpoint: %s (see /api/openapi.json)", r->path);
    return cw__http_static(r);
}
