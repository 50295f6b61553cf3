/* perf_open.c - setting up system-wide tracing: tracefs, privileges, the
 * perf events on every CPU and their ring buffers; and the errors a user
 * can fix (not root, perf_event_paranoid, tracefs not mounted, no syscall
 * tracepoints), each with its fix.
 *
 * Per CPU: one dummy software event that owns the ring and reports task
 * (fork, exit), comm (names, exec) and mmap2 (executable mappings, for
 * symbols) records; the syscalls:sys_enter_* / sys_exit_* tracepoints of
 * mmap, munmap, mremap, brk, mprotect, pkey_mprotect, and task:task_newtask
 * (clone flags), all redirected into that ring. Enter events of calls that
 * can charge memory also sample the user registers and stack (unwound
 * later); munmap's does not (a release needs no stack). Timestamps are
 * CLOCK_MONOTONIC so the merge can compare them with the clock. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <linux/perf_event.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/mount.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "sources/perf/perf_types.h"

static const char *const sc_names[CW__SC_N] = {"mmap", "munmap",   "mremap",
                                               "brk",  "mprotect", "pkey_mprotect"};

static int read_int_file(const char *path, int *out)
{
    FILE *f = fopen(path, "re");
    if (!f) return -errno;
    int ok = fscanf(f, "%d", out) == 1;
    fclose(f);
    return ok ? 0 : -EINVAL;
}

/* Effective capability bit from /proc/self/status. */
static bool has_cap(int bit)
{
    FILE *f = fopen("/proc/self/status", "re");
    if (!f) return false;
    char line[256];
    unsigned long long eff = 0;
    while (fgets(line, sizeof line, f))
        if (sscanf(line, "CapEff: %llx", &eff) == 1) break;
    fclose(f);
    return (eff >> bit) & 1;
}

#define CAP_SYS_ADMIN_BIT 21
#define CAP_PERFMON_BIT 38

/* perf_event_open refused (EPERM) to a process holding the capability: not the
 * capabilities. A seccomp filter answers EPERM (systemd-nspawn's and
 * Docker's default filters leave perf_event_open out; so does a unit's
 * SystemCallFilter= that does not list it), or a security module does. */
static int filtered_error(cw_diag_t *d, const char *what)
{
    return cw_diag_set(
        d, CW_EPERM,
        "%s: perf_event_open was refused (EPERM) although this process is %s. A seccomp filter "
        "or a security module blocks the call: in a container, allow it (systemd-nspawn "
        "--system-call-filter=perf_event_open; Docker: a seccomp profile that allows it); under "
        "systemd, keep perf_event_open in the unit's SystemCallFilter= (the unit commitwatch "
        "installs does); check the audit log for SELinux or AppArmor denials",
        what, has_cap(CAP_PERFMON_BIT) ? "holding CAP_PERFMON" : "holding CAP_SYS_ADMIN");
}

static int privilege_error(cw_diag_t *d, const char *what)
{
    int paranoid = 2;
    read_int_file("/proc/sys/kernel/perf_event_paranoid", &paranoid);
    return cw_diag_set(
        d, CW_EPERM,
        "%s: not root and no CAP_PERFMON, and kernel.perf_event_paranoid = %d forbids "
        "system-wide tracing to unprivileged users. Fix: run as root (sudo commitwatch ...), "
        "or give the binary the capabilities (setcap cap_perfmon,cap_sys_ptrace,"
        "cap_dac_read_search+ep commitwatch), or, less safely, allow every user with "
        "`sysctl -w kernel.perf_event_paranoid=-1`",
        what, paranoid);
}

static bool tracefs_has_syscalls(const char *dir)
{
    char p[512];
    snprintf(p, sizeof p, "%s/events/syscalls/sys_enter_mmap/id", dir);
    return access(p, R_OK) == 0;
}

static bool tracefs_mounted(const char *dir)
{
    char p[512];
    snprintf(p, sizeof p, "%s/events", dir);
    return access(p, F_OK) == 0;
}

/* Picks the tracefs directory; mounts it when root and not mounted. */
static int find_tracefs(cw_perf__events_t *e, cw_diag_t *d, char *note, size_t note_size)
{
    const char *env = getenv("CW_TRACEFS"); /* tests point this elsewhere */
    const char *cands[] = {"/sys/kernel/tracing", "/sys/kernel/debug/tracing"};
    if (env && *env) {
        cw_strlcpy(e->tracefs, env, sizeof e->tracefs);
    } else {
        e->tracefs[0] = 0;
        for (size_t i = 0; i < 2; i++)
            if (tracefs_mounted(cands[i])) {
                cw_strlcpy(e->tracefs, cands[i], sizeof e->tracefs);
                break;
            }
        if (!e->tracefs[0]) {
            if (geteuid() != 0)
                return cw_diag_set(d, CW_ENOSYS,
                                   "tracefs is not mounted and only root can mount it. Fix: "
                                   "`sudo mount -t tracefs nodev /sys/kernel/tracing` (or add it "
                                   "to /etc/fstab), then start commitwatch again");
            if (mount("nodev", cands[0], "tracefs", 0, NULL) != 0)
                return cw_diag_set(d, CW_ENOSYS,
                                   "tracefs is not mounted and mounting it at %s failed (%s). "
                                   "Fix: `mount -t tracefs nodev %s`; the kernel needs "
                                   "CONFIG_TRACING",
                                   cands[0], strerror(errno), cands[0]);
            snprintf(note, note_size, "tracefs was not mounted: mounted it at %s", cands[0]);
            cw_strlcpy(e->tracefs, cands[0], sizeof e->tracefs);
        }
    }
    if (!tracefs_has_syscalls(e->tracefs)) {
        char p[512];
        snprintf(p, sizeof p, "%s/events", e->tracefs);
        if (access(p, F_OK) == 0 && access(p, R_OK | X_OK) != 0)
            return privilege_error(d, "cannot read the tracepoints in tracefs");
        return cw_diag_set(d, CW_ENOSYS,
                           "this kernel has no syscall tracepoints (%s/events/syscalls/"
                           "sys_enter_mmap is missing): it was built without "
                           "CONFIG_FTRACE_SYSCALLS. Fix: boot a kernel with "
                           "CONFIG_FTRACE_SYSCALLS=y (Debian's and most distributions' "
                           "kernels have it)",
                           e->tracefs);
    }
    return 0;
}

static int tp_id(const cw_perf__events_t *e, const char *group, const char *name)
{
    char p[512];
    int id;
    snprintf(p, sizeof p, "%s/events/%s/%s/id", e->tracefs, group, name);
    return read_int_file(p, &id) == 0 ? id : -1;
}

/* Offset of field `name` in a tracepoint's format file, or -1. */
static int tp_field(const cw_perf__events_t *e, const char *group, const char *ev, const char *name)
{
    char p[512], line[512], want[96];
    snprintf(p, sizeof p, "%s/events/%s/%s/format", e->tracefs, group, ev);
    snprintf(want, sizeof want, " %s;", name);
    FILE *f = fopen(p, "re");
    if (!f) return -1;
    int off = -1;
    while (fgets(line, sizeof line, f)) {
        char *at = strstr(line, want);
        char *o = strstr(line, "offset:");
        if (at && o) {
            off = atoi(o + 7);
            break;
        }
    }
    fclose(f);
    return off;
}

static int perf_open(struct perf_event_attr *a, int cpu, int group)
{
    (void)group;
    return (int)syscall(SYS_perf_event_open, a, -1, cpu, -1, PERF_FLAG_FD_CLOEXEC);
}

static void base_attr(struct perf_event_attr *a, size_t ring_bytes)
{
    memset(a, 0, sizeof *a);
    a->size = sizeof *a;
    a->sample_period = 1;
    a->sample_type = PERF_SAMPLE_IDENTIFIER | PERF_SAMPLE_TID | PERF_SAMPLE_TIME;
    a->sample_id_all = 1;
    a->disabled = 1;
    a->use_clockid = 1;
    a->clockid = CLOCK_MONOTONIC;
    a->watermark = 1;
    a->wakeup_watermark = (uint32_t)(ring_bytes / 8);
}

static int push_fd(cw_perf__events_t *e, int fd)
{
    if (CW_RESERVE(e->fds, e->fdcap, e->nfds + 1)) {
        close(fd);
        return CW_ENOMEM;
    }
    e->fds[e->nfds++] = fd;
    return 0;
}

static int open_error(cw_diag_t *d, int err, const char *what)
{
    if ((err == EACCES || err == EPERM) && (has_cap(CAP_PERFMON_BIT) || has_cap(CAP_SYS_ADMIN_BIT)))
        return filtered_error(d, what);
    if (err == EACCES || err == EPERM) return privilege_error(d, what);
    if (err == EMFILE || err == ENFILE)
        return cw_diag_set(d, CW_EIO,
                           "%s: too many open files (%s). Fix: raise the limit "
                           "(LimitNOFILE= in the unit, ulimit -n)",
                           what, strerror(err));
    if (err == ENOENT || err == ENODEV || err == EOPNOTSUPP)
        return cw_diag_set(d, CW_ENOSYS, "%s: the kernel does not support it (%s)", what,
                           strerror(err));
    return cw_diag_set(d, CW_EIO, "%s failed: %s", what, strerror(err));
}

int cw_perf__events_open(cw_perf__events_t *e, size_t ring_bytes, uint32_t stack_bytes,
                         cw_diag_t *d, char *note, size_t note_size)
{
    int rc;
    memset(e, 0, sizeof *e);
    note[0] = 0;
    e->stack_bytes = stack_bytes;
    if (geteuid() != 0 && !has_cap(CAP_PERFMON_BIT) && !has_cap(CAP_SYS_ADMIN_BIT))
        return privilege_error(d, "cannot trace the whole machine");
    if ((rc = find_tracefs(e, d, note, note_size))) return rc;
    for (int i = 0; i < CW__SC_N; i++) {
        char n[64];
        snprintf(n, sizeof n, "sys_enter_%s", sc_names[i]);
        e->sc_enter_id[i] = tp_id(e, "syscalls", n);
        snprintf(n, sizeof n, "sys_exit_%s", sc_names[i]);
        e->sc_exit_id[i] = tp_id(e, "syscalls", n);
        if (i != CW__SC_PKEY_MPROTECT && (e->sc_enter_id[i] < 0 || e->sc_exit_id[i] < 0))
            return cw_diag_set(d, CW_ENOSYS,
                               "the syscall tracepoints for %s are missing from %s/events/"
                               "syscalls: the kernel needs CONFIG_FTRACE_SYSCALLS",
                               sc_names[i], e->tracefs);
    }
    e->newtask_id = tp_id(e, "task", "task_newtask");
    e->newtask_pid_off = tp_field(e, "task", "task_newtask", "pid");
    e->newtask_flags_off = tp_field(e, "task", "task_newtask", "clone_flags");
    if (e->newtask_pid_off < 0 || e->newtask_flags_off < 0) e->newtask_id = -1;

    /* One fd per event per CPU: raise the open-file limit to its maximum. */
    struct rlimit rl;
    if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < rl.rlim_max) {
        rl.rlim_cur = rl.rlim_max;
        setrlimit(RLIMIT_NOFILE, &rl);
    }
    long ncpu = sysconf(_SC_NPROCESSORS_CONF);
    if (ncpu < 1) ncpu = 1;
    e->rings = calloc((size_t)ncpu, sizeof *e->rings);
    if (!e->rings) return CW_ENOMEM;
    long page = sysconf(_SC_PAGESIZE);
    for (int cpu = 0; cpu < ncpu; cpu++) {
        struct perf_event_attr a;
        base_attr(&a, ring_bytes);
        a.type = PERF_TYPE_SOFTWARE;
        a.config = PERF_COUNT_SW_DUMMY;
        a.task = 1;
        a.comm = 1;
        a.comm_exec = 1;
        a.mmap = 1;
        a.mmap2 = 1;
        int lead = perf_open(&a, cpu, -1);
        if (lead < 0) {
            if (errno == ENODEV || errno == EINVAL) continue; /* CPU offline */
            return open_error(d, errno, "perf_event_open (system-wide task events)");
        }
        if ((rc = push_fd(e, lead))) return rc;
        void *base =
            mmap(NULL, (size_t)page + ring_bytes, PROT_READ | PROT_WRITE, MAP_SHARED, lead, 0);
        if (base == MAP_FAILED)
            return cw_diag_set(d, CW_EIO,
                               "mapping a %zu KiB perf ring buffer failed (%s). Fix: run as "
                               "root, or raise kernel.perf_event_mlock_kb",
                               ring_bytes / 1024, strerror(errno));
        e->rings[e->nrings++] = (cw_perf__ring_t){lead, base, ring_bytes, false, 0, 0, false, 0};

        for (int i = 0; i < CW__SC_N * 2 + 1; i++) {
            int id, sc = i / 2;
            bool enter = i % 2 == 0;
            base_attr(&a, ring_bytes);
            a.type = PERF_TYPE_TRACEPOINT;
            a.sample_type |= PERF_SAMPLE_RAW;
            if (i == CW__SC_N * 2) {
                id = e->newtask_id;
            } else {
                id = enter ? e->sc_enter_id[sc] : e->sc_exit_id[sc];
                if (enter && sc != CW__SC_MUNMAP) {
                    a.sample_type |= PERF_SAMPLE_REGS_USER | PERF_SAMPLE_STACK_USER;
                    a.sample_regs_user = cw_perf__unwind_regs_mask();
                    a.sample_stack_user = stack_bytes;
                }
            }
            if (id < 0) continue;
            a.config = (uint64_t)id;
            int fd = perf_open(&a, cpu, lead);
            if (fd < 0) return open_error(d, errno, "perf_event_open (syscall tracepoints)");
            if ((rc = push_fd(e, fd))) return rc;
            /* Our own calls (reading the rings) are not traced: in the
             * kernel, so they cost no record. Other threads of ours are
             * dropped when read. */
            char filter[64];
            snprintf(filter, sizeof filter, "common_pid != %d", (int)getpid());
            ioctl(fd, PERF_EVENT_IOC_SET_FILTER, filter);
            if (ioctl(fd, PERF_EVENT_IOC_SET_OUTPUT, lead) != 0)
                return open_error(d, errno, "redirecting a tracepoint into the CPU's ring");
        }
    }
    if (e->nrings == 0) return cw_diag_set(d, CW_EIO, "no CPU could be traced");
    return 0;
}

int cw_perf__events_enable(cw_perf__events_t *e)
{
    for (size_t i = 0; i < e->nfds; i++)
        if (ioctl(e->fds[i], PERF_EVENT_IOC_ENABLE, 0) != 0) return CW_EIO;
    return 0;
}

void cw_perf__events_close(cw_perf__events_t *e)
{
    long page = sysconf(_SC_PAGESIZE);
    for (size_t i = 0; i < e->nrings; i++)
        munmap(e->rings[i].base, (size_t)page + e->rings[i].data_size);
    for (size_t i = 0; i < e->nfds; i++)
        close(e->fds[i]);
    free(e->rings);
    free(e->fds);
    memset(e, 0, sizeof *e);
}
