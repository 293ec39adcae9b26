#!/usr/bin/env python3
"""What a recording costs, from the kernel's own accounting.

For each scenario (a bundled workload, or none for an idle host, at a
sampling rate) this starts `cacheheat record -a -F HZ` (`-G` of an empty
cgroup, or `-p` of a sleeping process: the recorder with nothing to
record, even on a busy host), lets it load and attach, then over the
workload's run reads:

- each BPF program's run_cnt and run_time_ns, for the programs of THIS
  recorder only: their ids come from the recorder's own file descriptors
  (/proc/PID/fd, /proc/PID/fdinfo), so other profilers on the host are
  never read. Run-time statistics are switched on with BPF_ENABLE_STATS,
  whose file descriptor this script holds, so nobody else turning
  kernel.bpf_stats_enabled off stops them mid-run;
- the recorder process's CPU time: the sum of its threads' run time
  (/proc/PID/task/*/schedstat, ns) and, as a cross-check, utime+stime of
  /proc/PID/stat (clock ticks);
- the host's context switches (/proc/stat ctxt), to say how busy it was.

Shares are of all CPU time (wall time x CPUs) for the BPF programs and the
recorder; the last column is the recorder's share of one CPU.
Needs root, python3 and the built binary; no bpftool, no perf. The
workloads run from $WORKLOAD_BIN when set, else from a copy of the first
binary made for the run: never from the recorder's own file. A recorder
whose workload ran from its own executable measured half the recorder
time of the same recorder beside a copy (rcu bad, 0.14% against 0.26% of
all CPU, BENCHMARKS.md "Fifth session"); the cause was not found, and
the copy keeps every binary compared on the same footing.

Usage: bench/cost.py [--bin bin/cacheheat] [--rounds 3] [--seconds 10]
                     [--scenarios default|all|NAME,..] [--raw FILE.json]
"""

import argparse
import ctypes
import json
import os
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time

SYS_BPF = 321  # x86_64
BPF_PROG_GET_FD_BY_ID = 13
BPF_OBJ_GET_INFO_BY_FD = 15
BPF_ENABLE_STATS = 32
BPF_STATS_RUN_TIME = 0

libc = ctypes.CDLL(None, use_errno=True)
libc.syscall.restype = ctypes.c_long


def bpf(cmd, attr):
    r = libc.syscall(ctypes.c_long(SYS_BPF), ctypes.c_long(cmd), ctypes.byref(attr), ctypes.c_long(ctypes.sizeof(attr)))
    if r < 0:
        e = ctypes.get_errno()
        raise OSError(e, f"bpf cmd {cmd}: {os.strerror(e)}")
    return r


def enable_stats():
    """Returns an fd that keeps BPF run-time statistics on while open."""
    attr = (ctypes.c_uint8 * 16)()
    ctypes.c_uint32.from_buffer(attr, 0).value = BPF_STATS_RUN_TIME
    return bpf(BPF_ENABLE_STATS, attr)


_names = {}


def prog_name(prog_id):
    """The program's name (bpf_prog_info.name, at offset 64)."""
    if prog_id in _names:
        return _names[prog_id]
    attr = (ctypes.c_uint8 * 16)()
    ctypes.c_uint32.from_buffer(attr, 0).value = prog_id
    fd = bpf(BPF_PROG_GET_FD_BY_ID, attr)
    try:
        info = (ctypes.c_uint8 * 80)()
        a = (ctypes.c_uint8 * 16)()
        ctypes.c_uint32.from_buffer(a, 0).value = fd
        ctypes.c_uint32.from_buffer(a, 4).value = ctypes.sizeof(info)
        ctypes.c_uint64.from_buffer(a, 8).value = ctypes.addressof(info)
        bpf(BPF_OBJ_GET_INFO_BY_FD, a)
        name = bytes(info[64:80]).split(b"\0", 1)[0].decode()
    finally:
        os.close(fd)
    _names[prog_id] = name
    return name


def prog_stats(pid):
    """{name: [run_cnt, run_time_ns]} of the BPF programs pid holds open."""
    out, seen = {}, set()
    fddir = f"/proc/{pid}/fd"
    for fd in os.listdir(fddir):
        try:
            if os.readlink(f"{fddir}/{fd}") != "anon_inode:bpf-prog":
                continue
            info = {}
            with open(f"/proc/{pid}/fdinfo/{fd}") as f:
                for line in f:
                    k, _, v = line.partition(":")
                    info[k.strip()] = v.strip()
        except OSError:
            continue  # closed meanwhile
        pid_ = int(info.get("prog_id", 0))
        if not pid_ or pid_ in seen:
            continue
        seen.add(pid_)
        name = prog_name(pid_)
        cnt, ns = int(info.get("run_cnt", 0)), int(info.get("run_time_ns", 0))
        prev = out.get(name, [0, 0])
        out[name] = [prev[0] + cnt, prev[1] + ns]
    return out


def proc_cpu(pid):
    """(ns run by every thread of pid, utime+stime ticks)."""
    ns = 0
    for tid in os.listdir(f"/proc/{pid}/task"):
        try:
            with open(f"/proc/{pid}/task/{tid}/schedstat") as f:
                ns += int(f.read().split()[0])
        except OSError:
            pass
    with open(f"/proc/{pid}/stat") as f:
        s = f.read()
    fields = s[s.rindex(")") + 2:].split()
    ticks = int(fields[11]) + int(fields[12])  # utime, stime (fields 14, 15)
    return ns, ticks


def host_ctxt():
    with open("/proc/stat") as f:
        for line in f:
            if line.startswith("ctxt "):
                return int(line.split()[1])
    return 0


def snapshot(pid):
    ns, ticks = proc_cpu(pid)
    return {"t": time.monotonic(), "progs": prog_stats(pid), "cpu_ns": ns, "ticks": ticks, "ctxt": host_ctxt()}


SCENARIOS = {
    "falseshare-good-99": (["workload", "run", "falseshare", "--variant", "good", "-t", "2"], 99),
    "falseshare-good-999": (["workload", "run", "falseshare", "--variant", "good", "-t", "2"], 999),
    "rcu-bad-99": (["workload", "run", "rcu", "--variant", "bad", "-t", "2"], 99),
    "rcu-bad-999": (["workload", "run", "rcu", "--variant", "bad", "-t", "2"], 999),
    "idle-99": (None, 99),
    # The recorder with nothing to record, even on a busy host: an empty
    # cgroup (its fixed cost per window), and a process that sleeps (-p
    # waits on its targets' pidfds and lists the target set once a second).
    "empty-cgroup-99": ("empty-cgroup", 99),
    "sleeper-99": ("sleeper", 99),
    # Switch-heavy: a pipe ping-pong (two switches per round trip;
    # $PINGPONG, built from cmd/cacheheat/testdata/programs/pingpong.c
    # by bench/switch.sh), whose arguments are its seconds and, from
    # $PINGPONG_CPUS (e.g. "2 3"), the CPUs of its two processes.
    "pingpong-99": ("pingpong", 99),
    # The same ping-pong beside a recorder of a sleeping process: what
    # every switch of tasks that are not targets costs.
    "pingpong-others-99": ("pingpong-others", 99),
    # rcu bad as the recorder's command (`record -- CMD`, as `make demo`
    # and most users run it) rather than beside `record -a`: the command
    # watcher's work is in it. Measured over the middle of its run.
    "rcu-bad-cmd-99": (("command", ["workload", "run", "rcu", "--variant", "bad", "-t", "2"]), 99),
    # rcu bad started before the recorder: the steady state of a recording
    # of a service. In rcu-bad-99 the workload starts inside the measured
    # span, so the recorder's one-off reading of its binary's symbols at
    # its first sample (tens of ms for the 18 MB binary) is in it.
    "rcu-bad-running-99": (("running", ["workload", "run", "rcu", "--variant", "bad", "-t", "2"]), 99),
}
DEFAULT = ["falseshare-good-99", "falseshare-good-999", "rcu-bad-99", "rcu-bad-999", "idle-99", "empty-cgroup-99"]


def cgroup2_mount():
    with open("/proc/self/mounts") as f:
        for line in f:
            p = line.split()
            if len(p) >= 3 and p[2] == "cgroup2":
                return p[1]
    raise RuntimeError("no cgroup v2 mount")


def wait_attached(rec):
    """Waits until recorder rec (a Popen of `record`, stderr piped) has
    loaded and attached its programs: its sampler program is there."""
    deadline = time.monotonic() + 60
    while "sample_clock" not in prog_stats(rec.pid):
        if rec.poll() is not None or time.monotonic() > deadline:
            raise RuntimeError(f"recorder did not start: {rec.stderr.read().decode()}")
        time.sleep(0.2)


def run_one(binary, name, seconds, tmp):
    work, hz = SCENARIOS[name]
    target, sleeper, cgroup, running = ["-a"], None, None, None
    if isinstance(work, tuple) and work[0] == "running":
        # Runs past the measurement (the recorder's start, settle and
        # the span); stopped with the recorder.
        running = subprocess.Popen([os.environ["WORKLOAD_BIN"]] + work[1] + ["-d", f"{seconds + 60}s"],
                                   stdout=subprocess.DEVNULL)
        work = None
        time.sleep(1)
    elif isinstance(work, tuple) and work[0] == "command":
        # Runs longer than the measurement; stopped with the recorder.
        target = ["--", os.environ["WORKLOAD_BIN"]] + work[1] + ["-d", f"{seconds + 30}s"]
        work = None
    elif work in ("sleeper", "pingpong-others"):
        sleeper = subprocess.Popen(["sleep", "3600"])
        target, work = ["-p", str(sleeper.pid)], (None if work == "sleeper" else "pingpong")
    elif work == "empty-cgroup":
        cgroup = os.path.join(cgroup2_mount(), f"cacheheat-cost-{os.getpid()}")
        os.makedirs(cgroup, exist_ok=True)
        target, work = ["-G", cgroup], None
    opts = ["-F", str(hz), "-o", f"{tmp}/{name}.rec"]
    if target[0] == "--":
        opts, target = opts + target, []
    rec = subprocess.Popen([binary, "record", "-q"] + target + opts,
                           stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        wait_attached(rec)
        # A moment more so that the verifier's work is not counted.
        time.sleep(2)
        s0 = snapshot(rec.pid)
        if work is None:
            time.sleep(seconds)
        elif work == "pingpong":
            subprocess.run([os.environ["PINGPONG"], str(seconds)] + os.environ.get("PINGPONG_CPUS", "").split(),
                           stdout=subprocess.DEVNULL, check=True)
        else:
            subprocess.run([os.environ["WORKLOAD_BIN"]] + work + ["-d", f"{seconds}s"], stdout=subprocess.DEVNULL, check=True)
        s1 = snapshot(rec.pid)
    finally:
        rec.send_signal(signal.SIGINT)
        rec.wait(timeout=60)
        for p in (sleeper, running):
            if p:
                p.kill()
                p.wait()
        if cgroup:
            os.rmdir(cgroup)
    return s0, s1


def summarize(name, s0, s1, ncpu, tck):
    wall = s1["t"] - s0["t"]
    all_ns = wall * 1e9 * ncpu
    progs = {}
    bpf_ns = 0
    for n, (cnt, ns) in s1["progs"].items():
        c0, n0 = s0["progs"].get(n, [0, 0])
        progs[n] = {"runs": cnt - c0, "ns": ns - n0}
        bpf_ns += ns - n0
    rec_ns = s1["cpu_ns"] - s0["cpu_ns"]
    rec_tick_ns = (s1["ticks"] - s0["ticks"]) / tck * 1e9
    return {
        "scenario": name, "wall_s": wall, "cpus": ncpu,
        "host_ctxt_per_s": (s1["ctxt"] - s0["ctxt"]) / wall,
        "progs": progs,
        "bpf_share": bpf_ns / all_ns,
        "recorder_share": rec_ns / all_ns,
        "recorder_share_ticks": rec_tick_ns / all_ns,
        "recorder_one_cpu": rec_ns / (wall * 1e9),
        "total_share": (bpf_ns + rec_ns) / all_ns,
    }


def pct(x):
    return f"{x * 100:.3f}%"


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--bin", default=os.environ.get("BIN", "bin/cacheheat"),
                    help="the binary, or LABEL=PATH,LABEL=PATH,... to compare builds side by side in one run")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--seconds", type=int, default=10)
    ap.add_argument("--scenarios", default="default", help="default, all, or a comma-separated list")
    ap.add_argument("--raw", help="append every round's raw numbers to this JSON-lines file")
    a = ap.parse_args()
    names = DEFAULT if a.scenarios == "default" else list(SCENARIOS) if a.scenarios == "all" else a.scenarios.split(",")
    for n in names:
        if n not in SCENARIOS:
            sys.exit(f"unknown scenario {n}; known: {', '.join(SCENARIOS)}")
    bins = []
    for b in a.bin.split(","):
        label, _, path = b.rpartition("=")
        bins.append((label or os.path.basename(path), os.path.abspath(path)))
    labels = [l for l, _ in bins]
    ncpu = os.cpu_count()
    tck = os.sysconf("SC_CLK_TCK")
    stats_fd = enable_stats()
    results = {(l, n): [] for l in labels for n in names}
    with tempfile.TemporaryDirectory() as tmp:
        if not os.environ.get("WORKLOAD_BIN"):
            wl = os.path.join(tmp, "workload-bin")
            shutil.copy(bins[0][1], wl)
            os.environ["WORKLOAD_BIN"] = wl
        # Rounds interleave the scenarios and the binaries, so drift on a
        # shared host hits each alike.
        for r in range(a.rounds):
            for n in names:
                for label, binary in bins:
                    s0, s1 = run_one(binary, n, a.seconds, tmp)
                    res = summarize(n, s0, s1, ncpu, tck)
                    res["round"], res["binary"] = r + 1, label
                    res["loadavg"] = os.getloadavg()[0]
                    results[(label, n)].append(res)
                    if a.raw:
                        with open(a.raw, "a") as f:
                            f.write(json.dumps(res) + "\n")
                    print(f"round {r + 1}/{a.rounds} {label} {n}: BPF {pct(res['bpf_share'])} + recorder"
                          f" {pct(res['recorder_share'])} = {pct(res['total_share'])} of all CPU;"
                          f" {res['host_ctxt_per_s']:.0f} switches/s, load {res['loadavg']:.1f}", file=sys.stderr)
    os.close(stats_fd)

    med = statistics.median
    print(f"{ncpu} CPUs, {a.rounds} rounds of {a.seconds} s each, medians over rounds (each round in --raw)\n")
    print("| scenario | binary | host switches/s | BPF share | recorder share | total | recorder, % of one CPU |")
    print("|---|---|---|---|---|---|---|")
    for n in names:
        for l in labels:
            rs = results[(l, n)]
            print(f"| {n} | {l} | {med(r['host_ctxt_per_s'] for r in rs):.0f} | {pct(med(r['bpf_share'] for r in rs))}"
                  f" | {pct(med(r['recorder_share'] for r in rs))} | {pct(med(r['total_share'] for r in rs))}"
                  f" | {pct(med(r['recorder_one_cpu'] for r in rs))} |")
    # Per program: the mean over every run of every round (total ns / total
    # runs), per binary, and the last binary's over the first's.
    print("\n| scenario | program | runs/s | " + " | ".join(f"{l} ns/run" for l in labels)
          + (f" | {labels[-1]}/{labels[0]}" if len(labels) > 1 else "") + " |")
    print("|---|---|---|" + "---|" * len(labels) + ("---|" if len(labels) > 1 else ""))
    for n in names:
        progs = sorted({p for l in labels for r in results[(l, n)] for p in r["progs"]})
        for p in progs:
            means = []
            for l in labels:
                rs = results[(l, n)]
                runs = sum(r["progs"].get(p, {"runs": 0})["runs"] for r in rs)
                ns = sum(r["progs"].get(p, {"ns": 0})["ns"] for r in rs)
                means.append(ns / runs if runs else None)
            if all(m is None for m in means):
                continue
            rs = results[(labels[-1], n)]
            rate = med(r["progs"].get(p, {"runs": 0})["runs"] / r["wall_s"] for r in rs)
            cells = " | ".join("-" if m is None else f"{m:.0f}" for m in means)
            ratio = ""
            if len(labels) > 1:
                ratio = f" | {means[-1] / means[0]:.2f}" if means[0] and means[-1] else " | -"
            print(f"| {n} | {p} | {rate:.0f} | {cells}{ratio} |")


if __name__ == "__main__":
    main()
