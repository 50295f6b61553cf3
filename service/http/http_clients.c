/* http_clients.c - the per-client connection cap.
 *
 * civetweb hands an accepted connection to a worker, which keeps it for
 * the connection's whole life: the wait for each request's head (up to
 * http_request_timeout), every keep-alive request, and the idle time
 * between them. Its only per-connection hook, init_connection, runs on
 * that worker and does not say which client it is (mg_get_request_info
 * is NULL until a request line arrives), and nothing runs before a
 * worker is taken. So the server enforces the cap from the sockets
 * themselves: whenever a worker takes a connection, cw__http_clients_sweep
 * lists the process's connections on the server's port (cw_plat_tcp_list:
 * accepted ones, held by a worker or queued for one) and, for each client
 * address with more than `max`, answers the excess 429 and shuts them
 * down (cw_plat_tcp_refuse); the worker holding one then reads the end of
 * the stream and is free at once. A connection whose request a worker is
 * answering (cw__http_clients_busy) is never chosen.
 *
 * Thread: any worker. `mu` guards the busy list; `sweep_mu` serializes
 * sweeps (their buffer is shared). */
#include "http/http_clients.h"

#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "commitwatch/log.h"
#include "commitwatch/platform.h"

#define MAX_LISTED 4096 /* connections one sweep looks at */

struct cw__http_clients {
    cw_mutex_t *mu, *sweep_mu;
    unsigned max;           /* per address; 0 = no limit */
    atomic_int port;        /* the server's port; 0 = not known yet (no sweep) */
    atomic_llong last_warn; /* monotonic ns of the last refusal logged */
    atomic_uint refused;    /* refusals since it */
    unsigned cap;           /* busy entries: the workers */
    cw__http_conn_t *busy;  /* [cap]; addr "" = free */
    cw__http_conn_t *list;  /* [MAX_LISTED], a sweep's */
    size_t nlist;
    /* Connections refused and shut down that civetweb has not closed yet
     * (a worker still has to read their end): neither counted nor
     * refused again. `busy` marks those seen by the current sweep. */
    cw__http_conn_t *done; /* [MAX_LISTED] */
    size_t ndone;
    bool *victim; /* [MAX_LISTED] */
};

int cw__http_clients_create(unsigned workers, unsigned max, cw__http_clients_t **out)
{
    *out = NULL;
    cw__http_clients_t *c = calloc(1, sizeof *c);
    if (!c) return CW_ENOMEM;
    c->max = max;
    c->cap = workers;
    c->busy = calloc(workers ? workers : 1, sizeof *c->busy);
    c->list = calloc(MAX_LISTED, sizeof *c->list);
    c->victim = calloc(MAX_LISTED, sizeof *c->victim);
    c->done = calloc(MAX_LISTED, sizeof *c->done);
    if (!c->busy || !c->list || !c->victim || !c->done || cw_mutex_create(&c->mu) ||
        cw_mutex_create(&c->sweep_mu)) {
        cw__http_clients_free(c);
        return CW_ENOMEM;
    }
    *out = c;
    return 0;
}

void cw__http_clients_free(cw__http_clients_t *c)
{
    if (!c) return;
    if (c->mu) cw_mutex_destroy(c->mu);
    if (c->sweep_mu) cw_mutex_destroy(c->sweep_mu);
    free(c->busy);
    free(c->list);
    free(c->victim);
    free(c->done);
    free(c);
}

void cw__http_clients_set_port(cw__http_clients_t *c, int port)
{
    atomic_store(&c->port, port);
}

static bool same(const cw__http_conn_t *a, const char *addr, int port)
{
    return a->port == port && strcmp(a->addr, addr) == 0;
}

void cw__http_clients_busy(cw__http_clients_t *c, const char *addr, int port, bool busy)
{
    if (strlen(addr) >= sizeof c->busy[0].addr) return;
    cw_mutex_lock(c->mu);
    for (unsigned i = 0; i < c->cap; i++) {
        cw__http_conn_t *e = &c->busy[i];
        if (busy ? e->addr[0] == 0 : same(e, addr, port)) {
            if (busy) {
                strcpy(e->addr, addr);
                e->port = port;
            } else {
                e->addr[0] = 0;
            }
            break;
        }
    }
    cw_mutex_unlock(c->mu);
}

size_t cw__http_clients_excess(const cw__http_conn_t *conns, size_t n, unsigned max,
                               bool *victim)
{
    size_t nv = 0;
    memset(victim, 0, n * sizeof *victim);
    if (!max) return 0;
    for (size_t i = 0; i < n; i++) {
        /* Each address once: at its first connection. */
        bool seen = false;
        for (size_t j = 0; j < i && !seen; j++)
            seen = strcmp(conns[j].addr, conns[i].addr) == 0;
        if (seen) continue;
        size_t total = 0;
        for (size_t j = i; j < n; j++)
            total += strcmp(conns[j].addr, conns[i].addr) == 0;
        /* The excess, from the last listed back, never a busy one. */
        for (size_t j = n; j-- > i && total > max;)
            if (!conns[j].busy && strcmp(conns[j].addr, conns[i].addr) == 0) {
                victim[j] = true;
                total--;
                nv++;
            }
    }
    return nv;
}

static void listed(void *ctx, const char *peer, int port, intptr_t handle)
{
    cw__http_clients_t *c = ctx;
    if (c->nlist >= MAX_LISTED || strlen(peer) >= sizeof c->list[0].addr) return;
    cw__http_conn_t *e = &c->list[c->nlist++];
    strcpy(e->addr, peer);
    e->port = port;
    e->busy = false;
    e->handle = handle;
}

/* Drops from the list the connections refused before (still open until
 * their worker reads the end), and forgets those no longer listed. */
static void drop_done(cw__http_clients_t *c)
{
    size_t k = 0;
    for (size_t d = 0; d < c->ndone; d++)
        c->done[d].busy = false;
    for (size_t i = 0; i < c->nlist; i++) {
        bool was = false;
        for (size_t d = 0; d < c->ndone && !was; d++)
            if (same(&c->done[d], c->list[i].addr, c->list[i].port)) was = c->done[d].busy = true;
        if (!was) c->list[k++] = c->list[i];
    }
    c->nlist = k;
    k = 0;
    for (size_t d = 0; d < c->ndone; d++)
        if (c->done[d].busy) c->done[k++] = c->done[d];
    c->ndone = k;
}

unsigned cw__http_clients_sweep(cw__http_clients_t *c)
{
    int port = atomic_load(&c->port);
    if (!c->max || !port) return 0;
    cw_mutex_lock(c->sweep_mu);
    c->nlist = 0;
    unsigned refused = 0;
    char who[48] = "";
    if (cw_plat_tcp_list(port, listed, c) == 0) drop_done(c);
    if (c->nlist > c->max) {
        cw_mutex_lock(c->mu);
        for (size_t i = 0; i < c->nlist; i++)
            for (unsigned k = 0; k < c->cap && !c->list[i].busy; k++)
                c->list[i].busy = same(&c->busy[k], c->list[i].addr, c->list[i].port);
        cw_mutex_unlock(c->mu);
        if (cw__http_clients_excess(c->list, c->nlist, c->max, c->victim)) {
            for (size_t i = 0; i < c->nlist; i++) {
                if (!c->victim[i]) continue;
                char body[200], msg[400];
                int bl = snprintf(body, sizeof body,
                                  "{\"error\":\"too many connections from %s: at most %u at "
                                  "once (http_client_connections)\"}",
                                  c->list[i].addr, c->max);
                int ml = snprintf(msg, sizeof msg,
                                  "HTTP/1.1 429 Too Many Requests\r\nContent-Type: "
                                  "application/json\r\nContent-Length: %d\r\nConnection: "
                                  "close\r\nRetry-After: 1\r\n\r\n%s",
                                  bl, body);
                if (cw_plat_tcp_refuse(c->list[i].handle, c->list[i].addr, c->list[i].port, port,
                                       msg, (size_t)ml) != 0)
                    continue;
                if (refused++ == 0) snprintf(who, sizeof who, "%s", c->list[i].addr);
                if (c->ndone < MAX_LISTED) c->done[c->ndone++] = c->list[i];
            }
        }
    }
    cw_mutex_unlock(c->sweep_mu);
    if (refused) {
        unsigned total = atomic_fetch_add(&c->refused, refused) + refused;
        int64_t now = cw_plat_mono_ns(), prev = atomic_load(&c->last_warn);
        if ((prev == 0 || now - prev >= 10 * CW_NS_PER_S) &&
            atomic_compare_exchange_strong(&c->last_warn, &prev, now)) {
            atomic_fetch_sub(&c->refused, total);
            CW_LOGW("http: refused %u connection%s (429) of clients over http_client_connections "
                    "= %u, e.g. from %s (logged at most every 10 s)",
                    total, total == 1 ? "" : "s", c->max, who);
        }
    }
    return refused;
}
