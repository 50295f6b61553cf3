/* net.c - this process's TCP connections on a local port (platform.h):
 * not on Windows, where a SOCKET is a handle that cannot be listed the
 * way /proc/self/fd lists descriptors; the HTTP server's per-client cap
 * is not enforced there (docs/RELIABILITY.md, "Hostile HTTP clients"). */
#include "commitwatch/platform.h"

int cw_plat_tcp_list(int local_port,
                     void (*cb)(void *ctx, const char *peer_addr, int peer_port, intptr_t handle),
                     void *ctx)
{
    (void)local_port;
    (void)cb;
    (void)ctx;
    return CW_ENOSYS;
}

int cw_plat_tcp_refuse(intptr_t handle, const char *peer_addr, int peer_port, int local_port,
                       const void *msg, size_t len)
{
    (void)handle;
    (void)peer_addr;
    (void)peer_port;
    (void)local_port;
    (void)msg;
    (void)len;
    return CW_ENOSYS;
}
