/* store_report.c - window figures from the database (cw_store_report).
 *
 * Owns choosing the tier that answers a window and turning its rows into
 * a cw_report_t, per docs/DESIGN.md "Storage model": one grouped query
 * gives, per (proc, stack), the sums of commits and releases before and
 * inside the window and the releases after it; the four types, Size and
 * outstanding(t0) follow from them. Peak comes from the window's activity
 * rows on top of outstanding(t0), read from the same cells in the same
 * pass.
 *
 * Everything is read inside one read transaction, so a writer committing
 * meanwhile (WAL) never makes the tier state and the rows disagree. The
 * processes rows are read by store_read.c's cw__store_proc_row(); the
 * sums and the read caches are store_report_sums.c's. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "commitwatch/event.h"
#include "commitwatch/keymap.h"
#include "commitwatch/store.h"
#include "store/store_report_sums.h"

static const char SQL_Q_STACK[] = "SELECT frames, tag FROM stacks WHERE id = ?1";
static const char SQL_Q_FRAME[] = "SELECT text FROM frames WHERE id = ?1";

static const char *const tier_names[CW_TIERS] = {"1 s", "1 min", "1 h"};

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
        pick_t p = {k, cw_floor_to(from, w), to >= end0 ? to : ceil_to(to, w), 0};
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

/* What the report under construction keeps per process, beside it. */
typedef struct proc_state {
    int64_t out0; /* outstanding at the window's start */
    bool active;  /* had activity in the window */
} proc_state_t;

/* Report under construction: r->procs and their states, index for index. */
typedef struct build {
    cw_report_t *r;
    proc_state_t *ps;
    size_t cap, pscap;
} build_t;

/* A process's report with nothing in it yet. */
static void proc_init(cw_proc_report_t *p, uint32_t id)
{
    memset(p, 0, sizeof *p);
    p->id = id;
    p->exit_ns = CW_TS_NEVER;
    p->tracking_ended_ns = CW_TS_NEVER;
    p->last_correction_ns = CW_TS_NEVER;
}

static int push_proc(build_t *b, uint32_t id, cw_proc_report_t **out)
{
    cw_report_t *r = b->r;
    if (CW_RESERVE(r->procs, b->cap, r->nprocs + 1u) || CW_RESERVE(b->ps, b->pscap, r->nprocs + 1u))
        return CW_ENOMEM;
    cw_proc_report_t *p = &r->procs[r->nprocs];
    proc_init(p, id);
    b->ps[r->nprocs] = (proc_state_t){0, false};
    r->nprocs++;
    *out = p;
    return 0;
}

/* Adds a stack to p, whose stacks all come from one process's sums
 * (cw__sums_proc_t): room, their number, is allocated at the first. */
static int push_stack(cw_proc_report_t *p, uint32_t stack, const cw_figs_t *f, uint32_t room)
{
    uint32_t n = p->nstacks;
    if (n >= room) return CW_EDB; /* cannot be: a process's rows come once */
    if (n == 0 && !(p->stacks = malloc(room * sizeof *p->stacks))) return CW_ENOMEM;
    memset(&p->stacks[n], 0, sizeof p->stacks[n]);
    p->stacks[n].stack_id = stack;
    p->stacks[n].figs = *f;
    p->nstacks++;
    return 0;
}

/* A ranked report's request (cw_store_report_top) and its total. */
typedef struct top_req {
    cw_rank_t key;
    uint32_t limit;
    uint32_t total;             /* out: the processes the full report lists */
    const cw_proc_match_t *m;   /* the filter, or NULL */
    uint32_t *ids, nids, idcap; /* the processes m keeps, ascending (match_ids) */
    bool cut;                   /* out: report_top left the list to load_figs' cut */
} top_req_t;

static const char SQL_Q_MATCH[] = "SELECT id, name, pid FROM processes ORDER BY id";

/* The processes top->m keeps, into top->ids, ascending: their names and
 * pids from the processes rows, in the report's read transaction. 0,
 * CW_ENOMEM or CW_EDB. */
static int match_ids(cw_store_t *s, top_req_t *top, cw_diag_t *d)
{
    sqlite3_stmt *st = NULL;
    int err = cw__store_stmt(s, CW__ST_Q_MATCH, SQL_Q_MATCH, &st, d), rc = SQLITE_DONE;
    if (err) return err;
    const cw_proc_match_t *m = top->m;
    while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
        const char *name = (const char *)sqlite3_column_text(st, 1);
        if (m->by_pid && (uint64_t)sqlite3_column_int64(st, 2) != m->pid) continue;
        if (m->name && !cw_contains_ci(name ? name : "", m->name)) continue;
        size_t cap = top->idcap;
        if (CW_RESERVE(top->ids, cap, top->nids + 1u)) {
            err = cw_diag_set(d, CW_ENOMEM, "querying window figures: out of memory");
            break;
        }
        top->idcap = (uint32_t)cap;
        top->ids[top->nids++] = (uint32_t)sqlite3_column_int64(st, 0);
    }
    if (!err && rc != SQLITE_DONE) err = cw__store_dberr(s, "reading the processes", d);
    sqlite3_reset(st);
    return err;
}

/* Whether top lists process id: every one without a filter. */
static bool top_keeps(const top_req_t *top, uint32_t id)
{
    return !top->m || cw__ids_find(top->ids, top->nids, id) != UINT32_MAX;
}

static int32_t find_proc(const cw_report_t *r, uint32_t n, uint32_t id);

/* load_figs()'s cut (cut_figs): the first cut->limit processes by
 * transient bytes so far, each with its figures, as a heap of ranks
 * whose i is the slot of its figures in p and ps. */
typedef struct rank {
    int64_t key;
    uint32_t id, i; /* instance id; where its figures are */
} rank_t;

typedef struct cut_heap {
    const top_req_t *top;
    rank_t *rk;
    cw_proc_report_t *p;
    proc_state_t *ps;
    uint32_t room, m, total;
} cut_heap_t;

static int cut_offer(cw_store_t *s, const build_t *b, cut_heap_t *h, const cw_proc_report_t *p,
                     const proc_state_t *ps, cw_diag_t *d);
static int cut_figs(build_t *b, cut_heap_t *h, top_req_t *cut);

/* The figures of one (proc, stack) from its 13 sums (store_report_sums.h)
 * into f, and its outstanding at t0 into *out0; false when every figure
 * is 0 (the stack is not listed). */
static bool pair_figs(const sums_t *y, cw_figs_t *f, int64_t *out0)
{
#define q(c) y->v[(c)-2] /* column c of sums_t */
    *f = (cw_figs_t){0};
    *out0 = q(2) - q(6);
    f->size_bytes = (uint64_t)q(4);
    f->commit_count = (uint64_t)q(5);
    f->types[CW_AIFI].bytes = (uint64_t)q(7);
    f->types[CW_AIFI].count = (uint64_t)q(8);
    f->types[CW_AIFO].bytes = (uint64_t)(q(4) - q(7));
    f->types[CW_AIFO].count = (uint64_t)(q(9) + q(5) - q(10));
    f->types[CW_AOFI].bytes = (uint64_t)q(11);
    f->types[CW_AOFI].count = (uint64_t)q(12);
    f->types[CW_AOFO].bytes = (uint64_t)(*out0 - q(11));
    f->types[CW_AOFO].count = (uint64_t)(q(13) + q(3) - q(14));
#undef q
    bool any = f->size_bytes || f->commit_count;
    for (int k = 0; k < CW_TYPE__COUNT; k++)
        any |= f->types[k].bytes || f->types[k].count;
    return any;
}

/* Per (proc, stack) figures; processes in id order. Without only, each
 * process's events and peak too: its peak starts at outstanding(t0), at
 * `at` (the window's own t0, which p's may be floored from, see
 * start_floor), and each activity row of the window, in bucket order,
 * raises it to the level reached before it plus its relpeak
 * (cw__sums_add_activity). With only (a ranked report, report_top), the
 * processes are already listed, with their outstanding at t0 and their
 * peak: the stacks of only's are added to them. With cut (a ranked
 * report by a key its cells' columns do not give), every process gets
 * its figures from its stacks' sums added up (one row a process: no
 * stack is listed), and only the first cut->limit stay (cut_figs). */
static int load_figs(cw_store_t *s, const cw__tier_t *t, build_t *b, const segment_t *seg, int nseg,
                     int nback, const pick_t *p, int64_t at, const cw__proc_set_t *only,
                     top_req_t *cut, cw_diag_t *d)
{
    cw__sums_acc_t a;
    cut_heap_t h = {0};
    uint32_t n0 = b->r->nprocs;
    int err = only ? cw__report_load_sums_of(s, t, seg, nseg, p, only, &a, d)
                   : cw__report_load_sums(s, t, seg, nseg, nback, p, cut != NULL, &a, d);
    if (err) return err;
    if (cut) {
        h.top = cut;
        h.room = cut->limit < a.np ? cut->limit : a.np;
        size_t n = h.room ? h.room : 1;
        h.rk = malloc(n * sizeof *h.rk);
        h.p = malloc(n * sizeof *h.p);
        h.ps = malloc(n * sizeof *h.ps);
        if (!h.rk || !h.p || !h.ps) err = CW_ENOMEM;
    }
    for (uint32_t i = 0; i < a.np && !err; i++) {
        cw__sums_proc_t *ap = &a.p[i];
        cw_proc_report_t *cur = NULL, one;
        proc_state_t *ps = NULL, one_ps = {0, false};
        if (only) {
            int32_t k = find_proc(b->r, n0, ap->proc);
            for (uint32_t x = n0; k < 0 && x < b->r->nprocs; x++)
                if (b->r->procs[x].id == ap->proc) k = (int32_t)x;
            if (k < 0) { /* cannot be: only's processes come from b */
                err = cw_diag_set(
                    d, CW_EDB, "querying window figures: instance %" PRIu32 " unlisted", ap->proc);
                break;
            }
            cur = &b->r->procs[k];
        } else if (cut) { /* not listed unless it ranks (cut_offer) */
            proc_init(&one, ap->proc);
            cur = &one;
            ps = &one_ps;
        } else if ((err = push_proc(b, ap->proc, &cur))) {
            break;
        } else {
            ps = &b->ps[b->r->nprocs - 1];
        }
        for (uint32_t j = 0; j < ap->n && !err; j++) {
            cw_figs_t f;
            int64_t out0;
            bool any = pair_figs(&ap->v[j], &f, &out0);
            if (ps) ps->out0 += out0;
            if (!any) continue;
            if (!cut && (err = push_stack(cur, ap->v[j].stack, &f, ap->n))) {
                if (err == CW_EDB)
                    cw_diag_set(d, err, "querying window figures: instance %" PRIu32 " twice",
                                ap->proc);
                break;
            }
            cw_figs_add(&cur->figs, &f);
            cur->outstanding_end += f.types[CW_AIFO].bytes + f.types[CW_AOFO].bytes;
        }
        if (ps && !err) {
            cur->peak_bytes = ps->out0 > 0 ? (uint64_t)ps->out0 : 0;
            cur->peak_ns = at;
            if (ap->active && ps->out0 + ap->best > (int64_t)cur->peak_bytes) {
                cur->peak_bytes = (uint64_t)(ps->out0 + ap->best);
                cur->peak_ns = ap->best_ns;
            }
            cur->events = (uint64_t)ap->events;
            ps->active = ap->active;
        }
        if (cut && !err) err = cut_offer(s, b, &h, cur, ps, d);
        cw__sums_proc_free(ap); /* its memory goes to the next one's stacks */
    }
    if (cut && !err) err = cut_figs(b, &h, cut);
    if (err == CW_ENOMEM) cw_diag_set(d, err, "querying window figures: out of memory");
    free(h.rk);
    free(h.p);
    free(h.ps);
    cw__sums_acc_free(&a);
    return err;
}

static int cmp_rank(const void *x, const void *y);
static int cmp_rank_id(const void *x, const void *y);
static int cmp_rank_slot(const void *x, const void *y);

/* Offers x to h, a heap of the *n (at most m) first ranks offered so far
 * by cmp_rank's order, the last of them at its root: the same m a sort of
 * every rank would put first (the order is total: ties go by id), at
 * O(log m) an offer and with no array of every process (30 minutes of
 * the busy mix: 71,564 ranks sorted to list 20). */
static bool top_offer(rank_t *h, uint32_t m, uint32_t *n, rank_t x)
{
    uint32_t i;
    if (*n < m) {
        for (i = (*n)++; i > 0 && cmp_rank(&h[(i - 1) / 2], &x) < 0; i = (i - 1) / 2)
            h[i] = h[(i - 1) / 2];
        h[i] = x;
        return true;
    }
    if (m == 0 || cmp_rank(&x, &h[0]) >= 0) return false;
    for (i = 0;;) {
        uint32_t c = 2 * i + 1;
        if (c >= m) break;
        if (c + 1 < m && cmp_rank(&h[c + 1], &h[c]) > 0) c++;
        if (cmp_rank(&h[c], &x) <= 0) break;
        h[i] = h[c];
        i = c;
    }
    h[i] = x;
    return true;
}

/* finish()'s choice, for a ranking made before the processes are named:
 * activity in the window, or alive in it (started before its end, read
 * from the instance's row) with something outstanding at t0. */
static int in_window(cw_store_t *s, const cw_report_t *r, uint32_t id, bool active, int64_t out0,
                     bool *keep, cw_diag_t *d)
{
    *keep = active || out0 > 0;
    if (!*keep || active) return 0;
    cw_proc_info_t info;
    bool found;
    int err = cw__store_proc_row(s, id, &info, &found, d);
    if (err) return err;
    *keep = info.start_ns < r->to_ns;
    cw_proc_info_clear(&info);
    return 0;
}

/* load_figs()'s cut: of the processes every figure is added up for (one
 * sums row each, no stacks), those finish() would keep are ranked by
 * cut->key (transient bytes: AIFI, which needs each release's commit
 * time, so the cells' columns cannot rank by it), as they come; only the
 * first cut->limit are kept, in h, and listed (cut_figs), their figures
 * emptied for cut_stacks() to add them again stack by stack. The rest are
 * never listed, named, nor their stacks made (30 minutes of the busy mix:
 * 71,564 processes, whose reports alone were 15 MB of fresh memory a
 * request). */
static int cut_offer(cw_store_t *s, const build_t *b, cut_heap_t *h, const cw_proc_report_t *p,
                     const proc_state_t *ps, cw_diag_t *d)
{
    bool keep;
    if (!top_keeps(h->top, p->id)) return 0;
    int err = in_window(s, b->r, p->id, ps->active, ps->out0, &keep, d);
    if (err || !keep) return err;
    h->total++;
    /* The slot of the rank it would put out, or the next free one. */
    uint32_t slot = h->m < h->room ? h->m : h->rk[0].i;
    rank_t x = {(int64_t)p->figs.types[CW_AIFI].bytes, p->id, slot};
    if (top_offer(h->rk, h->room, &h->m, x)) {
        h->p[slot] = *p;
        h->ps[slot] = *ps;
    }
    return 0;
}

/* Lists the processes h kept, in id order (as load_figs() lists);
 * cut->total: how many finish() would keep. 0 or CW_ENOMEM. */
static int cut_figs(build_t *b, cut_heap_t *h, top_req_t *cut)
{
    cut->total = h->total;
    if (h->m > 1) qsort(h->rk, h->m, sizeof *h->rk, cmp_rank_id);
    for (uint32_t j = 0; j < h->m; j++) {
        cw_proc_report_t *p;
        int err = push_proc(b, h->rk[j].id, &p);
        if (err) return err;
        *p = h->p[h->rk[j].i];
        p->figs = (cw_figs_t){0};
        p->outstanding_end = 0;
        b->ps[b->r->nprocs - 1] = h->ps[h->rk[j].i];
    }
    return 0;
}

/* load_figs() for the processes of `only` alone (a ranked report's
 * chosen few: their own cells, found by their keys, through
 * cw__report_load_sums_of), its json made here from its ids. */
static int load_chosen(cw_store_t *s, const cw__tier_t *t, build_t *b, const segment_t *seg,
                       int nseg, int nback, const pick_t *q, int64_t at, cw__proc_set_t only,
                       cw_diag_t *d)
{
    if (!only.n) return 0;
    char *json = cw__ids_json(only.id, only.n);
    if (!json) return cw_diag_set(d, CW_ENOMEM, "querying window figures: out of memory");
    only.json = json;
    int err = load_figs(s, t, b, seg, nseg, nback, q, at, &only, NULL, d);
    free(json);
    return err;
}

/* The stacks of a cut report's processes (cut_figs), and with them their
 * figures again, as load_figs() gives every process its own. */
static int cut_stacks(cw_store_t *s, const cw__tier_t *t, build_t *b, const segment_t *seg,
                      int nseg, int nback, const pick_t *q, int64_t at, cw_diag_t *d)
{
    cw_report_t *r = b->r;
    uint32_t m = r->nprocs, *ids = malloc((m ? m : 1) * sizeof *ids);
    if (!ids) return cw_diag_set(d, CW_ENOMEM, "querying window figures: out of memory");
    for (uint32_t j = 0; j < m; j++)
        ids[j] = r->procs[j].id;
    int err = load_chosen(s, t, b, seg, nseg, nback, q, at, (cw__proc_set_t){.id = ids, .n = m}, d);
    free(ids);
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

static int dup_text(sqlite3_stmt *st, int col, char **out)
{
    const char *v = (const char *)sqlite3_column_text(st, col);
    *out = NULL;
    if (!v) return 0;
    return (*out = strdup(v)) ? 0 : CW_ENOMEM;
}

int cw_store_stack_get(cw_store_t *s, uint32_t stack_id, bool with_frames, char **tag,
                       char ***frames, uint32_t *nframes, cw_diag_t *d)
{
    sqlite3_stmt *st = NULL, *fst = NULL;
    char *t = NULL, **fr = NULL;
    uint32_t nf = 0;
    int err = cw__store_stmt(s, CW__ST_Q_STACK, SQL_Q_STACK, &st, d), rc;
    if (err) return err;
    sqlite3_bind_int64(st, 1, stack_id);
    rc = sqlite3_step(st);
    if (rc == SQLITE_ROW) {
        const unsigned char *blob = sqlite3_column_blob(st, 0);
        uint32_t n = (uint32_t)sqlite3_column_bytes(st, 0) / 4;
        err = dup_text(st, 1, &t);
        if (!err && with_frames && n) {
            if (!(fr = calloc(n, sizeof *fr))) err = CW_ENOMEM;
            if (!err) err = cw__store_stmt(s, CW__ST_Q_FRAME, SQL_Q_FRAME, &fst, d);
            for (uint32_t i = 0; i < n && !err; i++, nf++) {
                uint32_t fid = (uint32_t)blob[4 * i] | (uint32_t)blob[4 * i + 1] << 8 |
                               (uint32_t)blob[4 * i + 2] << 16 | (uint32_t)blob[4 * i + 3] << 24;
                sqlite3_bind_int64(fst, 1, fid);
                if (sqlite3_step(fst) == SQLITE_ROW) err = dup_text(fst, 0, &fr[i]);
                if (!err && !fr[i] && !(fr[i] = strdup("?"))) err = CW_ENOMEM;
                sqlite3_reset(fst);
            }
        }
    } else if (rc != SQLITE_DONE) {
        err = cw__store_dberr(s, "reading a stack", d);
    }
    sqlite3_reset(st);
    if (!err && !t && !(t = strdup("Other"))) err = CW_ENOMEM;
    if (err) {
        cw_free_strv(fr, nf);
        free(t);
        return err;
    }
    *tag = t;
    *frames = fr;
    *nframes = nf;
    return 0;
}

/* The tags a report has read, by stack id (a report names the same
 * stacks for many processes: 80,000 (process, stack) pairs of 10,000
 * processes name a few hundred stacks): texts of the report's own
 * (cw_report_add_tag), one a stack id. */
typedef struct tag_memo {
    cw_keymap_t map;
    const char **tag; /* borrowed from the report */
    size_t cap;
} tag_memo_t;

static void tag_memo_free(tag_memo_t *m)
{
    free(m->tag);
    cw_keymap_free(&m->map);
}

/* sr's tag, read once per stack id (m), and with frames its frames. */
static int fill_stack(cw_store_t *s, cw_report_t *r, tag_memo_t *m, cw_stack_report_t *sr,
                      bool with_frames, cw_diag_t *d)
{
    int added = 0;
    if (CW_RESERVE(m->tag, m->cap, m->map.count + 1u)) return CW_ENOMEM;
    uint32_t i = cw_keymap_get(&m->map, sr->stack_id, 0, &added);
    if (i == UINT32_MAX) return CW_ENOMEM;
    if (added) m->tag[i] = NULL; /* still NULL after an error: the report fails */
    if (!added && !with_frames) {
        sr->tag = m->tag[i];
        return 0;
    }
    char *tag;
    int err = cw_store_stack_get(s, sr->stack_id, with_frames, &tag, &sr->frames, &sr->nframes, d);
    if (err) return err;
    if (added && !(m->tag[i] = cw_report_add_tag(r, tag))) err = CW_ENOMEM;
    free(tag);
    sr->tag = m->tag[i];
    return err;
}

/* p's process row (through scan when given) and its stacks' tags. */
static int fill_proc(cw_store_t *s, cw_report_t *r, tag_memo_t *m, cw__proc_scan_t *scan,
                     cw_proc_report_t *p, bool with_frames, cw_diag_t *d)
{
    cw_proc_info_t info;
    bool found;
    int err = scan ? cw__proc_scan_get(scan, p->id, &info, &found, d)
                   : cw__store_proc_row(s, p->id, &info, &found, d);
    if (err) return err;
    p->pid = info.pid;
    p->start_ns = info.start_ns;
    p->exit_ns = info.exit_ns;
    p->tracking_ended_ns = info.tracking_ended_ns;
    p->folded = info.folded > 1 ? info.folded : 0; /* a group of one is the instance */
    p->corrections = info.corrections;
    p->corrected_committed = info.corrected_committed;
    p->corrected_decommitted = info.corrected_decommitted;
    p->last_correction_ns = info.last_correction_ns;
    p->name = info.name; /* moved: p owns the strings now */
    p->cmdline = info.cmdline;
    if (!p->name) {
        char buf[32];
        snprintf(buf, sizeof buf, "instance %" PRIu32, p->id);
        if (!(p->name = strdup(buf))) err = CW_ENOMEM;
    }
    for (uint32_t i = 0; i < p->nstacks && !err; i++)
        err = fill_stack(s, r, m, &p->stacks[i], with_frames, d);
    return err;
}

static void free_proc(cw_proc_report_t *p)
{
    for (uint32_t j = 0; j < p->nstacks; j++)
        cw_free_strv(p->stacks[j].frames, p->stacks[j].nframes);
    free(p->stacks);
    free(p->name);
    free(p->cmdline);
}

/* Reports naming fewer instances look each up (finish). */
#define PROC_SCAN_MIN 64

/* Keeps the processes that had activity in the window, or were alive
 * during it (started before its end) with something outstanding at t0,
 * and names them. An instance that starts later (a restart's rundown, whose
 * commits count as outstanding "before the trace") is not in the window. */
static int finish(cw_store_t *s, build_t *b, bool with_frames, cw_diag_t *d)
{
    cw_report_t *r = b->r;
    uint32_t kept = 0;
    tag_memo_t memo = {0};
    int err = cw_keymap_init(&memo.map, 16) ? CW_ENOMEM : 0;
    /* The rows in one pass when the report names most of its range of
     * instances (10,000 live processes: 10,000 lookups from the table's
     * root, 7 % of a whole-day report's time, then); else each looked up. */
    cw__proc_scan_t scan = {0};
    bool scanned = r->nprocs >= PROC_SCAN_MIN &&
                   (uint64_t)r->procs[r->nprocs - 1].id - r->procs[0].id < 4 * (uint64_t)r->nprocs;
    for (uint32_t i = 1; i < r->nprocs && scanned; i++) /* (load_figs lists them so) */
        scanned = r->procs[i - 1].id < r->procs[i].id;
    if (!err && scanned) scanned = !(err = cw__proc_scan_begin(s, &scan, r->procs[0].id, d));
    for (uint32_t i = 0; i < r->nprocs; i++) {
        bool keep = b->ps[i].active || b->ps[i].out0 > 0;
        if (keep && !err)
            err = fill_proc(s, r, &memo, scanned ? &scan : NULL, &r->procs[i], with_frames, d);
        if (keep && !err && !b->ps[i].active && r->procs[i].start_ns >= r->to_ns) keep = false;
        /* The state at a bucket start is reached no earlier than the
         * instance (as in the trace analyzer). */
        if (keep && !err && r->procs[i].peak_ns < r->procs[i].start_ns)
            r->procs[i].peak_ns = r->procs[i].start_ns;
        if (keep && !err)
            r->procs[kept++] = r->procs[i];
        else
            free_proc(&r->procs[i]);
    }
    r->nprocs = kept;
    if (scanned) cw__proc_scan_end(&scan);
    tag_memo_free(&memo);
    return err;
}

/* Largest key first, then the lower id (as the HTTP list ranks). */
static int cmp_rank(const void *x, const void *y)
{
    const rank_t *a = x, *b = y;
    if (a->key != b->key) return a->key > b->key ? -1 : 1;
    return a->id < b->id ? -1 : a->id > b->id;
}

/* The key of a process, from its keys k. */
static int64_t rank_key(const cw__proc_keys_t *k, cw_rank_t key)
{
    int64_t impacting = k->cbw - k->rbw;
    switch (key) {
    case CW_RANK_IMPACTING:
        return impacting;
    case CW_RANK_SIZE:
        return k->cbw;
    case CW_RANK_PEAK:
        return k->peak;
    case CW_RANK_OUTSTANDING:
        return k->cb0 - k->rb0 + impacting;
    case CW_RANK_TRANSIENT: /* cannot be: ranked by its bounds (aifi_lower, aifi_upper) */
        break;
    }
    return 0;
}

/* A list by transient bytes (AIFI, which needs each release's commit
 * time: the cells' columns do not give it) is ranked from bounds the
 * keys give. AIFI is at most Size and at most the bytes released in the
 * window; it is at least Size less what is outstanding at the end (AIFO
 * is part of it), and the bytes released less what was outstanding at
 * t0 (AOFI is part of that). A process whose upper bound is below the
 * limit-th largest lower bound has less than `limit` others: it cannot
 * be listed. The others, the candidates, are decoded (their own cells,
 * by key) and cut to the first `limit`. On the busy mix most processes
 * live inside the window with nothing outstanding at either end, so
 * their bounds meet. When the candidates are more than this, every
 * process's cells are decoded instead (load_figs' cut), which then
 * costs less than finding theirs by key. */
#define TRANSIENT_CANDS_MAX(limit) (8 * (uint64_t)(limit) + 256)

static int64_t aifi_upper(const cw__proc_keys_t *k)
{
    return k->cbw < k->rbw ? k->cbw : k->rbw;
}

static int64_t aifi_lower(const cw__proc_keys_t *k)
{
    int64_t out0 = k->cb0 - k->rb0, out1 = out0 + k->cbw - k->rbw;
    int64_t a = k->cbw - (out1 > 0 ? out1 : 0), b = k->rbw - (out0 > 0 ? out0 : 0);
    int64_t lb = a > b ? a : b;
    return lb > 0 ? lb : 0;
}

/* Of b's processes (in id order, with their states), the first `limit`
 * by transient bytes stay, in id order; the others are freed. */
static int cut_transient(build_t *b, uint32_t limit)
{
    cw_report_t *r = b->r;
    uint32_t n = r->nprocs;
    if (n <= limit) return 0;
    rank_t *ex = malloc(n * sizeof *ex);
    if (!ex) return CW_ENOMEM;
    for (uint32_t j = 0; j < n; j++)
        ex[j] = (rank_t){(int64_t)r->procs[j].figs.types[CW_AIFI].bytes, r->procs[j].id, j};
    qsort(ex, n, sizeof *ex, cmp_rank);
    /* The kept ones' slots, back in id order (slots are in id order). */
    qsort(ex, limit, sizeof *ex, cmp_rank_slot);
    uint32_t w = 0, next = 0;
    for (uint32_t j = 0; j < n; j++) {
        if (next < limit && ex[next].i == j) {
            r->procs[w] = r->procs[j];
            b->ps[w] = b->ps[j];
            w++;
            next++;
        } else {
            free_proc(&r->procs[j]);
        }
    }
    r->nprocs = w;
    free(ex);
    return 0;
}

/* By instance id. */
static int cmp_rank_id(const void *x, const void *y)
{
    const rank_t *a = x, *b = y;
    return a->id < b->id ? -1 : a->id > b->id;
}

/* By where its figures are. */
static int cmp_rank_slot(const void *x, const void *y)
{
    const rank_t *a = x, *b = y;
    return a->i < b->i ? -1 : a->i > b->i;
}

/* The test hook keys_check: the keys cache's keys (*k, nk) against those
 * of every cell (cw__report_load_keys, which takes the handle's room: *k
 * becomes a copy, *own, for the caller to free). Every process either
 * lists (activity in the window, or something outstanding at t0) is in
 * both with the same sums; the outstanding at t0 is compared as a
 * difference (the report cache leaves out closed sums). Mismatches are
 * counted in s->test.keys_mismatch. 0, CW_ENOMEM or CW_EDB. */
static int check_keys(cw_store_t *s, const cw__tier_t *t, const segment_t *seg, int nseg, int nback,
                      const pick_t *q, int64_t at, cw__proc_keys_t **k, uint32_t nk,
                      cw__proc_keys_t **own, cw_diag_t *d)
{
    const cw__before_sums_t *bv = NULL;
    cw__proc_keys_t *u = NULL, *kc = malloc((nk ? nk : 1) * sizeof *kc);
    uint32_t bn = 0, nu = 0, j = 0;
    segment_t rs[MAX_SEGMENTS];
    int rn = 0;
    if (!kc) return CW_ENOMEM;
    if (nk) memcpy(kc, *k, nk * sizeof *kc);
    *k = *own = kc;
    int err = cw__report_before(s, t, seg, nback, q, &bv, &bn, d);
    if (!err && bv)
        rs[rn++] = (segment_t){.tier = seg[0].tier, .lo = INT64_MIN, .hi = INT64_MIN + 1};
    for (int i = bv ? nback : 0; i < nseg; i++)
        rs[rn++] = seg[i];
    if (!err) err = cw__report_load_keys(s, rs, rn, bv ? 1 : nback, q, at, bv, bn, &u, &nu, d);
    for (uint32_t i = 0; i < nu && !err; i++) {
        const cw__proc_keys_t *x = &u[i];
        for (; j < nk && kc[j].proc < x->proc; j++)
            s->test.keys_mismatch++; /* cached only */
        if (j == nk || kc[j].proc != x->proc) {
            s->test.keys_mismatch += x->active || x->cb0 - x->rb0 > 0;
            continue;
        }
        const cw__proc_keys_t *y = &kc[j++];
        s->test.keys_mismatch += y->cb0 - y->rb0 != x->cb0 - x->rb0 || y->cbw != x->cbw ||
                                 y->rbw != x->rbw || y->events != x->events ||
                                 y->active != x->active;
        s->test.keys_checked++;
    }
    if (!err) s->test.keys_mismatch += nk - j;
    cw__report_before_done(s);
    return err;
}

/* A ranked report (cw_store_report_top): every process's outstanding at
 * t0, bytes figures, events and peak from its cells' columns
 * (store_report_keys.c, nothing decoded, one pass in key order), as
 * load_figs() gives them; the processes finish() would keep are ranked
 * by top->key, and only the first top->limit get their stacks (load_figs()
 * for them alone: their cells only are decoded) and their names. Each
 * figure of those is what report() gives, as a process's figures come
 * from its own rows only. */
static int report_top(cw_store_t *s, const cw__tier_t *t, build_t *b, const segment_t *seg,
                      int nseg, int nback, const pick_t *q, int64_t at, bool with_frames,
                      top_req_t *top, cw_diag_t *d)
{
    cw__proc_keys_t *k = NULL;
    rank_t *rk = NULL;
    uint32_t *ids = NULL, nk = 0, nr = 0, m = 0;
    cw_report_t *r = b->r;
    const cw__before_sums_t *bv = NULL;
    uint32_t bn = 0;
    segment_t rs[MAX_SEGMENTS];
    int rn = 0, rback = nback;
    /* The keys from the keys cache when it serves (all but the peak, which
     * the chosen processes' cells give: few, found by their keys), else
     * from every cell. */
    bool cached = false;
    int err = 0;
    if (top->key != CW_RANK_PEAK) err = cw__report_keys_cached(s, t, q, at, &k, &nk, &cached, d);
    cw__proc_keys_t *own = NULL;
    if (!err && cached && s->test.keys_check)
        err = check_keys(s, t, seg, nseg, nback, q, at, &k, nk, &own, d);
    /* Before t0 otherwise: the report cache's sums and the BEFORE rows,
     * when it serves the window; else every backward segment's rows. */
    if (!err && !cached) err = cw__report_before(s, t, seg, nback, q, &bv, &bn, d);
    if (!err && bv) {
        rs[rn++] = (segment_t){.tier = seg[0].tier, .lo = INT64_MIN, .hi = INT64_MIN + 1};
        rback = 1;
    }
    for (int i = bv ? nback : 0; i < nseg; i++)
        rs[rn++] = seg[i];
    if (!err && !cached) err = cw__report_load_keys(s, rs, rn, rback, q, at, bv, bn, &k, &nk, d);
    bool transient = top->key == CW_RANK_TRANSIENT;
    uint32_t room = top->limit < nk ? top->limit : nk, *kv = NULL;
    if (!err && !(rk = malloc((room ? room : 1) * sizeof *rk))) err = CW_ENOMEM;
    if (!err && transient && !(kv = malloc((nk ? nk : 1) * sizeof *kv))) err = CW_ENOMEM;
    for (uint32_t i = 0; i < nk && !err; i++) {
        bool keep;
        if (!top_keeps(top, k[i].proc)) continue;
        err = in_window(s, r, k[i].proc, k[i].active, k[i].cb0 - k[i].rb0, &keep, d);
        if (keep && !err) {
            int64_t key = transient ? aifi_lower(&k[i]) : rank_key(&k[i], top->key);
            if (transient) kv[nr] = i;
            nr++;
            top_offer(rk, room, &m, (rank_t){key, k[i].proc, i});
        }
    }
    top->total = nr;
    if (!err && transient) {
        /* The candidates (above), in id order as k is: every one kept
         * whose upper bound reaches the limit-th largest lower bound (the
         * heap's root when it holds `limit`). */
        int64_t v = top->limit && m == top->limit ? rk[0].key : INT64_MIN;
        uint64_t nc = 0;
        for (uint32_t j = 0; j < nr; j++)
            nc += aifi_upper(&k[kv[j]]) >= v;
        uint64_t most = s->test.transient_cands_max ? s->test.transient_cands_max - 1
                                                    : TRANSIENT_CANDS_MAX(top->limit);
        if (nc > most) {
            top->cut = true; /* report() takes every process's cells */
            m = 0;
        } else {
            rank_t *c = nc > room ? realloc(rk, nc * sizeof *rk) : rk;
            if (!c) err = CW_ENOMEM;
            if (c) rk = c;
            m = 0;
            for (uint32_t j = 0; j < nr && !err; j++)
                if (aifi_upper(&k[kv[j]]) >= v) rk[m++] = (rank_t){0, k[kv[j]].proc, kv[j]};
            s->test.transient_cands += m;
        }
    }
    free(kv);
    /* Only the chosen ones are listed, in id order, as load_figs() lists
     * (a transient list's candidates are already). */
    if (!err && m > 1 && !transient) qsort(rk, m, sizeof *rk, cmp_rank_id);
    if (!err && m && !(ids = malloc(m * sizeof *ids))) err = CW_ENOMEM;
    for (uint32_t j = 0; j < m && !err; j++)
        ids[j] = rk[j].id;
    for (uint32_t j = 0; j < m && !err; j++) {
        const cw__proc_keys_t *x = &k[rk[j].i];
        cw_proc_report_t *p;
        if ((err = push_proc(b, x->proc, &p))) break;
        b->ps[j] = (proc_state_t){x->cb0 - x->rb0, x->active};
        p->events = (uint64_t)x->events;
        p->peak_bytes = (uint64_t)x->peak;
        p->peak_ns = x->peak_ns;
    }
    if (!err && m) {
        cw__proc_keys_t *ck = NULL; /* the chosen ones' keys, for their peak */
        if (cached && !(ck = malloc(m * sizeof *ck))) err = CW_ENOMEM;
        for (uint32_t j = 0; ck && j < m; j++)
            ck[j] = k[rk[j].i];
        cw__proc_set_t only = {ids, m, NULL, bv, bn, ck};
        if (!err) err = load_chosen(s, t, b, rs, rn, rback, q, at, only, d);
        for (uint32_t j = 0; ck && j < m && !err; j++) {
            r->procs[j].peak_bytes = (uint64_t)ck[j].peak;
            r->procs[j].peak_ns = ck[j].peak_ns;
        }
        free(ck);
        if (!err && transient) err = cut_transient(b, top->limit);
    }
    /* finish() for the chosen ones. */
    uint32_t kept = 0;
    tag_memo_t memo = {0};
    if (!err && cw_keymap_init(&memo.map, 16)) err = CW_ENOMEM;
    for (uint32_t i = 0; i < r->nprocs; i++) {
        bool keep = !err;
        if (keep && (err = fill_proc(s, r, &memo, NULL, &r->procs[i], with_frames, d)))
            keep = false;
        if (keep && r->procs[i].peak_ns < r->procs[i].start_ns)
            r->procs[i].peak_ns = r->procs[i].start_ns;
        if (keep)
            r->procs[kept++] = r->procs[i];
        else
            free_proc(&r->procs[i]);
    }
    r->nprocs = kept;
    tag_memo_free(&memo);
    if (err == CW_ENOMEM) cw_diag_set(d, err, "querying window figures: out of memory");
    cw__report_before_done(s);
    free(ids);
    free(rk);
    free(own);
    return err; /* k is the handle's (store_report_keys.c), but own */
}

static int set_note(cw_report_t *r, const char *fmt, int64_t a, int64_t b, const char *tier)
{
    char buf[256];
    snprintf(buf, sizeof buf, fmt, a, b, tier);
    return (r->note = strdup(buf)) ? 0 : CW_ENOMEM;
}

/* Appends "; text" to the report's note (or sets it). 0 or CW_ENOMEM. */
static int add_note(cw_report_t *r, const char *text)
{
    size_t old = r->note ? strlen(r->note) : 0, n = strlen(text);
    char *v = realloc(r->note, old + n + 3);
    if (!v) return CW_ENOMEM;
    if (old) {
        memcpy(v + old, "; ", 2);
        old += 2;
    }
    memcpy(v + old, text, n + 1);
    r->note = v;
    return 0;
}

static int report(cw_store_t *s, int64_t from_ns, int64_t to_ns, bool with_frames, top_req_t *top,
                  cw_report_t **out, cw_diag_t *d)
{
    cw__tier_t t[CW__TIERS_READ];
    build_t b = {0};
    pick_t p = {0};
    bool began = false;
    int err;
    if (!(b.r = calloc(1, sizeof *b.r))) return CW_ENOMEM;
    if ((err = cw__store_read_begin(s, &began, d))) goto fail;
    if ((err = cw__store_read_tiers(s, t, d)) || (err = cw__store_read_open(s, t, d))) goto end;
    int64_t data_end;
    bool ended;
    if ((err = cw__store_data_end(s, t, &data_end, &ended, d))) goto end;
    if (t[0].end == INT64_MIN) { /* nothing stored yet */
        b.r->from_ns = from_ns == INT64_MIN ? 0 : from_ns;
        b.r->to_ns = to_ns == INT64_MAX ? b.r->from_ns : to_ns;
        err = (b.r->note = strdup("the database holds no data yet")) ? 0 : CW_ENOMEM;
        goto end;
    }
    bool whole_from = from_ns == INT64_MIN;
    if (whole_from) {
        /* Everything the raw tier answers exactly, up to the newest data;
         * older history, folded out of it by retention, stays in the
         * coarser tiers for windows that ask for it (a note says so). */
        from_ns = t[0].horizon > t[0].start ? t[0].horizon : t[0].start;
    }
    bool clipped = false;
    if (ended) {
        /* Tracking ended there: nothing is known after it. A window past
         * it is clipped to it, so the instances alive then are shown as
         * they were, not as released by the end of tracking. */
        if (from_ns >= data_end && to_ns != INT64_MAX && from_ns < to_ns) {
            b.r->from_ns = from_ns;
            b.r->to_ns = to_ns;
            char buf[200];
            snprintf(buf, sizeof buf,
                     "the data ends at %" PRId64 ", where tracking ended: nothing is known "
                     "after it",
                     data_end);
            err = (b.r->note = strdup(buf)) ? 0 : CW_ENOMEM;
            goto end;
        }
        clipped = to_ns != INT64_MAX && to_ns > data_end;
        if (to_ns > data_end) to_ns = data_end;
        cw__store_tiers_clip(t, data_end);
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
    if (!err && whole_from && !b.r->note && t[0].horizon > t[0].start) {
        /* Retention folded older raw rows: the coarser tiers keep them. */
        char buf[320];
        snprintf(buf, sizeof buf,
                 "the whole raw tier [%" PRId64 ", %" PRId64 "); history before it is kept at "
                 "1 min / 1 h resolution: ask for it with --from",
                 p.t0, p.t1);
        if (!(b.r->note = strdup(buf))) err = CW_ENOMEM;
    }
    if (!err && clipped) {
        char buf[200];
        snprintf(buf, sizeof buf,
                 "the window is clipped to the end of the data at %" PRId64 ", where tracking "
                 "ended (processes alive then are shown as they were)",
                 data_end);
        err = add_note(b.r, buf);
    }
    segment_t seg[MAX_SEGMENTS];
    pick_t q = cw__report_start_floor(t, &p);
    int nback, nseg = cw__report_plan(t, &q, seg, &nback);
    if (!s->test.read_cache_off) { /* the reference reads the minutes (store_test.h) */
        int n = cw__report_hour_split(t, &q, seg, nseg, nback);
        s->test.hour_splits += n != nseg;
        nseg = n;
    }
    for (int i = 0; i < nseg; i++)
        s->test.open_segments += seg[i].tier == CW__TIER_OPEN;
    if (!err && top && top->m) err = match_ids(s, top, d);
    if (top && !err) err = report_top(s, t, &b, seg, nseg, nback, &q, p.t0, with_frames, top, d);
    if (!top || (!err && top->cut)) {
        if (!err) err = load_figs(s, t, &b, seg, nseg, nback, &q, p.t0, NULL, top, d);
        if (!err && top) err = cut_stacks(s, t, &b, seg, nseg, nback, &q, p.t0, d);
        if (!err) err = finish(s, &b, with_frames, d);
    }
    if (!err) cw_report_sort(b.r);
end:
    cw__store_read_end(s, began);
fail:
    free(b.ps);
    if (err) {
        cw_report_free(b.r);
        return err;
    }
    *out = b.r;
    return 0;
}

int cw_store_report(cw_store_t *s, int64_t from_ns, int64_t to_ns, bool with_frames,
                    cw_report_t **out, cw_diag_t *d)
{
    int err = report(s, from_ns, to_ns, with_frames, NULL, out, d);
    cw__report_caches_publish(s, false);
    return err;
}

int cw_store_report_match(cw_store_t *s, int64_t from_ns, int64_t to_ns, cw_rank_t key,
                          uint32_t limit, const cw_proc_match_t *m, bool with_frames,
                          cw_report_t **out, uint32_t *total, cw_diag_t *d)
{
    /* No criteria (an empty name is in every name): no filter, no pass
     * over the processes. */
    bool any = m && ((m->name && m->name[0]) || m->by_pid);
    top_req_t top = {.key = key, .limit = limit, .m = any ? m : NULL};
    int err = report(s, from_ns, to_ns, with_frames, &top, out, d);
    cw__report_caches_publish(s, false);
    free(top.ids);
    *total = err ? 0 : top.total;
    return err;
}

int cw_store_report_top(cw_store_t *s, int64_t from_ns, int64_t to_ns, cw_rank_t key,
                        uint32_t limit, bool with_frames, cw_report_t **out, uint32_t *total,
                        cw_diag_t *d)
{
    return cw_store_report_match(s, from_ns, to_ns, key, limit, NULL, with_frames, out, total, d);
}
