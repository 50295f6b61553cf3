/* stacks.c - interning of frames and stacks (see stacks.h).
 *
 * Frames: texts in individually allocated strings, found through an open
 * addressing table of frame ids keyed by text. Stacks: every stack's frame
 * ids live in one growing array (offset + length per stack), found through
 * an open addressing table keyed by the hash of the id list. Both tables
 * keep load <= 1/2 and store id+1 so 0 means empty. */
#include "commitwatch/stacks.h"

#include <stdatomic.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "commitwatch/common.h"
#include "commitwatch/error.h"
#include "commitwatch/hash.h"

typedef struct stack_rec {
    uint64_t off;
    uint32_t n;
    uint32_t tag;
    uint64_t hash;
} stack_rec_t;

struct cw_stacks {
    uint64_t uid;
    /* frames: index = frame id; [0] unused */
    char **ftext;
    uint32_t *flen;
    uint64_t *fhash;
    uint32_t nframes;
    size_t fcap;
    uint32_t *ftab; /* open addressing: frame id + 0 (ids start at 1) */
    uint32_t ftab_mask;

    stack_rec_t *stacks; /* index = stack id; [0] = empty stack */
    uint32_t nstacks;
    size_t scap;
    uint32_t *ids; /* all stacks' frame ids */
    uint64_t nids;
    size_t idcap;
    uint32_t *stab; /* stack id + 1 */
    uint32_t stab_mask;
};

static uint64_t hash_list(const uint32_t *f, uint32_t n)
{
    uint64_t h = cw_hash_u64(n);
    for (uint32_t i = 0; i < n; i++)
        h = cw_hash_combine(h, f[i]);
    return h;
}

int cw_stacks_create(cw_stacks_t **out)
{
    cw_stacks_t *s = calloc(1, sizeof *s);
    if (!s) return CW_ENOMEM;
    s->fcap = 64;
    s->ftext = calloc(s->fcap, sizeof *s->ftext);
    s->flen = calloc(s->fcap, sizeof *s->flen);
    s->fhash = calloc(s->fcap, sizeof *s->fhash);
    s->ftab_mask = 127;
    s->ftab = calloc(s->ftab_mask + 1, sizeof *s->ftab);
    s->scap = 64;
    s->stacks = calloc(s->scap, sizeof *s->stacks);
    s->stab_mask = 127;
    s->stab = calloc(s->stab_mask + 1, sizeof *s->stab);
    s->idcap = 1024;
    s->ids = malloc(s->idcap * sizeof *s->ids);
    if (!s->ftext || !s->flen || !s->fhash || !s->ftab || !s->stacks || !s->stab || !s->ids) {
        cw_stacks_destroy(s);
        return CW_ENOMEM;
    }
    static atomic_uint_least64_t next_uid = 1;
    s->uid = atomic_fetch_add(&next_uid, 1);
    s->nframes = 1;
    s->nstacks = 1; /* the empty stack */
    s->stacks[0].hash = hash_list(NULL, 0);
    s->stacks[0].tag = CW_TAG_UNSET;
    s->stab[s->stacks[0].hash & s->stab_mask] = 1;
    *out = s;
    return 0;
}

/* The arrays the set owns besides the frames' texts. */
static const size_t arrays_owned[] = {offsetof(cw_stacks_t, flen), offsetof(cw_stacks_t, fhash),
                                      offsetof(cw_stacks_t, ftab), offsetof(cw_stacks_t, stacks),
                                      offsetof(cw_stacks_t, stab), offsetof(cw_stacks_t, ids)};

void cw_stacks_destroy(cw_stacks_t *s)
{
    if (!s) return;
    cw_free_strv(s->ftext, s->nframes); /* [0] is NULL: frame ids start at 1 */
    cw_free_members(s, arrays_owned, CW_ARRAY_LEN(arrays_owned));
    free(s);
}

/* Rebuilds an open addressing table at twice the size from hashes. */
static int rehash(uint32_t **tab, uint32_t *mask, uint32_t count,
                  uint64_t (*hash_of)(void *, uint32_t), void *ctx, uint32_t first)
{
    uint32_t nmask = (*mask << 1) | 1;
    uint32_t *nt = calloc((size_t)nmask + 1, sizeof *nt);
    if (!nt) return CW_ENOMEM;
    for (uint32_t id = first; id < count; id++) {
        uint32_t i = (uint32_t)hash_of(ctx, id) & nmask;
        while (nt[i])
            i = (i + 1) & nmask;
        nt[i] = id + (first == 0 ? 1 : 0);
    }
    free(*tab);
    *tab = nt;
    *mask = nmask;
    return 0;
}

static uint64_t frame_hash_of(void *ctx, uint32_t id)
{
    return ((cw_stacks_t *)ctx)->fhash[id];
}

static uint64_t stack_hash_of(void *ctx, uint32_t id)
{
    return ((cw_stacks_t *)ctx)->stacks[id].hash;
}

int cw_stacks_intern_frame(cw_stacks_t *s, const char *text, size_t len, uint32_t *out_frame)
{
    uint64_t h = cw_hash_bytes(text, len);
    uint32_t i = (uint32_t)h & s->ftab_mask;
    for (; s->ftab[i]; i = (i + 1) & s->ftab_mask) {
        uint32_t id = s->ftab[i];
        if (s->fhash[id] == h && s->flen[id] == len && memcmp(s->ftext[id], text, len) == 0) {
            *out_frame = id;
            return 0;
        }
    }
    if (s->nframes == s->fcap) {
        /* Three parallel arrays of one capacity: each grows alike. */
        size_t ct = s->fcap, cl = s->fcap, ch = s->fcap;
        if (CW_RESERVE(s->ftext, ct, s->nframes + 1u) || CW_RESERVE(s->flen, cl, s->nframes + 1u) ||
            CW_RESERVE(s->fhash, ch, s->nframes + 1u))
            return CW_ENOMEM;
        s->fcap = ct;
    }
    char *copy = cw_strndup(text, len);
    if (!copy) return CW_ENOMEM;
    uint32_t id = s->nframes++;
    s->ftext[id] = copy;
    s->flen[id] = (uint32_t)len;
    s->fhash[id] = h;
    s->ftab[i] = id;
    if ((uint64_t)s->nframes * 2 > s->ftab_mask) {
        /* Frame ids start at 1, so the table stores ids as they are. */
        if (rehash(&s->ftab, &s->ftab_mask, s->nframes, frame_hash_of, s, 1) != 0) return CW_ENOMEM;
    }
    *out_frame = id;
    return 0;
}

int cw_stacks_intern(cw_stacks_t *s, const uint32_t *frames, uint32_t n, uint32_t *out_stack)
{
    uint64_t h = hash_list(frames, n);
    uint32_t i = (uint32_t)h & s->stab_mask;
    for (; s->stab[i]; i = (i + 1) & s->stab_mask) {
        uint32_t id = s->stab[i] - 1;
        const stack_rec_t *r = &s->stacks[id];
        if (r->hash == h && r->n == n &&
            (n == 0 || memcmp(s->ids + r->off, frames, n * sizeof *frames) == 0)) {
            *out_stack = id;
            return 0;
        }
    }
    if (CW_RESERVE(s->stacks, s->scap, s->nstacks + 1u) ||
        CW_RESERVE(s->ids, s->idcap, s->nids + n))
        return CW_ENOMEM;
    uint32_t id = s->nstacks++;
    stack_rec_t *r = &s->stacks[id];
    r->off = s->nids;
    r->n = n;
    r->hash = h;
    r->tag = CW_TAG_UNSET;
    if (n) memcpy(s->ids + s->nids, frames, n * sizeof *frames);
    s->nids += n;
    s->stab[i] = id + 1;
    if ((uint64_t)s->nstacks * 2 > s->stab_mask) {
        if (rehash(&s->stab, &s->stab_mask, s->nstacks, stack_hash_of, s, 0) != 0) return CW_ENOMEM;
    }
    *out_stack = id;
    return 0;
}

int cw_stacks_intern_strings(cw_stacks_t *s, const char *const *frames, uint32_t n,
                             uint32_t *out_stack)
{
    uint32_t small[64];
    uint32_t *ids = n <= 64 ? small : malloc(n * sizeof *ids);
    int rc = 0;
    if (!ids) return CW_ENOMEM;
    for (uint32_t i = 0; i < n && rc == 0; i++)
        rc = cw_stacks_intern_frame(s, frames[i], strlen(frames[i]), &ids[i]);
    if (rc == 0) rc = cw_stacks_intern(s, ids, n, out_stack);
    if (ids != small) free(ids);
    return rc;
}

/* Accessors of the private struct: one line each, alike to other modules'
 * (pipeline.c's) by design. */
uint64_t cw_stacks_uid(const cw_stacks_t *s)
{
    return s->uid;
}

uint32_t cw_stacks_count(const cw_stacks_t *s)
{
    return s->nstacks;
}

uint32_t cw_stacks_frame_count(const cw_stacks_t *s)
{
    return s->nframes;
}

const uint32_t *cw_stacks_frames(const cw_stacks_t *s, uint32_t stack_id, uint32_t *n)
{
    if (stack_id >= s->nstacks) {
        *n = 0;
        return NULL;
    }
    *n = s->stacks[stack_id].n;
    return s->ids + s->stacks[stack_id].off;
}

const char *cw_stacks_frame_text(const cw_stacks_t *s, uint32_t frame_id)
{
    if (frame_id == 0 || frame_id >= s->nframes) return NULL;
    return s->ftext[frame_id];
}

uint32_t cw_stacks_tag(const cw_stacks_t *s, uint32_t stack_id)
{
    return stack_id < s->nstacks ? s->stacks[stack_id].tag : CW_TAG_UNSET;
}

void cw_stacks_set_tag(cw_stacks_t *s, uint32_t stack_id, uint32_t tag_id)
{
    if (stack_id < s->nstacks) s->stacks[stack_id].tag = tag_id;
}

void cw_stacks_clear_tags(cw_stacks_t *s)
{
    for (uint32_t i = 0; i < s->nstacks; i++)
        s->stacks[i].tag = CW_TAG_UNSET;
}

size_t cw_stacks_memory(const cw_stacks_t *s)
{
    size_t b = sizeof *s + s->fcap * (sizeof *s->ftext + sizeof *s->flen + sizeof *s->fhash) +
               ((size_t)s->ftab_mask + 1) * sizeof *s->ftab + s->scap * sizeof *s->stacks +
               s->idcap * sizeof *s->ids + ((size_t)s->stab_mask + 1) * sizeof *s->stab;
    for (uint32_t i = 1; i < s->nframes; i++)
        b += (size_t)s->flen[i] + 1;
    return b;
}
