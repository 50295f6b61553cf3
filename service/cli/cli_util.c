/* cli_util.c - small helpers shared by the commands. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"

int cw_cli_parse_i64(const char *s, long long *out)
{
    char *end;
    errno = 0;
    long long v = strtoll(s, &end, 10);
    if (errno || end == s || *end) return -1;
    *out = v;
    return 0;
}

int cw_cli_wants_help(int argc, char **argv)
{
    for (int i = 1; i < argc; i++)
        if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0) return 1;
    return 0;
}
