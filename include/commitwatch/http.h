/* http.h - the embedded HTTP server: REST API, /metrics, dashboard.
 *
 * civetweb serves, on its own worker threads, the JSON API under /api/
 * (described by /api/openapi.json), Prometheus text at /metrics, and the
 * static dashboard from a web root (web/ in the source tree or the
 * installed share/commitwatch/web). See docs/DESIGN.md, "HTTP".
 *
 * Threads (DESIGN): cw_http_start() and cw_http_stop() are called by the
 * thread that runs the service (the core thread). Each civetweb worker
 * opens its own read-only cw_store on the database file and reads nothing
 * else of the process but the service's cw_status_t (status.h), which the
 * core thread updates with atomics. Workers never touch ingest structures.
 *
 * Security: only GET and HEAD are served unless a token is configured;
 * the state-changing endpoints (POST and DELETE: silences, reload, heap
 * traces) also
 * require it (Authorization: Bearer) and take a JSON body of at most
 * CW_HTTP_MAX_BODY bytes.
 * The default listen address is loopback; binding elsewhere without a
 * token logs a warning. Static files never resolve outside the web root.
 * Request line, headers and query strings are size-limited; a request's
 * head and an idle keep-alive connection have deadlines, and one client
 * address can hold only so many connections (docs/RELIABILITY.md,
 * "Hostile HTTP clients"). No CORS headers. */
#ifndef COMMITWATCH_HTTP_H
#define COMMITWATCH_HTTP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "commitwatch/error.h"
#include "commitwatch/status.h"

#define CW_HTTP_DEFAULT_LISTEN "127.0.0.1:8470"
#define CW_HTTP_MAX_BODY 65536 /* bytes of a POST body; more is a 413 */
#define CW_HTTP_DEFAULT_THREADS 32
#define CW_HTTP_MAX_THREADS 1024

typedef struct cw_http_opts {
    const char *listen;     /* "ADDR:PORT"; NULL = CW_HTTP_DEFAULT_LISTEN */
    const char *db_path;    /* the database the service writes; required */
    const char *web_root;   /* NULL = cw_http_default_web_root() */
    const char *token;      /* NULL or "" = no token: GET/HEAD only */
    const char *access_log; /* NULL = no access log; else a file path */
    /* Hostile clients (docs/RELIABILITY.md, "Hostile HTTP clients"): a
     * connection holds a worker from when one takes it until it closes. */
    unsigned threads;            /* worker threads; 0 = CW_HTTP_DEFAULT_THREADS */
    unsigned request_timeout_ms; /* a request's line and headers must arrive
                                  * within this of a worker taking the
                                  * connection; also each wait of a slow
                                  * body read or response write; 0 = 5000 */
    unsigned idle_timeout_ms;    /* keep-alive: the next request's head must
                                  * arrive within this; 0 = 2000 */
    unsigned client_connections; /* connections one client address may
                                  * have open; 0 = no limit */
    unsigned metrics_top;   /* processes with their own /metrics series; 0 = 20 */
    /* The stack-tag rule files at startup, shown by /api/tags while the
     * database records none (the service records the ones in force with
     * each re-tag: CW_RULE_FILES_META_KEY). Borrowed for the server's
     * life; may be NULL with nrule_files 0. */
    const char *const *rule_files;
    unsigned nrule_files;
    cw_status_t *status; /* borrowed for the server's life; may be NULL */
    /* POST /api/reload (with the token): reloads the configuration and the
     * alert rules as SIGHUP does. Called on an HTTP worker thread, so it
     * must be safe to call from any thread (the service's reload is).
     * Returns 0 once requested, or a CW_E* code with msg (msglen bytes)
     * saying what failed (the client gets 500 with msg). After a 0 the
     * endpoint waits (up to 10 s) for `status` to count a load begun
     * after the request as done and answers its outcome (status.h,
     * cw_status_config_t): 200, 422 naming the file and line, or 202 when
     * not served in time; without `status`, 200 at once. NULL: the
     * endpoint answers 501. ctx is passed back as is. */
    int (*on_reload)(void *ctx, char *msg, size_t msglen);
    void *reload_ctx;
    /* The core thread's channel for live memory maps (map.h): the map
     * endpoint asks it for a live instance's ranges and never reads the
     * tracker itself. Borrowed for the server's life; NULL: stored
     * snapshots only. */
    struct cw_mapreq *maps;
    /* The heap drill-down (heaptraces.h), which the service runs: POST
     * /api/processes/{id}/heap-trace and POST /api/heap-traces/{id}/stop
     * (with the token) go through it, and the list shows a running
     * trace's progress from it. Called on HTTP worker threads. NULL: those
     * POSTs answer 501 (a server with no source, `serve`); the stored
     * traces are still listed. heap_ctx is passed back as is. */
    const struct cw_http_heap_ops *heap;
    void *heap_ctx;
} cw_http_opts_t;

/* What the HTTP server asks of the service's heap traces. */
typedef struct cw_http_heap_ops {
    /* Starts a trace of pid (instance proc, name process; duration 0: the
     * default; a snapshot every snapshot_every_ns, 0: none): heaptraces.h,
     * cw_heaptraces_ask: 0 or its error, *id. */
    int (*ask)(void *ctx, uint32_t pid, uint32_t proc, const char *process, int64_t duration_ns,
               int64_t snapshot_every_ns, int64_t *id, cw_diag_t *d);
    int (*stop)(void *ctx, int64_t id);                       /* 0 or CW_ENOENT */
    /* Running? With the events so far and whether it is attached yet. */
    bool (*progress)(void *ctx, int64_t id, uint64_t *events, bool *attached);
} cw_http_heap_ops_t;

typedef struct cw_http cw_http_t;

/* Starts listening and serving; returns once the port is bound. All
 * strings of o are copied except rule_files and status (borrowed).
 * 0 and *out set, or CW_EINVAL (bad listen address or option) / CW_EIO
 * (port in use, web root missing) with d saying what to do. */
int cw_http_start(const cw_http_opts_t *o, cw_http_t **out, cw_diag_t *d);
/* Stops accepting, waits for requests in flight, closes every worker's
 * store and frees h. Accepts NULL. */
void cw_http_stop(cw_http_t *h);

/* The port actually bound (useful with port 0). */
int cw_http_port(const cw_http_t *h);

/* The web root used when none is given: the source tree's web/ when it
 * exists (a build run from the tree), else the installed data directory.
 * Static string. */
const char *cw_http_default_web_root(void);

#endif
