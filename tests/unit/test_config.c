/* test_config.c - the configuration file: defaults, values, durations and
 * sizes, repeatable keys, unknown keys warned about, bad values refused
 * with file:line, lines too long or holding a NUL refused; the same read
 * from an open stream. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "commitwatch/config.h"
#include "test.h"
#include "test_port.h"

int main(void)
{
    cw_config_t c;
    cw_diag_t d = {{0}};
    ASSERT_OK(cw_config_init(&c));
    ASSERT_STR_EQ(c.listen, "127.0.0.1:8470");
    ASSERT_EQ(c.store.retention_ns[0], 26LL * 3600 * 1000000000LL);
    ASSERT_U64_EQ(c.store.size_cap_bytes, 2ULL << 30);
    ASSERT_U64_EQ(c.perf_ring_bytes, 16ULL << 20);
    ASSERT_U64_EQ(c.perf_queue_bytes, 8ULL << 20);
    ASSERT_U64_EQ(c.perf_unwind_procs, 16);
    ASSERT_U64_EQ(c.http_threads, 32);
    ASSERT_EQ(c.http_request_timeout_ns, 5 * 1000000000LL);
    ASSERT_EQ(c.http_idle_timeout_ns, 2 * 1000000000LL);
    ASSERT_U64_EQ(c.http_client_connections, 8);

    char path[1024];
    snprintf(path, sizeof path, "%s/cw_test_config_%d.conf", cw_test_tmpdir(), cw_test_getpid());
    FILE *f = fopen(path, "w");
    fputs("# comment\n\ndb = /var/lib/x.db  # trailing\nstacktags = a.stacktags\nstacktags=b.stacktags\n"
          "retention_raw = 90m\nsize_cap = 512MiB\nfrobnicate = yes\nperf_ring_size = 4MiB\n"
          "perf_queue_size = 2MiB\nperf_unwind_processes = 8\n"
          "http_threads = 64\nhttp_request_timeout = 1500ms\nhttp_idle_timeout = 0\n"
          "http_client_connections = 0\n", f);
    fclose(f);
    char warnbuf[512] = {0};
    cw_test_scratch_t warn;
    ASSERT_TRUE(cw_test_scratch_open(&warn, "warn") != NULL);
    ASSERT_OK(cw_config_load(&c, path, warn.f, &d));
    cw_test_scratch_read(&warn, warnbuf, sizeof warnbuf);
    ASSERT_STR_EQ(c.db, "/var/lib/x.db");
    ASSERT_EQ(c.nstacktags, 2);
    ASSERT_STR_EQ(c.stacktags[1], "b.stacktags");
    ASSERT_EQ(c.store.retention_ns[0], 90LL * 60 * 1000000000LL);
    ASSERT_U64_EQ(c.store.size_cap_bytes, 512ULL << 20);
    ASSERT_U64_EQ(c.perf_ring_bytes, 4ULL << 20);
    ASSERT_U64_EQ(c.perf_queue_bytes, 2ULL << 20);
    ASSERT_U64_EQ(c.perf_unwind_procs, 8);
    ASSERT_U64_EQ(c.http_threads, 64);
    ASSERT_EQ(c.http_request_timeout_ns, 1500 * 1000000LL);
    ASSERT_EQ(c.http_idle_timeout_ns, 0);
    ASSERT_U64_EQ(c.http_client_connections, 0);
    ASSERT_TRUE(strstr(warnbuf, ":8: unknown key 'frobnicate'") != NULL);

    f = fopen(path, "w");
    fputs("db = x\nretention_raw = soon\n", f);
    fclose(f);
    ASSERT_EQ(cw_config_load(&c, path, NULL, &d), CW_EPARSE);
    ASSERT_TRUE(strstr(d.msg, ":2: bad value 'soon' for retention_raw") != NULL);
    /* fold_lifetime is at most an hour (the keys cache settles a group
     * of folded instances two hours after its latest exit). */
    f = fopen(path, "w");
    fputs("fold_lifetime = 1h\n", f);
    fclose(f);
    ASSERT_OK(cw_config_load(&c, path, NULL, &d));
    ASSERT_EQ(c.fold_lifetime_ns, 3600 * 1000000000LL);
    f = fopen(path, "w");
    fputs("db = x\nfold_lifetime = 61m\n", f);
    fclose(f);
    ASSERT_EQ(cw_config_load(&c, path, NULL, &d), CW_EPARSE);
    ASSERT_TRUE(strstr(d.msg, ":2:") != NULL && strstr(d.msg, "at most 1h") != NULL);
    f = fopen(path, "w");
    fputs("just words\n", f);
    fclose(f);
    ASSERT_EQ(cw_config_load(&c, path, NULL, &d), CW_EPARSE);
    ASSERT_TRUE(strstr(d.msg, ":1: expected `key = value`") != NULL);
    ASSERT_EQ(cw_config_load(&c, "/nonexistent.conf", NULL, &d), CW_EIO);

    /* A line past 4095 bytes is refused, not cut into a value and a
     * second line whose tail would be read as a key (fuzz_config found
     * it: tests/fuzz/seeds-config/long-line.conf); the same for a NUL. */
    f = fopen(path, "wb");
    fputs("db = kept\nalert_exec = /bin/echo ", f);
    for (int i = 0; i < 4090; i++) fputc('x', f);
    fputs(" log_level=debug\n", f);
    fclose(f);
    ASSERT_EQ(cw_config_load(&c, path, NULL, &d), CW_EPARSE);
    ASSERT_TRUE(strstr(d.msg, ":2: line longer than 4095 bytes") != NULL);
    ASSERT_STR_EQ(c.db, "kept");
    ASSERT_TRUE(c.alert_exec == NULL);
    f = fopen(path, "wb");
    fputs("token = ab", f);
    fputc('\0', f);
    fputs("cd\n", f);
    fclose(f);
    ASSERT_EQ(cw_config_load(&c, path, NULL, &d), CW_EPARSE);
    ASSERT_TRUE(strstr(d.msg, ":1: NUL byte") != NULL);
    /* 4095 bytes is still a line; the last line needs no newline. */
    f = fopen(path, "wb");
    fputs("alert_exec = ", f);
    for (int i = 0; i < 4095 - 13; i++) fputc('y', f);
    fputs("\ndb = last", f);
    fclose(f);
    ASSERT_OK(cw_config_load(&c, path, NULL, &d));
    ASSERT_EQ(strlen(c.alert_exec), 4095 - 13);
    ASSERT_STR_EQ(c.db, "last");
    remove(path);

    /* From an open stream (what cw_config_load reads after its checks;
     * the fuzz target reads from memory): messages name the given name,
     * the stream stays open. */
    f = tmpfile();
    ASSERT_TRUE(f != NULL);
    fputs("db = from-stream\nhttp_threads = 3\nhttp_threads = many\n", f);
    rewind(f);
    ASSERT_EQ(cw_config_load_stream(&c, f, "given.conf", NULL, &d), CW_EPARSE);
    ASSERT_TRUE(strncmp(d.msg, "given.conf:3: bad value 'many' for http_threads", 47) == 0);
    ASSERT_STR_EQ(c.db, "from-stream");
    ASSERT_U64_EQ(c.http_threads, 3);
    rewind(f); /* still open */
    ASSERT_EQ(fgetc(f), 'd');
    fclose(f);

    int64_t ns;
    uint64_t b;
    ASSERT_OK(cw_parse_duration("500ms", &ns));
    ASSERT_EQ(ns, 500000000);
    ASSERT_EQ(cw_parse_duration("-5s", &ns), -1);
    ASSERT_EQ(cw_parse_duration("5 s", &ns), -1);
    ASSERT_OK(cw_parse_size("1GB", &b));
    ASSERT_U64_EQ(b, 1000000000ULL);
    ASSERT_EQ(cw_parse_size("1XB", &b), -1);

    static char out[65536];
    cw_test_scratch_t m;
    ASSERT_TRUE(cw_test_scratch_open(&m, "default") != NULL);
    ASSERT_OK(cw_config_write_default(m.f));
    ASSERT_TRUE(cw_test_scratch_read(&m, out, sizeof out) < sizeof out - 1);
    ASSERT_TRUE(strstr(out, "listen = 127.0.0.1:8470") != NULL);
    cw_config_free(&c);
    TEST_DONE();
}
