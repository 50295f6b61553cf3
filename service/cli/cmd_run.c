/* cmd_run.c - `commitwatch run`: parses the command line into the
 * service's arguments and runs the service (service.h): as the system
 * service when the Windows Service Control Manager started the process
 * (its controls reach cw_service_stop() / cw_service_reload()), else in the
 * foreground, with the platform's stop and reload requests
 * (SIGINT/SIGTERM/SIGHUP; Ctrl+C on a Windows console) routed to it. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"
#include "commitwatch/log.h"
#include "commitwatch/platform.h"
#include "commitwatch/service.h"

static const char usage_text[] =
    "usage: commitwatch run [--source SOURCE] [--db FILE] [--config FILE]\n"
    "                       [--stacktags FILE]... [--rebase-now] [--speed X] [--images DIR]\n"
    "                       [--listen ADDR:PORT] [--token TOKEN] [--no-http] [--exit-at-end]\n\n"
    "Runs the service: ingests commit events from SOURCE into the database.\n\n"
    "  --source SOURCE    perf (Linux, default there), etw (Windows), replay:PATH, or\n"
    "                     etl:FILE (a Windows event trace, read on any OS)\n"
    "  --db FILE          the SQLite database (created if missing; default from the\n"
    "                     config, else commitwatch.db)\n"
    "  --config FILE      configuration file (`key = value` lines)\n"
    "  --stacktags FILE   stack-tag rules (repeatable; default: the platform's rules)\n"
    "  --rebase-now       replay only: shift the trace's times so it starts now\n"
    "  --speed X          replay only: pace events at X times real time (1 = live)\n"
    "  --images DIR       etl: only: copies of the trace's DLLs and EXEs, whose exports\n"
    "                     name the frames in them (config key images)\n"
    "  --listen ADDR:PORT serve the API, /metrics and the dashboard there\n"
    "                     (default 127.0.0.1:8470)\n"
    "  --token TOKEN      allow state-changing requests carrying this bearer token\n"
    "  --no-http          run without the HTTP server (a live source that fails\n"
    "                     then ends the run instead of degrading it)\n"
    "  --exit-at-end      replay: exit at the end of input instead of serving on\n\n"
    "SIGINT/SIGTERM flush the open bucket and exit. A replay keeps serving its\n"
    "data after its end until then (or exits at once with --exit-at-end or\n"
    "--no-http).\n"
    "SIGHUP reloads the configuration file and the stack-tag rules; stored stacks\n"
    "are re-tagged when the rules changed.\n";

/* Each command's options are its own table (data): analyze, record and heap
 * have rows alike to these; serve's are the ones it shares with run (cli.h). */
#define F(f) offsetof(cw_service_args_t, f)
static const cw_cli_opt_t opts[] = {
    {"--source", CW_CLI_STR, F(source), 0, NULL},
    CW_CLI_SERVE_OPTS,
    {"--token", CW_CLI_STR, F(token), 0, NULL},
    {"--stacktags", CW_CLI_LIST, F(stacktags), F(nstacktags), NULL},
    {"--speed", CW_CLI_POSITIVE, F(speed), 0, NULL},
    {"--rebase-now", CW_CLI_FLAG, F(rebase_now), 0, NULL},
    {"--images", CW_CLI_STR, F(images), 0, NULL},
    {"--no-http", CW_CLI_FLAG, F(no_http), 0, NULL},
    {"--exit-at-end", CW_CLI_FLAG, F(exit_at_end), 0, NULL},
    {NULL, CW_CLI_FLAG, 0, 0, NULL},
};
#undef F

typedef struct run_ctx {
    cw_service_args_t *args;
    cw_diag_t d;
} run_ctx_t;

/* The service's body, as the service manager calls it. A service has no
 * console: its error also goes to the log (the service's log file and the
 * Event Log). */
static int run_service(void *ctx, void (*running)(void *handle), void *handle)
{
    run_ctx_t *r = ctx;
    r->args->on_running = running;
    r->args->ctx = handle;
    int rc = cw_service_run(r->args, &r->d);
    if (rc != 0) CW_LOGE("run: %s", r->d.msg[0] ? r->d.msg : cw_strerror(rc));
    return rc;
}

int cw_cmd_run(int argc, char **argv)
{
    cw_service_args_t a = {0};
    run_ctx_t r = {&a, {{0}}};
    if (cw_cli_wants_help(argc, argv)) {
        fputs(usage_text, stdout);
        return 0;
    }
    int rc = cw_cli_parse("run", argc, argv, opts, &a, usage_text);
    if (rc == 0) {
        int src = 0;
        cw_plat_service_hooks_t hooks = {run_service, cw_service_stop, cw_service_reload, &r};
        /* Not a service: in the foreground, stopped by signals or Ctrl+C. */
        if (cw_plat_service_dispatch(&hooks, &src) == CW_ENOSYS)
            src = cw_cli_service_foreground(&a, &r.d);
        rc = cw_cli_exit("run", src, &r.d);
    }
    free((void *)a.stacktags);
    return rc;
}
