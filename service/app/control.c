/* control.c - the requests that reach a running service from outside
 * (service.h): stop and reload, from signal handlers, the Windows service
 * control handler or an HTTP worker. One service per process: the flags
 * are process-wide. Any thread; only atomic stores and the stop hooks of
 * the source session and the writer (async-signal-safe). */
#include <inttypes.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "app/svc.h"
#include "commitwatch/log.h"

atomic_bool cw__svc_stop_flag;
atomic_bool cw__svc_reload_flag;
/* The source's session, for cw_service_stop(); set while the service runs. */
cw_source_session_t *_Atomic cw__svc_session;
/* The running writer, for cw_service_stop() to end a wait for disk space. */
cw_writer_t *_Atomic cw__svc_writer;

void cw_service_stop(void)
{
    atomic_store(&cw__svc_stop_flag, true);
    cw_source_session_stop(atomic_load(&cw__svc_session));
    cw_writer_abandon(atomic_load(&cw__svc_writer));
}

void cw_service_reload(void)
{
    atomic_store(&cw__svc_reload_flag, true);
}

bool cw_service_stopping(void)
{
    return atomic_load(&cw__svc_stop_flag);
}
