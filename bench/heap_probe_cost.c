/* heap_probe_cost.c - what a uprobe on malloc and free costs the traced
 * process, by what the probe records: the measurement behind the heap
 * drill-down's choice of mechanism (docs/BENCHMARKS.md, "Heap probes").
 *
 *   heap_probe_cost [--allocs N] [--runs R] [--stack BYTES] [--commitwatch PATH]
 *
 * A child process calls malloc(64) and free() N times; its time is taken
 * with the probes in each mode below, attached to the running child (no
 * restart: perf_event_open's uprobe PMU on the child's libc, by file
 * offset), runs interleaved so the machine's noise falls on every mode:
 *
 *   none         no probe
 *   count        entry probes on malloc and free, nothing recorded: the
 *                trap alone (what any uprobe-based tracer pays, eBPF too)
 *   ret          count, plus a return probe on malloc (its result, the
 *                address: a tracer needs it)
 *   sample       ret, and every hit records tid, time, registers and the
 *                top `--stack` bytes of the user stack into a ring that a
 *                thread drains (what unwinding with DWARF in user space,
 *                as the perf source does, needs)
 *
 *   heaptrack    for comparison, when heaptrack is installed: the same loop
 *                in a program started under `heaptrack` (LD_PRELOAD, no
 *                trap: its malloc and free are wrapped in the process),
 *                at least 2 M pairs a run (its start would dominate less)
 *   commitwatch  the same loop started under `commitwatch heap` (launch
 *                mode: its interposer, stacks unwound in the process, the
 *                shared-memory ring, commitwatch naming the frames and
 *                applying the events at the same time), as many pairs;
 *                with --commitwatch PATH (default: the build's, beside
 *                bench/)
 *
 * And the channel alone, in this process, one 64-byte record per event
 * (an event whose stack was sent before: its index)
 * written by this thread and read by another, as the interposer's are:
 *
 *   ring-ch      claimed, filled and published in the heap ring
 *                (service/sources/heap/heapring.h)
 *   pipe-ch      written to a pipe (one write(2) each)
 *
 * Prints each mode's median time per call pair and its ratio to `none`.
 * Needs root (or CAP_PERFMON; without it exits 77, skipped) and the
 * kernel's uprobe PMU. Fails when the sampling probes recorded nothing.
 * Linux only. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <gelf.h>
#include <libelf.h>
#include <linux/perf_event.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "sources/heap/heapring.h"

enum { M_NONE, M_COUNT, M_RET, M_SAMPLE, M_MODES };
static const char *mode_name[M_MODES] = {"none", "count", "ret", "sample"};

#define RING_PAGES 256 /* 1 MiB of 4 KiB pages, plus the header page */
#define MAX_PROBES 3

typedef struct {
    int fd[MAX_PROBES];
    void *ring[MAX_PROBES];
    size_t nfd;
    atomic_int stop;
    uint64_t records, bytes, lost;
} probes_t;

static int64_t now_ns(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (int64_t)t.tv_sec * 1000000000 + t.tv_nsec;
}

static void die(const char *what)
{
    fprintf(stderr, "heap_probe_cost: %s: %s\n", what, strerror(errno));
    exit(1);
}

/* The child: waits for a byte, runs the loop, writes its time back. */
static void child_loop(int in, int out, long n)
{
    char c;
    for (;;) {
        if (read(in, &c, 1) != 1 || c == 'q') _exit(0);
        int64_t t0 = now_ns();
        for (long i = 0; i < n; i++) {
            void *volatile p = malloc(64);
            free(p);
        }
        int64_t dt = now_ns() - t0;
        if (write(out, &dt, sizeof dt) != sizeof dt) _exit(1);
    }
}

/* `--child N`: the loop alone, timed, for a run under heaptrack. */
static int child_alone(long n)
{
    int64_t t0 = now_ns();
    for (long i = 0; i < n; i++) {
        void *volatile p = malloc(64);
        free(p);
    }
    printf("%lld\n", (long long)(now_ns() - t0));
    return 0;
}

/* The loop's time under heaptrack (-1: heaptrack is not installed). */
static int64_t under_heaptrack(long n)
{
    char self[4096], cmd[8400], dir[] = "/tmp/heap_probe_cost-XXXXXX";
    ssize_t k = readlink("/proc/self/exe", self, sizeof self - 1);
    if (k < 0 || system("command -v heaptrack >/dev/null 2>&1") != 0 || !mkdtemp(dir)) return -1;
    self[k] = 0;
    snprintf(cmd, sizeof cmd, "heaptrack -o %s/ht '%s' --child %ld 2>/dev/null; rm -rf %s", dir,
             self, n, dir);
    FILE *f = popen(cmd, "r");
    if (!f) return -1;
    char line[256];
    long long t = -1;
    while (fgets(line, sizeof line, f))
        if (line[0] >= '0' && line[0] <= '9') t = atoll(line);
    pclose(f);
    return t;
}

/* The loop's time under `commitwatch heap` (-1: it failed). The loop's
 * line comes first on stdout, the report's JSON after it. */
static long long cw_dropped; /* the last run's dropped events (its report's) */

static int64_t under_commitwatch(const char *cw, long n)
{
    char self[4096], cmd[8400];
    ssize_t k = readlink("/proc/self/exe", self, sizeof self - 1);
    if (k < 0) return -1;
    self[k] = 0;
    snprintf(cmd, sizeof cmd, "'%s' heap --json -- '%s' --child %ld 2>/dev/null", cw, self, n);
    FILE *f = popen(cmd, "r");
    if (!f) return -1;
    static char line[1 << 20]; /* the report's JSON is one long line */
    long long t = -1;
    while (fgets(line, sizeof line, f)) {
        const char *d = strstr(line, "\"dropped_events\":");
        if (line[0] >= '0' && line[0] <= '9') t = atoll(line);
        if (d) cw_dropped = atoll(d + 17);
    }
    return pclose(f) == 0 ? t : -1;
}

/* ---- the channel alone ---- */

typedef struct chan {
    cw_heapring_t ring;
    int fd; /* pipe-ch: the read end; -1: ring-ch */
    long n;
    atomic_int done;
    uint64_t got;
} chan_t;

static void *chan_read(void *arg)
{
    chan_t *c = arg;
    static char buf[64 * 512];
    cw_heapring_rec_t rec;
    if (c->fd >= 0) {
        ssize_t k;
        while ((k = read(c->fd, buf, sizeof buf)) > 0)
            c->got += (uint64_t)k / 64;
        return NULL;
    }
    while (!atomic_load(&c->done) || cw_heapring_pending(&c->ring)) {
        if (cw_heapring_next(&c->ring, &rec)) c->got++;
    }
    return NULL;
}

/* ns per event of writing n records to the ring (pipe: to a pipe). */
static double channel_cost(long n, bool pipe_ch)
{
    chan_t c = {.fd = -1, .n = n};
    void *mem = NULL;
    int fds[2] = {-1, -1};
    const uint64_t slots = 262144;
    if (pipe_ch) {
        if (pipe(fds)) die("pipe");
        c.fd = fds[0];
    } else {
        mem = mmap(NULL, cw_heapring_bytes(slots), PROT_READ | PROT_WRITE,
                   MAP_SHARED | MAP_ANONYMOUS, -1, 0);
        if (mem == MAP_FAILED || cw_heapring_init(&c.ring, mem, slots)) die("the ring");
    }
    pthread_t th;
    if (pthread_create(&th, NULL, chan_read, &c)) die("pthread_create");
    static cw_heapring_slot_t rec;
    uint64_t seen_tail = 0; /* the writer's copy of the tail, as the interposer keeps it */
    int64_t t0 = now_ns();
    for (long i = 0; i < n; i++) {
        rec.addr = (uint64_t)i;
        rec.stack = 8; /* a stack sent before: its index */
        if (pipe_ch) {
            if (write(fds[1], &rec, sizeof rec) != (ssize_t)sizeof rec) die("write");
            continue;
        }
        uint64_t pos;
        cw_heapring_slot_t *r = cw_heapring_claim(c.ring.h, &seen_tail, 0, &pos);
        if (!r) continue; /* dropped: counted by the ring */
        memcpy((char *)r + 8, (char *)&rec + 8, sizeof rec - 8);
        cw_heapring_publish(r, pos);
    }
    int64_t dt = now_ns() - t0;
    atomic_store(&c.done, 1);
    if (pipe_ch) close(fds[1]);
    pthread_join(th, NULL);
    if (pipe_ch) close(fds[0]);
    uint64_t dropped = pipe_ch ? 0 : cw_heapring_dropped(&c.ring);
    if (c.got + dropped != (uint64_t)n) {
        fprintf(stderr, "heap_probe_cost: the channel lost events uncounted\n");
        exit(1);
    }
    if (mem) munmap(mem, cw_heapring_bytes(slots));
    return (double)dt / (double)n;
}

/* The path of the libc the process maps. */
static int libc_path(pid_t pid, char *path, size_t n)
{
    char f[64], line[4096];
    snprintf(f, sizeof f, "/proc/%d/maps", (int)pid);
    FILE *m = fopen(f, "r");
    if (!m) return -1;
    int rc = -1;
    while (rc && fgets(line, sizeof line, m)) {
        char *p = strchr(line, '/');
        if (p && strstr(p, "/libc.so")) {
            p[strcspn(p, "\n")] = 0;
            snprintf(path, n, "%s", p);
            rc = 0;
        }
    }
    fclose(m);
    return rc;
}

/* The file offset of a dynamic symbol (what the uprobe PMU takes). */
static uint64_t sym_offset(const char *path, const char *name)
{
    int fd = open(path, O_RDONLY);
    if (fd < 0) die(path);
    elf_version(EV_CURRENT);
    Elf *e = elf_begin(fd, ELF_C_READ, NULL);
    uint64_t value = 0, off = 0;
    Elf_Scn *scn = NULL;
    while (!value && (scn = elf_nextscn(e, scn))) {
        GElf_Shdr sh;
        if (!gelf_getshdr(scn, &sh) || sh.sh_type != SHT_DYNSYM) continue;
        Elf_Data *d = elf_getdata(scn, NULL);
        for (size_t i = 0; d && i < sh.sh_size / sh.sh_entsize; i++) {
            GElf_Sym s;
            if (gelf_getsym(d, (int)i, &s) && s.st_value &&
                strcmp(elf_strptr(e, sh.sh_link, s.st_name), name) == 0) {
                value = s.st_value;
                break;
            }
        }
    }
    size_t nph = 0;
    elf_getphdrnum(e, &nph);
    for (size_t i = 0; value && i < nph; i++) {
        GElf_Phdr ph;
        if (gelf_getphdr(e, (int)i, &ph) && ph.p_type == PT_LOAD && value >= ph.p_vaddr &&
            value < ph.p_vaddr + ph.p_filesz)
            off = value - ph.p_vaddr + ph.p_offset;
    }
    elf_end(e);
    close(fd);
    if (!off) {
        fprintf(stderr, "heap_probe_cost: %s has no %s\n", path, name);
        exit(1);
    }
    return off;
}

static int probe_open(pid_t pid, const char *path, uint64_t off, bool ret, bool sample,
                      unsigned stack)
{
    static int type = -1;
    if (type < 0) {
        FILE *f = fopen("/sys/bus/event_source/devices/uprobe/type", "r");
        if (!f || fscanf(f, "%d", &type) != 1) die("the uprobe PMU (/sys/bus/event_source)");
        fclose(f);
    }
    struct perf_event_attr a = {0};
    a.size = sizeof a;
    a.type = (uint32_t)type;
    a.config = ret ? 1 : 0; /* format/retprobe: config:0 */
    a.config1 = (uint64_t)(uintptr_t)path;
    a.config2 = off;
    if (sample) {
        a.sample_period = 1;
        a.wakeup_events = 1;
    }
    a.disabled = 1;
    if (sample) {
        a.sample_type = PERF_SAMPLE_TID | PERF_SAMPLE_TIME | PERF_SAMPLE_REGS_USER |
                        PERF_SAMPLE_STACK_USER;
        a.sample_regs_user = 0xff0fff; /* x86-64: the registers DWARF unwinding uses */
        a.sample_stack_user = stack;
    }
    int fd = (int)syscall(SYS_perf_event_open, &a, pid, -1, -1, PERF_FLAG_FD_CLOEXEC);
    if (fd < 0 && (errno == EACCES || errno == EPERM)) {
        fprintf(stderr, "SKIP: perf_event_open (uprobe): %s: needs root or CAP_PERFMON\n",
                strerror(errno));
        exit(77);
    }
    if (fd < 0) die("perf_event_open (uprobe)");
    return fd;
}

static void *drain(void *arg)
{
    probes_t *p = arg;
    const size_t page = (size_t)sysconf(_SC_PAGESIZE), size = RING_PAGES * page;
    while (!atomic_load(&p->stop)) {
        bool any = false;
        for (size_t i = 0; i < p->nfd; i++) {
            struct perf_event_mmap_page *mp = p->ring[i];
            if (!mp) continue;
            uint64_t head = __atomic_load_n(&mp->data_head, __ATOMIC_ACQUIRE);
            uint64_t tail = mp->data_tail;
            const uint8_t *data = (const uint8_t *)mp + page;
            while (tail < head) {
                struct perf_event_header h;
                size_t at = tail % size;
                if (at + sizeof h <= size) memcpy(&h, data + at, sizeof h);
                else {
                    memcpy(&h, data + at, size - at);
                    memcpy((uint8_t *)&h + (size - at), data, sizeof h - (size - at));
                }
                if (h.type == PERF_RECORD_LOST) {
                    uint64_t n;
                    size_t o = (at + 16) % size;
                    memcpy(&n, data + o, sizeof n);
                    p->lost += n;
                } else {
                    p->records++;
                    p->bytes += h.size;
                }
                tail += h.size;
                any = true;
            }
            __atomic_store_n(&mp->data_tail, tail, __ATOMIC_RELEASE);
        }
        if (!any) usleep(200);
    }
    return NULL;
}

static int cmp_i64(const void *a, const void *b)
{
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return (x > y) - (x < y);
}

static int cmp_dbl(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

int main(int argc, char **argv)
{
    long n = 2000000;
    int runs = 5;
    unsigned stack = 8192;
    const char *cw = NULL;
    char cw_default[4096];
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--allocs") && i + 1 < argc) n = atol(argv[++i]);
        else if (!strcmp(argv[i], "--runs") && i + 1 < argc) runs = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--stack") && i + 1 < argc) stack = (unsigned)atoi(argv[++i]);
        else if (!strcmp(argv[i], "--child") && i + 1 < argc) return child_alone(atol(argv[++i]));
        else if (!strcmp(argv[i], "--commitwatch") && i + 1 < argc) cw = argv[++i];
        else {
            fprintf(stderr, "usage: heap_probe_cost [--allocs N] [--runs R] [--stack BYTES] "
                            "[--commitwatch PATH]\n");
            return 2;
        }
    }
    if (n <= 0 || runs <= 0 || runs > 99 || stack % 8 || stack > 65528) {
        fprintf(stderr, "heap_probe_cost: bad --allocs, --runs or --stack (a multiple of 8)\n");
        return 2;
    }
    if (!cw) { /* the build's: build/bench/heap_probe_cost -> build/commitwatch */
        ssize_t k = readlink("/proc/self/exe", cw_default, sizeof cw_default - 16);
        if (k > 0) {
            cw_default[k] = 0;
            char *slash = strrchr(cw_default, '/');
            if (slash) strcpy(slash, "/../commitwatch");
        }
        cw = cw_default;
    }
    int to[2], from[2];
    if (pipe(to) || pipe(from)) die("pipe");
    pid_t pid = fork();
    if (pid < 0) die("fork");
    if (pid == 0) {
        close(to[1]);
        close(from[0]);
        child_loop(to[0], from[1], n);
    }
    close(to[0]);
    close(from[1]);
    char path[4096];
    if (libc_path(pid, path, sizeof path)) {
        fprintf(stderr, "heap_probe_cost: the child maps no libc\n");
        return 1;
    }
    uint64_t off_malloc = sym_offset(path, "malloc"), off_free = sym_offset(path, "free");
    const size_t page = (size_t)sysconf(_SC_PAGESIZE);
    int64_t t[M_MODES][100], ht[100], cwt[100];
    double ch[2][100];
    bool have_ht = true, have_cw = access(cw, X_OK) == 0;
    /* heaptrack's start (its interpreter process, the first calls) would
     * dominate a short loop: it runs at least 2 M pairs. */
    long ht_n = n < 2000000 ? 2000000 : n;
    probes_t last[M_MODES];
    memset(last, 0, sizeof last);
    for (int r = 0; r < runs; r++) {
        for (int m = 0; m < M_MODES; m++) {
            probes_t p;
            memset(&p, 0, sizeof p);
            pthread_t th;
            bool sample = m == M_SAMPLE;
            if (m >= M_COUNT) {
                p.fd[p.nfd++] = probe_open(pid, path, off_malloc, false, sample, stack);
                p.fd[p.nfd++] = probe_open(pid, path, off_free, false, sample, stack);
            }
            if (m >= M_RET) p.fd[p.nfd++] = probe_open(pid, path, off_malloc, true, sample, stack);
            for (size_t i = 0; sample && i < p.nfd; i++) {
                p.ring[i] = mmap(NULL, (RING_PAGES + 1) * page, PROT_READ | PROT_WRITE,
                                 MAP_SHARED, p.fd[i], 0);
                if (p.ring[i] == MAP_FAILED) die("mmap of the ring");
            }
            if (sample && pthread_create(&th, NULL, drain, &p)) die("pthread_create");
            for (size_t i = 0; i < p.nfd; i++) ioctl(p.fd[i], PERF_EVENT_IOC_ENABLE, 0);
            if (write(to[1], "g", 1) != 1 || read(from[0], &t[m][r], sizeof t[m][r]) != sizeof t[m][r])
                die("the child");
            for (size_t i = 0; i < p.nfd; i++) ioctl(p.fd[i], PERF_EVENT_IOC_DISABLE, 0);
            if (sample) {
                atomic_store(&p.stop, 1);
                pthread_join(th, NULL);
            }
            for (size_t i = 0; i < p.nfd; i++) {
                if (p.ring[i]) munmap(p.ring[i], (RING_PAGES + 1) * page);
                close(p.fd[i]);
            }
            last[m] = p;
        }
        if (have_ht) have_ht = (ht[r] = under_heaptrack(ht_n)) > 0;
        if (have_cw) have_cw = (cwt[r] = under_commitwatch(cw, ht_n)) > 0;
        ch[0][r] = channel_cost(ht_n, false);
        ch[1][r] = channel_cost(ht_n, true);
    }
    if (write(to[1], "q", 1) != 1) die("the child");
    waitpid(pid, NULL, 0);
    int64_t med[M_MODES];
    for (int m = 0; m < M_MODES; m++) {
        qsort(t[m], (size_t)runs, sizeof t[m][0], cmp_i64);
        med[m] = t[m][runs / 2];
    }
    printf("heap_probe_cost: %ld malloc+free pairs per run, %d runs, median, libc %s\n", n, runs,
           path);
    printf("%-8s %12s %8s %12s %12s %10s\n", "mode", "ns/pair", "ratio", "records", "bytes/rec",
           "lost");
    for (int m = 0; m < M_MODES; m++) {
        const probes_t *p = &last[m];
        printf("%-8s %12.1f %7.2fx %12llu %12.0f %10llu\n", mode_name[m], (double)med[m] / (double)n,
               (double)med[m] / (double)med[M_NONE], (unsigned long long)p->records,
               p->records ? (double)p->bytes / (double)p->records : 0.0,
               (unsigned long long)p->lost);
    }
    if (last[M_SAMPLE].records == 0) {
        fprintf(stderr, "heap_probe_cost: the probes recorded nothing (is malloc this libc's?)\n");
        return 1;
    }
    if (have_ht) {
        qsort(ht, (size_t)runs, sizeof ht[0], cmp_i64);
        double per = (double)ht[runs / 2] / (double)ht_n;
        printf("%-8s %12.1f %7.2fx (%ld pairs a run)\n", "heaptrack", per,
               per / ((double)med[M_NONE] / (double)n), ht_n);
    } else {
        printf("heaptrack: not installed (apt-get install heaptrack), not compared\n");
    }
    if (have_cw) {
        qsort(cwt, (size_t)runs, sizeof cwt[0], cmp_i64);
        double per = (double)cwt[runs / 2] / (double)ht_n;
        printf("%-8s %12.1f %7.2fx (%ld pairs a run, %lld events dropped in the last; %s)\n",
               "commitwatch", per, per / ((double)med[M_NONE] / (double)n), ht_n, cw_dropped, cw);
    } else {
        printf("commitwatch: %s did not run the loop (--commitwatch PATH)\n", cw);
    }
    for (int k = 0; k < 2; k++) {
        qsort(ch[k], (size_t)runs, sizeof ch[k][0], cmp_dbl);
        printf("%-8s %12.1f ns/event (the channel alone, 64-byte records)\n",
               k ? "pipe-ch" : "ring-ch", ch[k][runs / 2]);
    }
    return 0;
}
