/* agg.c - the bucket aggregator (see agg.h and DESIGN.md "Storage model").
 *
 * Three maps, cleared at every bucket close, sum the current bucket:
 *   commits  (proc<<32|stack, rundown)  -> bytes, events
 *   releases (proc<<32|stack, a bucket) -> bytes, pieces, closed
 *   activity (proc, 0)                  -> events, delta, relpeak, time
 * Process starts and exits go straight into the pending batch. On close
 * the maps become rows, new frames and stacks (with their tags) are
 * appended, and the batch is emitted. */
#include "commitwatch/agg.h"

#include <stdlib.h>
#include <string.h>

#include "commitwatch/error.h"
#include "commitwatch/event.h"
#include "commitwatch/keymap.h"

typedef struct commit_acc {
    uint32_t proc, stack;
    int64_t a;
    uint64_t bytes, events;
} commit_acc_t;

typedef struct release_acc {
    uint32_t proc, stack;
    int64_t a;
    uint64_t bytes, pieces, closed;
} release_acc_t;

typedef struct act_acc {
    uint32_t proc;
    uint64_t events;
    int64_t delta, relpeak, relpeak_ns;
} act_acc_t;

/* A dense array of accumulators found through a keymap. */
#define ACC_TABLE(T)                                                                               \
    struct {                                                                                       \
        cw_keymap_t map;                                                                           \
        T *v;                                                                                      \
        size_t cap;                                                                                \
    }

struct cw_agg {
    int64_t width;
    cw_stacks_t *stacks;
    cw_tagger_t *tagger;
    uint32_t sent_frames, sent_stacks; /* ids below these are stored */
    cw_agg_emit_fn emit;
    void *emit_ctx;

    int64_t bucket; /* start of the open bucket; INT64_MIN when none */
    cw_batch_t *batch;
    ACC_TABLE(commit_acc_t) commits;
    ACC_TABLE(release_acc_t) releases;
    ACC_TABLE(act_acc_t) acts;
    uint64_t events_total, events_lost;
    int64_t drift;
    int err; /* first failure inside a callback, returned by advance/flush */
};

/* Index of the accumulator for (k1, k2), zeroed when new; UINT32_MAX on
 * out of memory. */
static uint32_t acc_get(cw_keymap_t *map, void *v, size_t *cap, size_t elem, uint64_t k1,
                        uint64_t k2)
{
    int added;
    uint32_t i = cw_keymap_get(map, k1, k2, &added);
    if (i == UINT32_MAX || !added) return i;
    if (cw_reserve(v, cap, (size_t)i + 1, elem) != 0) return UINT32_MAX;
    char *base;
    memcpy(&base, v, sizeof base); /* v is the address of the table's T * */
    memset(base + (size_t)i * elem, 0, elem);
    return i;
}

#define ACC(a, table, k1, k2)                                                                      \
    acc_get(&(a)->table.map, &(a)->table.v, &(a)->table.cap, sizeof *(a)->table.v, (k1), (k2))

static int open_bucket(cw_agg_t *a, int64_t ts)
{
    if (a->batch) return 0;
    a->bucket = cw_floor_to(ts, a->width);
    return cw_batch_create(a->bucket, a->width, &a->batch);
}

static act_acc_t *act_of(cw_agg_t *a, const cw_proc_t *p)
{
    uint32_t i = ACC(a, acts, p->id, 0);
    if (i == UINT32_MAX) return NULL;
    act_acc_t *x = &a->acts.v[i];
    if (x->proc == 0) {
        x->proc = p->id;
        x->relpeak_ns = a->bucket;
    }
    return x;
}

static void fail(cw_agg_t *a, int err)
{
    if (!a->err) a->err = err;
}

static void on_start(void *ctx, const cw_proc_t *p, int64_t ts)
{
    cw_agg_t *a = ctx;
    if (open_bucket(a, ts) != 0 ||
        cw_batch_add_proc(a->batch, p->id, p->pid, p->start_ns, CW_TS_NEVER, p->name, p->cmdline))
        fail(a, CW_ENOMEM);
}

static void on_exit_(void *ctx, const cw_proc_t *p, int64_t ts)
{
    cw_agg_t *a = ctx;
    if (open_bucket(a, ts) != 0 ||
        cw_batch_add_proc(a->batch, p->id, p->pid, p->start_ns, ts, p->name, p->cmdline)) {
        fail(a, CW_ENOMEM);
        return;
    }
    /* A real exit, or the end of tracking (the row says which). */
    a->batch->procs.v[a->batch->procs.n - 1].tracking_ended = p->tracking_ended;
}

static void on_event(void *ctx, const cw_proc_t *p, int64_t ts)
{
    cw_agg_t *a = ctx;
    act_acc_t *x;
    if (open_bucket(a, ts) != 0 || !(x = act_of(a, p))) {
        fail(a, CW_ENOMEM);
        return;
    }
    x->events++;
    if (x->delta > x->relpeak) {
        x->relpeak = x->delta;
        x->relpeak_ns = ts;
    }
}

static void on_commit(void *ctx, const cw_proc_t *p, const cw_commit_t *c, int64_t ts)
{
    cw_agg_t *a = ctx;
    bool rundown = c->ts == CW_TS_BEFORE;
    act_acc_t *x;
    uint32_t i;
    if (open_bucket(a, ts) != 0 || !(x = act_of(a, p)) ||
        (i = ACC(a, commits, ((uint64_t)p->id << 32) | c->stack_id, rundown)) == UINT32_MAX) {
        fail(a, CW_ENOMEM);
        return;
    }
    commit_acc_t *ca = &a->commits.v[i];
    ca->proc = p->id;
    ca->stack = c->stack_id;
    ca->a = rundown ? CW_TS_BEFORE : a->bucket;
    ca->bytes += c->bytes;
    ca->events++;
    /* Rundown bytes were outstanding all along: no change at this time. */
    if (!rundown) x->delta += (int64_t)c->bytes;
}

static void on_release(void *ctx, const cw_proc_t *p, const cw_commit_t *c, uint64_t bytes,
                       int64_t ts)
{
    cw_agg_t *a = ctx;
    int64_t ab = c->ts == CW_TS_BEFORE ? CW_TS_BEFORE : cw_floor_to(c->ts, a->width);
    act_acc_t *x;
    uint32_t i;
    if (open_bucket(a, ts) != 0 || !(x = act_of(a, p)) ||
        (i = ACC(a, releases, ((uint64_t)p->id << 32) | c->stack_id, (uint64_t)ab)) == UINT32_MAX) {
        fail(a, CW_ENOMEM);
        return;
    }
    release_acc_t *ra = &a->releases.v[i];
    ra->proc = p->id;
    ra->stack = c->stack_id;
    ra->a = ab;
    ra->bytes += bytes;
    ra->pieces++;
    if (c->remaining == 0) ra->closed++;
    x->delta -= (int64_t)bytes;
}

cw_tracker_sink_t cw_agg_sink(cw_agg_t *a)
{
    cw_tracker_sink_t s = {a, on_start, on_event, on_commit, on_release, on_exit_, NULL};
    return s;
}

int cw_agg_create(int64_t width_ns, cw_stacks_t *stacks, cw_tagger_t *tagger,
                  uint32_t stored_frames, uint32_t stored_stacks, cw_agg_emit_fn emit,
                  void *emit_ctx, cw_agg_t **out)
{
    cw_agg_t *a = calloc(1, sizeof *a);
    if (!a || width_ns <= 0) {
        free(a);
        return a ? CW_EINVAL : CW_ENOMEM;
    }
    a->width = width_ns;
    a->stacks = stacks;
    a->tagger = tagger;
    a->sent_frames = stored_frames ? stored_frames : 1;
    a->sent_stacks = stored_stacks;
    a->emit = emit;
    a->emit_ctx = emit_ctx;
    a->bucket = INT64_MIN;
    if (cw_keymap_init(&a->commits.map, 1024) || cw_keymap_init(&a->releases.map, 1024) ||
        cw_keymap_init(&a->acts.map, 256)) {
        cw_agg_destroy(a);
        return CW_ENOMEM;
    }
    *out = a;
    return 0;
}

void cw_agg_destroy(cw_agg_t *a)
{
    if (!a) return;
    cw_batch_free(a->batch);
    cw_keymap_free(&a->commits.map);
    cw_keymap_free(&a->releases.map);
    cw_keymap_free(&a->acts.map);
    free(a->commits.v);
    free(a->releases.v);
    free(a->acts.v);
    free(a);
}

void cw_agg_set_tagger(cw_agg_t *a, cw_tagger_t *tagger)
{
    a->tagger = tagger;
}

void cw_agg_set_counters(cw_agg_t *a, uint64_t events_total, uint64_t events_lost,
                         int64_t drift_bytes)
{
    a->events_total = events_total;
    a->events_lost = events_lost;
    a->drift = drift_bytes;
}

/* Moves the maps into the batch, adds new frames and stacks, emits. */
static int close_bucket(cw_agg_t *a)
{
    cw_batch_t *b = a->batch;
    int rc = 0;
    if (!b) return 0;
    a->batch = NULL;

    for (uint32_t i = 0; i < a->commits.map.count && rc == 0; i++) {
        const commit_acc_t *c = &a->commits.v[i];
        cw_row_commit_t r = {c->proc, c->stack, c->a, c->bytes, c->events};
        rc = cw_batch_add_commit(b, &r);
    }
    for (uint32_t i = 0; i < a->releases.map.count && rc == 0; i++) {
        const release_acc_t *x = &a->releases.v[i];
        cw_row_release_t r = {x->proc, x->stack, x->a, x->bytes, x->pieces, x->closed};
        rc = cw_batch_add_release(b, &r);
    }
    for (uint32_t i = 0; i < a->acts.map.count && rc == 0; i++) {
        const act_acc_t *x = &a->acts.v[i];
        cw_row_activity_t r = {x->proc, x->events, x->delta, x->relpeak, x->relpeak_ns};
        rc = cw_batch_add_activity(b, &r);
    }
    uint32_t nf = cw_stacks_frame_count(a->stacks);
    for (uint32_t id = a->sent_frames; id < nf && rc == 0; id++)
        rc = cw_batch_add_frame(b, id, cw_stacks_frame_text(a->stacks, id));
    uint32_t ns = cw_stacks_count(a->stacks);
    for (uint32_t id = a->sent_stacks; id < ns && rc == 0; id++) {
        uint32_t n;
        const uint32_t *f = cw_stacks_frames(a->stacks, id, &n);
        uint32_t tag = cw_tagger_tag(a->tagger, a->stacks, id);
        rc = cw_batch_add_stack(b, id, f, n, cw_tagger_tag_name(a->tagger, tag));
    }
    cw_keymap_clear(&a->commits.map);
    cw_keymap_clear(&a->releases.map);
    cw_keymap_clear(&a->acts.map);
    if (rc != 0) {
        cw_batch_free(b);
        return rc;
    }
    a->sent_frames = nf;
    a->sent_stacks = ns;
    b->events_total = a->events_total;
    b->events_lost = a->events_lost;
    b->drift_bytes = a->drift;
    return a->emit(a->emit_ctx, b);
}

int cw_agg_advance(cw_agg_t *a, int64_t ts)
{
    if (a->err) return a->err;
    if (a->batch && ts >= a->bucket + a->width) return close_bucket(a);
    return 0;
}

int64_t cw_agg_next_bucket(const cw_agg_t *a, int64_t ts)
{
    return cw_floor_to(ts, a->width) + a->width;
}

int cw_agg_flush(cw_agg_t *a)
{
    if (a->err) return a->err;
    return close_bucket(a);
}
