/* churner.c - a long-lived process that changes its committed memory all
 * the time, for the soak (bench/soak.py, tests/e2e/test_soak_root.py).
 *
 *   churner [--hold MB] [--rate OPS] [--threads N]
 *
 * Maps and touches --hold MB (default 32) at start and keeps it (a known
 * amount held), prints "ready PID" on stdout, then, until killed, makes
 * about --rate (default 200) memory calls a second in all:
 *   - N worker threads (default 2): malloc/free of 16 B to 512 KiB (their
 *     thread arenas grow and shrink with mprotect; big blocks are mmap'd
 *     by glibc), and mmap/munmap of their own, whole or in part;
 *   - the main thread: brk up and down (sbrk; it never mallocs after the
 *     start, so glibc's main arena never sees a foreign break), and
 *     mprotect of pages of a PROT_NONE reservation to read-write and back.
 * A soak stops it with SIGSTOP to compare what the service tracked with
 * /proc/PID/smaps: every call is then complete. */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#define MB (1024u * 1024u)
#define PAGE 4096u
#define SLOTS 64
#define RESERVE_PAGES 1024u

static double period_s; /* seconds between two calls of one thread */

static void pause_s(double s)
{
    struct timespec t = {(time_t)s, (long)((s - (time_t)s) * 1e9)};
    while (nanosleep(&t, &t) != 0) {
    }
}

/* xorshift: each thread its own state. */
static uint64_t next_rand(uint64_t *x)
{
    *x ^= *x << 13;
    *x ^= *x >> 7;
    *x ^= *x << 17;
    return *x;
}

static void *worker(void *arg)
{
    uint64_t rs = (uintptr_t)arg * 0x9e3779b97f4a7c15u + 1;
    void *heap[SLOTS] = {0};
    struct {
        char *p;
        size_t len;
    } maps[SLOTS] = {{0}};
    for (;;) {
        unsigned i = (unsigned)(next_rand(&rs) % SLOTS);
        if (next_rand(&rs) % 2) {
            free(heap[i]);
            heap[i] = NULL;
            if (next_rand(&rs) % 3) {
                size_t n = 16u << (next_rand(&rs) % 16); /* 16 B .. 512 KiB */
                if ((heap[i] = malloc(n))) memset(heap[i], 1, n < 4096 ? n : 4096);
            }
        } else if (maps[i].p) {
            /* Whole, or the upper half (a partial munmap). */
            size_t keep = next_rand(&rs) % 2 ? 0 : maps[i].len / 2 / PAGE * PAGE;
            munmap(maps[i].p + keep, maps[i].len - keep);
            maps[i].len = keep;
            if (!keep) maps[i].p = NULL;
        } else {
            size_t len = PAGE * (1 + next_rand(&rs) % 256);
            char *p = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
            if (p != MAP_FAILED) {
                p[0] = 1;
                maps[i].p = p;
                maps[i].len = len;
            }
        }
        pause_s(period_s);
    }
    return NULL;
}

int main(int argc, char **argv)
{
    unsigned hold = 32, rate = 200, threads = 2;
    for (int i = 1; i < argc; i++) {
        unsigned *dst = !strcmp(argv[i], "--hold")      ? &hold
                        : !strcmp(argv[i], "--rate")    ? &rate
                        : !strcmp(argv[i], "--threads") ? &threads
                                                        : NULL;
        char *end = NULL;
        if (!dst || i + 1 >= argc || (*dst = (unsigned)strtoul(argv[++i], &end, 10), *end)) {
            fprintf(stderr, "usage: churner [--hold MB] [--rate OPS] [--threads N]\n");
            return 2;
        }
    }
    if (!rate || !threads) {
        fprintf(stderr, "churner: --rate and --threads must be at least 1\n");
        return 2;
    }
    period_s = (double)(threads + 1) / rate;
    if (hold) {
        char *h = mmap(NULL, (size_t)hold * MB, PROT_READ | PROT_WRITE,
                       MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        if (h == MAP_FAILED) {
            perror("churner: mmap of the held memory");
            return 1;
        }
        memset(h, 1, (size_t)hold * MB);
    }
    char *res = mmap(NULL, RESERVE_PAGES * PAGE, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (res == MAP_FAILED) {
        perror("churner: mmap of the reservation");
        return 1;
    }
    for (uintptr_t t = 0; t < threads; t++) {
        pthread_t th;
        if (pthread_create(&th, NULL, worker, (void *)(t + 1)) != 0) {
            fprintf(stderr, "churner: cannot start a thread\n");
            return 1;
        }
    }
    printf("ready %d\n", (int)getpid());
    fflush(stdout);
    uint64_t rs = 42;
    intptr_t brk_up = 0; /* bytes above the initial break */
    for (;;) {
        if (next_rand(&rs) % 2) {
            intptr_t step = (intptr_t)(PAGE * (1 + next_rand(&rs) % 64));
            if (brk_up >= (intptr_t)(8 * MB) || (brk_up && next_rand(&rs) % 2)) step = -brk_up / 2;
            if (step < 0) step = -(intptr_t)((uintptr_t)-step / PAGE * PAGE);
            char *p = sbrk(step);
            if (p != (void *)-1) {
                if (step > 0) p[0] = 1;
                brk_up += step;
            }
        } else {
            size_t off = PAGE * (next_rand(&rs) % (RESERVE_PAGES - 64));
            size_t len = PAGE * (1 + next_rand(&rs) % 64);
            int prot = next_rand(&rs) % 2 ? PROT_READ | PROT_WRITE : PROT_NONE;
            if (mprotect(res + off, len, prot) == 0 && prot != PROT_NONE) res[off] = 1;
        }
        pause_s(period_s);
    }
}
