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
