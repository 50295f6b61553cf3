/* test_etw_live.c - the live ETW source without a kernel session (Windows;
 * runs under Wine, which has none): EVENT_RECORDs as a real-time consumer
 * receives them (the kernel's class GUIDs, opcodes, versions, the 32-bit
 * header flag, processor numbers, -1 process ids), built around the
 * payloads tests/etlgen writes, through cw_etw__record_event() into the
 * .etl reader's live mode: the events the pipeline gets, their times,
 * owners, operations and stacks. */
#include <windows.h>

#include <evntcons.h>
#include <stdlib.h>
#include <string.h>

#include "commitwatch/stacks.h"
#include "etl_writer.h"
#include "sources/etl/etl_internal.h"
#include "sources/etw/etw_internal.h"
#include "test.h"

static const GUID process_guid = {
    0x3d6fa8d0, 0xfe05, 0x11d0, {0x9d, 0xda, 0x00, 0xc0, 0x4f, 0xd7, 0xba, 0x7c}};
static const GUID thread_guid = {
    0x3d6fa8d1, 0xfe05, 0x11d0, {0x9d, 0xda, 0x00, 0xc0, 0x4f, 0xd7, 0xba, 0x7c}};
static const GUID pagefault_guid = {
    0x3d6fa8d3, 0xfe05, 0x11d0, {0x9d, 0xda, 0x00, 0xc0, 0x4f, 0xd7, 0xba, 0x7c}};
static const GUID image_guid = {
    0x2cb15d1d, 0x5fc1, 0x11d2, {0xab, 0xe1, 0x00, 0xa0, 0xc9, 0x11, 0xf5, 0x18}};
static const GUID stackwalk_guid = {
    0xdef2fe46, 0x7bd6, 0x4b80, {0xbd, 0x94, 0xf5, 0x7f, 0xe2, 0x0d, 0x0c, 0xe3}};
static const GUID other_guid = {
    0x12345678, 0x1234, 0x5678, {0x9a, 0xbc, 0xde, 0xf0, 0x12, 0x34, 0x56, 0x78}};

#define FREQ 10000000LL /* a 10 MHz performance counter */
#define T0 5000000000ull
#define NS0 1700000000000000000LL

typedef struct got {
    cw_event_t ev;
    char frames[512];
    char name[64];
} got_t;

static got_t got[64];
static size_t ngot;
static cw_stacks_t *stacks;

static int collect(void *ctx, const cw_event_t *ev)
{
    (void)ctx;
    ASSERT_TRUE(ngot < sizeof got / sizeof got[0]);
    got_t *g = &got[ngot++];
    g->ev = *ev;
    g->frames[0] = g->name[0] = '\0';
    if (ev->name) snprintf(g->name, sizeof g->name, "%s", ev->name);
    uint32_t n = 0;
    const uint32_t *f = cw_stacks_frames(stacks, ev->stack_id, &n);
    for (uint32_t i = 0; i < n; i++) {
        size_t len = strlen(g->frames);
        snprintf(g->frames + len, sizeof g->frames - len, "%s%s", i ? ";" : "",
                 cw_stacks_frame_text(stacks, f[i]));
    }
    return 0;
}

/* An EVENT_RECORD as ProcessTrace hands it over. */
static EVENT_RECORD record(const GUID *provider, unsigned opcode, unsigned version, unsigned ptr,
                           uint32_t pid, uint32_t tid, uint64_t tick, uint16_t cpu,
                           const cw_etlw_buf_t *b)
{
    EVENT_RECORD er;
    memset(&er, 0, sizeof er);
    er.EventHeader.ProviderId = *provider;
    er.EventHeader.EventDescriptor.Opcode = (UCHAR)opcode;
    er.EventHeader.EventDescriptor.Version = (UCHAR)version;
    er.EventHeader.Flags = ptr == 4 ? EVENT_HEADER_FLAG_32_BIT_HEADER
                                    : EVENT_HEADER_FLAG_64_BIT_HEADER;
    er.EventHeader.ProcessId = pid;
    er.EventHeader.ThreadId = tid;
    er.EventHeader.TimeStamp.QuadPart = (LONGLONG)tick;
    er.BufferContext.ProcessorNumber = (UCHAR)cpu;
    er.UserData = b ? b->p : NULL;
    er.UserDataLength = b ? (USHORT)b->n : 0;
    return er;
}

#define BUF(name)                                                                                  \
    uint8_t name##_mem[2048];                                                                      \
    cw_etlw_buf_t name = {name##_mem, 0, sizeof name##_mem, false}

static void conversion(void)
{
    BUF(b);
    cw_etlw_valloc(&b, 4, 0x01420000, 0x40000, 3544, 0x8000);
    EVENT_RECORD er = record(&pagefault_guid, 99, 2, 4, UINT32_MAX, 0, T0 + 7, 3, &b);
    cw_etl_event_t ev;
    cw_etw__record_event(&er, &ev);
    ASSERT_TRUE(ev.kernel);
    ASSERT_EQ(ev.group, CW_ETL_G_PAGEFAULT);
    ASSERT_EQ(ev.type, CW_ETL_T_VIRTUAL_FREE);
    ASSERT_EQ(ev.version, 2);
    ASSERT_EQ(ev.ptr_size, 4);
    ASSERT_EQ(ev.cpu, 3);
    ASSERT_TRUE(!ev.has_ids);
    ASSERT_U64_EQ(ev.ts, T0 + 7);
    ASSERT_TRUE(ev.data == b.p && ev.len == b.n);

    static const struct {
        const GUID *g;
        int group;
    } classes[] = {{&process_guid, CW_ETL_G_PROCESS}, {&thread_guid, CW_ETL_G_THREAD},
                   {&image_guid, CW_ETL_G_IMAGE},     {&stackwalk_guid, CW_ETL_G_STACKWALK},
                   {&pagefault_guid, CW_ETL_G_PAGEFAULT}};
    for (size_t i = 0; i < sizeof classes / sizeof classes[0]; i++) {
        er = record(classes[i].g, 1, 3, 8, 42, 43, T0, 0, NULL);
        cw_etw__record_event(&er, &ev);
        ASSERT_TRUE(ev.kernel);
        ASSERT_EQ(ev.group, classes[i].group);
        ASSERT_EQ(ev.ptr_size, 8);
        ASSERT_TRUE(ev.has_ids && ev.pid == 42 && ev.tid == 43);
    }
    er = record(&other_guid, 1, 0, 8, 42, 43, T0, 0, NULL);
    cw_etw__record_event(&er, &ev);
    ASSERT_TRUE(!ev.kernel);
    ASSERT_TRUE(memcmp(ev.guid, &other_guid, 16) == 0);
}

static int feed(cw_etl__reader_t *r, EVENT_RECORD er)
{
    cw_etl_event_t ev;
    cw_etw__record_event(&er, &ev);
    return cw_etl__reader_feed(r, &ev);
}

/* A process starts, loads two images, commits with a stack (the kernel
 * and user halves as two StackWalk events), decommits, and a commit whose
 * stack never comes is still delivered once its horizon has passed. */
static void session(void)
{
    ASSERT_OK(cw_stacks_create(&stacks));
    cw_etl__clock_t clock = {.system_time = false, .freq = FREQ, .base_ts = T0, .base_ns = NS0};
    cw_etl__reader_t r;
    cw_diag_t d = {{0}};
    ASSERT_OK(cw_etl__reader_open_live(&r, stacks, &clock, &d));
    r.emit = collect;
    r.ctx = NULL;
    const uint64_t app = 0x7FF700000000ull, ntdll = 0x7FFA00000000ull,
                   nt = 0xFFFFF80000000000ull;
    BUF(b);

    cw_etlw_process(&b, 4, 8, 1234, 4, "app.exe", "app.exe --leak");
    ASSERT_OK(feed(&r, record(&process_guid, 1, 4, 8, 1234, 10, T0 + 100, 0, &b)));
    b.n = 0;
    cw_etlw_image(&b, 3, 8, nt, 0x1000000, 0, "\\SystemRoot\\system32\\ntoskrnl.exe");
    ASSERT_OK(feed(&r, record(&image_guid, 3, 3, 8, 0, 0, T0 + 101, 0, &b)));
    b.n = 0;
    cw_etlw_image(&b, 3, 8, app, 0x100000, 1234, "\\Device\\HarddiskVolume2\\app\\app.exe");
    ASSERT_OK(feed(&r, record(&image_guid, 10, 3, 8, 1234, 10, T0 + 110, 0, &b)));
    b.n = 0;
    cw_etlw_image(&b, 3, 8, ntdll, 0x200000, 1234, "\\Windows\\System32\\ntdll.dll");
    ASSERT_OK(feed(&r, record(&image_guid, 10, 3, 8, 1234, 10, T0 + 120, 0, &b)));

    /* VirtualAlloc(MEM_RESERVE | MEM_COMMIT) on CPU 1, thread 77; its
     * kernel stack, then its user stack. */
    const uint64_t t_alloc = T0 + FREQ; /* one second in */
    b.n = 0;
    cw_etlw_valloc(&b, 8, 0x20000, 0x3000, 1234, 0x3000);
    ASSERT_OK(feed(&r, record(&pagefault_guid, 98, 2, 8, 1234, 77, t_alloc, 1, &b)));
    uint64_t kframes[] = {nt + 0x2000};
    b.n = 0;
    cw_etlw_stackwalk(&b, 8, t_alloc, 1234, 77, kframes, 1);
    ASSERT_OK(feed(&r, record(&stackwalk_guid, 32, 2, 8, 1234, 77, t_alloc + 1, 1, &b)));
    uint64_t uframes[] = {ntdll + 0x1234, app + 0x5678};
    b.n = 0;
    cw_etlw_stackwalk(&b, 8, t_alloc, 1234, 77, uframes, 2);
    ASSERT_OK(feed(&r, record(&stackwalk_guid, 32, 2, 8, 1234, 77, t_alloc + 2, 1, &b)));

    /* VirtualFree(MEM_DECOMMIT): no stack is asked for it. */
    b.n = 0;
    cw_etlw_valloc(&b, 8, 0x21000, 0x1000, 1234, 0x4000);
    ASSERT_OK(feed(&r, record(&pagefault_guid, 99, 2, 8, 1234, 77, t_alloc + 50, 1, &b)));
    /* A provider's event: not the source's business. */
    ASSERT_OK(feed(&r, record(&other_guid, 1, 0, 8, 1234, 77, t_alloc + 60, 0, NULL)));
    /* A commit whose stack is lost. */
    const uint64_t t_lost = t_alloc + FREQ;
    b.n = 0;
    cw_etlw_valloc(&b, 8, 0x40000, 0x2000, 1234, 0x1000);
    ASSERT_OK(feed(&r, record(&pagefault_guid, 98, 2, 8, 1234, 78, t_lost, 0, &b)));

    /* Nothing of the lost-stack commit before its horizon (2 s)... */
    ASSERT_OK(cw_etl__reader_release(&r, t_lost + FREQ, false));
    size_t before = ngot;
    for (size_t i = 0; i < ngot; i++) ASSERT_TRUE(got[i].ev.addr != 0x40000);
    /* ... then it goes out without one. */
    ASSERT_OK(cw_etl__reader_release(&r, t_lost + 3 * FREQ, false));
    ASSERT_EQ(ngot, before + 1);
    ASSERT_OK(cw_etl__reader_release(&r, 0, true));

    ASSERT_EQ(ngot, 5);
    ASSERT_EQ(got[0].ev.op, CW_OP_PROCESS_START);
    ASSERT_EQ(got[0].ev.pid, 1234);
    ASSERT_STR_EQ(got[0].name, "app.exe");
    ASSERT_TRUE(got[0].ev.ts == NS0 + 100 * 100); /* 100 ticks of 100 ns */

    ASSERT_EQ(got[1].ev.op, CW_OP_RESERVE);
    ASSERT_EQ(got[2].ev.op, CW_OP_COMMIT);
    for (int i = 1; i <= 2; i++) {
        ASSERT_EQ(got[i].ev.pid, 1234);
        ASSERT_EQ(got[i].ev.tid, 77);
        ASSERT_U64_EQ(got[i].ev.addr, 0x20000);
        ASSERT_U64_EQ(got[i].ev.size, 0x3000);
        ASSERT_TRUE(got[i].ev.ts == NS0 + 1000000000LL);
        /* Outermost first: the user half reversed, then the kernel's. */
        ASSERT_STR_EQ(got[i].frames, "app.exe!+0x5678;ntdll.dll!+0x1234;ntoskrnl.exe!+0x2000");
    }
    ASSERT_EQ(got[3].ev.op, CW_OP_DECOMMIT);
    ASSERT_U64_EQ(got[3].ev.addr, 0x21000);
    ASSERT_U64_EQ(got[3].ev.size, 0x1000);
    ASSERT_EQ(got[3].ev.stack_id, 0);
    ASSERT_EQ(got[4].ev.op, CW_OP_COMMIT);
    ASSERT_U64_EQ(got[4].ev.addr, 0x40000);
    ASSERT_EQ(got[4].ev.stack_id, 0);
    ASSERT_TRUE(got[4].ev.ts == NS0 + 2000000000LL);

    cw_etl__reader_close(&r);
    cw_stacks_destroy(stacks);
}

/* The held-back events: each poll's batch sorted and merged in, in time
 * order, equal times in arrival order. */
static void queue_merge(void)
{
    cw_etw_queue_t held = {0}, batch = {0};
    static const uint64_t first[] = {1, 3, 5}, second[] = {4, 2, 5, 0, 3};
    uint64_t seq = 0;
    ASSERT_OK(cw_etw__queue_merge(&held, &batch)); /* nothing to merge */
    ASSERT_EQ(held.n, 0);
    for (int round = 0; round < 2; round++) {
        const uint64_t *ts = round ? second : first;
        size_t n = round ? 5 : 3;
        batch.v = calloc(n, sizeof *batch.v);
        batch.cap = n;
        ASSERT_TRUE(batch.v != NULL);
        for (size_t i = 0; i < n; i++) {
            batch.v[i].ev.ts = ts[i];
            batch.v[i].seq = seq++;
        }
        batch.n = n;
        ASSERT_OK(cw_etw__queue_merge(&held, &batch));
        ASSERT_EQ(batch.n, 0);
        free(batch.v);
        batch = (cw_etw_queue_t){0};
    }
    /* ts 0(seq 6) 1(0) 2(4) 3(1) 3(7) 4(3) 5(2) 5(5) */
    static const uint64_t want_ts[] = {0, 1, 2, 3, 3, 4, 5, 5}, want_seq[] = {6, 0, 4, 1, 7, 3, 2, 5};
    ASSERT_EQ(held.n, 8);
    for (size_t i = 0; i < 8; i++) {
        ASSERT_U64_EQ(held.v[i].ev.ts, want_ts[i]);
        ASSERT_U64_EQ(held.v[i].seq, want_seq[i]);
    }
    free(held.v);
}

int main(void)
{
    conversion();
    queue_merge();
    session();
    TEST_DONE();
}
