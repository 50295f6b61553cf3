/* alerts.h - alert rules, their evaluation over the stored buckets, the
 * leak score and the time to a limit (docs/ALERTS.md).
 *
 * Stage: service/alerts (library cw_alerts), above the store, below http
 * and app. Everything here is plain C over the store's read API; the SQL
 * of the alert tables is the store's (alertdb.h).
 *
 * The model. A rule selects processes (name globs, exclusions) and tags,
 * and groups them into series: one per (rule, process instance or name,
 * tag), or one per rule for the machine. Evaluation happens at instants T
 * that are multiples of the evaluation interval (10 s by default), in
 * order, each time over exactly the buckets stored before T: the same
 * rules over the same stored history give the same transitions, live, after
 * a restart, or in a backtest.
 *
 * States per series: inactive -> pending (condition true for less than
 * `for`) -> firing (warning or critical; severity rises at once and falls
 * only below `clear` x its threshold) -> resolved (false for
 * `keep_firing_for`), which is inactive again. A process that exits while
 * firing resolves with reason "process exited".
 *
 * Threads: the engine (cw_alert_engine_t) runs on its own thread, with its
 * own store handles; rules sets are immutable once parsed and may be shared
 * read-only by any thread (an HTTP worker's backtest parses its own copy or
 * borrows the engine's under the engine's lock, see cw_alert_engine_rules).
 */
#ifndef COMMITWATCH_ALERTS_H
#define COMMITWATCH_ALERTS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "commitwatch/error.h"
#include "commitwatch/store.h"

/* ---- rules ---------------------------------------------------------------- */

typedef enum cw_alert_metric {
    CW_AM_IMPACTING_RATE,  /* impacting bytes of the window, per hour */
    CW_AM_OUTSTANDING,     /* outstanding bytes at T */
    CW_AM_TRANSIENT_RATE,  /* bytes (or commits, by the thresholds' unit) released
                              within the window they were committed in, per hour */
    CW_AM_LEAK_SCORE,      /* 0..1 */
    CW_AM_TIME_TO_LIMIT,   /* seconds until the limit at the current trend */
    CW_AM_SOURCE_DOWN      /* 1 while the live source was down at T, else 0 (downtime.h;
                              group_by = machine): the service's own state, as stored */
} cw_alert_metric_t;

typedef enum cw_alert_group { CW_AG_INSTANCE, CW_AG_NAME, CW_AG_MACHINE } cw_alert_group_t;

typedef enum cw_alert_limit_kind {
    CW_AL_MACHINE, /* the machine's commit limit (advisory on Linux unless overcommit = 2) */
    CW_AL_PROCESS, /* the process's own limit (job object; RLIMIT_AS), else the machine's */
    CW_AL_SIZE     /* a configured size (limit = 4GiB) */
} cw_alert_limit_kind_t;

typedef enum cw_alert_severity { CW_SEV_NONE = 0, CW_SEV_WARNING = 1, CW_SEV_CRITICAL = 2 } cw_alert_severity_t;

typedef struct cw_alert_label {
    char *name, *value; /* owned */
} cw_alert_label_t;

/* One `[rule NAME]` section. Every string is owned by the rule set. */
typedef struct cw_alert_rule {
    char *name;
    char *file; /* where it was defined */
    int line;
    char **process; /* name globs; "!glob" excludes; none = every process */
    size_t nprocess;
    char **tag; /* tag names or globs; none = every tag */
    size_t ntag;
    bool tags_summed;        /* `tag_by = all`: one series over the matching tags */
    cw_alert_group_t group_by;
    cw_alert_metric_t metric;
    bool count_unit;         /* transient_rate thresholds in commits per hour */
    int64_t window_ns;       /* default 1h */
    bool below;              /* fire when the value is below the thresholds (`< 48h`) */
    bool has_warn, has_crit;
    double warn, crit;       /* in the metric's unit: bytes, bytes/h, commits/h, 1, s */
    int64_t for_ns;          /* default 0 */
    int64_t keep_firing_for_ns; /* default 0 */
    double clear;            /* 0 < clear <= 1, default 1 (no hysteresis); for `below`
                                rules the value must rise above threshold / clear */
    uint64_t min_outstanding; /* bytes; default 0 */
    int64_t warmup_ns;       /* ignore a process younger than this; default 0 */
    cw_alert_limit_kind_t limit_kind; /* time_to_limit, and the forecast of every rule */
    uint64_t limit_bytes;    /* CW_AL_SIZE */
    double min_leak_score;   /* an extra condition on any metric; 0 = none */
    double min_impacting_rate; /* bytes/h: an extra condition on any metric (the
                                  "impacting floor"); 0 = none */
    int64_t heap_trace_ns;   /* `heap_trace = 5m`: when a series starts firing, a heap
                                trace of its process this long (the incident capsule,
                                heaptraces.h); 0 = none */
    cw_alert_label_t *labels;
    size_t nlabels;
    char *summary; /* may hold {process} {pid} {tag} {value} {threshold}; NULL = generated */
    char *text;    /* the section as written, from its `[rule NAME]` line to its last
                      key line (comments inside kept): for the API and backtests */
    char hash[17]; /* FNV-1a 64 (hex) of the canonical text: the name and the
                      `key=value` lines, trimmed, sorted by key, without comments;
                      so comments, spacing and key order do not change it */
} cw_alert_rule_t;

typedef struct cw_alert_rules {
    cw_alert_rule_t *v;
    size_t n;
    char hash[17]; /* of the rules' text, hex: state is kept per rule name and hash.
                      FNV-1a 64 over every rule's name and hash, in order. */
} cw_alert_rules_t;

/* Limits on what a rules file may hold (a hostile or broken file costs at
 * most this much): longer lines and rules past the count are refused like
 * any bad rule; a larger file is refused whole (CW_ERANGE). */
#define CW_ALERT_MAX_LINE 4096          /* bytes per line, newline excluded */
#define CW_ALERT_MAX_RULES 1000         /* rules per rule set */
#define CW_ALERT_MAX_LIST 64            /* process globs, tags, labels per rule */
#define CW_ALERT_MAX_FILE (4u << 20)    /* bytes per rules file */

/* Parses one rules file into rs (appending). A bad rule is refused with
 * one line per fault, "FILE:LINE: rule NAME: what is wrong", written to
 * warn (may be NULL), counted once in *nbad (may be NULL; added to), and
 * the rest still load; text outside a section is a fault too ("FILE:LINE:
 * what is wrong"). Names must be unique over the whole set: a later rule
 * of an existing name is refused. 0, CW_EIO (cannot read the file),
 * CW_ERANGE (larger than CW_ALERT_MAX_FILE), CW_EPARSE (a NUL byte: not a
 * text file) with d saying so, or CW_ENOMEM. On an error rs holds what it
 * held before. When it returns 0 after faults, d (may be NULL) holds the
 * first fault's line, as written to warn (a reload refuses the file). */
int cw_alert_rules_load(cw_alert_rules_t *rs, const char *path, FILE *warn, unsigned *nbad,
                        cw_diag_t *d);
/* Same, from text (tests; `name` stands for the file in messages). */
int cw_alert_rules_parse(cw_alert_rules_t *rs, const char *name, const char *text, FILE *warn,
                         unsigned *nbad, cw_diag_t *d);
void cw_alert_rules_free(cw_alert_rules_t *rs); /* frees the contents; accepts zeroed */
/* A deep copy of src into dst (which is overwritten, not freed). 0 or
 * CW_ENOMEM (dst then zeroed). */
int cw_alert_rules_copy(cw_alert_rules_t *dst, const cw_alert_rules_t *src);
/* The rule of that name, or NULL. Borrowed from rs. */
const cw_alert_rule_t *cw_alert_rules_find(const cw_alert_rules_t *rs, const char *name);
/* "impacting_rate", ...; the names the rules file uses. */
const char *cw_alert_metric_name(cw_alert_metric_t m);
/* The shipped defaults (docs/ALERTS.md, "Default rules"), as text. */
const char *cw_alert_default_rules(void);

/* "50MiB/h", "2GiB", "< 48h", "0.7", "5000/h": a threshold of metric m.
 * *below is set by a leading '<' (cleared by '>' or no sign; a
 * time_to_limit threshold is always below: its '<' may be left out);
 * *count_unit by a bare count per hour (transient_rate only). Units by
 * metric: impacting_rate and transient_rate SIZE/h or SIZE/d (bytes per
 * hour), transient_rate also COUNT/h or COUNT/d; outstanding SIZE;
 * leak_score a number in 0..1; time_to_limit a duration (seconds out).
 * 0 or -1 (bad text, or a unit that does not fit m). Pure. */
int cw_alert_parse_threshold(cw_alert_metric_t m, const char *s, double *value, bool *below,
                             bool *count_unit);

/* Shell-style glob: '*', '?', '[...]'. Pure. */
bool cw_alert_glob(const char *pattern, const char *text);

/* ---- the leak score ------------------------------------------------------- */

/* The components of one series' leak score over its window; docs/ALERTS.md,
 * "The leak score", gives the formula. */
typedef struct cw_leak_score {
    double score;        /* 0..1 */
    double slope;        /* Theil-Sen slope of outstanding, bytes/h */
    double slope_lo, slope_hi; /* its ~95 % confidence interval, bytes/h */
    double mk_z;         /* Mann-Kendall z on the coarse points */
    double mk_p;         /* its two-sided p-value */
    double floor_slope;  /* Theil-Sen slope of per-interval minima, bytes/h */
    double stay_share;   /* impacting / committed over the window, 0..1 */
    double plateau;      /* recent slope (middle third to last third) / whole-window
                            slope, clamped to 0..1 */
    double step_fit;     /* how much better one step fits than a line:
                            1 - SSE(step) / SSE(line), 0..1 (a one-off step: near 1) */
    double recent;       /* the rise over the recent span / what the whole-window slope
                            predicts for it, clamped to 0..1 (1: no recent span) */
    double cap;          /* the cap applied for plateau, recent flatness and step, 0..1 */
    uint32_t points;     /* points used */
} cw_leak_score_t;

/* Scores n points (t_ns[i], outstanding[i]) taken at the ends of equal
 * steps over the window, with the window's committed and impacting bytes;
 * recent_ns is the recent span whose flatness caps the score (a rule's,
 * cw_leak_recent_ns; a stair's longest step in the window when longer;
 * 0 or negative, or a series younger than the span and 3 steps: no such
 * cap).
 * Pure, no allocation, a few microseconds for any n (the points are
 * averaged into at most 32 groups before the O(n^2) parts; n up to
 * CW_LEAK_MAX_POINTS is the engine's use). Fewer than 4 points, times not
 * increasing, or a negative outstanding value: every field 0 (no score). */
#define CW_LEAK_MAX_POINTS 512
void cw_leak_score(const int64_t *t_ns, const int64_t *outstanding, size_t n, int64_t committed,
                   int64_t impacting, int64_t recent_ns, cw_leak_score_t *out);

/* The recent span of rule r's leak score: its `for`, at least a twelfth and
 * at most a third of its window (docs/ALERTS.md, "The leak score"). Pure. */
int64_t cw_leak_recent_ns(const cw_alert_rule_t *r);

/* ---- time to limit -------------------------------------------------------- */

typedef struct cw_limit_info {
    bool known;
    bool advisory;      /* Linux CommitLimit while vm.overcommit_memory != 2 */
    uint64_t limit;     /* bytes */
    uint64_t used;      /* bytes counted against it now */
    const char *source; /* static: "CommitLimit", "RLIMIT_AS", "job object", "configured" */
} cw_limit_info_t;

typedef struct cw_time_to_limit {
    double median_s; /* at the median slope; INFINITY when not growing */
    double upper_s;  /* at the upper slope (the sooner); INFINITY when not growing */
    uint64_t headroom; /* bytes left */
    cw_limit_info_t limit;
} cw_time_to_limit_t;

/* headroom / slope, in seconds, for both slopes (bytes/h): median_s from
 * slope_median, upper_s from the larger of the two (so upper_s <=
 * median_s); INFINITY for a slope <= 0 (or NaN); 0 when headroom is 0 (at
 * the limit now, growing or not). Sets median_s, upper_s and headroom;
 * leaves out->limit as it is (cw_alert_limit fills it). Pure. */
void cw_time_to_limit(uint64_t headroom, double slope_median, double slope_upper,
                      cw_time_to_limit_t *out);

/* Bytes left under a limit: limit - used, 0 when used >= limit or the
 * limit is unknown. Pure. */
uint64_t cw_limit_headroom(const cw_limit_info_t *l);

/* The machine's commit limit now (platform.h, cw_plat_commit_limit):
 * Linux /proc/meminfo CommitLimit and Committed_AS, advisory unless
 * vm.overcommit_memory = 2; Windows GetPerformanceInfo CommitLimit and
 * CommitTotal. Reads the OS (a file read, some microseconds): call it once
 * per evaluation and pass the result to cw_alert_limit, not once per
 * series. 0, or CW_E* with out->known false. Any thread. */
int cw_alert_machine_limit(cw_limit_info_t *out);

/* Whose commit limit the data's machine has, in the database's meta
 * (written by the service at each start from its source; read by the
 * engine and backtests): "live" (or absent) the machine the service runs
 * on (cw_alert_machine_limit); a decimal byte count, a recorded machine's
 * (a trace header's commit_limit; used = the series' outstanding bytes);
 * "none", a recorded input that does not tell it: rules against the
 * machine's or a process's limit have no value (never fire). */
#define CW_COMMIT_LIMIT_META_KEY "commit_limit"

/* The limit rule r's series are forecast against (its `limit`):
 *  - CW_AL_SIZE: the configured size; used = series_outstanding.
 *  - CW_AL_MACHINE: *machine (from cw_alert_machine_limit; NULL = read it
 *    now). For any series, per process or not, the headroom is the
 *    machine's free commit (limit - used): a process can grow only into it.
 *  - CW_AL_PROCESS: the process pid's own limit (Linux: RLIMIT_AS, used =
 *    its address space, VmSize; Windows: its job's per-process memory
 *    limit, used = its private commit, knowable only for commitwatch's own
 *    process, docs/ALERTS.md), else, and for pid 0, the machine's as above.
 * 0 with out filled (out->known false when no limit can be read), or the
 * platform's CW_E* with out->known false. Any thread. */
int cw_alert_limit(const cw_alert_rule_t *r, uint32_t pid, uint64_t series_outstanding,
                   const cw_limit_info_t *machine, cw_limit_info_t *out);

/* ---- notices (what the engine hands to delivery, notify.h) --------------- */

/* One alert to deliver: a transition of a series, or a re-send while it
 * fires. Built by the engine for series that no silence matches (a
 * silenced series' transitions are stored and not notified). Everything
 * is owned by the engine and valid only during the on_notices call; a
 * notifier that keeps one copies it (notify.h). */
typedef struct cw_alert_notice {
    uint64_t series_id;          /* alert_series.id (alertdb.h) */
    uint64_t transition_id;      /* alert_transitions.id; 0 for a re-send */
    bool resolved;               /* status "resolved" (else "firing") */
    bool resend;                 /* a repeat of a firing alert, no transition */
    cw_alert_severity_t severity;
    const char *rule;
    const char *reason;          /* the transition's reason; NULL for a re-send */
    /* Labels, sorted by name: alertname, severity, process, pid (instance
     * series), tag, and the rule's labels; annotations: summary,
     * description, value, threshold, leak_score, time_to_limit. */
    const cw_alert_label_t *labels;
    size_t nlabels;
    const cw_alert_label_t *annotations;
    size_t nannotations;
    const char *process; /* NULL for the machine */
    uint32_t pid;        /* 0 unless grouped by instance */
    const char *tag;     /* NULL when the tags are summed */
    double value, threshold, leak_score, ttl_s;
    int64_t starts_ns;   /* when it started firing */
    int64_t ends_ns;     /* when it resolved; 0 while firing */
    int64_t ts_ns;       /* the evaluation instant that produced it */
    char fingerprint[17]; /* of the labels, as Prometheus computes it: hex */
    const char *generator_url; /* link to the alert in the dashboard; may be NULL */
} cw_alert_notice_t;

/* Prometheus' label-set fingerprint (FNV-1a 64 of the sorted names and
 * values, 0xff after each), as 16 hex digits. Pure. */
void cw_alert_fingerprint(const cw_alert_label_t *labels, size_t n, char out[17]);

/* ---- evaluation ----------------------------------------------------------- */

typedef enum cw_alert_state {
    CW_AS_INACTIVE = 0,
    CW_AS_PENDING = 1,
    CW_AS_FIRING = 2
} cw_alert_state_t;

const char *cw_alert_state_name(cw_alert_state_t s);      /* "inactive", "pending", "firing" */
const char *cw_alert_severity_name(cw_alert_severity_t s); /* "none", "warning", "critical" */

/* One transition, as stored (alertdb.h) and notified (notify.h). */
typedef struct cw_alert_transition {
    int64_t ts_ns;
    cw_alert_state_t from, to;
    cw_alert_severity_t severity; /* after the transition (the last one when resolving) */
    double value, threshold;
    double leak_score;   /* NAN when not computed */
    double ttl_s;        /* time to limit at the median slope; INFINITY / NAN */
    const char *reason;  /* static: "condition", "for elapsed", "severity rose",
                            "severity fell", "resolved", "process exited",
                            "condition false" (pending -> inactive), "tracking ended"
                            (an instance's tracking ended and later data came:
                            a restart), "rule removed" (or changed, on a reload) */
} cw_alert_transition_t;

typedef struct cw_alert_engine cw_alert_engine_t;

/* A series that started firing under a rule with heap_trace: what the
 * service needs to trace its process (valid during the call only). */
typedef struct cw_alert_fire {
    int64_t series_id;   /* alert_series.id: the alert's id in the API */
    const char *rule;
    int64_t heap_trace_ns;
    uint32_t pid, proc;  /* 0 unless the rule groups by instance */
    const char *process; /* NULL for the machine */
    int64_t ts_ns;       /* the evaluation instant */
} cw_alert_fire_t;

typedef struct cw_alert_engine_opts {
    const char *db_path;        /* the database the service writes */
    int64_t interval_ns;        /* evaluation interval; 0 = 10 s */
    int64_t step_ns;            /* resolution of the kept series; 0 = 1 min */
    /* Called on the engine thread after each evaluation that produced
     * transitions or re-sends; see notify.h. May be NULL. */
    void (*on_notices)(void *ctx, const cw_alert_notice_t *v, size_t n);
    void *ctx;
    const char *generator_url;  /* base of the dashboard link; NULL = none */
    int64_t resend_ns;          /* firing alerts are notified again this often; 0 = 1 min */
    /* Called on the engine thread for each series that starts firing
     * under a rule with heap_trace, when the instant is recent (within
     * two evaluation intervals and a step of the wall clock: not a
     * catch-up over past data, whose process may be gone or its pid
     * reused). May be NULL. */
    void (*on_fire)(void *ctx, const cw_alert_fire_t *f);
    void *fire_ctx;
} cw_alert_engine_opts_t;

/* Starts the engine thread over rules (copied). 0, or CW_E* with d. */
int cw_alert_engine_start(const cw_alert_engine_opts_t *o, const cw_alert_rules_t *rules,
                          cw_alert_engine_t **out, cw_diag_t *d);
/* Replaces the rules (a reload). Series of rules whose name and text are
 * unchanged keep their state. Any thread. */
int cw_alert_engine_set_rules(cw_alert_engine_t *e, const cw_alert_rules_t *rules, cw_diag_t *d);
/* Evaluates every instant up to the end of the stored data, then returns
 * (used before a replay exits). Any thread. */
void cw_alert_engine_drain(cw_alert_engine_t *e);
/* Wakes the engine: buckets were stored (the writer calls it). Any thread. */
void cw_alert_engine_kick(cw_alert_engine_t *e);
/* Stops and joins the thread, frees e. Accepts NULL. */
void cw_alert_engine_stop(cw_alert_engine_t *e);

/* What `rule` would have done over the stored history [from, to): its
 * transitions, per series, evaluated from a clean state at from - window.
 * s is the caller's (read-only) handle. Results owned by the caller. */
typedef struct cw_backtest_series {
    char *key;     /* "instance:ID|TAG", "name:NAME|TAG", "machine|TAG" */
    char *process; /* name; NULL for the machine */
    uint32_t proc, pid; /* 0 unless grouped by instance */
    char *tag;
    cw_alert_transition_t *tr;
    size_t ntr;
} cw_backtest_series_t;

typedef struct cw_backtest {
    int64_t from_ns, to_ns, interval_ns;
    uint64_t evaluations;
    cw_backtest_series_t *series; /* those with at least one transition */
    size_t nseries;
} cw_backtest_t;

int cw_alert_backtest(cw_store_t *s, const cw_alert_rule_t *rule, int64_t from_ns, int64_t to_ns,
                      int64_t interval_ns, cw_backtest_t **out, cw_diag_t *d);
void cw_backtest_free(cw_backtest_t *b); /* accepts NULL */

#endif
