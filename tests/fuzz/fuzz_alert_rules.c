/* fuzz_alert_rules.c - libFuzzer target for the alert rules file
 * (service/alerts/rules.c, threshold.c, rules_set.c): the input is one
 * rules file, parsed after the shipped defaults (so names collide too;
 * the defaults are parsed once, each input over a copy of them).
 * It must parse without crashing or leaking, and every rule it keeps must
 * be one the documentation allows: a name, a metric, warn or crit with crit
 * beyond warn, clear in (0, 1], a 16-hex-digit hash, its text starting
 * with its header line; a copy must equal it and the set's hash must not
 * change with a copy. Each threshold line is also fed to
 * cw_alert_parse_threshold for every metric. */
#include <ctype.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "commitwatch/alerts.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define CHECK(c)                                                                                   \
    do {                                                                                           \
        if (!(c)) {                                                                                \
            fprintf(stderr, "fuzz_alert_rules: %s:%d: %s\n", __FILE__, __LINE__, #c);              \
            abort();                                                                               \
        }                                                                                          \
    } while (0)

static void check_rule(const cw_alert_rule_t *r)
{
    CHECK(r->name && *r->name && r->file && r->text);
    const char *h = r->text;
    while (isspace((unsigned char)*h))
        h++;
    CHECK(*h == '['); /* the header line, as written (indented or not) */
    CHECK(strlen(r->hash) == 16);
    CHECK(r->has_warn || r->has_crit);
    if (r->has_warn && r->has_crit) CHECK(r->below ? r->crit < r->warn : r->crit > r->warn);
    CHECK(r->clear > 0 && r->clear <= 1);
    CHECK(r->window_ns > 0);
    CHECK(r->metric >= CW_AM_IMPACTING_RATE && r->metric <= CW_AM_SOURCE_DOWN);
    if (r->metric == CW_AM_TIME_TO_LIMIT) CHECK(r->below);
    if (r->metric == CW_AM_SOURCE_DOWN) CHECK(r->group_by == CW_AG_MACHINE);
    if (r->metric == CW_AM_LEAK_SCORE || r->metric == CW_AM_SOURCE_DOWN) {
        if (r->has_warn) CHECK(r->warn >= 0 && r->warn <= 1);
        if (r->has_crit) CHECK(r->crit >= 0 && r->crit <= 1);
    }
    CHECK(r->nprocess <= CW_ALERT_MAX_LIST && r->ntag <= CW_ALERT_MAX_LIST);
    CHECK(r->nlabels <= CW_ALERT_MAX_LIST);
    if (r->limit_kind == CW_AL_PROCESS) CHECK(r->group_by == CW_AG_INSTANCE);
    if (r->limit_kind == CW_AL_SIZE) CHECK(r->limit_bytes > 0);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size > CW_ALERT_MAX_FILE) return 0;
    char *text = malloc(size + 1);
    if (!text) return 0;
    memcpy(text, data, size);
    text[size] = '\0';

    /* The shipped defaults are parsed once; each input is parsed over a
     * copy of them (a copy equals what it copies: checked below). */
    static cw_alert_rules_t defaults;
    unsigned nbad = 0;
    cw_diag_t d;
    if (!defaults.n) {
        CHECK(cw_alert_rules_parse(&defaults, "defaults", cw_alert_default_rules(), NULL, &nbad,
                                   &d) == 0);
        CHECK(nbad == 0 && defaults.n == 3);
    }
    cw_alert_rules_t rs, cp;
    CHECK(cw_alert_rules_copy(&rs, &defaults) == 0);
    if (cw_alert_rules_parse(&rs, "fuzz", text, NULL, &nbad, &d) == 0) {
        CHECK(rs.n >= 2 && rs.n <= CW_ALERT_MAX_RULES);
        for (size_t i = 0; i < rs.n; i++) {
            check_rule(&rs.v[i]);
            for (size_t j = 0; j < i; j++)
                CHECK(strcmp(rs.v[i].name, rs.v[j].name) != 0);
        }
        if (cw_alert_rules_copy(&cp, &rs) == 0) {
            CHECK(cp.n == rs.n && strcmp(cp.hash, rs.hash) == 0);
            for (size_t i = 0; i < rs.n; i++)
                CHECK(strcmp(cp.v[i].hash, rs.v[i].hash) == 0 &&
                      strcmp(cp.v[i].text, rs.v[i].text) == 0);
            cw_alert_rules_free(&cp);
        }
    }
    cw_alert_rules_free(&rs);

    /* Each line as a threshold of every metric. */
    for (char *line = text, *next; line; line = next) {
        next = strchr(line, '\n');
        if (next) *next++ = '\0';
        for (int m = 0; m <= CW_AM_SOURCE_DOWN + 1; m++) {
            double v = 0;
            bool below = false, count = false;
            if (cw_alert_parse_threshold((cw_alert_metric_t)m, line, &v, &below, &count) == 0) {
                CHECK(isfinite(v) && v >= 0);
                if (m == CW_AM_TIME_TO_LIMIT) CHECK(below && v > 0);
                if (m == CW_AM_SOURCE_DOWN) CHECK(v <= 1);
                CHECK(m <= CW_AM_SOURCE_DOWN); /* past the last metric: refused */
                if (count) CHECK(m == CW_AM_TRANSIENT_RATE);
            }
        }
    }
    free(text);
    return 0;
}
