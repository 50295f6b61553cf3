/* run.c - running a program with bytes on its standard input and a
 * timeout (platform.h, cw_plat_run: the alerts' exec hook).
 *
 * posix_spawn, no shell and no PATH search: argv is {path, NULL}. The
 * child's stdin is one end of a socketpair rather than a pipe, so that
 * writing to a child that has exited (or closed its stdin) fails with
 * EPIPE from send(MSG_NOSIGNAL) instead of raising SIGPIPE in the service.
 * The child runs in a process group of its own, which the timeout kills
 * whole (SIGKILL), grandchildren included. */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "commitwatch/platform.h"

extern char **environ;

/* Feeds in to fd until written, refused (the child closed it) or the
 * deadline; never blocks past it. */
static void feed(int fd, const char *in, size_t len, int64_t deadline)
{
    size_t off = 0;
    while (off < len) {
        ssize_t n = send(fd, in + off, len - off, MSG_NOSIGNAL | MSG_DONTWAIT);
        if (n > 0) {
            off += (size_t)n;
            continue;
        }
        if (n < 0 && errno == EINTR) continue;
        if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
            int64_t left = deadline ? deadline - cw_plat_mono_ns() : 100000000;
            if (left <= 0) return;
            struct pollfd p = {.fd = fd, .events = POLLOUT};
            poll(&p, 1, (int)(left / 1000000 + 1 > 100 ? 100 : left / 1000000 + 1));
            continue;
        }
        return; /* EPIPE and the like: the child does not want them */
    }
}

int cw_plat_run(const char *path, const void *in, size_t in_len, int64_t timeout_ns, int *exit_code,
                bool *timed_out, cw_diag_t *d)
{
    *exit_code = -1;
    *timed_out = false;
    int sv[2];
    if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) != 0)
        return cw_diag_set(d, CW_EIO, "cannot create the program's stdin: %s", strerror(errno));
    /* The child's end is read-only from its side. */
    shutdown(sv[1], SHUT_WR);
    posix_spawn_file_actions_t fa;
    posix_spawnattr_t at;
    posix_spawn_file_actions_init(&fa);
    posix_spawnattr_init(&at);
    posix_spawn_file_actions_adddup2(&fa, sv[1], 0);
    posix_spawnattr_setpgroup(&at, 0);
    sigset_t none, all;
    sigemptyset(&none);
    sigfillset(&all);
    posix_spawnattr_setsigmask(&at, &none);
    /* Signals the service ignores or catches start at their defaults. */
    posix_spawnattr_setsigdefault(&at, &all);
    posix_spawnattr_setflags(&at, POSIX_SPAWN_SETPGROUP | POSIX_SPAWN_SETSIGMASK |
                                      POSIX_SPAWN_SETSIGDEF);
    char *argv[] = {(char *)path, NULL};
    pid_t pid;
    int rc = posix_spawn(&pid, path, &fa, &at, argv, environ);
    posix_spawn_file_actions_destroy(&fa);
    posix_spawnattr_destroy(&at);
    close(sv[1]);
    if (rc != 0) {
        close(sv[0]);
        int err = rc == ENOENT ? CW_ENOENT : rc == EACCES || rc == EPERM ? CW_EPERM : CW_EIO;
        return cw_diag_set(d, err, "cannot run %s: %s", path, strerror(rc));
    }
    int64_t deadline = timeout_ns > 0 ? cw_plat_mono_ns() + timeout_ns : 0;
    feed(sv[0], in, in_len, deadline);
    shutdown(sv[0], SHUT_WR);

    /* Wait, polling (a child of this thread only: no SIGCHLD handler to
     * share), then kill the group at the deadline. */
    int status = 0;
    int64_t nap = 1000000; /* 1 ms, growing to 20 ms */
    for (;;) {
        pid_t w = waitpid(pid, &status, WNOHANG);
        if (w == pid) break;
        if (w < 0 && errno != EINTR) {
            close(sv[0]);
            return cw_diag_set(d, CW_EIO, "waiting for %s: %s", path, strerror(errno));
        }
        if (deadline && cw_plat_mono_ns() >= deadline) {
            kill(-pid, SIGKILL);
            kill(pid, SIGKILL);
            while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
            }
            *timed_out = true;
            break;
        }
        cw_plat_sleep_ns(nap);
        if (nap < 20000000) nap *= 2;
    }
    close(sv[0]);
    if (!*timed_out) *exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -WTERMSIG(status);
    return 0;
}
