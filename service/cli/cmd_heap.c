/* cmd_heap.c - `commitwatch heap`: the heap drill-down, in launch mode
 * (runs a program with the heap interposer) or attach mode (--pid: loads
 * it into a running process; on Windows an ETW heap session for it;
 * heap_launch.h), or from an .etl file's heap events (--etl; etl.h), and
 * prints the heap report (heap.h): per stack, what is outstanding at the
 * end, what was allocated and freed, and the peak.
 *
 * `heap diff` prints the growth per stack between two points of a report
 * (UMDH's diff of two snapshots): a report saved with --json, or one stored
 * in a database (--db, --trace).
 *
 * DESIGN (threads): this thread starts the program and reads its events
 * until it exits or the duration ends; a signal handler (SIGINT, SIGTERM)
 * only asks the reader to stop, and SIGHUP to take a snapshot. The report
 * covers everything read up to then. */
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"
#include "commitwatch/common.h"
#include "commitwatch/etl.h"
#include "commitwatch/heap.h"
#include "commitwatch/heap_launch.h"
#include "commitwatch/heapdb.h"
#include "commitwatch/log.h"
#include "commitwatch/platform.h"

static const char usage_text[] =
    "usage: commitwatch heap [--duration D] [--snapshot D] [--json] [--top N] [--db FILE]\n"
    "                        -- PROGRAM [ARGS...]\n"
    "       commitwatch heap --pid PID [--duration D] [--snapshot D] [--json] [--top N]\n"
    "                        [--db FILE]\n"
    "       commitwatch heap --etl FILE [--pid PID] [--images DIR] [--json] [--top N]\n"
    "       commitwatch heap diff (REPORT.json | --db FILE --trace ID) [--a P] [--b P]\n"
    "                        [--json] [--top N]\n\n"
    "Runs PROGRAM (Linux, dynamically linked) with the heap interposer, or loads the\n"
    "interposer into the running process PID without restarting it (as root), and\n"
    "prints, when it exits or the duration ends, its heap allocations by stack: bytes\n"
    "and blocks outstanding at the end, allocated and freed, and the peak\n"
    "outstanding, the most outstanding first; the totals; the events dropped. With\n"
    "--pid, blocks allocated before the attach are unknown: their frees are counted\n"
    "apart. PROGRAM's own output comes first (it shares the terminal). On Windows\n"
    "(as administrator), ETW's heap provider traces PROGRAM, started suspended until\n"
    "its session runs, or the process PID.\n"
    "With --etl, the same report from the heap events of a Windows trace (recorded\n"
    "with `xperf -heap -pids` or wpr's heap profile), on any OS.\n\n"
    "  --pid PID     trace this running process (no PROGRAM); Ctrl-C ends the trace\n"
    "  --duration D  stop tracing after D (\"90s\", \"5m\"); the process runs on untraced\n"
    "  --etl FILE    read the heap events of this .etl instead (--pid: of that process)\n"
    "  --images DIR  with --etl: name frames from the export tables of the images in DIR\n"
    "  --snapshot D  a snapshot every D (and one on SIGHUP): what each stack has\n"
    "                outstanding then, for `heap diff`\n"
    "  --json        the report as one line of JSON, every stack\n"
    "  --top N       stacks printed per process (default 20; --json prints all)\n"
    "  --db FILE     also store the trace in this commitwatch database (as the\n"
    "                service's heap traces are: GET /api/heap-traces)\n\n"
    "heap diff: per stack, the growth of outstanding bytes and blocks from point A to\n"
    "point B of a report (UMDH's diff), largest first. A point is start (nothing\n"
    "outstanding), end, or a snapshot's number (1 is the first). Defaults: the first\n"
    "snapshot (start without one) to end.\n"
    "  --a P, --b P  the points\n"
    "  --trace ID    the heap trace stored in --db FILE\n";

typedef struct heap_args {
    const char *duration, *top, *pid, *snapshot, *db, *etl, *images;
    const char *a, *b, *trace; /* heap diff */
    bool json;
} heap_args_t;

/* The options of `heap` and of `heap diff`: data, one table per command, of
 * the same shape as every command's (cmd_run.c, cmd_record.c,
 * cmd_analyze.c). */
#define F(f) offsetof(heap_args_t, f)
static const cw_cli_opt_t opts[] = {
    {"--db", CW_CLI_STR, F(db), 0, NULL},
    {"--duration", CW_CLI_STR, F(duration), 0, NULL},
    {"--etl", CW_CLI_STR, F(etl), 0, NULL},
    {"--images", CW_CLI_STR, F(images), 0, NULL},
    {"--json", CW_CLI_FLAG, F(json), 0, NULL},
    {"--pid", CW_CLI_STR, F(pid), 0, NULL},
    {"--snapshot", CW_CLI_STR, F(snapshot), 0, NULL},
    {"--top", CW_CLI_STR, F(top), 0, NULL},
    {NULL, CW_CLI_FLAG, 0, 0, NULL},
};
/* heap diff's own options (the same struct). */
static const cw_cli_opt_t diff_opts[] = {
    {"--a", CW_CLI_STR, F(a), 0, NULL},     {"--b", CW_CLI_STR, F(b), 0, NULL},
    {"--db", CW_CLI_STR, F(db), 0, NULL},   {"--json", CW_CLI_FLAG, F(json), 0, NULL},
    {"--top", CW_CLI_STR, F(top), 0, NULL}, {"--trace", CW_CLI_STR, F(trace), 0, NULL},
    {NULL, CW_CLI_FLAG, 0, 0, NULL},
};
#undef F

static int print_report(const heap_args_t *a, const cw_heap_report_t *r, uint32_t top)
{
    if (a->json) return cw_cli_put_json("heap", cw_heap_report_json(r));
    return cw_heap_report_print(r, top, stdout) == 0 ? 0 : 1;
}

/* What became of the program, to stderr (stdout holds the report). */
static void say_end(const cw_heap_launch_result_t *res, const char *prog)
{
    if (!res->exited)
        fprintf(stderr, "commitwatch heap: tracing ended; %s runs on untraced\n", prog);
    else if (res->signal)
        fprintf(stderr, "commitwatch heap: %s was ended by signal %d\n", prog, res->signal);
    else if (res->exit_status)
        fprintf(stderr, "commitwatch heap: %s exited with status %d\n", prog, res->exit_status);
    if (res->losses.dropped)
        fprintf(stderr,
                "commitwatch heap: %llu events dropped (the ring was full and the reader "
                "stalled: the report's figures miss them)\n",
                (unsigned long long)res->losses.dropped);
    if (res->losses.truncated)
        fprintf(stderr,
                "commitwatch heap: %llu allocations had stacks deeper than the 57 frames kept "
                "(each counted at its innermost 57: the report's truncated_stacks)\n",
                (unsigned long long)res->losses.truncated);
}

/* A whole number in [1, max] into *out. */
static bool whole(const char *s, unsigned long max, uint32_t *out)
{
    char *end;
    unsigned long v = strtoul(s, &end, 10);
    if (end == s || *end || v == 0 || v > max) return false;
    *out = (uint32_t)v;
    return true;
}

/* What an .etl held that the report cannot show, to stderr: 0, or 1 when
 * the file was damaged, an event was refused or there was no heap event
 * (the report of what was read is printed all the same). */
static int say_etl(const char *path, uint32_t pid, const cw_etl_heap_result_t *res)
{
    int bad = 0;
    if (res->truncated || res->buffers_corrupt) {
        fprintf(stderr,
                "commitwatch heap: %s is damaged (%s, %llu buffers unreadable): the report holds "
                "only the events of the buffers read\n",
                path, res->truncated ? "it ends inside a buffer" : "its buffers",
                (unsigned long long)res->buffers_corrupt);
        bad = 1;
    }
    if (res->heap_skipped) {
        fprintf(stderr,
                "commitwatch heap: %s: %llu heap events could not be decoded and were left out "
                "(%s)\n",
                path, (unsigned long long)res->heap_skipped, res->skips);
        bad = 1;
    }
    if (!res->heap_events) {
        char who[48] = "";
        if (pid) snprintf(who, sizeof who, " of process %u", pid);
        fprintf(stderr, "commitwatch heap: %s holds no heap events%s (%llu events read%s)%s\n",
                path, who, (unsigned long long)res->events,
                res->heap_other ? ", heap events of other processes among them" : "",
                bad ? "" : ": record the trace with `xperf -heap -pids PID` or wpr's heap profile");
        bad = 1;
    }
    if (res->losses.dropped)
        fprintf(stderr,
                "commitwatch heap: the recording lost %llu events or buffers (the trace's "
                "header): the report misses them\n",
                (unsigned long long)res->losses.dropped);
    return bad;
}

/* `heap --etl FILE`: the report of a trace's heap events. */
static int heap_etl(const heap_args_t *a, uint32_t pid, uint32_t top)
{
    cw_diag_t d = {{0}};
    cw_stacks_t *stacks = NULL;
    cw_heap_model_t *m = NULL;
    cw_heap_report_t *r = NULL;
    cw_etl_file_t *f = NULL;
    cw_etl_heap_result_t res;
    /* The header first: the report's window starts at the trace's start. */
    int rc = cw_etl_file_open(a->etl, &f, &d);
    if (rc) goto out;
    int64_t start = cw_etl_file_header(f)->start_ns;
    cw_etl_file_close(f);
    if ((rc = cw_stacks_create(&stacks)) != 0 || (rc = cw_heap_model_create(start, &m)) != 0)
        goto out;
    cw_etl_heap_opts_t o = {.path = a->etl, .pid = pid, .images = a->images};
    if ((rc = cw_etl_heap_read(&o, stacks, m, &res, &d)) != 0) goto out;
    int bad = say_etl(a->etl, pid, &res);
    if ((rc = cw_heap_model_report(m, stacks, &res.losses, &r)) != 0) goto out;
    rc = print_report(a, r, top);
    cw_heap_report_free(r);
    cw_heap_model_destroy(m);
    cw_stacks_destroy(stacks);
    return rc ? rc : bad;
out:
    cw_heap_model_destroy(m);
    cw_stacks_destroy(stacks);
    return cw_cli_exit("heap", rc, &d);
}

/* SIGHUP: a snapshot after what is read by then. */
static atomic_bool snap_asked;
static void ask_snapshot(void)
{
    atomic_store(&snap_asked, true);
}

/* Stores the trace in the database at path (heapdb.h), as the service
 * stores its own, trigger "cli". 0, or 1 after saying why. */
static int store_trace(const char *path, const cw_heap_report_t *r,
                       const cw_heap_launch_result_t *res, int64_t duration)
{
    cw_diag_t d = {{0}};
    cw_store_t *s = NULL;
    char *json = cw_heap_report_json(r);
    const cw_heap_proc_report_t *p = r->nprocs ? &r->procs[0] : NULL;
    cw_heap_trace_row_t row = {.pid = p ? p->pid : 0,
                               .process = p ? p->name : NULL,
                               .trigger = "cli",
                               .requested_ns = res->start_ns,
                               .duration_ns = duration,
                               .started_ns = res->start_ns,
                               .ended_ns = cw_plat_wall_ns(),
                               .state = "running"};
    int rc = json ? cw_store_open_side(path, &s, &d) : cw_diag_set(&d, CW_ENOMEM, "out of memory");
    if (rc == CW_ENOENT) rc = cw_store_open(path, NULL, &s, &d); /* a new database */
    if (!rc) rc = cw_store_heap_add(s, &row, &d);
    if (!rc) {
        row.state = "done";
        row.end_reason = res->exited ? "exited" : duration ? "duration" : "stopped";
        cw_heap_trace_row_figures(&row, r, row.pid);
        rc = cw_store_heap_finish(s, &row, r, json, &d);
    }
    cw_store_close(s);
    free(json);
    if (rc) {
        fprintf(stderr, "commitwatch heap: the report was not stored in %s: %s\n", path, d.msg);
        return 1;
    }
    fprintf(stderr, "commitwatch heap: stored as heap trace %lld in %s\n", (long long)row.id, path);
    return 0;
}

/* The whole of the file at path, NUL-terminated, into *out. */
static int read_all(const char *path, char **out, cw_diag_t *d)
{
    FILE *f = fopen(path, "rb");
    char *buf = NULL;
    size_t len = 0, cap = 0;
    if (!f) return cw_diag_set(d, CW_ENOENT, "cannot open %s", path);
    for (;;) {
        if (CW_RESERVE(buf, cap, len + 65537)) {
            fclose(f);
            free(buf);
            return cw_diag_set(d, CW_ENOMEM, "out of memory reading %s", path);
        }
        size_t n = fread(buf + len, 1, 65536, f);
        len += n;
        if (n < 65536) break;
    }
    bool bad = ferror(f);
    fclose(f);
    if (bad) {
        free(buf);
        return cw_diag_set(d, CW_EIO, "cannot read %s", path);
    }
    buf[len] = '\0';
    *out = buf;
    return 0;
}

/* `heap diff`: the report from a file or a database, diffed. */
static int cmd_diff(int argc, char **argv)
{
    heap_args_t a = {0};
    const char *file = argc > 1 && argv[1][0] != '-' ? argv[1] : NULL;
    if (cw_cli_parse("heap diff", file ? argc - 1 : argc, file ? argv + 1 : argv, diff_opts, &a,
                     usage_text) != 0)
        return 2;
    uint32_t top = 20, trace = 0;
    if (a.top && !whole(a.top, UINT32_MAX, &top)) {
        fprintf(stderr, "commitwatch heap diff: --top takes a whole number > 0, not '%s'\n", a.top);
        return 2;
    }
    if (!file == !(a.db && a.trace) || (a.trace && !whole(a.trace, INT32_MAX, &trace))) {
        fprintf(stderr, "commitwatch heap diff: give a report saved with `heap --json`, or "
                        "--db FILE --trace ID\n");
        return 2;
    }
    cw_diag_t d = {{0}};
    char *text = NULL;
    int rc = 0;
    if (file) {
        rc = read_all(file, &text, &d);
    } else {
        cw_store_t *s = NULL;
        cw_heap_trace_row_t row = {0};
        rc = cw_store_open_readonly(a.db, &s, &d);
        if (!rc) rc = cw_store_heap_get(s, trace, &row, &d);
        if (!rc && !row.report)
            rc = cw_diag_set(&d, CW_ENOENT, "heap trace %u has no report (%s: %s)", trace,
                             row.state ? row.state : "?", row.error ? row.error : "");
        text = rc ? NULL : row.report;
        row.report = NULL;
        cw_heap_trace_row_clear(&row);
        cw_store_close(s);
    }
    if (rc) return cw_cli_exit("heap diff", rc, &d);
    /* By default, from the first snapshot (or the start) to the end. */
    const char *pa = a.a ? a.a : strstr(text, "\"snapshots\":[{") ? "1" : "start";
    char *diff = NULL;
    rc = cw_heap_diff_json(text, pa, a.b ? a.b : "end", &diff, &d);
    free(text);
    if (rc) return cw_cli_exit("heap diff", rc, &d);
    if (a.json) return cw_cli_put_json("heap diff", diff);
    rc = cw_heap_diff_print(diff, top, stdout);
    free(diff);
    return rc ? 1 : 0;
}

int cw_cmd_heap(int argc, char **argv)
{
    if (argc > 1 && strcmp(argv[1], "diff") == 0) {
        if (cw_cli_wants_help(argc - 1, argv + 1)) {
            fputs(usage_text, stdout);
            return 0;
        }
        return cmd_diff(argc - 1, argv + 1);
    }
    /* Options end at "--"; the program and its arguments follow. */
    int sep = 1;
    while (sep < argc && strcmp(argv[sep], "--") != 0)
        sep++;
    if (cw_cli_wants_help(sep, argv)) {
        fputs(usage_text, stdout);
        return 0;
    }
    heap_args_t a = {0};
    if (cw_cli_parse("heap", sep, argv, opts, &a, usage_text) != 0) return 2;
    uint32_t pid = 0, top = 20;
    if (a.pid && !whole(a.pid, INT32_MAX, &pid)) {
        fprintf(stderr, "commitwatch heap: --pid takes a process ID, not '%s'\n", a.pid);
        return 2;
    }
    if (a.top && !whole(a.top, UINT32_MAX, &top)) {
        fprintf(stderr, "commitwatch heap: --top takes a whole number > 0, not '%s'\n", a.top);
        return 2;
    }
    if (a.images && !a.etl) {
        fprintf(stderr,
                "commitwatch heap: --images names the frames of an .etl: give --etl FILE\n");
        return 2;
    }
    if (a.etl) {
        if (sep < argc || a.duration || a.snapshot || a.db) {
            fprintf(stderr, "commitwatch heap: --etl reads a recorded trace: give no PROGRAM and "
                            "no --duration, --snapshot or --db\n");
            return 2;
        }
        return heap_etl(&a, pid, top);
    }
    if (pid) {
        if (sep < argc) {
            fprintf(stderr, "commitwatch heap: --pid traces a running process: give no PROGRAM\n");
            return 2;
        }
    } else if (sep + 1 >= argc) {
        fprintf(stderr, "commitwatch heap: no program: give it after --, or --pid PID\n\n%s",
                usage_text);
        return 2;
    }
    int64_t duration = 0, every = 0;
    if (a.snapshot && (cw_parse_duration(a.snapshot, &every) != 0 || every <= 0)) {
        fprintf(stderr,
                "commitwatch heap: --snapshot takes a positive duration such as 30s, not '%s'\n",
                a.snapshot);
        return 2;
    }
    if (a.duration && (cw_parse_duration(a.duration, &duration) != 0 || duration <= 0)) {
        fprintf(stderr,
                "commitwatch heap: --duration takes a positive duration such as 90s, 5m or "
                "1h, not '%s'\n",
                a.duration);
        return 2;
    }

    cw_diag_t d = {{0}};
    cw_stacks_t *stacks = NULL;
    cw_heap_model_t *m = NULL;
    cw_heap_report_t *r = NULL;
    cw_heap_launch_result_t res;
    int rc = cw_stacks_create(&stacks);
    if (!rc) rc = cw_heap_model_create(cw_plat_wall_ns(), &m);
    if (rc) goto out;
    cw_heap_launch_args_t la = {.argv = pid ? NULL : argv + sep + 1,
                                .pid = pid,
                                .duration_ns = duration,
                                .snapshot_every_ns = every,
                                .snapshot_now = &snap_asked};
    cw_plat_catch_stop(cw_heap_launch_stop, ask_snapshot);
    rc = cw_heap_launch(&la, stacks, m, &res, &d);
    cw_plat_catch_stop(NULL, NULL);
    if (rc) goto out;
    char what[32];
    snprintf(what, sizeof what, "process %u", pid);
    say_end(&res, pid ? what : argv[sep + 1]);
    rc = cw_heap_model_report(m, stacks, &res.losses, &r);
    if (rc) goto out;
    if (r->capped)
        fprintf(stderr,
                "commitwatch heap: %llu allocations were counted but not held: the report holds "
                "at most %u live blocks (its figures miss them; their frees count as unknown)\n",
                (unsigned long long)r->capped, CW_HEAP_DEFAULT_MAX_BLOCKS);
    rc = print_report(&a, r, top);
    if (a.db && store_trace(a.db, r, &res, duration) != 0 && rc == 0) rc = 1;
    cw_heap_report_free(r);
    cw_heap_model_destroy(m);
    cw_stacks_destroy(stacks);
    return rc;
out:
    cw_heap_model_destroy(m);
    cw_stacks_destroy(stacks);
    return cw_cli_exit("heap", rc, &d);
}
