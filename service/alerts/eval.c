/* eval.c - one evaluation of the alert rules at an instant T over the kept
 * series (series.c), and the state machine of a series (docs/ALERTS.md,
 * "Evaluation and states").
 *
 * Per rule: the series of the set that the rule selects (process name
 * globs, tags) are grouped (instance, name or machine; per tag or summed);
 * per group the window's figures are sums over its members, the value is
 * the rule's metric, the condition the thresholds (with hysteresis) and
 * the extra conditions, cheapest first: warm-up, min_outstanding,
 * min_impacting_rate, then min_leak_score (the leak score is computed
 * only when a condition needs it or the series is active). The state
 * machine (cw__sm_step, pure) turns the condition into transitions. */
#include <inttypes.h>
#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "alerts/alerts_internal.h"
#include "commitwatch/common.h"
#include "commitwatch/event.h"
#include "commitwatch/hash.h"

#define G_INSTANCE ((uint64_t)1 << 62)
#define G_NAME ((uint64_t)2 << 62)
#define G_MACHINE ((uint64_t)3 << 62)
#define G_KIND(k) ((k) & ((uint64_t)3 << 62))
#define SUMMED UINT64_MAX
#define NONE UINT32_MAX

/* ---- the state machine ---------------------------------------------------- */

const char *cw_alert_state_name(cw_alert_state_t s)
{
    static const char *const n[] = {"inactive", "pending", "firing"};
    return (unsigned)s < CW_ARRAY_LEN(n) ? n[s] : "unknown";
}

const char *cw_alert_severity_name(cw_alert_severity_t s)
{
    static const char *const n[] = {"none", "warning", "critical"};
    return (unsigned)s < CW_ARRAY_LEN(n) ? n[s] : "unknown";
}

double cw__alert_threshold(const cw_alert_rule_t *r, cw_alert_severity_t sev)
{
    if (sev == CW_SEV_CRITICAL && r->has_crit) return r->crit;
    if (sev == CW_SEV_WARNING && r->has_warn) return r->warn;
    return NAN;
}

/* Whether v is beyond threshold t (at or above; below rules: at or below). */
static bool beyond(const cw_alert_rule_t *r, double v, double t)
{
    return r->below ? v <= t : v >= t;
}

cw_alert_severity_t cw__alert_severity(const cw_alert_rule_t *r, double v, cw_alert_severity_t held)
{
    cw_alert_severity_t raw = CW_SEV_NONE;
    if (isnan(v)) return CW_SEV_NONE;
    if (r->has_crit && beyond(r, v, r->crit))
        raw = CW_SEV_CRITICAL;
    else if (r->has_warn && beyond(r, v, r->warn))
        raw = CW_SEV_WARNING;
    if (raw >= held) return raw;
    /* Falling: a held severity stays while beyond clear x its threshold. */
    double clear = r->clear > 0 && r->clear <= 1 ? r->clear : 1;
    for (int s = held; s > (int)raw; s--) {
        double t = cw__alert_threshold(r, (cw_alert_severity_t)s);
        if (!isnan(t) && beyond(r, v, r->below ? t / clear : t * clear))
            return (cw_alert_severity_t)s;
    }
    return raw;
}

static void sm_reset(cw__sm_t *sm)
{
    *sm = (cw__sm_t){CW_AS_INACTIVE, CW_SEV_NONE, CW_TS_NEVER, CW_TS_NEVER, CW_TS_NEVER};
}

bool cw__sm_step(cw__sm_t *sm, int64_t for_ns, int64_t keep_ns, int64_t ts,
                 cw_alert_severity_t sev, const char *gone, cw_alert_transition_t *tr)
{
    tr->ts_ns = ts;
    tr->from = sm->state;
    tr->reason = NULL;
    if (gone) {
        if (sm->state == CW_AS_INACTIVE) return false;
        tr->to = CW_AS_INACTIVE;
        tr->severity = sm->severity;
        tr->reason = gone;
        sm_reset(sm);
        return true;
    }
    switch (sm->state) {
    case CW_AS_INACTIVE:
        if (sev == CW_SEV_NONE) return false;
        sm->active_since = ts;
        sm->severity = sev;
        sm->false_since = CW_TS_NEVER;
        if (for_ns <= 0) {
            sm->state = CW_AS_FIRING;
            sm->firing_since = ts;
        } else {
            sm->state = CW_AS_PENDING;
        }
        tr->reason = "condition";
        break;
    case CW_AS_PENDING:
        if (sev == CW_SEV_NONE) {
            tr->to = CW_AS_INACTIVE;
            tr->severity = sm->severity;
            tr->reason = "condition false";
            sm_reset(sm);
            return true;
        }
        sm->severity = sev; /* no transition: the pending row shows it */
        if (ts - sm->active_since < for_ns) return false;
        sm->state = CW_AS_FIRING;
        sm->firing_since = ts;
        tr->reason = "for elapsed";
        break;
    case CW_AS_FIRING:
        if (sev == CW_SEV_NONE) {
            if (sm->false_since == CW_TS_NEVER) sm->false_since = ts;
            if (ts - sm->false_since < keep_ns) return false;
            tr->to = CW_AS_INACTIVE;
            tr->severity = sm->severity;
            tr->reason = "resolved";
            sm_reset(sm);
            return true;
        }
        sm->false_since = CW_TS_NEVER;
        if (sev == sm->severity) return false;
        tr->reason = sev > sm->severity ? "severity rose" : "severity fell";
        sm->severity = sev;
        break;
    }
    tr->to = sm->state;
    tr->severity = sm->severity;
    return true;
}

/* ---- the evaluator --------------------------------------------------------- */

uint32_t cw__aeval_ring_len(const cw_alert_rules_t *rules, int64_t step)
{
    int64_t w = 0;
    for (size_t i = 0; i < rules->n; i++)
        if (rules->v[i].window_ns > w) w = rules->v[i].window_ns;
    if (w <= 0) w = step;
    return (uint32_t)((w + step - 1) / step + 1);
}

int cw__aeval_init(cw__aeval_t *e, const cw_alert_rules_t *rules, int64_t step)
{
    memset(e, 0, sizeof *e);
    int err = cw_alert_rules_copy(&e->rules, rules);
    if (!err && rules->n && !(e->r = calloc(rules->n, sizeof *e->r))) err = CW_ENOMEM;
    for (size_t i = 0; !err && i < e->rules.n; i++) {
        e->r[i].r = &e->rules.v[i];
        memcpy(e->r[i].hash, e->r[i].r->hash, sizeof e->r[i].hash);
        if (cw_keymap_init(&e->r[i].map, 16)) err = CW_ENOMEM;
    }
    if (!err) err = cw__aset_init(&e->set, step, cw__aeval_ring_len(rules, step));
    if (!err && cw_keymap_init(&e->gmap, 16)) err = CW_ENOMEM;
    if (err) cw__aeval_free(e);
    return err;
}

/* What a state owns: its strings. */
static const size_t state_owned[] = {offsetof(cw__astate_t, key), offsetof(cw__astate_t, process),
                                     offsetof(cw__astate_t, tag)};
/* The evaluator's own arrays: its transitions and its scratch. */
static const size_t arrays_owned[] = {offsetof(cw__aeval_t, tr), offsetof(cw__aeval_t, points),
                                      offsetof(cw__aeval_t, pts_t), offsetof(cw__aeval_t, next),
                                      offsetof(cw__aeval_t, ghead)};

static void state_free(cw__astate_t *st)
{
    cw_free_members(st, state_owned, CW_ARRAY_LEN(state_owned));
}

void cw__aeval_free(cw__aeval_t *e)
{
    for (size_t i = 0; e->r && i < e->rules.n; i++) {
        cw__arule_t *r = &e->r[i];
        cw_free_rows(r->st, r->n, sizeof *r->st, state_owned, CW_ARRAY_LEN(state_owned));
        free(r->name_match);
        free(r->tag_match);
        cw_keymap_free(&r->map);
    }
    free(e->r);
    cw_alert_rules_free(&e->rules);
    cw__aset_free(&e->set);
    cw_free_members(e, arrays_owned, CW_ARRAY_LEN(arrays_owned));
    for (size_t i = 0; i < CW_ARRAY_LEN(e->wsum); i++)
        free(e->wsum[i].v);
    cw_keymap_free(&e->gmap);
    memset(e, 0, sizeof *e);
}

/* Whether the rule selects the process name / tag (cached per interned
 * index: the globs run once per name). */
static bool match_cached(uint8_t **cache, size_t *cap, uint32_t i, char *const *globs, size_t n,
                         const char *text, bool all_excl_default)
{
    if (CW_RESERVE_ZEROED(*cache, *cap, (size_t)i + 1)) return false;
    uint8_t *c = &(*cache)[i];
    if (*c) return *c == 1;
    bool any_incl = false, in = false, out = false;
    for (size_t k = 0; k < n; k++) {
        if (globs[k][0] == '!') {
            if (cw_alert_glob(globs[k] + 1, text)) out = true;
        } else {
            any_incl = true;
            if (cw_alert_glob(globs[k], text)) in = true;
        }
    }
    bool ok = (in || (!any_incl && all_excl_default)) && !out;
    *c = ok ? 1 : 2;
    return ok;
}

/* The state of group (k1, k2), created inactive when new. */
static cw__astate_t *state_get(cw__arule_t *r, uint64_t k1, uint64_t k2)
{
    int added = 0;
    uint32_t i = cw_keymap_get(&r->map, k1, k2, &added);
    if (i == UINT32_MAX) return NULL;
    if (added) {
        if (CW_RESERVE(r->st, r->cap, r->n + 1)) return NULL;
        cw__astate_t *st = &r->st[r->n++];
        memset(st, 0, sizeof *st);
        st->k1 = k1;
        st->k2 = k2;
        sm_reset(&st->sm);
        st->value = st->threshold = st->leak = st->ttl = NAN;
        st->last_sent = CW_TS_NEVER;
    }
    return &r->st[i];
}

/* Names the state of a new group: key, process, tag. */
static int state_name(cw__aeval_t *e, cw__astate_t *st, const cw__aproc_t *p, uint32_t tag)
{
    const char *tagname = tag == NONE ? NULL : e->set.tags.v[tag];
    const char *tk = tagname ? tagname : "*";
    const char *name = p ? e->set.names.v[p->name] : NULL;
    char buf[64];
    size_t len = strlen(tk) + (name ? strlen(name) : 0) + 64;
    char *key = malloc(len);
    if (!key) return CW_ENOMEM;
    switch (G_KIND(st->k1)) {
    case G_INSTANCE:
        snprintf(buf, sizeof buf, "instance:%u", p->id);
        snprintf(key, len, "%s|%s", buf, tk);
        st->proc = p->id;
        st->pid = p->pid;
        break;
    case G_NAME:
        snprintf(key, len, "name:%s|%s", name, tk);
        break;
    default:
        snprintf(key, len, "machine|%s", tk);
        name = NULL;
    }
    st->key = key;
    st->process = name ? cw_strdup(name) : NULL;
    st->tag = tagname ? cw_strdup(tagname) : NULL;
    if ((name && !st->process) || (tagname && !st->tag)) return CW_ENOMEM;
    return 0;
}

static int add_tr(cw__aeval_t *e, uint32_t rule, uint32_t state, const cw_alert_transition_t *t)
{
    if (CW_RESERVE(e->tr, e->trcap, e->ntr + 1)) return CW_ENOMEM;
    e->tr[e->ntr++] = (cw__atr_t){rule, state, *t, false, 0};
    return 0;
}

/* One group's evaluation inputs. */
typedef struct group {
    uint32_t head;  /* first member base */
    int64_t start;  /* earliest start of a live member; INT64_MAX none */
    int64_t birth;  /* earliest birth step of a member */
    const cw__aproc_t *rep;
    uint32_t tag;
} group_t;

/* The per-base window sums of [first, last] for every base, computed
 * once per evaluation and window; NULL on ENOMEM. */
static const cw__afig_t *window_sums(cw__aeval_t *e, int64_t first, int64_t last)
{
    cw__aset_t *a = &e->set;
    struct cw__wsum *w = NULL;
    for (size_t i = 0; i < CW_ARRAY_LEN(e->wsum); i++)
        if (e->wsum[i].valid && e->wsum[i].first == first && e->wsum[i].last == last)
            return e->wsum[i].v;
    for (size_t i = 0; i < CW_ARRAY_LEN(e->wsum) && !w; i++)
        if (!e->wsum[i].valid) w = &e->wsum[i];
    if (!w) w = &e->wsum[0]; /* more windows than slots: recompute */
    if (CW_RESERVE(w->v, w->cap, a->nbases + 1)) return NULL;
    memset(w->v, 0, a->nbases * sizeof *w->v);
    for (size_t b = 0; b < a->nbases; b++)
        cw__abase_add(a, &a->bases[b], first, last, &w->v[b], NULL);
    w->first = first;
    w->last = last;
    w->valid = true;
    return w->v;
}

/* Adds the group's window sums to f (once: *done). shared: from the
 * per-evaluation sums of every base (a rule that needs them for every
 * group), else from the members' rings directly. */
static int group_sums(cw__aeval_t *e, const group_t *g, int64_t first, int64_t last, bool shared,
                      cw__afig_t *f, bool *done)
{
    if (*done) return 0;
    *done = true;
    int64_t out = f->outstanding;
    if (!shared) {
        for (uint32_t b = g->head; b != NONE; b = e->next[b])
            cw__abase_add(&e->set, &e->set.bases[b], first, last, f, NULL);
        f->outstanding = out; /* counted already */
        return 0;
    }
    const cw__afig_t *w = window_sums(e, first, last);
    if (!w) return CW_ENOMEM;
    for (uint32_t b = g->head; b != NONE; b = e->next[b]) {
        f->committed += w[b].committed;
        f->commits += w[b].commits;
        f->remaining += w[b].remaining;
        f->rem_commits += w[b].rem_commits;
    }
    return 0;
}

/* A group's leak score and time to limit, computed at most once. */
typedef struct leak {
    bool has;
    cw_leak_score_t ls;
    cw_time_to_limit_t tl;
    double ttl;
} leak_t;

/* Whose commit limit the data's machine has (cw__aeval_t.limit_from). */
enum { LIMIT_LIVE = 0, LIMIT_RECORDED = 1, LIMIT_NONE = 2 };

/* A recorded input's machine (e->limit_from not live): its limit for a
 * rule against the machine's or a process's, with used = the series'
 * outstanding (the trace holds no machine-wide charge over time), or
 * none (out->known false). Never this machine's or its processes'. */
static int recorded_limit(const cw__aeval_t *e, uint64_t used, cw_limit_info_t *out)
{
    memset(out, 0, sizeof *out);
    if (e->limit_from != LIMIT_RECORDED) return CW_ENOENT;
    out->known = true;
    out->limit = e->recorded;
    out->used = used;
    out->source = "the trace's commit_limit";
    return 0;
}

/* The leak score (and time to limit) of a group over its window. */
static int leak_of(cw__aeval_t *e, const cw_alert_rule_t *r, const group_t *g, int64_t first,
                   int64_t last, int64_t T, cw__afig_t *f, bool *summed, leak_t *lk)
{
    cw__aset_t *a = &e->set;
    int err;
    if (lk->has) return 0;
    if ((err = group_sums(e, g, first, last, false, f, summed))) return err;
    if (g->birth > first) first = g->birth;
    if (first > last) first = last;
    size_t n = (size_t)(last - first + 1);
    if (n > e->npoints_cap) {
        int64_t *p = realloc(e->points, n * sizeof *p), *t;
        if (!p) return CW_ENOMEM;
        e->points = p;
        if (!(t = realloc(e->pts_t, n * sizeof *t))) return CW_ENOMEM;
        e->pts_t = t;
        e->npoints_cap = n;
    }
    memset(e->points, 0, n * sizeof *e->points);
    cw__afig_t dummy = {0};
    for (uint32_t b = g->head; b != NONE; b = e->next[b])
        cw__abase_add(a, &a->bases[b], first, last, &dummy, e->points);
    /* At most CW_LEAK_MAX_POINTS, the newest kept: every k-th step. */
    size_t k = (n + CW_LEAK_MAX_POINTS - 1) / CW_LEAK_MAX_POINTS, m = 0;
    for (size_t i = (n - 1) % k; i < n; i += k, m++) {
        int64_t end = (first + (int64_t)i + 1) * a->step;
        e->pts_t[m] = end < T ? end : T;
        e->points[m] = e->points[i];
    }
    cw_leak_score(e->pts_t, e->points, m, f->committed, f->remaining, cw_leak_recent_ns(r),
                  &lk->ls);
    lk->has = true;
    e->leak_computed++;
    memset(&lk->tl, 0, sizeof lk->tl);
    lk->tl.median_s = lk->tl.upper_s = NAN;
    lk->ttl = NAN;
    /* The machine's limit is read once per evaluation (a file read). */
    if (r->limit_kind != CW_AL_SIZE && !e->machine_read && e->limit_from == LIMIT_LIVE) {
        e->machine_read = true;
        cw_alert_machine_limit(&e->machine);
    }
    uint64_t used = f->outstanding > 0 ? (uint64_t)f->outstanding : 0;
    cw_limit_info_t li = {0};
    uint32_t pid = r->group_by == CW_AG_INSTANCE ? g->rep->pid : 0;
    int lrc = e->limit_from == LIMIT_LIVE || r->limit_kind == CW_AL_SIZE
                  ? cw_alert_limit(r, pid, used, e->machine.known ? &e->machine : NULL, &li)
                  : recorded_limit(e, used, &li);
    if (lrc == 0 && li.known) {
        cw_time_to_limit(cw_limit_headroom(&li), lk->ls.slope, lk->ls.slope_hi, &lk->tl);
        lk->tl.limit = li;
        lk->ttl = lk->tl.median_s;
    }
    return 0;
}

/* Evaluates one group of rule ri at T. */
static int eval_group(cw__aeval_t *e, uint32_t ri, const group_t *g, uint64_t k1, uint64_t k2,
                      int64_t first, int64_t last, int64_t T)
{
    cw__arule_t *er = &e->r[ri];
    const cw_alert_rule_t *r = er->r;
    cw__aset_t *a = &e->set;
    cw__afig_t f = {0};
    leak_t lk = {0};
    bool summed = false;
    int err;
    for (uint32_t b = g->head; b != NONE; b = e->next[b])
        f.outstanding += a->bases[b].cur;
    /* The window's sums: now when the value or a floor needs them (from
     * the sums shared by the rules of this window), else only with the
     * leak score. */
    bool every = r->metric == CW_AM_IMPACTING_RATE || r->metric == CW_AM_TRANSIENT_RATE ||
                 r->min_impacting_rate > 0;
    if (every && (err = group_sums(e, g, first, last, true, &f, &summed))) return err;
    double len_h = (double)(T - first * a->step) / 3.6e12;
    double v = NAN;
    switch (r->metric) {
    case CW_AM_IMPACTING_RATE:
        v = (double)f.remaining / len_h;
        break;
    case CW_AM_OUTSTANDING:
        v = (double)f.outstanding;
        break;
    case CW_AM_TRANSIENT_RATE:
        v = (double)(r->count_unit ? f.commits - f.rem_commits : f.committed - f.remaining) /
            len_h;
        break;
    default:
        break; /* leak score, time to limit: below */
    }
    uint32_t si = cw_keymap_find(&er->map, k1, k2);
    cw_alert_severity_t held = si == NONE ? CW_SEV_NONE : er->st[si].sm.severity;
    bool active = si != NONE && er->st[si].sm.state != CW_AS_INACTIVE;
    /* Cheap conditions first. */
    bool cond = g->start != INT64_MAX && T - g->start >= r->warmup_ns;
    if (cond && (f.outstanding < 0 || (uint64_t)f.outstanding < r->min_outstanding)) cond = false;
    if (cond && r->min_impacting_rate > 0 && (double)f.remaining / len_h < r->min_impacting_rate)
        cond = false;
    bool need_leak = r->metric == CW_AM_LEAK_SCORE || r->metric == CW_AM_TIME_TO_LIMIT;
    if ((need_leak && cond) || active) {
        if ((err = leak_of(e, r, g, first, last, T, &f, &summed, &lk))) return err;
        if (r->metric == CW_AM_LEAK_SCORE) v = lk.ls.score;
        if (r->metric == CW_AM_TIME_TO_LIMIT) v = lk.ttl;
    }
    cw_alert_severity_t sev = cond ? cw__alert_severity(r, v, held) : CW_SEV_NONE;
    if (sev != CW_SEV_NONE && r->min_leak_score > 0) {
        if ((err = leak_of(e, r, g, first, last, T, &f, &summed, &lk))) return err;
        if (!(lk.ls.score >= r->min_leak_score)) sev = CW_SEV_NONE;
    }
    if (si == NONE && sev == CW_SEV_NONE) return 0; /* inactive and stays so */
    if (si == NONE) {
        cw__astate_t *st = state_get(er, k1, k2);
        if (!st) return CW_ENOMEM;
        si = (uint32_t)(st - er->st);
        if ((err = state_name(e, st, g->rep, g->tag))) return err;
    }
    cw__astate_t *st = &er->st[si];
    st->seen = true;
    st->value = v;
    cw_alert_severity_t shown = sev != CW_SEV_NONE ? sev : st->sm.severity;
    st->threshold = cw__alert_threshold(r, shown != CW_SEV_NONE ? shown : CW_SEV_WARNING);
    if (isnan(st->threshold)) st->threshold = cw__alert_threshold(r, CW_SEV_CRITICAL);
    cw_alert_transition_t tr;
    bool moved = cw__sm_step(&st->sm, r->for_ns, r->keep_firing_for_ns, T, sev, NULL, &tr);
    if (moved && (err = leak_of(e, r, g, first, last, T, &f, &summed, &lk))) return err;
    st->has_ls = lk.has;
    if (lk.has) {
        st->ls = lk.ls;
        st->tl = lk.tl;
    }
    st->leak = lk.has ? lk.ls.score : NAN;
    st->ttl = lk.has ? lk.ttl : NAN;
    st->updated = T;
    if (!moved) return 0;
    tr.value = v;
    tr.threshold = st->threshold;
    tr.leak_score = st->leak;
    tr.ttl_s = st->ttl;
    return add_tr(e, ri, si, &tr);
}

/* A state whose group had no member at T: its instance exited, its
 * tracking ended, or nothing it selects is left. */
static int eval_gone(cw__aeval_t *e, uint32_t ri, uint32_t si, int64_t T)
{
    cw__arule_t *er = &e->r[ri];
    cw__astate_t *st = &er->st[si];
    const char *why = NULL;
    if (st->sm.state == CW_AS_INACTIVE) return 0;
    if (G_KIND(st->k1) == G_INSTANCE) {
        uint32_t pi = cw_keymap_find(&e->set.procmap, st->proc, 0);
        if (pi == NONE) {
            why = "process exited"; /* left the kept history */
        } else if (e->set.procs[pi].exit < T) {
            why = "process exited";
        } else if (e->set.procs[pi].ended < T) {
            why = "tracking ended";
        }
    } else if (G_KIND(st->k1) == G_NAME) {
        /* No instance of the name alive: how did the last one end? */
        uint32_t name = (uint32_t)(st->k1 & 0xffffffffu);
        int64_t last = INT64_MIN;
        bool alive = false;
        for (size_t i = 0; i < e->set.nprocs && !alive; i++) {
            const cw__aproc_t *p = &e->set.procs[i];
            if (p->name != name || p->start == INT64_MIN) continue;
            int64_t end = p->exit < p->ended ? p->exit : p->ended;
            if (end >= T) alive = true;
            if (end > last) {
                last = end;
                why = p->exit < p->ended ? "process exited" : "tracking ended";
            }
        }
        if (alive || last == INT64_MIN) why = NULL; /* the condition is false */
    }
    cw_alert_transition_t tr;
    if (cw__sm_step(&st->sm, er->r->for_ns, er->r->keep_firing_for_ns, T, CW_SEV_NONE, why,
                    &tr)) {
        /* The final figures: those of its last evaluation. */
        tr.value = st->value;
        tr.threshold = st->threshold;
        tr.leak_score = st->leak;
        tr.ttl_s = st->ttl;
        st->updated = T;
        return add_tr(e, ri, si, &tr);
    }
    return 0;
}

/* A source_down rule at T: one machine series whose value is 1 while the
 * stored down time holds T (the step before T: what was stored before
 * it), else 0. The same state machine as every rule. */
static int eval_source_down(cw__aeval_t *e, uint32_t ri, int64_t T)
{
    cw__arule_t *er = &e->r[ri];
    const cw_alert_rule_t *r = er->r;
    double v = cw_downtime_at(&e->set.down, T - 1) ? 1 : 0;
    uint32_t si = cw_keymap_find(&er->map, G_MACHINE, SUMMED);
    cw_alert_severity_t held = si == NONE ? CW_SEV_NONE : er->st[si].sm.severity;
    cw_alert_severity_t sev = cw__alert_severity(r, v, held);
    int err;
    if (si == NONE && sev == CW_SEV_NONE) return 0; /* inactive and stays so */
    if (si == NONE) {
        cw__astate_t *st = state_get(er, G_MACHINE, SUMMED);
        if (!st) return CW_ENOMEM;
        si = (uint32_t)(st - er->st);
        if ((err = state_name(e, st, NULL, NONE))) return err;
    }
    cw__astate_t *st = &er->st[si];
    st->seen = true;
    st->value = v;
    st->threshold = cw__alert_threshold(r, sev != CW_SEV_NONE ? sev : CW_SEV_CRITICAL);
    if (isnan(st->threshold)) st->threshold = cw__alert_threshold(r, CW_SEV_WARNING);
    st->has_ls = false;
    st->leak = st->ttl = NAN;
    st->updated = T;
    cw_alert_transition_t tr;
    if (!cw__sm_step(&st->sm, r->for_ns, r->keep_firing_for_ns, T, sev, NULL, &tr)) return 0;
    tr.value = v;
    tr.threshold = st->threshold;
    tr.leak_score = NAN;
    tr.ttl_s = NAN;
    return add_tr(e, ri, si, &tr);
}

static int eval_rule(cw__aeval_t *e, uint32_t ri, int64_t T)
{
    cw__arule_t *er = &e->r[ri];
    const cw_alert_rule_t *r = er->r;
    cw__aset_t *a = &e->set;
    int64_t last = cw_floor_to(T - 1, a->step) / a->step;
    int64_t n = (r->window_ns + a->step - 1) / a->step;
    if (n < 1) n = 1;
    if (n > a->len - 1) n = a->len - 1 > 0 ? a->len - 1 : 1;
    int64_t first = last - n + 1;
    int err = 0;
    if (r->metric == CW_AM_SOURCE_DOWN) return eval_source_down(e, ri, T);
    if (CW_RESERVE(e->next, e->nextcap, a->nbases + 1)) return CW_ENOMEM;
    cw_keymap_clear(&e->gmap);
    group_t *gs = NULL;
    size_t ng = 0, gcap = 0;
    for (size_t i = 0; i < er->n; i++)
        er->st[i].seen = false;
    for (size_t bi = 0; bi < a->nbases; bi++) {
        const cw__abase_t *b = &a->bases[bi];
        const cw__aproc_t *p = &a->procs[b->proc];
        if (p->start == INT64_MIN) continue; /* unknown instance: no name */
        if (!match_cached(&er->name_match, &er->nname_match, p->name, r->process, r->nprocess,
                          a->names.v[p->name], true) ||
            !match_cached(&er->tag_match, &er->ntag_match, b->tag, r->tag, r->ntag,
                          a->tags.v[b->tag], true))
            continue;
        bool alive = p->exit >= T && p->ended >= T && p->start < T;
        if (r->group_by == CW_AG_INSTANCE && !alive) continue;
        uint64_t k1 = r->group_by == CW_AG_INSTANCE ? G_INSTANCE | p->id
                      : r->group_by == CW_AG_NAME   ? G_NAME | p->name
                                                    : G_MACHINE;
        uint64_t k2 = r->tags_summed ? SUMMED : b->tag;
        int added = 0;
        uint32_t gi = cw_keymap_get(&e->gmap, k1, k2, &added);
        if (gi == UINT32_MAX || (added && CW_RESERVE(gs, gcap, ng + 1))) {
            err = CW_ENOMEM;
            break;
        }
        if (added)
            gs[ng++] = (group_t){NONE, INT64_MAX, b->birth, p, r->tags_summed ? NONE : b->tag};
        group_t *g = &gs[gi];
        e->next[bi] = g->head;
        g->head = (uint32_t)bi;
        if (alive && p->start < g->start) g->start = p->start;
        if (b->birth < g->birth) g->birth = b->birth;
    }
    /* Groups in the order of their first member; keys rebuilt per group. */
    for (size_t gi = 0; gi < ng && !err; gi++) {
        const group_t *g = &gs[gi];
        const cw__aproc_t *p = g->rep;
        uint64_t k1 = r->group_by == CW_AG_INSTANCE ? G_INSTANCE | p->id
                      : r->group_by == CW_AG_NAME   ? G_NAME | p->name
                                                    : G_MACHINE;
        uint64_t k2 = r->tags_summed ? SUMMED : g->tag;
        if (g->start == INT64_MAX && r->group_by != CW_AG_MACHINE) continue; /* none alive */
        err = eval_group(e, ri, g, k1, k2, first, last, T);
    }
    free(gs);
    for (size_t si = 0; si < er->n && !err; si++)
        if (!er->st[si].seen) err = eval_gone(e, ri, (uint32_t)si, T);
    for (size_t si = 0; si < er->n; si++)
        if (er->st[si].sm.state == CW_AS_INACTIVE) er->st[si].dropped = true;
    return err;
}

size_t cw__aeval_bytes(const cw__aeval_t *e)
{
    size_t b = cw__aset_bytes(&e->set) + e->nextcap * sizeof *e->next +
               e->trcap * sizeof *e->tr + e->npoints_cap * (sizeof *e->points + sizeof *e->pts_t);
    for (size_t i = 0; i < CW_ARRAY_LEN(e->wsum); i++)
        b += e->wsum[i].cap * sizeof *e->wsum[i].v;
    b += cw_keymap_bytes(&e->gmap);
    return b;
}

/* Scratch per base (the window sums, the groups' chains) whose room is
 * far above the bases the set holds now goes back: a burst of instances,
 * compacted away once ended, would otherwise keep it for good. */
#define SCRATCH_SLACK 64

int cw__aeval_limit_from(cw__aeval_t *e, cw_store_t *s, cw_diag_t *d)
{
    char *v = NULL, *end;
    int err = cw_store_meta_get(s, CW_COMMIT_LIMIT_META_KEY, &v, d);
    if (err) return err;
    e->limit_from = LIMIT_LIVE;
    e->recorded = 0;
    if (v && strcmp(v, "none") == 0) {
        e->limit_from = LIMIT_NONE;
    } else if (v && strcmp(v, "live") != 0) {
        unsigned long long n = strtoull(v, &end, 10);
        e->limit_from = end > v && !*end && n > 0 ? LIMIT_RECORDED : LIMIT_NONE;
        e->recorded = n;
    }
    free(v);
    return 0;
}

int cw__aeval_run(cw__aeval_t *e, int64_t T)
{
    int err = 0;
    e->ntr = 0;
    e->machine_read = e->limit_from != LIMIT_LIVE; /* a recorded machine's: never read */
    for (size_t i = 0; i < CW_ARRAY_LEN(e->wsum); i++) {
        e->wsum[i].valid = false;
        CW_RESERVE_FIT(e->wsum[i].v, e->wsum[i].cap, e->set.nbases + 1, SCRATCH_SLACK);
    }
    CW_RESERVE_FIT(e->next, e->nextcap, e->set.nbases + 1, SCRATCH_SLACK);
    for (uint32_t ri = 0; ri < e->rules.n && !err; ri++)
        err = eval_rule(e, ri, T);
    if (!err) e->set.evaluated_to = T; /* instances ended before T: resolved */
    return err;
}

void cw__aeval_compact(cw__aeval_t *e)
{
    for (size_t ri = 0; ri < e->rules.n; ri++) {
        cw__arule_t *r = &e->r[ri];
        size_t k = 0;
        for (size_t i = 0; i < r->n; i++) {
            if (r->st[i].dropped) {
                state_free(&r->st[i]);
                continue;
            }
            r->st[k++] = r->st[i];
        }
        if (k == r->n) continue;
        r->n = k;
        cw_keymap_clear(&r->map);
        for (size_t i = 0; i < k; i++) {
            int added;
            cw_keymap_get(&r->map, r->st[i].k1, r->st[i].k2, &added);
        }
    }
}

int cw__aeval_restore(cw__aeval_t *e, uint32_t ri, const cw_alert_row_t *row,
                      cw__astate_t **out)
{
    cw__arule_t *er = &e->r[ri];
    const char *key = row->key, *bar = strrchr(key, '|');
    uint64_t k1 = 0, k2 = SUMMED;
    *out = NULL;
    if (!bar) return CW_EINVAL;
    if (strcmp(bar + 1, "*") != 0) {
        uint32_t t = cw__strtab_get(&e->set.tags, bar + 1);
        if (t == NONE) return CW_ENOMEM;
        k2 = t;
    }
    if (strncmp(key, "instance:", 9) == 0 && er->r->group_by == CW_AG_INSTANCE) {
        k1 = G_INSTANCE | (uint32_t)strtoul(key + 9, NULL, 10);
    } else if (strncmp(key, "name:", 5) == 0 && er->r->group_by == CW_AG_NAME) {
        char *name = cw_strndup(key + 5, (size_t)(bar - key - 5));
        uint32_t ni = name ? cw__strtab_get(&e->set.names, name) : NONE;
        free(name);
        if (ni == NONE) return CW_ENOMEM;
        k1 = G_NAME | ni;
    } else if (strncmp(key, "machine|", 8) == 0 && er->r->group_by == CW_AG_MACHINE) {
        k1 = G_MACHINE;
    } else {
        return CW_EINVAL;
    }
    if ((k2 == SUMMED) != er->r->tags_summed) return CW_EINVAL;
    cw__astate_t *st = state_get(er, k1, k2);
    if (!st) return CW_ENOMEM;
    state_free(st);
    st->key = cw_strdup(row->key);
    st->process = row->process ? cw_strdup(row->process) : NULL;
    st->tag = row->tag ? cw_strdup(row->tag) : NULL;
    if (!st->key || (row->process && !st->process) || (row->tag && !st->tag)) return CW_ENOMEM;
    st->row_id = row->id;
    st->proc = row->proc;
    st->pid = row->pid;
    st->sm = (cw__sm_t){(cw_alert_state_t)row->state, (cw_alert_severity_t)row->severity,
                        row->active_since, row->firing_since, row->false_since};
    st->value = row->value;
    st->threshold = row->threshold;
    st->leak = row->leak_score;
    st->ttl = row->ttl_s;
    st->last_sent = row->last_sent_ns;
    st->updated = row->updated_ns;
    *out = st;
    return 0;
}
