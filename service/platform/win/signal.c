/* signal.c - stop requests on a Windows console: Ctrl+C, Ctrl+Break and
 * closing the console window stop the service (a console has no reload
 * request; a Windows service gets STOP and PARAMCHANGE from the Service
 * Control Manager instead). The handler runs on a thread the system
 * creates: it only calls the hook, which sets flags. */
#include "platform/win/win_internal.h"

#include "commitwatch/platform.h"

static void (*stop_hook)(void);

static BOOL WINAPI on_ctrl(DWORD type)
{
    switch (type) {
    case CTRL_C_EVENT:
    case CTRL_BREAK_EVENT:
    case CTRL_CLOSE_EVENT:
        if (stop_hook) stop_hook();
        return TRUE;
    default:
        return FALSE;
    }
}

void cw_plat_catch_stop(void (*on_stop)(void), void (*on_reload)(void))
{
    (void)on_reload;
    if (on_stop && !stop_hook) SetConsoleCtrlHandler(on_ctrl, TRUE);
    if (!on_stop && stop_hook) SetConsoleCtrlHandler(on_ctrl, FALSE);
    stop_hook = on_stop;
}
