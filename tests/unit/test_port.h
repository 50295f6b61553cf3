/* test_port.h - what the unit tests need of the OS beyond standard C, the
 * same on Linux and on Windows (MinGW-w64, run under Wine): the temporary
 * folder, a fresh folder in it, a folder path made or removed with what is
 * in it, the process id, a scratch stream in place of fmemopen and
 * open_memstream (which Windows lacks). Tests include this rather than
 * <unistd.h> or shell out to mkdir/rm; the service itself goes through
 * platform.h, so the one #ifdef of the tests' OS differences is here.
 * Every helper returns 0 (or non-NULL) on success. */
#ifndef CW_TEST_PORT_H
#define CW_TEST_PORT_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "commitwatch/platform.h"

#ifdef _WIN32
#include <direct.h>
#include <io.h>
#include <process.h>
#ifndef WIN32_LEAN_AND_MEAN
#define WIN32_LEAN_AND_MEAN
#endif
#include <windows.h>
#else
#include <sys/stat.h>
#include <unistd.h>
#endif

/* $TMPDIR, else (Windows) %TEMP%, else /tmp. Static or the environment's. */
static inline const char *cw_test_tmpdir(void)
{
    const char *t = getenv("TMPDIR");
#ifdef _WIN32
    if (!t || !*t) t = getenv("TEMP");
#endif
    return t && *t ? t : "/tmp";
}

static inline int cw_test_getpid(void)
{
#ifdef _WIN32
    return _getpid();
#else
    return (int)getpid();
#endif
}

/* Sets the environment variable name to value (children inherit it). */
static inline int cw_test_setenv(const char *name, const char *value)
{
#ifdef _WIN32
    return _putenv_s(name, value);
#else
    return setenv(name, value, 1);
#endif
}

static inline int cw_test_mkdir(const char *path)
{
#ifdef _WIN32
    return _mkdir(path);
#else
    return mkdir(path, 0777);
#endif
}

/* mkdtemp: tmpl ends in XXXXXX, replaced in place; tmpl or NULL. */
static inline char *cw_test_mkdtemp(char *tmpl)
{
#ifdef _WIN32
    size_t n = strlen(tmpl);
    for (int tries = 0; tries < 100; tries++) {
        unsigned r = (unsigned)GetTickCount() * 2654435761u + (unsigned)_getpid() * 40503u +
                     (unsigned)tries * 97u;
        for (size_t i = n - 6; i < n; i++, r /= 36)
            tmpl[i] = "abcdefghijklmnopqrstuvwxyz0123456789"[r % 36];
        if (_mkdir(tmpl) == 0) return tmpl;
    }
    return NULL;
#else
    return mkdtemp(tmpl);
#endif
}

/* mkdir -p: every missing folder of path. */
static inline int cw_test_mkdir_p(const char *path)
{
    char p[4096];
    size_t n = strlen(path);
    if (n == 0 || n >= sizeof p) return -1;
    memcpy(p, path, n + 1);
    for (size_t i = 1; i <= n; i++) {
        if (p[i] != '/' && p[i] != '\\' && p[i] != '\0') continue;
        if (p[i - 1] == ':' || p[i - 1] == '/' || p[i - 1] == '\\') continue; /* C:\ or // */
        char c = p[i];
        p[i] = '\0';
        cw_test_mkdir(p); /* may exist: checked at the end */
        p[i] = c;
    }
#ifdef _WIN32
    DWORD a = GetFileAttributesA(path);
    return a != INVALID_FILE_ATTRIBUTES && (a & FILE_ATTRIBUTE_DIRECTORY) ? 0 : -1;
#else
    struct stat st;
    return stat(path, &st) == 0 && S_ISDIR(st.st_mode) ? 0 : -1;
#endif
}

#ifdef _WIN32
/* The UTF-16 half of cw_test_rmtree: names need not fit the ANSI code page. */
static inline int cw_test_rmtree_w(const wchar_t *path)
{
    DWORD a = GetFileAttributesW(path);
    if (a == INVALID_FILE_ATTRIBUTES) return 0;
    if (!(a & FILE_ATTRIBUTE_DIRECTORY)) return DeleteFileW(path) ? 0 : -1;
    size_t n = wcslen(path);
    wchar_t *sub = malloc((n + MAX_PATH + 2) * sizeof *sub);
    if (!sub) return -1;
    swprintf(sub, n + 3, L"%ls\\*", path);
    WIN32_FIND_DATAW fd;
    HANDLE h = FindFirstFileW(sub, &fd);
    int rc = 0;
    if (h != INVALID_HANDLE_VALUE) {
        do {
            if (wcscmp(fd.cFileName, L".") == 0 || wcscmp(fd.cFileName, L"..") == 0) continue;
            swprintf(sub, n + MAX_PATH + 2, L"%ls\\%ls", path, fd.cFileName);
            if (cw_test_rmtree_w(sub) != 0) rc = -1;
        } while (FindNextFileW(h, &fd));
        FindClose(h);
    }
    free(sub);
    return RemoveDirectoryW(path) ? rc : -1;
}
#endif

/* rm -rf: path (UTF-8) and everything under it; a missing path is success. */
static inline int cw_test_rmtree(const char *path)
{
#ifdef _WIN32
    wchar_t w[4096];
    if (!MultiByteToWideChar(CP_UTF8, 0, path, -1, w, 4096)) return -1;
    return cw_test_rmtree_w(w);
#else
    char cmd[4200];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", path);
    return system(cmd) == 0 ? 0 : -1;
#endif
}

/* A scratch stream for output a test reads back (fmemopen, open_memstream):
 * a file in the temporary folder. cw_test_scratch_read() closes it, reads
 * at most cap - 1 bytes into buf (NUL-terminated) and removes the file. */
typedef struct cw_test_scratch {
    FILE *f;
    char path[1024];
} cw_test_scratch_t;

static inline FILE *cw_test_scratch_open(cw_test_scratch_t *s, const char *name)
{
    snprintf(s->path, sizeof s->path, "%s/cw_scratch_%d_%s", cw_test_tmpdir(), cw_test_getpid(),
             name);
    s->f = fopen(s->path, "w+b");
    return s->f;
}

static inline size_t cw_test_scratch_read(cw_test_scratch_t *s, char *buf, size_t cap)
{
    size_t n = 0;
    if (s->f) {
        rewind(s->f);
        n = fread(buf, 1, cap - 1, s->f);
        fclose(s->f);
        s->f = NULL;
    }
    buf[n] = '\0';
    remove(s->path);
    return n;
}

/* Writes a one-line configuration file, cw_test_private_PID.conf in the
 * temporary folder, into path[cap] (test_platform.c, test_platform_win.c).
 * 0, or -1 when it cannot be written. */
static inline int cw_test_conf_file(char *path, size_t cap)
{
    snprintf(path, cap, "%s/cw_test_private_%d.conf", cw_test_tmpdir(), cw_test_getpid());
    FILE *f = fopen(path, "w");
    if (!f) return -1;
    fputs("db = x\n", f);
    return fclose(f) == 0 ? 0 : -1;
}

/* cw_plat_file_private on the file at path, opened for reading: its
 * result, with *d cleared first (test_platform.c, test_platform_win.c);
 * -1 when the file cannot be opened. */
static inline int cw_test_file_private(const char *path, cw_diag_t *d)
{
    FILE *f = fopen(path, "r");
    if (!f) return -1;
    memset(d, 0, sizeof *d);
    int rc = cw_plat_file_private(f, path, "the test file", d);
    fclose(f);
    return rc;
}

#endif
