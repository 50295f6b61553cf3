/* rules.c - the alert rules file (alerts.h; docs/ALERTS.md, "Rules"):
 * `[rule NAME]` sections of `key = value` lines, the config file's family
 * (app/config.c), read into cw_alert_rules_t.
 *
 * A section is gathered whole (its key lines), then checked: the metric
 * first, since what a threshold means depends on it, then every key in the
 * order written, then the rule as a whole (warn or crit, their order,
 * units, limits). Every fault is one line "FILE:LINE: rule NAME: what";
 * a rule with any fault is refused and counted once; the others load.
 * Thresholds and their units are read in threshold.c.
 *
 * Thread: any; a parse touches only its arguments. */
#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include "alerts/rules_int.h"
#include "commitwatch/alerts.h"
#include "commitwatch/platform.h"

#define MAX_NAME 128
#define MAX_SUMMARY 1024
#define MAX_DURATION_NS (35LL * 86400 * CW_NS_PER_S) /* window, for, ...: 35 days */

/* ---- one section being read ------------------------------------------------ */

typedef struct entry {
    const char *key, *value; /* into the line copies */
    char *line;              /* owned copy of the line, cut at '=' */
    int lineno;
} entry_t;

#define MAX_ENTRIES 64

typedef struct parse {
    const char *file;
    FILE *warn;
    const cw_alert_rules_t *prev; /* the set being appended to: names taken */
    cw_alert_rules_t add;         /* the rules of this text */
    unsigned nbad;
    /* the open section */
    bool open;           /* a `[rule NAME]` header was read */
    bool bad;            /* a fault was reported for it */
    bool header_bad;     /* its header was: the section is skipped */
    char name[MAX_NAME + 1];
    int header_line;
    const char *start;   /* its header line in the text */
    const char *end;     /* the end of its last key line */
    entry_t e[MAX_ENTRIES];
    size_t ne;
    bool stray;          /* in a run of text outside any section */
    cw_diag_t *first;    /* gets the first fault's line (may be NULL) */
    bool faulted;        /* a fault was reported in this text */
} parse_t;

static void fault(parse_t *p, int line, const char *fmt, ...) CW_PRINTF(3, 4);
static void fault(parse_t *p, int line, const char *fmt, ...)
{
    p->bad = true;
    if (!p->warn && (!p->first || p->faulted)) return;
    char what[512], msg[sizeof what + MAX_NAME + CW_PATH_MAX + 64];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(what, sizeof what, fmt, ap);
    va_end(ap);
    if (p->open)
        snprintf(msg, sizeof msg, "%s:%d: rule %s: %s", p->file, line, p->name, what);
    else
        snprintf(msg, sizeof msg, "%s:%d: %s", p->file, line, what);
    if (p->warn) fprintf(p->warn, "%s\n", msg);
    if (p->first && !p->faulted) cw_diag_set(p->first, CW_EPARSE, "%s", msg);
    p->faulted = true;
}

static void close_entries(parse_t *p)
{
    for (size_t i = 0; i < p->ne; i++)
        free(p->e[i].line);
    p->ne = 0;
}

/* ---- values ----------------------------------------------------------------- */

/* Splits v at commas into trimmed, non-empty items, calling add for each;
 * returns add's first nonzero result, or -2 for an empty item, -3 for more
 * than CW_ALERT_MAX_LIST. v is modified. */
static int split_list(char *v, int (*add)(void *ctx, char *item), void *ctx)
{
    size_t n = 0;
    for (char *item = v;;) {
        char *comma = strchr(item, ',');
        if (comma) *comma = '\0';
        char *t = cw_strtrim(item);
        if (!*t) return -2;
        if (++n > CW_ALERT_MAX_LIST) return -3;
        int rc = add(ctx, t);
        if (rc) return rc;
        if (!comma) return 0;
        item = comma + 1;
    }
}

static int add_string(char ***v, size_t *n, const char *s)
{
    char **nv = realloc(*v, (*n + 1) * sizeof *nv);
    if (!nv) return CW_ENOMEM;
    *v = nv;
    if (!(nv[*n] = cw_strdup(s))) return CW_ENOMEM;
    (*n)++;
    return 0;
}

static int add_process(void *ctx, char *item)
{
    cw_alert_rule_t *r = ctx;
    if (item[0] == '!' && !cw_strtrim(item + 1)[0]) return -4;
    return add_string(&r->process, &r->nprocess, item);
}

static int add_tag(void *ctx, char *item)
{
    cw_alert_rule_t *r = ctx;
    if (item[0] == '!') return -5;
    return add_string(&r->tag, &r->ntag, item);
}

static bool label_name_ok(const char *s)
{
    static const char *const reserved[] = {"alertname", "severity", "process", "pid", "tag"};
    if (!(isalpha((unsigned char)*s) || *s == '_')) return false;
    for (const char *c = s; *c; c++)
        if (!(isalnum((unsigned char)*c) || *c == '_')) return false;
    if (strncmp(s, "__", 2) == 0) return false;
    for (size_t i = 0; i < CW_ARRAY_LEN(reserved); i++)
        if (strcmp(s, reserved[i]) == 0) return false;
    return strlen(s) <= MAX_NAME;
}

static int add_label(void *ctx, char *item)
{
    cw_alert_rule_t *r = ctx;
    char *eq = strchr(item, '=');
    if (!eq) return -6;
    *eq = '\0';
    char *name = cw_strtrim(item), *value = cw_strtrim(eq + 1);
    if (!label_name_ok(name)) return -7;
    if (!*value) return -8;
    for (size_t i = 0; i < r->nlabels; i++)
        if (strcmp(r->labels[i].name, name) == 0) return -9;
    cw_alert_label_t *nl = realloc(r->labels, (r->nlabels + 1) * sizeof *nl);
    if (!nl) return CW_ENOMEM;
    r->labels = nl;
    nl[r->nlabels].name = cw_strdup(name);
    nl[r->nlabels].value = cw_strdup(value);
    r->nlabels++;
    return nl[r->nlabels - 1].name && nl[r->nlabels - 1].value ? 0 : CW_ENOMEM;
}

static const char *list_error(int rc)
{
    switch (rc) {
    case -2: return "an empty item in the list";
    case -3: return "too many items (at most 64)";
    case -4: return "'!' must be followed by a glob";
    case -5: return "tags cannot be excluded ('!')";
    case -6: return "expected name=value items";
    case -7: return "a label name is [A-Za-z_][A-Za-z0-9_]*, not alertname, severity, process, "
                    "pid, tag or __*";
    case -8: return "a label needs a value";
    case -9: return "a label given twice";
    }
    return "bad list";
}

static int parse_number(const char *s, double *out)
{
    char *end;
    errno = 0;
    double v = strtod(s, &end);
    if (errno || end == s || *end || !isfinite(v)) return -1;
    *out = v;
    return 0;
}

static int parse_span(const char *s, int64_t *out)
{
    int64_t ns;
    if (cw_parse_duration(s, &ns) != 0 || ns > MAX_DURATION_NS) return -1;
    *out = ns;
    return 0;
}

/* ---- keys -------------------------------------------------------------------- */

/* The rule being built, with what warn [0] and crit [1] said of their
 * direction and unit, checked against each other once the section is read
 * (check_rule). */
typedef struct build {
    cw_alert_rule_t r;
    bool below[2], count[2];
    bool nomem; /* a setter ran out of memory */
} build_t;

/* Sets one key from v (writable). 0, or -1 with *why set (a bad value);
 * out of memory sets b->nomem. */
typedef int (*setter_t)(build_t *b, char *v, const char **why);

/* What a setter of a list returns for split_list's rc. */
static int list_result(build_t *b, int rc, const char **why)
{
    if (rc == CW_ENOMEM) b->nomem = true;
    else if (rc) *why = list_error(rc);
    return rc && rc != CW_ENOMEM ? -1 : 0;
}

static int set_process(build_t *b, char *v, const char **why)
{
    cw_alert_rule_t *r = &b->r;
    return list_result(b, split_list(v, add_process, r), why);
}

static int set_tag(build_t *b, char *v, const char **why)
{
    cw_alert_rule_t *r = &b->r;
    return list_result(b, split_list(v, add_tag, r), why);
}

static int set_labels(build_t *b, char *v, const char **why)
{
    cw_alert_rule_t *r = &b->r;
    return list_result(b, split_list(v, add_label, r), why);
}

static int set_tag_by(build_t *b, char *v, const char **why)
{
    cw_alert_rule_t *r = &b->r;
    *why = "tag_by is tag (a series per tag) or all (the tags summed)";
    if (strcmp(v, "tag") == 0) r->tags_summed = false;
    else if (strcmp(v, "all") == 0) r->tags_summed = true;
    else return -1;
    return 0;
}

static int set_group_by(build_t *b, char *v, const char **why)
{
    cw_alert_rule_t *r = &b->r;
    *why = "group_by is instance, name or machine";
    if (strcmp(v, "instance") == 0) r->group_by = CW_AG_INSTANCE;
    else if (strcmp(v, "name") == 0) r->group_by = CW_AG_NAME;
    else if (strcmp(v, "machine") == 0) r->group_by = CW_AG_MACHINE;
    else return -1;
    return 0;
}

static int set_metric(build_t *b, char *v, const char **why)
{
    cw_alert_rule_t *r = &b->r;
    for (int m = CW_AM_IMPACTING_RATE; m <= CW_AM_SOURCE_DOWN; m++)
        if (strcmp(v, cw_alert_metric_name((cw_alert_metric_t)m)) == 0) {
            r->metric = (cw_alert_metric_t)m;
            return 0;
        }
    *why = "metric is impacting_rate, outstanding, transient_rate, leak_score, time_to_limit "
           "or source_down";
    return -1;
}

static int set_window(build_t *b, char *v, const char **why)
{
    cw_alert_rule_t *r = &b->r;
    *why = "window is a duration above 0 and at most 35d (e.g. 1h, 6h)";
    return parse_span(v, &r->window_ns) == 0 && r->window_ns > 0 ? 0 : -1;
}

static int set_for(build_t *b, char *v, const char **why)
{
    cw_alert_rule_t *r = &b->r;
    *why = "for is a duration of at most 35d (e.g. 0, 10m)";
    return parse_span(v, &r->for_ns);
}

static int set_keep(build_t *b, char *v, const char **why)
{
    cw_alert_rule_t *r = &b->r;
    *why = "keep_firing_for is a duration of at most 35d (e.g. 0, 15m)";
    return parse_span(v, &r->keep_firing_for_ns);
}

static int set_heap_trace(build_t *b, char *v, const char **why)
{
    cw_alert_rule_t *r = &b->r;
    *why = "heap_trace is a duration above 0 and at most 1h (e.g. 5m): a heap trace of the "
           "process when the rule fires";
    return parse_span(v, &r->heap_trace_ns) == 0 && r->heap_trace_ns > 0 &&
                   r->heap_trace_ns <= 3600 * CW_NS_PER_S
               ? 0
               : -1;
}

static int set_warmup(build_t *b, char *v, const char **why)
{
    cw_alert_rule_t *r = &b->r;
    *why = "warmup is a duration of at most 35d (e.g. 30m)";
    return parse_span(v, &r->warmup_ns);
}

/* A threshold of the rule's metric into (value, below, count). */
static int threshold(cw_alert_rule_t *r, const char *v, const char **why, double *value,
                     bool *below, bool *count)
{
    static const char *const units[] = {
        [CW_AM_IMPACTING_RATE] = "impacting_rate takes a size per hour or day: 50MiB/h, 1GiB/d",
        [CW_AM_OUTSTANDING] = "outstanding takes a size: 2GiB, 512MiB",
        [CW_AM_TRANSIENT_RATE] = "transient_rate takes a size or a count per hour or day: "
                                 "1GiB/h, 5000/h (commits)",
        [CW_AM_LEAK_SCORE] = "leak_score takes a number from 0 to 1: 0.7",
        [CW_AM_TIME_TO_LIMIT] = "time_to_limit takes a duration: < 48h",
        [CW_AM_SOURCE_DOWN] = "source_down takes 1 (fire while the source is down)"};
    *why = units[r->metric];
    return cw_alert_parse_threshold(r->metric, v, value, below, count);
}

static int set_warn(build_t *b, char *v, const char **why)
{
    cw_alert_rule_t *r = &b->r;
    if (threshold(r, v, why, &r->warn, &b->below[0], &b->count[0])) return -1;
    r->has_warn = true;
    return 0;
}

static int set_crit(build_t *b, char *v, const char **why)
{
    cw_alert_rule_t *r = &b->r;
    if (threshold(r, v, why, &r->crit, &b->below[1], &b->count[1])) return -1;
    r->has_crit = true;
    return 0;
}

static int set_clear(build_t *b, char *v, const char **why)
{
    cw_alert_rule_t *r = &b->r;
    *why = "clear is a fraction above 0 and at most 1 (e.g. 0.8)";
    return parse_number(v, &r->clear) == 0 && r->clear > 0 && r->clear <= 1 ? 0 : -1;
}

static int set_min_outstanding(build_t *b, char *v, const char **why)
{
    cw_alert_rule_t *r = &b->r;
    *why = "min_outstanding is a size (e.g. 64MiB)";
    return cw_parse_size(v, &r->min_outstanding);
}

static int set_limit(build_t *b, char *v, const char **why)
{
    cw_alert_rule_t *r = &b->r;
    *why = "limit is machine, process or a size above 0 (e.g. 4GiB)";
    if (strcmp(v, "machine") == 0) r->limit_kind = CW_AL_MACHINE;
    else if (strcmp(v, "process") == 0) r->limit_kind = CW_AL_PROCESS;
    else if (cw_parse_size(v, &r->limit_bytes) == 0 && r->limit_bytes > 0) r->limit_kind = CW_AL_SIZE;
    else return -1;
    return 0;
}

static int set_min_leak_score(build_t *b, char *v, const char **why)
{
    cw_alert_rule_t *r = &b->r;
    *why = "min_leak_score is a number from 0 to 1 (e.g. 0.5)";
    return parse_number(v, &r->min_leak_score) == 0 && r->min_leak_score >= 0 &&
                   r->min_leak_score <= 1
               ? 0
               : -1;
}

static int set_min_impacting_rate(build_t *b, char *v, const char **why)
{
    cw_alert_rule_t *r = &b->r;
    bool below, count;
    *why = "min_impacting_rate is a size per hour or day (e.g. 10MiB/h)";
    if (cw_alert_parse_threshold(CW_AM_IMPACTING_RATE, v, &r->min_impacting_rate, &below, &count) ||
        below)
        return -1;
    return 0;
}

static int set_summary(build_t *b, char *v, const char **why)
{
    cw_alert_rule_t *r = &b->r;
    *why = "summary is at most 1024 bytes";
    if (strlen(v) > MAX_SUMMARY) return -1;
    free(r->summary);
    if (!(r->summary = cw_strdup(v))) b->nomem = true;
    return 0;
}

static const struct key {
    const char *name;
    setter_t set;
} keys[] = {
    {"metric", set_metric}, /* first: the thresholds' units depend on it */
    {"process", set_process},
    {"tag", set_tag},
    {"tag_by", set_tag_by},
    {"group_by", set_group_by},
    {"window", set_window},
    {"warn", set_warn},
    {"crit", set_crit},
    {"for", set_for},
    {"keep_firing_for", set_keep},
    {"clear", set_clear},
    {"min_outstanding", set_min_outstanding},
    {"warmup", set_warmup},
    {"limit", set_limit},
    {"min_leak_score", set_min_leak_score},
    {"min_impacting_rate", set_min_impacting_rate},
    {"labels", set_labels},
    {"summary", set_summary},
    {"heap_trace", set_heap_trace},
};

static const struct key *find_key(const char *name)
{
    for (size_t i = 0; i < CW_ARRAY_LEN(keys); i++)
        if (strcmp(keys[i].name, name) == 0) return &keys[i];
    return NULL;
}

/* ---- a section, whole -------------------------------------------------------- */

static void defaults(cw_alert_rule_t *r)
{
    memset(r, 0, sizeof *r);
    r->group_by = CW_AG_INSTANCE;
    r->window_ns = 3600LL * CW_NS_PER_S;
    r->clear = 1;
    r->limit_kind = CW_AL_MACHINE;
}

/* The entry of key in the open section (the caller knows it is there). */
static const entry_t *find_entry(const parse_t *p, const char *key)
{
    for (size_t i = 0; i < p->ne; i++)
        if (strcmp(p->e[i].key, key) == 0) return &p->e[i];
    return &p->e[0];
}

/* The rule as a whole, after its keys. */
static void check_rule(parse_t *p, build_t *b)
{
    cw_alert_rule_t *r = &b->r;
    int at = p->header_line;
    if (!r->has_warn && !r->has_crit) {
        fault(p, at, "neither warn nor crit is given");
        return;
    }
    if (r->has_warn && r->has_crit) {
        if (b->below[0] != b->below[1])
            fault(p, at, "warn and crit must both be above or both below ('<') their values");
        else if (b->count[0] != b->count[1])
            fault(p, at, "warn and crit must both be counts per hour or both sizes per hour");
        else if (b->below[0] ? !(r->crit < r->warn) : !(r->crit > r->warn)) {
            const entry_t *w = find_entry(p, "warn"), *c = find_entry(p, "crit");
            fault(p, c->lineno, "crit (%s) must be %s warn (%s)", c->value,
                  b->below[0] ? "below" : "above", w->value);
        }
    }
    int s = r->has_warn ? 0 : 1;
    r->below = b->below[s];
    r->count_unit = b->count[s];
    if (r->metric == CW_AM_SOURCE_DOWN && r->group_by != CW_AG_MACHINE)
        fault(p, at, "metric = source_down needs group_by = machine (the service has one source)");
    if (r->limit_kind == CW_AL_PROCESS && r->group_by != CW_AG_INSTANCE)
        fault(p, at, "limit = process needs group_by = instance (a process has the limit)");
}

/* The hash of the canonical text: the name, then the key lines as
 * "key=value\n" sorted by key (keys are unique in a rule). 0 or CW_ENOMEM. */
static int rule_hash(const parse_t *p, char out[17])
{
    size_t order[MAX_ENTRIES], len = strlen(p->name) + 2;
    for (size_t i = 0; i < p->ne; i++) {
        order[i] = i;
        len += strlen(p->e[i].key) + strlen(p->e[i].value) + 2;
    }
    for (size_t i = 1; i < p->ne; i++)
        for (size_t j = i; j > 0 && strcmp(p->e[order[j]].key, p->e[order[j - 1]].key) < 0; j--) {
            size_t t = order[j];
            order[j] = order[j - 1];
            order[j - 1] = t;
        }
    char *buf = malloc(len), *at = buf;
    if (!buf) return CW_ENOMEM;
    at += sprintf(at, "%s\n", p->name);
    for (size_t i = 0; i < p->ne; i++)
        at += sprintf(at, "%s=%s\n", p->e[order[i]].key, p->e[order[i]].value);
    snprintf(out, 17, "%016llx", (unsigned long long)cw__alert_fnv1a64(buf, (size_t)(at - buf)));
    free(buf);
    return 0;
}

static bool name_taken(const parse_t *p, const char *name)
{
    return cw_alert_rules_find(p->prev, name) || cw_alert_rules_find(&p->add, name);
}

/* Sets the keys of the section on b->r: the metric first (keys[] order).
 * A bad value is a fault; 0 or CW_ENOMEM. */
static int set_keys(parse_t *p, build_t *b)
{
    for (size_t k = 0; k < CW_ARRAY_LEN(keys); k++)
        for (size_t i = 0; i < p->ne; i++) {
            if (strcmp(p->e[i].key, keys[k].name) != 0) continue;
            const char *why = "bad value";
            char copy[CW_ALERT_MAX_LINE + 1];
            cw_strlcpy(copy, p->e[i].value, sizeof copy); /* setters may cut it; the hash reads it */
            if (keys[k].set(b, copy, &why))
                fault(p, p->e[i].lineno, "%s = %s: %s", p->e[i].key, p->e[i].value, why);
            if (b->nomem) return CW_ENOMEM;
        }
    return 0;
}

/* Moves the checked rule into p->add, with its name, file, text and hash.
 * 0 or CW_ENOMEM (b->r then still holds what it held). */
static int add_rule(parse_t *p, build_t *b)
{
    cw_alert_rule_t *r = &b->r;
    r->line = p->header_line;
    if (rule_hash(p, r->hash) || !(r->name = cw_strdup(p->name)) ||
        !(r->file = cw_strdup(p->file)) ||
        !(r->text = cw_strndup(p->start, (size_t)(p->end - p->start))))
        return CW_ENOMEM;
    cw_alert_rule_t *nv = realloc(p->add.v, (p->add.n + 1) * sizeof *nv);
    if (!nv) return CW_ENOMEM;
    p->add.v = nv;
    nv[p->add.n++] = *r;
    memset(r, 0, sizeof *r);
    return 0;
}

/* Ends the open section: checks it and, when it has no fault, adds it. */
static int finish_section(parse_t *p)
{
    int rc = 0;
    if (!p->open) return 0;
    build_t b;
    memset(&b, 0, sizeof b);
    defaults(&b.r);
    if (!p->header_bad) {
        bool has_metric = p->ne && strcmp(find_entry(p, "metric")->key, "metric") == 0;
        if (p->prev->n + p->add.n >= CW_ALERT_MAX_RULES)
            fault(p, p->header_line, "too many rules (at most %d in a set)", CW_ALERT_MAX_RULES);
        else if (name_taken(p, p->name))
            fault(p, p->header_line, "a rule of this name is already loaded");
        if (!has_metric)
            fault(p, p->header_line, "no metric");
        else if ((rc = set_keys(p, &b)) == 0)
            check_rule(p, &b);
        if (rc == 0 && !p->bad) rc = add_rule(p, &b);
    }
    if (p->bad) p->nbad++;
    cw__alert_rule_free(&b.r);
    close_entries(p);
    p->open = p->bad = p->header_bad = false;
    return rc;
}

/* `[rule NAME]` (s trimmed, starting with '['): opens a section. */
static void open_section(parse_t *p, char *s, const char *line_start, int lineno)
{
    p->bad = p->header_bad = false;
    p->header_line = lineno;
    p->start = p->end = line_start;
    p->name[0] = '\0';
    size_t n = strlen(s);
    const char *name = NULL;
    if (n >= 2 && s[n - 1] == ']') {
        s[n - 1] = '\0';
        char *in = cw_strtrim(s + 1);
        if (strncmp(in, "rule", 4) == 0 && isspace((unsigned char)in[4])) name = cw_strtrim(in + 4);
    }
    bool ok = name && *name && strlen(name) <= MAX_NAME;
    for (const char *c = name; ok && *c; c++)
        ok = isalnum((unsigned char)*c) || *c == '_' || *c == '-' || *c == '.';
    /* (Said before the section opens: the message names no rule.) */
    if (!name)
        fault(p, lineno, "expected a section header `[rule NAME]`; the section is ignored");
    else if (!ok)
        fault(p, lineno,
              "a rule name is 1 to %d of A-Z a-z 0-9 _ - . (it names the alert); the section "
              "is ignored",
              MAX_NAME);
    p->header_bad = p->bad;
    p->open = true;
    cw_strlcpy(p->name, ok ? name : "?", sizeof p->name);
}

/* One key line of the open section. */
static int key_line(parse_t *p, char *s, const char *line_end, int lineno)
{
    char *eq = strchr(s, '=');
    p->end = line_end;
    if (p->header_bad) return 0; /* its header was refused: the section is skipped */
    if (!eq) {
        fault(p, lineno, "expected `key = value`");
        return 0;
    }
    *eq = '\0';
    char *key = cw_strtrim(s), *value = cw_strtrim(eq + 1);
    if (!find_key(key)) {
        fault(p, lineno, "unknown key '%s'", key);
        return 0;
    }
    for (size_t i = 0; i < p->ne; i++)
        if (strcmp(p->e[i].key, key) == 0) {
            fault(p, lineno, "%s given twice (first on line %d)", key, p->e[i].lineno);
            return 0;
        }
    if (!*value) {
        fault(p, lineno, "%s has no value", key);
        return 0;
    }
    if (p->ne == MAX_ENTRIES) {
        fault(p, lineno, "too many keys");
        return 0;
    }
    /* Keep a copy of the line: key and value point into it. */
    size_t kl = strlen(key), vl = strlen(value);
    char *copy = malloc(kl + vl + 2);
    if (!copy) return CW_ENOMEM;
    memcpy(copy, key, kl + 1);
    memcpy(copy + kl + 1, value, vl + 1);
    p->e[p->ne++] = (entry_t){copy, copy + kl + 1, copy, lineno};
    return 0;
}

/* Cuts a comment: a line whose first non-blank is '#', or " #" and after. */
static void cut_comment(char *s)
{
    for (char *c = s; *c; c++)
        if (*c == '#' && (c == s || isspace((unsigned char)c[-1]))) {
            *c = '\0';
            return;
        }
}

static int parse_text(parse_t *p, const char *text)
{
    char buf[CW_ALERT_MAX_LINE + 1];
    int lineno = 0, rc = 0;
    const char *s = text;
    if ((unsigned char)s[0] == 0xEF && (unsigned char)s[1] == 0xBB && (unsigned char)s[2] == 0xBF)
        s += 3; /* a UTF-8 byte order mark */
    while (*s && rc == 0) {
        const char *nl = strchr(s, '\n'), *line_end = nl ? nl : s + strlen(s);
        size_t len = (size_t)(line_end - s);
        const char *line_start = s;
        s = nl ? nl + 1 : line_end;
        lineno++;
        if (len > 0 && line_start[len - 1] == '\r') len--;
        if (len > CW_ALERT_MAX_LINE) {
            if (p->open && !p->bad) p->end = line_end;
            fault(p, lineno, "line longer than %d bytes", CW_ALERT_MAX_LINE);
            if (!p->open) p->nbad++, p->bad = false;
            continue;
        }
        memcpy(buf, line_start, len);
        buf[len] = '\0';
        cut_comment(buf);
        char *t = cw_strtrim(buf);
        if (!*t) continue;
        if (*t == '[') {
            rc = finish_section(p);
            p->stray = false;
            if (rc == 0) open_section(p, t, line_start, lineno);
            continue;
        }
        if (!p->open) {
            if (!p->stray) {
                fault(p, lineno, "text outside a [rule NAME] section");
                p->nbad++;
                p->bad = false;
            }
            p->stray = true;
            continue;
        }
        rc = key_line(p, t, line_start + len, lineno);
    }
    if (rc == 0) rc = finish_section(p);
    close_entries(p);
    return rc;
}

int cw_alert_rules_parse(cw_alert_rules_t *rs, const char *name, const char *text, FILE *warn,
                         unsigned *nbad, cw_diag_t *d)
{
    parse_t p;
    memset(&p, 0, sizeof p);
    p.file = name ? name : "(rules)";
    p.warn = warn;
    p.first = d;
    p.prev = rs;
    int rc = parse_text(&p, text ? text : "");
    if (rc == 0 && p.add.n) {
        cw_alert_rule_t *nv = realloc(rs->v, (rs->n + p.add.n) * sizeof *nv);
        if (!nv) {
            rc = CW_ENOMEM;
        } else {
            rs->v = nv;
            memcpy(nv + rs->n, p.add.v, p.add.n * sizeof *nv);
            rs->n += p.add.n;
            free(p.add.v);
            memset(&p.add, 0, sizeof p.add);
        }
    }
    cw_alert_rules_free(&p.add);
    if (rc) return cw_diag_set(d, rc, "%s: out of memory reading the alert rules", p.file);
    cw__alert_rules_rehash(rs);
    if (nbad) *nbad += p.nbad;
    return 0;
}

int cw_alert_rules_load(cw_alert_rules_t *rs, const char *path, FILE *warn, unsigned *nbad,
                        cw_diag_t *d)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return cw_diag_set(d, CW_EIO, "%s: cannot read the alert rules: %s", path, strerror(errno));
    int prc = cw_plat_file_private(f, path, "the alert rules", d);
    if (prc != 0) {
        fclose(f);
        return prc;
    }
    char *text = malloc(CW_ALERT_MAX_FILE + 1);
    if (!text) {
        fclose(f);
        return cw_diag_set(d, CW_ENOMEM, "%s: out of memory reading the alert rules", path);
    }
    size_t n = fread(text, 1, CW_ALERT_MAX_FILE + 1, f);
    int rc = 0;
    if (ferror(f))
        rc = cw_diag_set(d, CW_EIO, "%s: read error in the alert rules", path);
    else if (n > CW_ALERT_MAX_FILE)
        rc = cw_diag_set(d, CW_ERANGE, "%s: the alert rules file is larger than %u bytes", path,
                         (unsigned)CW_ALERT_MAX_FILE);
    else if (memchr(text, '\0', n))
        rc = cw_diag_set(d, CW_EPARSE, "%s: the alert rules file holds a NUL byte: not a text file",
                         path);
    fclose(f);
    if (rc == 0) {
        text[n] = '\0';
        rc = cw_alert_rules_parse(rs, path, text, warn, nbad, d);
    }
    free(text);
    return rc;
}
