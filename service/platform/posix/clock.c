/* clock.c - POSIX clocks and sleep, the platform's name and the host's
 * (the fake wall clock of the tests is ../clock.c's). */
#include <errno.h>
#include <stdio.h>
#include <time.h>
#include <unistd.h>

#include "commitwatch/platform.h"
#include "platform/platform_internal.h"

const char *cw_plat_name(void)
{
    return CW_HOST_PLATFORM;
}

void cw_plat_hostname(char *buf, size_t len)
{
    if (!len) return;
    if (gethostname(buf, len) != 0) buf[0] = '\0';
    buf[len - 1] = '\0'; /* POSIX leaves a cut name unterminated */
    if (!buf[0]) snprintf(buf, len, "localhost");
}

static int64_t read_clock(clockid_t id)
{
    struct timespec t;
    clock_gettime(id, &t);
    return (int64_t)t.tv_sec * CW_NS_PER_S + t.tv_nsec;
}

int64_t cw__plat_os_wall_ns(void)
{
    return read_clock(CLOCK_REALTIME);
}

int64_t cw_plat_mono_ns(void)
{
    return read_clock(CLOCK_MONOTONIC);
}

void cw_plat_sleep_ns(int64_t ns)
{
    if (ns <= 0) return;
    struct timespec t = {(time_t)(ns / CW_NS_PER_S), (long)(ns % CW_NS_PER_S)};
    /* A signal ends the sleep early: callers re-check their stop flag. */
    nanosleep(&t, NULL);
}
