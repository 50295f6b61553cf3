/* log.c - log sinks on Windows: "stderr" only, for now. The Windows Event
 * Log sink (an event source registered at install, with a message table)
 * comes with the Windows service. */
#include <string.h>

#include "commitwatch/log.h"
#include "commitwatch/platform.h"

int cw_plat_log_open(const char *sink, cw_diag_t *d)
{
    if (!sink || strcmp(sink, "stderr") == 0) {
        cw_log_set_sink(NULL);
        return 0;
    }
    return cw_diag_set(d, CW_EINVAL, "log = %s: unknown log sink (known here: stderr)", sink);
}

void cw_plat_log_close(void)
{
    cw_log_set_sink(NULL);
}
