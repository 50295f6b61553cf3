/* test_heaptraces.c - the service's heap traces (heaptraces.h) and their
 * rows (heapdb.h), over a real database and real child processes (an
 * exec'd `sleep`, attached with the real interposer): a trace starts,
 * shows its progress and attach, is stopped, stored with its report; one
 * per process (the second ask is refused and recorded, naming the first);
 * the limit of traces at once and the longest duration are refused and
 * recorded; a process that ends ends its trace ("exited"); an attach that
 * fails is recorded with its reason; stopping the
 * set stores the running ones ("shutdown"); rows an earlier run left
 * "running" are marked failed at the start; the list filters by pid. */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "commitwatch/heapdb.h"
#include "commitwatch/heaptraces.h"
#include "commitwatch/platform.h"
#include "test.h"

#define SEC 1000000000LL

static char db[4096], preload[4096];

static pid_t start_sleep(void)
{
    pid_t pid = fork();
    ASSERT_TRUE(pid >= 0);
    if (pid == 0) {
        execlp("sleep", "sleep", "60", (char *)NULL);
        _exit(127);
    }
    cw_plat_sleep_ns(SEC / 5); /* exec'd, its C library loaded */
    return pid;
}

static void end_child(pid_t pid)
{
    kill(pid, SIGKILL);
    waitpid(pid, NULL, 0);
}

static cw_heap_trace_row_t get_row(int64_t id)
{
    cw_store_t *s = NULL;
    cw_diag_t d = {{0}};
    cw_heap_trace_row_t r;
    ASSERT_OK(cw_store_open_readonly(db, &s, &d));
    ASSERT_OK(cw_store_heap_get(s, id, &r, &d));
    cw_store_close(s);
    return r;
}

static void wait_until_ended(cw_heaptraces_t *h)
{
    for (int i = 0; i < 300 && cw_heaptraces_running(h); i++)
        cw_plat_sleep_ns(SEC / 20);
    ASSERT_EQ(cw_heaptraces_running(h), 0);
}

static cw_heaptraces_t *start_set(uint32_t max_running)
{
    cw_heaptraces_opts_t o = {.db_path = db,
                              .max_running = max_running,
                              .max_duration_ns = 60 * SEC,
                              .preload = preload};
    cw_heaptraces_t *h = NULL;
    cw_diag_t d = {{0}};
    ASSERT_OK(cw_heaptraces_start(&o, &h, &d));
    return h;
}

static void test_refusals_and_stop(void)
{
    cw_heaptraces_t *h = start_set(1);
    cw_diag_t d = {{0}};
    int64_t id = 0, id2 = 0;
    /* No process: refused and recorded. */
    cw_heaptrace_ask_t none = {.trigger = "alert", .rule = "r", .alert_series = 7};
    ASSERT_EQ(cw_heaptraces_ask(h, &none, &id, &d), CW_EINVAL);
    ASSERT_TRUE(id > 0);
    cw_heap_trace_row_t r = get_row(id);
    ASSERT_STR_EQ(r.state, "failed");
    ASSERT_TRUE(strstr(r.error, "group_by = instance") != NULL);
    ASSERT_STR_EQ(r.trigger, "alert");
    ASSERT_EQ(r.alert_series, 7);
    cw_heap_trace_row_clear(&r);

    pid_t a = start_sleep(), b = start_sleep();
    cw_heaptrace_ask_t ask = {.pid = (uint32_t)a, .process = "sleep", .duration_ns = 30 * SEC};
    ASSERT_OK(cw_heaptraces_ask(h, &ask, &id, &d));
    uint64_t events = 1;
    bool attached = false;
    for (int i = 0; i < 300 && !attached; i++) {
        ASSERT_TRUE(cw_heaptraces_progress(h, id, &events, &attached));
        if (!attached) cw_plat_sleep_ns(SEC / 20);
    }
    ASSERT_TRUE(attached);
    r = get_row(id);
    ASSERT_STR_EQ(r.state, "running");
    ASSERT_STR_EQ(r.trigger, "api");
    cw_heap_trace_row_clear(&r);

    /* One trace per process: refused, naming the running one, recorded. */
    ASSERT_EQ(cw_heaptraces_ask(h, &ask, &id2, &d), CW_ESTOPPED);
    ASSERT_EQ(id2, id);
    ASSERT_TRUE(strstr(d.msg, "already traced") != NULL);
    /* The limit of traces at once (1 here). */
    cw_heaptrace_ask_t askb = {.pid = (uint32_t)b, .duration_ns = 30 * SEC};
    ASSERT_EQ(cw_heaptraces_ask(h, &askb, &id2, &d), CW_ERANGE);
    r = get_row(id2);
    ASSERT_STR_EQ(r.state, "failed");
    ASSERT_TRUE(strstr(r.error, "at once") != NULL);
    cw_heap_trace_row_clear(&r);
    /* Longer than the maximum. */
    askb.duration_ns = 2 * 3600 * SEC;
    ASSERT_EQ(cw_heaptraces_ask(h, &askb, &id2, &d), CW_EINVAL);
    ASSERT_TRUE(strstr(d.msg, "at most 60 s") != NULL);

    /* Stopped: stored with its report, and no longer running. */
    ASSERT_OK(cw_heaptraces_stop_one(h, id));
    wait_until_ended(h);
    ASSERT_EQ(cw_heaptraces_stop_one(h, id), CW_ENOENT);
    ASSERT_TRUE(!cw_heaptraces_progress(h, id, &events, &attached));
    r = get_row(id);
    ASSERT_STR_EQ(r.state, "stopped");
    ASSERT_STR_EQ(r.end_reason, "stopped");
    ASSERT_TRUE(r.started_ns > 0 && r.ended_ns >= r.started_ns);
    ASSERT_TRUE(r.report && strstr(r.report, "\"layer\":\"heap\"") != NULL);
    ASSERT_TRUE(r.error == NULL);
    cw_heap_trace_row_clear(&r);

    /* The process ends: so does its trace. */
    askb.duration_ns = 30 * SEC;
    ASSERT_OK(cw_heaptraces_ask(h, &askb, &id2, &d));
    attached = false;
    for (int i = 0; i < 300 && !attached; i++) {
        ASSERT_TRUE(cw_heaptraces_progress(h, id2, &events, &attached));
        if (!attached) cw_plat_sleep_ns(SEC / 20);
    }
    end_child(b);
    wait_until_ended(h);
    r = get_row(id2);
    ASSERT_STR_EQ(r.state, "done");
    ASSERT_STR_EQ(r.end_reason, "exited");
    cw_heap_trace_row_clear(&r);

    /* The attach fails on the trace's thread (no such process): recorded
     * failed, saying why, never started, no report. */
    cw_heaptrace_ask_t gone = {.pid = 0x3ffffff0, .duration_ns = SEC};
    ASSERT_OK(cw_heaptraces_ask(h, &gone, &id2, &d));
    wait_until_ended(h);
    r = get_row(id2);
    ASSERT_STR_EQ(r.state, "failed");
    ASSERT_TRUE(r.error && strstr(r.error, "no process") != NULL);
    ASSERT_EQ(r.started_ns, 0);
    ASSERT_TRUE(r.report == NULL);
    cw_heap_trace_row_clear(&r);

    /* A trace that runs when the set stops: stored, "shutdown". */
    ask.duration_ns = 30 * SEC;
    ASSERT_OK(cw_heaptraces_ask(h, &ask, &id, &d));
    cw_heaptraces_stop(h);
    r = get_row(id);
    ASSERT_STR_EQ(r.state, "stopped");
    ASSERT_STR_EQ(r.end_reason, "shutdown");
    cw_heap_trace_row_clear(&r);
    end_child(a);

    /* The list, newest first, filtered by pid. */
    cw_store_t *s = NULL;
    cw_heap_trace_row_t *v = NULL;
    size_t n = 0;
    ASSERT_OK(cw_store_open_readonly(db, &s, &d));
    cw_heap_trace_filter_t f = {.pid = (uint32_t)a};
    ASSERT_OK(cw_store_heap_list(s, &f, &v, &n, &d));
    ASSERT_EQ(n, 3); /* stopped, refused (already traced), shutdown */
    ASSERT_TRUE(v[0].id > v[1].id && v[1].id > v[2].id);
    ASSERT_TRUE(v[0].report == NULL);
    cw_heap_trace_rows_free(v, n);
    cw_store_close(s);
}

/* Rows a killed service left running are failed at the next start. */
static void test_orphans(void)
{
    cw_store_t *s = NULL;
    cw_diag_t d = {{0}};
    ASSERT_OK(cw_store_open_side(db, &s, &d));
    cw_heap_trace_row_t r = {.pid = 4242, .trigger = "api", .requested_ns = 1, .state = "running"};
    ASSERT_OK(cw_store_heap_add(s, &r, &d));
    cw_store_close(s);
    cw_heaptraces_t *h = start_set(0);
    cw_heaptraces_stop(h);
    cw_heap_trace_row_t got = get_row(r.id);
    ASSERT_STR_EQ(got.state, "failed");
    ASSERT_TRUE(strstr(got.error, "killed") != NULL);
    cw_heap_trace_row_clear(&got);
}

int main(void)
{
    const char *build = getenv("CW_BUILD");
    if (!build) CW_FAIL("CW_BUILD is not set (run through ctest)");
    snprintf(preload, sizeof preload, "%s/libcwheap.so", build);
    struct stat sb;
    if (stat(preload, &sb) != 0) CW_FAIL("%s is missing: build the cw_heap_preload target", preload);
    char tmpl[] = "/tmp/cw_heaptraces_XXXXXX";
    if (!mkdtemp(tmpl)) CW_FAIL("mkdtemp: %s", strerror(errno));
    snprintf(db, sizeof db, "%s/h.db", tmpl);
    cw_store_t *s = NULL;
    cw_diag_t d = {{0}};
    ASSERT_OK(cw_store_open(db, NULL, &s, &d));
    cw_store_close(s);
    test_refusals_and_stop();
    test_orphans();
    char cmd[4200];
    snprintf(cmd, sizeof cmd, "rm -rf %s", tmpl);
    if (system(cmd) != 0) fprintf(stderr, "could not remove %s\n", tmpl);
    TEST_DONE();
}
