/* session.c - the private kernel session of the live ETW source: a
 * system-logger session (EVENT_TRACE_SYSTEM_LOGGER_MODE, Windows 8 and
 * later) of our own name and GUID, so it neither takes nor disturbs the
 * one "NT Kernel Logger" that xperf and WPR use. EnableFlags PROCESS |
 * THREAD | IMAGE_LOAD | VIRTUAL_ALLOC; stacks on VirtualAlloc only (a free
 * needs none: it is attributed to the commit it frees). The heap drill-down's
 * session (cw_etw__heap_session_start) is the same kind: process and
 * image events, heap tracing turned on for one process, stacks on its
 * heap allocations. A session left over from a run that crashed keeps
 * running in the kernel: it is stopped and replaced. Errors are sentences
 * with the fix. Windows only. */
#include <windows.h>

#include <evntcons.h>
#include <evntrace.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "commitwatch/common.h"
#include "sources/etw/etw_internal.h"

/* {5c3a0e5d-7e2b-4d1a-9c39-6f2b8a1e4c77}: this program's sessions. */
static const GUID session_guid = {
    0x5c3a0e5d, 0x7e2b, 0x4d1a, {0x9c, 0x39, 0x6f, 0x2b, 0x8a, 0x1e, 0x4c, 0x77}};
/* The Heap class (Alloc 0x21, ReAlloc 0x22, Free 0x24). */
static const GUID heap_guid = {
    0x222962ab, 0x6180, 0x4b88, {0xa8, 0x25, 0x34, 0x6b, 0x75, 0xf2, 0xa2, 0x4a}};
/* The kernel's PageFault class (VirtualAlloc 98, VirtualFree 99). */
static const GUID pagefault_guid = {
    0x3d6fa8d3, 0xfe05, 0x11d0, {0x9d, 0xda, 0x00, 0xc0, 0x4f, 0xd7, 0xba, 0x7c}};

#define NAME_BYTES (sizeof(wchar_t) * (CW_ETW_SESSION_NAME_MAX + 1))

/* Properties with room for the session name after them (StartTrace and
 * ControlTrace write the names there). */
static EVENT_TRACE_PROPERTIES *props_new(const wchar_t *name)
{
    size_t total = sizeof(EVENT_TRACE_PROPERTIES) + 2 * NAME_BYTES;
    EVENT_TRACE_PROPERTIES *p = calloc(1, total);
    if (!p) return NULL;
    p->Wnode.BufferSize = (ULONG)total;
    p->Wnode.Flags = WNODE_FLAG_TRACED_GUID;
    p->Wnode.Guid = session_guid;
    p->Wnode.ClientContext = 1; /* QueryPerformanceCounter timestamps */
    p->LoggerNameOffset = sizeof(EVENT_TRACE_PROPERTIES);
    p->LogFileNameOffset = sizeof(EVENT_TRACE_PROPERTIES) + NAME_BYTES;
    wcsncpy((wchar_t *)((char *)p + p->LoggerNameOffset), name, CW_ETW_SESSION_NAME_MAX);
    return p;
}

/* Stops the session of that name, if any: 0 (stopped or not running) or
 * the Windows error. */
static ULONG stop_named(const wchar_t *name)
{
    EVENT_TRACE_PROPERTIES *p = props_new(name);
    if (!p) return ERROR_NOT_ENOUGH_MEMORY;
    ULONG rc = ControlTraceW(0, name, p, EVENT_TRACE_CONTROL_STOP);
    free(p);
    return rc == ERROR_WMI_INSTANCE_NOT_FOUND ? 0 : rc;
}

/* SeSystemProfilePrivilege, which a system-logger session needs, enabled
 * in this process's token (an elevated administrator and LocalSystem hold
 * it, disabled). 0 or the Windows error. */
static DWORD enable_profile_privilege(void)
{
    HANDLE tok;
    if (!OpenProcessToken(GetCurrentProcess(), TOKEN_ADJUST_PRIVILEGES | TOKEN_QUERY, &tok))
        return GetLastError();
    TOKEN_PRIVILEGES tp = {.PrivilegeCount = 1};
    DWORD err = 0;
    if (!LookupPrivilegeValueW(NULL, L"SeSystemProfilePrivilege", &tp.Privileges[0].Luid)) {
        err = GetLastError();
    } else {
        tp.Privileges[0].Attributes = SE_PRIVILEGE_ENABLED;
        if (!AdjustTokenPrivileges(tok, FALSE, &tp, 0, NULL, NULL)) err = GetLastError();
        else err = GetLastError(); /* ERROR_NOT_ALL_ASSIGNED when not held */
    }
    CloseHandle(tok);
    return err;
}

static int fail(cw_diag_t *d, const char *what, ULONG err)
{
    const char *fix;
    switch (err) {
    case ERROR_ACCESS_DENIED:
        fix = ": access denied. The kernel's events need an elevated administrator or "
              "LocalSystem: run from an elevated prompt (Run as administrator), or install and "
              "start the service (`commitwatch install`, `commitwatch start`)";
        break;
    case ERROR_NOT_ALL_ASSIGNED:
        fix = ": this account does not hold SeSystemProfilePrivilege (\"Profile system "
              "performance\"). Run elevated, or as the service (LocalSystem)";
        break;
    case ERROR_NO_SYSTEM_RESOURCES:
        fix = ": Windows' session quota is used up (64 trace sessions, 8 system-logger "
              "sessions). `logman query -ets` lists them; stop one that is not needed "
              "(`logman stop NAME -ets`)";
        break;
    case ERROR_BAD_LENGTH:
    case ERROR_INVALID_PARAMETER:
        fix = ": this Windows does not take a private kernel session (system-logger mode needs "
              "Windows 8 or Windows Server 2012 and later)";
        break;
    case ERROR_NOT_SUPPORTED:
    case ERROR_CALL_NOT_IMPLEMENTED:
        fix = ": this system does not implement it (Wine does not: use --source etl:FILE or "
              "--source rundown there)";
        break;
    default:
        fix = "";
        break;
    }
    return cw_diag_set(d, err == ERROR_ACCESS_DENIED || err == ERROR_NOT_ALL_ASSIGNED ? CW_EPERM
                                                                                       : CW_EIO,
                       "ETW: %s failed (error %lu)%s", what, (unsigned long)err, fix);
}

/* Starts the system-logger session `name` with enable_flags (replacing
 * a leftover one), SeSystemProfilePrivilege enabled first. 0 or CW_E*
 * with d filled. */
static int start_logger(cw_etw_session_t *s, const char *name, ULONG enable_flags, cw_diag_t *d)
{
    memset(s, 0, sizeof *s);
    size_t n = strlen(name);
    if (n == 0 || n > CW_ETW_SESSION_NAME_MAX)
        return cw_diag_set(d, CW_EUSAGE, "ETW: the session name must have 1 to %d characters",
                           CW_ETW_SESSION_NAME_MAX);
    MultiByteToWideChar(CP_UTF8, 0, name, -1, s->name, CW_ETW_SESSION_NAME_MAX + 1);

    DWORD perr = enable_profile_privilege();
    if (perr) return fail(d, "enabling SeSystemProfilePrivilege", perr);

    SYSTEM_INFO si;
    GetSystemInfo(&si);
    ULONG ncpu = si.dwNumberOfProcessors ? si.dwNumberOfProcessors : 1;
    for (int attempt = 0; attempt < 2; attempt++) {
        EVENT_TRACE_PROPERTIES *p = props_new(s->name);
        if (!p) return cw_diag_set(d, CW_ENOMEM, "out of memory");
        p->LogFileMode = EVENT_TRACE_REAL_TIME_MODE | EVENT_TRACE_SYSTEM_LOGGER_MODE;
        p->EnableFlags = enable_flags;
        /* Bursts: a program committing a heap segment per millisecond on
         * every CPU writes ~100 bytes + a stack (~300 bytes) per event:
         * 1 MiB buffers, four per CPU at least and up to 64 MiB + 16 per
         * CPU in all, flushed every second (the consumer's watermark
         * waits for that). */
        p->BufferSize = 1024; /* KiB */
        p->MinimumBuffers = 4 * ncpu;
        p->MaximumBuffers = 64 + 16 * ncpu;
        p->FlushTimer = 1;
        TRACEHANDLE h = 0;
        ULONG rc = StartTraceW(&h, s->name, p);
        if (rc == ERROR_ALREADY_EXISTS && attempt == 0) {
            /* Left over from a run that did not stop it (a crash, a kill). */
            free(p);
            ULONG src = stop_named(s->name);
            if (src) return fail(d, "stopping the session left over from an earlier run", src);
            s->replaced = true;
            continue;
        }
        if (rc != ERROR_SUCCESS) {
            free(p);
            return fail(d, "starting the kernel session (StartTrace)", rc);
        }
        s->handle = h;
        s->props = p;
        break;
    }
    return 0;
}

int cw_etw__session_start(cw_etw_session_t *s, const char *name, cw_diag_t *d)
{
    int rc = start_logger(s, name,
                          EVENT_TRACE_FLAG_PROCESS | EVENT_TRACE_FLAG_THREAD |
                              EVENT_TRACE_FLAG_IMAGE_LOAD | EVENT_TRACE_FLAG_VIRTUAL_ALLOC,
                          d);
    if (rc) return rc;
    /* Stacks for VirtualAlloc; VirtualFree needs none. Without them the
     * events still count, under the tag of an empty stack. */
    CLASSIC_EVENT_ID ids[1] = {{pagefault_guid, 98, {0}}};
    ULONG src = TraceSetInformation(s->handle, TraceStackTracingInfo, ids, sizeof ids);
    s->stacks = src == ERROR_SUCCESS;
    s->stacks_error = src;
    return 0;
}

/* NtSetSystemInformation's class SystemPerformanceTraceInformation and its
 * EventTraceHeapTracingInformation request (a process-ID list): not in the
 * SDK's headers; the values and layout are the ones public NT headers
 * give (docs/WINDOWS.md, "Heap tracing"). */
#define SYSTEM_PERFORMANCE_TRACE_INFORMATION 31
#define EVENT_TRACE_HEAP_TRACING_INFORMATION 8
typedef LONG(NTAPI *set_sysinfo_fn)(ULONG cls, PVOID info, ULONG len);

int cw_etw__heap_session_start(cw_etw_session_t *s, const char *name, uint32_t pid,
                               cw_diag_t *d)
{
    /* Image loads: the frames of the traced process's DLLs get their names. */
    int rc = start_logger(s, name, EVENT_TRACE_FLAG_PROCESS | EVENT_TRACE_FLAG_IMAGE_LOAD, d);
    if (rc) return rc;
    HMODULE ntdll = GetModuleHandleW(L"ntdll.dll");
    set_sysinfo_fn set = ntdll ? (set_sysinfo_fn)(void (*)(void))GetProcAddress(
                                     ntdll, "NtSetSystemInformation")
                               : NULL;
    ULONG req[2] = {EVENT_TRACE_HEAP_TRACING_INFORMATION, pid};
    LONG st = set ? set(SYSTEM_PERFORMANCE_TRACE_INFORMATION, req, sizeof req) : -1;
    if (st != 0) {
        cw_etw__session_stop(s);
        return cw_diag_set(d, CW_EIO,
                           "turning heap tracing on for process %u (NtSetSystemInformation, "
                           "heap tracing process IDs) failed (NTSTATUS 0x%08lx)%s",
                           pid, (unsigned long)st,
                           st == (LONG)0xC0000002 || st == (LONG)0xC0000003 || st == -1
                               ? ": this system does not implement it (Wine does not: record "
                                 "the trace on Windows and read it with heap --etl FILE)"
                               : st == (LONG)0xC0000022
                                   ? ": access denied. Run elevated (Run as administrator) "
                                     "or as the service (LocalSystem)"
                                   : "");
    }
    /* Stacks on Alloc and ReAlloc (a Free names its block by address). */
    CLASSIC_EVENT_ID ids[2] = {{heap_guid, 0x21, {0}}, {heap_guid, 0x22, {0}}};
    ULONG src = TraceSetInformation(s->handle, TraceStackTracingInfo, ids, sizeof ids);
    s->stacks = src == ERROR_SUCCESS;
    s->stacks_error = src;
    return 0;
}

int cw_etw__session_query(cw_etw_session_t *s, uint64_t *events_lost, uint64_t *buffers_lost)
{
    if (!s->props) return CW_EINVAL;
    ULONG rc = ControlTraceW(s->handle, NULL, s->props, EVENT_TRACE_CONTROL_QUERY);
    if (rc != ERROR_SUCCESS) return CW_EIO;
    *events_lost = s->props->EventsLost;
    *buffers_lost = (uint64_t)s->props->RealTimeBuffersLost + s->props->LogBuffersLost;
    return 0;
}

void cw_etw__session_stop(cw_etw_session_t *s)
{
    if (!s->props) return;
    ControlTraceW(s->handle, NULL, s->props, EVENT_TRACE_CONTROL_STOP);
    free(s->props);
    s->props = NULL;
}
