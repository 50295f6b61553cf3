/* clock.c - the wall clock on every OS: the tests' fake clock
 * (cw_plat_fake_wall) in front of the OS's (cw__plat_os_wall_ns,
 * posix/clock.c and win/clock.c). */
#include <stdatomic.h>

#include "commitwatch/platform.h"
#include "platform/platform_internal.h"

/* The fake wall clock of cw_plat_fake_wall (tests); NULL: the real one. */
static _Atomic(int64_t (*)(void *)) fake_fn;
static void *_Atomic fake_ctx;

void cw_plat_fake_wall(int64_t (*fn)(void *ctx), void *ctx)
{
    atomic_store(&fake_ctx, ctx);
    atomic_store(&fake_fn, fn);
}

int64_t cw_plat_wall_ns(void)
{
    int64_t (*fake)(void *) = atomic_load(&fake_fn);
    if (fake) return fake(atomic_load(&fake_ctx));
    return cw__plat_os_wall_ns();
}
