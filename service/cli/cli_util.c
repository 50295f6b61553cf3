/* cli_util.c - what the commands share: the option-table parser, source
 * lookup, the tagger for a data platform, the subcommand word, the exit
 * code of a failure and the service run in the foreground. */
#include <errno.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"
#include "commitwatch/platform.h"
#include "commitwatch/service.h"
#include "commitwatch/source.h"
#include "commitwatch/stacktags.h"

int cw_cli_wants_help(int argc, char **argv)
{
    for (int i = 1; i < argc; i++)
        if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0) return 1;
    return 0;
}

const char *cw_cli_subcommand(int argc, char **argv, void (*usage)(FILE *out), int *rc)
{
    if (argc < 2) {
        usage(stderr);
        *rc = 2;
        return NULL;
    }
    const char *w = argv[1];
    if (strcmp(w, "--help") == 0 || strcmp(w, "-h") == 0 || strcmp(w, "help") == 0) {
        usage(stdout);
        *rc = 0;
        return NULL;
    }
    return w;
}

int cw_cli_exit(const char *cmd, int rc, const cw_diag_t *d)
{
    if (rc == 0) return 0;
    fprintf(stderr, "commitwatch %s: %s\n", cmd, d->msg[0] ? d->msg : cw_strerror(rc));
    return rc == CW_EUSAGE ? 2 : 1;
}

int cw_cli_service_foreground(cw_service_args_t *a, cw_diag_t *d)
{
    cw_plat_catch_stop(cw_service_stop, cw_service_reload);
    int rc = cw_service_run(a, d);
    cw_plat_catch_stop(NULL, NULL);
    return rc;
}

int cw_cli_put_json(const char *cmd, char *json)
{
    if (!json) {
        fprintf(stderr, "commitwatch %s: out of memory\n", cmd);
        return 1;
    }
    puts(json);
    free(json);
    return 0;
}

/* Stores one value; 0, or 2 after printing why it is bad. argc bounds how
 * many values a list can get, so its array is sized once. */
static int set_opt(const char *cmd, const cw_cli_opt_t *o, const char *v, char *base, int argc)
{
    char *end;
    errno = 0;
    switch (o->type) {
    case CW_CLI_FLAG:
        *(bool *)(base + o->off) = true;
        return 0;
    case CW_CLI_STR:
        *(const char **)(base + o->off) = v;
        return 0;
    case CW_CLI_LIST: {
        const char ***list = (const char ***)(base + o->off);
        size_t *n = (size_t *)(base + o->aux);
        if (!*list && !(*list = malloc((size_t)argc * sizeof **list))) {
            fprintf(stderr, "commitwatch %s: out of memory\n", cmd);
            return 2;
        }
        (*list)[(*n)++] = v;
        return 0;
    }
    case CW_CLI_POSITIVE: {
        double x = strtod(v, &end);
        if (errno || end == v || *end || !(x > 0)) {
            fprintf(stderr, "commitwatch %s: %s takes a positive number, not '%s'\n", cmd, o->name,
                    v);
            return 2;
        }
        *(double *)(base + o->off) = x;
        return 0;
    }
    case CW_CLI_NS: {
        long long x = strtoll(v, &end, 10);
        if (errno || end == v || *end || x < 0 || x == INT64_MAX) {
            fprintf(stderr,
                    "commitwatch %s: %s takes nanoseconds since the Unix epoch (a whole number "
                    ">= 0), not '%s'\n",
                    cmd, o->name, v);
            return 2;
        }
        *(int64_t *)(base + o->off) = x;
        *(bool *)(base + o->aux) = true;
        return 0;
    }
    case CW_CLI_SECONDS: {
        long long x = strtoll(v, &end, 10);
        if (errno || end == v || *end || x <= 0) {
            fprintf(stderr, "commitwatch %s: %s wants a positive number of seconds, not '%s'\n",
                    cmd, o->name, v);
            return 2;
        }
        *(long long *)(base + o->off) = x;
        return 0;
    }
    }
    return 2;
}

int cw_cli_parse(const char *cmd, int argc, char **argv, const cw_cli_opt_t *table, void *out,
                 const char *usage)
{
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        const cw_cli_opt_t *o = table;
        while (o->name && strcmp(a, o->name) != 0 && !(o->alias && strcmp(a, o->alias) == 0))
            o++;
        if (!o->name) {
            fprintf(stderr, "commitwatch %s: unknown option '%s'\n\n%s", cmd, a, usage);
            return 2;
        }
        const char *v = NULL;
        if (o->type != CW_CLI_FLAG) {
            if (i + 1 >= argc) {
                fprintf(stderr, "commitwatch %s: %s needs a value\n", cmd, a);
                return 2;
            }
            v = argv[++i];
        }
        int rc = set_opt(cmd, o, v, out, argc);
        if (rc) return rc;
    }
    return 0;
}

int cw_cli_make_tagger(const char *platform, const char *const *files, size_t nfiles,
                       cw_tagger_t **out, cw_diag_t *d)
{
    return cw_stacktags_tagger_for(cw_stacktags_platform(platform), files, nfiles, out, d);
}

const cw_source_ops_t *cw_cli_find_source(const char *cmd, const char *spec, const char **arg)
{
    cw_diag_t d = {{0}};
    const cw_source_ops_t *ops = cw_source_lookup(spec, arg, &d);
    if (!ops) fprintf(stderr, "commitwatch %s: %s\n", cmd, d.msg);
    return ops;
}
