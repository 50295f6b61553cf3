/* memorytestapp_win.c - the Windows MemoryTestApp: the workload of the WPT
 * exercise "Track user-mode process allocations" (../shared/seeds, seed
 * 002), for commitwatch on Windows (shipped in the MSI's tools folder;
 * docs/WINDOWS.md says how to check its figures).
 *
 * Over a run of --seconds S (default 30):
 *   - settles at about 10 MB of committed memory (SettleMemory, a direct
 *     VirtualAlloc(MEM_RESERVE | MEM_COMMIT));
 *   - at S/2, `main` commits 10 MB more with VirtualAlloc and keeps it
 *     (steady-state growth: Impacting Size 10 MB across the step);
 *   - ten 10 MB buffers, evenly spread, each committed for about 100 ms
 *     through main -> Operation1 -> ManipulateTemporaryBuffer -> VirtualAlloc
 *     (transient: AIFI);
 *   - InnerLoopOperation allocates 40-byte objects from the process heap
 *     (HeapAlloc: what C++ new does under the MSVC runtime) and never frees
 *     them, --objects N per 25 ms tick (default 10): Windows Heap growth.
 * --delay MS waits before the first allocation (default 1000, so a tracer
 * has seen the process start). --hold keeps the process alive after the
 * run until standard input closes, so its memory can be compared with a
 * rundown. The last line printed is "committed_private=BYTES": the sum of
 * its MEM_COMMIT + MEM_PRIVATE regions (a VirtualQuery walk).
 *
 * Built with MinGW, optimised; the functions are noinline so each has a
 * frame of its own in the stacks ETW records. */
#define WIN32_LEAN_AND_MEAN
#include <windows.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MB (1024u * 1024u)
#define NOINLINE __attribute__((noinline))
#define KEEP_FRAME() __asm__ volatile("" ::: "memory")

void *SettleMemory(void);
void ManipulateTemporaryBuffer(void);
void Operation1(void);
void InnerLoopOperation(int objects);

static void *volatile sink; /* leaked objects: reachable by nobody */

static void *commit_touch(size_t size)
{
    char *p = VirtualAlloc(NULL, size, MEM_RESERVE | MEM_COMMIT, PAGE_READWRITE);
    if (!p) {
        fprintf(stderr, "memorytestapp: VirtualAlloc failed (error %lu)\n", GetLastError());
        exit(1);
    }
    for (size_t i = 0; i < size; i += 4096) p[i] = 1;
    return p;
}

NOINLINE void *SettleMemory(void)
{
    void *p = commit_touch(10 * MB);
    KEEP_FRAME();
    return p;
}

NOINLINE void ManipulateTemporaryBuffer(void)
{
    void *p = commit_touch(10 * MB);
    Sleep(100);
    VirtualFree(p, 0, MEM_RELEASE);
    KEEP_FRAME();
}

NOINLINE void Operation1(void)
{
    ManipulateTemporaryBuffer();
    KEEP_FRAME();
}

NOINLINE void InnerLoopOperation(int objects)
{
    HANDLE heap = GetProcessHeap();
    for (int i = 0; i < objects; i++) {
        char *o = HeapAlloc(heap, 0, 40);
        if (!o) exit(1);
        memset(o, i, 40);
        sink = o; /* leaked on purpose */
    }
    KEEP_FRAME();
}

/* Bytes in this process's committed private regions. */
static unsigned long long committed_private(void)
{
    MEMORY_BASIC_INFORMATION mbi;
    unsigned long long sum = 0;
    const char *p = NULL;
    while (VirtualQuery(p, &mbi, sizeof mbi) == sizeof mbi) {
        if (mbi.State == MEM_COMMIT && mbi.Type == MEM_PRIVATE) sum += mbi.RegionSize;
        const char *next = (const char *)mbi.BaseAddress + mbi.RegionSize;
        if (next <= p) break;
        p = next;
    }
    return sum;
}

static double now_ms(void)
{
    static LARGE_INTEGER f;
    LARGE_INTEGER c;
    if (!f.QuadPart) QueryPerformanceFrequency(&f);
    QueryPerformanceCounter(&c);
    return (double)c.QuadPart * 1000.0 / (double)f.QuadPart;
}

NOINLINE int main(int argc, char **argv)
{
    double seconds = 30, delay = 1000;
    int objects = 10, hold = 0;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--seconds") == 0 && i + 1 < argc) seconds = atof(argv[++i]);
        else if (strcmp(argv[i], "--objects") == 0 && i + 1 < argc) objects = atoi(argv[++i]);
        else if (strcmp(argv[i], "--delay") == 0 && i + 1 < argc) delay = atof(argv[++i]);
        else if (strcmp(argv[i], "--hold") == 0) hold = 1;
        else {
            fprintf(stderr, "usage: memorytestapp [--seconds S] [--objects N] [--delay MS] [--hold]\n");
            return 2;
        }
    }
    Sleep((DWORD)delay);
    void *settled = SettleMemory();
    double t0 = now_ms(), total = seconds * 1000;
    double next_transient = total / 20; /* ten, centred in ten equal slices */
    int transients = 0;
    void *step = NULL;
    while (now_ms() - t0 < total) {
        double t = now_ms() - t0;
        if (!step && t >= total / 2) step = commit_touch(10 * MB); /* main's 10 MB, kept */
        if (transients < 10 && t >= next_transient) {
            Operation1();
            transients++;
            next_transient += total / 10;
        }
        InnerLoopOperation(objects);
        Sleep(25);
    }
    printf("memorytestapp: done (pid %lu, %d transients, step at %p, settled at %p)\n",
           GetCurrentProcessId(), transients, step, settled);
    printf("committed_private=%llu\n", committed_private());
    fflush(stdout);
    if (hold)
        while (getchar() != EOF) {
        }
    KEEP_FRAME();
    return 0;
}
