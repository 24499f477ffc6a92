#!/bin/bash
# Instructions the probe's MPI wrapper costs per call on the program's own
# thread, counted by callgrind (--separate-threads, thread 1), the PMPI
# callee excluded: exact, unlike times. Loops of MPI_Iprobe and MPI_Test
# (tests/programs/mpi/bench/overhead.c, 1 rank, 2 x 40,000 calls) under
# each library given, plain and sampled out by `hark ctl sample 0/1`; the
# whole process's instructions (every thread: the shipper's fold too) are
# printed beside. BENCHMARKS.md, "Virtualised worlds, sampled-out ranks, clock alignment".
#
#   scripts/bench-sampling-instructions.sh HARK LIBHARK.so [OTHER_LIBHARK.so ...]
#
# HARK is the `hark` binary (its `serve` receives the streams); every
# library must speak its wire version.
set -euo pipefail
hark=$1; shift
dir=$(mktemp -d /tmp/hark-sampling-XXXX)
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 HARK_IO=0
for f in openmpi mpich; do
  mpicc.$f -O2 -o "$dir/overhead-$f" "$(dirname "$0")/../tests/programs/mpi/bench/overhead.c"
done
"$hark" serve --listen "unix:$dir/s.sock" --runs "$dir/runs" >"$dir/serve.log" 2>&1 &
serve=$!
trap 'kill $serve 2>/dev/null; [ -n "${holder:-}" ] && kill $holder 2>/dev/null' EXIT
sleep 2
# A job whose sampling filter later processes get at their Hello.
LD_PRELOAD=$1 HARK_ADDR="unix:$dir/s.sock" HARK_JOB=sampled sleep 3600 &
holder=$!
sleep 1
"$hark" ctl --server "unix:$dir/s.sock" sample 0/1 sampled >/dev/null
per_call() { # LIB FLAVOUR MODE JOB
  local out="$dir/cg-$RANDOM.out" fn
  LD_PRELOAD=$1 HARK_ADDR="unix:$dir/s.sock" HARK_JOB=$4 valgrind --tool=callgrind \
    --separate-threads=yes --callgrind-out-file="$out" "$dir/overhead-$2" "$3" 40000 1 >/dev/null 2>&1
  fn=$([ "$3" = iprobe ] && echo Iprobe || echo Test)
  local w p all
  # From a directory without the sources: with them at hand, callgrind_annotate
  # splits the wrapper's inlined parts into entries of their own.
  (cd / && callgrind_annotate --inclusive=yes "$out-01") >"$out.txt"
  w=$(grep -m1 -E "mpi_wrappers.rs:MPI_$fn " "$out.txt" | awk '{gsub(",","",$1); print $1}')
  p=$(grep -m1 -E "\?\?\?:PMPI_$fn " "$out.txt" | awk '{gsub(",","",$1); print $1}')
  all=$(cat "$out"-* | grep -h '^summary:' | awk '{s+=$2} END {print s}')
  python3 -c "print('%.2f | %d' % (($w - $p) / 80000, $all))"
}
echo "| library | loop | job | wrapper per call, own thread | whole process |"
echo "|---|---|---|---|---|"
for lib in "$@"; do for f in openmpi mpich; do for mode in iprobe test; do
  for job in plain sampled; do
    echo "| $(basename "$(dirname "$(dirname "$(dirname "$lib")")")") $f | $mode | $job | $(per_call "$lib" $f $mode $job) |"
  done
done; done; done
