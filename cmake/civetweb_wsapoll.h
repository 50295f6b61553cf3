/*
 * Forced into civetweb.c of the Windows build (scripts/deps_windows.sh,
 * with -DHAVE_POLL): civetweb's poll() becomes WSAPoll.
 *
 * Without HAVE_POLL, civetweb emulates poll() with select() and puts every
 * socket in both the read (or write) set and the except set. Wine 8's
 * ws2_32 turns that into one AFD poll request naming the socket twice, and
 * its wineserver aborts (server/sock.c, complete_async_poll: "Assertion
 * `output->count == signaled_count' failed") when a reset arrives between
 * its checks of the two entries and the request then times out: the first
 * entry is marked signalled without the request completing. That killed
 * every program of the prefix (docs/WINDOWS.md). WSAPoll names each socket
 * once.
 *
 * Windows' WSAPoll fails with WSAEINVAL when events holds anything but
 * POLLRDNORM, POLLRDBAND and POLLWRNORM, and civetweb asks for POLLERR on
 * single-socket polls; errors and hang-ups are always reported in revents,
 * so the other bits are dropped before the call.
 */
#ifndef CW_CIVETWEB_WSAPOLL_H
#define CW_CIVETWEB_WSAPOLL_H

#include <winsock2.h>

static int cw_civetweb_poll(WSAPOLLFD *fds, unsigned int n, int timeout_ms)
{
    unsigned int i;

    for (i = 0; i < n; i++)
        fds[i].events &= (POLLRDNORM | POLLRDBAND | POLLWRNORM);
    return WSAPoll(fds, n, timeout_ms);
}

#define poll(fds, n, timeout_ms) cw_civetweb_poll((fds), (n), (timeout_ms))

#endif
