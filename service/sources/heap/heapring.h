/* heapring.h - the channel from the heap interposer to commitwatch: a
 * bounded ring of fixed-size records in memory both processes map.
 *
 * commitwatch creates the ring (a memfd the traced program inherits, its
 * number in CW_HEAP_RING_FD) and is its only reader; every thread of every
 * traced process writes to it. The layout below is the contract between
 * the two sides (both are built from this header, so no version skew).
 *
 * Writing: a writer claims the next slot by a compare-and-swap on `head`
 * (never past `tail` + nslots: when the ring is full it counts the event
 * in `dropped` and returns at once, so a slow reader never blocks the
 * program and nothing is lost silently), fills it, and publishes it by
 * storing the slot's sequence number (its position + 1) with release
 * order. Reading: the reader takes the slot at its position once its
 * sequence says it is published, copies it, and stores its position in
 * `tail` with release order (so a writer's acquire load of `tail` sees
 * the slot free only after the copy) every CW_HEAPRING_BATCH records and
 * whenever it finds nothing to read.
 *
 * Why `tail` moves in batches, and a writer keeps the last `tail` it
 * read (seen_tail) and reads it again only when that one says the ring is
 * full: a store to `tail` per record and a load per claim moved its cache
 * line between the two CPUs at every event, which was most of the
 * reader's time in cw_heapring_next (perf annotate). `tail` only grows,
 * so an old value only ever underestimates the room. The order of the
 * claims is the order of the events: a free
 * claims its slot before the block is given back, a realloc before it
 * calls the allocator, so a later allocation of the same address always
 * comes after it.
 *
 * A writer that dies between its claim and its publish (killed) leaves a
 * slot that is never published: the reader skips it once the writers are
 * gone and counts it as torn (cw_heapring_skip).
 *
 * Why a ring in shared memory: a pipe costs a system call per event (and
 * blocks, or drops by the byte, when full); the ring costs two atomic
 * operations. docs/DESIGN.md, "Heap drill-down", has the figures.
 *
 * Thread: writers any thread of the traced processes; the reader one
 * thread of commitwatch. */
#ifndef CW_SOURCES_HEAPRING_H
#define CW_SOURCES_HEAPRING_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#define CW_HEAPRING_MAGIC 0x31474e4952504843ull /* "CHPRING1" */
#define CW_HEAPRING_VERSION 1
#define CW_HEAPRING_FRAMES 57 /* return addresses a record holds */
#define CW_HEAPRING_HDR 4096  /* the header's bytes; the slots follow */
#define CW_HEAPRING_ENV "CW_HEAP_RING_FD"
#define CW_HEAPRING_BATCH 64 /* records the reader takes between its stores to tail */

/* What a record is: ALLOC, FREE and REALLOC are cw_heap_kind_t's values;
 * NONE a claimed slot whose call failed (nothing to apply); START a
 * process image's first record (at its interposer's attach: a program
 * started, an exec, a fork's child), which ends the pid's previous image. */
enum {
    CW_HEAPREC_NONE = 0,
    CW_HEAPREC_ALLOC = 1,
    CW_HEAPREC_FREE = 2,
    CW_HEAPREC_REALLOC = 3,
    CW_HEAPREC_START = 4
};

/* Which function made it (for the report's counts). */
enum {
    CW_HEAPFN_MALLOC = 0,
    CW_HEAPFN_CALLOC,
    CW_HEAPFN_REALLOC,
    CW_HEAPFN_REALLOCARRAY,
    CW_HEAPFN_FREE,
    CW_HEAPFN_POSIX_MEMALIGN,
    CW_HEAPFN_ALIGNED_ALLOC,
    CW_HEAPFN_MEMALIGN,
    CW_HEAPFN_VALLOC,
    CW_HEAPFN_PVALLOC,
    CW_HEAPFN__COUNT
};

/* One event. pc[0] is the innermost return address outside the
 * interposer (the allocating function's call), pc[nframes - 1] the
 * outermost kept; frees carry none. */
typedef struct cw_heapring_rec {
    _Atomic uint64_t seq; /* position + 1 once published */
    uint8_t kind, fn;
    uint16_t nframes;
    uint32_t tid;
    uint32_t pid;
    uint32_t truncated; /* 1: the stack had more frames than pc holds */
    int64_t ts;         /* CLOCK_REALTIME ns */
    uint64_t addr, size, old_addr;
    uint64_t pc[CW_HEAPRING_FRAMES];
} cw_heapring_rec_t;
_Static_assert(sizeof(cw_heapring_rec_t) == 512, "a record is 512 bytes");
/* A START record carries its image's name (its comm, at most this many
 * bytes, not NUL-terminated) in pc's bytes, the length in size, and in
 * nframes the words of pc it fills (what the reader copies). */
#define CW_HEAPRING_NAME_MAX 64

typedef struct cw_heapring_hdr {
    uint64_t magic;
    uint32_t version, rec_size;
    uint64_t nslots;           /* a power of two */
    _Atomic uint32_t closed;   /* set by the reader: writers record nothing more */
    _Atomic uint32_t attached; /* processes whose interposer mapped the ring */
    /* Writers' and reader's words on cache lines of their own. */
    _Alignas(64) _Atomic uint64_t head; /* next position to claim */
    _Alignas(64) _Atomic uint64_t tail; /* next position to read */
    _Alignas(64) _Atomic uint64_t dropped;
} cw_heapring_hdr_t;
_Static_assert(sizeof(cw_heapring_hdr_t) <= CW_HEAPRING_HDR, "the header fits its page");

static inline cw_heapring_rec_t *cw_heapring_slots(cw_heapring_hdr_t *h)
{
    return (cw_heapring_rec_t *)(void *)((char *)h + CW_HEAPRING_HDR);
}

/* Writer: claims a slot; NULL when the ring is full (the event counted
 * in `dropped`) or closed (not counted: tracing ended). *pos gets the
 * slot's position for cw_heapring_publish. seen_tail (NULL: none) is the
 * writer thread's own copy of `tail`, kept between calls for this ring
 * only; it is read again when it says the ring is full, or is ahead of
 * `head` (a copy from an earlier ring at the same address). */
static inline cw_heapring_rec_t *cw_heapring_claim(cw_heapring_hdr_t *h, uint64_t *seen_tail,
                                                   uint64_t *pos)
{
    if (atomic_load_explicit(&h->closed, memory_order_relaxed)) return NULL;
    uint64_t head = atomic_load_explicit(&h->head, memory_order_relaxed);
    uint64_t local = 0, *seen = seen_tail ? seen_tail : &local;
    if (!seen_tail) local = head + 1; /* forces the load */
    for (;;) {
        /* Unsigned: a copy ahead of head wraps to a huge difference. */
        if (head - *seen >= h->nslots) {
            *seen = atomic_load_explicit(&h->tail, memory_order_acquire);
            if (head - *seen >= h->nslots) {
                atomic_fetch_add_explicit(&h->dropped, 1, memory_order_relaxed);
                return NULL;
            }
        }
        if (atomic_compare_exchange_weak_explicit(&h->head, &head, head + 1, memory_order_relaxed,
                                                  memory_order_relaxed))
            break;
    }
    *pos = head;
    return &cw_heapring_slots(h)[head & (h->nslots - 1)];
}

static inline void cw_heapring_publish(cw_heapring_rec_t *r, uint64_t pos)
{
    atomic_store_explicit(&r->seq, pos + 1, memory_order_release);
}

/* The bytes a ring of nslots records takes. */
static inline size_t cw_heapring_bytes(uint64_t nslots)
{
    return CW_HEAPRING_HDR + (size_t)nslots * sizeof(cw_heapring_rec_t);
}

/* ---- the reader (heapring.c) ---- */

typedef struct cw_heapring {
    cw_heapring_hdr_t *h; /* borrowed: the caller maps and unmaps it */
    uint64_t torn;        /* slots skipped unpublished */
    uint64_t pos;         /* the next position to read; h->tail lags it by < CW_HEAPRING_BATCH */
} cw_heapring_t;

/* Lays out a ring of nslots (a power of two >= 2) in mem, which holds
 * cw_heapring_bytes(nslots) zeroed bytes. 0 or CW_EINVAL. */
int cw_heapring_init(cw_heapring_t *r, void *mem, uint64_t nslots);
/* Whether mem (len bytes) holds a ring of this layout: 0 or CW_EINVAL. */
int cw_heapring_check(const void *mem, size_t len);
/* Copies the next published record into *out and frees its slot (for the
 * writers at the batch's end): 1; 0 when the next slot is empty or not
 * published yet (every slot read is then free for the writers). */
int cw_heapring_next(cw_heapring_t *r, cw_heapring_rec_t *out);
/* Claimed slots not read yet (published or not). */
uint64_t cw_heapring_pending(const cw_heapring_t *r);
/* Skips the slot at the tail, claimed but never published (its writer is
 * gone), counting it in torn: 1; 0 when there is none. */
int cw_heapring_skip(cw_heapring_t *r);
/* Stops the writers (they count nothing more either). */
void cw_heapring_close(cw_heapring_t *r);
uint64_t cw_heapring_dropped(const cw_heapring_t *r);

#endif
