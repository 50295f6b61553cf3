/* labels.c - globs over process and tag names, and the Prometheus
 * fingerprint of an alert's label set (alerts.h). */
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "commitwatch/alerts.h"

/* [...] at p (p points after '['): *matched says whether c is in it; returns
 * the pointer after ']', or NULL when the class is not closed (then '['
 * is an ordinary character). */
static const char *glob_class(const char *p, unsigned char c, bool *matched)
{
    bool neg = false, in = false;
    if (*p == '!' || *p == '^') {
        neg = true;
        p++;
    }
    bool first = true;
    for (; *p && (first || *p != ']'); first = false) {
        unsigned char lo = (unsigned char)*p++, hi = lo;
        if (*p == '-' && p[1] && p[1] != ']') {
            hi = (unsigned char)p[1];
            p += 2;
        }
        if (lo <= c && c <= hi) in = true;
    }
    if (*p != ']') return NULL;
    *matched = in != neg;
    return p + 1;
}

bool cw_alert_glob(const char *pat, const char *s)
{
    /* Iterative with one backtrack point (the last '*'): linear enough for
     * names, and no recursion on hostile patterns. */
    const char *star = NULL, *resume = NULL;
    while (*s) {
        if (*pat == '*') {
            star = ++pat;
            resume = s;
            continue;
        }
        if (*pat == '?') {
            pat++;
            s++;
            continue;
        }
        if (*pat == '[') {
            bool m = false;
            const char *after = glob_class(pat + 1, (unsigned char)*s, &m);
            if (after) {
                if (m) {
                    pat = after;
                    s++;
                    continue;
                }
                goto mismatch;
            }
        }
        if (*pat == *s) {
            pat++;
            s++;
            continue;
        }
    mismatch:
        if (!star) return false;
        pat = star;
        s = ++resume;
    }
    while (*pat == '*')
        pat++;
    return *pat == '\0';
}

/* FNV-1a 64, as Prometheus' model.LabelSet.Fingerprint: each name and each
 * value followed by the separator byte 0xff, in the order of the names. */
#define FNV_OFFSET 14695981039346656037ULL
#define FNV_PRIME 1099511628211ULL

static uint64_t fnv_add(uint64_t h, const char *s)
{
    for (; *s; s++) {
        h ^= (unsigned char)*s;
        h *= FNV_PRIME;
    }
    return h;
}

static uint64_t fnv_sep(uint64_t h)
{
    h ^= 0xffu;
    return h * FNV_PRIME;
}

void cw_alert_fingerprint(const cw_alert_label_t *labels, size_t n, char out[17])
{
    uint64_t h = FNV_OFFSET;
    /* The labels may come in any order: walk them by name (n is small). */
    const char *prev = NULL;
    for (size_t k = 0; k < n; k++) {
        const cw_alert_label_t *next = NULL;
        for (size_t i = 0; i < n; i++)
            if ((!prev || strcmp(labels[i].name, prev) > 0) &&
                (!next || strcmp(labels[i].name, next->name) < 0))
                next = &labels[i];
        if (!next) break;
        h = fnv_sep(fnv_add(h, next->name));
        h = fnv_sep(fnv_add(h, next->value));
        prev = next->name;
    }
    snprintf(out, 17, "%016llx", (unsigned long long)h);
}
