/* writer.c - the store writer thread (cw_writer): a bounded FIFO of
 * batches filled by the core thread and drained by one thread that owns
 * the read-write cw_store.
 *
 * DESIGN. Two threads touch a cw_writer: the core thread (submit, stop)
 * and the writer thread (loop). Everything in the struct below `lock` is
 * guarded by it. submit blocks while the queue is full (back-pressure on
 * the source instead of unbounded memory). The thread takes what is
 * queued when it wakes, up to half the capacity, and stores it in one
 * transaction (cw_store_write_many, group commit): while SQLite commits,
 * the core fills the other half, so under load a transaction holds many
 * buckets and its fixed cost (commit, WAL frames of the pages the
 * buckets share, tier updates) is paid once for them. Batches taken count
 * against the capacity until they are stored, so at most max_queued
 * batches are alive, as before, and a crash loses at most those (at
 * real-time pace none is waiting: a bucket's commit ends long before the
 * next closes; docs/RELIABILITY.md, "Crash consistency", measures it and
 * says why the service's capacity stays 64); a failed transaction fails
 * all its batches. The first write error is kept
 * (sticky): later batches are freed unwritten, and submit and stop return
 * it. stop lets the thread drain what is queued, then joins it.
 *
 * A full disk (CW_ENOSPC) is not sticky: the thread keeps the batches of
 * the failed transaction, says so once through the state callback, and
 * tries the same transaction again every retry_ns (1 s) until it
 * commits; meanwhile the queue fills and submit blocks (the source is
 * held back: a live source counts what its kernel buffers drop as lost).
 * Nothing stored is touched: the transaction was rolled back. When it
 * commits, the callback says the error has cleared. stop during the wait
 * gives up: the error becomes sticky and those batches are lost (the
 * rows a full disk would not take).
 *
 * With a journal (cw_writer_set_journal, journal.c), each batch is also
 * appended to it as it is queued, and the writer tells it which batches it
 * took and how many are stored, so the file it has stored can be emptied:
 * a kill then loses no queued batch.
 *
 * Threads, mutexes and condition variables come from the platform layer
 * (platform.h). */
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "commitwatch/batch.h"
#include "commitwatch/platform.h"
#include "commitwatch/store.h"

/* ---- the writer ----------------------------------------------------------- */

struct cw_writer {
    cw_store_t *store; /* borrowed; used by the writer thread only */
    cw_thread_t *thread;
    cw_mutex_t *lock;
    cw_cond_t *not_empty, *not_full;
    /* guarded by lock: */
    cw_batch_t **ring;
    cw_batch_t **taken; /* writer thread only: the batches of one transaction */
    uint32_t cap, head, count;
    uint32_t taken_n; /* batches the thread is storing (count against cap) */
    bool stopping;
    int err;
    cw_diag_t diag;
    bool full;           /* a transaction waits for disk space (retrying) */
    atomic_bool abandon; /* cw_writer_abandon: give up waiting for space */
    int64_t retry_ns;
    cw_writer_state_fn on_state; /* called by the writer thread, unlocked */
    void *state_ctx;
    cw_journal_t *journal; /* NULL: none; every call under lock */
    uint64_t stored;       /* batches stored (for the journal) */
    /* cw_writer_on_submit: the core thread's, read by cw_writer_emit only */
    cw_writer_submit_fn on_submit;
    void *submit_ctx;
    cw_diag_t *submit_d;
};

/* Waits up to retry_ns or until stop; true to try again. Called locked. */
static bool wait_retry(cw_writer_t *w)
{
    int64_t until = cw_plat_mono_ns() + w->retry_ns;
    while (!w->stopping && !atomic_load(&w->abandon)) {
        int64_t left = until - cw_plat_mono_ns();
        if (left <= 0) return true;
        cw_cond_timedwait(w->not_empty, w->lock, left);
    }
    return false;
}

static void writer_main(void *arg)
{
    cw_writer_t *w = arg;
    cw_diag_t d;
    cw_mutex_lock(w->lock);
    for (;;) {
        while (!w->count && !w->stopping)
            cw_cond_wait(w->not_empty, w->lock);
        if (!w->count) break; /* stopping and drained */
        uint32_t n = w->count, most = w->cap / 2 ? w->cap / 2 : 1;
        if (n > most) n = most;
        for (uint32_t i = 0; i < n; i++)
            w->taken[i] = w->ring[(w->head + i) % w->cap];
        w->head = (w->head + n) % w->cap;
        w->count -= n;
        w->taken_n = n;
        if (w->journal) cw_journal_taken(w->journal);
        int failed = w->err;
        cw_mutex_unlock(w->lock);

        int err = 0;
        bool full = false; /* the last attempt failed for want of space */
        while (!failed) {
            err = cw_store_write_many(w->store, (const cw_batch_t *const *)w->taken, n, &d);
            if (err != CW_ENOSPC) break;
            cw_mutex_lock(w->lock);
            cw_writer_state_fn fn = w->on_state;
            void *ctx = w->state_ctx;
            w->full = true;
            cw_mutex_unlock(w->lock);
            if (!full && fn) fn(ctx, err, d.msg);
            full = true;
            cw_mutex_lock(w->lock);
            bool again = wait_retry(w);
            cw_mutex_unlock(w->lock);
            if (!again) break;
        }
        if (full && !err && w->on_state) w->on_state(w->state_ctx, 0, "");
        for (uint32_t i = 0; i < n; i++)
            cw_batch_free(w->taken[i]);

        cw_mutex_lock(w->lock);
        w->full = false;
        w->taken_n = 0;
        if (!err && !failed && w->journal) cw_journal_stored(w->journal, w->stored += n);
        cw_cond_signal(w->not_full);
        if (err && !w->err) {
            w->err = err;
            w->diag = d;
        }
    }
    cw_mutex_unlock(w->lock);
}

/* Frees w and what it holds, also half made by cw_writer_start (what it
 * did not make is NULL, and the destroy functions take NULL). The thread
 * has ended or never started. A teardown list alike to engine.c's (and
 * other ones) in form only. */
static void writer_free(cw_writer_t *w)
{
    cw_cond_destroy(w->not_full);
    cw_cond_destroy(w->not_empty);
    cw_mutex_destroy(w->lock);
    free(w->taken);
    free(w->ring);
    free(w);
}

int cw_writer_start(cw_store_t *s, uint32_t max_queued, cw_writer_t **out)
{
    cw_writer_t *w = calloc(1, sizeof *w);
    int err = CW_ENOMEM;
    if (!w) return CW_ENOMEM;
    w->store = s;
    w->cap = max_queued ? max_queued : 1;
    w->retry_ns = CW_NS_PER_S;
    if (!(w->ring = calloc(w->cap, sizeof *w->ring)) ||
        !(w->taken = calloc(w->cap, sizeof *w->taken)) || (err = cw_mutex_create(&w->lock)) ||
        (err = cw_cond_create(&w->not_empty)) || (err = cw_cond_create(&w->not_full)) ||
        (err = cw_thread_start(&w->thread, writer_main, w))) {
        writer_free(w);
        return err;
    }
    *out = w;
    return 0;
}

void cw_writer_on_state(cw_writer_t *w, cw_writer_state_fn fn, void *ctx, int64_t retry_ns)
{
    cw_mutex_lock(w->lock);
    w->on_state = fn;
    w->state_ctx = ctx;
    if (retry_ns > 0) w->retry_ns = retry_ns;
    cw_mutex_unlock(w->lock);
}

void cw_writer_abandon(cw_writer_t *w)
{
    if (w) atomic_store(&w->abandon, true);
}

void cw_writer_set_journal(cw_writer_t *w, cw_journal_t *j)
{
    cw_mutex_lock(w->lock);
    w->journal = j;
    cw_mutex_unlock(w->lock);
}

int cw_writer_submit(cw_writer_t *w, cw_batch_t *b)
{
    int err;
    cw_mutex_lock(w->lock);
    /* Timed waits: cw_writer_abandon (a stop request, maybe from a
     * signal handler) cannot signal the condition variable. */
    while (w->count + w->taken_n >= w->cap && !w->err &&
           !(w->full && atomic_load(&w->abandon)))
        cw_cond_timedwait(w->not_full, w->lock, INT64_C(100000000));
    err = w->err ? w->err : w->count + w->taken_n >= w->cap ? CW_ESTOPPED : 0;
    if (!err) {
        if (w->journal) cw_journal_append(w->journal, b);
        w->ring[(w->head + w->count) % w->cap] = b;
        w->count++;
        cw_cond_signal(w->not_empty);
        b = NULL;
    }
    cw_mutex_unlock(w->lock);
    cw_batch_free(b); /* not queued: the writer has failed */
    return err;
}

void cw_writer_on_submit(cw_writer_t *w, cw_writer_submit_fn fn, void *ctx, cw_diag_t *d)
{
    w->on_submit = fn;
    w->submit_ctx = ctx;
    w->submit_d = d;
}

int cw_writer_emit(void *ctx, cw_batch_t *b)
{
    cw_writer_t *w = ctx;
    if (!w) {
        cw_batch_free(b);
        return CW_ESTOPPED;
    }
    int rc = cw_writer_submit(w, b);
    if (rc == CW_ESTOPPED)
        return cw_diag_set(w->submit_d, rc,
                           "stopped while the database's disk was full: the buckets not yet "
                           "stored were dropped");
    /* The hook (the alert engine's kick) costs a signal per batch; the
     * engine evaluates once the writer has committed (or at its next
     * wake). */
    if (rc == 0 && w->on_submit) w->on_submit(w->submit_ctx);
    return rc;
}

int cw_writer_stop(cw_writer_t *w, cw_diag_t *d)
{
    int err;
    if (!w) return 0;
    cw_mutex_lock(w->lock);
    w->stopping = true;
    cw_cond_signal(w->not_empty);
    cw_mutex_unlock(w->lock);
    cw_thread_join(w->thread);
    err = w->err;
    if (err && d) *d = w->diag;
    /* Everything stored: the files are done with; else they keep what a
     * later run can still store (a full disk's batches). */
    cw_journal_close(w->journal, err != 0);
    writer_free(w);
    return err;
}
