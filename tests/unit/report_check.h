/* report_check.h - comparing two window reports in the unit tests
 * (test_store_pipeline.c: the store against the exact analyzer;
 * test_store_cache.c: with and without the store's read caches). */
#ifndef CW_TEST_REPORT_CHECK_H
#define CW_TEST_REPORT_CHECK_H

#include "commitwatch/report.h"
#include "test.h"

static void test_figs_eq(const cw_figs_t *a, const cw_figs_t *b)
{
    ASSERT_U64_EQ(a->size_bytes, b->size_bytes);
    ASSERT_U64_EQ(a->commit_count, b->commit_count);
    for (int i = 0; i < CW_TYPE__COUNT; i++) {
        ASSERT_U64_EQ(a->types[i].bytes, b->types[i].bytes);
        ASSERT_U64_EQ(a->types[i].count, b->types[i].count);
    }
}

/* Every figure of instance got equals want's: totals, peak and its time,
 * outstanding at the end, events, and each stack (found by id) with its
 * tag. */
static void test_proc_eq(const cw_proc_report_t *got, const cw_proc_report_t *want)
{
    ASSERT_EQ(got->id, want->id);
    test_figs_eq(&got->figs, &want->figs);
    ASSERT_U64_EQ(got->peak_bytes, want->peak_bytes);
    ASSERT_EQ(got->peak_ns, want->peak_ns);
    ASSERT_U64_EQ(got->outstanding_end, want->outstanding_end);
    ASSERT_U64_EQ(got->events, want->events);
    ASSERT_EQ(got->nstacks, want->nstacks);
    for (uint32_t k = 0; k < want->nstacks; k++) {
        const cw_stack_report_t *sg = NULL;
        for (uint32_t m = 0; m < got->nstacks; m++)
            if (got->stacks[m].stack_id == want->stacks[k].stack_id) sg = &got->stacks[m];
        ASSERT_TRUE(sg != NULL);
        ASSERT_STR_EQ(sg->tag, want->stacks[k].tag);
        test_figs_eq(&sg->figs, &want->stacks[k].figs);
    }
}

#endif
