/* http.c - the embedded civetweb server: start and stop, the options
 * civetweb runs with, and begin_request(), which takes every request from
 * its first byte to the route (http_routes.c) and its answer.
 *
 * DESIGN. civetweb runs a listener thread and `threads` workers. Every
 * request goes through begin_request(), which answers it completely:
 * civetweb's own file serving, CGI and directory listing are never
 * reached. A request that needs the database takes a read-only handle
 * from the server's pool (cw_store_pool_t, store_pool.c: at most
 * CW__HTTP_DB_HANDLES connections, opened on first need since the file
 * may not exist yet when the server starts, the most recently used one
 * handed out first so its read caches are warm) and gives it back when
 * it has answered. Workers read only that handle, the immutable
 * cw__http_ctx_t (the pool is internally locked) and the status atomics.
 *
 * Security: GET and HEAD only unless a token is configured; a request
 * with another method needs `Authorization: Bearer TOKEN`, and only POST
 * and DELETE routes exist (silences, reload; others get 405 with an
 * Allow header). Query strings over CW__HTTP_MAX_QUERY bytes are refused
 * (414); civetweb limits the request head (max_request_size); a GET's
 * body is refused (413), a POST's is read up to CW_HTTP_MAX_BODY bytes
 * (413 beyond) after the token was checked, so an unauthenticated client
 * cannot make a worker read a body. Unknown query parameters are a 400
 * naming them (http_routes.c). Slow clients: see cw_http_start's options and
 * http_clients.c (the per-client connection cap). */
#include "http/http_clients.h"
#include "http/http_req.h"
#include "http/http_routes.h"

#include <civetweb.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "commitwatch/log.h"
#include "commitwatch/platform.h"

struct cw_http {
    struct mg_context *mg;
    cw__http_ctx_t ctx;
    int port;
};

/* Reads a state-changing request's body (announced length len, -1 when
 * chunked) into r->body, NUL-terminated. 0, or 413 past CW_HTTP_MAX_BODY
 * bytes, 400 when it ends early, 500 on ENOMEM. */
static int read_body(cw__http_req_t *r, long long len)
{
    if (len > CW_HTTP_MAX_BODY)
        return cw__http_fail(r, 413, "request body: %lld bytes; at most %d are taken", len,
                             CW_HTTP_MAX_BODY);
    if (len == 0) return 0;
    size_t cap = len > 0 ? (size_t)len + 1 : CW_HTTP_MAX_BODY + 2;
    r->body = malloc(cap);
    if (!r->body) return cw__http_fail(r, 500, "out of memory reading the request body");
    while (r->body_len < cap - 1) {
        int k = mg_read(r->conn, r->body + r->body_len, cap - 1 - r->body_len);
        if (k <= 0) break;
        r->body_len += (size_t)k;
    }
    r->body[r->body_len] = 0;
    if (r->body_len > CW_HTTP_MAX_BODY)
        return cw__http_fail(r, 413, "request body: more than %d bytes", CW_HTTP_MAX_BODY);
    if (len > 0 && r->body_len < (size_t)len)
        return cw__http_fail(r, 400, "request body: %zu of the %lld bytes announced arrived",
                             r->body_len, len);
    return 0;
}

static int begin_request(struct mg_connection *conn)
{
    const struct mg_request_info *ri = mg_get_request_info(conn);
    cw__http_req_t *r = calloc(1, sizeof *r);
    if (!r) {
        mg_send_http_error(conn, 503, "%s", "out of memory");
        return 503;
    }
    r->conn = conn;
    r->ctx = mg_get_user_data(mg_get_context(conn));
    /* The path is decoded here, not by civetweb (decode_url = no), which
     * would decode %00 into the C string and cut it ("/index.html%00.x"
     * would be "/index.html"). civetweb removed its dot segments; encoded
     * ones ("%2e%2e") are refused by the routes and http_static.c. */
    const char *raw = ri->local_uri ? ri->local_uri : "/";
    int plen = mg_url_decode(raw, (int)strlen(raw), r->path_buf, (int)sizeof r->path_buf, 0);
    r->path = r->path_buf;
    r->store = NULL; /* taken from the pool by cw__http_need_store */
    bool get = strcmp(ri->request_method, "GET") == 0;
    r->head = strcmp(ri->request_method, "HEAD") == 0;
    r->method = ri->request_method;
    cw__http_clients_busy(r->ctx->clients, ri->remote_addr, ri->remote_port, true);

    int status = 0;
    if (plen < 0) {
        status = cw__http_fail(r, 414, "path: longer than %zu bytes", sizeof r->path_buf - 1);
    } else if (strlen(r->path_buf) != (size_t)plen) {
        status = cw__http_fail(r, 400, "path: a NUL byte (%%00) is not allowed");
    } else if (!get && !r->head) {
        if (!r->ctx->token)
            status = cw__http_fail(r, 405,
                                   "method %s: this server is read-only (GET and HEAD); "
                                   "configure a token to enable changes",
                                   ri->request_method);
        else if (!cw__http_token_ok(r->ctx->token, mg_get_header(conn, "Authorization")))
            status = cw__http_fail(r, 401,
                                   "Authorization: a state-changing request needs "
                                   "'Authorization: Bearer TOKEN'");
        else
            status = read_body(r, ri->content_length);
        if (!status && ri->query_string && strlen(ri->query_string) > CW__HTTP_MAX_QUERY)
            status = cw__http_fail(r, 414, "query: longer than %d bytes", CW__HTTP_MAX_QUERY);
        if (!status) status = cw__http_parse_query(r, ri->query_string);
        if (!status) status = cw__http_dispatch(r);
    } else if (ri->content_length > 0) {
        status = cw__http_fail(r, 413, "request body: GET requests take no body");
    } else if (ri->query_string && strlen(ri->query_string) > CW__HTTP_MAX_QUERY) {
        status = cw__http_fail(r, 414, "query: longer than %d bytes", CW__HTTP_MAX_QUERY);
    } else {
        status = cw__http_parse_query(r, ri->query_string);
        if (!status) status = cw__http_dispatch(r);
    }
    if (status) cw__http_send_error(r, status);
    cw__http_clients_busy(r->ctx->clients, ri->remote_addr, ri->remote_port, false);
    cw_store_pool_put(r->ctx->pool, r->store);
    free(r->body);
    free(r);
    return status ? status : 200;
}

/* Writes civetweb's own error pages (malformed requests it rejects before
 * begin_request) as our JSON shape too. */
static int http_error(struct mg_connection *conn, int status, const char *msg)
{
    cw__http_req_t r = {.conn = conn, .ctx = mg_get_user_data(mg_get_context(conn))};
    snprintf(r.err, sizeof r.err, "%s", msg && msg[0] ? msg : "bad request");
    cw__http_send_error(&r, status);
    return 0;
}

/* A worker took a connection (it is not known whose: civetweb fills the
 * request info only once a request line arrived): refuses the
 * connections of clients over their cap (http_clients.c). */
static int connection_taken(const struct mg_connection *conn, void **conn_data)
{
    const cw__http_ctx_t *c = mg_get_user_data(mg_get_context(conn));
    *conn_data = NULL;
    cw__http_clients_sweep(c->clients);
    return 0;
}

static int log_message(const struct mg_connection *conn, const char *msg)
{
    (void)conn;
    CW_LOGW("http: %s", msg);
    return 1;
}

/* ---------------------------------------------------------------- start/stop */

const char *cw_http_default_web_root(void)
{
    const char *cands[4];
    size_t n = cw_plat_data_dirs("web", cands, CW_ARRAY_LEN(cands));
    for (size_t i = 0; i < n; i++) {
        char p[4096];
        snprintf(p, sizeof p, "%s/index.html", cands[i]);
        if (cw_plat_is_file(p)) return cands[i];
    }
    return n ? cands[n - 1] : "web";
}

/* Is the listen address loopback? "127.x.x.x:P", "localhost:P", "[::1]:P". */
static bool is_loopback(const char *listen)
{
    return strncmp(listen, "127.", 4) == 0 || strncmp(listen, "localhost:", 10) == 0 ||
           strncmp(listen, "[::1]:", 6) == 0;
}

/* civetweb wants "127.0.0.1:8470" or "[::1]:8470"; we accept the same and
 * "localhost:P". Checks the shape: HOST:PORT with a numeric port. */
static int listen_spec(const char *in, char *out, size_t len, cw_diag_t *d)
{
    const char *colon = strrchr(in, ':');
    /* One address: civetweb would also take "A:P,B:Q", past the loopback
     * check below. */
    if (strchr(in, ','))
        return cw_diag_set(d, CW_EINVAL, "--listen %s: one ADDR:PORT, e.g. 127.0.0.1:8470", in);
    if (!colon || colon == in || !colon[1])
        return cw_diag_set(d, CW_EINVAL, "--listen %s: expected ADDR:PORT, e.g. 127.0.0.1:8470",
                           in);
    for (const char *p = colon + 1; *p; p++)
        if (*p < '0' || *p > '9')
            return cw_diag_set(d, CW_EINVAL, "--listen %s: the port must be a number", in);
    if (atoi(colon + 1) > 65535)
        return cw_diag_set(d, CW_EINVAL, "--listen %s: the port must be at most 65535", in);
    if (strncmp(in, "localhost:", 10) == 0)
        snprintf(out, len, "127.0.0.1%s", colon);
    else
        snprintf(out, len, "%s", in);
    return 0;
}

static void ignore_conn(void *ctx, const char *peer_addr, int peer_port, intptr_t handle)
{
    (void)ctx;
    (void)peer_addr;
    (void)peer_port;
    (void)handle;
}

static void ctx_free(cw__http_ctx_t *c)
{
    cw_store_pool_destroy(c->pool);
    free(c->db_path);
    free(c->web_root);
    free(c->token);
    cw_store_share_free(c->share); /* after the workers closed their stores */
    cw__http_clients_free(c->clients);
}

int cw_http_start(const cw_http_opts_t *o, cw_http_t **out, cw_diag_t *d)
{
    int rc;
    char spec[300], threads[16], req_ms[16], idle_ms[16], *webroot = NULL;
    const char *listen = o->listen && o->listen[0] ? o->listen : CW_HTTP_DEFAULT_LISTEN;
    *out = NULL;
    if (!o->db_path) return cw_diag_set(d, CW_EINVAL, "the HTTP server needs a database path");
    if ((rc = listen_spec(listen, spec, sizeof spec, d))) return rc;
    unsigned nthreads = o->threads ? o->threads : CW_HTTP_DEFAULT_THREADS;
    if (nthreads > CW_HTTP_MAX_THREADS)
        return cw_diag_set(d, CW_EINVAL, "http_threads = %u: at most %d", nthreads,
                           CW_HTTP_MAX_THREADS);
    if (o->request_timeout_ms > 3600000 || o->idle_timeout_ms > 3600000)
        return cw_diag_set(d, CW_EINVAL,
                           "http_request_timeout and http_idle_timeout: at most 1 hour");
    const char *wr = o->web_root ? o->web_root : cw_http_default_web_root();
    webroot = cw_plat_realpath(wr);
    if (!webroot)
        return cw_diag_set(d, CW_EIO,
                           "web root %s not found: pass the dashboard folder (web/ of the "
                           "source tree, or share/commitwatch/web)",
                           wr);
    cw_http_t *h = calloc(1, sizeof *h);
    if (!h) {
        free(webroot);
        return cw_diag_set(d, CW_ENOMEM, "out of memory starting the HTTP server");
    }
    h->ctx.web_root = webroot;
    h->ctx.db_path = strdup(o->db_path);
    h->ctx.token = o->token && o->token[0] ? strdup(o->token) : NULL;
    h->ctx.metrics_top = o->metrics_top ? o->metrics_top : 20;
    h->ctx.rule_files = o->rule_files;
    h->ctx.nrule_files = o->nrule_files;
    h->ctx.status = o->status;
    h->ctx.on_reload = o->on_reload;
    h->ctx.reload_ctx = o->reload_ctx;
    h->ctx.heap = o->heap;
    h->ctx.heap_ctx = o->heap_ctx;
    h->ctx.maps = o->maps;
    /* Clients that read the hint (undici, node's fetch) stop reusing an
     * idle connection before the server closes it, instead of sending a
     * request into a connection closing at that moment. */
    unsigned idle = o->idle_timeout_ms ? o->idle_timeout_ms : 2000;
    snprintf(h->ctx.keep_alive, sizeof h->ctx.keep_alive, "timeout=%u", idle / 1000);
    if (!h->ctx.db_path || (o->token && o->token[0] && !h->ctx.token) ||
        cw_store_share_create(&h->ctx.share)) {
        rc = cw_diag_set(d, CW_ENOMEM, "out of memory starting the HTTP server");
        goto fail;
    }
    if ((rc = cw_store_pool_create(h->ctx.db_path, CW__HTTP_DB_HANDLES, &h->ctx.pool, d)))
        goto fail;
    if (cw__http_clients_create(nthreads, o->client_connections, &h->ctx.clients)) {
        rc = cw_diag_set(d, CW_ENOMEM, "out of memory starting the HTTP server");
        goto fail;
    }
    /* A worker building a report and its JSON (1 - 2 MB for 1,000
     * processes) would otherwise get a heap arena of its own and keep its
     * freed peak: 16 workers, up to 16 x 6 - 10 MiB resident. Process-wide;
     * the service's other threads allocate little. */
    cw_plat_heap_arenas(CW__HTTP_HEAP_ARENAS);
    /* civetweb gives a connection a worker for its whole life: the wait
     * for each request's head, every keep-alive request and the idle time
     * between them; a browser opens 6 at once. So workers are many (a
     * thread each, sharing the pool's CW__HTTP_DB_HANDLES read
     * connections), a request's head has a deadline (request_timeout_ms:
     * in civetweb 1.15 a total from when the worker took the connection,
     * read_message's req_time, not a per-read timeout), an idle
     * keep-alive connection another (keep_alive_timeout_ms, the same
     * total for every request after the first), and one client address
     * can hold at most client_connections of them (http_clients.c).
     * docs/RELIABILITY.md, "Hostile HTTP clients". */
    snprintf(threads, sizeof threads, "%u", nthreads);
    snprintf(req_ms, sizeof req_ms, "%u", o->request_timeout_ms ? o->request_timeout_ms : 5000);
    snprintf(idle_ms, sizeof idle_ms, "%u", idle);
    const char *options[40];
    int n = 0;
    options[n++] = "listening_ports";
    options[n++] = spec;
    options[n++] = "num_threads";
    options[n++] = threads;
    /* Accepted connections waiting for a worker (civetweb's default 20):
     * as many as there are workers. */
    options[n++] = "connection_queue";
    options[n++] = threads;
    options[n++] = "enable_keep_alive";
    options[n++] = "yes";
    options[n++] = "keep_alive_timeout_ms";
    options[n++] = idle_ms;
    options[n++] = "request_timeout_ms";
    options[n++] = req_ms;
    options[n++] = "max_request_size"; /* request line + headers: more is a 413 */
    options[n++] = "8192";
    /* No CORS: civetweb's default ("*") adds Access-Control-Allow-Origin
     * to the static files it sends when a request has an Origin. */
    options[n++] = "access_control_allow_origin";
    options[n++] = "";
    options[n++] = "access_control_allow_methods";
    options[n++] = "";
    options[n++] = "decode_url"; /* begin_request decodes the path */
    options[n++] = "no";
    options[n++] = "enable_directory_listing";
    options[n++] = "no";
    /* Headers and body go out in two writes: without TCP_NODELAY, Nagle
     * and the client's delayed ACK add 40 ms to every keep-alive reply. */
    options[n++] = "tcp_nodelay";
    options[n++] = "1";
    options[n++] = "static_file_max_age";
    options[n++] = "0";
    if (o->access_log && o->access_log[0]) {
        options[n++] = "access_log_file";
        options[n++] = o->access_log;
    }
    options[n++] = NULL;

    struct mg_callbacks cb;
    memset(&cb, 0, sizeof cb);
    cb.begin_request = begin_request;
    cb.http_error = http_error;
    cb.log_message = log_message;
    cb.init_connection = connection_taken;
    mg_init_library(0);
    h->mg = mg_start(&cb, &h->ctx, options);
    if (!h->mg) {
        mg_exit_library();
        rc = cw_diag_set(d, CW_EIO,
                         "cannot listen on %s (address in use or not local?): pick another "
                         "with --listen ADDR:PORT, or --no-http",
                         listen);
        goto fail;
    }
    struct mg_server_port ports[4];
    int np = mg_get_server_ports(h->mg, 4, ports);
    h->port = np > 0 ? ports[0].port : 0;
    cw__http_clients_set_port(h->ctx.clients, h->port);
    CW_LOGD("http: civetweb started on port %d with %u workers", h->port, nthreads);
    int listed = o->client_connections ? cw_plat_tcp_list(h->port, ignore_conn, NULL) : 0;
    if (o->client_connections)
        CW_LOGD("http: this process's connections listed: %s", cw_strerror(listed));
    if (listed == CW_ENOSYS)
        CW_LOGW("http: http_client_connections = %u is not enforced on this platform (docs/"
                "RELIABILITY.md, \"Hostile HTTP clients\")",
                o->client_connections);
    if (!is_loopback(spec) && !h->ctx.token)
        CW_LOGW("http: listening on %s, which is not loopback, without a token: anyone who "
                "can reach it can read every process's memory figures; use --token or bind "
                "127.0.0.1",
                listen);
    char shown[320];
    snprintf(shown, sizeof shown, "%.*s:%d", (int)(strrchr(spec, ':') - spec), spec, h->port);
    CW_LOGI("http: serving http://%s (web root %s)", shown, webroot);
    *out = h;
    return 0;
fail:
    ctx_free(&h->ctx);
    free(h);
    return rc;
}

void cw_http_stop(cw_http_t *h)
{
    if (!h) return;
    mg_stop(h->mg); /* joins the workers, which gave their handles back */
    mg_exit_library();
    ctx_free(&h->ctx);
    free(h);
}

int cw_http_port(const cw_http_t *h)
{
    return h ? h->port : 0;
}
