/* common.h - small helpers every stage shares (service/base/common.c):
 * the printf-format attribute, floor division for bucket arithmetic, a
 * growable-array reserve, a growing byte buffer, bounded string copies,
 * little-endian integers in bytes and the freeing of owned members by a
 * table of offsets. One copy of each, so no file writes its own.
 *
 * Thread: all of these are reentrant. */
#ifndef COMMITWATCH_COMMON_H
#define COMMITWATCH_COMMON_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

/* printf-style argument checking. MinGW reads plain `printf` as the
 * Microsoft format (no %zu, %lld), so it checks against gnu_printf there
 * (the build sets __USE_MINGW_ANSI_STDIO=1, whose printf implements it). */
#if defined(__MINGW32__)
#define CW_PRINTF(fmt, args) __attribute__((format(gnu_printf, fmt, args)))
#elif defined(__GNUC__)
#define CW_PRINTF(fmt, args) __attribute__((format(printf, fmt, args)))
#else
#define CW_PRINTF(fmt, args)
#endif

#define CW_ARRAY_LEN(a) (sizeof(a) / sizeof((a)[0]))

/* Room for a path in a buffer (longer paths are refused, never cut). */
#define CW_PATH_MAX 4096

/* Nanoseconds in a second: every time in commitwatch is int64_t ns. */
#define CW_NS_PER_S INT64_C(1000000000)

/* The start of the width-w bucket holding t (rounds toward -inf; w > 0).
 * INT64_MIN stays INT64_MIN. */
static inline int64_t cw_floor_to(int64_t t, int64_t w)
{
    if (t == INT64_MIN) return t;
    int64_t r = t % w;
    return r < 0 ? t - r - w : t - r;
}

/* Little-endian integers of `bytes` bytes (1 - 8) to and from a byte
 * array, whatever the host's order: the pending-batch journal, the batch
 * bytes and the journald protocol's lengths are written this way. */
static inline void cw_put_le(unsigned char *p, uint64_t v, int bytes)
{
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
    memcpy(p, &v, (size_t)bytes); /* one store where bytes is a constant */
#else
    for (int i = 0; i < bytes; i++) p[i] = (unsigned char)(v >> (8 * i));
#endif
}

static inline uint64_t cw_get_le(const unsigned char *p, int bytes)
{
    uint64_t v = 0;
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
    memcpy(&v, p, (size_t)bytes);
#else
    for (int i = 0; i < bytes; i++) v |= (uint64_t)p[i] << (8 * i);
#endif
    return v;
}

/* Watches the wall clock against the monotonic one for steps (NTP setting
 * the time, an administrator's `date -s`). *offset holds wall - mono as
 * last seen (INT64_MIN before the first call). Returns how far the wall
 * clock jumped since the last call (positive: forward) when that is more
 * than tolerance_ns either way, else 0; *offset follows the clocks on
 * every call, so slewing (NTP's gradual correction) never adds up to a
 * step. */
int64_t cw_clock_step(int64_t *offset, int64_t wall_ns, int64_t mono_ns, int64_t tolerance_ns);

/* Makes room for at least `need` elements of `elem` bytes in the array
 * *items of capacity *cap, doubling (from at least 8). On success *items and
 * *cap may change; on failure both are unchanged. 0 or CW_ENOMEM. */
int cw_reserve(void *items, size_t *cap, size_t need, size_t elem);
/* The typed form, for `T *v; size_t cap`: CW_RESERVE(v, cap, n + 1). The
 * common case (room enough) costs one comparison. */
#define CW_RESERVE(v, cap, need)                                                                   \
    ((size_t)(need) <= (cap) ? 0 : cw_reserve(&(v), &(cap), (need), sizeof *(v)))

/* Gives back the room of an array far larger than the n elements it holds
 * now (a burst is over): when *cap passes 2 n + slack, *items is
 * reallocated to n elements (freed, NULL, at n == 0) and *cap set to n.
 * The first n elements are kept. If realloc fails nothing changes (the
 * room is only kept longer). */
void cw_reserve_fit(void *items, size_t *cap, size_t n, size_t slack, size_t elem);
#define CW_RESERVE_FIT(v, cap, n, slack) cw_reserve_fit(&(v), &(cap), (n), (slack), sizeof *(v))

/* A growing byte buffer (text or binary), zero-initialised: `cw_buf_t b =
 * {0}`. p stays NUL-terminated after its n bytes once anything was put;
 * after an allocation failure every later call does nothing and failed
 * stays set. The owner frees p. */
typedef struct cw_buf {
    char *p;
    size_t n, cap;
    bool failed;
} cw_buf_t;
void cw_buf_put(cw_buf_t *b, const void *s, size_t n);
void cw_buf_puts(cw_buf_t *b, const char *s);
void cw_buf_printf(cw_buf_t *b, const char *fmt, ...) CW_PRINTF(2, 3);

/* Unsigned LEB128 varints (7 bits a byte, low first; at most 10 bytes):
 * cw_varint_write writes v at out (room for CW_VARINT_MAX bytes) and
 * returns the bytes written; cw_buf_varint appends it to b; cw_varint_read
 * reads one at *pos of buf[len] and moves *pos past it: 0, or -1 when it
 * is cut short or holds more than 64 bits. cw_zigzag maps a signed value
 * to an unsigned one that is small when |v| is (0, -1, 1, -2 ... ->
 * 0, 1, 2, 3 ...); cw_unzigzag undoes it. */
#define CW_VARINT_MAX 10
size_t cw_varint_write(unsigned char *out, uint64_t v);
void cw_buf_varint(cw_buf_t *b, uint64_t v);
int cw_varint_read_long(const unsigned char *buf, size_t len, size_t *pos, uint64_t *out);
/* A varint of one or two bytes (under 16,384: most of a cell's figures)
 * is read here, inline; a longer one by cw_varint_read_long. */
static inline int cw_varint_read(const unsigned char *buf, size_t len, size_t *pos, uint64_t *out)
{
    size_t i = *pos;
    if (i < len && buf[i] < 0x80) {
        *out = buf[i];
        *pos = i + 1;
        return 0;
    }
    if (i + 1 < len && buf[i + 1] < 0x80) {
        *out = (uint64_t)(buf[i] & 0x7f) | (uint64_t)buf[i + 1] << 7;
        *pos = i + 2;
        return 0;
    }
    return cw_varint_read_long(buf, len, pos, out);
}
static inline uint64_t cw_zigzag(int64_t v)
{
    return ((uint64_t)v << 1) ^ (uint64_t)(v < 0 ? -1 : 0);
}
static inline int64_t cw_unzigzag(uint64_t u)
{
    return (int64_t)(u >> 1) ^ -(int64_t)(u & 1);
}

/* The same for an array indexed by id, whose slots must start zeroed:
 * slots from the old capacity up to the new one are zero-filled. */
int cw_reserve_zeroed(void *items, size_t *cap, size_t need, size_t elem);
#define CW_RESERVE_ZEROED(v, cap, need)                                                            \
    ((size_t)(need) <= (cap) ? 0 : cw_reserve_zeroed(&(v), &(cap), (need), sizeof *(v)))

/* Whether hay contains needle, ASCII letters matched in either case (an
 * empty needle: always). The process lists' name filter. */
bool cw_contains_ci(const char *hay, const char *needle);

/* Values of the configuration and of the alert rules (service/base/units.c).
 * "90s", "15m", "26h", "35d", "500ms" or plain nanoseconds -> ns. 0 or -1. */
int cw_parse_duration(const char *s, int64_t *ns);
/* "512MiB", "2GiB", "1GB", "4096" -> bytes. 0 or -1. */
int cw_parse_size(const char *s, uint64_t *bytes);

/* Unix ns as a proleptic Gregorian UTC date and time (H. Hinnant's
 * civil_from_days): computed here because gmtime differs between the C
 * libraries (and MinGW has no gmtime_r). nsec is 0..999999999. Pure. */
typedef struct cw_utc {
    int64_t year;
    int month, day, hour, min, sec;
    int64_t nsec;
} cw_utc_t;
void cw_utc_from_ns(int64_t ns, cw_utc_t *out);
/* The same as RFC 3339 text, "2025-12-01T14:24:05.123Z", with 3 (ms, as
 * Alertmanager) or 9 (ns) fraction digits (others are clamped to 0..9),
 * into out (CW_UTC_TEXT bytes: room for any int64). Returns out. */
#define CW_UTC_TEXT 96
const char *cw_utc_text(int64_t ns, int frac_digits, char out[CW_UTC_TEXT]);

/* Copies src into dst[size] truncating, always NUL-terminated when
 * size > 0. Returns strlen(src) (>= size means truncated). */
size_t cw_strlcpy(char *dst, const char *src, size_t size);
/* Cuts the blanks (isspace) at the end of s in place and returns s past
 * those at its start. */
char *cw_strtrim(char *s);
/* malloc'd copy of s, or of its first n bytes; NULL on ENOMEM (or s NULL). */
char *cw_strdup(const char *s);
char *cw_strndup(const char *s, size_t n);

/* Freeing what a struct owns, by a table of the offsets of its owned
 * pointer members (malloc'd strings or arrays, each owned by the struct, or
 * NULL), so a type's free function lists its members once, as data:
 *
 *     static const size_t row_owned[] = {offsetof(row_t, name), offsetof(row_t, tag)};
 *     cw_free_members(r, row_owned, CW_ARRAY_LEN(row_owned));
 *
 * Each offset must be that of a pointer member (any object pointer type).
 * The members are freed, not cleared. */
void cw_free_members(void *obj, const size_t *offs, size_t noffs);
/* The members at offs of each of the n rows of `size` bytes at rows, then
 * rows itself: an owned array of rows that own their members. rows may be
 * NULL (then n is not read). */
void cw_free_rows(void *rows, size_t n, size_t size, const size_t *offs, size_t noffs);
/* Frees the n strings of v (NULL ones included) and then v; v may be NULL
 * (then n is not read). */
void cw_free_strv(char **v, size_t n);

#endif
