/* keymap.h - an open-addressing map from a two-word key to a dense index.
 *
 * Values live in the caller's own array, indexed by what the map returns;
 * the map only finds them. Clearing keeps the capacity (the aggregator
 * reuses one map per bucket). Not thread-safe. */
#ifndef CW_CORE_KEYMAP_H
#define CW_CORE_KEYMAP_H

#include <stdint.h>

typedef struct cw__keymap {
    uint64_t *k1, *k2;
    uint32_t *idx; /* index + 1; 0 = empty slot */
    uint32_t mask;
    uint32_t count;
} cw__keymap_t;

int cw__keymap_init(cw__keymap_t *m, uint32_t initial_pow2);
void cw__keymap_free(cw__keymap_t *m);
void cw__keymap_clear(cw__keymap_t *m);
/* Finds the key; if absent inserts it with index = count (the next dense
 * index) and sets *added. Returns the index, or UINT32_MAX on ENOMEM. */
uint32_t cw__keymap_get(cw__keymap_t *m, uint64_t k1, uint64_t k2, int *added);

#endif
