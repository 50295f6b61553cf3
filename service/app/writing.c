/* writing.c - the store writer as the service runs it: started with its
 * journal, its state callback (a full disk: status and log) and its
 * submit hook (the alert engine's wake-up), and the pipeline pointed at
 * it; stopped at a reload and at the end. The batches themselves go from
 * the pipeline to the writer's sink (cw_writer_emit) without passing
 * here. Core thread, but for on_writer_state (the writer thread). */
#include <inttypes.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "app/svc.h"
#include "commitwatch/log.h"

/* Batches that may wait for the writer before the core thread blocks
 * (queued or being stored): what a SIGKILL may lose beside the open
 * bucket, and the writer's largest transaction is half of it
 * (docs/RELIABILITY.md, "Crash consistency", says why 64). A build may
 * set another (-DWRITER_QUEUE=N) to measure the trade. */
#ifndef WRITER_QUEUE
#define WRITER_QUEUE 64
#endif

/* The writer thread's state (cw_writer_on_state): a full disk that it
 * retries, then its end. Logged once each, and shown by /api/health. */
static void on_writer_state(void *ctx, int err, const char *msg)
{
    svc_t *s = ctx;
    if (err) {
        CW_LOGE("%s; ingestion is paused (nothing stored is lost or damaged, the API still "
                "answers) and resumes once the database's disk has room: retrying every second",
                msg);
        atomic_store(&s->status.store_error_since_ns, cw_plat_wall_ns());
    } else {
        CW_LOGI("the database's disk has room again: ingestion resumes");
    }
    atomic_store(&s->status.store_error, err);
}

/* After each batch queued for the writer (cw_writer_on_submit): the alert
 * engine, which reads what is stored, is woken. The engine in force
 * (a reload may replace it) is read at each call. */
static void kick_alerts(void *ctx)
{
    svc_t *s = ctx;
    cw_alert_engine_kick(s->alerts);
}

int cw__svc_writer_start(svc_t *s)
{
    int rc = cw_writer_start(s->store, WRITER_QUEUE, &s->writer);
    if (rc == 0) {
        cw_journal_t *j;
        cw_diag_t jd = {{0}};
        if (cw_journal_open(s->store, &j, &jd) == 0)
            cw_writer_set_journal(s->writer, j);
        else
            CW_LOGW("%s: running without it, so a kill while the writer is behind loses the "
                    "buckets queued for it",
                    jd.msg);
        cw_writer_on_state(s->writer, on_writer_state, s, 0);
        cw_writer_on_submit(s->writer, kick_alerts, s, s->d);
        /* The pipeline's batches go to the writer straight (restarted by
         * a reload: the new one). */
        if (s->pipe) cw_pipeline_set_emit(s->pipe, cw_writer_emit, s->writer);
        atomic_store(&cw__svc_writer, s->writer);
        if (atomic_load(&cw__svc_stop_flag)) cw_writer_abandon(s->writer);
    }
    return rc;
}

int cw__svc_writer_stop(svc_t *s, cw_diag_t *d)
{
    atomic_store(&cw__svc_writer, NULL);
    if (s->pipe) cw_pipeline_set_emit(s->pipe, cw_writer_emit, NULL);
    int rc = cw_writer_stop(s->writer, d);
    s->writer = NULL;
    if (rc == CW_ENOSPC) {
        char why[sizeof d->msg];
        snprintf(why, sizeof why, "%s", d->msg);
        cw_diag_set(d, rc,
                    "%s; stopped before there was room: the buckets not yet stored were "
                    "dropped",
                    why);
    }
    return rc;
}
