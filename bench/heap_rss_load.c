/* heap_rss_load.c - the allocation-heavy program bench/heap_rss.py traces
 * to bound commitwatch's memory during a long heap trace
 * (docs/BENCHMARKS.md, "Heap drill-down overhead").
 *
 *   heap_rss_load [--seconds S] [--rate N] [--depth D] [--live W] [--leak-every K]
 *
 * For S seconds (default 10) it makes N allocations a second (default
 * 1,000,000; 0: as fast as it can), each from one of 2^D distinct stacks
 * (default D 8: 256; two functions calling each other D deep, chosen by
 * the bits of a counter) and of one of 64 sizes. The blocks go into a
 * working set of W slots (default 4096): each allocation frees the block
 * it replaces, so W blocks stay live; every K-th (default 1024) is leaked
 * instead, never freed. At the end it prints one line:
 *
 *   allocs A frees F seconds S rate R leaked_blocks L leaked_bytes B
 *
 * Built with -O2 and no frame pointers, as Debian builds; the stack
 * functions are noinline and make no tail calls, so every stack is as
 * deep as its depth says. Single-threaded. */
#define _GNU_SOURCE
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static void **live_set;
static size_t live_n, live_at;
static unsigned leak_every;
static uint64_t allocs, frees, leaked_blocks, leaked_bytes;

static int64_t mono_ns(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (int64_t)t.tv_sec * 1000000000 + t.tv_nsec;
}

/* The leak: a block never freed (its own function, so the report's
 * stacks through it hold exactly the leaked bytes). */
static __attribute__((noinline)) void leak_one(size_t size)
{
    void *p = malloc(size);
    if (!p) abort();
    memset(p, 0, 8);
    __asm__ volatile("" : : "r"(p) : "memory");
    allocs++;
    leaked_blocks++;
    leaked_bytes += size;
}

/* The leaf: one allocation, into the working set (freeing the block it
 * replaces) or leaked. */
static __attribute__((noinline)) void leaf(uint64_t i)
{
    size_t size = 16 + (size_t)(i % 64) * 8;
    if (leak_every && i % leak_every == 0) {
        leak_one(16 + (size_t)(i / leak_every % 64) * 8);
        __asm__ volatile("" ::: "memory");
        return;
    }
    void *p = malloc(size);
    if (!p) abort();
    memset(p, 0, 8); /* touched, as a program would */
    allocs++;
    void *old = live_set[live_at];
    live_set[live_at] = p;
    live_at = (live_at + 1) % live_n;
    if (old) {
        free(old);
        frees++;
    }
}

static void walk_a(uint64_t i, unsigned depth, unsigned bits);
static void walk_b(uint64_t i, unsigned depth, unsigned bits);

/* Two functions calling each other, one per bit of `bits`: 2^depth
 * stacks. The same body twice (two functions make two frames), each
 * counting its calls in a counter of its own so that the compiler cannot
 * fold them into one (-fipa-icf); the empty asm after each call keeps it
 * from being a tail call. */
#define WALK(name)                                                                                 \
    static volatile unsigned name##_calls;                                                         \
    static __attribute__((noinline)) void name(uint64_t i, unsigned depth, unsigned bits)          \
    {                                                                                              \
        name##_calls = name##_calls + 1;                                                           \
        if (!depth)                                                                                \
            leaf(i);                                                                               \
        else if (bits & 1)                                                                         \
            walk_a(i, depth - 1, bits >> 1);                                                       \
        else                                                                                       \
            walk_b(i, depth - 1, bits >> 1);                                                       \
        __asm__ volatile("" ::: "memory");                                                         \
    }
WALK(walk_a)
WALK(walk_b)

static long arg_num(int argc, char **argv, const char *name, long def)
{
    for (int i = 1; i + 1 < argc; i++)
        if (strcmp(argv[i], name) == 0) return strtol(argv[i + 1], NULL, 10);
    return def;
}

int main(int argc, char **argv)
{
    double seconds = (double)arg_num(argc, argv, "--seconds", 10);
    long rate = arg_num(argc, argv, "--rate", 1000000);
    unsigned depth = (unsigned)arg_num(argc, argv, "--depth", 8);
    live_n = (size_t)arg_num(argc, argv, "--live", 4096);
    leak_every = (unsigned)arg_num(argc, argv, "--leak-every", 1024);
    if (seconds <= 0 || rate < 0 || depth > 30 || live_n == 0) {
        fprintf(stderr, "heap_rss_load: bad arguments\n");
        return 2;
    }
    live_set = calloc(live_n, sizeof *live_set);
    if (!live_set) return 1;
    int64_t t0 = mono_ns(), end = t0 + (int64_t)(seconds * 1e9), now = t0;
    uint64_t i = 0;
    const unsigned mask = (1u << depth) - 1;
    while (now < end) {
        /* A batch, then the clock: ahead of the rate, sleep the difference. */
        for (int k = 0; k < 1024; k++, i++)
            walk_a(i, depth, (unsigned)(i * 2654435761u >> 7) & mask);
        now = mono_ns();
        if (rate) {
            int64_t due = t0 + (int64_t)((double)i * 1e9 / (double)rate);
            if (due > now) {
                struct timespec ts = {(time_t)((due - now) / 1000000000),
                                      (long)((due - now) % 1000000000)};
                nanosleep(&ts, NULL);
                now = mono_ns();
            }
        }
    }
    double took = (double)(now - t0) / 1e9;
    printf("allocs %llu frees %llu seconds %.3f rate %.0f leaked_blocks %llu leaked_bytes %llu\n",
           (unsigned long long)allocs, (unsigned long long)frees, took, (double)allocs / took,
           (unsigned long long)leaked_blocks, (unsigned long long)leaked_bytes);
    return 0;
}
