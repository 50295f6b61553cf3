/* test_stacktags.c - the stack-tag rules: loading (.stacktags XML, several
 * files, warnings, errors), every matching rule, explain, the tagger
 * engine, and the default Windows and Linux files against realistic
 * stacks. */
#include <stdarg.h>

#include "commitwatch/stacktags.h"
#include "commitwatch/tagger.h"
#include "test.h"

/* ---- helpers ---------------------------------------------------------- */

typedef struct warnings {
    int n;
    char last[1024];
    char all[4096];
} warnings_t;

static void collect(void *ctx, const char *msg)
{
    warnings_t *w = ctx;
    w->n++;
    snprintf(w->last, sizeof w->last, "%s", msg);
    size_t l = strlen(w->all);
    snprintf(w->all + l, sizeof w->all - l, "%s\n", msg);
}

/* A rule set from XML text; fails the test on a load error. */
static cw_stacktags_t *rules_from(const char *xml, warnings_t *w)
{
    cw_stacktags_t *r;
    cw_diag_t d = {""};
    ASSERT_OK(cw_stacktags_create(&r));
    if (w) cw_stacktags_set_warn(r, collect, w);
    int rc = cw_stacktags_load_buffer(r, "t.stacktags", xml, strlen(xml), &d);
    if (rc) CW_FAIL("load failed: %s", d.msg);
    return r;
}

/* The tag of a stack given as frames, outermost first, ending with NULL. */
static const char *tag_of(cw_stacktags_t *r, ...)
{
    static cw_stacktags_explain_t ex;
    const char *frames[64];
    size_t n = 0;
    va_list ap;
    va_start(ap, r);
    for (const char *f; (f = va_arg(ap, const char *)) != NULL;)
        frames[n++] = f;
    va_end(ap);
    cw_stacktags_explain(r, frames, n, &ex);
    return ex.tag;
}

/* The same through the tagger's path (cw_stacktags_tag_stack, which tags
 * every stored stack with a loop of its own): the frames interned in a
 * fresh table. The tag path belongs to r. */
static const char *stack_tag_of(cw_stacktags_t *r, ...)
{
    const char *frames[64];
    uint32_t n = 0, id;
    va_list ap;
    va_start(ap, r);
    for (const char *f; (f = va_arg(ap, const char *)) != NULL;)
        frames[n++] = f;
    va_end(ap);
    cw_stacks_t *s;
    ASSERT_OK(cw_stacks_create(&s));
    ASSERT_OK(cw_stacks_intern_strings(s, frames, n, &id));
    const char *tag = cw_stacktags_tag_stack(r, s, id);
    cw_stacks_destroy(s);
    return tag;
}

/* The frame index that decided, for the same kind of call. */
static long frame_of(cw_stacktags_t *r, const char *const *frames, size_t n)
{
    cw_stacktags_explain_t ex;
    cw_stacktags_explain(r, frames, n, &ex);
    return ex.frame;
}

static const char *frame_tag(cw_stacktags_t *r, const char *frame)
{
    static cw_stacktags_rule_t ru;
    return cw_stacktags_match_frame(r, frame, &ru) ? ru.tag : "-";
}

/* setenv/unsetenv are POSIX; the Windows C runtime has _putenv_s. */
static void set_env(const char *name, const char *value)
{
#ifdef _WIN32
    _putenv_s(name, value ? value : "");
#else
    if (value) setenv(name, value, 1);
    else unsetenv(name);
#endif
}

static char *fixture(const char *name)
{
    static char path[1024];
    const char *dir = getenv("CW_FIXTURES");
    snprintf(path, sizeof path, "%s/stacktags/%s", dir ? dir : "tests/fixtures", name);
    return path;
}

/* ---- wildcards, modules, case ----------------------------------------- */

static void test_patterns(void)
{
    cw_stacktags_t *r =
        rules_from("<Tag Name=''>"
                   " <Tag Name='Start'><Entrypoint Module='m' Method='*Alloc'/></Tag>"
                   " <Tag Name='Middle'><Entrypoint Module='m' Method='Rtl*Heap'/></Tag>"
                   " <Tag Name='End'><Entrypoint Module='m' Method='Virtual*'/></Tag>"
                   " <Tag Name='Many'><Entrypoint Module='m' Method='a*b*c'/></Tag>"
                   " <Tag Name='ModWild'><Entrypoint Module='lib*.so*' Method='g'/></Tag>"
                   " <Tag Name='ModOnly'><Entrypoint Module='whole.dll'/></Tag>"
                   " <Tag Name='EmptyMethod'><Entrypoint Module='e' Method=''/></Tag>"
                   " <Tag Name='Exact'><Entrypoint Module='m' Method='exact'/></Tag>"
                   "</Tag>",
                   NULL);
    ASSERT_STR_EQ(frame_tag(r, "m!HeapAlloc"), "Start");
    ASSERT_STR_EQ(frame_tag(r, "m!Alloc"), "Start"); /* '*' matches nothing too */
    ASSERT_STR_EQ(frame_tag(r, "m!AllocX"), "-");
    ASSERT_STR_EQ(frame_tag(r, "m!RtlAllocateHeap"), "Middle");
    ASSERT_STR_EQ(frame_tag(r, "m!RtlHeap"), "Middle");
    ASSERT_STR_EQ(frame_tag(r, "m!RtlHeapX"), "-");
    ASSERT_STR_EQ(frame_tag(r, "m!VirtualProtect"), "End");
    ASSERT_STR_EQ(frame_tag(r, "m!xVirtual"), "-");
    ASSERT_STR_EQ(frame_tag(r, "m!abc"), "Many");
    ASSERT_STR_EQ(frame_tag(r, "m!a_b_b_c_c"), "Many"); /* needs backtracking */
    ASSERT_STR_EQ(frame_tag(r, "m!a_c_b"), "-");
    ASSERT_STR_EQ(frame_tag(r, "libfoo.so.1!g"), "ModWild");
    ASSERT_STR_EQ(frame_tag(r, "libfoo.so.1!h"), "-");
    ASSERT_STR_EQ(frame_tag(r, "whole.dll!anything"), "ModOnly");
    ASSERT_STR_EQ(frame_tag(r, "whole.dll!0x1234"), "ModOnly"); /* unsymbolized */
    ASSERT_STR_EQ(frame_tag(r, "whole.dll"), "ModOnly");        /* no '!' at all */
    ASSERT_STR_EQ(frame_tag(r, "e!f"), "EmptyMethod");          /* Method="" = module only */
    ASSERT_STR_EQ(frame_tag(r, "m!exact"), "Exact");
    ASSERT_STR_EQ(frame_tag(r, "m!exactly"), "-");
    ASSERT_STR_EQ(frame_tag(r, "m!exac"), "-");
    ASSERT_STR_EQ(frame_tag(r, "other!exact"), "-");

    /* Modules: case-insensitive, base name, optional Windows extension.
     * Methods: case-sensitive; a +0x offset is ignored. */
    ASSERT_STR_EQ(frame_tag(r, "M!exact"), "Exact");
    ASSERT_STR_EQ(frame_tag(r, "WHOLE.DLL!x"), "ModOnly");
    ASSERT_STR_EQ(frame_tag(r, "Whole!x"), "ModOnly");   /* pattern .dll, module bare */
    ASSERT_STR_EQ(frame_tag(r, "m.dll!exact"), "Exact"); /* pattern bare, module .dll */
    ASSERT_STR_EQ(frame_tag(r, "m.exe!exact"), "Exact");
    ASSERT_STR_EQ(frame_tag(r, "whole.exe!x"), "-"); /* a different extension */
    ASSERT_STR_EQ(frame_tag(r, "whole.so!x"), "-");
    ASSERT_STR_EQ(frame_tag(r, "C:\\Windows\\System32\\whole.dll!x"), "ModOnly");
    ASSERT_STR_EQ(frame_tag(r, "/usr/lib/libfoo.so.6!g"), "ModWild");
    ASSERT_STR_EQ(frame_tag(r, "m!EXACT"), "-");
    ASSERT_STR_EQ(frame_tag(r, "m!exact+0x1f"), "Exact");
    ASSERT_STR_EQ(frame_tag(r, "m!exact+1f"), "-");
    cw_stacktags_destroy(r);

    /* A wildcard module pattern with an extension matches a bare module. */
    r = rules_from("<Tag Name='Any DLL'><Entrypoint Module='nt*.dll' Method='f'/></Tag>", NULL);
    ASSERT_STR_EQ(frame_tag(r, "ntdll!f"), "Any DLL");
    ASSERT_STR_EQ(frame_tag(r, "NtDll.Dll!f"), "Any DLL");
    ASSERT_STR_EQ(frame_tag(r, "ntdll.so!f"), "-");
    cw_stacktags_destroy(r);
}

/* ---- tree, depth, priority, ties --------------------------------------- */

static void test_tree_and_priority(void)
{
    cw_stacktags_t *r = rules_from(
        "<?xml version='1.0'?>\n"
        "<Tag Name=''>\n"
        " <Tag Name='Parent' Priority='10'>\n"
        "  <Entrypoint Module='m'/>\n"
        "  <Tag Name='Child'>\n" /* inherits 10 */
        "   <Entrypoint Module='m' Method='f*'/>\n"
        "   <Tag Name='Low' Priority='-5'><Entrypoint Module='m' Method='fdeep'/></Tag>\n"
        "  </Tag>\n"
        " </Tag>\n"
        " <Tag Name='Flat\\Nested' Priority='3'><Entrypoint Module='n' Method='x'/></Tag>\n"
        " <Tag Name='High' Priority='100'><Entrypoint Module='h'/></Tag>\n"
        " <Tag Name='Neg' Priority='-7'><Entrypoint Module='neg'/></Tag>\n"
        " <Tag Name='Zero'><Entrypoint Module='z'/></Tag>\n"
        " <Tag Name='Twin' Priority='1'><Entrypoint Module='t' Method='*'/></Tag>\n"
        " <Tag Name='TwinHi' Priority='2'><Entrypoint Module='t' Method='hi'/></Tag>\n"
        " <Tag Name='Second' Priority='1'><Entrypoint Module='t' Method='*'/></Tag>\n"
        "</Tag>\n",
        NULL);

    /* The tree, in pre-order, with effective priorities. */
    ASSERT_EQ(cw_stacktags_tag_count(r), 11);
    cw_stacktags_tag_t t;
    const char *paths[] = {"Parent", "Parent\\Child", "Parent\\Child\\Low",
                           "Flat",   "Flat\\Nested",  "High",
                           "Neg",    "Zero",          "Twin",
                           "TwinHi", "Second"};
    for (size_t i = 0; i < 11; i++) {
        ASSERT_OK(cw_stacktags_tag_at(r, i, &t));
        ASSERT_STR_EQ(t.path, paths[i]);
    }
    ASSERT_OK(cw_stacktags_tag_at(r, 1, &t));
    ASSERT_STR_EQ(t.name, "Child");
    ASSERT_EQ(t.depth, 2);
    ASSERT_EQ(t.priority, 10);
    ASSERT_TRUE(t.inherited);
    ASSERT_OK(cw_stacktags_tag_at(r, 2, &t));
    ASSERT_EQ(t.priority, -5);
    ASSERT_TRUE(!t.inherited);
    ASSERT_OK(cw_stacktags_tag_at(r, 3, &t)); /* Flat: created by the path, no priority */
    ASSERT_EQ(t.priority, 0);
    ASSERT_EQ(t.nrules, 0);
    ASSERT_EQ(cw_stacktags_tag_at(r, 11, &t), CW_ERANGE);
    cw_stacktags_rule_t ru;
    ASSERT_OK(cw_stacktags_tag_rule(r, 1, 0, &ru));
    ASSERT_STR_EQ(ru.method, "f*");
    ASSERT_EQ(ru.line, 6);
    ASSERT_STR_EQ(ru.file, "t.stacktags");
    ASSERT_OK(cw_stacktags_tag_rule(r, 0, 0, &ru));
    ASSERT_TRUE(ru.method == NULL);
    ASSERT_EQ(cw_stacktags_tag_rule(r, 0, 1, &ru), CW_ERANGE);

    /* Nesting: a frame takes the deepest matching tag, whatever the
     * priorities (Low is -5, its ancestors 10). */
    ASSERT_STR_EQ(frame_tag(r, "m!g"), "Parent");
    ASSERT_STR_EQ(frame_tag(r, "m!f1"), "Parent\\Child");
    ASSERT_STR_EQ(frame_tag(r, "m!fdeep"), "Parent\\Child\\Low");
    ASSERT_STR_EQ(frame_tag(r, "n!x"), "Flat\\Nested");

    /* Equal depth on one frame: higher priority, then the rule loaded first. */
    ASSERT_STR_EQ(frame_tag(r, "t!hi"), "TwinHi");
    ASSERT_STR_EQ(frame_tag(r, "t!lo"), "Twin");

    /* Stack: the highest priority wins wherever it is... */
    ASSERT_STR_EQ(tag_of(r, "h!main", "m!g", "z!alloc", NULL), "High");
    ASSERT_STR_EQ(tag_of(r, "z!a", "m!g", "neg!alloc", NULL), "Parent");
    /* ...negative priorities lose to zero, but beat no match at all... */
    ASSERT_STR_EQ(tag_of(r, "z!a", "neg!alloc", NULL), "Zero");
    ASSERT_STR_EQ(tag_of(r, "app!a", "neg!alloc", "app!b", NULL), "Neg");
    /* ...depth decides the frame, priority the stack: Low (-5) is deeper
     * but loses the stack to Parent (10) on another frame. */
    ASSERT_STR_EQ(tag_of(r, "m!g", "m!fdeep", NULL), "Parent");
    ASSERT_STR_EQ(tag_of(r, "m!fdeep", NULL), "Parent\\Child\\Low");
    /* Ties go to the frame nearest the allocating call (the last). */
    {
        const char *f[] = {"m!f1", "x!y", "m!g", "q!r"};
        ASSERT_EQ(frame_of(r, f, 4), 2);
        ASSERT_STR_EQ(tag_of(r, "m!f1", "x!y", "m!g", "q!r", NULL), "Parent");
        ASSERT_STR_EQ(tag_of(r, "m!g", "x!y", "m!f1", NULL), "Parent\\Child");
        /* The tagger, which stored stacks go through, ties alike. */
        ASSERT_STR_EQ(stack_tag_of(r, "m!f1", "x!y", "m!g", "q!r", NULL), "Parent");
        ASSERT_STR_EQ(stack_tag_of(r, "m!g", "x!y", "m!f1", NULL), "Parent\\Child");
        ASSERT_STR_EQ(stack_tag_of(r, "h!main", "m!g", "z!alloc", NULL), "High");
    }
    /* Nothing matches: Other, no frame. */
    {
        cw_stacktags_explain_t ex;
        const char *f[] = {"app!main", "libc.so.6!mmap"};
        cw_stacktags_explain(r, f, 2, &ex);
        ASSERT_STR_EQ(ex.tag, "Other");
        ASSERT_EQ(ex.frame, -1);
        ASSERT_TRUE(!ex.matched);
        cw_stacktags_explain(r, NULL, 0, &ex);
        ASSERT_STR_EQ(ex.tag, "Other");
    }
    /* Explain names the rule. */
    {
        cw_stacktags_explain_t ex;
        const char *f[] = {"app!main", "m!f1", "z!q"};
        cw_stacktags_explain(r, f, 3, &ex);
        ASSERT_STR_EQ(ex.tag, "Parent\\Child");
        ASSERT_EQ(ex.frame, 1);
        ASSERT_TRUE(ex.matched);
        ASSERT_STR_EQ(ex.rule.tag, "Parent\\Child");
        ASSERT_EQ(ex.rule.priority, 10);
        ASSERT_STR_EQ(ex.rule.module, "m");
        ASSERT_STR_EQ(ex.rule.method, "f*");
        ASSERT_EQ(ex.rule.line, 6);
    }
    cw_stacktags_destroy(r);

    /* An empty rule set tags everything Other. */
    ASSERT_OK(cw_stacktags_create(&r));
    ASSERT_STR_EQ(tag_of(r, "ntdll!RtlAllocateHeap", NULL), "Other");
    ASSERT_EQ(cw_stacktags_tag_count(r), 0);
    cw_stacktags_destroy(r);
}

/* ---- several files ----------------------------------------------------- */

static void test_override(void)
{
    cw_stacktags_t *r;
    cw_diag_t d;
    ASSERT_OK(cw_stacktags_create(&r));
    const char *a = "<Tag Name=''>"
                    " <Tag Name='Heap' Priority='5'>"
                    "  <Entrypoint Module='ntdll' Method='RtlAllocateHeap'/>"
                    "  <Tag Name='Kid'><Entrypoint Module='k'/></Tag>"
                    " </Tag>"
                    " <Tag Name='Keep' Priority='1'><Entrypoint Module='keep'/></Tag>"
                    " <Tag Name='Heap'><Entrypoint Module='ntdll' Method='RtlpX'/></Tag>"
                    "</Tag>";
    ASSERT_OK(cw_stacktags_load_buffer(r, "a", a, strlen(a), &d));
    /* Within one file a repeated tag merges. */
    ASSERT_STR_EQ(frame_tag(r, "ntdll!RtlAllocateHeap"), "Heap");
    ASSERT_STR_EQ(frame_tag(r, "ntdll!RtlpX"), "Heap");
    char h1[64];
    snprintf(h1, sizeof h1, "%s", cw_stacktags_hash(r));

    /* A later file: Heap's entrypoints replaced, its priority kept (none
     * given); Keep's priority replaced, its entrypoints kept (none given);
     * a new tag added; the child Kid untouched. */
    const char *b = "<Tag Name=''>"
                    " <Tag Name='Heap'><Entrypoint Module='ucrtbase' Method='malloc'/></Tag>"
                    " <Tag Name='Keep' Priority='50'/>"
                    " <Tag Name='New' Priority='2'><Entrypoint Module='new'/></Tag>"
                    "</Tag>";
    ASSERT_OK(cw_stacktags_load_buffer(r, "b", b, strlen(b), &d));
    ASSERT_STR_EQ(frame_tag(r, "ntdll!RtlAllocateHeap"), "-");
    ASSERT_STR_EQ(frame_tag(r, "ntdll!RtlpX"), "-");
    ASSERT_STR_EQ(frame_tag(r, "ucrtbase!malloc"), "Heap");
    ASSERT_STR_EQ(frame_tag(r, "k!x"), "Heap\\Kid");
    ASSERT_STR_EQ(frame_tag(r, "keep!x"), "Keep");
    ASSERT_STR_EQ(frame_tag(r, "new!x"), "New");
    cw_stacktags_rule_t ru;
    ASSERT_TRUE(cw_stacktags_match_frame(r, "keep!x", &ru));
    ASSERT_EQ(ru.priority, 50);
    ASSERT_STR_EQ(ru.file, "a"); /* the entrypoint still comes from a */
    ASSERT_TRUE(cw_stacktags_match_frame(r, "ucrtbase!malloc", &ru));
    ASSERT_EQ(ru.priority, 5);
    ASSERT_STR_EQ(ru.file, "b");
    ASSERT_TRUE(strcmp(h1, cw_stacktags_hash(r)) != 0);
    cw_stacktags_destroy(r);

    /* The same with the real fixture files. */
    ASSERT_OK(cw_stacktags_create(&r));
    ASSERT_OK(cw_stacktags_load_file(r, fixture("wpa_sample.stacktags"), &d));
    ASSERT_STR_EQ(tag_of(r, "app!mainCRTStartup", "ntdll!RtlAllocateHeap", NULL), "Memory\\Heap");
    ASSERT_OK(cw_stacktags_load_file(r, fixture("override.stacktags"), &d));
    ASSERT_STR_EQ(tag_of(r, "app!mainCRTStartup", "ntdll!RtlAllocateHeap", NULL), "Startup");
    ASSERT_STR_EQ(tag_of(r, "app!f", "ntdll!RtlAllocateHeap", NULL), "Other");
    ASSERT_STR_EQ(tag_of(r, "app!f", "ucrtbase!malloc", "ntdll!RtlAllocateHeap", NULL),
                  "Memory\\Heap");
    ASSERT_STR_EQ(tag_of(r, "app!f", "bcryptprimitives.dll!x", NULL), "Crypto");
    cw_stacktags_destroy(r);
}

/* ---- the WPA-format fixture ------------------------------------------- */

static void test_wpa_file(void)
{
    cw_stacktags_t *r;
    cw_diag_t d;
    warnings_t w = {0};
    ASSERT_OK(cw_stacktags_create(&r));
    cw_stacktags_set_warn(r, collect, &w);
    ASSERT_OK(cw_stacktags_load_file(r, fixture("wpa_sample.stacktags"), &d));
    ASSERT_EQ(w.n, 0);
    ASSERT_EQ(cw_stacktags_tag_count(r), 6);
    ASSERT_EQ(cw_stacktags_rule_count(r), 8);
    cw_stacktags_tag_t t;
    ASSERT_OK(cw_stacktags_tag_at(r, 2, &t));
    ASSERT_STR_EQ(t.path, "Memory\\Heap\\Low Fragmentation");
    ASSERT_EQ(t.priority, 5);

    /* Windows heap growth: the heap outranks VirtualAlloc (-1), and the LFH
     * frame is deeper than the Heap frame. */
    ASSERT_STR_EQ(tag_of(r, "ntdll!RtlUserThreadStart", "app!wmainCRTStartup", "app!main",
                         "ntdll!RtlAllocateHeap", "ntdll!RtlpAllocateHeapInternal",
                         "ntdll!NtAllocateVirtualMemory", NULL),
                  "Memory\\Heap");
    ASSERT_STR_EQ(tag_of(r, "app!main", "ntdll!RtlAllocateHeap",
                         "ntdll!RtlpLowFragHeapAllocFromContext", "ntdll!NtAllocateVirtualMemory",
                         NULL),
                  "Memory\\Heap\\Low Fragmentation");
    ASSERT_STR_EQ(tag_of(r, "app!main", "KERNELBASE.DLL!VirtualAlloc",
                         "ntdll.dll!NtAllocateVirtualMemory", NULL),
                  "Memory\\VirtualAlloc");
    /* Startup (-10) only wins where nothing else matched. */
    ASSERT_STR_EQ(tag_of(r, "app!wmainCRTStartup", "app!init", NULL), "Startup");
    ASSERT_STR_EQ(tag_of(r, "app!main", "d3d11!CDevice::CreateTexture2DResource",
                         "ntdll!NtAllocateVirtualMemory", NULL),
                  "Graphics");
    ASSERT_STR_EQ(tag_of(r, "app!main", "gdi32full!CreateDIBSection", NULL), "Graphics");
    cw_stacktags_destroy(r);
}

/* ---- warnings and errors ----------------------------------------------- */

static void expect_error(const char *xml, int code, const char *msg_part)
{
    cw_stacktags_t *r;
    cw_diag_t d = {""};
    const char *good = "<Tag Name='G'><Entrypoint Module='g'/></Tag>";
    ASSERT_OK(cw_stacktags_create(&r));
    ASSERT_OK(cw_stacktags_load_buffer(r, "good", good, strlen(good), &d));
    char hash[64];
    snprintf(hash, sizeof hash, "%s", cw_stacktags_hash(r));
    ASSERT_EQ(cw_stacktags_load_buffer(r, "bad.stacktags", xml, strlen(xml), &d), code);
    if (!strstr(d.msg, msg_part)) CW_FAIL("message \"%s\" lacks \"%s\"", d.msg, msg_part);
    /* Nothing of the bad file was kept. */
    ASSERT_STR_EQ(cw_stacktags_hash(r), hash);
    ASSERT_EQ(cw_stacktags_tag_count(r), 1);
    ASSERT_STR_EQ(frame_tag(r, "g!x"), "G");
    cw_stacktags_destroy(r);
}

static void test_warnings_and_errors(void)
{
    warnings_t w = {0};
    cw_stacktags_t *r = rules_from("<Tag Name=''>\n"
                                   " <Tag Name='A' Colour='red'>\n"
                                   "  <Comment>x</Comment>\n"
                                   "  <Entrypoint Module='a' Method='f' Kind='1'/>\n"
                                   "  <Comment/>\n"
                                   "  <Entrypoint Module='a' Method='g' Kind='2'/>\n"
                                   "  <Wrapper><Entrypoint Module='w'/></Wrapper>\n"
                                   " </Tag>\n"
                                   " <Tag Name='B' Colour='blue'/>\n"
                                   "</Tag>\n",
                                   &w);
    /* Once each: Colour on Tag, Comment, Kind on Entrypoint, Wrapper. */
    ASSERT_EQ(w.n, 4);
    ASSERT_TRUE(strstr(w.all, "t.stacktags:2: unknown attribute Colour on <Tag>") != NULL);
    ASSERT_TRUE(strstr(w.all, "t.stacktags:3: unknown element <Comment>") != NULL);
    ASSERT_TRUE(strstr(w.all, "t.stacktags:4: unknown attribute Kind on <Entrypoint>") != NULL);
    ASSERT_TRUE(strstr(w.all, "t.stacktags:7: unknown element <Wrapper>") != NULL);
    /* An unknown element's children count as if it were not there. */
    ASSERT_STR_EQ(frame_tag(r, "w!x"), "A");
    ASSERT_STR_EQ(frame_tag(r, "a!g"), "A");
    cw_stacktags_destroy(r);

    /* Malformed XML: file:line:column and expat's message. */
    expect_error("<Tag Name=''>\n  <Tag Name='A'>\n    <Entrypoint Module='m'>\n  </Tag>\n</Tag>\n",
                 CW_EPARSE, "bad.stacktags:4:5: malformed XML: mismatched tag");
    expect_error("", CW_EPARSE, "bad.stacktags:1:1: malformed XML: no element found");
    expect_error("<Tag Name='a'/><Tag Name='b'/>", CW_EPARSE,
                 "bad.stacktags:1:16: malformed XML: junk after document element");
    expect_error("<Tag Name='a\n", CW_EPARSE, "bad.stacktags:");
    expect_error("<Tag Name='a' Name='b'/>", CW_EPARSE, "duplicate attribute");
    /* Rule errors, with position. */
    expect_error("<Tag Name=''>\n <Tag Priority='1'/>\n</Tag>", CW_EPARSE,
                 "bad.stacktags:2:2: <Tag> without a Name attribute");
    expect_error("<Tag Name='A' Priority='high'/>", CW_EPARSE,
                 "bad.stacktags:1:1: Priority \"high\" of tag \"A\" is not a whole number");
    expect_error("<Tag Name='A' Priority='99999999999'/>", CW_EPARSE, "not a whole number");
    expect_error("<Tag Name='A' Priority='1.5'/>", CW_EPARSE, "not a whole number");
    expect_error("<Tag Name=''><Entrypoint Module='m'/></Tag>", CW_EPARSE,
                 "bad.stacktags:1:14: <Entrypoint> outside a named <Tag>");
    expect_error("<Tag Name='A'><Entrypoint Method='f'/></Tag>", CW_EPARSE,
                 "<Entrypoint> without a Module");
    expect_error("<Tag Name='A\\\\B'/>", CW_EPARSE, "empty part between backslashes");
    expect_error("<Tag Name='A\\'/>", CW_EPARSE, "empty part");

    /* Too deep a tree is refused. */
    {
        char xml[8192] = "";
        for (int i = 0; i < 70; i++)
            strcat(xml, "<Tag Name='x'>");
        for (int i = 0; i < 70; i++)
            strcat(xml, "</Tag>");
        expect_error(xml, CW_EPARSE, "at most 64 levels");
    }

    /* Missing file; the malformed fixture on disk. */
    {
        cw_stacktags_t *e;
        cw_diag_t d;
        ASSERT_OK(cw_stacktags_create(&e));
        ASSERT_EQ(cw_stacktags_load_file(e, "/nonexistent/x.stacktags", &d), CW_EIO);
        ASSERT_TRUE(strstr(d.msg, "/nonexistent/x.stacktags: cannot open") != NULL);
        ASSERT_EQ(cw_stacktags_load_file(e, fixture("malformed.stacktags"), &d), CW_EPARSE);
        ASSERT_TRUE(strstr(d.msg, "malformed.stacktags:4:5: malformed XML: mismatched tag") !=
                    NULL);
        cw_stacktags_destroy(e);
    }

    /* Priorities: sign and spaces. */
    r = rules_from("<Tag Name='N' Priority=' -12 '><Entrypoint Module='n'/></Tag>", NULL);
    cw_stacktags_tag_t t;
    ASSERT_OK(cw_stacktags_tag_at(r, 0, &t));
    ASSERT_EQ(t.priority, -12);
    cw_stacktags_destroy(r);
}

/* ---- hash -------------------------------------------------------------- */

static void test_hash(void)
{
    const char *a = "<Tag Name=''><Tag Name='X' Priority='1'><Entrypoint Module='m' Method='f'/>"
                    "</Tag></Tag>";
    const char *a2 = "<?xml version='1.0'?>\n<!-- same rules, other layout -->\n"
                     "<Tag Name=''>\n  <Tag Priority='1' Name='X'>\n"
                     "    <Entrypoint Method='f' Module='m' />\n  </Tag>\n</Tag>\n";
    const char *b = "<Tag Name=''><Tag Name='X' Priority='2'><Entrypoint Module='m' Method='f'/>"
                    "</Tag></Tag>";
    const char *c = "<Tag Name=''><Tag Name='X' Priority='1'><Entrypoint Module='m'/>"
                    "</Tag></Tag>";
    cw_stacktags_t *ra = rules_from(a, NULL), *ra2 = rules_from(a2, NULL),
                   *rb = rules_from(b, NULL), *rc = rules_from(c, NULL), *empty;
    ASSERT_OK(cw_stacktags_create(&empty));
    ASSERT_STR_EQ(cw_stacktags_hash(ra), cw_stacktags_hash(ra2));
    ASSERT_TRUE(strcmp(cw_stacktags_hash(ra), cw_stacktags_hash(rb)) != 0);
    ASSERT_TRUE(strcmp(cw_stacktags_hash(ra), cw_stacktags_hash(rc)) != 0);
    ASSERT_TRUE(strcmp(cw_stacktags_hash(ra), cw_stacktags_hash(empty)) != 0);
    ASSERT_EQ(strlen(cw_stacktags_hash(ra)), 32);
    cw_stacktags_destroy(ra);
    cw_stacktags_destroy(ra2);
    cw_stacktags_destroy(rb);
    cw_stacktags_destroy(rc);
    cw_stacktags_destroy(empty);
}

/* ---- the tagger engine -------------------------------------------------- */

static void test_tagger(void)
{
    cw_stacktags_t *r = rules_from("<Tag Name=''>"
                                   " <Tag Name='Heap' Priority='10'><Entrypoint Module='ntdll' "
                                   "Method='RtlAllocateHeap'/></Tag>"
                                   " <Tag Name='VA'><Entrypoint Module='ntdll' "
                                   "Method='NtAllocateVirtualMemory'/></Tag>"
                                   "</Tag>",
                                   NULL);
    char hash[64];
    snprintf(hash, sizeof hash, "%s", cw_stacktags_hash(r));
    cw_tagger_t *t;
    ASSERT_OK(cw_stacktags_tagger(r, &t));
    ASSERT_STR_EQ(cw_tagger_engine_name(t), "stacktags");
    ASSERT_STR_EQ(cw_tagger_rules_hash(t), hash);

    for (int round = 0; round < 2; round++) { /* a second table: the cache must not leak */
        cw_stacks_t *s;
        ASSERT_OK(cw_stacks_create(&s));
        const char *pad[] = {"pad!a", "pad!b", "pad!c"};
        uint32_t ignored;
        if (round == 1) ASSERT_OK(cw_stacks_intern_strings(s, pad, 3, &ignored)); /* shift ids */
        const char *heap[] = {"app!main", "ntdll!RtlAllocateHeap", "ntdll!NtAllocateVirtualMemory"};
        const char *va[] = {"app!main", "ntdll!NtAllocateVirtualMemory"};
        const char *none[] = {"app!main", "app!other"};
        const char *pseudo[] = {"(before trace)"};
        uint32_t sh, sv, sn, sp;
        ASSERT_OK(cw_stacks_intern_strings(s, heap, 3, &sh));
        ASSERT_OK(cw_stacks_intern_strings(s, va, 2, &sv));
        ASSERT_OK(cw_stacks_intern_strings(s, none, 2, &sn));
        ASSERT_OK(cw_stacks_intern_strings(s, pseudo, 1, &sp));
        for (int again = 0; again < 2; again++) { /* cold, then cached */
            ASSERT_STR_EQ(cw_stacktags_tag_stack(r, s, sh), "Heap");
            ASSERT_STR_EQ(cw_stacktags_tag_stack(r, s, sv), "VA");
            ASSERT_STR_EQ(cw_stacktags_tag_stack(r, s, sn), "Other");
            ASSERT_STR_EQ(cw_stacktags_tag_stack(r, s, 0), "Other");
        }
        ASSERT_STR_EQ(cw_tagger_tag_name(t, cw_tagger_tag(t, s, sh)), "Heap");
        ASSERT_STR_EQ(cw_tagger_tag_name(t, cw_tagger_tag(t, s, sv)), "VA");
        ASSERT_STR_EQ(cw_tagger_tag_name(t, cw_tagger_tag(t, s, sn)), "Other");
        ASSERT_STR_EQ(cw_tagger_tag_name(t, cw_tagger_tag(t, s, sp)), "(before trace)");
        /* Frames interned after a stack was tagged are matched too. */
        const char *later[] = {"x!y", "ntdll!RtlAllocateHeap"};
        uint32_t sl;
        ASSERT_OK(cw_stacks_intern_strings(s, later, 2, &sl));
        ASSERT_STR_EQ(cw_stacktags_tag_stack(r, s, sl), "Heap");
        cw_stacks_destroy(s);
    }
    cw_tagger_destroy(t); /* destroys r */
}

/* ---- the default files -------------------------------------------------- */

static cw_stacktags_t *defaults(const char *platform)
{
    cw_stacktags_t *r;
    cw_diag_t d = {""};
    warnings_t w = {0};
    int rc = cw_stacktags_create(&r);
    ASSERT_OK(rc);
    cw_stacktags_set_warn(r, collect, &w);
    char path[1024];
    rc = cw_stacktags_default_path(platform, path, sizeof path, &d);
    if (rc) CW_FAIL("%s", d.msg);
    rc = cw_stacktags_load_file(r, path, &d);
    if (rc) CW_FAIL("%s", d.msg);
    if (w.n) CW_FAIL("warnings in %s: %s", path, w.all);
    return r;
}

static void test_windows_defaults(void)
{
    cw_stacktags_t *r = defaults("windows");
    /* The MemoryTestApp "new" leak: heap growth through
     * RtlpAllocateHeapInternal -> NtAllocateVirtualMemory. */
    ASSERT_STR_EQ(tag_of(r, "ntdll!RtlUserThreadStart", "kernel32!BaseThreadInitThunk",
                         "MemoryTestApp!mainCRTStartup", "MemoryTestApp!main",
                         "MemoryTestApp!InnerLoopOperation", "MemoryTestApp!operator new",
                         "ucrtbase!_malloc_base", "ntdll!RtlAllocateHeap",
                         "ntdll!RtlpAllocateHeapInternal", "ntdll!RtlpAllocateHeap",
                         "ntdll!RtlpExtendHeap", "ntdll!NtAllocateVirtualMemory",
                         "ntoskrnl!KiSystemServiceCopyEnd", "ntoskrnl!NtAllocateVirtualMemory",
                         "ntoskrnl!MiAllocateVirtualMemory", NULL),
                  "Windows Heap");
    ASSERT_STR_EQ(tag_of(r, "MemoryTestApp.exe!main", "ntdll.dll!RtlpAllocateHeapInternal",
                         "ntdll.dll!NtAllocateVirtualMemory", NULL),
                  "Windows Heap");
    /* Segment heap and LFH too. */
    ASSERT_STR_EQ(tag_of(r, "app!f", "ntdll!RtlpHpVsContextAllocateInternal",
                         "ntdll!NtAllocateVirtualMemory", NULL),
                  "Windows Heap");
    /* Direct VirtualAlloc from main: the step and the spikes. */
    ASSERT_STR_EQ(tag_of(r, "ntdll!RtlUserThreadStart", "kernel32!BaseThreadInitThunk",
                         "MemoryTestApp!mainCRTStartup", "MemoryTestApp!main",
                         "KernelBase!VirtualAlloc", "ntdll!NtAllocateVirtualMemory",
                         "ntoskrnl!NtAllocateVirtualMemory", NULL),
                  "VirtualAlloc");
    ASSERT_STR_EQ(tag_of(r, "MemoryTestApp!main", "MemoryTestApp!Operation1",
                         "MemoryTestApp!ManipulateTemporaryBuffer", "KERNELBASE!VirtualAlloc",
                         "ntdll!NtAllocateVirtualMemory", NULL),
                  "VirtualAlloc");
    {
        const char *f[] = {"MemoryTestApp!main", "KernelBase!VirtualAlloc",
                           "ntdll!NtAllocateVirtualMemory"};
        ASSERT_EQ(frame_of(r, f, 3), 2); /* the nearest VirtualAlloc frame */
    }
    /* Kernel-only stack: VirtualAlloc. */
    ASSERT_STR_EQ(tag_of(r, "ntoskrnl.exe!MiAllocateVirtualMemory", NULL), "VirtualAlloc");
    /* Thread stack: created by CreateThread, even through the heap-free
     * kernel path, and not claimed for every worker's allocations. */
    ASSERT_STR_EQ(tag_of(r, "app!main", "kernel32!CreateThreadStub",
                         "KernelBase!CreateRemoteThreadEx", "ntdll!NtCreateThreadEx",
                         "ntoskrnl!NtCreateThreadEx", "ntoskrnl!PspCreateThread",
                         "ntoskrnl!PspAllocateThread", "ntoskrnl!MmCreateTeb",
                         "ntoskrnl!MiAllocateVirtualMemory", NULL),
                  "Thread Stack");
    ASSERT_STR_EQ(tag_of(r, "app!main", "ntdll!RtlCreateUserThread", "ntdll!RtlpCreateUserThreadEx",
                         "ntdll!RtlCreateUserStack", "ntdll!NtAllocateVirtualMemory", NULL),
                  "Thread Stack");
    ASSERT_STR_EQ(tag_of(r, "ntdll!RtlUserThreadStart", "kernel32!BaseThreadInitThunk",
                         "app!Worker", "KernelBase!VirtualAlloc", "ntdll!NtAllocateVirtualMemory",
                         NULL),
                  "VirtualAlloc");
    ASSERT_STR_EQ(tag_of(r, "ntdll!RtlUserThreadStart", "kernel32!BaseThreadInitThunk",
                         "app!Worker", "ntdll!RtlAllocateHeap", "ntdll!RtlpAllocateHeapInternal",
                         "ntdll!NtAllocateVirtualMemory", NULL),
                  "Windows Heap");
    /* The other tags. */
    ASSERT_STR_EQ(tag_of(r, "app!Paint", "gdi32full!CreateCompatibleBitmap",
                         "ntdll!RtlAllocateHeap", "ntdll!NtAllocateVirtualMemory", NULL),
                  "GDI");
    ASSERT_STR_EQ(tag_of(r, "app!Run", "coreclr!JIT_New", "coreclr!WKS::GCHeap::Alloc",
                         "coreclr!WKS::gc_heap::grow_heap_segment",
                         "coreclr!GCToOSInterface::VirtualCommit", "KernelBase!VirtualAlloc",
                         "ntdll!NtAllocateVirtualMemory", NULL),
                  "Managed Heap");
    ASSERT_STR_EQ(tag_of(r, "clr.dll!ThePreStub", "clr.dll!UnsafeJitFunction",
                         "clrjit.dll!CILJit::compileMethod",
                         "clr.dll!LoaderHeap::UnlockedReservePages", "KernelBase.dll!VirtualAlloc",
                         "ntdll.dll!NtAllocateVirtualMemory", NULL),
                  "CLR JIT Compile");
    ASSERT_STR_EQ(tag_of(r, "chrome.dll!v8::internal::Heap::CollectGarbage",
                         "chrome.dll!v8::internal::PagedSpace::Expand",
                         "chrome.dll!v8::base::OS::SetPermissions", "KernelBase!VirtualAlloc",
                         "ntdll!NtAllocateVirtualMemory", NULL),
                  "V8 JS Heap");
    ASSERT_STR_EQ(tag_of(r, "jscript9!Js::JavascriptArray::New",
                         "jscript9!Memory::Recycler::LargeAlloc",
                         "jscript9!Memory::PageAllocatorBase::AllocPages",
                         "KernelBase!VirtualAlloc", "ntdll!NtAllocateVirtualMemory", NULL),
                  "JScript Heap");
    ASSERT_STR_EQ(tag_of(r, "mshtml!CMarkup::Load", "mshtml!MemoryProtection::HeapAlloc",
                         "ntdll!RtlAllocateHeap", "ntdll!NtAllocateVirtualMemory", NULL),
                  "MSHTML Heap");
    ASSERT_STR_EQ(tag_of(r, "d3d11!CDevice::CreateTexture2D", "nvwgf2umx!x",
                         "gdi32!D3DKMTCreateAllocation2", "win32u!NtGdiDdDDICreateAllocation",
                         "dxgkrnl.sys!DxgkCreateAllocation", "ntoskrnl.exe!MiAllocateVirtualMemory",
                         NULL),
                  "Video Memory");
    ASSERT_STR_EQ(tag_of(r, "d3d10warp!UMDevice::CreateResource", "ntdll!RtlAllocateHeap",
                         "ntdll!NtAllocateVirtualMemory", NULL),
                  "DX Warp");
    ASSERT_STR_EQ(tag_of(r, "app!main", "app!helper", NULL), "Other");
    cw_stacktags_destroy(r);
}

static void test_linux_defaults(void)
{
    cw_stacktags_t *r = defaults("linux");
    /* glibc malloc growing the main arena through brk. */
    ASSERT_STR_EQ(tag_of(r, "app!_start", "libc.so.6!__libc_start_main", "app!main", "app!load",
                         "libc.so.6!malloc", "libc.so.6!_int_malloc", "libc.so.6!sysmalloc",
                         "libc.so.6!__glibc_morecore", "libc.so.6!__sbrk", "libc.so.6!__brk", NULL),
                  "C heap (glibc malloc)");
    /* A large chunk mmapped straight from malloc, a thread arena. */
    ASSERT_STR_EQ(tag_of(r, "app!main", "libc.so.6!__libc_malloc", "libc.so.6!sysmalloc",
                         "libc.so.6!sysmalloc_mmap", "libc.so.6!__mmap64", NULL),
                  "C heap (glibc malloc)");
    ASSERT_STR_EQ(tag_of(r, "libc.so.6!start_thread", "app!worker", "libc.so.6!malloc",
                         "libc.so.6!tcache_init", "libc.so.6!arena_get2",
                         "libc.so.6!_int_new_arena", "libc.so.6!new_heap",
                         "libc.so.6!alloc_new_heap", "libc.so.6!__mmap", NULL),
                  "C heap (glibc malloc)");
    ASSERT_STR_EQ(tag_of(r, "libc.so.6!start_thread", "app!worker", "libc.so.6!_int_malloc",
                         "libc.so.6!sysmalloc", "libc.so.6!grow_heap", "libc.so.6!__mprotect",
                         NULL),
                  "C heap (glibc malloc)");
    ASSERT_STR_EQ(tag_of(r, "app!main", "libc-2.31.so!__libc_calloc", "libc-2.31.so!sysmalloc",
                         "libc-2.31.so!__default_morecore", "libc-2.31.so!sbrk", NULL),
                  "C heap (glibc malloc)");
    /* pthread_create mapping a stack. */
    ASSERT_STR_EQ(tag_of(r, "app!main", "libc.so.6!pthread_create@@GLIBC_2.34",
                         "libc.so.6!allocate_stack", "libc.so.6!__mmap64", NULL),
                  "Thread Stack");
    ASSERT_STR_EQ(tag_of(r, "libjvm.so!os::create_thread",
                         "libpthread.so.0!pthread_create@@GLIBC_2.2.5",
                         "libpthread.so.0!allocate_stack", "libc.so.6!mmap64", NULL),
                  "Thread Stack");
    /* The loader. */
    ASSERT_STR_EQ(
        tag_of(r, "app!main", "libc.so.6!dlopen", "ld-linux-x86-64.so.2!_dl_open",
               "ld-linux-x86-64.so.2!_dl_catch_exception", "ld-linux-x86-64.so.2!dl_open_worker",
               "ld-linux-x86-64.so.2!_dl_map_object", "ld-linux-x86-64.so.2!_dl_map_object_from_fd",
               "ld-linux-x86-64.so.2!_dl_map_segments", "ld-linux-x86-64.so.2!__mmap64", NULL),
        "Loader");
    ASSERT_STR_EQ(tag_of(r, "ld-linux-aarch64.so.1!_dl_start",
                         "ld-linux-aarch64.so.1!_dl_sysdep_start", "ld-linux-aarch64.so.1!dl_main",
                         "ld-linux-aarch64.so.1!__minimal_malloc", "ld-linux-aarch64.so.1!__mmap64",
                         NULL),
                  "Loader");
    /* A constructor run by ld.so mapping memory itself is not the loader. */
    ASSERT_STR_EQ(tag_of(r, "ld-linux-x86-64.so.2!_dl_init", "ld-linux-x86-64.so.2!call_init",
                         "libfoo.so!init_pool", "libc.so.6!mmap64", NULL),
                  "Direct mmap");
    /* Other allocators. */
    ASSERT_STR_EQ(tag_of(r, "app!main", "libjemalloc.so.2!malloc",
                         "libjemalloc.so.2!je_extent_alloc_mmap", "libc.so.6!mmap64", NULL),
                  "C heap (jemalloc)");
    ASSERT_STR_EQ(tag_of(r, "redis-server!zmalloc", "redis-server!je_malloc",
                         "redis-server!je_arena_extent_alloc", "libc.so.6!mmap64", NULL),
                  "C heap (jemalloc)");
    ASSERT_STR_EQ(tag_of(r, "app!main", "libtcmalloc.so.4!tc_malloc",
                         "libtcmalloc.so.4!TCMalloc_SystemAlloc", "libc.so.6!mmap64", NULL),
                  "C heap (tcmalloc)");
    ASSERT_STR_EQ(
        tag_of(r, "app!main", "app!tcmalloc::PageHeap::GrowHeap", "libc.so.6!__sbrk", NULL),
        "C heap (tcmalloc)");
    ASSERT_STR_EQ(tag_of(r, "app!main", "libmimalloc.so.2!mi_malloc",
                         "libmimalloc.so.2!_mi_os_alloc", "libc.so.6!mmap64", NULL),
                  "C heap (mimalloc)");
    ASSERT_STR_EQ(tag_of(r, "app!main", "app!mi_malloc", "app!_mi_malloc_generic",
                         "app!_mi_os_alloc", "libc.so.6!mmap64", NULL),
                  "C heap (mimalloc)");
    /* Runtimes. */
    ASSERT_STR_EQ(tag_of(r, "libjvm.so!G1CollectedHeap::expand", "libjvm.so!os::commit_memory",
                         "libjvm.so!os::pd_commit_memory", "libc.so.6!mmap64", NULL),
                  "JVM Heap");
    ASSERT_STR_EQ(tag_of(r, "node!v8::internal::Heap::CollectGarbage",
                         "node!v8::internal::NewSpace::Grow", "node!v8::base::OS::SetPermissions",
                         "libc.so.6!mprotect", NULL),
                  "V8 JS Heap");
    ASSERT_STR_EQ(tag_of(r, "app!runtime.mallocgc", "app!runtime.(*mcache).refill",
                         "app!runtime.(*mheap).alloc", "app!runtime.(*mheap).grow",
                         "app!runtime.sysMap", "app!runtime.sysMapOS", "app!runtime.mmap", NULL),
                  "Go Runtime");
    ASSERT_STR_EQ(tag_of(r, "python3.11!PyObject_Malloc", "python3.11!new_arena",
                         "python3.11!_PyObject_ArenaMmap", "libc.so.6!mmap64", NULL),
                  "Python obmalloc");
    ASSERT_STR_EQ(tag_of(r, "libpython3.12.so.1.0!_PyObject_Malloc",
                         "libpython3.12.so.1.0!new_arena", "libc.so.6!__mmap", NULL),
                  "Python obmalloc");
    /* Direct calls. */
    ASSERT_STR_EQ(tag_of(r, "app!_start", "app!main", "libc.so.6!mmap64", NULL), "Direct mmap");
    ASSERT_STR_EQ(tag_of(r, "app!main", "libc.so.6!__GI___mmap64", NULL), "Direct mmap");
    ASSERT_STR_EQ(tag_of(r, "app!main", "libc.so.6!mremap", NULL), "Direct mmap");
    ASSERT_STR_EQ(tag_of(r, "app!main", "libc.so.6!sbrk", NULL), "Direct brk");
    ASSERT_STR_EQ(tag_of(r, "app!main", "libc.so.6!munmap", NULL), "Other");
    ASSERT_STR_EQ(tag_of(r, "app!main", NULL), "Other");
    cw_stacktags_destroy(r);
}

static void test_default_lookup(void)
{
    char path[1024];
    cw_diag_t d;
    ASSERT_EQ(cw_stacktags_default_path("macos", path, sizeof path, &d), CW_EINVAL);
    ASSERT_TRUE(strstr(d.msg, "known: windows, linux") != NULL);
    ASSERT_EQ(cw_stacktags_default_path(NULL, path, sizeof path, &d), CW_EINVAL);

    /* $CW_STACKTAGS_DIR comes first when it has the file. */
    const char *fx = getenv("CW_FIXTURES");
    char dir[1024];
    snprintf(dir, sizeof dir, "%s/stacktags/defaults", fx ? fx : "tests/fixtures");
    set_env("CW_STACKTAGS_DIR", dir);
    ASSERT_OK(cw_stacktags_default_path("linux", path, sizeof path, &d));
    ASSERT_TRUE(strstr(path, "stacktags/defaults/linux.stacktags") != NULL);
    cw_tagger_t *t;
    ASSERT_OK(cw_stacktags_tagger_for("linux", NULL, 0, &t, &d));
    cw_stacks_t *s;
    ASSERT_OK(cw_stacks_create(&s));
    const char *st[] = {"app!main", "libc.so.6!mmap64"};
    uint32_t id;
    ASSERT_OK(cw_stacks_intern_strings(s, st, 2, &id));
    ASSERT_STR_EQ(cw_tagger_tag_name(t, cw_tagger_tag(t, s, id)), "From Env Dir");
    cw_tagger_destroy(t);
    /* ...and falls through to the next place when it lacks it. */
    ASSERT_OK(cw_stacktags_default_path("windows", path, sizeof path, &d));
    ASSERT_TRUE(strstr(path, "stacktags/defaults/") == NULL);
    ASSERT_TRUE(strstr(path, "windows.stacktags") != NULL);
    set_env("CW_STACKTAGS_DIR", NULL);

    /* Defaults per platform of the data; explicit files replace them. */
    ASSERT_OK(cw_stacktags_tagger_for("windows", NULL, 0, &t, &d));
    cw_tagger_t *tl;
    ASSERT_OK(cw_stacktags_tagger_for("linux", NULL, 0, &tl, &d));
    ASSERT_TRUE(strcmp(cw_tagger_rules_hash(t), cw_tagger_rules_hash(tl)) != 0);
    const char *ws[] = {"MemoryTestApp!main", "KernelBase!VirtualAlloc",
                        "ntdll!NtAllocateVirtualMemory"};
    ASSERT_OK(cw_stacks_intern_strings(s, ws, 3, &id));
    ASSERT_STR_EQ(cw_tagger_tag_name(t, cw_tagger_tag(t, s, id)), "VirtualAlloc");
    cw_tagger_destroy(t);
    cw_tagger_destroy(tl);
    const char *files[] = {fixture("wpa_sample.stacktags")};
    ASSERT_OK(cw_stacktags_tagger_for("windows", files, 1, &t, &d));
    cw_stacks_clear_tags(s); /* tag ids cached in s belong to the previous tagger */
    ASSERT_STR_EQ(cw_tagger_tag_name(t, cw_tagger_tag(t, s, id)), "Memory\\VirtualAlloc");
    cw_tagger_destroy(t);
    const char *bad[] = {fixture("wpa_sample.stacktags"), fixture("malformed.stacktags")};
    ASSERT_EQ(cw_stacktags_tagger_for("windows", bad, 2, &t, &d), CW_EPARSE);
    ASSERT_TRUE(strstr(d.msg, "malformed.stacktags:4:5") != NULL);
    ASSERT_EQ(cw_stacktags_tagger_for("plan9", NULL, 0, &t, &d), CW_EINVAL);
    cw_stacks_destroy(s);
}

int main(void)
{
    test_patterns();
    test_tree_and_priority();
    test_override();
    test_wpa_file();
    test_warnings_and_errors();
    test_hash();
    test_tagger();
    test_windows_defaults();
    test_linux_defaults();
    test_default_lookup();
    TEST_DONE();
}
