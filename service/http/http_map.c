/* http_map.c - GET /api/processes/{id}/map: an instance's committed-memory
 * map at an instant (?at=), or the difference of two (?t1=&t2=); map.h,
 * docs/DESIGN.md "Memory maps".
 *
 * A live instance's map now comes from the core thread through the
 * server's cw_mapreq channel (a copy; this worker never reads the
 * tracker); any other instant, and an instance no longer live, from the
 * store's snapshots (the latest at or before the instant). The ranges are
 * columns (addr, size, commit_ns, stack), so 100,000 ranges are a few MB
 * and parse fast in a browser; the reserved-but-uncommitted ranges come
 * as a second set of columns, "reserved" (of the later map in a
 * difference); stacks are listed once each with their tag and frames. */
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "commitwatch/event.h"
#include "commitwatch/map.h"
#include "commitwatch/query.h"
#include "http/http_resources.h"

#define LIVE_TIMEOUT_NS (2 * CW_NS_PER_S) /* a core thread busy longer: stored maps */
#define MAX_SNAPSHOT_TIMES 2000

/* The map of id at `at`: live when at is now or later and the core thread
 * has it, else stored. *live says which. 0 or a status with r->err. */
static int map_at(cw__http_req_t *r, uint32_t id, int64_t at, const char *name, cw_map_t *m,
                  bool *live)
{
    cw_diag_t d = {{0}};
    *live = false;
    if (r->ctx->maps && at >= cw__http_now(r) &&
        cw_mapreq_ask(r->ctx->maps, id, LIVE_TIMEOUT_NS, m) == 0) {
        *live = true;
        return 0;
    }
    int rc = cw_store_map_at(r->store, id, at, m, &d);
    if (rc == CW_ENOENT)
        return cw__http_fail(r, 404,
                             "%s: process %" PRIu32 " has no memory map at or before %" PRId64
                             " ns (maps are kept for live processes and as snapshots within the "
                             "raw tier's retention)",
                             name, id, at);
    if (rc != 0) return cw__http_fail(r, 500, "%s", d.msg);
    return 0;
}

static int by_u32(const void *a, const void *b)
{
    uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
    return x < y ? -1 : x > y;
}

/* "stacks": each distinct stack of the ranges once, with tag and frames. */
static int put_stacks(cw__http_req_t *r, cw_buf_t *b, const cw_map_range_t *const *rs, size_t n)
{
    uint32_t *ids = malloc((n ? n : 1) * sizeof *ids);
    size_t k = 0;
    cw_diag_t d = {{0}};
    int rc = 0;
    if (!ids) return cw__http_fail(r, 500, "out of memory");
    for (size_t i = 0; i < n; i++) ids[i] = rs[i]->stack_id;
    qsort(ids, n, sizeof *ids, by_u32);
    cw_buf_puts(b, "\"stacks\":[");
    for (size_t i = 0; i < n && rc == 0; i++) {
        if (i && ids[i] == ids[i - 1]) continue;
        char *tag = NULL, **frames = NULL;
        uint32_t nf = 0;
        if (cw_store_stack_get(r->store, ids[i], true, &tag, &frames, &nf, &d) != 0) {
            rc = cw__http_fail(r, 500, "%s", d.msg);
            break;
        }
        cJSON *o = cJSON_CreateObject(), *fa = cJSON_CreateArray();
        bool ok = o && fa && cw__json_i64(o, "id", ids[i]) && cJSON_AddStringToObject(o, "tag", tag);
        for (uint32_t f = 0; ok && f < nf; f++) ok = cJSON_AddItemToArray(fa, cJSON_CreateString(frames[f]));
        if (ok && cJSON_AddItemToObject(o, "frames", fa)) fa = NULL;
        char *txt = ok ? cJSON_PrintUnformatted(o) : NULL;
        if (txt) {
            cw_buf_printf(b, "%s%s", k++ ? "," : "", txt);
            cJSON_free(txt);
        } else {
            rc = cw__http_fail(r, 500, "out of memory");
        }
        cJSON_Delete(fa);
        cJSON_Delete(o);
        for (uint32_t f = 0; f < nf; f++) free(frames[f]);
        free(frames);
        free(tag);
    }
    cw_buf_puts(b, "]");
    free(ids);
    return rc;
}

/* Appends v in decimal after a comma (first: none): 400,000 numbers for
 * 100,000 ranges, so not through printf. */
static void put_num(cw_buf_t *b, bool first, bool neg, uint64_t v)
{
    char tmp[24], *e = tmp + sizeof tmp, *p = e;
    do {
        *--p = (char)('0' + v % 10);
        v /= 10;
    } while (v);
    if (neg) *--p = '-';
    if (!first) *--p = ',';
    cw_buf_put(b, p, (size_t)(e - p));
}

static void put_i64(cw_buf_t *b, bool first, int64_t v)
{
    put_num(b, first, v < 0, v < 0 ? 0 - (uint64_t)v : (uint64_t)v);
}

/* The range columns under key ("ranges": committed, with commit_ns;
 * "reserved": reserved, not committed, with reserve_ns); change: NULL, or
 * each range's change (a diff). */
static void put_ranges(cw_buf_t *b, bool reserved, const cw_map_range_t *const *rs, size_t n,
                       const cw_map_change_t *change)
{
    cw_buf_puts(b, reserved ? "\"reserved\":{\"count\":" : "\"ranges\":{\"count\":");
    cw_buf_printf(b, "%zu,\"addr\":[", n);
    for (size_t i = 0; i < n; i++) put_num(b, i == 0, false, rs[i]->addr);
    cw_buf_puts(b, "],\"size\":[");
    for (size_t i = 0; i < n; i++) put_num(b, i == 0, false, rs[i]->size);
    cw_buf_puts(b, reserved ? "],\"state\":\"reserved\",\"reserve_ns\":["
                            : "],\"state\":\"committed\",\"commit_ns\":[");
    for (size_t i = 0; i < n; i++) {
        if (rs[i]->commit_ns == CW_TS_BEFORE)
            cw_buf_puts(b, i ? ",null" : "null");
        else
            put_i64(b, i == 0, rs[i]->commit_ns);
    }
    cw_buf_puts(b, "],\"stack\":[");
    for (size_t i = 0; i < n; i++) put_num(b, i == 0, false, rs[i]->stack_id);
    cw_buf_puts(b, "]");
    if (change) {
        cw_buf_puts(b, ",\"change\":[");
        for (size_t i = 0; i < n; i++) {
            if (i) cw_buf_put(b, ",", 1);
            cw_buf_puts(b, change[i] == CW_MAP_NEW ? "\"new\"" : change[i] == CW_MAP_FREED ? "\"freed\"" : "\"kept\"");
        }
        cw_buf_puts(b, "]");
    }
    cw_buf_puts(b, "}");
}

static void put_times(cw__http_req_t *r, cw_buf_t *b, uint32_t id)
{
    int64_t *t = NULL;
    size_t n = 0;
    cw_diag_t d = {{0}};
    cw_buf_puts(b, "\"snapshots_ns\":[");
    if (cw_store_map_times(r->store, id, MAX_SNAPSHOT_TIMES, &t, &n, &d) == 0)
        for (size_t i = 0; i < n; i++) put_i64(b, i == 0, t[i]);
    free(t);
    cw_buf_puts(b, "]");
}

int cw__http_map(cw__http_req_t *r, uint32_t id)
{
    const char *as = cw__http_param(r, "at"), *t1s = cw__http_param(r, "t1"),
               *t2s = cw__http_param(r, "t2");
    int64_t at, t1 = 0, t2 = 0;
    bool diff = t1s || t2s, live1 = false, live2 = false;
    int rc;
    cw_map_t m1 = {0}, m2 = {0};
    cw_map_diff_t md = {0};
    const cw_map_range_t **rs = NULL;
    cw_map_change_t *ch = NULL;
    cw_buf_t b = {0};
    cw_proc_info_t info = {0};
    cw_diag_t d = {{0}};

    if (diff && as) return cw__http_fail(r, 400, "at: not with t1 and t2 (one map, or a difference)");
    if (diff) {
        if (!t1s || !t2s)
            return cw__http_fail(r, 400, "%s: required with %s (a time: Unix ns, RFC 3339 or -15m)",
                                 t1s ? "t2" : "t1", t1s ? "t1" : "t2");
        if ((rc = cw__http_parse_time(r, "t1", t1s, &t1)) ||
            (rc = cw__http_parse_time(r, "t2", t2s, &t2)))
            return rc;
        if (t1 >= t2) return cw__http_fail(r, 400, "t1: must be before t2");
    } else if (as) {
        if ((rc = cw__http_parse_time(r, "at", as, &at))) return rc;
    } else {
        at = cw__http_now(r);
    }
    rc = cw_store_proc_get(r->store, id, &info, &d);
    if (rc == CW_ENOENT) return cw__http_fail(r, 404, "process %" PRIu32 " not found", id);
    if (rc != 0) return cw__http_fail(r, 500, "%s", d.msg);

    size_t n;
    const cw_map_t *later = diff ? &m2 : &m1; /* whose reserved ranges are shown */
    if (!diff) {
        if ((rc = map_at(r, id, at, "at", &m1, &live1))) goto out;
        n = m1.n;
    } else {
        if ((rc = map_at(r, id, t1, "t1", &m1, &live1)) || (rc = map_at(r, id, t2, "t2", &m2, &live2)))
            goto out;
        if (cw_map_diff(&m1, &m2, &md) != 0) {
            rc = cw__http_fail(r, 500, "out of memory");
            goto out;
        }
        n = md.n;
    }
    size_t nres = later->nres;
    rs = malloc((n + nres ? n + nres : 1) * sizeof *rs); /* committed, then reserved */
    ch = diff ? malloc((n ? n : 1) * sizeof *ch) : NULL;
    if (!rs || (diff && !ch)) {
        rc = cw__http_fail(r, 500, "out of memory");
        goto out;
    }
    for (size_t i = 0; i < n; i++) {
        rs[i] = diff ? &md.v[i].r : &m1.v[i];
        if (diff) ch[i] = md.v[i].change;
    }
    for (size_t i = 0; i < nres; i++) rs[n + i] = &later->res[i];
    /* About 40 bytes a range: the buffer grows a few times at most. */
    if (CW_RESERVE(b.p, b.cap, (n + nres) * 40 + 4096) != 0) {
        rc = cw__http_fail(r, 500, "out of memory");
        goto out;
    }
    cw_buf_printf(&b, "{\"process\":%" PRIu32 ",\"pid\":%" PRIu32 ",", id, info.pid);
    if (!diff)
        cw_buf_printf(&b,
                      "\"at_ns\":%" PRId64 ",\"map_ns\":%" PRId64 ",\"source\":\"%s\","
                      "\"committed_bytes\":%" PRIu64 ",\"reserved_bytes\":%" PRIu64 ",",
                      at, m1.at_ns, live1 ? "live" : "stored", cw_map_bytes(&m1),
                      cw_map_reserved_bytes(&m1));
    else
        cw_buf_printf(&b,
                      "\"t1_ns\":%" PRId64 ",\"t2_ns\":%" PRId64 ",\"map1_ns\":%" PRId64
                      ",\"map2_ns\":%" PRId64 ",\"source1\":\"%s\",\"source2\":\"%s\","
                      "\"bytes\":{\"new\":%" PRIu64 ",\"freed\":%" PRIu64 ",\"kept\":%" PRIu64 "},"
                      "\"reserved_bytes\":%" PRIu64 ",",
                      t1, t2, m1.at_ns, m2.at_ns, live1 ? "live" : "stored",
                      live2 ? "live" : "stored", md.bytes[CW_MAP_NEW], md.bytes[CW_MAP_FREED],
                      md.bytes[CW_MAP_KEPT], cw_map_reserved_bytes(&m2));
    put_times(r, &b, id);
    cw_buf_puts(&b, ",");
    put_ranges(&b, false, rs, n, ch);
    cw_buf_puts(&b, ",");
    put_ranges(&b, true, rs + n, nres, NULL);
    cw_buf_puts(&b, ",");
    if ((rc = put_stacks(r, &b, rs, n + nres))) goto out;
    cw_buf_puts(&b, "}");
    if (b.failed) {
        rc = cw__http_fail(r, 500, "out of memory");
        goto out;
    }
    rc = cw__http_send(r, 200, "application/json", b.p, b.n);
out:
    free(b.p);
    free(rs);
    free(ch);
    cw_map_diff_clear(&md);
    cw_map_clear(&m1);
    cw_map_clear(&m2);
    cw_proc_info_clear(&info);
    return rc;
}
