/* header.c - the headers inside an .etl buffer: each event's header (the
 * twelve header types), the trace's TRACE_LOGFILE_HEADER, and the clock
 * that turns raw timestamps into Unix time.
 *
 * An event starts with a u32 whose byte 2 is the header type and byte 3
 * flags (0x80 always; 0x40 an event trace, 0x10 a WPP message). Events
 * are 8-byte aligned. Sizes and fields per type are in docs/ETW.md; the
 * kernel's classic events carry a hook id (group << 8 | type), the FULL
 * and INSTANCE headers a class GUID (mapped back to the kernel group when
 * it is one of the kernel's), EVENT_HEADER events a provider GUID and an
 * event descriptor. */
#include <string.h>

#include "sources/etl/etl_internal.h"

#define FILETIME_UNIX_EPOCH 116444736000000000LL /* 1970-01-01 in 100 ns since 1601 */

static uint16_t rd16(const uint8_t *p)
{
    return (uint16_t)(p[0] | p[1] << 8);
}

uint32_t cw_etl__rd32(const uint8_t *p)
{
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

uint64_t cw_etl__rd64(const uint8_t *p)
{
    return (uint64_t)cw_etl__rd32(p) | (uint64_t)cw_etl__rd32(p + 4) << 32;
}

/* The kernel's classes as GUIDs, for events written with FULL or INSTANCE
 * headers (a relogger may write kernel events that way). */
typedef struct kguid {
    uint32_t d1;
    uint16_t d2, d3;
    uint8_t d4[8];
    uint8_t group;
} kguid_t;

static const kguid_t kernel_guids[] = {
    {0x68fdd900, 0x4a3e, 0x11d1, {0x84, 0xf4, 0x00, 0x00, 0xf8, 0x04, 0x64, 0xe3}, 0x00},
    {0x3d6fa8d4, 0xfe05, 0x11d0, {0x9d, 0xda, 0x00, 0xc0, 0x4f, 0xd7, 0xba, 0x7c}, 0x01},
    {0x3d6fa8d3, 0xfe05, 0x11d0, {0x9d, 0xda, 0x00, 0xc0, 0x4f, 0xd7, 0xba, 0x7c}, 0x02},
    {0x3d6fa8d0, 0xfe05, 0x11d0, {0x9d, 0xda, 0x00, 0xc0, 0x4f, 0xd7, 0xba, 0x7c}, 0x03},
    {0x90cbdc39, 0x4a3e, 0x11d1, {0x84, 0xf4, 0x00, 0x00, 0xf8, 0x04, 0x64, 0xe3}, 0x04},
    {0x3d6fa8d1, 0xfe05, 0x11d0, {0x9d, 0xda, 0x00, 0xc0, 0x4f, 0xd7, 0xba, 0x7c}, 0x05},
    {0x9a280ac0, 0xc8e0, 0x11d1, {0x84, 0xe2, 0x00, 0xc0, 0x4f, 0xb9, 0x98, 0xa2}, 0x06},
    {0xbf3a50c5, 0xa9c9, 0x4988, {0xa0, 0x05, 0x2d, 0xf0, 0xb7, 0xc8, 0x0f, 0x80}, 0x08},
    {0xae53722e, 0xc863, 0x11d2, {0x86, 0x59, 0x00, 0xc0, 0x4f, 0xa3, 0x21, 0xa1}, 0x09},
    {0x01853a65, 0x418f, 0x4f36, {0xae, 0xfc, 0xdc, 0x0f, 0x1d, 0x2f, 0xd2, 0x35}, 0x0B},
    {0xce1dbfb4, 0x137e, 0x4da6, {0x87, 0xb0, 0x3f, 0x59, 0xaa, 0x10, 0x2c, 0xbc}, 0x0F},
    {0x222962ab, 0x6180, 0x4b88, {0xa8, 0x25, 0x34, 0x6b, 0x75, 0xf2, 0xa2, 0x4a}, 0x10},
    {0x2cb15d1d, 0x5fc1, 0x11d2, {0xab, 0xe1, 0x00, 0xa0, 0xc9, 0x11, 0xf5, 0x18}, 0x14},
    {0xdef2fe46, 0x7bd6, 0x4b80, {0xbd, 0x94, 0xf5, 0x7f, 0xe2, 0x0d, 0x0c, 0xe3}, 0x18},
    {0x45d8cccd, 0x539f, 0x4b72, {0xa8, 0xb7, 0x5c, 0x68, 0x31, 0x42, 0x60, 0x9a}, 0x1A},
};

/* The kernel group of a class GUID (raw bytes), or -1. */
int cw_etl__kernel_group(const uint8_t g[16])
{
    uint32_t d1 = cw_etl__rd32(g);
    uint16_t d2 = rd16(g + 4), d3 = rd16(g + 6);
    for (size_t i = 0; i < CW_ARRAY_LEN(kernel_guids); i++) {
        const kguid_t *k = &kernel_guids[i];
        if (k->d1 == d1 && k->d2 == d2 && k->d3 == d3 && memcmp(k->d4, g + 8, 8) == 0)
            return k->group;
    }
    return -1;
}

int cw_etl__parse_event(const uint8_t *buf, size_t at, size_t end, cw_etl_event_t *ev,
                        size_t *adv)
{
    if (at >= end || end - at < 4) return 0;
    const uint8_t *e = buf + at;
    size_t room = end - at;
    uint32_t marker = cw_etl__rd32(e);
    if (marker == 0xFFFFFFFFu) return 0; /* the rest of the buffer is unused */
    uint8_t ht = (uint8_t)(marker >> 16), fl = (uint8_t)(marker >> 24);
    if (!(fl & 0x80)) return CW_EPARSE;
    size_t size, hsize;
    memset(ev, 0, sizeof *ev);
    ev->header_type = ht;

    if ((fl & 0xC0) == 0x80 && (fl & 0x10)) {
        /* A WPP message: its size is the low half of the marker. */
        size = marker & 0xFFFF;
        if (size < 8 || size > room) return CW_EPARSE;
        *adv = (size + 7) & ~(size_t)7;
        return 2;
    }
    switch (ht) {
    case CW_ETL_HT_SYSTEM32:
    case CW_ETL_HT_SYSTEM64:
    case CW_ETL_HT_COMPACT32:
    case CW_ETL_HT_COMPACT64:
        hsize = (ht == CW_ETL_HT_SYSTEM32 || ht == CW_ETL_HT_SYSTEM64) ? 0x20 : 0x18;
        if (room < hsize) return CW_EPARSE;
        size = rd16(e + 4);
        ev->kernel = true;
        ev->version = rd16(e) & 0xFF;
        ev->type = e[6];
        ev->group = e[7];
        ev->has_ids = true;
        ev->tid = cw_etl__rd32(e + 8);
        ev->pid = cw_etl__rd32(e + 12);
        ev->ts = cw_etl__rd64(e + 16);
        ev->ptr_size = (ht == CW_ETL_HT_SYSTEM32 || ht == CW_ETL_HT_COMPACT32) ? 4 : 8;
        break;
    case CW_ETL_HT_PERFINFO32:
    case CW_ETL_HT_PERFINFO64: {
        if (room < 0x10) return CW_EPARSE;
        uint16_t v = rd16(e);
        size = rd16(e + 4);
        hsize = 0x10 + ((v & 0x8000) ? 8 : 0) + 8 * (size_t)((v & 0x700) >> 8);
        ev->kernel = true;
        ev->version = v & 0xFF;
        ev->type = e[6];
        ev->group = e[7];
        ev->ts = cw_etl__rd64(e + 8);
        ev->ptr_size = ht == CW_ETL_HT_PERFINFO32 ? 4 : 8;
        break;
    }
    case CW_ETL_HT_FULL32:
    case CW_ETL_HT_FULL64:
    case CW_ETL_HT_INSTANCE32:
    case CW_ETL_HT_INSTANCE64: {
        hsize = (ht == CW_ETL_HT_FULL32 || ht == CW_ETL_HT_FULL64) ? 0x30 : 0x48;
        if (room < hsize) return CW_EPARSE;
        size = rd16(e);
        ev->type = e[4];
        ev->version = rd16(e + 6);
        ev->has_ids = true;
        ev->tid = cw_etl__rd32(e + 8);
        ev->pid = cw_etl__rd32(e + 12);
        ev->ts = cw_etl__rd64(e + 16);
        memcpy(ev->guid, e + 24, 16);
        ev->ptr_size = (ht == CW_ETL_HT_FULL32 || ht == CW_ETL_HT_INSTANCE32) ? 4 : 8;
        int g = cw_etl__kernel_group(ev->guid);
        if (g >= 0) {
            ev->kernel = true;
            ev->group = (uint8_t)g;
        }
        break;
    }
    case CW_ETL_HT_EVENT32:
    case CW_ETL_HT_EVENT64: {
        hsize = 0x50;
        if (room < hsize) return CW_EPARSE;
        size = rd16(e);
        uint16_t flags = rd16(e + 4);
        ev->has_ids = true;
        ev->tid = cw_etl__rd32(e + 8);
        ev->pid = cw_etl__rd32(e + 12);
        ev->ts = cw_etl__rd64(e + 16);
        memcpy(ev->guid, e + 24, 16);
        ev->event_id = rd16(e + 40);
        ev->version = e[42];
        ev->type = e[45]; /* opcode */
        ev->ptr_size = (flags & 0x0020) ? 4 : (flags & 0x0040) ? 8 : ht == CW_ETL_HT_EVENT32 ? 4 : 8;
        if (flags & 0x0001) {
            /* Extended data items, each 8 bytes of header (bit 0 of the
             * third u16: another follows) and its data, 8-aligned. */
            for (;;) {
                if (size > room || hsize + 8 > size) return CW_EPARSE;
                uint16_t more = rd16(e + hsize + 4), dsize = rd16(e + hsize + 6);
                hsize += 8 + (size_t)dsize;
                hsize = (hsize + 7) & ~(size_t)7;
                if (!(more & 1)) break;
            }
        }
        break;
    }
    default:
        return CW_EPARSE;
    }
    if (size < hsize || size > room) return CW_EPARSE;
    ev->data = e + hsize;
    ev->len = size - hsize;
    *adv = (size + 7) & ~(size_t)7;
    return 1;
}

/* FILETIME (100 ns since 1601) to Unix ns, saturating. */
int64_t cw_etl__filetime_ns(int64_t ft)
{
    if (ft < INT64_MIN + FILETIME_UNIX_EPOCH) return INT64_MIN;
    int64_t t = ft - FILETIME_UNIX_EPOCH;
    if (t > INT64_MAX / 100) return INT64_MAX;
    if (t < INT64_MIN / 100) return INT64_MIN;
    return t * 100;
}

/* One UTF-16 string at p[0..n) into dst: up to its NUL; the bytes used,
 * with the NUL (n when there is none). */
static size_t wname(const uint8_t *p, size_t n, char *dst, size_t cap)
{
    size_t units = 0;
    while (2 * units + 1 < n && (p[2 * units] || p[2 * units + 1])) units++;
    cw_etl_utf16_to_utf8(p, units, dst, cap);
    return 2 * units + 2 <= n ? 2 * units + 2 : n;
}

int cw_etl__parse_logfile_header(const cw_etl_event_t *ev, cw_etl_header_t *h)
{
    const uint8_t *p = ev->data;
    size_t ptr = ev->ptr_size;
    size_t names_ptrs = 0x38, tz = names_ptrs + 2 * ptr, times = (tz + 172 + 7) & ~(size_t)7;
    if (!ev->kernel || ev->group != 0 || ev->type != 0 || ev->len < times + 32) return CW_EPARSE;
    memset(h, 0, sizeof *h);
    h->buffer_size = cw_etl__rd32(p);
    h->os_major = p[4];
    h->os_minor = p[5];
    h->os_sub = p[6];
    h->os_subminor = p[7];
    h->build = cw_etl__rd32(p + 0x08);
    h->ncpu = cw_etl__rd32(p + 0x0C);
    h->end_time = (int64_t)cw_etl__rd64(p + 0x10);
    h->timer_resolution = cw_etl__rd32(p + 0x18);
    h->max_file_size = cw_etl__rd32(p + 0x1C);
    h->log_file_mode = cw_etl__rd32(p + 0x20);
    h->buffers_written = cw_etl__rd32(p + 0x24);
    h->pointer_size = cw_etl__rd32(p + 0x2C);
    h->events_lost = cw_etl__rd32(p + 0x30);
    h->cpu_mhz = cw_etl__rd32(p + 0x34);
    h->boot_time = (int64_t)cw_etl__rd64(p + times);
    h->perf_freq = (int64_t)cw_etl__rd64(p + times + 8);
    h->start_time = (int64_t)cw_etl__rd64(p + times + 16);
    h->clock_type = cw_etl__rd32(p + times + 24);
    h->buffers_lost = cw_etl__rd32(p + times + 28);
    h->header_ts = ev->ts;
    h->compressed = (h->log_file_mode & CW_ETL_MODE_COMPRESSED) != 0;
    h->boot_ns = cw_etl__filetime_ns(h->boot_time);
    h->start_ns = cw_etl__filetime_ns(h->start_time);
    h->end_ns = cw_etl__filetime_ns(h->end_time);
    size_t at = times + 32;
    at += wname(p + at, ev->len - at, h->logger_name, sizeof h->logger_name);
    if (at < ev->len) wname(p + at, ev->len - at, h->log_file_name, sizeof h->log_file_name);
    return 0;
}

/* The fast conversion's reach: |base| and |ticks * k| under 2^62, so
 * their sum fits. */
#define FAST_NS ((int64_t)1 << 62)

int cw_etl__clock_init(cw_etl__clock_t *c, const cw_etl_header_t *h)
{
    memset(c, 0, sizeof *c);
    c->system_time = h->clock_type == 2;
    c->base_ts = h->header_ts;
    c->base_ns = h->start_ns;
    if (c->system_time) {
        c->freq = 10000000;
        return 0;
    }
    /* 0 is what real-time sessions write (raw QPC); 3 counts CPU cycles at
     * a rate only the nominal speed tells. */
    if (h->clock_type == 3) c->freq = (int64_t)h->cpu_mhz * 1000000;
    else if (h->clock_type <= 1) c->freq = h->perf_freq;
    else return CW_ENOSYS;
    if (c->freq < 1 || c->freq > CW_ETL__MAX_FREQ) return CW_ERANGE;
    if (CW_NS_PER_S % c->freq == 0 && c->base_ns < FAST_NS && c->base_ns > -FAST_NS) {
        c->ns_per_tick = CW_NS_PER_S / c->freq;
        c->fast_lim = FAST_NS / c->ns_per_tick;
    }
    return 0;
}

int64_t cw_etl__clock_ns(const cw_etl__clock_t *c, uint64_t ts)
{
    if (c->system_time) return cw_etl__filetime_ns((int64_t)ts);
    /* Signed ticks from the header event, as whole seconds and a rest:
     * |r| < freq <= CW_ETL__MAX_FREQ, so r * 1e9 cannot overflow. */
    int64_t d = (int64_t)(ts - c->base_ts);
    /* d = q * freq + r and 1e9 = k * freq make the result d * k: no
     * division, and within the limits nothing below saturates. */
    if (c->ns_per_tick && d < c->fast_lim && d > -c->fast_lim) return c->base_ns + d * c->ns_per_tick;
    int64_t q = d / c->freq, r = d % c->freq;
    if (q > INT64_MAX / CW_NS_PER_S || q < INT64_MIN / CW_NS_PER_S)
        return q > 0 ? INT64_MAX : INT64_MIN;
    int64_t ns = q * CW_NS_PER_S, frac = r * CW_NS_PER_S / c->freq;
    if ((c->base_ns > 0 && ns > INT64_MAX - c->base_ns) ||
        (c->base_ns < 0 && ns < INT64_MIN - c->base_ns))
        return ns > 0 ? INT64_MAX : INT64_MIN;
    ns += c->base_ns;
    if ((frac > 0 && ns > INT64_MAX - frac) || (frac < 0 && ns < INT64_MIN - frac))
        return frac > 0 ? INT64_MAX : INT64_MIN;
    return ns + frac;
}
