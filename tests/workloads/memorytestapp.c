/* memorytestapp.c - the Linux MemoryTestApp (the scenario of the WPT
 * exercise in ../shared/seeds, seed 002), for end-to-end tests and demos.
 *
 * Over a run of --seconds S (default 30):
 *   - settles at about 10 MB of committed memory (SettleMemory);
 *   - at S/2, `main` maps 10 MB and keeps it (steady-state growth);
 *   - ten 10 MB buffers, evenly spread, each committed for about 100 ms
 *     through main -> Operation1 -> ManipulateTemporaryBuffer (transient);
 *   - InnerLoopOperation leaks 40-byte malloc objects all along (C heap
 *     growth), --objects N per 25 ms tick (default 10).
 * --pause stops the process (SIGSTOP) after the run, before exiting, so a
 * test can compare what was tracked with /proc/PID/smaps; --fifo PATH
 * instead blocks reading PATH there. --delay MS waits before the first
 * allocation (default 1000, so a tracer has read the new image).
 *
 * Built -O2 without frame-pointer flags: stacks must come from CFI. The
 * functions are noinline and never tail-call, so each keeps its frame. */
#define _GNU_SOURCE
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#define MB (1024u * 1024u)
#define NOINLINE __attribute__((noinline))
/* Code after a call keeps the caller's frame on the stack (no tail call). */
#define KEEP_FRAME() __asm__ volatile("" ::: "memory")

/* Global, so their names are in the symbol table as in the seed. */
void *SettleMemory(void);
void ManipulateTemporaryBuffer(void);
void Operation1(void);
void InnerLoopOperation(int objects);

/* The leak is the point: under AddressSanitizer builds, do not report it. */
const char *__asan_default_options(void);
const char *__asan_default_options(void)
{
    return "detect_leaks=0";
}

static void *volatile sink; /* keeps leaked objects reachable for nobody */

static void sleep_ms(double ms)
{
    struct timespec t = {(time_t)(ms / 1000), (long)((ms - (time_t)(ms / 1000) * 1000) * 1e6)};
    while (nanosleep(&t, &t) != 0) {
    }
}

static double now_ms(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec * 1e3 + t.tv_nsec / 1e6;
}

static void *map_touch(size_t size)
{
    char *p = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) {
        perror("mmap");
        exit(1);
    }
    for (size_t i = 0; i < size; i += 4096) p[i] = 1;
    return p;
}

NOINLINE void *SettleMemory(void)
{
    void *p = map_touch(10 * MB);
    KEEP_FRAME();
    return p;
}

NOINLINE void ManipulateTemporaryBuffer(void)
{
    void *p = map_touch(10 * MB);
    sleep_ms(100);
    munmap(p, 10 * MB);
    KEEP_FRAME();
}

NOINLINE void Operation1(void)
{
    ManipulateTemporaryBuffer();
    KEEP_FRAME();
}

NOINLINE void InnerLoopOperation(int objects)
{
    for (int i = 0; i < objects; i++) {
        char *o = malloc(40);
        if (!o) exit(1);
        memset(o, i, 40);
        sink = o; /* leaked on purpose */
    }
    KEEP_FRAME();
}

NOINLINE int main(int argc, char **argv)
{
    double seconds = 30, delay = 1000;
    int objects = 10, pause = 0;
    const char *fifo = NULL;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--seconds") == 0 && i + 1 < argc) seconds = atof(argv[++i]);
        else if (strcmp(argv[i], "--objects") == 0 && i + 1 < argc) objects = atoi(argv[++i]);
        else if (strcmp(argv[i], "--delay") == 0 && i + 1 < argc) delay = atof(argv[++i]);
        else if (strcmp(argv[i], "--fifo") == 0 && i + 1 < argc) fifo = argv[++i];
        else if (strcmp(argv[i], "--pause") == 0) pause = 1;
        else {
            fprintf(stderr, "usage: memorytestapp [--seconds S] [--objects N] [--delay MS] "
                            "[--pause | --fifo PATH]\n");
            return 2;
        }
    }
    sleep_ms(delay);
    void *settled = SettleMemory();
    double t0 = now_ms(), total = seconds * 1000;
    double next_transient = total / 20; /* ten, centred in ten equal slices */
    int transients = 0;
    void *step = NULL;
    long long step_ns = 0;
    while (now_ms() - t0 < total) {
        double t = now_ms() - t0;
        if (!step && t >= total / 2) {
            struct timespec rt;
            clock_gettime(CLOCK_REALTIME, &rt);
            step_ns = (long long)rt.tv_sec * 1000000000LL + rt.tv_nsec;
            step = map_touch(10 * MB); /* main's 10 MB, kept */
        }
        if (transients < 10 && t >= next_transient) {
            Operation1();
            transients++;
            next_transient += total / 10;
        }
        InnerLoopOperation(objects);
        sleep_ms(25);
    }
    printf("memorytestapp: done (%d transients, step at %p, settled at %p)\nstep_ns=%lld\n",
           transients, step, settled, step_ns);
    fflush(stdout);
    if (pause) raise(SIGSTOP);
    if (fifo) {
        int fd = open(fifo, O_RDONLY);
        char c;
        if (fd >= 0 && read(fd, &c, 1) < 0) perror("read");
    }
    KEEP_FRAME();
    return 0;
}
