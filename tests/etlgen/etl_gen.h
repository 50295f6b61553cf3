/* etl_gen.h - normalized events (cw_event_t) written as the kernel events
 * a Windows trace of them would hold, through etl_writer.h.
 *
 * process_start becomes Process DCStart (a process alive when the trace
 * starts: its ts is the trace's start) or Process Start, with a Thread
 * DCStart/Start of its thread; process_exit becomes Process End. A commit,
 * reserve, decommit or release becomes VirtualAlloc (98, flags MEM_COMMIT,
 * MEM_RESERVE, or both for a reserve followed by the commit of the same
 * range at the same time) or VirtualFree (99, MEM_DECOMMIT or
 * MEM_RELEASE), PERFINFO header, followed by its stack in one of three
 * forms: one StackWalk event (kernel and user frames), a kernel and a user
 * StackWalk event, or stack keys (37/38) whose definitions (36) come at
 * the end of the trace. Frames "module!function" get addresses inside an
 * image the process loads (Image Load, SYSTEM header) before the first
 * frame in it: function i of a module at offset 0x1000 + 0x40 i, or at
 * the RVA given for it (rvas: the functions of a real DLL). Two kernel
 * frames (ntoskrnl.exe!NtAllocateVirtualMemory at 0x2000 and
 * MiAllocateVirtualMemory at 0x3000, loaded in process 0) are the
 * innermost. cw_etlgen_write_images() writes the images those offsets
 * name, for `--images DIR`.
 * Rundown commits are not written: an .etl has no record of memory
 * committed before it started (docs/ETW.md).
 *
 * Events go to CPU (k mod ncpu) for the k-th distinct timestamp, so
 * events of equal time stay in their order. */
#ifndef CW_TESTS_ETL_GEN_H
#define CW_TESTS_ETL_GEN_H

#include <stdio.h>

#include "commitwatch/event.h"
#include "commitwatch/heap.h"
#include "etl_writer.h"

enum { CW_ETLGEN_WALK, CW_ETLGEN_SPLIT, CW_ETLGEN_KEYS };

typedef struct cw_etlgen_opts {
    cw_etlw_opts_t w; /* start_ns: the trace's start (the first event's time) */
    int stacks;       /* CW_ETLGEN_WALK, _SPLIT, _KEYS */
    int process_version; /* 3 or 4 */
    int image_version;   /* 2 or 3 */
    /* The frames of a stack id, outermost first (borrowed); n = 0 none. */
    const char *const *(*frames)(void *ctx, uint32_t stack_id, uint32_t *n);
    /* Addresses as written (32-bit traces need them below 2 GB); NULL: as given. */
    uint64_t (*map_addr)(void *ctx, uint32_t pid, uint64_t addr);
    void *ctx;
    /* Every process loads the images of every stack made known with
     * cw_etlgen_know_stack() when it starts, as programs load their DLLs
     * (default: each image just before its first frame). */
    bool preload;
    /* Offsets of "module!function" frames in their module (borrowed): a
     * module with one given has all its functions given, and its image is
     * the caller's (a real DLL), not written by cw_etlgen_write_images(). */
    const struct cw_etlgen_rva {
        const char *frame;
        uint32_t rva;
    } *rvas;
    size_t nrvas;
    /* Image sizes of modules (borrowed; the others: 0x100000): a real
     * DLL's SizeOfImage, which `--images` checks. */
    const struct cw_etlgen_size {
        const char *module;
        uint64_t size;
    } *sizes;
    size_t nsizes;
    /* The header of heap events: CW_ETLW_SYSTEM (hook id 0x10xx) or
     * CW_ETLW_FULL (the Heap class GUID). */
    int heap_header;
} cw_etlgen_opts_t;

typedef struct cw_etlgen cw_etlgen_t;

int cw_etlgen_open(const char *path, const cw_etlgen_opts_t *o, cw_etlgen_t **out);
/* Makes the images of stack id known (for preload), before any event. */
void cw_etlgen_know_stack(cw_etlgen_t *g, uint32_t stack_id);
/* One event, in time order. 0 or -1. */
int cw_etlgen_event(cw_etlgen_t *g, const cw_event_t *ev);
/* One heap event, in time order with the others: Heap Alloc (0x21),
 * ReAlloc (0x22) or Free (0x24), version 2, SYSTEM or FULL header
 * (opts.heap_header; pid and tid),
 * the process heap's handle, Source 2; then, for an allocation with a
 * stack, its user frames only (one StackWalk, or a user key in the keys
 * form). cut > 0 leaves that many bytes off the payload's end (a payload
 * too short for its layout). 0 or -1. */
int cw_etlgen_heap(cw_etlgen_t *g, const cw_heap_ev_t *ev, size_t cut);
/* Writes what is pending (stack-key definitions, DCEnd rundown) and closes. 0 or -1. */
int cw_etlgen_close(cw_etlgen_t *g);
/* Writes, into the folder dir, an image (pe_writer.h; PE32+ for 64-bit
 * traces, PE32 for 32-bit ones) for each module of the frames seen whose
 * offsets the generator chose, named as the frames name the module, with
 * one export per function at its offset; and ntoskrnl.exe with the two
 * kernel frames' functions. Functions whose name starts with one of the
 * nhide prefixes are left out of the exports (internal functions, named by
 * the export before them as on a real system). Call before close. 0 or -1. */
int cw_etlgen_write_images(const cw_etlgen_t *g, const char *dir, const char *const *hide,
                           size_t nhide);
/* The frame text the reader gives each "module!function" seen, as a JSON
 * object {"frames": {FRAME: TEXT, ...}, "kernel": [TEXT, TEXT]} (kernel
 * frames outermost first). Call before close. */
void cw_etlgen_map_json(const cw_etlgen_t *g, FILE *f);

#endif
