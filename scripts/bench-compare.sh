#!/usr/bin/env bash
# Two builds of Hark side by side, alternated in one run: what `hark run` adds
# per MPI call (Open MPI, np 1, an `MPI_Iprobe` loop, the launcher's default
# binding, shipping and analysis included) and the server's flood throughput
# with every analysis and with the one-rank ones only.
#
#   scripts/bench-compare.sh BEFORE_CHECKOUT AFTER_CHECKOUT [ROUNDS] [CALLS] [EVENTS_PER_WRITER]
#
# Each checkout must hold a release `hark` with its `libhark.so`
# (`cargo build --release -p hark-cli -p hark-probe`) and the flood bench
# (`cargo bench -p hark-server --bench flood --no-run`). Prints every round,
# then the medians: ns per call (plain, before, after, and what each adds)
# and M events/s (before and after, every analysis and one-rank ones).
# Numbers go to BENCHMARKS.md, "Before/after for the restructuring".
set -euo pipefail
before=$(cd "$1" && pwd)
after=$(cd "$2" && pwd)
rounds=${3:-7}
calls=${4:-2000000}
per_writer=${5:-2500000}
root=$(cd "$(dirname "$0")/.." && pwd)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
mpicc.openmpi -O2 -o "$work/overhead" "$root/tests/programs/mpi/bench/overhead.c"
flood() { ls -t "$1"/target/release/deps/flood-* | grep -v '\.d$' | head -1; }
median() { sort -g | awk '{v[NR]=$1} END {print v[int((NR+1)/2)]}'; }
percall() { # [hark] : ns per call, the median of rank 0's 5 repetitions
  local cmd=(mpirun.openmpi -np 1 "$work/overhead" iprobe "$calls" 5)
  if [ $# -gt 0 ]; then "$1" run -q -o "$work/run" -- "${cmd[@]}"; else "${cmd[@]}"; fi 2>/dev/null | median
}
rate() { # flood-binary which : M events/s
  "$1" run "$per_writer" 4 "$2" | sed -n 's/.*= \([0-9.]*\) M events\/s.*/\1/p' | head -1
}
declare -A v
echo "load before: $(cut -d' ' -f1-3 /proc/loadavg)"
for r in $(seq "$rounds"); do
  v[plain]+="$(percall) "
  v[b_call]+="$(percall "$before/target/release/hark") "
  v[a_call]+="$(percall "$after/target/release/hark") "
  for w in all local; do
    v[b_$w]+="$(rate "$(flood "$before")" $w) "
    v[a_$w]+="$(rate "$(flood "$after")" $w) "
  done
  echo "round $r (load $(cut -d' ' -f1 /proc/loadavg)): $(for k in plain b_call a_call b_all a_all b_local a_local; do printf '%s %s ' $k "$(tr ' ' '\n' <<<"${v[$k]}" | grep . | tail -1)"; done)" >&2
done
echo "load after: $(cut -d' ' -f1-3 /proc/loadavg)"
m() { tr ' ' '\n' <<<"${v[$1]}" | grep . | median; }
awk -v p="$(m plain)" -v b="$(m b_call)" -v a="$(m a_call)" 'BEGIN {
  printf "per call (ns): plain %.1f, before %.1f (+%.1f), after %.1f (+%.1f)\n", p, b, b - p, a, a - p }'
printf 'flood, every analysis (M events/s): before %s, after %s\n' "$(m b_all)" "$(m a_all)"
printf 'flood, one-rank analyses (M events/s): before %s, after %s\n' "$(m b_local)" "$(m a_local)"
