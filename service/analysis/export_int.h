/* export_int.h - what export.c (folded, speedscope, the entry point) and
 * export_pprof.c (the protobuf profile) share, defined in export_common.c:
 * a string interner and the name of a process's root frame. Not
 * thread-safe; one export at a time per interner. */
#ifndef CW_EXPORT_INT_H
#define CW_EXPORT_INT_H

#include <stddef.h>
#include <stdint.h>

#include "commitwatch/export.h"
#include "commitwatch/keymap.h"

/* Distinct strings in order of first appearance, each with its dense
 * index. The strings are borrowed: they must outlive the interner. */
typedef struct cw__interner {
    cw_keymap_t map;
    const char **v;
    size_t n, cap;
} cw__interner_t;

int cw__interner_init(cw__interner_t *in);
void cw__interner_free(cw__interner_t *in);
/* The index of s (added when new), or UINT32_MAX on ENOMEM. */
uint32_t cw__intern(cw__interner_t *in, const char *s);

/* "NAME (pid N)", or "NAME (N folded)" for a folded group: malloc'd, or
 * NULL on ENOMEM. */
char *cw__export_proc_frame(const cw_proc_report_t *p);

/* The frame shown for a stack without frames. */
#define CW__EXPORT_NO_FRAMES "(no frames)"

#endif
