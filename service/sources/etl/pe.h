/* pe.h - the export table of a Windows image (DLL, EXE, SYS; PE32 and
 * PE32+), read from its bytes on any OS, to name the frames of a trace's
 * stacks by the nearest export (`--images DIR`, docs/ETW.md "Symbols").
 *
 * Plain C, no OS header. Every read is bounds-checked against the bytes
 * given: a damaged or hostile file gives CW_EPARSE or fewer exports, never
 * a read outside the buffer. Thread: any; a table is read-only once made. */
#ifndef CW_SOURCES_ETL_PE_H
#define CW_SOURCES_ETL_PE_H

#include <stddef.h>
#include <stdint.h>

#include "commitwatch/error.h"

/* One exported function. Exports are sorted by rva, one per address. */
typedef struct cw_etl__pe_export {
    uint32_t rva;
    uint32_t end;     /* the end of its code section (or the image): the bound of an offset */
    uint32_t name;    /* offset of its NUL-terminated name in names */
    uint32_t ordinal; /* the biased ordinal, as GetProcAddress takes it */
    uint8_t named;    /* 0: exported by ordinal only, named "OrdinalN" */
} cw_etl__pe_export_t;

typedef struct cw_etl__pe {
    uint16_t machine;    /* IMAGE_FILE_MACHINE_* (0x14c i386, 0x8664 x64, 0xaa64 arm64) */
    uint8_t pe32plus;    /* 1: PE32+ (64-bit), 0: PE32 */
    uint32_t image_size; /* SizeOfImage */
    cw_etl__pe_export_t *ex; /* owned */
    size_t n;
    char *names; /* owned: every export's name, NUL-terminated each */
    size_t names_len;
    /* Left out: forwarders (a name for another DLL's function), exports
     * outside executable sections (data), and names whose ordinal or
     * string lay outside the file. An address with several names keeps
     * the lowest in byte order (the first in a well-formed name table). */
    uint32_t forwarders, data, bad;
} cw_etl__pe_t;

/* The longest export name kept; a longer one is cut. */
#define CW_ETL__PE_NAME_MAX 1024

/* Reads the image in buf[0..len) into *pe (zeroed first). 0; CW_EPARSE
 * when it is not a PE image or its headers or export directory are
 * malformed (an image with no export directory is valid: n = 0);
 * CW_ENOMEM. On error *pe is empty. buf is borrowed for the call. */
int cw_etl__pe_parse(const uint8_t *buf, size_t len, cw_etl__pe_t *pe);
/* The same from a file: also CW_ENOENT (cannot open) or CW_EIO (cannot
 * read, or larger than CW_ETL__PE_FILE_MAX). */
int cw_etl__pe_read(const char *path, cw_etl__pe_t *pe);
#define CW_ETL__PE_FILE_MAX ((uint64_t)1 << 30)
void cw_etl__pe_free(cw_etl__pe_t *pe); /* accepts an empty (zeroed) table */

/* The export nearest at or below rva whose section also holds rva, and
 * rva's offset past it in *off; NULL when rva is before every export, past
 * the image or outside that export's section. The name is borrowed from pe. */
const char *cw_etl__pe_lookup(const cw_etl__pe_t *pe, uint64_t rva, uint64_t *off);

#endif
