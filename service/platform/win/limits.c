/* limits.c - memory limits on Windows (platform.h): the machine's commit
 * limit (GetPerformanceInfo) and the per-process memory limit of a job
 * object. A job's limits are read with QueryInformationJobObject, which
 * needs a handle to the job; Windows hands one only to the process's own
 * job (a NULL handle) or to whoever created or opened it by name, so for
 * another process this can tell only whether it is in a job
 * (IsProcessInJob), not its limit: CW_ENOSYS then. The calling process's
 * own working set and its peak: GetProcessMemoryInfo. */
#include <string.h>

#include "platform/win/win_internal.h"

#include <psapi.h>

#include "commitwatch/platform.h"

int cw_plat_commit_limit(uint64_t *limit, uint64_t *used, bool *enforced)
{
    PERFORMANCE_INFORMATION pi;
    memset(&pi, 0, sizeof pi);
    pi.cb = sizeof pi;
    if (!GetPerformanceInfo(&pi, sizeof pi)) return CW_EIO;
    *limit = (uint64_t)pi.CommitLimit * pi.PageSize;
    *used = (uint64_t)pi.CommitTotal * pi.PageSize;
    *enforced = true;
    return 0;
}

/* The calling process's job's per-process memory limit. */
static int own_job_limit(uint64_t *limit, uint64_t *used)
{
    JOBOBJECT_EXTENDED_LIMIT_INFORMATION li;
    memset(&li, 0, sizeof li);
    if (!QueryInformationJobObject(NULL, JobObjectExtendedLimitInformation, &li, sizeof li, NULL))
        return CW_EIO;
    *limit = 0;
    *used = 0;
    if (!(li.BasicLimitInformation.LimitFlags & JOB_OBJECT_LIMIT_PROCESS_MEMORY)) return 0;
    PROCESS_MEMORY_COUNTERS_EX pmc;
    memset(&pmc, 0, sizeof pmc);
    if (!GetProcessMemoryInfo(GetCurrentProcess(), (PROCESS_MEMORY_COUNTERS *)&pmc, sizeof pmc))
        return CW_EIO;
    *limit = li.ProcessMemoryLimit;
    *used = pmc.PrivateUsage;
    return 0;
}

int cw_plat_process_limit(uint32_t pid, uint64_t *limit, uint64_t *used, const char **source)
{
    bool self = pid == GetCurrentProcessId();
    /* The full query right first (Wine's IsProcessInJob wants it), else
     * the limited one (all that a protected process grants). */
    HANDLE h = self ? GetCurrentProcess() : OpenProcess(PROCESS_QUERY_INFORMATION, FALSE, pid);
    if (!h) h = OpenProcess(PROCESS_QUERY_LIMITED_INFORMATION, FALSE, pid);
    if (!h) {
        DWORD e = GetLastError();
        return e == ERROR_INVALID_PARAMETER ? CW_ENOENT : e == ERROR_ACCESS_DENIED ? CW_EPERM : CW_EIO;
    }
    BOOL in_job = FALSE;
    int rc = IsProcessInJob(h, NULL, &in_job) ? 0 : CW_EIO;
    if (!self) CloseHandle(h);
    if (rc) return rc;
    *source = "job object";
    if (!in_job) {
        *limit = *used = 0;
        return 0;
    }
    return self ? own_job_limit(limit, used) : CW_ENOSYS;
}

int cw_plat_self_memory(cw_plat_self_mem_t *out)
{
    PROCESS_MEMORY_COUNTERS pmc;
    memset(&pmc, 0, sizeof pmc);
    memset(out, 0, sizeof *out);
    if (!GetProcessMemoryInfo(GetCurrentProcess(), &pmc, sizeof pmc)) return CW_EIO;
    out->rss = pmc.WorkingSetSize;
    out->peak = pmc.PeakWorkingSetSize;
    return 0;
}

void cw_plat_heap_arenas(unsigned n)
{
    (void)n; /* the process heap is one, with its own low-fragmentation front end */
}

void cw_plat_heap_mmap_threshold(size_t bytes)
{
    (void)bytes; /* the process heap gives blocks past about 1 MiB pages of their own */
}

bool cw_plat_heap_thread_caches_off(char **argv)
{
    (void)argv; /* the process heap's front end is not per thread */
    return false;
}
