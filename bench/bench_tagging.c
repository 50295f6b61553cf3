/* bench_tagging.c - how many distinct stacks per second the stack-tag
 * engine tags, on one core, with the default rules of a platform.
 *
 * Builds a pool of realistic frames (application code plus the system
 * frames the default rules know), interns N distinct stacks of 30 frames
 * each (26 random application frames, then one of a set of allocation
 * paths: heap growth, direct VirtualAlloc, thread creation, GDI, managed
 * heap... cut or padded to 4 frames), and times tagging every one through
 * the tagger seam (cw_tagger_tag: the engine, tag-name interning and the
 * per-stack cache store), each stack once. Interning is timed apart: it is
 * the stacks module's cost, paid whether or not stacks are tagged.
 *
 * Also times matching frames the engine has not seen (the rule matching
 * proper, before the per-frame cache helps).
 *
 *   bench_tagging [--stacks N] [--pool P] [--platform windows|linux] */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "commitwatch/stacks.h"
#include "commitwatch/stacktags.h"
#include "commitwatch/tagger.h"

#define DEPTH 30
#define TAIL 4

static double now(void)
{
    struct timespec ts;
    timespec_get(&ts, TIME_UTC);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static uint64_t rng = 0x9e3779b97f4a7c15ULL;
static uint64_t next(void)
{
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return rng;
}

/* Allocation paths, innermost last; each cut or padded to TAIL frames. */
static const char *const win_tails[][TAIL] = {
    {"ntdll!RtlAllocateHeap", "ntdll!RtlpAllocateHeapInternal", "ntdll!RtlpExtendHeap",
     "ntdll!NtAllocateVirtualMemory"},
    {"ucrtbase!_malloc_base", "ntdll!RtlAllocateHeap", "ntdll!RtlpHpVsContextAllocateInternal",
     "ntdll!NtAllocateVirtualMemory"},
    {"app!Operation1", "app!ManipulateTemporaryBuffer", "KernelBase!VirtualAlloc",
     "ntdll!NtAllocateVirtualMemory"},
    {"kernel32!CreateThreadStub", "KernelBase!CreateRemoteThreadEx", "ntdll!NtCreateThreadEx",
     "ntoskrnl!MmCreateTeb"},
    {"gdi32full!CreateCompatibleBitmap", "ntdll!RtlAllocateHeap", "ntdll!RtlpAllocateHeapInternal",
     "ntdll!NtAllocateVirtualMemory"},
    {"coreclr!WKS::gc_heap::grow_heap_segment", "coreclr!GCToOSInterface::VirtualCommit",
     "KernelBase!VirtualAlloc", "ntdll!NtAllocateVirtualMemory"},
    {"chrome.dll!v8::internal::PagedSpace::Expand", "chrome.dll!v8::base::OS::SetPermissions",
     "KernelBase!VirtualAlloc", "ntdll!NtAllocateVirtualMemory"},
    {"app!Helper", "app!Helper2", "app!Helper3", "app!Helper4"},
};

static const char *const linux_tails[][TAIL] = {
    {"libc.so.6!malloc", "libc.so.6!_int_malloc", "libc.so.6!sysmalloc", "libc.so.6!__brk"},
    {"libc.so.6!__libc_malloc", "libc.so.6!sysmalloc", "libc.so.6!sysmalloc_mmap",
     "libc.so.6!__mmap64"},
    {"libc.so.6!pthread_create@@GLIBC_2.34", "libc.so.6!allocate_stack", "libc.so.6!__mmap64",
     "libc.so.6!__mmap64"},
    {"libc.so.6!dlopen", "ld-linux-x86-64.so.2!_dl_map_object",
     "ld-linux-x86-64.so.2!_dl_map_segments", "ld-linux-x86-64.so.2!__mmap64"},
    {"libjvm.so!G1CollectedHeap::expand", "libjvm.so!os::commit_memory",
     "libjvm.so!os::pd_commit_memory", "libc.so.6!mmap64"},
    {"app!helper", "app!helper2", "app!helper3", "libc.so.6!mmap64"},
};

/* Application and system modules frames come from. */
static const char *const win_mods[] = {"app",    "appcore.dll", "ui.dll",   "net.dll",
                                       "ntdll",  "KernelBase",  "kernel32", "ucrtbase",
                                       "user32", "combase"};
static const char *const linux_mods[] = {
    "app",       "libapp.so",      "libssl.so.3", "libcrypto.so.3",
    "libc.so.6", "libstdc++.so.6", "libz.so.1",   "libglib-2.0.so.0"};

int main(int argc, char **argv)
{
    uint32_t nstacks = 1000000, pool = 50000;
    const char *platform = "windows";
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--stacks") == 0 && i + 1 < argc)
            nstacks = (uint32_t)atol(argv[++i]);
        else if (strcmp(argv[i], "--pool") == 0 && i + 1 < argc)
            pool = (uint32_t)atol(argv[++i]);
        else if (strcmp(argv[i], "--platform") == 0 && i + 1 < argc)
            platform = argv[++i];
        else {
            fprintf(stderr,
                    "usage: bench_tagging [--stacks N] [--pool P] [--platform windows|linux]\n");
            return 2;
        }
    }
    int win = strcmp(platform, "windows") == 0;
    const char *const(*tails)[TAIL] = win ? win_tails : linux_tails;
    size_t ntails =
        win ? sizeof win_tails / sizeof *win_tails : sizeof linux_tails / sizeof *linux_tails;
    const char *const *mods = win ? win_mods : linux_mods;
    size_t nmods =
        win ? sizeof win_mods / sizeof *win_mods : sizeof linux_mods / sizeof *linux_mods;

    cw_diag_t d;
    cw_stacktags_t *rules;
    if (cw_stacktags_open(platform, NULL, 0, &rules, &d)) {
        fprintf(stderr, "bench_tagging: %s\n", d.msg);
        return 1;
    }
    cw_stacks_t *s;
    if (cw_stacks_create(&s)) return 1;

    /* The frame pool: "module!Namespace::FunctionNNN". */
    uint32_t *ids = malloc((size_t)pool * sizeof *ids);
    char **texts = malloc((size_t)pool * sizeof *texts);
    if (!ids || !texts) return 1;
    for (uint32_t i = 0; i < pool; i++) {
        char buf[128];
        snprintf(buf, sizeof buf, "%s!Component%u::Function%u", mods[next() % nmods], i % 97, i);
        if (!(texts[i] = malloc(strlen(buf) + 1))) return 1;
        strcpy(texts[i], buf);
        if (cw_stacks_intern_frame(s, buf, strlen(buf), &ids[i])) return 1;
    }
    uint32_t tail_ids[16][TAIL];
    for (size_t t = 0; t < ntails; t++)
        for (int k = 0; k < TAIL; k++)
            if (cw_stacks_intern_frame(s, tails[t][k], strlen(tails[t][k]), &tail_ids[t][k]))
                return 1;

    /* Rule matching of frames never seen: once per pool frame. */
    double t0 = now();
    size_t matched = 0;
    for (uint32_t i = 0; i < pool; i++)
        matched += cw_stacktags_match_frame(rules, texts[i], NULL);
    double t_match = now() - t0;

    /* Intern the stacks. */
    uint32_t *stack_ids = malloc((size_t)nstacks * sizeof *stack_ids);
    if (!stack_ids) return 1;
    t0 = now();
    for (uint32_t i = 0; i < nstacks; i++) {
        uint32_t f[DEPTH];
        for (int k = 0; k < DEPTH - TAIL; k++)
            f[k] = ids[next() % pool];
        memcpy(f + DEPTH - TAIL, tail_ids[next() % ntails], sizeof tail_ids[0]);
        if (cw_stacks_intern(s, f, DEPTH, &stack_ids[i])) return 1;
    }
    double t_intern = now() - t0;
    uint32_t distinct = cw_stacks_count(s) - 1;

    cw_tagger_t *tagger;
    if (cw_stacktags_tagger(rules, &tagger)) return 1;
    size_t per_tag[64] = {0};
    t0 = now();
    for (uint32_t i = 0; i < nstacks; i++) {
        uint32_t tag = cw_tagger_tag(tagger, s, stack_ids[i]);
        if (tag < 64) per_tag[tag]++;
    }
    double t_tag = now() - t0;

    printf("platform %s, default rules (%zu entrypoints), frame pool %u, %u distinct stacks of %d "
           "frames\n",
           platform, cw_stacktags_rule_count(rules), pool, distinct, DEPTH);
    printf("match unseen frames: %.0f frames/s (%zu of %u matched a rule)\n", pool / t_match,
           matched, pool);
    printf("intern stacks:       %.0f stacks/s (not part of tagging)\n", nstacks / t_intern);
    printf("tag stacks:          %.0f stacks/s (%.3f s for %u stacks, cold frame cache included)\n",
           nstacks / t_tag, t_tag, nstacks);
    for (uint32_t t = 0; t < cw_tagger_tag_count(tagger) && t < 64; t++)
        printf("    %-24s %zu\n", cw_tagger_tag_name(tagger, t), per_tag[t]);

    cw_tagger_destroy(tagger);
    cw_stacks_destroy(s);
    for (uint32_t i = 0; i < pool; i++)
        free(texts[i]);
    free(texts);
    free(ids);
    free(stack_ids);
    return 0;
}
