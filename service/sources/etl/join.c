/* join.c - what it takes to give an event its stack: the stack-key
 * definitions, and the ring of events waiting for their StackWalk events.
 *
 * A StackWalk event names its event by the raw timestamp (EventTimeStamp)
 * and comes after it, at once for the kernel part, and for the user part
 * possibly later, when the thread returns to user mode (one user part
 * then completes every kernel-only event of that thread). Stack caching
 * replaces the frames by a key (events 37/38) whose frames come in a
 * definition (34-36) when the cache entry is deleted or at the rundown at
 * the end of the trace: after every reference. So the definitions are
 * collected by a first pass over the file, and events are held in time
 * order, in a ring, until their stack is complete or can no longer come;
 * the ring is sorted by time, so finding an event is a binary search. */
#include <stdlib.h>
#include <string.h>

#include "sources/etl/etl_internal.h"

/* ---- stack keys ------------------------------------------------------------- */

int cw_etl__keys_add(cw_etl__keys_t *k, uint64_t key, uint64_t ts, const cw_etl_stackdef_t *def)
{
    if (CW_RESERVE(k->defs, k->cap, k->n + 1) != 0 ||
        CW_RESERVE(k->frames, k->fcap, k->nframes + def->nframes) != 0)
        return CW_ENOMEM;
    for (uint32_t i = 0; i < def->nframes; i++)
        k->frames[k->nframes + i] = cw_etl_frame(def->frames, i, def->ptr_size);
    k->defs[k->n++] = (cw_etl__keydef_t){key, ts, k->nframes, def->nframes, (uint8_t)def->ptr_size};
    k->nframes += def->nframes;
    return 0;
}

static int by_key_ts(const void *a, const void *b)
{
    const cw_etl__keydef_t *x = a, *y = b;
    if (x->key != y->key) return x->key < y->key ? -1 : 1;
    if (x->ts != y->ts) return x->ts < y->ts ? -1 : 1;
    return x->off < y->off ? -1 : x->off > y->off;
}

void cw_etl__keys_sort(cw_etl__keys_t *k)
{
    if (k->n) qsort(k->defs, k->n, sizeof *k->defs, by_key_ts);
}

const cw_etl__keydef_t *cw_etl__keys_find(const cw_etl__keys_t *k, uint64_t key, uint64_t ts)
{
    size_t lo = 0, hi = k->n;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        const cw_etl__keydef_t *m = &k->defs[mid];
        if (m->key < key || (m->key == key && m->ts < ts)) lo = mid + 1;
        else hi = mid;
    }
    return lo < k->n && k->defs[lo].key == key ? &k->defs[lo] : NULL;
}

void cw_etl__keys_free(cw_etl__keys_t *k)
{
    free(k->defs);
    free(k->frames);
    memset(k, 0, sizeof *k);
}

/* ---- the ring ----------------------------------------------------------------- */

_Static_assert(sizeof(cw_etl__rec_t) == 64, "a held record is one cache line");

static cw_etl__rec_t *at(cw_etl__ring_t *g, size_t i)
{
    return &g->r[(g->head + i) & (g->cap - 1)];
}

static size_t slot_of(const cw_etl__ring_t *g, const cw_etl__rec_t *x)
{
    return (size_t)(x - g->r);
}

/* The ring's first size in slots (a power of two). A build may make it
 * smaller (the fuzz target: 8, so the ring grows and its slots wrap on
 * small inputs, and a reader opened twice per input does not clear and
 * free 256 slots each time); its size changes where records are held,
 * never which or in what order. */
#ifndef CW_ETL__RING_FIRST
#define CW_ETL__RING_FIRST 256
#endif
_Static_assert(CW_ETL__RING_FIRST > 0 && (CW_ETL__RING_FIRST & (CW_ETL__RING_FIRST - 1)) == 0,
               "the ring's size is a power of two");

/* Doubles the ring; slots move in order from the head, their side
 * records (buffers) with them. */
static int ring_grow(cw_etl__ring_t *g)
{
    size_t cap = g->cap ? 2 * g->cap : CW_ETL__RING_FIRST;
    cw_etl__rec_t *r = calloc(cap, sizeof *r);
    cw_etl__side_t *side = calloc(cap, sizeof *side);
    if (!r || !side) {
        free(r);
        free(side);
        return CW_ENOMEM;
    }
    for (size_t i = 0; i < g->cap; i++) {
        size_t j = (g->head + i) & (g->cap - 1);
        r[i] = g->r[j];
        side[i] = g->side[j];
    }
    free(g->r);
    free(g->side);
    g->r = r;
    g->side = side;
    g->cap = cap;
    g->head = 0;
    return 0;
}

cw_etl__rec_t *cw_etl__ring_push(cw_etl__ring_t *g, uint64_t ts)
{
    if (g->n == g->cap && ring_grow(g) != 0) return NULL;
    cw_etl__rec_t *x = at(g, g->n++);
    /* The whole line written at once; the side record is left alone. */
    *x = (cw_etl__rec_t){.ts = ts};
    ++g->next_seq; /* seq 0 means "none" */
    if (g->n > 1 && ts < at(g, g->n - 2)->ts) g->unsorted_seq = g->next_seq;
    return x;
}

uint64_t cw_etl__ring_seq(const cw_etl__ring_t *g, const cw_etl__rec_t *x)
{
    size_t i = (slot_of(g, x) - g->head) & (g->cap - 1); /* from the head */
    return g->next_seq - g->n + 1 + i;
}

cw_etl__side_t *cw_etl__ring_side(cw_etl__ring_t *g, const cw_etl__rec_t *x)
{
    return &g->side[slot_of(g, x)];
}

cw_etl__rec_t *cw_etl__ring_head(cw_etl__ring_t *g)
{
    return g->n ? at(g, 0) : NULL;
}

void cw_etl__ring_pop(cw_etl__ring_t *g)
{
    if (!g->n) return;
    g->head = (g->head + 1) & (g->cap - 1);
    g->n--;
}

cw_etl__rec_t *cw_etl__ring_by_seq(cw_etl__ring_t *g, uint64_t seq)
{
    uint64_t oldest = g->next_seq - g->n + 1;
    if (seq == 0 || seq < oldest || seq > g->next_seq) return NULL;
    return at(g, (size_t)(seq - oldest));
}

cw_etl__rec_t *cw_etl__ring_find(cw_etl__ring_t *g, uint64_t ts, uint32_t tid, uint16_t cpu)
{
    size_t lo = 0, hi = g->n;
    if (g->unsorted_seq < g->next_seq - g->n + 1) {
        /* Sorted (the usual case), and a walk comes right after its
         * event: a few steps back from the newest record usually find the
         * first one at ts or later, where a binary search over thousands
         * of records waiting for their stacks would miss the cache at
         * each step. On a sorted ring both find the same record. */
        for (int steps = 0; hi > 0 && steps < 16 && at(g, hi - 1)->ts >= ts; steps++) hi--;
        if (hi == 0 || at(g, hi - 1)->ts < ts) lo = hi;
    }
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (at(g, mid)->ts < ts) lo = mid + 1;
        else hi = mid;
    }
    cw_etl__rec_t *best = NULL;
    int best_rank = 0;
    for (size_t i = lo; i < g->n; i++) {
        cw_etl__rec_t *x = at(g, i);
        if (x->ts != ts) break;
        if (!(x->flags & CW_ETL__REC_WANT)) continue;
        int rank = x->tid == tid && tid != 0 ? 3 : x->tid != 0 ? 0 : x->cpu == cpu ? 2 : 1;
        if (rank > best_rank) {
            best = x;
            best_rank = rank;
            if (rank == 3) break;
        }
    }
    return best;
}

void cw_etl__ring_free(cw_etl__ring_t *g)
{
    for (size_t i = 0; i < g->cap; i++) {
        free(g->side[i].name); /* and the cmdline in it */
        free(g->side[i].kf);
        free(g->side[i].uf);
    }
    free(g->r);
    free(g->side);
    memset(g, 0, sizeof *g);
}
