/* store_tiers.c - keeping the tiers: rollups of closed minutes and hours,
 * retention folding into BEFORE baselines, and the size cap.
 *
 * Called by cw_store_write() inside the batch's transaction, on a copy of
 * the tier state (cw__tier_t) that the caller keeps only if the commit
 * succeeds. Every tier holds the same history at its own granularity:
 * tier k + 1 gets tier k's rows of every bucket that closed, from the sums
 * kept in memory as tier k's rows were stored, or else read back from tier
 * k's cells over [rolled-to, closed) whatever the gap (activity rows are
 * combined in bucket order because their relative peak is ordered).
 * Retention folds a tier's cells before its horizon into one BEFORE row
 * per (proc, stack) in the process's BEFORE cell, which keeps every window
 * starting at or after the horizon exact (docs/DESIGN.md, "Storage model",
 * "Cells"). */
#include <inttypes.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "commitwatch/event.h"
#include "commitwatch/log.h"
#include "commitwatch/platform.h"
#include "store/cells.h"
#include "store/store_internal.h"

#define HOUR_NS (INT64_C(3600) * CW_NS_PER_S)
#define DAY_NS (24 * HOUR_NS)

/* The size cap never shortens a tier's retention below these. */
static const int64_t min_retention[CW_TIERS] = {HOUR_NS, DAY_NS, 7 * DAY_NS};

/* The cells of tier ?1 in [?2, ?3) in the order a rollup into buckets of
 * width ?4 adds them up: by coarse bucket, process, then bucket (the
 * activity's relative peak is ordered). The floor is written so that it
 * also holds for negative times. */
static const char SQL_ROLL_CELLS[] =
    "SELECT bucket - ((bucket % ?4) + ?4) % ?4 AS fb, proc, bucket, events, delta, relpeak, "
    "peak_off, data FROM cells WHERE tier = ?1 AND layer = 0 AND bucket >= ?2 AND bucket < ?3 "
    "ORDER BY fb, proc, bucket";
/* Retention: tier ?1's cells in [?2, ?3), a process's together. */
static const char SQL_FOLD_CELLS[] =
    "SELECT proc, bucket, data FROM cells WHERE tier = ?1 AND layer = 0 AND bucket >= ?2 "
    "AND bucket < ?3 ORDER BY proc";
static const char SQL_DEL_CELLS[] =
    "DELETE FROM cells WHERE tier = ?1 AND layer = 0 AND bucket >= ?2 AND bucket < ?3";
/* A baseline with nothing outstanding and no live commit adds nothing. */
static const char SQL_DEL_EMPTY_BASE[] =
    "DELETE FROM cells WHERE tier = ?1 AND bucket = ?2 AND layer = 0 AND cw_cell_empty(data)";

/* Prepares one of the range statements on (tier, lo, hi[, w]). */
static int range_stmt(cw_store_t *s, int id, const char *sql, int tier, int64_t lo, int64_t hi,
                      int64_t w, sqlite3_stmt **out, cw_diag_t *d)
{
    int err = cw__store_stmt(s, id, sql, out, d);
    if (err) return err;
    sqlite3_bind_int(*out, 1, tier);
    sqlite3_bind_int64(*out, 2, lo);
    sqlite3_bind_int64(*out, 3, hi);
    if (sqlite3_bind_parameter_count(*out) >= 4) sqlite3_bind_int64(*out, 4, w);
    return 0;
}

/* ---- bucket sums --------------------------------------------------------------
 *
 * A row of second_sums, minute_sums or hour_sums (schema/012_bucket_sums.sql,
 * 013_hour_sums.sql) holds the columns bytes, released and events of every
 * commit-layer cell of one raw second, minute or hour, which a ranked
 * list's keys read (store_report_keys.c). A second's row is built as its
 * cells are encoded (cw__store_ins_rows) and kept CW__SECOND_SUMS_KEEP_NS;
 * a minute's or an hour's is read back from its cells once they are
 * stored, so it says what they say whichever rollup stored them (from
 * memory, or by SQL a process at a time). All are written in the
 * transaction that stores the cells. A bucket's cells are stored once;
 * only BEFORE cells (no row) are added to later, and retention deletes
 * the rows with their cells. */
static const char SQL_SUMS_CELLS[] = "SELECT proc, bytes, released, events FROM cells"
                                     " WHERE tier = ?2 AND bucket = ?1 AND layer = 0";
static const char SQL_SUMS_PUT[] =
    "INSERT OR REPLACE INTO minute_sums(bucket, procs, data) VALUES (?1, ?2, ?3)";
static const char SQL_SUMS_DEL[] = "DELETE FROM minute_sums WHERE bucket >= ?1 AND bucket < ?2";
static const char SQL_HSUMS_PUT[] =
    "INSERT OR REPLACE INTO hour_sums(bucket, procs, data) VALUES (?1, ?2, ?3)";
static const char SQL_HSUMS_DEL[] = "DELETE FROM hour_sums WHERE bucket >= ?1 AND bucket < ?2";
static const char SQL_SECOND_PUT[] =
    "INSERT OR REPLACE INTO second_sums(bucket, procs, data) VALUES (?1, ?2, ?3)";
static const char SQL_SECOND_DEL[] = "DELETE FROM second_sums WHERE bucket < ?1";

static void sums_out_reset(cw__sums_out_t *o)
{
    o->n = 0;
    o->failed = false;
}

/* Encodes o as a row's data: a varint of flags (1: the byte figures are
 * in 4 KiB pages, as they are when every one is a whole page), then per
 * cell the process less the last one's, bytes, released and events
 * (zigzag), all varints. */
static void sums_encode(const cw__sums_out_t *o, cw_buf_t *b)
{
    bool pages = true;
    for (size_t i = 0; i < o->n && pages; i++)
        pages = o->v[i].bytes % 4096 == 0 && o->v[i].released % 4096 == 0;
    int64_t unit = pages ? 4096 : 1;
    uint32_t last = 0;
    cw_buf_varint(b, pages ? 1 : 0);
    for (size_t i = 0; i < o->n; i++) {
        const cw__sums_cell_t *c = &o->v[i];
        cw_buf_varint(b, c->proc - last);
        cw_buf_varint(b, cw_zigzag(c->bytes / unit));
        cw_buf_varint(b, cw_zigzag(c->released / unit));
        cw_buf_varint(b, cw_zigzag(c->events));
        last = c->proc;
    }
}

static int put_sums_row(cw_store_t *s, int id, const char *sql, int64_t bucket,
                        const cw__sums_out_t *o, cw_diag_t *d)
{
    cw_buf_t b = {0};
    sqlite3_stmt *st = NULL;
    int err = 0;
    if (!o->failed) sums_encode(o, &b);
    if (o->failed || b.failed)
        err = cw_diag_set(d, CW_ENOMEM, "summing a bucket's cells: out of memory");
    if (!err && !(err = cw__store_stmt(s, id, sql, &st, d))) {
        sqlite3_bind_int64(st, 1, bucket);
        sqlite3_bind_int64(st, 2, (int64_t)o->n);
        sqlite3_bind_blob(st, 3, b.p, (int)b.n, SQLITE_STATIC);
        err = cw__store_step_done(s, st, "storing a bucket's sums", d);
    }
    free(b.p);
    return err;
}

/* The row of minute_sums (k 1) or hour_sums (k 2) of bucket, from its
 * stored cells. */
static int put_tier_sums(cw_store_t *s, int k, int64_t bucket, cw_diag_t *d)
{
    cw__sums_out_t o = {0};
    sqlite3_stmt *st = NULL;
    int rc, err = cw__store_stmt(s, CW__ST_SUMS_CELLS, SQL_SUMS_CELLS, &st, d);
    if (err) return err;
    sqlite3_bind_int64(st, 1, bucket);
    sqlite3_bind_int(st, 2, k);
    while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
        if (CW_RESERVE(o.v, o.cap, o.n + 1)) {
            o.failed = true;
            break;
        }
        o.v[o.n++] = (cw__sums_cell_t){(uint32_t)sqlite3_column_int64(st, 0),
                                       sqlite3_column_int64(st, 1), sqlite3_column_int64(st, 2),
                                       sqlite3_column_int64(st, 3) /* NULL: 0 */};
    }
    if (!o.failed && rc != SQLITE_DONE)
        err = cw__store_dberr(s, "reading a bucket's cells to sum", d);
    cw__store_stmt_done(st);
    if (!err)
        err = k == 1 ? put_sums_row(s, CW__ST_SUMS_PUT, SQL_SUMS_PUT, bucket, &o, d)
                     : put_sums_row(s, CW__ST_HSUMS_PUT, SQL_HSUMS_PUT, bucket, &o, d);
    free(o.v);
    return err;
}

int cw__store_sums_prune(cw_store_t *s, const cw__tier_t *t, cw_diag_t *d)
{
    if (t[0].end == INT64_MIN) return 0;
    int64_t v = t[0].end - CW__SECOND_SUMS_KEEP_NS;
    if (t[0].horizon > v) v = t[0].horizon;
    return cw__store_put_ints(s, CW__ST_SECOND_DEL, SQL_SECOND_DEL, &v, 1,
                              "deleting old seconds' sums", d);
}

/* Minutes stored before schema 12, and hours before schema 13, have no
 * row: the migration creates the table empty and notes the tier's end
 * then in meta (sums_meta). The writer writes theirs downwards from the
 * lowest row below that end (or the end), SUMS_BACKFILL_BUCKETS a batch
 * and tier, so a database of weeks gets them over its first batches
 * without holding one up, and deletes the key when it reaches the tier's
 * first bucket. Until then those buckets are read from their cells.
 * Index j: 0 minutes (tier 1), 1 hours (tier 2). */
#define SUMS_BACKFILL_BUCKETS 10
static const char *const sums_meta[2] = {"minute_sums_below", "hour_sums_below"};
static const char *const sums_what[2] = {"minute", "hour"};
static const int sums_schema[2] = {12, 13};
static const char SQL_SUMS_LOW[] =
    "SELECT count(*), min(bucket) FROM minute_sums WHERE bucket < ?1";
static const char SQL_HSUMS_LOW[] = "SELECT count(*), min(bucket) FROM hour_sums WHERE bucket < ?1";

int cw__store_sums_start(cw_store_t *s, cw_diag_t *d)
{
    int err = 0;
    for (int j = 0; j < 2 && !err; j++) {
        char *v = NULL;
        sqlite3_stmt *st = NULL;
        s->w->sums_low[j] = INT64_MIN;
        s->w->sums_done[j] = 0;
        if ((err = cw_store_meta_get(s, sums_meta[j], &v, d)) || !v) continue;
        int64_t below = strtoll(v, NULL, 10);
        free(v);
        if ((err = j ? cw__store_stmt(s, CW__ST_HSUMS_LOW, SQL_HSUMS_LOW, &st, d)
                     : cw__store_stmt(s, CW__ST_SUMS_LOW, SQL_SUMS_LOW, &st, d)))
            break;
        sqlite3_bind_int64(st, 1, below);
        if (sqlite3_step(st) != SQLITE_ROW) err = cw__store_dberr(s, "reading the bucket sums", d);
        s->w->sums_low[j] =
            !err && sqlite3_column_int64(st, 0) ? sqlite3_column_int64(st, 1) : below;
        cw__store_stmt_done(st);
    }
    return err;
}

/* One tier's part of cw__store_sums_backfill (j as above). */
static int sums_backfill(cw_store_t *s, const cw__tier_t *t, int j, int64_t *low, cw_diag_t *d)
{
    const cw__tier_t *k = &t[j + 1];
    int64_t from = k->start > k->horizon ? k->start : k->horizon;
    if (*low == INT64_MIN) return 0;
    if (*low <= from || k->start == INT64_MIN) {
        char del[80];
        snprintf(del, sizeof del, "DELETE FROM meta WHERE key = '%s'", sums_meta[j]);
        int err = cw__store_exec(s, del, "noting the bucket sums written", d);
        if (err) return err;
        if (s->w->sums_done[j])
            CW_LOGI("%s: wrote the %s sums of %" PRIu64 " %ss stored before schema version %d "
                    "in %.2f s",
                    s->path, sums_what[j], s->w->sums_done[j], sums_what[j], sums_schema[j],
                    (double)(cw_plat_mono_ns() - s->w->sums_t0[j]) / 1e9);
        *low = INT64_MIN;
        return 0;
    }
    if (!s->w->sums_done[j]) {
        s->w->sums_t0[j] = cw_plat_mono_ns();
        CW_LOGI("%s: writing the %s sums of the %" PRId64 " %ss stored before schema version "
                "%d, %d a batch; until then they are read from their cells",
                s->path, sums_what[j], (*low - from) / k->width, sums_what[j], sums_schema[j],
                SUMS_BACKFILL_BUCKETS);
    }
    int err = 0;
    for (int i = 0; i<SUMS_BACKFILL_BUCKETS && * low> from && !err; i++) {
        *low -= k->width;
        err = put_tier_sums(s, j + 1, *low, d);
        s->w->sums_done[j]++;
    }
    return err;
}

int cw__store_sums_backfill(cw_store_t *s, const cw__tier_t *t, int64_t low[2], cw_diag_t *d)
{
    int err = sums_backfill(s, t, 0, &low[0], d);
    return err ? err : sums_backfill(s, t, 1, &low[1], d);
}

/* ---- in-memory rollups ------------------------------------------------------
 *
 * roll[k] sums the rows of the open bucket of tier k + 1 as tier k's rows
 * are stored, with the same arithmetic as the SQL rollup (sums per key,
 * activity combined per process in bucket order), and writes them into
 * tier k + 1 when the bucket closes: no read of tier k. It is used only
 * when it saw every tier-k row of its bucket (valid); otherwise (the
 * first bucket after opening a database that ends in the middle of one,
 * after a rollback, when tier k itself was rolled up by SQL, or with the
 * test hook) the bucket is rolled up by SQL as before. Either way the
 * rows of tier k + 1 are equal (test_store: roll_memory_equals_sql). */

static int keymaps_ready(cw__roll_t *r)
{
    if (cw_keymap_ready(&r->cmap)) return 0;
    if (cw_keymap_init(&r->cmap, 16) || cw_keymap_init(&r->rmap, 16) ||
        cw_keymap_init(&r->amap, 16))
        return CW_ENOMEM;
    return 0;
}

/* Frees the roll's sums (its bucket and flags stay). */
static void roll_free(cw__roll_t *r)
{
    if (cw_keymap_ready(&r->cmap)) {
        cw_keymap_free(&r->cmap);
        cw_keymap_free(&r->rmap);
        cw_keymap_free(&r->amap);
    }
    free(r->commits.v);
    free(r->releases.v);
    free(r->activity.v);
    memset(&r->commits, 0, sizeof r->commits);
    memset(&r->releases, 0, sizeof r->releases);
    memset(&r->activity, 0, sizeof r->activity);
}

static size_t roll_rows_cap(const cw__roll_t *r)
{
    return r->commits.cap + r->releases.cap + r->activity.cap;
}

/* Empties the roll; a burst's room (past CW__ROLL_KEEP_ROWS) goes back
 * to the allocator instead of staying at its peak for good. */
static void roll_clear(cw__roll_t *r)
{
    r->has = r->valid = false;
    r->commits.n = r->releases.n = r->activity.n = 0;
    if (roll_rows_cap(r) > CW__ROLL_KEEP_ROWS) {
        roll_free(r);
    } else if (cw_keymap_ready(&r->cmap)) {
        cw_keymap_clear(&r->cmap);
        cw_keymap_clear(&r->rmap);
        cw_keymap_clear(&r->amap);
    }
}

static size_t roll_bytes(const cw__roll_t *r)
{
    return cw_keymap_bytes(&r->cmap) + cw_keymap_bytes(&r->rmap) + cw_keymap_bytes(&r->amap) +
           r->commits.cap * sizeof *r->commits.v + r->releases.cap * sizeof *r->releases.v +
           r->activity.cap * sizeof *r->activity.v;
}

size_t cw__store_roll_bytes(const cw_store_t *s)
{
    size_t b =
        roll_bytes(&s->w->sorted) + s->w->cellbuf.cap + s->w->second.cap * sizeof *s->w->second.v;
    for (int k = 0; k + 1 < CW_TIERS; k++)
        b += roll_bytes(&s->w->roll[k]);
    return b;
}

void cw__store_set_roll_max(cw_store_t *s, uint32_t rows)
{
    s->w->roll_max = rows ? rows : CW__ROLL_MAX_ROWS;
}

void cw__store_roll_reset(cw_store_t *s, bool free_memory)
{
    for (int k = 0; k + 1 < CW_TIERS; k++) {
        cw__roll_t *r = &s->w->roll[k];
        roll_clear(r);
        if (!free_memory) continue;
        roll_free(r);
        memset(r, 0, sizeof *r);
    }
    if (free_memory) {
        free(s->w->sorted.commits.v);
        free(s->w->sorted.releases.v);
        free(s->w->sorted.activity.v);
        memset(&s->w->sorted, 0, sizeof s->w->sorted);
    }
}

void cw__store_set_sql_rollups(cw_store_t *s, bool on)
{
    s->test.roll_sql = on;
    cw__store_roll_reset(s, false);
}

/* Starts the bucket of tier k + 1 holding tier-k bucket x, or marks it
 * invalid when x is in another one than the open bucket (only after an
 * SQL rollup, which leaves the sums behind). tk_end: tier k's end before
 * x's rows. */
static void roll_open(cw_store_t *s, const cw__tier_t *t, int k, int64_t x, int64_t tk_end)
{
    cw__roll_t *r = &s->w->roll[k];
    int64_t cb = cw_floor_to(x, t[k + 1].width);
    if (r->has && r->bucket == cb) return;
    roll_clear(r);
    r->has = true;
    r->bucket = cb;
    /* Tier k has no row of cb yet when its end is at or before it (or it
     * holds nothing yet). */
    r->valid = !s->test.roll_sql && (tk_end == INT64_MIN || tk_end <= cb || tk_end <= t[k].start);
}

/* The row of key (k1, k2) in the dense array *v (*n rows, capacity
 * *cap) that map indexes; *added when it is new (the caller fills it).
 * NULL on ENOMEM. */
static void *roll_slot(cw_keymap_t *map, void **v, size_t *cap, uint32_t *n, size_t elem,
                       uint64_t k1, uint64_t k2, int *added)
{
    uint32_t j = cw_keymap_get(map, k1, k2, added);
    if (j == UINT32_MAX || (*added && cw_reserve(v, cap, (size_t)j + 1, elem))) return NULL;
    if (*added) *n = j + 1;
    return (char *)*v + (size_t)j * elem;
}

/* Adds tier-k rows of bucket x to roll[k] (opened by roll_open). */
/* Adds rows to r's sums for its bucket of width w. */
static int roll_into(cw__roll_t *r, int64_t w, const cw_row_commit_t *c, uint32_t nc,
                     const cw_row_release_t *rl, uint32_t nr, const cw_row_activity_t *ac,
                     uint32_t na)
{
    int added;
    if (keymaps_ready(r)) return CW_ENOMEM;
    for (uint32_t i = 0; i < nc; i++) {
        cw_row_commit_t *o =
            roll_slot(&r->cmap, (void **)&r->commits.v, &r->commits.cap, &r->commits.n, sizeof *o,
                      (uint64_t)c[i].proc << 32 | c[i].stack, 0, &added);
        if (!o) return CW_ENOMEM;
        if (added) *o = (cw_row_commit_t){.proc = c[i].proc, .stack = c[i].stack, .a = r->bucket};
        o->bytes += c[i].bytes;
        o->events += c[i].events;
    }
    for (uint32_t i = 0; i < nr; i++) {
        int64_t fa = rl[i].a == CW_TS_BEFORE ? CW_TS_BEFORE : cw_floor_to(rl[i].a, w);
        cw_row_release_t *o =
            roll_slot(&r->rmap, (void **)&r->releases.v, &r->releases.cap, &r->releases.n,
                      sizeof *o, (uint64_t)rl[i].proc << 32 | rl[i].stack, (uint64_t)fa, &added);
        if (!o) return CW_ENOMEM;
        if (added) *o = (cw_row_release_t){.proc = rl[i].proc, .stack = rl[i].stack, .a = fa};
        o->bytes += rl[i].bytes;
        o->pieces += rl[i].pieces;
        o->closed += rl[i].closed;
    }
    /* Rows come in bucket order, so per process the
     * relative peak is the best of (delta before the row + its relpeak),
     * the coarse bucket's start counting as 0 reached at its start. */
    for (uint32_t i = 0; i < na; i++) {
        cw_row_activity_t *o = roll_slot(&r->amap, (void **)&r->activity.v, &r->activity.cap,
                                         &r->activity.n, sizeof *o, ac[i].proc, 0, &added);
        if (!o) return CW_ENOMEM;
        if (added) *o = (cw_row_activity_t){.proc = ac[i].proc, .relpeak_ns = r->bucket};
        int64_t cand = o->delta + ac[i].relpeak;
        if (cand > o->relpeak) {
            o->relpeak = cand;
            o->relpeak_ns = ac[i].relpeak_ns;
        }
        o->events += ac[i].events;
        o->delta += ac[i].delta;
    }
    return 0;
}

static int roll_add(cw_store_t *s, const cw__tier_t *t, int k, const cw_row_commit_t *c,
                    uint32_t nc, const cw_row_release_t *rl, uint32_t nr,
                    const cw_row_activity_t *ac, uint32_t na)
{
    cw__roll_t *r = &s->w->roll[k];
    if (!r->valid) return 0;
    int err = roll_into(r, t[k + 1].width, c, nc, rl, nr, ac, na);
    if (err) return err;
    /* Past its bound (a burst of processes in one hour), the bucket is
     * left to the SQL rollup: tier k keeps its rows until then
     * (cw__store_retain never passes tier k + 1's end). */
    uint32_t max = s->w->roll_max ? s->w->roll_max : CW__ROLL_MAX_ROWS;
    if ((uint64_t)r->commits.n + r->releases.n + r->activity.n > max) {
        roll_free(r);
        r->commits.n = r->releases.n = r->activity.n = 0;
        r->valid = false;
    }
    return 0;
}

/* Leaves rundown rows out (the caller added them to every tier's BEFORE
 * row); returns the new count. */
static uint32_t drop_rundown(cw_row_commit_t *c, uint32_t n)
{
    uint32_t o = 0;
    for (uint32_t i = 0; i < n; i++)
        if (c[i].a != CW_TS_BEFORE) c[o++] = c[i];
    return o;
}

/* ---- the open hour -----------------------------------------------------------
 *
 * The cells of tier CW__TIER_OPEN (db.h) sum, per process, the minute
 * cells of the hour the hour tier has not rolled up yet: as each minute's
 * rows are stored, they are added to their process's cell of the hour
 * (cw__store_add_open: the releases' `a` floored to the hour, as the
 * hour's rollup floors them), so at any time those cells hold what the
 * hour's cells would hold if it closed now. The `tiers` row of that tier
 * says which hour and up to which minute ([start, end)); readers use the
 * cells only while that row matches the hour tier's end and the minute
 * tier's (cw__store_read_open), so a database another build wrote, or an
 * hour whose minutes did not all go through here, is read from its
 * minute cells as before. Every minute row goes through here, whether
 * rolled up from memory (put_level) or by SQL (flush_group), but an hour
 * is summed only when none of its minute rows was stored before its
 * first one went through here: not the hour a database is reopened in,
 * nor the hour of a rolled-back batch. When the hour closes (the hour
 * tier's end passes it) its cells are deleted: the hour tier holds the
 * same sums. */

static const char SQL_OPEN_DEL[] = "DELETE FROM cells WHERE tier = 3";
static const char SQL_OPEN_MARK[] =
    "INSERT OR REPLACE INTO tiers(tier, width_ns, start_ns, horizon_ns, end_ns, retention_ns) "
    "VALUES (3, ?1, ?2, ?3, ?4, 0)";
static const char SQL_OPEN_UNMARK[] = "DELETE FROM tiers WHERE tier = 3";

void cw__store_open_reset(cw_store_t *s, int64_t minute_end)
{
    s->w->open.bucket = INT64_MIN;
    s->w->open.valid = false;
    s->w->open.dirty = true;
    s->w->open.known_end = minute_end;
}

/* Deletes the open hour's cells and its tiers row. */
static int open_clear(cw_store_t *s, cw_diag_t *d)
{
    _Static_assert(CW__TIER_OPEN == 3, "the open hour's tier number is in its SQL");
    int err = cw__store_put_ints(s, CW__ST_OPEN_DEL, SQL_OPEN_DEL, NULL, 0,
                                 "deleting the open hour's cells", d);
    if (!err && (s->w->open.dirty || s->w->open.mark_start != INT64_MIN))
        err = cw__store_put_ints(s, CW__ST_OPEN_UNMARK, SQL_OPEN_UNMARK, NULL, 0,
                                 "saving the open hour's state", d);
    if (!err) {
        s->w->open.mark_start = s->w->open.mark_end = INT64_MIN;
        s->w->open.dirty = false;
    }
    return err;
}

/* Adds the rows of minute x (sorted, one row a key) to the open hour. */
static int open_add(cw_store_t *s, const cw__tier_t *t, int64_t x, const cw_row_commit_t *c,
                    uint32_t nc, const cw_row_release_t *rl, uint32_t nr,
                    const cw_row_activity_t *ac, uint32_t na, cw_diag_t *d)
{
    cw__open_t *o = &s->w->open;
    int64_t w = t[2].width, h = cw_floor_to(x, w);
    int err = 0;
    if (o->bucket != h) {
        if ((o->dirty || o->bucket != INT64_MIN) && (err = open_clear(s, d))) return err;
        o->bucket = h;
        o->valid = o->known_end == INT64_MIN || o->known_end <= h;
    }
    if (!o->valid) return 0;
    if (CW_RESERVE(o->rel.v, o->rel.cap, nr ? nr : 1)) return CW_ENOMEM;
    for (uint32_t i = 0; i < nr; i++) {
        o->rel.v[i] = rl[i];
        if (rl[i].a != CW_TS_BEFORE) o->rel.v[i].a = cw_floor_to(rl[i].a, w);
    }
    uint32_t n = cw_batch_merge_releases(o->rel.v, nr);
    err = cw__store_add_open(s, h, w, c, nc, o->rel.v, n, ac, na, d);
    if (o->rel.cap > CW__ROLL_KEEP_ROWS) { /* a burst's room is not kept */
        free(o->rel.v);
        memset(&o->rel, 0, sizeof o->rel);
    }
    return err;
}

int cw__store_open_sync(cw_store_t *s, const cw__tier_t *t, cw_diag_t *d)
{
    cw__open_t *o = &s->w->open;
    int err = 0;
    bool closed = o->bucket != INT64_MIN && t[2].end > o->bucket;
    if ((o->dirty || closed) && (err = open_clear(s, d))) return err;
    if (closed) {
        o->bucket = INT64_MIN;
        o->valid = false;
    }
    int64_t v[] = {t[2].width, INT64_MIN, INT64_MIN, INT64_MIN};
    if (o->valid && o->bucket == t[2].end && t[1].end > o->bucket) {
        v[1] = o->bucket;
        v[3] = t[1].end;
    }
    if (v[1] == o->mark_start && v[3] == o->mark_end) return 0;
    if (v[1] == INT64_MIN)
        err = cw__store_put_ints(s, CW__ST_OPEN_UNMARK, SQL_OPEN_UNMARK, NULL, 0,
                                 "saving the open hour's state", d);
    else
        err = cw__store_put_ints(s, CW__ST_OPEN_MARK, SQL_OPEN_MARK, v, CW_ARRAY_LEN(v),
                                 "saving the open hour's state", d);
    if (!err) {
        o->mark_start = v[1];
        o->mark_end = v[3];
    }
    return err;
}

/* Stores rows of tier k's bucket x (key order: appends to the b-tree),
 * after rolling up tier k + 1's buckets before x's, and adds them to the
 * open bucket of tier k + 1. Rows are sorted in place. */
static int put_level(cw_store_t *s, cw__tier_t *t, int k, int64_t x, cw_row_commit_t *c,
                     uint32_t nc, cw_row_release_t *rl, uint32_t nr, cw_row_activity_t *ac,
                     uint32_t na, cw_diag_t *d)
{
    int err = 0;
    bool top = k + 1 >= CW_TIERS;
    if (!top && (err = cw__store_rollup(s, t, k, cw_floor_to(x, t[k + 1].width), d))) return err;
    /* Key order; rows of one key add up, as the upserts did (a batch
     * built by hand may repeat a (proc, stack)); the aggregator's have
     * one row a key. */
    nc = drop_rundown(c, cw_batch_merge_commits(c, nc));
    nr = cw_batch_merge_releases(rl, nr);
    cw_batch_sort_activity(ac, na);
    cw__sums_out_t *so = k == 0 ? &s->w->second : NULL;
    if (so) sums_out_reset(so);
    if ((err = cw__store_ins_rows(s, k, x, c, nc, rl, nr, ac, na, so, d))) return err;
    if (so && (err = put_sums_row(s, CW__ST_SECOND_PUT, SQL_SECOND_PUT, x, so, d))) return err;
    /* A burst's room is not kept. */
    if (so && so->cap > CW__SCRATCH_KEEP_ROWS) {
        free(so->v);
        memset(so, 0, sizeof *so);
    }
    if (k == 1 &&
        ((err = put_tier_sums(s, 1, x, d)) || (err = open_add(s, t, x, c, nc, rl, nr, ac, na, d))))
        return err;
    if (k == 2 && (err = put_tier_sums(s, 2, x, d))) return err;
    if (top) return 0;
    roll_open(s, t, k, x, t[k].end);
    return roll_add(s, t, k, c, nc, rl, nr, ac, na);
}

int cw__store_put_raw(cw_store_t *s, cw__tier_t *t, const cw_batch_t *b, cw_diag_t *d)
{
    /* The batch is the caller's (const): its rows are sorted in copies. */
    cw__roll_t *scratch = &s->w->sorted;
    if (CW_RESERVE(scratch->commits.v, scratch->commits.cap, b->commits.n) ||
        CW_RESERVE(scratch->releases.v, scratch->releases.cap, b->releases.n) ||
        CW_RESERVE(scratch->activity.v, scratch->activity.cap, b->activity.n))
        return CW_ENOMEM;
    if (b->commits.n) memcpy(scratch->commits.v, b->commits.v, b->commits.n * sizeof *b->commits.v);
    if (b->releases.n)
        memcpy(scratch->releases.v, b->releases.v, b->releases.n * sizeof *b->releases.v);
    if (b->activity.n)
        memcpy(scratch->activity.v, b->activity.v, b->activity.n * sizeof *b->activity.v);
    int err = put_level(s, t, 0, b->bucket_ns, scratch->commits.v, b->commits.n,
                        scratch->releases.v, b->releases.n, scratch->activity.v, b->activity.n, d);
    /* A burst's copy is not kept for the next second; a busy second's is
     * (freeing and faulting it in again each second cost the writer 6 %). */
    if (roll_rows_cap(scratch) > CW__SCRATCH_KEEP_ROWS) roll_free(scratch);
    return err;
}

/* Stores the sums of one (coarse bucket, process) of a rollup from the
 * database (rollup_sql) in tier k + 1 and empties them. */
static int flush_group(cw_store_t *s, const cw__tier_t *t, int k, cw__roll_t *g, cw_diag_t *d)
{
    if (!g->has) return 0;
    uint32_t nc = cw_batch_merge_commits(g->commits.v, g->commits.n);
    uint32_t nr = cw_batch_merge_releases(g->releases.v, g->releases.n);
    int err = cw__store_ins_rows(s, k + 1, g->bucket, g->commits.v, nc, g->releases.v, nr,
                                 g->activity.v, g->activity.n, NULL, d);
    /* A minute's groups come in time order, so its hour's sums do too. */
    if (!err && k == 0)
        err = open_add(s, t, g->bucket, g->commits.v, nc, g->releases.v, nr, g->activity.v,
                       g->activity.n, d);
    roll_clear(g);
    return err;
}

/* Rolls tier k's rows of [up->end, target) into tier k + 1 from the
 * database: its cells in order of (coarse bucket, process, bucket),
 * decoded and summed one (coarse bucket, process) at a time with the
 * in-memory rollup's arithmetic (roll_into), so that memory holds one
 * process's stacks whatever the gap. */
static int rollup_sql(cw_store_t *s, cw__tier_t *t, int k, int64_t target, cw_diag_t *d)
{
    cw__tier_t *up = &t[k + 1];
    cw__roll_t g = {0};
    cw__cell_rows_t rows = {0};
    sqlite3_stmt *st = NULL;
    uint32_t proc = 0;
    int rc, err = range_stmt(s, CW__ST_ROLL_CELLS, SQL_ROLL_CELLS, k, up->end, target, up->width,
                             &st, d);
    if (err) return err;
    /* New rows go to tier k + 1, outside the range being read. */
    while (!err && (rc = sqlite3_step(st)) == SQLITE_ROW) {
        int64_t fb = sqlite3_column_int64(st, 0), bucket = sqlite3_column_int64(st, 2);
        uint32_t p = (uint32_t)sqlite3_column_int64(st, 1);
        if (g.has && (fb != g.bucket || p != proc)) {
            int64_t was = g.bucket;
            if ((err = flush_group(s, t, k, &g, d))) break;
            if (k <= 1 && fb != was && (err = put_tier_sums(s, k + 1, was, d))) break;
        }
        if (!g.has) {
            g.has = true;
            g.bucket = fb;
            proc = p;
        }
        rows.c.n = rows.r.n = 0;
        if ((err = cw__cell_decode(sqlite3_column_blob(st, 7), (size_t)sqlite3_column_bytes(st, 7),
                                   bucket, p, &rows, NULL))) {
            if (err == CW_EDB)
                err = cw_diag_set(d, CW_EDB, "%s: a cell of tier %d that is not one (bucket %" PRId64
                                  ", process %" PRIu32 ")", s->path, k, bucket, p);
            break;
        }
        cw_row_activity_t act, *ap = NULL;
        if (sqlite3_column_type(st, 3) != SQLITE_NULL) {
            act = (cw_row_activity_t){
                .proc = p,
                .events = (uint64_t)sqlite3_column_int64(st, 3),
                .delta = sqlite3_column_int64(st, 4),
                .relpeak = sqlite3_column_int64(st, 5),
                .relpeak_ns = bucket + sqlite3_column_int64(st, 6),
            };
            ap = &act;
        }
        err = roll_into(&g, up->width, rows.c.v, rows.c.n, rows.r.v, rows.r.n, ap, ap ? 1 : 0);
    }
    if (!err && rc != SQLITE_DONE) err = cw__store_dberr(s, "reading cells to roll up", d);
    sqlite3_reset(st);
    if (!err && g.has) {
        int64_t was = g.bucket;
        if (!(err = flush_group(s, t, k, &g, d)) && k <= 1) err = put_tier_sums(s, k + 1, was, d);
    }
    roll_free(&g);
    cw__cell_rows_free(&rows);
    return err;
}

int cw__store_rollup(cw_store_t *s, cw__tier_t *t, int k, int64_t target, cw_diag_t *d)
{
    cw__tier_t *up = &t[k + 1];
    cw__roll_t *r = &s->w->roll[k];
    bool top = k + 2 >= CW_TIERS;
    int err = 0;
    if (t[k].end == INT64_MIN || target <= up->end) return 0;
    bool in_range = r->has && r->bucket >= up->end && r->bucket < target;
    if (in_range && r->valid) {
        /* Every tier-k row of [up->end, target) is in r: rows of earlier
         * buckets were rolled up when r's bucket opened, and tier k has
         * none after it before target (rows come in time order). */
        err = put_level(s, t, k + 1, r->bucket, r->commits.v, r->commits.n, r->releases.v,
                        r->releases.n, r->activity.v, r->activity.n, d);
        roll_clear(r);
        s->test.roll_counts[0]++;
    } else {
        if (!top && (err = cw__store_rollup(s, t, k + 1, cw_floor_to(up->end, t[k + 2].width), d)))
            return err;
        if ((err = rollup_sql(s, t, k, target, d))) return err;
        s->test.roll_counts[1]++;
        /* Tier k + 1 got rows of [up->end, target) that the sums above it
         * did not see: the buckets of tier k + 2 they fall in (the open
         * one, after the rollup just above, and up to target's) go by SQL. */
        if (!top) {
            cw__roll_t *r2 = &s->w->roll[k + 1];
            roll_clear(r2);
            r2->has = true;
            r2->bucket = cw_floor_to(target - 1, t[k + 2].width);
        }
        if (in_range) roll_clear(r);
    }
    if (err) return err;
    up->end = target;
    if (!top) err = cw__store_rollup(s, t, k + 1, cw_floor_to(up->end, t[k + 2].width), d);
    return err;
}

/* Adds one process's folded rows (commits, and releases as negative
 * commits, all of bucket BEFORE) to its BEFORE cell of tier k. */
static int fold_proc(cw_store_t *s, int k, uint32_t proc, cw__cell_rows_t *acc, cw_diag_t *d)
{
    uint32_t n = cw_batch_merge_commits(acc->c.v, acc->c.n), o = 0;
    for (uint32_t i = 0; i < n; i++)
        if (acc->c.v[i].bytes || acc->c.v[i].events) acc->c.v[o++] = acc->c.v[i];
    acc->c.n = 0;
    return o ? cw__store_add_rows(s, k, CW_TS_BEFORE, proc, acc->c.v, o, NULL, 0, d) : 0;
}

/* Folds tier k's cells in [lo, hi) into its BEFORE baselines, per
 * (process, stack): the commits' bytes less the released bytes, the
 * commit events less the closed ones. */
static int fold_range(cw_store_t *s, int k, int64_t lo, int64_t hi, cw_diag_t *d)
{
    cw__cell_rows_t rows = {0}, acc = {0};
    sqlite3_stmt *st = NULL;
    uint32_t proc = 0;
    bool have = false;
    int rc, err = range_stmt(s, CW__ST_FOLD_CELLS, SQL_FOLD_CELLS, k, lo, hi, 0, &st, d);
    if (err) return err;
    while (!err && (rc = sqlite3_step(st)) == SQLITE_ROW) {
        uint32_t p = (uint32_t)sqlite3_column_int64(st, 0);
        if (have && p != proc && (err = fold_proc(s, k, proc, &acc, d))) break;
        have = true;
        proc = p;
        rows.c.n = rows.r.n = 0;
        if ((err = cw__cell_decode(sqlite3_column_blob(st, 2), (size_t)sqlite3_column_bytes(st, 2),
                                   sqlite3_column_int64(st, 1), p, &rows, NULL))) {
            if (err == CW_EDB)
                err = cw_diag_set(d, CW_EDB, "%s: a cell of tier %d that is not one (process %"
                                  PRIu32 ")", s->path, k, p);
            break;
        }
        size_t need = (size_t)acc.c.n + rows.c.n + rows.r.n;
        if (CW_RESERVE(acc.c.v, acc.c.cap, need ? need : 1)) {
            err = CW_ENOMEM;
            break;
        }
        for (uint32_t i = 0; i < rows.c.n; i++) {
            cw_row_commit_t c = rows.c.v[i];
            c.a = CW_TS_BEFORE;
            acc.c.v[acc.c.n++] = c;
        }
        for (uint32_t i = 0; i < rows.r.n; i++)
            acc.c.v[acc.c.n++] = (cw_row_commit_t){
                .proc = p,
                .stack = rows.r.v[i].stack,
                .a = CW_TS_BEFORE,
                .bytes = 0 - rows.r.v[i].bytes,
                .events = 0 - rows.r.v[i].closed,
            };
    }
    if (!err && rc != SQLITE_DONE) err = cw__store_dberr(s, "reading cells to fold", d);
    sqlite3_reset(st);
    if (!err && have) err = fold_proc(s, k, proc, &acc, d);
    cw__cell_rows_free(&rows);
    cw__cell_rows_free(&acc);
    return err;
}

/* Folds tier k's rows before its new horizon into the BEFORE baselines. */
int cw__store_retain(cw_store_t *s, cw__tier_t *t, int k, cw_diag_t *d)
{
    cw__tier_t *tk = &t[k];
    int64_t end = t[0].end;
    if (tk->retention <= 0 || end == INT64_MIN || tk->start == INT64_MIN) return 0;
    if ((uint64_t)end - (uint64_t)INT64_MIN <= (uint64_t)tk->retention) return 0;
    /* Aligned to the next tier's buckets, and never past what it has
     * rolled up (its rows come from ours). */
    int64_t align = k + 1 < CW_TIERS ? t[k + 1].width : tk->width;
    int64_t limit = k + 1 < CW_TIERS ? t[k + 1].end : tk->end;
    int64_t h = cw_floor_to(end - tk->retention, align);
    if (h > limit) h = limit;
    if (h <= tk->start || h <= tk->horizon) return 0;
    int64_t lo = tk->horizon == INT64_MIN ? INT64_MIN + 1 : tk->horizon;
    int err = fold_range(s, k, lo, h, d);
    sqlite3_stmt *st = NULL;
    if (!err && !(err = range_stmt(s, CW__ST_DEL_CELLS, SQL_DEL_CELLS, k, lo, h, 0, &st, d)))
        err = cw__store_step_done(s, st, "deleting folded cells", d);
    if (!err && k == 1) {
        int64_t v[] = {lo, h};
        err = cw__store_put_ints(s, CW__ST_SUMS_DEL, SQL_SUMS_DEL, v, 2,
                                 "deleting folded minutes' sums", d);
    }
    if (!err && k == 2) {
        int64_t v[] = {lo, h};
        err = cw__store_put_ints(s, CW__ST_HSUMS_DEL, SQL_HSUMS_DEL, v, 2,
                                 "deleting folded hours' sums", d);
    }
    if (!err && !(err = cw__store_stmt(s, CW__ST_DEL_EMPTY_BASE, SQL_DEL_EMPTY_BASE, &st, d))) {
        sqlite3_bind_int(st, 1, k);
        sqlite3_bind_int64(st, 2, CW_TS_BEFORE);
        err = cw__store_step_done(s, st, "deleting empty baselines", d);
    }
    if (!err) tk->horizon = h;
    return err;
}

/* ---- pruning ended instances ---------------------------------------------
 *
 * An instance that exited (or whose tracking ended) before every tier's
 * horizon has no row left in commits, releases or activity: its rows were
 * folded into BEFORE baselines, and an ended instance released everything,
 * so its baselines came to 0 bytes and 0 events and were deleted. Its
 * processes row (and a folded group's rows of the folded table) are then
 * deleted too, so the instance tables stay as long as retention keeps
 * history, whatever the number of short-lived processes. An instance some
 * tier still has a baseline of (its memory was not all released, e.g.
 * events lost) is kept with it. A tier kept forever (retention 0) has no
 * horizon: nothing is pruned. ?1 = the lowest horizon, ?2 = BEFORE. */
#define NO_BASELINE                                                                                \
    " AND NOT EXISTS (SELECT 1 FROM cells c WHERE c.tier IN (0, 1, 2) AND c.bucket = ?2"           \
    " AND c.proc = processes.id)"
static const char SQL_PRUNE_FOLDED[] =
    "DELETE FROM folded WHERE grp IN (SELECT id FROM processes WHERE exit_ns < ?1 "
    "AND folded IS NOT NULL" NO_BASELINE ")";
static const char SQL_PRUNE_EXITED[] = "DELETE FROM processes WHERE exit_ns < ?1" NO_BASELINE;
static const char SQL_PRUNE_ENDED[] =
    "DELETE FROM processes WHERE tracking_ended_ns < ?1 AND exit_ns IS NULL" NO_BASELINE;

/* The heap layer (layer 1: heap traces' cells, raw tier only) is not
 * folded: an instance's heap cells go all at once when the newest of them
 * is older than the raw tier's horizon ?1, so the windows the raw tier
 * answers stay exact for every instance whose cells are kept. */
static const char SQL_PRUNE_HEAP[] =
    "DELETE FROM cells WHERE tier = 0 AND layer = 1 AND proc IN (SELECT proc FROM cells "
    "WHERE tier = 0 AND layer = 1 GROUP BY proc HAVING max(bucket) < ?1)";

/* Runs SQL_PRUNE_HEAP when the raw horizon has moved an hour since. */
static int prune_heap(cw_store_t *s, const cw__tier_t *t, cw_diag_t *d)
{
    int64_t h = t[0].horizon;
    if (h == INT64_MIN || (s->w->heap_pruned_to != INT64_MIN && h < s->w->heap_pruned_to + HOUR_NS))
        return 0;
    const int64_t v[] = {h};
    int err = cw__store_put_ints(s, CW__ST_PRUNE_HEAP, SQL_PRUNE_HEAP, v, 1,
                                 "pruning the heap layer", d);
    if (!err) s->w->heap_pruned_to = h;
    return err;
}

int cw__store_prune(cw_store_t *s, const cw__tier_t *t, cw_diag_t *d)
{
    int perr = prune_heap(s, t, d);
    if (perr) return perr;
    static const struct {
        int id;
        const char *sql, *what;
        int counter;
    } step[] = {
        {CW__ST_PRUNE_FOLDED, SQL_PRUNE_FOLDED, "pruning folded instances", 1},
        {CW__ST_PRUNE_EXITED, SQL_PRUNE_EXITED, "pruning exited instances", 0},
        {CW__ST_PRUNE_ENDED, SQL_PRUNE_ENDED, "pruning ended instances", 0},
    };
    int64_t h = INT64_MAX;
    for (int k = 0; k < CW_TIERS; k++)
        if (t[k].horizon < h) h = t[k].horizon;
    if (h == INT64_MIN || h <= s->w->pruned_to) return 0;
    for (size_t i = 0; i < sizeof step / sizeof step[0]; i++) {
        sqlite3_stmt *st = NULL;
        int err = cw__store_stmt(s, step[i].id, step[i].sql, &st, d);
        if (err) return err;
        sqlite3_bind_int64(st, 1, h);
        sqlite3_bind_int64(st, 2, CW_TS_BEFORE);
        if ((err = cw__store_step_done(s, st, step[i].what, d))) return err;
        s->test.pruned[step[i].counter] += (uint64_t)sqlite3_changes(s->db);
    }
    s->w->pruned_to = h;
    return 0;
}

/* One integer from a cached PRAGMA statement. */
static int pragma_int(cw_store_t *s, int id, const char *sql, int64_t *out, cw_diag_t *d)
{
    sqlite3_stmt *st = NULL;
    int err = cw__store_stmt(s, id, sql, &st, d);
    if (err) return err;
    if (sqlite3_step(st) == SQLITE_ROW)
        *out = sqlite3_column_int64(st, 0);
    else
        err = cw__store_dberr(s, sql, d);
    sqlite3_reset(st);
    return err;
}

/* While the file (page_count * page_size, as this transaction sees it) is
 * over the cap less the WAL's share (s->wal_bound): return the free pages that folding left, then
 * halve the finest tier's retention still above its minimum (a tier kept forever starts from its
 * span) and fold. Stops when every tier is at its minimum: the cap is a target, not a promise. */
int cw__store_enforce_cap(cw_store_t *s, cw__tier_t *t, cw_diag_t *d)
{
    uint64_t size;
    int err;
    if (!s->opts.size_cap_bytes) return 0;
    /* The WAL's share of the cap (bound_wal in store.c) is not the file's. */
    uint64_t cap = s->opts.size_cap_bytes > s->wal_bound ? s->opts.size_cap_bytes - s->wal_bound
                                                         : s->opts.size_cap_bytes;
    bool vacuumed = false;
    for (;;) {
        int64_t pages, free_pages;
        if ((err = pragma_int(s, CW__ST_PAGE_COUNT, "PRAGMA page_count", &pages, d))) break;
        size = (uint64_t)pages * (uint64_t)s->page_size;
        if (size <= cap) break;
        if ((err = pragma_int(s, CW__ST_FREELIST, "PRAGMA freelist_count", &free_pages, d))) break;
        if (free_pages > 0 && !vacuumed) { /* pages freed by earlier folding come first */
            if ((err = cw__store_exec(s, "PRAGMA incremental_vacuum", "returning free pages", d)))
                break;
            vacuumed = true;
            continue;
        }
        vacuumed = false;
        int k = 0;
        while (k < CW_TIERS && t[k].retention != 0 && t[k].retention <= min_retention[k])
            k++;
        if (k == CW_TIERS) {
            if (!s->w->cap_warned)
                CW_LOGW("%s is %" PRIu64 " bytes, over its size cap of %" PRIu64 " bytes (%" PRIu64
                        " for the file, the rest for its WAL), with every tier at its shortest "
                        "retention (1 h raw, 1 d minutes, 7 d hours); raise size_cap",
                        s->path, size, s->opts.size_cap_bytes, cap);
            s->w->cap_warned = true;
            break;
        }
        int64_t r = t[k].retention;
        if (r == 0) r = t[0].end - t[k].start;
        r /= 2;
        t[k].retention = r < min_retention[k] ? min_retention[k] : r;
        if ((err = cw__store_retain(s, t, k, d))) break;
    }
    return err;
}
