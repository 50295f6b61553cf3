/* test_report.c - a report's own parts (analysis/report.c): its order
 * (cw_report_sort: processes by impacting, then size, then id; each
 * process's stacks by size, then impacting, then id, with an insertion
 * sort for a few and qsort for many) checked against keys computed here,
 * and its tags (cw_report_add_tag: texts the report owns, one for many
 * stacks). */
#include "commitwatch/report.h"

#include "rng.h"
#include "test.h"

/* A figure from a few values, so that ties are common. */
static uint64_t few(void)
{
    return 4096 * (uint64_t)test_rng_below(4);
}

static void random_figs(cw_figs_t *f)
{
    memset(f, 0, sizeof *f);
    f->size_bytes = few();
    f->types[CW_AIFO].bytes = few();
    f->types[CW_AOFI].bytes = few();
}

/* -1 when a goes before b in cw_report_sort()'s order of stacks. */
static int stack_order(const cw_stack_report_t *a, const cw_stack_report_t *b)
{
    if (a->figs.size_bytes != b->figs.size_bytes)
        return a->figs.size_bytes > b->figs.size_bytes ? -1 : 1;
    int64_t ia = cw_figs_impacting(&a->figs), ib = cw_figs_impacting(&b->figs);
    if (ia != ib) return ia > ib ? -1 : 1;
    return a->stack_id < b->stack_id ? -1 : a->stack_id > b->stack_id;
}

static int proc_order(const cw_proc_report_t *a, const cw_proc_report_t *b)
{
    int64_t ia = cw_figs_impacting(&a->figs), ib = cw_figs_impacting(&b->figs);
    if (ia != ib) return ia > ib ? -1 : 1;
    if (a->figs.size_bytes != b->figs.size_bytes)
        return a->figs.size_bytes > b->figs.size_bytes ? -1 : 1;
    return a->id < b->id ? -1 : a->id > b->id;
}

/* Every order of a process's stacks, few (the insertion sort) and many
 * (qsort): sorted, and the same stacks with the same tags. */
static void test_sort(void)
{
    static const char *const names[] = {"Heap", "Stack", "Other"};
    uint32_t stacks = 0;
    for (uint64_t round = 0; round < 400; round++) {
        test_rng_seed(round, 41);
        cw_report_t *r = calloc(1, sizeof *r);
        ASSERT_TRUE(r != NULL);
        const char *tags[3];
        for (int i = 0; i < 3; i++)
            ASSERT_TRUE((tags[i] = cw_report_add_tag(r, names[i])) != NULL);
        r->nprocs = test_rng_below(12);
        r->procs = calloc(r->nprocs + 1, sizeof *r->procs);
        ASSERT_TRUE(r->procs != NULL);
        uint64_t want_ids = 0;
        for (uint32_t i = 0; i < r->nprocs; i++) {
            cw_proc_report_t *p = &r->procs[i];
            p->id = 1000 - 7 * i;
            random_figs(&p->figs);
            /* up to 16 takes the insertion sort, past it qsort */
            p->nstacks = round % 5 == 0 ? 17 + test_rng_below(30) : test_rng_below(17);
            p->stacks = calloc(p->nstacks + 1, sizeof *p->stacks);
            ASSERT_TRUE(p->stacks != NULL);
            for (uint32_t j = 0; j < p->nstacks; j++) {
                cw_stack_report_t *s = &p->stacks[j];
                s->stack_id = 3 * j + test_rng_below(3); /* distinct, in any order after */
                s->tag = tags[s->stack_id % 3];
                random_figs(&s->figs);
                want_ids += (uint64_t)p->id * 100000 + s->stack_id;
            }
            for (uint32_t j = p->nstacks; j > 1; j--) { /* shuffled */
                uint32_t k = test_rng_below(j);
                cw_stack_report_t x = p->stacks[j - 1];
                p->stacks[j - 1] = p->stacks[k];
                p->stacks[k] = x;
            }
            stacks += p->nstacks;
        }
        cw_report_sort(r);
        uint64_t ids = 0;
        for (uint32_t i = 0; i < r->nprocs; i++) {
            const cw_proc_report_t *p = &r->procs[i];
            if (i) ASSERT_EQ(proc_order(&r->procs[i - 1], p), -1);
            for (uint32_t j = 0; j < p->nstacks; j++) {
                const cw_stack_report_t *s = &p->stacks[j];
                if (j) ASSERT_EQ(stack_order(&p->stacks[j - 1], s), -1);
                ASSERT_TRUE(s->tag == tags[s->stack_id % 3]);
                ids += (uint64_t)p->id * 100000 + s->stack_id;
            }
        }
        ASSERT_EQ(ids, want_ids);
        cw_report_free(r);
    }
    printf("sort: %u stacks of 400 reports in order\n", stacks);
}

/* A tag is the report's own copy, kept until the report is freed. */
static void test_tags(void)
{
    cw_report_t *r = calloc(1, sizeof *r);
    ASSERT_TRUE(r != NULL);
    char text[16];
    const char *t[40];
    for (int i = 0; i < 40; i++) {
        snprintf(text, sizeof text, "tag %d", i);
        ASSERT_TRUE((t[i] = cw_report_add_tag(r, text)) != NULL);
        ASSERT_TRUE(t[i] != text);
    }
    snprintf(text, sizeof text, "changed");
    ASSERT_EQ(r->ntags, 40);
    for (int i = 0; i < 40; i++) {
        snprintf(text, sizeof text, "tag %d", i);
        ASSERT_STR_EQ(t[i], text);
        ASSERT_TRUE(r->tags[i] == t[i]);
    }
    cw_report_free(r); /* (the leak checks: every text freed with it) */
    cw_report_free(NULL);
}

int main(void)
{
    test_sort();
    test_tags();
    TEST_DONE();
}
