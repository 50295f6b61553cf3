/* etl_internal.h - what the .etl reader's files share (cw_etl__ names).
 *
 * header.c   event headers, TRACE_LOGFILE_HEADER, the clock
 * file.c     buffers, the scan (pass 1), the per-CPU merge (pass 2)
 * space.c    processes and their images, threads, frame text
 * join.c     stack-key definitions and the ring of events waiting for
 *            their StackWalk events
 * reader.c   the interpretation both the source and `etl info` run
 * heap.c     the Heap class's events, for a heap model (cw_etl_heap_read)
 * source.c   cw_source_etl; info.c: cw_etl_info()
 * pe.c       export tables of PE images (pe.h); images.c: `--images DIR`
 *
 * Thread: all of it belongs to the one thread that runs the reader. */
#ifndef CW_SOURCES_ETL_INTERNAL_H
#define CW_SOURCES_ETL_INTERNAL_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "commitwatch/common.h"
#include "commitwatch/etl.h"
#include "commitwatch/heap.h"
#include "commitwatch/keymap.h"
#include "commitwatch/stacks.h"

/* ---- header.c ---- */

uint32_t cw_etl__rd32(const uint8_t *p);
uint64_t cw_etl__rd64(const uint8_t *p);

/* The event at buf[at..end): 1 and *ev, *adv (bytes to the next event)
 * set; 2 for a record to step over (a WPP message; *adv set); 0 at the
 * end of the buffer's events; CW_EPARSE for a malformed header. */
/* The kernel group of a class GUID (16 bytes as stored), or -1. */
int cw_etl__kernel_group(const uint8_t guid[16]);
int cw_etl__parse_event(const uint8_t *buf, size_t at, size_t end, cw_etl_event_t *ev,
                        size_t *adv);
/* TRACE_LOGFILE_HEADER from the header event (group 0, type 0). 0 or
 * CW_EPARSE. */
int cw_etl__parse_logfile_header(const cw_etl_event_t *ev, cw_etl_header_t *h);
int64_t cw_etl__filetime_ns(int64_t ft);

/* The highest tick rate accepted: r * 1e9 must fit in an int64_t. */
#define CW_ETL__MAX_FREQ 9000000000LL

typedef struct cw_etl__clock {
    bool system_time; /* timestamps are FILETIMEs */
    int64_t freq;     /* ticks per second */
    uint64_t base_ts; /* the header event's tick ... */
    int64_t base_ns;  /* ... is the header's start time */
    /* Set by cw_etl__clock_init when a tick is a whole number of ns (a
     * 10 MHz QPC: 100): ticks within +-fast_lim of the base convert with
     * one multiplication, exactly as the general way. 0: not known. */
    int64_t ns_per_tick, fast_lim;
} cw_etl__clock_t;

/* 0, CW_ENOSYS (a clock type this reader does not know) or CW_ERANGE (no
 * usable frequency). */
int cw_etl__clock_init(cw_etl__clock_t *c, const cw_etl_header_t *h);
int64_t cw_etl__clock_ns(const cw_etl__clock_t *c, uint64_t ts);

/* ---- space.c: processes, their images, threads ---- */

typedef struct cw_etl__module {
    uint64_t base, size;
    char *name;       /* lowercase base name: the space's (name_id != 0) or owned */
    size_t info;      /* index + 1 in the info's image list, or 0 */
    uint32_t name_id; /* the name's number in the space (frame cache key), 0 if none */
} cw_etl__module_t;

typedef struct cw_etl__proc {
    uint32_t pid;
    /* The images as a set: XOR of a hash of each (base, size, name). Two
     * processes with equal fingerprints name every address alike, so a
     * stack walked in one names its frames as in the other. */
    uint64_t fp;
    cw_etl__module_t *mods; /* sorted by base, not overlapping */
    size_t nmods, cap;
    size_t info; /* index + 1 in the info's process list, or 0 */
} cw_etl__proc_t;

typedef struct cw_etl__thread {
    uint32_t pid;
    uint64_t wait_head; /* ring seq of the newest event waiting for a user stack, or 0 */
} cw_etl__thread_t;

/* A frame's text depends only on its image's name and size and the offset
 * in it (or, outside every image, on the address): that pair -> the id the
 * text was interned as. The same DLL in many processes shares its entries. */
typedef struct cw_etl__fslot {
    uint64_t off;
    uint32_t name_id; /* CW_ETL__NO_IMAGE: off is an address outside every image */
    uint32_t frame;   /* 0: the slot is empty */
} cw_etl__fslot_t;

#define CW_ETL__NO_IMAGE UINT32_MAX

/* The frame and stack caches are direct-mapped: their size changes how
 * often they hit, never what is read. A build may make them smaller
 * (-DCW_ETL__FCACHE_BITS=8: the fuzz targets, where a new reader per
 * input would otherwise allocate and clear 2.9 MB, and where collisions
 * then happen on small inputs too). */
#ifndef CW_ETL__FCACHE_BITS
#define CW_ETL__FCACHE_BITS 16
#endif

/* Names functions (images.c from `--images DIR`; DbgHelp on Windows):
 * writes the name of the function at offset off of image m ("Export" or
 * "Export+0xNN") to buf[cap] and returns its length, or 0 when it knows
 * none (the frame stays "module!+0xOFFSET"). Called when the frame cache
 * misses: about once per (image name, offset). Reader's thread. */
typedef struct cw_etl__symbolizer {
    size_t (*name)(void *ctx, const cw_etl__module_t *m, uint64_t off, char *buf, size_t cap);
    void *ctx; /* borrowed */
} cw_etl__symbolizer_t;

typedef struct cw_etl__space {
    cw_etl__symbolizer_t sym; /* name NULL: none */
    cw_keymap_t pids, tids;
    cw_etl__fslot_t *fcache; /* 1 << CW_ETL__FCACHE_BITS slots, direct-mapped */
    /* An image name and size (two files of one name, like a WOW64
     * process's two ntdll.dll, differ in size) -> its number - 1. */
    cw_keymap_t names;
    char **name_text;    /* the names, owned */
    uint64_t *name_size; /* their image sizes */
    size_t nnames, name_cap, size_cap;
    cw_etl__proc_t *procs;
    size_t nprocs, pcap;
    size_t kernel_slot; /* the system's (pid 0) index in procs + 1, 0 until known */
    cw_etl__thread_t *threads;
    size_t nthreads, tcap;
} cw_etl__space_t;

int cw_etl__space_init(cw_etl__space_t *s);
void cw_etl__space_free(cw_etl__space_t *s);
/* The slot of pid (created empty when new); NULL on ENOMEM. Pointers are
 * valid until the next call that creates a slot. */
cw_etl__proc_t *cw_etl__proc(cw_etl__space_t *s, uint32_t pid);
cw_etl__thread_t *cw_etl__thread(cw_etl__space_t *s, uint32_t tid);
/* A new instance of the pid: its images are forgotten. */
void cw_etl__proc_reset(cw_etl__proc_t *p);
/* Adds an image [base, base+size) of process p named by its file path
 * (UTF-16LE); an image already at that base is replaced. *out (may be
 * NULL) gets the module. 0 or CW_ENOMEM. */
int cw_etl__module_add(cw_etl__space_t *s, cw_etl__proc_t *p, uint64_t base, uint64_t size,
                       const uint8_t *path, size_t units, cw_etl__module_t **out);
/* The name frames give an image: its file path's (UTF-16LE) last
 * component, ASCII letters lowercased; malloc'd, NULL on ENOMEM. */
char *cw_etl__image_name(const uint8_t *path, size_t units);
/* Removes the image at base; its info index (or 0). */
size_t cw_etl__module_remove(cw_etl__proc_t *p, uint64_t base);
const cw_etl__module_t *cw_etl__module_find(const cw_etl__proc_t *p, uint64_t addr);
/* Frame text: "module!+0xOFFSET" (lowercase module base name) when m is
 * known, else "[unknown]!0xADDRESS". Returns the length. */
size_t cw_etl__frame_text(const cw_etl__module_t *m, uint64_t addr, char *buf, size_t cap);

/* The address spaces a stack of process pid is named in: the system's
 * (pid 0, for kernel addresses) and the process's. Slots are created when
 * new; the pointers are valid until the next call that creates one. 0 or
 * CW_ENOMEM. */
typedef struct cw_etl__aspace {
    cw_etl__proc_t *kernel, *user;
} cw_etl__aspace_t;
int cw_etl__aspace(cw_etl__space_t *s, uint32_t pid, cw_etl__aspace_t *out);
/* Frame addr of a stack in a: its frame id interned in stacks (0 when
 * stacks is NULL, the frame cache then unused) and whether an image holds
 * it. 0 or CW_ENOMEM. */
int cw_etl__frame(cw_etl__space_t *s, const cw_etl__aspace_t *a, cw_stacks_t *stacks,
                  uint64_t addr, unsigned ptr_size, uint32_t *id, bool *in_module);

/* ---- images.c: `--images DIR`, the trace's images by file name ---- */

typedef struct cw_etl__images cw_etl__images_t;
/* Lists the folder dir (its files are read when an image of that name,
 * compared without case, first needs a name). 0, CW_ENOENT with d filled
 * (not a folder), CW_ENOMEM. */
int cw_etl__images_open(const char *dir, cw_etl__images_t **out, cw_diag_t *d);
void cw_etl__images_close(cw_etl__images_t *im); /* accepts NULL */
/* The symbolizer's name() over images (ctx: the cw_etl__images_t). */
size_t cw_etl__images_name(void *ctx, const cw_etl__module_t *m, uint64_t off, char *buf,
                           size_t cap);
/* What it did, for the log: images found and read, frames named. */
void cw_etl__images_stats(const cw_etl__images_t *im, size_t *files, size_t *read,
                          uint64_t *named);

/* ---- join.c: stack keys, and events waiting for their stacks ---- */

typedef struct cw_etl__keydef {
    uint64_t key, ts; /* the definition's own time */
    size_t off;       /* first frame in the frames array */
    uint32_t n;
    uint8_t ptr;
} cw_etl__keydef_t;

typedef struct cw_etl__keys {
    cw_etl__keydef_t *defs;
    size_t n, cap;
    uint64_t *frames;
    size_t nframes, fcap;
} cw_etl__keys_t;

int cw_etl__keys_add(cw_etl__keys_t *k, uint64_t key, uint64_t ts, const cw_etl_stackdef_t *def);
void cw_etl__keys_sort(cw_etl__keys_t *k);
/* The definition a reference to key at time ts names: the first one of
 * that key at or after ts (a key is defined when its cache entry is
 * deleted or at the rundown, after every use). NULL if none. */
const cw_etl__keydef_t *cw_etl__keys_find(const cw_etl__keys_t *k, uint64_t key, uint64_t ts);
void cw_etl__keys_free(cw_etl__keys_t *k);

enum {
    CW_ETL__REC_WANT = 1,   /* a stack may come for it */
    CW_ETL__REC_KERNEL = 2, /* has its kernel part */
    CW_ETL__REC_USER = 4,   /* has its user part (or a whole stack): complete */
    CW_ETL__REC_WAITING = 8, /* in its thread's list of events waiting for a user part */
    CW_ETL__REC_CMDLINE = 16, /* a process start with a command line (the side's) */
    CW_ETL__REC_HEAP = 32,    /* a heap event: ops is its cw_heap_kind_t (heap.c) */
};

/* An event held until its stack has come (or cannot any more): one cache
 * line, since thousands wait (2 s of trace for a stack that may never
 * come) and each is written once and read once, far apart. What only a
 * few need (a process's name, a stack's frames) is in the slot's side
 * record (cw_etl__side_t), touched only by those. */
typedef struct cw_etl__rec {
    uint64_t ts;        /* raw */
    int64_t ns;         /* the event's time */
    uint64_t addr, size;
    uint64_t next_wait; /* ring seq of the next event of the thread waiting for a user part */
    uint32_t pid;
    uint32_t tid;      /* 0 until known */
    uint32_t stack_id; /* the whole stack's interned id, or 0 */
    uint32_t nk, nu;   /* frame ids in the side record's kf, uf */
    uint16_t cpu;
    uint8_t flags;
    /* What it emits: nops (0 to 2) in bits 6-7; op (nops 0) or the first
     * op in bits 0-2, the second in bits 3-5. */
    uint8_t ops;
} cw_etl__rec_t;

/* The buffers of a ring slot, kept when it is reused. */
typedef struct cw_etl__side {
    char *name, *cmdline; /* a process start's: one buffer, name's; cmdline NULL or in it */
    size_t name_cap;
    uint32_t *kf, *uf; /* frame ids (source) of each part, innermost first */
    size_t kcap, ucap;
    uint32_t counter; /* info: its counter (every record of `etl info` sets it) */
    uint64_t old_addr; /* a heap ReAlloc's old block */
} cw_etl__side_t;

/* A FIFO of records in time order; slots keep their buffers when reused. */
typedef struct cw_etl__ring {
    cw_etl__rec_t *r;
    cw_etl__side_t *side; /* r[i]'s is side[i] */
    size_t cap, head, n;
    uint64_t next_seq; /* the oldest held record has next_seq - n + 1 */
    /* The newest record pushed with a time before its predecessor's (a
     * file merged out of order), 0 none: while it is held, the ring may
     * not be sorted. */
    uint64_t unsorted_seq;
} cw_etl__ring_t;

/* A fresh record at the tail with raw time ts (zeroed but for its ts; its
 * side record keeps its buffers, its other fields are stale); NULL on
 * ENOMEM. */
cw_etl__rec_t *cw_etl__ring_push(cw_etl__ring_t *g, uint64_t ts);
cw_etl__rec_t *cw_etl__ring_head(cw_etl__ring_t *g);
void cw_etl__ring_pop(cw_etl__ring_t *g);
cw_etl__rec_t *cw_etl__ring_by_seq(cw_etl__ring_t *g, uint64_t seq);
/* A held record's seq (never 0) and its side record. */
uint64_t cw_etl__ring_seq(const cw_etl__ring_t *g, const cw_etl__rec_t *x);
cw_etl__side_t *cw_etl__ring_side(cw_etl__ring_t *g, const cw_etl__rec_t *x);
/* The record a stack fragment of thread tid walked on cpu at ts belongs
 * to: among records wanting a stack with that exact time, the one of that
 * thread, else one of unknown thread on that cpu, else of unknown thread. */
cw_etl__rec_t *cw_etl__ring_find(cw_etl__ring_t *g, uint64_t ts, uint32_t tid, uint16_t cpu);
void cw_etl__ring_free(cw_etl__ring_t *g);

/* ---- reader.c ---- */

/* A stack part's frames, cached: the same addresses walked in address
 * spaces with the same images (the system's and the process's
 * fingerprints) give the same frame ids, whatever the process. */
typedef struct cw_etl__sslot {
    uint64_t hash, kfp, ufp;
    uint32_t n, in_modules;
    uint32_t stack_id; /* a whole stack's interned id, or 0 */
    uint64_t *addr; /* n addresses, owned */
    uint32_t *ids;  /* n frame ids, owned */
    size_t cap;
} cw_etl__sslot_t;

#ifndef CW_ETL__SCACHE_BITS
#define CW_ETL__SCACHE_BITS 14 /* see CW_ETL__FCACHE_BITS */
#endif

typedef struct cw_etl__dcproc {
    uint32_t pid, ppid;
    char *name, *cmdline; /* one block, which name owns; cmdline NULL or inside it */
} cw_etl__dcproc_t;

typedef struct cw_etl__reader {
    cw_etl_file_t *file;
    cw_etl__clock_t clock;
    const char *path;
    cw_stacks_t *stacks;  /* source: frames interned here; NULL for info */
    cw_etl_info_t *info;  /* info: filled; NULL for the source */
    bool want_images;
    bool live; /* fed by the live ETW source: stacks on VirtualAlloc only */
    atomic_bool stop;
    int (*emit)(void *ctx, const cw_event_t *ev);
    void *ctx;
    /* Non-NULL: the Heap class's events are read too, by the heap layer
     * (heap.c, cw_etl__heap_attach), and go to emit_heap with the same
     * ctx; VirtualAlloc and VirtualFree are then left out. heap_pid != 0:
     * only that process's. */
    const struct cw_etl__layer *heap;
    int (*emit_heap)(void *ctx, const cw_heap_ev_t *ev);
    uint32_t heap_pid;
    uint64_t heap_events, heap_other; /* heap events held; of other processes, left out */

    cw_etl__space_t space;
    cw_etl__sslot_t *scache; /* source only: 1 << CW_ETL__SCACHE_BITS slots */
    cw_etl__keys_t keys;
    cw_etl__ring_t ring;
    cw_etl__dcproc_t *dc; /* source: processes alive at the start (pass 1) */
    size_t ndc, dccap;
    cw_keymap_t counter_map; /* (group, type, version) -> counters[] */
    /* The last keys looked up, by (type + group) & 15: most events are
     * of a handful of kinds, so most skip the map. key + 1 (0: empty). */
    uint64_t counter_key[16];
    uint32_t counter_idx[16];
    cw_etl_count_t *counters;
    size_t ncounters, ccap;
    cw_keymap_t guids; /* info: distinct providers */

    uint64_t first_ts, last_ts;
    bool any_event, have_stacks;
    uint64_t horizon; /* ticks a record waits for its stack */
    int64_t start_ns, last_ns;
    uint64_t emitted;
    cw_etl_stack_stats_t ss;

    uint64_t provider_with_stack;
    size_t info_pcap, info_icap; /* capacities of the info's lists */

    uint64_t *addr;   /* scratch: a StackWalk's frames */
    size_t addr_cap;
    uint32_t *frames; /* scratch: a stack being assembled */
    size_t frames_cap;
} cw_etl__reader_t;

/* Opens path (its header only). stacks (source) or info (etl info) says
 * what run() produces; both borrowed. 0 or CW_E* with d filled. */
int cw_etl__reader_open(cw_etl__reader_t *r, const char *path, cw_stacks_t *stacks,
                        cw_etl_info_t *info, cw_diag_t *d);
/* Both passes: events to emit (source), or the info filled. 0 at the end
 * or after stop, CW_E* with d filled, or emit's return. */
int cw_etl__reader_run(cw_etl__reader_t *r, cw_diag_t *d);
void cw_etl__reader_close(cw_etl__reader_t *r);
/* The decoder refusals so far, as one line ("Process/1 v9: 2 (unknown
 * version), ..."), "" when none. */
void cw_etl__reader_skips(const cw_etl__reader_t *r, char *buf, size_t cap);

/* A fresh record of ev at the ring's tail (its cpu, flags, time set);
 * NULL on ENOMEM. */
cw_etl__rec_t *cw_etl__reader_push(cw_etl__reader_t *r, const cw_etl_event_t *ev, uint8_t flags);
/* Counts an event of counter c its decoder refused with why; returns 0
 * (a refused event is left out, the trace goes on). */
int cw_etl__reader_skip(cw_etl__reader_t *r, uint32_t c, int why);

/* A layer of events the reader holds and joins to their stacks but does
 * not interpret itself: the heap's (heap.c), reached through r->heap so
 * the reader names none of its functions. */
typedef struct cw_etl__layer {
    /* An event of the layer's class (counter c): decoded and held for its
     * stack (a record flagged CW_ETL__REC_HEAP), or left out. 0 or
     * CW_ENOMEM. */
    int (*on_event)(cw_etl__reader_t *r, const cw_etl_event_t *ev, uint32_t c);
    /* A held record of the layer, complete, with its interned stack: 0, or
     * emit_heap's return. */
    int (*emit)(cw_etl__reader_t *r, const cw_etl__rec_t *x, uint32_t stack_id);
} cw_etl__layer_t;

/* ---- heap.c ---- */

/* Makes r read the Heap class's events (of pid, or all when 0) into
 * emit_heap (ctx: r->ctx). Before run() or the first feed(). */
void cw_etl__heap_attach(cw_etl__reader_t *r, int (*emit_heap)(void *ctx, const cw_heap_ev_t *ev),
                         uint32_t pid);

/* Live (sources/etw/live.c): no file; events come one at a time, in time
 * order (feed), from a session whose raw timestamps `clock` converts.
 * feed() interprets one and emits what completed; release() emits what
 * waited for a stack that can no longer come by now (all: everything).
 * The emit callback is set in r->emit / r->ctx by the caller. 0, CW_ENOMEM
 * or emit's return. */
int cw_etl__reader_open_live(cw_etl__reader_t *r, cw_stacks_t *stacks,
                             const cw_etl__clock_t *clock, cw_diag_t *d);
int cw_etl__reader_feed(cw_etl__reader_t *r, const cw_etl_event_t *ev);
int cw_etl__reader_release(cw_etl__reader_t *r, uint64_t now, bool all);

#endif
