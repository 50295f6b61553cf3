/* cmd_serve.c - `commitwatch serve --db FILE`: serves a database with no
 * source, read-only (the dashboard, the API, /metrics, backtests,
 * exports), whatever the platform of its data: one copied from another
 * machine, the way an analyst opens an .etl in WPA. The service's own
 * path without a source (service.h, cw_service_args_t.serve). */
#include <stdio.h>

#include "cli/cli.h"
#include "commitwatch/service.h"

static const char usage_text[] =
    "usage: commitwatch serve --db FILE [--config FILE] [--listen ADDR:PORT]\n\n"
    "Serves a database read-only with no source: the dashboard, the API, /metrics,\n"
    "backtests and exports of what it holds, of either platform (e.g. a copy from\n"
    "another machine). Nothing writes to FILE.\n\n"
    "  --db FILE          the SQLite database to serve (required)\n"
    "  --config FILE      configuration file (`key = value` lines: listen, web_root,\n"
    "                     http_* keys; the source and store keys are not used)\n"
    "  --listen ADDR:PORT serve there (default 127.0.0.1:8470)\n\n"
    "Only GET requests are served (no silences, no reload). SIGINT/SIGTERM stop it.\n";

/* Only the options run shares with serve (cli.h). */
static const cw_cli_opt_t opts[] = {
    CW_CLI_SERVE_OPTS,
    {NULL, CW_CLI_FLAG, 0, 0, NULL},
};

int cw_cmd_serve(int argc, char **argv)
{
    cw_service_args_t a = {0};
    cw_diag_t d = {{0}};
    if (cw_cli_wants_help(argc, argv)) {
        fputs(usage_text, stdout);
        return 0;
    }
    int rc = cw_cli_parse("serve", argc, argv, opts, &a, usage_text);
    if (rc != 0) return rc;
    if (!a.db) {
        fprintf(stderr, "commitwatch serve: --db FILE is required\n\n%s", usage_text);
        return 2;
    }
    a.serve = true;
    return cw_cli_exit("serve", cw_cli_service_foreground(&a, &d), &d);
}
