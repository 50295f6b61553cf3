/* http_clients.h - the per-client connection cap (http_clients.c): how
 * many connections one client address may hold, enforced from the
 * server's sockets whenever a worker takes a connection.
 *
 * Thread: any civetweb worker; the list locks inside. Used by http.c. */
#ifndef CW_HTTP_CLIENTS_H
#define CW_HTTP_CLIENTS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

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

#endif
