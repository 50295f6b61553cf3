/* fuzz_http.c - libFuzzer target for the HTTP API through its request
 * handlers: the real server (cw_http_start, civetweb on an ephemeral
 * loopback port, with a token) in this process, over a database that
 * `run --source replay:` of the MemoryTestApp fixture filled once at
 * start (cw_service_run, no HTTP). Each input is one request, sent on a
 * fresh connection:
 *
 *     METHOD TARGET\n          (TARGET: path and query, as sent)
 *     Header: value\n ...      (optional)
 *     \n
 *     body                     (optional; POST, DELETE)
 *
 * (blanks in TARGET become '+'), to which the harness adds "HTTP/1.1", Host, Connection: close,
 * Content-Length (when there is a body) and the right Authorization
 * header unless the input sends its own. civetweb parses the request;
 * http.c checks it, http_params.c parses the query, http_routes.c
 * dispatches it to a route and the handlers (http_processes.c,
 * http_stacks.c, http_series.c, http_alerts.c, http_metrics.c, ...) run
 * their queries and build the answer.
 * The server must answer every request (never crash, hang or leak) with
 * a status line, never 500 (a parameter the handler let through to a
 * failing query), and every JSON answer must parse.
 *
 * The http, store and alerts sources are compiled into this program with
 * the fuzzer's instrumentation (tests/fuzz/CMakeLists.txt); the worker
 * threads' coverage guides the search too. */
#define _GNU_SOURCE /* strcasestr */
#include <arpa/inet.h>
#include <cjson/cJSON.h>
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <sanitizer/lsan_interface.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include "commitwatch/http.h"
#include "commitwatch/log.h"
#include "commitwatch/service.h"

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define CHECK(c, ...)                                                                              \
    do {                                                                                           \
        if (!(c)) {                                                                                \
            fprintf(stderr, "fuzz_http: invariant failed: %s:%d: %s: ", __FILE__, __LINE__, #c);   \
            fprintf(stderr, __VA_ARGS__);                                                          \
            fputc('\n', stderr);                                                                   \
            abort();                                                                               \
        }                                                                                          \
    } while (0)

#define TOKEN "fuzz-t0ken"

static cw_http_t *server;
static int port;
static char dir[64], db[96];

static int on_reload(void *ctx, char *msg, size_t msglen)
{
    (void)ctx;
    (void)msg;
    (void)msglen;
    return 0;
}

/* The signals libFuzzer handles that come from outside or from its timer
 * (not a fault of the thread itself): the timeout's SIGALRM, a stop's
 * SIGINT and SIGTERM, -handle_usr1/2's graceful exit. Built once, in
 * LLVMFuzzerInitialize, before the server's threads exist. */
static const sigset_t *fuzzer_signals(void)
{
    static sigset_t set;
    static int made;
    if (!made) {
        sigemptyset(&set);
        sigaddset(&set, SIGALRM);
        sigaddset(&set, SIGINT);
        sigaddset(&set, SIGTERM);
        sigaddset(&set, SIGUSR1);
        sigaddset(&set, SIGUSR2);
        made = 1;
    }
    return &set;
}

static void stop_server(void)
{
    cw_http_stop(server);
    server = NULL;
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    if (system(cmd) != 0) fprintf(stderr, "fuzz_http: could not remove %s\n", dir);
}

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc;
    (void)argv;
    cw_log_set_level(CW_LOG_ERROR);
    snprintf(dir, sizeof dir, "/tmp/fuzz_http.%ld", (long)getpid());
    snprintf(db, sizeof db, "%s/commitwatch.db", dir);
    char cmd[160];
    snprintf(cmd, sizeof cmd, "rm -rf '%s' && mkdir -p '%s'", dir, dir);
    if (system(cmd) != 0) abort();
    cw_service_args_t a = {.source = "replay:" CW_FUZZ_FIXTURE, .db = db, .no_http = true};
    cw_diag_t d = {{0}};
    if (cw_service_run(&a, &d) != 0) {
        fprintf(stderr, "fuzz_http: filling %s from %s: %s\n", db, CW_FUZZ_FIXTURE, d.msg);
        abort();
    }
    /* The server's threads start with libFuzzer's asynchronous signals
     * blocked (they inherit this thread's mask), so its timer (-timeout)
     * and a stop (SIGINT, SIGTERM) always interrupt this thread, in the
     * harness's own calls. Its handlers are no async-signal-safe code:
     * they print, symbolize and allocate, and when the timeout's ran on a
     * worker that held the allocator's or SQLite's locks the process hung
     * instead of reporting the timeout (the campaigns of 2026-12-02 (4)). */
    sigset_t old;
    pthread_sigmask(SIG_BLOCK, fuzzer_signals(), &old);
    cw_http_opts_t o = {.listen = "127.0.0.1:0",
                        .db_path = db,
                        .web_root = CW_FUZZ_WEB_ROOT,
                        .token = TOKEN,
                        .threads = 2,
                        .on_reload = on_reload};
    int started = cw_http_start(&o, &server, &d);
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    if (started != 0) {
        fprintf(stderr, "fuzz_http: cannot start the server: %s\n", d.msg);
        abort();
    }
    port = cw_http_port(server);
    atexit(stop_server);
    return 0;
}

/* The request the input describes, in out (cap bytes); its length, or 0
 * when the input has no request line. */
static size_t build_request(const uint8_t *data, size_t size, char *out, size_t cap)
{
    const char *in = (const char *)data, *end = in + size;
    const char *nl = memchr(in, '\n', size);
    if (!nl || nl == in) return 0;
    size_t n = 0;
#define PUT(p, len)                                                                                \
    do {                                                                                           \
        if (n + (len) > cap) return 0;                                                             \
        memcpy(out + n, (p), (len));                                                               \
        n += (len);                                                                                \
    } while (0)
#define PUTS(s) PUT((s), strlen(s))
    /* The request line: blanks in the target become '+', so the line
     * keeps its three parts (civetweb takes whatever follows a second
     * blank as the version, and repeats it in its status line). */
    const char *sp = memchr(in, ' ', (size_t)(nl - in));
    PUT(in, (size_t)(nl - in));
    if (sp)
        for (size_t i = (size_t)(sp - in) + 1; i < n; i++)
            if (out[i] == ' ' || out[i] == '\t' || out[i] == '\r' || out[i] == '\v' ||
                out[i] == '\f')
                out[i] = '+';
    PUTS(" HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n");
    const char *p = nl + 1;
    bool auth = false;
    while (p < end && *p != '\n') { /* header lines up to an empty one */
        const char *e = memchr(p, '\n', (size_t)(end - p));
        if (!e) e = end;
        if ((size_t)(e - p) >= 14 && strncasecmp(p, "Authorization:", 14) == 0) auth = true;
        PUT(p, (size_t)(e - p));
        PUTS("\r\n");
        p = e < end ? e + 1 : end;
    }
    if (p < end) p++; /* the empty line */
    if (!auth) PUTS("Authorization: Bearer " TOKEN "\r\n");
    char clen[48];
    if (p < end) {
        snprintf(clen, sizeof clen, "Content-Length: %zu\r\n", (size_t)(end - p));
        PUTS(clen);
    }
    PUTS("\r\n");
    PUT(p, (size_t)(end - p));
    return n;
#undef PUT
#undef PUTS
}

/* Leaks. libFuzzer's own check (-detect_leaks=1) runs LeakSanitizer after
 * every input that allocated more than it freed, and runs the input
 * again: here nearly every input, because the server's worker threads
 * free a request's memory after the client has its answer, and SQLite's
 * caches grow. That scan of the whole heap was 4/5 of the target's time,
 * so targets.sh runs it with -detect_leaks=0 and the harness checks
 * every LEAK_EVERY requests instead (and LeakSanitizer once more at
 * exit, after the server stopped): a leak fails the run with its
 * allocation's stack; the input saved is the one after which it was
 * seen, within LEAK_EVERY of the one that leaked. Every 256 requests the
 * checks (a heap of about 560 MB, ASan's quarantine included, scanned
 * with the world stopped) were still a quarter of the samples (perf:
 * GetAsanChunkByAddrFastLocked and the lsan functions); every 1024 the
 * same 30,000 inputs take 1.14 - 1.35x less CPU (docs/RELIABILITY.md,
 * "Fuzzing"). */
#define LEAK_EVERY 1024

/* LeakSanitizer's check, with libFuzzer's asynchronous signals held until
 * it ends. The check holds the allocator's locks while it stops the other
 * threads and scans; a handler run on this thread meanwhile (a stop's
 * final statistics and coverage, a timeout's report) allocates and waits
 * for this thread forever: a campaign run of 2026-12-02 (6), stopped with
 * SIGINT, hung so. Held, the signal is handled when the check is over
 * (or by libFuzzer's RSS thread, which waits for the locks like any other
 * thread). tests/fuzz/signal_check.py signals the target during its
 * checks. */
static int leak_check(void)
{
    sigset_t old;
    pthread_sigmask(SIG_BLOCK, fuzzer_signals(), &old);
    int leaked = __lsan_do_recoverable_leak_check();
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    return leaked;
}

/* connect(), through libFuzzer's timer: its SIGALRM (for -timeout) may
 * interrupt a connect that waits (EINTR; the campaign of 2026-12-02 (3)
 * stopped on it twice, at 82,664 and 113,213 executions). The connection
 * then goes on by itself: wait until the socket is writable and take its
 * outcome (SO_ERROR). 0, or -1 with errno. */
static int connect_through_signals(int fd, const struct sockaddr *a, socklen_t n)
{
    if (connect(fd, a, n) == 0) return 0;
    if (errno != EINTR) return -1;
    struct pollfd p = {.fd = fd, .events = POLLOUT};
    int r;
    while ((r = poll(&p, 1, 20000)) < 0 && errno == EINTR)
        ;
    if (r <= 0) {
        if (r == 0) errno = ETIMEDOUT;
        return -1;
    }
    int err = 0;
    socklen_t len = sizeof err;
    if (getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len) != 0) return -1;
    errno = err;
    return err ? -1 : 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static char req[1 << 17], resp[1 << 22];
    static unsigned requests;
    size_t n = build_request(data, size, req, sizeof req);
    if (!n) return 0;
    if (++requests % LEAK_EVERY == 0 && leak_check() != 0) {
        fprintf(stderr, "fuzz_http: LeakSanitizer found a leak within the last %d requests\n",
                LEAK_EVERY);
        abort();
    }
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    CHECK(fd >= 0, "socket");
    struct timeval tv = {.tv_sec = 20};
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    CHECK(connect_through_signals(fd, (struct sockaddr *)&a, sizeof a) == 0,
          "connect to port %d: %s", port, strerror(errno));
    /* The server may answer (and close) before it read the whole request
     * (a refused body): a failed send is then no error. */
    for (size_t sent = 0; sent < n;) {
        ssize_t k = send(fd, req + sent, n - sent, MSG_NOSIGNAL);
        if (k < 0 && errno == EINTR) continue;
        if (k <= 0) break;
        sent += (size_t)k;
    }
    shutdown(fd, SHUT_WR);
    size_t got = 0;
    /* libFuzzer's timer (SIGALRM, for -timeout) interrupts a blocked
     * recv: EINTR is no end of the answer (the campaign found this: an
     * answer cut after its status line). */
    ssize_t k = 0;
    while (got < sizeof resp - 1 &&
           ((k = recv(fd, resp + got, sizeof resp - 1 - got, 0)) > 0 || (k < 0 && errno == EINTR)))
        if (k > 0) got += (size_t)k;
    resp[got] = '\0';
    /* How the read ended, for the messages below: the server's close, or
     * an error (a reset; the 20 s timeout on a starved machine). */
    const char *ended = k < 0 ? strerror(errno) : "the server closed";
    /* Closed with a reset, not a FIN: the answer is read whole, and a
     * TIME_WAIT per input would use up the loopback's ephemeral ports
     * (about 28,000) in a 40 s run at 900 inputs a second. */
    struct linger lg = {.l_onoff = 1, .l_linger = 0};
    setsockopt(fd, SOL_SOCKET, SO_LINGER, &lg, sizeof lg);
    close(fd);
    /* civetweb closes without an answer only on a request line it could
     * not read at all; ours always answers something parsed. */
    if (got == 0) return 0;
    int status = 0;
    CHECK(sscanf(resp, "HTTP/1.%*d %d", &status) == 1,
          "no status line: %.200s", resp);
    CHECK(status >= 200 && status < 600, "status %d", status);
    CHECK(status != 500, "500 for %.*s: %.500s", (int)(strchr(req, '\n') - req), req, resp);
    const char *body = strstr(resp, "\r\n\r\n");
    CHECK(body != NULL, "no end of headers (read ended: %s): %.200s", ended, resp);
    body += 4;
    const char *ct = strcasestr(resp, "\r\nContent-Type: application/json");
    if (ct && ct < body && *body && strncmp(req, "HEAD ", 5) != 0) {
        cJSON *j = cJSON_ParseWithLength(body, got - (size_t)(body - resp));
        CHECK(j != NULL, "JSON answer does not parse: %.300s", body);
        cJSON_Delete(j);
    }
    return 0;
}
