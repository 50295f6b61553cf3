/* fuzz_pe.c - libFuzzer target for the export-table reader
 * (service/sources/etl/pe.c): any bytes parsed as a PE image, the table
 * checked for consistency and looked up at addresses around every export.
 * Seeded with the MinGW-built test DLL (tests/etlgen/CMakeLists.txt). */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "sources/etl/pe.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    cw_etl__pe_t pe;
    int rc = cw_etl__pe_parse(data, size, &pe);
    if (rc != 0 && rc != CW_EPARSE && rc != CW_ENOMEM) abort();
    if (rc != 0 && pe.n != 0) abort();
    for (size_t i = 0; i < pe.n; i++) {
        const cw_etl__pe_export_t *e = &pe.ex[i];
        if (e->name >= pe.names_len || e->end <= e->rva || (i && pe.ex[i - 1].rva >= e->rva))
            abort();
        uint64_t off;
        const char *name = cw_etl__pe_lookup(&pe, e->rva, &off);
        if (!name || off != 0 || strcmp(name, pe.names + e->name) != 0) abort();
        /* The end of its section: named by it or by a later export (sections
         * of a damaged file may overlap, so that one may not reach it). */
        if (cw_etl__pe_lookup(&pe, (uint64_t)e->end - 1, &off) && off > e->end - 1 - e->rva) abort();
        cw_etl__pe_lookup(&pe, e->rva ? e->rva - 1 : 0, &off);
    }
    cw_etl__pe_free(&pe);
    return 0;
}
