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
/* Parses a nonnegative or negative decimal int64; 0 or -1. */
int cw_cli_parse_i64(const char *s, long long *out);
/* True when argv has -h or --help. */
int cw_cli_wants_help(int argc, char **argv);

#endif
