/* heapcache.h - the heap interposer's per-thread stack table: which
 * stacks this thread has already sent to the reader, and their indices.
 *
 * The first time a thread sees a stack (its return addresses), its record
 * carries the frames and a new index (a definition, CW_HEAPREC_F_DEF in
 * heapring.h); after that the thread's records carry only the index. The
 * reader keeps the same table per thread (heapstacks.h). Stacks are
 * compared by their frames, not only a hash: two stacks are never taken
 * for one.
 *
 * Bounds: CW_HEAPCACHE_STACKS stacks and CW_HEAPCACHE_WORDS return
 * addresses in all. When a new stack does not fit, the writer sends a
 * STACK_RESET record, then empties the table (cw_heapcache_reset) and
 * starts again at index 0; the reader forgets the thread's stacks when it
 * reads the reset. A definition is entered (cw_heapcache_add) only once
 * its record has a place in the ring: a dropped event defines nothing, so
 * no record ever names an index the reader was not sent before it.
 *
 * Header-only: the interposer links nothing but libc, and the unit test
 * drives the same code. The table is one block of plain memory the caller
 * provides (the interposer maps it per thread, lazily: its pages are
 * touched as stacks arrive). Thread: the owning thread only. */
#ifndef CW_SOURCES_HEAPCACHE_H
#define CW_SOURCES_HEAPCACHE_H

#include <stdbool.h>
#include <stdint.h>
#include <string.h>

#include "sources/heap/heapring.h"

#define CW_HEAPCACHE_STACKS 2048 /* indices 0 .. 2047 */
#define CW_HEAPCACHE_SLOTS 4096  /* hash slots: a power of two, twice the stacks */
#define CW_HEAPCACHE_WORDS (CW_HEAPCACHE_STACKS * 16) /* return addresses of all stacks */

typedef struct cw_heapcache_slot {
    uint64_t hash;
    uint32_t idx1; /* index + 1; 0: empty */
    uint32_t off;  /* the frames' first word in words[] */
    uint32_t n;    /* frames */
    uint32_t pad;
} cw_heapcache_slot_t;

typedef struct cw_heapcache {
    uint32_t nstacks, nwords;
    uint64_t resets; /* times the table was emptied (for tests and the curious) */
    cw_heapcache_slot_t slot[CW_HEAPCACHE_SLOTS];
    uint64_t words[CW_HEAPCACHE_WORDS];
} cw_heapcache_t;

/* The hash of n return addresses: a rotate and an exclusive or a frame
 * (two cycles; a multiply a frame made the hash 3 % of the traced
 * program's time), one multiply at the end so every frame reaches the
 * slot's bits. Weak on purpose: stacks are compared whole, a collision
 * costs a probe, never a wrong stack. */
static inline uint64_t cw_heapcache_hash(const uint64_t *pc, uint32_t n)
{
    uint64_t h = n;
    for (uint32_t i = 0; i < n; i++)
        h = (h << 7 | h >> 57) ^ pc[i];
    h *= 0xff51afd7ed558ccdull;
    return h ^ h >> 32;
}

static inline cw_heapcache_slot_t *cw_heapcache__probe(cw_heapcache_t *c, const uint64_t *pc,
                                                       uint32_t n, uint64_t hash)
{
    uint32_t i = (uint32_t)(hash ^ hash >> 29) & (CW_HEAPCACHE_SLOTS - 1);
    for (;;) {
        cw_heapcache_slot_t *s = &c->slot[i];
        if (!s->idx1) return s;
        if (s->hash == hash && s->n == n && memcmp(&c->words[s->off], pc, n * sizeof *pc) == 0)
            return s;
        i = (i + 1) & (CW_HEAPCACHE_SLOTS - 1); /* never full: at most half the slots used */
    }
}

/* The stack's index, or -1 when this thread has not defined it. */
static inline int32_t cw_heapcache_find(cw_heapcache_t *c, const uint64_t *pc, uint32_t n,
                                        uint64_t hash)
{
    cw_heapcache_slot_t *s = cw_heapcache__probe(c, pc, n, hash);
    return s->idx1 ? (int32_t)(s->idx1 - 1) : -1;
}

/* Whether a new stack of n frames fits without a reset. */
static inline bool cw_heapcache_fits(const cw_heapcache_t *c, uint32_t n)
{
    return c->nstacks < CW_HEAPCACHE_STACKS && c->nwords + n <= CW_HEAPCACHE_WORDS;
}

/* Enters a stack cw_heapcache_find did not know, once its definition has
 * its place in the ring; it must fit (cw_heapcache_fits). Its index. */
static inline uint32_t cw_heapcache_add(cw_heapcache_t *c, const uint64_t *pc, uint32_t n,
                                        uint64_t hash)
{
    cw_heapcache_slot_t *s = cw_heapcache__probe(c, pc, n, hash);
    s->hash = hash;
    s->n = n;
    s->off = c->nwords;
    memcpy(&c->words[c->nwords], pc, n * sizeof *pc);
    c->nwords += n;
    s->idx1 = ++c->nstacks;
    return s->idx1 - 1;
}

/* Forgets every stack (after the STACK_RESET record has its place). */
static inline void cw_heapcache_reset(cw_heapcache_t *c)
{
    memset(c->slot, 0, sizeof c->slot);
    c->nstacks = c->nwords = 0;
    c->resets++;
}

/* Claims the record of an event of thread (pid, tid) with the stack
 * pc[0 .. n), 0 < n <= CW_HEAPRING_FRAMES, in the ring h (seen_tail as
 * for cw_heapring_claim): one slot naming the stack's index when c knows
 * it; else the stack's definition (a new index, F_DEF, the frames in its
 * continuation slots), after a STACK_RESET record when c is full. c NULL
 * (no table could be had): every record defines its stack, as index 0.
 * The slot returned has pid, tid, stack, flags and the words set; the
 * caller fills the rest and publishes it. NULL when the ring has no room
 * (the event counted in `dropped`; c learns nothing) or is closed. */
static inline cw_heapring_slot_t *cw_heapcache_claim(cw_heapring_hdr_t *h, uint64_t *seen_tail,
                                                     cw_heapcache_t *c, uint32_t pid, uint32_t tid,
                                                     const uint64_t *pc, uint16_t n, bool truncated,
                                                     uint64_t *pos)
{
    uint64_t hash = cw_heapcache_hash(pc, n);
    int32_t idx = c ? cw_heapcache_find(c, pc, n, hash) : -1;
    cw_heapring_slot_t *r;
    if (idx >= 0) {
        r = cw_heapring_claim(h, seen_tail, 0, pos);
        if (!r) return NULL;
        r->stack = (uint32_t)idx;
        r->flags = 0;
    } else {
        if (c && !cw_heapcache_fits(c, n)) {
            uint64_t rpos;
            r = cw_heapring_claim(h, seen_tail, 0, &rpos);
            if (!r) return NULL; /* counted as this event's drop; the table stays */
            r->kind = CW_HEAPREC_STACK_RESET;
            r->flags = 0;
            r->stack = CW_HEAPRING_NOSTACK;
            r->pid = pid;
            r->tid = tid;
            r->ts = 0; /* not read */
            cw_heapring_publish(r, rpos);
            cw_heapcache_reset(c);
        }
        r = cw_heapring_claim(h, seen_tail, CW_HEAPRING_CONTS(n), pos);
        if (!r) return NULL;
        r->stack = c ? cw_heapcache_add(c, pc, n, hash) : 0;
        r->flags = (uint8_t)(CW_HEAPREC_F_DEF | (truncated ? CW_HEAPREC_F_TRUNCATED : 0));
        cw_heapring_put_words(h, *pos, pc, n);
    }
    r->pid = pid;
    r->tid = tid;
    return r;
}

#endif
