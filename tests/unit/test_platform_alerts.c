/* test_platform_alerts.c - the platform layer's alert calls (platform.h)
 * on both OSes (under Wine for Windows): cw_plat_run runs this program
 * itself as the child (CW_TEST_RUN_CHILD says what to do): bytes on
 * stdin, exit status, a child that does not read, the timeout kill, a
 * missing program; the system log opens the one this OS has (the Event
 * Log's ReportEventW succeeds under Wine) and refuses the others. The
 * journald/syslog datagrams themselves are checked against real sockets
 * by tests/e2e/test_notify_local.py. */
#include "commitwatch/platform.h"
#include "test.h"
#include "test_port.h"

static int child(const char *mode)
{
    if (strcmp(mode, "sleep") == 0) {
        cw_plat_sleep_ns(30000000000LL);
        return 0;
    }
    if (strcmp(mode, "ignore") == 0) return 7;
    size_t n = 0, r;
    char buf[4096];
    while ((r = fread(buf, 1, sizeof buf, stdin)) > 0)
        n += r;
    return (int)(n % 251);
}

static void test_run(const char *self)
{
    static char in[200000];
    memset(in, 'x', sizeof in);
    int code;
    bool timed_out;
    cw_diag_t d;
    ASSERT_OK(cw_test_setenv("CW_TEST_RUN_CHILD", "count"));
    ASSERT_OK(cw_plat_run(self, in, 1000, 20000000000LL, &code, &timed_out, &d));
    ASSERT_TRUE(!timed_out);
    ASSERT_EQ(code, 1000 % 251);
    ASSERT_OK(cw_plat_run(self, in, sizeof in, 20000000000LL, &code, &timed_out, &d));
    ASSERT_EQ(code, (int)(sizeof in % 251)); /* more than a pipe holds */

    /* A child that reads nothing and exits: neither a hang nor SIGPIPE. */
    ASSERT_OK(cw_test_setenv("CW_TEST_RUN_CHILD", "ignore"));
    int64_t t0 = cw_plat_mono_ns();
    ASSERT_OK(cw_plat_run(self, in, sizeof in, 20000000000LL, &code, &timed_out, &d));
    ASSERT_EQ(code, 7);
    ASSERT_TRUE(!timed_out);
    ASSERT_TRUE(cw_plat_mono_ns() - t0 < 10000000000LL);

    ASSERT_OK(cw_test_setenv("CW_TEST_RUN_CHILD", "sleep"));
    t0 = cw_plat_mono_ns();
    ASSERT_OK(cw_plat_run(self, in, 10, 500000000LL, &code, &timed_out, &d));
    int64_t took = cw_plat_mono_ns() - t0;
    ASSERT_TRUE(timed_out);
    ASSERT_TRUE(took >= 450000000LL && took < 10000000000LL);

    char missing[CW_PATH_MAX + 32];
    snprintf(missing, sizeof missing, "%s/cw-no-such-program", cw_test_tmpdir());
    ASSERT_EQ(cw_plat_run(missing, in, 10, 1000000000LL, &code, &timed_out, &d), CW_ENOENT);
    ASSERT_TRUE(strstr(d.msg, "cw-no-such-program") != NULL);
}

static void test_alert_log(void)
{
    bool windows = strcmp(cw_plat_name(), "windows") == 0;
    cw_plat_alert_log_t *l;
    cw_diag_t d;
    char root[CW_PATH_MAX];
    snprintf(root, sizeof root, "%s/cw_test_alertlog_XXXXXX", cw_test_tmpdir());
    ASSERT_TRUE(cw_test_mkdtemp(root) != NULL);
    ASSERT_OK(cw_plat_alert_log_open("auto", root, &l, &d));
    /* No journald socket under root: syslog; Windows: the Event Log. */
    ASSERT_STR_EQ(cw_plat_alert_log_name(l), windows ? "eventlog" : "syslog");
    cw_plat_alert_field_t f[] = {{"COMMITWATCH_PROCESS", "leaky.exe"}, {"COMMITWATCH_PID", "42"}};
    cw_plat_alert_entry_t e = {CW_PLAT_ALERT_WARNING, CW_PLAT_ALERT_FIRING, "alert test firing", f,
                               2};
    int rc = cw_plat_alert_log_write(l, &e, &d);
    if (windows)
        ASSERT_OK(rc);
    else
        ASSERT_EQ(rc, CW_EIO); /* nothing listens at ROOT/dev/log */
    e.kind = CW_PLAT_ALERT_RESOLVED;
    e.level = CW_PLAT_ALERT_INFO;
    ASSERT_EQ(cw_plat_alert_log_write(l, &e, &d), windows ? 0 : CW_EIO);
    cw_plat_alert_log_close(l);
    cw_plat_alert_log_close(NULL);
    ASSERT_EQ(cw_plat_alert_log_open(windows ? "journald" : "eventlog", root, &l, &d), CW_EINVAL);
    ASSERT_TRUE(strstr(d.msg, "known:") != NULL);
    cw_test_rmtree(root);
}

int main(int argc, char **argv)
{
    const char *mode = getenv("CW_TEST_RUN_CHILD");
    if (mode && *mode) return child(mode);
    (void)argc;
    char *self = cw_plat_realpath(argv[0]);
    if (!self) {
        char exe[CW_PATH_MAX];
        snprintf(exe, sizeof exe, "%s.exe", argv[0]);
        self = cw_plat_realpath(exe);
    }
    ASSERT_TRUE(self != NULL);
    test_run(self);
    free(self);
    test_alert_log();
    TEST_DONE();
}
