/* layerfeed.c - the heap layer's batches, re-keyed to the service's ids on
 * the core thread (layerfeed.h).
 *
 * The queue (items) is the mutex's; the maps (srcs) are the core thread's
 * alone: only cw_layerfeed_drain reads or changes them. */
#include "commitwatch/layerfeed.h"

#include <stdlib.h>
#include <string.h>

#include "commitwatch/common.h"
#include "commitwatch/error.h"
#include "commitwatch/platform.h"

typedef struct item {
    int64_t src;
    uint32_t pid, proc;
    cw_batch_t *b; /* may be NULL (a last push without a batch) */
    bool last;
} item_t;

/* One producer's ids -> the service's: frames and stacks by the
 * producer's id (0: not seen), and its instances of the traced pid. */
typedef struct src_map {
    int64_t src;
    uint32_t *frames, *stacks, *procs;
    size_t nframes, frames_cap, nstacks, stacks_cap, nprocs, procs_cap;
} src_map_t;

struct cw_layerfeed {
    cw_mutex_t *mu;
    item_t *items; /* the queue, in push order (mu) */
    size_t nitems, items_cap;
    uint64_t dropped, attached, left_out; /* (mu) */
    src_map_t *srcs;                      /* core thread */
    size_t nsrcs, srcs_cap;
};

int cw_layerfeed_create(cw_layerfeed_t **out)
{
    cw_layerfeed_t *f = calloc(1, sizeof *f);
    if (!f || cw_mutex_create(&f->mu) != 0) {
        free(f);
        return CW_ENOMEM;
    }
    *out = f;
    return 0;
}

static void map_free(src_map_t *m)
{
    free(m->frames);
    free(m->stacks);
    free(m->procs);
}

void cw_layerfeed_destroy(cw_layerfeed_t *f)
{
    if (!f) return;
    for (size_t i = 0; i < f->nitems; i++)
        cw_batch_free(f->items[i].b);
    free(f->items);
    for (size_t i = 0; i < f->nsrcs; i++)
        map_free(&f->srcs[i]);
    free(f->srcs);
    cw_mutex_destroy(f->mu);
    free(f);
}

int cw_layerfeed_push(cw_layerfeed_t *f, int64_t src, uint32_t pid, uint32_t proc, cw_batch_t *b,
                      bool last)
{
    int rc = 0;
    cw_mutex_lock(f->mu);
    /* A last push always finds room: the map it frees must be freed. */
    if (b && f->nitems >= CW_LAYERFEED_MAX && !last)
        rc = CW_ERANGE;
    else if (CW_RESERVE(f->items, f->items_cap, f->nitems + 1))
        rc = CW_ENOMEM;
    else
        f->items[f->nitems++] = (item_t){src, pid, proc, b, last};
    if (rc && b) f->dropped++;
    cw_mutex_unlock(f->mu);
    if (rc) cw_batch_free(b);
    return rc;
}

void cw_layerfeed_counts(cw_layerfeed_t *f, cw_layerfeed_counts_t *out)
{
    cw_mutex_lock(f->mu);
    *out = (cw_layerfeed_counts_t){f->dropped, f->attached, f->left_out};
    cw_mutex_unlock(f->mu);
}

/* ---- re-keying (core thread) ---- */

static src_map_t *map_of(cw_layerfeed_t *f, int64_t src)
{
    for (size_t i = 0; i < f->nsrcs; i++)
        if (f->srcs[i].src == src) return &f->srcs[i];
    if (CW_RESERVE(f->srcs, f->srcs_cap, f->nsrcs + 1)) return NULL;
    src_map_t *m = &f->srcs[f->nsrcs++];
    *m = (src_map_t){.src = src};
    return m;
}

static void map_drop(cw_layerfeed_t *f, int64_t src)
{
    for (size_t i = 0; i < f->nsrcs; i++)
        if (f->srcs[i].src == src) {
            map_free(&f->srcs[i]);
            f->srcs[i] = f->srcs[--f->nsrcs];
            return;
        }
}

/* v[id] = val, v grown (zeroed) to hold id. 0 or CW_ENOMEM. */
static int id_set(uint32_t **v, size_t *n, size_t *cap, uint32_t id, uint32_t val)
{
    if (id >= *n) {
        if (CW_RESERVE(*v, *cap, (size_t)id + 1)) return CW_ENOMEM;
        memset(*v + *n, 0, ((size_t)id + 1 - *n) * sizeof **v);
        *n = (size_t)id + 1;
    }
    (*v)[id] = val;
    return 0;
}

static uint32_t id_get(const uint32_t *v, size_t n, uint32_t id)
{
    return id < n ? v[id] : 0;
}

static bool proc_kept(const src_map_t *m, uint32_t proc)
{
    for (size_t i = 0; i < m->nprocs; i++)
        if (m->procs[i] == proc) return true;
    return false;
}

/* Interns b's new frames and stacks into stacks and learns its instances
 * of pid. 0, CW_ENOMEM, or CW_EPARSE (a stack of a frame never sent). */
static int learn(src_map_t *m, const cw_batch_t *b, uint32_t pid, cw_stacks_t *stacks)
{
    int rc = 0;
    uint32_t *fr = NULL;
    size_t frcap = 0;
    for (uint32_t i = 0; i < b->frames.n && !rc; i++) {
        const cw_row_frame_t *x = &b->frames.v[i];
        uint32_t g;
        rc = cw_stacks_intern_frame(stacks, x->text, strlen(x->text), &g);
        if (!rc) rc = id_set(&m->frames, &m->nframes, &m->frames_cap, x->id, g);
    }
    for (uint32_t i = 0; i < b->stacks.n && !rc; i++) {
        const cw_row_stack_t *x = &b->stacks.v[i];
        if (CW_RESERVE(fr, frcap, x->nframes + 1u)) {
            rc = CW_ENOMEM;
            break;
        }
        for (uint32_t k = 0; k < x->nframes && !rc; k++)
            if (!(fr[k] = id_get(m->frames, m->nframes, x->frames[k]))) rc = CW_EPARSE;
        uint32_t g;
        if (!rc) rc = cw_stacks_intern(stacks, fr, x->nframes, &g);
        if (!rc) rc = id_set(&m->stacks, &m->nstacks, &m->stacks_cap, x->id, g);
    }
    for (uint32_t i = 0; i < b->procs.n && !rc; i++)
        if (b->procs.v[i].pid == pid && !proc_kept(m, b->procs.v[i].id)) {
            if (CW_RESERVE(m->procs, m->procs_cap, m->nprocs + 1))
                rc = CW_ENOMEM;
            else
                m->procs[m->nprocs++] = b->procs.v[i].id;
        }
    free(fr);
    return rc;
}

/* A stack id of the producer's in the service's numbers; stack 0 (the
 * empty stack) is 0 in both. UINT32_MAX: never sent. */
static uint32_t stack_of(const src_map_t *m, uint32_t id)
{
    if (id == 0) return 0;
    uint32_t g = id_get(m->stacks, m->nstacks, id);
    return g ? g : UINT32_MAX;
}

/* Sums activity rows of one instance that several of the producer's
 * instances became (an exec: a new image, the same pid), earlier
 * instance first: the peak of the two in a row is the first's, or the
 * first's net change plus the second's. v sorted by proc. */
static uint32_t merge_activity(cw_row_activity_t *v, uint32_t n)
{
    uint32_t k = 0;
    for (uint32_t i = 0; i < n; i++) {
        if (k && v[k - 1].proc == v[i].proc) {
            cw_row_activity_t *a = &v[k - 1];
            if (a->delta + v[i].relpeak > a->relpeak) {
                a->relpeak = a->delta + v[i].relpeak;
                a->relpeak_ns = v[i].relpeak_ns;
            }
            a->events += v[i].events;
            a->delta += v[i].delta;
        } else {
            v[k++] = v[i];
        }
    }
    return k;
}

/* The rider for b: its rows of the traced instances, re-keyed, sorted and
 * summed per key; NULL in *out when none is left. 0, CW_ENOMEM, CW_EPARSE. */
static int rekey(cw_layerfeed_t *f, const src_map_t *m, const item_t *it, cw_batch_t **out)
{
    const cw_batch_t *b = it->b;
    cw_batch_t *r = NULL;
    uint64_t left = 0;
    int rc = cw_batch_create(b->bucket_ns, b->width_ns, &r);
    if (rc) return rc;
    r->layer = 1;
    for (uint32_t i = 0; i < b->commits.n && !rc; i++) {
        cw_row_commit_t x = b->commits.v[i];
        if (!it->proc || !proc_kept(m, x.proc)) {
            left++;
            continue;
        }
        x.proc = it->proc;
        if ((x.stack = stack_of(m, x.stack)) == UINT32_MAX) rc = CW_EPARSE;
        if (!rc) rc = cw_batch_add_commit(r, &x);
    }
    for (uint32_t i = 0; i < b->releases.n && !rc; i++) {
        cw_row_release_t x = b->releases.v[i];
        if (!it->proc || !proc_kept(m, x.proc)) {
            left++;
            continue;
        }
        x.proc = it->proc;
        if ((x.stack = stack_of(m, x.stack)) == UINT32_MAX) rc = CW_EPARSE;
        if (!rc) rc = cw_batch_add_release(r, &x);
    }
    for (uint32_t i = 0; i < b->activity.n && !rc; i++) {
        cw_row_activity_t x = b->activity.v[i];
        if (!it->proc || !proc_kept(m, x.proc)) continue; /* counted with its rows */
        x.proc = it->proc;
        rc = cw_batch_add_activity(r, &x);
    }
    if (!rc) {
        r->commits.n = cw_batch_merge_commits(r->commits.v, r->commits.n);
        r->releases.n = cw_batch_merge_releases(r->releases.v, r->releases.n);
        cw_batch_sort_activity(r->activity.v, r->activity.n);
        r->activity.n = merge_activity(r->activity.v, r->activity.n);
    }
    cw_mutex_lock(f->mu);
    f->left_out += left;
    cw_mutex_unlock(f->mu);
    if (rc || (!r->commits.n && !r->releases.n && !r->activity.n)) {
        cw_batch_free(r);
        r = NULL;
    }
    *out = r;
    return rc;
}

int cw_layerfeed_drain(cw_layerfeed_t *f, cw_stacks_t *stacks, cw_agg_t *agg)
{
    cw_mutex_lock(f->mu);
    item_t *v = f->items;
    size_t n = f->nitems;
    f->items = NULL;
    f->nitems = f->items_cap = 0;
    cw_mutex_unlock(f->mu);

    int err = 0;
    size_t i = 0;
    for (; i < n && !err; i++) {
        item_t *it = &v[i];
        cw_batch_t *r = NULL;
        src_map_t *m = map_of(f, it->src);
        int rc = m ? 0 : CW_ENOMEM;
        if (!rc && it->b) rc = learn(m, it->b, it->pid, stacks);
        if (!rc && it->b) rc = rekey(f, m, it, &r);
        bool attached = false;
        if (!rc && r && (rc = cw_agg_add_rider(agg, r)) == 0) {
            r = NULL;
            attached = true;
        }
        cw_batch_free(r);
        cw_batch_free(it->b);
        it->b = NULL;
        cw_mutex_lock(f->mu);
        if (rc)
            f->dropped++;
        else if (attached)
            f->attached++;
        cw_mutex_unlock(f->mu);
        if (it->last) map_drop(f, it->src);
        /* A producer's batch that cannot be re-keyed (a frame never sent)
         * or has no bucket to ride yet is its own loss; memory and the
         * aggregator's errors are the caller's. */
        if (rc && rc != CW_EPARSE && rc != CW_EINVAL) err = rc;
    }
    if (i < n) { /* put back what was not drained, ahead of newer pushes */
        cw_mutex_lock(f->mu);
        size_t rest = n - i, total = rest + f->nitems;
        if (!CW_RESERVE(v, n, total)) {
            memmove(v, v + i, rest * sizeof *v);
            if (f->nitems) memcpy(v + rest, f->items, f->nitems * sizeof *v);
            free(f->items);
            f->items = v;
            f->nitems = total;
            f->items_cap = n;
            v = NULL;
        } else {
            for (size_t k = i; k < n; k++)
                cw_batch_free(v[k].b);
            f->dropped += rest;
        }
        cw_mutex_unlock(f->mu);
    }
    free(v);
    return err;
}
