/* perf_overhead.c - the loads of the perf source's overhead benchmark
 * (bench/perf_overhead.py runs them with and without tracing):
 *
 *   churn N     N small-block malloc/free pairs (16..256 bytes) over a pool
 *               of 4096 live blocks: the common case, which makes no
 *               syscall once the heap has grown;
 *   storm N     N times: mmap 1 MiB, write one byte per page, munmap;
 *   storm-bare N  the same without touching the pages (the worst case for
 *               tracing: nothing but the two syscalls).
 *
 * Prints the elapsed seconds (CLOCK_MONOTONIC). */
#define _GNU_SOURCE
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>

static double now_s(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

static void churn(long n)
{
    enum { POOL = 4096 };
    static void *pool[POOL];
    uint32_t x = 2463534242u;
    for (long i = 0; i < n; i++) {
        x ^= x << 13, x ^= x >> 17, x ^= x << 5;
        size_t k = x % POOL;
        free(pool[k]);
        pool[k] = malloc(16 + (x >> 8) % 241);
        if (!pool[k]) exit(1);
        ((volatile char *)pool[k])[0] = (char)i;
    }
    for (size_t k = 0; k < POOL; k++) free(pool[k]);
}

static void storm(long n, int touch)
{
    const size_t size = 1u << 20;
    for (long i = 0; i < n; i++) {
        char *p = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        if (p == MAP_FAILED) exit(1);
        if (touch)
            for (size_t o = 0; o < size; o += 4096) p[o] = 1;
        munmap(p, size);
    }
}

int main(int argc, char **argv)
{
    if (argc != 3) {
        fprintf(stderr, "usage: perf_overhead churn|storm|storm-bare N\n");
        return 2;
    }
    long n = atol(argv[2]);
    double t0 = now_s();
    if (strcmp(argv[1], "churn") == 0) churn(n);
    else if (strcmp(argv[1], "storm") == 0) storm(n, 1);
    else if (strcmp(argv[1], "storm-bare") == 0) storm(n, 0);
    else return 2;
    printf("%.6f\n", now_s() - t0);
    return 0;
}
