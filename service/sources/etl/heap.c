/* heap.c - the Heap class's events (Alloc, ReAlloc, Free, with their
 * stacks) read from an .etl file into a heap model (heap.h): what
 * `commitwatch heap --etl FILE` prints, and what the live heap session
 * (sources/etw/heap_launch.c) feeds through the same reader.
 *
 * A heap event is held in the reader's ring like a VirtualAlloc and joined
 * to its StackWalk events the same way (join.c, reader.c): the heap
 * provider's stacks are user-mode walks whose EventTimeStamp is the heap
 * event's. When complete, it becomes a cw_heap_ev_t: Alloc an allocation,
 * Free a free, ReAlloc both (the old block freed, the new one allocated
 * with the ReAlloc's stack; an in-place ReAlloc has the same address for
 * both). The processes come from the reader's process starts, so the report
 * names them as `analyze` does.
 *
 * Thread: the reader's (the caller's). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "commitwatch/log.h"
#include "sources/etl/etl_internal.h"

/* The layer's on_event (etl_internal.h). */
static int on_heap(cw_etl__reader_t *r, const cw_etl_event_t *ev, uint32_t c)
{
    cw_etl_heap_t h;
    if (ev->type != CW_ETL_T_HEAP_ALLOC && ev->type != CW_ETL_T_HEAP_REALLOC &&
        ev->type != CW_ETL_T_HEAP_FREE)
        return 0; /* HeapCreate, HeapDestroy, the rundowns: no block of a stack */
    int rc = cw_etl_decode_heap(ev->data, ev->len, ev->type, ev->version, ev->ptr_size, &h);
    if (rc) return cw_etl__reader_skip(r, c, rc);
    /* The header names the process; a live header without one (-1) still
     * names the thread, whose process the Thread events gave. */
    uint32_t pid = ev->has_ids ? ev->pid : 0;
    if (!pid && ev->tid) {
        const cw_etl__thread_t *th = cw_etl__thread(&r->space, ev->tid);
        if (!th) return CW_ENOMEM;
        pid = th->pid;
    }
    if (r->heap_pid && pid != r->heap_pid) {
        r->heap_other++;
        return 0;
    }
    /* Every kind may have a stack in a file (xperf -stackwalk HeapFree);
     * a live session asks for stacks on Alloc and ReAlloc only. */
    bool want = !r->live || ev->type != CW_ETL_T_HEAP_FREE;
    cw_etl__rec_t *x =
        cw_etl__reader_push(r, ev, (uint8_t)(CW_ETL__REC_HEAP | (want ? CW_ETL__REC_WANT : 0)));
    if (!x) return CW_ENOMEM;
    x->pid = pid;
    x->tid = ev->tid;
    x->addr = h.addr;
    x->size = h.size;
    x->ops = (uint8_t)(h.type == CW_ETL_T_HEAP_ALLOC     ? CW_HEAP_ALLOC
                       : h.type == CW_ETL_T_HEAP_REALLOC ? CW_HEAP_REALLOC
                                                         : CW_HEAP_FREE);
    cw_etl__ring_side(&r->ring, x)->old_addr = h.old_addr;
    r->heap_events++;
    return 0;
}

/* The layer's emit. */
static int emit_heap(cw_etl__reader_t *r, const cw_etl__rec_t *x, uint32_t stack_id)
{
    /* ts, kind, pid, tid, addr, size, old_addr (a ReAlloc's: below), stack */
    cw_heap_ev_t ev = {x->ns, (cw_heap_kind_t)x->ops, x->pid, x->tid, x->addr, x->size, 0, stack_id};
    if (ev.kind == CW_HEAP_REALLOC) ev.old_addr = cw_etl__ring_side(&r->ring, x)->old_addr;
    if (ev.kind == CW_HEAP_FREE) ev.stack_id = 0; /* a free's stack names no block */
    r->emitted++;
    return r->emit_heap(r->ctx, &ev);
}

static const cw_etl__layer_t heap_layer = {on_heap, emit_heap};

void cw_etl__heap_attach(cw_etl__reader_t *r, int (*emit)(void *ctx, const cw_heap_ev_t *ev),
                         uint32_t pid)
{
    r->heap = &heap_layer;
    r->emit_heap = emit;
    r->heap_pid = pid;
}

/* ---- cw_etl_heap_read ------------------------------------------------------------- */

/* The processes announced to the model: at most a few hundred in a trace,
 * looked up once per process event and once per new pid of a heap event. */
typedef struct heap_ctx {
    cw_heap_model_t *m;
    uint32_t pid; /* 0: every process */
    uint32_t *known;
    size_t nknown, cap;
    uint64_t applied;
} heap_ctx_t;

static bool known(const heap_ctx_t *h, uint32_t pid)
{
    for (size_t i = 0; i < h->nknown; i++)
        if (h->known[i] == pid) return true;
    return false;
}

static int announce(heap_ctx_t *h, uint32_t pid, int64_t ts, const char *name, const char *cmdline)
{
    if (!known(h, pid)) {
        if (CW_RESERVE(h->known, h->cap, h->nknown + 1) != 0) return CW_ENOMEM;
        h->known[h->nknown++] = pid;
    }
    return cw_heap_model_start(h->m, pid, ts, name, cmdline);
}

/* The reader's other events: process starts name the processes. */
static int on_event(void *ctx, const cw_event_t *ev)
{
    heap_ctx_t *h = ctx;
    if (ev->op != CW_OP_PROCESS_START || (h->pid && ev->pid != h->pid)) return 0;
    return announce(h, ev->pid, ev->ts, ev->name, ev->cmdline);
}

static int on_heap_ev(void *ctx, const cw_heap_ev_t *ev)
{
    heap_ctx_t *h = ctx;
    if (!known(h, ev->pid)) {
        /* No Process event for it in the trace: named by its id. */
        char name[32];
        snprintf(name, sizeof name, "pid %u", ev->pid);
        int rc = announce(h, ev->pid, ev->ts, name, NULL);
        if (rc) return rc;
    }
    h->applied++;
    return cw_heap_model_apply(h->m, ev);
}

int cw_etl_heap_read(const cw_etl_heap_opts_t *o, cw_stacks_t *stacks, cw_heap_model_t *m,
                     cw_etl_heap_result_t *res, cw_diag_t *d)
{
    memset(res, 0, sizeof *res);
    cw_etl__reader_t *r = calloc(1, sizeof *r);
    cw_etl__images_t *images = NULL;
    heap_ctx_t h = {.m = m, .pid = o->pid};
    if (!r) return cw_diag_set(d, CW_ENOMEM, "out of memory");
    int rc = cw_etl__reader_open(r, o->path, stacks, NULL, d);
    if (rc == 0 && o->images && (rc = cw_etl__images_open(o->images, &images, d)) == 0)
        r->space.sym = (cw_etl__symbolizer_t){cw_etl__images_name, images};
    if (rc) goto out;
    r->emit = on_event;
    r->ctx = &h;
    cw_etl__heap_attach(r, on_heap_ev, o->pid);
    rc = cw_etl__reader_run(r, d);
    const cw_etl_header_t *hd = cw_etl_file_header(r->file);
    const cw_etl_file_stats_t *st = cw_etl_file_stats(r->file);
    res->start_ns = r->start_ns;
    res->events = st->events;
    res->heap_events = r->heap_events;
    res->heap_applied = h.applied;
    res->heap_other = r->heap_other;
    res->stacks = r->ss;
    res->buffers_corrupt = st->buffers_corrupt;
    res->truncated = st->truncated;
    for (size_t i = 0; i < r->ncounters; i++)
        if (r->counters[i].group == CW_ETL_G_HEAP) res->heap_skipped += r->counters[i].skipped;
    cw_etl__reader_skips(r, res->skips, sizeof res->skips);
    /* What the recording lost, as the source counts it (source.c). */
    res->losses.dropped = (uint64_t)hd->events_lost + hd->buffers_lost;
out:
    cw_etl__reader_close(r);
    cw_etl__images_close(images);
    free(r);
    free(h.known);
    return rc;
}
