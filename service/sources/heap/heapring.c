/* heapring.c - the reader's side of the interposer's ring (heapring.h):
 * lay it out, check it, take records in claim order, skip torn slots.
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
    h->rec_size = sizeof(cw_heapring_rec_t);
    h->nslots = nslots;
    atomic_store(&h->closed, 0);
    atomic_store(&h->attached, 0);
    atomic_store(&h->head, 0);
    atomic_store(&h->tail, 0);
    atomic_store(&h->dropped, 0);
    r->h = h;
    r->torn = 0;
    r->pos = 0;
    return 0;
}

int cw_heapring_check(const void *mem, size_t len)
{
    const cw_heapring_hdr_t *h = mem;
    if (len < CW_HEAPRING_HDR || h->magic != CW_HEAPRING_MAGIC ||
        h->version != CW_HEAPRING_VERSION || h->rec_size != sizeof(cw_heapring_rec_t) ||
        h->nslots < 2 || (h->nslots & (h->nslots - 1)) ||
        h->nslots > (len - CW_HEAPRING_HDR) / sizeof(cw_heapring_rec_t))
        return CW_EINVAL;
    return 0;
}

/* Gives the slots read so far back to the writers. */
static void release_read(cw_heapring_t *r)
{
    if (atomic_load_explicit(&r->h->tail, memory_order_relaxed) != r->pos)
        atomic_store_explicit(&r->h->tail, r->pos, memory_order_release);
}

int cw_heapring_next(cw_heapring_t *r, cw_heapring_rec_t *out)
{
    cw_heapring_hdr_t *h = r->h;
    uint64_t pos = r->pos;
    cw_heapring_rec_t *s = &cw_heapring_slots(h)[pos & (h->nslots - 1)];
    /* A slot of the previous lap (or never written) has another number. */
    if (atomic_load_explicit(&s->seq, memory_order_acquire) != pos + 1) {
        release_read(r);
        return 0;
    }
    /* Only the fields, then the frames in use: most stacks are short. */
    memcpy((char *)out + sizeof out->seq, (const char *)s + sizeof s->seq,
           offsetof(cw_heapring_rec_t, pc) - sizeof s->seq);
    uint16_t n = out->nframes <= CW_HEAPRING_FRAMES ? out->nframes : CW_HEAPRING_FRAMES;
    out->nframes = n;
    memcpy(out->pc, s->pc, n * sizeof *s->pc);
    atomic_store_explicit(&out->seq, pos + 1, memory_order_relaxed);
    r->pos = pos + 1;
    if ((r->pos & (CW_HEAPRING_BATCH - 1)) == 0) release_read(r);
    return 1;
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
