/* cmd_analyze.c - `commitwatch analyze`: the figures of a window, exactly
 * from a trace (any window) or from a database (bucket-aligned windows). */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"
#include "commitwatch/analysis.h"
#include "commitwatch/export.h"
#include "commitwatch/pipeline.h"
#include "commitwatch/platform.h"
#include "commitwatch/source.h"
#include "commitwatch/store.h"
#include "commitwatch/trace.h"

static const char usage_text[] =
    "usage: commitwatch analyze (--source replay:PATH | --source etl:FILE |\n"
    "                            --db FILE [--layer commit|heap])\n"
    "                           [--from NS] [--to NS]\n"
    "                           [--json] [--stacks] [--stacktags FILE]... [--images DIR]\n"
    "                           [--format folded|pprof|speedscope [--value V] [-o FILE]]\n\n"
    "Prints, per process, the VirtualAlloc Commit Lifetimes figures of the window\n"
    "[from, to) in Unix nanoseconds (default: the whole trace or database): size,\n"
    "commit count, impacting and transient bytes, the four types AIFI/AIFO/AOFI/AOFO,\n"
    "peak outstanding and its time, outstanding at the end, and sums per stack tag.\n\n"
    "  --source replay:PATH  exact figures from a JSONL trace (\"-\" reads stdin)\n"
    "  --source etl:FILE     exact figures from a Windows event trace (.etl) with\n"
    "                        VirtualAlloc events (`commitwatch etl info FILE` checks)\n"
    "  --db FILE             figures from a commitwatch database; a window that is\n"
    "                        not aligned to its buckets is widened (a note says so)\n"
    "  --layer L             --db: commit (default) or heap, the heap traces' allocations\n"
    "                        (the database's heap layer: its raw tier's whole seconds)\n"
    "  --from NS, --to NS    the window, in nanoseconds since the Unix epoch\n"
    "  --json                print JSON instead of a table\n"
    "  --stacks              include every stack with its frames\n"
    "  --stacktags FILE      stack-tag rules (repeatable; default: the platform's rules)\n"
    "  --images DIR          etl: only: a folder of copies of the trace's DLLs and EXEs;\n"
    "                        frames in them are named by their exports (module!Export+0xNN)\n"
    "  --format F            write the window's stacks, every process's under a root frame\n"
    "                        \"NAME (pid N)\", for other tools (docs/EXPORTS.md): folded\n"
    "                        (flamegraph.pl), pprof (gzipped profile.proto: impacting_bytes,\n"
    "                        transient_bytes, commit_count; labels tag, process, pid) or\n"
    "                        speedscope (JSON, one profile per value)\n"
    "  --value V             folded: each line's value: impacting (default), transient or\n"
    "                        count; stacks whose value is not positive are left out\n"
    "  -o, --output FILE     write the export to FILE instead of standard output\n";

/* Earliest "from" that still leaves rundown (CW_TS_BEFORE) before it. */
#define WHOLE_FROM (INT64_MIN + 1)
#define WHOLE_TO INT64_MAX

/* The command line. */
typedef struct analyze_args {
    const char *source, *db, *images;
    const char *format, *value, *output; /* --format, --value, -o */
    const char *layer;                   /* --layer, with --db */
    int64_t from, to;
    bool have_from, have_to, json, stacks;
    const char **rules; /* --stacktags */
    size_t nrules;
} analyze_args_t;

/* Shaped like run's, record's and heap's: each command's options are its own table
 * (data). */
#define F(f) offsetof(analyze_args_t, f)
static const cw_cli_opt_t opts[] = {
    {"--source", CW_CLI_STR, F(source), 0, NULL},
    {"--db", CW_CLI_STR, F(db), 0, NULL},
    {"--layer", CW_CLI_STR, F(layer), 0, NULL},
    {"--from", CW_CLI_NS, F(from), F(have_from), NULL},
    {"--to", CW_CLI_NS, F(to), F(have_to), NULL},
    {"--json", CW_CLI_FLAG, F(json), 0, NULL},
    {"--stacks", CW_CLI_FLAG, F(stacks), 0, NULL},
    {"--stacktags", CW_CLI_LIST, F(rules), F(nrules), NULL},
    {"--images", CW_CLI_STR, F(images), 0, NULL},
    {"--format", CW_CLI_STR, F(format), 0, NULL},
    {"--value", CW_CLI_STR, F(value), 0, NULL},
    {"--output", CW_CLI_STR, F(output), 0, "-o"},
    {NULL, CW_CLI_FLAG, 0, 0, NULL},
};
#undef F

/* Replays the trace (a replay or etl source) through a window analyzer. */
static int analyze_trace(const cw_source_ops_t *ops, const char *path, int64_t from, int64_t to,
                         bool stacks_wanted, const analyze_args_t *args, cw_report_t **out,
                         cw_diag_t *d)
{
    cw_stacks_t *stacks = NULL;
    cw_tagger_t *tagger = NULL;
    cw_analysis_t *an = NULL;
    cw_pipeline_t *pipe = NULL;
    cw_source_session_t ss = {0};
    int rc;

    if ((rc = cw_stacks_create(&stacks)) != 0) goto done;
    cw_source_opts_t so = {.arg = path, .stacks = stacks, .images = args->images};
    if ((rc = cw_source_session_open(&ss, ops, &so, d)) != 0) goto done;
    rc = cw_cli_make_tagger(cw_source_session_platform(&ss), args->rules, args->nrules, &tagger, d);
    if (rc != 0) goto done;
    if ((rc = cw_analysis_create(from, to, &an)) != 0) goto done;
    cw_tracker_sink_t sink = cw_analysis_sink(an);
    if ((rc = cw_pipeline_create(&sink, NULL, 1, &pipe)) != 0) goto done;
    cw_source_sink_t sink_feed = cw_pipeline_source_sink(pipe, d);
    if ((rc = cw_source_session_run(&ss, &sink_feed, d)) != 0) goto done;
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
    cw_source_session_close(&ss);
    cw_stacks_destroy(stacks);
    if (rc == CW_ENOMEM) cw_diag_set(d, rc, "out of memory");
    return rc;
}

/* --stacktags with --db: the stored tags came from the rules in force when
 * the data was stored; tag the report's stacks again with the given rules
 * (nothing in the database changes). */
static int retag_report(cw_store_t *st, cw_report_t *r, const analyze_args_t *args, cw_diag_t *d)
{
    char *platform = NULL;
    cw_stacks_t *stacks = NULL;
    cw_tagger_t *tagger = NULL;
    int rc;
    if ((rc = cw_store_meta_get(st, "platform", &platform, d)) != 0) goto done;
    if ((rc = cw_stacks_create(&stacks)) != 0) goto done;
    if ((rc = cw_cli_make_tagger(platform, args->rules, args->nrules, &tagger, d)) != 0) goto done;
    for (uint32_t i = 0; i < r->nprocs && rc == 0; i++)
        for (uint32_t j = 0; j < r->procs[i].nstacks && rc == 0; j++) {
            cw_stack_report_t *s = &r->procs[i].stacks[j];
            uint32_t id;
            if ((rc = cw_stacks_intern_strings(stacks, (const char *const *)s->frames, s->nframes,
                                               &id)) != 0)
                break;
            /* (the old text stays the report's until it is freed) */
            s->tag =
                cw_report_add_tag(r, cw_tagger_tag_name(tagger, cw_tagger_tag(tagger, stacks, id)));
            if (!s->tag) {
                rc = CW_ENOMEM;
                break;
            }
        }
    if (rc == CW_ENOMEM) cw_diag_set(d, rc, "out of memory");
done:
    cw_tagger_destroy(tagger);
    cw_stacks_destroy(stacks);
    free(platform);
    return rc;
}

/* Writes r's stacks as o says to the file path, or to standard output
 * when path is NULL. 0 or 1 after a message. */
static int write_export(const cw_report_t *r, const cw_export_opts_t *o, const char *name,
                        const char *path)
{
    cw_diag_t d = {{0}};
    char *buf = NULL;
    size_t len = 0;
    int rc = cw_export_procs(r->procs, r->nprocs, r->from_ns, r->to_ns, name, o, &buf, &len, &d);
    if (rc) {
        fprintf(stderr, "commitwatch analyze: %s\n", d.msg[0] ? d.msg : cw_strerror(rc));
        return 1;
    }
    FILE *f = stdout;
    if (path && !(f = fopen(path, "wb"))) {
        fprintf(stderr, "commitwatch analyze: cannot create %s\n", path);
        free(buf);
        return 1;
    }
    if (!path) cw_plat_stdout_binary();
    bool ok = fwrite(buf, 1, len, f) == len;
    ok = (path ? fclose(f) == 0 : fflush(f) == 0) && ok;
    if (!ok) fprintf(stderr, "commitwatch analyze: writing %s failed\n", path ? path : "the output");
    free(buf);
    return ok ? 0 : 1;
}

int cw_cmd_analyze(int argc, char **argv)
{
    analyze_args_t a = {.from = WHOLE_FROM, .to = WHOLE_TO};
    cw_export_opts_t eo = {.process_frame = true};
    cw_report_t *r = NULL;
    cw_diag_t d = {{0}};
    int rc;

    if (cw_cli_wants_help(argc, argv)) {
        fputs(usage_text, stdout);
        return 0;
    }
    if ((rc = cw_cli_parse("analyze", argc, argv, opts, &a, usage_text)) != 0) goto usage;
    if ((a.source != NULL) == (a.db != NULL)) {
        fprintf(stderr,
                "commitwatch analyze: give exactly one of --source replay:PATH or --db FILE\n%s",
                usage_text);
        goto usage;
    }
    if (a.have_from && a.have_to && a.from >= a.to) {
        fprintf(stderr,
                "commitwatch analyze: --from (%" PRId64 ") must be before --to (%" PRId64 ")\n",
                a.from, a.to);
        goto usage;
    }
    if (a.format && (cw_export_parse_format(a.format, &eo.format, &d) != 0 ||
                     (a.value && cw_export_parse_value(a.value, &eo.value, &d) != 0))) {
        fprintf(stderr, "commitwatch analyze: --%s\n", d.msg);
        goto usage;
    }
    if (!a.format && (a.value || a.output)) {
        fprintf(stderr, "commitwatch analyze: --value and -o go with --format\n");
        goto usage;
    }
    if (a.format && a.json) {
        fprintf(stderr, "commitwatch analyze: give --json or --format, not both\n");
        goto usage;
    }
    if (a.format && a.value && eo.format != CW_EXPORT_FOLDED) {
        fprintf(stderr, "commitwatch analyze: --value is for --format folded (%s carries every "
                        "value)\n", a.format);
        goto usage;
    }
    if (a.format) a.stacks = true; /* an export is of the stacks */
    bool heap = a.layer && strcmp(a.layer, "heap") == 0;
    if (a.layer && (!a.db || (!heap && strcmp(a.layer, "commit") != 0))) {
        fprintf(stderr, "commitwatch analyze: --layer is commit or heap, with --db\n");
        goto usage;
    }
    if (a.images && !a.source) {
        fprintf(stderr, "commitwatch analyze: --images goes with --source etl:FILE\n");
        goto usage;
    }
    if (a.source) {
        /* Files only: a live source never ends. */
        const cw_source_ops_t *ops = NULL;
        const char *path = NULL;
        if (strncmp(a.source, "replay:", 7) == 0) {
            ops = &cw_source_replay;
            path = a.source + 7;
        } else if (strncmp(a.source, "etl:", 4) == 0 && cw_source_find("etl")) {
            ops = cw_source_find("etl");
            path = a.source + 4;
        } else {
            fprintf(stderr, "commitwatch analyze: --source must be replay:PATH or etl:FILE (live "
                            "sources are for `run` and `record`)\n");
            goto usage;
        }
        rc = analyze_trace(ops, path, a.from, a.to, a.stacks, &a, &r, &d);
    } else {
        cw_store_t *st = NULL;
        rc = cw_store_open_readonly(a.db, &st, &d);
        if (rc == 0 && heap) rc = cw_store_set_layer(st, CW_LAYER_HEAP);
        if (rc == 0)
            rc = cw_store_report(st, a.have_from ? a.from : INT64_MIN, a.have_to ? a.to : INT64_MAX,
                                 a.stacks || a.nrules > 0, &r, &d);
        if (rc == 0 && a.nrules > 0) rc = retag_report(st, r, &a, &d);
        cw_store_close(st);
    }
    free(a.rules);
    a.rules = NULL;
    if (rc != 0) return cw_cli_exit("analyze", rc, &d);
    if (a.format) { /* (r comes sorted, and tags do not order it) */
        rc = write_export(r, &eo, a.source ? a.source : a.db, a.output);
        cw_report_free(r);
        return rc;
    }
    if (a.json)
        rc = cw_cli_put_json("analyze", cw_report_json(r, a.stacks));
    else
        cw_report_print_table(r, a.stacks, stdout);
    cw_report_free(r);
    return rc == 0 && fflush(stdout) == 0 ? 0 : 1;
usage:
    free(a.rules);
    return 2;
}
