/* test_http.c - the HTTP module without a database: time and duration
 * parsing, query strings, and a real server on an ephemeral loopback port
 * (health while the database does not exist yet, method and path rules,
 * error bodies, static files confined to the web root, the front-end
 * packages served under /vendor/ (only those listed); the state-changing
 * routes: token, body limit, 405 with the methods a path takes, the
 * reload hook; the route table and the OpenAPI document listing the same
 * routes). The API's figures are tested end to end in
 * tests/e2e/test_api.py. */
#include <cjson/cJSON.h>
#include <stdatomic.h>
#include <stdlib.h>

#include "commitwatch/http.h"
#include "commitwatch/log.h"
#include "commitwatch/platform.h"
#include "http/http_clients.h"
#include "http/http_req.h"
#include "http/http_routes.h"
#include "test.h"
#include "test_port.h"

/* Sockets, the test's client side: Winsock on Windows, BSD elsewhere. */
#ifdef _WIN32
#include <winsock2.h>
typedef SOCKET sock_t;
#define SOCK_OK(s) ((s) != INVALID_SOCKET)
#define sock_close closesocket
static void sock_init(void)
{
    WSADATA w;
    ASSERT_EQ(WSAStartup(MAKEWORD(2, 2), &w), 0);
}
/* A server that never answers fails the test instead of hanging it. */
static void sock_timeouts(sock_t fd)
{
    DWORD ms = 30000;
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, (const char *)&ms, sizeof ms);
    setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, (const char *)&ms, sizeof ms);
}
#else
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>
typedef int sock_t;
#define SOCK_OK(s) ((s) >= 0)
#define sock_close close
static void sock_init(void) {}
static void sock_timeouts(sock_t fd)
{
    struct timeval tv = {.tv_sec = 30};
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
}
#endif

#define NS 1000000000LL

static cw__http_ctx_t ctx = {.db_path = "/nonexistent/commitwatch.db"};

static cw__http_req_t req(void)
{
    cw__http_req_t r;
    memset(&r, 0, sizeof r);
    r.ctx = &ctx;
    return r;
}

static void test_times(void)
{
    cw__http_req_t r = req();
    int64_t t;
    ASSERT_OK(cw__http_parse_time(&r, "from", "1750000014000000000", &t));
    ASSERT_EQ(t, 1750000014000000000LL);
    ASSERT_OK(cw__http_parse_time(&r, "from", "2025-06-15T15:06:54Z", &t));
    ASSERT_EQ(t, 1750000014000000000LL);
    ASSERT_OK(cw__http_parse_time(&r, "from", "2025-06-15T17:06:54.25+02:00", &t));
    ASSERT_EQ(t, 1750000014250000000LL);
    ASSERT_OK(cw__http_parse_time(&r, "from", "1970-01-01T00:00:00Z", &t));
    ASSERT_EQ(t, 0);
    int64_t now = cw_plat_wall_ns();
    ASSERT_OK(cw__http_parse_time(&r, "from", "-15m", &t));
    ASSERT_TRUE(t <= now - 15 * 60 * NS + NS && t >= now - 15 * 60 * NS - 10 * NS);
    ASSERT_OK(cw__http_parse_time(&r, "to", "now", &t));
    ASSERT_TRUE(t >= now);
    ASSERT_EQ(cw__http_parse_time(&r, "from", "yesterday", &t), 400);
    ASSERT_TRUE(strstr(r.err, "from") == r.err);
    ASSERT_EQ(cw__http_parse_time(&r, "to", "2025-13-01T00:00:00Z", &t), 400);
    ASSERT_EQ(cw__http_parse_time(&r, "to", "99999999999999999999", &t), 400);
    ASSERT_EQ(cw__http_parse_time(&r, "to", "-15x", &t), 400);
    /* Dates outside Unix ns are a 400, not an overflow (fuzz_http found
     * 4111-06-15; tests/fuzz/seeds-http/crash-rfc3339-year-4111). */
    ASSERT_EQ(cw__http_parse_time(&r, "from", "4111-06-15T15:06:54Z", &t), 400);
    ASSERT_TRUE(strstr(r.err, "from: 4111-06-15T15:06:54Z is out of range") == r.err);
    ASSERT_EQ(cw__http_parse_time(&r, "from", "0000-01-01T00:00:00Z", &t), 400);
    ASSERT_EQ(cw__http_parse_time(&r, "to", "9999999999999999999", &t), 400);
    ASSERT_OK(cw__http_parse_time(&r, "to", "2262-04-11T23:47:16Z", &t));
    ASSERT_EQ(t, 9223372036000000000LL);
    ASSERT_OK(cw__http_parse_time(&r, "to", "1677-09-21T00:12:44Z", &t));
    ASSERT_EQ(t, -9223372036000000000LL);

    int64_t d;
    ASSERT_OK(cw__http_parse_duration(&r, "step", "60s", &d));
    ASSERT_EQ(d, 60 * NS);
    ASSERT_OK(cw__http_parse_duration(&r, "step", "5m", &d));
    ASSERT_EQ(d, 300 * NS);
    ASSERT_OK(cw__http_parse_duration(&r, "step", "1000000000", &d));
    ASSERT_EQ(d, NS);
    ASSERT_EQ(cw__http_parse_duration(&r, "step", "0s", &d), 400);
    ASSERT_EQ(cw__http_parse_duration(&r, "step", "1.5s", &d), 400);
}

static void test_query(void)
{
    cw__http_req_t r = req();
    ASSERT_OK(cw__http_parse_query(&r, "from=-1h&name=a%20b&to=now"));
    ASSERT_EQ(r.nparams, 3);
    ASSERT_STR_EQ(cw__http_param(&r, "name"), "a b");
    ASSERT_TRUE(cw__http_param(&r, "sort") == NULL);
    ASSERT_EQ(cw__http_check_unused(&r), 400); /* from, to not read */
    r = req();
    ASSERT_EQ(cw__http_parse_query(&r, "a=1&a=2"), 400);
    /* %00 would cut the value: refused, naming it. */
    r = req();
    ASSERT_EQ(cw__http_parse_query(&r, "step=1s%00x"), 400);
    ASSERT_TRUE(strstr(r.err, "step: the value holds a NUL byte") == r.err);
    r = req();
    ASSERT_EQ(cw__http_parse_query(&r, "st%00ep=1s"), 400);
    r = req();
    ASSERT_OK(cw__http_parse_query(&r, "name=%ff%fe&x=%zz&y=%"));
    ASSERT_STR_EQ(cw__http_param(&r, "name"), "\xff\xfe");
    ASSERT_STR_EQ(cw__http_param(&r, "x"), "%zz");
    ASSERT_STR_EQ(cw__http_param(&r, "y"), "%");
    /* Error messages quoting such bytes are made UTF-8. */
    char m[] = "a\xff \xc3\xa9 \xc0\xae \xed\xa0\x80 \xf4\x90\x80\x80 \xe2\x82 \xf0\x9f\x98\x80";
    cw__http_utf8_clean(m);
    ASSERT_STR_EQ(m, "a? \xc3\xa9 ?? ??? ???? ?? \xf0\x9f\x98\x80");
    r = req();
    int64_t f, t;
    ASSERT_OK(cw__http_parse_query(&r, "from=2000&to=1000"));
    ASSERT_EQ(cw__http_window(&r, &f, &t), 400);
    r = req();
    ASSERT_OK(cw__http_parse_query(&r, "to=1000"));
    ASSERT_OK(cw__http_window(&r, &f, &t));
    ASSERT_EQ(t - f, 3600 * NS);
}

/* The token comparison and the per-client cap's choice of connections. */
static void test_security(void)
{
    ASSERT_TRUE(cw__http_token_ok("t0k", "Bearer t0k"));
    ASSERT_TRUE(!cw__http_token_ok("t0k", "Bearer t0K"));
    ASSERT_TRUE(!cw__http_token_ok("t0k", "Bearer t0"));
    ASSERT_TRUE(!cw__http_token_ok("t0k", "Bearer t0kk"));
    ASSERT_TRUE(!cw__http_token_ok("t0k", "Bearer "));
    ASSERT_TRUE(!cw__http_token_ok("t0k", "bearer t0k"));
    ASSERT_TRUE(!cw__http_token_ok("t0k", "t0k"));
    ASSERT_TRUE(!cw__http_token_ok("t0k", NULL));

    /* a: 4 connections (one busy), b: 1, c: 3; at most 2 each. */
    cw__http_conn_t c[] = {{"a", 1, false, 0}, {"b", 1, false, 0}, {"a", 2, true, 0},
                           {"c", 1, false, 0}, {"a", 3, false, 0}, {"c", 2, false, 0},
                           {"a", 4, false, 0}, {"c", 3, false, 0}};
    bool v[CW_ARRAY_LEN(c)];
    ASSERT_EQ(cw__http_clients_excess(c, CW_ARRAY_LEN(c), 2, v), 3);
    /* The last listed go first, never the busy one. */
    ASSERT_TRUE(!v[0] && !v[1] && !v[2] && !v[3] && v[4] && !v[5] && v[6] && v[7]);
    ASSERT_EQ(cw__http_clients_excess(c, CW_ARRAY_LEN(c), 0, v), 0); /* no limit */
    ASSERT_EQ(cw__http_clients_excess(c, CW_ARRAY_LEN(c), 4, v), 0);
    ASSERT_EQ(cw__http_clients_excess(c, CW_ARRAY_LEN(c), 1, v), 5);
    ASSERT_TRUE(v[0] && !v[1] && !v[2] && !v[3] && v[4] && v[5] && v[6] && v[7]);
    /* One more than allowed, but busy: kept (it is answered, then the
     * client is over the limit until one closes). */
    cw__http_conn_t b[] = {{"a", 1, true, 0}, {"a", 2, true, 0}};
    ASSERT_EQ(cw__http_clients_excess(b, 2, 1, v), 0);
}

/* A new connection to 127.0.0.1:port (30 s send and receive timeouts). */
static sock_t connect_loopback(int port)
{
    sock_t fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    ASSERT_TRUE(SOCK_OK(fd));
    sock_timeouts(fd);
    ASSERT_TRUE(connect(fd, (struct sockaddr *)&a, sizeof a) == 0);
    return fd;
}

/* The client's kept-alive connection: one per test server, as a browser
 * keeps one. Wine 8's wineserver aborts now and then (server/sock.c,
 * complete_async_poll: "Assertion `output->count == signaled_count'
 * failed") when a socket poll times out as its event arrives, and
 * civetweb's close of every connection polls it; a connection per
 * request brought it down about once in a thousand requests (the e2e
 * tests' KeptClient, tests/e2e/cwservice.py, has the figures). Tests of
 * connection handling itself (stalled heads, the per-client cap) open
 * their own. kept_close() before each cw_http_stop(): a kept connection
 * would hold a worker until its keep-alive timeout. */
static sock_t kept = (sock_t)-1;
static int kept_port;

static void kept_close(void)
{
    if (kept_port) sock_close(kept);
    kept = (sock_t)-1;
    kept_port = 0;
}

static void stop(cw_http_t *h)
{
    kept_close();
    cw_http_stop(h);
}

/* Reads what fd has into buf[*got..cap-1), NUL-terminated; returns false
 * when the peer closed or the read failed. */
static bool read_more(sock_t fd, char *buf, size_t cap, size_t *got)
{
    int k = (int)recv(fd, buf + *got, (int)(cap - 1 - *got), 0);
    if (k <= 0) return false;
    *got += (size_t)k;
    buf[*got] = 0;
    return true;
}

/* One HTTP/1.1 request on the kept connection to port (opened when there
 * is none, or the server closed it) with extra header lines (each ending
 * in \r\n; may be "") and a body (may be NULL); returns the status, fills
 * body (NUL-terminated, truncated to len). The answer ends at its
 * Content-Length, or where the server closes (then the connection is
 * not kept). */
static int http_ex(int port, const char *method, const char *path, const char *headers,
                   const char *in, char *body, size_t len)
{
    static char buf[1 << 17];
    if (kept_port != port) {
        kept_close();
        kept = connect_loopback(port);
        kept_port = port;
    }
    int n = snprintf(buf, sizeof buf, "%s %s HTTP/1.1\r\nHost: x\r\n%s", method, path, headers);
    if (in)
        n += snprintf(buf + n, sizeof buf - (size_t)n, "Content-Length: %zu\r\n\r\n%s", strlen(in), in);
    else
        n += snprintf(buf + n, sizeof buf - (size_t)n, "\r\n");
    ASSERT_EQ(send(kept, buf, n, 0), n);
    size_t got = 0;
    buf[0] = 0;
    const char *head_end = NULL;
    bool open = true;
    while (!(head_end = strstr(buf, "\r\n\r\n")) && got < sizeof buf - 1 &&
           (open = read_more(kept, buf, sizeof buf, &got)))
        ;
    if (!head_end) {
        fprintf(stderr, "test_http: %s %s: no answer (%zu bytes)\n", method, path, got);
        kept_close();
        return 0;
    }
    size_t head = (size_t)(head_end + 4 - buf);
    const char *cl = strstr(buf, "Content-Length: ");
    bool sized = cl && cl < head_end;
    size_t want = sized ? head + strtoull(cl + 16, NULL, 10) : sizeof buf - 1;
    while (got < want && open && got < sizeof buf - 1)
        open = read_more(kept, buf, sizeof buf, &got);
    const char *close_hdr = strstr(buf, "Connection: close");
    if (!sized || !open || (close_hdr && close_hdr < head_end)) kept_close();
    int status = 0;
    sscanf(buf, "HTTP/1.%*d %d", &status);
    snprintf(body, len, "%s", buf + head);
    return status;
}

static int http(int port, const char *method, const char *path, char *body, size_t len)
{
    return http_ex(port, method, path, "", NULL, body, len);
}

/* A connection to 127.0.0.1:port that sent a request line and stalls:
 * its headers never end. */
static sock_t stalled(int port)
{
    sock_t fd = connect_loopback(port);
    static const char line[] = "GET /api/health HTTP/1.1\r\nHost: x\r\n";
    ASSERT_EQ(send(fd, line, (int)sizeof line - 1, 0), (int)sizeof line - 1);
    return fd;
}

/* What the server sent on fd until it closed it (up to len - 1 bytes). */
static void drain(sock_t fd, char *buf, size_t len)
{
    size_t got = 0;
    buf[0] = 0;
    while (got < len - 1 && read_more(fd, buf, len, &got))
        ;
}

/* Slow clients: a request's head has a deadline; one client address may
 * hold only client_connections (Linux and Windows: cw_plat_tcp_list). */
static void test_slow_clients(cw_http_opts_t o)
{
    cw_http_t *h = NULL;
    cw_diag_t d;
    char buf[4096];
    o.threads = 6;
    o.request_timeout_ms = 500;
    o.client_connections = 2;
    ASSERT_OK(cw_http_start(&o, &h, &d));
    int port = cw_http_port(h);
    sock_t s[4];
    for (int i = 0; i < 4; i++)
        s[i] = stalled(port);
    int64_t t0 = cw_plat_mono_ns();
    int refused = 0;
    for (int i = 0; i < 4; i++) {
        drain(s[i], buf, sizeof buf);
        refused += strstr(buf, "HTTP/1.1 429 ") == buf;
        sock_close(s[i]);
    }
    int64_t took = cw_plat_mono_ns() - t0;
    ASSERT_EQ(refused, 2);
    /* The others were closed at the 0.5 s deadline (not civetweb's 30 s). */
    ASSERT_TRUE(took < 10 * NS);
    ASSERT_EQ(http(port, "GET", "/api/health", buf, sizeof buf), 200);
    stop(h);

    o.threads = CW_HTTP_MAX_THREADS + 1;
    ASSERT_EQ(cw_http_start(&o, &h, &d), CW_EINVAL);
    ASSERT_TRUE(strstr(d.msg, "http_threads") != NULL);
    o.threads = 2;
    o.request_timeout_ms = 3600001;
    ASSERT_EQ(cw_http_start(&o, &h, &d), CW_EINVAL);
    o.request_timeout_ms = 0;
    o.listen = "127.0.0.1:0,0.0.0.0:0";
    ASSERT_EQ(cw_http_start(&o, &h, &d), CW_EINVAL);
    ASSERT_TRUE(strstr(d.msg, "one ADDR:PORT") != NULL);
}

/* POST /api/reload's hook: counts calls; fails while reload_fail is set;
 * else serves the reload at once as the service's core thread does
 * (status.h: a load begun, its outcome published), refused while
 * reload_refuse is set. */
static int reloads;
static bool reload_fail, reload_refuse;
static cw_status_t *reload_status;

static int on_reload(void *rctx, char *msg, size_t msglen)
{
    ASSERT_TRUE(rctx == &reloads);
    reloads++;
    if (reload_fail) {
        snprintf(msg, msglen, "rules.conf:3: bad threshold");
        return CW_EINVAL;
    }
    cw_status_config_t c = {.ok = !reload_refuse, .reload = true, .at_ns = 5};
    if (reload_refuse) {
        snprintf(c.error, sizeof c.error, "rules.conf:7: rule x: warn = lots: not a size");
        snprintf(c.file, sizeof c.file, "rules.conf");
        c.line = 7;
    }
    atomic_fetch_add(&reload_status->config_loads_begun, 1);
    cw_status_config_set(reload_status, &c);
    return 0;
}

/* The state-changing routes: the token, bodies, methods, reload. */
static void test_changes(cw_http_opts_t o)
{
    cw_http_t *h = NULL;
    cw_diag_t d;
    char body[8192];
    const char *auth = "Authorization: Bearer t0k\r\n";
    o.token = "t0k";
    ASSERT_OK(cw_http_start(&o, &h, &d));
    int port = cw_http_port(h);
    ASSERT_EQ(http_ex(port, "POST", "/api/reload", auth, NULL, body, sizeof body), 501);
    ASSERT_TRUE(strstr(body, "SIGHUP") != NULL);
    /* A body over 64 KiB is refused by its announced length. */
    static char big[70001];
    memset(big, 'x', sizeof big - 1);
    ASSERT_EQ(http_ex(port, "POST", "/api/silences", auth, big, body, sizeof body), 413);
    ASSERT_TRUE(strstr(body, "65536") != NULL);
    /* The token is checked before anything else. */
    ASSERT_EQ(http_ex(port, "POST", "/api/silences", "", "{}", body, sizeof body), 401);
    ASSERT_EQ(http_ex(port, "DELETE", "/api/silences/3", "", NULL, body, sizeof body), 401);
    /* Paths and methods: 405 names what the path takes. */
    ASSERT_EQ(http_ex(port, "PUT", "/api/silences", auth, "{}", body, sizeof body), 405);
    ASSERT_TRUE(strstr(body, "GET, HEAD, POST") != NULL);
    ASSERT_EQ(http_ex(port, "DELETE", "/api/alerts/3", auth, NULL, body, sizeof body), 405);
    ASSERT_EQ(http_ex(port, "GET", "/api/reload", "", NULL, body, sizeof body), 405);
    ASSERT_TRUE(strstr(body, "takes POST") != NULL);
    ASSERT_EQ(http_ex(port, "DELETE", "/api/silences/x1", auth, NULL, body, sizeof body), 400);
    /* The database does not exist yet: a silence cannot be stored. */
    ASSERT_EQ(http_ex(port, "POST", "/api/silences", auth, "{}", body, sizeof body), 503);
    ASSERT_EQ(http_ex(port, "GET", "/api/alert-rules/leak/backtest", "", NULL, body, sizeof body),
              503);
    stop(h);

    /* With the service's reload hook. */
    o.on_reload = on_reload;
    o.reload_ctx = &reloads;
    reload_status = o.status;
    ASSERT_TRUE(reload_status != NULL);
    ASSERT_OK(cw_http_start(&o, &h, &d));
    port = cw_http_port(h);
    ASSERT_EQ(http_ex(port, "POST", "/api/reload", "", NULL, body, sizeof body), 401);
    ASSERT_EQ(reloads, 0);
    ASSERT_EQ(http_ex(port, "POST", "/api/reload", auth, NULL, body, sizeof body), 200);
    ASSERT_TRUE(strstr(body, "\"status\":\"reloaded\"") != NULL);
    ASSERT_TRUE(strstr(body, "\"config\":{\"ok\":true,\"error\":null") != NULL);
    ASSERT_EQ(reloads, 1);
    /* A bad file: 422 naming it and its line; /api/health says the same. */
    reload_refuse = true;
    ASSERT_EQ(http_ex(port, "POST", "/api/reload", auth, NULL, body, sizeof body), 422);
    ASSERT_TRUE(strstr(body, "\"error\":\"reload refused: rules.conf:7: rule x: warn = lots: "
                             "not a size; the running configuration and rules are kept\"") != NULL);
    ASSERT_TRUE(strstr(body, "\"file\":\"rules.conf\",\"line\":7,\"at_ns\":5,"
                             "\"loaded_by\":\"reload\"") != NULL);
    ASSERT_EQ(http_ex(port, "GET", "/api/health", "", NULL, body, sizeof body), 200);
    ASSERT_TRUE(strstr(body, "\"config\":{\"ok\":false,\"error\":\"rules.conf:7: rule x: "
                             "warn = lots: not a size\",\"file\":\"rules.conf\",\"line\":7") != NULL);
    reload_refuse = false;
    reload_fail = true;
    ASSERT_EQ(http_ex(port, "POST", "/api/reload", auth, NULL, body, sizeof body), 500);
    ASSERT_TRUE(strstr(body, "reload failed: rules.conf:3: bad threshold") != NULL);
    ASSERT_EQ(reloads, 3);
    stop(h);
}

/* A server's options: loopback, an ephemeral port, no database yet. */
static cw_http_opts_t server_opts(const char *web, cw_status_t *st)
{
    return (cw_http_opts_t){.listen = "127.0.0.1:0",
                            .db_path = "/nonexistent/commitwatch.db",
                            .web_root = web,
                            .status = st,
                            .threads = 2};
}

/* The route table (http_routes.c) and the OpenAPI document list the same
 * routes with the same methods: every route's pattern is a path of the
 * document with that method, and every path and method of the document
 * is a route. */
/* The OpenAPI key of a route's method: "GET" is "get". */
static const char *lower(const char *method, char m[16])
{
    size_t k = 0;
    for (; method[k] && k < 15; k++)
        m[k] = (char)(method[k] - 'A' + 'a');
    m[k] = 0;
    return m;
}

static void test_openapi_routes(int port)
{
    size_t cap = 1 << 17;
    char *body = malloc(cap);
    ASSERT_TRUE(body != NULL);
    ASSERT_EQ(http(port, "GET", "/api/openapi.json", body, cap), 200);
    cJSON *doc = cJSON_Parse(body);
    cJSON *paths = cJSON_GetObjectItemCaseSensitive(doc, "paths");
    ASSERT_TRUE(cJSON_IsObject(paths));
    const char *method, *pattern;
    size_t nroutes = 0;
    for (size_t i = 0; cw__http_route_at(i, &method, &pattern); i++, nroutes++) {
        char m[16];
        cJSON *p = cJSON_GetObjectItemCaseSensitive(paths, pattern);
        if (!cJSON_GetObjectItemCaseSensitive(p, lower(method, m)))
            fprintf(stderr, "test_http: route %s %s is not in /api/openapi.json\n", method,
                    pattern);
        ASSERT_TRUE(cJSON_GetObjectItemCaseSensitive(p, m) != NULL);
    }
    size_t ndoc = 0;
    cJSON *p, *op;
    cJSON_ArrayForEach(p, paths)
    {
        cJSON_ArrayForEach(op, p)
        {
            bool found = false;
            char m[16];
            for (size_t i = 0; cw__http_route_at(i, &method, &pattern); i++)
                found = found || (strcmp(pattern, p->string) == 0 &&
                                  strcmp(lower(method, m), op->string) == 0);
            if (!found)
                fprintf(stderr, "test_http: /api/openapi.json's %s %s is no route\n", op->string,
                        p->string);
            ASSERT_TRUE(found);
            ndoc++;
        }
    }
    ASSERT_EQ(ndoc, nroutes);
    cJSON_Delete(doc);
    free(body);
}

/* The step under way, and when it began (monotonic ns): the watchdog's. */
static const char *_Atomic step_name = "start";
static _Atomic int64_t step_began;

/* Progress on stderr, so that a run that hangs (a timeout in ctest) says
 * in its output which step it was in. */
static void step(const char *what)
{
    fprintf(stderr, "test_http: %s\n", what);
    fflush(stderr);
    atomic_store(&step_began, cw_plat_mono_ns());
    atomic_store(&step_name, what);
}

/* A step over STEP_MAX_S ends the test, naming it, sooner than ctest's
 * 600 s timeout (under Wine a crashed wineserver leaves a program hung:
 * scripts/wine_run.sh ends it, docs/WINDOWS.md; this is for any other
 * hang). */
#define STEP_MAX_S 180
static void watchdog(void *arg)
{
    (void)arg;
    for (;;) {
        cw_plat_sleep_ns(1000000000);
        int64_t began = atomic_load(&step_began);
        if (began && cw_plat_mono_ns() - began > (int64_t)STEP_MAX_S * 1000000000) {
            fprintf(stderr, "test_http: step \"%s\" still running after %d s: hung\n",
                    atomic_load(&step_name), STEP_MAX_S);
            fflush(stderr);
            _Exit(1);
        }
    }
}

static void test_server(void)
{
    cw_status_t st;
    cw_status_init(&st, "replay:test", true, 1, cw_plat_mono_ns());
    atomic_store(&st.events_ingested, 42);
    atomic_store(&st.events_lost, 1);
    atomic_store(&st.drift_bytes, -7);
    char web[4096];
    snprintf(web, sizeof web, "%s", cw_http_default_web_root());
    cw_http_opts_t o = server_opts(web, &st);
    cw_http_t *h = NULL;
    cw_diag_t d;
    ASSERT_OK(cw_http_start(&o, &h, &d));
    int port = cw_http_port(h);
    ASSERT_TRUE(port > 0);
    char body[8192];

    ASSERT_EQ(http(port, "GET", "/api/health", body, sizeof body), 200);
    ASSERT_TRUE(strstr(body, "\"status\":\"starting\"") != NULL);
    ASSERT_TRUE(strstr(body, "\"events_ingested\":42") != NULL);
    ASSERT_TRUE(strstr(body, "\"drift_corrected_bytes\":-7") != NULL);
    ASSERT_EQ(http(port, "GET", "/api/processes", body, sizeof body), 503);
    ASSERT_TRUE(strstr(body, "{\"error\":") == body);
    ASSERT_EQ(http(port, "GET", "/api/health?x=1", body, sizeof body), 400);
    ASSERT_TRUE(strstr(body, "x: unknown parameter") != NULL);
    ASSERT_EQ(http(port, "GET", "/api/nope", body, sizeof body), 404);
    ASSERT_EQ(http(port, "POST", "/api/health", body, sizeof body), 405);
    ASSERT_EQ(http(port, "GET", "/api/processes/12x", body, sizeof body), 400);
    ASSERT_EQ(http(port, "GET", "/api/openapi.json", body, sizeof body), 200);
    ASSERT_TRUE(strstr(body, "\"openapi\":\"3.") != NULL);
    step("the route table against /api/openapi.json");
    test_openapi_routes(port);
    ASSERT_EQ(http(port, "GET", "/", body, sizeof body), 200);
    ASSERT_TRUE(strstr(body, "commitwatch") != NULL);
    ASSERT_EQ(http(port, "GET", "/../CMakeLists.txt", body, sizeof body), 404);
    ASSERT_EQ(http(port, "GET", "/%2e%2e/CMakeLists.txt", body, sizeof body), 404);
    ASSERT_EQ(http(port, "GET", "/.gitignore", body, sizeof body), 404);
    ASSERT_EQ(http(port, "GET", "/node_modules/uplot/package.json", body, sizeof body), 404);
    step("stopping the server");
    stop(h);

    /* A token allows other methods through to the (absent) operation. */
    o.token = "t0k";
    ASSERT_OK(cw_http_start(&o, &h, &d));
    ASSERT_EQ(http(cw_http_port(h), "POST", "/api/health", body, sizeof body), 401);
    stop(h);
    o.token = NULL;
    step("the state-changing routes");
    test_changes(o);
    step("slow clients");
    cw_log_set_level(CW_LOG_DEBUG); /* the server's start, step by step */
    test_slow_clients(o);
    cw_log_set_level(CW_LOG_INFO);

    o.listen = "127.0.0.1:notaport";
    ASSERT_EQ(cw_http_start(&o, &h, &d), CW_EINVAL);
    ASSERT_TRUE(strstr(d.msg, "--listen") != NULL);
    o.listen = NULL;
    o.web_root = "/nonexistent/web";
    ASSERT_EQ(cw_http_start(&o, &h, &d), CW_EIO);
    cw_http_stop(NULL);
}

/* Writes text to dir/rel, making its folders. */
static void put_file(const char *dir, const char *rel, const char *text)
{
    char path[CW_PATH_MAX];
    snprintf(path, sizeof path, "%s/%s", dir, rel);
    char *slash = strrchr(path, '/');
    *slash = '\0';
    ASSERT_EQ(cw_test_mkdir_p(path), 0);
    *slash = '/';
    FILE *f = fopen(path, "wb");
    ASSERT_TRUE(f != NULL);
    fputs(text, f);
    fclose(f);
}

/* /vendor/PKG/FILE: only the packages of http_static.c's list, from
 * web/vendor/PKG (installed) or else web/node_modules/PKG/dist. */
static void test_vendor(void)
{
    char web[CW_PATH_MAX];
    snprintf(web, sizeof web, "%s/cw_test_vendor_XXXXXX", cw_test_tmpdir());
    ASSERT_TRUE(cw_test_mkdtemp(web) != NULL);
    put_file(web, "index.html", "<title>commitwatch</title>");
    put_file(web, "vendor/d3-flame-graph/d3-flamegraph.umd.min.js", "installed");
    put_file(web, "node_modules/d3-flame-graph/dist/d3-flamegraph.umd.min.js", "npm");
    put_file(web, "node_modules/d3-hierarchy/dist/d3-hierarchy.min.js", "hierarchy");
    put_file(web, "node_modules/d3-hierarchy/package.json", "{}");
    put_file(web, "node_modules/left-pad/dist/left-pad.js", "not shipped");
    cw_status_t st;
    cw_status_init(&st, "replay:test", true, 1, cw_plat_mono_ns());
    cw_http_opts_t o = server_opts(web, &st);
    cw_http_t *h = NULL;
    cw_diag_t d;
    ASSERT_OK(cw_http_start(&o, &h, &d));
    char body[4096];
    int port = cw_http_port(h);
    const char *fg = "/vendor/d3-flame-graph/d3-flamegraph.umd.min.js";
    ASSERT_EQ(http(port, "GET", fg, body, sizeof body), 200);
    ASSERT_TRUE(strstr(body, "installed") != NULL);
    const char *hier = "/vendor/d3-hierarchy/d3-hierarchy.min.js";
    ASSERT_EQ(http(port, "GET", hier, body, sizeof body), 200);
    ASSERT_TRUE(strstr(body, "hierarchy") != NULL);
    ASSERT_EQ(http(port, "GET", "/vendor/d3-hierarchy/nope.js", body, sizeof body), 404);
    ASSERT_TRUE(strstr(body, "npm ci") != NULL);
    ASSERT_EQ(http(port, "GET", "/vendor/d3-hierarchy/../package.json", body, sizeof body), 404);
    ASSERT_EQ(http(port, "GET", "/vendor/left-pad/left-pad.js", body, sizeof body), 404);
    ASSERT_EQ(http(port, "GET", "/vendor/d3-hierarchy", body, sizeof body), 404);
    ASSERT_EQ(http(port, "GET", "/vendor/d3-hier/d3-hierarchy.min.js", body, sizeof body), 404);
    stop(h);
    ASSERT_EQ(cw_test_rmtree(web), 0);
}

int main(void)
{
    test_times();
    test_query();
    test_security();
    sock_init();
    cw_thread_t *dog;
    ASSERT_OK(cw_thread_start(&dog, watchdog, NULL)); /* never joined: it ends with the process */
    step("the server");
    test_server();
    step("the vendored packages");
    test_vendor();
    TEST_DONE();
}
