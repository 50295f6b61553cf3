/* heap_truth.c - a program whose heap behaviour is known exactly: the
 * truth the heap drill-down is tested against (tests/e2e/test_heap.py).
 *
 *   heap_truth EXPECT.json
 *   heap_truth --attach EXPECT.json
 *
 * - truth_leak: leaks LEAK_MALLOCS blocks from malloc of known sizes and
 *   one each from calloc, posix_memalign, aligned_alloc, memalign and
 *   valloc, never freed;
 * - truth_churn: allocates and frees CHURN_ROUNDS blocks (malloc, calloc),
 *   here and on CHURN_THREADS threads at once: nothing outstanding;
 * - truth_realloc: a realloc chain from NULL through REALLOC_STEPS sizes,
 *   then reallocarray to its final size, which stays allocated.
 *
 * --attach: for a trace that attaches to it running. First truth_before
 * allocates BEFORE_N blocks; then it prints "ready" and waits for a line
 * on stdin (sent once the trace has attached); then the three above, and
 * it frees the BEFORE_N blocks, which the trace never saw allocated: they
 * are to be counted as frees of unknown blocks, nothing else.
 *
 * It writes the figures it expects, derived from the constants below and
 * nowhere else, to EXPECT.json (truth_leak's bytes also by the allocation
 * function that made them, for a tracer that interposes only some of them:
 * test_heap_heaptrack.py), and prints nothing. The functions are
 * noinline, and the program is built without frame pointers
 * (tests/programs/CMakeLists.txt), as Debian builds: the interposer must
 * unwind it from CFI. */
#define _GNU_SOURCE
#include <malloc.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define LEAK_MALLOCS 7
#define LEAK_BASE 24 /* malloc i leaks LEAK_BASE + i * LEAK_STEP bytes */
#define LEAK_STEP 40
#define LEAK_CALLOC_N 5
#define LEAK_CALLOC_SIZE 12
#define LEAK_PM_SIZE 1000 /* posix_memalign(64) */
#define LEAK_AA_SIZE 512  /* aligned_alloc(64): a multiple of 64 */
#define LEAK_MA_SIZE 77   /* memalign(32) */
#define LEAK_VA_SIZE 300  /* valloc */
#define CHURN_ROUNDS 2000
#define CHURN_SIZE 48 /* round i: CHURN_SIZE + i % 13 bytes */
#define CHURN_THREADS 2
#define REALLOC_STEPS 6 /* sizes REALLOC_BASE << i */
#define REALLOC_BASE 16
#define REALLOC_FINAL_N 3 /* reallocarray(p, REALLOC_FINAL_N, REALLOC_FINAL_ELEM) */
#define REALLOC_FINAL_ELEM 333
#define BEFORE_N 9 /* --attach: blocks allocated before the attach, freed after */
#define BEFORE_SIZE 200

void truth_leak(void);
void truth_churn(void);
void *truth_realloc(void);
void truth_before(void);

static void *leaked[LEAK_MALLOCS + 5];

/* Keeps the compiler from removing an allocation whose memory is unused. */
__attribute__((noinline)) static void touch(void *p)
{
    __asm__ volatile("" : : "r"(p) : "memory");
    if (p) *(volatile char *)p = 1;
}

__attribute__((noinline)) void truth_leak(void)
{
    int k = 0;
    for (int i = 0; i < LEAK_MALLOCS; i++)
        touch(leaked[k++] = malloc(LEAK_BASE + (size_t)i * LEAK_STEP));
    touch(leaked[k++] = calloc(LEAK_CALLOC_N, LEAK_CALLOC_SIZE));
    void *p = NULL;
    if (posix_memalign(&p, 64, LEAK_PM_SIZE) == 0) touch(leaked[k++] = p);
    touch(leaked[k++] = aligned_alloc(64, LEAK_AA_SIZE));
    touch(leaked[k++] = memalign(32, LEAK_MA_SIZE));
    touch(leaked[k++] = valloc(LEAK_VA_SIZE));
}

__attribute__((noinline)) void truth_churn(void)
{
    for (int i = 0; i < CHURN_ROUNDS; i++) {
        void *p = (i & 1) ? calloc(1, CHURN_SIZE + (size_t)(i % 13))
                          : malloc(CHURN_SIZE + (size_t)(i % 13));
        touch(p);
        free(p);
    }
}

static void *churn_thread(void *arg)
{
    (void)arg;
    truth_churn();
    return NULL;
}

__attribute__((noinline)) void *truth_realloc(void)
{
    char *p = NULL;
    for (int i = 0; i < REALLOC_STEPS; i++) {
        p = realloc(p, (size_t)REALLOC_BASE << i);
        touch(p);
    }
    p = reallocarray(p, REALLOC_FINAL_N, REALLOC_FINAL_ELEM);
    touch(p);
    return p;
}

static void *kept;
static void *before[BEFORE_N];

__attribute__((noinline)) void truth_before(void)
{
    for (int i = 0; i < BEFORE_N; i++)
        touch(before[i] = malloc(BEFORE_SIZE));
}

int main(int argc, char **argv)
{
    bool attach = argc == 3 && !strcmp(argv[1], "--attach");
    if (argc != 2 && !attach) {
        fprintf(stderr, "usage: heap_truth [--attach] EXPECT.json\n");
        return 2;
    }
    if (attach) {
        truth_before();
        char line[64];
        printf("ready\n");
        fflush(stdout);
        if (!fgets(line, sizeof line, stdin)) return 3;
    }
    truth_leak();
    truth_churn();
    pthread_t t[CHURN_THREADS];
    for (int i = 0; i < CHURN_THREADS; i++)
        if (pthread_create(&t[i], NULL, churn_thread, NULL) != 0) return 1;
    for (int i = 0; i < CHURN_THREADS; i++)
        pthread_join(t[i], NULL);
    kept = truth_realloc();
    if (attach)
        for (int i = 0; i < BEFORE_N; i++)
            free(before[i]);

    /* The expected figures, from the constants alone. */
    uint64_t leak_bytes = 0;
    for (int i = 0; i < LEAK_MALLOCS; i++)
        leak_bytes += LEAK_BASE + (uint64_t)i * LEAK_STEP;
    leak_bytes += LEAK_CALLOC_N * LEAK_CALLOC_SIZE + LEAK_PM_SIZE + LEAK_AA_SIZE + LEAK_MA_SIZE +
                  LEAK_VA_SIZE;
    uint64_t leak_malloc_bytes = leak_bytes - (LEAK_CALLOC_N * LEAK_CALLOC_SIZE + LEAK_PM_SIZE +
                                               LEAK_AA_SIZE + LEAK_MA_SIZE + LEAK_VA_SIZE);
    uint64_t churn_bytes = 0;
    for (int i = 0; i < CHURN_ROUNDS; i++)
        churn_bytes += CHURN_SIZE + (uint64_t)(i % 13);
    uint64_t realloc_bytes = 0;
    for (int i = 0; i < REALLOC_STEPS; i++)
        realloc_bytes += (uint64_t)REALLOC_BASE << i;
    uint64_t final = (uint64_t)REALLOC_FINAL_N * REALLOC_FINAL_ELEM;
    realloc_bytes += final;
    FILE *f = fopen(argv[argc - 1], "w");
    if (!f) return 1;
    fprintf(f,
            "{\"leak\":{\"function\":\"truth_leak\",\"outstanding_bytes\":%llu,"
            "\"outstanding_count\":%d,\"by_allocator\":{\"malloc\":%llu,\"calloc\":%d,"
            "\"posix_memalign\":%d,\"aligned_alloc\":%d,\"memalign\":%d,\"valloc\":%d}},"
            "\"churn\":{\"function\":\"truth_churn\",\"alloc_bytes\":%llu,\"alloc_count\":%d},"
            "\"realloc\":{\"function\":\"truth_realloc\",\"outstanding_bytes\":%llu,"
            "\"alloc_bytes\":%llu,\"alloc_count\":%d},\"unknown_frees\":%d}\n",
            (unsigned long long)leak_bytes, LEAK_MALLOCS + 5, (unsigned long long)leak_malloc_bytes,
            LEAK_CALLOC_N * LEAK_CALLOC_SIZE, LEAK_PM_SIZE, LEAK_AA_SIZE, LEAK_MA_SIZE,
            LEAK_VA_SIZE,
            (unsigned long long)churn_bytes * (1 + CHURN_THREADS),
            CHURN_ROUNDS * (1 + CHURN_THREADS), (unsigned long long) final,
            (unsigned long long)realloc_bytes, REALLOC_STEPS + 1, attach ? BEFORE_N : 0);
    return fclose(f) == 0 ? 0 : 1;
}
