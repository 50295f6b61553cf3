/* exact.h - what the store tests compare the database with: a test's
 * events through tracker -> aggregator -> store, and through tracker ->
 * the exact window analyzer (test_store_pipeline.c, test_store_fold.c).
 *
 * A test gives its events as a feed function, called once per pipeline
 * with the pipeline and a fresh stack table: it interns each event's stack
 * (same order, so the same ids every time) and feeds it. */
#ifndef CW_TEST_EXACT_H
#define CW_TEST_EXACT_H

#include "commitwatch/agg.h"
#include "commitwatch/analysis.h"
#include "commitwatch/pipeline.h"
#include "commitwatch/stacks.h"
#include "commitwatch/store.h"
#include "commitwatch/tagger.h"
#include "test.h"

typedef void (*test_feed_fn)(cw_pipeline_t *pipe, cw_stacks_t *st, cw_agg_t *agg);

/* The aggregator's emit: each batch into the store (ctx). */
static int test_store_emit(void *ctx, cw_batch_t *b)
{
    cw_diag_t d = {{0}};
    int rc = cw_store_write(ctx, b, &d);
    if (rc) fprintf(stderr, "store: %s\n", d.msg);
    cw_batch_free(b);
    return rc;
}

/* Feeds everything into s through 1 s buckets; folding as given
 * (cw_agg_set_fold; 0, 0 = off). */
static void test_fill_store(cw_store_t *s, test_feed_fn feed, int64_t fold_lifetime,
                            uint64_t fold_bytes)
{
    cw_stacks_t *st;
    cw_tagger_t *tg;
    cw_agg_t *agg;
    cw_pipeline_t *pipe;
    ASSERT_OK(cw_stacks_create(&st));
    ASSERT_OK(cw_tagger_create_builtin(&tg));
    ASSERT_OK(cw_agg_create(INT64_C(1000000000), st, tg, 0, 0, test_store_emit, s, &agg));
    cw_agg_set_fold(agg, fold_lifetime, fold_bytes);
    cw_tracker_sink_t sink = cw_agg_sink(agg);
    ASSERT_OK(cw_pipeline_create(&sink, agg, 1, &pipe));
    feed(pipe, st, agg);
    ASSERT_OK(cw_agg_flush(agg));
    ASSERT_EQ(cw_agg_held(agg), 0);
    cw_pipeline_destroy(pipe);
    cw_agg_destroy(agg);
    cw_tagger_destroy(tg);
    cw_stacks_destroy(st);
}

/* The exact analyzer's report of [t0, t1). Free with cw_report_free(). */
static cw_report_t *test_exact(test_feed_fn feed, int64_t t0, int64_t t1)
{
    cw_stacks_t *st;
    cw_tagger_t *tg;
    cw_analysis_t *an;
    cw_pipeline_t *pipe;
    cw_report_t *r;
    ASSERT_OK(cw_stacks_create(&st));
    ASSERT_OK(cw_tagger_create_builtin(&tg));
    ASSERT_OK(cw_analysis_create(t0, t1, &an));
    cw_tracker_sink_t sink = cw_analysis_sink(an);
    ASSERT_OK(cw_pipeline_create(&sink, NULL, 1, &pipe));
    feed(pipe, st, NULL);
    cw_pipeline_finish(pipe);
    ASSERT_OK(cw_analysis_report(an, st, tg, false, &r));
    cw_pipeline_destroy(pipe);
    cw_analysis_destroy(an);
    cw_tagger_destroy(tg);
    cw_stacks_destroy(st);
    return r;
}

/* n random windows of whole w-wide buckets inside [lo, hi) (aligned
 * inwards), each at most maxlen buckets long, given to check. */
static void test_windows(cw_store_t *s, int64_t lo, int64_t hi, int64_t w, int n, int64_t maxlen,
                         uint64_t (*rnd)(uint64_t), void (*check)(cw_store_t *, int64_t, int64_t))
{
    lo = lo % w ? lo - lo % w + w : lo;
    hi -= hi % w;
    for (int i = 0; i < n && hi - lo >= w; i++) {
        int64_t nb = (hi - lo) / w, a = (int64_t)rnd((uint64_t)nb);
        int64_t len = 1 + (int64_t)rnd((uint64_t)(nb - a < maxlen ? nb - a : maxlen));
        check(s, lo + a * w, lo + (a + len) * w);
    }
}

#endif
