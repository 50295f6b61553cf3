/* test_heap_ring.c - the heap interposer's ring (sources/heap/heapring.h,
 * heapring.c): records (a slot and its continuation slots) come out in
 * claim order with their fields and words, across the ring's wrap; a full
 * ring makes a writer wait while the reader reads (nothing dropped, however
 * slow the reader), and drops and counts once the reader has stalled,
 * then at once until it reads again, also a record that needs more slots
 * than are free; a ring closed while a writer waits lets it go, nothing
 * counted; an unpublished slot holds the reader until skipped (torn), and
 * the continuation slots of a torn record are passed over; a closed ring
 * takes nothing; the layout check refuses another layout; and writers on
 * several threads lose nothing. */
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "commitwatch/error.h"
#include "commitwatch/platform.h"
#include "sources/heap/heapring.h"
#include "test.h"

static void *ring_mem(uint64_t nslots)
{
    void *m = aligned_alloc(4096, (cw_heapring_bytes(nslots) + 4095) / 4096 * 4096);
    ASSERT_TRUE(m != NULL);
    memset(m, 0, cw_heapring_bytes(nslots));
    return m;
}

/* One event as the interposer writes it, with nwords words (addr + i);
 * 0 when it was dropped. */
static int put(cw_heapring_hdr_t *h, uint8_t kind, uint32_t tid, uint64_t addr, uint16_t nwords)
{
    static _Thread_local uint64_t seen_tail; /* as each interposer thread keeps it */
    uint64_t pos, w[CW_HEAPRING_FRAMES];
    cw_heapring_slot_t *r = cw_heapring_claim(h, &seen_tail, CW_HEAPRING_CONTS(nwords), &pos);
    if (!r) return 0;
    r->kind = kind;
    r->tid = tid;
    r->pid = 7;
    r->addr = addr;
    r->size = addr * 2;
    for (uint16_t i = 0; i < nwords; i++)
        w[i] = addr + i;
    cw_heapring_put_words(h, pos, w, nwords);
    cw_heapring_publish(r, pos);
    return 1;
}

static void test_order_full_torn(void)
{
    void *m = ring_mem(4);
    cw_heapring_t r;
    ASSERT_EQ(cw_heapring_init(&r, m, 3), CW_EINVAL);
    ASSERT_OK(cw_heapring_init(&r, m, 4));
    ASSERT_OK(cw_heapring_check(m, cw_heapring_bytes(4)));
    ASSERT_EQ(cw_heapring_check(m, cw_heapring_bytes(4) - 64), CW_EINVAL); /* too short */
    cw_heapring_rec_t out;
    ASSERT_EQ(cw_heapring_next(&r, &out), 0); /* empty */

    /* Fills, wraps around twice; a fifth event while four wait, with no
     * reader reading, is dropped (after the writer waited for it). */
    for (int lap = 0; lap < 3; lap++) {
        for (int i = 0; i < 4; i++)
            ASSERT_EQ(put(r.h, CW_HEAPREC_ALLOC, 1, 100 * (uint64_t)lap + (uint64_t)i, 0), 1);
        ASSERT_EQ(put(r.h, CW_HEAPREC_FREE, 1, 999, 0), 0);
        for (int i = 0; i < 4; i++) {
            ASSERT_EQ(cw_heapring_next(&r, &out), 1);
            ASSERT_U64_EQ(out.addr, 100 * (uint64_t)lap + (uint64_t)i);
            ASSERT_U64_EQ(out.size, 2 * out.addr);
            ASSERT_EQ(out.nwords, 0);
        }
        ASSERT_EQ(cw_heapring_next(&r, &out), 0);
    }
    ASSERT_U64_EQ(cw_heapring_dropped(&r), 3);
    free(m);

    /* Records of several slots, wrapping: 16 slots, records of 1 + 2
     * slots (8 - 14 words), the ring's position moving past its end. */
    m = ring_mem(16);
    ASSERT_OK(cw_heapring_init(&r, m, 16));
    for (int lap = 0; lap < 10; lap++) {
        uint16_t nw = (uint16_t)(8 + lap % 7);
        ASSERT_EQ(put(r.h, CW_HEAPREC_ALLOC, 1, 1000 * (uint64_t)lap, nw), 1);
        ASSERT_EQ(put(r.h, CW_HEAPREC_FREE, 1, 1000 * (uint64_t)lap + 1, 0), 1);
        ASSERT_EQ(cw_heapring_next(&r, &out), 1);
        ASSERT_U64_EQ(out.addr, 1000 * (uint64_t)lap);
        ASSERT_EQ(out.nwords, nw);
        for (int k = 0; k < nw; k++)
            ASSERT_U64_EQ(out.w[k], out.addr + (uint64_t)k);
        ASSERT_EQ(cw_heapring_next(&r, &out), 1);
        ASSERT_U64_EQ(out.addr, 1000 * (uint64_t)lap + 1);
        ASSERT_EQ(out.nwords, 0);
        ASSERT_EQ(cw_heapring_next(&r, &out), 0); /* gives the slots back */
    }
    /* A record of 1 + 9 slots does not fit beside 8 waiting: dropped and
     * counted, while a one-slot event still fits. */
    for (int i = 0; i < 8; i++)
        ASSERT_EQ(put(r.h, CW_HEAPREC_FREE, 1, (uint64_t)i, 0), 1);
    ASSERT_EQ(put(r.h, CW_HEAPREC_ALLOC, 1, 77, CW_HEAPRING_FRAMES), 0);
    ASSERT_U64_EQ(cw_heapring_dropped(&r), 1);
    ASSERT_EQ(put(r.h, CW_HEAPREC_FREE, 1, 8, 0), 1);
    for (int i = 0; i < 9; i++) {
        ASSERT_EQ(cw_heapring_next(&r, &out), 1);
        ASSERT_U64_EQ(out.addr, (uint64_t)i);
    }
    ASSERT_EQ(cw_heapring_next(&r, &out), 0);
    ASSERT_EQ(put(r.h, CW_HEAPREC_ALLOC, 1, 77, CW_HEAPRING_FRAMES), 1);
    ASSERT_EQ(cw_heapring_next(&r, &out), 1);
    ASSERT_EQ(out.nwords, CW_HEAPRING_FRAMES);
    ASSERT_U64_EQ(out.w[CW_HEAPRING_FRAMES - 1], 77 + CW_HEAPRING_FRAMES - 1);

    /* A record whose continuation slots were written but whose first
     * slot never was (its writer killed): skipped once as torn, its
     * continuation slots passed over, the next record read. */
    {
        uint64_t pos, w[10] = {0};
        ASSERT_TRUE(cw_heapring_claim(r.h, NULL, 2, &pos) != NULL);
        cw_heapring_put_words(r.h, pos, w, 10);
        ASSERT_EQ(put(r.h, CW_HEAPREC_FREE, 3, 55, 0), 1);
        ASSERT_EQ(cw_heapring_next(&r, &out), 0);
        ASSERT_EQ(cw_heapring_skip(&r), 1);
        ASSERT_EQ(cw_heapring_next(&r, &out), 1);
        ASSERT_U64_EQ(out.addr, 55);
        ASSERT_U64_EQ(r.torn, 1);
        r.torn = 0;
    }

    /* A claimed slot never published holds up the ones after it. */
    uint64_t pos;
    ASSERT_TRUE(cw_heapring_claim(r.h, NULL, 0, &pos) != NULL);
    ASSERT_EQ(put(r.h, CW_HEAPREC_ALLOC, 2, 5, 1), 1);
    ASSERT_EQ(cw_heapring_next(&r, &out), 0);
    ASSERT_U64_EQ(cw_heapring_pending(&r), 3); /* the claimed slot, the record's two */
    ASSERT_EQ(cw_heapring_skip(&r), 1);
    ASSERT_U64_EQ(r.torn, 1);
    ASSERT_EQ(cw_heapring_next(&r, &out), 1);
    ASSERT_U64_EQ(out.addr, 5);
    ASSERT_EQ(cw_heapring_skip(&r), 0); /* nothing left */

    /* Closed: nothing claimed, nothing counted. */
    cw_heapring_close(&r);
    ASSERT_EQ(put(r.h, CW_HEAPREC_ALLOC, 1, 1, 0), 0);
    ASSERT_U64_EQ(cw_heapring_dropped(&r), 1);

    /* Another layout is refused. */
    ASSERT_OK(cw_heapring_check(m, cw_heapring_bytes(16)));
    r.h->rec_size = 512;
    ASSERT_EQ(cw_heapring_check(m, cw_heapring_bytes(16)), CW_EINVAL);
    free(m);
}

/* A writer on a thread of its own: count events, 1 to count, of thread
 * id, with (words) i % 20 words each, or none. */
typedef struct writer {
    cw_heapring_hdr_t *h;
    uint32_t id;
    uint64_t count;
    bool words;
    uint64_t written;
    _Atomic int done;
} writer_t;

static void *write_events(void *arg)
{
    writer_t *w = arg;
    for (uint64_t i = 1; i <= w->count; i++)
        w->written +=
            (uint64_t)put(w->h, CW_HEAPREC_ALLOC, w->id, i, w->words ? (uint16_t)(i % 20) : 0);
    atomic_store(&w->done, 1);
    return NULL;
}

/* A ring of nslots, full: events 1 to nslots, one slot each, not read. */
static void *full_ring(cw_heapring_t *r, uint64_t nslots)
{
    void *m = ring_mem(nslots);
    ASSERT_OK(cw_heapring_init(r, m, nslots));
    for (uint64_t i = 1; i <= nslots; i++)
        ASSERT_EQ(put(r->h, CW_HEAPREC_ALLOC, 1, i, 0), 1);
    return m;
}

/* A full ring and a reader that reads slowly: the writer waits for it,
 * nothing is dropped, every event comes out in order. */
static void test_waits_for_reader(void)
{
    void *m = ring_mem(64);
    cw_heapring_t r;
    ASSERT_OK(cw_heapring_init(&r, m, 64));
    writer_t w = {.h = r.h, .id = 1, .count = 64 * 20};
    pthread_t t;
    ASSERT_EQ(pthread_create(&t, NULL, write_events, &w), 0);
    cw_heapring_rec_t out;
    uint64_t got = 0, last = 0;
    bool ordered = true;
    struct timespec ms = {0, 1000000};
    for (int n = 16; n == 16 || !atomic_load(&w.done);) {
        n = 0;
        while (n < 16 && cw_heapring_next(&r, &out)) { /* 16 records a millisecond at most */
            ordered &= out.addr > last;
            last = out.addr;
            got++, n++;
        }
        if (n < 16) cw_heapring_next(&r, &out); /* gives the slots back */
        nanosleep(&ms, NULL);
    }
    while (cw_heapring_next(&r, &out))
        got++;
    pthread_join(t, NULL);
    ASSERT_TRUE(ordered);
    ASSERT_U64_EQ(got, w.written);
    ASSERT_U64_EQ(cw_heapring_dropped(&r), 0);
    ASSERT_U64_EQ(w.written, w.count);
    free(m);
}

/* A reader that reads nothing: the writer that finds the ring full waits
 * CW_HEAPRING_STALL_NAPS naps, then drops; the next ones drop at once;
 * once the reader reads, writers wait for it again. */
static void test_stalled_reader(void)
{
    cw_heapring_t r;
    void *m = full_ring(&r, 8);
    int64_t t0 = cw_plat_mono_ns();
    ASSERT_EQ(put(r.h, CW_HEAPREC_ALLOC, 1, 9, 0), 0);
    int64_t waited = cw_plat_mono_ns() - t0;
    ASSERT_TRUE(waited >= (int64_t)CW_HEAPRING_STALL_NAPS * CW_HEAPRING_NAP_NS);
    ASSERT_U64_EQ(cw_heapring_dropped(&r), 1);
    t0 = cw_plat_mono_ns();
    for (int i = 0; i < 5; i++)
        ASSERT_EQ(put(r.h, CW_HEAPREC_ALLOC, 1, 10, 0), 0);
    ASSERT_TRUE(cw_plat_mono_ns() - t0 < waited / 2); /* not another wait each */
    ASSERT_U64_EQ(cw_heapring_dropped(&r), 6);
    /* The reader takes every record: the tail moves, room again. */
    cw_heapring_rec_t out;
    for (uint64_t i = 1; i <= 8; i++) {
        ASSERT_EQ(cw_heapring_next(&r, &out), 1);
        ASSERT_U64_EQ(out.addr, i);
    }
    ASSERT_EQ(cw_heapring_next(&r, &out), 0);
    for (uint64_t i = 11; i <= 18; i++)
        ASSERT_EQ(put(r.h, CW_HEAPREC_ALLOC, 1, i, 0), 1);
    /* Full again at another tail, a reader that reads slowly: the writer
     * waits for it (the mark of the stall before does not hold). */
    writer_t w = {.h = r.h, .id = 1, .count = 8};
    pthread_t t;
    ASSERT_EQ(pthread_create(&t, NULL, write_events, &w), 0);
    struct timespec nap = {0, 20000000};
    nanosleep(&nap, NULL);
    while (!atomic_load(&w.done) || cw_heapring_pending(&r)) {
        if (!cw_heapring_next(&r, &out)) nanosleep(&nap, NULL);
    }
    pthread_join(t, NULL);
    ASSERT_U64_EQ(w.written, 8);
    ASSERT_U64_EQ(cw_heapring_dropped(&r), 6);
    free(m);
}

static void *close_later(void *arg)
{
    struct timespec nap = {0, 30000000};
    nanosleep(&nap, NULL);
    cw_heapring_close(arg);
    return NULL;
}

/* Tracing ends (the ring closed) while a writer waits: it goes on at
 * once, nothing counted. */
static void test_closed_while_waiting(void)
{
    cw_heapring_t r;
    void *m = full_ring(&r, 4);
    pthread_t t;
    ASSERT_EQ(pthread_create(&t, NULL, close_later, &r), 0);
    int64_t t0 = cw_plat_mono_ns();
    ASSERT_EQ(put(r.h, CW_HEAPREC_ALLOC, 1, 5, 0), 0);
    ASSERT_TRUE(cw_plat_mono_ns() - t0 < (int64_t)CW_HEAPRING_STALL_NAPS * CW_HEAPRING_NAP_NS);
    pthread_join(t, NULL);
    ASSERT_U64_EQ(cw_heapring_dropped(&r), 0);
    free(m);
}

/* Writers on threads, the reader here: each writer's events come out in
 * its own order, and nothing is dropped (the writers wait). */
#define WRITERS 3
#define PER_WRITER 20000

static void test_threads(void)
{
    void *m = ring_mem(64);
    cw_heapring_t r;
    ASSERT_OK(cw_heapring_init(&r, m, 64));
    pthread_t t[WRITERS];
    writer_t w[WRITERS];
    for (uint32_t i = 0; i < WRITERS; i++) {
        w[i] = (writer_t){.h = r.h, .id = i, .count = PER_WRITER, .words = true};
        ASSERT_EQ(pthread_create(&t[i], NULL, write_events, &w[i]), 0);
    }
    uint64_t last[WRITERS] = {0}, read = 0;
    bool ordered = true;
    int done = 0;
    cw_heapring_rec_t out;
    /* Nothing to read: a nap, as the service's reader takes (a reader
     * spinning instead held valgrind's one running thread while the
     * writers it waited for napped, for tens of minutes). */
    struct timespec nap = {0, 50000};
    while (done < 2) { /* one more pass after the writers are joined */
        if (!cw_heapring_pending(&r)) nanosleep(&nap, NULL);
        while (cw_heapring_next(&r, &out)) {
            ASSERT_TRUE(out.tid < WRITERS);
            ordered &= out.addr > last[out.tid] && out.nwords == out.addr % 20 &&
                       (out.nwords == 0 || out.w[out.nwords - 1] == out.addr + out.nwords - 1);
            last[out.tid] = out.addr;
            read++;
        }
        if (done == 0 && read + cw_heapring_dropped(&r) >= (uint64_t)WRITERS * PER_WRITER) {
            for (int i = 0; i < WRITERS; i++)
                pthread_join(t[i], NULL);
            done = 1;
        } else if (done == 1) {
            done = 2;
        }
    }
    ASSERT_TRUE(ordered);
    uint64_t written = 0;
    for (int i = 0; i < WRITERS; i++)
        written += w[i].written;
    ASSERT_U64_EQ(read, written);
    ASSERT_U64_EQ(read, (uint64_t)WRITERS * PER_WRITER);
    ASSERT_U64_EQ(cw_heapring_dropped(&r), 0);
    ASSERT_U64_EQ(cw_heapring_pending(&r), 0);
    free(m);
}

int main(void)
{
    test_order_full_torn();
    test_waits_for_reader();
    test_stalled_reader();
    test_closed_while_waiting();
    test_threads();
    TEST_DONE();
}
