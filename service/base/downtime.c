/* downtime.c - the list of intervals the live source was down
 * (downtime.h): its text form and the questions asked of it. */
#include "commitwatch/downtime.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void cw_downtime_parse(cw_downtime_t *dt, const char *text)
{
    dt->n = 0;
    for (const char *p = text; p && *p && dt->n < CW_DOWNTIME_MAX;) {
        char *end;
        long long from = strtoll(p, &end, 10);
        bool ok = end != p && *end == ' ';
        int64_t to = INT64_MAX;
        if (ok && end[1] == '-') {
            end += 2;
        } else if (ok) {
            const char *q = end + 1;
            long long v = strtoll(q, &end, 10);
            ok = end != q && v > from;
            to = v;
        }
        ok = ok && (*end == '\n' || *end == '\0');
        if (ok && (dt->n == 0 || from >= dt->to[dt->n - 1])) {
            dt->from[dt->n] = from;
            dt->to[dt->n] = to;
            dt->n++;
        }
        p = strchr(p, '\n');
        if (p) p++;
    }
}

char *cw_downtime_format(const cw_downtime_t *dt, char *buf, size_t size)
{
    size_t len = 0;
    buf[0] = '\0';
    for (size_t i = 0; i < dt->n && len < size; i++) {
        int w = dt->to[i] == INT64_MAX
                    ? snprintf(buf + len, size - len, "%" PRId64 " -\n", dt->from[i])
                    : snprintf(buf + len, size - len, "%" PRId64 " %" PRId64 "\n", dt->from[i],
                               dt->to[i]);
        if (w < 0 || (size_t)w >= size - len) break;
        len += (size_t)w;
    }
    return buf;
}

bool cw_downtime_open(const cw_downtime_t *dt)
{
    return dt->n > 0 && dt->to[dt->n - 1] == INT64_MAX;
}

void cw_downtime_begin(cw_downtime_t *dt, int64_t at)
{
    if (cw_downtime_open(dt)) return;
    if (dt->n > 0 && at < dt->to[dt->n - 1]) at = dt->to[dt->n - 1]; /* never overlapping */
    if (dt->n == CW_DOWNTIME_MAX) {
        memmove(dt->from, dt->from + 1, (dt->n - 1) * sizeof *dt->from);
        memmove(dt->to, dt->to + 1, (dt->n - 1) * sizeof *dt->to);
        dt->n--;
    }
    dt->from[dt->n] = at;
    dt->to[dt->n] = INT64_MAX;
    dt->n++;
}

bool cw_downtime_end(cw_downtime_t *dt, int64_t at)
{
    if (!cw_downtime_open(dt)) return false;
    size_t i = dt->n - 1;
    dt->to[i] = at > dt->from[i] ? at : dt->from[i] + 1;
    return true;
}

bool cw_downtime_at(const cw_downtime_t *dt, int64_t t)
{
    return cw_downtime_covers(dt, t, t + 1);
}

bool cw_downtime_covers(const cw_downtime_t *dt, int64_t a, int64_t b)
{
    for (size_t i = 0; i < dt->n; i++)
        if (dt->from[i] <= a && b <= dt->to[i]) return true;
    return false;
}
