/* shadow.c - the VMA shadow of one process and the kernel's commit rules.
 *
 * Owns, per process, a sorted array of page runs (segments) with the VMA
 * flags that decide the commit charge (VM_ACCOUNT, as smaps "ac" shows
 * it), and turns each successful mmap / munmap / mprotect / mremap / brk
 * into the commit / decommit / reserve / release events that say how the
 * charge changed, following mm/mmap.c, mm/mprotect.c and mm/mremap.c
 * (ARCHITECTURE.md "Linux: the syscalls"). Pure logic, no OS call: the
 * one fact it cannot derive (has an anonymous VMA been faulted in?) is
 * asked through env->query_acct.
 *
 * Event shapes: a new mapping is one `commit` (charged) or `reserve`
 * (not charged) of the whole range; address space going away (munmap,
 * MAP_FIXED replacing, mremap moving or shrinking, brk shrinking) is one
 * `release` of the range; a charge dropped while the mapping stays
 * (mprotect on a never-faulted anonymous VMA, a resync) is a `decommit`.
 * The [stack] VMA is kept (so its pages are known) but never emitted. */
#include <stdlib.h>
#include <string.h>

#include "commitwatch/error.h"
#include "sources/perf/perf_types.h"

/* Linux UAPI values (asm-generic/mman-common.h, x86 and arm64 alike);
 * spelled out so this file stays free of OS headers and unit-testable. */
#define K_PROT_WRITE 0x2
#define K_MAP_TYPE 0x0f
#define K_MAP_SHARED 0x01
#define K_MAP_SHARED_VALIDATE 0x03
#define K_MAP_ANONYMOUS 0x20
#define K_MAP_NORESERVE 0x4000
#define K_MAP_HUGETLB 0x40000
#define K_MREMAP_FIXED 2
#define K_MREMAP_DONTUNMAP 4

static bool charged(uint32_t flags)
{
    return (flags & CW__SEG_ACCT) && !(flags & CW__SEG_STACK);
}

static int emit(const cw_perf__shadow_env_t *env, const cw_perf__shadow_t *s,
                const cw_perf__call_t *c, cw_op_t op, uint64_t addr, uint64_t size, uint32_t stack,
                bool rundown)
{
    if (size == 0) return 0;
    cw_event_t ev = {0};
    ev.ts = c->ts;
    ev.op = op;
    ev.pid = s->pid;
    ev.tid = c->tid;
    ev.addr = addr;
    ev.size = size;
    ev.stack_id = stack;
    ev.rundown = rundown;
    return env->emit(env->ctx, &ev);
}

void cw_perf__shadow_init(cw_perf__shadow_t *s, uint32_t pid)
{
    memset(s, 0, sizeof *s);
    s->pid = pid;
}

void cw_perf__shadow_free(cw_perf__shadow_t *s)
{
    if (!s) return;
    free(s->seg);
    s->seg = NULL;
    s->n = s->cap = 0;
}

void cw_perf__shadow_clear(cw_perf__shadow_t *s)
{
    s->n = 0;
    s->brk = 0;
    s->acct_bytes = 0;
}

int cw_perf__shadow_copy(cw_perf__shadow_t *dst, const cw_perf__shadow_t *src)
{
    int rc = CW_RESERVE(dst->seg, dst->cap, src->n);
    if (rc) return rc;
    if (src->n) memcpy(dst->seg, src->seg, src->n * sizeof *src->seg);
    dst->n = src->n;
    dst->brk = src->brk;
    dst->acct_bytes = src->acct_bytes;
    return 0;
}

/* Index of the first segment whose end is above addr (n if none). */
static size_t lower(const cw_perf__shadow_t *s, uint64_t addr)
{
    return cw_perf__lower_end(s->seg, s->n, sizeof *s->seg, offsetof(cw_perf__seg_t, end), addr);
}

/* Makes addr a segment boundary (splits the segment straddling it). */
static int split_at(cw_perf__shadow_t *s, uint64_t addr)
{
    size_t i = lower(s, addr);
    if (i == s->n || s->seg[i].start >= addr) return 0;
    int rc = CW_RESERVE(s->seg, s->cap, s->n + 1);
    if (rc) return rc;
    memmove(&s->seg[i + 1], &s->seg[i], (s->n - i) * sizeof *s->seg);
    s->n++;
    s->seg[i].end = addr;
    s->seg[i + 1].start = addr;
    return 0;
}

/* Splits at a and b; first and last (exclusive) get the segments inside. */
static int carve(cw_perf__shadow_t *s, uint64_t a, uint64_t b, size_t *first, size_t *last)
{
    int rc = split_at(s, a);
    if (!rc) rc = split_at(s, b);
    if (rc) return rc;
    *first = lower(s, a);
    size_t j = *first;
    while (j < s->n && s->seg[j].start < b)
        j++;
    *last = j;
    return 0;
}

/* Removes [a, b); sets removed to whether any segment was there. */
static int remove_range(cw_perf__shadow_t *s, uint64_t a, uint64_t b, bool *removed)
{
    size_t i, j;
    *removed = false;
    if (a >= b) return 0;
    int rc = carve(s, a, b, &i, &j);
    if (rc) return rc;
    for (size_t k = i; k < j; k++)
        if (charged(s->seg[k].flags)) s->acct_bytes -= s->seg[k].end - s->seg[k].start;
    if (j > i) {
        memmove(&s->seg[i], &s->seg[j], (s->n - j) * sizeof *s->seg);
        s->n -= j - i;
        *removed = true;
    }
    return 0;
}

/* Inserts seg where nothing is mapped (callers removed the range first). */
static int insert(cw_perf__shadow_t *s, cw_perf__seg_t seg)
{
    int rc = CW_RESERVE(s->seg, s->cap, s->n + 1);
    if (rc) return rc;
    size_t i = lower(s, seg.start);
    memmove(&s->seg[i + 1], &s->seg[i], (s->n - i) * sizeof *s->seg);
    s->seg[i] = seg;
    s->n++;
    if (charged(seg.flags)) s->acct_bytes += seg.end - seg.start;
    return 0;
}

/* Address space [a, b) goes away: one release if anything was mapped. */
static int unmap(cw_perf__shadow_t *s, const cw_perf__shadow_env_t *env, const cw_perf__call_t *c,
                 uint64_t a, uint64_t b)
{
    bool removed;
    int rc = remove_range(s, a, b, &removed);
    if (rc || !removed) return rc;
    return emit(env, s, c, CW_OP_RELEASE, a, b - a, 0, false);
}

/* A new mapping [a, b) with flags: commit when charged, else reserve. */
static int map_new(cw_perf__shadow_t *s, const cw_perf__shadow_env_t *env, const cw_perf__call_t *c,
                   uint64_t a, uint64_t b, uint32_t flags, uint32_t stack)
{
    int rc = insert(s, (cw_perf__seg_t){a, b, flags, stack});
    if (rc) return rc;
    return emit(env, s, c, charged(flags) ? CW_OP_COMMIT : CW_OP_RESERVE, a, b - a, stack, false);
}

int cw_perf__shadow_mmap(cw_perf__shadow_t *s, const cw_perf__shadow_env_t *env,
                         const cw_perf__call_t *c, uint64_t addr, uint64_t len, uint64_t prot,
                         uint64_t flags)
{
    uint64_t a = CW__PAGE_DOWN(addr), b = CW__PAGE_UP(addr + len);
    if (b <= a) return 0;
    uint32_t f = 0;
    uint64_t type = flags & K_MAP_TYPE;
    if (type == K_MAP_SHARED || type == K_MAP_SHARED_VALIDATE) f |= CW__SEG_SHARED;
    if (prot & K_PROT_WRITE) f |= CW__SEG_WRITE;
    if ((flags & K_MAP_NORESERVE) && !env->overcommit_never) f |= CW__SEG_NORES;
    if (flags & K_MAP_HUGETLB) f |= CW__SEG_HUGE | CW__SEG_NORES;
    if (flags & K_MAP_ANONYMOUS) f |= CW__SEG_ANON;
    /* mm/mmap.c accountable_mapping(): (flags & (NORESERVE|SHARED|WRITE)) == WRITE,
     * hugetlb excluded (it has its own reservation). */
    if ((f & (CW__SEG_NORES | CW__SEG_SHARED | CW__SEG_WRITE | CW__SEG_HUGE)) == CW__SEG_WRITE)
        f |= CW__SEG_ACCT;
    /* MAP_FIXED (or a stale shadow) replaces whatever was there. */
    int rc = unmap(s, env, c, a, b);
    if (rc) return rc;
    return map_new(s, env, c, a, b, f, c->stack_id);
}

int cw_perf__shadow_munmap(cw_perf__shadow_t *s, const cw_perf__shadow_env_t *env,
                           const cw_perf__call_t *c, uint64_t addr, uint64_t len)
{
    uint64_t a = CW__PAGE_DOWN(addr), b = CW__PAGE_UP(addr + len);
    return unmap(s, env, c, a, b);
}

int cw_perf__shadow_mprotect(cw_perf__shadow_t *s, const cw_perf__shadow_env_t *env,
                             const cw_perf__call_t *c, uint64_t addr, uint64_t len, uint64_t prot)
{
    uint64_t a = CW__PAGE_DOWN(addr), b = CW__PAGE_UP(addr + len);
    size_t i, j;
    if (b <= a) return 0;
    int rc = carve(s, a, b, &i, &j);
    if (rc) return rc;
    for (size_t k = i; k < j; k++) {
        cw_perf__seg_t *g = &s->seg[k];
        uint32_t old = g->flags;
        uint64_t size = g->end - g->start;
        if (prot & K_PROT_WRITE) {
            g->flags |= CW__SEG_WRITE;
            /* mprotect_fixup(): a private mapping made writable is charged
             * unless it already was, or was writable, shared, hugetlb or
             * NORESERVE. */
            if (!(old &
                  (CW__SEG_ACCT | CW__SEG_WRITE | CW__SEG_HUGE | CW__SEG_SHARED | CW__SEG_NORES))) {
                g->flags |= CW__SEG_ACCT;
                g->stack_id = c->stack_id;
                if (charged(g->flags)) {
                    s->acct_bytes += size;
                    rc = emit(env, s, c, CW_OP_COMMIT, g->start, size, c->stack_id, false);
                    if (rc) return rc;
                }
            }
        } else {
            g->flags &= ~(uint32_t)CW__SEG_WRITE;
            /* Removing write keeps the charge, except on an anonymous VMA
             * that has no anon_vma yet (never faulted in). Only the kernel
             * knows: ask (smaps), keep the charge when it cannot tell. */
            if ((old & CW__SEG_ACCT) && (old & CW__SEG_ANON) && env->query_acct) {
                uint64_t start = g->start;
                if (env->query_acct(env->ctx, s->pid, c->ts, start, size) == 0) {
                    g = &s->seg[k]; /* query_acct does not touch s, but be plain */
                    g->flags &= ~(uint32_t)CW__SEG_ACCT;
                    if (!(old & CW__SEG_STACK)) {
                        s->acct_bytes -= size;
                        rc = emit(env, s, c, CW_OP_DECOMMIT, start, size, 0, false);
                        if (rc) return rc;
                    }
                }
            }
        }
    }
    return 0;
}

int cw_perf__shadow_mremap(cw_perf__shadow_t *s, const cw_perf__shadow_env_t *env,
                           const cw_perf__call_t *c, uint64_t old_addr, uint64_t old_len,
                           uint64_t new_len, uint64_t flags, uint64_t result)
{
    uint64_t oa = CW__PAGE_DOWN(old_addr), ol = CW__PAGE_UP(old_len), nl = CW__PAGE_UP(new_len);
    uint64_t na = result;
    int rc;
    /* The flags the grown part inherits: those of the old range's last page
     * (old_len == 0 duplicates a shared mapping: the page at old_addr). */
    uint64_t probe = ol ? oa + ol - 1 : oa;
    size_t pi = lower(s, probe);
    bool known = pi < s->n && s->seg[pi].start <= probe;
    uint32_t gflags = known ? s->seg[pi].flags : 0;
    gflags &= ~(uint32_t)(CW__SEG_STACK | CW__SEG_HEAP);

    if (na == oa && ol) {
        if (nl < ol) return unmap(s, env, c, oa + nl, oa + ol);
        if (nl > ol && known) {
            if ((rc = unmap(s, env, c, oa + ol, oa + nl))) return rc;
            return map_new(s, env, c, oa + ol, oa + nl, gflags, c->stack_id);
        }
        return 0;
    }

    /* A move (or a duplicate when old_len == 0). The destination is
     * unmapped first (MREMAP_FIXED replaces it). */
    if ((rc = unmap(s, env, c, na, na + nl))) return rc;
    uint64_t keep = ol < nl ? ol : nl;
    size_t i, j, cnt = 0;
    cw_perf__seg_t *moved = NULL;
    if (keep) {
        if ((rc = carve(s, oa, oa + keep, &i, &j))) return rc;
        cnt = j - i;
        moved = malloc((cnt ? cnt : 1) * sizeof *moved);
        if (!moved) return CW_ENOMEM;
        memcpy(moved, &s->seg[i], cnt * sizeof *moved);
    }
    if (!(flags & K_MREMAP_DONTUNMAP) && ol) rc = unmap(s, env, c, oa, oa + ol);
    for (size_t k = 0; !rc && k < cnt; k++) {
        cw_perf__seg_t g = moved[k];
        g.start = g.start - oa + na;
        g.end = g.end - oa + na;
        g.flags &= ~(uint32_t)(CW__SEG_STACK | CW__SEG_HEAP);
        /* The move carries the attribution of the original commit. */
        rc = map_new(s, env, c, g.start, g.end, g.flags, g.stack_id);
    }
    free(moved);
    if (rc) return rc;
    if (nl > ol && known) return map_new(s, env, c, na + ol, na + nl, gflags, c->stack_id);
    return 0;
}

int cw_perf__shadow_brk(cw_perf__shadow_t *s, const cw_perf__shadow_env_t *env,
                        const cw_perf__call_t *c, uint64_t arg, uint64_t result)
{
    (void)arg;
    uint64_t r = CW__PAGE_UP(result);
    if (s->brk == 0) { /* unknown start: learn it, nothing to compare */
        s->brk = r;
        return 0;
    }
    uint64_t old = s->brk;
    s->brk = r;
    if (r > old) {
        int rc = unmap(s, env, c, old, r);
        if (rc) return rc;
        /* do_brk_flags(): VM_ACCOUNT always. */
        return map_new(s, env, c, old, r,
                       CW__SEG_ACCT | CW__SEG_WRITE | CW__SEG_ANON | CW__SEG_HEAP, c->stack_id);
    }
    if (r < old) return unmap(s, env, c, r, old);
    return 0;
}

int cw_perf__shadow_commit_all(cw_perf__shadow_t *s, const cw_perf__shadow_env_t *env,
                               const cw_perf__call_t *c, uint32_t stack_id)
{
    for (size_t k = 0; k < s->n; k++) {
        cw_perf__seg_t *g = &s->seg[k];
        if (!charged(g->flags)) continue;
        g->stack_id = stack_id;
        int rc = emit(env, s, c, CW_OP_COMMIT, g->start, g->end - g->start, stack_id, false);
        if (rc) return rc;
    }
    return 0;
}

/* ---- sync: make the shadow equal to a snapshot ---------------------------- */

typedef struct pending {
    cw_op_t op;
    uint64_t a, b;
    bool open;
} pending_t;

static int flush(pending_t *p, const cw_perf__shadow_env_t *env, const cw_perf__shadow_t *s,
                 const cw_perf__call_t *c, uint32_t pseudo, bool rundown)
{
    if (!p->open) return 0;
    p->open = false;
    if (p->op == CW_OP_COMMIT)
        return emit(env, s, c, CW_OP_COMMIT, p->a, p->b - p->a, pseudo, rundown);
    if (p->op == CW_OP_RESERVE) /* the trace format flags rundown commits only */
        return emit(env, s, c, CW_OP_RESERVE, p->a, p->b - p->a, pseudo, false);
    return emit(env, s, c, CW_OP_DECOMMIT, p->a, p->b - p->a, 0, false);
}

static int add_pending(pending_t *p, cw_op_t op, uint64_t a, uint64_t b,
                       const cw_perf__shadow_env_t *env, const cw_perf__shadow_t *s,
                       const cw_perf__call_t *c, uint32_t pseudo, bool rundown)
{
    if (p->open && p->op == op && p->b == a) {
        p->b = b;
        return 0;
    }
    int rc = flush(p, env, s, c, pseudo, rundown);
    *p = (pending_t){op, a, b, true};
    return rc;
}

static int push_seg(cw_perf__seg_t **out, size_t *n, size_t *cap, cw_perf__seg_t g)
{
    if (*n && (*out)[*n - 1].end == g.start && (*out)[*n - 1].flags == g.flags &&
        (*out)[*n - 1].stack_id == g.stack_id) {
        (*out)[*n - 1].end = g.end;
        return 0;
    }
    if (CW_RESERVE(*out, *cap, *n + 1)) return CW_ENOMEM;
    (*out)[(*n)++] = g;
    return 0;
}

int cw_perf__shadow_sync(cw_perf__shadow_t *s, const cw_perf__shadow_env_t *env,
                         const cw_perf__call_t *c, const cw_perf__seg_t *segs, size_t n,
                         uint64_t brk, uint32_t pseudo_stack, bool rundown, uint64_t *drift)
{
    cw_perf__seg_t *out = NULL;
    size_t on = 0, ocap = 0, i = 0, j = 0;
    uint64_t acct = 0, moved = 0;
    pending_t p = {0};
    int rc = 0;
    /* Sweep both sorted lists over their elementary intervals. */
    uint64_t x = 0;
    for (;;) {
        while (i < s->n && s->seg[i].end <= x)
            i++;
        while (j < n && segs[j].end <= x)
            j++;
        if (i == s->n && j == n) break;
        /* Next interval start: x itself if covered, else the nearest start. */
        uint64_t os = i < s->n ? s->seg[i].start : UINT64_MAX;
        uint64_t ns = j < n ? segs[j].start : UINT64_MAX;
        if (x < os && x < ns) x = os < ns ? os : ns;
        bool in_o = i < s->n && s->seg[i].start <= x;
        bool in_n = j < n && segs[j].start <= x;
        uint64_t y = UINT64_MAX;
        if (in_o)
            y = s->seg[i].end;
        else if (i < s->n)
            y = s->seg[i].start;
        if (in_n)
            y = segs[j].end < y ? segs[j].end : y;
        else if (j < n && segs[j].start < y)
            y = segs[j].start;
        bool oa = in_o && charged(s->seg[i].flags);
        bool na = in_n && charged(segs[j].flags);
        if (in_n) {
            cw_perf__seg_t g = segs[j];
            g.start = x;
            g.end = y;
            g.stack_id = oa && na ? s->seg[i].stack_id : pseudo_stack;
            if ((rc = push_seg(&out, &on, &ocap, g))) goto done;
            if (na) acct += y - x;
        }
        if (na && !oa)
            rc = add_pending(&p, CW_OP_COMMIT, x, y, env, s, c, pseudo_stack, rundown);
        else if (rundown && in_n && !na && !in_o && !(segs[j].flags & CW__SEG_STACK))
            /* Mapped but not charged when tracing starts: reserved address
             * space (the memory map draws it faint), as an mmap of it
             * would have said (map_new). */
            rc = add_pending(&p, CW_OP_RESERVE, x, y, env, s, c, pseudo_stack, rundown);
        else if (oa && !na)
            rc = add_pending(&p, CW_OP_DECOMMIT, x, y, env, s, c, pseudo_stack, rundown);
        if (rc) goto done;
        if (na != oa) moved += y - x;
        x = y;
    }
    rc = flush(&p, env, s, c, pseudo_stack, rundown);
done:
    if (rc) {
        free(out);
        return rc;
    }
    free(s->seg);
    s->seg = out;
    s->n = on;
    s->cap = ocap;
    s->acct_bytes = acct;
    if (brk) s->brk = brk;
    if (drift) *drift += moved;
    return 0;
}
