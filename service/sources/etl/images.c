/* images.c - `--images DIR`: copies of a trace's DLLs and EXEs whose
 * export tables (pe.c) name the frames inside them, on any OS.
 *
 * The folder is listed once at open; an image of the trace is found by
 * its file name compared without case (traces name C:\Windows\System32\
 * NTDLL.DLL as the loader saw it, copies keep any case). A file is read
 * the first time a frame in an image of its name needs a name, and kept:
 * each (image name, offset) is named once, then the frame cache (space.c)
 * holds the text. A file that is not a readable PE is warned about once
 * and its frames stay "module!+0xOFFSET"; so are the frames of an image
 * whose size in the trace is not the file's SizeOfImage (another version
 * of the DLL, or the 32-bit ntdll.dll of a WOW64 process beside a 64-bit
 * copy): its exports would give wrong names. Reader's thread only. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "commitwatch/log.h"
#include "commitwatch/platform.h"
#include "sources/etl/etl_internal.h"
#include "sources/etl/pe.h"

typedef struct entry {
    char *key;  /* the file name, ASCII letters lowercased: in path's block, after it */
    char *path; /* DIR/name; owns the block */
    int state;  /* 0 not read yet, 1 read, -1 unusable */
    bool size_warned;
    cw_etl__pe_t pe;
} entry_t;

struct cw_etl__images {
    char *dir;
    entry_t *e;
    size_t n, cap;
    size_t read;
    uint64_t named;
};

static int add_entry(void *ctx, const char *name)
{
    cw_etl__images_t *im = ctx;
    size_t dl = strlen(im->dir), nl = strlen(name);
    if (CW_RESERVE(im->e, im->cap, im->n + 1) != 0) return CW_ENOMEM;
    entry_t *e = &im->e[im->n];
    memset(e, 0, sizeof *e);
    /* One block: "DIR/name\0" then the key, "name\0" lowercased. */
    if (!(e->path = malloc(dl + 1 + nl + 1 + nl + 1))) return CW_ENOMEM;
    memcpy(e->path, im->dir, dl);
    size_t at = dl;
    if (dl && !cw_plat_is_sep(im->dir[dl - 1])) e->path[at++] = '/';
    memcpy(e->path + at, name, nl + 1);
    e->key = e->path + at + nl + 1;
    for (size_t i = 0; i <= nl; i++)
        e->key[i] = name[i] >= 'A' && name[i] <= 'Z' ? (char)(name[i] - 'A' + 'a') : name[i];
    im->n++;
    return 0;
}

static int by_key(const void *a, const void *b)
{
    const entry_t *x = a, *y = b;
    int c = strcmp(x->key, y->key);
    return c ? c : strcmp(x->path, y->path); /* names differing in case: a fixed pick */
}

int cw_etl__images_open(const char *dir, cw_etl__images_t **out, cw_diag_t *d)
{
    cw_etl__images_t *im = calloc(1, sizeof *im);
    if (!im || !(im->dir = malloc(strlen(dir) + 1))) {
        free(im);
        return cw_diag_set(d, CW_ENOMEM, "out of memory");
    }
    strcpy(im->dir, dir);
    int rc = cw_plat_list_dir(dir, add_entry, im);
    if (rc) {
        cw_etl__images_close(im);
        if (rc == CW_ENOMEM) return cw_diag_set(d, rc, "out of memory");
        return cw_diag_set(d, rc,
                           "--images %s: not a folder that can be read; give the folder that "
                           "holds copies of the trace's DLLs and EXEs",
                           dir);
    }
    if (im->n) qsort(im->e, im->n, sizeof *im->e, by_key);
    *out = im;
    return 0;
}

void cw_etl__images_close(cw_etl__images_t *im)
{
    if (!im) return;
    for (size_t i = 0; i < im->n; i++) {
        free(im->e[i].path); /* and the key with it */
        cw_etl__pe_free(&im->e[i].pe);
    }
    free(im->e);
    free(im->dir);
    free(im);
}

/* The entry for an image's (lowercase) name: the first of that key. */
static entry_t *find(cw_etl__images_t *im, const char *key)
{
    size_t lo = 0, hi = im->n;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (strcmp(im->e[mid].key, key) < 0) lo = mid + 1;
        else hi = mid;
    }
    return lo < im->n && strcmp(im->e[lo].key, key) == 0 ? &im->e[lo] : NULL;
}

size_t cw_etl__images_name(void *ctx, const cw_etl__module_t *m, uint64_t off, char *buf,
                           size_t cap)
{
    cw_etl__images_t *im = ctx;
    entry_t *e = find(im, m->name);
    if (!e || e->state < 0) return 0;
    if (e->state == 0) {
        int rc = cw_etl__pe_read(e->path, &e->pe);
        e->state = rc == 0 ? 1 : -1;
        if (rc) {
            CW_LOGW("%s: %s; frames in %s stay %s!+0xOFFSET", e->path,
                    rc == CW_EPARSE ? "not a PE image (DLL/EXE) or a damaged one"
                                    : cw_strerror(rc),
                    m->name, m->name);
            return 0;
        }
        im->read++;
    }
    /* The loader maps SizeOfImage rounded up to pages. */
    uint64_t mapped = ((uint64_t)e->pe.image_size + 0xFFF) & ~(uint64_t)0xFFF;
    if (m->size && e->pe.image_size && m->size != mapped) {
        if (!e->size_warned)
            CW_LOGW("%s is not the image the trace loaded as %s (SizeOfImage 0x%llx, the trace "
                    "0x%llx: another version or architecture); frames in that image stay "
                    "%s!+0xOFFSET",
                    e->path, m->name, (unsigned long long)mapped, (unsigned long long)m->size,
                    m->name);
        e->size_warned = true;
        return 0;
    }
    uint64_t past;
    const char *name = cw_etl__pe_lookup(&e->pe, off, &past);
    if (!name) return 0;
    int n = past ? snprintf(buf, cap, "%s+0x%llx", name, (unsigned long long)past)
                 : snprintf(buf, cap, "%s", name);
    if (n <= 0) return 0;
    im->named++;
    return (size_t)n < cap ? (size_t)n : cap - 1;
}

void cw_etl__images_stats(const cw_etl__images_t *im, size_t *files, size_t *read,
                          uint64_t *named)
{
    *files = im->n;
    *read = im->read;
    *named = im->named;
}
