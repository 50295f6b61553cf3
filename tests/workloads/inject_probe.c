/* inject_probe.c - the library test_inject loads into a running process
 * (cw_plat_inject_library): its constructor appends "loaded PID\n" to the
 * file named by CW_INJECT_PROBE_OUT, so the test sees that dlopen ran its
 * constructor in that process and no other. */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

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
}
