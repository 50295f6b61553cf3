/* fuzz_stacktags.c - libFuzzer target for the .stacktags loader and the
 * matcher it compiles: the input is one rule file. It must load or fail
 * cleanly (a failed load leaves the rule set as it was), and whatever
 * loads must answer every query without crashing or leaking. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "commitwatch/stacktags.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void quiet(void *ctx, const char *msg)
{
    (void)ctx;
    (void)msg;
}

static const char *const frames[] = {
    "ntdll!RtlAllocateHeap",
    "ntdll.dll!NtAllocateVirtualMemory",
    "KERNELBASE!VirtualAlloc+0x1f",
    "app!main",
    "libc.so.6!malloc",
    "/usr/lib/libc.so.6!__mmap64",
    "C:\\x\\m.dll!f",
    "nobang",
    "m!",
    "!f",
    "",
    "a*b!*",
    "x.dll.exe!y",
    "m!f+0x",
    "(before trace)",
};
#define NFRAMES (sizeof frames / sizeof frames[0])

#define CHECK(c)                                                                                   \
    do {                                                                                           \
        if (!(c)) {                                                                                \
            fprintf(stderr, "fuzz_stacktags: invariant failed: %s\n", #c);                         \
            abort();                                                                               \
        }                                                                                          \
    } while (0)

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    cw_stacktags_t *r;
    cw_diag_t d;
    if (cw_stacktags_create(&r)) return 0;
    cw_stacktags_set_warn(r, quiet, NULL);

    char before[64];
    snprintf(before, sizeof before, "%s", cw_stacktags_hash(r));
    int rc = cw_stacktags_load_buffer(r, "fuzz", (const char *)data, size, &d);
    if (rc) {
        CHECK(strcmp(before, cw_stacktags_hash(r)) == 0);
        CHECK(cw_stacktags_tag_count(r) == 0);
    } else {
        /* Loading the same file again changes nothing but load order. */
        char once[64];
        snprintf(once, sizeof once, "%s", cw_stacktags_hash(r));
        CHECK(cw_stacktags_load_buffer(r, "again", (const char *)data, size, &d) == 0);
        CHECK(strcmp(once, cw_stacktags_hash(r)) == 0);
    }

    /* The tree. */
    size_t nrules = 0;
    for (size_t i = 0; i < cw_stacktags_tag_count(r); i++) {
        cw_stacktags_tag_t t;
        CHECK(cw_stacktags_tag_at(r, i, &t) == 0);
        for (size_t j = 0; j < t.nrules; j++) {
            cw_stacktags_rule_t ru;
            CHECK(cw_stacktags_tag_rule(r, i, j, &ru) == 0);
        }
        nrules += t.nrules;
    }
    CHECK(nrules == cw_stacktags_rule_count(r));

    /* Matching: explain and the cached engine must agree. */
    cw_stacktags_explain_t ex;
    cw_stacktags_explain(r, frames, NFRAMES - 1, &ex);
    cw_stacks_t *s;
    if (cw_stacks_create(&s) == 0) {
        uint32_t id;
        if (cw_stacks_intern_strings(s, frames, NFRAMES - 1, &id) == 0) {
            CHECK(strcmp(cw_stacktags_tag_stack(r, s, id), ex.tag) == 0);
            CHECK(strcmp(cw_stacktags_tag_stack(r, s, id), ex.tag) == 0); /* cached */
        }
        for (size_t i = 0; i < NFRAMES; i++) {
            cw_stacktags_rule_t ru;
            bool m = cw_stacktags_match_frame(r, frames[i], &ru);
            cw_stacktags_explain(r, &frames[i], 1, &ex);
            CHECK(m == ex.matched);
        }
        cw_stacks_destroy(s);
    }
    cw_stacktags_destroy(r);
    return 0;
}
