/* rules_int.h - what rules.c (the file format) and rules_set.c (sets as
 * values) share inside the alerts stage. */
#ifndef CW_ALERTS_RULES_INT_H
#define CW_ALERTS_RULES_INT_H

#include <stddef.h>
#include <stdint.h>

#include "commitwatch/alerts.h"

/* FNV-1a 64 (standard offset basis) of p[0..n). Pure. */
uint64_t cw__alert_fnv1a64(const char *p, size_t n);
/* Frees what r owns and zeroes it. */
void cw__alert_rule_free(cw_alert_rule_t *r);
/* Sets rs->hash from the rules' names and hashes, in order. */
void cw__alert_rules_rehash(cw_alert_rules_t *rs);

#endif
