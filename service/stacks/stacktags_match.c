/* stacktags_match.c - matching frames and stacks against compiled stack-tag
 * rules: pattern shapes, the frame -> rule decision (with its cache per
 * interned frame id), a stack's tag, explain, and the public view of a
 * rule.
 *
 * Cost model: a frame is matched once per cw_stacks table (frames are
 * interned, and the decision is cached by frame id); tagging a stack is
 * then one cache load per frame. Matching a new frame looks up literal
 * module patterns by binary search and tries only the rules whose module
 * pattern has a wildcard besides; most patterns are exact, prefix or
 * suffix and skip the general matcher. */
#include <stdlib.h>
#include <string.h>

#include "stacks/stacktags_int.h"

/* ---- patterns --------------------------------------------------------- */

static char lower(char c)
{
    return c >= 'A' && c <= 'Z' ? (char)(c - 'A' + 'a') : c;
}

size_t cw__st_strip_ext(const char *name, size_t len)
{
    static const char *const exts[] = {"dll", "exe", "sys"};
    if (len <= 4 || name[len - 4] != '.') return len;
    for (size_t i = 0; i < 3; i++)
        if (lower(name[len - 3]) == exts[i][0] && lower(name[len - 2]) == exts[i][1] &&
            lower(name[len - 1]) == exts[i][2])
            return len - 4;
    return len;
}

int cw__st_pat_compile(st_pat_t *p, const char *text, size_t len, bool lower_case)
{
    size_t stars = 0;
    for (size_t i = 0; i < len; i++)
        stars += text[i] == '*';
    size_t from = 0, n = len;
    if (stars == len && len > 0) {
        p->kind = ST_PAT_ANY;
        n = 0;
    } else if (stars == 0) {
        p->kind = ST_PAT_EXACT;
    } else if (stars == 1 && text[len - 1] == '*') {
        p->kind = ST_PAT_PREFIX;
        n = len - 1;
    } else if (stars == 1 && text[0] == '*') {
        p->kind = ST_PAT_SUFFIX;
        from = 1;
        n = len - 1;
    } else {
        p->kind = ST_PAT_GLOB;
    }
    p->text = malloc(n + 1);
    if (!p->text) return CW_ENOMEM;
    for (size_t i = 0; i < n; i++)
        p->text[i] = lower_case ? lower(text[from + i]) : text[from + i];
    p->text[n] = '\0';
    p->len = (uint32_t)n;
    return 0;
}

void cw__st_pat_free(st_pat_t *p)
{
    free(p->text);
    p->text = NULL;
}

/* '*' matches any run. Greedy with one backtrack point: when a later star
 * is met the earlier one never needs revisiting, so this is O(n * m) at
 * worst and linear in practice. */
static bool glob(const char *p, size_t pn, const char *s, size_t sn)
{
    size_t pi = 0, si = 0, star = SIZE_MAX, mark = 0;
    while (si < sn) {
        if (pi < pn && p[pi] == '*') {
            star = pi++;
            mark = si;
        } else if (pi < pn && p[pi] == s[si]) {
            pi++;
            si++;
        } else if (star != SIZE_MAX) {
            pi = star + 1;
            si = ++mark;
        } else {
            return false;
        }
    }
    while (pi < pn && p[pi] == '*')
        pi++;
    return pi == pn;
}

static bool pat_match(const st_pat_t *p, const char *s, size_t n)
{
    switch (p->kind) {
    case ST_PAT_ANY:
        return true;
    case ST_PAT_EXACT:
        return n == p->len && memcmp(s, p->text, n) == 0;
    case ST_PAT_PREFIX:
        return n >= p->len && memcmp(s, p->text, p->len) == 0;
    case ST_PAT_SUFFIX:
        return n >= p->len && memcmp(s + n - p->len, p->text, p->len) == 0;
    default:
        return glob(p->text, p->len, s, n);
    }
}

/* ---- frames ----------------------------------------------------------- */

/* A frame split for matching: module lowercased, base name only. */
typedef struct frame_view {
    const char *mod; /* lowercased */
    size_t mlen, mstem;
    bool has_dot;
    const char *meth;
    size_t methlen;
} frame_view_t;

/* Module match with optional Windows extensions (see stacktags.h). */
static bool module_match(const st_rule_t *ru, const frame_view_t *f)
{
    if (pat_match(&ru->mod, f->mod, f->mlen)) return true;
    if (!ru->mod_stem.text) /* pattern without extension vs module with one */
        return f->mstem < f->mlen && pat_match(&ru->mod, f->mod, f->mstem);
    /* pattern with an extension vs a module without any */
    return !f->has_dot && pat_match(&ru->mod_stem, f->mod, f->mlen);
}

/* Does rule a decide a frame before rule b (b may be ST_NONE)? Deeper tag,
 * then higher priority, then loaded first (lower index). */
static bool better(const st_compiled_t *c, uint32_t a, uint32_t b)
{
    if (b == ST_NONE) return true;
    const st_rule_t *x = &c->rules[a], *y = &c->rules[b];
    if (x->depth != y->depth) return x->depth > y->depth;
    if (x->prio != y->prio) return x->prio > y->prio;
    return a < b;
}

static void consider(const st_compiled_t *c, uint32_t k, const frame_view_t *f, uint32_t *best)
{
    if (!better(c, k, *best)) return;
    if (module_match(&c->rules[k], f) && pat_match(&c->rules[k].meth, f->meth, f->methlen))
        *best = k;
}

static bool is_hex(char ch)
{
    return (ch >= '0' && ch <= '9') || (lower(ch) >= 'a' && lower(ch) <= 'f');
}

uint32_t cw__st_match_text(const cw_stacktags_t *r, const char *text)
{
    const st_compiled_t *c = &r->c;
    if (c->nrules == 0) return ST_NONE;
    const char *bang = strchr(text, '!');
    const char *mod = text;
    size_t mlen = bang ? (size_t)(bang - text) : strlen(text);
    for (size_t i = mlen; i > 0; i--)
        if (mod[i - 1] == '/' || mod[i - 1] == '\\') {
            mod += i;
            mlen -= i;
            break;
        }

    frame_view_t f;
    f.meth = bang ? bang + 1 : "";
    f.methlen = strlen(f.meth);
    /* "Function+0x1f": the offset is not part of the name. */
    const char *plus = strrchr(f.meth, '+');
    if (plus && plus[1] == '0' && (plus[2] == 'x' || plus[2] == 'X') && plus[3]) {
        const char *h = plus + 3;
        while (is_hex(*h))
            h++;
        if (!*h) f.methlen = (size_t)(plus - f.meth);
    }

    char small[256];
    char *lm = mlen < sizeof small ? small : malloc(mlen + 1);
    if (!lm) return ST_NONE;
    for (size_t i = 0; i < mlen; i++)
        lm[i] = lower(mod[i]);
    lm[mlen] = '\0';
    f.mod = lm;
    f.mlen = mlen;
    f.mstem = cw__st_strip_ext(lm, mlen);
    f.has_dot = memchr(lm, '.', mlen) != NULL;

    uint32_t best = ST_NONE;
    /* Literal module patterns with the frame's key: lower bound, then run. */
    size_t lo = 0, hi = c->nlit;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        const st_lit_t *l = &c->lit[mid];
        size_t n = l->keylen < f.mstem ? l->keylen : f.mstem;
        int cmp = memcmp(l->key, lm, n);
        if (cmp == 0) cmp = l->keylen < f.mstem ? -1 : l->keylen > f.mstem;
        if (cmp < 0)
            lo = mid + 1;
        else
            hi = mid;
    }
    for (; lo < c->nlit && c->lit[lo].keylen == f.mstem && memcmp(c->lit[lo].key, lm, f.mstem) == 0;
         lo++)
        consider(c, c->lit[lo].rule, &f, &best);
    for (uint32_t i = 0; i < c->nwild; i++)
        consider(c, c->wild[i], &f, &best);

    if (lm != small) free(lm);
    return best;
}

/* ---- the public view of a rule ---------------------------------------- */

void cw__st_rule_view(const cw_stacktags_t *r, uint32_t t, const st_entry_t *e,
                      cw_stacktags_rule_t *out)
{
    out->tag = r->set.tags[t].path;
    out->priority = r->c.eprio[t];
    out->module = e->module;
    out->method = e->method;
    out->file = e->file < r->nfiles ? r->files[e->file] : "";
    out->line = e->line;
}

bool cw_stacktags_match_frame(const cw_stacktags_t *r, const char *frame, cw_stacktags_rule_t *rule)
{
    uint32_t k = cw__st_match_text(r, frame);
    if (k == ST_NONE) return false;
    if (rule) cw__st_rule_view(r, r->c.rules[k].tag, r->c.rules[k].src, rule);
    return true;
}

/* ---- stacks ----------------------------------------------------------- */

void cw_stacktags_explain(const cw_stacktags_t *r, const char *const *frames, size_t n,
                          cw_stacktags_explain_t *out)
{
    uint32_t best = ST_NONE;
    size_t at = 0;
    for (size_t i = 0; i < n; i++) {
        uint32_t k = cw__st_match_text(r, frames[i]);
        /* >=: ties go to the frame nearest the allocating call. */
        if (k != ST_NONE && (best == ST_NONE || r->c.rules[k].prio >= r->c.rules[best].prio)) {
            best = k;
            at = i;
        }
    }
    memset(out, 0, sizeof *out);
    if (best == ST_NONE) {
        out->tag = CW_TAG_OTHER_NAME;
        out->frame = -1;
        return;
    }
    out->matched = true;
    out->frame = (long)at;
    cw__st_rule_view(r, r->c.rules[best].tag, r->c.rules[best].src, &out->rule);
    out->tag = out->rule.tag;
}

/* Makes the frame cache cover frame ids < need for table s; false when
 * out of memory (the caller then matches without the cache). */
static bool cache_ready(cw_stacktags_t *r, const cw_stacks_t *s, uint32_t need)
{
    if (r->cache_uid != cw_stacks_uid(s)) {
        if (r->fcache) memset(r->fcache, 0, r->fcache_n * sizeof *r->fcache);
        r->cache_uid = cw_stacks_uid(s);
    }
    return CW_RESERVE_ZEROED(r->fcache, r->fcache_n, need) == 0;
}

const char *cw_stacktags_tag_stack(cw_stacktags_t *r, const cw_stacks_t *s, uint32_t stack_id)
{
    const st_rule_t *rules = r->c.rules;
    uint32_t n, best = ST_NONE;
    const uint32_t *frames = cw_stacks_frames(s, stack_id, &n);
    bool cached = cache_ready(r, s, cw_stacks_frame_count(s));

    for (uint32_t i = 0; i < n; i++) {
        uint32_t f = frames[i], k;
        if (cached && r->fcache[f]) {
            k = r->fcache[f] - 2; /* 1 (no rule) wraps to ST_NONE */
        } else {
            const char *text = cw_stacks_frame_text(s, f);
            k = text ? cw__st_match_text(r, text) : ST_NONE;
            if (cached) r->fcache[f] = k + 2;
        }
        if (k != ST_NONE && (best == ST_NONE || rules[k].prio >= rules[best].prio)) best = k;
    }
    return best == ST_NONE ? CW_TAG_OTHER_NAME : r->set.tags[rules[best].tag].path;
}
