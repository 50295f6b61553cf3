/* store_pool.c - a pool of read-only handles on one database, shared by
 * the threads that serve reads (the HTTP workers).
 *
 * DESIGN. A read handle's caches (store_report.c, store_series.c) fill
 * from SQL on its first report or series (240 - 350 ms for the last hour
 * of 1,000 processes) and are cheap afterwards. With a handle per worker
 * thread, each of the 16 workers filled its own, so a client's requests,
 * landing on one worker after another, kept meeting cold handles, and
 * every worker's connection held its own page cache. Here a request takes
 * a handle for its duration and gives it back: the most recently returned
 * one first (a stack), so one client, or a few, keep reusing the same warm
 * handles, and at most `max` connections exist. A request that finds all
 * `max` in use waits for one.
 *
 * Each handle's caches stay its own and are used by one thread at a time
 * (whoever holds the handle), so their answers are what a handle alone
 * gives (tests/unit/test_store_cache.c, "pool"): no cache is read by two
 * threads at once and no lock is held while querying. SQLite connections
 * are opened SQLITE_OPEN_NOMUTEX, which allows a connection to move
 * between threads as long as one thread uses it at a time; the pool's
 * mutex orders the hand-over.
 *
 * A handle idle for CW_STORE_POOL_IDLE_NS (30 s) gives its room back (tidy, run
 * by every put): the top of the stack, the one a returning client gets,
 * keeps its connection but drops its read caches; the ones under it are
 * closed. After a burst of reads (the soak's checks of many processes:
 * 4 handles' report caches and raw tails, 15 MiB after 30 minutes, and
 * their page caches) nothing stays at its peak once the reads stop; a
 * dashboard that polls keeps one handle warm.
 *
 * Thread: every function may be called from any thread; a handle got
 * from the pool is used by the getter alone until it puts it back. */
#include <stdlib.h>

#include "commitwatch/platform.h"
#include "commitwatch/store.h"

/* An idle handle and when it was put back (monotonic ns). */
typedef struct idle_handle {
    cw_store_t *s;
    int64_t since;
} idle_handle_t;

struct cw_store_pool {
    char *path;
    uint32_t max;        /* connections at most */
    uint32_t open;       /* connections that exist (idle or in use) */
    uint32_t nidle;      /* idle[0..nidle): the last one returned on top */
    idle_handle_t *idle; /* room for max */
    cw_mutex_t *mu;
    cw_cond_t *freed;
};

int cw_store_pool_create(const char *path, uint32_t max, cw_store_pool_t **out, cw_diag_t *d)
{
    *out = NULL;
    if (max == 0) return cw_diag_set(d, CW_EINVAL, "store pool: at least one handle is needed");
    cw_store_pool_t *p = calloc(1, sizeof *p);
    if (p) {
        p->max = max;
        p->path = cw_strdup(path);
        p->idle = calloc(max, sizeof *p->idle);
    }
    if (!p || !p->path || !p->idle || cw_mutex_create(&p->mu) || cw_cond_create(&p->freed)) {
        cw_store_pool_destroy(p);
        return cw_diag_set(d, CW_ENOMEM, "out of memory creating the read handle pool");
    }
    *out = p;
    return 0;
}

int cw_store_pool_get(cw_store_pool_t *p, cw_store_t **out, cw_diag_t *d)
{
    *out = NULL;
    cw_mutex_lock(p->mu);
    while (p->nidle == 0 && p->open >= p->max)
        cw_cond_wait(p->freed, p->mu);
    if (p->nidle) {
        *out = p->idle[--p->nidle].s;
        cw_mutex_unlock(p->mu);
        return 0;
    }
    p->open++; /* this slot is ours while we open outside the lock */
    cw_mutex_unlock(p->mu);
    cw_store_t *s = NULL;
    int rc = cw_store_open_readonly(p->path, &s, d);
    if (rc) {
        cw_mutex_lock(p->mu);
        p->open--;
        cw_cond_signal(p->freed); /* a waiter may try opening in our place */
        cw_mutex_unlock(p->mu);
        return rc;
    }
    cw_store_tune_for_reads(s);
    *out = s;
    return 0;
}

void cw_store_pool_put(cw_store_pool_t *p, cw_store_t *s)
{
    int64_t now = cw_plat_mono_ns();
    if (s) {
        cw_mutex_lock(p->mu);
        p->idle[p->nidle++] = (idle_handle_t){s, now}; /* nidle < max: s was counted in open */
        cw_cond_signal(p->freed);
        cw_mutex_unlock(p->mu);
    }
    cw_store_pool_tidy(p, now, CW_STORE_POOL_IDLE_NS);
}

uint32_t cw_store_pool_tidy(cw_store_pool_t *p, int64_t now_mono, int64_t idle_ns)
{
    cw_store_t *drop = NULL, **gone = NULL;
    uint32_t ngone = 0, keep = 0;
    cw_mutex_lock(p->mu);
    if (p->nidle && now_mono - p->idle[p->nidle - 1].since >= idle_ns) {
        /* Taken out while its caches are freed, so no getter meets it
         * half done (still counted in open: nidle never passes max). */
        drop = p->idle[--p->nidle].s;
    }
    for (uint32_t i = 0; i < p->nidle; i++)
        if (now_mono - p->idle[i].since >= idle_ns) ngone++;
    if (ngone && (gone = malloc(ngone * sizeof *gone)) != NULL) {
        ngone = 0;
        for (uint32_t i = 0; i < p->nidle; i++) {
            if (now_mono - p->idle[i].since >= idle_ns) {
                gone[ngone++] = p->idle[i].s;
                continue;
            }
            p->idle[keep++] = p->idle[i];
        }
        p->nidle = keep;
        p->open -= ngone;
    } else {
        ngone = 0; /* no memory for the list: closed at a later tidy */
    }
    cw_mutex_unlock(p->mu);
    for (uint32_t i = 0; i < ngone; i++)
        cw_store_close(gone[i]);
    free(gone);
    if (drop) {
        cw_store_drop_read_caches(drop);
        cw_mutex_lock(p->mu);
        /* Back under the ones returned meanwhile, still marked idle
         * since its last use (no second drop: it holds nothing). */
        for (uint32_t i = p->nidle; i > 0; i--)
            p->idle[i] = p->idle[i - 1];
        p->idle[0] = (idle_handle_t){drop, now_mono};
        p->nidle++;
        cw_cond_signal(p->freed);
        cw_mutex_unlock(p->mu);
    }
    return ngone;
}

uint32_t cw_store_pool_open_count(cw_store_pool_t *p)
{
    cw_mutex_lock(p->mu);
    uint32_t n = p->open;
    cw_mutex_unlock(p->mu);
    return n;
}

/* A teardown list, alike to other destroy functions in form only. */
void cw_store_pool_destroy(cw_store_pool_t *p)
{
    if (!p) return;
    for (uint32_t i = 0; i < p->nidle; i++)
        cw_store_close(p->idle[i].s);
    cw_cond_destroy(p->freed);
    cw_mutex_destroy(p->mu);
    free(p->idle);
    free(p->path);
    free(p);
}
