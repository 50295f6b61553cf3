/* test_alert_rules.c - the alert rules file (service/alerts/rules.c,
 * threshold.c, defaults.c): every key read into its field, thresholds by
 * metric and unit, the faults a bad rule is refused for (each message
 * "FILE:LINE: rule NAME: ..." and the good rules still loaded), the rule
 * and set hashes (comments, spacing and key order do not change them; a
 * value does), the section's text, appending files, hostile input (long
 * lines, many rules, large lists, a large or binary file), CRLF and a BOM,
 * the copy, the shipped defaults and examples/alerts.rules. */
#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "commitwatch/alerts.h"
#include "test.h"
#include "test_port.h"

#define MIB 1048576.0
#define HOUR_NS 3600000000000LL

/* Parses text as "t.rules"; the warnings are returned in warn_out. */
static unsigned parse(cw_alert_rules_t *rs, const char *text, char *warn_out, size_t cap)
{
    cw_test_scratch_t sc;
    ASSERT_TRUE(cw_test_scratch_open(&sc, "rules_warn") != NULL);
    unsigned nbad = 0;
    cw_diag_t d = {{0}};
    ASSERT_OK(cw_alert_rules_parse(rs, "t.rules", text, sc.f, &nbad, &d));
    char buf[65536];
    cw_test_scratch_read(&sc, buf, sizeof buf);
    if (warn_out) cw_strlcpy(warn_out, buf, cap);
    /* d holds the first fault's line as written to warn (a reload names
     * it), and nothing when there was none. */
    char first[sizeof buf];
    cw_strlcpy(first, buf, sizeof first);
    first[strcspn(first, "\n")] = '\0';
    ASSERT_STR_EQ(d.msg, nbad ? first : "");
    return nbad;
}

#define ASSERT_HAS(hay, needle)                                                                    \
    do {                                                                                           \
        cw_test_checks++;                                                                          \
        if (!strstr((hay), (needle))) CW_FAIL("\"%s\" not found in:\n%s", (needle), (hay));       \
    } while (0)

static void test_full_rule(void)
{
    const char *text = "# leading comment\n"
                       "[rule full]\n"
                       "process = api-*, gateway ,!api-canary*\n"
                       "tag = heap, *Cache*\n"
                       "tag_by = tag\n"
                       "group_by = name\n"
                       "metric = impacting_rate\n"
                       "window = 6h\n"
                       "warn = 50MiB/h\n"
                       "crit = 2GiB/d   # a trailing comment\n"
                       "for = 10m\n"
                       "keep_firing_for = 15m\n"
                       "clear = 0.8\n"
                       "min_outstanding = 64MiB\n"
                       "warmup = 30m\n"
                       "limit = 4GiB\n"
                       "min_leak_score = 0.5\n"
                       "min_impacting_rate = 1GiB/d\n"
                       "labels = team=mem, env=prod\n"
                       "summary = {process} grows by {value} (#{pid})\n"
                       "\n"
                       "# about the next rule\n";
    cw_alert_rules_t rs = {0};
    char warn[4096];
    ASSERT_EQ(parse(&rs, text, warn, sizeof warn), 0);
    ASSERT_STR_EQ(warn, "");
    ASSERT_EQ(rs.n, 1);
    const cw_alert_rule_t *r = &rs.v[0];
    ASSERT_STR_EQ(r->name, "full");
    ASSERT_STR_EQ(r->file, "t.rules");
    ASSERT_EQ(r->line, 2);
    ASSERT_EQ(r->nprocess, 3);
    ASSERT_STR_EQ(r->process[0], "api-*");
    ASSERT_STR_EQ(r->process[1], "gateway");
    ASSERT_STR_EQ(r->process[2], "!api-canary*");
    ASSERT_EQ(r->ntag, 2);
    ASSERT_STR_EQ(r->tag[1], "*Cache*");
    ASSERT_TRUE(!r->tags_summed);
    ASSERT_EQ(r->group_by, CW_AG_NAME);
    ASSERT_EQ(r->metric, CW_AM_IMPACTING_RATE);
    ASSERT_EQ(r->window_ns, 6 * HOUR_NS);
    ASSERT_TRUE(r->has_warn && r->has_crit && !r->below && !r->count_unit);
    ASSERT_TRUE(r->warn == 50 * MIB);
    ASSERT_TRUE(fabs(r->crit - 2048 * MIB / 24) < 1e-6);
    ASSERT_EQ(r->for_ns, 600000000000LL);
    ASSERT_EQ(r->keep_firing_for_ns, 900000000000LL);
    ASSERT_TRUE(r->clear == 0.8);
    ASSERT_U64_EQ(r->min_outstanding, 64ULL << 20);
    ASSERT_EQ(r->warmup_ns, 1800000000000LL);
    ASSERT_EQ(r->limit_kind, CW_AL_SIZE);
    ASSERT_U64_EQ(r->limit_bytes, 4ULL << 30);
    ASSERT_TRUE(r->min_leak_score == 0.5);
    ASSERT_TRUE(fabs(r->min_impacting_rate - 1024 * MIB / 24) < 1e-6);
    ASSERT_EQ(r->nlabels, 2);
    ASSERT_STR_EQ(r->labels[0].name, "team");
    ASSERT_STR_EQ(r->labels[0].value, "mem");
    ASSERT_STR_EQ(r->labels[1].name, "env");
    ASSERT_STR_EQ(r->labels[1].value, "prod");
    /* '#' inside a value (no blank before it) is kept. */
    ASSERT_STR_EQ(r->summary, "{process} grows by {value} (#{pid})");
    /* The text: from the header to the last key line, comments inside kept,
     * the comment after it (about the next rule) not. */
    ASSERT_TRUE(strncmp(r->text, "[rule full]\nprocess = api-*", 27) == 0);
    const char *last = "summary = {process} grows by {value} (#{pid})";
    ASSERT_TRUE(strlen(r->text) > strlen(last));
    ASSERT_STR_EQ(r->text + strlen(r->text) - strlen(last), last);
    ASSERT_TRUE(strstr(r->text, "# a trailing comment") != NULL);
    ASSERT_TRUE(strstr(r->text, "about the next rule") == NULL);
    ASSERT_EQ(strlen(r->hash), 16);
    ASSERT_EQ(strlen(rs.hash), 16);
    cw_alert_rules_free(&rs);
    ASSERT_TRUE(rs.v == NULL && rs.n == 0);
    cw_alert_rules_free(&rs); /* twice: zeroed */
}

static void test_defaults_of_keys(void)
{
    cw_alert_rules_t rs = {0};
    ASSERT_EQ(parse(&rs, "[rule d]\nmetric = outstanding\nwarn = 1GiB\n", NULL, 0), 0);
    const cw_alert_rule_t *r = &rs.v[0];
    ASSERT_EQ(r->group_by, CW_AG_INSTANCE);
    ASSERT_TRUE(!r->tags_summed);
    ASSERT_EQ(r->window_ns, HOUR_NS);
    ASSERT_TRUE(r->has_warn && !r->has_crit);
    ASSERT_EQ(r->for_ns, 0);
    ASSERT_EQ(r->keep_firing_for_ns, 0);
    ASSERT_TRUE(r->clear == 1);
    ASSERT_EQ(r->limit_kind, CW_AL_MACHINE);
    ASSERT_TRUE(r->min_leak_score == 0 && r->min_impacting_rate == 0);
    ASSERT_TRUE(r->summary == NULL && r->nprocess == 0 && r->ntag == 0 && r->nlabels == 0);
    ASSERT_STR_EQ(r->text, "[rule d]\nmetric = outstanding\nwarn = 1GiB");
    cw_alert_rules_free(&rs);
}

typedef struct thr_case {
    cw_alert_metric_t m;
    const char *text;
    int rc;
    double value;
    bool below, count;
} thr_case_t;

static void test_thresholds(void)
{
    static const thr_case_t cases[] = {
        {CW_AM_IMPACTING_RATE, "50MiB/h", 0, 50 * MIB, false, false},
        {CW_AM_IMPACTING_RATE, " 24GiB/d ", 0, 1024 * MIB, false, false},
        {CW_AM_IMPACTING_RATE, "1MiB/m", 0, 60 * MIB, false, false},
        {CW_AM_IMPACTING_RATE, "1KiB/s", 0, 3600 * 1024.0, false, false},
        {CW_AM_IMPACTING_RATE, "< 1MiB/h", 0, MIB, true, false},
        {CW_AM_IMPACTING_RATE, "4096/h", 0, 4096, false, false}, /* bytes: no counts here */
        {CW_AM_IMPACTING_RATE, "50MiB", -1, 0, false, false},      /* a size, not a rate */
        {CW_AM_IMPACTING_RATE, "50MiB/w", -1, 0, false, false},
        {CW_AM_IMPACTING_RATE, "/h", -1, 0, false, false},
        {CW_AM_IMPACTING_RATE, "0.7", -1, 0, false, false},
        {CW_AM_TRANSIENT_RATE, "5000/h", 0, 5000, false, true},
        {CW_AM_TRANSIENT_RATE, "24000/d", 0, 1000, false, true},
        {CW_AM_TRANSIENT_RATE, "1GiB/h", 0, 1024 * MIB, false, false},
        {CW_AM_TRANSIENT_RATE, "5000", -1, 0, false, false},
        {CW_AM_OUTSTANDING, "2GiB", 0, 2048 * MIB, false, false},
        {CW_AM_OUTSTANDING, "> 2GiB", 0, 2048 * MIB, false, false},
        {CW_AM_OUTSTANDING, "< 512MiB", 0, 512 * MIB, true, false},
        {CW_AM_OUTSTANDING, "2GiB/h", -1, 0, false, false},
        {CW_AM_OUTSTANDING, "-5MiB", -1, 0, false, false},
        {CW_AM_OUTSTANDING, "48h", -1, 0, false, false},
        {CW_AM_LEAK_SCORE, "0.7", 0, 0.7, false, false},
        {CW_AM_LEAK_SCORE, "1", 0, 1, false, false},
        {CW_AM_LEAK_SCORE, "1.5", -1, 0, false, false},
        {CW_AM_LEAK_SCORE, "-0.1", -1, 0, false, false},
        {CW_AM_LEAK_SCORE, "nan", -1, 0, false, false},
        {CW_AM_LEAK_SCORE, "2GiB", -1, 0, false, false},
        {CW_AM_TIME_TO_LIMIT, "< 48h", 0, 48 * 3600.0, true, false},
        {CW_AM_TIME_TO_LIMIT, "<2h", 0, 7200, true, false},
        {CW_AM_TIME_TO_LIMIT, "90m", 0, 5400, true, false}, /* below without '<' */
        {CW_AM_TIME_TO_LIMIT, "> 48h", -1, 0, false, false},
        {CW_AM_TIME_TO_LIMIT, "< 0s", -1, 0, false, false},
        {CW_AM_TIME_TO_LIMIT, "< 2GiB", -1, 0, false, false},
        {CW_AM_TIME_TO_LIMIT, "", -1, 0, false, false},
        {(cw_alert_metric_t)99, "1", -1, 0, false, false},
    };
    for (size_t i = 0; i < CW_ARRAY_LEN(cases); i++) {
        const thr_case_t *c = &cases[i];
        double v = -7;
        bool below = !c->below, count = !c->count;
        int rc = cw_alert_parse_threshold(c->m, c->text, &v, &below, &count);
        if (rc != c->rc) CW_FAIL("threshold '%s' (metric %d): rc %d, expected %d", c->text, c->m, rc, c->rc);
        cw_test_checks++;
        if (rc == 0 && (fabs(v - c->value) > 1e-9 * (1 + c->value) || below != c->below ||
                        count != c->count))
            CW_FAIL("threshold '%s': %g below %d count %d, expected %g %d %d", c->text, v, below,
                    count, c->value, c->below, c->count);
        if (rc != 0) ASSERT_TRUE(v == -7); /* untouched on failure */
    }
    ASSERT_STR_EQ(cw_alert_metric_name(CW_AM_TIME_TO_LIMIT), "time_to_limit");
    ASSERT_STR_EQ(cw_alert_metric_name((cw_alert_metric_t)42), "unknown");
}

/* Every kind of bad rule, each between two good ones: each is refused with
 * its file, line, name and reason, counted once, and the good ones load. */
typedef struct bad_case {
    const char *rule;  /* the section, from its header */
    const char *where; /* expected in the message: "t.rules:LINE: rule NAME: ..." */
} bad_case_t;

static void test_bad_rules(void)
{
    static const bad_case_t cases[] = {
        {"[rule b]\nmetric = outstanding\nwarn = 1GiB\ncolour = red\n",
         "t.rules:7: rule b: unknown key 'colour'"},
        {"[rule b]\nmetric = outstanding\nwarn = lots\n",
         "t.rules:6: rule b: warn = lots: outstanding takes a size"},
        {"[rule b]\nwarn = 1GiB\n", "t.rules:4: rule b: no metric"},
        {"[rule b]\nmetric = rss\nwarn = 1GiB\n", "t.rules:5: rule b: metric = rss: metric is"},
        {"[rule b]\nmetric = outstanding\nfor = 5m\n",
         "t.rules:4: rule b: neither warn nor crit is given"},
        {"[rule b]\nmetric = outstanding\nwarn = 2GiB\ncrit = 1GiB\n",
         "t.rules:7: rule b: crit (1GiB) must be above warn (2GiB)"},
        {"[rule b]\nmetric = outstanding\nwarn = 2GiB\ncrit = 2GiB\n", "must be above warn"},
        {"[rule b]\nmetric = time_to_limit\nwarn = < 2h\ncrit = < 24h\n",
         "t.rules:7: rule b: crit (< 24h) must be below warn (< 2h)"},
        {"[rule b]\nmetric = outstanding\nwarn = < 2GiB\ncrit = 4GiB\n",
         "warn and crit must both be above or both below"},
        {"[rule b]\nmetric = transient_rate\nwarn = 5000/h\ncrit = 1GiB/h\n",
         "warn and crit must both be counts per hour or both sizes"},
        {"[rule b]\nmetric = source_down\ncrit = 1\n",
         "rule b: metric = source_down needs group_by = machine"},
        {"[rule b]\ngroup_by = machine\nmetric = source_down\ncrit = 1GiB\n",
         "crit = 1GiB: source_down takes 1"},
        {"[rule b]\nmetric = leak_score\nwarn = 50MiB/h\n",
         "t.rules:6: rule b: warn = 50MiB/h: leak_score takes a number from 0 to 1"},
        {"[rule b]\nmetric = impacting_rate\ncrit = 2GiB\n",
         "t.rules:6: rule b: crit = 2GiB: impacting_rate takes a size per hour"},
        {"[rule good1]\nmetric = outstanding\nwarn = 1GiB\n",
         "t.rules:4: rule good1: a rule of this name is already loaded"},
        {"[rule b]\nmetric = outstanding\nwarn = 1GiB\nwarn = 2GiB\n",
         "t.rules:7: rule b: warn given twice (first on line 6)"},
        {"[rule b]\nmetric = outstanding\nwarn = 1GiB\nclear = 0\n", "clear = 0: clear is a fraction"},
        {"[rule b]\nmetric = outstanding\nwarn = 1GiB\nclear = 1.5\n", "clear = 1.5"},
        {"[rule b]\nmetric = outstanding\nwarn = 1GiB\nwindow = 0\n", "window = 0: window is"},
        {"[rule b]\nmetric = outstanding\nwarn = 1GiB\nwindow = 40d\n", "window = 40d"},
        {"[rule b]\nmetric = outstanding\nwarn = 1GiB\nfor = -5m\n", "for = -5m"},
        {"[rule b]\nmetric = outstanding\nwarn = 1GiB\ngroup_by = tag\n", "group_by is instance"},
        {"[rule b]\nmetric = outstanding\nwarn = 1GiB\ntag_by = none\n", "tag_by is tag"},
        {"[rule b]\nmetric = outstanding\nwarn = 1GiB\nlimit = lots\n", "limit is machine"},
        {"[rule b]\nmetric = time_to_limit\nwarn = < 1h\nlimit = process\ngroup_by = name\n",
         "limit = process needs group_by = instance"},
        {"[rule b]\nmetric = outstanding\nwarn = 1GiB\nmin_leak_score = 2\n", "min_leak_score = 2"},
        {"[rule b]\nmetric = outstanding\nwarn = 1GiB\nmin_impacting_rate = < 1MiB/h\n",
         "min_impacting_rate = < 1MiB/h"},
        {"[rule b]\nmetric = outstanding\nwarn = 1GiB\nmin_outstanding = 1XB\n", "min_outstanding"},
        {"[rule b]\nmetric = outstanding\nwarn = 1GiB\nprocess = a,,b\n", "an empty item"},
        {"[rule b]\nmetric = outstanding\nwarn = 1GiB\nprocess = a, !\n", "'!' must be followed"},
        {"[rule b]\nmetric = outstanding\nwarn = 1GiB\ntag = !heap\n", "tags cannot be excluded"},
        {"[rule b]\nmetric = outstanding\nwarn = 1GiB\nlabels = team\n", "expected name=value"},
        {"[rule b]\nmetric = outstanding\nwarn = 1GiB\nlabels = severity=high\n", "a label name is"},
        {"[rule b]\nmetric = outstanding\nwarn = 1GiB\nlabels = 1x=y\n", "a label name is"},
        {"[rule b]\nmetric = outstanding\nwarn = 1GiB\nlabels = a=1, a=2\n", "a label given twice"},
        {"[rule b]\nmetric = outstanding\nwarn = 1GiB\nlabels = a=\n", "a label needs a value"},
        {"[rule b]\nmetric = outstanding\nwarn = 1GiB\nsummary =\n", "t.rules:7: rule b: summary has no value"},
        {"[rule b]\nmetric = outstanding\nwarn = 1GiB\njust words\n",
         "t.rules:7: rule b: expected `key = value`"},
        {"[rule b c]\nmetric = outstanding\nwarn = 1GiB\n",
         "t.rules:4: a rule name is 1 to 128 of"},
        {"[rule]\nmetric = outstanding\nwarn = 1GiB\n", "t.rules:4: expected a section header"},
        {"[alert b]\nmetric = outstanding\nwarn = 1GiB\n", "t.rules:4: expected a section header"},
        {"[rule b\nmetric = outstanding\nwarn = 1GiB\n", "t.rules:4: expected a section header"},
    };
    for (size_t i = 0; i < CW_ARRAY_LEN(cases); i++) {
        char text[2048], warn[4096];
        snprintf(text, sizeof text,
                 "[rule good1]\nmetric = outstanding\nwarn = 1GiB\n%s"
                 "[rule good2]\nmetric = leak_score\nwarn = 0.7\n",
                 cases[i].rule);
        cw_alert_rules_t rs = {0};
        unsigned nbad = parse(&rs, text, warn, sizeof warn);
        if (nbad != 1) CW_FAIL("case %zu: %u bad, expected 1:\n%s\n%s", i, nbad, text, warn);
        ASSERT_HAS(warn, cases[i].where);
        ASSERT_EQ(rs.n, 2);
        ASSERT_STR_EQ(rs.v[0].name, "good1");
        ASSERT_STR_EQ(rs.v[1].name, "good2");
        cw_alert_rules_free(&rs);
    }

    /* Several faults of one rule: each said, the rule counted once. */
    cw_alert_rules_t rs = {0};
    char warn[4096];
    ASSERT_EQ(parse(&rs,
                    "[rule many]\nmetric = outstanding\nwarn = x\ncrit = y\nhue = 3\n"
                    "[rule ok]\nmetric = outstanding\nwarn = 1GiB\n",
                    warn, sizeof warn),
              1);
    ASSERT_HAS(warn, "t.rules:5: rule many: unknown key 'hue'");
    ASSERT_HAS(warn, "t.rules:3: rule many: warn = x");
    ASSERT_HAS(warn, "t.rules:4: rule many: crit = y");
    ASSERT_EQ(rs.n, 1);
    cw_alert_rules_free(&rs);

    /* Text outside a section: said once per run of it, counted once. */
    ASSERT_EQ(parse(&rs,
                    "metric = outstanding\nwarn = 1GiB\n[rule ok]\nmetric = outstanding\n"
                    "warn = 1GiB\n",
                    warn, sizeof warn),
              1);
    ASSERT_STR_EQ(warn, "t.rules:1: text outside a [rule NAME] section\n");
    ASSERT_EQ(rs.n, 1);
    cw_alert_rules_free(&rs);

    /* NULL warn and nbad are allowed; a NULL text is an empty file. */
    cw_diag_t d;
    ASSERT_OK(cw_alert_rules_parse(&rs, NULL, "[rule x]\n", NULL, NULL, &d));
    ASSERT_OK(cw_alert_rules_parse(&rs, NULL, NULL, NULL, NULL, &d));
    ASSERT_EQ(rs.n, 0);
    cw_alert_rules_free(&rs);
}

static void test_hash_and_append(void)
{
    const char *a = "[rule r]\nmetric = outstanding\nwarn = 1GiB\ncrit = 2GiB\n";
    const char *b = "# same rule, other spelling\n[rule r]\n  crit=2GiB   # critical\n\n"
                    "warn   =   1GiB\r\nmetric = outstanding\n";
    const char *c = "[rule r]\nmetric = outstanding\nwarn = 1GiB\ncrit = 3GiB\n";
    cw_alert_rules_t ra = {0}, rb = {0}, rc = {0};
    ASSERT_EQ(parse(&ra, a, NULL, 0), 0);
    ASSERT_EQ(parse(&rb, b, NULL, 0), 0);
    ASSERT_EQ(parse(&rc, c, NULL, 0), 0);
    ASSERT_STR_EQ(ra.v[0].hash, rb.v[0].hash);
    ASSERT_STR_EQ(ra.hash, rb.hash);
    ASSERT_TRUE(strcmp(ra.v[0].hash, rc.v[0].hash) != 0);
    ASSERT_TRUE(strcmp(ra.hash, rc.hash) != 0);
    /* The text is as written (CRLF kept within, comments kept). */
    ASSERT_STR_EQ(rb.v[0].text, "[rule r]\n  crit=2GiB   # critical\n\nwarn   =   1GiB\r\n"
                                "metric = outstanding");
    /* The hash is FNV-1a 64 of "r\ncrit=2GiB\nmetric=outstanding\nwarn=1GiB\n". */
    {
        const char *canon = "r\ncrit=2GiB\nmetric=outstanding\nwarn=1GiB\n";
        unsigned long long h = 14695981039346656037ULL;
        for (const char *p = canon; *p; p++)
            h = (h ^ (unsigned char)*p) * 1099511628211ULL;
        char hex[17];
        snprintf(hex, sizeof hex, "%016llx", h);
        ASSERT_STR_EQ(ra.v[0].hash, hex);
    }
    /* Appending a second file: the set hash changes, and a name already
     * loaded is refused. */
    char before[17], warn[2048];
    memcpy(before, ra.hash, sizeof before);
    ASSERT_EQ(parse(&ra, "[rule s]\nmetric = leak_score\nwarn = 0.5\n[rule r]\nmetric = "
                         "outstanding\nwarn = 5GiB\n",
                    warn, sizeof warn),
              1);
    ASSERT_HAS(warn, "t.rules:4: rule r: a rule of this name is already loaded");
    ASSERT_EQ(ra.n, 2);
    ASSERT_TRUE(strcmp(before, ra.hash) != 0);
    ASSERT_TRUE(cw_alert_rules_find(&ra, "s") == &ra.v[1]);
    ASSERT_TRUE(cw_alert_rules_find(&ra, "nope") == NULL);
    ASSERT_TRUE(cw_alert_rules_find(NULL, "s") == NULL);
    /* The order of rules is part of the set's hash; an empty set has one. */
    cw_alert_rules_t e = {0};
    ASSERT_EQ(parse(&e, "", NULL, 0), 0);
    ASSERT_EQ(strlen(e.hash), 16);
    cw_alert_rules_free(&ra);
    cw_alert_rules_free(&rb);
    cw_alert_rules_free(&rc);
    cw_alert_rules_free(&e);
}

static void test_copy(void)
{
    cw_alert_rules_t rs = {0}, cp;
    ASSERT_EQ(parse(&rs, cw_alert_default_rules(), NULL, 0), 0);
    ASSERT_EQ(parse(&rs,
                    "[rule x]\nprocess = a, !b\ntag = t\nmetric = outstanding\nwarn = 1GiB\n"
                    "labels = k=v\nsummary = s\n",
                    NULL, 0),
              0);
    ASSERT_OK(cw_alert_rules_copy(&cp, &rs));
    ASSERT_EQ(cp.n, rs.n);
    ASSERT_STR_EQ(cp.hash, rs.hash);
    for (size_t i = 0; i < rs.n; i++) {
        ASSERT_TRUE(cp.v[i].name != rs.v[i].name);
        ASSERT_STR_EQ(cp.v[i].name, rs.v[i].name);
        ASSERT_STR_EQ(cp.v[i].text, rs.v[i].text);
        ASSERT_STR_EQ(cp.v[i].hash, rs.v[i].hash);
        ASSERT_EQ(cp.v[i].nlabels, rs.v[i].nlabels);
        ASSERT_EQ(cp.v[i].nprocess, rs.v[i].nprocess);
    }
    /* x follows the default rules. */
    size_t x = rs.n - 1;
    ASSERT_STR_EQ(cp.v[x].name, "x");
    ASSERT_STR_EQ(cp.v[x].process[1], "!b");
    ASSERT_STR_EQ(cp.v[x].labels[0].value, "v");
    ASSERT_STR_EQ(cp.v[x].summary, "s");
    cw_alert_rules_free(&rs); /* the copy outlives the original (ASan) */
    ASSERT_STR_EQ(cp.v[x].tag[0], "t");
    cw_alert_rules_free(&cp);
    cw_alert_rules_t empty = {0};
    ASSERT_OK(cw_alert_rules_copy(&cp, &empty));
    ASSERT_EQ(cp.n, 0);
    cw_alert_rules_free(&cp);
}

static void test_hostile(void)
{
    cw_alert_rules_t rs = {0};
    char warn[4096];
    /* A line past the limit refuses its rule; the next loads. */
    size_t big = CW_ALERT_MAX_LINE + 10;
    char *text = malloc(big + 200);
    ASSERT_TRUE(text != NULL);
    int n = sprintf(text, "[rule long]\nmetric = outstanding\nwarn = 1GiB\nsummary = ");
    memset(text + n, 'x', big);
    strcpy(text + n + big, "\n[rule ok]\nmetric = outstanding\nwarn = 1GiB\n");
    ASSERT_EQ(parse(&rs, text, warn, sizeof warn), 1);
    ASSERT_HAS(warn, "t.rules:4: rule long: line longer than 4096 bytes");
    ASSERT_EQ(rs.n, 1);
    ASSERT_STR_EQ(rs.v[0].name, "ok");
    cw_alert_rules_free(&rs);
    /* Outside a section too. */
    memset(text, 'y', big);
    strcpy(text + big, "\n[rule ok]\nmetric = outstanding\nwarn = 1GiB\n");
    ASSERT_EQ(parse(&rs, text, warn, sizeof warn), 1);
    ASSERT_HAS(warn, "t.rules:1: line longer than 4096 bytes");
    ASSERT_EQ(rs.n, 1);
    cw_alert_rules_free(&rs);
    free(text);

    /* More rules than a set may hold: the extra are refused. */
    size_t nrules = CW_ALERT_MAX_RULES + 5, cap = nrules * 64;
    text = malloc(cap);
    ASSERT_TRUE(text != NULL);
    size_t at = 0;
    for (size_t i = 0; i < nrules; i++)
        at += (size_t)snprintf(text + at, cap - at, "[rule r%zu]\nmetric = outstanding\nwarn = 1GiB\n", i);
    unsigned nbad = parse(&rs, text, warn, sizeof warn);
    ASSERT_EQ(nbad, 5);
    ASSERT_EQ(rs.n, CW_ALERT_MAX_RULES);
    ASSERT_HAS(warn, "rule r1000: too many rules (at most 1000 in a set)");
    cw_alert_rules_free(&rs);
    free(text);

    /* A list longer than CW_ALERT_MAX_LIST. */
    char list[1024] = "[rule l]\nmetric = outstanding\nwarn = 1GiB\nprocess = p0";
    for (int i = 1; i <= CW_ALERT_MAX_LIST; i++)
        snprintf(list + strlen(list), sizeof list - strlen(list), ",p%d", i);
    strcat(list, "\n");
    ASSERT_EQ(parse(&rs, list, warn, sizeof warn), 1);
    ASSERT_HAS(warn, "too many items (at most 64)");
    cw_alert_rules_free(&rs);

    /* Binary junk: refused rule by rule, never a crash. */
    char junk[4096];
    for (size_t i = 0; i < sizeof junk - 1; i++)
        junk[i] = (char)(1 + (i * 7919 % 255));
    junk[sizeof junk - 1] = '\0';
    nbad = parse(&rs, junk, NULL, 0);
    ASSERT_TRUE(nbad >= 1);
    ASSERT_EQ(rs.n, 0);
    cw_alert_rules_free(&rs);

    /* A BOM and CRLF line ends. */
    ASSERT_EQ(parse(&rs, "\xEF\xBB\xBF[rule w]\r\nmetric = leak_score\r\nwarn = 0.7\r\n", warn,
                    sizeof warn),
              0);
    ASSERT_EQ(rs.n, 1);
    ASSERT_TRUE(rs.v[0].warn == 0.7);
    ASSERT_STR_EQ(rs.v[0].text, "[rule w]\r\nmetric = leak_score\r\nwarn = 0.7");
    cw_alert_rules_free(&rs);
}

static void test_files(void)
{
    cw_alert_rules_t rs = {0};
    cw_diag_t d;
    unsigned nbad = 0;
    char dir[1024], path[1100];
    snprintf(dir, sizeof dir, "%s/cw_rules_XXXXXX", cw_test_tmpdir());
    ASSERT_TRUE(cw_test_mkdtemp(dir) != NULL);

    snprintf(path, sizeof path, "%s/missing.rules", dir);
    ASSERT_EQ(cw_alert_rules_load(&rs, path, NULL, &nbad, &d), CW_EIO);
    ASSERT_HAS(d.msg, "missing.rules: cannot read the alert rules");

    snprintf(path, sizeof path, "%s/zero.rules", dir); /* (not nul.*: a device on Windows) */
    FILE *f = fopen(path, "wb");
    ASSERT_TRUE(f != NULL);
    fwrite("[rule a]\n\0metric = x\n", 1, 21, f);
    fclose(f);
    ASSERT_EQ(cw_alert_rules_load(&rs, path, NULL, &nbad, &d), CW_EPARSE);
    ASSERT_HAS(d.msg, "NUL byte");

    snprintf(path, sizeof path, "%s/big.rules", dir);
    f = fopen(path, "wb");
    ASSERT_TRUE(f != NULL);
    char line[1024];
    memset(line, '#', sizeof line - 1);
    line[sizeof line - 1] = '\n';
    for (size_t i = 0; i <= CW_ALERT_MAX_FILE / sizeof line; i++)
        fwrite(line, 1, sizeof line, f);
    fclose(f);
    ASSERT_EQ(cw_alert_rules_load(&rs, path, NULL, &nbad, &d), CW_ERANGE);
    ASSERT_HAS(d.msg, "larger than 4194304 bytes");
    ASSERT_EQ(rs.n, 0);

    snprintf(path, sizeof path, "%s/good.rules", dir);
    f = fopen(path, "wb");
    ASSERT_TRUE(f != NULL);
    fputs("[rule g]\nmetric = outstanding\nwarn = 1GiB\n[rule h]\nmetric = nope\n", f);
    fclose(f);
    cw_test_scratch_t sc;
    ASSERT_TRUE(cw_test_scratch_open(&sc, "rules_file") != NULL);
    ASSERT_OK(cw_alert_rules_load(&rs, path, sc.f, &nbad, &d));
    char warn[2048];
    cw_test_scratch_read(&sc, warn, sizeof warn);
    ASSERT_EQ(nbad, 1);
    ASSERT_EQ(rs.n, 1);
    ASSERT_STR_EQ(rs.v[0].file, path);
    char expect[1300];
    snprintf(expect, sizeof expect, "%s:5: rule h: metric = nope", path);
    ASSERT_HAS(warn, expect);
    cw_alert_rules_free(&rs);
    ASSERT_OK(cw_test_rmtree(dir));

    /* examples/alerts.rules, next to the fixtures: every rule loads. */
    const char *fx = getenv("CW_FIXTURES");
    if (fx) {
        snprintf(path, sizeof path, "%s/../../examples/alerts.rules", fx);
        nbad = 0;
        ASSERT_TRUE(cw_test_scratch_open(&sc, "rules_example") != NULL);
        ASSERT_OK(cw_alert_rules_load(&rs, path, sc.f, &nbad, &d));
        cw_test_scratch_read(&sc, warn, sizeof warn);
        if (nbad) CW_FAIL("examples/alerts.rules: %u bad rules:\n%s", nbad, warn);
        ASSERT_EQ(rs.n, 6);
        const cw_alert_rule_t *r = cw_alert_rules_find(&rs, "worker_growth");
        ASSERT_TRUE(r && fabs(r->crit - 512 * MIB) < 1e-6);
        r = cw_alert_rules_find(&rs, "service_ttl");
        ASSERT_TRUE(r && r->limit_kind == CW_AL_PROCESS && r->below && r->crit == 6 * 3600.0);
        r = cw_alert_rules_find(&rs, "job_churn");
        ASSERT_TRUE(r && r->count_unit && r->warn == 5000);
        /* With the defaults too: no name clashes. */
        ASSERT_EQ(parse(&rs, cw_alert_default_rules(), NULL, 0), 0);
        ASSERT_EQ(rs.n, 9);
        cw_alert_rules_free(&rs);
    }
}

static void test_default_rules(void)
{
    cw_alert_rules_t rs = {0};
    char warn[2048];
    ASSERT_EQ(parse(&rs, cw_alert_default_rules(), warn, sizeof warn), 0);
    ASSERT_STR_EQ(warn, "");
    ASSERT_EQ(rs.n, 3);
    const cw_alert_rule_t *l = cw_alert_rules_find(&rs, "likely_leak");
    ASSERT_TRUE(l != NULL);
    ASSERT_EQ(l->metric, CW_AM_LEAK_SCORE);
    ASSERT_EQ(l->group_by, CW_AG_INSTANCE);
    ASSERT_TRUE(!l->tags_summed);
    ASSERT_EQ(l->window_ns, 6 * HOUR_NS);
    ASSERT_TRUE(l->warn == 0.7 && l->crit == 0.9 && !l->below);
    ASSERT_TRUE(l->min_impacting_rate == 10 * MIB);
    ASSERT_TRUE(l->for_ns > 0 && l->keep_firing_for_ns > 0 && l->warmup_ns > 0);
    ASSERT_TRUE(l->min_outstanding > 0 && l->clear < 1);
    const cw_alert_rule_t *c = cw_alert_rules_find(&rs, "commit_limit");
    ASSERT_TRUE(c != NULL);
    ASSERT_EQ(c->metric, CW_AM_TIME_TO_LIMIT);
    ASSERT_EQ(c->group_by, CW_AG_MACHINE);
    ASSERT_TRUE(c->tags_summed);
    ASSERT_EQ(c->limit_kind, CW_AL_MACHINE);
    ASSERT_TRUE(c->below && c->warn == 24 * 3600.0 && c->crit == 2 * 3600.0);
    /* The source down (issue 32): critical at once, for the machine. */
    const cw_alert_rule_t *sd = cw_alert_rules_find(&rs, "source_down");
    ASSERT_TRUE(sd != NULL);
    ASSERT_EQ(sd->metric, CW_AM_SOURCE_DOWN);
    ASSERT_EQ(sd->group_by, CW_AG_MACHINE);
    ASSERT_TRUE(sd->has_crit && sd->crit == 1 && !sd->below && sd->for_ns == 0);
    ASSERT_STR_EQ(cw_alert_metric_name(CW_AM_SOURCE_DOWN), "source_down");
    cw_alert_rules_free(&rs);
}

int main(void)
{
    test_full_rule();
    test_defaults_of_keys();
    test_thresholds();
    test_bad_rules();
    test_hash_and_append();
    test_copy();
    test_hostile();
    test_files();
    test_default_rules();
    TEST_DONE();
}
