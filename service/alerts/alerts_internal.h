/* alerts_internal.h - what the evaluation's files share (series.c: the
 * per-step series kept per process instance and tag; eval.c: the state
 * machine and one evaluation of the rules; notices.c: labels, annotations
 * and notices; silence.c: silences' matchers; engine.c: the thread and
 * persistence; backtest.c). Not a public header: service/alerts, tests
 * and benchmarks only. docs/ALERTS.md, "Evaluation and states", defines
 * the figures. */
#ifndef COMMITWATCH_ALERTS_INTERNAL_H
#define COMMITWATCH_ALERTS_INTERNAL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "commitwatch/alertdb.h"
#include "commitwatch/alerts.h"
#include "commitwatch/downtime.h"
#include "commitwatch/keymap.h"

/* ---- series.c: the kept series ----------------------------------------- */

/* Byte figures of a step are kept in 4 KiB units (commits are whole pages
 * on both platforms; a figure that is not is rounded to the nearest unit),
 * so a uint32 holds 16 TiB. */
#define CW__UNIT_SHIFT 12
#define CW__UNIT ((int64_t)1 << CW__UNIT_SHIFT)

/* A step's figures as the rules read them (and a wide ring's step: 20
 * bytes). */
typedef struct cw__slot {
    uint32_t committed;   /* units committed in the step */
    uint32_t commits;     /* commit events of the step */
    uint32_t out;         /* units outstanding at the step's end */
    uint32_t rem;         /* units of the step's commits still outstanding */
    uint32_t rem_commits; /* commit events of the step not fully released */
} cw__slot_t;

/* A narrow ring's step: the same figures in 8 bytes, for a series whose
 * every step in the ring fits (at most 256 MiB outstanding and committed
 * in a step, 255 commits in a step): nearly every series. A step that
 * does not fit makes its ring wide first (series.c, "The rings"). */
typedef struct cw__nslot {
    uint16_t committed, out, rem;
    uint8_t commits, rem_commits;
} cw__nslot_t;

typedef struct cw__aproc {
    uint32_t id, pid;
    int64_t start, exit, ended; /* CW_TS_NEVER when not */
    uint32_t name;              /* index in the names */
    /* An aggregate (series.c, "Compaction"): the sum of ended instances of
     * one name, tag, birth step and kind of end (exit or tracking ended);
     * id is its serial, pid 0, start the earliest member's, exit and ended
     * the last-ending member's. Never alive, never in an instance group. */
    bool agg;
} cw__aproc_t;

/* One (instance, tag): its exact outstanding now and its ring of steps. */
typedef struct cw__abase {
    uint32_t proc; /* index in procs */
    uint32_t tag;  /* index in tags */
    int64_t cur;   /* outstanding bytes now */
    int64_t birth; /* first step it has data in */
    /* Steps after `last` are implicit: nothing committed or released,
     * outstanding `cur` (what the step's rows would have left). Steps up
     * to it are in ring[step % cap]; cap grows (up to the set's len) as
     * the explicit steps in the window need, so an instance active for a
     * few steps costs a few slots, not len (series.c). The ring holds
     * cw__nslot_t, or cw__slot_t once `wide`; owned. */
    int64_t last;
    uint32_t cap;
    bool wide;
    void *ring;
} cw__abase_t;

/* Interned strings: dense indexes, stable for the set's life. */
typedef struct cw__strtab {
    char **v;
    size_t n, cap;
    cw_keymap_t map; /* (hash, k) -> index */
} cw__strtab_t;

typedef struct cw__aset {
    int64_t step;   /* ns */
    uint32_t len;   /* ring length in steps */
    int64_t head;   /* step of the newest data; INT64_MIN before the first feed */
    int64_t fed_to; /* rows fed up to here (exclusive) */
    uint32_t max_proc_id;
    cw__strtab_t names, tags;
    cw__aproc_t *procs;
    size_t nprocs, proccap;
    cw_keymap_t procmap; /* (id, 0) -> procs index */
    cw__abase_t *bases;
    size_t nbases, basecap;
    cw_keymap_t basemap; /* (proc id, tag) -> bases index */
    uint64_t rows_read;  /* feed rows applied, for the figures */
    int64_t pruned_at;   /* the step the series were last pruned at */
    /* The last instant evaluated (eval.c sets it; INT64_MIN: none since
     * the set was built): instances ended before it had their instance
     * states resolved, so they may be compacted. */
    int64_t evaluated_to;
    uint32_t agg_serial;  /* the last aggregate's id */
    uint64_t compacted;   /* instances compacted into aggregates, for the figures */
    bool no_compact;      /* tests: keep every ended instance on its own */
    /* When the live source was down (downtime.h), as stored: read at
     * every feed, for the source_down metric. */
    cw_downtime_t down;
} cw__aset_t;

int cw__aset_init(cw__aset_t *a, int64_t step_ns, uint32_t len);
void cw__aset_free(cw__aset_t *a);
/* Interns s; UINT32_MAX on ENOMEM. */
uint32_t cw__strtab_get(cw__strtab_t *t, const char *s);
void cw__strtab_free(cw__strtab_t *t);

/* Brings the set up to T (every bucket before T stored): the first call
 * (or one after cw__aset_reset) rebuilds the last len steps from the
 * store, later ones read only the rows from fed_to on. s is borrowed. 0,
 * CW_ENOMEM or CW_EDB. */
int cw__aset_feed(cw__aset_t *a, cw_store_t *s, int64_t T, cw_diag_t *d);
/* Forgets the series (not the interned names): the next feed rebuilds. */
void cw__aset_reset(cw__aset_t *a);
/* Bytes of the set's rings and tables. */
size_t cw__aset_bytes(const cw__aset_t *a);
/* Bytes of b's ring (its capacity in steps times a step's size). */
size_t cw__abase_ring_bytes(const cw__abase_t *b);
/* Step `step` of b (in the ring's window, from its birth on) as the rules
 * read it: an implicit one (after b->last) has nothing committed and
 * the outstanding of now. */
cw__slot_t cw__abase_step(const cw__abase_t *b, int64_t step);
/* Sets step `step` of b (in the window, from its birth on, not after
 * a->head) to *s; the implicit steps before it become explicit as they
 * read. The ring grows, or widens when *s does not fit narrow. 0 or
 * CW_ENOMEM (b's steps unchanged). a is borrowed (the window). */
int cw__abase_set(const cw__aset_t *a, cw__abase_t *b, int64_t step, const cw__slot_t *s);

/* Figures of one base over steps [first, last] added into f; points[]
 * (last - first + 1 entries, may be NULL) get its outstanding per step
 * end in bytes. */
typedef struct cw__afig {
    int64_t committed, commits, remaining, rem_commits; /* bytes / events */
    int64_t outstanding;                                /* at T, bytes */
} cw__afig_t;
void cw__abase_add(const cw__aset_t *a, const cw__abase_t *b, int64_t first, int64_t last,
                   cw__afig_t *f, int64_t *points);

/* ---- eval.c: the state machine (pure) ------------------------------------ */

typedef struct cw__sm {
    cw_alert_state_t state;
    cw_alert_severity_t severity;
    int64_t active_since, firing_since, false_since; /* CW_TS_NEVER when not */
} cw__sm_t;

/* The severity value has under r, given the severity held now: rises at
 * once to the highest threshold crossed; a held severity stays while the
 * value is beyond clear x its threshold (below rules: threshold / clear).
 * CW_SEV_NONE: the threshold condition is false. Pure. */
cw_alert_severity_t cw__alert_severity(const cw_alert_rule_t *r, double value,
                                       cw_alert_severity_t held);
/* The threshold of severity sev under r (NAN for none). */
double cw__alert_threshold(const cw_alert_rule_t *r, cw_alert_severity_t sev);

/* One evaluation of one series at ts: sev is the condition (NONE: false),
 * exited set when its process exited (or its tracking ended: reason
 * given). Updates *sm; true when it made a transition (*tr's from, to,
 * severity and reason set; ts too). Pure. */
bool cw__sm_step(cw__sm_t *sm, int64_t for_ns, int64_t keep_ns, int64_t ts,
                 cw_alert_severity_t sev, const char *gone_reason, cw_alert_transition_t *tr);

/* ---- eval.c: the evaluator ---------------------------------------------- */

/* One series (rule x group) that is or was active. */
typedef struct cw__astate {
    uint64_t k1, k2; /* group key (eval.c) */
    int64_t row_id;
    char *key, *process, *tag; /* owned; process NULL for the machine, tag NULL summed */
    uint32_t proc, pid;
    cw__sm_t sm;
    double value, threshold, leak, ttl;
    cw_leak_score_t ls;
    bool has_ls;
    cw_time_to_limit_t tl;
    int64_t last_sent; /* evaluation instant of the last notice, CW_TS_NEVER */
    int64_t updated;
    bool seen;    /* evaluated at this instant */
    bool resend_now; /* a re-send is due at this instant (engine.c) */
    bool dropped; /* inactive again: saved once more, then forgotten */
} cw__astate_t;

typedef struct cw__arule {
    cw_alert_rule_t *r; /* borrowed from the evaluator's rules */
    char hash[17];
    cw_keymap_t map;
    cw__astate_t *st;
    size_t n, cap;
    uint8_t *name_match, *tag_match; /* per interned index: 0 unknown, 1 yes, 2 no */
    size_t nname_match, ntag_match;
} cw__arule_t;

/* A transition of this evaluation. */
typedef struct cw__atr {
    uint32_t rule, state; /* indexes: rules, rule's st */
    cw_alert_transition_t tr;
    bool silenced;
    int64_t tr_id; /* alert_transitions.id once saved */
} cw__atr_t;

typedef struct cw__aeval {
    cw_alert_rules_t rules; /* owned copy */
    cw__arule_t *r;
    cw__aset_t set;
    int64_t window_max;
    cw__atr_t *tr;
    size_t ntr, trcap;
    /* scratch */
    int64_t *points, *pts_t;
    size_t npoints_cap;
    uint32_t *next, *ghead;
    size_t nextcap, gcap;
    cw_keymap_t gmap;
    uint64_t leak_computed; /* leak scores computed, for the figures */
    /* Per-base sums of a window, computed once per evaluation for the
     * rules that need them for every group (rules of one window share). */
    struct cw__wsum {
        int64_t first, last;
        bool valid;
        cw__afig_t *v;
        size_t cap;
    } wsum[4];
    cw_limit_info_t machine; /* the machine's commit limit, read once per run */
    bool machine_read;
    /* Whose limit the data's machine has (CW_COMMIT_LIMIT_META_KEY):
     * 0 live (read each evaluation), 1 recorded (`recorded` bytes), 2 none. */
    int limit_from;
    uint64_t recorded;
} cw__aeval_t;

int cw__aeval_init(cw__aeval_t *e, const cw_alert_rules_t *rules, int64_t step_ns);
/* Reads whose commit limit the data of s has (CW_COMMIT_LIMIT_META_KEY)
 * into e. 0 or the store's CW_E* (d). */
int cw__aeval_limit_from(cw__aeval_t *e, cw_store_t *s, cw_diag_t *d);
void cw__aeval_free(cw__aeval_t *e);
/* Bytes of the set (cw__aset_bytes) and of the evaluator's scratch. */
size_t cw__aeval_bytes(const cw__aeval_t *e);
/* Evaluates every rule at T over the set (fed up to T): transitions go to
 * e->tr (cleared first), states' figures are updated. 0 or CW_ENOMEM. */
int cw__aeval_run(cw__aeval_t *e, int64_t T);
/* Forgets the states marked dropped (after they were saved). */
void cw__aeval_compact(cw__aeval_t *e);
/* The state of (rule, key) as stored (restart): parsed key; 0, CW_EINVAL
 * (a key this engine cannot parse) or CW_ENOMEM. *out the state. */
int cw__aeval_restore(cw__aeval_t *e, uint32_t rule, const cw_alert_row_t *row,
                      cw__astate_t **out);
/* Steps of the longest window, and the ring length it needs. */
uint32_t cw__aeval_ring_len(const cw_alert_rules_t *rules, int64_t step_ns);

/* ---- silence.c ------------------------------------------------------------ */

typedef struct cw__matcher {
    char *name, *value;
    bool regex, equal;
} cw__matcher_t;

typedef struct cw__silence {
    int64_t id;
    cw__matcher_t *m;
    size_t n;
} cw__silence_t;

/* Parses a silence's matchers (Alertmanager's JSON array). 0 or CW_EINVAL
 * / CW_ENOMEM. */
int cw__silence_parse(const char *json, cw__silence_t *out);
void cw__silence_free(cw__silence_t *s);
/* Whether every matcher of s matches the labels (a missing label is "").
 * Regexes are anchored, with . * + ? | [] () and \ escapes. */
bool cw__silence_match(const cw__silence_t *s, const cw_alert_label_t *labels, size_t n);
/* Anchored match of the small regex dialect above. Pure. */
bool cw__regex_match(const char *re, const char *s);

/* ---- notices.c -------------------------------------------------------------- */

/* The labels of a state under rule r (sorted by name) into v (at most
 * 5 + nlabels); strings point into the state, the rule or buf (pid and
 * severity). Returns the count. */
size_t cw__alert_labels(const cw_alert_rule_t *r, const cw__astate_t *st,
                        cw_alert_severity_t sev, cw_alert_label_t *v, char buf[32]);

typedef struct cw__notices {
    cw_alert_notice_t *v;
    size_t n, cap;
} cw__notices_t;

/* Appends the notice of a transition (tr, its stored id tr_id) or of a
 * re-send (tr NULL) of state st of rule r, at evaluation instant ts. The
 * notice owns its labels, annotations and link; rule, reason, process and
 * tag are borrowed (valid until the states are compacted). 0 or
 * CW_ENOMEM. */
int cw__notices_add(cw__notices_t *ns, const cw_alert_rule_t *r, const cw__astate_t *st,
                    const cw_alert_transition_t *tr, int64_t tr_id, int64_t ts,
                    const char *generator_url);
void cw__notices_clear(cw__notices_t *ns); /* frees the notices, keeps the array */
void cw__notices_free(cw__notices_t *ns);
/* "12.0 MiB", "50.0 MiB/h", "0.82", "3.2h": a value of metric m. */
void cw__alert_format(const cw_alert_rule_t *r, double v, char *buf, size_t n);

#endif
