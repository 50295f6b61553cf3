/* stacktags.c - the stack-tag rule set (see stacktags.h): loading files
 * into the tag tree (the tree itself is stacktags_set.c's), compiling it
 * for matching, its content hash, access to the tree, finding the default
 * files, and the cw_tagger engine. The top of the stack-tag files: it
 * calls stacktags_load.c, stacktags_match.c and stacktags_set.c; none of
 * them calls it.
 *
 * Loading is all or nothing: a file is parsed into a fresh set, merged
 * into a copy of the current set, and the copy compiled; only when all of
 * that worked do the copy and its compiled form replace the old ones. */
#include "stacks/stacktags_int.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "commitwatch/common.h"
#include "commitwatch/log.h"
#include "commitwatch/platform.h"

/* ---- compiling -------------------------------------------------------- */

static void compiled_free(st_compiled_t *c)
{
    for (uint32_t k = 0; k < c->nrules; k++) {
        cw__st_pat_free(&c->rules[k].mod);
        cw__st_pat_free(&c->rules[k].mod_stem);
        cw__st_pat_free(&c->rules[k].meth);
    }
    free(c->rules);
    free(c->lit);
    free(c->wild);
    free(c->eprio);
    free(c->preorder);
    memset(c, 0, sizeof *c);
}

static int rule_seq_cmp(const void *a, const void *b)
{
    const st_rule_t *x = a, *y = b;
    return x->seq < y->seq ? -1 : x->seq > y->seq;
}

static int lit_cmp(const void *a, const void *b)
{
    const st_lit_t *x = a, *y = b;
    uint32_t n = x->keylen < y->keylen ? x->keylen : y->keylen;
    int c = memcmp(x->key, y->key, n);
    if (c) return c;
    if (x->keylen != y->keylen) return x->keylen < y->keylen ? -1 : 1;
    return x->rule < y->rule ? -1 : x->rule > y->rule;
}

/* Tree order: a parent, then its children (in creation order), depth first.
 * Children are gathered per parent with a counting pass (CSR), so this is
 * linear in the number of tags. */
static int build_preorder(const st_set_t *set, uint32_t *out)
{
    uint32_t n = set->ntags;
    uint32_t *start = calloc((size_t)n + 2, sizeof *start);
    uint32_t *kids = malloc(((size_t)n + 1) * sizeof *kids);
    uint32_t *stack = malloc(((size_t)n + 1) * sizeof *stack);
    int rc = CW_ENOMEM;
    if (!start || !kids || !stack) goto out;
    /* Slot 0 is the virtual root; tag i is slot i + 1. */
    for (uint32_t i = 0; i < n; i++) {
        uint32_t p = set->tags[i].parent == ST_NONE ? 0 : set->tags[i].parent + 1;
        start[p + 1]++;
    }
    for (uint32_t i = 1; i <= n + 1; i++)
        start[i] += start[i - 1];
    {
        uint32_t *fill = calloc((size_t)n + 1, sizeof *fill);
        if (!fill) goto out;
        for (uint32_t i = 0; i < n; i++) {
            uint32_t p = set->tags[i].parent == ST_NONE ? 0 : set->tags[i].parent + 1;
            kids[start[p] + fill[p]++] = i;
        }
        free(fill);
    }
    /* Iterative DFS; push children in reverse so the first pops first. */
    uint32_t sp = 0, o = 0;
    for (uint32_t k = start[1]; k > start[0]; k--)
        stack[sp++] = kids[k - 1];
    while (sp) {
        uint32_t t = stack[--sp];
        out[o++] = t;
        for (uint32_t k = start[t + 2]; k > start[t + 1]; k--)
            stack[sp++] = kids[k - 1];
    }
    rc = 0;
out:
    free(start);
    free(kids);
    free(stack);
    return rc;
}

/* The content hash: two FNV-1a streams with different seeds over a
 * canonical text of the rules (semantics version, every tag in tree order
 * with its effective priority, then every entrypoint in load order, which
 * decides frame ties). File names, comments and layout do not count. */
typedef struct hasher {
    uint64_t a, b;
} hasher_t;

static void hash_bytes(hasher_t *h, const void *p, size_t n)
{
    const unsigned char *s = p;
    for (size_t i = 0; i < n; i++) {
        h->a = (h->a ^ s[i]) * 1099511628211ULL;
        h->b = (h->b ^ s[i]) * 1099511628211ULL;
    }
}

static void hash_str(hasher_t *h, const char *s)
{
    hash_bytes(h, s, strlen(s) + 1); /* the NUL separates fields */
}

static void hash_int(hasher_t *h, long long v)
{
    char buf[32];
    snprintf(buf, sizeof buf, "%lld", v);
    hash_str(h, buf);
}

static void compute_hash(const st_set_t *set, st_compiled_t *c)
{
    hasher_t h = {1469598103934665603ULL, 0x84222325cbf29ce4ULL};
    hash_str(&h, "commitwatch-stacktags-v1");
    for (uint32_t i = 0; i < set->ntags; i++) {
        uint32_t t = c->preorder[i];
        hash_str(&h, "T");
        hash_str(&h, set->tags[t].path);
        hash_int(&h, c->eprio[t]);
    }
    for (uint32_t k = 0; k < c->nrules; k++) { /* in load order */
        hash_str(&h, "E");
        hash_str(&h, set->tags[c->rules[k].tag].path);
        hash_str(&h, c->rules[k].src->module);
        if (c->rules[k].src->method)
            hash_str(&h, c->rules[k].src->method);
        else
            hash_str(&h, "\x01(any)");
    }
    snprintf(c->hash, sizeof c->hash, "%016llx%016llx", (unsigned long long)h.a,
             (unsigned long long)h.b);
}

static int compile_rule(st_rule_t *ru, const st_set_t *set, uint32_t t, const st_entry_t *e,
                        int32_t prio)
{
    size_t mlen = strlen(e->module);
    size_t stem = cw__st_strip_ext(e->module, mlen);
    ru->tag = t;
    ru->depth = set->tags[t].depth;
    ru->prio = prio;
    ru->seq = e->seq;
    ru->src = e;
    if (cw__st_pat_compile(&ru->mod, e->module, mlen, true)) return CW_ENOMEM;
    if (stem < mlen && cw__st_pat_compile(&ru->mod_stem, e->module, stem, true)) return CW_ENOMEM;
    const char *m = e->method ? e->method : "*";
    if (cw__st_pat_compile(&ru->meth, m, strlen(m), false)) return CW_ENOMEM;
    return 0;
}

/* Builds *c from set. On failure *c is freed and zeroed. */
static int compile(const st_set_t *set, st_compiled_t *c)
{
    uint32_t n = 0;
    memset(c, 0, sizeof *c);
    for (uint32_t i = 0; i < set->ntags; i++)
        n += set->tags[i].nentries;
    c->eprio = malloc(((size_t)set->ntags + 1) * sizeof *c->eprio);
    c->preorder = malloc(((size_t)set->ntags + 1) * sizeof *c->preorder);
    c->rules = calloc((size_t)n + 1, sizeof *c->rules);
    c->lit = malloc(((size_t)n + 1) * sizeof *c->lit);
    c->wild = malloc(((size_t)n + 1) * sizeof *c->wild);
    if (!c->eprio || !c->preorder || !c->rules || !c->lit || !c->wild) goto fail;
    if (build_preorder(set, c->preorder)) goto fail;

    /* Parents precede children in creation order, so one pass resolves
     * inherited priorities. */
    for (uint32_t i = 0; i < set->ntags; i++) {
        const st_tag_t *t = &set->tags[i];
        c->eprio[i] = t->priority_set        ? t->priority
                      : t->parent == ST_NONE ? 0
                                             : c->eprio[t->parent];
    }
    for (uint32_t i = 0; i < set->ntags; i++)
        for (uint32_t j = 0; j < set->tags[i].nentries; j++) {
            c->nrules++; /* counted first so compiled_free sees a partial rule */
            if (compile_rule(&c->rules[c->nrules - 1], set, i, &set->tags[i].entries[j],
                             c->eprio[i]))
                goto fail;
        }
    qsort(c->rules, c->nrules, sizeof *c->rules, rule_seq_cmp);
    for (uint32_t k = 0; k < c->nrules; k++) {
        const st_rule_t *ru = &c->rules[k];
        if (ru->mod.kind == ST_PAT_EXACT) {
            c->lit[c->nlit].key = ru->mod.text;
            c->lit[c->nlit].keylen = (uint32_t)cw__st_strip_ext(ru->mod.text, ru->mod.len);
            c->lit[c->nlit++].rule = k;
        } else {
            c->wild[c->nwild++] = k;
        }
    }
    qsort(c->lit, c->nlit, sizeof *c->lit, lit_cmp);
    compute_hash(set, c);
    return 0;
fail:
    compiled_free(c);
    return CW_ENOMEM;
}

/* ---- the public object ------------------------------------------------ */

static void log_warn(void *ctx, const char *msg)
{
    (void)ctx;
    CW_LOGW("%s", msg);
}

/* An empty rule set, compiled (alike to other create functions in form
 * only). */
int cw_stacktags_create(cw_stacktags_t **out)
{
    cw_stacktags_t *r = calloc(1, sizeof *r);
    if (!r) return CW_ENOMEM;
    r->warn = log_warn;
    if (compile(&r->set, &r->c)) {
        free(r);
        return CW_ENOMEM;
    }
    *out = r;
    return 0;
}

void cw_stacktags_destroy(cw_stacktags_t *r)
{
    if (!r) return;
    compiled_free(&r->c);
    cw__st_set_free(&r->set);
    cw_free_strv(r->files, r->nfiles);
    free(r->fcache);
    free(r);
}

void cw_stacktags_set_warn(cw_stacktags_t *r, cw_stacktags_warn_fn fn, void *ctx)
{
    r->warn = fn ? fn : log_warn;
    r->warn_ctx = fn ? ctx : NULL;
}

int cw_stacktags_load_buffer(cw_stacktags_t *r, const char *name, const char *buf, size_t len,
                             cw_diag_t *d)
{
    st_set_t stage = {0}, merged = {0};
    st_compiled_t c;
    uint64_t nentries = 0;
    int rc;

    if (CW_RESERVE(r->files, r->fcap, r->nfiles + 1u))
        return cw_diag_set(d, CW_ENOMEM, "%s: out of memory", name);
    if (!(r->files[r->nfiles] = cw_strdup(name)))
        return cw_diag_set(d, CW_ENOMEM, "%s: out of memory", name);

    rc = cw__st_parse(r, &stage, name, r->nfiles, buf, len, d);
    if (rc) goto fail;
    for (uint32_t i = 0; i < stage.ntags; i++)
        nentries += stage.tags[i].nentries;
    rc = cw__st_set_clone(&merged, &r->set);
    if (!rc) rc = cw__st_set_merge(&merged, &stage, r->next_seq);
    if (!rc) rc = compile(&merged, &c);
    if (rc) {
        cw_diag_set(d, rc, "%s: %s while merging its rules", name, cw_strerror(rc));
        goto fail;
    }
    /* Commit: nothing below can fail. */
    cw__st_set_free(&stage);
    cw__st_set_free(&r->set);
    compiled_free(&r->c);
    r->set = merged;
    r->c = c;
    r->nfiles++;
    r->next_seq += nentries;
    r->cache_uid = 0; /* rules changed: every cached frame is stale */
    return 0;
fail:
    cw__st_set_free(&stage);
    cw__st_set_free(&merged);
    free(r->files[r->nfiles]);
    return rc;
}

int cw_stacktags_load_file(cw_stacktags_t *r, const char *path, cw_diag_t *d)
{
    FILE *f = fopen(path, "rb");
    char *buf = NULL;
    size_t len = 0, cap = 0;
    int rc;

    if (!f) return cw_diag_set(d, CW_EIO, "%s: cannot open stack-tag file (check the path)", path);
    for (;;) {
        if (CW_RESERVE(buf, cap, len + 65536)) { /* always 64 KiB to read into */
            rc = cw_diag_set(d, CW_ENOMEM, "%s: out of memory reading it", path);
            goto out;
        }
        size_t got = fread(buf + len, 1, cap - len, f);
        len += got;
        if (got == 0) break;
    }
    if (ferror(f)) {
        rc = cw_diag_set(d, CW_EIO, "%s: read error", path);
        goto out;
    }
    rc = cw_stacktags_load_buffer(r, path, buf, len, d);
out:
    free(buf);
    fclose(f);
    return rc;
}

const char *cw_stacktags_hash(const cw_stacktags_t *r)
{
    return r->c.hash;
}

size_t cw_stacktags_tag_count(const cw_stacktags_t *r)
{
    return r->set.ntags;
}

size_t cw_stacktags_rule_count(const cw_stacktags_t *r)
{
    return r->c.nrules;
}

int cw_stacktags_tag_at(const cw_stacktags_t *r, size_t i, cw_stacktags_tag_t *out)
{
    if (i >= r->set.ntags) return CW_ERANGE;
    uint32_t t = r->c.preorder[i];
    const st_tag_t *tg = &r->set.tags[t];
    out->path = tg->path;
    out->name = tg->path + tg->name_off;
    out->depth = tg->depth;
    out->priority = r->c.eprio[t];
    out->inherited = !tg->priority_set && tg->parent != ST_NONE;
    out->nrules = tg->nentries;
    return 0;
}

int cw_stacktags_tag_rule(const cw_stacktags_t *r, size_t i, size_t j, cw_stacktags_rule_t *out)
{
    if (i >= r->set.ntags) return CW_ERANGE;
    uint32_t t = r->c.preorder[i];
    if (j >= r->set.tags[t].nentries) return CW_ERANGE;
    cw__st_rule_view(r, t, &r->set.tags[t].entries[j], out);
    return 0;
}

/* ---- default files ---------------------------------------------------- */

int cw_stacktags_default_path(const char *platform, char *buf, size_t cap, cw_diag_t *d)
{
    if (!platform || (strcmp(platform, "windows") != 0 && strcmp(platform, "linux") != 0))
        return cw_diag_set(d, CW_EINVAL,
                           "no default stack tags for platform '%s' (known: windows, linux)",
                           platform ? platform : "(none)");
    const char *env = getenv("CW_STACKTAGS_DIR");
    const char *dirs[4];
    size_t ndirs = 0;
    if (env && *env) dirs[ndirs++] = env;
    ndirs += cw_plat_data_dirs("stacktags", dirs + ndirs, CW_ARRAY_LEN(dirs) - ndirs);
    char tried[768] = "";
    size_t tl = 0;
    for (size_t i = 0; i < ndirs; i++) {
        int n = snprintf(buf, cap, "%s/%s.stacktags", dirs[i], platform);
        if (n < 0 || (size_t)n >= cap) continue;
        if (cw_plat_is_file(buf)) return 0;
        int w = snprintf(tried + tl, sizeof tried - tl, "%s%s", tl ? ", " : "", buf);
        if (w > 0 && (size_t)w < sizeof tried - tl) tl += (size_t)w;
    }
    if (cap) buf[0] = '\0';
    return cw_diag_set(d, CW_ENOENT,
                       "default stack tags for %s not found (tried %s); set CW_STACKTAGS_DIR "
                       "or pass rule files",
                       platform, tl ? tried : "nothing");
}

int cw_stacktags_load_files(cw_stacktags_t *r, const char *platform, const char *const *files,
                            size_t nfiles, cw_diag_t *d)
{
    char path[1024];
    int rc = 0;
    if (nfiles == 0) {
        rc = cw_stacktags_default_path(platform, path, sizeof path, d);
        if (!rc) rc = cw_stacktags_load_file(r, path, d);
    }
    for (size_t i = 0; i < nfiles && !rc; i++)
        rc = cw_stacktags_load_file(r, files[i], d);
    return rc;
}

int cw_stacktags_open(const char *platform, const char *const *files, size_t nfiles,
                      cw_stacktags_t **out, cw_diag_t *d)
{
    cw_stacktags_t *r;
    int rc = cw_stacktags_create(&r);
    if (rc) return cw_diag_set(d, rc, "stack tags: out of memory");
    if ((rc = cw_stacktags_load_files(r, platform, files, nfiles, d))) {
        cw_stacktags_destroy(r);
        return rc;
    }
    *out = r;
    return 0;
}

const char *cw_stacktags_platform(const char *data_platform)
{
    if (data_platform &&
        (strcmp(data_platform, "windows") == 0 || strcmp(data_platform, "linux") == 0))
        return data_platform;
    return cw_plat_name();
}

int cw_stacktags_tagger_for(const char *platform, const char *const *files, size_t nfiles,
                            cw_tagger_t **out, cw_diag_t *d)
{
    cw_stacktags_t *r;
    int rc = cw_stacktags_open(platform, files, nfiles, &r, d);
    if (rc) return rc;
    rc = cw_stacktags_tagger(r, out);
    if (rc) return cw_diag_set(d, rc, "stack tags: out of memory");
    return 0;
}

/* ---- the tagger engine ------------------------------------------------ */

static const char *engine_tag(void *impl, const cw_stacks_t *s, uint32_t stack_id)
{
    return cw_stacktags_tag_stack(impl, s, stack_id);
}

static const char *engine_hash(void *impl)
{
    return cw_stacktags_hash(impl);
}

static void engine_destroy(void *impl)
{
    cw_stacktags_destroy(impl);
}

static const cw_tagger_ops_t engine_ops = {"stacktags", engine_tag, engine_hash, engine_destroy};

int cw_stacktags_tagger(cw_stacktags_t *r, cw_tagger_t **out)
{
    return cw_tagger_create(&engine_ops, r, out);
}
