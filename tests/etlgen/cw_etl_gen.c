/* cw_etl_gen.c - writes a JSONL v1 trace as a Windows .etl file (etl_gen.h
 * says how), for the end-to-end tests of `--source etl:`.
 *
 * usage: cw_etl_gen IN.jsonl OUT.etl [--ptr 4|8] [--cpus N] [--compress]
 *                   [--stacks walk|split|keys] [--process-version 3|4]
 *                   [--image-version 2|3] [--map FILE.json] [--buffer-size N]
 *                   [--images DIR [--hide PREFIX]...] [--rva MODULE!FUNCTION=0xRVA]...
 *                   [--size MODULE=0xSIZE]...
 *        cw_etl_gen --heap-truth OUT.etl [--ptr 4|8] [--stacks walk|keys] [--compress]
 *                   [--full-header] [--variant whole|short|no-heap] [--images DIR]
 *
 * --images writes the images the frames' offsets name (etl_gen.h), PE
 * files with the functions as exports, into DIR (which must exist), for
 * `--source etl:OUT.etl --images DIR`; --hide leaves functions whose name
 * starts with PREFIX out of the exports. --rva places a function at the
 * RVA of a real DLL's export (give every function of that module; its
 * image is then not written: copy the real DLL into DIR); --size gives
 * its size in the Image events (its SizeOfImage: `--images` names only an
 * image of the file's size).
 *
 * The clock runs at 1 GHz so every nanosecond of the trace survives. With
 * --ptr 4 the addresses are moved below 2 GB: each run of overlapping or
 * adjacent ranges of a process keeps its layout and moves as one, so every
 * commit, decommit and release touches the same pages as before.
 *
 * --heap-truth writes the heap truth instead (heap_gen.h: Heap events of
 * known figures; --full-header: with the Heap class GUID in FULL headers),
 * and with --images its images. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "commitwatch/trace.h"
#include "etl_gen.h"
#include "heap_gen.h"

typedef struct ev_copy {
    cw_event_t ev;
    char *name, *cmdline;
} ev_copy_t;

/* A run of touching ranges of one process and where it moves. */
typedef struct cluster {
    uint32_t pid;
    uint64_t lo, hi, to;
} cluster_t;

typedef struct ctx {
    cw_stacks_t *stacks;
    const char **fr;
    size_t frcap;
    cluster_t *cl;
    size_t ncl;
} ctx_t;

static const char *const *frames_of(void *p, uint32_t id, uint32_t *n)
{
    ctx_t *c = p;
    const uint32_t *ids = cw_stacks_frames(c->stacks, id, n);
    if (!ids || !*n) {
        *n = 0;
        return NULL;
    }
    if (*n > c->frcap) {
        c->frcap = *n;
        c->fr = realloc(c->fr, c->frcap * sizeof *c->fr);
        if (!c->fr) abort();
    }
    for (uint32_t i = 0; i < *n; i++) c->fr[i] = cw_stacks_frame_text(c->stacks, ids[i]);
    return c->fr;
}

static int by_pid_lo(const void *a, const void *b)
{
    const cluster_t *x = a, *y = b;
    if (x->pid != y->pid) return x->pid < y->pid ? -1 : 1;
    return x->lo < y->lo ? -1 : x->lo > y->lo;
}

static uint64_t map32(void *p, uint32_t pid, uint64_t a)
{
    ctx_t *c = p;
    for (size_t i = 0; i < c->ncl; i++)
        if (c->cl[i].pid == pid && a >= c->cl[i].lo && a < c->cl[i].hi)
            return a - c->cl[i].lo + c->cl[i].to;
    fprintf(stderr, "cw_etl_gen: no cluster for pid %u address 0x%llx\n", pid,
            (unsigned long long)a);
    exit(1);
}

/* Merges the ranges of each process into clusters and places them from
 * 0x10000000 up, 64 KiB apart. */
static void plan32(ctx_t *c, const ev_copy_t *evs, size_t n)
{
    c->cl = malloc((n ? n : 1) * sizeof *c->cl);
    if (!c->cl) abort();
    size_t k = 0;
    for (size_t i = 0; i < n; i++) {
        const cw_event_t *e = &evs[i].ev;
        if (e->op > CW_OP_RELEASE || e->rundown) continue;
        c->cl[k++] = (cluster_t){e->pid, e->addr, e->addr + e->size, 0};
    }
    qsort(c->cl, k, sizeof *c->cl, by_pid_lo);
    size_t m = 0;
    for (size_t i = 0; i < k; i++) {
        if (m && c->cl[m - 1].pid == c->cl[i].pid && c->cl[i].lo <= c->cl[m - 1].hi) {
            if (c->cl[i].hi > c->cl[m - 1].hi) c->cl[m - 1].hi = c->cl[i].hi;
        } else {
            c->cl[m++] = c->cl[i];
        }
    }
    uint64_t next = 0x10000000;
    uint32_t pid = 0;
    for (size_t i = 0; i < m; i++) {
        if (i == 0 || c->cl[i].pid != pid) {
            pid = c->cl[i].pid;
            next = 0x10000000;
        }
        c->cl[i].to = next;
        next += (c->cl[i].hi - c->cl[i].lo + 0x1FFFF) & ~(uint64_t)0xFFFF;
        if (next >= 0x70000000) {
            fprintf(stderr, "cw_etl_gen: the trace's ranges do not fit a 32-bit address space\n");
            exit(1);
        }
    }
    c->ncl = m;
}

static char *dup(const char *s)
{
    if (!s) return NULL;
    char *d = malloc(strlen(s) + 1);
    if (!d) abort();
    return strcpy(d, s);
}

static int usage(void)
{
    fprintf(stderr, "usage: cw_etl_gen IN.jsonl OUT.etl [--ptr 4|8] [--cpus N] [--compress]\n"
                    "                  [--stacks walk|split|keys] [--process-version 3|4]\n"
                    "                  [--image-version 2|3] [--map FILE.json] [--buffer-size N]\n"
                    "                  [--images DIR [--hide PREFIX]...] [--rva MODULE!FUNCTION=0xRVA]...\n"
                    "                  [--size MODULE=0xSIZE]...\n"
                    "       cw_etl_gen --heap-truth OUT.etl [--ptr 4|8] [--stacks walk|keys]\n"
                    "                  [--compress] [--full-header]\n"
                    "                  [--variant whole|short|no-heap] [--images DIR]\n");
    return 2;
}

/* cw_etl_gen --heap-truth OUT.etl [options] */
static int heap_truth(int argc, char **argv)
{
    cw_heapgen_opts_t o = {.ptr_size = 8, .stacks = CW_ETLGEN_WALK};
    for (int i = 3; i < argc; i++) {
        const char *k = argv[i], *v = i + 1 < argc ? argv[i + 1] : "";
        if (!strcmp(k, "--compress")) {
            o.compress = true;
            continue;
        }
        if (!strcmp(k, "--full-header")) {
            o.full_header = true;
            continue;
        }
        i++;
        if (!strcmp(k, "--ptr")) o.ptr_size = (unsigned)atoi(v);
        else if (!strcmp(k, "--stacks")) o.stacks = !strcmp(v, "keys") ? CW_ETLGEN_KEYS : CW_ETLGEN_WALK;
        else if (!strcmp(k, "--images")) o.images = v;
        else if (!strcmp(k, "--variant"))
            o.variant = !strcmp(v, "short")     ? CW_HEAPGEN_SHORT
                        : !strcmp(v, "no-heap") ? CW_HEAPGEN_NO_HEAP
                                                : CW_HEAPGEN_WHOLE;
        else return usage();
    }
    if (o.ptr_size != 4 && o.ptr_size != 8) return usage();
    if (cw_heapgen_write(argv[2], &o) != 0) {
        fprintf(stderr, "cw_etl_gen: writing %s failed\n", argv[2]);
        return 1;
    }
    return 0;
}

int main(int argc, char **argv)
{
    if (argc < 3) return usage();
    if (!strcmp(argv[1], "--heap-truth")) return heap_truth(argc, argv);
    const char *in = argv[1], *out = argv[2], *map = NULL, *images = NULL;
    const char **hide = calloc((size_t)argc, sizeof *hide);
    struct cw_etlgen_rva *rvas = calloc((size_t)argc, sizeof *rvas);
    struct cw_etlgen_size *sizes = calloc((size_t)argc, sizeof *sizes);
    size_t nhide = 0, nrvas = 0, nsizes = 0;
    if (!hide || !rvas || !sizes) abort();
    cw_etlgen_opts_t o = {.w = {.ptr_size = 8, .ncpu = 4, .freq = 1000000000, .start_tick = 5000000000ull},
                          .stacks = CW_ETLGEN_WALK, .process_version = 4, .image_version = 3};
    for (int i = 3; i < argc; i++) {
        const char *k = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(k, "--compress")) {
            o.w.compress = true;
            continue;
        }
        if (!v) return usage();
        i++;
        if (!strcmp(k, "--ptr")) o.w.ptr_size = (unsigned)atoi(v);
        else if (!strcmp(k, "--cpus")) o.w.ncpu = (unsigned)atoi(v);
        else if (!strcmp(k, "--process-version")) o.process_version = atoi(v);
        else if (!strcmp(k, "--image-version")) o.image_version = atoi(v);
        else if (!strcmp(k, "--map")) map = v;
        else if (!strcmp(k, "--images")) images = v;
        else if (!strcmp(k, "--hide")) hide[nhide++] = v;
        else if (!strcmp(k, "--rva")) {
            char *eq = strrchr(v, '=');
            if (!eq) return usage();
            *eq = '\0';
            rvas[nrvas++] = (struct cw_etlgen_rva){v, (uint32_t)strtoul(eq + 1, NULL, 0)};
        } else if (!strcmp(k, "--size")) {
            char *eq = strrchr(v, '=');
            if (!eq) return usage();
            *eq = '\0';
            sizes[nsizes++] = (struct cw_etlgen_size){v, strtoull(eq + 1, NULL, 0)};
        }
        else if (!strcmp(k, "--buffer-size")) o.w.buffer_size = (uint32_t)atoi(v);
        else if (!strcmp(k, "--stacks"))
            o.stacks = !strcmp(v, "walk")    ? CW_ETLGEN_WALK
                       : !strcmp(v, "split") ? CW_ETLGEN_SPLIT
                       : !strcmp(v, "keys")  ? CW_ETLGEN_KEYS
                                             : -1;
        else return usage();
    }
    if ((o.w.ptr_size != 4 && o.w.ptr_size != 8) ||
        (o.w.buffer_size && (o.w.buffer_size < 1024 || o.w.buffer_size > (1u << 20))) || o.w.ncpu < 1 || o.w.ncpu > 64 || o.stacks < 0)
        return usage();

    ctx_t c = {0};
    cw_trace_reader_t *r = NULL;
    cw_diag_t d = {{0}};
    if (cw_stacks_create(&c.stacks) != 0 || cw_trace_reader_open(in, c.stacks, &r, &d) != 0) {
        fprintf(stderr, "cw_etl_gen: %s\n", d.msg);
        return 1;
    }
    ev_copy_t *evs = NULL;
    size_t n = 0, cap = 0;
    cw_event_t ev;
    int k;
    while ((k = cw_trace_reader_next(r, &ev, &d)) == 1) {
        if (n == cap) {
            cap = cap ? 2 * cap : 256;
            evs = realloc(evs, cap * sizeof *evs);
            if (!evs) abort();
        }
        evs[n].ev = ev;
        evs[n].name = dup(ev.name);
        evs[n].cmdline = dup(ev.cmdline);
        evs[n].ev.name = evs[n].name;
        evs[n].ev.cmdline = evs[n].cmdline;
        n++;
    }
    cw_trace_reader_close(r);
    if (k < 0) {
        fprintf(stderr, "cw_etl_gen: %s\n", d.msg);
        return 1;
    }
    if (!n) {
        fprintf(stderr, "cw_etl_gen: %s holds no events\n", in);
        return 1;
    }
    o.w.start_ns = evs[0].ev.ts;
    o.rvas = rvas;
    o.nrvas = nrvas;
    o.sizes = sizes;
    o.nsizes = nsizes;
    o.frames = frames_of;
    o.ctx = &c;
    if (o.w.ptr_size == 4) {
        plan32(&c, evs, n);
        o.map_addr = map32;
    }
    cw_etlgen_t *g;
    if (cw_etlgen_open(out, &o, &g) != 0) {
        fprintf(stderr, "cw_etl_gen: cannot write %s\n", out);
        return 1;
    }
    int rc = 0;
    for (size_t i = 0; i < n && rc == 0; i++) rc = cw_etlgen_event(g, &evs[i].ev);
    if (images && rc == 0 && cw_etlgen_write_images(g, images, hide, nhide) != 0) {
        fprintf(stderr, "cw_etl_gen: cannot write the images into %s\n", images);
        rc = -1;
    }
    if (map && rc == 0) {
        FILE *f = fopen(map, "w");
        if (!f) rc = -1;
        else {
            cw_etlgen_map_json(g, f);
            if (fclose(f) != 0) rc = -1;
        }
    }
    if (cw_etlgen_close(g) != 0) rc = -1;
    for (size_t i = 0; i < n; i++) {
        free(evs[i].name);
        free(evs[i].cmdline);
    }
    free(evs);
    free(hide);
    free(rvas);
    free(sizes);
    free(c.fr);
    free(c.cl);
    cw_stacks_destroy(c.stacks);
    if (rc) fprintf(stderr, "cw_etl_gen: writing %s failed\n", out);
    return rc ? 1 : 0;
}
