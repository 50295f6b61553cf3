/* heap_launch.h - launch and attach modes of the heap drill-down: run a
 * program with the heap interposer, or load it into a running process,
 * and feed the allocations to a heap model (heap.h).
 *
 * Linux: service/sources/heap/launch.c. Windows (service/sources/etw/
 * heap_launch.c): an ETW heap session for the process (launch mode: the
 * program started suspended, resumed once its session is read).
 *
 * Thread: the caller's, which reads the ring until the program exits or
 * the duration ends; cw_heap_launch_stop() (every trace) and the args'
 * `stop` flag (one trace) may be set from any thread or a signal handler. */
#ifndef COMMITWATCH_HEAP_LAUNCH_H
#define COMMITWATCH_HEAP_LAUNCH_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "commitwatch/error.h"
#include "commitwatch/heap.h"
#include "commitwatch/stacks.h"

typedef struct cw_heap_launch_args {
    char *const *argv;   /* PROGRAM ARGS, NULL-terminated; borrowed. argv[0] is
                          * looked up on PATH when it has no '/' */
    uint32_t pid;        /* != 0: attach to this running process instead (argv unused) */
    int64_t duration_ns; /* 0: until the program exits */
    /* The interposer; NULL: $CW_HEAP_PRELOAD, else libcwheap.so beside the
     * commitwatch binary, else the installed one. */
    const char *preload;
    uint32_t ring_slots; /* 64-byte slots, a power of two; 0: the default (262144, 16 MiB) */
    /* Non-NULL: tracing also ends when *stop becomes true (a service that
     * runs several traces stops each on its own; cw_heap_launch_stop()
     * stops them all). Borrowed; any thread may set it. */
    const atomic_bool *stop;
    /* Non-NULL: the events applied so far, stored as they are read (for a
     * progress report from another thread). Borrowed. */
    atomic_uint_least64_t *progress;
    /* Non-NULL: set once the interposer is in place (the program started
     * with it, or loaded into the running process). Borrowed. */
    atomic_bool *attached;
    /* Snapshots (heap.h, cw_heap_model_snapshot): one every
     * snapshot_every_ns (0: none), and one whenever *snapshot_now
     * (non-NULL; any thread or a signal handler sets it, the reader clears
     * it) is set, each after the events read by then. */
    int64_t snapshot_every_ns;
    atomic_bool *snapshot_now;
} cw_heap_launch_args_t;

typedef struct cw_heap_launch_result {
    int64_t start_ns;  /* when the program was started (the report's window) */
    int exited;        /* 1: the program ended while traced */
    int exit_status;   /* its exit code, when exited and not signalled */
    int signal;        /* the signal that ended it, or 0 */
    uint32_t attached; /* processes whose interposer joined the ring */
    cw_heap_losses_t losses;
} cw_heap_launch_result_t;

/* Starts the program with the interposer (a->pid: loads the interposer
 * into that running process, platform.h cw_plat_inject_library; its
 * blocks allocated before are unknown, their frees counted as such),
 * applies its events to m (stacks
 * interned into stacks; both borrowed) and returns when it has exited (its
 * events all read) or the duration ended or cw_heap_launch_stop() was
 * called (tracing ends; the program runs on untraced). 0 with *res set;
 * CW_ENOENT (the program or the interposer not found), CW_EPERM (not
 * executable), CW_ENOSYS (a static or 32-bit program: the interposer
 * cannot be loaded into it), CW_EIO (the program could not be started; on
 * Windows, the ETW heap session could not, a launched program then ended
 * before it ran), CW_ENOMEM; d says which and what to do. */
int cw_heap_launch(const cw_heap_launch_args_t *a, cw_stacks_t *stacks, cw_heap_model_t *m,
                   cw_heap_launch_result_t *res, cw_diag_t *d);
void cw_heap_launch_stop(void);

#endif
