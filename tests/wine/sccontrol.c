/* sccontrol.c - `sccontrol.exe NAME CONTROL`: sends a control to a service,
 * as `sc control NAME CONTROL` does on Windows; Wine 8's sc.exe has no
 * `control` command (tests/e2e/test_win_service.py sends PARAMCHANGE with
 * it). CONTROL is paramchange, interrogate, stop or a number (128-255 are
 * user-defined). Prints the service's state after the control; exit 0,
 * or 1 with the Windows error on stderr. */
#define WIN32_LEAN_AND_MEAN
#include <windows.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static DWORD control_code(const char *s)
{
    if (strcmp(s, "paramchange") == 0) return SERVICE_CONTROL_PARAMCHANGE;
    if (strcmp(s, "interrogate") == 0) return SERVICE_CONTROL_INTERROGATE;
    if (strcmp(s, "stop") == 0) return SERVICE_CONTROL_STOP;
    char *end;
    unsigned long v = strtoul(s, &end, 10);
    return *s && !*end && v > 0 && v < 256 ? (DWORD)v : 0;
}

int main(int argc, char **argv)
{
    DWORD code = argc == 3 ? control_code(argv[2]) : 0;
    if (!code) {
        fprintf(stderr, "usage: sccontrol NAME paramchange|interrogate|stop|NUMBER\n");
        return 2;
    }
    int rc = 1;
    SC_HANDLE svc = NULL, scm = OpenSCManagerA(NULL, NULL, SC_MANAGER_CONNECT);
    if (!scm) {
        fprintf(stderr, "sccontrol: OpenSCManager failed (error %lu)\n", GetLastError());
        goto out;
    }
    DWORD access = SERVICE_QUERY_STATUS | SERVICE_INTERROGATE | SERVICE_STOP |
                   SERVICE_PAUSE_CONTINUE | SERVICE_USER_DEFINED_CONTROL;
    svc = OpenServiceA(scm, argv[1], access);
    if (!svc) {
        fprintf(stderr, "sccontrol: OpenService %s failed (error %lu)\n", argv[1], GetLastError());
        goto out;
    }
    SERVICE_STATUS st;
    if (!ControlService(svc, code, &st)) {
        fprintf(stderr, "sccontrol: ControlService %s %s failed (error %lu)\n", argv[1], argv[2],
                GetLastError());
        goto out;
    }
    printf("%s: control %lu sent; state %lu\n", argv[1], code, st.dwCurrentState);
    rc = 0;
out:
    if (svc) CloseServiceHandle(svc);
    if (scm) CloseServiceHandle(scm);
    return rc;
}
