#!/usr/bin/env python3
"""Streaming over MPI beside the socket path (BENCHMARKS.md, "Analysers over MPI").

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

With MODE=scale: the scaling model's check (BENCHMARKS.md, "Analysers over MPI"),
lossless: WRITERS (32) emulated writers, each N calls,
streaming to 1, 2 and 4 analysers; per run the events and CPU time of every
analyser and analyser rank 0's merge time (`hark run -v`), and the job's wall time.
With MODEL="c0,c_e,c_t,c_w" (what MODE=calibrate fits) it adds the model's prediction
for the busiest analyser, given the run's measured wall time.

With MODE=curve: the writers-per-analyser curve (BENCHMARKS.md, "Writers per analyser"),
every analysis on: 1, 2, 4, 8 and 16 writers to one analyser over MPI (`--analysers 1`), to
one server through the shared-memory ring (the default) and over the socket (`HARK_SHM=0`),
each lossless (`--lossless`: events analysed per second of the writers' loop) and lossy (the
share of events dropped), alternating, ROUNDS times, in one run.

With MODE=calibrate: the runs that separate the model's inputs, lossless, one analyser:
the events varied at a fixed writer count (4, and WRITERS = 24), and the run's length
varied at a fixed small event count by pausing the writers (4 and WRITERS writers,
PAUSES seconds). It prints the medians per case and the least-squares fit of the
analyser's CPU = c0(W) + c_e * events + (c_t + c_w * streams) * wall seconds, with
each case's residual (N is not used: the cases set their own calls). Run MODE=calibrate and
MODE=scale with OMPI_MCA_mpi_yield_when_idle=1 (see below).

usage: scripts/bench_analysers.py [HARK] (default target/release/hark)
env:   N (calls per repetition, 10^6), REPS (3), ROUNDS (3), LOSSLESS=1, MODE, WRITERS,
       RUN_TIMEOUT (s, 900: a run still going is killed and left out, as is a failed one),
       PAUSE (seconds every writer sleeps after its loop, before MPI_Finalize: its
       stream stays open and idle; 0), PAUSES (MODE=calibrate: "0,6,12"), MODEL
"""
import json
import os
import re
import signal
import statistics
import subprocess
import sys
import tempfile
import time

from fit import solve

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
HARK = sys.argv[1] if len(sys.argv) > 1 else os.path.join(ROOT, "target/release/hark")
N = int(os.environ.get("N", 10**6))
REPS = int(os.environ.get("REPS", 3))
ROUNDS = int(os.environ.get("ROUNDS", 3))
MODE = os.environ.get("MODE", "stream")
LOSSLESS = os.environ.get("LOSSLESS") == "1" or MODE != "stream"
WRITERS = int(os.environ.get("WRITERS", {"scale": 32, "calibrate": 24}.get(MODE, 4)))
PAUSE = float(os.environ.get("PAUSE", 0))
PAUSES = [float(x) for x in os.environ.get("PAUSES", "0,6,12").split(",")]
RUN_TIMEOUT = float(os.environ.get("RUN_TIMEOUT", 900))
FAILED = []  # the runs that failed or timed out, left out of the medians
MODEL = [float(x) for x in os.environ["MODEL"].split(",")] if os.environ.get("MODEL") else None
EVENT = 48

# Open MPI yields the processor in every call that finds nothing once ranks
# outnumber slots (mpi_yield_when_idle), which the analyser ranks make happen
# on a small machine: the MPI variants would then measure sched_yield, not
# Hark. Both variants spin, unless OMPI_MCA_mpi_yield_when_idle=1 is given: an analyser
# that spins in a blocking MPI call (MPI_Init, waiting for the writers to get through
# theirs) burns whatever share of a core it gets, which then dominates its CPU time
# (BENCHMARKS.md, "Analysers over MPI"): run MODE=calibrate and
# MODE=scale with 1.
env = dict(os.environ, OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1",
           OMPI_MCA_mpi_yield_when_idle=os.environ.get("OMPI_MCA_mpi_yield_when_idle", "0"))
work = tempfile.mkdtemp(prefix="hark-bench-analysers-")
exe = os.path.join(work, "overhead")
subprocess.run(["mpicc.openmpi", "-O2", "-o", exe,
                os.path.join(ROOT, "tests/programs/mpi/bench/overhead.c")], check=True)


def run(writers, analysers, k, n=N, pause=PAUSE, lossless=LOSSLESS, shm=True):
    out = os.path.join(work, f"run-{writers}-{analysers}-{n}-{pause:g}-{k}-{lossless}-{shm}")
    cmd = [HARK, "run", "-v", "--no-http", "-o", out]
    if lossless:
        cmd.append("--lossless")
    if analysers:
        cmd += ["--analysers", str(analysers)]
    cmd += ["--", "mpirun.openmpi", "--oversubscribe", "--bind-to", "none",
            "-np", str(writers), exe, "iprobe", str(n), str(REPS)]
    if pause:
        cmd.append(str(pause))
    t0 = time.monotonic()
    # Its own session, so that a run which hangs is ended whole (hark run,
    # mpirun, the writers and the analysers) and the sweep goes on.
    run_env = env if shm else dict(env, HARK_SHM="0")
    p = subprocess.Popen(cmd, env=run_env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                         start_new_session=True)
    try:
        stdout, stderr = p.communicate(timeout=RUN_TIMEOUT)
    except subprocess.TimeoutExpired:
        os.killpg(p.pid, signal.SIGKILL)
        stdout, stderr = p.communicate()
        p.returncode = "timeout"
    wall = time.monotonic() - t0
    if p.returncode != 0:
        FAILED.append(f"{writers} writers, {analysers} analyser(s), {n} calls, pause {pause:g} s: "
                      f"{p.returncode} after {wall:.0f} s")
        print(f"{' '.join(cmd)} failed ({p.returncode}):\n{stderr}", file=sys.stderr, flush=True)
        return None
    ns = [float(x) for x in stdout.split()]
    acc = json.load(open(os.path.join(out, "profile.json")))["accounting"]
    loop_s = sum(ns) * n / 1e9 + ns[0] * n / 1e9  # the warm-up repetition too
    # Each analyser's events, CPU and writers, and rank 0's merge (hark run -v).
    found = re.findall(r"analyser rank \d+: (\d+) events from (\d+) writer\(s\), ([\d.]+) ms CPU",
                       stderr)
    ranks = [(int(e), float(c)) for e, _, c in found]
    streams = [int(w) for _, w, _ in found]
    merge = re.findall(r"analyser\(s\) merged by \w+ in ([\d.]+) ms after the last stream ended "
                       r"\(this rank's own fold ([\d.]+) ms\)", stderr)
    print(f"{writers} writers, {analysers} analyser(s), {n} calls, pause {pause:g} s, round {k}: "
          f"wall {wall:.1f} s, analysers (events, CPU ms) {ranks}", file=sys.stderr, flush=True)
    return dict(ns=statistics.median(ns), acc=acc, loop_s=loop_s, wall=wall, ranks=ranks,
                streams=streams,
                merge=tuple(float(x) for x in merge[0]) if merge else None)


def med(xs):
    return statistics.median(list(xs))


print(f"MODE={MODE} N={N} REPS={REPS} ROUNDS={ROUNDS} lossless={LOSSLESS} "
      f"yield_when_idle={env['OMPI_MCA_mpi_yield_when_idle']} "
      f"load={os.getloadavg()[0]:.1f}")


if MODE == "calibrate":
    # (writers, calls per repetition, pause s): the events at a fixed writer
    # count, then the length of the run at a fixed small event count.
    cases = [(4, 10**5, 0), (4, 4 * 10**5, 0), (WRITERS, 5 * 10**4, 0)]
    cases += [(w, n, p) for w, n in [(4, 10**4), (WRITERS, 2 * 10**3)] for p in PAUSES]
    cases = list(dict.fromkeys(cases))
    results = {}
    for k in range(ROUNDS):
        for w, n, p in cases:
            r = run(w, 1, k, n, p)
            if r:
                results.setdefault((w, n, p), []).append(r)
    rows = []
    for (w, n, p), rs in results.items():
        rows.append(dict(w=w, n=n, p=p, e=med(r["ranks"][0][0] for r in rs),
                         t=med(r["wall"] for r in rs), cpu=med(r["ranks"][0][1] for r in rs)))
    counts = sorted({r["w"] for r in rows})
    # CPU ms = c0(W) + c_e * events + (c_t + c_w * W) * wall s
    a = [[1.0 * (r["w"] == c) for c in counts] + [r["e"], r["t"], r["w"] * r["t"]] for r in rows]
    x = solve(a, [r["cpu"] for r in rows])
    c0, (ce, ct, cw) = dict(zip(counts, x)), x[len(counts):]
    print("| writers | calls per rep | pause s | events | job wall s | analyser CPU ms | fit ms | residual |")
    print("|---|---|---|---|---|---|---|---|")
    for r, row in zip(rows, a):
        fit = sum(u * v for u, v in zip(row, x))
        print(f"| {r['w']} | {r['n']} | {r['p']:g} | {r['e']:.0f} | {r['t']:.2f} | {r['cpu']:.0f} | "
              f"{fit:.0f} | {(r['cpu'] - fit) / fit:+.1%} |")
    print("c0 ms: " + ", ".join(f"{c0[c]:.0f} ({c} writers)" for c in counts)
          + f"; c_e = {ce * 1e6:.1f} ns/event; c_t = {ct:.2f} ms/s; c_w = {cw:.3f} ms per stream-second")
    print(f"MODEL={c0[counts[-1]]:.1f},{ce:.3e},{ct:.3f},{cw:.4f} (for {counts[-1]} writers)")
    print(f"load after: {os.getloadavg()[0]:.1f}")
    print("\n".join(f"failed: {f}" for f in FAILED))
    sys.exit(0)

if MODE == "curve":
    results = {}
    paths = [("MPI", 1, True), ("shm ring", 0, True), ("socket", 0, False)]
    for k in range(ROUNDS):
        for writers in [1, 2, 4, 8, 16]:
            for name, analysers, shm in paths:
                for lossless in [True, False]:
                    r = run(writers, analysers, k, lossless=lossless, shm=shm)
                    if r:
                        results.setdefault((writers, name, lossless), []).append(r)
    print("| writers:analyser | path | lossless: events analysed per s of loop | lossless: received | "
          "lossy: events per s of loop | lossy: dropped | lossy: drop rate |")
    print("|---|---|---|---|---|---|---|")
    for writers in [1, 2, 4, 8, 16]:
        for name, _, _ in paths:
            full = results.get((writers, name, True), [])
            lossy = results.get((writers, name, False), [])
            cell = lambda rs, f: f(rs) if rs else "-"
            print(f"| {writers}:1 | {name} | "
                  + cell(full, lambda rs: f"{med(r['acc']['events_received'] / r['loop_s'] for r in rs) / 1e6:.2f} M") + " | "
                  + cell(full, lambda rs: f"{med(r['acc']['events_received'] for r in rs):.0f}") + " | "
                  + cell(lossy, lambda rs: f"{med(r['acc']['events_received'] / r['loop_s'] for r in rs) / 1e6:.2f} M") + " | "
                  + cell(lossy, lambda rs: f"{med(r['acc']['events_dropped'] for r in rs):.0f}") + " | "
                  + cell(lossy, lambda rs: f"{med(r['acc']['events_dropped'] / max(r['acc']['events_written'], 1) for r in rs):.1%}")
                  + " |")
    print(f"load after: {os.getloadavg()[0]:.1f}")
    print("\n".join(f"failed: {f}" for f in FAILED))
    sys.exit(0)

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
            r = run(writers, a, k)
            if r:
                results.setdefault((writers, analysers, a), []).append(r)

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
          "analyser CPU ns/event (median rank) | busiest analyser CPU ms | merge ms after the last stream (rank 0's fold ms) |"
          + (" busiest: streams, events | predicted CPU ms | error |" if MODEL else ""))
    print("|---|---|---|---|---|---|---|---|" + ("---|---|---|" if MODEL else ""))
    for (writers, analysers, a), rs in results.items():
        rate = med(r["acc"]["events_received"] / r["loop_s"] for r in rs)
        path = f"MPI, {a} analyser(s)" if a else "socket (one server)"
        per_event = med(med(c * 1e6 / max(e, 1) for e, c in r["ranks"]) for r in rs) if a else float("nan")
        busiest = med(max(c for _, c in r["ranks"]) for r in rs) if a else float("nan")
        merges = [r["merge"] for r in rs if r["merge"]]
        merge = f"{med(m[0] for m in merges):.1f} ({med(m[1] for m in merges):.1f})" if merges else "-"
        model = ""
        if MODEL and a:
            # The busiest analyser of each run, predicted from its streams,
            # its events and the run's wall time.
            c0, ce, ct, cw = MODEL
            top = [max(zip(r["ranks"], r["streams"]), key=lambda x: x[0][1]) + (r["wall"],) for r in rs]
            pred = med(c0 + ce * e + (ct + cw * w) * t for (e, _), w, t in top)
            model = (f" {med(w for _, w, _ in top):.0f}, {med(e for (e, _), _, _ in top):.0f} | "
                     f"{pred:.0f} | {(busiest - pred) / pred:+.0%} |")
        print(f"| {writers} | {path} | {med(r['acc']['events_received'] for r in rs):.0f} | "
              f"{rate / 1e6:.2f} M | {med(r['wall'] for r in rs):.2f} | {per_event:.0f} | "
              f"{busiest:.0f} | {merge} |" + model)
print(f"load after: {os.getloadavg()[0]:.1f}")
print("\n".join(f"failed: {f}" for f in FAILED))
