/* test_layerfeed.c - the heap layer's batches re-keyed to the service's
 * ids and attached to the aggregator's open bucket (layerfeed.h, and
 * agg.h's cw_agg_add_rider). */
#include <stdlib.h>
#include <string.h>

#include "commitwatch/layerfeed.h"
#include "test.h"

#define S 1000000000LL

static cw_batch_t *got[8];
static int ngot;

static int capture(void *ctx, cw_batch_t *b)
{
    (void)ctx;
    if (ngot == 8) CW_FAIL("too many batches");
    got[ngot++] = b;
    return 0;
}

static void drop_got(void)
{
    for (int i = 0; i < ngot; i++)
        cw_batch_free(got[i]);
    ngot = 0;
}

/* A trace's batch of bucket b: its frames 1-3 and stacks 1-2 when first,
 * its instance 1 (pid 42) and 2 (pid 43, a child), rows of both. */
static cw_batch_t *producer(int64_t b, bool first)
{
    static const uint32_t s1[] = {2, 1}, s2[] = {3, 1};
    cw_batch_t *x;
    ASSERT_OK(cw_batch_create(b, S, &x));
    if (first) {
        ASSERT_OK(cw_batch_add_frame(x, 1, "libc!malloc"));
        ASSERT_OK(cw_batch_add_frame(x, 2, "app!leak"));
        ASSERT_OK(cw_batch_add_frame(x, 3, "app!churn"));
        ASSERT_OK(cw_batch_add_stack(x, 1, s1, 2, NULL));
        ASSERT_OK(cw_batch_add_stack(x, 2, s2, 2, NULL));
        ASSERT_OK(cw_batch_add_proc(x, 1, 42, b, CW_TS_NEVER, "app", NULL));
        ASSERT_OK(cw_batch_add_proc(x, 2, 43, b, CW_TS_NEVER, "app", NULL));
    }
    /* Rows out of key order: the feed sorts what it keeps. */
    ASSERT_OK(cw_batch_add_commit(x, &(cw_row_commit_t){1, 2, b, 64, 2}));
    ASSERT_OK(cw_batch_add_commit(x, &(cw_row_commit_t){1, 1, b, 100, 1}));
    ASSERT_OK(cw_batch_add_commit(x, &(cw_row_commit_t){2, 1, b, 50, 1}));
    ASSERT_OK(cw_batch_add_activity(x, &(cw_row_activity_t){2, 1, 50, 50, b}));
    ASSERT_OK(cw_batch_add_activity(x, &(cw_row_activity_t){1, 3, 164, 164, b + 5}));
    return x;
}

/* The frame texts of the service's stack id, joined by ';'. */
static const char *texts(cw_stacks_t *cs, uint32_t id)
{
    static char buf[256];
    uint32_t n;
    const uint32_t *f = cw_stacks_frames(cs, id, &n);
    buf[0] = '\0';
    for (uint32_t i = 0; i < n; i++) {
        if (i) strcat(buf, ";");
        strcat(buf, cw_stacks_frame_text(cs, f[i]));
    }
    return buf;
}

static void test_rekey(void)
{
    cw_stacks_t *cs;
    cw_agg_t *agg;
    cw_layerfeed_t *f;
    cw_layerfeed_counts_t c;
    uint32_t pre;
    ASSERT_OK(cw_stacks_create(&cs));
    /* The service's table has ids of its own already. */
    ASSERT_OK(cw_stacks_intern_strings(cs, (const char *const[]){"k!mmap", "app!leak"}, 2, &pre));
    ASSERT_OK(cw_agg_create(S, cs, NULL, 0, 0, capture, NULL, &agg));
    ASSERT_OK(cw_layerfeed_create(&f));

    /* No time yet: a rider has no batch to ride, it is dropped. */
    ASSERT_OK(cw_layerfeed_push(f, 1, 42, 9, producer(5 * S, true), false));
    ASSERT_OK(cw_layerfeed_drain(f, cs, agg));
    cw_layerfeed_counts(f, &c);
    ASSERT_U64_EQ(c.dropped, 1);
    ASSERT_U64_EQ(c.attached, 0);

    /* Producer 2 (the same ids of its own) once time is known. */
    ASSERT_OK(cw_agg_advance(agg, 7 * S + 3));
    ASSERT_OK(cw_layerfeed_push(f, 2, 42, 9, producer(5 * S, true), false));
    ASSERT_OK(cw_layerfeed_drain(f, cs, agg));
    ASSERT_OK(cw_agg_flush(agg));
    ASSERT_EQ(ngot, 1);
    cw_batch_t *b = got[0];
    ASSERT_EQ(b->bucket_ns, 7 * S); /* the open bucket's batch, at the time advanced to */
    ASSERT_EQ(b->riders.n, 1);
    cw_batch_t *r = b->riders.v[0];
    ASSERT_EQ(r->layer, 1);
    ASSERT_EQ(r->bucket_ns, 5 * S); /* its own second */
    ASSERT_EQ(r->frames.n + r->stacks.n + r->procs.n, 0);
    ASSERT_EQ(r->commits.n, 2); /* the child's row is left out */
    ASSERT_EQ(r->activity.n, 1);
    ASSERT_EQ(r->activity.v[0].proc, 9);
    ASSERT_EQ(r->activity.v[0].delta, 164);
    for (uint32_t i = 0; i < r->commits.n; i++) {
        const cw_row_commit_t *x = &r->commits.v[i];
        ASSERT_EQ(x->proc, 9);
        ASSERT_STR_EQ(texts(cs, x->stack),
                      x->bytes == 100 ? "app!leak;libc!malloc" : "app!churn;libc!malloc");
        if (i) ASSERT_TRUE(x->stack > r->commits.v[i - 1].stack); /* sorted */
    }
    /* The new stacks ride the same batch, for the store's dictionary. */
    bool sent = false;
    for (uint32_t i = 0; i < b->stacks.n; i++)
        sent |= b->stacks.v[i].id == r->commits.v[0].stack;
    ASSERT_TRUE(sent);
    cw_layerfeed_counts(f, &c);
    ASSERT_U64_EQ(c.attached, 1);
    ASSERT_U64_EQ(c.rows_left_out, 2); /* the child's commit, in each of the two */
    drop_got();

    /* A later batch names its stacks by the ids already sent; the last
     * push frees the producer's map: a batch after it knows no instance. */
    ASSERT_OK(cw_agg_advance(agg, 8 * S));
    ASSERT_OK(cw_layerfeed_push(f, 2, 42, 9, producer(6 * S, false), true));
    ASSERT_OK(cw_layerfeed_push(f, 2, 42, 9, producer(7 * S, false), false));
    ASSERT_OK(cw_layerfeed_drain(f, cs, agg));
    ASSERT_OK(cw_agg_flush(agg));
    ASSERT_EQ(ngot, 1);
    ASSERT_EQ(got[0]->riders.n, 1);
    ASSERT_EQ(got[0]->riders.v[0]->bucket_ns, 6 * S);
    ASSERT_EQ(got[0]->riders.v[0]->commits.n, 2);
    cw_layerfeed_counts(f, &c);
    ASSERT_U64_EQ(c.attached, 2);
    ASSERT_U64_EQ(c.dropped, 1);
    ASSERT_U64_EQ(c.rows_left_out, 2 + 1 + 3);
    drop_got();

    /* A trace without an instance keeps nothing. */
    ASSERT_OK(cw_layerfeed_push(f, 3, 42, 0, producer(8 * S, true), true));
    /* A stack of a frame never sent: that batch is dropped. */
    cw_batch_t *bad = producer(8 * S, false);
    ASSERT_OK(cw_batch_add_stack(bad, 5, (const uint32_t[]){9}, 1, NULL));
    ASSERT_OK(cw_layerfeed_push(f, 5, 42, 9, bad, true));
    ASSERT_OK(cw_layerfeed_drain(f, cs, agg));
    ASSERT_OK(cw_agg_flush(agg));
    ASSERT_EQ(ngot, 0);
    cw_layerfeed_counts(f, &c);
    ASSERT_U64_EQ(c.rows_left_out, 6 + 3);
    ASSERT_U64_EQ(c.dropped, 2);

    /* The queue is bounded; the last push of a producer always fits. */
    for (uint32_t i = 0; i < CW_LAYERFEED_MAX; i++)
        ASSERT_OK(cw_layerfeed_push(f, 4, 42, 9, producer(9 * S, i == 0), false));
    ASSERT_EQ(cw_layerfeed_push(f, 4, 42, 9, producer(9 * S, false), false), CW_ERANGE);
    ASSERT_OK(cw_layerfeed_push(f, 4, 42, 9, NULL, true));
    cw_layerfeed_counts(f, &c);
    ASSERT_U64_EQ(c.dropped, 3);
    cw_layerfeed_destroy(f); /* frees what waits */
    cw_agg_destroy(agg);
    cw_stacks_destroy(cs);
}

/* A rider after the open bucket closed rides the next bucket's batch,
 * never one already emitted. */
static void test_rider_bucket(void)
{
    cw_stacks_t *cs;
    cw_agg_t *agg;
    cw_batch_t *r;
    ASSERT_OK(cw_stacks_create(&cs));
    ASSERT_OK(cw_agg_create(S, cs, NULL, 0, 0, capture, NULL, &agg));
    ASSERT_OK(cw_batch_create(2 * S, S, &r));
    ASSERT_EQ(cw_agg_add_rider(agg, r), CW_EINVAL); /* no time yet */
    r->layer = 1;
    ASSERT_OK(cw_agg_advance(agg, 3 * S + 500));
    ASSERT_OK(cw_agg_add_rider(agg, r));
    ASSERT_OK(cw_agg_flush(agg)); /* bucket 3 s emitted */
    ASSERT_EQ(ngot, 1);
    ASSERT_EQ(got[0]->bucket_ns, 3 * S);
    ASSERT_OK(cw_batch_create(3 * S, S, &r));
    r->layer = 1;
    ASSERT_OK(cw_agg_add_rider(agg, r)); /* time still 3.5 s: the next bucket */
    ASSERT_OK(cw_agg_flush(agg));
    ASSERT_EQ(ngot, 2);
    ASSERT_EQ(got[1]->bucket_ns, 4 * S);
    ASSERT_EQ(got[1]->riders.n, 1);
    drop_got();
    cw_agg_destroy(agg);
    cw_stacks_destroy(cs);
}

int main(void)
{
    test_rekey();
    test_rider_bucket();
    TEST_DONE();
}
