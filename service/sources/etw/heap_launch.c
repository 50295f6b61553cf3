/* heap_launch.c - launch mode of the heap drill-down (heap_launch.h) in
 * the Windows build: not there yet. A Windows heap trace will come from
 * the ETW heap provider (issue 31), not from an interposer. */
#include "commitwatch/heap_launch.h"

#include <string.h>

void cw_heap_launch_stop(void) {}

int cw_heap_launch(const cw_heap_launch_args_t *a, cw_stacks_t *stacks, cw_heap_model_t *m,
                   cw_heap_launch_result_t *res, cw_diag_t *d)
{
    (void)a;
    (void)stacks;
    (void)m;
    memset(res, 0, sizeof *res);
    return cw_diag_set(d, CW_ENOSYS,
                       "heap launch mode runs on Linux only; on Windows, heap traces will come "
                       "from ETW's heap provider");
}
