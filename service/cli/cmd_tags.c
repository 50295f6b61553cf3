/* cmd_tags.c - `commitwatch tags check` (validate rule files, print the
 * tag tree) and `commitwatch tags explain` (a stack's tag and why). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "cli/cli.h"
#include "commitwatch/platform.h"
#include "commitwatch/stacktags.h"

/* The defaults follow the data; with no data at hand, the machine's. */
#define HOST_PLATFORM cw_plat_name()

static void usage(FILE *out)
{
    fprintf(out, "usage: commitwatch tags check [--platform windows|linux] [FILE...]\n"
                 "       commitwatch tags explain [--rules FILE]... [--platform windows|linux]\n"
                 "                                --stack 'mod!fn;mod!fn;...' [--json]\n\n"
                 "Stack-tag rules are WPA .stacktags files. `tags COMMAND --help` says more.\n");
}

static void usage_check(FILE *out)
{
    fprintf(out,
            "usage: commitwatch tags check [--platform windows|linux] [FILE...]\n\n"
            "Loads the .stacktags files in order (a later file overrides tags of the same\n"
            "name) and prints the tag tree: each tag with its priority and entrypoints.\n"
            "With no FILE, checks the default rules of --platform (default: %s).\n"
            "Warnings (unknown elements or attributes) go to stderr.\n"
            "Exit status: 0 valid, 1 a file is unreadable or invalid, 2 usage error.\n",
            HOST_PLATFORM);
}

static void usage_explain(FILE *out)
{
    fprintf(out,
            "usage: commitwatch tags explain [--rules FILE]... [--platform windows|linux]\n"
            "                                --stack 'mod!fn;mod!fn;...' [--json]\n\n"
            "Prints the tag of one stack, the frame that decided it and the rule that\n"
            "matched that frame (tag path, priority, module and method pattern).\n\n"
            "  --stack S     frames separated by ';', outermost caller first, the\n"
            "                allocating call last (as in traces)\n"
            "  --rules FILE  a .stacktags file; repeat to load several in order. Without\n"
            "                it, the default rules of the platform are used\n"
            "  --platform P  whose default rules: windows or linux (default: %s)\n"
            "  --json        print {\"tag\": T, \"frame\": N, \"rule\": {\"tag\": T,\n"
            "                \"priority\": N, \"module\": M, \"method\": M}}; frame counts from\n"
            "                0 at the outermost frame; frame and rule are null for Other;\n"
            "                method is null for a module-only rule\n"
            "Exit status: 0 explained, 1 rules could not be loaded, 2 usage error.\n",
            HOST_PLATFORM);
}

static void warn_stderr(void *ctx, const char *msg)
{
    (void)ctx;
    fprintf(stderr, "commitwatch: warning: %s\n", msg);
}

/* Loads files (or the platform's defaults) with warnings on stderr; prints
 * the error and returns NULL on failure. */
static cw_stacktags_t *load_rules(const char *platform, char **files, size_t nfiles)
{
    cw_stacktags_t *r;
    cw_diag_t d;
    int rc = cw_stacktags_create(&r);
    if (rc) {
        fprintf(stderr, "commitwatch: %s\n", cw_strerror(rc));
        return NULL;
    }
    cw_stacktags_set_warn(r, warn_stderr, NULL);
    if ((rc = cw_stacktags_load_files(r, platform, (const char *const *)files, nfiles, &d))) {
        fprintf(stderr, "commitwatch: %s\n", d.msg);
        cw_stacktags_destroy(r);
        return NULL;
    }
    return r;
}

static int valid_platform(const char *p)
{
    if (strcmp(p, "windows") == 0 || strcmp(p, "linux") == 0) return 1;
    fprintf(stderr, "commitwatch: --platform must be windows or linux, not '%s'\n", p);
    return 0;
}

static int cmd_check(int argc, char **argv)
{
    const char *platform = HOST_PLATFORM;
    char **files = calloc((size_t)argc + 1, sizeof *files);
    size_t nfiles = 0;
    int rc = 2;
    if (!files) return 1;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--platform") == 0 && i + 1 < argc) {
            platform = argv[++i];
            if (!valid_platform(platform)) goto out;
        } else if (argv[i][0] == '-' && argv[i][1]) {
            fprintf(stderr, "commitwatch: tags check: unknown option '%s'\n", argv[i]);
            usage_check(stderr);
            goto out;
        } else {
            files[nfiles++] = argv[i];
        }
    }
    cw_stacktags_t *r = load_rules(platform, files, nfiles);
    if (!r) {
        rc = 1;
        goto out;
    }
    size_t ntags = cw_stacktags_tag_count(r);
    for (size_t i = 0; i < ntags; i++) {
        cw_stacktags_tag_t t;
        cw_stacktags_tag_at(r, i, &t);
        int indent = (int)(t.depth - 1) * 4;
        printf("%*s%s  [priority %d%s]\n", indent, "", t.name, (int)t.priority,
               t.inherited ? ", inherited" : "");
        for (size_t j = 0; j < t.nrules; j++) {
            cw_stacktags_rule_t ru;
            cw_stacktags_tag_rule(r, i, j, &ru);
            char pat[512];
            if (ru.method)
                snprintf(pat, sizeof pat, "Module=\"%s\" Method=\"%s\"", ru.module, ru.method);
            else
                snprintf(pat, sizeof pat, "Module=\"%s\"", ru.module);
            printf("%*s  - %-56s %s:%u\n", indent, "", pat, ru.file, ru.line);
        }
    }
    printf("ok: %zu file%s, %zu tags, %zu entrypoints, rules hash %s\n", nfiles ? nfiles : 1,
           nfiles == 1 || nfiles == 0 ? "" : "s", ntags, cw_stacktags_rule_count(r),
           cw_stacktags_hash(r));
    cw_stacktags_destroy(r);
    rc = 0;
out:
    free(files);
    return rc;
}

/* Splits s at ';' into trimmed frames (pointers into s, which is modified).
 * An empty s is the empty stack. Returns the count, or -1 with a message
 * for an empty frame. */
static long split_stack(char *s, char **frames)
{
    long n = 0;
    if (!*s) return 0;
    for (char *p = s;; n++) {
        char *semi = strchr(p, ';');
        if (semi) *semi = '\0';
        while (*p == ' ' || *p == '\t')
            p++;
        char *e = p + strlen(p);
        while (e > p && (e[-1] == ' ' || e[-1] == '\t'))
            *--e = '\0';
        if (!*p) {
            fprintf(stderr,
                    "commitwatch: --stack: frame %ld is empty (frames are separated by "
                    "';', nothing before the first or after the last)\n",
                    n);
            return -1;
        }
        frames[n] = p;
        if (!semi) return n + 1;
        p = semi + 1;
    }
}

static int is_pseudo(const char *f)
{
    size_t len = strlen(f);
    return len >= 2 && f[0] == '(' && f[len - 1] == ')';
}

static void print_json(const cw_stacktags_explain_t *ex)
{
    cJSON *o = cJSON_CreateObject();
    cJSON_AddStringToObject(o, "tag", ex->tag);
    if (ex->frame >= 0)
        cJSON_AddNumberToObject(o, "frame", (double)ex->frame);
    else
        cJSON_AddNullToObject(o, "frame");
    if (ex->matched) {
        cJSON *ru = cJSON_AddObjectToObject(o, "rule");
        cJSON_AddStringToObject(ru, "tag", ex->rule.tag);
        cJSON_AddNumberToObject(ru, "priority", ex->rule.priority);
        cJSON_AddStringToObject(ru, "module", ex->rule.module);
        if (ex->rule.method)
            cJSON_AddStringToObject(ru, "method", ex->rule.method);
        else
            cJSON_AddNullToObject(ru, "method");
    } else {
        cJSON_AddNullToObject(o, "rule");
    }
    char *text = cJSON_PrintUnformatted(o);
    if (text) printf("%s\n", text);
    free(text);
    cJSON_Delete(o);
}

static void print_text(const cw_stacktags_t *r, char **frames, long n,
                       const cw_stacktags_explain_t *ex)
{
    printf("tag: %s\n", ex->tag);
    if (ex->matched) {
        printf("decided by frame %ld: %s\n", ex->frame, frames[ex->frame]);
        printf("rule: tag \"%s\", priority %d, Module=\"%s\"", ex->rule.tag, (int)ex->rule.priority,
               ex->rule.module);
        if (ex->rule.method)
            printf(" Method=\"%s\"", ex->rule.method);
        else
            printf(" (any method)");
        printf(" at %s:%u\n", ex->rule.file, ex->rule.line);
    } else if (ex->frame >= 0) {
        printf("decided by frame %ld: a pseudo-frame names its own tag\n", ex->frame);
    } else {
        printf("no frame matches a rule\n");
    }
    if (n == 0) return;
    printf("\nframes, outermost first (> marks the deciding frame):\n");
    for (long i = 0; i < n; i++) {
        cw_stacktags_rule_t ru;
        char what[300] = "-";
        if (cw_stacktags_match_frame(r, frames[i], &ru))
            snprintf(what, sizeof what, "%s (priority %d)", ru.tag, (int)ru.priority);
        printf("%s %3ld  %-52s %s\n", i == ex->frame ? ">" : " ", i, frames[i], what);
    }
}

static int cmd_explain(int argc, char **argv)
{
    const char *platform = HOST_PLATFORM;
    char *stack = NULL;
    int json = 0, rc = 2;
    char **files = calloc((size_t)argc + 1, sizeof *files);
    char **frames = NULL;
    size_t nfiles = 0;
    cw_stacktags_t *r = NULL;
    if (!files) return 1;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--rules") == 0 && i + 1 < argc) {
            files[nfiles++] = argv[++i];
        } else if (strcmp(argv[i], "--platform") == 0 && i + 1 < argc) {
            platform = argv[++i];
            if (!valid_platform(platform)) goto out;
        } else if (strcmp(argv[i], "--stack") == 0 && i + 1 < argc) {
            free(stack);
            stack = strdup(argv[++i]);
            if (!stack) goto oom;
        } else if (strcmp(argv[i], "--json") == 0) {
            json = 1;
        } else {
            fprintf(stderr, "commitwatch: tags explain: unexpected argument '%s'\n", argv[i]);
            usage_explain(stderr);
            goto out;
        }
    }
    if (!stack) {
        fprintf(stderr, "commitwatch: tags explain: --stack is required\n");
        usage_explain(stderr);
        goto out;
    }
    /* At most one frame per ';' plus one. */
    size_t maxf = 1;
    for (const char *p = stack; *p; p++)
        maxf += *p == ';';
    if (!(frames = calloc(maxf, sizeof *frames))) goto oom;
    long n = split_stack(stack, frames);
    if (n < 0) goto out;
    if (!(r = load_rules(platform, files, nfiles))) {
        rc = 1;
        goto out;
    }
    cw_stacktags_explain_t ex;
    if (n > 0 && is_pseudo(frames[n - 1])) {
        /* As the tagger does: "(before trace)", "(fork)"... tag themselves. */
        memset(&ex, 0, sizeof ex);
        ex.tag = frames[n - 1];
        ex.frame = n - 1;
    } else {
        cw_stacktags_explain(r, (const char *const *)frames, (size_t)n, &ex);
    }
    if (json)
        print_json(&ex);
    else
        print_text(r, frames, n, &ex);
    rc = 0;
    goto out;
oom:
    fprintf(stderr, "commitwatch: out of memory\n");
    rc = 1;
out:
    cw_stacktags_destroy(r);
    free(frames);
    free(stack);
    free(files);
    return rc;
}

int cw_cmd_tags(int argc, char **argv)
{
    int rc;
    const char *sub = cw_cli_subcommand(argc, argv, usage, &rc);
    if (!sub) return rc;
    if (strcmp(sub, "check") == 0) {
        if (cw_cli_wants_help(argc - 1, argv + 1)) {
            usage_check(stdout);
            return 0;
        }
        return cmd_check(argc - 1, argv + 1);
    }
    if (strcmp(sub, "explain") == 0) {
        if (cw_cli_wants_help(argc - 1, argv + 1)) {
            usage_explain(stdout);
            return 0;
        }
        return cmd_explain(argc - 1, argv + 1);
    }
    fprintf(stderr, "commitwatch: tags: unknown command '%s'\n", sub);
    usage(stderr);
    return 2;
}
