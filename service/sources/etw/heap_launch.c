/* heap_launch.c - the heap drill-down on Windows (heap_launch.h): attach
 * mode (`heap --pid PID`) is an ETW heap session for that process (session.c:
 * heap tracing turned on for its ID, stacks on its allocations), read like
 * the live source (live.c, cw_etw__heap_run) into the heap model by the
 * .etl reader's heap layer: the decoder `heap --etl` uses. Launch mode
 * (`heap -- PROGRAM`) is not here: CW_ENOSYS, saying to start the program
 * and trace it by its ID.
 *
 * DESIGN (threads): the caller's thread runs the session's reading loop
 * and applies the events to the model; the consumer thread (live.c) only
 * queues them. cw_heap_launch_stop() and args->stop may be set from any
 * thread or a signal handler: done() reads them every 100 ms. Windows only. */
#include <windows.h>

#include <stdatomic.h>
#include <stdio.h>
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
    HANDLE proc;      /* SYNCHRONIZE | PROCESS_QUERY_LIMITED_INFORMATION */
    int64_t deadline; /* monotonic ns, or 0 */
    uint64_t applied;
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
    if (ev->pid != t->a->pid) return 0;
    t->applied++;
    if (t->a->progress) atomic_store(t->a->progress, t->applied);
    return cw_heap_model_apply(t->m, ev);
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
    if (!a->pid)
        return cw_diag_set(d, CW_ENOSYS,
                           "heap launch mode (heap -- PROGRAM) runs on Linux only; on Windows, "
                           "start the program and trace it with heap --pid PID (ETW's heap "
                           "provider), or record it with xperf and read it with heap --etl FILE");
    heap_trace_t t = {.a = a, .m = m};
    t.proc = OpenProcess(SYNCHRONIZE | PROCESS_QUERY_LIMITED_INFORMATION, FALSE, a->pid);
    if (!t.proc) {
        DWORD err = GetLastError();
        return cw_diag_set(d, err == ERROR_ACCESS_DENIED ? CW_EPERM : CW_ENOENT,
                           "heap --pid %u: %s (OpenProcess, error %lu)", a->pid,
                           err == ERROR_ACCESS_DENIED
                               ? "access denied: run elevated (Run as administrator)"
                               : "no such process",
                           (unsigned long)err);
    }
    char name[256];
    proc_name(t.proc, a->pid, name, sizeof name);
    res->start_ns = cw_plat_wall_ns();
    int rc = cw_heap_model_start(m, a->pid, res->start_ns, name, NULL);
    if (rc) {
        CloseHandle(t.proc);
        return cw_diag_set(d, rc, "out of memory");
    }
    if (a->duration_ns) t.deadline = cw_plat_mono_ns() + a->duration_ns;
    cw_etw_heap_args_t ha = {
        .pid = a->pid, .emit = on_event, .emit_heap = on_heap, .done = done, .ctx = &t};
    rc = cw_etw__heap_run(stacks, &ha, &res->losses.dropped, d);
    DWORD code;
    if (t.exited && GetExitCodeProcess(t.proc, &code)) {
        res->exited = 1;
        res->exit_status = (int)code;
    }
    CloseHandle(t.proc);
    res->attached = t.applied ? 1 : 0;
    return rc;
}
