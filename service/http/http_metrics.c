/* http_metrics.c - /metrics in the Prometheus text exposition format 0.0.4.
 *
 * Cardinality is bounded: per-process series exist for the top N
 * processes by outstanding commit (--metrics-top, default 20), the rest
 * summed into one process="other" series; tags are bounded by the rule
 * set. Label values are made scrape-safe: backslash, quote and newline
 * escaped, other control characters replaced, at most 128 bytes.
 *
 * Everything is read from the hour tier up to the hour it is complete to
 * and from the raw tier after it (transients: the minute tier), so a
 * scrape costs little however much history is stored. The counters
 * (committed, decommitted, transient) are sums over what is stored;
 * retention folding old rows into baselines shows up as a counter reset,
 * which rate() and increase() handle. Transient = committed and released
 * within the same (UTC) minute. */
#include "http/http_internal.h"
#include "commitwatch/platform.h"

#include <inttypes.h>
#include <sqlite3.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* A growable text buffer; on ENOMEM it stays failed and empty. */
typedef struct buf {
    char *p;
    size_t n, cap;
    bool failed;
} buf_t;

static void bprintf(buf_t *b, const char *fmt, ...) CW_PRINTF(2, 3);

static void bprintf(buf_t *b, const char *fmt, ...)
{
    if (b->failed) return;
    for (;;) {
        va_list ap;
        va_start(ap, fmt);
        int k = vsnprintf(b->p ? b->p + b->n : NULL, b->p ? b->cap - b->n : 0, fmt, ap);
        va_end(ap);
        if (k < 0) {
            b->failed = true;
            return;
        }
        if (b->p && b->n + (size_t)k < b->cap) {
            b->n += (size_t)k;
            return;
        }
        size_t cap = b->cap ? b->cap * 2 : 16384;
        while (cap < b->n + (size_t)k + 1)
            cap *= 2;
        char *np = realloc(b->p, cap);
        if (!np) {
            b->failed = true;
            return;
        }
        b->p = np;
        b->cap = cap;
    }
}

/* Escapes a label value into out (len >= 2 * 128 + 1): at most 128 bytes
 * of the input, never cutting a UTF-8 sequence; backslash, quote and
 * newline escaped, other control characters replaced by '_'. */
static const char *label(const char *in, char *out, size_t len)
{
    const unsigned char *p = (const unsigned char *)(in ? in : "");
    size_t o = 0, used = 0;
    while (*p) {
        size_t n = *p >= 0xF0 ? 4 : *p >= 0xE0 ? 3 : *p >= 0xC0 ? 2 : 1;
        if (used + n > 128 || o + 2 * n + 1 > len) break;
        bool bad = (*p >= 0x80 && *p < 0xC0) || *p >= 0xF8;
        for (size_t k = 1; k < n && !bad; k++)
            bad = (p[k] & 0xC0) != 0x80;
        if (bad) n = 1; /* not UTF-8: replaced, Prometheus wants UTF-8 */
        if (n == 1 && (*p == '\\' || *p == '"' || *p == '\n')) {
            out[o++] = '\\';
            out[o++] = *p == '\n' ? 'n' : (char)*p;
        } else if (n == 1 && (bad || *p < 0x20 || *p == 0x7f))
            out[o++] = '_';
        else
            for (size_t k = 0; k < n; k++)
                out[o++] = (char)p[k];
        p += n;
        used += n;
    }
    out[o] = 0;
    return out;
}

/* Everything stored, read cheaply: the hour tier's rows before ?1 (the
 * hour it is complete to, see cw__http_split) and the raw tier's rows
 * from ?1 on. Per process, per tag outstanding now: */
#define SQL_OUTSTANDING                                                                            \
    "SELECT x.proc, p.pid, p.name, s.tag, SUM(x.b) FROM ("                                         \
    " SELECT proc, stack, bytes AS b FROM commits WHERE tier = 2 AND bucket < ?1"                  \
    " UNION ALL SELECT proc, stack, bytes FROM commits WHERE tier = 0 AND bucket >= ?1"            \
    " UNION ALL SELECT proc, stack, -bytes FROM releases WHERE tier = 2 AND f < ?1"                \
    " UNION ALL SELECT proc, stack, -bytes FROM releases WHERE tier = 0 AND f >= ?1"               \
    ") x JOIN stacks s ON s.id = x.stack JOIN processes p ON p.id = x.proc"                        \
    " GROUP BY x.proc, s.tag HAVING SUM(x.b) != 0 ORDER BY x.proc"

/* Committed bytes and events by tag (rundown and retention baselines,
 * bucket BEFORE, left out). */
#define SQL_COMMITTED                                                                              \
    "SELECT s.tag, SUM(x.b), SUM(x.e) FROM ("                                                      \
    " SELECT stack, bytes AS b, events AS e FROM commits WHERE tier = 2 AND bucket < ?1"           \
    "  AND bucket > -9223372036854775807 - 1"                                                      \
    " UNION ALL SELECT stack, bytes, events FROM commits WHERE tier = 0 AND bucket >= ?1"          \
    "  AND bucket > -9223372036854775807 - 1"                                                      \
    ") x JOIN stacks s ON s.id = x.stack GROUP BY s.tag ORDER BY s.tag"
/* Released bytes by tag; and the transient part: released within the
 * same minute it was committed (minute tier before ?2, raw after it). */
#define SQL_RELEASED                                                                               \
    "SELECT s.tag, SUM(x.b), SUM(x.tb), SUM(x.tp) FROM ("                                          \
    " SELECT stack, bytes AS b, 0 AS tb, 0 AS tp FROM releases WHERE tier = 2 AND f < ?1"          \
    " UNION ALL SELECT stack, bytes, 0, 0 FROM releases WHERE tier = 0 AND f >= ?1"                \
    " UNION ALL SELECT stack, 0, bytes, pieces FROM releases WHERE tier = 1 AND f < ?2 AND a = f"  \
    " UNION ALL SELECT stack, 0, bytes, pieces FROM releases WHERE tier = 0 AND f >= ?2"           \
    "  AND a > -9223372036854775807 - 1"                                                           \
    "  AND (a - ((a % 60000000000) + 60000000000) % 60000000000)"                                  \
    "    = (f - ((f % 60000000000) + 60000000000) % 60000000000)"                                  \
    ") x JOIN stacks s ON s.id = x.stack GROUP BY s.tag ORDER BY s.tag"

typedef struct prow {
    uint32_t proc, pid;
    char *name, *tag;
    int64_t bytes;
} prow_t;

typedef struct ptot {
    uint32_t proc;
    int64_t bytes;
} ptot_t;

static int cmp_ptot(const void *x, const void *y)
{
    const ptot_t *a = x, *b = y;
    if (a->bytes != b->bytes) return a->bytes > b->bytes ? -1 : 1;
    return a->proc < b->proc ? -1 : a->proc > b->proc;
}

static void free_rows(prow_t *v, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        free(v[i].name);
        free(v[i].tag);
    }
    free(v);
}

/* Outstanding bytes by process and tag, top N processes + other. */
static int outstanding(cw__http_req_t *r, buf_t *b)
{
    sqlite3 *db = cw_store_db(r->store);
    sqlite3_stmt *st;
    prow_t *rows = NULL;
    ptot_t *tots = NULL;
    size_t n = 0, cap = 0, nt = 0;
    int rc = 0;
    if (sqlite3_prepare_v2(db, SQL_OUTSTANDING, -1, &st, NULL) != SQLITE_OK)
        return cw__http_fail(r, 500, "query failed: %s", sqlite3_errmsg(db));
    sqlite3_bind_int64(st, 1, cw__http_split(db, 2, INT64_MAX));
    while (sqlite3_step(st) == SQLITE_ROW) {
        if (n == cap) {
            cap = cap ? cap * 2 : 256;
            prow_t *nr = realloc(rows, cap * sizeof *nr);
            if (!nr) {
                rc = cw__http_fail(r, 500, "out of memory");
                break;
            }
            rows = nr;
        }
        const unsigned char *nm = sqlite3_column_text(st, 2), *tg = sqlite3_column_text(st, 3);
        rows[n] =
            (prow_t){(uint32_t)sqlite3_column_int64(st, 0), (uint32_t)sqlite3_column_int64(st, 1),
                     strdup(nm ? (const char *)nm : ""), strdup(tg ? (const char *)tg : ""),
                     sqlite3_column_int64(st, 4)};
        n++;
    }
    sqlite3_finalize(st);
    if (rc) goto out;
    /* Rows come grouped by process: totals per process. */
    tots = calloc(n ? n : 1, sizeof *tots);
    if (!tots) {
        rc = cw__http_fail(r, 500, "out of memory");
        goto out;
    }
    for (size_t i = 0; i < n; i++) {
        if (!nt || tots[nt - 1].proc != rows[i].proc) tots[nt++] = (ptot_t){rows[i].proc, 0};
        tots[nt - 1].bytes += rows[i].bytes;
    }
    qsort(tots, nt, sizeof *tots, cmp_ptot);
    size_t top = nt < r->ctx->metrics_top ? nt : r->ctx->metrics_top;

    char l1[300], l2[300];
    bprintf(b,
            "# HELP commitwatch_process_outstanding_bytes Committed bytes now outstanding, per "
            "process (top %u by outstanding; the rest as process=\"other\") and stack tag.\n"
            "# TYPE commitwatch_process_outstanding_bytes gauge\n",
            r->ctx->metrics_top);
    /* "other": per tag sums of the processes outside the top. Tags are few. */
    typedef struct otag {
        const char *tag;
        int64_t bytes;
    } otag_t;
    otag_t *other = calloc(n ? n : 1, sizeof *other);
    size_t no = 0;
    if (!other) {
        rc = cw__http_fail(r, 500, "out of memory");
        goto out;
    }
    for (size_t i = 0; i < n; i++) {
        bool in_top = false;
        for (size_t k = 0; k < top && !in_top; k++)
            in_top = tots[k].proc == rows[i].proc;
        if (in_top) {
            bprintf(b,
                    "commitwatch_process_outstanding_bytes{process=\"%s\",pid=\"%" PRIu32
                    "\",id=\"%" PRIu32 "\",tag=\"%s\"} %" PRId64 "\n",
                    label(rows[i].name, l1, sizeof l1), rows[i].pid, rows[i].proc,
                    label(rows[i].tag, l2, sizeof l2), rows[i].bytes);
            continue;
        }
        size_t k = 0;
        while (k < no && strcmp(other[k].tag, rows[i].tag) != 0)
            k++;
        if (k == no) other[no++] = (otag_t){rows[i].tag, 0};
        other[k].bytes += rows[i].bytes;
    }
    for (size_t k = 0; k < no; k++)
        bprintf(
            b,
            "commitwatch_process_outstanding_bytes{process=\"other\",pid=\"\",id=\"\",tag=\"%s\"} "
            "%" PRId64 "\n",
            label(other[k].tag, l2, sizeof l2), other[k].bytes);
    free(other);
    int64_t all = 0;
    for (size_t i = 0; i < nt; i++)
        all += tots[i].bytes;
    bprintf(b,
            "# HELP commitwatch_outstanding_bytes Committed bytes now outstanding, all "
            "processes.\n# TYPE commitwatch_outstanding_bytes gauge\n"
            "commitwatch_outstanding_bytes %" PRId64 "\n"
            "# HELP commitwatch_processes Process instances with outstanding commit.\n"
            "# TYPE commitwatch_processes gauge\ncommitwatch_processes %zu\n",
            all, nt);
out:
    free(tots);
    free_rows(rows, n);
    return rc;
}

/* Counters by tag. */
static int counters(cw__http_req_t *r, buf_t *b)
{
    sqlite3 *db = cw_store_db(r->store);
    sqlite3_stmt *st;
    char l[300];
    int64_t split2 = cw__http_split(db, 2, INT64_MAX), split1 = cw__http_split(db, 1, INT64_MAX);
    if (sqlite3_prepare_v2(db, SQL_COMMITTED, -1, &st, NULL) != SQLITE_OK)
        return cw__http_fail(r, 500, "query failed: %s", sqlite3_errmsg(db));
    sqlite3_bind_int64(st, 1, split2);
    buf_t ev = {0};
    bprintf(b, "# HELP commitwatch_committed_bytes_total Bytes newly committed, by stack tag.\n"
               "# TYPE commitwatch_committed_bytes_total counter\n");
    bprintf(&ev,
            "# HELP commitwatch_commit_events_total Commit events that committed new bytes, by "
            "stack tag.\n# TYPE commitwatch_commit_events_total counter\n");
    while (sqlite3_step(st) == SQLITE_ROW) {
        label((const char *)sqlite3_column_text(st, 0), l, sizeof l);
        bprintf(b, "commitwatch_committed_bytes_total{tag=\"%s\"} %" PRId64 "\n", l,
                (int64_t)sqlite3_column_int64(st, 1));
        bprintf(&ev, "commitwatch_commit_events_total{tag=\"%s\"} %" PRId64 "\n", l,
                (int64_t)sqlite3_column_int64(st, 2));
    }
    sqlite3_finalize(st);
    if (ev.failed)
        b->failed = true;
    else if (ev.p)
        bprintf(b, "%s", ev.p);
    free(ev.p);

    if (sqlite3_prepare_v2(db, SQL_RELEASED, -1, &st, NULL) != SQLITE_OK)
        return cw__http_fail(r, 500, "query failed: %s", sqlite3_errmsg(db));
    sqlite3_bind_int64(st, 1, split2);
    sqlite3_bind_int64(st, 2, split1);
    buf_t tb = {0}, tc = {0};
    bprintf(
        b,
        "# HELP commitwatch_decommitted_bytes_total Bytes decommitted or released, by the stack "
        "tag of the commit that made them.\n# TYPE commitwatch_decommitted_bytes_total counter\n");
    bprintf(&tb, "# HELP commitwatch_transient_bytes_total Bytes committed and released within the "
                 "same minute, by stack tag.\n# TYPE commitwatch_transient_bytes_total counter\n");
    bprintf(&tc,
            "# HELP commitwatch_transient_pieces_total Pieces committed and released within the "
            "same minute, by stack tag.\n# TYPE commitwatch_transient_pieces_total counter\n");
    while (sqlite3_step(st) == SQLITE_ROW) {
        label((const char *)sqlite3_column_text(st, 0), l, sizeof l);
        bprintf(b, "commitwatch_decommitted_bytes_total{tag=\"%s\"} %" PRId64 "\n", l,
                (int64_t)sqlite3_column_int64(st, 1));
        bprintf(&tb, "commitwatch_transient_bytes_total{tag=\"%s\"} %" PRId64 "\n", l,
                (int64_t)sqlite3_column_int64(st, 2));
        bprintf(&tc, "commitwatch_transient_pieces_total{tag=\"%s\"} %" PRId64 "\n", l,
                (int64_t)sqlite3_column_int64(st, 3));
    }
    sqlite3_finalize(st);
    if (tb.failed || tc.failed) b->failed = true;
    if (tb.p) bprintf(b, "%s", tb.p);
    if (tc.p) bprintf(b, "%s", tc.p);
    free(tb.p);
    free(tc.p);
    return 0;
}

int cw__http_metrics(cw__http_req_t *r)
{
    const cw_status_t *st = r->ctx->status;
    buf_t b = {0};
    int64_t now = cw_plat_wall_ns(), end = INT64_MIN;
    char l[300];
    int rc;
    bprintf(&b,
            "# HELP commitwatch_build_info The running commitwatch.\n"
            "# TYPE commitwatch_build_info gauge\n"
            "commitwatch_build_info{version=\"%s\",source=\"%s\"} 1\n",
            CW_VERSION, label(st ? st->source : "", l, sizeof l));
    bprintf(&b,
            "# HELP commitwatch_uptime_seconds Seconds since the service started.\n"
            "# TYPE commitwatch_uptime_seconds gauge\ncommitwatch_uptime_seconds %.3f\n",
            st ? (double)(now - st->start_ns) / 1e9 : 0.0);
    bprintf(&b,
            "# HELP commitwatch_events_ingested_total Events read from the source.\n"
            "# TYPE commitwatch_events_ingested_total counter\n"
            "commitwatch_events_ingested_total %" PRIu64 "\n"
            "# HELP commitwatch_events_lost_total Events the source reported lost.\n"
            "# TYPE commitwatch_events_lost_total counter\ncommitwatch_events_lost_total %" PRIu64
            "\n"
            "# HELP commitwatch_drift_corrected_bytes Bytes of drift between the tracker and "
            "the OS's figures, corrected.\n# TYPE commitwatch_drift_corrected_bytes gauge\n"
            "commitwatch_drift_corrected_bytes %" PRId64 "\n",
            st ? atomic_load(&st->events_ingested) : 0, st ? atomic_load(&st->events_lost) : 0,
            st ? atomic_load(&st->drift_bytes) : 0);
    if (cw__http_data_end(r->store, &end) == 0 && end != INT64_MIN)
        bprintf(&b,
                "# HELP commitwatch_last_bucket_end_seconds End of the last stored bucket "
                "(Unix time).\n# TYPE commitwatch_last_bucket_end_seconds gauge\n"
                "commitwatch_last_bucket_end_seconds %.3f\n",
                (double)end / 1e9);
    bprintf(&b,
            "# HELP commitwatch_db_size_bytes Size of the database file and its WAL.\n"
            "# TYPE commitwatch_db_size_bytes gauge\ncommitwatch_db_size_bytes %" PRIu64 "\n",
            cw_store_disk_bytes(r->ctx->db_path));
    if ((rc = outstanding(r, &b)) || (rc = counters(r, &b))) {
        free(b.p);
        return rc;
    }
    if (b.failed) {
        free(b.p);
        return cw__http_fail(r, 500, "out of memory");
    }
    cw__http_send(r, 200, "text/plain; version=0.0.4; charset=utf-8", b.p, b.n);
    free(b.p);
    return 0;
}
