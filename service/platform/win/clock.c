/* clock.c - Windows clocks and sleep, the platform's name and the host's
 * (the NetBIOS computer name). The wall
 * clock is GetSystemTimePreciseAsFileTime (100 ns since 1601); the
 * monotonic clock is QueryPerformanceCounter, the clock ETW's raw
 * timestamps use. The fake wall clock of the tests is ../clock.c's. */
#include "platform/win/win_internal.h"

#include <stdio.h>

#include "commitwatch/platform.h"
#include "platform/platform_internal.h"

/* 100 ns intervals between 1601-01-01 and 1970-01-01. */
#define EPOCH_DIFF_100NS 116444736000000000LL

const char *cw_plat_name(void)
{
    return "windows";
}

void cw_plat_hostname(char *buf, size_t len)
{
    if (!len) return;
    DWORD n = len > 0xffff ? 0xffff : (DWORD)len;
    if (!GetComputerNameA(buf, &n)) buf[0] = '\0';
    buf[len - 1] = '\0';
    if (!buf[0]) snprintf(buf, len, "localhost");
}

int64_t cw__plat_os_wall_ns(void)
{
    FILETIME ft;
    GetSystemTimePreciseAsFileTime(&ft);
    int64_t t = (int64_t)(((uint64_t)ft.dwHighDateTime << 32) | ft.dwLowDateTime);
    return (t - EPOCH_DIFF_100NS) * 100;
}

int64_t cw_plat_mono_ns(void)
{
    static LARGE_INTEGER freq; /* constant after boot; a race writes the same value */
    LARGE_INTEGER now;
    if (!freq.QuadPart) QueryPerformanceFrequency(&freq);
    QueryPerformanceCounter(&now);
    /* Split to avoid overflowing 64 bits at high counter frequencies. */
    int64_t sec = now.QuadPart / freq.QuadPart, rem = now.QuadPart % freq.QuadPart;
    return sec * CW_NS_PER_S + rem * CW_NS_PER_S / freq.QuadPart;
}

void cw_plat_sleep_ns(int64_t ns)
{
    if (ns <= 0) return;
    int64_t ms = (ns + 999999) / 1000000;
    Sleep(ms > 0x7ffffffe ? 0x7ffffffe : (DWORD)ms);
}
