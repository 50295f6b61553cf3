/* backtest.c - what one rule would have done over stored history
 * (alerts.h, cw_alert_backtest): the engine's evaluation (eval.c over the
 * series of series.c) at every instant of [from, to], from a clean state
 * whose history is rebuilt from the store at the first instant, on the
 * caller's handle; nothing is written. */
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "alerts/alerts_internal.h"
#include "commitwatch/common.h"
#include "commitwatch/event.h"

#define BT_STEP (60 * CW_NS_PER_S)
#define BT_MAX_EVALS 1000000 /* a year at 30 s: a bound on one request's work */

typedef struct bt {
    cw_backtest_t *b;
    size_t cap;
    cw__strtab_t keys; /* series key -> index in b->series */
} bt_t;

static int record(bt_t *bt, const cw__astate_t *st, const cw_alert_transition_t *tr)
{
    cw_backtest_t *b = bt->b;
    uint32_t i = cw__strtab_get(&bt->keys, st->key);
    if (i == UINT32_MAX) return CW_ENOMEM;
    if (i == b->nseries) {
        if (CW_RESERVE(b->series, bt->cap, b->nseries + 1)) return CW_ENOMEM;
        cw_backtest_series_t *s = &b->series[b->nseries++];
        memset(s, 0, sizeof *s);
        s->key = cw_strdup(st->key);
        s->process = st->process ? cw_strdup(st->process) : NULL;
        s->tag = st->tag ? cw_strdup(st->tag) : NULL;
        s->proc = st->proc;
        s->pid = st->pid;
        if (!s->key || (st->process && !s->process) || (st->tag && !s->tag)) return CW_ENOMEM;
    }
    cw_backtest_series_t *s = &b->series[i];
    cw_alert_transition_t *v = realloc(s->tr, (s->ntr + 1) * sizeof *v);
    if (!v) return CW_ENOMEM;
    s->tr = v;
    s->tr[s->ntr++] = *tr; /* reason: static */
    return 0;
}

int cw_alert_backtest(cw_store_t *s, const cw_alert_rule_t *rule, int64_t from, int64_t to,
                      int64_t interval, cw_backtest_t **out, cw_diag_t *d)
{
    cw_alert_rules_t one = {(cw_alert_rule_t *)rule, 1, {0}};
    cw__aeval_t ev;
    cw_feed_bounds_t fb;
    bt_t bt = {0};
    int err;
    *out = NULL;
    if (interval <= 0) interval = 10 * CW_NS_PER_S;
    if (from >= to) return cw_diag_set(d, CW_EINVAL, "backtest: from must be before to");
    if ((to - from) / interval > BT_MAX_EVALS)
        return cw_diag_set(d, CW_ERANGE,
                           "backtest: [from, to) holds more than %d evaluations at this "
                           "interval; shorten it or use a longer interval",
                           BT_MAX_EVALS);
    /* One read transaction for the whole backtest: every instant sees the
     * same snapshot (a bucket stored meanwhile cannot change the instants
     * already evaluated), and the feed of each instant does not begin and
     * end a transaction of its own (with its locks: most of a 20,000-step
     * backtest's time was that). */
    bool began;
    if ((err = cw_store_feed_begin(s, &began, d))) return err;
    if ((err = cw_store_feed_bounds(s, &fb, d))) {
        cw_store_feed_end(s, began);
        return err;
    }
    if (!(bt.b = calloc(1, sizeof *bt.b)) || cw__aeval_init(&ev, &one, BT_STEP)) {
        free(bt.b);
        cw_store_feed_end(s, began);
        return cw_diag_set(d, CW_ENOMEM, "backtest: out of memory");
    }
    if ((err = cw__aeval_limit_from(&ev, s, d))) {
        cw__aeval_free(&ev);
        free(bt.b);
        cw_store_feed_end(s, began);
        return err;
    }
    int64_t limit = fb.ended ? fb.data_end_ns : fb.stored_end_ns;
    if (to < limit) limit = to;
    bt.b->from_ns = from;
    bt.b->to_ns = to;
    bt.b->interval_ns = interval;
    for (int64_t T = cw_floor_to(from, interval) + interval; !err && T <= limit; T += interval) {
        if ((err = cw__aset_feed(&ev.set, s, T, d))) break;
        if ((err = cw__aeval_run(&ev, T))) {
            cw_diag_set(d, err, "backtest: out of memory");
            break;
        }
        bt.b->evaluations++;
        for (size_t i = 0; !err && i < ev.ntr; i++)
            err = record(&bt, &ev.r[0].st[ev.tr[i].state], &ev.tr[i].tr);
        if (err) cw_diag_set(d, err, "backtest: out of memory");
        cw__aeval_compact(&ev);
    }
    cw_store_feed_end(s, began);
    cw__aeval_free(&ev);
    cw__strtab_free(&bt.keys);
    if (err) {
        cw_backtest_free(bt.b);
        return err;
    }
    *out = bt.b;
    return 0;
}

/* What a series of the result owns. */
static const size_t series_owned[] = {
    offsetof(cw_backtest_series_t, key), offsetof(cw_backtest_series_t, process),
    offsetof(cw_backtest_series_t, tag), offsetof(cw_backtest_series_t, tr)};

void cw_backtest_free(cw_backtest_t *b)
{
    if (!b) return;
    cw_free_rows(b->series, b->nseries, sizeof *b->series, series_owned,
                 CW_ARRAY_LEN(series_owned));
    free(b);
}
