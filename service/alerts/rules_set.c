/* rules_set.c - rule sets as values (alerts.h): freeing, deep copies,
 * look-up by name, and the hashes that tell the engine whether a rule or a
 * set changed on a reload. The file format is rules.c's. */
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "alerts/rules_int.h"
#include "commitwatch/alerts.h"
#include "commitwatch/common.h"
#include "commitwatch/hash.h"

/* FNV-1a 64 with its standard offset basis (hash.h's cw_hash_bytes uses
 * another basis: fine for tables, but the rule hashes are documented as
 * FNV-1a so that a tool can recompute them). */
uint64_t cw__alert_fnv1a64(const char *p, size_t n)
{
    return cw_hash_bytes_more(14695981039346656037ULL, p, n);
}

/* ---- freeing and copying ---------------------------------------------------- */

/* What a label owns. */
static const size_t label_owned[] = {offsetof(cw_alert_label_t, name),
                                     offsetof(cw_alert_label_t, value)};

void cw__alert_rule_free(cw_alert_rule_t *r)
{
    free(r->name);
    free(r->file);
    cw_free_strv(r->process, r->nprocess);
    cw_free_strv(r->tag, r->ntag);
    cw_free_rows(r->labels, r->nlabels, sizeof *r->labels, label_owned, CW_ARRAY_LEN(label_owned));
    free(r->summary);
    free(r->text);
    memset(r, 0, sizeof *r);
}

void cw_alert_rules_free(cw_alert_rules_t *rs)
{
    if (!rs) return;
    for (size_t i = 0; i < rs->n; i++)
        cw__alert_rule_free(&rs->v[i]);
    free(rs->v);
    memset(rs, 0, sizeof *rs);
}

/* A copy of n strings (NULL for none), or NULL with *ok false. */
static char **copy_list(char *const *v, size_t n, bool *ok)
{
    if (n == 0) return NULL;
    char **c = calloc(n, sizeof *c);
    if (!c) {
        *ok = false;
        return NULL;
    }
    for (size_t i = 0; i < n; i++)
        if (!(c[i] = cw_strdup(v[i]))) *ok = false;
    return c;
}

/* A deep copy of s into d; 0 or CW_ENOMEM (d then freed). */
static int copy_rule(cw_alert_rule_t *d, const cw_alert_rule_t *s)
{
    bool ok = true;
    *d = *s;
    d->name = cw_strdup(s->name);
    d->file = cw_strdup(s->file);
    d->summary = s->summary ? cw_strdup(s->summary) : NULL;
    d->text = cw_strdup(s->text);
    d->process = copy_list(s->process, s->nprocess, &ok);
    d->tag = copy_list(s->tag, s->ntag, &ok);
    d->labels = NULL;
    if (s->nlabels && !(d->labels = calloc(s->nlabels, sizeof *d->labels))) ok = false;
    for (size_t i = 0; d->labels && i < s->nlabels; i++) {
        d->labels[i].name = cw_strdup(s->labels[i].name);
        d->labels[i].value = cw_strdup(s->labels[i].value);
        if (!d->labels[i].name || !d->labels[i].value) ok = false;
    }
    if (!d->labels) d->nlabels = 0;
    if (!d->process) d->nprocess = 0;
    if (!d->tag) d->ntag = 0;
    if (!ok || !d->name || !d->file || !d->text || (s->summary && !d->summary)) {
        cw__alert_rule_free(d);
        return CW_ENOMEM;
    }
    return 0;
}

int cw_alert_rules_copy(cw_alert_rules_t *dst, const cw_alert_rules_t *src)
{
    memset(dst, 0, sizeof *dst);
    memcpy(dst->hash, src->hash, sizeof dst->hash);
    if (src->n == 0) return 0;
    if (!(dst->v = calloc(src->n, sizeof *dst->v))) return CW_ENOMEM;
    for (size_t i = 0; i < src->n; i++) {
        if (copy_rule(&dst->v[i], &src->v[i]) != 0) {
            cw_alert_rules_free(dst);
            return CW_ENOMEM;
        }
        dst->n++;
    }
    return 0;
}

const cw_alert_rule_t *cw_alert_rules_find(const cw_alert_rules_t *rs, const char *name)
{
    for (size_t i = 0; rs && i < rs->n; i++)
        if (strcmp(rs->v[i].name, name) == 0) return &rs->v[i];
    return NULL;
}

/* The set's hash: FNV-1a 64 over every rule's name and hash, in order. */
void cw__alert_rules_rehash(cw_alert_rules_t *rs)
{
    size_t len = 1;
    for (size_t i = 0; i < rs->n; i++)
        len += strlen(rs->v[i].name) + 18;
    char *buf = malloc(len), *at = buf;
    if (!buf) {
        /* Out of memory for the hash only: one that matches no set. */
        memset(rs->hash, '0', 16);
        rs->hash[16] = '\0';
        return;
    }
    for (size_t i = 0; i < rs->n; i++)
        at += sprintf(at, "%s\n%s\n", rs->v[i].name, rs->v[i].hash);
    snprintf(rs->hash, sizeof rs->hash, "%016llx",
             (unsigned long long)cw__alert_fnv1a64(buf, (size_t)(at - buf)));
    free(buf);
}
