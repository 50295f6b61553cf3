/* test_backoff.c - the retry schedule of a failed source (backoff.h) and
 * the source's state in the status record (status.h): 1 s doubling to
 * 5 min, logged at most once a minute, reset by a success; the status's
 * up/down transitions and their copy. */
#include "commitwatch/backoff.h"
#include "commitwatch/status.h"

#include "test.h"

#define S INT64_C(1000000000)

static void test_schedule(void)
{
    cw_backoff_t b;
    cw_backoff_init(&b);
    ASSERT_EQ(b.failures, 0);
    ASSERT_EQ(b.next_ns, INT64_MIN);
    /* 1, 2, 4, ..., 256 s, then 300 s (5 min) for good. */
    int64_t want[] = {1, 2, 4, 8, 16, 32, 64, 128, 256, 300, 300, 300};
    int64_t now = 1000 * S;
    for (size_t i = 0; i < sizeof want / sizeof want[0]; i++) {
        int64_t next = cw_backoff_fail(&b, now);
        ASSERT_EQ(next - now, want[i] * S);
        ASSERT_EQ(b.next_ns, next);
        ASSERT_EQ(b.failures, i + 1);
        now = next;
    }
    /* A success starts over at 1 s, and says how many failures there were. */
    ASSERT_EQ(cw_backoff_success(&b), 12);
    ASSERT_EQ(b.next_ns, INT64_MIN);
    ASSERT_EQ(cw_backoff_fail(&b, now) - now, 1 * S);
    ASSERT_EQ(cw_backoff_success(&b), 1);
    ASSERT_EQ(cw_backoff_success(&b), 0);
}

static void test_log_rate(void)
{
    cw_backoff_t b;
    cw_backoff_init(&b);
    int64_t t = 5 * S;
    /* The first failure logs; then at most once a minute. */
    ASSERT_TRUE(cw_backoff_log_due(&b, t));
    ASSERT_TRUE(!cw_backoff_log_due(&b, t + 1 * S));
    ASSERT_TRUE(!cw_backoff_log_due(&b, t + 59 * S));
    ASSERT_TRUE(cw_backoff_log_due(&b, t + 60 * S));
    ASSERT_TRUE(!cw_backoff_log_due(&b, t + 119 * S));
    ASSERT_TRUE(cw_backoff_log_due(&b, t + 121 * S));
    /* Over 10 minutes of failures on the schedule: 1 + one a minute at most. */
    cw_backoff_init(&b);
    unsigned logged = 0, tries = 0;
    for (int64_t now = 0; now < 600 * S; now = cw_backoff_fail(&b, now), tries++)
        logged += cw_backoff_log_due(&b, now);
    ASSERT_TRUE(tries >= 10);
    ASSERT_TRUE(logged <= 11);
    ASSERT_TRUE(logged >= 2);
    /* After a success, the next failure logs at once. */
    cw_backoff_success(&b);
    ASSERT_TRUE(cw_backoff_log_due(&b, 601 * S));
}

static void test_status(void)
{
    cw_status_t st;
    cw_source_state_t ss;
    cw_status_init(&st, "perf", false, 10, 20);
    cw_status_source_get(&st, &ss);
    ASSERT_TRUE(!ss.up);
    ASSERT_STR_EQ(ss.error, "");
    ASSERT_EQ(ss.since_ns, INT64_MIN);
    ASSERT_EQ(ss.next_try_ns, INT64_MIN);
    /* down -> down (still, one more try) -> up -> down again. */
    cw_status_source_down(&st, "ETW: OpenTrace failed (error 5)", 100, 1, 1100);
    cw_status_source_get(&st, &ss);
    ASSERT_TRUE(!ss.up);
    ASSERT_STR_EQ(ss.error, "ETW: OpenTrace failed (error 5)");
    ASSERT_EQ(ss.since_ns, 100);
    ASSERT_EQ(ss.retries, 1);
    ASSERT_EQ(ss.next_try_ns, 1100);
    cw_status_source_down(&st, "again", 100, 2, 3100);
    cw_status_source_get(&st, &ss);
    ASSERT_STR_EQ(ss.error, "again");
    ASSERT_EQ(ss.since_ns, 100);
    ASSERT_EQ(ss.retries, 2);
    cw_status_source_up(&st, 5000);
    cw_status_source_get(&st, &ss);
    ASSERT_TRUE(ss.up);
    ASSERT_STR_EQ(ss.error, "");
    ASSERT_EQ(ss.since_ns, 5000);
    ASSERT_EQ(ss.retries, 0);
    ASSERT_EQ(ss.next_try_ns, INT64_MIN);
    /* A message longer than the record is cut, never overflows. */
    char big[2000];
    memset(big, 'x', sizeof big - 1);
    big[sizeof big - 1] = 0;
    cw_status_source_down(&st, big, 6000, 1, 7000);
    cw_status_source_get(&st, &ss);
    ASSERT_EQ(strlen(ss.error), sizeof ss.error - 1);
    ASSERT_TRUE(!ss.up);
    ASSERT_EQ(atomic_load(&st.source_error_seq) % 2, 0);
}

int main(void)
{
    test_schedule();
    test_log_rate();
    test_status();
    TEST_DONE();
}
