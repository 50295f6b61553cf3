/* export.c - a window's stacks as folded stacks and as speedscope JSON,
 * and the entry point of every export format (export.h; the pprof
 * profile is export_pprof.c's, the names and helpers every format shares
 * export_common.c's).
 *
 * Both formats are built from the report's stacks as they are: no frame is
 * renamed except where the format cannot hold it (folded: ';' and line
 * breaks become '_'), and a process's stacks keep the report's order. */
#include "commitwatch/export.h"

#include <cjson/cJSON.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "analysis/export_int.h"
#include "analysis/export_pprof.h"
#include "commitwatch/common.h"

/* ---------------------------------------------------------------- folded */

/* A frame as folded text: ';' separates frames and a line ends a stack. */
static void put_frame(cw_buf_t *b, const char *s)
{
    const char *p = s;
    while (*p) {
        size_t run = strcspn(p, ";\r\n");
        cw_buf_put(b, p, run);
        p += run;
        if (*p) {
            cw_buf_put(b, "_", 1);
            p++;
        }
    }
}

static int export_folded(const cw_proc_report_t *procs, uint32_t nprocs,
                         const cw_export_opts_t *o, char **out, size_t *len)
{
    cw_buf_t b = {0};
    cw_buf_put(&b, "", 0); /* an empty export is "" */
    for (uint32_t i = 0; i < nprocs && !b.failed; i++) {
        const cw_proc_report_t *p = &procs[i];
        char *root = o->process_frame ? cw__export_proc_frame(p) : NULL;
        if (o->process_frame && !root) b.failed = true;
        for (uint32_t j = 0; j < p->nstacks && !b.failed; j++) {
            const cw_stack_report_t *s = &p->stacks[j];
            int64_t v = cw_export_stack_value(&s->figs, o->value);
            if (v <= 0) continue;
            if (root) {
                put_frame(&b, root);
                cw_buf_put(&b, ";", 1);
            }
            for (uint32_t k = 0; k < s->nframes; k++) {
                if (k) cw_buf_put(&b, ";", 1);
                put_frame(&b, s->frames[k]);
            }
            if (s->nframes == 0) cw_buf_puts(&b, CW__EXPORT_NO_FRAMES);
            cw_buf_printf(&b, " %" PRId64 "\n", v);
        }
        free(root);
    }
    if (b.failed) {
        free(b.p);
        return CW_ENOMEM;
    }
    *out = b.p;
    *len = b.n;
    return 0;
}

/* ---------------------------------------------------------------- speedscope */

static cJSON *raw_i64(int64_t v)
{
    char buf[32];
    snprintf(buf, sizeof buf, "%" PRId64, v);
    return cJSON_CreateRaw(buf);
}

/* One stack's frame indices, outermost first (the process's frame first
 * when there is one), as the JSON array text "[i,j,...]": one raw cJSON
 * item per sample, not one per frame (a file of 50,000 stacks of 20
 * frames in three profiles would be 3 million items). */
typedef struct ss_stack {
    cw_buf_t text;
} ss_stack_t;

static int export_speedscope(const cw_proc_report_t *procs, uint32_t nprocs, int64_t from_ns,
                             int64_t to_ns, const char *name, const cw_export_opts_t *o,
                             char **out, size_t *len)
{
    static const char *const titles[CW_EXPORT__NVALUES] = {"impacting bytes", "transient bytes",
                                                           "commits"};
    cw__interner_t in;
    size_t nstacks = 0, k = 0;
    for (uint32_t i = 0; i < nprocs; i++)
        nstacks += procs[i].nstacks;
    char **roots = calloc(nprocs ? nprocs : 1, sizeof *roots);
    ss_stack_t *st = calloc(nstacks ? nstacks : 1, sizeof *st);
    cJSON *root = NULL;
    bool ok = roots && st && cw__interner_init(&in) == 0;
    if (!ok) {
        free(roots);
        free(st);
        return CW_ENOMEM;
    }
    uint32_t none = cw__intern(&in, CW__EXPORT_NO_FRAMES);
    ok = none != UINT32_MAX;
    for (uint32_t i = 0; ok && i < nprocs; i++) {
        const cw_proc_report_t *p = &procs[i];
        uint32_t ri = UINT32_MAX;
        if (o->process_frame) {
            ok = (roots[i] = cw__export_proc_frame(p)) != NULL &&
                 (ri = cw__intern(&in, roots[i])) != UINT32_MAX;
        }
        for (uint32_t j = 0; ok && j < p->nstacks; j++, k++) {
            const cw_stack_report_t *s = &p->stacks[j];
            cw_buf_t *t = &st[k].text;
            cw_buf_put(t, "[", 1);
            if (ri != UINT32_MAX) cw_buf_printf(t, "%" PRIu32 "%s", ri, s->nframes ? "," : "");
            for (uint32_t f = 0; ok && f < s->nframes; f++) {
                uint32_t fi = cw__intern(&in, s->frames[f]);
                ok = fi != UINT32_MAX;
                cw_buf_printf(t, "%s%" PRIu32, f ? "," : "", fi);
            }
            if (s->nframes == 0) cw_buf_printf(t, "%s%" PRIu32, ri != UINT32_MAX ? "," : "", none);
            cw_buf_put(t, "]", 1);
            ok = ok && !t->failed;
        }
    }

    cJSON *shared, *frames = NULL, *profiles = NULL;
    char label[256];
    snprintf(label, sizeof label, "%s", name ? name : "commitwatch");
    ok = ok && (root = cJSON_CreateObject()) != NULL &&
         cJSON_AddStringToObject(root, "$schema",
                                 "https://www.speedscope.app/file-format-schema.json") &&
         cJSON_AddStringToObject(root, "name", label) &&
         cJSON_AddStringToObject(root, "exporter", "commitwatch " CW_VERSION) &&
         cJSON_AddNumberToObject(root, "activeProfileIndex", 0) &&
         (shared = cJSON_AddObjectToObject(root, "shared")) != NULL &&
         (frames = cJSON_AddArrayToObject(shared, "frames")) != NULL &&
         (profiles = cJSON_AddArrayToObject(root, "profiles")) != NULL;
    for (size_t f = 0; ok && f < in.n; f++) {
        cJSON *fo = cJSON_CreateObject();
        ok = fo && cJSON_AddItemToArray(frames, fo) && cJSON_AddStringToObject(fo, "name", in.v[f]);
    }
    for (int v = 0; ok && v < CW_EXPORT__NVALUES; v++) {
        cJSON *pr = cJSON_CreateObject(), *samples = NULL, *weights = NULL;
        char pname[320];
        snprintf(pname, sizeof pname, "%s: %s", label, titles[v]);
        int64_t total = 0;
        ok = pr && cJSON_AddItemToArray(profiles, pr) &&
             cJSON_AddStringToObject(pr, "type", "sampled") &&
             cJSON_AddStringToObject(pr, "name", pname) &&
             cJSON_AddStringToObject(pr, "unit", v == CW_EXPORT_COUNT ? "none" : "bytes") &&
             cJSON_AddNumberToObject(pr, "startValue", 0) &&
             (samples = cJSON_AddArrayToObject(pr, "samples")) != NULL &&
             (weights = cJSON_AddArrayToObject(pr, "weights")) != NULL;
        k = 0;
        for (uint32_t i = 0; ok && i < nprocs; i++)
            for (uint32_t j = 0; ok && j < procs[i].nstacks; j++, k++) {
                int64_t w = cw_export_stack_value(&procs[i].stacks[j].figs, (cw_export_value_t)v);
                if (w <= 0) continue;
                total += w;
                ok = cJSON_AddItemToArray(samples, cJSON_CreateRaw(st[k].text.p)) &&
                     cJSON_AddItemToArray(weights, raw_i64(w));
            }
        ok = ok && cJSON_AddItemToObject(pr, "endValue", raw_i64(total));
    }
    /* The window, for the reader (speedscope ignores unknown members). */
    ok = ok && cJSON_AddItemToObject(root, "commitwatch_from_ns", raw_i64(from_ns)) &&
         cJSON_AddItemToObject(root, "commitwatch_to_ns", raw_i64(to_ns));
    char *s = ok ? cJSON_PrintUnformatted(root) : NULL;
    cJSON_Delete(root);
    for (size_t i = 0; i < nstacks; i++)
        free(st[i].text.p);
    free(st);
    cw_free_strv(roots, nprocs);
    cw__interner_free(&in);
    if (!s) return CW_ENOMEM;
    *out = s;
    *len = strlen(s);
    return 0;
}

/* ---------------------------------------------------------------- entry */

int cw_export_procs(const cw_proc_report_t *procs, uint32_t nprocs, int64_t from_ns,
                    int64_t to_ns, const char *name, const cw_export_opts_t *o, char **out,
                    size_t *len, cw_diag_t *d)
{
    int rc;
    *out = NULL;
    *len = 0;
    if ((unsigned)o->value >= CW_EXPORT__NVALUES)
        return cw_diag_set(d, CW_EINVAL, "export: unknown value %d", (int)o->value);
    switch (o->format) {
    case CW_EXPORT_FOLDED:
        rc = export_folded(procs, nprocs, o, out, len);
        break;
    case CW_EXPORT_PPROF:
        return cw__export_pprof(procs, nprocs, from_ns, to_ns, name, out, len, d);
    case CW_EXPORT_SPEEDSCOPE:
        rc = export_speedscope(procs, nprocs, from_ns, to_ns, name, o, out, len);
        break;
    default:
        return cw_diag_set(d, CW_EINVAL, "export: unknown format %d", (int)o->format);
    }
    if (rc == CW_ENOMEM) cw_diag_set(d, rc, "out of memory while writing the %s export",
                                     cw_export_format_name(o->format));
    return rc;
}
