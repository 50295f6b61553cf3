/* engine.c - the alert engine's thread (alerts.h, cw_alert_engine_t):
 * evaluates every instant T = k x interval up to the end of the stored
 * data, in order, saves each evaluation's series rows and transitions in
 * one transaction, and hands the notices to delivery.
 *
 * DESIGN. Threads: the engine thread owns the evaluator (eval.c, with the
 * series of series.c) and its store handle (cw_store_open_side: it writes
 * the alert tables only, never the tier state the service's writer
 * owns). Any thread may call set_rules, kick, drain and stop: they only
 * touch the fields under `mu`. SQLite's WAL and busy timeout serialise
 * the engine's short transactions with the writer's.
 *
 * Restart: the instant evaluated last (meta alert_evaluated_ns) and the
 * active series rows are loaded; evaluation resumes at the next instant
 * with the window's history rebuilt from the store, so a pending `for`
 * keeps its clock. Series of a rule whose name and hash are unchanged
 * keep their state (also on a reload); the others resolve with reason
 * "rule removed". */
#include <inttypes.h>
#include <math.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "alerts/alerts_internal.h"
#include "commitwatch/common.h"
#include "commitwatch/event.h"
#include "commitwatch/log.h"
#include "commitwatch/memstat.h"
#include "commitwatch/platform.h"


struct cw_alert_engine {
    int64_t interval, step, resend;
    char *gen_url;
    void (*on_notices)(void *ctx, const cw_alert_notice_t *v, size_t n);
    void *ctx;
    void (*on_fire)(void *ctx, const cw_alert_fire_t *f);
    void *fire_ctx;
    cw_store_t *s;
    cw_thread_t *th;
    cw_mutex_t *mu;
    cw_cond_t *cv, *done_cv;
    atomic_bool stop;
    bool kicked;
    uint64_t drain_req, drain_done;
    cw_alert_rules_t pending; /* set_rules' copy, taken by the thread */
    bool has_pending;
    /* engine thread only */
    cw__aeval_t ev;
    int64_t next_T, last_T;
    int64_t gap_check_T; /* look for a stretch without data from this instant on */
    cw__notices_t notices;
    cw__silence_t *sil;
    size_t nsil;
    uint64_t evaluations;
    bool err_logged;
};

static bool is_never(int64_t t)
{
    return t == INT64_MIN || t == INT64_MAX;
}

/* ---- rows -------------------------------------------------------------------- */

/* A number of the detail: six significant digits, as the rules and the
 * dashboard show them (cJSON prints NaN and Infinity as null). */
static bool add_num(cJSON *o, const char *name, double v)
{
    char b[32];
    if (isfinite(v)) {
        snprintf(b, sizeof b, "%.6g", v);
        v = strtod(b, NULL);
    }
    return cJSON_AddNumberToObject(o, name, v) != NULL;
}

/* The detail JSON of a state: leak-score components and forecast; NULL
 * when the state has no leak score (or out of memory). */
static char *detail_json(const cw__astate_t *st, int64_t window_ns)
{
    if (!st->has_ls) return NULL;
    const cw_leak_score_t *l = &st->ls;
    cJSON *o = cJSON_CreateObject(), *k = NULL, *f = NULL;
    bool ok = o && cJSON_AddNumberToObject(o, "window_ns", (double)window_ns) &&
              (k = cJSON_AddObjectToObject(o, "leak")) && add_num(k, "score", l->score) &&
              add_num(k, "slope", l->slope) && add_num(k, "slope_lo", l->slope_lo) &&
              add_num(k, "slope_hi", l->slope_hi) && add_num(k, "mk_z", l->mk_z) &&
              add_num(k, "mk_p", l->mk_p) && add_num(k, "floor_slope", l->floor_slope) &&
              add_num(k, "stay_share", l->stay_share) && add_num(k, "plateau", l->plateau) &&
              add_num(k, "recent", l->recent) && cJSON_AddNumberToObject(k, "points", l->points);
    if (ok && st->tl.limit.known)
        ok = (f = cJSON_AddObjectToObject(o, "forecast")) &&
             add_num(f, "median_s", st->tl.median_s) && add_num(f, "upper_s", st->tl.upper_s) &&
             cJSON_AddNumberToObject(f, "headroom", (double)st->tl.headroom) &&
             cJSON_AddNumberToObject(f, "limit", (double)st->tl.limit.limit) &&
             cJSON_AddStringToObject(f, "source",
                                     st->tl.limit.source ? st->tl.limit.source : "");
    char *text = ok ? cJSON_PrintUnformatted(o) : NULL;
    cJSON_Delete(o);
    char *out = text ? cw_strdup(text) : NULL; /* the row's detail is free()d */
    cJSON_free(text);
    return out;
}

static void row_of(cw_alert_row_t *row, const cw__arule_t *r, const cw__astate_t *st, int64_t T)
{
    *row = (cw_alert_row_t){0};
    row->id = st->row_id;
    row->rule = r->r->name;
    row->rule_hash = (char *)r->hash;
    row->key = st->key;
    row->process = st->process;
    row->proc = st->proc;
    row->pid = st->pid;
    row->tag = st->tag;
    row->state = st->sm.state;
    row->severity = st->sm.severity;
    row->active_since = st->sm.active_since;
    row->firing_since = st->sm.firing_since;
    row->false_since = st->sm.false_since;
    row->last_sent_ns = st->last_sent;
    row->value = st->value;
    row->threshold = st->threshold;
    row->leak_score = st->leak;
    row->ttl_s = st->ttl;
    row->detail = detail_json(st, r->r->window_ns);
    row->updated_ns = T;
}

static void tr_row_of(cw_alert_tr_row_t *t, const cw__atr_t *a)
{
    *t = (cw_alert_tr_row_t){0};
    t->ts_ns = a->tr.ts_ns;
    t->from_state = a->tr.from;
    t->to_state = a->tr.to;
    t->severity = a->tr.severity;
    t->value = a->tr.value;
    t->threshold = a->tr.threshold;
    t->leak_score = a->tr.leak_score;
    t->ttl_s = a->tr.ttl_s;
    t->reason = (char *)a->tr.reason;
    t->silenced = a->silenced;
}

/* ---- silences --------------------------------------------------------------- */

static void silences_free(cw_alert_engine_t *e)
{
    for (size_t i = 0; i < e->nsil; i++)
        cw__silence_free(&e->sil[i]);
    free(e->sil);
    e->sil = NULL;
    e->nsil = 0;
}

/* The silences active now (wall clock: a silence is an operator's act in
 * real time). A failure keeps the previous ones and is logged. */
static void silences_load(cw_alert_engine_t *e)
{
    cw_silence_row_t *v = NULL;
    size_t n = 0;
    cw_diag_t d = {{0}};
    if (cw_store_silences(e->s, cw_plat_wall_ns(), &v, &n, &d) != 0) {
        CW_LOGW("alerts: reading the silences failed: %s", d.msg);
        return;
    }
    silences_free(e);
    e->sil = calloc(n ? n : 1, sizeof *e->sil);
    for (size_t i = 0; e->sil && i < n; i++) {
        if (cw__silence_parse(v[i].matchers, &e->sil[e->nsil]) == 0) {
            e->sil[e->nsil++].id = v[i].id;
        } else {
            CW_LOGW("alerts: silence %" PRId64 " has matchers this engine cannot read: %s",
                    v[i].id, v[i].matchers);
        }
    }
    cw_silence_rows_free(v, n);
}

static bool silenced(const cw_alert_engine_t *e, const cw_alert_rule_t *r, const cw__astate_t *st,
                     cw_alert_severity_t sev)
{
    if (!e->nsil) return false;
    cw_alert_label_t lab[8 + 64];
    char buf[32];
    if (r->nlabels > 64) return false;
    size_t n = cw__alert_labels(r, st, sev, lab, buf);
    for (size_t i = 0; i < e->nsil; i++)
        if (cw__silence_match(&e->sil[i], lab, n)) return true;
    return false;
}

/* Whether a transition is notified: to firing, a change of severity, a
 * firing series resolving. Pending comes and goes silently. */
static bool notified(const cw_alert_transition_t *t)
{
    return t->to == CW_AS_FIRING || (t->from == CW_AS_FIRING && t->to == CW_AS_INACTIVE);
}

/* ---- one evaluation -------------------------------------------------------------- */

static int save(cw_alert_engine_t *e, int64_t T, cw_diag_t *d)
{
    cw__aeval_t *ev = &e->ev;
    size_t nrows = 0, cap = 0;
    cw_alert_row_t *rows = NULL;
    /* Per state, its row's index (transitions refer to it). */
    size_t total = 0;
    for (size_t ri = 0; ri < ev->rules.n; ri++)
        total += ev->r[ri].n;
    size_t *ix = calloc(total + 1, sizeof *ix), *base = calloc(ev->rules.n + 1, sizeof *base);
    cw_alert_tr_row_t *trs = calloc(ev->ntr + 1, sizeof *trs);
    size_t *tr_row = calloc(ev->ntr + 1, sizeof *tr_row);
    int err = ix && base && trs && tr_row ? 0 : CW_ENOMEM;
    for (size_t ri = 0, k = 0; !err && ri < ev->rules.n; ri++) {
        base[ri] = k;
        for (size_t si = 0; !err && si < ev->r[ri].n; si++, k++) {
            const cw__astate_t *st = &ev->r[ri].st[si];
            if (st->updated != T) continue; /* not evaluated now: unchanged */
            if (CW_RESERVE(rows, cap, nrows + 1)) {
                err = CW_ENOMEM;
                break;
            }
            row_of(&rows[nrows], &ev->r[ri], st, T);
            ix[k] = nrows++;
        }
    }
    for (size_t i = 0; !err && i < ev->ntr; i++) {
        tr_row_of(&trs[i], &ev->tr[i]);
        tr_row[i] = ix[base[ev->tr[i].rule] + ev->tr[i].state];
    }
    /* Saved at every instant, changes or not: the evaluated instant and
     * the count of evaluations move on (alertdb.h). */
    if (err)
        cw_diag_set(d, err, "alerts: out of memory saving an evaluation");
    else
        err = cw_store_alert_save(e->s, rows, nrows, trs, tr_row, ev->ntr, T, d);
    for (size_t ri = 0, k = 0; !err && ri < ev->rules.n; ri++)
        for (size_t si = 0; si < ev->r[ri].n; si++, k++)
            if (ev->r[ri].st[si].updated == T) ev->r[ri].st[si].row_id = rows[ix[k]].id;
    for (size_t i = 0; i < nrows; i++)
        free(rows[i].detail);
    for (size_t i = 0; !err && i < ev->ntr; i++)
        ev->tr[i].tr_id = trs[i].id; /* for the notices */
    free(rows);
    free(ix);
    free(base);
    free(trs);
    free(tr_row);
    return err;
}

/* Decides the silences and re-sends before saving (last_sent is saved). */
static void mark(cw_alert_engine_t *e, int64_t T, bool *any)
{
    cw__aeval_t *ev = &e->ev;
    *any = false;
    for (size_t i = 0; i < ev->ntr; i++) {
        cw__atr_t *a = &ev->tr[i];
        const cw__arule_t *r = &ev->r[a->rule];
        cw__astate_t *st = &ev->r[a->rule].st[a->state];
        a->silenced = silenced(e, r->r, st, a->tr.severity);
        if (!a->silenced && notified(&a->tr)) {
            st->last_sent = T;
            *any = true;
        }
    }
    for (size_t ri = 0; ri < ev->rules.n; ri++)
        for (size_t si = 0; si < ev->r[ri].n; si++) {
            cw__astate_t *st = &ev->r[ri].st[si];
            st->resend_now = false;
            if (st->sm.state != CW_AS_FIRING || st->updated != T) continue;
            if (!is_never(st->last_sent) && T - st->last_sent < e->resend) continue;
            if (st->last_sent == T) continue; /* a transition's notice now */
            if (silenced(e, ev->r[ri].r, st, st->sm.severity)) continue;
            st->resend_now = true;
            st->last_sent = T;
            *any = true;
        }
}

static void notify(cw_alert_engine_t *e, int64_t T)
{
    cw__aeval_t *ev = &e->ev;
    int err = 0;
    for (size_t i = 0; !err && i < ev->ntr; i++) {
        const cw__atr_t *a = &ev->tr[i];
        if (a->silenced || !notified(&a->tr)) continue;
        err = cw__notices_add(&e->notices, ev->r[a->rule].r, &ev->r[a->rule].st[a->state],
                              &a->tr, a->tr_id, T, e->gen_url);
    }
    for (size_t ri = 0; !err && ri < ev->rules.n; ri++)
        for (size_t si = 0; !err && si < ev->r[ri].n; si++)
            if (ev->r[ri].st[si].resend_now)
                err = cw__notices_add(&e->notices, ev->r[ri].r, &ev->r[ri].st[si], NULL, 0, T,
                                      e->gen_url);
    if (err) CW_LOGE("alerts: out of memory building notices; some are lost");
    if (e->notices.n && e->on_notices) e->on_notices(e->ctx, e->notices.v, e->notices.n);
    cw__notices_clear(&e->notices);
}

/* The incident capsule: each series that started firing at T under a
 * rule with heap_trace is handed to on_fire, once its row is saved (the
 * trace records the alert's id), when T is recent enough that the
 * process it names may still run. */
static void capsules(cw_alert_engine_t *e, int64_t T)
{
    if (!e->on_fire) return;
    int64_t now = cw_plat_wall_ns();
    if (T < now - 2 * e->interval - e->step) return;
    cw__aeval_t *ev = &e->ev;
    for (size_t i = 0; i < ev->ntr; i++) {
        const cw__atr_t *a = &ev->tr[i];
        const cw_alert_rule_t *r = ev->r[a->rule].r;
        const cw__astate_t *st = &ev->r[a->rule].st[a->state];
        if (!r->heap_trace_ns || a->tr.to != CW_AS_FIRING || a->tr.from == CW_AS_FIRING) continue;
        cw_alert_fire_t f = {st->row_id,  r->name, r->heap_trace_ns, st->pid, st->proc,
                             st->process, T};
        e->on_fire(e->fire_ctx, &f);
    }
}

static int evaluate_at(cw_alert_engine_t *e, int64_t T, cw_diag_t *d)
{
    bool any = false;
    int err = cw__aset_feed(&e->ev.set, e->s, T, d);
    if (!err && (err = cw__aeval_run(&e->ev, T)))
        cw_diag_set(d, err, "alerts: out of memory evaluating");
    cw_mem_set(CW_MEM_ALERT_SERIES, (int64_t)cw__aeval_bytes(&e->ev));
    if (err) return err;
    bool firing = false;
    for (size_t ri = 0; ri < e->ev.rules.n && !firing; ri++)
        for (size_t si = 0; si < e->ev.r[ri].n && !firing; si++)
            firing = e->ev.r[ri].st[si].sm.state == CW_AS_FIRING;
    if (e->ev.ntr || firing) silences_load(e);
    mark(e, T, &any);
    err = save(e, T, d);
    e->evaluations++;
    e->last_T = T;
    if (!err) capsules(e, T);
    if (!err && any) notify(e, T);
    cw__aeval_compact(&e->ev);
    return err;
}

/* ---- restore and rules ---------------------------------------------------------------- */

/* Stored rows (active series) of another evaluator's or an earlier run's:
 * restored where their rule is unchanged, otherwise resolved "rule
 * removed" and saved at ts at once. */
static int adopt(cw_alert_engine_t *e, cw_alert_row_t *rows, size_t n, int64_t ts, cw_diag_t *d)
{
    cw_alert_tr_row_t *trs = calloc(n + 1, sizeof *trs);
    cw_alert_row_t *gone = calloc(n + 1, sizeof *gone);
    size_t *tr_row = calloc(n + 1, sizeof *tr_row), ngone = 0;
    int err = trs && gone && tr_row ? 0 : CW_ENOMEM;
    for (size_t i = 0; !err && i < n; i++) {
        cw_alert_row_t *row = &rows[i];
        size_t ri = 0;
        while (ri < e->ev.rules.n && strcmp(e->ev.rules.v[ri].name, row->rule) != 0)
            ri++;
        cw__astate_t *st = NULL;
        int rc = CW_EINVAL;
        if (ri < e->ev.rules.n && strcmp(e->ev.r[ri].hash, row->rule_hash) == 0)
            rc = cw__aeval_restore(&e->ev, (uint32_t)ri, row, &st);
        if (rc == CW_ENOMEM) err = rc;
        if (rc == 0 || err) continue;
        gone[ngone] = *row;
        gone[ngone].state = CW_AS_INACTIVE;
        gone[ngone].false_since = CW_TS_NEVER;
        gone[ngone].updated_ns = ts;
        trs[ngone] = (cw_alert_tr_row_t){0, row->id, ts, row->state, CW_AS_INACTIVE,
                                         row->severity, row->value, row->threshold,
                                         row->leak_score, row->ttl_s, (char *)"rule removed",
                                         false, NULL};
        tr_row[ngone] = ngone;
        ngone++;
    }
    if (!err && ngone) {
        CW_LOGI("alerts: %zu active series of removed or changed rules resolve", ngone);
        err = cw_store_alert_save(e->s, gone, ngone, trs, tr_row, ngone, ts, d);
    } else if (err) {
        cw_diag_set(d, err, "alerts: out of memory restoring the alert state");
    }
    free(trs);
    free(gone);
    free(tr_row);
    return err;
}

/* The rules in force as the API shows them (alertdb.h). */
static int rules_record(cw_alert_engine_t *e, cw_diag_t *d)
{
    cJSON *a = cJSON_CreateArray();
    for (size_t i = 0; a && i < e->ev.rules.n; i++) {
        const cw_alert_rule_t *r = &e->ev.rules.v[i];
        cJSON *o = cJSON_CreateObject();
        if (!o) break;
        cJSON_AddItemToArray(a, o);
        cJSON_AddStringToObject(o, "name", r->name);
        cJSON_AddStringToObject(o, "file", r->file ? r->file : "");
        cJSON_AddNumberToObject(o, "line", r->line);
        cJSON_AddStringToObject(o, "hash", e->ev.r[i].hash);
        if (r->text)
            cJSON_AddStringToObject(o, "text", r->text);
        else
            cJSON_AddNullToObject(o, "text");
    }
    char *json = a ? cJSON_PrintUnformatted(a) : NULL;
    cJSON_Delete(a);
    if (!json) return cw_diag_set(d, CW_ENOMEM, "alerts: out of memory recording the rules");
    int err = cw_store_alert_rules_set(e->s, json, d);
    cJSON_free(json);
    return err;
}

/* The rows of the evaluator's active states (for a reload). */
static int active_rows(cw_alert_engine_t *e, cw_alert_row_t **out, size_t *n)
{
    size_t cap = 0;
    *out = NULL;
    *n = 0;
    for (size_t ri = 0; ri < e->ev.rules.n; ri++)
        for (size_t si = 0; si < e->ev.r[ri].n; si++) {
            const cw__astate_t *st = &e->ev.r[ri].st[si];
            if (st->sm.state == CW_AS_INACTIVE) continue;
            if (CW_RESERVE(*out, cap, *n + 1)) return CW_ENOMEM;
            row_of(&(*out)[*n], &e->ev.r[ri], st, st->updated);
            free((*out)[*n].detail);
            (*out)[*n].detail = NULL;
            (*n)++;
        }
    return 0;
}

/* Replaces the evaluator by one of rules, carrying the states over (a
 * reload). Engine thread. */
static int apply_rules(cw_alert_engine_t *e, const cw_alert_rules_t *rules, cw_diag_t *d)
{
    cw__aeval_t next;
    cw_alert_row_t *rows = NULL;
    size_t n = 0;
    int err = cw__aeval_init(&next, rules, e->step);
    if (err) return cw_diag_set(d, err, "alerts: out of memory for the new rules");
    /* The old states' rows hold strings of the old evaluator: adopt them
     * before freeing it. */
    if ((err = active_rows(e, &rows, &n))) {
        cw__aeval_free(&next);
        free(rows);
        return cw_diag_set(d, err, "alerts: out of memory for the new rules");
    }
    next.limit_from = e->ev.limit_from; /* the data's machine is the same */
    next.recorded = e->ev.recorded;
    cw__aeval_t old = e->ev;
    e->ev = next;
    err = adopt(e, rows, n, is_never(e->last_T) ? 0 : e->last_T, d);
    free(rows);
    cw__aeval_free(&old);
    if (!err) err = rules_record(e, d);
    return err;
}

/* ---- the thread ------------------------------------------------------------------------ */

/* How long after the last stored data every series has settled: its
 * windows hold nothing newer, and `for`, `keep_firing_for` and `warmup`
 * have run out; evaluating later instants before more data changes no
 * state and no value. */
static int64_t settle_ns(const cw_alert_engine_t *e)
{
    int64_t h = 0;
    for (size_t i = 0; i < e->ev.rules.n; i++) {
        const cw_alert_rule_t *r = &e->ev.rules.v[i];
        int64_t x = r->window_ns + r->for_ns + r->keep_firing_for_ns + r->warmup_ns;
        if (x > h) h = x;
    }
    return h + 2 * e->step + e->interval;
}

/* A stretch with no stored data longer than settle_ns() (a replay rebased
 * long after the stored history, a machine idle for hours) is not
 * evaluated instant by instant: the engine goes on from the last instant
 * before the data resumes (or the end of the data). The result depends on
 * the stored data alone, as every evaluation does; firing alerts are not
 * re-sent across the skipped instants. */
static void skip_gap(cw_alert_engine_t *e, int64_t limit)
{
    int64_t T = e->next_T, h = settle_ns(e), next;
    if (T < e->gap_check_T || limit - T < 2 * e->interval) return;
    cw_diag_t d = {{0}};
    if (cw_store_feed_next(e->s, T - h, &next, &d) != 0) {
        CW_LOGW("alerts: %s", d.msg);
        e->gap_check_T = T + h;
        return;
    }
    if (is_never(next) || next >= T) {
        int64_t to = is_never(next) || next > limit ? limit : next;
        int64_t jump = cw_floor_to(to, e->interval);
        if (jump > T) {
            CW_LOGD("alerts: no data from %" PRId64 " to %" PRId64 ": instants skipped", T - h, to);
            e->next_T = jump;
        }
        e->gap_check_T = is_never(next) ? e->next_T + e->interval : next + h;
    } else {
        e->gap_check_T = next + h;
    }
}

/* Evaluates every instant up to the end of the stored data. */
static void run_available(cw_alert_engine_t *e)
{
    cw_feed_bounds_t fb;
    cw_diag_t d = {{0}};
    if (cw_store_feed_bounds(e->s, &fb, &d) != 0) {
        CW_LOGE("alerts: %s", d.msg);
        return;
    }
    int64_t limit = fb.ended ? fb.data_end_ns : fb.stored_end_ns;
    /* While the live source is down nothing is stored, yet time passes:
     * the instants up to now are evaluated (the source_down rule fires;
     * the others see no new data). The source's data, when it comes back,
     * starts after them (downtime.h). */
    cw_downtime_t down;
    if (cw_store_downtime_get(e->s, &down, &d) == 0 && cw_downtime_open(&down)) {
        int64_t now = cw_floor_to(cw_plat_wall_ns(), CW_NS_PER_S);
        if (is_never(limit) || now > limit) limit = now;
        if (is_never(fb.start_ns)) fb.start_ns = down.from[down.n - 1];
    }
    if (is_never(limit) || is_never(fb.start_ns)) return;
    if (is_never(e->next_T)) e->next_T = cw_floor_to(fb.start_ns, e->interval) + e->interval;
    while (e->next_T <= limit && !atomic_load(&e->stop)) {
        skip_gap(e, limit);
        int64_t T = e->next_T;
        int err = evaluate_at(e, T, &d);
        if (err) {
            /* Logged once per run of failures; the instant is skipped and
             * the series rebuilt from the store (never a crash). */
            if (!e->err_logged) CW_LOGE("alerts: evaluating at %" PRId64 " failed: %s", T, d.msg);
            e->err_logged = true;
            cw__aset_reset(&e->ev.set);
        } else {
            e->err_logged = false;
        }
        e->next_T = T + e->interval;
    }
}

static void thread_main(void *arg)
{
    cw_alert_engine_t *e = arg;
    cw_mutex_lock(e->mu);
    while (!atomic_load(&e->stop)) {
        if (e->has_pending) {
            cw_alert_rules_t r = e->pending;
            e->has_pending = false;
            memset(&e->pending, 0, sizeof e->pending);
            cw_mutex_unlock(e->mu);
            cw_diag_t d = {{0}};
            if (apply_rules(e, &r, &d) != 0) CW_LOGE("alerts: applying the new rules: %s", d.msg);
            cw_alert_rules_free(&r);
            cw_mutex_lock(e->mu);
        }
        uint64_t want = e->drain_req;
        e->kicked = false;
        cw_mutex_unlock(e->mu);
        run_available(e);
        cw_mutex_lock(e->mu);
        if (e->drain_done < want) {
            e->drain_done = want;
            cw_cond_broadcast(e->done_cv);
        }
        if (!atomic_load(&e->stop) && !e->kicked && !e->has_pending && e->drain_req == want)
            cw_cond_timedwait(e->cv, e->mu, e->interval < CW_NS_PER_S ? e->interval : CW_NS_PER_S);
    }
    e->drain_done = e->drain_req; /* nobody waits on a stopped engine */
    cw_cond_broadcast(e->done_cv);
    cw_mutex_unlock(e->mu);
}

/* ---- the API ---------------------------------------------------------------------------- */

/* Never evaluated: a fresh database is evaluated from its first bucket
 * (run_available), but one with history already (alerts turned on
 * later) from one longest window before its end, read now, before this
 * run stores anything: states start there as if the engine had run since,
 * without evaluating days of past instants. */
static int first_instant(cw_alert_engine_t *e, cw_diag_t *d)
{
    cw_feed_bounds_t fb;
    int err = cw_store_feed_bounds(e->s, &fb, d);
    if (err || is_never(fb.stored_end_ns) || is_never(fb.start_ns)) return err;
    int64_t limit = fb.ended ? fb.data_end_ns : fb.stored_end_ns;
    int64_t from = fb.start_ns, back = (int64_t)(e->ev.set.len - 1) * e->step;
    if (limit - back > from) from = limit - back;
    e->next_T = cw_floor_to(from, e->interval) + e->interval;
    return 0;
}

/* A teardown list, alike to writer.c's (and other ones) in form only: each
 * frees its own members. */
static void engine_free(cw_alert_engine_t *e)
{
    cw__aeval_free(&e->ev);
    cw_alert_rules_free(&e->pending);
    cw__notices_free(&e->notices);
    silences_free(e);
    cw_store_close(e->s);
    cw_cond_destroy(e->cv);
    cw_cond_destroy(e->done_cv);
    cw_mutex_destroy(e->mu);
    free(e->gen_url);
    free(e);
}

int cw_alert_engine_start(const cw_alert_engine_opts_t *o, const cw_alert_rules_t *rules,
                          cw_alert_engine_t **out, cw_diag_t *d)
{
    cw_alert_engine_t *e = calloc(1, sizeof *e);
    cw_alert_row_t *rows = NULL;
    size_t n = 0;
    int err;
    *out = NULL;
    if (!e) return cw_diag_set(d, CW_ENOMEM, "alerts: out of memory");
    e->interval = o->interval_ns > 0 ? o->interval_ns : 10 * CW_NS_PER_S;
    e->step = o->step_ns > 0 ? o->step_ns : 60 * CW_NS_PER_S;
    e->resend = o->resend_ns > 0 ? o->resend_ns : 60 * CW_NS_PER_S;
    e->on_notices = o->on_notices;
    e->ctx = o->ctx;
    e->on_fire = o->on_fire;
    e->fire_ctx = o->fire_ctx;
    e->next_T = e->last_T = e->gap_check_T = INT64_MIN;
    if (e->step % CW_NS_PER_S) {
        free(e);
        return cw_diag_set(d, CW_EINVAL, "alert_step must be a whole number of seconds");
    }
    if ((o->generator_url && !(e->gen_url = cw_strdup(o->generator_url))) ||
        cw_mutex_create(&e->mu) || cw_cond_create(&e->cv) || cw_cond_create(&e->done_cv) ||
        cw__aeval_init(&e->ev, rules, e->step)) {
        engine_free(e);
        return cw_diag_set(d, CW_ENOMEM, "alerts: out of memory");
    }
    if ((err = cw_store_open_side(o->db_path, &e->s, d))) goto fail;
    if ((err = cw__aeval_limit_from(&e->ev, e->s, d))) goto fail;
    int64_t last = INT64_MIN;
    if ((err = cw_store_alert_evaluated(e->s, &last, d))) goto fail;
    if (!is_never(last)) {
        e->last_T = last;
        e->next_T = cw_floor_to(last, e->interval) + e->interval;
    } else if ((err = first_instant(e, d))) {
        goto fail;
    }
    if ((err = cw_store_alert_active(e->s, &rows, &n, d))) goto fail;
    err = adopt(e, rows, n, is_never(last) ? 0 : last, d);
    cw_alert_rows_free(rows, n);
    if (err || (err = rules_record(e, d))) goto fail;
    if ((err = cw_thread_start(&e->th, thread_main, e))) {
        cw_diag_set(d, err, "alerts: cannot start the engine thread");
        goto fail;
    }
    *out = e;
    return 0;
fail:
    engine_free(e);
    return err;
}

int cw_alert_engine_set_rules(cw_alert_engine_t *e, const cw_alert_rules_t *rules, cw_diag_t *d)
{
    cw_alert_rules_t copy;
    if (cw_alert_rules_copy(&copy, rules))
        return cw_diag_set(d, CW_ENOMEM, "alerts: out of memory for the new rules");
    cw_mutex_lock(e->mu);
    cw_alert_rules_free(&e->pending);
    e->pending = copy;
    e->has_pending = true;
    cw_cond_signal(e->cv);
    cw_mutex_unlock(e->mu);
    return 0;
}

void cw_alert_engine_kick(cw_alert_engine_t *e)
{
    if (!e) return;
    cw_mutex_lock(e->mu);
    e->kicked = true;
    cw_cond_signal(e->cv);
    cw_mutex_unlock(e->mu);
}

void cw_alert_engine_drain(cw_alert_engine_t *e)
{
    if (!e) return;
    cw_mutex_lock(e->mu);
    uint64_t want = ++e->drain_req;
    cw_cond_signal(e->cv);
    while (e->drain_done < want)
        cw_cond_wait(e->done_cv, e->mu);
    cw_mutex_unlock(e->mu);
}

void cw_alert_engine_stop(cw_alert_engine_t *e)
{
    if (!e) return;
    cw_mutex_lock(e->mu);
    atomic_store(&e->stop, true);
    cw_cond_signal(e->cv);
    cw_mutex_unlock(e->mu);
    cw_thread_join(e->th);
    engine_free(e);
}
