/* pmap.c - the perf source's small u32 -> pointer maps (pid -> process,
 * tid -> thread, child tid -> clone flags): open addressing with linear
 * probing and backward-shift deletion, a power-of-two capacity kept at
 * most half full. Called by perf.c and procs.c; calls nothing of theirs. */
#include <stdlib.h>
#include <string.h>

#include "sources/perf/perf_types.h"

static size_t h32(uint32_t k, size_t cap)
{
    return (size_t)((k * 2654435761u) & (cap - 1));
}

void *cw_perf__pmap_get(const cw_perf__pmap_t *m, uint32_t k)
{
    if (!m->cap) return NULL;
    for (size_t i = h32(k, m->cap); m->vals[i]; i = (i + 1) & (m->cap - 1))
        if (m->keys[i] == k) return m->vals[i];
    return NULL;
}

int cw_perf__pmap_put(cw_perf__pmap_t *m, uint32_t k, void *v)
{
    if ((m->n + 1) * 2 > m->cap) {
        cw_perf__pmap_t g = {0};
        g.cap = m->cap ? m->cap * 2 : 256;
        g.keys = calloc(g.cap, sizeof *g.keys);
        g.vals = calloc(g.cap, sizeof *g.vals);
        if (!g.keys || !g.vals) {
            free(g.keys);
            free(g.vals);
            return CW_ENOMEM;
        }
        for (size_t i = 0; i < m->cap; i++)
            if (m->vals[i]) cw_perf__pmap_put(&g, m->keys[i], m->vals[i]);
        free(m->keys);
        free(m->vals);
        *m = g;
    }
    size_t i = h32(k, m->cap);
    while (m->vals[i] && m->keys[i] != k)
        i = (i + 1) & (m->cap - 1);
    if (!m->vals[i]) m->n++;
    m->keys[i] = k;
    m->vals[i] = v;
    return 0;
}

void cw_perf__pmap_del(cw_perf__pmap_t *m, uint32_t k)
{
    if (!m->cap) return;
    size_t i = h32(k, m->cap);
    while (m->vals[i] && m->keys[i] != k)
        i = (i + 1) & (m->cap - 1);
    if (!m->vals[i]) return;
    m->vals[i] = NULL;
    m->n--;
    /* Shift back the entries of the cluster that follows. */
    for (size_t j = (i + 1) & (m->cap - 1); m->vals[j]; j = (j + 1) & (m->cap - 1)) {
        size_t home = h32(m->keys[j], m->cap);
        bool between = i <= j ? (i < home && home <= j) : (i < home || home <= j);
        if (between) continue;
        m->keys[i] = m->keys[j];
        m->vals[i] = m->vals[j];
        m->vals[j] = NULL;
        i = j;
    }
}

void cw_perf__pmap_free(cw_perf__pmap_t *m)
{
    free(m->keys);
    free(m->vals);
    memset(m, 0, sizeof *m);
}
