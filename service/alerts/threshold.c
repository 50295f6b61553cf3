/* threshold.c - the values of a rule's thresholds, by metric (alerts.h,
 * cw_alert_parse_threshold): sizes, rates per hour or day, counts per
 * hour, scores, durations; and the metrics' names. */
#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "commitwatch/alerts.h"

static const char *const metric_names[] = {
    [CW_AM_IMPACTING_RATE] = "impacting_rate", [CW_AM_OUTSTANDING] = "outstanding",
    [CW_AM_TRANSIENT_RATE] = "transient_rate", [CW_AM_LEAK_SCORE] = "leak_score",
    [CW_AM_TIME_TO_LIMIT] = "time_to_limit", [CW_AM_SOURCE_DOWN] = "source_down"};

const char *cw_alert_metric_name(cw_alert_metric_t m)
{
    return (unsigned)m < CW_ARRAY_LEN(metric_names) ? metric_names[m] : "unknown";
}

/* "50MiB/h", "1GiB/d", "5000/h" (a count when `counts`): per hour into
 * *v, *count set for a bare number. 0 or -1. */
static int parse_rate(char *s, bool counts, double *v, bool *count)
{
    static const struct {
        const char *unit;
        double per_hour; /* how many of the unit make an hour */
    } per[] = {{"s", 3600}, {"m", 60}, {"h", 1}, {"d", 1.0 / 24}};
    char *slash = strchr(s, '/');
    if (!slash) return -1;
    *slash = '\0';
    const char *unit = slash + 1;
    double mult = 0;
    for (size_t i = 0; i < CW_ARRAY_LEN(per); i++)
        if (strcmp(unit, per[i].unit) == 0) mult = per[i].per_hour;
    if (mult == 0 || !*s) return -1;
    bool digits = true;
    for (const char *c = s; *c; c++)
        digits = digits && isdigit((unsigned char)*c);
    uint64_t bytes;
    if (digits && counts) {
        errno = 0;
        unsigned long long n = strtoull(s, NULL, 10);
        if (errno) return -1;
        *v = (double)n * mult;
        *count = true;
        return 0;
    }
    if (cw_parse_size(s, &bytes) != 0) return -1;
    *v = (double)bytes * mult;
    *count = false;
    return 0;
}

int cw_alert_parse_threshold(cw_alert_metric_t m, const char *s, double *value, bool *below,
                             bool *count_unit)
{
    char copy[128];
    if (cw_strlcpy(copy, s, sizeof copy) >= sizeof copy) return -1;
    char *buf = cw_strtrim(copy);
    bool lt = *buf == '<', gt = *buf == '>';
    if (lt || gt) buf = cw_strtrim(buf + 1);
    double v = 0;
    bool count = false;
    uint64_t bytes;
    int64_t ns;
    char *end;
    switch (m) {
    case CW_AM_IMPACTING_RATE:
    case CW_AM_TRANSIENT_RATE:
        if (parse_rate(buf, m == CW_AM_TRANSIENT_RATE, &v, &count) != 0) return -1;
        break;
    case CW_AM_OUTSTANDING:
        if (cw_parse_size(buf, &bytes) != 0) return -1;
        v = (double)bytes;
        break;
    case CW_AM_LEAK_SCORE:
    case CW_AM_SOURCE_DOWN: /* 0..1 too: 1 fires while down */
        errno = 0;
        v = strtod(buf, &end);
        if (errno || end == buf || *end || !(v >= 0 && v <= 1)) return -1;
        break;
    case CW_AM_TIME_TO_LIMIT:
        /* Always "below": a time to the limit alerts as it shrinks. */
        if (gt || cw_parse_duration(buf, &ns) != 0 || ns <= 0) return -1;
        v = (double)ns / 1e9;
        lt = true;
        break;
    default:
        return -1;
    }
    if (!isfinite(v)) return -1;
    *value = v;
    *below = lt;
    *count_unit = count;
    return 0;
}
