/* thread.c - threads, mutexes and condition variables on pthreads. The
 * opaque types of platform.h are allocated here; the condition variable
 * waits on CLOCK_MONOTONIC so a wall-clock step does not stretch a
 * timed wait. */
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "commitwatch/platform.h"

struct cw_thread {
    pthread_t t;
    void (*fn)(void *);
    void *arg;
};
struct cw_mutex {
    pthread_mutex_t m;
};
struct cw_cond {
    pthread_cond_t c;
};

static void *trampoline(void *p)
{
    cw_thread_t *t = p;
    t->fn(t->arg);
    return NULL;
}

/* Started and joined as win/thread.c does, in form only. */
int cw_thread_start(cw_thread_t **out, void (*fn)(void *), void *arg)
{
    cw_thread_t *t = malloc(sizeof *t);
    if (!t) return CW_ENOMEM;
    t->fn = fn;
    t->arg = arg;
    if (pthread_create(&t->t, NULL, trampoline, t) != 0) {
        free(t);
        return CW_ENOMEM;
    }
    *out = t;
    return 0;
}

void cw_thread_join(cw_thread_t *t)
{
    if (!t) return;
    pthread_join(t->t, NULL);
    free(t);
}

/* Allocates size bytes and sets them up with init (pthread's 0 or an
 * error number): the object, or NULL when either fails. */
static void *create(size_t size, int (*init)(void *obj))
{
    void *o = malloc(size);
    if (o && init(o) != 0) {
        free(o);
        return NULL;
    }
    return o;
}

static int mutex_init(void *m)
{
    return pthread_mutex_init(&((cw_mutex_t *)m)->m, NULL);
}

/* Timed waits measure CLOCK_MONOTONIC (see the file's comment). */
static int cond_init(void *c)
{
    pthread_condattr_t a;
    pthread_condattr_init(&a);
    pthread_condattr_setclock(&a, CLOCK_MONOTONIC);
    int rc = pthread_cond_init(&((cw_cond_t *)c)->c, &a);
    pthread_condattr_destroy(&a);
    return rc;
}

/* The mutex and the condition variable are created and destroyed alike (and as
 * win/thread.c's are): thin wrappers, one per type, the same in form only. */
int cw_mutex_create(cw_mutex_t **out)
{
    return (*out = create(sizeof **out, mutex_init)) ? 0 : CW_ENOMEM;
}

void cw_mutex_destroy(cw_mutex_t *m)
{
    if (!m) return;
    pthread_mutex_destroy(&m->m);
    free(m);
}

void cw_mutex_lock(cw_mutex_t *m)
{
    pthread_mutex_lock(&m->m);
}

void cw_mutex_unlock(cw_mutex_t *m)
{
    pthread_mutex_unlock(&m->m);
}

int cw_cond_create(cw_cond_t **out)
{
    return (*out = create(sizeof **out, cond_init)) ? 0 : CW_ENOMEM;
}

void cw_cond_destroy(cw_cond_t *c)
{
    if (!c) return;
    pthread_cond_destroy(&c->c);
    free(c);
}

void cw_cond_wait(cw_cond_t *c, cw_mutex_t *m)
{
    pthread_cond_wait(&c->c, &m->m);
}

bool cw_cond_timedwait(cw_cond_t *c, cw_mutex_t *m, int64_t timeout_ns)
{
    int64_t due = cw_plat_mono_ns() + (timeout_ns > 0 ? timeout_ns : 0);
    struct timespec t = {(time_t)(due / CW_NS_PER_S), (long)(due % CW_NS_PER_S)};
    return pthread_cond_timedwait(&c->c, &m->m, &t) == 0;
}

void cw_cond_signal(cw_cond_t *c)
{
    pthread_cond_signal(&c->c);
}

void cw_cond_broadcast(cw_cond_t *c)
{
    pthread_cond_broadcast(&c->c);
}

void cw_thread_background(void)
{
    /* On Linux a thread id given to setpriority changes that thread alone. */
    id_t tid = (id_t)syscall(SYS_gettid);
    errno = 0;
    int now = getpriority(PRIO_PROCESS, tid);
    if (now == -1 && errno) return;
    (void)setpriority(PRIO_PROCESS, tid, now + 10 > 19 ? 19 : now + 10);
}
