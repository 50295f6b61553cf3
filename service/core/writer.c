/* writer.c - the store writer thread (cw_writer): a bounded FIFO of
 * batches filled by the core thread and drained by one thread that owns
 * the read-write cw_store.
 *
 * DESIGN. Two threads touch a cw_writer: the core thread (submit, stop)
 * and the writer thread (loop). Everything in the struct below `lock` is
 * guarded by it. submit blocks while the queue is full (back-pressure on
 * the source instead of unbounded memory); the first write error is kept
 * (sticky): later batches are freed unwritten, and submit and stop return
 * it. stop lets the thread drain what is queued, then joins it.
 *
 * The thread primitives are the few wrappers right below, the only place
 * that names pthreads, so that a Windows port swaps them for a shim. */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "commitwatch/batch.h"
#include "commitwatch/store.h"

/* ---- thread primitives (the one place that names pthreads) --------------- */

typedef pthread_t thread_t;
typedef pthread_mutex_t mutex_t;
typedef pthread_cond_t cond_t;

static int thread_start(thread_t *t, void *(*fn)(void *), void *arg)
{
    return pthread_create(t, NULL, fn, arg) == 0 ? 0 : CW_ENOMEM;
}
static void thread_join(thread_t t)
{
    pthread_join(t, NULL);
}
static int mutex_init(mutex_t *m)
{
    return pthread_mutex_init(m, NULL) == 0 ? 0 : CW_ENOMEM;
}
static void mutex_destroy(mutex_t *m)
{
    pthread_mutex_destroy(m);
}
static void mutex_lock(mutex_t *m)
{
    pthread_mutex_lock(m);
}
static void mutex_unlock(mutex_t *m)
{
    pthread_mutex_unlock(m);
}
static int cond_init(cond_t *c)
{
    return pthread_cond_init(c, NULL) == 0 ? 0 : CW_ENOMEM;
}
static void cond_destroy(cond_t *c)
{
    pthread_cond_destroy(c);
}
static void cond_wait(cond_t *c, mutex_t *m)
{
    pthread_cond_wait(c, m);
}
static void cond_signal(cond_t *c)
{
    pthread_cond_signal(c);
}

/* ---- the writer ----------------------------------------------------------- */

struct cw_writer {
    cw_store_t *store; /* borrowed; used by the writer thread only */
    thread_t thread;
    mutex_t lock;
    cond_t not_empty, not_full;
    /* guarded by lock: */
    cw_batch_t **ring;
    uint32_t cap, head, count;
    bool stopping;
    int err;
    cw_diag_t diag;
};

static void *writer_main(void *arg)
{
    cw_writer_t *w = arg;
    cw_diag_t d;
    mutex_lock(&w->lock);
    for (;;) {
        while (!w->count && !w->stopping)
            cond_wait(&w->not_empty, &w->lock);
        if (!w->count) break; /* stopping and drained */
        cw_batch_t *b = w->ring[w->head];
        w->head = (w->head + 1) % w->cap;
        w->count--;
        int failed = w->err;
        cond_signal(&w->not_full);
        mutex_unlock(&w->lock);

        int err = failed ? 0 : cw_store_write(w->store, b, &d);
        cw_batch_free(b);

        mutex_lock(&w->lock);
        if (err && !w->err) {
            w->err = err;
            w->diag = d;
        }
    }
    mutex_unlock(&w->lock);
    return NULL;
}

int cw_writer_start(cw_store_t *s, uint32_t max_queued, cw_writer_t **out)
{
    cw_writer_t *w = calloc(1, sizeof *w);
    int err = CW_ENOMEM;
    if (!w) return CW_ENOMEM;
    w->store = s;
    w->cap = max_queued ? max_queued : 1;
    if (!(w->ring = calloc(w->cap, sizeof *w->ring))) goto fail_ring;
    if ((err = mutex_init(&w->lock))) goto fail_ring;
    if ((err = cond_init(&w->not_empty))) goto fail_mutex;
    if ((err = cond_init(&w->not_full))) goto fail_cond1;
    if ((err = thread_start(&w->thread, writer_main, w))) goto fail_cond2;
    *out = w;
    return 0;
fail_cond2:
    cond_destroy(&w->not_full);
fail_cond1:
    cond_destroy(&w->not_empty);
fail_mutex:
    mutex_destroy(&w->lock);
fail_ring:
    free(w->ring);
    free(w);
    return err;
}

int cw_writer_submit(cw_writer_t *w, cw_batch_t *b)
{
    int err;
    mutex_lock(&w->lock);
    while (w->count == w->cap && !w->err)
        cond_wait(&w->not_full, &w->lock);
    err = w->err;
    if (!err) {
        w->ring[(w->head + w->count) % w->cap] = b;
        w->count++;
        cond_signal(&w->not_empty);
        b = NULL;
    }
    mutex_unlock(&w->lock);
    cw_batch_free(b); /* not queued: the writer has failed */
    return err;
}

int cw_writer_stop(cw_writer_t *w, cw_diag_t *d)
{
    int err;
    if (!w) return 0;
    mutex_lock(&w->lock);
    w->stopping = true;
    cond_signal(&w->not_empty);
    mutex_unlock(&w->lock);
    thread_join(w->thread);
    err = w->err;
    if (err && d) *d = w->diag;
    cond_destroy(&w->not_full);
    cond_destroy(&w->not_empty);
    mutex_destroy(&w->lock);
    free(w->ring);
    free(w);
    return err;
}
