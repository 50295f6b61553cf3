/* status.h - what the running service says about itself (/api/health,
 * /metrics). One owner per figure: the service entry point (service.h)
 * writes every field but the store writer's (store_error*) and the
 * profile push's (push_*, push.h), which those threads write; HTTP
 * workers only read.
 *
 * Fields without _Atomic are set before the HTTP server starts and never
 * change afterwards; the atomics are written by their owner thread (the
 * core thread unless said) and read by any thread (relaxed: each is a
 * figure of its own). */
#ifndef COMMITWATCH_STATUS_H
#define COMMITWATCH_STATUS_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

/* The outcome of the last load of the configuration and its rule files
 * (docs/DESIGN.md, "Reload"): ok, or the first error, which file and line
 * (0 when the error has none, e.g. an unreadable file). */
typedef struct cw_status_config {
    bool ok;
    char error[1024];  /* what was wrong; "" when ok */
    char file[1024];   /* the file at fault; "" when ok or none */
    uint32_t line;     /* its line; 0 when ok or none */
    int64_t at_ns;     /* wall clock of the load */
    bool reload;       /* a reload (else the start) */
} cw_status_config_t;

typedef struct cw_status {
    char source[256]; /* "replay:PATH", "perf", "etw" */
    int64_t start_ns;      /* wall clock when the service started (started_ns) */
    int64_t start_mono_ns; /* monotonic clock then: uptime, which a wall step must not move */
    /* true for a replay: "now" in API times is the end of the last stored
     * bucket instead of the wall clock, so relative windows (-15m) show
     * the replayed data. */
    bool data_clock;
    _Atomic uint64_t events_ingested; /* events the pipeline applied (and stores) */
    _Atomic uint64_t source_records;  /* records the source read (perf: ring records) */
    _Atomic uint64_t events_lost;     /* events the source reported lost */
    _Atomic int64_t drift_bytes;      /* drift corrected (oracle vs tracker) */
    _Atomic bool ingest_done;         /* a replay has reached its end */
    /* The store writer's trouble (its thread writes these): CW_ENOSPC
     * while a full disk refuses a transaction that it retries, since
     * store_error_since_ns (wall); 0 when writing works. */
    _Atomic int store_error;
    _Atomic int64_t store_error_since_ns;

    /* ---- the configuration's last load (start or reload) ----
     * Written by the core thread (cw_status_config_set), read by any
     * thread (cw_status_config_get) under config_lock; loads_begun and
     * loads_done count the reloads requested and served, so that a
     * requester (POST /api/reload) can wait for the reload that read its
     * files: one begun after it asked. */
    atomic_flag config_lock;
    cw_status_config_t config;
    _Atomic uint64_t config_loads_begun;
    _Atomic uint64_t config_loads_done;
    /* Losses beside events_lost, and the corrections from the OS's own
     * figures (source.h, cw_source_drops_t; the core thread writes them
     * from the source's drops callback). last_resync_ns: INT64_MIN none. */
    _Atomic uint64_t records_foreign, records_unpaired, records_malformed;
    _Atomic uint64_t resyncs, corrections, corrected_bytes;
    _Atomic bool resync_pending;
    _Atomic int64_t last_resync_ns;
    /* ---- the source's state (docs/RELIABILITY.md, "A source that
     * fails"). The core thread writes it through cw_status_source_up()
     * and cw_status_source_down(); any thread reads it with
     * cw_status_source_get(). no_source is set before the HTTP server
     * starts (`commitwatch serve`: a database served with no source). */
    bool no_source;
    _Atomic bool source_up;             /* open and delivering (or at the end of its input) */
    _Atomic int64_t source_since_ns;    /* wall: when it went up or down; INT64_MIN: never */
    _Atomic uint32_t source_retries;    /* failed tries since it went down */
    _Atomic int64_t source_next_try_ns; /* wall: the next try; INT64_MIN: none planned */
    _Atomic uint32_t source_error_seq;  /* odd while source_error is being written */
    _Atomic char source_error[512];     /* why it is down ("" when up) */
    /* ---- the profile push (push.h; docs/FLEET.md). push_on is set
     * before the HTTP server starts; the push thread writes the rest. */
    bool push_on;
    _Atomic uint64_t push_sent, push_sent_bytes; /* profiles the store accepted (2xx), bytes */
    _Atomic uint64_t push_retries;               /* failed tries that are retried */
    _Atomic uint64_t push_dropped_full;   /* oldest profiles dropped past profile_push_buffer */
    _Atomic uint64_t push_dropped_rejected; /* profiles the store refused (4xx but 408, 429) */
    _Atomic uint64_t push_queued, push_queued_bytes; /* waiting now */
    _Atomic int64_t push_last_ok_ns;       /* wall: the last accepted push; INT64_MIN: none */
    _Atomic int64_t push_until_ns;         /* profiles are built up to here; INT64_MIN: none */
    _Atomic int push_last_status;          /* the last try's HTTP status; -1 no response; 0 none */
} cw_status_t;

/* A copy of the source's state, taken consistently (cw_status_source_get). */
typedef struct cw_source_state {
    bool up;
    int64_t since_ns, next_try_ns; /* INT64_MIN: unknown / none */
    uint32_t retries;
    char error[512];
} cw_source_state_t;

/* Zeroes st, copies source (truncated to fit), stamps start_ns (wall) and
 * start_mono_ns (monotonic). */
void cw_status_init(cw_status_t *st, const char *source, bool data_clock, int64_t start_ns,
                    int64_t start_mono_ns);

/* Publishes the outcome of a load (core thread). A reload's (c->reload)
 * also counts as done (config_loads_done). */
void cw_status_config_set(cw_status_t *st, const cw_status_config_t *c);
/* Copies the last outcome into *out. Any thread. */
void cw_status_config_get(cw_status_t *st, cw_status_config_t *out);
/* The source opened (or reopened) at wall time now: up, no error. Core
 * thread. */
void cw_status_source_up(cw_status_t *st, int64_t now);
/* The source is down since wall time since (kept from the first failure
 * while it stays down) because of error; retries failed tries so far,
 * the next at next_try (wall; INT64_MIN: none). Core thread. */
void cw_status_source_down(cw_status_t *st, const char *error, int64_t since, uint32_t retries,
                           int64_t next_try);
/* A consistent copy of the source's state; any thread. */
void cw_status_source_get(const cw_status_t *st, cw_source_state_t *out);

/* Nanoseconds since the service started, by the monotonic clock (mono_now:
 * cw_plat_mono_ns()): a step of the wall clock (NTP, an operator) does
 * not move it. */
static inline int64_t cw_status_uptime_ns(const cw_status_t *st, int64_t mono_now)
{
    return mono_now - st->start_mono_ns;
}

#endif
