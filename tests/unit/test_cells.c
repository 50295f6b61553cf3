/* test_cells.c - the cell encoding (service/store/cells.c): random cells
 * decode to exactly the rows encoded (any stack ids, a at the tier's
 * steps or not, BEFORE, byte figures in pages or not, negative baselines,
 * the extremes of every field); the table-valued functions give the same
 * rows through SQL; cw_cell_merge sums per key and leaves out what comes
 * to nothing; and bytes that are not a cell are refused (CW_EDB, an SQL
 * error), never read past their end. */
#include <sqlite3.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "commitwatch/error.h"
#include "commitwatch/event.h"
#include "rng.h"
#include "store/cells.h"
#include "test.h"

#define S INT64_C(1000000000)
#define MAXR 200

static uint64_t rnd(uint64_t n)
{
    return n ? test_rng_next() % n : 0;
}

/* A figure: mostly small, sometimes a page multiple, now and then huge
 * or negative (a baseline folded below 0 wraps). */
static bool negatives; /* this cell may hold negative figures */

static uint64_t figure(bool pages)
{
    switch (rnd(10)) {
    case 0:
        return negatives ? test_rng_next() : test_rng_next() >> 1;
    case 1:
        if (negatives) return (uint64_t) - (int64_t)(1 + rnd(1000)) * (pages ? 4096 : 1);
        /* fall through */
    default:
        return (1 + rnd(pages ? 64 : 100000)) * (pages ? 4096 : 1);
    }
}

/* n random rows of one cell, sorted and one a key, as the writer gives. */
static void gen(int64_t bucket, int64_t unit, cw_row_commit_t *c, uint32_t *nc, cw_row_release_t *r,
                uint32_t *nr)
{
    bool pages = rnd(2), aligned = rnd(4) != 0;
    negatives = rnd(3) == 0;
    uint32_t n = (uint32_t)rnd(MAXR), stack = (uint32_t)rnd(2) ? (uint32_t)rnd(UINT32_MAX) : 0;
    *nc = *nr = 0;
    for (uint32_t i = 0; i < n && *nr < MAXR - 8; i++) {
        stack += (uint32_t)(rnd(3) ? 1 + rnd(20) : 1 + rnd(1u << 30));
        if (rnd(3) && bucket != CW_TS_BEFORE)
            c[(*nc)++] = (cw_row_commit_t){7, stack, bucket, figure(pages), figure(false)};
        else if (bucket == CW_TS_BEFORE)
            c[(*nc)++] = (cw_row_commit_t){7, stack, bucket, figure(pages), figure(false)};
        if (bucket == CW_TS_BEFORE) continue;
        /* Unsigned steps: a random bucket may lie at either end of time. */
        int64_t a = (int64_t)((uint64_t)bucket - rnd(4) * (uint64_t)unit * rnd(1000));
        uint32_t k = (uint32_t)rnd(5);
        if (rnd(4) == 0)
            r[(*nr)++] = (cw_row_release_t){
                7, stack, CW_TS_BEFORE, figure(pages), figure(false), figure(false)};
        for (uint32_t j = 0; j < k; j++) {
            a = (int64_t)((uint64_t)a + (1 + rnd(100)) * (uint64_t)unit +
                          (aligned ? 0 : rnd((uint64_t)unit)));
            if (a > bucket && aligned) break;
            r[(*nr)++] =
                (cw_row_release_t){7, stack, a, figure(pages), figure(false), figure(false)};
        }
    }
}

static void test_round_trip(void)
{
    static cw_row_commit_t c[MAXR];
    static cw_row_release_t r[MAXR];
    static const int64_t units[] = {S, 60 * S, 3600 * S, 1, 7};
    size_t total = 0, rows = 0;
    for (int round = 0; round < 3000; round++) {
        test_rng_seed((uint64_t)round, 34);
        int64_t unit = units[rnd(5)];
        int64_t bucket = rnd(10) == 0   ? CW_TS_BEFORE
                         : rnd(10) == 0 ? (int64_t)test_rng_next()
                                        : INT64_C(1750000000) * S + (int64_t)rnd(86400) * unit;
        uint32_t nc, nr;
        gen(bucket, unit, c, &nc, r, &nr);
        cw_buf_t b = {0};
        int64_t sb = -1, sr = -1;
        ASSERT_OK(cw__cell_encode(&b, bucket, unit, c, nc, r, nr, &sb, &sr));
        uint64_t eb = 0, er = 0;
        for (uint32_t i = 0; i < nc; i++)
            eb += c[i].bytes;
        for (uint32_t i = 0; i < nr; i++)
            er += r[i].bytes;
        ASSERT_EQ(sb, (int64_t)eb);
        ASSERT_EQ(sr, (int64_t)er);
        cw__cell_rows_t out = {0};
        int64_t u = 0;
        ASSERT_OK(cw__cell_decode(b.p, b.n, bucket, 7, &out, &u));
        ASSERT_EQ(out.c.n, nc);
        ASSERT_EQ(out.r.n, nr);
        for (uint32_t i = 0; i < nc; i++) {
            cw_row_commit_t want = c[i];
            ASSERT_TRUE(memcmp(&out.c.v[i], &want, sizeof want) == 0);
        }
        for (uint32_t i = 0; i < nr; i++)
            ASSERT_TRUE(memcmp(&out.r.v[i], &r[i], sizeof r[i]) == 0);
        /* Every cut short of the whole is refused, none read past its end. */
        for (size_t cut = 0; cut < b.n; cut += 1 + b.n / 16) {
            cw__cell_rows_t part = {0};
            unsigned char *copy = malloc(cut ? cut : 1);
            memcpy(copy, b.p, cut);
            int err = cw__cell_decode(copy, cut, bucket, 7, &part, NULL);
            /* A cut between two entries is a shorter cell, not an error. */
            ASSERT_TRUE(err == CW_EDB || (err == 0 && part.c.n + part.r.n < nc + nr + 1));
            cw__cell_rows_free(&part);
            free(copy);
        }
        total += b.n;
        rows += nc + nr;
        cw__cell_rows_free(&out);
        free(b.p);
    }
    /* Releases in the BEFORE bucket do not exist. */
    cw_buf_t b = {0};
    cw_row_release_t one = {7, 1, 0, 4096, 1, 1};
    ASSERT_EQ(cw__cell_encode(&b, CW_TS_BEFORE, S, NULL, 0, &one, 1, NULL, NULL), CW_EINVAL);
    free(b.p);
    printf("round trip: %zu rows in %zu bytes (random figures)\n", rows, total);
}

/* A raw second's typical cell: a few stacks, page-sized commits, releases
 * of the last seconds, takes a few bytes a row. */
static void test_compact(void)
{
    int64_t bucket = INT64_C(1750000000) * S;
    cw_row_commit_t c[3] = {
        {1, 12, bucket, 4096, 1}, {1, 40, bucket, 3 * 4096, 2}, {1, 41, bucket, 65536, 1}};
    cw_row_release_t r[3] = {{1, 12, bucket - 2 * S, 4096, 1, 1},
                             {1, 12, bucket, 4096, 1, 1},
                             {1, 40, CW_TS_BEFORE, 8192, 1, 0}};
    cw_buf_t b = {0};
    ASSERT_OK(cw__cell_encode(&b, bucket, S, c, 3, r, 3, NULL, NULL));
    printf("a raw second's cell: 6 rows in %zu bytes\n", b.n);
    ASSERT_TRUE(b.n <= 6 * 5);
    free(b.p);
}

static sqlite3_stmt *prep(sqlite3 *db, const char *sql)
{
    sqlite3_stmt *st = NULL;
    if (sqlite3_prepare_v2(db, sql, -1, &st, NULL) != SQLITE_OK)
        CW_FAIL("%s: %s", sql, sqlite3_errmsg(db));
    return st;
}

static void test_sql(void)
{
    sqlite3 *db = NULL;
    static int layer = CW__LAYER_HEAP;
    ASSERT_EQ(sqlite3_open(":memory:", &db), SQLITE_OK);
    ASSERT_EQ(cw__cells_register(db, &layer), SQLITE_OK);
    int64_t bucket = INT64_C(1750000000) * S;
    cw_row_commit_t c[2] = {{1, 5, bucket, 4096, 1}, {1, 9, bucket, 8192, 2}};
    cw_row_release_t r[3] = {{1, 5, CW_TS_BEFORE, 4096, 1, 1},
                             {1, 5, bucket - 3 * S, 4096, 2, 0},
                             {1, 7, bucket, 100, 1, 1}};
    cw_buf_t x = {0}, y = {0};
    ASSERT_OK(cw__cell_encode(&x, bucket, S, c, 2, r, 3, NULL, NULL));

    sqlite3_stmt *st = prep(db, "SELECT stack, a, bytes, pieces, closed FROM "
                                "cw_release_rows(?1, ?2) ORDER BY stack, a");
    sqlite3_bind_blob(st, 1, x.p, (int)x.n, SQLITE_STATIC);
    sqlite3_bind_int64(st, 2, bucket);
    for (int i = 0; i < 3; i++) {
        ASSERT_EQ(sqlite3_step(st), SQLITE_ROW);
        ASSERT_EQ(sqlite3_column_int64(st, 0), r[i].stack);
        ASSERT_EQ(sqlite3_column_int64(st, 1), r[i].a);
        ASSERT_EQ(sqlite3_column_int64(st, 2), (int64_t)r[i].bytes);
        ASSERT_EQ(sqlite3_column_int64(st, 3), (int64_t)r[i].pieces);
        ASSERT_EQ(sqlite3_column_int64(st, 4), (int64_t)r[i].closed);
    }
    ASSERT_EQ(sqlite3_step(st), SQLITE_DONE);
    sqlite3_finalize(st);

    /* The merge: x plus its own commits negated leaves its releases only;
     * x plus x doubles every figure. */
    cw_row_commit_t neg[2] = {{1, 5, bucket, (uint64_t)-4096, (uint64_t)-1},
                              {1, 9, bucket, (uint64_t)-8192, (uint64_t)-2}};
    ASSERT_OK(cw__cell_encode(&y, bucket, S, neg, 2, NULL, 0, NULL, NULL));
    st = prep(db, "SELECT (SELECT count(*) FROM cw_commit_rows(cw_cell_merge(?1, ?2))), "
                  "(SELECT count(*) FROM cw_release_rows(cw_cell_merge(?1, ?2), 0)), "
                  "(SELECT sum(bytes) FROM cw_release_rows(cw_cell_merge(?1, ?1), 0)), "
                  "(SELECT sum(events) FROM cw_commit_rows(cw_cell_merge(?1, ?1))), "
                  "cw_cell_empty(cw_cell_merge(?2, ?2)), cw_cell_empty(?1)");
    sqlite3_bind_blob(st, 1, x.p, (int)x.n, SQLITE_STATIC);
    sqlite3_bind_blob(st, 2, y.p, (int)y.n, SQLITE_STATIC);
    ASSERT_EQ(sqlite3_step(st), SQLITE_ROW);
    ASSERT_EQ(sqlite3_column_int64(st, 0), 0);
    ASSERT_EQ(sqlite3_column_int64(st, 1), 3);
    ASSERT_EQ(sqlite3_column_int64(st, 2), 2 * (4096 + 4096 + 100));
    ASSERT_EQ(sqlite3_column_int64(st, 3), 6);
    ASSERT_EQ(sqlite3_column_int64(st, 4), 0); /* y + y is not nothing: -2x */
    ASSERT_EQ(sqlite3_column_int64(st, 5), 0);
    sqlite3_finalize(st);
    cw_buf_t e = {0};
    ASSERT_OK(cw__cell_encode(&e, bucket, S, NULL, 0, NULL, 0, NULL, NULL));
    st = prep(db, "SELECT cw_cell_empty(?1), cw_cell_empty(cw_cell_merge(?2, ?3))");
    sqlite3_bind_blob(st, 1, e.p, (int)e.n, SQLITE_STATIC);
    /* The commits of x and their negation: nothing but x's releases. */
    cw_buf_t xc = {0};
    ASSERT_OK(cw__cell_encode(&xc, bucket, S, c, 2, NULL, 0, NULL, NULL));
    sqlite3_bind_blob(st, 2, xc.p, (int)xc.n, SQLITE_STATIC);
    sqlite3_bind_blob(st, 3, y.p, (int)y.n, SQLITE_STATIC);
    ASSERT_EQ(sqlite3_step(st), SQLITE_ROW);
    ASSERT_EQ(sqlite3_column_int64(st, 0), 1);
    ASSERT_EQ(sqlite3_column_int64(st, 1), 1);
    sqlite3_finalize(st);

    /* Not a cell: an error, not rows. */
    static const unsigned char junk[] = {0x07, 0x01, 0xff, 0xff, 0xff, 0xff, 0x0f};
    st = prep(db, "SELECT count(*) FROM cw_commit_rows(?1)");
    sqlite3_bind_blob(st, 1, junk, sizeof junk, SQLITE_STATIC);
    ASSERT_TRUE(sqlite3_step(st) != SQLITE_ROW);
    sqlite3_finalize(st);
    st = prep(db, "SELECT cw_cell_merge(?1, ?1)");
    sqlite3_bind_blob(st, 1, junk, sizeof junk, SQLITE_STATIC);
    ASSERT_EQ(sqlite3_step(st), SQLITE_ERROR);
    sqlite3_finalize(st);
    free(x.p);
    free(y.p);
    free(e.p);
    free(xc.p);
    /* cw_layer() reads the handle's layer at each step, not once. */
    st = prep(db, "SELECT cw_layer()");
    ASSERT_EQ(sqlite3_step(st), SQLITE_ROW);
    ASSERT_EQ(sqlite3_column_int(st, 0), CW__LAYER_HEAP);
    sqlite3_reset(st);
    layer = CW__LAYER_COMMIT;
    ASSERT_EQ(sqlite3_step(st), SQLITE_ROW);
    ASSERT_EQ(sqlite3_column_int(st, 0), CW__LAYER_COMMIT);
    sqlite3_finalize(st);
    sqlite3_close(db);
}

int main(void)
{
    test_round_trip();
    test_compact();
    test_sql();
    TEST_DONE();
}
