/* store_notify.c - the notification attempts (alertdb.h, table
 * notifications of schema/004_alerts.sql): written by the notifier on its
 * own read-write handle, in one transaction per batch (WAL and the busy
 * timeout let it run beside the service's writer), and counted by channel
 * and result for /metrics.
 *
 * The statements are prepared per call, not cached: a batch is a handful
 * of rows a few times a minute. */
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "commitwatch/alertdb.h"
#include "commitwatch/common.h"
#include "store/store_internal.h"

static const char SQL_NOTIFY_ADD[] =
    "INSERT INTO notifications(ts_ns, channel, series, transition, attempt, result, detail) "
    "VALUES (?, ?, ?, ?, ?, ?, ?)";
static const char SQL_NOTIFY_COUNTS[] =
    "SELECT channel, result, count(*) FROM notifications GROUP BY channel, result "
    "ORDER BY channel, result";

/* The row's strings, freed as store_alerts.c frees its rows'. */
static const size_t notify_owned[] = {offsetof(cw_notify_row_t, channel),
                                      offsetof(cw_notify_row_t, result),
                                      offsetof(cw_notify_row_t, detail)};

void cw_notify_row_clear(cw_notify_row_t *r)
{
    if (!r) return;
    cw_free_members(r, notify_owned, CW_ARRAY_LEN(notify_owned));
    memset(r, 0, sizeof *r);
}

static void bind_id(sqlite3_stmt *st, int i, int64_t v)
{
    if (v)
        sqlite3_bind_int64(st, i, v);
    else
        sqlite3_bind_null(st, i);
}

int cw_store_notify_add(cw_store_t *s, cw_notify_row_t *v, size_t n, cw_diag_t *d)
{
    if (!n) return 0;
    sqlite3_stmt *st = NULL;
    int err = cw__store_exec(s, "BEGIN IMMEDIATE", "recording notifications", d);
    if (err) return err;
    if (sqlite3_prepare_v2(s->db, SQL_NOTIFY_ADD, -1, &st, NULL) != SQLITE_OK) {
        err = cw__store_dberr(s, "recording notifications", d);
        goto fail;
    }
    for (size_t i = 0; i < n; i++) {
        sqlite3_bind_int64(st, 1, v[i].ts_ns);
        sqlite3_bind_text(st, 2, v[i].channel ? v[i].channel : "", -1, SQLITE_STATIC);
        bind_id(st, 3, v[i].series);
        bind_id(st, 4, v[i].transition);
        sqlite3_bind_int(st, 5, v[i].attempt);
        sqlite3_bind_text(st, 6, v[i].result ? v[i].result : "", -1, SQLITE_STATIC);
        if (v[i].detail)
            sqlite3_bind_text(st, 7, v[i].detail, -1, SQLITE_STATIC);
        else
            sqlite3_bind_null(st, 7);
        if (sqlite3_step(st) != SQLITE_DONE) {
            err = cw__store_dberr(s, "recording notifications", d);
            goto fail;
        }
        v[i].id = sqlite3_last_insert_rowid(s->db);
        sqlite3_reset(st);
        sqlite3_clear_bindings(st);
    }
    sqlite3_finalize(st);
    return cw__store_exec(s, "COMMIT", "recording notifications", d);
fail:
    sqlite3_finalize(st);
    sqlite3_exec(s->db, "ROLLBACK", NULL, NULL, NULL);
    return err;
}

int cw_store_notify_counts(cw_store_t *s, cw_notify_count_t **out, size_t *n, cw_diag_t *d)
{
    *out = NULL;
    *n = 0;
    sqlite3_stmt *st = NULL;
    cw_notify_count_t *v = NULL;
    size_t cnt = 0, cap = 0;
    int err = 0, rc;
    if (sqlite3_prepare_v2(s->db, SQL_NOTIFY_COUNTS, -1, &st, NULL) != SQLITE_OK)
        return cw__store_dberr(s, "counting notifications", d);
    while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
        if (CW_RESERVE(v, cap, cnt + 1)) goto nomem;
        cw_notify_count_t *c = &v[cnt];
        c->channel = cw_strdup((const char *)sqlite3_column_text(st, 0));
        c->result = cw_strdup((const char *)sqlite3_column_text(st, 1));
        c->count = (uint64_t)sqlite3_column_int64(st, 2);
        cnt++;
        if (!c->channel || !c->result) goto nomem;
    }
    if (rc != SQLITE_DONE) {
        err = cw__store_dberr(s, "counting notifications", d);
        goto fail;
    }
    sqlite3_finalize(st);
    *out = v;
    *n = cnt;
    return 0;
nomem:
    err = cw_diag_set(d, CW_ENOMEM, "out of memory counting notifications");
fail:
    sqlite3_finalize(st);
    cw_notify_counts_free(v, cnt);
    return err;
}

void cw_notify_counts_free(cw_notify_count_t *v, size_t n)
{
    for (size_t i = 0; v && i < n; i++) {
        free(v[i].channel);
        free(v[i].result);
    }
    free(v);
}
