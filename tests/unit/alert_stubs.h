/* alert_stubs.h - TEMPORARY local versions of h-rules' functions
 * (rules copy/free, time to limit, limits) until that branch lands; only
 * the engine's unit tests include it. Delete on merge. */
#ifndef CW_ALERT_STUBS_H
#define CW_ALERT_STUBS_H
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "commitwatch/alerts.h"

int cw_alert_rules_copy(cw_alert_rules_t *dst, const cw_alert_rules_t *src)
{
    *dst = *src; /* shallow: the tests' rules outlive the evaluator */
    dst->v = malloc((src->n ? src->n : 1) * sizeof *dst->v);
    if (src->n) memcpy(dst->v, src->v, src->n * sizeof *dst->v);
    return dst->v ? 0 : CW_ENOMEM;
}
void cw_alert_rules_free(cw_alert_rules_t *rs)
{
    free(rs->v);
    memset(rs, 0, sizeof *rs);
}
void cw_time_to_limit(uint64_t headroom, double m, double u, cw_time_to_limit_t *out)
{
    out->headroom = headroom;
    out->median_s = m > 0 ? headroom / m * 3600 : INFINITY;
    out->upper_s = (u > m ? u : m) > 0 ? headroom / (u > m ? u : m) * 3600 : INFINITY;
}
uint64_t cw_limit_headroom(const cw_limit_info_t *l)
{
    return l->known && l->limit > l->used ? l->limit - l->used : 0;
}
int cw_alert_machine_limit(cw_limit_info_t *out)
{
    memset(out, 0, sizeof *out);
    return CW_ENOSYS;
}
int cw_alert_limit(const cw_alert_rule_t *r, uint32_t pid, uint64_t used,
                   const cw_limit_info_t *machine, cw_limit_info_t *out)
{
    (void)pid;
    (void)machine;
    memset(out, 0, sizeof *out);
    if (r->limit_kind != CW_AL_SIZE || !r->limit_bytes) return 0;
    *out = (cw_limit_info_t){true, false, r->limit_bytes, used, "configured"};
    return 0;
}
#endif
