/* log.c - log sinks on Windows, and the Event Log source.
 *
 *   "stderr"   one fputs per line (a console run).
 *   "eventlog" the Windows Event Log, Application log, source
 *              "commitwatch": warnings and errors as such, the rest as
 *              information, each with a stable event id from the message
 *              table (installer/windows/messages.mc, compiled into the
 *              .exe by windmc/windres) whose text is the line itself.
 *   "service"  what the service uses: every line to
 *              %ProgramData%\commitwatch\commitwatch.log and, from info
 *              up, to the Event Log.
 *
 * The event source is registered by `commitwatch install` (and the MSI):
 * HKLM\SYSTEM\CurrentControlSet\Services\EventLog\Application\commitwatch
 * with EventMessageFile = the path of commitwatch.exe, TypesSupported = 7.
 * Under Wine, RegisterEventSourceW and ReportEventW succeed and store
 * nothing (../shared/WINDOWS.md); the registration is real registry data. */
#include "platform/win/win_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "commitwatch/log.h"
#include "commitwatch/platform.h"

#define EVENTLOG_KEY L"SYSTEM\\CurrentControlSet\\Services\\EventLog\\Application\\commitwatch"

static HANDLE source; /* RegisterEventSourceW, or NULL */
static FILE *file;    /* the service's log file, or NULL */
static SRWLOCK file_lock = SRWLOCK_INIT;

static WORD event_type(cw_log_level_t lvl)
{
    return lvl >= CW_LOG_ERROR  ? EVENTLOG_ERROR_TYPE
           : lvl == CW_LOG_WARN ? EVENTLOG_WARNING_TYPE
                                : EVENTLOG_INFORMATION_TYPE;
}

static DWORD event_id(cw_log_level_t lvl)
{
    return lvl >= CW_LOG_ERROR  ? CW_WIN_MSG_ERROR
           : lvl == CW_LOG_WARN ? CW_WIN_MSG_WARNING
                                : CW_WIN_MSG_INFO;
}

static void report(cw_log_level_t lvl, const char *line)
{
    if (!source) return;
    char text[2048];
    cw_strlcpy(text, strncmp(line, "commitwatch: ", 13) == 0 ? line + 13 : line, sizeof text);
    text[strcspn(text, "\n")] = '\0';
    wchar_t *w = cw_win_wide(text);
    const wchar_t *strings[1] = {w ? w : L"(a log line that is not valid UTF-8)"};
    ReportEventW(source, event_type(lvl), 0, event_id(lvl), NULL, 1, 0, strings, NULL);
    free(w);
}

static void eventlog_sink(cw_log_level_t lvl, const char *line)
{
    report(lvl, line);
}

static void service_sink(cw_log_level_t lvl, const char *line)
{
    if (file) {
        AcquireSRWLockExclusive(&file_lock);
        fputs(line, file);
        fflush(file);
        ReleaseSRWLockExclusive(&file_lock);
    }
    if (lvl >= CW_LOG_INFO) report(lvl, line);
}

int cw_plat_log_open(const char *sink, cw_diag_t *d)
{
    cw_plat_log_close();
    if (!sink || strcmp(sink, "stderr") == 0) return 0;
    if (strcmp(sink, "eventlog") != 0 && strcmp(sink, "service") != 0)
        return cw_diag_set(d, CW_EINVAL,
                           "log = %s: unknown log sink (known: stderr, eventlog, service)", sink);
    source = RegisterEventSourceW(NULL, L"commitwatch");
    if (strcmp(sink, "service") == 0) {
        char path[CW_PATH_MAX + 32];
        snprintf(path, sizeof path, "%s\\commitwatch.log", cw_plat_state_dir());
        wchar_t *w = cw_win_wide(path);
        file = w ? _wfopen(w, L"a") : NULL;
        free(w);
        cw_log_set_sink(service_sink);
    } else {
        cw_log_set_sink(eventlog_sink);
    }
    return 0;
}

void cw_plat_log_close(void)
{
    cw_log_set_sink(NULL);
    if (source) DeregisterEventSource(source);
    source = NULL;
    if (file) fclose(file);
    file = NULL;
}

int cw_win__eventlog_register(cw_diag_t *d)
{
    wchar_t exe[CW_PATH_MAX];
    HKEY key;
    DWORD n = GetModuleFileNameW(NULL, exe, CW_PATH_MAX);
    if (!n || n >= CW_PATH_MAX) return cw_diag_set(d, CW_EIO, "cannot find commitwatch.exe's path");
    LONG rc = RegCreateKeyExW(HKEY_LOCAL_MACHINE, EVENTLOG_KEY, 0, NULL, 0, KEY_SET_VALUE, NULL,
                              &key, NULL);
    if (rc != ERROR_SUCCESS)
        return cw_diag_set(d, rc == ERROR_ACCESS_DENIED ? CW_EPERM : CW_EIO,
                           "registering the Event Log source failed (error %ld)%s", (long)rc,
                           rc == ERROR_ACCESS_DENIED ? ": run from an elevated prompt" : "");
    DWORD types = EVENTLOG_ERROR_TYPE | EVENTLOG_WARNING_TYPE | EVENTLOG_INFORMATION_TYPE;
    rc = RegSetValueExW(key, L"EventMessageFile", 0, REG_EXPAND_SZ, (const BYTE *)exe,
                        (DWORD)((wcslen(exe) + 1) * sizeof *exe));
    if (rc == ERROR_SUCCESS)
        rc = RegSetValueExW(key, L"TypesSupported", 0, REG_DWORD, (const BYTE *)&types,
                            sizeof types);
    RegCloseKey(key);
    if (rc != ERROR_SUCCESS)
        return cw_diag_set(d, CW_EIO, "writing the Event Log source failed (error %ld)", (long)rc);
    return 0;
}

void cw_win__eventlog_unregister(void)
{
    RegDeleteKeyW(HKEY_LOCAL_MACHINE, EVENTLOG_KEY);
}
