/* health.c - the figures and the state the service shows (/api/health,
 * /metrics, the log) besides the pipeline's counters: the core thread's
 * memory, steps of the wall clock, and a live source that fails and comes
 * back (degraded mode, with the down time stored). Core thread. */
#include <inttypes.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "app/svc.h"
#include "commitwatch/log.h"

/* The core thread's figures for /api/health (memstat.h): once a second
 * while ticking, and when the source ends (a replay at full speed does
 * not tick). */
void cw__svc_publish_memory(svc_t *s, bool now)
{
    int64_t mono = cw_plat_mono_ns();
    if (!now && mono - s->mem_at < CW_NS_PER_S) return;
    s->mem_at = mono;
    cw_mem_set(CW_MEM_TRACKER, (int64_t)cw_tracker_memory(cw_pipeline_tracker(s->pipe)));
    cw_mem_set(CW_MEM_STACKS, (int64_t)cw_stacks_memory(s->stacks));
}

/* Notes a step of the wall clock in the log. Buckets never follow it: their
 * times are the source's (perf: the monotonic clock, anchored to the wall
 * clock once at start; replay: the trace's, paced by the monotonic clock),
 * so a step reorders and drops nothing; it only leaves the stored times
 * apart from the new wall time until the service restarts. */
void cw__svc_note_clock_step(svc_t *s)
{
    int64_t step =
        cw_clock_step(&s->clock_off, cw_plat_wall_ns(), cw_plat_mono_ns(), CLOCK_STEP_NOTE_NS);
    if (!step) return;
    char at[CW_UTC_TEXT];
    CW_LOGW("the wall clock stepped %s by %.3f s (now %s); buckets keep the source's own clock "
            "(%s), so none is reordered or dropped, and until a restart stored times differ "
            "from the wall clock by that much",
            step > 0 ? "forward" : "back", (double)(step > 0 ? step : -step) / 1e9,
            cw_utc_text(cw_plat_wall_ns(), 0, at),
            s->status.data_clock ? "the input's times, paced by the monotonic clock"
                                 : "the monotonic clock, anchored to the wall clock at start");
}

/* Stores that the source is down from `at` (down) or up again at `at`
 * (!down), so the series show a gap there and the "source_down" rule
 * sees it (downtime.h). A failure is logged, and only loses the gap. */
void cw__svc_record_downtime(svc_t *s, bool down, int64_t at)
{
    cw_diag_t dd = {{0}};
    if (!s->side && cw_store_open_side(s->db_path, &s->side, &dd) != 0) {
        CW_LOGW("recording the source's down time in %s failed: %s", s->db_path, dd.msg);
        s->side = NULL;
        return;
    }
    if (cw_store_downtime_get(s->side, &s->down, &dd) == 0) {
        if (down)
            cw_downtime_begin(&s->down, at);
        else if (!cw_downtime_end(&s->down, at))
            return;
        if (cw_store_downtime_set(s->side, &s->down, &dd) == 0) return;
    }
    CW_LOGW("recording the source's down time in %s failed: %s", s->db_path, dd.msg);
}

/* The live source failed (at open, or while it ran: why says how; the
 * data ends at `at`): the service is degraded (status, /api/health,
 * /metrics, the stored down time) and tries it again on the backoff
 * schedule; the log says so at most once a minute. */
void cw__svc_source_failed(svc_t *s, const char *name, const char *why, int64_t at)
{
    int64_t mono = cw_plat_mono_ns(), wall = cw_plat_wall_ns();
    bool first = s->backoff.failures == 0;
    if (first) {
        s->down_since = wall;
        cw__svc_record_downtime(s, true, at);
    }
    int64_t next = cw_backoff_fail(&s->backoff, mono);
    cw_status_source_down(&s->status, why, s->down_since, s->backoff.failures,
                          wall + (next - mono));
    if (!cw_backoff_log_due(&s->backoff, mono)) return;
    if (first)
        CW_LOGE("the %s source failed: %s. The service goes on serving the stored data "
                "(degraded: /api/health says why) and tries the source again in %.0f s, then at "
                "doubling intervals up to 5 min",
                name, why, (double)(next - mono) / 1e9);
    else
        CW_LOGE("the %s source still fails after %" PRIu32 " tries: %s; next try in %.0f s "
                "(logged at most once a minute)",
                name, s->backoff.failures, why, (double)(next - mono) / 1e9);
}

/* The source is open: up again after failures (logged), or for the first
 * time. */
void cw__svc_source_opened(svc_t *s, const char *name)
{
    uint32_t failed = cw_backoff_success(&s->backoff);
    int64_t now = cw_plat_wall_ns();
    cw_status_source_up(&s->status, now);
    if (failed) {
        cw__svc_record_downtime(s, false, now);
        char at[CW_UTC_TEXT];
        CW_LOGI("the %s source works again after %" PRIu32 " failed tries (down since %s): "
                "ingesting",
                name, failed, cw_utc_text(s->down_since, 0, at));
    }
}
