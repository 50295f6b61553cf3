/* test_etw_syms.c - DbgHelp names the live source's frames
 * (service/sources/etw/symbols.c), Windows only (under Wine in the
 * Windows build's ctest: Wine's dbghelp reads PE exports too): the test
 * DLL built by MinGW (tests/fixtures/pe/kernelbase.c) is registered as
 * the kernel names an image, and an address in it is named by its export,
 * directly and through the reader's frame cache (the symbolizer hook);
 * an image that cannot be loaded leaves its frames unnamed. */
#include <windows.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "commitwatch/platform_win.h"
#include "sources/etl/etl_internal.h"
#include "sources/etl/pe.h"
#include "sources/etw/etw_internal.h"
#include "test.h"

#ifndef CW_PE_FIXTURE_DIR
#define CW_PE_FIXTURE_DIR ""
#endif

static uint32_t rva_of(const cw_etl__pe_t *pe, const char *name)
{
    for (size_t i = 0; i < pe->n; i++)
        if (strcmp(pe->names + pe->ex[i].name, name) == 0) return pe->ex[i].rva;
    CW_FAIL("no export %s", name);
    return 0;
}

int main(void)
{
    if (!CW_PE_FIXTURE_DIR[0]) {
        TEST_SKIP_PART("all of it: the test DLL was not built (no MinGW objdump)");
        return CW_TEST_SKIP_CODE;
    }
    char dll[1200];
    snprintf(dll, sizeof dll, "%s/KernelBase.dll", CW_PE_FIXTURE_DIR);
    cw_etl__pe_t pe;
    ASSERT_OK(cw_etl__pe_read(dll, &pe));
    uint32_t va = rva_of(&pe, "VirtualAlloc"), crt = rva_of(&pe, "CreateRemoteThreadEx");

    cw_etw_syms_t *s;
    cw_diag_t d = {{0}};
    ASSERT_OK(cw_etw__syms_open(NULL, &s, &d));
    /* The file as Windows opens it (a build path under Wine: on Z:). */
    char full[1300];
    snprintf(full, sizeof full, "%s%s", dll[0] == '/' ? "Z:" : "", dll);
    for (char *c = full; *c; c++)
        if (*c == '/') *c = '\\';
    wchar_t *w = cw_win_wide(full);
    ASSERT_TRUE(w != NULL);
    ASSERT_OK(cw_etw__syms_add(s, "kernelbase.dll", w, pe.image_size));
    ASSERT_OK(cw_etw__syms_add(s, "kernelbase.dll", w, pe.image_size)); /* once per name */

    char buf[256];
    cw_etl__module_t m = {0x7FF800000000ull, pe.image_size, "kernelbase.dll", 0, 1};
    ASSERT_TRUE(cw_etw__syms_name(s, &m, va, buf, sizeof buf) > 0);
    ASSERT_STR_EQ(buf, "VirtualAlloc");
    ASSERT_TRUE(cw_etw__syms_name(s, &m, va + 3, buf, sizeof buf) > 0);
    ASSERT_STR_EQ(buf, "VirtualAlloc+0x3");
    ASSERT_TRUE(cw_etw__syms_name(s, &m, crt + 1, buf, sizeof buf) > 0);
    ASSERT_STR_EQ(buf, "CreateRemoteThreadEx+0x1");
    printf("DbgHelp: %s at +0x%x is %s\n", dll, (unsigned)(crt + 1), buf);

    /* Another file of that name (another size: WOW64's 32-bit ntdll.dll
     * beside the 64-bit one) is another image: not named by the first. */
    ASSERT_EQ(cw_etw__syms_add(s, "kernelbase.dll", L"\\Device\\HarddiskVolume9\\wow.dll",
                               pe.image_size + 0x1000),
              CW_ENOENT);
    cw_etl__module_t wow = {0x7FF800000000ull, pe.image_size + 0x1000, "kernelbase.dll", 0, 5};
    ASSERT_EQ(cw_etw__syms_name(s, &wow, va, buf, sizeof buf), 0);
    ASSERT_TRUE(cw_etw__syms_name(s, &m, va, buf, sizeof buf) > 0);

    /* Not loadable: unnamed. An unknown image: unnamed. */
    ASSERT_EQ(cw_etw__syms_add(s, "nothere.dll", L"\\Device\\HarddiskVolume9\\nothere.dll", 0x10000),
              CW_ENOENT);
    cw_etl__module_t none = {0x7FF900000000ull, 0x10000, "nothere.dll", 0, 2};
    ASSERT_EQ(cw_etw__syms_name(s, &none, 0x1000, buf, sizeof buf), 0);
    cw_etl__module_t other = {0x7FFA00000000ull, 0x10000, "other.dll", 0, 3};
    ASSERT_EQ(cw_etw__syms_name(s, &other, 0x1000, buf, sizeof buf), 0);

    /* Through the reader's space: the frame cache asks the symbolizer. */
    cw_etl__space_t sp;
    cw_stacks_t *stacks;
    ASSERT_OK(cw_etl__space_init(&sp));
    ASSERT_OK(cw_stacks_create(&stacks));
    sp.sym = (cw_etl__symbolizer_t){cw_etw__syms_name, s};
    cw_etl__proc_t *p = cw_etl__proc(&sp, 1234);
    ASSERT_TRUE(p != NULL);
    const char *path = "C:\\Windows\\System32\\KernelBase.dll";
    uint8_t u16[128];
    size_t units = strlen(path);
    for (size_t i = 0; i < units; i++) {
        u16[2 * i] = (uint8_t)path[i];
        u16[2 * i + 1] = 0;
    }
    ASSERT_OK(cw_etl__module_add(&sp, p, 0x7FF800000000ull, pe.image_size, u16, units, NULL));
    cw_etl__aspace_t as;
    ASSERT_OK(cw_etl__aspace(&sp, 1234, &as));
    uint32_t id, id2;
    bool in;
    ASSERT_OK(cw_etl__frame(&sp, &as, stacks, 0x7FF800000000ull + va + 3, 8, &id, &in));
    ASSERT_TRUE(in);
    ASSERT_STR_EQ(cw_stacks_frame_text(stacks, id), "kernelbase.dll!VirtualAlloc+0x3");
    uint64_t named = cw_etw__syms_named(s);
    ASSERT_OK(cw_etl__frame(&sp, &as, stacks, 0x7FF800000000ull + va + 3, 8, &id2, &in));
    ASSERT_EQ(id2, id);
    ASSERT_U64_EQ(cw_etw__syms_named(s), named); /* the second time from the cache */

    cw_stacks_destroy(stacks);
    cw_etl__space_free(&sp);
    cw_etw__syms_close(s);
    free(w);
    cw_etl__pe_free(&pe);
    TEST_DONE();
}
