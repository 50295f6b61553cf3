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
 * batches are alive, as before, and a crash loses at most those; a
 * failed transaction fails all its batches. The first write error is kept
 * (sticky): later batches are freed unwritten, and submit and stop return
 * it. stop lets the thread drain what is queued, then joins it.
 *
 * Threads, mutexes and condition variables come from the platform layer
 * (platform.h). */
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
};

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
        int failed = w->err;
        cw_mutex_unlock(w->lock);

        int err =
            failed ? 0 : cw_store_write_many(w->store, (const cw_batch_t *const *)w->taken, n, &d);
        for (uint32_t i = 0; i < n; i++)
            cw_batch_free(w->taken[i]);

        cw_mutex_lock(w->lock);
        w->taken_n = 0;
        cw_cond_signal(w->not_full);
        if (err && !w->err) {
            w->err = err;
            w->diag = d;
        }
    }
    cw_mutex_unlock(w->lock);
}

int cw_writer_start(cw_store_t *s, uint32_t max_queued, cw_writer_t **out)
{
    cw_writer_t *w = calloc(1, sizeof *w);
    int err = CW_ENOMEM;
    if (!w) return CW_ENOMEM;
    w->store = s;
    w->cap = max_queued ? max_queued : 1;
    if (!(w->ring = calloc(w->cap, sizeof *w->ring)) ||
        !(w->taken = calloc(w->cap, sizeof *w->taken)))
        goto fail_ring;
    if ((err = cw_mutex_create(&w->lock))) goto fail_ring;
    if ((err = cw_cond_create(&w->not_empty))) goto fail_mutex;
    if ((err = cw_cond_create(&w->not_full))) goto fail_cond1;
    if ((err = cw_thread_start(&w->thread, writer_main, w))) goto fail_cond2;
    *out = w;
    return 0;
fail_cond2:
    cw_cond_destroy(w->not_full);
fail_cond1:
    cw_cond_destroy(w->not_empty);
fail_mutex:
    cw_mutex_destroy(w->lock);
fail_ring:
    free(w->taken);
    free(w->ring);
    free(w);
    return err;
}

int cw_writer_submit(cw_writer_t *w, cw_batch_t *b)
{
    int err;
    cw_mutex_lock(w->lock);
    while (w->count + w->taken_n >= w->cap && !w->err)
        cw_cond_wait(w->not_full, w->lock);
    err = w->err;
    if (!err) {
        w->ring[(w->head + w->count) % w->cap] = b;
        w->count++;
        cw_cond_signal(w->not_empty);
        b = NULL;
    }
    cw_mutex_unlock(w->lock);
    cw_batch_free(b); /* not queued: the writer has failed */
    return err;
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
    cw_cond_destroy(w->not_full);
    cw_cond_destroy(w->not_empty);
    cw_mutex_destroy(w->lock);
    free(w->taken);
    free(w->ring);
    free(w);
    return err;
}
