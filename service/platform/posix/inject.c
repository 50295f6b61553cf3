/* inject.c - loading a shared library into a running process
 * (platform.h, cw_plat_inject_library: the heap drill-down's attach to a
 * PID without a restart; docs/DESIGN.md, "Heap drill-down").
 *
 * Linux on x86-64. The process's main thread is stopped with ptrace
 * (PTRACE_SEIZE + PTRACE_INTERRUPT: no signal is sent), its registers and
 * FPU state saved, and it is made to call dlopen(lib, RTLD_NOW) on its own
 * stack, below the red zone, with a return address of 0: the return
 * faults at address 0, which stops it again under ptrace. The fault is
 * not delivered; the registers, the stack bytes used and the FPU state
 * are put back and the thread detached. A thread stopped inside a
 * blocking system call restarts it, because its saved registers are
 * those of the interrupted call (the kernel's restart rules apply when it
 * resumes).
 *
 * dlopen's address in the target is the C library's own (looked up in it,
 * not in the global scope, where a sanitizer's interceptor comes first)
 * moved by the difference of the two load addresses of the same library: the target must map the
 * very file commitwatch uses (same device and inode); anything else (a static binary, musl, another
 * container's glibc) is refused with the reason.
 *
 * A descriptor for the library (give_fd: the heap trace's ring) is handed
 * over while dlopen runs its constructor: before the call commitwatch
 * listens on the abstract socket "commitwatch-inject.PID" (inject_peer.h,
 * the library's side), and a thread of its own accepts the one peer whose
 * credentials name that PID, sends the descriptor with SCM_RIGHTS and
 * reads the library's answer, while this thread waits for dlopen to
 * return. The socket lives in the network namespace: a process in
 * another one cannot reach it, and the attach fails saying so.
 *
 * The one hazard is the one gdb's `call` has: a thread stopped while it
 * holds the allocator's or the loader's lock deadlocks in dlopen. The call
 * is bounded by timeout_ns; past it the thread is stopped again, put back
 * as it was and the attach reported as failed (the lock it may then hold
 * is the target's loss, said in the message). */
#define _GNU_SOURCE /* dlfcn.h: RTLD_NOLOAD, dladdr */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "commitwatch/platform.h"

#if defined(__linux__) && defined(__x86_64__)

#include <dlfcn.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/ptrace.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/types.h>
#include <sys/user.h>
#include <sys/wait.h>
#include <unistd.h>

#include "platform/posix/intarget/inject_peer.h"

#ifndef PTRACE_EVENT_STOP
#define PTRACE_EVENT_STOP 128
#endif

/* Where a process maps its C library (find_libc). */
typedef struct libc_map {
    uintptr_t base;
    unsigned long dev_major, dev_minor;
    uint64_t ino;
    char path[256];
} libc_map_t;

static bool is_libc(const char *path)
{
    const char *b = strrchr(path, '/');
    b = b ? b + 1 : path;
    return !strncmp(b, "libc.so", 7) || (!strncmp(b, "libc-", 5) && strstr(b, ".so"));
}

/* The C library mapped by pid (0 = this process): its load address and
 * the file's device and inode, from /proc/PID/maps. 0, or CW_ENOENT (no
 * libc.so mapping), CW_ESTOPPED (no mapping at all: it has exited, its
 * parent has not reaped it yet), CW_EPERM / CW_EIO. */
static int find_libc(uint32_t pid, libc_map_t *out)
{
    char name[64];
    if (pid)
        snprintf(name, sizeof name, "/proc/%" PRIu32 "/maps", pid);
    else
        snprintf(name, sizeof name, "/proc/self/maps");
    FILE *f = fopen(name, "re");
    if (!f) return errno == ENOENT ? CW_ENOENT : errno == EACCES ? CW_EPERM : CW_EIO;
    char line[512];
    int rc = CW_ESTOPPED; /* no mapping at all: the process has ended (a zombie) */
    while (fgets(line, sizeof line, f)) {
        rc = CW_ENOENT;
        uintptr_t lo, hi;
        unsigned long long off, ino;
        unsigned int maj, mnr;
        int pos = 0;
        char perms[8];
        if (sscanf(line, "%" SCNxPTR "-%" SCNxPTR " %7s %llx %x:%x %llu %n", &lo, &hi, perms, &off,
                   &maj, &mnr, &ino, &pos) < 7 ||
            !pos)
            continue;
        char *path = line + pos;
        path[strcspn(path, "\n")] = '\0';
        if (path[0] != '/' || !is_libc(path) || !strchr(perms, 'x')) continue;
        /* Its executable mapping, the one the loader made (a process may
         * map the file for reading too: the perf source's libdw maps the
         * ELF files it reads, at offset 0, writable and private). The load
         * address is its start less its file offset: glibc's segments sit
         * at their file offsets. */
        out->base = lo - (uintptr_t)off;
        out->dev_major = maj, out->dev_minor = mnr, out->ino = ino;
        snprintf(out->path, sizeof out->path, "%s", path);
        rc = 0;
        break;
    }
    fclose(f);
    return rc;
}

static int mem_io(int fd, bool write, uintptr_t addr, void *buf, size_t len)
{
    ssize_t n = write ? pwrite(fd, buf, len, (off_t)addr) : pread(fd, buf, len, (off_t)addr);
    return n == (ssize_t)len ? 0 : -1;
}

/* Waits for the next stop of pid, at most until deadline (monotonic ns).
 * 0 and *status, 1 at the deadline, -1 when it is gone (errno). */
static int wait_stop(pid_t pid, int64_t deadline, int *status)
{
    for (;;) {
        pid_t r = waitpid(pid, status, __WALL | WNOHANG);
        if (r == pid) return 0;
        if (r < 0 && errno != EINTR) return -1;
        if (cw_plat_mono_ns() >= deadline) return 1;
        cw_plat_sleep_ns(1000000);
    }
}

static int gone(cw_diag_t *d, uint32_t pid, const char *what)
{
    return cw_diag_set(d, CW_ENOENT, "process %" PRIu32 " ended while %s", pid, what);
}

/* The hand-over: the listening socket, the descriptor, and what the
 * library answered. The accepting thread writes got/reply/status; the
 * caller reads them after joining it. */
typedef struct handover {
    int listen_fd, give_fd;
    pid_t pid;
    int64_t deadline;
    _Atomic bool stop;
    bool got;      /* the library connected and took the descriptor */
    bool answered; /* and answered */
    int64_t reply;
} handover_t;

static void handover_main(void *arg)
{
    handover_t *h = arg;
    while (!h->stop && cw_plat_mono_ns() < h->deadline) {
        struct pollfd p = {.fd = h->listen_fd, .events = POLLIN};
        if (poll(&p, 1, 50) <= 0) continue;
        int c = accept4(h->listen_fd, NULL, NULL, SOCK_CLOEXEC);
        if (c < 0) continue;
        struct ucred cred;
        socklen_t cl = sizeof cred;
        if (getsockopt(c, SOL_SOCKET, SO_PEERCRED, &cred, &cl) != 0 || cred.pid != h->pid) {
            close(c); /* not the process we load into */
            continue;
        }
        union {
            struct cmsghdr hdr;
            char space[CMSG_SPACE(sizeof(int))];
        } ctl;
        memset(&ctl, 0, sizeof ctl);
        struct iovec io = {(void *)CW_INJECT_HELLO, strlen(CW_INJECT_HELLO)};
        struct msghdr m = {.msg_iov = &io,
                           .msg_iovlen = 1,
                           .msg_control = ctl.space,
                           .msg_controllen = sizeof ctl.space};
        struct cmsghdr *ch = CMSG_FIRSTHDR(&m);
        ch->cmsg_level = SOL_SOCKET;
        ch->cmsg_type = SCM_RIGHTS;
        ch->cmsg_len = CMSG_LEN(sizeof(int));
        memcpy(CMSG_DATA(ch), &h->give_fd, sizeof(int));
        if (sendmsg(c, &m, MSG_NOSIGNAL) == (ssize_t)strlen(CW_INJECT_HELLO)) {
            h->got = true;
            int64_t v;
            for (;;) {
                struct pollfd q = {.fd = c, .events = POLLIN};
                int left = (int)((h->deadline - cw_plat_mono_ns()) / 1000000);
                if (left <= 0 || poll(&q, 1, left) <= 0) break;
                if (recv(c, &v, sizeof v, 0) == (ssize_t)sizeof v) {
                    h->reply = v;
                    h->answered = true;
                }
                break;
            }
        }
        close(c);
        return;
    }
}

static int handover_listen(handover_t *h, uint32_t pid, cw_diag_t *d)
{
    h->listen_fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
    if (h->listen_fd < 0) return cw_diag_set(d, CW_EIO, "socket: %s", strerror(errno));
    socklen_t len;
    struct sockaddr_un a = cw_inject_addr((long)pid, &len);
    if (bind(h->listen_fd, (struct sockaddr *)&a, len) != 0 || listen(h->listen_fd, 4) != 0) {
        int e = errno;
        close(h->listen_fd);
        h->listen_fd = -1;
        if (e == EADDRINUSE)
            return cw_diag_set(d, CW_EIO, "another attach to process %" PRIu32 " is under way",
                               pid);
        return cw_diag_set(d, CW_EIO, "cannot listen for process %" PRIu32 ": %s", pid,
                           strerror(e));
    }
    return 0;
}

static int load(uint32_t pid, const char *lib, int64_t timeout_ns, cw_diag_t *d);

int cw_plat_inject_library(uint32_t pid, const char *lib, int give_fd, int64_t timeout_ns,
                           int64_t *reply, cw_diag_t *d)
{
    if (timeout_ns <= 0) timeout_ns = 5000000000LL;
    if (give_fd < 0) return load(pid, lib, timeout_ns, d);
    handover_t h = {.listen_fd = -1,
                    .give_fd = give_fd,
                    .pid = (pid_t)pid,
                    .deadline = cw_plat_mono_ns() + timeout_ns};
    int rc = handover_listen(&h, pid, d);
    if (rc) return rc;
    cw_thread_t *t = NULL;
    if ((rc = cw_thread_start(&t, handover_main, &h)) != 0) {
        close(h.listen_fd);
        return cw_diag_set(d, rc, "cannot start the hand-over thread");
    }
    rc = load(pid, lib, timeout_ns, d);
    /* dlopen has returned, and with it the constructor: its answer is in
     * (or never comes). */
    h.stop = true;
    cw_thread_join(t);
    close(h.listen_fd);
    if (rc) return rc;
    if (!h.got)
        return cw_diag_set(d, CW_EIO,
                           "%s was loaded into process %" PRIu32 " but did not ask for its "
                           "descriptor (a process in another network namespace cannot reach "
                           "commitwatch's socket)",
                           lib, pid);
    if (!h.answered)
        return cw_diag_set(d, CW_EIO,
                           "%s took its descriptor in process %" PRIu32 " but did not answer", lib,
                           pid);
    if (reply) *reply = h.reply;
    return 0;
}

static int load(uint32_t pid, const char *lib, int64_t timeout_ns, cw_diag_t *d)
{
    if (!pid || (pid_t)pid == getpid())
        return cw_diag_set(d, CW_EINVAL, "cannot attach to process %" PRIu32, pid);
    if (!lib || lib[0] != '/')
        return cw_diag_set(d, CW_EINVAL, "the library to load must be an absolute path");
    size_t lib_len = strlen(lib) + 1;
    if (lib_len > 4096) return cw_diag_set(d, CW_EINVAL, "library path too long");

    libc_map_t mine, theirs;
    int rc = find_libc(pid, &theirs);
    if (rc == CW_ENOENT) {
        char p[64];
        snprintf(p, sizeof p, "/proc/%" PRIu32, pid);
        if (!cw_plat_is_dir(p)) return cw_diag_set(d, CW_ENOENT, "no process %" PRIu32, pid);
        return cw_diag_set(d, CW_ENOSYS,
                           "process %" PRIu32 " maps no C library (a static binary, or not "
                           "glibc): its allocations cannot be traced by attaching",
                           pid);
    }
    if (rc == CW_ESTOPPED) return cw_diag_set(d, CW_ENOENT, "process %" PRIu32 " has exited", pid);
    if (rc == CW_EPERM)
        return cw_diag_set(d, CW_EPERM, "cannot read /proc/%" PRIu32 "/maps: permission denied",
                           pid);
    if (rc) return cw_diag_set(d, rc, "cannot read /proc/%" PRIu32 "/maps", pid);
    if (find_libc(0, &mine))
        return cw_diag_set(d, CW_EIO, "cannot find commitwatch's own C library in its maps");
    if (mine.ino != theirs.ino || mine.dev_major != theirs.dev_major ||
        mine.dev_minor != theirs.dev_minor)
        return cw_diag_set(d, CW_ENOSYS,
                           "process %" PRIu32 " uses another C library (%s) than commitwatch "
                           "(%s): attaching is only supported to programs of this system's "
                           "glibc",
                           pid, theirs.path, mine.path);
    /* The C library's own dlopen, not whatever the lookup finds first (a
     * sanitizer's interceptor, in a sanitized build). */
    void *libc = dlopen("libc.so.6", RTLD_NOW | RTLD_NOLOAD);
    void *our_dlopen = libc ? dlsym(libc, "dlopen") : NULL;
    Dl_info di;
    if (libc) dlclose(libc);
    if (!our_dlopen || !dladdr(our_dlopen, &di) || (uintptr_t)di.dli_fbase != mine.base)
        return cw_diag_set(d, CW_ENOSYS, "dlopen not found in commitwatch's C library (%s)",
                           mine.path);
    uintptr_t target_dlopen = (uintptr_t)our_dlopen - mine.base + theirs.base;

    pid_t p = (pid_t)pid;
    if (ptrace(PTRACE_SEIZE, p, 0, 0) != 0) {
        if (errno == ESRCH) return cw_diag_set(d, CW_ENOENT, "no process %" PRIu32, pid);
        if (errno == EPERM)
            return cw_diag_set(d, CW_EPERM,
                               "cannot attach to process %" PRIu32 " with ptrace: permission "
                               "denied (it needs root or CAP_SYS_PTRACE, or the same user with "
                               "kernel.yama.ptrace_scope 0; a process already traced, by a "
                               "debugger or another trace, refuses too)",
                               pid);
        return cw_diag_set(d, CW_EIO, "ptrace(PTRACE_SEIZE, %" PRIu32 "): %s", pid,
                           strerror(errno));
    }
    int64_t deadline = cw_plat_mono_ns() + timeout_ns;
    int status = 0, mem = -1;
    bool regs_saved = false, stack_saved = false;
    struct user_regs_struct saved, regs;
    struct user_fpregs_struct fp;
    unsigned char old_stack[4096 + 64];
    uintptr_t area = 0;
    size_t area_len = 0;

    if (ptrace(PTRACE_INTERRUPT, p, 0, 0) != 0) {
        rc = cw_diag_set(d, CW_EIO, "ptrace(PTRACE_INTERRUPT, %" PRIu32 "): %s", pid,
                         strerror(errno));
        goto out;
    }
    /* The first stop: the interrupt's, or a signal that was on its way. */
    int w = wait_stop(p, deadline, &status);
    if (w) {
        rc = w < 0 ? gone(d, pid, "stopping it")
                   : cw_diag_set(d, CW_EIO, "process %" PRIu32 " did not stop", pid);
        goto out;
    }
    if (WIFEXITED(status) || WIFSIGNALED(status)) {
        rc = gone(d, pid, "stopping it");
        goto out;
    }
    if (ptrace(PTRACE_GETREGS, p, 0, &saved) != 0 || ptrace(PTRACE_GETFPREGS, p, 0, &fp) != 0) {
        rc = cw_diag_set(d, CW_EIO, "cannot read the registers of process %" PRIu32 ": %s", pid,
                         strerror(errno));
        goto out;
    }
    regs_saved = true;
    char memname[64];
    snprintf(memname, sizeof memname, "/proc/%" PRIu32 "/mem", pid);
    if ((mem = open(memname, O_RDWR | O_CLOEXEC)) < 0) {
        rc = cw_diag_set(d, CW_EIO, "cannot open %s: %s", memname, strerror(errno));
        goto out;
    }

    /* The call's frame: below the red zone (128 bytes) and a margin, the
     * path (16-aligned), and under it the return address 0, so that the
     * callee starts with rsp + 8 16-aligned as the ABI wants. */
    uintptr_t str = ((uintptr_t)saved.rsp - 256 - lib_len) & ~(uintptr_t)15;
    uintptr_t sp = str - 8;
    area = sp, area_len = (size_t)(((uintptr_t)saved.rsp - 256) - sp);
    if (area_len > sizeof old_stack) {
        rc = cw_diag_set(d, CW_EINVAL, "library path too long");
        goto out;
    }
    if (mem_io(mem, false, area, old_stack, area_len) != 0) {
        rc = cw_diag_set(d, CW_EIO, "cannot read the stack of process %" PRIu32 ": %s", pid,
                         strerror(errno));
        goto out;
    }
    stack_saved = true;
    uint64_t zero = 0;
    if (mem_io(mem, true, str, (void *)lib, lib_len) != 0 ||
        mem_io(mem, true, sp, &zero, sizeof zero) != 0) {
        rc = cw_diag_set(d, CW_EIO, "cannot write the stack of process %" PRIu32 ": %s", pid,
                         strerror(errno));
        goto out;
    }
    regs = saved;
    regs.rip = target_dlopen;
    regs.rsp = sp;
    regs.rdi = str;
    regs.rsi = RTLD_NOW;
    regs.rax = 0;
    /* Not in a system call any more: no restart is applied to the call. */
    regs.orig_rax = (unsigned long long)-1;
    if (ptrace(PTRACE_SETREGS, p, 0, &regs) != 0 || ptrace(PTRACE_CONT, p, 0, 0) != 0) {
        rc = cw_diag_set(d, CW_EIO, "cannot start the call in process %" PRIu32 ": %s", pid,
                         strerror(errno));
        goto out;
    }
    /* Until the return to address 0 faults. Other signals that arrive
     * meanwhile are delivered (their handlers run below our frame). */
    uintptr_t handle = 0;
    bool returned = false;
    for (;;) {
        w = wait_stop(p, deadline, &status);
        if (w < 0 || WIFEXITED(status) || WIFSIGNALED(status)) {
            regs_saved = stack_saved = false;
            rc = gone(d, pid, "loading the library");
            goto out;
        }
        if (w > 0) {
            /* Deadline: stop it and put it back as it was. */
            if (ptrace(PTRACE_INTERRUPT, p, 0, 0) == 0 &&
                wait_stop(p, cw_plat_mono_ns() + CW_NS_PER_S, &status) == 0)
                rc = cw_diag_set(d, CW_EIO,
                                 "dlopen in process %" PRIu32 " did not return within %.1f s "
                                 "(the thread was stopped holding a lock dlopen needs, or the "
                                 "library's constructor hangs); it was put back as it was, but "
                                 "a lock taken by the abandoned call stays taken",
                                 pid, (double)timeout_ns / 1e9);
            else
                rc = cw_diag_set(d, CW_EIO, "process %" PRIu32 " does not stop again", pid);
            goto out;
        }
        int sig = WIFSTOPPED(status) ? WSTOPSIG(status) : 0;
        if (sig == SIGSEGV) {
            struct user_regs_struct now;
            if (ptrace(PTRACE_GETREGS, p, 0, &now) == 0 && now.rip == 0) {
                handle = (uintptr_t)now.rax;
                returned = true;
                break;
            }
        }
        /* A group-stop or a ptrace event: resume without a signal; any
         * other signal: deliver it. */
        int deliver = (status >> 16) == PTRACE_EVENT_STOP ? 0 : sig;
        if (sig == SIGSTOP || sig == SIGTSTP || sig == SIGTTIN || sig == SIGTTOU) deliver = 0;
        if (sig == SIGSEGV && !returned) {
            struct user_regs_struct at;
            siginfo_t si;
            memset(&si, 0, sizeof si);
            if (ptrace(PTRACE_GETREGS, p, 0, &at) != 0) at.rip = 0;
            ptrace(PTRACE_GETSIGINFO, p, 0, &si);
            rc = cw_diag_set(d, CW_EIO,
                             "process %" PRIu32 " faulted inside dlopen of %s (at 0x%llx, "
                             "address 0x%llx); it was put back as it was before the call",
                             pid, lib, (unsigned long long)at.rip,
                             (unsigned long long)(uintptr_t)si.si_addr);
            goto out;
        }
        if (ptrace(PTRACE_CONT, p, 0, (void *)(intptr_t)deliver) != 0) {
            regs_saved = stack_saved = false;
            rc = gone(d, pid, "loading the library");
            goto out;
        }
    }
    rc = handle ? 0
                : cw_diag_set(d, CW_EIO,
                              "dlopen(\"%s\") failed in process %" PRIu32
                              " (a missing dependency, another architecture, or its "
                              "constructor failed)",
                              lib, pid);

out:
    if (stack_saved) mem_io(mem, true, area, old_stack, area_len);
    if (regs_saved) {
        ptrace(PTRACE_SETFPREGS, p, 0, &fp);
        ptrace(PTRACE_SETREGS, p, 0, &saved);
    }
    if (mem >= 0) close(mem);
    ptrace(PTRACE_DETACH, p, 0, 0);
    return rc;
}

#else

int cw_plat_inject_library(uint32_t pid, const char *lib, int give_fd, int64_t timeout_ns,
                           int64_t *reply, cw_diag_t *d)
{
    (void)pid, (void)lib, (void)give_fd, (void)timeout_ns, (void)reply;
    return cw_diag_set(d, CW_ENOSYS,
                       "attaching to a running process is implemented on Linux x86-64 only");
}

#endif
