/* http_processes.c - the process resources of a window: the list
 * (/api/processes: sorted, filtered by name or pid, limited), one
 * instance (/api/processes/{id}) and the instances a folded line stands
 * for (/api/processes/{id}/instances); and the two helpers the stacks
 * and the diff share: the window's report and one instance in it.
 *
 * Every figure comes from cw_store_report() (the same code as `analyze
 * --db`), so the API and the CLI cannot disagree; the list, filtered or
 * not, from cw_store_report_match() (unless a layer is named): the same
 * figures of the processes shown only. Process objects are
 * cw_report_proc_json()'s, byte for byte those of `analyze --json`.
 * 64-bit integers are raw number text (DESIGN.md, "Integers in JSON"). */
#include "http/http_resources.h"

#include <cjson/cJSON.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "commitwatch/event.h"
#include "commitwatch/query.h"

/* ---------------------------------------------------------------- reports */

int cw__http_window_report(cw__http_req_t *r, int64_t from, int64_t to, bool frames,
                         cw_report_t **out)
{
    cw_diag_t d = {{0}};
    const char *layer = cw__http_param(r, "layer");
    int rc;
    if (layer && strcmp(layer, "heap") == 0) {
        /* The heap layer on a handle of its own: the pool's handles keep
         * the commit layer's caches and share. */
        cw_store_t *hs = NULL;
        rc = cw_store_open_readonly(r->ctx->db_path, &hs, &d);
        if (!rc) rc = cw_store_set_layer(hs, CW_LAYER_HEAP);
        if (!rc) rc = cw_store_report(hs, from, to, frames, out, &d);
        cw_store_close(hs);
    } else if (layer && strcmp(layer, "commit") != 0) {
        return cw__http_fail(r, 400, "layer: '%s' is not one of commit, heap", layer);
    } else {
        rc = cw_store_report(r->store, from, to, frames, out, &d);
    }
    if (rc) return cw__http_fail(r, 500, "query failed: %s", d.msg[0] ? d.msg : cw_strerror(rc));
    return 0; /* sorted by the store */
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
    uint32_t total = 0;
    bool top = !cw__http_param(r, "layer");
    if (top) {
        /* Only the processes shown are decoded and named (the store ranks
         * them from its cells' columns; by transient bytes, from every
         * cell decoded), of those the filters keep; the same answer as
         * below. */
        const cw_proc_match_t m = {.name = name, .by_pid = pids != NULL, .pid = (uint32_t)pid};
        static const cw_rank_t keys[] = {[S_IMPACTING] = CW_RANK_IMPACTING,
                                         [S_TRANSIENT] = CW_RANK_TRANSIENT,
                                         [S_SIZE] = CW_RANK_SIZE,
                                         [S_PEAK] = CW_RANK_PEAK,
                                         [S_OUTSTANDING] = CW_RANK_OUTSTANDING};
        cw_diag_t d = {{0}};
        rc = cw_store_report_match(r->store, from, to, keys[sort], (uint32_t)limit, &m, false, &rep,
                                   &total, &d);
        if (rc)
            return cw__http_fail(r, 500, "query failed: %s", d.msg[0] ? d.msg : cw_strerror(rc));
    } else if ((rc = cw__http_window_report(r, from, to, false, &rep))) {
        return rc;
    }
    /* An index array sorted by key desc, then id. */
    cw__http_rank_t *ix = calloc(rep->nprocs ? rep->nprocs : 1, sizeof *ix);
    cJSON *root = cJSON_CreateObject(), *arr = NULL;
    uint32_t n = 0;
    bool ok = ix && root && cw__json_window(root, rep->from_ns, rep->to_ns) &&
              (arr = cJSON_AddArrayToObject(root, "processes")) != NULL;
    if (ok && rep->note) ok = cJSON_AddStringToObject(root, "note", rep->note) != NULL;
    for (uint32_t i = 0; ok && i < rep->nprocs; i++) {
        const cw_proc_report_t *p = &rep->procs[i];
        /* The ranked report holds only what the filters keep. */
        if (!top && name && !cw_contains_ci(p->name ? p->name : "", name)) continue;
        if (!top && pids && p->pid != pid) continue;
        ix[n++] = (cw__http_rank_t){proc_key(p, sort), p->id, i};
    }
    if (ok && n > 1) qsort(ix, n, sizeof *ix, cw__http_rank_cmp);
    ok = ok && cw__json_u64(root, "total", top ? total : n);
    for (uint32_t k = 0; ok && k < n && k < limit; k++) {
        cJSON *p = cw_report_proc_json(&rep->procs[ix[k].i], false);
        ok = p && cJSON_AddItemToArray(arr, p);
    }
    rc = cw__http_send_tree(r, ok, root);
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

int cw__http_proc_in(cw__http_req_t *r, cw_report_t *rep, uint32_t id, cw__http_idle_proc_t *tmp,
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
    cw__http_idle_proc_t tmp = {0};
    const cw_proc_report_t *p;
    if ((rc = cw__http_window_report(r, from, to, false, &rep))) return rc;
    if ((rc = cw__http_proc_in(r, rep, id, &tmp, &p))) goto out;
    cJSON *root = cJSON_CreateObject(), *pj = cw_report_proc_json(p, false);
    bool ok = root && pj && cw__json_window(root, rep->from_ns, rep->to_ns) &&
              (!rep->note || cJSON_AddStringToObject(root, "note", rep->note));
    if (ok) {
        cJSON_AddItemToObject(root, "process", pj);
        pj = NULL;
    }
    cJSON_Delete(pj);
    rc = cw__http_send_tree(r, ok, root);
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
    rc = cw__http_send_tree(r, ok, root);
    if (info.folded) cw_folded_list_clear(&l);
    cw_proc_info_clear(&info);
    return rc;
}
