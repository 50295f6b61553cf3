/* main.c - the `commitwatch` binary: dispatch to one command per file. */
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#include "cli/cli.h"
#include "commitwatch/log.h"
#include "commitwatch/platform.h"
#include "commitwatch/source.h"

typedef struct command {
    const char *name;
    int (*fn)(int argc, char **argv);
    const char *summary;
} command_t;

static const command_t commands[] = {
    {"run", cw_cmd_run, "ingest events from a source into a database (the service)"},
    {"serve", cw_cmd_serve, "serve a database read-only with no source (any platform's)"},
    {"analyze", cw_cmd_analyze, "print the figures of a window, from a trace or a database"},
    {"record", cw_cmd_record, "write a trace (JSONL v1) from a live source"},
    {"heap", cw_cmd_heap, "run a program and report its heap allocations by stack (Linux)"},
    {"tags", cw_cmd_tags, "check stack-tag rule files, explain a stack's tag"},
    {"etl", cw_cmd_etl, "what a Windows event trace (.etl) holds: etl info FILE"},
    {"install", cw_cmd_service, "install and enable the system service"},
    {"uninstall", cw_cmd_service, "stop, disable and remove the system service"},
    {"start", cw_cmd_service, "start the installed service"},
    {"stop", cw_cmd_service, "stop the installed service"},
};

static void usage(FILE *out)
{
    fprintf(out, "usage: commitwatch COMMAND [OPTIONS]\n\n"
                 "Continuous, system-wide memory-commit monitoring.\n\ncommands:\n");
    for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++)
        fprintf(out, "  %-10s %s\n", commands[i].name, commands[i].summary);
    fprintf(out, "  %-10s %s\n\n", "version", "print the version");
    fprintf(out, "`commitwatch COMMAND --help` describes a command.\n");
}

int main(int argc, char **argv)
{
    /* Log lines go to stderr as they happen. The C library may buffer a
     * stderr that is not a terminal (msvcrt does when it is redirected to a
     * file or a pipe): a line would then show up only at exit, or never if
     * the process is killed. */
    setvbuf(stderr, NULL, _IONBF, 0);
    int rc;
    const char *cmd = cw_cli_subcommand(argc, argv, usage, &rc);
    if (!cmd) return rc;
    if (strcmp(cmd, "version") == 0 || strcmp(cmd, "--version") == 0) {
        printf("commitwatch %s\nsources: replay%s%s%s\n", CW_VERSION,
               cw_source_find("etl") ? ", etl" : "", cw_source_find("perf") ? ", perf" : "",
               cw_source_find("etw") ? ", etw" : "");
        return 0;
    }
    /* The service runs for months with dozens of threads: without glibc's
     * per-thread caches, which only an exec can turn off (platform.h).
     * Only a service that starts: not `run --help`. */
    if (strcmp(cmd, "run") == 0 && !cw_cli_wants_help(argc - 1, argv + 1) &&
        cw_plat_heap_thread_caches_off(argv))
        CW_LOGI("heap: glibc's per-thread caches are off (GLIBC_TUNABLES=glibc.malloc.tcache_count=0 "
                "at the exec; set another glibc.malloc.tcache tunable to keep them)");
    for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++)
        if (strcmp(cmd, commands[i].name) == 0) return commands[i].fn(argc - 1, argv + 1);
    fprintf(stderr, "commitwatch: unknown command '%s'\n", cmd);
    usage(stderr);
    return 2;
}
