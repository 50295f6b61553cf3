/* tagger.h - the seam between stacks and stack-tag rule engines.
 *
 * A tagger gives every stack a tag name ("Windows Heap", "Thread Stack",
 * "Other", ...). The rules live in an engine behind cw_tagger_ops; this
 * module owns the engine, interns tag names into dense tag ids, and caches
 * the tag of each stack in cw_stacks (so tagging a stack costs the engine
 * once).
 *
 * Pseudo-stacks are tagged here, before any engine sees them: a stack whose
 * allocating (last) frame is a pseudo-frame "(...)", such as "(before
 * trace)", "(fork)" or "(exec image)", gets that text as its tag. The empty
 * stack gets "Other" unless the engine says otherwise.
 *
 * Thread: the core thread only. */
#ifndef COMMITWATCH_TAGGER_H
#define COMMITWATCH_TAGGER_H

#include <stdint.h>

#include "commitwatch/stacks.h"

#define CW_TAG_OTHER_NAME "Other"

typedef struct cw_tagger_ops {
    /* Short engine name for logs ("builtin", "stacktags"). */
    const char *name;
    /* Returns the tag name of the stack; the string must stay valid until
     * destroy. Never NULL (return "Other" for no match). */
    const char *(*tag)(void *impl, const cw_stacks_t *s, uint32_t stack_id);
    /* A stable hash of the rule set in force (hex text), used to detect a
     * rule change against a stored database. Valid until destroy. */
    const char *(*rules_hash)(void *impl);
    void (*destroy)(void *impl); /* may be NULL */
} cw_tagger_ops_t;

typedef struct cw_tagger cw_tagger_t;

/* The built-in trivial engine: every stack is "Other". */
int cw_tagger_create_builtin(cw_tagger_t **out);
/* Wraps an engine; ownership of impl passes to the tagger (destroyed with
 * it, also on failure). 0 or CW_ENOMEM. */
int cw_tagger_create(const cw_tagger_ops_t *ops, void *impl, cw_tagger_t **out);
void cw_tagger_destroy(cw_tagger_t *t); /* accepts NULL */

/* Tag id of the stack, computed once and cached in s. */
uint32_t cw_tagger_tag(cw_tagger_t *t, cw_stacks_t *s, uint32_t stack_id);
/* Tag name of an id returned by cw_tagger_tag. Borrowed. */
const char *cw_tagger_tag_name(const cw_tagger_t *t, uint32_t tag_id);
uint32_t cw_tagger_tag_count(const cw_tagger_t *t);
const char *cw_tagger_rules_hash(const cw_tagger_t *t);
const char *cw_tagger_engine_name(const cw_tagger_t *t);

#endif
