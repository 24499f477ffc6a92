#!/usr/bin/env bash
# What an OpenMP event costs under the probe: a program times, with its own
# clock, N explicit barriers and N empty parallel regions on one thread
# (OMP_NUM_THREADS=1: no waiting, only the runtime's and the probe's work),
# bare and under `hark run`, ROUNDS times each; prints the medians in ns per
# barrier (one OMP_BARRIER event) and per region (OMP_PARALLEL,
# OMP_IMPLICIT_TASK and one timed barrier: three events), for gcc (libgomp,
# wrapped GOMP_* entry points) and clang (LLVM libomp, OMPT callbacks).
#
#   scripts/bench-openmp.sh [N] [ROUNDS]
#
# Needs a built `hark` and `libhark.so` (HARK=path/to/hark to choose one;
# default target/release/hark, else target/debug/hark), gcc and clang.
set -euo pipefail
n=${1:-200000}
rounds=${2:-5}
root=$(cd "$(dirname "$0")/.." && pwd)
hark=${HARK:-$root/target/release/hark}
[ -x "$hark" ] || hark=$root/target/debug/hark
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cat > "$work/omp_cost.c" <<'C'
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
static long long now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec * 1000000000LL + t.tv_nsec;
}
int main(int argc, char **argv) {
    long n = atol(argv[1]);
    long long t0 = now();
#pragma omp parallel
    for (long i = 0; i < n; i++) {
#pragma omp barrier
    }
    long long t1 = now();
    for (long i = 0; i < n; i++) {
#pragma omp parallel
        { __asm__ volatile("" ::: "memory"); }
    }
    long long t2 = now();
    printf("%.1f %.1f\n", (double)(t1 - t0) / n, (double)(t2 - t1) / n);
    return 0;
}
C
gcc -O2 -fopenmp -o "$work/gcc" "$work/omp_cost.c"
clang -O2 -fopenmp -o "$work/clang" "$work/omp_cost.c"
median() { sort -n | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }
export OMP_NUM_THREADS=1
for cc in gcc clang; do
    for how in bare hark; do
        : > "$work/b" ; : > "$work/r"
        for _ in $(seq "$rounds"); do
            if [ $how = bare ]; then
                out=$("$work/$cc" "$n")
            else
                out=$(cd "$work" && "$hark" run -o "$work/run" -- "$work/$cc" "$n" 2>/dev/null | tail -1)
                rm -rf "$work/run"
            fi
            echo "$out" | awk '{print $1}' >> "$work/b"
            echo "$out" | awk '{print $2}' >> "$work/r"
        done
        echo "$cc $how: barrier $(median < "$work/b") ns, region $(median < "$work/r") ns (medians of $rounds, n=$n)"
    done
done
