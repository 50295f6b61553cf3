/* test_replay.c - the replay source: events in file order with their own
 * times; --rebase-now shifts them to start now; --speed paces them against
 * the wall clock and ticks while it waits, never past the next event;
 * stop() interrupts a wait at once; bad arguments are usage errors; a
 * wall-clock step (a fake clock, cw_plat_fake_wall) while it paces neither
 * stalls, rushes nor reorders it. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "commitwatch/platform.h"
#include "commitwatch/source.h"
#include "test.h"

#define MS 1000000LL
#define MAXEV 16

typedef struct got {
    int64_t ev_ts[MAXEV], ev_wall[MAXEV];
    int nev;
    int64_t tick[4096];
    int ntick;
    bool tick_past_next; /* a tick later than the event delivered after it */
    void *src;
    int stop_after; /* call stop() after this many events (0 = never) */
} got_t;

static int on_event(void *ctx, const cw_event_t *ev)
{
    got_t *g = ctx;
    if (g->nev < MAXEV) {
        g->ev_ts[g->nev] = ev->ts;
        g->ev_wall[g->nev] = cw_plat_wall_ns();
    }
    for (int i = 0; i < g->ntick; i++)
        if (g->tick[i] > ev->ts) g->tick_past_next = true;
    g->ntick = 0;
    g->nev++;
    if (g->stop_after && g->nev == g->stop_after) cw_source_replay.stop(g->src);
    return 0;
}

static int on_tick(void *ctx, int64_t now)
{
    got_t *g = ctx;
    if (g->ntick && now < g->tick[g->ntick - 1]) CW_FAIL("tick went back: %lld", (long long)now);
    if (g->ntick < 4096) g->tick[g->ntick++] = now;
    return 0;
}

/* A trace whose commits are at the given times (ms); returns its path. */
static const char *write_trace(const char *name, const int64_t *ms, int n)
{
    static char path[4096];
    const char *build = getenv("CW_BUILD");
    snprintf(path, sizeof path, "%s/%s", build ? build : ".", name);
    FILE *f = fopen(path, "w");
    ASSERT_TRUE(f != NULL);
    fputs("{\"format\":\"commitwatch-trace\",\"version\":1,\"platform\":\"linux\",\"pointer_size\":"
          "8}\n",
          f);
    for (int i = 0; i < n; i++)
        fprintf(f,
                "{\"ts\":%lld,\"op\":\"commit\",\"pid\":7,\"addr\":%d,\"size\":4096,\"stack\":[\"a!"
                "b\"]}\n",
                (long long)(1000000000LL + ms[i] * MS), 4096 * (i + 1));
    fclose(f);
    return path;
}

static int run(const char *path, bool rebase, double speed, got_t *g)
{
    cw_stacks_t *stacks;
    cw_diag_t d = {{0}};
    ASSERT_OK(cw_stacks_create(&stacks));
    cw_source_opts_t o = {.arg = path, .stacks = stacks, .rebase_now = rebase, .speed = speed};
    ASSERT_OK(cw_source_replay.open(&g->src, &o, &d));
    ASSERT_STR_EQ(cw_source_replay.platform(g->src), "linux");
    cw_source_sink_t sink = {g, on_event, on_tick, NULL, NULL, NULL};
    int rc = cw_source_replay.run(g->src, &sink, &d);
    cw_source_replay.close(g->src);
    cw_stacks_destroy(stacks);
    return rc;
}

static const int64_t times[] = {0, 100, 100, 300};

static void test_fast(void)
{
    got_t g = {0};
    ASSERT_OK(run(write_trace("replay-fast.jsonl", times, 4), false, 0, &g));
    ASSERT_EQ(g.nev, 4);
    for (int i = 0; i < 4; i++)
        ASSERT_EQ(g.ev_ts[i], 1000000000LL + times[i] * MS);
    ASSERT_EQ(g.ntick, 0); /* unpaced: no ticks */
}

static void test_rebase(void)
{
    got_t g = {0};
    int64_t before = cw_plat_wall_ns();
    ASSERT_OK(run(write_trace("replay-rebase.jsonl", times, 4), true, 0, &g));
    int64_t after = cw_plat_wall_ns();
    ASSERT_TRUE(g.ev_ts[0] >= before && g.ev_ts[0] <= after);
    for (int i = 1; i < 4; i++)
        ASSERT_EQ(g.ev_ts[i] - g.ev_ts[0], times[i] * MS);
}

static void test_paced(void)
{
    got_t g = {0};
    int64_t t0 = cw_plat_mono_ns();
    ASSERT_OK(run(write_trace("replay-paced.jsonl", times, 4), false, 1.0, &g));
    int64_t took = cw_plat_mono_ns() - t0;
    ASSERT_EQ(g.nev, 4);
    ASSERT_TRUE(took >= 290 * MS); /* the trace spans 300 ms */
    ASSERT_TRUE(took < 3000 * MS);
    /* Each event is delivered no earlier than its time after the first. */
    for (int i = 1; i < 4; i++)
        ASSERT_TRUE(g.ev_wall[i] - g.ev_wall[0] >= times[i] * MS - 15 * MS);
    ASSERT_TRUE(!g.tick_past_next);

    /* Ten times faster: the same trace in about 30 ms. */
    got_t h = {0};
    t0 = cw_plat_mono_ns();
    ASSERT_OK(run(write_trace("replay-paced10.jsonl", times, 4), false, 10.0, &h));
    took = cw_plat_mono_ns() - t0;
    ASSERT_EQ(h.nev, 4);
    ASSERT_TRUE(took >= 25 * MS && took < 1000 * MS);
}

/* The fake wall clock: the real one plus an offset that changes with the
 * events delivered: +1 h after the first, -1 h after the second (a step
 * back of 2 h). */
static int64_t stepped_wall(void *ctx)
{
    const got_t *g = ctx;
    int64_t off = g->nev >= 2 ? -3600LL * 1000000000LL : g->nev >= 1 ? 3600LL * 1000000000LL : 0;
    cw_plat_fake_wall(NULL, NULL);
    int64_t real = cw_plat_wall_ns();
    cw_plat_fake_wall(stepped_wall, (void *)g);
    return real + off;
}

static void test_wall_steps(void)
{
    static const int64_t at[] = {0, 200, 400, 600, 800};
    got_t g = {0};
    int64_t t0 = cw_plat_mono_ns();
    cw_plat_fake_wall(stepped_wall, &g);
    int rc = run(write_trace("replay-steps.jsonl", at, 5), true, 1.0, &g);
    cw_plat_fake_wall(NULL, NULL);
    int64_t took = cw_plat_mono_ns() - t0;
    ASSERT_OK(rc);
    ASSERT_EQ(g.nev, 5);
    /* Paced by the monotonic clock: 800 ms, neither an hour (the step
     * back) nor at once (the step forward). */
    ASSERT_TRUE(took >= 780 * MS && took < 3000 * MS);
    /* The times are the trace's, shifted once at the start (before any
     * step): spacing kept, in order. */
    int64_t real = cw_plat_wall_ns();
    ASSERT_TRUE(g.ev_ts[0] > real - 60000 * MS && g.ev_ts[0] <= real);
    for (int i = 1; i < 5; i++)
        ASSERT_EQ(g.ev_ts[i] - g.ev_ts[0], at[i] * MS);
    ASSERT_TRUE(!g.tick_past_next); /* and on_tick checks ticks never go back */
}

/* A 60 s gap at speed 1, stopped (as a signal handler would) after the
 * first event: the wait ends at once and the second event never comes. */
static void test_stop(void)
{
    static const int64_t gap[] = {0, 60000};
    got_t g = {0};
    g.stop_after = 1; /* stop() from the emit callback, as a handler would */
    int64_t t0 = cw_plat_mono_ns();
    ASSERT_OK(run(write_trace("replay-stop.jsonl", gap, 2), false, 1.0, &g));
    ASSERT_EQ(g.nev, 1);
    ASSERT_TRUE(cw_plat_mono_ns() - t0 < 2000 * MS);
}

static void test_errors(void)
{
    cw_stacks_t *stacks;
    cw_diag_t d = {{0}};
    void *src = NULL;
    ASSERT_OK(cw_stacks_create(&stacks));
    cw_source_opts_t o = {.arg = "", .stacks = stacks};
    ASSERT_EQ(cw_source_replay.open(&src, &o, &d), CW_EUSAGE);
    ASSERT_TRUE(strstr(d.msg, "replay:PATH") != NULL);
    o.arg = "/nonexistent/trace.jsonl";
    ASSERT_TRUE(cw_source_replay.open(&src, &o, &d) != 0);
    ASSERT_TRUE(strstr(d.msg, "/nonexistent/trace.jsonl") != NULL);
    o.arg = write_trace("replay-err.jsonl", times, 1);
    o.speed = -1;
    ASSERT_EQ(cw_source_replay.open(&src, &o, &d), CW_EUSAGE);
    cw_stacks_destroy(stacks);

    /* The registry finds replay by spec and names what it has otherwise. */
    const char *arg;
    ASSERT_TRUE(cw_source_lookup("replay:/x/y", &arg, &d) == &cw_source_replay);
    ASSERT_STR_EQ(arg, "/x/y");
    ASSERT_TRUE(cw_source_lookup("tape", &arg, &d) == NULL);
    ASSERT_TRUE(strstr(d.msg, "unknown source 'tape'") && strstr(d.msg, "replay:PATH"));
    ASSERT_TRUE(cw_source_lookup(NULL, &arg, &d) == NULL);
    /* The live source is the platform's: perf on Linux; on Windows etw, none
     * until it is built. */
    if (strcmp(cw_plat_name(), "linux") == 0)
        ASSERT_STR_EQ(cw_source_live(), "perf");
    else
        ASSERT_TRUE(!cw_source_live() || strcmp(cw_source_live(), "etw") == 0);

    /* The options only one source takes, refused by the session for the others. */
    const cw_source_ops_t *etl = cw_source_find("etl");
    ASSERT_TRUE(etl != NULL);
    cw_source_opts_t po = {.arg = "", .speed = 2};
    ASSERT_OK(cw_source_check_opts(&cw_source_replay, &po, &d));
    ASSERT_EQ(cw_source_check_opts(etl, &po, &d), CW_EUSAGE);
    ASSERT_TRUE(strstr(d.msg, "--rebase-now and --speed are for replay sources only") != NULL);
    po = (cw_source_opts_t){.arg = "", .rebase_now = true};
    ASSERT_EQ(cw_source_check_opts(etl, &po, &d), CW_EUSAGE);
    po = (cw_source_opts_t){.arg = "", .images = "/x"};
    ASSERT_OK(cw_source_check_opts(etl, &po, &d));
    ASSERT_EQ(cw_source_check_opts(&cw_source_replay, &po, &d), CW_EUSAGE);
    ASSERT_TRUE(strstr(d.msg, "--images is for --source etl:FILE") != NULL);
    cw_source_session_t ss = {0};
    po = (cw_source_opts_t){.arg = "x.etl", .speed = 1};
    ASSERT_EQ(cw_source_session_open(&ss, etl, &po, &d), CW_EUSAGE);
    ASSERT_TRUE(ss.impl == NULL);
}

int main(void)
{
    test_fast();
    test_rebase();
    test_paced();
    test_stop();
    test_wall_steps();
    test_errors();
    TEST_DONE();
}
