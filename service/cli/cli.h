/* cli.h - the commands of the `commitwatch` binary, one file each
 * (service/cli/cmd_<name>.c). Each takes the arguments after its name
 * (argv[0] is the command name) and returns the process exit code:
 * 0 success, 1 failure (message printed), 2 usage error. */
#ifndef CW_CLI_H
#define CW_CLI_H

int cw_cmd_run(int argc, char **argv);
int cw_cmd_analyze(int argc, char **argv);
int cw_cmd_record(int argc, char **argv);
int cw_cmd_tags(int argc, char **argv);
/* Service management: install, uninstall, start, stop (argv[0] says which). */
int cw_cmd_service(int argc, char **argv);

/* Shared helpers (cli_util.c). */
#include <stddef.h>

#include "commitwatch/error.h"
#include "commitwatch/tagger.h"

/* Stack-tag rule files named with --stacktags or in the config. */
typedef struct cw_cli_rules {
    char **files;
    size_t n;
} cw_cli_rules_t;
int cw_cli_rules_add(cw_cli_rules_t *r, const char *file); /* 0 or -1 (message printed) */
void cw_cli_rules_free(cw_cli_rules_t *r);
/* Looks up --source SPEC ("perf", "etw", "replay:PATH"): the source's ops
 * and, in *arg, what follows the colon ("" when none). NULL (and a message
 * naming what this build has, printed as `commitwatch CMD: ...`) when the
 * source is unknown. */
struct cw_source_ops;
/* This platform's live source ("perf", "etw"), or NULL where there is none. */
const char *cw_cli_live_source(void);
const struct cw_source_ops *cw_cli_find_source(const char *cmd, const char *spec, const char **arg);

/* Routes SIGINT and SIGTERM (and SIGHUP when hup) to handler, which must
 * only set flags and call a source's stop(). */
void cw_cli_catch_signals(void (*handler)(int), int hup);

/* The tagger for data of `platform` ("windows", "linux"): the rule files
 * given, else the platform's default rules. 0 or CW_E* with d filled. */
int cw_cli_make_tagger(const char *platform, const cw_cli_rules_t *rules, cw_tagger_t **out,
                       cw_diag_t *d);

/* Parses a nonnegative or negative decimal int64; 0 or -1. */
int cw_cli_parse_i64(const char *s, long long *out);
/* True when argv has -h or --help. */
int cw_cli_wants_help(int argc, char **argv);

#endif
