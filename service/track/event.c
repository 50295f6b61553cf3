/* event.c - names of event operations, as spelled in the trace format. */
#include "commitwatch/event.h"

#include <string.h>

#include "commitwatch/error.h"

static const char *const op_names[CW_OP__COUNT] = {
    "commit", "decommit", "reserve", "release", "process_start", "process_exit",
};

const char *cw_op_name(cw_op_t op)
{
    if ((unsigned)op >= CW_OP__COUNT) return NULL;
    return op_names[op];
}

int cw_op_parse(const char *s, cw_op_t *out)
{
    for (int i = 0; i < CW_OP__COUNT; i++) {
        if (strcmp(s, op_names[i]) == 0) {
            *out = (cw_op_t)i;
            return 0;
        }
    }
    return CW_EINVAL;
}
