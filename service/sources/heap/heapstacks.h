/* heapstacks.h - the reader's side of the interposer's stack tables
 * (heapcache.h): per traced thread (pid, tid), index -> the stack that
 * thread defined under it, with the frames and, once named, its interned
 * stack.
 *
 * Why per thread and not one table per process: the interposer's tables
 * are per thread (no lock, no shared cache line on the program's hot
 * path), so an index means something only with its thread; a process's
 * threads that share a stack each define it once, and the reader names
 * each definition (rare: once per thread and stack).
 *
 * What is forgotten when: a thread's stacks at its STACK_RESET and
 * THREAD_END records (cw_heapstacks_forget), a process's at its START
 * record (an exec's new image, a fork's child: cw_heapstacks_forget_pid).
 * An index the reader does not hold is counted (unknown) by the caller,
 * never guessed. Memory: at most CW_HEAPCACHE_STACKS entries per thread
 * that has not ended, each with its frames.
 *
 * Thread: the reader's thread only. */
#ifndef CW_SOURCES_HEAPSTACKS_H
#define CW_SOURCES_HEAPSTACKS_H

#include <stdbool.h>
#include <stdint.h>

#include "sources/heap/heapring.h"

/* One defined stack. stack_id and gen are the caller's: the interned
 * stack and the generation of the process's mappings it was named under
 * (named false: not named yet, or named with frames outside every
 * mapping). */
typedef struct cw_heapstk {
    uint64_t *pc; /* owned: n return addresses, innermost first */
    uint16_t n;
    bool truncated; /* the thread's stack had more frames than it sent */
    bool named;
    uint32_t stack_id, gen;
} cw_heapstk_t;

typedef struct cw_heapstacks cw_heapstacks_t;

/* 0 and *out set, or CW_ENOMEM. Free with cw_heapstacks_destroy(). */
int cw_heapstacks_create(cw_heapstacks_t **out);
void cw_heapstacks_destroy(cw_heapstacks_t *s); /* accepts NULL */

/* Defines idx of thread (pid, tid) as the n frames at pc (copied),
 * replacing what it held. *out (borrowed, valid until the next call that
 * changes the table) is the entry, not named. 0, CW_EINVAL (idx past
 * CW_HEAPCACHE_STACKS, or n past CW_HEAPRING_FRAMES), or CW_ENOMEM. */
int cw_heapstacks_define(cw_heapstacks_t *s, uint32_t pid, uint32_t tid, uint32_t idx,
                         const uint64_t *pc, uint16_t n, bool truncated, cw_heapstk_t **out);

/* The entry thread (pid, tid) defined as idx, or NULL when it holds none
 * (borrowed, as above). */
cw_heapstk_t *cw_heapstacks_find(cw_heapstacks_t *s, uint32_t pid, uint32_t tid, uint32_t idx);

/* Takes what the record rec says of stacks: a definition is entered, a
 * STACK_RESET or THREAD_END forgets its thread's stacks, a START its
 * process's. *out: the entry of the stack rec's event names (borrowed, as
 * above), or NULL: rec names none (CW_HEAPRING_NOSTACK; a record that is
 * not an event), or an index the reader holds no definition of, or a
 * definition past the protocol's bounds: those two are counted
 * (cw_heapstacks_unknown) and *unknown set, never guessed. 0 or
 * CW_ENOMEM. */
int cw_heapstacks_take(cw_heapstacks_t *s, const cw_heapring_rec_t *rec, cw_heapstk_t **out,
                       bool *unknown);
/* Records that named a stack the reader did not hold, so far. */
uint64_t cw_heapstacks_unknown(const cw_heapstacks_t *s);

/* Forgets the stacks of thread (pid, tid); of every thread of pid. */
void cw_heapstacks_forget(cw_heapstacks_t *s, uint32_t pid, uint32_t tid);
void cw_heapstacks_forget_pid(cw_heapstacks_t *s, uint32_t pid);

#endif
