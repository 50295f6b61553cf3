/* reader.c - what a trace means, for the source and for `etl info`: the
 * two passes over an .etl file and the kernel events interpreted.
 *
 * Pass 1 (the scan) collects what must be known before the events are
 * read in time order: the stack-key definitions (they follow their uses),
 * the processes alive when the trace started (their process_start goes
 * first, at the trace's start, so no event of theirs comes before it),
 * and whether any stack is in the trace at all. Pass 2 merges the CPUs'
 * buffers in time order and interprets each event: processes and images
 * (the address spaces frames are named in), threads, VirtualAlloc and
 * VirtualFree (held in the ring until their stacks have come), StackWalk
 * events (joined to the events they belong to, join.c). The source emits
 * the held events in order as they complete; `etl info` counts.
 *
 * Every event is counted per kernel class, type and version; a payload a
 * decoder refuses is counted as a skip of its class (and logged at the
 * end), never fatal. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "commitwatch/hash.h"
#include "commitwatch/log.h"
#include "sources/etl/etl_internal.h"

#define PROVIDER_COUNTER (UINT32_MAX - 1)
/* How long (in trace time) an event waits for the rest of its stack: a
 * user part comes when the thread returns to user mode (0.4 s at most in
 * the traces checked). */
#define HORIZON_S 2

static int oom(cw_diag_t *d)
{
    return cw_diag_set(d, CW_ENOMEM, "out of memory");
}

/* ---- strings ------------------------------------------------------------------ */

/* ANSI bytes (the code page is not recorded) to UTF-8 in out (2n + 1
 * bytes), reading bytes above 0x7F as Latin-1 so the result is always
 * valid UTF-8. */
static void ansi_to_utf8(const char *s, size_t n, char *out)
{
    size_t j = 0;
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        if (c < 0x80) {
            out[j++] = (char)c;
        } else {
            out[j++] = (char)(0xC0 | c >> 6);
            out[j++] = (char)(0x80 | (c & 0x3F));
        }
    }
    out[j] = '\0';
}

/* A malloc'd UTF-8 copy for the info's image list; NULL on ENOMEM. */
static char *utf16_new(const uint8_t *s, size_t units)
{
    char *out = malloc(3 * units + 1);
    if (out) cw_etl_utf16_to_utf8(s, units, out, 3 * units + 1);
    return out;
}

/* A process's name and command line (NULL when the event has none) in one
 * buffer, *name, of *cap bytes (NULL and 0: a new one), grown as needed:
 * 0 or CW_ENOMEM. */
static int proc_strings(const cw_etl_process_t *p, char **name, size_t *cap, char **cmdline)
{
    size_t nlen = 2 * p->image_len + 1, clen = p->cmdline ? 3 * p->cmdline_units + 1 : 0;
    *cmdline = NULL;
    if (CW_RESERVE(*name, *cap, nlen + clen) != 0) return CW_ENOMEM;
    ansi_to_utf8(p->image, p->image_len, *name);
    if (p->cmdline) {
        *cmdline = *name + nlen;
        cw_etl_utf16_to_utf8(p->cmdline, p->cmdline_units, *cmdline, clen);
    }
    return 0;
}

/* ---- counters ----------------------------------------------------------------- */

static uint32_t counter(cw_etl__reader_t *r, const cw_etl_event_t *ev)
{
    int added = 0;
    uint64_t key = (uint64_t)ev->group << 24 | (uint64_t)ev->type << 16 | ev->version;
    unsigned slot = (ev->type + ev->group) & 15u;
    if (r->counter_key[slot] == key + 1) {
        r->counters[r->counter_idx[slot]].events++;
        return r->counter_idx[slot];
    }
    uint32_t i = cw_keymap_get(&r->counter_map, key, 0, &added);
    if (i == UINT32_MAX) return i;
    if (added) {
        if (CW_RESERVE(r->counters, r->ccap, (size_t)i + 1) != 0) return UINT32_MAX;
        r->counters[i] = (cw_etl_count_t){.group = ev->group, .type = ev->type,
                                          .version = ev->version};
        r->ncounters = (size_t)i + 1;
    }
    r->counter_key[slot] = key + 1;
    r->counter_idx[slot] = i;
    r->counters[i].events++;
    return i;
}

/* Counts an event of counter c its decoder refused (why: its code). 0: a
 * refused event is left out, the trace goes on, so a handler returns
 * skip(...). */
int cw_etl__reader_skip(cw_etl__reader_t *r, uint32_t c, int why)
{
    r->counters[c].skipped++;
    r->counters[c].skip_reason = why;
    return 0;
}

static const char *skip_text(int why)
{
    return why == CW_ENOSYS ? "unknown version"
           : why == CW_ERANGE ? "empty or impossible range"
                              : "payload too short or malformed";
}

void cw_etl__reader_skips(const cw_etl__reader_t *r, char *buf, size_t cap)
{
    size_t at = 0;
    buf[0] = '\0';
    for (size_t i = 0; i < r->ncounters && at + 1 < cap; i++) {
        const cw_etl_count_t *c = &r->counters[i];
        char cls[16];
        if (!c->skipped) continue;
        int n = snprintf(buf + at, cap - at, "%s%s/%u v%u: %llu (%s)", at ? ", " : "",
                         cw_etl_class_name(c->group, c->type, cls), c->type, c->version,
                         (unsigned long long)c->skipped, skip_text(c->skip_reason));
        if (n < 0) break;
        at += (size_t)n < cap - at ? (size_t)n : cap - at - 1;
    }
}

/* ---- pass 1 ------------------------------------------------------------------- */

static int scan_cb(void *ctx, const cw_etl_event_t *ev)
{
    cw_etl__reader_t *r = ctx;
    if (atomic_load(&r->stop)) return CW_ESTOPPED;
    if (!r->any_event || ev->ts < r->first_ts) r->first_ts = ev->ts;
    if (!r->any_event || ev->ts > r->last_ts) r->last_ts = ev->ts;
    r->any_event = true;
    if (!ev->kernel) return 0;
    if (ev->group == CW_ETL_G_STACKWALK) {
        if (ev->type >= CW_ETL_T_KEY_CREATE && ev->type <= CW_ETL_T_KEY_RUNDOWN) {
            cw_etl_stackdef_t def;
            if (cw_etl_decode_stackdef(ev->data, ev->len, ev->version, ev->ptr_size, &def) == 0 &&
                cw_etl__keys_add(&r->keys, def.key, ev->ts, &def) != 0)
                return CW_ENOMEM;
        } else if (ev->type == CW_ETL_T_STACKWALK || ev->type == CW_ETL_T_KEY_KERNEL ||
                   ev->type == CW_ETL_T_KEY_USER) {
            r->have_stacks = true;
        }
    } else if (r->stacks && ev->group == CW_ETL_G_PROCESS && ev->type == CW_ETL_T_DCSTART) {
        cw_etl_process_t p;
        if (cw_etl_decode_process(ev->data, ev->len, ev->version, ev->ptr_size, &p) != 0) return 0;
        for (size_t i = 0; i < r->ndc; i++)
            if (r->dc[i].pid == p.pid) return 0; /* a second rundown (a merged trace) */
        if (CW_RESERVE(r->dc, r->dccap, r->ndc + 1) != 0) return CW_ENOMEM;
        cw_etl__dcproc_t *x = &r->dc[r->ndc++];
        size_t cap = 0;
        *x = (cw_etl__dcproc_t){p.pid, p.ppid, NULL, NULL};
        return proc_strings(&p, &x->name, &cap, &x->cmdline);
    }
    return 0;
}

/* ---- records and stacks ------------------------------------------------------- */

static int64_t ns_of(cw_etl__reader_t *r, uint64_t ts)
{
    return cw_etl__clock_ns(&r->clock, ts);
}

cw_etl__rec_t *cw_etl__reader_push(cw_etl__reader_t *r, const cw_etl_event_t *ev, uint8_t flags)
{
    cw_etl__rec_t *x = cw_etl__ring_push(&r->ring, ev->ts);
    if (!x) return NULL;
    x->cpu = ev->cpu;
    x->flags = flags;
    x->ns = ns_of(r, ev->ts);
    return x;
}

/* A record's ops byte (cw_etl__rec_t): n ops, a first, b second. */
static uint8_t rec_ops(int n, cw_op_t a, cw_op_t b)
{
    return (uint8_t)(n << 6 | (int)b << 3 | (int)a);
}

/* ---- the stack cache ---------------------------------------------------------- */

static uint64_t stack_hash(const cw_etl__aspace_t *as, const uint64_t *fr, uint32_t n)
{
    uint64_t h = cw_hash_combine(cw_hash_combine(cw_hash_u64(n), as->kernel->fp), as->user->fp);
    /* The frames through a cheap multiply-xorshift, mixed fully once at
     * the end: this runs for every walk, and a collision costs only a
     * miss (a slot's walk is compared whole before it is used). */
    uint64_t a = 0;
    for (uint32_t i = 0; i < n; i++) {
        a = (a ^ fr[i]) * 0x9e3779b97f4a7c15ULL;
        a ^= a >> 29;
    }
    return cw_hash_combine(h, a);
}

/* The slot a walk in as would be cached in; it holds that walk when the
 * caller finds n and ids set (a miss clears n). */
static cw_etl__sslot_t *stack_slot(cw_etl__reader_t *r, const cw_etl__aspace_t *as,
                                   const uint64_t *fr, uint32_t n)
{
    uint64_t h = stack_hash(as, fr, n);
    cw_etl__sslot_t *s = &r->scache[h >> (64 - CW_ETL__SCACHE_BITS)];
    bool hit = s->ids && s->hash == h && s->n == n && s->kfp == as->kernel->fp &&
               s->ufp == as->user->fp && memcmp(s->addr, fr, n * sizeof *fr) == 0;
    if (!hit) {
        s->n = 0;
        s->hash = h;
    }
    return s;
}

/* Caches a walk's frame ids in its slot (ids NULL: nothing to cache). */
static int stack_fill(cw_etl__sslot_t *s, const cw_etl__aspace_t *as, const uint64_t *fr,
                      const uint32_t *ids, uint32_t n, uint32_t in_modules)
{
    if (!ids) return 0;
    if (n > s->cap) {
        uint64_t *a = realloc(s->addr, n * sizeof *a);
        if (a) s->addr = a;
        uint32_t *d = a ? realloc(s->ids, n * sizeof *d) : NULL;
        if (!d) return CW_ENOMEM;
        s->ids = d;
        s->cap = n;
    }
    if (!s->ids && !(s->ids = malloc(1))) return CW_ENOMEM; /* n == 0: mark it filled */
    memcpy(s->addr, fr, n * sizeof *fr);
    memcpy(s->ids, ids, n * sizeof *ids);
    s->n = n;
    s->stack_id = 0;
    s->in_modules = in_modules;
    s->kfp = as->kernel->fp;
    s->ufp = as->user->fp;
    return 0;
}

/* Adds one part of a stack to x: frames innermost first, named in the
 * address space of process pid. */
static int add_part(cw_etl__reader_t *r, cw_etl__rec_t *x, const uint64_t *fr, uint32_t n,
                    unsigned ptr, uint32_t pid, uint32_t tid, bool kernel, bool user)
{
    if ((kernel && (x->flags & CW_ETL__REC_KERNEL)) || (!kernel && (x->flags & CW_ETL__REC_USER)))
        return 0; /* a second copy of a part it has */
    if (x->tid == 0) x->tid = tid;
    if (r->info && !(x->flags & (CW_ETL__REC_KERNEL | CW_ETL__REC_USER))) {
        uint32_t counter = cw_etl__ring_side(&r->ring, x)->counter;
        if (counter == PROVIDER_COUNTER) r->provider_with_stack++;
        else if (counter < r->ncounters) r->counters[counter].with_stack++;
    }
    /* One walk that is the event's whole stack: its stack id is the
     * walk's, and cached with it. */
    bool whole = kernel && user && !(x->flags & (CW_ETL__REC_KERNEL | CW_ETL__REC_USER));
    cw_etl__aspace_t as;
    if (cw_etl__aspace(&r->space, pid, &as) != 0) return CW_ENOMEM;
    cw_etl__sslot_t *slot = r->scache ? stack_slot(r, &as, fr, n) : NULL;
    if (whole && slot && slot->n == n && slot->ids && slot->stack_id) {
        x->stack_id = slot->stack_id; /* the frames are not needed */
        r->ss.frames += n;
        r->ss.frames_in_modules += slot->in_modules;
        x->flags |= CW_ETL__REC_KERNEL | CW_ETL__REC_USER;
        return 0;
    }
    /* The frames go to the slot's side record. */
    cw_etl__side_t *sd = cw_etl__ring_side(&r->ring, x);
    uint32_t **ids = kernel ? &sd->kf : &sd->uf;
    uint32_t *nids = kernel ? &x->nk : &x->nu;
    size_t *cap = kernel ? &sd->kcap : &sd->ucap;
    if (r->stacks && CW_RESERVE(*ids, *cap, (size_t)*nids + n) != 0) return CW_ENOMEM;
    if (slot && slot->n == n && slot->ids) {
        memcpy(*ids + *nids, slot->ids, n * sizeof **ids); /* a stack seen before */
        *nids += n;
        r->ss.frames += n;
        r->ss.frames_in_modules += slot->in_modules;
    } else {
        uint32_t in_modules = 0, *first = r->stacks ? *ids + *nids : NULL;
        for (uint32_t i = 0; i < n; i++) {
            uint32_t id;
            bool in_module;
            if (cw_etl__frame(&r->space, &as, r->stacks, fr[i], ptr, &id, &in_module) != 0)
                return CW_ENOMEM;
            in_modules += in_module;
            if (r->stacks) (*ids)[(*nids)++] = id;
        }
        r->ss.frames += n;
        r->ss.frames_in_modules += in_modules;
        if (slot && stack_fill(slot, &as, fr, first, n, in_modules) != 0) return CW_ENOMEM;
    }
    if (whole && r->stacks) {
        /* Outermost first: the walk reversed. */
        if (CW_RESERVE(r->frames, r->frames_cap, n) != 0) return CW_ENOMEM;
        for (uint32_t i = 0; i < n; i++) r->frames[i] = sd->kf[x->nk - 1 - i];
        if (cw_stacks_intern(r->stacks, r->frames, n, &x->stack_id) != 0) return CW_ENOMEM;
        if (slot && slot->n == n) slot->stack_id = x->stack_id;
    }
    if (kernel) x->flags |= CW_ETL__REC_KERNEL;
    if (user) x->flags |= CW_ETL__REC_USER;
    return 0;
}

enum { PART_AUTO, PART_KERNEL, PART_USER };


/* One stack fragment for the event at ts (frames innermost first). */
static int attach(cw_etl__reader_t *r, const uint64_t *fr, uint32_t n, unsigned ptr, uint64_t ts,
                  uint32_t pid, uint32_t tid, uint16_t cpu, int part)
{
    if (n == 0) return 0;
    bool in_k = cw_etl_kernel_address(fr[0], ptr), out_k = cw_etl_kernel_address(fr[n - 1], ptr);
    if (part == PART_AUTO) part = out_k ? PART_KERNEL : !in_k ? PART_USER : PART_AUTO;
    cw_etl__rec_t *x = cw_etl__ring_find(&r->ring, ts, tid, cpu);
    /* The thread's list of events waiting for a user part: only a part
     * of a stack needs it. */
    cw_etl__thread_t *th = NULL;
    if (part != PART_AUTO && !(th = cw_etl__thread(&r->space, tid))) return CW_ENOMEM;
    int rc;
    if (part == PART_USER) {
        /* The user part also completes every kernel-only event the thread
         * logged before it left the kernel. */
        uint64_t seq = th->wait_head, shared = 0;
        th->wait_head = 0;
        if (x && (rc = add_part(r, x, fr, n, ptr, pid, tid, false, true)) != 0) return rc;
        for (cw_etl__rec_t *w; seq && (w = cw_etl__ring_by_seq(&r->ring, seq)) != NULL;) {
            seq = w->next_wait;
            w->next_wait = 0;
            w->flags &= (uint8_t)~CW_ETL__REC_WAITING;
            if (w == x || w->tid != tid || w->ts > ts || !(w->flags & CW_ETL__REC_KERNEL) ||
                (w->flags & CW_ETL__REC_USER))
                continue;
            if ((rc = add_part(r, w, fr, n, ptr, pid, tid, false, true)) != 0) return rc;
            shared++;
        }
        r->ss.shared += shared;
        if (x) r->ss.joined++;
        else if (!shared) r->ss.orphaned++;
        return 0;
    }
    if (!x) {
        r->ss.orphaned++;
        return 0;
    }
    r->ss.joined++;
    /* Kernel-only, or a whole stack (kernel then user frames) in one. */
    if ((rc = add_part(r, x, fr, n, ptr, pid, tid, true, part != PART_KERNEL)) != 0) return rc;
    if (part == PART_KERNEL && !(x->flags & (CW_ETL__REC_USER | CW_ETL__REC_WAITING))) {
        x->flags |= CW_ETL__REC_WAITING;
        x->next_wait = th->wait_head;
        th->wait_head = cw_etl__ring_seq(&r->ring, x);
    }
    return 0;
}

/* Frames of a StackWalk payload, as addresses (scratch). */
static const uint64_t *addrs(cw_etl__reader_t *r, const uint8_t *fr, uint32_t n, unsigned ptr)
{
    if (CW_RESERVE(r->addr, r->addr_cap, n ? n : 1) != 0) return NULL;
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
    if (ptr == 8) {
        /* 64-bit little-endian frames are the host's words: one copy. */
        memcpy(r->addr, fr, (size_t)n * sizeof *r->addr);
        return r->addr;
    }
#endif
    for (uint32_t i = 0; i < n; i++) r->addr[i] = cw_etl_frame(fr, i, ptr);
    return r->addr;
}

static int on_stack(cw_etl__reader_t *r, const cw_etl_event_t *ev, uint32_t c)
{
    int rc;
    if (ev->type == CW_ETL_T_STACKWALK) {
        cw_etl_stackwalk_t sw;
        r->ss.walks++;
        if ((rc = cw_etl_decode_stackwalk(ev->data, ev->len, ev->version, ev->ptr_size, &sw)))
            return cw_etl__reader_skip(r, c, rc);
        const uint64_t *fr = addrs(r, sw.frames, sw.nframes, sw.ptr_size);
        if (!fr) return CW_ENOMEM;
        return attach(r, fr, sw.nframes, sw.ptr_size, sw.event_ts, sw.pid, sw.tid, ev->cpu,
                      PART_AUTO);
    }
    if (ev->type == CW_ETL_T_KEY_KERNEL || ev->type == CW_ETL_T_KEY_USER) {
        cw_etl_stackref_t ref;
        r->ss.key_refs++;
        if ((rc = cw_etl_decode_stackref(ev->data, ev->len, ev->version, ev->ptr_size, &ref)))
            return cw_etl__reader_skip(r, c, rc);
        const cw_etl__keydef_t *def = cw_etl__keys_find(&r->keys, ref.key, ev->ts);
        if (!def) {
            r->ss.unresolved++;
            return 0;
        }
        return attach(r, r->keys.frames + def->off, def->n, def->ptr, ref.event_ts, ref.pid,
                      ref.tid, ev->cpu,
                      ev->type == CW_ETL_T_KEY_KERNEL ? PART_KERNEL : PART_USER);
    }
    if (ev->type >= CW_ETL_T_KEY_CREATE && ev->type <= CW_ETL_T_KEY_RUNDOWN) {
        cw_etl_stackdef_t def;
        r->ss.key_defs++;
        if ((rc = cw_etl_decode_stackdef(ev->data, ev->len, ev->version, ev->ptr_size, &def)))
            cw_etl__reader_skip(r, c, rc);
    }
    return 0;
}

/* ---- the classes -------------------------------------------------------------- */

static int info_proc(cw_etl__reader_t *r, cw_etl__proc_t *slot, const cw_etl_process_t *p,
                     int64_t start, bool rundown)
{
    cw_etl_info_t *in = r->info;
    if (CW_RESERVE(in->procs, r->info_pcap, in->nprocs + 1) != 0) return CW_ENOMEM;
    cw_etl_proc_info_t *x = &in->procs[in->nprocs++];
    size_t cap = 0;
    *x = (cw_etl_proc_info_t){p->pid, p->ppid, NULL, NULL, start, CW_TS_NEVER, rundown};
    slot->info = in->nprocs;
    return proc_strings(p, &x->name, &cap, &x->cmdline);
}

static int on_process(cw_etl__reader_t *r, const cw_etl_event_t *ev, uint32_t c)
{
    cw_etl_process_t p;
    if (ev->type < CW_ETL_T_START || ev->type > CW_ETL_T_DCEND) return 0;
    int rc = cw_etl_decode_process(ev->data, ev->len, ev->version, ev->ptr_size, &p);
    if (rc) return cw_etl__reader_skip(r, c, rc);
    cw_etl__proc_t *slot = cw_etl__proc(&r->space, p.pid);
    if (!slot) return CW_ENOMEM;
    int64_t ns = ns_of(r, ev->ts);
    if (ev->type == CW_ETL_T_START) {
        cw_etl__proc_reset(slot); /* a new instance: the old one's images are gone */
        if (r->info) return info_proc(r, slot, &p, ns, false);
        cw_etl__rec_t *x = cw_etl__reader_push(r, ev, 0);
        if (!x) return CW_ENOMEM;
        cw_etl__side_t *sd = cw_etl__ring_side(&r->ring, x);
        if (proc_strings(&p, &sd->name, &sd->name_cap, &sd->cmdline) != 0) return CW_ENOMEM;
        x->ops = rec_ops(0, CW_OP_PROCESS_START, 0);
        x->pid = p.pid;
        if (p.cmdline) x->flags |= CW_ETL__REC_CMDLINE;
    } else if (ev->type == CW_ETL_T_END) {
        if (r->info) {
            if (!slot->info && (rc = info_proc(r, slot, &p, r->start_ns, true)) != 0) return rc;
            r->info->procs[slot->info - 1].end_ns = ns;
            return 0;
        }
        cw_etl__rec_t *x = cw_etl__reader_push(r, ev, 0);
        if (!x) return CW_ENOMEM;
        x->ops = rec_ops(0, CW_OP_PROCESS_EXIT, 0);
        x->pid = p.pid;
    } else if (ev->type == CW_ETL_T_DCSTART && r->info && !slot->info) {
        return info_proc(r, slot, &p, r->start_ns, true);
    }
    return 0;
}

static int on_image(cw_etl__reader_t *r, const cw_etl_event_t *ev, uint32_t c)
{
    cw_etl_image_t im;
    bool load = ev->type == CW_ETL_T_IMAGE_LOAD || ev->type == CW_ETL_T_DCSTART;
    if (!load && ev->type != CW_ETL_T_END && ev->type != CW_ETL_T_DCEND) return 0;
    int rc = cw_etl_decode_image(ev->data, ev->len, ev->version, ev->ptr_size, &im);
    if (rc) return cw_etl__reader_skip(r, c, rc);
    cw_etl__proc_t *p = cw_etl__proc(&r->space, im.pid);
    if (!p) return CW_ENOMEM;
    if (ev->type == CW_ETL_T_END) {
        size_t i = cw_etl__module_remove(p, im.base);
        if (i && r->info) r->info->images[i - 1].unload_ns = ns_of(r, ev->ts);
        return 0;
    }
    if (!load) return 0;
    cw_etl__module_t *m;
    if (cw_etl__module_add(&r->space, p, im.base, im.size, im.name, im.name_units, &m) != 0)
        return CW_ENOMEM;
    if (!r->info) return 0;
    r->info->images_seen++;
    if (!r->want_images) return 0;
    cw_etl_info_t *in = r->info;
    if (CW_RESERVE(in->images, r->info_icap, in->nimages + 1) != 0) return CW_ENOMEM;
    bool dc = ev->type == CW_ETL_T_DCSTART;
    in->images[in->nimages++] = (cw_etl_image_info_t){
        im.pid, im.base, im.size, utf16_new(im.name, im.name_units),
        dc ? r->start_ns : ns_of(r, ev->ts), CW_TS_NEVER, dc};
    m->info = in->nimages;
    return in->images[in->nimages - 1].name ? 0 : CW_ENOMEM;
}

/* Starts like on_process (the types it takes, the decode, a skip when it fails): one
 * handler per class, the payload's own fields after. */
static int on_thread(cw_etl__reader_t *r, const cw_etl_event_t *ev, uint32_t c)
{
    cw_etl_thread_t t;
    if (ev->type < CW_ETL_T_START || ev->type > CW_ETL_T_DCEND) return 0;
    int rc = cw_etl_decode_thread(ev->data, ev->len, ev->version, ev->ptr_size, &t);
    if (rc) return cw_etl__reader_skip(r, c, rc);
    if (ev->type != CW_ETL_T_START && ev->type != CW_ETL_T_DCSTART) return 0;
    cw_etl__thread_t *th = cw_etl__thread(&r->space, t.tid);
    if (!th) return CW_ENOMEM;
    th->pid = t.pid;
    if (r->info) r->info->threads_seen++;
    return 0;
}

static int on_valloc(cw_etl__reader_t *r, const cw_etl_event_t *ev, uint32_t c)
{
    cw_etl_valloc_t va;
    int rc = cw_etl_decode_valloc(ev->data, ev->len, ev->version, ev->ptr_size, &va);
    if (rc) return cw_etl__reader_skip(r, c, rc);
    if (r->info) {
        if (ev->type == CW_ETL_T_VIRTUAL_ALLOC) r->info->valloc_events++;
        else r->info->vfree_events++;
        return 0;
    }
    cw_op_t ops[2];
    int n = cw_etl_valloc_ops(va.flags, ops);
    if (n == 0) return 0;
    if (!cw_range_ok(va.base, va.size) || va.size > INT64_MAX) {
        cw_etl__reader_skip(r, c, CW_ERANGE); /* the trace format has no room for it */
        return 0;
    }
    /* A file may hold stacks for VirtualFree too; the live session asks
     * for none, so a free waits for nothing there. */
    bool want = ev->type == CW_ETL_T_VIRTUAL_ALLOC || !r->live;
    cw_etl__rec_t *x = cw_etl__reader_push(r, ev, want ? CW_ETL__REC_WANT : 0);
    if (!x) return CW_ENOMEM;
    x->ops = rec_ops(n, ops[0], n > 1 ? ops[1] : 0);
    x->pid = va.pid;
    x->addr = va.base;
    x->size = va.size;
    return 0;
}

static int handle(cw_etl__reader_t *r, const cw_etl_event_t *ev)
{
    if (!ev->kernel) {
        if (!r->info) return 0;
        int added = 0;
        r->info->provider_events++;
        if (cw_keymap_get(&r->guids, cw_etl__rd64(ev->guid), cw_etl__rd64(ev->guid + 8), &added) ==
            UINT32_MAX)
            return CW_ENOMEM;
        r->info->providers += added != 0;
        cw_etl__rec_t *x = cw_etl__reader_push(r, ev, CW_ETL__REC_WANT);
        if (!x) return CW_ENOMEM;
        x->tid = ev->has_ids ? ev->tid : 0;
        cw_etl__ring_side(&r->ring, x)->counter = PROVIDER_COUNTER;
        return 0;
    }
    uint32_t c = counter(r, ev);
    if (c == UINT32_MAX) return CW_ENOMEM;
    if (ev->group == CW_ETL_G_STACKWALK) return on_stack(r, ev, c);
    if (r->info) {
        /* Every event can be a stack's target: `etl info` counts joins. */
        cw_etl__rec_t *x = cw_etl__reader_push(r, ev, CW_ETL__REC_WANT);
        if (!x) return CW_ENOMEM;
        x->tid = ev->has_ids ? ev->tid : 0;
        cw_etl__ring_side(&r->ring, x)->counter = c;
    }
    switch (ev->group) {
    case CW_ETL_G_PROCESS:
        return ev->type == CW_ETL_T_IMAGE_LOAD ? on_image(r, ev, c) : on_process(r, ev, c);
    case CW_ETL_G_IMAGE:
        return on_image(r, ev, c);
    case CW_ETL_G_THREAD:
        return on_thread(r, ev, c);
    case CW_ETL_G_PAGEFAULT:
        if ((ev->type == CW_ETL_T_VIRTUAL_ALLOC || ev->type == CW_ETL_T_VIRTUAL_FREE) &&
            !r->heap)
            return on_valloc(r, ev, c);
        return 0;
    case CW_ETL_G_HEAP:
        return r->heap ? r->heap->on_event(r, ev, c) : 0;
    default:
        return 0;
    }
}

/* ---- emitting ------------------------------------------------------------------- */

static int emit_event(cw_etl__reader_t *r, cw_event_t *ev)
{
    /* Time order is the pipeline's rule: an event merged out of order
     * (counted by the file) takes the time of the one before it. */
    if (ev->ts < r->last_ns) ev->ts = r->last_ns;
    r->last_ns = ev->ts;
    r->emitted++;
    return r->emit(r->ctx, ev);
}

/* A held record's stack, interned: outermost first, the user part
 * reversed, then the kernel part. 0 or CW_ENOMEM. */
static int rec_stack(cw_etl__reader_t *r, const cw_etl__rec_t *x, uint32_t *id)
{
    const cw_etl__side_t *sd = cw_etl__ring_side(&r->ring, x);
    size_t n = (size_t)x->nu + x->nk, j = 0;
    if (CW_RESERVE(r->frames, r->frames_cap, n ? n : 1) != 0) return CW_ENOMEM;
    for (size_t i = x->nu; i-- > 0;) r->frames[j++] = sd->uf[i];
    for (size_t i = x->nk; i-- > 0;) r->frames[j++] = sd->kf[i];
    return cw_stacks_intern(r->stacks, r->frames, (uint32_t)n, id) != 0 ? CW_ENOMEM : 0;
}

static int emit_rec(cw_etl__reader_t *r, cw_etl__rec_t *x)
{
    if (x->flags & CW_ETL__REC_HEAP) {
        uint32_t id = x->stack_id;
        if (!id && rec_stack(r, x, &id) != 0) return CW_ENOMEM;
        if (x->ns < r->last_ns) x->ns = r->last_ns; /* time order, as emit_event keeps it */
        r->last_ns = x->ns;
        return r->heap->emit(r, x, id);
    }
    cw_event_t ev = {.ts = x->ns, .op = (cw_op_t)(x->ops & 7), .pid = x->pid, .addr = x->addr,
                     .size = x->size, .stack_id = x->stack_id};
    int nops = x->ops >> 6;
    if (!nops) {
        if (ev.op == CW_OP_PROCESS_START) {
            const cw_etl__side_t *sd = cw_etl__ring_side(&r->ring, x);
            ev.name = sd->name;
            ev.cmdline = x->flags & CW_ETL__REC_CMDLINE ? sd->cmdline : NULL;
        }
        return emit_event(r, &ev);
    }
    if (!ev.stack_id && rec_stack(r, x, &ev.stack_id) != 0) return CW_ENOMEM;
    ev.tid = x->tid;
    for (int k = 0; k < nops; k++) {
        ev.op = (cw_op_t)(x->ops >> (3 * k) & 7);
        int rc = emit_event(r, &ev);
        if (rc) return rc;
    }
    return 0;
}

/* Releases the records at the head that are complete or whose stack can
 * no longer come (now is the newest time merged); all of them at the end. */
static int release(cw_etl__reader_t *r, uint64_t now, bool all)
{
    cw_etl__rec_t *x;
    while ((x = cw_etl__ring_head(&r->ring)) != NULL) {
        bool ready = all || !(x->flags & CW_ETL__REC_WANT) || (x->flags & CW_ETL__REC_USER) ||
                     (now > x->ts && now - x->ts > r->horizon);
        if (!ready) break;
        if (!r->info) {
            int rc = emit_rec(r, x);
            if (rc) return rc;
        }
        cw_etl__ring_pop(&r->ring);
    }
    return 0;
}

/* ---- open, run, close ------------------------------------------------------------- */

int cw_etl__reader_open(cw_etl__reader_t *r, const char *path, cw_stacks_t *stacks,
                        cw_etl_info_t *info, cw_diag_t *d)
{
    memset(r, 0, sizeof *r);
    atomic_init(&r->stop, false);
    r->path = path;
    r->stacks = stacks;
    r->info = info;
    if (stacks && !(r->scache = calloc((size_t)1 << CW_ETL__SCACHE_BITS, sizeof *r->scache)))
        return oom(d);
    if (cw_etl__space_init(&r->space) != 0 || cw_keymap_init(&r->counter_map, 16) != 0 ||
        cw_keymap_init(&r->guids, 16) != 0)
        return oom(d);
    int rc = cw_etl_file_open(path, &r->file, d);
    if (rc) return rc;
    return cw_etl__clock_init(&r->clock, cw_etl_file_header(r->file));
}

static int by_class(const void *a, const void *b)
{
    const cw_etl_count_t *x = a, *y = b;
    if (x->group != y->group) return x->group < y->group ? -1 : 1;
    if (x->type != y->type) return x->type < y->type ? -1 : 1;
    return x->version < y->version ? -1 : x->version > y->version;
}

static int finish_info(cw_etl__reader_t *r)
{
    cw_etl_info_t *in = r->info;
    in->header = *cw_etl_file_header(r->file);
    in->file = *cw_etl_file_stats(r->file);
    in->first_ns = r->any_event ? ns_of(r, r->first_ts) : 0;
    in->last_ns = r->any_event ? ns_of(r, r->last_ts) : 0;
    in->stacks = r->ss;
    in->provider_with_stack = r->provider_with_stack;
    if (!(in->counts = malloc((r->ncounters ? r->ncounters : 1) * sizeof *in->counts)))
        return CW_ENOMEM;
    memcpy(in->counts, r->counters, r->ncounters * sizeof *in->counts);
    in->ncounts = r->ncounters;
    qsort(in->counts, in->ncounts, sizeof *in->counts, by_class);
    for (size_t i = 0; i < in->ncounts; i++) {
        const cw_etl_count_t *c = &in->counts[i];
        in->skipped += c->skipped;
        if (c->group == CW_ETL_G_PAGEFAULT &&
            (c->type == CW_ETL_T_VIRTUAL_ALLOC || c->type == CW_ETL_T_VIRTUAL_FREE))
            in->valloc_with_stack += c->with_stack;
    }
    return 0;
}

int cw_etl__reader_run(cw_etl__reader_t *r, cw_diag_t *d)
{
    cw_etl_event_t ev;
    int rc = cw_etl_file_scan(r->file, scan_cb, r, d);
    if (rc == CW_ESTOPPED) return 0;
    if (rc == CW_ENOMEM) return oom(d);
    if (rc) return rc;
    cw_etl__keys_sort(&r->keys);
    const cw_etl_header_t *h = cw_etl_file_header(r->file);
    uint64_t t0 = r->any_event && r->first_ts < h->header_ts ? r->first_ts : h->header_ts;
    r->start_ns = r->last_ns = ns_of(r, t0);
    r->horizon = r->have_stacks ? HORIZON_S * (uint64_t)r->clock.freq : 0;
    if ((rc = cw_etl_file_rewind(r->file, d)) != 0) return rc;

    /* The processes alive when the trace started, first and at its start. */
    for (size_t i = 0; i < r->ndc && !r->info; i++) {
        cw_event_t pe = {.ts = r->start_ns, .op = CW_OP_PROCESS_START, .pid = r->dc[i].pid,
                         .name = r->dc[i].name, .cmdline = r->dc[i].cmdline};
        if ((rc = emit_event(r, &pe)) != 0) return rc;
    }
    while (!atomic_load(&r->stop)) {
        rc = cw_etl_file_next(r->file, &ev, d);
        if (rc < 0) return rc;
        if (rc == 0) break;
        if ((rc = handle(r, &ev)) != 0 || (rc = release(r, ev.ts, false)) != 0) goto fail;
    }
    /* What is held goes out too (also after a stop: the output is whole
     * up to where the reading stopped). */
    if ((rc = release(r, 0, true)) != 0) goto fail;
    if (atomic_load(&r->stop)) return 0;
    if (r->info && (rc = finish_info(r)) != 0) goto fail;
    return 0;
fail:
    if (rc == CW_ENOMEM) return oom(d);
    return rc; /* the sink's own code */
}

/* A teardown list (alike to other destroy functions in form only). */
void cw_etl__reader_close(cw_etl__reader_t *r)
{
    cw_etl_file_close(r->file);
    cw_etl__space_free(&r->space);
    if (r->scache)
        for (size_t i = 0; i < (size_t)1 << CW_ETL__SCACHE_BITS; i++) {
            free(r->scache[i].addr);
            free(r->scache[i].ids);
        }
    free(r->scache);
    cw_etl__keys_free(&r->keys);
    cw_etl__ring_free(&r->ring);
    /* A process's cmdline is in its name's block. */
    for (size_t i = 0; i < r->ndc; i++) free(r->dc[i].name);
    free(r->dc);
    free(r->counters);
    cw_keymap_free(&r->counter_map);
    cw_keymap_free(&r->guids);
    free(r->frames);
    free(r->addr);
    memset(r, 0, sizeof *r);
}

/* ---- live: events fed one at a time (sources/etw/live.c) ---------------------------- */

int cw_etl__reader_open_live(cw_etl__reader_t *r, cw_stacks_t *stacks,
                             const cw_etl__clock_t *clock, cw_diag_t *d)
{
    memset(r, 0, sizeof *r);
    atomic_init(&r->stop, false);
    r->path = "the ETW session";
    r->stacks = stacks;
    if (!(r->scache = calloc((size_t)1 << CW_ETL__SCACHE_BITS, sizeof *r->scache)))
        return oom(d);
    if (cw_etl__space_init(&r->space) != 0 || cw_keymap_init(&r->counter_map, 16) != 0 ||
        cw_keymap_init(&r->guids, 16) != 0)
        return oom(d);
    r->clock = *clock;
    r->live = true;
    r->have_stacks = true;
    r->horizon = HORIZON_S * (uint64_t)clock->freq;
    r->start_ns = r->last_ns = cw_etl__clock_ns(clock, clock->base_ts);
    return 0;
}

int cw_etl__reader_feed(cw_etl__reader_t *r, const cw_etl_event_t *ev)
{
    if (!r->any_event || ev->ts < r->first_ts) r->first_ts = ev->ts;
    if (!r->any_event || ev->ts > r->last_ts) r->last_ts = ev->ts;
    r->any_event = true;
    int rc = handle(r, ev);
    return rc ? rc : release(r, ev->ts, false);
}

int cw_etl__reader_release(cw_etl__reader_t *r, uint64_t now, bool all)
{
    return release(r, now, all);
}
