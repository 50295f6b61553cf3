/* test_export.c - the folded, speedscope and pprof exports of a report
 * (export.h): exact folded text, the speedscope file read back with cJSON,
 * and the pprof profile gunzipped with zlib and decoded with protobuf-c's
 * generated reader (the e2e test opens it with `go tool pprof`). */
#include <cjson/cJSON.h>
#include <zlib.h>

#include "analysis/export_int.h"
#include "analysis/profile.pb-c.h"
#include "commitwatch/event.h"
#include "commitwatch/export.h"
#include "test.h"

static char *xdup(const char *s)
{
    char *p = strdup(s);
    if (!p) CW_FAIL("out of memory");
    return p;
}

/* A stack with frames fr[0..n) (outermost first) and figures. */
static void set_stack(cw_report_t *r, cw_stack_report_t *s, uint32_t id, const char *tag,
                      const char *const *fr, uint32_t n, uint64_t aifi, uint64_t aifo,
                      uint64_t aofi, uint64_t commits)
{
    memset(s, 0, sizeof *s);
    s->stack_id = id;
    if (!(s->tag = cw_report_add_tag(r, tag))) CW_FAIL("out of memory");
    s->nframes = n;
    s->frames = calloc(n ? n : 1, sizeof *s->frames);
    for (uint32_t i = 0; i < n; i++)
        s->frames[i] = xdup(fr[i]);
    s->figs.types[CW_AIFI].bytes = aifi;
    s->figs.types[CW_AIFI].count = aifi ? 1 : 0;
    s->figs.types[CW_AIFO].bytes = aifo;
    s->figs.types[CW_AOFI].bytes = aofi;
    s->figs.commit_count = commits;
    s->figs.size_bytes = aifi + aifo;
}

/* Two processes: app (pid 42) with three stacks, one of them with a ';'
 * in a frame and one that shrank (negative impacting); a folded group of
 * 3 "sh" with a stack without frames. */
static cw_report_t *make_report(void)
{
    cw_report_t *r = calloc(1, sizeof *r);
    r->from_ns = 1000;
    r->to_ns = 5000;
    r->nprocs = 2;
    r->procs = calloc(2, sizeof *r->procs);
    cw_proc_report_t *a = &r->procs[0], *b = &r->procs[1];
    a->id = 7;
    a->pid = 42;
    a->name = xdup("app");
    a->exit_ns = a->tracking_ended_ns = CW_TS_NEVER;
    a->nstacks = 3;
    a->stacks = calloc(3, sizeof *a->stacks);
    static const char *const s1[] = {"main", "grow", "VirtualAlloc"};
    static const char *const s2[] = {"main", "tmp;buf\nx", "VirtualAlloc"};
    static const char *const s3[] = {"main", "shrink"};
    set_stack(r, &a->stacks[0], 1, "Heap", s1, 3, 0, 4096, 0, 2);
    set_stack(r, &a->stacks[1], 2, "Temp\\Buffers", s2, 3, 8192, 0, 0, 3);
    set_stack(r, &a->stacks[2], 3, "Other", s3, 2, 0, 0, 12288, 0);
    b->id = 9;
    b->pid = 0;
    b->folded = 3;
    b->name = xdup("sh");
    b->exit_ns = b->tracking_ended_ns = CW_TS_NEVER;
    b->nstacks = 1;
    b->stacks = calloc(1, sizeof *b->stacks);
    set_stack(r, &b->stacks[0], 4, "Other", NULL, 0, 100, 200, 0, 1);
    for (uint32_t i = 0; i < 2; i++)
        for (uint32_t j = 0; j < r->procs[i].nstacks; j++)
            cw_figs_add(&r->procs[i].figs, &r->procs[i].stacks[j].figs);
    return r;
}

static char *export(const cw_report_t *r, cw_export_format_t f, cw_export_value_t v, bool pf,
                    size_t *len)
{
    cw_export_opts_t o = {.format = f, .value = v, .process_frame = pf};
    cw_diag_t d = {{0}};
    char *out = NULL;
    int rc = cw_export_procs(r->procs, r->nprocs, r->from_ns, r->to_ns, "test", &o, &out, len, &d);
    if (rc) CW_FAIL("export %s: %d %s", cw_export_format_name(f), rc, d.msg);
    return out;
}

static void test_parse(void)
{
    cw_export_format_t f;
    cw_export_value_t v;
    cw_diag_t d = {{0}};
    ASSERT_OK(cw_export_parse_format("pprof", &f, &d));
    ASSERT_EQ(f, CW_EXPORT_PPROF);
    ASSERT_OK(cw_export_parse_format("speedscope", &f, &d));
    ASSERT_EQ(f, CW_EXPORT_SPEEDSCOPE);
    ASSERT_EQ(cw_export_parse_format("svg", &f, &d), CW_EUSAGE);
    ASSERT_TRUE(strstr(d.msg, "'svg' is not one of folded, pprof, speedscope") != NULL);
    ASSERT_OK(cw_export_parse_value("count", &v, &d));
    ASSERT_EQ(v, CW_EXPORT_COUNT);
    ASSERT_EQ(cw_export_parse_value("size", &v, &d), CW_EUSAGE);
    ASSERT_STR_EQ(cw_export_suffix(CW_EXPORT_PPROF), ".pb.gz");
    ASSERT_STR_EQ(cw_export_value_name(CW_EXPORT_TRANSIENT), "transient_bytes");

    /* A bad option is refused, not written. */
    cw_export_opts_t o = {.format = (cw_export_format_t)7};
    char *out = (char *)1;
    size_t len = 1;
    ASSERT_EQ(cw_export_procs(NULL, 0, 0, 1, NULL, &o, &out, &len, &d), CW_EINVAL);
    ASSERT_TRUE(out == NULL && len == 0);
}

static void test_folded(const cw_report_t *r)
{
    size_t len;
    char *s = export(r, CW_EXPORT_FOLDED, CW_EXPORT_IMPACTING, false, &len);
    /* The shrinking stack (impacting -12288) and the transient one (0) are
     * left out; the group's stack without frames has a frame. */
    ASSERT_STR_EQ(s, "main;grow;VirtualAlloc 4096\n(no frames) 200\n");
    ASSERT_EQ(len, strlen(s));
    free(s);
    s = export(r, CW_EXPORT_FOLDED, CW_EXPORT_TRANSIENT, true, &len);
    ASSERT_STR_EQ(s, "app (pid 42);main;tmp_buf_x;VirtualAlloc 8192\n"
                     "sh (3 folded);(no frames) 100\n");
    free(s);
    s = export(r, CW_EXPORT_FOLDED, CW_EXPORT_COUNT, false, &len);
    ASSERT_STR_EQ(s, "main;grow;VirtualAlloc 2\nmain;tmp_buf_x;VirtualAlloc 3\n(no frames) 1\n");
    free(s);
    /* Nothing to export: an empty text, not an error. */
    cw_export_opts_t o = {.format = CW_EXPORT_FOLDED};
    cw_diag_t d = {{0}};
    ASSERT_OK(cw_export_procs(NULL, 0, 0, 1, NULL, &o, &s, &len, &d));
    ASSERT_STR_EQ(s, "");
    ASSERT_EQ(len, 0);
    free(s);
}

static int64_t num(const cJSON *o, const char *name)
{
    const cJSON *x = cJSON_GetObjectItemCaseSensitive(o, name);
    if (!cJSON_IsNumber(x)) CW_FAIL("%s: not a number", name);
    return (int64_t)x->valuedouble;
}

static void test_speedscope(const cw_report_t *r)
{
    size_t len;
    char *s = export(r, CW_EXPORT_SPEEDSCOPE, CW_EXPORT_IMPACTING, true, &len);
    cJSON *o = cJSON_Parse(s);
    ASSERT_TRUE(o != NULL);
    ASSERT_STR_EQ(cJSON_GetStringValue(cJSON_GetObjectItem(o, "$schema")),
                  "https://www.speedscope.app/file-format-schema.json");
    const cJSON *frames = cJSON_GetObjectItem(cJSON_GetObjectItem(o, "shared"), "frames");
    const cJSON *profiles = cJSON_GetObjectItem(o, "profiles");
    ASSERT_EQ(cJSON_GetArraySize(profiles), 3);
    /* Distinct frames once each: (no frames), app (pid 42), main, grow,
     * VirtualAlloc, tmp;buf\nx (JSON keeps it as it is), shrink, sh (3 folded). */
    ASSERT_EQ(cJSON_GetArraySize(frames), 8);
    static const char *const units[] = {"bytes", "bytes", "none"};
    static const int64_t totals[] = {4096 + 200, 8192 + 100, 2 + 3 + 1};
    static const int nsamples[] = {2, 2, 3};
    for (int v = 0; v < 3; v++) {
        const cJSON *p = cJSON_GetArrayItem(profiles, v);
        ASSERT_STR_EQ(cJSON_GetStringValue(cJSON_GetObjectItem(p, "type")), "sampled");
        ASSERT_STR_EQ(cJSON_GetStringValue(cJSON_GetObjectItem(p, "unit")), units[v]);
        const cJSON *samples = cJSON_GetObjectItem(p, "samples");
        const cJSON *weights = cJSON_GetObjectItem(p, "weights");
        ASSERT_EQ(cJSON_GetArraySize(samples), nsamples[v]);
        ASSERT_EQ(cJSON_GetArraySize(weights), nsamples[v]);
        int64_t sum = 0;
        const cJSON *w;
        cJSON_ArrayForEach(w, weights) sum += (int64_t)w->valuedouble;
        ASSERT_EQ(sum, totals[v]);
        ASSERT_EQ(num(p, "endValue"), totals[v]);
        ASSERT_EQ(num(p, "startValue"), 0);
    }
    /* The first transient sample: app's frame, then main ... VirtualAlloc. */
    const cJSON *st =
        cJSON_GetArrayItem(cJSON_GetObjectItem(cJSON_GetArrayItem(profiles, 1), "samples"), 0);
    static const char *const want[] = {"app (pid 42)", "main", "tmp;buf\nx", "VirtualAlloc"};
    ASSERT_EQ(cJSON_GetArraySize(st), 4);
    for (int i = 0; i < 4; i++) {
        int fi = (int)cJSON_GetArrayItem(st, i)->valuedouble;
        ASSERT_STR_EQ(cJSON_GetStringValue(cJSON_GetObjectItem(cJSON_GetArrayItem(frames, fi), "name")),
                      want[i]);
    }
    cJSON_Delete(o);
    free(s);
}

/* gunzips in[0..n) into a new buffer. */
static uint8_t *gunzip(const char *in, size_t n, size_t *out_len)
{
    z_stream z;
    memset(&z, 0, sizeof z);
    ASSERT_EQ(inflateInit2(&z, 15 + 16), Z_OK);
    size_t cap = 1 << 20;
    uint8_t *out = malloc(cap);
    z.next_in = (Bytef *)(uintptr_t)in;
    z.avail_in = (uInt)n;
    z.next_out = out;
    z.avail_out = (uInt)cap;
    ASSERT_EQ(inflate(&z, Z_FINISH), Z_STREAM_END);
    *out_len = z.total_out;
    inflateEnd(&z);
    return out;
}

static const char *label_str(const Perftools__Profiles__Profile *p,
                             const Perftools__Profiles__Sample *s, const char *key)
{
    for (size_t i = 0; i < s->n_label; i++)
        if (strcmp(p->string_table[s->label[i]->key], key) == 0)
            return p->string_table[s->label[i]->str];
    return NULL;
}

static int64_t label_num(const Perftools__Profiles__Profile *p,
                         const Perftools__Profiles__Sample *s, const char *key)
{
    for (size_t i = 0; i < s->n_label; i++)
        if (strcmp(p->string_table[s->label[i]->key], key) == 0) return s->label[i]->num;
    CW_FAIL("no label %s", key);
}

static void test_pprof(const cw_report_t *r)
{
    size_t len, n;
    char *gz = export(r, CW_EXPORT_PPROF, CW_EXPORT_IMPACTING, false, &len);
    ASSERT_TRUE(len > 18 && (uint8_t)gz[0] == 0x1f && (uint8_t)gz[1] == 0x8b); /* gzip */
    uint8_t *raw = gunzip(gz, len, &n);
    Perftools__Profiles__Profile *p = perftools__profiles__profile__unpack(NULL, n, raw);
    ASSERT_TRUE(p != NULL);
    char *const *st = p->string_table;
    ASSERT_STR_EQ(st[0], "");
    ASSERT_EQ(p->n_sample_type, 4);
    ASSERT_STR_EQ(st[p->sample_type[0]->type], "impacting_bytes");
    ASSERT_STR_EQ(st[p->sample_type[0]->unit], "bytes");
    ASSERT_STR_EQ(st[p->sample_type[1]->type], "transient_bytes");
    ASSERT_STR_EQ(st[p->sample_type[2]->type], "commit_count");
    ASSERT_STR_EQ(st[p->sample_type[2]->unit], "count");
    ASSERT_STR_EQ(st[p->sample_type[3]->type], "commit_bytes");
    ASSERT_STR_EQ(st[p->sample_type[3]->unit], "bytes");
    ASSERT_STR_EQ(st[p->default_sample_type], "impacting_bytes");
    ASSERT_EQ(p->time_nanos, 1000);
    ASSERT_EQ(p->duration_nanos, 4000);
    /* Every stack is a sample, the shrinking one included: the totals are
     * the processes'. */
    ASSERT_EQ(p->n_sample, 4);
    int64_t tot[4] = {0, 0, 0, 0};
    for (size_t i = 0; i < p->n_sample; i++)
        for (int v = 0; v < 4; v++)
            tot[v] += p->sample[i]->value[v];
    cw_figs_t all = r->procs[0].figs;
    cw_figs_add(&all, &r->procs[1].figs);
    ASSERT_EQ(tot[0], cw_figs_impacting(&all));
    ASSERT_EQ(tot[0], 4096 - 12288 + 200);
    ASSERT_EQ(tot[1], (int64_t)all.types[CW_AIFI].bytes);
    ASSERT_EQ(tot[2], (int64_t)all.commit_count);
    ASSERT_EQ(tot[3], (int64_t)all.size_bytes);
    /* Distinct frames: main, grow, VirtualAlloc, tmp;buf\nx, shrink, (no frames). */
    ASSERT_EQ(p->n_function, 6);
    ASSERT_EQ(p->n_location, 6);
    /* Sample 1: leaf first, each location one line of its function. */
    const Perftools__Profiles__Sample *s = p->sample[1];
    static const char *const want[] = {"VirtualAlloc", "tmp;buf\nx", "main"};
    ASSERT_EQ(s->n_location_id, 3);
    for (size_t i = 0; i < 3; i++) {
        const Perftools__Profiles__Location *loc = NULL;
        for (size_t k = 0; k < p->n_location; k++)
            if (p->location[k]->id == s->location_id[i]) loc = p->location[k];
        ASSERT_TRUE(loc && loc->n_line == 1);
        const Perftools__Profiles__Function *fn = NULL;
        for (size_t k = 0; k < p->n_function; k++)
            if (p->function[k]->id == loc->line[0]->function_id) fn = p->function[k];
        ASSERT_TRUE(fn != NULL);
        ASSERT_STR_EQ(st[fn->name], want[i]);
    }
    ASSERT_STR_EQ(label_str(p, s, "tag"), "Temp\\Buffers");
    ASSERT_STR_EQ(label_str(p, s, "process"), "app");
    ASSERT_EQ(label_num(p, s, "pid"), 42);
    ASSERT_EQ(label_num(p, s, "instance"), 7);
    ASSERT_STR_EQ(label_str(p, p->sample[3], "process"), "sh");
    ASSERT_EQ(label_num(p, p->sample[3], "instance"), 9);
    perftools__profiles__profile__free_unpacked(p, NULL);
    free(raw);
    free(gz);
}

/* The interner: distinct strings once, in order, whatever their number. */
static void test_interner(void)
{
    cw__interner_t in;
    char (*names)[16] = calloc(5000, sizeof *names);
    ASSERT_OK(cw__interner_init(&in));
    for (int i = 0; i < 5000; i++) {
        snprintf(names[i], sizeof names[i], "f%d", i);
        ASSERT_EQ(cw__intern(&in, names[i]), i);
    }
    for (int i = 4999; i >= 0; i--) {
        char again[16];
        snprintf(again, sizeof again, "f%d", i);
        ASSERT_EQ(cw__intern(&in, again), i);
    }
    ASSERT_EQ(in.n, 5000);
    cw__interner_free(&in);
    free(names);
}

int main(void)
{
    cw_report_t *r = make_report();
    test_parse();
    test_folded(r);
    test_speedscope(r);
    test_pprof(r);
    test_interner();
    cw_report_free(r);
    TEST_DONE();
}
