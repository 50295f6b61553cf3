/* test_platform.c - the platform layer (platform.h) on this OS: clocks
 * move as they should, sleep sleeps, a condition variable wakes a waiting
 * thread and times out, paths resolve, file kinds and sizes are right,
 * data folders are listed, a stop request reaches the hook, a file
 * others can write is refused (cw_plat_file_private), and glibc's
 * per-thread caches are turned off by an exec of the same process
 * (cw_plat_heap_thread_caches_off, in children of this program). */
#include <malloc.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#if !defined(_WIN32)
#include <sys/wait.h>
#endif
#include <unistd.h>

#include "commitwatch/log.h"
#include "commitwatch/platform.h"
#include "test.h"
#include "test_port.h"
#include "test_tcp_list.h"

#define MS 1000000LL

static void test_clocks(void)
{
    int64_t w0 = cw_plat_wall_ns(), m0 = cw_plat_mono_ns();
    /* 2026-ish: after 2020-01-01 and before 2100-01-01. */
    ASSERT_TRUE(w0 > 1577836800LL * 1000000000LL && w0 < 4102444800LL * 1000000000LL);
    cw_plat_sleep_ns(50 * MS);
    int64_t m1 = cw_plat_mono_ns(), w1 = cw_plat_wall_ns();
    ASSERT_TRUE(m1 - m0 >= 45 * MS); /* sleep sleeps (timer slack aside) */
    ASSERT_TRUE(m1 - m0 < 5000 * MS);
    ASSERT_TRUE(w1 - w0 > 0);
    int64_t prev = cw_plat_mono_ns();
    for (int i = 0; i < 10000; i++) {
        int64_t t = cw_plat_mono_ns();
        if (t < prev)
            CW_FAIL("monotonic clock went back: %lld < %lld", (long long)t, (long long)prev);
        prev = t;
    }
    cw_plat_sleep_ns(0);
    cw_plat_sleep_ns(-5);
    ASSERT_STR_EQ(cw_plat_name(), "linux");
}

typedef struct shared {
    cw_mutex_t *m;
    cw_cond_t *c;
    int arrived;   /* guarded by m: workers that finished counting */
    bool released; /* guarded by m: the workers may return */
    atomic_int counter;
} shared_t;

static void worker(void *arg)
{
    shared_t *s = arg;
    for (int i = 0; i < 100000; i++)
        atomic_fetch_add(&s->counter, 1);
    cw_mutex_lock(s->m);
    s->arrived++;
    cw_cond_broadcast(s->c);
    while (!s->released)
        cw_cond_wait(s->c, s->m);
    cw_mutex_unlock(s->m);
}

/* Starts n workers, waits until all have counted, releases and joins them. */
static void run_workers(shared_t *s, int n)
{
    cw_thread_t *t[4];
    s->arrived = 0;
    s->released = false;
    for (int i = 0; i < n; i++)
        ASSERT_OK(cw_thread_start(&t[i], worker, s));
    cw_mutex_lock(s->m);
    while (s->arrived != n)
        cw_cond_wait(s->c, s->m);
    s->released = true;
    cw_cond_broadcast(s->c);
    cw_mutex_unlock(s->m);
    for (int i = 0; i < n; i++)
        cw_thread_join(t[i]);
}

static void test_threads(void)
{
    shared_t s = {0};
    ASSERT_OK(cw_mutex_create(&s.m));
    ASSERT_OK(cw_cond_create(&s.c));
    atomic_init(&s.counter, 0);

    /* A timed wait with nobody to wake it times out, after about the time asked. */
    cw_mutex_lock(s.m);
    int64_t t0 = cw_plat_mono_ns();
    bool woke = cw_cond_timedwait(s.c, s.m, 80 * MS);
    int64_t waited = cw_plat_mono_ns() - t0;
    cw_mutex_unlock(s.m);
    ASSERT_TRUE(!woke || waited < 80 * MS); /* woken only spuriously */
    if (!woke) ASSERT_TRUE(waited >= 70 * MS);

    run_workers(&s, 1);
    ASSERT_EQ(atomic_load(&s.counter), 100000);
    /* Several at once, counting into one atomic; all joined. */
    run_workers(&s, 4);
    ASSERT_EQ(atomic_load(&s.counter), 500000);
    cw_thread_join(NULL);
    cw_cond_destroy(s.c);
    cw_mutex_destroy(s.m);
    cw_cond_destroy(NULL);
    cw_mutex_destroy(NULL);
}

static void test_paths(void)
{
    const char *build = getenv("CW_BUILD");
    char dir[4096], file[4200], dotted[4300];
    snprintf(dir, sizeof dir, "%s/test-platform", build ? build : ".");
    snprintf(file, sizeof file, "%s/f.bin", dir);
    remove(file);
    char mk[4200];
    snprintf(mk, sizeof mk, "mkdir -p '%s'", dir);
    ASSERT_EQ(system(mk), 0);
    FILE *f = fopen(file, "wb");
    ASSERT_TRUE(f != NULL);
    for (int i = 0; i < 12345; i++)
        fputc(i & 0xff, f);
    fclose(f);

    uint64_t size = 0;
    ASSERT_OK(cw_plat_file_size(file, &size));
    ASSERT_U64_EQ(size, 12345);
    ASSERT_EQ(cw_plat_file_size(dir, &size), CW_ENOENT); /* a folder is not a file */
    ASSERT_TRUE(cw_plat_is_file(file) && !cw_plat_is_dir(file));
    ASSERT_TRUE(cw_plat_is_dir(dir) && !cw_plat_is_file(dir));
    ASSERT_TRUE(!cw_plat_is_file("/nonexistent/x") && !cw_plat_is_dir("/nonexistent/x"));

    /* realpath resolves "." and ".." to the same absolute file. */
    snprintf(dotted, sizeof dotted, "%s/./../test-platform/f.bin", dir);
    char *a = cw_plat_realpath(file), *b = cw_plat_realpath(dotted);
    ASSERT_TRUE(a && b);
    ASSERT_STR_EQ(a, b);
    ASSERT_TRUE(cw_plat_is_sep(a[0]));
    ASSERT_TRUE(strstr(a, "/./") == NULL && strstr(a, "/../") == NULL);
    free(a);
    free(b);
    ASSERT_TRUE(cw_plat_realpath("/nonexistent/x") == NULL);
    ASSERT_TRUE(cw_plat_is_sep('/') && !cw_plat_is_sep('a'));
    remove(file);

    /* Data folders: the build tree's first (it holds the files), then the installed one. */
    const char *dirs[4];
    ASSERT_EQ(cw_plat_data_dirs("web", dirs, 4), 2);
    char idx[4200];
    snprintf(idx, sizeof idx, "%s/index.html", dirs[0]);
    ASSERT_TRUE(cw_plat_is_file(idx));
    ASSERT_TRUE(strstr(dirs[1], "share/commitwatch/web") != NULL);
    ASSERT_EQ(cw_plat_data_dirs("stacktags", dirs, 4), 2);
    snprintf(idx, sizeof idx, "%s/linux.stacktags", dirs[0]);
    ASSERT_TRUE(cw_plat_is_file(idx));
    ASSERT_EQ(cw_plat_data_dirs("stacktags", dirs, 1), 1); /* max is respected */
    ASSERT_EQ(cw_plat_data_dirs("nothing", dirs, 4), 0);
    ASSERT_STR_EQ(cw_plat_state_dir(), "/var/lib/commitwatch");
    ASSERT_STR_EQ(cw_plat_config_path(), "/etc/commitwatch/commitwatch.conf");
}

static atomic_int stops, reloads;
static void on_stop(void)
{
    atomic_fetch_add(&stops, 1);
}
static void on_reload(void)
{
    atomic_fetch_add(&reloads, 1);
}

static void test_stop_hooks(void)
{
    cw_plat_catch_stop(on_stop, on_reload);
    raise(SIGINT);
    raise(SIGTERM);
    raise(SIGHUP);
    ASSERT_EQ(atomic_load(&stops), 2);
    ASSERT_EQ(atomic_load(&reloads), 1);
    /* Without a reload hook SIGHUP keeps its default; stops still arrive. */
    cw_plat_catch_stop(on_stop, NULL);
    raise(SIGTERM);
    ASSERT_EQ(atomic_load(&stops), 3);
    cw_plat_catch_stop(NULL, NULL);
}

static void test_log_sinks(void)
{
    cw_diag_t d = {{0}};
    ASSERT_EQ(cw_plat_log_open("carrier-pigeon", &d), CW_EINVAL);
    ASSERT_TRUE(strstr(d.msg, "carrier-pigeon") && strstr(d.msg, "syslog"));
    ASSERT_OK(cw_plat_log_open("stderr", &d));
    ASSERT_OK(cw_plat_log_open("syslog", &d));
    CW_LOGD("test_platform: a debug line (filtered out)");
    cw_plat_log_close();
    ASSERT_OK(cw_plat_log_open(NULL, &d));
    cw_plat_log_close();
}

/* cw_plat_tcp_list and cw_plat_tcp_refuse: test_tcp_list.h. */
static void test_tcp(void)
{
    check_tcp_list();
}

/* cw_plat_file_private on the file once chmod'ed to mode; d gets the
 * message. */
static int check_mode(const char *path, unsigned mode, cw_diag_t *d)
{
    ASSERT_TRUE(chmod(path, mode) == 0);
    return cw_test_file_private(path, d);
}

static void test_file_private(void)
{
    char path[1024];
    cw_diag_t d;
    ASSERT_OK(cw_test_conf_file(path, sizeof path));
    ASSERT_OK(check_mode(path, 0644, &d));
    ASSERT_OK(check_mode(path, 0600, &d));
    ASSERT_OK(check_mode(path, 0400, &d));
    ASSERT_EQ(check_mode(path, 0664, &d), CW_EPERM);
    ASSERT_TRUE(strstr(d.msg, path) && strstr(d.msg, "refusing the test file") &&
                strstr(d.msg, "writable by its group") && strstr(d.msg, "mode 0664") &&
                strstr(d.msg, "chmod go-w"));
    ASSERT_EQ(check_mode(path, 0646, &d), CW_EPERM);
    ASSERT_TRUE(strstr(d.msg, "writable by every user") && strstr(d.msg, "mode 0646"));
    ASSERT_EQ(check_mode(path, 0666, &d), CW_EPERM);
    ASSERT_TRUE(strstr(d.msg, "every user") && strstr(d.msg, "mode 0666"));
    if (geteuid() == 0) {
        /* Root, a file of another user: that user may rewrite it. */
        ASSERT_TRUE(chown(path, 65534, 65534) == 0);
        ASSERT_EQ(check_mode(path, 0644, &d), CW_EPERM);
        ASSERT_TRUE(strstr(d.msg, "belongs to uid 65534") && strstr(d.msg, "chown root"));
        ASSERT_TRUE(chown(path, 0, 0) == 0);
        ASSERT_OK(check_mode(path, 0644, &d));
    } else {
        /* Not root: a file of root's that only root may write is fine. */
        FILE *r = fopen("/etc/passwd", "r");
        ASSERT_TRUE(r != NULL);
        ASSERT_OK(cw_plat_file_private(r, "/etc/passwd", "the test file", &d));
        fclose(r);
    }
    remove(path);
}

/* Under ASan malloc is its own, not glibc's (mallinfo2 says nothing of
 * it), and a library preloaded before its runtime stops the program. */
#if defined(__SANITIZE_ADDRESS__)
#define HEAP_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define HEAP_ASAN 1
#endif
#endif
#ifndef HEAP_ASAN
#define HEAP_ASAN 0
#endif

/* Large blocks come and go with pages of their own once the threshold is
 * fixed (glibc's default raises it to every freed mmapped block's size:
 * the second block of 4 MiB came from the heap). */
static void test_heap_mmap_threshold(void)
{
#if HEAP_ASAN
    printf("heap mmap threshold: not checked under ASan (its allocator, not glibc's)\n");
#elif defined(__GLIBC__) && (__GLIBC__ > 2 || (__GLIBC__ == 2 && __GLIBC_MINOR__ >= 33))
    const size_t big = 4u << 20;
    if (RUNNING_ON_VALGRIND) {
        printf("heap mmap threshold: not checked under valgrind (its allocator)\n");
        return;
    }
    cw_plat_heap_mmap_threshold(256u << 10);
    for (int i = 0; i < 3; i++) {
        char *p = malloc(big);
        ASSERT_TRUE(p != NULL);
        memset(p, 1, big);
        struct mallinfo2 mi = mallinfo2();
        ASSERT_TRUE(mi.hblkhd >= big); /* mapped, not in the heap */
        free(p);
        mi = mallinfo2();
        ASSERT_TRUE(mi.hblkhd < big); /* and given back */
    }
#endif
}

/* glibc's per-thread caches, turned off by an exec (platform.h). This
 * program runs itself as "heap-child" with a given environment: the child
 * calls cw_plat_heap_thread_caches_off (which executes it again, the same
 * pid), and prints what it sees; a freed 500-byte block is counted in use
 * by mallinfo2 while it waits in the thread's cache, free without one. */
#if defined(__GLIBC__) && defined(__linux__) &&                                                   \
    (__GLIBC__ > 2 || (__GLIBC__ == 2 && __GLIBC_MINOR__ >= 33))
#define HEAP_CHILD 1
static int heap_child(char **argv)
{
    bool off = cw_plat_heap_thread_caches_off(argv);
    const char *t = getenv("GLIBC_TUNABLES");
    /* What the process was started with (the exec's environment; glibc
     * cuts GLIBC_TUNABLES at its colons there as it reads it). */
    char env[8192] = {0};
    FILE *f = fopen("/proc/self/environ", "rb");
    size_t n = f ? fread(env, 1, sizeof env - 1, f) : 0;
    if (f) fclose(f);
    bool exec_off = false;
    for (size_t i = 0; i < n; i += strlen(env + i) + 1)
        exec_off |= strstr(env + i, "glibc.malloc.tcache_count=0") != NULL;
    /* volatile: a malloc freed unused may be left out by the compiler */
    void *volatile guard0 = malloc(64), *volatile p = malloc(500), *volatile guard1 = malloc(64);
    struct mallinfo2 b = mallinfo2();
    free(p);
    struct mallinfo2 c = mallinfo2();
    printf("off=%d pid=%ld exec_off=%d released=%zu mark=%s tunables=%s\n", off, (long)getpid(),
           exec_off, b.uordblks - c.uordblks, getenv("COMMITWATCH_HEAP_REEXEC") ? "set" : "unset",
           t ? t : "(unset)");
    free(guard0);
    free(guard1);
    return 0;
}

typedef struct heap_seen {
    int off, exec_off;
    long pid;
    size_t released;
    char mark[16], tunables[256];
} heap_seen_t;

/* Runs this program as heap-child with envp; what it printed. */
static heap_seen_t heap_run(char *const envp[], long *child)
{
    char self[4096];
    /* readlink, not /proc/self/exe itself: under valgrind that file is
     * valgrind's, its readlink the program's. */
    ssize_t len = readlink("/proc/self/exe", self, sizeof self - 1);
    ASSERT_TRUE(len > 0);
    self[len] = 0;
    int fd[2];
    ASSERT_EQ(pipe(fd), 0);
    fflush(NULL);
    pid_t pid = fork();
    ASSERT_TRUE(pid >= 0);
    if (pid == 0) {
        dup2(fd[1], 1);
        close(fd[0]);
        close(fd[1]);
        char *args[] = {self, "heap-child", NULL};
        execve(self, args, envp);
        _exit(127);
    }
    close(fd[1]);
    char out[1024] = {0};
    size_t got = 0;
    ssize_t r;
    while ((r = read(fd[0], out + got, sizeof out - 1 - got)) > 0)
        got += (size_t)r;
    close(fd[0]);
    int st = 0;
    ASSERT_EQ(waitpid(pid, &st, 0), pid);
    ASSERT_TRUE(WIFEXITED(st) && WEXITSTATUS(st) == 0);
    heap_seen_t s = {0};
    ASSERT_EQ(sscanf(out, "off=%d pid=%ld exec_off=%d released=%zu mark=%15s tunables=%255s", &s.off,
                     &s.pid, &s.exec_off, &s.released, s.mark, s.tunables),
              6);
    *child = (long)pid;
    printf("heap-child: %s", out);
    return s;
}

static void test_heap_thread_caches(void)
{
    long pid;
    /* No tunables: executed again (same pid) with the caches off, and the
     * environment put back as it was. */
    char *plain[] = {"PATH=/usr/bin:/bin", NULL};
    heap_seen_t s = heap_run(plain, &pid);
    ASSERT_EQ(s.off, 1);
    ASSERT_EQ(s.pid, pid);
    ASSERT_EQ(s.exec_off, 1);
    ASSERT_TRUE(s.released >= 500 || HEAP_ASAN);
    ASSERT_STR_EQ(s.mark, "unset");
    ASSERT_STR_EQ(s.tunables, "(unset)");
    /* Other tunables: kept, the setting added, then put back. */
    char *other[] = {"PATH=/usr/bin:/bin",
                     "GLIBC_TUNABLES=glibc.malloc.check=0:glibc.malloc.mmap_threshold=1000000", NULL};
    s = heap_run(other, &pid);
    ASSERT_EQ(s.off, 1);
    ASSERT_EQ(s.exec_off, 1);
    ASSERT_TRUE(s.released >= 500 || HEAP_ASAN);
    ASSERT_STR_EQ(s.tunables, "glibc.malloc.check=0:glibc.malloc.mmap_threshold=1000000");
    /* The user's own tcache setting: left alone, the caches on. */
    char *own[] = {"PATH=/usr/bin:/bin", "GLIBC_TUNABLES=glibc.malloc.tcache_count=7", NULL};
    s = heap_run(own, &pid);
    ASSERT_EQ(s.off, 0);
    ASSERT_EQ(s.exec_off, 0);
    ASSERT_TRUE(s.released == 0 || HEAP_ASAN);
    ASSERT_STR_EQ(s.tunables, "glibc.malloc.tcache_count=7");
    if (HEAP_ASAN) return;
    /* A preloaded library (another allocator, a profiler): no exec. */
    char *pre[] = {"PATH=/usr/bin:/bin", "LD_PRELOAD=libm.so.6", NULL};
    s = heap_run(pre, &pid);
    ASSERT_EQ(s.off, 0);
    ASSERT_EQ(s.exec_off, 0);
    ASSERT_EQ(s.released, 0);
    ASSERT_STR_EQ(s.mark, "unset");
}
#else
#define HEAP_CHILD 0
static void test_heap_thread_caches(void)
{
    char *none[] = {"test_platform", NULL};
    ASSERT_TRUE(!cw_plat_heap_thread_caches_off(none)); /* no glibc: nothing to do, no exec */
}
#endif

int main(int argc, char **argv)
{
#if HEAP_CHILD
    if (argc > 1 && strcmp(argv[1], "heap-child") == 0) return heap_child(argv);
#else
    (void)argc;
    (void)argv;
#endif
    test_heap_thread_caches();
    test_heap_mmap_threshold();
    test_tcp();
    test_clocks();
    test_threads();
    test_paths();
    test_stop_hooks();
    test_log_sinks();
    test_file_private();
    TEST_DONE();
}
