/* cmd_analyze.c - `commitwatch analyze`: the figures of a window, exactly
 * from a trace (any window) or from a database (bucket-aligned windows). */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"
#include "commitwatch/analysis.h"
#include "commitwatch/pipeline.h"
#include "commitwatch/source.h"
#include "commitwatch/store.h"
#include "commitwatch/trace.h"

static const char usage_text[] =
    "usage: commitwatch analyze (--source replay:PATH | --db FILE) [--from NS] [--to NS]\n"
    "                           [--json] [--stacks] [--stacktags FILE]...\n\n"
    "Prints, per process, the VirtualAlloc Commit Lifetimes figures of the window\n"
    "[from, to) in Unix nanoseconds (default: the whole trace or database): size,\n"
    "commit count, impacting and transient bytes, the four types AIFI/AIFO/AOFI/AOFO,\n"
    "peak outstanding and its time, outstanding at the end, and sums per stack tag.\n\n"
    "  --source replay:PATH  exact figures from a JSONL trace (\"-\" reads stdin)\n"
    "  --db FILE             figures from a commitwatch database; a window that is\n"
    "                        not aligned to its buckets is widened (a note says so)\n"
    "  --from NS, --to NS    the window, in nanoseconds since the Unix epoch\n"
    "  --json                print JSON instead of a table\n"
    "  --stacks              include every stack with its frames\n"
    "  --stacktags FILE      stack-tag rules (repeatable; default: the platform's rules)\n";

/* Earliest "from" that still leaves rundown (CW_TS_BEFORE) before it. */
#define WHOLE_FROM (INT64_MIN + 1)
#define WHOLE_TO INT64_MAX

typedef struct analyze_ctx {
    cw_pipeline_t *pipe;
    cw_diag_t *d;
} analyze_ctx_t;

static int feed(void *ctx, const cw_event_t *ev)
{
    analyze_ctx_t *a = ctx;
    return cw_pipeline_feed(a->pipe, ev, a->d);
}

/* Replays the trace through a window analyzer. */
static int analyze_trace(const char *path, int64_t from, int64_t to, bool stacks_wanted,
                         const cw_cli_rules_t *rules, cw_report_t **out, cw_diag_t *d)
{
    cw_stacks_t *stacks = NULL;
    cw_tagger_t *tagger = NULL;
    cw_analysis_t *an = NULL;
    cw_pipeline_t *pipe = NULL;
    void *src = NULL;
    int rc;

    if ((rc = cw_stacks_create(&stacks)) != 0) goto done;
    if ((rc = cw_source_replay.open(&src, path, stacks, d)) != 0) goto done;
    if ((rc = cw_cli_make_tagger(cw_source_replay.platform(src), rules, &tagger, d)) != 0) goto done;
    if ((rc = cw_analysis_create(from, to, &an)) != 0) goto done;
    cw_tracker_sink_t sink = cw_analysis_sink(an);
    if ((rc = cw_pipeline_create(&sink, NULL, 1, &pipe)) != 0) goto done;
    analyze_ctx_t ctx = {pipe, d};
    cw_source_sink_t ss = {&ctx, feed, NULL, NULL};
    if ((rc = cw_source_replay.run(src, &ss, d)) != 0) goto done;
    cw_pipeline_finish(pipe);
    if ((rc = cw_analysis_report(an, stacks, tagger, stacks_wanted, out)) != 0) goto done;

    /* An omitted bound is the trace's own: first event, last event + 1. */
    cw_report_t *r = *out;
    int64_t first = cw_pipeline_first_ts(pipe), last = cw_pipeline_last_ts(pipe);
    if (cw_pipeline_events(pipe) == 0) first = last = 0;
    if (from == WHOLE_FROM) {
        r->from_ns = first;
        for (uint32_t i = 0; i < r->nprocs; i++)
            if (r->procs[i].peak_ns == WHOLE_FROM) r->procs[i].peak_ns = first;
    }
    if (to == WHOLE_TO) r->to_ns = last + 1;
done:
    cw_pipeline_destroy(pipe);
    cw_analysis_destroy(an);
    cw_tagger_destroy(tagger);
    cw_source_replay.close(src);
    cw_stacks_destroy(stacks);
    if (rc == CW_ENOMEM) cw_diag_set(d, rc, "out of memory");
    return rc;
}

/* --stacktags with --db: the stored tags came from the rules in force when
 * the data was stored; tag the report's stacks again with the given rules
 * (nothing in the database changes). */
static int retag_report(cw_store_t *st, cw_report_t *r, const cw_cli_rules_t *rules, cw_diag_t *d)
{
    char *platform = NULL;
    cw_stacks_t *stacks = NULL;
    cw_tagger_t *tagger = NULL;
    int rc;
    if ((rc = cw_store_meta_get(st, "platform", &platform, d)) != 0) goto done;
    if ((rc = cw_stacks_create(&stacks)) != 0) goto done;
    if ((rc = cw_cli_make_tagger(platform, rules, &tagger, d)) != 0) goto done;
    for (uint32_t i = 0; i < r->nprocs && rc == 0; i++)
        for (uint32_t j = 0; j < r->procs[i].nstacks && rc == 0; j++) {
            cw_stack_report_t *s = &r->procs[i].stacks[j];
            uint32_t id;
            if ((rc = cw_stacks_intern_strings(stacks, (const char *const *)s->frames, s->nframes, &id)) != 0) break;
            char *tag = strdup(cw_tagger_tag_name(tagger, cw_tagger_tag(tagger, stacks, id)));
            if (!tag) {
                rc = CW_ENOMEM;
                break;
            }
            free(s->tag);
            s->tag = tag;
        }
    if (rc == CW_ENOMEM) cw_diag_set(d, rc, "out of memory");
done:
    cw_tagger_destroy(tagger);
    cw_stacks_destroy(stacks);
    free(platform);
    return rc;
}

int cw_cmd_analyze(int argc, char **argv)
{
    const char *source = NULL, *db = NULL;
    long long from = WHOLE_FROM, to = WHOLE_TO;
    bool json = false, stacks = false, have_from = false, have_to = false;
    cw_cli_rules_t rules = {0};
    cw_report_t *r = NULL;
    cw_diag_t d = {{0}};
    int rc;

    if (cw_cli_wants_help(argc, argv)) {
        fputs(usage_text, stdout);
        return 0;
    }
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        const char *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (strcmp(a, "--json") == 0) {
            json = true;
        } else if (strcmp(a, "--stacks") == 0) {
            stacks = true;
        } else if ((strcmp(a, "--source") == 0 || strcmp(a, "--db") == 0 ||
                    strcmp(a, "--from") == 0 || strcmp(a, "--to") == 0 ||
                    strcmp(a, "--stacktags") == 0) && !v) {
            fprintf(stderr, "commitwatch analyze: %s needs a value\n", a);
            return 2;
        } else if (strcmp(a, "--source") == 0) {
            source = argv[++i];
        } else if (strcmp(a, "--db") == 0) {
            db = argv[++i];
        } else if (strcmp(a, "--stacktags") == 0) {
            if (cw_cli_rules_add(&rules, argv[++i]) != 0) return 1;
        } else if (strcmp(a, "--from") == 0 || strcmp(a, "--to") == 0) {
            long long x;
            if (cw_cli_parse_i64(v, &x) != 0 || x < 0 || x == INT64_MAX) {
                fprintf(stderr, "commitwatch analyze: %s takes nanoseconds since the Unix epoch (a whole number >= 0), not '%s'\n", a, v);
                return 2;
            }
            if (a[2] == 'f') from = x, have_from = true;
            else to = x, have_to = true;
            i++;
        } else {
            fprintf(stderr, "commitwatch analyze: unknown option '%s'\n%s", a, usage_text);
            return 2;
        }
    }
    if ((source != NULL) == (db != NULL)) {
        fprintf(stderr, "commitwatch analyze: give exactly one of --source replay:PATH or --db FILE\n%s", usage_text);
        return 2;
    }
    if (have_from && have_to && from >= to) {
        fprintf(stderr, "commitwatch analyze: --from (%lld) must be before --to (%lld)\n", from, to);
        return 2;
    }
    if (source) {
        if (strncmp(source, "replay:", 7) != 0) {
            fprintf(stderr, "commitwatch analyze: --source must be replay:PATH (live sources are for `run` and `record`)\n");
            return 2;
        }
        rc = analyze_trace(source + 7, from, to, stacks, &rules, &r, &d);
    } else {
        cw_store_t *st = NULL;
        rc = cw_store_open_readonly(db, &st, &d);
        if (rc == 0)
            rc = cw_store_report(st, have_from ? from : INT64_MIN, have_to ? to : INT64_MAX,
                                 stacks || rules.n > 0, &r, &d);
        if (rc == 0 && rules.n > 0) rc = retag_report(st, r, &rules, &d);
        cw_store_close(st);
    }
    cw_cli_rules_free(&rules);
    if (rc != 0) {
        fprintf(stderr, "commitwatch analyze: %s\n", d.msg[0] ? d.msg : cw_strerror(rc));
        return 1;
    }
    if (json) {
        char *s = cw_report_json(r, stacks);
        if (!s) {
            fprintf(stderr, "commitwatch analyze: out of memory\n");
            cw_report_free(r);
            return 1;
        }
        puts(s);
        free(s);
    } else {
        cw_report_print_table(r, stacks, stdout);
    }
    cw_report_free(r);
    return fflush(stdout) == 0 ? 0 : 1;
}
