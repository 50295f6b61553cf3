/* pe.c - the export table of a PE image (pe.h), from its file's bytes.
 *
 * Layout (the PE/COFF specification): the DOS header's e_lfanew (@0x3C)
 * points at "PE\0\0", the 20-byte COFF header (machine, number of
 * sections, size of the optional header), the optional header (magic
 * 0x10B PE32 or 0x20B PE32+, SizeOfImage @56, SizeOfHeaders @60, the data
 * directories @96 or @112, the export directory first), then the section
 * table (40 bytes each: virtual size @8, address @12, raw size @16, raw
 * pointer @20, characteristics @36). The export directory (40 bytes):
 * ordinal base @16, number of functions @20 and of names @24, and the RVAs
 * of the function, name and name-ordinal tables @28, @32, @36. A function
 * RVA inside the export directory is a forwarder string, not code.
 *
 * An RVA is read through the section holding it (or the headers): only
 * bytes the file has are read. */
#include "sources/etl/pe.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "commitwatch/common.h"

#define SCN_CNT_CODE 0x00000020u
#define SCN_MEM_EXECUTE 0x20000000u
/* More than any real image has; bounds the work a hostile header asks for. */
#define MAX_SECTIONS 96
#define MAX_FUNCS (1u << 20)

typedef struct view {
    const uint8_t *b;
    size_t len;
    const uint8_t *sec; /* the section table */
    unsigned nsec;
    uint32_t headers; /* SizeOfHeaders, capped by the file */
} view_t;

static uint16_t rd16(const uint8_t *p)
{
    return (uint16_t)(p[0] | p[1] << 8);
}

static uint32_t rd32(const uint8_t *p)
{
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

/* The file bytes at rva, with *avail of them readable there (the rest of
 * the section's raw data); NULL when the file has no byte at rva. */
static const uint8_t *at_rva(const view_t *v, uint32_t rva, size_t *avail)
{
    for (unsigned i = 0; i < v->nsec; i++) {
        const uint8_t *s = v->sec + 40 * (size_t)i;
        uint32_t va = rd32(s + 12), raw = rd32(s + 16), ptr = rd32(s + 20);
        if (rva < va || rva - va >= raw) continue;
        uint64_t off = (uint64_t)ptr + (rva - va);
        if (off >= v->len) return NULL;
        uint64_t end = (uint64_t)ptr + raw;
        if (end > v->len) end = v->len;
        *avail = (size_t)(end - off);
        return v->b + off;
    }
    if (rva < v->headers) {
        *avail = v->headers - rva;
        return v->b + rva;
    }
    return NULL;
}

/* n bytes at rva, all in the file, or NULL. */
static const uint8_t *span(const view_t *v, uint32_t rva, uint64_t n)
{
    size_t avail;
    const uint8_t *p = at_rva(v, rva, &avail);
    return p && n <= avail ? p : NULL;
}

/* The executable section holding rva: its end (VirtualAddress +
 * VirtualSize, or + the raw size when VirtualSize is 0), or 0 when none
 * does. */
static uint32_t code_end(const view_t *v, uint32_t rva)
{
    for (unsigned i = 0; i < v->nsec; i++) {
        const uint8_t *s = v->sec + 40 * (size_t)i;
        uint32_t vsize = rd32(s + 8), va = rd32(s + 12), raw = rd32(s + 16);
        uint32_t size = vsize ? vsize : raw; /* raw data is padded to the file alignment */
        if (rva < va || rva - va >= size) continue;
        if (!(rd32(s + 36) & (SCN_CNT_CODE | SCN_MEM_EXECUTE))) return 0;
        return (uint64_t)va + size > UINT32_MAX ? UINT32_MAX : va + size;
    }
    return 0;
}

static int by_rva(const void *a, const void *b)
{
    const cw_etl__pe_export_t *x = a, *y = b;
    if (x->rva != y->rva) return x->rva < y->rva ? -1 : 1;
    return x->ordinal < y->ordinal ? -1 : x->ordinal > y->ordinal; /* a stable order */
}

/* Appends a name (cut at CW_ETL__PE_NAME_MAX) to the blob; its offset, or
 * UINT32_MAX on ENOMEM. */
static uint32_t add_name(cw_etl__pe_t *pe, size_t *cap, const char *s, size_t n)
{
    if (n > CW_ETL__PE_NAME_MAX) n = CW_ETL__PE_NAME_MAX;
    if (CW_RESERVE(pe->names, *cap, pe->names_len + n + 1) != 0) return UINT32_MAX;
    uint32_t at = (uint32_t)pe->names_len;
    memcpy(pe->names + at, s, n);
    pe->names[at + n] = '\0';
    pe->names_len += n + 1;
    return at;
}

/* The headers: 0 and v, *exp_rva, *exp_size set, or CW_EPARSE. */
static int headers(const uint8_t *b, size_t len, cw_etl__pe_t *pe, view_t *v, uint32_t *exp_rva,
                   uint32_t *exp_size)
{
    if (len < 0x40 || b[0] != 'M' || b[1] != 'Z') return CW_EPARSE;
    uint32_t nt = rd32(b + 0x3C);
    if (nt > len || len - nt < 24 || memcmp(b + nt, "PE\0\0", 4) != 0) return CW_EPARSE;
    const uint8_t *coff = b + nt + 4;
    pe->machine = rd16(coff);
    unsigned nsec = rd16(coff + 2), optsize = rd16(coff + 16);
    const uint8_t *opt = coff + 20;
    size_t opt_at = (size_t)(opt - b);
    if (len - opt_at < optsize || optsize < 2) return CW_EPARSE;
    uint16_t magic = rd16(opt);
    if (magic != 0x10B && magic != 0x20B) return CW_EPARSE;
    pe->pe32plus = magic == 0x20B;
    size_t dirs = pe->pe32plus ? 112 : 96;
    if (optsize < dirs) return CW_EPARSE;
    pe->image_size = rd32(opt + 56);
    uint32_t ndirs = rd32(opt + dirs - 4);
    *exp_rva = *exp_size = 0;
    if (ndirs >= 1 && optsize >= dirs + 8) {
        *exp_rva = rd32(opt + dirs);
        *exp_size = rd32(opt + dirs + 4);
    }
    if (nsec > MAX_SECTIONS) return CW_EPARSE;
    size_t sec_at = opt_at + optsize;
    if (len - sec_at < 40 * (size_t)nsec) return CW_EPARSE;
    uint32_t hdr = rd32(opt + 60);
    *v = (view_t){b, len, b + sec_at, nsec, hdr < len ? hdr : (uint32_t)len};
    return 0;
}

int cw_etl__pe_parse(const uint8_t *b, size_t len, cw_etl__pe_t *pe)
{
    memset(pe, 0, sizeof *pe);
    view_t v;
    uint32_t exp_rva, exp_size;
    int rc = headers(b, len, pe, &v, &exp_rva, &exp_size);
    if (rc || exp_rva == 0) return rc;
    const uint8_t *dir = span(&v, exp_rva, 40);
    if (!dir) goto bad;
    uint32_t base = rd32(dir + 16), nfunc = rd32(dir + 20), nname = rd32(dir + 24);
    uint32_t funcs_rva = rd32(dir + 28), names_rva = rd32(dir + 32), ords_rva = rd32(dir + 36);
    if (nfunc > MAX_FUNCS || nname > MAX_FUNCS) goto bad;
    const uint8_t *funcs = nfunc ? span(&v, funcs_rva, 4 * (uint64_t)nfunc) : NULL;
    const uint8_t *names = nname ? span(&v, names_rva, 4 * (uint64_t)nname) : NULL;
    const uint8_t *ords = nname ? span(&v, ords_rva, 2 * (uint64_t)nname) : NULL;
    if ((nfunc && !funcs) || (nname && (!names || !ords))) goto bad;

    /* The name of each function slot: the first name-table entry naming it. */
    uint32_t *slot_name = nfunc ? malloc(nfunc * sizeof *slot_name) : NULL;
    if (nfunc && !slot_name) goto oom;
    for (uint32_t i = 0; i < nfunc; i++) slot_name[i] = UINT32_MAX;
    size_t names_cap = 0;
    for (uint32_t i = 0; i < nname; i++) {
        uint16_t o = rd16(ords + 2 * (size_t)i);
        size_t avail;
        const uint8_t *s = at_rva(&v, rd32(names + 4 * (size_t)i), &avail);
        const uint8_t *nul = s ? memchr(s, 0, avail) : NULL;
        if (o >= nfunc || !nul || nul == s) {
            pe->bad++;
            continue;
        }
        if (slot_name[o] != UINT32_MAX) continue; /* an alias: the first name stays */
        if ((slot_name[o] = add_name(pe, &names_cap, (const char *)s, (size_t)(nul - s))) ==
            UINT32_MAX)
            goto oom_slots;
    }

    if (nfunc && !(pe->ex = malloc(nfunc * sizeof *pe->ex))) goto oom_slots;
    for (uint32_t i = 0; i < nfunc; i++) {
        uint32_t rva = rd32(funcs + 4 * (size_t)i);
        if (rva == 0) continue; /* an unused ordinal */
        if (rva >= exp_rva && rva - exp_rva < exp_size) {
            pe->forwarders++;
            continue;
        }
        uint32_t end = code_end(&v, rva);
        if (pe->image_size && end > pe->image_size) end = pe->image_size;
        if (end <= rva) {
            pe->data++;
            continue;
        }
        uint32_t ord = base + i;
        uint32_t name = slot_name[i];
        uint8_t named = name != UINT32_MAX;
        if (!named) {
            /* Exported by ordinal only: named as debuggers do. */
            char text[24];
            int k = snprintf(text, sizeof text, "Ordinal%u", ord);
            if ((name = add_name(pe, &names_cap, text, (size_t)k)) == UINT32_MAX) goto oom_slots;
        }
        pe->ex[pe->n++] = (cw_etl__pe_export_t){rva, end, name, ord, named};
    }
    free(slot_name);
    /* Sorted by address; one export per address: of several, the name
     * lowest in byte order (an ordinal-only one only if none has a name). */
    if (pe->n) qsort(pe->ex, pe->n, sizeof *pe->ex, by_rva);
    size_t k = 0;
    for (size_t i = 0; i < pe->n; i++) {
        if (k && pe->ex[k - 1].rva == pe->ex[i].rva) {
            const cw_etl__pe_export_t *x = &pe->ex[k - 1], *y = &pe->ex[i];
            if (y->named > x->named ||
                (y->named && x->named && strcmp(pe->names + y->name, pe->names + x->name) < 0))
                pe->ex[k - 1] = *y;
            continue;
        }
        pe->ex[k++] = pe->ex[i];
    }
    pe->n = k;
    return 0;

oom_slots:
    free(slot_name);
oom:
    cw_etl__pe_free(pe);
    return CW_ENOMEM;
bad:
    cw_etl__pe_free(pe);
    return CW_EPARSE;
}

int cw_etl__pe_read(const char *path, cw_etl__pe_t *pe)
{
    memset(pe, 0, sizeof *pe);
    FILE *f = fopen(path, "rb");
    if (!f) return CW_ENOENT;
    uint8_t *b = NULL;
    size_t len = 0, cap = 0;
    int rc = 0;
    for (;;) {
        if (len == cap) {
            if (cap >= CW_ETL__PE_FILE_MAX) {
                rc = CW_EIO;
                break;
            }
            if (CW_RESERVE(b, cap, cap ? 2 * cap : 65536) != 0) {
                rc = CW_ENOMEM;
                break;
            }
        }
        size_t got = fread(b + len, 1, cap - len, f);
        len += got;
        if (got == 0) {
            if (ferror(f)) rc = CW_EIO;
            break;
        }
    }
    fclose(f);
    if (rc == 0) rc = cw_etl__pe_parse(b, len, pe);
    free(b);
    return rc;
}

void cw_etl__pe_free(cw_etl__pe_t *pe)
{
    free(pe->ex);
    free(pe->names);
    memset(pe, 0, sizeof *pe);
}

const char *cw_etl__pe_lookup(const cw_etl__pe_t *pe, uint64_t rva, uint64_t *off)
{
    size_t lo = 0, hi = pe->n;
    while (lo < hi) { /* the first export above rva */
        size_t mid = lo + (hi - lo) / 2;
        if (pe->ex[mid].rva <= rva) lo = mid + 1;
        else hi = mid;
    }
    if (lo == 0) return NULL;
    const cw_etl__pe_export_t *e = &pe->ex[lo - 1];
    if (rva >= e->end) return NULL;
    *off = rva - e->rva;
    return pe->names + e->name;
}
