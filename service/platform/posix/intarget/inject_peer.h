/* inject_peer.h - the library's side of cw_plat_inject_library's hand-over
 * (platform.h): code compiled into a library that commitwatch loads into a
 * running process (the heap interposer; the tests' probe), never into
 * commitwatch itself.
 *
 * commitwatch listens, before it loads the library, on the abstract unix
 * socket "commitwatch-inject.PID" (PID: the process's own). The library's
 * constructor connects to it, receives one message ("CWI1" and, as
 * SCM_RIGHTS, the descriptor commitwatch gives it), and answers with one
 * int64_t (>= 0: it is set up, e.g. the number of calls it hooked; < 0: it
 * gave up) before its constructor returns. Header-only: a library built
 * with nothing but libc includes it once.
 *
 * Linux. Thread: the constructor's. */
#ifndef COMMITWATCH_INJECT_PEER_H
#define COMMITWATCH_INJECT_PEER_H

#include <errno.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#define CW_INJECT_SOCKET_FMT "commitwatch-inject.%ld"
#define CW_INJECT_HELLO "CWI1"

/* The abstract address of pid's hand-over socket; its length in *len. */
static inline struct sockaddr_un cw_inject_addr(long pid, socklen_t *len)
{
    struct sockaddr_un a;
    memset(&a, 0, sizeof a);
    a.sun_family = AF_UNIX;
    int n = snprintf(a.sun_path + 1, sizeof a.sun_path - 1, CW_INJECT_SOCKET_FMT, pid);
    *len = (socklen_t)(offsetof(struct sockaddr_un, sun_path) + 1 + (size_t)n);
    return a;
}

/* Connects to commitwatch and receives the descriptor. Returns the
 * connected socket (for cw_inject_peer_reply) and *fd, or -1 when nobody
 * hands one over (the library was loaded otherwise, e.g. by LD_PRELOAD). */
static inline int cw_inject_peer_fetch(int *fd)
{
    int s = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
    if (s < 0) return -1;
    socklen_t len;
    struct sockaddr_un a = cw_inject_addr((long)getpid(), &len);
    if (connect(s, (struct sockaddr *)&a, len) != 0) {
        close(s);
        return -1;
    }
    char buf[8];
    union {
        struct cmsghdr h;
        char space[CMSG_SPACE(sizeof(int))];
    } ctl;
    struct iovec io = {buf, sizeof buf};
    struct msghdr m = {.msg_iov = &io,
                       .msg_iovlen = 1,
                       .msg_control = ctl.space,
                       .msg_controllen = sizeof ctl.space};
    ssize_t n;
    do
        n = recvmsg(s, &m, MSG_CMSG_CLOEXEC);
    while (n < 0 && errno == EINTR);
    struct cmsghdr *c = n == (ssize_t)strlen(CW_INJECT_HELLO) ? CMSG_FIRSTHDR(&m) : NULL;
    if (!c || memcmp(buf, CW_INJECT_HELLO, strlen(CW_INJECT_HELLO)) != 0 ||
        c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS ||
        c->cmsg_len != CMSG_LEN(sizeof(int))) {
        close(s);
        return -1;
    }
    memcpy(fd, CMSG_DATA(c), sizeof *fd);
    return s;
}

/* Answers commitwatch (v >= 0: set up) and closes the socket. */
static inline void cw_inject_peer_reply(int s, int64_t v)
{
    ssize_t n;
    do
        n = send(s, &v, sizeof v, MSG_NOSIGNAL);
    while (n < 0 && errno == EINTR);
    close(s);
}

#endif
