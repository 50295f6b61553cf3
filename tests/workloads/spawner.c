/* spawner.c - many short-lived processes, with pids reused, for the soak
 * (bench/soak.py, tests/e2e/test_soak_root.py).
 *
 *   spawner [--rate N] [--seconds S] [--reuse PCT] [--threads K]
 *
 * About --rate (default 20) processes a second for --seconds (default:
 * until SIGTERM or SIGINT), at most 32 alive at once:
 *   - most are fork + exec of this program as a child (`spawner --child
 *     K`): it maps and touches 64 KiB to 1 MiB, mallocs, starts K threads
 *     (default 2) that malloc and exit, joins them, and exits;
 *   - one in four only forks: the child maps a little and _exits;
 *   - --reuse PCT (default 50) of them take the pid of a child that exited
 *     a moment ago: the pid before it is written to
 *     /proc/sys/kernel/ns_last_pid (root; under flock, as the kernel asks)
 *     just before fork. The kernel gives the next free pid, so a pid
 *     another process took meanwhile gives another one: only hits count.
 * The spawner itself also starts and joins a short-lived thread every
 * tenth process. At the end it reaps every child and prints one JSON line:
 * {"spawned": N, "exec": N, "reused": N (pids this spawner saw before),
 *  "forced": N (ns_last_pid hits), "threads": N, "failed": N}. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define MAX_ALIVE 32
#define RECENT 64

static volatile sig_atomic_t stop;

static void on_stop(int sig)
{
    (void)sig;
    stop = 1;
}

static double now_s(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + t.tv_nsec / 1e9;
}

static void pause_s(double s)
{
    struct timespec t = {(time_t)s, (long)((s - (time_t)s) * 1e9)};
    nanosleep(&t, NULL); /* a signal ends it early: the loop checks stop */
}

static void *thread_body(void *arg)
{
    size_t n = (size_t)(uintptr_t)arg;
    char *p = malloc(n);
    if (p) memset(p, 2, n);
    free(p);
    return NULL;
}

static void touch_some(size_t len)
{
    char *p = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p != MAP_FAILED) memset(p, 3, len);
}

static int child_main(int nthreads)
{
    pthread_t th[16];
    int n = nthreads > 16 ? 16 : nthreads;
    touch_some((size_t)(16 + getpid() % 240) * 4096);
    char *m = malloc(100000);
    if (m) memset(m, 4, 100000);
    for (int i = 0; i < n; i++)
        if (pthread_create(&th[i], NULL, thread_body, (void *)(uintptr_t)(1000 * (i + 1))) != 0)
            n = i;
    for (int i = 0; i < n; i++)
        pthread_join(th[i], NULL);
    return 0;
}

/* One bit per pid seen (pid_max is at most 2^22). */
static uint8_t seen[(1u << 22) / 8];

int main(int argc, char **argv)
{
    double rate = 20, seconds = 0;
    int reuse = 50, nthreads = 2;
    if (argc == 3 && !strcmp(argv[1], "--child")) return child_main(atoi(argv[2]));
    for (int i = 1; i < argc; i++) {
        char *end = NULL;
        const char *a = argv[i], *v = i + 1 < argc ? argv[++i] : "";
        double x = strtod(v, &end);
        if (!*v || *end || x < 0) {
            fprintf(stderr, "usage: spawner [--rate N] [--seconds S] [--reuse PCT] [--threads K]\n");
            return 2;
        }
        if (!strcmp(a, "--rate") && x > 0)
            rate = x;
        else if (!strcmp(a, "--seconds"))
            seconds = x;
        else if (!strcmp(a, "--reuse") && x <= 100)
            reuse = (int)x;
        else if (!strcmp(a, "--threads") && x <= 16)
            nthreads = (int)x;
        else {
            fprintf(stderr, "spawner: bad option %s %s\n", a, v);
            return 2;
        }
    }
    char self[4096], targ[8];
    ssize_t sl = readlink("/proc/self/exe", self, sizeof self - 1);
    if (sl <= 0) {
        perror("spawner: /proc/self/exe");
        return 1;
    }
    self[sl] = 0;
    snprintf(targ, sizeof targ, "%d", nthreads);
    struct sigaction sa = {.sa_handler = on_stop};
    sigaction(SIGTERM, &sa, NULL);
    sigaction(SIGINT, &sa, NULL);
    int lastpid = open("/proc/sys/kernel/ns_last_pid", O_RDWR);
    if (reuse && lastpid < 0)
        fprintf(stderr, "spawner: /proc/sys/kernel/ns_last_pid: %s; pids are reused only as "
                        "they wrap\n", strerror(errno));

    uint64_t spawned = 0, execd = 0, reused = 0, forced = 0, threads = 0, failed = 0;
    pid_t recent[RECENT];
    unsigned nrecent = 0, alive = 0, rs = 12345;
    double t0 = now_s();
    while (!stop && (!seconds || now_s() - t0 < seconds)) {
        pid_t w;
        int st;
        while ((w = waitpid(-1, &st, alive >= MAX_ALIVE ? 0 : WNOHANG)) > 0) {
            alive--;
            recent[nrecent++ % RECENT] = w;
            if (!WIFEXITED(st) || WEXITSTATUS(st)) failed++;
        }
        rs = rs * 1103515245u + 12345u;
        pid_t want = 0;
        bool locked = false;
        if (lastpid >= 0 && nrecent && (int)(rs >> 16) % 100 < reuse) {
            want = recent[(nrecent - 1) % RECENT];
            char buf[16];
            int n = snprintf(buf, sizeof buf, "%d", (int)want - 1);
            locked = flock(lastpid, LOCK_EX) == 0;
            if (pwrite(lastpid, buf, (size_t)n, 0) != n) want = 0;
        }
        bool exec_it = (rs >> 8) % 4 != 0;
        pid_t pid = fork();
        if (pid == 0) {
            if (exec_it) {
                execl(self, self, "--child", targ, (char *)NULL);
                _exit(127);
            }
            touch_some(8 * 4096);
            _exit(0);
        }
        if (locked) flock(lastpid, LOCK_UN);
        if (pid < 0) {
            failed++;
            pause_s(0.1);
            continue;
        }
        alive++;
        spawned++;
        execd += exec_it;
        if (want && pid == want) forced++;
        if (seen[pid / 8] & (1u << (pid % 8))) reused++;
        seen[pid / 8] |= (uint8_t)(1u << (pid % 8));
        if (spawned % 10 == 0) {
            pthread_t th;
            if (pthread_create(&th, NULL, thread_body, (void *)(uintptr_t)50000) == 0) {
                pthread_join(th, NULL);
                threads++;
            }
        }
        pause_s(1.0 / rate);
    }
    while (alive && waitpid(-1, NULL, 0) > 0)
        alive--;
    printf("{\"spawned\": %llu, \"exec\": %llu, \"reused\": %llu, \"forced\": %llu, "
           "\"threads\": %llu, \"failed\": %llu}\n",
           (unsigned long long)spawned, (unsigned long long)execd, (unsigned long long)reused,
           (unsigned long long)forced, (unsigned long long)threads, (unsigned long long)failed);
    return 0;
}
