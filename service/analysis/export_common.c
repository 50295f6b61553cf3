/* export_common.c - what every export format shares: the names of the
 * formats and values (parsing them, their content types and file
 * suffixes), a stack's value, a string interner and the name of a
 * process's root frame (export_int.h). The ground floor of the exports:
 * export.c (folded, speedscope, the entry point) and export_pprof.c both
 * build on it; it calls neither. */
#include "commitwatch/export.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "analysis/export_int.h"
#include "commitwatch/common.h"
#include "commitwatch/hash.h"

static const char *const format_names[CW_EXPORT__NFORMATS] = {"folded", "pprof", "speedscope"};
static const char *const value_args[CW_EXPORT__NVALUES] = {"impacting", "transient", "count"};
static const char *const value_names[CW_EXPORT__NVALUES] = {"impacting_bytes", "transient_bytes",
                                                            "commit_count"};

/* s's index in names[0..n) into *out; else CW_EUSAGE naming the choices,
 * for the option `what`. */
static int parse_name(const char *what, const char *const *names, int n, const char *s, int *out,
                      cw_diag_t *d)
{
    char choices[128] = "";
    for (int i = 0; i < n; i++) {
        if (s && strcmp(s, names[i]) == 0) {
            *out = i;
            return 0;
        }
        size_t len = strlen(choices);
        snprintf(choices + len, sizeof choices - len, "%s%s", i ? ", " : "", names[i]);
    }
    return cw_diag_set(d, CW_EUSAGE, "%s: '%s' is not one of %s", what, s ? s : "", choices);
}

int cw_export_parse_format(const char *s, cw_export_format_t *out, cw_diag_t *d)
{
    int i = 0, rc = parse_name("format", format_names, CW_EXPORT__NFORMATS, s, &i, d);
    if (rc == 0) *out = (cw_export_format_t)i;
    return rc;
}

int cw_export_parse_value(const char *s, cw_export_value_t *out, cw_diag_t *d)
{
    int i = 0, rc = parse_name("value", value_args, CW_EXPORT__NVALUES, s, &i, d);
    if (rc == 0) *out = (cw_export_value_t)i;
    return rc;
}

const char *cw_export_format_name(cw_export_format_t f)
{
    return (unsigned)f < CW_EXPORT__NFORMATS ? format_names[f] : "?";
}

const char *cw_export_value_name(cw_export_value_t v)
{
    return (unsigned)v < CW_EXPORT__NVALUES ? value_names[v] : "?";
}

const char *cw_export_content_type(cw_export_format_t f)
{
    switch (f) {
    case CW_EXPORT_FOLDED:
        return "text/plain; charset=utf-8";
    case CW_EXPORT_PPROF:
        return "application/octet-stream"; /* pprof's own servers say so too */
    default:
        return "application/json";
    }
}

const char *cw_export_suffix(cw_export_format_t f)
{
    switch (f) {
    case CW_EXPORT_FOLDED:
        return ".folded";
    case CW_EXPORT_PPROF:
        return ".pb.gz";
    default:
        return ".speedscope.json";
    }
}

int64_t cw_export_stack_value(const cw_figs_t *f, cw_export_value_t v)
{
    switch (v) {
    case CW_EXPORT_IMPACTING:
        return cw_figs_impacting(f);
    case CW_EXPORT_TRANSIENT:
        return (int64_t)f->types[CW_AIFI].bytes;
    default:
        return (int64_t)f->commit_count;
    }
}

int cw__interner_init(cw__interner_t *in)
{
    memset(in, 0, sizeof *in);
    return cw_keymap_init(&in->map, 16);
}

void cw__interner_free(cw__interner_t *in)
{
    cw_keymap_free(&in->map);
    free(in->v);
    memset(in, 0, sizeof *in);
}

uint32_t cw__intern(cw__interner_t *in, const char *s)
{
    size_t len = strlen(s);
    uint64_t h = cw_hash_bytes(s, len);
    /* The key is (hash, length + salt): a second string with the same
     * hash and length (a collision) takes the next salt. */
    for (uint64_t salt = 0;; salt += (uint64_t)1 << 40) {
        int added = 0;
        uint32_t i = cw_keymap_get(&in->map, h, (uint64_t)len + salt, &added);
        if (i == UINT32_MAX) return UINT32_MAX;
        if (!added) {
            if (strcmp(in->v[i], s) == 0) return i;
            continue;
        }
        if (CW_RESERVE(in->v, in->cap, in->n + 1) != 0) {
            /* The map holds an index with no string: drop them both. */
            cw_keymap_clear(&in->map);
            in->n = 0;
            return UINT32_MAX;
        }
        in->v[in->n++] = s;
        return i;
    }
}

char *cw__export_proc_frame(const cw_proc_report_t *p)
{
    const char *name = p->name && p->name[0] ? p->name : "?";
    int n = p->folded ? snprintf(NULL, 0, "%s (%" PRIu32 " folded)", name, p->folded)
                      : snprintf(NULL, 0, "%s (pid %" PRIu32 ")", name, p->pid);
    char *s = n >= 0 ? malloc((size_t)n + 1) : NULL;
    if (!s) return NULL;
    if (p->folded)
        snprintf(s, (size_t)n + 1, "%s (%" PRIu32 " folded)", name, p->folded);
    else
        snprintf(s, (size_t)n + 1, "%s (pid %" PRIu32 ")", name, p->pid);
    return s;
}
