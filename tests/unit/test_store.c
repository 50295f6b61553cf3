/* test_store.c - the SQLite store: opening, refusing foreign files,
 * migrations, continuing a database, and window figures.
 *
 * Figures are checked two ways: a handcrafted scenario whose numbers are
 * written out below, and a generated history (several processes and
 * stacks, rundown, partial releases, gaps of empty buckets over five
 * hours) checked against a brute-force oracle over the individual pieces,
 * on raw, minute and hour windows answered by tier 0, 1 and 2, with and
 * without retention and with a size cap. Retention prunes the instances
 * that ended before every tier's horizon (test_prune). */
#include <sqlite3.h>
#include <stdbool.h>
#include <stdint.h>

#include "commitwatch/memstat.h"
#include "commitwatch/batch.h"
#include "commitwatch/event.h"
#include "commitwatch/platform.h"
#include "commitwatch/query.h"
#include "commitwatch/store.h"
#include "store/store_internal.h"
#include "test.h"
#include "test_port.h"

#define S INT64_C(1000000000)
#define MIN (60 * S)
#define HOUR (3600 * S)

static char dir[256];

static const char *tpath(const char *name)
{
    static char buf[4][512];
    static int i;
    i = (i + 1) % 4;
    snprintf(buf[i], sizeof buf[i], "%s/%s", dir, name);
    return buf[i];
}

static void rm_db(const char *p)
{
    char b[600];
    remove(p);
    snprintf(b, sizeof b, "%s-wal", p);
    remove(b);
    snprintf(b, sizeof b, "%s-shm", p);
    remove(b);
}

static char *slurp(const char *p, size_t *n)
{
    FILE *f = fopen(p, "rb");
    ASSERT_TRUE(f != NULL);
    fseek(f, 0, SEEK_END);
    *n = (size_t)ftell(f);
    fseek(f, 0, SEEK_SET);
    char *b = malloc(*n + 1);
    ASSERT_TRUE(fread(b, 1, *n, f) == *n);
    fclose(f);
    return b;
}

static int64_t sql_int(cw_store_t *s, const char *sql)
{
    sqlite3_stmt *st;
    ASSERT_EQ(sqlite3_prepare_v2(s->db, sql, -1, &st, NULL), SQLITE_OK);
    ASSERT_EQ(sqlite3_step(st), SQLITE_ROW);
    int64_t v = sqlite3_column_int64(st, 0);
    sqlite3_finalize(st);
    return v;
}

static void integrity_ok(cw_store_t *s)
{
    sqlite3_stmt *st;
    ASSERT_EQ(sqlite3_prepare_v2(s->db, "PRAGMA integrity_check", -1, &st, NULL), SQLITE_OK);
    ASSERT_EQ(sqlite3_step(st), SQLITE_ROW);
    ASSERT_STR_EQ((const char *)sqlite3_column_text(st, 0), "ok");
    sqlite3_finalize(st);
}

static cw_proc_report_t *find_proc(cw_report_t *r, uint32_t id)
{
    for (uint32_t i = 0; i < r->nprocs; i++)
        if (r->procs[i].id == id) return &r->procs[i];
    return NULL;
}

static cw_stack_report_t *find_stack(cw_proc_report_t *p, uint32_t id)
{
    for (uint32_t i = 0; i < p->nstacks; i++)
        if (p->stacks[i].stack_id == id) return &p->stacks[i];
    return NULL;
}

static void dictionary(cw_batch_t *b)
{
    static const uint32_t s1[] = {1, 2}, s2[] = {1, 3};
    ASSERT_OK(cw_batch_add_frame(b, 1, "app!main"));
    ASSERT_OK(cw_batch_add_frame(b, 2, "kernelbase!VirtualAlloc"));
    ASSERT_OK(cw_batch_add_frame(b, 3, "ntdll!RtlAllocateHeap"));
    ASSERT_OK(cw_batch_add_stack(b, 0, NULL, 0, "Other"));
    ASSERT_OK(cw_batch_add_stack(b, 1, s1, 2, "VirtualAlloc"));
    ASSERT_OK(cw_batch_add_stack(b, 2, s2, 2, "Windows Heap"));
    ASSERT_OK(cw_batch_add_stack(b, 3, s1, 1, "Other"));
}

/* ---- opening and refusing -------------------------------------------------- */

static void test_open_refuse(void)
{
    cw_store_t *s = NULL;
    cw_diag_t d = {{0}};
    size_t n1, n2;

    /* Not SQLite at all. */
    const char *p = tpath("notdb.txt");
    FILE *f = fopen(p, "wb");
    for (int i = 0; i < 200; i++)
        fputs("this is a text file, not a database\n", f);
    fclose(f);
    char *before = slurp(p, &n1);
    ASSERT_EQ(cw_store_open(p, NULL, &s, &d), CW_ENOTDB);
    ASSERT_TRUE(strstr(d.msg, "not a commitwatch database") != NULL);
    char *after = slurp(p, &n2);
    ASSERT_EQ(n1, n2);
    ASSERT_TRUE(memcmp(before, after, n1) == 0);
    free(before);
    free(after);

    /* A foreign SQLite database (application_id 0, with a table), in WAL
     * mode so that a careless open would checkpoint into it. */
    p = tpath("foreign.db");
    rm_db(p);
    sqlite3 *db;
    ASSERT_EQ(sqlite3_open(p, &db), SQLITE_OK);
    ASSERT_EQ(sqlite3_exec(db, "CREATE TABLE t(x); INSERT INTO t VALUES (1),(2);", 0, 0, 0),
              SQLITE_OK);
    sqlite3_close(db);
    before = slurp(p, &n1);
    ASSERT_EQ(cw_store_open(p, NULL, &s, &d), CW_ENOTDB);
    ASSERT_EQ(cw_store_open_readonly(p, &s, &d), CW_ENOTDB);
    after = slurp(p, &n2);
    ASSERT_EQ(n1, n2);
    ASSERT_TRUE(memcmp(before, after, n1) == 0);
    free(before);
    free(after);

    /* Another application's id. */
    p = tpath("otherapp.db");
    rm_db(p);
    ASSERT_EQ(sqlite3_open(p, &db), SQLITE_OK);
    ASSERT_EQ(sqlite3_exec(db, "PRAGMA application_id = 1234; CREATE TABLE t(x);", 0, 0, 0),
              SQLITE_OK);
    sqlite3_close(db);
    before = slurp(p, &n1);
    ASSERT_EQ(cw_store_open(p, NULL, &s, &d), CW_ENOTDB);
    ASSERT_TRUE(strstr(d.msg, "another application") != NULL);
    after = slurp(p, &n2);
    ASSERT_TRUE(n1 == n2 && memcmp(before, after, n1) == 0);
    free(before);
    free(after);

    /* An empty file is taken over; the pragmas of creation hold. */
    p = tpath("empty.db");
    rm_db(p);
    fclose(fopen(p, "wb"));
    ASSERT_OK(cw_store_open(p, NULL, &s, &d));
    ASSERT_EQ(sql_int(s, "PRAGMA application_id"), CW__STORE_APP_ID);
    ASSERT_EQ(sql_int(s, "PRAGMA user_version"), cw_store_schema_version());
    ASSERT_EQ(sql_int(s, "PRAGMA auto_vacuum"), 2);
    ASSERT_EQ(sql_int(s, "PRAGMA synchronous"), 1);
    char *jm = NULL;
    {
        sqlite3_stmt *st;
        sqlite3_prepare_v2(s->db, "PRAGMA journal_mode", -1, &st, NULL);
        ASSERT_EQ(sqlite3_step(st), SQLITE_ROW);
        jm = strdup((const char *)sqlite3_column_text(st, 0));
        sqlite3_finalize(st);
    }
    ASSERT_STR_EQ(jm, "wal");
    free(jm);
    integrity_ok(s);
    cw_store_close(s);

    /* A database of ours cut short (a copy that stopped half-way) is
     * refused as truncated, before SQLite may write into it; cut to a
     * whole number of pages or not. */
    p = tpath("whole.db");
    rm_db(p);
    ASSERT_OK(cw_store_open(p, NULL, &s, &d));
    ASSERT_EQ(sqlite3_exec(s->db, "CREATE TABLE pad(x); WITH RECURSIVE c(i) AS (SELECT 1 UNION "
                                  "ALL SELECT i + 1 FROM c WHERE i < 2000) INSERT INTO pad "
                                  "SELECT randomblob(200) FROM c",
                           0, 0, 0),
              SQLITE_OK);
    cw_store_close(s);
    char *whole = slurp(p, &n1);
    ASSERT_TRUE(n1 > 16 * 4096);
    for (int cut = 0; cut < 2; cut++) {
        p = tpath(cut ? "trunc_odd.db" : "trunc_pages.db");
        rm_db(p);
        size_t keep = cut ? n1 / 2 + 100 : (n1 / 2) & ~(size_t)4095;
        f = fopen(p, "wb");
        ASSERT_EQ(fwrite(whole, 1, keep, f), keep);
        fclose(f);
        ASSERT_EQ(cw_store_open(p, NULL, &s, &d), CW_ENOTDB);
        ASSERT_TRUE(strstr(d.msg, "truncated") != NULL);
        after = slurp(p, &n2);
        ASSERT_TRUE(n2 == keep && memcmp(whole, after, keep) == 0);
        free(after);
    }
    free(whole);

    /* Read-only open of a missing file says how to create it. */
    ASSERT_EQ(cw_store_open_readonly(tpath("missing.db"), &s, &d), CW_ENOENT);
}

static void test_versions(void)
{
    cw_store_t *s = NULL;
    cw_diag_t d = {{0}};
    const char *p = tpath("newer.db");
    rm_db(p);
    ASSERT_OK(cw_store_open(p, NULL, &s, &d));
    ASSERT_EQ(sqlite3_exec(s->db, "PRAGMA user_version = 99", 0, 0, 0), SQLITE_OK);
    cw_store_close(s);
    size_t n1, n2;
    char *before = slurp(p, &n1);
    ASSERT_EQ(cw_store_open(p, NULL, &s, &d), CW_ENEWER);
    ASSERT_TRUE(strstr(d.msg, "upgrade commitwatch") != NULL);
    ASSERT_EQ(cw_store_open_readonly(p, &s, &d), CW_ENEWER);
    char *after = slurp(p, &n2);
    ASSERT_TRUE(n1 == n2 && memcmp(before, after, n1) == 0);
    free(before);
    free(after);

    /* An older database is upgraded on open, its rows kept. */
    p = tpath("older.db");
    rm_db(p);
    ASSERT_OK(cw__store_create_at_version(p, 1, &d));
    sqlite3 *db;
    ASSERT_EQ(sqlite3_open(p, &db), SQLITE_OK);
    ASSERT_EQ(sqlite3_exec(db, "INSERT INTO meta VALUES ('k', 'v1')", 0, 0, 0), SQLITE_OK);
    sqlite3_close(db);
    ASSERT_EQ(cw_store_open_readonly(p, &s, &d), CW_EDB);
    ASSERT_TRUE(strstr(d.msg, "run the commitwatch service") != NULL);
    ASSERT_OK(cw_store_open(p, NULL, &s, &d));
    ASSERT_EQ(sql_int(s, "PRAGMA user_version"), cw_store_schema_version());
    ASSERT_EQ(sql_int(s, "SELECT count(*) FROM sqlite_schema WHERE name = 'losses'"), 1);
    char *v = NULL;
    ASSERT_OK(cw_store_meta_get(s, "k", &v, &d));
    ASSERT_STR_EQ(v, "v1");
    free(v);
    ASSERT_OK(cw_store_meta_set(s, "k", "v2", &d));
    ASSERT_OK(cw_store_meta_get(s, "k", &v, &d));
    ASSERT_STR_EQ(v, "v2");
    free(v);
    ASSERT_OK(cw_store_meta_get(s, "absent", &v, &d));
    ASSERT_TRUE(v == NULL);
    integrity_ok(s);
    cw_store_close(s);
}

#define FIG(f, t, b, c)                                                                            \
    do {                                                                                           \
        ASSERT_U64_EQ((f).types[t].bytes, b);                                                      \
        ASSERT_U64_EQ((f).types[t].count, c);                                                      \
    } while (0)

/* ---- the end of tracking (schema/003, docs/DESIGN.md "End of a run") ---------- */

static void proc_is(cw_store_t *s, uint32_t id, int64_t exit_ns, int64_t ended_ns)
{
    cw_proc_info_t pi;
    cw_diag_t d = {{0}};
    ASSERT_OK(cw_store_proc_get(s, id, &pi, &d));
    ASSERT_EQ(pi.exit_ns, exit_ns);
    ASSERT_EQ(pi.tracking_ended_ns, ended_ns);
    cw_proc_info_clear(&pi);
}

static const cw_proc_report_t *rproc(const cw_report_t *r, uint32_t id)
{
    for (uint32_t i = 0; i < r->nprocs; i++)
        if (r->procs[i].id == id) return &r->procs[i];
    return NULL;
}

/* A database of version 2 stored the end of tracking as an exit: the
 * migration tells the last run's apart (exit at the start of the last
 * stored bucket), and leaves real exits alone. */
static void test_migrate_ended(void)
{
    cw_store_t *s = NULL;
    cw_diag_t d = {{0}};
    const char *p = tpath("v2.db");
    rm_db(p);
    ASSERT_OK(cw__store_create_at_version(p, 2, &d));
    sqlite3 *db;
    ASSERT_EQ(sqlite3_open(p, &db), SQLITE_OK);
    ASSERT_EQ(sqlite3_exec(db,
                           "UPDATE tiers SET start_ns = 10000000000, end_ns = 33000000000 "
                           "WHERE tier = 0;"
                           "INSERT INTO processes VALUES (1, 100, 5000000000, 32000000000, "
                           "'alive.exe', NULL), (2, 200, 5000000000, 20000000000, 'gone.exe', "
                           "NULL), (3, 300, 5000000000, NULL, 'crashed.exe', NULL)",
                           0, 0, 0),
              SQLITE_OK);
    sqlite3_close(db);
    ASSERT_OK(cw_store_open(p, NULL, &s, &d));
    ASSERT_EQ(sql_int(s, "PRAGMA user_version"), cw_store_schema_version());
    proc_is(s, 1, CW_TS_NEVER, 32 * S); /* ended with the last run: alive then */
    proc_is(s, 2, 20 * S, CW_TS_NEVER); /* a real exit */
    proc_is(s, 3, CW_TS_NEVER, CW_TS_NEVER);
    int64_t end;
    bool ended;
    ASSERT_OK(cw_store_data_end(s, &end, &ended, &d));
    ASSERT_EQ(end, 32 * S);
    ASSERT_TRUE(ended);
    integrity_ok(s);
    cw_store_close(s);
}

/* Process 1 commits 8192 at 10 s and is alive when tracking ends (13 s);
 * process 2 commits 4096 at 11 s and exits at 12 s. Then a later run
 * (a restart) starts process 3 (same pid as 1) at 20 s with a rundown of
 * the same 8192 bytes. */
static void write_ended(cw_store_t *s, bool restart)
{
    cw_diag_t d;
    cw_batch_t *b;
    if (!restart) {
        ASSERT_OK(cw_batch_create(10 * S, S, &b));
        dictionary(b);
        ASSERT_OK(cw_batch_add_proc(b, 1, 100, 10 * S, CW_TS_NEVER, "app.exe", NULL));
        ASSERT_OK(cw_batch_add_commit(b, &(cw_row_commit_t){1, 1, 10 * S, 8192, 1}));
        ASSERT_OK(cw_batch_add_activity(b, &(cw_row_activity_t){1, 2, 8192, 8192, 10 * S}));
        ASSERT_OK(cw_store_write(s, b, &d));
        cw_batch_free(b);
        ASSERT_OK(cw_batch_create(11 * S, S, &b));
        ASSERT_OK(cw_batch_add_proc(b, 2, 200, 11 * S, CW_TS_NEVER, "tool.exe", NULL));
        ASSERT_OK(cw_batch_add_commit(b, &(cw_row_commit_t){2, 2, 11 * S, 4096, 1}));
        ASSERT_OK(cw_batch_add_activity(b, &(cw_row_activity_t){2, 2, 4096, 4096, 11 * S}));
        ASSERT_OK(cw_store_write(s, b, &d));
        cw_batch_free(b);
        ASSERT_OK(cw_batch_create(12 * S, S, &b));
        ASSERT_OK(cw_batch_add_release(b, &(cw_row_release_t){2, 2, 11 * S, 4096, 1, 1}));
        ASSERT_OK(cw_batch_add_activity(b, &(cw_row_activity_t){2, 1, -4096, 0, 12 * S}));
        ASSERT_OK(cw_batch_add_proc(b, 2, 200, 11 * S, 12 * S, "tool.exe", NULL));
        ASSERT_OK(cw_store_write(s, b, &d));
        cw_batch_free(b);
        /* The end of tracking: the bucket after the last event. */
        ASSERT_OK(cw_batch_create(13 * S, S, &b));
        ASSERT_OK(cw_batch_add_release(b, &(cw_row_release_t){1, 1, 10 * S, 8192, 1, 1}));
        ASSERT_OK(cw_batch_add_activity(b, &(cw_row_activity_t){1, 1, -8192, 0, 13 * S}));
        ASSERT_OK(cw_batch_add_proc(b, 1, 100, 10 * S, 13 * S, "app.exe", NULL));
        b->procs.v[0].tracking_ended = true;
        ASSERT_OK(cw_store_write(s, b, &d));
        cw_batch_free(b);
        return;
    }
    ASSERT_OK(cw_batch_create(20 * S, S, &b));
    ASSERT_OK(cw_batch_add_proc(b, 3, 100, 20 * S, CW_TS_NEVER, "app.exe", NULL));
    ASSERT_OK(cw_batch_add_commit(b, &(cw_row_commit_t){3, 3, CW_TS_BEFORE, 8192, 1}));
    ASSERT_OK(cw_batch_add_activity(b, &(cw_row_activity_t){3, 2, 0, 0, 20 * S}));
    ASSERT_OK(cw_store_write(s, b, &d));
    cw_batch_free(b);
}

static void test_tracking_ended(void)
{
    cw_store_t *s = NULL;
    cw_report_t *r;
    cw_series_t *sr;
    cw_diag_t d = {{0}};
    const char *p = tpath("ended.db");
    int64_t end, span_end;
    bool ended;
    rm_db(p);
    ASSERT_OK(cw_store_open(p, NULL, &s, &d));
    write_ended(s, false);
    /* Stored apart from a real exit; the data ends where tracking ended. */
    proc_is(s, 1, CW_TS_NEVER, 13 * S);
    proc_is(s, 2, 12 * S, CW_TS_NEVER);
    ASSERT_OK(cw_store_data_end(s, &end, &ended, &d));
    ASSERT_OK(cw_store_data_span(s, NULL, &span_end, &d));
    ASSERT_EQ(end, 13 * S);
    ASSERT_TRUE(ended);
    ASSERT_EQ(span_end, 14 * S); /* the bucket of the end is stored */

    /* The whole database: up to the end of the data, process 1 alive
     * there with its 8192 bytes. */
    ASSERT_OK(cw_store_report(s, INT64_MIN, INT64_MAX, false, &r, &d));
    ASSERT_EQ(r->to_ns, 13 * S);
    ASSERT_TRUE(r->note == NULL);
    const cw_proc_report_t *p1 = rproc(r, 1), *p2 = rproc(r, 2);
    ASSERT_TRUE(p1 && p2);
    ASSERT_U64_EQ(p1->outstanding_end, 8192);
    ASSERT_EQ(cw_figs_impacting(&p1->figs), 8192);
    ASSERT_EQ(p1->exit_ns, CW_TS_NEVER);
    ASSERT_EQ(p1->tracking_ended_ns, 13 * S);
    FIG(p1->figs, CW_AIFO, 8192, 1);
    ASSERT_EQ(p2->exit_ns, 12 * S);
    ASSERT_EQ(p2->tracking_ended_ns, CW_TS_NEVER);
    cw_report_free(r);
    /* A window past it: clipped to it, with a note; the same figures. */
    ASSERT_OK(cw_store_report(s, 10 * S, 60 * S, false, &r, &d));
    ASSERT_EQ(r->to_ns, 13 * S);
    ASSERT_TRUE(r->note && strstr(r->note, "tracking ended") != NULL);
    ASSERT_U64_EQ(rproc(r, 1)->outstanding_end, 8192);
    FIG(rproc(r, 1)->figs, CW_AIFI, 0, 0);
    cw_report_free(r);
    /* Wholly after it: nothing is known. */
    ASSERT_OK(cw_store_report(s, 13 * S, 60 * S, false, &r, &d));
    ASSERT_EQ(r->nprocs, 0);
    ASSERT_TRUE(r->note && strstr(r->note, "tracking ended") != NULL);
    cw_report_free(r);

    /* Series: clipped to the end of the data; a step holding it shows the
     * state there; none after it. */
    cw_series_query_t q = {1, 10 * S, 60 * S, S};
    ASSERT_OK(cw_store_series(s, &q, &sr, &d));
    ASSERT_EQ(sr->npoints, 3);
    ASSERT_EQ(sr->clipped_at, 13 * S);
    ASSERT_EQ(sr->outstanding_total[2], 8192);
    cw_series_free(sr);
    q = (cw_series_query_t){0, 10 * S, 60 * S, 2 * S};
    ASSERT_OK(cw_store_series(s, &q, &sr, &d));
    ASSERT_EQ(sr->npoints, 2); /* [10, 12), [12, 14): the second up to 13 s */
    ASSERT_EQ(sr->outstanding_total[1], 8192);
    ASSERT_EQ(sr->decommitted[1], 4096);
    cw_series_free(sr);
    q = (cw_series_query_t){0, 13 * S, 60 * S, S};
    ASSERT_OK(cw_store_series(s, &q, &sr, &d));
    ASSERT_EQ(sr->npoints, 0);
    ASSERT_EQ(sr->clipped_at, 13 * S);
    cw_series_free(sr);
    q = (cw_series_query_t){0, 10 * S, 12 * S, S}; /* inside the data: not clipped */
    ASSERT_OK(cw_store_series(s, &q, &sr, &d));
    ASSERT_EQ(sr->clipped_at, INT64_MIN);
    cw_series_free(sr);

    /* A restart: a new instance from the rundown. The first run's
     * instance keeps "tracking ended" (not an exit), and its memory leaves
     * the figures where tracking ended: nothing is counted twice. */
    write_ended(s, true);
    ASSERT_OK(cw_store_data_end(s, &end, &ended, &d));
    ASSERT_EQ(end, 21 * S);
    ASSERT_TRUE(!ended); /* the second run is still going */
    proc_is(s, 1, CW_TS_NEVER, 13 * S);
    ASSERT_OK(cw_store_report(s, 10 * S, 21 * S, false, &r, &d));
    ASSERT_U64_EQ(rproc(r, 1)->outstanding_end, 0);
    ASSERT_EQ(rproc(r, 1)->tracking_ended_ns, 13 * S);
    ASSERT_U64_EQ(rproc(r, 3)->outstanding_end, 8192);
    cw_report_free(r);
    q = (cw_series_query_t){0, 10 * S, 21 * S, S};
    ASSERT_OK(cw_store_series(s, &q, &sr, &d));
    ASSERT_EQ(sr->npoints, 11);
    ASSERT_EQ(sr->outstanding_start, 0); /* the restart's rundown is not "before" 10 s */
    static const int64_t want[11] = {8192, 12288, 8192, 0, 0, 0, 0, 0, 0, 0, 8192};
    for (int i = 0; i < 11; i++) {
        ASSERT_EQ(sr->outstanding_total[i], want[i]);
        ASSERT_TRUE(sr->peak[i] >= want[i] && sr->peak[i] <= 12288);
    }
    ASSERT_EQ(sr->peak[10], 8192);
    cw_series_free(sr);
    q = (cw_series_query_t){3, 15 * S, 21 * S, 3 * S}; /* the new instance alone */
    ASSERT_OK(cw_store_series(s, &q, &sr, &d));
    ASSERT_EQ(sr->outstanding_start, 0);
    ASSERT_EQ(sr->npoints, 2);
    ASSERT_EQ(sr->outstanding_total[0], 0);
    ASSERT_EQ(sr->outstanding_total[1], 8192);
    ASSERT_EQ(sr->peak[1], 8192);
    cw_series_free(sr);
    integrity_ok(s);
    cw_store_close(s);
}

/* ---- the handcrafted scenario ----------------------------------------------- */

/* Process 1, stack 1 (ts in seconds):
 *   rundown R 8192 (BEFORE)
 *   10.000000000 commit A 16384      10.000000005 commit B 4096
 *   11 release 4096 of A             12 release B (all)
 *   13 release R (all)               14 commit C 4096
 * Process 2, stack 2: 10 commit 4096, 11 release it (all). */
static void write_hand(cw_store_t *s)
{
    cw_diag_t d;
    cw_batch_t *b;
    ASSERT_OK(cw_batch_create(10 * S, S, &b));
    dictionary(b);
    ASSERT_OK(cw_batch_add_proc(b, 1, 100, 5 * S, CW_TS_NEVER, "app.exe", "app.exe --run"));
    ASSERT_OK(cw_batch_add_proc(b, 2, 200, 10 * S, CW_TS_NEVER, "tool.exe", NULL));
    ASSERT_OK(cw_batch_add_commit(b, &(cw_row_commit_t){1, 1, CW_TS_BEFORE, 8192, 1}));
    ASSERT_OK(cw_batch_add_commit(b, &(cw_row_commit_t){1, 1, 10 * S, 20480, 2}));
    ASSERT_OK(cw_batch_add_commit(b, &(cw_row_commit_t){2, 2, 10 * S, 4096, 1}));
    ASSERT_OK(cw_batch_add_activity(b, &(cw_row_activity_t){1, 2, 20480, 20480, 10 * S + 5}));
    ASSERT_OK(cw_batch_add_activity(b, &(cw_row_activity_t){2, 2, 4096, 4096, 10 * S}));
    ASSERT_OK(cw_store_write(s, b, &d));
    cw_batch_free(b);

    ASSERT_OK(cw_batch_create(11 * S, S, &b));
    ASSERT_OK(cw_batch_add_release(b, &(cw_row_release_t){1, 1, 10 * S, 4096, 1, 0}));
    ASSERT_OK(cw_batch_add_release(b, &(cw_row_release_t){2, 2, 10 * S, 4096, 1, 1}));
    ASSERT_OK(cw_batch_add_activity(b, &(cw_row_activity_t){1, 1, -4096, 0, 11 * S}));
    ASSERT_OK(cw_batch_add_activity(b, &(cw_row_activity_t){2, 2, -4096, 0, 11 * S}));
    ASSERT_OK(cw_batch_add_proc(b, 2, 200, 10 * S, 11 * S, "tool.exe", NULL));
    ASSERT_OK(cw_store_write(s, b, &d));
    cw_batch_free(b);

    ASSERT_OK(cw_batch_create(12 * S, S, &b));
    ASSERT_OK(cw_batch_add_release(b, &(cw_row_release_t){1, 1, 10 * S, 4096, 1, 1}));
    ASSERT_OK(cw_batch_add_activity(b, &(cw_row_activity_t){1, 1, -4096, 0, 12 * S}));
    ASSERT_OK(cw_store_write(s, b, &d));
    cw_batch_free(b);

    ASSERT_OK(cw_batch_create(13 * S, S, &b));
    ASSERT_OK(cw_batch_add_release(b, &(cw_row_release_t){1, 1, CW_TS_BEFORE, 8192, 1, 1}));
    ASSERT_OK(cw_batch_add_activity(b, &(cw_row_activity_t){1, 1, -8192, 0, 13 * S}));
    ASSERT_OK(cw_store_write(s, b, &d));
    cw_batch_free(b);

    ASSERT_OK(cw_batch_create(14 * S, S, &b));
    ASSERT_OK(cw_batch_add_commit(b, &(cw_row_commit_t){1, 1, 14 * S, 4096, 1}));
    ASSERT_OK(cw_batch_add_activity(b, &(cw_row_activity_t){1, 1, 4096, 4096, 14 * S}));
    b->events_total = 9;
    b->events_lost = 2;
    b->drift_bytes = -4096;
    ASSERT_OK(cw_store_write(s, b, &d));
    cw_batch_free(b);
}

static void test_hand(void)
{
    cw_store_t *s = NULL, *ro = NULL;
    cw_report_t *r;
    cw_diag_t d = {{0}};
    const char *p = tpath("hand.db");
    rm_db(p);
    ASSERT_OK(cw_store_open(p, NULL, &s, &d));
    write_hand(s);
    ASSERT_OK(cw_store_open_readonly(p, &ro, &d));

    /* [10, 13) from a read-only handle. */
    ASSERT_OK(cw_store_report(ro, 10 * S, 13 * S, true, &r, &d));
    ASSERT_TRUE(r->note == NULL);
    ASSERT_EQ(r->from_ns, 10 * S);
    ASSERT_EQ(r->to_ns, 13 * S);
    ASSERT_EQ(r->nprocs, 2);
    cw_proc_report_t *p1 = find_proc(r, 1);
    ASSERT_TRUE(p1 != NULL);
    ASSERT_STR_EQ(p1->name, "app.exe");
    ASSERT_STR_EQ(p1->cmdline, "app.exe --run");
    ASSERT_EQ(p1->pid, 100);
    ASSERT_EQ(p1->exit_ns, CW_TS_NEVER);
    ASSERT_U64_EQ(p1->figs.size_bytes, 20480);
    ASSERT_U64_EQ(p1->figs.commit_count, 2);
    FIG(p1->figs, CW_AIFI, 8192, 2);
    FIG(p1->figs, CW_AIFO, 12288, 1);
    FIG(p1->figs, CW_AOFI, 0, 0);
    FIG(p1->figs, CW_AOFO, 8192, 1);
    ASSERT_U64_EQ(p1->peak_bytes, 28672);
    ASSERT_EQ(p1->peak_ns, 10 * S + 5);
    ASSERT_U64_EQ(p1->outstanding_end, 20480);
    ASSERT_U64_EQ(p1->events, 4);
    ASSERT_EQ(p1->nstacks, 1);
    ASSERT_STR_EQ(p1->stacks[0].tag, "VirtualAlloc");
    ASSERT_EQ(p1->stacks[0].nframes, 2);
    ASSERT_STR_EQ(p1->stacks[0].frames[0], "app!main");
    ASSERT_STR_EQ(p1->stacks[0].frames[1], "kernelbase!VirtualAlloc");
    cw_proc_report_t *p2 = find_proc(r, 2);
    ASSERT_TRUE(p2 != NULL);
    ASSERT_TRUE(p2->cmdline == NULL);
    ASSERT_EQ(p2->exit_ns, 11 * S);
    FIG(p2->figs, CW_AIFI, 4096, 1);
    ASSERT_U64_EQ(p2->peak_bytes, 4096);
    ASSERT_EQ(p2->peak_ns, 10 * S);
    ASSERT_U64_EQ(p2->outstanding_end, 0);
    cw_report_free(r);

    /* [13, 15): R goes (AOFI), A stays (AOFO), C is new (AIFO); process 2
     * has exited and is not reported. */
    ASSERT_OK(cw_store_report(s, 13 * S, 15 * S, false, &r, &d));
    ASSERT_EQ(r->nprocs, 1);
    p1 = &r->procs[0];
    ASSERT_U64_EQ(p1->figs.size_bytes, 4096);
    ASSERT_U64_EQ(p1->figs.commit_count, 1);
    FIG(p1->figs, CW_AIFI, 0, 0);
    FIG(p1->figs, CW_AIFO, 4096, 1);
    FIG(p1->figs, CW_AOFI, 8192, 1);
    FIG(p1->figs, CW_AOFO, 12288, 1);
    ASSERT_EQ(cw_figs_impacting(&p1->figs), -4096);
    ASSERT_U64_EQ(p1->peak_bytes, 20480);
    ASSERT_EQ(p1->peak_ns, 13 * S);
    ASSERT_U64_EQ(p1->outstanding_end, 16384);
    ASSERT_EQ(p1->stacks[0].nframes, 0);
    ASSERT_STR_EQ(p1->stacks[0].tag, "VirtualAlloc");
    cw_report_free(r);

    /* Whole history (sentinels): [10, 15). */
    ASSERT_OK(cw_store_report(s, INT64_MIN, INT64_MAX, false, &r, &d));
    ASSERT_EQ(r->from_ns, 10 * S);
    ASSERT_EQ(r->to_ns, 15 * S);
    p1 = find_proc(r, 1);
    FIG(p1->figs, CW_AIFO, 16384, 2);
    FIG(p1->figs, CW_AIFI, 8192, 2);
    FIG(p1->figs, CW_AOFI, 8192, 1);
    FIG(p1->figs, CW_AOFO, 0, 0);
    cw_report_free(r);

    /* Not aligned: widened to whole seconds, with a note. */
    ASSERT_OK(cw_store_report(s, 10 * S + 7, 12 * S + 1, false, &r, &d));
    ASSERT_EQ(r->from_ns, 10 * S);
    ASSERT_EQ(r->to_ns, 13 * S);
    ASSERT_TRUE(r->note != NULL && strstr(r->note, "widened") != NULL);
    cw_report_free(r);

    /* A window past the end needs no rows beyond it: exact, as asked. */
    ASSERT_OK(cw_store_report(s, 14 * S, 100 * S + 3, false, &r, &d));
    ASSERT_TRUE(r->note == NULL);
    ASSERT_EQ(r->to_ns, 100 * S + 3);
    ASSERT_U64_EQ(find_proc(r, 1)->outstanding_end, 16384);
    cw_report_free(r);

    ASSERT_EQ(cw_store_report(s, 12 * S, 12 * S, false, &r, &d), CW_EINVAL);

    /* The source counters were recorded; out-of-order batches refused. */
    ASSERT_EQ(sql_int(s, "SELECT lost_events FROM losses"), 2);
    ASSERT_EQ(sql_int(s, "SELECT drift_bytes FROM losses"), -4096);
    cw_batch_t *b;
    ASSERT_OK(cw_batch_create(12 * S, S, &b));
    ASSERT_EQ(cw_store_write(s, b, &d), CW_EINVAL);
    ASSERT_TRUE(strstr(d.msg, "time order") != NULL);
    cw_batch_free(b);
    /* An activity row counts at least one event (the keys cache tells a
     * window's activity by its events): one with none is refused, and
     * nothing of its batch is stored. */
    int64_t cells = sql_int(s, "SELECT count(*) FROM cells");
    ASSERT_OK(cw_batch_create(15 * S, S, &b));
    ASSERT_OK(cw_batch_add_commit(b, &(cw_row_commit_t){1, 0, 15 * S, 4096, 1}));
    ASSERT_OK(cw_batch_add_activity(b, &(cw_row_activity_t){1, 0, 4096, 4096, 15 * S}));
    ASSERT_EQ(cw_store_write(s, b, &d), CW_EINVAL);
    ASSERT_TRUE(strstr(d.msg, "with no event") != NULL);
    ASSERT_EQ(sql_int(s, "SELECT count(*) FROM cells"), cells);
    cw_batch_free(b);
    integrity_ok(s);
    cw_store_close(ro);
    cw_store_close(s);

    /* Reopen: continuing state. */
    cw_stacks_t *st;
    uint32_t next;
    int64_t end;
    ASSERT_OK(cw_store_open(p, NULL, &s, &d));
    ASSERT_OK(cw_stacks_create(&st));
    ASSERT_OK(cw_store_load_state(s, st, &next, &end, &d));
    ASSERT_EQ(next, 3);
    ASSERT_EQ(end, 15 * S);
    ASSERT_EQ(cw_stacks_count(st), 4);
    ASSERT_EQ(cw_stacks_frame_count(st), 4);
    ASSERT_STR_EQ(cw_stacks_frame_text(st, 3), "ntdll!RtlAllocateHeap");
    uint32_t n, id;
    const uint32_t *fr = cw_stacks_frames(st, 2, &n);
    ASSERT_EQ(n, 2);
    ASSERT_EQ(fr[0], 1);
    ASSERT_EQ(fr[1], 3);
    static const uint32_t s3[] = {1};
    ASSERT_OK(cw_stacks_intern(st, s3, 1, &id));
    ASSERT_EQ(id, 3);
    cw_stacks_destroy(st);
    /* An empty database continues from nothing. */
    cw_store_close(s);
    p = tpath("fresh.db");
    rm_db(p);
    ASSERT_OK(cw_store_open(p, NULL, &s, &d));
    ASSERT_OK(cw_stacks_create(&st));
    ASSERT_OK(cw_store_load_state(s, st, &next, &end, &d));
    ASSERT_EQ(next, 1);
    ASSERT_EQ(end, INT64_MIN);
    ASSERT_OK(cw_store_report(s, INT64_MIN, INT64_MAX, false, &r, &d));
    ASSERT_EQ(r->nprocs, 0);
    cw_report_free(r);
    cw_stacks_destroy(st);
    cw_store_close(s);
}

/* ---- the generated history and its oracle ----------------------------------- */

typedef struct gcommit {
    uint32_t proc, stack;
    int64_t ts; /* CW_TS_BEFORE for rundown */
    uint64_t bytes, remaining;
} gcommit_t;

typedef struct gev {
    int64_t ts;
    uint32_t proc, commit;
    int64_t delta; /* +bytes for a commit, -bytes for a release */
    bool closes;
} gev_t;

#define NPROC 3
#define NSTACK 4

static gcommit_t gc[4096];
static uint32_t ngc;
static gev_t gev[8192];
static uint32_t ngev;
static uint64_t rng = 88172645463325252ull;
static int64_t gen_t0; /* hour-aligned start */

static uint64_t rnd(uint64_t n)
{
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return rng % n;
}

static void gen_event(int64_t t, bool release)
{
    uint32_t proc = 1 + (uint32_t)rnd(NPROC);
    uint32_t live[4096], nlive = 0;
    for (uint32_t i = 0; i < ngc; i++)
        if (gc[i].proc == proc && gc[i].remaining) live[nlive++] = i;
    if (nlive == 0 || (!release && rnd(100) < 55)) {
        ASSERT_TRUE(ngc < 4096 && ngev < 8192);
        gc[ngc] = (gcommit_t){proc, (uint32_t)rnd(NSTACK), t, 4096 * (1 + rnd(16)), 0};
        gc[ngc].remaining = gc[ngc].bytes;
        gev[ngev++] = (gev_t){t, proc, ngc, (int64_t)gc[ngc].bytes, false};
        ngc++;
        return;
    }
    gcommit_t *c = &gc[live[rnd(nlive)]];
    uint64_t pages = c->remaining / 4096, take = pages;
    if (pages > 1 && rnd(2)) take = 1 + rnd(pages - 1);
    c->remaining -= take * 4096;
    ASSERT_TRUE(ngev < 8192);
    gev[ngev++] = (gev_t){t, proc, (uint32_t)(c - gc), -(int64_t)(take * 4096), c->remaining == 0};
}

/* Two phases of three hours with a gap of 50 hours between them, bursts
 * of events (several at one ts now and then) separated by gaps from
 * nanoseconds to 40 minutes. */
static void generate(void)
{
    gen_t0 = INT64_C(472222) * HOUR; /* late 2023, hour-aligned */
    for (uint32_t p = 1; p <= NPROC; p++)
        for (int i = 0; i < 2; i++) {
            gc[ngc] = (gcommit_t){p, (uint32_t)rnd(NSTACK), CW_TS_BEFORE, 65536 * (1 + rnd(4)), 0};
            gc[ngc].remaining = gc[ngc].bytes;
            ngc++;
        }
    int64_t t = gen_t0 + 30 * S + 123;
    for (int phase = 0; phase < 2; phase++) {
        int64_t stop = t + 3 * HOUR;
        while (t < stop) {
            uint64_t k = rnd(100);
            t += k < 85   ? (int64_t)rnd(2 * S)
                 : k < 98 ? (int64_t)rnd(90 * S)
                          : 10 * MIN + (int64_t)rnd(30 * MIN);
            int n = 1 + (int)rnd(3);
            for (int i = 0; i < n; i++)
                gen_event(t + (rnd(3) == 0 ? 0 : (int64_t)rnd(1000)), false);
            t += 1000;
        }
        t += 50 * HOUR + 17 * S;
    }
    /* A tail in a new hour: releases of old commits in a closed minute
     * (in tier 1 but not tier 2) and in the last, open minute (tier 0
     * only). Windows of the rollup tiers must still see them. */
    int64_t last = gev[ngev - 1].ts;
    int64_t tail = last - last % HOUR + HOUR + 10 * MIN + 5 * S;
    for (int i = 0; i < 8; i++)
        gen_event(tail + (i < 4 ? 0 : 2 * MIN + 3 * S) + i, true);
}

static uint64_t bucket_of(int64_t ts)
{
    return (uint64_t)(ts - ts % S);
}

/* The history as one batch per non-empty second, plus an empty batch now
 * and then inside a gap, into out (at most cap); returns the count. */
static size_t build_generated(cw_batch_t **out, size_t cap)
{
    size_t nb = 0;
    uint32_t i = 0;
    bool first = true;
    while (i < ngev) {
        int64_t bk = (int64_t)bucket_of(gev[i].ts);
        cw_batch_t *b;
        ASSERT_OK(cw_batch_create(bk, S, &b));
        if (first) {
            dictionary(b);
            for (uint32_t p = 1; p <= NPROC; p++)
                ASSERT_OK(cw_batch_add_proc(b, p, 1000 + p, gen_t0, CW_TS_NEVER, "gen", NULL));
            for (uint32_t c = 0; c < ngc; c++)
                if (gc[c].ts == CW_TS_BEFORE)
                    ASSERT_OK(
                        cw_batch_add_commit(b, &(cw_row_commit_t){gc[c].proc, gc[c].stack,
                                                                  CW_TS_BEFORE, gc[c].bytes, 1}));
            first = false;
        }
        cw_row_activity_t act[NPROC + 1] = {{0}};
        for (; i < ngev && (int64_t)bucket_of(gev[i].ts) == bk; i++) {
            const gev_t *e = &gev[i];
            const gcommit_t *c = &gc[e->commit];
            cw_row_activity_t *a = &act[e->proc];
            if (!a->events) *a = (cw_row_activity_t){e->proc, 0, 0, 0, bk};
            a->events++;
            a->delta += e->delta;
            if (a->delta > a->relpeak) {
                a->relpeak = a->delta;
                a->relpeak_ns = e->ts;
            }
            if (e->delta > 0) {
                uint32_t j = 0;
                for (; j < b->commits.n; j++)
                    if (b->commits.v[j].proc == c->proc && b->commits.v[j].stack == c->stack) break;
                if (j == b->commits.n)
                    ASSERT_OK(
                        cw_batch_add_commit(b, &(cw_row_commit_t){c->proc, c->stack, bk, 0, 0}));
                b->commits.v[j].bytes += (uint64_t)e->delta;
                b->commits.v[j].events++;
            } else {
                int64_t a_b = c->ts == CW_TS_BEFORE ? CW_TS_BEFORE : (int64_t)bucket_of(c->ts);
                uint32_t j = 0;
                for (; j < b->releases.n; j++)
                    if (b->releases.v[j].proc == c->proc && b->releases.v[j].stack == c->stack &&
                        b->releases.v[j].a == a_b)
                        break;
                if (j == b->releases.n)
                    ASSERT_OK(cw_batch_add_release(
                        b, &(cw_row_release_t){c->proc, c->stack, a_b, 0, 0, 0}));
                b->releases.v[j].bytes += (uint64_t)-e->delta;
                b->releases.v[j].pieces++;
                b->releases.v[j].closed += e->closes;
            }
        }
        for (uint32_t p = 1; p <= NPROC; p++)
            if (act[p].events) ASSERT_OK(cw_batch_add_activity(b, &act[p]));
        ASSERT_TRUE(nb < cap);
        out[nb++] = b;
        if (i < ngev && (int64_t)bucket_of(gev[i].ts) > bk + 5 * S && rnd(3) == 0) {
            ASSERT_OK(cw_batch_create(bk + 2 * S, S, &b)); /* an idle bucket */
            ASSERT_TRUE(nb < cap);
            out[nb++] = b;
        }
    }
    return nb;
}

static cw_batch_t *gen_batches[16384];

/* Writes the history one batch per transaction. */
static void write_generated(cw_store_t *s)
{
    cw_diag_t d = {{0}};
    size_t nb = build_generated(gen_batches, sizeof gen_batches / sizeof gen_batches[0]);
    for (size_t i = 0; i < nb; i++) {
        ASSERT_OK(cw_store_write(s, gen_batches[i], &d));
        cw_batch_free(gen_batches[i]);
    }
}

typedef struct oproc {
    cw_figs_t stacks[NSTACK];
    int64_t out0, peak, peak_ns;
    uint64_t events;
} oproc_t;

static void classify(cw_figs_t *f, int64_t a, int64_t fr, uint64_t bytes, int64_t t0, int64_t t1)
{
    int type = -1;
    if (a >= t0 && a < t1)
        type = fr < t1 ? CW_AIFI : CW_AIFO;
    else if (a < t0 && fr >= t0)
        type = fr < t1 ? CW_AOFI : CW_AOFO;
    if (type < 0) return;
    f->types[type].bytes += bytes;
    f->types[type].count++;
}

/* Where what the history left outstanding is released (its instances'
 * tracking ended: test_end_open), or never (INT64_MAX). */
static int64_t gen_end_at = INT64_MAX;

static void oracle(int64_t t0, int64_t t1, oproc_t o[NPROC + 1])
{
    memset(o, 0, sizeof(oproc_t) * (NPROC + 1));
    for (uint32_t c = 0; c < ngc; c++) {
        const gcommit_t *g = &gc[c];
        cw_figs_t *f = &o[g->proc].stacks[g->stack];
        if (g->ts != CW_TS_BEFORE && g->ts >= t0 && g->ts < t1) {
            f->size_bytes += g->bytes;
            f->commit_count++;
        }
        if (g->ts < t0) o[g->proc].out0 += (int64_t)g->bytes;
        if (g->remaining) classify(f, g->ts, gen_end_at, g->remaining, t0, t1);
        if (g->remaining && gen_end_at < t0) o[g->proc].out0 -= (int64_t)g->remaining;
    }
    for (uint32_t i = 0; i < ngev; i++) {
        const gev_t *e = &gev[i];
        const gcommit_t *g = &gc[e->commit];
        if (e->delta < 0) {
            classify(&o[e->proc].stacks[g->stack], g->ts, e->ts, (uint64_t)-e->delta, t0, t1);
            if (e->ts < t0) o[e->proc].out0 += e->delta;
        }
    }
    for (uint32_t p = 1; p <= NPROC; p++) {
        int64_t level = o[p].out0;
        if (gen_end_at >= t0 && gen_end_at < t1) o[p].events++; /* the end */
        o[p].peak = level;
        o[p].peak_ns = t0;
        for (uint32_t i = 0; i < ngev; i++) {
            if (gev[i].proc != p || gev[i].ts < t0 || gev[i].ts >= t1) continue;
            o[p].events++;
            level += gev[i].delta;
            if (level > o[p].peak) {
                o[p].peak = level;
                o[p].peak_ns = gev[i].ts;
            }
        }
    }
}

static bool figs_zero(const cw_figs_t *f)
{
    cw_figs_t z = {0};
    return memcmp(f, &z, sizeof z) == 0;
}

static void figs_eq(const cw_figs_t *a, const cw_figs_t *b, int64_t t0, int64_t t1)
{
    if (memcmp(a, b, sizeof *a) == 0) {
        cw_test_checks++;
        return;
    }
    fprintf(stderr, "window [%" PRId64 ", %" PRId64 ") (+%" PRId64 " s, %" PRId64 " s long)\n", t0,
            t1, (t0 - gen_t0) / S, (t1 - t0) / S);
    ASSERT_U64_EQ(a->size_bytes, b->size_bytes);
    ASSERT_U64_EQ(a->commit_count, b->commit_count);
    for (int i = 0; i < CW_TYPE__COUNT; i++) {
        fprintf(stderr, "type %s:\n", (const char *const[]){"AIFI", "AIFO", "AOFI", "AOFO"}[i]);
        ASSERT_U64_EQ(a->types[i].bytes, b->types[i].bytes);
        ASSERT_U64_EQ(a->types[i].count, b->types[i].count);
    }
    /* The figures differ somewhere the fields above do not cover. */
    CW_FAIL("figures differ (memcmp) though every listed field is equal");
}

/* The store's report of an aligned window equals the oracle's figures. */
static void check_window(cw_store_t *s, int64_t t0, int64_t t1)
{
    cw_report_t *r;
    cw_diag_t d = {{0}};
    oproc_t o[NPROC + 1];
    ASSERT_OK(cw_store_report(s, t0, t1, false, &r, &d));
    if (r->note) fprintf(stderr, "[%" PRId64 ", %" PRId64 "): %s\n", t0, t1, r->note);
    ASSERT_TRUE(r->note == NULL);
    ASSERT_EQ(r->from_ns, t0);
    ASSERT_EQ(r->to_ns, t1);
    oracle(t0, t1, o);
    uint32_t nreported = 0;
    for (uint32_t p = 1; p <= NPROC; p++) {
        cw_proc_report_t *pr = find_proc(r, p);
        if (!o[p].events && o[p].out0 <= 0) {
            ASSERT_TRUE(pr == NULL);
            continue;
        }
        nreported++;
        ASSERT_TRUE(pr != NULL);
        cw_figs_t total = {0};
        uint32_t nstacks = 0;
        uint64_t out_end = 0;
        for (uint32_t k = 0; k < NSTACK; k++) {
            if (figs_zero(&o[p].stacks[k])) continue;
            nstacks++;
            cw_stack_report_t *sr = find_stack(pr, k);
            ASSERT_TRUE(sr != NULL);
            figs_eq(&sr->figs, &o[p].stacks[k], t0, t1);
            cw_figs_add(&total, &o[p].stacks[k]);
            out_end += o[p].stacks[k].types[CW_AIFO].bytes + o[p].stacks[k].types[CW_AOFO].bytes;
        }
        ASSERT_EQ(pr->nstacks, nstacks);
        figs_eq(&pr->figs, &total, t0, t1);
        ASSERT_U64_EQ(pr->events, o[p].events);
        ASSERT_EQ(pr->peak_bytes, o[p].peak);
        ASSERT_EQ(pr->peak_ns, o[p].peak_ns);
        ASSERT_U64_EQ(pr->outstanding_end, out_end);
    }
    ASSERT_EQ(r->nprocs, nreported);
    cw_report_free(r);
}

/* Windows of `len` buckets of width w at random aligned places in
 * [lo, hi). */
static void check_windows(cw_store_t *s, int64_t lo, int64_t hi, int64_t w, int n)
{
    lo = lo - lo % w + (lo % w ? w : 0);
    hi -= hi % w;
    if (hi - lo < w) return;
    for (int i = 0; i < n; i++) {
        int64_t nb = (hi - lo) / w;
        int64_t a = (int64_t)rnd((uint64_t)nb);
        int64_t len = 1 + (int64_t)rnd((uint64_t)(nb - a < 90 ? nb - a : 90));
        check_window(s, lo + a * w, lo + (a + len) * w);
    }
}

static void tiers_of(cw_store_t *s, cw__tier_t t[CW_TIERS])
{
    cw_diag_t d;
    ASSERT_OK(cw__store_read_tiers(s, t, &d));
}

/* A file's size in bytes; 0 when it does not exist. */
static uint64_t file_bytes(const char *path)
{
    FILE *f = fopen(path, "rb");
    if (!f) return 0;
    long n = fseek(f, 0, SEEK_END) == 0 ? ftell(f) : 0;
    fclose(f);
    return n > 0 ? (uint64_t)n : 0;
}

static uint64_t db_bytes(cw_store_t *s)
{
    return (uint64_t)sql_int(s, "PRAGMA page_count") * (uint64_t)sql_int(s, "PRAGMA page_size");
}

static void same_reports(cw_store_t *a, cw_store_t *b, int64_t t0, int64_t t1)
{
    cw_report_t *ra, *rb;
    cw_diag_t d;
    ASSERT_OK(cw_store_report(a, t0, t1, true, &ra, &d));
    ASSERT_OK(cw_store_report(b, t0, t1, true, &rb, &d));
    ASSERT_EQ(ra->nprocs, rb->nprocs);
    for (uint32_t i = 0; i < ra->nprocs; i++) {
        cw_proc_report_t *pa = &ra->procs[i], *pb = &rb->procs[i];
        ASSERT_EQ(pa->id, pb->id);
        figs_eq(&pa->figs, &pb->figs, t0, t1);
        ASSERT_U64_EQ(pa->peak_bytes, pb->peak_bytes);
        ASSERT_EQ(pa->peak_ns, pb->peak_ns);
        ASSERT_EQ(pa->nstacks, pb->nstacks);
        for (uint32_t j = 0; j < pa->nstacks; j++) {
            ASSERT_EQ(pa->stacks[j].stack_id, pb->stacks[j].stack_id);
            ASSERT_STR_EQ(pa->stacks[j].tag, pb->stacks[j].tag);
            figs_eq(&pa->stacks[j].figs, &pb->stacks[j].figs, t0, t1);
        }
    }
    cw_report_free(ra);
    cw_report_free(rb);
}

static void test_generated(void)
{
    cw_store_t *full = NULL, *ret = NULL, *cap = NULL;
    cw_diag_t d = {{0}};
    cw_store_opts_t o = {{0, 0, 0}, 0};
    cw__tier_t t[CW_TIERS];
    generate();
    int64_t end = (int64_t)bucket_of(gev[ngev - 1].ts) + S;
    int64_t phase2 = (int64_t)bucket_of(gev[ngev - 1].ts) - 3 * HOUR;

    /* Kept forever: every aligned window is answered by tier 0. */
    const char *p = tpath("gen_full.db");
    rm_db(p);
    ASSERT_OK(cw_store_open(p, &o, &full, &d));
    write_generated(full);
    tiers_of(full, t);
    ASSERT_EQ(t[0].end, end);
    ASSERT_EQ(t[1].end, end - end % MIN);
    ASSERT_EQ(t[2].end, end - end % HOUR);
    ASSERT_EQ(t[0].horizon, INT64_MIN);
    check_windows(full, gen_t0 - MIN, end + MIN, S, 150);
    check_windows(full, gen_t0, end, MIN, 40);
    check_windows(full, gen_t0, end, HOUR, 10);
    check_window(full, gen_t0 - HOUR, end + HOUR);
    /* Hours long from a minute that is not on an hour: the hour tier
     * answers the whole hours, its rows of commits in t0's hour put on
     * their side of t0 by stack, or taken from minutes (the hour split,
     * store_report_sums.h). */
    uint64_t splits = full->test.hour_splits;
    for (int i = 0; i < 40; i++) {
        int64_t a = gen_t0 + (int64_t)rnd((uint64_t)((end - gen_t0) / MIN)) * MIN;
        if (a % HOUR == 0) a += MIN;
        int64_t b = a + 2 * HOUR + (int64_t)rnd(5 * 60) * MIN;
        if (b > end) b = rnd(2) ? end : end - end % MIN;
        if (b - a > 2 * HOUR) check_window(full, a, b);
    }
    printf("hour split: %" PRIu64 " reports, %" PRIu64 " (hour, process) cells from minutes\n",
           full->test.hour_splits - splits, full->test.hour_fixes);
    ASSERT_TRUE(full->test.hour_splits - splits >= 10 && full->test.hour_fixes > 0);
    integrity_ok(full);

    /* Raw kept 1 h, minutes 2 h, hours forever: old windows come from the
     * minute and hour tiers, exact, and equal to the full database's. */
    p = tpath("gen_ret.db");
    rm_db(p);
    o.retention_ns[0] = HOUR;
    o.retention_ns[1] = 2 * HOUR;
    ASSERT_OK(cw_store_open(p, &o, &ret, &d));
    write_generated(ret);
    tiers_of(ret, t);
    ASSERT_EQ(t[0].horizon, (end - HOUR) - (end - HOUR) % MIN);
    ASSERT_EQ(t[1].horizon, (end - 2 * HOUR) - (end - 2 * HOUR) % HOUR);
    ASSERT_EQ(t[2].horizon, INT64_MIN);
    ASSERT_EQ(sql_int(ret, "SELECT count(*) FROM activity WHERE tier = 0 AND bucket < "
                           "(SELECT horizon_ns FROM tiers WHERE tier = 0)"),
              0);
    ASSERT_TRUE(sql_int(ret, "SELECT count(*) FROM commits WHERE tier = 0") <
                sql_int(full, "SELECT count(*) FROM commits WHERE tier = 0"));
    check_windows(ret, t[0].horizon, end + 5 * S, S, 100);
    check_windows(ret, t[1].horizon, t[0].horizon, MIN, 30);
    check_windows(ret, gen_t0, t[1].end, HOUR, 15);
    check_windows(ret, phase2, t[1].end, HOUR, 5);
    for (int i = 0; i < 20; i++) {
        int64_t a = t[0].horizon + (int64_t)rnd(HOUR / S) * S;
        same_reports(full, ret, a, a + (1 + (int64_t)rnd(600)) * S);
    }
    /* Before the horizon, a raw window is widened to the minute tier. */
    cw_report_t *r;
    ASSERT_OK(cw_store_report(ret, t[0].horizon - 90 * S, t[0].horizon - 30 * S, false, &r, &d));
    ASSERT_EQ(r->from_ns, t[0].horizon - 2 * MIN);
    ASSERT_EQ(r->to_ns, t[0].horizon);
    ASSERT_TRUE(r->note != NULL);
    cw_report_free(r);
    integrity_ok(ret);

    /* Minutes kept for less time than seconds: windows whose history
     * cannot be assembled from coarser tiers still come out exact. */
    cw_store_t *inv = NULL;
    p = tpath("gen_inv.db");
    rm_db(p);
    o.retention_ns[0] = 3 * HOUR;
    o.retention_ns[1] = HOUR;
    ASSERT_OK(cw_store_open(p, &o, &inv, &d));
    write_generated(inv);
    tiers_of(inv, t);
    ASSERT_TRUE(t[1].horizon > t[0].horizon);
    check_windows(inv, t[0].horizon, end + 5 * S, S, 60);
    check_windows(inv, t[0].horizon, end, MIN, 20);
    integrity_ok(inv);
    cw_store_close(inv);

    /* A size cap below what the full history takes shortens retention,
     * finest tier first, and the file shrinks. */
    p = tpath("gen_cap.db");
    rm_db(p);
    cw_store_opts_default(&o);
    o.size_cap_bytes = db_bytes(full) / 2;
    ASSERT_OK(cw_store_open(p, &o, &cap, &d));
    write_generated(cap);
    tiers_of(cap, t);
    ASSERT_TRUE(t[0].retention < 26 * HOUR);
    ASSERT_TRUE(t[0].horizon > INT64_MIN);
    ASSERT_TRUE(db_bytes(cap) < db_bytes(full));
    ASSERT_TRUE(db_bytes(cap) <= o.size_cap_bytes || t[0].retention == HOUR);
    check_windows(cap, t[0].horizon, end, S, 50);
    integrity_ok(cap);
    printf("generated: %u commits, %u events; full %llu bytes, capped %llu bytes (raw retention "
           "%lld s)\n",
           ngc, ngev, (unsigned long long)db_bytes(full), (unsigned long long)db_bytes(cap),
           (long long)(t[0].retention / S));

    /* The cap counts the WAL: an eighth of it (4 to 1000 pages) is the
     * WAL's share, checkpointed after each commit past it and truncated
     * back to it once the WAL restarts (no reader here holds it); the
     * file keeps to the rest. SQLite's defaults would let the WAL grow to
     * 1000 pages and stay that size. */
    cw_store_t *wc = NULL;
    p = tpath("gen_walcap.db");
    rm_db(p);
    o.size_cap_bytes = UINT64_C(1) << 20;
    ASSERT_OK(cw_store_open(p, &o, &wc, &d));
    uint64_t wal_peak = 0;
    char wal[512];
    snprintf(wal, sizeof wal, "%s-wal", p);
    size_t nb = build_generated(gen_batches, sizeof gen_batches / sizeof gen_batches[0]);
    for (size_t i = 0; i < nb; i++) {
        ASSERT_OK(cw_store_write(wc, gen_batches[i], &d));
        cw_batch_free(gen_batches[i]);
        uint64_t w = file_bytes(wal);
        if (w > wal_peak) wal_peak = w;
    }
    tiers_of(wc, t);
    printf("size_cap 1 MiB: file %llu bytes, WAL at most %llu bytes, raw retention %lld s\n",
           (unsigned long long)db_bytes(wc), (unsigned long long)wal_peak,
           (long long)(t[0].retention / S));
    ASSERT_TRUE(db_bytes(wc) <= o.size_cap_bytes - o.size_cap_bytes / 8 || t[0].retention == HOUR);
    ASSERT_TRUE(wal_peak <= 2 * (o.size_cap_bytes / 8));
    integrity_ok(wc);
    cw_store_close(wc);

    cw_store_close(full);
    cw_store_close(ret);
    cw_store_close(cap);
}

/* A run killed with its instances open (the store closed without their
 * end): the next writer ends them where the data ends, E, as a stop would
 * have, whatever tier still knows each commit's bucket; every window
 * after that, across E, in every tier, equals the oracle with what was
 * left released at E, and the windows before E are unchanged. */
static void test_end_open(void)
{
    /* Kept for ever; the defaults' order (raw < minutes < hours); minutes
     * kept less than seconds; hours kept less than minutes. */
    static const int64_t ret[][CW_TIERS] = {
        {0, 0, 0}, {HOUR, 2 * HOUR, 40 * HOUR}, {3 * HOUR, HOUR, 0}, {HOUR, 3 * HOUR, 2 * HOUR}};
    static const char *const names[] = {"end_open.db", "end_open_ret.db", "end_open_inv1.db",
                                        "end_open_inv2.db"};
    int64_t end = (int64_t)bucket_of(gev[ngev - 1].ts) + S;
    uint64_t left = 0;
    for (uint32_t c = 0; c < ngc; c++)
        left += gc[c].remaining;
    ASSERT_TRUE(left > 0);
    for (size_t k = 0; k < sizeof ret / sizeof ret[0]; k++) {
        cw_store_t *s = NULL;
        cw_diag_t d = {{0}};
        cw_store_opts_t o = {{ret[k][0], ret[k][1], ret[k][2]}, 0};
        cw__tier_t t[CW_TIERS];
        cw_store_ended_t e;
        const char *p = tpath(names[k]);
        rm_db(p);
        ASSERT_OK(cw_store_open(p, &o, &s, &d));
        write_generated(s);
        tiers_of(s, t);
        if (k == 1) {
            /* Each class of commit bucket is there: raw, minute, hour, BEFORE. */
            ASSERT_TRUE(t[0].horizon > INT64_MIN && t[1].horizon > INT64_MIN &&
                        t[2].horizon > INT64_MIN && t[2].horizon < gen_t0 + 53 * HOUR);
        }
        cw_store_close(s); /* killed: nothing ended */
        ASSERT_OK(cw_store_open(p, &o, &s, &d));
        ASSERT_OK(cw_store_end_open(s, &e, &d));
        ASSERT_EQ(e.instances, NPROC);
        ASSERT_EQ(e.at_ns, end);
        ASSERT_EQ(e.end_ns, end + S);
        ASSERT_U64_EQ(e.bytes, left);
        ASSERT_U64_EQ(e.odd, 0);
        for (uint32_t id = 1; id <= NPROC; id++)
            proc_is(s, id, CW_TS_NEVER, end);
        ASSERT_OK(cw_store_end_open(s, &e, &d)); /* nothing left open */
        ASSERT_EQ(e.instances, 0);
        ASSERT_EQ(e.at_ns, INT64_MIN);
        /* The next run's data (idle buckets) 10 minutes later, then 3
         * hours later: the data no longer ends at E, and the minute, then
         * the hour rollups pass it. */
        gen_end_at = end;
        for (int step = 0; step < 2; step++) {
            cw_batch_t *b;
            ASSERT_OK(cw_batch_create(end + (step ? 3 * HOUR : 10 * MIN), S, &b));
            ASSERT_OK(cw_store_write(s, b, &d));
            cw_batch_free(b);
            tiers_of(s, t);
            int64_t lo[CW_TIERS];
            for (int i = 0; i < CW_TIERS; i++)
                lo[i] = t[i].horizon > gen_t0 ? t[i].horizon : gen_t0;
            /* With retention out of order, windows are checked where the
             * store answers them exactly (as test_generated's gen_inv). */
            bool inv = k >= 2;
            if (inv) lo[1] = lo[2] = lo[0] > lo[1] ? lo[0] : lo[1];
            if (step == 0) {
                ASSERT_TRUE(lo[0] < end && t[1].end > end);
                check_windows(s, lo[0], t[0].end, S, 60);
                check_window(s, end - 5 * S, end + 5 * S);
                check_windows(s, lo[1], t[1].end, MIN, 40);
                check_window(s, cw_floor_to(end, MIN) - 5 * MIN, cw_floor_to(end, MIN) + 5 * MIN);
            } else if (!inv) {
                ASSERT_TRUE(t[2].end > end);
                check_windows(s, lo[2], t[2].end, HOUR, 20);
                check_window(s, cw_floor_to(end, HOUR) - HOUR, cw_floor_to(end, HOUR) + 2 * HOUR);
            }
        }
        gen_end_at = INT64_MAX;
        integrity_ok(s);
        cw_store_close(s);
    }
}

/* Every row of the tier tables and the tier state, in key order, as text. */
static void dump_tiers(cw_store_t *s, cw_buf_t *out)
{
    static const char *const q[] = {
        "SELECT tier, bucket, proc, stack, bytes, events FROM commits WHERE tier < 3 "
        "ORDER BY 1, 2, 3, 4",
        "SELECT tier, f, proc, stack, a, bytes, pieces, closed FROM releases WHERE tier < 3 "
        "ORDER BY 1, 2, 3, 4, 5",
        "SELECT tier, bucket, proc, events, delta, relpeak, relpeak_ns FROM activity "
        "WHERE tier < 3 ORDER BY 1, 2, 3",
        "SELECT tier, width_ns, start_ns, horizon_ns, end_ns, retention_ns FROM tiers "
        "WHERE tier < 3 ORDER BY 1"};
    for (size_t i = 0; i < sizeof q / sizeof q[0]; i++) {
        sqlite3_stmt *st = NULL;
        ASSERT_EQ(sqlite3_prepare_v2(s->db, q[i], -1, &st, NULL), SQLITE_OK);
        while (sqlite3_step(st) == SQLITE_ROW) {
            for (int c = 0; c < sqlite3_column_count(st); c++)
                cw_buf_printf(out, "%lld ", (long long)sqlite3_column_int64(st, c));
            cw_buf_puts(out, "\n");
        }
        sqlite3_finalize(st);
        cw_buf_puts(out, "--\n");
    }
    ASSERT_TRUE(!out->failed);
}

/* The open hour's cells (tier 3, store_tiers.c "The open hour") of the
 * hour [H, M) its tiers row names hold the minute tier's rows of [H, M)
 * summed as the hour's rollup sums them: commits per (process, stack),
 * releases per (process, stack, a floored to the hour), events and
 * deltas per process, and a relative peak no lower than any minute's
 * cumulative one. 1 when there was such a row, else 0 (and no cell). */
static int check_open(cw_store_t *s)
{
    int64_t h = INT64_MIN, m = INT64_MIN;
    sqlite3_stmt *st = NULL;
    ASSERT_EQ(sqlite3_prepare_v2(s->db, "SELECT start_ns, end_ns FROM tiers WHERE tier = 3", -1,
                                 &st, NULL),
              SQLITE_OK);
    if (sqlite3_step(st) == SQLITE_ROW) {
        h = sqlite3_column_int64(st, 0);
        m = sqlite3_column_int64(st, 1);
    }
    sqlite3_finalize(st);
    if (h == INT64_MIN) {
        ASSERT_EQ(sql_int(s, "SELECT count(*) FROM cells WHERE tier = 3 AND bucket > "
                             "(SELECT end_ns FROM tiers WHERE tier = 2)"),
                  0);
        return 0;
    }
    cw__tier_t t[CW__TIERS_READ];
    cw_diag_t d = {{0}};
    ASSERT_OK(cw__store_read_tiers(s, t, &d));
    ASSERT_OK(cw__store_read_open(s, t, &d));
    ASSERT_EQ(t[CW__TIER_OPEN].start, h); /* in step with the tiers */
    ASSERT_EQ(t[CW__TIER_OPEN].end, m);
    ASSERT_TRUE(h == t[2].end && m == t[1].end && cw_floor_to(h, HOUR) == h && m - h < HOUR);
    static const char *const q[] = {
        "SELECT proc, stack, sum(bytes), sum(events) FROM commits WHERE tier = 1 AND bucket >= ?1 "
        "AND bucket < ?2 GROUP BY 1, 2",
        "SELECT proc, stack, bytes, events FROM commits WHERE tier = 3 AND bucket = ?1",
        "SELECT proc, stack, CASE WHEN a = -9223372036854775807 - 1 THEN a ELSE "
        "a - ((a % 3600000000000) + 3600000000000) % 3600000000000 END, sum(bytes), sum(pieces), "
        "sum(closed) FROM releases WHERE tier = 1 AND f >= ?1 AND f < ?2 GROUP BY 1, 2, 3",
        "SELECT proc, stack, a, bytes, pieces, closed FROM releases WHERE tier = 3 AND f = ?1",
        "SELECT proc, sum(events), sum(delta) FROM activity WHERE tier = 1 AND bucket >= ?1 "
        "AND bucket < ?2 GROUP BY 1",
        "SELECT proc, events, delta FROM activity WHERE tier = 3 AND bucket = ?1",
    };
    for (int i = 0; i < 6; i += 2) {
        /* Each side EXCEPT the other is empty. */
        for (int side = 0; side < 2; side++) {
            char sql[1200];
            snprintf(sql, sizeof sql, "SELECT count(*) FROM (%s EXCEPT %s)", q[i + side],
                     q[i + 1 - side]);
            ASSERT_EQ(sqlite3_prepare_v2(s->db, sql, -1, &st, NULL), SQLITE_OK);
            sqlite3_bind_int64(st, 1, h);
            sqlite3_bind_int64(st, 2, m);
            ASSERT_EQ(sqlite3_step(st), SQLITE_ROW);
            ASSERT_EQ(sqlite3_column_int64(st, 0), 0);
            sqlite3_finalize(st);
        }
    }
    /* The peak: each minute's start level plus its relative peak is at
     * most the hour's relative peak, which one of them reaches (or 0). */
    ASSERT_EQ(
        sqlite3_prepare_v2(
            s->db,
            "SELECT count(*) FROM activity o WHERE o.tier = 3 AND o.bucket = ?1 AND o.relpeak != "
            "(SELECT max(0, max(coalesce((SELECT sum(delta) FROM activity p WHERE p.tier = 1 "
            "AND p.proc = m.proc AND p.bucket >= ?1 AND p.bucket < m.bucket), 0) + m.relpeak)) "
            "FROM activity m WHERE m.tier = 1 AND m.proc = o.proc AND m.bucket >= ?1 "
            "AND m.bucket < ?2)",
            -1, &st, NULL),
        SQLITE_OK);
    sqlite3_bind_int64(st, 1, h);
    sqlite3_bind_int64(st, 2, m);
    ASSERT_EQ(sqlite3_step(st), SQLITE_ROW);
    ASSERT_EQ(sqlite3_column_int64(st, 0), 0);
    sqlite3_finalize(st);
    return 1;
}

/* Every tier of a holds the rows of b's (and more than a few). */
static void same_tiers(cw_store_t *a, cw_store_t *b)
{
    cw_buf_t x = {0}, y = {0};
    dump_tiers(a, &x);
    dump_tiers(b, &y);
    ASSERT_TRUE(x.n > 1000);
    ASSERT_EQ(x.n, y.n);
    ASSERT_TRUE(memcmp(x.p, y.p, x.n) == 0);
    free(x.p);
    free(y.p);
}

/* The minute and hour tiers built from the in-memory sums equal those
 * built by SQL: the history written with retention, in transactions of
 * 1 to 12 batches (group commit), with the database closed and reopened
 * now and then (in the middle of minutes and hours: their first bucket
 * then goes by SQL), and a transaction that fails half-way (its batches
 * rolled back, the sums forgotten, then written again). */
static void test_roll_memory(void)
{
    cw_store_t *mem = NULL, *sql = NULL;
    cw_diag_t d = {{0}};
    cw_store_opts_t o = {{HOUR, 2 * HOUR, 0}, 0};
    const char *pm = tpath("roll_mem.db"), *ps = tpath("roll_sql.db");
    rm_db(pm);
    rm_db(ps);
    size_t nb = build_generated(gen_batches, sizeof gen_batches / sizeof gen_batches[0]);
    ASSERT_OK(cw_store_open(ps, &o, &sql, &d));
    cw__store_set_sql_rollups(sql, true);
    int sql_checked = 0;
    for (size_t i = 0; i < nb; i++) {
        ASSERT_OK(cw_store_write(sql, gen_batches[i], &d));
        sql_checked += check_open(sql);
    }
    ASSERT_EQ(sql->test.roll_counts[0], 0);

    ASSERT_OK(cw_store_open(pm, &o, &mem, &d));
    uint64_t in_memory = 0, by_sql = 0;
    int reopened = 0, failed = 0, open_checked = 0;
    for (size_t i = 0; i < nb;) {
        size_t n = 1 + rnd(12);
        if (n > nb - i) n = nb - i;
        if (!failed && i > nb / 3 && n >= 2) {
            /* A batch out of order last: nothing of the group is stored. */
            cw_batch_t *bad;
            ASSERT_OK(cw_batch_create(gen_batches[i]->bucket_ns - 60 * S, S, &bad));
            const cw_batch_t *grp[13];
            for (size_t j = 0; j < n; j++)
                grp[j] = gen_batches[i + j];
            grp[n] = bad;
            ASSERT_EQ(cw_store_write_many(mem, grp, n + 1, &d), CW_EINVAL);
            cw_batch_free(bad);
            failed = 1;
        }
        ASSERT_OK(cw_store_write_many(mem, (const cw_batch_t *const *)&gen_batches[i], n, &d));
        i += n;
        open_checked += check_open(mem);
        if (i < nb && rnd(8) == 0) {
            in_memory += mem->test.roll_counts[0];
            by_sql += mem->test.roll_counts[1];
            cw_store_close(mem);
            ASSERT_OK(cw_store_open(pm, &o, &mem, &d));
            reopened++;
        }
    }
    in_memory += mem->test.roll_counts[0];
    by_sql += mem->test.roll_counts[1];
    printf("roll_memory: %zu batches, %d reopenings, %llu buckets rolled up in memory, %llu by "
           "SQL\n",
           nb, reopened, (unsigned long long)in_memory, (unsigned long long)by_sql);
    ASSERT_TRUE(failed && reopened >= 2);
    ASSERT_TRUE(in_memory > 2 * by_sql && by_sql > 0);
    /* The open hour's cells were checked against the minutes, whether
     * those were rolled up from memory or by SQL. */
    printf("roll_memory: the open hour's cells checked after %d and %d writes\n", open_checked,
           sql_checked);
    ASSERT_TRUE(open_checked > 10 && sql_checked > 100);

    same_tiers(mem, sql);
    integrity_ok(mem);
    for (size_t i = 0; i < nb; i++)
        cw_batch_free(gen_batches[i]);
    cw_store_close(mem);
    cw_store_close(sql);
}

/* The in-memory rollups give memory back: a burst of 20,000 processes in
 * one second (more rows than CW__ROLL_MAX_ROWS) leaves its minute and hour
 * to the SQL rollup instead of holding ~2 MiB of sums until the hour
 * closes, the rows of every tier still equal those rolled up by SQL, and
 * once the buckets closed the sums hold at most CW__ROLL_KEEP_ROWS rows'
 * room (the old code kept every roll at its peak for good). */
#define BURST 20000u
static void write_burst(cw_store_t *s, int64_t t0)
{
    cw_diag_t d = {{0}};
    cw_batch_t *b;
    ASSERT_OK(cw_batch_create(t0, S, &b));
    dictionary(b);
    for (uint32_t p = 1; p <= BURST; p++) {
        ASSERT_OK(cw_batch_add_proc(b, p, 1000 + p, t0, CW_TS_NEVER, "burst", NULL));
        ASSERT_OK(cw_batch_add_commit(b, &(cw_row_commit_t){p, 1 + p % 3, t0, 4096, 1}));
    }
    ASSERT_OK(cw_store_write(s, b, &d));
    cw_batch_free(b);
    size_t during = cw__store_roll_bytes(s);
    printf("roll_bounded: %u rows in one second: %zu bytes of sums\n", BURST, during);
    ASSERT_TRUE(during <= (size_t)CW__ROLL_KEEP_ROWS * 256);
    /* Seconds in the next minutes and a new hour: the buckets close. */
    for (int i = 1; i <= 3; i++) {
        ASSERT_OK(cw_batch_create(t0 + i * (HOUR / 2), S, &b));
        ASSERT_OK(cw_batch_add_commit(b, &(cw_row_commit_t){1, 1, t0 + i * (HOUR / 2), 4096, 1}));
        ASSERT_OK(cw_store_write(s, b, &d));
        cw_batch_free(b);
    }
}

/* A new database named name (raw 1 h, minutes 2 h), rolled up by SQL
 * only when sql. */
static cw_store_t *fresh_store(const char *name, bool sql)
{
    cw_store_t *st = NULL;
    cw_diag_t d = {{0}};
    cw_store_opts_t o = {{HOUR, 2 * HOUR, 0}, 0};
    rm_db(tpath(name));
    ASSERT_OK(cw_store_open(tpath(name), &o, &st, &d));
    cw__store_set_sql_rollups(st, sql);
    return st;
}

static void test_roll_bounded(void)
{
    int64_t t0 = INT64_C(472300) * HOUR + 5 * S;
    cw_store_t *sql = fresh_store("roll_bound_sql.db", true);
    write_burst(sql, t0);
    cw_store_t *mem = fresh_store("roll_bound.db", false);
    write_burst(mem, t0);
    ASSERT_TRUE(mem->test.roll_counts[1] > 0); /* the burst's buckets went by SQL */
    size_t after = cw__store_roll_bytes(mem);
    printf("roll_bounded: %zu bytes of sums once the buckets closed\n", after);
    ASSERT_TRUE(after <= (size_t)CW__ROLL_KEEP_ROWS * 256);
    ASSERT_EQ(cw_mem_get(CW_MEM_STORE_ROLLUPS), (int64_t)after);
    same_tiers(mem, sql);
    /* A handle's read caches are counted (store_caches), and given back
     * with the handle. */
    cw_report_t *r = NULL;
    cw_diag_t d = {{0}};
    ASSERT_EQ(cw_mem_get(CW_MEM_STORE_CACHES), 0);
    ASSERT_OK(cw_store_report(mem, t0 + HOUR, t0 + 2 * HOUR, false, &r, &d));
    cw_report_free(r);
    printf("roll_bounded: the report's caches: %lld bytes\n",
           (long long)cw_mem_get(CW_MEM_STORE_CACHES));
    ASSERT_TRUE(cw_mem_get(CW_MEM_STORE_CACHES) > (int64_t)BURST * 16);
    /* Dropped on demand (an idle pooled handle), and bounded: with room
     * for 1,000 rows per cache the report's sums (20,000 instances) serve
     * it and are not kept; the answer is the same. */
    cw_store_drop_read_caches(mem);
    ASSERT_EQ(cw_mem_get(CW_MEM_STORE_CACHES), 0);
    mem->test.read_cache_rows = 1000;
    cw_report_t *r2 = NULL;
    ASSERT_OK(cw_store_report(mem, t0 + HOUR, t0 + 2 * HOUR, false, &r, &d));
    ASSERT_OK(cw_store_report(mem, t0 + HOUR + S, t0 + 2 * HOUR, false, &r2, &d));
    printf("roll_bounded: caches bounded to 1,000 rows: %lld bytes\n",
           (long long)cw_mem_get(CW_MEM_STORE_CACHES));
    ASSERT_TRUE(cw_mem_get(CW_MEM_STORE_CACHES) <= 1000 * 64 * 2 + 4096);
    ASSERT_EQ(r->nprocs, r2->nprocs);
    ASSERT_TRUE(r->nprocs >= BURST);
    cw_report_free(r);
    cw_report_free(r2);
    cw_store_close(mem);
    ASSERT_EQ(cw_mem_get(CW_MEM_STORE_CACHES), 0);
    cw_store_close(sql);
    ASSERT_EQ(cw_mem_get(CW_MEM_STORE_ROLLUPS), 0);
}

/* Write throughput with many rows per batch (CW_BENCH=1). */
static void bench(void)
{
    cw_store_t *s = NULL;
    cw_diag_t d = {{0}};
    const char *p = tpath("bench.db");
    rm_db(p);
    ASSERT_OK(cw_store_open(p, NULL, &s, &d));
    int64_t a = cw_plat_mono_ns(), b;
    uint64_t rows = 0;
    const int nb = 3600;
    for (int i = 0; i < nb; i++) {
        cw_batch_t *bt;
        int64_t bk = gen_t0 + i * S;
        ASSERT_OK(cw_batch_create(bk, S, &bt));
        for (uint32_t p2 = 1; p2 <= 50; p2++) {
            for (uint32_t st = 0; st < 4; st++) {
                ASSERT_OK(cw_batch_add_commit(bt, &(cw_row_commit_t){p2, st, bk, 4096, 1}));
                if (i)
                    ASSERT_OK(
                        cw_batch_add_release(bt, &(cw_row_release_t){p2, st, bk - S, 4096, 1, 1}));
            }
            ASSERT_OK(cw_batch_add_activity(bt, &(cw_row_activity_t){p2, 8, 0, 4096, bk}));
        }
        rows += bt->commits.n + bt->releases.n + bt->activity.n;
        ASSERT_OK(cw_store_write(s, bt, &d));
        cw_batch_free(bt);
    }
    b = cw_plat_mono_ns();
    double sec = (double)(b - a) / 1e9;
    printf("bench: %d batches, %llu rows in %.2f s: %.0f rows/s, %.0f batches/s\n", nb,
           (unsigned long long)rows, sec, (double)rows / sec, nb / sec);
    static const struct {
        int64_t from, to;
        const char *what;
    } w[] = {{600, 1200, "10 min, minute-aligned, 40 min before the end"},
             {601, 1201, "10 min, not minute-aligned, 40 min before the end"},
             {3000, 3600, "the last 10 min"},
             {0, 3600, "the whole hour"}};
    for (size_t i = 0; i < sizeof w / sizeof w[0]; i++) {
        cw_report_t *r;
        a = cw_plat_mono_ns();
        ASSERT_OK(cw_store_report(s, gen_t0 + w[i].from * S, gen_t0 + w[i].to * S, false, &r, &d));
        b = cw_plat_mono_ns();
        printf("bench: report of %s, over 1 h of raw rows: %.1f ms (%u processes)\n", w[i].what,
               (double)(b - a) / 1e6, r->nprocs);
        cw_report_free(r);
    }
    cw_store_close(s);
}

/* ---- pruning ended instances ------------------------------------------------ */

/* One bucket's batch with (proc, stack 1) commit and release rows (the
 * release closing `closed` commit events). */
static void prune_batch(cw_store_t *s, int64_t at, uint32_t commit_proc, uint64_t commit,
                        uint32_t release_proc, int64_t release_a, uint64_t release,
                        uint64_t closed)
{
    cw_diag_t d;
    cw_batch_t *b;
    ASSERT_OK(cw_batch_create(at, S, &b));
    if (commit)
        ASSERT_OK(cw_batch_add_commit(b, &(cw_row_commit_t){commit_proc, 1, at, commit, 1}));
    if (release)
        ASSERT_OK(cw_batch_add_release(
            b, &(cw_row_release_t){release_proc, 1, release_a, release, closed, closed}));
    ASSERT_OK(cw_store_write(s, b, &d));
    cw_batch_free(b);
}

/* The history of test_prune: a long-lived instance (1), one that exits
 * having released everything (2), a folded group of two (3) whose rows
 * are released, pid 200 reused by an instance (4) that exits with 2048
 * bytes still counted (a baseline stays), an instance whose tracking
 * ended (5); at 3 h, a new instance (6). */
static void write_prunable(cw_store_t *s)
{
    cw_diag_t d;
    cw_batch_t *b;
    ASSERT_OK(cw_batch_create(10 * S, S, &b));
    dictionary(b);
    ASSERT_OK(cw_batch_add_proc(b, 1, 100, 10 * S, CW_TS_NEVER, "daemon", NULL));
    ASSERT_OK(cw_batch_add_proc(b, 2, 200, 10 * S, 12 * S, "tool", NULL));
    ASSERT_OK(cw_batch_add_proc(b, 3, 0, 10 * S, 11 * S, "true", NULL));
    ASSERT_OK(cw_batch_add_folded(b, &(cw_row_folded_t){3, 300, 10 * S, 10 * S + 1, 4096}));
    ASSERT_OK(cw_batch_add_folded(b, &(cw_row_folded_t){3, 301, 10 * S + 2, 11 * S, 4096}));
    ASSERT_OK(cw_batch_add_commit(b, &(cw_row_commit_t){1, 1, 10 * S, 8192, 1}));
    ASSERT_OK(cw_batch_add_commit(b, &(cw_row_commit_t){2, 1, 10 * S, 4096, 1}));
    ASSERT_OK(cw_batch_add_commit(b, &(cw_row_commit_t){3, 1, 10 * S, 8192, 2}));
    ASSERT_OK(cw_store_write(s, b, &d));
    cw_batch_free(b);
    prune_batch(s, 11 * S, 0, 0, 3, 10 * S, 8192, 2);
    ASSERT_OK(cw_batch_create(12 * S, S, &b));
    ASSERT_OK(cw_batch_add_release(b, &(cw_row_release_t){2, 1, 10 * S, 4096, 1, 1}));
    ASSERT_OK(cw_batch_add_proc(b, 2, 200, 10 * S, 12 * S, "tool", NULL));
    ASSERT_OK(cw_batch_add_proc(b, 4, 200, 12 * S, 14 * S, "tool", NULL));
    ASSERT_OK(cw_batch_add_commit(b, &(cw_row_commit_t){4, 1, 12 * S, 4096, 1}));
    ASSERT_OK(cw_batch_add_proc(b, 5, 500, 12 * S, 15 * S, "editor", NULL));
    b->procs.v[b->procs.n - 1].tracking_ended = true;
    ASSERT_OK(cw_batch_add_commit(b, &(cw_row_commit_t){5, 1, 12 * S, 4096, 1}));
    ASSERT_OK(cw_store_write(s, b, &d));
    cw_batch_free(b);
    ASSERT_OK(cw_batch_create(14 * S, S, &b));
    ASSERT_OK(cw_batch_add_release(b, &(cw_row_release_t){4, 1, 12 * S, 2048, 1, 0}));
    ASSERT_OK(cw_store_write(s, b, &d));
    cw_batch_free(b);
    prune_batch(s, 15 * S, 0, 0, 5, 12 * S, 4096, 1);
    ASSERT_OK(cw_batch_create(3 * HOUR, S, &b));
    ASSERT_OK(cw_batch_add_proc(b, 6, 200, 3 * HOUR, CW_TS_NEVER, "tool", NULL));
    ASSERT_OK(cw_batch_add_commit(b, &(cw_row_commit_t){6, 1, 3 * HOUR, 4096, 1}));
    ASSERT_OK(cw_batch_add_activity(b, &(cw_row_activity_t){6, 1, 4096, 4096, 3 * HOUR}));
    ASSERT_OK(cw_store_write(s, b, &d));
    cw_batch_free(b);
}

/* Retention prunes the processes rows (and a folded group's folded rows)
 * of instances that ended before every tier's horizon with nothing left
 * in any tier; not while a tier keeps them (forever, or a baseline). */
static void test_prune(void)
{
    cw_store_t *s = NULL;
    cw_store_opts_t o;
    cw_report_t *r;
    cw_diag_t d = {{0}};
    const char *p = tpath("prune.db");
    cw_store_opts_default(&o);
    o.retention_ns[0] = MIN;
    o.retention_ns[1] = MIN;
    o.retention_ns[2] = HOUR;
    rm_db(p);
    ASSERT_OK(cw_store_open(p, &o, &s, &d));
    write_prunable(s);
    /* End 3 h + 1 s: horizons 2 h 59 min (raw), 2 h (minutes, hours). */
    ASSERT_EQ(s->w->tiers[0].horizon, 3 * HOUR - MIN);
    ASSERT_EQ(s->w->tiers[1].horizon, 2 * HOUR);
    ASSERT_EQ(s->w->tiers[2].horizon, 2 * HOUR);
    ASSERT_EQ(s->w->pruned_to, 2 * HOUR);
    sqlite3_stmt *st;
    ASSERT_EQ(sqlite3_prepare_v2(s->db, "SELECT group_concat(id, ',') FROM "
                                        "(SELECT id FROM processes ORDER BY id)", -1, &st, NULL),
              SQLITE_OK);
    ASSERT_EQ(sqlite3_step(st), SQLITE_ROW);
    ASSERT_STR_EQ((const char *)sqlite3_column_text(st, 0), "1,4,6");
    sqlite3_finalize(st);
    ASSERT_EQ(sql_int(s, "SELECT count(*) FROM folded"), 0);
    ASSERT_U64_EQ(s->test.pruned[0], 3); /* 2, the group 3, 5 */
    ASSERT_U64_EQ(s->test.pruned[1], 1); /* the group's one run, of its two instances */
    /* 4 keeps its 2048 bytes in every tier's baseline. */
    ASSERT_EQ(sql_int(s, "SELECT count(*) FROM commits WHERE proc = 4 AND bytes = 2048"), 3);
    ASSERT_EQ(sql_int(s, "SELECT count(*) FROM commits WHERE proc IN (2, 3, 5)"), 0);
    /* The figures of what is left are whole. */
    ASSERT_OK(cw_store_report(s, INT64_MIN, INT64_MAX, false, &r, &d));
    ASSERT_TRUE(rproc(r, 1) && rproc(r, 4) && rproc(r, 6) && !rproc(r, 2) && !rproc(r, 3) &&
                !rproc(r, 5));
    ASSERT_U64_EQ(rproc(r, 1)->outstanding_end, 8192);
    ASSERT_U64_EQ(rproc(r, 4)->outstanding_end, 2048);
    ASSERT_U64_EQ(rproc(r, 6)->outstanding_end, 4096);
    cw_report_free(r);
    integrity_ok(s);
    /* Reopened: the same horizon prunes nothing more; a later one runs
     * again. */
    cw_store_close(s);
    ASSERT_OK(cw_store_open(p, &o, &s, &d));
    prune_batch(s, 3 * HOUR + S, 6, 4096, 0, 0, 0, 0);
    ASSERT_U64_EQ(s->test.pruned[0], 0);
    ASSERT_EQ(s->w->pruned_to, 2 * HOUR);
    cw_store_close(s);

    /* Hours kept forever: the hour tier holds every instance's rows, so
     * nothing is pruned, whatever the other tiers fold. */
    o.retention_ns[2] = 0;
    rm_db(p);
    ASSERT_OK(cw_store_open(p, &o, &s, &d));
    write_prunable(s);
    ASSERT_EQ(s->w->tiers[2].horizon, INT64_MIN);
    ASSERT_EQ(sql_int(s, "SELECT count(*) FROM processes"), 6);
    ASSERT_EQ(sql_int(s, "SELECT sum(n) FROM folded"), 2);
    ASSERT_U64_EQ(s->test.pruned[0] + s->test.pruned[1], 0);
    cw_store_close(s);
}

/* A database of schema 8 (before the cells) is converted in place when
 * the writer opens it, resumably: the generated history with retention
 * (BEFORE baselines, three tiers) stored by today's writer, its rows read
 * back through the views and written into the tables of a schema-8 file
 * as schema 8 held them; a conversion stopped after two transactions
 * leaves the file to readers refused and goes on at the next open, and
 * then every row and every report equals the original's. */
static void test_upgrade(void)
{
    cw_store_t *a = NULL, *b = NULL, *r = NULL;
    cw_diag_t d = {{0}};
    cw_store_opts_t o = {{HOUR, 2 * HOUR, 0}, 0};
    const char *pa = tpath("up_cells.db"), *pb = tpath("up_v8.db");
    rm_db(pa);
    rm_db(pb);
    ASSERT_OK(cw_store_open(pa, &o, &a, &d));
    write_generated(a);
    ASSERT_OK(cw__store_create_at_version(pb, 8, &d));

    /* The schema-8 file: the dictionary and instance tables as they are,
     * the tier rows through the views. */
    sqlite3 *raw = NULL;
    char sql[1200];
    ASSERT_EQ(sqlite3_open(pb, &raw), SQLITE_OK);
    snprintf(sql, sizeof sql,
             "ATTACH '%s' AS a; BEGIN; DELETE FROM main.tiers; DELETE FROM main.meta;"
             "INSERT INTO main.tiers SELECT * FROM a.tiers WHERE tier < 3;" /* as schema 8 */
             "INSERT INTO main.meta SELECT * FROM a.meta;"
             "INSERT INTO main.frames SELECT * FROM a.frames;"
             "INSERT INTO main.stacks SELECT * FROM a.stacks;"
             "INSERT INTO main.processes SELECT * FROM a.processes; COMMIT; DETACH a",
             pa);
    ASSERT_EQ(sqlite3_exec(raw, sql, NULL, NULL, NULL), SQLITE_OK);
    static const char *const from[] = {
        "SELECT tier, bucket, proc, stack, bytes, events FROM commits WHERE tier < 3",
        "SELECT tier, f, proc, stack, a, bytes, pieces, closed FROM releases WHERE tier < 3",
        "SELECT tier, bucket, proc, events, delta, relpeak, relpeak_ns FROM activity WHERE tier < "
        "3"};
    static const char *const into[] = {
        "INSERT INTO commits VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
        "INSERT INTO releases VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)",
        "INSERT INTO activity VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)"};
    int64_t rows = 0;
    ASSERT_EQ(sqlite3_exec(raw, "BEGIN", NULL, NULL, NULL), SQLITE_OK);
    for (int t = 0; t < 3; t++) {
        sqlite3_stmt *q = NULL, *ins = NULL;
        ASSERT_EQ(sqlite3_prepare_v2(a->db, from[t], -1, &q, NULL), SQLITE_OK);
        ASSERT_EQ(sqlite3_prepare_v2(raw, into[t], -1, &ins, NULL), SQLITE_OK);
        while (sqlite3_step(q) == SQLITE_ROW) {
            for (int c = 0; c < sqlite3_column_count(q); c++)
                sqlite3_bind_int64(ins, c + 1, sqlite3_column_int64(q, c));
            ASSERT_EQ(sqlite3_step(ins), SQLITE_DONE);
            sqlite3_reset(ins);
            rows++;
        }
        sqlite3_finalize(q);
        sqlite3_finalize(ins);
    }
    ASSERT_EQ(sqlite3_exec(raw, "COMMIT", NULL, NULL, NULL), SQLITE_OK);
    sqlite3_close(raw);
    ASSERT_TRUE(rows > 500);

    /* Stopped after two transactions: what they converted stays, the rest
     * waits, and readers are refused meanwhile. */
    cw__store_upgrade_stop_after = 2;
    ASSERT_EQ(cw_store_open(pb, &o, &b, &d), CW_EIO);
    ASSERT_TRUE(strstr(d.msg, "goes on at the next start") != NULL);
    cw__store_upgrade_stop_after = 0;
    ASSERT_EQ(sqlite3_open(pb, &raw), SQLITE_OK);
    int64_t left = 0, cells = 0;
    sqlite3_stmt *st = NULL;
    ASSERT_EQ(sqlite3_prepare_v2(raw,
                                 "SELECT (SELECT count(*) FROM v8_commits) + (SELECT count(*) "
                                 "FROM v8_releases) + (SELECT count(*) FROM v8_activity), "
                                 "(SELECT count(*) FROM cells)",
                                 -1, &st, NULL),
              SQLITE_OK);
    ASSERT_EQ(sqlite3_step(st), SQLITE_ROW);
    left = sqlite3_column_int64(st, 0);
    cells = sqlite3_column_int64(st, 1);
    sqlite3_finalize(st);
    sqlite3_close(raw);
    ASSERT_TRUE(left > 0 && left < rows);
    ASSERT_TRUE(cells > 0);
    ASSERT_EQ(cw_store_open_readonly(pb, &r, &d), CW_EDB);
    ASSERT_TRUE(strstr(d.msg, "being converted") != NULL);

    ASSERT_OK(cw_store_open(pb, &o, &b, &d));
    ASSERT_EQ(sql_int(b, "SELECT count(*) FROM sqlite_schema WHERE name LIKE 'v8_%'"), 0);
    same_tiers(a, b);
    for (int i = 0; i < 20; i++) {
        int64_t t0 = gen_t0 + (int64_t)rnd(5 * HOUR / S) * S;
        same_reports(a, b, t0, t0 + (1 + (int64_t)rnd(3600)) * S);
    }
    same_reports(a, b, INT64_MIN, INT64_MAX);
    integrity_ok(b);
    printf("upgrade: %lld rows of schema 8, %lld left after two transactions, then converted\n",
           (long long)rows, (long long)left);
    cw_store_close(a);
    cw_store_close(b);
}


/* ---- the heap layer: riders (batch.h) stored as cells of layer 1 ---------- */

static cw_batch_t *rider(int64_t bucket)
{
    cw_batch_t *r;
    ASSERT_OK(cw_batch_create(bucket, S, &r));
    r->layer = 1;
    return r;
}

static void test_layer(void)
{
    cw_store_t *s = NULL, *ro = NULL;
    cw_report_t *r;
    cw_diag_t d = {{0}};
    const char *p = tpath("layer.db");
    rm_db(p);
    ASSERT_OK(cw_store_open(p, NULL, &s, &d));
    cw_batch_t *b, *h;
    ASSERT_OK(cw_batch_create(8 * S, S, &b));
    dictionary(b);
    ASSERT_OK(cw_batch_add_proc(b, 1, 100, 5 * S, CW_TS_NEVER, "app.exe", NULL));
    ASSERT_OK(cw_batch_add_commit(b, &(cw_row_commit_t){1, 1, 8 * S, 8192, 1}));
    ASSERT_OK(cw_batch_add_activity(b, &(cw_row_activity_t){1, 1, 8192, 8192, 8 * S}));
    ASSERT_OK(cw_store_write(s, b, &d));
    cw_batch_free(b);
    /* A rider of an earlier second than its batch's (a heap trace lags). */
    ASSERT_OK(cw_batch_create(10 * S, S, &b));
    h = rider(9 * S);
    ASSERT_OK(cw_batch_add_commit(h, &(cw_row_commit_t){1, 2, 9 * S, 100, 2}));
    ASSERT_OK(cw_batch_add_activity(h, &(cw_row_activity_t){1, 2, 100, 100, 9 * S + 7}));
    ASSERT_OK(cw_batch_add_rider(b, h));
    ASSERT_OK(cw_store_write(s, b, &d));
    cw_batch_free(b);

    /* Two riders of one (second, process): summed into one cell. */
    ASSERT_OK(cw_batch_create(11 * S, S, &b));
    h = rider(10 * S);
    ASSERT_OK(cw_batch_add_release(h, &(cw_row_release_t){1, 2, 9 * S, 60, 1, 1}));
    ASSERT_OK(cw_batch_add_activity(h, &(cw_row_activity_t){1, 1, -60, 0, 10 * S}));
    ASSERT_OK(cw_batch_add_rider(b, h));
    h = rider(10 * S);
    ASSERT_OK(cw_batch_add_commit(h, &(cw_row_commit_t){1, 2, 10 * S, 10, 1}));
    ASSERT_OK(cw_batch_add_activity(h, &(cw_row_activity_t){1, 1, 10, 10, 10 * S + 3}));
    ASSERT_OK(cw_batch_add_rider(b, h));
    ASSERT_OK(cw_store_write(s, b, &d));
    cw_batch_free(b);
    ASSERT_EQ(sql_int(s, "SELECT count(*) FROM cells WHERE layer = 1"), 2);
    ASSERT_EQ(sql_int(s, "SELECT events FROM cells WHERE layer = 1 AND bucket = 10000000000"), 2);
    ASSERT_EQ(sql_int(s, "SELECT delta FROM cells WHERE layer = 1 AND bucket = 10000000000"), -50);

    /* A rider the store cannot take: refused, nothing of the batch stored. */
    ASSERT_OK(cw_batch_create(12 * S, S, &b));
    ASSERT_OK(cw_batch_add_commit(b, &(cw_row_commit_t){1, 1, 12 * S, 4096, 1}));
    h = rider(11 * S);
    h->width_ns = 2 * S;
    ASSERT_OK(cw_batch_add_rider(b, h));
    ASSERT_EQ(cw_store_write(s, b, &d), CW_EINVAL);
    ASSERT_TRUE(strstr(d.msg, "heap-layer") != NULL);
    cw_batch_free(b);
    ASSERT_EQ(sql_int(s, "SELECT count(*) FROM cells WHERE bucket = 12000000000"), 0);
    ASSERT_EQ(cw_store_set_layer(s, CW_LAYER_HEAP), CW_EINVAL); /* a writer's handle */

    ASSERT_OK(cw_store_open_readonly(p, &ro, &d));
    /* The commit layer: stack 1 only. */
    ASSERT_OK(cw_store_report(ro, 8 * S, 11 * S, false, &r, &d));
    cw_proc_report_t *p1 = find_proc(r, 1);
    ASSERT_TRUE(p1 != NULL);
    ASSERT_U64_EQ(p1->figs.size_bytes, 8192);
    ASSERT_TRUE(find_stack(p1, 2) == NULL);
    cw_report_free(r);
    /* The heap layer: stack 2 only, exact over the windows of its seconds. */
    ASSERT_OK(cw_store_set_layer(ro, CW_LAYER_HEAP));
    ASSERT_OK(cw_store_report(ro, 9 * S, 11 * S, false, &r, &d));
    p1 = find_proc(r, 1);
    ASSERT_TRUE(p1 != NULL);
    ASSERT_TRUE(find_stack(p1, 1) == NULL);
    cw_stack_report_t *st = find_stack(p1, 2);
    ASSERT_TRUE(st != NULL);
    ASSERT_U64_EQ(st->figs.size_bytes, 110);
    ASSERT_U64_EQ(st->figs.commit_count, 3);
    ASSERT_U64_EQ(p1->outstanding_end, 50);
    ASSERT_U64_EQ(p1->peak_bytes, 100);
    cw_report_free(r);
    /* [10, 11): the commit of 9 s is outstanding from before. */
    ASSERT_OK(cw_store_report(ro, 10 * S, 11 * S, false, &r, &d));
    p1 = find_proc(r, 1);
    ASSERT_TRUE(p1 != NULL && (st = find_stack(p1, 2)) != NULL);
    ASSERT_U64_EQ(st->figs.size_bytes, 10);
    ASSERT_U64_EQ(st->figs.types[CW_AOFI].bytes, 60);
    ASSERT_U64_EQ(st->figs.types[CW_AOFO].bytes, 40);
    ASSERT_U64_EQ(st->figs.types[CW_AIFO].bytes, 10);
    cw_report_free(r);
    ASSERT_EQ(cw_store_set_layer(ro, (cw_layer_t)7), CW_EINVAL);
    ASSERT_OK(cw_store_set_layer(ro, CW_LAYER_COMMIT));
    ASSERT_OK(cw_store_report(ro, 10 * S, 11 * S, false, &r, &d));
    ASSERT_TRUE((p1 = find_proc(r, 1)) != NULL && find_stack(p1, 2) == NULL);
    cw_report_free(r);
    integrity_ok(s);
    cw_store_close(ro);
    cw_store_close(s);
}

/* ---- naming a report's processes ------------------------------------------ */

/* A report naming 300 instances of ids 1 - 399 (every fourth left out)
 * reads their rows in one pass (finish(): cw__proc_scan_t), each its own
 * row's name, pid, start and exit (other tests' reports name fewer, each
 * looked up). The scan answers ids asked in order, without a row too. */
static void test_proc_scan(void)
{
    cw_store_t *s = NULL;
    cw_report_t *r;
    cw_diag_t d = {{0}};
    cw_batch_t *b;
    const char *p = tpath("scan.db");
    rm_db(p);
    ASSERT_OK(cw_store_open(p, NULL, &s, &d));
    ASSERT_OK(cw_batch_create(10 * S, S, &b));
    dictionary(b);
    for (uint32_t id = 1; id < 400; id++) {
        if (id % 4 == 0) continue;
        char name[32];
        snprintf(name, sizeof name, "p%u.exe", id);
        int64_t exit_ns = id % 3 == 0 ? 10 * S + (int64_t)id : CW_TS_NEVER;
        ASSERT_OK(cw_batch_add_proc(b, id, 1000 + id, 10 * S - (int64_t)id, exit_ns, name, NULL));
        ASSERT_OK(cw_batch_add_commit(b, &(cw_row_commit_t){id, 1, 10 * S, 4096u * id, 1}));
        ASSERT_OK(
            cw_batch_add_activity(b, &(cw_row_activity_t){id, 1, 4096 * id, 4096 * id, 10 * S}));
    }
    ASSERT_OK(cw_store_write(s, b, &d));
    cw_batch_free(b);
    ASSERT_OK(cw_store_report(s, INT64_MIN, INT64_MAX, false, &r, &d));
    ASSERT_EQ(r->nprocs, 300);
    for (uint32_t i = 0; i < r->nprocs; i++) {
        const cw_proc_report_t *x = &r->procs[i];
        char name[32];
        snprintf(name, sizeof name, "p%u.exe", x->id);
        ASSERT_TRUE(x->id % 4 != 0 && x->name && strcmp(x->name, name) == 0);
        ASSERT_EQ(x->pid, 1000 + x->id);
        ASSERT_EQ(x->start_ns, 10 * S - (int64_t)x->id);
        ASSERT_EQ(x->exit_ns, x->id % 3 == 0 ? 10 * S + (int64_t)x->id : CW_TS_NEVER);
        ASSERT_U64_EQ(x->figs.size_bytes, 4096u * x->id);
    }
    cw_report_free(r);
    /* The scan itself: ids in order, one without a row, one past the last. */
    cw__proc_scan_t c;
    cw_proc_info_t info;
    bool found;
    bool began = false;
    ASSERT_OK(cw__store_read_begin(s, &began, &d));
    ASSERT_OK(cw__proc_scan_begin(s, &c, 3, &d));
    ASSERT_OK(cw__proc_scan_get(&c, 3, &info, &found, &d));
    ASSERT_TRUE(found && info.pid == 1003 && strcmp(info.name, "p3.exe") == 0);
    cw_proc_info_clear(&info);
    ASSERT_OK(cw__proc_scan_get(&c, 8, &info, &found, &d)); /* no row */
    ASSERT_TRUE(!found && info.id == 8 && info.name == NULL && info.exit_ns == CW_TS_NEVER);
    ASSERT_OK(cw__proc_scan_get(&c, 9, &info, &found, &d));
    ASSERT_TRUE(found && info.pid == 1009 && info.exit_ns == 10 * S + 9);
    cw_proc_info_clear(&info);
    ASSERT_EQ(cw__proc_scan_get(&c, 5, &info, &found, &d), CW_EINVAL); /* backwards */
    ASSERT_TRUE(!found && strstr(d.msg, "out of order") != NULL);
    ASSERT_OK(cw__proc_scan_get(&c, 399, &info, &found, &d));
    ASSERT_TRUE(found && info.pid == 1399);
    cw_proc_info_clear(&info);
    ASSERT_OK(cw__proc_scan_get(&c, 500, &info, &found, &d)); /* past the last row */
    ASSERT_TRUE(!found);
    cw__proc_scan_end(&c);
    cw__store_read_end(s, began);
    cw_store_close(s);
}

int main(void)
{
    snprintf(dir, sizeof dir, "%s/cw_test_store_XXXXXX", cw_test_tmpdir());
    ASSERT_TRUE(cw_test_mkdtemp(dir) != NULL);
    test_open_refuse();
    test_versions();
    test_migrate_ended();
    test_tracking_ended();
    test_hand();
    test_generated();
    test_end_open();
    test_roll_memory();
    test_roll_bounded();
    test_prune();
    test_upgrade();
    test_layer();
    test_proc_scan();
    if (getenv("CW_BENCH")) bench();
    ASSERT_OK(cw_test_rmtree(dir));
    TEST_DONE();
}
