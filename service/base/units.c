/* units.c - the duration and size values of the configuration file and of
 * the alert rules (common.h): one reader of "15m" and "2GiB" for both.
 * (Moved here from app/config.c so the alerts stage, below app, can use it.) */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "commitwatch/common.h"

typedef struct unit {
    const char *suffix;
    uint64_t mult;
} unit_t;

/* v times the multiplier of the unit spelled `end` ("" = 1) into *out,
 * when it stays <= max. 0 or -1 (unknown unit, overflow). */
static int scale(const char *end, unsigned long long v, const unit_t *units, size_t n,
                 uint64_t max, uint64_t *out)
{
    uint64_t mult = *end ? 0 : 1;
    for (size_t i = 0; !mult && i < n; i++)
        if (strcmp(end, units[i].suffix) == 0) mult = units[i].mult;
    if (!mult || v > max / mult) return -1;
    *out = v * mult;
    return 0;
}

int cw_parse_duration(const char *s, int64_t *ns)
{
    static const unit_t units[] = {{"ns", 1},
                                   {"us", 1000},
                                   {"ms", 1000000},
                                   {"s", 1000000000ULL},
                                   {"m", 60000000000ULL},
                                   {"h", 3600000000000ULL},
                                   {"d", 86400000000000ULL}};
    char *end;
    uint64_t out;
    errno = 0;
    long long v = strtoll(s, &end, 10);
    if (errno || end == s || v < 0) return -1;
    if (scale(end, (unsigned long long)v, units, CW_ARRAY_LEN(units), INT64_MAX, &out)) return -1;
    *ns = (int64_t)out;
    return 0;
}

int cw_parse_size(const char *s, uint64_t *bytes)
{
    static const unit_t units[] = {
        {"B", 1},      {"KB", 1000},     {"MB", 1000000},        {"GB", 1000000000ULL},
        {"KiB", 1024}, {"MiB", 1048576}, {"GiB", 1073741824ULL}, {"TiB", 1099511627776ULL}};
    char *end;
    errno = 0;
    if (*s == '-') return -1;
    unsigned long long v = strtoull(s, &end, 10);
    if (errno || end == s) return -1;
    return scale(end, v, units, CW_ARRAY_LEN(units), UINT64_MAX, bytes);
}
