/* inject_probe.c - the library test_inject loads into a running process
 * (cw_plat_inject_library): its constructor appends "loaded PID\n" to the
 * file named by CW_INJECT_PROBE_OUT, so the test sees that dlopen ran its
 * constructor in that process and no other; unless CW_INJECT_PROBE_PEER
 * is 0, it then takes the descriptor commitwatch hands over
 * (inject_peer.h), writes "hello PID" to it and answers 42. */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "platform/posix/intarget/inject_peer.h"

__attribute__((constructor)) static void probe_loaded(void)
{
    const char *out = getenv("CW_INJECT_PROBE_OUT");
    if (!out) return;
    int fd = open(out, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0600);
    if (fd < 0) return;
    char line[64];
    int n = snprintf(line, sizeof line, "loaded %ld\n", (long)getpid());
    if (n > 0 && write(fd, line, (size_t)n) != n) {
        /* nothing to do: the test finds the line missing */
    }
    close(fd);
    const char *peer = getenv("CW_INJECT_PROBE_PEER");
    if (peer && !strcmp(peer, "0")) return;
    int given = -1, s = cw_inject_peer_fetch(&given);
    if (s < 0) return;
    n = snprintf(line, sizeof line, "hello %ld", (long)getpid());
    int64_t answer = n > 0 && write(given, line, (size_t)n) == n ? 42 : -1;
    close(given);
    cw_inject_peer_reply(s, answer);
}
