/* config.h - the service's configuration file.
 *
 * Format: one `key = value` per line; `#` starts a comment; blank lines
 * are ignored; a key listed as repeatable may appear several times. The
 * keys are a declarative table in config.c (type, default, description);
 * an unknown key is a warning naming file:line, a bad value an error.
 * Command-line options override the file.
 *
 * Thread: the core thread (loaded at start and on SIGHUP). */
#ifndef COMMITWATCH_CONFIG_H
#define COMMITWATCH_CONFIG_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "commitwatch/error.h"
#include "commitwatch/store.h"

typedef struct cw_config {
    char *db;         /* database file */
    char *source;     /* "perf", "etw", "replay:PATH" */
    char *listen;     /* "127.0.0.1:8470" */
    char *token;      /* API token for state-changing endpoints; NULL = none */
    char *access_log; /* HTTP access log file; NULL = none */
    /* HTTP limits (cw_http_opts_t; docs/RELIABILITY.md). Read at start. */
    uint64_t http_threads, http_client_connections;
    int64_t http_request_timeout_ns, http_idle_timeout_ns;
    char *web_root;   /* dashboard files; NULL = built-in lookup */
    char **stacktags; /* rule files; none = the platform's defaults */
    size_t nstacktags, stacktags_cap;
    char *log_level; /* debug, info, warning, error */
    char *images;    /* etl source: folder of the trace's images; NULL = none */
    char *symbol_path; /* etw source: DbgHelp's symbol path; NULL = _NT_SYMBOL_PATH */
    cw_store_opts_t store;
    /* Short-lived instances stored folded (docs/DESIGN.md, "Short-lived
     * processes"); either 0 = off. Read at start only. */
    int64_t fold_lifetime_ns;
    uint64_t fold_size_bytes;
    /* perf source memory caps (docs/DESIGN.md, "Memory"); 0 = default. */
    uint64_t perf_ring_bytes, perf_queue_bytes, perf_unwind_procs;
    /* Alerts (docs/ALERTS.md). */
    char **alert_rules; /* rule files, repeatable */
    size_t nalert_rules, alert_rules_cap;
    bool alert_default_rules;     /* load the shipped default rules too */
    int64_t alert_interval_ns;    /* evaluation interval */
    int64_t alert_step_ns;        /* resolution of the series the engine keeps */
    int64_t alert_resend_ns;      /* re-send firing alerts to Alertmanager this often */
    int64_t alert_repeat_ns;      /* other channels: repeat a firing alert this often */
    uint64_t alert_rate_limit;    /* notifications per minute per channel */
    uint64_t heap_trace_max_running;    /* heap traces at once (heaptraces.h) */
    int64_t heap_trace_max_duration_ns; /* the longest heap trace one may ask for */
    uint64_t alert_retries;       /* webhook / Alertmanager attempts per notification */
    char *alertmanager_url;       /* "http://127.0.0.1:9093"; NULL = none */
    char *webhook_url;            /* NULL = none */
    char *alert_exec;             /* program run with the alert JSON on stdin; NULL = none */
    int64_t alert_exec_timeout_ns;
    char *alert_log;              /* "auto" (journald, else syslog; Windows: Event Log), "no" */
    char *external_url;           /* base of generatorURL links; NULL = http://LISTEN */
    /* The profile push (push.h; docs/FLEET.md). Read at start only. */
    char *profile_push_url;             /* NULL or "" = off */
    int64_t profile_push_period_ns;     /* whole seconds */
    char *profile_push_labels;          /* "k=v,k=v"; NULL = none */
    uint64_t profile_push_buffer_bytes; /* the queue's bound */
} cw_config_t;

/* Defaults (strings owned by c). 0 or CW_ENOMEM. */
int cw_config_init(cw_config_t *c);
void cw_config_free(cw_config_t *c);

/* Reads path over c. Unknown keys are warned about on warn (may be
 * NULL). 0, CW_EIO (cannot read) or CW_EPARSE with d naming file:line. */
int cw_config_load(cw_config_t *c, const char *path, FILE *warn, cw_diag_t *d);
/* The same from an open stream f (left open; its permissions are not
 * checked), path naming it in messages: what cw_config_load reads after
 * its checks (the fuzz target reads its input from memory through it). */
int cw_config_load_stream(cw_config_t *c, FILE *f, const char *path, FILE *warn, cw_diag_t *d);

/* cw_parse_duration() and cw_parse_size(), which read the duration and
 * size values, are in common.h (service/base/units.c): the alert rules
 * read the same units. */

/* Writes a commented default configuration file (for `install`). */
int cw_config_write_default(FILE *out);

#endif
