/* net.c - this process's TCP connections on a local port (platform.h,
 * cw_plat_tcp_list and cw_plat_tcp_refuse): the descriptors of
 * /proc/self/fd that are sockets, matched by getsockname/getpeername. A
 * descriptor another thread closes meanwhile fails those calls and is
 * skipped; one reused between the list and the refusal is checked again
 * by its endpoints, and a TCP connection's endpoints are unique. */
#include <arpa/inet.h>
#include <dirent.h>
#include <netinet/in.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include "commitwatch/platform.h"

/* The numeric address and port of sa, as civetweb writes remote_addr
 * (IPv4 dotted, IPv6 without brackets). false for other families. */
static bool endpoint(const struct sockaddr_storage *sa, char *addr, size_t len, int *port)
{
    if (sa->ss_family == AF_INET) {
        const struct sockaddr_in *in = (const struct sockaddr_in *)sa;
        *port = ntohs(in->sin_port);
        return inet_ntop(AF_INET, &in->sin_addr, addr, (socklen_t)len) != NULL;
    }
    if (sa->ss_family == AF_INET6) {
        const struct sockaddr_in6 *in = (const struct sockaddr_in6 *)sa;
        *port = ntohs(in->sin6_port);
        return inet_ntop(AF_INET6, &in->sin6_addr, addr, (socklen_t)len) != NULL;
    }
    return false;
}

/* Is fd a connected TCP socket on local_port? Its peer into addr, *port. */
static bool peer_of(int fd, int local_port, char addr[64], int *port)
{
    struct sockaddr_storage sa;
    socklen_t sl = sizeof sa;
    int lport;
    if (getsockname(fd, (struct sockaddr *)&sa, &sl) != 0) return false; /* not a socket */
    if (!endpoint(&sa, addr, 64, &lport) || lport != local_port) return false;
    sl = sizeof sa;
    if (getpeername(fd, (struct sockaddr *)&sa, &sl) != 0) return false; /* the listener */
    return endpoint(&sa, addr, 64, port);
}

int cw_plat_tcp_list(int local_port,
                     void (*cb)(void *ctx, const char *peer_addr, int peer_port, intptr_t handle),
                     void *ctx)
{
    DIR *dir = opendir("/proc/self/fd");
    if (!dir) return CW_EIO;
    for (struct dirent *e; (e = readdir(dir));) {
        char *end, addr[64];
        int port;
        long fd = strtol(e->d_name, &end, 10);
        if (*end || end == e->d_name || fd == dirfd(dir)) continue;
        if (peer_of((int)fd, local_port, addr, &port)) cb(ctx, addr, port, (intptr_t)fd);
    }
    closedir(dir);
    return 0;
}

int cw_plat_tcp_refuse(intptr_t handle, const char *peer_addr, int peer_port, int local_port,
                       const void *msg, size_t len)
{
    char addr[64];
    int port, fd = (int)handle;
    if (!peer_of(fd, local_port, addr, &port) || port != peer_port || strcmp(addr, peer_addr))
        return CW_ENOENT;
    if (len) (void)send(fd, msg, len, MSG_DONTWAIT | MSG_NOSIGNAL);
    shutdown(fd, SHUT_RDWR);
    return 0;
}
