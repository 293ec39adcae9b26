#!/usr/bin/env python3
"""A pinned ping-pong's rate with and without recorders, in one long run.

bench/switch.sh and the pinned loops before it ran a fresh ping-pong for
each measurement; separate 5 s runs scatter by about 5% on the 2-CPU VM
and 15% on the 16-CPU machine, more than a recorder's cost. Here one
ping-pong runs throughout, pinned to two CPUs, printing its round trips
every PINGPONG_EVERY_MS (cmd/cacheheat/testdata/programs/pingpong.c), and
the recorders come and go beside it. Each round measures a window with no
recorder, then one with each build's `record -a` attached (the builds'
order reversed every other round); a recorder's load and attach (--settle
seconds) and its exit fall outside the windows. A window's rate is the
round trips between its edges, read from the printed counts.

Prints each round's rates and ratios to its own unrecorded window, the
medians, and for two builds the paired differences (mean, standard
deviation, standard error) and how often the second was ahead.

Needs root (record -a), the ping-pong built (cc -O2 -o bin/pingpong
cmd/cacheheat/testdata/programs/pingpong.c) and python3.
Usage: bench/pingpong_toggle.py --bin a=bin/cacheheat[,b=...] [--rounds 8]
       [--seconds 5] [--settle 4] [--cpus "0 1"] [--pingpong bin/pingpong]
"""

import argparse
import bisect
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--bin", required=True, help="name=path,... of the builds")
    ap.add_argument("--rounds", type=int, default=8)
    ap.add_argument("--seconds", type=float, default=5)
    ap.add_argument("--settle", type=float, default=4, help="seconds from a recorder's start to its window")
    ap.add_argument("--cpus", default="0 1")
    ap.add_argument("--pingpong", default="bin/pingpong")
    a = ap.parse_args()
    builds = [b.split("=", 1) for b in a.bin.split(",")]
    for name, path in builds:
        if not os.access(path, os.X_OK):
            sys.exit(f"{name}: {path} is not an executable")
    if not os.access(a.pingpong, os.X_OK):
        sys.exit(f"{a.pingpong} is not built: cc -O2 -o {a.pingpong} cmd/cacheheat/testdata/programs/pingpong.c")
    cpus = a.cpus.split()
    per_round = a.seconds + len(builds) * (a.settle + a.seconds + 2)
    total = a.rounds * per_round + 10
    pp = subprocess.Popen([a.pingpong, str(total)] + cpus, stdout=subprocess.PIPE, text=True,
                          env=dict(os.environ, PINGPONG_EVERY_MS="100"), start_new_session=True)
    times, trips = [], []

    def read():
        for line in pp.stdout:
            p = line.split()
            if len(p) == 3 and p[0] == "at":
                times.append(float(p[1]))
                trips.append(int(p[2]))

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    time.sleep(2)
    if pp.poll() is not None or not times:
        sys.exit("the ping-pong did not start (can it pin to CPUs %s?)" % a.cpus)
    out = tempfile.mkdtemp()
    windows = []  # (round, name, start, end), CLOCK_MONOTONIC
    try:
        for r in range(a.rounds):
            t0 = time.monotonic()
            time.sleep(a.seconds)
            windows.append((r, "none", t0, time.monotonic()))
            order = builds if r % 2 == 0 else builds[::-1]
            for name, path in order:
                rec = subprocess.Popen([path, "record", "-q", "-a", "-o", os.path.join(out, name + ".rec")],
                                       stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
                time.sleep(a.settle)
                if rec.poll() is not None:
                    sys.exit(f"{name}: the recorder exited: {rec.stderr.read().decode()}")
                t0 = time.monotonic()
                time.sleep(a.seconds)
                windows.append((r, name, t0, time.monotonic()))
                rec.send_signal(signal.SIGINT)
                rec.wait()
                time.sleep(2)  # its programs detached, its last window written
    finally:
        os.killpg(pp.pid, signal.SIGKILL)  # both sides of the ping-pong
        pp.wait()
        for f in os.listdir(out):
            os.remove(os.path.join(out, f))
        os.rmdir(out)
    reader.join(timeout=2)

    def count_at(t):
        # Linear between the two printed counts around t.
        i = bisect.bisect_left(times, t)
        if i == 0 or i >= len(times):
            raise SystemExit("a window's edge falls outside the ping-pong's run")
        t0, t1, n0, n1 = times[i - 1], times[i], trips[i - 1], trips[i]
        return n0 + (n1 - n0) * (t - t0) / (t1 - t0)

    rates = {}
    for r, name, s, e in windows:
        rates.setdefault(r, {})[name] = (count_at(e) - count_at(s)) / (e - s)
    names = [n for n, _ in builds]
    print("round trips/s by window, one ping-pong on CPUs %s throughout:" % a.cpus)
    for r in sorted(rates):
        row = rates[r]
        print("round %d none %.0f " % (r + 1, row["none"]) +
              " ".join("%s %.0f (%.3f)" % (n, row[n], row[n] / row["none"]) for n in names))
    ratios = {n: [rates[r][n] / rates[r]["none"] for r in sorted(rates)] for n in names}
    for n in names:
        print("%s: median ratio to unrecorded %.3f over %d rounds" % (n, statistics.median(ratios[n]), a.rounds))
    if len(names) == 2 and a.rounds > 1:
        x, y = names
        d = [q - p for p, q in zip(ratios[x], ratios[y])]
        sd = statistics.stdev(d)
        print("%s - %s: mean %+.3f, sd %.3f, standard error %.3f; %s ahead in %d of %d rounds" %
              (y, x, statistics.mean(d), sd, sd / len(d) ** 0.5, y, sum(v > 0 for v in d), len(d)))


if __name__ == "__main__":
    main()
