#!/usr/bin/env python3
"""What watching a run costs the analysis (BENCHMARKS.md, "Live view").

Runs the synthetic flood (crates/server/benches/flood.rs) in rounds of three, in rotating
order: without snapshots (A), with a live view's snapshot once a second
(HARK_FLOOD_SNAPSHOT_HZ=1, B), and without again (A2, the A/A control that shows how far
two identical runs differ on this machine). Each run is timed by /usr/bin/time (CPU of the
bench and its writer processes) and the host's steal time is read from /proc/stat around
it. Prints every round, then the medians: B against the mean of A and A2, and A2 against A.

usage: scripts/bench_live.py FLOOD_BINARY [ROUNDS (12)] [EVENTS_PER_WRITER (40000000)]
       (build it with `cargo bench -p hark-server --bench flood --no-run`)
"""
import os
import re
import statistics
import subprocess
import sys


def stat():
    with open("/proc/stat") as f:
        v = list(map(int, f.readline().split()[1:]))
    return v[7], sum(v)  # steal, all


def one(flood, events, snapshots):
    env = dict(os.environ)
    env.pop("HARK_FLOOD_SNAPSHOT_HZ", None)
    if snapshots:
        env["HARK_FLOOD_SNAPSHOT_HZ"] = "1"
    s0, t0 = stat()
    p = subprocess.run(["/usr/bin/time", "-f", "CPU %U %S", flood, "run", events, "4", "all"],
                       env=env, capture_output=True, text=True)
    s1, t1 = stat()
    out = p.stdout + p.stderr
    if p.returncode != 0:
        sys.exit(f"bench_live: the flood failed (exit {p.returncode}):\n{out}")
    rate = float(re.search(r"= ([\d.]+) M events/s", out).group(1))
    n = int(re.search(r"x (\d+) events", out).group(1)) * 4
    u, s = map(float, re.search(r"CPU ([\d.]+) ([\d.]+)", out).group(1, 2))
    return dict(rate=rate, cpu=(u + s) / (n / 1e6), steal=100.0 * (s1 - s0) / max(1, t1 - t0))


def main():
    if len(sys.argv) < 2:
        sys.exit(__doc__)
    flood = sys.argv[1]
    rounds = int(sys.argv[2]) if len(sys.argv) > 2 else 12
    events = sys.argv[3] if len(sys.argv) > 3 else "40000000"
    kinds = ["A", "B", "A2"]
    rows = []
    for i in range(rounds):
        order = kinds[i % 3:] + kinds[:i % 3]
        r = {k: one(flood, events, k == "B") for k in order}
        rows.append(r)
        print(f"round {i + 1} ({' '.join(order)}): rate A {r['A']['rate']:.1f} B {r['B']['rate']:.1f} "
              f"A2 {r['A2']['rate']:.1f} M events/s; CPU s per 1e6 events A {r['A']['cpu']:.4f} "
              f"B {r['B']['cpu']:.4f} A2 {r['A2']['cpu']:.4f}; steal % {r['A']['steal']:.1f} "
              f"{r['B']['steal']:.1f} {r['A2']['steal']:.1f}", flush=True)
    ab = sorted(r["B"]["rate"] / ((r["A"]["rate"] + r["A2"]["rate"]) / 2) for r in rows)
    aa = sorted(r["A2"]["rate"] / r["A"]["rate"] for r in rows)
    print("B / mean(A, A2):", [round(x, 3) for x in ab], f"median {statistics.median(ab):.3f}")
    print("A2 / A (control):", [round(x, 3) for x in aa], f"median {statistics.median(aa):.3f}")
    ra = statistics.median(r[k]["rate"] for r in rows for k in ("A", "A2"))
    rb = statistics.median(r["B"]["rate"] for r in rows)
    print(f"median rate without {ra:.2f}, with {rb:.2f} M events/s: {rb / ra:.3f}")
    ca = statistics.median(r[k]["cpu"] for r in rows for k in ("A", "A2"))
    cb = statistics.median(r["B"]["cpu"] for r in rows)
    print(f"median CPU s per 1e6 events without {ca:.4f}, with {cb:.4f}: {cb / ca:.3f}")


if __name__ == "__main__":
    main()
