/* keymap.h - an open-addressing map from a two-word key to a dense index.
 *
 * Values live in the caller's own array, indexed by what the map returns;
 * the map only finds them. Clearing keeps the capacity (the aggregator
 * reuses one map per bucket) and costs the keys held, not the capacity.
 * Not thread-safe. */
#ifndef COMMITWATCH_KEYMAP_H
#define COMMITWATCH_KEYMAP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef struct cw_keymap {
    uint64_t *k1, *k2;
    uint32_t *idx;  /* index + 1; 0 = empty slot; NULL before init and after free */
    uint32_t *slot; /* index -> its slot, so a clear empties only the used slots */
    uint32_t mask;
    uint32_t count;
} cw_keymap_t;

/* Makes an empty map of at least `capacity` slots (a power of two, at
 * least 16; it holds half as many keys before it grows). -1 on ENOMEM. */
int cw_keymap_init(cw_keymap_t *m, uint32_t capacity);
void cw_keymap_free(cw_keymap_t *m);
void cw_keymap_clear(cw_keymap_t *m);
/* Whether m was made (init) and not freed since. */
static inline bool cw_keymap_ready(const cw_keymap_t *m)
{
    return m->idx != NULL;
}
/* Finds the key; if absent inserts it with index = count (the next dense
 * index) and sets *added. Returns the index, or UINT32_MAX on ENOMEM. */
uint32_t cw_keymap_get(cw_keymap_t *m, uint64_t k1, uint64_t k2, int *added);
/* The key's index, or UINT32_MAX when absent (nothing inserted). */
uint32_t cw_keymap_find(const cw_keymap_t *m, uint64_t k1, uint64_t k2);
/* The bytes the map holds (its tables; 0 before init or after free). */
size_t cw_keymap_bytes(const cw_keymap_t *m);

#endif
