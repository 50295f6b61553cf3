/* test_agg.c - the bucket aggregator: one batch per bucket with the rows
 * DESIGN.md's storage model needs (commits, releases with their commit
 * bucket, closed counts, activity with relative peak), new processes,
 * frames and stacks carried once. */
#include <stdlib.h>
#include <string.h>

#include "commitwatch/agg.h"
#include "commitwatch/pipeline.h"
#include "test.h"

#define S 1000000000LL

static cw_batch_t *got[16];
static int ngot;

static int capture(void *ctx, cw_batch_t *b)
{
    (void)ctx;
    if (ngot == 16) CW_FAIL("too many batches");
    got[ngot++] = b;
    return 0;
}

static void feed(cw_pipeline_t *p, int64_t ts, cw_op_t op, uint32_t pid, uint64_t addr, uint64_t size,
                 uint32_t stack, bool rundown)
{
    cw_event_t ev = {.ts = ts, .op = op, .pid = pid, .addr = addr, .size = size, .stack_id = stack,
                     .rundown = rundown, .name = "app.exe"};
    cw_diag_t d;
    ASSERT_OK(cw_pipeline_feed(p, &ev, &d));
}

static const cw_row_release_t *find_release(const cw_batch_t *b, uint32_t stack, int64_t a)
{
    for (uint32_t i = 0; i < b->releases.n; i++)
        if (b->releases.v[i].stack == stack && b->releases.v[i].a == a) return &b->releases.v[i];
    return NULL;
}

int main(void)
{
    cw_stacks_t *s;
    cw_tagger_t *t;
    cw_agg_t *a;
    cw_pipeline_t *p;
    ASSERT_OK(cw_stacks_create(&s));
    ASSERT_OK(cw_tagger_create_builtin(&t));
    const char *f1[] = {"app!main", "k!VirtualAlloc"}, *f2[] = {"(before trace)"};
    uint32_t s1, s2;
    ASSERT_OK(cw_stacks_intern_strings(s, f1, 2, &s1));
    ASSERT_OK(cw_stacks_intern_strings(s, f2, 1, &s2));
    ASSERT_OK(cw_agg_create(S, s, t, 0, 0, capture, NULL, &a));
    cw_tracker_sink_t sink = cw_agg_sink(a);
    ASSERT_OK(cw_pipeline_create(&sink, a, 1, &p));

    /* Bucket 10 s: start, rundown 8 KiB, commit 16 KiB, free 4 KiB of it. */
    feed(p, 10 * S + 1, CW_OP_PROCESS_START, 7, 0, 0, 0, false);
    feed(p, 10 * S + 2, CW_OP_COMMIT, 7, 0x100000, 8192, s2, true);
    feed(p, 10 * S + 3, CW_OP_COMMIT, 7, 0x10000, 16384, s1, false);
    feed(p, 10 * S + 4, CW_OP_DECOMMIT, 7, 0x10000, 4096, 0, false);
    /* Bucket 12 s: the rest of the commit and the rundown go. */
    feed(p, 12 * S + 5, CW_OP_COMMIT, 7, 0x200000, 4096, s1, false);
    /* That commit was a correction (source.h): it rides in its bucket. */
    ASSERT_OK(cw_agg_add_correction(a, 1, 12 * S + 5, 4096, 0));
    feed(p, 12 * S + 6, CW_OP_DECOMMIT, 7, 0x10000, 0x100000, 0, false);
    feed(p, 12 * S + 7, CW_OP_RELEASE, 7, 0x100000, 8192, 0, false);
    ASSERT_OK(cw_agg_flush(a));
    ASSERT_EQ(ngot, 2);

    const cw_batch_t *b = got[0];
    ASSERT_EQ(b->corrections.n, 0);
    ASSERT_EQ(got[1]->corrections.n, 1);
    ASSERT_TRUE(got[1]->corrections.v[0].proc == 1 && got[1]->corrections.v[0].ts_ns == 12 * S + 5 &&
                got[1]->corrections.v[0].committed == 4096 &&
                got[1]->corrections.v[0].decommitted == 0);
    ASSERT_EQ(b->bucket_ns, 10 * S);
    ASSERT_EQ(b->procs.n, 1);
    ASSERT_STR_EQ(b->procs.v[0].name, "app.exe");
    ASSERT_EQ(b->stacks.n, 3); /* the empty stack, s1, s2: sent once */
    ASSERT_EQ(b->frames.n, 3);
    ASSERT_EQ(b->commits.n, 2);
    for (uint32_t i = 0; i < b->commits.n; i++) {
        const cw_row_commit_t *c = &b->commits.v[i];
        if (c->stack == s2) {
            ASSERT_TRUE(c->a == CW_TS_BEFORE);
            ASSERT_EQ(c->bytes, 8192);
        } else {
            ASSERT_EQ(c->a, 10 * S);
            ASSERT_EQ(c->bytes, 16384);
            ASSERT_EQ(c->events, 1);
        }
    }
    const cw_row_release_t *r = find_release(b, s1, 10 * S);
    ASSERT_TRUE(r != NULL);
    ASSERT_EQ(r->bytes, 4096);
    ASSERT_EQ(r->pieces, 1);
    ASSERT_EQ(r->closed, 0);
    ASSERT_EQ(b->activity.n, 1);
    ASSERT_EQ(b->activity.v[0].events, 4);
    ASSERT_EQ(b->activity.v[0].delta, 16384 - 4096); /* rundown adds nothing */
    ASSERT_EQ(b->activity.v[0].relpeak, 16384);
    ASSERT_EQ(b->activity.v[0].relpeak_ns, 10 * S + 3);

    b = got[1];
    ASSERT_EQ(b->bucket_ns, 12 * S);
    ASSERT_EQ(b->stacks.n, 0);
    ASSERT_EQ(b->procs.n, 0);
    r = find_release(b, s1, 10 * S);
    ASSERT_TRUE(r != NULL);
    ASSERT_EQ(r->bytes, 12288);
    ASSERT_EQ(r->closed, 1);
    r = find_release(b, s2, CW_TS_BEFORE);
    ASSERT_TRUE(r != NULL);
    ASSERT_EQ(r->bytes, 8192);
    ASSERT_EQ(r->closed, 1);
    ASSERT_EQ(b->activity.v[0].relpeak, 4096); /* the new 4 KiB commit first */
    ASSERT_EQ(b->activity.v[0].relpeak_ns, 12 * S + 5);
    ASSERT_EQ(b->activity.v[0].delta, 4096 - 12288 - 8192);

    /* Time going back is refused by the pipeline. */
    cw_event_t ev = {.ts = 5, .op = CW_OP_COMMIT, .pid = 7, .addr = 0, .size = 4096};
    cw_diag_t d;
    ASSERT_EQ(cw_pipeline_feed(p, &ev, &d), CW_ETIME);

    /* A tick is a watermark: it closes the bucket, and nothing older may
     * follow it. */
    ASSERT_OK(cw_pipeline_tick(p, 14 * S));
    ASSERT_EQ(ngot, 2); /* nothing was open */
    cw_event_t late = {.ts = 13 * S, .op = CW_OP_COMMIT, .pid = 7, .addr = 0x300000, .size = 4096};
    ASSERT_EQ(cw_pipeline_feed(p, &late, &d), CW_ETIME);
    ASSERT_TRUE(strstr(d.msg, "promised nothing older") != NULL);
    late.ts = 14 * S + 1;
    ASSERT_OK(cw_pipeline_feed(p, &late, &d));
    ASSERT_OK(cw_pipeline_tick(p, 15 * S));
    ASSERT_EQ(ngot, 3);
    ASSERT_EQ(got[2]->bucket_ns, 14 * S);

    /* The end of a run ends the live instance in the next bucket (after the
     * last event's): its 4 KiB commit of bucket 14 s and the commit of
     * bucket 12 s are released in the bucket after the last tick (15 s). */
    ASSERT_OK(cw_pipeline_end_all(p));
    ASSERT_OK(cw_agg_flush(a));
    ASSERT_EQ(ngot, 4);
    b = got[3];
    ASSERT_EQ(b->bucket_ns, 16 * S);
    ASSERT_EQ(b->procs.n, 1);
    ASSERT_EQ(b->procs.v[0].exit_ns, 16 * S);
    ASSERT_TRUE(b->procs.v[0].tracking_ended); /* not an exit: stored apart */
    uint64_t freed = 0;
    for (uint32_t i = 0; i < b->releases.n; i++) freed += b->releases.v[i].bytes;
    ASSERT_EQ(freed, 4096 + 4096);
    ASSERT_EQ(cw_tracker_live_processes(cw_pipeline_tracker(p)), 0);

    for (int i = 0; i < ngot; i++) cw_batch_free(got[i]);
    cw_pipeline_destroy(p);
    cw_agg_destroy(a);
    cw_tagger_destroy(t);
    cw_stacks_destroy(s);
    TEST_DONE();
}
