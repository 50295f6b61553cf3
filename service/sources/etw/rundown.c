/* rundown.c - Windows rundown: what every process has committed when
 * tracing starts, from a VirtualQueryEx walk of its address space.
 *
 * For each process of a Toolhelp snapshot: a process_start event (image
 * name from the snapshot, command line from the process when it can be
 * read), then one rundown commit per MEM_COMMIT + MEM_PRIVATE region and
 * one reserve per MEM_RESERVE + MEM_PRIVATE region (reserved, not
 * committed: the memory map draws it faint; no commit figure counts it;
 * not flagged rundown, which the trace format allows on commits only, so
 * it carries the snapshot's time),
 * stacked "(before trace)" (ARCHITECTURE.md, "Rundown"). Mapped images
 * and sections (MEM_IMAGE, MEM_MAPPED) are not private commit and are left
 * out. A process that cannot be opened (the System process, protected
 * processes, or any without the right) is counted and named in the stats,
 * never fatal; one that exits during the walk simply ends its walk.
 *
 * Thread: the caller's; the source's stop() may be called from any thread
 * and ends the walk between processes. */
#define WIN32_LEAN_AND_MEAN
#include <windows.h>

#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <tlhelp32.h>
#include <winternl.h>

#include "commitwatch/platform.h"
#include "commitwatch/platform_win.h"
#include "sources/etw/etw_internal.h"

/* ProcessCommandLineInformation (Windows 8.1+): a UNICODE_STRING. */
#define PROCESS_COMMAND_LINE_INFORMATION 60

typedef NTSTATUS(NTAPI *query_info_fn)(HANDLE, PROCESSINFOCLASS, void *, ULONG, ULONG *);

/* The command line of process h, malloc'd UTF-8, or NULL. */
static char *command_line(HANDLE h)
{
    static query_info_fn query;
    if (!query) {
        HMODULE nt = GetModuleHandleW(L"ntdll.dll");
        query = nt ? (query_info_fn)(void (*)(void))GetProcAddress(nt, "NtQueryInformationProcess")
                   : NULL;
        if (!query) return NULL;
    }
    ULONG len = 0;
    query(h, (PROCESSINFOCLASS)PROCESS_COMMAND_LINE_INFORMATION, NULL, 0, &len);
    if (len < sizeof(UNICODE_STRING) || len > (1u << 20)) return NULL;
    UNICODE_STRING *us = malloc(len + sizeof(wchar_t));
    char *out = NULL;
    if (us && query(h, (PROCESSINFOCLASS)PROCESS_COMMAND_LINE_INFORMATION, us, len, &len) >= 0 &&
        us->Buffer) {
        size_t n = us->Length / sizeof(wchar_t);
        wchar_t *w = malloc((n + 1) * sizeof *w);
        if (w) {
            memcpy(w, us->Buffer, n * sizeof *w);
            w[n] = 0;
            out = cw_win_utf8(w);
            free(w);
        }
    }
    free(us);
    return out;
}

/* Emits one process's committed and reserved private regions. 0 or the
 * sink's error. */
static int walk(HANDLE h, uint32_t pid, int64_t ts, uint32_t stack, const cw_source_sink_t *sink,
                cw_etw_rundown_stats_t *st)
{
    MEMORY_BASIC_INFORMATION mbi;
    const char *p = NULL;
    /* The walk ends where VirtualQueryEx fails: past the last region it
     * returns ERROR_INVALID_PARAMETER, as on Windows. */
    while (VirtualQueryEx(h, p, &mbi, sizeof mbi) == sizeof mbi) {
        if ((mbi.State == MEM_COMMIT || mbi.State == MEM_RESERVE) && mbi.Type == MEM_PRIVATE) {
            bool commit = mbi.State == MEM_COMMIT;
            cw_event_t ev = {.ts = ts,
                             .op = commit ? CW_OP_COMMIT : CW_OP_RESERVE,
                             .pid = pid,
                             .addr = (uint64_t)(uintptr_t)mbi.BaseAddress,
                             .size = mbi.RegionSize,
                             .stack_id = stack,
                             .rundown = commit};
            int rc = sink->emit(sink->ctx, &ev);
            if (rc) return rc;
            *(commit ? &st->regions : &st->reserved) += 1;
            *(commit ? &st->bytes : &st->reserved_bytes) += mbi.RegionSize;
        }
        const char *next = (const char *)mbi.BaseAddress + mbi.RegionSize;
        if (next <= p) break;
        p = next;
    }
    return 0;
}

int cw_etw__rundown(cw_stacks_t *stacks, const cw_source_sink_t *sink, int64_t ts,
                    atomic_bool *stop, cw_etw_rundown_stats_t *st, cw_diag_t *d)
{
    static const char before[] = "(before trace)";
    uint32_t frame, stack;
    int rc;
    memset(st, 0, sizeof *st);
    if ((rc = cw_stacks_intern_frame(stacks, before, sizeof before - 1, &frame)) != 0 ||
        (rc = cw_stacks_intern(stacks, &frame, 1, &stack)) != 0)
        return cw_diag_set(d, rc, "out of memory");
    HANDLE snap = CreateToolhelp32Snapshot(TH32CS_SNAPPROCESS, 0);
    if (snap == INVALID_HANDLE_VALUE)
        return cw_diag_set(d, CW_EIO,
                           "listing the processes failed (CreateToolhelp32Snapshot, error %lu)",
                           (unsigned long)GetLastError());
    PROCESSENTRY32W pe = {.dwSize = sizeof pe};
    for (BOOL ok = Process32FirstW(snap, &pe); ok && !atomic_load(stop);
         ok = Process32NextW(snap, &pe)) {
        uint32_t pid = pe.th32ProcessID;
        if (pid == 0) continue; /* the idle process: no address space */
        st->processes++;
        HANDLE h = OpenProcess(PROCESS_QUERY_INFORMATION | PROCESS_VM_READ, FALSE, pid);
        if (!h) {
            st->unopened++;
            if (st->unopened_names[0] == '\0' ||
                strlen(st->unopened_names) < sizeof st->unopened_names - 40) {
                char *name = cw_win_utf8(pe.szExeFile);
                size_t n = strlen(st->unopened_names);
                snprintf(st->unopened_names + n, sizeof st->unopened_names - n, "%s%s (%lu)",
                         n ? ", " : "", name ? name : "?", (unsigned long)pid);
                free(name);
            }
            continue;
        }
        char *name = cw_win_utf8(pe.szExeFile), *cmd = command_line(h);
        cw_event_t ev = {.ts = ts,
                         .op = CW_OP_PROCESS_START,
                         .pid = pid,
                         .name = name ? name : "?",
                         .cmdline = cmd};
        rc = sink->emit(sink->ctx, &ev);
        free(name);
        free(cmd);
        if (rc == 0) rc = walk(h, pid, ts, stack, sink, st);
        CloseHandle(h);
        if (rc) {
            CloseHandle(snap);
            return rc;
        }
        st->opened++;
    }
    CloseHandle(snap);
    return 0;
}
