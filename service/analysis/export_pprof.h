/* export_pprof.h - the pprof profile (export_pprof.c), called by the
 * export entry point in export.c. */
#ifndef CW_EXPORT_PPROF_H
#define CW_EXPORT_PPROF_H

#include <stddef.h>
#include <stdint.h>

#include "commitwatch/export.h"

/* The pprof profile (export_pprof.c): the gzipped message. 0, CW_ENOMEM,
 * CW_ENOSYS (a build without protobuf-c) or CW_EIO (zlib), with d filled. */
int cw__export_pprof(const cw_proc_report_t *procs, uint32_t nprocs, int64_t from_ns,
                     int64_t to_ns, const char *name, char **out, size_t *len, cw_diag_t *d);

/* Any profile of stacks: what cw__export_pprof writes for a window's
 * commits, and the heap report (heap_diff.c) for its blocks. */
#define CW__PPROF_MAX_TYPES 4
typedef struct cw__pprof_types {
    const char *name[CW__PPROF_MAX_TYPES], *unit[CW__PPROF_MAX_TYPES]; /* "inuse_space", "bytes" */
    int n;                   /* 1..CW__PPROF_MAX_TYPES */
    int default_type;        /* index */
} cw__pprof_types_t;
typedef struct cw__pprof_sample {
    char *const *frames; /* outermost first (written leaf first) */
    uint32_t nframes;
    int64_t value[CW__PPROF_MAX_TYPES];
    const char *tag;     /* the label tag, or NULL: none */
    const char *process; /* the labels process, pid and instance */
    uint32_t pid, instance;
} cw__pprof_sample_t;
/* The profile of samples v[0..n) of types t over [from_ns, to_ns), its
 * comment "commitwatch NAME: window [from, to) ns": gzipped, as above. */
int cw__pprof_write(const cw__pprof_sample_t *v, size_t n, const cw__pprof_types_t *t,
                    int64_t from_ns, int64_t to_ns, const char *name, char **out, size_t *len,
                    cw_diag_t *d);

#endif
