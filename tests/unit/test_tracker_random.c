/* test_tracker_random.c - the tracker and the window analyzer against a
 * reference model, over many random traces.
 *
 * The model is deliberately naive: per process instance, an array saying
 * which commit event owns each page; a commit takes the pages nobody owns,
 * a decommit/release/exit frees the owned pages of its range, and every
 * (commit event, freeing event) pair with bytes is one piece. Figures of a
 * window are then computed straight from ARCHITECTURE.md's definitions:
 * Size and Count from the commit events in the window, the four types from
 * the pieces' commit and free times, peak by replaying each instance's
 * outstanding bytes over the window's instants.
 *
 * Random traces mix overlapping commits, commits over committed pages,
 * decommits that split pieces (or hit nothing), releases, reserves,
 * process starts (pid reuse, with or without an exit first), exits, events
 * for unannounced pids and after exits, rundown commits, and (one trace in
 * three) the end of a run that ends every live instance, with many equal
 * timestamps. Windows are random (aligned to nothing), empty, one
 * instant wide, or exactly on event times. Every figure of every process
 * and of every (process, stack) is compared; so are the tracker's live
 * outstanding bytes and piece counts after every event.
 *
 * Fixed seeds; set CW_RANDOM_TRACES=N for a longer run, CW_RANDOM_SEED=S
 * to replay one trace (its seed is printed on failure). */
#include <inttypes.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "commitwatch/analysis.h"
#include "commitwatch/report.h"
#include "commitwatch/stacks.h"
#include "commitwatch/tagger.h"
#include "commitwatch/tracker.h"
#include "rng.h"
#include "test.h"

#define PAGE 4096u
#define NPAGES 40 /* address space of a process, in pages */
#define MAXLEN 12 /* longest range, in pages */
#define NPIDS 4
#define MAXEV 600
#define MAXREC (MAXEV + 8)
#define MAXINST (MAXEV + NPIDS)
#define MAXPIECE (MAXEV * 16)
#define NWIN 12
#define NSTACKS 5 /* + the rundown pseudo-stack */

/* ---- the reference model ----------------------------------------------- */

typedef struct m_rec {
    uint32_t inst;
    int64_t a;    /* CW_TS_BEFORE for rundown */
    uint32_t seq; /* index of the commit event */
    uint32_t stack;
    uint64_t bytes;
} m_rec_t;

typedef struct m_piece {
    uint32_t rec;
    int64_t f; /* CW_TS_NEVER while live */
    uint64_t bytes;
} m_piece_t;

/* One change of an instance's outstanding bytes, at one event. */
typedef struct m_step {
    int64_t ts;
    int64_t delta;
} m_step_t;

typedef struct m_inst {
    uint32_t id, pid;
    char name[32];
    int64_t start, exit;
    bool alive;
    int owner[NPAGES + MAXLEN]; /* rec index or -1 */
    m_step_t *steps;            /* one per event of this instance */
    uint32_t nsteps;
    uint64_t rundown_bytes; /* outstanding "since forever" */
} m_inst_t;

typedef struct model {
    m_inst_t inst[MAXINST];
    uint32_t ninst;
    int live[NPIDS]; /* pid slot -> live instance or -1 */
    m_rec_t rec[MAXREC];
    uint32_t nrec;
    m_piece_t piece[MAXPIECE];
    uint32_t npiece;
    uint32_t seq;
} model_t;

static model_t M;
static uint32_t first_id;

static uint32_t pid_of_slot(uint32_t s)
{
    return 100 + s * 4;
}

static m_inst_t *m_new_inst(uint32_t slot, int64_t ts, const char *name)
{
    m_inst_t *in = &M.inst[M.ninst];
    free(in->steps);
    memset(in, 0, sizeof *in);
    in->id = first_id + M.ninst;
    in->pid = pid_of_slot(slot);
    if (name)
        snprintf(in->name, sizeof in->name, "%s", name);
    else
        snprintf(in->name, sizeof in->name, "pid %u", in->pid);
    in->start = ts;
    in->exit = CW_TS_NEVER;
    in->alive = true;
    in->steps = calloc(MAXEV * 2, sizeof *in->steps);
    for (int i = 0; i < NPAGES + MAXLEN; i++)
        in->owner[i] = -1;
    M.live[slot] = (int)M.ninst++;
    return in;
}

static void m_step(m_inst_t *in, int64_t ts, int64_t delta)
{
    in->steps[in->nsteps++] = (m_step_t){ts, delta};
}

/* Frees the owned pages of [p0, p1) at ts: one piece per commit record. */
static int64_t m_free(m_inst_t *in, int p0, int p1, int64_t ts)
{
    uint64_t by[MAXREC];
    uint32_t touched[MAXREC], nt = 0;
    int64_t freed = 0;
    for (int p = p0; p < p1; p++) {
        int r = in->owner[p];
        if (r < 0) continue;
        bool seen = false;
        for (uint32_t k = 0; k < nt; k++)
            if (touched[k] == (uint32_t)r) {
                by[k] += PAGE;
                seen = true;
            }
        if (!seen) {
            touched[nt] = (uint32_t)r;
            by[nt++] = PAGE;
        }
        in->owner[p] = -1;
        freed += PAGE;
    }
    for (uint32_t k = 0; k < nt; k++)
        M.piece[M.npiece++] = (m_piece_t){touched[k], ts, by[k]};
    return freed;
}

static void m_end(m_inst_t *in, int64_t ts)
{
    int64_t freed = m_free(in, 0, NPAGES + MAXLEN, ts);
    m_step(in, ts, -freed);
    in->exit = ts;
    in->alive = false;
}

static m_inst_t *m_live_or_implicit(uint32_t slot, int64_t ts)
{
    if (M.live[slot] >= 0) return &M.inst[M.live[slot]];
    return m_new_inst(slot, ts, NULL);
}

static void m_apply(const cw_event_t *ev, uint32_t slot)
{
    m_inst_t *in;
    int p0 = (int)(ev->addr / PAGE), p1 = (int)((ev->addr + ev->size) / PAGE);
    switch (ev->op) {
    case CW_OP_PROCESS_START:
        if (M.live[slot] >= 0) m_end(&M.inst[M.live[slot]], ev->ts);
        in = m_new_inst(slot, ev->ts, ev->name);
        m_step(in, ev->ts, 0);
        break;
    case CW_OP_PROCESS_EXIT:
        in = m_live_or_implicit(slot, ev->ts);
        m_end(in, ev->ts);
        M.live[slot] = -1;
        break;
    case CW_OP_COMMIT: {
        in = m_live_or_implicit(slot, ev->ts);
        uint64_t bytes = 0;
        for (int p = p0; p < p1; p++)
            if (in->owner[p] < 0) {
                in->owner[p] = (int)M.nrec;
                bytes += PAGE;
            }
        if (bytes) {
            M.rec[M.nrec++] =
                (m_rec_t){(uint32_t)(in - M.inst), ev->rundown ? CW_TS_BEFORE : ev->ts, M.seq,
                          ev->stack_id, bytes};
            if (ev->rundown) in->rundown_bytes += bytes;
        }
        m_step(in, ev->ts, ev->rundown ? 0 : (int64_t)bytes);
        break;
    }
    case CW_OP_DECOMMIT:
    case CW_OP_RELEASE:
        in = m_live_or_implicit(slot, ev->ts);
        m_step(in, ev->ts, -m_free(in, p0, p1, ev->ts));
        break;
    case CW_OP_RESERVE:
        in = m_live_or_implicit(slot, ev->ts);
        m_step(in, ev->ts, 0);
        break;
    default:
        CW_FAIL("bad op");
    }
    M.seq++;
}

static void m_finish(void)
{
    for (uint32_t i = 0; i < M.ninst; i++) {
        m_inst_t *in = &M.inst[i];
        if (!in->alive) continue;
        uint64_t by[MAXREC] = {0};
        for (int p = 0; p < NPAGES + MAXLEN; p++)
            if (in->owner[p] >= 0) by[in->owner[p]] += PAGE;
        for (uint32_t r = 0; r < M.nrec; r++)
            if (by[r]) M.piece[M.npiece++] = (m_piece_t){r, CW_TS_NEVER, by[r]};
    }
}

static uint64_t m_outstanding(const m_inst_t *in)
{
    uint64_t n = 0;
    for (int p = 0; p < NPAGES + MAXLEN; p++)
        if (in->owner[p] >= 0) n += PAGE;
    return n;
}

/* Maximal runs of pages with one owner: the tracker's pieces in its map. */
static uint64_t m_runs(const m_inst_t *in)
{
    uint64_t n = 0;
    for (int p = 0; p < NPAGES + MAXLEN; p++)
        if (in->owner[p] >= 0 && (p == 0 || in->owner[p - 1] != in->owner[p])) n++;
    return n;
}

/* Figures of one window for instance i (all stacks, or one). */
typedef struct m_figs {
    cw_figs_t figs;
    uint64_t peak;
    int64_t peak_ns;
    uint64_t events;
    uint64_t out_t0;
} m_figs_t;

static void m_window(uint32_t i, int64_t t0, int64_t t1, int64_t stack, m_figs_t *o)
{
    memset(o, 0, sizeof *o);
    for (uint32_t r = 0; r < M.nrec; r++) {
        const m_rec_t *c = &M.rec[r];
        if (c->inst != i || (stack >= 0 && c->stack != (uint32_t)stack)) continue;
        if (c->a >= t0 && c->a < t1) {
            o->figs.size_bytes += c->bytes;
            o->figs.commit_count++;
        }
    }
    for (uint32_t k = 0; k < M.npiece; k++) {
        const m_piece_t *pc = &M.piece[k];
        const m_rec_t *c = &M.rec[pc->rec];
        if (c->inst != i || (stack >= 0 && c->stack != (uint32_t)stack)) continue;
        int type;
        if (c->a >= t1) continue;
        if (c->a >= t0)
            type = pc->f < t1 ? CW_AIFI : CW_AIFO;
        else if (pc->f < t0)
            continue;
        else
            type = pc->f < t1 ? CW_AOFI : CW_AOFO;
        o->figs.types[type].bytes += pc->bytes;
        o->figs.types[type].count++;
    }
    if (stack >= 0) return;
    /* Peak: outstanding at t0 (rundown counts from the beginning of time),
     * then after each of the instance's events in the window. */
    const m_inst_t *in = &M.inst[i];
    int64_t cur = (int64_t)in->rundown_bytes;
    uint32_t s = 0;
    for (; s < in->nsteps && in->steps[s].ts < t0; s++)
        cur += in->steps[s].delta;
    o->out_t0 = (uint64_t)cur;
    o->peak = (uint64_t)cur;
    o->peak_ns = t0;
    for (; s < in->nsteps && in->steps[s].ts < t1; s++) {
        cur += in->steps[s].delta;
        o->events++;
        if ((uint64_t)cur > o->peak) {
            o->peak = (uint64_t)cur;
            o->peak_ns = in->steps[s].ts;
        }
    }
    /* The state at t0 is reached no earlier than the instance started. */
    if (o->peak_ns < in->start) o->peak_ns = in->start;
}

/* ---- the system under test: one tracker, one analysis per window ---------- */

typedef struct fan {
    cw_tracker_sink_t sinks[NWIN];
    int n;
    uint64_t commits, releases, lives;
    uint64_t committed_bytes, released_bytes, live_bytes;
} fan_t;

static void f_start(void *ctx, const cw_proc_t *p, int64_t ts)
{
    fan_t *f = ctx;
    for (int i = 0; i < f->n; i++)
        f->sinks[i].on_start(f->sinks[i].ctx, p, ts);
}
static void f_event(void *ctx, const cw_proc_t *p, int64_t ts)
{
    fan_t *f = ctx;
    for (int i = 0; i < f->n; i++)
        f->sinks[i].on_event(f->sinks[i].ctx, p, ts);
}
static void f_commit(void *ctx, const cw_proc_t *p, const cw_commit_t *c, int64_t ts)
{
    fan_t *f = ctx;
    f->commits++;
    f->committed_bytes += c->bytes;
    for (int i = 0; i < f->n; i++)
        f->sinks[i].on_commit(f->sinks[i].ctx, p, c, ts);
}
static void f_release(void *ctx, const cw_proc_t *p, const cw_commit_t *c, uint64_t bytes,
                      int64_t ts)
{
    fan_t *f = ctx;
    f->releases++;
    f->released_bytes += bytes;
    ASSERT_TRUE(bytes > 0);
    for (int i = 0; i < f->n; i++)
        f->sinks[i].on_release(f->sinks[i].ctx, p, c, bytes, ts);
}
static void f_exit(void *ctx, const cw_proc_t *p, int64_t ts)
{
    fan_t *f = ctx;
    for (int i = 0; i < f->n; i++)
        f->sinks[i].on_exit(f->sinks[i].ctx, p, ts);
}
static void f_live(void *ctx, const cw_proc_t *p, const cw_commit_t *c)
{
    fan_t *f = ctx;
    f->lives++;
    f->live_bytes += c->remaining;
    for (int i = 0; i < f->n; i++)
        f->sinks[i].on_live(f->sinks[i].ctx, p, c);
}

static cw_stacks_t *stacks;
static cw_tagger_t *tagger;
/* The stacks a trace uses: 0 (no stack), NSTACKS real ones, and last the
 * rundown pseudo-stack "(before trace)". */
static uint32_t stack_ids[NSTACKS + 2];
#define RUNDOWN_STACK (NSTACKS + 1)
static uint64_t seed_now;
static int64_t win[NWIN][2];

#define CHECK(what, got, want)                                                                     \
    do {                                                                                           \
        long long cw__g = (long long)(got), cw__w = (long long)(want);                             \
        cw_test_checks++;                                                                          \
        if (cw__g != cw__w)                                                                        \
            CW_FAIL("seed %" PRIu64 " window [%" PRId64 ", %" PRId64                               \
                    "): %s: got %lld, model %lld",                                                 \
                    seed_now, t0, t1, what, cw__g, cw__w);                                         \
    } while (0)

static void compare_figs(const cw_figs_t *g, const cw_figs_t *w, int64_t t0, int64_t t1,
                         const char *who)
{
    static const char *const tn[] = {"AIFI", "AIFO", "AOFI", "AOFO"};
    char what[160];
    snprintf(what, sizeof what, "%s size", who);
    CHECK(what, g->size_bytes, w->size_bytes);
    snprintf(what, sizeof what, "%s commit count", who);
    CHECK(what, g->commit_count, w->commit_count);
    for (int k = 0; k < CW_TYPE__COUNT; k++) {
        snprintf(what, sizeof what, "%s %s bytes", who, tn[k]);
        CHECK(what, g->types[k].bytes, w->types[k].bytes);
        snprintf(what, sizeof what, "%s %s count", who, tn[k]);
        CHECK(what, g->types[k].count, w->types[k].count);
    }
}

static bool figs_empty(const cw_figs_t *f)
{
    if (f->size_bytes || f->commit_count) return false;
    for (int k = 0; k < CW_TYPE__COUNT; k++)
        if (f->types[k].bytes || f->types[k].count) return false;
    return true;
}

static void compare_report(const cw_report_t *r, int64_t t0, int64_t t1)
{
    CHECK("report from", r->from_ns, t0);
    CHECK("report to", r->to_ns, t1);
    uint32_t want = 0;
    for (uint32_t i = 0; i < M.ninst; i++) {
        m_figs_t m;
        m_window(i, t0, t1, -1, &m);
        /* DESIGN.md "Reported processes": an event in the window, or alive
         * during it (started before to) with outstanding commit at from. */
        bool reported = m.events > 0 || (m.out_t0 > 0 && M.inst[i].start < t1);
        const cw_proc_report_t *p = NULL;
        for (uint32_t k = 0; k < r->nprocs; k++)
            if (r->procs[k].id == M.inst[i].id) p = &r->procs[k];
        char who[96];
        snprintf(who, sizeof who, "instance %u (pid %u, %s)", M.inst[i].id, M.inst[i].pid,
                 M.inst[i].name);
        char what[160];
        snprintf(what, sizeof what, "%s reported", who);
        CHECK(what, p != NULL, reported);
        if (!p) continue;
        want++;
        snprintf(what, sizeof what, "%s pid", who);
        CHECK(what, p->pid, M.inst[i].pid);
        if (strcmp(p->name, M.inst[i].name) != 0)
            CW_FAIL("seed %" PRIu64 ": %s: name \"%s\"", seed_now, who, p->name);
        snprintf(what, sizeof what, "%s start_ns", who);
        CHECK(what, p->start_ns, M.inst[i].start);
        snprintf(what, sizeof what, "%s exit_ns", who);
        CHECK(what, p->exit_ns, M.inst[i].exit);
        snprintf(what, sizeof what, "%s events", who);
        CHECK(what, p->events, m.events);
        snprintf(what, sizeof what, "%s peak", who);
        CHECK(what, p->peak_bytes, m.peak);
        snprintf(what, sizeof what, "%s peak_ns", who);
        CHECK(what, p->peak_ns, m.peak_ns);
        snprintf(what, sizeof what, "%s outstanding_end", who);
        CHECK(what, p->outstanding_end, m.figs.types[CW_AIFO].bytes + m.figs.types[CW_AOFO].bytes);
        compare_figs(&p->figs, &m.figs, t0, t1, who);
        /* Per stack: every stack with figures, and no other. */
        uint32_t nst = 0;
        for (uint32_t s = 0; s <= RUNDOWN_STACK; s++) {
            m_figs_t ms;
            m_window(i, t0, t1, stack_ids[s], &ms);
            const cw_stack_report_t *sr = NULL;
            for (uint32_t k = 0; k < p->nstacks; k++)
                if (p->stacks[k].stack_id == stack_ids[s]) sr = &p->stacks[k];
            char sw[128];
            snprintf(sw, sizeof sw, "%s stack %u", who, stack_ids[s]);
            if (!sr) {
                if (!figs_empty(&ms.figs))
                    CW_FAIL("seed %" PRIu64 " window [%" PRId64 ", %" PRId64 "): %s missing",
                            seed_now, t0, t1, sw);
                continue;
            }
            nst++;
            compare_figs(&sr->figs, &ms.figs, t0, t1, sw);
            if (s == RUNDOWN_STACK && strcmp(sr->tag, "(before trace)") != 0)
                CW_FAIL("seed %" PRIu64 ": rundown stack tagged \"%s\"", seed_now, sr->tag);
        }
        snprintf(what, sizeof what, "%s stacks", who);
        CHECK(what, p->nstacks, nst);
    }
    CHECK("reported processes", r->nprocs, want);
}

/* ---- random traces ------------------------------------------------------- */

static const char *const names[] = {"a.exe", "b.exe", "svchost.exe", "MemoryTestApp.exe"};

static void one_trace(uint64_t seed, uint32_t nev)
{
    test_rng_seed(seed, 7);
    seed_now = seed;
    for (uint32_t i = 0; i < M.ninst; i++) {
        free(M.inst[i].steps);
        M.inst[i].steps = NULL;
    }
    memset(&M, 0, sizeof M);
    for (int s = 0; s < NPIDS; s++)
        M.live[s] = -1;
    first_id = 1 + test_rng_below(5);

    /* Events first (the windows need their times). */
    static cw_event_t evs[MAXEV];
    static uint32_t slots[MAXEV];
    int64_t ts = 1000 + test_rng_below(50);
    bool tracing_started = false;
    for (uint32_t k = 0; k < nev; k++) {
        cw_event_t *ev = &evs[k];
        memset(ev, 0, sizeof *ev);
        if (test_rng_below(3) == 0) ts += 1 + test_rng_below(40); /* else: the same time */
        ev->ts = ts;
        uint32_t slot = test_rng_below(NPIDS);
        slots[k] = slot;
        ev->pid = pid_of_slot(slot);
        uint32_t r = test_rng_below(100);
        uint32_t p0 = test_rng_below(NPAGES), len = 1 + test_rng_below(MAXLEN);
        ev->addr = (uint64_t)p0 * PAGE;
        ev->size = (uint64_t)len * PAGE;
        if (!tracing_started && r < 50) {
            /* The start of a trace: processes and their rundown. */
            ev->op = test_rng_below(3) ? CW_OP_COMMIT : CW_OP_PROCESS_START;
            ev->rundown = ev->op == CW_OP_COMMIT;
            ev->stack_id = stack_ids[RUNDOWN_STACK];
            if (ev->op == CW_OP_PROCESS_START) ev->name = names[test_rng_below(4)];
            continue;
        }
        tracing_started = true;
        if (r < 36) {
            ev->op = CW_OP_COMMIT;
            ev->stack_id = stack_ids[1 + test_rng_below(NSTACKS)];
        } else if (r < 60) {
            ev->op = CW_OP_DECOMMIT;
        } else if (r < 72) {
            ev->op = CW_OP_RELEASE;
        } else if (r < 77) {
            ev->op = CW_OP_RESERVE;
        } else if (r < 85) {
            ev->op = CW_OP_PROCESS_START; /* a new process, or pid reuse */
            ev->name = names[test_rng_below(4)];
        } else if (r < 91) {
            ev->op = CW_OP_PROCESS_EXIT;
        } else if (r < 94) {
            ev->op = CW_OP_COMMIT; /* a late rundown commit: still "before trace" */
            ev->rundown = true;
            ev->stack_id = stack_ids[RUNDOWN_STACK];
        } else {
            ev->op = CW_OP_COMMIT; /* a commit with no stack */
            ev->stack_id = 0;
        }
    }
    int64_t lo = evs[0].ts, hi = evs[nev - 1].ts;

    /* Windows: whole, random, on event times, one instant, empty. */
    int nw = 0;
    win[nw][0] = lo;
    win[nw][1] = hi + 1;
    nw++;
    win[nw][0] = INT64_MIN / 2;
    win[nw][1] = INT64_MAX / 2;
    nw++;
    while (nw < NWIN) {
        int64_t a, b;
        uint32_t kind = test_rng_below(4);
        if (kind == 0) {
            a = evs[test_rng_below(nev)].ts;
            b = evs[test_rng_below(nev)].ts;
        } else if (kind == 1) {
            a = evs[test_rng_below(nev)].ts;
            b = a + 1;
        } else {
            a = lo - 20 + (int64_t)test_rng_below((uint32_t)(hi - lo + 40));
            b = lo - 20 + (int64_t)test_rng_below((uint32_t)(hi - lo + 40));
        }
        if (a > b) {
            int64_t t = a;
            a = b;
            b = t;
        }
        if (a == b) b++;
        win[nw][0] = a;
        win[nw][1] = b;
        nw++;
    }

    fan_t fan;
    memset(&fan, 0, sizeof fan);
    cw_analysis_t *an[NWIN];
    for (int w = 0; w < nw; w++) {
        ASSERT_OK(cw_analysis_create(win[w][0], win[w][1], &an[w]));
        fan.sinks[w] = cw_analysis_sink(an[w]);
    }
    fan.n = nw;
    cw_tracker_sink_t sink = {&fan, f_start, f_event, f_commit, f_release, f_exit, f_live};
    cw_tracker_t *t;
    ASSERT_OK(cw_tracker_create(&sink, first_id, &t));

    for (uint32_t k = 0; k < nev; k++) {
        ASSERT_OK(cw_tracker_apply(t, &evs[k]));
        m_apply(&evs[k], slots[k]);
        /* Live state after every event. */
        uint32_t nlive = 0;
        for (uint32_t s = 0; s < NPIDS; s++) {
            const cw_proc_t *p = cw_tracker_find(t, pid_of_slot(s));
            if (M.live[s] < 0) {
                if (p)
                    CW_FAIL("seed %" PRIu64 " event %u: pid %u should have no live instance", seed,
                            k, pid_of_slot(s));
                continue;
            }
            nlive++;
            const m_inst_t *in = &M.inst[M.live[s]];
            if (!p)
                CW_FAIL("seed %" PRIu64 " event %u: pid %u has no live instance", seed, k, in->pid);
            if (p->id != in->id || p->outstanding != m_outstanding(in) ||
                cw_tracker_piece_count(t, in->pid) != m_runs(in) || p->start_ns != in->start ||
                strcmp(p->name, in->name) != 0)
                CW_FAIL(
                    "seed %" PRIu64 " event %u (ts %" PRId64 " op %s pid %u): tracker says id %u "
                    "outstanding %" PRIu64 " pieces %" PRIu64 " start %" PRId64 " \"%s\"; model "
                    "id %u outstanding %" PRIu64 " pieces %" PRIu64 " start %" PRId64 " \"%s\"",
                    seed, k, evs[k].ts, cw_op_name(evs[k].op), evs[k].pid, p->id, p->outstanding,
                    cw_tracker_piece_count(t, in->pid), p->start_ns, p->name, in->id,
                    m_outstanding(in), m_runs(in), in->start, in->name);
            if (p->implicit != (strncmp(in->name, "pid ", 4) == 0))
                CW_FAIL("seed %" PRIu64 " event %u: implicit flag", seed, k);
        }
        ASSERT_EQ(cw_tracker_live_processes(t), nlive);
        ASSERT_EQ(cw_tracker_next_proc_id(t), first_id + M.ninst);
    }
    if (seed % 3 == 0) {
        /* The end of a run (cw_tracker_end_all): every live instance ends
         * as by an exit, a little after the last event. */
        int64_t end = evs[nev - 1].ts + test_rng_below(3);
        cw_tracker_end_all(t, end);
        for (uint32_t s = 0; s < NPIDS; s++)
            if (M.live[s] >= 0) {
                m_end(&M.inst[M.live[s]], end);
                M.live[s] = -1;
            }
        ASSERT_EQ(cw_tracker_live_processes(t), 0);
    }
    cw_tracker_finish(t);
    m_finish();

    /* Callback totals against the model. */
    uint64_t live_pieces = 0, live_bytes = 0, rel = 0, rel_bytes = 0, com_bytes = 0;
    for (uint32_t k = 0; k < M.npiece; k++) {
        if (M.piece[k].f == CW_TS_NEVER) {
            live_pieces++;
            live_bytes += M.piece[k].bytes;
        } else {
            rel++;
            rel_bytes += M.piece[k].bytes;
        }
    }
    for (uint32_t r = 0; r < M.nrec; r++)
        com_bytes += M.rec[r].bytes;
    ASSERT_U64_EQ(fan.commits, M.nrec);
    ASSERT_U64_EQ(fan.committed_bytes, com_bytes);
    ASSERT_U64_EQ(fan.releases, rel);
    ASSERT_U64_EQ(fan.released_bytes, rel_bytes);
    ASSERT_U64_EQ(fan.lives, live_pieces);
    ASSERT_U64_EQ(fan.live_bytes, live_bytes);

    for (int w = 0; w < nw; w++) {
        cw_report_t *r;
        ASSERT_OK(cw_analysis_report(an[w], stacks, tagger, false, &r));
        compare_report(r, win[w][0], win[w][1]);
        cw_report_free(r);
        cw_analysis_destroy(an[w]);
    }
    cw_tracker_destroy(t);
}

int main(void)
{
    ASSERT_OK(cw_stacks_create(&stacks));
    ASSERT_OK(cw_tagger_create_builtin(&tagger));
    stack_ids[0] = 0;
    for (int s = 1; s <= NSTACKS; s++) {
        char f2[32];
        snprintf(f2, sizeof f2, "app.exe!Function%d", s);
        const char *fr[] = {"app.exe!main", f2, "KernelBase.dll!VirtualAlloc"};
        ASSERT_OK(cw_stacks_intern_strings(stacks, fr, 3, &stack_ids[s]));
    }
    const char *rd[] = {"(before trace)"};
    ASSERT_OK(cw_stacks_intern_strings(stacks, rd, 1, &stack_ids[RUNDOWN_STACK]));

    const char *one = getenv("CW_RANDOM_SEED");
    const char *many = getenv("CW_RANDOM_TRACES");
    uint64_t ntraces = many ? strtoull(many, NULL, 10) : 3000;
    /* Short traces find small counterexamples; long ones build up
     * fragmented maps and many instances. */
    uint64_t s0 = 1, s1 = ntraces;
    if (one) s0 = s1 = strtoull(one, NULL, 10);
    for (uint64_t s = s0; s <= s1; s++)
        one_trace(s, s % 10 == 0 ? MAXEV : 20 + (uint32_t)(s % 180));
    for (uint32_t i = 0; i < MAXINST; i++)
        free(M.inst[i].steps);
    cw_tagger_destroy(tagger);
    cw_stacks_destroy(stacks);
    TEST_DONE();
}
