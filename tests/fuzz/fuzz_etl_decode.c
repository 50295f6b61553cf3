/* fuzz_etl_decode.c - libFuzzer target for the ETW kernel payload decoders
 * and XPRESS decompression. The first byte picks the decoder, the second
 * the version and pointer size; the rest is the payload. Every decoder
 * must return 0, CW_EPARSE or CW_ENOSYS, and on 0 everything it points at
 * must lie inside the payload (ASan checks the reads made here). XPRESS
 * output must never pass its capacity. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "commitwatch/etl.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define CHECK(c)                                                                                   \
    do {                                                                                           \
        if (!(c)) {                                                                                \
            fprintf(stderr, "fuzz_etl_decode: invariant failed: %s\n", #c);                        \
            abort();                                                                               \
        }                                                                                          \
    } while (0)

#define INSIDE(ptr, len) CHECK((const uint8_t *)(ptr) >= p && (const uint8_t *)(ptr) + (len) <= p + n)

static void touch(const uint8_t *s, size_t len)
{
    volatile uint8_t sum = 0;
    for (size_t i = 0; i < len; i++) sum ^= s[i];
    (void)sum;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 2) return 0;
    unsigned which = data[0] % 8, version = data[1] & 0x7F, ptr = data[1] & 0x80 ? 8 : 4;
    size_t n = size - 2;
    /* A copy of exactly the payload, so a read past it is caught. */
    uint8_t *p = malloc(n ? n : 1);
    if (!p) return 0;
    memcpy(p, data + 2, n);
    char text[256];
    int rc = 0;
    switch (which) {
    case 0: {
        cw_etl_process_t x;
        rc = cw_etl_decode_process(p, n, version, ptr, &x);
        if (rc == 0) {
            INSIDE(x.image, x.image_len);
            touch((const uint8_t *)x.image, x.image_len);
            if (x.cmdline) {
                INSIDE(x.cmdline, 2 * x.cmdline_units);
                cw_etl_utf16_to_utf8(x.cmdline, x.cmdline_units, text, sizeof text);
            }
        }
        break;
    }
    case 1: {
        cw_etl_image_t x;
        rc = cw_etl_decode_image(p, n, version, ptr, &x);
        if (rc == 0) {
            INSIDE(x.name, 2 * x.name_units);
            cw_etl_utf16_to_utf8(x.name, x.name_units, text, sizeof text);
        }
        break;
    }
    case 2: {
        cw_etl_thread_t x;
        rc = cw_etl_decode_thread(p, n, version, ptr, &x);
        break;
    }
    case 3: {
        cw_etl_valloc_t x;
        cw_op_t ops[2];
        rc = cw_etl_decode_valloc(p, n, version, ptr, &x);
        if (rc == 0) CHECK(cw_etl_valloc_ops(x.flags, ops) <= 2);
        break;
    }
    case 4: {
        cw_etl_stackwalk_t x;
        rc = cw_etl_decode_stackwalk(p, n, version, ptr, &x);
        if (rc == 0) {
            INSIDE(x.frames, (size_t)x.nframes * ptr);
            for (uint32_t i = 0; i < x.nframes; i++) (void)cw_etl_frame(x.frames, i, ptr);
        }
        break;
    }
    case 5: {
        cw_etl_stackref_t x;
        rc = cw_etl_decode_stackref(p, n, version, ptr, &x);
        break;
    }
    case 6: {
        cw_etl_stackdef_t x;
        rc = cw_etl_decode_stackdef(p, n, version, ptr, &x);
        if (rc == 0) {
            INSIDE(x.frames, (size_t)x.nframes * ptr);
            for (uint32_t i = 0; i < x.nframes; i++) (void)cw_etl_frame(x.frames, i, ptr);
        }
        break;
    }
    default: {
        /* XPRESS into a buffer of a size the input picks. */
        size_t cap = (size_t)data[1] * 64 + 1, got = SIZE_MAX;
        uint8_t *out = malloc(cap);
        if (!out) break;
        int k = cw_etl_xpress_decompress(p, n, out, cap, &got);
        CHECK(k == 0 || k == CW_EPARSE);
        CHECK(got <= cap);
        touch(out, got);
        free(out);
        /* And the UTF-16 converter on the raw bytes. */
        size_t len = cw_etl_utf16_to_utf8(p, n / 2, text, sizeof text);
        CHECK(len < sizeof text && text[len] == '\0');
        break;
    }
    }
    CHECK(rc == 0 || rc == CW_EPARSE || rc == CW_ENOSYS);
    free(p);
    return 0;
}
