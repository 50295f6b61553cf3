/* http_internal.h - what the files of service/http/ share.
 *
 * One file per resource (in the manner of Fluent Bit's HTTP API):
 * http.c (server, dispatch, security), http_params.c (query strings and
 * times), http_json.c (JSON helpers), http_api.c (health, processes,
 * stacks, diff, tags), http_series.c (process and system series),
 * http_metrics.c (/metrics), http_openapi.c (the OpenAPI document),
 * http_alerts.c (alerts, alert rules and their backtest, silences,
 * reload), http_static.c (the dashboard).
 *
 * The resources build responses from the store's results (store.h,
 * query.h) and run no SQL of their own. A handler gets a cw__http_req_t
 * (the connection, a read-only store from the pool, the parsed query) and returns
 * 0 after sending a response, or sends nothing and returns an HTTP status
 * with req->err filled; the dispatcher then sends {"error": err}. */
#ifndef CW_HTTP_INTERNAL_H
#define CW_HTTP_INTERNAL_H

#include <stdbool.h>
#include <stdint.h>

#include "commitwatch/http.h"
#include "commitwatch/store.h"

struct mg_connection;
struct cJSON;

#define CW__HTTP_MAX_PARAMS 16
#define CW__HTTP_MAX_QUERY 2048    /* bytes of query string */
#define CW__HTTP_MAX_POINTS 100000 /* steps in one series response */
#define CW__HTTP_MAX_WINDOW_NS (400LL * 86400 * CW_NS_PER_S)
/* Read connections the workers share (store_pool.c): a request that
 * finds them all in use waits for one. 4: the two CPUs this is sized for
 * are busy with 2 queries; more connections only add page caches and
 * cold read caches. */
#define CW__HTTP_DB_HANDLES 4
/* C heap arenas in the whole process (cw_plat_heap_arenas), set when the
 * server starts: the workers share them instead of one each. */
#define CW__HTTP_HEAP_ARENAS 2

typedef struct cw__http_param {
    char name[32];
    char value[256];
    bool used; /* read by the handler; unknown names are a 400 */
} cw__http_param_t;

/* Server-wide, read-only after start (except the status atomics). */
typedef struct cw__http_ctx {
    char *db_path;
    char *web_root; /* realpath */
    char *token;    /* NULL = none */
    unsigned metrics_top;
    const char *const *rule_files;
    unsigned nrule_files;
    cw_status_t *status;
    cw_store_share_t *share; /* what the workers' stores share (its own lock) */
    int (*on_reload)(void *ctx, char *msg, size_t msglen);
    void *reload_ctx;
    cw_store_pool_t *pool; /* read handles; locked inside, so usable through const ctx */
    struct cw__http_clients *clients; /* the per-client cap (own locks) */

    struct cw_mapreq *maps; /* the core thread's live-map channel (map.h); NULL: none */
} cw__http_ctx_t;

typedef struct cw__http_req {
    struct mg_connection *conn;
    const cw__http_ctx_t *ctx;
    cw_store_t *store; /* from ctx->pool while this request runs (cw__http_need_store); else NULL */
    const char *path;  /* decoded path, no query */
    cw__http_param_t params[CW__HTTP_MAX_PARAMS];
    int nparams;
    bool head; /* HEAD: headers only */
    const char *method; /* "GET", "HEAD", "POST", "DELETE" */
    char *body;         /* POST: the request body, NUL-terminated; NULL when none */
    size_t body_len;
    const char *allow;  /* a 405's Allow header; NULL = "GET, HEAD" */
    int64_t now_ns;     /* nonzero: "now" of this request (silences: the wall clock) */
    char allow_buf[64];
    char path_buf[8192]; /* r->path: the request's path, decoded (max_request_size) */
    char err[512];
} cw__http_req_t;

/* ---- the per-client connection cap (http_clients.c) ---- */
typedef struct cw__http_conn {
    char addr[48]; /* peer address, numeric */
    int port;      /* peer port */
    bool busy;     /* a worker is answering a request on it */
    intptr_t handle; /* cw_plat_tcp_list's */
} cw__http_conn_t;
typedef struct cw__http_clients cw__http_clients_t;
/* workers: civetweb's worker threads (the most requests answered at
 * once); max: connections allowed per client address (0 = no limit). */
int cw__http_clients_create(unsigned workers, unsigned max, cw__http_clients_t **out);
void cw__http_clients_free(cw__http_clients_t *c); /* accepts NULL */
/* The server's bound port; sweeps do nothing before it is set. */
void cw__http_clients_set_port(cw__http_clients_t *c, int port);
/* Marks the connection addr:port as answering a request (busy) or not. */
void cw__http_clients_busy(cw__http_clients_t *c, const char *addr, int port, bool busy);
/* Which of conns[0..n) to refuse so that no address has more than max
 * (0 = no limit): victim[i] set for those, chosen from the last listed
 * back and never busy. Returns how many. */
size_t cw__http_clients_excess(const cw__http_conn_t *conns, size_t n, unsigned max,
                               bool *victim);
/* Lists the server's connections, refuses the excess with a 429 and
 * shuts them down (a warning in the log, at most every 10 s). Returns
 * how many were refused. */
unsigned cw__http_clients_sweep(cw__http_clients_t *c);

/* ---- security (http.c) ---- */
/* Is auth (an Authorization header, may be NULL) "Bearer " followed by
 * want? The comparison takes the same time wherever the first difference
 * is (it depends on the lengths only). */
bool cw__http_token_ok(const char *want, const char *auth);

/* ---- responses (http.c) ---- */
/* Replaces, in place, every byte of s that is not part of well-formed
 * UTF-8 with '?' (error messages quote what the client sent). */
void cw__http_utf8_clean(char *s);
/* Sends 200 with body (len bytes) and content type. 0. */
int cw__http_send(cw__http_req_t *r, int status, const char *ctype, const char *body, size_t len);
/* Sends 200 with body as a download named filename (Content-Disposition:
 * attachment; the name must need no quoting: [A-Za-z0-9._-]). 0. */
int cw__http_send_attachment(cw__http_req_t *r, const char *ctype, const char *filename,
                             const char *body, size_t len);
/* Prints and sends a cJSON tree (not freed). 0, or 500 on ENOMEM. */
int cw__http_send_json(cw__http_req_t *r, const struct cJSON *root);
/* Fills r->err and returns status, for `return cw__http_fail(r, 400, ...)`. */
int cw__http_fail(cw__http_req_t *r, int status, const char *fmt, ...) CW_PRINTF(3, 4);
/* Requires r->store; a 503 with a message when the db does not exist yet. */
int cw__http_need_store(cw__http_req_t *r);

/* ---- the configuration's state (http_api.c) ---- */
/* Adds "config" to o: the last load's outcome (status.h,
 * cw_status_config_t): {"ok", "error", "file", "line", "at_ns",
 * "loaded_by"}; null without a status. false on ENOMEM. */
bool cw__http_config_json(struct cJSON *o, cw_status_t *st);

/* ---- parameters (http_params.c) ---- */
/* Splits and URL-decodes a query string into r->params. 0, or 400/414. */
int cw__http_parse_query(cw__http_req_t *r, const char *qs);
/* The value of name (marked used), or NULL. */
const char *cw__http_param(cw__http_req_t *r, const char *name);
/* 400 naming the first parameter no handler read, or 0. */
int cw__http_check_unused(cw__http_req_t *r);
/* "now" for relative times: r->now_ns when set, else the wall clock, or
 * the end of the data for a replay (status->data_clock). */
int64_t cw__http_now(cw__http_req_t *r);
/* Parses a time: Unix ns integer, RFC 3339 ("2026-11-29T10:00:00Z",
 * fractions and offsets allowed), "now", or relative "-15m" / "+2h" /
 * "-30s" / "-500ms" / "-1d" (from now). 0, or 400 naming name. */
int cw__http_parse_time(cw__http_req_t *r, const char *name, const char *s, int64_t *out);
/* Reads from/to (default: the hour before now) and checks from < to and
 * the window's size. 0 or a 4xx. */
int cw__http_window(cw__http_req_t *r, int64_t *from, int64_t *to);
/* A duration like "60s", "1m", "500ms", or plain ns. 0 or 400. */
int cw__http_parse_duration(cw__http_req_t *r, const char *name, const char *s, int64_t *out);
/* A decimal integer in [lo, hi]. 0 or 400. */
int cw__http_parse_uint(cw__http_req_t *r, const char *name, const char *s, uint64_t lo,
                        uint64_t hi, uint64_t *out);

/* ---- JSON helpers (http_json.c): the new item, or NULL on ENOMEM ---- */
struct cJSON *cw__json_i64(struct cJSON *obj, const char *name, int64_t v);
struct cJSON *cw__json_u64(struct cJSON *obj, const char *name, uint64_t v);
struct cJSON *cw__json_raw_i64(int64_t v);
/* null when v == none, else v. */
struct cJSON *cw__json_i64_or_null(struct cJSON *obj, const char *name, int64_t v, int64_t none);
/* v[0..n) as an array named name. */
struct cJSON *cw__json_i64_array(struct cJSON *obj, const char *name, const int64_t *v, uint32_t n);
/* {"from_ns":..,"to_ns":..} added as "window". */
struct cJSON *cw__json_window(struct cJSON *obj, int64_t from, int64_t to);

/* ---- resources ---- */
int cw__http_health(cw__http_req_t *r);
int cw__http_processes(cw__http_req_t *r);
int cw__http_process(cw__http_req_t *r, uint32_t id);
int cw__http_stacks(cw__http_req_t *r, uint32_t id);
/* ?format= and ?value= of a stacks resource (http_api.c): *wanted false
 * when there is no format (the JSON answer). 0 or 400. */
struct cw_export_opts;
int cw__http_export_params(cw__http_req_t *r, struct cw_export_opts *o, bool *wanted);
/* Sends procs[0..n)'s stacks over [from, to) as o says (export.h), as a
 * download named commitwatch-STEM-FROM-TO.SUFFIX. 0 or 500. */
int cw__http_send_export(cw__http_req_t *r, const cw_proc_report_t *procs, uint32_t n,
                         int64_t from, int64_t to, const char *stem,
                         const struct cw_export_opts *o);

/* /api/stacks: every process's stacks of the window (the machine's flame graph). */
int cw__http_system_stacks(cw__http_req_t *r);
/* The folded instances of a group (or the instance itself), http_api.c. */
int cw__http_instances(cw__http_req_t *r, uint32_t id);
int cw__http_diff(cw__http_req_t *r);
int cw__http_tags(cw__http_req_t *r);
int cw__http_series(cw__http_req_t *r, uint32_t id); /* id 0: the whole system */
int cw__http_map(cw__http_req_t *r, uint32_t id);    /* http_map.c */
int cw__http_metrics(cw__http_req_t *r);
int cw__http_openapi(cw__http_req_t *r);
/* http_alerts.c (alerts.h, alertdb.h): GET lists and details, the
 * backtest, silences (POST and DELETE need the token), reload. */
int cw__http_alerts(cw__http_req_t *r);
int cw__http_alert(cw__http_req_t *r, uint32_t id);
int cw__http_alert_transitions(cw__http_req_t *r);
int cw__http_alert_rules(cw__http_req_t *r);
int cw__http_alert_backtest(cw__http_req_t *r, const char *rule);
int cw__http_silences(cw__http_req_t *r);
int cw__http_silence_add(cw__http_req_t *r);
int cw__http_silence_delete(cw__http_req_t *r, uint32_t id);
int cw__http_reload(cw__http_req_t *r);
/* Static files; 0 after sending (404 included). */
int cw__http_static(cw__http_req_t *r);

#endif
