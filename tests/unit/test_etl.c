/* test_etl.c - the ETW kernel payload decoders and XPRESS decompression:
 * the real payload bytes of ../shared/WINDOWS.md, vectors for every
 * version and pointer size (built with tests/etlgen's builders, which
 * write the kernel's layouts), every truncation of each vector (a
 * counted skip, never a read past the end), unknown versions, the
 * VirtualAlloc flags, and XPRESS: MS-XCA's own examples, round trips
 * through the test compressor, and malformed streams. */
#include <stdint.h>
#include <string.h>

#include "commitwatch/etl.h"
#include "etl_writer.h"
#include "test.h"

#define BUF(name, size)                                                                            \
    uint8_t name##_mem[size];                                                                      \
    cw_etlw_buf_t name = {name##_mem, 0, sizeof name##_mem, false}

/* ---- the real bytes --------------------------------------------------------------- */

static void real_payloads(void)
{
    static const uint8_t va64[] = {0x00, 0x40, 0x3B, 0, 0, 0, 0, 0, 0x00, 0x60, 0, 0,
                                   0,    0,    0,    0, 0x04, 0x18, 0, 0, 0x00, 0x10, 0, 0};
    static const uint8_t vf64[] = {0x00, 0x40, 0x3B, 0, 0, 0, 0, 0, 0x00, 0xF0, 0, 0,
                                   0,    0,    0,    0, 0x04, 0x18, 0, 0, 0x00, 0x40, 0, 0};
    static const uint8_t vf32[] = {0x00, 0x00, 0x42, 0x01, 0x00, 0x00, 0x04, 0x00,
                                   0xD8, 0x0D, 0x00, 0x00, 0x00, 0x80, 0x00, 0x00};
    cw_etl_valloc_t v;
    cw_op_t ops[2];
    ASSERT_OK(cw_etl_decode_valloc(va64, sizeof va64, 2, 8, &v));
    ASSERT_U64_EQ(v.base, 0x3B4000);
    ASSERT_U64_EQ(v.size, 0x6000);
    ASSERT_EQ(v.pid, 6148);
    ASSERT_EQ(v.flags, 0x1000);
    ASSERT_EQ(cw_etl_valloc_ops(v.flags, ops), 1);
    ASSERT_EQ(ops[0], CW_OP_COMMIT);

    ASSERT_OK(cw_etl_decode_valloc(vf64, sizeof vf64, 2, 8, &v));
    ASSERT_U64_EQ(v.base, 0x3B4000);
    ASSERT_U64_EQ(v.size, 0xF000);
    ASSERT_EQ(v.pid, 6148);
    ASSERT_EQ(cw_etl_valloc_ops(v.flags, ops), 1);
    ASSERT_EQ(ops[0], CW_OP_DECOMMIT);

    ASSERT_OK(cw_etl_decode_valloc(vf32, sizeof vf32, 2, 4, &v));
    ASSERT_U64_EQ(v.base, 0x01420000);
    ASSERT_U64_EQ(v.size, 0x40000);
    ASSERT_EQ(v.pid, 3544);
    ASSERT_EQ(cw_etl_valloc_ops(v.flags, ops), 1);
    ASSERT_EQ(ops[0], CW_OP_RELEASE);

    /* Every shorter payload is malformed; other versions unknown. */
    for (size_t n = 0; n < sizeof va64; n++)
        ASSERT_EQ(cw_etl_decode_valloc(va64, n, 2, 8, &v), CW_EPARSE);
    for (size_t n = 0; n < sizeof vf32; n++)
        ASSERT_EQ(cw_etl_decode_valloc(vf32, n, 2, 4, &v), CW_EPARSE);
    ASSERT_EQ(cw_etl_decode_valloc(va64, sizeof va64, 1, 8, &v), CW_ENOSYS);
    ASSERT_EQ(cw_etl_decode_valloc(va64, sizeof va64, 3, 8, &v), CW_ENOSYS);
    ASSERT_EQ(cw_etl_decode_valloc(va64, sizeof va64, 2, 2, &v), CW_ENOSYS);
}

static void valloc_flags(void)
{
    cw_op_t ops[2];
    ASSERT_EQ(cw_etl_valloc_ops(0x3000, ops), 2); /* MEM_RESERVE | MEM_COMMIT */
    ASSERT_EQ(ops[0], CW_OP_RESERVE);
    ASSERT_EQ(ops[1], CW_OP_COMMIT);
    ASSERT_EQ(cw_etl_valloc_ops(0x2000, ops), 1);
    ASSERT_EQ(ops[0], CW_OP_RESERVE);
    ASSERT_EQ(cw_etl_valloc_ops(0x101000, ops), 1); /* MEM_COMMIT | MEM_TOP_DOWN */
    ASSERT_EQ(ops[0], CW_OP_COMMIT);
    ASSERT_EQ(cw_etl_valloc_ops(0x80000, ops), 0); /* MEM_RESET changes no figure */
    ASSERT_EQ(cw_etl_valloc_ops(0, ops), 0);
}

/* ---- vectors per version and pointer size ------------------------------------------ */

/* Every prefix of p decodes to CW_EPARSE below `min` bytes and never
 * crashes or reads past the prefix (ASan checks the last). */
#define ALL_PREFIXES(fn, p, n, ver, ptr, out, min)                                                 \
    do {                                                                                           \
        for (size_t k = 0; k < (n); k++) {                                                         \
            uint8_t *cp = malloc(k ? k : 1);                                                       \
            memcpy(cp, (p), k);                                                                    \
            int rc_ = fn(cp, k, ver, ptr, out);                                                    \
            if (k < (min)) ASSERT_EQ(rc_, CW_EPARSE);                                              \
            else ASSERT_TRUE(rc_ == 0 || rc_ == CW_EPARSE);                                        \
            free(cp);                                                                              \
        }                                                                                          \
    } while (0)

static void process_versions(void)
{
    cw_etl_process_t p;
    char cmd[64];
    for (unsigned ptr = 4; ptr <= 8; ptr += 4)
        for (unsigned ver = 3; ver <= 4; ver++) {
            BUF(b, 512);
            cw_etlw_process(&b, ver, ptr, 6248, 880, "MemoryTestApp.exe", "C:\\Tools\\M.exe -x");
            ASSERT_OK(cw_etl_decode_process(b.p, b.n, ver, ptr, &p));
            ASSERT_EQ(p.pid, 6248);
            ASSERT_EQ(p.ppid, 880);
            ASSERT_EQ(p.session, 1);
            ASSERT_EQ(p.image_len, strlen("MemoryTestApp.exe"));
            ASSERT_TRUE(memcmp(p.image, "MemoryTestApp.exe", p.image_len) == 0);
            cw_etl_utf16_to_utf8(p.cmdline, p.cmdline_units, cmd, sizeof cmd);
            ASSERT_STR_EQ(cmd, "C:\\Tools\\M.exe -x");
            /* Up to the command line's NUL every field is needed. */
            size_t need = b.n - (ver >= 4 ? 4 : 0);
            ALL_PREFIXES(cw_etl_decode_process, b.p, b.n, ver, ptr, &p, need);
            /* Version 5 (Defunct) reads as version 4 plus what follows. */
            if (ver == 4) {
                cw_etlw_u64(&b, 0x01D5EE0A00000000ull); /* an exit time */
                ASSERT_OK(cw_etl_decode_process(b.p, b.n, 5, ptr, &p));
                ASSERT_EQ(p.pid, 6248);
            }
        }
    /* Version 2 (Vista): no DirectoryTableBase, no Flags; a NULL SID. */
    BUF(b, 256);
    cw_etlw_u64(&b, 0xFFFFA0000000ull);
    cw_etlw_u32(&b, 77);
    cw_etlw_u32(&b, 4);
    cw_etlw_u32(&b, 0);
    cw_etlw_u32(&b, 0);
    cw_etlw_u32(&b, 0); /* no SID: 4 zero bytes */
    cw_etlw_astr(&b, "smss.exe");
    cw_etlw_wstr(&b, "\\SystemRoot\\System32\\smss.exe");
    ASSERT_OK(cw_etl_decode_process(b.p, b.n, 2, 8, &p));
    ASSERT_EQ(p.pid, 77);
    ASSERT_EQ(p.image_len, 8);
    ASSERT_EQ(p.cmdline_units, strlen("\\SystemRoot\\System32\\smss.exe"));
    /* Version 0 (Windows 2000): pointer-sized ids, no command line. */
    BUF(z, 64);
    cw_etlw_ptr(&z, 4, 12);
    cw_etlw_ptr(&z, 4, 8);
    cw_etlw_u32(&z, 0);
    cw_etlw_astr(&z, "a.exe");
    ASSERT_OK(cw_etl_decode_process(z.p, z.n, 0, 4, &p));
    ASSERT_EQ(p.pid, 12);
    ASSERT_EQ(p.ppid, 8);
    ASSERT_TRUE(p.cmdline == NULL);
    ASSERT_EQ(cw_etl_decode_process(b.p, b.n, 6, 8, &p), CW_ENOSYS);
    /* A SID claiming more sub-authorities than the payload holds. */
    BUF(s, 64);
    cw_etlw_u64(&s, 1);
    cw_etlw_u32(&s, 1);
    cw_etlw_u32(&s, 1);
    cw_etlw_u32(&s, 1);
    cw_etlw_u32(&s, 1);
    cw_etlw_u64(&s, 1);
    cw_etlw_u32(&s, 0); /* Flags */
    cw_etlw_u64(&s, 0xFFFF1234);
    cw_etlw_u64(&s, 0);
    cw_etlw_u8(&s, 1);
    cw_etlw_u8(&s, 200);
    ASSERT_EQ(cw_etl_decode_process(s.p, s.n, 4, 8, &p), CW_EPARSE);
}

static void image_versions(void)
{
    cw_etl_image_t im;
    char name[128];
    for (unsigned ptr = 4; ptr <= 8; ptr += 4)
        for (unsigned ver = 2; ver <= 3; ver++) {
            BUF(b, 512);
            uint64_t base = ptr == 8 ? 0x7FFE12340000ull : 0x77AB0000u;
            cw_etlw_image(&b, ver, ptr, base, 0x1A000, 6248, "C:\\Windows\\System32\\KERNELBASE.dll");
            ASSERT_OK(cw_etl_decode_image(b.p, b.n, ver, ptr, &im));
            ASSERT_U64_EQ(im.base, base);
            ASSERT_U64_EQ(im.size, 0x1A000);
            ASSERT_EQ(im.pid, 6248);
            ASSERT_EQ(im.time_date_stamp, 0x5F000000);
            cw_etl_utf16_to_utf8(im.name, im.name_units, name, sizeof name);
            ASSERT_STR_EQ(name, "C:\\Windows\\System32\\KERNELBASE.dll");
            ALL_PREFIXES(cw_etl_decode_image, b.p, b.n, ver, ptr, &im, b.n);
        }
    uint8_t z[128] = {0};
    ASSERT_EQ(cw_etl_decode_image(z, sizeof z, 1, 8, &im), CW_ENOSYS);
    ASSERT_EQ(cw_etl_decode_image(z, sizeof z, 4, 8, &im), CW_ENOSYS);
}

static void thread_versions(void)
{
    cw_etl_thread_t t;
    for (unsigned ptr = 4; ptr <= 8; ptr += 4) {
        BUF(b, 256);
        cw_etlw_thread(&b, ptr, 6248, 6252);
        for (unsigned ver = 1; ver <= 4; ver++) {
            ASSERT_OK(cw_etl_decode_thread(b.p, b.n, ver, ptr, &t));
            ASSERT_EQ(t.pid, 6248);
            ASSERT_EQ(t.tid, 6252);
        }
        ALL_PREFIXES(cw_etl_decode_thread, b.p, b.n, 3, ptr, &t, 8);
        /* Version 0 has the thread first. */
        ASSERT_OK(cw_etl_decode_thread(b.p, b.n, 0, ptr, &t));
        ASSERT_EQ(t.tid, 6248);
        ASSERT_EQ(t.pid, 6252);
        ASSERT_EQ(cw_etl_decode_thread(b.p, b.n, 5, ptr, &t), CW_ENOSYS);
    }
}

static void stack_payloads(void)
{
    for (unsigned ptr = 4; ptr <= 8; ptr += 4) {
        uint64_t fr[3] = {ptr == 8 ? 0xFFFFF80012345678ull : 0x80412345u, 0x77AB1040, 0x401000};
        cw_etl_stackwalk_t sw;
        BUF(b, 256);
        cw_etlw_stackwalk(&b, ptr, 0x123456789ull, 6248, 6252, fr, 3);
        ASSERT_OK(cw_etl_decode_stackwalk(b.p, b.n, 2, ptr, &sw));
        ASSERT_U64_EQ(sw.event_ts, 0x123456789ull);
        ASSERT_EQ(sw.pid, 6248);
        ASSERT_EQ(sw.tid, 6252);
        ASSERT_EQ(sw.nframes, 3);
        for (uint32_t i = 0; i < 3; i++) ASSERT_U64_EQ(cw_etl_frame(sw.frames, i, ptr), fr[i]);
        ASSERT_TRUE(cw_etl_kernel_address(fr[0], ptr));
        ASSERT_TRUE(!cw_etl_kernel_address(fr[1], ptr));
        /* A partial frame, and a header cut short. */
        ASSERT_EQ(cw_etl_decode_stackwalk(b.p, b.n - 1, 2, ptr, &sw), CW_EPARSE);
        ASSERT_EQ(cw_etl_decode_stackwalk(b.p, 15, 2, ptr, &sw), CW_EPARSE);
        ASSERT_OK(cw_etl_decode_stackwalk(b.p, 16, 2, ptr, &sw)); /* no frames: valid */
        ASSERT_EQ(sw.nframes, 0);
        ASSERT_EQ(cw_etl_decode_stackwalk(b.p, b.n, 3, ptr, &sw), CW_ENOSYS);

        cw_etl_stackref_t ref;
        BUF(r, 64);
        cw_etlw_stackref(&r, ptr, 0x42, 6248, 6252, 0xABCD0);
        ASSERT_OK(cw_etl_decode_stackref(r.p, r.n, 2, ptr, &ref));
        ASSERT_U64_EQ(ref.event_ts, 0x42);
        ASSERT_U64_EQ(ref.key, 0xABCD0);
        ASSERT_EQ(ref.tid, 6252);
        ALL_PREFIXES(cw_etl_decode_stackref, r.p, r.n, 2, ptr, &ref, r.n);

        cw_etl_stackdef_t def;
        BUF(k, 64);
        cw_etlw_stackdef(&k, ptr, 0xABCD0, fr + 1, 2);
        ASSERT_OK(cw_etl_decode_stackdef(k.p, k.n, 2, ptr, &def));
        ASSERT_U64_EQ(def.key, 0xABCD0);
        ASSERT_EQ(def.nframes, 2);
        ASSERT_U64_EQ(cw_etl_frame(def.frames, 1, ptr), 0x401000);
        ASSERT_EQ(cw_etl_decode_stackdef(k.p, ptr - 1, 2, ptr, &def), CW_EPARSE);
        ASSERT_EQ(cw_etl_decode_stackdef(k.p, k.n - 1, 2, ptr, &def), CW_EPARSE);
    }
}

static void names_and_text(void)
{
    char buf[16];
    ASSERT_STR_EQ(cw_etl_class_name(0x03, 10, buf), "Image"); /* 0x030A is an image load */
    ASSERT_STR_EQ(cw_etl_class_name(0x03, 1, buf), "Process");
    ASSERT_STR_EQ(cw_etl_class_name(0x02, 98, buf), "PageFault");
    ASSERT_STR_EQ(cw_etl_class_name(0xEE, 1, buf), "Group0xEE");
    ASSERT_STR_EQ(cw_etl_type_name(0x02, 98), "VirtualAlloc");
    ASSERT_STR_EQ(cw_etl_type_name(0x18, 37), "StackKeyKernel");
    ASSERT_TRUE(cw_etl_type_name(0x02, 200) == NULL);
    /* UTF-16: a surrogate pair, a lone surrogate, and a cut at a character. */
    const uint8_t w[] = {'a', 0, 0x3D, 0xD8, 0x00, 0xDE, 0x00, 0xDC, 0xE9, 0x00};
    char out[32];
    ASSERT_EQ(cw_etl_utf16_to_utf8(w, 5, out, sizeof out), 1 + 4 + 3 + 2);
    ASSERT_STR_EQ(out, "a\xF0\x9F\x98\x80\xEF\xBF\xBD\xC3\xA9");
    ASSERT_EQ(cw_etl_utf16_to_utf8(w, 5, out, 4), 1); /* the emoji does not fit in 3 */
    ASSERT_STR_EQ(out, "a");
}

/* ---- XPRESS ------------------------------------------------------------------------- */

static void xpress_spec(void)
{
    /* MS-XCA 3.1: 26 literals. */
    uint8_t in1[30] = {0x3f, 0, 0, 0};
    for (int i = 0; i < 26; i++) in1[4 + i] = (uint8_t)('a' + i);
    uint8_t out[512];
    size_t n = 0;
    ASSERT_OK(cw_etl_xpress_decompress(in1, sizeof in1, out, sizeof out, &n));
    ASSERT_EQ(n, 26);
    ASSERT_TRUE(memcmp(out, "abcdefghijklmnopqrstuvwxyz", 26) == 0);
    /* MS-XCA 3.1: "abc" 100 times: three literals and one match of 297
     * (length 7, nibble 15, byte 255, u16 294). */
    static const uint8_t in2[] = {0xff, 0xff, 0xff, 0x1f, 0x61, 0x62, 0x63,
                                  0x17, 0x00, 0x0f, 0xff, 0x26, 0x01};
    ASSERT_OK(cw_etl_xpress_decompress(in2, sizeof in2, out, sizeof out, &n));
    ASSERT_EQ(n, 300);
    for (int i = 0; i < 300; i++) ASSERT_EQ(out[i], "abc"[i % 3]);
    /* The same with no room for it, and cut inside the match. */
    ASSERT_EQ(cw_etl_xpress_decompress(in2, sizeof in2, out, 299, &n), CW_EPARSE);
    ASSERT_EQ(cw_etl_xpress_decompress(in2, sizeof in2 - 1, out, sizeof out, &n), CW_EPARSE);
    ASSERT_EQ(cw_etl_xpress_decompress(in2, 8, out, sizeof out, &n), CW_EPARSE);
    /* A match before the start of the output. */
    static const uint8_t bad[] = {0x00, 0x00, 0x00, 0x80, 0x08, 0x00};
    ASSERT_EQ(cw_etl_xpress_decompress(bad, sizeof bad, out, sizeof out, &n), CW_EPARSE);
    /* A flag word cut short. */
    ASSERT_EQ(cw_etl_xpress_decompress(in2, 3, out, sizeof out, &n), CW_EPARSE);
    ASSERT_OK(cw_etl_xpress_decompress(in2, 0, out, sizeof out, &n));
    ASSERT_EQ(n, 0);
}

static uint64_t rng = 0x9E3779B97F4A7C15ull;
static uint32_t next_rand(void)
{
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return (uint32_t)rng;
}

static void xpress_roundtrip(size_t n, int kind)
{
    uint8_t *in = malloc(n ? n : 1), *z = malloc(2 * n + 64), *out = malloc(n + 1);
    for (size_t i = 0; i < n; i++) {
        switch (kind) {
        case 0: in[i] = 0; break;                               /* one long run */
        case 1: in[i] = (uint8_t)next_rand(); break;            /* incompressible */
        case 2: in[i] = (uint8_t)"event trace "[i % 12]; break; /* short repeats */
        case 3: in[i] = (next_rand() % 8) ? (uint8_t)(i / 37) : (uint8_t)next_rand(); break;
        default: /* blocks of 150 bytes, every other one a copy of the one before:
                  * matches of 150 with a one-byte length, far from the ends */
            in[i] = (i / 150) % 2 ? in[i - 150] : (uint8_t)next_rand();
            break;
        }
    }
    size_t zn = cw_etlw_xpress(in, n, z, 2 * n + 64), got = 0;
    ASSERT_TRUE(zn > 0);
    ASSERT_OK(cw_etl_xpress_decompress(z, zn, out, n + 1, &got));
    ASSERT_EQ(got, n);
    ASSERT_TRUE(memcmp(in, out, n) == 0);
    /* Too little room for the output, by a little or by a half: an error
     * and a prefix of the data, never a byte written past the room. */
    size_t short_by[] = {1, n / 2};
    for (int k = 0; k < 2; k++) {
        if (short_by[k] == 0 || short_by[k] > n) continue;
        size_t room = n - short_by[k];
        memset(out, 0xA5, n + 1);
        ASSERT_EQ(cw_etl_xpress_decompress(z, zn, out, room, &got), CW_EPARSE);
        ASSERT_TRUE(got <= room && memcmp(in, out, got) == 0);
        ASSERT_TRUE(out[room] == 0xA5);
    }
    /* Every truncation fails or gives a prefix of the data, never more. */
    for (size_t cut = 0; cut < zn && cut < 64; cut++) {
        int rc = cw_etl_xpress_decompress(z, cut, out, n + 1, &got);
        ASSERT_TRUE(rc == 0 || rc == CW_EPARSE);
        ASSERT_TRUE(got <= n && memcmp(in, out, got) == 0);
    }
    free(in);
    free(z);
    free(out);
}

int main(void)
{
    real_payloads();
    valloc_flags();
    process_versions();
    image_versions();
    thread_versions();
    stack_payloads();
    names_and_text();
    xpress_spec();
    size_t sizes[] = {0, 1, 3, 31, 32, 33, 4096, 65536, 300000};
    for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++)
        for (int kind = 0; kind < 5; kind++) xpress_roundtrip(sizes[i], kind);
    TEST_DONE();
}
