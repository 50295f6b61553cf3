/* cmd_service.c - `commitwatch install | uninstall | start | stop`: parses
 * the options and hands the command to the platform's service control
 * (systemd on Linux, the Service Control Manager on Windows: platform.h). */
#include <stdio.h>
#include <string.h>

#include "cli/cli.h"
#include "commitwatch/config.h"
#include "commitwatch/platform.h"
#include "commitwatch/source.h"

/* The default configuration; where this build has no live source (the
 * Windows build until the ETW consumer lands) the service defaults to a
 * rundown snapshot, so an installed service has something to show. */
static int write_config(FILE *f)
{
    int rc = cw_config_write_default(f);
    if (rc == 0 && !cw_source_live() && cw_source_find("rundown"))
        fprintf(f, "\n# No live source is built for this platform yet (the ETW consumer comes\n"
                   "# next): the service takes a snapshot of every process's committed\n"
                   "# memory at start and serves it.\nsource = rundown\n");
    return rc == 0 && !ferror(f) ? 0 : CW_EIO;
}

int cw_cmd_service(int argc, char **argv)
{
    const char *cmd = argv[0];
    cw_plat_service_opts_t o = {.root = "", .write_config = write_config};
    if (cw_cli_wants_help(argc, argv)) {
        fputs(cw_plat_service_usage(), stdout);
        return 0;
    }
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--root") == 0 && i + 1 < argc) {
            o.root = argv[++i];
        } else if (strcmp(argv[i], "--print-unit") == 0 && strcmp(cmd, "install") == 0) {
            o.print_unit = true;
        } else if (strcmp(argv[i], "--msi") == 0 && strcmp(cmd, "install") == 0) {
            o.msi = true;
        } else if (strcmp(argv[i], "--print-config") == 0 && strcmp(cmd, "install") == 0) {
            /* The default configuration file (packaging writes it as is). */
            return write_config(stdout) == 0 && fflush(stdout) == 0 ? 0 : 1;
        } else {
            fprintf(stderr, "commitwatch %s: unexpected argument '%s'\n\n%s", cmd, argv[i],
                    cw_plat_service_usage());
            return 2;
        }
    }
    return cw_plat_service(cmd, &o);
}
