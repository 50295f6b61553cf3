/* test_journal.c - the pending-batch journal (service/store/journal.c) and
 * the batch's bytes it writes (cw_batch_encode / cw_batch_decode):
 *   - a batch with every kind of row comes back equal, and any cut or
 *     extended encoding is refused (CW_EPARSE), never read past;
 *   - a writer held back by another connection's write lock, "killed"
 *     (the database and the journal copied as they are then): the copy's
 *     recovery stores every queued batch and the figures are those of an
 *     uninterrupted run; a second recovery stores nothing;
 *   - a record cut by the kill is ignored, the ones before it stored; a
 *     record past a missing one is not stored; batches the database holds
 *     already are skipped; a whole record that is not a batch is refused
 *     with the file named, nothing stored and the files kept;
 *   - while the writer keeps up the files stay small (two files, the one
 *     stored emptied), and a clean stop removes them;
 *   - a full disk's batches, abandoned at stop, stay in the journal and a
 *     later recovery, with room, stores them. */
#include <sqlite3.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdint.h>

#include "commitwatch/batch.h"
#include "commitwatch/event.h"
#include "commitwatch/hash.h"
#include "commitwatch/platform.h"
#include "commitwatch/store.h"
#include "store/store_internal.h"
#include "test.h"

#include <zlib.h>
#include "test_port.h"

#define S INT64_C(1000000000)

static char dir[256];

/* ---- the batch's bytes ------------------------------------------------------ */

static cw_batch_t *full_batch(void)
{
    cw_batch_t *b;
    uint32_t frames[3] = {1, 2, 3};
    ASSERT_OK(cw_batch_create(7 * S, S, &b));
    b->events_total = 123456789012ULL;
    b->events_lost = 17;
    b->drift_bytes = -4096;
    ASSERT_OK(cw_batch_add_frame(b, 1, "app.exe!main"));
    ASSERT_OK(cw_batch_add_frame(b, 2, "ntdll.dll!RtlpAllocateHeapInternal \xc3\xa9"));
    ASSERT_OK(cw_batch_add_frame(b, 3, ""));
    ASSERT_OK(cw_batch_add_stack(b, 0, NULL, 0, "Other"));
    ASSERT_OK(cw_batch_add_stack(b, 5, frames, 3, "Windows Heap"));
    ASSERT_OK(cw_batch_add_proc(b, 1, 42, 3 * S, CW_TS_NEVER, "a.exe", NULL));
    ASSERT_OK(cw_batch_add_proc(b, 2, 43, 4 * S, 7 * S + 5, "b.exe", "b.exe --x"));
    b->procs.v[1].tracking_ended = true;
    ASSERT_OK(cw_batch_add_proc(b, 3, 0, 5 * S, CW_TS_NEVER, NULL, NULL));
    ASSERT_OK(cw_batch_add_commit(b, &(cw_row_commit_t){1, 5, 7 * S, 8192, 2}));
    ASSERT_OK(cw_batch_add_commit(b, &(cw_row_commit_t){1, 0, CW_TS_BEFORE, UINT64_MAX, 1}));
    ASSERT_OK(cw_batch_add_release(b, &(cw_row_release_t){2, 5, 6 * S, 4096, 3, 1}));
    ASSERT_OK(cw_batch_add_activity(b, &(cw_row_activity_t){1, 3, -4096, 8192, 7 * S + 9}));
    ASSERT_OK(cw_batch_add_folded(b, &(cw_row_folded_t){3, 77, 5 * S, 6 * S, 65536}));
    unsigned char *blob = malloc(5);
    ASSERT_TRUE(blob != NULL);
    memcpy(blob, "\x01\x00\xff\x10\x20", 5);
    ASSERT_OK(cw_batch_add_map(b, &(cw_row_map_t){1, 2, 8 * S, 12288, blob, 5}));
    ASSERT_OK(cw_batch_add_map(b, &(cw_row_map_t){2, 0, 8 * S, 0, malloc(1), 0}));
    ASSERT_OK(cw_batch_add_correction(b, &(cw_row_correction_t){1, 7 * S + 3, 1 << 20, 4096}));
    ASSERT_OK(cw_batch_add_correction(b, &(cw_row_correction_t){2, 7 * S + 4, 0, UINT64_MAX}));
    return b;
}

static void same_str(const char *a, const char *b)
{
    ASSERT_TRUE((a == NULL) == (b == NULL));
    if (a) ASSERT_STR_EQ(a, b);
}

static void same_batch(const cw_batch_t *a, const cw_batch_t *b)
{
    ASSERT_EQ(a->bucket_ns, b->bucket_ns);
    ASSERT_EQ(a->width_ns, b->width_ns);
    ASSERT_U64_EQ(a->events_total, b->events_total);
    ASSERT_U64_EQ(a->events_lost, b->events_lost);
    ASSERT_EQ(a->drift_bytes, b->drift_bytes);
    ASSERT_EQ(a->commits.n, b->commits.n);
    ASSERT_TRUE(!a->commits.n ||
                memcmp(a->commits.v, b->commits.v, a->commits.n * sizeof *a->commits.v) == 0);
    ASSERT_EQ(a->releases.n, b->releases.n);
    ASSERT_TRUE(!a->releases.n ||
                memcmp(a->releases.v, b->releases.v, a->releases.n * sizeof *a->releases.v) == 0);
    ASSERT_EQ(a->activity.n, b->activity.n);
    for (uint32_t i = 0; i < a->activity.n; i++) {
        const cw_row_activity_t *x = &a->activity.v[i], *y = &b->activity.v[i];
        ASSERT_TRUE(x->proc == y->proc && x->events == y->events && x->delta == y->delta &&
                    x->relpeak == y->relpeak && x->relpeak_ns == y->relpeak_ns);
    }
    ASSERT_EQ(a->procs.n, b->procs.n);
    for (uint32_t i = 0; i < a->procs.n; i++) {
        const cw_row_proc_t *x = &a->procs.v[i], *y = &b->procs.v[i];
        ASSERT_TRUE(x->id == y->id && x->pid == y->pid && x->start_ns == y->start_ns &&
                    x->exit_ns == y->exit_ns && x->tracking_ended == y->tracking_ended);
        same_str(x->name, y->name);
        same_str(x->cmdline, y->cmdline);
    }
    ASSERT_EQ(a->frames.n, b->frames.n);
    for (uint32_t i = 0; i < a->frames.n; i++) {
        ASSERT_EQ(a->frames.v[i].id, b->frames.v[i].id);
        ASSERT_STR_EQ(a->frames.v[i].text, b->frames.v[i].text);
    }
    ASSERT_EQ(a->stacks.n, b->stacks.n);
    for (uint32_t i = 0; i < a->stacks.n; i++) {
        const cw_row_stack_t *x = &a->stacks.v[i], *y = &b->stacks.v[i];
        ASSERT_TRUE(x->id == y->id && x->nframes == y->nframes);
        ASSERT_TRUE(!x->nframes || memcmp(x->frames, y->frames, x->nframes * 4) == 0);
        ASSERT_STR_EQ(x->tag, y->tag);
    }
    ASSERT_EQ(a->folded.n, b->folded.n);
    ASSERT_TRUE(!a->folded.n ||
                memcmp(a->folded.v, b->folded.v, a->folded.n * sizeof *a->folded.v) == 0);
    ASSERT_EQ(a->maps.n, b->maps.n);
    for (uint32_t i = 0; i < a->maps.n; i++) {
        const cw_row_map_t *x = &a->maps.v[i], *y = &b->maps.v[i];
        ASSERT_TRUE(x->proc == y->proc && x->nranges == y->nranges && x->ts_ns == y->ts_ns &&
                    x->bytes == y->bytes && x->len == y->len);
        ASSERT_TRUE(!x->len || memcmp(x->blob, y->blob, x->len) == 0);
    }
    ASSERT_EQ(a->corrections.n, b->corrections.n);
    for (uint32_t i = 0; i < a->corrections.n; i++) {
        const cw_row_correction_t *x = &a->corrections.v[i], *y = &b->corrections.v[i];
        ASSERT_TRUE(x->proc == y->proc && x->ts_ns == y->ts_ns && x->committed == y->committed &&
                    x->decommitted == y->decommitted);
    }
}

static void test_codec(void)
{
    cw_batch_t *b = full_batch(), *c;
    cw_buf_t e = {0}, e2 = {0};
    ASSERT_OK(cw_batch_encode(b, &e));
    ASSERT_OK(cw_batch_decode(e.p, e.n, &c));
    same_batch(b, c);
    ASSERT_OK(cw_batch_encode(c, &e2)); /* and byte for byte */
    ASSERT_EQ(e2.n, e.n);
    ASSERT_TRUE(memcmp(e.p, e2.p, e.n) == 0);
    cw_batch_free(c);

    /* Every cut is refused; so is a byte too many. But one: the batch
     * without its corrections, which come last and only when there are
     * some (4 + 28 bytes each), is what a journal written before them
     * holds: it decodes, with no corrections. */
    size_t old_end = e.n - 4 - 28 * b->corrections.n;
    for (size_t n = 0; n < e.n; n++) {
        cw_batch_t *x = (cw_batch_t *)1;
        if (n == old_end) {
            ASSERT_OK(cw_batch_decode(e.p, n, &x));
            ASSERT_EQ(x->corrections.n, 0);
            ASSERT_EQ(x->maps.n, b->maps.n);
            cw_batch_free(x);
            continue;
        }
        ASSERT_EQ(cw_batch_decode(e.p, n, &x), CW_EPARSE);
        ASSERT_TRUE(x == NULL);
    }
    cw_buf_put(&e, "", 1);
    ASSERT_EQ(cw_batch_decode(e.p, e.n, &c), CW_EPARSE);
    e.n--;
    /* A row count past the data fails before allocating for it. */
    e.p[40] = (char)0xff, e.p[41] = (char)0xff, e.p[42] = (char)0xff, e.p[43] = 0x7f;
    ASSERT_EQ(cw_batch_decode(e.p, e.n, &c), CW_EPARSE);
    /* A NUL inside a frame's text is not text. */
    cw_batch_t *z;
    ASSERT_OK(cw_batch_create(0, S, &z));
    ASSERT_OK(cw_batch_add_frame(z, 1, "ab"));
    e.n = 0;
    ASSERT_OK(cw_batch_encode(z, &e));
    e.p[e.n - 1] = '\0';
    ASSERT_EQ(cw_batch_decode(e.p, e.n, &c), CW_EPARSE);
    cw_batch_free(z);
    free(e.p);
    free(e2.p);
    cw_batch_free(b);
}

/* ---- the journal --------------------------------------------------------- */

/* Second `sec`'s batch of instance 1 (stack 0, made in second 0). */
static cw_batch_t *batch_at(int64_t sec)
{
    cw_batch_t *b;
    ASSERT_OK(cw_batch_create(sec * S, S, &b));
    if (sec == 0) {
        ASSERT_OK(cw_batch_add_stack(b, 0, NULL, 0, "Other"));
        ASSERT_OK(cw_batch_add_proc(b, 1, 42, 0, CW_TS_NEVER, "j.exe", NULL));
    }
    ASSERT_OK(cw_batch_add_commit(b, &(cw_row_commit_t){1, 0, sec * S, 4096, 1}));
    ASSERT_OK(cw_batch_add_activity(b, &(cw_row_activity_t){1, 1, 4096, 4096, sec * S}));
    return b;
}

/* Stores second sec's batch directly (cw_store_write borrows it). */
static void store_at(cw_store_t *s, int64_t sec)
{
    cw_batch_t *b = batch_at(sec);
    cw_diag_t d;
    ASSERT_OK(cw_store_write(s, b, &d));
    cw_batch_free(b);
}

/* dir/name, in one of 4 buffers used in turn: for a call's arguments. */
static char *path_in(const char *name)
{
    static char p[4][320];
    static int k;
    k = (k + 1) % 4;
    snprintf(p[k], sizeof p[k], "%s/%s", dir, name);
    return p[k];
}

static long file_size(const char *path)
{
    FILE *f = fopen(path, "rb");
    if (!f) return -1;
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fclose(f);
    return n;
}

static void copy_file(const char *from, const char *to)
{
    FILE *a = fopen(from, "rb"), *b = fopen(to, "wb");
    char buf[65536];
    size_t n;
    ASSERT_TRUE(b != NULL);
    if (a) {
        while ((n = fread(buf, 1, sizeof buf, a)) > 0) ASSERT_EQ(fwrite(buf, 1, n, b), n);
        fclose(a);
    }
    fclose(b);
}

/* The database, its WAL and the journal as a kill would leave them. */
static void copy_as_killed(const char *db, const char *to)
{
    const char *sfx[] = {"", "-wal", "-pending.0", "-pending.1"};
    char a[400], b[400];
    for (int i = 0; i < 4; i++) {
        snprintf(a, sizeof a, "%s%s", db, sfx[i]);
        snprintf(b, sizeof b, "%s%s", to, sfx[i]);
        if (file_size(a) >= 0) copy_file(a, b);
    }
}

/* [from, to) and the bytes committed in it, as stored. */
static void stored(cw_store_t *s, int64_t *to, uint64_t *bytes)
{
    cw_report_t *r;
    cw_diag_t d;
    ASSERT_OK(cw_store_report(s, INT64_MIN, INT64_MAX, false, &r, &d));
    *to = r->to_ns;
    *bytes = r->nprocs ? r->procs[0].figs.size_bytes : 0;
    cw_report_free(r);
}

static cw_store_t *open_at(const char *p)
{
    cw_store_t *s;
    cw_diag_t d;
    ASSERT_OK(cw_store_open(p, NULL, &s, &d));
    return s;
}

/* Reads a journal file whole (len in *n). */
static unsigned char *slurp(const char *p, size_t *n)
{
    long len = file_size(p);
    ASSERT_TRUE(len >= 0);
    unsigned char *v = malloc((size_t)len + 1);
    FILE *f = fopen(p, "rb");
    ASSERT_TRUE(v && f);
    ASSERT_EQ(fread(v, 1, (size_t)len, f), (size_t)len);
    fclose(f);
    *n = (size_t)len;
    return v;
}

static void spit(const char *p, const unsigned char *v, size_t n)
{
    FILE *f = fopen(p, "wb");
    ASSERT_TRUE(f != NULL);
    ASSERT_EQ(fwrite(v, 1, n, f), n);
    fclose(f);
}

/* Offsets of the records of a journal file (at most 64). */
static int records(const unsigned char *v, size_t n, size_t *off)
{
    int k = 0;
    for (size_t o = 0; o + 40 <= n && k < 64;) {
        uint32_t len = (uint32_t)v[o + 4] | (uint32_t)v[o + 5] << 8 | (uint32_t)v[o + 6] << 16 |
                       (uint32_t)v[o + 7] << 24;
        off[k++] = o;
        o += 40 + len;
    }
    return k;
}

/* A writer stalled by a write lock; n batches from second `first` queued
 * (capacity 64), then the files copied to `to` as a kill leaves them. */
static void killed_while_stalled(const char *db, const char *to, int64_t first, int n)
{
    cw_store_t *s = open_at(db);
    cw_writer_t *w;
    cw_journal_t *j;
    cw_diag_t d;
    sqlite3 *blocker;
    ASSERT_OK(cw_writer_start(s, 64, &w));
    ASSERT_OK(cw_journal_open(s, &j, &d));
    cw_writer_set_journal(w, j);
    ASSERT_EQ(sqlite3_open(db, &blocker), SQLITE_OK);
    ASSERT_EQ(sqlite3_exec(blocker, "BEGIN IMMEDIATE", NULL, NULL, NULL), SQLITE_OK);
    for (int64_t i = first; i < first + n; i++) ASSERT_OK(cw_writer_submit(w, batch_at(i)));
    cw_plat_sleep_ns(20000000);
    copy_as_killed(db, to);
    ASSERT_EQ(sqlite3_exec(blocker, "ROLLBACK", NULL, NULL, NULL), SQLITE_OK);
    sqlite3_close(blocker);
    ASSERT_OK(cw_writer_stop(w, &d));
    /* A clean stop stored everything and removed the files. */
    char p[400];
    snprintf(p, sizeof p, "%s-pending.0", db);
    ASSERT_EQ(file_size(p), -1);
    snprintf(p, sizeof p, "%s-pending.1", db);
    ASSERT_EQ(file_size(p), -1);
    cw_store_close(s);
}

static void test_kill_stalled(void)
{
    char db[320], cut[320];
    snprintf(db, sizeof db, "%s", path_in("k.db"));
    snprintf(cut, sizeof cut, "%s", path_in("k-cut.db"));
    cw_store_t *s = open_at(db);
    cw_diag_t d;
    store_at(s, 0); /* stored before the stall */
    cw_store_close(s);
    killed_while_stalled(db, cut, 1, 20);

    /* The copy: only bucket 0 committed; the journal holds 1..20. */
    cw_store_t *c = open_at(cut);
    int64_t to;
    uint64_t bytes;
    stored(c, &to, &bytes);
    ASSERT_EQ(to, 1 * S);
    cw_journal_recovered_t r;
    ASSERT_OK(cw_journal_recover(c, &r, &d));
    ASSERT_EQ(r.batches, 20);
    ASSERT_EQ(r.stored_before, 0);
    ASSERT_EQ(r.torn_bytes, 0);
    ASSERT_EQ(r.from_ns, 1 * S);
    ASSERT_EQ(r.end_ns, 21 * S);
    stored(c, &to, &bytes);
    ASSERT_EQ(to, 21 * S);
    ASSERT_U64_EQ(bytes, 21 * 4096); /* as the run that was not killed */
    ASSERT_EQ(file_size(path_in("k-cut.db-pending.0")), -1);
    ASSERT_OK(cw_journal_recover(c, &r, &d)); /* nothing left */
    ASSERT_EQ(r.batches, 0);
    cw_store_close(c);
}

static void test_damage(void)
{
    char db[320], cut[320], j0[320], wal[320];
    snprintf(db, sizeof db, "%s", path_in("g.db"));
    snprintf(cut, sizeof cut, "%s", path_in("g-cut.db"));
    snprintf(j0, sizeof j0, "%s", path_in("g-cut.db-pending.0"));
    snprintf(wal, sizeof wal, "%s", path_in("g-cut.db-wal"));
    cw_diag_t d;
    cw_journal_recovered_t r;
    int64_t to;
    uint64_t bytes;
    killed_while_stalled(db, cut, 0, 10);
    /* The records are in one file or split over the two (the writer took
     * some before the lock stopped it, which sealed the first file: how
     * many depends on the threads' timing). One file holding them all in
     * sequence is a journal as good: the cases below cut that one. */
    char j1[320];
    snprintf(j1, sizeof j1, "%s", path_in("g-cut.db-pending.1"));
    size_t n, n1 = 0, off[64];
    unsigned char *v = slurp(j0, &n);
    if (file_size(j1) >= 0) {
        unsigned char *v1 = slurp(j1, &n1);
        v = realloc(v, n + n1 + 1);
        ASSERT_TRUE(v != NULL);
        if (n1) memcpy(v + n, v1, n1);
        n += n1;
        free(v1);
        remove(j1);
        spit(j0, v, n);
    }
    int k = records(v, n, off);
    ASSERT_EQ(k, 10);

    /* Cut in the middle of the last record (the kill during its write):
     * that one is ignored, the nine before it stored. */
    spit(j0, v, off[9] + 50);
    cw_store_t *c = open_at(cut);
    ASSERT_OK(cw_journal_recover(c, &r, &d));
    ASSERT_EQ(r.batches, 9);
    ASSERT_EQ(r.torn_bytes, 50);
    stored(c, &to, &bytes);
    ASSERT_EQ(to, 9 * S);
    cw_store_close(c);

    /* Records 0-3 stored already; the journal still holds 0-9 (a kill
     * after the commit, before the files went): 4-9 are stored. */
    remove(cut);
    remove(wal);
    c = open_at(cut);
    for (int64_t i = 0; i < 4; i++) store_at(c, i);
    spit(j0, v, n);
    ASSERT_OK(cw_journal_recover(c, &r, &d));
    ASSERT_EQ(r.stored_before, 4);
    ASSERT_EQ(r.batches, 6);
    stored(c, &to, &bytes);
    ASSERT_EQ(to, 10 * S);
    ASSERT_U64_EQ(bytes, 10 * 4096);
    cw_store_close(c);

    /* Record 5 missing: 0-4 stored, 6-9 not (past the gap). */
    remove(cut);
    remove(wal);
    c = open_at(cut);
    unsigned char *gap = malloc(n);
    memcpy(gap, v, off[5]);
    memcpy(gap + off[5], v + off[6], n - off[6]);
    spit(j0, gap, off[5] + n - off[6]);
    ASSERT_OK(cw_journal_recover(c, &r, &d));
    ASSERT_EQ(r.batches, 5);
    ASSERT_EQ(r.after_gap, 4);
    stored(c, &to, &bytes);
    ASSERT_EQ(to, 5 * S);
    cw_store_close(c);
    free(gap);

    /* A whole record (its sum right) that is not a batch: refused, the
     * file named, nothing stored, the file kept. */
    remove(cut);
    remove(wal);
    c = open_at(cut);
    unsigned char *bad = malloc(n);
    memcpy(bad, v, n);
    size_t p = off[2] + 40 + 3; /* inside record 2's payload */
    bad[p] ^= 0x5a;
    uint64_t h = crc32(crc32(0L, bad + off[2], 32), bad + off[2] + 40,
                       (uInt)(off[3] - off[2] - 40));
    for (int i = 0; i < 8; i++) bad[off[2] + 32 + i] = (unsigned char)(h >> (8 * i));
    spit(j0, bad, n);
    int rc = cw_journal_recover(c, &r, &d);
    ASSERT_EQ(rc, CW_EPARSE);
    ASSERT_TRUE(strstr(d.msg, "g-cut.db-pending.0") != NULL);
    ASSERT_TRUE(strstr(d.msg, "move") != NULL);
    stored(c, &to, &bytes);
    ASSERT_U64_EQ(bytes, 0);
    ASSERT_EQ(file_size(j0), (long)n);
    /* A checksum that does not match is the end of the file, as a cut. */
    bad[off[2] + 32] ^= 1;
    spit(j0, bad, n);
    ASSERT_OK(cw_journal_recover(c, &r, &d));
    ASSERT_EQ(r.batches, 2);
    ASSERT_U64_EQ(r.torn_bytes, n - off[2]);
    cw_store_close(c);

    /* An older build's records ("CWJ1", FNV-1a sums) are read as well. */
    remove(cut);
    remove(wal);
    c = open_at(cut);
    memcpy(bad, v, n);
    for (int q = 0; q < k; q++) {
        unsigned char *rec = bad + off[q];
        size_t len = (q + 1 < k ? off[q + 1] : n) - off[q] - 40;
        memcpy(rec, "CWJ1", 4);
        uint64_t f = cw_hash_bytes_more(cw_hash_bytes(rec, 32), rec + 40, len);
        for (int i = 0; i < 8; i++) rec[32 + i] = (unsigned char)(f >> (8 * i));
    }
    spit(j0, bad, n);
    ASSERT_OK(cw_journal_recover(c, &r, &d));
    ASSERT_EQ(r.batches, (uint64_t)k);
    cw_store_close(c);
    free(bad);
    free(v);
}

/* While the writer keeps up, the journal holds little: the file whose
 * batches are stored is emptied. */
static void test_bounded(void)
{
    const char *db = path_in("b.db");
    cw_store_t *s = open_at(db);
    cw_writer_t *w;
    cw_journal_t *j;
    cw_diag_t d;
    ASSERT_OK(cw_writer_start(s, 8, &w));
    ASSERT_OK(cw_journal_open(s, &j, &d));
    cw_writer_set_journal(w, j);
    long most = 0;
    for (int64_t i = 0; i < 400; i++) {
        ASSERT_OK(cw_writer_submit(w, batch_at(i)));
        long n = file_size(path_in("b.db-pending.0")) + file_size(path_in("b.db-pending.1"));
        if (n > most) most = n;
    }
    ASSERT_TRUE(!cw_journal_broken(j));
    /* A record is about 100 bytes here: at most what is alive (8) and what
     * was queued since the last take (8) in the two files, not 400. */
    cw_buf_t e = {0};
    cw_batch_t *b = batch_at(5);
    ASSERT_OK(cw_batch_encode(b, &e));
    cw_batch_free(b);
    ASSERT_TRUE(most > 0);
    ASSERT_TRUE(most <= (long)(3 * 8 * (e.n + 40)));
    free(e.p);
    ASSERT_OK(cw_writer_stop(w, &d));
    ASSERT_EQ(file_size(path_in("b.db-pending.0")), -1);
    ASSERT_EQ(file_size(path_in("b.db-pending.1")), -1);
    int64_t to;
    uint64_t bytes;
    stored(s, &to, &bytes);
    ASSERT_EQ(to, 400 * S);
    cw_store_close(s);
}

/* Stopped while the disk is full: the batches the disk refused stay in
 * the journal, and a later recovery (room again) stores them. */
static void on_full(void *ctx, int err, const char *msg)
{
    (void)msg;
    if (err) cw_writer_abandon(ctx);
}

static void test_full_kept(void)
{
    const char *db = path_in("f.db");
    cw_store_t *s = open_at(db);
    cw_writer_t *w;
    cw_journal_t *j;
    cw_diag_t d;
    char sql[64];
    int64_t pages, i = 0;
    store_at(s, i++);
    ASSERT_OK(cw__store_query_int(s, "PRAGMA page_count", &pages, &d));
    snprintf(sql, sizeof sql, "PRAGMA max_page_count = %lld", (long long)pages);
    ASSERT_EQ(sqlite3_exec(s->db, sql, NULL, NULL, NULL), SQLITE_OK);
    ASSERT_OK(cw_writer_start(s, 4, &w));
    ASSERT_OK(cw_journal_open(s, &j, &d));
    cw_writer_set_journal(w, j);
    cw_writer_on_state(w, on_full, w, 20000000);
    while (i < 100000 && cw_writer_submit(w, batch_at(i)) == 0) i++;
    ASSERT_EQ(cw_writer_stop(w, &d), CW_ENOSPC);
    ASSERT_TRUE(file_size(path_in("f.db-pending.0")) > 0 ||
                file_size(path_in("f.db-pending.1")) > 0);
    int64_t to;
    uint64_t bytes;
    stored(s, &to, &bytes);
    ASSERT_TRUE(to < i * S);
    ASSERT_EQ(sqlite3_exec(s->db, "PRAGMA max_page_count = 1073741823", NULL, NULL, NULL),
              SQLITE_OK);
    cw_journal_recovered_t r;
    ASSERT_OK(cw_journal_recover(s, &r, &d));
    ASSERT_TRUE(r.batches > 0);
    stored(s, &to, &bytes);
    ASSERT_EQ(to, i * S); /* every batch submitted, none lost */
    ASSERT_U64_EQ(bytes, (uint64_t)i * 4096);
    cw_store_close(s);
}

int main(void)
{
    snprintf(dir, sizeof dir, "%s/cw_test_journal_XXXXXX", cw_test_tmpdir());
    ASSERT_TRUE(cw_test_mkdtemp(dir) != NULL);
    test_codec();
    test_kill_stalled();
    test_damage();
    test_bounded();
    test_full_kept();
    ASSERT_OK(cw_test_rmtree(dir));
    TEST_DONE();
}
