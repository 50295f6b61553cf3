/* etl_writer.h - writes Windows event trace (.etl) files laid out like the
 * ones the kernel logger writes, for tests, fuzz seeds and the benchmark.
 *
 * The layout follows ../shared/WINDOWS.md and docs/ETW.md: a header buffer
 * (buffer type 4) first, holding the TRACE_LOGFILE_HEADER event, then
 * per-CPU buffers of 8-byte aligned events flushed as they fill, so the
 * file holds them out of order; with compression, every other buffer of
 * each CPU is XPRESS-compressed (flag 0x40) and the others are not, as a
 * relogger writes them. Events have SYSTEM or PERFINFO headers (32- or
 * 64-bit by the trace's pointer size), payloads as the kernel writes
 * them (the cw_etlw_put_* builders).
 *
 * Nothing here is part of the product: the reader never sees this code.
 * Thread: one writer per thread. */
#ifndef CW_TESTS_ETL_WRITER_H
#define CW_TESTS_ETL_WRITER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef struct cw_etlw_opts {
    unsigned ptr_size;    /* 4 or 8: the recording system's */
    unsigned ncpu;        /* 1 to 64 */
    bool compress;        /* EVENT_TRACE_COMPRESSED_MODE: every other buffer compressed */
    uint32_t buffer_size; /* bytes per buffer (default 64 KiB) */
    int64_t start_ns;     /* Unix ns of the header event (a multiple of 100) */
    uint64_t start_tick;  /* its raw timestamp */
    int64_t freq;         /* ticks per second (QPC) */
    uint32_t build;       /* OS build, e.g. 19045 */
    uint32_t events_lost, buffers_lost; /* what the header says the session lost */
} cw_etlw_opts_t;

typedef struct cw_etlw cw_etlw_t;

/* 0, or -1 (errno) when path cannot be written. */
int cw_etlw_open(const char *path, const cw_etlw_opts_t *o, cw_etlw_t **out);
/* Flushes every buffer and completes the header. 0 or -1; frees w. */
int cw_etlw_close(cw_etlw_t *w);

enum { CW_ETLW_SYSTEM, CW_ETLW_PERFINFO, CW_ETLW_FULL };

/* One classic kernel event on cpu: hook id group << 8 | type, the given
 * header kind (SYSTEM carries pid and tid; PERFINFO does not; FULL, as a
 * user-mode classic provider writes it, carries them and the class GUID
 * of the group instead of the hook id: group 0x10, Heap, only), payload
 * data[0..len). Events of one CPU must come in time order. 0 or -1. */
int cw_etlw_event(cw_etlw_t *w, unsigned cpu, int kind, unsigned group, unsigned type,
                  unsigned version, uint32_t pid, uint32_t tid, uint64_t tick, const uint8_t *data,
                  size_t len);
/* The buffers written so far (the header buffer included). */
uint64_t cw_etlw_buffers(const cw_etlw_t *w);

/* ---- payloads: appended to b (cap bytes), returning the new length ---- */

typedef struct cw_etlw_buf {
    uint8_t *p;
    size_t n, cap;
    bool overflow;
} cw_etlw_buf_t;

void cw_etlw_u8(cw_etlw_buf_t *b, uint8_t v);
void cw_etlw_u16(cw_etlw_buf_t *b, uint16_t v);
void cw_etlw_u32(cw_etlw_buf_t *b, uint32_t v);
void cw_etlw_u64(cw_etlw_buf_t *b, uint64_t v);
void cw_etlw_ptr(cw_etlw_buf_t *b, unsigned ptr_size, uint64_t v);
void cw_etlw_astr(cw_etlw_buf_t *b, const char *s);  /* with its NUL */
void cw_etlw_wstr(cw_etlw_buf_t *b, const char *s);  /* ASCII as UTF-16LE, with its NUL */

/* Process v3 (Windows 7) or v4 (8 and later), with a user SID. */
void cw_etlw_process(cw_etlw_buf_t *b, unsigned version, unsigned ptr, uint32_t pid, uint32_t ppid,
                     const char *image, const char *cmdline);
/* Image v2 or v3. */
void cw_etlw_image(cw_etlw_buf_t *b, unsigned version, unsigned ptr, uint64_t base, uint64_t size,
                   uint32_t pid, const char *path);
/* Thread v3. */
void cw_etlw_thread(cw_etlw_buf_t *b, unsigned ptr, uint32_t pid, uint32_t tid);
/* VirtualAlloc / VirtualFree v2. */
void cw_etlw_valloc(cw_etlw_buf_t *b, unsigned ptr, uint64_t base, uint64_t size, uint32_t pid,
                    uint32_t flags);
/* StackWalk Stack (32): frames innermost first. */
void cw_etlw_stackwalk(cw_etlw_buf_t *b, unsigned ptr, uint64_t event_tick, uint32_t pid,
                       uint32_t tid, const uint64_t *frames, size_t n);
/* StackKeyKernel/User (37/38) and a key's definition (34-36). */
void cw_etlw_stackref(cw_etlw_buf_t *b, unsigned ptr, uint64_t event_tick, uint32_t pid,
                      uint32_t tid, uint64_t key);
void cw_etlw_stackdef(cw_etlw_buf_t *b, unsigned ptr, uint64_t key, const uint64_t *frames,
                      size_t n);

/* XPRESS (MS-XCA plain LZ77) compression of in[0..n) into out[cap]: the
 * compressed length, or 0 when it does not fit. Greedy, one hash probe. */
size_t cw_etlw_xpress(const uint8_t *in, size_t n, uint8_t *out, size_t cap);

#endif
