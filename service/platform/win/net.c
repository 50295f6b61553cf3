/* net.c - this process's TCP connections on a local port (platform.h,
 * cw_plat_tcp_list and cw_plat_tcp_refuse), on Windows.
 *
 * A SOCKET is a handle to an AFD endpoint, a file object: the process's
 * handles are listed (NtQueryInformationProcess ProcessHandleTable, one
 * call, Windows 8.1+; where it gives nothing, as Wine 8's, this process's
 * entries of SystemExtendedHandleInformation; else the values 4, 8, ...
 * that GetHandleInformation accepts), those whose object type is not a
 * socket's (NtQueryObject ObjectTypeInformation, learned from a socket
 * made once: "File") are dropped, and the rest are asked
 * getsockname/getpeername, as the Linux layer asks the descriptors of
 * /proc/self/fd. A file that is not a socket answers WSAENOTSOCK.
 * GetExtendedTcpTable would give the connections of a process but not the
 * handle to shut one down. One listing with 64 connections (and 64
 * clients of its own) open: 18 - 36 ms under Wine 8 on a loaded 2-CPU
 * machine, where each question is a round trip to the wineserver (Linux:
 * 0.23 ms; test_tcp_list.h prints it).
 *
 * Asking a handle that is not a socket goes to the driver (ws2_32 tries
 * to import it as a socket: the provider's getsockopt, an IOCTL), and an
 * IOCTL on a file opened for synchronous I/O waits while another thread
 * has a read pending on it (the I/O manager's file object lock): a pipe
 * read that way, as a service's control pipe may be, would hold the
 * sweep until that read ends. So the questions are asked on a thread of
 * their own, which the caller watches: when that thread asked no further
 * handle for STALL_MS, the handle it is asking is never asked again
 * (`stuck`) and the listing fails (CW_EIO: no cap this time). A sweep that
 * moves on is slow, not stuck (a loaded machine: a clean-clone run once
 * took over 250 ms for 128 sockets), and is waited for up to LIST_MAX_MS
 * in all, then fails with nothing marked.
 *
 * Thread: any; the listings are serialized (`list_lock`). */
#include <winsock2.h>
#include <ws2tcpip.h>

#include "platform/win/win_internal.h"

#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <wchar.h>

#include "commitwatch/platform.h"

#define POLL_MS 250        /* the sweep is looked at this often */
#define STALL_MS 1000      /* no further handle asked for this long: stuck */
#define LIST_MAX_MS 5000   /* a listing that still moves on, at most */
#define MAX_HANDLES 65536  /* handles looked at in one listing */
#define MAX_STUCK 16       /* handles never asked again */
#define GAP 1024           /* free handle values in a row that end a scan */
#define PROCESS_HANDLE_TABLE 58    /* NtQueryInformationProcess: ULONG[] handle values */
#define OBJECT_TYPE_INFORMATION 2  /* NtQueryObject: a UNICODE_STRING type name first */
#define SYSTEM_EXTENDED_HANDLE_INFORMATION 64

typedef LONG(NTAPI *nt_query_process_fn)(HANDLE, ULONG, PVOID, ULONG, PULONG);
typedef LONG(NTAPI *nt_query_object_fn)(HANDLE, ULONG, PVOID, ULONG, PULONG);
typedef LONG(NTAPI *nt_query_system_fn)(ULONG, PVOID, ULONG, PULONG);

static struct {
    INIT_ONCE once;
    nt_query_process_fn query_process;
    nt_query_object_fn query_object;
    nt_query_system_fn query_system;
    wchar_t sock_type[64]; /* "" = unknown: every handle is asked */
    SRWLOCK list_lock;
    HANDLE stuck[MAX_STUCK];
    size_t nstuck;
} g = {INIT_ONCE_STATIC_INIT, NULL, NULL, NULL, L"", SRWLOCK_INIT, {0}, 0};

/* The object type name of h into out ("" when it cannot be read): the
 * object manager answers it from the handle table, without I/O. */
static void type_of(HANDLE h, wchar_t *out, size_t cap)
{
    union {
        struct {
            USHORT len, max;
            PWSTR buf;
        } name;
        unsigned char raw[512];
    } info;
    ULONG got = 0;
    out[0] = 0;
    if (!g.query_object || g.query_object(h, OBJECT_TYPE_INFORMATION, &info, sizeof info, &got) < 0)
        return;
    size_t n = info.name.len / sizeof(wchar_t);
    if (!info.name.buf || n >= cap) return;
    wmemcpy(out, info.name.buf, n);
    out[n] = 0;
}

static BOOL CALLBACK init(PINIT_ONCE once, PVOID param, PVOID *ctx)
{
    (void)once;
    (void)param;
    (void)ctx;
    HMODULE nt = GetModuleHandleW(L"ntdll.dll");
    if (nt) {
        g.query_process = (nt_query_process_fn)(void (*)(void))GetProcAddress(
            nt, "NtQueryInformationProcess");
        g.query_object = (nt_query_object_fn)(void (*)(void))GetProcAddress(nt, "NtQueryObject");
        g.query_system = (nt_query_system_fn)(void (*)(void))GetProcAddress(
            nt, "NtQuerySystemInformation");
    }
    WSADATA wsa;
    if (WSAStartup(MAKEWORD(2, 2), &wsa) == 0) { /* counted; the server's is already made */
        SOCKET s = socket(AF_INET, SOCK_STREAM, IPPROTO_TCP);
        if (s != INVALID_SOCKET) {
            type_of((HANDLE)s, g.sock_type, CW_ARRAY_LEN(g.sock_type));
            closesocket(s);
        }
    }
    return TRUE;
}

/* SystemExtendedHandleInformation: the handles of every process, each
 * with its process id and value. On Windows this is every handle of the
 * machine (megabytes): only where ProcessHandleTable says nothing (Wine 8
 * answers it from the wineserver, its own processes only). */
typedef struct {
    PVOID object;
    ULONG_PTR pid, value;
    ULONG access;
    USHORT trace, type;
    ULONG attributes, reserved;
} sys_handle_t;

static size_t system_handles(HANDLE *out, size_t max)
{
    ULONG size = 1 << 16, got = 0;
    unsigned char *buf = NULL;
    LONG st = -1;
    for (int tries = 0; tries < 8 && g.query_system; tries++) {
        unsigned char *b = realloc(buf, size);
        if (!b) break;
        buf = b;
        st = g.query_system(SYSTEM_EXTENDED_HANDLE_INFORMATION, buf, size, &got);
        if (st != (LONG)0xC0000004L) break; /* STATUS_INFO_LENGTH_MISMATCH */
        size = got > size ? got + 4096 : size * 2;
    }
    size_t n = 0;
    if (st >= 0 && got >= 2 * sizeof(ULONG_PTR)) {
        ULONG_PTR count = ((ULONG_PTR *)buf)[0];
        const sys_handle_t *h = (const sys_handle_t *)(buf + 2 * sizeof(ULONG_PTR));
        ULONG_PTR pid = GetCurrentProcessId();
        for (ULONG_PTR i = 0; i < count && n < max &&
                              (const unsigned char *)(h + i + 1) <= buf + got;
             i++)
            if (h[i].pid == pid) out[n++] = (HANDLE)h[i].value;
    }
    free(buf);
    return n;
}

/* The process's handle values into out (at most max); their number. */
static size_t handles(HANDLE *out, size_t max)
{
    ULONG *vals = malloc(max * sizeof *vals);
    ULONG got = 0;
    size_t n = 0;
    if (vals && g.query_process &&
        g.query_process(GetCurrentProcess(), PROCESS_HANDLE_TABLE, vals,
                        (ULONG)(max * sizeof *vals), &got) >= 0 &&
        got >= sizeof *vals) { /* Wine 8 answers it with nothing */
        for (size_t i = 0; i < got / sizeof *vals && n < max; i++)
            out[n++] = (HANDLE)(uintptr_t)vals[i];
        free(vals);
        return n;
    }
    free(vals);
    /* Wine: every handle of the system (its own processes), ours kept. */
    n = system_handles(out, max);
    if (n) return n;
    /* Older Windows: probe the values, 4 apart, until as many as
     * the process has were found (GetProcessHandleCount), past a bound when
     * some closed meanwhile; Wine 8 counts 0: until GAP free values in a
     * row (the table is filled lowest value first). */
    DWORD count = 0, flags;
    if (!GetProcessHandleCount(GetCurrentProcess(), &count)) count = 0;
    uintptr_t last = 4 * (count ? (uintptr_t)count * 2 + GAP : (uintptr_t)max);
    size_t free_run = 0;
    for (uintptr_t v = 4; v <= last && n < max && (count ? n < count : free_run < GAP); v += 4) {
        if (GetHandleInformation((HANDLE)v, &flags)) {
            out[n++] = (HANDLE)v;
            free_run = 0;
        } else {
            free_run++;
        }
    }
    return n;
}

/* Is s a connected TCP socket on local_port? Its peer (numeric, as
 * civetweb's remote_addr: getnameinfo NI_NUMERICHOST) and port. */
static bool peer_of(SOCKET s, int local_port, char addr[64], int *port)
{
    struct sockaddr_storage sa;
    int sl = (int)sizeof sa;
    char serv[16];
    if (getsockname(s, (struct sockaddr *)&sa, &sl) != 0) return false; /* not a socket */
    if (sa.ss_family != AF_INET && sa.ss_family != AF_INET6) return false;
    if (getnameinfo((struct sockaddr *)&sa, (socklen_t)sl, NULL, 0, serv, sizeof serv,
                    NI_NUMERICSERV) != 0 ||
        atoi(serv) != local_port)
        return false;
    sl = (int)sizeof sa;
    if (getpeername(s, (struct sockaddr *)&sa, &sl) != 0) return false; /* the listener */
    if (getnameinfo((struct sockaddr *)&sa, (socklen_t)sl, addr, 64, serv, sizeof serv,
                    NI_NUMERICHOST | NI_NUMERICSERV) != 0)
        return false;
    *port = atoi(serv);
    return true;
}

typedef struct {
    char addr[64];
    int port;
    intptr_t handle;
} found_t;

/* One listing's questions, shared by the caller and the thread that asks
 * them; freed by the last of the two to let go. */
typedef struct {
    volatile LONG refs, at; /* at: the candidate being asked */
    int port;
    size_t n, nfound;
    HANDLE *cand;
    found_t *found;
} job_t;

static void job_release(job_t *j)
{
    if (InterlockedDecrement(&j->refs) != 0) return;
    free(j->cand);
    free(j->found);
    free(j);
}

static DWORD WINAPI ask(LPVOID arg)
{
    job_t *j = arg;
    for (size_t i = 0; i < j->n; i++) {
        InterlockedExchange(&j->at, (LONG)i);
        found_t *f = &j->found[j->nfound];
        if (peer_of((SOCKET)(uintptr_t)j->cand[i], j->port, f->addr, &f->port)) {
            f->handle = (intptr_t)j->cand[i];
            j->nfound++;
        }
    }
    job_release(j);
    return 0;
}

static bool is_stuck(HANDLE h)
{
    for (size_t i = 0; i < g.nstuck; i++)
        if (g.stuck[i] == h) return true;
    return false;
}

/* The candidates into j->cand: handles of a socket's type, not stuck. */
static int candidates(job_t *j)
{
    HANDLE *all = malloc(MAX_HANDLES * sizeof *all);
    if (!all) return CW_ENOMEM;
    size_t n = handles(all, MAX_HANDLES);
    j->cand = malloc((n ? n : 1) * sizeof *j->cand);
    j->found = malloc((n ? n : 1) * sizeof *j->found);
    if (!j->cand || !j->found) {
        free(all);
        return CW_ENOMEM;
    }
    wchar_t type[64];
    for (size_t i = 0; i < n; i++) {
        if (is_stuck(all[i])) continue;
        if (g.sock_type[0]) {
            type_of(all[i], type, CW_ARRAY_LEN(type));
            if (wcscmp(type, g.sock_type) != 0) continue;
        }
        j->cand[j->n++] = all[i];
    }
    free(all);
    return 0;
}

int cw_plat_tcp_list(int local_port,
                     void (*cb)(void *ctx, const char *peer_addr, int peer_port, intptr_t handle),
                     void *ctx)
{
    InitOnceExecuteOnce(&g.once, init, NULL, NULL);
    job_t *j = calloc(1, sizeof *j);
    if (!j) return CW_ENOMEM;
    j->refs = 1;
    j->port = local_port;
    AcquireSRWLockExclusive(&g.list_lock);
    int rc = candidates(j);
    HANDLE th = NULL;
    if (rc == 0 && j->n) {
        InterlockedIncrement(&j->refs);
        th = CreateThread(NULL, 64 * 1024, ask, j, STACK_SIZE_PARAM_IS_A_RESERVATION, NULL);
        if (!th) {
            InterlockedDecrement(&j->refs);
            rc = CW_EIO;
        }
    }
    if (th) {
        LONG seen = -1;
        DWORD still = 0; /* ms the sweep has been on handle `seen` */
        for (DWORD waited = 0; WaitForSingleObject(th, POLL_MS) != WAIT_OBJECT_0;) {
            LONG at = InterlockedCompareExchange(&j->at, 0, 0);
            waited += POLL_MS;
            still = at == seen ? still + POLL_MS : 0;
            if (still >= STALL_MS) {
                /* Held by the handle it is asking: never ask that one again. */
                HANDLE h = j->cand[at];
                if (g.nstuck < MAX_STUCK && !is_stuck(h)) g.stuck[g.nstuck++] = h;
                rc = CW_EIO;
                break;
            }
            if (waited >= LIST_MAX_MS) {
                rc = CW_EIO;
                break;
            }
            seen = at;
        }
        CloseHandle(th);
    }
    ReleaseSRWLockExclusive(&g.list_lock);
    if (rc == 0)
        for (size_t i = 0; i < j->nfound; i++)
            cb(ctx, j->found[i].addr, j->found[i].port, j->found[i].handle);
    job_release(j);
    return rc;
}

int cw_plat_tcp_refuse(intptr_t handle, const char *peer_addr, int peer_port, int local_port,
                       const void *msg, size_t len)
{
    char addr[64];
    int port;
    SOCKET s = (SOCKET)handle;
    /* Still that connection (the handle may have been closed and its value
     * reused since the listing; a TCP connection's endpoints are unique). */
    if (!peer_of(s, local_port, addr, &port) || port != peer_port || strcmp(addr, peer_addr))
        return CW_ENOENT;
    /* A few hundred bytes into a connection that was never answered: the
     * send buffer is empty, so this does not block. */
    if (len) (void)send(s, msg, (int)len, 0);
    shutdown(s, SD_BOTH);
    return 0;
}
