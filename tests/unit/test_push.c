/* test_push.c - the profile push's queue and checks (service/notify,
 * push_queue.c and push.c): the byte bound drops the oldest first and
 * counts each drop, a profile larger than the bound drops itself, the
 * retry schedule of the oldest (1 s, doubling, at most 5 min; a success
 * or a refusal starts the next profile at once), which answers are retried,
 * and the checks of profile_push_url and profile_push_labels. The pushes
 * themselves, to a real receiver, are e2e_test_profile_push's. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "commitwatch/push.h"
#include "notify/notify_internal.h"
#include "test.h"

#define S INT64_C(1000000000)

/* A profile of len bytes named by n (its query "/q<n>"). */
static cw__push_item_t item(int n, size_t len)
{
    cw__push_item_t it;
    char q[32];
    snprintf(q, sizeof q, "/q%d", n);
    it.query = strdup(q);
    it.body = calloc(1, len ? len : 1);
    it.len = len;
    if (!it.query || !it.body) CW_FAIL("out of memory");
    return it;
}

static void add(cw__pushq_t *q, int n, size_t len)
{
    cw__push_item_t it = item(n, len);
    ASSERT_OK(cw__pushq_add(q, &it));
    ASSERT_TRUE(it.query == NULL && it.body == NULL); /* taken */
}

static const char *head(const cw__pushq_t *q, int64_t now)
{
    const cw__push_item_t *it = cw__pushq_due(q, now);
    return it ? it->query : "(none due)";
}

static void test_bound(void)
{
    cw__pushq_t q;
    cw__pushq_init(&q, 1000);
    ASSERT_TRUE(cw__pushq_due(&q, 0) == NULL);
    ASSERT_EQ(cw__pushq_next(&q), INT64_MIN);
    add(&q, 1, 400);
    add(&q, 2, 400);
    ASSERT_U64_EQ(q.bytes, 800);
    ASSERT_U64_EQ(q.dropped_full, 0);
    /* 3 needs 400 more: 1, the oldest, goes. */
    add(&q, 3, 400);
    ASSERT_EQ(q.n, 2);
    ASSERT_U64_EQ(q.bytes, 800);
    ASSERT_U64_EQ(q.dropped_full, 1);
    ASSERT_STR_EQ(head(&q, 0), "/q2");
    /* Exactly at the bound fits. */
    add(&q, 4, 200);
    ASSERT_U64_EQ(q.bytes, 1000);
    ASSERT_U64_EQ(q.dropped_full, 1);
    /* A big one drops as many old ones as it takes: 2, 3 and 4. */
    add(&q, 5, 900);
    ASSERT_EQ(q.n, 1);
    ASSERT_U64_EQ(q.bytes, 900);
    ASSERT_U64_EQ(q.dropped_full, 4);
    ASSERT_STR_EQ(head(&q, 0), "/q5");
    /* One larger than the bound never fits: it drops itself, not the others. */
    add(&q, 6, 1001);
    ASSERT_EQ(q.n, 1);
    ASSERT_U64_EQ(q.bytes, 900);
    ASSERT_U64_EQ(q.dropped_full, 5);
    /* Many small ones grow the ring past its first size, in order. */
    cw__pushq_free(&q);
    cw__pushq_init(&q, 1 << 20);
    for (int i = 0; i < 100; i++)
        add(&q, 100 + i, 10);
    for (int i = 0; i < 100; i++) {
        char want[16];
        snprintf(want, sizeof want, "/q%d", 100 + i);
        ASSERT_STR_EQ(head(&q, 0), want);
        cw__pushq_result(&q, CW__PUSH_OK, 0);
    }
    ASSERT_EQ(q.n, 0);
    ASSERT_U64_EQ(q.sent, 100);
    ASSERT_U64_EQ(q.sent_bytes, 1000);
    ASSERT_U64_EQ(q.bytes, 0);
    cw__pushq_free(&q);
}

static void test_retry(void)
{
    cw__pushq_t q;
    cw__pushq_init(&q, 1 << 20);
    add(&q, 1, 100);
    add(&q, 2, 50);
    int64_t t = 1000 * S;
    /* Failures: the oldest stays, tried again after 1, 2, 4, ... s. */
    int64_t waits[] = {1, 2, 4, 8, 16, 32, 64, 128, 256, 300, 300};
    for (size_t i = 0; i < sizeof waits / sizeof waits[0]; i++) {
        ASSERT_STR_EQ(head(&q, t), "/q1");
        cw__pushq_result(&q, CW__PUSH_RETRY, t);
        ASSERT_EQ(cw__pushq_next(&q), t + waits[i] * S);
        ASSERT_TRUE(cw__pushq_due(&q, t + waits[i] * S - 1) == NULL);
        t += waits[i] * S;
    }
    ASSERT_U64_EQ(q.retries, 11);
    ASSERT_EQ(q.n, 2);
    /* A success: 1 is sent, 2 is due at once. */
    cw__pushq_result(&q, CW__PUSH_OK, t);
    ASSERT_U64_EQ(q.sent, 1);
    ASSERT_U64_EQ(q.sent_bytes, 100);
    ASSERT_EQ(cw__pushq_next(&q), INT64_MIN);
    ASSERT_STR_EQ(head(&q, t), "/q2");
    /* A retry then a refusal: 2 is dropped as rejected; the queue is empty. */
    cw__pushq_result(&q, CW__PUSH_RETRY, t);
    ASSERT_EQ(cw__pushq_next(&q), t + S); /* the schedule started over */
    cw__pushq_result(&q, CW__PUSH_REJECTED, t + S);
    ASSERT_U64_EQ(q.rejected, 1);
    ASSERT_U64_EQ(q.retries, 12);
    ASSERT_EQ(q.n, 0);
    ASSERT_TRUE(cw__pushq_due(&q, t + S) == NULL);
    /* While retrying, new profiles wait behind the oldest and the bound
     * still holds: nothing within it is lost. */
    cw__pushq_free(&q);
    cw__pushq_init(&q, 300);
    add(&q, 1, 100);
    cw__pushq_result(&q, CW__PUSH_RETRY, t);
    add(&q, 2, 100);
    add(&q, 3, 100);
    ASSERT_U64_EQ(q.dropped_full, 0);
    add(&q, 4, 100); /* past the bound: 1, the one being retried, goes */
    ASSERT_U64_EQ(q.dropped_full, 1);
    ASSERT_EQ(cw__pushq_next(&q), INT64_MIN); /* 2 is new: tried at once */
    ASSERT_STR_EQ(head(&q, t), "/q2");
    cw__pushq_free(&q);
}

static void test_outcome(void)
{
    ASSERT_EQ(cw__push_outcome(-1, 0), CW__PUSH_RETRY);
    ASSERT_EQ(cw__push_outcome(0, 200), CW__PUSH_OK);
    ASSERT_EQ(cw__push_outcome(0, 204), CW__PUSH_OK);
    ASSERT_EQ(cw__push_outcome(0, 408), CW__PUSH_RETRY);
    ASSERT_EQ(cw__push_outcome(0, 429), CW__PUSH_RETRY);
    ASSERT_EQ(cw__push_outcome(0, 500), CW__PUSH_RETRY);
    ASSERT_EQ(cw__push_outcome(0, 503), CW__PUSH_RETRY);
    ASSERT_EQ(cw__push_outcome(0, 400), CW__PUSH_REJECTED);
    ASSERT_EQ(cw__push_outcome(0, 401), CW__PUSH_REJECTED);
    ASSERT_EQ(cw__push_outcome(0, 404), CW__PUSH_REJECTED);
    ASSERT_EQ(cw__push_outcome(0, 302), CW__PUSH_REJECTED);
}

static void test_checks(void)
{
    cw_diag_t d = {{0}};
    ASSERT_OK(cw_push_check_url("http://127.0.0.1:4040", &d));
    ASSERT_OK(cw_push_check_url("https://profiles.example.com/pyroscope", &d));
    ASSERT_EQ(cw_push_check_url("127.0.0.1:4040", &d), CW_EINVAL);
    ASSERT_TRUE(strstr(d.msg, "not an http://") != NULL);
    ASSERT_EQ(cw_push_check_url("http://h:4040/ingest?name=x", &d), CW_EINVAL);
    ASSERT_EQ(cw_push_check_url("http://h:99999", &d), CW_EINVAL);

    ASSERT_OK(cw_push_check_labels("", &d));
    ASSERT_OK(cw_push_check_labels(NULL, &d));
    ASSERT_OK(cw_push_check_labels("env=prod", &d));
    ASSERT_OK(cw_push_check_labels("env=prod,team=x,region=eu-west-1,zone=a.b:c", &d));
    const char *bad[] = {"env",      "=prod",        "env=",         "env=a b",
                         "env=a,",   "env=a,,b=c",   "1env=a",       "env=a}",
                         "e-v=a",    "host=x",       "process=p",    "service_name=s",
                         "__name__=x", "env=a\"b",   "env=a=b",      "env=a{"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        d.msg[0] = 0;
        if (cw_push_check_labels(bad[i], &d) != CW_EINVAL) CW_FAIL("'%s' was accepted", bad[i]);
        ASSERT_TRUE(d.msg[0] != 0);
    }
    ASSERT_EQ(cw_push_check_labels("host=me", &d), CW_EINVAL);
    ASSERT_TRUE(strstr(d.msg, "commitwatch sets service_name, host and process") != NULL);
    char longv[200];
    memset(longv, 'a', sizeof longv);
    memcpy(longv, "k=", 2);
    longv[sizeof longv - 1] = 0;
    ASSERT_EQ(cw_push_check_labels(longv, &d), CW_EINVAL);
}

static void test_start_refuses(void)
{
    cw_diag_t d = {{0}};
    cw_pusher_t *p = (cw_pusher_t *)1;
    cw_push_opts_t o = {.db_path = "/nonexistent/x.db", .url = "http://127.0.0.1:1",
                        .period_ns = 1500000000};
    ASSERT_EQ(cw_push_start(&o, &p, &d), CW_EINVAL);
    ASSERT_TRUE(p == NULL);
    ASSERT_TRUE(strstr(d.msg, "whole number of seconds") != NULL);
    o.period_ns = 60 * S;
    o.url = "ftp://x";
    ASSERT_EQ(cw_push_start(&o, &p, &d), CW_EINVAL);
    o.url = "http://127.0.0.1:1";
    o.labels = "host=x";
    ASSERT_EQ(cw_push_start(&o, &p, &d), CW_EINVAL);
    cw_push_stop(NULL, 0);
}

int main(void)
{
    test_bound();
    test_retry();
    test_outcome();
    test_checks();
    test_start_refuses();
    TEST_DONE();
}
