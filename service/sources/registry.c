/* registry.c - the sources built into this binary, by name. Each platform
 * adds its live source to the list. */
#include <string.h>

#include "commitwatch/source.h"

#if defined(__linux__) && defined(CW_HAVE_PERF)
extern const cw_source_ops_t cw_source_perf;
#endif
#if defined(_WIN32)
extern const cw_source_ops_t cw_source_etw;
#endif

static const cw_source_ops_t *const sources[] = {
    &cw_source_replay,
#if defined(__linux__) && defined(CW_HAVE_PERF)
    &cw_source_perf,
#endif
#if defined(_WIN32)
    &cw_source_etw,
#endif
};

const cw_source_ops_t *cw_source_find(const char *name)
{
    for (size_t i = 0; i < sizeof sources / sizeof sources[0]; i++)
        if (strcmp(sources[i]->name, name) == 0) return sources[i];
    return NULL;
}
