/* platform.h - what commitwatch needs of the operating system, in a
 * handful of calls (in the manner of SQLite's os.h and libuv's uv.h).
 *
 * Declared once here, defined once per OS: service/platform/posix/ (Linux)
 * and service/platform/win/ (Windows); CMake compiles one of them. Nothing
 * outside service/platform/ and the OS event sources (sources/perf,
 * sources/etw) includes an OS header or tests _WIN32/__linux__:
 * scripts/check_layers.py fails the build when something does.
 *
 * OS error codes are translated to CW_E* here and nowhere else.
 * Thread: every function may be called from any thread unless it says
 * otherwise. */
#ifndef COMMITWATCH_PLATFORM_H
#define COMMITWATCH_PLATFORM_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "commitwatch/error.h"

/* ---- identity ------------------------------------------------------------ */

/* "linux" or "windows": the platform this binary runs on, which is also the
 * platform whose default stack tags apply to data of no known platform. */
const char *cw_plat_name(void);
/* This machine's name (POSIX gethostname; Windows GetComputerNameA),
 * truncated to len - 1 bytes; "localhost" when it cannot be read. */
void cw_plat_hostname(char *buf, size_t len);

/* ---- clocks -------------------------------------------------------------- */

/* Wall clock, nanoseconds since the Unix epoch (may step). */
int64_t cw_plat_wall_ns(void);
/* Monotonic clock, nanoseconds from an arbitrary origin; never steps. On
 * Linux it is CLOCK_MONOTONIC, the clock perf_event timestamps use. */
int64_t cw_plat_mono_ns(void);
/* Sleeps about ns (<= 0: returns at once). May return early on a signal. */
void cw_plat_sleep_ns(int64_t ns);
/* Tests only: cw_plat_wall_ns() returns fn(ctx) from now on (NULL: the
 * system's clock again), so a unit test can step the wall clock while a
 * source runs (tests/unit/test_replay.c). The monotonic clock and sleep
 * stay real. Not for production code: nothing but tests calls it. */
void cw_plat_fake_wall(int64_t (*fn)(void *ctx), void *ctx);

/* ---- threads ------------------------------------------------------------- */

typedef struct cw_thread cw_thread_t;
typedef struct cw_mutex cw_mutex_t;
typedef struct cw_cond cw_cond_t;

/* Starts fn(arg) on a new thread. 0 and *out set, or CW_ENOMEM. */
int cw_thread_start(cw_thread_t **out, void (*fn)(void *arg), void *arg);
/* Waits for the thread to end and frees t. Accepts NULL. */
void cw_thread_join(cw_thread_t *t);
/* Lowers the calling thread's CPU priority below the service's other
 * threads (Linux: its nice value +10, this thread only; Windows: below
 * normal): work that may fall behind (a heap trace's reader, which then
 * drops and counts) must not take the CPU from the commit level's. Best
 * effort: a refusal is ignored. */
void cw_thread_background(void);

/* 0 and *out set, or CW_ENOMEM. destroy accepts NULL. */
int cw_mutex_create(cw_mutex_t **out);
void cw_mutex_destroy(cw_mutex_t *m);
void cw_mutex_lock(cw_mutex_t *m);
void cw_mutex_unlock(cw_mutex_t *m);

int cw_cond_create(cw_cond_t **out);
void cw_cond_destroy(cw_cond_t *c);
void cw_cond_wait(cw_cond_t *c, cw_mutex_t *m);
/* Waits at most timeout_ns; returns true when woken (or spuriously), false
 * on timeout. */
bool cw_cond_timedwait(cw_cond_t *c, cw_mutex_t *m, int64_t timeout_ns);
void cw_cond_signal(cw_cond_t *c);
void cw_cond_broadcast(cw_cond_t *c);

/* ---- files and paths ----------------------------------------------------- */

/* The absolute, resolved form of an existing path, malloc'd, or NULL. */
char *cw_plat_realpath(const char *path);
/* Is c a directory separator here ('/'; on Windows '/' and '\\')? */
bool cw_plat_is_sep(char c);
/* Size of a regular file in bytes: 0 and *out set, or CW_ENOENT. */
int cw_plat_file_size(const char *path, uint64_t *out);
bool cw_plat_is_file(const char *path);
bool cw_plat_is_dir(const char *path);
/* Puts stdout in binary mode (Windows' C library would turn "\n" into
 * "\r\n" in a gzipped profile written there); nothing elsewhere. */
void cw_plat_stdout_binary(void);
/* Calls cb(ctx, name) for each entry of the folder dir but "." and ".."
 * (names UTF-8, in no particular order) until cb returns nonzero. 0,
 * CW_ENOENT (no folder one can read there) or cb's return. */
int cw_plat_list_dir(const char *dir, int (*cb)(void *ctx, const char *name), void *ctx);

/* Refuses a file the program takes orders from (the configuration, alert
 * rules) when someone other than an administrator or the user running
 * the program could have written it: another user could otherwise turn
 * the service's own privileges against the machine. f is the file opened
 * for reading (checked through its handle, so a file swapped after the
 * check is not read), path its name for the message, what ("the
 * configuration", "the alert rules") says what it is.
 * POSIX: refused when it is writable by its group or by every user (mode
 * & 022), or owned by neither root nor the effective user (who may
 * chmod it); the message names the file, its mode and owner, and the fix
 * (chmod go-w, chown).
 * Windows: refused when its DACL lets any SID but SYSTEM, Administrators,
 * TrustedInstaller, the service's SID (NT SERVICE\commitwatch) and the
 * user running the program write it (write data, append, write the DACL
 * or the owner, generic write or all), or when it has no DACL (everyone
 * may write); the message names the file and the SID that may write.
 * 0, or CW_EPERM with d set (CW_EIO when the file's owner and mode or
 * ACL cannot be read). */
int cw_plat_file_private(FILE *f, const char *path, const char *what, cw_diag_t *d);
/* Where the program's read-only data of `kind` ("web", "stacktags") may
 * live, most specific first: the source tree's folder when the binary runs
 * from a build tree, then the installed one (share/commitwatch/KIND on
 * Linux; KIND\ beside commitwatch.exe on Windows). Fills up to max static
 * strings; returns how many. */
size_t cw_plat_data_dirs(const char *kind, const char **out, size_t max);
/* The service's writable state folder (/var/lib/commitwatch;
 * %ProgramData%\commitwatch), and its configuration file
 * (/etc/commitwatch/commitwatch.conf; %ProgramData%\commitwatch\commitwatch.conf).
 * Static strings. */
const char *cw_plat_state_dir(void);
const char *cw_plat_config_path(void);

/* ---- memory limits --------------------------------------------------------- */

/* The machine's commit limit and the commit charged against it now, bytes.
 * Linux: /proc/meminfo CommitLimit and Committed_AS; *enforced only when
 * /proc/sys/vm/overcommit_memory is 2 (else the kernel lets the commit
 * charge pass the limit: the figure is advisory). Windows:
 * GetPerformanceInfo CommitLimit and CommitTotal (pages) x PageSize;
 * enforced (the limit itself rises when a system-managed page file grows).
 * 0, or CW_EIO (the figures cannot be read) with the outputs unchanged. */
int cw_plat_commit_limit(uint64_t *limit, uint64_t *used, bool *enforced);

/* A process's own memory limit and what counts against it now, bytes;
 * *source names it (static: "RLIMIT_AS", "job object").
 * Linux: the soft RLIMIT_AS of /proc/PID/limits (readable for any
 * process), against its address space (VmSize of /proc/PID/status).
 * Windows: the per-process memory limit of the job object the process is
 * in (JOB_OBJECT_LIMIT_PROCESS_MEMORY), against its private commit
 * (PrivateUsage). Windows gives no way to read the limits of another
 * process's job without a handle to that job, so this is known only for
 * the calling process; for another process in a job it is CW_ENOSYS.
 * 0 with *limit = 0 when the process has no such limit (unlimited, or in
 * no job); 0 with the figures; CW_ENOENT (no such process), CW_EPERM,
 * CW_ENOSYS (a limit may exist that cannot be read) or CW_EIO. */
int cw_plat_process_limit(uint32_t pid, uint64_t *limit, uint64_t *used, const char **source);

/* The calling process's memory, bytes: resident now and at its peak, and
 * the C heap in use (0 where the C library does not say).
 * Linux: VmRSS and VmHWM of /proc/self/status, glibc's mallinfo2 (bytes
 * in use, mapped chunks included); Windows: the working set and its peak
 * (GetProcessMemoryInfo), the heap 0. 0, or CW_EIO with the outputs 0. */
typedef struct cw_plat_self_mem {
    uint64_t rss, peak, heap;
} cw_plat_self_mem_t;
int cw_plat_self_memory(cw_plat_self_mem_t *out);
/* Caps the C library's heap arenas at n (glibc: mallopt M_ARENA_MAX; by
 * default 8 per CPU, and each thread that allocates may get its own, which
 * keeps the freed part of its peak: 6 - 10 MiB per HTTP worker that built
 * a large response). Call before starting the threads it is meant for.
 * Elsewhere a no-op. */
void cw_plat_heap_arenas(unsigned n);
/* Blocks of at least `bytes` get pages of their own, given back when
 * freed (glibc: mallopt M_MMAP_THRESHOLD, which also stops glibc from
 * raising the threshold to the size of every mmapped block freed: by
 * default a freed 4 MiB block sends the next ones of that size into the
 * heap, where their room stays resident once freed, behind smaller live
 * blocks, until a malloc_trim). Elsewhere a no-op. */
void cw_plat_heap_mmap_threshold(size_t bytes);
/* Turns the C library's per-thread caches of freed blocks off for the
 * rest of the process's life, if that can only be done at its start:
 * glibc's tcache (up to 7 blocks of each of 64 sizes per thread, some
 * 240 KB at most, counted in use and never given back while the thread
 * lives; the service's threads (37 by default) filled theirs for hours: 1.1 MB
 * after 30 minutes of the soak) is set by GLIBC_TUNABLES only, read at
 * exec, so this sets glibc.malloc.tcache_count=0 there and executes
 * /proc/self/exe with argv again (the same pid; call it first thing in
 * main, before any thread). The process it becomes puts GLIBC_TUNABLES
 * back as it was, so the programs it runs do not inherit the setting.
 * Nothing is done when GLIBC_TUNABLES already names a glibc.malloc.tcache
 * tunable (the user's choice: glibc.malloc.tcache_count=7 is glibc's
 * default), when LD_PRELOAD is set (another allocator or a profiler), in
 * a secure-execution process, or if the exec fails. Returns true when
 * the caches are off by this call's doing (after its exec). Elsewhere a
 * no-op returning false. docs/DESIGN.md, "Memory". */
bool cw_plat_heap_thread_caches_off(char **argv);

/* ---- network --------------------------------------------------------------- */

/* The HTTP server's per-client connection cap (http_clients.c): civetweb
 * has no hook that refuses a connection before a worker takes it, nor one
 * that names the socket a worker is about to read, so the server looks at
 * the sockets themselves. cw_plat_tcp_list calls cb(ctx, peer_addr,
 * peer_port) for every connected TCP socket of this process whose local
 * port is local_port (peer_addr numeric, as civetweb's remote_addr;
 * handle names the socket for cw_plat_tcp_refuse). cw_plat_tcp_refuse
 * checks that handle is still the socket peer_addr:peer_port ->
 * local_port, sends it msg (len bytes; best effort, never blocks) and
 * shuts it down both ways, so its owner's next read sees the end of the
 * stream (the owner still closes it). Linux: /proc/self/fd; Windows: the
 * process's handles of a socket's object type, asked on a helper thread
 * that the listing waits for at most 250 ms (platform/win/net.c). 0,
 * CW_ENOENT (refuse: no longer that socket), CW_EIO (list, Windows: a
 * handle held the questions past that wait; it is skipped from then on),
 * or CW_ENOSYS (the cap is then not enforced). */
int cw_plat_tcp_list(int local_port,
                     void (*cb)(void *ctx, const char *peer_addr, int peer_port, intptr_t handle),
                     void *ctx);
int cw_plat_tcp_refuse(intptr_t handle, const char *peer_addr, int peer_port, int local_port,
                       const void *msg, size_t len);

/* ---- stop and reload ----------------------------------------------------- */

/* Routes the OS's stop requests (SIGINT, SIGTERM; Ctrl+C, Ctrl+Break,
 * console close) to on_stop and its reload request (SIGHUP; none on a
 * console) to on_reload (may be NULL: reload requests are then ignored).
 * Both run in a signal or control-handler context: they may only set
 * flags (atomics) and call a source's stop(). Call once, from the main
 * thread. cw_plat_catch_stop(NULL, NULL) restores the defaults. */
void cw_plat_catch_stop(void (*on_stop)(void), void (*on_reload)(void));

/* ---- logging ------------------------------------------------------------- */

/* Where log lines go. "stderr" (default; under systemd, with the journal's
 * priority prefix so journald keeps the level), "syslog" (Linux; the
 * Windows Event Log on Windows, once the event source is registered).
 * Installs the sink into log.h. 0, or CW_EINVAL naming the known sinks. */
int cw_plat_log_open(const char *sink, cw_diag_t *d);
/* Flushes and closes the sink opened last; the log returns to stderr. */
void cw_plat_log_close(void);

/* ---- the system service ---------------------------------------------------- */

/* What `commitwatch install|uninstall|start|stop` do: systemd on Linux,
 * the Service Control Manager on Windows. */
typedef struct cw_plat_service_opts {
    const char *root; /* Linux: write under this folder, no systemctl ("" = /) */
    bool print_unit;  /* install: print the unit/service definition and stop */
    /* install, Windows: what an MSI cannot say itself, for a service the
     * MSI has just registered: write the default configuration when there
     * is none, set the recovery actions and the preshutdown timeout. */
    bool msi;
    /* install: writes the default configuration file (when there is none)
     * to f; 0 or nonzero on failure. Supplied by the caller, which owns the
     * configuration's format. */
    int (*write_config)(FILE *f);
} cw_plat_service_opts_t;

/* cmd is "install", "uninstall", "start" or "stop". Prints what it did on
 * stdout and errors (with the fix) on stderr. Returns the exit code: 0, or
 * 1 on failure. */
int cw_plat_service(const char *cmd, const cw_plat_service_opts_t *o);
/* The help text of those commands on this platform (static). */
const char *cw_plat_service_usage(void);

/* Running as the system service. On Windows a service process must hand
 * its main thread to the Service Control Manager, which then calls back;
 * these hooks are what it calls. run() runs the service on the SCM's
 * service thread and calls running(handle) once it is up; stop() and
 * reload() must only set flags (they run on the control handler's
 * thread). */
typedef struct cw_plat_service_hooks {
    int (*run)(void *ctx, void (*running)(void *handle), void *handle);
    void (*stop)(void);
    void (*reload)(void);
    void *ctx;
} cw_plat_service_hooks_t;

/* When the service manager started this process (the Windows SCM), runs
 * h->run as the service "commitwatch": reports START_PENDING (with wait
 * hints) -> RUNNING (when running() is called) -> STOP_PENDING ->
 * STOPPED with run's result as the exit code, and routes STOP, SHUTDOWN
 * and PRESHUTDOWN to stop() and PARAMCHANGE to reload(). Returns 0 after
 * the service stopped, with *run_rc set to run's return value.
 * Returns CW_ENOSYS at once when this process is not a service (a
 * console; Linux, where systemd runs the daemon as a plain process): the
 * caller then runs in the foreground itself. */
int cw_plat_service_dispatch(const cw_plat_service_hooks_t *h, int *run_rc);

/* ---- alerts: the system log and the exec hook (notify.h) ------------------ */

/* A structured entry of the system log for an alert. */
typedef enum cw_plat_alert_level {
    CW_PLAT_ALERT_INFO,    /* a resolved alert */
    CW_PLAT_ALERT_WARNING, /* firing, severity warning */
    CW_PLAT_ALERT_ERROR    /* firing, severity critical */
} cw_plat_alert_level_t;

/* What happened, one stable event id each (Windows: 100 + kind, the
 * message table's ids; journald: a MESSAGE_ID each). */
typedef enum cw_plat_alert_kind {
    CW_PLAT_ALERT_FIRING = 0, /* started firing */
    CW_PLAT_ALERT_ROSE = 1,   /* severity rose */
    CW_PLAT_ALERT_FELL = 2,   /* severity fell */
    CW_PLAT_ALERT_REPEAT = 3, /* still firing (the repeat interval passed) */
    CW_PLAT_ALERT_RESOLVED = 4
} cw_plat_alert_kind_t;

typedef struct cw_plat_alert_field {
    const char *name, *value; /* journald field names: A-Z, 0-9, '_' */
} cw_plat_alert_field_t;

typedef struct cw_plat_alert_entry {
    cw_plat_alert_level_t level;
    cw_plat_alert_kind_t kind;
    const char *message; /* one line */
    /* journald: every field as given (plus MESSAGE, PRIORITY, MESSAGE_ID,
     * SYSLOG_IDENTIFIER); syslog: NAME=value pairs after the message;
     * Event Log: the message is insertion string %1 and the values of
     * the fields, in order, %2 ... (at most 16). */
    const cw_plat_alert_field_t *fields;
    size_t nfields;
} cw_plat_alert_entry_t;

typedef struct cw_plat_alert_log cw_plat_alert_log_t;

/* Opens the system log for alert entries. kind: "auto" (journald when its
 * socket exists, else syslog; Windows: the Event Log), "journald",
 * "syslog", "eventlog" (Windows). root: a folder the well-known sockets
 * are looked for under (ROOT/run/systemd/journal/socket, ROOT/dev/log:
 * tests bind their own there); NULL or "" = the real ones. 0, or
 * CW_EINVAL (a kind this OS does not have: d names the known ones) /
 * CW_ENOMEM / CW_EIO. */
int cw_plat_alert_log_open(const char *kind, const char *root, cw_plat_alert_log_t **out,
                           cw_diag_t *d);
/* "journald", "syslog" or "eventlog": what l writes to. */
const char *cw_plat_alert_log_name(const cw_plat_alert_log_t *l);
/* Writes one entry. 0, or CW_EIO with d saying why (nothing listens, the
 * entry is too large). One thread at a time per l. */
int cw_plat_alert_log_write(cw_plat_alert_log_t *l, const cw_plat_alert_entry_t *e, cw_diag_t *d);
void cw_plat_alert_log_close(cw_plat_alert_log_t *l); /* accepts NULL */

/* Runs the program at path (no shell, no PATH search: a path with spaces
 * or ';' is one path) with argv {path, NULL}, in_len bytes of in on its
 * standard input (then closed; a program that does not read them is not
 * an error), its standard output and error those of this process. Waits
 * at most timeout_ns (<= 0: no limit), then kills it (and, where the OS
 * can, what it started: its process group; a job object). 0 when it ran:
 * *timed_out says whether it was killed at the timeout, else *exit_code
 * is its exit status (-N on POSIX when signal N ended it). CW_ENOENT /
 * CW_EPERM / CW_EIO / CW_ENOMEM when it could not start (d says why). */
int cw_plat_run(const char *path, const void *in, size_t in_len, int64_t timeout_ns, int *exit_code,
                bool *timed_out, cw_diag_t *d);

/* Loads the shared library at lib (an absolute path) into the running
 * process pid without restarting it: one of its threads is stopped,
 * made to call dlopen(lib, RTLD_NOW) and put back where it was (the heap
 * drill-down's attach; docs/DESIGN.md, "Heap drill-down"). give_fd >= 0:
 * a descriptor handed to the library's constructor while it runs
 * (platform/posix/intarget/inject_peer.h is its side), whose answer is stored in
 * *reply; the attach fails when the library does not take it. The whole
 * is bounded by timeout_ns (<= 0: 5 s). Linux x86-64 with the process
 * using this system's glibc; needs root (CAP_SYS_PTRACE) or the same user
 * where Yama allows it. 0, or CW_ENOENT (no such process, or it ended),
 * CW_EPERM, CW_ENOSYS (a static binary, another C library, another OS),
 * CW_EINVAL or CW_EIO, d saying why. */
int cw_plat_inject_library(uint32_t pid, const char *lib, int give_fd, int64_t timeout_ns,
                           int64_t *reply, cw_diag_t *d);

#endif
