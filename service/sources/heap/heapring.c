/* heapring.c - the reader's side of the interposer's ring (heapring.h):
 * lay it out, check it, take records (a slot and its continuation slots)
 * in claim order, skip torn slots.
 * Thread: the one reader thread. */
#include "sources/heap/heapring.h"

#include <string.h>

#include "commitwatch/error.h"

int cw_heapring_init(cw_heapring_t *r, void *mem, uint64_t nslots)
{
    if (nslots < 2 || (nslots & (nslots - 1))) return CW_EINVAL;
    cw_heapring_hdr_t *h = mem;
    h->magic = CW_HEAPRING_MAGIC;
    h->version = CW_HEAPRING_VERSION;
    h->rec_size = sizeof(cw_heapring_slot_t);
    h->nslots = nslots;
    atomic_store(&h->closed, 0);
    atomic_store(&h->attached, 0);
    atomic_store(&h->head, 0);
    atomic_store(&h->tail, 0);
    atomic_store(&h->dropped, 0);
    r->h = h;
    r->torn = 0;
    r->pos = 0;
    r->given = 0;
    return 0;
}

int cw_heapring_check(const void *mem, size_t len)
{
    const cw_heapring_hdr_t *h = mem;
    if (len < CW_HEAPRING_HDR || h->magic != CW_HEAPRING_MAGIC ||
        h->version != CW_HEAPRING_VERSION || h->rec_size != sizeof(cw_heapring_slot_t) ||
        h->nslots < 2 || (h->nslots & (h->nslots - 1)) ||
        h->nslots > (len - CW_HEAPRING_HDR) / sizeof(cw_heapring_slot_t))
        return CW_EINVAL;
    return 0;
}

/* Gives the slots read so far back to the writers. */
static void release_read(cw_heapring_t *r)
{
    if (r->given != r->pos) {
        atomic_store_explicit(&r->h->tail, r->pos, memory_order_release);
        r->given = r->pos;
    }
}

int cw_heapring_next(cw_heapring_t *r, cw_heapring_rec_t *out)
{
    cw_heapring_hdr_t *h = r->h;
    cw_heapring_slot_t *slots = cw_heapring_slots(h);
    uint64_t mask = h->nslots - 1;
    for (;;) {
        uint64_t pos = r->pos;
        const cw_heapring_slot_t *s = &slots[pos & mask];
        uint64_t seq = atomic_load_explicit(&s->seq, memory_order_acquire);
        if (seq == ((pos + 1) | CW_HEAPRING_CONT_BIT)) {
            /* Part of a record whose first slot was skipped as torn. */
            r->pos = pos + 1;
            continue;
        }
        /* A slot of the previous lap (or never written) has another number. */
        if (seq != pos + 1) {
            release_read(r);
            return 0;
        }
        /* The slot's fields, one a line (alike to alerts/eval.c's copy of
         * a stored alert row in form only). */
        out->kind = s->kind;
        out->fn = s->fn;
        out->flags = s->flags;
        out->tid = s->tid;
        out->pid = s->pid;
        out->stack = s->stack;
        out->ts = s->ts;
        out->addr = s->addr;
        out->size = s->size;
        out->old_addr = s->old_addr;
        uint16_t n = s->nwords;
        unsigned conts = s->conts;
        /* The words the record's continuation slots can hold, no more. */
        if (n > conts * CW_HEAPRING_WORDS) n = (uint16_t)(conts * CW_HEAPRING_WORDS);
        if (n > sizeof out->w / sizeof *out->w) n = sizeof out->w / sizeof *out->w;
        out->nwords = n;
        for (uint64_t c = 1; n; c++) {
            const cw_heapring_cont_t *k =
                (const cw_heapring_cont_t *)(const void *)&slots[(pos + c) & mask];
            uint16_t take = n < CW_HEAPRING_WORDS ? n : CW_HEAPRING_WORDS;
            memcpy(&out->w[(c - 1) * CW_HEAPRING_WORDS], k->w, take * sizeof *k->w);
            n = (uint16_t)(n - take);
        }
        r->pos = pos + 1 + conts;
        if (r->pos - r->given >= CW_HEAPRING_BATCH) release_read(r);
        return 1;
    }
}

uint64_t cw_heapring_pending(const cw_heapring_t *r)
{
    return atomic_load_explicit(&r->h->head, memory_order_acquire) - r->pos;
}

int cw_heapring_skip(cw_heapring_t *r)
{
    if (cw_heapring_pending(r) == 0) return 0;
    r->pos++;
    release_read(r);
    r->torn++;
    return 1;
}

void cw_heapring_close(cw_heapring_t *r)
{
    atomic_store_explicit(&r->h->closed, 1, memory_order_relaxed);
}

uint64_t cw_heapring_dropped(const cw_heapring_t *r)
{
    return atomic_load_explicit(&r->h->dropped, memory_order_relaxed);
}
