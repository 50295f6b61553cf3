/* cli_util.c - small helpers shared by the commands. */
#include <errno.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>

#include <stdio.h>

#include "cli/cli.h"
#include "commitwatch/source.h"
#include "commitwatch/stacktags.h"

int cw_cli_parse_i64(const char *s, long long *out)
{
    char *end;
    errno = 0;
    long long v = strtoll(s, &end, 10);
    if (errno || end == s || *end) return -1;
    *out = v;
    return 0;
}

int cw_cli_wants_help(int argc, char **argv)
{
    for (int i = 1; i < argc; i++)
        if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0) return 1;
    return 0;
}

int cw_cli_rules_add(cw_cli_rules_t *r, const char *file)
{
    char **nf = realloc(r->files, (r->n + 1) * sizeof *nf);
    if (!nf || !(nf[r->n] = strdup(file))) {
        if (nf) r->files = nf;
        fprintf(stderr, "commitwatch: out of memory\n");
        return -1;
    }
    r->files = nf;
    r->n++;
    return 0;
}

void cw_cli_rules_free(cw_cli_rules_t *r)
{
    for (size_t i = 0; i < r->n; i++) free(r->files[i]);
    free(r->files);
    r->files = NULL;
    r->n = 0;
}

int cw_cli_make_tagger(const char *platform, const cw_cli_rules_t *rules, cw_tagger_t **out,
                       cw_diag_t *d)
{
    /* Data of no known platform is tagged with this machine's defaults. */
    if (!platform || (strcmp(platform, "windows") != 0 && strcmp(platform, "linux") != 0)) {
#if defined(_WIN32)
        platform = "windows";
#else
        platform = "linux";
#endif
    }
    return cw_stacktags_tagger_for(platform, (const char *const *)rules->files, rules->n, out, d);
}

const char *cw_cli_live_source(void)
{
#if defined(__linux__)
    return "perf";
#elif defined(_WIN32)
    return "etw";
#else
    return NULL;
#endif
}

const cw_source_ops_t *cw_cli_find_source(const char *cmd, const char *spec, const char **arg)
{
    char name[32];
    const char *colon = spec ? strchr(spec, ':') : NULL;
    size_t nlen = colon ? (size_t)(colon - spec) : (spec ? strlen(spec) : 0);
    const cw_source_ops_t *ops = NULL;
    if (nlen < sizeof name) {
        memcpy(name, spec, nlen);
        name[nlen] = '\0';
        ops = cw_source_find(name);
    }
    if (!ops) {
        fprintf(stderr, "commitwatch %s: unknown source '%s' (this build has: replay:PATH%s%s)\n", cmd,
                spec ? spec : "", cw_source_find("perf") ? ", perf" : "",
                cw_source_find("etw") ? ", etw" : "");
        return NULL;
    }
    *arg = colon ? colon + 1 : "";
    return ops;
}

void cw_cli_catch_signals(void (*handler)(int), int hup)
{
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = handler;
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
    if (hup) sigaction(SIGHUP, &sa, NULL);
}
