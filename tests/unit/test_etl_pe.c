/* test_etl_pe.c - the export-table reader (service/sources/etl/pe.c) and
 * `--images DIR` (images.c):
 *
 * - a real DLL built by MinGW (tests/fixtures/pe/kernelbase.c, built by
 *   tests/etlgen/CMakeLists.txt) read as `x86_64-w64-mingw32-objdump -p`
 *   reads it: every export's RVA and name or ordinal, the forwarder and
 *   the data export left out;
 * - PE32 and PE32+ images from the tests' writer (tests/etlgen/pe_writer.c)
 *   with names of any bytes, aliases, ordinal-only exports; the nearest
 *   export at or below an address and its bounds;
 * - damaged copies of both: every truncation, every byte changed to three
 *   values, and hostile counts: refused or read, never a read outside the
 *   bytes (run under ASan) and always a consistent table;
 * - the images folder: names compared without case, a file that is not a
 *   PE warned about and left, a missing folder refused. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pe_writer.h"
#include "sources/etl/etl_internal.h"
#include "sources/etl/pe.h"
#include "test.h"

#ifndef CW_PE_FIXTURE_DIR
#define CW_PE_FIXTURE_DIR ""
#endif

static char dir[1024];

static uint8_t *slurp(const char *path, size_t *len)
{
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    size_t cap = 1 << 16, n = 0;
    uint8_t *b = malloc(cap);
    for (size_t got; b && (got = fread(b + n, 1, cap - n, f)) > 0;) {
        n += got;
        if (n == cap) b = realloc(b, cap *= 2);
    }
    fclose(f);
    *len = n;
    return b;
}

/* A table that is whatever parse gave: sorted, bounded, names inside. */
static void check_consistent(const cw_etl__pe_t *pe)
{
    for (size_t i = 0; i < pe->n; i++) {
        const cw_etl__pe_export_t *e = &pe->ex[i];
        ASSERT_TRUE(e->name < pe->names_len);
        ASSERT_TRUE(strlen(pe->names + e->name) <= CW_ETL__PE_NAME_MAX);
        ASSERT_TRUE(e->end > e->rva);
        if (i) ASSERT_TRUE(pe->ex[i - 1].rva < e->rva);
        uint64_t off = 99;
        ASSERT_STR_EQ(cw_etl__pe_lookup(pe, e->rva, &off), pe->names + e->name);
        ASSERT_U64_EQ(off, 0);
    }
}

/* Damaged copies of b: truncated at every length, each byte set to three
 * other values. */
static void damage(const uint8_t *b, size_t len)
{
    uint8_t *c = malloc(len);
    size_t parsed = 0;
    for (size_t n = 0; n < len; n++) {
        memcpy(c, b, n);
        uint8_t *t = malloc(n ? n : 1); /* exactly n bytes: ASan sees a read past them */
        memcpy(t, c, n);
        cw_etl__pe_t pe;
        int rc = cw_etl__pe_parse(t, n, &pe);
        ASSERT_TRUE(rc == 0 || rc == CW_EPARSE);
        if (rc == 0) parsed++;
        check_consistent(&pe);
        cw_etl__pe_free(&pe);
        free(t);
    }
    for (size_t i = 0; i < len; i++) {
        static const uint8_t vals[] = {0x00, 0xFF, 0x80};
        memcpy(c, b, len);
        for (size_t v = 0; v < 3; v++) {
            c[i] = b[i] == vals[v] ? (uint8_t)(vals[v] ^ 0x41) : vals[v];
            cw_etl__pe_t pe;
            int rc = cw_etl__pe_parse(c, len, &pe);
            ASSERT_TRUE(rc == 0 || rc == CW_EPARSE);
            check_consistent(&pe);
            uint64_t off;
            for (uint64_t a = 0; a < 0x3000; a += 0x123) cw_etl__pe_lookup(&pe, a, &off);
            cw_etl__pe_free(&pe);
        }
    }
    printf("  %zu damaged copies (%zu truncations read)\n", len + 3 * len, parsed);
    free(c);
}

/* ---- a real DLL, as objdump reads it ------------------------------------------- */

typedef struct slot {
    uint32_t rva;
    int kind; /* 1 export, 2 forwarder */
    char name[128];
} slot_t;

/* objdump -p's export address table and name table. */
static size_t objdump_exports(const char *path, slot_t *s, size_t max, uint32_t *base)
{
    FILE *f = fopen(path, "r");
    ASSERT_TRUE(f != NULL);
    char line[512];
    size_t n = 0;
    int part = 0;
    while (fgets(line, sizeof line, f)) {
        unsigned i, ord, rva;
        char kind[32], name[128];
        if (strstr(line, "Export Address Table -- Ordinal Base")) {
            sscanf(strstr(line, "Base") + 4, "%u", base);
            part = 1;
        } else if (strstr(line, "[Ordinal/Name Pointer] Table")) {
            part = 2;
        } else if (part == 1 && sscanf(line, " [%u] +base[%u] %x %31s", &i, &ord, &rva, kind) == 4 &&
                   i < max) {
            s[i].rva = rva;
            s[i].kind = strcmp(kind, "Export") == 0 ? 1 : 2;
            if (i + 1 > n) n = i + 1;
        } else if (part == 2 && sscanf(line, " [%u] %127s", &i, name) == 2 && i < max) {
            if (!s[i].name[0]) snprintf(s[i].name, sizeof s[i].name, "%s", name);
        } else if (part == 2 && line[0] != '\t' && line[0] != '\n') {
            part = 0;
        }
    }
    fclose(f);
    return n;
}

static void test_real_dll(void)
{
    if (!CW_PE_FIXTURE_DIR[0]) {
        TEST_SKIP_PART("the real DLL's exports: no MinGW to build the test DLL "
                       "(x86_64-w64-mingw32-gcc, -objdump)");
        return;
    }
    char dll[1200], txt[1200];
    snprintf(dll, sizeof dll, "%s/KernelBase.dll", CW_PE_FIXTURE_DIR);
    snprintf(txt, sizeof txt, "%s/KernelBase.objdump.txt", CW_PE_FIXTURE_DIR);
    slot_t s[64];
    memset(s, 0, sizeof s);
    uint32_t base = 0;
    size_t ns = objdump_exports(txt, s, 64, &base);
    ASSERT_EQ(ns, 7);

    cw_etl__pe_t pe;
    ASSERT_OK(cw_etl__pe_read(dll, &pe));
    ASSERT_EQ(pe.machine, 0x8664);
    ASSERT_EQ(pe.pe32plus, 1);
    ASSERT_EQ(pe.forwarders, 1); /* BaseForwarded = ntdll.RtlAllocateHeap */
    ASSERT_EQ(pe.data, 1);       /* BaseDataExport */
    ASSERT_EQ(pe.bad, 0);
    check_consistent(&pe);
    /* Every code export objdump lists, by RVA, with its name or ordinal. */
    size_t found = 0;
    for (size_t i = 0; i < ns; i++) {
        if (s[i].kind != 1 || strcmp(s[i].name, "BaseDataExport") == 0) continue;
        uint64_t off = 1;
        const char *name = cw_etl__pe_lookup(&pe, s[i].rva, &off);
        char want[160];
        if (s[i].name[0]) snprintf(want, sizeof want, "%s", s[i].name);
        else snprintf(want, sizeof want, "Ordinal%u", base + (uint32_t)i);
        ASSERT_STR_EQ(name, want);
        ASSERT_U64_EQ(off, 0);
        found++;
    }
    ASSERT_EQ(found, 5);
    ASSERT_EQ(pe.n, found);
    ASSERT_STR_EQ(pe.names + pe.ex[pe.n - 1].name, "Ordinal100"); /* the NONAME one */
    /* Inside a function: the export and the offset past it. */
    uint64_t off;
    const cw_etl__pe_export_t *va = NULL;
    for (size_t i = 0; i < pe.n; i++)
        if (strcmp(pe.names + pe.ex[i].name, "VirtualAlloc") == 0) va = &pe.ex[i];
    ASSERT_TRUE(va != NULL);
    ASSERT_STR_EQ(cw_etl__pe_lookup(&pe, va->rva + 3, &off), "VirtualAlloc");
    ASSERT_U64_EQ(off, 3);
    ASSERT_TRUE(cw_etl__pe_lookup(&pe, pe.ex[0].rva - 1, &off) == NULL); /* before every export */
    ASSERT_TRUE(cw_etl__pe_lookup(&pe, pe.image_size, &off) == NULL);    /* past the image */
    ASSERT_TRUE(cw_etl__pe_lookup(&pe, 0x2000, &off) == NULL); /* the data section */
    cw_etl__pe_free(&pe);
    printf("  %s: %zu exports as objdump -p lists them\n", dll, found);

    size_t len;
    uint8_t *b = slurp(dll, &len);
    ASSERT_TRUE(b != NULL);
    damage(b, len);
    free(b);
}

/* ---- the writer's images: PE32 and PE32+ ------------------------------------------ */

static void test_written(int plus)
{
    static const cw_pew_export_t ex[] = {
        {"operator new", 0x1040},
        {"LRPC_ADDRESS::ProcessIO", 0x1000},
        {NULL, 0x1100},     /* ordinal 3, no name */
        {"Zalias", 0x1080}, /* two names for one address: the lower in byte order stays */
        {"Alias", 0x1080},
        {"Last", 0x1200},
    };
    size_t len;
    uint8_t *b = cw_pew_build("RPCRT4.dll", plus, ex, sizeof ex / sizeof ex[0], 0, &len);
    ASSERT_TRUE(b != NULL);
    cw_etl__pe_t pe;
    ASSERT_OK(cw_etl__pe_parse(b, len, &pe));
    check_consistent(&pe);
    ASSERT_EQ(pe.pe32plus, plus);
    ASSERT_EQ(pe.machine, plus ? 0x8664 : 0x14C);
    ASSERT_EQ(pe.n, 5);
    uint64_t off;
    ASSERT_STR_EQ(cw_etl__pe_lookup(&pe, 0x1000, &off), "LRPC_ADDRESS::ProcessIO");
    ASSERT_U64_EQ(off, 0);
    ASSERT_STR_EQ(cw_etl__pe_lookup(&pe, 0x103F, &off), "LRPC_ADDRESS::ProcessIO");
    ASSERT_U64_EQ(off, 0x3F);
    ASSERT_STR_EQ(cw_etl__pe_lookup(&pe, 0x1041, &off), "operator new");
    ASSERT_U64_EQ(off, 1);
    ASSERT_STR_EQ(cw_etl__pe_lookup(&pe, 0x1080, &off), "Alias");
    ASSERT_STR_EQ(cw_etl__pe_lookup(&pe, 0x1101, &off), "Ordinal3");
    ASSERT_STR_EQ(cw_etl__pe_lookup(&pe, 0x120F, &off), "Last"); /* the end of .text */
    ASSERT_U64_EQ(off, 0xF);
    ASSERT_TRUE(cw_etl__pe_lookup(&pe, 0x1210, &off) == NULL); /* past the code section */
    ASSERT_TRUE(cw_etl__pe_lookup(&pe, 0xFFF, &off) == NULL);
    ASSERT_TRUE(cw_etl__pe_lookup(&pe, UINT64_MAX, &off) == NULL);
    cw_etl__pe_free(&pe);

    /* Hostile counts and offsets in an otherwise good image. */
    uint32_t lfanew = 0x80, opt = lfanew + 24, dirs = opt + (plus ? 112 : 96);
    uint32_t exp_rva = b[dirs] | b[dirs + 1] << 8 | (uint32_t)b[dirs + 2] << 16;
    uint32_t edata_off = 0x400 + (b[opt + 4] | b[opt + 5] << 8); /* headers + SizeOfCode */
    (void)exp_rva;
    struct {
        uint32_t at;
        uint32_t val;
        int bytes;
    } hits[] = {
        {0x3C, 0xFFFFFFF0u, 4},         /* e_lfanew past the file */
        {lfanew + 6, 0xFFFF, 2},        /* 65535 sections */
        {lfanew + 20, 0xFFFF, 2},       /* an optional header larger than the file */
        {dirs, 0xFFFFFFF0u, 4},         /* the export directory nowhere */
        {edata_off + 20, 0xFFFFFFFFu, 4}, /* 4 G functions */
        {edata_off + 24, 0x00FFFFFFu, 4}, /* 16 M names */
        {edata_off + 28, 0x7FFFFFF0u, 4}, /* the function table nowhere */
        {edata_off + 32, 0x7FFFFFF0u, 4}, /* the name table nowhere */
    };
    for (size_t i = 0; i < sizeof hits / sizeof hits[0]; i++) {
        uint8_t *c = malloc(len);
        memcpy(c, b, len);
        for (int k = 0; k < hits[i].bytes; k++) c[hits[i].at + (uint32_t)k] = (uint8_t)(hits[i].val >> (8 * k));
        ASSERT_EQ(cw_etl__pe_parse(c, len, &pe), CW_EPARSE);
        ASSERT_EQ(pe.n, 0);
        free(c);
    }
    /* Not a PE at all. */
    ASSERT_EQ(cw_etl__pe_parse((const uint8_t *)"MZ", 2, &pe), CW_EPARSE);
    ASSERT_EQ(cw_etl__pe_parse((const uint8_t *)"not an image at all, but long enough to have "
                                                "an e_lfanew field in it somewhere........",
                               86, &pe),
              CW_EPARSE);
    damage(b, len);
    free(b);
}

/* ---- the images folder ------------------------------------------------------------ */

static void test_images(void)
{
    char d[1200], p[1300];
    snprintf(d, sizeof d, "%s/test_etl_pe_images", dir);
    /* A fresh folder each run; its files are overwritten. */
    char cmdline[1400];
#ifdef _WIN32
    snprintf(cmdline, sizeof cmdline, "mkdir \"%s\" 2>nul", d);
#else
    snprintf(cmdline, sizeof cmdline, "mkdir -p '%s'", d);
#endif
    ASSERT_TRUE(system(cmdline) >= 0);
    static const cw_pew_export_t ex[] = {{"RtlAllocateHeap", 0x1000}, {"RtlFreeHeap", 0x1040}};
    snprintf(p, sizeof p, "%s/NtDll.DLL", d);
    ASSERT_OK(cw_pew_write(p, "ntdll.dll", true, ex, 2, 0x100000));
    snprintf(p, sizeof p, "%s/junk.dll", d);
    FILE *f = fopen(p, "wb");
    ASSERT_TRUE(f != NULL);
    fputs("MZ but nothing else", f);
    fclose(f);

    cw_etl__images_t *im;
    cw_diag_t diag = {{0}};
    ASSERT_OK(cw_etl__images_open(d, &im, &diag));
    char buf[256];
    cw_etl__module_t nt = {0x7FF800000000ull, 0x100000, "ntdll.dll", 0, 1};
    ASSERT_EQ(cw_etl__images_name(im, &nt, 0x1000, buf, sizeof buf), strlen("RtlAllocateHeap"));
    ASSERT_STR_EQ(buf, "RtlAllocateHeap");
    ASSERT_TRUE(cw_etl__images_name(im, &nt, 0x1047, buf, sizeof buf) > 0);
    ASSERT_STR_EQ(buf, "RtlFreeHeap+0x7");
    ASSERT_EQ(cw_etl__images_name(im, &nt, 0x10, buf, sizeof buf), 0);
    /* Another size than the file's: another version, not named. */
    cw_etl__module_t other = {0x7FF800000000ull, 0x180000, "ntdll.dll", 0, 4};
    ASSERT_EQ(cw_etl__images_name(im, &other, 0x1000, buf, sizeof buf), 0);
    cw_etl__module_t junk = {0x7FF900000000ull, 0x100000, "junk.dll", 0, 2};
    ASSERT_EQ(cw_etl__images_name(im, &junk, 0x1000, buf, sizeof buf), 0); /* warned once */
    ASSERT_EQ(cw_etl__images_name(im, &junk, 0x1000, buf, sizeof buf), 0);
    cw_etl__module_t none = {0x7FFA00000000ull, 0x100000, "kernel32.dll", 0, 3};
    ASSERT_EQ(cw_etl__images_name(im, &none, 0x1000, buf, sizeof buf), 0);
    size_t files, read;
    uint64_t named;
    cw_etl__images_stats(im, &files, &read, &named);
    ASSERT_EQ(files, 2);
    ASSERT_EQ(read, 1);
    ASSERT_U64_EQ(named, 2);
    cw_etl__images_close(im);

    snprintf(p, sizeof p, "%s/no-such-folder", d);
    ASSERT_EQ(cw_etl__images_open(p, &im, &diag), CW_ENOENT);
    ASSERT_TRUE(strstr(diag.msg, "no-such-folder") != NULL);
}

int main(void)
{
    const char *build = getenv("CW_BUILD");
    snprintf(dir, sizeof dir, "%s", build ? build : ".");
    printf("real DLL\n");
    test_real_dll();
    printf("PE32+ from the writer\n");
    test_written(1);
    printf("PE32 from the writer\n");
    test_written(0);
    printf("images folder\n");
    test_images();
    TEST_DONE();
}
