/* alertlog.c - alert entries in the Windows Event Log (platform.h): the
 * Application log, source "commitwatch" (registered by install and the
 * MSI; log.c), an event id per kind of alert event from the message table
 * (installer/windows/messages.mc: 100 firing, 101 severity rose, 102
 * severity fell, 103 still firing, 104 resolved), the type by severity
 * (information for a resolve, warning, error for critical), and the
 * insertion strings: the message, then the entry's field values in order
 * (process, pid, tag, value, threshold, leak score, time to limit, ...).
 * Under Wine ReportEventW succeeds and stores nothing (../shared/WINDOWS.md). */
#include "platform/win/win_internal.h"

#include <stdlib.h>
#include <string.h>

#include "commitwatch/platform.h"

#define MAX_STRINGS 16

struct cw_plat_alert_log {
    HANDLE source;
};

int cw_plat_alert_log_open(const char *kind, const char *root, cw_plat_alert_log_t **out,
                           cw_diag_t *d)
{
    (void)root;
    *out = NULL;
    if (kind && strcmp(kind, "auto") != 0 && strcmp(kind, "eventlog") != 0)
        return cw_diag_set(d, CW_EINVAL,
                           "alert_log = %s: not a system log here (known: auto, eventlog, no)",
                           kind);
    cw_plat_alert_log_t *l = calloc(1, sizeof *l);
    if (!l) return cw_diag_set(d, CW_ENOMEM, "out of memory");
    l->source = RegisterEventSourceW(NULL, L"commitwatch");
    if (!l->source) {
        DWORD e = GetLastError();
        free(l);
        return cw_diag_set(d, CW_EIO,
                           "cannot open the Event Log source commitwatch (error %lu); run "
                           "`commitwatch install` from an elevated prompt to register it",
                           (unsigned long)e);
    }
    *out = l;
    return 0;
}

const char *cw_plat_alert_log_name(const cw_plat_alert_log_t *l)
{
    (void)l;
    return "eventlog";
}

int cw_plat_alert_log_write(cw_plat_alert_log_t *l, const cw_plat_alert_entry_t *e, cw_diag_t *d)
{
    wchar_t *w[MAX_STRINGS] = {0};
    WORD n = 0;
    int err = 0;
    w[n++] = cw_win_wide(e->message ? e->message : "");
    for (size_t i = 0; i < e->nfields && n < MAX_STRINGS; i++)
        w[n++] = cw_win_wide(e->fields[i].value ? e->fields[i].value : "");
    for (WORD i = 0; i < n; i++)
        if (!w[i]) err = cw_diag_set(d, CW_EINVAL, "an alert field is not valid UTF-8");
    if (!err) {
        WORD type = e->level == CW_PLAT_ALERT_ERROR     ? EVENTLOG_ERROR_TYPE
                    : e->level == CW_PLAT_ALERT_WARNING ? EVENTLOG_WARNING_TYPE
                                                        : EVENTLOG_INFORMATION_TYPE;
        DWORD id = e->kind == CW_PLAT_ALERT_RESOLVED ? (DWORD)CW_WIN_MSG_ALERT_RESOLVED
                                                     : (DWORD)CW_WIN_MSG_ALERT_FIRING + e->kind;
        if (!ReportEventW(l->source, type, 0, id, NULL, n, 0, (LPCWSTR *)w, NULL))
            err = cw_diag_set(d, CW_EIO, "eventlog: ReportEventW failed (error %lu)",
                              (unsigned long)GetLastError());
    }
    for (WORD i = 0; i < n; i++)
        free(w[i]);
    return err;
}

void cw_plat_alert_log_close(cw_plat_alert_log_t *l)
{
    if (!l) return;
    DeregisterEventSource(l->source);
    free(l);
}
