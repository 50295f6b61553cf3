/* test_alert_eval.c - the alert state machine (every transition of
 * cw__sm_step), severities with hysteresis, the evaluator over a series
 * set built by hand (grouping, metrics, warm-up and floors, exits),
 * silences' matchers and their regex dialect, and notices (labels sorted,
 * fingerprint, summary template). */
#include <math.h>
#include <stdbool.h>
#include <stdint.h>

#include "alerts/alerts_internal.h"
#include "commitwatch/event.h"
#include "test.h"

#define S INT64_C(1000000000)
#define MIN (60 * S)
#define NEVER CW_TS_NEVER
#define MiB (1024.0 * 1024.0)

static cw_alert_rule_t rule(double warn, double crit, int64_t for_ns, int64_t keep_ns, double clear)
{
    cw_alert_rule_t r = {0};
    r.name = "r";
    r.file = "test";
    r.text = "[rule r]";
    r.metric = CW_AM_OUTSTANDING;
    r.window_ns = 10 * MIN;
    r.has_warn = !isnan(warn);
    r.has_crit = !isnan(crit);
    r.warn = warn;
    r.crit = crit;
    r.for_ns = for_ns;
    r.keep_firing_for_ns = keep_ns;
    r.clear = clear;
    return r;
}

static cw__sm_t fresh(void)
{
    return (cw__sm_t){CW_AS_INACTIVE, CW_SEV_NONE, NEVER, NEVER, NEVER};
}

/* Steps sm at ts with sev; checks whether it moved and to what. */
static void step(cw__sm_t *sm, int64_t for_ns, int64_t keep, int64_t ts, cw_alert_severity_t sev,
                 const char *gone, bool moves, cw_alert_state_t to, const char *reason)
{
    cw_alert_transition_t tr;
    bool m = cw__sm_step(sm, for_ns, keep, ts, sev, gone, &tr);
    ASSERT_EQ(m, moves);
    if (m) {
        ASSERT_EQ(tr.to, to);
        ASSERT_STR_EQ(tr.reason, reason);
        ASSERT_EQ(tr.ts_ns, ts);
    }
    ASSERT_EQ(sm->state, to);
}

static void test_state_machine(void)
{
    const cw_alert_severity_t W = CW_SEV_WARNING, C = CW_SEV_CRITICAL, N = CW_SEV_NONE;
    const cw_alert_state_t I = CW_AS_INACTIVE, P = CW_AS_PENDING, F = CW_AS_FIRING;
    cw__sm_t sm = fresh();
    /* inactive stays inactive while false */
    step(&sm, MIN, 0, 0, N, NULL, false, I, NULL);
    /* for > 0: pending, then firing once `for` has elapsed (not before) */
    step(&sm, MIN, 0, 10 * S, W, NULL, true, P, "condition");
    ASSERT_EQ(sm.active_since, 10 * S);
    step(&sm, MIN, 0, 60 * S, W, NULL, false, P, NULL);
    step(&sm, MIN, 0, 70 * S, C, NULL, true, F, "for elapsed");
    ASSERT_EQ(sm.firing_since, 70 * S);
    ASSERT_EQ(sm.severity, C);
    /* severity falls, rises, with transitions */
    step(&sm, MIN, 0, 80 * S, W, NULL, true, F, "severity fell");
    step(&sm, MIN, 0, 90 * S, C, NULL, true, F, "severity rose");
    step(&sm, MIN, 0, 100 * S, C, NULL, false, F, NULL);
    /* keep_firing_for = 0: resolves at the first false */
    step(&sm, MIN, 0, 110 * S, N, NULL, true, I, "resolved");
    ASSERT_EQ(sm.active_since, NEVER);
    /* pending -> inactive when false */
    step(&sm, MIN, 0, 120 * S, W, NULL, true, P, "condition");
    step(&sm, MIN, 0, 130 * S, N, NULL, true, I, "condition false");
    /* for = 0 fires at once */
    step(&sm, 0, 0, 140 * S, W, NULL, true, F, "condition");
    ASSERT_EQ(sm.firing_since, 140 * S);
    /* keep_firing_for: a dip shorter than it does not resolve ... */
    sm = fresh();
    step(&sm, 0, 30 * S, 0, W, NULL, true, F, "condition");
    step(&sm, 0, 30 * S, 10 * S, N, NULL, false, F, NULL);
    ASSERT_EQ(sm.false_since, 10 * S);
    step(&sm, 0, 30 * S, 20 * S, N, NULL, false, F, NULL);
    step(&sm, 0, 30 * S, 30 * S, W, NULL, false, F, NULL);
    ASSERT_EQ(sm.false_since, NEVER);
    /* ... one as long as it does */
    step(&sm, 0, 30 * S, 40 * S, N, NULL, false, F, NULL);
    step(&sm, 0, 30 * S, 60 * S, N, NULL, false, F, NULL);
    step(&sm, 0, 30 * S, 70 * S, N, NULL, true, I, "resolved");
    /* gone: firing and pending resolve with the reason; inactive does not move */
    sm = fresh();
    step(&sm, 0, 0, 0, C, NULL, true, F, "condition");
    cw_alert_transition_t tr;
    ASSERT_TRUE(cw__sm_step(&sm, 0, 0, 10 * S, C, "process exited", &tr));
    ASSERT_EQ(tr.from, F);
    ASSERT_EQ(tr.to, I);
    ASSERT_EQ(tr.severity, C); /* the last severity */
    ASSERT_STR_EQ(tr.reason, "process exited");
    step(&sm, 0, 0, 20 * S, N, "process exited", false, I, NULL);
    sm = fresh();
    step(&sm, MIN, 0, 0, W, NULL, true, P, "condition");
    step(&sm, MIN, 0, 10 * S, W, "tracking ended", true, I, "tracking ended");
    /* a pending series keeps its clock across evaluations (restart: the
     * state is restored as stored) */
    sm = (cw__sm_t){P, W, 0, NEVER, NEVER};
    step(&sm, 5 * MIN, 0, 4 * MIN, W, NULL, false, P, NULL);
    step(&sm, 5 * MIN, 0, 5 * MIN, W, NULL, true, F, "for elapsed");
}

static void test_severity(void)
{
    cw_alert_rule_t r = rule(100, 200, 0, 0, 0.8);
    ASSERT_EQ(cw__alert_severity(&r, 50, CW_SEV_NONE), CW_SEV_NONE);
    ASSERT_EQ(cw__alert_severity(&r, 100, CW_SEV_NONE), CW_SEV_WARNING);
    ASSERT_EQ(cw__alert_severity(&r, 250, CW_SEV_NONE), CW_SEV_CRITICAL); /* rises at once */
    /* falls only below clear x threshold */
    ASSERT_EQ(cw__alert_severity(&r, 170, CW_SEV_CRITICAL), CW_SEV_CRITICAL);
    ASSERT_EQ(cw__alert_severity(&r, 150, CW_SEV_CRITICAL), CW_SEV_WARNING);
    ASSERT_EQ(cw__alert_severity(&r, 85, CW_SEV_WARNING), CW_SEV_WARNING);
    ASSERT_EQ(cw__alert_severity(&r, 79, CW_SEV_WARNING), CW_SEV_NONE);
    ASSERT_EQ(cw__alert_severity(&r, 79, CW_SEV_CRITICAL), CW_SEV_NONE);
    ASSERT_EQ(cw__alert_severity(&r, NAN, CW_SEV_CRITICAL), CW_SEV_NONE);
    /* below rules (time to limit "< 48h"): the mirror image */
    cw_alert_rule_t b = rule(48 * 3600.0, 6 * 3600.0, 0, 0, 0.5);
    b.below = true;
    ASSERT_EQ(cw__alert_severity(&b, 100 * 3600.0, CW_SEV_NONE), CW_SEV_NONE);
    ASSERT_EQ(cw__alert_severity(&b, 40 * 3600.0, CW_SEV_NONE), CW_SEV_WARNING);
    ASSERT_EQ(cw__alert_severity(&b, 3600.0, CW_SEV_NONE), CW_SEV_CRITICAL);
    ASSERT_EQ(cw__alert_severity(&b, 90 * 3600.0, CW_SEV_WARNING), CW_SEV_WARNING);
    ASSERT_EQ(cw__alert_severity(&b, 97 * 3600.0, CW_SEV_WARNING), CW_SEV_NONE);
    ASSERT_EQ(cw__alert_severity(&b, 10 * 3600.0, CW_SEV_CRITICAL), CW_SEV_CRITICAL);
    ASSERT_EQ(cw__alert_severity(&b, 13 * 3600.0, CW_SEV_CRITICAL), CW_SEV_WARNING);
    /* only a critical threshold */
    cw_alert_rule_t c = rule(NAN, 10, 0, 0, 1);
    ASSERT_EQ(cw__alert_severity(&c, 9, CW_SEV_NONE), CW_SEV_NONE);
    ASSERT_EQ(cw__alert_severity(&c, 11, CW_SEV_NONE), CW_SEV_CRITICAL);
    ASSERT_TRUE(isnan(cw__alert_threshold(&c, CW_SEV_WARNING)));
}

/* An oscillating value around the threshold with hysteresis: one firing,
 * one resolve. */
static void test_oscillation(void)
{
    cw_alert_rule_t r = rule(100, NAN, 0, 0, 0.7);
    cw__sm_t sm = fresh();
    int fired = 0, resolved = 0;
    for (int i = 0; i < 200; i++) {
        double v = i < 100 ? 100 + 15 * sin(i / 3.0) : 40; /* 85..115, then far below */
        cw_alert_transition_t tr;
        if (cw__sm_step(&sm, 0, 0, i * 10 * S, cw__alert_severity(&r, v, sm.severity), NULL,
                        &tr)) {
            fired += tr.to == CW_AS_FIRING;
            resolved += tr.to == CW_AS_INACTIVE;
        }
    }
    ASSERT_EQ(fired, 1);
    ASSERT_EQ(resolved, 1);
}

/* ---- the evaluator over a hand-made set ---------------------------------- */

static uint32_t add_proc(cw__aset_t *a, uint32_t id, uint32_t pid, const char *name, int64_t start)
{
    int added;
    uint32_t i = cw_keymap_get(&a->procmap, id, 0, &added);
    ASSERT_TRUE(added);
    ASSERT_OK(CW_RESERVE(a->procs, a->proccap, a->nprocs + 1));
    a->procs[a->nprocs++] =
        (cw__aproc_t){id, pid, start, NEVER, NEVER, cw__strtab_get(&a->names, name), false};
    if (id > a->max_proc_id) a->max_proc_id = id;
    return i;
}

/* A base whose outstanding grows by `per_step` bytes each step from
 * `from` to a->head, all of it staying (remaining). */
static cw__abase_t *add_base(cw__aset_t *a, uint32_t pi, const char *tag, int64_t from,
                             int64_t per_step)
{
    int added;
    uint32_t t = cw__strtab_get(&a->tags, tag);
    uint32_t bi = cw_keymap_get(&a->basemap, a->procs[pi].id, t, &added);
    ASSERT_TRUE(added);
    ASSERT_OK(CW_RESERVE(a->bases, a->basecap, a->nbases + 1));
    cw__abase_t *b = &a->bases[bi];
    a->nbases++;
    /* Every step to the head explicit, the ring whole (cap = len), wide. */
    *b = (cw__abase_t){pi, t, 0, from, a->head, a->len, true, calloc(a->len, sizeof(cw__slot_t))};
    for (int64_t k = from; k <= a->head; k++) {
        cw__slot_t *s = (cw__slot_t *)b->ring + (uint64_t)k % a->len;
        b->cur += per_step;
        s->committed = s->rem = (uint32_t)(per_step >> CW__UNIT_SHIFT);
        s->commits = s->rem_commits = 1;
        s->out = (uint32_t)(b->cur >> CW__UNIT_SHIFT);
    }
    return b;
}

static void test_evaluator(void)
{
    cw_alert_rule_t rs[3];
    rs[0] = rule(10 * MiB, NAN, 0, 0, 1); /* outstanding per instance and tag */
    rs[0].name = "inst";
    rs[1] = rule(30 * MiB, NAN, 0, 0, 1); /* summed over tags, by name */
    rs[1].name = "byname";
    rs[1].group_by = CW_AG_NAME;
    rs[1].tags_summed = true;
    rs[2] = rule(60 * MiB, NAN, 0, 0, 1); /* impacting rate, machine, warm-up */
    rs[2].name = "machine";
    rs[2].metric = CW_AM_IMPACTING_RATE;
    rs[2].group_by = CW_AG_MACHINE;
    rs[2].tags_summed = true;
    rs[2].warmup_ns = 30 * MIN;
    char *globs[] = {"app*", "!appx"};
    rs[0].process = globs;
    rs[0].nprocess = 2;
    cw_alert_rules_t set = {rs, 3, {0}};
    cw__aeval_t e;
    ASSERT_OK(cw__aeval_init(&e, &set, MIN));
    cw__aset_t *a = &e.set;
    int64_t T = 100 * MIN + 30 * S; /* the step holding T - 1 is 100 */
    a->head = 100;
    a->fed_to = T;
    uint32_t p1 = add_proc(a, 1, 11, "app", 0);
    uint32_t p2 = add_proc(a, 2, 22, "app", 0);
    uint32_t p3 = add_proc(a, 3, 33, "appx", 80 * MIN);
    /* p1 Heap: 1 MiB per step over 11 steps -> 11 MiB; p1 Other 0.5 MiB/step;
     * p2 Heap 1 MiB/step; p3 (excluded from "inst") 2 MiB/step */
    add_base(a, p1, "Heap", 90, 1 << 20);
    add_base(a, p1, "Other", 90, 1 << 19);
    add_base(a, p2, "Heap", 95, 1 << 20);
    add_base(a, p3, "Heap", 95, 2 << 20);
    ASSERT_OK(cw__aeval_run(&e, T));
    /* inst: p1|Heap at 11 MiB fires (for = 0), p1|Other 5.5 MiB and p2|Heap
     * 6 MiB do not, p3 is excluded by "!appx" */
    ASSERT_EQ(e.r[0].n, 1);
    ASSERT_STR_EQ(e.r[0].st[0].key, "instance:1|Heap");
    ASSERT_EQ(e.r[0].st[0].sm.state, CW_AS_FIRING);
    ASSERT_EQ(e.r[0].st[0].pid, 11);
    ASSERT_TRUE(fabs(e.r[0].st[0].value - 11 * MiB) < 1);
    /* byname: app = 11 + 5.5 + 6 = 22.5 MiB < 30; appx 12 MiB < 30 */
    ASSERT_EQ(e.r[1].n, 0);
    /* machine: p3 started 20.5 min before T, p1 and p2 long before: warm.
     * Window of 10 steps [91, 100], the last step half done (T - S = 9.5
     * min): impacting 10+5+6+12 = 33 MiB over 9.5 min = 208 MiB/h */
    ASSERT_EQ(e.r[2].n, 1);
    ASSERT_STR_EQ(e.r[2].st[0].key, "machine|*");
    ASSERT_TRUE(fabs(e.r[2].st[0].value - 33 * MiB * 60 / 9.5) < 1);
    ASSERT_TRUE(e.r[2].st[0].process == NULL);
    ASSERT_EQ(e.ntr, 2);
    /* the leak score is computed for active series only (and their
     * transitions), never for the quiet ones */
    ASSERT_TRUE(e.r[0].st[0].has_ls);
    cw__aeval_compact(&e);
    /* p1 exits: its instance series resolves "process exited" with its
     * last figures */
    a->procs[p1].exit = T + 5 * S;
    ASSERT_OK(cw__aeval_run(&e, T + 10 * S));
    bool exited = false;
    for (size_t i = 0; i < e.ntr; i++)
        if (e.tr[i].rule == 0) {
            ASSERT_STR_EQ(e.tr[i].tr.reason, "process exited");
            ASSERT_TRUE(fabs(e.tr[i].tr.value - 11 * MiB) < 1);
            exited = true;
        }
    ASSERT_TRUE(exited);
    cw__aeval_compact(&e);
    ASSERT_EQ(e.r[0].n, 0);
    /* a rule with a warm-up longer than the process's age stays quiet */
    cw__aeval_free(&e);
    rs[2].warmup_ns = 200 * MIN;
    ASSERT_OK(cw__aeval_init(&e, &set, MIN));
    a = &e.set;
    a->head = 100;
    add_base(a, add_proc(a, 1, 11, "app", 0), "Heap", 95, 64 << 20);
    ASSERT_OK(cw__aeval_run(&e, T));
    ASSERT_EQ(e.r[2].n, 0);
    /* min_outstanding and min_impacting_rate as extra conditions */
    cw__aeval_free(&e);
    rs[0].min_outstanding = 1ull << 40;
    ASSERT_OK(cw__aeval_init(&e, &set, MIN));
    a = &e.set;
    a->head = 100;
    add_base(a, add_proc(a, 1, 11, "app", 0), "Heap", 90, 1 << 20);
    ASSERT_OK(cw__aeval_run(&e, T));
    ASSERT_EQ(e.r[0].n, 0);
    cw__aeval_free(&e);
}

/* A time-to-limit rule against the machine's limit over recorded data
 * (cw__aeval_t.limit_from, from the database's meta commit_limit): the
 * recorded machine's limit with used = the series' outstanding, or no
 * value at all when the input did not tell it; never this machine's. */
static void test_recorded_limit(void)
{
    cw_alert_rule_t r = rule(24 * 3600.0, NAN, 0, 0, 1);
    r.name = "limit";
    r.metric = CW_AM_TIME_TO_LIMIT;
    r.below = true;
    r.group_by = CW_AG_MACHINE;
    r.tags_summed = true;
    r.limit_kind = CW_AL_MACHINE;
    r.window_ns = 60 * MIN;
    cw_alert_rules_t set = {&r, 1, {0}};
    int64_t T = 100 * MIN; /* steps 40..99 are the window */
    for (int from = 1; from <= 2; from++) {
        cw__aeval_t e;
        ASSERT_OK(cw__aeval_init(&e, &set, MIN));
        e.limit_from = from; /* 1 recorded, 2 none */
        e.recorded = 100ull << 30;
        cw__aset_t *a = &e.set;
        a->head = 99;
        a->fed_to = T;
        /* 1 GiB a minute for 60 minutes: 60 GiB at T, 60 GiB/h */
        add_base(a, add_proc(a, 1, 11, "app", 0), "Heap", 40, 1 << 30);
        ASSERT_OK(cw__aeval_run(&e, T));
        if (from == 1) {
            /* (100 - 60) GiB at 60 GiB/h: 40 min */
            ASSERT_EQ(e.r[0].n, 1);
            ASSERT_TRUE(fabs(e.r[0].st[0].value - 40 * 60.0) < 1);
            ASSERT_EQ(e.r[0].st[0].sm.state, CW_AS_FIRING);
        } else {
            ASSERT_EQ(e.r[0].n, 0); /* no value: no series */
        }
        cw__aeval_free(&e);
    }
}

/* ---- silences and notices ------------------------------------------------- */

static void test_regex(void)
{
    ASSERT_TRUE(cw__regex_match("abc", "abc"));
    ASSERT_TRUE(!cw__regex_match("abc", "abcd")); /* anchored */
    ASSERT_TRUE(cw__regex_match("a.*", "abcd"));
    ASSERT_TRUE(cw__regex_match("a.*d", "abcd"));
    ASSERT_TRUE(!cw__regex_match("a.*e", "abcd"));
    ASSERT_TRUE(cw__regex_match("svc(host|x)\\.exe", "svchost.exe"));
    ASSERT_TRUE(cw__regex_match("svc(host|x)\\.exe", "svcx.exe"));
    ASSERT_TRUE(!cw__regex_match("svc(host|x)\\.exe", "svcy.exe"));
    ASSERT_TRUE(cw__regex_match("[a-c]+[0-9]?", "abcab7"));
    ASSERT_TRUE(!cw__regex_match("[^a-c]+", "abd"));
    ASSERT_TRUE(cw__regex_match("warning|critical", "critical"));
    ASSERT_TRUE(cw__regex_match("x?y+", "yyy"));
    ASSERT_TRUE(!cw__regex_match("(ab)*", "abab")); /* outside the dialect: no match */
    ASSERT_TRUE(!cw__regex_match("[abc", "a"));
}

static void test_silence(void)
{
    cw__silence_t s;
    cw_alert_label_t lab[] = {{"alertname", "leak"}, {"process", "svchost.exe"}, {"tag", "Heap"}};
    ASSERT_OK(cw__silence_parse("[{\"name\":\"process\",\"value\":\"svc.*\",\"isRegex\":true},"
                                "{\"name\":\"tag\",\"value\":\"Heap\",\"isRegex\":false}]",
                                &s));
    ASSERT_TRUE(cw__silence_match(&s, lab, 3));
    lab[2].value = "Other";
    ASSERT_TRUE(!cw__silence_match(&s, lab, 3));
    cw__silence_free(&s);
    ASSERT_OK(cw__silence_parse(
        "[{\"name\":\"tag\",\"value\":\"Heap\",\"isRegex\":false,\"isEqual\":false}]", &s));
    ASSERT_TRUE(cw__silence_match(&s, lab, 3)); /* tag != Heap */
    cw__silence_free(&s);
    ASSERT_OK(cw__silence_parse("[{\"name\":\"pid\",\"value\":\"\"}]", &s));
    ASSERT_TRUE(cw__silence_match(&s, lab, 3)); /* a missing label is "" */
    cw__silence_free(&s);
    ASSERT_EQ(cw__silence_parse("{}", &s), CW_EINVAL);
    ASSERT_EQ(cw__silence_parse("[{\"name\":1}]", &s), CW_EINVAL);
    ASSERT_EQ(cw__silence_parse("[]", &s), CW_EINVAL);
}

static void test_notice(void)
{
    cw_alert_rule_t r = rule(100, 200, 0, 0, 1);
    cw_alert_label_t rl[] = {{"team", "mem"}, {"alertname", "ignored"}};
    r.name = "growth";
    r.labels = rl;
    r.nlabels = 2;
    r.summary = "{process} ({pid}) {tag}: {value} > {threshold}";
    cw__astate_t st = {0};
    st.key = "instance:4|Heap";
    st.process = "app.exe";
    st.tag = "Heap";
    st.pid = 42;
    st.row_id = 7;
    st.sm = (cw__sm_t){CW_AS_FIRING, CW_SEV_CRITICAL, 5 * S, 6 * S, NEVER};
    st.value = 250;
    st.threshold = 200;
    st.leak = NAN;
    st.ttl = NAN;
    cw__notices_t ns = {0};
    cw_alert_transition_t tr = {6 * S, CW_AS_PENDING, CW_AS_FIRING, CW_SEV_CRITICAL, 250, 200,
                                0.81, NAN, "for elapsed"};
    ASSERT_OK(cw__notices_add(&ns, &r, &st, &tr, 9, 6 * S, "http://h:1"));
    ASSERT_OK(cw__notices_add(&ns, &r, &st, NULL, 0, 66 * S, NULL));
    ASSERT_EQ(ns.n, 2);
    const cw_alert_notice_t *n = &ns.v[0];
    static const char *const names[] = {"alertname", "pid", "process", "severity", "tag",
                                        "team"};
    static const char *const values[] = {"growth", "42", "app.exe", "critical", "Heap", "mem"};
    ASSERT_EQ(n->nlabels, 6);
    for (size_t i = 0; i < 6; i++) {
        ASSERT_STR_EQ(n->labels[i].name, names[i]);
        ASSERT_STR_EQ(n->labels[i].value, values[i]);
    }
    char fp[17];
    cw_alert_fingerprint(n->labels, n->nlabels, fp);
    ASSERT_STR_EQ(n->fingerprint, fp);
    ASSERT_EQ(n->transition_id, 9);
    ASSERT_EQ(n->series_id, 7);
    ASSERT_EQ(n->starts_ns, 6 * S);
    ASSERT_EQ(n->ends_ns, 0);
    ASSERT_TRUE(!n->resolved && !n->resend);
    ASSERT_STR_EQ(n->generator_url, "http://h:1/#/alerts/7");
    const char *summary = NULL;
    for (size_t i = 0; i < n->nannotations; i++)
        if (strcmp(n->annotations[i].name, "summary") == 0) summary = n->annotations[i].value;
    ASSERT_STR_EQ(summary, "app.exe (42) Heap: 250 B > 200 B");
    ASSERT_TRUE(ns.v[1].resend && ns.v[1].transition_id == 0 && !ns.v[1].generator_url);
    cw__notices_clear(&ns);
    /* a resolve carries endsAt */
    tr = (cw_alert_transition_t){9 * S, CW_AS_FIRING, CW_AS_INACTIVE, CW_SEV_WARNING, 1, 100,
                                 NAN, NAN, "resolved"};
    ASSERT_OK(cw__notices_add(&ns, &r, &st, &tr, 10, 9 * S, NULL));
    ASSERT_TRUE(ns.v[0].resolved);
    ASSERT_EQ(ns.v[0].ends_ns, 9 * S);
    cw__notices_free(&ns);
}

int main(void)
{
    test_state_machine();
    test_severity();
    test_oscillation();
    test_evaluator();
    test_recorded_limit();
    test_regex();
    test_silence();
    test_notice();
    TEST_DONE();
}
