/* cmd_etl.c - `commitwatch etl info FILE [--json] [--images]`: what a
 * Windows event trace (.etl) holds, read on any OS (cw_etl_info(),
 * service/sources/etl/): its header, event counts per kernel class and
 * type, the processes, the stacks, and whether `--source etl:FILE` can
 * get commit figures out of it (with the command that records a trace
 * that can, when it cannot). */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "cli/cli.h"
#include "commitwatch/etl.h"

static const char usage_text[] =
    "usage: commitwatch etl info FILE [--json] [--images]\n\n"
    "Reads a Windows event trace (.etl, as WPR, xperf or UIforETW write it) and\n"
    "prints its header (OS build, pointer size, CPUs, clock, start and end, events\n"
    "and buffers lost), the events per kernel class and type (and how many got a\n"
    "stack), the processes with their lifetimes, and whether the VirtualAlloc\n"
    "events `--source etl:FILE` needs, and their stacks, are in it.\n\n"
    "  --json     print one JSON object instead of text\n"
    "  --images   also list every image (module) loaded, with its range\n"
    "Exit status: 0 read, 1 the file is unreadable or not an .etl file, 2 usage error.\n";

/* What to record when a trace lacks VirtualAlloc events or their stacks. */
static const char hint_wpr[] = "wpr -start VirtualAllocation -filemode && (run the workload) && "
                               "wpr -stop trace.etl";
static const char hint_xperf[] =
    "xperf -on PROC_THREAD+LOADER+VIRT_ALLOC -stackwalk VirtualAlloc+VirtualFree "
    "-buffersize 1024 -minbuffers 256 && (run the workload) && xperf -d trace.etl";

typedef struct etl_args {
    bool json, images;
} etl_args_t;

#define F(f) offsetof(etl_args_t, f)
static const cw_cli_opt_t opts[] = {
    {"--json", CW_CLI_FLAG, F(json), 0, NULL},
    {"--images", CW_CLI_FLAG, F(images), 0, NULL},
    {NULL, CW_CLI_FLAG, 0, 0, NULL},
};
#undef F

/* Unix ns as "YYYY-MM-DDTHH:MM:SS.nnnnnnnnnZ" (proleptic Gregorian, UTC). */
static const char *utc(int64_t ns, char buf[CW_UTC_TEXT])
{
    if (ns == CW_TS_NEVER) return "-";
    return cw_utc_text(ns, 9, buf);
}

static const char *clock_name(uint32_t c)
{
    switch (c) {
    case 0:
    case 1:
        return "QPC";
    case 2:
        return "system time";
    case 3:
        return "CPU cycle counter";
    default:
        return "unknown";
    }
}

static const char *type_label(const cw_etl_count_t *c, char buf[16])
{
    const char *t = cw_etl_type_name(c->group, c->type);
    if (t) return t;
    snprintf(buf, 16, "Type%u", c->type);
    return buf;
}

/* True when the trace can give commit figures with stacks. */
static bool usable(const cw_etl_info_t *in)
{
    return in->valloc_events > 0 && in->valloc_with_stack > 0;
}

static const char *verdict(const cw_etl_info_t *in)
{
    if (usable(in)) return "VirtualAlloc events with stacks: usable with --source etl:FILE";
    if (in->valloc_events)
        return "VirtualAlloc events but no stacks for them: --source etl:FILE gives figures, "
               "every commit untagged";
    return "no VirtualAlloc events: --source etl:FILE gives processes but no commit figures";
}

static void print_text(const char *path, const cw_etl_info_t *in)
{
    const cw_etl_header_t *h = &in->header;
    const cw_etl_file_stats_t *f = &in->file;
    char t1[96], t2[96], cls[16], tb[16];
    printf("file:        %s\n", path);
    printf("system:      Windows %u.%u build %u, pointer size %u, %u CPUs at %u MHz\n", h->os_major,
           h->os_minor, h->build, h->pointer_size, h->ncpu, h->cpu_mhz);
    printf("clock:       %s (type %u), %" PRId64 " ticks/s, timer resolution %u x 100 ns\n",
           clock_name(h->clock_type), h->clock_type, h->perf_freq, h->timer_resolution);
    printf("trace:       %s to %s (header)\n", utc(h->start_ns, t1), utc(h->end_ns, t2));
    printf("events:      %" PRIu64 ", %s to %s\n", f->events, utc(in->first_ns, t1),
           utc(in->last_ns, t2));
    printf("logger:      %s%s%s\n", h->logger_name[0] ? h->logger_name : "-",
           h->log_file_name[0] ? ", file " : "", h->log_file_name);
    printf("buffers:     %" PRIu64 " (%" PRIu64 " compressed, %" PRIu64 " unreadable%s), %u "
           "written, buffer size %u, log file mode 0x%08x\n",
           f->buffers, f->buffers_compressed, f->buffers_corrupt,
           f->truncated ? ", the file is truncated" : "", h->buffers_written, h->buffer_size,
           h->log_file_mode);
    printf("lost:        %u events, %u buffers (header); %" PRIu64 " buffers flagged\n",
           h->events_lost, h->buffers_lost, f->buffers_lost_flag);
    printf("\nkernel events (class/type version: events, with stack%s):\n",
           in->skipped ? ", skipped" : "");
    for (size_t i = 0; i < in->ncounts; i++) {
        const cw_etl_count_t *c = &in->counts[i];
        printf("  %-12s %-16s v%-2u %10" PRIu64 " %10" PRIu64,
               cw_etl_class_name(c->group, c->type, cls), type_label(c, tb), c->version, c->events,
               c->with_stack);
        if (c->skipped)
            printf("  %" PRIu64 " skipped (%s)", c->skipped,
                   c->skip_reason == CW_ENOSYS ? "unknown version" : "malformed payload");
        putchar('\n');
    }
    printf("other providers: %" PRIu64 " events of %" PRIu64 " providers (%" PRIu64
           " with a kernel stack)\n",
           in->provider_events, in->providers, in->provider_with_stack);
    printf("\nstacks: %" PRIu64 " StackWalk, %" PRIu64 " key references, %" PRIu64
           " key definitions; %" PRIu64 " joined, %" PRIu64 " shared user parts, %" PRIu64
           " without their event, %" PRIu64 " keys unresolved; %" PRIu64 " frames, %" PRIu64
           " in known images\n",
           in->stacks.walks, in->stacks.key_refs, in->stacks.key_defs, in->stacks.joined,
           in->stacks.shared, in->stacks.orphaned, in->stacks.unresolved, in->stacks.frames,
           in->stacks.frames_in_modules);
    printf("\nprocesses: %zu (%" PRIu64 " images, %" PRIu64 " threads seen)\n", in->nprocs,
           in->images_seen, in->threads_seen);
    printf("  %8s %8s  %-30s %-30s %s\n", "pid", "ppid", "start", "end", "name");
    for (size_t i = 0; i < in->nprocs; i++) {
        const cw_etl_proc_info_t *p = &in->procs[i];
        printf("  %8u %8u  %-30s %-30s %s\n", p->pid, p->ppid,
               p->rundown ? "(running at start)" : utc(p->start_ns, t1), utc(p->end_ns, t2),
               p->name);
    }
    if (in->nimages) {
        printf("\nimages: %zu\n", in->nimages);
        for (size_t i = 0; i < in->nimages; i++) {
            const cw_etl_image_info_t *m = &in->images[i];
            printf("  %8u 0x%016" PRIx64 "-0x%016" PRIx64 " %s\n", m->pid, m->base,
                   m->base + m->size, m->name);
        }
    }
    printf("\nVirtualAlloc: %" PRIu64 " events, VirtualFree: %" PRIu64 " events, %" PRIu64
           " of them with a stack\n%s\n",
           in->valloc_events, in->vfree_events, in->valloc_with_stack, verdict(in));
    if (!usable(in))
        printf("To record a trace with them, as administrator:\n  %s\nor\n  %s\n", hint_wpr,
               hint_xperf);
}

/* 64-bit integers as raw JSON numbers: cJSON's doubles would round them. */
static cJSON *num(cJSON *o, const char *k, long long v)
{
    char b[32];
    snprintf(b, sizeof b, "%lld", v);
    return cJSON_AddRawToObject(o, k, b);
}

static cJSON *unum(cJSON *o, const char *k, uint64_t v)
{
    char b[32];
    snprintf(b, sizeof b, "%" PRIu64, v);
    return cJSON_AddRawToObject(o, k, b);
}

static void time_field(cJSON *o, const char *k, int64_t ns)
{
    if (ns == CW_TS_NEVER)
        cJSON_AddNullToObject(o, k);
    else
        num(o, k, ns);
}

/* One key a line, the document's schema as it reads: its blocks are alike in form only. */
static char *to_json(const char *path, const cw_etl_info_t *in)
{
    const cw_etl_header_t *h = &in->header;
    const cw_etl_file_stats_t *f = &in->file;
    char cls[16], tb[16];
    cJSON *o = cJSON_CreateObject();
    if (!o) return NULL;
    cJSON_AddStringToObject(o, "file", path);
    cJSON *hj = cJSON_AddObjectToObject(o, "header");
    if (hj) {
        char os[32];
        snprintf(os, sizeof os, "%u.%u", h->os_major, h->os_minor);
        cJSON_AddStringToObject(hj, "os_version", os);
        unum(hj, "os_build", h->build);
        unum(hj, "pointer_size", h->pointer_size);
        unum(hj, "cpus", h->ncpu);
        unum(hj, "cpu_mhz", h->cpu_mhz);
        unum(hj, "clock_type", h->clock_type);
        cJSON_AddStringToObject(hj, "clock", clock_name(h->clock_type));
        num(hj, "ticks_per_second", h->perf_freq);
        unum(hj, "timer_resolution", h->timer_resolution);
        num(hj, "boot_ns", h->boot_ns);
        num(hj, "start_ns", h->start_ns);
        num(hj, "end_ns", h->end_ns);
        unum(hj, "log_file_mode", h->log_file_mode);
        cJSON_AddBoolToObject(hj, "compressed", h->compressed);
        unum(hj, "buffer_size", h->buffer_size);
        unum(hj, "buffers_written", h->buffers_written);
        unum(hj, "buffers_lost", h->buffers_lost);
        unum(hj, "events_lost", h->events_lost);
        cJSON_AddStringToObject(hj, "logger_name", h->logger_name);
        cJSON_AddStringToObject(hj, "log_file_name", h->log_file_name);
    }
    cJSON *fj = cJSON_AddObjectToObject(o, "file_stats");
    if (fj) {
        unum(fj, "buffers", f->buffers);
        unum(fj, "buffers_compressed", f->buffers_compressed);
        unum(fj, "buffers_unreadable", f->buffers_corrupt);
        unum(fj, "buffers_lost_flag", f->buffers_lost_flag);
        unum(fj, "bytes", f->bytes);
        unum(fj, "events", f->events);
        unum(fj, "messages", f->messages);
        unum(fj, "reordered", f->reordered);
        cJSON_AddBoolToObject(fj, "truncated", f->truncated);
    }
    num(o, "first_ns", in->first_ns);
    num(o, "last_ns", in->last_ns);
    cJSON *cj = cJSON_AddArrayToObject(o, "kernel_events");
    for (size_t i = 0; cj && i < in->ncounts; i++) {
        const cw_etl_count_t *c = &in->counts[i];
        cJSON *e = cJSON_CreateObject();
        if (!e) break;
        cJSON_AddItemToArray(cj, e);
        cJSON_AddStringToObject(e, "class", cw_etl_class_name(c->group, c->type, cls));
        cJSON_AddStringToObject(e, "type", type_label(c, tb));
        unum(e, "group", c->group);
        unum(e, "opcode", c->type);
        unum(e, "version", c->version);
        unum(e, "events", c->events);
        unum(e, "with_stack", c->with_stack);
        unum(e, "skipped", c->skipped);
    }
    cJSON *pv = cJSON_AddObjectToObject(o, "providers");
    if (pv) {
        unum(pv, "events", in->provider_events);
        unum(pv, "providers", in->providers);
        unum(pv, "with_stack", in->provider_with_stack);
    }
    cJSON *sj = cJSON_AddObjectToObject(o, "stacks");
    if (sj) {
        unum(sj, "stackwalk", in->stacks.walks);
        unum(sj, "key_references", in->stacks.key_refs);
        unum(sj, "key_definitions", in->stacks.key_defs);
        unum(sj, "joined", in->stacks.joined);
        unum(sj, "shared", in->stacks.shared);
        unum(sj, "orphaned", in->stacks.orphaned);
        unum(sj, "unresolved", in->stacks.unresolved);
        unum(sj, "frames", in->stacks.frames);
        unum(sj, "frames_in_images", in->stacks.frames_in_modules);
    }
    unum(o, "images_seen", in->images_seen);
    unum(o, "threads_seen", in->threads_seen);
    unum(o, "skipped", in->skipped);
    cJSON *pj = cJSON_AddArrayToObject(o, "processes");
    for (size_t i = 0; pj && i < in->nprocs; i++) {
        const cw_etl_proc_info_t *p = &in->procs[i];
        cJSON *e = cJSON_CreateObject();
        if (!e) break;
        cJSON_AddItemToArray(pj, e);
        unum(e, "pid", p->pid);
        unum(e, "ppid", p->ppid);
        cJSON_AddStringToObject(e, "name", p->name);
        if (p->cmdline)
            cJSON_AddStringToObject(e, "cmdline", p->cmdline);
        else
            cJSON_AddNullToObject(e, "cmdline");
        num(e, "start_ns", p->start_ns);
        time_field(e, "end_ns", p->end_ns);
        cJSON_AddBoolToObject(e, "rundown", p->rundown);
    }
    if (in->nimages) {
        cJSON *ij = cJSON_AddArrayToObject(o, "images");
        for (size_t i = 0; ij && i < in->nimages; i++) {
            const cw_etl_image_info_t *m = &in->images[i];
            cJSON *e = cJSON_CreateObject();
            if (!e) break;
            cJSON_AddItemToArray(ij, e);
            unum(e, "pid", m->pid);
            unum(e, "base", m->base);
            unum(e, "size", m->size);
            cJSON_AddStringToObject(e, "name", m->name);
            num(e, "load_ns", m->load_ns);
            time_field(e, "unload_ns", m->unload_ns);
            cJSON_AddBoolToObject(e, "rundown", m->rundown);
        }
    }
    cJSON *vj = cJSON_AddObjectToObject(o, "virtual_alloc");
    if (vj) {
        unum(vj, "alloc_events", in->valloc_events);
        unum(vj, "free_events", in->vfree_events);
        unum(vj, "with_stack", in->valloc_with_stack);
        cJSON_AddBoolToObject(vj, "usable", usable(in));
        cJSON_AddStringToObject(vj, "verdict", verdict(in));
        if (!usable(in)) {
            cJSON *r = cJSON_AddArrayToObject(vj, "record_with");
            if (r) {
                cJSON_AddItemToArray(r, cJSON_CreateString(hint_wpr));
                cJSON_AddItemToArray(r, cJSON_CreateString(hint_xperf));
            }
        }
    }
    char *s = cJSON_PrintUnformatted(o);
    cJSON_Delete(o);
    return s;
}

int cw_cmd_etl(int argc, char **argv)
{
    if (argc < 2 || strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0) {
        fputs(usage_text, argc < 2 ? stderr : stdout);
        return argc < 2 ? 2 : 0;
    }
    if (strcmp(argv[1], "info") != 0) {
        fprintf(stderr, "commitwatch etl: unknown subcommand '%s'\n\n%s", argv[1], usage_text);
        return 2;
    }
    argc--;
    argv++;
    if (cw_cli_wants_help(argc, argv)) {
        fputs(usage_text, stdout);
        return 0;
    }
    /* The file is the one argument that is not an option. */
    const char *path = NULL;
    char **rest = calloc((size_t)argc + 1, sizeof *rest);
    int nrest = 1;
    if (!rest) return 1;
    rest[0] = argv[0];
    for (int i = 1; i < argc; i++) {
        if (argv[i][0] != '-' && !path)
            path = argv[i];
        else
            rest[nrest++] = argv[i];
    }
    etl_args_t a = {0};
    int rc = cw_cli_parse("etl info", nrest, rest, opts, &a, usage_text);
    free(rest);
    if (rc) return 2;
    if (!path) {
        fprintf(stderr, "commitwatch etl info: give the .etl file to read\n\n%s", usage_text);
        return 2;
    }
    cw_etl_info_t *in = NULL;
    cw_diag_t d = {{0}};
    if ((rc = cw_etl_info(path, a.images, &in, &d)) != 0) {
        fprintf(stderr, "commitwatch etl info: %s\n", d.msg[0] ? d.msg : cw_strerror(rc));
        return 1;
    }
    if (a.json)
        rc = cw_cli_put_json("etl info", to_json(path, in));
    else
        print_text(path, in);
    cw_etl_info_free(in);
    return rc == 0 && fflush(stdout) == 0 ? 0 : 1;
}
