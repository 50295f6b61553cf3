/* config.c - the configuration file (see config.h): a declarative table of
 * keys, parsed line by line. */
#include "commitwatch/config.h"

#include <ctype.h>
#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "commitwatch/platform.h"
#include "commitwatch/push.h"

typedef enum { T_STRING, T_LIST, T_DURATION, T_SIZE, T_BOOL, T_UINT } key_type_t;

typedef struct key_def {
    const char *key;
    key_type_t type;
    size_t offset;
    size_t count_offset; /* T_LIST: the size_t count; its capacity follows it */
    const char *def;     /* default, or NULL */
    const char *help;
} key_def_t;

#define OFF(f) offsetof(cw_config_t, f)

static int check_push_url(const cw_config_t *c, const char *v, cw_diag_t *d)
{
    (void)c;
    return *v ? cw_push_check_url(v, d) : 0; /* empty: off */
}

static int check_push_period(const cw_config_t *c, const char *v, cw_diag_t *d)
{
    (void)v;
    if (c->profile_push_period_ns < CW_NS_PER_S || c->profile_push_period_ns % CW_NS_PER_S)
        return cw_diag_set(d, CW_EINVAL, "a whole number of seconds, at least 1s");
    return 0;
}

static int check_push_labels(const cw_config_t *c, const char *v, cw_diag_t *d)
{
    (void)c;
    return cw_push_check_labels(v, d);
}

static int check_push_buffer(const cw_config_t *c, const char *v, cw_diag_t *d)
{
    (void)v;
    if (c->profile_push_buffer_bytes < 4 * 1024)
        return cw_diag_set(d, CW_EINVAL, "at least 4KiB (a profile is one or a few KiB)");
    return 0;
}

/* Groups of folded instances are settled two hours after their latest
 * exit (store_report_keys.c, GROUP_OPEN_NS): a group's members start
 * within its hour and exit within fold_lifetime of their start. */
static int check_fold_lifetime(const cw_config_t *c, const char *v, cw_diag_t *d)
{
    (void)v;
    if (c->fold_lifetime_ns > 3600 * CW_NS_PER_S)
        return cw_diag_set(d, CW_EINVAL, "at most 1h (a short-lived process lives seconds)");
    return 0;
}

/* One row per key, alike by design: the table is the configuration's one
 * description (parsing, defaults, `commitwatch config --help`). */
static const key_def_t keys[] = {
    {"db", T_STRING, OFF(db), 0, "commitwatch.db", "the SQLite database file"},
    {"source", T_STRING, OFF(source), 0, NULL, "perf (Linux), etw (Windows) or replay:PATH"},
    {"listen", T_STRING, OFF(listen), 0, "127.0.0.1:8470",
     "HTTP address:port of the API and dashboard"},
    {"token", T_STRING, OFF(token), 0, NULL, "token required by state-changing API calls"},
    {"http_threads", T_UINT, OFF(http_threads), 0, "32",
     "HTTP worker threads; each holds one connection while it is open (1 - 1024)"},
    {"http_request_timeout", T_DURATION, OFF(http_request_timeout_ns), 0, "5s",
     "a request's line and headers must arrive within this (also each wait of a slow body or "
     "reader)"},
    {"http_idle_timeout", T_DURATION, OFF(http_idle_timeout_ns), 0, "2s",
     "an idle keep-alive connection is closed after this"},
    {"http_client_connections", T_UINT, OFF(http_client_connections), 0, "8",
     "connections one client address may have open; more are refused with 429 (0 = no limit; "
     "Linux)"},
    {"access_log", T_STRING, OFF(access_log), 0, NULL, "HTTP access log file"},
    {"web_root", T_STRING, OFF(web_root), 0, NULL, "folder of the dashboard's files"},
    {"stacktags", T_LIST, OFF(stacktags), OFF(nstacktags), NULL,
     "a stack-tag rule file (repeatable)"},
    {"images", T_STRING, OFF(images), 0, NULL,
     "etl source: a folder of copies of the trace's DLLs/EXEs whose exports name frames"},
    {"symbol_path", T_STRING, OFF(symbol_path), 0, NULL,
     "etw source: DbgHelp symbol path for PDBs (default _NT_SYMBOL_PATH; none: exports)"},
    {"log_level", T_STRING, OFF(log_level), 0, "info", "debug, info, warning or error"},
    {"retention_raw", T_DURATION, OFF(store.retention_ns[0]), 0, "26h",
     "how long 1 s buckets are kept"},
    {"retention_minute", T_DURATION, OFF(store.retention_ns[1]), 0, "35d",
     "how long 1 min buckets are kept"},
    {"retention_hour", T_DURATION, OFF(store.retention_ns[2]), 0, "400d",
     "how long 1 h buckets are kept (0 = forever)"},
    {"size_cap", T_SIZE, OFF(store.size_cap_bytes), 0, "2GiB",
     "largest database file (0 = no cap)"},
    {"fold_lifetime", T_DURATION, OFF(fold_lifetime_ns), 0, "2s",
     "instances that exit sooner than this, committing less than fold_size, are stored folded "
     "per name (0 = never; at most 1h)"},
    {"fold_size", T_SIZE, OFF(fold_size_bytes), 0, "4MiB",
     "instances that commit this much in all are never folded (0 = never fold)"},
    {"perf_ring_size", T_SIZE, OFF(perf_ring_bytes), 0, "16MiB",
     "perf source: the kernel ring buffers of all CPUs together (512 KiB to 16 MiB each)"},
    {"perf_queue_size", T_SIZE, OFF(perf_queue_bytes), 0, "8MiB",
     "perf source: records copied out of the rings and waiting (past it the kernel drops "
     "records, corrected from smaps)"},
    {"perf_unwind_processes", T_UINT, OFF(perf_unwind_procs), 0, "16",
     "perf source: processes whose unwinding state (libdw) is kept between samples"},
    {"alert_rules", T_LIST, OFF(alert_rules), OFF(nalert_rules), NULL,
     "an alert rules file (repeatable; docs/ALERTS.md)"},
    {"alert_default_rules", T_BOOL, OFF(alert_default_rules), 0, "yes",
     "also load the shipped default alert rules (likely leak, time to the commit limit)"},
    {"alert_interval", T_DURATION, OFF(alert_interval_ns), 0, "10s",
     "how often alert rules are evaluated over the stored buckets"},
    {"alert_step", T_DURATION, OFF(alert_step_ns), 0, "1m",
     "resolution of the series alert rules see (a multiple of 1s)"},
    {"alert_resend", T_DURATION, OFF(alert_resend_ns), 0, "1m",
     "re-send firing alerts to Alertmanager this often"},
    {"alert_repeat_interval", T_DURATION, OFF(alert_repeat_ns), 0, "4h",
     "webhook, exec and log: repeat a still-firing alert this often"},
    {"alert_rate_limit", T_UINT, OFF(alert_rate_limit), 0, "60",
     "most notifications per minute per channel; more are dropped and counted"},
    {"alert_retries", T_UINT, OFF(alert_retries), 0, "5",
     "attempts per notification to Alertmanager or the webhook (backoff between)"},
    {"heap_trace_max_running", T_UINT, OFF(heap_trace_max_running), 0, "2",
     "heap traces (the heap drill-down, by the API or an alert rule's heap_trace) at once"},
    {"heap_trace_max_duration", T_DURATION, OFF(heap_trace_max_duration_ns), 0, "1h",
     "the longest heap trace the API or an alert rule may ask for"},
    {"alertmanager_url", T_STRING, OFF(alertmanager_url), 0, NULL,
     "Prometheus Alertmanager to push alerts to, e.g. http://127.0.0.1:9093"},
    {"webhook_url", T_STRING, OFF(webhook_url), 0, NULL,
     "URL that receives alerts in Alertmanager's webhook format"},
    {"alert_exec", T_STRING, OFF(alert_exec), 0, NULL,
     "program run per alert with its JSON on stdin (no shell)"},
    {"alert_exec_timeout", T_DURATION, OFF(alert_exec_timeout_ns), 0, "10s",
     "alert_exec is killed after this long"},
    {"alert_log", T_STRING, OFF(alert_log), 0, "auto",
     "alerts to the system log: auto (journald, else syslog; Windows: Event Log) or no"},
    {"external_url", T_STRING, OFF(external_url), 0, NULL,
     "the dashboard's address in alert links (default http://LISTEN)"},
    {"profile_push_url", T_STRING, OFF(profile_push_url), 0, NULL,
     "profiling store to push each period's commit profiles to (Pyroscope's /ingest), e.g. "
     "http://127.0.0.1:4040 (empty = off)"},
    {"profile_push_period", T_DURATION, OFF(profile_push_period_ns), 0, "60s",
     "one profile per active process per period (whole seconds)"},
    {"profile_push_labels", T_STRING, OFF(profile_push_labels), 0, NULL,
     "extra labels of the pushed profiles, e.g. env=prod,team=x"},
    {"profile_push_buffer", T_SIZE, OFF(profile_push_buffer_bytes), 0, "8MiB",
     "profiles kept while the profiling store is down; past it the oldest are dropped "
     "(at least 4KiB)"},
};

/* The checks of values their type accepts but the key does not: 0, or
 * CW_EINVAL with d saying what is wrong (the error names file:line). */
static const struct {
    const char *key;
    int (*check)(const cw_config_t *c, const char *v, cw_diag_t *d);
} checks[] = {
    {"fold_lifetime", check_fold_lifetime},     {"profile_push_url", check_push_url},
    {"profile_push_period", check_push_period}, {"profile_push_labels", check_push_labels},
    {"profile_push_buffer", check_push_buffer},
};

static int check_value(const cw_config_t *c, const key_def_t *k, const char *v, cw_diag_t *d)
{
    for (size_t i = 0; i < CW_ARRAY_LEN(checks); i++)
        if (strcmp(checks[i].key, k->key) == 0) return checks[i].check(c, v, d);
    return 0;
}

/* Sets one key from text; 0, CW_ENOMEM or CW_EINVAL (bad value). */
static int set_value(cw_config_t *c, const key_def_t *k, const char *v)
{
    char *base = (char *)c;
    switch (k->type) {
    case T_STRING: {
        char **dst = (char **)(base + k->offset), *copy = strdup(v);
        if (!copy) return CW_ENOMEM;
        free(*dst);
        *dst = copy;
        return 0;
    }
    case T_LIST: {
        char ***list = (char ***)(base + k->offset);
        size_t *n = (size_t *)(base + k->count_offset), *cap = n + 1;
        if (CW_RESERVE(*list, *cap, *n + 1) || !((*list)[*n] = cw_strdup(v))) return CW_ENOMEM;
        (*n)++;
        return 0;
    }
    case T_BOOL: {
        bool *b = (bool *)(base + k->offset);
        if (!strcmp(v, "yes") || !strcmp(v, "true") || !strcmp(v, "on") || !strcmp(v, "1"))
            *b = true;
        else if (!strcmp(v, "no") || !strcmp(v, "false") || !strcmp(v, "off") || !strcmp(v, "0"))
            *b = false;
        else
            return CW_EINVAL;
        return 0;
    }
    case T_UINT: {
        uint64_t *u = (uint64_t *)(base + k->offset);
        char *end;
        errno = 0;
        if (*v == '-' || !*v) return CW_EINVAL;
        unsigned long long x = strtoull(v, &end, 10);
        if (errno || *end) return CW_EINVAL;
        *u = x;
        return 0;
    }
    case T_DURATION:
        return cw_parse_duration(v, (int64_t *)(base + k->offset)) == 0 ? 0 : CW_EINVAL;
    case T_SIZE:
        return cw_parse_size(v, (uint64_t *)(base + k->offset)) == 0 ? 0 : CW_EINVAL;
    }
    return CW_EINVAL;
}

int cw_config_init(cw_config_t *c)
{
    memset(c, 0, sizeof *c);
    for (size_t i = 0; i < sizeof keys / sizeof keys[0]; i++)
        if (keys[i].def && set_value(c, &keys[i], keys[i].def) != 0) {
            cw_config_free(c);
            return CW_ENOMEM;
        }
    return 0;
}

/* The key table names every string the configuration owns: its string keys
 * and its lists' strings are freed from it, so a new key cannot leak. */
void cw_config_free(cw_config_t *c)
{
    char *base = (char *)c;
    for (size_t i = 0; i < CW_ARRAY_LEN(keys); i++) {
        const key_def_t *k = &keys[i];
        if (k->type == T_STRING)
            free(*(char **)(base + k->offset));
        else if (k->type == T_LIST)
            cw_free_strv(*(char ***)(base + k->offset), *(size_t *)(base + k->count_offset));
    }
    memset(c, 0, sizeof *c);
}

/* Reads one line of f into line[cap] without its newline: 1, 0 at the
 * end of the file, -1 when the line is longer than cap - 1 bytes, -2 when
 * it holds a NUL byte (the rest of the line is consumed either way). A
 * line is never cut into a value and a second line (found by fuzzing:
 * tests/fuzz/fuzz_config.c). */
static int read_line(FILE *f, char *line, size_t cap)
{
    size_t n = 0;
    int ch, rc = 1;
    while ((ch = getc(f)) != EOF && ch != '\n') {
        if (ch == '\0') rc = -2;
        else if (n + 1 < cap) line[n++] = (char)ch;
        else if (rc == 1) rc = -1;
    }
    line[n] = '\0';
    return ch == EOF && n == 0 && rc == 1 ? 0 : rc;
}

int cw_config_load(cw_config_t *c, const char *path, FILE *warn, cw_diag_t *d)
{
    FILE *f = fopen(path, "r");
    if (!f)
        return cw_diag_set(d, CW_EIO, "%s: cannot read the configuration: %s", path,
                           strerror(errno));
    int rc = cw_plat_file_private(f, path, "the configuration", d);
    if (rc == 0) rc = cw_config_load_stream(c, f, path, warn, d);
    fclose(f);
    return rc;
}

int cw_config_load_stream(cw_config_t *c, FILE *f, const char *path, FILE *warn, cw_diag_t *d)
{
    char line[4096];
    unsigned lineno = 0;
    int rc = 0, got;
    while (rc == 0 && (got = read_line(f, line, sizeof line)) != 0) {
        lineno++;
        if (got < 0) {
            rc = got == -1 ? cw_diag_set(d, CW_EPARSE, "%s:%u: line longer than %zu bytes", path,
                                         lineno, sizeof line - 1)
                           : cw_diag_set(d, CW_EPARSE, "%s:%u: NUL byte in the line (not a text "
                                                       "file?)", path, lineno);
            break;
        }
        char *hash = strchr(line, '#');
        if (hash) *hash = '\0';
        char *s = cw_strtrim(line);
        if (!*s) continue;
        char *eq = strchr(s, '=');
        if (!eq) {
            rc = cw_diag_set(d, CW_EPARSE, "%s:%u: expected `key = value`", path, lineno);
            break;
        }
        *eq = '\0';
        char *key = cw_strtrim(s), *val = cw_strtrim(eq + 1);
        const key_def_t *k = NULL;
        for (size_t i = 0; i < sizeof keys / sizeof keys[0]; i++)
            if (strcmp(keys[i].key, key) == 0) k = &keys[i];
        if (!k) {
            if (warn)
                fprintf(warn, "commitwatch: warning: %s:%u: unknown key '%s' ignored\n", path,
                        lineno, key);
            continue;
        }
        rc = set_value(c, k, val);
        if (rc == CW_EINVAL)
            rc = cw_diag_set(d, CW_EPARSE, "%s:%u: bad value '%s' for %s (%s)", path, lineno, val,
                             key, k->help);
        cw_diag_t why = {{0}};
        if (rc == 0 && check_value(c, k, val, &why) != 0)
            rc = cw_diag_set(d, CW_EPARSE, "%s:%u: bad value '%s' for %s: %s", path, lineno, val,
                             key, why.msg);
    }
    if (rc == 0 && ferror(f)) rc = cw_diag_set(d, CW_EIO, "%s: read error", path);
    return rc;
}

int cw_config_write_default(FILE *out)
{
    fprintf(out, "# commitwatch configuration: `key = value`; `#` starts a comment.\n");
    for (size_t i = 0; i < sizeof keys / sizeof keys[0]; i++)
        fprintf(out, "\n# %s\n%s%s = %s\n", keys[i].help, keys[i].def ? "" : "# ", keys[i].key,
                keys[i].def ? keys[i].def : "");
    return ferror(out) ? CW_EIO : 0;
}
