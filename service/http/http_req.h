/* http_req.h - a request and its response: what every handler of
 * service/http/ works with.
 *
 * The request (cw__http_req_t: the connection, a read-only store from the
 * pool, the parsed query, the body of a state-changing request) and the
 * server-wide context it points to (cw__http_ctx_t, read-only after
 * start); the response helpers (send, send_json, fail; http_req.c), the
 * query and time parsers (http_params.c) and the JSON helpers
 * (http_json.c). These three files are the floor the resources stand on:
 * they include no resource and never http.c.
 *
 * A handler gets a cw__http_req_t and returns 0 after sending a response,
 * or sends nothing and returns an HTTP status with r->err filled (use
 * cw__http_fail); the dispatcher then sends {"error": err}.
 *
 * Thread: a request and everything it points to belong to the civetweb
 * worker answering it; the context is shared and read-only (its pool and
 * client list lock inside, the status is atomics). */
#ifndef CW_HTTP_REQ_H
#define CW_HTTP_REQ_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "commitwatch/http.h"
#include "commitwatch/store.h"

struct mg_connection;
struct cJSON;
struct cw__http_clients;

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

/* Server-wide, read-only after start (except the status atomics). Owned
 * by the server (http.c); requests borrow it. */
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
    struct cw__http_clients *clients; /* the per-client cap (http_clients.h; own locks) */

    struct cw_mapreq *maps; /* the core thread's live-map channel (map.h); NULL: none */
    /* Every answer's Keep-Alive header, "timeout=N" (N: the idle
     * keep-alive timeout in whole seconds). */
    char keep_alive[32];
    const struct cw_http_heap_ops *heap; /* the service's heap traces (http.h); NULL: none */
    void *heap_ctx;
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

/* ---- responses (http_req.c) ---- */
/* Replaces, in place, every byte of s that is not part of well-formed
 * UTF-8 with '?' (error messages quote what the client sent). */
void cw__http_utf8_clean(char *s);
/* Sends status with body (len bytes) and content type. 0. */
int cw__http_send(cw__http_req_t *r, int status, const char *ctype, const char *body, size_t len);
/* Sends 200 with body as a download named filename (Content-Disposition:
 * attachment; the name must need no quoting: [A-Za-z0-9._-]). 0. */
int cw__http_send_attachment(cw__http_req_t *r, const char *ctype, const char *filename,
                             const char *body, size_t len);
/* Prints and sends a cJSON tree (not freed). 0, or 500 on ENOMEM. */
int cw__http_send_json(cw__http_req_t *r, const struct cJSON *root);
/* A handler's last step with the tree it built: sends root when ok
 * (cw__http_send_json), else cw__http_oom() (building it ran out of
 * memory); frees root either way (NULL accepted). */
int cw__http_send_tree(cw__http_req_t *r, bool ok, struct cJSON *root);
/* Sends {"error": r->err} (UTF-8-cleaned) with status: the answer to a
 * handler's nonzero return. */
void cw__http_send_error(cw__http_req_t *r, int status);
/* Fills r->err and returns status, for `return cw__http_fail(r, 400, ...)`. */
int cw__http_fail(cw__http_req_t *r, int status, const char *fmt, ...) CW_PRINTF(3, 4);
/* 500 "out of memory while building the response". */
int cw__http_oom(cw__http_req_t *r);
/* A failed store read (rc, d): cw__http_oom() for CW_ENOMEM, else 500
 * "query failed: " with d's message (or rc's text when d has none). */
int cw__http_db_fail(cw__http_req_t *r, int rc, const cw_diag_t *d);
/* Requires r->store; a 503 with a message when the db does not exist yet. */
int cw__http_need_store(cw__http_req_t *r);
/* Is auth (an Authorization header, may be NULL) "Bearer " followed by
 * want? The comparison takes the same time wherever the first difference
 * is (it depends on the lengths only). */
bool cw__http_token_ok(const char *want, const char *auth);

/* ---- parameters (http_params.c) ---- */
/* Splits and URL-decodes a query string into r->params. 0, or 400/414. */
int cw__http_parse_query(cw__http_req_t *r, const char *qs);
/* The value of name (marked used), or NULL. */
const char *cw__http_param(cw__http_req_t *r, const char *name);
/* 400 naming the first parameter no handler read, or 0. */
int cw__http_check_unused(cw__http_req_t *r);
/* Index of s in names[0..n), or -1 (an enumerated parameter's value). */
int cw__http_name_index(const char *const *names, int n, const char *s);
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
/* A time: null when t is INT64_MIN or INT64_MAX (never, unbounded), else t. */
struct cJSON *cw__json_time(struct cJSON *obj, const char *name, int64_t t);
/* A string, or null when v is NULL. */
struct cJSON *cw__json_str_or_null(struct cJSON *obj, const char *name, const char *v);
/* v[0..n) as an array named name. */
struct cJSON *cw__json_i64_array(struct cJSON *obj, const char *name, const int64_t *v, uint32_t n);
/* {"from_ns":..,"to_ns":..} added as "window". */
struct cJSON *cw__json_window(struct cJSON *obj, int64_t from, int64_t to);

/* ---- ranking the rows of a response (http_json.c) ---- */
/* A row to sort: by key, largest first, then by id, smallest first; i is
 * the row's index in the caller's array. */
typedef struct cw__http_rank {
    int64_t key;
    uint32_t id;
    uint32_t i;
} cw__http_rank_t;
/* qsort's comparator for cw__http_rank_t. */
int cw__http_rank_cmp(const void *x, const void *y);

#endif
