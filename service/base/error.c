/* error.c - cw_strerror(), cw_err_name() and diagnostics, generated from
 * CW_ERRNO_MAP so codes and texts never drift. */
#include "commitwatch/error.h"

#include <stdarg.h>
#include <stdio.h>

const char *cw_strerror(int err)
{
    switch (err) {
#define CW__ERR_STR(name, code, msg)                                                               \
    case code:                                                                                     \
        return msg;
        CW_ERRNO_MAP(CW__ERR_STR)
#undef CW__ERR_STR
    case 0:
        return "success";
    default:
        return "unknown error";
    }
}

const char *cw_err_name(int err)
{
    switch (err) {
#define CW__ERR_NAME(name, code, msg)                                                              \
    case code:                                                                                     \
        return #name;
        CW_ERRNO_MAP(CW__ERR_NAME)
#undef CW__ERR_NAME
    default:
        return "UNKNOWN";
    }
}

int cw_diag_set(cw_diag_t *d, int err, const char *fmt, ...)
{
    if (d) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(d->msg, sizeof d->msg, fmt, ap);
        va_end(ap);
    }
    return err;
}
