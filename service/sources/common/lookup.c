/* lookup.c - --source SPEC ("perf", "etw", "replay:PATH") to a source of
 * this build (the registry CMake generates), and the check of the options
 * that only one source takes. */
#include <string.h>

#include "commitwatch/source.h"

const cw_source_ops_t *cw_source_lookup(const char *spec, const char **arg, cw_diag_t *d)
{
    char name[32];
    const char *colon = spec ? strchr(spec, ':') : NULL;
    size_t nlen = colon ? (size_t)(colon - spec) : (spec ? strlen(spec) : 0);
    const cw_source_ops_t *ops = NULL;
    if (spec && nlen < sizeof name) {
        memcpy(name, spec, nlen);
        name[nlen] = '\0';
        ops = cw_source_find(name);
    }
    if (!ops) {
        cw_diag_set(d, CW_EUSAGE, "unknown source '%s' (this build has: replay:PATH%s%s%s)",
                    spec ? spec : "", cw_source_find("etl") ? ", etl:FILE" : "",
                    cw_source_find("perf") ? ", perf" : "",
                    cw_source_find("etw") ? ", etw" : "");
        return NULL;
    }
    *arg = colon ? colon + 1 : "";
    return ops;
}

int cw_source_check_opts(const cw_source_ops_t *ops, const cw_source_opts_t *o, cw_diag_t *d)
{
    if (o->images && strcmp(ops->name, "etl") != 0)
        return cw_diag_set(d, CW_EUSAGE,
                           "--images is for --source etl:FILE (frames of the %s source are not "
                           "named from a folder of images)",
                           ops->name);
    if ((o->rebase_now || o->speed > 0) && strcmp(ops->name, "replay") != 0)
        return cw_diag_set(d, CW_EUSAGE, "--rebase-now and --speed are for replay sources only");
    return 0;
}
