/* test_writer.c - the store writer thread: batches submitted from this
 * thread are all stored, in order, through a queue much smaller than
 * their number (submit blocks); what is queued goes in one transaction
 * (group commit); the first write error is sticky and comes back from
 * submit and stop; stop drains before joining. */
#include <sqlite3.h>
#include <stdint.h>

#include "commitwatch/batch.h"
#include "commitwatch/event.h"
#include "commitwatch/platform.h"
#include "commitwatch/store.h"
#include "store/store_internal.h"
#include "test.h"
#include "test_port.h"

#define S INT64_C(1000000000)

static cw_batch_t *batch_at(int64_t sec, uint32_t proc)
{
    cw_batch_t *b;
    ASSERT_OK(cw_batch_create(sec * S, S, &b));
    if (sec == 0) {
        ASSERT_OK(cw_batch_add_stack(b, 0, NULL, 0, "Other"));
        ASSERT_OK(cw_batch_add_proc(b, proc, 42, 0, CW_TS_NEVER, "w.exe", NULL));
    }
    ASSERT_OK(cw_batch_add_commit(b, &(cw_row_commit_t){proc, 0, sec * S, 4096, 1}));
    ASSERT_OK(cw_batch_add_activity(b, &(cw_row_activity_t){proc, 1, 4096, 4096, sec * S}));
    return b;
}

int main(void)
{
    char path[256];
    snprintf(path, sizeof path, "%s/cw_test_writer_XXXXXX", cw_test_tmpdir());
    ASSERT_TRUE(cw_test_mkdtemp(path) != NULL);
    char dir[256];
    snprintf(dir, sizeof dir, "%s", path);
    strcat(path, "/w.db");

    cw_store_t *s;
    cw_writer_t *w;
    cw_diag_t d = {{0}};
    ASSERT_OK(cw_store_open(path, NULL, &s, &d));
    ASSERT_OK(cw_writer_start(s, 2, &w));
    /* A reader with its own handle runs alongside the writer (WAL): every
     * report it gets is consistent, and grows. */
    cw_store_t *ro = NULL;
    uint64_t seen = 0;
    for (int64_t i = 0; i < 300; i++) {
        ASSERT_OK(cw_writer_submit(w, batch_at(i, 1)));
        if (i % 20 != 10) continue;
        if (!ro) ASSERT_OK(cw_store_open_readonly(path, &ro, &d));
        cw_report_t *rr;
        ASSERT_OK(cw_store_report(ro, INT64_MIN, INT64_MAX, false, &rr, &d));
        uint64_t size = rr->nprocs ? rr->procs[0].figs.size_bytes : 0;
        ASSERT_U64_EQ(size, (uint64_t)(rr->to_ns - rr->from_ns) / S * 4096);
        ASSERT_TRUE(size >= seen);
        seen = size;
        cw_report_free(rr);
    }
    cw_store_close(ro);
    ASSERT_OK(cw_writer_stop(w, &d));

    cw_report_t *r;
    ASSERT_OK(cw_store_report(s, INT64_MIN, INT64_MAX, false, &r, &d));
    ASSERT_EQ(r->from_ns, 0);
    ASSERT_EQ(r->to_ns, 300 * S);
    ASSERT_EQ(r->nprocs, 1);
    ASSERT_U64_EQ(r->procs[0].figs.size_bytes, 300 * 4096);
    ASSERT_U64_EQ(r->procs[0].events, 300);
    cw_report_free(r);

    /* Group commit: while another connection holds the write lock the
     * writer waits in its first transaction (busy timeout); the batches
     * submitted meanwhile all go into the next one. */
    sqlite3 *blocker = NULL;
    ASSERT_EQ(sqlite3_open(path, &blocker), SQLITE_OK);
    ASSERT_EQ(sqlite3_exec(blocker, "BEGIN IMMEDIATE", NULL, NULL, NULL), SQLITE_OK);
    uint64_t txns = s->transactions;
    ASSERT_OK(cw_writer_start(s, 32, &w)); /* 16 a transaction */
    for (int64_t i = 300; i < 310; i++)
        ASSERT_OK(cw_writer_submit(w, batch_at(i, 1)));
    cw_plat_sleep_ns(50000000);
    ASSERT_EQ(sqlite3_exec(blocker, "ROLLBACK", NULL, NULL, NULL), SQLITE_OK);
    sqlite3_close(blocker);
    ASSERT_OK(cw_writer_stop(w, &d));
    ASSERT_TRUE(s->transactions - txns >= 1 && s->transactions - txns <= 2);
    ASSERT_OK(cw_store_report(s, INT64_MIN, INT64_MAX, false, &r, &d));
    ASSERT_EQ(r->to_ns, 310 * S);
    ASSERT_U64_EQ(r->procs[0].events, 310);
    cw_report_free(r);

    /* A batch out of time order fails the writer; the error sticks. */
    ASSERT_OK(cw_writer_start(s, 1, &w));
    ASSERT_OK(cw_writer_submit(w, batch_at(310, 1)));
    int rc = cw_writer_submit(w, batch_at(10, 1)); /* may already fail */
    ASSERT_TRUE(rc == 0 || rc == CW_EINVAL);
    int later = 0;
    for (int64_t i = 311; i < 400 && !later; i++) {
        later = cw_writer_submit(w, batch_at(i, 1));
        if (!later) cw_plat_sleep_ns(1000000);
    }
    ASSERT_EQ(later, CW_EINVAL);
    ASSERT_EQ(cw_writer_stop(w, &d), CW_EINVAL);
    ASSERT_TRUE(strstr(d.msg, "time order") != NULL);
    ASSERT_EQ(cw_writer_stop(NULL, &d), 0);

    cw_store_close(s);
    ASSERT_OK(cw_test_rmtree(dir));
    TEST_DONE();
}
