/* pool.h - a fixed-size object pool: objects are carved from chunks and
 * recycled through a free list, so the hot path does not call malloc per
 * event once warm. Not thread-safe; the owner's thread only. */
#ifndef COMMITWATCH_POOL_H
#define COMMITWATCH_POOL_H

#include <stddef.h>

typedef struct cw_pool {
    size_t obj_size;
    size_t per_chunk;
    void *free_list;
    void *chunks; /* singly linked through the first word */
    size_t live;
    size_t nchunks;
} cw_pool_t;

void cw_pool_init(cw_pool_t *p, size_t obj_size, size_t per_chunk);
/* An uninitialised object, or NULL when out of memory. */
void *cw_pool_get(cw_pool_t *p);
void cw_pool_put(cw_pool_t *p, void *obj);
/* Bytes of the chunks taken from malloc (never given back before destroy). */
size_t cw_pool_bytes(const cw_pool_t *p);
/* Frees every chunk (objects still out become invalid). */
void cw_pool_destroy(cw_pool_t *p);

#endif
