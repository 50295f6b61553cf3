/* tracker.c - committed ranges per process instance (see tracker.h).
 *
 * Each live instance holds an AVL tree of pieces keyed by start address.
 * Pieces never overlap, so they are also ordered by end, and "the first
 * piece that ends after x" is one descent. Each piece points at the commit
 * record that created it; each instance keeps its live commit records on
 * a list so an exit releases them without walking the tree. Pieces,
 * commit records and instances come from pools.
 *
 * A decommit groups the bytes it removes by commit record (the record's
 * `pending` field and a touched list), so one release callback fires per
 * (commit event, release event) pair: that pair is a piece. */
#include "commitwatch/tracker.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "commitwatch/error.h"
#include "commitwatch/hash.h"
#include "commitwatch/pool.h"

typedef struct rec {
    cw_commit_t pub;
    struct rec *prev, *next; /* the instance's live records */
    struct rec *touched;     /* scratch list during one decommit */
    uint64_t pending;        /* scratch: bytes removed by this decommit */
} rec_t;

/* What a descent reads (start, then left or right) comes first, so that
 * a node more often lies in one cache line: descents are the tracker's
 * cost, each level a likely cache miss with a thousand processes' trees. */
typedef struct node {
    uint64_t start;
    struct node *left, *right;
    uint64_t end; /* [start, end) */
    rec_t *rec;
    int height;
} node_t;

typedef struct proc {
    cw_proc_t pub;
    node_t *root;
    uint64_t npieces;
    rec_t *recs; /* live records, most recent first */
    struct proc *hnext;
    char *name, *cmdline; /* owned; pub points at them */
} proc_t;

struct cw_tracker {
    cw_tracker_sink_t sink;
    uint32_t next_id;
    proc_t **buckets; /* pid -> live instance, chained */
    uint32_t mask;
    uint32_t nlive;
    cw_pool_t nodes, recs, procs;
};

/* ---- AVL tree of pieces ------------------------------------------------ */

static int height(const node_t *n)
{
    return n ? n->height : 0;
}

static void fix_height(node_t *n)
{
    int l = height(n->left), r = height(n->right);
    n->height = (l > r ? l : r) + 1;
}

static node_t *rotate_right(node_t *n)
{
    node_t *l = n->left;
    n->left = l->right;
    l->right = n;
    fix_height(n);
    fix_height(l);
    return l;
}

static node_t *rotate_left(node_t *n)
{
    node_t *r = n->right;
    n->right = r->left;
    r->left = n;
    fix_height(n);
    fix_height(r);
    return r;
}

static node_t *balance(node_t *n)
{
    fix_height(n);
    int b = height(n->left) - height(n->right);
    if (b > 1) {
        if (height(n->left->left) < height(n->left->right)) n->left = rotate_left(n->left);
        return rotate_right(n);
    }
    if (b < -1) {
        if (height(n->right->right) < height(n->right->left)) n->right = rotate_right(n->right);
        return rotate_left(n);
    }
    return n;
}

/* Inserts x (its start is not in the tree). Depth is O(log n), so the
 * recursion is bounded (about 1.44 log2 n). Above the level where a
 * subtree's height stops changing nothing changes (balance() would leave
 * those nodes as they are), so the way back up stops there and does not
 * touch the siblings of the path, which are cold. *grew: the height of
 * the subtree returned differs from n's before. */
static node_t *insert_at(node_t *n, node_t *x, bool *grew)
{
    if (!n) {
        x->left = x->right = NULL;
        x->height = 1;
        *grew = true;
        return x;
    }
    if (x->start < n->start)
        n->left = insert_at(n->left, x, grew);
    else
        n->right = insert_at(n->right, x, grew);
    if (!*grew) return n;
    int h = n->height;
    n = balance(n);
    *grew = n->height != h;
    return n;
}

static node_t *avl_insert(node_t *n, node_t *x)
{
    bool grew = false;
    return insert_at(n, x, &grew);
}

/* As for insert_at, the way back up stops where a subtree's height
 * stops changing (*shrank false). */
static node_t *remove_min(node_t *n, node_t **min, bool *shrank)
{
    if (!n->left) {
        *min = n;
        *shrank = true;
        return n->right;
    }
    n->left = remove_min(n->left, min, shrank);
    if (!*shrank) return n;
    int h = n->height;
    n = balance(n);
    *shrank = n->height != h;
    return n;
}

/* Unlinks the node whose start is key (it must exist); *out gets it. */
static node_t *remove_at(node_t *n, uint64_t key, node_t **out, bool *shrank)
{
    if (key < n->start) {
        n->left = remove_at(n->left, key, out, shrank);
    } else if (key > n->start) {
        n->right = remove_at(n->right, key, out, shrank);
    } else {
        node_t *l = n->left, *r = n->right, *min;
        *out = n;
        *shrank = true;
        if (!r) return l;
        bool sub = false;
        r = remove_min(r, &min, &sub);
        min->left = l;
        min->right = r;
        min->height = n->height; /* min takes n's place; balance() settles it */
        node_t *m = balance(min);
        *shrank = m->height != n->height;
        return m;
    }
    if (!*shrank) return n;
    int h = n->height;
    n = balance(n);
    *shrank = n->height != h;
    return n;
}

static node_t *avl_remove(node_t *n, uint64_t key, node_t **out)
{
    bool shrank = false;
    return remove_at(n, key, out, &shrank);
}

/* The first piece whose end is > x (the piece holding x, or the next). */
static node_t *first_ending_after(node_t *n, uint64_t x)
{
    node_t *le = NULL, *gt = NULL;
    while (n) {
        if (n->start <= x) {
            le = n;
            n = n->right;
        } else {
            gt = n;
            n = n->left;
        }
    }
    return (le && le->end > x) ? le : gt;
}

static void free_tree(cw_tracker_t *t, node_t *n)
{
    /* Iterative via right-rotation to a list: no recursion on big trees. */
    while (n) {
        if (n->left) {
            node_t *l = n->left;
            n->left = l->right;
            l->right = n;
            n = l;
        } else {
            node_t *r = n->right;
            cw_pool_put(&t->nodes, n);
            n = r;
        }
    }
}

/* ---- process instances ------------------------------------------------- */

static proc_t *find_live(const cw_tracker_t *t, uint32_t pid)
{
    proc_t *p = t->buckets[cw_hash_u64(pid) & t->mask];
    while (p && p->pub.pid != pid)
        p = p->hnext;
    return p;
}

static int grow_table(cw_tracker_t *t)
{
    uint32_t nmask = (t->mask << 1) | 1;
    proc_t **nb = calloc((size_t)nmask + 1, sizeof *nb);
    if (!nb) return CW_ENOMEM;
    for (uint32_t i = 0; i <= t->mask; i++) {
        proc_t *p = t->buckets[i];
        while (p) {
            proc_t *next = p->hnext;
            uint32_t j = (uint32_t)cw_hash_u64(p->pub.pid) & nmask;
            p->hnext = nb[j];
            nb[j] = p;
            p = next;
        }
    }
    free(t->buckets);
    t->buckets = nb;
    t->mask = nmask;
    return 0;
}

static void unlink_live(cw_tracker_t *t, proc_t *p)
{
    proc_t **pp = &t->buckets[cw_hash_u64(p->pub.pid) & t->mask];
    while (*pp != p)
        pp = &(*pp)->hnext;
    *pp = p->hnext;
    t->nlive--;
}

static proc_t *new_instance(cw_tracker_t *t, uint32_t pid, int64_t ts, const char *name,
                            const char *cmdline, bool implicit)
{
    char implicit_name[32];
    if (t->nlive + 1 > t->mask && grow_table(t) != 0) return NULL;
    proc_t *p = cw_pool_get(&t->procs);
    if (!p) return NULL;
    memset(p, 0, sizeof *p);
    if (implicit) {
        snprintf(implicit_name, sizeof implicit_name, "pid %" PRIu32, pid);
        name = implicit_name;
    }
    p->name = strdup(name ? name : "");
    p->cmdline = cmdline ? strdup(cmdline) : NULL;
    if (!p->name || (cmdline && !p->cmdline)) {
        free(p->name);
        free(p->cmdline);
        cw_pool_put(&t->procs, p);
        return NULL;
    }
    p->pub.id = t->next_id++;
    p->pub.pid = pid;
    p->pub.start_ns = ts;
    p->pub.exit_ns = CW_TS_NEVER;
    p->pub.name = p->name;
    p->pub.cmdline = p->cmdline;
    p->pub.implicit = implicit;
    p->pub.tracking_ended = false;
    uint32_t b = (uint32_t)cw_hash_u64(pid) & t->mask;
    p->hnext = t->buckets[b];
    t->buckets[b] = p;
    t->nlive++;
    if (t->sink.on_start) t->sink.on_start(t->sink.ctx, &p->pub, ts);
    return p;
}

static void rec_unlink(proc_t *p, rec_t *r)
{
    if (r->prev)
        r->prev->next = r->next;
    else
        p->recs = r->next;
    if (r->next) r->next->prev = r->prev;
}

/* Releases everything, reports the exit, frees the instance. */
static void end_instance(cw_tracker_t *t, proc_t *p, int64_t ts)
{
    rec_t *r = p->recs;
    p->pub.exit_ns = ts;
    while (r) {
        rec_t *next = r->next;
        uint64_t bytes = r->pub.remaining;
        r->pub.remaining = 0;
        p->pub.outstanding -= bytes;
        if (t->sink.on_release) t->sink.on_release(t->sink.ctx, &p->pub, &r->pub, bytes, ts);
        cw_pool_put(&t->recs, r);
        r = next;
    }
    p->recs = NULL;
    free_tree(t, p->root);
    p->root = NULL;
    p->npieces = 0;
    if (t->sink.on_event) t->sink.on_event(t->sink.ctx, &p->pub, ts);
    if (t->sink.on_exit) t->sink.on_exit(t->sink.ctx, &p->pub, ts);
    unlink_live(t, p);
    free(p->name);
    free(p->cmdline);
    cw_pool_put(&t->procs, p);
}

/* ---- commit / decommit ------------------------------------------------- */

static int commit_range(cw_tracker_t *t, proc_t *p, const cw_event_t *ev)
{
    uint64_t cur = ev->addr, end = ev->addr + ev->size;
    rec_t *r = NULL;

    while (cur < end) {
        node_t *n = first_ending_after(p->root, cur);
        if (n && n->start <= cur) { /* already committed: keeps its attribution */
            cur = n->end;
            continue;
        }
        uint64_t gap_end = (n && n->start < end) ? n->start : end;
        if (!r) {
            r = cw_pool_get(&t->recs);
            if (!r) return CW_ENOMEM;
            memset(r, 0, sizeof *r);
            r->pub.ts = ev->rundown ? CW_TS_BEFORE : ev->ts;
            r->pub.stack_id = ev->stack_id;
        }
        node_t *x = cw_pool_get(&t->nodes);
        if (!x) return CW_ENOMEM; /* r is linked below only if it got bytes */
        x->start = cur;
        x->end = gap_end;
        x->rec = r;
        p->root = avl_insert(p->root, x);
        p->npieces++;
        r->pub.bytes += gap_end - cur;
        cur = gap_end;
    }
    if (!r) return 0;
    r->pub.remaining = r->pub.bytes;
    r->next = p->recs;
    if (p->recs) p->recs->prev = r;
    p->recs = r;
    p->pub.outstanding += r->pub.bytes;
    if (t->sink.on_commit) t->sink.on_commit(t->sink.ctx, &p->pub, &r->pub, ev->ts);
    return 0;
}

static int decommit_range(cw_tracker_t *t, proc_t *p, const cw_event_t *ev)
{
    uint64_t s = ev->addr, e = ev->addr + ev->size, cur = s;
    rec_t *touched = NULL;
    int rc = 0;

    for (;;) {
        node_t *n = first_ending_after(p->root, cur);
        if (!n || n->start >= e) break;
        uint64_t lo = n->start > s ? n->start : s;
        uint64_t hi = n->end < e ? n->end : e;
        rec_t *r = n->rec;
        if (r->pending == 0) {
            r->touched = touched;
            touched = r;
        }
        r->pending += hi - lo;
        cur = hi;
        if (n->start >= s && n->end <= e) { /* whole piece goes */
            node_t *gone;
            p->root = avl_remove(p->root, n->start, &gone);
            cw_pool_put(&t->nodes, gone);
            p->npieces--;
        } else if (n->start < s && n->end > e) { /* middle: split in two */
            node_t *x = cw_pool_get(&t->nodes);
            if (!x) {
                rc = CW_ENOMEM;
                break;
            }
            x->start = e;
            x->end = n->end;
            x->rec = r;
            n->end = s;
            p->root = avl_insert(p->root, x);
            p->npieces++;
        } else if (n->start < s) { /* left part stays */
            n->end = s;
        } else { /* right part stays; order is unchanged */
            n->start = e;
        }
    }
    /* One piece per commit record touched. */
    while (touched) {
        rec_t *r = touched, *next = r->touched;
        uint64_t bytes = r->pending;
        r->pending = 0;
        r->touched = NULL;
        r->pub.remaining -= bytes;
        p->pub.outstanding -= bytes;
        if (t->sink.on_release) t->sink.on_release(t->sink.ctx, &p->pub, &r->pub, bytes, ev->ts);
        if (r->pub.remaining == 0) {
            rec_unlink(p, r);
            cw_pool_put(&t->recs, r);
        }
        touched = next;
    }
    return rc;
}

/* ---- public API --------------------------------------------------------- */

int cw_tracker_create(const cw_tracker_sink_t *sink, uint32_t first_proc_id, cw_tracker_t **out)
{
    cw_tracker_t *t = calloc(1, sizeof *t);
    if (!t) return CW_ENOMEM;
    t->sink = *sink;
    t->next_id = first_proc_id ? first_proc_id : 1;
    t->mask = 255;
    t->buckets = calloc((size_t)t->mask + 1, sizeof *t->buckets);
    if (!t->buckets) {
        free(t);
        return CW_ENOMEM;
    }
    cw_pool_init(&t->nodes, sizeof(node_t), 4096);
    cw_pool_init(&t->recs, sizeof(rec_t), 4096);
    cw_pool_init(&t->procs, sizeof(proc_t), 256);
    *out = t;
    return 0;
}

void cw_tracker_destroy(cw_tracker_t *t)
{
    if (!t) return;
    for (uint32_t i = 0; i <= t->mask; i++)
        for (proc_t *p = t->buckets[i]; p; p = p->hnext) {
            free(p->name);
            free(p->cmdline);
        }
    cw_pool_destroy(&t->nodes);
    cw_pool_destroy(&t->recs);
    cw_pool_destroy(&t->procs);
    free(t->buckets);
    free(t);
}

int cw_tracker_apply(cw_tracker_t *t, const cw_event_t *ev)
{
    proc_t *p = find_live(t, ev->pid);
    int rc = 0;

    switch (ev->op) {
    case CW_OP_PROCESS_START:
        if (p) end_instance(t, p, ev->ts); /* pid reused without an exit event */
        p = new_instance(t, ev->pid, ev->ts, ev->name, ev->cmdline, false);
        if (!p) return CW_ENOMEM;
        if (t->sink.on_event) t->sink.on_event(t->sink.ctx, &p->pub, ev->ts);
        return 0;
    case CW_OP_PROCESS_EXIT:
        if (!p && !(p = new_instance(t, ev->pid, ev->ts, NULL, NULL, true))) return CW_ENOMEM;
        end_instance(t, p, ev->ts);
        return 0;
    case CW_OP_COMMIT:
    case CW_OP_DECOMMIT:
    case CW_OP_RELEASE:
    case CW_OP_RESERVE:
        if (!p && !(p = new_instance(t, ev->pid, ev->ts, NULL, NULL, true))) return CW_ENOMEM;
        if (ev->size == 0 || ev->addr + ev->size < ev->addr) {
            /* Empty or wrapping ranges change nothing (the reader rejects
             * them; live sources may not). */
        } else if (ev->op == CW_OP_COMMIT) {
            rc = commit_range(t, p, ev);
        } else if (ev->op != CW_OP_RESERVE) {
            rc = decommit_range(t, p, ev);
        }
        if (t->sink.on_event) t->sink.on_event(t->sink.ctx, &p->pub, ev->ts);
        return rc;
    default:
        return CW_EINVAL;
    }
}

void cw_tracker_end_all(cw_tracker_t *t, int64_t ts)
{
    for (uint32_t i = 0; i <= t->mask; i++)
        while (t->buckets[i]) {
            t->buckets[i]->pub.tracking_ended = true;
            end_instance(t, t->buckets[i], ts);
        }
}

void cw_tracker_finish(cw_tracker_t *t)
{
    if (!t->sink.on_live) return;
    for (uint32_t i = 0; i <= t->mask; i++)
        for (proc_t *p = t->buckets[i]; p; p = p->hnext)
            for (rec_t *r = p->recs; r; r = r->next)
                t->sink.on_live(t->sink.ctx, &p->pub, &r->pub);
}

uint32_t cw_tracker_live_processes(const cw_tracker_t *t)
{
    return t->nlive;
}

const cw_proc_t *cw_tracker_find(const cw_tracker_t *t, uint32_t pid)
{
    proc_t *p = find_live(t, pid);
    return p ? &p->pub : NULL;
}

uint64_t cw_tracker_piece_count(const cw_tracker_t *t, uint32_t pid)
{
    proc_t *p = find_live(t, pid);
    return p ? p->npieces : 0;
}

uint32_t cw_tracker_next_proc_id(const cw_tracker_t *t)
{
    return t->next_id;
}
