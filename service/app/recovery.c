/* recovery.c - what the service does at its start when the last run into
 * the database did not stop: the batches its writer had queued stored
 * from the pending-batch journal, its open instances ended where its data
 * ends. Core thread, before the writer starts. */
#include <inttypes.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "app/svc.h"
#include "commitwatch/log.h"

/* A run killed while its writer was behind: the batches it had queued
 * are in the journal beside the database (journal.c); stored first. */
int cw__svc_recover_journal(svc_t *s, cw_diag_t *d)
{
    cw_journal_recovered_t r;
    char from[CW_UTC_TEXT], to[CW_UTC_TEXT];
    int rc = cw_journal_recover(s->store, &r, d);
    if (rc != 0) return rc;
    if (r.batches)
        CW_LOGW("the last run into this database did not stop: the %" PRIu32 " closed "
                "bucket(s) it had queued but not stored, %s to %s, are stored now from its "
                "pending-batch journal",
                r.batches, cw_utc_text(r.from_ns, 3, from), cw_utc_text(r.end_ns, 3, to));
    if (r.torn_bytes)
        CW_LOGI("the pending-batch journal ended in %" PRIu64 " bytes of a record cut by the "
                "kill (the bucket being queued then): ignored",
                r.torn_bytes);
    if (r.after_gap)
        CW_LOGW("the pending-batch journal had %" PRIu32 " record(s) past a missing one: not "
                "stored (they may need rows of the missing one)",
                r.after_gap);
    return 0;
}

/* A run that did not stop (killed, power lost) left its instances open:
 * they are ended where its data ends, as a stop would have, before this
 * run stores anything (store_recover.c). */
int cw__svc_end_open(svc_t *s, cw_diag_t *d)
{
    cw_store_ended_t e;
    int rc = cw_store_end_open(s->store, &e, d);
    if (rc != 0 || !e.instances) return rc;
    char at[CW_UTC_TEXT];
    CW_LOGW("the last run into this database did not stop (killed, crashed or the power lost): "
            "its %" PRIu32 " instance(s) still open are ended where its data ends (%s), as a "
            "stop would have; their %" PRIu64 " outstanding bytes are released there, so this "
            "run's rundown does not count them twice",
            e.instances, cw_utc_text(e.at_ns, 0, at), e.bytes);
    if (e.odd)
        CW_LOGW("%" PRIu64 " of the stored sums of those instances did not add up (more released "
                "than committed): left as they are",
                e.odd);
    s->stored_end = e.end_ns;
    return 0;
}
