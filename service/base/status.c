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
}
