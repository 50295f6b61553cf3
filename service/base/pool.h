/* pool.h - a fixed-size object pool: objects are carved from chunks and
 * recycled through a free list, so the hot path does not call malloc per
 * event once warm. Not thread-safe; the owner's thread only. */
#ifndef CW_CORE_POOL_H
#define CW_CORE_POOL_H

#include <stddef.h>

typedef struct cw__pool {
    size_t obj_size;
    size_t per_chunk;
    void *free_list;
    void *chunks; /* singly linked through the first word */
    size_t live;
} cw__pool_t;

void cw__pool_init(cw__pool_t *p, size_t obj_size, size_t per_chunk);
/* An uninitialised object, or NULL when out of memory. */
void *cw__pool_get(cw__pool_t *p);
void cw__pool_put(cw__pool_t *p, void *obj);
/* Frees every chunk (objects still out become invalid). */
void cw__pool_destroy(cw__pool_t *p);

#endif
