/* source.c - `--source etl:FILE`: a Windows event trace file read as a
 * source on any OS (reader.c does the reading; docs/ETW.md says what is
 * emitted). The file is finite: run() returns at its end, like a replay,
 * but it is not paced (--speed and --rebase-now are the replay's). With
 * --images DIR, the export tables of the images found there name the
 * frames (images.c). */
#include <stdio.h>
#include <stdlib.h>

#include "commitwatch/log.h"
#include "sources/etl/etl_internal.h"

/* The reader and what names its frames. */
typedef struct etl_src {
    cw_etl__reader_t r; /* first: stop() reaches it from the impl */
    cw_etl__images_t *images;
} etl_src_t;

static void etl_close(void *impl);

static int etl_open(void **impl, const cw_source_opts_t *o, cw_diag_t *d)
{
    if (!o->arg || !*o->arg)
        return cw_diag_set(d, CW_EUSAGE, "--source etl needs a file: --source etl:FILE.etl");
    etl_src_t *s = calloc(1, sizeof *s);
    if (!s) return cw_diag_set(d, CW_ENOMEM, "out of memory");
    int rc = cw_etl__reader_open(&s->r, o->arg, o->stacks, NULL, d);
    if (rc == 0 && o->images && (rc = cw_etl__images_open(o->images, &s->images, d)) == 0)
        s->r.space.sym = (cw_etl__symbolizer_t){cw_etl__images_name, s->images};
    if (rc) {
        etl_close(s);
        return rc;
    }
    *impl = s;
    return 0;
}

static int etl_run(void *impl, const cw_source_sink_t *sink, cw_diag_t *d)
{
    cw_etl__reader_t *r = impl;
    r->emit = sink->emit;
    r->ctx = sink->ctx;
    int rc = cw_etl__reader_run(r, d);
    const cw_etl_header_t *h = cw_etl_file_header(r->file);
    const cw_etl_file_stats_t *st = cw_etl_file_stats(r->file);
    /* What the recording session lost: its events, and its buffers
     * (each counted as one event, the lower bound, as the live session's
     * are: etw/live.c). An .etl has no OS to correct from. */
    uint64_t lost = (uint64_t)h->events_lost + h->buffers_lost;
    if (sink->counters) sink->counters(sink->ctx, st->events, lost, 0);
    if (sink->drops) {
        cw_source_drops_t dr = {0};
        dr.malformed = st->buffers_corrupt; /* buffers that could not be read */
        dr.last_resync_ns = INT64_MIN;
        sink->drops(sink->ctx, &dr);
    }
    if (lost)
        CW_LOGW("%s: the recording lost %u events and %u buffers (its header): the figures "
                "of this trace miss what they held, and nothing can correct them",
                r->path, h->events_lost, h->buffers_lost);
    char skips[1024];
    cw_etl__reader_skips(r, skips, sizeof skips);
    if (skips[0]) CW_LOGW("%s: events left out: %s", r->path, skips);
    if (st->buffers_corrupt || st->truncated)
        CW_LOGW("%s: %llu buffers could not be read%s", r->path,
                (unsigned long long)st->buffers_corrupt, st->truncated ? "; the file is truncated" : "");
    CW_LOGI("%s: %llu events read, %llu emitted; stacks: %llu joined, %llu without their event, "
            "%llu keys unresolved; %u events lost in recording",
            r->path, (unsigned long long)st->events, (unsigned long long)r->emitted,
            (unsigned long long)r->ss.joined, (unsigned long long)r->ss.orphaned,
            (unsigned long long)r->ss.unresolved, h->events_lost);
    const cw_etl__images_t *im = ((etl_src_t *)impl)->images;
    if (im) {
        size_t files, read;
        uint64_t named;
        cw_etl__images_stats(im, &files, &read, &named);
        CW_LOGI("%s: %zu of the trace's images found among its %zu files; %llu frame addresses "
                "named by their exports",
                r->path, read, files, (unsigned long long)named);
    }
    return rc;
}

/* stop and close are alike to each source's (etw/live.c, etw/snapshot.c) in form only. */
static void etl_stop(void *impl)
{
    atomic_store(&((cw_etl__reader_t *)impl)->stop, true);
}

static void etl_close(void *impl)
{
    etl_src_t *s = impl;
    if (!s) return;
    cw_etl__reader_close(&s->r);
    cw_etl__images_close(s->images);
    free(s);
}

/* The commit limit is RAM plus the page files. A kernel trace's system
 * configuration events give the RAM (SystemConfig CPU, MemSize) but no
 * page file, and no event carries the limit itself (docs/ETW.md). */
static int etl_commit_limit(void *impl, uint64_t *bytes, const char **why)
{
    (void)impl;
    *bytes = 0;
    *why = "an .etl does not carry the machine's commit limit (its system configuration events "
           "give the memory size but not the page files)";
    return CW_ENOENT;
}

/* Every source fills in this table (source.h): the tables are alike by design. */
const cw_source_ops_t cw_source_etl = {
    .name = "etl",
    .fixed_platform = "windows",
    .open = etl_open,
    .run = etl_run,
    .stop = etl_stop,
    .close = etl_close,
    .commit_limit = etl_commit_limit,
};
