/* test_tcp_list.h - the checks of cw_plat_tcp_list and cw_plat_tcp_refuse
 * (the HTTP server's per-client cap) that test_platform.c (Linux) and
 * test_platform_win.c (Windows, under Wine) share: on a loopback listener,
 * the listener itself is not listed; an accepted connection is, once (the
 * client's own socket is on another local port), with the client's
 * address, port and the accepted socket's handle; a refusal with the wrong
 * endpoints does nothing; the right one sends its message and ends the
 * stream for both sides. Then the cost of one listing with 64 connections
 * (and their 64 clients) open, printed. Include after test.h; Windows:
 * after WSAStartup. */
#ifndef CW_TEST_TCP_LIST_H
#define CW_TEST_TCP_LIST_H

#include <stdio.h>
#include <string.h>

#ifdef _WIN32
#include <winsock2.h>
#include <ws2tcpip.h>
typedef SOCKET tcp_sock_t;
typedef int tcp_len_t;
#define TCP_SOCK_OK(s) ((s) != INVALID_SOCKET)
#define tcp_close closesocket
#else
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>
typedef int tcp_sock_t;
typedef socklen_t tcp_len_t;
#define TCP_SOCK_OK(s) ((s) >= 0)
#define tcp_close close
#endif

#include "commitwatch/platform.h"

/* cw_plat_tcp_list's callback: the last connection listed, and how many. */
static int listed_port, listed_n;
static char listed_addr[64];
static intptr_t listed_handle;

static void on_listed(void *ctx, const char *addr, int port, intptr_t handle)
{
    (void)ctx;
    listed_n++;
    snprintf(listed_addr, sizeof listed_addr, "%s", addr);
    listed_port = port;
    listed_handle = handle;
}

/* Lists the connections on port into the globals above. A listing on
 * Windows may give up on a handle whose I/O holds it (CW_EIO, said); the
 * next one skips that handle and must succeed. */
static void list_port(int port)
{
    listed_n = 0;
    int rc = cw_plat_tcp_list(port, on_listed, NULL);
    if (rc == CW_EIO) {
        printf("tcp_list: a listing gave up on a handle that held it\n");
        listed_n = 0;
        rc = cw_plat_tcp_list(port, on_listed, NULL);
    }
    ASSERT_OK(rc);
}

static void check_tcp_list(void)
{
    tcp_sock_t lsn = socket(AF_INET, SOCK_STREAM, 0), cli = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {.sin_family = AF_INET};
    tcp_len_t al = sizeof a;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    ASSERT_TRUE(TCP_SOCK_OK(lsn) && TCP_SOCK_OK(cli));
    ASSERT_EQ(bind(lsn, (struct sockaddr *)&a, sizeof a), 0);
    ASSERT_EQ(listen(lsn, 128), 0);
    ASSERT_EQ(getsockname(lsn, (struct sockaddr *)&a, &al), 0);
    int port = ntohs(a.sin_port);
    /* The listener itself has no peer: not listed. */
    list_port(port);
    ASSERT_EQ(listed_n, 0);
    ASSERT_EQ(connect(cli, (struct sockaddr *)&a, sizeof a), 0);
    tcp_sock_t srv = accept(lsn, NULL, NULL);
    ASSERT_TRUE(TCP_SOCK_OK(srv));
    struct sockaddr_in c;
    al = sizeof c;
    ASSERT_EQ(getsockname(cli, (struct sockaddr *)&c, &al), 0);
    /* Listed once: the client's own socket is on another local port. */
    list_port(port);
    ASSERT_EQ(listed_n, 1);
    ASSERT_STR_EQ(listed_addr, "127.0.0.1");
    ASSERT_EQ(listed_port, ntohs(c.sin_port));
    ASSERT_TRUE(listed_handle == (intptr_t)srv);
    /* The wrong endpoints: nothing done. */
    ASSERT_EQ(cw_plat_tcp_refuse(listed_handle, "127.0.0.1", listed_port + 1, port, "x", 1),
              CW_ENOENT);
    ASSERT_EQ(cw_plat_tcp_refuse(listed_handle, "127.0.0.2", listed_port, port, "x", 1), CW_ENOENT);
    ASSERT_OK(cw_plat_tcp_refuse(listed_handle, "127.0.0.1", listed_port, port, "bye", 3));
    char buf[16];
    ASSERT_EQ(recv(cli, buf, sizeof buf, 0), 3);
    ASSERT_TRUE(memcmp(buf, "bye", 3) == 0);
    ASSERT_EQ(recv(cli, buf, sizeof buf, 0), 0); /* the end of the stream */
    /* And the owner's reads end (Windows: an error after SD_RECEIVE). */
#ifdef _WIN32
    ASSERT_TRUE(recv(srv, buf, sizeof buf, 0) <= 0);
#else
    ASSERT_EQ(recv(srv, buf, sizeof buf, 0), 0);
#endif
    tcp_close(srv);
    tcp_close(cli);
    /* The cost of one listing with 64 connections and their clients open. */
    tcp_sock_t cs[64], ss[64];
    for (int i = 0; i < 64; i++) {
        cs[i] = socket(AF_INET, SOCK_STREAM, 0);
        ASSERT_EQ(connect(cs[i], (struct sockaddr *)&a, sizeof a), 0);
        ss[i] = accept(lsn, NULL, NULL);
        ASSERT_TRUE(TCP_SOCK_OK(ss[i]));
    }
    int64_t t0 = cw_plat_mono_ns();
    for (int i = 0; i < 20; i++) {
        list_port(port);
        ASSERT_EQ(listed_n, 64);
    }
    printf("tcp_list: one listing of 64 connections (and 64 clients): %.0f us\n",
           (double)(cw_plat_mono_ns() - t0) / 20 / 1000);
    for (int i = 0; i < 64; i++) {
        tcp_close(cs[i]);
        tcp_close(ss[i]);
    }
    tcp_close(lsn);
}

#endif
