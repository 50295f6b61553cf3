/* live.c - the "etw" source (Windows' live default): the kernel's
 * VirtualAlloc/VirtualFree, Process, Thread, Image and StackWalk events of
 * every process, read in real time from a private session (session.c) and
 * interpreted by the same reader as an .etl file (sources/etl/reader.c).
 *
 * Threads:
 * - the consumer thread runs ProcessTrace; its callback copies each
 *   EVENT_RECORD (header fields and payload) into `in` under `lock`;
 * - the core thread (run) swaps `in` for an empty queue every 100 ms,
 *   sorts what came into the held-back events by time, and hands the
 *   reader those older than the watermark: the newest time every CPU's
 *   buffers are known to have reached. Real-time buffers are flushed each
 *   FlushTimer (1 s), so an event may arrive up to about a second after a
 *   later one from another CPU: the watermark is the performance counter
 *   now minus WINDOW_S. It is also the tick the pipeline gets;
 * - stop() (any thread, a signal or service-control context) only sets
 *   the flag; run() stops the session, which ends ProcessTrace.
 *
 * Before the first event, the rundown walk (rundown.c) emits every
 * process's committed memory at the session's start: a commit traced
 * after the start of the session but before the walk reached its process
 * is in both, and the tracker counts a commit of committed pages once.
 *
 * Frames are named by DbgHelp (symbols.c): each image a load or rundown
 * event announces is registered before the reader sees the event; names
 * are looked up when the reader's frame cache misses. */
#include <windows.h>

#include <evntcons.h>
#include <evntrace.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "commitwatch/log.h"
#include "commitwatch/platform.h"
#include "sources/etl/etl_internal.h"
#include "sources/etw/etw_internal.h"

#define WINDOW_S 3
#define POLL_NS 100000000LL

typedef cw_etw_qev_t qev_t;
typedef cw_etw_queue_t queue_t;

typedef struct live {
    cw_stacks_t *stacks;
    atomic_bool stop;
    cw_etw_session_t session;
    TRACEHANDLE trace;
    cw_thread_t *consumer;
    atomic_bool consumer_done;
    ULONG process_rc; /* ProcessTrace's return (written by the consumer thread) */

    cw_mutex_t *lock; /* guards in, seq, dropped */
    queue_t in;
    uint64_t seq, dropped;

    queue_t held; /* core thread only: sorted by (ts, seq) */
    cw_etl__reader_t reader;
    bool reader_open;
    char *symbol_path;   /* owned; NULL: _NT_SYMBOL_PATH or exports only */
    cw_etw_syms_t *syms; /* NULL when DbgHelp could not start */
    int64_t freq;
    uint64_t events;
    char sname[CW_ETW_SESSION_NAME_MAX + 1]; /* the session's name, for messages */
    const cw_etw_heap_args_t *heap;          /* a heap session (cw_etw__heap_run), or NULL */
} live_t;

static void queue_free_events(queue_t *q)
{
    for (size_t i = 0; i < q->n; i++) free((void *)q->v[i].ev.data);
    q->n = 0;
}

/* ---- the consumer thread -------------------------------------------------------- */

void cw_etw__record_event(const EVENT_RECORD *er, cw_etl_event_t *ev)
{
    const EVENT_HEADER *h = &er->EventHeader;
    memset(ev, 0, sizeof *ev);
    memcpy(ev->guid, &h->ProviderId, 16);
    int g = cw_etl__kernel_group(ev->guid);
    ev->kernel = g >= 0;
    ev->group = ev->kernel ? (uint8_t)g : 0;
    ev->type = h->EventDescriptor.Opcode;
    ev->version = h->EventDescriptor.Version;
    ev->event_id = h->EventDescriptor.Id;
    ev->ptr_size = (h->Flags & EVENT_HEADER_FLAG_32_BIT_HEADER) ? 4 : 8;
    ev->cpu = GetEventProcessorIndex((EVENT_RECORD *)er);
    /* Kernel events without a process (VirtualAlloc's owner is in the
     * payload) carry -1. */
    ev->has_ids = h->ProcessId != UINT32_MAX;
    ev->pid = h->ProcessId;
    ev->tid = h->ThreadId;
    ev->ts = (uint64_t)h->TimeStamp.QuadPart; /* raw: the performance counter */
    ev->data = er->UserData;
    ev->len = er->UserDataLength;
}

static void WINAPI on_record(EVENT_RECORD *er)
{
    live_t *l = er->UserContext;
    uint8_t *copy = NULL;
    if (er->UserDataLength && !(copy = malloc(er->UserDataLength))) {
        cw_mutex_lock(l->lock);
        l->dropped++;
        cw_mutex_unlock(l->lock);
        return;
    }
    cw_etl_event_t ev;
    cw_etw__record_event(er, &ev);
    if (er->UserDataLength) memcpy(copy, er->UserData, er->UserDataLength);
    ev.data = copy;
    cw_mutex_lock(l->lock);
    if (CW_RESERVE(l->in.v, l->in.cap, l->in.n + 1) != 0) {
        l->dropped++;
        free(copy);
    } else {
        l->in.v[l->in.n++] = (qev_t){ev, l->seq++};
    }
    cw_mutex_unlock(l->lock);
}

static void consume(void *arg)
{
    live_t *l = arg;
    TRACEHANDLE t = l->trace;
    l->process_rc = ProcessTrace(&t, 1, NULL, NULL);
    atomic_store(&l->consumer_done, true);
}

/* ---- the source ------------------------------------------------------------------ */

static int live_open(void **impl, const cw_source_opts_t *o, cw_diag_t *d)
{
    if (o->arg && o->arg[0])
        return cw_diag_set(d, CW_EUSAGE, "--source etw takes no argument (the session is "
                                         "named \"" CW_ETW_SESSION_NAME "\")");
    live_t *l = calloc(1, sizeof *l);
    if (!l || cw_mutex_create(&l->lock) != 0) {
        free(l);
        return cw_diag_set(d, CW_ENOMEM, "out of memory");
    }
    l->stacks = o->stacks;
    if (o->symbol_path && !(l->symbol_path = _strdup(o->symbol_path))) {
        cw_mutex_destroy(l->lock);
        free(l);
        return cw_diag_set(d, CW_ENOMEM, "out of memory");
    }
    l->trace = INVALID_PROCESSTRACE_HANDLE;
    atomic_init(&l->stop, false);
    atomic_init(&l->consumer_done, false);
    snprintf(l->sname, sizeof l->sname, "%s", CW_ETW_SESSION_NAME);
    *impl = l;
    return 0;
}

static void live_close(void *impl);

static int by_time(const void *a, const void *b)
{
    const qev_t *x = a, *y = b;
    if (x->ev.ts != y->ev.ts) return x->ev.ts < y->ev.ts ? -1 : 1;
    return x->seq < y->seq ? -1 : x->seq > y->seq;
}

int cw_etw__queue_merge(cw_etw_queue_t *held, cw_etw_queue_t *got)
{
    if (!got->n) return 0;
    if (CW_RESERVE(held->v, held->cap, held->n + got->n) != 0) return CW_ENOMEM;
    qsort(got->v, got->n, sizeof *got->v, by_time);
    /* From the back: held's free tail takes the larger of the two ends. */
    size_t i = held->n, j = got->n, k = held->n + got->n;
    while (j > 0) {
        if (i > 0 && by_time(&held->v[i - 1], &got->v[j - 1]) > 0)
            held->v[--k] = held->v[--i];
        else
            held->v[--k] = got->v[--j];
    }
    held->n += got->n;
    got->n = 0;
    return 0;
}

/* An image load or rundown: registered with DbgHelp before the reader
 * sees it (a failure leaves its frames unnamed, nothing else). */
static int note_image(live_t *l, const cw_etl_event_t *ev)
{
    bool load = (ev->group == CW_ETL_G_PROCESS && ev->type == CW_ETL_T_IMAGE_LOAD) ||
                (ev->group == CW_ETL_G_IMAGE &&
                 (ev->type == CW_ETL_T_IMAGE_LOAD || ev->type == CW_ETL_T_DCSTART));
    cw_etl_image_t im;
    if (!l->syms || !ev->kernel || !load ||
        cw_etl_decode_image(ev->data, ev->len, ev->version, ev->ptr_size, &im) != 0)
        return 0;
    char *name = cw_etl__image_name(im.name, im.name_units);
    wchar_t *path = malloc((im.name_units + 1) * sizeof *path);
    int rc = name && path ? 0 : CW_ENOMEM;
    if (rc == 0) {
        memcpy(path, im.name, im.name_units * 2); /* UTF-16LE is wchar_t here */
        path[im.name_units] = 0;
        rc = cw_etw__syms_add(l->syms, name, path, im.size);
    }
    free(name);
    free(path);
    return rc == CW_ENOMEM ? rc : 0;
}

/* Merges what the consumer queued into held (sorted), then feeds the reader
 * every held event at or before upto (all of them when all). */
static int pump(live_t *l, uint64_t upto, bool all)
{
    queue_t got;
    cw_mutex_lock(l->lock);
    got = l->in;
    l->in = (queue_t){0};
    cw_mutex_unlock(l->lock);
    l->events += got.n;
    int mrc = cw_etw__queue_merge(&l->held, &got);
    if (mrc) queue_free_events(&got);
    free(got.v);
    if (mrc) return mrc;
    size_t i = 0;
    int rc = 0;
    for (; i < l->held.n && (all || l->held.v[i].ev.ts <= upto); i++) {
        rc = note_image(l, &l->held.v[i].ev);
        if (rc == 0) rc = cw_etl__reader_feed(&l->reader, &l->held.v[i].ev);
        free((void *)l->held.v[i].ev.data);
        if (rc) {
            i++;
            break;
        }
    }
    for (size_t j = i; j < l->held.n && rc; j++) free((void *)l->held.v[j].ev.data);
    if (rc) {
        l->held.n = 0;
        return rc;
    }
    memmove(l->held.v, l->held.v + i, (l->held.n - i) * sizeof *l->held.v);
    l->held.n -= i;
    return cw_etl__reader_release(&l->reader, all ? 0 : upto, all);
}

static uint64_t qpc_now(void)
{
    LARGE_INTEGER q;
    QueryPerformanceCounter(&q);
    return (uint64_t)q.QuadPart;
}

static int open_consumer(live_t *l, cw_diag_t *d)
{
    EVENT_TRACE_LOGFILEW lf;
    memset(&lf, 0, sizeof lf);
    lf.LoggerName = l->session.name;
    lf.ProcessTraceMode = PROCESS_TRACE_MODE_REAL_TIME | PROCESS_TRACE_MODE_EVENT_RECORD |
                          PROCESS_TRACE_MODE_RAW_TIMESTAMP;
    lf.EventRecordCallback = on_record;
    lf.Context = l;
    l->trace = OpenTraceW(&lf);
    if (l->trace == INVALID_PROCESSTRACE_HANDLE) {
        DWORD err = GetLastError();
        return cw_diag_set(
            d, err == ERROR_ACCESS_DENIED ? CW_EPERM : CW_EIO,
            "ETW: opening the session \"%s\" for real-time reading "
            "(OpenTrace) failed (error %lu)%s",
            l->sname, (unsigned long)err,
            err == ERROR_ACCESS_DENIED
                ? ": access denied. Reading the kernel's events needs an elevated administrator "
                  "or LocalSystem (the service); Wine does not implement real-time ETW at all: "
                  "there, use --source etl:FILE (a trace recorded on Windows) or --source rundown"
                  " (heap traces: heap --etl FILE)"
                : "");
    }
    return 0;
}

/* Starts the session and the reader (the etw source's, or a heap
 * session's: l->heap), then the consumer thread. 0 or CW_E* with d. */
static int start(live_t *l, const cw_source_sink_t *sink, cw_etl__clock_t *clock, cw_diag_t *d)
{
    LARGE_INTEGER f;
    QueryPerformanceFrequency(&f);
    l->freq = f.QuadPart;
    int rc = l->heap ? cw_etw__heap_session_start(&l->session, l->sname, l->heap->pid, d)
                     : cw_etw__session_start(&l->session, l->sname, d);
    if (rc) return rc;
    if (l->session.replaced)
        CW_LOGW("ETW: stopped the session \"%s\" an earlier run left behind", l->sname);
    if (!l->session.stacks)
        CW_LOGW("ETW: %s stacks are off (TraceSetInformation failed, error %lu): they are "
                "counted under the tag of an empty stack",
                l->heap ? "heap allocation" : "VirtualAlloc", l->session.stacks_error);
    /* The clock: this performance-counter tick is now. */
    *clock = (cw_etl__clock_t){
        .system_time = false, .freq = l->freq, .base_ts = qpc_now(), .base_ns = cw_plat_wall_ns()};
    if ((rc = cw_etl__reader_open_live(&l->reader, l->stacks, clock, d)) != 0) return rc;
    l->reader_open = true;
    cw_diag_t sd = {{0}};
    if (cw_etw__syms_open(l->symbol_path, &l->syms, &sd) == 0)
        l->reader.space.sym = (cw_etl__symbolizer_t){cw_etw__syms_name, l->syms};
    else
        CW_LOGW("%s", sd.msg);
    if (l->heap) {
        l->reader.emit = l->heap->emit;
        l->reader.ctx = l->heap->ctx;
        cw_etl__heap_attach(&l->reader, l->heap->emit_heap, l->heap->pid);
    } else {
        l->reader.emit = sink->emit;
        l->reader.ctx = sink->ctx;
    }
    if ((rc = open_consumer(l, d)) != 0) return rc;
    if ((rc = cw_thread_start(&l->consumer, consume, l)) != 0)
        return cw_diag_set(d, rc, "out of memory");
    return 0;
}

/* The events lost so far: the session's and the consumer's own. */
static uint64_t lost_now(live_t *l)
{
    uint64_t lost_ev = 0, lost_buf = 0, dropped;
    cw_etw__session_query(&l->session, &lost_ev, &lost_buf);
    cw_mutex_lock(l->lock);
    dropped = l->dropped;
    cw_mutex_unlock(l->lock);
    /* A lost buffer holds many events: counted as one each, the lower bound. */
    return lost_ev + lost_buf + dropped;
}

/* Every 100 ms: what came, up to the watermark, to the reader, until a
 * stop (or, for a heap session, done()). sink NULL: a heap session. */
static int read_loop(live_t *l, const cw_source_sink_t *sink, const cw_etl__clock_t *clock,
                     cw_diag_t *d)
{
    int64_t next_query = cw_plat_mono_ns();
    while (!atomic_load(&l->stop) && !(l->heap && l->heap->done(l->heap->ctx))) {
        cw_plat_sleep_ns(POLL_NS);
        if (atomic_load(&l->consumer_done) && !atomic_load(&l->stop))
            return cw_diag_set(d, CW_EIO,
                               "ETW: the session ended while being read (ProcessTrace returned "
                               "%lu): another program may have stopped it (`logman stop %s -ets`)",
                               l->process_rc, l->sname);
        uint64_t now = qpc_now(), window = (uint64_t)WINDOW_S * (uint64_t)l->freq;
        uint64_t upto = now > window ? now - window : 0;
        int rc = pump(l, upto, false);
        if (rc == 0 && sink && sink->tick)
            rc = sink->tick(sink->ctx, cw_etl__clock_ns(clock, upto));
        if (rc) return rc;
        if (sink && sink->counters && cw_plat_mono_ns() >= next_query) {
            sink->counters(sink->ctx, l->events, lost_now(l), 0);
            next_query = cw_plat_mono_ns() + CW_NS_PER_S;
        }
    }
    return 0;
}

/* Stops the session (ProcessTrace returns once the last buffers are
 * delivered), then hands on what came (when rc is 0). */
static int finish(live_t *l, int rc)
{
    cw_etw__session_stop(&l->session);
    if (l->consumer) {
        cw_thread_join(l->consumer);
        l->consumer = NULL;
    }
    if (l->trace != INVALID_PROCESSTRACE_HANDLE) {
        CloseTrace(l->trace);
        l->trace = INVALID_PROCESSTRACE_HANDLE;
    }
    if (l->reader_open && rc == 0) rc = pump(l, 0, true);
    if (l->syms)
        CW_LOGI("DbgHelp: %llu frame addresses named",
                (unsigned long long)cw_etw__syms_named(l->syms));
    return rc;
}

static int live_run(void *impl, const cw_source_sink_t *sink, cw_diag_t *d)
{
    live_t *l = impl;
    cw_etl__clock_t clock;
    int rc = start(l, sink, &clock, d);
    if (rc) goto out;
    CW_LOGI("ETW: reading the kernel session \"" CW_ETW_SESSION_NAME "\" (VirtualAlloc, "
            "VirtualFree%s, processes, threads, images)",
            l->session.stacks ? " with stacks" : "");

    /* Every process's committed memory at the session's start. */
    cw_etw_rundown_stats_t st;
    if ((rc = cw_etw__rundown(l->stacks, sink, clock.base_ns, &l->stop, &st, d)) != 0) goto out;
    CW_LOGI("ETW rundown: %u processes, %u walked (%llu bytes committed), %u could not be "
            "opened%s%s",
            st.processes, st.opened, (unsigned long long)st.bytes, st.unopened,
            st.unopened ? ": " : "", st.unopened_names);
    l->reader.last_ns = clock.base_ns;
    rc = read_loop(l, sink, &clock, d);
out:
    return finish(l, rc);
}

static void live_stop(void *impl)
{
    atomic_store(&((live_t *)impl)->stop, true);
}

static void live_close(void *impl)
{
    live_t *l = impl;
    if (!l) return;
    cw_etw__session_stop(&l->session);
    queue_free_events(&l->in);
    free(l->in.v);
    queue_free_events(&l->held);
    free(l->held.v);
    if (l->reader_open) cw_etl__reader_close(&l->reader);
    cw_etw__syms_close(l->syms);
    free(l->symbol_path);
    cw_mutex_destroy(l->lock);
    free(l);
}

/* Every source fills in this table (source.h): the tables are alike by design. */
const cw_source_ops_t cw_source_etw = {
    .name = "etw",
    .fixed_platform = "windows",
    .open = live_open,
    .run = live_run,
    .stop = live_stop,
    .close = live_close,
};

/* ---- a heap session (heap_launch.c) ---------------------------------------------- */

int cw_etw__heap_run(cw_stacks_t *stacks, const cw_etw_heap_args_t *a, uint64_t *lost,
                     cw_diag_t *d)
{
    cw_source_opts_t o = {.stacks = stacks, .symbol_path = a->symbol_path};
    void *impl;
    *lost = 0;
    int rc = live_open(&impl, &o, d);
    if (rc) return rc;
    live_t *l = impl;
    l->heap = a;
    /* One session per traced process: traces of several run side by side. */
    snprintf(l->sname, sizeof l->sname, "%s-heap-%u", CW_ETW_SESSION_NAME, a->pid);
    cw_etl__clock_t clock;
    if ((rc = start(l, NULL, &clock, d)) != 0 && d) {
        /* Which call failed, after what it means for the trace. */
        char why[sizeof d->msg];
        snprintf(why, sizeof why, "%s", d->msg);
        cw_diag_set(d, rc, "ETW heap tracing of process %u is unavailable: %s", a->pid, why);
    } else if (rc == 0) {
        CW_LOGI("ETW: reading the heap session \"%s\" of process %u (heap allocations%s)",
                l->sname, a->pid, l->session.stacks ? " with stacks" : "");
        if (a->started) a->started(a->ctx);
        rc = read_loop(l, NULL, &clock, d);
    }
    if (l->session.props) *lost = lost_now(l);
    rc = finish(l, rc);
    live_close(l);
    return rc;
}
