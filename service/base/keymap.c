/* keymap.c - two-word key -> dense index map (see keymap.h). Linear
 * probing, load kept <= 1/2. */
#include "commitwatch/keymap.h"

#include <stdlib.h>
#include <string.h>

#include "commitwatch/hash.h"

static inline uint32_t slot_of(const cw_keymap_t *m, uint64_t k1, uint64_t k2)
{
    return (uint32_t)cw_hash_combine(cw_hash_u64(k1), k2) & m->mask;
}

int cw_keymap_init(cw_keymap_t *m, uint32_t capacity)
{
    uint32_t cap = 16;
    while (cap < capacity && cap <= UINT32_MAX / 4)
        cap *= 2;
    memset(m, 0, sizeof *m);
    m->k1 = malloc(cap * sizeof *m->k1);
    m->k2 = malloc(cap * sizeof *m->k2);
    m->idx = calloc(cap, sizeof *m->idx);
    m->slot = malloc(cap / 2 * sizeof *m->slot); /* count <= cap / 2 */
    if (!m->k1 || !m->k2 || !m->idx || !m->slot) {
        cw_keymap_free(m);
        return -1;
    }
    m->mask = cap - 1;
    return 0;
}

void cw_keymap_free(cw_keymap_t *m)
{
    free(m->k1);
    free(m->k2);
    free(m->idx);
    free(m->slot);
    memset(m, 0, sizeof *m);
}

void cw_keymap_clear(cw_keymap_t *m)
{
    /* A table grown by one busy bucket stays large: the next ones empty
     * the few slots they used instead of all of it. */
    if (m->count < (m->mask + 1) / 16)
        for (uint32_t i = 0; i < m->count; i++)
            m->idx[m->slot[i]] = 0;
    else if (m->count)
        memset(m->idx, 0, ((size_t)m->mask + 1) * sizeof *m->idx);
    m->count = 0;
}

static int grow(cw_keymap_t *m)
{
    cw_keymap_t n;
    if (cw_keymap_init(&n, (m->mask + 1) * 2) != 0) return -1;
    for (uint32_t i = 0; i <= m->mask; i++) {
        if (!m->idx[i]) continue;
        uint32_t j = slot_of(&n, m->k1[i], m->k2[i]);
        while (n.idx[j])
            j = (j + 1) & n.mask;
        n.k1[j] = m->k1[i];
        n.k2[j] = m->k2[i];
        n.idx[j] = m->idx[i];
        n.slot[m->idx[i] - 1] = j;
    }
    n.count = m->count;
    cw_keymap_free(m);
    *m = n;
    return 0;
}

uint32_t cw_keymap_get(cw_keymap_t *m, uint64_t k1, uint64_t k2, int *added)
{
    uint32_t i = slot_of(m, k1, k2);
    *added = 0;
    while (m->idx[i]) {
        if (m->k1[i] == k1 && m->k2[i] == k2) return m->idx[i] - 1;
        i = (i + 1) & m->mask;
    }
    if ((m->count + 1) * 2 > m->mask + 1) {
        if (grow(m) != 0) return UINT32_MAX;
        return cw_keymap_get(m, k1, k2, added);
    }
    m->k1[i] = k1;
    m->k2[i] = k2;
    m->slot[m->count] = i;
    m->idx[i] = ++m->count;
    *added = 1;
    return m->count - 1;
}

uint32_t cw_keymap_find(const cw_keymap_t *m, uint64_t k1, uint64_t k2)
{
    if (!m->idx) return UINT32_MAX;
    uint32_t i = slot_of(m, k1, k2);
    while (m->idx[i]) {
        if (m->k1[i] == k1 && m->k2[i] == k2) return m->idx[i] - 1;
        i = (i + 1) & m->mask;
    }
    return UINT32_MAX;
}

size_t cw_keymap_bytes(const cw_keymap_t *m)
{
    if (!m->idx) return 0;
    size_t cap = (size_t)m->mask + 1;
    return cap * (sizeof *m->k1 + sizeof *m->k2 + sizeof *m->idx) + cap / 2 * sizeof *m->slot;
}
