/* cli.h - the commands of the `commitwatch` binary, one file each
 * (service/cli/cmd_<name>.c). Each takes the arguments after its name
 * (argv[0] is the command name) and returns the process exit code:
 * 0 success, 1 failure (message printed), 2 usage error. */
#ifndef CW_CLI_H
#define CW_CLI_H

#include <stddef.h>
#include <stdio.h>

#include "commitwatch/error.h"
#include "commitwatch/source.h"
#include "commitwatch/tagger.h"

struct cw_service_args; /* commitwatch/service.h */

int cw_cmd_run(int argc, char **argv);
int cw_cmd_analyze(int argc, char **argv);
/* `serve --db FILE`: a database served read-only with no source (cmd_serve.c). */
int cw_cmd_serve(int argc, char **argv);
int cw_cmd_record(int argc, char **argv);
/* `heap -- PROGRAM ARGS`: the heap drill-down in launch mode (cmd_heap.c). */
int cw_cmd_heap(int argc, char **argv);
int cw_cmd_tags(int argc, char **argv);
/* `etl info FILE`: what a Windows event trace holds (cmd_etl.c). */
int cw_cmd_etl(int argc, char **argv);
/* Service management: install, uninstall, start, stop (argv[0] says which). */
int cw_cmd_service(int argc, char **argv);

/* ---- shared helpers (cli_util.c) ---- */

/* One option of a command, as a row of a table: the value lands in the
 * command's options struct at `off`. */
typedef enum {
    CW_CLI_FLAG,     /* bool, no value */
    CW_CLI_STR,      /* const char * (borrowed from argv) */
    CW_CLI_LIST,     /* repeatable: const char ** (malloc'd; the caller frees it),
                      * its count a size_t at `aux` */
    CW_CLI_POSITIVE, /* double > 0 */
    CW_CLI_NS,       /* int64_t Unix nanoseconds, 0 <= v < INT64_MAX; bool "given" at `aux` */
    CW_CLI_SECONDS,  /* long long > 0 */
} cw_cli_type_t;

typedef struct cw_cli_opt {
    const char *name; /* "--db"; NULL ends the table */
    cw_cli_type_t type;
    size_t off;
    size_t aux;
    const char *alias; /* another spelling ("-v"), or NULL */
} cw_cli_opt_t;

/* Parses argv[1..] into out with the table. 0, or 2 after printing
 * `commitwatch CMD: ...` (unknown option, missing or bad value, with the
 * usage text for the unknown ones). */
int cw_cli_parse(const char *cmd, int argc, char **argv, const cw_cli_opt_t *table, void *out,
                 const char *usage);

/* Looks up --source SPEC ("perf", "etw", "replay:PATH"): the source's ops
 * and, in *arg, what follows the colon ("" when none). NULL (and a message
 * naming what this build has, printed as `commitwatch CMD: ...`) when the
 * source is unknown or spec is NULL. */
const cw_source_ops_t *cw_cli_find_source(const char *cmd, const char *spec, const char **arg);

/* The tagger for data of `platform` (cw_stacktags_platform() decides the
 * defaults for data of no known platform): the rule files given, else the
 * platform's default rules. 0 or CW_E* with d filled. */
int cw_cli_make_tagger(const char *platform, const char *const *files, size_t nfiles,
                       cw_tagger_t **out, cw_diag_t *d);

/* True when argv has -h or --help. */
int cw_cli_wants_help(int argc, char **argv);

/* The subcommand word of a command that takes one (main's COMMAND, tags'
 * check/explain): argv[1]. NULL when there is none (usage printed to
 * stderr, *rc 2) or it asks for help ("--help", "-h", "help": usage to
 * stdout, *rc 0). */
const char *cw_cli_subcommand(int argc, char **argv, void (*usage)(FILE *out), int *rc);

/* A command's exit code for rc: 0 for 0; else, having printed
 * `commitwatch CMD: why` (d's message, else rc's text), 2 for CW_EUSAGE
 * and 1 for any other failure. */
int cw_cli_exit(const char *cmd, int rc, const cw_diag_t *d);

/* `run` and `serve` in the foreground: cw_service_run(a, d) with the
 * platform's stop and reload requests (SIGINT/SIGTERM/SIGHUP, Ctrl+C on
 * a Windows console) routed to the service while it runs; its result. */
int cw_cli_service_foreground(struct cw_service_args *a, cw_diag_t *d);

/* The options `run` and `serve` share, rows of a cw_cli_opt_t table into
 * a cw_service_args_t (written once, so the two commands cannot differ on
 * them). Expands where commitwatch/service.h is included. */
#define CW_CLI_SERVE_OPTS                                                                          \
    {"--db", CW_CLI_STR, offsetof(struct cw_service_args, db), 0, NULL},                           \
    {"--config", CW_CLI_STR, offsetof(struct cw_service_args, config_path), 0, NULL},              \
    {"--listen", CW_CLI_STR, offsetof(struct cw_service_args, listen), 0, NULL}

/* Prints json, a document cw_*_json() made, as one line and frees it: 0.
 * NULL (it ran out of memory) prints `commitwatch CMD: out of memory`: 1. */
int cw_cli_put_json(const char *cmd, char *json);

#endif
