/* http_params.c - query strings, times, durations and windows of the API.
 *
 * Times are Unix ns, RFC 3339 or relative to "now" (-15m, now); every
 * failure is a 400 whose message names the parameter and shows a valid
 * example, so a user can fix the URL without reading the docs. */
#include "http/http_req.h"

#include <civetweb.h>
#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "commitwatch/common.h"
#include "commitwatch/platform.h"
#include "commitwatch/query.h"

int cw__http_parse_query(cw__http_req_t *r, const char *qs)
{
    r->nparams = 0;
    if (!qs) return 0;
    while (*qs) {
        const char *amp = strchr(qs, '&');
        size_t len = amp ? (size_t)(amp - qs) : strlen(qs);
        if (len) {
            const char *eq = memchr(qs, '=', len);
            size_t nlen = eq ? (size_t)(eq - qs) : len;
            if (r->nparams == CW__HTTP_MAX_PARAMS)
                return cw__http_fail(r, 400, "query: more than %d parameters", CW__HTTP_MAX_PARAMS);
            cw__http_param_t *p = &r->params[r->nparams];
            int nl = mg_url_decode(qs, (int)nlen, p->name, sizeof p->name, 1);
            if (nl < 0 || nlen >= sizeof p->name)
                return cw__http_fail(r, 400, "query: a parameter name is too long");
            /* %00 would cut the text the handlers read. */
            if (strlen(p->name) != (size_t)nl)
                return cw__http_fail(r, 400, "query: a parameter name holds a NUL byte (%%00)");
            p->value[0] = 0;
            if (eq) {
                size_t vlen = len - nlen - 1;
                int vl = vlen < sizeof p->value
                             ? mg_url_decode(eq + 1, (int)vlen, p->value, sizeof p->value, 1)
                             : -1;
                if (vl < 0)
                    return cw__http_fail(r, 400, "%s: value too long (at most %zu bytes)", p->name,
                                         sizeof p->value - 1);
                if (strlen(p->value) != (size_t)vl)
                    return cw__http_fail(r, 400, "%s: the value holds a NUL byte (%%00)", p->name);
            }
            for (int k = 0; k < r->nparams; k++)
                if (strcmp(r->params[k].name, p->name) == 0)
                    return cw__http_fail(r, 400, "%s: given more than once", p->name);
            r->nparams++;
        }
        if (!amp) break;
        qs = amp + 1;
    }
    return 0;
}

const char *cw__http_param(cw__http_req_t *r, const char *name)
{
    for (int i = 0; i < r->nparams; i++)
        if (strcmp(r->params[i].name, name) == 0) {
            r->params[i].used = true;
            return r->params[i].value;
        }
    return NULL;
}

int cw__http_check_unused(cw__http_req_t *r)
{
    for (int i = 0; i < r->nparams; i++)
        if (!r->params[i].used)
            return cw__http_fail(r, 400, "%s: unknown parameter", r->params[i].name);
    return 0;
}

int cw__http_name_index(const char *const *names, int n, const char *s)
{
    for (int i = 0; i < n; i++)
        if (strcmp(names[i], s) == 0) return i;
    return -1;
}

int64_t cw__http_now(cw__http_req_t *r)
{
    const cw_status_t *st = r->ctx->status;
    if (r->now_ns) return r->now_ns;
    if (st && st->data_clock && r->store) {
        int64_t end;
        /* The end of the data: where tracking ended, once a replay's
         * input has ended (the bucket after it holds no data). */
        if (cw_store_data_end(r->store, &end, NULL, NULL) == 0 && end != INT64_MIN) return end;
    }
    return cw_plat_wall_ns();
}

/* Days since 1970-01-01 of a proleptic Gregorian date (H. Hinnant). */
static int64_t days_from_civil(int64_t y, unsigned m, unsigned d)
{
    y -= m <= 2;
    int64_t era = (y >= 0 ? y : y - 399) / 400;
    unsigned yoe = (unsigned)(y - era * 400);
    unsigned doy = (153 * (m + (m > 2 ? -3 : 9)) + 2) / 5 + d - 1;
    unsigned doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    return era * 146097 + (int64_t)doe - 719468;
}

/* Reads exactly n digits. */
static bool digits(const char **p, int n, int *out)
{
    int v = 0;
    for (int i = 0; i < n; i++) {
        if (!isdigit((unsigned char)(*p)[i])) return false;
        v = v * 10 + ((*p)[i] - '0');
    }
    *p += n;
    *out = v;
    return true;
}

/* RFC 3339: YYYY-MM-DD[Tt ]HH:MM:SS[.frac](Z|z|+HH:MM|-HH:MM). 1, 0 (not
 * one), or -1: a date outside Unix ns (1677-09-21 to 2262-04-11; the
 * product overflowed before fuzz_http found it). */
static int parse_rfc3339(const char *s, int64_t *out)
{
    int Y, M, D, h, m, sec, oh = 0, om = 0;
    const char *p = s;
    if (!digits(&p, 4, &Y) || *p++ != '-' || !digits(&p, 2, &M) || *p++ != '-' ||
        !digits(&p, 2, &D))
        return 0;
    if (*p != 'T' && *p != 't' && *p != ' ') return 0;
    p++;
    if (!digits(&p, 2, &h) || *p++ != ':' || !digits(&p, 2, &m) || *p++ != ':' ||
        !digits(&p, 2, &sec))
        return 0;
    int64_t frac = 0;
    if (*p == '.') {
        p++;
        int nd = 0;
        int64_t scale = 100000000;
        while (isdigit((unsigned char)*p)) {
            if (nd < 9) frac += (*p - '0') * scale, scale /= 10;
            nd++, p++;
        }
        if (!nd) return 0;
    }
    int sign = 0;
    if (*p == 'Z' || *p == 'z')
        p++;
    else if (*p == '+' || *p == '-') {
        sign = *p++ == '+' ? 1 : -1;
        if (!digits(&p, 2, &oh) || *p++ != ':' || !digits(&p, 2, &om)) return 0;
    } else
        return 0;
    if (*p || M < 1 || M > 12 || D < 1 || D > 31 || h > 23 || m > 59 || sec > 60 || oh > 23 ||
        om > 59)
        return 0;
    int64_t secs = days_from_civil(Y, (unsigned)M, (unsigned)D) * 86400 + h * 3600 + m * 60 + sec -
                   sign * (oh * 3600 + om * 60);
    if (secs > INT64_MAX / CW_NS_PER_S ||
        (secs == INT64_MAX / CW_NS_PER_S && frac > INT64_MAX % CW_NS_PER_S) ||
        secs < INT64_MIN / CW_NS_PER_S)
        return -1;
    *out = secs * CW_NS_PER_S + frac;
    return 1;
}

/* "<digits><unit>" with unit ns, us, ms, s, m, h, d (or none = ns when
 * bare_ns): cw_parse_duration, without its leading sign or blanks. false
 * on anything else or overflow. */
static bool parse_span(const char *s, bool bare_ns, int64_t *out)
{
    size_t n = strlen(s);
    if (!isdigit((unsigned char)s[0]) || (!bare_ns && isdigit((unsigned char)s[n - 1])))
        return false;
    return cw_parse_duration(s, out) == 0;
}

int cw__http_parse_time(cw__http_req_t *r, const char *name, const char *s, int64_t *out)
{
    int64_t span;
    if (strcmp(s, "now") == 0) {
        *out = cw__http_now(r);
        return 0;
    }
    if ((s[0] == '-' || s[0] == '+') && parse_span(s + 1, false, &span)) {
        if (span > CW__HTTP_MAX_WINDOW_NS * 10)
            return cw__http_fail(r, 400, "%s: relative time %s is too far from now", name, s);
        *out = cw__http_now(r) + (s[0] == '-' ? -span : span);
        return 0;
    }
    if (isdigit((unsigned char)s[0]) || (s[0] == '-' && isdigit((unsigned char)s[1]))) {
        bool all = true;
        for (const char *p = s + (s[0] == '-'); *p; p++)
            all = all && isdigit((unsigned char)*p);
        if (all) {
            char *end;
            errno = 0;
            long long v = strtoll(s, &end, 10);
            if (*end || errno == ERANGE || strlen(s) > 19 + (s[0] == '-'))
                return cw__http_fail(r, 400, "%s: %s is out of range for Unix ns", name, s);
            *out = v;
            return 0;
        }
        int ok = parse_rfc3339(s, out);
        if (ok > 0) return 0;
        if (ok < 0)
            return cw__http_fail(r, 400,
                                 "%s: %s is out of range for Unix ns (1677-09-21 to 2262-04-11)",
                                 name, s);
    }
    return cw__http_fail(r, 400,
                         "%s: '%s' is not a time; use Unix ns (1764410400000000000), RFC 3339 "
                         "(2026-11-29T10:00:00Z), 'now' or relative (-15m, -2h, -30s, -1d)",
                         name, s);
}

int cw__http_parse_duration(cw__http_req_t *r, const char *name, const char *s, int64_t *out)
{
    if (!parse_span(s, true, out) || *out <= 0)
        return cw__http_fail(r, 400,
                             "%s: '%s' is not a positive duration; use 1s, 60s, 5m, 1h "
                             "or ns",
                             name, s);
    return 0;
}

int cw__http_parse_uint(cw__http_req_t *r, const char *name, const char *s, uint64_t lo,
                        uint64_t hi, uint64_t *out)
{
    uint64_t v = 0;
    const char *p = s;
    if (!*p) goto bad;
    for (; *p; p++) {
        if (!isdigit((unsigned char)*p) || v > (UINT64_MAX - 9) / 10) goto bad;
        v = v * 10 + (uint64_t)(*p - '0');
    }
    if (v < lo || v > hi) goto bad;
    *out = v;
    return 0;
bad:
    return cw__http_fail(r, 400, "%s: '%s' must be an integer from %llu to %llu", name, s,
                         (unsigned long long)lo, (unsigned long long)hi);
}

int cw__http_window(cw__http_req_t *r, int64_t *from, int64_t *to)
{
    const char *f = cw__http_param(r, "from"), *t = cw__http_param(r, "to");
    int rc;
    if (t) {
        if ((rc = cw__http_parse_time(r, "to", t, to))) return rc;
    } else
        *to = cw__http_now(r);
    if (f) {
        if ((rc = cw__http_parse_time(r, "from", f, from))) return rc;
    } else
        *from = *to - 3600LL * CW_NS_PER_S;
    if (*from >= *to)
        return cw__http_fail(r, 400, "from: must be before to (windows are [from, to))");
    if ((uint64_t)*to - (uint64_t)*from > (uint64_t)CW__HTTP_MAX_WINDOW_NS)
        return cw__http_fail(r, 400, "from: the window [from, to) is longer than 400 days");
    return 0;
}
