/* test_store_fold.c - short-lived instances stored folded (agg.c folding,
 * store_fold.c, schema/005_folded) keep the machine totals and the
 * per-name figures exact.
 *
 * A generated workload: two long-lived processes with rundown, commits,
 * partial decommits and releases over half an hour, and a shell's
 * children: hundreds of instances of a few names that start, commit a
 * little, release some and exit, most within the fold lifetime, some
 * living longer, some committing past the fold size, some alive at the
 * end. It goes through tracker -> aggregator (folding on) -> store, and
 * through the exact window analyzer. For random windows aligned to
 * seconds and minutes, and the whole database:
 *   - every figure summed over the machine, and summed per name, equals
 *     the analyzer's (peak aside: a group's is an upper bound);
 *   - every instance that must not fold is there with all its figures,
 *     peak included;
 *   - every instance that must fold is in no report but in its group's
 *     folded list, and the groups' counts add up to them.
 * Then the same workload with folding off stores one row per instance. */
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <sqlite3.h>

#include "commitwatch/agg.h"
#include "commitwatch/analysis.h"
#include "commitwatch/event.h"
#include "commitwatch/map.h"
#include "commitwatch/pipeline.h"
#include "commitwatch/query.h"
#include "commitwatch/stacks.h"
#include "commitwatch/store.h"
#include "commitwatch/tagger.h"
#include "exact.h"
#include "rng.h"
#include "store/store_internal.h"
#include "test.h"
#include "test_port.h"

#define S INT64_C(1000000000)
#define MIN (60 * S)
#define MAXEV 40000
#define LIFETIME (10 * S)
#define MAXBYTES (1u << 20)
#define SPAN (30 * MIN)

typedef struct gen {
    cw_event_t ev;
    int stack;
    uint32_t seq;
} gen_t;

static gen_t ev[MAXEV];
static uint32_t nev;

/* What the generator expects of each child instance, by pid. */
typedef struct child {
    uint32_t pid;
    int64_t start, exit; /* exit CW_TS_NEVER: alive at the end */
    uint64_t bytes;
    bool folds;
} child_t;

static child_t kids[4000];
static uint32_t nkids;

/* [0, n) for the nanosecond spans here (rng.h's below() is 32-bit). */
static uint64_t rnd(uint64_t n)
{
    return test_rng_next() % n;
}

static const char *const frames[][2] = {{"app!main", "libc!mmap"},
                                        {"app!main", "libc!malloc"},
                                        {"sh!child", "libc!mmap"},
                                        {NULL, NULL}};
static const char *const kid_names[] = {"true", "sleep", "grep", "date"};

static void add(int64_t ts, cw_op_t op, uint32_t pid, uint64_t addr, uint64_t size, int stack,
                bool rundown, const char *name)
{
    ASSERT_TRUE(nev < MAXEV);
    ev[nev] = (gen_t){{.ts = ts,
                       .op = op,
                       .pid = pid,
                       .addr = addr,
                       .size = size,
                       .rundown = rundown,
                       .name = name},
                      stack,
                      nev};
    nev++;
}

static int cmp_gen(const void *x, const void *y)
{
    const gen_t *a = x, *b = y;
    if (a->ev.ts != b->ev.ts) return a->ev.ts < b->ev.ts ? -1 : 1;
    return a->seq < b->seq ? -1 : a->seq > b->seq;
}

static void long_lived(int64_t t0, uint32_t pid, const char *name)
{
    uint64_t next = 0x10000000, live[256][2];
    uint32_t nlive = 0;
    add(t0, CW_OP_PROCESS_START, pid, 0, 0, -1, false, name);
    add(t0, CW_OP_COMMIT, pid, next, 64 * 4096, 0, true, NULL);
    next += 80 * 4096;
    for (int64_t t = t0 + 1; t < t0 + SPAN; t += (int64_t)rnd(3 * S)) {
        if (!nlive || rnd(100) < 55) {
            uint64_t sz = 4096 * (1 + rnd(16));
            add(t, CW_OP_COMMIT, pid, next, sz, (int)rnd(2), false, NULL);
            if (nlive < 256) {
                live[nlive][0] = next;
                live[nlive++][1] = sz;
            }
            next += sz + 4096;
        } else {
            uint32_t i = (uint32_t)rnd(nlive);
            uint64_t off = 4096 * rnd(live[i][1] / 4096);
            add(t, rnd(2) ? CW_OP_DECOMMIT : CW_OP_RELEASE, pid, live[i][0] + off,
                live[i][1] - off, -1, false, NULL);
            if (off == 0) {
                live[i][0] = live[nlive - 1][0];
                live[i][1] = live[--nlive][1];
            } else {
                live[i][1] = off;
            }
        }
    }
}

/* A child: start, a few commits (sometimes past the fold size), some
 * released, exit after `life` (or never). */
static void child(int64_t t, uint32_t pid)
{
    uint64_t r = rnd(100);
    int64_t life = r < 75   ? (int64_t)rnd(3 * S)
                   : r < 85 ? LIFETIME - 1 - (int64_t)rnd(S / 2)
                   : r < 95 ? LIFETIME + (int64_t)rnd(20 * S)
                            : CW_TS_NEVER;
    bool big = rnd(10) == 0;
    child_t *k = &kids[nkids++];
    *k = (child_t){pid, t, life == CW_TS_NEVER ? CW_TS_NEVER : t + life, 0, false};
    add(t, CW_OP_PROCESS_START, pid, 0, 0, -1, false, kid_names[rnd(4)]);
    int64_t end = life == CW_TS_NEVER ? t + 20 * S : t + life;
    uint64_t addr = 0x40000000;
    for (int n = (int)rnd(6); n >= 0; n--) {
        int64_t at = t + (int64_t)rnd((uint64_t)(end - t) + 1);
        uint64_t sz = big && n == 0 ? MAXBYTES : 4096 * (1 + rnd(8));
        add(at, CW_OP_COMMIT, pid, addr, sz, 2, false, NULL);
        if (rnd(2))
            add(at + (int64_t)rnd((uint64_t)(end - at) + 1), CW_OP_DECOMMIT, pid, addr, 4096, -1,
                false, NULL);
        k->bytes += sz;
        addr += sz + 4096;
    }
    if (life != CW_TS_NEVER) add(end, CW_OP_PROCESS_EXIT, pid, 0, 0, -1, false, NULL);
    k->folds = life != CW_TS_NEVER && life < LIFETIME && k->bytes < MAXBYTES;
}

static void generate(int64_t t0)
{
    long_lived(t0, 100, "db");
    long_lived(t0, 200, "web");
    uint32_t pid = 1000;
    for (int64_t t = t0 + S; t < t0 + SPAN - MIN && nkids < 4000;) {
        child(t, pid++);
        uint64_t r = rnd(100);
        /* bursts, steady spawning, and quiet gaps longer than the lifetime */
        t += r < 60 ? (int64_t)rnd(S / 4) : r < 97 ? (int64_t)rnd(3 * S) : 30 * S;
    }
    qsort(ev, nev, sizeof *ev, cmp_gen);
}

static uint32_t max_held;
static bool folding; /* the store being checked was filled with folding on */

/* Interns each event's stack (same order, so same ids) and feeds it;
 * notes how many batches the aggregator (when there is one) held. */
static void feed_all(cw_pipeline_t *pipe, cw_stacks_t *st, cw_agg_t *agg)
{
    cw_diag_t d = {{0}};
    for (uint32_t i = 0; i < nev; i++) {
        cw_event_t e = ev[i].ev;
        const char *fr[2] = {NULL, NULL};
        uint32_t n = 0;
        if (ev[i].stack >= 0) {
            fr[0] = frames[ev[i].stack][0];
            fr[1] = frames[ev[i].stack][1];
            n = 2;
        }
        if (e.op == CW_OP_COMMIT) ASSERT_OK(cw_stacks_intern_strings(st, fr, n, &e.stack_id));
        ASSERT_OK(cw_pipeline_feed(pipe, &e, &d));
        if (agg && cw_agg_held(agg) > max_held) max_held = cw_agg_held(agg);
    }
}

static void fill_store(cw_store_t *s, bool fold)
{
    test_fill_store(s, feed_all, fold ? LIFETIME : 0, fold ? MAXBYTES : 0);
}

static cw_report_t *exact(int64_t t0, int64_t t1)
{
    return test_exact(feed_all, t0, t1);
}

/* Figures that add up, plus outstanding at the end and events. */
typedef struct sums {
    cw_figs_t f;
    uint64_t out_end, events;
} sums_t;

static void sums_add(sums_t *a, const cw_proc_report_t *p)
{
    cw_figs_add(&a->f, &p->figs);
    a->out_end += p->outstanding_end;
    a->events += p->events;
}

static void sums_eq(const sums_t *a, const sums_t *b)
{
    ASSERT_U64_EQ(a->f.size_bytes, b->f.size_bytes);
    ASSERT_U64_EQ(a->f.commit_count, b->f.commit_count);
    for (int i = 0; i < CW_TYPE__COUNT; i++) {
        ASSERT_U64_EQ(a->f.types[i].bytes, b->f.types[i].bytes);
        ASSERT_U64_EQ(a->f.types[i].count, b->f.types[i].count);
    }
    ASSERT_U64_EQ(a->out_end, b->out_end);
    ASSERT_U64_EQ(a->events, b->events);
}

static const child_t *kid_of(uint32_t pid)
{
    return pid >= 1000 && pid - 1000 < nkids ? &kids[pid - 1000] : NULL;
}

static void check(cw_store_t *s, int64_t t0, int64_t t1)
{
    static const char *const names[] = {"db", "web", "true", "sleep", "grep", "date"};
    cw_report_t *db, *tr;
    cw_diag_t d = {{0}};
    ASSERT_OK(cw_store_report(s, t0, t1, false, &db, &d));
    tr = exact(t0, t1);
    sums_t mdb = {0}, mtr = {0};
    for (uint32_t i = 0; i < db->nprocs; i++)
        sums_add(&mdb, &db->procs[i]);
    for (uint32_t i = 0; i < tr->nprocs; i++)
        sums_add(&mtr, &tr->procs[i]);
    sums_eq(&mdb, &mtr);
    for (size_t n = 0; n < sizeof names / sizeof *names; n++) {
        sums_t a = {0}, b = {0};
        for (uint32_t i = 0; i < db->nprocs; i++)
            if (!strcmp(db->procs[i].name, names[n])) sums_add(&a, &db->procs[i]);
        for (uint32_t i = 0; i < tr->nprocs; i++)
            if (!strcmp(tr->procs[i].name, names[n])) sums_add(&b, &tr->procs[i]);
        sums_eq(&a, &b);
    }
    for (uint32_t i = 0; i < tr->nprocs; i++) {
        const cw_proc_report_t *x = &tr->procs[i], *y = NULL;
        const child_t *k = kid_of(x->pid);
        for (uint32_t j = 0; j < db->nprocs; j++)
            if (db->procs[j].id == x->id && !db->procs[j].folded) y = &db->procs[j];
        /* a folded instance is no line of its own, unless alone in its group */
        if (folding && k && k->folds && !y) continue;
        ASSERT_TRUE(y != NULL);
        ASSERT_EQ(y->pid, x->pid);
        ASSERT_U64_EQ(y->figs.size_bytes, x->figs.size_bytes);
        ASSERT_U64_EQ(y->figs.types[CW_AIFO].bytes, x->figs.types[CW_AIFO].bytes);
        ASSERT_U64_EQ(y->peak_bytes, x->peak_bytes);
        ASSERT_EQ(y->peak_ns, x->peak_ns);
        ASSERT_U64_EQ(y->outstanding_end, x->outstanding_end);
    }
    for (uint32_t j = 0; j < db->nprocs; j++)
        if (db->procs[j].folded) {
            ASSERT_EQ(db->procs[j].pid, 0);
            /* the group's peak bounds what it holds at the end */
            ASSERT_TRUE(db->procs[j].peak_bytes >= db->procs[j].outstanding_end);
        }
    cw_report_free(db);
    cw_report_free(tr);
}

static void windows(cw_store_t *s, int64_t lo, int64_t hi, int64_t w, int n)
{
    test_windows(s, lo, hi, w, n, 90, rnd, check);
}

/* Every instance that folds is listed in exactly one group, with its
 * times and bytes; the groups' counts add up. */
static void check_groups(cw_store_t *s, int64_t t0, int64_t end)
{
    cw_report_t *db;
    cw_diag_t d = {{0}};
    uint32_t expect = 0, listed = 0, counted = 0;
    static bool seen[4000];
    for (uint32_t i = 0; i < nkids; i++)
        expect += kids[i].folds;
    ASSERT_OK(cw_store_report(s, t0, end, false, &db, &d));
    for (uint32_t j = 0; j < db->nprocs; j++) {
        const cw_proc_report_t *g = &db->procs[j];
        cw_folded_list_t l;
        cw_proc_info_t info;
        ASSERT_OK(cw_store_proc_get(s, g->id, &info, &d));
        uint32_t members = info.folded;
        ASSERT_EQ(g->folded, members > 1 ? members : 0);
        ASSERT_EQ(info.pid == 0, members > 1);
        cw_proc_info_clear(&info);
        if (!members) continue;
        ASSERT_OK(cw_store_folded_list(s, g->id, INT64_MIN, INT64_MAX, 0, &l, &d));
        ASSERT_U64_EQ(l.total, members);
        ASSERT_U64_EQ(l.n, members);
        counted += members;
        for (size_t i = 0; i < l.n; i++) {
            const child_t *k = kid_of(l.v[i].pid);
            ASSERT_TRUE(k != NULL && k->folds && !seen[k->pid - 1000]);
            seen[k->pid - 1000] = true;
            ASSERT_EQ(l.v[i].start_ns, k->start);
            ASSERT_EQ(l.v[i].exit_ns, k->exit);
            ASSERT_U64_EQ(l.v[i].bytes, k->bytes);
            ASSERT_TRUE(l.v[i].start_ns >= g->start_ns && l.v[i].exit_ns <= g->exit_ns);
            if (i) ASSERT_TRUE(l.v[i].start_ns >= l.v[i - 1].start_ns);
            listed++;
        }
        cw_folded_list_clear(&l);
        /* a limit keeps the first ones and the total */
        ASSERT_OK(cw_store_folded_list(s, g->id, INT64_MIN, INT64_MAX, 1, &l, &d));
        ASSERT_U64_EQ(l.n, 1);
        ASSERT_U64_EQ(l.total, members);
        cw_folded_list_clear(&l);
    }
    ASSERT_EQ(listed, expect);
    ASSERT_EQ(counted, expect);
    ASSERT_TRUE(expect > 100);
    cw_report_free(db);
}

static int64_t count_procs(cw_store_t *s)
{
    int64_t n;
    cw_diag_t d = {{0}};
    ASSERT_OK(cw__store_query_int(s, "SELECT count(*) FROM processes", &n, &d));
    return n;
}

/* ---- runs of folded instances (store_fold.c, schema/010_folded_runs) ---- */

#define NREF 4000
#define NGROUP 3

/* What was put, in order: the reference the lists are checked against. */
static cw_row_folded_t ref[NREF];
static uint32_t nref;

static bool inst_eq(const cw_folded_inst_t *a, const cw_folded_inst_t *b)
{
    return a->pid == b->pid && a->start_ns == b->start_ns && a->exit_ns == b->exit_ns &&
           a->bytes == b->bytes;
}

static uint64_t rnd64(void)
{
    return test_rng_next();
}

/* Encoding: a round trip of random and extreme instances; every cut,
 * a wrong count or format, and random damage give CW_EPARSE (or, for
 * damage that still parses, instances), never a read past the data. */
static void test_run_codec(void)
{
    enum { M = 200 };
    cw_folded_inst_t v[M], *out = NULL;
    size_t n = 0, cap = 0;
    int64_t t = INT64_MIN;
    for (int i = 0; i < M; i++) {
        /* starts sorted from INT64_MIN, some equal; the last INT64_MAX */
        t += i == 0 ? 0 : rnd(4) == 0 ? 0 : (int64_t)rnd(UINT64_C(1) << rnd(50));
        int64_t life = rnd(8) == 0 ? (int64_t)rnd64() : (int64_t)rnd(5 * S);
        uint64_t bytes = rnd(3) == 0 ? rnd64() : rnd(2) ? rnd(300) * 4096 : rnd(1 << 20);
        v[i] = (cw_folded_inst_t){rnd(5) == 0 ? (uint32_t)rnd64() : 10000 + (uint32_t)rnd(40), t,
                                  (int64_t)((uint64_t)t + (uint64_t)life), bytes};
    }
    v[M - 1].start_ns = INT64_MAX;
    v[M - 2].bytes = UINT64_MAX;
    v[M - 3].bytes = 0;
    v[M - 4].pid = UINT32_MAX;
    v[M - 5].pid = 0;
    cw_buf_t b = {0};
    ASSERT_OK(cw__fold_encode(&b, v, M));
    size_t encoded = b.n;
    const unsigned char *p = (const unsigned char *)b.p;
    ASSERT_OK(cw__fold_decode(p, b.n, v[0].start_ns, M, &out, &n, &cap));
    ASSERT_OK(cw__fold_decode(p, b.n, v[0].start_ns, M, &out, &n, &cap)); /* appends */
    ASSERT_EQ((int64_t)n, 2 * M);
    for (int i = 0; i < 2 * M; i++)
        ASSERT_TRUE(inst_eq(&out[i], &v[i % M]));
    /* cut anywhere, or counted wrong: an error, nothing added */
    for (size_t len = 0; len < b.n; len++) {
        unsigned char *cut = malloc(len ? len : 1); /* exactly len: ASan sees a read past it */
        memcpy(cut, p, len);
        ASSERT_EQ(cw__fold_decode(cut, len, v[0].start_ns, M, &out, &n, &cap), CW_EPARSE);
        free(cut);
    }
    ASSERT_EQ(cw__fold_decode(p, b.n, v[0].start_ns, M - 1, &out, &n, &cap), CW_EPARSE);
    ASSERT_EQ(cw__fold_decode(p, b.n, v[0].start_ns, M + 1, &out, &n, &cap), CW_EPARSE);
    ASSERT_EQ(cw__fold_decode(NULL, 0, 0, 0, &out, &n, &cap), CW_EPARSE);
    /* a start past INT64_MAX */
    ASSERT_EQ(cw__fold_decode(p, b.n, v[0].start_ns + 1, M, &out, &n, &cap), CW_EPARSE);
    b.p[0] = 2;
    ASSERT_EQ(cw__fold_decode(p, b.n, v[0].start_ns, M, &out, &n, &cap), CW_EPARSE);
    ASSERT_EQ((int64_t)n, 2 * M);
    b.p[0] = 1;
    int parsed = 0;
    for (int k = 0; k < 2000; k++) {
        unsigned char *bad = malloc(b.n);
        memcpy(bad, p, b.n);
        for (int j = 0; j < 1 + (int)rnd(3); j++)
            bad[rnd(b.n)] ^= (unsigned char)(1 + rnd(255));
        size_t before = n;
        int rc = cw__fold_decode(bad, b.n, v[0].start_ns, M, &out, &n, &cap);
        ASSERT_TRUE(rc == 0 || rc == CW_EPARSE);
        ASSERT_EQ((int64_t)n, rc ? (int64_t)before : (int64_t)before + M);
        parsed += rc == 0;
        n = before;
        free(bad);
    }
    /* an empty run */
    b.n = 0;
    ASSERT_OK(cw__fold_encode(&b, NULL, 0));
    ASSERT_OK(cw__fold_decode((const unsigned char *)b.p, b.n, 0, 0, &out, &n, &cap));
    free(b.p);
    free(out);
    printf("run codec: %d instances in %zu bytes; %d of 2000 damaged copies still parsed\n", M,
           encoded, parsed);
}

/* The instances of group g alive in [from, to) as the table of one row
 * per instance answered: the last put of each (start, pid), by (start,
 * pid), the first `limit`. */
static void ref_list(uint32_t g, int64_t from, int64_t to, size_t limit, cw_folded_list_t *want)
{
    static cw_folded_inst_t v[NREF];
    size_t n = 0;
    for (uint32_t i = 0; i < nref; i++) {
        const cw_row_folded_t *r = &ref[i];
        if (r->group != g) continue;
        bool later = false;
        for (uint32_t j = i + 1; j < nref && !later; j++)
            later = ref[j].group == g && ref[j].start_ns == r->start_ns && ref[j].pid == r->pid;
        if (later || r->start_ns >= to || r->exit_ns < from) continue;
        size_t k = n++;
        while (k > 0 && (v[k - 1].start_ns > r->start_ns ||
                         (v[k - 1].start_ns == r->start_ns && v[k - 1].pid > r->pid))) {
            v[k] = v[k - 1];
            k--;
        }
        v[k] = (cw_folded_inst_t){r->pid, r->start_ns, r->exit_ns, r->bytes};
    }
    want->v = v;
    want->total = n;
    want->n = limit && n > limit ? limit : n;
}

static void same_lists(cw_store_t *s, int64_t lo, int64_t hi, int rounds)
{
    cw_diag_t d = {{0}};
    static const size_t limits[] = {0, 1, 7, 100};
    for (int k = 0; k < rounds; k++) {
        uint32_t g = 1 + (uint32_t)rnd(NGROUP);
        int64_t from = k == 0 ? INT64_MIN : lo + (int64_t)rnd((uint64_t)(hi - lo));
        int64_t to = k == 0 ? INT64_MAX : from + (int64_t)rnd((uint64_t)(hi - lo) / 4 + 1);
        size_t limit = limits[rnd(4)];
        cw_folded_list_t got, want;
        ASSERT_OK(cw_store_folded_list(s, g, from, to, limit, &got, &d));
        ref_list(g, from, to, limit, &want);
        ASSERT_U64_EQ(got.total, want.total);
        ASSERT_EQ((int64_t)got.n, (int64_t)want.n);
        for (size_t i = 0; i < got.n; i++)
            ASSERT_TRUE(inst_eq(&got.v[i], &want.v[i]));
        cw_folded_list_clear(&got);
    }
}

/* Batches of folded instances of three groups, each batch's starting up
 * to 3 s before its bucket (instances fold at their exits, not in the
 * order they started), some at equal starts (40 at one, more than a
 * run takes), one instance put again
 * within a batch (the later wins) and one in a later batch with a later
 * exit: every list equals the one-row-per-instance answer. */
static void fill_runs(cw_store_t *s, int64_t t0)
{
    cw_diag_t d = {{0}};
    cw_batch_t *b;
    nref = 0;
    for (int k = 0; k < 60; k++) {
        int64_t bucket = t0 + k * S;
        ASSERT_OK(cw_batch_create(bucket, S, &b));
        if (k == 0)
            for (uint32_t g = 1; g <= NGROUP; g++)
                ASSERT_OK(cw_batch_add_proc(b, g, 0, t0, t0 + 70 * S, kid_names[g], NULL));
        uint32_t m = (uint32_t)rnd(k % 7 == 0 ? 140 : 40);
        for (uint32_t i = 0; i < m && nref < NREF - 44; i++) {
            int64_t start = bucket - (int64_t)rnd(3 * S);
            if (nref && rnd(10) == 0) start = ref[nref - 1].start_ns;
            cw_row_folded_t r = {1 + (uint32_t)rnd(NGROUP), 20000 + (uint32_t)rnd(5000), start,
                                 start + 1 + (int64_t)rnd(2 * S),
                                 rnd(2) ? rnd(400) * 4096 : rnd(1 << 22)};
            ref[nref++] = r;
            ASSERT_OK(cw_batch_add_folded(b, &r));
        }
        for (uint32_t i = 0; k == 30 && i < 40; i++) { /* 40 starts at one instant */
            cw_row_folded_t r = {1, 30000 + i, bucket - S, bucket - S + 1 + (int64_t)rnd(S),
                                 rnd(400) * 4096};
            ref[nref++] = r;
            ASSERT_OK(cw_batch_add_folded(b, &r));
        }
        if (k == 20 || k == 40) { /* again, in this batch and in a later one */
            cw_row_folded_t r = ref[nref - 1 - (k == 40 ? 50 : 0)];
            r.exit_ns += 5 * S;
            r.bytes += 1;
            ref[nref++] = r;
            ASSERT_OK(cw_batch_add_folded(b, &r));
        }
        ASSERT_OK(cw_store_write(s, b, &d));
        cw_batch_free(b);
    }
}

/* A map of n page-aligned ranges at at_ns, and its encoding (owned by the caller). */
static void big_map(cw_map_t *m, uint32_t n, int64_t at_ns, unsigned char **blob, size_t *len)
{
    uint64_t addr = UINT64_C(0x7f0000000000);
    memset(m, 0, sizeof *m);
    m->at_ns = at_ns;
    for (uint32_t i = 0; i < n; i++) {
        addr += 4096 * rnd(64);
        uint64_t size = 4096 * (1 + rnd(256));
        ASSERT_OK(cw_map_push(m, addr, size, at_ns - (int64_t)rnd(600 * S), (uint32_t)rnd(40)));
        addr += size;
    }
    ASSERT_OK(cw_map_encode(m, blob, len));
}

static void same_map(const cw_map_t *a, const cw_map_t *b)
{
    ASSERT_EQ(a->n, b->n);
    ASSERT_EQ(a->nres, b->nres);
    for (uint32_t i = 0; i < a->n && i < b->n; i++)
        ASSERT_TRUE(a->v[i].addr == b->v[i].addr && a->v[i].size == b->v[i].size &&
                    a->v[i].commit_ns == b->v[i].commit_ns && a->v[i].stack_id == b->v[i].stack_id);
}

static int64_t sql_one(cw_store_t *s, const char *sql)
{
    int64_t v;
    cw_diag_t d = {{0}};
    ASSERT_OK(cw__store_query_int(s, sql, &v, &d));
    return v;
}

static void test_runs(const char *dir, int64_t t0)
{
    char path[300], path9[300], sql[800];
    cw_store_t *s = NULL, *u = NULL, *r = NULL;
    cw_diag_t d = {{0}};
    cw_store_opts_t o = {{0, 0, 0}, 0};
    snprintf(path, sizeof path, "%s/runs.db", dir);
    ASSERT_OK(cw_store_open(path, &o, &s, &d));
    fill_runs(s, t0);
    same_lists(s, t0 - 4 * S, t0 + 64 * S, 400);
    /* every put counted in its group's row, as one row per instance did */
    for (uint32_t g = 1; g <= NGROUP; g++) {
        int64_t puts = 0;
        for (uint32_t i = 0; i < nref; i++)
            puts += ref[i].group == g;
        snprintf(sql, sizeof sql, "SELECT folded FROM processes WHERE id = %u", g);
        ASSERT_EQ(sql_one(s, sql), puts);
    }
    /* runs of 32, more where instances share the last one's start (the
     * 40 of one start in one run), all instances in them once */
    ASSERT_TRUE(sql_one(s, "SELECT max(n) FROM folded") >= 40);
    ASSERT_TRUE(sql_one(s, "SELECT max(n) FROM folded") <= 40 + 32);
    ASSERT_EQ(sql_one(s, "SELECT sum(n) FROM folded"), (int64_t)nref - 2);
    /* 70 of one start, after every other of group 2: one run, not runs
     * that share their key (which would take each other in forever) */
    cw_batch_t *b70;
    ASSERT_OK(cw_batch_create(t0 + 61 * S, S, &b70));
    for (uint32_t i = 0; i < 70; i++) {
        cw_row_folded_t f = {2, 40000 + i, t0 + 61 * S, t0 + 61 * S + 1 + (int64_t)rnd(S), 4096};
        ref[nref++] = f;
        ASSERT_OK(cw_batch_add_folded(b70, &f));
    }
    ASSERT_OK(cw_store_write(s, b70, &d));
    cw_batch_free(b70);
    ASSERT_TRUE(sql_one(s, "SELECT max(n) FROM folded WHERE grp = 2") >= 70);
    same_lists(s, t0 - 4 * S, t0 + 64 * S, 100);
    int64_t runs = sql_one(s, "SELECT count(*) FROM folded");

    /* Schema 9's rows of the same instances, converted when the writer
     * opens the file: stopped after one group, readers refused, then
     * whole; maps snapshots kept as they were. */
    snprintf(path9, sizeof path9, "%s/runs9.db", dir);
    ASSERT_OK(cw__store_create_at_version(path9, 9, &d));
    sqlite3 *raw = NULL;
    ASSERT_EQ(sqlite3_open(path9, &raw), SQLITE_OK);
    snprintf(sql, sizeof sql,
             "ATTACH '%s' AS a; INSERT INTO main.processes SELECT * FROM a.processes; DETACH a;"
             "INSERT INTO map_snapshots VALUES (1, 5, 1, 4096, x'02010a01020a'),"
             "(1, 9, 0, 0, x'0200'), (2, 7, 1, 8192, x'02010002030a')",
             path);
    ASSERT_EQ(sqlite3_exec(raw, sql, NULL, NULL, NULL), SQLITE_OK);
    /* one snapshot of 3 - 4 KB (format 3): overflow pages in schema 9 */
    cw_map_t big, got = {0};
    unsigned char *blob;
    size_t blen;
    big_map(&big, 300, 11, &blob, &blen);
    ASSERT_TRUE(blen > 3 * 900 && blen < 4 * 900);
    sqlite3_stmt *ins = NULL;
    ASSERT_EQ(sqlite3_prepare_v2(raw, "INSERT INTO map_snapshots VALUES (3, 11, 300, 0, ?1)", -1,
                                 &ins, NULL),
              SQLITE_OK);
    sqlite3_bind_blob(ins, 1, blob, (int)blen, SQLITE_STATIC);
    ASSERT_EQ(sqlite3_step(ins), SQLITE_DONE);
    sqlite3_finalize(ins);
    free(blob);
    ASSERT_EQ(sqlite3_exec(raw, "BEGIN", NULL, NULL, NULL), SQLITE_OK);
    ASSERT_EQ(sqlite3_prepare_v2(raw,
                                 "INSERT INTO folded(grp, start_ns, pid, exit_ns, bytes) "
                                 "VALUES (?1, ?2, ?3, ?4, ?5) ON CONFLICT(grp, start_ns, pid) DO "
                                 "UPDATE SET exit_ns = excluded.exit_ns, bytes = excluded.bytes",
                                 -1, &ins, NULL),
              SQLITE_OK);
    for (uint32_t i = 0; i < nref; i++) {
        const int64_t v[] = {ref[i].group, ref[i].start_ns, ref[i].pid, ref[i].exit_ns,
                             (int64_t)ref[i].bytes};
        for (int c = 0; c < 5; c++)
            sqlite3_bind_int64(ins, c + 1, v[c]);
        ASSERT_EQ(sqlite3_step(ins), SQLITE_DONE);
        sqlite3_reset(ins);
    }
    sqlite3_finalize(ins);
    ASSERT_EQ(sqlite3_exec(raw, "COMMIT", NULL, NULL, NULL), SQLITE_OK);
    sqlite3_close(raw);

    cw__store_upgrade_stop_after = 1;
    ASSERT_EQ(cw_store_open(path9, &o, &u, &d), CW_EIO);
    ASSERT_TRUE(strstr(d.msg, "goes on at the next start") != NULL);
    cw__store_upgrade_stop_after = 0;
    ASSERT_EQ(cw_store_open_readonly(path9, &r, &d), CW_EDB);
    ASSERT_TRUE(strstr(d.msg, "being converted") != NULL);
    ASSERT_OK(cw_store_open(path9, &o, &u, &d));
    ASSERT_EQ(sql_one(u, "SELECT count(*) FROM sqlite_schema WHERE name = 'v9_folded'"), 0);
    ASSERT_EQ(sql_one(u, "SELECT sum(n) FROM folded"), (int64_t)nref - 2);
    ASSERT_EQ(sql_one(u, "SELECT sum(folded) FROM processes"),
              sql_one(s, "SELECT sum(folded) FROM processes"));
    /* the one put again across batches lists its later exit, as the old rows did */
    same_lists(u, t0 - 4 * S, t0 + 64 * S, 400);
    ASSERT_EQ(sql_one(u, "SELECT count(*) FROM map_snapshots"), 4);
    ASSERT_EQ(sql_one(u, "SELECT sum(bytes) FROM map_snapshots"), 12288);
    cw_map_t m = {0};
    ASSERT_OK(cw_store_map_at(u, 1, 8, &m, &d));
    ASSERT_EQ((int64_t)m.n, 1);
    ASSERT_EQ((int64_t)m.v[0].addr, 10);
    ASSERT_EQ((int64_t)m.v[0].size, 1);
    ASSERT_EQ(m.at_ns, 5);
    ASSERT_OK(cw_store_map_at(u, 1, 9, &m, &d));
    ASSERT_EQ((int64_t)m.n, 0);
    ASSERT_EQ(m.at_ns, 9);
    ASSERT_EQ(cw_store_map_at(u, 2, 6, &m, &d), CW_ENOENT);
    cw_map_clear(&m);
    /* the big one read back whole, from its table page */
    ASSERT_EQ(sql_one(u, "SELECT count(*) FROM map_snapshots WHERE proc = 3"), 1);
    ASSERT_OK(cw_store_map_at(u, 3, 12, &got, &d));
    ASSERT_EQ(got.at_ns, 11);
    same_map(&got, &big);
    cw_map_clear(&big);
    /* the writer's, then replaced at the same instant by a smaller one */
    for (int k = 0; k < 2; k++) {
        cw_batch_t *bt;
        cw_row_map_t mr = {4, 0, 20 * S, 0, NULL, 0};
        big_map(&big, k ? 10 : 150, 20 * S, &mr.blob, &mr.len);
        mr.nranges = big.n;
        ASSERT_TRUE(k ? mr.len < 900 : mr.len > 900 && mr.len < 1800);
        ASSERT_OK(cw_batch_create((20 + k) * S, S, &bt));
        ASSERT_OK(cw_batch_add_map(bt, &mr));
        ASSERT_OK(cw_store_write(u, bt, &d));
        cw_batch_free(bt);
        ASSERT_EQ(sql_one(u, "SELECT count(*) FROM map_snapshots WHERE proc = 4"), 1);
        ASSERT_OK(cw_store_map_at(u, 4, INT64_MAX, &got, &d));
        same_map(&got, &big);
        cw_map_clear(&big);
    }
    /* one cut short is an error that says so */
    ASSERT_OK(cw__store_exec(u, "UPDATE map_snapshots SET ranges = substr(ranges, 1, 2000) "
                             "WHERE proc = 3", "damaging", &d));
    ASSERT_EQ(cw_store_map_at(u, 3, 12, &got, &d), CW_EPARSE);
    ASSERT_TRUE(strstr(d.msg, "cut short") != NULL);
    cw_map_clear(&got);
    /* a damaged run is an error that says so */
    ASSERT_OK(cw__store_exec(u, "UPDATE folded SET data = substr(data, 1, 5) WHERE grp = 2",
                             "damaging", &d));
    cw_folded_list_t l;
    ASSERT_EQ(cw_store_folded_list(u, 2, INT64_MIN, INT64_MAX, 0, &l, &d), CW_EDB);
    ASSERT_TRUE(strstr(d.msg, "damaged") != NULL);
    ASSERT_TRUE(l.v == NULL && l.n == 0);
    cw_store_close(u);
    cw_store_close(s);
    printf("runs: %u instances put, %lld runs\n", nref, (long long)runs);
}

int main(void)
{
    char dir[256], path[300];
    snprintf(dir, sizeof dir, "%s/cw_test_store_fold_XXXXXX", cw_test_tmpdir());
    ASSERT_TRUE(cw_test_mkdtemp(dir) != NULL);
    int64_t t0 = INT64_C(1700000000) * S + 17 * MIN; /* groups straddle an hour */
    /* CW_FOLD_SEED=N replays another workload */
    const char *seed_env = getenv("CW_FOLD_SEED");
    uint64_t seed = seed_env ? strtoull(seed_env, NULL, 10) : 12;
    test_rng_seed(seed, 0x666f6c64);
    generate(t0);
    int64_t end = ev[nev - 1].ev.ts - ev[nev - 1].ev.ts % S + S;

    cw_store_t *s;
    cw_diag_t d = {{0}};
    cw_store_opts_t o = {{0, 0, 0}, 0};

    snprintf(path, sizeof path, "%s/fold.db", dir);
    ASSERT_OK(cw_store_open(path, &o, &s, &d));
    folding = true;
    fill_store(s, true);
    /* held back at most the lifetime, plus the bucket that was open */
    ASSERT_TRUE(max_held >= 2 && max_held <= LIFETIME / S + 2);
    check(s, t0 - t0 % S, end);
    windows(s, t0 - MIN, end + MIN, S, 60);
    windows(s, t0, end, MIN, 20);
    check_groups(s, t0, end);
    int64_t folded_rows = count_procs(s);
    cw_store_close(s);

    snprintf(path, sizeof path, "%s/plain.db", dir);
    ASSERT_OK(cw_store_open(path, &o, &s, &d));
    folding = false;
    fill_store(s, false);
    int64_t plain_rows = count_procs(s);
    ASSERT_EQ(plain_rows, (int64_t)nkids + 2);
    check(s, t0 - t0 % S, end);
    windows(s, t0, end, MIN, 5);
    cw_store_close(s);
    /* one row per instance that does not fold, one per group: four names
     * whose starts span two hours */
    int64_t keep = 2;
    for (uint32_t i = 0; i < nkids; i++)
        keep += !kids[i].folds;
    ASSERT_TRUE(folded_rows > keep && folded_rows <= keep + 8);

    test_run_codec();
    test_runs(dir, t0);

    ASSERT_OK(cw_test_rmtree(dir));
    printf("seed %llu: %u events, %u children, %lld process rows folded, %lld not, %u batches held at most\n",
           (unsigned long long)seed, nev, nkids, (long long)folded_rows, (long long)plain_rows, max_held);
    TEST_DONE();
}
