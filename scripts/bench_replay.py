#!/usr/bin/env python3
"""Real streams replayed at full speed, and the scaling model's check (docs/replay.md).

Records three real runs with `hark run --trace` (np 4, Open MPI): LAMMPS's Lennard-Jones
melt (`lmp`, lammps-examples, STEPS steps), `hpcc` (the shipped example input at N = 200 on
a 1 x 4 grid) and the NPB-style CG kernel (crates/cli/tests/programs/cg_style.f90, n = 2000,
CG_ITER iterations). Then, per MODE:

- rate (default): each recording replayed by `hark replay --copies K` (K copies of its 4
  streams, each a job of its own: 4K emulated writers over Unix sockets, K chosen so that a
  replay has about EVENTS events), every analysis against the one-rank analyses only
  (cross-rank off), alternating, ROUNDS rounds. Per recording: the events/s of the replay
  (wall), the events per CPU-second of the analysis (hark's CPU less the writer threads'),
  and the median of the in-round ratios (every analysis / one-rank only).
- model: the scaling model's inputs and its check. One analysis server (one analyser),
  every analysis: the CG recording replayed with 1, 2, 4 and 8 copies and a short CG
  recording (CG_SHORT iterations) with 1, 4, 16 and 64 copies, ROUNDS rounds; least squares
  for the analysis CPU = c0 + c_e * events + c_w * writers. Then the replay at the
  largest count (CHECK_COPIES copies of the short recording: 4 x CHECK_COPIES writers) is
  predicted and measured, and the model's prediction for 4,096 and 65,536 writers is
  printed (docs/scaling-model.md).

usage: scripts/bench_replay.py [HARK] (default target/release/hark)
env:   MODE (rate|model), ROUNDS (3), EVENTS (2e7), STEPS (2000), CG_ITER (3000),
       CG_SHORT (100), CHECK_COPIES (256), KEEP=DIR (record into DIR and keep it; an
       existing DIR's recordings are reused), PACK_EVENTS=N (replay with the packs merged
       into packs of up to N events, `hark replay --pack-events`), WITHOUT_SAMPLES=1
       (replay without the probes' sample packs, `--without-samples`)
"""
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile

from fit import solve

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
HARK = os.path.abspath(sys.argv[1]) if len(sys.argv) > 1 else os.path.join(ROOT, "target/release/hark")
MODE = os.environ.get("MODE", "rate")
ROUNDS = int(os.environ.get("ROUNDS", 3))
EVENTS = float(os.environ.get("EVENTS", 2e7))
STEPS = int(os.environ.get("STEPS", 2000))
CG_ITER = int(os.environ.get("CG_ITER", 3000))
CG_SHORT = int(os.environ.get("CG_SHORT", 100))
CHECK_COPIES = int(os.environ.get("CHECK_COPIES", 256))
# The analyses that see one rank at a time (as the flood's `local`).
LOCAL = "summary,mpi-profile,p2p-topology,collectives,io-profile,regions,marks,timeslices,density"
env = dict(os.environ, OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1")
work = os.environ.get("KEEP") or tempfile.mkdtemp(prefix="hark-bench-replay-")
os.makedirs(work, exist_ok=True)
MPIRUN = ["mpirun.openmpi", "--oversubscribe", "-np", "4"]


def record(name, command, setup=None):
    """`hark run --trace` of `command` in work/name; the run directory."""
    d = os.path.join(work, name)
    run = os.path.join(d, "run")
    if os.path.exists(os.path.join(run, "trace", "index.tsv")):
        return run
    os.makedirs(d, exist_ok=True)
    if setup:
        setup(d)
    subprocess.run([HARK, "run", "-q", "--no-http", "--trace", "-o", run, "--"] + command,
                   cwd=d, env=env, check=True, stdout=subprocess.DEVNULL)
    return run


def lammps(d):
    text = open("/usr/share/lammps/examples/melt/in.melt").read()
    open(os.path.join(d, "in.melt"), "w").write(re.sub(r"run\s+250", f"run {STEPS}", text))


def hpcc(d):
    text = open("/usr/share/doc/hpcc/examples/_hpccinf.txt").read()
    text = (text.replace("1000         Ns", "200          Ns")
            .replace("80           NBs", "40           NBs")
            .replace("2            Ps", "1            Ps")
            .replace("2            Qs", "4            Qs"))
    open(os.path.join(d, "hpccinf.txt"), "w").write(text)


cg = os.path.join(work, "cg")
if not os.path.exists(cg):
    subprocess.run(["mpif90.openmpi", "-g", "-O2", "-J", work, "-o", cg,
                    os.path.join(ROOT, "crates/cli/tests/programs/cg_style.f90")], check=True)


def replay(run, copies, analyses=None):
    """One `hark replay`: (events, wall M events/s, analysis M events per CPU-second,
    analysis CPU s)."""
    cmd = [HARK, "replay", run, "--copies", str(copies)]
    if os.environ.get("PACK_EVENTS"):
        cmd += ["--pack-events", os.environ["PACK_EVENTS"]]
    if os.environ.get("WITHOUT_SAMPLES"):
        cmd += ["--without-samples"]
    if analyses:
        cmd += ["--analyses", analyses]
    p = subprocess.run(cmd, env=env, capture_output=True, text=True)
    said = p.stderr
    m = re.search(r"(\d+) events in ([\d.]+) s = ([\d.]+) M events/s .*?analysis ([\d.]+) s CPU "
                  r"for (\d+) events: ([\d.]+) M events per CPU-second.*dropped (\d+)", said)
    if p.returncode != 0 or not m:
        print(f"{' '.join(cmd)} failed ({p.returncode}):\n{said}", file=sys.stderr, flush=True)
        return None
    if int(m.group(7)) != 0:
        print(f"{' '.join(cmd)}: dropped {m.group(7)} events", file=sys.stderr)
    return dict(events=int(m.group(1)), wall=float(m.group(3)), per_cpu=float(m.group(6)),
                cpu=float(m.group(4)))


def events_of(run):
    """Events one replay of `run` carries (its store's kept column)."""
    lines = open(os.path.join(run, "trace", "index.tsv")).read().splitlines()[1:]
    return sum(int(l.split("\t")[4]) for l in lines)


def med(xs):
    xs = list(xs)
    return statistics.median(xs) if xs else float("nan")


print(f"MODE={MODE} ROUNDS={ROUNDS} load={os.getloadavg()[0]:.1f} work={work}", flush=True)

if MODE == "rate":
    recordings = {
        "LAMMPS melt": record("lammps", MPIRUN + ["lmp", "-in", "in.melt", "-log", "none"], lammps),
        "hpcc": record("hpcc", MPIRUN + ["hpcc"], hpcc),
        "CG kernel": record("cg-long", MPIRUN + [cg, "2000", str(CG_ITER)]),
    }
    rows = {}
    for k in range(ROUNDS):
        for name, run in recordings.items():
            copies = max(1, round(EVENTS / max(events_of(run), 1)))
            a = replay(run, copies)
            b = replay(run, copies, LOCAL)
            if a and b:
                rows.setdefault(name, []).append((copies, a, b))
                print(f"round {k} {name}: {copies} copies, all {a}, one-rank {b}", file=sys.stderr,
                      flush=True)
    print("| recording | writers | events per replay | every analysis: M events/s (wall) | "
          "every analysis: M events per CPU-second | one-rank only: M events/s (wall) | "
          "one-rank only: M events per CPU-second | ratio (per CPU-second, median of rounds) |")
    print("|---|---|---|---|---|---|---|---|")
    for name, rs in rows.items():
        print(f"| {name} | {4 * rs[0][0]} | {rs[0][1]['events']} | {med(a['wall'] for _, a, _ in rs):.2f} | "
              f"{med(a['per_cpu'] for _, a, _ in rs):.2f} | {med(b['wall'] for _, _, b in rs):.2f} | "
              f"{med(b['per_cpu'] for _, _, b in rs):.2f} | "
              f"{med(a['per_cpu'] / b['per_cpu'] for _, a, b in rs):.3f} |")
else:
    long = record("cg-long", MPIRUN + [cg, "2000", str(CG_ITER)])
    short = record("cg-short", MPIRUN + [cg, "2000", str(CG_SHORT)])
    cases = [(long, c) for c in (1, 2, 4, 8)] + [(short, c) for c in (1, 4, 16, 64)]
    results = {}
    for k in range(ROUNDS):
        for run, copies in cases:
            r = replay(run, copies)
            if r:
                results.setdefault((run, copies), []).append(r)
    rows = [(4 * c, med(r["events"] for r in rs), med(r["cpu"] for r in rs))
            for (run, c), rs in results.items()]

    c0, ce, cw = solve([[1.0, e, w] for w, e, _ in rows], [cpu for _, _, cpu in rows])
    print("| writers | events | analysis CPU s (median) | fit s | residual |")
    print("|---|---|---|---|---|")
    for w, e, cpu in rows:
        fit = c0 + ce * e + cw * w
        print(f"| {w} | {e:.0f} | {cpu:.3f} | {fit:.3f} | {(cpu - fit) / fit:+.1%} |")
    print(f"c0 = {c0 * 1e3:.1f} ms, c_e = {ce * 1e9:.1f} ns/event, c_w = {cw * 1e3:.3f} ms/writer")
    # The check: the largest writer count this machine holds, not in the fit.
    check = [replay(short, CHECK_COPIES) for _ in range(ROUNDS)]
    check = [r for r in check if r]
    if check:
        e, cpu = med(r["events"] for r in check), med(r["cpu"] for r in check)
        pred = c0 + ce * e + cw * 4 * CHECK_COPIES
        print(f"check: {4 * CHECK_COPIES} writers, {e:.0f} events: measured {cpu:.3f} s of analysis "
              f"CPU (median of {len(check)}), the model says {pred:.3f} s: {(cpu - pred) / pred:+.1%}")
    # Predictions: writers of the long CG recording's stream, 10 writers per analyser.
    per_writer = events_of(long) / 4
    for writers in (4096, 65536):
        analysers = -(-writers // 10)
        each = c0 + ce * per_writer * writers / analysers + cw * writers / analysers
        print(f"prediction: {writers} writers at 1:10 ({analysers} analysers), {per_writer:.0f} events "
              f"per writer: {each:.3f} s of CPU per analyser before the merge")
print(f"load after: {os.getloadavg()[0]:.1f}")
if not os.environ.get("KEEP"):
    shutil.rmtree(work, ignore_errors=True)
