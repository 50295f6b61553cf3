/* push_queue.c - the profile push's queue (notify_internal.h): profiles
 * waiting to be sent, oldest first, bounded in bytes (the oldest dropped
 * first), and the retry schedule of the oldest (backoff.h). Pure: the push
 * thread passes the times and owns the queue (push.c). */
#include <stdlib.h>

#include "commitwatch/common.h"
#include "notify/notify_internal.h"

void cw__pushq_init(cw__pushq_t *q, uint64_t max_bytes)
{
    *q = (cw__pushq_t){0};
    q->max_bytes = max_bytes;
    cw_backoff_init(&q->bo);
}

static void item_free(cw__push_item_t *it)
{
    free(it->query);
    free(it->body);
    *it = (cw__push_item_t){0};
}

/* Takes the oldest off (freed). */
static void pop(cw__pushq_t *q)
{
    cw__push_item_t *it = &q->v[q->head];
    q->bytes -= it->len;
    item_free(it);
    q->head = (q->head + 1) % q->cap;
    q->n--;
    /* The next profile is tried at once: the schedule was the old one's. */
    cw_backoff_success(&q->bo);
}

void cw__pushq_free(cw__pushq_t *q)
{
    while (q->n)
        pop(q);
    free(q->v);
    q->v = NULL;
    q->cap = 0;
}

/* Room for one more in the ring. 0 or CW_ENOMEM. */
static int grow(cw__pushq_t *q)
{
    if (q->n < q->cap) return 0;
    size_t cap = q->cap ? q->cap * 2 : 16;
    cw__push_item_t *v = malloc(cap * sizeof *v);
    if (!v) return CW_ENOMEM;
    for (size_t i = 0; i < q->n; i++)
        v[i] = q->v[(q->head + i) % q->cap];
    free(q->v);
    q->v = v;
    q->cap = cap;
    q->head = 0;
    return 0;
}

int cw__pushq_add(cw__pushq_t *q, cw__push_item_t *it)
{
    if (it->len > q->max_bytes) { /* it could never fit: it goes, not the others */
        q->dropped_full++;
        item_free(it);
        return 0;
    }
    while (q->n && q->bytes + it->len > q->max_bytes) {
        q->dropped_full++;
        pop(q);
    }
    if (grow(q)) {
        item_free(it);
        return CW_ENOMEM;
    }
    q->v[(q->head + q->n) % q->cap] = *it;
    q->n++;
    q->bytes += it->len;
    *it = (cw__push_item_t){0};
    return 0;
}

int64_t cw__pushq_next(const cw__pushq_t *q)
{
    return q->n ? q->bo.next_ns : INT64_MIN;
}

const cw__push_item_t *cw__pushq_due(const cw__pushq_t *q, int64_t now)
{
    if (!q->n || (q->bo.next_ns != INT64_MIN && now < q->bo.next_ns)) return NULL;
    return &q->v[q->head];
}

void cw__pushq_result(cw__pushq_t *q, cw__push_outcome_t r, int64_t now)
{
    if (!q->n) return;
    switch (r) {
    case CW__PUSH_OK:
        q->sent++;
        q->sent_bytes += q->v[q->head].len;
        pop(q);
        break;
    case CW__PUSH_REJECTED:
        q->rejected++;
        pop(q);
        break;
    case CW__PUSH_RETRY:
        q->retries++;
        cw_backoff_fail(&q->bo, now);
        break;
    }
}

cw__push_outcome_t cw__push_outcome(int rc, int status)
{
    if (rc != 0) return CW__PUSH_RETRY; /* no response: the store is down or unreachable */
    if (status >= 200 && status <= 299) return CW__PUSH_OK;
    /* A timeout, a rate limit, a server error: the store may take it later. */
    if (status == 408 || status == 429 || status >= 500) return CW__PUSH_RETRY;
    return CW__PUSH_REJECTED;
}
