/* silence.c - silences' matchers over an alert's labels (alertdb.h,
 * silences; Alertmanager's matcher shape {"name", "value", "isRegex",
 * "isEqual"}), and the small regular-expression dialect they use.
 *
 * The dialect: anchored at both ends (as Alertmanager's), literals, '.',
 * classes [a-z] and [^...], '\' escapes, the quantifiers * + ? after a
 * single atom, groups ( ) with alternation | (a quantifier after a group:
 * '?' only). A pattern outside it matches nothing. Backtracking over
 * label values (short strings). */
#include <stdlib.h>
#include <string.h>

#include "alerts/alerts_internal.h"
#include <cjson/cJSON.h>
#include "commitwatch/common.h"

/* ---- the regex dialect -------------------------------------------------------- */

typedef struct cont {
    const char *p, *end;
    const struct cont *next;
} cont_t;

static bool m(const char *p, const char *end, const char *s, const cont_t *k, int depth);

/* The end of the class starting at p ('['), or NULL. */
static const char *class_end(const char *p, const char *end)
{
    p++;
    if (p < end && *p == '^') p++;
    if (p < end && *p == ']') p++;
    while (p < end && *p != ']') {
        if (*p == '\\' && p + 1 < end) p++;
        p++;
    }
    return p < end ? p + 1 : NULL;
}

/* The end of the atom at p (a class, an escape, a group, one char). */
static const char *atom_end(const char *p, const char *end)
{
    if (*p == '[') return class_end(p, end);
    if (*p == '\\') return p + 2 <= end ? p + 2 : NULL;
    if (*p == '(') {
        int depth = 0;
        for (const char *q = p; q < end; q++) {
            if (*q == '\\') {
                q++;
                continue;
            }
            if (*q == '[') {
                const char *c = class_end(q, end);
                if (!c) return NULL;
                q = c - 1;
                continue;
            }
            if (*q == '(') depth++;
            if (*q == ')' && --depth == 0) return q + 1;
        }
        return NULL;
    }
    return p + 1;
}

/* Whether the single-char atom [p, e) matches c. */
static bool atom_char(const char *p, const char *e, char c)
{
    if (*p == '.') return c != '\0';
    if (*p == '\\') return p[1] == c;
    if (*p != '[') return *p == c;
    bool neg = p[1] == '^', in = false;
    const char *q = p + 1 + neg;
    bool first = true;
    while (q < e - 1 && (first || *q != ']')) {
        first = false;
        char lo = *q == '\\' ? *++q : *q, hi = lo;
        q++;
        if (*q == '-' && q + 1 < e - 1 && q[1] != ']') {
            hi = q[1] == '\\' ? q[2] : q[1];
            q += q[1] == '\\' ? 3 : 2;
        }
        if ((unsigned char)lo <= (unsigned char)c && (unsigned char)c <= (unsigned char)hi)
            in = true;
    }
    return c != '\0' && in != neg;
}

/* A top-level '|' of [p, end), or NULL. */
static const char *top_bar(const char *p, const char *end)
{
    while (p < end) {
        if (*p == '|') return p;
        const char *e = atom_end(p, end);
        if (!e) return NULL;
        p = e;
    }
    return NULL;
}

static bool m(const char *p, const char *end, const char *s, const cont_t *k, int depth)
{
    if (depth > 2000) return false;
    const char *bar = top_bar(p, end);
    if (bar) return m(p, bar, s, k, depth + 1) || m(bar + 1, end, s, k, depth + 1);
    if (p == end) return k ? m(k->p, k->end, s, k->next, depth + 1) : *s == '\0';
    const char *e = atom_end(p, end);
    if (!e) return false;
    char q = e < end ? *e : '\0';
    bool quant = q == '*' || q == '+' || q == '?';
    const char *after = quant ? e + 1 : e;
    if (*p == '(') {
        if (quant && q != '?') return false; /* outside the dialect */
        cont_t c = {after, end, k};
        if (m(p + 1, e - 1, s, &c, depth + 1)) return true;
        return q == '?' && m(after, end, s, k, depth + 1);
    }
    if (!quant) return atom_char(p, e, *s) && m(after, end, s + 1, k, depth + 1);
    size_t max = 0;
    while (s[max] && atom_char(p, e, s[max]) && (q != '?' || max < 1))
        max++;
    size_t min = q == '+' ? 1 : 0;
    for (size_t i = max + 1; i-- > min;)
        if (m(after, end, s + i, k, depth + 1)) return true;
    return false;
}

bool cw__regex_match(const char *re, const char *s)
{
    return m(re, re + strlen(re), s, NULL, 0);
}

/* ---- silences ------------------------------------------------------------------ */

void cw__silence_free(cw__silence_t *s)
{
    for (size_t i = 0; s->m && i < s->n; i++) {
        free(s->m[i].name);
        free(s->m[i].value);
    }
    free(s->m);
    memset(s, 0, sizeof *s);
}

int cw__silence_parse(const char *json, cw__silence_t *out)
{
    memset(out, 0, sizeof *out);
    cJSON *a = cJSON_Parse(json);
    int err = 0;
    if (!cJSON_IsArray(a) || cJSON_GetArraySize(a) == 0) {
        cJSON_Delete(a);
        return CW_EINVAL;
    }
    size_t n = (size_t)cJSON_GetArraySize(a);
    if (!(out->m = calloc(n, sizeof *out->m))) err = CW_ENOMEM;
    const cJSON *it;
    cJSON_ArrayForEach(it, a)
    {
        if (err) break;
        const cJSON *name = cJSON_GetObjectItemCaseSensitive(it, "name");
        const cJSON *value = cJSON_GetObjectItemCaseSensitive(it, "value");
        const cJSON *re = cJSON_GetObjectItemCaseSensitive(it, "isRegex");
        const cJSON *eq = cJSON_GetObjectItemCaseSensitive(it, "isEqual");
        if (!cJSON_IsString(name) || !cJSON_IsString(value)) {
            err = CW_EINVAL;
            break;
        }
        cw__matcher_t *mt = &out->m[out->n++];
        mt->name = cw_strdup(name->valuestring);
        mt->value = cw_strdup(value->valuestring);
        mt->regex = cJSON_IsTrue(re);
        mt->equal = !cJSON_IsFalse(eq); /* absent: equal, as Alertmanager */
        if (!mt->name || !mt->value) err = CW_ENOMEM;
    }
    cJSON_Delete(a);
    if (err) cw__silence_free(out);
    return err;
}

bool cw__silence_match(const cw__silence_t *s, const cw_alert_label_t *labels, size_t n)
{
    if (!s->n) return false;
    for (size_t i = 0; i < s->n; i++) {
        const cw__matcher_t *mt = &s->m[i];
        const char *v = "";
        for (size_t k = 0; k < n; k++)
            if (strcmp(labels[k].name, mt->name) == 0) v = labels[k].value;
        bool hit = mt->regex ? cw__regex_match(mt->value, v) : strcmp(mt->value, v) == 0;
        if (hit != mt->equal) return false;
    }
    return true;
}
