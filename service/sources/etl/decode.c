/* decode.c - the ETW kernel payloads commitwatch reads, one decoder each,
 * and the names of the kernel classes and types.
 *
 * Layouts are the MOF classes of the NT Kernel Logger (docs/ETW.md lists
 * them): fields in order, pointers of the recording system's size (4 or 8
 * bytes), strings NUL-terminated (ANSI or UTF-16LE). Every read is
 * bounds-checked: a payload that ends before a field it needs is
 * CW_EPARSE, a version no layout here describes is CW_ENOSYS; the caller
 * counts either as a skip. */
#include <stdio.h>
#include <string.h>

#include "commitwatch/common.h"
#include "commitwatch/etl.h"

/* A cursor over a payload. */
typedef struct cur {
    const uint8_t *p;
    size_t n, at;
    bool bad;
} cur_t;

/* A little-endian value of w <= 8 bytes. */
static uint64_t get(cur_t *c, size_t w)
{
    if (c->bad || c->at > c->n || c->n - c->at < w) {
        c->bad = true;
        return 0;
    }
    const uint8_t *b = c->p + c->at;
    c->at += w;
    /* Pointers and u32 fields, the usual widths, as fixed-width reads
     * (a compiler makes each one load). */
    if (w == 8)
        return (uint64_t)b[0] | (uint64_t)b[1] << 8 | (uint64_t)b[2] << 16 |
               (uint64_t)b[3] << 24 | (uint64_t)b[4] << 32 | (uint64_t)b[5] << 40 |
               (uint64_t)b[6] << 48 | (uint64_t)b[7] << 56;
    if (w == 4)
        return (uint64_t)b[0] | (uint64_t)b[1] << 8 | (uint64_t)b[2] << 16 |
               (uint64_t)b[3] << 24;
    return cw_get_le(b, (int)w);
}

/* Steps over w bytes (reserved fields). */
static void skip_bytes(cur_t *c, size_t w)
{
    if (c->bad || c->at > c->n || c->n - c->at < w) c->bad = true;
    else c->at += w;
}

static uint32_t get32(cur_t *c)
{
    return (uint32_t)get(c, 4);
}

/* A NUL-terminated ANSI string: start and length (no NUL); the cursor
 * moves past the NUL. */
static const char *get_astr(cur_t *c, size_t *len)
{
    if (c->bad) return NULL;
    const uint8_t *s = c->p + c->at;
    const uint8_t *nul = memchr(s, 0, c->n - c->at);
    if (!nul) {
        c->bad = true;
        return NULL;
    }
    *len = (size_t)(nul - s);
    c->at += *len + 1;
    return (const char *)s;
}

/* A NUL-terminated UTF-16LE string: start and length in code units. */
static const uint8_t *get_wstr(cur_t *c, size_t *units)
{
    if (c->bad) return NULL;
    const uint8_t *s = c->p + c->at;
    size_t avail = (c->n - c->at) / 2;
    for (size_t i = 0; i < avail; i++) {
        if (s[2 * i] == 0 && s[2 * i + 1] == 0) {
            *units = i;
            c->at += 2 * i + 2;
            return s;
        }
    }
    c->bad = true;
    return NULL;
}

/* The user SID of a Process event: a TOKEN_USER (a pointer to the SID and
 * the attributes, padded to two pointers) followed by the SID itself (8
 * bytes and 4 per sub-authority, their count in the SID's second byte).
 * A null first word stands for no SID and takes 4 bytes (as TraceEvent
 * reads it; not seen in the traces checked). */
static void skip_sid(cur_t *c, unsigned ptr)
{
    if (c->bad || c->n - c->at < 4) {
        c->bad = true;
        return;
    }
    if (c->p[c->at] == 0 && c->p[c->at + 1] == 0 && c->p[c->at + 2] == 0 &&
        c->p[c->at + 3] == 0) {
        c->at += 4;
        return;
    }
    size_t tok = 2 * (size_t)ptr;
    if (c->n - c->at < tok + 8) {
        c->bad = true;
        return;
    }
    size_t sid = 8 + 4 * (size_t)c->p[c->at + tok + 1];
    if (c->n - c->at < tok + sid) {
        c->bad = true;
        return;
    }
    c->at += tok + sid;
}

static int done(const cur_t *c)
{
    return c->bad ? CW_EPARSE : 0;
}

static bool ptr_ok(unsigned ptr)
{
    return ptr == 4 || ptr == 8;
}

/* Every decoder's start: *out cleared (size bytes) and a cursor at p[0]. */
static cur_t start(const uint8_t *p, size_t n, void *out, size_t size)
{
    memset(out, 0, size);
    return (cur_t){p, n, 0, false};
}

/* The first fields of StackWalk and of a key reference: the raw time
 * stamp of the event the stack belongs to, its process and thread. */
static void stack_head(cur_t *c, uint64_t *event_ts, uint32_t *pid, uint32_t *tid)
{
    *event_ts = get(c, 8);
    *pid = get32(c);
    *tid = get32(c);
}

/* The payload's rest as whole frames of ptr bytes (StackWalk, the key
 * events): 0, or CW_EPARSE when a field before them ran short or the rest
 * is not whole frames. */
static int rest_frames(const cur_t *c, unsigned ptr, const uint8_t **frames, uint32_t *nframes,
                       unsigned *ptr_size)
{
    if (c->bad || (c->n - c->at) % ptr != 0) return CW_EPARSE;
    *frames = c->p + c->at;
    *nframes = (uint32_t)((c->n - c->at) / ptr);
    *ptr_size = ptr;
    return 0;
}

int cw_etl_decode_process(const uint8_t *p, size_t n, unsigned version, unsigned ptr,
                          cw_etl_process_t *out)
{
    cur_t c = start(p, n, out, sizeof *out);
    if (!ptr_ok(ptr) || version > 5) return CW_ENOSYS;
    if (version == 0) {
        /* Windows 2000: ProcessId and ParentId are pointer-sized. */
        out->pid = (uint32_t)get(&c, ptr);
        out->ppid = (uint32_t)get(&c, ptr);
    } else {
        get(&c, ptr); /* v1: PageDirectoryBase; v2+: UniqueProcessKey */
        out->pid = get32(&c);
        out->ppid = get32(&c);
        out->session = get32(&c);
        out->exit_status = (int32_t)get32(&c);
        if (version >= 3) get(&c, ptr); /* DirectoryTableBase */
        if (version >= 4) get32(&c);    /* Flags */
    }
    skip_sid(&c, ptr);
    out->image = get_astr(&c, &out->image_len);
    if (version >= 2) out->cmdline = get_wstr(&c, &out->cmdline_units);
    /* v4: PackageFullName and ApplicationId follow; v5 (Defunct) an exit
     * time: nothing here needs them. */
    return done(&c);
}

int cw_etl_decode_image(const uint8_t *p, size_t n, unsigned version, unsigned ptr,
                        cw_etl_image_t *out)
{
    cur_t c = start(p, n, out, sizeof *out);
    if (!ptr_ok(ptr) || version < 2 || version > 3) return CW_ENOSYS;
    out->base = get(&c, ptr);
    out->size = get(&c, ptr);
    out->pid = get32(&c);
    out->checksum = get32(&c);
    out->time_date_stamp = get32(&c);
    get32(&c);    /* v2 Reserved0; v3 SignatureLevel, SignatureType, Reserved0 */
    get(&c, ptr); /* DefaultBase */
    skip_bytes(&c, 16); /* Reserved1..4 */
    out->name = get_wstr(&c, &out->name_units);
    return done(&c);
}

int cw_etl_decode_thread(const uint8_t *p, size_t n, unsigned version, unsigned ptr,
                         cw_etl_thread_t *out)
{
    cur_t c = start(p, n, out, sizeof *out);
    if (!ptr_ok(ptr) || version > 4) return CW_ENOSYS;
    if (version == 0) {
        out->tid = get32(&c);
        out->pid = get32(&c);
    } else {
        out->pid = get32(&c);
        out->tid = get32(&c);
    }
    return done(&c);
}

/* Every decoder starts alike (start(), the version check); the fields after are its own. */
int cw_etl_decode_valloc(const uint8_t *p, size_t n, unsigned version, unsigned ptr,
                         cw_etl_valloc_t *out)
{
    cur_t c = start(p, n, out, sizeof *out);
    if (!ptr_ok(ptr) || version != 2) return CW_ENOSYS;
    out->base = get(&c, ptr);
    out->size = get(&c, ptr);
    out->pid = get32(&c);
    out->flags = get32(&c);
    return done(&c);
}

int cw_etl_valloc_ops(uint32_t flags, cw_op_t ops[2])
{
    int n = 0;
    if (flags & CW_ETL_MEM_RESERVE) ops[n++] = CW_OP_RESERVE;
    if (flags & CW_ETL_MEM_COMMIT) ops[n++] = CW_OP_COMMIT;
    if (n) return n;
    /* VirtualFree takes exactly one of the two. */
    if (flags & CW_ETL_MEM_RELEASE) ops[n++] = CW_OP_RELEASE;
    else if (flags & CW_ETL_MEM_DECOMMIT) ops[n++] = CW_OP_DECOMMIT;
    return n;
}

int cw_etl_decode_heap(const uint8_t *p, size_t n, unsigned type, unsigned version, unsigned ptr,
                       cw_etl_heap_t *out)
{
    cur_t c = start(p, n, out, sizeof *out);
    if (!ptr_ok(ptr) || version != 2) return CW_ENOSYS;
    out->type = (uint8_t)type;
    out->heap = get(&c, ptr);
    switch (type) {
    case CW_ETL_T_HEAP_ALLOC:
        out->size = get(&c, ptr);
        out->addr = get(&c, ptr);
        break;
    case CW_ETL_T_HEAP_REALLOC:
        out->addr = get(&c, ptr);
        out->old_addr = get(&c, ptr);
        out->size = get(&c, ptr);
        out->old_size = get(&c, ptr);
        break;
    case CW_ETL_T_HEAP_FREE:
        out->addr = get(&c, ptr);
        break;
    default:
        return CW_ENOSYS;
    }
    out->source = get32(&c);
    return done(&c);
}

int cw_etl_decode_stackwalk(const uint8_t *p, size_t n, unsigned version, unsigned ptr,
                            cw_etl_stackwalk_t *out)
{
    cur_t c = start(p, n, out, sizeof *out);
    if (!ptr_ok(ptr) || version != 2) return CW_ENOSYS;
    stack_head(&c, &out->event_ts, &out->pid, &out->tid);
    return rest_frames(&c, ptr, &out->frames, &out->nframes, &out->ptr_size);
}

int cw_etl_decode_stackref(const uint8_t *p, size_t n, unsigned version, unsigned ptr,
                           cw_etl_stackref_t *out)
{
    cur_t c = start(p, n, out, sizeof *out);
    if (!ptr_ok(ptr) || version != 2) return CW_ENOSYS;
    stack_head(&c, &out->event_ts, &out->pid, &out->tid);
    out->key = get(&c, ptr);
    return done(&c);
}

int cw_etl_decode_stackdef(const uint8_t *p, size_t n, unsigned version, unsigned ptr,
                           cw_etl_stackdef_t *out)
{
    cur_t c = start(p, n, out, sizeof *out);
    if (!ptr_ok(ptr) || version != 2) return CW_ENOSYS;
    out->key = get(&c, ptr);
    return rest_frames(&c, ptr, &out->frames, &out->nframes, &out->ptr_size);
}

uint64_t cw_etl_frame(const uint8_t *frames, uint32_t i, unsigned ptr)
{
    const uint8_t *p = frames + (size_t)i * ptr;
    uint64_t lo = (uint64_t)p[0] | (uint64_t)p[1] << 8 | (uint64_t)p[2] << 16 | (uint64_t)p[3] << 24;
    if (ptr == 4) return lo;
    return lo | (uint64_t)p[4] << 32 | (uint64_t)p[5] << 40 | (uint64_t)p[6] << 48 |
           (uint64_t)p[7] << 56;
}

bool cw_etl_kernel_address(uint64_t addr, unsigned ptr)
{
    /* 32-bit Windows: the upper 2 GB (without /3GB); 64-bit: the upper
     * half of the canonical address space. */
    return ptr == 4 ? addr >= 0x80000000u : addr >= 0xFFFF800000000000ull;
}

/* Appends code point cp as UTF-8 if it fits in dst[cap - 1]. */
static bool put_utf8(char *dst, size_t cap, size_t *at, uint32_t cp)
{
    char b[4];
    size_t k;
    if (cp < 0x80) {
        b[0] = (char)cp;
        k = 1;
    } else if (cp < 0x800) {
        b[0] = (char)(0xC0 | cp >> 6);
        b[1] = (char)(0x80 | (cp & 0x3F));
        k = 2;
    } else if (cp < 0x10000) {
        b[0] = (char)(0xE0 | cp >> 12);
        b[1] = (char)(0x80 | (cp >> 6 & 0x3F));
        b[2] = (char)(0x80 | (cp & 0x3F));
        k = 3;
    } else {
        b[0] = (char)(0xF0 | cp >> 18);
        b[1] = (char)(0x80 | (cp >> 12 & 0x3F));
        b[2] = (char)(0x80 | (cp >> 6 & 0x3F));
        b[3] = (char)(0x80 | (cp & 0x3F));
        k = 4;
    }
    if (cap - 1 - *at < k) return false;
    memcpy(dst + *at, b, k);
    *at += k;
    return true;
}

size_t cw_etl_utf16_to_utf8(const uint8_t *src, size_t units, char *dst, size_t cap)
{
    size_t at = 0;
    for (size_t i = 0; i < units; i++) {
        uint32_t u = (uint32_t)src[2 * i] | (uint32_t)src[2 * i + 1] << 8;
        uint32_t cp = u;
        if (u >= 0xD800 && u < 0xDC00 && i + 1 < units) {
            uint32_t lo = (uint32_t)src[2 * i + 2] | (uint32_t)src[2 * i + 3] << 8;
            if (lo >= 0xDC00 && lo < 0xE000) {
                cp = 0x10000 + ((u - 0xD800) << 10) + (lo - 0xDC00);
                i++;
            } else {
                cp = 0xFFFD;
            }
        } else if (u >= 0xD800 && u < 0xE000) {
            cp = 0xFFFD;
        }
        if (!put_utf8(dst, cap, &at, cp)) break;
    }
    dst[at] = '\0';
    return at;
}

/* ---- names -------------------------------------------------------------------- */

static const char *const group_names[] = {
    [0x00] = "EventTrace", [0x01] = "DiskIo",     [0x02] = "PageFault",   [0x03] = "Process",
    [0x04] = "FileIo",     [0x05] = "Thread",     [0x06] = "TcpIp",       [0x07] = "Job",
    [0x08] = "UdpIp",      [0x09] = "Registry",   [0x0A] = "DbgPrint",    [0x0B] = "SystemConfig",
    [0x0D] = "Wnf",        [0x0E] = "Pool",       [0x0F] = "PerfInfo",    [0x10] = "Heap",
    [0x11] = "Object",     [0x12] = "Power",      [0x13] = "Modbound",    [0x14] = "Image",
    [0x15] = "Dpc",        [0x16] = "Gdi",        [0x17] = "CritSec",     [0x18] = "StackWalk",
    [0x19] = "Ums",        [0x1A] = "ALPC",       [0x1B] = "SplitIo",     [0x1C] = "ThreadPool",
    [0x1D] = "Hypervisor", [0x1E] = "HypervisorX",
};

const char *cw_etl_class_name(unsigned group, unsigned type, char buf[16])
{
    if (group == CW_ETL_G_PROCESS && type == CW_ETL_T_IMAGE_LOAD) group = CW_ETL_G_IMAGE;
    if (group < CW_ARRAY_LEN(group_names) && group_names[group]) return group_names[group];
    snprintf(buf, 16, "Group0x%02X", group & 0xFFu);
    return buf;
}

typedef struct type_name {
    uint8_t group, type;
    const char *name;
} type_name_t;

/* The types of the classes this reader interprets, and a few common ones
 * so `etl info` reads well. */
static const type_name_t type_names[] = {
    {0x00, 0, "Header"},         {0x00, 5, "Extension"},      {0x00, 8, "RundownComplete"},
    {0x00, 32, "EndExtension"},  {0x01, 10, "Read"},          {0x01, 11, "Write"},
    {0x01, 12, "ReadInit"},      {0x01, 13, "WriteInit"},     {0x01, 14, "Flush"},
    {0x01, 15, "FlushInit"},     {0x02, 32, "HardFault"},     {0x02, 98, "VirtualAlloc"},
    {0x02, 99, "VirtualFree"},   {0x03, 1, "Start"},          {0x03, 2, "End"},
    {0x03, 3, "DCStart"},        {0x03, 4, "DCEnd"},          {0x03, 10, "Load"},
    {0x03, 11, "Terminate"},     {0x03, 32, "PerfCtr"},       {0x03, 33, "PerfCtrRundown"},
    {0x03, 39, "Defunct"},       {0x04, 0, "Name"},           {0x04, 32, "FileCreate"},
    {0x04, 35, "FileDelete"},    {0x04, 36, "FileRundown"},   {0x05, 1, "Start"},
    {0x05, 2, "End"},            {0x05, 3, "DCStart"},        {0x05, 4, "DCEnd"},
    {0x05, 36, "CSwitch"},       {0x05, 50, "ReadyThread"},   {0x06, 26, "RecvIPV4"},
    {0x06, 27, "SendIPV4"},      {0x0B, 10, "CPU"},           {0x0B, 15, "Services"},
    {0x0B, 22, "PnP"},           {0x0F, 46, "SampledProfile"}, {0x0F, 51, "SysCallEnter"},
    {0x0F, 52, "SysCallExit"},   {0x10, 0x21, "Alloc"},       {0x10, 0x22, "ReAlloc"},
    {0x10, 0x24, "Free"},   {0x14, 2, "Unload"},         {0x14, 3, "DCStart"},
    {0x14, 4, "DCEnd"},          {0x14, 10, "Load"},          {0x14, 33, "KernelBase"},
    {0x18, 32, "Stack"},         {0x18, 34, "KeyCreate"},     {0x18, 35, "KeyDelete"},
    {0x18, 36, "KeyRundown"},    {0x18, 37, "StackKeyKernel"}, {0x18, 38, "StackKeyUser"},
};

const char *cw_etl_type_name(unsigned group, unsigned type)
{
    for (size_t i = 0; i < CW_ARRAY_LEN(type_names); i++)
        if (type_names[i].group == group && type_names[i].type == type) return type_names[i].name;
    return NULL;
}
