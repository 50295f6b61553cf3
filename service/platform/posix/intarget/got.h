/* got.h - pointing a running process's calls of named functions at hooks
 * by rewriting the global offset table of every object it has loaded (the
 * heap interposer's attach mode: loaded with dlopen into a process that
 * is already running, it cannot interpose by symbol order as LD_PRELOAD
 * does; docs/DESIGN.md, "Heap drill-down").
 *
 * Linux, ELF, x86-64 and AArch64. Compiled into the library that runs
 * inside the traced process (this folder holds only such code), never
 * into commitwatch itself. */
#ifndef COMMITWATCH_HEAP_GOT_H
#define COMMITWATCH_HEAP_GOT_H

#include <stddef.h>

typedef struct cwh_hook {
    const char *name; /* the function, as the objects import it: "malloc" */
    void *hook;       /* what their calls of it reach from now on */
} cwh_hook_t;

/* Rewrites, in every object loaded now but the one holding the address
 * `self` (the interposer itself) and the dynamic loader, each GOT slot a
 * JUMP_SLOT or GLOB_DAT relocation binds to one of hooks[i].name so that
 * it holds hooks[i].hook; slots in the RELRO segment are made writable
 * for the write and read-only again after. The slots rewritten and their
 * old values are kept (up to CWH_GOT_MAX_SLOTS; past it the rest are left
 * alone and counted in *skipped) for cwh_got_unhook. Returns the number
 * of slots rewritten. Not thread-safe against another call of itself; the
 * process's other threads may run (a slot is one aligned pointer store).
 * Objects loaded later are not patched. */
#define CWH_GOT_MAX_SLOTS 4096
int cwh_got_hook(const cwh_hook_t *hooks, size_t n, const void *self, size_t *skipped);

/* Puts back every slot cwh_got_hook rewrote (that still holds our hook).
 * Returns the number put back. */
int cwh_got_unhook(void);

#endif
