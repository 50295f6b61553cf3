/* stacktags_set.c - the tag tree as loaded (st_set, stacktags_int.h):
 * finding or creating a tag by its path, appending entrypoints, copying a
 * set, merging one file's set into another, and freeing. The ground floor
 * of the stack-tag files: the loader builds a set with it, stacktags.c
 * copies and merges sets with it; it calls neither. */
#include "stacks/stacktags_int.h"

#include <stdlib.h>
#include <string.h>

#include "commitwatch/common.h"

static void entry_free(st_entry_t *e)
{
    free(e->module);
    free(e->method);
}

void cw__st_set_free(st_set_t *set)
{
    for (uint32_t i = 0; i < set->ntags; i++) {
        st_tag_t *t = &set->tags[i];
        for (uint32_t j = 0; j < t->nentries; j++)
            entry_free(&t->entries[j]);
        free(t->entries);
        free(t->path);
    }
    free(set->tags);
    memset(set, 0, sizeof *set);
}

/* Tag index with exactly this path, or ST_NONE. Sets are small (tens of
 * tags); a linear scan keeps this simple. */
static uint32_t find_tag(const st_set_t *set, const char *path, size_t len)
{
    for (uint32_t i = 0; i < set->ntags; i++)
        if (strncmp(set->tags[i].path, path, len) == 0 && set->tags[i].path[len] == '\0') return i;
    return ST_NONE;
}

int cw__st_set_tag(st_set_t *set, const char *path, size_t len, uint32_t *out)
{
    uint32_t parent = ST_NONE, depth = 0;
    size_t start = 0;
    if (len == 0) return CW_EINVAL;
    /* Walk the components, finding or creating each prefix. */
    for (size_t i = 0; i <= len; i++) {
        if (i < len && path[i] != '\\') continue;
        if (i == start) return CW_EINVAL; /* empty component */
        if (++depth > ST_MAX_DEPTH) return CW_EINVAL;
        uint32_t idx = find_tag(set, path, i);
        if (idx == ST_NONE) {
            if (CW_RESERVE(set->tags, set->cap, set->ntags + 1u)) return CW_ENOMEM;
            st_tag_t *t = &set->tags[set->ntags];
            memset(t, 0, sizeof *t);
            if (!(t->path = cw_strndup(path, i))) return CW_ENOMEM;
            t->name_off = (uint32_t)start;
            t->parent = parent;
            t->depth = depth;
            idx = set->ntags++;
        }
        parent = idx;
        start = i + 1;
    }
    *out = parent;
    return 0;
}

int cw__st_add_entry(st_set_t *set, uint32_t tag, const char *module, const char *method,
                     uint32_t file, uint32_t line)
{
    st_tag_t *t = &set->tags[tag];
    if (CW_RESERVE(t->entries, t->cap, t->nentries + 1u)) return CW_ENOMEM;
    st_entry_t *e = &t->entries[t->nentries];
    memset(e, 0, sizeof *e);
    e->module = cw_strdup(module);
    e->method = method ? cw_strdup(method) : NULL;
    if (!e->module || (method && !e->method)) {
        entry_free(e);
        return CW_ENOMEM;
    }
    e->file = file;
    e->line = line;
    t->nentries++;
    return 0;
}

int cw__st_set_clone(st_set_t *dst, const st_set_t *src)
{
    memset(dst, 0, sizeof *dst);
    if (src->ntags == 0) return 0;
    dst->tags = calloc(src->ntags, sizeof *dst->tags);
    if (!dst->tags) return CW_ENOMEM;
    dst->cap = src->ntags;
    for (uint32_t i = 0; i < src->ntags; i++) {
        const st_tag_t *s = &src->tags[i];
        st_tag_t *d = &dst->tags[i];
        *d = *s;
        d->entries = NULL;
        d->nentries = d->cap = 0;
        dst->ntags = i + 1;
        if (!(d->path = cw_strdup(s->path))) goto fail;
        d->entries = s->nentries ? malloc(s->nentries * sizeof *d->entries) : NULL;
        if (s->nentries && !d->entries) goto fail;
        d->cap = s->nentries;
        for (uint32_t j = 0; j < s->nentries; j++) {
            d->entries[j] = s->entries[j];
            d->entries[j].module = cw_strdup(s->entries[j].module);
            d->entries[j].method = s->entries[j].method ? cw_strdup(s->entries[j].method) : NULL;
            d->nentries = j + 1;
            if (!d->entries[j].module || (s->entries[j].method && !d->entries[j].method)) goto fail;
        }
    }
    return 0;
fail:
    cw__st_set_free(dst);
    return CW_ENOMEM;
}

int cw__st_set_merge(st_set_t *set, st_set_t *stage, uint64_t base)
{
    for (uint32_t i = 0; i < stage->ntags; i++) {
        st_tag_t *s = &stage->tags[i];
        uint32_t idx;
        int rc = cw__st_set_tag(set, s->path, strlen(s->path), &idx);
        if (rc) return rc;
        st_tag_t *d = &set->tags[idx];
        if (s->priority_set) {
            d->priority = s->priority;
            d->priority_set = true;
        }
        if (s->nentries) {
            for (uint32_t j = 0; j < d->nentries; j++)
                entry_free(&d->entries[j]);
            free(d->entries);
            d->entries = s->entries;
            d->nentries = s->nentries;
            d->cap = s->cap;
            s->entries = NULL;
            s->nentries = s->cap = 0;
            for (uint32_t j = 0; j < d->nentries; j++)
                d->entries[j].seq += base;
        }
    }
    return 0;
}
