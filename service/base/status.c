/* status.c - initialisation of the service's status record (status.h). */
#include "commitwatch/status.h"

#include <string.h>

#include "commitwatch/common.h"

void cw_status_init(cw_status_t *st, const char *source, bool data_clock, int64_t start_ns,
                    int64_t start_mono_ns)
{
    memset(st, 0, sizeof *st);
    cw_strlcpy(st->source, source ? source : "", sizeof st->source);
    st->start_ns = start_ns;
    st->start_mono_ns = start_mono_ns;
    st->data_clock = data_clock;
    atomic_init(&st->events_ingested, 0);
    atomic_init(&st->source_records, 0);
    atomic_init(&st->events_lost, 0);
    atomic_init(&st->drift_bytes, 0);
    atomic_init(&st->ingest_done, false);
    atomic_init(&st->store_error, 0);
    atomic_init(&st->store_error_since_ns, 0);
    atomic_init(&st->push_last_ok_ns, INT64_MIN);
    atomic_init(&st->push_until_ns, INT64_MIN);
    /* losses and corrections */
    atomic_init(&st->records_foreign, 0);
    atomic_init(&st->records_unpaired, 0);
    atomic_init(&st->records_malformed, 0);
    atomic_init(&st->resyncs, 0);
    atomic_init(&st->corrections, 0);
    atomic_init(&st->corrected_bytes, 0);
    atomic_init(&st->resync_pending, false);
    atomic_init(&st->last_resync_ns, INT64_MIN);
    atomic_flag_clear(&st->config_lock);
    st->config.ok = true;
    st->config.at_ns = start_ns;
    atomic_init(&st->config_loads_begun, 0);
    atomic_init(&st->config_loads_done, 0);
    st->no_source = false;
    atomic_init(&st->source_up, false);
    atomic_init(&st->source_since_ns, INT64_MIN);
    atomic_init(&st->source_retries, 0);
    atomic_init(&st->source_next_try_ns, INT64_MIN);
    atomic_init(&st->source_error_seq, 0);
    for (size_t i = 0; i < sizeof st->source_error; i++)
        atomic_init(&st->source_error[i], 0);
}

/* The config block is a few kB copied rarely (a reload, a health
 * request): a spin lock is enough, and base/ has no OS mutex. */
static void config_lock(cw_status_t *st)
{
    while (atomic_flag_test_and_set_explicit(&st->config_lock, memory_order_acquire)) {
    }
}

void cw_status_config_set(cw_status_t *st, const cw_status_config_t *c)
{
    config_lock(st);
    st->config = *c;
    atomic_flag_clear_explicit(&st->config_lock, memory_order_release);
    if (c->reload) atomic_fetch_add(&st->config_loads_done, 1);
}

void cw_status_config_get(cw_status_t *st, cw_status_config_t *out)
{
    config_lock(st);
    *out = st->config;
    atomic_flag_clear_explicit(&st->config_lock, memory_order_release);
}

/* The source's state is a seqlock: the core thread (the only writer) makes
 * source_error_seq odd, writes, makes it even; a reader copies between two
 * equal even reads. Every byte is an atomic, so a copy that raced with a
 * write is discarded, never undefined. */
static void state_write(cw_status_t *st, bool up, const char *error, int64_t since,
                        uint32_t retries, int64_t next_try)
{
    uint32_t seq = atomic_load_explicit(&st->source_error_seq, memory_order_relaxed);
    atomic_store_explicit(&st->source_error_seq, seq + 1, memory_order_relaxed);
    atomic_thread_fence(memory_order_release);
    size_t n = error ? strlen(error) : 0;
    if (n >= sizeof st->source_error) n = sizeof st->source_error - 1;
    for (size_t i = 0; i < n; i++)
        atomic_store_explicit(&st->source_error[i], error[i], memory_order_relaxed);
    atomic_store_explicit(&st->source_error[n], 0, memory_order_relaxed);
    atomic_store_explicit(&st->source_up, up, memory_order_relaxed);
    atomic_store_explicit(&st->source_since_ns, since, memory_order_relaxed);
    atomic_store_explicit(&st->source_retries, retries, memory_order_relaxed);
    atomic_store_explicit(&st->source_next_try_ns, next_try, memory_order_relaxed);
    atomic_store_explicit(&st->source_error_seq, seq + 2, memory_order_release);
}

void cw_status_source_up(cw_status_t *st, int64_t now)
{
    state_write(st, true, "", now, 0, INT64_MIN);
}

void cw_status_source_down(cw_status_t *st, const char *error, int64_t since, uint32_t retries,
                           int64_t next_try)
{
    state_write(st, false, error, since, retries, next_try);
}

void cw_status_source_get(const cw_status_t *st, cw_source_state_t *out)
{
    cw_status_t *w = (cw_status_t *)st; /* atomic loads of a const object */
    for (;;) {
        uint32_t s1 = atomic_load_explicit(&w->source_error_seq, memory_order_acquire);
        if (!(s1 & 1)) {
            out->up = atomic_load_explicit(&w->source_up, memory_order_relaxed);
            out->since_ns = atomic_load_explicit(&w->source_since_ns, memory_order_relaxed);
            out->retries = atomic_load_explicit(&w->source_retries, memory_order_relaxed);
            out->next_try_ns = atomic_load_explicit(&w->source_next_try_ns, memory_order_relaxed);
            size_t i = 0;
            for (; i < sizeof out->error - 1; i++)
                if (!(out->error[i] = atomic_load_explicit(&w->source_error[i],
                                                           memory_order_relaxed)))
                    break;
            out->error[i] = 0;
            atomic_thread_fence(memory_order_acquire);
            if (atomic_load_explicit(&w->source_error_seq, memory_order_relaxed) == s1) return;
        }
    }
}
