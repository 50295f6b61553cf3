/* fs.c - paths and the program's folders on Windows. Paths are UTF-8 in
 * the program and UTF-16 for the OS. Data (web\, stacktags\) lives beside
 * commitwatch.exe (%ProgramFiles%\commitwatch\ once installed); state and
 * configuration in %ProgramData%\commitwatch\. */
#include "platform/win/win_internal.h"

#include <aclapi.h>
#include <io.h>
#include <knownfolders.h>
#include <sddl.h>
#include <shlobj.h>

#include <fcntl.h>
#include <io.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "commitwatch/platform.h"

wchar_t *cw_win_wide(const char *s)
{
    int n = MultiByteToWideChar(CP_UTF8, MB_ERR_INVALID_CHARS, s, -1, NULL, 0);
    if (n <= 0) return NULL;
    wchar_t *w = malloc((size_t)n * sizeof *w);
    if (w && MultiByteToWideChar(CP_UTF8, MB_ERR_INVALID_CHARS, s, -1, w, n) != n) {
        free(w);
        w = NULL;
    }
    return w;
}

char *cw_win_utf8(const wchar_t *w)
{
    int n = WideCharToMultiByte(CP_UTF8, 0, w, -1, NULL, 0, NULL, NULL);
    if (n <= 0) return NULL;
    char *s = malloc((size_t)n);
    if (s && WideCharToMultiByte(CP_UTF8, 0, w, -1, s, n, NULL, NULL) != n) {
        free(s);
        s = NULL;
    }
    return s;
}

static DWORD attributes(const char *path)
{
    wchar_t *w = path ? cw_win_wide(path) : NULL;
    DWORD a = w ? GetFileAttributesW(w) : INVALID_FILE_ATTRIBUTES;
    free(w);
    return a;
}

char *cw_plat_realpath(const char *path)
{
    wchar_t *w = path ? cw_win_wide(path) : NULL, *full = NULL;
    char *out = NULL;
    if (!w) return NULL;
    DWORD n = GetFullPathNameW(w, 0, NULL, NULL);
    if (n && (full = malloc(n * sizeof *full)) && GetFullPathNameW(w, n, full, NULL) < n &&
        GetFileAttributesW(full) != INVALID_FILE_ATTRIBUTES)
        out = cw_win_utf8(full);
    free(full);
    free(w);
    return out;
}

bool cw_plat_is_sep(char c)
{
    return c == '/' || c == '\\';
}

int cw_plat_file_size(const char *path, uint64_t *out)
{
    WIN32_FILE_ATTRIBUTE_DATA fa;
    wchar_t *w = path ? cw_win_wide(path) : NULL;
    BOOL ok = w && GetFileAttributesExW(w, GetFileExInfoStandard, &fa) &&
              !(fa.dwFileAttributes & FILE_ATTRIBUTE_DIRECTORY);
    free(w);
    if (!ok) return CW_ENOENT;
    *out = ((uint64_t)fa.nFileSizeHigh << 32) | fa.nFileSizeLow;
    return 0;
}

bool cw_plat_is_file(const char *path)
{
    DWORD a = attributes(path);
    return a != INVALID_FILE_ATTRIBUTES && !(a & FILE_ATTRIBUTE_DIRECTORY);
}

bool cw_plat_is_dir(const char *path)
{
    DWORD a = attributes(path);
    return a != INVALID_FILE_ATTRIBUTES && (a & FILE_ATTRIBUTE_DIRECTORY);
}

int cw_plat_list_dir(const char *dir, int (*cb)(void *ctx, const char *name), void *ctx)
{
    size_t n = strlen(dir);
    char *pattern = malloc(n + 3);
    if (!pattern) return CW_ENOMEM;
    memcpy(pattern, dir, n);
    const char *tail = n && cw_plat_is_sep(dir[n - 1]) ? "*" : "\\*";
    memcpy(pattern + n, tail, strlen(tail) + 1);
    wchar_t *w = cw_win_wide(pattern);
    free(pattern);
    WIN32_FIND_DATAW fd;
    HANDLE h = w ? FindFirstFileW(w, &fd) : INVALID_HANDLE_VALUE;
    free(w);
    if (h == INVALID_HANDLE_VALUE) return CW_ENOENT;
    int rc = 0;
    do {
        if (wcscmp(fd.cFileName, L".") == 0 || wcscmp(fd.cFileName, L"..") == 0) continue;
        char *name = cw_win_utf8(fd.cFileName);
        rc = name ? cb(ctx, name) : CW_ENOMEM;
        free(name);
    } while (rc == 0 && FindNextFileW(h, &fd));
    FindClose(h);
    return rc;
}

/* web\ and stacktags\ beside commitwatch.exe (UTF-8), computed once. */
static char web_dir[CW_PATH_MAX + 8], tags_dir[CW_PATH_MAX + 16];

static BOOL CALLBACK init_near(INIT_ONCE *once, void *param, void **ctx)
{
    (void)once;
    (void)param;
    (void)ctx;
    char dir[CW_PATH_MAX] = ".";
    wchar_t w[CW_PATH_MAX];
    DWORD n = GetModuleFileNameW(NULL, w, CW_PATH_MAX);
    char *u = n && n < CW_PATH_MAX ? cw_win_utf8(w) : NULL;
    if (u) {
        char *slash = strrchr(u, '\\');
        if (slash) *slash = '\0';
        cw_strlcpy(dir, u, sizeof dir);
    }
    free(u);
    snprintf(web_dir, sizeof web_dir, "%s\\web", dir);
    snprintf(tags_dir, sizeof tags_dir, "%s\\stacktags", dir);
    return TRUE;
}

/* Beside the .exe when the folder is there (an installed tree: the MSI
 * puts web\ and stacktags\ in %ProgramFiles%\commitwatch\), then the source
 * tree (a build run from the tree), then beside the .exe again so that a
 * "not found" message names where an installation would have it. */
size_t cw_plat_data_dirs(const char *kind, const char **out, size_t max)
{
    static const char tree_web[] = CW_SOURCE_DATADIR "/web";
    static const char tree_tags[] = CW_SOURCE_DATADIR "/service/stacks/rules";
    static INIT_ONCE once = INIT_ONCE_STATIC_INIT;
    const char *beside, *tree;
    size_t n = 0;
    if (strcmp(kind, "web") == 0) {
        beside = web_dir;
        tree = tree_web;
    } else if (strcmp(kind, "stacktags") == 0) {
        beside = tags_dir;
        tree = tree_tags;
    } else {
        return 0;
    }
    InitOnceExecuteOnce(&once, init_near, NULL, NULL);
    bool installed = cw_plat_is_dir(beside);
    if (n < max && installed) out[n++] = beside;
    if (n < max) out[n++] = tree;
    if (n < max && !installed) out[n++] = beside;
    return n;
}

/* The ProgramData known folder + \commitwatch, computed once. The known
 * folder, not the %ProgramData% variable: a service's environment need not
 * have it right (under Wine a LocalSystem service sees C:\users\Public). */
static char state_dir[CW_PATH_MAX], config_path[CW_PATH_MAX + 32];
static INIT_ONCE state_once = INIT_ONCE_STATIC_INIT;

static BOOL CALLBACK init_state(INIT_ONCE *once, void *param, void **ctx)
{
    (void)once;
    (void)param;
    (void)ctx;
    wchar_t *known = NULL;
    char *u = NULL;
    if (SHGetKnownFolderPath(&FOLDERID_ProgramData, 0, NULL, &known) == S_OK)
        u = cw_win_utf8(known);
    CoTaskMemFree(known);
    snprintf(state_dir, sizeof state_dir, "%s\\commitwatch", u ? u : "C:\\ProgramData");
    snprintf(config_path, sizeof config_path, "%s\\commitwatch.conf", state_dir);
    free(u);
    return TRUE;
}

const char *cw_plat_state_dir(void)
{
    InitOnceExecuteOnce(&state_once, init_state, NULL, NULL);
    return state_dir;
}

const char *cw_plat_config_path(void)
{
    InitOnceExecuteOnce(&state_once, init_state, NULL, NULL);
    return config_path;
}

void cw_plat_stdout_binary(void)
{
    fflush(stdout);
    _setmode(_fileno(stdout), _O_BINARY);
}

/* The SID of the user running the program (malloc'd), or NULL. */
static PSID self_sid(void)
{
    HANDLE tok;
    PSID out = NULL;
    if (!OpenProcessToken(GetCurrentProcess(), TOKEN_QUERY, &tok)) return NULL;
    DWORD n = 0;
    GetTokenInformation(tok, TokenUser, NULL, 0, &n);
    TOKEN_USER *u = n ? malloc(n) : NULL;
    if (u && GetTokenInformation(tok, TokenUser, u, n, &n)) {
        DWORD len = GetLengthSid(u->User.Sid);
        if ((out = malloc(len)) && !CopySid(len, out, u->User.Sid)) {
            free(out);
            out = NULL;
        }
    }
    free(u);
    CloseHandle(tok);
    return out;
}

/* May sid write the program's files: SYSTEM, Administrators,
 * TrustedInstaller, the service's SID (CW_WIN_SERVICE_SID), or me (the
 * user running the program)? */
static bool trusted_writer(PSID sid, PSID me)
{
    static const char *const known[] = {
        "S-1-5-18",
        "S-1-5-32-544",
        /* TrustedInstaller, then NT SERVICE\commitwatch */
        "S-1-5-80-956008885-3418522649-1831038044-1853292631-2271478464",
        CW_WIN_SERVICE_SID,
    };
    if (me && EqualSid(sid, me)) return true;
    char *str = NULL;
    if (!ConvertSidToStringSidA(sid, &str)) return false;
    bool ok = false;
    for (size_t i = 0; i < sizeof known / sizeof known[0]; i++)
        if (strcmp(str, known[i]) == 0) ok = true;
    LocalFree(str);
    return ok;
}

static void sid_text(PSID sid, char *out, size_t size)
{
    char *str = NULL;
    wchar_t name[128], dom[128];
    DWORD nn = 128, nd = 128;
    SID_NAME_USE use;
    if (!ConvertSidToStringSidA(sid, &str)) str = NULL;
    if (LookupAccountSidW(NULL, sid, name, &nn, dom, &nd, &use)) {
        char *u = cw_win_utf8(name), *dm = cw_win_utf8(dom);
        snprintf(out, size, "%s%s%s (%s)", dm && *dm ? dm : "", dm && *dm ? "\\" : "", u ? u : "?",
                 str ? str : "?");
        free(u);
        free(dm);
    } else {
        snprintf(out, size, "%s", str ? str : "an unknown SID");
    }
    if (str) LocalFree(str);
}

int cw_plat_file_private(FILE *f, const char *path, const char *what, cw_diag_t *d)
{
    HANDLE h = (HANDLE)_get_osfhandle(_fileno(f));
    PSID owner = NULL;
    PACL dacl = NULL;
    PSECURITY_DESCRIPTOR sd = NULL;
    DWORD e =
        GetSecurityInfo(h, SE_FILE_OBJECT, OWNER_SECURITY_INFORMATION | DACL_SECURITY_INFORMATION,
                        &owner, NULL, &dacl, NULL, &sd);
    if (e != ERROR_SUCCESS)
        return cw_diag_set(d, CW_EIO, "%s: cannot read the owner and ACL of %s (error %lu)", path,
                           what, (unsigned long)e);
    PSID me = self_sid();
    char who[256];
    int rc = 0;
    const DWORD writes =
        FILE_WRITE_DATA | FILE_APPEND_DATA | WRITE_DAC | WRITE_OWNER | GENERIC_WRITE | GENERIC_ALL;
    if (!dacl) {
        rc = cw_diag_set(d, CW_EPERM,
                         "%s: refusing %s: it has no ACL, so every user may write it. Fix: "
                         "icacls \"%s\" /reset, in a folder only administrators can write",
                         path, what, path);
    } else if (owner && !trusted_writer(owner, me)) {
        sid_text(owner, who, sizeof who);
        rc = cw_diag_set(d, CW_EPERM,
                         "%s: refusing %s: it belongs to %s, who may rewrite it. Fix: "
                         "icacls \"%s\" /setowner Administrators",
                         path, what, who, path);
    }
    for (DWORD i = 0; !rc && dacl && i < dacl->AceCount; i++) {
        ACE_HEADER *ace;
        if (!GetAce(dacl, i, (void **)&ace) || ace->AceType != ACCESS_ALLOWED_ACE_TYPE ||
            (ace->AceFlags & INHERIT_ONLY_ACE))
            continue;
        ACCESS_ALLOWED_ACE *a = (ACCESS_ALLOWED_ACE *)ace;
        PSID sid = (PSID)&a->SidStart;
        if (!(a->Mask & writes) || trusted_writer(sid, me)) continue;
        sid_text(sid, who, sizeof who);
        rc = cw_diag_set(d, CW_EPERM,
                         "%s: refusing %s: its ACL lets %s write it (access mask 0x%lx), who "
                         "could make this program do what they want. Fix: icacls \"%s\" "
                         "/inheritance:r /grant:r Administrators:F SYSTEM:F Users:R",
                         path, what, who, (unsigned long)a->Mask, path);
    }
    free(me);
    LocalFree(sd);
    return rc;
}

int cw_win__secure_dir(const char *dir, cw_diag_t *d)
{
    PSECURITY_DESCRIPTOR sd = NULL;
    PACL dacl = NULL;
    BOOL present = FALSE, defaulted = FALSE;
    if (!ConvertStringSecurityDescriptorToSecurityDescriptorA(CW_WIN_STATE_SDDL, SDDL_REVISION_1,
                                                              &sd, NULL) ||
        !GetSecurityDescriptorDacl(sd, &present, &dacl, &defaulted)) {
        DWORD e = GetLastError();
        if (sd) LocalFree(sd);
        return cw_diag_set(d, CW_EIO, "building the ACL of %s failed (error %lu)", dir,
                           (unsigned long)e);
    }
    wchar_t *w = cw_win_wide(dir);
    DWORD e = w ? SetNamedSecurityInfoW(w, SE_FILE_OBJECT,
                                        DACL_SECURITY_INFORMATION |
                                            PROTECTED_DACL_SECURITY_INFORMATION,
                                        NULL, NULL, dacl, NULL)
                : ERROR_INVALID_NAME;
    free(w);
    LocalFree(sd);
    if (e == ERROR_SUCCESS) return 0;
    return cw_diag_set(d, e == ERROR_ACCESS_DENIED ? CW_EPERM : CW_EIO,
                       "setting the ACL of %s (only Administrators, SYSTEM and the service "
                       "write) failed: error %lu%s",
                       dir, (unsigned long)e,
                       e == ERROR_ACCESS_DENIED ? " (run from an elevated prompt)" : "");
}
