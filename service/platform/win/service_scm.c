/* service_scm.c - the Windows service: `commitwatch install | uninstall |
 * start | stop` through the Service Control Manager, and the dispatcher
 * that runs `commitwatch.exe run` as the service "commitwatch" when the SCM
 * starts it.
 *
 * install registers an automatic-start service running as LocalSystem
 * (the kernel trace needs it) with a description, restart-on-failure
 * recovery actions and a preshutdown timeout; its command line is
 *   "<exe>" run --config "%ProgramData%\commitwatch\commitwatch.conf"
 *       --db "%ProgramData%\commitwatch\commitwatch.db"
 * and it writes the default configuration when there is none. It also
 * registers the Event Log source (eventlog.c). uninstall stops and deletes
 * the service and the event source and leaves %ProgramData%\commitwatch.
 *
 * DESIGN (threads): StartServiceCtrlDispatcherW takes the main thread;
 * the SCM starts service_main on a thread of its own, which runs the
 * service body (hooks->run) to its end; the control handler runs on the
 * dispatcher's (main) thread and only calls hooks->stop/reload, which set
 * flags. `status` is written by both, under `lock`. */
#include "platform/win/win_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "commitwatch/log.h"
#include "commitwatch/platform.h"

#define SVC_NAME L"commitwatch"
#define SVC_DISPLAY L"commitwatch memory-commit monitor"
#define SVC_DESCRIPTION                                                                            \
    L"Watches every process commit and release virtual memory, attributes each commit to "         \
    L"the code path that made it, stores the figures and serves a dashboard and an API."
#define START_WAIT_MS 30000
#define STOP_WAIT_MS 30000

/* ---- running as the service ------------------------------------------------ */

static const cw_plat_service_hooks_t *hooks;
static SERVICE_STATUS_HANDLE status_handle;
static SERVICE_STATUS status;
static SRWLOCK lock = SRWLOCK_INIT;
static int run_result;

static void report(DWORD state, DWORD exit_code, DWORD wait_hint)
{
    AcquireSRWLockExclusive(&lock);
    status.dwServiceType = SERVICE_WIN32_OWN_PROCESS;
    status.dwCurrentState = state;
    status.dwControlsAccepted = state == SERVICE_RUNNING
                                    ? SERVICE_ACCEPT_STOP | SERVICE_ACCEPT_SHUTDOWN |
                                          SERVICE_ACCEPT_PRESHUTDOWN | SERVICE_ACCEPT_PARAMCHANGE
                                    : 0;
    status.dwWin32ExitCode = exit_code;
    status.dwWaitHint = wait_hint;
    status.dwCheckPoint =
        state == SERVICE_RUNNING || state == SERVICE_STOPPED ? 0 : status.dwCheckPoint + 1;
    if (exit_code == ERROR_SERVICE_SPECIFIC_ERROR)
        status.dwServiceSpecificExitCode = (DWORD)(run_result < 0 ? -run_result : run_result);
    SetServiceStatus(status_handle, &status);
    ReleaseSRWLockExclusive(&lock);
}

static DWORD WINAPI on_control(DWORD control, DWORD type, void *data, void *ctx)
{
    (void)type;
    (void)data;
    (void)ctx;
    switch (control) {
    case SERVICE_CONTROL_STOP:
    case SERVICE_CONTROL_SHUTDOWN:
    case SERVICE_CONTROL_PRESHUTDOWN:
        /* The service flushes the open bucket and closes the database on
         * its way out; the wait hint covers it. */
        report(SERVICE_STOP_PENDING, NO_ERROR, STOP_WAIT_MS);
        hooks->stop();
        return NO_ERROR;
    case SERVICE_CONTROL_PARAMCHANGE:
        hooks->reload();
        return NO_ERROR;
    case SERVICE_CONTROL_INTERROGATE:
        return NO_ERROR;
    default:
        return ERROR_CALL_NOT_IMPLEMENTED;
    }
}

/* Called by the service body once it is up. */
static void on_running(void *handle)
{
    (void)handle;
    report(SERVICE_RUNNING, NO_ERROR, 0);
}

static void WINAPI service_main(DWORD argc, wchar_t **argv)
{
    (void)argc;
    (void)argv;
    status_handle = RegisterServiceCtrlHandlerExW(SVC_NAME, on_control, NULL);
    if (!status_handle) return;
    report(SERVICE_START_PENDING, NO_ERROR, START_WAIT_MS);
    /* A service has no console: its log goes to the Event Log and a file. */
    cw_diag_t d = {{0}};
    if (cw_plat_log_open("service", &d) != 0) cw_plat_log_open("stderr", &d);
    run_result = hooks->run(hooks->ctx, on_running, NULL);
    if (run_result != 0) CW_LOGE("the service stopped with an error (code %d)", run_result);
    cw_plat_log_close();
    report(SERVICE_STOPPED, run_result ? ERROR_SERVICE_SPECIFIC_ERROR : NO_ERROR, 0);
}

int cw_plat_service_dispatch(const cw_plat_service_hooks_t *h, int *run_rc)
{
    static wchar_t name[] = SVC_NAME;
    SERVICE_TABLE_ENTRYW table[] = {{name, service_main}, {NULL, NULL}};
    hooks = h;
    if (!StartServiceCtrlDispatcherW(table)) {
        /* A console (or a process the SCM did not start): run in front. */
        if (GetLastError() == ERROR_FAILED_SERVICE_CONTROLLER_CONNECT) return CW_ENOSYS;
        return CW_EIO;
    }
    *run_rc = run_result;
    return 0;
}

/* ---- install, uninstall, start, stop ----------------------------------------- */

const char *cw_plat_service_usage(void)
{
    return "usage: commitwatch install | uninstall | start | stop\n\n"
           "install    registers the Windows service \"commitwatch\" (automatic start, "
           "LocalSystem,\n"
           "           restarted after a failure) and its Event Log source, and writes\n"
           "           %ProgramData%\\commitwatch\\commitwatch.conf when missing\n"
           "uninstall  stops and removes the service and its event source (the database and\n"
           "           the configuration in %ProgramData%\\commitwatch stay)\n"
           "start, stop  start or stop the installed service\n\n"
           "Run them from an elevated (administrator) prompt.\n";
}

/* One sentence for a failed SCM call, with the fix where there is one. */
static int fail(const char *cmd, const char *what, DWORD err)
{
    const char *fix = "";
    switch (err) {
    case ERROR_ACCESS_DENIED:
        fix = ": access denied; run it from an elevated prompt (Run as administrator)";
        break;
    case ERROR_SERVICE_EXISTS:
        fix = ": the service is already installed; `commitwatch uninstall` first to reinstall it, "
              "or `commitwatch start` it";
        break;
    case ERROR_SERVICE_DOES_NOT_EXIST:
        fix = ": the service is not installed; run `commitwatch install`";
        break;
    case ERROR_SERVICE_ALREADY_RUNNING:
        fix = ": it is already running";
        break;
    case ERROR_SERVICE_NOT_ACTIVE:
        fix = ": it is not running";
        break;
    case ERROR_SERVICE_MARKED_FOR_DELETE:
        fix = ": the service is marked for deletion; close the Services console and try again";
        break;
    default:
        break;
    }
    fprintf(stderr, "commitwatch %s: %s failed (error %lu)%s\n", cmd, what, (unsigned long)err,
            fix);
    return 1;
}

static SC_HANDLE open_scm(const char *cmd, DWORD access)
{
    SC_HANDLE scm = OpenSCManagerW(NULL, NULL, access);
    if (!scm) fail(cmd, "opening the Service Control Manager", GetLastError());
    return scm;
}

/* Creates dir and its parents; true when it exists afterwards. */
static bool make_dirs(const char *dir)
{
    char tmp[CW_PATH_MAX];
    cw_strlcpy(tmp, dir, sizeof tmp);
    for (char *p = tmp + 3; *p; p++) {
        if (*p != '\\' && *p != '/') continue;
        char c = *p;
        *p = '\0';
        wchar_t *w = cw_win_wide(tmp);
        if (w) CreateDirectoryW(w, NULL);
        free(w);
        *p = c;
    }
    wchar_t *w = cw_win_wide(tmp);
    if (w) CreateDirectoryW(w, NULL);
    free(w);
    return cw_plat_is_dir(dir);
}

/* Creates the data folder when missing and sets its ACL: only
 * Administrators, SYSTEM and the service write there (the configuration
 * and the database are in it). */
static int make_state_dir(void)
{
    cw_diag_t d = {{0}};
    if (!make_dirs(cw_plat_state_dir())) {
        fprintf(stderr, "commitwatch install: cannot create %s (run from an elevated prompt)\n",
                cw_plat_state_dir());
        return 1;
    }
    if (cw_win__secure_dir(cw_plat_state_dir(), &d) != 0) {
        fprintf(stderr, "commitwatch install: %s\n", d.msg);
        return 1;
    }
    printf("secured %s: only Administrators, SYSTEM and the service may write in it\n",
           cw_plat_state_dir());
    return 0;
}

static int write_default_config(const cw_plat_service_opts_t *o)
{
    const char *conf = cw_plat_config_path();
    if (make_state_dir() != 0) return 1;
    if (cw_plat_is_file(conf)) {
        printf("kept %s\n", conf);
        return 0;
    }
    wchar_t *w = cw_win_wide(conf);
    FILE *f = w ? _wfopen(w, L"w") : NULL;
    free(w);
    if (!f || !o->write_config || o->write_config(f) != 0) {
        if (f) fclose(f);
        fprintf(stderr, "commitwatch install: cannot write %s\n", conf);
        return 1;
    }
    if (fclose(f) != 0) {
        fprintf(stderr, "commitwatch install: writing %s failed\n", conf);
        return 1;
    }
    printf("wrote %s (default configuration)\n", conf);
    return 0;
}

/* What CreateServiceW cannot set: the description, restart after a crash
 * (5 s, 30 s, then every minute; the count resets after a day without
 * failure) and the preshutdown timeout. */
static void configure(SC_HANDLE svc)
{
    SERVICE_DESCRIPTIONW desc = {(wchar_t *)SVC_DESCRIPTION};
    ChangeServiceConfig2W(svc, SERVICE_CONFIG_DESCRIPTION, &desc);
    SC_ACTION actions[3] = {
        {SC_ACTION_RESTART, 5000}, {SC_ACTION_RESTART, 30000}, {SC_ACTION_RESTART, 60000}};
    SERVICE_FAILURE_ACTIONSW fa = {86400, NULL, NULL, 3, actions};
    ChangeServiceConfig2W(svc, SERVICE_CONFIG_FAILURE_ACTIONS, &fa);
    SERVICE_PRESHUTDOWN_INFO pre = {STOP_WAIT_MS};
    ChangeServiceConfig2W(svc, SERVICE_CONFIG_PRESHUTDOWN_INFO, &pre);
}

/* The end of both installs: configures svc, the service just opened or
 * created (NULL: that failed, GetLastError() says why), and closes it and
 * scm. 0, or fail()'s 1 naming cmd and what failed. */
static int configure_and_close(SC_HANDLE scm, SC_HANDLE svc, const char *cmd, const char *what)
{
    if (!svc) {
        DWORD err = GetLastError();
        CloseServiceHandle(scm);
        return fail(cmd, what, err);
    }
    configure(svc);
    CloseServiceHandle(svc);
    CloseServiceHandle(scm);
    return 0;
}

/* `install --msi`: the MSI has registered the service (ServiceInstall) and
 * the event source; this finishes what it cannot do. */
static int finish_msi(const cw_plat_service_opts_t *o)
{
    SC_HANDLE scm = open_scm("install --msi", SC_MANAGER_CONNECT);
    if (!scm) return 1;
    SC_HANDLE svc = OpenServiceW(scm, SVC_NAME, SERVICE_CHANGE_CONFIG);
    if (configure_and_close(scm, svc, "install --msi", "opening the service") != 0) return 1;
    return write_default_config(o);
}

static int install(const cw_plat_service_opts_t *o)
{
    if (o->msi) return finish_msi(o);
    wchar_t exe[CW_PATH_MAX], cmdline[3 * CW_PATH_MAX];
    DWORD n = GetModuleFileNameW(NULL, exe, CW_PATH_MAX);
    if (!n || n >= CW_PATH_MAX) return fail("install", "finding commitwatch.exe", GetLastError());
    wchar_t *conf = cw_win_wide(cw_plat_config_path()), *state = cw_win_wide(cw_plat_state_dir());
    if (!conf || !state) {
        free(conf);
        free(state);
        return fail("install", "converting paths", ERROR_NOT_ENOUGH_MEMORY);
    }
    _snwprintf(cmdline, CW_ARRAY_LEN(cmdline),
               L"\"%ls\" run --config \"%ls\" --db \"%ls\\commitwatch.db\"", exe, conf, state);
    cmdline[CW_ARRAY_LEN(cmdline) - 1] = 0;
    free(conf);
    free(state);
    if (o->print_unit) {
        char *u = cw_win_utf8(cmdline);
        printf("service: commitwatch (automatic start, LocalSystem)\ncommand line: %s\n",
               u ? u : "?");
        free(u);
        return 0;
    }
    SC_HANDLE scm = open_scm("install", SC_MANAGER_CREATE_SERVICE);
    if (!scm) return 1;
    SC_HANDLE svc =
        CreateServiceW(scm, SVC_NAME, SVC_DISPLAY, SERVICE_ALL_ACCESS, SERVICE_WIN32_OWN_PROCESS,
                       SERVICE_AUTO_START, SERVICE_ERROR_NORMAL, cmdline, NULL, NULL, NULL,
                       NULL /* LocalSystem */, NULL);
    if (configure_and_close(scm, svc, "install", "creating the service") != 0) return 1;
    printf("installed the service commitwatch (automatic start, LocalSystem)\n");
    cw_diag_t d = {{0}};
    if (cw_win__eventlog_register(&d) != 0)
        fprintf(stderr, "commitwatch install: %s (the service logs to its file only)\n", d.msg);
    else
        printf("registered the Event Log source commitwatch\n");
    if (write_default_config(o) != 0) return 1;
    printf("database: %s\\commitwatch.db; start it with `commitwatch start`\n",
           cw_plat_state_dir());
    return 0;
}

/* Polls until the service reaches `state` or timeout_ms passes. */
static bool wait_state(SC_HANDLE svc, DWORD state, DWORD timeout_ms)
{
    SERVICE_STATUS st;
    for (DWORD waited = 0; waited <= timeout_ms; waited += 100) {
        if (!QueryServiceStatus(svc, &st)) return false;
        if (st.dwCurrentState == state) return true;
        Sleep(100);
    }
    return false;
}

static int control(const char *cmd)
{
    bool start = strcmp(cmd, "start") == 0, remove = strcmp(cmd, "uninstall") == 0;
    SC_HANDLE scm = open_scm(cmd, SC_MANAGER_CONNECT);
    if (!scm) return 1;
    SC_HANDLE svc =
        OpenServiceW(scm, SVC_NAME, SERVICE_START | SERVICE_STOP | SERVICE_QUERY_STATUS | DELETE);
    if (!svc) {
        DWORD err = GetLastError();
        CloseServiceHandle(scm);
        return fail(cmd, "opening the service", err);
    }
    int rc = 0;
    if (start) {
        if (!StartServiceW(svc, 0, NULL))
            rc = fail(cmd, "starting the service", GetLastError());
        else if (!wait_state(svc, SERVICE_RUNNING, START_WAIT_MS))
            rc = fail(cmd, "waiting for the service to run (see the Event Log or commitwatch.log)",
                      ERROR_SERVICE_REQUEST_TIMEOUT);
        else
            printf("started commitwatch\n");
    } else {
        SERVICE_STATUS st;
        if (ControlService(svc, SERVICE_CONTROL_STOP, &st)) {
            if (!wait_state(svc, SERVICE_STOPPED, STOP_WAIT_MS))
                rc = fail(cmd, "waiting for the service to stop", ERROR_SERVICE_REQUEST_TIMEOUT);
            else
                printf("stopped commitwatch\n");
        } else if (GetLastError() != ERROR_SERVICE_NOT_ACTIVE || !remove) {
            rc = fail(cmd, "stopping the service", GetLastError());
        }
        if (remove && rc == 0) {
            if (!DeleteService(svc)) {
                rc = fail(cmd, "removing the service", GetLastError());
            } else {
                cw_win__eventlog_unregister();
                printf("removed the service commitwatch (kept %s)\n", cw_plat_state_dir());
            }
        }
    }
    CloseServiceHandle(svc);
    CloseServiceHandle(scm);
    return rc;
}

int cw_plat_service(const char *cmd, const cw_plat_service_opts_t *o)
{
    if (strcmp(cmd, "install") == 0) return install(o);
    if (strcmp(cmd, "uninstall") == 0 || strcmp(cmd, "start") == 0 || strcmp(cmd, "stop") == 0)
        return control(cmd);
    fprintf(stderr, "commitwatch: unknown service command '%s'\n", cmd);
    return 2;
}
