/* notice.c - owned copies of the engine's notices (notify.h). */
#include <stdlib.h>
#include <string.h>

#include "commitwatch/common.h"
#include "commitwatch/notify.h"

static int copy_labels(const cw_alert_label_t *v, size_t n, const cw_alert_label_t **out)
{
    cw_alert_label_t *c = n ? calloc(n, sizeof *c) : NULL;
    *out = c;
    if (n && !c) return -1;
    for (size_t i = 0; i < n; i++)
        if (!(c[i].name = cw_strdup(v[i].name)) || !(c[i].value = cw_strdup(v[i].value)))
            return -1;
    return 0;
}

static void free_labels(const cw_alert_label_t *v, size_t n)
{
    cw_alert_label_t *c = (cw_alert_label_t *)v;
    for (size_t i = 0; c && i < n; i++) {
        free(c[i].name);
        free(c[i].value);
    }
    free(c);
}

/* NULL stays NULL; *ok cleared when a copy fails. */
static const char *dup_opt(const char *s, bool *ok)
{
    if (!s) return NULL;
    char *c = cw_strdup(s);
    if (!c) *ok = false;
    return c;
}

cw_alert_notice_t *cw_alert_notice_copy(const cw_alert_notice_t *n)
{
    cw_alert_notice_t *c = malloc(sizeof *c);
    if (!c) return NULL;
    *c = *n;
    c->labels = c->annotations = NULL;
    bool ok = true;
    c->rule = dup_opt(n->rule, &ok);
    c->reason = dup_opt(n->reason, &ok);
    c->process = dup_opt(n->process, &ok);
    c->tag = dup_opt(n->tag, &ok);
    c->generator_url = dup_opt(n->generator_url, &ok);
    if (copy_labels(n->labels, n->nlabels, &c->labels)) ok = false;
    if (copy_labels(n->annotations, n->nannotations, &c->annotations)) ok = false;
    if (!ok) {
        cw_alert_notice_free(c);
        return NULL;
    }
    return c;
}

void cw_alert_notice_free(cw_alert_notice_t *n)
{
    if (!n) return;
    free((char *)n->rule);
    free((char *)n->reason);
    free((char *)n->process);
    free((char *)n->tag);
    free((char *)n->generator_url);
    free_labels(n->labels, n->nlabels);
    free_labels(n->annotations, n->nannotations);
    free(n);
}
