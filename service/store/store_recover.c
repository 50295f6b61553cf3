/* store_recover.c - ending the instances a run left open when it did not
 * stop (cw_store_end_open; docs/DESIGN.md "End of a run").
 *
 * A run that stops ends every instance still alive where its data ends:
 * their memory is released in the bucket after the last one, E, and
 * `tracking_ended_ns` = E (track/tracker.c, cw_tracker_end_all). A run
 * killed outright (SIGKILL, the OOM killer, a power cut) leaves them open:
 * alive for ever, their memory outstanding in every later window, beside
 * the instances a restart's rundown makes of the same processes (counted
 * twice), and never pruned. Before the next run stores anything, this
 * writes the batch that stop would have written: for each open instance,
 * per (stack, commit bucket), the bytes still outstanding at E, released
 * at E, and the instance ended there.
 *
 * What is outstanding comes from the stored rows, per the tier that still
 * knows the commit's bucket: retention folds a tier's rows before its
 * horizon into BEFORE baselines, and every tier's horizon is aligned to
 * the next tier's buckets and never past what it rolled up (store_tiers.c,
 * cw__store_retain). So for raw horizon H0, minute horizon H1 and hour
 * horizon H2 (H0 >= H1 >= H2):
 *   a >= H0        the raw tier's rows, exactly;
 *   H1 <= a < H0   the minute tier's minute of a (its commits are all
 *                  there: H0 <= the minute tier's end);
 *   H2 <= a < H1   the hour tier's hour of a;
 *   a < H2         the hour tier's BEFORE row (baseline and rundown).
 * Releases of such commits are in the tier that holds the commit up to
 * that tier's end, and in the raw tier after it (releases carry the raw
 * bucket of their commit, so the raw tier knows the class of each). The
 * release rows written carry the commit's bucket at that precision (a
 * minute's start for the minute class, ...): every tier then classes
 * them as the rows they release, as it classes a live release.
 *
 * Counts: a release row says how many pieces went and how many commit
 * events closed; the rows do not keep how many pieces an open event is
 * in, so each open event is taken as one piece (pieces = closed = open
 * events). Windows that end at or before E keep exactly the figures they
 * had (their AIFO/AOFO counts add the pieces and take off the closed). */
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "commitwatch/event.h"
#include "store/store_internal.h"

/* ?1 H0, ?2 L1, ?3 L2 (the class bounds, below), ?4 minute tier's end,
 * ?5 hour tier's end, ?6 BEFORE, ?7 minute width, ?8 hour width, ?9 the
 * tier whose BEFORE rows hold the BEFORE class, ?10 the hour straddling
 * H0 (or BEFORE: none).
 * LVL: the class of a release's commit bucket a (0 raw, 1 minute, 2 hour,
 * 3 BEFORE); SRC: the tier that holds the class's commits; CLS: a at the
 * class's precision. */
/* clang-format off */
#define LVL "(CASE WHEN a = ?6 OR a < ?3 THEN 3 WHEN a < ?2 THEN 2 WHEN a < ?1 THEN 1 ELSE 0 END)"
#define SRC "(CASE WHEN a = ?6 OR a < ?3 THEN ?9 WHEN a < ?2 THEN 2 WHEN a < ?1 THEN 1 ELSE 0 END)"
#define CLS "(CASE WHEN a = ?6 OR a < ?3 THEN ?6" \
            " WHEN a < ?2 THEN a - ((a % ?8) + ?8) % ?8" \
            " WHEN a < ?1 THEN a - ((a % ?7) + ?7) % ?7 ELSE a END)"
#define OPEN "proc IN (SELECT id FROM processes WHERE exit_ns IS NULL AND tracking_ended_ns IS NULL)"

/* Per (proc, stack, class): commits less releases. A class's releases come
 * from the tier that holds its commits up to that tier's end, and after
 * it from the finer tiers (each up to its own end). */
static const char SQL_OUTSTANDING[] =
    "SELECT proc, stack, cls, SUM(b), SUM(e) FROM ("
    " SELECT proc, stack, bucket AS cls, bytes AS b, events AS e FROM commits"
    "  WHERE tier = 0 AND bucket != ?6 AND bucket >= ?1 AND " OPEN
    " UNION ALL SELECT proc, stack, bucket, bytes, events FROM commits"
    "  WHERE tier = 1 AND bucket != ?6 AND bucket >= ?2 AND bucket < ?1 AND " OPEN
    " UNION ALL SELECT proc, stack, bucket, bytes, events FROM commits"
    "  WHERE tier = 2 AND bucket != ?6 AND bucket >= ?3 AND bucket < ?2 AND " OPEN
    " UNION ALL SELECT proc, stack, ?6, bytes, events FROM commits"
    "  WHERE tier = ?9 AND bucket = ?6 AND " OPEN
    " UNION ALL SELECT proc, stack, " CLS ", -bytes, -closed FROM releases"
    "  WHERE tier = 0 AND (" SRC " = 0 OR f >= ?4) AND " OPEN
    " UNION ALL SELECT proc, stack, " CLS ", -bytes, -closed FROM releases"
    "  WHERE tier = 1 AND f < ?4 AND (" SRC " = 1 OR (" SRC " = 2 AND f >= ?5)) AND " OPEN
    " UNION ALL SELECT proc, stack, " CLS ", -bytes, -closed FROM releases"
    "  WHERE tier = 2 AND f < ?5 AND " SRC " = 2 AND " OPEN
    /* The hour ?10 that holds H0 (when the hour class comes next to the
     * raw one): its hour rows hold the raw class's commits in it too, and
     * its hour releases those of them released before the hour tier's
     * end. */
    " UNION ALL SELECT proc, stack, ?10, -bytes, -events FROM commits"
    "  WHERE ?10 != ?6 AND tier = 0 AND bucket >= ?1 AND bucket < ?10 + ?8 AND " OPEN
    " UNION ALL SELECT proc, stack, ?10, bytes, closed FROM releases"
    "  WHERE ?10 != ?6 AND tier = 0 AND a >= ?1 AND a < ?10 + ?8 AND f < ?5 AND " OPEN
    ") GROUP BY proc, stack, cls ORDER BY proc, stack, cls";
/* clang-format on */
static const char SQL_OPEN_PROCS[] =
    "SELECT id, pid, start_ns, name, cmdline FROM processes"
    " WHERE exit_ns IS NULL AND tracking_ended_ns IS NULL ORDER BY id";

/* Adds the release rows of every open instance to b; *bytes gets their
 * sum, *odd the (proc, stack, bucket) sums that came out negative (rows
 * that do not add up: not released, counted). */
static int add_releases(cw_store_t *s, const cw__tier_t *t, cw_batch_t *b, uint64_t *bytes,
                        uint64_t *odd, cw_diag_t *d)
{
    sqlite3_stmt *st = NULL;
    int rc = SQLITE_DONE, err = 0;
    if (sqlite3_prepare_v2(s->db, SQL_OUTSTANDING, -1, &st, NULL) != SQLITE_OK)
        return cw__store_dberr(s, "reading what the last run left outstanding", d);
    /* The classes, finest first: raw a >= H0; a minute from L1 = H1 up to
     * H0 when the minute tier was folded less far (else none: L1 = H0); an
     * hour from L2 = H2 up to L1 likewise; BEFORE below L2, from the
     * BEFORE rows of the last tier used (its fold and the rundown). The
     * tiers' retention need not grow with their width. */
    int64_t l1 = t[1].horizon < t[0].horizon ? t[1].horizon : t[0].horizon;
    int64_t l2 = t[2].horizon < l1 ? t[2].horizon : l1;
    int before = t[2].horizon < l1 ? 2 : t[1].horizon < t[0].horizon ? 1 : 0;
    /* With no minute class, H0 (minute-aligned) may fall inside an hour. */
    int64_t straddled = CW_TS_BEFORE;
    if (l1 == t[0].horizon && l2 < l1 && cw_floor_to(l1, t[2].width) < l1)
        straddled = cw_floor_to(l1, t[2].width);
    sqlite3_bind_int64(st, 1, t[0].horizon);
    sqlite3_bind_int64(st, 2, l1);
    sqlite3_bind_int64(st, 3, l2);
    sqlite3_bind_int64(st, 4, t[1].end);
    sqlite3_bind_int64(st, 5, t[2].end);
    sqlite3_bind_int64(st, 6, CW_TS_BEFORE);
    sqlite3_bind_int64(st, 7, t[1].width);
    sqlite3_bind_int64(st, 8, t[2].width);
    sqlite3_bind_int(st, 9, before);
    sqlite3_bind_int64(st, 10, straddled);
    while (!err && (rc = sqlite3_step(st)) == SQLITE_ROW) {
        int64_t n = sqlite3_column_int64(st, 3), ev = sqlite3_column_int64(st, 4);
        if (n == 0 && ev == 0) continue;
        if (n < 0 || ev < 0 || (n > 0 && ev == 0)) {
            (*odd)++;
            if (n <= 0) continue;
        }
        cw_row_release_t r = {.proc = (uint32_t)sqlite3_column_int64(st, 0),
                              .stack = (uint32_t)sqlite3_column_int64(st, 1),
                              .a = sqlite3_column_int64(st, 2),
                              .bytes = (uint64_t)n,
                              .pieces = ev > 0 ? (uint64_t)ev : 1,
                              .closed = ev > 0 ? (uint64_t)ev : 0};
        if (cw_batch_add_release(b, &r)) err = CW_ENOMEM;
        *bytes += (uint64_t)n;
    }
    if (!err && rc != SQLITE_DONE)
        err = cw__store_dberr(s, "reading what the last run left outstanding", d);
    sqlite3_finalize(st);
    return err;
}

/* Adds every open instance, ended at b's bucket, and its activity row
 * (one event, its outstanding released: the bucket's delta) to b; *n gets
 * their number. b->releases are in proc order. */
static int add_procs(cw_store_t *s, cw_batch_t *b, uint32_t *n, cw_diag_t *d)
{
    sqlite3_stmt *st = NULL;
    int rc = SQLITE_DONE, err = 0;
    uint32_t j = 0;
    if (sqlite3_prepare_v2(s->db, SQL_OPEN_PROCS, -1, &st, NULL) != SQLITE_OK)
        return cw__store_dberr(s, "listing the instances the last run left open", d);
    while (!err && (rc = sqlite3_step(st)) == SQLITE_ROW) {
        uint32_t id = (uint32_t)sqlite3_column_int64(st, 0);
        const char *name = (const char *)sqlite3_column_text(st, 3);
        const char *cmdline = (const char *)sqlite3_column_text(st, 4);
        if (cw_batch_add_proc(b, id, (uint32_t)sqlite3_column_int64(st, 1),
                              sqlite3_column_int64(st, 2), b->bucket_ns, name ? name : "",
                              cmdline)) {
            err = CW_ENOMEM;
            break;
        }
        b->procs.v[b->procs.n - 1].tracking_ended = true;
        (*n)++;
        int64_t delta = 0;
        while (j < b->releases.n && b->releases.v[j].proc < id)
            j++;
        for (; j < b->releases.n && b->releases.v[j].proc == id; j++)
            delta -= (int64_t)b->releases.v[j].bytes;
        /* The end is an event of the instance, as a stop's (tracker.c,
         * end_instance). */
        cw_row_activity_t a = {.proc = id, .events = 1, .delta = delta, .relpeak_ns = b->bucket_ns};
        if (cw_batch_add_activity(b, &a)) err = CW_ENOMEM;
    }
    if (!err && rc != SQLITE_DONE)
        err = cw__store_dberr(s, "listing the instances the last run left open", d);
    sqlite3_finalize(st);
    return err;
}

int cw_store_end_open(cw_store_t *s, cw_store_ended_t *out, cw_diag_t *d)
{
    memset(out, 0, sizeof *out);
    out->at_ns = INT64_MIN;
    out->end_ns = s->w ? s->w->tiers[0].end : 0;
    if (s->readonly || !s->w)
        return cw_diag_set(d, CW_EINVAL, "%s was opened read-only; cannot end instances", s->path);
    const cw__tier_t *t = s->w->tiers;
    if (t[0].end == INT64_MIN) return 0;
    int64_t open = 0;
    int err = cw__store_query_int(s,
                                  "SELECT count(*) FROM processes WHERE exit_ns IS NULL AND "
                                  "tracking_ended_ns IS NULL",
                                  &open, d);
    if (err || open == 0) return err;
    cw_batch_t *b = NULL;
    if (cw_batch_create(t[0].end, t[0].width, &b)) return CW_ENOMEM;
    err = add_releases(s, t, b, &out->bytes, &out->odd, d);
    if (!err) err = add_procs(s, b, &out->instances, d);
    if (!err) err = cw_store_write(s, b, d);
    if (!err) {
        out->at_ns = b->bucket_ns;
        out->end_ns = s->w->tiers[0].end;
    }
    cw_batch_free(b);
    return err;
}
