/*
 * wine_poll_abort.c - sets off Wine 8's wineserver abort on socket polls
 * (docs/WINDOWS.md): why civetweb is built with WSAPoll for Windows.
 *
 * One thread accepts loopback connections and polls up to 60 of them at
 * once, 1 ms at a time, either with select() naming each socket in the
 * read and the except set (as civetweb's poll() emulation did) or with
 * WSAPoll naming it once; two threads connect and reset their connections
 * (SO_LINGER 0) thirty at a time. With select(), a reset that arrives
 * between the server's checks of a socket's two entries leaves the
 * request signalled but pending, and its timeout fails the assertion in
 * complete_async_poll; the prefix's programs then hang or die. Prints the
 * connections accepted and the polls made when it ends on its own.
 *
 *   wine build-win/tests/wine/wine_poll_abort.exe select|wsapoll [SECONDS]
 *
 * Run each mode in a fresh prefix (WINEPREFIX=...), with `timeout`: a
 * program whose wineserver aborted hangs, or exits 0 without its line.
 */
#include <winsock2.h>
#include <ws2tcpip.h>
#include <windows.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_SOCKETS 60

static unsigned short port;
static volatile LONG stopping;

static void reset_close(SOCKET s)
{
    struct linger lg = {1, 0};

    setsockopt(s, SOL_SOCKET, SO_LINGER, (const char *)&lg, sizeof(lg));
    closesocket(s);
}

static DWORD WINAPI client_main(void *arg)
{
    struct sockaddr_in addr = {0};
    SOCKET held[MAX_SOCKETS / 2];
    int n = 0;

    (void)arg;
    addr.sin_family = AF_INET;
    addr.sin_port = htons(port);
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    while (!stopping) {
        SOCKET c = socket(AF_INET, SOCK_STREAM, 0);

        if (connect(c, (struct sockaddr *)&addr, sizeof(addr)) != 0) {
            closesocket(c);
            Sleep(1);
            continue;
        }
        held[n++] = c;
        if (n == MAX_SOCKETS / 2) {
            for (int i = 0; i < n; i++) {
                reset_close(held[i]);
                Sleep(0);
            }
            n = 0;
        }
    }
    for (int i = 0; i < n; i++)
        closesocket(held[i]);
    return 0;
}

/* One poll of socks[0..n) for reading; closes and drops those that are
 * readable or in error. Returns the new count. */
static int poll_once(int use_wsapoll, SOCKET *socks, int n)
{
    if (use_wsapoll) {
        WSAPOLLFD fds[MAX_SOCKETS];

        for (int i = 0; i < n; i++) {
            fds[i].fd = socks[i];
            fds[i].events = POLLRDNORM;
            fds[i].revents = 0;
        }
        if (WSAPoll(fds, (ULONG)n, 1) <= 0) return n;
        for (int i = n - 1; i >= 0; i--)
            if (fds[i].revents) {
                closesocket(socks[i]);
                socks[i] = socks[--n];
            }
    } else {
        fd_set rset, eset;
        struct timeval tv = {0, 1000};

        FD_ZERO(&rset);
        FD_ZERO(&eset);
        for (int i = 0; i < n; i++) {
            FD_SET(socks[i], &rset);
            FD_SET(socks[i], &eset);
        }
        if (select(0, &rset, NULL, &eset, &tv) <= 0) return n;
        for (int i = n - 1; i >= 0; i--)
            if (FD_ISSET(socks[i], &rset) || FD_ISSET(socks[i], &eset)) {
                closesocket(socks[i]);
                socks[i] = socks[--n];
            }
    }
    return n;
}

int main(int argc, char **argv)
{
    WSADATA wsa;
    struct sockaddr_in addr = {0};
    int addrlen = sizeof(addr);
    SOCKET listener, socks[MAX_SOCKETS];
    HANDLE clients[2];
    u_long nonblocking = 1;
    unsigned long accepted = 0, polls = 0;
    int n = 0, use_wsapoll, seconds;
    DWORD end;

    if (argc < 2 || (strcmp(argv[1], "select") != 0 && strcmp(argv[1], "wsapoll") != 0)) {
        fprintf(stderr, "usage: wine_poll_abort select|wsapoll [SECONDS]\n");
        return 2;
    }
    use_wsapoll = strcmp(argv[1], "wsapoll") == 0;
    seconds = argc > 2 ? atoi(argv[2]) : 15;
    if (WSAStartup(MAKEWORD(2, 2), &wsa) != 0) {
        fprintf(stderr, "wine_poll_abort: WSAStartup failed\n");
        return 1;
    }
    listener = socket(AF_INET, SOCK_STREAM, 0);
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (bind(listener, (struct sockaddr *)&addr, sizeof(addr)) != 0 || listen(listener, 200) != 0 ||
        getsockname(listener, (struct sockaddr *)&addr, &addrlen) != 0 ||
        ioctlsocket(listener, FIONBIO, &nonblocking) != 0) {
        fprintf(stderr, "wine_poll_abort: cannot listen on loopback: error %d\n",
                WSAGetLastError());
        return 1;
    }
    port = ntohs(addr.sin_port);
    for (int i = 0; i < 2; i++)
        clients[i] = CreateThread(NULL, 0, client_main, NULL, 0, NULL);

    end = GetTickCount() + (DWORD)seconds * 1000;
    while ((LONG)(GetTickCount() - end) < 0) {
        SOCKET c;

        while (n < MAX_SOCKETS && (c = accept(listener, NULL, NULL)) != INVALID_SOCKET) {
            socks[n++] = c;
            accepted++;
        }
        if (n == 0) {
            Sleep(0);
            continue;
        }
        n = poll_once(use_wsapoll, socks, n);
        polls++;
    }
    stopping = 1;
    WaitForMultipleObjects(2, clients, TRUE, 10000);
    printf("%s: %lu connections accepted, %lu polls in %d s\n", use_wsapoll ? "WSAPoll" : "select",
           accepted, polls, seconds);
    return 0;
}
