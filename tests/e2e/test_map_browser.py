"""test_map_browser.py - the memory map (web/js/map.js) in a real browser:
Debian's chromium driven by playwright-core, as test_dashboard_browser.py.
The checks are in map_browser.mjs; this file starts the services:

- main: the MemoryTestApp fixture, fully ingested: between the stored
  snapshot before the step and the one after it, the difference shows
  main's direct VirtualAlloc as a new 10 MB block;
- big: a synthetic trace of one process with 100,000 live ranges (three
  stack tags, addresses in clusters) and a 4 MiB reservation before each
  cluster (reserved, never committed), for the first paint's time and the
  faint drawing of reserved space.

A missing prerequisite fails the test in CI and skips it (exit 77)
elsewhere. Screenshots: $CW_BUILD/screenshots/map-*.png."""

import contextlib
import json
import os
import sys

sys.path.insert(0, os.path.dirname(__file__))
from cwservice import BUILD, MTA, SOURCE, Service, require_fixture  # noqa: E402
import cwbrowser  # noqa: E402

require_fixture()

RANGES = 100_000
T0 = 1750000000000000000


node, chromium, shots = cwbrowser.prerequisites()


def write_big_trace(path):
    """One process, RANGES commits of 4-64 KiB in clusters of 1000 ranges
    (1 GiB apart), one every 100 us, never released: all live at the end;
    before each cluster, 8 MiB below it, a 4 MiB reservation."""
    stacks = [["big.exe!main", "big.exe!Grow", "KernelBase.dll!VirtualAlloc", "ntdll.dll!NtAllocateVirtualMemory"],
              ["big.exe!main", "ntdll.dll!RtlAllocateHeap", "ntdll.dll!NtAllocateVirtualMemory"],
              ["big.exe!main", "KernelBase.dll!CreateThread", "ntdll.dll!NtAllocateVirtualMemory"]]
    with open(path, "w") as f:
        f.write(json.dumps({"format": "commitwatch-trace", "version": 1, "platform": "windows",
                            "pointer_size": 8}) + "\n")
        f.write(json.dumps({"ts": T0, "op": "process_start", "pid": 4242, "name": "big.exe"}) + "\n")
        addr = 0x10000000000
        for i in range(RANGES):
            if i % 1000 == 0:
                addr += 1 << 30
                f.write(json.dumps({"ts": T0 + 500 + i * 100000, "op": "reserve", "pid": 4242,
                                    "addr": hex(addr - (8 << 20)), "size": 4 << 20,
                                    "stack": stacks[0]}) + "\n")
            size = 4096 * (1 + (i * 7919) % 16)
            f.write(json.dumps({"ts": T0 + 1000 + i * 100000, "op": "commit", "pid": 4242,
                                "addr": hex(addr), "size": size, "stack": stacks[i % 3]}) + "\n")
            addr += size + (4096 if i % 5 == 0 else 0)


gen_dir = os.path.join(BUILD, "e2e-http", "map-browser-gen")
os.makedirs(gen_dir, exist_ok=True)
big_trace = os.path.join(gen_dir, "big.jsonl")
write_big_trace(big_trace)

with contextlib.ExitStack() as stack:
    main = stack.enter_context(Service(MTA, name="map-browser"))
    big = stack.enter_context(Service(big_trace, name="map-browser-big"))
    # The budget is 1 s (bench/first_paint.sh measures it too;
    # docs/BENCHMARKS.md quotes it), held here: the best of 5 loads (fetch
    # from the ASan build, parse, layout, draw) measured 512 ms on the
    # shared 2-CPU machine and 465 ms under two busy loops (each load 465 -
    # 751 ms). It was 10 s. (issue 30)
    budget = int(os.environ.get("CW_FIRST_PAINT_MS", "1000"))
    env = dict(os.environ, CW_URL=main.base, CW_BIG_URL=big.base, CW_BIG_RANGES=str(RANGES),
               CW_FIRST_PAINT_MS=str(budget),
               CW_SHOTS=shots, CW_SOURCE=SOURCE, CW_CHROMIUM=chromium)
    cwbrowser.run_driver(node, "map_browser.mjs", env, 300, shots, "map-failure.png")
