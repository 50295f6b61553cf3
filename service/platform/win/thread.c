/* thread.c - threads, mutexes and condition variables on Win32: threads
 * from _beginthreadex (the C runtime's, so its per-thread state is set
 * up), SRW locks and CONDITION_VARIABLEs. */
#include "platform/win/win_internal.h"

#include <process.h>
#include <stdlib.h>

#include "commitwatch/platform.h"

struct cw_thread {
    HANDLE h;
    void (*fn)(void *);
    void *arg;
};
struct cw_mutex {
    SRWLOCK l;
};
struct cw_cond {
    CONDITION_VARIABLE c;
};

static unsigned __stdcall trampoline(void *p)
{
    cw_thread_t *t = p;
    t->fn(t->arg);
    return 0;
}

/* Started and joined as posix/thread.c does, in form only: each OS's own
 * thread call and handle. */
int cw_thread_start(cw_thread_t **out, void (*fn)(void *), void *arg)
{
    cw_thread_t *t = malloc(sizeof *t);
    if (!t) return CW_ENOMEM;
    t->fn = fn;
    t->arg = arg;
    t->h = (HANDLE)_beginthreadex(NULL, 0, trampoline, t, 0, NULL);
    if (!t->h) {
        free(t);
        return CW_ENOMEM;
    }
    *out = t;
    return 0;
}

void cw_thread_join(cw_thread_t *t)
{
    if (!t) return;
    WaitForSingleObject(t->h, INFINITE);
    CloseHandle(t->h);
    free(t);
}

/* Allocates size bytes and sets them up with init (Win32's initializers
 * cannot fail): the object, or NULL. posix/thread.c's create() has the
 * same contract, its init able to fail. */
static void *create(size_t size, void (*init)(void *obj))
{
    void *o = malloc(size);
    if (o) init(o);
    return o;
}

static void mutex_init(void *m)
{
    InitializeSRWLock(&((cw_mutex_t *)m)->l);
}

static void cond_init(void *c)
{
    InitializeConditionVariable(&((cw_cond_t *)c)->c);
}

int cw_mutex_create(cw_mutex_t **out)
{
    return (*out = create(sizeof **out, mutex_init)) ? 0 : CW_ENOMEM;
}

void cw_mutex_destroy(cw_mutex_t *m)
{
    free(m); /* an SRW lock needs no cleanup */
}

void cw_mutex_lock(cw_mutex_t *m)
{
    AcquireSRWLockExclusive(&m->l);
}

void cw_mutex_unlock(cw_mutex_t *m)
{
    ReleaseSRWLockExclusive(&m->l);
}

int cw_cond_create(cw_cond_t **out)
{
    return (*out = create(sizeof **out, cond_init)) ? 0 : CW_ENOMEM;
}

void cw_cond_destroy(cw_cond_t *c)
{
    free(c);
}

void cw_cond_wait(cw_cond_t *c, cw_mutex_t *m)
{
    SleepConditionVariableSRW(&c->c, &m->l, INFINITE, 0);
}

bool cw_cond_timedwait(cw_cond_t *c, cw_mutex_t *m, int64_t timeout_ns)
{
    int64_t ms = timeout_ns > 0 ? (timeout_ns + 999999) / 1000000 : 0;
    return SleepConditionVariableSRW(&c->c, &m->l, ms > 0x7ffffffe ? 0x7ffffffe : (DWORD)ms, 0) !=
           0;
}

void cw_cond_signal(cw_cond_t *c)
{
    WakeConditionVariable(&c->c);
}

void cw_cond_broadcast(cw_cond_t *c)
{
    WakeAllConditionVariable(&c->c);
}

void cw_thread_background(void)
{
    (void)SetThreadPriority(GetCurrentThread(), THREAD_PRIORITY_BELOW_NORMAL);
}
