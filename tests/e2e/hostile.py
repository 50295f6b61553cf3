"""hostile.py - hostile HTTP clients for the service's tests and bench.

Shared by tests/e2e/test_http_hostile.py and bench/http_slowloris.py:

    with Slowloris("127.0.0.1", port, 64) as s:      # 64 connections that
        lat = probe_health("127.0.0.2", port, 10)     # send a request line
                                                      # and stall
A slowloris connection sends "GET /api/health HTTP/1.1\r\n" and then one
header line every `drip` seconds (never the blank line that ends the
headers); a connection the server closed is opened again, as an attacker
would. The probe is "another client": it binds its socket to a different
loopback source address (127.0.0.2; Linux routes all of 127/8 to lo), so a
per-client-address limit does not count it with the attacker.
"""

import socket
import statistics
import threading
import time


def connect_from(src, host, port, timeout=5.0):
    """A TCP connection to host:port from source address src (None: any)."""
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    s.settimeout(timeout)
    if src:
        s.bind((src, 0))
    s.connect((host, port))
    return s


def raw_request(host, port, data, src=None, timeout=10.0):
    """Sends data (bytes) on a new connection and returns everything the
    server answered until it closed or `timeout` passed (b'' if nothing)."""
    s = connect_from(src, host, port, timeout)
    out = b""
    try:
        try:
            s.sendall(data)
        except OSError:
            pass  # the server may close before reading all of an oversized request
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            try:
                b = s.recv(65536)
            except socket.timeout:
                break
            except OSError:
                break
            if not b:
                break
            out += b
    finally:
        s.close()
    return out


def status_of(answer):
    """The status code of a raw HTTP answer, or None when there was none."""
    if not answer.startswith(b"HTTP/1."):
        return None
    try:
        return int(answer.split(b" ", 2)[1])
    except (IndexError, ValueError):
        return None


def get(host, port, path, src=None, timeout=10.0, headers=()):
    """One GET on a new connection (Connection: close): (status, answer)."""
    req = f"GET {path} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n"
    req += "".join(f"{k}: {v}\r\n" for k, v in headers) + "\r\n"
    a = raw_request(host, port, req.encode("latin-1"), src, timeout)
    return status_of(a), a


class Slowloris:
    """n connections from source address src that never finish their
    headers; a thread keeps them open (reconnecting closed ones)."""

    def __init__(self, host, port, n, src=None, drip=1.0):
        self.host, self.port, self.n, self.src, self.drip = host, port, n, src, drip
        self.socks = []
        self.stop = threading.Event()
        self.opened = 0  # connections opened in all (a closed one is reopened)
        self.refused = 0  # connects or sends that failed
        self.thread = threading.Thread(target=self._run, daemon=True)

    def _open(self):
        try:
            s = connect_from(self.src, self.host, self.port, 2.0)
            s.sendall(b"GET /api/health HTTP/1.1\r\nHost: x\r\n")
            self.opened += 1
            return s
        except OSError:
            self.refused += 1
            return None

    def _run(self):
        k = 0
        while not self.stop.is_set():
            for i, s in enumerate(self.socks):
                if self.stop.is_set():
                    break
                if s is not None:
                    try:
                        s.sendall(f"X-Slow-{k}: {k}\r\n".encode())
                        continue
                    except OSError:
                        s.close()
                self.socks[i] = self._open()
            k += 1
            self.stop.wait(self.drip)

    def __enter__(self):
        self.socks = [self._open() for _ in range(self.n)]
        self.thread.start()
        return self

    def __exit__(self, *exc):
        self.stop.set()
        self.thread.join()
        for s in self.socks:
            if s is not None:
                s.close()
        return False


def probe_health(src, host, port, seconds, interval=0.1, timeout=30.0):
    """GETs /api/health from source address src on a new connection every
    `interval` s for `seconds`: a list of latencies in seconds (None for a
    request that got no 200 within `timeout`)."""
    lat = []
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        t0 = time.monotonic()
        try:
            st, _ = get(host, port, "/api/health", src=src, timeout=timeout)
        except OSError:
            st = None
        lat.append(time.monotonic() - t0 if st == 200 else None)
        time.sleep(interval)
    return lat


def summary(lat):
    """{'n', 'failed', 'median_ms', 'p99_ms', 'max_ms'} of probe_health's list."""
    ok = sorted(x for x in lat if x is not None)
    if not ok:
        return {"n": len(lat), "failed": len(lat), "median_ms": None, "p99_ms": None,
                "max_ms": None}
    p99 = ok[min(len(ok) - 1, int(round(0.99 * (len(ok) - 1))))]
    return {"n": len(lat), "failed": len(lat) - len(ok),
            "median_ms": round(statistics.median(ok) * 1000, 1),
            "p99_ms": round(p99 * 1000, 1), "max_ms": round(ok[-1] * 1000, 1)}
