/* inject.c - loading a library into a running process (platform.h,
 * cw_plat_inject_library) on Windows: not done. The heap drill-down on
 * Windows asks the kernel's ETW heap provider for the process instead
 * (docs/DESIGN.md, "Heap drill-down"). */
#include "commitwatch/platform.h"

int cw_plat_inject_library(uint32_t pid, const char *lib, int give_fd, int64_t timeout_ns,
                           int64_t *reply, cw_diag_t *d)
{
    (void)pid, (void)lib, (void)give_fd, (void)timeout_ns, (void)reply;
    return cw_diag_set(d, CW_ENOSYS,
                       "loading a library into a running process is not done on Windows: the "
                       "heap drill-down uses the ETW heap provider there");
}
