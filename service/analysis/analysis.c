/* analysis.c - exact window figures from a trace (see analysis.h).
 *
 * Every piece is classified by its exact commit time a (CW_TS_BEFORE for
 * rundown) and release time f (CW_TS_NEVER while live) against [t0, t1):
 *   AIFI: t0 <= a < t1, f < t1      AIFO: t0 <= a < t1, f >= t1
 *   AOFI: a < t0, t0 <= f < t1      AOFO: a < t0, f >= t1
 * Peak: per instance, the net change of outstanding since t0 (commits of
 * new, non-rundown bytes minus releases inside the window) is followed
 * after every event in the window (cw_balance_t); its peak (0 at t0 included) plus
 * outstanding(t0) = AOFI + AOFO bytes is the peak. The tracker takes
 * commits ending by CW_COMMIT_END_MAX only, so outstanding bytes, and the
 * change, lie within +-INT64_MAX (a trace's ranges up to 2^64 made it
 * overflow: fuzz_trace). */
#include "commitwatch/analysis.h"

#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "commitwatch/common.h"
#include "commitwatch/error.h"
#include "commitwatch/event.h"
#include "commitwatch/keymap.h"

/* The (proc, stack) map's first size in slots (it doubles as it fills).
 * A build may make it smaller (the fuzz target: 16, so an analysis made
 * per input does not allocate and clear 20 KiB, and the map grows on
 * small inputs); its size changes where keys are, never the entries'
 * order (dense, in insertion order). */
#ifndef CW_ANALYSIS_MAP_CAP
#define CW_ANALYSIS_MAP_CAP 1024
#endif

typedef struct entry {
    uint32_t proc, stack;
    cw_figs_t figs;
    cw_analysis_held_t held; /* the window's own commits still held (analysis.h) */
} entry_t;

typedef struct inst {
    bool seen;
    uint32_t pid;
    char *name, *cmdline;
    int64_t start_ns, exit_ns;
    uint64_t events;
    cw_balance_t bal; /* the window's */
} inst_t;

struct cw_analysis {
    int64_t t0, t1;
    cw_keymap_t map; /* (proc, stack) -> entries index */
    entry_t *entries;
    uint32_t nentries;
    size_t cap;
    inst_t *insts; /* indexed by instance id */
    size_t ninsts; /* slots of insts (zeroed when unused) */
    int oom;
};

int cw_analysis_create(int64_t from_ns, int64_t to_ns, cw_analysis_t **out)
{
    cw_analysis_t *a = calloc(1, sizeof *a);
    if (!a) return CW_ENOMEM;
    if (cw_keymap_init(&a->map, CW_ANALYSIS_MAP_CAP) != 0) {
        free(a);
        return CW_ENOMEM;
    }
    a->t0 = from_ns;
    a->t1 = to_ns;
    *out = a;
    return 0;
}

/* What an instance's slot owns (unused slots hold NULLs). */
static const size_t inst_owned[] = {offsetof(inst_t, name), offsetof(inst_t, cmdline)};

void cw_analysis_destroy(cw_analysis_t *a)
{
    if (!a) return;
    cw_free_rows(a->insts, a->ninsts, sizeof *a->insts, inst_owned, CW_ARRAY_LEN(inst_owned));
    free(a->entries);
    cw_keymap_free(&a->map);
    free(a);
}

static bool in_window(const cw_analysis_t *a, int64_t ts)
{
    return ts >= a->t0 && ts < a->t1;
}

static inst_t *inst_of(cw_analysis_t *a, const cw_proc_t *p)
{
    if (CW_RESERVE_ZEROED(a->insts, a->ninsts, (size_t)p->id + 1)) {
        a->oom = 1;
        return NULL;
    }
    inst_t *in = &a->insts[p->id];
    if (!in->seen) {
        in->seen = true;
        in->pid = p->pid;
        in->name = strdup(p->name ? p->name : "");
        in->cmdline = p->cmdline ? strdup(p->cmdline) : NULL;
        if (!in->name || (p->cmdline && !in->cmdline)) a->oom = 1;
        in->start_ns = p->start_ns;
        in->exit_ns = CW_TS_NEVER;
        in->bal.peak_ns = a->t0;
    }
    return in;
}

static entry_t *entry_of(cw_analysis_t *a, uint32_t proc, uint32_t stack)
{
    int added;
    uint32_t i = cw_keymap_get(&a->map, proc, stack, &added);
    if (i == UINT32_MAX) goto oom;
    if (added) {
        if (CW_RESERVE(a->entries, a->cap, a->nentries + 1u)) goto oom;
        entry_t *e = &a->entries[a->nentries++];
        memset(e, 0, sizeof *e);
        e->proc = proc;
        e->stack = stack;
    }
    return &a->entries[i];
oom:
    a->oom = 1;
    return NULL;
}

/* Classifies one piece of `bytes`, committed at ca, released at f; the
 * entry it went to (NULL: none, or out of memory). */
static entry_t *classify(cw_analysis_t *a, const cw_proc_t *p, const cw_commit_t *c, uint64_t bytes,
                         int64_t f)
{
    int type;
    int64_t ca = c->ts;
    if (ca >= a->t1) return NULL;
    if (ca >= a->t0)
        type = f < a->t1 ? CW_AIFI : CW_AIFO;
    else if (f < a->t0)
        return NULL;
    else
        type = f < a->t1 ? CW_AOFI : CW_AOFO;
    entry_t *e = entry_of(a, p->id, c->stack_id);
    if (!e || !inst_of(a, p)) return NULL;
    e->figs.types[type].bytes += bytes;
    e->figs.types[type].count++;
    return e;
}

static void on_start(void *ctx, const cw_proc_t *p, int64_t ts)
{
    (void)ts;
    inst_of(ctx, p);
}

/* Counts the event and keeps the instance's peak balance and its time (as
 * the aggregator does per bucket, with the same cw_balance_note). */
static void on_event(void *ctx, const cw_proc_t *p, int64_t ts)
{
    cw_analysis_t *a = ctx;
    if (!in_window(a, ts)) return;
    inst_t *in = inst_of(a, p);
    if (!in) return;
    in->events++;
    cw_balance_note(&in->bal, ts);
}

static void on_commit(void *ctx, const cw_proc_t *p, const cw_commit_t *c, int64_t ts)
{
    cw_analysis_t *a = ctx;
    if (c->ts == CW_TS_BEFORE || !in_window(a, ts)) return;
    entry_t *e = entry_of(a, p->id, c->stack_id);
    inst_t *in = inst_of(a, p);
    if (!e || !in) return;
    e->figs.size_bytes += c->bytes;
    e->figs.commit_count++;
    in->bal.delta += (int64_t)c->bytes;
    cw_analysis_held_t *h = &e->held;
    h->bytes += c->bytes;
    h->count++;
    if (h->bytes > h->peak) h->peak = h->bytes;
}

static void on_release(void *ctx, const cw_proc_t *p, const cw_commit_t *c, uint64_t bytes,
                       int64_t ts)
{
    cw_analysis_t *a = ctx;
    entry_t *e = classify(a, p, c, bytes, ts);
    /* A release of a commit of the window (so in it too): out of `held`,
     * a record at its last byte. */
    if (e && c->ts >= a->t0 && in_window(a, ts)) {
        cw_analysis_held_t *h = &e->held;
        h->bytes -= bytes < h->bytes ? bytes : h->bytes;
        if (h->count && c->remaining == 0) h->count--;
    }
    if (in_window(a, ts)) {
        inst_t *in = inst_of(a, p);
        if (in) in->bal.delta -= (int64_t)bytes;
    }
}

static void on_exit_(void *ctx, const cw_proc_t *p, int64_t ts)
{
    inst_t *in = inst_of(ctx, p);
    if (in) in->exit_ns = ts;
}

static void on_live(void *ctx, const cw_proc_t *p, const cw_commit_t *c)
{
    (void)classify(ctx, p, c, c->remaining, CW_TS_NEVER);
}

int cw_analysis_held(const cw_analysis_t *a, uint32_t proc, uint32_t stack, cw_analysis_held_t *out)
{
    uint32_t i = cw_keymap_find(&a->map, proc, stack);
    if (i == UINT32_MAX) return CW_ENOENT;
    *out = a->entries[i].held;
    return 0;
}

int cw_analysis_each_held(const cw_analysis_t *a,
                          int (*cb)(void *ctx, uint32_t pid, uint32_t stack,
                                    const cw_analysis_held_t *h),
                          void *ctx)
{
    for (uint32_t i = 0; i < a->nentries; i++) {
        const entry_t *e = &a->entries[i];
        if (!e->held.count) continue;
        int rc = cb(ctx, a->insts[e->proc].pid, e->stack, &e->held);
        if (rc) return rc;
    }
    return 0;
}

size_t cw_analysis_memory(const cw_analysis_t *a)
{
    return sizeof *a + a->cap * sizeof *a->entries + a->ninsts * sizeof *a->insts +
           cw_keymap_bytes(&a->map);
}

cw_tracker_sink_t cw_analysis_sink(cw_analysis_t *a)
{
    cw_tracker_sink_t s = {a, on_start, on_event, on_commit, on_release, on_exit_, on_live};
    return s;
}

static char *dup_or_null(const char *s)
{
    return s ? strdup(s) : NULL;
}

int cw_analysis_report(cw_analysis_t *a, cw_stacks_t *stacks, cw_tagger_t *tagger, bool with_frames,
                       cw_report_t **out)
{
    cw_report_t *r = calloc(1, sizeof *r);
    uint32_t *slot = NULL; /* instance id -> report index + 1 */
    uint32_t *nst = NULL;
    const char **tags = NULL; /* tag id -> the report's text */
    uint32_t ntags = cw_tagger_tag_count(tagger);
    if (!r || a->oom) goto oom;
    r->from_ns = a->t0;
    r->to_ns = a->t1;
    slot = calloc(a->ninsts + 1, sizeof *slot);
    nst = calloc(a->ninsts + 1, sizeof *nst);
    tags = calloc(ntags ? ntags : 1, sizeof *tags);
    if (!slot || !nst || !tags) goto oom;

    /* outstanding(t0) per instance decides, with events, who is reported. */
    uint64_t *out_t0 = calloc(a->ninsts + 1, sizeof *out_t0);
    if (!out_t0) goto oom;
    for (uint32_t i = 0; i < a->nentries; i++) {
        const entry_t *e = &a->entries[i];
        out_t0[e->proc] += e->figs.types[CW_AOFI].bytes + e->figs.types[CW_AOFO].bytes;
        nst[e->proc]++;
    }
    uint32_t nprocs = 0;
    for (uint32_t id = 0; id < a->ninsts; id++)
        if (a->insts[id].seen &&
            (a->insts[id].events > 0 || (out_t0[id] > 0 && a->insts[id].start_ns < a->t1)))
            slot[id] = ++nprocs;
    r->procs = calloc(nprocs ? nprocs : 1, sizeof *r->procs);
    if (!r->procs) {
        free(out_t0);
        goto oom;
    }
    r->nprocs = nprocs;
    for (uint32_t id = 0; id < a->ninsts; id++) {
        if (!slot[id]) continue;
        const inst_t *in = &a->insts[id];
        cw_proc_report_t *p = &r->procs[slot[id] - 1];
        p->id = id;
        p->pid = in->pid;
        p->name = dup_or_null(in->name);
        p->cmdline = dup_or_null(in->cmdline);
        p->start_ns = in->start_ns;
        p->exit_ns = in->exit_ns;
        p->tracking_ended_ns = CW_TS_NEVER; /* a trace ends; its processes do not */
        p->last_correction_ns = CW_TS_NEVER; /* a trace has no corrections */
        p->events = in->events;
        p->peak_bytes = out_t0[id] + (uint64_t)in->bal.peak;
        /* The state at `from` is reached no earlier than the instance. */
        p->peak_ns = in->bal.peak_ns < in->start_ns ? in->start_ns : in->bal.peak_ns;
        p->stacks = calloc(nst[id] ? nst[id] : 1, sizeof *p->stacks);
        if (!p->name || (in->cmdline && !p->cmdline) || !p->stacks) {
            free(out_t0);
            goto oom;
        }
    }
    free(out_t0);

    for (uint32_t i = 0; i < a->nentries; i++) {
        const entry_t *e = &a->entries[i];
        if (!slot[e->proc]) continue;
        cw_proc_report_t *p = &r->procs[slot[e->proc] - 1];
        cw_stack_report_t *s = &p->stacks[p->nstacks++];
        s->stack_id = e->stack;
        s->figs = e->figs;
        uint32_t tag = cw_tagger_tag(tagger, stacks, e->stack);
        const char *name = cw_tagger_tag_name(tagger, tag);
        if (tag >= ntags) /* (not one of the tagger's: a text each) */
            s->tag = cw_report_add_tag(r, name);
        else
            s->tag = tags[tag] ? tags[tag] : (tags[tag] = cw_report_add_tag(r, name));
        if (!s->tag) goto oom;
        cw_figs_add(&p->figs, &e->figs);
        if (with_frames) {
            uint32_t n;
            const uint32_t *f = cw_stacks_frames(stacks, e->stack, &n);
            s->frames = calloc(n ? n : 1, sizeof *s->frames);
            if (!s->frames) goto oom;
            for (uint32_t k = 0; k < n; k++) {
                s->frames[k] = strdup(cw_stacks_frame_text(stacks, f[k]));
                if (!s->frames[k]) goto oom;
                s->nframes++;
            }
        }
    }
    for (uint32_t i = 0; i < r->nprocs; i++) {
        cw_proc_report_t *p = &r->procs[i];
        p->outstanding_end = p->figs.types[CW_AIFO].bytes + p->figs.types[CW_AOFO].bytes;
    }
    free(slot);
    free(nst);
    free(tags);
    cw_report_sort(r);
    *out = r;
    return 0;
oom:
    free(slot);
    free(nst);
    free(tags);
    cw_report_free(r);
    return CW_ENOMEM;
}
