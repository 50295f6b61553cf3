#!/usr/bin/env python3
"""gen_http_trace.py - a JSONL v1 trace with one event-rich second after
another, for the HTTP benchmark (bench/http_bench.sh): N seconds starting
at --start (Unix s), a long-running process "LongRunner.exe" that every
second commits and frees a transient buffer, grows its heap every 10 s,
and trims it every 5 min, plus --procs background processes with a commit
or release every few seconds. Deterministic (no randomness).

usage: gen_http_trace.py --start S --seconds N [--procs 20] > trace.jsonl
"""
import argparse
import sys

p = argparse.ArgumentParser()
p.add_argument("--start", type=int, required=True, help="first second (Unix time)")
p.add_argument("--seconds", type=int, required=True)
p.add_argument("--procs", type=int, default=20)
p.add_argument("--pid-base", type=int, default=4000)
a = p.parse_args()

NS = 1_000_000_000
out = sys.stdout
w = out.write
w('{"format":"commitwatch-trace","version":1,"platform":"windows","pointer_size":8}\n')
MAIN = a.pid_base
STACKS = {
    "tmp": '["ntdll.dll!RtlUserThreadStart","LongRunner.exe!main","LongRunner.exe!Tick","LongRunner.exe!ScratchBuffer","KernelBase.dll!VirtualAlloc"]',
    "heap": '["ntdll.dll!RtlUserThreadStart","LongRunner.exe!main","LongRunner.exe!Cache::Put","ucrtbase.dll!_malloc_base","ntdll.dll!RtlAllocateHeap","ntdll.dll!RtlpExtendHeap","ntdll.dll!NtAllocateVirtualMemory"]',
    "stack": '["ntdll.dll!RtlUserThreadStart","KernelBase.dll!CreateThread","ntdll.dll!RtlpCreateUserStack","ntdll.dll!NtAllocateVirtualMemory"]',
    "bg": '["ntdll.dll!RtlUserThreadStart","svc.dll!Worker","KernelBase.dll!VirtualAlloc"]',
}
t0 = a.start * NS
w(f'{{"ts":{t0},"op":"process_start","pid":{MAIN},"name":"LongRunner.exe","cmdline":"LongRunner.exe --serve"}}\n')
for i in range(a.procs):
    w(f'{{"ts":{t0},"op":"process_start","pid":{MAIN + 1 + i},"name":"svc{i}.exe"}}\n')
heap_addr = 0x200000000
heap = []  # live heap commits (addr, size)
bg_live = {}
for s in range(a.seconds):
    base = t0 + s * NS
    # transient: 1 MiB for 100 ms
    addr = 0x100000000 + (s % 16) * 0x200000
    w(f'{{"ts":{base + 100_000_000},"op":"commit","pid":{MAIN},"addr":{addr},"size":1048576,"stack":{STACKS["tmp"]}}}\n')
    w(f'{{"ts":{base + 200_000_000},"op":"decommit","pid":{MAIN},"addr":{addr},"size":1048576}}\n')
    if s % 10 == 0:
        w(f'{{"ts":{base + 300_000_000},"op":"commit","pid":{MAIN},"addr":{heap_addr},"size":65536,"stack":{STACKS["heap"]}}}\n')
        heap.append(heap_addr)
        heap_addr += 65536
    if s % 300 == 299 and len(heap) > 8:
        for h in heap[:8]:
            w(f'{{"ts":{base + 400_000_000},"op":"decommit","pid":{MAIN},"addr":{h},"size":65536}}\n')
        heap = heap[8:]
    if s % 60 == 30:
        w(f'{{"ts":{base + 500_000_000},"op":"commit","pid":{MAIN},"addr":{0x300000000 + (s // 60 % 4) * 0x100000},"size":262144,"stack":{STACKS["stack"]}}}\n')
    if s % 60 == 50:
        w(f'{{"ts":{base + 500_000_000},"op":"release","pid":{MAIN},"addr":{0x300000000 + (s // 60 % 4) * 0x100000},"size":262144}}\n')
    # background processes: one acts per second, round robin
    i = s % max(1, a.procs)
    if a.procs:
        pid = MAIN + 1 + i
        baddr = 0x500000000 + i * 0x10000000
        if bg_live.get(pid):
            w(f'{{"ts":{base + 600_000_000},"op":"decommit","pid":{pid},"addr":{baddr},"size":{bg_live[pid]}}}\n')
            bg_live[pid] = 0
        else:
            size = 4096 * (1 + (s * 7 + i) % 64)
            w(f'{{"ts":{base + 600_000_000},"op":"commit","pid":{pid},"addr":{baddr},"size":{size},"stack":{STACKS["bg"]}}}\n')
            bg_live[pid] = size
