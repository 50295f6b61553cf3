/* notify_limit.c - what keeps a storm of series from flooding a receiver:
 * a token bucket per channel (alert_rate_limit a minute) and the repeat
 * interval per fingerprint (alert_repeat_interval), as Alertmanager's
 * repeat_interval does for its receivers. */
#include <stdlib.h>
#include <string.h>

#include "notify/notify_internal.h"

void cw__bucket_init(cw__bucket_t *b, uint64_t per_min, int64_t now_ns)
{
    b->per_min = per_min;
    b->tokens = (double)per_min;
    b->last_ns = now_ns;
}

bool cw__bucket_take(cw__bucket_t *b, int64_t now_ns)
{
    if (!b->per_min) return true;
    if (now_ns > b->last_ns) {
        b->tokens += (double)(now_ns - b->last_ns) * (double)b->per_min / 60e9;
        if (b->tokens > (double)b->per_min) b->tokens = (double)b->per_min;
        b->last_ns = now_ns;
    }
    if (b->tokens < 1.0) return false;
    b->tokens -= 1.0;
    return true;
}

static uint64_t key_of(const cw_alert_notice_t *a)
{
    uint64_t k = strtoull(a->fingerprint, NULL, 16);
    return k == UINT64_MAX ? k : k + 1; /* 0 marks an empty slot */
}

/* The slot of k, or the empty slot where it would go (linear probing). */
static size_t slot(const cw__repeat_t *r, uint64_t k)
{
    size_t i = (size_t)(k * 0x9E3779B97F4A7C15ULL) & (r->cap - 1);
    while (r->key[i] && r->key[i] != k)
        i = (i + 1) & (r->cap - 1);
    return i;
}

static bool grow(cw__repeat_t *r)
{
    size_t cap = r->cap ? r->cap * 2 : 64;
    cw__repeat_t n = {calloc(cap, sizeof *n.key), calloc(cap, sizeof *n.last_ns), cap, 0};
    if (!n.key || !n.last_ns) {
        cw__repeat_free(&n);
        return false;
    }
    for (size_t i = 0; i < r->cap; i++)
        if (r->key[i]) {
            size_t j = slot(&n, r->key[i]);
            n.key[j] = r->key[i];
            n.last_ns[j] = r->last_ns[i];
            n.n++;
        }
    cw__repeat_free(r);
    *r = n;
    return true;
}

/* Removes slot i, moving later entries of its cluster back into place. */
static void erase(cw__repeat_t *r, size_t i)
{
    r->key[i] = 0;
    r->n--;
    for (size_t j = (i + 1) & (r->cap - 1); r->key[j]; j = (j + 1) & (r->cap - 1)) {
        uint64_t k = r->key[j];
        int64_t t = r->last_ns[j];
        r->key[j] = 0;
        size_t s = slot(r, k);
        r->key[s] = k;
        r->last_ns[s] = t;
    }
}

bool cw__repeat_due(cw__repeat_t *r, const cw_alert_notice_t *a, int64_t repeat_ns)
{
    uint64_t k = key_of(a);
    if ((r->n + 1) * 4 > r->cap * 3 && !grow(r)) return true;
    size_t i = slot(r, k);
    if (a->resolved) {
        if (r->key[i]) erase(r, i);
        return true;
    }
    if (r->key[i] && a->resend && a->ts_ns - r->last_ns[i] < repeat_ns) return false;
    if (!r->key[i]) {
        r->key[i] = k;
        r->n++;
    }
    r->last_ns[i] = a->ts_ns;
    return true;
}

void cw__repeat_free(cw__repeat_t *r)
{
    free(r->key);
    free(r->last_ns);
    memset(r, 0, sizeof *r);
}
