/* limits.c - memory limits on Linux (platform.h): the machine's commit
 * limit from /proc/meminfo and vm.overcommit_memory, a process's
 * RLIMIT_AS from /proc/PID/limits and its address space from
 * /proc/PID/status, and the calling process's own memory (VmRSS, VmHWM,
 * glibc's mallinfo2). (/proc/PID/limits rather than prlimit(2): it reads the
 * limits of any process, where prlimit needs the same user or
 * CAP_SYS_RESOURCE.) */
#include <errno.h>
#if defined(__GLIBC__)
#include <malloc.h>
#endif
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#if defined(__linux__)
#include <sys/auxv.h>
#endif
#include <unistd.h>

#include "commitwatch/platform.h"

/* The value in kB of the line "KEY:   N kB" of a /proc file, in bytes.
 * 0, CW_ENOENT (no such line) or the fopen's error. */
static int proc_kb(const char *path, const char *key, uint64_t *out)
{
    FILE *f = fopen(path, "r");
    if (!f) return errno == ENOENT || errno == ESRCH ? CW_ENOENT : errno == EACCES ? CW_EPERM : CW_EIO;
    char line[256];
    size_t kl = strlen(key);
    int rc = CW_ENOENT;
    while (fgets(line, sizeof line, f))
        if (strncmp(line, key, kl) == 0 && line[kl] == ':') {
            unsigned long long kb;
            if (sscanf(line + kl + 1, "%llu", &kb) == 1 && kb <= UINT64_MAX / 1024) {
                *out = (uint64_t)kb * 1024;
                rc = 0;
            } else {
                rc = CW_EIO;
            }
            break;
        }
    fclose(f);
    return rc;
}

int cw_plat_commit_limit(uint64_t *limit, uint64_t *used, bool *enforced)
{
    uint64_t l, u;
    if (proc_kb("/proc/meminfo", "CommitLimit", &l) != 0 ||
        proc_kb("/proc/meminfo", "Committed_AS", &u) != 0)
        return CW_EIO;
    int mode = 0;
    FILE *f = fopen("/proc/sys/vm/overcommit_memory", "r");
    if (f) {
        if (fscanf(f, "%d", &mode) != 1) mode = 0;
        fclose(f);
    }
    *limit = l;
    *used = u;
    *enforced = mode == 2;
    return 0;
}

int cw_plat_process_limit(uint32_t pid, uint64_t *limit, uint64_t *used, const char **source)
{
    char path[64], line[256];
    snprintf(path, sizeof path, "/proc/%" PRIu32 "/limits", pid);
    FILE *f = fopen(path, "r");
    if (!f) return errno == ENOENT || errno == ESRCH ? CW_ENOENT : errno == EACCES ? CW_EPERM : CW_EIO;
    /* "Max address space         unlimited            unlimited            bytes" */
    static const char key[] = "Max address space";
    int rc = CW_EIO;
    uint64_t soft = 0;
    while (fgets(line, sizeof line, f))
        if (strncmp(line, key, sizeof key - 1) == 0) {
            char word[32];
            unsigned long long v;
            if (sscanf(line + sizeof key - 1, "%31s", word) != 1) break;
            if (strcmp(word, "unlimited") == 0) {
                soft = 0;
                rc = 0;
            } else if (sscanf(word, "%llu", &v) == 1) {
                soft = v;
                rc = 0;
            }
            break;
        }
    fclose(f);
    if (rc) return rc;
    *source = "RLIMIT_AS";
    *limit = soft;
    *used = 0;
    if (soft == 0) return 0;
    snprintf(path, sizeof path, "/proc/%" PRIu32 "/status", pid);
    return proc_kb(path, "VmSize", used) == 0 ? 0 : CW_EIO;
}

int cw_plat_self_memory(cw_plat_self_mem_t *out)
{
    memset(out, 0, sizeof *out);
#if defined(__GLIBC__) && (__GLIBC__ > 2 || (__GLIBC__ == 2 && __GLIBC_MINOR__ >= 33))
    struct mallinfo2 mi = mallinfo2();
    out->heap = (uint64_t)mi.uordblks + (uint64_t)mi.hblkhd;
#endif
    if (proc_kb("/proc/self/status", "VmRSS", &out->rss) ||
        proc_kb("/proc/self/status", "VmHWM", &out->peak)) {
        memset(out, 0, sizeof *out);
        return CW_EIO;
    }
    return 0;
}

void cw_plat_heap_arenas(unsigned n)
{
#if defined(__GLIBC__) && defined(M_ARENA_MAX)
    mallopt(M_ARENA_MAX, (int)n);
#else
    (void)n;
#endif
}

void cw_plat_heap_mmap_threshold(size_t bytes)
{
#if defined(__GLIBC__) && defined(M_MMAP_THRESHOLD)
    mallopt(M_MMAP_THRESHOLD, bytes > INT32_MAX ? INT32_MAX : (int)bytes);
#else
    (void)bytes;
#endif
}

/* The mark of cw_plat_heap_thread_caches_off's exec, set in the process
 * it becomes: "0" when GLIBC_TUNABLES was not set before, "1" followed by
 * its value when it was. That process puts it back and drops the mark. */
#define TCACHE_MARK "COMMITWATCH_HEAP_REEXEC"
#define TCACHE_OFF "glibc.malloc.tcache_count=0"

bool cw_plat_heap_thread_caches_off(char **argv)
{
#if defined(__GLIBC__) && defined(__linux__)
    const char *mark = getenv(TCACHE_MARK);
    if (mark) { /* after the exec: the tunables were read at it */
        const char *t = getenv("GLIBC_TUNABLES");
        bool off = t && strstr(t, TCACHE_OFF) != NULL;
        if (mark[0] == '1')
            setenv("GLIBC_TUNABLES", mark + 1, 1);
        else
            unsetenv("GLIBC_TUNABLES");
        unsetenv(TCACHE_MARK);
        return off;
    }
    const char *t = getenv("GLIBC_TUNABLES");
    if ((t && strstr(t, "glibc.malloc.tcache")) || getenv("LD_PRELOAD") || getauxval(AT_SECURE))
        return false;
    size_t tl = t ? strlen(t) : 0;
    char *was = malloc(tl + 2), *v = malloc(tl + sizeof TCACHE_OFF + 1);
    bool ok = was && v;
    if (ok) {
        snprintf(was, tl + 2, "%s%s", t ? "1" : "0", t ? t : "");
        snprintf(v, tl + sizeof TCACHE_OFF + 1, "%s%s" TCACHE_OFF, t ? t : "", tl ? ":" : "");
        ok = setenv(TCACHE_MARK, was, 1) == 0 && setenv("GLIBC_TUNABLES", v, 1) == 0;
    }
    if (ok) {
        fflush(NULL);
        execv("/proc/self/exe", argv);
    }
    /* Not executed: go on as we are, with the environment as it was. */
    unsetenv(TCACHE_MARK);
    if (was && was[0] == '1')
        setenv("GLIBC_TUNABLES", was + 1, 1);
    else if (was)
        unsetenv("GLIBC_TUNABLES");
    free(was);
    free(v);
    return false;
#else
    (void)argv;
    return false;
#endif
}
