#!/usr/bin/env bash
# What a forwarder per node saves hark: connections, threads and memory of
# `hark run` against nodes (ranks per node fixed) and against ranks per
# node (nodes fixed), through forwarders and with every rank connected
# directly; and what the forwarders cost, in CPU per event forwarded.
#
#   scripts/bench-forward.sh [HARK] [NODES_LIST] [RANKS_PER_NODE_LIST] [ROUNDS]
#
# HARK: a `hark` with its `libhark.so` beside it, both built with the test
# hooks (`cargo build --release -p hark-cli -p hark-probe --features
# hark-cli/test-hooks,hark-probe/test-hooks`): nodes are emulated on this
# host by `HARK_TEST_NODES`, each with a forwarder of its own
# (`docs/cluster.md`, "The forwarder"). Defaults: target/release/hark,
# nodes "1 2 4 8" at 2 ranks each, then ranks per node "1 2 4 8" on 2 nodes,
# 2000 rounds of the test ring. Prints one line per run:
#   mode nodes ranks_per_node connections threads_max sockets_max peak_MiB cpu_ns_per_event
# With CLUSTER=1, the nodes are real emulated nodes instead
# (`scripts/cluster.sh`: each its own network, hostname, /tmp and clock;
# needs root): hark runs on n1, mpirun reaches the others through the
# cluster's rsh agent, and `auto` (the default: n1's ranks use hark's Unix
# socket, the other nodes' a forwarder each) stands beside `never`. Any
# build then does (no test hooks).
#
# With FIT="R1 R2 ...", instead: what a forwarder costs its node, apart
# from hark's work, as CPU = f0 + f_e * events per forwarder, fitted by
# least squares over every forwarder of FIT_RUNS (default 3) runs at each
# size in FIT (sizes in turn, so that drift hits them all), through
# forwarders, on the first entry of NODES_LIST x RANKS_PER_NODE_LIST. The
# program is the ring (R rounds of 100 ints, at its own pace: the probes
# ship small packs) or, with FIT_PROGRAM=flood, mpi_flood (R iterations
# as fast as the ranks go: the forwarders relay full packs at line rate).
# f0 is what a forwarder costs whatever it carries (start, clock
# alignments, end), f_e what relaying one event costs. Prints every
# forwarder's line and hark's own after each run, then f0 and f_e;
# `docs/scaling-model.md` uses them. CPU comes in 10 ms ticks: give the
# runs at least 10^6 events per forwarder.
# Numbers go to BENCHMARKS.md, "Forwarders".
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
hark=$(realpath "${1:-$root/target/release/hark}")
nodes_list=${2:-"1 2 4 8"}
rpn_list=${3:-"1 2 4 8"}
rounds=${4:-2000}
cluster=${CLUSTER:-0}
if [ "$cluster" = 1 ]; then
  # Every node sees the checkout, not this host's /tmp.
  mkdir -p "$root/target/tmp"
  work=$(mktemp -d "$root/target/tmp/bench-forward-XXXXXX")
  id=bf$$
  trap '"$root/scripts/cluster.sh" down "$id" >/dev/null 2>&1 || true; rm -rf "$work"' EXIT
else
  work=$(mktemp -d)
  trap 'rm -rf "$work"' EXIT
fi
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
export OMPI_MCA_btl=self,vader OMPI_MCA_btl_vader_single_copy_mechanism=none
mpicc.openmpi -O2 -o "$work/ring" "$root/crates/cli/tests/programs/ring.c"
mpicc.openmpi -O2 -o "$work/flood" "$root/crates/server/benches/mpi_flood.c"
# The program of a run of R: the ring, or mpi_flood (FIT_PROGRAM, above).
program() { if [ "${FIT_PROGRAM:-ring}" = flood ]; then echo "$work/flood $1"; else echo "$work/ring $1 100"; fi; }

# node list for HARK_TEST_NODES: rank r on node r / rpn
node_list() { local n=$1 rpn=$2 out=() i j; for ((i = 0; i < n; i++)); do for ((j = 0; j < rpn; j++)); do out+=("$i"); done; done; (IFS=,; echo "${out[*]}"); }

# the hosts of an emulated cluster of n nodes, rpn slots each
host_list() { local n=$1 rpn=$2 out=() i; for ((i = 1; i <= n; i++)); do out+=("n$i:$rpn"); done; (IFS=,; echo "${out[*]}"); }

start() { # mode nodes rpn: starts hark run in the background
  local mode=$1 n=$2 rpn=$3 np=$(($2 * $3))
  if [ "$cluster" = 1 ]; then
    "$root/scripts/cluster.sh" down "$id" >/dev/null 2>&1 || true
    if ! "$root/scripts/cluster.sh" up "$id" "$n" >/dev/null 2>"$work/up"; then
      echo "cluster of $n nodes did not come up: $(tail -2 "$work/up" | tr '\n' ' ')" >&2
      return 1
    fi
    (cd "$work" && HARK_FORWARD=$mode HARK_FORWARD_STATS="$work/stats" \
      "$root/scripts/cluster.sh" exec "$id" n1 "$hark" run -v --no-http -o "$work/run" -- \
      mpirun.openmpi --oversubscribe --host "$(host_list "$n" "$rpn")" --map-by node \
      --mca btl self,tcp --mca plm_rsh_agent "$("$root/scripts/cluster.sh" agent "$id")" \
      -x HARK_FORWARD_STATS -np "$np" $(program "$rounds") >/dev/null 2>"$work/err") &
  else
    HARK_FORWARD=$mode HARK_TEST_NODES=$(node_list "$n" "$rpn") HARK_FORWARD_STATS="$work/stats" \
      "$hark" run -v -o "$work/run" -- mpirun.openmpi --oversubscribe -np "$np" $(program "$rounds") \
      >/dev/null 2>"$work/err" &
  fi
}

one() { # mode nodes rpn
  local mode=$1 n=$2 rpn=$3
  rm -rf "$work/run" "$work/stats" "$work/err"
  start "$mode" "$n" "$rpn" || { echo "$mode $n $rpn failed"; return; }
  local job=$! pid="" threads=0 sockets=0 t s
  # hark itself: the one process running `run -v ... -o $work/run`.
  while kill -0 "$job" 2>/dev/null && [ -z "$pid" ]; do
    pid=$(pgrep -f -- "^$hark run -v .*-o $work/run" | head -1 || true)
    sleep 0.02
  done
  pid=${pid:-$job}
  while kill -0 "$job" 2>/dev/null; do
    t=$(awk '/^Threads:/ {print $2}' "/proc/$pid/status" 2>/dev/null || echo 0)
    s=$(find "/proc/$pid/fd" -lname 'socket:*' 2>/dev/null | wc -l || true)
    ((${t:-0} > threads)) && threads=$t
    ((${s:-0} > sockets)) && sockets=$s
    sleep 0.05
  done
  wait "$job" || true
  local line conns peak cpu
  line=$(grep '^hark: report ready' "$work/err" || true)
  if [ -z "$line" ]; then
    echo "$mode $n $rpn failed: $(grep -v '^hark: [0-9]* process' "$work/err" | tail -3 | tr '\n' ' ')"
    return
  fi
  conns=$(sed -n 's/.*; \([0-9]*\) connection(s) into hark.*/\1/p' <<<"$line")
  peak=$(sed -n "s/.*hark's peak memory \([0-9.]*\) MiB.*/\1/p" <<<"$line")
  cpu=-
  if [ "$mode" != never ]; then
    # Forwarders write their line as they end, just after hark (with
    # CLUSTER=1, n1 has none: its ranks use hark's socket).
    local want=$n
    [ "$cluster" = 1 ] && want=$((n - 1))
    for _ in $(seq 100); do [ "$(cat "$work/stats" 2>/dev/null | wc -l || true)" -ge "$want" ] && break; sleep 0.1; done
    [ -s "$work/stats" ] && cpu=$(awk '{for (i = 1; i <= NF; i++) { split($i, kv, "="); v[kv[1]] += kv[2] } }
      END { if (v["events"] > 0) printf "%.1f", v["cpu_ms"] * 1e6 / v["events"]; else print "-" }' "$work/stats")
  fi
  echo "$mode $n $rpn $conns $threads $sockets $peak $cpu"
}

if [ -n "${FIT:-}" ]; then
  n=${nodes_list%% *} rpn=${rpn_list%% *}
  mode=always
  [ "$cluster" = 1 ] && mode=auto
  echo "load before: $(cut -d' ' -f1-3 /proc/loadavg)"
  echo "rounds events cpu_ms (one line per forwarder, $n nodes x $rpn ranks)"
  : > "$work/fit"
  for _ in $(seq "${FIT_RUNS:-3}"); do for rounds in $FIT; do
    rm -rf "$work/run" "$work/stats" "$work/err"
    start "$mode" "$n" "$rpn" || exit 1
    wait $! || true
    grep -q '^hark: report ready' "$work/err" || { echo "run of $rounds rounds failed: $(tail -3 "$work/err" | tr '\n' ' ')" >&2; exit 1; }
    want=$n
    [ "$cluster" = 1 ] && want=$((n - 1))
    for _ in $(seq 100); do [ "$(cat "$work/stats" 2>/dev/null | wc -l || true)" -ge "$want" ] && break; sleep 0.1; done
    awk -v r="$rounds" '{for (i = 1; i <= NF; i++) { split($i, kv, "="); v[kv[1]] = kv[2] } print r, v["events"], v["cpu_ms"]}' "$work/stats" | tee -a "$work/fit"
    echo "# $(grep -o 'hark: .* events per CPU-second' "$work/err" || true)"
  done; done
  # Least squares of cpu_ms on events.
  awk '{n++; x += $2; y += $3; xx += $2 * $2; xy += $2 * $3}
    END { d = n * xx - x * x; if (n < 2 || d == 0) { print "fit: need runs of at least two sizes"; exit 1 }
      b = (n * xy - x * y) / d; a = (y - b * x) / n
      printf "f0 = %.1f ms per forwarder, f_e = %.0f ns per event relayed (%d forwarders fitted)\n", a, b * 1e6, n }' "$work/fit"
  echo "load after: $(cut -d' ' -f1-3 /proc/loadavg)"
  exit 0
fi

echo "load before: $(cut -d' ' -f1-3 /proc/loadavg)"
echo "mode nodes ranks_per_node connections threads_max sockets_max peak_MiB cpu_ns_per_event"
forwarded=always
[ "$cluster" = 1 ] && forwarded=auto
for n in $nodes_list; do for mode in $forwarded never; do one $mode "$n" 2; done; done
for rpn in $rpn_list; do for mode in $forwarded never; do one $mode 2 "$rpn"; done; done
echo "load after: $(cut -d' ' -f1-3 /proc/loadavg)"
