/* recpool.c - where the perf queue's records live: chunks of their own,
 * mapped from the kernel and given back when their records are all freed.
 *
 * Why not malloc. The queue takes tens of thousands of small records a
 * second (a syscall's sample with its stack: a few hundred bytes to 8 KiB)
 * and frees them a few milliseconds later. From malloc they came from the
 * main arena, between the longer-lived blocks that processing them
 * allocates (shadows, stacks, unwinder state): after a burst the freed
 * records were free heap pinned below live blocks, resident until the
 * sweep's malloc_trim and often after it (docs/RELIABILITY.md, "Soak").
 * Here records are cut in order from a chunk;
 * a chunk whose records are all freed is kept as the one spare or
 * unmapped, so the queue's resident memory follows what it holds.
 *
 * Records are freed roughly in the order they were cut (the queue is
 * processed in time order, and filled in time order across the rings), so
 * a chunk empties soon after the next one starts. A record that waits
 * longer (its ring cut at the queue's cap) keeps its chunk: memstat
 * counts mapped chunks, not records.
 *
 * Single-threaded: the perf source's core thread (perf.c) only. */
#define _GNU_SOURCE
#include <stdint.h>
#include <sys/mman.h>

#include "sources/perf/perf_types.h"

/* Under AddressSanitizer a chunk's bytes are poisoned but for the records
 * cut from it and not freed, so an overrun of a record or a use after its
 * free is reported as it was when records came from malloc. */
#ifdef CW_PERF__ASAN
#include <sanitizer/asan_interface.h>
#define POISON(p, n) ASAN_POISON_MEMORY_REGION((p), (n))
#define UNPOISON(p, n) ASAN_UNPOISON_MEMORY_REGION((p), (n))
#else
#define POISON(p, n) ((void)(p), (void)(n))
#define UNPOISON(p, n) ((void)(p), (void)(n))
#endif

struct cw_perf__chunk {
    size_t used; /* bytes cut from data, header included */
    size_t live; /* records cut and not freed */
};

/* Each record is preceded by its chunk's address (so free finds it) and
 * its size; 16 bytes, so records stay 16-byte aligned. */
typedef struct {
    cw_perf__chunk_t *chunk;
    size_t bytes;
} slot_t;

#define ALIGN_UP(n, a) (((n) + (a) - 1) & ~((size_t)(a) - 1))
#define DATA_OFF ALIGN_UP(sizeof(cw_perf__chunk_t), 16)

static cw_perf__chunk_t *chunk_map(cw_perf__recpool_t *p)
{
    cw_perf__chunk_t *c;
    if (p->spare) {
        c = p->spare;
        p->spare = NULL;
    } else {
        void *m = mmap(NULL, CW_PERF__CHUNK_BYTES, PROT_READ | PROT_WRITE,
                       MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        if (m == MAP_FAILED) return NULL;
        c = m;
        p->mapped++;
        if (p->mapped > p->peak) p->peak = p->mapped;
    }
    c->used = DATA_OFF;
    c->live = 0;
    POISON((uint8_t *)c + DATA_OFF, CW_PERF__CHUNK_BYTES - DATA_OFF);
    return c;
}

/* Gives c back to the kernel, its shadow unpoisoned first (a later
 * mapping at the same address must not inherit it). */
static void chunk_unmap(cw_perf__recpool_t *p, cw_perf__chunk_t *c)
{
    UNPOISON(c, CW_PERF__CHUNK_BYTES);
    munmap(c, CW_PERF__CHUNK_BYTES);
    p->mapped--;
}

/* c holds no record and is not the one records are cut from. */
static void chunk_release(cw_perf__recpool_t *p, cw_perf__chunk_t *c)
{
    if (!p->spare)
        p->spare = c;
    else
        chunk_unmap(p, c);
}

cw_perf__rec_t *cw_perf__recpool_alloc(cw_perf__recpool_t *p, size_t bytes)
{
    size_t need = ALIGN_UP(sizeof(slot_t) + bytes, 16);
    if (need > CW_PERF__CHUNK_BYTES - DATA_OFF) return NULL; /* not possible: REC_MAX < chunk */
    cw_perf__chunk_t *c = p->cur;
    if (!c || c->used + need > CW_PERF__CHUNK_BYTES) {
        /* A full current chunk still holds records (the free that empties
         * the current chunk cuts it again from its start): it is released
         * by the free of its last one. */
        if (!(c = chunk_map(p))) return NULL;
        p->cur = c;
    }
    slot_t *s = (slot_t *)((uint8_t *)c + c->used);
    c->used += need;
    c->live++;
    UNPOISON(s, sizeof *s + bytes);
    s->chunk = c;
    s->bytes = bytes;
    POISON(s, sizeof *s); /* the record's own bytes only */
    return (cw_perf__rec_t *)(s + 1);
}

void cw_perf__recpool_free(cw_perf__recpool_t *p, cw_perf__rec_t *r)
{
    if (!r) return;
    slot_t *s = (slot_t *)r - 1;
    UNPOISON(s, sizeof *s);
    cw_perf__chunk_t *c = s->chunk;
    POISON(s, sizeof *s + s->bytes);
    if (--c->live > 0) return;
    if (c == p->cur)
        c->used = DATA_OFF; /* empty: cut again from its start */
    else
        chunk_release(p, c);
}

size_t cw_perf__recpool_bytes(const cw_perf__recpool_t *p)
{
    return p->mapped * (size_t)CW_PERF__CHUNK_BYTES;
}

/* Unmaps every chunk. Records still cut from them are gone with them: the
 * caller frees its queue's records first (cw_perf__recpool_free), so that
 * the only chunks left are the current one and the spare. */
void cw_perf__recpool_destroy(cw_perf__recpool_t *p)
{
    if (p->cur) chunk_unmap(p, p->cur);
    if (p->spare) chunk_unmap(p, p->spare);
    p->cur = p->spare = NULL;
}
