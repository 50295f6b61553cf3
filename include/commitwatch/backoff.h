/* backoff.h - when to try a failed live source again, and when to say so
 * in the log (docs/RELIABILITY.md, "A source that fails").
 *
 * A source that cannot open, or that dies, is tried again after 1 s, then
 * after twice the previous wait, up to 5 min; a success starts the
 * schedule over. While it keeps failing, the log gets at most one line a
 * minute (the first failure always logs). Pure: the caller passes the
 * times (monotonic nanoseconds); the core thread owns the struct. */
#ifndef COMMITWATCH_BACKOFF_H
#define COMMITWATCH_BACKOFF_H

#include <stdbool.h>
#include <stdint.h>

#include "commitwatch/common.h"

#define CW_BACKOFF_FIRST_NS CW_NS_PER_S        /* 1 s */
#define CW_BACKOFF_MAX_NS (INT64_C(300) * CW_NS_PER_S)  /* 5 min */
#define CW_BACKOFF_LOG_EVERY_NS (INT64_C(60) * CW_NS_PER_S) /* 1 min */

typedef struct cw_backoff {
    int64_t delay_ns;    /* the wait before the next try (after the failure) */
    int64_t next_ns;     /* when to try next; INT64_MIN while the source works */
    uint32_t failures;   /* failures since the last success */
    int64_t logged_ns;   /* when a failure was last logged; INT64_MIN: never */
} cw_backoff_t;

/* A fresh schedule: no failure yet. */
void cw_backoff_init(cw_backoff_t *b);
/* Records a failure at now: the next try is due after the current delay
 * (1 s for the first failure, doubled each time, at most 5 min). Returns
 * the time of the next try (b->next_ns). */
int64_t cw_backoff_fail(cw_backoff_t *b, int64_t now);
/* True when a failure at now should be logged (the first one, then at
 * most once a minute); marks it logged. */
bool cw_backoff_log_due(cw_backoff_t *b, int64_t now);
/* The source works again: the schedule starts over. Returns the failures
 * there were (0: it never failed). */
uint32_t cw_backoff_success(cw_backoff_t *b);

#endif
