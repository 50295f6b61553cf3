/* http_stacks.c - the stacks of a window: one instance's
 * (/api/processes/{id}/stacks) or the machine's (/api/stacks), filtered
 * by type and tag, as a list and a caller tree or, with ?format=, as a
 * profile file (folded, pprof, speedscope; export.h, docs/EXPORTS.md);
 * and the UMDH-style diff of one instance's stacks between two times
 * (/api/diff).
 *
 * The figures are cw_store_report()'s with frames (http_processes.c's
 * cw__http_window_report); the tree, the order and the limits are this
 * file's. */
#include "http/http_resources.h"

#include <cjson/cJSON.h>
#include <ctype.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "commitwatch/event.h"
#include "commitwatch/export.h"
#include "commitwatch/query.h"

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
    cw__http_idle_proc_t tmp = {0};
    const cw_proc_report_t *procs;
    uint32_t n = 1;
    int rc;
    if ((rc = cw__http_window_report(r, from, to, true, &rep))) return rc;
    if (id) {
        if ((rc = cw__http_proc_in(r, rep, id, &tmp, &procs))) goto out;
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
        rc = cw__http_oom(r);
    }
    free(kept);
    free(views);
out: /* the cleanup of every handler on cw__http_proc_in (as in http_processes.c) */
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

/* Parses a stacks request of instance id (0: the machine) into q and,
 * when ?format= asks for a profile file, answers it (*done set). 0 or the
 * error; with *done, what stacks_export returned. */
static int stacks_begin(cw__http_req_t *r, uint32_t id, stacks_q_t *q, bool *done)
{
    cw_export_opts_t eo;
    bool export = false;
    int rc;
    *done = false;
    if ((rc = stacks_query(r, q)) || (rc = export_params(r, &eo, &export))) return rc;
    if (!export) return 0;
    *done = true;
    return stacks_export(r, id, q->from, q->to, q->type, q->tag, &eo);
}

int cw__http_stacks(cw__http_req_t *r, uint32_t id)
{
    stacks_q_t q;
    bool done;
    int rc;
    if ((rc = stacks_begin(r, id, &q, &done)) || done) return rc;

    cw_report_t *rep = NULL;
    cw__http_idle_proc_t tmp = {0};
    const cw_proc_report_t *p;
    cJSON *o = NULL, *pj;
    if ((rc = cw__http_window_report(r, q.from, q.to, true, &rep))) return rc;
    if ((rc = cw__http_proc_in(r, rep, id, &tmp, &p))) goto out;
    o = cJSON_CreateObject();
    bool ok = o && cw__json_window(o, rep->from_ns, rep->to_ns) &&
              (pj = cJSON_AddObjectToObject(o, "process")) && cw__json_u64(pj, "id", p->id) &&
              cw__json_u64(pj, "pid", p->pid) &&
              cJSON_AddStringToObject(pj, "name", p->name ? p->name : "") &&
              stacks_json(o, p, 1, &q, false);
    rc = ok ? cw__http_send_json(r, o) : cw__http_oom(r);
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
    bool done;
    int rc;
    if ((rc = stacks_begin(r, 0, &q, &done)) || done) return rc;
    cw_report_t *rep = NULL;
    if ((rc = cw__http_window_report(r, q.from, q.to, true, &rep))) return rc;
    cJSON *o = cJSON_CreateObject();
    bool ok = o && cw__json_window(o, rep->from_ns, rep->to_ns) &&
              cw__json_u64(o, "processes", rep->nprocs) &&
              stacks_json(o, rep->procs, rep->nprocs, &q, true);
    rc = ok ? cw__http_send_json(r, o) : cw__http_oom(r);
    cJSON_Delete(o);
    cw_report_free(rep);
    return rc;
}

/* ---------------------------------------------------------------- diff */

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
    cw__http_idle_proc_t tmp = {0};
    const cw_proc_report_t *p;
    cJSON *o = NULL;
    if ((rc = cw__http_window_report(r, t1, t2, true, &rep))) return rc;
    if ((rc = cw__http_proc_in(r, rep, (uint32_t)id, &tmp, &p))) goto out;
    /* Stacks by bytes_delta (key) desc, then their index (id). */
    cw__http_rank_t *rows = calloc(p->nstacks ? p->nstacks : 1, sizeof *rows);
    uint32_t n = 0;
    cw_figs_t tot = {0};
    bool ok = rows != NULL;
    for (uint32_t i = 0; ok && i < p->nstacks; i++) {
        const cw_figs_t *f = &p->stacks[i].figs;
        uint64_t oldb = f->types[CW_AOFI].bytes + f->types[CW_AOFO].bytes;
        uint64_t newb = f->types[CW_AIFO].bytes + f->types[CW_AOFO].bytes;
        if (!oldb && !newb) continue;
        rows[n++] = (cw__http_rank_t){(int64_t)newb - (int64_t)oldb, i, i};
        cw_figs_add(&tot, f);
    }
    if (ok && n > 1) qsort(rows, n, sizeof *rows, cw__http_rank_cmp);
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
             cw__json_i64(so, "bytes_delta", rows[k].key) &&
             cw__json_i64(so, "count_delta", (int64_t)nc - (int64_t)oc) &&
             cw__json_u64(so, "new_bytes", nb) && cw__json_u64(so, "new_count", nc) &&
             cw__json_u64(so, "old_bytes", ob) && cw__json_u64(so, "old_count", oc) &&
             (fr = cJSON_AddArrayToObject(so, "frames"));
        for (uint32_t j = 0; ok && j < st->nframes; j++)
            ok = cJSON_AddItemToArray(fr, cJSON_CreateString(st->frames[j]));
    }
    rc = ok ? cw__http_send_json(r, o) : cw__http_oom(r);
    free(rows);
out:
    cJSON_Delete(o);
    cw_proc_info_clear(&tmp.info);
    cw_report_free(rep);
    return rc;
}
