/* stacktags_load.c - reads one WPA .stacktags XML document (expat) into a
 * fresh st_set: <Tag Name Priority> elements, nested, holding
 * <Entrypoint Module Method/> patterns. Merging it into a rule set is
 * stacktags.c's job.
 *
 * Every open element pushes the tag its children belong to (a named Tag
 * its own index, everything else what it inherited), so nesting, the
 * empty-named WPA root and unknown wrapper elements all fall out of one
 * stack. Rule errors stop the parser with file:line:column, like XML
 * errors do. */
#include <errno.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <expat.h>

#include "commitwatch/common.h"
#include "stacks/stacktags_int.h"

typedef struct parse {
    XML_Parser p;
    cw_stacktags_t *r;
    st_set_t *set;
    const char *name;
    uint32_t file;
    uint32_t *stack; /* per open element: the tag its children belong to */
    size_t depth, cap;
    uint64_t seq;  /* entrypoints in document order */
    char **warned; /* keys of warnings already given for this file */
    size_t nwarned, wcap;
    int rc;
    cw_diag_t *d;
} parse_t;

/* Stops the parser with a rule error at the current position. */
static void fail(parse_t *ps, int rc, const char *fmt, ...) CW_PRINTF(3, 4);

static void fail(parse_t *ps, int rc, const char *fmt, ...)
{
    char msg[768];
    va_list ap;
    if (ps->rc) return;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    ps->rc = cw_diag_set(ps->d, rc, "%s:%lu:%lu: %s", ps->name,
                         (unsigned long)XML_GetCurrentLineNumber(ps->p),
                         (unsigned long)XML_GetCurrentColumnNumber(ps->p) + 1, msg);
    XML_StopParser(ps->p, XML_FALSE);
}

/* Warns once per key per file; text is the sentence after "file:line: ". */
static void warn_once(parse_t *ps, const char *key, const char *text)
{
    for (size_t i = 0; i < ps->nwarned; i++)
        if (strcmp(ps->warned[i], key) == 0) return;
    /* A lost warning is not worth failing the load. */
    if (CW_RESERVE(ps->warned, ps->wcap, ps->nwarned + 1)) return;
    char *k = cw_strdup(key);
    if (!k) return;
    ps->warned[ps->nwarned++] = k;
    char msg[768];
    snprintf(msg, sizeof msg, "%s:%lu: %s", ps->name,
             (unsigned long)XML_GetCurrentLineNumber(ps->p), text);
    ps->r->warn(ps->r->warn_ctx, msg);
}

static void warn_attr(parse_t *ps, const char *el, const char *attr)
{
    char key[256], text[512];
    snprintf(key, sizeof key, "A\n%s\n%s", el, attr);
    snprintf(text, sizeof text, "unknown attribute %s on <%s> ignored", attr, el);
    warn_once(ps, key, text);
}

/* Reads the element el's two attributes name1 and name2 into *v1 and *v2
 * (NULL when absent) and warns once about any other. */
static void read_attrs(parse_t *ps, const char *el, const XML_Char **atts, const char *name1,
                       const char **v1, const char *name2, const char **v2)
{
    *v1 = *v2 = NULL;
    for (size_t i = 0; atts[i]; i += 2) {
        if (strcmp(atts[i], name1) == 0)
            *v1 = atts[i + 1];
        else if (strcmp(atts[i], name2) == 0)
            *v2 = atts[i + 1];
        else
            warn_attr(ps, el, atts[i]);
    }
}

/* Whole-string signed 32-bit integer, spaces around allowed. */
static int parse_priority(const char *s, int32_t *out)
{
    char *end;
    errno = 0;
    long long v = strtoll(s, &end, 10);
    if (end == s || errno) return -1;
    while (*end == ' ' || *end == '\t')
        end++;
    if (*end || v < INT32_MIN || v > INT32_MAX) return -1;
    *out = (int32_t)v;
    return 0;
}

/* <Tag Name="..." Priority="...">: returns the tag children belong to. */
static uint32_t on_tag(parse_t *ps, uint32_t ctx, const XML_Char **atts)
{
    const char *name, *prio;
    read_attrs(ps, "Tag", atts, "Name", &name, "Priority", &prio);
    if (!name) {
        fail(ps, CW_EPARSE, "<Tag> without a Name attribute");
        return ctx;
    }
    if (!*name) return ctx; /* the WPA root, or any unnamed group */

    const char *parent = ctx == ST_NONE ? NULL : ps->set->tags[ctx].path;
    size_t pl = parent ? strlen(parent) + 1 : 0, nl = strlen(name);
    char *path = malloc(pl + nl + 1);
    if (!path) {
        fail(ps, CW_ENOMEM, "out of memory");
        return ctx;
    }
    if (parent) {
        memcpy(path, parent, pl - 1);
        path[pl - 1] = '\\';
    }
    memcpy(path + pl, name, nl + 1);

    uint32_t idx = ctx;
    int32_t p = 0;
    unsigned depth = 1;
    for (const char *c = path; *c; c++)
        depth += *c == '\\';
    if (prio && parse_priority(prio, &p) != 0)
        fail(ps, CW_EPARSE, "Priority \"%s\" of tag \"%s\" is not a whole number", prio, path);
    else if (depth > ST_MAX_DEPTH)
        fail(ps, CW_EPARSE, "tag \"%s\" is nested %u deep; at most %d levels are allowed", name,
             depth, ST_MAX_DEPTH);
    else {
        int rc = cw__st_set_tag(ps->set, path, strlen(path), &idx);
        if (rc == CW_ENOMEM)
            fail(ps, rc, "out of memory");
        else if (rc)
            fail(ps, CW_EPARSE, "tag name \"%s\" has an empty part between backslashes", name);
        else if (prio) {
            ps->set->tags[idx].priority = p;
            ps->set->tags[idx].priority_set = true;
        }
    }
    free(path);
    return idx;
}

/* <Entrypoint Module="..." Method="..."/>. */
static void on_entry(parse_t *ps, uint32_t ctx, const XML_Char **atts)
{
    const char *mod, *meth;
    read_attrs(ps, "Entrypoint", atts, "Module", &mod, "Method", &meth);
    if (ctx == ST_NONE) {
        fail(ps, CW_EPARSE, "<Entrypoint> outside a named <Tag>");
        return;
    }
    if (!mod || !*mod) {
        fail(ps, CW_EPARSE, "<Entrypoint> without a Module (use Module=\"*\" for any module)");
        return;
    }
    if (meth && !*meth) meth = NULL; /* Method="" is module-only, like no Method */
    int rc = cw__st_add_entry(ps->set, ctx, mod, meth, ps->file,
                              (uint32_t)XML_GetCurrentLineNumber(ps->p));
    if (rc) {
        fail(ps, rc, "out of memory");
        return;
    }
    st_tag_t *t = &ps->set->tags[ctx];
    t->entries[t->nentries - 1].seq = ps->seq++;
}

static void XMLCALL on_start(void *ud, const XML_Char *el, const XML_Char **atts)
{
    parse_t *ps = ud;
    if (ps->rc) return;
    uint32_t ctx = ps->depth ? ps->stack[ps->depth - 1] : ST_NONE, push = ctx;
    if (strcmp(el, "Tag") == 0) {
        push = on_tag(ps, ctx, atts);
    } else if (strcmp(el, "Entrypoint") == 0) {
        on_entry(ps, ctx, atts);
    } else {
        char key[256], text[512];
        snprintf(key, sizeof key, "E\n%s", el);
        snprintf(text, sizeof text,
                 "unknown element <%s> ignored (a .stacktags file holds <Tag> and <Entrypoint>)",
                 el);
        warn_once(ps, key, text);
    }
    if (ps->rc) return;
    if (CW_RESERVE(ps->stack, ps->cap, ps->depth + 1)) {
        fail(ps, CW_ENOMEM, "out of memory");
        return;
    }
    ps->stack[ps->depth++] = push;
}

static void XMLCALL on_end(void *ud, const XML_Char *el)
{
    parse_t *ps = ud;
    (void)el;
    if (ps->depth) ps->depth--;
}

int cw__st_parse(cw_stacktags_t *r, st_set_t *set, const char *name, uint32_t file, const char *buf,
                 size_t len, cw_diag_t *d)
{
    parse_t ps = {0};
    ps.r = r;
    ps.set = set;
    ps.name = name;
    ps.file = file;
    ps.d = d;
    ps.p = XML_ParserCreate("UTF-8");
    if (!ps.p) return cw_diag_set(d, CW_ENOMEM, "%s: out of memory", name);
    XML_SetUserData(ps.p, &ps);
    XML_SetElementHandler(ps.p, on_start, on_end);

    /* XML_Parse takes an int length: feed big buffers in pieces. */
    const size_t chunk = 1u << 20;
    size_t off = 0;
    do {
        size_t n = len - off < chunk ? len - off : chunk;
        int last = off + n == len;
        if (XML_Parse(ps.p, buf + off, (int)n, last) == XML_STATUS_ERROR) {
            if (!ps.rc) /* an XML error, not one of ours */
                ps.rc = cw_diag_set(d, CW_EPARSE, "%s:%lu:%lu: malformed XML: %s", name,
                                    (unsigned long)XML_GetCurrentLineNumber(ps.p),
                                    (unsigned long)XML_GetCurrentColumnNumber(ps.p) + 1,
                                    XML_ErrorString(XML_GetErrorCode(ps.p)));
            break;
        }
        off += n;
    } while (off < len);

    XML_ParserFree(ps.p);
    free(ps.stack);
    cw_free_strv(ps.warned, ps.nwarned);
    return ps.rc;
}
