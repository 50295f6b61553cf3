/* test_retag.c - a stored database's stack tags follow the rules: a tagger
 * with another rules hash re-tags every stored stack (figures by tag then
 * use the new tags), the same hash does nothing, and a failure changes
 * nothing. */
#include <sqlite3.h>
#include <stdio.h>

#include "commitwatch/batch.h"
#include "commitwatch/event.h"
#include "commitwatch/retag.h"
#include "commitwatch/stacktags.h"
#include "commitwatch/store.h"
#include "store/store_internal.h"
#include "test.h"

static cw_tagger_t *tagger_from(const char *xml)
{
    cw_stacktags_t *r;
    cw_tagger_t *t;
    cw_diag_t d = {""};
    ASSERT_OK(cw_stacktags_create(&r));
    if (cw_stacktags_load_buffer(r, "rules", xml, strlen(xml), &d)) CW_FAIL("%s", d.msg);
    ASSERT_OK(cw_stacktags_tagger(r, &t));
    return t;
}

static const char *RULES_A =
    "<Tag Name=''>"
    " <Tag Name='VirtualAlloc'><Entrypoint Module='ntdll' Method='NtAllocateVirtualMemory'/></Tag>"
    " <Tag Name='Windows Heap' Priority='10'><Entrypoint Module='ntdll' "
    "Method='RtlpAllocateHeap*'/></Tag>"
    "</Tag>";
/* B: the heap rule is gone, and main's own code gets a tag. */
static const char *RULES_B =
    "<Tag Name=''>"
    " <Tag Name='VirtualAlloc'><Entrypoint Module='ntdll' Method='NtAllocateVirtualMemory'/></Tag>"
    " <Tag Name='App' Priority='5'><Entrypoint Module='MemoryTestApp' Method='Operation1'/></Tag>"
    "</Tag>";

/* The tag the store reports for the stack whose second frame is frame1. */
static const char *reported_tag(cw_store_t *st, const char *frame1)
{
    static char tag[128];
    cw_report_t *rep;
    cw_diag_t d = {""};
    if (cw_store_report(st, INT64_MIN, INT64_MAX, true, &rep, &d)) CW_FAIL("%s", d.msg);
    tag[0] = '\0';
    for (uint32_t p = 0; p < rep->nprocs; p++)
        for (uint32_t i = 0; i < rep->procs[p].nstacks; i++) {
            const cw_stack_report_t *s = &rep->procs[p].stacks[i];
            if (s->nframes > 1 && strcmp(s->frames[1], frame1) == 0)
                snprintf(tag, sizeof tag, "%s", s->tag);
        }
    cw_report_free(rep);
    return tag;
}

int main(void)
{
    char path[1024];
    const char *dir = getenv("CW_BUILD");
    snprintf(path, sizeof path, "%s/test_retag.db", dir ? dir : ".");
    const char *sfx[] = {"", "-wal", "-shm"};
    for (int i = 0; i < 3; i++) {
        char p[1100];
        snprintf(p, sizeof p, "%s%s", path, sfx[i]);
        remove(p);
    }

    cw_store_t *st;
    cw_diag_t d = {""};
    if (cw_store_open(path, NULL, &st, &d)) CW_FAIL("%s", d.msg);

    cw_tagger_t *ta = tagger_from(RULES_A), *tb = tagger_from(RULES_B);
    ASSERT_TRUE(strcmp(cw_tagger_rules_hash(ta), cw_tagger_rules_hash(tb)) != 0);

    /* Three stacks, stored with A's tags, as the pipeline would. */
    cw_stacks_t *s;
    ASSERT_OK(cw_stacks_create(&s));
    const char *heap[] = {"MemoryTestApp!main", "MemoryTestApp!InnerLoopOperation",
                          "ntdll!RtlAllocateHeap", "ntdll!RtlpAllocateHeapInternal",
                          "ntdll!NtAllocateVirtualMemory"};
    const char *temp[] = {"MemoryTestApp!main", "MemoryTestApp!Operation1",
                          "MemoryTestApp!ManipulateTemporaryBuffer", "KernelBase!VirtualAlloc",
                          "ntdll!NtAllocateVirtualMemory"};
    const char *step[] = {"MemoryTestApp!main", "KernelBase!VirtualAlloc",
                          "ntdll!NtAllocateVirtualMemory"};
    uint32_t ids[3];
    ASSERT_OK(cw_stacks_intern_strings(s, heap, 5, &ids[0]));
    ASSERT_OK(cw_stacks_intern_strings(s, temp, 5, &ids[1]));
    ASSERT_OK(cw_stacks_intern_strings(s, step, 3, &ids[2]));
    cw_batch_t *b;
    const int64_t bucket = 1000LL * 1000000000LL;
    ASSERT_OK(cw_batch_create(bucket, 1000000000LL, &b));
    ASSERT_OK(cw_batch_add_proc(b, 1, 4242, bucket, CW_TS_NEVER, "MemoryTestApp.exe", NULL));
    for (uint32_t f = 1; f < cw_stacks_frame_count(s); f++)
        ASSERT_OK(cw_batch_add_frame(b, f, cw_stacks_frame_text(s, f)));
    int64_t total = 0;
    for (int i = 0; i < 3; i++) {
        uint32_t n;
        const uint32_t *fr = cw_stacks_frames(s, ids[i], &n);
        const char *tag = cw_tagger_tag_name(ta, cw_tagger_tag(ta, s, ids[i]));
        ASSERT_OK(cw_batch_add_stack(b, ids[i], fr, n, tag));
        cw_row_commit_t c = {1, ids[i], bucket, 65536u * (uint64_t)(i + 1), 1};
        ASSERT_OK(cw_batch_add_commit(b, &c));
        total += (int64_t)c.bytes;
    }
    cw_row_activity_t act = {1, 3, total, total, bucket};
    ASSERT_OK(cw_batch_add_activity(b, &act));
    if (cw_store_write(st, b, &d)) CW_FAIL("%s", d.msg);
    cw_batch_free(b);
    ASSERT_STR_EQ(reported_tag(st, "MemoryTestApp!InnerLoopOperation"), "Windows Heap");
    ASSERT_STR_EQ(reported_tag(st, "MemoryTestApp!Operation1"), "VirtualAlloc");
    ASSERT_STR_EQ(reported_tag(st, "KernelBase!VirtualAlloc"), "VirtualAlloc");

    /* No hash stored yet: the first pass runs, finds nothing to change,
     * and records A's hash. */
    cw_retag_result_t res;
    if (cw_retag_store(st, ta, &res, &d)) CW_FAIL("%s", d.msg);
    ASSERT_TRUE(res.ran);
    ASSERT_EQ(res.stacks, 3);
    ASSERT_EQ(res.changed, 0);
    char *h = NULL;
    ASSERT_OK(cw_store_meta_get(st, CW_RETAG_META_KEY, &h, &d));
    ASSERT_STR_EQ(h, cw_tagger_rules_hash(ta));
    free(h);
    /* Same rules: nothing to do. */
    ASSERT_OK(cw_retag_store(st, ta, &res, &d));
    ASSERT_TRUE(!res.ran);

    /* The rules change: every stored stack is tagged with B. */
    if (cw_retag_store(st, tb, &res, &d)) CW_FAIL("%s", d.msg);
    ASSERT_TRUE(res.ran);
    ASSERT_EQ(res.stacks, 3);
    ASSERT_EQ(res.changed, 2);
    ASSERT_STR_EQ(reported_tag(st, "MemoryTestApp!InnerLoopOperation"), "VirtualAlloc");
    ASSERT_STR_EQ(reported_tag(st, "MemoryTestApp!Operation1"), "App");
    ASSERT_STR_EQ(reported_tag(st, "KernelBase!VirtualAlloc"), "VirtualAlloc");
    cw_store_close(st);

    /* Persisted: reopening with B finds nothing to do. */
    if (cw_store_open(path, NULL, &st, &d)) CW_FAIL("%s", d.msg);
    ASSERT_OK(cw_retag_store(st, tb, &res, &d));
    ASSERT_TRUE(!res.ran);

    /* A damaged stack row: an error that names it, and nothing changes. */
    ASSERT_EQ(
        sqlite3_exec(st->db, "UPDATE stacks SET frames = x'010203' WHERE id = 2", NULL, NULL, NULL),
        SQLITE_OK);
    ASSERT_EQ(cw_retag_store(st, ta, &res, &d), CW_EDB);
    ASSERT_TRUE(strstr(d.msg, "stack 2") != NULL);
    ASSERT_TRUE(!res.ran);
    ASSERT_OK(cw_store_meta_get(st, CW_RETAG_META_KEY, &h, &d));
    ASSERT_STR_EQ(h, cw_tagger_rules_hash(tb));
    free(h);
    sqlite3_stmt *q;
    ASSERT_EQ(sqlite3_prepare_v2(st->db, "SELECT tag FROM stacks WHERE id = 1", -1, &q, NULL),
              SQLITE_OK);
    ASSERT_EQ(sqlite3_step(q), SQLITE_ROW);
    ASSERT_STR_EQ((const char *)sqlite3_column_text(q, 0), "VirtualAlloc"); /* B's, kept */
    sqlite3_finalize(q);

    cw_store_close(st);
    cw_stacks_destroy(s);
    cw_tagger_destroy(ta);
    cw_tagger_destroy(tb);
    TEST_DONE();
}
