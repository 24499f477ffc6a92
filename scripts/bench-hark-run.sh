#!/usr/bin/env bash
# What `hark run` adds to an MPI call, at the launcher's default binding, with
# shipping included: the real `hark run -- mpirun ...` against the same
# `mpirun ...` without it, alternated in one run.
#
#   scripts/bench-hark-run.sh [ROUNDS] [CALLS]
#
# For Open MPI and MPICH, `MPI_Iprobe` and `MPI_Test` loops at np 1 and np 2
# (this machine's cores) and an 8-byte ping-pong at np 2
# (tests/programs/mpi/bench/overhead.c). Each round runs every configuration
# plain, under `hark run` (shared-memory ring, the default) and under
# `hark run` with HARK_SHM=0 (the socket), in that order; each run does one
# warm-up and 5 timed repetitions of CALLS calls, and its value is the median
# of rank 0's repetitions. Prints one line per configuration: the median over
# ROUNDS runs of each variant, and what each `hark run` variant adds per call
# (ping-pong: a quarter of the round trip, four wrapped calls). Numbers go to
# BENCHMARKS.md, "Probe: hark run at the default binding".
set -euo pipefail
rounds=${1:-5}
calls=${2:-2000000}
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
cargo build --release -q -p hark-cli -p hark-probe
hark="$root/target/release/hark"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
for f in openmpi mpich; do
  "mpicc.$f" -O2 -o "$work/overhead-$f" tests/programs/mpi/bench/overhead.c
done

# One run's value: the median of rank 0's repetitions.
median() { sort -g | awk '{v[NR]=$1} END {print v[int((NR+1)/2)]}'; }
one() { # variant flavour np loop
  local variant=$1 f=$2 np=$3 loop=$4 n=$calls
  [ "$loop" = pingpong ] && n=$((calls / 10))
  local cmd=("mpirun.$f" -np "$np")
  [ "$f" = openmpi ] && [ "$np" -gt 1 ] && cmd+=(--oversubscribe)
  cmd+=("$work/overhead-$f" "$loop" "$n" 5)
  case $variant in
    plain) "${cmd[@]}" ;;
    shm) "$hark" run -q -o "$work/run" -- "${cmd[@]}" ;;
    socket) HARK_SHM=0 "$hark" run -q -o "$work/run" -- "${cmd[@]}" ;;
  esac 2>/dev/null | median
}

configs="openmpi:1:iprobe openmpi:1:test openmpi:2:iprobe openmpi:2:test openmpi:2:pingpong
mpich:1:iprobe mpich:1:test mpich:2:iprobe mpich:2:test mpich:2:pingpong"
declare -A vals
echo "load before: $(cut -d' ' -f1-3 /proc/loadavg)"
for r in $(seq "$rounds"); do
  for c in $configs; do
    IFS=: read -r f np loop <<<"$c"
    for v in plain shm socket; do
      vals[$c:$v]+="$(one $v "$f" "$np" "$loop") "
    done
  done
  # This round's values, so that a run cut short still says something.
  echo "round $r done, load $(cut -d' ' -f1-3 /proc/loadavg):" >&2
  for c in $configs; do
    last() { local v=${1% }; echo "${v##* }"; }
    echo "  $c: plain $(last "${vals[$c:plain]}") shm $(last "${vals[$c:shm]}") socket $(last "${vals[$c:socket]}")" >&2
  done
done
echo "load after: $(cut -d' ' -f1-3 /proc/loadavg)"
printf '%-8s %-3s %-9s %9s %9s %9s %12s %12s   %s\n' library np loop plain shm socket "+shm/call" "+socket/call" "runs (plain | shm | socket)"
for c in $configs; do
  IFS=: read -r f np loop <<<"$c"
  p=$(tr ' ' '\n' <<<"${vals[$c:plain]}" | grep . | median)
  s=$(tr ' ' '\n' <<<"${vals[$c:shm]}" | grep . | median)
  k=$(tr ' ' '\n' <<<"${vals[$c:socket]}" | grep . | median)
  div=1
  [ "$loop" = pingpong ] && div=4
  printf '%-8s %-3s %-9s %9.1f %9.1f %9.1f %12.1f %12.1f   %s| %s| %s\n' "$f" "$np" "$loop" "$p" "$s" "$k" \
    "$(echo "($s - $p) / $div" | bc -l)" "$(echo "($k - $p) / $div" | bc -l)" \
    "${vals[$c:plain]}" "${vals[$c:shm]}" "${vals[$c:socket]}"
done

# Where the time goes at np = cores: CPU samples of every thread of the
# whole `hark run` (ranks, the probe's shipper, the server's readers and
# analysis workers), by thread name, for the Open MPI Iprobe loop at np 2,
# through the ring and through the socket.
if command -v perf >/dev/null; then
  for v in shm socket; do
    shm=1
    [ $v = socket ] && shm=0
    HARK_SHM=$shm perf record -q -F 1999 -e cpu-clock -o "$work/perf.data" -- \
      "$hark" run -q -o "$work/run" -- mpirun.openmpi -np 2 --oversubscribe \
      "$work/overhead-openmpi" iprobe "$calls" 5 >/dev/null 2>&1
    echo "np 2, openmpi iprobe, $v: share of CPU samples by thread"
    perf report -i "$work/perf.data" --sort comm --stdio 2>/dev/null |
      grep -E '^ +[0-9]' | head -8
  done
  # At np 1 Open MPI binds the rank to one core and the server keeps off
  # it (docs/outputs.md, "Where the server runs"): by CPU and thread, the
  # samples on the rank's CPU should be the rank's (or the launcher's).
  # Against it, unplaced: the launcher runs under another host name (a UTS
  # namespace; root only), so the server takes the ranks for another
  # host's and does not move.
  for v in placed unplaced; do
    cmd=(mpirun.openmpi -np 1 "$work/overhead-openmpi" iprobe "$calls" 5)
    if [ $v = unplaced ]; then
      unshare --uts true 2>/dev/null || continue
      cmd=(unshare --uts sh -c 'hostname hark-bench-elsewhere; exec "$@"' sh "${cmd[@]}")
    fi
    perf record -q --sample-cpu -F 1999 -e cpu-clock -o "$work/perf.data" -- \
      "$hark" run -q -o "$work/run" -- "${cmd[@]}" >/dev/null 2>&1
    echo "np 1, openmpi iprobe, shm, $v: share of CPU samples by CPU and thread"
    perf report -i "$work/perf.data" --sort cpu,comm --stdio 2>/dev/null |
      grep -E '^ +[0-9]' | head -10
  done
fi

# Instructions per call with shipping included, where times cannot be
# trusted (a shared machine): callgrind counts every thread of the rank,
# the shipper too (user space only: a socket's copy happens in the kernel
# and is not counted), at two loop lengths; the difference per call.
if command -v valgrind >/dev/null; then
  echo "instructions per MPI_Iprobe (MPICH, np 1), shipping included:"
  for v in plain shm; do
    ir=()
    for n in 200000 400000; do
      out="$work/cg.$v.$n"
      cmd=(mpirun.mpich -np 1 valgrind -q --tool=callgrind --callgrind-out-file="$out"
        "$work/overhead-mpich" iprobe "$n" 1)
      case $v in
        plain) "${cmd[@]}" >/dev/null 2>&1 ;;
        shm) "$hark" run -q -o "$work/run" -- "${cmd[@]}" >/dev/null 2>&1 ;;
      esac
      ir+=("$(awk '/^(summary|totals):/ {print $2; exit}' "$out")")
    done
    # Each run is a warm-up and one timed repetition: 2 × n calls.
    echo "  $v: $(( (ir[1] - ir[0]) / 400000 )) (totals ${ir[*]})"
  done
fi
