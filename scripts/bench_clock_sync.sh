#!/bin/sh
# Cost of the clock alignment at MPI_Init and MPI_Finalize (BENCHMARKS.md,
# "Probe: clock alignment"): each rank times MPI_Init and MPI_Finalize from
# the program's side under `hark run`, with the alignment on and off
# (HARK_CLOCK_SYNC); the difference of the medians is the ping-pong's cost.
# Usage: scripts/bench_clock_sync.sh [reps] (needs a release build).
set -eu
reps=${1:-15}
root=$(cd "$(dirname "$0")/.." && pwd)
hark=$root/target/release/hark
dir=$(mktemp -d)
cat > "$dir/t.c" <<'C'
#include <mpi.h>
#include <stdio.h>
#include <time.h>
static double now(void) { struct timespec t; clock_gettime(CLOCK_MONOTONIC, &t); return t.tv_sec * 1e6 + t.tv_nsec / 1e3; }
int main(int argc, char **argv) {
    double a = now(); MPI_Init(&argc, &argv); double b = now();
    int rank; MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Barrier(MPI_COMM_WORLD);
    double c = now(); MPI_Finalize(); double d = now();
    printf("%d %.1f %.1f\n", rank, b - a, d - c);
    return 0;
}
C
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_btl=self,vader
for mpi in openmpi mpich; do
    "mpicc.$mpi" -O1 -o "$dir/t-$mpi" "$dir/t.c"
    over=""; [ "$mpi" = openmpi ] && over=--oversubscribe
    for np in 2 4; do
        for sync in 0 1; do
            : > "$dir/out"
            i=0
            while [ $i -lt "$reps" ]; do
                HARK_CLOCK_SYNC=$sync "$hark" run -o "$dir/run" -- "mpirun.$mpi" $over -np $np "$dir/t-$mpi" >> "$dir/out" 2>/dev/null
                rm -rf "$dir/run"; i=$((i + 1))
            done
            # Median over ranks and runs of MPI_Init and MPI_Finalize, in µs.
            printf '%s np=%d sync=%d init_us=%s finalize_us=%s\n' "$mpi" "$np" "$sync" \
                "$(awk '{print $2}' "$dir/out" | sort -n | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}')" \
                "$(awk '{print $3}' "$dir/out" | sort -n | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}')"
        done
    done
done
rm -rf "$dir"
