/* common.c - the shared helpers of common.h: growable arrays, bounded
 * string copies and the freeing of owned members by offsets. */
#include "commitwatch/common.h"

#include <ctype.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "commitwatch/error.h"

/* items is the address of a `T *`: it is read and written with memcpy,
 * which copies the pointer's bytes without an aliasing question (every
 * object pointer has void *'s representation on the targets we build). */
int64_t cw_clock_step(int64_t *offset, int64_t wall_ns, int64_t mono_ns, int64_t tolerance_ns)
{
    int64_t now = wall_ns - mono_ns, was = *offset;
    *offset = now;
    if (was == INT64_MIN) return 0;
    int64_t step = now - was;
    return step > tolerance_ns || step < -tolerance_ns ? step : 0;
}

int cw_reserve(void *items, size_t *cap, size_t need, size_t elem)
{
    void *old;
    if (need <= *cap) return 0;
    size_t ncap = *cap < 8 ? 8 : *cap;
    while (ncap < need) {
        if (ncap > SIZE_MAX / 2) return CW_ENOMEM;
        ncap *= 2;
    }
    if (ncap > SIZE_MAX / elem) return CW_ENOMEM;
    memcpy(&old, items, sizeof old);
    void *np = realloc(old, ncap * elem);
    if (!np) return CW_ENOMEM;
    memcpy(items, &np, sizeof np);
    *cap = ncap;
    return 0;
}

void cw_reserve_fit(void *items, size_t *cap, size_t n, size_t slack, size_t elem)
{
    void *old;
    if (*cap <= slack || n > (*cap - slack - 1) / 2) return; /* 2 n + slack < *cap: on */
    memcpy(&old, items, sizeof old);
    if (n == 0) {
        free(old);
        old = NULL;
    } else {
        void *np = realloc(old, n * elem); /* n * elem < *cap * elem: no overflow */
        if (!np) return;                   /* the room is only kept */
        old = np;
    }
    memcpy(items, &old, sizeof old);
    *cap = n;
}

int cw_reserve_zeroed(void *items, size_t *cap, size_t need, size_t elem)
{
    size_t old = *cap;
    char *p;
    int rc = cw_reserve(items, cap, need, elem);
    if (rc == 0 && *cap > old) {
        memcpy(&p, items, sizeof p);
        memset(p + old * elem, 0, (*cap - old) * elem);
    }
    return rc;
}

void cw_buf_put(cw_buf_t *b, const void *s, size_t n)
{
    if (b->failed) return;
    if (CW_RESERVE(b->p, b->cap, b->n + n + 1)) {
        b->failed = true;
        return;
    }
    if (n) memcpy(b->p + b->n, s, n);
    b->n += n;
    b->p[b->n] = '\0';
}

size_t cw_varint_write(unsigned char *out, uint64_t v)
{
    size_t n = 0;
    while (v >= 0x80) {
        out[n++] = (unsigned char)(v | 0x80);
        v >>= 7;
    }
    out[n++] = (unsigned char)v;
    return n;
}

void cw_buf_varint(cw_buf_t *b, uint64_t v)
{
    unsigned char tmp[CW_VARINT_MAX];
    cw_buf_put(b, tmp, cw_varint_write(tmp, v));
}

int cw_varint_read_long(const unsigned char *buf, size_t len, size_t *pos, uint64_t *out)
{
    uint64_t v = 0;
    for (unsigned shift = 0; shift < 64; shift += 7) {
        if (*pos >= len) return -1;
        unsigned char c = buf[(*pos)++];
        if (shift == 63 && (c & 0x7e)) return -1; /* more than 64 bits */
        v |= (uint64_t)(c & 0x7f) << shift;
        if (!(c & 0x80)) {
            *out = v;
            return 0;
        }
    }
    return -1;
}

void cw_buf_puts(cw_buf_t *b, const char *s)
{
    cw_buf_put(b, s, strlen(s));
}

void cw_buf_printf(cw_buf_t *b, const char *fmt, ...)
{
    if (b->failed) return;
    for (;;) {
        va_list ap;
        va_start(ap, fmt);
        int k = vsnprintf(b->p ? b->p + b->n : NULL, b->p ? b->cap - b->n : 0, fmt, ap);
        va_end(ap);
        if (k < 0) {
            b->failed = true;
            return;
        }
        if (b->p && b->n + (size_t)k < b->cap) {
            b->n += (size_t)k;
            return;
        }
        if (CW_RESERVE(b->p, b->cap, b->n + (size_t)k + 1)) {
            b->failed = true;
            return;
        }
    }
}

size_t cw_strlcpy(char *dst, const char *src, size_t size)
{
    size_t n = strlen(src);
    if (size) {
        size_t k = n < size ? n : size - 1;
        memcpy(dst, src, k);
        dst[k] = '\0';
    }
    return n;
}

char *cw_strndup(const char *s, size_t n)
{
    if (!s) return NULL;
    char *p = malloc(n + 1);
    if (!p) return NULL;
    memcpy(p, s, n);
    p[n] = '\0';
    return p;
}

char *cw_strdup(const char *s)
{
    return s ? cw_strndup(s, strlen(s)) : NULL;
}

/* Each member is read with memcpy, as cw_reserve reads *items: a pointer of
 * any object type has void *'s representation on the targets we build. */
void cw_free_members(void *obj, const size_t *offs, size_t noffs)
{
    for (size_t i = 0; i < noffs; i++) {
        void *p;
        memcpy(&p, (char *)obj + offs[i], sizeof p);
        free(p);
    }
}

void cw_free_rows(void *rows, size_t n, size_t size, const size_t *offs, size_t noffs)
{
    if (!rows) return;
    for (size_t i = 0; i < n; i++)
        cw_free_members((char *)rows + i * size, offs, noffs);
    free(rows);
}

void cw_free_strv(char **v, size_t n)
{
    if (!v) return;
    for (size_t i = 0; i < n; i++)
        free(v[i]);
    free(v);
}

void cw_utc_from_ns(int64_t ns, cw_utc_t *out)
{
    int64_t s = ns / CW_NS_PER_S, frac = ns % CW_NS_PER_S;
    if (frac < 0) {
        frac += CW_NS_PER_S;
        s--;
    }
    int64_t days = s / 86400, sod = s % 86400;
    if (sod < 0) {
        sod += 86400;
        days--;
    }
    int64_t z = days + 719468, era = (z >= 0 ? z : z - 146096) / 146097;
    int64_t doe = z - era * 146097, yoe = (doe - doe / 1460 + doe / 36524 - doe / 146096) / 365;
    int64_t y = yoe + era * 400, doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    int64_t mp = (5 * doy + 2) / 153;
    out->day = (int)(doy - (153 * mp + 2) / 5 + 1);
    out->month = (int)(mp < 10 ? mp + 3 : mp - 9);
    out->year = y + (out->month <= 2);
    out->hour = (int)(sod / 3600);
    out->min = (int)(sod / 60 % 60);
    out->sec = (int)(sod % 60);
    out->nsec = frac;
}

const char *cw_utc_text(int64_t ns, int frac_digits, char out[CW_UTC_TEXT])
{
    cw_utc_t u;
    cw_utc_from_ns(ns, &u);
    int digits = frac_digits < 0 ? 0 : frac_digits > 9 ? 9 : frac_digits;
    int64_t frac = u.nsec;
    for (int i = digits; i < 9; i++)
        frac /= 10;
    if (digits)
        snprintf(out, CW_UTC_TEXT, "%04" PRId64 "-%02d-%02dT%02d:%02d:%02d.%0*" PRId64 "Z", u.year,
                 u.month, u.day, u.hour, u.min, u.sec, digits, frac);
    else
        snprintf(out, CW_UTC_TEXT, "%04" PRId64 "-%02d-%02dT%02d:%02d:%02dZ", u.year, u.month,
                 u.day, u.hour, u.min, u.sec);
    return out;
}

char *cw_strtrim(char *s)
{
    while (isspace((unsigned char)*s))
        s++;
    char *e = s + strlen(s);
    while (e > s && isspace((unsigned char)e[-1]))
        *--e = '\0';
    return s;
}

bool cw_contains_ci(const char *hay, const char *needle)
{
    size_t n = strlen(needle);
    for (; *hay; hay++) {
        size_t i = 0;
        while (i < n && hay[i] &&
               tolower((unsigned char)hay[i]) == tolower((unsigned char)needle[i]))
            i++;
        if (i == n) return true;
    }
    return n == 0;
}
