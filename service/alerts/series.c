/* series.c - the per-step series the alert engine keeps, per process
 * instance and stack tag, fed incrementally from the store's feed
 * (alertdb.h, "the engine's feed").
 *
 * Each (instance, tag) has its exact outstanding bytes now and a ring of
 * the last `len` steps (alert_step wide, aligned to the Unix epoch): per
 * step the units committed and the commit events, the units outstanding
 * at its end, and of the step's commits the units and events still
 * outstanding (decreased as later releases of them arrive: a release row
 * says the step of its commit). So the impacting bytes of a window are
 * the sum of its steps' `rem`, its transient bytes `committed - rem`.
 *
 * A ring is narrow (8 bytes a step) while its steps fit, else wide (20
 * bytes): see "The rings" below.
 *
 * Feeding: the first feed rebuilds the ring from the store (the state at
 * the ring's first step, then the steps from the minute tier where it is
 * rolled up and exact, raw rows after it); later feeds read the raw rows
 * of [fed_to, T). Rows are read one step at a time, so every row of a
 * read belongs to the step `head`. */
#include <stdlib.h>
#include <string.h>

#include "alerts/alerts_internal.h"
#include "commitwatch/common.h"
#include "commitwatch/event.h"
#include "commitwatch/hash.h"

#define MINUTE ((int64_t)60000000000)

/* ---- interned strings ---------------------------------------------------- */

static uint64_t str_hash(const char *s)
{
    return cw_hash_bytes(s, strlen(s));
}

uint32_t cw__strtab_get(cw__strtab_t *t, const char *s)
{
    uint64_t h = str_hash(s);
    if (!cw_keymap_ready(&t->map) && cw_keymap_init(&t->map, 16)) return UINT32_MAX;
    for (uint64_t k = 0;; k++) {
        int added = 0;
        uint32_t i = cw_keymap_get(&t->map, h, k, &added);
        if (i == UINT32_MAX) return i;
        if (!added) {
            if (strcmp(t->v[i], s) == 0) return i;
            continue; /* a hash collision: the next k */
        }
        char *c = cw_strdup(s);
        if (!c || CW_RESERVE(t->v, t->cap, t->n + 1)) {
            free(c);
            return UINT32_MAX; /* the map keeps a dangling index: fatal anyway */
        }
        t->v[t->n++] = c;
        return i;
    }
}

void cw__strtab_free(cw__strtab_t *t)
{
    cw_free_strv(t->v, t->n);
    cw_keymap_free(&t->map);
    memset(t, 0, sizeof *t);
}

/* ---- the set ------------------------------------------------------------- */

/* Sets its fields one a line (alike to agg.c's creation in form only). */
int cw__aset_init(cw__aset_t *a, int64_t step, uint32_t len)
{
    memset(a, 0, sizeof *a);
    a->step = step;
    a->len = len ? len : 1;
    a->head = INT64_MIN;
    a->fed_to = INT64_MIN;
    a->pruned_at = INT64_MIN;
    a->evaluated_to = INT64_MIN;
    if (cw_keymap_init(&a->procmap, 16) || cw_keymap_init(&a->basemap, 16)) {
        cw__aset_free(a);
        return CW_ENOMEM;
    }
    return 0;
}

static void drop_series(cw__aset_t *a)
{
    for (size_t i = 0; i < a->nbases; i++)
        free(a->bases[i].ring);
    a->nbases = 0;
    a->nprocs = 0;
    a->max_proc_id = 0;
    cw_keymap_clear(&a->procmap);
    cw_keymap_clear(&a->basemap);
}

/* A teardown list (alike to the tracker's in form only). */
void cw__aset_free(cw__aset_t *a)
{
    drop_series(a);
    free(a->bases);
    free(a->procs);
    cw_keymap_free(&a->procmap);
    cw_keymap_free(&a->basemap);
    cw__strtab_free(&a->names);
    cw__strtab_free(&a->tags);
    memset(a, 0, sizeof *a);
}

void cw__aset_reset(cw__aset_t *a)
{
    drop_series(a);
    a->head = INT64_MIN;
    a->fed_to = INT64_MIN;
    a->evaluated_to = INT64_MIN; /* new rules: nothing resolved under them yet */
}

size_t cw__aset_bytes(const cw__aset_t *a)
{
    size_t b = a->basecap * sizeof *a->bases + a->proccap * sizeof *a->procs;
    for (size_t i = 0; i < a->nbases; i++)
        b += cw__abase_ring_bytes(&a->bases[i]);
    b += cw_keymap_bytes(&a->procmap) + cw_keymap_bytes(&a->basemap);
    return b;
}

static uint32_t units(int64_t bytes)
{
    if (bytes <= 0) return 0;
    int64_t u = (bytes + CW__UNIT / 2) >> CW__UNIT_SHIFT;
    return u > UINT32_MAX ? UINT32_MAX : (uint32_t)u;
}

/* The first step of the window that b has data in. */
static int64_t window_lo(const cw__aset_t *a, const cw__abase_t *b)
{
    if (a->head == INT64_MIN) return b->birth;
    int64_t lo = a->head - a->len + 1;
    return lo > b->birth ? lo : b->birth;
}

/* ---- The rings ------------------------------------------------------------
 *
 * A series' steps are held narrow (cw__nslot_t, 8 bytes) while every one
 * of them fits: at most 65,535 units (256 MiB) committed, outstanding and
 * remaining and 255 commits in a step, which holds for nearly every
 * series (the 10,000-process replay of docs/BENCHMARKS.md: all of them).
 * The first step that does not fit makes the ring wide (cw__slot_t, 20
 * bytes) before it is stored, for as long as the series has explicit
 * steps in the window. Either way a step reads back as the same five
 * integers (cw__slot_t), so no sum, point or rule's decision depends on
 * the width; test_alert_series compares both with a plain array of
 * steps, through widening and wrap-around.
 *
 * A ring grows to the explicit steps the window needs plus a quarter (at
 * most len), not by doubling: a series active at every step of the 6 h
 * window reallocates about 25 times over its first 6 h, and holds at most
 * a quarter more than it uses instead of up to twice. */

static size_t slot_size(const cw__abase_t *b)
{
    return b->wide ? sizeof(cw__slot_t) : sizeof(cw__nslot_t);
}

size_t cw__abase_ring_bytes(const cw__abase_t *b)
{
    return (size_t)b->cap * slot_size(b);
}

static bool narrow_fits(const cw__slot_t *s)
{
    return s->committed <= UINT16_MAX && s->out <= UINT16_MAX && s->rem <= UINT16_MAX &&
           s->commits <= UINT8_MAX && s->rem_commits <= UINT8_MAX;
}

/* The step at index i of b's ring. */
static cw__slot_t ring_at(const cw__abase_t *b, uint64_t i)
{
    if (b->wide) return ((const cw__slot_t *)b->ring)[i];
    const cw__nslot_t *n = (const cw__nslot_t *)b->ring + i;
    return (cw__slot_t){n->committed, n->commits, n->out, n->rem, n->rem_commits};
}

/* Stores s at index i of b's ring: wide, or s fits narrow. */
static void ring_put(cw__abase_t *b, uint64_t i, const cw__slot_t *s)
{
    if (b->wide) {
        ((cw__slot_t *)b->ring)[i] = *s;
        return;
    }
    ((cw__nslot_t *)b->ring)[i] =
        (cw__nslot_t){(uint16_t)s->committed, (uint16_t)s->out, (uint16_t)s->rem,
                      (uint8_t)s->commits, (uint8_t)s->rem_commits};
}

/* Moves b's explicit steps in the window (from lo) to a new ring of cap
 * steps, wide or not (wide when any of them does not fit narrow). 0 or
 * CW_ENOMEM (b unchanged). */
static int ring_move(cw__abase_t *b, int64_t lo, uint32_t cap, bool wide)
{
    cw__abase_t n = *b;
    n.cap = cap;
    n.wide = wide;
    n.ring = malloc((size_t)cap * slot_size(&n));
    if (!n.ring) return CW_ENOMEM;
    for (int64_t k = lo; k <= b->last; k++) {
        cw__slot_t x = ring_at(b, (uint64_t)k % b->cap);
        ring_put(&n, (uint64_t)k % cap, &x);
    }
    free(b->ring);
    *b = n;
    return 0;
}

cw__slot_t cw__abase_step(const cw__abase_t *b, int64_t step)
{
    if (step > b->last) return (cw__slot_t){0, 0, units(b->cur), 0, 0};
    return ring_at(b, (uint64_t)step % b->cap);
}

/* Makes step `step` of b (in the window) explicit, the ring grown as
 * needed (the steps made explicit on the way: nothing committed, the
 * outstanding of now). 0 or CW_ENOMEM (b's steps unchanged). */
static int slot_make(const cw__aset_t *a, cw__abase_t *b, int64_t step)
{
    int64_t lo = window_lo(a, b);
    if (b->last < lo - 1) b->last = lo - 1; /* what was explicit left the window */
    if (step <= b->last) return 0;
    uint64_t need = (uint64_t)(step - lo + 1);
    cw__slot_t fill = {0, 0, units(b->cur), 0, 0};
    bool wide = b->wide || !narrow_fits(&fill);
    if (need > b->cap || wide != b->wide) {
        uint64_t cap = b->cap;
        if (need > cap) cap = need + need / 4;
        if (cap > a->len) cap = a->len;
        int err = ring_move(b, lo, (uint32_t)cap, wide);
        if (err) return err;
    }
    for (int64_t k = b->last + 1; k <= step; k++)
        ring_put(b, (uint64_t)k % b->cap, &fill);
    b->last = step;
    return 0;
}

int cw__abase_set(const cw__aset_t *a, cw__abase_t *b, int64_t step, const cw__slot_t *s)
{
    int err = slot_make(a, b, step);
    if (!err && !b->wide && !narrow_fits(s)) err = ring_move(b, window_lo(a, b), b->cap, true);
    if (err) return err;
    ring_put(b, (uint64_t)step % b->cap, s);
    return 0;
}

/* The base of (proc id, tag), created with an empty ring; NULL on ENOMEM
 * or for an instance the set does not know (rows of an instance that
 * exited before the window: nothing of it matters). */
static cw__abase_t *base_get(cw__aset_t *a, uint32_t proc, const char *tagname)
{
    uint32_t tag = cw__strtab_get(&a->tags, tagname);
    int added = 0;
    if (tag == UINT32_MAX) return NULL;
    uint32_t pi = cw_keymap_get(&a->procmap, proc, 0, &added);
    if (pi == UINT32_MAX) return NULL;
    if (added) {
        /* Unknown instance (the procs read comes first, so this is one the
         * store has rows of but that ended before the window): kept with
         * no name so its rows still add up, and ended before the ring's
         * first step, so that prune() forgets it once it holds nothing
         * (with no end it was kept for good). */
        if (CW_RESERVE(a->procs, a->proccap, a->nprocs + 1)) return NULL;
        int64_t before = a->head == INT64_MIN ? INT64_MIN : (a->head - a->len + 1) * a->step - 1;
        a->procs[a->nprocs++] = (cw__aproc_t){proc, 0, INT64_MIN, before, CW_TS_NEVER,
                                              cw__strtab_get(&a->names, ""), false};
    }
    uint32_t bi = cw_keymap_get(&a->basemap, proc, tag, &added);
    if (bi == UINT32_MAX) return NULL;
    if (added) {
        if (CW_RESERVE(a->bases, a->basecap, a->nbases + 1)) return NULL;
        a->bases[a->nbases++] = (cw__abase_t){pi, tag, 0, a->head, a->head - 1, 0, false, NULL};
    }
    return &a->bases[bi];
}

/* Starts step `to` for every base: the steps between are empty, their
 * outstanding the base's outstanding now, which is what a base's steps
 * after its `last` read as: nothing to write. */
static void advance(cw__aset_t *a, int64_t to)
{
    if (a->head != INT64_MIN && to <= a->head) return;
    a->head = to;
}

/* What a release of `units` units and `count` commit events takes from
 * the step of their commits. */
static void release_from(cw__slot_t *c, uint32_t u, uint32_t count)
{
    c->rem = c->rem > u ? c->rem - u : 0;
    c->rem_commits = c->rem_commits > count ? c->rem_commits - count : 0;
}

static int on_row(void *ctx, const cw_feed_row_t *r)
{
    cw__aset_t *a = ctx;
    cw__abase_t *b = base_get(a, r->proc, r->tag);
    if (!b || slot_make(a, b, a->head)) return CW_ENOMEM;
    cw__slot_t s = cw__abase_step(b, a->head);
    a->rows_read++;
    switch (r->kind) {
    case CW_FEED_START:
    case CW_FEED_RUNDOWN:
        b->cur += r->bytes;
        break;
    case CW_FEED_COMMIT:
        b->cur += r->bytes;
        s.committed += units(r->bytes);
        s.commits += (uint32_t)r->count;
        s.rem += units(r->bytes);
        s.rem_commits += (uint32_t)r->count;
        break;
    case CW_FEED_RELEASE:
        b->cur -= r->bytes;
        /* Of a commit still in the ring: no longer remaining. */
        /* (A step after `last` has nothing remaining to release.) */
        if (r->astep >= 0 && r->astep <= b->last && r->astep > a->head - a->len &&
            r->astep >= b->birth) {
            if (r->astep == a->head) { /* the step being fed: s, stored below */
                release_from(&s, units(r->bytes), (uint32_t)r->count);
                break;
            }
            cw__slot_t c = cw__abase_step(b, r->astep);
            release_from(&c, units(r->bytes), (uint32_t)r->count);
            if (cw__abase_set(a, b, r->astep, &c)) return CW_ENOMEM;
        }
        break;
    }
    s.out = units(b->cur);
    return cw__abase_set(a, b, a->head, &s) ? CW_ENOMEM : 0;
}

static int on_proc(void *ctx, const cw_feed_proc_t *p)
{
    cw__aset_t *a = ctx;
    int added = 0;
    uint32_t name = cw__strtab_get(&a->names, p->name);
    uint32_t i = cw_keymap_get(&a->procmap, p->id, 0, &added);
    if (name == UINT32_MAX || i == UINT32_MAX) return CW_ENOMEM;
    if (added && CW_RESERVE(a->procs, a->proccap, a->nprocs + 1)) return CW_ENOMEM;
    if (added) a->nprocs++;
    a->procs[i] = (cw__aproc_t){p->id, p->pid, p->start_ns, p->exit_ns, p->ended_ns, name, false};
    if (p->id > a->max_proc_id) a->max_proc_id = p->id;
    return 0;
}

/* Empties m for n keys: cleared, or made again smaller when its capacity is
 * more than 8 times what n needs. */
static void map_reset(cw_keymap_t *m, size_t n)
{
    size_t cap = 16;
    while (cap < 2 * n)
        cap *= 2;
    cw_keymap_t small;
    if ((size_t)m->mask + 1 <= 8 * cap || cw_keymap_init(&small, (uint32_t)cap)) {
        cw_keymap_clear(m); /* or no memory for a smaller one: keep this one */
        return;
    }
    cw_keymap_free(m);
    *m = small;
}

/* Gives back the room of an array of n of cap elements when it uses less
 * than a quarter of it (keeping twice n); on failure keeps it as is. */
static void shrink(void **v, size_t *cap, size_t n, size_t size)
{
    if (*cap < 64 || n > *cap / 4) return;
    size_t want = n * 2 > 16 ? n * 2 : 16;
    void *p = realloc(*v, want * size);
    if (!p) return;
    *v = p;
    *cap = want;
}

/* The maps' first key of an instance: its id; an aggregate's is past
 * every id (ids are 32-bit), so no row or state ever finds one. */
static uint64_t proc_key(const cw__aproc_t *p)
{
    return p->agg ? (UINT64_C(1) << 32) | p->id : p->id;
}

/* ---- Compaction ------------------------------------------------------------
 *
 * A machine sees many short-lived processes, and each ended instance's
 * series stayed until its end left the rules' window (6 h by default:
 * about 550 bytes an instance, 9 MiB after the 30-minute soak). What a
 * rule reads of an ended instance that holds nothing (every series at 0
 * outstanding) never changes again (it has no rows after its end), and
 * is only ever summed:
 *
 * - instance groups take alive instances only, and an instance's state
 *   was resolved ("process exited" / "tracking ended") by the first
 *   evaluation after its end, so instances ended before the last
 *   evaluated instant (evaluated_to) are in no instance group any more;
 * - name and machine groups add their members' steps (committed, commits,
 *   outstanding, remaining: integers, per step), outstanding now (0 for
 *   these), and take the earliest birth step of a member for the leak
 *   score's first point; a name group is evaluated while a member is
 *   alive, and once none is, the state says how the last-ending member
 *   ended.
 *
 * So such instances of one name, tag, birth step and kind of end are
 * summed, step by step, into one aggregate series (cw__aproc_t.agg):
 * every window's sums and points are the same integers, the birth is the
 * members' own, the aggregate is pruned exactly when its last-ending
 * member would have been (and with it every member: those that ended
 * earlier hold nothing in the window any more), and the name group's
 * "how did the last one end" reads the aggregate's end, that of its
 * last-ending member. A member whose sum would pass a slot's 32 bits is
 * left on its own. What can differ: the order in which one rule's groups
 * are evaluated at one instant (by their first member), so the order of
 * transitions with one timestamp; and which of two instances of a name
 * ending at the same nanosecond, one by exit and one by the end of
 * tracking, names the reason. tests/unit/test_alert_series.c compares
 * every state and transition with and without compaction. */

/* The aggregate slot of step k of b, as a rule reads it (implicit: 0). */
static bool slot_fits(const cw__slot_t *x, const cw__slot_t *y)
{
    return (uint64_t)x->committed + y->committed <= UINT32_MAX &&
           (uint64_t)x->commits + y->commits <= UINT32_MAX &&
           (uint64_t)x->out + y->out <= UINT32_MAX && (uint64_t)x->rem + y->rem <= UINT32_MAX &&
           (uint64_t)x->rem_commits + y->rem_commits <= UINT32_MAX;
}

/* The aggregate key of base b of p: (name, tag), (birth, kind). */
static void agg_key(const cw__aproc_t *p, const cw__abase_t *b, uint64_t *k1, uint64_t *k2)
{
    *k1 = (uint64_t)p->name << 32 | b->tag;
    *k2 = (uint64_t)b->birth << 1 | (p->exit < p->ended ? 0u : 1u);
}

/* Compacts the ended instances that may be (above), appending aggregates
 * to procs and bases; keep_proc (room for nprocs + nbases) says which are
 * kept: a compacted instance is not. 0 or CW_ENOMEM. */
static int compact(cw__aset_t *a, bool *keep_proc)
{
    if (a->no_compact || a->evaluated_to == INT64_MIN || !a->nbases) return 0;
    size_t np0 = a->nprocs, nb0 = a->nbases;
    bool *cand = calloc(np0 + 1, sizeof *cand);
    uint32_t *first = malloc((np0 + 1) * sizeof *first), *next = malloc(nb0 * sizeof *next);
    uint32_t *aggs = malloc((2 * nb0 + 1) * sizeof *aggs); /* map index -> base */
    cw_keymap_t am = {0};
    int err = CW_ENOMEM;
    size_t ncand = 0;
    if (!cand || !first || !next || !aggs || cw_keymap_init(&am, 16)) goto out;
    for (size_t i = 0; i < np0; i++) {
        const cw__aproc_t *p = &a->procs[i];
        int64_t end = p->exit < p->ended ? p->exit : p->ended;
        cand[i] = keep_proc[i] && !p->agg && p->start != INT64_MIN && end < a->evaluated_to &&
                  end < a->fed_to;
        first[i] = UINT32_MAX;
    }
    for (size_t i = nb0; i-- > 0;) {
        const cw__abase_t *b = &a->bases[i];
        if (b->cur != 0) cand[b->proc] = false; /* holds memory: read as it changes */
        next[i] = first[b->proc];
        first[b->proc] = (uint32_t)i;
        if (a->procs[b->proc].agg && keep_proc[b->proc]) {
            uint64_t k1, k2;
            int added;
            agg_key(&a->procs[b->proc], b, &k1, &k2);
            uint32_t m = cw_keymap_get(&am, k1, k2, &added);
            if (m == UINT32_MAX) goto out;
            aggs[m] = (uint32_t)i;
        }
    }
    for (size_t i = 0; i < np0; i++)
        ncand += cand[i];
    if (!ncand) {
        err = 0;
        goto out;
    }
    if (CW_RESERVE(a->procs, a->proccap, np0 + nb0) || CW_RESERVE(a->bases, a->basecap, 2 * nb0))
        goto out;
    for (size_t i = 0; i < np0; i++) {
        if (!cand[i]) continue;
        /* Would every step fit its aggregate? */
        bool fits = true;
        for (uint32_t bi = first[i]; bi != UINT32_MAX && fits; bi = next[bi]) {
            const cw__abase_t *b = &a->bases[bi];
            uint64_t k1, k2;
            agg_key(&a->procs[i], b, &k1, &k2);
            uint32_t m = cw_keymap_find(&am, k1, k2);
            if (m == UINT32_MAX) continue;
            const cw__abase_t *g = &a->bases[aggs[m]];
            for (int64_t k = window_lo(a, b); k <= b->last && fits; k++) {
                cw__slot_t x = cw__abase_step(g, k), y = ring_at(b, (uint64_t)k % b->cap);
                fits = slot_fits(&x, &y);
            }
        }
        if (!fits) continue;
        for (uint32_t bi = first[i]; bi != UINT32_MAX; bi = next[bi]) {
            cw__aproc_t p = a->procs[i];
            uint64_t k1, k2;
            int added;
            agg_key(&p, &a->bases[bi], &k1, &k2);
            uint32_t m = cw_keymap_get(&am, k1, k2, &added);
            if (m == UINT32_MAX) goto out;
            if (added) {
                size_t pi = a->nprocs++;
                a->procs[pi] = (cw__aproc_t){++a->agg_serial, 0, p.start, p.exit, p.ended,
                                             p.name, true};
                keep_proc[pi] = true;
                int64_t birth = a->bases[bi].birth;
                aggs[m] = (uint32_t)a->nbases;
                a->bases[a->nbases++] = (cw__abase_t){
                    (uint32_t)pi, a->bases[bi].tag, 0, birth, birth - 1, 0, false, NULL};
            }
            cw__abase_t *g = &a->bases[aggs[m]];
            cw__aproc_t *q = &a->procs[g->proc];
            int64_t qe = q->exit < q->ended ? q->exit : q->ended;
            int64_t pe = p.exit < p.ended ? p.exit : p.ended;
            if (p.start < q->start) q->start = p.start;
            if (pe > qe) {
                q->exit = p.exit;
                q->ended = p.ended;
            }
            const cw__abase_t *b = &a->bases[bi];
            for (int64_t k = window_lo(a, b); k <= b->last; k++) {
                cw__slot_t y = ring_at(b, (uint64_t)k % b->cap);
                if (slot_make(a, g, k)) goto out;
                cw__slot_t x = cw__abase_step(g, k);
                x.committed += y.committed;
                x.commits += y.commits;
                x.out += y.out;
                x.rem += y.rem;
                x.rem_commits += y.rem_commits;
                if (cw__abase_set(a, g, k, &x)) goto out;
            }
        }
        keep_proc[i] = false;
        a->compacted++;
    }
    err = 0;
out:
    cw_keymap_free(&am);
    free(cand);
    free(first);
    free(next);
    free(aggs);
    return err;
}

/* Forgets the series of instances that exited or stopped being tracked
 * before the ring's first step and hold nothing, and those instances: a
 * long-lived service sees many short-lived processes; and the rings of
 * kept series whose steps in the window are all implicit (an idle
 * process). The maps are rebuilt (they have no removal), smaller after a
 * burst, and the arrays shrunk. 0 or CW_ENOMEM. */
static int prune(cw__aset_t *a)
{
    int64_t horizon = (a->head - a->len + 1) * a->step;
    size_t nb = 0, np = 0;
    /* Room for the aggregates compaction may add (one per base at most). */
    bool *keep_proc = calloc(a->nprocs + a->nbases + 1, sizeof *keep_proc);
    uint32_t *newix = calloc(a->nprocs + a->nbases + 1, sizeof *newix);
    if (!keep_proc || !newix) {
        free(keep_proc);
        free(newix);
        return CW_ENOMEM;
    }
    for (size_t i = 0; i < a->nprocs; i++) {
        const cw__aproc_t *p = &a->procs[i];
        int64_t end = p->exit < p->ended ? p->exit : p->ended;
        keep_proc[i] = end >= horizon;
    }
    for (size_t i = 0; i < a->nbases; i++) /* a base holding memory keeps its instance */
        if (a->bases[i].cur != 0) keep_proc[a->bases[i].proc] = true;
    int err = compact(a, keep_proc);
    if (err) {
        free(keep_proc);
        free(newix);
        return err;
    }
    size_t kp = 0, kb = 0;
    for (size_t i = 0; i < a->nprocs; i++)
        kp += keep_proc[i];
    for (size_t i = 0; i < a->nbases; i++)
        kb += keep_proc[a->bases[i].proc];
    map_reset(&a->procmap, kp);
    map_reset(&a->basemap, kb);
    for (size_t i = 0; i < a->nprocs; i++) {
        if (!keep_proc[i]) continue;
        int added;
        cw_keymap_get(&a->procmap, proc_key(&a->procs[i]), 0, &added);
        newix[i] = (uint32_t)np;
        a->procs[np++] = a->procs[i];
    }
    for (size_t i = 0; i < a->nbases; i++) {
        cw__abase_t b = a->bases[i];
        if (!keep_proc[b.proc]) {
            free(b.ring);
            continue;
        }
        int added;
        b.proc = newix[b.proc];
        if (b.last < window_lo(a, &b)) { /* nothing explicit left in the window */
            free(b.ring);
            b.ring = NULL;
            b.cap = 0;
            b.wide = false; /* the next steps may fit narrow again */
        }
        cw_keymap_get(&a->basemap, proc_key(&a->procs[b.proc]), b.tag, &added);
        a->bases[nb++] = b;
    }
    a->nprocs = np;
    a->nbases = nb;
    free(keep_proc);
    free(newix);
    /* After a burst of short-lived processes: give the room back. */
    shrink((void **)&a->procs, &a->proccap, a->nprocs, sizeof *a->procs);
    shrink((void **)&a->bases, &a->basecap, a->nbases, sizeof *a->bases);
    return 0;
}

/* Feeds [lo, hi) (within one step) from tier. */
static int feed_range(cw__aset_t *a, cw_store_t *s, int tier, int64_t lo, int64_t hi,
                      cw_diag_t *d)
{
    advance(a, cw_floor_to(lo, a->step) / a->step);
    int err = cw_store_feed_rows(s, tier, lo, hi, a->step, on_row, a, d);
    if (err == CW_ENOMEM) cw_diag_set(d, err, "alerts: out of memory for the series");
    return err;
}

/* [lo, hi) step by step, from the minute tier where bounds allow. */
static int feed_span(cw__aset_t *a, cw_store_t *s, const cw_feed_bounds_t *fb, int64_t lo,
                     int64_t hi, bool coarse, cw_diag_t *d)
{
    int err = 0;
    while (lo < hi && !err) {
        int64_t end = cw_floor_to(lo, a->step) + a->step;
        if (end > hi) end = hi;
        int tier = 0;
        if (coarse && a->step % MINUTE == 0 && lo % MINUTE == 0 && end % MINUTE == 0 &&
            end <= fb->minute_end_ns && fb->minute_horizon_ns <= lo)
            tier = 1;
        err = feed_range(a, s, tier, lo, end, d);
        lo = end;
    }
    return err;
}

int cw__aset_feed(cw__aset_t *a, cw_store_t *s, int64_t T, cw_diag_t *d)
{
    cw_feed_bounds_t fb;
    bool began;
    int err = cw_store_feed_begin(s, &began, d);
    if (err) return err;
    if ((err = cw_store_feed_bounds(s, &fb, d))) goto out;
    int64_t last = cw_floor_to(T - 1, a->step) / a->step; /* the step holding T - 1 */
    if (a->head == INT64_MIN || last - a->head >= a->len) {
        /* Rebuild: the state at the ring's first step, then every step. */
        int64_t first = last - a->len + 1, lo = first * a->step;
        drop_series(a);
        a->head = first;
        if ((err = cw_store_feed_procs(s, 0, lo, on_proc, a, d))) goto out;
        if ((err = cw_store_feed_start(s, lo, on_row, a, d))) goto out;
        /* The start rows set outstanding at lo: the step "before" the
         * first. Births are the first step. */
        for (size_t i = 0; i < a->nbases; i++) {
            a->bases[i].birth = first;
            a->bases[i].last = first - 1; /* every step implicit: out = cur */
        }
        a->fed_to = lo;
        err = feed_span(a, s, &fb, lo, T, true, d);
    } else if (T > a->fed_to) {
        if ((err = cw_store_feed_procs(s, a->max_proc_id, a->fed_to, on_proc, a, d))) goto out;
        err = feed_span(a, s, &fb, a->fed_to, T, false, d);
    }
    if (!err) {
        advance(a, last);
        a->fed_to = T;
        /* At each new step: forget what left the ring (once per ring
         * length kept up to two windows of short-lived instances). */
        if (last != a->pruned_at) {
            a->pruned_at = last;
            err = prune(a);
        }
    }
    /* The source's down time as stored (advisory: unreadable, none). */
    cw_diag_t dd = {{0}};
    if (!err && cw_store_downtime_get(s, &a->down, &dd) != 0) a->down.n = 0;
out:
    cw_store_feed_end(s, began);
    return err;
}

void cw__abase_add(const cw__aset_t *a, const cw__abase_t *b, int64_t first, int64_t last,
                   cw__afig_t *f, int64_t *points)
{
    uint64_t c = 0, n = 0, r = 0, rn = 0;
    /* Steps before its birth or out of the ring hold nothing of it. */
    int64_t lo = first;
    if (lo < b->birth) lo = b->birth;
    if (lo <= a->head - a->len) lo = a->head - a->len + 1;
    int64_t k = lo, explicit_end = last < b->last ? last : b->last;
    /* One division for the first slot, not one per step (this loop is the
     * engine's hottest: every step of every window of every series). */
    uint64_t i = k <= explicit_end ? (uint64_t)k % b->cap : 0;
    /* The same loop over either width of ring (the fields' names are
     * the same). */
#define ADD_STEPS(type)                                                                            \
    for (const type *ring = b->ring; k <= explicit_end; k++) {                                     \
        const type *s = &ring[i];                                                                  \
        if (++i == b->cap) i = 0;                                                                  \
        c += s->committed;                                                                         \
        n += s->commits;                                                                           \
        r += s->rem;                                                                               \
        rn += s->rem_commits;                                                                      \
        if (points) points[k - first] += (int64_t)s->out << CW__UNIT_SHIFT;                        \
    }
    if (b->wide)
        ADD_STEPS(cw__slot_t)
    else
        ADD_STEPS(cw__nslot_t)
#undef ADD_STEPS
    /* The implicit steps: nothing committed, the outstanding of now (none
     * when the span ends before the window: no step of it to read). */
    if (points && k <= last)
        for (int64_t out = (int64_t)cw__abase_step(b, last).out << CW__UNIT_SHIFT; k <= last; k++)
            points[k - first] += out;
    f->committed += (int64_t)(c << CW__UNIT_SHIFT);
    f->commits += (int64_t)n;
    f->remaining += (int64_t)(r << CW__UNIT_SHIFT);
    f->rem_commits += (int64_t)rn;
    f->outstanding += b->cur;
}
