/* store_stub.c - stands in for the SQLite store until store.c lands; CMake
 * drops this file as soon as service/core/store.c exists. Every call
 * fails with CW_ENOSYS and says so. */
#include "commitwatch/store.h"

#include <stddef.h>

static int nosys(cw_diag_t *d)
{
    return cw_diag_set(d, CW_ENOSYS, "the SQLite store is not built into this commitwatch yet");
}

void cw_store_opts_default(cw_store_opts_t *o)
{
    o->retention_ns[0] = o->retention_ns[1] = o->retention_ns[2] = 0;
    o->size_cap_bytes = 0;
}
int cw_store_open(const char *path, const cw_store_opts_t *opts, cw_store_t **out, cw_diag_t *d)
{
    (void)path, (void)opts, (void)out;
    return nosys(d);
}
int cw_store_open_readonly(const char *path, cw_store_t **out, cw_diag_t *d)
{
    (void)path, (void)out;
    return nosys(d);
}
void cw_store_close(cw_store_t *s)
{
    (void)s;
}
int cw_store_schema_version(void)
{
    return 0;
}
int cw_store_load_state(cw_store_t *s, cw_stacks_t *stacks, uint32_t *next_proc_id, int64_t *end_ns,
                        cw_diag_t *d)
{
    (void)s, (void)stacks, (void)next_proc_id, (void)end_ns;
    return nosys(d);
}
int cw_store_write(cw_store_t *s, const cw_batch_t *b, cw_diag_t *d)
{
    (void)s, (void)b;
    return nosys(d);
}
int cw_store_report(cw_store_t *s, int64_t from_ns, int64_t to_ns, bool with_frames,
                    cw_report_t **out, cw_diag_t *d)
{
    (void)s, (void)from_ns, (void)to_ns, (void)with_frames, (void)out;
    return nosys(d);
}
int cw_store_meta_set(cw_store_t *s, const char *key, const char *value, cw_diag_t *d)
{
    (void)s, (void)key, (void)value;
    return nosys(d);
}
int cw_store_meta_get(cw_store_t *s, const char *key, char **out, cw_diag_t *d)
{
    (void)s, (void)key, (void)out;
    return nosys(d);
}
struct sqlite3 *cw_store_db(cw_store_t *s)
{
    (void)s;
    return NULL;
}
int cw_writer_start(cw_store_t *s, uint32_t max_queued, cw_writer_t **out)
{
    (void)s, (void)max_queued, (void)out;
    return CW_ENOSYS;
}
int cw_writer_submit(cw_writer_t *w, cw_batch_t *b)
{
    (void)w;
    cw_batch_free(b);
    return CW_ENOSYS;
}
int cw_writer_stop(cw_writer_t *w, cw_diag_t *d)
{
    (void)w;
    return nosys(d);
}
