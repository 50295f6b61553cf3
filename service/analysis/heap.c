/* heap.c - the heap layer's model and report (see heap.h).
 *
 * Events go to a tracker whose sink is a small wrapper around the window
 * analyzer: the wrapper forwards every callback (to the heap layer's
 * aggregator too, when there is one). The analyzer's held figures give,
 * per (instance, stack), the bytes and blocks outstanding now and the
 * bytes' peak (cw_analysis_held). The window is [from, CW_TS_NEVER): every block
 * is allocated in it, a block freed by the end is AIFI, one still live
 * AIFO, so outstanding = AIFO, freed = AIFI (+ AOFI, 0 here), allocated =
 * size and count. A free names its address only: the block's size is the
 * tracker's (cw_tracker_release_block finds and releases it in one
 * lookup), so no second table of live blocks.
 *
 * Memory: the tracker's pools (one piece and one record per live block,
 * at most max_live blocks: CW_HEAP_DEFAULT_MAX_BLOCKS unless
 * cw_heap_model_limit says otherwise) and the analyzer's figures per
 * (instance, stack).
 * Thread: the caller's only. */
#include "commitwatch/heap.h"

#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "commitwatch/agg.h"
#include "commitwatch/analysis.h"
#include "commitwatch/common.h"
#include "commitwatch/error.h"
#include "commitwatch/memstat.h"
#include "commitwatch/report.h"
#include "commitwatch/tagger.h"
#include "commitwatch/tracker.h"

/* A snapshot as taken: (pid, stack) -> outstanding now, named at the report. */
typedef struct snap_ent {
    uint32_t pid, stack_id;
    uint64_t bytes, count;
} snap_ent_t;
typedef struct snap {
    int64_t ts;
    snap_ent_t *v;
    uint32_t n;
} snap_t;

struct cw_heap_model {
    cw_tracker_t *tracker;
    cw_analysis_t *analysis;
    cw_tracker_sink_t inner; /* the analyzer's sink, which ours forwards to */
    cw_agg_t *also;          /* the heap layer's aggregator (cw_heap_model_also), or NULL */
    cw_tracker_sink_t also_sink;
    int64_t from_ns, last_ts;
    uint64_t events, unknown_frees, zero_allocs, reused;
    snap_t snaps[CW_HEAP_MAX_SNAPSHOTS];
    uint32_t nsnaps;
    uint64_t snaps_skipped;
    uint64_t live, max_live; /* blocks held (pieces: one a block) and the bound */
    uint64_t capped;         /* allocations not held: max_live reached */
    bool oom;
};

/* ---- the sink: the analyzer's, and the heap layer's ---- */

static void s_start(void *ctx, const cw_proc_t *p, int64_t ts)
{
    cw_heap_model_t *m = ctx;
    m->inner.on_start(m->inner.ctx, p, ts);
    if (m->also) m->also_sink.on_start(m->also_sink.ctx, p, ts);
}
static void s_event(void *ctx, const cw_proc_t *p, int64_t ts)
{
    cw_heap_model_t *m = ctx;
    m->inner.on_event(m->inner.ctx, p, ts);
    if (m->also) m->also_sink.on_event(m->also_sink.ctx, p, ts);
}
static void s_commit(void *ctx, const cw_proc_t *p, const cw_commit_t *c, int64_t ts)
{
    cw_heap_model_t *m = ctx;
    m->inner.on_commit(m->inner.ctx, p, c, ts);
    if (m->also) m->also_sink.on_commit(m->also_sink.ctx, p, c, ts);
}
static void s_release(void *ctx, const cw_proc_t *p, const cw_commit_t *c, uint64_t bytes,
                      int64_t ts)
{
    cw_heap_model_t *m = ctx;
    m->inner.on_release(m->inner.ctx, p, c, bytes, ts);
    if (m->also) m->also_sink.on_release(m->also_sink.ctx, p, c, bytes, ts);
}
static void s_exit(void *ctx, const cw_proc_t *p, int64_t ts)
{
    cw_heap_model_t *m = ctx;
    m->inner.on_exit(m->inner.ctx, p, ts);
    if (m->also) m->also_sink.on_exit(m->also_sink.ctx, p, ts);
}
static void s_live(void *ctx, const cw_proc_t *p, const cw_commit_t *c)
{
    cw_heap_model_t *m = ctx;
    m->inner.on_live(m->inner.ctx, p, c);
    if (m->also && m->also_sink.on_live) m->also_sink.on_live(m->also_sink.ctx, p, c);
}

int cw_heap_model_create(int64_t from_ns, cw_heap_model_t **out)
{
    cw_heap_model_t *m = calloc(1, sizeof *m);
    if (!m) return CW_ENOMEM;
    m->from_ns = m->last_ts = from_ns;
    m->max_live = CW_HEAP_DEFAULT_MAX_BLOCKS;
    int rc = cw_analysis_create(from_ns, CW_TS_NEVER, &m->analysis);
    if (rc) goto fail;
    m->inner = cw_analysis_sink(m->analysis);
    cw_tracker_sink_t sink = {m, s_start, s_event, s_commit, s_release, s_exit, s_live};
    rc = cw_tracker_create(&sink, 1, &m->tracker);
    if (rc) goto fail;
    *out = m;
    return 0;
fail:
    cw_heap_model_destroy(m);
    return rc;
}

void cw_heap_model_destroy(cw_heap_model_t *m)
{
    if (!m) return;
    cw_tracker_destroy(m->tracker);
    cw_analysis_destroy(m->analysis);
    for (uint32_t i = 0; i < m->nsnaps; i++)
        free(m->snaps[i].v);
    free(m);
}

/* The tracker wants time order; the channel's order is the truth (a free
 * is written before the block can be handed out again), and a clock read
 * just before another thread's may land after it: clamp. */
static int64_t ordered(cw_heap_model_t *m, int64_t ts)
{
    if (ts < m->last_ts) ts = m->last_ts;
    m->last_ts = ts;
    return ts;
}

/* Releases the live block at addr; false when there is none. */
static int release_block(cw_heap_model_t *m, int64_t ts, uint32_t pid, uint32_t tid, uint64_t addr,
                         bool *found)
{
    uint64_t size;
    cw_event_t e = {.ts = ts, .op = CW_OP_RELEASE, .pid = pid, .tid = tid, .addr = addr};
    int rc = cw_tracker_release_block(m->tracker, &e, &size);
    *found = rc != CW_ENOENT;
    if (!*found) return 0;
    m->live--;
    return rc ? rc : m->oom ? CW_ENOMEM : 0;
}

static int alloc_block(cw_heap_model_t *m, int64_t ts, const cw_heap_ev_t *ev)
{
    if (ev->size == 0) { /* a unique address but no bytes: nothing to track */
        m->zero_allocs++;
        return 0;
    }
    bool live;
    /* The bound on the model's memory: past it an allocation is counted,
     * not held (its free will be a free of an unknown block); a live
     * block at its address goes all the same. */
    if (m->max_live && m->live >= m->max_live) {
        int rc = release_block(m, ts, ev->pid, ev->tid, ev->addr, &live);
        if (rc) return rc;
        if (live) m->reused++;
        if (m->live >= m->max_live) {
            m->capped++;
            return 0;
        }
    }
    /* Committed from the lookup that finds whether a block is live at the
     * address (its free was lost): then it is released first. */
    cw_event_t e = {.ts = ts,
                    .op = CW_OP_COMMIT,
                    .pid = ev->pid,
                    .tid = ev->tid,
                    .addr = ev->addr,
                    .size = ev->size,
                    .stack_id = ev->stack_id};
    bool occupied;
    int rc = cw_tracker_commit_block(m->tracker, &e, &occupied);
    if (!rc && occupied) {
        rc = release_block(m, ts, ev->pid, ev->tid, ev->addr, &live);
        if (rc) return rc;
        m->reused++;
        rc = cw_tracker_commit_block(m->tracker, &e, &occupied);
    }
    if (rc) return rc;
    if (m->oom) return CW_ENOMEM;
    m->live++;
    return 0;
}

void cw_heap_model_limit(cw_heap_model_t *m, uint64_t max_blocks)
{
    m->max_live = max_blocks;
}

size_t cw_heap_model_memory(const cw_heap_model_t *m)
{
    size_t b = sizeof *m + cw_tracker_memory(m->tracker) + cw_analysis_memory(m->analysis);
    for (uint32_t i = 0; i < m->nsnaps; i++)
        b += (size_t)m->snaps[i].n * sizeof *m->snaps[i].v;
    return b;
}

void cw_heap_account(cw_heap_account_t *a, const cw_heap_model_t *m, const cw_stacks_t *stacks,
                     int64_t now_ns)
{
    if (now_ns < a->next_ns) return;
    a->next_ns = now_ns + 100 * 1000000;
    int64_t v = (int64_t)(cw_heap_model_memory(m) + cw_stacks_memory(stacks));
    cw_mem_add(CW_MEM_HEAP_TRACES, v - a->counted);
    a->counted = v;
}

void cw_heap_account_end(cw_heap_account_t *a)
{
    cw_mem_add(CW_MEM_HEAP_TRACES, -a->counted);
    a->counted = 0;
}

void cw_heap_model_also(cw_heap_model_t *m, cw_agg_t *agg)
{
    m->also = agg;
    if (agg) m->also_sink = cw_agg_sink(agg);
}

/* The heap layer's bucket closes when an event is past it. */
static int advance(cw_heap_model_t *m, int64_t ts)
{
    return m->also ? cw_agg_advance(m->also, ts) : 0;
}

int cw_heap_model_end(cw_heap_model_t *m)
{
    if (!m->also || m->last_ts == INT64_MIN) return 0;
    int64_t at = cw_agg_next_bucket(m->also, m->last_ts);
    int rc = cw_agg_advance(m->also, at);
    if (rc) return rc;
    cw_tracker_end_all(m->tracker, at);
    m->last_ts = at;
    m->live = 0;
    return cw_agg_flush(m->also);
}

int cw_heap_model_start(cw_heap_model_t *m, uint32_t pid, int64_t ts, const char *name,
                        const char *cmdline)
{
    /* A pid seen again (an exec): its old image's blocks go with it. */
    m->live -= cw_tracker_piece_count(m->tracker, pid);
    ts = ordered(m, ts);
    int rc = advance(m, ts);
    if (rc) return rc;
    cw_event_t e = {.ts = ts,
                    .op = CW_OP_PROCESS_START,
                    .pid = pid,
                    .name = name,
                    .cmdline = cmdline};
    return cw_tracker_apply(m->tracker, &e);
}

int cw_heap_model_apply(cw_heap_model_t *m, const cw_heap_ev_t *ev)
{
    int64_t ts = ordered(m, ev->ts);
    bool found;
    int rc = advance(m, ts);
    if (rc) return rc;
    m->events++;
    switch (ev->kind) {
    case CW_HEAP_ALLOC:
        return alloc_block(m, ts, ev);
    case CW_HEAP_FREE:
        rc = release_block(m, ts, ev->pid, ev->tid, ev->addr, &found);
        if (!rc && !found) m->unknown_frees++;
        return rc;
    case CW_HEAP_REALLOC:
        if (ev->old_addr) {
            rc = release_block(m, ts, ev->pid, ev->tid, ev->old_addr, &found);
            if (!rc && !found) m->unknown_frees++;
        }
        return rc ? rc : ev->addr ? alloc_block(m, ts, ev) : 0;
    }
    return CW_EINVAL;
}

/* cw_analysis_each_held callbacks: count the pairs, then copy them. */
static int held_count(void *ctx, uint32_t pid, uint32_t stack, const cw_analysis_held_t *h)
{
    (void)pid, (void)stack, (void)h;
    ++*(uint32_t *)ctx;
    return 0;
}
static int held_copy(void *ctx, uint32_t pid, uint32_t stack, const cw_analysis_held_t *h)
{
    snap_t *sn = ctx;
    sn->v[sn->n++] = (snap_ent_t){pid, stack, h->bytes, h->count};
    return 0;
}

int cw_heap_model_snapshot(cw_heap_model_t *m, int64_t ts)
{
    if (m->nsnaps == CW_HEAP_MAX_SNAPSHOTS) {
        m->snaps_skipped++;
        return 0;
    }
    snap_t *sn = &m->snaps[m->nsnaps];
    uint32_t n = 0;
    (void)cw_analysis_each_held(m->analysis, held_count, &n);
    sn->ts = ordered(m, ts);
    sn->n = 0;
    sn->v = n ? malloc(n * sizeof *sn->v) : NULL;
    if (n && !sn->v) return CW_ENOMEM;
    (void)cw_analysis_each_held(m->analysis, held_copy, sn);
    m->nsnaps++;
    return 0;
}

/* ---- the report ---- */

static void figs_add(cw_heap_figs_t *acc, const cw_heap_figs_t *f)
{
    acc->outstanding_bytes += f->outstanding_bytes;
    acc->outstanding_count += f->outstanding_count;
    acc->alloc_bytes += f->alloc_bytes;
    acc->alloc_count += f->alloc_count;
    acc->freed_bytes += f->freed_bytes;
    acc->freed_count += f->freed_count;
}

/* The commit figures of a stack as heap figures. */
static cw_heap_figs_t from_commit(const cw_figs_t *f)
{
    cw_heap_figs_t h = {0};
    h.outstanding_bytes = f->types[CW_AIFO].bytes + f->types[CW_AOFO].bytes;
    h.outstanding_count = f->types[CW_AIFO].count + f->types[CW_AOFO].count;
    h.alloc_bytes = f->size_bytes;
    h.alloc_count = f->commit_count;
    h.freed_bytes = f->types[CW_AIFI].bytes + f->types[CW_AOFI].bytes;
    h.freed_count = f->types[CW_AIFI].count + f->types[CW_AOFI].count;
    return h;
}

static int cmp_figs(const cw_heap_figs_t *a, const cw_heap_figs_t *b)
{
    if (a->outstanding_bytes != b->outstanding_bytes)
        return a->outstanding_bytes > b->outstanding_bytes ? -1 : 1;
    if (a->alloc_bytes != b->alloc_bytes) return a->alloc_bytes > b->alloc_bytes ? -1 : 1;
    return 0;
}
static int cmp_stack(const void *a, const void *b)
{
    return cmp_figs(&((const cw_heap_stack_report_t *)a)->figs,
                    &((const cw_heap_stack_report_t *)b)->figs);
}
static int cmp_proc(const void *a, const void *b)
{
    const cw_heap_proc_report_t *x = a, *y = b;
    int c = cmp_figs(&x->totals, &y->totals);
    return c ? c : (x->pid > y->pid) - (x->pid < y->pid);
}

/* Frees the frames of stacks v[0..n) and the array: the report's stacks
 * and a snapshot's, two types that both hold frames and nframes. */
#define FREE_STACKS(v, n)                                                                          \
    do {                                                                                           \
        for (uint32_t k_ = 0; k_ < (n); k_++)                                                      \
            cw_free_strv((v)[k_].frames, (v)[k_].nframes);                                         \
        free(v);                                                                                   \
    } while (0)

void cw_heap_report_free(cw_heap_report_t *r)
{
    if (!r) return;
    for (uint32_t i = 0; i < r->nprocs; i++) {
        FREE_STACKS(r->procs[i].stacks, r->procs[i].nstacks);
        free(r->procs[i].name);
        free(r->procs[i].cmdline);
    }
    free(r->procs);
    for (uint32_t i = 0; i < r->nsnapshots; i++)
        FREE_STACKS(r->snapshots[i].stacks, r->snapshots[i].nstacks);
    free(r->snapshots);
    free(r);
}

static int cmp_snap(const void *a, const void *b)
{
    const cw_heap_snap_stack_t *x = a, *y = b;
    return x->bytes != y->bytes ? (x->bytes > y->bytes ? -1 : 1)
                                : (x->pid > y->pid) - (x->pid < y->pid);
}

/* The model's snapshots into r, their stacks named through stacks. */
static int name_snapshots(const cw_heap_model_t *m, cw_stacks_t *stacks, cw_heap_report_t *r)
{
    r->snapshots_skipped = m->snaps_skipped;
    if (!m->nsnaps) return 0;
    if (!(r->snapshots = calloc(m->nsnaps, sizeof *r->snapshots))) return CW_ENOMEM;
    for (uint32_t i = 0; i < m->nsnaps; i++, r->nsnapshots++) {
        const snap_t *in = &m->snaps[i];
        cw_heap_snapshot_t *o = &r->snapshots[i];
        o->ts_ns = in->ts;
        if (in->n && !(o->stacks = calloc(in->n, sizeof *o->stacks))) return CW_ENOMEM;
        for (uint32_t k = 0; k < in->n; k++, o->nstacks++) {
            cw_heap_snap_stack_t *st = &o->stacks[k];
            uint32_t n = 0;
            const uint32_t *f = cw_stacks_frames(stacks, in->v[k].stack_id, &n);
            st->pid = in->v[k].pid;
            st->bytes = in->v[k].bytes;
            st->count = in->v[k].count;
            if (!(st->frames = calloc(n ? n : 1, sizeof *st->frames))) return CW_ENOMEM;
            for (uint32_t j = 0; j < n; j++, st->nframes++)
                if (!(st->frames[j] = cw_strdup(cw_stacks_frame_text(stacks, f[j]))))
                    return CW_ENOMEM;
        }
        if (o->nstacks > 1) qsort(o->stacks, o->nstacks, sizeof *o->stacks, cmp_snap);
    }
    return 0;
}

/* Moves the analyzer's report of one instance into p (frames and names
 * are taken over, the source's pointers cleared). */
static void take_proc(cw_heap_model_t *m, cw_proc_report_t *src, cw_heap_proc_report_t *p)
{
    p->pid = src->pid;
    p->name = src->name;
    p->cmdline = src->cmdline;
    src->name = src->cmdline = NULL;
    p->nstacks = src->nstacks;
    p->totals.peak_bytes = src->peak_bytes;
    for (uint32_t s = 0; s < src->nstacks; s++) {
        cw_stack_report_t *in = &src->stacks[s];
        cw_heap_stack_report_t *o = &p->stacks[s];
        o->frames = in->frames;
        o->nframes = in->nframes;
        in->frames = NULL;
        in->nframes = 0;
        o->figs = from_commit(&in->figs);
        cw_analysis_held_t h;
        if (cw_analysis_held(m->analysis, src->id, in->stack_id, &h) == 0)
            o->figs.peak_bytes = h.peak;
        figs_add(&p->totals, &o->figs);
    }
    if (p->nstacks > 1) qsort(p->stacks, p->nstacks, sizeof *p->stacks, cmp_stack);
}

int cw_heap_model_report(cw_heap_model_t *m, cw_stacks_t *stacks, const cw_heap_losses_t *losses,
                         cw_heap_report_t **out)
{
    cw_tracker_finish(m->tracker);
    if (m->oom) return CW_ENOMEM;
    cw_report_t *cr = NULL;
    cw_tagger_t *tagger = NULL; /* the analyzer names tags; the heap report shows none yet */
    int rc = cw_tagger_create_builtin(&tagger);
    if (!rc) rc = cw_analysis_report(m->analysis, stacks, tagger, true, &cr);
    cw_tagger_destroy(tagger);
    if (rc) return rc;
    rc = CW_ENOMEM;
    cw_heap_report_t *r = calloc(1, sizeof *r);
    if (!r) goto out;
    r->from_ns = m->from_ns;
    r->to_ns = m->last_ts + 1;
    r->events = m->events;
    r->unknown_frees = m->unknown_frees;
    r->zero_allocs = m->zero_allocs;
    r->reused = m->reused;
    r->capped = m->capped;
    if (losses) r->losses = *losses;
    if (cr->nprocs && !(r->procs = calloc(cr->nprocs, sizeof *r->procs))) goto out;
    for (uint32_t i = 0; i < cr->nprocs; i++) {
        cw_heap_proc_report_t *p = &r->procs[r->nprocs];
        if (cr->procs[i].nstacks && !(p->stacks = calloc(cr->procs[i].nstacks, sizeof *p->stacks)))
            goto out;
        r->nprocs++;
        take_proc(m, &cr->procs[i], p);
    }
    if (r->nprocs > 1) qsort(r->procs, r->nprocs, sizeof *r->procs, cmp_proc);
    if (name_snapshots(m, stacks, r)) goto out;
    *out = r;
    r = NULL;
    rc = 0;
out:
    cw_heap_report_free(r);
    cw_report_free(cr);
    return rc;
}

/* ---- printing ---- */

static cJSON *figs_json(cJSON *o, const cw_heap_figs_t *f)
{
    if (!o) return NULL;
    cJSON_AddNumberToObject(o, "outstanding_bytes", (double)f->outstanding_bytes);
    cJSON_AddNumberToObject(o, "outstanding_count", (double)f->outstanding_count);
    cJSON_AddNumberToObject(o, "alloc_bytes", (double)f->alloc_bytes);
    cJSON_AddNumberToObject(o, "alloc_count", (double)f->alloc_count);
    cJSON_AddNumberToObject(o, "freed_bytes", (double)f->freed_bytes);
    cJSON_AddNumberToObject(o, "freed_count", (double)f->freed_count);
    cJSON_AddNumberToObject(o, "peak_bytes", (double)f->peak_bytes);
    return o;
}

static cJSON *proc_json(const cw_heap_proc_report_t *p)
{
    cJSON *o = cJSON_CreateObject();
    if (!o) return NULL;
    cJSON_AddNumberToObject(o, "pid", p->pid);
    cJSON_AddStringToObject(o, "name", p->name ? p->name : "");
    if (p->cmdline) cJSON_AddStringToObject(o, "cmdline", p->cmdline);
    cJSON_AddItemToObject(o, "totals", figs_json(cJSON_CreateObject(), &p->totals));
    cJSON *arr = cJSON_AddArrayToObject(o, "stacks");
    for (uint32_t s = 0; arr && s < p->nstacks; s++) {
        const cw_heap_stack_report_t *st = &p->stacks[s];
        cJSON *so = figs_json(cJSON_CreateObject(), &st->figs);
        if (!so) break;
        cJSON *fr = cJSON_AddArrayToObject(so, "frames");
        for (uint32_t k = 0; fr && k < st->nframes; k++)
            cJSON_AddItemToArray(fr, cJSON_CreateString(st->frames[k]));
        cJSON_AddItemToArray(arr, so);
    }
    return o;
}

char *cw_heap_report_json(const cw_heap_report_t *r)
{
    cJSON *o = cJSON_CreateObject();
    if (!o) return NULL;
    cJSON_AddStringToObject(o, "layer", "heap");
    cJSON_AddNumberToObject(o, "from_ns", (double)r->from_ns);
    cJSON_AddNumberToObject(o, "to_ns", (double)r->to_ns);
    cJSON_AddNumberToObject(o, "events", (double)r->events);
    cJSON_AddNumberToObject(o, "dropped_events", (double)r->losses.dropped);
    cJSON_AddNumberToObject(o, "torn_events", (double)r->losses.torn);
    cJSON_AddNumberToObject(o, "truncated_stacks", (double)r->losses.truncated);
    cJSON_AddNumberToObject(o, "unknown_stacks", (double)r->losses.unknown_stacks);
    cJSON_AddNumberToObject(o, "unknown_frees", (double)r->unknown_frees);
    cJSON_AddNumberToObject(o, "zero_size_allocs", (double)r->zero_allocs);
    cJSON_AddNumberToObject(o, "reused_addresses", (double)r->reused);
    cJSON_AddNumberToObject(o, "capped_allocs", (double)r->capped);
    cw_heap_figs_t all = {0};
    for (uint32_t i = 0; i < r->nprocs; i++) {
        figs_add(&all, &r->procs[i].totals);
        all.peak_bytes += r->procs[i].totals.peak_bytes;
    }
    cJSON_AddItemToObject(o, "totals", figs_json(cJSON_CreateObject(), &all));
    cJSON *arr = cJSON_AddArrayToObject(o, "processes");
    for (uint32_t i = 0; arr && i < r->nprocs; i++)
        cJSON_AddItemToArray(arr, proc_json(&r->procs[i]));
    cJSON_AddNumberToObject(o, "snapshots_skipped", (double)r->snapshots_skipped);
    cJSON *snaps = cJSON_AddArrayToObject(o, "snapshots");
    for (uint32_t i = 0; snaps && i < r->nsnapshots; i++) {
        const cw_heap_snapshot_t *sn = &r->snapshots[i];
        cJSON *so = cJSON_CreateObject(), *sts = so ? cJSON_AddArrayToObject(so, "stacks") : NULL;
        cJSON_AddNumberToObject(so, "ts_ns", (double)sn->ts_ns);
        for (uint32_t k = 0; sts && k < sn->nstacks; k++) {
            const cw_heap_snap_stack_t *st = &sn->stacks[k];
            cJSON *x = cJSON_CreateObject();
            cJSON_AddNumberToObject(x, "pid", st->pid);
            cJSON_AddNumberToObject(x, "outstanding_bytes", (double)st->bytes);
            cJSON_AddNumberToObject(x, "outstanding_count", (double)st->count);
            cJSON *fr = cJSON_AddArrayToObject(x, "frames");
            for (uint32_t j = 0; fr && j < st->nframes; j++)
                cJSON_AddItemToArray(fr, cJSON_CreateString(st->frames[j]));
            cJSON_AddItemToArray(sts, x);
        }
        cJSON_AddItemToArray(snaps, so);
    }
    char *s = cJSON_PrintUnformatted(o);
    cJSON_Delete(o);
    return s;
}

static void put_figs(FILE *out, const char *indent, const cw_heap_figs_t *f)
{
    char ob[32], ab[32], fb[32], pb[32];
    cw_format_ubytes(f->outstanding_bytes, ob, sizeof ob);
    cw_format_ubytes(f->alloc_bytes, ab, sizeof ab);
    cw_format_ubytes(f->freed_bytes, fb, sizeof fb);
    cw_format_ubytes(f->peak_bytes, pb, sizeof pb);
    fprintf(out,
            "%soutstanding %s in %" PRIu64 " (%" PRIu64 " B); allocated %s in %" PRIu64
            "; freed %s in %" PRIu64 "; peak %s\n",
            indent, ob, f->outstanding_count, f->outstanding_bytes, ab, f->alloc_count, fb,
            f->freed_count, pb);
}

int cw_heap_report_print(const cw_heap_report_t *r, uint32_t max_stacks, FILE *out)
{
    fprintf(out, "heap report: %" PRIu64 " events", r->events);
    fprintf(out,
            ", %" PRIu64 " dropped, %" PRIu64 " torn, %" PRIu64 " frees of unknown blocks, %" PRIu64
            " stacks truncated, %" PRIu64 " allocations past the bound on live blocks",
            r->losses.dropped, r->losses.torn, r->unknown_frees, r->losses.truncated, r->capped);
    if (r->losses.unknown_stacks)
        fprintf(out, ", %" PRIu64 " events with a stack index never defined",
                r->losses.unknown_stacks);
    fputc('\n', out);
    for (uint32_t i = 0; i < r->nprocs; i++) {
        const cw_heap_proc_report_t *p = &r->procs[i];
        fprintf(out, "\nprocess %u %s\n", p->pid, p->name ? p->name : "");
        put_figs(out, "  total: ", &p->totals);
        uint32_t n = max_stacks && max_stacks < p->nstacks ? max_stacks : p->nstacks;
        for (uint32_t s = 0; s < n; s++) {
            const cw_heap_stack_report_t *st = &p->stacks[s];
            fprintf(out, "\n  stack %u:\n", s + 1);
            put_figs(out, "    ", &st->figs);
            /* Innermost first, as a debugger shows a stack. */
            for (uint32_t k = st->nframes; k-- > 0;)
                fprintf(out, "      %s\n", st->frames[k]);
        }
        if (n < p->nstacks)
            fprintf(out, "\n  (%u more stacks; --json lists all)\n", p->nstacks - n);
    }
    return ferror(out) ? CW_EIO : 0;
}
