/* test_inject.c - cw_plat_inject_library (platform.h): a library is
 * loaded into running children of this program, which go on as they
 * were: one blocked in read() (the call restarts), one computing in user
 * code with floating point (its registers are put back exactly), another
 * program (sleep, exec'd: its own layout) in nanosleep; the
 * library's constructor ran once, in the child; a descriptor handed over
 * reaches it and its answer comes back (and a library that does not take
 * it fails the attach); a library that cannot be loaded is an error that
 * leaves the child running; a process that is gone, a relative path and
 * this process itself are refused. */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "commitwatch/platform.h"
#include "test.h"

#define SEC 1000000000LL

static char probe[4096], out_path[4096];

/* Echo child: reads a byte, writes it + 1, until end of file. A read()
 * that fails (EINTR included: the interrupted call must restart, not
 * fail) ends it with status 3. */
static void echo_child(int in, int out)
{
    unsigned char c;
    for (;;) {
        ssize_t n = read(in, &c, 1);
        if (n <= 0) _exit(n == 0 ? 0 : 3);
        c++;
        if (write(out, &c, 1) != 1) _exit(4);
    }
}

static unsigned char roundtrip(int to, int from, unsigned char c)
{
    ASSERT_EQ(write(to, &c, 1), 1);
    unsigned char r = 0;
    ASSERT_EQ(read(from, &r, 1), 1);
    return r;
}

static int count_lines(const char *want)
{
    FILE *f = fopen(out_path, "r");
    if (!f) return 0;
    char line[128];
    int n = 0, other = 0;
    while (fgets(line, sizeof line, f))
        if (strcmp(line, want) == 0)
            n++;
        else
            other++, fprintf(stderr, "unexpected line: %s", line);
    fclose(f);
    ASSERT_EQ(other, 0);
    return n;
}

/* Loads the probe into pid (no hand-over) and checks its constructor ran
 * there, once. */
static void load_probe(pid_t pid)
{
    cw_diag_t d = {0};
    int rc = cw_plat_inject_library((uint32_t)pid, probe, -1, 10 * SEC, NULL, &d);
    if (rc) CW_FAIL("inject into %ld: %d %s", (long)pid, rc, d.msg);
    char want[64];
    snprintf(want, sizeof want, "loaded %ld\n", (long)pid);
    ASSERT_EQ(count_lines(want), 1);
}

static void test_blocked_in_read(void)
{
    unlink(out_path);
    int a[2], b[2];
    ASSERT_OK(pipe(a));
    ASSERT_OK(pipe(b));
    pid_t pid = fork();
    ASSERT_TRUE(pid >= 0);
    if (pid == 0) {
        close(a[1]), close(b[0]);
        echo_child(a[0], b[1]);
    }
    close(a[0]), close(b[1]);
    ASSERT_EQ(roundtrip(a[1], b[0], 'a'), 'b');
    usleep(50000); /* the child is back in read() */
    load_probe(pid);
    char want[64];
    snprintf(want, sizeof want, "loaded %ld\n", (long)pid);
    /* The interrupted read() restarted: the child still echoes. */
    ASSERT_EQ(roundtrip(a[1], b[0], 'c'), 'd');

    /* A library that does not load: an error naming dlopen, the child
     * untouched. */
    cw_diag_t d = {0};
    int rc =
        cw_plat_inject_library((uint32_t)pid, "/nonexistent/libnothing.so", -1, 10 * SEC, NULL, &d);
    ASSERT_EQ(rc, CW_EIO);
    ASSERT_TRUE(strstr(d.msg, "dlopen") != NULL);
    ASSERT_EQ(roundtrip(a[1], b[0], 'x'), 'y');
    ASSERT_EQ(count_lines(want), 1);

    close(a[1]);
    int st = 0;
    ASSERT_EQ(waitpid(pid, &st, 0), pid);
    ASSERT_TRUE(WIFEXITED(st) && WEXITSTATUS(st) == 0);

    /* The child is gone (and reaped): no such process. */
    memset(&d, 0, sizeof d);
    ASSERT_EQ(cw_plat_inject_library((uint32_t)pid, probe, -1, SEC, NULL, &d), CW_ENOENT);
    close(b[0]);
}

/* The computing child: a floating-point recurrence over many steps, its
 * result written when done; the parent computes the same and compares. */
static double recurrence(long steps)
{
    volatile double x = 0.5;
    double acc = 0;
    for (long i = 0; i < steps; i++) {
        x = 3.9 * x * (1.0 - x);
        acc += x * (double)(i & 7);
    }
    return acc;
}

static void test_computing(void)
{
    const long steps = 60000000;
    unlink(out_path);
    int b[2];
    ASSERT_OK(pipe(b));
    pid_t pid = fork();
    ASSERT_TRUE(pid >= 0);
    if (pid == 0) {
        close(b[0]);
        double r = recurrence(steps);
        _exit(write(b[1], &r, sizeof r) == sizeof r ? 0 : 5);
    }
    close(b[1]);
    usleep(20000); /* it is in the loop */
    cw_diag_t d = {0};
    int rc = cw_plat_inject_library((uint32_t)pid, probe, -1, 10 * SEC, NULL, &d);
    if (rc) CW_FAIL("inject: %d %s", rc, d.msg);
    double got = 0, want = recurrence(steps);
    ASSERT_EQ(read(b[0], &got, sizeof got), (long)sizeof got);
    ASSERT_TRUE(memcmp(&got, &want, sizeof got) == 0);
    int st = 0;
    ASSERT_EQ(waitpid(pid, &st, 0), pid);
    ASSERT_TRUE(WIFEXITED(st) && WEXITSTATUS(st) == 0);
    char line[64];
    snprintf(line, sizeof line, "loaded %ld\n", (long)pid);
    ASSERT_EQ(count_lines(line), 1);
    close(b[0]);
}

/* A descriptor handed over: the library writes to it and answers; a
 * library that does not take it makes the attach fail. */
static void handover(bool peer)
{
    unlink(out_path);
    setenv("CW_INJECT_PROBE_PEER", peer ? "1" : "0", 1);
    int a[2], b[2], g[2];
    ASSERT_OK(pipe(a));
    ASSERT_OK(pipe(b));
    ASSERT_OK(pipe(g));
    pid_t pid = fork();
    ASSERT_TRUE(pid >= 0);
    if (pid == 0) {
        close(a[1]), close(b[0]), close(g[0]), close(g[1]);
        echo_child(a[0], b[1]);
    }
    close(a[0]), close(b[1]);
    ASSERT_EQ(roundtrip(a[1], b[0], 'a'), 'b');
    cw_diag_t d = {0};
    int64_t reply = -7;
    int rc = cw_plat_inject_library((uint32_t)pid, probe, g[1], 10 * SEC, &reply, &d);
    close(g[1]);
    if (peer) {
        if (rc) CW_FAIL("inject with a descriptor: %d %s", rc, d.msg);
        ASSERT_EQ(reply, 42);
        char buf[64] = {0}, want[64];
        ASSERT_TRUE(read(g[0], buf, sizeof buf - 1) > 0);
        snprintf(want, sizeof want, "hello %ld", (long)pid);
        ASSERT_STR_EQ(buf, want);
    } else {
        ASSERT_EQ(rc, CW_EIO);
        ASSERT_TRUE(strstr(d.msg, "did not ask for its descriptor") != NULL);
        ASSERT_EQ(reply, -7);
    }
    close(g[0]);
    ASSERT_EQ(roundtrip(a[1], b[0], 'c'), 'd');
    close(a[1]);
    int st = 0;
    ASSERT_EQ(waitpid(pid, &st, 0), pid);
    ASSERT_TRUE(WIFEXITED(st) && WEXITSTATUS(st) == 0);
    close(b[0]);
    unsetenv("CW_INJECT_PROBE_PEER");
}

static void test_handover(void)
{
    handover(true);
    handover(false);
}

/* Another program (exec'd: its own layout, the same C library), stopped
 * in nanosleep: the library loads in it, and it sleeps on. */
static void test_other_program(void)
{
    unlink(out_path);
    pid_t pid = fork();
    ASSERT_TRUE(pid >= 0);
    if (pid == 0) {
        execl("/bin/sleep", "sleep", "30", (char *)NULL);
        _exit(127);
    }
    /* Until the exec has happened: the image is sleep's. */
    char exe[64], path[256];
    snprintf(exe, sizeof exe, "/proc/%ld/exe", (long)pid);
    for (int i = 0; i < 200; i++) {
        ssize_t n = readlink(exe, path, sizeof path - 1);
        if (n > 0 && (path[n] = 0, strstr(path, "sleep"))) break;
        usleep(10000);
    }
    usleep(100000);
    load_probe(pid);
    /* Still asleep, not killed by the call. */
    int st = 0;
    ASSERT_EQ(waitpid(pid, &st, WNOHANG), 0);
    kill(pid, SIGTERM);
    ASSERT_EQ(waitpid(pid, &st, 0), pid);
    ASSERT_TRUE(WIFSIGNALED(st) && WTERMSIG(st) == SIGTERM);
}

static void test_refused(void)
{
    cw_diag_t d = {0};
    ASSERT_EQ(cw_plat_inject_library((uint32_t)getpid(), probe, -1, SEC, NULL, &d), CW_EINVAL);
    ASSERT_EQ(cw_plat_inject_library(1, "relative/lib.so", -1, SEC, NULL, &d), CW_EINVAL);
    ASSERT_EQ(cw_plat_inject_library(0, probe, -1, SEC, NULL, &d), CW_EINVAL);
}

int main(void)
{
    const char *build = getenv("CW_BUILD");
    if (!build) CW_FAIL("CW_BUILD is not set (run through ctest)");
    snprintf(probe, sizeof probe, "%s/tests/workloads/inject_probe.so", build);
    struct stat sb;
    if (stat(probe, &sb) != 0) CW_FAIL("%s is missing: build the inject_probe target", probe);
    char tmpl[] = "/tmp/cw_inject_XXXXXX";
    if (!mkdtemp(tmpl)) CW_FAIL("mkdtemp: %s", strerror(errno));
    snprintf(out_path, sizeof out_path, "%s/probe.out", tmpl);
    /* The children inherit it: the probe's constructor writes there. */
    setenv("CW_INJECT_PROBE_OUT", out_path, 1);
    test_refused();
    test_blocked_in_read();
    test_computing();
    test_handover();
    test_other_program();
    unlink(out_path);
    rmdir(tmpl);
    TEST_DONE();
}
