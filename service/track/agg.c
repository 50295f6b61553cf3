/* agg.c - the bucket aggregator (see agg.h and DESIGN.md "Storage model").
 *
 * Three maps, cleared at every bucket close, sum the current bucket:
 *   commits  (proc<<32|stack, rundown)  -> bytes, events
 *   releases (proc<<32|stack, a bucket) -> bytes, pieces, closed
 *   activity (proc, 0)                  -> events, delta, relpeak, time
 * Process starts and exits go straight into the pending batch. On close
 * the maps become rows, new frames and stacks (with their tags) are
 * appended, and the batch joins the held queue, which emits it at once
 * unless folding needs it (below).
 *
 * Folding (agg.h, DESIGN.md "Short-lived processes"): `insts` lists the
 * instances whose fate is open (started while folding was on, younger
 * than the lifetime, below the size, not exited) and the folded ones
 * whose rows may still be in a held batch; `groups` the folded groups of
 * the current period. A held batch leaves when no open instance started
 * in or before its bucket; on the way out its rows of folded instances
 * take their group's id, rows that then share a key are merged, and the
 * instances' own process rows give way to their group's. */
#include "commitwatch/agg.h"

#include <stdlib.h>
#include <string.h>

#include "commitwatch/common.h"
#include "commitwatch/error.h"
#include "commitwatch/event.h"
#include "commitwatch/keymap.h"

typedef struct commit_acc {
    uint32_t proc, stack;
    int64_t a;
    uint64_t bytes, events;
} commit_acc_t;

typedef struct release_acc {
    uint32_t proc, stack;
    int64_t a;
    uint64_t bytes, pieces, closed;
} release_acc_t;

typedef struct act_acc {
    uint32_t proc;
    uint64_t events;
    cw_balance_t bal; /* the bucket's: its relpeak and relpeak_ns */
} act_acc_t;

/* A dense array of accumulators found through a keymap. */
#define ACC_TABLE(T)                                                                               \
    struct {                                                                                       \
        cw_keymap_t map;                                                                           \
        T *v;                                                                                      \
        size_t cap;                                                                                \
    }

/* An instance folding is watching (see the file comment). */
typedef struct fold_inst {
    uint32_t proc, pid;
    int64_t start_ns;
    int64_t exit_ns; /* set when folded */
    uint64_t bytes;  /* committed so far */
    uint32_t group;  /* the group's id once folded; 0 while open */
    bool drop;       /* decided not to fold: leaves the list at the next prune */
} fold_inst_t;

/* A group of folded instances: one name, one period of their starts. It
 * takes the instance id of its first member, which is stored nowhere else,
 * and while that is its only member it is stored as that instance (pid,
 * cmdline, start, exit): a group of one is the instance itself. */
typedef struct fold_group {
    uint32_t id, pid; /* pid: of the first member */
    char *name, *cmdline;
    int64_t period;   /* floor(start of the first member, FOLD_PERIOD_NS) */
    int64_t start_ns; /* the earliest start of a member */
    /* the last exit of a member before the end of the batches emitted:
     * what the group's row says (INT64_MIN: none yet, stored as alive) */
    int64_t shown_exit;
    uint64_t members;
} fold_group_t;

/* One group per name per hour of starts: a day of a busy shell loop is
 * 24 rows, and a window still shows when the instances ran. */
#define FOLD_PERIOD_NS (INT64_C(3600) * CW_NS_PER_S)

struct cw_agg {
    int64_t width;
    cw_stacks_t *stacks;
    cw_tagger_t *tagger;
    uint32_t sent_frames, sent_stacks; /* ids below these are stored */
    cw_agg_emit_fn emit;
    void *emit_ctx;

    int64_t bucket; /* start of the open bucket; INT64_MIN when none */
    cw_batch_t *batch;
    /* The latest time advanced to, and the end of the last bucket closed
     * (INT64_MIN: none): where a rider's bucket may open (cw_agg_add_rider). */
    int64_t last_ts, closed_end;
    ACC_TABLE(commit_acc_t) commits;
    ACC_TABLE(release_acc_t) releases;
    ACC_TABLE(act_acc_t) acts;
    /* The instance whose activity was looked up last and its index in
     * acts (proc 0: none; ids start at 1): an event's commit or release
     * and the event itself find it once. Forgotten when acts is cleared. */
    uint32_t last_act_proc, last_act;
    uint64_t events_total, events_lost;
    int64_t drift;
    int err; /* first failure inside a callback, returned by advance/flush */

    /* Folding; lifetime 0 = off. */
    int64_t fold_lifetime;
    uint64_t fold_bytes;
    fold_inst_t *insts;
    size_t insts_cap;
    uint32_t ninsts, nopen; /* nopen: insts still undecided */
    cw_keymap_t inst_map;   /* (proc, 0) -> index into insts */
    bool insts_dirty;       /* some have drop set */
    fold_group_t *groups;
    size_t groups_cap;
    uint32_t ngroups;
    /* Closed batches not emitted yet, oldest first. */
    cw_batch_t **held;
    size_t held_cap;
    uint32_t nheld;
};

/* ---- folding ------------------------------------------------------------ */

static fold_inst_t *inst_of(cw_agg_t *a, uint32_t proc)
{
    if (a->ninsts == 0) return NULL;
    uint32_t i = cw_keymap_find(&a->inst_map, proc, 0);
    return i == UINT32_MAX ? NULL : &a->insts[i];
}

static void inst_keep(cw_agg_t *a, fold_inst_t *f)
{
    if (f->drop || f->group) return;
    f->drop = true;
    a->nopen--;
    a->insts_dirty = true;
}

static fold_group_t *group_by_id(cw_agg_t *a, uint32_t id)
{
    for (uint32_t i = 0; i < a->ngroups; i++)
        if (a->groups[i].id == id) return &a->groups[i];
    return NULL;
}

/* The group for instance f of process p; NULL on ENOMEM. */
static fold_group_t *group_for(cw_agg_t *a, const fold_inst_t *f, const cw_proc_t *p)
{
    const char *name = p->name ? p->name : "";
    int64_t period = cw_floor_to(f->start_ns, FOLD_PERIOD_NS);
    for (uint32_t i = 0; i < a->ngroups; i++)
        if (a->groups[i].period == period && strcmp(a->groups[i].name, name) == 0)
            return &a->groups[i];
    char *n = cw_strdup(name), *c = cw_strdup(p->cmdline);
    if (!n || (p->cmdline && !c) || CW_RESERVE(a->groups, a->groups_cap, (size_t)a->ngroups + 1)) {
        free(n);
        free(c);
        return NULL;
    }
    fold_group_t *g = &a->groups[a->ngroups++];
    *g = (fold_group_t){f->proc, f->pid, n, c, period, f->start_ns, INT64_MIN, 0};
    return g;
}

/* Drops the decided-unfolded instances and the folded ones whose exit is
 * before `emitted_end` (their rows have all left), then rebuilds the map;
 * drops groups whose period ended before it and that no instance names. */
static int prune(cw_agg_t *a, int64_t emitted_end)
{
    uint32_t n = 0;
    bool changed = a->insts_dirty;
    for (uint32_t i = 0; i < a->ninsts; i++) {
        fold_inst_t *f = &a->insts[i];
        bool gone = f->drop || (f->group && f->exit_ns < emitted_end);
        changed |= gone;
        if (!gone) a->insts[n++] = *f;
    }
    a->ninsts = n;
    a->insts_dirty = false;
    if (changed) {
        cw_keymap_clear(&a->inst_map);
        for (uint32_t i = 0; i < n; i++) {
            int added;
            if (cw_keymap_get(&a->inst_map, a->insts[i].proc, 0, &added) == UINT32_MAX)
                return CW_ENOMEM;
        }
    }
    uint32_t m = 0;
    for (uint32_t i = 0; i < a->ngroups; i++) {
        fold_group_t *g = &a->groups[i];
        bool used = g->period + FOLD_PERIOD_NS > emitted_end;
        for (uint32_t j = 0; j < a->ninsts && !used; j++)
            used = a->insts[j].group == g->id;
        if (used) {
            a->groups[m++] = *g;
        } else {
            free(g->name);
            free(g->cmdline);
        }
    }
    a->ngroups = m;
    return 0;
}

/* Instances at least the lifetime old at ts are not short: kept. */
static void decide_by_age(cw_agg_t *a, int64_t ts)
{
    for (uint32_t i = 0; i < a->ninsts && a->nopen; i++)
        if (!a->insts[i].group && ts - a->insts[i].start_ns >= a->fold_lifetime)
            inst_keep(a, &a->insts[i]);
}

/* Rows that share a key after remapping become one: sums, except the
 * activity's relpeak, which becomes the sum of the members' peaks (an
 * upper bound of the group's, as the machine's peak is), first reached at
 * the earliest member's. */
static void merge_rows(cw_batch_t *b)
{
    b->commits.n = cw_batch_merge_commits(b->commits.v, b->commits.n);
    b->releases.n = cw_batch_merge_releases(b->releases.v, b->releases.n);
    uint32_t n = 0;
    cw_batch_sort_activity(b->activity.v, b->activity.n);
    for (uint32_t i = 0; i < b->activity.n; i++) {
        cw_row_activity_t *r = &b->activity.v[i], *o = n ? &b->activity.v[n - 1] : NULL;
        if (o && o->proc == r->proc) {
            o->events += r->events;
            o->delta += r->delta;
            if (r->relpeak > 0 && (o->relpeak == 0 || r->relpeak_ns < o->relpeak_ns))
                o->relpeak_ns = r->relpeak_ns;
            o->relpeak += r->relpeak;
        } else
            b->activity.v[n++] = *r;
    }
    b->activity.n = n;
}

/* The group id for rows of proc, or proc itself. */
static uint32_t remap(cw_agg_t *a, uint32_t proc, bool *changed)
{
    fold_inst_t *f = inst_of(a, proc);
    if (!f || !f->group) return proc;
    *changed = true;
    return f->group;
}

/* Gives a held batch's rows of folded instances to their groups. */
static int fold_batch(cw_agg_t *a, cw_batch_t *b)
{
    bool changed = false;
    int rc = 0;
    if (a->ninsts == 0) return 0;
    for (uint32_t i = 0; i < b->commits.n; i++)
        b->commits.v[i].proc = remap(a, b->commits.v[i].proc, &changed);
    for (uint32_t i = 0; i < b->releases.n; i++)
        b->releases.v[i].proc = remap(a, b->releases.v[i].proc, &changed);
    for (uint32_t i = 0; i < b->activity.n; i++)
        b->activity.v[i].proc = remap(a, b->activity.v[i].proc, &changed);
    if (changed) merge_rows(b);
    /* A group's row shows the exits up to this batch's end, as an
     * instance's would. */
    int64_t bend = b->bucket_ns + b->width_ns;
    for (uint32_t i = 0; i < a->ninsts; i++) {
        const fold_inst_t *f = &a->insts[i];
        fold_group_t *g = f->group && f->exit_ns < bend ? group_by_id(a, f->group) : NULL;
        if (g && f->exit_ns > g->shown_exit) g->shown_exit = f->exit_ns;
    }
    /* Process rows: a folded instance's start and exit give way to one row
     * of its group (pid 0 once it has two members, the group's first start
     * and last exit up to here), and its exit adds its folded row. */
    uint32_t n = 0, ngroups_added = 0;
    uint32_t nprocs = b->procs.n;
    for (uint32_t i = 0; i < nprocs; i++) {
        cw_row_proc_t r = b->procs.v[i];
        fold_inst_t *f = inst_of(a, r.id);
        if (!f || !f->group) {
            b->procs.v[n++] = r;
            continue;
        }
        if (rc == 0 && r.exit_ns != CW_TS_NEVER) {
            cw_row_folded_t fr = {f->group, f->pid, f->start_ns, f->exit_ns, f->bytes};
            rc = cw_batch_add_folded(b, &fr);
        }
        bool have = false;
        for (uint32_t j = 0; j < ngroups_added && !have; j++)
            have = b->procs.v[nprocs + j].id == f->group;
        fold_group_t *g = group_by_id(a, f->group);
        if (rc == 0 && !have && g) {
            bool one = g->members == 1;
            int64_t exit = g->shown_exit == INT64_MIN ? CW_TS_NEVER : g->shown_exit;
            rc = cw_batch_add_proc(b, g->id, one ? g->pid : 0, g->start_ns, exit, g->name,
                                   one ? g->cmdline : NULL);
            if (rc == 0) {
                /* keep the group rows after the originals while scanning */
                ngroups_added++;
            }
        }
        free(r.name);
        free(r.cmdline);
    }
    /* Move the group rows down behind the kept ones. */
    for (uint32_t j = 0; j < ngroups_added; j++)
        b->procs.v[n++] = b->procs.v[nprocs + j];
    b->procs.n = n;
    return rc;
}

/* Emits the held batches that no open instance may still add to (all of
 * them when force), oldest first. */
static int drain(cw_agg_t *a, bool force)
{
    int rc = 0;
    int64_t emitted_end = INT64_MIN;
    uint32_t k = 0;
    while (k < a->nheld && rc == 0) {
        cw_batch_t *b = a->held[k];
        if (!force && a->nopen) {
            bool blocked = false;
            for (uint32_t i = 0; i < a->ninsts && !blocked; i++) {
                const fold_inst_t *f = &a->insts[i];
                blocked = !f->group && !f->drop && f->start_ns < b->bucket_ns + b->width_ns;
            }
            if (blocked) break;
        }
        a->held[k++] = NULL;
        emitted_end = b->bucket_ns + b->width_ns;
        if ((rc = fold_batch(a, b)) != 0) {
            cw_batch_free(b);
            break;
        }
        /* In key order: the store's writer, the busier thread, then only
         * checks it (cw_batch_merge_*). */
        merge_rows(b);
        rc = a->emit(a->emit_ctx, b);
    }
    /* Batches not sent on an error are dropped with the error. */
    if (rc != 0)
        for (uint32_t i = k; i < a->nheld; i++) {
            cw_batch_free(a->held[i]);
            a->held[i] = NULL;
        }
    uint32_t left = rc != 0 ? 0 : a->nheld - k;
    if (left) memmove(a->held, a->held + k, left * sizeof *a->held);
    a->nheld = left;
    if (rc == 0 && emitted_end != INT64_MIN) rc = prune(a, emitted_end);
    return rc;
}

static int hold(cw_agg_t *a, cw_batch_t *b)
{
    if (CW_RESERVE(a->held, a->held_cap, (size_t)a->nheld + 1)) {
        cw_batch_free(b);
        return CW_ENOMEM;
    }
    a->held[a->nheld++] = b;
    return 0;
}

/* Index of the accumulator for (k1, k2), zeroed when new; UINT32_MAX on
 * out of memory. */
static inline uint32_t acc_get(cw_keymap_t *map, void *v, size_t *cap, size_t elem, uint64_t k1,
                        uint64_t k2)
{
    int added;
    uint32_t i = cw_keymap_get(map, k1, k2, &added);
    if (i == UINT32_MAX || !added) return i;
    if (cw_reserve(v, cap, (size_t)i + 1, elem) != 0) return UINT32_MAX;
    char *base;
    memcpy(&base, v, sizeof base); /* v is the address of the table's T * */
    memset(base + (size_t)i * elem, 0, elem);
    return i;
}

#define ACC(a, table, k1, k2)                                                                      \
    acc_get(&(a)->table.map, &(a)->table.v, &(a)->table.cap, sizeof *(a)->table.v, (k1), (k2))

static int open_bucket(cw_agg_t *a, int64_t ts)
{
    if (a->batch) return 0;
    a->bucket = cw_floor_to(ts, a->width);
    return cw_batch_create(a->bucket, a->width, &a->batch);
}

static act_acc_t *act_of(cw_agg_t *a, const cw_proc_t *p)
{
    if (p->id == a->last_act_proc && p->id != 0) return &a->acts.v[a->last_act];
    uint32_t i = ACC(a, acts, p->id, 0);
    if (i == UINT32_MAX) return NULL;
    a->last_act_proc = p->id;
    a->last_act = i;
    act_acc_t *x = &a->acts.v[i];
    if (x->proc == 0) {
        x->proc = p->id;
        x->bal.peak_ns = a->bucket;
    }
    return x;
}

static void fail(cw_agg_t *a, int err)
{
    if (!a->err) a->err = err;
}

/* The instance's row in the bucket of ts (exit_ns CW_TS_NEVER while it
 * lives); false, with the aggregator failed, when out of memory. */
static bool proc_row(cw_agg_t *a, const cw_proc_t *p, int64_t ts, int64_t exit_ns)
{
    if (open_bucket(a, ts) == 0 &&
        cw_batch_add_proc(a->batch, p->id, p->pid, p->start_ns, exit_ns, p->name, p->cmdline) == 0)
        return true;
    fail(a, CW_ENOMEM);
    return false;
}

static void on_start(void *ctx, const cw_proc_t *p, int64_t ts)
{
    cw_agg_t *a = ctx;
    if (!proc_row(a, p, ts, CW_TS_NEVER)) return;
    /* An announced start may fold; a "pid N" instance has no name to
     * group by. */
    if (a->fold_lifetime <= 0 || p->implicit) return;
    int added;
    uint32_t i = cw_keymap_get(&a->inst_map, p->id, 0, &added);
    if (i == UINT32_MAX || CW_RESERVE(a->insts, a->insts_cap, (size_t)i + 1)) {
        fail(a, CW_ENOMEM);
        return;
    }
    a->insts[i] = (fold_inst_t){p->id, p->pid, p->start_ns, CW_TS_NEVER, 0, 0, false};
    a->ninsts = i + 1;
    a->nopen++;
}

static void on_exit_(void *ctx, const cw_proc_t *p, int64_t ts)
{
    cw_agg_t *a = ctx;
    if (!proc_row(a, p, ts, ts)) return;
    /* A real exit, or the end of tracking (the row says which). */
    a->batch->procs.v[a->batch->procs.n - 1].tracking_ended = p->tracking_ended;
    fold_inst_t *f = inst_of(a, p->id);
    if (!f || f->drop || f->group) return;
    /* Folded when it really exited, young and small; else kept. */
    if (p->tracking_ended || ts - f->start_ns >= a->fold_lifetime || f->bytes >= a->fold_bytes) {
        inst_keep(a, f);
        return;
    }
    f->exit_ns = ts;
    fold_group_t *g = group_for(a, f, p);
    if (!g) {
        fail(a, CW_ENOMEM);
        return;
    }
    /* members fold at their exits, not in the order they started */
    if (f->start_ns < g->start_ns) g->start_ns = f->start_ns;
    g->members++;
    f->group = g->id;
    a->nopen--;
}

static void on_event(void *ctx, const cw_proc_t *p, int64_t ts)
{
    cw_agg_t *a = ctx;
    act_acc_t *x;
    if (open_bucket(a, ts) != 0 || !(x = act_of(a, p))) {
        fail(a, CW_ENOMEM);
        return;
    }
    x->events++;
    cw_balance_note(&x->bal, ts);
}

static void on_commit(void *ctx, const cw_proc_t *p, const cw_commit_t *c, int64_t ts)
{
    cw_agg_t *a = ctx;
    bool rundown = c->ts == CW_TS_BEFORE;
    act_acc_t *x;
    uint32_t i;
    if (open_bucket(a, ts) != 0 || !(x = act_of(a, p)) ||
        (i = ACC(a, commits, ((uint64_t)p->id << 32) | c->stack_id, rundown)) == UINT32_MAX) {
        fail(a, CW_ENOMEM);
        return;
    }
    commit_acc_t *ca = &a->commits.v[i];
    ca->proc = p->id;
    ca->stack = c->stack_id;
    ca->a = rundown ? CW_TS_BEFORE : a->bucket;
    ca->bytes += c->bytes;
    ca->events++;
    fold_inst_t *f = inst_of(a, p->id);
    if (f && !f->drop && !f->group) {
        /* Rundown means it ran before tracing: not a short life. */
        f->bytes += c->bytes;
        if (rundown || f->bytes >= a->fold_bytes) inst_keep(a, f);
    }
    /* Rundown bytes were outstanding all along: no change at this time. */
    if (!rundown) x->bal.delta += (int64_t)c->bytes;
}

static void on_release(void *ctx, const cw_proc_t *p, const cw_commit_t *c, uint64_t bytes,
                       int64_t ts)
{
    cw_agg_t *a = ctx;
    int64_t ab = c->ts == CW_TS_BEFORE ? CW_TS_BEFORE : cw_floor_to(c->ts, a->width);
    act_acc_t *x;
    uint32_t i;
    if (open_bucket(a, ts) != 0 || !(x = act_of(a, p)) ||
        (i = ACC(a, releases, ((uint64_t)p->id << 32) | c->stack_id, (uint64_t)ab)) == UINT32_MAX) {
        fail(a, CW_ENOMEM);
        return;
    }
    release_acc_t *ra = &a->releases.v[i];
    ra->proc = p->id;
    ra->stack = c->stack_id;
    ra->a = ab;
    ra->bytes += bytes;
    ra->pieces++;
    if (c->remaining == 0) ra->closed++;
    x->bal.delta -= (int64_t)bytes;
}

cw_tracker_sink_t cw_agg_sink(cw_agg_t *a)
{
    cw_tracker_sink_t s = {a, on_start, on_event, on_commit, on_release, on_exit_, NULL};
    return s;
}

int cw_agg_create(int64_t width_ns, cw_stacks_t *stacks, cw_tagger_t *tagger,
                  uint32_t stored_frames, uint32_t stored_stacks, cw_agg_emit_fn emit,
                  void *emit_ctx, cw_agg_t **out)
{
    cw_agg_t *a = calloc(1, sizeof *a);
    if (!a || width_ns <= 0) {
        free(a);
        return a ? CW_EINVAL : CW_ENOMEM;
    }
    a->width = width_ns;
    a->stacks = stacks;
    a->tagger = tagger;
    a->sent_frames = stored_frames ? stored_frames : 1;
    a->sent_stacks = stored_stacks;
    a->emit = emit;
    a->emit_ctx = emit_ctx;
    a->bucket = INT64_MIN;
    a->last_ts = a->closed_end = INT64_MIN;
    if (cw_keymap_init(&a->commits.map, 1024) || cw_keymap_init(&a->releases.map, 1024) ||
        cw_keymap_init(&a->acts.map, 256) || cw_keymap_init(&a->inst_map, 64)) {
        cw_agg_destroy(a);
        return CW_ENOMEM;
    }
    *out = a;
    return 0;
}

void cw_agg_set_emit(cw_agg_t *a, cw_agg_emit_fn emit, void *emit_ctx)
{
    a->emit = emit;
    a->emit_ctx = emit_ctx;
}

void cw_agg_destroy(cw_agg_t *a)
{
    if (!a) return;
    cw_batch_free(a->batch);
    cw_keymap_free(&a->commits.map);
    cw_keymap_free(&a->releases.map);
    cw_keymap_free(&a->acts.map);
    cw_keymap_free(&a->inst_map);
    for (uint32_t i = 0; i < a->nheld; i++)
        cw_batch_free(a->held[i]);
    free(a->held);
    for (uint32_t i = 0; i < a->ngroups; i++) {
        free(a->groups[i].name);
        free(a->groups[i].cmdline);
    }
    free(a->groups);
    free(a->insts);
    free(a->commits.v);
    free(a->releases.v);
    free(a->acts.v);
    free(a);
}

void cw_agg_set_tagger(cw_agg_t *a, cw_tagger_t *tagger)
{
    a->tagger = tagger;
}

void cw_agg_set_fold(cw_agg_t *a, int64_t lifetime_ns, uint64_t max_bytes)
{
    a->fold_lifetime = lifetime_ns > 0 && max_bytes > 0 ? lifetime_ns : 0;
    a->fold_bytes = max_bytes;
}

uint32_t cw_agg_held(const cw_agg_t *a)
{
    return a->nheld;
}

int cw_agg_add_correction(cw_agg_t *a, uint32_t proc, int64_t ts, uint64_t committed,
                          uint64_t decommitted)
{
    cw_row_correction_t r = {proc, ts, committed, decommitted};
    fold_inst_t *f = inst_of(a, proc);
    if (f) inst_keep(a, f); /* its row shows the correction */
    /* ts is in the open bucket (the correction's events were just
     * applied); open_bucket keeps a batch already open. */
    int rc = open_bucket(a, ts);
    return rc ? rc : cw_batch_add_correction(a->batch, &r);
}

int cw_agg_add_rider(cw_agg_t *a, cw_batch_t *r)
{
    if (a->err) return a->err;
    int64_t ts = a->last_ts;
    if (!a->batch && a->closed_end != INT64_MIN && ts < a->closed_end) ts = a->closed_end;
    if (ts == INT64_MIN) return CW_EINVAL; /* no time yet: nothing to ride with */
    int rc = open_bucket(a, ts);
    return rc ? rc : cw_batch_add_rider(a->batch, r);
}

void cw_agg_set_counters(cw_agg_t *a, uint64_t events_total, uint64_t events_lost,
                         int64_t drift_bytes)
{
    a->events_total = events_total;
    a->events_lost = events_lost;
    a->drift = drift_bytes;
}

/* Moves the maps into the batch, adds new frames and stacks, emits. */
static int close_bucket(cw_agg_t *a)
{
    cw_batch_t *b = a->batch;
    int rc = 0;
    if (!b) return 0;
    a->batch = NULL;
    a->closed_end = b->bucket_ns + b->width_ns;

    for (uint32_t i = 0; i < a->commits.map.count && rc == 0; i++) {
        const commit_acc_t *c = &a->commits.v[i];
        cw_row_commit_t r = {c->proc, c->stack, c->a, c->bytes, c->events};
        rc = cw_batch_add_commit(b, &r);
    }
    for (uint32_t i = 0; i < a->releases.map.count && rc == 0; i++) {
        const release_acc_t *x = &a->releases.v[i];
        cw_row_release_t r = {x->proc, x->stack, x->a, x->bytes, x->pieces, x->closed};
        rc = cw_batch_add_release(b, &r);
    }
    for (uint32_t i = 0; i < a->acts.map.count && rc == 0; i++) {
        const act_acc_t *x = &a->acts.v[i];
        cw_row_activity_t r = {x->proc, x->events, x->bal.delta, x->bal.peak, x->bal.peak_ns};
        rc = cw_batch_add_activity(b, &r);
    }
    uint32_t nf = cw_stacks_frame_count(a->stacks);
    for (uint32_t id = a->sent_frames; id < nf && rc == 0; id++)
        rc = cw_batch_add_frame(b, id, cw_stacks_frame_text(a->stacks, id));
    uint32_t ns = cw_stacks_count(a->stacks);
    for (uint32_t id = a->sent_stacks; id < ns && rc == 0; id++) {
        uint32_t n;
        const uint32_t *f = cw_stacks_frames(a->stacks, id, &n);
        const char *tag = NULL; /* no tagger: the stack is tagged where it is stored */
        if (a->tagger) tag = cw_tagger_tag_name(a->tagger, cw_tagger_tag(a->tagger, a->stacks, id));
        rc = cw_batch_add_stack(b, id, f, n, tag);
    }
    cw_keymap_clear(&a->commits.map);
    cw_keymap_clear(&a->releases.map);
    cw_keymap_clear(&a->acts.map);
    a->last_act_proc = 0;
    if (rc != 0) {
        cw_batch_free(b);
        return rc;
    }
    a->sent_frames = nf;
    a->sent_stacks = ns;
    b->events_total = a->events_total;
    b->events_lost = a->events_lost;
    b->drift_bytes = a->drift;
    return hold(a, b);
}

int cw_agg_advance(cw_agg_t *a, int64_t ts)
{
    int rc = 0;
    if (a->err) return a->err;
    if (ts > a->last_ts) a->last_ts = ts;
    if (a->batch && ts >= a->bucket + a->width) rc = close_bucket(a);
    if (rc == 0 && a->fold_lifetime > 0) decide_by_age(a, ts);
    if (rc == 0 && a->nheld) rc = drain(a, false);
    return rc;
}

int64_t cw_agg_next_bucket(const cw_agg_t *a, int64_t ts)
{
    return cw_floor_to(ts, a->width) + a->width;
}

int cw_agg_flush(cw_agg_t *a)
{
    if (a->err) return a->err;
    int rc = close_bucket(a);
    for (uint32_t i = 0; i < a->ninsts; i++)
        inst_keep(a, &a->insts[i]);
    if (rc == 0) rc = drain(a, true);
    return rc;
}
