/* stacktags.h - WPA stack-tag rules (.stacktags XML): loading, matching,
 * explaining, and the cw_tagger engine built on them.
 *
 * The format is WPA's, so files written for WPA load unchanged:
 *
 *   <Tag Name="">                                 (root: an empty name only groups)
 *     <Tag Name="Windows Heap" Priority="10">
 *       <Entrypoint Module="ntdll.dll" Method="RtlpAllocateHeap*"/>
 *       <Tag Name="LFH"> ... </Tag>               (path "Windows Heap\LFH")
 *     </Tag>
 *   </Tag>
 *
 * Rules, decided here and in docs/STACKTAGS.md:
 * - A tag's name is its path from the top, joined with '\'. A Name may
 *   itself contain '\' (Name="A\B" at the top is the child B of A).
 * - Priority is a signed 32-bit integer; a tag without one inherits its
 *   parent's (top level: 0).
 * - `*` matches any run of characters (also none), anywhere in a pattern;
 *   every other character is literal. Method omitted (or empty) matches
 *   any function: a module-only rule.
 * - A frame is "module!function" (split at the first '!'; no '!' = module
 *   only). The module is compared case-insensitively (ASCII) by its base
 *   name (text after the last '/' or '\'); the function case-sensitively,
 *   because symbols are (a trailing "+0x1f" offset is ignored). Windows
 *   image extensions are optional: a pattern without .dll/.exe/.sys
 *   matches a module with one (ntdll matches ntdll.dll), and a pattern with
 *   one matches a module that has no extension (ntdll.dll matches ntdll).
 * - A frame maps to the deepest tag with a matching entrypoint; ties go to
 *   the higher priority, then to the rule loaded first.
 * - A stack's tag is the highest-priority tag among its frames; ties go to
 *   the frame nearest the allocating call (the last frame, frames being
 *   outermost first). No match: "Other".
 * - Loading several files: later files add tags; a tag path a later file
 *   defines again takes that file's Priority (if it gives one) and that
 *   file's entrypoints (if it gives any) instead of the earlier ones. Within
 *   one file, repeated tags merge.
 * - Unknown elements and attributes are warned about once per name per
 *   file, with file:line, and otherwise ignored (the children of an unknown
 *   element are read as if they stood in its place). Malformed XML is an
 *   error "file:line:column: message" (line and column 1-based).
 *
 * Thread: a rule set and its tagger belong to one thread (the core thread);
 * matching caches results per frame id in the rule set. */
#ifndef COMMITWATCH_STACKTAGS_H
#define COMMITWATCH_STACKTAGS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "commitwatch/error.h"
#include "commitwatch/stacks.h"
#include "commitwatch/tagger.h"

typedef struct cw_stacktags cw_stacktags_t;

/* Receives one warning sentence ("file:line: ..."); msg is borrowed. */
typedef void (*cw_stacktags_warn_fn)(void *ctx, const char *msg);

/* An empty rule set (every stack is Other). 0 or CW_ENOMEM. Warnings go to
 * the service log until cw_stacktags_set_warn() says otherwise. */
int cw_stacktags_create(cw_stacktags_t **out);
void cw_stacktags_destroy(cw_stacktags_t *r); /* accepts NULL */
/* fn NULL restores the service log. */
void cw_stacktags_set_warn(cw_stacktags_t *r, cw_stacktags_warn_fn fn, void *ctx);

/* Loads one file on top of what r holds. On any error r is unchanged and d
 * says where and why: CW_EIO (cannot read), CW_EPARSE (malformed XML or a
 * bad rule, "file:line:col: ..."), CW_ENOMEM. */
int cw_stacktags_load_file(cw_stacktags_t *r, const char *path, cw_diag_t *d);
/* Same from memory; name is used in messages. buf need not be NUL-ended. */
int cw_stacktags_load_buffer(cw_stacktags_t *r, const char *name, const char *buf, size_t len,
                             cw_diag_t *d);

/* The default rule file of a platform ("windows" or "linux"): the first
 * of $CW_STACKTAGS_DIR/<platform>.stacktags, the source tree's
 * service/stacks/rules/, and the installed share/commitwatch/stacktags/
 * (cw_plat_data_dirs("stacktags")) that exists.
 * Writes the path to buf. 0, CW_EINVAL (unknown platform) or CW_ENOENT
 * (d lists the places tried). */
int cw_stacktags_default_path(const char *platform, char *buf, size_t cap, cw_diag_t *d);

/* Loads files in order, or the platform's default file when nfiles == 0
 * (platform is then required), stopping at the first error (d says which
 * file and why; r keeps the files loaded before it). */
int cw_stacktags_load_files(cw_stacktags_t *r, const char *platform, const char *const *files,
                            size_t nfiles, cw_diag_t *d);
/* cw_stacktags_create() + cw_stacktags_load_files(); warnings go to the
 * log. *out is set only on success. */
int cw_stacktags_open(const char *platform, const char *const *files, size_t nfiles,
                      cw_stacktags_t **out, cw_diag_t *d);

/* Hex text identifying the loaded rules' content (tag paths, effective
 * priorities, patterns and their order; not file names, comments or
 * layout). Borrowed, valid until the next load. */
const char *cw_stacktags_hash(const cw_stacktags_t *r);

/* One entrypoint rule, as loaded. Strings borrowed until the next load. */
typedef struct cw_stacktags_rule {
    const char *tag;    /* tag path, "Parent\Child" */
    int32_t priority;   /* effective (inherited when the tag gives none) */
    const char *module; /* pattern as written */
    const char *method; /* pattern as written; NULL = module only */
    const char *file;   /* where it was defined */
    unsigned line;
} cw_stacktags_rule_t;

/* One tag of the tree, in pre-order (a parent before its children, siblings
 * in definition order). */
typedef struct cw_stacktags_tag {
    const char *path;
    const char *name; /* last component of path */
    unsigned depth;   /* 1 = top level */
    int32_t priority; /* effective */
    bool inherited;   /* priority came from the parent */
    size_t nrules;    /* its own entrypoints */
} cw_stacktags_tag_t;

size_t cw_stacktags_tag_count(const cw_stacktags_t *r);
/* Fills *out for tag i < tag_count (pre-order). 0 or CW_ERANGE. */
int cw_stacktags_tag_at(const cw_stacktags_t *r, size_t i, cw_stacktags_tag_t *out);
/* Entrypoint j < nrules of tag i. 0 or CW_ERANGE. */
int cw_stacktags_tag_rule(const cw_stacktags_t *r, size_t i, size_t j, cw_stacktags_rule_t *out);
size_t cw_stacktags_rule_count(const cw_stacktags_t *r);

/* The rule deciding one frame "module!function": true and *rule filled
 * (rule may be NULL), or false when no rule matches it. Not cached. */
bool cw_stacktags_match_frame(const cw_stacktags_t *r, const char *frame,
                              cw_stacktags_rule_t *rule);

/* Why a stack gets its tag. */
typedef struct cw_stacktags_explain {
    const char *tag;          /* "Other" when no frame matched */
    long frame;               /* index of the deciding frame (0 = outermost), -1 for Other */
    bool matched;             /* false for Other: rule is then zeroed */
    cw_stacktags_rule_t rule; /* the deciding entrypoint */
} cw_stacktags_explain_t;

/* frames outermost first, n may be 0. Not cached; borrowed strings. */
void cw_stacktags_explain(const cw_stacktags_t *r, const char *const *frames, size_t n,
                          cw_stacktags_explain_t *out);

/* The tag of an interned stack (the engine behind the tagger): each frame
 * id's match is computed once and cached in r, for the cw_stacks_t last
 * used (another table, by cw_stacks_uid(), clears the cache). Never NULL. */
const char *cw_stacktags_tag_stack(cw_stacktags_t *r, const cw_stacks_t *s, uint32_t stack_id);

/* A tagger whose engine is r ("stacktags"); ownership of r passes to it,
 * also on failure (r destroyed). 0 or CW_ENOMEM. */
int cw_stacktags_tagger(cw_stacktags_t *r, cw_tagger_t **out);

/* One call for run/analyze: cw_stacktags_open() then cw_stacktags_tagger().
 * platform is the platform of the data ("windows" or "linux"), used for
 * the defaults when nfiles == 0. 0 or the error of the failing step, with
 * d filled. */
int cw_stacktags_tagger_for(const char *platform, const char *const *files, size_t nfiles,
                            cw_tagger_t **out, cw_diag_t *d);

/* The platform whose default rules tag data of data_platform: itself when
 * it is "windows" or "linux", else (data of no known platform) the
 * machine's own (cw_plat_name()). Static string. */
const char *cw_stacktags_platform(const char *data_platform);

#endif
