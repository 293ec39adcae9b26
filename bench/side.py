#!/usr/bin/env python3
"""Two builds' BPF programs side by side on the same events.

bench/cost.py runs one build's recorder at a time; on the 2-CPU VM the
same build's on_switch moves by 20-30% from one round to the next (the
neighbours' load, steal time), more than a change of a few tens of ns.
Here both builds' `record -a` run at once, so each switch runs both
builds' programs, one after the other, under the same load and cache
state; their ns per run (bpf_stats) are compared round by round. The
programs of a tracepoint run in the order they were attached, and the
second finds lines the first pulled in (on_switch ~90 ns cheaper second
on the 2-CPU VM): the builds' start order is reversed every other round,
and each two rounds' differences are averaged, which cancels the order.
Those pairs' means are summarized (mean, standard deviation, standard
error, how often the second build was cheaper): on the VM, one build
against a copy of itself, a pair's mean scatters by ~4 ns where a round's
own ns scatter by 100.

The load is a pipe ping-pong ($PINGPONG, built from
cmd/cacheheat/testdata/programs/pingpong.c; --cpus pins its two
processes), with --workload a command of the first build's (`workload
run ...`), or with --idle none: then nearly every sample is of an idle
CPU's idle task, whose cost is the cold lines it touches.

Under rcu bad on the VM, two builds whose on_switch is the same code
(the same instructions, bpftool prog dump xlated) came out from -23 to
+34 ns apart in four runs of 8 rounds, each with an se of 7-14 ns: take
a difference of that size as unresolved (BENCHMARKS.md, "The idle CPU's
sample").

Needs root and python3.
Usage: bench/side.py --bin a=PATH,b=PATH [--rounds 8] [--seconds 5]
       [--settle 3] [--programs on_switch,on_waking] [--cpus "0 1"]
       [--workload "workload run rcu --variant bad -t 2" | --idle]
"""

import argparse
import os
import shlex
import signal
import statistics
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from cost import enable_stats, prog_stats, wait_attached  # noqa: E402


def start(binary, out):
    rec = subprocess.Popen([binary, "record", "-q", "-a", "-F", "99", "-o", out],
                           stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    wait_attached(rec)
    return rec


def stop(rec):
    rec.send_signal(signal.SIGINT)
    rec.wait(timeout=60)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--bin", required=True, help="a=PATH,b=PATH: the two builds")
    ap.add_argument("--rounds", type=int, default=8)
    ap.add_argument("--seconds", type=float, default=5)
    ap.add_argument("--settle", type=float, default=3)
    ap.add_argument("--programs", default="on_switch,on_waking")
    ap.add_argument("--cpus", default="")
    ap.add_argument("--workload", default="")
    ap.add_argument("--idle", action="store_true", help="no load (compare the samplers: --programs sample_clock)")
    a = ap.parse_args()
    if a.idle and (a.workload or a.cpus):
        sys.exit("--idle runs no load: no --workload or --cpus with it")
    builds = [b.split("=", 1) for b in a.bin.split(",")]
    if len(builds) != 2:
        sys.exit("--bin takes two builds")
    if a.rounds < 2 or a.rounds % 2:
        sys.exit("--rounds: an even number, 2 or more (each build first in half of them)")
    progs = a.programs.split(",")
    per_round = a.settle + a.seconds + 5
    total = int(a.rounds * per_round + 30)
    load = None
    if a.idle:
        pass
    elif a.workload:
        load = subprocess.Popen([builds[0][1]] + shlex.split(a.workload) + ["-d", f"{total}s"],
                                stdout=subprocess.DEVNULL, start_new_session=True)
    else:
        pp = os.environ.get("PINGPONG", "bin/pingpong")
        if not os.access(pp, os.X_OK):
            sys.exit(f"{pp} is not built: cc -O2 -o {pp} cmd/cacheheat/testdata/programs/pingpong.c")
        load = subprocess.Popen([pp, str(total)] + a.cpus.split(), stdout=subprocess.DEVNULL, start_new_session=True)
    stats_fd = enable_stats()
    ns = {name: {p: [] for p in progs} for name, _ in builds}
    runs = {p: [] for p in progs}
    tmp = tempfile.mkdtemp()
    try:
        for r in range(a.rounds):
            order = builds if r % 2 == 0 else builds[::-1]
            recs = [(name, start(path, f"{tmp}/{name}.rec")) for name, path in order]
            try:
                time.sleep(a.settle)
                s0 = {name: prog_stats(rec.pid) for name, rec in recs}
                time.sleep(a.seconds)
                s1 = {name: prog_stats(rec.pid) for name, rec in recs}
            finally:
                for _, rec in recs:
                    stop(rec)
            line = [f"round {r + 1}/{a.rounds} (first: {order[0][0]})"]
            for p in progs:
                for name, _ in builds:
                    c = s1[name].get(p, [0, 0])[0] - s0[name].get(p, [0, 0])[0]
                    t = s1[name].get(p, [0, 0])[1] - s0[name].get(p, [0, 0])[1]
                    ns[name][p].append(t / c if c else float("nan"))
                    if name == builds[0][0]:
                        runs[p].append(c / a.seconds)
                    line.append(f"{p} {name} {ns[name][p][-1]:.0f}")
            print(", ".join(line), flush=True)
    finally:
        if load:
            os.killpg(load.pid, signal.SIGTERM)
            load.wait()
        os.close(stats_fd)
        for f in os.listdir(tmp):
            os.remove(os.path.join(tmp, f))
        os.rmdir(tmp)
    (na, _), (nb, _) = builds
    print(f"\n| program | runs/s | {na} ns (median) | {nb} ns (median) | {nb} - {na}, pairs of rounds: mean | sd | se | {nb} cheaper |")
    print("|---|---|---|---|---|---|---|---|")
    for p in progs:
        d = [y - x for x, y in zip(ns[na][p], ns[nb][p])]
        pairs = [(d[i] + d[i + 1]) / 2 for i in range(0, len(d) - 1, 2)]
        sd = statistics.stdev(pairs) if len(pairs) > 1 else float("nan")
        print(f"| {p} | {statistics.median(runs[p]):.0f} | {statistics.median(ns[na][p]):.0f} | "
              f"{statistics.median(ns[nb][p]):.0f} | {statistics.mean(pairs):+.1f} | {sd:.1f} | "
              f"{sd / len(pairs) ** 0.5:.1f} | {sum(x < 0 for x in pairs)} of {len(pairs)} |")


if __name__ == "__main__":
    main()
