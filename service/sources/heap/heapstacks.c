/* heapstacks.c - the reader's per-thread stack tables (heapstacks.h): a
 * hash of threads by (pid, tid), chained, each with an array of entries
 * by index that grows to the highest index defined.
 * Thread: the reader's thread only. */
#include "sources/heap/heapstacks.h"

#include <stdlib.h>
#include <string.h>

#include "commitwatch/error.h"
#include "sources/heap/heapcache.h"
#include "sources/heap/heapring.h"

#define BUCKETS 1024 /* a power of two */

typedef struct thr {
    struct thr *next;
    uint32_t pid, tid;
    cw_heapstk_t *v; /* cap entries, indices 0 .. cap - 1 */
    uint32_t cap;
} thr_t;

struct cw_heapstacks {
    thr_t *bucket[BUCKETS];
    thr_t *last; /* the thread of the last call: events come in runs of one thread */
    uint64_t unknown;
};

static uint32_t bucket_of(uint32_t pid, uint32_t tid)
{
    uint64_t k = ((uint64_t)pid << 32 | tid) * 0x9e3779b97f4a7c15ull;
    return (uint32_t)(k >> 54) & (BUCKETS - 1);
}

int cw_heapstacks_create(cw_heapstacks_t **out)
{
    *out = calloc(1, sizeof **out);
    return *out ? 0 : CW_ENOMEM;
}

static void thr_free(thr_t *t)
{
    for (uint32_t i = 0; i < t->cap; i++)
        free(t->v[i].pc);
    free(t->v);
    free(t);
}

void cw_heapstacks_destroy(cw_heapstacks_t *s)
{
    if (!s) return;
    for (uint32_t b = 0; b < BUCKETS; b++)
        for (thr_t *t = s->bucket[b], *next; t; t = next) {
            next = t->next;
            thr_free(t);
        }
    free(s);
}

static thr_t *thr_find(cw_heapstacks_t *s, uint32_t pid, uint32_t tid)
{
    if (s->last && s->last->pid == pid && s->last->tid == tid) return s->last;
    for (thr_t *t = s->bucket[bucket_of(pid, tid)]; t; t = t->next)
        if (t->pid == pid && t->tid == tid) return s->last = t;
    return NULL;
}

int cw_heapstacks_define(cw_heapstacks_t *s, uint32_t pid, uint32_t tid, uint32_t idx,
                         const uint64_t *pc, uint16_t n, bool truncated, cw_heapstk_t **out)
{
    if (idx >= CW_HEAPCACHE_STACKS || n > CW_HEAPRING_FRAMES) return CW_EINVAL;
    thr_t *t = thr_find(s, pid, tid);
    if (!t) {
        t = calloc(1, sizeof *t);
        if (!t) return CW_ENOMEM;
        t->pid = pid;
        t->tid = tid;
        uint32_t b = bucket_of(pid, tid);
        t->next = s->bucket[b];
        s->bucket[b] = t;
        s->last = t;
    }
    if (idx >= t->cap) {
        uint32_t cap = t->cap ? t->cap : 64;
        while (cap <= idx)
            cap *= 2;
        cw_heapstk_t *v = realloc(t->v, cap * sizeof *v);
        if (!v) return CW_ENOMEM;
        memset(v + t->cap, 0, (cap - t->cap) * sizeof *v);
        t->v = v;
        t->cap = cap;
    }
    cw_heapstk_t *e = &t->v[idx];
    if (!e->pc || e->n < n) { /* a redefinition reuses its frames' memory when it fits */
        uint64_t *pcs = malloc((n ? n : 1) * sizeof *pcs);
        if (!pcs) return CW_ENOMEM;
        free(e->pc);
        e->pc = pcs;
    }
    memcpy(e->pc, pc, n * sizeof *pc);
    e->n = n;
    e->truncated = truncated;
    e->named = false;
    e->stack_id = e->gen = 0;
    *out = e;
    return 0;
}

cw_heapstk_t *cw_heapstacks_find(cw_heapstacks_t *s, uint32_t pid, uint32_t tid, uint32_t idx)
{
    thr_t *t = thr_find(s, pid, tid);
    if (!t || idx >= t->cap || !t->v[idx].pc) return NULL;
    return &t->v[idx];
}

/* Unlinks and frees the threads of pid that match (tid, or all of them). */
static void forget(cw_heapstacks_t *s, uint32_t pid, uint32_t tid, bool every_tid)
{
    uint32_t from = every_tid ? 0 : bucket_of(pid, tid), to = every_tid ? BUCKETS : from + 1;
    for (uint32_t b = from; b < to; b++)
        for (thr_t **link = &s->bucket[b]; *link;) {
            thr_t *t = *link;
            if (t->pid == pid && (every_tid || t->tid == tid)) {
                *link = t->next;
                if (s->last == t) s->last = NULL;
                thr_free(t);
            } else {
                link = &t->next;
            }
        }
}

void cw_heapstacks_forget(cw_heapstacks_t *s, uint32_t pid, uint32_t tid)
{
    forget(s, pid, tid, false);
}

void cw_heapstacks_forget_pid(cw_heapstacks_t *s, uint32_t pid)
{
    forget(s, pid, 0, true);
}

int cw_heapstacks_take(cw_heapstacks_t *s, const cw_heapring_rec_t *rec, cw_heapstk_t **out,
                       bool *unknown)
{
    *out = NULL;
    *unknown = false;
    switch (rec->kind) {
    case CW_HEAPREC_STACK_RESET:
    case CW_HEAPREC_THREAD_END:
        cw_heapstacks_forget(s, rec->pid, rec->tid);
        return 0;
    case CW_HEAPREC_START:
        cw_heapstacks_forget_pid(s, rec->pid);
        return 0;
    case CW_HEAPREC_NONE: /* a failed call: a definition it carries still holds */
    case CW_HEAPREC_ALLOC:
    case CW_HEAPREC_FREE:
    case CW_HEAPREC_REALLOC:
        break;
    default:
        return 0;
    }
    if (rec->stack == CW_HEAPRING_NOSTACK) return 0;
    int rc = 0;
    if (rec->flags & CW_HEAPREC_F_DEF)
        rc = cw_heapstacks_define(s, rec->pid, rec->tid, rec->stack, rec->w, rec->nwords,
                                  (rec->flags & CW_HEAPREC_F_TRUNCATED) != 0, out);
    else
        *out = cw_heapstacks_find(s, rec->pid, rec->tid, rec->stack);
    if (rc == CW_ENOMEM) return rc;
    if (rec->kind == CW_HEAPREC_NONE) { /* names no event's stack */
        *out = NULL;
        return 0;
    }
    if (!*out) {
        s->unknown++;
        *unknown = true;
    }
    return 0;
}

uint64_t cw_heapstacks_unknown(const cw_heapstacks_t *s)
{
    return s->unknown;
}
