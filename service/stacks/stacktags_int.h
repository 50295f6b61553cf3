/* stacktags_int.h - what the stack-tag files share: the rule set as loaded
 * (st_set: tags with their entrypoints), the compiled form used to match
 * frames (st_rule, indexes), and the functions that cross files.
 *
 * stacktags.c        the top: loading files, compiling, hash, tree access,
 *                    default files, the tagger engine.
 * stacktags_load.c   reads one .stacktags XML file into a fresh st_set.
 * stacktags_match.c  patterns, frame and stack matching, explain, the
 *                    public view of a rule.
 * stacktags_set.c    the tag tree: tags, entries, copy, merge, free.
 * Calls run one way: stacktags.c -> load, match -> set. */
#ifndef CW_CORE_STACKTAGS_INT_H
#define CW_CORE_STACKTAGS_INT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "commitwatch/stacktags.h"

#define ST_NONE UINT32_MAX
/* Deeper tag paths are refused: a sane file has a handful of levels. */
#define ST_MAX_DEPTH 64

typedef struct st_entry {
    char *module;  /* pattern as written */
    char *method;  /* as written; NULL = module only */
    uint32_t file; /* index into the owning rule set's file names */
    uint32_t line;
    uint64_t seq; /* load order across files: earlier wins frame ties */
} st_entry_t;

typedef struct st_tag {
    char *path;        /* "Parent\Child" */
    uint32_t name_off; /* the last component starts at path + name_off */
    uint32_t parent;   /* ST_NONE at top level */
    uint32_t depth;    /* 1 = top level */
    int32_t priority;  /* meaningful when priority_set */
    bool priority_set;
    st_entry_t *entries; /* its own entrypoints */
    uint32_t nentries;
    size_t cap;
} st_tag_t;

/* Tags in creation order; a parent is always created before its children. */
typedef struct st_set {
    st_tag_t *tags;
    uint32_t ntags;
    size_t cap;
} st_set_t;

/* A compiled pattern: the text (lowercased for modules) and its shape,
 * so the common shapes skip the general matcher. */
typedef enum { ST_PAT_ANY, ST_PAT_EXACT, ST_PAT_PREFIX, ST_PAT_SUFFIX, ST_PAT_GLOB } st_pat_kind_t;

typedef struct st_pat {
    char *text; /* owned */
    uint32_t len;
    uint8_t kind;
} st_pat_t;

/* One entrypoint, compiled. */
typedef struct st_rule {
    st_pat_t mod;      /* lowercased module pattern */
    st_pat_t mod_stem; /* mod without its .dll/.exe/.sys; text NULL when it has none */
    st_pat_t meth;     /* kind ST_PAT_ANY for module-only rules */
    uint32_t tag;      /* index into the set's tags */
    uint32_t depth;
    int32_t prio; /* effective priority of the tag */
    uint64_t seq;
    const st_entry_t *src;
} st_rule_t;

/* Literal module patterns are found by binary search on their key (the
 * lowercased module without a Windows extension). */
typedef struct st_lit {
    const char *key;
    uint32_t keylen;
    uint32_t rule;
} st_lit_t;

/* The compiled form of a set, rebuilt after every load. */
typedef struct st_compiled {
    st_rule_t *rules; /* sorted by seq, so a lower index was loaded first */
    uint32_t nrules;
    st_lit_t *lit; /* sorted by key, then rule */
    uint32_t nlit;
    uint32_t *wild; /* rules whose module pattern has a '*' */
    uint32_t nwild;
    int32_t *eprio;     /* effective priority per tag */
    uint32_t *preorder; /* tag indexes in tree order */
    char hash[48];
} st_compiled_t;

struct cw_stacktags {
    st_set_t set;
    st_compiled_t c;
    char **files; /* names of the loaded files, for messages */
    uint32_t nfiles;
    size_t fcap;
    uint64_t next_seq;
    cw_stacktags_warn_fn warn;
    void *warn_ctx;

    /* per frame id of the table with uid cache_uid (0: none yet):
     * 0 unknown, 1 no rule, k+2 rule k */
    uint64_t cache_uid;
    uint32_t *fcache;
    size_t fcache_n;
};

/* stacktags_set.c */
void cw__st_set_free(st_set_t *set);
/* Index of the tag with this path, created (with its missing ancestors)
 * when absent. path[0..len) uses '\' between components, none empty. 0 or
 * CW_ENOMEM / CW_EINVAL (empty component, too deep). */
int cw__st_set_tag(st_set_t *set, const char *path, size_t len, uint32_t *out);
/* Appends an entrypoint to tag; module and method are copied. */
int cw__st_add_entry(st_set_t *set, uint32_t tag, const char *module, const char *method,
                     uint32_t file, uint32_t line);
/* Deep copy of src into *dst (empty on entry); 0 or CW_ENOMEM (*dst then
 * freed). */
int cw__st_set_clone(st_set_t *dst, const st_set_t *src);
/* Merges the tags of one file (stage) into set; entries are moved out of
 * stage. A tag stage defines again takes stage's priority if stage set one
 * and stage's entrypoints if stage has any. Entries get seq base + their
 * order in the file. */
int cw__st_set_merge(st_set_t *set, st_set_t *stage, uint64_t base);

/* stacktags_load.c: parses buf into *set (empty on entry). name is used in
 * messages, file is the index entries get. Warnings through r's sink. */
int cw__st_parse(cw_stacktags_t *r, st_set_t *set, const char *name, uint32_t file, const char *buf,
                 size_t len, cw_diag_t *d);

/* stacktags_match.c */
/* Lowercases and classifies a pattern; 0 or CW_ENOMEM. */
int cw__st_pat_compile(st_pat_t *p, const char *text, size_t len, bool lower);
void cw__st_pat_free(st_pat_t *p);
/* Length of name without a trailing .dll/.exe/.sys (any case), or len. */
size_t cw__st_strip_ext(const char *name, size_t len);
/* Best rule for a frame text: its index, or ST_NONE. */
uint32_t cw__st_match_text(const cw_stacktags_t *r, const char *text);
/* Public view of entry e of tag t. */
void cw__st_rule_view(const cw_stacktags_t *r, uint32_t t, const st_entry_t *e,
                      cw_stacktags_rule_t *out);

#endif
