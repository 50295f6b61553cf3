/* store.c - the SQLite store: opening and creating a database, refusing
 * files that are not ours, schema migrations, and writing batches (tier 0
 * rows, rollups into the minute and hour tiers, retention folding and the
 * size cap), plus metadata and the state a writer needs to continue.
 * Rollups, retention and the cap live in store_tiers.c, window queries in
 * store_report.c, the writer thread in writer.c.
 *
 * The storage model is docs/DESIGN.md, "Storage model". In short: every
 * tier holds the same history at its own granularity; tier k is exact for
 * aligned windows inside [horizon, end). A batch is one transaction: its
 * rows go into tier 0 as cells, one per (bucket, process) (cells.h;
 * rundown rows into every tier's BEFORE cells), then every minute (hour)
 * that closed is rolled up, from the sums kept in memory or from the
 * cells of tier 0 (store_tiers.c). Retention folds the rows before a
 * tier's horizon into per-(proc, stack) BEFORE baselines. The tier state lives in the `tiers` table and, for the
 * writing handle, in s->w->tiers, which changes only when a commit succeeded.
 *
 * A file that is not a commitwatch database is refused before SQLite
 * opens it for writing (its header is read by hand), so it is never
 * modified. */
#include "commitwatch/store.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "commitwatch/event.h"
#include "commitwatch/memstat.h"
#include "store/store_internal.h"
#include "commitwatch/platform.h"

/* ---- SQL ---------------------------------------------------------------- */

static const char SQL_FRAME_PUT[] = "INSERT INTO frames(id, text) VALUES (?1, ?2) "
                                    "ON CONFLICT(id) DO UPDATE SET text = excluded.text";
static const char SQL_STACK_PUT[] =
    "INSERT INTO stacks(id, frames, tag) VALUES (?1, ?2, ?3) "
    "ON CONFLICT(id) DO UPDATE SET frames = excluded.frames, tag = excluded.tag";
static const char SQL_PROC_PUT[] =
    "INSERT INTO processes(id, pid, start_ns, exit_ns, name, cmdline, tracking_ended_ns) "
    "VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7) ON CONFLICT(id) DO UPDATE SET pid = excluded.pid, "
    "start_ns = excluded.start_ns, exit_ns = excluded.exit_ns, name = excluded.name, "
    "cmdline = excluded.cmdline, tracking_ended_ns = excluded.tracking_ended_ns";
static const char SQL_TIER_PUT[] = "UPDATE tiers SET start_ns = ?2, horizon_ns = ?3, end_ns = ?4, "
                                   "retention_ns = ?5 WHERE tier = ?1";
static const char SQL_CORRECTION_PUT[] =
    "UPDATE processes SET corrections = corrections + 1, "
    "corrected_committed = corrected_committed + ?2, "
    "corrected_decommitted = corrected_decommitted + ?3, last_correction_ns = ?4 WHERE id = ?1";
static const char SQL_LOSS_PUT[] =
    "INSERT INTO losses(ts_ns, events_total, lost_events, drift_bytes) VALUES (?1, ?2, ?3, ?4)";
/* Continuing a database (cw_store_load_state). */
static const char SQL_FRAMES_ALL[] = "SELECT id, text FROM frames ORDER BY id";
static const char SQL_STACKS_ALL[] = "SELECT id, frames FROM stacks ORDER BY id";
static const char SQL_MAX_PROC[] = "SELECT coalesce(max(id), 0) FROM processes";
static const char SQL_LAST_LOSS[] =
    "SELECT events_total, lost_events, drift_bytes FROM losses ORDER BY rowid DESC LIMIT 1";

/* ---- opening the writer's database ---------------------------------------- */

static int put_tier(cw_store_t *s, int k, const cw__tier_t *t, cw_diag_t *d)
{
    const int64_t v[] = {k, t->start, t->horizon, t->end, t->retention};
    return cw__store_put_ints(s, CW__ST_TIER_PUT, SQL_TIER_PUT, v, CW_ARRAY_LEN(v),
                              "saving a tier's state", d);
}

/* Takes the retention settings and the last source counters. */
static int load_writer_state(cw_store_t *s, cw_diag_t *d)
{
    sqlite3_stmt *st = NULL;
    int err = cw__store_read_tiers(s, s->w->tiers, d);
    if (err) return err;
    if ((err = cw__store_exec(s, "BEGIN IMMEDIATE", "starting a transaction", d))) return err;
    for (int k = 0; k < CW_TIERS && !err; k++) {
        s->w->tiers[k].retention = s->opts.retention_ns[k];
        err = put_tier(s, k, &s->w->tiers[k], d);
    }
    if (!err) err = cw__store_exec(s, "COMMIT", "saving the retention settings", d);
    if (err) {
        sqlite3_exec(s->db, "ROLLBACK", NULL, NULL, NULL);
        return err;
    }
    if (sqlite3_prepare_v2(s->db, SQL_LAST_LOSS, -1, &st, NULL) != SQLITE_OK)
        return cw__store_dberr(s, "reading the source counters", d);
    if (sqlite3_step(st) == SQLITE_ROW) {
        s->w->last_total = (uint64_t)sqlite3_column_int64(st, 0);
        s->w->last_lost = (uint64_t)sqlite3_column_int64(st, 1);
        s->w->last_drift = sqlite3_column_int64(st, 2);
    }
    sqlite3_finalize(st);
    return 0;
}

/* The writer's release slot: the rollup sums and their memstat figure. */
static void writer_release(cw_store_t *s)
{
    if (!s->w) return;
    cw__store_roll_reset(s, true);
    cw_mem_set(CW_MEM_STORE_ROLLUPS, 0);
    free(s->w->cellbuf.p);
    free(s->w->second.v);
    free(s->w->open.rel.v);
    free(s->w);
    s->w = NULL;
}

/* Opens (creates, migrates to target) the writer's database; continues
 * its tier state when it is at the current schema. */
static int open_writer(const char *path, const cw_store_opts_t *opts, int target, cw_store_t **out,
                       cw_diag_t *d)
{
    cw_store_t *s = NULL;
    int err = cw__db_open(path, opts, false, false, target, &s, d);
    if (err) return err;
    if (!(s->w = calloc(1, sizeof *s->w))) {
        cw_store_close(s);
        return cw_diag_set(d, CW_ENOMEM, "out of memory opening %s", path);
    }
    s->w->pruned_to = INT64_MIN;
    s->w->heap_pruned_to = INT64_MIN;
    s->w->open.mark_start = s->w->open.mark_end = INT64_MIN;
    cw__db_on_release(s, CW__REL_WRITER, writer_release);
    if (target == (int)cw__schema_count &&
        ((err = load_writer_state(s, d)) || (err = cw__store_upgrade_cells(s, d)) ||
         (err = cw__store_upgrade_folded(s, d)) || (err = cw__store_sums_start(s, d)))) {
        cw_store_close(s);
        return err;
    }
    /* The open hour's cells of an earlier run are not trusted: the first
     * batch deletes them, and the hour the minute tier ends in is read
     * from its minute cells. */
    cw__store_open_reset(s, s->w->tiers[1].end);
    *out = s;
    return 0;
}

int cw_store_open(const char *path, const cw_store_opts_t *opts, cw_store_t **out, cw_diag_t *d)
{
    return open_writer(path, opts, (int)cw__schema_count, out, d);
}

int cw__store_create_at_version(const char *path, int version, cw_diag_t *d)
{
    cw_store_t *s = NULL;
    if (version < 1 || version > (int)cw__schema_count)
        return cw_diag_set(d, CW_EINVAL, "schema version %d does not exist", version);
    int err = cw__db_check_new(path, d);
    if (!err) err = open_writer(path, NULL, version, &s, d);
    cw_store_close(s);
    return err;
}

/* ---- continuing a database ------------------------------------------------ */
/* Interns every stored frame, then every stored stack, checking that the
 * ids come out equal (they are dense from 1 and 0). */
static int load_dictionary(cw_store_t *s, cw_stacks_t *stacks, cw_diag_t *d)
{
    sqlite3_stmt *st = NULL;
    uint32_t *fr = NULL, id;
    size_t frcap = 0;
    int err = 0, rc;
    if (sqlite3_prepare_v2(s->db, SQL_FRAMES_ALL, -1, &st, NULL))
        return cw__store_dberr(s, "reading frames", d);
    while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
        const char *text = (const char *)sqlite3_column_text(st, 1);
        int len = sqlite3_column_bytes(st, 1);
        if ((err = cw_stacks_intern_frame(stacks, text ? text : "", (size_t)len, &id))) goto out;
        if (id != (uint32_t)sqlite3_column_int64(st, 0)) {
            err = cw_diag_set(d, CW_EDB, "%s: stored frame ids are not dense (frame %lld)", s->path,
                              (long long)sqlite3_column_int64(st, 0));
            goto out;
        }
    }
    if (rc != SQLITE_DONE) goto dberr;
    sqlite3_finalize(st);
    if (sqlite3_prepare_v2(s->db, SQL_STACKS_ALL, -1, &st, NULL)) goto dberr;
    while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
        const unsigned char *blob = sqlite3_column_blob(st, 1);
        uint32_t n = (uint32_t)sqlite3_column_bytes(st, 1) / 4;
        if (CW_RESERVE(fr, frcap, n ? n : 1)) {
            err = CW_ENOMEM;
            goto out;
        }
        cw__store_frames_decode(blob, n, fr);
        if ((err = cw_stacks_intern(stacks, fr, n, &id))) goto out;
        if (id != (uint32_t)sqlite3_column_int64(st, 0)) {
            err = cw_diag_set(d, CW_EDB, "%s: stored stack ids are not dense (stack %lld)", s->path,
                              (long long)sqlite3_column_int64(st, 0));
            goto out;
        }
    }
    if (rc != SQLITE_DONE) goto dberr;
    goto out;
dberr:
    err = cw__store_dberr(s, "reading stacks", d);
out:
    sqlite3_finalize(st);
    free(fr);
    return err;
}

int cw_store_load_state(cw_store_t *s, cw_stacks_t *stacks, uint32_t *next_proc_id, int64_t *end_ns,
                        cw_diag_t *d)
{
    cw__tier_t t[CW_TIERS];
    int64_t maxid;
    int err = load_dictionary(s, stacks, d);
    if (!err) err = cw__store_query_int(s, SQL_MAX_PROC, &maxid, d);
    if (!err) err = cw__store_read_tiers(s, t, d);
    if (err) return err;
    *next_proc_id = (uint32_t)maxid + 1;
    *end_ns = t[0].end;
    return 0;
}

/* ---- writing a batch -------------------------------------------------------- */

static int put_dictionary(cw_store_t *s, const cw_batch_t *b, cw_diag_t *d)
{
    sqlite3_stmt *st = NULL;
    unsigned char *blob = NULL;
    size_t blobcap = 0;
    int err = 0;
    for (uint32_t i = 0; i < b->frames.n && !err; i++) {
        if ((err = cw__store_stmt(s, CW__ST_FRAME_PUT, SQL_FRAME_PUT, &st, d))) break;
        sqlite3_bind_int64(st, 1, b->frames.v[i].id);
        sqlite3_bind_text(st, 2, b->frames.v[i].text, -1, SQLITE_STATIC);
        err = cw__store_step_done(s, st, "storing a frame", d);
    }
    for (uint32_t i = 0; i < b->stacks.n && !err; i++) {
        const cw_row_stack_t *r = &b->stacks.v[i];
        if (CW_RESERVE(blob, blobcap, (size_t)r->nframes * 4 + 1)) {
            err = CW_ENOMEM;
            break;
        }
        cw__store_frames_encode(r->frames, r->nframes, blob);
        if ((err = cw__store_stmt(s, CW__ST_STACK_PUT, SQL_STACK_PUT, &st, d))) break;
        sqlite3_bind_int64(st, 1, r->id);
        sqlite3_bind_blob(st, 2, blob, (int)r->nframes * 4, SQLITE_STATIC);
        sqlite3_bind_text(st, 3, r->tag ? r->tag : "Other", -1, SQLITE_STATIC);
        err = cw__store_step_done(s, st, "storing a stack", d);
    }
    for (uint32_t i = 0; i < b->procs.n && !err; i++) {
        const cw_row_proc_t *r = &b->procs.v[i];
        if ((err = cw__store_stmt(s, CW__ST_PROC_PUT, SQL_PROC_PUT, &st, d))) break;
        sqlite3_bind_int64(st, 1, r->id);
        sqlite3_bind_int64(st, 2, r->pid);
        sqlite3_bind_int64(st, 3, r->start_ns);
        /* The end of tracking is not an exit (schema/003): the instance's
         * end time goes to its own column, exit_ns stays NULL. */
        if (r->exit_ns != CW_TS_NEVER)
            sqlite3_bind_int64(st, r->tracking_ended ? 7 : 4, r->exit_ns);
        sqlite3_bind_text(st, 5, r->name ? r->name : "", -1, SQLITE_STATIC);
        if (r->cmdline) sqlite3_bind_text(st, 6, r->cmdline, -1, SQLITE_STATIC);
        err = cw__store_step_done(s, st, "storing a process", d);
    }
    free(blob);
    return err;
}

/* Rundown commits add to every tier's BEFORE cell (several batches may
 * carry rundown of one (proc, stack)). */
static int put_rundown(cw_store_t *s, const cw_batch_t *b, cw_diag_t *d)
{
    int err = 0;
    for (uint32_t i = 0; i < b->commits.n && !err; i++)
        if (b->commits.v[i].a == CW_TS_BEFORE)
            for (int k = 0; k < CW_TIERS && !err; k++)
                err = cw__store_add_rows(s, k, CW_TS_BEFORE, b->commits.v[i].proc,
                                         &b->commits.v[i], 1, NULL, 0, d);
    return err;
}

/* Counts a batch's corrections on their instances (schema
 * 007_corrections). Each instance's row is stored by then: a correction
 * rides in the batch of its bucket, which is that of the instance's start
 * or later (agg.h), and put_dictionary stored this batch's. */
static int put_corrections(cw_store_t *s, const cw_batch_t *b, cw_diag_t *d)
{
    int err = 0;
    for (uint32_t i = 0; i < b->corrections.n && !err; i++) {
        const cw_row_correction_t *r = &b->corrections.v[i];
        const int64_t v[] = {r->proc, (int64_t)r->committed, (int64_t)r->decommitted, r->ts_ns};
        err = cw__store_put_ints(s, CW__ST_CORRECTION_PUT, SQL_CORRECTION_PUT, v, CW_ARRAY_LEN(v),
                                 "storing a correction", d);
    }
    return err;
}

/* Records the source counters when lost events or drift changed. */
static int put_losses(cw_store_t *s, const cw_batch_t *b, uint64_t last_lost, int64_t last_drift,
                      cw_diag_t *d)
{
    if (b->events_lost == last_lost && b->drift_bytes == last_drift) return 0;
    const int64_t v[] = {b->bucket_ns + b->width_ns, (int64_t)b->events_total,
                         (int64_t)b->events_lost, b->drift_bytes};
    return cw__store_put_ints(s, CW__ST_LOSS_PUT, SQL_LOSS_PUT, v, CW_ARRAY_LEN(v),
                              "storing source counters", d);
}

static int check_batch(cw_store_t *s, const cw__tier_t *t, const cw_batch_t *b, cw_diag_t *d)
{
    if (s->readonly)
        return cw_diag_set(d, CW_EINVAL, "%s was opened read-only; cannot store a batch", s->path);
    if (!s->w)
        return cw_diag_set(d, CW_EINVAL, "%s was opened for the side tables; cannot store a batch",
                           s->path);
    if (b->width_ns != s->w->tiers[0].width || b->bucket_ns == INT64_MIN ||
        cw_floor_to(b->bucket_ns, b->width_ns) != b->bucket_ns)
        return cw_diag_set(d, CW_EINVAL,
                           "batch bucket %" PRId64 " of width %" PRId64 " is not a raw-tier "
                           "bucket (width %" PRId64 ")",
                           b->bucket_ns, b->width_ns, s->w->tiers[0].width);
    if (t[0].end != INT64_MIN && b->bucket_ns < t[0].end)
        return cw_diag_set(d, CW_EINVAL,
                           "batch for bucket %" PRId64 " arrives after buckets up to %" PRId64
                           " were stored in %s; buckets are written in time order (replay an "
                           "old trace into a new database, or with --rebase-now)",
                           b->bucket_ns, t[0].end, s->path);
    for (uint32_t i = 0; i < b->commits.n; i++)
        if (b->commits.v[i].a != CW_TS_BEFORE && b->commits.v[i].a != b->bucket_ns)
            return cw_diag_set(d, CW_EINVAL,
                               "batch for bucket %" PRId64 " holds a commit row "
                               "of another bucket (%" PRId64 ")",
                               b->bucket_ns, b->commits.v[i].a);
    /* An activity row is a bucket's events of its process: at least one
     * (the ranked reports' keys cache tells activity by its events). */
    for (uint32_t i = 0; i < b->activity.n; i++)
        if (b->activity.v[i].events == 0)
            return cw_diag_set(d, CW_EINVAL,
                               "batch for bucket %" PRId64 " holds an activity row of instance "
                               "%" PRIu32 " with no event",
                               b->bucket_ns, b->activity.v[i].proc);
    return 0;
}

/* One batch inside the caller's transaction, on its copy t of the tiers:
 * the dictionary, the rundown rows, tier 0 with the minute (hour) it
 * closes rolled up, retention, the source counters. */
static int write_one(cw_store_t *s, cw__tier_t *t, const cw_batch_t *b, uint64_t *last_lost,
                     int64_t *last_drift, cw_diag_t *d)
{
    int err = check_batch(s, t, b, d);
    if (err || (err = put_dictionary(s, b, d)) || (err = put_rundown(s, b, d)) ||
        (err = cw__store_put_folded(s, b, d)) || (err = cw__store_put_maps(s, b, d)) ||
        (err = put_corrections(s, b, d)))
        return err;
    if (t[0].start == INT64_MIN)
        for (int k = 0; k < CW_TIERS; k++) {
            t[k].start = cw_floor_to(b->bucket_ns, t[k].width);
            if (k) t[k].end = t[k].start;
        }
    if ((err = cw__store_put_raw(s, t, b, d))) return err;
    for (uint32_t i = 0; i < b->riders.n && !err; i++)
        err = cw__store_put_layer(s, b->riders.v[i], d);
    if (err) return err;
    t[0].end = b->bucket_ns + b->width_ns;
    if ((err = cw__store_rollup(s, t, 0, cw_floor_to(t[0].end, t[1].width), d))) return err;
    for (int k = 0; k < CW_TIERS && !err; k++)
        err = cw__store_retain(s, t, k, d);
    if (!err) err = cw__store_sums_prune(s, t, d);
    if (err || (err = put_losses(s, b, *last_lost, *last_drift, d))) return err;
    *last_lost = b->events_lost;
    *last_drift = b->drift_bytes;
    return 0;
}

int cw_store_write_many(cw_store_t *s, const cw_batch_t *const *b, size_t n, cw_diag_t *d)
{
    cw__tier_t t[CW_TIERS];
    int err = 0;
    if (!n) return 0;
    if (s->readonly)
        return cw_diag_set(d, CW_EINVAL, "%s was opened read-only; cannot store a batch", s->path);
    if (!s->w)
        return cw_diag_set(d, CW_EINVAL, "%s was opened for the side tables; cannot store a batch",
                           s->path);
    uint64_t last_lost = s->w->last_lost;
    int64_t last_drift = s->w->last_drift;
    int64_t sums_low[2] = {s->w->sums_low[0], s->w->sums_low[1]};
    memcpy(t, s->w->tiers, sizeof t);
    if ((err = cw__store_exec(s, "BEGIN IMMEDIATE", "starting a transaction", d))) return err;
    for (size_t i = 0; i < n && !err; i++)
        err = write_one(s, t, b[i], &last_lost, &last_drift, d);
    if (err || (err = cw__store_enforce_cap(s, t, d)) || (err = cw__store_prune(s, t, d)) ||
        (err = cw__store_prune_maps(s, t, d)) || (err = cw__store_open_sync(s, t, d)) ||
        (err = cw__store_sums_backfill(s, t, sums_low, d)))
        goto fail;
    for (int k = 0; k < CW_TIERS && !err; k++)
        if (memcmp(&t[k], &s->w->tiers[k], sizeof t[k]) != 0) err = put_tier(s, k, &t[k], d);
    if (err || (err = cw__store_exec(s, "COMMIT", "committing a batch", d))) goto fail;
    memcpy(s->w->tiers, t, sizeof t);
    memcpy(s->w->sums_low, sums_low, sizeof sums_low);
    s->test.transactions++;
    s->w->last_total = b[n - 1]->events_total;
    s->w->last_lost = last_lost;
    s->w->last_drift = last_drift;
    cw_mem_set(CW_MEM_STORE_ROLLUPS, (int64_t)cw__store_roll_bytes(s));
    return 0;
fail:
    sqlite3_exec(s->db, "ROLLBACK", NULL, NULL, NULL);
    s->w->pruned_to = INT64_MIN; /* the prune's deletes were rolled back too */
    s->w->heap_pruned_to = INT64_MIN;
    /* The sums hold rows that were rolled back: the buckets they were
     * for go by SQL from what the database holds. */
    cw__store_roll_reset(s, false);
    cw__store_open_reset(s, s->w->tiers[1].end);
    cw_mem_set(CW_MEM_STORE_ROLLUPS, (int64_t)cw__store_roll_bytes(s));
    return err;
}

int cw_store_write(cw_store_t *s, const cw_batch_t *b, cw_diag_t *d)
{
    return cw_store_write_many(s, &b, 1, d);
}
