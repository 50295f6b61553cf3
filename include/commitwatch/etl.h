/* etl.h - Windows event trace (.etl) files and the ETW kernel events in
 * them, read on any OS (service/sources/etl/; docs/ETW.md has the format).
 *
 * Three layers, each usable alone:
 *
 * - Decoders: one kernel payload (Process, Image, Thread, VirtualAlloc,
 *   StackWalk and its stack-key forms) as bytes, with the event's version
 *   and pointer size, into a plain struct. 0, CW_ENOSYS for a version this
 *   build does not know, CW_EPARSE for a payload too short or malformed.
 *   Decoded pointers point into the payload (borrowed): strings are not
 *   NUL-terminated copies but (pointer, length) pairs.
 * - The file: buffers (XPRESS-decompressed when flagged), the trace's
 *   header, its events in file order (the scan) or merged in time order
 *   across the per-CPU buffer streams.
 * - `--source etl:FILE` (cw_source_etl) and cw_etl_info() (what
 *   `commitwatch etl info` prints), built on the two.
 *
 * Nothing here includes an OS header: a trace recorded on Windows is read
 * the same way on Linux. Thread: one thread per file or info call. */
#ifndef COMMITWATCH_ETL_H
#define COMMITWATCH_ETL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "commitwatch/error.h"
#include "commitwatch/event.h"
#include "commitwatch/heap.h"
#include "commitwatch/source.h"

/* ---- XPRESS (MS-XCA "plain LZ77") ------------------------------------------- */

/* Decompresses in[0..in_len) into out[0..out_cap). Stops at the end of the
 * input or when out is full; *out_len gets the bytes written. 0, or
 * CW_EPARSE when the stream refers before the start of the output, runs
 * past the end of the input in the middle of an item, or would write past
 * out_cap (out then holds what was decoded before the fault). */
int cw_etl_xpress_decompress(const uint8_t *in, size_t in_len, uint8_t *out, size_t out_cap,
                             size_t *out_len);

/* ---- kernel event classes ----------------------------------------------------- */

/* The group byte of a classic kernel event's hook id (group << 8 | type). */
enum {
    CW_ETL_G_HEADER = 0x00,
    CW_ETL_G_DISKIO = 0x01,
    CW_ETL_G_PAGEFAULT = 0x02,
    CW_ETL_G_PROCESS = 0x03,
    CW_ETL_G_FILEIO = 0x04,
    CW_ETL_G_THREAD = 0x05,
    CW_ETL_G_PERFINFO = 0x0F,
    CW_ETL_G_HEAP = 0x10, /* the Heap class, GUID 222962ab-6180-4b88-a825-346b75f2a24a */
    CW_ETL_G_IMAGE = 0x14,
    CW_ETL_G_STACKWALK = 0x18,
};

/* Event types (opcodes) this reader interprets. */
enum {
    CW_ETL_T_START = 1,
    CW_ETL_T_END = 2,
    CW_ETL_T_DCSTART = 3,
    CW_ETL_T_DCEND = 4,
    CW_ETL_T_IMAGE_LOAD = 10, /* written as group Process (0x030A), class Image */
    CW_ETL_T_STACKWALK = 32,
    CW_ETL_T_HEAP_ALLOC = 0x21,   /* Heap: 33 Alloc, 34 ReAlloc, 36 Free */
    CW_ETL_T_HEAP_REALLOC = 0x22,
    CW_ETL_T_HEAP_FREE = 0x24,
    CW_ETL_T_KEY_CREATE = 34, /* 34, 35, 36: a stack key's definition */
    CW_ETL_T_KEY_DELETE = 35,
    CW_ETL_T_KEY_RUNDOWN = 36,
    CW_ETL_T_KEY_KERNEL = 37, /* 37, 38: a reference to a defined key */
    CW_ETL_T_KEY_USER = 38,
    CW_ETL_T_VIRTUAL_ALLOC = 98,
    CW_ETL_T_VIRTUAL_FREE = 99,
};

/* The class a kernel event belongs to ("Process", "Image", "StackWalk",
 * ...): group Process type 10 is Image. "Group0x1E" style text for a group
 * this build has no name for; never NULL (static or buf, which needs 16
 * bytes). */
const char *cw_etl_class_name(unsigned group, unsigned type, char buf[16]);
/* The type's name in its class ("Start", "Load", "Stack", ...), or NULL. */
const char *cw_etl_type_name(unsigned group, unsigned type);

/* ---- payload decoders --------------------------------------------------------- */

/* Process start, end, DCStart, DCEnd (and Defunct), versions 0 to 5:
 * Windows 2000 to 11 (v3: Windows 7, v4: Windows 8 and later, v5: v4 plus
 * an exit time). The user SID is a TOKEN_USER (two pointers) followed by a
 * variable-length SID. Versions 0 and 1 carry no command line. */
typedef struct cw_etl_process {
    uint32_t pid, ppid, session;
    int32_t exit_status;
    const char *image; /* ANSI file name, image_len bytes (no NUL) */
    size_t image_len;
    const uint8_t *cmdline; /* UTF-16LE, cmdline_units code units (no NUL); NULL when absent */
    size_t cmdline_units;
} cw_etl_process_t;
int cw_etl_decode_process(const uint8_t *p, size_t n, unsigned version, unsigned ptr_size,
                          cw_etl_process_t *out);

/* Image load, unload, DCStart, DCEnd, versions 2 (Vista, 7) and 3 (8+). */
typedef struct cw_etl_image {
    uint64_t base, size;
    uint32_t pid, checksum, time_date_stamp;
    const uint8_t *name; /* UTF-16LE file name, name_units code units (no NUL) */
    size_t name_units;
} cw_etl_image_t;
int cw_etl_decode_image(const uint8_t *p, size_t n, unsigned version, unsigned ptr_size,
                        cw_etl_image_t *out);

/* Thread start, end, DCStart, DCEnd, versions 0 to 4 (v0 has the thread
 * id first). Only the two ids are decoded. */
typedef struct cw_etl_thread {
    uint32_t pid, tid;
} cw_etl_thread_t;
int cw_etl_decode_thread(const uint8_t *p, size_t n, unsigned version, unsigned ptr_size,
                         cw_etl_thread_t *out);

/* PageFault VirtualAlloc (98) / VirtualFree (99), version 2. pid is the
 * owner of the memory (VirtualAllocEx), not necessarily the caller. */
typedef struct cw_etl_valloc {
    uint64_t base, size;
    uint32_t pid, flags;
} cw_etl_valloc_t;
int cw_etl_decode_valloc(const uint8_t *p, size_t n, unsigned version, unsigned ptr_size,
                         cw_etl_valloc_t *out);

#define CW_ETL_MEM_COMMIT 0x1000u
#define CW_ETL_MEM_RESERVE 0x2000u
#define CW_ETL_MEM_DECOMMIT 0x4000u
#define CW_ETL_MEM_RELEASE 0x8000u
/* The operations a flags word stands for, in the order they apply:
 * reserve before commit (MEM_RESERVE | MEM_COMMIT), decommit, release.
 * Other bits (MEM_RESET, MEM_TOP_DOWN, ...) change no figure. Returns the
 * number written to ops (0 to 2). */
int cw_etl_valloc_ops(uint32_t flags, cw_op_t ops[2]);

/* Heap Alloc (0x21), ReAlloc (0x22), Free (0x24), version 2 (docs/ETW.md
 * cites the layouts): HeapHandle, then Alloc: Size, Address; ReAlloc:
 * NewAddress, OldAddress, NewSize, OldSize; Free: Address; then a u32
 * Source. Every field but Source is pointer-sized. Which one type is:
 * kind. A type that is none of the three is CW_ENOSYS. */
typedef struct cw_etl_heap {
    uint8_t type;       /* CW_ETL_T_HEAP_* */
    uint64_t heap;      /* the heap's handle */
    uint64_t addr;      /* the block allocated (Alloc, ReAlloc) or freed (Free) */
    uint64_t size;      /* its size (Alloc, ReAlloc); 0 for Free */
    uint64_t old_addr;  /* ReAlloc: the block it replaced */
    uint64_t old_size;  /* ReAlloc: its size */
    uint32_t source;    /* MEMORY_FROM_*: lookaside, low-fragmentation heap, ... */
} cw_etl_heap_t;
int cw_etl_decode_heap(const uint8_t *p, size_t n, unsigned type, unsigned version,
                       unsigned ptr_size, cw_etl_heap_t *out);

/* StackWalk Stack (32), version 2: the stack of the event whose raw
 * timestamp is event_ts, frames innermost first. */
typedef struct cw_etl_stackwalk {
    uint64_t event_ts;
    uint32_t pid, tid;
    const uint8_t *frames; /* nframes addresses of ptr_size bytes, little-endian */
    uint32_t nframes;
    unsigned ptr_size;
} cw_etl_stackwalk_t;
int cw_etl_decode_stackwalk(const uint8_t *p, size_t n, unsigned version, unsigned ptr_size,
                            cw_etl_stackwalk_t *out);

/* StackKeyKernel (37) / StackKeyUser (38): the event at event_ts has the
 * stack that key names (a definition, 34-36, with that key later in the
 * trace). */
typedef struct cw_etl_stackref {
    uint64_t event_ts;
    uint32_t pid, tid;
    uint64_t key;
} cw_etl_stackref_t;
int cw_etl_decode_stackref(const uint8_t *p, size_t n, unsigned version, unsigned ptr_size,
                           cw_etl_stackref_t *out);

/* KeyCreate (34), KeyDelete (35), KeyRundown (36): a key and its frames,
 * innermost first. */
typedef struct cw_etl_stackdef {
    uint64_t key;
    const uint8_t *frames;
    uint32_t nframes;
    unsigned ptr_size;
} cw_etl_stackdef_t;
int cw_etl_decode_stackdef(const uint8_t *p, size_t n, unsigned version, unsigned ptr_size,
                           cw_etl_stackdef_t *out);

/* Frame i of a decoded frame array. */
uint64_t cw_etl_frame(const uint8_t *frames, uint32_t i, unsigned ptr_size);
/* True when addr lies in kernel space for that pointer size. */
bool cw_etl_kernel_address(uint64_t addr, unsigned ptr_size);

/* UTF-16LE (units code units) to UTF-8 in dst[cap] (cap > 0), cut at a
 * character boundary, always NUL-terminated; an unpaired surrogate becomes
 * U+FFFD. Returns the bytes written before the NUL. */
size_t cw_etl_utf16_to_utf8(const uint8_t *src, size_t units, char *dst, size_t cap);

/* ---- the file ----------------------------------------------------------------- */

/* TRACE_LOGFILE_HEADER, from the trace's first event. Times are FILETIME
 * (100 ns since 1601) as written; *_ns are Unix nanoseconds. */
typedef struct cw_etl_header {
    uint8_t os_major, os_minor, os_sub, os_subminor;
    uint32_t build; /* ProviderVersion: the OS build number */
    uint32_t ncpu;
    uint32_t buffer_size, timer_resolution, max_file_size, log_file_mode;
    uint32_t buffers_written, buffers_lost, events_lost;
    uint32_t pointer_size; /* of the recording system */
    uint32_t cpu_mhz;
    uint32_t clock_type; /* 1 QPC, 2 system time, 3 CPU cycle counter */
    int64_t perf_freq;   /* ticks per second of the raw timestamps */
    int64_t boot_time, start_time, end_time;
    int64_t boot_ns, start_ns, end_ns;
    uint64_t header_ts; /* raw timestamp of the header event: start_time's tick */
    bool compressed;    /* LogFileMode has EVENT_TRACE_COMPRESSED_MODE */
    bool approx_clock;  /* clock 3: ticks converted with the nominal CPU speed */
    char logger_name[128], log_file_name[260];
} cw_etl_header_t;

#define CW_ETL_MODE_COMPRESSED 0x04000000u

/* Header types of an event (byte 2 of its first word). */
enum {
    CW_ETL_HT_SYSTEM32 = 0x01,
    CW_ETL_HT_SYSTEM64 = 0x02,
    CW_ETL_HT_COMPACT32 = 0x03,
    CW_ETL_HT_COMPACT64 = 0x04,
    CW_ETL_HT_FULL32 = 0x0A,
    CW_ETL_HT_INSTANCE32 = 0x0B,
    CW_ETL_HT_PERFINFO32 = 0x10,
    CW_ETL_HT_PERFINFO64 = 0x11,
    CW_ETL_HT_EVENT32 = 0x12,
    CW_ETL_HT_EVENT64 = 0x13,
    CW_ETL_HT_FULL64 = 0x14,
    CW_ETL_HT_INSTANCE64 = 0x15,
};

/* One event as stored. Classic kernel events (SYSTEM, COMPACT, PERFINFO
 * headers, or FULL/INSTANCE headers carrying a kernel class GUID) have
 * kernel set and group/type/version; others (providers, EVENT_HEADER
 * events) have the provider or class GUID and, for EVENT_HEADER, the
 * event id. data points into the reader's buffer until the next call. */
typedef struct cw_etl_event {
    uint8_t header_type;
    uint8_t ptr_size; /* 4 or 8, from the header type */
    bool kernel;
    uint8_t group, type;
    uint16_t version;
    uint16_t cpu;
    bool has_ids; /* the header carries the process and thread ids */
    uint32_t pid, tid;
    uint64_t ts;      /* raw */
    uint8_t guid[16]; /* as stored (Data1..3 little-endian) */
    uint16_t event_id;
    const uint8_t *data;
    size_t len;
} cw_etl_event_t;

/* What the file's buffers held. */
typedef struct cw_etl_file_stats {
    uint64_t buffers, buffers_compressed, buffers_corrupt, buffers_lost_flag;
    uint64_t bytes;      /* bytes of buffers read (as stored) */
    uint64_t events;     /* events parsed */
    uint64_t by_header[0x16]; /* events per header type */
    uint64_t messages;   /* WPP messages (skipped) */
    uint64_t reordered;  /* events older than one already merged (time clamped) */
    bool truncated;      /* the file ended inside a buffer (that buffer was dropped) */
} cw_etl_file_stats_t;

typedef struct cw_etl_file cw_etl_file_t;

/* Opens path and reads the trace's header (its first buffer). The file
 * must be seekable. 0, or CW_EIO / CW_EPARSE with d naming the file and
 * offset ("not an .etl file" when the first buffer or event is not one). */
int cw_etl_file_open(const char *path, cw_etl_file_t **out, cw_diag_t *d);
/* The same from an open stream (owned from now on: closed with the file).
 * name is used in messages. */
int cw_etl_file_open_stream(FILE *f, const char *name, cw_etl_file_t **out, cw_diag_t *d);
void cw_etl_file_close(cw_etl_file_t *f); /* accepts NULL */
const cw_etl_header_t *cw_etl_file_header(const cw_etl_file_t *f);
const cw_etl_file_stats_t *cw_etl_file_stats(const cw_etl_file_t *f);

/* Pass 1: every event in file order, buffer by buffer, to cb (a nonzero
 * return stops the scan and is returned). Indexes the buffers for
 * cw_etl_file_next(); statistics are counted here. A buffer that cannot
 * be decompressed or holds a malformed event is counted corrupt and left
 * (a warning logged); the file ending inside a buffer ends the scan
 * (truncated). 0, CW_EIO, or cb's return. */
int cw_etl_file_scan(cw_etl_file_t *f, int (*cb)(void *ctx, const cw_etl_event_t *ev), void *ctx,
                     cw_diag_t *d);
/* Pass 2, after a scan: the events merged in time order (each CPU's
 * buffers by sequence number, the CPUs by timestamp; equal times by CPU).
 * 1 and *ev filled, 0 at the end, or CW_EIO. Restarts from the beginning
 * after cw_etl_file_rewind(). */
int cw_etl_file_next(cw_etl_file_t *f, cw_etl_event_t *ev, cw_diag_t *d);
int cw_etl_file_rewind(cw_etl_file_t *f, cw_diag_t *d);
/* Raw timestamp to Unix nanoseconds, by the header's clock. */
int64_t cw_etl_file_ns(const cw_etl_file_t *f, uint64_t ts);
/* Raw ticks in one second (for spans). */
uint64_t cw_etl_file_ticks_per_s(const cw_etl_file_t *f);

/* ---- what `commitwatch etl info` reports ----------------------------------------- */

/* Events of one kernel class, type and version. */
typedef struct cw_etl_count {
    uint8_t group, type;
    uint16_t version;
    uint64_t events;
    uint64_t with_stack; /* events a StackWalk (or stack key) joined */
    uint64_t skipped;    /* decoder refused: unknown version or short payload */
    int skip_reason;     /* the last refusal: CW_ENOSYS or CW_EPARSE (0 none) */
} cw_etl_count_t;

typedef struct cw_etl_proc_info {
    uint32_t pid, ppid;
    char *name, *cmdline; /* UTF-8, one block, which name owns; cmdline NULL or inside it */
    int64_t start_ns;     /* the trace's start for a process alive then */
    int64_t end_ns;       /* CW_TS_NEVER when it did not end in the trace */
    bool rundown;         /* alive when the trace started (DCStart) */
} cw_etl_proc_info_t;

typedef struct cw_etl_image_info {
    uint32_t pid;
    uint64_t base, size;
    char *name; /* owned: the file name as recorded */
    int64_t load_ns, unload_ns; /* CW_TS_NEVER: not unloaded in the trace */
    bool rundown;
} cw_etl_image_info_t;

/* Stacks: how StackWalk events found the events they belong to. */
typedef struct cw_etl_stack_stats {
    uint64_t walks;      /* StackWalk Stack (32) events */
    uint64_t key_refs;   /* StackKeyKernel/User (37, 38) */
    uint64_t key_defs;   /* KeyCreate/Delete/Rundown (34-36) */
    uint64_t joined;     /* fragments matched to their event by timestamp */
    uint64_t shared;     /* extra events a deferred user stack completed (same thread) */
    uint64_t orphaned;   /* fragments with no event (and no waiting event of the thread) */
    uint64_t unresolved; /* key references with no definition */
    uint64_t frames, frames_in_modules; /* frames of joined fragments; those inside a known image */
} cw_etl_stack_stats_t;

typedef struct cw_etl_info {
    cw_etl_header_t header;
    cw_etl_file_stats_t file;
    int64_t first_ns, last_ns; /* first and last event */
    cw_etl_count_t *counts;    /* kernel classes, sorted by group, type, version */
    size_t ncounts;
    uint64_t provider_events; /* FULL/INSTANCE events of non-kernel GUIDs, EVENT_HEADER events */
    uint64_t providers;       /* distinct provider GUIDs among them */
    uint64_t provider_with_stack; /* of those, events a kernel StackWalk joined */
    cw_etl_proc_info_t *procs; /* in order of appearance */
    size_t nprocs;
    cw_etl_image_info_t *images; /* only when asked for */
    size_t nimages;
    uint64_t images_seen, threads_seen;
    cw_etl_stack_stats_t stacks;
    uint64_t valloc_events, vfree_events, valloc_with_stack; /* 98, 99; with a joined stack */
    uint64_t skipped; /* decoder refusals, all classes */
} cw_etl_info_t;

/* Reads the whole file (two passes) into *out. 0, or CW_E* with d naming
 * the file and offset. Free with cw_etl_info_free(). */
int cw_etl_info(const char *path, bool want_images, cw_etl_info_t **out, cw_diag_t *d);
void cw_etl_info_free(cw_etl_info_t *info); /* accepts NULL */

/* The source `--source etl:FILE` (platform "windows"): process_start for
 * every process alive at the trace's start (at that time) and for each
 * Process Start, process_exit for each Process End, and
 * commit/decommit/reserve/release from VirtualAlloc/VirtualFree with
 * their stacks, in time order. */
extern const cw_source_ops_t cw_source_etl;

/* ---- heap events: `commitwatch heap --etl FILE` ------------------------------------ */

typedef struct cw_etl_heap_opts {
    const char *path;   /* borrowed */
    uint32_t pid;       /* 0: every process with heap events */
    const char *images; /* NULL, or a folder of the trace's images (`--images DIR`) */
} cw_etl_heap_opts_t;

typedef struct cw_etl_heap_result {
    int64_t start_ns;         /* the trace's start (the report's window) */
    uint64_t events;          /* events in the file */
    uint64_t heap_events;     /* Heap Alloc/ReAlloc/Free events of the chosen processes */
    uint64_t heap_applied;    /* of those, given to the model */
    uint64_t heap_other;      /* of other processes, left out (--pid) */
    uint64_t heap_skipped;    /* Heap events the decoder refused (short, unknown version) */
    uint64_t buffers_corrupt; /* buffers that could not be read */
    bool truncated;           /* the file ended inside a buffer */
    cw_etl_stack_stats_t stacks;
    char skips[512];          /* every class's refusals, as one line ("" none) */
    cw_heap_losses_t losses;  /* dropped: what the recording session lost */
} cw_etl_heap_result_t;

/* Reads the Heap class's Alloc, ReAlloc and Free events of o->path (of
 * o->pid, or all) with their stacks into m; frames interned in stacks and
 * named as the etl source names them (both borrowed). Processes are
 * announced to m from the trace's process events (a process without one
 * is "pid N"). A Free of a block the trace never allocated is counted by
 * m (unknown_frees). 0 with *res set, also when the file is truncated or
 * held events too short for their layout (res says so: what was read is
 * in m); CW_EIO / CW_EPARSE / CW_ENOMEM with d filled. */
int cw_etl_heap_read(const cw_etl_heap_opts_t *o, cw_stacks_t *stacks, cw_heap_model_t *m,
                     cw_etl_heap_result_t *res, cw_diag_t *d);

#endif
