/* test_writer.c - the store writer thread: batches submitted from this
 * thread are all stored, in order, through a queue much smaller than
 * their number (submit blocks); what is queued goes in one transaction
 * (group commit); the first write error is sticky and comes back from
 * submit and stop; stop drains before joining; the writer as a batch
 * sink (cw_writer_emit) calls its submit hook per batch queued. */
#include <sqlite3.h>
#include <stdatomic.h>
#include <stdio.h>
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

/* Caps the file at its current pages (0) or at `pages`. */
static void set_page_limit(cw_store_t *s, int64_t pages)
{
    cw_diag_t d;
    char sql[64];
    if (!pages) ASSERT_OK(cw__store_query_int(s, "PRAGMA page_count", &pages, &d));
    snprintf(sql, sizeof sql, "PRAGMA max_page_count = %lld", (long long)pages);
    ASSERT_EQ(sqlite3_exec(s->db, sql, NULL, NULL, NULL), SQLITE_OK);
}

struct full_seen {
    cw_store_t *store;
    bool make_room; /* lift the limit from the callback (the writer thread) */
    cw_writer_t *w; /* else abandon this writer from the callback */
    atomic_int full, cleared, err;
    char msg[1024];
};

/* The writer thread's state callback. */
static void on_state(void *ctx, int err, const char *msg)
{
    struct full_seen *f = ctx;
    if (err) {
        snprintf(f->msg, sizeof f->msg, "%s", msg);
        if (f->make_room)
            set_page_limit(f->store, 1073741823);
        else
            cw_writer_abandon(f->w);
        atomic_fetch_add(&f->full, 1);
    } else {
        atomic_fetch_add(&f->cleared, 1);
    }
    atomic_store(&f->err, err);
}

/* cw_writer_on_submit's hook: counts the batches queued. */
static void count_kick(void *ctx)
{
    (*(int *)ctx)++;
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
    uint64_t txns = s->test.transactions;
    ASSERT_OK(cw_writer_start(s, 32, &w)); /* 16 a transaction */
    for (int64_t i = 300; i < 310; i++)
        ASSERT_OK(cw_writer_submit(w, batch_at(i, 1)));
    cw_plat_sleep_ns(50000000);
    ASSERT_EQ(sqlite3_exec(blocker, "ROLLBACK", NULL, NULL, NULL), SQLITE_OK);
    sqlite3_close(blocker);
    ASSERT_OK(cw_writer_stop(w, &d));
    ASSERT_TRUE(s->test.transactions - txns >= 1 && s->test.transactions - txns <= 2);
    ASSERT_OK(cw_store_report(s, INT64_MIN, INT64_MAX, false, &r, &d));
    ASSERT_EQ(r->to_ns, 310 * S);
    ASSERT_U64_EQ(r->procs[0].events, 310);
    cw_report_free(r);

    /* A full disk (here the database's page limit: SQLITE_FULL, as a
     * full file system gives) is not sticky: the writer says so once,
     * retries the same transaction, and resumes when there is room (the
     * callback, on the writer thread, makes room); the queue holds the
     * source back meanwhile. Nothing stored is lost. */
    {
        struct full_seen room = {.store = s, .make_room = true};
        int64_t i = 310;
        set_page_limit(s, 0);
        ASSERT_OK(cw_writer_start(s, 4, &w));
        cw_writer_on_state(w, on_state, &room, 20000000);
        while (atomic_load(&room.cleared) == 0 && i < 100000)
            ASSERT_OK(cw_writer_submit(w, batch_at(i++, 1)));
        int64_t last = i + 20;
        for (; i < last; i++)
            ASSERT_OK(cw_writer_submit(w, batch_at(i, 1)));
        ASSERT_OK(cw_writer_stop(w, &d));
        ASSERT_EQ(atomic_load(&room.full), 1);
        ASSERT_TRUE(strstr(room.msg, "disk is full") != NULL);
        ASSERT_EQ(atomic_load(&room.cleared), 1);
        ASSERT_EQ(atomic_load(&room.err), 0);
        ASSERT_OK(cw_store_report(s, INT64_MIN, INT64_MAX, false, &r, &d));
        ASSERT_EQ(r->to_ns, last * S);
        ASSERT_U64_EQ(r->procs[0].events, (uint64_t)last); /* every bucket, none lost */
        cw_report_free(r);

        /* Abandoned (a stop request) while the disk is still full: the
         * error is returned, and what was stored before stays. */
        struct full_seen stuck = {.store = s, .make_room = false};
        set_page_limit(s, 0);
        ASSERT_OK(cw_writer_start(s, 4, &w));
        stuck.w = w;
        cw_writer_on_state(w, on_state, &stuck, 20000000);
        while (atomic_load(&stuck.full) == 0 && cw_writer_submit(w, batch_at(i++, 1)) == 0)
            ;
        ASSERT_EQ(cw_writer_stop(w, &d), CW_ENOSPC);
        ASSERT_TRUE(strstr(d.msg, "disk is full") != NULL);
        ASSERT_EQ(atomic_load(&stuck.cleared), 0);
        set_page_limit(s, 1073741823);
        ASSERT_OK(cw_store_report(s, INT64_MIN, INT64_MAX, false, &r, &d));
        ASSERT_TRUE(r->to_ns >= last * S);
        ASSERT_U64_EQ(r->procs[0].events, (uint64_t)(r->to_ns / S));
        cw_report_free(r);
    }

    /* A batch out of time order fails the writer; the error sticks. */
    ASSERT_OK(cw_writer_start(s, 1, &w));
    ASSERT_OK(cw_writer_submit(w, batch_at(1000, 1)));
    int rc = cw_writer_submit(w, batch_at(10, 1)); /* may already fail */
    ASSERT_TRUE(rc == 0 || rc == CW_EINVAL);
    int later = 0;
    for (int64_t i = 1001; i < 1100 && !later; i++) {
        later = cw_writer_submit(w, batch_at(i, 1));
        if (!later) cw_plat_sleep_ns(1000000);
    }
    ASSERT_EQ(later, CW_EINVAL);
    ASSERT_EQ(cw_writer_stop(w, &d), CW_EINVAL);
    ASSERT_TRUE(strstr(d.msg, "time order") != NULL);
    ASSERT_EQ(cw_writer_stop(NULL, &d), 0);

    /* The writer as a batch sink (cw_writer_emit): each batch queued
     * calls the submit hook; with no writer a batch is freed and
     * refused. */
    int kicks = 0;
    cw_diag_t ed = {{0}};
    ASSERT_OK(cw_writer_start(s, 2, &w));
    cw_writer_on_submit(w, count_kick, &kicks, &ed);
    for (int64_t i = 2000; i < 2010; i++)
        ASSERT_OK(cw_writer_emit(w, batch_at(i, 1)));
    ASSERT_EQ(kicks, 10);
    ASSERT_OK(cw_writer_stop(w, &d));
    ASSERT_EQ(cw_writer_emit(NULL, batch_at(3000, 1)), CW_ESTOPPED);

    cw_store_close(s);
    ASSERT_OK(cw_test_rmtree(dir));
    TEST_DONE();
}
