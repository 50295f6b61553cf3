/* heaptraces.c - the service's heap traces (heaptraces.h): the heap
 * drill-down of one process, asked for by the API or an alert, run on a
 * thread of its own and recorded in the store from ask to end.
 *
 * The set keeps the traces that run, and those that ended but whose
 * thread is not joined yet (joined at the next ask, or at the stop); the
 * mutex guards that list. A trace's own state (its row, model and stacks)
 * is its thread's alone; others touch only its atomics (stop, done,
 * progress). Each thread opens its own store handle to write its row. */
#include "commitwatch/heaptraces.h"

#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "commitwatch/common.h"
#include "commitwatch/heap.h"
#include "commitwatch/heap_launch.h"
#include "commitwatch/heapdb.h"
#include "commitwatch/layerfeed.h"
#include "commitwatch/log.h"
#include "commitwatch/platform.h"

#define DEFAULT_MAX_RUNNING 2
#define DEFAULT_MAX_DURATION (3600 * CW_NS_PER_S)
#define DEFAULT_DURATION (300 * CW_NS_PER_S)

typedef struct trace {
    cw_heaptraces_t *h;
    cw_thread_t *thread;
    int64_t id;
    uint32_t pid;
    int64_t snapshot_every;
    atomic_bool stop, done, attached;
    atomic_uint_least64_t progress;
    cw_heap_trace_row_t row; /* the thread's */
} trace_t;

struct cw_heaptraces {
    char db_path[CW_PATH_MAX];
    char preload[CW_PATH_MAX]; /* "": found as heap_launch.h says */
    uint32_t max_running;
    int64_t max_duration, default_duration;
    cw_layerfeed_t *feed; /* where the heap layer's batches go, or NULL (borrowed) */
    atomic_bool shutting;
    cw_mutex_t *mu;
    trace_t **v; /* running, or ended and not joined */
    size_t n, cap;
};

static void trace_free(trace_t *t)
{
    if (!t) return;
    cw_heap_trace_row_clear(&t->row);
    free(t);
}

/* Writes row (with rep and json when given) on a handle of its own. */
static int store_finish(const cw_heaptraces_t *h, const cw_heap_trace_row_t *row,
                        const cw_heap_report_t *rep, const char *json, cw_diag_t *d)
{
    cw_store_t *s = NULL;
    int rc = cw_store_open_side(h->db_path, &s, d);
    if (!rc) rc = cw_store_heap_finish(s, row, rep, json, d);
    cw_store_close(s);
    return rc;
}

static const char *end_reason(const trace_t *t, const cw_heap_launch_result_t *res)
{
    if (res->exited) return "exited";
    if (atomic_load(&t->stop)) return atomic_load(&t->h->shutting) ? "shutdown" : "stopped";
    return "duration";
}

/* The heap layer's batches of trace t (agg.h's emit): to the feed, which
 * counts what it cannot take; the trace goes on either way. */
static int emit_layer(void *ctx, cw_batch_t *b)
{
    trace_t *t = ctx;
    cw_layerfeed_push(t->h->feed, t->id, t->pid, t->row.proc, b, false);
    return 0;
}

/* The trace's thread: attach, read until the end, report, store. */
static void run(void *arg)
{
    trace_t *t = arg;
    cw_heap_trace_row_t *row = &t->row;
    /* Behind the commit level: on a busy machine the heap trace falls
     * behind (its ring fills, events are dropped and counted), not the
     * perf source. */
    cw_thread_background();
    cw_diag_t d = {{0}};
    cw_stacks_t *stacks = NULL;
    cw_heap_model_t *m = NULL;
    cw_heap_report_t *rep = NULL;
    char *json = NULL;
    cw_heap_launch_result_t res = {0};
    cw_agg_t *agg = NULL;
    int rc = cw_stacks_create(&stacks);
    if (!rc) rc = cw_heap_model_create(cw_plat_wall_ns(), &m);
    /* The heap layer's seconds for the store (layerfeed.h). */
    if (!rc && t->h->feed &&
        !(rc = cw_agg_create(CW_NS_PER_S, stacks, NULL, 0, 0, emit_layer, t, &agg)))
        cw_heap_model_also(m, agg);
    if (!rc) {
        cw_heap_launch_args_t a = {.pid = t->pid,
                                   .duration_ns = row->duration_ns,
                                   .preload = t->h->preload[0] ? t->h->preload : NULL,
                                   .stop = &t->stop,
                                   .progress = &t->progress,
                                   .attached = &t->attached,
                                   .snapshot_every_ns = t->snapshot_every};
        rc = cw_heap_launch(&a, stacks, m, &res, &d);
    }
    bool began = atomic_load(&t->attached); /* else started_ns stays NULL */
    row->started_ns = began ? res.start_ns : 0;
    row->ended_ns = cw_plat_wall_ns();
    const char *reason = rc ? NULL : end_reason(t, &res);
    free(row->state);
    row->state =
        cw_strdup(rc                                                                  ? "failed"
                  : strcmp(reason, "stopped") == 0 || strcmp(reason, "shutdown") == 0 ? "stopped"
                                                                                      : "done");
    row->end_reason = reason ? cw_strdup(reason) : NULL;
    if (rc) row->error = cw_strdup(d.msg[0] ? d.msg : cw_strerror(rc));
    /* What was read is reported even when the trace failed part-way. */
    if (m && began && cw_heap_model_report(m, stacks, &res.losses, &rep) == 0) {
        cw_heap_trace_row_figures(row, rep, t->pid);
        json = cw_heap_report_json(rep);
    }
    /* The heap layer's last second, and the end of the trace there. */
    if (agg && m && began && cw_heap_model_end(m) != 0)
        CW_LOGW("heap trace %lld of process %u: its last seconds are not in the store's heap "
                "layer (out of memory)",
                (long long)t->id, t->pid);
    if (t->h->feed) cw_layerfeed_push(t->h->feed, t->id, t->pid, t->row.proc, NULL, true);
    cw_diag_t sd = {{0}};
    if (store_finish(t->h, row, rep, json, &sd) != 0)
        CW_LOGE("heap trace %lld of process %u: cannot store its report: %s", (long long)t->id,
                t->pid, sd.msg);
    else if (rc)
        CW_LOGW("heap trace %lld of process %u failed: %s", (long long)t->id, t->pid, row->error);
    else
        CW_LOGI("heap trace %lld of process %u ended (%s): %llu events, %llu bytes outstanding",
                (long long)t->id, t->pid, reason, (unsigned long long)row->counts.events,
                (unsigned long long)row->totals.outstanding_bytes);
    free(json);
    cw_heap_report_free(rep);
    cw_heap_model_destroy(m);
    cw_agg_destroy(agg);
    cw_stacks_destroy(stacks);
    atomic_store(&t->done, true);
}

int cw_heaptraces_start(const cw_heaptraces_opts_t *o, cw_heaptraces_t **out, cw_diag_t *d)
{
    *out = NULL;
    if (strlen(o->db_path) >= CW_PATH_MAX || (o->preload && strlen(o->preload) >= CW_PATH_MAX))
        return cw_diag_set(d, CW_EINVAL, "heap traces: a path is longer than %d bytes",
                           CW_PATH_MAX - 1);
    cw_heaptraces_t *h = calloc(1, sizeof *h);
    if (!h) return cw_diag_set(d, CW_ENOMEM, "out of memory starting the heap traces");
    cw_strlcpy(h->db_path, o->db_path, sizeof h->db_path);
    if (o->preload) cw_strlcpy(h->preload, o->preload, sizeof h->preload);
    h->max_running = o->max_running ? o->max_running : DEFAULT_MAX_RUNNING;
    h->max_duration = o->max_duration_ns > 0 ? o->max_duration_ns : DEFAULT_MAX_DURATION;
    h->default_duration = o->default_duration_ns > 0 ? o->default_duration_ns : DEFAULT_DURATION;
    h->feed = o->feed;
    if (cw_mutex_create(&h->mu) != 0) {
        cw_heaptraces_stop(h);
        return cw_diag_set(d, CW_ENOMEM, "out of memory starting the heap traces");
    }
    cw_store_t *s = NULL;
    uint64_t n = 0;
    cw_diag_t sd = {{0}};
    if (cw_store_open_side(h->db_path, &s, &sd) == 0 &&
        cw_store_heap_orphans(s, cw_plat_wall_ns(),
                              "the service stopped before the trace ended (killed?); its "
                              "events were not kept",
                              &n, &sd) == 0) {
        if (n)
            CW_LOGW("heap traces: %llu left running by an earlier run marked failed",
                    (unsigned long long)n);
    } else {
        CW_LOGW("heap traces: cannot check the earlier run's traces: %s", sd.msg);
    }
    cw_store_close(s);
    *out = h;
    return 0;
}

/* Joins and frees the traces whose thread has ended, or all of them
 * (they were asked to stop). Under h->mu. */
static void reap(cw_heaptraces_t *h, bool all)
{
    size_t k = 0;
    for (size_t i = 0; i < h->n; i++) {
        if (all || atomic_load(&h->v[i]->done)) {
            cw_thread_join(h->v[i]->thread);
            trace_free(h->v[i]);
        } else {
            h->v[k++] = h->v[i];
        }
    }
    h->n = k;
}

void cw_heaptraces_end(cw_heaptraces_t *h)
{
    if (!h) return;
    atomic_store(&h->shutting, true);
    cw_mutex_lock(h->mu);
    for (size_t i = 0; i < h->n; i++)
        atomic_store(&h->v[i]->stop, true);
    reap(h, true);
    cw_mutex_unlock(h->mu);
}

void cw_heaptraces_stop(cw_heaptraces_t *h)
{
    if (!h) return;
    atomic_store(&h->shutting, true);
    if (h->mu) {
        cw_mutex_lock(h->mu);
        for (size_t i = 0; i < h->n; i++)
            atomic_store(&h->v[i]->stop, true);
        reap(h, true);
        cw_mutex_unlock(h->mu);
        cw_mutex_destroy(h->mu);
    }
    free(h->v);
    free(h);
}

/* Records a trace that could not start (state "failed", error msg) and
 * returns rc with d set to msg. */
static int refuse(cw_heaptraces_t *h, cw_heap_trace_row_t *row, int rc, int64_t *id, cw_diag_t *d,
                  const char *msg)
{
    cw_diag_t sd = {{0}};
    cw_store_t *s = NULL;
    row->state = "failed";
    row->error = (char *)msg;
    row->ended_ns = row->requested_ns;
    if (cw_store_open_side(h->db_path, &s, &sd) == 0 && cw_store_heap_add(s, row, &sd) == 0)
        *id = row->id;
    else
        CW_LOGE("heap traces: cannot record a refused trace of process %u: %s", row->pid, sd.msg);
    cw_store_close(s);
    row->state = row->error = NULL;
    return cw_diag_set(d, rc, "%s", msg);
}

int cw_heaptraces_ask(cw_heaptraces_t *h, const cw_heaptrace_ask_t *a, int64_t *id, cw_diag_t *d)
{
    *id = 0;
    char msg[256];
    /* Not asked: the default, within the maximum. */
    int64_t dur = a->duration_ns > 0                      ? a->duration_ns
                  : h->default_duration < h->max_duration ? h->default_duration
                                                          : h->max_duration;
    /* The row as asked; its strings are borrowed until the trace owns a copy. */
    cw_heap_trace_row_t row = {.pid = a->pid,
                               .proc = a->proc,
                               .process = (char *)a->process,
                               .trigger = (char *)(a->trigger ? a->trigger : "api"),
                               .alert_series = a->alert_series,
                               .rule = (char *)a->rule,
                               .requested_ns = cw_plat_wall_ns(),
                               .duration_ns = dur};
    if (!a->pid)
        return refuse(h, &row, CW_EINVAL, id, d,
                      "no single process to trace: a rule with heap_trace must group by "
                      "instance (group_by = instance)");
    if (dur > h->max_duration) {
        snprintf(msg, sizeof msg,
                 "a heap trace lasts at most %lld s (heap_trace_max_duration); %lld s was asked",
                 (long long)(h->max_duration / CW_NS_PER_S), (long long)(dur / CW_NS_PER_S));
        return refuse(h, &row, CW_EINVAL, id, d, msg);
    }
    if (atomic_load(&h->shutting)) return cw_diag_set(d, CW_ESTOPPED, "the service is stopping");
    cw_mutex_lock(h->mu);
    reap(h, false);
    int rc = 0;
    for (size_t i = 0; i < h->n && !rc; i++)
        if (h->v[i]->pid == a->pid) {
            int64_t other = h->v[i]->id;
            cw_mutex_unlock(h->mu);
            snprintf(msg, sizeof msg,
                     "process %u is already traced (heap trace %lld): one trace per process at "
                     "a time",
                     a->pid, (long long)other);
            rc = refuse(h, &row, CW_ESTOPPED, id, d, msg);
            *id = other;
            return rc;
        }
    if (h->n >= h->max_running) {
        cw_mutex_unlock(h->mu);
        snprintf(msg, sizeof msg,
                 "%u heap traces run already, the most at once (heap_trace_max_running): try "
                 "again when one ends",
                 h->max_running);
        return refuse(h, &row, CW_ERANGE, id, d, msg);
    }
    trace_t *t = calloc(1, sizeof *t);
    cw_store_t *s = NULL;
    if (!t || CW_RESERVE(h->v, h->cap, h->n + 1)) {
        rc = cw_diag_set(d, CW_ENOMEM, "out of memory starting a heap trace");
        goto fail;
    }
    row.state = "running";
    if ((rc = cw_store_open_side(h->db_path, &s, d)) || (rc = cw_store_heap_add(s, &row, d)))
        goto fail;
    t->h = h;
    t->id = *id = row.id;
    t->pid = a->pid;
    t->snapshot_every = a->snapshot_every_ns;
    t->row = row;
    t->row.process = a->process ? cw_strdup(a->process) : NULL;
    t->row.trigger = cw_strdup(row.trigger);
    t->row.rule = a->rule ? cw_strdup(a->rule) : NULL;
    t->row.state = NULL;
    if ((a->process && !t->row.process) || !t->row.trigger || (a->rule && !t->row.rule) ||
        cw_thread_start(&t->thread, run, t) != 0) {
        rc = cw_diag_set(d, CW_ENOMEM, "out of memory starting a heap trace");
        row.state = "failed";
        row.error = "out of memory starting the trace's thread";
        row.ended_ns = cw_plat_wall_ns();
        cw_store_heap_finish(s, &row, NULL, NULL, &(cw_diag_t){{0}});
        goto fail;
    }
    h->v[h->n++] = t;
    cw_mutex_unlock(h->mu);
    cw_store_close(s);
    CW_LOGI("heap trace %lld of process %u started (%s%s%s, %lld s)", (long long)*id, a->pid,
            row.trigger, a->rule ? " " : "", a->rule ? a->rule : "",
            (long long)(dur / CW_NS_PER_S));
    return 0;
fail:
    cw_mutex_unlock(h->mu);
    cw_store_close(s);
    trace_free(t);
    return rc;
}

/* The running trace of that id, or NULL. Under h->mu. */
static trace_t *find(cw_heaptraces_t *h, int64_t id)
{
    for (size_t i = 0; i < h->n; i++)
        if (h->v[i]->id == id && !atomic_load(&h->v[i]->done)) return h->v[i];
    return NULL;
}

int cw_heaptraces_stop_one(cw_heaptraces_t *h, int64_t id)
{
    cw_mutex_lock(h->mu);
    trace_t *t = find(h, id);
    if (t) atomic_store(&t->stop, true);
    cw_mutex_unlock(h->mu);
    return t ? 0 : CW_ENOENT;
}

bool cw_heaptraces_progress(cw_heaptraces_t *h, int64_t id, uint64_t *events, bool *attached)
{
    cw_mutex_lock(h->mu);
    trace_t *t = find(h, id);
    if (t) {
        *events = atomic_load(&t->progress);
        *attached = atomic_load(&t->attached);
    }
    cw_mutex_unlock(h->mu);
    return t != NULL;
}

uint32_t cw_heaptraces_running(cw_heaptraces_t *h)
{
    uint32_t n = 0;
    cw_mutex_lock(h->mu);
    for (size_t i = 0; i < h->n; i++)
        n += !atomic_load(&h->v[i]->done);
    cw_mutex_unlock(h->mu);
    return n;
}
