/* info.c - cw_etl_info(): what `commitwatch etl info` reports of a trace,
 * read by the same two passes as the source (reader.c) with every event a
 * possible target of a stack, so joins are counted for all classes. */
#include <stdlib.h>

#include "sources/etl/etl_internal.h"

int cw_etl_info(const char *path, bool want_images, cw_etl_info_t **out, cw_diag_t *d)
{
    cw_etl_info_t *in = calloc(1, sizeof *in);
    cw_etl__reader_t r;
    if (!in) return cw_diag_set(d, CW_ENOMEM, "out of memory");
    int rc = cw_etl__reader_open(&r, path, NULL, in, d);
    r.want_images = want_images;
    if (rc == 0) rc = cw_etl__reader_run(&r, d);
    cw_etl__reader_close(&r);
    if (rc)
        cw_etl_info_free(in);
    else
        *out = in;
    return rc;
}

void cw_etl_info_free(cw_etl_info_t *in)
{
    if (!in) return;
    /* A process's cmdline is in its name's block. */
    for (size_t i = 0; i < in->nprocs; i++) free(in->procs[i].name);
    for (size_t i = 0; i < in->nimages; i++) free(in->images[i].name);
    free(in->procs);
    free(in->images);
    free(in->counts);
    free(in);
}
