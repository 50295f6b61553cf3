/* error.h - error codes and user-facing diagnostics.
 *
 * Every fallible function returns 0 or a negative CW_E* code. Where a user
 * needs more than the code (which file, which line, what to do), the
 * function also takes a cw_diag_t that it fills with one sentence.
 * CW_ERRNO_MAP generates the enum and cw_strerror() so they never drift. */
#ifndef COMMITWATCH_ERROR_H
#define COMMITWATCH_ERROR_H

#include <stddef.h>

#include "commitwatch/common.h"

#define CW_ERRNO_MAP(X)                                                                            \
    X(ENOMEM, -1, "out of memory")                                                                 \
    X(EINVAL, -2, "invalid argument")                                                              \
    X(EIO, -3, "input/output error")                                                               \
    X(EPARSE, -4, "malformed input")                                                               \
    X(ETIME, -5, "events go back in time")                                                         \
    X(ENOTDB, -6, "not a commitwatch database")                                                    \
    X(ENEWER, -7, "database was written by a newer commitwatch")                                   \
    X(EDB, -8, "database error")                                                                   \
    X(ENOENT, -9, "not found")                                                                     \
    X(EPERM, -10, "permission denied")                                                             \
    X(ENOSYS, -11, "not supported here")                                                           \
    X(ESTOPPED, -12, "stopped")                                                                    \
    X(ERANGE, -13, "value out of range")                                                           \
    X(EUSAGE, -14, "invalid usage")                                                                \
    X(ENOSPC, -15, "no space left on the database's disk")

typedef enum cw_errno {
#define CW__ERR_ENUM(name, code, msg) CW_##name = (code),
    CW_ERRNO_MAP(CW__ERR_ENUM)
#undef CW__ERR_ENUM
} cw_errno_t;

/* Static text for a code; "unknown error" for anything else. Never NULL. */
const char *cw_strerror(int err);
/* "ENOMEM" etc.; "UNKNOWN" otherwise. */
const char *cw_err_name(int err);

/* One human-readable sentence describing the last failure of a call. */
typedef struct cw_diag {
    char msg[1024];
} cw_diag_t;

/* printf-style fill of d (d may be NULL). Returns err unchanged so callers
 * can write `return cw_diag_set(d, CW_EPARSE, "...")`. */
int cw_diag_set(cw_diag_t *d, int err, const char *fmt, ...) CW_PRINTF(3, 4);

#endif
