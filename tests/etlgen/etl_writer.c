/* etl_writer.c - an .etl writer for tests and the benchmark (etl_writer.h):
 * buffers, event headers, the trace header, kernel payloads, and an
 * XPRESS compressor. Offsets are those docs/ETW.md lists (checked on the
 * real files in ../shared/data/etl/). */
#include "etl_writer.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define BUF_HDR 0x48
#define FILETIME_UNIX_EPOCH 116444736000000000LL

typedef struct cpu_buf {
    uint8_t *p;
    size_t n;       /* bytes used, the header included */
    uint64_t count; /* buffers flushed: odd ones are compressed */
} cpu_buf_t;

struct cw_etlw {
    FILE *f;
    cw_etlw_opts_t o;
    cpu_buf_t *cpus;
    uint8_t *zbuf;
    uint64_t seq, buffers;
    uint64_t last_tick;
    int err;
};

/* ---- payload builders --------------------------------------------------------- */

static void put(cw_etlw_buf_t *b, const void *src, size_t n)
{
    if (b->overflow || b->cap - b->n < n) {
        b->overflow = true;
        return;
    }
    memcpy(b->p + b->n, src, n);
    b->n += n;
}

static void putle(cw_etlw_buf_t *b, uint64_t v, size_t w)
{
    uint8_t t[8];
    for (size_t i = 0; i < w; i++) t[i] = (uint8_t)(v >> (8 * i));
    put(b, t, w);
}

void cw_etlw_u8(cw_etlw_buf_t *b, uint8_t v) { putle(b, v, 1); }
void cw_etlw_u16(cw_etlw_buf_t *b, uint16_t v) { putle(b, v, 2); }
void cw_etlw_u32(cw_etlw_buf_t *b, uint32_t v) { putle(b, v, 4); }
void cw_etlw_u64(cw_etlw_buf_t *b, uint64_t v) { putle(b, v, 8); }
void cw_etlw_ptr(cw_etlw_buf_t *b, unsigned ptr, uint64_t v) { putle(b, v, ptr); }

void cw_etlw_astr(cw_etlw_buf_t *b, const char *s)
{
    put(b, s, strlen(s) + 1);
}

void cw_etlw_wstr(cw_etlw_buf_t *b, const char *s)
{
    for (;; s++) {
        cw_etlw_u16(b, (uint8_t)*s);
        if (!*s) break;
    }
}

void cw_etlw_process(cw_etlw_buf_t *b, unsigned version, unsigned ptr, uint32_t pid, uint32_t ppid,
                     const char *image, const char *cmdline)
{
    cw_etlw_ptr(b, ptr, 0xFFFFA00000000000ull + pid * 0x80ull); /* UniqueProcessKey */
    cw_etlw_u32(b, pid);
    cw_etlw_u32(b, ppid);
    cw_etlw_u32(b, 1);      /* SessionId */
    cw_etlw_u32(b, 0x103);  /* ExitStatus: STATUS_PENDING while it runs */
    cw_etlw_ptr(b, ptr, 0x1AB000); /* DirectoryTableBase */
    if (version >= 4) cw_etlw_u32(b, 0); /* Flags */
    /* UserSID: a TOKEN_USER (pointer, attributes, padded to two pointers)
     * then S-1-5-21-a-b-c-1001 (five sub-authorities). */
    cw_etlw_ptr(b, ptr, 0xFFFFC00012345678ull);
    cw_etlw_ptr(b, ptr, 0);
    static const uint8_t sid[] = {1, 5, 0, 0, 0, 0, 0, 5, 21, 0, 0, 0, 1, 2, 3, 4,
                                  5, 6, 7, 8, 9, 10, 11, 12, 0xE9, 3, 0, 0};
    put(b, sid, sizeof sid);
    cw_etlw_astr(b, image);
    cw_etlw_wstr(b, cmdline ? cmdline : "");
    if (version >= 4) {
        cw_etlw_wstr(b, ""); /* PackageFullName */
        cw_etlw_wstr(b, ""); /* ApplicationId */
    }
}

void cw_etlw_image(cw_etlw_buf_t *b, unsigned version, unsigned ptr, uint64_t base, uint64_t size,
                   uint32_t pid, const char *path)
{
    cw_etlw_ptr(b, ptr, base);
    cw_etlw_ptr(b, ptr, size);
    cw_etlw_u32(b, pid);
    cw_etlw_u32(b, 0x1F2E3); /* ImageCheckSum */
    cw_etlw_u32(b, 0x5F000000); /* TimeDateStamp */
    if (version >= 3) {
        cw_etlw_u8(b, 0);  /* SignatureLevel */
        cw_etlw_u8(b, 0);  /* SignatureType */
        cw_etlw_u16(b, 0); /* Reserved0 */
    } else {
        cw_etlw_u32(b, 0); /* Reserved0 */
    }
    cw_etlw_ptr(b, ptr, base); /* DefaultBase */
    for (int i = 0; i < 4; i++) cw_etlw_u32(b, 0);
    cw_etlw_wstr(b, path);
}

void cw_etlw_thread(cw_etlw_buf_t *b, unsigned ptr, uint32_t pid, uint32_t tid)
{
    cw_etlw_u32(b, pid);
    cw_etlw_u32(b, tid);
    for (int i = 0; i < 7; i++) cw_etlw_ptr(b, ptr, 0x10000u * (unsigned)(i + 1)); /* stacks, start, TEB */
    cw_etlw_u32(b, 0); /* SubProcessTag */
    cw_etlw_u8(b, 8);  /* BasePriority */
    cw_etlw_u8(b, 5);  /* PagePriority */
    cw_etlw_u8(b, 2);  /* IoPriority */
    cw_etlw_u8(b, 0);  /* ThreadFlags */
}

void cw_etlw_valloc(cw_etlw_buf_t *b, unsigned ptr, uint64_t base, uint64_t size, uint32_t pid,
                    uint32_t flags)
{
    cw_etlw_ptr(b, ptr, base);
    cw_etlw_ptr(b, ptr, size);
    cw_etlw_u32(b, pid);
    cw_etlw_u32(b, flags);
}

void cw_etlw_stackwalk(cw_etlw_buf_t *b, unsigned ptr, uint64_t event_tick, uint32_t pid,
                       uint32_t tid, const uint64_t *frames, size_t n)
{
    cw_etlw_u64(b, event_tick);
    cw_etlw_u32(b, pid);
    cw_etlw_u32(b, tid);
    for (size_t i = 0; i < n; i++) cw_etlw_ptr(b, ptr, frames[i]);
}

void cw_etlw_stackref(cw_etlw_buf_t *b, unsigned ptr, uint64_t event_tick, uint32_t pid,
                      uint32_t tid, uint64_t key)
{
    cw_etlw_u64(b, event_tick);
    cw_etlw_u32(b, pid);
    cw_etlw_u32(b, tid);
    cw_etlw_ptr(b, ptr, key);
}

void cw_etlw_stackdef(cw_etlw_buf_t *b, unsigned ptr, uint64_t key, const uint64_t *frames,
                      size_t n)
{
    cw_etlw_ptr(b, ptr, key);
    for (size_t i = 0; i < n; i++) cw_etlw_ptr(b, ptr, frames[i]);
}

/* ---- XPRESS ------------------------------------------------------------------- */

#define HASH_BITS 14
#define MAX_OFF 8192

static uint32_t h3(const uint8_t *p)
{
    uint32_t v = (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16;
    return (v * 2654435761u) >> (32 - HASH_BITS);
}

size_t cw_etlw_xpress(const uint8_t *in, size_t n, uint8_t *out, size_t cap)
{
    static size_t table[1u << HASH_BITS];
    size_t ip = 0, op = 0, flag_at = 0, half = SIZE_MAX;
    uint32_t flags = 0;
    int nbits = 0;
    for (size_t i = 0; i < (1u << HASH_BITS); i++) table[i] = SIZE_MAX;
#define NEED(k)                                                                                    \
    do {                                                                                           \
        if (cap - op < (k)) return 0;                                                              \
    } while (0)
    NEED(4);
    flag_at = op;
    op += 4;
    while (ip < n) {
        if (nbits == 32) {
            out[flag_at] = (uint8_t)flags;
            out[flag_at + 1] = (uint8_t)(flags >> 8);
            out[flag_at + 2] = (uint8_t)(flags >> 16);
            out[flag_at + 3] = (uint8_t)(flags >> 24);
            NEED(4);
            flag_at = op;
            op += 4;
            flags = 0;
            nbits = 0;
        }
        size_t len = 0, off = 0;
        if (n - ip >= 3) {
            uint32_t h = h3(in + ip);
            size_t cand = table[h];
            table[h] = ip;
            if (cand != SIZE_MAX && ip - cand <= MAX_OFF) {
                while (ip + len < n && in[cand + len] == in[ip + len]) len++;
                off = ip - cand;
            }
        }
        if (len < 3) {
            NEED(1);
            out[op++] = in[ip++];
            flags <<= 1;
            nbits++;
            continue;
        }
        size_t v = len - 3;
        NEED(2);
        uint16_t sym = (uint16_t)((off - 1) << 3 | (v < 7 ? v : 7));
        out[op++] = (uint8_t)sym;
        out[op++] = (uint8_t)(sym >> 8);
        if (v >= 7) {
            size_t r = v - 7, nib = r < 15 ? r : 15;
            if (half == SIZE_MAX) {
                NEED(1);
                half = op;
                out[op++] = (uint8_t)nib;
            } else {
                out[half] |= (uint8_t)(nib << 4);
                half = SIZE_MAX;
            }
            if (nib == 15) {
                r -= 15;
                NEED(1);
                if (r < 255) {
                    out[op++] = (uint8_t)r;
                } else {
                    out[op++] = 255;
                    if (v <= 0xFFFF) {
                        NEED(2);
                        out[op++] = (uint8_t)v;
                        out[op++] = (uint8_t)(v >> 8);
                    } else {
                        NEED(6);
                        out[op++] = 0;
                        out[op++] = 0;
                        for (int k = 0; k < 4; k++) out[op++] = (uint8_t)(v >> (8 * k));
                    }
                }
            }
        }
        for (size_t k = 1; k < len && ip + k + 3 <= n; k++) table[h3(in + ip + k)] = ip + k;
        ip += len;
        flags = flags << 1 | 1;
        nbits++;
    }
    /* The rest of the last flag word: ones, as MS-XCA's encoder writes. */
    flags = (uint32_t)(((uint64_t)flags << (32 - nbits)) | ((1ull << (32 - nbits)) - 1));
    out[flag_at] = (uint8_t)flags;
    out[flag_at + 1] = (uint8_t)(flags >> 8);
    out[flag_at + 2] = (uint8_t)(flags >> 16);
    out[flag_at + 3] = (uint8_t)(flags >> 24);
    return op;
#undef NEED
}

/* ---- buffers ------------------------------------------------------------------ */

static void wr16(uint8_t *p, uint16_t v)
{
    p[0] = (uint8_t)v;
    p[1] = (uint8_t)(v >> 8);
}

static void wr32(uint8_t *p, uint32_t v)
{
    for (int i = 0; i < 4; i++) p[i] = (uint8_t)(v >> (8 * i));
}

static void wr64(uint8_t *p, uint64_t v)
{
    for (int i = 0; i < 8; i++) p[i] = (uint8_t)(v >> (8 * i));
}

/* The WMI_BUFFER_HEADER of a buffer of cpu holding n bytes. */
static void buffer_header(cw_etlw_t *w, uint8_t *h, unsigned cpu, size_t n, uint32_t size,
                          uint16_t flags, uint16_t type)
{
    memset(h, 0, BUF_HDR);
    wr32(h + 0x00, size);
    wr32(h + 0x04, (uint32_t)n); /* SavedOffset */
    wr32(h + 0x08, (uint32_t)n); /* CurrentOffset */
    wr64(h + 0x10, w->last_tick);
    wr64(h + 0x18, ++w->seq);
    wr16(h + 0x28, (uint16_t)cpu);
    wr16(h + 0x2A, 0x12);        /* LoggerId */
    wr32(h + 0x2C, 3);           /* State */
    wr32(h + 0x30, (uint32_t)n); /* Offset: the bytes filled */
    wr16(h + 0x34, flags);
    wr16(h + 0x36, type);
}

static int flush_cpu(cw_etlw_t *w, unsigned cpu)
{
    cpu_buf_t *c = &w->cpus[cpu];
    if (c->n <= BUF_HDR) return 0;
    /* Every other buffer of a CPU, odd CPUs starting compressed. */
    bool z = w->o.compress && ((c->count++ + cpu) & 1);
    if (z) {
        size_t zn = cw_etlw_xpress(c->p + BUF_HDR, c->n - BUF_HDR, w->zbuf + BUF_HDR,
                                   w->o.buffer_size - BUF_HDR);
        if (zn) {
            buffer_header(w, w->zbuf, cpu, c->n, (uint32_t)(BUF_HDR + zn), 0x20 | 0x40, 1);
            w->buffers++;
            c->n = BUF_HDR;
            return fwrite(w->zbuf, 1, BUF_HDR + zn, w->f) == BUF_HDR + zn ? 0 : -1;
        }
    }
    /* A whole buffer, the unused rest 0xFF as the logger leaves it. */
    buffer_header(w, c->p, cpu, c->n, w->o.buffer_size, 0x20, 1);
    memset(c->p + c->n, 0xFF, w->o.buffer_size - c->n);
    w->buffers++;
    c->n = BUF_HDR;
    return fwrite(c->p, 1, w->o.buffer_size, w->f) == w->o.buffer_size ? 0 : -1;
}

/* The header event's payload (TRACE_LOGFILE_HEADER). */
static size_t logfile_header(cw_etlw_t *w, uint8_t *p, size_t cap, int64_t end_ns)
{
    cw_etlw_buf_t b = {p, 0, cap, false};
    unsigned ptr = w->o.ptr_size;
    int64_t ft0 = w->o.start_ns / 100 + FILETIME_UNIX_EPOCH;
    int64_t ft1 = end_ns / 100 + FILETIME_UNIX_EPOCH;
    cw_etlw_u32(&b, w->o.buffer_size);
    cw_etlw_u8(&b, 10); /* Windows 10.0 */
    cw_etlw_u8(&b, 0);
    cw_etlw_u8(&b, 0);
    cw_etlw_u8(&b, 0);
    cw_etlw_u32(&b, w->o.build);
    cw_etlw_u32(&b, w->o.ncpu);
    cw_etlw_u64(&b, (uint64_t)ft1);
    cw_etlw_u32(&b, 156250); /* TimerResolution */
    cw_etlw_u32(&b, 0);      /* MaximumFileSize */
    cw_etlw_u32(&b, 0x00010001u | (w->o.compress ? 0x04000000u : 0));
    cw_etlw_u32(&b, (uint32_t)w->buffers); /* BuffersWritten */
    cw_etlw_u32(&b, 1);                    /* StartBuffers */
    cw_etlw_u32(&b, ptr);
    cw_etlw_u32(&b, w->o.events_lost);
    cw_etlw_u32(&b, 2994); /* CpuSpeedInMHz */
    cw_etlw_ptr(&b, ptr, 0);
    cw_etlw_ptr(&b, ptr, 0);
    for (int i = 0; i < 172; i++) cw_etlw_u8(&b, 0); /* TIME_ZONE_INFORMATION */
    while (b.n % 8) cw_etlw_u8(&b, 0);
    cw_etlw_u64(&b, (uint64_t)(ft0 - 36000000000LL)); /* BootTime: an hour before */
    cw_etlw_u64(&b, (uint64_t)w->o.freq);
    cw_etlw_u64(&b, (uint64_t)ft0);
    cw_etlw_u32(&b, 1); /* clock type: QPC */
    cw_etlw_u32(&b, w->o.buffers_lost);
    cw_etlw_wstr(&b, "commitwatch test");
    cw_etlw_wstr(&b, "C:\\trace\\generated.etl");
    return b.overflow ? 0 : b.n;
}

/* Writes the header buffer at the start of the file (again at close,
 * with the final counts). */
static int write_header_buffer(cw_etlw_t *w, int64_t end_ns)
{
    uint8_t *p = calloc(1, w->o.buffer_size);
    uint8_t pay[1024];
    if (!p) return -1;
    size_t plen = logfile_header(w, pay, sizeof pay, end_ns);
    size_t hs = 0x20, size = hs + plen;
    uint8_t *e = p + BUF_HDR;
    wr16(e, 2);
    e[2] = w->o.ptr_size == 8 ? 2 : 1; /* SYSTEM64 / SYSTEM32 */
    e[3] = 0xC0;
    wr16(e + 4, (uint16_t)size);
    e[6] = 0;
    e[7] = 0;
    wr64(e + 0x10, w->o.start_tick);
    memcpy(e + hs, pay, plen);
    size_t n = BUF_HDR + ((size + 7) & ~(size_t)7);
    uint64_t seq = w->seq;
    w->seq = 0; /* the header buffer is sequence 1 */
    buffer_header(w, p, 0, n, w->o.buffer_size, 0x20, 4);
    if (w->seq < seq) w->seq = seq;
    memset(p + n, 0xFF, w->o.buffer_size - n);
    int rc = fseek(w->f, 0, SEEK_SET) == 0 && fwrite(p, 1, w->o.buffer_size, w->f) == w->o.buffer_size
                 ? 0
                 : -1;
    free(p);
    return rc;
}

int cw_etlw_open(const char *path, const cw_etlw_opts_t *o, cw_etlw_t **out)
{
    cw_etlw_t *w = calloc(1, sizeof *w);
    if (!w) return -1;
    w->o = *o;
    if (!w->o.buffer_size) w->o.buffer_size = 64 * 1024;
    if (!w->o.ncpu) w->o.ncpu = 1;
    if (!w->o.freq) w->o.freq = 10000000;
    if (!w->o.build) w->o.build = 19045;
    w->last_tick = w->o.start_tick;
    w->cpus = calloc(w->o.ncpu, sizeof *w->cpus);
    w->zbuf = malloc(w->o.buffer_size);
    w->f = fopen(path, "wb");
    if (!w->cpus || !w->zbuf || !w->f) goto fail;
    for (unsigned i = 0; i < w->o.ncpu; i++) {
        if (!(w->cpus[i].p = malloc(w->o.buffer_size))) goto fail;
        w->cpus[i].n = BUF_HDR;
    }
    w->buffers = 1;
    if (write_header_buffer(w, w->o.start_ns) != 0) goto fail;
    *out = w;
    return 0;
fail:
    if (w->f) fclose(w->f);
    if (w->cpus)
        for (unsigned i = 0; i < w->o.ncpu; i++) free(w->cpus[i].p);
    free(w->cpus);
    free(w->zbuf);
    free(w);
    return -1;
}

/* The Heap class's GUID, 222962ab-6180-4b88-a825-346b75f2a24a, as stored. */
static const uint8_t heap_guid[16] = {0xab, 0x62, 0x29, 0x22, 0x80, 0x61, 0x88, 0x4b,
                                      0xa8, 0x25, 0x34, 0x6b, 0x75, 0xf2, 0xa2, 0x4a};

/* Room for an event of size bytes (header and payload) at tick on cpu's
 * buffer, flushed first when full: the event's first byte, its 8-aligned
 * room zeroed, or NULL when it cannot fit a buffer. */
static uint8_t *event_room(cw_etlw_t *w, unsigned cpu, size_t size, uint64_t tick)
{
    size_t need = (size + 7) & ~(size_t)7;
    if (size > 0xFFFF || BUF_HDR + need > w->o.buffer_size) return NULL;
    cpu_buf_t *c = &w->cpus[cpu];
    if (c->n + need > w->o.buffer_size && flush_cpu(w, cpu) != 0) return NULL;
    uint8_t *e = c->p + c->n;
    memset(e, 0, need);
    c->n += need;
    if (tick > w->last_tick) w->last_tick = tick;
    return e;
}

/* A FULL header (0x30 bytes): size, header type, flags, type, level,
 * version, thread, process, time, class GUID, kernel and user time. */
static int full_event(cw_etlw_t *w, unsigned cpu, unsigned group, unsigned type, unsigned version,
                      uint32_t pid, uint32_t tid, uint64_t tick, const uint8_t *data, size_t len)
{
    uint8_t *e = group == 0x10 ? event_room(w, cpu, 0x30 + len, tick) : NULL;
    if (!e) return -1;
    wr16(e, (uint16_t)(0x30 + len));
    e[2] = w->o.ptr_size == 8 ? 0x14 : 0x0A;
    e[3] = 0xC0;
    e[4] = (uint8_t)type;
    wr16(e + 6, (uint16_t)version);
    wr32(e + 8, tid);
    wr32(e + 12, pid);
    wr64(e + 16, tick);
    memcpy(e + 24, heap_guid, 16);
    memcpy(e + 0x30, data, len);
    return 0;
}

int cw_etlw_event(cw_etlw_t *w, unsigned cpu, int kind, unsigned group, unsigned type,
                  unsigned version, uint32_t pid, uint32_t tid, uint64_t tick, const uint8_t *data,
                  size_t len)
{
    if (cpu >= w->o.ncpu) return -1;
    bool p64 = w->o.ptr_size == 8;
    if (kind == CW_ETLW_FULL)
        return full_event(w, cpu, group, type, version, pid, tid, tick, data, len);
    size_t hs = kind == CW_ETLW_SYSTEM ? 0x20 : 0x10, size = hs + len;
    uint8_t *e = event_room(w, cpu, size, tick);
    if (!e) return -1;
    wr16(e, (uint16_t)version);
    e[2] = kind == CW_ETLW_SYSTEM ? (p64 ? 0x02 : 0x01) : (p64 ? 0x11 : 0x10);
    e[3] = 0xC0;
    wr16(e + 4, (uint16_t)size);
    e[6] = (uint8_t)type;
    e[7] = (uint8_t)group;
    if (kind == CW_ETLW_SYSTEM) {
        wr32(e + 8, tid);
        wr32(e + 12, pid);
        wr64(e + 16, tick);
    } else {
        wr64(e + 8, tick);
    }
    memcpy(e + hs, data, len);
    return 0;
}

uint64_t cw_etlw_buffers(const cw_etlw_t *w)
{
    return w->buffers;
}

int cw_etlw_close(cw_etlw_t *w)
{
    int rc = 0;
    for (unsigned i = 0; i < w->o.ncpu; i++)
        if (flush_cpu(w, i) != 0) rc = -1;
    int64_t end_ns = w->o.start_ns +
                     (int64_t)((double)(w->last_tick - w->o.start_tick) * 1e9 / (double)w->o.freq);
    end_ns -= end_ns % 100;
    if (rc == 0) rc = write_header_buffer(w, end_ns);
    if (fclose(w->f) != 0) rc = -1;
    for (unsigned i = 0; i < w->o.ncpu; i++) free(w->cpus[i].p);
    free(w->cpus);
    free(w->zbuf);
    free(w);
    return rc;
}
