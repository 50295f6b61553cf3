/* store_internal.h - what the store's upper floors share, over db.h
 * (docs/DESIGN.md, "How the store implements it"): the writer's state
 * (cw__writer_t, its in-memory rollups) and the functions the writer's
 * files (store.c, store_tiers.c, store_rows.c, store_fold.c, store_map.c)
 * and the readers' ground (store_read.c) offer the files above them.
 *
 * Not a public header: only service/store/ and tests include it. */
#ifndef COMMITWATCH_STORE_INTERNAL_H
#define COMMITWATCH_STORE_INTERNAL_H

#include "store/db.h"

/* The open bucket of tier k + 1 summed in memory from the rows the writer
 * stores in tier k (store_tiers.c, "In-memory rollups"), so that closing
 * it writes its rows without reading tier k back. valid: it saw every
 * tier-k row of `bucket` (false after a restart in the middle of the
 * bucket, a rollback, or an SQL rollup into tier k; the bucket is then
 * rolled up by SQL). Writer only. */
typedef struct cw__roll {
    bool has, valid;
    int64_t bucket;
    cw_keymap_t cmap, rmap, amap;       /* key -> index into the rows below */
    CW__VEC(cw_row_commit_t) commits;   /* a unused */
    CW__VEC(cw_row_release_t) releases; /* a floored to the bucket width, or BEFORE */
    CW__VEC(cw_row_activity_t) activity;
} cw__roll_t;

/* The open hour's cells (tier CW__TIER_OPEN, store_tiers.c "The open
 * hour"): the hour they sum (INT64_MIN: none), whether every minute row
 * of it went into them (valid), the tier-1 end below which minute rows
 * may exist that did not (known_end), whether the database may hold
 * cells or a tiers row this state does not know (dirty: after a
 * rollback, at opening; the next batch deletes them), and its tiers row
 * as stored (mark_start INT64_MIN: none). Writer only. */
typedef struct cw__open {
    int64_t bucket, known_end, mark_start, mark_end;
    bool valid, dirty;
    CW__VEC(cw_row_release_t) rel; /* a minute's release rows, floored to the hour */
} cw__open_t;

/* A bucket's row of second_sums or minute_sums being built
 * (schema/012_bucket_sums.sql, store_tiers.c): its cells' columns, in
 * process order. */
typedef struct cw__sums_cell {
    uint32_t proc;
    int64_t bytes, released, events;
} cw__sums_cell_t;
typedef struct cw__sums_out {
    cw__sums_cell_t *v;
    size_t n, cap;
    bool failed; /* out of memory appending */
} cw__sums_out_t;

/* The writer's state (store.c, store_tiers.c, store_rows.c, store_fold.c,
 * store_map.c): allocated by the writer's opening, freed by its release
 * slot; the writer thread only. */
typedef struct cw__writer {
    cw__tier_t tiers[CW_TIERS]; /* as of the last commit */
    /* Source counters of the last losses row. */
    uint64_t last_total, last_lost;
    int64_t last_drift;
    bool cap_warned;               /* the cap cannot be met: said once */
    cw__roll_t roll[CW_TIERS - 1]; /* roll[k] builds tier k + 1 */
    uint32_t roll_max;             /* rows a roll may hold (CW__ROLL_MAX_ROWS) */
    int64_t pruned_to;             /* instances ended before it were pruned (INT64_MIN: none yet) */
    int64_t heap_pruned_to;        /* the heap layer's cells were pruned at this raw horizon */
    cw__roll_t sorted;             /* a batch's rows, sorted (vectors only) */
    cw_buf_t cellbuf;              /* the encoded cells of one insert (store_rows.c) */
    cw__sums_out_t second;         /* a raw second's row of second_sums (store_tiers.c) */
    /* [0] minutes, [1] hours: buckets below sums_low may have no row of
     * minute_sums / hour_sums (INT64_MIN: none); sums_done, those whose
     * rows the backfill wrote since sums_t0 (ns). */
    int64_t sums_low[2];
    uint64_t sums_done[2];
    int64_t sums_t0[2];
    cw__open_t open;
} cw__writer_t;

/* store_read.c (the readers' ground): where to split "everything before x" between tier k
 * (rows before the result) and the raw tier (rows from it on): the last
 * bucket boundary of tier k <= x that tier k is complete to (x ==
 * INT64_MAX: its end), or INT64_MIN (the raw tier alone) when tier k is
 * empty or retention has folded raw rows after that boundary. */
int64_t cw__store_split(const cw__tier_t t[CW_TIERS], int k, int64_t x);

/* store_read.c: the end of the data (cw_store_data_end()) for the tier
 * state t, read inside the caller's read transaction. 0 or CW_EDB. */
int cw__store_data_end(cw_store_t *s, const cw__tier_t *t, int64_t *end_ns, bool *ended,
                       cw_diag_t *d);
/* store_read.c: the tier state t as if nothing were stored from `end` on
 * (the end of the data where tracking ended): the bucket there holds only
 * the release rows that end the instances alive then, which are no data.
 * Windows and steps up to `end` stay exact, and an end at `end` needs no
 * alignment; rows after it are still read where a query reads "releases
 * after the window" (pieces live at its end). */
void cw__store_tiers_clip(cw__tier_t t[CW_TIERS], int64_t end);

/* store_read.c: strdup of text column col of st into *out; NULL for SQL
 * NULL, or when dflt is given, a copy of dflt. 0 or CW_ENOMEM. */
int cw__store_col_dup(sqlite3_stmt *st, int col, const char *dflt, char **out);
/* store_read.c: the processes row of instance id into *out (name and
 * cmdline NULL when the row has none); *found false, and *out zeroed but
 * for id, exit_ns and tracking_ended_ns (CW_TS_NEVER), when there is no such row. 0,
 * CW_ENOMEM or CW_EDB (*out holds nothing to free). */
int cw__store_proc_row(cw_store_t *s, uint32_t id, cw_proc_info_t *out, bool *found, cw_diag_t *d);
/* store_read.c: processes rows read in id order by one statement, for a
 * report that names most of a range of instances (cw__store_proc_row
 * looks each up from the table's root). Ids are asked in increasing
 * order; what each gives is cw__store_proc_row's. The scan holds a
 * statement of the handle until cw__proc_scan_end. */
typedef struct cw__proc_scan {
    cw_store_t *s;
    sqlite3_stmt *st;
    int64_t at;   /* the row's id the statement is on (-1: none yet) */
    int64_t last; /* the last id asked */
    bool done;
} cw__proc_scan_t;
int cw__proc_scan_begin(cw_store_t *s, cw__proc_scan_t *c, uint32_t from, cw_diag_t *d);
int cw__proc_scan_get(cw__proc_scan_t *c, uint32_t id, cw_proc_info_t *out, bool *found,
                      cw_diag_t *d);
void cw__proc_scan_end(cw__proc_scan_t *c);
/* store_read.c: the stack-tag rules' hash into *out (NULL when none
 * stored; re-tagging sets it with the new tags). 0, CW_ENOMEM or CW_EDB. */
int cw__store_rules_hash(cw_store_t *s, char **out, cw_diag_t *d);
/* store_rows.c: plain inserts of the cells (cells.h) of rows whose key is
 * new by construction (a batch's own rows, a rollup's rows of a bucket
 * not rolled before, a conversion's) into tier `tier`, bucket (f)
 * `bucket`, CW__STORE_MULTI cells a statement: a duplicate is an error,
 * not a sum. c sorted by (proc, stack), r by (proc, stack, a), a by proc,
 * one row a key (cw_batch_merge_*); commit rows' a is ignored (the
 * caller leaves rundown rows out). */
#define CW__STORE_MULTI 32
/* (sums, when not NULL, gets the cells stored appended) */
int cw__store_ins_rows(cw_store_t *s, int tier, int64_t bucket, const cw_row_commit_t *c,
                       uint32_t nc, const cw_row_release_t *r, uint32_t nr,
                       const cw_row_activity_t *a, uint32_t na, cw__sums_out_t *sums, cw_diag_t *d);
/* store_rows.c: adds the rows of one process (sorted and merged as above)
 * to its cell of (tier, bucket), or stores them as a new cell: rundown
 * and retention into the BEFORE baselines. */
/* Stores a rider (batch.h: a batch of the heap layer) as cells of layer 1
 * in the raw tier at its own bucket, summed into the cells there may be
 * (two traces of a process in one second). 0, CW_EINVAL (not a rider of
 * this store's raw width) or the database's error. */
int cw__store_put_layer(cw_store_t *s, const cw_batch_t *r, cw_diag_t *d);
int cw__store_add_rows(cw_store_t *s, int tier, int64_t bucket, uint32_t proc,
                       const cw_row_commit_t *c, uint32_t nc, const cw_row_release_t *r,
                       uint32_t nr, cw_diag_t *d);
/* store_rows.c: the time unit of tier `tier`'s cells: its width (1 on a
 * handle that is not the writer's). */
int64_t cw__store_tier_unit(const cw_store_t *s, int tier);
/* store_upgrade.c: converts the rows of schema 8's tables (renamed v8_*
 * by migration 009) into cells, a range of buckets a transaction, and
 * drops the tables when they are empty; logs how long it took. Nothing to
 * do (0) when they are gone. Writer only, after its state is loaded. */
int cw__store_upgrade_cells(cw_store_t *s, cw_diag_t *d);

/* store_tiers.c, on the caller's copy t of the tier state, inside its
 * transaction. 0 or CW_EDB / CW_EIO.
 * rollup: rolls the buckets of tier k + 1 before target (aligned) up from
 *         tier k (k < 2), then the closed ones of the tiers above; from
 *         the in-memory sums when they are valid, else by SQL.
 * put_raw: stores a batch's rows of raw bucket b (not the rundown rows)
 *         in tier 0 and adds them to the open minute, after rolling up
 *         the minutes before b's; the caller advances t[0].end and calls
 *         rollup(0) for the minute that b closes.
 * retain: folds tier k's rows before its new horizon (end of data minus
 *         its retention, aligned to the next tier, never past what that
 *         tier has rolled up) into the BEFORE baselines.
 * enforce_cap: while the file is over the cap, returns free pages, then
 *         halves the finest tier's retention above its minimum and folds. */
int cw__store_rollup(cw_store_t *s, cw__tier_t *t, int k, int64_t target, cw_diag_t *d);
int cw__store_put_raw(cw_store_t *s, cw__tier_t *t, const cw_batch_t *b, cw_diag_t *d);
int cw__store_retain(cw_store_t *s, cw__tier_t *t, int k, cw_diag_t *d);
/* Forgets the in-memory sums (after a rollback; at close). */
void cw__store_roll_reset(cw_store_t *s, bool free_memory);
/* The open hour (store_tiers.c): open_reset forgets its state, given the
 * minute tier's committed end (at opening, after a rollback): the next
 * batch deletes its cells, and an hour holding minute rows before that
 * end is not summed. open_sync, at the end of a batch's writes, deletes
 * the cells of an hour the hour tier has rolled up and keeps the tiers
 * row in step with the tiers t. */
void cw__store_open_reset(cw_store_t *s, int64_t minute_end);
int cw__store_open_sync(cw_store_t *s, const cw__tier_t *t, cw_diag_t *d);
/* Minute and hour sums (store_tiers.c, schema/012_bucket_sums.sql,
 * 013_hour_sums.sql): sums_start finds, at the writer's opening, the
 * minutes and hours stored before their table (sums_low); sums_backfill
 * writes the rows of some of them, inside a batch's transaction, moving
 * low[0] (minutes) and low[1] (hours), the caller's copy, down. */
int cw__store_sums_start(cw_store_t *s, cw_diag_t *d);
int cw__store_sums_backfill(cw_store_t *s, const cw__tier_t *t, int64_t low[2], cw_diag_t *d);
/* Deletes the rows of second_sums older than CW__SECOND_SUMS_KEEP_NS
 * before the raw tier's end or below its horizon. */
#define CW__SECOND_SUMS_KEEP_NS (INT64_C(3900) * 1000000000)
int cw__store_sums_prune(cw_store_t *s, const cw__tier_t *t, cw_diag_t *d);
/* store_rows.c: adds a minute's rows (sorted by key, one row a key; the
 * releases' a floored to the hour or BEFORE) to the cells of the open
 * hour `bucket` of width w, a cell a process: rows summed per key
 * (cw_cell_merge), activity combined in order as the hour's rollup does. */
int cw__store_add_open(cw_store_t *s, int64_t bucket, int64_t w, const cw_row_commit_t *c,
                       uint32_t nc, const cw_row_release_t *r, uint32_t nr,
                       const cw_row_activity_t *a, uint32_t na, cw_diag_t *d);
int cw__store_enforce_cap(cw_store_t *s, cw__tier_t *t, cw_diag_t *d);
/* Deletes the processes rows of instances that ended before every tier's
 * horizon and have no baseline left in any tier, and a pruned folded
 * group's rows of the folded table; once per new lowest horizon
 * (s->pruned_to, counted in s->pruned). Inside the batch's transaction. */
int cw__store_prune(cw_store_t *s, const cw__tier_t *t, cw_diag_t *d);

/* store_fold.c: stores the batch's folded instances (schema/005_folded)
 * and counts them in their group's processes row, inside the batch's
 * transaction, after its process rows. 0 or CW_EDB / CW_EIO. */
int cw__store_put_folded(cw_store_t *s, const cw_batch_t *b, cw_diag_t *d);
/* A run of folded instances' data (schema/010_folded_runs): v[0..n),
 * sorted by (start, pid), appended to out. 0 or CW_ENOMEM.
 * cw__fold_decode appends the n instances of data p[0..len) of the run
 * starting at first_ns to (*v)[*nv..], growing *v (owned by the caller;
 * *cap its room), and advances *nv. 0, CW_ENOMEM, or CW_EPARSE when the
 * data is not n whole instances of the format (then *nv is unchanged). */
int cw__fold_encode(cw_buf_t *out, const cw_folded_inst_t *v, size_t n);
int cw__fold_decode(const unsigned char *p, size_t len, int64_t first_ns, uint64_t n,
                    cw_folded_inst_t **v, size_t *nv, size_t *cap);
/* store_upgrade.c: converts the folded rows of schema 9 (v9_folded) into
 * runs, a group a transaction, then drops v9_folded; resumable like the
 * cells' conversion. Writer's opening only. 0 or CW_E* with d filled. */
int cw__store_upgrade_folded(cw_store_t *s, cw_diag_t *d);

/* store_map.c: stores the batch's map snapshots (schema/008_map); prunes
 * those before the raw tier's horizon t[0].horizon. Inside the caller's
 * transaction. 0 or CW_EDB / CW_EIO. */
int cw__store_put_maps(cw_store_t *s, const cw_batch_t *b, cw_diag_t *d);
int cw__store_prune_maps(cw_store_t *s, const cw__tier_t *t, cw_diag_t *d);

/* The in-memory rollups' bound: a roll past CW__ROLL_MAX_ROWS rows (its
 * three vectors together; about 120 bytes a row with its maps) forgets
 * its sums, gives their memory back and leaves its bucket to the SQL
 * rollup; a closed bucket's roll keeps its memory only up to
 * CW__ROLL_KEEP_ROWS rows (docs/DESIGN.md, "Memory": store_rollups). */
#define CW__ROLL_MAX_ROWS 16384u
#define CW__ROLL_KEEP_ROWS 1024u
/* The room a batch's sorted copy keeps from one second to the next (rows
 * of its three vectors together; at most about 0.7 MiB). */
#define CW__SCRATCH_KEEP_ROWS 16384u

/* Bytes the writer's rollup sums and sorting scratch hold (published as
 * the store_rollups component of memstat.h after each write). */
size_t cw__store_roll_bytes(const cw_store_t *s);

/* Stored stacks are frame-id lists, little-endian u32 each (stacks.frames).
 * decode reads n ids from blob (4n bytes); encode writes 4n bytes. */
static inline void cw__store_frames_decode(const unsigned char *blob, size_t n, uint32_t *out)
{
    for (size_t i = 0; i < n; i++)
        out[i] = (uint32_t)blob[4 * i] | (uint32_t)blob[4 * i + 1] << 8 |
                 (uint32_t)blob[4 * i + 2] << 16 | (uint32_t)blob[4 * i + 3] << 24;
}

static inline void cw__store_frames_encode(const uint32_t *ids, size_t n, unsigned char *out)
{
    for (size_t i = 0; i < n; i++)
        for (int k = 0; k < 4; k++)
            out[4 * i + k] = (unsigned char)(ids[i] >> (8 * k));
}

#endif
