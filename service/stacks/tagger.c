/* tagger.c - the tagger seam: owns an engine, interns tag names, caches
 * each stack's tag in cw_stacks, and tags pseudo-stacks itself. Also the
 * built-in trivial engine ("Other" for everything). */
#include "commitwatch/tagger.h"

#include <stdlib.h>
#include <string.h>

#include "commitwatch/common.h"
#include "commitwatch/error.h"

struct cw_tagger {
    const cw_tagger_ops_t *ops;
    void *impl;
    char **names; /* tag id -> owned name */
    uint32_t nnames;
    size_t cap;
};

static const char *builtin_tag(void *impl, const cw_stacks_t *s, uint32_t stack_id)
{
    (void)impl;
    (void)s;
    (void)stack_id;
    return CW_TAG_OTHER_NAME;
}

static const char *builtin_hash(void *impl)
{
    (void)impl;
    return "builtin-other-v1";
}

static const cw_tagger_ops_t builtin_ops = {"builtin", builtin_tag, builtin_hash, NULL};

int cw_tagger_create(const cw_tagger_ops_t *ops, void *impl, cw_tagger_t **out)
{
    cw_tagger_t *t = calloc(1, sizeof *t);
    if (!t) {
        if (ops->destroy) ops->destroy(impl);
        return CW_ENOMEM;
    }
    t->ops = ops;
    t->impl = impl;
    *out = t;
    return 0;
}

int cw_tagger_create_builtin(cw_tagger_t **out)
{
    return cw_tagger_create(&builtin_ops, NULL, out);
}

void cw_tagger_destroy(cw_tagger_t *t)
{
    if (!t) return;
    if (t->ops->destroy) t->ops->destroy(t->impl);
    cw_free_strv(t->names, t->nnames);
    free(t);
}

/* Id of name, added if new; CW_TAG_UNSET if out of memory. Tag sets are
 * small (tens of names), and this runs once per new stack. */
static uint32_t intern_name(cw_tagger_t *t, const char *name, size_t len)
{
    for (uint32_t i = 0; i < t->nnames; i++)
        if (strncmp(t->names[i], name, len) == 0 && t->names[i][len] == '\0') return i;
    if (CW_RESERVE(t->names, t->cap, t->nnames + 1u)) return CW_TAG_UNSET;
    char *copy = cw_strndup(name, len);
    if (!copy) return CW_TAG_UNSET;
    t->names[t->nnames] = copy;
    return t->nnames++;
}

uint32_t cw_tagger_tag(cw_tagger_t *t, cw_stacks_t *s, uint32_t stack_id)
{
    uint32_t tag = cw_stacks_tag(s, stack_id);
    if (tag != CW_TAG_UNSET) return tag;

    uint32_t n;
    const uint32_t *frames = cw_stacks_frames(s, stack_id, &n);
    const char *name = NULL;
    if (n > 0) {
        const char *last = cw_stacks_frame_text(s, frames[n - 1]);
        size_t len = last ? strlen(last) : 0;
        if (len >= 2 && last[0] == '(' && last[len - 1] == ')') name = last;
    }
    if (!name) name = t->ops->tag(t->impl, s, stack_id);
    tag = intern_name(t, name, strlen(name));
    if (tag != CW_TAG_UNSET)
        cw_stacks_set_tag(s, stack_id, tag);
    else
        tag = intern_name(t, CW_TAG_OTHER_NAME, strlen(CW_TAG_OTHER_NAME));
    return tag == CW_TAG_UNSET ? 0 : tag;
}

const char *cw_tagger_tag_name(const cw_tagger_t *t, uint32_t tag_id)
{
    return tag_id < t->nnames ? t->names[tag_id] : CW_TAG_OTHER_NAME;
}

uint32_t cw_tagger_tag_count(const cw_tagger_t *t)
{
    return t->nnames;
}

const char *cw_tagger_rules_hash(const cw_tagger_t *t)
{
    return t->ops->rules_hash(t->impl);
}

const char *cw_tagger_engine_name(const cw_tagger_t *t)
{
    return t->ops->name;
}
