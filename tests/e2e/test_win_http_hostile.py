#!/usr/bin/env python3
"""test_win_http_hostile.py - the per-client connection cap of
commitwatch.exe under Wine (issue 13 item 5; docs/RELIABILITY.md, "Hostile
HTTP clients"): the Windows side of test_http_hostile.py's slowloris part.

commitwatch.exe serves the MemoryTestApp replay with
http_client_connections = 4 and a 10 s head deadline. 127.0.0.3 (an
address of its own: the test's own client keeps a connection from
127.0.0.1) opens 16 connections that each send a request line and stall;
the 12 beyond the
cap must be answered 429 and closed at once (well before the deadline),
while another client (127.0.0.2, tests/e2e/hostile.py) gets /api/health,
and the log says who was refused. Before cw_plat_tcp_list had a Windows
version (platform/win/net.c) none was refused: all 16 waited for the
deadline.

Few connections and requests, in a Wine prefix of its own
(cwwine.PrivatePrefix): Wine 8's wineserver aborts when a socket poll
names a socket twice and a reset arrives between its checks of the two
(cwservice.py, docs/WINDOWS.md). commitwatch.exe's civetweb polls with
WSAPoll, which names each socket once; should a server abort anyway, the
shared prefix's other tests do not go down with it.
"""
import os
import socket
import sys
import time

sys.path.insert(0, os.path.dirname(__file__))
from cwservice import MTA, Checks, Service, require_fixture  # noqa: E402
from cwtest import require, wait_until  # noqa: E402
import cwwine  # noqa: E402
from hostile import connect_from, get  # noqa: E402

OTHER = "127.0.0.2"
ATTACKER = "127.0.0.3"
CAP, STALLED = 4, 16
CONFIG = f"http_request_timeout = 10s\nhttp_client_connections = {CAP}\n"

cwwine.require_wine()
require_fixture()


def source_ok(addr):
    try:
        with socket.socket() as s:
            s.bind((addr, 0))
        return True
    except OSError:
        return False


def stdio_of(svc):
    """The size of svc's service.log and where the program's standard
    output and error point (a Windows program under Wine is the process
    wine_run.sh execs)."""
    path = os.path.join(svc.dir, "service.log")
    links = []
    for fd in (1, 2):
        try:
            links.append(f"fd {fd} -> {os.readlink(f'/proc/{svc.proc.pid}/fd/{fd}')}")
        except OSError as e:
            links.append(f"fd {fd}: {e.strerror}")
    return f"service.log: {os.path.getsize(path)} bytes; the program's {', '.join(links)}"


require(source_ok(OTHER) and source_ok(ATTACKER),
        f"binding sockets to {OTHER} and {ATTACKER} (loopback aliases)")
t = Checks()

with cwwine.PrivatePrefix("http-hostile") as px:
    os.environ.update(px.env)  # Service's commitwatch.exe runs in it
    with Service(MTA, name="win-hostile", config=CONFIG) as svc:
        socks = []
        for _ in range(STALLED):
            s = connect_from(ATTACKER, "127.0.0.1", svc.port)
            s.sendall(b"GET /api/health HTTP/1.1\r\nHost: x\r\n")
            socks.append(s)
        t0 = time.monotonic()
        # What each connection got within 5 s (half the head deadline): a 429
        # and the end of the stream, or nothing yet.
        answers = []
        for s in socks:
            s.settimeout(max(0.05, 5 - (time.monotonic() - t0)))
            got = b""
            try:
                while True:
                    b = s.recv(4096)
                    if not b:
                        break
                    got += b
            except OSError:
                pass
            answers.append(got)
        refused = sum(a.startswith(b"HTTP/1.1 429 ") for a in answers)
        print(f"{STALLED} stalled connections from {ATTACKER}, cap {CAP}: {refused} answered 429 "
              f"within {time.monotonic() - t0:.1f} s")
        t.eq(f"the {STALLED - CAP} connections beyond the cap of {CAP} are refused with 429",
             refused, STALLED - CAP)
        t.check("each 429 names the key", all(b"http_client_connections" in a for a in answers
                                              if a.startswith(b"HTTP/1.1 429 ")),
                [a[:200] for a in answers])
        st, ans = get("127.0.0.1", svc.port, "/api/health", src=OTHER, timeout=30)
        t.eq("another client's /api/health meanwhile: 200", st, 200)
        for s in socks:
            s.close()
        said = f"of clients over http_client_connections = {CAP}, e.g. from {ATTACKER}"
        # One clean-clone run (2026-12-07) refused all 12 and answered the
        # other client, but its service.log stayed empty to the end, the
        # service's first lines too (docs/WINDOWS.md); should it happen
        # again, the wait's failure says where the program's output went.
        wait_until(lambda: said in svc.logtext(), 30,
                   lambda: f"the log says connections were refused ({stdio_of(svc)})")
        t.check("the log says connections were refused, naming the client", said in svc.logtext(),
                svc.logtext()[-2000:])
        t.check("no warning that the cap is not enforced",
                "not enforced" not in svc.logtext(), svc.logtext()[-2000:])

t.done()
