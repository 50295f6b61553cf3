/* session.c - one source from open to close, for every command that runs
 * one (`run`, `analyze`, `record`): the check of the options only one
 * source takes, open, the stop hook's view of the open source, run into
 * a sink, close (source.h, "Sessions"). The diagnostics are the source's
 * own, but for that check's. */
#include <string.h>

#include "commitwatch/source.h"

int cw_source_session_open(cw_source_session_t *s, const cw_source_ops_t *ops,
                           const cw_source_opts_t *o, cw_diag_t *d)
{
    memset(s, 0, sizeof *s);
    s->ops = ops;
    s->opts = *o;
    return cw_source_session_reopen(s, d);
}

int cw_source_session_reopen(cw_source_session_t *s, cw_diag_t *d)
{
    int rc = cw_source_check_opts(s->ops, &s->opts, d);
    if (rc == 0 && (rc = s->ops->open(&s->impl, &s->opts, d)) != 0) s->impl = NULL;
    /* Stoppable from here on, not only while it runs: a stop between the
     * caller's last look at its flag and run() still reaches the source,
     * whose run() then returns at once. */
    if (rc == 0) atomic_store(&s->stoppable, s->impl);
    return rc;
}

const char *cw_source_session_platform(const cw_source_session_t *s)
{
    return s->ops->fixed_platform ? s->ops->fixed_platform : s->ops->platform(s->impl);
}

int cw_source_session_run(cw_source_session_t *s, const cw_source_sink_t *sink, cw_diag_t *d)
{
    return s->ops->run(s->impl, sink, d);
}

void cw_source_session_stop(cw_source_session_t *s)
{
    void *impl = s ? atomic_load(&s->stoppable) : NULL;
    if (impl) s->ops->stop(impl);
}

void cw_source_session_close(cw_source_session_t *s)
{
    atomic_store(&s->stoppable, NULL);
    if (s->ops && s->impl) s->ops->close(s->impl);
    s->impl = NULL;
}
