/* test_map.c - committed-memory maps (map.h): the tracker's snapshot of an
 * instance's interval map, the stored encoding, the difference of two
 * maps, reserved-but-uncommitted ranges, the snapshot policy, the request channel an HTTP worker uses to
 * get a live map from the core thread, and the store's snapshots
 * (schema/006_map: written with a batch, read at or before an instant,
 * pruned with the raw tier). */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "commitwatch/batch.h"
#include "commitwatch/map.h"
#include "commitwatch/platform.h"
#include "commitwatch/query.h"
#include "commitwatch/store.h"
#include "commitwatch/tracker.h"
#include "rng.h"
#include "store/store_internal.h"
#include "test.h"
#include "test_port.h"

#define S INT64_C(1000000000)
#define T0 (INT64_C(1750000000) * S)
#define KB 1024u
#define MB (1024u * 1024u)

static cw_event_t ev(int64_t ts, cw_op_t op, uint32_t pid, uint64_t addr, uint64_t size,
                     uint32_t stack)
{
    return (cw_event_t){.ts = ts, .op = op, .pid = pid, .addr = addr, .size = size, .stack_id = stack};
}

/* Range i of v[0 .. n) is [addr, addr + size) from (ts, stack). */
static void expect_in(const cw_map_range_t *v, uint32_t n, uint32_t i, uint64_t addr,
                      uint64_t size, int64_t ts, uint32_t stack)
{
    ASSERT_TRUE(i < n);
    if (i >= n) return;
    ASSERT_U64_EQ(v[i].addr, addr);
    ASSERT_U64_EQ(v[i].size, size);
    ASSERT_EQ(v[i].commit_ns, ts);
    ASSERT_EQ(v[i].stack_id, stack);
}

static void expect_range(const cw_map_t *m, uint32_t i, uint64_t addr, uint64_t size, int64_t ts,
                         uint32_t stack)
{
    expect_in(m->v, m->n, i, addr, size, ts, stack);
}

/* Commits, an overlapping commit (keeps the first attribution), a
 * decommit in the middle (splits a piece), rundown memory. */
static void test_tracker_map(void)
{
    cw_tracker_sink_t sink = {0};
    cw_tracker_t *t;
    cw_map_t m = {0};
    ASSERT_OK(cw_tracker_create(&sink, 1, &t));
    cw_event_t e = ev(T0, CW_OP_COMMIT, 10, 0x10000, 64 * KB, 0);
    e.rundown = true;
    ASSERT_OK(cw_tracker_apply(t, &e));
    e = ev(T0 + 1 * S, CW_OP_COMMIT, 10, 0x100000, 1 * MB, 3);
    ASSERT_OK(cw_tracker_apply(t, &e));
    e = ev(T0 + 2 * S, CW_OP_COMMIT, 10, 0xF0000, 2 * MB, 4); /* around the 1 MB one */
    ASSERT_OK(cw_tracker_apply(t, &e));
    e = ev(T0 + 3 * S, CW_OP_DECOMMIT, 10, 0x140000, 64 * KB, 0);
    ASSERT_OK(cw_tracker_apply(t, &e));
    const cw_proc_t *p = cw_tracker_find(t, 10);
    ASSERT_TRUE(p != NULL);
    ASSERT_OK(cw_tracker_map(t, p->id, T0 + 4 * S, &m));
    ASSERT_EQ(m.proc_id, p->id);
    ASSERT_EQ(m.at_ns, T0 + 4 * S);
    ASSERT_EQ(m.n, 5);
    expect_range(&m, 0, 0x10000, 64 * KB, CW_TS_BEFORE, 0);
    expect_range(&m, 1, 0xF0000, 0x10000, T0 + 2 * S, 4);
    expect_range(&m, 2, 0x100000, 0x40000, T0 + 1 * S, 3);
    expect_range(&m, 3, 0x150000, 0xB0000, T0 + 1 * S, 3);
    expect_range(&m, 4, 0x200000, 0xF0000, T0 + 2 * S, 4);
    ASSERT_U64_EQ(cw_map_bytes(&m), p->outstanding);
    ASSERT_EQ(cw_tracker_map(t, p->id + 1, T0, &m), CW_ENOENT);
    /* After the exit the instance has no live map. */
    e = ev(T0 + 5 * S, CW_OP_PROCESS_EXIT, 10, 0, 0, 0);
    uint32_t id = p->id;
    ASSERT_OK(cw_tracker_apply(t, &e));
    ASSERT_EQ(cw_tracker_map(t, id, T0, &m), CW_ENOENT);
    cw_map_clear(&m);
    cw_tracker_destroy(t);
}

static void expect_res(const cw_map_t *m, uint32_t i, uint64_t addr, uint64_t size, int64_t ts,
                       uint32_t stack)
{
    expect_in(m->res, m->nres, i, addr, size, ts, stack);
}

/* Commit figures a sink sees: bytes committed and released. */
typedef struct figures {
    uint64_t committed, released, commits, pieces;
} figures_t;
static void fig_commit(void *ctx, const cw_proc_t *p, const cw_commit_t *c, int64_t ts)
{
    figures_t *f = ctx;
    (void)p, (void)ts;
    f->committed += c->bytes;
    f->commits++;
}
static void fig_release(void *ctx, const cw_proc_t *p, const cw_commit_t *c, uint64_t bytes,
                        int64_t ts)
{
    figures_t *f = ctx;
    (void)p, (void)c, (void)ts;
    f->released += bytes;
    f->pieces++;
}

/* Reserved-but-uncommitted space (tracker.c, "Reserved space"): a reserve
 * event, a commit inside it, a commit on unreserved space (reserves it
 * too), a decommit that keeps the reservation, a release that drops it,
 * rundown reservations, the exit; no commit figure changes. */
static void test_reserved(void)
{
    figures_t with = {0}, without = {0};
    cw_tracker_sink_t sink = {.ctx = &with, .on_commit = fig_commit, .on_release = fig_release};
    cw_tracker_sink_t sink2 = {.ctx = &without, .on_commit = fig_commit, .on_release = fig_release};
    cw_tracker_t *t, *t2; /* t2: the same events without the reserve events */
    cw_map_t m = {0};
    ASSERT_OK(cw_tracker_create(&sink, 1, &t));
    ASSERT_OK(cw_tracker_create(&sink2, 1, &t2));
    cw_event_t es[] = {
        ev(T0, CW_OP_RESERVE, 20, 0x100000, 1 * MB, 5),
        ev(T0 + 1 * S, CW_OP_COMMIT, 20, 0x110000, 64 * KB, 6),  /* inside */
        ev(T0 + 2 * S, CW_OP_COMMIT, 20, 0x400000, 64 * KB, 7),  /* unreserved: reserves */
        ev(T0 + 3 * S, CW_OP_DECOMMIT, 20, 0x110000, 32 * KB, 0), /* keeps the reservation */
        ev(T0 + 4 * S, CW_OP_DECOMMIT, 20, 0x400000, 64 * KB, 0), /* the commit's reservation */
        ev(T0 + 4 * S, CW_OP_RESERVE, 20, 0x0F0000, 2 * MB, 8), /* around: fills the gaps only */
    };
    for (size_t i = 0; i < sizeof es / sizeof es[0]; i++) {
        ASSERT_OK(cw_tracker_apply(t, &es[i]));
        if (es[i].op != CW_OP_RESERVE) ASSERT_OK(cw_tracker_apply(t2, &es[i]));
    }
    const cw_proc_t *p = cw_tracker_find(t, 20);
    ASSERT_TRUE(p != NULL);
    ASSERT_U64_EQ(p->outstanding, 32 * KB);
    ASSERT_OK(cw_tracker_map(t, p->id, T0 + 5 * S, &m));
    ASSERT_EQ(m.n, 1);
    expect_range(&m, 0, 0x118000, 32 * KB, T0 + 1 * S, 6);
    /* Reserved, not committed: [0xF0000, 0x2F0000) minus the committed
     * 32 KiB, and the decommitted commit's 64 KiB at 0x400000. */
    ASSERT_EQ(m.nres, 5);
    expect_res(&m, 0, 0x0F0000, 0x10000, T0 + 4 * S, 8);  /* the second reserve's gap */
    expect_res(&m, 1, 0x100000, 0x18000, T0, 5);          /* the first reserve, up to the commit */
    expect_res(&m, 2, 0x120000, 0xE0000, T0, 5);          /* after it */
    expect_res(&m, 3, 0x200000, 0xF0000, T0 + 4 * S, 8);
    expect_res(&m, 4, 0x400000, 64 * KB, T0 + 2 * S, 7); /* reserved by its commit */
    ASSERT_U64_EQ(cw_map_reserved_bytes(&m), 2 * MB - 32 * KB + 64 * KB);
    ASSERT_U64_EQ(cw_map_bytes(&m), p->outstanding);

    /* A release drops reservation and commit; a partial one keeps the rest. */
    cw_event_t rel[] = {
        ev(T0 + 6 * S, CW_OP_RELEASE, 20, 0x100000, 1 * MB, 0),
        ev(T0 + 7 * S, CW_OP_RELEASE, 20, 0x400000, 16 * KB, 0),
    };
    for (size_t i = 0; i < 2; i++) {
        ASSERT_OK(cw_tracker_apply(t, &rel[i]));
        ASSERT_OK(cw_tracker_apply(t2, &rel[i]));
    }
    ASSERT_OK(cw_tracker_map(t, p->id, T0 + 8 * S, &m));
    ASSERT_EQ(m.n, 0);
    ASSERT_EQ(m.nres, 3);
    expect_res(&m, 0, 0x0F0000, 0x10000, T0 + 4 * S, 8);
    expect_res(&m, 1, 0x200000, 0xF0000, T0 + 4 * S, 8);
    expect_res(&m, 2, 0x404000, 48 * KB, T0 + 2 * S, 7);
    ASSERT_U64_EQ(p->outstanding, 0);
    /* The commit figures are those of the same events without reserves. */
    ASSERT_U64_EQ(with.committed, without.committed);
    ASSERT_U64_EQ(with.released, without.released);
    ASSERT_U64_EQ(with.commits, without.commits);
    ASSERT_U64_EQ(with.pieces, without.pieces);
    ASSERT_U64_EQ(cw_tracker_find(t2, 20)->outstanding, p->outstanding);
    ASSERT_U64_EQ(cw_tracker_piece_count(t, 20), cw_tracker_piece_count(t2, 20));

    /* The exit drops everything: a new instance of the pid starts empty. */
    cw_event_t x = ev(T0 + 9 * S, CW_OP_PROCESS_EXIT, 20, 0, 0, 0);
    uint32_t id = p->id;
    ASSERT_OK(cw_tracker_apply(t, &x));
    ASSERT_EQ(cw_tracker_map(t, id, T0, &m), CW_ENOENT);
    /* Rundown reservations: before tracing; a commit inside splits them. */
    cw_event_t r = ev(T0 + 10 * S, CW_OP_RESERVE, 20, 0x100000, 256 * KB, 1);
    r.rundown = true;
    ASSERT_OK(cw_tracker_apply(t, &r));
    cw_event_t c = ev(T0 + 11 * S, CW_OP_COMMIT, 20, 0x110000, 64 * KB, 2);
    ASSERT_OK(cw_tracker_apply(t, &c));
    p = cw_tracker_find(t, 20);
    ASSERT_TRUE(p->id != id);
    ASSERT_OK(cw_tracker_map(t, p->id, T0 + 12 * S, &m));
    ASSERT_EQ(m.n, 1);
    ASSERT_EQ(m.nres, 2);
    expect_res(&m, 0, 0x100000, 64 * KB, CW_TS_BEFORE, 1);
    expect_res(&m, 1, 0x120000, 128 * KB, CW_TS_BEFORE, 1);
    /* Memory comes back to the pools at the end (no leak: ASan build). */
    cw_tracker_end_all(t, T0 + 13 * S);
    ASSERT_EQ(cw_tracker_live_processes(t), 0);
    cw_map_clear(&m);
    cw_tracker_destroy(t);
    cw_tracker_destroy(t2);
}

/* A reservation record is shared by the pieces one event made and freed
 * with its last piece: releases that split one reservation in three, then
 * take the pieces one by one, with other reservations made meanwhile
 * (which would reuse a record freed too early and show their time). */
static void test_reserved_shared(void)
{
    cw_tracker_sink_t sink = {0};
    cw_tracker_t *t;
    cw_map_t m = {0};
    ASSERT_OK(cw_tracker_create(&sink, 1, &t));
    const uint64_t B = 0x1000000;
    cw_event_t es[] = {
        ev(T0, CW_OP_RESERVE, 30, B, 16 * 64 * KB, 3),
        ev(T0 + 1 * S, CW_OP_RELEASE, 30, B + 4 * 64 * KB, 4 * 64 * KB, 0),   /* splits it */
        ev(T0 + 2 * S, CW_OP_RELEASE, 30, B + 10 * 64 * KB, 2 * 64 * KB, 0),  /* again */
        ev(T0 + 3 * S, CW_OP_RELEASE, 30, B, 4 * 64 * KB, 0),                 /* first piece */
        ev(T0 + 4 * S, CW_OP_RESERVE, 30, 2 * B, 64 * KB, 4),
        ev(T0 + 5 * S, CW_OP_RELEASE, 30, B + 8 * 64 * KB, 2 * 64 * KB, 0),   /* second */
        ev(T0 + 6 * S, CW_OP_RESERVE, 30, 3 * B, 64 * KB, 5),
    };
    for (size_t i = 0; i < sizeof es / sizeof *es; i++) ASSERT_OK(cw_tracker_apply(t, &es[i]));
    const cw_proc_t *p = cw_tracker_find(t, 30);
    ASSERT_U64_EQ(cw_tracker_reserved_piece_count(t, 30), 3);
    ASSERT_OK(cw_tracker_map(t, p->id, T0 + 7 * S, &m));
    ASSERT_EQ(m.nres, 3);
    expect_res(&m, 0, B + 12 * 64 * KB, 4 * 64 * KB, T0, 3);
    expect_res(&m, 1, 2 * B, 64 * KB, T0 + 4 * S, 4);
    expect_res(&m, 2, 3 * B, 64 * KB, T0 + 6 * S, 5);
    cw_event_t last = ev(T0 + 8 * S, CW_OP_RELEASE, 30, B, 16 * 64 * KB, 0);
    ASSERT_OK(cw_tracker_apply(t, &last));
    ASSERT_U64_EQ(cw_tracker_reserved_piece_count(t, 30), 2);
    ASSERT_OK(cw_tracker_map(t, p->id, T0 + 9 * S, &m));
    ASSERT_EQ(m.nres, 2);
    expect_res(&m, 0, 2 * B, 64 * KB, T0 + 4 * S, 4);
    cw_map_clear(&m);
    cw_tracker_destroy(t);
}

static int collect(void *ctx, const cw_map_t *m)
{
    uint32_t *seen = ctx;
    seen[m->proc_id]++;
    return 0;
}

/* First change: a snapshot; small changes: none until max_gap; a move of
 * min_bytes after min_gap: one; no change: never; force: every changed. */
static void test_policy(void)
{
    cw_tracker_sink_t sink = {0};
    cw_tracker_t *t;
    cw_map_policy_t pol = {10 * S, 600 * S, 1 * MB, 10};
    uint32_t seen[8] = {0};
    ASSERT_OK(cw_tracker_create(&sink, 1, &t));
    cw_event_t e = ev(T0, CW_OP_COMMIT, 7, 0x100000, 100 * MB, 1);
    ASSERT_OK(cw_tracker_apply(t, &e));
    ASSERT_OK(cw_tracker_maps_due(t, T0 + S, &pol, false, collect, seen));
    ASSERT_EQ(seen[1], 1);
    ASSERT_OK(cw_tracker_maps_due(t, T0 + 2 * S, &pol, false, collect, seen));
    ASSERT_EQ(seen[1], 1); /* unchanged */
    e = ev(T0 + 3 * S, CW_OP_COMMIT, 7, 0x10000000, 64 * KB, 1); /* small */
    ASSERT_OK(cw_tracker_apply(t, &e));
    ASSERT_OK(cw_tracker_maps_due(t, T0 + 20 * S, &pol, false, collect, seen));
    ASSERT_EQ(seen[1], 1); /* 64 KiB of 100 MiB: not enough */
    ASSERT_OK(cw_tracker_maps_due(t, T0 + 601 * S, &pol, false, collect, seen));
    ASSERT_EQ(seen[1], 2); /* max_gap */
    e = ev(T0 + 602 * S, CW_OP_COMMIT, 7, 0x20000000, 2 * MB, 1);
    ASSERT_OK(cw_tracker_apply(t, &e));
    ASSERT_OK(cw_tracker_maps_due(t, T0 + 605 * S, &pol, false, collect, seen));
    ASSERT_EQ(seen[1], 2); /* 2 MiB, but only 4 s later */
    ASSERT_OK(cw_tracker_maps_due(t, T0 + 612 * S, &pol, false, collect, seen));
    ASSERT_EQ(seen[1], 3);
    e = ev(T0 + 613 * S, CW_OP_DECOMMIT, 7, 0x20000000, 4 * KB, 0);
    ASSERT_OK(cw_tracker_apply(t, &e));
    ASSERT_OK(cw_tracker_maps_due(t, T0 + 614 * S, &pol, true, collect, seen));
    ASSERT_EQ(seen[1], 4); /* forced: any change */
    ASSERT_OK(cw_tracker_maps_due(t, T0 + 615 * S, &pol, true, collect, seen));
    ASSERT_EQ(seen[1], 4); /* forced, but unchanged */
    cw_tracker_destroy(t);
}

static void test_encoding(void)
{
    test_rng_seed(14, 1);
    cw_diag_t d = {{0}};
    int pages_format = 0;
    for (int round = 0; round < 200; round++) {
        cw_map_t m = {0}, back = {0};
        m.proc_id = 3;
        m.at_ns = T0 + (int64_t)test_rng_below(1000) * S;
        uint64_t addr = test_rng_below(2) ? 0 : UINT64_C(0x7ff000000000);
        uint32_t n = (uint32_t)test_rng_below(300);
        /* odd rounds: every range on pages (format 3), but for one in some */
        uint32_t page = round % 2 ? 4096 : 1, odd = test_rng_below(2) ? test_rng_below(n + 1) : n;
        for (uint32_t i = 0; i < n; i++) {
            /* adjacent too */
            addr += test_rng_below(3) ? test_rng_below(1u << 30) / page * page : 0;
            if (i == odd && page > 1) addr += 1 + test_rng_below(4095);
            uint64_t size = 4096 * (1 + test_rng_below(4096));
            int64_t ts = test_rng_below(5) == 0 ? CW_TS_BEFORE
                                                   : m.at_ns - (int64_t)test_rng_below(1u << 31) * 977;
            ASSERT_OK(cw_map_push(&m, addr, size, ts, (uint32_t)test_rng_below(70000)));
            addr += size;
        }
        uint64_t raddr = test_rng_below(1u << 20) * 4096;
        for (uint32_t i = 0, nr = (uint32_t)test_rng_below(20); i < nr; i++) {
            raddr += 4096 * (1 + test_rng_below(1000));
            uint64_t size = 4096 * (1 + test_rng_below(4096));
            ASSERT_OK(cw_map_push_reserved(&m, raddr, size, m.at_ns - (int64_t)i * S, i));
            raddr += size;
        }
        unsigned char *blob;
        size_t len;
        ASSERT_OK(cw_map_encode(&m, &blob, &len));
        ASSERT_EQ(blob[0], page > 1 && odd == n && raddr % 4096 == 0 ? 3 : 2);
        pages_format += blob[0] == 3;
        ASSERT_OK(cw_map_decode(blob, len, 3, m.at_ns, &back, &d));
        ASSERT_EQ(back.n, m.n);
        for (uint32_t i = 0; i < m.n && i < back.n; i++)
            expect_range(&back, i, m.v[i].addr, m.v[i].size, m.v[i].commit_ns, m.v[i].stack_id);
        ASSERT_EQ(back.nres, m.nres);
        for (uint32_t i = 0; i < m.nres && i < back.nres; i++)
            expect_res(&back, i, m.res[i].addr, m.res[i].size, m.res[i].commit_ns,
                       m.res[i].stack_id);
        /* Cut short anywhere inside the last range: an error, not a guess. */
        if ((n || m.nres) && len > 2) {
            cw_diag_t d2 = {{0}};
            ASSERT_EQ(cw_map_decode(blob, len - 1, 3, m.at_ns, &back, &d2), CW_EPARSE);
            ASSERT_TRUE(strstr(d2.msg, "cut short") != NULL);
            ASSERT_EQ(back.n, 0);
        }
        free(blob);
        cw_map_clear(&m);
        cw_map_clear(&back);
    }
    ASSERT_TRUE(pages_format > 20);
    unsigned char bad[] = {9};
    cw_map_t m = {0};
    ASSERT_EQ(cw_map_decode(bad, 1, 1, T0, &m, &d), CW_EPARSE);
    ASSERT_TRUE(strstr(d.msg, "unknown format") != NULL);
    /* Format 1 (before reserved ranges): committed ranges only. Two
     * ranges: gap 0x1000 size 0x1000 stack 2 before tracing; gap 0 size
     * 0x2000 stack 3 at at_ns - 1 (zigzag 1, + 1). */
    unsigned char v1[] = {1, 0x80, 0x20, 0x80, 0x20, 2, 0, 0, 0x80, 0x40, 3, 2};
    ASSERT_OK(cw_map_decode(v1, sizeof v1, 1, T0, &m, &d));
    ASSERT_EQ(m.n, 2);
    ASSERT_EQ(m.nres, 0);
    expect_range(&m, 0, 0x1000, 0x1000, CW_TS_BEFORE, 2);
    expect_range(&m, 1, 0x2000, 0x2000, T0 - 1, 3);
    /* Format 2 whose count says more committed ranges than it holds. */
    unsigned char v2[] = {2, 3, 0x80, 0x20, 0x80, 0x20, 2, 0};
    ASSERT_EQ(cw_map_decode(v2, sizeof v2, 1, T0, &m, &d), CW_EPARSE);
    ASSERT_TRUE(strstr(d.msg, "1 committed ranges of 3") != NULL);
    ASSERT_EQ(m.n, 0);
    /* Format 3: one committed range, gap 2 pages, size 3 pages, stack 4,
     * at at_ns - 1; one reserved range of 1 page at 0x10000. A gap or a
     * size past 64 bits once counted in bytes is an error. */
    unsigned char v3[] = {3, 1, 2, 3, 4, 2, 16, 1, 5, 2};
    ASSERT_OK(cw_map_decode(v3, sizeof v3, 1, T0, &m, &d));
    ASSERT_EQ(m.n, 1);
    ASSERT_EQ(m.nres, 1);
    expect_range(&m, 0, 0x2000, 0x3000, T0 - 1, 4);
    expect_res(&m, 0, 0x10000, 0x1000, T0 - 1, 5);
    unsigned char big[] = {3, 1, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x10, 1, 0, 0};
    ASSERT_EQ(cw_map_decode(big, sizeof big, 1, T0, &m, &d), CW_EPARSE);
    ASSERT_TRUE(strstr(d.msg, "out of range") != NULL);
    /* Bytes per range of a realistic map: addresses close together. */
    cw_map_t r = {0};
    r.at_ns = T0 + 3600 * S;
    for (uint32_t i = 0; i < 10000; i++)
        ASSERT_OK(cw_map_push(&r, UINT64_C(0x7f0000000000) + (uint64_t)i * 3 * 65536, 65536,
                              T0 + (int64_t)i * 100000000, i % 50));
    unsigned char *blob;
    size_t len;
    ASSERT_OK(cw_map_encode(&r, &blob, &len));
    printf("encoded map: %zu bytes for %u ranges (%.1f a range)\n", len, r.n, (double)len / r.n);
    /* format 3: gap 1, size 1, stack 1, age (ns) 6 - 7 */
    ASSERT_EQ(blob[0], 3);
    ASSERT_TRUE(len <= 10 * (size_t)r.n + 16);
    free(blob);
    cw_map_clear(&r);
}

/* The difference: kept (same commit), new, freed; a byte recommitted by
 * another event is freed (old) and new (the new one). */
static void test_diff(void)
{
    cw_map_t a = {0}, b = {0};
    cw_map_diff_t df;
    ASSERT_OK(cw_map_push(&a, 0x1000, 0x3000, T0, 1));          /* shrinks to 0x1000-0x2000 */
    ASSERT_OK(cw_map_push(&a, 0x10000, 0x1000, T0, 2));         /* freed */
    ASSERT_OK(cw_map_push(&a, 0x20000, 0x1000, T0, 3));         /* recommitted by another event */
    ASSERT_OK(cw_map_push(&b, 0x1000, 0x1000, T0, 1));
    ASSERT_OK(cw_map_push(&b, 0x20000, 0x1000, T0 + S, 3));
    ASSERT_OK(cw_map_push(&b, 0x900000, 10 * MB, T0 + 2 * S, 4)); /* the step */
    ASSERT_OK(cw_map_diff(&a, &b, &df));
    ASSERT_U64_EQ(df.bytes[CW_MAP_KEPT], 0x1000);
    ASSERT_U64_EQ(df.bytes[CW_MAP_NEW], 0x1000 + 10 * MB);
    ASSERT_U64_EQ(df.bytes[CW_MAP_FREED], 0x2000 + 0x1000 + 0x1000);
    ASSERT_EQ(df.n, 6);
    for (uint32_t i = 1; i < df.n; i++) ASSERT_TRUE(df.v[i - 1].r.addr <= df.v[i].r.addr);
    ASSERT_STR_EQ(cw_map_change_name(df.v[df.n - 1].change), "new");
    ASSERT_U64_EQ(df.v[df.n - 1].r.size, 10 * MB);
    cw_map_diff_clear(&df);
    /* Identical maps: all kept. */
    ASSERT_OK(cw_map_diff(&b, &b, &df));
    ASSERT_U64_EQ(df.bytes[CW_MAP_KEPT], cw_map_bytes(&b));
    ASSERT_U64_EQ(df.bytes[CW_MAP_NEW] + df.bytes[CW_MAP_FREED], 0);
    cw_map_diff_clear(&df);
    cw_map_clear(&a);
    cw_map_clear(&b);
}

/* ---- the request channel ---- */

typedef struct core {
    cw_mapreq_t *q;
    cw_tracker_t *t;
    volatile int stop;
    int served;
} core_t;

static int fill(void *ctx, uint32_t id, cw_map_t *m)
{
    core_t *c = ctx;
    c->served++;
    return cw_tracker_map(c->t, id, T0, m);
}

static void core_loop(void *arg)
{
    core_t *c = arg;
    while (!c->stop) {
        if (cw_mapreq_pending(c->q)) cw_mapreq_serve(c->q, fill, c);
        cw_plat_sleep_ns(1000000);
    }
}

static void test_channel(void)
{
    core_t c = {0};
    cw_tracker_sink_t sink = {0};
    cw_map_t m = {0};
    cw_thread_t *th;
    ASSERT_OK(cw_mapreq_create(&c.q));
    ASSERT_OK(cw_tracker_create(&sink, 1, &c.t));
    cw_event_t e = ev(T0, CW_OP_COMMIT, 5, 0x40000, 10 * MB, 2);
    ASSERT_OK(cw_tracker_apply(c.t, &e));
    /* Nobody serves: the request is withdrawn at the timeout. */
    int64_t t0 = cw_plat_mono_ns();
    ASSERT_EQ(cw_mapreq_ask(c.q, 1, 50000000, &m), CW_ESTOPPED);
    int64_t waited = cw_plat_mono_ns() - t0;
    ASSERT_TRUE(waited >= 45000000 && waited < 2000000000);
    ASSERT_OK(cw_thread_start(&th, core_loop, &c));
    for (int i = 0; i < 20; i++) {
        ASSERT_OK(cw_mapreq_ask(c.q, 1, 5 * S, &m));
        ASSERT_EQ(m.n, 1);
        ASSERT_U64_EQ(m.v[0].size, 10 * MB);
        ASSERT_EQ(cw_mapreq_ask(c.q, 2, 5 * S, &m), CW_ENOENT);
    }
    c.stop = 1;
    cw_thread_join(th);
    ASSERT_EQ(c.served, 40);
    cw_mapreq_close(c.q);
    t0 = cw_plat_mono_ns();
    ASSERT_EQ(cw_mapreq_ask(c.q, 1, 5 * S, &m), CW_ESTOPPED);
    ASSERT_TRUE(cw_plat_mono_ns() - t0 < S); /* closed: at once */
    cw_map_clear(&m);
    cw_tracker_destroy(c.t);
    cw_mapreq_destroy(c.q);
}

/* ---- the store ---- */

static void test_store(void)
{
    char dir[4096], path[4200];
    cw_diag_t d = {{0}};
    cw_store_t *s;
    snprintf(dir, sizeof dir, "%s/cw_test_map_XXXXXX", cw_test_tmpdir());
    ASSERT_TRUE(cw_test_mkdtemp(dir) != NULL);
    snprintf(path, sizeof path, "%s/map.db", dir);
    ASSERT_OK(cw_store_open(path, NULL, &s, &d));
    int64_t w = S;
    for (int k = 0; k < 3; k++) {
        cw_batch_t *b;
        cw_map_t m = {0};
        m.proc_id = 1;
        m.at_ns = T0 + (k + 1) * 10 * S;
        for (int i = 0; i <= k; i++)
            ASSERT_OK(cw_map_push(&m, 0x100000 + (uint64_t)i * 16 * MB, 10 * MB, T0 + i * 10 * S, 1));
        ASSERT_OK(cw_batch_create(T0 + (k + 1) * 10 * S - w, w, &b));
        ASSERT_OK(cw_batch_add_proc(b, 1, 42, T0, CW_TS_NEVER, "grow.exe", NULL));
        cw_row_map_t r = {1, m.n, m.at_ns, cw_map_bytes(&m), NULL, 0};
        ASSERT_OK(cw_map_encode(&m, &r.blob, &r.len));
        ASSERT_OK(cw_batch_add_map(b, &r));
        ASSERT_OK(cw_store_write(s, b, &d));
        cw_batch_free(b);
        cw_map_clear(&m);
    }
    cw_map_t m = {0};
    ASSERT_EQ(cw_store_map_at(s, 1, T0 + 5 * S, &m, &d), CW_ENOENT);
    ASSERT_EQ(cw_store_map_at(s, 2, T0 + 50 * S, &m, &d), CW_ENOENT);
    ASSERT_OK(cw_store_map_at(s, 1, T0 + 25 * S, &m, &d));
    ASSERT_EQ(m.at_ns, T0 + 20 * S);
    ASSERT_EQ(m.n, 2);
    ASSERT_U64_EQ(cw_map_bytes(&m), 20 * MB);
    ASSERT_OK(cw_store_map_at(s, 1, T0 + 30 * S, &m, &d));
    ASSERT_EQ(m.n, 3);
    expect_range(&m, 2, 0x100000 + 32 * MB, 10 * MB, T0 + 20 * S, 1);
    int64_t *times;
    size_t n;
    ASSERT_OK(cw_store_map_times(s, 1, 2, &times, &n, &d));
    ASSERT_EQ(n, 2); /* the newest two, oldest first */
    ASSERT_EQ(times[0], T0 + 20 * S);
    ASSERT_EQ(times[1], T0 + 30 * S);
    free(times);
    /* Pruned with the raw tier's horizon. */
    cw__tier_t t[CW_TIERS];
    memset(t, 0, sizeof t);
    t[0].horizon = T0 + 25 * S;
    ASSERT_OK(cw__store_prune_maps(s, t, &d));
    ASSERT_EQ(cw_store_map_at(s, 1, T0 + 25 * S, &m, &d), CW_ENOENT);
    ASSERT_OK(cw_store_map_at(s, 1, T0 + 35 * S, &m, &d));
    ASSERT_EQ(m.n, 3);
    cw_map_clear(&m);
    cw_store_close(s);
    cw_test_rmtree(dir);
}

int main(void)
{
    test_tracker_map();
    test_reserved();
    test_reserved_shared();
    test_policy();
    test_encoding();
    test_diff();
    test_channel();
    test_store();
    TEST_DONE();
}
