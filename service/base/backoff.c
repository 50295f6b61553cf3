/* backoff.c - the retry schedule of a failed live source (backoff.h). */
#include "commitwatch/backoff.h"

void cw_backoff_init(cw_backoff_t *b)
{
    b->delay_ns = CW_BACKOFF_FIRST_NS;
    b->next_ns = INT64_MIN;
    b->failures = 0;
    b->logged_ns = INT64_MIN;
}

int64_t cw_backoff_fail(cw_backoff_t *b, int64_t now)
{
    /* The first failure waits the first delay; each later one twice the
     * previous, capped. */
    if (b->failures > 0) b->delay_ns = b->delay_ns >= CW_BACKOFF_MAX_NS / 2 ? CW_BACKOFF_MAX_NS
                                                                           : b->delay_ns * 2;
    if (b->failures < UINT32_MAX) b->failures++;
    b->next_ns = now + b->delay_ns;
    return b->next_ns;
}

bool cw_backoff_log_due(cw_backoff_t *b, int64_t now)
{
    if (b->logged_ns != INT64_MIN && now - b->logged_ns < CW_BACKOFF_LOG_EVERY_NS) return false;
    b->logged_ns = now;
    return true;
}

uint32_t cw_backoff_success(cw_backoff_t *b)
{
    uint32_t n = b->failures;
    cw_backoff_init(b);
    return n;
}
