/* store_heap.c - the heap-trace tables (heapdb.h, schema/008_heap.sql):
 * a row per trace asked for, updated when it ends with its counts, totals
 * and report, and the heap layer's figures per stack beside it.
 *
 * Written by the heap-trace threads on their own handles, read by any:
 * cached statements, their parameters bound from one table each
 * (bind_params). */
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "commitwatch/common.h"
#include "commitwatch/heapdb.h"
#include "store/store_internal.h"

/* Zero ids and times are stored as NULL (NULLIF): every parameter binds
 * from one table of values (bind_params). */
static const char SQL_ADD[] =
    "INSERT INTO heap_traces(pid, proc, process, trigger, alert_series, rule, requested_ns, "
    "duration_ns, started_ns, ended_ns, state, end_reason, error) "
    "VALUES (?1, NULLIF(?2, 0), ?3, ?4, NULLIF(?5, 0), ?6, ?7, ?8, NULLIF(?9, 0), NULLIF(?10, 0), "
    "?11, ?12, ?13)";
static const char SQL_FINISH[] =
    "UPDATE heap_traces SET started_ns = NULLIF(?2, 0), ended_ns = NULLIF(?3, 0), state = ?4, "
    "end_reason = ?5, error = ?6, events = ?7, unknown_frees = ?8, zero_allocs = ?9, "
    "reused = ?10, dropped = ?11, torn = ?12, outstanding_bytes = ?13, outstanding_count = ?14, "
    "alloc_bytes = ?15, alloc_count = ?16, freed_bytes = ?17, freed_count = ?18, "
    "peak_bytes = ?19, report = ?20 WHERE id = ?1";
static const char SQL_STACK[] =
    "INSERT INTO heap_stacks(trace, rank, layer, frames, outstanding_bytes, outstanding_count, "
    "alloc_bytes, alloc_count, freed_bytes, freed_count, peak_bytes) "
    "VALUES (?1, ?2, 'heap', ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10)";
static const char SQL_ORPHANS[] =
    "UPDATE heap_traces SET state = 'failed', ended_ns = ?1, error = ?2 WHERE state = 'running'";
#define COLS                                                                                       \
    "id, pid, proc, process, trigger, alert_series, rule, requested_ns, duration_ns, started_ns, " \
    "ended_ns, state, end_reason, error, events, unknown_frees, zero_allocs, reused, dropped, "    \
    "torn, outstanding_bytes, outstanding_count, alloc_bytes, alloc_count, freed_bytes, "          \
    "freed_count, peak_bytes"
static const char SQL_LIST[] = "SELECT " COLS " FROM heap_traces "
                               "WHERE (?1 = 0 OR alert_series = ?1) AND (?2 = 0 OR pid = ?2) "
                               "AND (?3 = 0 OR proc = ?3) ORDER BY id DESC LIMIT ?4";
static const char SQL_GET[] = "SELECT " COLS ", report FROM heap_traces WHERE id = ?1";

/* A statement's parameter: a number, or a text (NULL binds NULL). */
typedef struct param {
    bool text;
    int64_t num;
    const char *str;
} param_t;
#define NUM(v)                                                                                     \
    {                                                                                              \
        false, (int64_t)(v), NULL                                                                  \
    }
#define TEXT(v)                                                                                    \
    {                                                                                              \
        true, 0, (v)                                                                               \
    }

static void bind_params(sqlite3_stmt *st, const param_t *p, int n)
{
    for (int i = 0; i < n; i++) {
        if (!p[i].text)
            sqlite3_bind_int64(st, i + 1, p[i].num);
        else if (p[i].str)
            sqlite3_bind_text(st, i + 1, p[i].str, -1, SQLITE_STATIC);
        else
            sqlite3_bind_null(st, i + 1);
    }
}

static const size_t row_owned[] = {
    offsetof(cw_heap_trace_row_t, process),    offsetof(cw_heap_trace_row_t, trigger),
    offsetof(cw_heap_trace_row_t, rule),       offsetof(cw_heap_trace_row_t, state),
    offsetof(cw_heap_trace_row_t, end_reason), offsetof(cw_heap_trace_row_t, error),
    offsetof(cw_heap_trace_row_t, report)};

void cw_heap_trace_row_clear(cw_heap_trace_row_t *r)
{
    if (!r) return;
    cw_free_members(r, row_owned, CW_ARRAY_LEN(row_owned));
    memset(r, 0, sizeof *r);
}

void cw_heap_trace_rows_free(cw_heap_trace_row_t *v, size_t n)
{
    for (size_t i = 0; v && i < n; i++)
        cw_heap_trace_row_clear(&v[i]);
    free(v);
}

int cw_store_heap_add(cw_store_t *s, cw_heap_trace_row_t *r, cw_diag_t *d)
{
    sqlite3_stmt *st = NULL;
    int err = cw__store_stmt(s, CW__ST_HEAP_ADD, SQL_ADD, &st, d);
    if (err) return err;
    const param_t p[] = {NUM(r->pid),
                         NUM(r->proc),
                         TEXT(r->process),
                         TEXT(r->trigger ? r->trigger : "api"),
                         NUM(r->alert_series),
                         TEXT(r->rule),
                         NUM(r->requested_ns),
                         NUM(r->duration_ns),
                         NUM(r->started_ns),
                         NUM(r->ended_ns),
                         TEXT(r->state ? r->state : "running"),
                         TEXT(r->end_reason),
                         TEXT(r->error)};
    bind_params(st, p, (int)CW_ARRAY_LEN(p));
    err = cw__store_step_done(s, st, "recording a heap trace", d);
    if (!err) r->id = sqlite3_last_insert_rowid(s->db);
    return err;
}

void cw_heap_trace_row_figures(cw_heap_trace_row_t *r, const cw_heap_report_t *rep, uint32_t pid)
{
    r->counts = (cw_heap_trace_counts_t){rep->events, rep->unknown_frees,  rep->zero_allocs,
                                         rep->reused, rep->losses.dropped, rep->losses.torn};
    for (uint32_t i = 0; i < rep->nprocs; i++)
        if (rep->procs[i].pid == pid || rep->nprocs == 1) {
            r->totals = rep->procs[i].totals;
            return;
        }
}

/* The frames of a stack joined by ';', outermost first; malloc'd. */
static char *folded(const cw_heap_stack_report_t *k)
{
    size_t len = 1;
    for (uint32_t i = 0; i < k->nframes; i++)
        len += strlen(k->frames[i] ? k->frames[i] : "?") + 1;
    char *out = malloc(len), *p = out;
    if (!out) return NULL;
    *p = '\0';
    for (uint32_t i = 0; i < k->nframes; i++) {
        const char *f = k->frames[i] ? k->frames[i] : "?";
        size_t n = strlen(f);
        if (i) *p++ = ';';
        memcpy(p, f, n);
        p += n;
        *p = '\0';
    }
    return out;
}

/* The figures of a stack (or the totals) as the parameters from first on. */
static void figs_params(param_t *p, const cw_heap_figs_t *f)
{
    const uint64_t v[] = {f->outstanding_bytes, f->outstanding_count, f->alloc_bytes,
                          f->alloc_count,       f->freed_bytes,       f->freed_count,
                          f->peak_bytes};
    for (size_t i = 0; i < CW_ARRAY_LEN(v); i++)
        p[i] = (param_t)NUM(v[i]);
}

/* The rows of heap_stacks for the process pid of rep. */
static int put_stacks(cw_store_t *s, int64_t id, uint32_t pid, const cw_heap_report_t *rep,
                      cw_diag_t *d)
{
    const cw_heap_proc_report_t *p = NULL;
    for (uint32_t i = 0; i < rep->nprocs && !p; i++)
        if (rep->procs[i].pid == pid || rep->nprocs == 1) p = &rep->procs[i];
    sqlite3_stmt *st = NULL;
    int err = p ? cw__store_stmt(s, CW__ST_HEAP_STACK, SQL_STACK, &st, d) : 0;
    for (uint32_t i = 0; p && i < p->nstacks && !err; i++) {
        char *f = folded(&p->stacks[i]);
        if (!f) return cw_diag_set(d, CW_ENOMEM, "out of memory storing a heap trace");
        param_t v[10] = {NUM(id), NUM(i), TEXT(f)};
        figs_params(&v[3], &p->stacks[i].figs);
        bind_params(st, v, 10);
        err = cw__store_step_done(s, st, "storing a heap trace's stacks", d);
        free(f);
    }
    return err;
}

int cw_store_heap_finish(cw_store_t *s, const cw_heap_trace_row_t *r, const cw_heap_report_t *rep,
                         const char *json, cw_diag_t *d)
{
    sqlite3_stmt *st = NULL;
    const cw_heap_trace_counts_t *c = &r->counts;
    param_t p[20] = {NUM(r->id),          NUM(r->started_ns),
                     NUM(r->ended_ns),    TEXT(r->state ? r->state : "done"),
                     TEXT(r->end_reason), TEXT(r->error),
                     NUM(c->events),      NUM(c->unknown_frees),
                     NUM(c->zero_allocs), NUM(c->reused),
                     NUM(c->dropped),     NUM(c->torn)};
    figs_params(&p[12], &r->totals);
    p[19] = (param_t)TEXT(json);
    int err = cw__store_exec(s, "BEGIN IMMEDIATE", "storing a heap trace", d);
    if (!err && !(err = cw__store_stmt(s, CW__ST_HEAP_FINISH, SQL_FINISH, &st, d))) {
        bind_params(st, p, 20);
        err = cw__store_step_done(s, st, "storing a heap trace", d);
    }
    if (!err && rep) err = put_stacks(s, r->id, r->pid, rep, d);
    if (!err) return cw__store_exec(s, "COMMIT", "storing a heap trace", d);
    sqlite3_exec(s->db, "ROLLBACK", NULL, NULL, NULL);
    return err;
}

int cw_store_heap_orphans(cw_store_t *s, int64_t now_ns, const char *why, uint64_t *n, cw_diag_t *d)
{
    sqlite3_stmt *st = NULL;
    const param_t p[] = {NUM(now_ns), TEXT(why)};
    *n = 0;
    int err = cw__store_stmt(s, CW__ST_HEAP_ORPHANS, SQL_ORPHANS, &st, d);
    if (err) return err;
    bind_params(st, p, 2);
    err = cw__store_step_done(s, st, "ending the heap traces of an earlier run", d);
    if (!err) *n = (uint64_t)sqlite3_changes(s->db);
    return err;
}

static char *col_str(sqlite3_stmt *st, int i, bool *oom)
{
    const unsigned char *t = sqlite3_column_text(st, i);
    if (!t) return NULL;
    char *c = cw_strdup((const char *)t);
    if (!c) *oom = true;
    return c;
}

/* One row of COLS (and the report at column 27 when with_report). */
static bool read_row(sqlite3_stmt *st, cw_heap_trace_row_t *r, bool with_report)
{
    bool oom = false;
    memset(r, 0, sizeof *r);
    r->id = sqlite3_column_int64(st, 0);
    r->pid = (uint32_t)sqlite3_column_int64(st, 1);
    r->proc = (uint32_t)sqlite3_column_int64(st, 2);
    r->process = col_str(st, 3, &oom);
    r->trigger = col_str(st, 4, &oom);
    r->alert_series = sqlite3_column_int64(st, 5);
    r->rule = col_str(st, 6, &oom);
    r->requested_ns = sqlite3_column_int64(st, 7);
    r->duration_ns = sqlite3_column_int64(st, 8);
    r->started_ns = sqlite3_column_int64(st, 9);
    r->ended_ns = sqlite3_column_int64(st, 10);
    r->state = col_str(st, 11, &oom);
    r->end_reason = col_str(st, 12, &oom);
    r->error = col_str(st, 13, &oom);
    cw_heap_trace_counts_t *c = &r->counts;
    uint64_t *counts[] = {&c->events, &c->unknown_frees, &c->zero_allocs,
                          &c->reused, &c->dropped,       &c->torn};
    for (int i = 0; i < (int)CW_ARRAY_LEN(counts); i++)
        *counts[i] = (uint64_t)sqlite3_column_int64(st, 14 + i);
    cw_heap_figs_t *f = &r->totals;
    uint64_t *figs[] = {&f->outstanding_bytes, &f->outstanding_count, &f->alloc_bytes,
                        &f->alloc_count,       &f->freed_bytes,       &f->freed_count,
                        &f->peak_bytes};
    for (int i = 0; i < (int)CW_ARRAY_LEN(figs); i++)
        *figs[i] = (uint64_t)sqlite3_column_int64(st, 20 + i);
    if (with_report) r->report = col_str(st, 27, &oom);
    return !oom;
}

/* The rows a cached SELECT of COLS (with the report when with_report)
 * gives for its parameters p[0..np). 0 or CW_ENOMEM / the store's error. */
static int select_rows(cw_store_t *s, int slot, const char *sql, const param_t *p, int np,
                       bool with_report, cw_heap_trace_row_t **out, size_t *n, cw_diag_t *d)
{
    *out = NULL;
    *n = 0;
    sqlite3_stmt *st = NULL;
    int err = cw__store_stmt(s, slot, sql, &st, d), rc = SQLITE_DONE;
    if (err) return err;
    bind_params(st, p, np);
    cw_heap_trace_row_t *v = NULL;
    size_t cnt = 0, cap = 0;
    while (!err && (rc = sqlite3_step(st)) == SQLITE_ROW)
        if (CW_RESERVE(v, cap, cnt + 1) || !read_row(st, &v[cnt++], with_report))
            err = cw_diag_set(d, CW_ENOMEM, "out of memory reading heap traces");
    if (!err && rc != SQLITE_DONE) err = cw__store_dberr(s, "reading heap traces", d);
    cw__store_stmt_done(st);
    if (err) {
        cw_heap_trace_rows_free(v, cnt);
        return err;
    }
    *out = v;
    *n = cnt;
    return 0;
}

int cw_store_heap_list(cw_store_t *s, const cw_heap_trace_filter_t *f, cw_heap_trace_row_t **out,
                       size_t *n, cw_diag_t *d)
{
    const param_t p[] = {NUM(f->alert_series), NUM(f->pid), NUM(f->proc),
                         NUM(f->limit ? f->limit : 100)};
    return select_rows(s, CW__ST_HEAP_LIST, SQL_LIST, p, 4, false, out, n, d);
}

int cw_store_heap_get(cw_store_t *s, int64_t id, cw_heap_trace_row_t *out, cw_diag_t *d)
{
    memset(out, 0, sizeof *out);
    const param_t p[] = {NUM(id)};
    cw_heap_trace_row_t *v = NULL;
    size_t n = 0;
    int err = select_rows(s, CW__ST_HEAP_GET, SQL_GET, p, 1, true, &v, &n, d);
    if (!err && !n) err = cw_diag_set(d, CW_ENOENT, "no heap trace %lld", (long long)id);
    if (!err) *out = v[0];
    free(v);
    return err;
}
