#!/usr/bin/env bash
# What `hark run` adds to an MPI call, at the launcher's default binding, with
# shipping included: the real `hark run -- mpirun ...` against the same
# `mpirun ...` without it, alternated in one run.
#
#   [CONFIGS="openmpi:1:iprobe ..."] [VARIANTS="shm socket mpi"] [PERF=0] \
#   [CALLGRIND=0 | CALLGRIND_CONFIGS="mpich:iprobe ..."] scripts/bench-hark-run.sh [ROUNDS] [CALLS]
#
# For Open MPI and MPICH, `MPI_Iprobe` and `MPI_Test` loops at np 1 and np 2
# (this machine's cores) and an 8-byte ping-pong at np 2
# (tests/programs/mpi/bench/overhead.c); CONFIGS (LIBRARY:NP:LOOP words)
# restricts them. Each round runs every configuration plain, under
# `hark run` (shared-memory ring, the default), under `hark run` with
# HARK_SHM=0 (the socket) and under `hark run --analysers 1` (the packs go
# over MPI to one analyser rank, appended to the job as one more application
# context: np + 1 processes; docs/analysers.md), in that order; VARIANTS
# restricts them (plain is always run: the others are measured against it),
# and `mpiyield` adds `--analysers 1` with OMPI_MCA_mpi_yield_when_idle=1
# (the programs' ranks yielding, as Open MPI makes them on an oversubscribed node).
# Each run does one warm-up and 5 timed repetitions of CALLS calls, and its
# value is the median of rank 0's repetitions. Prints one line per
# configuration: the median over ROUNDS runs of each variant, and what each
# `hark run` variant adds per call (ping-pong: a quarter of the round trip,
# four wrapped calls). Then, unless PERF=0, where the CPU goes (perf), and
# unless CALLGRIND=0, instructions per call (callgrind; CALLGRIND_CONFIGS,
# LIBRARY:LOOP words, restricts it). ROUNDS 0 skips the timed runs. Numbers go to
# BENCHMARKS.md, "What a program pays per intercepted MPI call" (method: "Per-call
# cost").
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
# Runs a launcher command as the variant runs it.
under() { # variant command...
  local variant=$1
  shift
  case $variant in
    plain) "$@" ;;
    shm) "$hark" run -q -o "$work/run" -- "$@" ;;
    socket) HARK_SHM=0 "$hark" run -q -o "$work/run" -- "$@" ;;
    mpi) "$hark" run -q --analysers 1 -o "$work/run" -- "$@" ;;
    # The programs' ranks yielding, as Open MPI makes them on an oversubscribed node (Open MPI;
    # docs/analysers.md, "The programs' ranks do not start yielding").
    mpiyield) OMPI_MCA_mpi_yield_when_idle=1 "$hark" run -q --analysers 1 -o "$work/run" -- "$@" ;;
  esac
}
one() { # variant flavour np loop
  local variant=$1 f=$2 np=$3 loop=$4 n=$calls
  [ "$loop" = pingpong ] && n=$((calls / 10))
  local cmd=("mpirun.$f" -np "$np")
  [ "$f" = openmpi ] && [ "$np" -gt 1 ] && cmd+=(--oversubscribe)
  cmd+=("$work/overhead-$f" "$loop" "$n" 5)
  under "$variant" "${cmd[@]}" 2>/dev/null | median
}

configs=${CONFIGS:-"openmpi:1:iprobe openmpi:1:test openmpi:2:iprobe openmpi:2:test openmpi:2:pingpong
mpich:1:iprobe mpich:1:test mpich:2:iprobe mpich:2:test mpich:2:pingpong"}
variants="plain"
for v in ${VARIANTS:-shm socket mpi}; do
  case $v in
    plain) ;;
    shm | socket | mpi | mpiyield) variants+=" $v" ;;
    *) echo "unknown variant $v (plain, shm, socket, mpi, mpiyield)" >&2 && exit 2 ;;
  esac
done
declare -A vals
echo "load before: $(cut -d' ' -f1-3 /proc/loadavg)"
for r in $(seq "$rounds"); do
  for c in $configs; do
    IFS=: read -r f np loop <<<"$c"
    for v in $variants; do
      vals[$c:$v]+="$(one $v "$f" "$np" "$loop") "
    done
  done
  # This round's values, so that a run cut short still says something.
  echo "round $r done, load $(cut -d' ' -f1-3 /proc/loadavg):" >&2
  for c in $configs; do
    last() { local v=${1% }; echo "${v##* }"; }
    line="  $c:"
    for v in $variants; do line+=" $v $(last "${vals[$c:$v]}")"; done
    echo "$line" >&2
  done
done
if [ "$rounds" -gt 0 ]; then
  echo "load after: $(cut -d' ' -f1-3 /proc/loadavg)"
  printf '%-8s %-3s %-9s' library np loop
  for v in $variants; do printf ' %9s' "$v"; done
  for v in $variants; do [ $v = plain ] || printf ' %12s' "+$v/call"; done
  printf '   runs (%s)\n' "${variants// / | }"
  for c in $configs; do
    IFS=: read -r f np loop <<<"$c"
    div=1
    [ "$loop" = pingpong ] && div=4
    declare -A med=()
    printf '%-8s %-3s %-9s' "$f" "$np" "$loop"
    for v in $variants; do
      med[$v]=$(tr ' ' '\n' <<<"${vals[$c:$v]}" | grep . | median)
      printf ' %9.1f' "${med[$v]}"
    done
    for v in $variants; do
      [ $v = plain ] || printf ' %12.1f' "$(echo "(${med[$v]} - ${med[plain]}) / $div" | bc -l)"
    done
    runs=""
    for v in $variants; do runs+="${vals[$c:$v]}| "; done
    printf '   %s\n' "${runs%| }"
  done
fi

# Where the time goes at np = cores: CPU samples of every thread of the
# whole `hark run` (ranks, the probe's shipper, the server's readers and
# analysis workers), by thread name, for the Open MPI Iprobe loop at np 2,
# through the ring and through the socket.
if [ "${PERF:-1}" != 0 ] && command -v perf >/dev/null; then
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
# the shipper too, at two loop lengths; the difference per call. Only the
# writer rank runs under valgrind: it is the program of the command's one
# application context, and `--analysers 1` appends the analyser's context
# (`: -np 1 hark mpi-analyser ...`) after it, outside valgrind. Not counted:
# work in the kernel (a socket's copy; a large MPI message's single copy
# where the library uses CMA) and work of other processes (the server, the
# analyser rank). The `mpi` count is not exact: how often the cold path
# enters MPI (once per 50,000 clock units at most, while chunks wait) and
# how much of MPI's progress work lands in the writer's calls depend on
# timing, and under valgrind the writer runs tens of times slower while
# the clock does not.
if [ "${CALLGRIND:-1}" != 0 ] && command -v valgrind >/dev/null; then
  for c in ${CALLGRIND_CONFIGS:-mpich:iprobe mpich:test openmpi:iprobe openmpi:test}; do
    IFS=: read -r f loop <<<"$c"
    echo "instructions per $loop ($f, np 1), shipping included:"
    for v in $variants; do
      [ $v = socket ] && continue # its copy is in the kernel
      ir=()
      for n in 200000 400000; do
        out="$work/cg.$f.$loop.$v.$n"
        cmd=("mpirun.$f" -np 1 valgrind -q --tool=callgrind --callgrind-out-file="$out"
          "$work/overhead-$f" "$loop" "$n" 1)
        under "$v" "${cmd[@]}" >/dev/null 2>&1
        ir+=("$(awk '/^(summary|totals):/ {print $2; exit}' "$out")")
      done
      # Each run is a warm-up and one timed repetition: 2 × n calls.
      echo "  $v: $(((ir[1] - ir[0]) / 400000)) (totals ${ir[*]})"
    done
  done
fi
