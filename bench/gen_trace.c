/* gen_trace.c - writes the core benchmark's workload (gen_core.h) as a
 * JSONL v1 trace, for `commitwatch run --source replay:FILE`.
 *
 * usage: cw_gen_trace [--events N] [--procs N] [--stacks N] [--seed N]
 *                     [--span-s N] [--burst N] [--out FILE|-]
 * Defaults: 10,000,000 events, 1,000 processes, 300 stacks, seed 1, over
 * one hour, to stdout. Each stack's JSON array is rendered once; lines are
 * formatted by hand into a large buffer (about 1 s per million events). */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gen_core.h"

static char *json_string_array(const char *const *f, uint32_t n)
{
    size_t len = 3;
    for (uint32_t i = 0; i < n; i++)
        len += strlen(f[i]) * 2 + 3;
    char *s = malloc(len), *p = s;
    if (!s) return NULL;
    *p++ = '[';
    for (uint32_t i = 0; i < n; i++) {
        if (i) *p++ = ',';
        *p++ = '"';
        for (const char *c = f[i]; *c; c++) {
            if (*c == '"' || *c == '\\') *p++ = '\\';
            *p++ = *c;
        }
        *p++ = '"';
    }
    *p++ = ']';
    *p = 0;
    return s;
}

static char *put_u64(char *p, uint64_t v)
{
    char tmp[24];
    int n = 0;
    do {
        tmp[n++] = (char)('0' + v % 10);
        v /= 10;
    } while (v);
    while (n)
        *p++ = tmp[--n];
    return p;
}

static char *put_hex(char *p, uint64_t v)
{
    static const char hx[] = "0123456789abcdef";
    char tmp[20];
    int n = 0;
    do {
        tmp[n++] = hx[v & 15];
        v >>= 4;
    } while (v);
    *p++ = '0';
    *p++ = 'x';
    while (n)
        *p++ = tmp[--n];
    return p;
}

static char *put_str(char *p, const char *s)
{
    size_t n = strlen(s);
    memcpy(p, s, n);
    return p + n;
}

static int usage(void)
{
    fprintf(stderr, "usage: cw_gen_trace [--events N] [--procs N] [--stacks N] [--seed N] "
                    "[--span-s N] [--burst N] [--out FILE|-]\n");
    return 2;
}

int main(int argc, char **argv)
{
    cwgen_opts_t o;
    cwgen_opts_default(&o);
    const char *out = "-";
    for (int i = 1; i < argc; i++) {
        if (i + 1 >= argc) return usage();
        const char *k = argv[i], *v = argv[++i];
        if (!strcmp(k, "--events"))
            o.events = strtoull(v, NULL, 10);
        else if (!strcmp(k, "--procs"))
            o.procs = (uint32_t)strtoul(v, NULL, 10);
        else if (!strcmp(k, "--stacks"))
            o.nstacks = (uint32_t)strtoul(v, NULL, 10);
        else if (!strcmp(k, "--seed"))
            o.seed = strtoull(v, NULL, 10);
        else if (!strcmp(k, "--burst"))
            o.burst = (uint32_t)strtoul(v, NULL, 10);
        else if (!strcmp(k, "--span-s"))
            o.span_ns = (int64_t)strtoll(v, NULL, 10) * 1000000000LL;
        else if (!strcmp(k, "--out"))
            out = v;
        else
            return usage();
    }
    FILE *fp = strcmp(out, "-") ? fopen(out, "wb") : stdout;
    if (!fp) {
        perror(out);
        return 1;
    }
    cwgen_t *g = cwgen_create(&o);
    if (!g) {
        fprintf(stderr, "cw_gen_trace: out of memory\n");
        return 1;
    }
    uint32_t ns = cwgen_stack_count(g);
    char **stack_json = calloc(ns + 1, sizeof *stack_json);
    for (uint32_t s = 0; s < ns; s++) {
        uint32_t n;
        const char *const *f = cwgen_stack_frames(g, s, &n);
        stack_json[s] = json_string_array(f, n);
    }
    size_t cap = 1 << 22;
    char *buf = malloc(cap + 8192), *p = buf;
    p = put_str(p, "{\"format\":\"commitwatch-trace\",\"version\":1,\"platform\":\"windows\","
                   "\"pointer_size\":8}\n");
    cw_event_t ev;
    int rc = 0;
    while (cwgen_next(g, &ev) == 1) {
        p = put_str(p, "{\"ts\":");
        p = put_u64(p, (uint64_t)ev.ts);
        p = put_str(p, ",\"op\":\"");
        p = put_str(p, cw_op_name(ev.op));
        p = put_str(p, "\",\"pid\":");
        p = put_u64(p, ev.pid);
        if (ev.tid) {
            p = put_str(p, ",\"tid\":");
            p = put_u64(p, ev.tid);
        }
        if (ev.op == CW_OP_PROCESS_START) {
            p = put_str(p, ",\"name\":\"");
            p = put_str(p, ev.name);
            *p++ = '"';
        } else if (ev.op != CW_OP_PROCESS_EXIT) {
            p = put_str(p, ",\"addr\":\"");
            p = put_hex(p, ev.addr);
            p = put_str(p, "\",\"size\":");
            p = put_u64(p, ev.size);
            if (ev.stack_id) {
                p = put_str(p, ",\"stack\":");
                p = put_str(p, stack_json[ev.stack_id - 1]);
            }
            if (ev.rundown) p = put_str(p, ",\"rundown\":true");
        }
        p = put_str(p, "}\n");
        if ((size_t)(p - buf) >= cap) {
            if (fwrite(buf, 1, (size_t)(p - buf), fp) != (size_t)(p - buf)) {
                rc = 1;
                break;
            }
            p = buf;
        }
    }
    if (!rc && fwrite(buf, 1, (size_t)(p - buf), fp) != (size_t)(p - buf)) rc = 1;
    if (fp != stdout ? fclose(fp) != 0 : fflush(fp) != 0) rc = 1;
    if (rc) perror(out);
    for (uint32_t s = 0; s < ns; s++)
        free(stack_json[s]);
    free(stack_json);
    free(buf);
    cwgen_destroy(g);
    return rc;
}
