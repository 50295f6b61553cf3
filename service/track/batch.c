/* batch.c - building and freeing cw_batch_t (one closed bucket's rows). */
#include "commitwatch/batch.h"

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
    free(b);
}

int cw_batch_add_commit(cw_batch_t *b, const cw_row_commit_t *r)
{
    return VEC_PUSH(b->commits, *r);
}

int cw_batch_add_release(cw_batch_t *b, const cw_row_release_t *r)
{
    return VEC_PUSH(b->releases, *r);
}

int cw_batch_add_activity(cw_batch_t *b, const cw_row_activity_t *r)
{
    return VEC_PUSH(b->activity, *r);
}

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

int cw_batch_add_map(cw_batch_t *b, const cw_row_map_t *r)
{
    return VEC_PUSH(b->maps, *r);
}

int cw_batch_add_folded(cw_batch_t *b, const cw_row_folded_t *r)
{
    return VEC_PUSH(b->folded, *r);
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
    cw_row_stack_t r = {id, n, malloc((n ? n : 1) * sizeof(uint32_t)), strdup(tag)};
    if (!r.frames || !r.tag || VEC_PUSH(b->stacks, r) != 0) {
        free(r.frames);
        free(r.tag);
        return CW_ENOMEM;
    }
    if (n) memcpy(r.frames, frames, n * sizeof(uint32_t));
    return 0;
}

/* ---- key order ------------------------------------------------------------ */

static int cmp_commit(const void *x, const void *y)
{
    const cw_row_commit_t *p = x, *q = y;
    if (p->proc != q->proc) return p->proc < q->proc ? -1 : 1;
    if (p->stack != q->stack) return p->stack < q->stack ? -1 : 1;
    return (p->a > q->a) - (p->a < q->a);
}

static int cmp_release(const void *x, const void *y)
{
    const cw_row_release_t *p = x, *q = y;
    if (p->proc != q->proc) return p->proc < q->proc ? -1 : 1;
    if (p->stack != q->stack) return p->stack < q->stack ? -1 : 1;
    return (p->a > q->a) - (p->a < q->a);
}

static int cmp_activity(const void *x, const void *y)
{
    const cw_row_activity_t *p = x, *q = y;
    return (p->proc > q->proc) - (p->proc < q->proc);
}

uint32_t cw_batch_merge_commits(cw_row_commit_t *v, uint32_t n)
{
    uint32_t o = 0;
    if (n > 1) qsort(v, n, sizeof *v, cmp_commit); /* (an empty one may be NULL) */
    for (uint32_t i = 0; i < n; i++)
        if (o && cmp_commit(&v[o - 1], &v[i]) == 0) {
            v[o - 1].bytes += v[i].bytes;
            v[o - 1].events += v[i].events;
        } else
            v[o++] = v[i];
    return o;
}

uint32_t cw_batch_merge_releases(cw_row_release_t *v, uint32_t n)
{
    uint32_t o = 0;
    if (n > 1) qsort(v, n, sizeof *v, cmp_release);
    for (uint32_t i = 0; i < n; i++)
        if (o && cmp_release(&v[o - 1], &v[i]) == 0) {
            v[o - 1].bytes += v[i].bytes;
            v[o - 1].pieces += v[i].pieces;
            v[o - 1].closed += v[i].closed;
        } else
            v[o++] = v[i];
    return o;
}

void cw_batch_sort_activity(cw_row_activity_t *v, uint32_t n)
{
    if (n > 1) qsort(v, n, sizeof *v, cmp_activity);
}
