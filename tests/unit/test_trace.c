/* test_trace.c - the JSONL v1 reader and writer: round trip with exact
 * 64-bit integers, streaming of long lines, and one error per kind of
 * bad line, each naming file and line. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "commitwatch/trace.h"
#include "test.h"
#include "test_port.h"

static const char *tmp_path(const char *name)
{
    static char buf[256];
    snprintf(buf, sizeof buf, "%s/cw_test_trace_%d_%s", cw_test_tmpdir(), cw_test_getpid(), name);
    return buf;
}

static void write_file(const char *path, const char *text)
{
    FILE *f = fopen(path, "wb");
    ASSERT_TRUE(f != NULL);
    fputs(text, f);
    fclose(f);
}

#define HDR "{\"format\":\"commitwatch-trace\",\"version\":1,\"platform\":\"windows\",\"pointer_size\":8}\n"

/* Reads path to the end; returns the first error (and its message) or 0. */
static int read_all(const char *path, cw_diag_t *d, int *events)
{
    cw_stacks_t *s;
    cw_trace_reader_t *r;
    cw_event_t ev;
    int rc;
    *events = 0;
    ASSERT_OK(cw_stacks_create(&s));
    rc = cw_trace_reader_open(path, s, &r, d);
    if (rc == 0) {
        while ((rc = cw_trace_reader_next(r, &ev, d)) == 1) (*events)++;
        cw_trace_reader_close(r);
    }
    cw_stacks_destroy(s);
    return rc;
}

static void expect_error(const char *name, const char *text, int err, const char *needle)
{
    const char *path = tmp_path(name);
    cw_diag_t d = {{0}};
    int n;
    write_file(path, text);
    int rc = read_all(path, &d, &n);
    if (rc != err || !strstr(d.msg, needle) || !strstr(d.msg, path))
        CW_FAIL("%s: rc %d (want %d), message \"%s\" (want \"%s\" and the path)", name, rc, err, d.msg, needle);
    remove(path);
}

int main(void)
{
    /* Round trip: reader -> writer -> reader gives the same events. */
    const char *in = tmp_path("in.jsonl"), *out = tmp_path("out.jsonl");
    write_file(in, HDR
               "{\"ts\":1790000000123456789,\"op\":\"process_start\",\"pid\":4294967295,\"name\":\"a \\\"quoted\\\" name\",\"cmdline\":\"x.exe -v\"}\n"
               "{\"ts\":1790000000123456789,\"op\":\"commit\",\"pid\":4294967295,\"tid\":9,\"addr\":\"0x7f00000000001000\",\"size\":9007199254740993,\"stack\":[\"m!main\",\"m!f\\u00e9\"]}\n"
               "{\"ts\":1790000000123456790,\"op\":\"reserve\",\"pid\":1,\"addr\":4096,\"size\":4096}\r\n"
               "{\"ts\":1790000000123456791,\"op\":\"commit\",\"pid\":1,\"addr\":4096,\"size\":4096,\"rundown\":true,\"stack\":[\"(before trace)\"]}\n"
               "{\"ts\":1790000000123456792,\"op\":\"process_exit\",\"pid\":1}");
    cw_stacks_t *s;
    cw_trace_reader_t *r;
    cw_trace_writer_t *w;
    cw_diag_t d = {{0}};
    cw_event_t ev;
    ASSERT_OK(cw_stacks_create(&s));
    ASSERT_OK(cw_trace_reader_open(in, s, &r, &d));
    ASSERT_STR_EQ(cw_trace_reader_header(r)->platform, "windows");
    ASSERT_U64_EQ(cw_trace_reader_header(r)->commit_limit, 0); /* not given */
    ASSERT_OK(cw_trace_writer_open(out, cw_trace_reader_header(r), s, &w, &d));
    int n = 0;
    while (cw_trace_reader_next(r, &ev, &d) == 1) {
        if (n == 0) {
            ASSERT_EQ(ev.op, CW_OP_PROCESS_START);
            ASSERT_U64_EQ(ev.ts, 1790000000123456789ULL);
            ASSERT_U64_EQ(ev.pid, 4294967295ULL);
            ASSERT_STR_EQ(ev.name, "a \"quoted\" name");
        } else if (n == 1) {
            ASSERT_U64_EQ(ev.addr, 0x7f00000000001000ULL);
            ASSERT_U64_EQ(ev.size, 9007199254740993ULL); /* 2^53 + 1: not a double */
            ASSERT_EQ(ev.tid, 9);
            uint32_t nf;
            const uint32_t *f = cw_stacks_frames(s, ev.stack_id, &nf);
            ASSERT_EQ(nf, 2);
            ASSERT_STR_EQ(cw_stacks_frame_text(s, f[1]), "m!f\xc3\xa9");
        } else if (n == 3) {
            ASSERT_TRUE(ev.rundown);
        }
        ASSERT_OK(cw_trace_writer_write(w, &ev));
        n++;
    }
    ASSERT_EQ(n, 5);
    ASSERT_EQ(cw_trace_reader_line(r), 6);
    cw_trace_reader_close(r);
    ASSERT_OK(cw_trace_writer_close(w, &d));
    int n2;
    ASSERT_OK(read_all(out, &d, &n2));
    ASSERT_EQ(n2, 5);
    /* The rewritten file reads back to the same values. */
    ASSERT_OK(cw_trace_reader_open(out, s, &r, &d));
    ASSERT_EQ(cw_trace_reader_next(r, &ev, &d), 1);
    ASSERT_EQ(cw_trace_reader_next(r, &ev, &d), 1);
    ASSERT_U64_EQ(ev.size, 9007199254740993ULL);
    ASSERT_U64_EQ(ev.ts, 1790000000123456789ULL);
    cw_trace_reader_close(r);
    /* The header's commit_limit (the recorded machine's) reads, and is
     * written back exactly (above 2^53: no double on the way). */
    write_file(in, "{\"format\":\"commitwatch-trace\",\"version\":1,\"platform\":\"linux\","
                   "\"commit_limit\":9007199254740993}\n");
    ASSERT_OK(cw_trace_reader_open(in, s, &r, &d));
    ASSERT_U64_EQ(cw_trace_reader_header(r)->commit_limit, 9007199254740993ULL);
    ASSERT_OK(cw_trace_writer_open(out, cw_trace_reader_header(r), s, &w, &d));
    cw_trace_reader_close(r);
    ASSERT_OK(cw_trace_writer_close(w, &d));
    ASSERT_OK(cw_trace_reader_open(out, s, &r, &d));
    ASSERT_U64_EQ(cw_trace_reader_header(r)->commit_limit, 9007199254740993ULL);
    cw_trace_reader_close(r);
    cw_stacks_destroy(s);
    remove(in);
    remove(out);

    /* A line longer than the read buffer (1 MiB) streams fine. */
    size_t big = 3 << 20;
    char *text = malloc(big + 4096);
    ASSERT_TRUE(text != NULL);
    char *p = text + sprintf(text, HDR "{\"ts\":1,\"op\":\"commit\",\"pid\":1,\"addr\":4096,\"size\":4096,\"stack\":[\"");
    memset(p, 'x', big);
    strcpy(p + big, "\"]}\n{\"ts\":2,\"op\":\"decommit\",\"pid\":1,\"addr\":4096,\"size\":4096}\n");
    write_file(tmp_path("big"), text);
    free(text);
    ASSERT_OK(read_all(tmp_path("big"), &d, &n));
    ASSERT_EQ(n, 2);
    remove(tmp_path("big"));

    /* Every kind of bad input: its own message, with file and line. */
    expect_error("empty", "", CW_EPARSE, "empty file");
    expect_error("limit0", "{\"format\":\"commitwatch-trace\",\"version\":1,\"commit_limit\":0}\n",
                 CW_EPARSE, "\"commit_limit\" must be a byte count above 0");
    expect_error("limitf", "{\"format\":\"commitwatch-trace\",\"version\":1,\"commit_limit\":1.5}\n",
                 CW_EPARSE, "field \"commit_limit\" must be an integer");
    expect_error("nothdr", "{\"ts\":1}\n", CW_EPARSE, "not a commitwatch trace");
    expect_error("version", "{\"format\":\"commitwatch-trace\",\"version\":2}\n", CW_EPARSE, "version 2 is not supported");
    expect_error("json", HDR "{\"ts\":1,\"op\":\"commit\"\n", CW_EPARSE, ":2:");
    expect_error("json2", HDR "{\"ts\":1,\"op\":\"commit\"\n", CW_EPARSE, "not valid JSON");
    expect_error("notobj", HDR "[1,2]\n", CW_EPARSE, "must be a JSON object");
    expect_error("noop", HDR "{\"ts\":1,\"pid\":1}\n", CW_EPARSE, "missing field \"op\"");
    expect_error("badop", HDR "{\"ts\":1,\"op\":\"alloc\",\"pid\":1}\n", CW_EPARSE, "field \"op\" must be one of");
    expect_error("nots", HDR "{\"op\":\"commit\",\"pid\":1,\"addr\":1,\"size\":1}\n", CW_EPARSE, "missing field \"ts\"");
    expect_error("floatts", HDR "{\"ts\":1.5,\"op\":\"commit\",\"pid\":1,\"addr\":1,\"size\":1}\n", CW_EPARSE, "field \"ts\" must be an integer");
    expect_error("nopid", HDR "{\"ts\":1,\"op\":\"commit\",\"addr\":1,\"size\":1}\n", CW_EPARSE, "missing field \"pid\"");
    expect_error("noaddr", HDR "{\"ts\":1,\"op\":\"commit\",\"pid\":1,\"size\":1}\n", CW_EPARSE, "missing field \"addr\"");
    expect_error("badaddr", HDR "{\"ts\":1,\"op\":\"commit\",\"pid\":1,\"addr\":\"12\",\"size\":1}\n", CW_EPARSE, "\"0x...\" string");
    expect_error("negsize", HDR "{\"ts\":1,\"op\":\"commit\",\"pid\":1,\"addr\":1,\"size\":-4}\n", CW_EPARSE, "must not be negative");
    expect_error("zerosize", HDR "{\"ts\":1,\"op\":\"commit\",\"pid\":1,\"addr\":1,\"size\":0}\n", CW_EPARSE, "greater than 0");
    expect_error("wrap", HDR "{\"ts\":1,\"op\":\"commit\",\"pid\":1,\"addr\":\"0xfffffffffffff000\",\"size\":8192}\n", CW_EPARSE, "end of the address space");
    expect_error("pastend", HDR "{\"ts\":1,\"op\":\"commit\",\"pid\":1,\"addr\":\"0x7ffffffffffff000\",\"size\":4096}\n", CW_EPARSE, "a commit's range addr + size ends past 2^63 - 1");
    expect_error("noname", HDR "{\"ts\":1,\"op\":\"process_start\",\"pid\":1}\n", CW_EPARSE, "missing field \"name\"");
    expect_error("badstack", HDR "{\"ts\":1,\"op\":\"commit\",\"pid\":1,\"addr\":1,\"size\":1,\"stack\":[1]}\n", CW_EPARSE, "array of non-empty strings");
    expect_error("rundown", HDR "{\"ts\":1,\"op\":\"decommit\",\"pid\":1,\"addr\":1,\"size\":1,\"rundown\":true}\n", CW_EPARSE, "only valid on a commit");
    expect_error("trailing", HDR "{\"ts\":1,\"op\":\"process_exit\",\"pid\":1} xyz\n", CW_EPARSE, "not valid JSON");
    expect_error("twoobjs", HDR "{\"ts\":1,\"op\":\"process_exit\",\"pid\":1}{\"ts\":2}\n", CW_EPARSE, "not valid JSON");
    expect_error("hugesize", HDR "{\"ts\":1,\"op\":\"commit\",\"pid\":1,\"addr\":0,\"size\":9223372036854775808}\n", CW_EPARSE, "below 2^63");
    expect_error("tsnever", HDR "{\"ts\":9223372036854775807,\"op\":\"process_exit\",\"pid\":1}\n", CW_EPARSE, "field \"ts\" must be below");
    expect_error("hdrtrail", "{\"format\":\"commitwatch-trace\",\"version\":1} x\n", CW_EPARSE, "header line is not a JSON object");
    expect_error("emptyline", HDR "\n", CW_EPARSE, "empty line");
    expect_error("back", HDR "{\"ts\":5,\"op\":\"process_exit\",\"pid\":1}\n{\"ts\":4,\"op\":\"process_exit\",\"pid\":1}\n", CW_ETIME, ":3: ts 4 goes back in time");
    /* The last commit taken ends at 2^63 - 1 exactly; other ranges go
     * higher (Linux's [vsyscall] page, a rundown reserve). */
    write_file(tmp_path("atend"), HDR "{\"ts\":1,\"op\":\"commit\",\"pid\":1,\"addr\":\"0x7ffffffffffff000\",\"size\":4095}\n"
                                      "{\"ts\":1,\"op\":\"reserve\",\"pid\":1,\"addr\":\"0xffffffffff600000\",\"size\":4096}\n"
                                      "{\"ts\":1,\"op\":\"release\",\"pid\":1,\"addr\":\"0x7ffffffffffff000\",\"size\":4096}\n");
    cw_diag_t d3 = {{0}};
    ASSERT_OK(read_all(tmp_path("atend"), &d3, &n));
    ASSERT_EQ(n, 3);
    cw_diag_t d2 = {{0}};
    ASSERT_EQ(read_all("/nonexistent/trace.jsonl", &d2, &n), CW_EIO);
    ASSERT_TRUE(strstr(d2.msg, "cannot open") != NULL);
    TEST_DONE();
}
