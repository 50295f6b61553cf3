/* test_service.c - the service entry point (service.h): a replay runs to
 * its end and is stored; the same input again is refused (time); usage
 * errors are CW_EUSAGE before anything is opened; a configuration error
 * names file:line; stop from another thread ends a paced run promptly and
 * cleanly; a reload request is served while running; on_running is called
 * once the service is up. */
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "commitwatch/log.h"
#include "commitwatch/platform.h"
#include "commitwatch/service.h"
#include "commitwatch/source.h"
#include "commitwatch/store.h"
#include "test.h"
#include "test_port.h"

#define MS 1000000LL

static char dir[4096];

static const char *path_in(const char *name)
{
    static char p[8][4300];
    static int k;
    k = (k + 1) % 8;
    snprintf(p[k], sizeof p[k], "%s/%s", dir, name);
    return p[k];
}

static const char *fixture(void)
{
    static char p[4096];
    const char *fx = getenv("CW_FIXTURES");
    snprintf(p, sizeof p, "%s/memorytestapp.jsonl", fx ? fx : "tests/fixtures");
    return p;
}

/* Captured log lines (any thread). */
static cw_mutex_t *log_lock;
static char logbuf[65536];
static void capture(cw_log_level_t lvl, const char *line)
{
    (void)lvl;
    cw_mutex_lock(log_lock);
    size_t n = strlen(logbuf);
    cw_strlcpy(logbuf + n, line, sizeof logbuf - n);
    cw_mutex_unlock(log_lock);
}
static bool logged(const char *s)
{
    cw_mutex_lock(log_lock);
    bool yes = strstr(logbuf, s) != NULL;
    cw_mutex_unlock(log_lock);
    return yes;
}

/* Events the database's whole-window report counts (the fixture's own,
 * plus one "tracking ended" exit per instance still alive at the end), and
 * its process count in *nprocs when not NULL. */
static uint64_t stored_events_n(const char *db, uint32_t *nprocs)
{
    cw_store_t *st;
    cw_report_t *r;
    cw_diag_t d = {{0}};
    ASSERT_OK(cw_store_open_readonly(db, &st, &d));
    ASSERT_OK(cw_store_report(st, INT64_MIN, INT64_MAX, false, &r, &d));
    uint64_t n = 0;
    for (uint32_t i = 0; i < r->nprocs; i++)
        n += r->procs[i].events;
    if (nprocs) *nprocs = r->nprocs;
    cw_report_free(r);
    cw_store_close(st);
    return n;
}

static uint64_t stored_events(const char *db)
{
    return stored_events_n(db, NULL);
}

static int running_calls;
static void on_running(void *ctx)
{
    (void)ctx;
    running_calls++;
}

static void test_replay_to_end(void)
{
    char src[4200];
    cw_diag_t d = {{0}};
    snprintf(src, sizeof src, "replay:%s", fixture());
    const char *db = path_in("end.db");
    remove(db);
    cw_service_args_t a = {.source = src, .db = db, .no_http = true, .on_running = on_running};
    ASSERT_OK(cw_service_run(&a, &d));
    ASSERT_EQ(running_calls, 1);
    ASSERT_TRUE(!cw_service_stopping());
    ASSERT_TRUE(logged("end of input: 148 events stored"));
    uint32_t nprocs = 0;
    uint64_t n = stored_events_n(db, &nprocs);
    /* Every event line of the fixture, and at most one end per instance. */
    ASSERT_TRUE(nprocs >= 2 && n >= 148 && n <= 148 + nprocs);

    /* The same input into the same database goes back in time. */
    ASSERT_EQ(cw_service_run(&a, &d), CW_ETIME);
    ASSERT_TRUE(strstr(d.msg, "already holds data") && strstr(d.msg, "--rebase-now"));
    ASSERT_U64_EQ(stored_events(db), n); /* nothing lost, nothing added */
}

static void test_usage(void)
{
    cw_diag_t d = {{0}};
    const char *db = path_in("usage.db");
    remove(db);
    cw_service_args_t a = {.source = "tape:x", .db = db, .no_http = true};
    ASSERT_EQ(cw_service_run(&a, &d), CW_EUSAGE);
    ASSERT_TRUE(strstr(d.msg, "unknown source 'tape:x'") != NULL);
    /* Replay-only options with the live source (a build without one, as on
     * Windows until the ETW source, refuses the missing source instead). */
    a.source = cw_source_live();
    a.rebase_now = true;
    ASSERT_EQ(cw_service_run(&a, &d), CW_EUSAGE);
    ASSERT_TRUE(strstr(d.msg, a.source ? "replay sources only" : "no live source") != NULL);
    ASSERT_TRUE(!cw_plat_is_file(db)); /* refused before the database was created */

    /* A bad configuration value names its file and line. */
    const char *conf = path_in("bad.conf");
    FILE *f = fopen(conf, "w");
    ASSERT_TRUE(f != NULL);
    fputs("# ok\nretention_raw = soon\n", f);
    fclose(f);
    cw_service_args_t b = {.config_path = conf, .source = "replay:/x", .db = db, .no_http = true};
    ASSERT_TRUE(cw_service_run(&b, &d) != 0);
    ASSERT_TRUE(strstr(d.msg, "bad.conf:2") != NULL);
    ASSERT_TRUE(!cw_plat_is_file(db));
}

typedef struct stopper {
    int64_t after_ns;
    bool reload;
} stopper_t;

static void stop_later(void *arg)
{
    stopper_t *s = arg;
    if (s->reload) {
        cw_plat_sleep_ns(s->after_ns / 2);
        cw_service_reload();
    }
    cw_plat_sleep_ns(s->reload ? s->after_ns / 2 : s->after_ns);
    cw_service_stop();
}

static void test_stop_and_reload(void)
{
    char src[4200];
    cw_diag_t d = {{0}};
    snprintf(src, sizeof src, "replay:%s", fixture());
    const char *db = path_in("stop.db");
    const char *conf = path_in("ok.conf");
    FILE *f = fopen(conf, "w");
    ASSERT_TRUE(f != NULL);
    fputs("log_level = info\n", f);
    fclose(f);
    remove(db);
    /* The fixture spans about 30 s: paced at 1x it is stopped long before its end. */
    cw_service_args_t a = {.config_path = conf,
                           .source = src,
                           .db = db,
                           .no_http = true,
                           .rebase_now = true,
                           .speed = 1.0};
    stopper_t s = {1500 * MS, true};
    cw_thread_t *t;
    ASSERT_OK(cw_thread_start(&t, stop_later, &s));
    int64_t t0 = cw_plat_mono_ns();
    ASSERT_OK(cw_service_run(&a, &d));
    int64_t took = cw_plat_mono_ns() - t0;
    cw_thread_join(t);
    ASSERT_TRUE(cw_service_stopping());
    ASSERT_TRUE(took >= 1400 * MS && took < 10000 * MS);
    ASSERT_TRUE(logged("reload requested: reloading"));
    ASSERT_TRUE(logged("stopped: "));
    uint64_t n = stored_events(db);
    ASSERT_TRUE(n > 0 && n < 148); /* what came before the stop, stored */
}

int main(void)
{
    const char *build = getenv("CW_BUILD");
    snprintf(dir, sizeof dir, "%s/test-service", build ? build : ".");
    ASSERT_OK(cw_test_mkdir_p(dir));
    ASSERT_OK(cw_mutex_create(&log_lock));
    cw_log_set_sink(capture);
    test_replay_to_end();
    test_usage();
    test_stop_and_reload();
    cw_log_set_sink(NULL);
    cw_mutex_destroy(log_lock);
    TEST_DONE();
}
