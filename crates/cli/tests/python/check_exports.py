"""Reads Hark's exports back with the real readers and compares them with
profile.json. Usage: check_exports.py RUN_DIR [RUN_DIR...]

Every run directory must hold profile.json and the exports (hatchet.json,
thicket-metadata.json, *.parquet). Exits non-zero, saying what differs, on
the first mismatch. With two or more runs, also builds one Thicket of all."""
import json
import sys

import hatchet as ht
import pandas as pd
import pyarrow.parquet as pq
import thicket as th


def fail(msg):
    print("MISMATCH: " + msg)
    sys.exit(1)


def eq(what, got, want):
    if got != want:
        fail(f"{what}: export has {got!r}, profile.json has {want!r}")


def at(v, r):
    return v[r] if r < len(v) else 0


def load_graphframe(run_dir):
    with open(f"{run_dir}/hatchet.json") as f:
        return ht.GraphFrame.from_json(f.read())


def check_hatchet(run_dir, profile):
    gf = load_graphframe(run_dir)
    df = gf.dataframe
    eq("dataframe index", list(df.index.names), ["node", "rank"])
    roots = gf.graph.roots
    eq("programs (roots)", [r.frame["name"] for r in roots], [p["name"] for p in profile["programs"]])
    for root, p in zip(roots, profile["programs"]):
        n = p["ranks"]
        mpi = {}  # function -> per-rank [calls, time]
        io = {}  # operation -> per-rank [calls, bytes, time]
        for node in root.traverse():
            rows = df.xs(node, level="node")
            eq(f"{node} ranks (rows)", sorted(int(r) for r in rows.index), list(range(n)))
            per = lambda m: [int(rows.loc[r, m]) for r in range(n)]
            inc, exc, calls = per("time (inc)"), per("time"), per("calls")
            kind = node.frame["type"]
            eq(f"{node} name column", set(rows["name"]), {node.frame["name"]})
            for r in range(n):
                below = sum(int(df.loc[(c, r), "time (inc)"]) for c in node.children
                            if c.frame["type"] != "io")
                if exc[r] > 0:
                    eq(f"{node} rank {r}: inclusive = exclusive + children", inc[r], exc[r] + below)
            if kind == "program":
                eq(f"{p['name']} wall per rank", inc, [at(p["rank_wall_ns"], r) for r in range(n)])
            elif kind == "region":
                path = "/".join(a.frame["name"] for a in node.path()[1:])
                want = p["regions"]["paths"][path]
                eq(f"region {path} inclusive", inc, [at(want["inclusive_ns"], r) for r in range(n)])
                eq(f"region {path} calls", calls, [at(want["calls"], r) for r in range(n)])
            elif kind == "io":
                eq(f"I/O node {node} under its program", node.parents, [root])
                io[node.frame["name"]] = [calls, per("bytes"), inc]
            else:
                f = node.frame["name"]
                acc = mpi.setdefault(f, [[0] * n, [0] * n])
                for r in range(n):
                    acc[0][r] += calls[r]
                    acc[1][r] += inc[r]
        eq("MPI functions in the tree", sorted(mpi), sorted(p["mpi"]))
        for f, (calls, time) in mpi.items():
            want = p["mpi"][f]
            eq(f"{f} calls per rank, over the tree", calls, [at(want["calls"], r) for r in range(n)])
            eq(f"{f} time per rank, over the tree", time, [at(want["time_ns"], r) for r in range(n)])
        per_rank = p["io"]["per_rank"]
        ops = sorted({op for m in per_rank for op in m})
        eq("I/O operations in the tree", sorted(io), ops)
        for op, got in io.items():
            pick = lambda k: [per_rank[r].get(op, {}).get(k, 0) if r < len(per_rank) else 0
                              for r in range(n)]
            eq(f"I/O {op} [calls, bytes, time] per rank", got,
               [pick("calls"), pick("bytes"), pick("time_ns")])
    check_per_rank_operations(gf, profile)


def check_per_rank_operations(gf, profile):
    """Hatchet's per-rank operations apply: dropping the rank level sums a
    node's rows (here: mean over ranks), as for Caliper and HPCToolkit data."""
    walls = {p["name"]: p["rank_wall_ns"] for p in profile["programs"]}
    flat = gf.deepcopy()
    flat.drop_index_levels(function="mean")
    eq("index after drop_index_levels", list(flat.dataframe.index.names), ["node"])
    for root in flat.graph.roots:
        wall = walls[root.frame["name"]]
        got = float(flat.dataframe.loc[root, "time (inc)"])
        if abs(got - sum(wall) / len(wall)) > 1e-6 * max(1, max(wall)):
            fail(f"{root}: mean wall over ranks after drop_index_levels is {got}, profile.json's is {sum(wall) / len(wall)}")


def table(run_dir, name):
    return pq.read_table(f"{run_dir}/{name}.parquet").to_pylist()


def check_parquet(run_dir, profile):
    progs = {p["name"]: p for p in profile["programs"]}
    want = set()
    for p in profile["programs"]:
        for f, v in p["mpi"].items():
            for r in range(p["ranks"]):
                want.add((p["name"], r, "mpi", f, at(v["calls"], r), at(v["bytes"], r),
                          at(v["time_ns"], r), at(v["min_ns"], r), at(v["max_ns"], r)))
        for r, ops in enumerate(p["io"]["per_rank"]):
            for op, t in ops.items():
                want.add((p["name"], r, "io", op, t["calls"], t["bytes"], t["time_ns"], 0, 0))
    rows = table(run_dir, "functions")
    got = {(x["program"], x["rank"], x["kind"], x["function"], x["calls"], x["bytes"],
            x["time_ns"], x["min_ns"], x["max_ns"]) for x in rows}
    eq("functions.parquet rows", len(rows), len(want))
    eq("functions.parquet", got, want)

    want = set()
    for p in profile["programs"]:
        m = p["p2p"]
        for i, row in enumerate(m["messages"]):
            for j, n in enumerate(row):
                cell = (n, m["bytes"][i][j], m["time_ns"][i][j])
                if cell != (0, 0, 0):
                    want.add((p["name"], i, j) + cell)
    got = {(x["program"], x["from_rank"], x["to_rank"], x["messages"], x["bytes"], x["time_ns"])
           for x in table(run_dir, "messages")}
    eq("messages.parquet", got, want)

    want = set()
    for p in profile["programs"]:
        m = p["p2p"].get("one_sided", {})
        for i, row in enumerate(m.get("messages", [])):
            for j, n in enumerate(row):
                cell = (n, m["bytes"][i][j], m["time_ns"][i][j])
                if cell != (0, 0, 0):
                    want.add((p["name"], i, j) + cell)
    got = {(x["program"], x["origin_rank"], x["target_rank"], x["operations"], x["bytes"],
            x["time_ns"]) for x in table(run_dir, "one_sided")}
    eq("one_sided.parquet", got, want)

    want = set()
    for p in profile["programs"]:
        for path, v in p["regions"]["paths"].items():
            for r in range(p["ranks"]):
                want.add((p["name"], r, path, at(v["calls"], r), at(v["inclusive_ns"], r),
                          at(v["exclusive_ns"], r)))
    got = {(x["program"], x["rank"], x["path"], x["calls"], x["inclusive_ns"], x["exclusive_ns"])
           for x in table(run_dir, "regions")}
    eq("regions.parquet", got, want)

    got = {}
    for x in table(run_dir, "timeslices"):
        got[(x["program"], x["metric"], x["rank"], x["slice"])] = x["value"]
        width = progs[x["program"]]["timeslices"]["slice_ns"]
        eq("timeslices.parquet start_ns", x["start_ns"], x["slice"] * width)
    want = {}
    for p in profile["programs"]:
        for metric, ranks in p["timeslices"]["metrics"].items():
            for r, slices in enumerate(ranks):
                for i, v in enumerate(slices):
                    if v:
                        want[(p["name"], metric, r, i)] = v
    eq("timeslices.parquet values", got, want)

    want = set()
    for p in profile["programs"]:
        for r, counts in enumerate(p.get("counters", [])):
            for c, v in counts.items():
                want.add((p["name"], r, "rank", 0, "", c, v))
        for r, threads in enumerate(p.get("counter_info", {}).get("threads", [])):
            for i, counts in enumerate(threads):
                for c, v in counts.items():
                    want.add((p["name"], r, "thread", i, "", c, v))
        for path, x in p["regions"]["paths"].items():
            for c, per_rank in x.get("counters", {}).items():
                for r, v in enumerate(per_rank):
                    want.add((p["name"], r, "region", 0, path, c, v))
    rows = table(run_dir, "counters")
    got = {(x["program"], x["rank"], x["scope"], x["thread"], x["path"], x["counter"], x["count"])
           for x in rows}
    eq("counters.parquet rows", len(rows), len(want))
    eq("counters.parquet", got, want)


def load_thicket(run_dir):
    tk = th.Thicket.thicketize_graphframe(load_graphframe(run_dir), run_dir)
    meta = json.load(open(f"{run_dir}/thicket-metadata.json"))
    tk.metadata = pd.DataFrame([meta], index=pd.Index(tk.profile, name="profile"))
    return tk


def check_thicket_per_rank(ens, profiles):
    """The ensemble keeps a row per node, run and rank, and Thicket's
    statistics over them (here the mean wall time at each program's root,
    over every rank of every run) equal profile.json's."""
    eq("the Thicket's index", list(ens.dataframe.index.names), ["node", "profile", "rank"])
    th.stats.mean(ens, columns=["time (inc)"])
    stats = ens.statsframe.dataframe
    for root in ens.graph.roots:
        walls = [w for prof in profiles for p in prof["programs"] if p["name"] == root.frame["name"]
                 for w in p["rank_wall_ns"][: p["ranks"]]]
        # Ranks a run lacks are NaN rows in the ensemble: a 2-rank run beside a 4-rank one.
        rows = ens.dataframe.xs(root, level="node")["time (inc)"].dropna()
        eq(f"{root}: wall per run and rank in the Thicket", sorted(int(w) for w in rows), sorted(walls))
        got = float(stats.loc[root, "time (inc)_mean"])
        if abs(got - sum(walls) / len(walls)) > 1e-6 * max(1, max(walls)):
            fail(f"{root}: Thicket's mean wall over runs and ranks is {got}, profile.json's is {sum(walls) / len(walls)}")


runs = sys.argv[1:]
for d in runs:
    prof = json.load(open(f"{d}/profile.json"))
    check_hatchet(d, prof)
    check_parquet(d, prof)
if len(runs) > 1:
    ens = th.Thicket.concat_thickets([load_thicket(d) for d in runs])
    eq("profiles in the Thicket", len(ens.profile), len(runs))
    ranks = [sum(p["ranks"] for p in json.load(open(f"{d}/profile.json"))["programs"]) for d in runs]
    eq("ranks in the Thicket's metadata", sorted(ens.metadata["ranks"].tolist()), sorted(ranks))
    for d in runs:
        names = {n.frame["name"] for n in load_graphframe(d).graph.traverse()}
        seen = {n.frame["name"] for n in ens.graph.traverse()}
        if not names <= seen:
            fail(f"the Thicket's graph lacks {sorted(names - seen)} of {d}")
    check_thicket_per_rank(ens, [json.load(open(f"{d}/profile.json")) for d in runs])
print("OK")
