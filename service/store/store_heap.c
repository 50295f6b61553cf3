/* store_heap.c - the heap-trace tables (heapdb.h, schema/008_heap.sql):
 * a row per trace asked for, updated when it ends with its counts, totals
 * and report, and the heap layer's figures per stack beside it.
 *
 * Written by the heap-trace threads on their own handles, a few rows per
 * trace, so the statements are prepared per call, not cached (as
 * store_notify.c's). */
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "commitwatch/common.h"
#include "commitwatch/heapdb.h"
#include "store/store_internal.h"

static const char SQL_ADD[] =
    "INSERT INTO heap_traces(pid, proc, process, trigger, alert_series, rule, requested_ns, "
    "duration_ns, started_ns, ended_ns, state, end_reason, error) "
    "VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13)";
static const char SQL_FINISH[] =
    "UPDATE heap_traces SET started_ns = ?2, ended_ns = ?3, state = ?4, end_reason = ?5, "
    "error = ?6, events = ?7, unknown_frees = ?8, zero_allocs = ?9, reused = ?10, dropped = ?11, "
    "torn = ?12, outstanding_bytes = ?13, outstanding_count = ?14, alloc_bytes = ?15, "
    "alloc_count = ?16, freed_bytes = ?17, freed_count = ?18, peak_bytes = ?19, report = ?20 "
    "WHERE id = ?1";
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

/* 0 binds NULL: ids and times that are not known. */
static void bind_opt(sqlite3_stmt *st, int i, int64_t v)
{
    if (v)
        sqlite3_bind_int64(st, i, v);
    else
        sqlite3_bind_null(st, i);
}

static void bind_str(sqlite3_stmt *st, int i, const char *v)
{
    if (v)
        sqlite3_bind_text(st, i, v, -1, SQLITE_STATIC);
    else
        sqlite3_bind_null(st, i);
}

int cw_store_heap_add(cw_store_t *s, cw_heap_trace_row_t *r, cw_diag_t *d)
{
    sqlite3_stmt *st = NULL;
    if (sqlite3_prepare_v2(s->db, SQL_ADD, -1, &st, NULL) != SQLITE_OK)
        return cw__store_dberr(s, "recording a heap trace", d);
    sqlite3_bind_int64(st, 1, r->pid);
    bind_opt(st, 2, r->proc);
    bind_str(st, 3, r->process);
    bind_str(st, 4, r->trigger ? r->trigger : "api");
    bind_opt(st, 5, r->alert_series);
    bind_str(st, 6, r->rule);
    sqlite3_bind_int64(st, 7, r->requested_ns);
    sqlite3_bind_int64(st, 8, r->duration_ns);
    bind_opt(st, 9, r->started_ns);
    bind_opt(st, 10, r->ended_ns);
    bind_str(st, 11, r->state ? r->state : "running");
    bind_str(st, 12, r->end_reason);
    bind_str(st, 13, r->error);
    int err = 0;
    if (sqlite3_step(st) != SQLITE_DONE)
        err = cw__store_dberr(s, "recording a heap trace", d);
    else
        r->id = sqlite3_last_insert_rowid(s->db);
    sqlite3_finalize(st);
    return err;
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

static void bind_figs(sqlite3_stmt *st, int first, const cw_heap_figs_t *f)
{
    const uint64_t v[] = {f->outstanding_bytes, f->outstanding_count, f->alloc_bytes,
                          f->alloc_count,       f->freed_bytes,       f->freed_count,
                          f->peak_bytes};
    for (int i = 0; i < (int)CW_ARRAY_LEN(v); i++)
        sqlite3_bind_int64(st, first + i, (int64_t)v[i]);
}

/* The rows of heap_stacks for the process pid of rep. */
static int put_stacks(cw_store_t *s, int64_t id, uint32_t pid, const cw_heap_report_t *rep,
                      cw_diag_t *d)
{
    const cw_heap_proc_report_t *p = NULL;
    for (uint32_t i = 0; i < rep->nprocs && !p; i++)
        if (rep->procs[i].pid == pid || rep->nprocs == 1) p = &rep->procs[i];
    if (!p) return 0;
    sqlite3_stmt *st = NULL;
    if (sqlite3_prepare_v2(s->db, SQL_STACK, -1, &st, NULL) != SQLITE_OK)
        return cw__store_dberr(s, "storing a heap trace's stacks", d);
    int err = 0;
    for (uint32_t i = 0; i < p->nstacks && !err; i++) {
        char *f = folded(&p->stacks[i]);
        if (!f) {
            err = cw_diag_set(d, CW_ENOMEM, "out of memory storing a heap trace");
            break;
        }
        sqlite3_bind_int64(st, 1, id);
        sqlite3_bind_int64(st, 2, i);
        sqlite3_bind_text(st, 3, f, -1, free);
        bind_figs(st, 4, &p->stacks[i].figs);
        err = cw__store_step_done(s, st, "storing a heap trace's stacks", d);
    }
    sqlite3_finalize(st);
    return err;
}

int cw_store_heap_finish(cw_store_t *s, const cw_heap_trace_row_t *r, const cw_heap_report_t *rep,
                         const char *json, cw_diag_t *d)
{
    sqlite3_stmt *st = NULL;
    int err = cw__store_exec(s, "BEGIN IMMEDIATE", "storing a heap trace", d);
    if (err) return err;
    if (sqlite3_prepare_v2(s->db, SQL_FINISH, -1, &st, NULL) != SQLITE_OK) {
        err = cw__store_dberr(s, "storing a heap trace", d);
        goto fail;
    }
    sqlite3_bind_int64(st, 1, r->id);
    bind_opt(st, 2, r->started_ns);
    bind_opt(st, 3, r->ended_ns);
    bind_str(st, 4, r->state ? r->state : "done");
    bind_str(st, 5, r->end_reason);
    bind_str(st, 6, r->error);
    const uint64_t counts[] = {r->events, r->unknown_frees, r->zero_allocs,
                               r->reused, r->dropped,       r->torn};
    for (int i = 0; i < (int)CW_ARRAY_LEN(counts); i++)
        sqlite3_bind_int64(st, 7 + i, (int64_t)counts[i]);
    bind_figs(st, 13, &r->totals);
    bind_str(st, 20, json);
    err = cw__store_step_done(s, st, "storing a heap trace", d);
    sqlite3_finalize(st);
    if (!err && rep) err = put_stacks(s, r->id, r->pid, rep, d);
    if (err) goto fail;
    return cw__store_exec(s, "COMMIT", "storing a heap trace", d);
fail:
    sqlite3_exec(s->db, "ROLLBACK", NULL, NULL, NULL);
    return err;
}

int cw_store_heap_orphans(cw_store_t *s, int64_t now_ns, const char *why, uint64_t *n, cw_diag_t *d)
{
    sqlite3_stmt *st = NULL;
    *n = 0;
    if (sqlite3_prepare_v2(s->db, SQL_ORPHANS, -1, &st, NULL) != SQLITE_OK)
        return cw__store_dberr(s, "ending the heap traces of an earlier run", d);
    sqlite3_bind_int64(st, 1, now_ns);
    sqlite3_bind_text(st, 2, why, -1, SQLITE_STATIC);
    int err = cw__store_step_done(s, st, "ending the heap traces of an earlier run", d);
    if (!err) *n = (uint64_t)sqlite3_changes(s->db);
    sqlite3_finalize(st);
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
    uint64_t *counts[] = {&r->events, &r->unknown_frees, &r->zero_allocs,
                          &r->reused, &r->dropped,       &r->torn};
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

int cw_store_heap_list(cw_store_t *s, const cw_heap_trace_filter_t *f, cw_heap_trace_row_t **out,
                       size_t *n, cw_diag_t *d)
{
    *out = NULL;
    *n = 0;
    sqlite3_stmt *st = NULL;
    if (sqlite3_prepare_v2(s->db, SQL_LIST, -1, &st, NULL) != SQLITE_OK)
        return cw__store_dberr(s, "listing heap traces", d);
    sqlite3_bind_int64(st, 1, f->alert_series);
    sqlite3_bind_int64(st, 2, f->pid);
    sqlite3_bind_int64(st, 3, f->proc);
    sqlite3_bind_int64(st, 4, f->limit ? f->limit : 100);
    cw_heap_trace_row_t *v = NULL;
    size_t cnt = 0, cap = 0;
    int rc, err = 0;
    while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
        if (CW_RESERVE(v, cap, cnt + 1) || !read_row(st, &v[cnt++], false)) {
            err = cw_diag_set(d, CW_ENOMEM, "out of memory listing heap traces");
            break;
        }
    }
    if (!err && rc != SQLITE_DONE) err = cw__store_dberr(s, "listing heap traces", d);
    sqlite3_finalize(st);
    if (err) {
        cw_heap_trace_rows_free(v, cnt);
        return err;
    }
    *out = v;
    *n = cnt;
    return 0;
}

int cw_store_heap_get(cw_store_t *s, int64_t id, cw_heap_trace_row_t *out, cw_diag_t *d)
{
    memset(out, 0, sizeof *out);
    sqlite3_stmt *st = NULL;
    if (sqlite3_prepare_v2(s->db, SQL_GET, -1, &st, NULL) != SQLITE_OK)
        return cw__store_dberr(s, "reading a heap trace", d);
    sqlite3_bind_int64(st, 1, id);
    int rc = sqlite3_step(st), err = 0;
    if (rc == SQLITE_ROW) {
        if (!read_row(st, out, true))
            err = cw_diag_set(d, CW_ENOMEM, "out of memory reading a heap trace");
    } else if (rc == SQLITE_DONE) {
        err = cw_diag_set(d, CW_ENOENT, "no heap trace %lld", (long long)id);
    } else {
        err = cw__store_dberr(s, "reading a heap trace", d);
    }
    sqlite3_finalize(st);
    if (err) cw_heap_trace_row_clear(out);
    return err;
}
