/* pool.c - fixed-size object pool (see pool.h). */
#include "commitwatch/pool.h"

#include <stdlib.h>

typedef struct chunk_hdr {
    struct chunk_hdr *next;
    /* objects follow, aligned for any scalar type */
    max_align_t pad[];
} chunk_hdr_t;

void cw_pool_init(cw_pool_t *p, size_t obj_size, size_t per_chunk)
{
    /* Objects need max_align_t's alignment, not its size (32 bytes on
     * x86-64, which made a 16-byte object take 32). */
    size_t a = _Alignof(max_align_t);
    if (obj_size < sizeof(void *)) obj_size = sizeof(void *);
    p->obj_size = (obj_size + a - 1) / a * a;
    p->per_chunk = per_chunk ? per_chunk : 256;
    p->free_list = NULL;
    p->chunks = NULL;
    p->live = 0;
    p->nchunks = 0;
}

void *cw_pool_get(cw_pool_t *p)
{
    if (!p->free_list) {
        chunk_hdr_t *c = malloc(sizeof *c + p->obj_size * p->per_chunk);
        if (!c) return NULL;
        c->next = p->chunks;
        p->chunks = c;
        p->nchunks++;
        char *base = (char *)c->pad;
        for (size_t i = p->per_chunk; i-- > 0;) {
            void **o = (void **)(base + i * p->obj_size);
            *o = p->free_list;
            p->free_list = o;
        }
    }
    void **o = p->free_list;
    p->free_list = *o;
    p->live++;
    return o;
}

void cw_pool_put(cw_pool_t *p, void *obj)
{
    if (!obj) return;
    *(void **)obj = p->free_list;
    p->free_list = obj;
    p->live--;
}

size_t cw_pool_bytes(const cw_pool_t *p)
{
    return p->nchunks * (sizeof(chunk_hdr_t) + p->obj_size * p->per_chunk);
}

void cw_pool_destroy(cw_pool_t *p)
{
    chunk_hdr_t *c = p->chunks;
    while (c) {
        chunk_hdr_t *n = c->next;
        free(c);
        c = n;
    }
    p->chunks = NULL;
    p->free_list = NULL;
    p->live = 0;
    p->nchunks = 0;
}
