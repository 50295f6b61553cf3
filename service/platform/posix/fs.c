/* fs.c - paths and the program's folders on Linux: realpath, file
 * kinds and sizes, where data, state and configuration live. */
#include <dirent.h>
#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "commitwatch/platform.h"

char *cw_plat_realpath(const char *path)
{
    return path ? realpath(path, NULL) : NULL;
}

bool cw_plat_is_sep(char c)
{
    return c == '/';
}

int cw_plat_file_size(const char *path, uint64_t *out)
{
    struct stat st;
    if (stat(path, &st) != 0 || !S_ISREG(st.st_mode)) return CW_ENOENT;
    *out = (uint64_t)st.st_size;
    return 0;
}

bool cw_plat_is_file(const char *path)
{
    struct stat st;
    return stat(path, &st) == 0 && S_ISREG(st.st_mode);
}

bool cw_plat_is_dir(const char *path)
{
    struct stat st;
    return stat(path, &st) == 0 && S_ISDIR(st.st_mode);
}

int cw_plat_list_dir(const char *dir, int (*cb)(void *ctx, const char *name), void *ctx)
{
    DIR *d = opendir(dir);
    if (!d) return CW_ENOENT;
    int rc = 0;
    for (struct dirent *e; rc == 0 && (e = readdir(d)) != NULL;)
        if (strcmp(e->d_name, ".") != 0 && strcmp(e->d_name, "..") != 0) rc = cb(ctx, e->d_name);
    closedir(d);
    return rc;
}

/* BINDIR/../share/commitwatch/KIND for each kind, computed once. */
static char near_web[CW_PATH_MAX + 64], near_tags[CW_PATH_MAX + 64];
static pthread_once_t near_once = PTHREAD_ONCE_INIT;

static void near_init(void)
{
    char dir[CW_PATH_MAX];
    ssize_t n = readlink("/proc/self/exe", dir, sizeof dir - 1);
    dir[n > 0 ? n : 0] = '\0';
    char *slash = strrchr(dir, '/');
    if (slash)
        *slash = '\0';
    else
        cw_strlcpy(dir, ".", sizeof dir);
    /* BINDIR/.., resolved, so paths in messages read /usr/share/... */
    cw_strlcpy(dir + strlen(dir), "/..", sizeof dir - strlen(dir));
    char *up = realpath(dir, NULL);
    snprintf(near_web, sizeof near_web, "%s/share/commitwatch/web", up ? up : dir);
    snprintf(near_tags, sizeof near_tags, "%s/share/commitwatch/stacktags", up ? up : dir);
    free(up);
}

/* Where each kind of data is looked for: beside an installed binary
 * (BINDIR/../share/commitwatch/KIND, so a package or a copied prefix finds
 * its own files wherever it lands), the source tree (a build run from the
 * tree, uninstalled), then the configured install prefix. */
size_t cw_plat_data_dirs(const char *kind, const char **out, size_t max)
{
    static const struct {
        const char *kind, *near, *tree, *installed;
    } dirs[] = {
        {"web", near_web, CW_SOURCE_DATADIR "/web", CW_DATADIR "/web"},
        {"stacktags", near_tags, CW_SOURCE_DATADIR "/service/stacks/rules",
         CW_DATADIR "/stacktags"},
    };
    size_t n = 0;
    pthread_once(&near_once, near_init);
    for (size_t i = 0; i < CW_ARRAY_LEN(dirs); i++) {
        if (strcmp(dirs[i].kind, kind) != 0) continue;
        if (n < max && cw_plat_is_dir(dirs[i].near)) out[n++] = dirs[i].near;
        if (n < max) out[n++] = dirs[i].tree;
        if (n < max) out[n++] = dirs[i].installed;
    }
    return n;
}

const char *cw_plat_state_dir(void)
{
    return "/var/lib/commitwatch";
}

const char *cw_plat_config_path(void)
{
    return "/etc/commitwatch/commitwatch.conf";
}

void cw_plat_stdout_binary(void)
{
    /* POSIX streams are binary already. */
}

int cw_plat_file_private(FILE *f, const char *path, const char *what, cw_diag_t *d)
{
    struct stat st;
    if (fstat(fileno(f), &st) != 0)
        return cw_diag_set(d, CW_EIO, "%s: cannot read the owner and mode of %s: %s", path, what,
                           strerror(errno));
    unsigned mode = (unsigned)st.st_mode & 07777;
    if (st.st_mode & (S_IWGRP | S_IWOTH))
        return cw_diag_set(d, CW_EPERM,
                           "%s: refusing %s: it is writable by %s (mode %04o, owner uid %u, "
                           "group gid %u), who could make this program do what they want. "
                           "Fix: chmod go-w %s",
                           path, what, (st.st_mode & S_IWOTH) ? "every user" : "its group", mode,
                           (unsigned)st.st_uid, (unsigned)st.st_gid, path);
    uid_t me = geteuid();
    if (st.st_uid != 0 && st.st_uid != me)
        return cw_diag_set(d, CW_EPERM,
                           "%s: refusing %s: it belongs to uid %u (mode %04o), who may rewrite "
                           "it, and this program runs as uid %u. Fix: chown %s %s",
                           path, what, (unsigned)st.st_uid, mode, (unsigned)me,
                           me == 0 ? "root" : "$(id -un)", path);
    return 0;
}
