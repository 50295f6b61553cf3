/* test_platform.c - the platform layer (platform.h) on this OS: clocks
 * move as they should, sleep sleeps, a condition variable wakes a waiting
 * thread and times out, paths resolve, file kinds and sizes are right,
 * data folders are listed, a stop request reaches the hook, and a file
 * others can write is refused (cw_plat_file_private). */
#include <malloc.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
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

/* Large blocks come and go with pages of their own once the threshold is
 * fixed (glibc's default raises it to every freed mmapped block's size:
 * the second block of 4 MiB came from the heap). */
#if defined(__has_include)
#if __has_include(<valgrind/valgrind.h>)
#include <valgrind/valgrind.h>
#endif
#endif
#ifndef RUNNING_ON_VALGRIND
#define RUNNING_ON_VALGRIND 0
#endif
static void test_heap_mmap_threshold(void)
{
#if defined(__SANITIZE_ADDRESS__)
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

int main(void)
{
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
