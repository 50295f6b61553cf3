/* test_perf_shadow.c - the Linux VMA shadow's commit rules, fed synthetic
 * syscall results (no root, no perf): which calls charge, uncharge,
 * reserve or release, with which ranges and attributions. */
#include "sources/perf/perf_types.h"
#include "test.h"

#if defined(__linux__)

#define MB (1024ull * 1024)
#define PROT_R 1
#define PROT_W 2
#define PRIV 0x02
#define SHARED 0x01
#define ANON 0x20
#define NORES 0x4000
#define HUGE 0x40000
#define MAYMOVE 1
#define FIXED 2
#define DONTUNMAP 4

static cw_event_t evs[64];
static int nev;
static int query_answer = -1;
static int queries;

static int rec(void *ctx, const cw_event_t *ev)
{
    (void)ctx;
    if (nev < 64) evs[nev] = *ev;
    nev++;
    return 0;
}

static int64_t query_ts; /* the call time of the last query */

static int query(void *ctx, uint32_t pid, int64_t call_ts, uint64_t addr, uint64_t len)
{
    (void)ctx;
    (void)pid;
    query_ts = call_ts;
    (void)addr;
    (void)len;
    queries++;
    return query_answer;
}

static cw_perf__shadow_env_t env = {NULL, rec, query, false};

static cw_perf__call_t call(int64_t ts, uint32_t stack)
{
    return (cw_perf__call_t){ts, 7, stack};
}

static void reset(void)
{
    nev = 0;
    queries = 0;
}

#define EV(k, op_, addr_, size_, stack_)                                                           \
    do {                                                                                           \
        ASSERT_EQ(evs[k].op, op_);                                                                 \
        ASSERT_U64_EQ(evs[k].addr, addr_);                                                         \
        ASSERT_U64_EQ(evs[k].size, size_);                                                         \
        ASSERT_EQ(evs[k].stack_id, stack_);                                                        \
        ASSERT_EQ(evs[k].pid, 42);                                                                 \
    } while (0)

static void test_mmap_munmap(void)
{
    cw_perf__shadow_t s;
    cw_perf__shadow_init(&s, 42);
    cw_perf__call_t c = call(100, 5);
    /* Private writable anonymous: charged, the length page-rounded. */
    reset();
    ASSERT_OK(cw_perf__shadow_mmap(&s, &env, &c, 0x10000000, 10 * MB - 100, PROT_R | PROT_W,
                                   PRIV | ANON));
    ASSERT_EQ(nev, 1);
    EV(0, CW_OP_COMMIT, 0x10000000, 10 * MB, 5);
    ASSERT_EQ(evs[0].ts, 100);
    ASSERT_EQ(evs[0].tid, 7);
    ASSERT_U64_EQ(s.acct_bytes, 10 * MB);
    /* munmap of a middle part splits; one release of the range. */
    reset();
    ASSERT_OK(cw_perf__shadow_munmap(&s, &env, &c, 0x10000000 + MB, MB));
    ASSERT_EQ(nev, 1);
    EV(0, CW_OP_RELEASE, 0x10000000 + MB, MB, 0);
    ASSERT_U64_EQ(s.acct_bytes, 9 * MB);
    ASSERT_EQ(s.n, 2);
    /* munmap of nothing mapped: nothing emitted. */
    reset();
    ASSERT_OK(cw_perf__shadow_munmap(&s, &env, &c, 0x50000000, MB));
    ASSERT_EQ(nev, 0);
    /* MAP_FIXED over a charged range: release, then the new mapping. */
    reset();
    cw_perf__call_t c2 = call(200, 6);
    ASSERT_OK(
        cw_perf__shadow_mmap(&s, &env, &c2, 0x10000000, 2 * MB, PROT_R, PRIV | 0x10 /*FIXED*/));
    ASSERT_EQ(nev, 2);
    EV(0, CW_OP_RELEASE, 0x10000000, 2 * MB, 0);
    EV(1, CW_OP_RESERVE, 0x10000000, 2 * MB, 6);
    ASSERT_U64_EQ(s.acct_bytes, 8 * MB);
    cw_perf__shadow_free(&s);
}

static void test_not_charged(void)
{
    cw_perf__shadow_t s;
    cw_perf__shadow_init(&s, 42);
    cw_perf__call_t c = call(1, 1);
    reset();
    /* shared, read-only, NORESERVE, hugetlb: reserve only. */
    ASSERT_OK(cw_perf__shadow_mmap(&s, &env, &c, 0x1000000, MB, PROT_R | PROT_W, SHARED | ANON));
    ASSERT_OK(cw_perf__shadow_mmap(&s, &env, &c, 0x2000000, MB, PROT_R, PRIV | ANON));
    ASSERT_OK(
        cw_perf__shadow_mmap(&s, &env, &c, 0x3000000, MB, PROT_R | PROT_W, PRIV | ANON | NORES));
    ASSERT_OK(
        cw_perf__shadow_mmap(&s, &env, &c, 0x4000000, 2 * MB, PROT_R | PROT_W, PRIV | ANON | HUGE));
    ASSERT_EQ(nev, 4);
    for (int k = 0; k < 4; k++)
        ASSERT_EQ(evs[k].op, CW_OP_RESERVE);
    ASSERT_U64_EQ(s.acct_bytes, 0);
    /* A private writable file mapping (a .data segment) is charged. */
    reset();
    ASSERT_OK(cw_perf__shadow_mmap(&s, &env, &c, 0x5000000, 8192, PROT_R | PROT_W, PRIV));
    EV(0, CW_OP_COMMIT, 0x5000000, 8192, 1);
    /* vm.overcommit_memory = 2: MAP_NORESERVE is ignored. */
    cw_perf__shadow_env_t never = env;
    never.overcommit_never = true;
    reset();
    ASSERT_OK(
        cw_perf__shadow_mmap(&s, &never, &c, 0x6000000, MB, PROT_R | PROT_W, PRIV | ANON | NORES));
    EV(0, CW_OP_COMMIT, 0x6000000, MB, 1);
    cw_perf__shadow_free(&s);
}

static void test_mprotect(void)
{
    cw_perf__shadow_t s;
    cw_perf__shadow_init(&s, 42);
    cw_perf__call_t m = call(1, 1), p = call(2, 2);
    /* glibc thread arena: PROT_NONE + NORESERVE, then mprotect RW: never charged. */
    reset();
    ASSERT_OK(cw_perf__shadow_mmap(&s, &env, &m, 0x1000000, 64 * MB, 0, PRIV | ANON | NORES));
    ASSERT_OK(cw_perf__shadow_mprotect(&s, &env, &p, 0x1000000, 132 * 1024, PROT_R | PROT_W));
    ASSERT_EQ(nev, 1);
    ASSERT_EQ(evs[0].op, CW_OP_RESERVE);
    ASSERT_U64_EQ(s.acct_bytes, 0);
    /* Thread stack: PROT_NONE without NORESERVE, mprotect RW above the guard:
     * that part is charged, attributed to the mprotect. */
    reset();
    ASSERT_OK(cw_perf__shadow_mmap(&s, &env, &m, 0x8000000, 8 * MB, 0, PRIV | ANON));
    ASSERT_OK(
        cw_perf__shadow_mprotect(&s, &env, &p, 0x8000000 + 4096, 8 * MB - 4096, PROT_R | PROT_W));
    ASSERT_EQ(nev, 2);
    EV(0, CW_OP_RESERVE, 0x8000000, 8 * MB, 1);
    EV(1, CW_OP_COMMIT, 0x8000000 + 4096, 8 * MB - 4096, 2);
    ASSERT_U64_EQ(s.acct_bytes, 8 * MB - 4096);
    /* Adding write again to a charged range: nothing more. */
    reset();
    ASSERT_OK(cw_perf__shadow_mprotect(&s, &env, &p, 0x8000000, 8 * MB, PROT_R | PROT_W));
    ASSERT_EQ(nev, 1); /* the guard page only */
    EV(0, CW_OP_COMMIT, 0x8000000, 4096, 2);
    /* Removing write from a charged anonymous range: the kernel (asked)
     * says it stays charged (faulted in) ... */
    reset();
    query_answer = 1;
    ASSERT_OK(cw_perf__shadow_mprotect(&s, &env, &p, 0x8000000, 4096, PROT_R));
    ASSERT_EQ(nev, 0);
    ASSERT_EQ(queries, 1);
    ASSERT_EQ(query_ts, p.ts); /* asked about the call's time */
    /* ... or not (never faulted: no anon_vma): decommit. */
    reset();
    query_answer = 0;
    ASSERT_OK(cw_perf__shadow_mprotect(&s, &env, &p, 0x8000000 + 4096, 4096, 0));
    ASSERT_EQ(nev, 1);
    EV(0, CW_OP_DECOMMIT, 0x8000000 + 4096, 4096, 0);
    ASSERT_U64_EQ(s.acct_bytes, 8 * MB - 4096);
    /* Unknown answer keeps the charge. */
    reset();
    query_answer = -1;
    ASSERT_OK(cw_perf__shadow_mprotect(&s, &env, &p, 0x8000000 + 8192, 4096, PROT_R));
    ASSERT_EQ(nev, 0);
    /* RELRO: a file mapping made read-only stays charged, nobody asked. */
    reset();
    ASSERT_OK(cw_perf__shadow_mmap(&s, &env, &m, 0x20000000, 16384, PROT_R | PROT_W, PRIV));
    ASSERT_OK(cw_perf__shadow_mprotect(&s, &env, &p, 0x20000000, 8192, PROT_R));
    ASSERT_EQ(nev, 1);
    ASSERT_EQ(queries, 0);
    /* A read-only private file mapping made writable is charged (once). */
    reset();
    ASSERT_OK(cw_perf__shadow_mmap(&s, &env, &m, 0x30000000, 8192, PROT_R, PRIV));
    ASSERT_OK(cw_perf__shadow_mprotect(&s, &env, &p, 0x30000000, 8192, PROT_R | PROT_W));
    ASSERT_EQ(nev, 2);
    EV(1, CW_OP_COMMIT, 0x30000000, 8192, 2);
    /* A shared mapping made writable is never charged. */
    reset();
    ASSERT_OK(cw_perf__shadow_mmap(&s, &env, &m, 0x40000000, 8192, PROT_R, SHARED));
    ASSERT_OK(cw_perf__shadow_mprotect(&s, &env, &p, 0x40000000, 8192, PROT_R | PROT_W));
    ASSERT_EQ(nev, 1);
    cw_perf__shadow_free(&s);
}

static void test_mremap(void)
{
    cw_perf__shadow_t s;
    cw_perf__shadow_init(&s, 42);
    cw_perf__call_t m = call(1, 1), r = call(2, 2);
    reset();
    ASSERT_OK(cw_perf__shadow_mmap(&s, &env, &m, 0x10000000, 4 * MB, PROT_R | PROT_W, PRIV | ANON));
    /* Grow in place: the new part is charged, attributed to the mremap. */
    reset();
    ASSERT_OK(
        cw_perf__shadow_mremap(&s, &env, &r, 0x10000000, 4 * MB, 6 * MB, MAYMOVE, 0x10000000));
    ASSERT_EQ(nev, 1);
    EV(0, CW_OP_COMMIT, 0x10000000 + 4 * MB, 2 * MB, 2);
    ASSERT_U64_EQ(s.acct_bytes, 6 * MB);
    /* Shrink in place: the tail is released. */
    reset();
    ASSERT_OK(cw_perf__shadow_mremap(&s, &env, &r, 0x10000000, 6 * MB, 5 * MB, 0, 0x10000000));
    ASSERT_EQ(nev, 1);
    EV(0, CW_OP_RELEASE, 0x10000000 + 5 * MB, MB, 0);
    ASSERT_U64_EQ(s.acct_bytes, 5 * MB);
    /* Move and grow: old range released, its pieces committed at the new
     * address with their original stacks, the growth with the mremap's. */
    reset();
    ASSERT_OK(
        cw_perf__shadow_mremap(&s, &env, &r, 0x10000000, 5 * MB, 7 * MB, MAYMOVE, 0x70000000));
    ASSERT_EQ(nev, 4);
    EV(0, CW_OP_RELEASE, 0x10000000, 5 * MB, 0);
    EV(1, CW_OP_COMMIT, 0x70000000, 4 * MB, 1);
    EV(2, CW_OP_COMMIT, 0x70000000 + 4 * MB, MB, 2);
    EV(3, CW_OP_COMMIT, 0x70000000 + 5 * MB, 2 * MB, 2);
    ASSERT_U64_EQ(s.acct_bytes, 7 * MB);
    /* MREMAP_FIXED onto a mapped, charged range replaces it. */
    reset();
    ASSERT_OK(cw_perf__shadow_mmap(&s, &env, &m, 0x90000000, MB, PROT_R | PROT_W, PRIV | ANON));
    reset();
    ASSERT_OK(
        cw_perf__shadow_mremap(&s, &env, &r, 0x70000000, MB, MB, MAYMOVE | FIXED, 0x90000000));
    ASSERT_EQ(nev, 3);
    EV(0, CW_OP_RELEASE, 0x90000000, MB, 0);
    EV(1, CW_OP_RELEASE, 0x70000000, MB, 0);
    EV(2, CW_OP_COMMIT, 0x90000000, MB, 1);
    ASSERT_U64_EQ(s.acct_bytes, 7 * MB);
    /* MREMAP_DONTUNMAP: the old range stays mapped and charged. */
    reset();
    ASSERT_OK(
        cw_perf__shadow_mremap(&s, &env, &r, 0x90000000, MB, MB, MAYMOVE | DONTUNMAP, 0xa0000000));
    ASSERT_EQ(nev, 1);
    EV(0, CW_OP_COMMIT, 0xa0000000, MB, 1);
    ASSERT_U64_EQ(s.acct_bytes, 8 * MB);
    cw_perf__shadow_free(&s);
}

static void test_brk(void)
{
    cw_perf__shadow_t s;
    cw_perf__shadow_init(&s, 42);
    cw_perf__call_t b = call(1, 3);
    reset();
    /* Unknown break: the first result only teaches it. */
    ASSERT_OK(cw_perf__shadow_brk(&s, &env, &b, 0, 0x555555559000));
    ASSERT_EQ(nev, 0);
    ASSERT_OK(cw_perf__shadow_brk(&s, &env, &b, 0x55555557a000, 0x55555557a000));
    ASSERT_EQ(nev, 1);
    EV(0, CW_OP_COMMIT, 0x555555559000, 0x21000, 3);
    /* Unaligned growth within the same page: nothing. */
    reset();
    ASSERT_OK(cw_perf__shadow_brk(&s, &env, &b, 0x55555557a010, 0x55555557a010));
    ASSERT_EQ(nev, 1); /* rounds up to the next page */
    EV(0, CW_OP_COMMIT, 0x55555557a000, 0x1000, 3);
    /* A failed growth returns the old break: nothing. */
    reset();
    ASSERT_OK(cw_perf__shadow_brk(&s, &env, &b, 0x7fff00000000, 0x55555557a010));
    ASSERT_EQ(nev, 0);
    /* Shrink: released. */
    reset();
    ASSERT_OK(cw_perf__shadow_brk(&s, &env, &b, 0x555555569000, 0x555555569000));
    ASSERT_EQ(nev, 1);
    EV(0, CW_OP_RELEASE, 0x555555569000, 0x12000, 0);
    ASSERT_U64_EQ(s.acct_bytes, 0x10000);
    cw_perf__shadow_free(&s);
}

static void test_sync_fork(void)
{
    cw_perf__shadow_t s, child;
    cw_perf__shadow_init(&s, 42);
    cw_perf__call_t c = call(10, 0);
    /* Rundown from a snapshot: charged segments committed with the pseudo
     * stack and the rundown flag; uncharged ones reserved with the pseudo
     * stack, not flagged (the trace format flags commits only); [stack]
     * neither. */
    cw_perf__seg_t snap[] = {
        {0x1000, 0x3000, CW__SEG_ACCT | CW__SEG_WRITE, 0},
        {0x3000, 0x5000, CW__SEG_ACCT, 0}, /* RELRO, adjacent: merged event */
        {0x8000, 0x9000, CW__SEG_WRITE | CW__SEG_SHARED, 0},
        {0x10000, 0x30000, CW__SEG_ACCT | CW__SEG_WRITE | CW__SEG_ANON | CW__SEG_STACK, 0},
    };
    uint64_t drift = 0;
    reset();
    ASSERT_OK(cw_perf__shadow_sync(&s, &env, &c, snap, 4, 0x9000, 99, true, &drift));
    ASSERT_EQ(nev, 2);
    EV(0, CW_OP_COMMIT, 0x1000, 0x4000, 99);
    ASSERT_TRUE(evs[0].rundown);
    EV(1, CW_OP_RESERVE, 0x8000, 0x1000, 99);
    ASSERT_TRUE(!evs[1].rundown);
    ASSERT_U64_EQ(s.acct_bytes, 0x4000);
    ASSERT_U64_EQ(s.brk, 0x9000);
    ASSERT_U64_EQ(drift, 0x4000);
    /* An mmap, then a resync that finds it gone and something else new. */
    cw_perf__call_t m = call(11, 5);
    ASSERT_OK(cw_perf__shadow_mmap(&s, &env, &m, 0x40000, 0x2000, PROT_R | PROT_W, PRIV | ANON));
    cw_perf__seg_t snap2[] = {
        {0x1000, 0x5000, CW__SEG_ACCT | CW__SEG_WRITE, 0},
        {0x50000, 0x51000, CW__SEG_ACCT | CW__SEG_WRITE | CW__SEG_ANON, 0},
    };
    drift = 0;
    reset();
    ASSERT_OK(cw_perf__shadow_sync(&s, &env, &c, snap2, 2, 0, 98, false, &drift));
    ASSERT_EQ(nev, 2);
    EV(0, CW_OP_DECOMMIT, 0x40000, 0x2000, 0);
    EV(1, CW_OP_COMMIT, 0x50000, 0x1000, 98);
    ASSERT_TRUE(!evs[1].rundown);
    ASSERT_U64_EQ(drift, 0x3000);
    ASSERT_U64_EQ(s.acct_bytes, 0x5000);
    /* Pages charged in both keep their attribution (seen by a move). */
    ASSERT_EQ(s.seg[0].stack_id, 99);
    /* Fork: the child starts with the parent's charged memory. */
    cw_perf__shadow_init(&child, 43);
    ASSERT_OK(cw_perf__shadow_copy(&child, &s));
    reset();
    ASSERT_OK(cw_perf__shadow_commit_all(&child, &env, &c, 77));
    ASSERT_EQ(nev, 2);
    ASSERT_EQ(evs[0].pid, 43);
    ASSERT_EQ(evs[0].op, CW_OP_COMMIT);
    ASSERT_EQ(evs[0].stack_id, 77);
    ASSERT_U64_EQ(evs[0].size + evs[1].size, 0x5000);
    ASSERT_U64_EQ(child.acct_bytes, 0x5000);
    ASSERT_U64_EQ(child.brk, 0x9000);
    cw_perf__shadow_free(&child);
    cw_perf__shadow_free(&s);
}

/* The lower bound the shadow's segments and the unwinder's maps share,
 * over an element type of another size with its end elsewhere. */
static void test_lower_end(void)
{
    struct range {
        uint32_t tag;
        uint64_t start, end;
    } r[] = {{1, 0x1000, 0x2000}, {2, 0x3000, 0x4000}, {3, 0x4000, 0x8000}};
    size_t off = offsetof(struct range, end), st = sizeof r[0];
    ASSERT_EQ(cw_perf__lower_end(r, 0, st, off, 0x1500), 0);
    ASSERT_EQ(cw_perf__lower_end(r, 3, st, off, 0), 0);
    ASSERT_EQ(cw_perf__lower_end(r, 3, st, off, 0x1fff), 0);
    ASSERT_EQ(cw_perf__lower_end(r, 3, st, off, 0x2000), 1); /* an end is not inside */
    ASSERT_EQ(cw_perf__lower_end(r, 3, st, off, 0x2800), 1); /* in a gap: the next */
    ASSERT_EQ(cw_perf__lower_end(r, 3, st, off, 0x4000), 2);
    ASSERT_EQ(cw_perf__lower_end(r, 3, st, off, 0x7fff), 2);
    ASSERT_EQ(cw_perf__lower_end(r, 3, st, off, 0x8000), 3);
    ASSERT_EQ(cw_perf__lower_end(r, 3, st, off, UINT64_MAX), 3);
}

int main(void)
{
    test_lower_end();
    test_mmap_munmap();
    test_not_charged();
    test_mprotect();
    test_mremap();
    test_brk();
    test_sync_fork();
    TEST_DONE();
}

#else
/* tests/CMakeLists.txt builds this test on Linux only; built anywhere else
 * it must not pass with no checks. */
int main(void)
{
    fprintf(stderr, "test_perf_shadow: FAIL: the perf source is Linux-only; no check ran\n");
    return 1;
}
#endif
