/* clock.c - POSIX clocks and sleep, the platform's name and the host's. */
#include <errno.h>
#include <stdio.h>
#include <stdatomic.h>
#include <time.h>
#include <unistd.h>

#include "commitwatch/platform.h"

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

/* The fake wall clock of cw_plat_fake_wall (tests); NULL: the real one. */
static _Atomic(int64_t (*)(void *)) fake_fn;
static void *_Atomic fake_ctx;

void cw_plat_fake_wall(int64_t (*fn)(void *ctx), void *ctx)
{
    atomic_store(&fake_ctx, ctx);
    atomic_store(&fake_fn, fn);
}

static int64_t read_clock(clockid_t id)
{
    struct timespec t;
    clock_gettime(id, &t);
    return (int64_t)t.tv_sec * CW_NS_PER_S + t.tv_nsec;
}

int64_t cw_plat_wall_ns(void)
{
    int64_t (*fake)(void *) = atomic_load(&fake_fn);
    if (fake) return fake(atomic_load(&fake_ctx));
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
