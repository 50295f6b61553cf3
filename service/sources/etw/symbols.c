/* symbols.c - DbgHelp names the live source's frames (issue 10 item 5):
 * the images the session announces are registered with a private DbgHelp
 * session, and a frame's name comes from it (exports always; PDBs when a
 * symbol path is configured: `symbol_path` in the configuration, else
 * _NT_SYMBOL_PATH). It is the space's symbolizer (etl_internal.h): called
 * only when the frame cache misses, so once per (image name, offset).
 *
 * DbgHelp is not thread-safe: every call here is on the core thread (the
 * reader's). The private session's "process handle" is this object's
 * address (DbgHelp accepts any unique value when it does not invade a
 * process). Frames are named by image name, size and offset, not by
 * address in one process: each image (name and size: a WOW64 process has
 * two ntdll.dll) is loaded once, at an address of its own (4 GiB apart),
 * and an offset is looked up there.
 *
 * Exports always: when DbgHelp names nothing at an address, the image's
 * export table (pe.c, read once per image) names it by the nearest export
 * below. Windows' DbgHelp does that itself; Wine's names an export's own
 * address only. */
#include <windows.h>

#include <dbghelp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "commitwatch/log.h"
#include "commitwatch/platform_win.h"
#include "sources/etl/etl_internal.h"
#include "sources/etl/pe.h"
#include "sources/etw/etw_internal.h"

#define SLOT (1ull << 32) /* the address space given each image */
#define FIRST_BASE (1ull << 40)

typedef struct mod {
    char *name; /* the reader's name: lowercase base name */
    uint64_t size; /* the image's size: two files of one name differ in it */
    uint64_t base;
    bool ok;          /* DbgHelp loaded it */
    cw_etl__pe_t pe;  /* its exports (empty when unreadable) */
} mod_t;

struct cw_etw_syms {
    HANDLE h;
    bool pdbs; /* a symbol path was given */
    mod_t *mods;
    size_t n, cap;
    uint64_t named;
    wchar_t drives[26][MAX_PATH]; /* "\Device\HarddiskVolume3" of C: ... */
};

int cw_etw__syms_open(const char *symbol_path, cw_etw_syms_t **out, cw_diag_t *d)
{
    cw_etw_syms_t *s = calloc(1, sizeof *s);
    if (!s) return cw_diag_set(d, CW_ENOMEM, "out of memory");
    s->h = (HANDLE)s;
    const char *env = getenv("_NT_SYMBOL_PATH");
    const char *path = symbol_path && *symbol_path ? symbol_path : env && *env ? env : NULL;
    s->pdbs = path != NULL;
    wchar_t *wpath = path ? cw_win_wide(path) : NULL;
    SymSetOptions(SYMOPT_UNDNAME | SYMOPT_DEFERRED_LOADS | SYMOPT_FAIL_CRITICAL_ERRORS |
                  SYMOPT_NO_PROMPTS);
    /* No symbol path: an empty one, so exports name frames and no symbol
     * server is asked. */
    BOOL ok = SymInitializeW(s->h, wpath ? wpath : L"", FALSE);
    free(wpath);
    if (!ok) {
        DWORD err = GetLastError();
        free(s);
        return cw_diag_set(d, CW_EIO, "DbgHelp: SymInitialize failed (error %lu); frames stay "
                                      "module!+0xOFFSET", (unsigned long)err);
    }
    /* The NT names of the drives, to open the images the kernel names. */
    for (int i = 0; i < 26; i++) {
        wchar_t dev[3] = {(wchar_t)(L'A' + i), L':', 0};
        if (!QueryDosDeviceW(dev, s->drives[i], MAX_PATH)) s->drives[i][0] = 0;
    }
    CW_LOGI("DbgHelp: frames named from %s", path ? "PDBs (symbol path) and exports" : "exports");
    if (path) CW_LOGI("DbgHelp: symbol path %s", path);
    *out = s;
    return 0;
}

void cw_etw__syms_close(cw_etw_syms_t *s)
{
    if (!s) return;
    SymCleanup(s->h);
    for (size_t i = 0; i < s->n; i++) {
        free(s->mods[i].name);
        cw_etl__pe_free(&s->mods[i].pe);
    }
    free(s->mods);
    free(s);
}

/* The kernel's name of a file (\Device\HarddiskVolume3\..., \SystemRoot\...,
 * \??\C:\...) as a path Windows opens; malloc'd, or NULL. */
static wchar_t *dos_path(const cw_etw_syms_t *s, const wchar_t *nt)
{
    wchar_t buf[MAX_PATH * 2];
    if (wcsncmp(nt, L"\\??\\", 4) == 0) {
        nt += 4;
    } else if (_wcsnicmp(nt, L"\\SystemRoot\\", 12) == 0) {
        wchar_t root[MAX_PATH];
        UINT n = GetWindowsDirectoryW(root, MAX_PATH);
        if (!n || n >= MAX_PATH) return NULL;
        if (_snwprintf(buf, sizeof buf / sizeof buf[0], L"%ls%ls", root, nt + 11) < 0) return NULL;
        buf[sizeof buf / sizeof buf[0] - 1] = 0;
        return _wcsdup(buf);
    } else {
        for (int i = 0; i < 26; i++) {
            size_t k = wcslen(s->drives[i]);
            if (!k || _wcsnicmp(nt, s->drives[i], k) != 0 || nt[k] != L'\\') continue;
            if (_snwprintf(buf, sizeof buf / sizeof buf[0], L"%lc:%ls", (wchar_t)(L'A' + i),
                           nt + k) < 0)
                return NULL;
            buf[sizeof buf / sizeof buf[0] - 1] = 0;
            return _wcsdup(buf);
        }
    }
    return _wcsdup(nt);
}

int cw_etw__syms_add(cw_etw_syms_t *s, const char *name, const wchar_t *nt_path, uint64_t size)
{
    for (size_t i = 0; i < s->n; i++)
        if (s->mods[i].size == size && strcmp(s->mods[i].name, name) == 0)
            return s->mods[i].ok ? 0 : CW_ENOENT;
    if (CW_RESERVE(s->mods, s->cap, s->n + 1) != 0) return CW_ENOMEM;
    mod_t *m = &s->mods[s->n];
    if (!(m->name = _strdup(name))) return CW_ENOMEM;
    m->size = size;
    m->base = FIRST_BASE + SLOT * s->n;
    m->ok = false;
    memset(&m->pe, 0, sizeof m->pe);
    s->n++;
    wchar_t *path = dos_path(s, nt_path);
    if (!path) return CW_ENOMEM;
    DWORD dsize = size > 0xFFFFFFFFu ? 0xFFFFFFFFu : (DWORD)size;
    DWORD64 got = SymLoadModuleExW(s->h, NULL, path, NULL, m->base, dsize, NULL, 0);
    if (!got && GetLastError() == ERROR_SUCCESS) got = m->base; /* already loaded */
    if (!got) {
        CW_LOGD("DbgHelp: %ls could not be loaded (error %lu): its frames stay %s!+0xOFFSET",
                path, (unsigned long)GetLastError(), name);
        free(path);
        return CW_ENOENT;
    }
    char *u8 = cw_win_utf8(path);
    if (u8 && cw_etl__pe_read(u8, &m->pe) != 0) memset(&m->pe, 0, sizeof m->pe);
    free(u8);
    free(path);
    m->ok = true;
    return 0;
}

size_t cw_etw__syms_name(void *ctx, const cw_etl__module_t *em, uint64_t off, char *buf,
                         size_t cap)
{
    cw_etw_syms_t *s = ctx;
    const mod_t *m = NULL;
    for (size_t i = 0; i < s->n && !m; i++)
        if (s->mods[i].ok && s->mods[i].size == em->size && strcmp(s->mods[i].name, em->name) == 0)
            m = &s->mods[i];
    if (!m || off >= SLOT) return 0;
    union {
        SYMBOL_INFOW info;
        uint8_t bytes[sizeof(SYMBOL_INFOW) + 1024 * sizeof(wchar_t)];
    } u;
    memset(&u.info, 0, sizeof u.info);
    u.info.SizeOfStruct = sizeof u.info;
    u.info.MaxNameLen = 1024;
    DWORD64 disp = 0;
    int n;
    if (SymFromAddrW(s->h, m->base + off, &disp, &u.info) && u.info.Name[0]) {
        char *name = cw_win_utf8(u.info.Name);
        if (!name) return 0;
        n = disp ? snprintf(buf, cap, "%s+0x%llx", name, (unsigned long long)disp)
                 : snprintf(buf, cap, "%s", name);
        free(name);
    } else {
        uint64_t past;
        const char *name = cw_etl__pe_lookup(&m->pe, off, &past);
        if (!name) return 0;
        n = past ? snprintf(buf, cap, "%s+0x%llx", name, (unsigned long long)past)
                 : snprintf(buf, cap, "%s", name);
    }
    if (n <= 0) return 0;
    s->named++;
    return (size_t)n < cap ? (size_t)n : cap - 1;
}

uint64_t cw_etw__syms_named(const cw_etw_syms_t *s)
{
    return s->named;
}
