/* pe_writer.c - a minimal PE image with an export table (pe_writer.h). */
#include "pe_writer.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define FILE_ALIGN 0x200u
#define SECT_ALIGN 0x1000u
#define HEADERS 0x400u

static uint32_t align(uint32_t v, uint32_t a)
{
    return (v + a - 1) / a * a;
}

static void w16(uint8_t *p, uint32_t v)
{
    p[0] = (uint8_t)v;
    p[1] = (uint8_t)(v >> 8);
}

static void w32(uint8_t *p, uint32_t v)
{
    w16(p, v);
    w16(p + 2, v >> 16);
}

static const cw_pew_export_t *sort_base;

static int by_name(const void *a, const void *b)
{
    const cw_pew_export_t *x = &sort_base[*(const uint32_t *)a], *y = &sort_base[*(const uint32_t *)b];
    return strcmp(x->name, y->name);
}

static void section(uint8_t *h, const char *name, uint32_t va, uint32_t vsize, uint32_t raw,
                    uint32_t rawptr, uint32_t flags)
{
    memcpy(h, name, strlen(name));
    w32(h + 8, vsize);
    w32(h + 12, va);
    w32(h + 16, raw);
    w32(h + 20, rawptr);
    w32(h + 36, flags);
}

uint8_t *cw_pew_build(const char *dll_name, bool pe32plus, const cw_pew_export_t *ex, size_t n,
                      uint32_t want_size, size_t *len)
{
    uint32_t top = 0x1000, nnamed = 0, strings = (uint32_t)strlen(dll_name) + 1;
    for (size_t i = 0; i < n; i++) {
        if (ex[i].rva + 0x10 > top) top = ex[i].rva + 0x10;
        if (ex[i].name) {
            nnamed++;
            strings += (uint32_t)strlen(ex[i].name) + 1;
        }
    }
    uint32_t text_size = align(top - 0x1000, FILE_ALIGN);
    uint32_t edata_va = align(top, SECT_ALIGN);
    uint32_t edata_size = 40 + 4 * (uint32_t)n + 4 * nnamed + 2 * nnamed + strings;
    uint32_t edata_raw = align(edata_size, FILE_ALIGN);
    uint32_t image_size = edata_va + align(edata_size, SECT_ALIGN);
    uint32_t edata_vsize = edata_size;
    if (want_size > image_size) { /* .edata's memory reaches the end */
        image_size = want_size;
        edata_vsize = want_size - edata_va;
    }
    size_t total = HEADERS + text_size + edata_raw;
    uint8_t *b = calloc(1, total);
    uint32_t *order = calloc(nnamed ? nnamed : 1, sizeof *order);
    if (!b || !order) {
        free(b);
        free(order);
        return NULL;
    }
    /* DOS header, PE signature, COFF header. */
    b[0] = 'M';
    b[1] = 'Z';
    w32(b + 0x3C, 0x80);
    uint8_t *pe = b + 0x80;
    memcpy(pe, "PE\0\0", 4);
    uint8_t *coff = pe + 4;
    w16(coff, pe32plus ? 0x8664 : 0x14C);
    w16(coff + 2, 2);
    uint32_t optsize = pe32plus ? 240 : 224;
    w16(coff + 16, optsize);
    w16(coff + 18, pe32plus ? 0x2022 : 0x2102); /* executable DLL (large-address / 32-bit) */
    uint8_t *opt = coff + 20;
    w16(opt, pe32plus ? 0x20B : 0x10B);
    w32(opt + 4, text_size); /* SizeOfCode */
    w32(opt + 20, 0x1000);   /* BaseOfCode */
    if (pe32plus) {
        w32(opt + 24, 0x80000000u); /* ImageBase 0x180000000 */
        w32(opt + 28, 1);
    } else {
        w32(opt + 28, 0x10000000u);
    }
    w32(opt + 32, SECT_ALIGN);
    w32(opt + 36, FILE_ALIGN);
    w16(opt + 40, 6); /* OS version 6.0 */
    w16(opt + 48, 6); /* subsystem version */
    w32(opt + 56, image_size);
    w32(opt + 60, HEADERS);
    w16(opt + 68, 3); /* console subsystem */
    size_t dirs = pe32plus ? 112 : 96;
    w32(opt + dirs - 4, 16);
    w32(opt + dirs, edata_va);
    w32(opt + dirs + 4, edata_size);
    uint8_t *sec = opt + optsize;
    section(sec, ".text", 0x1000, top - 0x1000, text_size, HEADERS, 0x60000020u);
    section(sec + 40, ".edata", edata_va, edata_vsize, edata_raw, HEADERS + text_size, 0x40000040u);
    memset(b + HEADERS, 0xCC, text_size);

    /* The export directory and its tables. */
    uint8_t *e = b + HEADERS + text_size;
    uint32_t funcs = edata_va + 40, names = funcs + 4 * (uint32_t)n, ords = names + 4 * nnamed,
             str = ords + 2 * nnamed;
    w32(e + 12, str); /* the DLL's name */
    w32(e + 16, 1);   /* ordinal base */
    w32(e + 20, (uint32_t)n);
    w32(e + 24, nnamed);
    w32(e + 28, funcs);
    w32(e + 32, names);
    w32(e + 36, ords);
    memcpy(e + (str - edata_va), dll_name, strlen(dll_name) + 1);
    str += (uint32_t)strlen(dll_name) + 1;
    uint32_t k = 0;
    for (size_t i = 0; i < n; i++) {
        w32(e + (funcs - edata_va) + 4 * i, ex[i].rva);
        if (ex[i].name) order[k++] = (uint32_t)i;
    }
    sort_base = ex;
    qsort(order, nnamed, sizeof *order, by_name);
    for (uint32_t j = 0; j < nnamed; j++) {
        const char *s = ex[order[j]].name;
        w32(e + (names - edata_va) + 4 * j, str);
        w16(e + (ords - edata_va) + 2 * j, order[j]);
        memcpy(e + (str - edata_va), s, strlen(s) + 1);
        str += (uint32_t)strlen(s) + 1;
    }
    free(order);
    *len = total;
    return b;
}

int cw_pew_write(const char *path, const char *dll_name, bool pe32plus, const cw_pew_export_t *ex,
                 size_t n, uint32_t image_size)
{
    size_t len;
    uint8_t *b = cw_pew_build(dll_name, pe32plus, ex, n, image_size, &len);
    if (!b) return -1;
    FILE *f = fopen(path, "wb");
    int rc = f && fwrite(b, 1, len, f) == len ? 0 : -1;
    if (f && fclose(f) != 0) rc = -1;
    free(b);
    return rc;
}
