#!/usr/bin/env python3
"""What the exchange between analysers costs (BENCHMARKS.md, "Keys routed between
analysers").

Runs `hark run --analysers A --lossless -- mpirun -np P PROGRAM ...` with the exchange on
(`HARK_EXCHANGE_STATS=1`: each analyser prints what it sent and received) and off
(`HARK_EXCHANGE=0`: every match left to the end-of-run merge), alternating, ROUNDS times,
and prints per variant the medians of: the job's wall time (hark run, end to end), the
program's wall time (profile.json `wall_ns`), the events received and the stream rate
(events received / program wall time), and, with the exchange on, the messages and bytes
sent between analysers per 10^6 events received, and the operations, arrivals and waits
they carried.

usage: scripts/bench_exchange.py [HARK] (default target/release/hark)
env:   PROGRAM (cross: tests' ring; lammps), MESSAGES (cross, 200000), NP (4),
       ANALYSERS (2), ROUNDS (3)
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
HARK = os.path.abspath(sys.argv[1]) if len(sys.argv) > 1 else os.path.join(ROOT, "target/release/hark")
PROGRAM = os.environ.get("PROGRAM", "cross")
MESSAGES = os.environ.get("MESSAGES", "200000")
NP = os.environ.get("NP", "4")
ANALYSERS = os.environ.get("ANALYSERS", "2")
ROUNDS = int(os.environ.get("ROUNDS", 3))

env = dict(os.environ, OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1",
           OMPI_MCA_rmaps_base_oversubscribe="1", OMPI_MCA_btl="self,vader",
           OMPI_MCA_btl_vader_single_copy_mechanism="none")
work = tempfile.mkdtemp(prefix="hark-bench-exchange-")
if PROGRAM == "cross":
    exe = os.path.join(work, "cross")
    subprocess.run(["mpicc.openmpi", "-O2", "-o", exe,
                    os.path.join(ROOT, "crates/cli/tests/programs/cross.c")], check=True)
    args = [exe, MESSAGES, "0", "0"]
elif PROGRAM == "lammps":
    melt = os.path.join(work, "in.melt")
    with open(melt, "w") as f:
        f.write("""units lj
atom_style atomic
lattice fcc 0.8442
region box block 0 20 0 20 0 20
create_box 1 box
create_atoms 1 box
mass 1 1.0
velocity all create 3.0 87287 loop geom
pair_style lj/cut 2.5
pair_coeff 1 1 1.0 1.0 2.5
neighbor 0.3 bin
neigh_modify every 20 delay 0 check no
fix 1 all nve
thermo 50
run 500
""")
    args = ["lmp", "-in", melt, "-log", "none", "-screen", "none"]
else:
    sys.exit(f"unknown PROGRAM {PROGRAM}")

STATS = re.compile(r"hark exchange: analyser \d+ sent (\d+) messages, (\d+) bytes "
                   r"\((\d+) parcels: (\d+) operations, (\d+) arrivals, (\d+) waits[;)]")


def run(on, k):
    out = os.path.join(work, f"run-{'on' if on else 'off'}-{k}")
    cmd = [HARK, "run", "-q", "--no-http", "--lossless", "-o", out, "--analysers", ANALYSERS,
           "--", "mpirun.openmpi", "--oversubscribe", "-np", NP] + args
    e = dict(env, HARK_EXCHANGE_STATS="1") if on else dict(env, HARK_EXCHANGE="0")
    t = time.monotonic()
    p = subprocess.run(cmd, env=e, capture_output=True, text=True, cwd=work)
    wall = time.monotonic() - t
    if p.returncode != 0:
        sys.exit(f"{' '.join(cmd)} failed:\n{p.stderr}")
    prof = json.load(open(os.path.join(out, "profile.json")))
    events = prof["accounting"]["events_received"]
    prog_s = max(pr["wall_ns"] for pr in prof["programs"]) / 1e9
    sent = [0] * 6
    for m in STATS.finditer(p.stderr):
        sent = [a + int(b) for a, b in zip(sent, m.groups())]
    unmatched = [d for pr in prof["programs"] for d in pr["diagnostics"] if "no partner" in d]
    return dict(wall=wall, prog=prog_s, events=events, rate=events / prog_s, sent=sent,
                unmatched=unmatched)


print(f"PROGRAM={PROGRAM} NP={NP} ANALYSERS={ANALYSERS} ROUNDS={ROUNDS} "
      f"load={os.getloadavg()[0]:.1f}")
results = {True: [], False: []}
for k in range(ROUNDS):
    for on in (True, False):
        results[on].append(run(on, k))
print(f"load after={os.getloadavg()[0]:.1f}")
print("| exchange | job wall s | program wall s | events | stream rate (M events/s) "
      "| messages / 10^6 events | bytes / 10^6 events | parcels, ops, arrivals, waits / 10^6 events | unmatched |")
print("|---|---|---|---|---|---|---|---|---|")
for on in (True, False):
    r = results[on]
    med = lambda f: statistics.median(f(x) for x in r)
    per = lambda i: med(lambda x: x["sent"][i] / x["events"] * 1e6)
    items = ", ".join(f"{per(i):.0f}" for i in (2, 3, 4, 5))
    print(f"| {'on' if on else 'off (merge only)'} | {med(lambda x: x['wall']):.2f} "
          f"| {med(lambda x: x['prog']):.2f} | {int(med(lambda x: x['events']))} "
          f"| {med(lambda x: x['rate']) / 1e6:.3f} "
          f"| {per(0):.0f} | {per(1):.0f} | {items if on else '-'} "
          f"| {r[0]['unmatched'][0][:60] + '…' if r[0]['unmatched'] else 'none'} |")
