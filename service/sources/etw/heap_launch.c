/* heap_launch.c - the heap drill-down on Windows (heap_launch.h): an ETW
 * heap session for one process (session.c: heap tracing turned on for its
 * ID, stacks on its allocations), read like the live source (live.c,
 * cw_etw__heap_run) into the heap model by the .etl reader's heap layer:
 * the decoder `heap --etl` uses. Attach mode (`heap --pid PID`) traces a
 * running process; launch mode (`heap -- PROGRAM`) starts the program
 * suspended, and lets it run once its session is being read, so its first
 * allocation is traced (as TraceHeap -EXE does); when the session cannot
 * start, the program is ended before it ran.
 *
 * DESIGN (threads): the caller's thread runs the session's reading loop
 * and applies the events to the model; the consumer thread (live.c) only
 * queues them. cw_heap_launch_stop() and args->stop may be set from any
 * thread or a signal handler: done() reads them every 100 ms. Windows only. */
#include <windows.h>

#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "commitwatch/heap_launch.h"
#include "commitwatch/log.h"
#include "commitwatch/platform.h"
#include "sources/etw/etw_internal.h"

static atomic_bool stop_all;

void cw_heap_launch_stop(void)
{
    atomic_store(&stop_all, true);
}

/* The trace's state, shared by the reader's callbacks and done(). */
typedef struct heap_trace {
    const cw_heap_launch_args_t *a;
    cw_heap_model_t *m;
    cw_stacks_t *stacks;
    cw_heap_account_t mem; /* what this trace adds to heap_traces (memstat.h) */
    HANDLE proc;           /* SYNCHRONIZE | PROCESS_QUERY_LIMITED_INFORMATION, or all access */
    HANDLE thread;         /* launch mode: the program's first thread, suspended; else NULL */
    bool resumed;
    int64_t deadline; /* monotonic ns, or 0 */
    uint64_t applied;
    uint32_t pid;
    bool exited;
} heap_trace_t;

static bool done(void *ctx)
{
    heap_trace_t *t = ctx;
    if (atomic_load(&stop_all) || (t->a->stop && atomic_load(t->a->stop))) return true;
    if (t->deadline && cw_plat_mono_ns() >= t->deadline) return true;
    /* The process ended: its last events are read after the loop. */
    if (WaitForSingleObject(t->proc, 0) == WAIT_OBJECT_0) t->exited = true;
    return t->exited;
}

/* The session's process events name nothing the model needs: the traced
 * process was announced before the session started. */
static int on_event(void *ctx, const cw_event_t *ev)
{
    (void)ctx;
    (void)ev;
    return 0;
}

static int on_heap(void *ctx, const cw_heap_ev_t *ev)
{
    heap_trace_t *t = ctx;
    if (ev->pid != t->pid) return 0;
    t->applied++;
    if (t->a->progress) atomic_store(t->a->progress, t->applied);
    int rc = cw_heap_model_apply(t->m, ev);
    cw_heap_account(&t->mem, t->m, t->stacks, cw_plat_mono_ns());
    return rc;
}

/* Launch mode: the session is being read, the program may run. */
static void started(void *ctx)
{
    heap_trace_t *t = ctx;
    if (t->thread && ResumeThread(t->thread) != (DWORD)-1) t->resumed = true;
}

/* Appends s (UTF-8) to the command line w[*n..cap) as one argument, quoted
 * as CommandLineToArgvW reads it: a run of backslashes is doubled before a
 * quote (which is escaped) and before the closing quote. false when it does
 * not fit. */
static bool put_arg(wchar_t *w, size_t *n, size_t cap, const char *s)
{
    int units = MultiByteToWideChar(CP_UTF8, 0, s, -1, NULL, 0);
    if (units <= 0 || *n + 2 * (size_t)units + 4 > cap) return false; /* the worst case */
    wchar_t *a = malloc((size_t)units * sizeof *a);
    if (!a) return false;
    MultiByteToWideChar(CP_UTF8, 0, s, -1, a, units);
    size_t at = *n, bs = 0;
    if (at) w[at++] = L' ';
    w[at++] = L'"';
    for (size_t i = 0; a[i]; i++) {
        if (a[i] == L'"')
            for (size_t k = 0; k <= bs; k++)
                w[at++] = L'\\'; /* 2 bs + 1 in all */
        bs = a[i] == L'\\' ? bs + 1 : 0;
        w[at++] = a[i];
    }
    for (size_t k = 0; k < bs; k++)
        w[at++] = L'\\'; /* before the closing quote */
    w[at++] = L'"';
    w[at] = 0;
    *n = at;
    free(a);
    return true;
}

/* Starts argv suspended (argv[0] searched as CreateProcess searches). 0,
 * or CW_ENOENT / CW_EPERM / CW_E2BIG with d filled. */
static int launch(char *const *argv, heap_trace_t *t, PROCESS_INFORMATION *pi, cw_diag_t *d)
{
    enum { CAP = 32768 }; /* CreateProcess's limit, in UTF-16 units */
    wchar_t *cmd = calloc(CAP, sizeof *cmd);
    size_t n = 0;
    if (!cmd) return cw_diag_set(d, CW_ENOMEM, "out of memory");
    for (size_t i = 0; argv[i]; i++)
        if (!put_arg(cmd, &n, CAP, argv[i])) {
            free(cmd);
            return cw_diag_set(d, CW_EINVAL, "heap: the command line of %s is too long", argv[0]);
        }
    STARTUPINFOW si = {.cb = sizeof si};
    BOOL ok = CreateProcessW(NULL, cmd, NULL, NULL, FALSE, CREATE_SUSPENDED, NULL, NULL, &si, pi);
    DWORD err = GetLastError();
    free(cmd);
    if (!ok)
        return cw_diag_set(d, err == ERROR_ACCESS_DENIED ? CW_EPERM : CW_ENOENT,
                           "heap: cannot start %s (CreateProcess, error %lu)%s", argv[0],
                           (unsigned long)err,
                           err == ERROR_FILE_NOT_FOUND || err == ERROR_PATH_NOT_FOUND
                               ? ": no such program (give its path, or put it on PATH)"
                               : "");
    t->proc = pi->hProcess;
    t->thread = pi->hThread;
    return 0;
}

/* The process's image name (its base name, UTF-8) into buf. */
static void proc_name(HANDLE h, uint32_t pid, char *buf, size_t cap)
{
    wchar_t w[MAX_PATH];
    DWORD n = MAX_PATH;
    snprintf(buf, cap, "pid %u", pid);
    if (!QueryFullProcessImageNameW(h, 0, w, &n)) return;
    const wchar_t *base = w;
    for (const wchar_t *p = w; *p; p++)
        if (*p == L'\\' || *p == L'/') base = p + 1;
    if (WideCharToMultiByte(CP_UTF8, 0, base, -1, buf, (int)cap, NULL, NULL) == 0)
        snprintf(buf, cap, "pid %u", pid);
}

int cw_heap_launch(const cw_heap_launch_args_t *a, cw_stacks_t *stacks, cw_heap_model_t *m,
                   cw_heap_launch_result_t *res, cw_diag_t *d)
{
    memset(res, 0, sizeof *res);
    heap_trace_t t = {.a = a, .m = m, .stacks = stacks};
    PROCESS_INFORMATION pi = {0};
    uint32_t pid = a->pid;
    if (!pid) {
        int rc = launch(a->argv, &t, &pi, d);
        if (rc) return rc;
        pid = pi.dwProcessId;
    } else if (!(t.proc =
                     OpenProcess(SYNCHRONIZE | PROCESS_QUERY_LIMITED_INFORMATION, FALSE, pid))) {
        DWORD err = GetLastError();
        return cw_diag_set(d, err == ERROR_ACCESS_DENIED ? CW_EPERM : CW_ENOENT,
                           "heap --pid %u: %s (OpenProcess, error %lu)", pid,
                           err == ERROR_ACCESS_DENIED
                               ? "access denied: run elevated (Run as administrator)"
                               : "no such process",
                           (unsigned long)err);
    }
    char name[256];
    proc_name(t.proc, pid, name, sizeof name);
    res->start_ns = cw_plat_wall_ns();
    int rc = cw_heap_model_start(m, pid, res->start_ns, name, NULL);
    if (rc) {
        rc = cw_diag_set(d, rc, "out of memory");
        goto out;
    }
    if (a->duration_ns) t.deadline = cw_plat_mono_ns() + a->duration_ns;
    t.pid = pid;
    cw_etw_heap_args_t ha = {.pid = pid,
                             .emit = on_event,
                             .emit_heap = on_heap,
                             .done = done,
                             .started = started,
                             .ctx = &t};
    rc = cw_etw__heap_run(stacks, &ha, &res->losses.dropped, d);
    DWORD code;
    if (t.exited && GetExitCodeProcess(t.proc, &code)) {
        res->exited = 1;
        res->exit_status = (int)code;
    }
    res->attached = t.applied ? 1 : 0;
out:
    if (t.thread && !t.resumed) {
        /* The session never ran: the program must not run untraced. */
        TerminateProcess(t.proc, 1);
        if (rc) {
            char why[sizeof d->msg];
            snprintf(why, sizeof why, "%s", d->msg);
            cw_diag_set(d, rc, "%s; %s was ended before it ran", why, a->argv[0]);
        }
    }
    if (t.thread) CloseHandle(t.thread);
    CloseHandle(t.proc);
    cw_heap_account_end(&t.mem);
    return rc;
}
