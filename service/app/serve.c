/* serve.c - the HTTP server over the database, and the service without a
 * source (docs/DESIGN.md, "One path without a source"): `commitwatch
 * serve` (read-only), a live source that is down, the data of a replay
 * that has ended. Core thread; the HTTP workers run threads of their own
 * and read the database through their own connections. */
#include <inttypes.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "app/svc.h"
#include "commitwatch/log.h"

/* A configured HTTP timeout in ms for cw_http_opts_t: 0 (the default)
 * for 0, at least 1, and past an hour enough for cw_http_start to refuse. */
static unsigned http_ms(int64_t ns)
{
    if (ns <= 0) return 0;
    int64_t ms = ns / 1000000;
    return ms < 1 ? 1 : ms > 3600001 ? 3600001 : (unsigned)ms;
}

/* POST /api/reload (an HTTP worker): the same request as SIGHUP, served
 * by the core thread between events. */
static int http_reload(void *ctx, char *msg, size_t msglen)
{
    (void)ctx;
    cw_service_reload();
    if (msglen) msg[0] = '\0';
    return 0;
}

/* Starts the HTTP server (unless --no-http) over db_path, reading the
 * service's status. read_only (`serve`): no token, so no state-changing
 * request (silences, reload) is served, and no live maps. */
int cw__svc_http_start(svc_t *s, const cw_config_t *cfg, const char *db_path, const char **files,
                       size_t nfiles, bool read_only, cw_http_t **http, cw_diag_t *d)
{
    const cw_service_args_t *a = s->args;
    *http = NULL;
    if (a->no_http) return 0;
    cw_http_opts_t ho = {0};
    ho.listen = a->listen ? a->listen : cfg->listen;
    ho.db_path = db_path;
    ho.web_root = cfg->web_root;
    ho.token = read_only ? NULL : a->token ? a->token : cfg->token;
    ho.access_log = cfg->access_log;
    ho.threads = cfg->http_threads > CW_HTTP_MAX_THREADS ? CW_HTTP_MAX_THREADS + 1
                                                         : (unsigned)cfg->http_threads;
    ho.request_timeout_ms = http_ms(cfg->http_request_timeout_ns);
    ho.idle_timeout_ms = http_ms(cfg->http_idle_timeout_ns);
    ho.client_connections = cfg->http_client_connections > UINT32_MAX
                                ? UINT32_MAX
                                : (unsigned)cfg->http_client_connections;
    ho.rule_files = files; /* the startup rules */
    ho.nrule_files = (unsigned)nfiles;
    ho.status = &s->status;
    ho.on_reload = read_only ? NULL : http_reload;
    ho.maps = read_only ? NULL : s->maps;
    ho.heap = s->heaps ? &cw__svc_heap_http_ops : NULL;
    ho.heap_ctx = s->heaps;
    return cw_http_start(&ho, http, d);
}

/* The service with no source (docs/DESIGN.md, "One path without a
 * source"): it serves what is stored (HTTP workers, the alert engine's
 * thread) while this thread waits, until the monotonic time `until`
 * (INT64_MAX: for good) or a stop request. Reload requests are served
 * meanwhile when `reloads` (a database served read-only has nothing to
 * reload into: they are logged). Returns true when a stop was requested. */
bool cw__svc_serve_without_source(svc_t *s, int64_t until, bool reloads)
{
    while (!atomic_load(&cw__svc_stop_flag)) {
        if (atomic_load(&cw__svc_reload_flag)) {
            if (!reloads) {
                atomic_store(&cw__svc_reload_flag, false);
                CW_LOGI("reload requested: a database served read-only has nothing to reload");
            } else if (cw__svc_reload(s) != 0) {
                CW_LOGE("reload failed: %s", s->d->msg);
            }
        }
        if (s->pipe && !atomic_load(&s->status.ingest_done)) cw_pipeline_serve_maps(s->pipe);
        int64_t left = until == INT64_MAX ? INT64_MAX : until - cw_plat_mono_ns();
        if (left <= 0) return false;
        cw_plat_sleep_ns(left < 100000000 ? left : 100000000);
    }
    return true;
}

/* `commitwatch serve`: the database at db_path, read-only, with no
 * source: the HTTP server over it until stopped. Nothing opens the file
 * for writing (no writer, no alert engine, no journal, no migration; HTTP
 * takes no token). Any platform's database. */
int cw__svc_serve_stored(svc_t *s, const cw_config_t *cfg, const char *db_path, const char **files,
                         size_t nfiles, cw_diag_t *d)
{
    cw_store_t *ro = NULL;
    char *platform = NULL;
    cw_http_t *http = NULL;
    int rc = cw_store_open_readonly(db_path, &ro, d);
    if (rc == 0) rc = cw_store_meta_get(ro, "platform", &platform, d);
    cw_store_close(ro);
    if (rc != 0) return rc;
    s->status.no_source = true;
    if ((rc = cw__svc_http_start(s, cfg, db_path, files, nfiles, true, &http, d)) != 0) goto out;
    if (s->args->on_running) s->args->on_running(s->args->ctx);
    CW_LOGI("serving %s read-only (%s data), with no source, until stopped", db_path,
            platform ? platform : "no");
    cw__svc_serve_without_source(s, INT64_MAX, false);
    CW_LOGI("stopped");
out:
    cw_http_stop(http);
    free(platform);
    return rc;
}
