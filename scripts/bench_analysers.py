#!/usr/bin/env python3
"""Streaming over MPI beside the socket path (BENCHMARKS.md, "Analysers over MPI (issue 9)").

Each writer rank runs `overhead iprobe N REPS` (tests/programs/mpi/bench/overhead.c):
a loop of MPI_Iprobe, one 48-byte event per call, as fast as the rank can go. Per
writer:reader ratio (1:1 = 2 writers and 2 analysers, 2:1 = 2 and 1, 4:1 = 4 and 1,
8:1 = 8 and 1, oversubscribed) it runs `hark run --analysers A` and `hark run` (socket) with the same writers,
alternating, ROUNDS times, and prints per variant the median ns per call on rank 0,
the events written, received and dropped (profile.json), and the delivered
throughput: events received over the loop time (rank 0's ns per call x calls).

With MODE=analysis: analysis throughput, lossless, WRITERS (4) writers with 1, 2
and 3 analysers and the socket path, alternating: events analysed per second of
the writers' loop, and each analyser's CPU time per event (`hark run -v`).

With MODE=scale: the scaling model's check (BENCHMARKS.md, "Analysers over MPI:
map, scaling and merge"), lossless: WRITERS (32) emulated writers, each N calls,
streaming to 1, 2 and 4 analysers; per run the events and CPU time of every
analyser and analyser rank 0's merge time (`hark run -v`), and the job's wall time.

usage: scripts/bench_analysers.py [HARK] (default target/release/hark)
env:   N (calls per repetition, 10^6), REPS (3), ROUNDS (3), LOSSLESS=1, MODE, WRITERS
"""
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
HARK = sys.argv[1] if len(sys.argv) > 1 else os.path.join(ROOT, "target/release/hark")
N = int(os.environ.get("N", 10**6))
REPS = int(os.environ.get("REPS", 3))
ROUNDS = int(os.environ.get("ROUNDS", 3))
MODE = os.environ.get("MODE", "stream")
LOSSLESS = os.environ.get("LOSSLESS") == "1" or MODE != "stream"
WRITERS = int(os.environ.get("WRITERS", 32 if MODE == "scale" else 4))
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
    cmd = [HARK, "run", "-v", "--no-http", "-o", out]
    if LOSSLESS:
        cmd.append("--lossless")
    if analysers:
        cmd += ["--analysers", str(analysers)]
    cmd += ["--", "mpirun.openmpi", "--oversubscribe", "--bind-to", "none",
            "-np", str(writers), exe, "iprobe", str(N), str(REPS)]
    t0 = time.monotonic()
    p = subprocess.run(cmd, env=env, capture_output=True, text=True)
    wall = time.monotonic() - t0
    if p.returncode != 0:
        sys.exit(f"{' '.join(cmd)} failed:\n{p.stderr}")
    ns = [float(x) for x in p.stdout.split()]
    acc = json.load(open(os.path.join(out, "profile.json")))["accounting"]
    loop_s = sum(ns) * N / 1e9 + ns[0] * N / 1e9  # the warm-up repetition too
    # Each analyser's events and CPU, and rank 0's merge (hark run -v).
    ranks = [(int(e), float(c)) for e, c in
             re.findall(r"analyser rank \d+: (\d+) events from \d+ writer\(s\), ([\d.]+) ms CPU", p.stderr)]
    merge = re.findall(r"analyser\(s\) merged by \w+ in ([\d.]+) ms after the last stream ended "
                       r"\(this rank's own fold ([\d.]+) ms\)", p.stderr)
    return dict(ns=statistics.median(ns), acc=acc, loop_s=loop_s, wall=wall, ranks=ranks,
                merge=tuple(float(x) for x in merge[0]) if merge else None)


def med(xs):
    return statistics.median(list(xs))


print(f"MODE={MODE} N={N} REPS={REPS} ROUNDS={ROUNDS} lossless={LOSSLESS} "
      f"load={os.getloadavg()[0]:.1f}")
results = {}
if MODE == "stream":
    cases = [(2, 2), (2, 1), (4, 1), (8, 1)]
elif MODE == "analysis":
    cases = [(WRITERS, 1), (WRITERS, 2), (WRITERS, 3)]
else:
    cases = [(WRITERS, 1), (WRITERS, 2), (WRITERS, 4)]
for k in range(ROUNDS):
    for writers, analysers in cases:
        variants = [analysers] if MODE == "scale" else [analysers, 0]
        if MODE == "analysis" and analysers != cases[0][1]:
            variants = [analysers]
        for a in variants:
            results.setdefault((writers, analysers, a), []).append(run(writers, a, k))

if MODE == "stream":
    print("| writers:readers | path | ns per call (rank 0, median) | written | received | dropped | delivered |")
    print("|---|---|---|---|---|---|---|")
    for (writers, analysers, a), rs in results.items():
        rate = med(r["acc"]["events_received"] / r["loop_s"] for r in rs)
        path = f"MPI, {analysers} analyser(s)" if a else "socket (one server)"
        ratio = f"{writers // analysers}:1 ({writers} writers)"
        print(f"| {ratio} | {path} | {med(r['ns'] for r in rs):.1f} | "
              f"{med(r['acc']['events_written'] for r in rs):.0f} | "
              f"{med(r['acc']['events_received'] for r in rs):.0f} | "
              f"{med(r['acc']['events_dropped'] for r in rs):.0f} | "
              f"{rate / 1e6:.2f} M events/s ({rate * EVENT / 1e6:.0f} MB/s) |")
else:
    print("| writers | path | events analysed | analysed per s of loop | job wall s | "
          "analyser CPU ns/event (median rank) | busiest analyser CPU ms | merge ms after the last stream (rank 0's fold ms) |")
    print("|---|---|---|---|---|---|---|---|")
    for (writers, analysers, a), rs in results.items():
        rate = med(r["acc"]["events_received"] / r["loop_s"] for r in rs)
        path = f"MPI, {a} analyser(s)" if a else "socket (one server)"
        per_event = med(med(c * 1e6 / max(e, 1) for e, c in r["ranks"]) for r in rs) if a else float("nan")
        busiest = med(max(c for _, c in r["ranks"]) for r in rs) if a else float("nan")
        merges = [r["merge"] for r in rs if r["merge"]]
        merge = f"{med(m[0] for m in merges):.1f} ({med(m[1] for m in merges):.1f})" if merges else "-"
        print(f"| {writers} | {path} | {med(r['acc']['events_received'] for r in rs):.0f} | "
              f"{rate / 1e6:.2f} M | {med(r['wall'] for r in rs):.2f} | {per_event:.0f} | "
              f"{busiest:.0f} | {merge} |")
print(f"load after: {os.getloadavg()[0]:.1f}")
