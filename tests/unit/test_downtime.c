/* test_downtime.c - the list of stretches the live source was down
 * (downtime.h): begin and end, never overlapping, the oldest dropped past
 * the cap; its text form read back; the questions (down at t, a step
 * wholly inside); bad lines skipped. */
#include "commitwatch/downtime.h"

#include "test.h"

static void test_begin_end(void)
{
    cw_downtime_t dt;
    cw_downtime_parse(&dt, NULL);
    ASSERT_EQ(dt.n, 0);
    ASSERT_TRUE(!cw_downtime_open(&dt));
    ASSERT_TRUE(!cw_downtime_end(&dt, 5)); /* nothing open */
    cw_downtime_begin(&dt, 100);
    ASSERT_TRUE(cw_downtime_open(&dt));
    cw_downtime_begin(&dt, 150); /* already open: unchanged */
    ASSERT_EQ(dt.n, 1);
    ASSERT_EQ(dt.from[0], 100);
    ASSERT_TRUE(cw_downtime_at(&dt, 100));
    ASSERT_TRUE(cw_downtime_at(&dt, 1000000)); /* open: down until now */
    ASSERT_TRUE(!cw_downtime_at(&dt, 99));
    ASSERT_TRUE(cw_downtime_end(&dt, 200));
    ASSERT_TRUE(!cw_downtime_open(&dt));
    ASSERT_TRUE(cw_downtime_at(&dt, 199));
    ASSERT_TRUE(!cw_downtime_at(&dt, 200)); /* [from, to) */
    ASSERT_TRUE(cw_downtime_covers(&dt, 100, 200));
    ASSERT_TRUE(!cw_downtime_covers(&dt, 99, 150));
    ASSERT_TRUE(!cw_downtime_covers(&dt, 150, 201));
    /* A later stretch never starts inside an earlier one. */
    cw_downtime_begin(&dt, 150);
    ASSERT_EQ(dt.from[1], 200);
    ASSERT_TRUE(cw_downtime_end(&dt, 150)); /* at least 1 ns long */
    ASSERT_EQ(dt.to[1], 201);
}

static void test_text(void)
{
    cw_downtime_t dt, back;
    char buf[CW_DOWNTIME_TEXT];
    cw_downtime_parse(&dt, "10 20\n30 40\n50 -\n");
    ASSERT_EQ(dt.n, 3);
    ASSERT_EQ(dt.to[1], 40);
    ASSERT_EQ(dt.to[2], INT64_MAX);
    ASSERT_STR_EQ(cw_downtime_format(&dt, buf, sizeof buf), "10 20\n30 40\n50 -\n");
    /* Bad lines (not numbers, empty, backwards, overlapping) are skipped. */
    cw_downtime_parse(&back, "x y\n\n5 3\n10 20\n15 30\n25 26\n7");
    ASSERT_EQ(back.n, 2);
    ASSERT_EQ(back.from[0], 10);
    ASSERT_EQ(back.from[1], 25);
    /* Past the cap the oldest goes. */
    cw_downtime_parse(&dt, "");
    for (int64_t i = 0; i < CW_DOWNTIME_MAX + 5; i++) {
        cw_downtime_begin(&dt, i * 10);
        cw_downtime_end(&dt, i * 10 + 5);
    }
    ASSERT_EQ(dt.n, CW_DOWNTIME_MAX);
    ASSERT_EQ(dt.from[0], 50);
    cw_downtime_parse(&back, cw_downtime_format(&dt, buf, sizeof buf));
    ASSERT_EQ(back.n, CW_DOWNTIME_MAX);
    ASSERT_EQ(back.to[CW_DOWNTIME_MAX - 1], dt.to[CW_DOWNTIME_MAX - 1]);
    /* Times of today's clock fit the text form. */
    cw_downtime_parse(&dt, "");
    cw_downtime_begin(&dt, INT64_C(1796377156000000000));
    cw_downtime_parse(&back, cw_downtime_format(&dt, buf, sizeof buf));
    ASSERT_EQ(back.from[0], INT64_C(1796377156000000000));
    ASSERT_TRUE(cw_downtime_open(&back));
}

int main(void)
{
    test_begin_end();
    test_text();
    TEST_DONE();
}
