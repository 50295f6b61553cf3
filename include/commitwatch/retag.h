/* retag.h - re-tagging a database's stored stacks when the stack-tag rules
 * change.
 *
 * Tags are derived from stacks (docs/DESIGN.md, "Storage model"): the
 * database keeps every stack's frames, the tag the rules in force gave it
 * (stacks.tag), and those rules' hash (meta 'rules_hash'). When a tagger
 * with another hash opens the database (at `run` start, on a rules reload),
 * every stored stack is tagged again, so every figure by tag reflects the
 * new rules for old data too.
 *
 * Thread: whoever owns the read-write store at that moment (before the
 * writer thread starts, or the writer thread itself). */
#ifndef COMMITWATCH_RETAG_H
#define COMMITWATCH_RETAG_H

#include <stdbool.h>
#include <stdint.h>

#include "commitwatch/error.h"
#include "commitwatch/store.h"
#include "commitwatch/tagger.h"

#define CW_RETAG_META_KEY "rules_hash"
/* The rule files those tags came from (one path a line; "" = the platform's
 * defaults), written by the service with each re-tag, for /api/tags. */
#define CW_RULE_FILES_META_KEY "rule_files"

typedef struct cw_retag_result {
    bool ran;         /* the stored hash differed (or was absent) */
    uint64_t stacks;  /* stored stacks looked at */
    uint64_t changed; /* of which the tag changed */
} cw_retag_result_t;

/* When meta 'rules_hash' differs from cw_tagger_rules_hash(t) or is absent,
 * tags every stored stack with t, updates the tags that changed and stores
 * the new hash, all in one transaction; otherwise does nothing. out may be
 * NULL. 0, or CW_EDB / CW_ENOMEM with d filled and the database unchanged.
 *
 * t tags stacks of a private cw_stacks table here; the caller's own table
 * keeps whatever tag ids it cached (clear them with cw_stacks_clear_tags()
 * when the tagger itself is replaced). */
int cw_retag_store(cw_store_t *s, cw_tagger_t *t, cw_retag_result_t *out, cw_diag_t *d);

#endif
