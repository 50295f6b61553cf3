#!/usr/bin/env python3
"""busy_trace.py - the busy machine of issue 34 as a generated JSONL trace
(docs/TRACE_FORMAT.md), for the read-path benchmarks (docs/BENCHMARKS.md,
"Read path").

Two mixes, deterministic for a seed:

  busy  (default) a few long-lived churners (python3, node, perl: each
        --churn calls a second over 40 stacks, commits and releases of
        64 KiB - 4 MiB) and a shell loop starting --rate short processes a
        second (sh, gcc, cc1, as, ld) that live 3 - 10 s, so none is folded
        (fold_lifetime is 2 s), a fifth of them committing past fold_size
        (4 MiB) as well; each commits its image, its libraries and some
        heap, releases part of it and exits.
  live  --live N processes started at the trace's start, each with rundown
        commits and a commit or a release every --period seconds on one of
        8 stacks, alive to the end: the "10,000 live processes" load.

Events are written second by second (a heap of pending ones), so memory
stays small whatever the length. Prints what it wrote to stderr.

    python3 bench/busy_trace.py [-m MINUTES] [--rate R] [--churn C] > busy.jsonl
    python3 bench/busy_trace.py --live 10000 -m 10 > live.jsonl
    build/commitwatch run --no-http --source replay:busy.jsonl --db busy.db
"""
import argparse
import heapq
import random
import sys

S = 1_000_000_000
T0 = 1_780_000_000 * S
HDR = '{"format":"commitwatch-trace","version":1,"platform":"linux","pointer_size":8}\n'


class Out:
    """Events of the current second and later ones, written in ts order."""

    def __init__(self, f):
        self.f = f
        self.q = []  # (ts, seq, line)
        self.seq = 0
        self.n = 0

    def add(self, ts, line):
        self.seq += 1
        heapq.heappush(self.q, (ts, self.seq, line))

    def flush(self, until):
        w, q = self.f.write, self.q
        while q and q[0][0] < until:
            ts, _, line = heapq.heappop(q)
            w(f'{{"ts":{ts},{line}}}\n')
            self.n += 1


def stack(*frames):
    return '"stack":[' + ",".join(f'"{x}"' for x in frames) + "]"


def busy(out, rnd, seconds, rate, churn):
    end = T0 + seconds * S
    churners = [(100, "python3", "libc.so.6"), (200, "node", "node"), (300, "perl", "libc.so.6")]
    state = []
    for pid, name, mod in churners:
        out.add(T0, f'"op":"process_start","pid":{pid},"name":"{name}","cmdline":"{name} worker"')
        out.add(T0, f'"op":"commit","pid":{pid},"addr":{0x10000000},"size":{32 << 20},'
                    f'"rundown":true,{stack(name + "!main", mod + "!init")}')
        stacks = [stack(f"{name}!main", f"{name}!work{k}", f"{mod}!mmap") for k in range(40)]
        state.append([pid, stacks, [], 0x20000000, T0 + rnd.randrange(2 * S // churn)])
    sizes = (65536, 135168, 262144, 1 << 20, 4 << 20)
    progs = (("sh", 40), ("gcc", 20), ("cc1", 20), ("as", 10), ("ld", 10))
    names = [p for p, w in progs for _ in range(w)]
    pid = 10000
    inst = 0
    tnext = T0 + S
    for sec in range(seconds):
        lo, hi = T0 + sec * S, T0 + (sec + 1) * S
        for st in state:  # the churners' calls of this second
            p, stacks, live = st[0], st[1], st[2]
            while st[4] < hi:
                t = st[4]
                st[4] += rnd.randrange(2 * S // churn)
                if not live or (rnd.random() < 0.5 and len(live) < 4000):
                    sz = rnd.choice(sizes)
                    out.add(t, f'"op":"commit","pid":{p},"addr":{st[3]},"size":{sz},'
                               f'{rnd.choice(stacks)}')
                    live.append((st[3], sz))
                    st[3] += sz + 4096
                else:
                    a, sz = live.pop(rnd.randrange(len(live)))
                    out.add(t, f'"op":"release","pid":{p},"addr":{a},"size":{sz}')
        while tnext < hi and tnext < end - 11 * S:  # the shell's children
            t = tnext
            tnext += rnd.randrange(2 * S // rate)
            pid += 1
            inst += 1
            name = rnd.choice(names)
            out.add(t, f'"op":"process_start","pid":{pid},"name":"{name}","cmdline":"{name} -c x{inst}"')
            out.add(t, f'"op":"commit","pid":{pid},"addr":{0x56000000},"size":{rnd.choice((8192, 20480, 65536))},'
                       f'{stack("(exec image)")}')
            tt = t
            for k in range(rnd.randrange(3, 6)):  # ld.so maps the libraries
                tt += rnd.randrange(20_000, 200_000)
                out.add(tt, f'"op":"commit","pid":{pid},"addr":{0x7f000000 + k * 0x100000},'
                            f'"size":{rnd.choice((4096, 16384, 139264))},'
                            f'{stack("ld-linux-x86-64.so.2!_dl_map_object", "libc.so.6!mmap")}')
            heap = rnd.choice((1 << 20, 2 << 20)) if rnd.random() < 0.8 else 6 << 20
            tt += rnd.randrange(1_000_000, 50_000_000)
            out.add(tt, f'"op":"commit","pid":{pid},"addr":{0x60000000},"size":{heap},'
                        f'{stack(name + "!main", name + "!xmalloc", "libc.so.6!malloc", "libc.so.6!mmap")}')
            life = rnd.randrange(3 * S, 10 * S)
            out.add(t + life // 2, f'"op":"release","pid":{pid},"addr":{0x60000000},"size":{heap // 2}')
            out.add(t + life, f'"op":"process_exit","pid":{pid}')
        out.flush(hi)
    out.flush(end + 60 * S)
    return inst + len(churners)


def live(out, rnd, seconds, n, period):
    end = T0 + seconds * S
    stacks = [stack("svc!main", f"svc!task{k}", "libc.so.6!malloc", "libc.so.6!mmap") for k in range(8)]
    nxt = []
    for i in range(n):
        pid = 20000 + i
        out.add(T0, f'"op":"process_start","pid":{pid},"name":"svc{i % 50}","cmdline":"svc --id {i}"')
        out.add(T0, f'"op":"commit","pid":{pid},"addr":{0x10000000},"size":{(1 + i % 16) << 20},'
                    f'"rundown":true,{stack("svc!main", "libc.so.6!init")}')
        nxt.append([pid, T0 + rnd.randrange(period * S), [], 0x20000000])
    for sec in range(seconds):
        hi = T0 + (sec + 1) * S
        for st in nxt:
            while st[1] < hi and st[1] < end:
                t = st[1]
                if not st[2] or (rnd.random() < 0.55 and len(st[2]) < 64):
                    sz = rnd.choice((65536, 262144, 1 << 20))
                    out.add(t, f'"op":"commit","pid":{st[0]},"addr":{st[3]},"size":{sz},'
                               f'{rnd.choice(stacks)}')
                    st[2].append((st[3], sz))
                    st[3] += sz + 4096
                else:
                    a, sz = st[2].pop(rnd.randrange(len(st[2])))
                    out.add(t, f'"op":"release","pid":{st[0]},"addr":{a},"size":{sz}')
                st[1] += rnd.randrange(1, 2 * period * S)
        out.flush(hi)
    out.flush(end + S)
    return n


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("-m", "--minutes", type=float, default=6)
    ap.add_argument("--rate", type=int, default=40, help="short processes started a second")
    ap.add_argument("--churn", type=int, default=2800, help="calls a second of each churner")
    ap.add_argument("--live", type=int, default=0, help="live mix: this many processes")
    ap.add_argument("--period", type=int, default=10, help="live mix: mean s between calls")
    ap.add_argument("--seed", type=int, default=34)
    a = ap.parse_args()
    rnd = random.Random(a.seed)
    out = Out(sys.stdout)
    sys.stdout.write(HDR)
    seconds = int(a.minutes * 60)
    if a.live:
        procs = live(out, rnd, seconds, a.live, a.period)
    else:
        procs = busy(out, rnd, seconds, a.rate, a.churn)
    print(f"busy_trace: {out.n} events, {procs} process instances, {seconds} s", file=sys.stderr)


main()
