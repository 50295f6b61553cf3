/* http_api.c - the window resources of the REST API: health, processes,
 * one process, its stacks (list and caller tree), UMDH-style diff, tags.
 *
 * Every figure comes from cw_store_report() (the same code as `analyze
 * --db`), so the API and the CLI cannot disagree; process objects are
 * cw_report_proc_json()'s, byte for byte those of `analyze --json`.
 * 64-bit integers are raw number text (DESIGN.md, "Integers in JSON"). */
#include "http/http_resources.h"

#include <cjson/cJSON.h>
#include <ctype.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "commitwatch/event.h"
#include "commitwatch/export.h"
#include "commitwatch/memstat.h"
#include "commitwatch/platform.h"
#include "commitwatch/query.h"
#include "commitwatch/retag.h"

static int oom(cw__http_req_t *r)
{
    return cw__http_fail(r, 500, "out of memory while building the response");
}

/* ---------------------------------------------------------------- health */

bool cw__http_config_json(cJSON *o, cw_status_t *st)
{
    cw_status_config_t c;
    if (!st) return cJSON_AddNullToObject(o, "config") != NULL;
    cw_status_config_get(st, &c);
    cJSON *j = cJSON_AddObjectToObject(o, "config");
    bool ok = j && cJSON_AddBoolToObject(j, "ok", c.ok);
    ok = ok && (c.ok ? cJSON_AddNullToObject(j, "error") : cJSON_AddStringToObject(j, "error", c.error));
    ok = ok && (c.file[0] ? cJSON_AddStringToObject(j, "file", c.file)
                          : cJSON_AddNullToObject(j, "file"));
    ok = ok && (c.line ? cJSON_AddNumberToObject(j, "line", c.line)
                       : cJSON_AddNullToObject(j, "line"));
    ok = ok && cw__json_i64(j, "at_ns", c.at_ns);
    ok = ok && cJSON_AddStringToObject(j, "loaded_by", c.reload ? "reload" : "start");
    return ok;
}

/* "memory": bytes per component (memstat.h), SQLite's, the process's
 * resident set now and at its peak, the C heap in use, and the heap no
 * component counts ("heap_other": libdw's and civetweb's, mostly). */
/* /api/health's "losses": every record the source dropped or could not
 * pair, and what the resyncs corrected (docs/LINUX.md, "Losses and
 * drift"). False on out of memory. */
static bool losses(cJSON *o, const cw_status_t *st)
{
    cJSON *l = cJSON_AddObjectToObject(o, "losses");
    bool ok = l != NULL;
    ok = ok && cw__json_u64(l, "lost", st ? atomic_load(&st->events_lost) : 0);
    ok = ok && cw__json_u64(l, "foreign", st ? atomic_load(&st->records_foreign) : 0);
    ok = ok && cw__json_u64(l, "unpaired", st ? atomic_load(&st->records_unpaired) : 0);
    ok = ok && cw__json_u64(l, "malformed", st ? atomic_load(&st->records_malformed) : 0);
    ok = ok && cw__json_u64(l, "resyncs", st ? atomic_load(&st->resyncs) : 0);
    ok = ok && cw__json_u64(l, "corrections", st ? atomic_load(&st->corrections) : 0);
    ok = ok && cw__json_u64(l, "corrected_bytes", st ? atomic_load(&st->corrected_bytes) : 0);
    ok = ok && cJSON_AddBoolToObject(l, "resync_pending",
                                     st ? atomic_load(&st->resync_pending) : false);
    ok = ok && cw__json_i64_or_null(l, "last_resync_ns",
                                    st ? atomic_load(&st->last_resync_ns) : INT64_MIN, INT64_MIN);
    return ok;
}

static bool memory(cJSON *o)
{
    cJSON *m = cJSON_AddObjectToObject(o, "memory");
    bool ok = m != NULL;
    int64_t counted = 0, sq = 0, sq_peak = 0;
    for (int c = 0; c < CW_MEM_N; c++) {
        int64_t v = cw_mem_get((cw_mem_comp_t)c);
        /* The rings and the queue's record chunks are pages mapped apart,
         * not heap (the queue's array, in heap_other, is small). */
        if (c != CW_MEM_PERF_RINGS && c != CW_MEM_PERF_QUEUE) counted += v;
        ok = ok && cw__json_i64(m, cw_mem_name((cw_mem_comp_t)c), v);
    }
    cw_store_sqlite_memory(&sq, &sq_peak);
    cw_plat_self_mem_t pm;
    cw_plat_self_memory(&pm);
    int64_t other = pm.heap ? (int64_t)pm.heap - counted - sq : 0;
    ok = ok && cw__json_i64(m, "sqlite", sq);
    ok = ok && cw__json_i64(m, "sqlite_peak", sq_peak);
    ok = ok && cw__json_u64(m, "heap_in_use", pm.heap);
    ok = ok && cw__json_i64(m, "heap_other", other > 0 ? other : 0);
    ok = ok && cw__json_u64(m, "resident", pm.rss);
    ok = ok && cw__json_u64(m, "resident_peak", pm.peak);
    return ok;
}

/* "source_state" (docs/RELIABILITY.md, "A source that fails"): whether
 * the source is up, why it is down and since when, its failed tries and
 * the next one; null when a database is served with no source. */
static bool source_state(cJSON *o, const cw_status_t *st, const cw_source_state_t *ss)
{
    if (!st || st->no_source) return cJSON_AddNullToObject(o, "source_state") != NULL;
    cJSON *s = cJSON_AddObjectToObject(o, "source_state");
    bool ok = s && cJSON_AddBoolToObject(s, "up", ss->up);
    ok = ok && (ss->up ? cJSON_AddNullToObject(s, "error") != NULL
                       : cJSON_AddStringToObject(s, "error", ss->error) != NULL);
    ok = ok && cw__json_i64_or_null(s, "since_ns", ss->since_ns, INT64_MIN);
    ok = ok && cw__json_u64(s, "retries", ss->retries);
    ok = ok && cw__json_i64_or_null(s, "next_retry_ns", ss->next_try_ns, INT64_MIN);
    return ok;
}

int cw__http_health(cw__http_req_t *r)
{
    const cw_status_t *st = r->ctx->status;
    cJSON *o = cJSON_CreateObject();
    int64_t now = cw_plat_wall_ns(), end = INT64_MIN, start = INT64_MIN, data_end = INT64_MIN;
    bool ok = o != NULL, ended = false;
    bool db = cw__http_need_store(r) == 0;
    r->err[0] = 0;
    if (db) cw_store_data_span(r->store, &start, &end, NULL);
    if (db) cw_store_data_end(r->store, &data_end, &ended, NULL);
    int serr = st ? atomic_load(&st->store_error) : 0;
    char serr_text[CW_PATH_MAX + 256];
    if (serr)
        snprintf(serr_text, sizeof serr_text,
                 "%s: storing into %s failed; ingestion is paused and retried every second "
                 "until the disk has room (free space, or lower size_cap and retention)",
                 cw_strerror(serr), r->ctx->db_path);
    cw_source_state_t ss = {.up = true};
    if (st && !st->no_source) cw_status_source_get(st, &ss);
    bool src_down = !ss.up && ss.error[0];
    ok = ok && cJSON_AddStringToObject(o, "status", !db                  ? "starting"
                                                    : serr || src_down ? "degraded"
                                                                       : "ok");
    ok = ok && (serr ? cJSON_AddStringToObject(o, "store_error", serr_text) != NULL
                     : cJSON_AddNullToObject(o, "store_error") != NULL);
    ok = ok && cw__json_i64_or_null(o, "store_error_since_ns",
                                    serr ? atomic_load(&st->store_error_since_ns) : INT64_MIN,
                                    INT64_MIN);
    ok = ok && cJSON_AddStringToObject(o, "version", CW_VERSION);
    ok = ok && cJSON_AddStringToObject(o, "source", st ? st->source : "");
    ok = ok && cw__json_i64(o, "now_ns", now);
    ok = ok && cw__json_i64(o, "started_ns", st ? st->start_ns : now);
    ok = ok && cJSON_AddNumberToObject(
                   o, "uptime_s", st ? (double)cw_status_uptime_ns(st, cw_plat_mono_ns()) / 1e9 : 0);
    ok = ok && cw__json_u64(o, "events_ingested", st ? atomic_load(&st->events_ingested) : 0);
    ok = ok && cw__json_u64(o, "source_records", st ? atomic_load(&st->source_records) : 0);
    ok = ok && cw__json_u64(o, "events_lost", st ? atomic_load(&st->events_lost) : 0);
    ok = ok && cw__json_i64(o, "drift_corrected_bytes", st ? atomic_load(&st->drift_bytes) : 0);
    ok = ok && cJSON_AddBoolToObject(o, "ingest_done", st ? atomic_load(&st->ingest_done) : false);
    ok = ok && cJSON_AddStringToObject(o, "db_path", r->ctx->db_path);
    ok = ok && cw__json_u64(o, "db_size_bytes", cw_store_disk_bytes(r->ctx->db_path));
    ok = ok && cw__json_i64_or_null(o, "last_bucket_end_ns", end, INT64_MIN);
    ok = ok && cw__json_i64_or_null(o, "first_bucket_ns", start, INT64_MIN);
    ok = ok && cw__json_i64_or_null(o, "data_end_ns", data_end, INT64_MIN);
    ok =
        ok && cw__json_i64_or_null(o, "tracking_ended_ns", ended ? data_end : INT64_MIN, INT64_MIN);
    ok = ok && cJSON_AddBoolToObject(o, "data_clock", st ? st->data_clock : false);
    ok = ok && losses(o, st);
    /* The source's state, and the database served read-only with no
     * source (`commitwatch serve`) with the platform of its data. */
    ok = ok && source_state(o, st, &ss);
    ok = ok && cJSON_AddBoolToObject(o, "read_only", st && st->no_source);
    char *platform = NULL;
    cw_diag_t pd = {{0}};
    if (db) cw_store_meta_get(r->store, "platform", &platform, &pd);
    ok = ok && (platform ? cJSON_AddStringToObject(o, "platform", platform) != NULL
                         : cJSON_AddNullToObject(o, "platform") != NULL);
    free(platform);
    ok = ok && memory(o);
    ok = ok && cw__http_config_json(o, r->ctx->status);
    int rc = ok ? cw__http_send_json(r, o) : oom(r);
    cJSON_Delete(o);
    return rc;
}

/* ---------------------------------------------------------------- reports */

/* Figures of the window from the store; 0 or 500 with the store's message. */
static int window_report(cw__http_req_t *r, int64_t from, int64_t to, bool frames,
                         cw_report_t **out)
{
    cw_diag_t d = {{0}};
    int rc = cw_store_report(r->store, from, to, frames, out, &d);
    if (rc) return cw__http_fail(r, 500, "query failed: %s", d.msg[0] ? d.msg : cw_strerror(rc));
    cw_report_sort(*out);
    return 0;
}

typedef enum { S_IMPACTING, S_TRANSIENT, S_SIZE, S_PEAK, S_OUTSTANDING } proc_sort_t;

static int64_t proc_key(const cw_proc_report_t *p, proc_sort_t s)
{
    switch (s) {
    case S_IMPACTING:
        return cw_figs_impacting(&p->figs);
    case S_TRANSIENT:
        return (int64_t)p->figs.types[CW_AIFI].bytes;
    case S_SIZE:
        return (int64_t)p->figs.size_bytes;
    case S_PEAK:
        return (int64_t)p->peak_bytes;
    case S_OUTSTANDING:
        return (int64_t)p->outstanding_end;
    }
    return 0;
}

/* Stable insertion-free sort: an index array sorted by key desc, then id. */
typedef struct pidx {
    int64_t key;
    uint32_t id;
    uint32_t i;
} pidx_t;

static int cmp_pidx(const void *x, const void *y)
{
    const pidx_t *a = x, *b = y;
    if (a->key != b->key) return a->key > b->key ? -1 : 1;
    return a->id < b->id ? -1 : a->id > b->id;
}

/* Case-insensitive substring. */
static bool contains_ci(const char *hay, const char *needle)
{
    size_t n = strlen(needle);
    for (; *hay; hay++) {
        size_t i = 0;
        while (i < n && hay[i] &&
               tolower((unsigned char)hay[i]) == tolower((unsigned char)needle[i]))
            i++;
        if (i == n) return true;
    }
    return n == 0;
}

int cw__http_processes(cw__http_req_t *r)
{
    int64_t from, to;
    uint64_t limit = 1000;
    proc_sort_t sort = S_IMPACTING;
    const char *s, *name = cw__http_param(r, "name"), *pids = cw__http_param(r, "pid");
    uint64_t pid = 0;
    int rc = cw__http_window(r, &from, &to);
    if (rc) return rc;
    if ((s = cw__http_param(r, "sort"))) {
        static const char *const names[] = {"impacting", "transient", "size", "peak",
                                            "outstanding"};
        int k = -1;
        for (int i = 0; i < 5; i++)
            if (strcmp(s, names[i]) == 0) k = i;
        if (k < 0)
            return cw__http_fail(r, 400,
                                 "sort: '%s' is not one of impacting, transient, size, "
                                 "peak, outstanding",
                                 s);
        sort = (proc_sort_t)k;
    }
    if ((s = cw__http_param(r, "limit")) &&
        (rc = cw__http_parse_uint(r, "limit", s, 1, 100000, &limit)))
        return rc;
    if (pids && (rc = cw__http_parse_uint(r, "pid", pids, 0, UINT32_MAX, &pid))) return rc;

    cw_report_t *rep = NULL;
    if ((rc = window_report(r, from, to, false, &rep))) return rc;
    pidx_t *ix = calloc(rep->nprocs ? rep->nprocs : 1, sizeof *ix);
    cJSON *root = cJSON_CreateObject(), *arr = NULL;
    uint32_t n = 0;
    bool ok = ix && root && cw__json_window(root, rep->from_ns, rep->to_ns) &&
              (arr = cJSON_AddArrayToObject(root, "processes")) != NULL;
    if (ok && rep->note) ok = cJSON_AddStringToObject(root, "note", rep->note) != NULL;
    for (uint32_t i = 0; ok && i < rep->nprocs; i++) {
        const cw_proc_report_t *p = &rep->procs[i];
        if (name && !contains_ci(p->name ? p->name : "", name)) continue;
        if (pids && p->pid != pid) continue;
        ix[n++] = (pidx_t){proc_key(p, sort), p->id, i};
    }
    if (ok && n > 1) qsort(ix, n, sizeof *ix, cmp_pidx);
    ok = ok && cw__json_u64(root, "total", n);
    for (uint32_t k = 0; ok && k < n && k < limit; k++) {
        cJSON *p = cw_report_proc_json(&rep->procs[ix[k].i], false);
        ok = p && cJSON_AddItemToArray(arr, p);
    }
    rc = ok ? cw__http_send_json(r, root) : oom(r);
    cJSON_Delete(root);
    free(ix);
    cw_report_free(rep);
    return rc;
}

/* ---------------------------------------------------------------- one process */

static cw_proc_report_t *find_proc(cw_report_t *rep, uint32_t id)
{
    for (uint32_t i = 0; i < rep->nprocs; i++)
        if (rep->procs[i].id == id) return &rep->procs[i];
    return NULL;
}

/* A process instance not active in a window: zero figures, its row. */
typedef struct idle_proc {
    cw_proc_info_t info; /* owns the strings p borrows */
    cw_proc_report_t p;
} idle_proc_t;

/* The instance in rep, or (not active in the window) a zero-figure report
 * of its processes row in *tmp (free with cw_proc_info_clear(&tmp->info)).
 * 0, 404 or 500. */
static int proc_in(cw__http_req_t *r, cw_report_t *rep, uint32_t id, idle_proc_t *tmp,
                   const cw_proc_report_t **out)
{
    cw_diag_t d = {{0}};
    *out = find_proc(rep, id);
    if (*out) return 0;
    int rc = cw_store_proc_get(r->store, id, &tmp->info, &d);
    if (rc == CW_ENOENT) return cw__http_fail(r, 404, "id: no process instance %" PRIu32, id);
    if (rc) return cw__http_fail(r, 500, "query failed: %s", d.msg);
    tmp->p = (cw_proc_report_t){.id = id,
                                .pid = tmp->info.pid,
                                .name = tmp->info.name,
                                .cmdline = tmp->info.cmdline,
                                .start_ns = tmp->info.start_ns,
                                .exit_ns = tmp->info.exit_ns,
                                .tracking_ended_ns = tmp->info.tracking_ended_ns,
                                .corrections = tmp->info.corrections,
                                .corrected_committed = tmp->info.corrected_committed,
                                .corrected_decommitted = tmp->info.corrected_decommitted,
                                .last_correction_ns = tmp->info.last_correction_ns,
                                .peak_ns = rep->from_ns};
    *out = &tmp->p;
    return 0;
}

int cw__http_process(cw__http_req_t *r, uint32_t id)
{
    int64_t from, to;
    int rc = cw__http_window(r, &from, &to);
    if (rc) return rc;
    cw_report_t *rep = NULL;
    idle_proc_t tmp = {0};
    const cw_proc_report_t *p;
    if ((rc = window_report(r, from, to, false, &rep))) return rc;
    if ((rc = proc_in(r, rep, id, &tmp, &p))) goto out;
    cJSON *root = cJSON_CreateObject(), *pj = cw_report_proc_json(p, false);
    bool ok = root && pj && cw__json_window(root, rep->from_ns, rep->to_ns) &&
              (!rep->note || cJSON_AddStringToObject(root, "note", rep->note));
    if (ok) {
        cJSON_AddItemToObject(root, "process", pj);
        pj = NULL;
    }
    rc = ok ? cw__http_send_json(r, root) : oom(r);
    cJSON_Delete(pj);
    cJSON_Delete(root);
out:
    cw_proc_info_clear(&tmp.info);
    cw_report_free(rep);
    return rc;
}

/* ---------------------------------------------------------------- instances */

/* The instances a process line stands for: a folded group's (schema
 * 005_folded) alive in the window, or the instance itself. */
int cw__http_instances(cw__http_req_t *r, uint32_t id)
{
    int64_t from, to;
    uint64_t limit = 1000;
    const char *s;
    cw_diag_t d = {{0}};
    cw_proc_info_t info;
    cw_folded_list_t l = {0};
    cw_folded_inst_t self;
    int rc = cw__http_window(r, &from, &to);
    if (rc) return rc;
    if ((s = cw__http_param(r, "limit")) &&
        (rc = cw__http_parse_uint(r, "limit", s, 1, 100000, &limit)))
        return rc;
    rc = cw_store_proc_get(r->store, id, &info, &d);
    if (rc == CW_ENOENT) return cw__http_fail(r, 404, "id: no process instance %" PRIu32, id);
    if (rc) return cw__http_fail(r, 500, "query failed: %s", d.msg);
    if (info.folded) {
        rc = cw_store_folded_list(r->store, id, from, to, (size_t)limit, &l, &d);
        if (rc) {
            cw_proc_info_clear(&info);
            return cw__http_fail(r, 500, "query failed: %s", d.msg);
        }
    } else {
        int64_t end = info.exit_ns != CW_TS_NEVER ? info.exit_ns : info.tracking_ended_ns;
        bool alive = info.start_ns < to && end >= from;
        self = (cw_folded_inst_t){info.pid, info.start_ns, info.exit_ns, 0};
        l = (cw_folded_list_t){alive ? &self : NULL, alive ? 1 : 0, alive ? 1 : 0};
    }
    cJSON *root = cJSON_CreateObject(), *proc, *arr = NULL;
    bool ok = root && cw__json_window(root, from, to) &&
              (proc = cJSON_AddObjectToObject(root, "process")) != NULL &&
              cw__json_u64(proc, "id", id) &&
              cJSON_AddStringToObject(proc, "name", info.name ? info.name : "") &&
              cw__json_u64(proc, "folded", info.folded) && cw__json_u64(root, "total", l.total) &&
              (arr = cJSON_AddArrayToObject(root, "instances")) != NULL;
    for (size_t i = 0; ok && i < l.n; i++) {
        cJSON *o = cJSON_CreateObject();
        ok = o && cJSON_AddItemToArray(arr, o) && cw__json_u64(o, "pid", l.v[i].pid) &&
             cw__json_i64(o, "start_ns", l.v[i].start_ns) &&
             cw__json_i64_or_null(o, "exit_ns", l.v[i].exit_ns, CW_TS_NEVER) &&
             (!info.folded || cw__json_u64(o, "bytes", l.v[i].bytes));
    }
    rc = ok ? cw__http_send_json(r, root) : oom(r);
    cJSON_Delete(root);
    if (info.folded) cw_folded_list_clear(&l);
    cw_proc_info_clear(&info);
    return rc;
}

/* ---------------------------------------------------------------- stacks */

static cJSON *add_figs(cJSON *o, const cw_figs_t *f)
{
    if (!cw__json_u64(o, "size_bytes", f->size_bytes) ||
        !cw__json_u64(o, "commit_count", f->commit_count) ||
        !cw__json_i64(o, "impacting_bytes", cw_figs_impacting(f)) ||
        !cw__json_u64(o, "transient_bytes", f->types[CW_AIFI].bytes) ||
        !cw__json_u64(o, "transient_count", f->types[CW_AIFI].count))
        return NULL;
    static const char *const tn[] = {"AIFI", "AIFO", "AOFI", "AOFO"};
    cJSON *t = cJSON_AddObjectToObject(o, "types");
    for (int i = 0; t && i < CW_TYPE__COUNT; i++) {
        cJSON *x = cJSON_AddObjectToObject(t, tn[i]);
        if (!x || !cw__json_u64(x, "bytes", f->types[i].bytes) ||
            !cw__json_u64(x, "count", f->types[i].count))
            return NULL;
    }
    return t;
}

/* Caller tree: children merged by frame text, outermost frame first. */
typedef struct tnode {
    const char *frame; /* borrowed from the report */
    cw_figs_t figs;
    uint32_t nstacks;
    int64_t key, key2; /* sort keys, set just before sorting (qsort has no context) */
    struct tnode *child, *next;
} tnode_t;

static void tree_free(tnode_t *n)
{
    while (n) {
        tnode_t *next = n->next;
        tree_free(n->child);
        free(n);
        n = next;
    }
}

static tnode_t *tree_child(tnode_t *parent, const char *frame)
{
    tnode_t **pp = &parent->child;
    for (; *pp; pp = &(*pp)->next)
        if (strcmp((*pp)->frame, frame) == 0) return *pp;
    *pp = calloc(1, sizeof **pp);
    if (*pp) (*pp)->frame = frame;
    return *pp;
}

static int cmp_node(const void *x, const void *y)
{
    const tnode_t *a = *(tnode_t *const *)x, *b = *(tnode_t *const *)y;
    if (a->key != b->key) return a->key > b->key ? -1 : 1;
    if (a->key2 != b->key2) return a->key2 > b->key2 ? -1 : 1;
    return strcmp(a->frame, b->frame);
}

/* Serializes n's children, sorted; depth-limited by the stack depth. */
static cJSON *tree_json(tnode_t *n, bool size_sort)
{
    uint32_t k = 0, i = 0;
    for (const tnode_t *c = n->child; c; c = c->next)
        k++;
    cJSON *arr = cJSON_CreateArray();
    tnode_t **v = calloc(k ? k : 1, sizeof *v);
    if (!arr || !v) goto fail;
    for (tnode_t *c = n->child; c; c = c->next) {
        c->key = size_sort ? (int64_t)c->figs.size_bytes : cw_figs_impacting(&c->figs);
        c->key2 = size_sort ? cw_figs_impacting(&c->figs) : (int64_t)c->figs.size_bytes;
        v[i++] = c;
    }
    qsort(v, k, sizeof *v, cmp_node);
    for (i = 0; i < k; i++) {
        cJSON *o = cJSON_CreateObject(), *kids;
        if (!o || !cJSON_AddItemToArray(arr, o) ||
            !cJSON_AddStringToObject(o, "frame", v[i]->frame) ||
            !cw__json_u64(o, "stacks", v[i]->nstacks) || !add_figs(o, &v[i]->figs))
            goto fail;
        if (v[i]->child) {
            if (!(kids = tree_json(v[i], size_sort))) goto fail;
            cJSON_AddItemToObject(o, "children", kids);
        }
    }
    free(v);
    return arr;
fail:
    free(v);
    cJSON_Delete(arr);
    return NULL;
}

static bool tag_matches(const char *tag, const char *want)
{
    size_t n = strlen(want);
    return strcmp(tag, want) == 0 || (strncmp(tag, want, n) == 0 && tag[n] == '\\');
}

/* Is st kept by a stacks request's filters: type (-1: all; 0-3: a type;
 * 4: impacting != 0; 5: transient) and tag (NULL: any)? */
static bool stack_kept(const cw_stack_report_t *st, int type, const char *tag)
{
    const cw_figs_t *f = &st->figs;
    bool keep = type < 0    ? true
                : type < 4  ? f->types[type].count > 0 || f->types[type].bytes > 0
                : type == 4 ? cw_figs_impacting(f) != 0
                            : f->types[CW_AIFI].count > 0;
    return keep && (!tag || tag_matches(st->tag, tag));
}

static int export_params(cw__http_req_t *r, cw_export_opts_t *o, bool *wanted)
{
    const char *f = cw__http_param(r, "format"), *v = cw__http_param(r, "value");
    cw_diag_t d = {{0}};
    *o = (cw_export_opts_t){0};
    *wanted = false;
    if (f && strcmp(f, "json") != 0) {
        if (cw_export_parse_format(f, &o->format, &d) != 0)
            return cw__http_fail(r, 400, "format: '%s' is not one of json, folded, pprof, speedscope",
                                 f);
        *wanted = true;
    }
    if (v) {
        if (!*wanted || o->format != CW_EXPORT_FOLDED)
            return cw__http_fail(r, 400, "value: goes with format=folded (pprof and speedscope "
                                         "carry every value)");
        if (cw_export_parse_value(v, &o->value, &d) != 0) return cw__http_fail(r, 400, "%s", d.msg);
    }
    return 0;
}

static int send_export(cw__http_req_t *r, const cw_proc_report_t *procs, uint32_t n,
                         int64_t from, int64_t to, const char *stem, const cw_export_opts_t *o)
{
    cw_diag_t d = {{0}};
    char *buf = NULL, name[200];
    size_t len = 0;
    /* The file name: the stem with only [A-Za-z0-9._-] kept. */
    size_t k = 0;
    for (const char *c = stem; *c && k < 100; c++)
        name[k++] = isalnum((unsigned char)*c) || *c == '.' || *c == '-' ? *c : '_';
    snprintf(name + k, sizeof name - k, "-%" PRId64 "-%" PRId64 "%s", from, to,
             cw_export_suffix(o->format));
    char title[160];
    snprintf(title, sizeof title, "%s [%" PRId64 ", %" PRId64 ")", stem, from, to);
    int rc = cw_export_procs(procs, n, from, to, title, o, &buf, &len, &d);
    if (rc) return cw__http_fail(r, 500, "export failed: %s", d.msg[0] ? d.msg : cw_strerror(rc));
    char file[240];
    snprintf(file, sizeof file, "commitwatch-%s", name);
    rc = cw__http_send_attachment(r, cw_export_content_type(o->format), file, buf, len);
    free(buf);
    return rc;
}

/* A stacks request's ?format= answer: the stacks of instance id (0: of
 * every process of the window, each under its root frame) that type and
 * tag keep (stack_kept), over [from, to), as a file. limit does not apply:
 * a profile has every stack. */
static int stacks_export(cw__http_req_t *r, uint32_t id, int64_t from, int64_t to, int type,
                         const char *tag, const cw_export_opts_t *eo)
{
    cw_report_t *rep = NULL;
    idle_proc_t tmp = {0};
    const cw_proc_report_t *procs;
    uint32_t n = 1;
    int rc;
    if ((rc = window_report(r, from, to, true, &rep))) return rc;
    if (id) {
        if ((rc = proc_in(r, rep, id, &tmp, &procs))) goto out;
    } else {
        procs = rep->procs;
        n = rep->nprocs;
    }
    /* Views of the processes with only the kept stacks (borrowed from rep). */
    size_t all = 0;
    for (uint32_t i = 0; i < n; i++)
        all += procs[i].nstacks;
    cw_proc_report_t *views = calloc(n ? n : 1, sizeof *views);
    cw_stack_report_t *kept = calloc(all ? all : 1, sizeof *kept);
    size_t k = 0;
    if (views && kept) {
        for (uint32_t i = 0; i < n; i++) {
            views[i] = procs[i];
            views[i].stacks = &kept[k];
            views[i].nstacks = 0;
            for (uint32_t j = 0; j < procs[i].nstacks; j++)
                if (stack_kept(&procs[i].stacks[j], type, tag)) {
                    kept[k++] = procs[i].stacks[j];
                    views[i].nstacks++;
                }
        }
        char stem[128];
        if (id)
            snprintf(stem, sizeof stem, "%s-%" PRIu32, procs->name ? procs->name : "", procs->pid);
        else
            snprintf(stem, sizeof stem, "machine");
        cw_export_opts_t o = *eo;
        o.process_frame = id == 0;
        rc = send_export(r, views, n, rep->from_ns, rep->to_ns, stem, &o);
    } else {
        rc = oom(r);
    }
    free(kept);
    free(views);
out:
    cw_proc_info_clear(&tmp.info);
    cw_report_free(rep);
    return rc;
}

/* The query of a stacks request: which stacks, in which order, how many. */
typedef struct stacks_q {
    int64_t from, to;
    int type; /* -1: all; 0-3: a type; 4: impacting != 0; 5: transient */
    const char *tag;
    bool size_sort;
    bool tree; /* false (tree=0): no caller tree, for clients that build their own */
    uint64_t limit;
} stacks_q_t;

/* Parses from, to, type, tag, sort, limit and tree; 0 or the error sent. */
static int stacks_query(cw__http_req_t *r, stacks_q_t *q)
{
    static const char *const types[] = {"AIFI", "AIFO", "AOFI", "AOFO", "impacting", "transient"};
    const char *s;
    int rc;
    *q = (stacks_q_t){.type = -1, .tag = cw__http_param(r, "tag"), .tree = true, .limit = 500};
    if ((rc = cw__http_window(r, &q->from, &q->to))) return rc;
    if ((s = cw__http_param(r, "type"))) {
        for (int i = 0; i < 6; i++)
            if (strcmp(s, types[i]) == 0) q->type = i;
        if (q->type < 0)
            return cw__http_fail(r, 400,
                                 "type: '%s' is not one of AIFI, AIFO, AOFI, AOFO, "
                                 "impacting, transient",
                                 s);
    }
    if ((s = cw__http_param(r, "sort"))) {
        if (strcmp(s, "size") == 0)
            q->size_sort = true;
        else if (strcmp(s, "impacting") != 0)
            return cw__http_fail(r, 400, "sort: '%s' is not one of impacting, size", s);
    }
    if ((s = cw__http_param(r, "limit")) &&
        (rc = cw__http_parse_uint(r, "limit", s, 1, 100000, &q->limit)))
        return rc;
    if ((s = cw__http_param(r, "tree"))) {
        if (strcmp(s, "0") != 0 && strcmp(s, "1") != 0)
            return cw__http_fail(r, 400, "tree: '%s' is not 0 or 1", s);
        q->tree = s[0] == '1';
    }
    return 0;
}

/* A stack of a machine-wide list: its process and its index there. */
typedef struct sidx {
    int64_t key;
    uint32_t stack_id, proc, i;
} sidx_t;

static int cmp_sidx(const void *x, const void *y)
{
    const sidx_t *a = x, *b = y;
    if (a->key != b->key) return a->key > b->key ? -1 : 1;
    if (a->proc != b->proc) return a->proc < b->proc ? -1 : 1;
    return a->stack_id < b->stack_id ? -1 : a->stack_id > b->stack_id;
}

/* Adds to o the stacks of procs[0..n) that q keeps, as "total", "stacks"
 * (the first q->limit in q's order) and, unless q->tree is false, "tree"
 * (the caller tree of all of them). machine: the stacks of every process of the window, each with
 * its process ("process_id", "process"), and the tree's first level is
 * the process name (instances of a name merged), as in whole-system flame
 * graphs. false on ENOMEM. */
static bool stacks_json(cJSON *o, const cw_proc_report_t *procs, uint32_t n, const stacks_q_t *q,
                        bool machine)
{
    uint64_t all = 0;
    for (uint32_t p = 0; p < n; p++)
        all += procs[p].nstacks;
    uint32_t k = 0;
    tnode_t root = {.frame = "(root)"};
    sidx_t *ix = calloc(all ? all : 1, sizeof *ix);
    bool ok = ix != NULL;
    for (uint32_t p = 0; ok && p < n; p++) {
        for (uint32_t i = 0; ok && i < procs[p].nstacks; i++) {
            const cw_stack_report_t *st = &procs[p].stacks[i];
            const cw_figs_t *f = &st->figs;
            if (!stack_kept(st, q->type, q->tag)) continue;
            ix[k++] = (sidx_t){q->size_sort ? (int64_t)f->size_bytes : cw_figs_impacting(f),
                               st->stack_id, p, i};
            cw_figs_add(&root.figs, f);
            root.nstacks++;
            tnode_t *node = &root;
            for (int64_t j = machine ? -1 : 0; ok && q->tree && j < (int64_t)st->nframes; j++) {
                const char *fr = j < 0 ? (procs[p].name ? procs[p].name : "") : st->frames[j];
                ok = (node = tree_child(node, fr)) != NULL;
                if (ok) {
                    cw_figs_add(&node->figs, f);
                    node->nstacks++;
                }
            }
        }
    }
    if (ok && k > 1) qsort(ix, k, sizeof *ix, cmp_sidx);
    cJSON *arr = NULL, *tree = NULL, *t;
    ok = ok && cw__json_u64(o, "total", k) && (arr = cJSON_AddArrayToObject(o, "stacks"));
    for (uint32_t j = 0; ok && j < k && j < q->limit; j++) {
        const cw_proc_report_t *p = &procs[ix[j].proc];
        const cw_stack_report_t *st = &p->stacks[ix[j].i];
        cJSON *so = cJSON_CreateObject(), *fr;
        ok = so && cJSON_AddItemToArray(arr, so) &&
             (!machine || (cw__json_u64(so, "process_id", p->id) &&
                           cJSON_AddStringToObject(so, "process", p->name ? p->name : ""))) &&
             cw__json_u64(so, "stack_id", st->stack_id) &&
             cJSON_AddStringToObject(so, "tag", st->tag) && add_figs(so, &st->figs) &&
             (fr = cJSON_AddArrayToObject(so, "frames"));
        for (uint32_t f = 0; ok && f < st->nframes; f++)
            ok = cJSON_AddItemToArray(fr, cJSON_CreateString(st->frames[f]));
    }
    ok = ok && (!q->tree || ((t = cJSON_AddObjectToObject(o, "tree")) &&
                             cJSON_AddStringToObject(t, "frame", "(all stacks)") &&
                             cw__json_u64(t, "stacks", root.nstacks) && add_figs(t, &root.figs) &&
                             (tree = tree_json(&root, q->size_sort)) != NULL));
    if (tree) cJSON_AddItemToObject(t, "children", tree);
    free(ix);
    tree_free(root.child);
    return ok;
}

int cw__http_stacks(cw__http_req_t *r, uint32_t id)
{
    stacks_q_t q;
    int rc;
    if ((rc = stacks_query(r, &q))) return rc;
    cw_export_opts_t eo;
    bool export = false;
    if ((rc = export_params(r, &eo, &export))) return rc;
    if (export) return stacks_export(r, id, q.from, q.to, q.type, q.tag, &eo);

    cw_report_t *rep = NULL;
    idle_proc_t tmp = {0};
    const cw_proc_report_t *p;
    cJSON *o = NULL, *pj;
    if ((rc = window_report(r, q.from, q.to, true, &rep))) return rc;
    if ((rc = proc_in(r, rep, id, &tmp, &p))) goto out;
    o = cJSON_CreateObject();
    bool ok = o && cw__json_window(o, rep->from_ns, rep->to_ns) &&
              (pj = cJSON_AddObjectToObject(o, "process")) && cw__json_u64(pj, "id", p->id) &&
              cw__json_u64(pj, "pid", p->pid) &&
              cJSON_AddStringToObject(pj, "name", p->name ? p->name : "") &&
              stacks_json(o, p, 1, &q, false);
    rc = ok ? cw__http_send_json(r, o) : oom(r);
out:
    cJSON_Delete(o);
    cw_proc_info_clear(&tmp.info);
    cw_report_free(rep);
    return rc;
}

/* The machine's stacks: every process instance of the window. */
int cw__http_system_stacks(cw__http_req_t *r)
{
    stacks_q_t q;
    int rc;
    if ((rc = stacks_query(r, &q))) return rc;
    cw_export_opts_t eo;
    bool export = false;
    if ((rc = export_params(r, &eo, &export))) return rc;
    if (export) return stacks_export(r, 0, q.from, q.to, q.type, q.tag, &eo);
    cw_report_t *rep = NULL;
    if ((rc = window_report(r, q.from, q.to, true, &rep))) return rc;
    cJSON *o = cJSON_CreateObject();
    bool ok = o && cw__json_window(o, rep->from_ns, rep->to_ns) &&
              cw__json_u64(o, "processes", rep->nprocs) &&
              stacks_json(o, rep->procs, rep->nprocs, &q, true);
    rc = ok ? cw__http_send_json(r, o) : oom(r);
    cJSON_Delete(o);
    cw_report_free(rep);
    return rc;
}

/* ---------------------------------------------------------------- diff */

typedef struct drow {
    int64_t delta;
    uint32_t i;
} drow_t;

static int cmp_drow(const void *x, const void *y)
{
    const drow_t *a = x, *b = y;
    if (a->delta != b->delta) return a->delta > b->delta ? -1 : 1;
    return a->i < b->i ? -1 : a->i > b->i;
}

/* UMDH between t1 and t2 is the window [t1, t2): outstanding at t1 is
 * AOFI + AOFO (committed before t1, released at or after it), at t2 it is
 * AIFO + AOFO. Counts are pieces outstanding, as UMDH's allocations. */
int cw__http_diff(cw__http_req_t *r)
{
    const char *ps = cw__http_param(r, "process"), *a = cw__http_param(r, "t1"),
               *b = cw__http_param(r, "t2"), *ls = cw__http_param(r, "limit");
    uint64_t id, limit = 1000;
    int64_t t1, t2;
    int rc;
    if (!ps) return cw__http_fail(r, 400, "process: required (a process instance id)");
    if ((rc = cw__http_parse_uint(r, "process", ps, 1, UINT32_MAX, &id))) return rc;
    if (!a || !b)
        return cw__http_fail(r, 400, "%s: required (a time: Unix ns, RFC 3339 or -15m)",
                             a ? "t2" : "t1");
    if ((rc = cw__http_parse_time(r, "t1", a, &t1)) || (rc = cw__http_parse_time(r, "t2", b, &t2)))
        return rc;
    if (t1 >= t2) return cw__http_fail(r, 400, "t1: must be before t2");
    if (ls && (rc = cw__http_parse_uint(r, "limit", ls, 1, 100000, &limit))) return rc;

    cw_report_t *rep = NULL;
    idle_proc_t tmp = {0};
    const cw_proc_report_t *p;
    cJSON *o = NULL;
    if ((rc = window_report(r, t1, t2, true, &rep))) return rc;
    if ((rc = proc_in(r, rep, (uint32_t)id, &tmp, &p))) goto out;
    drow_t *rows = calloc(p->nstacks ? p->nstacks : 1, sizeof *rows);
    uint32_t n = 0;
    cw_figs_t tot = {0};
    bool ok = rows != NULL;
    for (uint32_t i = 0; ok && i < p->nstacks; i++) {
        const cw_figs_t *f = &p->stacks[i].figs;
        uint64_t oldb = f->types[CW_AOFI].bytes + f->types[CW_AOFO].bytes;
        uint64_t newb = f->types[CW_AIFO].bytes + f->types[CW_AOFO].bytes;
        if (!oldb && !newb) continue;
        rows[n++] = (drow_t){(int64_t)newb - (int64_t)oldb, i};
        cw_figs_add(&tot, f);
    }
    if (ok && n > 1) qsort(rows, n, sizeof *rows, cmp_drow);
    cJSON *arr = NULL, *pj;
    o = cJSON_CreateObject();
    uint64_t old_tot = tot.types[CW_AOFI].bytes + tot.types[CW_AOFO].bytes;
    uint64_t new_tot = tot.types[CW_AIFO].bytes + tot.types[CW_AOFO].bytes;
    ok = ok && o && cw__json_i64(o, "t1_ns", rep->from_ns) &&
         cw__json_i64(o, "t2_ns", rep->to_ns) &&
         (!rep->note || cJSON_AddStringToObject(o, "note", rep->note)) &&
         (pj = cJSON_AddObjectToObject(o, "process")) && cw__json_u64(pj, "id", p->id) &&
         cw__json_u64(pj, "pid", p->pid) &&
         cJSON_AddStringToObject(pj, "name", p->name ? p->name : "") &&
         cw__json_u64(o, "old_bytes", old_tot) && cw__json_u64(o, "new_bytes", new_tot) &&
         cw__json_i64(o, "bytes_delta", (int64_t)new_tot - (int64_t)old_tot) &&
         cw__json_u64(o, "total", n) && (arr = cJSON_AddArrayToObject(o, "stacks"));
    for (uint32_t k = 0; ok && k < n && k < limit; k++) {
        const cw_stack_report_t *st = &p->stacks[rows[k].i];
        const cw_figs_t *f = &st->figs;
        uint64_t oc = f->types[CW_AOFI].count + f->types[CW_AOFO].count;
        uint64_t nc = f->types[CW_AIFO].count + f->types[CW_AOFO].count;
        uint64_t ob = f->types[CW_AOFI].bytes + f->types[CW_AOFO].bytes;
        uint64_t nb = f->types[CW_AIFO].bytes + f->types[CW_AOFO].bytes;
        cJSON *so = cJSON_CreateObject(), *fr;
        ok = so && cJSON_AddItemToArray(arr, so) && cw__json_u64(so, "stack_id", st->stack_id) &&
             cJSON_AddStringToObject(so, "tag", st->tag) &&
             cw__json_i64(so, "bytes_delta", rows[k].delta) &&
             cw__json_i64(so, "count_delta", (int64_t)nc - (int64_t)oc) &&
             cw__json_u64(so, "new_bytes", nb) && cw__json_u64(so, "new_count", nc) &&
             cw__json_u64(so, "old_bytes", ob) && cw__json_u64(so, "old_count", oc) &&
             (fr = cJSON_AddArrayToObject(so, "frames"));
        for (uint32_t j = 0; ok && j < st->nframes; j++)
            ok = cJSON_AddItemToArray(fr, cJSON_CreateString(st->frames[j]));
    }
    rc = ok ? cw__http_send_json(r, o) : oom(r);
    free(rows);
out:
    cJSON_Delete(o);
    cw_proc_info_clear(&tmp.info);
    cw_report_free(rep);
    return rc;
}

/* ---------------------------------------------------------------- tags */

/* Finds or adds the child named name[0..len) of arr (objects with
 * "name", "path", "children"). */
static cJSON *tag_child(cJSON *arr, const char *name, size_t len, const char *path, size_t plen)
{
    cJSON *c;
    cJSON_ArrayForEach(c, arr)
    {
        const char *n = cJSON_GetStringValue(cJSON_GetObjectItem(c, "name"));
        if (n && strlen(n) == len && strncmp(n, name, len) == 0) return c;
    }
    char nb[512], pb[1024];
    snprintf(nb, sizeof nb, "%.*s", (int)len, name);
    snprintf(pb, sizeof pb, "%.*s", (int)plen, path);
    c = cJSON_CreateObject();
    if (!c || !cJSON_AddItemToArray(arr, c) || !cJSON_AddStringToObject(c, "name", nb) ||
        !cJSON_AddStringToObject(c, "path", pb) || !cJSON_AddArrayToObject(c, "children"))
        return NULL;
    return c;
}

int cw__http_tags(cw__http_req_t *r)
{
    cw_tag_list_t tags = {0};
    cw_diag_t d = {{0}};
    char *hash = NULL;
    int rc = cw_store_tags(r->store, &tags, &d);
    if (rc) return cw__http_fail(r, 500, "query failed: %s", d.msg);
    cJSON *o = cJSON_CreateObject(), *rules, *tree;
    bool ok = o && (rules = cJSON_AddArrayToObject(o, "rule_files")) &&
              (tree = cJSON_AddArrayToObject(o, "tags"));
    /* The rule files in force: the service records them with every re-tag
     * (a SIGHUP may have changed them since the server started); the
     * startup files when the database has none recorded. */
    char *files = NULL;
    unsigned nfiles = 0;
    if (ok && cw_store_meta_get(r->store, CW_RULE_FILES_META_KEY, &files, &d) == 0 && files) {
        for (char *p = files, *e; ok && *p; p = e + (*e != '\0')) {
            e = p + strcspn(p, "\n");
            char c = *e;
            *e = '\0';
            ok = cJSON_AddItemToArray(rules, cJSON_CreateString(p));
            nfiles++;
            *e = c;
        }
    } else {
        for (unsigned i = 0; ok && i < r->ctx->nrule_files; i++)
            ok = cJSON_AddItemToArray(rules, cJSON_CreateString(r->ctx->rule_files[i]));
        nfiles = r->ctx->nrule_files;
    }
    free(files);
    /* No files given: the tagger uses the platform's default rules. */
    ok = ok && cJSON_AddBoolToObject(o, "default_rules", nfiles == 0);
    if (ok && cw_store_meta_get(r->store, "rules_hash", &hash, &d) == 0 && hash)
        ok = cJSON_AddStringToObject(o, "rules_hash", hash) != NULL;
    free(hash);
    /* A tag path A\B becomes the node A with the child B. */
    for (size_t k = 0; ok && k < tags.n; k++) {
        const char *tag = tags.v[k], *p = tag;
        cJSON *arr = tree;
        while (ok) {
            const char *bs = strchr(p, '\\');
            size_t len = bs ? (size_t)(bs - p) : strlen(p);
            cJSON *node = tag_child(arr, p, len, tag, (size_t)(p - tag) + len);
            ok = node != NULL;
            if (!ok || !bs) break;
            arr = cJSON_GetObjectItem(node, "children");
            p = bs + 1;
        }
    }
    rc = ok ? cw__http_send_json(r, o) : oom(r);
    cJSON_Delete(o);
    cw_tag_list_clear(&tags);
    return rc;
}
