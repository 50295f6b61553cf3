"""test_http_hostile.py - the HTTP server under hostile clients (issue 13
item 5; docs/RELIABILITY.md, "Hostile HTTP clients").

Runs `commitwatch run` (the MemoryTestApp replay, a token) and, while
127.0.0.1 plays the attacker, checks that another client (127.0.0.2: a
different source address, tests/e2e/hostile.py) keeps getting fast
answers:

- 64 connections that send a request line and never finish their headers
  (slowloris): the other client's /api/health never fails and stays fast;
  the attacker's excess connections get 429; the log says so;
- the header deadline (http_request_timeout) and the keep-alive idle
  timeout (http_idle_timeout) close stalled and idle connections;
- oversized request lines, headers and query strings: 413 / 414;
- invalid UTF-8 and percent encodings in paths and parameters: 4xx or a
  valid JSON answer, never a 5xx;
- huge windows and steps (from/to/step extremes): 400;
- concurrent writers (POST/DELETE silences) with, without and with a
  wrong token: 200 / 401, while the other client is answered;
- no CORS headers; every answer with Keep-Alive: timeout= the idle
  timeout; the dashboard with a Content-Security-Policy and
  X-Content-Type-Options: nosniff;
- a warning in the log when bound beyond loopback without a token.

Run it against the ASan build too (CW_BIN=build-asan/commitwatch): the
service must exit 0 at the end (Service checks), and ASan aborts it on
any error it finds.
"""

import json
import os
import socket
import sys
import threading
import time
import urllib.request

sys.path.insert(0, os.path.dirname(__file__))
from cwservice import MTA, Checks, Service, free_port, require_fixture  # noqa: E402
from cwtest import in_ci, require, wait_until  # noqa: E402
from hostile import (Slowloris, connect_from, get, probe_health, raw_request,  # noqa: E402
                     status_of, summary)

TOKEN = "s3cret-token"
OTHER = "127.0.0.2"  # "another client": Linux routes all of 127/8 to lo
CONFIG = "http_request_timeout = 2s\nhttp_idle_timeout = 1s\nhttp_client_connections = 8\n"

require_fixture()


def other_source_ok():
    try:
        s = socket.socket()
        s.bind((OTHER, 0))
        s.close()
        return True
    except OSError:
        return False


require(other_source_ok(), f"binding a socket to {OTHER} (loopback aliases)")
t = Checks()


def headers_of(answer):
    head = answer.split(b"\r\n\r\n", 1)[0].decode("latin-1")
    out = {}
    for line in head.split("\r\n")[1:]:
        k, _, v = line.partition(":")
        out[k.strip().lower()] = v.strip()
    return out


def body_of(answer):
    return answer.split(b"\r\n\r\n", 1)[1] if b"\r\n\r\n" in answer else b""


def closed_after(sock, limit):
    """Seconds until the server closed sock (reads until EOF or reset),
    or None when it is still open after `limit` s."""
    t0 = time.monotonic()
    sock.settimeout(limit)
    try:
        while sock.recv(4096):
            pass
    except socket.timeout:
        return None
    except OSError:
        pass
    return time.monotonic() - t0


def request(svc, method, path, token=None, body=None):
    """(status, parsed body) of a request from OTHER (never raises)."""
    data = json.dumps(body).encode() if body is not None else b""
    h = f"{method} {path} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n"
    if token:
        h += f"Authorization: Bearer {token}\r\n"
    if body is not None:
        h += f"Content-Type: application/json\r\nContent-Length: {len(data)}\r\n"
    a = raw_request("127.0.0.1", svc.port, h.encode() + b"\r\n" + data, src=OTHER, timeout=30)
    b = body_of(a)
    try:
        return status_of(a), json.loads(b) if b else None
    except ValueError:
        return status_of(a), b


with Service(MTA, name="hostile", args=["--token", TOKEN], config=CONFIG) as svc:
    port = svc.port

    # ---- slowloris from 127.0.0.1 while 127.0.0.2 asks /api/health ----------------------------
    quiet = summary(probe_health(OTHER, "127.0.0.1", port, 3))
    with Slowloris("127.0.0.1", port, 64) as sl:
        lat = probe_health(OTHER, "127.0.0.1", port, 8)
        # The attacker's own excess connections are refused with a 429.
        st, ans = get("127.0.0.1", port, "/api/health", timeout=10)
    attacked = summary(lat)
    print(f"/api/health from {OTHER}: quiet {quiet}, during 64 slowloris connections {attacked}; "
          f"slowloris connections opened {sl.opened}")
    t.check("slowloris: every /api/health of the other client answered",
            attacked["failed"] == 0 and attacked["n"] >= 20, attacked)
    # Before the fix none answered within 30 s; without the cap the p99
    # was 10 s; the header deadline here is 2 s. The specification (issue
    # 30: p99 50-100 ms; docs/RELIABILITY.md measures 8-22 ms) holds here
    # under ASan on a quiet machine (p99 7-10 ms), but not on the shared
    # 2-CPU machine with two busy loops, where the quiet server's own p99
    # was 112-159 ms and the attacked one's 96-113 ms (ASan, issue 30).
    # So: the attacked p99 under 100 ms, or twice the quiet p99 measured
    # just before when the machine itself is that slow; the median under
    # 100 ms (measured 1.5-36 ms). bench/http_slowloris.py --p99-ms 100
    # asserts the absolute bound, for a quiet machine.
    p99_max = max(100.0, 2 * (quiet["p99_ms"] or 0))
    t.check(f"slowloris: the other client's median under 100 ms, p99 under {p99_max:.0f} ms "
            "(100 ms, or twice the quiet p99)",
            attacked["median_ms"] is not None and attacked["median_ms"] < 100
            and attacked["p99_ms"] < p99_max, {"attacked": attacked, "quiet": quiet})
    t.check("slowloris: the attacker's connections beyond 8 are refused (reopened many times)",
            sl.opened > 64, sl.opened)
    t.check("slowloris: a request of the attacker's while it holds its 8 is a 429 or served",
            st in (429, 200), (st, ans[:200]))
    wait_until(lambda: "http_client_connections = 8" in svc.logtext(), 10,
               "the log says connections were refused")
    t.check("slowloris: the log names the client refused",
            "refused" in svc.logtext() and "from 127.0.0.1" in svc.logtext(), svc.logtext()[-2000:])

    # ---- timeouts --------------------------------------------------------------------------------
    s = connect_from(OTHER, "127.0.0.1", port)
    s.sendall(b"GET /api/health HTTP/1.1\r\nHost: x\r\n")
    took = closed_after(s, 15)
    s.close()
    t.check("a request head not finished within http_request_timeout (2 s) is closed at it",
            took is not None and 1.5 < took < 6, took)
    s = connect_from(OTHER, "127.0.0.1", port)
    took = closed_after(s, 15)
    s.close()
    t.check("a connection that sends nothing is closed at http_request_timeout", took is not None
            and 1.5 < took < 6, took)
    s = connect_from(OTHER, "127.0.0.1", port)
    s.sendall(b"GET /api/health HTTP/1.1\r\nHost: x\r\n\r\n")
    first = s.recv(65536)
    took = closed_after(s, 15)
    s.close()
    t.check("keep-alive: answered, then closed after http_idle_timeout (1 s) idle",
            status_of(first) == 200 and took is not None and took < 4, (first[:40], took))

    # ---- oversized requests ----------------------------------------------------------------------
    # A head over max_request_size (8 KiB): civetweb 1.15 answers 400
    # (read_message's "request too long" becomes get_message's "Malformed
    # message"; its 413 branch is never reached) and closes.
    st, _ = get("127.0.0.1", port, "/api/health", src=OTHER, headers=[("X-Big", "a" * 9000)])
    t.eq("a 9 KB header: 400", st, 400)
    st, _ = get("127.0.0.1", port, "/api/health", src=OTHER,
             headers=[(f"X-H{i}", "b" * 100) for i in range(120)])
    t.eq("120 headers of 100 bytes (12 KB): 400", st, 400)
    st, _ = get("127.0.0.1", port, "/" + "a" * 10000, src=OTHER)
    t.eq("a 10 KB path: 400", st, 400)
    st, _ = get("127.0.0.1", port, "/api/health", src=OTHER, headers=[("X-Fits", "a" * 7000)])
    t.eq("a 7 KB header (under the 8 KiB head): 200", st, 200)
    st, _ = get("127.0.0.1", port, "/api/processes?name=" + "x" * 3000, src=OTHER)
    t.eq("a 3 KB query string: 414", st, 414)
    a = raw_request("127.0.0.1", port, b"GET /api/health HTTP/1.1\r\nHost: x\r\n" + b"X: y\r\n" * 50000,
                    src=OTHER)
    t.check("a 300 KB head sent at once: 400 or closed", status_of(a) in (400, None), a[:100])

    # ---- invalid UTF-8 and percent encodings -----------------------------------------------------
    bad = ["/api/processes/%ff", "/api/processes/%zz", "/api/processes/1%00", "/%c0%ae%c0%ae/etc/passwd",
           "/api/health?%zz=1", "/api/health?a=%", "/api/processes?name=%", "/api/processes?name=%e2%82",
           "/api/processes?%ff=1", "/api/processes?name=%00x", "/api/processes?from=%ff",
           "/api/processes?limit=1%00", "/api/diff?process=%ff&t1=a&t2=b", "/api/alerts?state=%ff%fe",
           "/api/alert-rules/%ff%fe/backtest", "/%ff%fe", "/api/processes?name=" + "%ff" * 80,
           "/api/tags?", "/api/processes?&&&", "/api/processes?=1", "/api/processes?name"]
    for path in bad:
        st, a = get("127.0.0.1", port, path, src=OTHER)
        b = body_of(a)
        ok = st is not None and st < 500
        if ok and b and headers_of(a).get("content-type", "").startswith("application/json"):
            try:
                json.loads(b.decode("utf-8"))
            except ValueError:
                ok = False
        t.check(f"{path[:60]}: a 2xx or 4xx with valid UTF-8 JSON", ok, (st, a[:300]))
    for path in ["/api/health%00x", "/api/processes/1%00/series", "/index.html%00.x",
                 "/api/processes?name=a%00b", "/api/system/series?step=1s%00"]:
        st, a = get("127.0.0.1", port, path, src=OTHER)
        t.check(f"{path}: 400 naming the NUL byte", st == 400 and b"NUL" in body_of(a), a[:300])
    raw_paths = [b"/api/processes/\xff\xfe", b"/api/health?x=\xc3\x28", b"/\xc0\xaf", b"/api/\x01",
                 b"/api/processes?name=\xff"]
    for p in raw_paths:
        a = raw_request("127.0.0.1", port, b"GET " + p + b" HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n",
                        src=OTHER)
        st = status_of(a)
        t.check(f"raw bytes {p!r}: 4xx", st is not None and 400 <= st < 500, a[:200])

    # ---- huge windows and steps ------------------------------------------------------------------
    for q in ["from=0&to=now", "from=-9223372036854775808&to=9223372036854775807",
              "from=-99999999999999999999&to=now", "from=1&to=0", "from=now&to=now",
              "from=-1000000d&to=now", "from=-1h&to=%2B1000000d", "from=9223372036854775807"]:
        for path in ["/api/processes", "/api/system/series", "/api/processes/1/series",
                     "/api/processes/1/stacks", "/api/processes/1/instances"]:
            st, a = get("127.0.0.1", port, f"{path}?{q}", src=OTHER)
            t.check(f"{path}?{q}: 400", st == 400, a[:300])
    # A list bounded by its limit takes any window.
    st, b = request(svc, "GET", "/api/alert-transitions?from=-9223372036854775808&to=9223372036854775807")
    t.check("alert-transitions over all time: 200, a bounded list", st == 200
            and isinstance(b.get("transitions"), list), b)
    for step in ["1ns", "1", "0", "-1s", "99999999999999999999", "1000000d", "0.5s", "1s%00x",
                 "1s%00"]:
        st, a = get("127.0.0.1", port, f"/api/system/series?from=-1h&to=now&step={step}", src=OTHER)
        ok = st == 400 or (step == "1000000d" and st == 200)
        t.check(f"step={step}: 400 (or one point for a step longer than the window)", ok, a[:300])
    for lim in ["0", "-1", "99999999999999999999", "1e9"]:
        st, a = get("127.0.0.1", port, f"/api/processes?limit={lim}", src=OTHER)
        t.eq(f"limit={lim}: 400", st, 400)
    # The largest backtest allowed: 20,000 evaluations at 10 s (the
    # MemoryTestApp's data ends after `to`, so every one is run), one more
    # is a 400. It holds one worker (one read transaction, not one per
    # evaluation) while the other client is answered.
    bt = "/api/alert-rules/likely_leak/backtest?interval=10s"
    to = 1750000000 * 10**9
    st, a = get("127.0.0.1", port, f"{bt}&from={to - 20001 * 10**10}&to={to}", src=OTHER)
    t.check("backtest of 20,001 evaluations: 400", st == 400 and b"20000" in body_of(a), a[:300])
    big = {}

    def backtest():
        t0 = time.monotonic()
        big["st"], big["a"] = get("127.0.0.1", port, f"{bt}&from={to - 20000 * 10**10}&to={to}",
                                  timeout=120)
        big["s"] = time.monotonic() - t0
    th = threading.Thread(target=backtest)
    th.start()
    lat = []
    while th.is_alive():
        lat += probe_health(OTHER, "127.0.0.1", port, 0.2)
    th.join()
    try:
        evals = json.loads(body_of(big["a"])).get("evaluations")
    except ValueError:
        evals = None
    print(f"backtest of 20,000 evaluations: {big.get('s', 0):.2f} s; the other client's "
          f"/api/health meanwhile: {summary(lat)}", flush=True)
    t.check("backtest of 20,000 evaluations: 200, every one run", big["st"] == 200
            and evals == 20000, (big["st"], big["a"][:300]))
    t.check("the other client answered during the backtest (every /api/health, under 1.5 s)",
            lat and None not in lat and max(lat) < 1.5, summary(lat))

    # ---- concurrent writers ----------------------------------------------------------------------
    silence = {"matchers": [{"name": "alertname", "value": "leak"}], "endsAt": "+1h",
               "createdBy": "test", "comment": "hostile"}
    results = {"good": [], "none": [], "wrong": [], "delete": [], "health": []}
    lock = threading.Lock()

    def writer(kind, n):
        for _ in range(n):
            if kind == "good":
                st, b = request(svc, "POST", "/api/silences", TOKEN, silence)
                if st == 200:
                    st2, _ = request(svc, "DELETE", f"/api/silences/{b['id']}", TOKEN)
                    with lock:
                        results["delete"].append(st2)
            elif kind == "none":
                st, _ = request(svc, "POST", "/api/silences", None, silence)
            elif kind == "wrong":
                st, _ = request(svc, "DELETE", "/api/silences/1", TOKEN + "x")
            else:
                t0 = time.monotonic()
                st, _ = request(svc, "GET", "/api/health")
                st = (st, time.monotonic() - t0)
            with lock:
                results[kind].append(st)

    ths = [threading.Thread(target=writer, args=(k, 10))
           for k in ["good"] * 3 + ["none"] * 2 + ["wrong"] * 2 + ["health"]]
    for th in ths:
        th.start()
    for th in ths:
        th.join()
    # 8 connections at once from one address: within http_client_connections.
    t.eq("writers with the token: 30 silences created", results["good"], [200] * 30)
    t.eq("writers with the token: 30 deleted", results["delete"], [200] * 30)
    t.eq("writers without the token: 401", results["none"], [401] * 20)
    t.eq("writers with a wrong token: 401", results["wrong"], [401] * 20)
    t.check("reads during the writes answered within 5 s",
            all(st == 200 and dt < 5 for st, dt in results["health"]), results["health"])
    st, b = request(svc, "GET", "/api/silences?state=active")
    t.check("no silence of the writers left", st == 200 and not any(
        x.get("comment") == "hostile" for x in b.get("silences", [])), b)

    # ---- CORS, CSP, nosniff ----------------------------------------------------------------------
    origin = [("Origin", "http://evil.example")]
    for path in ["/", "/index.html", "/api/health", "/api/openapi.json", "/nope.js"]:
        st, a = get("127.0.0.1", port, path, src=OTHER, headers=origin)
        h = headers_of(a)
        t.check(f"{path} with an Origin: no Access-Control-* header",
                st in (200, 404) and not any(k.startswith("access-control-") for k in h), h)
        t.eq(f"{path}: X-Content-Type-Options: nosniff", h.get("x-content-type-options"), "nosniff")
        # The idle timeout told to clients that pool connections (node's fetch).
        t.eq(f"{path}: Keep-Alive: timeout= http_idle_timeout (1 s)", h.get("keep-alive"), "timeout=1")
        if path.startswith("/api/") or path == "/nope.js":
            t.eq(f"{path}: data, a CSP that allows nothing",
                 h.get("content-security-policy"), "default-src 'none'; frame-ancestors 'none'")
    a = raw_request("127.0.0.1", port, b"OPTIONS /api/silences HTTP/1.1\r\nHost: x\r\nConnection: close\r\n"
                    b"Origin: http://evil.example\r\nAccess-Control-Request-Method: POST\r\n\r\n", src=OTHER)
    # Without the token: 401 (a token is configured; OPTIONS is not GET).
    t.check("a CORS preflight: 401 without Access-Control-* headers",
            status_of(a) == 401 and not any(k.startswith("access-control-") for k in headers_of(a)),
            a[:300])
    for path in ["/", "/index.html"]:
        st, a = get("127.0.0.1", port, path, src=OTHER)
        csp = headers_of(a).get("content-security-policy", "")
        t.check(f"{path}: a Content-Security-Policy (default-src 'self', no inline script)",
                st == 200 and "default-src 'self'" in csp and "script-src" not in csp.replace(
                    "script-src 'self'", ""), csp)

    # The service is still fine after all that.
    st, b = request(svc, "GET", "/api/health")
    t.eq("/api/health after it all", st, 200)

# ---- beyond loopback without a token: a warning --------------------------------------------------


def bound(name, addr, args=()):
    """A service listening on addr:PORT (its own option wins over
    Service's 127.0.0.1, being last); its log once it answers."""
    svc = Service(MTA, name=name, args=["--listen", f"{addr}:{free_port()}", *args],
                  wait_done=False)
    svc.port = int(svc.args[1].rsplit(":", 1)[1])
    svc.base = f"http://127.0.0.1:{svc.port}"
    with svc:
        return svc.logtext()


text = bound("hostile-open", "0.0.0.0")
t.check("0.0.0.0 without a token: a warning in the log", "not loopback, without a token" in text,
        text[-1500:])
text = bound("hostile-open-token", "0.0.0.0", ["--token", TOKEN])
t.check("0.0.0.0 with a token: no such warning", "not loopback" not in text, text[-1500:])
text = bound("hostile-loop", "127.0.0.1")
t.check("loopback without a token: no such warning", "not loopback" not in text, text[-1500:])

t.done()
