/* cmd_analyze.c - placeholder: this command lands with its issue. */
#include <stdio.h>

#include "cli/cli.h"

int cw_cmd_analyze(int argc, char **argv)
{
    (void)argc;
    fprintf(stderr, "commitwatch: '%s' is not built yet\n", argv[0]);
    return 1;
}
