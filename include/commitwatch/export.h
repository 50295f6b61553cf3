/* export.h - the stacks of a window in formats other tools open.
 *
 * The stacks of a report's processes (report.h: the same figures as
 * `analyze --stacks` and /api/processes/{id}/stacks) written as
 *
 *   folded      flamegraph.pl's input: one line per stack, its frames
 *               outermost first joined by ';', a space and one value;
 *   pprof       a gzipped profile.proto message (pprof, Go's tooling,
 *               Pyroscope, ...) with four sample types, impacting_bytes,
 *               transient_bytes, commit_count and commit_bytes (the
 *               bytes newly committed), and labels tag, process, pid and
 *               instance on every sample;
 *   speedscope  a speedscope JSON file
 *               (https://www.speedscope.app/file-format-schema.json), one
 *               sampled profile per value (impacting bytes, transient
 *               bytes, commits).
 *
 * Flame graphs cannot draw negative widths: in folded and speedscope a
 * stack whose value is zero or negative (a stack that released more of
 * what was committed before the window than it kept) is left out; pprof
 * keeps every stack (its values are signed), so its totals are the
 * report's. docs/EXPORTS.md has the details.
 *
 * Thread: any; the functions keep no state. */
#ifndef COMMITWATCH_EXPORT_H
#define COMMITWATCH_EXPORT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "commitwatch/error.h"
#include "commitwatch/report.h"

typedef enum cw_export_format {
    CW_EXPORT_FOLDED = 0,
    CW_EXPORT_PPROF = 1,
    CW_EXPORT_SPEEDSCOPE = 2,
    CW_EXPORT__NFORMATS = 3
} cw_export_format_t;

/* The figure of a stack a flame graph's widths show. */
typedef enum cw_export_value {
    CW_EXPORT_IMPACTING = 0, /* impacting bytes: AIFO - AOFI (what stayed) */
    CW_EXPORT_TRANSIENT = 1, /* transient bytes: AIFI (churn) */
    CW_EXPORT_COUNT = 2,     /* commit count */
    CW_EXPORT__NVALUES = 3
} cw_export_value_t;

typedef struct cw_export_opts {
    cw_export_format_t format;
    /* folded: the value of each line (speedscope and pprof carry all three) */
    cw_export_value_t value;
    /* folded and speedscope: each process's stacks under a root frame
     * "NAME (pid N)" (a folded group: "NAME (N folded)"), for exports of
     * several processes; pprof has the labels process and pid instead */
    bool process_frame;
} cw_export_opts_t;

/* "folded", "pprof", "speedscope" -> *out. 0, or CW_EUSAGE with d naming
 * the choices. */
int cw_export_parse_format(const char *s, cw_export_format_t *out, cw_diag_t *d);
/* "impacting", "transient", "count" -> *out. 0 or CW_EUSAGE. */
int cw_export_parse_value(const char *s, cw_export_value_t *out, cw_diag_t *d);
const char *cw_export_format_name(cw_export_format_t f);
/* The sample type names: "impacting_bytes", "transient_bytes", "commit_count". */
const char *cw_export_value_name(cw_export_value_t v);
/* The HTTP Content-Type of a format. */
const char *cw_export_content_type(cw_export_format_t f);
/* The file name suffix: ".folded", ".pb.gz", ".speedscope.json". */
const char *cw_export_suffix(cw_export_format_t f);

/* A stack's value (impacting may be negative). */
int64_t cw_export_stack_value(const cw_figs_t *f, cw_export_value_t v);

/* Writes the stacks of procs[0..nprocs) over the window [from_ns, to_ns)
 * in o->format into a new buffer: *out (malloc'd, the caller frees it;
 * text formats are NUL-terminated after *len bytes). name names the
 * profile (speedscope's name, a pprof comment); may be NULL. 0, or with d
 * filled: CW_ENOMEM, CW_EINVAL (a bad option), CW_ERANGE (a pprof message
 * over 2 GiB) or CW_EIO (protobuf-c or zlib failed). */
int cw_export_procs(const cw_proc_report_t *procs, uint32_t nprocs, int64_t from_ns,
                    int64_t to_ns, const char *name, const cw_export_opts_t *o, char **out,
                    size_t *len, cw_diag_t *d);

#endif
