/* store_report.c - window figures from the database (cw_store_report).
 *
 * Owns choosing the tier that answers a window and turning its rows into
 * a cw_report_t, per docs/DESIGN.md "Storage model": one grouped query
 * gives, per (proc, stack), the sums of commits and releases before and
 * inside the window and the releases after it; the four types, Size and
 * outstanding(t0) follow from them. Peak comes from the window's activity
 * rows on top of outstanding(t0).
 *
 * Everything is read inside one read transaction, so a writer committing
 * meanwhile (WAL) never makes the tier state and the rows disagree. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "commitwatch/event.h"
#include "commitwatch/store.h"
#include "core/store_internal.h"

/* Per (proc, stack) over tier ?1 and window [?2, ?3). Columns:
 *  2 C(<t0).bytes   3 C(<t0).events   4 C(W).bytes   5 C(W).events
 *  6 R(any,<t0).bytes   7,8 R(W,W) bytes, pieces   9 R(W,>=t1).pieces
 * 10 R(W,any).closed   11,12 R(<t0,W) bytes, pieces   13 R(<t0,>=t1).pieces
 * 14 R(<t0,any).closed. Rows after the window cannot matter: a commit
 * after t1 is released after t1 too.
 * Releases after t1 do matter, up to now, and a rollup tier only holds
 * those before its end (?4): the later ones come from the finer tiers,
 * tier ?5 for [?4, ?6) and tier ?7 from ?6 on (-1: none). Their `a` are
 * finer, which changes nothing against aligned t0 and t1. */
static const char SQL_Q_FIGS[] =
    "SELECT proc, stack, SUM(cpb), SUM(cpe), SUM(cwb), SUM(cwe), SUM(rfb), SUM(rwwb), "
    "SUM(rwwp), SUM(rwop), SUM(rwc), SUM(rpwb), SUM(rpwp), SUM(rpop), SUM(rpc) FROM ("
    " SELECT proc, stack, iif(bucket < ?2, bytes, 0) AS cpb, iif(bucket < ?2, events, 0) AS cpe,"
    "  iif(bucket >= ?2, bytes, 0) AS cwb, iif(bucket >= ?2, events, 0) AS cwe, 0 AS rfb,"
    "  0 AS rwwb, 0 AS rwwp, 0 AS rwop, 0 AS rwc, 0 AS rpwb, 0 AS rpwp, 0 AS rpop, 0 AS rpc"
    "  FROM commits WHERE tier = ?1 AND bucket < ?3"
    " UNION ALL"
    " SELECT proc, stack, 0, 0, 0, 0, iif(f < ?2, bytes, 0),"
    "  iif(a >= ?2 AND f < ?3, bytes, 0), iif(a >= ?2 AND f < ?3, pieces, 0),"
    "  iif(a >= ?2 AND f >= ?3, pieces, 0), iif(a >= ?2, closed, 0),"
    "  iif(a < ?2 AND f >= ?2 AND f < ?3, bytes, 0), iif(a < ?2 AND f >= ?2 AND f < ?3, pieces, 0),"
    "  iif(a < ?2 AND f >= ?3, pieces, 0), iif(a < ?2, closed, 0)"
    "  FROM releases WHERE a < ?3 AND ((tier = ?1 AND f < ?4)"
    "   OR (tier = ?5 AND f >= ?4 AND f < ?6) OR (tier = ?7 AND f >= ?6))"
    ") GROUP BY proc, stack ORDER BY proc, stack";
static const char SQL_Q_ACTIVITY[] =
    "SELECT proc, events, delta, relpeak, relpeak_ns FROM activity "
    "WHERE tier = ?1 AND bucket >= ?2 AND bucket < ?3 ORDER BY proc, bucket";
static const char SQL_Q_PROC[] =
    "SELECT pid, start_ns, exit_ns, name, cmdline FROM processes WHERE id = ?1";
static const char SQL_Q_STACK[] = "SELECT frames, tag FROM stacks WHERE id = ?1";
static const char SQL_Q_FRAME[] = "SELECT text FROM frames WHERE id = ?1";

static const char *const tier_names[CW_TIERS] = {"1 s", "1 min", "1 h"};

/* How well tier k answers a window. */
typedef struct pick {
    int k;
    int64_t t0, t1;
    int quality; /* 0 exact, 1 widened to buckets, 2 clipped to what is kept */
} pick_t;

static int64_t ceil_to(int64_t t, int64_t w)
{
    int64_t f = cw__floor(t, w);
    return f == t ? t : f + w;
}

/* The finest tier that holds [from, to) exactly; else the finest that
 * holds it widened to its buckets; else the one that holds most of it. A
 * window reaching past the last stored bucket needs no rows beyond it.
 * false when no tier holds any of it. */
static bool pick_tier(const cw__tier_t *t, int64_t from, int64_t to, pick_t *best)
{
    int64_t end0 = t[0].end;
    bool found = false;
    for (int k = 0; k < CW_TIERS; k++) {
        int64_t w = t[k].width;
        if (t[k].start == INT64_MIN) continue;
        pick_t p = {k, cw__floor(from, w), to >= end0 ? to : ceil_to(to, w), 0};
        bool clipped = false;
        if (t[k].horizon != INT64_MIN && p.t0 < t[k].horizon) {
            p.t0 = t[k].horizon;
            clipped = true;
        }
        if ((p.t1 < end0 ? p.t1 : end0) > t[k].end) {
            p.t1 = t[k].end;
            clipped = true;
        }
        if (p.t0 >= p.t1) continue;
        p.quality = clipped ? 2 : (p.t0 != from || p.t1 != to) ? 1 : 0;
        if (!found || p.quality < best->quality ||
            (p.quality == 2 && best->quality == 2 && p.t1 - p.t0 > best->t1 - best->t0)) {
            *best = p;
            found = true;
        }
    }
    return found;
}

/* Report under construction: out0 and "had activity" per process. */
typedef struct build {
    cw_report_t *r;
    int64_t *out0;
    bool *active;
    uint32_t cap;
} build_t;

static int push_proc(build_t *b, uint32_t id, cw_proc_report_t **out)
{
    cw_report_t *r = b->r;
    if (r->nprocs == b->cap) {
        uint32_t ncap = b->cap ? 2 * b->cap : 16;
        cw_proc_report_t *np = realloc(r->procs, ncap * sizeof *np);
        if (!np) return CW_ENOMEM;
        r->procs = np;
        int64_t *no = realloc(b->out0, ncap * sizeof *no);
        if (!no) return CW_ENOMEM;
        b->out0 = no;
        bool *na = realloc(b->active, ncap * sizeof *na);
        if (!na) return CW_ENOMEM;
        b->active = na;
        b->cap = ncap;
    }
    cw_proc_report_t *p = &r->procs[r->nprocs];
    memset(p, 0, sizeof *p);
    p->id = id;
    p->exit_ns = CW_TS_NEVER;
    b->out0[r->nprocs] = 0;
    b->active[r->nprocs] = false;
    r->nprocs++;
    *out = p;
    return 0;
}

static int push_stack(cw_proc_report_t *p, uint32_t stack, const cw_figs_t *f)
{
    /* Grows by doubling: capacity is the next power of two >= nstacks. */
    uint32_t n = p->nstacks;
    if ((n & (n - 1)) == 0) {
        cw_stack_report_t *ns = realloc(p->stacks, (n ? 2 * n : 1) * sizeof *ns);
        if (!ns) return CW_ENOMEM;
        p->stacks = ns;
    }
    memset(&p->stacks[n], 0, sizeof p->stacks[n]);
    p->stacks[n].stack_id = stack;
    p->stacks[n].figs = *f;
    p->nstacks++;
    return 0;
}

static uint64_t col_u64(sqlite3_stmt *st, int i)
{
    return (uint64_t)sqlite3_column_int64(st, i);
}

/* Stage 1: per (proc, stack) figures; processes in id order. */
static int load_figs(cw_store_t *s, build_t *b, const cw__tier_t *t, const pick_t *p, cw_diag_t *d)
{
    sqlite3_stmt *st = NULL;
    cw_proc_report_t *cur = NULL;
    int err = cw__store_stmt(s, CW__ST_Q_FIGS, SQL_Q_FIGS, &st, d), rc;
    if (err) return err;
    sqlite3_bind_int(st, 1, p->k);
    sqlite3_bind_int64(st, 2, p->t0);
    sqlite3_bind_int64(st, 3, p->t1);
    sqlite3_bind_int64(st, 4, p->k ? t[p->k].end : INT64_MAX);
    sqlite3_bind_int(st, 5, p->k - 1);
    sqlite3_bind_int64(st, 6, p->k == 2 ? t[1].end : INT64_MAX);
    sqlite3_bind_int(st, 7, p->k == 2 ? 0 : -1);
    while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
        uint32_t proc = (uint32_t)sqlite3_column_int64(st, 0);
        cw_figs_t f = {0};
        uint64_t cw_b = col_u64(st, 4), cw_e = col_u64(st, 5);
        int64_t out0 = sqlite3_column_int64(st, 2) - sqlite3_column_int64(st, 6);
        f.size_bytes = cw_b;
        f.commit_count = cw_e;
        f.types[CW_AIFI].bytes = col_u64(st, 7);
        f.types[CW_AIFI].count = col_u64(st, 8);
        f.types[CW_AIFO].bytes = cw_b - col_u64(st, 7);
        f.types[CW_AIFO].count = col_u64(st, 9) + cw_e - col_u64(st, 10);
        f.types[CW_AOFI].bytes = col_u64(st, 11);
        f.types[CW_AOFI].count = col_u64(st, 12);
        f.types[CW_AOFO].bytes = (uint64_t)out0 - col_u64(st, 11);
        f.types[CW_AOFO].count = col_u64(st, 13) + col_u64(st, 3) - col_u64(st, 14);
        if (!cur || cur->id != proc) {
            if ((err = push_proc(b, proc, &cur))) break;
        }
        b->out0[b->r->nprocs - 1] += out0;
        bool any = f.size_bytes || f.commit_count;
        for (int i = 0; i < CW_TYPE__COUNT; i++)
            any |= f.types[i].bytes || f.types[i].count;
        if (!any) continue;
        if ((err = push_stack(cur, (uint32_t)sqlite3_column_int64(st, 1), &f))) break;
        cw_figs_add(&cur->figs, &f);
        cur->outstanding_end += f.types[CW_AIFO].bytes + f.types[CW_AOFO].bytes;
    }
    if (!err && rc != SQLITE_DONE) err = cw__store_dberr(s, "querying window figures", d);
    sqlite3_reset(st);
    return err;
}

static int32_t find_proc(const cw_report_t *r, uint32_t n, uint32_t id)
{
    uint32_t lo = 0, hi = n;
    while (lo < hi) {
        uint32_t mid = lo + (hi - lo) / 2;
        if (r->procs[mid].id < id)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo < n && r->procs[lo].id == id ? (int32_t)lo : -1;
}

/* Stage 2: events and peak from the window's activity rows, in bucket
 * order per process, on top of outstanding(t0). */
static int load_activity(cw_store_t *s, build_t *b, const pick_t *p, cw_diag_t *d)
{
    sqlite3_stmt *st = NULL;
    uint32_t n0 = b->r->nprocs;
    int32_t cur = -1;
    int64_t level = 0;
    int err = cw__store_stmt(s, CW__ST_Q_ACTIVITY, SQL_Q_ACTIVITY, &st, d), rc;
    if (err) return err;
    for (uint32_t i = 0; i < n0; i++) {
        b->r->procs[i].peak_bytes = b->out0[i] > 0 ? (uint64_t)b->out0[i] : 0;
        b->r->procs[i].peak_ns = p->t0;
    }
    sqlite3_bind_int(st, 1, p->k);
    sqlite3_bind_int64(st, 2, p->t0);
    sqlite3_bind_int64(st, 3, p->t1);
    while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
        uint32_t proc = (uint32_t)sqlite3_column_int64(st, 0);
        if (cur < 0 || b->r->procs[cur].id != proc) {
            cur = find_proc(b->r, n0, proc);
            if (cur < 0) { /* activity without stacks, nothing outstanding */
                cw_proc_report_t *np;
                if ((err = push_proc(b, proc, &np))) break;
                cur = (int32_t)b->r->nprocs - 1;
                np->peak_ns = p->t0;
            }
            level = b->out0[cur];
            b->active[cur] = true;
        }
        cw_proc_report_t *pr = &b->r->procs[cur];
        int64_t cand = level + sqlite3_column_int64(st, 3);
        if (cand > (int64_t)pr->peak_bytes) {
            pr->peak_bytes = (uint64_t)cand;
            pr->peak_ns = sqlite3_column_int64(st, 4);
        }
        pr->events += col_u64(st, 1);
        level += sqlite3_column_int64(st, 2);
    }
    if (!err && rc != SQLITE_DONE) err = cw__store_dberr(s, "querying window activity", d);
    sqlite3_reset(st);
    return err;
}

static int dup_text(sqlite3_stmt *st, int col, char **out)
{
    const char *v = (const char *)sqlite3_column_text(st, col);
    *out = NULL;
    if (!v) return 0;
    return (*out = strdup(v)) ? 0 : CW_ENOMEM;
}

static int fill_stack(cw_store_t *s, cw_stack_report_t *sr, bool with_frames, cw_diag_t *d)
{
    sqlite3_stmt *st = NULL, *fst = NULL;
    int err = cw__store_stmt(s, CW__ST_Q_STACK, SQL_Q_STACK, &st, d), rc;
    if (err) return err;
    sqlite3_bind_int64(st, 1, sr->stack_id);
    rc = sqlite3_step(st);
    if (rc == SQLITE_ROW) {
        const unsigned char *blob = sqlite3_column_blob(st, 0);
        uint32_t n = (uint32_t)sqlite3_column_bytes(st, 0) / 4;
        err = dup_text(st, 1, &sr->tag);
        if (!err && with_frames && n) {
            if (!(sr->frames = calloc(n, sizeof *sr->frames))) err = CW_ENOMEM;
            if (!err) err = cw__store_stmt(s, CW__ST_Q_FRAME, SQL_Q_FRAME, &fst, d);
            for (uint32_t i = 0; i < n && !err; i++, sr->nframes++) {
                uint32_t fid = (uint32_t)blob[4 * i] | (uint32_t)blob[4 * i + 1] << 8 |
                               (uint32_t)blob[4 * i + 2] << 16 | (uint32_t)blob[4 * i + 3] << 24;
                sqlite3_bind_int64(fst, 1, fid);
                if (sqlite3_step(fst) == SQLITE_ROW) err = dup_text(fst, 0, &sr->frames[i]);
                if (!err && !sr->frames[i] && !(sr->frames[i] = strdup("?"))) err = CW_ENOMEM;
                sqlite3_reset(fst);
            }
        }
    } else if (rc != SQLITE_DONE) {
        err = cw__store_dberr(s, "reading a stack", d);
    }
    sqlite3_reset(st);
    if (!err && !sr->tag && !(sr->tag = strdup("Other"))) err = CW_ENOMEM;
    return err;
}

static int fill_proc(cw_store_t *s, cw_proc_report_t *p, bool with_frames, cw_diag_t *d)
{
    sqlite3_stmt *st = NULL;
    int err = cw__store_stmt(s, CW__ST_Q_PROC, SQL_Q_PROC, &st, d), rc;
    if (err) return err;
    sqlite3_bind_int64(st, 1, p->id);
    rc = sqlite3_step(st);
    if (rc == SQLITE_ROW) {
        p->pid = (uint32_t)sqlite3_column_int64(st, 0);
        p->start_ns = sqlite3_column_int64(st, 1);
        p->exit_ns =
            sqlite3_column_type(st, 2) == SQLITE_NULL ? CW_TS_NEVER : sqlite3_column_int64(st, 2);
        err = dup_text(st, 3, &p->name);
        if (!err) err = dup_text(st, 4, &p->cmdline);
    } else if (rc != SQLITE_DONE) {
        err = cw__store_dberr(s, "reading a process", d);
    }
    sqlite3_reset(st);
    if (!err && !p->name) {
        char buf[32];
        snprintf(buf, sizeof buf, "instance %" PRIu32, p->id);
        if (!(p->name = strdup(buf))) err = CW_ENOMEM;
    }
    for (uint32_t i = 0; i < p->nstacks && !err; i++)
        err = fill_stack(s, &p->stacks[i], with_frames, d);
    return err;
}

/* Drops processes that had no activity and nothing outstanding at t0,
 * then names the rest. */
static int finish(cw_store_t *s, build_t *b, bool with_frames, cw_diag_t *d)
{
    cw_report_t *r = b->r;
    uint32_t kept = 0;
    int err = 0;
    for (uint32_t i = 0; i < r->nprocs; i++) {
        if (b->active[i] || b->out0[i] > 0) {
            r->procs[kept++] = r->procs[i];
            continue;
        }
        free(r->procs[i].stacks); /* no names filled yet */
    }
    r->nprocs = kept;
    for (uint32_t i = 0; i < r->nprocs && !err; i++)
        err = fill_proc(s, &r->procs[i], with_frames, d);
    return err;
}

static int set_note(cw_report_t *r, const char *fmt, int64_t a, int64_t b, const char *tier)
{
    char buf[256];
    snprintf(buf, sizeof buf, fmt, a, b, tier);
    return (r->note = strdup(buf)) ? 0 : CW_ENOMEM;
}

int cw_store_report(cw_store_t *s, int64_t from_ns, int64_t to_ns, bool with_frames,
                    cw_report_t **out, cw_diag_t *d)
{
    cw__tier_t t[CW_TIERS];
    build_t b = {0};
    pick_t p = {0};
    int err;
    if (!(b.r = calloc(1, sizeof *b.r))) return CW_ENOMEM;
    if (sqlite3_exec(s->db, "BEGIN", NULL, NULL, NULL) != SQLITE_OK) {
        err = cw__store_dberr(s, "starting a read", d);
        goto fail;
    }
    if ((err = cw__store_read_tiers(s, t, d))) goto end;
    if (t[0].end == INT64_MIN) { /* nothing stored yet */
        b.r->from_ns = from_ns == INT64_MIN ? 0 : from_ns;
        b.r->to_ns = to_ns == INT64_MAX ? b.r->from_ns : to_ns;
        err = (b.r->note = strdup("the database holds no data yet")) ? 0 : CW_ENOMEM;
        goto end;
    }
    if (from_ns == INT64_MIN) {
        /* The oldest time some tier still answers exactly. */
        int64_t oldest = INT64_MAX;
        for (int k = 0; k < CW_TIERS; k++)
            if (t[k].start != INT64_MIN && t[k].horizon < oldest) oldest = t[k].horizon;
        from_ns = oldest > t[0].start ? oldest : t[0].start;
    }
    if (to_ns == INT64_MAX) to_ns = t[0].end;
    if (from_ns >= to_ns || from_ns < INT64_MIN / 2) {
        err = cw_diag_set(d, CW_EINVAL, "window [%" PRId64 ", %" PRId64 ") is empty or invalid",
                          from_ns, to_ns);
        goto end;
    }
    if (!pick_tier(t, from_ns, to_ns, &p)) {
        err = cw_diag_set(d, CW_ERANGE,
                          "no stored data covers [%" PRId64 ", %" PRId64 "): it lies before "
                          "what retention keeps; ask for a later window",
                          from_ns, to_ns);
        goto end;
    }
    b.r->from_ns = p.t0;
    b.r->to_ns = p.t1;
    if (p.quality == 1)
        err = set_note(b.r,
                       "window widened to [%" PRId64 ", %" PRId64 "), the %s buckets that "
                       "enclose it",
                       p.t0, p.t1, tier_names[p.k]);
    else if (p.quality == 2)
        err = set_note(b.r,
                       "figures are for [%" PRId64 ", %" PRId64 ") only, from the %s "
                       "tier: older rows were folded by retention or newer ones are not "
                       "rolled up yet",
                       p.t0, p.t1, tier_names[p.k]);
    if (!err) err = load_figs(s, &b, t, &p, d);
    if (!err) err = load_activity(s, &b, &p, d);
    if (!err) err = finish(s, &b, with_frames, d);
    if (!err) cw_report_sort(b.r);
end:
    sqlite3_exec(s->db, "COMMIT", NULL, NULL, NULL);
fail:
    free(b.out0);
    free(b.active);
    if (err) {
        cw_report_free(b.r);
        return err;
    }
    *out = b.r;
    return 0;
}
