/* test_heap.c - the heap layer's model (analysis/heap.c): heap events
 * through the tracker and the window analyzer give exact bytes (no page
 * rounding, adjacent blocks kept apart), frees find their block's size,
 * reallocs move blocks, peaks per stack, what cannot be applied is
 * counted; and the report's JSON carries the figures. Snapshots hold each
 * stack's outstanding at their time, and the diff (heap_diff.c) between
 * any two points of a report's JSON gives the growth per stack. */
#include <cjson/cJSON.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "commitwatch/error.h"
#include "commitwatch/heap.h"
#include "commitwatch/memstat.h"
#include "commitwatch/stacks.h"
#include "test.h"

#define BASE 0x55550000a000ull
#define PID 42

static cw_stacks_t *stacks;
static uint32_t S_LEAK, S_CHURN, S_REALLOC;
static int64_t now = 1000;

static void ev(cw_heap_model_t *m, cw_heap_kind_t k, uint64_t addr, uint64_t size, uint64_t old,
               uint32_t stack)
{
    cw_heap_ev_t e = {.ts = now++,
                      .kind = k,
                      .pid = PID,
                      .tid = PID,
                      .addr = addr,
                      .size = size,
                      .old_addr = old,
                      .stack_id = stack};
    ASSERT_OK(cw_heap_model_apply(m, &e));
}

/* The stack of p whose innermost frame is fn. */
static const cw_heap_stack_report_t *stack_of(const cw_heap_proc_report_t *p, const char *fn)
{
    for (uint32_t s = 0; s < p->nstacks; s++)
        if (p->stacks[s].nframes && strcmp(p->stacks[s].frames[p->stacks[s].nframes - 1], fn) == 0)
            return &p->stacks[s];
    CW_FAIL("no stack ends in %s", fn);
    return NULL;
}

static void test_exact_bytes(void)
{
    cw_heap_model_t *m;
    ASSERT_OK(cw_heap_model_create(now, &m));
    ASSERT_OK(cw_heap_model_start(m, PID, now++, "truth", "truth --x"));
    /* Leaks: 3 adjacent blocks of odd sizes, byte after byte. */
    ev(m, CW_HEAP_ALLOC, BASE, 17, 0, S_LEAK);
    ev(m, CW_HEAP_ALLOC, BASE + 17, 1, 0, S_LEAK);
    ev(m, CW_HEAP_ALLOC, BASE + 18, 4093, 0, S_LEAK);
    /* Churn: 5 blocks at one address, each freed; the peak is one block,
     * the largest of them. */
    for (int i = 0; i < 5; i++) {
        ev(m, CW_HEAP_ALLOC, BASE + 0x10000, 100 + (uint64_t)i, 0, S_CHURN);
        ev(m, CW_HEAP_FREE, BASE + 0x10000, 0, 0, 0);
    }
    /* A realloc chain: NULL -> 10 at A, 10 -> 300 at B, 300 -> 299 in place. */
    ev(m, CW_HEAP_REALLOC, BASE + 0x20000, 10, 0, S_REALLOC);
    ev(m, CW_HEAP_REALLOC, BASE + 0x30000, 300, BASE + 0x20000, S_REALLOC);
    ev(m, CW_HEAP_REALLOC, BASE + 0x30000, 299, BASE + 0x30000, S_REALLOC);
    /* Cannot be applied: a free of a block never seen, a zero-size block,
     * and an allocation at a live block's address (its free lost). */
    ev(m, CW_HEAP_FREE, BASE + 0x90000, 0, 0, 0);
    ev(m, CW_HEAP_ALLOC, BASE + 0x40000, 0, 0, S_CHURN);
    ev(m, CW_HEAP_ALLOC, BASE + 0x50000, 8, 0, S_CHURN);
    ev(m, CW_HEAP_ALLOC, BASE + 0x50000, 8, 0, S_CHURN);
    ev(m, CW_HEAP_FREE, BASE + 0x50000, 0, 0, 0);

    cw_heap_losses_t loss = {.dropped = 3, .torn = 1, .truncated = 2};
    cw_heap_report_t *r;
    ASSERT_OK(cw_heap_model_report(m, stacks, &loss, &r));
    cw_heap_model_destroy(m);
    ASSERT_EQ(r->nprocs, 1);
    const cw_heap_proc_report_t *p = &r->procs[0];
    ASSERT_EQ(p->pid, PID);
    ASSERT_STR_EQ(p->name, "truth");

    const cw_heap_stack_report_t *s = stack_of(p, "truth!truth_leak");
    ASSERT_U64_EQ(s->figs.outstanding_bytes, 17 + 1 + 4093);
    ASSERT_U64_EQ(s->figs.outstanding_count, 3);
    ASSERT_U64_EQ(s->figs.alloc_bytes, 17 + 1 + 4093);
    ASSERT_U64_EQ(s->figs.alloc_count, 3);
    ASSERT_U64_EQ(s->figs.freed_count, 0);
    ASSERT_U64_EQ(s->figs.peak_bytes, 17 + 1 + 4093);
    ASSERT_TRUE(s == &p->stacks[0]); /* the most outstanding first */

    s = stack_of(p, "truth!truth_churn");
    ASSERT_U64_EQ(s->figs.outstanding_bytes, 0);
    ASSERT_U64_EQ(s->figs.outstanding_count, 0);
    ASSERT_U64_EQ(s->figs.alloc_bytes, 100 + 101 + 102 + 103 + 104 + 8 + 8);
    ASSERT_U64_EQ(s->figs.alloc_count, 7);
    ASSERT_U64_EQ(s->figs.freed_bytes, s->figs.alloc_bytes);
    ASSERT_U64_EQ(s->figs.freed_count, 7);
    ASSERT_U64_EQ(s->figs.peak_bytes, 104);

    s = stack_of(p, "truth!truth_realloc");
    ASSERT_U64_EQ(s->figs.outstanding_bytes, 299);
    ASSERT_U64_EQ(s->figs.outstanding_count, 1);
    ASSERT_U64_EQ(s->figs.alloc_count, 3);
    ASSERT_U64_EQ(s->figs.alloc_bytes, 10 + 300 + 299);
    ASSERT_U64_EQ(s->figs.freed_bytes, 10 + 300);
    ASSERT_U64_EQ(s->figs.peak_bytes, 300);

    ASSERT_U64_EQ(p->totals.outstanding_bytes, 17 + 1 + 4093 + 299);
    ASSERT_U64_EQ(p->totals.outstanding_count, 4);
    ASSERT_U64_EQ(r->unknown_frees, 1);
    ASSERT_U64_EQ(r->zero_allocs, 1);
    ASSERT_U64_EQ(r->reused, 1);
    ASSERT_U64_EQ(r->losses.dropped, 3);
    ASSERT_U64_EQ(r->losses.torn, 1);
    ASSERT_U64_EQ(r->losses.truncated, 2);
    ASSERT_TRUE(r->to_ns == now);

    char *j = cw_heap_report_json(r);
    ASSERT_TRUE(j != NULL);
    ASSERT_TRUE(strstr(j, "\"outstanding_bytes\":4111,\"outstanding_count\":3") != NULL);
    ASSERT_TRUE(strstr(j, "\"dropped_events\":3") != NULL);
    ASSERT_TRUE(strstr(j, "\"truncated_stacks\":2") != NULL);
    ASSERT_TRUE(strstr(j, "\"frames\":[\"truth!main\",\"truth!truth_leak\"]") != NULL);
    free(j);
    cw_heap_report_free(r);
}

/* Clock readings out of order (two threads) are applied in channel order. */
static void test_time_clamped(void)
{
    cw_heap_model_t *m;
    ASSERT_OK(cw_heap_model_create(now, &m));
    ev(m, CW_HEAP_ALLOC, BASE, 64, 0, S_LEAK);
    now -= 10;
    ev(m, CW_HEAP_FREE, BASE, 0, 0, 0);
    cw_heap_report_t *r;
    ASSERT_OK(cw_heap_model_report(m, stacks, NULL, &r));
    cw_heap_model_destroy(m);
    ASSERT_EQ(r->nprocs, 1); /* an unannounced pid gets an instance */
    ASSERT_U64_EQ(r->procs[0].totals.outstanding_bytes, 0);
    ASSERT_U64_EQ(r->procs[0].totals.freed_bytes, 64);
    cw_heap_report_free(r);
    now += 20;
}

/* The stack of a diff's JSON whose innermost frame is fn: {bytes, count}. */
static void diff_of(const char *diff, const char *fn, double *bytes, double *count)
{
    cJSON *j = cJSON_Parse(diff), *s;
    ASSERT_TRUE(j != NULL);
    *bytes = *count = 0;
    cJSON_ArrayForEach(s, cJSON_GetObjectItemCaseSensitive(j, "stacks"))
    {
        cJSON *fr = cJSON_GetObjectItemCaseSensitive(s, "frames");
        cJSON *last = cJSON_GetArrayItem(fr, cJSON_GetArraySize(fr) - 1);
        if (last && strcmp(last->valuestring, fn) == 0) {
            *bytes = cJSON_GetNumberValue(cJSON_GetObjectItemCaseSensitive(s, "bytes_delta"));
            *count = cJSON_GetNumberValue(cJSON_GetObjectItemCaseSensitive(s, "count_delta"));
        }
    }
    cJSON_Delete(j);
}

static void test_snapshots_and_diff(void)
{
    cw_heap_model_t *m;
    ASSERT_OK(cw_heap_model_create(now, &m));
    for (int i = 0; i < 3; i++)
        ev(m, CW_HEAP_ALLOC, BASE + 0x100 * (uint64_t)i, 40, 0, S_LEAK);
    ASSERT_OK(cw_heap_model_snapshot(m, now++)); /* 1: leak 3 x 40 */
    ev(m, CW_HEAP_ALLOC, BASE + 0x300, 40, 0, S_LEAK);
    ev(m, CW_HEAP_ALLOC, BASE + 0x400, 40, 0, S_LEAK);
    ev(m, CW_HEAP_ALLOC, BASE + 0x1000, 500, 0, S_CHURN);
    ev(m, CW_HEAP_FREE, BASE, 0, 0, 0);
    ASSERT_OK(cw_heap_model_snapshot(m, now++)); /* 2: leak 4 x 40, churn 500 */
    ev(m, CW_HEAP_FREE, BASE + 0x1000, 0, 0, 0);
    for (int i = 0; i < CW_HEAP_MAX_SNAPSHOTS; i++) /* 62 more, then 2 skipped */
        ASSERT_OK(cw_heap_model_snapshot(m, now++));
    cw_heap_report_t *r;
    ASSERT_OK(cw_heap_model_report(m, stacks, NULL, &r));
    cw_heap_model_destroy(m);
    ASSERT_EQ(r->nsnapshots, CW_HEAP_MAX_SNAPSHOTS);
    ASSERT_U64_EQ(r->snapshots_skipped, 2);
    const cw_heap_snapshot_t *s1 = &r->snapshots[0], *s2 = &r->snapshots[1];
    ASSERT_EQ(s1->nstacks, 1);
    ASSERT_U64_EQ(s1->stacks[0].bytes, 120);
    ASSERT_U64_EQ(s1->stacks[0].count, 3);
    ASSERT_STR_EQ(s1->stacks[0].frames[1], "truth!truth_leak");
    ASSERT_EQ(s2->nstacks, 2);
    ASSERT_U64_EQ(s2->stacks[0].bytes, 500); /* largest first */
    ASSERT_U64_EQ(s2->stacks[1].bytes, 160);
    ASSERT_U64_EQ(s2->stacks[1].count, 4);
    ASSERT_TRUE(s2->ts_ns > s1->ts_ns);
    char *json = cw_heap_report_json(r);
    ASSERT_TRUE(json != NULL);
    cw_heap_report_free(r);

    cw_diag_t d = {{0}};
    char *diff = NULL;
    double b, c;
    ASSERT_OK(cw_heap_diff_json(json, "1", "2", &diff, &d));
    diff_of(diff, "truth!truth_leak", &b, &c);
    ASSERT_EQ(b, 40);
    ASSERT_EQ(c, 1);
    diff_of(diff, "truth!truth_churn", &b, &c);
    ASSERT_EQ(b, 500);
    ASSERT_EQ(c, 1);
    ASSERT_TRUE(strstr(diff, "\"bytes_delta\":540") != NULL);
    free(diff);
    ASSERT_OK(cw_heap_diff_json(json, "2", "end", &diff, &d));
    diff_of(diff, "truth!truth_churn", &b, &c);
    ASSERT_EQ(b, -500); /* freed after snapshot 2 */
    diff_of(diff, "truth!truth_leak", &b, &c);
    ASSERT_EQ(b, 0); /* unchanged: left out */
    free(diff);
    ASSERT_OK(cw_heap_diff_json(json, "start", "end", &diff, &d));
    diff_of(diff, "truth!truth_leak", &b, &c);
    ASSERT_EQ(b, 160);
    ASSERT_EQ(c, 4);
    free(diff);
    ASSERT_EQ(cw_heap_diff_json(json, "0", "end", &diff, &d), CW_EINVAL);
    ASSERT_TRUE(strstr(d.msg, "from 1 to 64") != NULL);
    ASSERT_EQ(cw_heap_diff_json(json, "65", "end", &diff, &d), CW_EINVAL);
    ASSERT_EQ(cw_heap_diff_json("{\"layer\":\"commit\"}", "start", "end", &diff, &d), CW_EPARSE);
    ASSERT_EQ(cw_heap_diff_json("not json", "start", "end", &diff, &d), CW_EPARSE);
    ASSERT_TRUE(diff == NULL);
    /* The text form: largest growth first, innermost frame first. */
    ASSERT_OK(cw_heap_diff_json(json, "1", "2", &diff, &d));
    FILE *f = tmpfile();
    ASSERT_OK(cw_heap_diff_print(diff, 1, f));
    rewind(f);
    char text[2048] = "";
    size_t n = fread(text, 1, sizeof text - 1, f);
    text[n] = '\0';
    fclose(f);
    ASSERT_TRUE(strstr(text, "truth!truth_churn\n    truth!main") != NULL);
    ASSERT_TRUE(strstr(text, "(1 more stacks") != NULL);
    free(diff);
    free(json);
}

/* The bound on live blocks: past it allocations are counted, not held,
 * and their frees are frees of unknown blocks; a free makes room again,
 * and an exec's image takes its blocks with it. */
static void test_bound(void)
{
    cw_heap_model_t *m;
    ASSERT_OK(cw_heap_model_create(now, &m));
    cw_heap_model_limit(m, 2);
    ASSERT_OK(cw_heap_model_start(m, PID, now++, "truth", NULL));
    ev(m, CW_HEAP_ALLOC, BASE, 10, 0, S_LEAK);
    ev(m, CW_HEAP_ALLOC, BASE + 0x100, 20, 0, S_LEAK);
    ev(m, CW_HEAP_ALLOC, BASE + 0x200, 40, 0, S_LEAK); /* past the bound */
    ev(m, CW_HEAP_FREE, BASE + 0x200, 0, 0, 0);        /* unknown */
    ev(m, CW_HEAP_FREE, BASE, 0, 0, 0);                /* room for one */
    ev(m, CW_HEAP_ALLOC, BASE + 0x300, 80, 0, S_LEAK);
    ev(m, CW_HEAP_ALLOC, BASE + 0x400, 160, 0, S_LEAK); /* past it again */
    /* An exec: the old image's two blocks are gone, so two fit again. */
    ASSERT_OK(cw_heap_model_start(m, PID, now++, "truth", NULL));
    ev(m, CW_HEAP_ALLOC, BASE + 0x500, 1, 0, S_LEAK);
    ev(m, CW_HEAP_ALLOC, BASE + 0x600, 2, 0, S_LEAK);
    cw_heap_report_t *r;
    ASSERT_OK(cw_heap_model_report(m, stacks, NULL, &r));
    cw_heap_model_destroy(m);
    ASSERT_U64_EQ(r->capped, 2);
    ASSERT_U64_EQ(r->unknown_frees, 1);
    uint64_t held = 0;
    for (uint32_t i = 0; i < r->nprocs; i++)
        held += r->procs[i].totals.outstanding_bytes;
    ASSERT_U64_EQ(held, 1 + 2); /* the old image's blocks ended with it */
    char *j = cw_heap_report_json(r);
    ASSERT_TRUE(j != NULL && strstr(j, "\"capped_allocs\":2") != NULL);
    free(j);
    cw_heap_report_free(r);
}


/* The heap layer for the store (cw_heap_model_also): the tracker's
 * output summed into 1 s batches, and the end of the trace releasing
 * what is live at the next second. */
static cw_batch_t *layer_got[8];
static int nlayer_got;

static int layer_capture(void *ctx, cw_batch_t *b)
{
    (void)ctx;
    if (nlayer_got == 8) CW_FAIL("too many batches");
    layer_got[nlayer_got++] = b;
    return 0;
}

static void test_also_layer(void)
{
    const int64_t sec = 1000000000;
    cw_heap_model_t *m;
    cw_agg_t *agg;
    now = 5 * sec;
    ASSERT_OK(cw_heap_model_create(now, &m));
    ASSERT_OK(cw_agg_create(sec, stacks, NULL, 0, 0, layer_capture, NULL, &agg));
    cw_heap_model_also(m, agg);
    ASSERT_OK(cw_heap_model_start(m, PID, now++, "truth", NULL));
    size_t empty = cw_heap_model_memory(m);
    ASSERT_TRUE(empty > 0);
    ev(m, CW_HEAP_ALLOC, BASE, 17, 0, S_LEAK);
    ev(m, CW_HEAP_ALLOC, BASE + 32, 40, 0, S_CHURN);
    ASSERT_TRUE(cw_heap_model_memory(m) > empty); /* the blocks and their peaks */
    now = 6 * sec + 10;
    ev(m, CW_HEAP_FREE, BASE + 32, 0, 0, 0);
    ev(m, CW_HEAP_ALLOC, BASE + 32, 8, 0, S_CHURN);
    ASSERT_EQ(nlayer_got, 1); /* second 5 closed by the event at 6 s */
    ASSERT_OK(cw_heap_model_end(m));
    ASSERT_EQ(nlayer_got, 3); /* second 6, and the end at 7 s */
    uint64_t committed = 0, released = 0;
    for (int i = 0; i < nlayer_got; i++) {
        for (uint32_t k = 0; k < layer_got[i]->commits.n; k++)
            committed += layer_got[i]->commits.v[k].bytes;
        for (uint32_t k = 0; k < layer_got[i]->releases.n; k++)
            released += layer_got[i]->releases.v[k].bytes;
    }
    ASSERT_EQ(layer_got[0]->bucket_ns, 5 * sec);
    ASSERT_EQ(layer_got[2]->bucket_ns, 7 * sec);
    ASSERT_U64_EQ(committed, 17 + 40 + 8);
    ASSERT_U64_EQ(released, committed); /* 40 freed, 25 released at the end */
    ASSERT_EQ(layer_got[2]->releases.n, 2);
    for (int i = 0; i < nlayer_got; i++) cw_batch_free(layer_got[i]);
    cw_heap_model_destroy(m);
    cw_agg_destroy(agg);
    now = 1000;
}

/* A reader's share of /api/health's heap_traces: its model and stacks,
 * refreshed at most every 100 ms, taken back at the end. */
static void test_account(void)
{
    const int64_t ms = 1000000;
    cw_heap_model_t *m;
    ASSERT_OK(cw_heap_model_create(now, &m));
    ASSERT_OK(cw_heap_model_start(m, PID, now++, "truth", NULL));
    int64_t before = cw_mem_get(CW_MEM_HEAP_TRACES);
    cw_heap_account_t acc = {0};
    cw_heap_account(&acc, m, stacks, 1000 * ms);
    int64_t share = (int64_t)(cw_heap_model_memory(m) + cw_stacks_memory(stacks));
    ASSERT_EQ(cw_mem_get(CW_MEM_HEAP_TRACES) - before, share);
    ev(m, CW_HEAP_ALLOC, BASE, 1000, 0, S_LEAK);
    int64_t grown = (int64_t)(cw_heap_model_memory(m) + cw_stacks_memory(stacks));
    ASSERT_TRUE(grown > share);
    cw_heap_account(&acc, m, stacks, 1099 * ms); /* within 100 ms: kept */
    ASSERT_EQ(cw_mem_get(CW_MEM_HEAP_TRACES) - before, share);
    cw_heap_account(&acc, m, stacks, 1100 * ms);
    ASSERT_EQ(cw_mem_get(CW_MEM_HEAP_TRACES) - before, grown);
    cw_heap_account_end(&acc);
    ASSERT_EQ(cw_mem_get(CW_MEM_HEAP_TRACES), before);
    cw_heap_model_destroy(m);
}

int main(void)
{
    ASSERT_OK(cw_stacks_create(&stacks));
    const char *leak[] = {"truth!main", "truth!truth_leak"};
    const char *churn[] = {"truth!main", "truth!truth_churn"};
    const char *re[] = {"truth!main", "truth!truth_realloc"};
    ASSERT_OK(cw_stacks_intern_strings(stacks, leak, 2, &S_LEAK));
    ASSERT_OK(cw_stacks_intern_strings(stacks, churn, 2, &S_CHURN));
    ASSERT_OK(cw_stacks_intern_strings(stacks, re, 2, &S_REALLOC));
    test_exact_bytes();
    test_time_clamped();
    test_snapshots_and_diff();
    test_bound();
    test_also_layer();
    test_account();
    cw_stacks_destroy(stacks);
    TEST_DONE();
}
