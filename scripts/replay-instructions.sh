#!/usr/bin/env bash
# Instructions per event of `hark replay` on a recorded real stream, with
# callgrind: the whole process replaying the store K1 and K2 times (K copies
# of its streams, each a job of its own), the difference divided by the
# events between them. So it counts what an event costs on a real stream
# (call sites, the requests of real codes, several jobs' ends) where the
# `hot_path` bench counts the flood's mix. Prints the total, then the
# functions with the most instructions per event, inclusive and exclusive.
#
#   scripts/replay-instructions.sh STORE [K1 K2 [TOP]]   (default 8 16 30)
#
# STORE is a run directory written with `hark run --trace` (see
# scripts/bench_replay.py, KEEP=DIR, for three). HARK=path chooses the build
# (default target/release/hark); REPLAY_ARGS adds options to `hark replay`
# (REPLAY_ARGS="--pack-events 20000": the packs merged as a loaded probe
# ships them, to tell what a pack costs). Needs valgrind. About a minute
# per million events replayed.
set -euo pipefail
store=${1:?usage: scripts/replay-instructions.sh STORE [K1 K2 [TOP]]}
k1=${2:-8}
k2=${3:-16}
top=${4:-30}
root=$(cd "$(dirname "$0")/.." && pwd)
hark=$(realpath "${HARK:-$root/target/release/hark}")
command -v valgrind >/dev/null || { echo "replay-instructions.sh: needs valgrind (apt-get install -y valgrind)" >&2; exit 2; }
[ -x "$hark" ] || { echo "replay-instructions.sh: no hark at $hark: build it (cargo build --release -p hark-cli) or set HARK" >&2; exit 2; }
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
for k in "$k1" "$k2"; do
    valgrind --tool=callgrind --callgrind-out-file="$work/cg.$k" \
        "$hark" replay "$store" --copies "$k" ${REPLAY_ARGS:-} > "$work/said.$k" 2>&1 || {
        echo "replay-instructions.sh: hark replay --copies $k failed:" >&2
        cat "$work/said.$k" >&2
        exit 1
    }
    callgrind_annotate --inclusive=yes "$work/cg.$k" > "$work/inc.$k" 2>/dev/null
    callgrind_annotate "$work/cg.$k" > "$work/exc.$k" 2>/dev/null
done
python3 - "$work" "$k1" "$k2" "$top" "$root" <<'PY'
import re, sys
work, k1, k2, top, root = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4]), sys.argv[5]

def events(k):
    said = open(f"{work}/said.{k}").read()
    m = re.search(r"(\d+) events in", said)
    if not m:
        sys.exit(f"replay-instructions.sh: no event count in what hark replay said:\n{said}")
    return int(m.group(1))

def counts(path):
    d = {}
    for line in open(path):
        m = re.match(r"\s*([\d,]+) \([^)]*\)\s+(\S.*)", line)
        if m and not m.group(2).startswith("=>"):
            d[m.group(2)] = d.get(m.group(2), 0) + int(m.group(1).replace(",", ""))
    return d

n = events(k2) - events(k1)
# Frames every thread has (the runtime's, the thread start): not informative.
plumbing = re.compile(r"backtrace|thread_start|call_once|lang_start|libc_start|below main|ld-linux")
print(f"{n} events between --copies {k1} and {k2}")
for kind in ("inc", "exc"):
    a, b = counts(f"{work}/{kind}.{k1}"), counts(f"{work}/{kind}.{k2}")
    rows = sorted(((b[k] - a.get(k, 0)) / n, k) for k in b if not plumbing.search(k))
    print("inclusive" if kind == "inc" else "exclusive")
    for per, k in rows[::-1][:top]:
        k = re.sub(r"/rustc/\w+/library/", "", k).replace(f"{root}/", "").replace("crates/", "")
        print(f"{per:9.1f}  {k[:150]}")
PY
