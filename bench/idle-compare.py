#!/usr/bin/env python3
"""The recorded CPUs' idle time against /proc/stat, window by window.

Runs `BIN record -a -F 99 -d 20s` (beside LOAD, a command, when given)
while reading /proc/stat's idle + iowait (all CPUs) every 5 ms, then
interpolates /proc/stat to each window's bounds (from the file, through
bench/idlewin) and prints the totals and the per-window differences, and
busy + idle against the windows' CPU time. BENCHMARKS.md, "Eighth
session". Needs root and go.

Usage: bench/idle-compare.py BIN [LOAD...]
"""
import bisect
import os
import subprocess
import sys
import tempfile
import threading
import time


def statidle():
    with open('/proc/stat') as f:
        p = f.readline().split()  # "cpu  user nice system idle iowait ..."
    return (int(p[4]) + int(p[5])) * 10_000_000  # USER_HZ ticks to ns


def main():
    binary, load = sys.argv[1], sys.argv[2:]
    here = os.path.dirname(os.path.abspath(__file__))
    tmp = tempfile.mkdtemp()
    idlewin = os.path.join(tmp, 'idlewin')
    subprocess.run(['go', 'build', '-o', idlewin, './bench/idlewin'], cwd=os.path.dirname(here), check=True)
    log, done = [], threading.Event()

    def sample():
        while not done.is_set():
            log.append((time.time_ns(), statidle()))
            time.sleep(0.005)
    th = threading.Thread(target=sample)
    th.start()
    ld = subprocess.Popen(load) if load else None
    rec = os.path.join(tmp, 'idle.rec')
    try:
        subprocess.run([binary, 'record', '-q', '-a', '-F', '99', '-d', '20s', '-o', rec], check=True)
        time.sleep(0.1)
    finally:
        done.set()
        th.join()
        if ld:
            ld.kill()
            ld.wait()
    ts = [t for t, _ in log]

    def at(t):
        i = bisect.bisect_left(ts, t)
        (t0, v0), (t1, v1) = log[i - 1], log[i]
        return v0 + (v1 - v0) * (t - t0) / (t1 - t0)
    out = subprocess.run([idlewin, rec], capture_output=True, text=True, check=True).stdout
    rows = [tuple(map(int, line.split())) for line in out.splitlines()]
    ncpu = os.cpu_count()
    got = sum(r[2] for r in rows)
    truth = sum(at(r[1]) - at(r[0]) for r in rows)
    span = sum(r[1] - r[0] for r in rows)
    busy = sum(r[3] for r in rows)
    diffs = sorted(abs(r[2] - (at(r[1]) - at(r[0]))) for r in rows)
    print(f"{len(rows)} windows, {span / 1e9:.2f} s x {ncpu} CPUs: idle recorded {got / 1e9:.3f} s, "
          f"/proc/stat {truth / 1e9:.3f} s ({100 * (got - truth) / max(truth, 1):+.1f}%); "
          f"busy {busy / 1e9:.3f} s, busy + idle {(busy + got) / 1e9:.3f} s of {span * ncpu / 1e9:.3f}; "
          f"per window |difference| median {diffs[len(diffs) // 2] / 1e6:.1f} ms, max {diffs[-1] / 1e6:.1f} ms")


if __name__ == '__main__':
    main()
