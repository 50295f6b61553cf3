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
    if (!t->map.idx && cw_keymap_init(&t->map, 6)) return UINT32_MAX;
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
    for (size_t i = 0; i < t->n; i++)
        free(t->v[i]);
    free(t->v);
    cw_keymap_free(&t->map);
    memset(t, 0, sizeof *t);
}

/* ---- the set ------------------------------------------------------------- */

int cw__aset_init(cw__aset_t *a, int64_t step, uint32_t len)
{
    memset(a, 0, sizeof *a);
    a->step = step;
    a->len = len ? len : 1;
    a->head = INT64_MIN;
    a->fed_to = INT64_MIN;
    a->pruned_at = INT64_MIN;
    if (cw_keymap_init(&a->procmap, 10) || cw_keymap_init(&a->basemap, 12)) {
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
}

size_t cw__aset_bytes(const cw__aset_t *a)
{
    size_t b = a->basecap * sizeof *a->bases + a->proccap * sizeof *a->procs;
    for (size_t i = 0; i < a->nbases; i++)
        b += (size_t)a->bases[i].cap * sizeof(cw__slot_t);
    b += ((size_t)a->procmap.mask + 1 + (size_t)a->basemap.mask + 1) * 20;
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

/* Step `step` of b (in the window), implicit or not. */
static cw__slot_t slot_get(const cw__abase_t *b, int64_t step)
{
    if (step > b->last) return (cw__slot_t){0, 0, units(b->cur), 0, 0};
    return b->ring[(uint64_t)step % b->cap];
}

/* Step `step` of b (in the window) made explicit, the ring grown as
 * needed; NULL on ENOMEM. */
static cw__slot_t *slot(const cw__aset_t *a, cw__abase_t *b, int64_t step)
{
    int64_t lo = window_lo(a, b);
    if (b->last < lo - 1) b->last = lo - 1; /* what was explicit left the window */
    if (step > b->last) {
        uint64_t need = (uint64_t)(step - lo + 1);
        if (need > b->cap) {
            uint32_t cap = 1;
            while (cap < need && cap < a->len)
                cap = cap > a->len / 2 ? a->len : cap * 2;
            cw__slot_t *r = malloc((size_t)cap * sizeof *r);
            if (!r) return NULL;
            for (int64_t k = lo; k <= b->last; k++)
                r[(uint64_t)k % cap] = b->ring[(uint64_t)k % b->cap];
            free(b->ring);
            b->ring = r;
            b->cap = cap;
        }
        cw__slot_t fill = {0, 0, units(b->cur), 0, 0};
        for (int64_t k = b->last + 1; k <= step; k++)
            b->ring[(uint64_t)k % b->cap] = fill;
        b->last = step;
    }
    return &b->ring[(uint64_t)step % b->cap];
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
                                              cw__strtab_get(&a->names, "")};
    }
    uint32_t bi = cw_keymap_get(&a->basemap, proc, tag, &added);
    if (bi == UINT32_MAX) return NULL;
    if (added) {
        if (CW_RESERVE(a->bases, a->basecap, a->nbases + 1)) return NULL;
        a->bases[a->nbases++] = (cw__abase_t){pi, tag, 0, a->head, a->head - 1, 0, NULL};
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

static int on_row(void *ctx, const cw_feed_row_t *r)
{
    cw__aset_t *a = ctx;
    cw__abase_t *b = base_get(a, r->proc, r->tag);
    if (!b) return CW_ENOMEM;
    cw__slot_t *s = b ? slot(a, b, a->head) : NULL;
    if (!s) return CW_ENOMEM;
    a->rows_read++;
    switch (r->kind) {
    case CW_FEED_START:
    case CW_FEED_RUNDOWN:
        b->cur += r->bytes;
        break;
    case CW_FEED_COMMIT:
        b->cur += r->bytes;
        s->committed += units(r->bytes);
        s->commits += (uint32_t)r->count;
        s->rem += units(r->bytes);
        s->rem_commits += (uint32_t)r->count;
        break;
    case CW_FEED_RELEASE:
        b->cur -= r->bytes;
        /* Of a commit still in the ring: no longer remaining. */
        /* (A step after `last` has nothing remaining to release.) */
        if (r->astep >= 0 && r->astep <= b->last && r->astep > a->head - a->len &&
            r->astep >= b->birth) {
            cw__slot_t *c = slot(a, b, r->astep);
            uint32_t u = units(r->bytes);
            c->rem = c->rem > u ? c->rem - u : 0;
            c->rem_commits =
                c->rem_commits > (uint32_t)r->count ? c->rem_commits - (uint32_t)r->count : 0;
        }
        break;
    }
    s->out = units(b->cur);
    return 0;
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
    a->procs[i] = (cw__aproc_t){p->id, p->pid, p->start_ns, p->exit_ns, p->ended_ns, name};
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
    bool *keep_proc = calloc(a->nprocs + 1, sizeof *keep_proc);
    uint32_t *newix = calloc(a->nprocs + 1, sizeof *newix);
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
        cw_keymap_get(&a->procmap, a->procs[i].id, 0, &added);
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
        }
        cw_keymap_get(&a->basemap, a->procs[b.proc].id, b.tag, &added);
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
    int err = cw_store_feed_begin(s, d);
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
out:
    cw_store_feed_end(s);
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
    for (; k <= explicit_end; k++) {
        const cw__slot_t *s = &b->ring[i];
        if (++i == b->cap) i = 0;
        c += s->committed;
        n += s->commits;
        r += s->rem;
        rn += s->rem_commits;
        if (points) points[k - first] += (int64_t)s->out << CW__UNIT_SHIFT;
    }
    /* The implicit steps: nothing committed, the outstanding of now. */
    if (points)
        for (int64_t out = (int64_t)slot_get(b, last).out << CW__UNIT_SHIFT; k <= last; k++)
            points[k - first] += out;
    f->committed += (int64_t)(c << CW__UNIT_SHIFT);
    f->commits += (int64_t)n;
    f->remaining += (int64_t)(r << CW__UNIT_SHIFT);
    f->rem_commits += (int64_t)rn;
    f->outstanding += b->cur;
}
