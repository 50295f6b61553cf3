/* test_alert_limit.c - time to a limit and the limits
 * (service/alerts/limit.c, platform limits.c of this OS):
 *  - cw_time_to_limit's arithmetic, exact on known slopes; not growing,
 *    NaN, at the limit; the upper slope never later than the median;
 *  - a generated steady leak under churn: the time to limit from the leak
 *    score's Theil-Sen slope is within 5 % of the exact value;
 *  - the machine's commit limit equals what the test reads itself (Linux:
 *    /proc/meminfo and vm.overcommit_memory; Windows: GetPerformanceInfo);
 *  - a process's own limit: Linux, a child given RLIMIT_AS by setrlimit
 *    and read through /proc/PID/limits (and VmSize); Windows (under Wine
 *    too), this process put in a job with a per-process memory limit, and
 *    a child in that job whose limit cannot be read (CW_ENOSYS); a process
 *    that does not exist;
 *  - cw_alert_limit for each kind of rule limit, with its fallbacks. */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "commitwatch/alerts.h"
#include "commitwatch/platform.h"
#include "rng.h"
#include "test.h"
#include "test_port.h"

#ifdef _WIN32
#include <psapi.h>
#else
#include <signal.h>
#include <sys/resource.h>
#include <sys/wait.h>
#endif

#define MIB 1048576.0
#define GIB 1073741824ULL

static void test_math(void)
{
    cw_time_to_limit_t t;
    cw_limit_info_t sentinel = {true, true, 123, 45, "x"};
    t.limit = sentinel;
    /* 1 GiB left at 512 MiB/h: 2 h; at the upper slope, 1 GiB/h: 1 h. */
    cw_time_to_limit(GIB, 512 * MIB, 1024 * MIB, &t);
    ASSERT_TRUE(t.median_s == 7200.0);
    ASSERT_TRUE(t.upper_s == 3600.0);
    ASSERT_U64_EQ(t.headroom, GIB);
    ASSERT_TRUE(t.limit.limit == 123 && t.limit.used == 45); /* left as it was */
    /* 3 bytes at 2 bytes/h: 1.5 h. */
    cw_time_to_limit(3, 2, 2, &t);
    ASSERT_TRUE(t.median_s == 5400.0 && t.upper_s == 5400.0);
    /* Not growing. */
    cw_time_to_limit(GIB, 0, 0, &t);
    ASSERT_TRUE(isinf(t.median_s) && isinf(t.upper_s));
    cw_time_to_limit(GIB, -5 * MIB, -1 * MIB, &t);
    ASSERT_TRUE(isinf(t.median_s) && isinf(t.upper_s));
    /* Falling at the median, growing at the upper slope. */
    cw_time_to_limit(GIB, -5 * MIB, 256 * MIB, &t);
    ASSERT_TRUE(isinf(t.median_s) && t.upper_s == 4 * 3600.0);
    /* NaN slopes. */
    cw_time_to_limit(GIB, NAN, NAN, &t);
    ASSERT_TRUE(isinf(t.median_s) && isinf(t.upper_s));
    cw_time_to_limit(GIB, 1024 * MIB, NAN, &t);
    ASSERT_TRUE(t.median_s == 3600.0 && t.upper_s == 3600.0);
    /* An upper slope below the median: the median's (the sooner). */
    cw_time_to_limit(GIB, 1024 * MIB, 512 * MIB, &t);
    ASSERT_TRUE(t.upper_s == 3600.0 && t.median_s == 3600.0);
    /* At the limit: 0 whatever the slope. */
    cw_time_to_limit(0, 0, 0, &t);
    ASSERT_TRUE(t.median_s == 0 && t.upper_s == 0);
    /* Huge headroom, tiny slope: finite and positive. */
    cw_time_to_limit(UINT64_MAX, 1e-300, 1e-300, &t);
    ASSERT_TRUE(t.median_s > 0);

    cw_limit_info_t l = {true, false, 10 * GIB, 4 * GIB, "configured"};
    ASSERT_U64_EQ(cw_limit_headroom(&l), 6 * GIB);
    l.used = 11 * GIB;
    ASSERT_U64_EQ(cw_limit_headroom(&l), 0);
    l.used = 1;
    l.known = false;
    ASSERT_U64_EQ(cw_limit_headroom(&l), 0);
}

/* A leak of 80 MiB/h under churn for 6 h, a point a minute: the leak
 * score's slope gives a time to a 4 GiB limit within 5 % of the exact
 * one (headroom / 80 MiB/h), and the upper slope a sooner time. */
static void test_forecast_on_a_leak(void)
{
    enum { N = 360 };
    static int64_t t[N], x[N];
    const double rate = 80 * MIB; /* bytes/h */
    double worst = 0;
    for (uint64_t seed = 1; seed <= 10; seed++) {
        test_rng_seed(seed * 7919, 0x7711);
        double churn = 0;
        for (int i = 0; i < N; i++) {
            /* churn: an AR(1) wander, sd ~20 MiB, held ~5 minutes */
            double u = (double)(test_rng_next() >> 11) / 9007199254740992.0 - 0.5;
            churn = 0.8 * churn + u * 40 * MIB;
            t[i] = (int64_t)(i + 1) * 60000000000LL;
            x[i] = (int64_t)(1024 * MIB + rate * (i + 1) / 60.0 + churn + 100 * MIB);
        }
        cw_leak_score_t s;
        cw_leak_score(t, x, N, 0, 0, 0, &s);
        uint64_t headroom = 4 * GIB - (uint64_t)x[N - 1];
        cw_time_to_limit_t ttl;
        cw_time_to_limit(headroom, s.slope, s.slope_hi, &ttl);
        double exact = (double)headroom / rate * 3600;
        double err = fabs(ttl.median_s - exact) / exact;
        if (err > 0.05)
            CW_FAIL("seed %llu: time to limit %.0f s, exact %.0f s (%.1f %% off; slope %.1f MiB/h)",
                    (unsigned long long)seed, ttl.median_s, exact, err * 100, s.slope / MIB);
        cw_test_checks++;
        if (err > worst) worst = err;
        ASSERT_TRUE(ttl.upper_s <= ttl.median_s);
        ASSERT_TRUE(s.score >= 0.7);
    }
    printf("time to limit on a leak under churn: worst of 10 seeds %.2f %% off\n", worst * 100);
}

/* ---- the machine's commit limit -------------------------------------------- */

#ifdef _WIN32
static void own_commit(uint64_t *limit, uint64_t *used, bool *enforced)
{
    PERFORMANCE_INFORMATION pi;
    memset(&pi, 0, sizeof pi);
    ASSERT_TRUE(GetPerformanceInfo(&pi, sizeof pi));
    *limit = (uint64_t)pi.CommitLimit * pi.PageSize;
    *used = (uint64_t)pi.CommitTotal * pi.PageSize;
    *enforced = true;
}
#else
static uint64_t meminfo_kb(const char *key)
{
    FILE *f = fopen("/proc/meminfo", "r");
    ASSERT_TRUE(f != NULL);
    char name[64];
    unsigned long long v = 0, found = 0;
    while (fscanf(f, "%63[^:]: %llu%*[^\n]\n", name, &v) == 2)
        if (strcmp(name, key) == 0) {
            found = 1;
            break;
        }
    fclose(f);
    ASSERT_TRUE(found);
    return (uint64_t)v * 1024;
}

static void own_commit(uint64_t *limit, uint64_t *used, bool *enforced)
{
    *limit = meminfo_kb("CommitLimit");
    *used = meminfo_kb("Committed_AS");
    FILE *f = fopen("/proc/sys/vm/overcommit_memory", "r");
    int mode = 0;
    if (f) {
        ASSERT_TRUE(fscanf(f, "%d", &mode) == 1);
        fclose(f);
    }
    *enforced = mode == 2;
}
#endif

static void test_machine(void)
{
    uint64_t l0, u0, l1, u1, limit, used;
    bool e0, e1, enforced;
    own_commit(&l0, &u0, &e0);
    ASSERT_OK(cw_plat_commit_limit(&limit, &used, &enforced));
    own_commit(&l1, &u1, &e1);
    printf("commit limit %llu MiB, used %llu MiB, %s\n", (unsigned long long)(limit >> 20),
           (unsigned long long)(used >> 20), enforced ? "enforced" : "advisory");
    /* The limit is steady; the charge moves as the machine runs: it must
     * lie between the test's two reads, give or take 64 MiB. */
    ASSERT_U64_EQ(limit, l0);
    ASSERT_U64_EQ(limit, l1);
    ASSERT_TRUE(enforced == e0);
    uint64_t lo = u0 < u1 ? u0 : u1, hi = u0 < u1 ? u1 : u0, slack = 64ULL << 20;
    if (used + slack < lo || used > hi + slack)
        CW_FAIL("Committed: %llu, the test read %llu and %llu", (unsigned long long)used,
                (unsigned long long)u0, (unsigned long long)u1);
    cw_test_checks++;
    ASSERT_TRUE(limit > 0 && used > 0);

    cw_limit_info_t m;
    ASSERT_OK(cw_alert_machine_limit(&m));
    ASSERT_TRUE(m.known && m.advisory == !enforced && m.limit == limit);
    ASSERT_STR_EQ(m.source, "CommitLimit");

    /* cw_alert_limit: a rule on the machine's limit, with the figures
     * passed in and read anew. */
    cw_alert_rule_t r;
    memset(&r, 0, sizeof r);
    r.limit_kind = CW_AL_MACHINE;
    cw_limit_info_t out, given = {true, true, 100 * GIB, 40 * GIB, "CommitLimit"};
    ASSERT_OK(cw_alert_limit(&r, 1234, 5 * GIB, &given, &out));
    ASSERT_TRUE(out.known && out.advisory && out.limit == 100 * GIB && out.used == 40 * GIB);
    ASSERT_U64_EQ(cw_limit_headroom(&out), 60 * GIB); /* the machine's free commit */
    ASSERT_OK(cw_alert_limit(&r, 0, 0, NULL, &out));
    ASSERT_TRUE(out.known && out.limit == limit);
    cw_limit_info_t unknown = {false, false, 0, 0, "CommitLimit"};
    ASSERT_EQ(cw_alert_limit(&r, 0, 0, &unknown, &out), CW_EIO);
    ASSERT_TRUE(!out.known);

    /* A configured size. */
    r.limit_kind = CW_AL_SIZE;
    r.limit_bytes = 4 * GIB;
    ASSERT_OK(cw_alert_limit(&r, 1234, 3 * GIB, &given, &out));
    ASSERT_TRUE(out.known && !out.advisory && out.limit == 4 * GIB && out.used == 3 * GIB);
    ASSERT_STR_EQ(out.source, "configured");
    ASSERT_U64_EQ(cw_limit_headroom(&out), GIB);

    /* A process limit for no process (pid 0), or one that does not exist:
     * the machine's. */
    r.limit_kind = CW_AL_PROCESS;
    ASSERT_OK(cw_alert_limit(&r, 0, 0, &given, &out));
    ASSERT_TRUE(out.limit == 100 * GIB);
    ASSERT_OK(cw_alert_limit(&r, 0x7ffffff0u, 0, &given, &out));
    ASSERT_TRUE(out.limit == 100 * GIB);
    uint64_t pl, pu;
    const char *src;
    ASSERT_EQ(cw_plat_process_limit(0x7ffffff0u, &pl, &pu, &src), CW_ENOENT);
}

/* ---- a process's own limit ----------------------------------------------------- */

#ifdef _WIN32
/* The child: sleeps until killed. */
static int child_main(void)
{
    Sleep(30000);
    return 0;
}

static void test_process(void)
{
    uint64_t limit = 1, used = 1;
    const char *src = NULL;
    BOOL in_job = TRUE;
    ASSERT_TRUE(IsProcessInJob(GetCurrentProcess(), NULL, &in_job));
    if (in_job) {
        printf("this test already runs in a job: its limit is checked as found\n");
        ASSERT_TRUE(cw_plat_process_limit((uint32_t)GetCurrentProcessId(), &limit, &used, &src) == 0);
    } else {
        ASSERT_OK(cw_plat_process_limit((uint32_t)GetCurrentProcessId(), &limit, &used, &src));
        ASSERT_U64_EQ(limit, 0);
        ASSERT_STR_EQ(src, "job object");
    }
    /* Into a job with a 3 GiB per-process limit. */
    HANDLE job = CreateJobObjectW(NULL, NULL);
    ASSERT_TRUE(job != NULL);
    JOBOBJECT_EXTENDED_LIMIT_INFORMATION li;
    memset(&li, 0, sizeof li);
    li.BasicLimitInformation.LimitFlags = JOB_OBJECT_LIMIT_PROCESS_MEMORY;
    li.ProcessMemoryLimit = (SIZE_T)(3 * GIB);
    ASSERT_TRUE(SetInformationJobObject(job, JobObjectExtendedLimitInformation, &li, sizeof li));
    ASSERT_TRUE(AssignProcessToJobObject(job, GetCurrentProcess()));
    /* What the OS itself says now. (Wine 8 keeps no job limits and says
     * no process is in a job: then the limit must read as none.) */
    BOOL now_in = FALSE;
    ASSERT_TRUE(IsProcessInJob(GetCurrentProcess(), NULL, &now_in));
    JOBOBJECT_EXTENDED_LIMIT_INFORMATION q;
    memset(&q, 0, sizeof q);
    ASSERT_TRUE(QueryInformationJobObject(job, JobObjectExtendedLimitInformation, &q, sizeof q, NULL));
    bool honoured = now_in && (q.BasicLimitInformation.LimitFlags & JOB_OBJECT_LIMIT_PROCESS_MEMORY);
    ASSERT_OK(cw_plat_process_limit((uint32_t)GetCurrentProcessId(), &limit, &used, &src));
    ASSERT_STR_EQ(src, "job object");
    cw_alert_rule_t r;
    memset(&r, 0, sizeof r);
    r.limit_kind = CW_AL_PROCESS;
    cw_limit_info_t out, given = {true, false, 100 * GIB, 40 * GIB, "CommitLimit"};
    if (!honoured) {
        printf("job limits are not kept here (in a job: %d, flags %lx): the limit reads as none\n",
               (int)now_in, (unsigned long)q.BasicLimitInformation.LimitFlags);
        ASSERT_U64_EQ(limit, 0);
        ASSERT_OK(cw_alert_limit(&r, (uint32_t)GetCurrentProcessId(), 0, &given, &out));
        ASSERT_TRUE(out.limit == 100 * GIB); /* the machine's */
    } else {
        ASSERT_U64_EQ(limit, 3 * GIB);
        PROCESS_MEMORY_COUNTERS_EX pmc;
        memset(&pmc, 0, sizeof pmc);
        ASSERT_TRUE(GetProcessMemoryInfo(GetCurrentProcess(), (PROCESS_MEMORY_COUNTERS *)&pmc,
                                         sizeof pmc));
        printf("own job limit %llu MiB, private commit %llu MiB (the test reads %llu MiB)\n",
               (unsigned long long)(limit >> 20), (unsigned long long)(used >> 20),
               (unsigned long long)(pmc.PrivateUsage >> 20));
        ASSERT_TRUE(used > 0 && used <= pmc.PrivateUsage + (64ULL << 20) &&
                    used + (64ULL << 20) >= pmc.PrivateUsage);
        ASSERT_OK(cw_alert_limit(&r, (uint32_t)GetCurrentProcessId(), 0, &given, &out));
        ASSERT_TRUE(out.known && out.limit == 3 * GIB);
        ASSERT_STR_EQ(out.source, "job object");
    }

    /* A child, in the job by inheritance where jobs are kept: in a job
     * whose limit cannot be read from outside -> CW_ENOSYS, and the rule
     * falls back to the machine's; in no job: no limit. */
    wchar_t exe[MAX_PATH], cmd[MAX_PATH + 16];
    ASSERT_TRUE(GetModuleFileNameW(NULL, exe, MAX_PATH) > 0);
    swprintf(cmd, MAX_PATH + 16, L"\"%ls\" child", exe);
    STARTUPINFOW si;
    PROCESS_INFORMATION pi;
    memset(&si, 0, sizeof si);
    si.cb = sizeof si;
    ASSERT_TRUE(CreateProcessW(exe, cmd, NULL, NULL, FALSE, 0, NULL, NULL, &si, &pi));
    BOOL child_in = FALSE;
    ASSERT_TRUE(IsProcessInJob(pi.hProcess, NULL, &child_in));
    int rc = cw_plat_process_limit((uint32_t)pi.dwProcessId, &limit, &used, &src);
    if (child_in) {
        ASSERT_EQ(rc, CW_ENOSYS);
    } else {
        ASSERT_OK(rc);
        ASSERT_U64_EQ(limit, 0);
    }
    ASSERT_OK(cw_alert_limit(&r, (uint32_t)pi.dwProcessId, 0, &given, &out));
    ASSERT_TRUE(out.limit == 100 * GIB);
    TerminateProcess(pi.hProcess, 0);
    WaitForSingleObject(pi.hProcess, 10000);
    CloseHandle(pi.hThread);
    CloseHandle(pi.hProcess);
    CloseHandle(job);
}
#else
static int child_main(void)
{
    return 0;
}

static void test_process(void)
{
    uint64_t limit = 1, used = 1;
    const char *src = NULL;
    /* This process: what getrlimit says (unlimited here under ASan). */
    struct rlimit rl;
    ASSERT_OK(getrlimit(RLIMIT_AS, &rl));
    ASSERT_OK(cw_plat_process_limit((uint32_t)getpid(), &limit, &used, &src));
    ASSERT_STR_EQ(src, "RLIMIT_AS");
    if (rl.rlim_cur == RLIM_INFINITY)
        ASSERT_U64_EQ(limit, 0);
    else
        ASSERT_U64_EQ(limit, rl.rlim_cur);

    /* A child that sets a soft RLIMIT_AS of 64 GiB (above what it uses,
     * unless sanitizers reserved more: the limit only stops new mappings)
     * and waits on a pipe. */
    int ready[2], hold[2];
    ASSERT_OK(pipe(ready));
    ASSERT_OK(pipe(hold));
    pid_t pid = fork();
    ASSERT_TRUE(pid >= 0);
    if (pid == 0) {
        struct rlimit c = {64ULL << 30, RLIM_INFINITY};
        if (getrlimit(RLIMIT_AS, &rl) == 0 && rl.rlim_max != RLIM_INFINITY) c.rlim_max = rl.rlim_max;
        if (c.rlim_cur > c.rlim_max) c.rlim_cur = c.rlim_max;
        char ok = setrlimit(RLIMIT_AS, &c) == 0 ? 'y' : 'n', x;
        if (write(ready[1], &ok, 1) != 1) _exit(2);
        if (read(hold[0], &x, 1) < 0) _exit(3);
        _exit(0);
    }
    char ok = 0;
    ASSERT_EQ(read(ready[0], &ok, 1), 1);
    ASSERT_EQ(ok, 'y');
    ASSERT_OK(cw_plat_process_limit((uint32_t)pid, &limit, &used, &src));
    ASSERT_U64_EQ(limit, 64ULL << 30);
    ASSERT_STR_EQ(src, "RLIMIT_AS");
    /* used: the child's VmSize, as the test reads it from /proc. */
    char path[64], line[256];
    snprintf(path, sizeof path, "/proc/%d/status", (int)pid);
    FILE *f = fopen(path, "r");
    ASSERT_TRUE(f != NULL);
    unsigned long long vm = 0;
    while (fgets(line, sizeof line, f))
        if (sscanf(line, "VmSize: %llu", &vm) == 1) break;
    fclose(f);
    ASSERT_U64_EQ(used, vm * 1024);
    printf("child's RLIMIT_AS %llu MiB, VmSize %llu MiB\n", (unsigned long long)(limit >> 20),
           (unsigned long long)(used >> 20));

    cw_alert_rule_t r;
    memset(&r, 0, sizeof r);
    r.limit_kind = CW_AL_PROCESS;
    cw_limit_info_t out, given = {true, true, 100 * GIB, 40 * GIB, "CommitLimit"};
    ASSERT_OK(cw_alert_limit(&r, (uint32_t)pid, 0, &given, &out));
    ASSERT_TRUE(out.known && !out.advisory && out.limit == 64ULL << 30 && out.used == vm * 1024);
    ASSERT_STR_EQ(out.source, "RLIMIT_AS");

    /* Once it has exited and been reaped: no such process; the rule falls
     * back to the machine's limit. */
    ASSERT_EQ(write(hold[1], "x", 1), 1);
    int status;
    ASSERT_EQ(waitpid(pid, &status, 0), pid);
    ASSERT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    ASSERT_EQ(cw_plat_process_limit((uint32_t)pid, &limit, &used, &src), CW_ENOENT);
    ASSERT_OK(cw_alert_limit(&r, (uint32_t)pid, 0, &given, &out));
    ASSERT_TRUE(out.limit == 100 * GIB && out.advisory);
    close(ready[0]);
    close(ready[1]);
    close(hold[0]);
    close(hold[1]);
}
#endif

int main(int argc, char **argv)
{
    if (argc > 1 && strcmp(argv[1], "child") == 0) return child_main();
    test_math();
    test_forecast_on_a_leak();
    test_machine();
    test_process();
    TEST_DONE();
}
