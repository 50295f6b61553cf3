/* store_test.h - what only the store's tests read or set on a handle:
 * counters of what the writer and the readers did, the read caches' knobs,
 * and the test hooks. Production code only feeds the counters. Not a
 * public header: service/store/ and tests include it (through db.h and
 * store_internal.h). */
#ifndef COMMITWATCH_STORE_TEST_H
#define COMMITWATCH_STORE_TEST_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "commitwatch/common.h"
#include "commitwatch/store.h"

typedef struct cw__store_test {
    bool roll_sql;            /* every rollup by SQL (cw__store_set_sql_rollups) */
    uint64_t roll_counts[2];  /* writer: rollups from the sums, by SQL */
    uint64_t transactions;    /* writer: batch transactions committed */
    uint64_t pruned[2];       /* writer: processes rows, folded rows pruned since open */
    uint64_t metrics_reads;   /* /metrics: closed hours read by this handle */
    bool read_cache_off;      /* every query from the rows alone, no hour split */
    uint32_t read_cache_rows; /* rows each read cache may hold (0: its default) */
    uint64_t tails_counted_out; /* raw tails not read: more cells than rows they may hold */
    uint32_t seeks_max;       /* cell lookups a read may take (0: CW__SEEKS_MAX) */
    uint64_t open_segments;   /* segments of reports read from the open hour's cells */
    uint64_t keys_down;       /* keys cache fills that took minutes away from them */
    uint64_t keys_open;       /* keys cache minute segments read as the open hour's cells */
    uint64_t keys_hours;      /* keys cache minute segments read as the hour tier's cells */
    uint64_t keys_snaps;      /* keys cache afresh fills that left a copy at their coarse end */
    bool keys_no_snap;        /* and none does */
    uint64_t keys_minute_sums; /* keys cache minutes read from their row of minute_sums */
    uint64_t keys_second_sums; /* and raw seconds from theirs of second_sums */
    bool keys_check;          /* the keys cache's keys checked against every cell's */
    uint64_t keys_checked;    /* processes so checked */
    uint64_t keys_mismatch;   /* and those whose keys differed (cached or not: 0) */
    uint64_t keys_served;     /* ranked reports whose keys the keys cache gave */
    uint64_t keys_settled;    /* processes the keys cache's entries left out as settled */
    uint32_t keys_settle_over;  /* an afresh keys fill settles past this many (0: its default) */
    uint64_t keys_settle_fills; /* and how many times one did, at a bucket's start */
    uint64_t keys_too_many;     /* keys fills not tried: more exits in the window than it holds */
    uint64_t keys_fit_counts;   /* and how many of those counted the window's exits */
    uint32_t
        transient_cands_max;  /* lists by transient bytes from every cell past N-1 (0: default) */
    uint64_t transient_cands; /* the processes such lists decoded as candidates */
    uint64_t before_prunes;   /* report cache fills that left closed sums out midway */
    uint64_t minute_splits;   /* ranked reports from an unaligned t0 through the minute tier */
    uint64_t minute_fixes;    /* and the (minute, process) rows they took from raw seconds */
    uint64_t keys_hour_sums;  /* and hours from theirs of hour_sums */
    uint64_t keys_sums_damaged; /* rows of bucket sums a keys fill found damaged */
    uint64_t before_whole;    /* ranked reports before t0 from t0's hour's cell, less [t0, c1) */
    uint64_t before_whole_open; /* and of those, from the open hour's cell */
    uint64_t hour_splits;     /* reports from a minute not on an hour through the hour tier */
    uint64_t hour_fixes;      /* and the (hour, process) cells they took from minutes */
} cw__store_test_t;

/* Test hooks: whether the report cache holds sums (and for which tier and
 * horizon); how many closed sums it left out, in all; how many rows the
 * series cache holds. */
bool cw__store_report_cache_key(const cw_store_t *s, int *tier, int64_t *horizon);
uint64_t cw__store_report_cache_closed(const cw_store_t *s);
size_t cw__store_series_cache_rows(const cw_store_t *s);
size_t cw__store_raw_tail_rows(const cw_store_t *s);
/* Test hook: the processes the room kept for a sums holds (store_report_sums.c). */
size_t cw__store_sums_room(const cw_store_t *s);
/* Test hook: the bytes of the keys cache (store_report_keys.c). */
size_t cw__keys_cache_bytes(const cw_store_t *s);

/* Test hook: creates a new database at path holding only the first
 * `version` migrations (1 <= version <= cw_store_schema_version()), as an
 * older commitwatch would have. 0 or CW_EINVAL / CW_EDB / CW_ENOTDB. */
int cw__store_create_at_version(const char *path, int version, cw_diag_t *d);

/* Test hook: every rollup by SQL (true) or from the in-memory sums where
 * they are valid (false, the default), to compare the two. */
void cw__store_set_sql_rollups(cw_store_t *s, bool on);

/* Test hook: sets the in-memory rollups' bound (CW__ROLL_MAX_ROWS, store_internal.h;
 * 0: the default) of the writer s. */
void cw__store_set_roll_max(cw_store_t *s, uint32_t rows);

/* Test hook: the cell conversion of a schema-8 database (store_upgrade.c)
 * stops with CW_EIO after this many transactions (0: never), as a kill or
 * a full disk would stop it. Set before opening; any thread. */
extern int cw__store_upgrade_stop_after;

#endif
