/* fs.c - paths and the program's folders on Linux: realpath, file
 * kinds and sizes, where data, state and configuration live. */
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

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

/* Source-tree folder of each kind of data (a build run from the tree
 * finds its files without installing), then the installed one. */
size_t cw_plat_data_dirs(const char *kind, const char **out, size_t max)
{
    static const struct {
        const char *kind, *tree, *installed;
    } dirs[] = {
        {"web", CW_SOURCE_DATADIR "/web", CW_DATADIR "/web"},
        {"stacktags", CW_SOURCE_DATADIR "/service/stacks/rules", CW_DATADIR "/stacktags"},
    };
    size_t n = 0;
    for (size_t i = 0; i < CW_ARRAY_LEN(dirs); i++) {
        if (strcmp(dirs[i].kind, kind) != 0) continue;
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
