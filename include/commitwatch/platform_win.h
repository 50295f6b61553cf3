/* platform_win.h - what the Windows platform layer offers the Windows
 * event sources (service/sources/etw/) beyond platform.h: text
 * conversion between the program's UTF-8 and Windows' UTF-16. Defined in
 * service/platform/win/fs.c; only Windows code includes this header.
 * Thread: any. */
#ifndef COMMITWATCH_PLATFORM_WIN_H
#define COMMITWATCH_PLATFORM_WIN_H

#include <stddef.h>

/* malloc'd UTF-16 copy of s, or NULL (ENOMEM or invalid UTF-8). */
wchar_t *cw_win_wide(const char *s);
/* malloc'd UTF-8 copy of w, or NULL. */
char *cw_win_utf8(const wchar_t *w);

#endif
