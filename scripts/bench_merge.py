#!/usr/bin/env python3
"""The analysers' merge over MPI, tree against gather, and what live snapshots cost the
streams (BENCHMARKS.md, "Merging over MPI").

Merge: `hark run -v --analysers A` of `big_model PATHS STEPS`
(tests/programs/mpi/bench/big_model.c) on W writers, with HARK_ANALYSER_MERGE=tree and
=gather alternating, ROUNDS times; analyser rank 0 prints the time from the end of the
last stream (any analyser's) to the merged run, and its own fold. Medians per variant.

Snapshots: `hark run --analysers 2` of `overhead iprobe N REPS` on 4 writers, with
--no-http (no snapshots) and --http (a merged snapshot a second), alternating, ROUNDS
times: rank 0's ns per call and the delivered events per second.

usage: scripts/bench_merge.py [HARK] (default target/release/hark)
env:   ROUNDS (3), ANALYSERS (1,2,3,4,6,8), MODELS (small,large), LARGE (the large model's
       writers,paths,steps: 8,200,40), SNAPSHOTS=0 skips them
"""
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
HARK = sys.argv[1] if len(sys.argv) > 1 else os.path.join(ROOT, "target/release/hark")
ROUNDS = int(os.environ.get("ROUNDS", 3))
ANALYSERS = [int(a) for a in os.environ.get("ANALYSERS", "1,2,3,4,6,8").split(",")]
# name: (writers, paths, steps)
MODELS = {"small": (8, 1, 20),
          "large": tuple(int(x) for x in os.environ.get("LARGE", "8,200,40").split(","))}
WANTED = os.environ.get("MODELS", "small,large").split(",")
env = dict(os.environ, OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1",
           OMPI_MCA_mpi_yield_when_idle="0")
work = tempfile.mkdtemp(prefix="hark-bench-merge-")


def build(name, src):
    exe = os.path.join(work, name)
    subprocess.run(["mpicc.openmpi", "-O2", "-o", exe, os.path.join(ROOT, src)], check=True)
    return exe


big = build("big_model", "tests/programs/mpi/bench/big_model.c")
overhead = build("overhead", "tests/programs/mpi/bench/overhead.c")
MERGED = re.compile(r"merged by (\w+) in ([\d.]+) ms after the last stream ended "
                    r"\(this rank's own fold ([\d.]+) ms\)")
SNAPS = re.compile(r"(\d+) live snapshot\(s\) merged by \w+, median ([\d.]+) ms")


def hark(args, command, extra_env, tag):
    out = os.path.join(work, tag)
    cmd = [HARK, "run", "-v", "-o", out] + args + ["--", "mpirun.openmpi", "--oversubscribe",
                                                   "--bind-to", "none"] + command
    p = subprocess.run(cmd, env=dict(env, **extra_env), capture_output=True, text=True)
    if p.returncode != 0:
        sys.exit(f"{' '.join(cmd)} failed:\n{p.stderr[-3000:]}")
    return p, out


def merge(model, a, shape, k):
    w, paths, steps = MODELS[model]
    p, out = hark(["--no-http", "--analysers", str(a)],
                  ["-np", str(w), big, str(paths), str(steps)],
                  {"HARK_ANALYSER_MERGE": shape}, f"{model}-{a}-{shape}-{k}")
    m = MERGED.search(p.stderr)
    size = os.path.getsize(os.path.join(out, "profile.json"))
    return float(m.group(2)), float(m.group(3)), size


print(f"ROUNDS={ROUNDS} load before: {os.getloadavg()}")
print("| model | analysers | tree: merged after (ms) | gather: merged after (ms) | "
      "rank 0's own fold (ms) | profile.json |")
print("|---|---|---|---|---|---|")
for model in WANTED:
    for a in ANALYSERS:
        r = {"tree": [], "gather": []}
        for k in range(ROUNDS):
            for shape in (["tree", "gather"] if k % 2 == 0 else ["gather", "tree"]):
                r[shape].append(merge(model, a, shape, k))
        t = statistics.median(x[0] for x in r["tree"])
        g = statistics.median(x[0] for x in r["gather"])
        own = statistics.median(x[1] for x in r["tree"] + r["gather"])
        size = r["tree"][0][2]
        print(f"| {model} | {a} | {t:.1f} ({', '.join(f'{x[0]:.0f}' for x in r['tree'])}) | "
              f"{g:.1f} ({', '.join(f'{x[0]:.0f}' for x in r['gather'])}) | {own:.1f} | "
              f"{size / 1e6:.2f} MB |", flush=True)
print(f"load after merges: {os.getloadavg()}")

if os.environ.get("SNAPSHOTS") != "0":
    N, REPS = 500000, 3
    print("| variant | ns per call (rank 0, median) | received | dropped | delivered | snapshots |")
    print("|---|---|---|---|---|---|")
    res = {"--no-http": [], "--http": []}
    for k in range(ROUNDS):
        for v in (["--no-http", "--http"] if k % 2 == 0 else ["--http", "--no-http"]):
            args = ([v] if v == "--no-http" else ["--http", "127.0.0.1:0"]) + ["--analysers", "2"]
            p, out = hark(args, ["-np", "4", overhead, "iprobe", str(N), str(REPS)], {},
                          f"snap-{v}-{k}")
            ns = [float(x) for x in p.stdout.split()]
            acc = json.load(open(os.path.join(out, "profile.json")))["accounting"]
            loop_s = (sum(ns) + ns[0]) * N / 1e9
            s = SNAPS.search(p.stderr)
            res[v].append((statistics.median(ns), acc, acc["events_received"] / loop_s,
                           f"{s.group(1)}, median {s.group(2)} ms" if s else "none"))
    for v, rs in res.items():
        print(f"| {v} | {statistics.median(r[0] for r in rs):.1f} | "
              f"{statistics.median(r[1]['events_received'] for r in rs):.0f} | "
              f"{statistics.median(r[1]['events_dropped'] for r in rs):.0f} | "
              f"{statistics.median(r[2] for r in rs) / 1e6:.2f} M events/s | "
              f"{'; '.join(r[3] for r in rs)} |")
    print(f"load after: {os.getloadavg()}")
