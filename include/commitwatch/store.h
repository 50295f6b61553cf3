/* store.h - the SQLite store: schema, migrations, tiers, writer, queries.
 *
 * One database file in WAL mode. The schema lives in schema/NNN_*.sql
 * (compiled into the binary); opening a database applies the migrations
 * it lacks, refuses one written by a newer commitwatch (CW_ENEWER) and
 * refuses a file that is not a commitwatch database (CW_ENOTDB), which is
 * never modified.
 *
 * Tiers: 0 = raw (1 s buckets), 1 = 1 min, 2 = 1 h. The writer stores a
 * batch in tier 0 in one transaction; when a minute (hour) has closed it
 * rolls tier 0 (1) up into tier 1 (2) in that same transaction. Retention
 * per tier folds rows older than the tier's horizon into per-stack
 * baselines (figures stay exact for windows after the horizon); a size cap
 * shortens retention, finest tier first. See docs/DESIGN.md.
 *
 * Every SQL statement is the store's: callers get plain C results (window
 * figures here, the API's series, /metrics figures and lookups in
 * query.h), never the SQLite handle.
 *
 * Threads (DESIGN): a store opened for writing is used by exactly one
 * thread at a time (the writer thread of cw_writer, or the caller for
 * synchronous use). Readers open their own handle with
 * cw_store_open_readonly(); any number may run alongside the writer. */
#ifndef COMMITWATCH_STORE_H
#define COMMITWATCH_STORE_H

#include <stdbool.h>
#include <stdint.h>

#include "commitwatch/batch.h"
#include "commitwatch/error.h"
#include "commitwatch/report.h"
#include "commitwatch/stacks.h"

#define CW_TIERS 3

typedef struct cw_store_opts {
    int64_t retention_ns[CW_TIERS]; /* 0 = keep forever */
    uint64_t size_cap_bytes;        /* 0 = no cap */
} cw_store_opts_t;

/* Defaults: raw 26 h, minute 35 d, hour 400 d, cap 2 GiB. */
void cw_store_opts_default(cw_store_opts_t *o);

typedef struct cw_store cw_store_t;

/* Opens or creates path for writing, migrating as needed. opts may be
 * NULL (defaults). 0, or CW_ENOTDB / CW_ENEWER / CW_EDB / CW_EIO with d
 * saying what and what to do. */
int cw_store_open(const char *path, const cw_store_opts_t *opts, cw_store_t **out, cw_diag_t *d);
/* Opens an existing database read-only (no migration; an older schema is
 * refused with a message asking to run the service once). */
int cw_store_open_readonly(const char *path, cw_store_t **out, cw_diag_t *d);
/* Opens an existing database at the current schema for writing the side
 * tables only (alert state, silences, notification attempts:
 * alertdb.h): no migration, and the tiers are left alone (cw_store_open
 * rewrites the tier state and the retention settings, which belong to
 * the service's writer). The alert engine, the notifier and the API's
 * silences use it alongside the writer. CW_ENOENT when the file does not
 * exist yet, CW_EDB for an older schema. */
int cw_store_open_side(const char *path, cw_store_t **out, cw_diag_t *d);
void cw_store_close(cw_store_t *s); /* accepts NULL */
/* Frees the handle's read caches (report sums, raw tail, series,
 * /metrics: filled again from SQL on the next read) and takes back their
 * share of the store_caches component. The handle's thread. */
void cw_store_drop_read_caches(cw_store_t *s);
/* For a handle that serves many reads (an HTTP worker's): maps the file
 * A 2 MiB page cache and no file mapping (db.c says why). Failures
 * only cost speed. */
void cw_store_tune_for_reads(cw_store_t *s);
/* Figures the read handles of one database share (an HTTP server's
 * workers): /metrics' sums of the closed hours (cw_store_metrics), read
 * by the first handle that needs them and used by the others until the
 * stored data moves past them. create: 0 or CW_ENOMEM. A handle given a
 * share (borrowed: free it after every handle using it is closed) uses it
 * from its own thread; the share's lock makes that safe from any number
 * of threads. */
typedef struct cw_store_share cw_store_share_t;
int cw_store_share_create(cw_store_share_t **out);
void cw_store_share_free(cw_store_share_t *sh); /* accepts NULL */
void cw_store_set_share(cw_store_t *s, cw_store_share_t *sh);

/* A pool of at most max read-only handles on path (cw_store_open_readonly
 * + cw_store_tune_for_reads, opened on first need), shared by threads
 * that serve reads: get hands out the most recently returned idle handle
 * (its caches warm), opens one while fewer than max exist, else waits for
 * one; the getter alone uses it until put gives it back. Each handle's
 * caches stay its own (store_pool.c). create: 0, CW_EINVAL (max 0) or
 * CW_ENOMEM; get: 0 or cw_store_open_readonly's error (d filled).
 * destroy closes the idle handles: every handle must have been put back.
 * Any thread. */
/* tidy: idle handles not used for idle_ns or more (as of now_mono,
 * the monotonic clock of platform.h) give their room back: the most recently returned
 * one drops its read caches (cw_store_drop_read_caches), the others are
 * closed (their page cache and statements too); put runs it with
 * CW_STORE_POOL_IDLE_NS, and so does put(p, NULL) (a request that read
 * no database), so the caches a burst of reads filled do not stay at
 * their peak once the reads stop. Returns the handles closed. */
#define CW_STORE_POOL_IDLE_NS (30 * CW_NS_PER_S)
typedef struct cw_store_pool cw_store_pool_t;
int cw_store_pool_create(const char *path, uint32_t max, cw_store_pool_t **out, cw_diag_t *d);
int cw_store_pool_get(cw_store_pool_t *p, cw_store_t **out, cw_diag_t *d);
void cw_store_pool_put(cw_store_pool_t *p, cw_store_t *s); /* accepts NULL s */
uint32_t cw_store_pool_open_count(cw_store_pool_t *p);     /* handles that exist */
uint32_t cw_store_pool_tidy(cw_store_pool_t *p, int64_t now_mono, int64_t idle_ns);
void cw_store_pool_destroy(cw_store_pool_t *p);             /* accepts NULL */

/* Bytes the database at path takes on disk: the file and its WAL (0 when
 * absent). Any thread. */
uint64_t cw_store_disk_bytes(const char *path);

/* Bytes SQLite holds in this process now and at its peak: every
 * connection's page cache, schema and statements (sqlite3_status64
 * MEMORY_USED; 0 if SQLite was built without memory statistics). Any
 * thread. */
void cw_store_sqlite_memory(int64_t *now, int64_t *peak);

/* Schema version this build writes. */
int cw_store_schema_version(void);

/* What a writer needs to continue a database: every stored frame and
 * stack is interned into stacks (which must be empty) so ids stay equal;
 * *next_proc_id is the next free instance id; *end_ns the end of the last
 * stored bucket (INT64_MIN when empty). */
int cw_store_load_state(cw_store_t *s, cw_stacks_t *stacks, uint32_t *next_proc_id, int64_t *end_ns,
                        cw_diag_t *d);

/* What cw_store_end_open did: instances ended, bytes released, (proc,
 * stack, bucket) sums of rows that did not add up (negative: skipped),
 * where (INT64_MIN when there was nothing to end), and the end of the
 * stored data after it (as cw_store_load_state's *end_ns). */
typedef struct cw_store_ended {
    uint32_t instances;
    uint64_t bytes;
    uint64_t odd;
    int64_t at_ns;
    int64_t end_ns;
} cw_store_ended_t;

/* Ends the instances a run left open when it did not stop (killed, power
 * lost) as a stop would have: their outstanding memory released at the
 * end of the stored data E and tracking_ended_ns = E, in one batch for
 * bucket E (store_recover.c). A writer calls it before storing anything
 * of its own; the stored data then ends at E + the raw width. 0 (nothing
 * to do is 0 too) or an error, nothing stored. */
int cw_store_end_open(cw_store_t *s, cw_store_ended_t *out, cw_diag_t *d);

/* The pending-batch journal (journal.c): each batch queued for the writer
 * is also appended to DB-pending.0 / .1 beside the database, so a run
 * killed while the writer is behind loses only its open bucket; the next
 * run stores what they hold (cw_journal_recover) before anything else. */
typedef struct cw_journal cw_journal_t;

/* What cw_journal_recover found and stored. */
typedef struct cw_journal_recovered {
    uint32_t batches;       /* stored now */
    uint32_t stored_before; /* already in the database (skipped) */
    uint32_t after_gap;     /* past a missing record (not stored) */
    uint64_t torn_bytes;    /* ends of files that were not a whole record */
    int64_t from_ns, end_ns; /* the buckets stored, [from, end); INT64_MIN: none */
} cw_journal_recovered_t;

/* Stores, in one transaction, the batches the journal files beside s hold
 * beyond the end of its stored data, then removes the files. A writer
 * calls it first, before cw_store_load_state. 0 (no files is 0 too), or
 * an error and nothing stored, the files kept: CW_EPARSE (a whole record
 * that is not a batch), CW_ENOSPC, CW_EDB, CW_EINVAL (the database
 * refused them), CW_EIO, CW_ENOMEM; d says which file and what to do. */
int cw_journal_recover(cw_store_t *s, cw_journal_recovered_t *out, cw_diag_t *d);
/* Creates (empties) the two files for a run. 0 or CW_EIO / CW_ENOSPC /
 * CW_ENOMEM. */
int cw_journal_open(cw_store_t *s, cw_journal_t **out, cw_diag_t *d);
/* Closes; removes the files unless keep (batches not stored). NULL ok. */
void cw_journal_close(cw_journal_t *j, bool keep);
/* The writer's calls, under its lock: a batch queued (append), batches
 * taken for a transaction (taken), and how many batches were stored since
 * open (stored). A failure to write is logged once and ends journaling
 * for the run (what was written stays a whole prefix). */
void cw_journal_append(cw_journal_t *j, const cw_batch_t *b);
void cw_journal_taken(cw_journal_t *j);
void cw_journal_stored(cw_journal_t *j, uint64_t stored);
bool cw_journal_broken(const cw_journal_t *j);

/* Stores one batch (tier 0 + rollups + retention) in one transaction.
 * Borrowed. 0 or CW_EDB (nothing of the batch is stored). */
int cw_store_write(cw_store_t *s, const cw_batch_t *b, cw_diag_t *d);
/* Stores n batches, in time order, in one transaction (group commit: the
 * writer thread passes what is queued). Borrowed. 0 or CW_EDB / CW_EINVAL
 * (nothing of any of them is stored). */
int cw_store_write_many(cw_store_t *s, const cw_batch_t *const *b, size_t n, cw_diag_t *d);

/* The layers the store keeps apart (docs/DESIGN.md, "Cells"): commits
 * (VirtualAlloc, mmap) and heap allocations (heap traces' cells, written
 * as riders: batch.h, layerfeed.h). */
typedef enum cw_layer { CW_LAYER_COMMIT = 0, CW_LAYER_HEAP = 1 } cw_layer_t;

/* The layer a read-only handle's reads read from now on (the commit layer
 * until set): every report, list and series below then gives that
 * layer's figures. The heap layer is kept in the raw tier only, so its
 * windows are the raw tier's. The read caches are dropped when the layer
 * changes. 0, or CW_EINVAL (not a layer, or a writer's handle). Give a
 * handle set to the heap layer no share (cw_store_set_share). */
int cw_store_set_layer(cw_store_t *s, cw_layer_t layer);

/* Figures of [from, to) from the finest tier that covers the window and
 * is aligned to it; a window aligned to no available tier is widened to
 * the nearest buckets and r->note says so. from == INT64_MIN / to ==
 * INT64_MAX mean the first / last stored bucket. *out is sorted as
 * cw_report_sort() sorts. */
int cw_store_report(cw_store_t *s, int64_t from_ns, int64_t to_ns, bool with_frames,
                    cw_report_t **out, cw_diag_t *d);

/* What cw_store_report_top() ranks a window's processes by, largest
 * first (ties: the lower instance id first): impacting bytes, Size,
 * peak outstanding, outstanding at the window's end, transient bytes
 * (AIFI). */
typedef enum {
    CW_RANK_IMPACTING,
    CW_RANK_SIZE,
    CW_RANK_PEAK,
    CW_RANK_OUTSTANDING,
    CW_RANK_TRANSIENT
} cw_rank_t;

/* cw_store_report()'s report of [from, to) with only its first `limit`
 * processes by key (in cw_report_sort() order, not rank order): each
 * with every figure, stack and name cw_store_report() gives it, the note
 * and window the same; *total: how many processes cw_store_report()
 * lists. Costs one read of the window's cells' columns (nothing decoded)
 * plus the decoding of the chosen processes' cells, so a process list
 * costs with the rows shown more than with the instances stored; ranked
 * by transient bytes, every process's cells are decoded (the full
 * report's reads) but only the chosen ones get stacks and names. *out as
 * cw_store_report()'s. */
int cw_store_report_top(cw_store_t *s, int64_t from_ns, int64_t to_ns, cw_rank_t key,
                        uint32_t limit, bool with_frames, cw_report_t **out, uint32_t *total,
                        cw_diag_t *d);

/* Which processes a filtered ranked report lists: those whose name
 * contains `name` (cw_contains_ci; NULL: any name) and, with by_pid,
 * whose pid is pid. */
typedef struct cw_proc_match {
    const char *name;
    bool by_pid;
    uint32_t pid;
} cw_proc_match_t;

/* cw_store_report_top() of the processes m keeps (NULL: all): the first
 * `limit` of them by key, *total how many of them cw_store_report()
 * lists. cw_store_report() cut to them, as the HTTP list filtered it,
 * at the ranked report's cost plus a pass over the processes' names and
 * pids. */
int cw_store_report_match(cw_store_t *s, int64_t from_ns, int64_t to_ns, cw_rank_t key,
                          uint32_t limit, const cw_proc_match_t *m, bool with_frames,
                          cw_report_t **out, uint32_t *total, cw_diag_t *d);

/* Key/value metadata (rules hash, counters). value is copied. */
int cw_store_meta_set(cw_store_t *s, const char *key, const char *value, cw_diag_t *d);
/* *out malloc'd, or NULL when absent. */
int cw_store_meta_get(cw_store_t *s, const char *key, char **out, cw_diag_t *d);
/* The intervals the live source was down (downtime.h), from the meta
 * table: read (none when absent) and written whole. */
struct cw_downtime;
int cw_store_downtime_get(cw_store_t *s, struct cw_downtime *dt, cw_diag_t *d);
int cw_store_downtime_set(cw_store_t *s, const struct cw_downtime *dt, cw_diag_t *d);

/* The writer thread: batches submitted from the core thread are written
 * in order by one thread that owns s until cw_writer_stop(). */
typedef struct cw_writer cw_writer_t;
/* At most max_queued batches are alive (queued or being stored); submit
 * blocks when full. The thread stores what is queued when it wakes, up to
 * max_queued / 2 batches, in one transaction (group commit). */
int cw_writer_start(cw_store_t *s, uint32_t max_queued, cw_writer_t **out);
/* The writer's state, from the writer thread: err CW_ENOSPC (msg says
 * which file) when a transaction failed for want of disk space and is
 * being retried, then err 0 (msg "") once it committed. */
typedef void (*cw_writer_state_fn)(void *ctx, int err, const char *msg);
/* Sets the state callback (fn may be NULL) and, when retry_ns > 0, the
 * wait between two tries of a transaction the full disk refused
 * (default 1 s). Call before the first submit. */
void cw_writer_on_state(cw_writer_t *w, cw_writer_state_fn fn, void *ctx, int64_t retry_ns);
/* Asks a writer waiting for disk space to give up: its retries end (the
 * error sticks: CW_ENOSPC) and a submit blocked meanwhile returns
 * CW_ESTOPPED. Only an atomic store: safe from a signal handler and any
 * thread while w exists. A writer that is not waiting is unaffected. */
void cw_writer_abandon(cw_writer_t *w);
/* Gives the writer a journal (owned by it from now: stop closes it,
 * removing the files when everything was stored). Before the first
 * submit. */
void cw_writer_set_journal(cw_writer_t *w, cw_journal_t *j);
/* Transfers ownership of b. Returns the first write error seen so far
 * (the writer stops writing after an error; b is freed). */
int cw_writer_submit(cw_writer_t *w, cw_batch_t *b);
/* The writer as a batch sink, of the aggregator's and the pipeline's
 * emit type (cw_agg_emit_fn, agg.h), so batches go to it straight: w is
 * the writer (NULL: none runs; b is freed, CW_ESTOPPED). Submits b
 * (cw_writer_submit); once b is queued, calls the submit hook; a batch
 * refused because the writer was abandoned while the disk was full
 * (CW_ESTOPPED) says so in the hook's diagnostic. Core thread. */
int cw_writer_emit(void *w, cw_batch_t *b);
/* What cw_writer_emit does besides queuing: fn(ctx) after each batch
 * queued (the alert engine's wake-up: it evaluates what is stored), and d
 * (borrowed, for w's life) gets the message of a batch refused with
 * CW_ESTOPPED. fn and d may be NULL. Call before the first batch. */
typedef void (*cw_writer_submit_fn)(void *ctx);
void cw_writer_on_submit(cw_writer_t *w, cw_writer_submit_fn fn, void *ctx, cw_diag_t *d);
/* Drains the queue, joins the thread, frees w. Returns the first write
 * error (d filled), or 0; a full disk still refusing the data when stop
 * comes is CW_ENOSPC (those batches are lost). */
int cw_writer_stop(cw_writer_t *w, cw_diag_t *d);

#endif
