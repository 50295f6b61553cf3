/* heapring.h - the channel from the heap interposer to commitwatch: a
 * bounded ring of 64-byte slots in memory both processes map.
 *
 * commitwatch creates the ring (a memfd the traced program inherits, its
 * number in CW_HEAP_RING_FD) and is its only reader; every thread of every
 * traced process writes to it. The layout below is the contract between
 * the two sides (both are built from this header, so no version skew).
 *
 * A record is one slot (an event whose stack its thread has sent before:
 * the stack is an index, heapcache.h) or one slot and up to 9
 * continuation slots (an event that defines its stack, with its frames;
 * a START record with its name). Why: a 512-byte record with room for
 * every frame made writing the ring 17 % of the traced program's time
 * (perf record), for stacks that repeat.
 *
 * Writing: a writer claims a record's slots by a compare-and-swap on
 * `head` (never past `tail` + nslots: when the ring has no room it waits,
 * napping, until the reader has taken half of it, as a program traced
 * through a pipe waits for its reader; when the reader has not moved
 * `tail` for CW_HEAPRING_STALL_NAPS naps (stopped, hung, gone) it counts
 * the event in `dropped`, marks that tail `stalled`, and every writer
 * then drops at once until the tail moves: a stalled reader never
 * blocks the program for long, and nothing is lost silently), fills
 * them, and publishes the record by storing its first slot's sequence
 * number (its position + 1) with release order. Reading: the reader takes the record
 * at its position once its sequence says it is published, copies it, and
 * stores its position in `tail` with release order (so a writer's acquire
 * load of `tail` sees the slots free only after the copy) every
 * CW_HEAPRING_BATCH slots and whenever it finds nothing to read.
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
 * A writer that dies between its claim and its publish (killed) leaves
 * slots that are never published: the reader skips it once the writers are
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
#include <time.h>

#define CW_HEAPRING_MAGIC 0x31474e4952504843ull /* "CHPRING1" */
#define CW_HEAPRING_VERSION 3
#define CW_HEAPRING_FRAMES 57 /* return addresses an event's stack holds at most */
#define CW_HEAPRING_HDR 4096  /* the header's bytes; the slots follow */
#define CW_HEAPRING_ENV "CW_HEAP_RING_FD"
#define CW_HEAPRING_BATCH 64 /* slots the reader takes between its stores to tail */
#define CW_HEAPRING_AHEAD 8  /* slots ahead of its claim a writer prefetches */
#define CW_HEAPRING_WORDS 7  /* words a continuation slot carries */
/* A writer's nap while the ring is full (100 us), and the naps without
 * the tail moving after which the reader is taken as stalled (0.1 s or
 * more). */
#define CW_HEAPRING_NAP_NS 100000
#define CW_HEAPRING_STALL_NAPS 1000
/* The continuation slots a record of n words (frames, a name) needs. */
#define CW_HEAPRING_CONTS(n) (((n) + CW_HEAPRING_WORDS - 1) / CW_HEAPRING_WORDS)
/* A continuation slot's seq: its position + 1 with this bit, so it is
 * never taken for a record's first slot. */
#define CW_HEAPRING_CONT_BIT (1ull << 63)
/* stack: the event carries no stack (a free; an allocation made before
 * the interposer could unwind). */
#define CW_HEAPRING_NOSTACK UINT32_MAX

/* What a record is: ALLOC, FREE and REALLOC are cw_heap_kind_t's values;
 * NONE a claimed slot whose call failed (nothing to apply); START a
 * process image's first record (at its interposer's attach: a program
 * started, an exec, a fork's child), which ends the pid's previous image;
 * STACK_RESET: the thread's stack table (heapcache.h) was full and starts
 * again at index 0, so the reader forgets the thread's stacks;
 * THREAD_END: the thread ended, the same for the reader. */
enum {
    CW_HEAPREC_NONE = 0,
    CW_HEAPREC_ALLOC = 1,
    CW_HEAPREC_FREE = 2,
    CW_HEAPREC_REALLOC = 3,
    CW_HEAPREC_START = 4,
    CW_HEAPREC_STACK_RESET = 5,
    CW_HEAPREC_THREAD_END = 6
};

/* A record's flags. */
enum {
    CW_HEAPREC_F_DEF = 1,      /* defines `stack`: its frames follow in the continuation slots */
    CW_HEAPREC_F_TRUNCATED = 2 /* (with DEF) the stack had more frames than it holds */
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

/* One slot: a record's first slot (one cache line), followed by `conts`
 * continuation slots (cw_heapring_cont_t) when it carries words: a stack
 * definition's frames, a START record's name. An event whose stack the
 * thread has sent before is one slot: its stack is an index into the
 * thread's table (heapcache.h), defined by an earlier record of the same
 * thread (F_DEF), which the ring's order puts before it. */
typedef struct cw_heapring_slot {
    _Atomic uint64_t seq; /* position + 1 once published */
    uint8_t kind, fn;
    uint8_t conts;   /* continuation slots that follow */
    uint8_t flags;   /* CW_HEAPREC_F_* */
    uint32_t tid;
    uint32_t pid;
    uint32_t stack;  /* index in the thread's stack table, or CW_HEAPRING_NOSTACK */
    int64_t ts;      /* CLOCK_REALTIME_COARSE ns: a tick's resolution (docs/DESIGN.md) */
    uint64_t addr, size, old_addr;
    uint16_t nwords; /* words in the continuation slots */
    uint16_t pad[3];
} cw_heapring_slot_t;
_Static_assert(sizeof(cw_heapring_slot_t) == 64, "a slot is one cache line");

typedef struct cw_heapring_cont {
    _Atomic uint64_t seq; /* (position + 1) | CW_HEAPRING_CONT_BIT */
    uint64_t w[CW_HEAPRING_WORDS];
} cw_heapring_cont_t;
_Static_assert(sizeof(cw_heapring_cont_t) == 64, "a continuation is one slot");

/* A START record carries its image's name (its comm, at most this many
 * bytes, not NUL-terminated) in its words, the length in size. */
#define CW_HEAPRING_NAME_MAX 64

typedef struct cw_heapring_hdr {
    uint64_t magic;
    uint32_t version, rec_size; /* rec_size: a slot's bytes */
    uint64_t nslots;           /* a power of two */
    _Atomic uint32_t closed;   /* set by the reader: writers record nothing more */
    _Atomic uint32_t attached; /* processes whose interposer mapped the ring */
    /* Writers' and reader's words on cache lines of their own. */
    _Alignas(64) _Atomic uint64_t head; /* next position to claim */
    _Alignas(64) _Atomic uint64_t tail; /* next position to read */
    _Alignas(64) _Atomic uint64_t dropped;
    _Atomic uint64_t stalled; /* 1 + the tail at which a writer found the reader stalled */
} cw_heapring_hdr_t;
_Static_assert(sizeof(cw_heapring_hdr_t) <= CW_HEAPRING_HDR, "the header fits its page");

static inline cw_heapring_slot_t *cw_heapring_slots(cw_heapring_hdr_t *h)
{
    return (cw_heapring_slot_t *)(void *)((char *)h + CW_HEAPRING_HDR);
}

/* Writer: the ring had no room for need slots with the tail at *seen.
 * Waits for the reader to take half of the ring (and room for need)
 * while it moves the tail; 1 when there is room now (*seen the tail
 * read), 0 when the reader stalled (the tail marked `stalled`, or found
 * marked) or the ring was closed. */
static inline int cw_heapring__wait(cw_heapring_hdr_t *h, uint64_t *seen, uint64_t need)
{
    uint64_t want = h->nslots - need < h->nslots / 2 ? h->nslots - need : h->nslots / 2;
    uint64_t tail = *seen;
    if (atomic_load_explicit(&h->stalled, memory_order_relaxed) == tail + 1) return 0;
    struct timespec nap = {0, CW_HEAPRING_NAP_NS};
    for (unsigned still = 0;;) {
        if (atomic_load_explicit(&h->closed, memory_order_relaxed)) return 0;
        nanosleep(&nap, NULL);
        uint64_t t = atomic_load_explicit(&h->tail, memory_order_acquire);
        if (t != tail) tail = t, still = 0;
        *seen = tail;
        if (atomic_load_explicit(&h->head, memory_order_relaxed) - tail <= want) return 1;
        if (++still == CW_HEAPRING_STALL_NAPS) {
            atomic_store_explicit(&h->stalled, tail + 1, memory_order_relaxed);
            return 0;
        }
    }
}

/* Writer: claims 1 + conts consecutive slots (conts <= 255), waiting
 * while the ring is full and its reader reads (cw_heapring__wait); NULL
 * when the reader stalled with no room (the event counted in `dropped`)
 * or the ring is closed (not counted: tracing ended). *pos gets the
 * first slot's position for cw_heapring_put_words and
 * cw_heapring_publish. seen_tail (NULL: none) is the writer thread's own
 * copy of `tail`, kept between calls for this ring only; it is read again
 * when it says the ring is full, or is ahead of `head` (a copy from an
 * earlier ring at the same address). */
static inline cw_heapring_slot_t *cw_heapring_claim(cw_heapring_hdr_t *h, uint64_t *seen_tail,
                                                    unsigned conts, uint64_t *pos)
{
    if (atomic_load_explicit(&h->closed, memory_order_relaxed)) return NULL;
    uint64_t head = atomic_load_explicit(&h->head, memory_order_relaxed);
    uint64_t local = 0, *seen = seen_tail ? seen_tail : &local;
    uint64_t need = 1 + (uint64_t)conts;
    if (!seen_tail) local = head + 1; /* forces the load */
    for (;;) {
        /* Unsigned: a copy ahead of head wraps to a huge difference. */
        if (head - *seen > h->nslots - need) {
            *seen = atomic_load_explicit(&h->tail, memory_order_acquire);
            if (head - *seen > h->nslots - need) {
                if (!cw_heapring__wait(h, seen, need)) {
                    if (atomic_load_explicit(&h->closed, memory_order_relaxed)) return NULL;
                    atomic_fetch_add_explicit(&h->dropped, 1, memory_order_relaxed);
                    return NULL;
                }
                head = atomic_load_explicit(&h->head, memory_order_relaxed);
                continue;
            }
        }
        if (atomic_compare_exchange_weak_explicit(&h->head, &head, head + need,
                                                  memory_order_relaxed, memory_order_relaxed))
            break;
    }
    *pos = head;
    cw_heapring_slot_t *slots = cw_heapring_slots(h), *s = &slots[head & (h->nslots - 1)];
    /* The line a few records on, asked for now to be written: the ring is
     * larger than the caches, so a slot's line is not in this CPU's when
     * it is claimed, and the wait for it stalled the next locked claim
     * (perf annotate). */
    __builtin_prefetch(&slots[(head + need + CW_HEAPRING_AHEAD) & (h->nslots - 1)], 1);
    s->conts = (uint8_t)conts;
    s->nwords = 0;
    return s;
}

/* Writer: fills the continuation slots of the record claimed at pos with
 * n words (n <= its conts * CW_HEAPRING_WORDS), before its publish. */
static inline void cw_heapring_put_words(cw_heapring_hdr_t *h, uint64_t pos, const uint64_t *w,
                                         uint16_t n)
{
    cw_heapring_slot_t *slots = cw_heapring_slots(h);
    uint64_t mask = h->nslots - 1;
    slots[pos & mask].nwords = n;
    for (uint64_t c = 1; n; c++) {
        cw_heapring_cont_t *k = (cw_heapring_cont_t *)(void *)&slots[(pos + c) & mask];
        uint16_t take = n < CW_HEAPRING_WORDS ? n : CW_HEAPRING_WORDS;
        for (uint16_t i = 0; i < take; i++)
            k->w[i] = w[i];
        atomic_store_explicit(&k->seq, (pos + c + 1) | CW_HEAPRING_CONT_BIT, memory_order_relaxed);
        w += take;
        n = (uint16_t)(n - take);
    }
}

/* Writer: publishes the record (its continuation slots with it: the
 * reader's acquire of this seq sees them). */
static inline void cw_heapring_publish(cw_heapring_slot_t *r, uint64_t pos)
{
    atomic_store_explicit(&r->seq, pos + 1, memory_order_release);
}

/* The bytes a ring of nslots slots takes. */
static inline size_t cw_heapring_bytes(uint64_t nslots)
{
    return CW_HEAPRING_HDR + (size_t)nslots * sizeof(cw_heapring_slot_t);
}

/* ---- the reader (heapring.c) ---- */

/* A record as the reader copies it out: the first slot's fields and the
 * words of its continuation slots. */
typedef struct cw_heapring_rec {
    uint8_t kind, fn, flags;
    uint16_t nwords; /* in w: a definition's frames (innermost first), a START's name */
    uint32_t tid, pid, stack;
    int64_t ts;
    uint64_t addr, size, old_addr;
    uint64_t w[CW_HEAPRING_CONTS(CW_HEAPRING_FRAMES) * CW_HEAPRING_WORDS];
} cw_heapring_rec_t;

typedef struct cw_heapring {
    cw_heapring_hdr_t *h; /* borrowed: the caller maps and unmaps it */
    uint64_t torn;        /* slots skipped unpublished */
    uint64_t pos;         /* the next position to read */
    uint64_t given;       /* the last position stored in h->tail (lags pos by < BATCH slots) */
} cw_heapring_t;

/* Lays out a ring of nslots (a power of two >= 2) in mem, which holds
 * cw_heapring_bytes(nslots) zeroed bytes. 0 or CW_EINVAL. */
int cw_heapring_init(cw_heapring_t *r, void *mem, uint64_t nslots);
/* Whether mem (len bytes) holds a ring of this layout: 0 or CW_EINVAL. */
int cw_heapring_check(const void *mem, size_t len);
/* Copies the next published record into *out and frees its slots (for
 * the writers at the batch's end): 1; 0 when the next slot is empty or
 * not published yet (every slot read is then free for the writers). A
 * continuation slot at the reader's position (its first slot was skipped
 * as torn) is passed over. */
int cw_heapring_next(cw_heapring_t *r, cw_heapring_rec_t *out);
/* Claimed slots not read yet (published or not). */
uint64_t cw_heapring_pending(const cw_heapring_t *r);
/* Skips the slot at the tail, claimed but never published (its writer is
 * gone), counting it in torn: 1; 0 when there is none. A record of
 * several slots killed before its continuation slots were written counts
 * once per slot. */
int cw_heapring_skip(cw_heapring_t *r);
/* Stops the writers (they count nothing more either). */
void cw_heapring_close(cw_heapring_t *r);
uint64_t cw_heapring_dropped(const cw_heapring_t *r);

#endif
