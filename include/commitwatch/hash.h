/* hash.h - hashing helpers shared by the hash tables of every stage. */
#ifndef COMMITWATCH_HASH_H
#define COMMITWATCH_HASH_H

#include <stddef.h>
#include <stdint.h>

/* 64-bit FNV-1a of bytes that follow those already hashed into h: one
 * hash over several pieces (a header and its payload). */
static inline uint64_t cw_hash_bytes_more(uint64_t h, const void *p, size_t n)
{
    const unsigned char *s = p;
    for (size_t i = 0; i < n; i++) {
        h ^= s[i];
        h *= 1099511628211ULL;
    }
    return h;
}

/* 64-bit FNV-1a over bytes; good enough for interning short strings. */
static inline uint64_t cw_hash_bytes(const void *p, size_t n)
{
    return cw_hash_bytes_more(1469598103934665603ULL, p, n);
}

/* A strong 64-bit mixer (splitmix64 finalizer) for integer keys. */
static inline uint64_t cw_hash_u64(uint64_t x)
{
    x ^= x >> 30;
    x *= 0xbf58476d1ce4e5b9ULL;
    x ^= x >> 27;
    x *= 0x94d049bb133111ebULL;
    x ^= x >> 31;
    return x;
}

static inline uint64_t cw_hash_combine(uint64_t h, uint64_t v)
{
    return cw_hash_u64(h ^ (v + 0x9e3779b97f4a7c15ULL + (h << 6) + (h >> 2)));
}

#endif
