/* tracker.c - committed ranges per process instance (see tracker.h).
 *
 * Each live instance holds a B+-tree of pieces keyed by start address.
 * Pieces never overlap, so they are also ordered by end, and "the first
 * piece that ends after x" is one descent. Each piece points at the commit
 * record that created it. An instance's live records are found through its
 * pieces (a live record has some) when it exits or at the end, and taken
 * most recent first by their number: no list to keep, which cost two
 * cache misses (a record's neighbours) for each commit freed. Pieces,
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
    uint64_t seq;        /* the order records were made in (the tracker's count) */
    struct rec *touched; /* scratch list during one decommit */
    uint64_t pending;    /* scratch: bytes removed by this decommit; GATHERED */
} rec_t;

/* A reservation record ("Reserved space" below): what reserved the
 * pieces of `res` that point at it, and how many of them there are (a
 * count of pieces, not bytes, keeps it at 16 bytes; a commit record takes
 * 64 in its pool): a workload that reserves much keeps many. */
typedef struct resv {
    int64_t ts; /* CW_TS_BEFORE: from a rundown */
    uint32_t stack_id;
    uint32_t npieces; /* pieces in `res` pointing here; freed at 0 */
} resv_t;
_Static_assert(sizeof(resv_t) == 16, "a reservation record is 16 bytes");

/* pending of a record put in the tracker's gather array (never a byte
 * count: a piece is at most 2^64 - 1 bytes and so is a decommit). */
#define GATHERED UINT64_MAX

/* A B+-tree of pieces per instance: leaves of up to BT_MAX pieces sorted
 * by start, inner nodes of up to BT_MAX children. A lookup reads a few
 * nodes (two levels hold 256 pieces) instead of an AVL tree's one node per
 * level: with a thousand processes' trees out of cache, the tracker's cost
 * is the cache lines a descent misses, one after the other.
 *
 * Child i of an inner node (i >= 1) holds the pieces whose start is >=
 * key[i] and < key[i + 1] (the node's own bounds at the ends); key[0] is
 * not used. A piece's start never changes in place (a decommit that keeps
 * a piece's right part moves it), so it stays in its range; its end may
 * reach past the next range's key (a gap committed before the next piece),
 * so a lookup that finds no piece starting at or before x in its leaf
 * looks at the previous leaf's last. Leaves are linked both ways in
 * address order. An emptied node is removed (no merging of small nodes:
 * the depth stays that of the largest the tree has been). */
#define BT_MAX 16
#define BT_DEPTH 48 /* inner levels: far more than 2^64 pieces need */
/* A split leaves BT_MAX / 2 entries on each side and room for more: with
 * fewer than 4, ascending inserts would split every node up to the root
 * each time. */
_Static_assert(BT_MAX >= 4, "a node splits into halves with room left");

typedef struct piece {
    uint64_t end; /* [leaf start, end) */
    union {
        rec_t *rec;   /* in `com` */
        resv_t *resv; /* in `res` */
    };
} piece_t;

/* A node's count comes first, in the cache line of its first keys: a
 * descent reads both at once. */
typedef struct leaf {
    uint32_t n;
    uint64_t start[BT_MAX];
    struct leaf *prev, *next;
    piece_t v[BT_MAX];
} leaf_t;

typedef struct inner {
    uint32_t n;
    uint64_t key[BT_MAX];
    void *child[BT_MAX];
} inner_t;

/* A piece in the tree: leaf l, index i (l NULL: none). */
typedef struct cursor {
    leaf_t *l;
    uint32_t i;
} cursor_t;

/* The leaf hints of a tree two inner levels deep or more: slot
 * (x >> HINT_SHIFT) % HINT_SLOTS holds the leaf the last descent for an
 * address of that slot found (NULL: none). A heap's allocations and frees
 * come back to the same addresses (its allocator reuses them), so the
 * leaf a descent found is the one the next lookup of a nearby address
 * needs: on a python3 workload's 3 M events, 98.7 % of the descents
 * found the leaf their slot held. A hint is only tried (leaf_for checks
 * it holds x, which any live leaf of the tree can); leaves move nothing
 * out of their range but by a split, which the check sees, and a leaf
 * freed (emptied: rare, 212 in those 3 M events) clears every hint. 8 KiB
 * a deep tree; a process with a few hundred pieces has none. */
#define HINT_SLOTS 1024
#define HINT_SHIFT 5
#define HINT_MIN_HEIGHT 2

/* One interval map: a B+-tree of pieces. */
typedef struct tree {
    void *root;      /* a leaf_t (height 0) or an inner_t, NULL when empty */
    /* The last leaf (NULL when empty). Its range has no upper bound, so
     * an address at or past its first start is in it without a descent:
     * where a process's new pieces go (addresses handed out upwards) and
     * most of its short-lived ones are released. */
    struct leaf *last;
    struct leaf **hint; /* HINT_SLOTS leaves, or NULL (HINT_MIN_HEIGHT not reached) */
    uint32_t height; /* inner levels above the leaves */
    uint64_t npieces;
} tree_t;

typedef struct proc {
    cw_proc_t pub;
    tree_t com; /* committed pieces; each points at its commit record */
    /* Reserved address space that is not known from `com` (see "Reserved
     * space" below): pieces pointing at reservation records. */
    tree_t res;
    size_t nrecs; /* live records */
    uint64_t map_seq;      /* t->map_seq at the last change of the pieces */
    uint64_t snap_seq;     /* map_seq at the last snapshot (0: none yet) */
    int64_t snap_ns;       /* time of the last snapshot */
    uint64_t snap_bytes;   /* outstanding at the last snapshot */
    struct proc *hnext;
    char *name, *cmdline; /* owned; pub points at them */
} proc_t;

#if defined(__GNUC__)
#define PREFETCH(p) __builtin_prefetch(p)
#else
#define PREFETCH(p) ((void)(p))
#endif

/* The pools' chunks (objects per chunk of each pool, in
 * cw_tracker_create: 512 leaves, 4,096 commit records, ...: 64 - 256 KiB
 * each) are divided by 2^CW_TRACK__POOL_SHIFT. A build may make them
 * smaller (the fuzz build: 6, 1 - 4 KiB; a tracker made per input
 * otherwise mapped, faulted in and gave back 0.63 MiB through ASan's large
 * allocations, most of fuzz_trace's time; and chunks are chained on small
 * inputs). Their size changes where objects are, never what is tracked
 * (cw_tracker_memory counts the chunks as they are). */
#ifndef CW_TRACK__POOL_SHIFT
#define CW_TRACK__POOL_SHIFT 0
#endif
#define POOL_CHUNK(n) ((n) >> CW_TRACK__POOL_SHIFT ? (n) >> CW_TRACK__POOL_SHIFT : 1)

struct cw_tracker {
    cw_tracker_sink_t sink;
    uint32_t next_id;
    proc_t **buckets; /* pid -> live instance, chained */
    uint32_t mask;
    uint32_t nlive;
    cw_pool_t leaves, inners, recs, resvs, procs;
    size_t hint_bytes; /* the trees' leaf hints */
    uint64_t rec_seq;
    uint64_t map_seq; /* counts changes of any instance's pieces, from 1 */
    rec_t **gather; /* an instance's live records (gather_recs); room for the most any has */
    size_t gather_cap;
};

/* ---- B+-tree of pieces ---------------------------------------------- */

/* How many of a[0 .. n) (ascending, n >= 1) are <= x: a binary search
 * whose step is a conditional move, not a branch (a leaf's 16 starts take
 * 4 steps where a scan took up to 16 compares and branches). */
static inline uint32_t count_le(const uint64_t *a, uint32_t n, uint64_t x)
{
    uint32_t pos = 0; /* a[0 .. pos) <= x, a[pos + n ..) > x */
    while (n > 1) {
        uint32_t half = n / 2;
        pos += a[pos + half - 1] <= x ? half : 0;
        n -= half;
    }
    return pos + (a[pos] <= x);
}

/* The child of inner node n whose range holds x. A scan: inner nodes
 * are mostly small (a thousand processes' trees: two to five children),
 * where it costs less than count_le. */
static uint32_t child_for(const inner_t *n, uint64_t x)
{
    uint32_t i = 1;
    while (i < n->n && n->key[i] <= x) i++;
    return i - 1;
}

/* The leaf whose range holds x; path[] and at[] (may be NULL) get the
 * inner nodes passed and the child taken in each, root first. */
static leaf_t *descend(const tree_t *p, uint64_t x, inner_t **path, uint32_t *at)
{
    void *n = p->root;
    for (uint32_t d = 0; d < p->height; d++) {
        inner_t *in = n;
        /* The children's lines come while the keys are read. */
        PREFETCH(&in->child[0]);
        PREFETCH(&in->child[BT_MAX - 1]);
        uint32_t i = child_for(in, x);
        if (path) {
            path[d] = in;
            at[d] = i;
        }
        n = in->child[i];
    }
    return n;
}

/* A leaf from which first_ending_after finds what it would from the
 * leaf whose range holds x (the tree not empty): the last leaf, the hint
 * of x's slot, or descend()'s, which becomes the slot's hint. A live
 * leaf l does when l's first piece starts at or before x and the next
 * leaf's first piece after x, whatever the inner keys say: the last
 * piece starting at or before x is then in l, and every piece after l
 * starts after x. */
static inline leaf_t *leaf_for(tree_t *p, uint64_t x)
{
    if (x >= p->last->start[0]) return p->last;
    leaf_t **h = p->hint ? &p->hint[(x >> HINT_SHIFT) & (HINT_SLOTS - 1)] : NULL;
    /* Not the last leaf (x is below its first start): it has a next. */
    if (h && *h && x >= (*h)->start[0] && x < (*h)->next->start[0]) return *h;
    leaf_t *l = descend(p, x, NULL, NULL);
    if (h) *h = l;
    return l;
}

/* Clears the tree's hints: a leaf of it is freed. */
static void forget_hints(tree_t *p)
{
    if (p->hint) memset(p->hint, 0, HINT_SLOTS * sizeof *p->hint);
}

/* The first piece whose end is > x (the piece holding x, or the next). */
static cursor_t first_ending_after(tree_t *p, uint64_t x)
{
    cursor_t c = {NULL, 0};
    leaf_t *l = p->root ? leaf_for(p, x) : NULL;
    if (!l) return c;
    uint32_t j = count_le(l->start, l->n, x); /* pieces [0, j) start at or before x */
    if (j > 0) {
        if (l->v[j - 1].end > x) return (cursor_t){l, j - 1};
    } else if (l->prev && l->prev->v[l->prev->n - 1].end > x) {
        return (cursor_t){l->prev, l->prev->n - 1};
    }
    if (j < l->n) return (cursor_t){l, j};
    if (l->next) return (cursor_t){l->next, 0};
    return c;
}

/* The root (left) split: a new root above it and its new sibling right,
 * whose pieces start at sep or after. 0 or CW_ENOMEM. */
static int grow_root(cw_tracker_t *t, tree_t *p, void *left, uint64_t sep, void *right)
{
    inner_t *root = cw_pool_get(&t->inners);
    if (!root) return CW_ENOMEM;
    root->n = 2;
    root->key[0] = 0;
    root->child[0] = left;
    root->key[1] = sep;
    root->child[1] = right;
    p->root = root;
    p->height++;
    /* Deep enough for hints (none if they cannot be had: only slower). */
    if (p->height >= HINT_MIN_HEIGHT && !p->hint &&
        (p->hint = calloc(HINT_SLOTS, sizeof *p->hint)) != NULL)
        t->hint_bytes += HINT_SLOTS * sizeof *p->hint;
    return 0;
}

/* A full node's entries from h on (of two parallel arrays a, b with
 * elements of asz and bsz bytes) copied to the start of a2, b2; how many. */
static uint32_t upper_part(uint32_t h, void *a2, const void *a, size_t asz, void *b2, const void *b,
                           size_t bsz)
{
    memcpy(a2, (const char *)a + h * asz, (BT_MAX - h) * asz);
    memcpy(b2, (const char *)b + h * bsz, (BT_MAX - h) * bsz);
    return BT_MAX - h;
}

static int inner_insert(cw_tracker_t *t, tree_t *p, inner_t **path, uint32_t *at, uint32_t d,
                        uint32_t i, uint64_t key, void *child);

/* Node left, at depth d (path[0 .. d) above it), was split: right, whose
 * pieces start at sep or after, goes in beside it. 0 or CW_ENOMEM. */
static int link_split(cw_tracker_t *t, tree_t *p, inner_t **path, uint32_t *at, uint32_t d,
                      void *left, uint64_t sep, void *right)
{
    if (d == 0) return grow_root(t, p, left, sep, right);
    return inner_insert(t, p, path, at, d - 1, at[d - 1] + 1, sep, right);
}

/* Inserts (key, child) at position i of inner node path[d], splitting it
 * (and its parents) when full. 0 or CW_ENOMEM. */
static int inner_insert(cw_tracker_t *t, tree_t *p, inner_t **path, uint32_t *at, uint32_t d,
                        uint32_t i, uint64_t key, void *child)
{
    inner_t *n = path[d];
    if (n->n == BT_MAX) {
        inner_t *r = cw_pool_get(&t->inners);
        if (!r) return CW_ENOMEM;
        uint32_t h = BT_MAX / 2;
        r->n = upper_part(h, r->key, n->key, sizeof *n->key, r->child, n->child, sizeof *n->child);
        n->n = h;
        uint64_t sep = r->key[0];
        int rc = link_split(t, p, path, at, d, n, sep, r);
        if (rc) return rc;
        if (i > h) {
            n = r;
            i -= h;
        } else if (i == h && key >= sep) {
            n = r;
            i = 0;
        }
    }
    memmove(n->key + i + 1, n->key + i, (n->n - i) * sizeof *n->key);
    memmove(n->child + i + 1, n->child + i, (n->n - i) * sizeof *n->child);
    n->key[i] = key;
    n->child[i] = child;
    n->n++;
    return 0;
}

/* Puts the piece [start, v.end) at index j of leaf l (which has room),
 * the pieces from j on moved up. */
static void leaf_put(tree_t *p, leaf_t *l, uint32_t j, uint64_t start, piece_t v)
{
    memmove(l->start + j + 1, l->start + j, (l->n - j) * sizeof *l->start);
    memmove(l->v + j + 1, l->v + j, (l->n - j) * sizeof *l->v);
    l->start[j] = start;
    l->v[j] = v;
    l->n++;
    p->npieces++;
}

/* Inserts the piece [start, v.end) (no piece starts at start). */
static int bt_insert(cw_tracker_t *t, tree_t *p, uint64_t start, piece_t v)
{
    inner_t *path[BT_DEPTH];
    uint32_t at[BT_DEPTH];
    if (!p->root) {
        leaf_t *l = cw_pool_get(&t->leaves);
        if (!l) return CW_ENOMEM;
        l->n = 0;
        l->prev = l->next = NULL;
        p->root = l;
        p->height = 0;
        p->last = l;
    }
    if (p->height >= BT_DEPTH) return CW_ENOMEM; /* cannot happen: 16^48 pieces */
    leaf_t *l = p->last;
    /* In the last leaf with room: no descent (the path is only needed by
     * a split). An empty new root takes any start. */
    if (l->n == BT_MAX || (l->n && start < l->start[0])) l = descend(p, start, path, at);
    if (l->n == BT_MAX) {
        leaf_t *r2 = cw_pool_get(&t->leaves);
        if (!r2) return CW_ENOMEM;
        /* A piece after the last (addresses handed out upwards, as
         * allocators do) starts a new leaf and leaves this one full;
         * anywhere else the leaf splits in halves. */
        bool append = !l->next && start > l->start[BT_MAX - 1];
        uint32_t h = append ? BT_MAX : BT_MAX / 2;
        r2->n = upper_part(h, r2->start, l->start, sizeof *l->start, r2->v, l->v, sizeof *l->v);
        l->n = h;
        r2->prev = l;
        r2->next = l->next;
        if (l->next) l->next->prev = r2;
        else p->last = r2;
        l->next = r2;
        uint64_t sep = append ? start : r2->start[0];
        int rc = link_split(t, p, path, at, p->height, l, sep, r2);
        if (rc) return rc;
        if (start >= sep) l = r2;
    }
    uint32_t j = l->n;
    while (j > 0 && l->start[j - 1] > start) j--;
    leaf_put(p, l, j, start, v);
    return 0;
}

/* Inserts the piece [start, v.end) before the piece at c, which starts
 * after start, the piece before it (in c's leaf) ending at or before
 * start: there, when c's leaf has room and such a piece, without the
 * descent bt_insert makes (an allocation's block goes between others
 * in a heap's tree); else as bt_insert. */
static int bt_insert_before(cw_tracker_t *t, tree_t *p, uint64_t start, piece_t v, cursor_t c)
{
    leaf_t *l = c.l;
    if (!l || c.i == 0 || l->n == BT_MAX) return bt_insert(t, p, start, v);
    leaf_put(p, l, c.i, start, v);
    return 0;
}

/* Removes the piece that starts at start (it must exist). */
static void bt_remove(cw_tracker_t *t, tree_t *p, uint64_t start)
{
    inner_t *path[BT_DEPTH];
    uint32_t at[BT_DEPTH];
    leaf_t *l = descend(p, start, path, at);
    uint32_t j = count_le(l->start, l->n, start) - 1; /* l->start[j] == start */
    memmove(l->start + j, l->start + j + 1, (l->n - j - 1) * sizeof *l->start);
    memmove(l->v + j, l->v + j + 1, (l->n - j - 1) * sizeof *l->v);
    l->n--;
    p->npieces--;
    if (l->n) return;
    /* The leaf is empty: out of the list, and out of its parents. */
    if (l->prev) l->prev->next = l->next;
    if (l->next) l->next->prev = l->prev;
    else p->last = l->prev;
    forget_hints(p);
    cw_pool_put(&t->leaves, l);
    uint32_t d = p->height;
    for (;;) {
        if (d == 0) {
            p->root = NULL;
            p->height = 0;
            p->last = NULL;
            return;
        }
        inner_t *n = path[--d];
        uint32_t i = at[d];
        memmove(n->key + i, n->key + i + 1, (n->n - i - 1) * sizeof *n->key);
        memmove(n->child + i, n->child + i + 1, (n->n - i - 1) * sizeof *n->child);
        if (--n->n) break;
        cw_pool_put(&t->inners, n);
    }
    /* A root with one child gives way to it. */
    while (p->height > 0 && ((inner_t *)p->root)->n == 1) {
        inner_t *root = p->root;
        p->root = root->child[0];
        p->height--;
        cw_pool_put(&t->inners, root);
    }
}

/* Removes the piece at cursor c: in its leaf when others stay there
 * (no descent: the common case), else as bt_remove. */
static inline void bt_remove_at(cw_tracker_t *t, tree_t *p, cursor_t c)
{
    leaf_t *l = c.l;
    if (l->n == 1) {
        bt_remove(t, p, l->start[c.i]);
        return;
    }
    uint32_t j = c.i;
    memmove(l->start + j, l->start + j + 1, (l->n - j - 1) * sizeof *l->start);
    memmove(l->v + j, l->v + j + 1, (l->n - j - 1) * sizeof *l->v);
    l->n--;
    p->npieces--;
}

static void free_subtree(cw_tracker_t *t, void *n, uint32_t height)
{
    if (height == 0) {
        cw_pool_put(&t->leaves, n);
        return;
    }
    inner_t *in = n;
    for (uint32_t i = 0; i < in->n; i++) free_subtree(t, in->child[i], height - 1);
    cw_pool_put(&t->inners, in);
}

static void free_tree(cw_tracker_t *t, tree_t *p)
{
    if (p->root) free_subtree(t, p->root, p->height);
    if (p->hint) {
        free(p->hint);
        p->hint = NULL;
        t->hint_bytes -= HINT_SLOTS * sizeof *p->hint;
    }
    p->root = NULL;
    p->height = 0;
    p->last = NULL;
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

static int by_seq_desc(const void *a, const void *b)
{
    const rec_t *x = *(rec_t *const *)a, *y = *(rec_t *const *)b;
    return x->seq < y->seq ? 1 : x->seq > y->seq ? -1 : 0;
}

/* p's live records into t->gather, most recent first (the order they
 * would have on a list pushed at each commit); how many. */
static size_t gather_recs(cw_tracker_t *t, proc_t *p)
{
    size_t n = 0;
    for (leaf_t *l = p->com.root ? descend(&p->com, 0, NULL, NULL) : NULL; l; l = l->next)
        for (uint32_t j = 0; j < l->n; j++) {
            rec_t *r = l->v[j].rec;
            if (r->pending == GATHERED || n == t->gather_cap) continue; /* room: nrecs */
            r->pending = GATHERED;
            t->gather[n++] = r;
        }
    if (n > 1) qsort(t->gather, n, sizeof *t->gather, by_seq_desc);
    for (size_t i = 0; i < n; i++) t->gather[i]->pending = 0;
    return n;
}

static void drop_reserved(cw_tracker_t *t, proc_t *p);

/* Releases everything, reports the exit, frees the instance. */
static void end_instance(cw_tracker_t *t, proc_t *p, int64_t ts)
{
    size_t n = gather_recs(t, p);
    p->pub.exit_ns = ts;
    for (size_t i = 0; i < n; i++) {
        rec_t *r = t->gather[i];
        uint64_t bytes = r->pub.remaining;
        r->pub.remaining = 0;
        p->pub.outstanding -= bytes;
        if (t->sink.on_release) t->sink.on_release(t->sink.ctx, &p->pub, &r->pub, bytes, ts);
        cw_pool_put(&t->recs, r);
    }
    p->nrecs = 0;
    free_tree(t, &p->com);
    p->com.npieces = 0;
    drop_reserved(t, p);
    if (t->sink.on_event) t->sink.on_event(t->sink.ctx, &p->pub, ts);
    if (t->sink.on_exit) t->sink.on_exit(t->sink.ctx, &p->pub, ts);
    unlink_live(t, p);
    free(p->name);
    free(p->cmdline);
    cw_pool_put(&t->procs, p);
}

/* ---- commit / decommit ------------------------------------------------- */

/* Commits the parts of [addr, addr + size) not committed yet, as one
 * record. at: first_ending_after(&p->com, addr) when the caller has it
 * (l NULL: looked up here). */
static int commit_range(cw_tracker_t *t, proc_t *p, const cw_event_t *ev, cursor_t at)
{
    uint64_t cur = ev->addr, end = ev->addr + ev->size;
    rec_t *r = NULL;
    /* Room to gather one more live record at the exit (nothing can fail
     * there). */
    if (CW_RESERVE(t->gather, t->gather_cap, p->nrecs + 1) != 0) return CW_ENOMEM;

    bool hint = at.l != NULL;
    while (cur < end) {
        cursor_t c = hint ? at : first_ending_after(&p->com, cur);
        hint = false;
        uint64_t cs = c.l ? c.l->start[c.i] : 0;
        if (c.l && cs <= cur) { /* already committed: keeps its attribution */
            cur = c.l->v[c.i].end;
            continue;
        }
        uint64_t gap_end = (c.l && cs < end) ? cs : end;
        if (!r) {
            r = cw_pool_get(&t->recs);
            if (!r) return CW_ENOMEM;
            memset(r, 0, sizeof *r);
            r->seq = t->rec_seq++;
            r->pub.ts = ev->rundown ? CW_TS_BEFORE : ev->ts;
            r->pub.stack_id = ev->stack_id;
        }
        /* r is linked below only if it got bytes */
        if (bt_insert_before(t, &p->com, cur, (piece_t){.end = gap_end, .rec = r}, c) != 0)
            return CW_ENOMEM;
        r->pub.bytes += gap_end - cur;
        cur = gap_end;
    }
    if (!r) return 0;
    p->map_seq = ++t->map_seq;
    r->pub.remaining = r->pub.bytes;
    p->nrecs++;
    p->pub.outstanding += r->pub.bytes;
    if (t->sink.on_commit) t->sink.on_commit(t->sink.ctx, &p->pub, &r->pub, ev->ts);
    return 0;
}

/* The first piece of tr that ends after cur and starts before e (s <= cur
 * < e): its cursor (l NULL: none), its bounds [*ns, *ne) and their overlap
 * [*lo, *hi) with [s, e). */
static inline cursor_t next_overlap(tree_t *tr, uint64_t cur, uint64_t s, uint64_t e, uint64_t *ns,
                                    uint64_t *ne, uint64_t *lo, uint64_t *hi)
{
    cursor_t c = first_ending_after(tr, cur);
    if (!c.l || c.l->start[c.i] >= e) return (cursor_t){NULL, 0};
    *ns = c.l->start[c.i];
    *ne = c.l->v[c.i].end;
    *lo = *ns > s ? *ns : s;
    *hi = *ne < e ? *ne : e;
    return c;
}

/* Takes [s, e) out of the piece [ns, ne) at cursor c (they overlap); a
 * part that stays keeps the piece's record. 0 or CW_ENOMEM. */
static inline int cut_piece(cw_tracker_t *t, tree_t *tr, cursor_t c, uint64_t ns, uint64_t ne,
                            uint64_t s, uint64_t e)
{
    piece_t right = c.l->v[c.i];
    right.end = ne;
    if (ns >= s && ne <= e) { /* whole piece goes */
        bt_remove_at(t, tr, c);
        return 0;
    }
    if (ns < s && ne > e) { /* middle: split in two */
        c.l->v[c.i].end = s;
        return bt_insert(t, tr, e, right);
    }
    if (ns < s) { /* left part stays */
        c.l->v[c.i].end = s;
        return 0;
    }
    bt_remove_at(t, tr, c); /* right part stays: it moves to its new start */
    return bt_insert(t, tr, e, right);
}

static int reserve_fill(cw_tracker_t *t, proc_t *p, uint64_t s, uint64_t e, int64_t ts,
                        uint32_t stack_id);

/* Decommit or release of [addr, addr + size): the committed pieces in it
 * go. A decommit leaves the whole range reserved ("Reserved space"). at:
 * the piece that starts at addr when the caller has found it (l NULL:
 * looked up here). */
static int decommit_range(cw_tracker_t *t, proc_t *p, const cw_event_t *ev, cursor_t at)
{
    uint64_t s = ev->addr, e = ev->addr + ev->size, cur = s;
    rec_t *touched = NULL;
    int rc = 0;
    /* What reserved the range, as far as is known: the first commit taken
     * back, else the decommit itself. */
    int64_t res_ts = ev->rundown ? CW_TS_BEFORE : ev->ts;
    uint32_t res_stack = ev->stack_id;

    for (;;) {
        uint64_t ns, ne, lo, hi;
        cursor_t c = at;
        if (c.l) { /* [s, ...): the overlap starts at s */
            at.l = NULL;
            ns = lo = s;
            ne = c.l->v[c.i].end;
            hi = ne < e ? ne : e;
        } else {
            c = next_overlap(&p->com, cur, s, e, &ns, &ne, &lo, &hi);
        }
        if (!c.l) break;
        /* The record is likely out of cache: it is fetched while the tree
         * changes, which does not read it. */
        rec_t *r = c.l->v[c.i].rec;
        PREFETCH(r);
        cur = hi;
        rc = cut_piece(t, &p->com, c, ns, ne, s, e);
        if (!touched && ev->op == CW_OP_DECOMMIT) { /* read after the cut, as said */
            res_ts = r->pub.ts;
            res_stack = r->pub.stack_id;
        }
        if (r->pending == 0) {
            r->touched = touched;
            touched = r;
        }
        r->pending += hi - lo;
        /* A piece reaching e was the last: no descent to find none (a heap
         * block's free is one piece). */
        if (rc || ne >= e) break;
    }
    if (rc == 0 && ev->op == CW_OP_DECOMMIT) rc = reserve_fill(t, p, s, e, res_ts, res_stack);
    if (touched) p->map_seq = ++t->map_seq;
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
            p->nrecs--;
            cw_pool_put(&t->recs, r);
        }
        touched = next;
    }
    return rc;
}

/* ---- reserved space ------------------------------------------------------- */

/* The reserved address space of an instance is `res` plus every
 * committed piece: a commit on unreserved space reserves it too (Windows'
 * MEM_COMMIT | MEM_RESERVE; Linux's accounted mmap), and instead of
 * recording that at every commit (a second descent and piece each, which
 * the core thread would pay on the hot path) `res` records it only when a
 * decommit takes the commit away and leaves the space reserved, with the
 * commit's time and stack. A reserve event adds its range; a release
 * removes the range from both trees; an exit drops both. `res` may
 * overlap committed pieces; what is reserved and not committed is `res`
 * minus `com` (map_of()). No commit figure depends on `res`.
 *
 * A reservation record (resv_t from t->resvs) is shared by the pieces
 * one event made, and freed when its last byte goes. */

/* Reserves the parts of [s, e) not in `res` (already reserved space
 * keeps its time and stack), as one record. 0 or CW_ENOMEM. */
static int reserve_fill(cw_tracker_t *t, proc_t *p, uint64_t s, uint64_t e, int64_t ts,
                        uint32_t stack_id)
{
    uint64_t cur = s;
    resv_t *r = NULL;
    while (cur < e) {
        cursor_t c = first_ending_after(&p->res, cur);
        uint64_t cs = c.l ? c.l->start[c.i] : 0;
        if (c.l && cs <= cur) { /* already reserved */
            cur = c.l->v[c.i].end;
            continue;
        }
        uint64_t gap_end = (c.l && cs < e) ? cs : e;
        if (!r) {
            if (!(r = cw_pool_get(&t->resvs))) return CW_ENOMEM;
            *r = (resv_t){.ts = ts, .stack_id = stack_id, .npieces = 0};
            p->map_seq = ++t->map_seq;
        }
        if (r->npieces == UINT32_MAX ||
            bt_insert(t, &p->res, cur, (piece_t){.end = gap_end, .resv = r}) != 0) {
            if (r->npieces == 0) cw_pool_put(&t->resvs, r);
            return CW_ENOMEM;
        }
        r->npieces++;
        cur = gap_end;
    }
    return 0;
}

/* Takes [s, e) out of `res` (a release). 0 or CW_ENOMEM. */
static int unreserve_range(cw_tracker_t *t, proc_t *p, uint64_t s, uint64_t e)
{
    uint64_t cur = s;
    int rc = 0;
    while (p->res.root && rc == 0) {
        uint64_t ns, ne, lo, hi;
        cursor_t c = next_overlap(&p->res, cur, s, e, &ns, &ne, &lo, &hi);
        if (!c.l) break;
        resv_t *r = c.l->v[c.i].resv;
        cur = hi;
        if (ns >= s && ne <= e) { /* the whole piece goes */
            bt_remove_at(t, &p->res, c);
            if (--r->npieces == 0) cw_pool_put(&t->resvs, r);
        } else if (ns < s && ne > e && r->npieces == UINT32_MAX) {
            rc = CW_ENOMEM; /* no count for a second piece: 2^32 - 1 of them */
        } else {
            rc = cut_piece(t, &p->res, c, ns, ne, s, e);
            if (rc == 0 && ns < s && ne > e) r->npieces++; /* split in two */
        }
        p->map_seq = ++t->map_seq;
    }
    return rc;
}

/* Frees `res` and its records (the instance ends). */
static void drop_reserved(cw_tracker_t *t, proc_t *p)
{
    for (leaf_t *l = p->res.root ? descend(&p->res, 0, NULL, NULL) : NULL; l; l = l->next)
        for (uint32_t j = 0; j < l->n; j++) {
            resv_t *r = l->v[j].resv;
            if (--r->npieces == 0) cw_pool_put(&t->resvs, r);
        }
    free_tree(t, &p->res);
    p->res.npieces = 0;
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
    cw_pool_init(&t->leaves, sizeof(leaf_t), POOL_CHUNK(512));
    cw_pool_init(&t->inners, sizeof(inner_t), POOL_CHUNK(256));
    cw_pool_init(&t->recs, sizeof(rec_t), POOL_CHUNK(4096));
    cw_pool_init(&t->resvs, sizeof(resv_t), POOL_CHUNK(4096));
    cw_pool_init(&t->procs, sizeof(proc_t), POOL_CHUNK(256));
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
            free(p->com.hint); /* the trees' nodes go with their pools */
            free(p->res.hint);
        }
    cw_pool_destroy(&t->leaves);
    cw_pool_destroy(&t->inners);
    cw_pool_destroy(&t->recs);
    cw_pool_destroy(&t->resvs);
    cw_pool_destroy(&t->procs);
    free(t->gather);
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
        if (ev->op == CW_OP_COMMIT ? !cw_commit_ok(ev->addr, ev->size)
                                   : !cw_range_ok(ev->addr, ev->size)) {
            /* Empty or wrapping ranges, and commits past CW_COMMIT_END_MAX,
             * change nothing (the reader rejects them; live sources and
             * .etl files may not). So every committed piece lies below
             * CW_COMMIT_END_MAX. */
        } else if (ev->op == CW_OP_COMMIT) {
            rc = commit_range(t, p, ev, (cursor_t){NULL, 0});
        } else if (ev->op == CW_OP_RESERVE) {
            rc = reserve_fill(t, p, ev->addr, ev->addr + ev->size,
                              ev->rundown ? CW_TS_BEFORE : ev->ts, ev->stack_id);
        } else {
            rc = decommit_range(t, p, ev, (cursor_t){NULL, 0});
            if (rc == 0 && ev->op == CW_OP_RELEASE)
                rc = unreserve_range(t, p, ev->addr, ev->addr + ev->size);
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
        for (proc_t *p = t->buckets[i]; p; p = p->hnext) {
            size_t n = gather_recs(t, p);
            for (size_t k = 0; k < n; k++) t->sink.on_live(t->sink.ctx, &p->pub, &t->gather[k]->pub);
        }
}

/* The end of the block whose first piece is at c: that piece and the
 * pieces of the same record that follow without a gap (a block another
 * commit cut into parts, only after lost events, is still one block). */
static uint64_t block_end(cursor_t c)
{
    const rec_t *r = c.l->v[c.i].rec;
    uint64_t end = c.l->v[c.i].end;
    for (;;) {
        if (++c.i == c.l->n) {
            c.l = c.l->next;
            c.i = 0;
        }
        if (!c.l || c.l->start[c.i] != end || c.l->v[c.i].rec != r) break;
        end = c.l->v[c.i].end;
    }
    return end;
}

int cw_tracker_block_at(const cw_tracker_t *t, uint32_t pid, uint64_t addr, uint64_t *size)
{
    proc_t *p = find_live(t, pid);
    if (!p) return CW_ENOENT;
    cursor_t c = first_ending_after(&p->com, addr);
    if (!c.l || c.l->start[c.i] != addr) return CW_ENOENT;
    *size = block_end(c) - addr;
    return 0;
}

int cw_tracker_commit_block(cw_tracker_t *t, const cw_event_t *ev, bool *occupied)
{
    *occupied = false;
    proc_t *p = find_live(t, ev->pid);
    if (!p && !(p = new_instance(t, ev->pid, ev->ts, NULL, NULL, true))) return CW_ENOMEM;
    int rc = 0;
    if (cw_commit_ok(ev->addr, ev->size)) { /* else it changes nothing, as in cw_tracker_apply */
        cursor_t c = first_ending_after(&p->com, ev->addr);
        if (c.l && c.l->start[c.i] == ev->addr) {
            *occupied = true;
            return 0;
        }
        rc = commit_range(t, p, ev, c);
    }
    if (t->sink.on_event) t->sink.on_event(t->sink.ctx, &p->pub, ev->ts);
    return rc;
}

int cw_tracker_release_block(cw_tracker_t *t, const cw_event_t *ev, uint64_t *size)
{
    proc_t *p = find_live(t, ev->pid);
    if (!p) return CW_ENOENT;
    cursor_t c = first_ending_after(&p->com, ev->addr);
    if (!c.l || c.l->start[c.i] != ev->addr) return CW_ENOENT;
    cw_event_t rel = *ev;
    rel.op = CW_OP_RELEASE;
    rel.size = block_end(c) - ev->addr;
    *size = rel.size;
    /* What cw_tracker_apply does for a release, from the piece found. */
    int rc = decommit_range(t, p, &rel, c);
    if (rc == 0) rc = unreserve_range(t, p, rel.addr, rel.addr + rel.size);
    if (t->sink.on_event) t->sink.on_event(t->sink.ctx, &p->pub, ev->ts);
    return rc;
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
    return p ? p->com.npieces : 0;
}

uint64_t cw_tracker_reserved_piece_count(const cw_tracker_t *t, uint32_t pid)
{
    proc_t *p = find_live(t, pid);
    return p ? p->res.npieces : 0;
}

uint32_t cw_tracker_next_proc_id(const cw_tracker_t *t)
{
    return t->next_id;
}

size_t cw_tracker_memory(const cw_tracker_t *t)
{
    return sizeof *t + cw_pool_bytes(&t->leaves) + cw_pool_bytes(&t->inners) +
           cw_pool_bytes(&t->recs) + cw_pool_bytes(&t->resvs) + cw_pool_bytes(&t->procs) +
           ((size_t)t->mask + 1) * sizeof *t->buckets + t->gather_cap * sizeof *t->gather +
           t->hint_bytes;
}

/* ---- maps (map.h) ---------------------------------------------------------- */

static proc_t *find_id(const cw_tracker_t *t, uint32_t proc_id)
{
    for (uint32_t i = 0; i <= t->mask; i++)
        for (proc_t *p = t->buckets[i]; p; p = p->hnext)
            if (p->pub.id == proc_id) return p;
    return NULL;
}

static leaf_t *first_leaf(const tree_t *tr)
{
    return tr->root ? descend(tr, 0, NULL, NULL) : NULL;
}

/* The reserved-but-uncommitted ranges: `res` minus `com`, one walk of
 * both (both sorted by address, each without overlaps). */
static int reserved_of(const proc_t *p, cw_map_t *m)
{
    const leaf_t *cl = first_leaf(&p->com);
    uint32_t cj = 0;
    for (const leaf_t *l = first_leaf(&p->res); l; l = l->next)
        for (uint32_t j = 0; j < l->n; j++) {
            const resv_t *r = l->v[j].resv;
            uint64_t cur = l->start[j], end = l->v[j].end;
            while (cl && cl->v[cj].end <= cur) /* committed pieces before this one */
                if (++cj == cl->n) {
                    cl = cl->next;
                    cj = 0;
                }
            const leaf_t *kl = cl;
            uint32_t kj = cj;
            while (cur < end) {
                uint64_t cs = kl ? kl->start[kj] : end;
                if (cs > end) cs = end;
                if (cs > cur &&
                    cw_map_push_reserved(m, cur, cs - cur, r->ts, r->stack_id) != 0)
                    return CW_ENOMEM;
                if (!kl || kl->start[kj] >= end) break;
                if (kl->v[kj].end > cur) cur = kl->v[kj].end;
                if (++kj == kl->n) {
                    kl = kl->next;
                    kj = 0;
                }
            }
        }
    return 0;
}

static int map_of(const proc_t *p, int64_t at_ns, cw_map_t *m)
{
    m->n = 0;
    m->nres = 0;
    m->proc_id = p->pub.id;
    m->at_ns = at_ns;
    if (CW_RESERVE(m->v, m->cap, p->com.npieces) != 0) return CW_ENOMEM;
    for (const leaf_t *l = first_leaf(&p->com); l; l = l->next)
        for (uint32_t j = 0; j < l->n; j++) {
            const rec_t *r = l->v[j].rec;
            m->v[m->n++] = (cw_map_range_t){l->start[j], l->v[j].end - l->start[j], r->pub.ts,
                                            r->pub.stack_id};
        }
    return reserved_of(p, m);
}

int cw_tracker_map(const cw_tracker_t *t, uint32_t proc_id, int64_t at_ns, cw_map_t *m)
{
    const proc_t *p = find_id(t, proc_id);
    return p ? map_of(p, at_ns, m) : CW_ENOENT;
}

int cw_tracker_maps_due(cw_tracker_t *t, int64_t now_ns, const cw_map_policy_t *pol, bool force,
                        int (*cb)(void *ctx, const cw_map_t *m), void *ctx)
{
    cw_map_t m = {0};
    int rc = 0;
    for (uint32_t i = 0; i <= t->mask && rc == 0; i++)
        for (proc_t *p = t->buckets[i]; p && rc == 0; p = p->hnext) {
            if (p->map_seq == p->snap_seq) continue; /* unchanged since the last one */
            int64_t since = p->snap_seq ? now_ns - p->snap_ns : INT64_MAX;
            uint64_t was = p->snap_bytes, now = p->pub.outstanding;
            uint64_t moved = now > was ? now - was : was - now;
            bool grew_enough = moved >= pol->min_bytes ||
                               (pol->min_percent && moved * 100 >= was * pol->min_percent);
            if (!force && !(since >= pol->min_gap_ns && grew_enough) && since < pol->max_gap_ns)
                continue;
            if ((rc = map_of(p, now_ns, &m)) == 0 && (rc = cb(ctx, &m)) == 0) {
                p->snap_seq = p->map_seq;
                p->snap_ns = now_ns;
                p->snap_bytes = now;
            }
        }
    cw_map_clear(&m);
    return rc;
}
