/* config.c - the configuration file (see config.h): a declarative table of
 * keys, parsed line by line. */
#include "commitwatch/config.h"

#include <ctype.h>
#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

typedef enum { T_STRING, T_LIST, T_DURATION, T_SIZE } key_type_t;

typedef struct key_def {
    const char *key;
    key_type_t type;
    size_t offset;
    const char *def; /* default, or NULL */
    const char *help;
} key_def_t;

#define OFF(f) offsetof(cw_config_t, f)

static const key_def_t keys[] = {
    {"db", T_STRING, OFF(db), "commitwatch.db", "the SQLite database file"},
    {"source", T_STRING, OFF(source), NULL, "perf (Linux), etw (Windows) or replay:PATH"},
    {"listen", T_STRING, OFF(listen), "127.0.0.1:8470",
     "HTTP address:port of the API and dashboard"},
    {"token", T_STRING, OFF(token), NULL, "token required by state-changing API calls"},
    {"access_log", T_STRING, OFF(access_log), NULL, "HTTP access log file"},
    {"web_root", T_STRING, OFF(web_root), NULL, "folder of the dashboard's files"},
    {"stacktags", T_LIST, OFF(stacktags), NULL, "a stack-tag rule file (repeatable)"},
    {"images", T_STRING, OFF(images), NULL,
     "etl source: a folder of copies of the trace's DLLs/EXEs whose exports name frames"},
    {"symbol_path", T_STRING, OFF(symbol_path), NULL,
     "etw source: DbgHelp symbol path for PDBs (default _NT_SYMBOL_PATH; none: exports)"},
    {"log_level", T_STRING, OFF(log_level), "info", "debug, info, warning or error"},
    {"retention_raw", T_DURATION, OFF(store.retention_ns[0]), "26h",
     "how long 1 s buckets are kept"},
    {"retention_minute", T_DURATION, OFF(store.retention_ns[1]), "35d",
     "how long 1 min buckets are kept"},
    {"retention_hour", T_DURATION, OFF(store.retention_ns[2]), "400d",
     "how long 1 h buckets are kept (0 = forever)"},
    {"size_cap", T_SIZE, OFF(store.size_cap_bytes), "2GiB", "largest database file (0 = no cap)"},
};

int cw_parse_duration(const char *s, int64_t *ns)
{
    static const struct {
        const char *suffix;
        int64_t mult;
    } units[] = {{"ns", 1},
                 {"us", 1000},
                 {"ms", 1000000},
                 {"s", 1000000000LL},
                 {"m", 60000000000LL},
                 {"h", 3600000000000LL},
                 {"d", 86400000000000LL}};
    char *end;
    errno = 0;
    long long v = strtoll(s, &end, 10);
    if (errno || end == s || v < 0) return -1;
    if (!*end) {
        *ns = v;
        return 0;
    }
    for (size_t i = 0; i < sizeof units / sizeof units[0]; i++)
        if (strcmp(end, units[i].suffix) == 0) {
            if (v > INT64_MAX / units[i].mult) return -1;
            *ns = v * units[i].mult;
            return 0;
        }
    return -1;
}

int cw_parse_size(const char *s, uint64_t *bytes)
{
    static const struct {
        const char *suffix;
        uint64_t mult;
    } units[] = {
        {"B", 1},      {"KB", 1000},     {"MB", 1000000},        {"GB", 1000000000ULL},
        {"KiB", 1024}, {"MiB", 1048576}, {"GiB", 1073741824ULL}, {"TiB", 1099511627776ULL}};
    char *end;
    errno = 0;
    if (*s == '-') return -1;
    unsigned long long v = strtoull(s, &end, 10);
    if (errno || end == s) return -1;
    if (!*end) {
        *bytes = v;
        return 0;
    }
    for (size_t i = 0; i < sizeof units / sizeof units[0]; i++)
        if (strcmp(end, units[i].suffix) == 0) {
            if (v > UINT64_MAX / units[i].mult) return -1;
            *bytes = v * units[i].mult;
            return 0;
        }
    return -1;
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
        size_t *n = &c->nstacktags; /* the only list key */
        if (CW_RESERVE(*list, c->stacktags_cap, *n + 1) || !((*list)[*n] = cw_strdup(v)))
            return CW_ENOMEM;
        (*n)++;
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

void cw_config_free(cw_config_t *c)
{
    free(c->db);
    free(c->source);
    free(c->listen);
    free(c->token);
    free(c->access_log);
    free(c->web_root);
    free(c->log_level);
    free(c->images);
    free(c->symbol_path);
    for (size_t i = 0; i < c->nstacktags; i++)
        free(c->stacktags[i]);
    free(c->stacktags);
    memset(c, 0, sizeof *c);
}

static char *trim(char *s)
{
    while (isspace((unsigned char)*s))
        s++;
    char *e = s + strlen(s);
    while (e > s && isspace((unsigned char)e[-1]))
        *--e = '\0';
    return s;
}

int cw_config_load(cw_config_t *c, const char *path, FILE *warn, cw_diag_t *d)
{
    FILE *f = fopen(path, "r");
    char line[4096];
    unsigned lineno = 0;
    int rc = 0;
    if (!f)
        return cw_diag_set(d, CW_EIO, "%s: cannot read the configuration: %s", path,
                           strerror(errno));
    while (rc == 0 && fgets(line, sizeof line, f)) {
        lineno++;
        char *hash = strchr(line, '#');
        if (hash) *hash = '\0';
        char *s = trim(line);
        if (!*s) continue;
        char *eq = strchr(s, '=');
        if (!eq) {
            rc = cw_diag_set(d, CW_EPARSE, "%s:%u: expected `key = value`", path, lineno);
            break;
        }
        *eq = '\0';
        char *key = trim(s), *val = trim(eq + 1);
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
    }
    if (rc == 0 && ferror(f)) rc = cw_diag_set(d, CW_EIO, "%s: read error", path);
    fclose(f);
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
