/* test_heap_stacks.c - the heap interposer's stack-cache protocol: the
 * writer's per-thread table (sources/heap/heapcache.h, the code the
 * interposer runs) through a real ring (heapring.h) to the reader's
 * per-thread tables (heapstacks.h). A stack's first record defines it
 * (its frames and a new index), later ones carry the index alone in one
 * slot; threads' indices are their own; a full table is reset with a
 * record the reader follows; a dropped definition is not learnt; a START
 * forgets a process's stacks; an index the reader was never sent is
 * counted, not guessed and not a crash. */
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "commitwatch/error.h"
#include "sources/heap/heapcache.h"
#include "sources/heap/heapring.h"
#include "sources/heap/heapstacks.h"
#include "test.h"

#define SLOTS 64

typedef struct side {
    cw_heapring_t ring;
    void *mem;
    cw_heapstacks_t *reader;
    uint64_t seen_tail; /* the writer thread's copy of the tail */
} side_t;

static void side_open(side_t *s, uint64_t nslots)
{
    memset(s, 0, sizeof *s);
    s->mem = calloc(1, cw_heapring_bytes(nslots));
    ASSERT_TRUE(s->mem != NULL);
    ASSERT_OK(cw_heapring_init(&s->ring, s->mem, nslots));
    ASSERT_OK(cw_heapstacks_create(&s->reader));
}

static void side_close(side_t *s)
{
    cw_heapstacks_destroy(s->reader);
    free(s->mem);
}

static cw_heapcache_t *cache_new(void)
{
    cw_heapcache_t *c = calloc(1, sizeof *c);
    ASSERT_TRUE(c != NULL);
    return c;
}

/* A stack of n frames that differs from every other by its seed. */
static void stack_of(uint64_t seed, uint64_t *pc, uint16_t n)
{
    for (uint16_t i = 0; i < n; i++)
        pc[i] = 0x400000 + seed * 0x1000 + i * 8;
}

/* The interposer's allocation event: 1 written, 0 dropped. *slots gets
 * the slots its record took (the reset's included). */
static int write_alloc(side_t *s, cw_heapcache_t *c, uint32_t tid, uint64_t addr,
                       const uint64_t *pc, uint16_t n, uint64_t *slots)
{
    uint64_t head0 = atomic_load(&s->ring.h->head), pos;
    cw_heapring_slot_t *r =
        cw_heapcache_claim(s->ring.h, &s->seen_tail, c, 9, tid, pc, n, false, &pos);
    if (slots) *slots = atomic_load(&s->ring.h->head) - head0;
    if (!r) return 0;
    r->kind = CW_HEAPREC_ALLOC;
    r->addr = addr;
    r->size = 16;
    cw_heapring_publish(r, pos);
    return 1;
}

/* Reads one record and takes it: its stack entry (NULL: none or
 * unknown). */
static cw_heapstk_t *read_one(side_t *s, cw_heapring_rec_t *rec, bool *unknown)
{
    ASSERT_EQ(cw_heapring_next(&s->ring, rec), 1);
    cw_heapstk_t *e;
    ASSERT_OK(cw_heapstacks_take(s->reader, rec, &e, unknown));
    return e;
}

/* Reads one allocation record and checks its stack is pc[0 .. n). */
static void expect_stack(side_t *s, uint64_t addr, const uint64_t *pc, uint16_t n, bool def)
{
    cw_heapring_rec_t rec;
    bool unknown;
    cw_heapstk_t *e = read_one(s, &rec, &unknown);
    ASSERT_EQ(rec.kind, CW_HEAPREC_ALLOC);
    ASSERT_U64_EQ(rec.addr, addr);
    ASSERT_EQ((rec.flags & CW_HEAPREC_F_DEF) != 0, def);
    ASSERT_EQ(rec.nwords, def ? n : 0);
    ASSERT_TRUE(!unknown);
    ASSERT_TRUE(e != NULL);
    ASSERT_EQ(e->n, n);
    ASSERT_TRUE(memcmp(e->pc, pc, n * sizeof *pc) == 0);
}

/* Definition, then the index alone; two threads' indices apart; a stack
 * that differs in one frame or only in depth is another stack. */
static void test_define_then_index(void)
{
    side_t s;
    side_open(&s, SLOTS);
    cw_heapcache_t *c1 = cache_new(), *c2 = cache_new();
    uint64_t a[20], b[20], a_short[19], slots;
    stack_of(1, a, 20);
    stack_of(1, b, 20);
    b[19] ^= 8; /* the outermost frame differs */
    memcpy(a_short, a, sizeof a_short);

    ASSERT_EQ(write_alloc(&s, c1, 100, 1, a, 20, &slots), 1);
    ASSERT_U64_EQ(slots, 1 + CW_HEAPRING_CONTS(20)); /* a definition: the frames follow */
    ASSERT_EQ(write_alloc(&s, c1, 100, 2, a, 20, &slots), 1);
    ASSERT_U64_EQ(slots, 1); /* known: one slot */
    ASSERT_EQ(write_alloc(&s, c1, 100, 3, b, 20, &slots), 1);
    ASSERT_U64_EQ(slots, 1 + CW_HEAPRING_CONTS(20));
    ASSERT_EQ(write_alloc(&s, c1, 100, 4, a_short, 19, &slots), 1);
    ASSERT_U64_EQ(slots, 1 + CW_HEAPRING_CONTS(19));
    /* Another thread sends its own definition of the same stack, index 0
     * of its own table. */
    ASSERT_EQ(write_alloc(&s, c2, 200, 5, b, 20, &slots), 1);
    ASSERT_U64_EQ(slots, 1 + CW_HEAPRING_CONTS(20));
    ASSERT_EQ(write_alloc(&s, c1, 100, 6, b, 20, &slots), 1);
    ASSERT_EQ(write_alloc(&s, c2, 200, 7, b, 20, &slots), 1);
    ASSERT_U64_EQ(slots, 1);

    expect_stack(&s, 1, a, 20, true);
    expect_stack(&s, 2, a, 20, false);
    expect_stack(&s, 3, b, 20, true);
    expect_stack(&s, 4, a_short, 19, true);
    expect_stack(&s, 5, b, 20, true);
    expect_stack(&s, 6, b, 20, false);
    expect_stack(&s, 7, b, 20, false);
    ASSERT_U64_EQ(cw_heapstacks_unknown(s.reader), 0);
    ASSERT_EQ(c1->nstacks, 3);
    ASSERT_EQ(c2->nstacks, 1);
    free(c1);
    free(c2);
    side_close(&s);
}

/* A full table: a STACK_RESET record, the indices start again at 0, and
 * the reader, having forgotten the old ones, names every later record by
 * the new definitions. */
static void test_reset(void)
{
    side_t s;
    side_open(&s, 1024);
    cw_heapcache_t *c = cache_new();
    uint64_t pc[4];
    /* Fill the table, reading as the ring fills. */
    cw_heapring_rec_t rec;
    bool unknown;
    for (uint64_t i = 0; i < CW_HEAPCACHE_STACKS; i++) {
        stack_of(i, pc, 4);
        ASSERT_EQ(write_alloc(&s, c, 1, i, pc, 4, NULL), 1);
        cw_heapstk_t *e = read_one(&s, &rec, &unknown);
        ASSERT_TRUE(e != NULL);
        ASSERT_EQ(rec.stack, (uint32_t)i);
    }
    ASSERT_TRUE(!cw_heapcache_fits(c, 4));
    /* One more stack: a reset, then its definition under index 0. */
    stack_of(5000, pc, 4);
    uint64_t slots;
    ASSERT_EQ(write_alloc(&s, c, 1, 5000, pc, 4, &slots), 1);
    ASSERT_U64_EQ(slots, 1 + 1 + CW_HEAPRING_CONTS(4));
    ASSERT_U64_EQ(c->resets, 1);
    ASSERT_TRUE(read_one(&s, &rec, &unknown) == NULL);
    ASSERT_EQ(rec.kind, CW_HEAPREC_STACK_RESET);
    ASSERT_TRUE(!unknown);
    /* After the reset the reader holds no index but the new 0. */
    ASSERT_TRUE(cw_heapstacks_find(s.reader, 9, 1, 1) == NULL);
    expect_stack(&s, 5000, pc, 4, true);
    ASSERT_TRUE(cw_heapstacks_find(s.reader, 9, 1, 0) != NULL);
    /* The stack that had index 0 before the reset is a new definition. */
    uint64_t first[4];
    stack_of(0, first, 4);
    ASSERT_EQ(write_alloc(&s, c, 1, 1, first, 4, &slots), 1);
    ASSERT_U64_EQ(slots, 1 + CW_HEAPRING_CONTS(4));
    expect_stack(&s, 1, first, 4, true);
    ASSERT_EQ(write_alloc(&s, c, 1, 2, pc, 4, &slots), 1);
    ASSERT_U64_EQ(slots, 1);
    expect_stack(&s, 2, pc, 4, false);
    ASSERT_U64_EQ(cw_heapstacks_unknown(s.reader), 0);
    free(c);
    side_close(&s);
}

/* A definition that finds no room is dropped and not learnt: the next
 * event of that stack defines it again, so no index reaches the reader
 * before its definition. */
static void test_dropped_definition(void)
{
    side_t s;
    side_open(&s, 8);
    cw_heapcache_t *c = cache_new();
    uint64_t pc[30], other[2];
    stack_of(3, pc, 30); /* 1 + 5 slots */
    stack_of(4, other, 2);
    for (int i = 0; i < 4; i++)
        ASSERT_EQ(write_alloc(&s, c, 1, 10 + (uint64_t)i, other, 2, NULL), 1); /* 2 + 1 + 1 + 1 */
    ASSERT_EQ(write_alloc(&s, c, 1, 20, pc, 30, NULL), 0);                     /* 6 slots, 3 free */
    ASSERT_U64_EQ(cw_heapring_dropped(&s.ring), 1);
    ASSERT_EQ(c->nstacks, 1);
    cw_heapring_rec_t rec;
    bool unknown;
    for (int i = 0; i < 4; i++)
        ASSERT_TRUE(read_one(&s, &rec, &unknown) != NULL);
    ASSERT_EQ(cw_heapring_next(&s.ring, &rec), 0); /* gives the slots back */
    ASSERT_EQ(write_alloc(&s, c, 1, 21, pc, 30, NULL), 1);
    expect_stack(&s, 21, pc, 30, true);
    ASSERT_U64_EQ(cw_heapstacks_unknown(s.reader), 0);
    free(c);
    side_close(&s);
}

/* An index the reader does not hold (a thread it never heard of, an
 * index past what the thread defined, one forgotten at a START or a
 * THREAD_END, a definition past the bounds): counted, the event left
 * without an entry, nothing read out of bounds. */
static void test_unknown_index(void)
{
    cw_heapstacks_t *st;
    ASSERT_OK(cw_heapstacks_create(&st));
    uint64_t pc[3] = {1, 2, 3};
    cw_heapring_rec_t rec = {.kind = CW_HEAPREC_ALLOC, .pid = 5, .tid = 6, .stack = 0};
    cw_heapstk_t *e;
    bool unknown;
    ASSERT_OK(cw_heapstacks_take(st, &rec, &e, &unknown));
    ASSERT_TRUE(e == NULL && unknown);

    rec.flags = CW_HEAPREC_F_DEF;
    memcpy(rec.w, pc, sizeof pc);
    rec.nwords = 3;
    ASSERT_OK(cw_heapstacks_take(st, &rec, &e, &unknown));
    ASSERT_TRUE(e != NULL && !unknown);
    rec.flags = 0;
    rec.nwords = 0;
    rec.stack = 1; /* never defined */
    ASSERT_OK(cw_heapstacks_take(st, &rec, &e, &unknown));
    ASSERT_TRUE(e == NULL && unknown);
    rec.stack = 1000000; /* far past any table */
    ASSERT_OK(cw_heapstacks_take(st, &rec, &e, &unknown));
    ASSERT_TRUE(e == NULL && unknown);
    rec.stack = 0;
    rec.tid = 7; /* another thread's index 0 */
    ASSERT_OK(cw_heapstacks_take(st, &rec, &e, &unknown));
    ASSERT_TRUE(e == NULL && unknown);
    rec.tid = 6;
    ASSERT_OK(cw_heapstacks_take(st, &rec, &e, &unknown));
    ASSERT_TRUE(e != NULL && e->n == 3 && e->pc[2] == 3);

    /* A definition past the bounds is not entered. */
    rec.flags = CW_HEAPREC_F_DEF;
    rec.stack = CW_HEAPCACHE_STACKS;
    rec.nwords = 3;
    ASSERT_OK(cw_heapstacks_take(st, &rec, &e, &unknown));
    ASSERT_TRUE(e == NULL && unknown);

    /* A free carries no stack: nothing counted. */
    cw_heapring_rec_t fr = {
        .kind = CW_HEAPREC_FREE, .pid = 5, .tid = 6, .stack = CW_HEAPRING_NOSTACK};
    ASSERT_OK(cw_heapstacks_take(st, &fr, &e, &unknown));
    ASSERT_TRUE(e == NULL && !unknown);
    ASSERT_U64_EQ(cw_heapstacks_unknown(st), 5);

    /* THREAD_END forgets the thread; START the process (an exec). */
    cw_heapring_rec_t ctl = {.kind = CW_HEAPREC_THREAD_END, .pid = 5, .tid = 6};
    ASSERT_TRUE(cw_heapstacks_find(st, 5, 6, 0) != NULL);
    ASSERT_OK(cw_heapstacks_take(st, &ctl, &e, &unknown));
    ASSERT_TRUE(cw_heapstacks_find(st, 5, 6, 0) == NULL);
    rec = (cw_heapring_rec_t){.kind = CW_HEAPREC_ALLOC,
                              .flags = CW_HEAPREC_F_DEF,
                              .pid = 5,
                              .tid = 8,
                              .stack = 0,
                              .nwords = 3};
    memcpy(rec.w, pc, sizeof pc);
    ASSERT_OK(cw_heapstacks_take(st, &rec, &e, &unknown));
    rec.pid = 11; /* another process, kept */
    ASSERT_OK(cw_heapstacks_take(st, &rec, &e, &unknown));
    ctl = (cw_heapring_rec_t){.kind = CW_HEAPREC_START, .pid = 5};
    ASSERT_OK(cw_heapstacks_take(st, &ctl, &e, &unknown));
    ASSERT_TRUE(cw_heapstacks_find(st, 5, 8, 0) == NULL);
    ASSERT_TRUE(cw_heapstacks_find(st, 11, 8, 0) != NULL);

    /* A failed call's record (NONE) still defines, names no event. */
    rec = (cw_heapring_rec_t){.kind = CW_HEAPREC_NONE,
                              .flags = CW_HEAPREC_F_DEF,
                              .pid = 5,
                              .tid = 8,
                              .stack = 2,
                              .nwords = 3};
    memcpy(rec.w, pc, sizeof pc);
    ASSERT_OK(cw_heapstacks_take(st, &rec, &e, &unknown));
    ASSERT_TRUE(e == NULL && !unknown);
    ASSERT_TRUE(cw_heapstacks_find(st, 5, 8, 2) != NULL);
    ASSERT_U64_EQ(cw_heapstacks_unknown(st), 5);
    cw_heapstacks_destroy(st);
}

/* The writer's table alone: stacks compared by their frames (two stacks
 * with the same hash stay two), the word bound reached before the stack
 * bound with deep stacks. */
static void test_cache_bounds(void)
{
    cw_heapcache_t *c = cache_new();
    uint64_t pc[CW_HEAPRING_FRAMES];
    stack_of(7, pc, CW_HEAPRING_FRAMES);
    uint64_t h = cw_heapcache_hash(pc, 10);
    ASSERT_EQ(cw_heapcache_find(c, pc, 10, h), -1);
    ASSERT_EQ(cw_heapcache_add(c, pc, 10, h), 0);
    ASSERT_EQ(cw_heapcache_find(c, pc, 10, h), 0);
    /* Another stack given the same hash on purpose: not taken for it. */
    uint64_t other[10];
    stack_of(8, other, 10);
    ASSERT_EQ(cw_heapcache_find(c, other, 10, h), -1);
    ASSERT_EQ(cw_heapcache_add(c, other, 10, h), 1);
    ASSERT_EQ(cw_heapcache_find(c, other, 10, h), 1);
    ASSERT_EQ(cw_heapcache_find(c, pc, 10, h), 0);
    /* Deep stacks fill the words first. */
    cw_heapcache_reset(c);
    uint32_t added = 0;
    while (cw_heapcache_fits(c, CW_HEAPRING_FRAMES)) {
        pc[0] = added;
        ASSERT_EQ(
            cw_heapcache_add(c, pc, CW_HEAPRING_FRAMES, cw_heapcache_hash(pc, CW_HEAPRING_FRAMES)),
            added);
        added++;
    }
    ASSERT_EQ(added, CW_HEAPCACHE_WORDS / CW_HEAPRING_FRAMES);
    ASSERT_TRUE(c->nwords <= CW_HEAPCACHE_WORDS);
    for (uint32_t i = 0; i < added; i += 97) {
        pc[0] = i;
        ASSERT_EQ(
            cw_heapcache_find(c, pc, CW_HEAPRING_FRAMES, cw_heapcache_hash(pc, CW_HEAPRING_FRAMES)),
            (int32_t)i);
    }
    free(c);
}

int main(void)
{
    test_define_then_index();
    test_reset();
    test_dropped_definition();
    test_unknown_index();
    test_cache_bounds();
    TEST_DONE();
}
