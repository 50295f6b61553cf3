/* service_scm.c - `commitwatch install | uninstall | start | stop` on
 * Windows: the Service Control Manager. Not built yet: the Windows service
 * (SCM registration, the MSI) is its own piece of work; until then these
 * commands say so and fail. */
#include <stdio.h>

#include "commitwatch/platform.h"

const char *cw_plat_service_usage(void)
{
    return "usage: commitwatch install | uninstall | start | stop\n\n"
           "Manage the commitwatch Windows service.\n";
}

int cw_plat_service(const char *cmd, const cw_plat_service_opts_t *o)
{
    (void)o;
    fprintf(stderr,
            "commitwatch %s: the Windows service commands are not built yet; run the "
            "service in a console with `commitwatch run --source replay:PATH`\n",
            cmd);
    return 1;
}
