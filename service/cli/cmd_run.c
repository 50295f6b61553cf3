/* cmd_run.c - placeholder: this command lands with its issue. */
#include <stdio.h>

#include "cli/cli.h"

int cw_cmd_run(int argc, char **argv)
{
    (void)argc;
    fprintf(stderr, "commitwatch: '%s' is not built yet\n", argv[0]);
    return 1;
}
