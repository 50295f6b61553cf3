/* test_etl_file.c - the .etl reader: files written like the kernel
 * logger's (tests/etlgen) read back by `--source etl:` and cw_etl_info():
 * the events in time order across CPUs and buffers (compressed or not),
 * processes, stacks joined from their halves, times in Unix ns; payloads
 * a decoder refuses are counted skips; truncated and corrupt files are
 * read as far as they go; what is not an .etl file is refused naming the
 * file and offset. Then the real traces of ../shared/data/etl (CW_ETL_DATA):
 * header fields, buffers, counts per class, processes and images. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "commitwatch/etl.h"
#include "commitwatch/stacks.h"
#include "etl_writer.h"
#include "sources/etl/etl_internal.h" /* the clock's edges */
#include "test.h"

#define NS 1000000000LL
#define T0_NS 1700000000000000000LL /* a multiple of 100 ns */
#define T0_TICK 1000000ull
#define FREQ 10000000LL /* 10 MHz: a tick is 100 ns */

static char dir[1024];

static const char *path_of(const char *name)
{
    static char p[1200];
    snprintf(p, sizeof p, "%s/test_etl_file_%s", dir, name);
    return p;
}

static uint8_t pay[4096];

static void ev(cw_etlw_t *w, unsigned cpu, int kind, unsigned group, unsigned type,
               unsigned version, uint32_t pid, uint32_t tid, uint64_t tick, const cw_etlw_buf_t *b)
{
    ASSERT_TRUE(!b->overflow);
    ASSERT_OK(cw_etlw_event(w, cpu, kind, group, type, version, pid, tid, tick, b->p, b->n));
}

#define NEWBUF(b) cw_etlw_buf_t b = {pay, 0, sizeof pay, false}

/* The small trace: process 100 running at the start, process 200
 * started, its image, one VirtualAlloc with a kernel and a user stack
 * walk, two refused VirtualAlloc payloads, a VirtualFree without stack,
 * and the end of 200; filler events on three CPUs through small
 * buffers so the file holds many buffers out of order. */
/* What the header of the small trace says its session lost (write_small). */
static uint32_t small_events_lost, small_buffers_lost;

static void write_small(const char *file, bool compress, unsigned ptr)
{
    cw_etlw_opts_t o = {.ptr_size = ptr, .ncpu = 3, .compress = compress, .buffer_size = 1024,
                        .start_ns = T0_NS, .start_tick = T0_TICK, .freq = FREQ,
                        .events_lost = small_events_lost, .buffers_lost = small_buffers_lost};
    cw_etlw_t *w;
    ASSERT_OK(cw_etlw_open(file, &o, &w));
    uint64_t kb = ptr == 8 ? 0xFFFFF80000000000ull : 0x80400000u;
    uint64_t ub = ptr == 8 ? 0x7FF812340000ull : 0x71230000u;
    uint64_t va = ptr == 8 ? 0x20000000000ull : 0x20000000u;
    {
        NEWBUF(b);
        cw_etlw_process(&b, 4, ptr, 100, 4, "a.exe", "a.exe -r");
        ev(w, 0, CW_ETLW_SYSTEM, 0x03, 3, 4, 100, 104, T0_TICK, &b);
    }
    {
        NEWBUF(b);
        cw_etlw_image(&b, 3, ptr, kb, 0x1000000, 0, "\\SystemRoot\\system32\\ntoskrnl.exe");
        ev(w, 0, CW_ETLW_SYSTEM, 0x14, 3, 3, 0, 0, T0_TICK, &b);
    }
    /* Filler: DiskIo reads on every CPU, 10 per ms over 20 ms. */
    uint64_t t = T0_TICK + 10;
    for (int i = 0; i < 600; i++, t += 333) {
        uint8_t filler[40] = {0};
        cw_etlw_buf_t b = {filler, sizeof filler, sizeof filler, false};
        ev(w, (unsigned)i % 3, CW_ETLW_SYSTEM, 0x01, 10, 3, 100, 104, t, &b);
        if (i == 100) {
            NEWBUF(p);
            cw_etlw_process(&p, 4, ptr, 200, 100, "b.exe", "b.exe --go");
            ev(w, 1, CW_ETLW_SYSTEM, 0x03, 1, 4, 200, 204, t + 1, &p);
            NEWBUF(m);
            cw_etlw_image(&m, 3, ptr, ub, 0x20000, 200, "C:\\Apps\\B.DLL");
            ev(w, 1, CW_ETLW_SYSTEM, 0x03, 10, 3, 200, 204, t + 2, &m);
        }
        if (i == 200) {
            uint64_t tick = t + 1;
            NEWBUF(v);
            cw_etlw_valloc(&v, ptr, va, 0x100000, 200, 0x3000);
            ev(w, 2, CW_ETLW_PERFINFO, 0x02, 98, 2, 0, 0, tick, &v);
            uint64_t kf[2] = {kb + 0x3000, kb + 0x2000}, uf[2] = {ub + 0x1040, ub + 0x2080};
            NEWBUF(k);
            cw_etlw_stackwalk(&k, ptr, tick, 200, 204, kf, 2);
            ev(w, 2, CW_ETLW_PERFINFO, 0x18, 32, 2, 0, 0, tick, &k);
            /* The user half comes later, on another CPU. */
            NEWBUF(u);
            cw_etlw_stackwalk(&u, ptr, tick, 200, 204, uf, 2);
            ev(w, 0, CW_ETLW_PERFINFO, 0x18, 32, 2, 0, 0, tick + 300, &u);
        }
        if (i == 300) {
            NEWBUF(v);
            cw_etlw_valloc(&v, ptr, va, 0x1000, 200, 0x1000);
            ev(w, 1, CW_ETLW_PERFINFO, 0x02, 98, 3, 0, 0, t + 1, &v); /* unknown version */
            v.n = 2 * ptr;                                            /* cut before the pid */
            ev(w, 1, CW_ETLW_PERFINFO, 0x02, 98, 2, 0, 0, t + 2, &v);
        }
        if (i == 400) {
            NEWBUF(v);
            cw_etlw_valloc(&v, ptr, va, 0x100000, 200, 0x8000);
            ev(w, 0, CW_ETLW_PERFINFO, 0x02, 99, 2, 0, 0, t + 1, &v);
        }
        if (i == 500) {
            NEWBUF(p);
            cw_etlw_process(&p, 4, ptr, 200, 100, "b.exe", "b.exe --go");
            ev(w, 2, CW_ETLW_SYSTEM, 0x03, 2, 4, 200, 204, t + 1, &p);
        }
    }
    ASSERT_TRUE(cw_etlw_buffers(w) > 10);
    ASSERT_OK(cw_etlw_close(w));
}

typedef struct got {
    cw_event_t ev[16];
    char names[16][32], frames[16][4][48];
    uint32_t nframes[16];
    int n;
    int64_t last;
    bool backwards;
    cw_stacks_t *stacks;
} got_t;

static int collect(void *ctx, const cw_event_t *e)
{
    got_t *g = ctx;
    if (g->n && e->ts < g->last) g->backwards = true;
    g->last = e->ts;
    if (g->n == 16) return 0;
    g->ev[g->n] = *e;
    if (e->name) snprintf(g->names[g->n], sizeof g->names[0], "%s", e->name);
    uint32_t n = 0;
    const uint32_t *f = e->stack_id ? cw_stacks_frames(g->stacks, e->stack_id, &n) : NULL;
    g->nframes[g->n] = n;
    for (uint32_t i = 0; i < n && i < 4; i++)
        snprintf(g->frames[g->n][i], sizeof g->frames[0][0], "%s",
                 cw_stacks_frame_text(g->stacks, f[i]));
    g->n++;
    return 0;
}

/* Runs the etl source over file into g (its stacks made here), with the
 * sink's counters and drops callbacks given (may be NULL). */
static void run_etl(const char *file, got_t *g, void (*counters)(void *, uint64_t, uint64_t, int64_t),
                    void (*drops)(void *, const cw_source_drops_t *))
{
    ASSERT_OK(cw_stacks_create(&g->stacks));
    cw_source_opts_t so = {.arg = file, .stacks = g->stacks};
    void *src = NULL;
    cw_diag_t d = {{0}};
    ASSERT_OK(cw_source_etl.open(&src, &so, &d));
    ASSERT_STR_EQ(cw_source_etl.fixed_platform, "windows");
    cw_source_sink_t sink = {g, collect, NULL, counters, drops, NULL};
    ASSERT_OK(cw_source_etl.run(src, &sink, &d));
    cw_source_etl.close(src);
}

static void read_small(bool compress, unsigned ptr)
{
    const char *file = path_of(compress ? "small_z.etl" : "small.etl");
    write_small(file, compress, ptr);
    got_t g = {0};
    run_etl(file, &g, NULL, NULL);

    ASSERT_TRUE(!g.backwards);
    ASSERT_EQ(g.n, 6);
    ASSERT_EQ(g.ev[0].op, CW_OP_PROCESS_START); /* alive at the start: at the start */
    ASSERT_EQ(g.ev[0].pid, 100);
    ASSERT_EQ(g.ev[0].ts, T0_NS);
    ASSERT_STR_EQ(g.names[0], "a.exe");
    ASSERT_EQ(g.ev[1].op, CW_OP_PROCESS_START);
    ASSERT_EQ(g.ev[1].pid, 200);
    ASSERT_STR_EQ(g.names[1], "b.exe");
    /* Filler i = 100 at T0_TICK + 10 + 100 * 333, the start one tick later. */
    ASSERT_EQ(g.ev[1].ts, T0_NS + (10 + 100 * 333 + 1) * 100);
    int64_t va_ns = T0_NS + (10 + 200 * 333 + 1) * 100;
    ASSERT_EQ(g.ev[2].op, CW_OP_RESERVE);
    ASSERT_EQ(g.ev[3].op, CW_OP_COMMIT);
    for (int i = 2; i <= 3; i++) {
        ASSERT_EQ(g.ev[i].ts, va_ns);
        ASSERT_EQ(g.ev[i].pid, 200);
        ASSERT_EQ(g.ev[i].tid, 204);
        ASSERT_U64_EQ(g.ev[i].size, 0x100000);
        /* Outermost first: the user half reversed, then the kernel's. */
        ASSERT_EQ(g.nframes[i], 4);
        ASSERT_STR_EQ(g.frames[i][0], "b.dll!+0x2080");
        ASSERT_STR_EQ(g.frames[i][1], "b.dll!+0x1040");
        ASSERT_STR_EQ(g.frames[i][2], "ntoskrnl.exe!+0x2000");
        ASSERT_STR_EQ(g.frames[i][3], "ntoskrnl.exe!+0x3000");
    }
    ASSERT_EQ(g.ev[4].op, CW_OP_RELEASE);
    ASSERT_EQ(g.ev[4].stack_id, 0);
    ASSERT_EQ(g.ev[5].op, CW_OP_PROCESS_EXIT);
    ASSERT_EQ(g.ev[5].pid, 200);
    cw_stacks_destroy(g.stacks);

    /* What `etl info` says of it. */
    cw_etl_info_t *in = NULL;
    cw_diag_t d = {{0}};
    ASSERT_OK(cw_etl_info(file, true, &in, &d));
    ASSERT_EQ(in->header.pointer_size, ptr);
    ASSERT_EQ(in->header.ncpu, 3);
    ASSERT_EQ(in->header.compressed, compress);
    ASSERT_EQ(in->header.start_ns, T0_NS);
    ASSERT_EQ(in->header.perf_freq, FREQ);
    ASSERT_TRUE(in->file.buffers > 10);
    ASSERT_EQ(in->file.buffers_corrupt, 0);
    ASSERT_EQ(in->file.reordered, 0);
    ASSERT_TRUE(compress ? in->file.buffers_compressed > 3 : in->file.buffers_compressed == 0);
    ASSERT_EQ(in->file.events, 3 + 600 + 2 + 3 + 2 + 1 + 1); /* the header event first */
    ASSERT_EQ(in->valloc_events, 1);
    ASSERT_EQ(in->vfree_events, 1);
    ASSERT_EQ(in->valloc_with_stack, 1);
    ASSERT_EQ(in->skipped, 2);
    int seen = 0;
    for (size_t i = 0; i < in->ncounts; i++) {
        const cw_etl_count_t *c = &in->counts[i];
        if (c->group == 0x02 && c->type == 98 && c->version == 3) {
            ASSERT_EQ(c->events, 1);
            ASSERT_EQ(c->skipped, 1);
            ASSERT_EQ(c->skip_reason, CW_ENOSYS);
            seen++;
        }
        if (c->group == 0x02 && c->type == 98 && c->version == 2) {
            ASSERT_EQ(c->events, 2);
            ASSERT_EQ(c->skipped, 1);
            ASSERT_EQ(c->skip_reason, CW_EPARSE);
            ASSERT_EQ(c->with_stack, 1);
            seen++;
        }
        if (c->group == 0x01 && c->type == 10) {
            ASSERT_EQ(c->events, 600);
            seen++;
        }
    }
    ASSERT_EQ(seen, 3);
    ASSERT_EQ(in->stacks.walks, 2);
    ASSERT_EQ(in->stacks.joined, 2);
    ASSERT_EQ(in->stacks.orphaned, 0);
    ASSERT_EQ(in->nprocs, 2);
    ASSERT_STR_EQ(in->procs[0].name, "a.exe");
    ASSERT_TRUE(in->procs[0].rundown);
    ASSERT_STR_EQ(in->procs[0].cmdline, "a.exe -r");
    ASSERT_STR_EQ(in->procs[1].name, "b.exe");
    ASSERT_EQ(in->procs[1].end_ns, T0_NS + (10 + 500 * 333 + 1) * 100);
    ASSERT_EQ(in->nimages, 2);
    ASSERT_STR_EQ(in->images[1].name, "C:\\Apps\\B.DLL");
    ASSERT_EQ(in->images[1].pid, 200);
    ASSERT_EQ(in->images[1].size, 0x20000);
    cw_etl_info_free(in);
}

/* ---- damaged files ------------------------------------------------------------------- */

static uint8_t *slurp(const char *file, size_t *n)
{
    FILE *f = fopen(file, "rb");
    ASSERT_TRUE(f != NULL);
    fseek(f, 0, SEEK_END);
    *n = (size_t)ftell(f);
    fseek(f, 0, SEEK_SET);
    uint8_t *p = malloc(*n);
    ASSERT_EQ(fread(p, 1, *n, f), *n);
    fclose(f);
    return p;
}

static void spill(const char *file, const uint8_t *p, size_t n)
{
    FILE *f = fopen(file, "wb");
    ASSERT_TRUE(f != NULL);
    ASSERT_EQ(fwrite(p, 1, n, f), n);
    fclose(f);
}

/* Buffers of 256 KiB, compressed or not, each read whole (in several
 * reads: the reader grows its buffer from 64 KiB as the bytes come). */
static void big_buffers(bool compress)
{
    cw_etlw_opts_t o = {.ptr_size = 8, .ncpu = 1, .compress = compress,
                        .buffer_size = 256 << 10, .start_ns = T0_NS, .start_tick = T0_TICK,
                        .freq = FREQ};
    cw_etlw_t *w;
    ASSERT_OK(cw_etlw_open(path_of("big.etl"), &o, &w));
    uint64_t t = T0_TICK + 10;
    for (int i = 0; i < 20000; i++, t += 7) {
        uint8_t filler[40] = {(uint8_t)i};
        cw_etlw_buf_t b = {filler, sizeof filler, sizeof filler, false};
        ev(w, 0, CW_ETLW_SYSTEM, 0x01, 10, 3, 100, 104, t, &b);
    }
    ASSERT_OK(cw_etlw_close(w));
    cw_etl_info_t *in = NULL;
    cw_diag_t d = {{0}};
    ASSERT_OK(cw_etl_info(path_of("big.etl"), false, &in, &d));
    ASSERT_TRUE(!in->file.truncated);
    ASSERT_EQ(in->file.buffers_corrupt, 0);
    ASSERT_TRUE(in->file.buffers >= 3);
    ASSERT_TRUE(in->file.events >= 20000);
    cw_etl_info_free(in);
    remove(path_of("big.etl"));
}

static void damaged(void)
{
    size_t n;
    uint8_t *p = slurp(path_of("small_z.etl"), &n);
    cw_etl_info_t *in = NULL;
    cw_diag_t d = {{0}};

    /* Cut inside the last buffer: the buffers before it are read. */
    spill(path_of("cut.etl"), p, n - 100);
    ASSERT_OK(cw_etl_info(path_of("cut.etl"), false, &in, &d));
    ASSERT_TRUE(in->file.truncated);
    ASSERT_TRUE(in->file.events > 100 && in->file.events < 611);
    cw_etl_info_free(in);

    /* A compressed buffer whose stream refers before its start. */
    uint8_t *q = malloc(n);
    memcpy(q, p, n);
    size_t at = 0;
    int broken = 0;
    while (at + 0x48 <= n) {
        uint32_t size = q[at] | q[at + 1] << 8 | q[at + 2] << 16 | (uint32_t)q[at + 3] << 24;
        if (!broken && (q[at + 0x34] & 0x40)) {
            static const uint8_t bad[] = {0, 0, 0, 0x80, 0x08, 0x00};
            memcpy(q + at + 0x48, bad, sizeof bad);
            broken = 1;
        }
        at += size;
    }
    ASSERT_EQ(broken, 1);
    spill(path_of("corrupt.etl"), q, n);
    ASSERT_OK(cw_etl_info(path_of("corrupt.etl"), false, &in, &d));
    ASSERT_EQ(in->file.buffers_corrupt, 1);
    ASSERT_TRUE(!in->file.truncated);
    cw_etl_info_free(in);

    /* A buffer size that points past everything: the rest is left. */
    memcpy(q, p, n);
    at = q[0] | q[1] << 8 | q[2] << 16 | (uint32_t)q[3] << 24; /* the second buffer */
    q[at + 3] = 0x7F;
    spill(path_of("badsize.etl"), q, n);
    ASSERT_OK(cw_etl_info(path_of("badsize.etl"), false, &in, &d));
    ASSERT_TRUE(in->file.truncated);
    ASSERT_EQ(in->file.buffers, 1);
    cw_etl_info_free(in);

    /* A buffer that claims more bytes than the file has left (just under
     * the 64 MiB cap), compressed or not: the file ends inside it (the
     * reader reads what is there, growing its buffer as the bytes come,
     * not the 64 MiB the header claims). */
    for (int z = 0; z < 2; z++) {
        memcpy(q, p, n);
        at = q[0] | q[1] << 8 | q[2] << 16 | (uint32_t)q[3] << 24; /* the second buffer */
        const uint8_t big[4] = {0x00, 0x00, 0xF0, 0x03};           /* 0x03F00000 */
        memcpy(q + at, big, sizeof big);
        if (z) q[at + 0x34] |= 0x40;
        else q[at + 0x34] &= (uint8_t)~0x40;
        spill(path_of("claims.etl"), q, n);
        ASSERT_OK(cw_etl_info(path_of("claims.etl"), false, &in, &d));
        ASSERT_TRUE(in->file.truncated);
        ASSERT_EQ(in->file.buffers, 1);
        cw_etl_info_free(in);
    }

    /* Not an .etl file at all, an empty one, and none. */
    spill(path_of("text.etl"), (const uint8_t *)"{\"format\":\"commitwatch-trace\"}\n", 31);
    ASSERT_EQ(cw_etl_info(path_of("text.etl"), false, &in, &d), CW_EPARSE);
    ASSERT_TRUE(strstr(d.msg, "text.etl") && strstr(d.msg, "offset"));
    spill(path_of("empty.etl"), p, 0);
    ASSERT_EQ(cw_etl_info(path_of("empty.etl"), false, &in, &d), CW_EPARSE);
    ASSERT_EQ(cw_etl_info(path_of("missing.etl"), false, &in, &d), CW_EIO);
    ASSERT_TRUE(strstr(d.msg, "missing.etl") != NULL);
    /* Only the header buffer, whose header event is cut short. */
    memcpy(q, p, n);
    q[0x48 + 4] = 0x40; /* the event's size: 0x40, less than the header holds */
    q[0x48 + 5] = 0;
    spill(path_of("shorthdr.etl"), q, 1024);
    ASSERT_EQ(cw_etl_info(path_of("shorthdr.etl"), false, &in, &d), CW_EPARSE);
    free(q);
    free(p);
}

/* ---- the real files ------------------------------------------------------------------ */

/* The real file's path, or NULL when it is missing on a developer's
 * machine: the test then ends skipped (77), never passed; in CI (or as
 * root) a missing file fails the test. */
static const char *real(const char *name)
{
    static char p[1200];
    const char *data = getenv("CW_ETL_DATA");
    snprintf(p, sizeof p, "%s/%s", data ? data : "../shared/data/etl", name);
    FILE *f = fopen(p, "rb");
    if (f) {
        fclose(f);
        return p;
    }
    TEST_SKIP_PART("the checks on %s: the file is missing (the real .etl files belong in "
                   "../shared/data/etl, or CW_ETL_DATA)", p);
    return NULL;
}

static const cw_etl_count_t *count(const cw_etl_info_t *in, unsigned g, unsigned t, unsigned v)
{
    for (size_t i = 0; i < in->ncounts; i++)
        if (in->counts[i].group == g && in->counts[i].type == t && in->counts[i].version == v)
            return &in->counts[i];
    CW_FAIL("no count for group 0x%02x type %u version %u", g, t, v);
}

static void real_files(void)
{
    cw_etl_info_t *in = NULL;
    cw_diag_t d = {{0}};
    const char *p = real("perfview-SelfDescribingSingleEvent.etl");
    if (p) {
        ASSERT_OK(cw_etl_info(p, false, &in, &d));
        ASSERT_EQ(in->header.build, 22000);
        ASSERT_EQ(in->header.pointer_size, 8);
        ASSERT_EQ(in->header.ncpu, 12);
        ASSERT_TRUE(in->header.compressed);
        ASSERT_EQ(in->header.perf_freq, 10000000);
        ASSERT_EQ(in->header.start_ns, 1650490035272243500LL);
        ASSERT_EQ(in->file.buffers, 3);
        ASSERT_EQ(in->file.buffers_compressed, 2); /* both decompress to their size */
        ASSERT_EQ(in->file.buffers_corrupt, 0);
        ASSERT_EQ(in->file.bytes, 7403);
        ASSERT_EQ(in->file.events, 23);
        ASSERT_EQ(in->provider_events, 19);
        ASSERT_EQ(in->providers, 3);
        ASSERT_EQ(in->file.reordered, 0);
        ASSERT_EQ(in->valloc_events, 0);
        cw_etl_info_free(in);
    }
    p = real("airbus-ShutdownPerfDiagLogger.etl");
    if (p) {
        ASSERT_OK(cw_etl_info(p, true, &in, &d));
        ASSERT_EQ(in->header.build, 18362);
        ASSERT_EQ(in->header.os_major, 10);
        ASSERT_EQ(in->header.ncpu, 2);
        ASSERT_EQ(in->header.pointer_size, 8);
        ASSERT_TRUE(!in->header.compressed);
        ASSERT_STR_EQ(in->header.logger_name, "PerfDiag Logger");
        ASSERT_EQ(in->file.buffers, 49);
        ASSERT_EQ(in->file.bytes, 3211264);
        ASSERT_EQ(in->file.events, 17078);
        ASSERT_EQ(in->file.reordered, 0);
        ASSERT_EQ(in->skipped, 0);
        ASSERT_EQ(count(in, 0x03, 2, 4)->events, 60);    /* Process End */
        ASSERT_EQ(count(in, 0x03, 3, 4)->events, 94);    /* Process DCStart */
        ASSERT_EQ(count(in, 0x03, 39, 5)->events, 5);    /* Process Defunct v5 */
        ASSERT_EQ(count(in, 0x03, 10, 3)->events, 72);   /* Image Load (hook 0x030A) */
        ASSERT_EQ(count(in, 0x14, 3, 3)->events, 6745);  /* Image DCStart */
        ASSERT_EQ(count(in, 0x14, 2, 3)->events, 4791);  /* Image Unload */
        ASSERT_EQ(count(in, 0x05, 1, 3)->events, 350);   /* Thread Start */
        ASSERT_EQ(in->nprocs, 97);
        ASSERT_EQ(in->stacks.walks, 0);
        bool svchost = false, kernel = false;
        for (size_t i = 0; i < in->nprocs; i++) {
            const cw_etl_proc_info_t *x = &in->procs[i];
            if (x->pid == 496) {
                ASSERT_STR_EQ(x->name, "svchost.exe");
                ASSERT_EQ(x->ppid, 600);
                ASSERT_TRUE(x->rundown);
                ASSERT_EQ(x->end_ns, 1582910149720849500LL);
                svchost = true;
            }
        }
        for (size_t i = 0; i < in->nimages; i++) {
            const cw_etl_image_info_t *m = &in->images[i];
            if (m->pid == 0 && strstr(m->name, "ntoskrnl.exe")) {
                ASSERT_U64_EQ(m->base, 0xFFFFF802424AB000ull); /* checked in the bytes at 0x13590 */
                ASSERT_U64_EQ(m->size, 0xAB6000);
                kernel = true;
            }
        }
        ASSERT_TRUE(svchost && kernel);
        cw_etl_info_free(in);
    }
}

/* FILETIME to Unix ns at the edges (a fuzzer found the overflow of the
 * first): saturated, never wrapped. */
static void filetime_edges(void)
{
    ASSERT_EQ(cw_etl__filetime_ns(116444736000000000LL), 0);
    ASSERT_EQ(cw_etl__filetime_ns(116444736000000001LL), 100);
    ASSERT_TRUE(cw_etl__filetime_ns(INT64_MIN) == INT64_MIN);
    ASSERT_TRUE(cw_etl__filetime_ns(-9191846763220172782LL) == INT64_MIN);
    ASSERT_TRUE(cw_etl__filetime_ns(INT64_MAX) == INT64_MAX);
    cw_etl__clock_t c = {.freq = 10000000, .base_ts = 1000, .base_ns = T0_NS};
    ASSERT_EQ(cw_etl__clock_ns(&c, 1000), T0_NS);
    ASSERT_EQ(cw_etl__clock_ns(&c, 1001), T0_NS + 100);
    ASSERT_EQ(cw_etl__clock_ns(&c, 999), T0_NS - 100);
    ASSERT_TRUE(cw_etl__clock_ns(&c, UINT64_MAX / 2) == INT64_MAX);
    /* A clock from a header whose tick is whole nanoseconds converts by a
     * multiplication near its base: the same as the general way, at the
     * edges of that reach, past them (saturated), and for other rates. */
    int64_t freqs[] = {10000000, 1000000000, 3579545, 1, 2500000000LL / 2};
    for (size_t i = 0; i < sizeof freqs / sizeof freqs[0]; i++) {
        cw_etl_header_t h = {.clock_type = 1, .perf_freq = freqs[i], .header_ts = 1000,
                             .start_ns = T0_NS};
        cw_etl__clock_t fast, slow;
        ASSERT_OK(cw_etl__clock_init(&fast, &h));
        ASSERT_TRUE((fast.ns_per_tick != 0) == (1000000000LL % freqs[i] == 0));
        slow = fast;
        slow.ns_per_tick = slow.fast_lim = 0;
        int64_t lim = fast.fast_lim ? fast.fast_lim : 1000000;
        int64_t ds[] = {0, 1, -1, 999, -1000, lim - 1, -(lim - 1), lim, -lim, lim + 7,
                        INT64_MAX, INT64_MIN, 123456789012345LL, -98765432109876LL};
        for (size_t k = 0; k < sizeof ds / sizeof ds[0]; k++) {
            uint64_t ts = 1000 + (uint64_t)ds[k];
            ASSERT_EQ(cw_etl__clock_ns(&fast, ts), cw_etl__clock_ns(&slow, ts));
        }
    }
}

/* The losses the header of an .etl says (EventsLost, BuffersLost) are
 * counted as lost, each buffer as one event (docs/ETW.md); the buffers
 * that could not be read as malformed. */
static uint64_t lost_seen;
static bool drops_seen;

static void on_counters(void *ctx, uint64_t seen, uint64_t lost, int64_t drift)
{
    (void)ctx, (void)seen, (void)drift;
    lost_seen = lost;
}

static void on_drops(void *ctx, const cw_source_drops_t *dr)
{
    (void)ctx;
    drops_seen = true;
    ASSERT_EQ(dr->malformed, 0);
}

static void lost_counted(void)
{
    const char *file = path_of("lost.etl");
    small_events_lost = 5;
    small_buffers_lost = 3;
    write_small(file, false, 8);
    small_events_lost = small_buffers_lost = 0;
    got_t g = {0};
    run_etl(file, &g, on_counters, on_drops);
    ASSERT_EQ(lost_seen, 8);
    ASSERT_TRUE(drops_seen);
    cw_stacks_destroy(g.stacks);
}

int main(void)
{
    filetime_edges();
    const char *build = getenv("CW_BUILD");
    snprintf(dir, sizeof dir, "%s", build ? build : ".");
    read_small(false, 8);
    read_small(true, 4);
    read_small(true, 8);
    lost_counted();
    damaged();
    big_buffers(false);
    big_buffers(true);
    real_files();
    TEST_DONE();
}
