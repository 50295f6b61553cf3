/* test_notify.c - the notifier's parts (service/notify): the Prometheus
 * fingerprint against Prometheus' own test values, times, URLs, the token
 * bucket, the repeat interval, the bodies each channel sends (parsed
 * back), the system log's entry, the record of attempts (store_notify.c),
 * and a notifier end to end on a receiver that is not there (every
 * attempt recorded, stop bounded by its timeout). The real receivers are
 * the e2e tests' (tests/e2e/test_notify_*.py). */
#include <cjson/cJSON.h>
#include <math.h>

#include "commitwatch/alertdb.h"
#include "notify/notify_internal.h"
#include "test.h"
#include "test_port.h"

#define L(n, v)                                                                                    \
    {                                                                                              \
        (char *)(n), (char *)(v)                                                                   \
    }

/* prometheus/common model/signature_test.go (TestMetricToFingerprint,
 * BenchmarkMetricToFingerprintTriple): labelSetToFingerprint, which
 * Alertmanager's webhook prints as %016x. */
static void test_fingerprint_known(void)
{
    char fp[17];
    cw_alert_fingerprint(NULL, 0, fp);
    ASSERT_U64_EQ(strtoull(fp, NULL, 16), 14695981039346656037ULL);
    cw_alert_label_t two[] = {L("name", "garland, briggs"), L("fear", "love is not enough")};
    cw_alert_fingerprint(two, 2, fp);
    ASSERT_U64_EQ(strtoull(fp, NULL, 16), 5799056148416392346ULL);
    ASSERT_STR_EQ(fp, "507a62d79ee76c9a");
    cw_alert_label_t three[] = {L("third-label", "third-label-value"),
                                L("first-label", "first-label-value"),
                                L("second-label", "second-label-value")};
    cw_alert_fingerprint(three, 3, fp);
    ASSERT_U64_EQ(strtoull(fp, NULL, 16), 13843036195897128121ULL);
    cw_alert_label_t one[] = {L("first-label", "first-label-value")};
    cw_alert_fingerprint(one, 1, fp);
    ASSERT_U64_EQ(strtoull(fp, NULL, 16), 5146282821936882169ULL);
}

static void test_url(void)
{
    cw__url_t u;
    cw_diag_t d;
    ASSERT_OK(cw__url_parse("http://127.0.0.1:9093", &u, &d));
    ASSERT_STR_EQ(u.host, "127.0.0.1");
    ASSERT_EQ(u.port, 9093);
    ASSERT_STR_EQ(u.path, "");
    ASSERT_TRUE(!u.tls);
    ASSERT_OK(cw__url_parse("https://am.example/prefix/", &u, &d));
    ASSERT_TRUE(u.tls);
    ASSERT_EQ(u.port, 443);
    ASSERT_STR_EQ(u.path, "/prefix");
    ASSERT_OK(cw__url_parse("http://[::1]:8080/hook", &u, &d));
    ASSERT_STR_EQ(u.host, "::1");
    ASSERT_STR_EQ(u.path, "/hook");
    ASSERT_EQ(cw__url_parse("ftp://x", &u, &d), CW_EINVAL);
    ASSERT_TRUE(strstr(d.msg, "not an http") != NULL);
    ASSERT_EQ(cw__url_parse("http://x:99999/", &u, &d), CW_EINVAL);
    ASSERT_EQ(cw__url_parse("http://:80/", &u, &d), CW_EINVAL);
    ASSERT_EQ(cw__url_parse("http://x/?q=1", &u, &d), CW_EINVAL);
}

static void test_bucket(void)
{
    cw__bucket_t b;
    int64_t t = 1000000000;
    cw__bucket_init(&b, 60, t);
    int n = 0;
    for (int i = 0; i < 1000; i++)
        n += cw__bucket_take(&b, t);
    ASSERT_EQ(n, 60); /* a minute's burst */
    ASSERT_TRUE(!cw__bucket_take(&b, t + 900000000));
    ASSERT_TRUE(cw__bucket_take(&b, t + 1000000000)); /* one a second after */
    ASSERT_TRUE(!cw__bucket_take(&b, t + 1000000000));
    n = 0;
    for (int i = 0; i < 1000; i++)
        n += cw__bucket_take(&b, t + 3600000000000LL);
    ASSERT_EQ(n, 60); /* never more than the burst */
    cw__bucket_init(&b, 0, t);
    for (int i = 0; i < 100; i++)
        ASSERT_TRUE(cw__bucket_take(&b, t));
}

static cw_alert_notice_t mk(const char *fp, int64_t ts, bool resend, bool resolved)
{
    cw_alert_notice_t a = {0};
    cw_strlcpy(a.fingerprint, fp, sizeof a.fingerprint);
    a.ts_ns = ts;
    a.resend = resend;
    a.resolved = resolved;
    return a;
}

static void test_repeat(void)
{
    cw__repeat_t r = {0};
    const int64_t H = 3600000000000LL;
    cw_alert_notice_t a = mk("00000000000000aa", 0, false, false);
    ASSERT_TRUE(cw__repeat_due(&r, &a, 4 * H));
    a = mk("00000000000000aa", H, true, false);
    ASSERT_TRUE(!cw__repeat_due(&r, &a, 4 * H)); /* a re-send within the interval */
    a = mk("00000000000000aa", 4 * H, true, false);
    ASSERT_TRUE(cw__repeat_due(&r, &a, 4 * H)); /* the interval passed */
    a = mk("00000000000000aa", 5 * H, true, false);
    ASSERT_TRUE(!cw__repeat_due(&r, &a, 4 * H));
    a = mk("00000000000000aa", 5 * H, false, false); /* a transition always */
    ASSERT_TRUE(cw__repeat_due(&r, &a, 4 * H));
    a = mk("00000000000000aa", 6 * H, false, true); /* a resolve always, and forgets */
    ASSERT_TRUE(cw__repeat_due(&r, &a, 4 * H));
    a = mk("00000000000000aa", 6 * H, true, false); /* unknown again: delivered */
    ASSERT_TRUE(cw__repeat_due(&r, &a, 4 * H));
    /* Many fingerprints: growth and erasure keep every one findable. */
    char fp[17];
    for (int i = 0; i < 5000; i++) {
        snprintf(fp, sizeof fp, "%016x", i * 7919);
        a = mk(fp, 0, false, false);
        ASSERT_TRUE(cw__repeat_due(&r, &a, H));
    }
    for (int i = 0; i < 5000; i += 2) {
        snprintf(fp, sizeof fp, "%016x", i * 7919);
        a = mk(fp, 0, false, true);
        cw__repeat_due(&r, &a, H);
    }
    int held = 0;
    for (int i = 0; i < 5000; i++) {
        snprintf(fp, sizeof fp, "%016x", i * 7919);
        a = mk(fp, 1, true, false);
        held += !cw__repeat_due(&r, &a, H);
    }
    ASSERT_EQ(held, 2500); /* the odd ones, still within their interval */
    cw__repeat_free(&r);
}

static cw_alert_label_t labels[] = {L("alertname", "LikelyLeak"), L("pid", "42"),
                                    L("process", "my\"app"), L("severity", "warning"),
                                    L("tag", "heap")};
static cw_alert_label_t annotations[] = {L("summary", "my\"app grows"), L("value", "52MiB/h")};

static cw_alert_notice_t sample(bool resolved)
{
    cw_alert_notice_t a = {0};
    a.series_id = 7;
    a.transition_id = resolved ? 12 : 11;
    a.resolved = resolved;
    a.severity = CW_SEV_WARNING;
    a.rule = "LikelyLeak";
    a.reason = resolved ? "resolved" : "for elapsed";
    a.labels = labels;
    a.nlabels = 5;
    a.annotations = annotations;
    a.nannotations = 2;
    a.process = "my\"app";
    a.pid = 42;
    a.tag = "heap";
    a.value = 54525952;
    a.threshold = 52428800;
    a.leak_score = 0.91;
    a.ttl_s = INFINITY;
    a.starts_ns = 1764599045000000000LL;
    a.ts_ns = a.starts_ns + 60000000000LL;
    a.ends_ns = resolved ? a.ts_ns : 0;
    a.generator_url = "http://127.0.0.1:8080/#/alerts/7";
    cw_alert_fingerprint(a.labels, a.nlabels, a.fingerprint);
    return a;
}

static const char *jstr(const cJSON *o, const char *k)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, k);
    return cJSON_IsString(v) ? v->valuestring : NULL;
}

static void test_bodies(void)
{
    cw_alert_notice_t f = sample(false), r = sample(true);
    cw_alert_notice_t *v[] = {&f, &r};
    char *s = cw__notify_am_body(v, 2, 240000000000LL);
    cJSON *j = cJSON_Parse(s);
    ASSERT_TRUE(cJSON_IsArray(j) && cJSON_GetArraySize(j) == 2);
    cJSON *a0 = cJSON_GetArrayItem(j, 0), *a1 = cJSON_GetArrayItem(j, 1);
    ASSERT_STR_EQ(jstr(cJSON_GetObjectItem(a0, "labels"), "process"), "my\"app");
    ASSERT_STR_EQ(jstr(cJSON_GetObjectItem(a0, "annotations"), "summary"), "my\"app grows");
    ASSERT_STR_EQ(jstr(a0, "startsAt"), "2025-12-01T14:24:05.000Z");
    ASSERT_STR_EQ(jstr(a0, "endsAt"), "2025-12-01T14:29:05.000Z"); /* ts + 4 min */
    ASSERT_STR_EQ(jstr(a1, "endsAt"), "2025-12-01T14:25:05.000Z"); /* resolved at ts */
    ASSERT_STR_EQ(jstr(a0, "generatorURL"), "http://127.0.0.1:8080/#/alerts/7");
    ASSERT_TRUE(!cJSON_GetObjectItem(a0, "status")); /* not a postable alert's field */
    cJSON_Delete(j);
    free(s);

    s = cw__notify_webhook_body(&f, "http://host:8080");
    j = cJSON_Parse(s);
    ASSERT_STR_EQ(jstr(j, "version"), "4");
    ASSERT_STR_EQ(jstr(j, "status"), "firing");
    ASSERT_STR_EQ(jstr(j, "receiver"), "commitwatch");
    ASSERT_STR_EQ(jstr(j, "externalURL"), "http://host:8080");
    ASSERT_STR_EQ(jstr(j, "groupKey"),
                  "{}:{alertname=\"LikelyLeak\", pid=\"42\", "
                  "process=\"my\\\"app\", severity=\"warning\", tag=\"heap\"}");
    ASSERT_EQ(cJSON_GetObjectItem(j, "truncatedAlerts")->valueint, 0);
    ASSERT_STR_EQ(jstr(cJSON_GetObjectItem(j, "commonLabels"), "tag"), "heap");
    ASSERT_STR_EQ(jstr(cJSON_GetObjectItem(j, "groupLabels"), "alertname"), "LikelyLeak");
    ASSERT_STR_EQ(jstr(cJSON_GetObjectItem(j, "commonAnnotations"), "value"), "52MiB/h");
    cJSON *al = cJSON_GetArrayItem(cJSON_GetObjectItem(j, "alerts"), 0);
    ASSERT_STR_EQ(jstr(al, "status"), "firing");
    ASSERT_STR_EQ(jstr(al, "endsAt"), "0001-01-01T00:00:00Z");
    ASSERT_STR_EQ(jstr(al, "fingerprint"), f.fingerprint);
    cJSON_Delete(j);
    free(s);

    s = cw__notify_alert_json(&r);
    j = cJSON_Parse(s);
    ASSERT_STR_EQ(jstr(j, "status"), "resolved");
    ASSERT_STR_EQ(jstr(j, "endsAt"), "2025-12-01T14:25:05.000Z");
    ASSERT_STR_EQ(jstr(j, "fingerprint"), r.fingerprint);
    cJSON_Delete(j);
    free(s);
}

static const char *field(const cw_plat_alert_entry_t *e, const char *name)
{
    for (size_t i = 0; i < e->nfields; i++)
        if (strcmp(e->fields[i].name, name) == 0) return e->fields[i].value;
    return NULL;
}

static void test_log_entry(void)
{
    cw_alert_notice_t f = sample(false);
    cw__notify_log_entry_t e;
    cw__notify_log_entry(&f, &e);
    ASSERT_EQ(e.e.level, CW_PLAT_ALERT_WARNING);
    ASSERT_EQ(e.e.kind, CW_PLAT_ALERT_FIRING);
    ASSERT_STR_EQ(e.e.message, "alert LikelyLeak firing warning: my\"app grows");
    ASSERT_STR_EQ(field(&e.e, "COMMITWATCH_PROCESS"), "my\"app");
    ASSERT_STR_EQ(field(&e.e, "COMMITWATCH_PID"), "42");
    ASSERT_STR_EQ(field(&e.e, "COMMITWATCH_VALUE"), "52MiB/h");         /* the annotation */
    ASSERT_STR_EQ(field(&e.e, "COMMITWATCH_THRESHOLD"), "5.24288e+07"); /* the number */
    ASSERT_STR_EQ(field(&e.e, "COMMITWATCH_LEAK_SCORE"), "0.91");
    ASSERT_STR_EQ(field(&e.e, "COMMITWATCH_TIME_TO_LIMIT"), ""); /* not growing */
    ASSERT_STR_EQ(field(&e.e, "COMMITWATCH_FINGERPRINT"), f.fingerprint);
    ASSERT_STR_EQ(e.e.fields[0].name, "COMMITWATCH_PROCESS"); /* Event Log's %2 */
    f.severity = CW_SEV_CRITICAL;
    f.reason = "severity rose";
    cw__notify_log_entry(&f, &e);
    ASSERT_EQ(e.e.level, CW_PLAT_ALERT_ERROR);
    ASSERT_EQ(e.e.kind, CW_PLAT_ALERT_ROSE);
    f.resend = true;
    f.reason = NULL;
    cw__notify_log_entry(&f, &e);
    ASSERT_EQ(e.e.kind, CW_PLAT_ALERT_REPEAT);
    ASSERT_STR_EQ(field(&e.e, "COMMITWATCH_REASON"), "still firing");
    cw_alert_notice_t r = sample(true);
    r.nannotations = 0;
    cw__notify_log_entry(&r, &e);
    ASSERT_EQ(e.e.level, CW_PLAT_ALERT_INFO);
    ASSERT_EQ(e.e.kind, CW_PLAT_ALERT_RESOLVED);
    ASSERT_STR_EQ(e.e.message, "alert LikelyLeak resolved: my\"app (pid 42), tag heap: "
                               "5.4526e+07 (threshold 5.24288e+07)");
}

/* The record: rows in, counts out; and a notifier whose receiver is not
 * listening records every attempt, and its stop keeps to its timeout. */
static void test_record(void)
{
    char dir[CW_PATH_MAX], db[CW_PATH_MAX + 16];
    snprintf(dir, sizeof dir, "%s/cw_test_notify_XXXXXX", cw_test_tmpdir());
    ASSERT_TRUE(cw_test_mkdtemp(dir) != NULL);
    snprintf(db, sizeof db, "%s/cw.db", dir);
    cw_store_t *s;
    cw_diag_t d;
    ASSERT_OK(cw_store_open(db, NULL, &s, &d));
    cw_notify_row_t rows[3] = {
        {0, 1, "webhook", 7, 11, 1, "error", "HTTP 503"},
        {0, 2, "webhook", 7, 11, 2, "ok", NULL},
        {0, 3, "exec", 0, 0, 0, "dropped", "rate limit"},
    };
    ASSERT_OK(cw_store_notify_add(s, rows, 3, &d));
    ASSERT_TRUE(rows[0].id > 0 && rows[2].id == rows[0].id + 2);
    cw_notify_count_t *c;
    size_t n;
    ASSERT_OK(cw_store_notify_counts(s, &c, &n, &d));
    ASSERT_EQ(n, 3);
    ASSERT_STR_EQ(c[0].channel, "exec");
    ASSERT_STR_EQ(c[0].result, "dropped");
    ASSERT_STR_EQ(c[2].result, "ok");
    ASSERT_U64_EQ(c[2].count, 1);
    cw_notify_counts_free(c, n);

    /* Port 9 (discard) on loopback: nothing listens; connection refused. */
    cw_notify_opts_t o = {0};
    o.db_path = db;
    o.webhook_url = "http://127.0.0.1:9/hook";
    o.log = "no";
    o.retries = 3;
    o.backoff_ns = 20000000;
    cw_notifier_t *nf;
    ASSERT_OK(cw_notifier_start(&o, &nf, &d));
    cw_alert_notice_t f = sample(false);
    cw_notifier_submit(nf, &f, 1);
    int64_t t0 = cw_plat_mono_ns();
    cw_notifier_stop(nf, 5000000000LL);
    ASSERT_TRUE(cw_plat_mono_ns() - t0 < 5500000000LL);
    ASSERT_OK(cw_store_notify_counts(s, &c, &n, &d));
    uint64_t errors = 0;
    for (size_t i = 0; i < n; i++)
        if (!strcmp(c[i].channel, "webhook") && !strcmp(c[i].result, "error")) errors = c[i].count;
    ASSERT_U64_EQ(errors, 1 + 3); /* the row above and three attempts */
    cw_notify_counts_free(c, n);

    /* A receiver stuck in its retries delays neither submit nor a stop
     * past its timeout; what is left is recorded as dropped, "stopped". */
    o.retries = 5;
    o.backoff_ns = 2000000000LL;
    ASSERT_OK(cw_notifier_start(&o, &nf, &d));
    cw_notifier_submit(nf, &f, 1);
    t0 = cw_plat_mono_ns();
    for (int i = 0; i < 100; i++)
        cw_notifier_submit(nf, &f, 1);
    ASSERT_TRUE(cw_plat_mono_ns() - t0 < 500000000LL);
    t0 = cw_plat_mono_ns();
    cw_notifier_stop(nf, 300000000LL);
    ASSERT_TRUE(cw_plat_mono_ns() - t0 < 2000000000LL);
    ASSERT_OK(cw_store_notify_counts(s, &c, &n, &d));
    uint64_t stopped = 0;
    for (size_t i = 0; i < n; i++)
        if (!strcmp(c[i].channel, "webhook") && !strcmp(c[i].result, "dropped"))
            stopped = c[i].count;
    ASSERT_U64_EQ(stopped, 101); /* the one in its backoff and the 100 queued */
    cw_notify_counts_free(c, n);

    /* Bad settings are refused at start, saying which. */
    o.webhook_url = "htp://x";
    ASSERT_EQ(cw_notifier_start(&o, &nf, &d), CW_EINVAL);
    ASSERT_TRUE(strstr(d.msg, "htp://x") != NULL);
    o.webhook_url = NULL;
    o.exec_path = "/nonexistent/hook";
    ASSERT_EQ(cw_notifier_start(&o, &nf, &d), CW_EINVAL);
    ASSERT_TRUE(strstr(d.msg, "alert_exec") != NULL);
    o.exec_path = NULL;
    o.log = "carrier-pigeon";
    ASSERT_EQ(cw_notifier_start(&o, &nf, &d), CW_EINVAL);
    ASSERT_TRUE(strstr(d.msg, "carrier-pigeon") != NULL);
    cw_notifier_stop(NULL, 0);
    cw_store_close(s);
    cw_test_rmtree(dir);
}

int main(void)
{
    test_fingerprint_known();
    test_url();
    test_bucket();
    test_repeat();
    test_bodies();
    test_log_entry();
    test_record();
    TEST_DONE();
}
