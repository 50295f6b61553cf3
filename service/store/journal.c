/* journal.c - the pending-batch journal (cw_journal; docs/RELIABILITY.md,
 * "Loss per kill", and docs/DESIGN.md "A run that did not stop").
 *
 * Only committed transactions survive a SIGKILL. While the writer thread
 * keeps up, a kill loses the open bucket; when it falls behind (a stalled
 * disk, a lock held on the database, a starved machine) the closed
 * buckets queued for it (up to the writer's capacity) went too. So every
 * batch is appended to a file beside the database as it is queued: a
 * write(), which the kernel keeps when the process dies (not a power cut:
 * nothing is synced, as SQLite's WAL under synchronous = NORMAL is not
 * for the last transactions). The next run stores what the files hold
 * beyond the database's end before anything else (cw_journal_recover),
 * and a kill then loses only the open bucket, whatever the writer's
 * speed.
 *
 * Two files, DB-pending.0 and DB-pending.1, so that neither grows while
 * the writer is behind: batches are appended to the active one; when the
 * writer takes batches and the other file is empty, the active one is
 * sealed and the other becomes active; once every batch of the sealed
 * file is stored it is emptied. A file thus holds what was queued between
 * two takes (at most the writer's capacity, 64 batches). A clean stop,
 * everything stored, removes both.
 *
 * A record: a 40-byte header (magic "CWJ2", payload length, sequence
 * number, the batch's bucket and width, the CRC-32 of the rest of the
 * header and the payload; "CWJ1" records, an older build's, carry FNV-1a
 * instead and are read too) and the batch as cw_batch_encode writes it. Recovery
 * reads both files up to their first record that is not whole (a kill in
 * the middle of an append), takes the records in sequence order up to the
 * first gap, and stores, in one transaction, those whose bucket is at or
 * after the end of the stored data (the others were stored: buckets are
 * stored in time order, each once, store.c check_batch).
 *
 * Threads: the writer (writer.c) owns a cw_journal; every call below but
 * recover is made under the writer's lock (append from the core thread,
 * taken and stored from the writer thread). Nothing here is thread-safe
 * by itself. */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "commitwatch/batch.h"
#include "commitwatch/common.h"
#include "commitwatch/hash.h"
#include "commitwatch/log.h"
#include "store/store_internal.h"

#include <zlib.h>

#define HDR 40
#define MAGIC 0x324a5743u  /* "CWJ2", little-endian: CRC-32 sums */
#define MAGIC1 0x314a5743u /* "CWJ1": FNV-1a sums (read, never written) */
/* A record longer than this is not one of ours (a batch of a second of
 * a whole machine is a few MiB at most). */
#define MAX_RECORD ((uint64_t)1 << 30)

struct cw_journal {
    char *path[2];
    FILE *f[2];
    int active;           /* the file appended to */
    bool sealed;          /* the other file holds batches not all stored */
    uint64_t sealed_upto; /* batches appended before it was sealed */
    uint64_t appended;    /* batches given to append (written or not) */
    bool broken;          /* a write failed: nothing more is written */
    cw_buf_t buf;
};

static char *pending_path(const char *db, int k)
{
    size_t n = strlen(db) + sizeof "-pending.0";
    char *p = malloc(n);
    if (p) snprintf(p, n, "%s-pending.%d", db, k);
    return p;
}

/* The sum of the header's first 32 bytes and the payload: zlib's CRC-32
 * ("CWJ2"; a tenth of FNV-1a's byte loop, which took 13 % of the core
 * thread's instructions under a full-speed replay), or FNV-1a for the
 * records of a journal an older build left ("CWJ1"). */
static uint64_t record_sum(uint32_t magic, const unsigned char *hdr, const void *payload,
                           size_t n)
{
    if (magic == MAGIC1) return cw_hash_bytes_more(cw_hash_bytes(hdr, 32), payload, n);
    return crc32(crc32(0L, hdr, 32), payload, (uInt)n);
}

/* ---- writing (the writer's) ------------------------------------------------ */

int cw_journal_open(cw_store_t *s, cw_journal_t **out, cw_diag_t *d)
{
    cw_journal_t *j = calloc(1, sizeof *j);
    int err = CW_ENOMEM;
    if (!j) return cw_diag_set(d, CW_ENOMEM, "out of memory");
    for (int k = 0; k < 2; k++) {
        if (!(j->path[k] = pending_path(s->path, k))) goto fail;
        if (!(j->f[k] = fopen(j->path[k], "wb"))) {
            err = cw_diag_set(d, errno == ENOSPC ? CW_ENOSPC : CW_EIO,
                              "cannot create the pending-batch journal %s: %s", j->path[k],
                              strerror(errno));
            goto fail;
        }
    }
    *out = j;
    return 0;
fail:
    if (err == CW_ENOMEM) cw_diag_set(d, CW_ENOMEM, "out of memory");
    cw_journal_close(j, false);
    return err;
}

void cw_journal_close(cw_journal_t *j, bool keep)
{
    if (!j) return;
    for (int k = 0; k < 2; k++) {
        if (j->f[k]) fclose(j->f[k]);
        if (!keep && j->path[k]) remove(j->path[k]);
        free(j->path[k]);
    }
    free(j->buf.p);
    free(j);
}

/* A failure: nothing more is written (a journal with a hole would make
 * the next run store batches whose dictionary rows were lost) until every
 * batch given was stored (resume). What was written stays, a whole
 * prefix. */
static void broke(cw_journal_t *j, const char *what)
{
    j->broken = true;
    j->sealed = false;
    CW_LOGW("the pending-batch journal %s %s (%s): journaling stops, so a kill "
            "while the writer is behind loses the batches it has not stored, until it has stored "
            "them all",
            j->path[j->active], what, errno ? strerror(errno) : "out of memory");
}

void cw_journal_append(cw_journal_t *j, const cw_batch_t *b)
{
    unsigned char hdr[HDR];
    uint64_t seq = ++j->appended;
    if (j->broken) return;
    j->buf.n = 0;
    errno = 0;
    if (cw_batch_encode(b, &j->buf) != 0 || j->buf.n >= MAX_RECORD) {
        broke(j, "could not hold a batch");
        return;
    }
    cw_put_le(hdr, MAGIC, 4);
    cw_put_le(hdr + 4, j->buf.n, 4);
    cw_put_le(hdr + 8, seq, 8);
    cw_put_le(hdr + 16, (uint64_t)b->bucket_ns, 8);
    cw_put_le(hdr + 24, (uint64_t)b->width_ns, 8);
    cw_put_le(hdr + 32, record_sum(MAGIC, hdr, j->buf.p, j->buf.n), 8);
    FILE *f = j->f[j->active];
    /* fflush: the record reaches the kernel now, not when stdio's buffer
     * fills (a kill loses what a process holds). */
    if (fwrite(hdr, 1, HDR, f) != HDR || fwrite(j->buf.p, 1, j->buf.n, f) != j->buf.n ||
        fflush(f) != 0)
        broke(j, "could not be written");
}

void cw_journal_taken(cw_journal_t *j)
{
    if (j->sealed || j->broken) return;
    j->sealed = true;
    j->sealed_upto = j->appended;
    j->active ^= 1;
}

/* After a failure, once every batch given is stored (the disk had room
 * again): both files emptied, journaling starts again. */
static void resume(cw_journal_t *j)
{
    for (int k = 0; k < 2; k++) {
        if (j->f[k]) fclose(j->f[k]);
        if (!(j->f[k] = fopen(j->path[k], "wb"))) return; /* tried again later */
    }
    j->broken = j->sealed = false;
    j->active = 0;
    CW_LOGI("the pending-batch journal %s is written again", j->path[0]);
}

void cw_journal_stored(cw_journal_t *j, uint64_t stored)
{
    if (j->broken && stored == j->appended) resume(j);
    if (!j->sealed || stored < j->sealed_upto || j->broken) return;
    int k = j->active ^ 1;
    /* Emptied by reopening: nothing else holds the file. */
    fclose(j->f[k]);
    errno = 0;
    if (!(j->f[k] = fopen(j->path[k], "wb"))) {
        j->active = k; /* for the message */
        broke(j, "could not be emptied");
        return;
    }
    j->sealed = false;
}

bool cw_journal_broken(const cw_journal_t *j)
{
    return j->broken;
}

/* ---- recovery -------------------------------------------------------------- */

typedef struct rec {
    uint64_t seq;
    int64_t bucket;
    const unsigned char *payload;
    size_t len;
    int file;
    uint64_t off;
} rec_t;

/* Reads path whole into *data (NULL and 0 when it does not exist). */
static int slurp(const char *path, unsigned char **data, size_t *len, cw_diag_t *d)
{
    *data = NULL;
    *len = 0;
    FILE *f = fopen(path, "rb");
    if (!f) {
        if (errno == ENOENT) return 0;
        return cw_diag_set(d, CW_EIO, "cannot read the pending-batch journal %s: %s", path,
                           strerror(errno));
    }
    size_t cap = 0;
    int err = 0;
    for (;;) {
        if (CW_RESERVE(*data, cap, *len + 65536)) {
            err = cw_diag_set(d, CW_ENOMEM, "out of memory reading %s", path);
            break;
        }
        size_t got = fread(*data + *len, 1, cap - *len, f);
        *len += got;
        if (got == 0) {
            if (ferror(f))
                err = cw_diag_set(d, CW_EIO, "cannot read the pending-batch journal %s", path);
            break;
        }
    }
    fclose(f);
    if (err) {
        free(*data);
        *data = NULL;
        *len = 0;
    }
    return err;
}

/* Appends the whole records of one file to *v; the bytes after the last
 * whole one are counted in *torn. */
static int scan(const unsigned char *p, size_t n, int file, rec_t **v, size_t *nv, size_t *cap,
                uint64_t *torn)
{
    size_t off = 0;
    while (n - off >= HDR) {
        const unsigned char *h = p + off;
        uint64_t len = cw_get_le(h + 4, 4);
        uint32_t magic = (uint32_t)cw_get_le(h, 4);
        if ((magic != MAGIC && magic != MAGIC1) || len > n - off - HDR ||
            cw_get_le(h + 32, 8) != record_sum(magic, h, h + HDR, (size_t)len))
            break;
        if (CW_RESERVE(*v, *cap, *nv + 1)) return CW_ENOMEM;
        (*v)[(*nv)++] = (rec_t){
            cw_get_le(h + 8, 8), (int64_t)cw_get_le(h + 16, 8), h + HDR, (size_t)len, file, off};
        off += HDR + (size_t)len;
    }
    *torn += n - off;
    return 0;
}

static int cmp_seq(const void *x, const void *y)
{
    const rec_t *a = x, *b = y;
    return (a->seq > b->seq) - (a->seq < b->seq);
}

int cw_journal_recover(cw_store_t *s, cw_journal_recovered_t *out, cw_diag_t *d)
{
    char *path[2] = {NULL, NULL};
    unsigned char *data[2] = {NULL, NULL};
    size_t len[2] = {0, 0}, nv = 0, cap = 0, nb = 0;
    rec_t *v = NULL;
    cw_batch_t **b = NULL;
    int err = 0;

    memset(out, 0, sizeof *out);
    out->from_ns = out->end_ns = INT64_MIN;
    if (s->readonly || !s->w)
        return cw_diag_set(d, CW_EINVAL, "%s was opened read-only; cannot store a batch", s->path);
    for (int k = 0; k < 2 && !err; k++) {
        if (!(path[k] = pending_path(s->path, k)))
            err = cw_diag_set(d, CW_ENOMEM, "out of memory");
        else if ((err = slurp(path[k], &data[k], &len[k], d)) == 0 &&
                 scan(data[k], len[k], k, &v, &nv, &cap, &out->torn_bytes) != 0)
            err = cw_diag_set(d, CW_ENOMEM, "out of memory");
    }
    if (err) goto out;
    if (nv > 1) qsort(v, nv, sizeof *v, cmp_seq);
    /* In sequence, up to the first gap: past it a batch may need rows
     * (frames, stacks, instances) of the one missing. */
    size_t whole = nv;
    for (size_t i = 1; i < nv; i++)
        if (v[i].seq != v[i - 1].seq + 1) {
            whole = i;
            break;
        }
    out->after_gap = (uint32_t)(nv - whole);
    if (whole && !(b = calloc(whole, sizeof *b))) {
        err = cw_diag_set(d, CW_ENOMEM, "out of memory");
        goto out;
    }
    for (size_t i = 0; i < whole; i++) {
        if (s->w->tiers[0].end != INT64_MIN && v[i].bucket < s->w->tiers[0].end) {
            out->stored_before++;
            continue;
        }
        int rc = cw_batch_decode(v[i].payload, v[i].len, &b[nb]);
        if (rc == 0 && b[nb]->bucket_ns != v[i].bucket) {
            cw_batch_free(b[nb]);
            rc = CW_EPARSE;
        }
        if (rc != 0) {
            err = cw_diag_set(d, rc == CW_ENOMEM ? CW_ENOMEM : CW_EPARSE,
                              "the pending-batch journal %s holds a batch that cannot be read "
                              "(record %" PRIu64 " at byte %" PRIu64 "): move %s-pending.* away "
                              "to start without the buckets it holds",
                              path[v[i].file], v[i].seq, v[i].off, s->path);
            goto out;
        }
        nb++;
    }
    if (nb) {
        if ((err = cw_store_write_many(s, (const cw_batch_t *const *)b, nb, d)) != 0) {
            if (err != CW_ENOSPC) {
                char why[sizeof d->msg];
                cw_strlcpy(why, d->msg, sizeof why);
                cw_diag_set(d, err,
                            "cannot store the %zu batch(es) the pending-batch journal beside %s "
                            "holds: %s; move %s-pending.* away to start without them",
                            nb, s->path, why, s->path);
            }
            goto out;
        }
        out->batches = (uint32_t)nb;
        out->from_ns = b[0]->bucket_ns;
        out->end_ns = b[nb - 1]->bucket_ns + b[nb - 1]->width_ns;
    }
    /* Stored (or nothing to store): the files are done with. */
    for (int k = 0; k < 2; k++)
        if (data[k]) remove(path[k]);
out:
    for (size_t i = 0; i < nb; i++)
        cw_batch_free(b[i]);
    free(b);
    free(v);
    for (int k = 0; k < 2; k++) {
        free(data[k]);
        free(path[k]);
    }
    return err;
}
