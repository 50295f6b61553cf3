/* pe_writer.h - a minimal PE image (DLL) with an export table, for tests:
 * the images folder of a generated trace (`--images DIR`: cw_etl_gen),
 * and PE32 / PE32+ images for the export-table reader's unit tests.
 *
 * Layout: headers (0x400 bytes), .text at RVA 0x1000 (executable, filled
 * with int3) up to past the highest export, .edata after it (export
 * directory, address, name and ordinal tables, names sorted by byte as
 * loaders require). Names may hold any byte but NUL ("operator new",
 * "LRPC_ADDRESS::ProcessIO"). Not a loadable program: no entry point, no
 * imports. */
#ifndef CW_TESTS_PE_WRITER_H
#define CW_TESTS_PE_WRITER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef struct cw_pew_export {
    const char *name; /* NULL: exported by ordinal only */
    uint32_t rva;     /* >= 0x1000 */
} cw_pew_export_t;

/* The image's bytes (malloc'd, *len set) for dll_name with the exports
 * (ordinals from 1 in the order given), SizeOfImage image_size (a multiple
 * of 0x1000; 0 or less than the layout needs: what it needs); NULL on
 * ENOMEM. */
uint8_t *cw_pew_build(const char *dll_name, bool pe32plus, const cw_pew_export_t *ex, size_t n,
                      uint32_t image_size, size_t *len);
/* cw_pew_build() written to path. 0 or -1. */
int cw_pew_write(const char *path, const char *dll_name, bool pe32plus, const cw_pew_export_t *ex,
                 size_t n, uint32_t image_size);

#endif
