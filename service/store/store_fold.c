/* store_fold.c - short-lived instances stored folded (schema/005_folded,
 * 010_folded_runs; docs/DESIGN.md "Short-lived processes"): writing a
 * batch's folded instances as runs, listing a group's instances on
 * demand, and the runs' encoding.
 *
 * The aggregator (track/agg.c) decides what folds and gives the folded
 * instances' rows their group's id; the store keeps the record of each
 * instance and the count in its group's processes row.
 *
 * A run is one row of `folded`: up to RUN_MAX (32) instances of one group,
 * sorted by (start, pid), in a BLOB of varints (cw__fold_encode), about
 * 10 bytes an instance where a row of its own took 34. A batch's
 * instances of a group go into the group's latest run while it has room
 * (read, merged, written again), else into new runs. An instance stored
 * twice (the writer never does: buckets are stored once) is kept once,
 * the later values winning inside a run; the reader lists an instance
 * found in two runs once, with the later exit. */
#include <stdlib.h>
#include <string.h>

#include "commitwatch/query.h"
#include "store/store_internal.h"

#define RUN_FORMAT 1 /* the first byte of a run's data */
/* Instances a run takes: about 330 bytes of data. Measured on the
 * short-lived replay (docs/BENCHMARKS.md): 32 left the fewest pages (455
 * KB; 16: 487, 64: 492); from 96 (about 1,000 bytes) rows spill from
 * their WITHOUT ROWID page into overflow pages (1.3 - 1.7 MB). */
#define RUN_MAX 32

static const char SQL_FOLDED_OPEN[] =
    "SELECT first_ns, n, data FROM folded WHERE grp = ?1 ORDER BY first_ns DESC LIMIT 1";
static const char SQL_FOLDED_AT[] = "SELECT n, data FROM folded WHERE grp = ?1 AND first_ns = ?2";
static const char SQL_FOLDED_DEL[] = "DELETE FROM folded WHERE grp = ?1 AND first_ns = ?2";
static const char SQL_FOLDED_PUT[] =
    "INSERT INTO folded(grp, first_ns, last_exit, n, data) VALUES (?1, ?2, ?3, ?4, ?5)";
static const char SQL_FOLDED_COUNT[] =
    "UPDATE processes SET folded = coalesce(folded, 0) + ?2 WHERE id = ?1";
/* The runs that may hold an instance alive in [?2, ?3): one started before
 * the end and one exited at or after the start. */
static const char SQL_FOLDED_LIST[] = "SELECT first_ns, n, data FROM folded WHERE grp = ?1 AND "
                                      "first_ns < ?3 AND last_exit >= ?2 ORDER BY first_ns";

/* ---- encoding ------------------------------------------------------------- */

/* bytes: its pages, doubled, and 1 when a remainder follows. */
static void put_bytes(cw_buf_t *b, uint64_t bytes)
{
    uint64_t rem = bytes & 4095;
    cw_buf_varint(b, (bytes >> 12) << 1 | (rem != 0));
    if (rem) cw_buf_varint(b, rem);
}

int cw__fold_encode(cw_buf_t *out, const cw_folded_inst_t *v, size_t n)
{
    int64_t prev_start = n ? v[0].start_ns : 0;
    uint32_t prev_pid = 0;
    unsigned char fmt = RUN_FORMAT;
    cw_buf_put(out, &fmt, 1);
    for (size_t i = 0; i < n; i++) {
        cw_buf_varint(out, (uint64_t)v[i].start_ns - (uint64_t)prev_start); /* sorted: >= 0 */
        cw_buf_varint(out, cw_zigzag((int64_t)v[i].pid - (int64_t)prev_pid));
        cw_buf_varint(out, cw_zigzag((int64_t)((uint64_t)v[i].exit_ns - (uint64_t)v[i].start_ns)));
        put_bytes(out, v[i].bytes);
        prev_start = v[i].start_ns;
        prev_pid = v[i].pid;
    }
    return out->failed ? CW_ENOMEM : 0;
}

/* cw_varint_read, its loop inlined for varints of up to 9 bytes (all of a
 * run's but the extremes): a list decodes every instance of its window. */
static inline int get_varint(const unsigned char *p, size_t len, size_t *pos, uint64_t *out)
{
    uint64_t v = 0;
    size_t i = *pos;
    for (int shift = 0; shift < 63 && i < len; shift += 7) {
        unsigned char c = p[i++];
        v |= (uint64_t)(c & 0x7f) << shift;
        if (c < 0x80) {
            *pos = i;
            *out = v;
            return 0;
        }
    }
    return cw_varint_read(p, len, pos, out); /* 10 bytes, too long, or cut short */
}

int cw__fold_decode(const unsigned char *p, size_t len, int64_t first_ns, uint64_t n,
                    cw_folded_inst_t **v, size_t *nv, size_t *cap)
{
    size_t pos = 1, base = *nv;
    int64_t prev_start = first_ns;
    int64_t prev_pid = 0;
    if (!p || len < 1 || p[0] != RUN_FORMAT) return CW_EPARSE;
    if (n > len) return CW_EPARSE; /* every instance takes 4 bytes at least */
    if (CW_RESERVE(*v, *cap, base + (size_t)n)) return CW_ENOMEM;
    for (uint64_t i = 0; i < n; i++) {
        uint64_t dstart, zpid, zlife, pages, rem = 0;
        if (get_varint(p, len, &pos, &dstart) || get_varint(p, len, &pos, &zpid) ||
            get_varint(p, len, &pos, &zlife) || get_varint(p, len, &pos, &pages) ||
            ((pages & 1) && get_varint(p, len, &pos, &rem)))
            goto bad;
        /* INT64_MAX - prev_start, exact modulo 2^64 since it lies in [0, 2^64). */
        if (dstart > (uint64_t)INT64_MAX - (uint64_t)prev_start) goto bad;
        int64_t dpid = cw_unzigzag(zpid);
        if (dpid < -prev_pid || dpid > (int64_t)UINT32_MAX - prev_pid || rem > 4095 ||
            ((pages & 1) && rem == 0))
            goto bad;
        int64_t pid = prev_pid + dpid;
        int64_t start = (int64_t)((uint64_t)prev_start + dstart);
        (*v)[base + i] = (cw_folded_inst_t){
            (uint32_t)pid, start, (int64_t)((uint64_t)start + (uint64_t)cw_unzigzag(zlife)),
            (pages >> 1) << 12 | rem};
        prev_start = start;
        prev_pid = pid;
    }
    if (pos != len) goto bad;
    *nv = base + (size_t)n;
    return 0;
bad:
    return CW_EPARSE;
}

/* ---- writing -------------------------------------------------------------- */

/* An instance on its way into a run, with the order it came in: of equal
 * (start, pid), the last one stays. */
typedef struct pending {
    cw_folded_inst_t f;
    size_t seq;
} pending_t;

static int cmp_inst(const cw_folded_inst_t *a, const cw_folded_inst_t *b)
{
    if (a->start_ns != b->start_ns) return a->start_ns < b->start_ns ? -1 : 1;
    return a->pid < b->pid ? -1 : a->pid > b->pid;
}

static int cmp_pending(const void *x, const void *y)
{
    const pending_t *a = x, *b = y;
    int c = cmp_inst(&a->f, &b->f);
    return c ? c : a->seq < b->seq ? -1 : a->seq > b->seq;
}

/* Sorts v[0..*n) by (start, pid, seq) and keeps the last of each equal
 * (start, pid). */
static void sort_unique(pending_t *v, size_t *n)
{
    size_t k = 0;
    if (*n > 1) qsort(v, *n, sizeof *v, cmp_pending);
    for (size_t i = 0; i < *n; i++) {
        if (k && cmp_inst(&v[k - 1].f, &v[i].f) == 0)
            v[k - 1] = v[i];
        else
            v[k++] = v[i];
    }
    *n = k;
}

/* The instances a run writes or reads, reused across a batch's groups. */
typedef struct fold_work {
    pending_t *p;
    size_t np, pcap;
    cw_folded_inst_t *dec, *enc;
    size_t ndec, deccap, enccap;
    cw_buf_t buf;
} fold_work_t;

/* Appends run data (n instances from first_ns) to w->p, numbered from seq. */
static int add_run(cw_store_t *s, fold_work_t *w, int64_t first_ns, int64_t n, const void *data,
                   int len, size_t seq, cw_diag_t *d)
{
    w->ndec = 0;
    int err = cw__fold_decode(data, (size_t)(len > 0 ? len : 0), first_ns, (uint64_t)n, &w->dec,
                              &w->ndec, &w->deccap);
    if (err == CW_ENOMEM) return cw_diag_set(d, err, "storing folded instances: out of memory");
    if (err)
        return cw_diag_set(d, CW_EDB,
                           "%s: a run of folded instances (from %lld ns) is damaged; the "
                           "database needs repair",
                           s->path, (long long)first_ns);
    if (CW_RESERVE(w->p, w->pcap, w->np + w->ndec))
        return cw_diag_set(d, CW_ENOMEM, "storing folded instances: out of memory");
    for (size_t i = 0; i < w->ndec; i++)
        w->p[w->np++] = (pending_t){w->dec[i], seq + i};
    return 0;
}

/* Takes the row of grp at first_ns (sql: the open run when at is NULL)
 * out of the table into w->p, before everything added since (seq 0..). */
static int take_run(cw_store_t *s, fold_work_t *w, uint32_t grp, const int64_t *at, bool only_open,
                    cw_diag_t *d)
{
    sqlite3_stmt *st = NULL;
    int64_t first = 0, n = 0;
    bool found = false;
    int rc, err = at ? cw__store_stmt(s, CW__ST_FOLDED_AT, SQL_FOLDED_AT, &st, d)
                     : cw__store_stmt(s, CW__ST_FOLDED_OPEN, SQL_FOLDED_OPEN, &st, d);
    if (err) return err;
    sqlite3_bind_int64(st, 1, grp);
    if (at) sqlite3_bind_int64(st, 2, *at);
    rc = sqlite3_step(st);
    if (rc == SQLITE_ROW) {
        int c = at ? 0 : 1;
        first = at ? *at : sqlite3_column_int64(st, 0);
        n = sqlite3_column_int64(st, c);
        found = !only_open || n < RUN_MAX;
        /* Its instances go first: what the batch adds replaces them. */
        if (found) {
            for (size_t i = 0; i < w->np; i++)
                w->p[i].seq += (size_t)n;
            err = add_run(s, w, first, n, sqlite3_column_blob(st, c + 1),
                          sqlite3_column_bytes(st, c + 1), 0, d);
        }
    } else if (rc != SQLITE_DONE) {
        err = cw__store_dberr(s, "reading a run of folded instances", d);
    }
    cw__store_stmt_done(st);
    if (!err && found) {
        const int64_t key[] = {grp, first};
        err = cw__store_put_ints(s, CW__ST_FOLDED_DEL, SQL_FOLDED_DEL, key, 2,
                                 "replacing a run of folded instances", d);
    }
    return err;
}

static int put_run(cw_store_t *s, fold_work_t *w, uint32_t grp, const cw_folded_inst_t *v, size_t n,
                   cw_diag_t *d)
{
    sqlite3_stmt *st = NULL;
    int64_t last_exit = INT64_MIN;
    int err;
    for (size_t i = 0; i < n; i++)
        if (v[i].exit_ns > last_exit) last_exit = v[i].exit_ns;
    w->buf.n = 0;
    if (cw__fold_encode(&w->buf, v, n))
        return cw_diag_set(d, CW_ENOMEM, "storing folded instances: out of memory");
    if ((err = cw__store_stmt(s, CW__ST_FOLDED_PUT, SQL_FOLDED_PUT, &st, d))) return err;
    sqlite3_bind_int64(st, 1, grp);
    sqlite3_bind_int64(st, 2, v[0].start_ns);
    sqlite3_bind_int64(st, 3, last_exit);
    sqlite3_bind_int64(st, 4, (int64_t)n);
    sqlite3_bind_blob(st, 5, w->buf.p, (int)w->buf.n, SQLITE_STATIC);
    return cw__store_step_done(s, st, "storing a run of folded instances", d);
}

/* Writes w->p (one group's instances) as runs of RUN_MAX (more when
 * instances share the last one's start); a run whose first start is some
 * stored run's key takes that run's instances in. */
static int put_group(cw_store_t *s, fold_work_t *w, uint32_t grp, cw_diag_t *d)
{
    int err = take_run(s, w, grp, NULL, true, d);
    size_t i = 0;
    sort_unique(w->p, &w->np);
    while (!err && i < w->np) {
        size_t k = w->np - i < RUN_MAX ? w->np - i : RUN_MAX;
        /* Instances of one start stay in one run, so the next run's key
         * (its first start) is not this one's. */
        while (i + k < w->np && w->p[i + k].f.start_ns == w->p[i + k - 1].f.start_ns)
            k++;
        int64_t first = w->p[i].f.start_ns;
        sqlite3_stmt *st = NULL;
        bool taken = false;
        /* A stored run with this key: merge it into what is left. */
        if ((err = cw__store_stmt(s, CW__ST_FOLDED_AT, SQL_FOLDED_AT, &st, d))) break;
        sqlite3_bind_int64(st, 1, grp);
        sqlite3_bind_int64(st, 2, first);
        int rc = sqlite3_step(st);
        cw__store_stmt_done(st);
        if (rc == SQLITE_ROW) {
            /* Move what is left to the front, then take the run in. */
            memmove(w->p, w->p + i, (w->np - i) * sizeof *w->p);
            w->np -= i;
            i = 0;
            if ((err = take_run(s, w, grp, &first, false, d))) break;
            sort_unique(w->p, &w->np);
            taken = true;
        } else if (rc != SQLITE_DONE) {
            err = cw__store_dberr(s, "reading a run of folded instances", d);
            break;
        }
        if (taken) continue;
        if (CW_RESERVE(w->enc, w->enccap, k)) {
            err = cw_diag_set(d, CW_ENOMEM, "storing folded instances: out of memory");
            break;
        }
        for (size_t j = 0; j < k; j++)
            w->enc[j] = w->p[i + j].f;
        err = put_run(s, w, grp, w->enc, k, d);
        i += k;
    }
    return err;
}

static int cmp_row_group(const void *x, const void *y)
{
    const cw_row_folded_t *a = *(const cw_row_folded_t *const *)x;
    const cw_row_folded_t *b = *(const cw_row_folded_t *const *)y;
    if (a->group != b->group) return a->group < b->group ? -1 : 1;
    return a < b ? -1 : a > b; /* the batch's order */
}

int cw__store_put_folded(cw_store_t *s, const cw_batch_t *b, cw_diag_t *d)
{
    const cw_row_folded_t **by = NULL;
    fold_work_t w = {0};
    int err = 0;
    if (!b->folded.n) return 0;
    if (!(by = malloc(b->folded.n * sizeof *by)))
        return cw_diag_set(d, CW_ENOMEM, "storing folded instances: out of memory");
    for (uint32_t i = 0; i < b->folded.n; i++)
        by[i] = &b->folded.v[i];
    qsort(by, b->folded.n, sizeof *by, cmp_row_group);
    for (uint32_t i = 0, j; i < b->folded.n && !err; i = j) {
        uint32_t grp = by[i]->group;
        w.np = 0;
        for (j = i; j < b->folded.n && by[j]->group == grp; j++) {
            if (CW_RESERVE(w.p, w.pcap, w.np + 1)) {
                err = cw_diag_set(d, CW_ENOMEM, "storing folded instances: out of memory");
                break;
            }
            const cw_row_folded_t *r = by[j];
            w.p[w.np] = (pending_t){{r->pid, r->start_ns, r->exit_ns, r->bytes}, w.np};
            w.np++;
        }
        if (!err) err = put_group(s, &w, grp, d);
        if (!err) {
            const int64_t v[] = {grp, (int64_t)(j - i)};
            err = cw__store_put_ints(s, CW__ST_FOLDED_COUNT, SQL_FOLDED_COUNT, v, 2,
                                     "counting folded instances", d);
        }
    }
    free(by);
    free(w.p);
    free(w.dec);
    free(w.enc);
    free(w.buf.p);
    return err;
}

/* ---- reading -------------------------------------------------------------- */

static int cmp_folded(const void *x, const void *y)
{
    const cw_folded_inst_t *a = x, *b = y;
    int c = cmp_inst(a, b);
    return c ? c : a->exit_ns < b->exit_ns ? -1 : a->exit_ns > b->exit_ns;
}

int cw_store_folded_list(cw_store_t *s, uint32_t group, int64_t from_ns, int64_t to_ns,
                         size_t limit, cw_folded_list_t *out, cw_diag_t *d)
{
    sqlite3_stmt *st = NULL;
    cw_folded_inst_t *v = NULL;
    size_t n = 0, cap = 0;
    bool sorted = true; /* runs come by first start, and seldom overlap */
    int rc, err = cw__store_stmt(s, CW__ST_FOLDED_LIST, SQL_FOLDED_LIST, &st, d);
    memset(out, 0, sizeof *out);
    if (err) return err;
    sqlite3_bind_int64(st, 1, group);
    sqlite3_bind_int64(st, 2, from_ns);
    sqlite3_bind_int64(st, 3, to_ns);
    while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
        size_t before = n;
        int64_t first = sqlite3_column_int64(st, 0);
        err = cw__fold_decode(sqlite3_column_blob(st, 2), (size_t)sqlite3_column_bytes(st, 2),
                              first, (uint64_t)sqlite3_column_int64(st, 1), &v, &n, &cap);
        if (err == CW_ENOMEM) {
            err = cw_diag_set(d, err, "listing folded instances: out of memory");
            break;
        }
        if (err) {
            err = cw_diag_set(d, CW_EDB,
                              "%s: the run of folded instances of process %u from %lld ns is "
                              "damaged; the database needs repair",
                              s->path, group, (long long)first);
            break;
        }
        /* Alive in [from, to): started before the end, exited at or after the start. */
        size_t k = before;
        for (size_t i = before; i < n; i++)
            if (v[i].start_ns < to_ns && v[i].exit_ns >= from_ns) v[k++] = v[i];
        if (before && k > before && cmp_inst(&v[before - 1], &v[before]) >= 0) sorted = false;
        n = k;
    }
    if (!err && rc != SQLITE_DONE) err = cw__store_dberr(s, "listing folded instances", d);
    cw__store_stmt_done(st);
    if (err) {
        free(v);
        return err;
    }
    /* By (start, pid); an instance in two runs once, with its later exit. */
    if (!sorted) qsort(v, n, sizeof *v, cmp_folded);
    size_t k = 0;
    for (size_t i = 0; i < n; i++) {
        if (k && cmp_inst(&v[k - 1], &v[i]) == 0)
            v[k - 1] = v[i];
        else
            v[k++] = v[i];
    }
    out->total = k;
    if (limit && k > limit) k = limit;
    CW_RESERVE_FIT(v, cap, k, 0);
    out->v = v; /* NULL when k is 0 */
    out->n = k;
    return 0;
}

void cw_folded_list_clear(cw_folded_list_t *l)
{
    free(l->v);
    memset(l, 0, sizeof *l);
}
