/* test_common.c - base's shared helpers (common.h): growable arrays keep
 * their contents and grow geometrically, zeroed arrays hand out zeroed
 * slots, the growing buffer keeps text and binary bytes terminated and
 * formats past its capacity, bounded copies truncate and terminate, floor
 * division rounds toward -inf, little-endian bytes keep their order, the
 * frees by offsets free the owned members (and only those) of a struct, of
 * each row of an array and of a string vector, NULL ones included; the
 * key map finds what it holds, grows, and forgets all of it at a clear,
 * sparse or full, and counts its bytes. */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "commitwatch/common.h"
#include "commitwatch/error.h"
#include "commitwatch/keymap.h"
#include "commitwatch/memstat.h"
#include "commitwatch/pool.h"
#include "commitwatch/status.h"
#include "test.h"

static void test_reserve(void)
{
    uint64_t *v = NULL;
    size_t cap = 0, reallocs = 0, last = 0;
    for (size_t i = 0; i < 100000; i++) {
        ASSERT_OK(CW_RESERVE(v, cap, i + 1));
        ASSERT_TRUE(cap >= i + 1);
        if (cap != last) reallocs++, last = cap;
        v[i] = i * 7;
    }
    for (size_t i = 0; i < 100000; i++)
        if (v[i] != i * 7) CW_FAIL("slot %zu lost its value", i);
    /* Doubling: about log2(100000 / 8) growths, not one per push. */
    ASSERT_TRUE(reallocs <= 15);
    size_t before = cap;
    ASSERT_OK(CW_RESERVE(v, cap, 10)); /* room enough: nothing moves */
    ASSERT_EQ(cap, before);
    free(v);

    /* Overflowing requests fail and leave the array as it was. */
    char *c = NULL;
    size_t ccap = 0;
    ASSERT_OK(CW_RESERVE(c, ccap, 3));
    ASSERT_EQ(CW_RESERVE(c, ccap, SIZE_MAX), CW_ENOMEM);
    ASSERT_EQ(ccap, 8);
    free(c);
}

static void test_reserve_fit(void)
{
    uint32_t *v = NULL;
    size_t cap = 0;
    ASSERT_OK(CW_RESERVE(v, cap, 4096));
    for (uint32_t i = 0; i < 4096; i++)
        v[i] = i * 3;
    /* Not far larger than what it holds: kept as it is. */
    CW_RESERVE_FIT(v, cap, 2020, 64);
    ASSERT_EQ(cap, 4096);
    CW_RESERVE_FIT(v, cap, 100, 4096); /* within the slack */
    ASSERT_EQ(cap, 4096);
    /* 2 n + slack == cap: still kept; one element fewer: given back. */
    CW_RESERVE_FIT(v, cap, 2016, 64);
    ASSERT_EQ(cap, 4096);
    CW_RESERVE_FIT(v, cap, 2015, 64);
    ASSERT_EQ(cap, 2015);
    for (uint32_t i = 0; i < 2015; i++)
        if (v[i] != i * 3) CW_FAIL("element %u lost its value in the shrink", i);
    /* It grows again from there. */
    ASSERT_OK(CW_RESERVE(v, cap, 3000));
    ASSERT_TRUE(cap >= 3000);
    ASSERT_EQ(v[2014], 2014u * 3);
    /* Empty: freed. */
    CW_RESERVE_FIT(v, cap, 0, 16);
    ASSERT_TRUE(v == NULL);
    ASSERT_EQ(cap, 0);
    CW_RESERVE_FIT(v, cap, 0, 16); /* nothing there: nothing done */
    ASSERT_TRUE(v == NULL);
}

static void test_reserve_zeroed(void)
{
    int *v = NULL;
    size_t cap = 0;
    ASSERT_OK(CW_RESERVE_ZEROED(v, cap, 5));
    for (size_t i = 0; i < cap; i++)
        ASSERT_EQ(v[i], 0);
    for (size_t i = 0; i < cap; i++)
        v[i] = -1;
    size_t old = cap;
    ASSERT_OK(CW_RESERVE_ZEROED(v, cap, 1000));
    for (size_t i = 0; i < old; i++)
        ASSERT_EQ(v[i], -1);
    for (size_t i = old; i < cap; i++)
        ASSERT_EQ(v[i], 0);
    free(v);
}

static void test_strings(void)
{
    char buf[6];
    ASSERT_EQ(cw_strlcpy(buf, "hello", sizeof buf), 5);
    ASSERT_STR_EQ(buf, "hello");
    ASSERT_EQ(cw_strlcpy(buf, "hello world", sizeof buf), 11);
    ASSERT_STR_EQ(buf, "hello");
    ASSERT_EQ(cw_strlcpy(buf, "", sizeof buf), 0);
    ASSERT_STR_EQ(buf, "");
    buf[0] = 'x';
    ASSERT_EQ(cw_strlcpy(buf, "abc", 0), 3); /* size 0: nothing written */
    ASSERT_EQ(buf[0], 'x');

    char *d = cw_strdup("frame!fn");
    ASSERT_STR_EQ(d, "frame!fn");
    free(d);
    d = cw_strndup("module!function", 6);
    ASSERT_STR_EQ(d, "module");
    free(d);
    ASSERT_TRUE(cw_strdup(NULL) == NULL);

    /* The process lists' name filter. */
    ASSERT_TRUE(cw_contains_ci("MemoryTestApp.exe", "testapp"));
    ASSERT_TRUE(cw_contains_ci("MemoryTestApp.exe", "MEMORY"));
    ASSERT_TRUE(cw_contains_ci("MemoryTestApp.exe", ".EXE"));
    ASSERT_TRUE(cw_contains_ci("anything", ""));
    ASSERT_TRUE(cw_contains_ci("", ""));
    ASSERT_TRUE(!cw_contains_ci("", "a"));
    ASSERT_TRUE(!cw_contains_ci("python3", "python3.11"));
    ASSERT_TRUE(!cw_contains_ci("gcc", "gcd"));
    ASSERT_TRUE(cw_contains_ci("aab", "ab")); /* a restart one character on */
}

/* A row as the results have them: owned string and array members, one
 * borrowed (freeing it would be an invalid free under ASan), and a value;
 * what is not freed shows as a leak under LeakSanitizer. */
typedef struct owned_row {
    char *name;
    const char *borrowed;
    uint32_t *ids;
    int64_t value;
    char *tag;
} owned_row_t;

static const size_t row_owned[] = {offsetof(owned_row_t, name), offsetof(owned_row_t, ids),
                                   offsetof(owned_row_t, tag)};

static void test_free_owned(void)
{
    owned_row_t one = {cw_strdup("a"), "static", calloc(4, sizeof(uint32_t)), 7, NULL};
    ASSERT_TRUE(one.name && one.ids);
    cw_free_members(&one, row_owned, CW_ARRAY_LEN(row_owned));
    ASSERT_EQ(one.value, 7); /* only the owned members are touched */
    ASSERT_STR_EQ(one.borrowed, "static");

    owned_row_t *rows = calloc(3, sizeof *rows);
    ASSERT_TRUE(rows != NULL);
    for (int i = 0; i < 3; i++) {
        rows[i].name = cw_strdup("process");
        rows[i].borrowed = "static";
        rows[i].tag = i == 1 ? NULL : cw_strdup("tag"); /* a NULL member is skipped */
        rows[i].ids = i == 2 ? malloc(sizeof(uint32_t)) : NULL;
    }
    cw_free_rows(rows, 3, sizeof *rows, row_owned, CW_ARRAY_LEN(row_owned));
    cw_free_rows(NULL, 5, sizeof *rows, row_owned, CW_ARRAY_LEN(row_owned)); /* nothing */
    cw_free_rows(malloc(1), 0, sizeof *rows, row_owned, CW_ARRAY_LEN(row_owned));

    char **v = calloc(3, sizeof *v);
    ASSERT_TRUE(v != NULL);
    v[0] = cw_strdup("x");
    v[2] = cw_strdup("z"); /* v[1] stays NULL */
    cw_free_strv(v, 3);
    cw_free_strv(NULL, 9);
}

static void test_floor(void)
{
    ASSERT_EQ(cw_floor_to(0, 10), 0);
    ASSERT_EQ(cw_floor_to(9, 10), 0);
    ASSERT_EQ(cw_floor_to(10, 10), 10);
    ASSERT_EQ(cw_floor_to(-1, 10), -10);
    ASSERT_EQ(cw_floor_to(-10, 10), -10);
    ASSERT_EQ(cw_floor_to(-11, 10), -20);
    ASSERT_EQ(cw_floor_to(INT64_MIN, 1000000000), INT64_MIN);
    ASSERT_EQ(cw_floor_to(INT64_MAX, 1000000000), INT64_MAX - INT64_MAX % 1000000000);
    /* Against the definition, on a sweep of both signs. */
    for (int64_t t = -2500; t <= 2500; t += 7) {
        int64_t f = cw_floor_to(t, 60);
        if (!(f <= t && t < f + 60 && f % 60 == 0))
            CW_FAIL("floor(%lld, 60) = %lld", (long long)t, (long long)f);
    }
}

static void test_buf(void)
{
    cw_buf_t b = {0};
    cw_buf_put(&b, "", 0); /* an empty string, allocated */
    ASSERT_TRUE(b.p != NULL && b.n == 0 && b.p[0] == '\0');
    cw_buf_puts(&b, "ab");
    cw_buf_put(&b, "\0\x01", 2); /* binary bytes are kept */
    ASSERT_EQ(b.n, 4);
    ASSERT_TRUE(memcmp(b.p, "ab\0\x01", 4) == 0 && b.p[4] == '\0');
    /* printf past the capacity, many times: every byte is kept, in order */
    for (int i = 0; i < 1000; i++)
        cw_buf_printf(&b, "%04d:%s;", i, "x");
    ASSERT_EQ(b.n, 4 + 1000 * 7);
    ASSERT_TRUE(memcmp(b.p + 4, "0000:x;0001:x;", 14) == 0);
    ASSERT_TRUE(memcmp(b.p + b.n - 7, "0999:x;", 7) == 0 && b.p[b.n] == '\0');
    ASSERT_TRUE(!b.failed);
    free(b.p);

    /* A failed buffer stays failed and does nothing. */
    cw_buf_t f = {.failed = true};
    cw_buf_puts(&f, "ignored");
    cw_buf_printf(&f, "%d", 42);
    ASSERT_TRUE(f.p == NULL && f.n == 0 && f.failed);
}

static void test_utc_text(void)
{
    char t[CW_UTC_TEXT];
    ASSERT_STR_EQ(cw_utc_text(0, 3, t), "1970-01-01T00:00:00.000Z");
    /* date -u -d @1764599045 */
    ASSERT_STR_EQ(cw_utc_text(1764599045123456789LL, 3, t), "2025-12-01T14:24:05.123Z");
    ASSERT_STR_EQ(cw_utc_text(1764599045123456789LL, 9, t), "2025-12-01T14:24:05.123456789Z");
    ASSERT_STR_EQ(cw_utc_text(1764599045123456789LL, 0, t), "2025-12-01T14:24:05Z");
    ASSERT_STR_EQ(cw_utc_text(951782400000000000LL, 3, t),
                  "2000-02-29T00:00:00.000Z"); /* leap day */
    ASSERT_STR_EQ(cw_utc_text(-1000000, 3, t), "1969-12-31T23:59:59.999Z");
    cw_utc_text(INT64_MIN, 9, t); /* any int64 fits */
    ASSERT_TRUE(strlen(t) < CW_UTC_TEXT && t[strlen(t) - 1] == 'Z');
}

/* The memory account: set, add, read back; every component named. */
static void test_memstat(void)
{
    cw_mem_set(CW_MEM_TRACKER, 1000);
    cw_mem_add(CW_MEM_TRACKER, 24);
    cw_mem_add(CW_MEM_TRACKER, -1000);
    ASSERT_EQ(cw_mem_get(CW_MEM_TRACKER), 24);
    ASSERT_EQ(cw_mem_get(CW_MEM_STACKS), 0);
    ASSERT_EQ(cw_mem_get(CW_MEM_N), 0); /* out of range: nothing, no write */
    cw_mem_set(CW_MEM_N, 5);
    for (int c = 0; c < CW_MEM_N; c++) {
        const char *n = cw_mem_name((cw_mem_comp_t)c);
        ASSERT_TRUE(n && *n && strcmp(n, "?") != 0);
        for (int k = 0; k < c; k++)
            ASSERT_TRUE(strcmp(n, cw_mem_name((cw_mem_comp_t)k)) != 0);
    }
    ASSERT_STR_EQ(cw_mem_name(CW_MEM_PERF_QUEUE), "perf_queue");
}

/* A pool's bytes: whole chunks, counted as they are taken, kept on put. */
static void test_pool_bytes(void)
{
    cw_pool_t p;
    cw_pool_init(&p, 40, 100);
    ASSERT_EQ(cw_pool_bytes(&p), 0);
    void *o[150];
    for (int i = 0; i < 150; i++)
        ASSERT_TRUE((o[i] = cw_pool_get(&p)) != NULL);
    size_t two = cw_pool_bytes(&p);
    /* Objects are rounded up to max_align_t: 40 bytes take 48 or 64. */
    ASSERT_TRUE(two >= 2 * 100 * 40 && two <= 2 * (100 * 64 + 64));
    for (int i = 0; i < 150; i++)
        cw_pool_put(&p, o[i]);
    ASSERT_EQ(cw_pool_bytes(&p), two);
    cw_pool_destroy(&p);
    ASSERT_EQ(cw_pool_bytes(&p), 0);
    /* Rounded to max_align_t's alignment, not its size: 16-byte objects
     * take 16 each, and each is aligned for any type. */
    cw_pool_init(&p, 16, 100);
    for (int i = 0; i < 100; i++) {
        ASSERT_TRUE((o[i] = cw_pool_get(&p)) != NULL);
        ASSERT_EQ((uintptr_t)o[i] % _Alignof(max_align_t), 0);
    }
    ASSERT_TRUE(cw_pool_bytes(&p) <= 100 * 16 + 64);
    cw_pool_destroy(&p);
}

/* cw_clock_step: a step either way is reported once, by its size; drift
 * within the tolerance is not, even when it adds up. */
static void test_clock_step(void)
{
    const int64_t S = 1000000000LL, T0 = 1800000000LL * S;
    int64_t off = INT64_MIN;
    ASSERT_EQ(cw_clock_step(&off, T0, 5 * S, S), 0); /* the first call sets the offset */
    ASSERT_EQ(cw_clock_step(&off, T0 + S, 6 * S, S), 0);
    ASSERT_EQ(cw_clock_step(&off, T0 + 2 * S + 3600 * S, 7 * S, S), 3600 * S); /* forward */
    ASSERT_EQ(cw_clock_step(&off, T0 + 3 * S + 3600 * S, 8 * S, S), 0);         /* once */
    ASSERT_EQ(cw_clock_step(&off, T0 + 4 * S - 7200 * S, 9 * S, S), -10800 * S); /* back */
    /* Slewing: 0.5 s ahead per call, 20 calls: 10 s in all, never a step. */
    int64_t wall = T0 + 5 * S - 7200 * S, mono = 10 * S;
    for (int i = 0; i < 20; i++) {
        wall += S + S / 2;
        mono += S;
        ASSERT_EQ(cw_clock_step(&off, wall, mono, S), 0);
    }
    /* Exactly the tolerance is not a step; just past it is. */
    ASSERT_EQ(cw_clock_step(&off, wall + S, mono, S), 0);
    ASSERT_EQ(cw_clock_step(&off, wall + 2 * S + 1, mono, S), S + 1);
}

/* Little-endian bytes: the order is fixed (low byte first, whatever the
 * host's), only `bytes` bytes are touched, and every width reads back. */
static void test_le(void)
{
    unsigned char b[10];
    memset(b, 0xee, sizeof b);
    cw_put_le(b + 1, UINT64_C(0x0807060504030201), 8);
    for (int i = 0; i < 8; i++) ASSERT_EQ(b[1 + i], i + 1);
    ASSERT_EQ(b[0], 0xee);
    ASSERT_EQ(b[9], 0xee);
    ASSERT_EQ(cw_get_le(b + 1, 8), UINT64_C(0x0807060504030201));
    ASSERT_EQ(cw_get_le(b + 1, 4), UINT64_C(0x04030201));
    ASSERT_EQ(cw_get_le(b + 1, 1), 1);
    ASSERT_EQ(cw_get_le(b, 0), 0);
    memset(b, 0xee, sizeof b);
    cw_put_le(b, UINT64_C(0x1122334455667788), 3);
    ASSERT_EQ(b[0], 0x88);
    ASSERT_EQ(b[2], 0x66);
    ASSERT_EQ(b[3], 0xee);
    for (int w = 1; w <= 8; w++) {
        uint64_t v = UINT64_C(0xfedcba9876543210),
                 mask = w == 8 ? UINT64_MAX : (UINT64_C(1) << (8 * w)) - 1;
        cw_put_le(b, v, w);
        ASSERT_EQ(cw_get_le(b, w), v & mask);
    }
}

/* The configuration block of the status record: ok at the start, an
 * outcome published whole, and only a reload's counted as a reload done. */
static void test_status_config(void)
{
    static cw_status_t st;
    cw_status_config_t c;
    cw_status_init(&st, "replay:x", true, 42, 7);
    cw_status_config_get(&st, &c);
    ASSERT_TRUE(c.ok && !c.reload && c.error[0] == '\0' && c.line == 0);
    ASSERT_EQ(c.at_ns, 42);
    cw_status_config_t bad = {.ok = false, .line = 9, .at_ns = 50};
    cw_strlcpy(bad.error, "a.conf:9: expected `key = value`", sizeof bad.error);
    cw_strlcpy(bad.file, "a.conf", sizeof bad.file);
    cw_status_config_set(&st, &bad); /* the start's: not a reload */
    ASSERT_EQ(atomic_load(&st.config_loads_done), 0);
    bad.reload = true;
    cw_status_config_set(&st, &bad);
    ASSERT_EQ(atomic_load(&st.config_loads_done), 1);
    cw_status_config_get(&st, &c);
    ASSERT_TRUE(!c.ok && c.reload && c.line == 9);
    ASSERT_STR_EQ(c.file, "a.conf");
    ASSERT_STR_EQ(c.error, "a.conf:9: expected `key = value`");
}

/* The key map: its capacity a power of two of at least 16; dense indexes
 * in insertion order, found after growth; a clear with few keys (only
 * their slots emptied) and one with many (the whole table wiped) both
 * forget every key; its bytes follow its tables. */
static void test_keymap(void)
{
    cw_keymap_t m = {0};
    size_t slot = 8 + 8 + 4; /* k1, k2, idx */
    ASSERT_TRUE(!cw_keymap_ready(&m));
    const uint32_t asked[][2] = {{0, 16}, {6, 16}, {16, 16}, {17, 32}, {1000, 1024}};
    for (size_t i = 0; i < sizeof asked / sizeof asked[0]; i++) {
        ASSERT_EQ(cw_keymap_init(&m, asked[i][0]), 0);
        ASSERT_TRUE(cw_keymap_ready(&m));
        ASSERT_EQ(m.mask + 1, asked[i][1]);
        cw_keymap_free(&m);
        ASSERT_TRUE(!cw_keymap_ready(&m));
    }
    ASSERT_EQ(cw_keymap_init(&m, 16), 0);
    ASSERT_EQ(cw_keymap_bytes(&m), 16 * slot + 8 * 4);
    int added = 0;
    for (uint32_t round = 0; round < 3; round++) {
        uint32_t n = round == 1 ? 3 : 5000; /* round 1: a sparse clear follows */
        for (uint32_t i = 0; i < n; i++) {
            ASSERT_EQ(cw_keymap_get(&m, i * 7919u, round, &added), i);
            ASSERT_TRUE(added);
        }
        ASSERT_EQ(cw_keymap_get(&m, 0, round, &added), 0);
        ASSERT_TRUE(!added);
        for (uint32_t i = 0; i < n; i++)
            ASSERT_EQ(cw_keymap_find(&m, i * 7919u, round), i);
        ASSERT_EQ(cw_keymap_find(&m, 1, round), UINT32_MAX);
        ASSERT_EQ(m.count, n);
        size_t cap = (size_t)m.mask + 1;
        ASSERT_EQ(cw_keymap_bytes(&m), cap * slot + cap / 2 * 4);
        cw_keymap_clear(&m);
        ASSERT_EQ(m.count, 0);
        for (uint32_t i = 0; i < n; i++)
            ASSERT_EQ(cw_keymap_find(&m, i * 7919u, round), UINT32_MAX);
    }
    cw_keymap_free(&m);
    ASSERT_EQ(cw_keymap_bytes(&m), 0);
}

/* Varints: every length read back (the inline one- and two-byte paths
 * and the long one), at the end of a buffer and inside one; a varint cut
 * short at any byte, and one of more than 64 bits, refused. */
static void test_varint(void)
{
    static const uint64_t vals[] = {0,          1,          127,        128,
                                    255,        16383,      16384,      (1u << 21) - 1,
                                    1u << 21,   UINT32_MAX, 1ull << 35, (1ull << 63) - 1,
                                    1ull << 63, UINT64_MAX};
    for (size_t i = 0; i < sizeof vals / sizeof *vals; i++) {
        unsigned char b[CW_VARINT_MAX + 1];
        size_t n = cw_varint_write(b, vals[i]), pos = 0;
        uint64_t v = 0;
        size_t want = 1;
        for (uint64_t x = vals[i]; x >= 128; x >>= 7)
            want++;
        ASSERT_EQ(n, want);
        ASSERT_EQ(cw_varint_read(b, n, &pos, &v), 0); /* ends the buffer */
        ASSERT_TRUE(v == vals[i] && pos == n);
        b[n] = 0x05; /* and followed by a byte */
        pos = 0;
        ASSERT_EQ(cw_varint_read(b, n + 1, &pos, &v), 0);
        ASSERT_TRUE(v == vals[i] && pos == n);
        ASSERT_EQ(cw_varint_read(b, n + 1, &pos, &v), 0);
        ASSERT_TRUE(v == 5 && pos == n + 1);
        for (size_t cut = 0; cut < n; cut++) { /* cut short */
            pos = 0;
            ASSERT_EQ(cw_varint_read(b, cut, &pos, &v), -1);
        }
    }
    /* 2^64 (a tenth byte of 2) and an eleventh byte: more than 64 bits */
    unsigned char big[11];
    memset(big, 0x80, sizeof big);
    big[9] = 0x02;
    size_t pos = 0;
    uint64_t v;
    ASSERT_EQ(cw_varint_read(big, 10, &pos, &v), -1);
    big[9] = 0x81;
    big[10] = 0x01;
    pos = 0;
    ASSERT_EQ(cw_varint_read(big, 11, &pos, &v), -1);
    /* a read at an offset: the two-byte path reads from *pos */
    unsigned char two[] = {0x7f, 0x81, 0x01, 0xff};
    pos = 1;
    ASSERT_EQ(cw_varint_read(two, sizeof two, &pos, &v), 0);
    ASSERT_TRUE(v == 129 && pos == 3);
    ASSERT_EQ(cw_varint_read(two, sizeof two, &pos, &v), -1); /* 0xff, then the end */
}

int main(void)
{
    test_status_config();
    test_le();
    test_clock_step();
    test_memstat();
    test_pool_bytes();
    test_reserve();
    test_buf();
    test_varint();
    test_utc_text();
    test_reserve_zeroed();
    test_reserve_fit();
    test_strings();
    test_free_owned();
    test_floor();
    test_keymap();
    TEST_DONE();
}
