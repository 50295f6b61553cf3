/* win_internal.h - what the files of platform/win share: UTF-8 <-> UTF-16
 * conversion (every path the program handles is UTF-8; Windows' own are
 * UTF-16, so the W functions are called) and the Windows headers. */
#ifndef CW_WIN_INTERNAL_H
#define CW_WIN_INTERNAL_H

#ifndef WIN32_LEAN_AND_MEAN
#define WIN32_LEAN_AND_MEAN
#endif
#include <windows.h>

/* malloc'd UTF-16 copy of s, or NULL (ENOMEM or invalid UTF-8). */
wchar_t *cw_win__wide(const char *s);
/* malloc'd UTF-8 copy of w, or NULL. */
char *cw_win__utf8(const wchar_t *w);

/* Event ids of the message table installer/windows/messages.mc (severity
 * bits included, as windmc computes them); keep the two equal. */
#define CW_WIN_MSG_INFO 0x40000001L
#define CW_WIN_MSG_WARNING 0x80000002L
#define CW_WIN_MSG_ERROR 0xC0000003L

/* The Event Log source "commitwatch" (log.c): registered by install. */
#include "commitwatch/error.h"
int cw_win__eventlog_register(cw_diag_t *d);
void cw_win__eventlog_unregister(void);

#endif
