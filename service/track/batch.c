/* batch.c - building and freeing cw_batch_t (one closed bucket's rows). */
#include "commitwatch/batch.h"

#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "commitwatch/common.h"
#include "commitwatch/error.h"

/* Grows a CW__VEC to hold one more element. 0 or CW_ENOMEM. */
#define VEC_PUSH(vec, elem)                                                                        \
    (CW_RESERVE((vec).v, (vec).cap, (vec).n + 1u) ? CW_ENOMEM : ((vec).v[(vec).n++] = (elem), 0))

int cw_batch_create(int64_t bucket_ns, int64_t width_ns, cw_batch_t **out)
{
    cw_batch_t *b = calloc(1, sizeof *b);
    if (!b) return CW_ENOMEM;
    b->bucket_ns = bucket_ns;
    b->width_ns = width_ns;
    *out = b;
    return 0;
}

void cw_batch_free(cw_batch_t *b)
{
    if (!b) return;
    for (uint32_t i = 0; i < b->procs.n; i++) {
        free(b->procs.v[i].name);
        free(b->procs.v[i].cmdline);
    }
    for (uint32_t i = 0; i < b->frames.n; i++)
        free(b->frames.v[i].text);
    for (uint32_t i = 0; i < b->stacks.n; i++) {
        free(b->stacks.v[i].frames);
        free(b->stacks.v[i].tag);
    }
    free(b->commits.v);
    free(b->releases.v);
    free(b->activity.v);
    free(b->procs.v);
    free(b->frames.v);
    free(b->stacks.v);
    for (uint32_t i = 0; i < b->maps.n; i++) free(b->maps.v[i].blob);
    free(b->folded.v);
    free(b->maps.v);
    free(b->corrections.v);
    for (uint32_t i = 0; i < b->riders.n; i++) cw_batch_free(b->riders.v[i]);
    free(b->riders.v);
    free(b);
}

int cw_batch_add_rider(cw_batch_t *b, cw_batch_t *r)
{
    if (!r || r == b || r->layer != 1 || r->riders.n) return CW_EINVAL;
    return VEC_PUSH(b->riders, r);
}

/* The row kinds without strings or arrays are copied in as they are. One
 * definition writes each kind's typed function (cw_batch_add_commit, _release,
 * _activity, _map, _correction, _folded), so every call still has the
 * compiler's check of the row's type. */
#define ADD_PLAIN_ROW(kind, vec)                                                                   \
    int cw_batch_add_##kind(cw_batch_t *b, const cw_row_##kind##_t *r)                             \
    {                                                                                              \
        return VEC_PUSH(b->vec, *r);                                                               \
    }
ADD_PLAIN_ROW(commit, commits)
ADD_PLAIN_ROW(release, releases)
ADD_PLAIN_ROW(activity, activity)
ADD_PLAIN_ROW(map, maps)
ADD_PLAIN_ROW(correction, corrections)
ADD_PLAIN_ROW(folded, folded)
#undef ADD_PLAIN_ROW

int cw_batch_add_proc(cw_batch_t *b, uint32_t id, uint32_t pid, int64_t start_ns, int64_t exit_ns,
                      const char *name, const char *cmdline)
{
    cw_row_proc_t r = {id, pid, start_ns, exit_ns, cw_strdup(name), cw_strdup(cmdline), false};
    if ((name && !r.name) || (cmdline && !r.cmdline) || VEC_PUSH(b->procs, r) != 0) {
        free(r.name);
        free(r.cmdline);
        return CW_ENOMEM;
    }
    return 0;
}

int cw_batch_add_frame(cw_batch_t *b, uint32_t id, const char *text)
{
    cw_row_frame_t r = {id, strdup(text)};
    if (!r.text || VEC_PUSH(b->frames, r) != 0) {
        free(r.text);
        return CW_ENOMEM;
    }
    return 0;
}

int cw_batch_add_stack(cw_batch_t *b, uint32_t id, const uint32_t *frames, uint32_t n,
                       const char *tag)
{
    cw_row_stack_t r = {id, n, malloc((n ? n : 1) * sizeof(uint32_t)), tag ? strdup(tag) : NULL};
    if (!r.frames || (tag && !r.tag) || VEC_PUSH(b->stacks, r) != 0) {
        free(r.frames);
        free(r.tag);
        return CW_ENOMEM;
    }
    if (n) memcpy(r.frames, frames, n * sizeof(uint32_t));
    return 0;
}

/* ---- key order ------------------------------------------------------------ */

/* Commit and release rows share their key (proc, stack, a). */
static int cmp_key(uint32_t proc1, uint32_t stack1, int64_t a1, uint32_t proc2, uint32_t stack2,
                   int64_t a2)
{
    if (proc1 != proc2) return proc1 < proc2 ? -1 : 1;
    if (stack1 != stack2) return stack1 < stack2 ? -1 : 1;
    return (a1 > a2) - (a1 < a2);
}

static int cmp_commit(const void *x, const void *y)
{
    const cw_row_commit_t *p = x, *q = y;
    return cmp_key(p->proc, p->stack, p->a, q->proc, q->stack, q->a);
}

static int cmp_release(const void *x, const void *y)
{
    const cw_row_release_t *p = x, *q = y;
    return cmp_key(p->proc, p->stack, p->a, q->proc, q->stack, q->a);
}

static int cmp_activity(const void *x, const void *y)
{
    const cw_row_activity_t *p = x, *q = y;
    return (p->proc > q->proc) - (p->proc < q->proc);
}

_Static_assert(offsetof(cw_row_commit_t, proc) == 0 && offsetof(cw_row_release_t, proc) == 0 &&
                   offsetof(cw_row_activity_t, proc) == 0,
               "sort_rows reads a row's proc at its start");
_Static_assert(sizeof(cw_row_release_t) <= 64, "sort_rows moves rows of at most 64 bytes");

/* Sorts v (n rows of size bytes each, at most 64; each starting with its
 * uint32_t proc) by cmp: a stable radix sort on proc (three passes of 11
 * bits), then each run of one proc (a few stacks) by cmp, insertion sort
 * for short runs. A bucket's rows are thousands of a few per process, in
 * the aggregator's order: this takes about a third of qsort's time there.
 * Falls back to qsort when the scratch array cannot be had. */
static void sort_rows(void *v, uint32_t n, size_t size, int (*cmp)(const void *, const void *))
{
    enum { BITS = 11, BINS = 1 << BITS };
    unsigned char *rows = v, *tmp, tmp1[64];
    if (n < 2) return;
    uint32_t i = 1;
    while (i < n && cmp(rows + (size_t)(i - 1) * size, rows + (size_t)i * size) <= 0)
        i++;
    if (i == n) return; /* sorted already (the aggregator's batches) */
    if (n < 64 || !(tmp = malloc((size_t)n * size))) {
        qsort(v, n, size, cmp);
        return;
    }
    uint32_t count[BINS];
    unsigned char *src = rows, *dst = tmp;
    for (unsigned shift = 0; shift < 32; shift += BITS) {
        memset(count, 0, sizeof count);
        uint32_t proc;
        for (uint32_t r = 0; r < n; r++) {
            memcpy(&proc, src + (size_t)r * size, sizeof proc);
            count[(proc >> shift) & (BINS - 1)]++;
        }
        if (count[(proc >> shift) & (BINS - 1)] == n) continue; /* one bin: nothing moves */
        for (uint32_t b = 0, at = 0; b < BINS; b++) {
            uint32_t c = count[b];
            count[b] = at;
            at += c;
        }
        for (uint32_t r = 0; r < n; r++) {
            memcpy(&proc, src + (size_t)r * size, sizeof proc);
            memcpy(dst + (size_t)count[(proc >> shift) & (BINS - 1)]++ * size,
                   src + (size_t)r * size, size);
        }
        unsigned char *t = src;
        src = dst;
        dst = t;
    }
    if (src != rows) memcpy(rows, src, (size_t)n * size);
    free(tmp);
    i = 0;
    for (uint32_t j; i < n; i = j) {
        uint32_t p, q;
        memcpy(&p, rows + (size_t)i * size, sizeof p);
        for (j = i + 1; j < n && (memcpy(&q, rows + (size_t)j * size, sizeof q), q == p); j++)
            ;
        if (j - i > 16) {
            qsort(rows + (size_t)i * size, j - i, size, cmp);
            continue;
        }
        for (uint32_t k = i + 1; k < j; k++) {
            memcpy(tmp1, rows + (size_t)k * size, size);
            uint32_t m = k;
            for (; m > i && cmp(rows + (size_t)(m - 1) * size, tmp1) > 0; m--)
                memcpy(rows + (size_t)m * size, rows + (size_t)(m - 1) * size, size);
            memcpy(rows + (size_t)m * size, tmp1, size);
        }
    }
}

/* Sorts v (n rows of size bytes each; NULL when n is 0) by cmp and sums
 * each run of rows of one key into its first with add(into, from): the
 * merge of the commit and the release rows, which differ only in what
 * they sum. Returns the rows left. */
static uint32_t sort_sum(void *v, uint32_t n, size_t size, int (*cmp)(const void *, const void *),
                         void (*add)(void *into, const void *from))
{
    unsigned char *rows = v;
    uint32_t o = 0;
    sort_rows(v, n, size, cmp);
    for (uint32_t i = 0; i < n; i++) {
        unsigned char *row = rows + (size_t)i * size;
        if (o && cmp(rows + (size_t)(o - 1) * size, row) == 0)
            add(rows + (size_t)(o - 1) * size, row);
        else if (o++ != i)
            memcpy(rows + (size_t)(o - 1) * size, row, size);
    }
    return o;
}

static void add_commit(void *into, const void *from)
{
    cw_row_commit_t *t = into;
    const cw_row_commit_t *f = from;
    t->bytes += f->bytes;
    t->events += f->events;
}

static void add_release(void *into, const void *from)
{
    cw_row_release_t *t = into;
    const cw_row_release_t *f = from;
    t->bytes += f->bytes;
    t->pieces += f->pieces;
    t->closed += f->closed;
}

uint32_t cw_batch_merge_commits(cw_row_commit_t *v, uint32_t n)
{
    return sort_sum(v, n, sizeof *v, cmp_commit, add_commit);
}

uint32_t cw_batch_merge_releases(cw_row_release_t *v, uint32_t n)
{
    return sort_sum(v, n, sizeof *v, cmp_release, add_release);
}

void cw_batch_sort_activity(cw_row_activity_t *v, uint32_t n)
{
    sort_rows(v, n, sizeof *v, cmp_activity);
}

/* ---- bytes (the store's pending-batch journal) ----------------------------- */

/* Little-endian, fixed widths; a string is its length (u32) and bytes, a
 * NULL string the length NO_STR. The layout: bucket, width, the three
 * counters, the eight row counts, then each kind's rows in that order. */
#define NO_STR UINT32_MAX

/* The encoding's exact size, so it is written with one reservation and
 * plain stores (the core thread encodes every batch it queues). */
/* The fixed fields of each row kind in the order they are encoded,
 * X(type, field) with type u32, u64 or i64: cw_batch_encode and
 * cw_batch_decode are written from the same lists, so they cannot
 * disagree. Strings, frame lists and blobs follow a row's fixed fields
 * (procs, stacks, maps), written out in both. */
#define ROW_COMMIT(X) X(u32, proc) X(u32, stack) X(i64, a) X(u64, bytes) X(u64, events)
#define ROW_RELEASE(X)                                                                             \
    X(u32, proc) X(u32, stack) X(i64, a) X(u64, bytes) X(u64, pieces) X(u64, closed)
#define ROW_ACTIVITY(X)                                                                            \
    X(u32, proc) X(u64, events) X(i64, delta) X(i64, relpeak) X(i64, relpeak_ns)
#define ROW_PROC(X) X(u32, id) X(u32, pid) X(i64, start_ns) X(i64, exit_ns)
#define ROW_FOLDED(X) X(u32, group) X(u32, pid) X(i64, start_ns) X(i64, exit_ns) X(u64, bytes)
#define ROW_MAP(X) X(u32, proc) X(u32, nranges) X(i64, ts_ns) X(u64, bytes)
#define ROW_CORRECTION(X) X(u32, proc) X(i64, ts_ns) X(u64, committed) X(u64, decommitted)
#define PUT_FIELD(type, field) p = put_##type(p, r->field);
#define GET_FIELD(type, field) c.field = get_##type(&r);
/* The row kinds of fixed fields only, written and read whole: each row of
 * b's vector vec (cw_batch_encode, p the write position), and count rows
 * read and added (cw_batch_decode, r the cursor, err its result). */
#define PUT_ROWS(kind, vec, ROW)                                                                   \
    for (uint32_t i = 0; i < b->vec.n; i++) {                                                      \
        const cw_row_##kind##_t *r = &b->vec.v[i];                                                 \
        ROW(PUT_FIELD)                                                                             \
    }
#define GET_ROWS(kind, count, ROW)                                                                 \
    for (uint32_t i = 0; i < (count) && !err; i++) {                                               \
        cw_row_##kind##_t c;                                                                       \
        ROW(GET_FIELD)                                                                             \
        err = cw_batch_add_##kind(b, &c);                                                          \
    }

static size_t str_size(const char *s)
{
    return 4 + (s ? strlen(s) : 0);
}

static size_t encoded_size(const cw_batch_t *b)
{
    size_t n = 5 * 8 + 8 * 4;
    n += (size_t)b->commits.n * 32 + (size_t)b->releases.n * 40 + (size_t)b->activity.n * 36;
    for (uint32_t i = 0; i < b->procs.n; i++)
        n += 28 + str_size(b->procs.v[i].name) + str_size(b->procs.v[i].cmdline);
    for (uint32_t i = 0; i < b->frames.n; i++) n += 4 + str_size(b->frames.v[i].text);
    for (uint32_t i = 0; i < b->stacks.n; i++)
        n += 8 + (size_t)b->stacks.v[i].nframes * 4 + str_size(b->stacks.v[i].tag);
    n += (size_t)b->folded.n * 32;
    for (uint32_t i = 0; i < b->maps.n; i++) n += 28 + b->maps.v[i].len;
    if (b->corrections.n) n += 4 + (size_t)b->corrections.n * 28;
    return n;
}

static unsigned char *put_u32(unsigned char *p, uint32_t v)
{
    cw_put_le(p, v, 4);
    return p + 4;
}

static unsigned char *put_u64(unsigned char *p, uint64_t v)
{
    cw_put_le(p, v, 8);
    return p + 8;
}

static unsigned char *put_i64(unsigned char *p, int64_t v)
{
    return put_u64(p, (uint64_t)v);
}

static unsigned char *put_str(unsigned char *p, const char *s)
{
    size_t n = s ? strlen(s) : 0;
    p = put_u32(p, s ? (uint32_t)n : NO_STR);
    if (n) memcpy(p, s, n);
    return p + n;
}

int cw_batch_encode(const cw_batch_t *b, cw_buf_t *o)
{
    /* A string or map of 4 GiB or more cannot be written (its length is a
     * u32, and NO_STR is taken). */
    for (uint32_t i = 0; i < b->maps.n; i++)
        if (b->maps.v[i].len >= NO_STR) return CW_ENOMEM;
    size_t need = encoded_size(b);
    if (o->failed || need > SIZE_MAX - o->n - 1 || CW_RESERVE(o->p, o->cap, o->n + need + 1)) {
        o->failed = true;
        return CW_ENOMEM;
    }
    unsigned char *p = (unsigned char *)o->p + o->n, *start = p;
    p = put_i64(p, b->bucket_ns);
    p = put_i64(p, b->width_ns);
    p = put_u64(p, b->events_total);
    p = put_u64(p, b->events_lost);
    p = put_i64(p, b->drift_bytes);
    p = put_u32(p, b->commits.n);
    p = put_u32(p, b->releases.n);
    p = put_u32(p, b->activity.n);
    p = put_u32(p, b->procs.n);
    p = put_u32(p, b->frames.n);
    p = put_u32(p, b->stacks.n);
    p = put_u32(p, b->folded.n);
    p = put_u32(p, b->maps.n);
    PUT_ROWS(commit, commits, ROW_COMMIT)
    PUT_ROWS(release, releases, ROW_RELEASE)
    PUT_ROWS(activity, activity, ROW_ACTIVITY)
    for (uint32_t i = 0; i < b->procs.n; i++) {
        const cw_row_proc_t *r = &b->procs.v[i];
        ROW_PROC(PUT_FIELD)
        p = put_u32(p, r->tracking_ended ? 1 : 0);
        p = put_str(p, r->name);
        p = put_str(p, r->cmdline);
    }
    for (uint32_t i = 0; i < b->frames.n; i++) {
        p = put_u32(p, b->frames.v[i].id);
        p = put_str(p, b->frames.v[i].text);
    }
    for (uint32_t i = 0; i < b->stacks.n; i++) {
        const cw_row_stack_t *r = &b->stacks.v[i];
        p = put_u32(p, r->id);
        p = put_u32(p, r->nframes);
        for (uint32_t k = 0; k < r->nframes; k++) p = put_u32(p, r->frames[k]);
        p = put_str(p, r->tag);
    }
    PUT_ROWS(folded, folded, ROW_FOLDED)
    for (uint32_t i = 0; i < b->maps.n; i++) {
        const cw_row_map_t *r = &b->maps.v[i];
        ROW_MAP(PUT_FIELD)
        p = put_u32(p, (uint32_t)r->len);
        if (r->len) memcpy(p, r->blob, r->len);
        p += r->len;
    }
    /* Corrections last, and only when there are some: a record written
     * before they existed decodes as a batch without any. */
    if (b->corrections.n) {
        p = put_u32(p, b->corrections.n);
        PUT_ROWS(correction, corrections, ROW_CORRECTION)
    }
    o->n += (size_t)(p - start);
    o->p[o->n] = '\0';
    return 0;
}

/* A cursor over the bytes; any read past the end sets bad (and gives 0). */
typedef struct rd {
    const unsigned char *p;
    size_t n;
    bool bad;
} rd_t;

static const unsigned char *take(rd_t *r, size_t n)
{
    if (r->bad || n > r->n) {
        r->bad = true;
        return NULL;
    }
    const unsigned char *p = r->p;
    r->p += n;
    r->n -= n;
    return p;
}

static uint32_t get_u32(rd_t *r)
{
    const unsigned char *p = take(r, 4);
    return p ? (uint32_t)cw_get_le(p, 4) : 0;
}

static uint64_t get_u64(rd_t *r)
{
    const unsigned char *p = take(r, 8);
    return p ? cw_get_le(p, 8) : 0;
}

static int64_t get_i64(rd_t *r)
{
    return (int64_t)get_u64(r);
}

/* A malloc'd copy of the next string (*s NULL for a NULL string). 0,
 * CW_EPARSE (cut, or a NUL inside) or CW_ENOMEM. */
static int get_str(rd_t *r, char **s)
{
    uint32_t n = get_u32(r);
    *s = NULL;
    if (n == NO_STR) return r->bad ? CW_EPARSE : 0;
    const unsigned char *p = take(r, n);
    if (!p || memchr(p, '\0', n)) return CW_EPARSE;
    return (*s = cw_strndup((const char *)p, n)) ? 0 : CW_ENOMEM;
}

/* A row count that the bytes left can hold (each row at least `least`
 * bytes): a corrupt count fails here, not in a huge allocation. */
static bool count_fits(const rd_t *r, uint32_t n, size_t least)
{
    return !r->bad && (uint64_t)n <= r->n / least;
}

int cw_batch_decode(const void *p, size_t n, cw_batch_t **out)
{
    rd_t r = {p, n, false};
    cw_batch_t *b;
    uint32_t cnt[8];
    int err = 0;
    *out = NULL;
    if (cw_batch_create(0, 0, &b)) return CW_ENOMEM;
    b->bucket_ns = get_i64(&r);
    b->width_ns = get_i64(&r);
    b->events_total = get_u64(&r);
    b->events_lost = get_u64(&r);
    b->drift_bytes = get_i64(&r);
    for (int i = 0; i < 8; i++) cnt[i] = get_u32(&r);
    /* The smallest encoding of a row of each kind, in the order above. */
    static const size_t least[8] = {32, 40, 36, 36, 8, 12, 32, 28};
    size_t need = 0;
    for (int i = 0; i < 8; i++) {
        if (!count_fits(&r, cnt[i], least[i])) goto bad;
        need += (size_t)cnt[i] * least[i];
    }
    if (need > r.n) goto bad;
    GET_ROWS(commit, cnt[0], ROW_COMMIT)
    GET_ROWS(release, cnt[1], ROW_RELEASE)
    GET_ROWS(activity, cnt[2], ROW_ACTIVITY)
    for (uint32_t i = 0; i < cnt[3] && !err; i++) {
        cw_row_proc_t c = {0};
        ROW_PROC(GET_FIELD)
        uint32_t ended = get_u32(&r);
        if (ended > 1) goto bad;
        c.tracking_ended = ended == 1;
        if ((err = get_str(&r, &c.name)) == 0 && (err = get_str(&r, &c.cmdline)) == 0)
            err = VEC_PUSH(b->procs, c);
        if (err) {
            free(c.name);
            free(c.cmdline);
        }
    }
    for (uint32_t i = 0; i < cnt[4] && !err; i++) {
        cw_row_frame_t c = {0};
        c.id = get_u32(&r);
        if ((err = get_str(&r, &c.text)) == 0 && !c.text) err = CW_EPARSE;
        if (err || (err = VEC_PUSH(b->frames, c)) != 0) free(c.text);
    }
    for (uint32_t i = 0; i < cnt[5] && !err; i++) {
        cw_row_stack_t c = {0};
        c.id = get_u32(&r);
        c.nframes = get_u32(&r);
        if (!count_fits(&r, c.nframes, 4)) goto bad;
        if (!(c.frames = malloc((c.nframes ? c.nframes : 1) * sizeof *c.frames))) {
            err = CW_ENOMEM;
            break;
        }
        for (uint32_t k = 0; k < c.nframes; k++) c.frames[k] = get_u32(&r);
        if ((err = get_str(&r, &c.tag)) == 0 && !c.tag) err = CW_EPARSE;
        if (err || (err = VEC_PUSH(b->stacks, c)) != 0) {
            free(c.frames);
            free(c.tag);
        }
    }
    GET_ROWS(folded, cnt[6], ROW_FOLDED)
    for (uint32_t i = 0; i < cnt[7] && !err; i++) {
        cw_row_map_t c = {0};
        ROW_MAP(GET_FIELD)
        c.len = get_u32(&r);
        const unsigned char *blob = take(&r, c.len);
        if (!blob) goto bad;
        if (!(c.blob = malloc(c.len ? c.len : 1))) {
            err = CW_ENOMEM;
            break;
        }
        if (c.len) memcpy(c.blob, blob, c.len);
        if ((err = cw_batch_add_map(b, &c)) != 0) free(c.blob);
    }
    if (!err && !r.bad && r.n) { /* corrections (see cw_batch_encode) */
        uint32_t nc = get_u32(&r);
        if (nc == 0 || !count_fits(&r, nc, 28)) goto bad;
        GET_ROWS(correction, nc, ROW_CORRECTION)
    }
    if (err == CW_EPARSE) goto bad;
    if (!err && (r.bad || r.n)) goto bad;
    if (err) {
        cw_batch_free(b);
        return err;
    }
    *out = b;
    return 0;
bad:
    cw_batch_free(b);
    return CW_EPARSE;
}
