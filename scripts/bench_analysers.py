#!/usr/bin/env python3
"""Streaming over MPI beside the socket path (BENCHMARKS.md, "Analysers over MPI (issue 9)").

Each writer rank runs `overhead iprobe N REPS` (tests/programs/mpi/bench/overhead.c):
a loop of MPI_Iprobe, one 48-byte event per call, as fast as the rank can go. Per
writer:reader ratio (1:1 = 2 writers and 2 analysers, 2:1 = 2 and 1, 4:1 = 4 and 1)
it runs `hark run --analysers A` and `hark run` (socket) with the same writers,
alternating, ROUNDS times, and prints per variant the median ns per call on rank 0,
the events written, received and dropped (profile.json), and the delivered
throughput: events received over the loop time (rank 0's ns per call x calls).

usage: scripts/bench_analysers.py [HARK] (default target/release/hark)
env:   N (calls per repetition, 10^6), REPS (3), ROUNDS (3), LOSSLESS=1
"""
import json
import os
import statistics
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
HARK = sys.argv[1] if len(sys.argv) > 1 else os.path.join(ROOT, "target/release/hark")
N = int(os.environ.get("N", 10**6))
REPS = int(os.environ.get("REPS", 3))
ROUNDS = int(os.environ.get("ROUNDS", 3))
LOSSLESS = os.environ.get("LOSSLESS") == "1"
EVENT = 48

# Open MPI yields the processor in every call that finds nothing once ranks
# outnumber slots (mpi_yield_when_idle), which the analyser ranks make happen
# on a small machine: the MPI variants would then measure sched_yield, not
# Hark. Both variants spin.
env = dict(os.environ, OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1",
           OMPI_MCA_mpi_yield_when_idle="0")
work = tempfile.mkdtemp(prefix="hark-bench-analysers-")
exe = os.path.join(work, "overhead")
subprocess.run(["mpicc.openmpi", "-O2", "-o", exe,
                os.path.join(ROOT, "tests/programs/mpi/bench/overhead.c")], check=True)


def run(writers, analysers, k):
    out = os.path.join(work, f"run-{writers}-{analysers}-{k}")
    cmd = [HARK, "run", "-q", "--no-http", "-o", out]
    if LOSSLESS:
        cmd.append("--lossless")
    if analysers:
        cmd += ["--analysers", str(analysers)]
    cmd += ["--", "mpirun.openmpi", "--oversubscribe", "--bind-to", "none",
            "-np", str(writers), exe, "iprobe", str(N), str(REPS)]
    p = subprocess.run(cmd, env=env, capture_output=True, text=True)
    if p.returncode != 0:
        sys.exit(f"{' '.join(cmd)} failed:\n{p.stderr}")
    ns = [float(x) for x in p.stdout.split()]
    acc = json.load(open(os.path.join(out, "profile.json")))["accounting"]
    loop_s = sum(ns) * N / 1e9 + ns[0] * N / 1e9  # the warm-up repetition too
    return statistics.median(ns), acc, loop_s


print(f"N={N} REPS={REPS} ROUNDS={ROUNDS} lossless={LOSSLESS} load={os.getloadavg()[0]:.1f}")
print("| writers:readers | path | ns per call (rank 0, median) | written | received | dropped | delivered |")
print("|---|---|---|---|---|---|---|")
results = {}
for k in range(ROUNDS):
    for writers, analysers in [(2, 2), (2, 1), (4, 1)]:
        for a in [analysers, 0]:
            results.setdefault((writers, analysers, a), []).append(run(writers, a, k))
for (writers, analysers, a), rs in results.items():
    ns = statistics.median(r[0] for r in rs)
    written = statistics.median(r[1]["events_written"] for r in rs)
    received = statistics.median(r[1]["events_received"] for r in rs)
    dropped = statistics.median(r[1]["events_dropped"] for r in rs)
    rate = statistics.median(r[1]["events_received"] / r[2] for r in rs)
    path = f"MPI, {analysers} analyser(s)" if a else "socket (one server)"
    ratio = f"{writers // analysers}:1 ({writers} writers)"
    print(f"| {ratio} | {path} | {ns:.1f} | {written:.0f} | {received:.0f} | {dropped:.0f} | "
          f"{rate / 1e6:.2f} M events/s ({rate * EVENT / 1e6:.0f} MB/s) |")
print(f"load after: {os.getloadavg()[0]:.1f}")
