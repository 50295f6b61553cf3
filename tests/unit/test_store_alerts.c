/* test_store_alerts.c - the alert tables (alertdb.h, store_alerts.c) on a
 * real SQLite file, written through one read-write handle (as the engine
 * and the API's silences do) and read through a read-only handle opened
 * at the same time (as an HTTP worker does):
 *
 * - a save inserts series and transitions (ids assigned, transitions bound
 *   to their rows), updates by id, re-uses the row of a (rule, key) seen
 *   before, and advances alert_evaluated_ns and the evaluation count;
 * - a save that fails stores nothing and leaves the ids as they were;
 * - NULLs round-trip (CW_TS_NEVER, NAN, proc/pid 0, NULL strings);
 * - the active rows, the listing's filters (state, exact state, severity,
 *   rule, process glob, tag, limit) and its order, one row, transitions
 *   by series and window, newest first;
 * - rules set/get; silences added, listed (all, active at an instant),
 *   expired (twice, unknown id);
 * - cw_store_open_side: a missing file is CW_ENOENT, a text file
 *   CW_ENOTDB; it leaves the tier state and the retention the writer set,
 *   and writes what a reader sees;
 * - a save waits for the write lock past the busy timeout (another
 *   connection holding it), where another statement gives up. */
#include <inttypes.h>
#include <math.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdint.h>

#include "commitwatch/alertdb.h"
#include "commitwatch/event.h"
#include "commitwatch/platform.h"
#include "commitwatch/store.h"
#include "store/store_internal.h"
#include "test.h"
#include "test_port.h"

#define S INT64_C(1000000000)

static char dir[256];

static cw_alert_row_t series(char *rule, char *key, char *process, uint32_t proc, char *tag,
                             int state, int severity, int64_t since, double value)
{
    return (cw_alert_row_t){.rule = rule,
                            .rule_hash = "h1",
                            .key = key,
                            .process = process,
                            .proc = proc,
                            .pid = proc ? 1000 + proc : 0,
                            .tag = tag,
                            .state = state,
                            .severity = severity,
                            .active_since = since,
                            .firing_since = state == 2 ? since + 60 * S : CW_TS_NEVER,
                            .false_since = CW_TS_NEVER,
                            .last_sent_ns = INT64_MIN, /* "none" either way */
                            .value = value,
                            .threshold = 50.0 * 1048576,
                            .leak_score = state == 2 ? 0.9 : NAN,
                            .ttl_s = state == 2 ? 7200.0 : INFINITY,
                            .detail = state == 2 ? "{\"slope\":1}" : NULL,
                            .updated_ns = since + 120 * S};
}

static cw_alert_tr_row_t transition(int64_t ts, int from, int to, int sev, const char *reason)
{
    return (cw_alert_tr_row_t){.ts_ns = ts,
                               .from_state = from,
                               .to_state = to,
                               .severity = sev,
                               .value = 1.5,
                               .threshold = 1.0,
                               .leak_score = NAN,
                               .ttl_s = 3600.0,
                               .reason = (char *)reason,
                               .silenced = to == 2 && sev == 1};
}

static void test_state(cw_store_t *w, cw_store_t *r)
{
    cw_diag_t d = {{0}};
    int64_t t0 = INT64_C(1800000000) * S, ev = 0;
    uint64_t nev = 99;

    ASSERT_OK(cw_store_alert_evaluated(r, &ev, &d));
    ASSERT_TRUE(ev == CW_TS_NEVER);
    ASSERT_OK(cw_store_alert_evaluations(r, &nev, &d));
    ASSERT_U64_EQ(nev, 0);

    /* One evaluation: three new series, four transitions. */
    cw_alert_row_t rows[3] = {
        series("leak", "instance:7|Heap", "app.exe", 7, "Heap", 2, 2, t0, 100.0),
        series("leak", "instance:8|Other", "db.exe", 8, "Other", 1, 0, t0 + S, 20.0),
        series("ttl", "machine|*", NULL, 0, NULL, 2, 1, t0 + 2 * S, 3000.0),
    };
    cw_alert_tr_row_t tr[4] = {
        transition(t0, 0, 1, 0, "condition"),
        transition(t0 + 60 * S, 1, 2, 2, "for elapsed"),
        transition(t0 + S, 0, 1, 0, "condition"),
        transition(t0 + 2 * S, 0, 2, 1, "condition"),
    };
    size_t tr_row[4] = {0, 0, 1, 2};
    ASSERT_OK(cw_store_alert_save(w, rows, 3, tr, tr_row, 4, t0 + 120 * S, &d));
    ASSERT_TRUE(rows[0].id > 0 && rows[1].id > rows[0].id && rows[2].id > rows[1].id);
    ASSERT_EQ(tr[0].series, rows[0].id);
    ASSERT_EQ(tr[1].series, rows[0].id);
    ASSERT_EQ(tr[2].series, rows[1].id);
    ASSERT_EQ(tr[3].series, rows[2].id);
    ASSERT_TRUE(tr[0].id > 0 && tr[3].id > tr[2].id);

    /* The reader sees the writer's committed evaluation. */
    ASSERT_OK(cw_store_alert_evaluated(r, &ev, &d));
    ASSERT_EQ(ev, t0 + 120 * S);
    ASSERT_OK(cw_store_alert_evaluations(r, &nev, &d));
    ASSERT_U64_EQ(nev, 1);

    cw_alert_row_t *v = NULL;
    size_t n = 0;
    ASSERT_OK(cw_store_alert_active(r, &v, &n, &d));
    ASSERT_EQ(n, 3);
    ASSERT_STR_EQ(v[0].rule, "leak");
    ASSERT_STR_EQ(v[0].key, "instance:7|Heap");
    ASSERT_STR_EQ(v[0].process, "app.exe");
    ASSERT_STR_EQ(v[0].rule_hash, "h1");
    ASSERT_EQ(v[0].proc, 7);
    ASSERT_EQ(v[0].pid, 1007);
    ASSERT_EQ(v[0].active_since, t0);
    ASSERT_EQ(v[0].firing_since, t0 + 60 * S);
    ASSERT_TRUE(v[0].false_since == CW_TS_NEVER && v[0].last_sent_ns == CW_TS_NEVER);
    ASSERT_TRUE(v[0].leak_score == 0.9 && v[0].value == 100.0);
    ASSERT_STR_EQ(v[0].detail, "{\"slope\":1}");
    ASSERT_TRUE(isnan(v[1].leak_score) && isinf(v[1].ttl_s) && v[1].detail == NULL);
    ASSERT_TRUE(v[2].process == NULL && v[2].tag == NULL && v[2].proc == 0 && v[2].pid == 0);
    cw_alert_rows_free(v, n);

    /* The listing: firing first, then severity; filters. */
    cw_alert_filter_t f = {.min_state = 1, .severity = -1};
    ASSERT_OK(cw_store_alerts(r, &f, &v, &n, &d));
    ASSERT_EQ(n, 3);
    ASSERT_EQ(v[0].id, rows[0].id); /* firing, critical */
    ASSERT_EQ(v[1].id, rows[2].id); /* firing, warning */
    ASSERT_EQ(v[2].id, rows[1].id); /* pending */
    cw_alert_rows_free(v, n);
    f = (cw_alert_filter_t){.min_state = 1, .state_exact = true, .severity = -1};
    ASSERT_OK(cw_store_alerts(r, &f, &v, &n, &d));
    ASSERT_EQ(n, 1);
    ASSERT_EQ(v[0].id, rows[1].id);
    cw_alert_rows_free(v, n);
    f = (cw_alert_filter_t){.min_state = 1, .severity = 1};
    ASSERT_OK(cw_store_alerts(r, &f, &v, &n, &d));
    ASSERT_EQ(n, 1);
    ASSERT_STR_EQ(v[0].rule, "ttl");
    cw_alert_rows_free(v, n);
    f = (cw_alert_filter_t){.min_state = 1, .severity = -1, .rule = "leak", .process = "*.exe"};
    ASSERT_OK(cw_store_alerts(r, &f, &v, &n, &d));
    ASSERT_EQ(n, 2);
    cw_alert_rows_free(v, n);
    f = (cw_alert_filter_t){.min_state = 1, .severity = -1, .process = "d[a-c]*"};
    ASSERT_OK(cw_store_alerts(r, &f, &v, &n, &d));
    ASSERT_EQ(n, 1);
    ASSERT_STR_EQ(v[0].process, "db.exe");
    cw_alert_rows_free(v, n);
    f = (cw_alert_filter_t){.min_state = 1, .severity = -1, .tag = "Heap", .limit = 5};
    ASSERT_OK(cw_store_alerts(r, &f, &v, &n, &d));
    ASSERT_EQ(n, 1);
    ASSERT_STR_EQ(v[0].tag, "Heap");
    cw_alert_rows_free(v, n);
    f = (cw_alert_filter_t){.min_state = 0, .severity = -1, .limit = 2};
    ASSERT_OK(cw_store_alerts(r, &f, &v, &n, &d));
    ASSERT_EQ(n, 2);
    cw_alert_rows_free(v, n);
    f = (cw_alert_filter_t){.min_state = 1, .severity = -1, .rule = "nope"};
    ASSERT_OK(cw_store_alerts(r, &f, &v, &n, &d));
    ASSERT_EQ(n, 0);
    cw_alert_rows_free(v, n);

    /* Next evaluation: db.exe's series goes inactive (update by id), the
     * machine's resolves; then the inactive one becomes active again with
     * id 0 (the engine forgot it): it gets its old row back. */
    cw_alert_row_t upd = rows[1];
    upd.state = 0;
    upd.active_since = CW_TS_NEVER;
    upd.updated_ns = t0 + 130 * S;
    cw_alert_tr_row_t tr2 = transition(t0 + 130 * S, 1, 0, 0, "condition false");
    tr2.series = rows[1].id;
    ASSERT_OK(cw_store_alert_save(w, &upd, 1, &tr2, NULL, 1, t0 + 130 * S, &d));
    ASSERT_EQ(upd.id, rows[1].id);
    ASSERT_OK(cw_store_alert_active(r, &v, &n, &d));
    ASSERT_EQ(n, 2);
    cw_alert_rows_free(v, n);
    cw_alert_row_t again = series("leak", "instance:8|Other", "db.exe", 8, "Other", 1, 0,
                                  t0 + 140 * S, 30.0);
    ASSERT_OK(cw_store_alert_save(w, &again, 1, NULL, NULL, 0, t0 + 140 * S, &d));
    ASSERT_EQ(again.id, rows[1].id);
    cw_alert_row_t one;
    ASSERT_OK(cw_store_alert_get(r, rows[1].id, &one, &d));
    ASSERT_EQ(one.state, 1);
    ASSERT_TRUE(one.value == 30.0);
    ASSERT_EQ(one.active_since, t0 + 140 * S);
    cw_alert_row_clear(&one);
    ASSERT_EQ(cw_store_alert_get(r, 999999, &one, &d), CW_ENOENT);
    ASSERT_OK(cw_store_alert_evaluations(r, &nev, &d));
    ASSERT_U64_EQ(nev, 3);

    /* A failing save (a transition naming no row) stores nothing. */
    cw_alert_row_t bad = series("leak", "instance:9|Heap", "x.exe", 9, "Heap", 1, 0, t0, 1.0);
    cw_alert_tr_row_t btr = transition(t0 + 150 * S, 0, 1, 0, "condition");
    size_t bad_row = 5;
    ASSERT_EQ(cw_store_alert_save(w, &bad, 1, &btr, &bad_row, 1, t0 + 150 * S, &d), CW_EDB);
    ASSERT_TRUE(d.msg[0] != 0);
    ASSERT_EQ(bad.id, 0);
    ASSERT_EQ(btr.series, 0);
    ASSERT_OK(cw_store_alert_evaluated(r, &ev, &d));
    ASSERT_EQ(ev, t0 + 140 * S);
    f = (cw_alert_filter_t){.min_state = 0, .severity = -1, .process = "x.exe"};
    ASSERT_OK(cw_store_alerts(r, &f, &v, &n, &d));
    ASSERT_EQ(n, 0);
    cw_alert_rows_free(v, n);

    /* Transitions: of one series, newest first; all; a window; a limit. */
    cw_alert_tr_row_t *tv = NULL;
    ASSERT_OK(cw_store_alert_transitions(r, rows[0].id, INT64_MIN, INT64_MAX, 0, &tv, &n, &d));
    ASSERT_EQ(n, 2);
    ASSERT_STR_EQ(tv[0].reason, "for elapsed");
    ASSERT_EQ(tv[0].ts_ns, t0 + 60 * S);
    ASSERT_EQ(tv[0].from_state, 1);
    ASSERT_EQ(tv[0].to_state, 2);
    ASSERT_EQ(tv[0].severity, 2);
    ASSERT_TRUE(!tv[0].silenced && tv[0].ttl_s == 3600.0 && isnan(tv[0].leak_score));
    ASSERT_STR_EQ(tv[1].reason, "condition");
    cw_alert_tr_rows_free(tv, n);
    ASSERT_OK(cw_store_alert_transitions(r, 0, INT64_MIN, INT64_MAX, 0, &tv, &n, &d));
    ASSERT_EQ(n, 5);
    ASSERT_STR_EQ(tv[0].reason, "condition false");
    ASSERT_TRUE(tv[2].silenced); /* the machine's, to firing warning */
    cw_alert_tr_rows_free(tv, n);
    ASSERT_OK(cw_store_alert_transitions(r, 0, t0 + S, t0 + 60 * S, 0, &tv, &n, &d));
    ASSERT_EQ(n, 2);
    cw_alert_tr_rows_free(tv, n);
    ASSERT_OK(cw_store_alert_transitions(r, 0, INT64_MIN, INT64_MAX, 1, &tv, &n, &d));
    ASSERT_EQ(n, 1);
    cw_alert_tr_rows_free(tv, n);
}

static void test_rules_and_silences(cw_store_t *w, cw_store_t *r)
{
    cw_diag_t d = {{0}};
    char *json = (char *)"x";
    ASSERT_OK(cw_store_alert_rules_get(r, &json, &d));
    ASSERT_TRUE(json == NULL);
    const char *rules = "[{\"name\":\"leak\",\"file\":\"a.rules\",\"line\":3,\"hash\":\"h1\","
                        "\"text\":\"[rule leak]\\nmetric = leak_score\\n\"}]";
    ASSERT_OK(cw_store_alert_rules_set(w, rules, &d));
    ASSERT_OK(cw_store_alert_rules_get(r, &json, &d));
    ASSERT_STR_EQ(json, rules);
    free(json);

    int64_t t = INT64_C(1800000000) * S;
    cw_silence_row_t a = {.matchers = "[{\"name\":\"alertname\",\"value\":\"leak\","
                                      "\"isRegex\":false,\"isEqual\":true}]",
                          .starts_ns = t,
                          .ends_ns = t + 3600 * S,
                          .created_by = "ops",
                          .comment = "deploy",
                          .created_ns = t - S};
    cw_silence_row_t b = a;
    b.starts_ns = t + 7200 * S;
    b.ends_ns = t + 9000 * S;
    b.comment = "later";
    ASSERT_OK(cw_store_silence_add(w, &a, &d));
    ASSERT_OK(cw_store_silence_add(w, &b, &d));
    ASSERT_TRUE(a.id > 0 && b.id > a.id);
    cw_silence_row_t bad = a;
    bad.comment = NULL;
    ASSERT_EQ(cw_store_silence_add(w, &bad, &d), CW_EINVAL);

    cw_silence_row_t *v = NULL;
    size_t n = 0;
    ASSERT_OK(cw_store_silences(r, CW_TS_NEVER, &v, &n, &d));
    ASSERT_EQ(n, 2);
    ASSERT_EQ(v[0].id, b.id); /* newest first */
    ASSERT_STR_EQ(v[1].comment, "deploy");
    ASSERT_STR_EQ(v[1].created_by, "ops");
    ASSERT_STR_EQ(v[1].matchers, a.matchers);
    ASSERT_EQ(v[1].starts_ns, t);
    ASSERT_EQ(v[1].ends_ns, t + 3600 * S);
    ASSERT_EQ(v[1].created_ns, t - S);
    ASSERT_TRUE(v[1].deleted_ns == CW_TS_NEVER);
    cw_silence_rows_free(v, n);
    ASSERT_OK(cw_store_silences(r, t + 60 * S, &v, &n, &d));
    ASSERT_EQ(n, 1);
    ASSERT_EQ(v[0].id, a.id);
    cw_silence_rows_free(v, n);
    ASSERT_OK(cw_store_silences(r, t + 3600 * S, &v, &n, &d)); /* ends is exclusive */
    ASSERT_EQ(n, 0);
    cw_silence_rows_free(v, n);

    /* Expired at t + 10 min: active before, not after; a second expiry
     * keeps the first instant; an unknown id is CW_ENOENT. */
    ASSERT_OK(cw_store_silence_delete(w, a.id, t + 600 * S, &d));
    ASSERT_OK(cw_store_silence_delete(w, a.id, t + 900 * S, &d));
    ASSERT_EQ(cw_store_silence_delete(w, 424242, t, &d), CW_ENOENT);
    ASSERT_OK(cw_store_silences(r, t + 300 * S, &v, &n, &d));
    ASSERT_EQ(n, 1);
    cw_silence_rows_free(v, n);
    ASSERT_OK(cw_store_silences(r, t + 700 * S, &v, &n, &d));
    ASSERT_EQ(n, 0);
    cw_silence_rows_free(v, n);
    ASSERT_OK(cw_store_silences(r, INT64_MIN, &v, &n, &d));
    ASSERT_EQ(n, 2);
    ASSERT_EQ(v[1].deleted_ns, t + 600 * S);
    cw_silence_rows_free(v, n);
}

static void test_side(const char *path, cw_store_t *r)
{
    cw_diag_t d = {{0}};
    cw_store_t *side = NULL, *w = NULL;
    char other[512];
    snprintf(other, sizeof other, "%s/missing.db", dir);
    ASSERT_EQ(cw_store_open_side(other, &side, &d), CW_ENOENT);
    snprintf(other, sizeof other, "%s/text.db", dir);
    FILE *f = fopen(other, "wb");
    for (int i = 0; i < 100; i++)
        fputs("not a database, just text\n", f);
    fclose(f);
    ASSERT_EQ(cw_store_open_side(other, &side, &d), CW_ENOTDB);

    /* A writer with its own retention; a side handle opened beside it
     * keeps it (cw_store_open would have written its defaults). */
    cw_store_opts_t o;
    cw_store_opts_default(&o);
    o.retention_ns[0] = 3 * 3600 * S;
    ASSERT_OK(cw_store_open(path, &o, &w, &d));
    ASSERT_OK(cw_store_open_side(path, &side, &d));
    cw__tier_t t[CW_TIERS];
    ASSERT_OK(cw__store_read_tiers(r, t, &d));
    ASSERT_EQ(t[0].retention, 3 * 3600 * S);
    cw_silence_row_t sl = {.matchers = "[]", .starts_ns = 1, .ends_ns = 2 * S, .created_by = "side",
                           .comment = "c", .created_ns = 1};
    ASSERT_OK(cw_store_silence_add(side, &sl, &d));
    cw_store_close(side);
    cw_silence_row_t *v = NULL;
    size_t n = 0;
    ASSERT_OK(cw_store_silences(r, S, &v, &n, &d));
    ASSERT_EQ(n, 1);
    ASSERT_STR_EQ(v[0].created_by, "side");
    cw_silence_rows_free(v, n);
    ASSERT_OK(cw__store_read_tiers(r, t, &d));
    ASSERT_EQ(t[0].retention, 3 * 3600 * S);
    cw_store_close(w);
}

/* Another connection holding the write lock, for hold_ns. */
typedef struct holder {
    const char *path;
    int64_t hold_ns;
    _Atomic bool held;
} holder_t;

static void holder_main(void *arg)
{
    holder_t *h = arg;
    cw_diag_t d = {{0}};
    cw_store_t *x = NULL;
    ASSERT_OK(cw_store_open_side(h->path, &x, &d));
    ASSERT_OK(cw__store_exec(x, "BEGIN IMMEDIATE", "holding the lock", &d));
    atomic_store(&h->held, true);
    cw_plat_sleep_ns(h->hold_ns);
    ASSERT_OK(cw__store_exec(x, "COMMIT", "letting the lock go", &d));
    cw_store_close(x);
}

/* The engine's save waits for the write lock past the busy timeout: the
 * writer's group commit of many seconds of a large load (a replay at full
 * speed, the machine loaded) held it past 5 s, and the engine skipped
 * that instant ("database is locked"). Here the busy timeout is 100 ms
 * and another connection holds the lock for 700 ms. A statement that is
 * not the save still gives up after the busy timeout. */
static void test_patience(const char *path)
{
    cw_diag_t d = {{0}};
    cw_store_t *w = NULL, *side = NULL;
    cw_thread_t *th = NULL;
    holder_t h = {path, 700 * INT64_C(1000000), false};
    ASSERT_OK(cw_store_open(path, NULL, &w, &d));
    cw_store_close(w);
    ASSERT_OK(cw_store_open_side(path, &side, &d));
    sqlite3_busy_timeout(side->db, 100);
    ASSERT_OK(cw_thread_start(&th, holder_main, &h));
    while (!atomic_load(&h.held))
        cw_plat_sleep_ns(1000000);
    cw_silence_row_t sl = {.matchers = "[]",
                           .starts_ns = 1,
                           .ends_ns = 2 * S,
                           .created_by = "t",
                           .comment = "c",
                           .created_ns = 1};
    ASSERT_TRUE(cw_store_silence_add(side, &sl, &d) != 0); /* 100 ms, then busy */
    int64_t t0 = cw_plat_mono_ns();
    if (cw_store_alert_save(side, NULL, 0, NULL, NULL, 0, 1000 * S, &d))
        CW_FAIL("a save beside a writer holding the lock: %s", d.msg);
    int64_t took = cw_plat_mono_ns() - t0;
    cw_thread_join(th);
    printf("patience: the save waited %.0f ms for a lock held 700 ms\n", (double)took / 1e6);
    ASSERT_TRUE(took > 300 * INT64_C(1000000));
    int64_t v = 0;
    ASSERT_OK(cw__store_query_int(side,
                                  "SELECT count(*) FROM meta WHERE key = "
                                  "'alert_evaluated_ns' AND value = '1000000000000'",
                                  &v, &d));
    ASSERT_EQ(v, 1);
    cw_store_close(side);
}

int main(void)
{
    char path[512];
    cw_diag_t d = {{0}};
    cw_store_t *w = NULL, *r = NULL;
    snprintf(dir, sizeof dir, "%s/cw_test_store_alerts_XXXXXX", cw_test_tmpdir());
    ASSERT_TRUE(cw_test_mkdtemp(dir) != NULL);
    snprintf(path, sizeof path, "%s/alerts.db", dir);
    ASSERT_OK(cw_store_open(path, NULL, &w, &d));
    ASSERT_OK(cw_store_open_readonly(path, &r, &d));
    test_state(w, r);
    test_rules_and_silences(w, r);
    cw_store_close(w);
    test_side(path, r);
    cw_store_close(r);
    snprintf(path, sizeof path, "%s/patience.db", dir);
    test_patience(path);
    ASSERT_EQ(cw_test_rmtree(dir), 0);
    TEST_DONE();
}
