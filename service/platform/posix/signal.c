/* signal.c - stop and reload requests on POSIX: SIGINT and SIGTERM stop,
 * SIGHUP reloads. The handlers call the service's hooks, which only set
 * flags and call a source's stop(). */
#include <signal.h>
#include <string.h>

#include "commitwatch/platform.h"

static void (*stop_hook)(void);
static void (*reload_hook)(void);

static void on_signal(int sig)
{
    if (sig == SIGHUP) {
        if (reload_hook) reload_hook();
    } else if (stop_hook) {
        stop_hook();
    }
}

void cw_plat_catch_stop(void (*on_stop)(void), void (*on_reload)(void))
{
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    stop_hook = on_stop;
    reload_hook = on_reload;
    sa.sa_handler = on_stop ? on_signal : SIG_DFL;
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
    /* Without a reload hook SIGHUP keeps its default (terminate). */
    sa.sa_handler = on_reload ? on_signal : SIG_DFL;
    sigaction(SIGHUP, &sa, NULL);
}
