/* file.c - an .etl file as buffers: the trace's header, the scan of every
 * event in file order (pass 1, which indexes the buffers), and the merge
 * of the per-CPU buffer streams in time order (pass 2).
 *
 * The file is a sequence of buffers, each a 0x48-byte WMI_BUFFER_HEADER
 * and its events. Every buffer belongs to one CPU and carries a sequence
 * number; a CPU's buffers sorted by it hold that CPU's events in time
 * order, but the file stores the buffers in the order they were flushed.
 * So the merge keeps one decoded buffer per CPU stream and a tournament
 * (loser) tree of the streams by their next event's time: memory is one buffer per CPU and a
 * small index per buffer, whatever the file's size. A compressed buffer
 * (flag 0x40) holds XPRESS data after its header that decompresses to
 * SavedOffset - 0x48 bytes of events.
 *
 * Positions are fpos_t (fgetpos/fsetpos), so files over 2 GB work where
 * long is 32 bits. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "commitwatch/log.h"
#include "sources/etl/etl_internal.h"

#define BUF_HDR 0x48
/* A stdio buffer of this many bytes for the file, 0 none (the default:
 * see cw_etl_file_open). A build may set one (the fuzz target: 16 KiB:
 * its files have 1 KiB buffers, each read with a read(2) for its header
 * and one for its body, twice per input); the same bytes are read. */
#ifndef CW_ETL__STDIO_BUF
#define CW_ETL__STDIO_BUF 0
#endif

/* Largest buffer accepted (ETW's own limit is 1 MiB on most systems). */
#define MAX_BUF (64u << 20)

#define FLAG_EVENTS_LOST 0x0002
#define FLAG_BUFFER_LOST 0x0004
#define FLAG_COMPRESSED 0x0040

typedef struct bufidx {
    fpos_t pos; /* of the buffer's header */
    uint64_t off, seq;
    uint32_t size, saved, filled, order;
    uint16_t cpu, flags;
    bool corrupt; /* skipped by the merge: it could not be decoded */
} bufidx_t;

typedef struct stream {
    size_t next, end; /* buffers [next, end) of the sorted index still to read */
    uint8_t *buf;
    size_t cap, at, stop; /* events of the loaded buffer: [at, stop) */
    cw_etl_event_t ev;    /* the next event, when has */
    size_t adv;
    bool has;
    uint16_t cpu;
} stream_t;

struct cw_etl_file {
    FILE *f;
    char name[CW_PATH_MAX];
    fpos_t start;
    cw_etl_header_t hdr;
    cw_etl__clock_t clock;
    cw_etl_file_stats_t st;
    bufidx_t *idx;
    size_t nidx, idxcap;
    size_t max_data; /* largest decoded buffer, with its header */
    bool scanned;
    uint8_t *raw, *work; /* as read; decoded (scan) */
    size_t rawcap, workcap;
    bufidx_t *sorted;
    stream_t *streams;
    size_t nstreams;
    /* The loser tree: lt[0] the stream whose event is the earliest,
     * lt[1 .. nstreams) the loser of each match (node n plays the
     * winners below 2n and 2n + 1; stream i is leaf nstreams + i). */
    size_t *lt;
    long popped; /* stream whose event was returned last, to advance first; -1 none */
    uint64_t last_ts; /* newest time merged so far */
    bool merged;
};

static int io_error(cw_etl_file_t *f, uint64_t off, cw_diag_t *d)
{
    return cw_diag_set(d, CW_EIO, "%s: read error at offset %llu", f->name,
                       (unsigned long long)off);
}

/* Reads the buffer header at the current position into x (fields only).
 * 1 read, 0 at the end of the file, -1 short (truncated). */
static int read_header(cw_etl_file_t *f, uint8_t h[BUF_HDR], bufidx_t *x)
{
    size_t n = fread(h, 1, BUF_HDR, f->f);
    if (n == 0) return 0;
    if (n < BUF_HDR) return -1;
    x->size = cw_etl__rd32(h);
    x->saved = cw_etl__rd32(h + 0x04);
    x->seq = cw_etl__rd64(h + 0x18);
    x->cpu = (uint16_t)(h[0x28] | h[0x29] << 8);
    x->filled = cw_etl__rd32(h + 0x30);
    x->flags = (uint16_t)(h[0x34] | h[0x35] << 8);
    /* Older files keep the CPU in one byte with an alignment byte after. */
    if (!(x->flags & 0x0020)) x->cpu = h[0x28];
    return 1;
}

static int grow(uint8_t **p, size_t *cap, size_t need)
{
    if (need <= *cap) return 0;
    uint8_t *q = realloc(*p, need);
    if (!q) return CW_ENOMEM;
    *p = q;
    *cap = need;
    return 0;
}

/* Reads n bytes into *p at offset at, growing the buffer as they come:
 * from 64 KiB, at most doubling what was read, so a header that claims
 * more than the file holds (up to MAX_BUF) allocates no more than about
 * twice what is there. 0, 1 when the file ends first, CW_EIO, CW_ENOMEM. */
static int read_grow(cw_etl_file_t *f, uint8_t **p, size_t *cap, size_t at, size_t n)
{
    size_t end = at + n;
    while (at < end) {
        size_t room = 2 * at > (64u << 10) ? 2 * at : (64u << 10);
        size_t to = end < room ? end : room;
        if (to < *cap) to = end < *cap ? end : *cap;
        if (grow(p, cap, to) != 0) return CW_ENOMEM;
        size_t got = fread(*p + at, 1, to - at, f->f);
        at += got;
        if (at < to) return ferror(f->f) ? CW_EIO : 1;
    }
    return 0;
}

/* Compressed buffer x (header h, XPRESS body z of x->size - BUF_HDR
 * bytes) decoded into *out, the events ending at *stop. 0, CW_ENOMEM, 2
 * when it does not decode. */
static int inflate(const bufidx_t *x, const uint8_t *h, const uint8_t *z, uint8_t **out,
                   size_t *outcap, size_t *stop)
{
    if (x->saved < BUF_HDR || x->saved > MAX_BUF) return 2;
    if (grow(out, outcap, x->saved) != 0) return CW_ENOMEM;
    memcpy(*out, h, BUF_HDR);
    size_t n = 0;
    int rc = cw_etl_xpress_decompress(z, x->size - BUF_HDR, *out + BUF_HDR, x->saved - BUF_HDR, &n);
    if (rc != 0 || n != x->saved - BUF_HDR) return 2;
    *stop = x->filled < x->saved ? x->filled : x->saved;
    if (*stop < BUF_HDR) *stop = BUF_HDR;
    return 0;
}

/* The events of an uncompressed buffer x in place end at *stop. */
static int plain_stop(const bufidx_t *x, size_t *stop)
{
    *stop = x->filled < x->size ? x->filled : x->size;
    if (*stop < BUF_HDR) *stop = BUF_HDR;
    return 0;
}

/* Reads the rest of buffer x (its header h already read) and decodes it
 * into *out: header and events, the events ending at *stop. 0, CW_EIO,
 * CW_ENOMEM, 1 when the file ends inside it, 2 when it does not decode. */
static int load_body(cw_etl_file_t *f, const bufidx_t *x, const uint8_t h[BUF_HDR], uint8_t **out,
                     size_t *outcap, size_t *stop)
{
    size_t body = x->size - BUF_HDR;
    if (!(x->flags & FLAG_COMPRESSED)) {
        /* Straight into place. */
        if (grow(out, outcap, BUF_HDR) != 0) return CW_ENOMEM;
        memcpy(*out, h, BUF_HDR);
        int rc = read_grow(f, out, outcap, BUF_HDR, body);
        return rc ? rc : plain_stop(x, stop);
    }
    if (grow(&f->raw, &f->rawcap, 1) != 0) return CW_ENOMEM;
    int rc = read_grow(f, &f->raw, &f->rawcap, 0, body);
    return rc ? rc : inflate(x, h, f->raw, out, outcap, stop);
}

/* Buffer x of the index (pass 2) read whole, header and body in one read,
 * and decoded into *out as load_body does. */
static int load_at(cw_etl_file_t *f, const bufidx_t *x, uint8_t **out, size_t *outcap,
                   size_t *stop)
{
    bool z = x->flags & FLAG_COMPRESSED;
    uint8_t **dst = z ? &f->raw : out;
    size_t *cap = z ? &f->rawcap : outcap;
    if (fsetpos(f->f, &x->pos) != 0) return CW_EIO;
    if (grow(dst, cap, x->size) != 0) return CW_ENOMEM;
    size_t got = fread(*dst, 1, x->size, f->f);
    if (got < BUF_HDR) return CW_EIO;
    if (got < x->size) return ferror(f->f) ? CW_EIO : 1;
    return z ? inflate(x, f->raw, f->raw + BUF_HDR, out, outcap, stop) : plain_stop(x, stop);
}

int cw_etl_file_open_stream(FILE *fp, const char *name, cw_etl_file_t **out, cw_diag_t *d)
{
    cw_etl_file_t *f = calloc(1, sizeof *f);
    uint8_t h[BUF_HDR];
    bufidx_t x = {0};
    size_t stop = 0;
    int rc;
    if (!f) {
        fclose(fp);
        return cw_diag_set(d, CW_ENOMEM, "out of memory");
    }
    f->f = fp;
    f->popped = -1;
    cw_strlcpy(f->name, name, sizeof f->name);
    if (fgetpos(fp, &f->start) != 0) {
        rc = cw_diag_set(d, CW_EIO, "%s: cannot seek in it (an .etl file must be a regular file)",
                         name);
        goto fail;
    }
    rc = read_header(f, h, &x);
    if (rc <= 0 || x.size < BUF_HDR || x.size > MAX_BUF) {
        rc = cw_diag_set(d, CW_EPARSE,
                         "%s: not an .etl file (no event trace buffer header at offset 0)", name);
        goto fail;
    }
    rc = load_body(f, &x, h, &f->work, &f->workcap, &stop);
    if (rc == CW_ENOMEM) {
        cw_diag_set(d, rc, "out of memory");
        goto fail;
    }
    cw_etl_event_t ev;
    size_t adv;
    if (rc != 0 || cw_etl__parse_event(f->work, BUF_HDR, stop, &ev, &adv) != 1 ||
        cw_etl__parse_logfile_header(&ev, &f->hdr) != 0) {
        rc = cw_diag_set(d, CW_EPARSE,
                         "%s: not an .etl file (the first buffer holds no trace header event at "
                         "offset 0x48)",
                         name);
        goto fail;
    }
    rc = cw_etl__clock_init(&f->clock, &f->hdr);
    if (rc != 0) {
        cw_diag_set(d, rc,
                    "%s: clock type %u with frequency %lld cannot be converted to time (offset "
                    "0x48: the trace header)",
                    name, f->hdr.clock_type, (long long)f->hdr.perf_freq);
        goto fail;
    }
    *out = f;
    return 0;
fail:
    cw_etl_file_close(f);
    return rc;
}

int cw_etl_file_open(const char *path, cw_etl_file_t **out, cw_diag_t *d)
{
    FILE *fp = fopen(path, "rb");
    if (!fp) return cw_diag_set(d, CW_EIO, "%s: cannot open it (%s)", path, strerror(errno));
    /* Whole buffers are read (64 KiB and more): straight into place, one
     * read each, not through stdio's small buffer (unless the build gives
     * one: CW_ETL__STDIO_BUF, above). */
#if CW_ETL__STDIO_BUF > 0
    setvbuf(fp, NULL, _IOFBF, CW_ETL__STDIO_BUF);
#else
    setvbuf(fp, NULL, _IONBF, 0);
#endif
    return cw_etl_file_open_stream(fp, path, out, d);
}

/* Frees pass 2's state (the streams with their buffers, the loser tree,
 * the sorted index) and leaves none: a rewind starts it again. */
static void merge_free(cw_etl_file_t *f)
{
    for (size_t i = 0; i < f->nstreams; i++) free(f->streams[i].buf);
    free(f->streams);
    free(f->lt);
    free(f->sorted);
    f->streams = NULL;
    f->lt = NULL;
    f->sorted = NULL;
    f->nstreams = 0;
}

/* A teardown list, alike to trace.c's reader close in form only. */
void cw_etl_file_close(cw_etl_file_t *f)
{
    if (!f) return;
    if (f->f) fclose(f->f);
    merge_free(f);
    free(f->idx);
    free(f->raw);
    free(f->work);
    free(f);
}

const cw_etl_header_t *cw_etl_file_header(const cw_etl_file_t *f)
{
    return &f->hdr;
}

const cw_etl_file_stats_t *cw_etl_file_stats(const cw_etl_file_t *f)
{
    return &f->st;
}

int64_t cw_etl_file_ns(const cw_etl_file_t *f, uint64_t ts)
{
    return cw_etl__clock_ns(&f->clock, ts);
}

uint64_t cw_etl_file_ticks_per_s(const cw_etl_file_t *f)
{
    return (uint64_t)f->clock.freq;
}

/* The events of one decoded buffer, to cb. 0, cb's return, or 1 when an
 * event header is malformed (the rest of the buffer is left). */
static int scan_events(cw_etl_file_t *f, const bufidx_t *x, const uint8_t *buf, size_t stop,
                       int (*cb)(void *, const cw_etl_event_t *), void *ctx)
{
    size_t at = BUF_HDR, adv = 0;
    cw_etl_event_t ev;
    for (;;) {
        int k = cw_etl__parse_event(buf, at, stop, &ev, &adv);
        if (k == 0) return 0;
        if (k < 0) return 1;
        at += adv;
        if (k == 2) {
            f->st.messages++;
            continue;
        }
        ev.cpu = x->cpu;
        f->st.events++;
        f->st.by_header[ev.header_type < CW_ARRAY_LEN(f->st.by_header) ? ev.header_type : 0]++;
        int rc = cb(ctx, &ev);
        if (rc) return rc;
    }
}

int cw_etl_file_scan(cw_etl_file_t *f, int (*cb)(void *ctx, const cw_etl_event_t *ev), void *ctx,
                     cw_diag_t *d)
{
    uint8_t h[BUF_HDR];
    uint64_t off = 0;
    int rc = 0;
    memset(&f->st, 0, sizeof f->st);
    f->nidx = 0;
    f->max_data = BUF_HDR;
    if (fsetpos(f->f, &f->start) != 0) return io_error(f, 0, d);
    for (uint32_t order = 0;; order++) {
        bufidx_t x = {0};
        if (fgetpos(f->f, &x.pos) != 0) return io_error(f, off, d);
        int k = read_header(f, h, &x);
        if (k == 0) break;
        if (k < 0 || x.size < BUF_HDR || x.size > MAX_BUF) {
            /* Nothing after this point can be found: the next buffer's
             * place is this one's size. */
            f->st.truncated = true;
            CW_LOGW("%s: %s at offset %llu: the rest of the file is left", f->name,
                    k < 0 ? "the file ends inside a buffer header" : "a buffer header is corrupt",
                    (unsigned long long)off);
            break;
        }
        x.off = off;
        x.order = order;
        size_t stop = 0;
        k = load_body(f, &x, h, &f->work, &f->workcap, &stop);
        if (k == CW_ENOMEM) return cw_diag_set(d, k, "out of memory");
        if (k == CW_EIO) return io_error(f, off, d);
        if (k == 1) {
            f->st.truncated = true;
            CW_LOGW("%s: the file ends inside the buffer at offset %llu: that buffer is left",
                    f->name, (unsigned long long)off);
            break;
        }
        f->st.buffers++;
        f->st.bytes += x.size;
        if (x.flags & FLAG_COMPRESSED) f->st.buffers_compressed++;
        if (x.flags & (FLAG_EVENTS_LOST | FLAG_BUFFER_LOST)) f->st.buffers_lost_flag++;
        if (k == 2) {
            x.corrupt = true;
            f->st.buffers_corrupt++;
            CW_LOGW("%s: the compressed buffer at offset %llu does not decompress to its %u "
                    "bytes: left",
                    f->name, (unsigned long long)off, x.saved);
        } else {
            if (stop > f->max_data) f->max_data = stop;
            rc = scan_events(f, &x, f->work, stop, cb, ctx);
            if (rc == 1) {
                rc = 0;
                f->st.buffers_corrupt++;
                CW_LOGW("%s: a malformed event in the buffer at offset %llu: the rest of that "
                        "buffer is left",
                        f->name, (unsigned long long)off);
            }
        }
        if (CW_RESERVE(f->idx, f->idxcap, f->nidx + 1) != 0)
            return cw_diag_set(d, CW_ENOMEM, "out of memory");
        f->idx[f->nidx++] = x;
        off += x.size;
        if (rc) return rc;
    }
    f->scanned = true;
    return 0;
}

/* ---- pass 2: the merge -------------------------------------------------------- */

/* A qsort comparator of three keys, alike to join.c's by_key_ts in form only. */
static int by_cpu_seq(const void *a, const void *b)
{
    const bufidx_t *x = a, *y = b;
    if (x->cpu != y->cpu) return x->cpu < y->cpu ? -1 : 1;
    if (x->seq != y->seq) return x->seq < y->seq ? -1 : 1;
    return x->order < y->order ? -1 : x->order > y->order;
}

/* Loads stream s's next buffer that has events. 0 (s->at < s->stop) or
 * 1 when the stream has no more, CW_EIO, CW_ENOMEM. */
static int stream_load(cw_etl_file_t *f, stream_t *s)
{
    while (s->next < s->end) {
        const bufidx_t *x = &f->sorted[s->next++];
        size_t stop = 0;
        int k = load_at(f, x, &s->buf, &s->cap, &stop);
        if (k < 0) return k;
        if (k != 0) continue; /* counted by the scan */
        s->at = BUF_HDR;
        s->stop = stop;
        return 0;
    }
    return 1;
}

/* The stream's next event into s->ev (s->has), loading buffers as needed. */
static int stream_advance(cw_etl_file_t *f, stream_t *s)
{
    for (;;) {
        if (s->at < s->stop) {
            int k = cw_etl__parse_event(s->buf, s->at, s->stop, &s->ev, &s->adv);
            if (k == 2) {
                s->at += s->adv;
                continue;
            }
            if (k == 1) {
                s->at += s->adv;
                s->ev.cpu = s->cpu;
                s->has = true;
                return 0;
            }
            s->at = s->stop; /* the end, or the malformed rest the scan counted */
        }
        int rc = stream_load(f, s);
        if (rc == 1) {
            s->has = false;
            return 0;
        }
        if (rc) return rc;
    }
}

/* Stream a's next event comes before stream b's: (time, stream) orders
 * them totally; a stream with no more events comes after all. */
static bool earlier(const cw_etl_file_t *f, size_t a, size_t b)
{
    const stream_t *x = &f->streams[a], *y = &f->streams[b];
    if (!x->has || !y->has) return x->has;
    return x->ev.ts != y->ev.ts ? x->ev.ts < y->ev.ts : a < b;
}

/* Stream s's next event changed: it plays its way up from its leaf, one
 * match a level (log2 of the CPUs), each loser staying at its node. */
static void replay(cw_etl_file_t *f, size_t s)
{
    size_t w = s;
    for (size_t n = (f->nstreams + s) / 2; n > 0; n /= 2) {
        if (earlier(f, f->lt[n], w)) {
            size_t t = f->lt[n];
            f->lt[n] = w;
            w = t;
        }
    }
    f->lt[0] = w;
}

/* Plays every match from the leaves up; win has 2 * nstreams slots. */
static void build(cw_etl_file_t *f, size_t *win)
{
    size_t k = f->nstreams;
    for (size_t i = 0; i < k; i++) win[k + i] = i;
    for (size_t n = k ? k - 1 : 0; n > 0; n--) {
        size_t a = win[2 * n], b = win[2 * n + 1];
        bool a_first = earlier(f, a, b);
        win[n] = a_first ? a : b;
        f->lt[n] = a_first ? b : a;
    }
    f->lt[0] = k > 1 ? win[1] : 0;
}

int cw_etl_file_rewind(cw_etl_file_t *f, cw_diag_t *d)
{
    if (!f->scanned) return cw_diag_set(d, CW_EINVAL, "%s: the file was not scanned", f->name);
    merge_free(f);
    f->popped = -1;
    f->merged = false;
    f->st.reordered = 0;
    size_t n = 0;
    if (!(f->sorted = malloc((f->nidx ? f->nidx : 1) * sizeof *f->sorted)))
        return cw_diag_set(d, CW_ENOMEM, "out of memory");
    for (size_t i = 0; i < f->nidx; i++)
        if (!f->idx[i].corrupt) f->sorted[n++] = f->idx[i];
    qsort(f->sorted, n, sizeof *f->sorted, by_cpu_seq);
    size_t ns = 0;
    for (size_t i = 0; i < n; i++)
        if (i == 0 || f->sorted[i].cpu != f->sorted[i - 1].cpu) ns++;
    f->streams = calloc(ns ? ns : 1, sizeof *f->streams);
    f->lt = malloc((ns ? ns : 1) * sizeof *f->lt);
    if (!f->streams || !f->lt) return cw_diag_set(d, CW_ENOMEM, "out of memory");
    for (size_t i = 0; i < n; i++) {
        if (i == 0 || f->sorted[i].cpu != f->sorted[i - 1].cpu) {
            stream_t *s = &f->streams[f->nstreams++];
            s->next = i;
            s->cpu = f->sorted[i].cpu;
        }
        f->streams[f->nstreams - 1].end = i + 1;
    }
    for (size_t i = 0; i < f->nstreams; i++) {
        stream_t *s = &f->streams[i];
        /* Room for the largest buffer, so no stream reallocates later. */
        if (!(s->buf = malloc(f->max_data))) return cw_diag_set(d, CW_ENOMEM, "out of memory");
        s->cap = f->max_data;
        int rc = stream_advance(f, s);
        if (rc) return rc == CW_ENOMEM ? cw_diag_set(d, rc, "out of memory") : io_error(f, 0, d);
    }
    size_t *win = malloc(2 * (f->nstreams ? f->nstreams : 1) * sizeof *win);
    if (!win) return cw_diag_set(d, CW_ENOMEM, "out of memory");
    build(f, win);
    free(win);
    return 0;
}

int cw_etl_file_next(cw_etl_file_t *f, cw_etl_event_t *ev, cw_diag_t *d)
{
    if (!f->streams) {
        int rc = cw_etl_file_rewind(f, d);
        if (rc) return rc;
    }
    /* The stream returned last reads its next event and plays it up the
     * tree; a stream with no more events loses every match.
     * (ts, stream) orders the streams totally, so the order of the events
     * does not depend on how the tree is built. */
    if (f->popped >= 0) {
        stream_t *s = &f->streams[f->popped];
        int rc = stream_advance(f, s);
        if (rc) return rc == CW_ENOMEM ? cw_diag_set(d, rc, "out of memory") : io_error(f, 0, d);
        replay(f, (size_t)f->popped);
        f->popped = -1;
    }
    if (f->nstreams == 0 || !f->streams[f->lt[0]].has) return 0;
    size_t i = f->lt[0];
    f->popped = (long)i;
    *ev = f->streams[i].ev;
    if (f->merged && ev->ts < f->last_ts) f->st.reordered++;
    else f->last_ts = ev->ts;
    f->merged = true;
    return 1;
}
