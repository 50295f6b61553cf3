/* svc.h - what the files of app/ share: the service's state (svc_t,
 * owned by the core thread), the process-wide requests (control.c) and
 * each file's functions that service.c, the composition root, calls.
 *
 *   service.c   the composition root: cw_service_run, its steps in order,
 *               the work between events, the end.
 *   control.c   stop and reload requests (any thread, signal handlers).
 *   reload.c    the configuration and rule files in force; the reload.
 *   alerting.c  the alert engine and its notifier.
 *   writing.c   the store writer: start (wired to the pipeline), stop.
 *   recovery.c  a database whose last run did not stop.
 *   health.c    memory figures, clock steps, a live source down and up.
 *   serve.c     the HTTP server; serving with no source.
 *   config.c    the configuration file's keys (config.h).
 *
 * Calls run one way: service.c -> serve.c -> reload.c -> alerting.c,
 * writing.c -> control.c; service.c -> health.c, recovery.c. */
#ifndef CW_APP_SVC_H
#define CW_APP_SVC_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "commitwatch/alerts.h"
#include "commitwatch/backoff.h"
#include "commitwatch/config.h"
#include "commitwatch/downtime.h"
#include "commitwatch/heaptraces.h"
#include "commitwatch/http.h"
#include "commitwatch/map.h"
#include "commitwatch/memstat.h"
#include "commitwatch/notify.h"
#include "commitwatch/pipeline.h"
#include "commitwatch/push.h"
#include "commitwatch/platform.h"
#include "commitwatch/retag.h"
#include "commitwatch/service.h"
#include "commitwatch/source.h"
#include "commitwatch/stacktags.h"
#include "commitwatch/status.h"
#include "commitwatch/store.h"

/* Everything the core thread owns while the service runs. */
typedef struct svc {
    const cw_service_args_t *args;
    cw_diag_t *d;
    cw_status_t status;   /* the one owner of every status figure */
    const char *platform; /* of the data: the source's */
    cw_store_t *store;    /* read-write; the writer's while it runs */
    cw_stacks_t *stacks;
    cw_tagger_t *tagger;
    cw_source_session_t src; /* the source; closed (src.impl NULL) while down */
    cw_writer_t *writer;
    cw_agg_t *agg;
    cw_pipeline_t *pipe;
    int64_t stored_end;        /* end of the last stored bucket, INT64_MIN if none */
    int64_t mem_at;            /* monotonic time of the last memory figures (on_tick) */
    int64_t clock_off;         /* wall - monotonic clock at the last tick (cw_clock_step) */
    cw_alert_engine_t *alerts; /* evaluates the alert rules on its own thread; NULL: none */
    cw_notifier_t *notifier;   /* delivers the engine's notices; NULL: none */
    cw_pusher_t *pusher;       /* pushes each period's profiles (push.h); NULL: off */
    cw_heaptraces_t *heaps;    /* heap traces (heaptraces.h); NULL: not a live source */
    cw_layerfeed_t *feed;      /* their seconds on the way to the store (with heaps) */
    bool feed_warned;          /* a drop of the heap layer was logged */
    bool live;                 /* the platform's live source traces this machine */
    const char *db_path;       /* the database (the config's or the command line's) */
    cw_config_t cfg;           /* the configuration file, read at the start */
    const char **files;        /* the stack-tag files in force (rules_from) */
    size_t nfiles;
    const char *spec;      /* --source's (or the configuration's, or the live default) */
    bool degrade;          /* a live source: its failures degrade the service */
    char *stored_platform; /* the database's platform, NULL for a new one */
    uint32_t next_proc;    /* the next instance id (open_store) */
    uint32_t stored_frames, stored_stacks; /* ids already stored: only newer ones are sent */
    cw_http_t *http;
    cw_mapreq_t *maps; /* HTTP workers' requests for live maps, served by the pipeline */
    /* A live source that fails (docs/RELIABILITY.md, "A source that
     * fails"): its retry schedule and since when it is down (wall). */
    cw_backoff_t backoff;
    int64_t down_since;
    /* The intervals the source was down, as stored (downtime.h), through
     * a side handle of this thread's own (the writer owns the read-write
     * one while it runs); opened at the first failure. */
    cw_store_t *side;
    cw_downtime_t down;
} svc_t;

/* A wall-clock step larger than this is noted in the log. */
#define CLOCK_STEP_NOTE_NS CW_NS_PER_S

/* ---- control.c ---------------------------------------------------------- */

/* Set by cw_service_stop() / cw_service_reload(); read by the core thread
 * (a reload request is cleared by cw__svc_reload when it starts). */
extern atomic_bool cw__svc_stop_flag;
extern atomic_bool cw__svc_reload_flag;
/* The running service's source session and writer (NULL: none), for
 * cw_service_stop(); set and cleared by the core thread. */
extern cw_source_session_t *_Atomic cw__svc_session;
extern cw_writer_t *_Atomic cw__svc_writer;

/* ---- reload.c ----------------------------------------------------------- */

/* The stack-tag rule files in force: the command line's, else the
 * config's. *files (malloc'd array, borrowed strings) is freed by the
 * caller. 0 or CW_ENOMEM. */
int cw__svc_rules_from(const cw_service_args_t *a, const cw_config_t *cfg, const char ***files,
                       size_t *n);
void cw__svc_apply_log_level(const cw_config_t *cfg);
/* Loads the configuration file (if any) over the defaults. */
int cw__svc_load_config(const cw_service_args_t *a, cw_config_t *cfg, cw_diag_t *d);
/* Re-tags the stored stacks when the tagger's rules differ from the
 * database's (the caller owns the store: the writer is not running). */
int cw__svc_retag(svc_t *s, cw_diag_t *d);
/* Records the rule files in force in the database (meta 'rule_files'),
 * for /api/tags. The caller owns the store. */
int cw__svc_record_rules(svc_t *s, const char *const *files, size_t n, cw_diag_t *d);
/* The configuration's alert rules (reload.c says how strict decides what
 * a bad rule does); the first fault goes to *c. 0, CW_ENOMEM, or on a
 * strict load CW_EPARSE / CW_EIO with rs freed. */
int cw__svc_alert_rules_load(const cw_config_t *cfg, cw_alert_rules_t *rs, bool strict,
                             cw_status_config_t *c);
/* A reload asked for (cw__svc_reload_flag): 0, or an error that stops the
 * service (the writer could not be restarted), with s->d set. */
int cw__svc_reload(svc_t *s);

/* ---- heaptracing.c ------------------------------------------------------ */

/* Starts s->heaps when the source is the live one (else leaves it NULL).
 * 0, or CW_ENOMEM with s->d set. */
int cw__svc_heaps_start(svc_t *s);
/* The heap layer's batches the traces pushed, into the aggregator's open
 * bucket (layerfeed.h). Core thread, between events. */
void cw__svc_heaps_drain(svc_t *s);
/* Ends every trace and drains their last seconds (before the last bucket
 * is flushed); asks are refused from then on. Core thread. */
void cw__svc_heaps_end(svc_t *s);
/* The HTTP server's hooks into s->heaps (ctx: s->heaps). */
extern const cw_http_heap_ops_t cw__svc_heap_http_ops;
/* The alert engine's on_fire (ctx: s->heaps): the incident capsule. */
void cw__svc_heap_on_fire(void *ctx, const cw_alert_fire_t *f);

/* ---- alerting.c --------------------------------------------------------- */

/* Records the commit limit the alerts forecast against for this data
 * (CW_COMMIT_LIMIT_META_KEY). The caller owns the store. */
int cw__svc_record_commit_limit(svc_t *s, const cw_source_ops_t *ops, void *src, cw_diag_t *d);
/* The alert rules in force (borrowed): at the start (startd given: bad
 * delivery settings stop it with CW_EINVAL) and on each reload (startd
 * NULL). Logs what fails. */
int cw__svc_alerts_apply(svc_t *s, const cw_config_t *cfg, const cw_alert_rules_t *rules,
                         cw_diag_t *startd);
void cw__svc_alerts_stop(svc_t *s);

/* ---- writing.c ---------------------------------------------------------- */

/* Starts the store writer over s->store (with its journal and hooks) and
 * points the pipeline (if built) at it. 0 or the writer's error. */
int cw__svc_writer_start(svc_t *s);
/* Stops it (the pipeline then points at no writer); its error with d. */
int cw__svc_writer_stop(svc_t *s, cw_diag_t *d);

/* ---- recovery.c --------------------------------------------------------- */

/* The batches a killed run had queued, stored from its journal. */
int cw__svc_recover_journal(svc_t *s, cw_diag_t *d);
/* The instances a run that did not stop left open, ended where its data
 * ends (s->stored_end moves there). */
int cw__svc_end_open(svc_t *s, cw_diag_t *d);

/* ---- health.c ----------------------------------------------------------- */

/* The core thread's memory figures: once a second, or now. */
void cw__svc_publish_memory(svc_t *s, bool now);
/* Notes a step of the wall clock in the log. */
void cw__svc_note_clock_step(svc_t *s);
/* Stores that the source is down from `at` (down) or up again (!down). */
void cw__svc_record_downtime(svc_t *s, bool down, int64_t at);
/* The live source failed (why; the data ends at `at`) / is open again. */
void cw__svc_source_failed(svc_t *s, const char *name, const char *why, int64_t at);
void cw__svc_source_opened(svc_t *s, const char *name);

/* ---- serve.c ------------------------------------------------------------ */

/* Starts the HTTP server (unless --no-http); *http NULL when not. */
int cw__svc_http_start(svc_t *s, const cw_config_t *cfg, const char *db_path, const char **files,
                       size_t nfiles, bool read_only, cw_http_t **http, cw_diag_t *d);
/* Serves what is stored with no source until the monotonic time `until`
 * or a stop; true when a stop was requested. */
bool cw__svc_serve_without_source(svc_t *s, int64_t until, bool reloads);
/* `commitwatch serve`: db_path read-only, no source, until stopped. */
int cw__svc_serve_stored(svc_t *s, const cw_config_t *cfg, const char *db_path, const char **files,
                         size_t nfiles, cw_diag_t *d);

#endif
