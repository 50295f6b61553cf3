/* map.c - committed-memory maps: ranges, encoding, difference, and the
 * request channel to the core thread (see map.h). */
#include "commitwatch/map.h"

#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "commitwatch/event.h"
#include "commitwatch/platform.h"

#define MAP_FORMAT 2       /* the first byte of an encoded map */
#define MAP_FORMAT_V1 1    /* committed ranges only, no count */
#define MAP_FORMAT_PAGES 3 /* format 2, gaps and sizes counted in pages of 1 << PAGE_SHIFT */
#define PAGE_SHIFT 12

void cw_map_clear(cw_map_t *m)
{
    free(m->v);
    free(m->res);
    memset(m, 0, sizeof *m);
}

int cw_map_push(cw_map_t *m, uint64_t addr, uint64_t size, int64_t commit_ns, uint32_t stack_id)
{
    if (CW_RESERVE(m->v, m->cap, (size_t)m->n + 1) != 0) return CW_ENOMEM;
    m->v[m->n++] = (cw_map_range_t){addr, size, commit_ns, stack_id};
    return 0;
}

int cw_map_push_reserved(cw_map_t *m, uint64_t addr, uint64_t size, int64_t reserve_ns,
                         uint32_t stack_id)
{
    if (CW_RESERVE(m->res, m->res_cap, (size_t)m->nres + 1) != 0) return CW_ENOMEM;
    m->res[m->nres++] = (cw_map_range_t){addr, size, reserve_ns, stack_id};
    return 0;
}

static uint64_t sum_sizes(const cw_map_range_t *v, uint32_t n)
{
    uint64_t sum = 0;
    for (uint32_t i = 0; i < n; i++) sum += v[i].size;
    return sum;
}

uint64_t cw_map_bytes(const cw_map_t *m)
{
    return sum_sizes(m->v, m->n);
}

uint64_t cw_map_reserved_bytes(const cw_map_t *m)
{
    return sum_sizes(m->res, m->nres);
}

/* ---- encoding ------------------------------------------------------------- */

/* commit_ns relative to at_ns: 0 for before tracing, else zigzag + 1. */
static uint64_t age_code(int64_t commit_ns, int64_t at_ns)
{
    if (commit_ns == CW_TS_BEFORE) return 0;
    uint64_t d = (uint64_t)commit_ns - (uint64_t)at_ns; /* two's complement difference */
    uint64_t z = (d << 1) ^ (uint64_t)((int64_t)d >> 63);
    return z + 1; /* z = UINT64_MAX would need a difference of 2^63: not two valid times */
}

static int64_t age_decode(uint64_t code, int64_t at_ns)
{
    if (code == 0) return CW_TS_BEFORE;
    uint64_t z = code - 1;
    uint64_t d = (z >> 1) ^ (0 - (z & 1));
    return (int64_t)((uint64_t)at_ns + d);
}

/* Whether every range starts and ends on a 4 KiB page (what VirtualAlloc
 * and mmap commit): then gaps and sizes go as pages, a byte or two fewer
 * a range. */
static bool in_pages(const cw_map_range_t *v, uint32_t n)
{
    for (uint32_t i = 0; i < n; i++)
        if ((v[i].addr | v[i].size) & ((UINT64_C(1) << PAGE_SHIFT) - 1)) return false;
    return true;
}

static void put_ranges(cw_buf_t *b, const cw_map_range_t *v, uint32_t n, int64_t at_ns, int shift)
{
    uint64_t prev_end = 0;
    for (uint32_t i = 0; i < n; i++) {
        const cw_map_range_t *r = &v[i];
        cw_buf_varint(b, (r->addr - prev_end) >> shift); /* sorted, not overlapping: >= 0 */
        cw_buf_varint(b, r->size >> shift);
        cw_buf_varint(b, r->stack_id);
        cw_buf_varint(b, age_code(r->commit_ns, at_ns));
        prev_end = r->addr + r->size;
    }
}

int cw_map_encode(const cw_map_t *m, unsigned char **out, size_t *len)
{
    cw_buf_t b = {0};
    bool pages = in_pages(m->v, m->n) && in_pages(m->res, m->nres);
    unsigned char fmt = pages ? MAP_FORMAT_PAGES : MAP_FORMAT;
    int shift = pages ? PAGE_SHIFT : 0;
    cw_buf_put(&b, &fmt, 1);
    cw_buf_varint(&b, m->n);
    put_ranges(&b, m->v, m->n, m->at_ns, shift);
    put_ranges(&b, m->res, m->nres, m->at_ns, shift);
    if (b.failed) {
        free(b.p);
        return CW_ENOMEM;
    }
    *out = (unsigned char *)b.p;
    *len = b.n;
    return 0;
}

int cw_map_decode(const unsigned char *buf, size_t len, uint32_t proc_id, int64_t at_ns,
                  cw_map_t *m, cw_diag_t *d)
{
    size_t pos = 1;
    uint64_t prev_end = 0, ncommitted = UINT64_MAX; /* format 1: all */
    cw_map_clear(m);
    m->proc_id = proc_id;
    m->at_ns = at_ns;
    if (len < 1 || (buf[0] != MAP_FORMAT && buf[0] != MAP_FORMAT_V1 && buf[0] != MAP_FORMAT_PAGES))
        return cw_diag_set(d, CW_EPARSE, "stored map of process %u at %lld ns: unknown format %d",
                           proc_id, (long long)at_ns, len ? buf[0] : -1);
    int shift = buf[0] == MAP_FORMAT_PAGES ? PAGE_SHIFT : 0;
    if (buf[0] != MAP_FORMAT_V1 && cw_varint_read(buf, len, &pos, &ncommitted) != 0)
        return cw_diag_set(d, CW_EPARSE,
                           "stored map of process %u at %lld ns: no count of committed ranges",
                           proc_id, (long long)at_ns);
    /* Ranges take 4 bytes at least, 8 - 15 usually: room for most maps at
     * once (growing a 100,000-range array by doubling copied it 14 times). */
    if (CW_RESERVE(m->v, m->cap, len / 8 + 1) != 0) return CW_ENOMEM;
    while (pos < len) {
        bool reserved = m->n == ncommitted;
        if (reserved && m->nres == 0) prev_end = 0; /* the reserved list starts */
        uint64_t gap, size, stack, age;
        bool read = !cw_varint_read(buf, len, &pos, &gap) &&
                    !cw_varint_read(buf, len, &pos, &size) &&
                    !cw_varint_read(buf, len, &pos, &stack) &&
                    !cw_varint_read(buf, len, &pos, &age) && gap <= UINT64_MAX >> shift &&
                    size <= UINT64_MAX >> shift;
        if (read) { /* format 3: pages */
            gap <<= shift;
            size <<= shift;
        }
        if (!read || stack > UINT32_MAX || size == 0 || prev_end + gap < prev_end ||
            prev_end + gap + size < prev_end + gap) {
            uint32_t bad = m->n;
            cw_map_clear(m);
            return cw_diag_set(d, CW_EPARSE,
                               "stored map of process %u at %lld ns: range %u is cut short or "
                               "out of range (byte %zu)",
                               proc_id, (long long)at_ns, bad, pos);
        }
        int64_t ts = age_decode(age, at_ns);
        if ((reserved ? cw_map_push_reserved(m, prev_end + gap, size, ts, (uint32_t)stack)
                      : cw_map_push(m, prev_end + gap, size, ts, (uint32_t)stack)) != 0) {
            cw_map_clear(m);
            return CW_ENOMEM;
        }
        m->proc_id = proc_id;
        m->at_ns = at_ns;
        prev_end += gap + size;
    }
    if (ncommitted != UINT64_MAX && m->n != ncommitted) {
        uint32_t got = m->n;
        cw_map_clear(m);
        return cw_diag_set(d, CW_EPARSE,
                           "stored map of process %u at %lld ns: %u committed ranges of %llu",
                           proc_id, (long long)at_ns, got, (unsigned long long)ncommitted);
    }
    return 0;
}

/* ---- difference ------------------------------------------------------------ */

static int diff_push(cw_map_diff_t *d, const cw_map_range_t *r, uint64_t lo, uint64_t hi,
                     cw_map_change_t c)
{
    if (hi <= lo) return 0;
    if (CW_RESERVE(d->v, d->cap, (size_t)d->n + 1) != 0) return CW_ENOMEM;
    d->v[d->n].r = *r;
    d->v[d->n].r.addr = lo;
    d->v[d->n].r.size = hi - lo;
    d->v[d->n].change = c;
    d->n++;
    d->bytes[c] += hi - lo;
    return 0;
}

static bool same_commit(const cw_map_range_t *x, const cw_map_range_t *y)
{
    return x->commit_ns == y->commit_ns && x->stack_id == y->stack_id;
}

/* The parts of r (from one map) that the other map `o` holds from the
 * same commit event are `both`, the rest `alone`; j walks o (both sorted
 * by address, not overlapping). */
static int split_by(const cw_map_range_t *r, const cw_map_t *o, uint32_t *j, cw_map_change_t both,
                    cw_map_change_t alone, cw_map_diff_t *out, bool emit_both)
{
    uint64_t cur = r->addr, end = r->addr + r->size;
    while (*j < o->n && o->v[*j].addr + o->v[*j].size <= cur) (*j)++;
    for (uint32_t k = *j; k < o->n && o->v[k].addr < end; k++) {
        const cw_map_range_t *x = &o->v[k];
        if (!same_commit(r, x)) continue;
        uint64_t lo = x->addr > cur ? x->addr : cur;
        uint64_t hi = x->addr + x->size < end ? x->addr + x->size : end;
        if (hi <= lo) continue;
        if (diff_push(out, r, cur, lo, alone) != 0) return CW_ENOMEM;
        if (emit_both && diff_push(out, r, lo, hi, both) != 0) return CW_ENOMEM;
        cur = hi;
    }
    return diff_push(out, r, cur, end, alone);
}

static int by_addr(const void *a, const void *b)
{
    const cw_map_diff_range_t *x = a, *y = b;
    if (x->r.addr != y->r.addr) return x->r.addr < y->r.addr ? -1 : 1;
    return (int)x->change - (int)y->change;
}

int cw_map_diff(const cw_map_t *a, const cw_map_t *b, cw_map_diff_t *out)
{
    uint32_t j = 0;
    memset(out, 0, sizeof *out);
    for (uint32_t i = 0; i < b->n; i++)
        if (split_by(&b->v[i], a, &j, CW_MAP_KEPT, CW_MAP_NEW, out, true) != 0) goto oom;
    j = 0;
    for (uint32_t i = 0; i < a->n; i++)
        if (split_by(&a->v[i], b, &j, CW_MAP_KEPT, CW_MAP_FREED, out, false) != 0) goto oom;
    qsort(out->v, out->n, sizeof *out->v, by_addr);
    return 0;
oom:
    cw_map_diff_clear(out);
    return CW_ENOMEM;
}

void cw_map_diff_clear(cw_map_diff_t *d)
{
    free(d->v);
    memset(d, 0, sizeof *d);
}

const char *cw_map_change_name(cw_map_change_t c)
{
    static const char *const names[] = {"new", "freed", "kept"};
    return (unsigned)c < 3 ? names[c] : "?";
}

/* ---- the request channel ------------------------------------------------------ */

/* One request: lives on the asker's stack; linked in the queue while
 * queued. state moves QUEUED -> SERVING -> DONE under the channel's lock. */
enum { RQ_QUEUED, RQ_SERVING, RQ_DONE };
typedef struct req {
    struct req *next;
    uint32_t proc_id;
    int state;
    int rc;
    cw_map_t *m;
} req_t;

struct cw_mapreq {
    cw_mutex_t *mu;
    cw_cond_t *done; /* broadcast when a request is served */
    req_t *head;     /* queued requests, newest first */
    atomic_bool pending;
    bool closed;
};

int cw_mapreq_create(cw_mapreq_t **out)
{
    cw_mapreq_t *q = calloc(1, sizeof *q);
    if (!q) return CW_ENOMEM;
    if (cw_mutex_create(&q->mu) != 0 || cw_cond_create(&q->done) != 0) {
        cw_mapreq_destroy(q);
        return CW_ENOMEM;
    }
    atomic_init(&q->pending, false);
    *out = q;
    return 0;
}

/* A teardown list, alike to the pipeline's in form only. */
void cw_mapreq_destroy(cw_mapreq_t *q)
{
    if (!q) return;
    cw_cond_destroy(q->done);
    cw_mutex_destroy(q->mu);
    free(q);
}

int cw_mapreq_ask(cw_mapreq_t *q, uint32_t proc_id, int64_t timeout_ns, cw_map_t *m)
{
    req_t r = {NULL, proc_id, RQ_QUEUED, 0, m};
    int64_t deadline = cw_plat_mono_ns() + timeout_ns;
    cw_mutex_lock(q->mu);
    if (q->closed) {
        cw_mutex_unlock(q->mu);
        return CW_ESTOPPED;
    }
    r.next = q->head;
    q->head = &r;
    atomic_store(&q->pending, true);
    while (r.state != RQ_DONE) {
        int64_t left = deadline - cw_plat_mono_ns();
        if (left <= 0 && r.state == RQ_QUEUED) { /* withdraw it */
            for (req_t **p = &q->head; *p; p = &(*p)->next)
                if (*p == &r) {
                    *p = r.next;
                    break;
                }
            r.state = RQ_DONE;
            r.rc = CW_ESTOPPED;
            break;
        }
        /* Being served: the core thread copies the ranges, then signals. */
        cw_cond_timedwait(q->done, q->mu, left > 0 ? left : 10000000);
    }
    cw_mutex_unlock(q->mu);
    return r.rc;
}

bool cw_mapreq_pending(cw_mapreq_t *q)
{
    return atomic_load_explicit(&q->pending, memory_order_relaxed);
}

void cw_mapreq_serve(cw_mapreq_t *q, cw_map_fill_fn fill, void *ctx)
{
    cw_mutex_lock(q->mu);
    while (q->head) {
        req_t *r = q->head;
        q->head = r->next;
        r->state = RQ_SERVING;
        /* The asker waits for SERVING requests, so r and r->m stay valid
         * without the lock; the tracker is this thread's. */
        cw_mutex_unlock(q->mu);
        cw_map_clear(r->m);
        int rc = fill(ctx, r->proc_id, r->m);
        cw_mutex_lock(q->mu);
        r->rc = rc;
        r->state = RQ_DONE; /* r is the asker's again: not touched after this */
        cw_cond_broadcast(q->done);
    }
    atomic_store(&q->pending, false);
    cw_cond_broadcast(q->done);
    cw_mutex_unlock(q->mu);
}

void cw_mapreq_close(cw_mapreq_t *q)
{
    cw_mutex_lock(q->mu);
    q->closed = true;
    for (req_t *r = q->head; r; r = r->next) {
        r->state = RQ_DONE;
        r->rc = CW_ESTOPPED;
    }
    q->head = NULL;
    atomic_store(&q->pending, false);
    cw_cond_broadcast(q->done);
    cw_mutex_unlock(q->mu);
}
