/* run.c - running a program with bytes on its standard input and a
 * timeout on Windows (platform.h, cw_plat_run: the alerts' exec hook).
 *
 * CreateProcessW with the program's path as lpApplicationName (no shell,
 * no search) and a command line of that path alone, quoted as
 * CommandLineToArgvW reads it; its stdin the read end of an anonymous
 * pipe, written from a helper thread so a program that does not read
 * cannot block us past the timeout; stdout and stderr inherited. The
 * process runs in a job object with KILL_ON_JOB_CLOSE: the timeout
 * terminates the job, what the program started included. */
#include "platform/win/win_internal.h"

#include <stdlib.h>
#include <string.h>
#include <wchar.h>

#include "commitwatch/platform.h"

typedef struct feed {
    HANDLE pipe;
    const void *in;
    size_t len;
} feed_t;

static DWORD WINAPI feed_main(LPVOID arg)
{
    feed_t *f = arg;
    size_t off = 0;
    while (off < f->len) {
        DWORD chunk = f->len - off > 65536 ? 65536 : (DWORD)(f->len - off), w = 0;
        if (!WriteFile(f->pipe, (const char *)f->in + off, chunk, &w, NULL)) break;
        off += w;
    }
    CloseHandle(f->pipe);
    return 0;
}

/* "path" quoted for CommandLineToArgvW: backslashes before a quote
 * doubled, the quotes escaped. malloc'd. */
static wchar_t *quote(const wchar_t *p)
{
    size_t n = wcslen(p);
    wchar_t *q = malloc((2 * n + 3) * sizeof *q), *o = q;
    if (!q) return NULL;
    *o++ = L'"';
    for (size_t i = 0; i < n; i++) {
        size_t bs = 0;
        while (i < n && p[i] == L'\\') {
            bs++;
            i++;
        }
        if (i == n) {
            for (size_t k = 0; k < 2 * bs; k++)
                *o++ = L'\\';
            break;
        }
        for (size_t k = 0; k < (p[i] == L'"' ? 2 * bs + 1 : bs); k++)
            *o++ = L'\\';
        *o++ = p[i];
    }
    *o++ = L'"';
    *o = 0;
    return q;
}

int cw_plat_run(const char *path, const void *in, size_t in_len, int64_t timeout_ns, int *exit_code,
                bool *timed_out, cw_diag_t *d)
{
    *exit_code = -1;
    *timed_out = false;
    int err = 0;
    wchar_t *wpath = cw_win_wide(path), *cmd = wpath ? quote(wpath) : NULL;
    HANDLE rd = NULL, wr = NULL, job = NULL, feeder = NULL;
    PROCESS_INFORMATION pi = {0};
    feed_t f;
    if (!cmd) {
        err = cw_diag_set(d, CW_ENOMEM, "out of memory");
        goto done;
    }
    SECURITY_ATTRIBUTES sa = {sizeof sa, NULL, TRUE};
    if (!CreatePipe(&rd, &wr, &sa, 0) || !SetHandleInformation(wr, HANDLE_FLAG_INHERIT, 0)) {
        err = cw_diag_set(d, CW_EIO, "cannot create the program's stdin (error %lu)",
                          (unsigned long)GetLastError());
        goto done;
    }
    job = CreateJobObjectW(NULL, NULL);
    JOBOBJECT_EXTENDED_LIMIT_INFORMATION li = {0};
    li.BasicLimitInformation.LimitFlags = JOB_OBJECT_LIMIT_KILL_ON_JOB_CLOSE;
    if (job) SetInformationJobObject(job, JobObjectExtendedLimitInformation, &li, sizeof li);
    STARTUPINFOW si = {0};
    si.cb = sizeof si;
    si.dwFlags = STARTF_USESTDHANDLES;
    si.hStdInput = rd;
    si.hStdOutput = GetStdHandle(STD_OUTPUT_HANDLE);
    si.hStdError = GetStdHandle(STD_ERROR_HANDLE);
    if (!CreateProcessW(wpath, cmd, NULL, NULL, TRUE, CREATE_SUSPENDED | CREATE_NO_WINDOW, NULL,
                        NULL, &si, &pi)) {
        DWORD e = GetLastError();
        err = cw_diag_set(d,
                          e == ERROR_FILE_NOT_FOUND || e == ERROR_PATH_NOT_FOUND ? CW_ENOENT
                          : e == ERROR_ACCESS_DENIED                             ? CW_EPERM
                                                                                 : CW_EIO,
                          "cannot run %s (error %lu)", path, (unsigned long)e);
        goto done;
    }
    if (job) AssignProcessToJobObject(job, pi.hProcess);
    ResumeThread(pi.hThread);
    CloseHandle(rd);
    rd = NULL;
    f.pipe = wr;
    f.in = in;
    f.len = in_len;
    feeder = CreateThread(NULL, 0, feed_main, &f, 0, NULL);
    if (feeder)
        wr = NULL; /* the feeder closes it */
    else {
        CloseHandle(wr);
        wr = NULL;
    }
    DWORD ms = timeout_ns > 0 ? (DWORD)(timeout_ns / 1000000 + 1) : INFINITE;
    if (WaitForSingleObject(pi.hProcess, ms) == WAIT_TIMEOUT) {
        if (job) TerminateJobObject(job, 1);
        TerminateProcess(pi.hProcess, 1);
        WaitForSingleObject(pi.hProcess, INFINITE);
        *timed_out = true;
    } else {
        DWORD code = 0;
        GetExitCodeProcess(pi.hProcess, &code);
        *exit_code = (int)code;
    }
    if (feeder) {
        /* The program is gone: its end of the pipe is closed and the
         * write fails, unless something it started holds the pipe without
         * reading: then the write is cancelled. */
        if (WaitForSingleObject(feeder, 1000) == WAIT_TIMEOUT) {
            CancelSynchronousIo(feeder);
            WaitForSingleObject(feeder, INFINITE);
        }
        CloseHandle(feeder);
    }
done:
    if (pi.hProcess) CloseHandle(pi.hProcess);
    if (pi.hThread) CloseHandle(pi.hThread);
    if (rd) CloseHandle(rd);
    if (wr) CloseHandle(wr);
    if (job) CloseHandle(job);
    free(cmd);
    free(wpath);
    return err;
}
