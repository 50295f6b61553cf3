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

#endif
