/* fuzz_trace.c - libFuzzer target for the JSONL trace reader
 * (service/analysis/trace.c) as the replay source reads it
 * (service/sources/replay/replay.c, `--source replay:PATH`): the input is
 * a whole trace file, written to a temporary file in /dev/shm (the reader reads
 * files). Every event the source delivers goes through the tracker into
 * the exact window analyzer (what `analyze --source replay:` runs: its
 * report as JSON and as the table) and into the trace writer. The file
 * may be refused (CW_EPARSE, CW_ETIME with a message naming the line),
 * never crash, hang or leak; the events must be in time order and in
 * range (ranged ops: 0 < size, no wrap, a commit's end <= 2^63 - 1;
 * process_start: a name). When the whole file was read, what the writer
 * wrote must read back as the same events. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "commitwatch/analysis.h"
#include "commitwatch/log.h"
#include "commitwatch/source.h"
#include "commitwatch/trace.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define CHECK(c)                                                                                   \
    do {                                                                                           \
        if (!(c)) {                                                                                \
            fprintf(stderr, "fuzz_trace: invariant failed: %s:%d: %s\n", __FILE__, __LINE__, #c); \
            abort();                                                                               \
        }                                                                                          \
    } while (0)

static char in_path[64], out_path[64];

typedef struct sink_state {
    cw_stacks_t *stacks;
    cw_tracker_t *tracker;
    cw_trace_writer_t *writer;
    uint64_t n;
    int64_t last;
} sink_state_t;

static void check_event(const cw_event_t *ev)
{
    CHECK(ev->op < CW_OP__COUNT);
    CHECK(ev->ts >= 0);
    if (ev->op <= CW_OP_RELEASE) {
        CHECK(cw_range_ok(ev->addr, ev->size) && ev->size <= (uint64_t)INT64_MAX);
        CHECK(ev->op != CW_OP_COMMIT || cw_commit_ok(ev->addr, ev->size)); /* by 2^63 - 1 */
    }
    if (ev->op == CW_OP_PROCESS_START) CHECK(ev->name != NULL);
    if (ev->rundown) CHECK(ev->op == CW_OP_COMMIT);
}

static int on_event(void *ctx, const cw_event_t *ev)
{
    sink_state_t *s = ctx;
    check_event(ev);
    CHECK(s->n == 0 || ev->ts >= s->last);
    if (ev->stack_id) {
        uint32_t n = 0;
        const uint32_t *f = cw_stacks_frames(s->stacks, ev->stack_id, &n);
        CHECK(f != NULL || n == 0);
        for (uint32_t i = 0; i < n; i++) {
            const char *t = cw_stacks_frame_text(s->stacks, f[i]);
            CHECK(t != NULL && t[0] != '\0');
        }
    }
    s->last = ev->ts;
    s->n++;
    if (cw_tracker_apply(s->tracker, ev) != 0) return CW_ENOMEM;
    return cw_trace_writer_write(s->writer, ev);
}

/* Two stacks equal by their frames' text (ids differ between tables). */
static void check_same_stack(cw_stacks_t *a, uint32_t ida, cw_stacks_t *b, uint32_t idb)
{
    CHECK((ida == 0) == (idb == 0));
    if (!ida) return;
    uint32_t na = 0, nb = 0;
    const uint32_t *fa = cw_stacks_frames(a, ida, &na), *fb = cw_stacks_frames(b, idb, &nb);
    CHECK(na == nb);
    for (uint32_t i = 0; i < na; i++)
        CHECK(strcmp(cw_stacks_frame_text(a, fa[i]), cw_stacks_frame_text(b, fb[i])) == 0);
}

static bool same_str(const char *a, const char *b)
{
    return (!a && !b) || (a && b && strcmp(a, b) == 0);
}

/* The written trace read back: the same n events as a second reading of
 * the input (both readers in step). */
static void check_round_trip(uint64_t n)
{
    cw_stacks_t *sa = NULL, *sb = NULL;
    cw_trace_reader_t *ra = NULL, *rb = NULL;
    cw_diag_t d;
    CHECK(cw_stacks_create(&sa) == 0 && cw_stacks_create(&sb) == 0);
    CHECK(cw_trace_reader_open(in_path, sa, &ra, &d) == 0);
    CHECK(cw_trace_reader_open(out_path, sb, &rb, &d) == 0);
    for (uint64_t i = 0;; i++) {
        cw_event_t a, b;
        int ka = cw_trace_reader_next(ra, &a, &d);
        int kb = cw_trace_reader_next(rb, &b, &d);
        CHECK(ka == kb);
        CHECK(ka >= 0);
        if (ka == 0) {
            CHECK(i == n);
            break;
        }
        CHECK(a.ts == b.ts && a.op == b.op && a.pid == b.pid && a.tid == b.tid);
        CHECK(a.rundown == b.rundown);
        if (a.op <= CW_OP_RELEASE) CHECK(a.addr == b.addr && a.size == b.size);
        if (a.op == CW_OP_PROCESS_START)
            CHECK(same_str(a.name, b.name) && same_str(a.cmdline, b.cmdline));
        check_same_stack(sa, a.stack_id, sb, b.stack_id);
    }
    cw_trace_reader_close(ra);
    cw_trace_reader_close(rb);
    cw_stacks_destroy(sa);
    cw_stacks_destroy(sb);
}

static void remove_files(void)
{
    remove(in_path);
    remove(out_path);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (!in_path[0]) {
        /* In memory (tmpfs) where there is one: on a disk, the files'
         * writes waited behind other programs' writeback (most of the
         * wall time on a busy machine). */
        const char *tmp = access("/dev/shm", W_OK) == 0 ? "/dev/shm" : "/tmp";
        snprintf(in_path, sizeof in_path, "%s/fuzz_trace.%ld.jsonl", tmp, (long)getpid());
        snprintf(out_path, sizeof out_path, "%s/fuzz_trace.%ld.out.jsonl", tmp, (long)getpid());
        atexit(remove_files);
        cw_log_set_level(CW_LOG_ERROR);
    }
    FILE *f = fopen(in_path, "wb");
    if (!f) return 0;
    fwrite(data, 1, size, f);
    fclose(f);

    sink_state_t st = {0};
    cw_analysis_t *an = NULL;
    cw_tagger_t *tagger = NULL;
    cw_diag_t d = {{0}};
    if (cw_stacks_create(&st.stacks) || cw_analysis_create(0, INT64_MAX, &an) ||
        cw_tagger_create_builtin(&tagger))
        abort();
    cw_tracker_sink_t ts = cw_analysis_sink(an);
    if (cw_tracker_create(&ts, 1, &st.tracker)) abort();

    cw_source_opts_t so = {.arg = in_path, .stacks = st.stacks};
    void *src = NULL;
    int rc = cw_source_replay.open(&src, &so, &d);
    if (rc == 0) {
        cw_trace_header_t h = {.pointer_size = 8};
        snprintf(h.platform, sizeof h.platform, "%s", cw_source_replay.platform(src));
        CHECK(cw_trace_writer_open(out_path, &h, st.stacks, &st.writer, &d) == 0);
        cw_source_sink_t sink = {&st, on_event, NULL, NULL, NULL, NULL};
        rc = cw_source_replay.run(src, &sink, &d);
        CHECK(rc == 0 || rc == CW_EPARSE || rc == CW_ETIME);
        if (rc) CHECK(d.msg[0] != '\0' && strstr(d.msg, in_path) == d.msg);
        CHECK(cw_trace_writer_close(st.writer, &d) == 0);
        cw_source_replay.close(src);
        if (rc == 0) {
            /* As `run` ends a replay (every instance ended) or as
             * `analyze` does (what is still committed stays live). */
            if (st.n && (data[size - 1] & 1)) cw_tracker_end_all(st.tracker, st.last);
            cw_tracker_finish(st.tracker);
            cw_report_t *r = NULL;
            CHECK(cw_analysis_report(an, st.stacks, tagger, true, &r) == 0);
            char *json = cw_report_json(r, true), *table = NULL;
            CHECK(json != NULL);
            free(json);
            size_t tlen = 0;
            FILE *tf = open_memstream(&table, &tlen);
            if (tf) {
                CHECK(cw_report_print_table(r, true, tf) == 0);
                fclose(tf);
            }
            free(table);
            cw_report_free(r);
            check_round_trip(st.n);
        }
    } else {
        CHECK(rc == CW_EPARSE && d.msg[0] != '\0');
    }
    cw_tracker_destroy(st.tracker);
    cw_analysis_destroy(an);
    cw_tagger_destroy(tagger);
    cw_stacks_destroy(st.stacks);
    return 0;
}
