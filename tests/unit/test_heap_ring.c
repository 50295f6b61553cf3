/* test_heap_ring.c - the heap interposer's ring (sources/heap/heapring.h,
 * heapring.c): records (a slot and its continuation slots) come out in
 * claim order with their fields and words, across the ring's wrap; a full
 * ring drops and counts, never blocks, also a record that needs more
 * slots than are free; an unpublished slot holds the reader until skipped
 * (torn), and the continuation slots of a torn record are passed over; a
 * closed ring takes nothing;
 * the layout check refuses another layout; and writers on several
 * threads lose nothing that is not counted. */
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "commitwatch/error.h"
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

    /* Fills, wraps around twice; a fifth event while four wait is dropped. */
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

/* Writers on threads, the reader here: each writer's events come out in
 * its own order, and read + dropped = written. */
#define WRITERS 3
#define PER_WRITER 20000

typedef struct writer {
    cw_heapring_hdr_t *h;
    uint32_t id;
    uint64_t written;
} writer_t;

static void *write_events(void *arg)
{
    writer_t *w = arg;
    for (uint64_t i = 1; i <= PER_WRITER; i++)
        w->written += (uint64_t)put(w->h, CW_HEAPREC_ALLOC, w->id, i, (uint16_t)(i % 20));
    return NULL;
}

static void test_threads(void)
{
    void *m = ring_mem(64);
    cw_heapring_t r;
    ASSERT_OK(cw_heapring_init(&r, m, 64));
    pthread_t t[WRITERS];
    writer_t w[WRITERS];
    for (uint32_t i = 0; i < WRITERS; i++) {
        w[i] = (writer_t){r.h, i, 0};
        ASSERT_EQ(pthread_create(&t[i], NULL, write_events, &w[i]), 0);
    }
    uint64_t last[WRITERS] = {0}, read = 0;
    bool ordered = true;
    int done = 0;
    cw_heapring_rec_t out;
    while (done < 2) { /* one more pass after the writers are joined */
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
    ASSERT_U64_EQ(read + cw_heapring_dropped(&r), (uint64_t)WRITERS * PER_WRITER);
    ASSERT_U64_EQ(cw_heapring_pending(&r), 0);
    free(m);
}

int main(void)
{
    test_order_full_torn();
    test_threads();
    TEST_DONE();
}
