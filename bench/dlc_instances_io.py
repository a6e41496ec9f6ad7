#!/usr/bin/env python3
"""Bytes each `djshard dlc` instance reads and writes, by phase.

Starts --instances instances of one dlc run, each on its own hostname (a UTS
namespace: run as root), and samples /proc/<pid>/io (rchar + wchar) of each
every 20 ms. The prepare phase ends when the job's manifest.json appears, the
workers' phase when every shard has a done record; the rest is finalize
(merge). Prints each instance's bytes per phase as a fraction of the corpus,
the busiest instance's, and the phases' times.

  bench/dlc_instances_io.py --bin build/bin/djshard --recipe R --corpus C \
      --workdir DIR [--instances 4] [--shards 64] [--threads 1] [-- dlc options]
"""
import argparse
import os
import shutil
import subprocess
import sys
import time


def counters(pid):
    try:
        with open(f"/proc/{pid}/io") as f:
            fields = dict(line.split(": ") for line in f.read().splitlines())
        return int(fields["rchar"]) + int(fields["wchar"])
    except (OSError, KeyError, ValueError):
        return None


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bin", required=True)
    ap.add_argument("--recipe", required=True)
    ap.add_argument("--corpus", required=True)
    ap.add_argument("--workdir", required=True)
    ap.add_argument("--instances", type=int, default=4)
    ap.add_argument("--shards", type=int, default=64)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("extra", nargs="*")
    a = ap.parse_args()
    job = os.path.join(a.workdir, "instances-job")
    shutil.rmtree(job, ignore_errors=True)
    shutil.rmtree(os.path.join(a.workdir, ".instances-job.dlc-coordination"), ignore_errors=True)
    subprocess.run(["sync"], check=True)
    size = os.path.getsize(a.corpus)
    args = [a.bin, "dlc", "--job-dir", job, "--config", a.recipe, "--dataset-path", a.corpus,
            "--nodes", str(a.instances), "--num-shards", str(a.shards), "--threads",
            str(a.threads), "--run-id", "io-bench", "--poll-interval-secs", "0.2"] + a.extra
    t0 = time.monotonic()
    procs = []
    for i in range(a.instances):
        wrap = ["unshare", "--uts", "sh", "-c", 'hostname "$0" && exec "$@"', f"node-{i}"]
        procs.append(subprocess.Popen(wrap + args, stdout=subprocess.DEVNULL,
                                      stderr=subprocess.DEVNULL))
    last = [0] * a.instances
    marks = {}  # phase end -> (seconds, counters)
    done_dir = os.path.join(job, "state", "done")
    while any(p.poll() is None for p in procs):
        for i, p in enumerate(procs):
            c = counters(p.pid)
            if c is not None:
                last[i] = c
        if "prepare" not in marks and os.path.exists(os.path.join(job, "manifest.json")):
            marks["prepare"] = (time.monotonic() - t0, list(last))
        if "prepare" in marks and "work" not in marks:
            try:
                n = len([f for f in os.listdir(done_dir) if f.startswith("part-")])
            except OSError:
                n = 0
            if n == a.shards:
                marks["work"] = (time.monotonic() - t0, list(last))
        time.sleep(0.02)
    end = time.monotonic() - t0
    codes = [p.returncode for p in procs]
    if any(codes) or "work" not in marks:
        print(f"an instance failed: exit codes {codes}", file=sys.stderr)
        return 1
    phases = [("prepare", [0] * a.instances, marks["prepare"][1], marks["prepare"][0]),
              ("workers", marks["prepare"][1], marks["work"][1],
               marks["work"][0] - marks["prepare"][0]),
              ("finalize", marks["work"][1], last, end - marks["work"][0])]
    print(f"{a.instances} dlc instances, {size / 1e6:.0f} MB, {a.shards} shards, "
          f"{' '.join(a.extra)}: {end:.2f} s in all")
    for name, before, after, secs in phases:
        fractions = [(y - x) / size for x, y in zip(before, after)]
        print(f"  {name:<9} {secs:7.2f} s  (read + written) / corpus per instance: "
              + " ".join(f"{f:.3f}" for f in fractions) + f"; busiest {max(fractions):.3f}")
    shutil.rmtree(job, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
