/* service.h - the service: one entry point that owns the source, the
 * pipeline (stacks, tagger, tracker, aggregator), the store writer, the
 * HTTP server and the status they report.
 *
 * `commitwatch run` parses its arguments into cw_service_args_t and calls
 * cw_service_run(); a Windows service main calls the same function, and
 * its STOP / PARAMCHANGE controls call cw_service_stop() /
 * cw_service_reload(), as SIGTERM / SIGHUP do on Linux. One service runs
 * per process.
 *
 * DESIGN (threads):
 *   - core thread: the caller of cw_service_run(). Owns the source, stacks,
 *     tagger, tracker, aggregator and pipeline; builds batches and hands
 *     each to the writer (ownership moves); writes cw_status_t; performs
 *     reloads (pausing the writer, so it may use the store).
 *   - store writer thread (cw_writer): owns the read-write store while it
 *     runs.
 *   - HTTP workers (civetweb): their own read-only stores, and read the
 *     status atomics; never the ingest structures.
 *   - stop and reload requests arrive on any thread or in a signal
 *     handler: they only set flags and call the source's stop(). */
#ifndef COMMITWATCH_SERVICE_H
#define COMMITWATCH_SERVICE_H

#include <stdbool.h>
#include <stddef.h>

#include "commitwatch/error.h"

/* What the command line says. NULL / 0 / false: the configuration file's
 * value (or its default). Command-line values win over the file, at start
 * and on every reload. Everything is borrowed for the call. */
typedef struct cw_service_args {
    const char *config_path; /* `key = value` file, reloaded on request; NULL = none */
    const char *source;      /* "perf", "etw", "replay:PATH" */
    const char *db;
    const char *listen;
    const char *token;
    const char *const *stacktags; /* rule files; win over the config's */
    size_t nstacktags;
    const char *images; /* etl only: --images DIR; wins over the config's */
    bool rebase_now; /* replay only */
    double speed;    /* replay only; 0 = as fast as possible */
    bool no_http;
    bool exit_at_end; /* a replay exits at its end instead of serving on */
    /* `commitwatch serve`: no source; the database (db) is served
     * read-only until stopped, whatever its platform (source ignored). */
    bool serve;
    /* Called once on the core thread when the service is up (store open,
     * source open, HTTP listening), e.g. to report SERVICE_RUNNING. */
    void (*on_running)(void *ctx);
    void *ctx;
} cw_service_args_t;

/* Runs the service until its input ends (a replay: then it keeps serving
 * until stopped, unless exit_at_end or no_http), or until
 * cw_service_stop(). Blocks; the calling thread becomes the core thread.
 * On the way out the open bucket is stored, the writer drains and the
 * database is closed cleanly.
 * Returns 0, CW_EUSAGE (bad arguments or configuration; d says which), or
 * another CW_E* with d saying what failed and what to do. */
int cw_service_run(const cw_service_args_t *a, cw_diag_t *d);

/* Asks the running service to stop. Async-signal-safe; any thread. */
void cw_service_stop(void);
/* Asks it to reload its configuration file and stack-tag rules (stored
 * stacks are re-tagged when the rules changed). On an error the running
 * configuration stays, and the log says why. Async-signal-safe. */
void cw_service_reload(void);
/* True once a stop was requested (the flag the service polls). */
bool cw_service_stopping(void);

#endif
