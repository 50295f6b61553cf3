/* limit.c - time to a limit (alerts.h; docs/ALERTS.md, "Time to limit"):
 * the limit a rule's series is forecast against (the machine's commit
 * limit, the process's own limit, a configured size), the headroom left
 * under it, and headroom / slope at the median and upper slopes. The OS's
 * figures come from platform.h. */
#include <math.h>
#include <string.h>

#include "commitwatch/alerts.h"
#include "commitwatch/platform.h"

/* Seconds to use headroom bytes at slope bytes/h. */
static double seconds_to(uint64_t headroom, double slope)
{
    if (headroom == 0) return 0;     /* at the limit now */
    if (!(slope > 0)) return INFINITY; /* not growing (or NaN) */
    return (double)headroom / slope * 3600.0;
}

void cw_time_to_limit(uint64_t headroom, double slope_median, double slope_upper,
                      cw_time_to_limit_t *out)
{
    out->headroom = headroom;
    out->median_s = seconds_to(headroom, slope_median);
    /* The upper slope is the faster one: the sooner time (fmax skips a NaN). */
    out->upper_s = seconds_to(headroom, fmax(slope_upper, slope_median));
}

uint64_t cw_limit_headroom(const cw_limit_info_t *l)
{
    return l->known && l->limit > l->used ? l->limit - l->used : 0;
}

int cw_alert_machine_limit(cw_limit_info_t *out)
{
    uint64_t limit, used;
    bool enforced;
    memset(out, 0, sizeof *out);
    out->source = "CommitLimit";
    int rc = cw_plat_commit_limit(&limit, &used, &enforced);
    if (rc) return rc;
    out->known = true;
    out->advisory = !enforced;
    out->limit = limit;
    out->used = used;
    return 0;
}

int cw_alert_limit(const cw_alert_rule_t *r, uint32_t pid, uint64_t series_outstanding,
                   const cw_limit_info_t *machine, cw_limit_info_t *out)
{
    memset(out, 0, sizeof *out);
    if (r->limit_kind == CW_AL_SIZE) {
        out->known = true;
        out->limit = r->limit_bytes;
        out->used = series_outstanding;
        out->source = "configured";
        return 0;
    }
    if (r->limit_kind == CW_AL_PROCESS && pid != 0) {
        uint64_t limit, used;
        const char *source;
        if (cw_plat_process_limit(pid, &limit, &used, &source) == 0 && limit > 0) {
            out->known = true;
            out->limit = limit;
            out->used = used;
            out->source = source;
            return 0;
        }
        /* No limit of its own, one that cannot be read, or gone: the
         * machine's is what it can run into. */
    }
    if (!machine) return cw_alert_machine_limit(out);
    *out = *machine;
    return out->known ? 0 : CW_EIO;
}
