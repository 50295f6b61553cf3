/* win_internal.h - what the files of platform/win share: the Windows
 * headers, UTF-8 <-> UTF-16 conversion (platform_win.h: every path the
 * program handles is UTF-8; Windows' own are UTF-16, so the W functions are
 * called), the Event Log source's registration and its message ids. */
#ifndef CW_WIN_INTERNAL_H
#define CW_WIN_INTERNAL_H

#ifndef WIN32_LEAN_AND_MEAN
#define WIN32_LEAN_AND_MEAN
#endif
#include <windows.h>

#include "commitwatch/platform_win.h"

/* Event ids of the message table installer/windows/messages.mc (severity
 * bits included, as windmc computes them); keep the two equal. */
#define CW_WIN_MSG_INFO 0x40000001L
#define CW_WIN_MSG_WARNING 0x80000002L
#define CW_WIN_MSG_ERROR 0xC0000003L
/* Alerts (alertlog.c): 100 + cw_plat_alert_kind_t, warning bits but for
 * resolved (104, informational). */
#define CW_WIN_MSG_ALERT_FIRING 0x80000064L
#define CW_WIN_MSG_ALERT_RESOLVED 0x40000068L

/* The Event Log source "commitwatch" (log.c): registered by install. */
#include "commitwatch/error.h"
int cw_win__eventlog_register(cw_diag_t *d);
void cw_win__eventlog_unregister(void);

/* The service SID of NT SERVICE\commitwatch: S-1-5-80- then the SHA-1 of
 * the UTF-16LE upper-case service name as five little-endian 32-bit
 * numbers (as Windows makes TrustedInstaller's). */
#define CW_WIN_SERVICE_SID "S-1-5-80-898765005-3382679298-321017877-2597973266-1886413785"

/* The service's data folder (install, service_scm.c): its DACL is set to
 * CW_WIN_STATE_SDDL, protected (nothing inherited from %ProgramData%,
 * where Users may create files): SYSTEM, Administrators and the service
 * SID have full control, Users read; every ACE is inherited by the files
 * and folders in it, and files already there get it too (fs.c). 0, or
 * CW_EPERM / CW_EIO with d saying why. */
#define CW_WIN_STATE_SDDL                                                                          \
    "D:P(A;OICI;FA;;;SY)(A;OICI;FA;;;BA)"                                                          \
    "(A;OICI;FA;;;" CW_WIN_SERVICE_SID ")"                                                         \
    "(A;OICI;FRFX;;;BU)"
int cw_win__secure_dir(const char *dir, cw_diag_t *d);

#endif
