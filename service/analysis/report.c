/* report.c - window figures (cw_report_t): freeing, sorting, JSON and the
 * WPA-like table. JSON is built with cJSON; 64-bit integers are emitted as
 * raw number text because cJSON numbers are doubles (see DESIGN.md). */
#include "commitwatch/report.h"

#include <cjson/cJSON.h>
#include <inttypes.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "commitwatch/common.h"
#include "commitwatch/error.h"
#include "commitwatch/event.h"

static const char *const type_names[CW_TYPE__COUNT] = {"AIFI", "AIFO", "AOFI", "AOFO"};

int64_t cw_figs_impacting(const cw_figs_t *f)
{
    uint64_t in = f->types[CW_AIFO].bytes, out = f->types[CW_AOFI].bytes;
    if (in >= out) return in - out > INT64_MAX ? INT64_MAX : (int64_t)(in - out);
    return out - in > INT64_MAX ? INT64_MIN : -(int64_t)(out - in);
}

void cw_figs_add(cw_figs_t *acc, const cw_figs_t *f)
{
    acc->size_bytes += f->size_bytes;
    acc->commit_count += f->commit_count;
    for (int i = 0; i < CW_TYPE__COUNT; i++) {
        acc->types[i].bytes += f->types[i].bytes;
        acc->types[i].count += f->types[i].count;
    }
}

/* What a process of the report owns; its stacks' frames are freed before
 * it (their tags are the report's). */
static const size_t proc_owned[] = {offsetof(cw_proc_report_t, stacks),
                                    offsetof(cw_proc_report_t, name),
                                    offsetof(cw_proc_report_t, cmdline)};

void cw_report_free(cw_report_t *r)
{
    if (!r) return;
    for (uint32_t i = 0; i < r->nprocs; i++) {
        cw_proc_report_t *p = &r->procs[i];
        for (uint32_t j = 0; j < p->nstacks; j++)
            cw_free_strv(p->stacks[j].frames, p->stacks[j].nframes);
    }
    cw_free_rows(r->procs, r->nprocs, sizeof *r->procs, proc_owned, CW_ARRAY_LEN(proc_owned));
    cw_free_strv(r->tags, r->ntags);
    free(r->note);
    free(r);
}

const char *cw_report_add_tag(cw_report_t *r, const char *text)
{
    if (CW_RESERVE(r->tags, r->tags_cap, (size_t)r->ntags + 1)) return NULL;
    char *t = strdup(text);
    if (t) r->tags[r->ntags++] = t;
    return t;
}

static int cmp_i64_desc(int64_t a, int64_t b)
{
    return a > b ? -1 : a < b ? 1 : 0;
}

static int cmp_u64_desc(uint64_t a, uint64_t b)
{
    return a > b ? -1 : a < b ? 1 : 0;
}

static int cmp_proc(const void *x, const void *y)
{
    const cw_proc_report_t *a = x, *b = y;
    int c = cmp_i64_desc(cw_figs_impacting(&a->figs), cw_figs_impacting(&b->figs));
    if (!c) c = cmp_u64_desc(a->figs.size_bytes, b->figs.size_bytes);
    if (!c) c = a->id < b->id ? -1 : a->id > b->id;
    return c;
}

static int cmp_stack(const void *x, const void *y)
{
    const cw_stack_report_t *a = x, *b = y;
    int c = cmp_i64_desc((int64_t)a->figs.size_bytes, (int64_t)b->figs.size_bytes);
    if (!c) c = cmp_i64_desc(cw_figs_impacting(&a->figs), cw_figs_impacting(&b->figs));
    if (!c) c = a->stack_id < b->stack_id ? -1 : a->stack_id > b->stack_id;
    return c;
}

/* A process's stacks are few (10,000 live processes: 9 each), where an
 * insertion sort costs a third of qsort's; cmp_stack is a total order
 * (stack ids are a process's once), so both give the same order. */
#define STACKS_INSERTION_MAX 16

static void sort_stacks(cw_stack_report_t *v, uint32_t n)
{
    if (n > STACKS_INSERTION_MAX) {
        qsort(v, n, sizeof *v, cmp_stack);
        return;
    }
    for (uint32_t i = 1; i < n; i++) {
        if (cmp_stack(&v[i - 1], &v[i]) <= 0) continue;
        cw_stack_report_t x = v[i];
        uint32_t j = i;
        for (; j > 0 && cmp_stack(&v[j - 1], &x) > 0; j--)
            v[j] = v[j - 1];
        v[j] = x;
    }
}

void cw_report_sort(cw_report_t *r)
{
    if (r->nprocs > 1) qsort(r->procs, r->nprocs, sizeof *r->procs, cmp_proc);
    for (uint32_t i = 0; i < r->nprocs; i++)
        sort_stacks(r->procs[i].stacks, r->procs[i].nstacks);
}

/* Adds name: exact integer. Returns the item or NULL. */
static cJSON *add_i64(cJSON *obj, const char *name, int64_t v)
{
    char buf[32];
    snprintf(buf, sizeof buf, "%" PRId64, v);
    return cJSON_AddRawToObject(obj, name, buf);
}

static cJSON *add_u64(cJSON *obj, const char *name, uint64_t v)
{
    char buf[32];
    snprintf(buf, sizeof buf, "%" PRIu64, v);
    return cJSON_AddRawToObject(obj, name, buf);
}

/* The four figures shared by tags and stacks. */
static int add_short_figs(cJSON *o, const cw_figs_t *f)
{
    return add_u64(o, "size_bytes", f->size_bytes) && add_u64(o, "commit_count", f->commit_count) &&
           add_i64(o, "impacting_bytes", cw_figs_impacting(f)) &&
           add_u64(o, "transient_bytes", f->types[CW_AIFI].bytes) &&
           add_u64(o, "transient_count", f->types[CW_AIFI].count);
}

/* Per-tag sums of a process, in order of first appearance in its (sorted)
 * stacks; then sorted like stacks. */
typedef struct tag_sum {
    const char *tag;
    cw_figs_t figs;
} tag_sum_t;

static int cmp_tag(const void *x, const void *y)
{
    const tag_sum_t *a = x, *b = y;
    int c = cmp_i64_desc((int64_t)a->figs.size_bytes, (int64_t)b->figs.size_bytes);
    if (!c) c = cmp_i64_desc(cw_figs_impacting(&a->figs), cw_figs_impacting(&b->figs));
    if (!c) c = strcmp(a->tag, b->tag);
    return c;
}

static tag_sum_t *tag_sums(const cw_proc_report_t *p, uint32_t *n)
{
    tag_sum_t *t = calloc(p->nstacks ? p->nstacks : 1, sizeof *t);
    *n = 0;
    if (!t) return NULL;
    for (uint32_t i = 0; i < p->nstacks; i++) {
        uint32_t j = 0;
        while (j < *n && strcmp(t[j].tag, p->stacks[i].tag) != 0)
            j++;
        if (j == *n) t[(*n)++].tag = p->stacks[i].tag;
        cw_figs_add(&t[j].figs, &p->stacks[i].figs);
    }
    qsort(t, *n, sizeof *t, cmp_tag);
    return t;
}

cJSON *cw_report_proc_json(const cw_proc_report_t *p, bool with_stacks)
{
    cJSON *o = cJSON_CreateObject(), *types, *tags, *stacks;
    bool ok = o != NULL;
    ok = ok && add_u64(o, "id", p->id) && add_u64(o, "pid", p->pid) &&
         cJSON_AddStringToObject(o, "name", p->name ? p->name : "");
    ok = ok && (p->cmdline ? cJSON_AddStringToObject(o, "cmdline", p->cmdline) != NULL
                           : cJSON_AddNullToObject(o, "cmdline") != NULL);
    ok = ok && add_i64(o, "start_ns", p->start_ns) && add_u64(o, "folded", p->folded);
    ok = ok && (p->exit_ns == CW_TS_NEVER ? cJSON_AddNullToObject(o, "exit_ns") != NULL
                                          : add_i64(o, "exit_ns", p->exit_ns) != NULL);
    ok = ok && (p->tracking_ended_ns == CW_TS_NEVER
                    ? cJSON_AddNullToObject(o, "tracking_ended_ns") != NULL
                    : add_i64(o, "tracking_ended_ns", p->tracking_ended_ns) != NULL);
    /* Corrected from the OS's figures after lost events (docs/LINUX.md,
     * "Losses and drift"): its figures are right, not all its events. */
    ok = ok && add_u64(o, "corrections", p->corrections) &&
         add_u64(o, "corrected_bytes", p->corrected_committed + p->corrected_decommitted) &&
         add_u64(o, "corrected_committed_bytes", p->corrected_committed) &&
         add_u64(o, "corrected_decommitted_bytes", p->corrected_decommitted);
    ok = ok && (p->last_correction_ns == CW_TS_NEVER
                    ? cJSON_AddNullToObject(o, "last_correction_ns") != NULL
                    : add_i64(o, "last_correction_ns", p->last_correction_ns) != NULL);
    ok = ok && add_short_figs(o, &p->figs) && add_u64(o, "peak_outstanding_bytes", p->peak_bytes) &&
         add_i64(o, "peak_ns", p->peak_ns) &&
         add_u64(o, "outstanding_end_bytes", p->outstanding_end) && add_u64(o, "events", p->events);
    ok = ok && (types = cJSON_AddObjectToObject(o, "types")) != NULL;
    for (int i = 0; ok && i < CW_TYPE__COUNT; i++) {
        cJSON *t = cJSON_AddObjectToObject(types, type_names[i]);
        ok = t && add_u64(t, "bytes", p->figs.types[i].bytes) &&
             add_u64(t, "count", p->figs.types[i].count);
    }
    ok = ok && (tags = cJSON_AddArrayToObject(o, "tags")) != NULL;
    if (ok) {
        uint32_t nt;
        tag_sum_t *ts = tag_sums(p, &nt);
        ok = ts != NULL;
        for (uint32_t i = 0; ok && i < nt; i++) {
            cJSON *t = cJSON_CreateObject();
            ok = t && cJSON_AddItemToArray(tags, t) &&
                 cJSON_AddStringToObject(t, "tag", ts[i].tag) && add_short_figs(t, &ts[i].figs);
        }
        free(ts);
    }
    if (ok && with_stacks) {
        ok = (stacks = cJSON_AddArrayToObject(o, "stacks")) != NULL;
        for (uint32_t i = 0; ok && i < p->nstacks; i++) {
            const cw_stack_report_t *s = &p->stacks[i];
            cJSON *so = cJSON_CreateObject(), *frames;
            ok = so && cJSON_AddItemToArray(stacks, so) &&
                 (frames = cJSON_AddArrayToObject(so, "frames")) != NULL;
            for (uint32_t k = 0; ok && k < s->nframes; k++)
                ok = cJSON_AddItemToArray(frames, cJSON_CreateString(s->frames[k]));
            ok = ok && add_u64(so, "stack_id", s->stack_id) &&
                 cJSON_AddStringToObject(so, "tag", s->tag) && add_short_figs(so, &s->figs);
        }
    }
    if (!ok) {
        cJSON_Delete(o);
        return NULL;
    }
    return o;
}

char *cw_report_json(const cw_report_t *r, bool with_stacks)
{
    cJSON *root = cJSON_CreateObject(), *win, *procs;
    char *out = NULL;
    bool ok = root && (win = cJSON_AddObjectToObject(root, "window")) != NULL &&
              add_i64(win, "from_ns", r->from_ns) && add_i64(win, "to_ns", r->to_ns) &&
              (procs = cJSON_AddArrayToObject(root, "processes")) != NULL;
    if (ok && r->note) ok = cJSON_AddStringToObject(root, "note", r->note) != NULL;
    for (uint32_t i = 0; ok && i < r->nprocs; i++) {
        cJSON *p = cw_report_proc_json(&r->procs[i], with_stacks);
        ok = p && cJSON_AddItemToArray(procs, p);
    }
    if (ok) out = cJSON_PrintUnformatted(root);
    cJSON_Delete(root);
    return out;
}

/* A sign and a magnitude, so INT64_MIN and counts past 2^63 print. */
static void format_bytes(bool neg, uint64_t mag, char *buf, size_t len)
{
    static const char *const units[] = {"B", "KB", "MB", "GB", "TB"};
    double v = (double)mag;
    int u = 0;
    while (v >= 1024.0 && u < 4) {
        v /= 1024.0;
        u++;
    }
    if (u == 0)
        snprintf(buf, len, "%s%" PRIu64 " B", neg ? "-" : "", mag);
    else
        snprintf(buf, len, "%s%.*f %s", neg ? "-" : "",
                 v < 10    ? 2
                 : v < 100 ? 1
                           : 0,
                 v, units[u]);
}

void cw_format_bytes(int64_t bytes, char *buf, size_t len)
{
    format_bytes(bytes < 0, bytes < 0 ? 0 - (uint64_t)bytes : (uint64_t)bytes, buf, len);
}

void cw_format_ubytes(uint64_t bytes, char *buf, size_t len)
{
    format_bytes(false, bytes, buf, len);
}

/* Seconds since the window start, for readable peak times. */
static double rel_s(const cw_report_t *r, int64_t ns)
{
    return (double)(ns - r->from_ns) / 1e9;
}

int cw_report_print_table(const cw_report_t *r, bool with_stacks, FILE *out)
{
    char size[32], imp[32], tsz[32], peak[32], ost[32];
    fprintf(out, "Window [%" PRId64 ", %" PRId64 ") ns, %.3f s\n", r->from_ns, r->to_ns,
            (double)(r->to_ns - r->from_ns) / 1e9);
    if (r->note) fprintf(out, "Note: %s\n", r->note);
    fprintf(out, "%-28s %8s %10s %7s %11s %9s %10s %10s %11s %10s\n", "Process", "PID", "Size",
            "Count", "Impacting", "Trans.#", "Trans.Size", "Peak", "Peak at(s)", "Outst.End");
    for (uint32_t i = 0; i < r->nprocs; i++) {
        const cw_proc_report_t *p = &r->procs[i];
        cw_format_ubytes(p->figs.size_bytes, size, sizeof size);
        cw_format_bytes(cw_figs_impacting(&p->figs), imp, sizeof imp);
        cw_format_ubytes(p->figs.types[CW_AIFI].bytes, tsz, sizeof tsz);
        cw_format_ubytes(p->peak_bytes, peak, sizeof peak);
        cw_format_ubytes(p->outstanding_end, ost, sizeof ost);
        char name[64];
        if (p->folded)
            snprintf(name, sizeof name, "%s (%" PRIu32 " folded)", p->name ? p->name : "",
                     p->folded);
        else
            snprintf(name, sizeof name, "%s", p->name ? p->name : "");
        fprintf(out,
                "%-28.28s %8" PRIu32 " %10s %7" PRIu64 " %11s %9" PRIu64 " %10s %10s %11.3f %10s\n",
                name, p->pid, size, p->figs.commit_count, imp,
                p->figs.types[CW_AIFI].count, tsz, peak, rel_s(r, p->peak_ns), ost);
        fprintf(out,
                "%-28s types: AIFI %" PRIu64 "/%" PRIu64 "B AIFO %" PRIu64 "/%" PRIu64
                "B AOFI %" PRIu64 "/%" PRIu64 "B AOFO %" PRIu64 "/%" PRIu64 "B\n",
                "", p->figs.types[0].count, p->figs.types[0].bytes, p->figs.types[1].count,
                p->figs.types[1].bytes, p->figs.types[2].count, p->figs.types[2].bytes,
                p->figs.types[3].count, p->figs.types[3].bytes);
        if (!with_stacks) continue;
        for (uint32_t j = 0; j < p->nstacks; j++) {
            const cw_stack_report_t *s = &p->stacks[j];
            cw_format_ubytes(s->figs.size_bytes, size, sizeof size);
            cw_format_bytes(cw_figs_impacting(&s->figs), imp, sizeof imp);
            cw_format_ubytes(s->figs.types[CW_AIFI].bytes, tsz, sizeof tsz);
            fprintf(out, "    [%s] size %s, impacting %s, transient %" PRIu64 " / %s\n", s->tag,
                    size, imp, s->figs.types[CW_AIFI].count, tsz);
            for (uint32_t k = 0; k < s->nframes; k++)
                fprintf(out, "        %s\n", s->frames[k]);
        }
    }
    return ferror(out) ? CW_EIO : 0;
}
