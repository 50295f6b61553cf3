/* heaptracing.c - the heap drill-down as the service runs it: the set of
 * heap traces (heaptraces.h) over the service's database, started with a
 * live source only (its pids are this machine's), and the two ways in:
 * the HTTP server's hooks (POST /api/processes/{id}/heap-trace, stop,
 * progress) and the alert engine's capsule (a rule's heap_trace). Core
 * thread for start and stop; the hooks run on HTTP workers and the
 * engine's thread, and only call heaptraces.h, which is safe from any. */
#include <stdio.h>

#include "app/svc.h"
#include "commitwatch/heaptraces.h"
#include "commitwatch/log.h"

void cw__svc_heaps_end(svc_t *s)
{
    if (!s->heaps) return;
    cw_heaptraces_end(s->heaps);
    cw__svc_heaps_drain(s);
    cw_layerfeed_counts_t c;
    cw_layerfeed_counts(s->feed, &c);
    if (c.attached || c.dropped || c.rows_left_out)
        CW_LOGI("heap traces: %llu seconds of the heap layer stored, %llu dropped, %llu rows of "
                "other processes (a traced program's children) left out",
                (unsigned long long)c.attached, (unsigned long long)c.dropped,
                (unsigned long long)c.rows_left_out);
}

int cw__svc_heaps_start(svc_t *s)
{
    if (!s->live) return 0;
    cw_heaptraces_opts_t o = {0};
    o.db_path = s->db_path;
    o.max_running = s->cfg.heap_trace_max_running > UINT32_MAX
                        ? UINT32_MAX
                        : (uint32_t)s->cfg.heap_trace_max_running;
    o.max_duration_ns = s->cfg.heap_trace_max_duration_ns;
    if (cw_layerfeed_create(&s->feed) != 0)
        return cw_diag_set(s->d, CW_ENOMEM, "heap traces: out of memory");
    o.feed = s->feed;
    cw_diag_t d = {{0}};
    if (cw_heaptraces_start(&o, &s->heaps, &d) != 0)
        return cw_diag_set(s->d, CW_ENOMEM, "heap traces: %s", d.msg);
    return 0;
}

void cw__svc_heaps_drain(svc_t *s)
{
    if (!s->feed) return;
    int rc = cw_layerfeed_drain(s->feed, s->stacks, s->agg);
    if (rc != 0 && !s->feed_warned) {
        s->feed_warned = true;
        CW_LOGW("heap traces: a second of the heap layer could not be stored (%s); the seconds "
                "dropped are counted in the log line at the service's stop",
                cw_strerror(rc));
    }
}

static int http_ask(void *ctx, uint32_t pid, uint32_t proc, const char *process,
                    int64_t duration_ns, int64_t snapshot_every_ns, int64_t *id, cw_diag_t *d)
{
    cw_heaptrace_ask_t a = {.pid = pid,
                            .proc = proc,
                            .process = process,
                            .trigger = "api",
                            .duration_ns = duration_ns,
                            .snapshot_every_ns = snapshot_every_ns};
    return cw_heaptraces_ask(ctx, &a, id, d);
}

static int http_stop(void *ctx, int64_t id)
{
    return cw_heaptraces_stop_one(ctx, id);
}

static bool http_progress(void *ctx, int64_t id, uint64_t *events, bool *attached)
{
    return cw_heaptraces_progress(ctx, id, events, attached);
}

const cw_http_heap_ops_t cw__svc_heap_http_ops = {http_ask, http_stop, http_progress};

/* A series started firing under a rule with heap_trace: trace its
 * process. What cannot start is recorded in the store by the ask and
 * logged here; the alert goes on either way. */
void cw__svc_heap_on_fire(void *ctx, const cw_alert_fire_t *f)
{
    cw_heaptrace_ask_t a = {.pid = f->pid,
                            .proc = f->proc,
                            .process = f->process,
                            .trigger = "alert",
                            .alert_series = f->series_id,
                            .rule = f->rule,
                            .duration_ns = f->heap_trace_ns};
    int64_t id = 0;
    cw_diag_t d = {{0}};
    if (cw_heaptraces_ask(ctx, &a, &id, &d) != 0)
        CW_LOGW("alerts: rule %s fired for %s (pid %u) but its heap trace could not start: %s",
                f->rule, f->process ? f->process : "the machine", f->pid, d.msg);
}
