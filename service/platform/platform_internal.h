/* platform_internal.h - what the shared files of platform/ (the ones at
 * its top, the same on every OS) ask of each OS's folder (posix/, win/),
 * in the manner of libuv's src/ and src/unix, src/win. */
#ifndef CW_PLATFORM_INTERNAL_H
#define CW_PLATFORM_INTERNAL_H

#include <stdint.h>

/* The OS's wall clock, Unix nanoseconds (clock.c puts the tests' fake
 * clock in front of it). Any thread. */
int64_t cw__plat_os_wall_ns(void);

#endif
