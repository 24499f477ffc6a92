#!/usr/bin/env bash
# What an OpenMP event costs under the probe: a program times, with its own
# clock, explicit barriers and empty parallel regions on one thread
# (OMP_NUM_THREADS=1: no waiting, only the runtime's and the probe's work),
# for gcc (libgomp, wrapped GOMP_* entry points) and clang (LLVM libomp,
# OMPT callbacks). Prints ns per barrier (one OMP_BARRIER event) and per
# region (OMP_PARALLEL and OMP_IMPLICIT_TASK: two events):
#
# - bare: the program alone;
# - +thread: the program with one idle thread of its own (a preloaded
#   constructor starts it). The probe's shipper makes a one-thread program
#   multi-threaded, and since Linux 6.17 every futex call of a
#   multi-threaded process goes through its private futex hash, which costs
#   libgomp's barrier (a futex wake each, even alone) about 10 ns more: a
#   cost of any second thread, which a program with two OpenMP threads pays
#   already. The column tells it apart from the probe's own;
# - hark: under `hark run`, as users run it, with the events it lost.
#
# Each is the marginal cost: ROUNDS runs at N/10 and at N events each,
# medians, and (time(N) - time(N/10)) / (N - N/10), so that what a run
# costs once (start-up, `hark run` starting its server beside the program)
# does not pass for a per-event cost.
#
# With --instructions, counts instead, with callgrind, the instructions in
# `main` and below (not the probe's shipper thread, not start-up) of N and
# 2N barriers, and of N and 2N regions, bare and under `hark run`: the
# difference over N is the instructions per barrier and per region, the
# same on a loaded machine as on a quiet one; and the same for an MPI_Test
# loop at np 1 (mpicc, mpirun), the model of a cheap event.
#
#   scripts/bench-openmp.sh [N] [ROUNDS]          (default 2000000 5)
#   scripts/bench-openmp.sh --instructions [N]    (default 20000)
#
# THREADS=K runs the team with K threads instead of one: the runtimes'
# default is as many as there are cores, and then each barrier also waits
# for the slowest thread, and the analysis server takes its share of the
# cores (two events a barrier on two threads).
#
# Needs a built `hark` and `libhark.so` (HARK=path/to/hark to choose one;
# default target/release/hark, else target/debug/hark; HARK_PROBE=path to
# choose the probe, as for `hark run`), gcc and clang; valgrind and mpicc
# for --instructions.
set -euo pipefail
count=0
if [ "${1:-}" = --instructions ]; then
    count=1
    shift
fi
n=${1:-$((count ? 20000 : 2000000))}
rounds=${2:-5}
root=$(cd "$(dirname "$0")/.." && pwd)
hark=${HARK:-$root/target/release/hark}
[ -x "$hark" ] || hark=$root/target/debug/hark
hark=$(realpath "$hark")
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
    /* N, or N barriers and M regions */
    long n = atol(argv[1]), m = argc > 2 ? atol(argv[2]) : n;
    long long t0 = now();
#pragma omp parallel
    for (long i = 0; i < n; i++) {
#pragma omp barrier
    }
    long long t1 = now();
    for (long i = 0; i < m; i++) {
#pragma omp parallel
        { __asm__ volatile("" ::: "memory"); }
    }
    long long t2 = now();
    printf("%.1f %.1f\n", (double)(t1 - t0) / (n ? n : 1), (double)(t2 - t1) / (m ? m : 1));
    return 0;
}
C
gcc -O2 -fopenmp -o "$work/gcc" "$work/omp_cost.c"
clang -O2 -fopenmp -o "$work/clang" "$work/omp_cost.c"
export OMP_NUM_THREADS=${THREADS:-1}
if [ $count = 1 ]; then
    cat > "$work/mpi.c" <<'C'
#include <mpi.h>
#include <stdlib.h>
int main(int argc, char **argv) {
    MPI_Init(&argc, &argv);
    long n = atol(argv[1]);
    MPI_Request r;
    int flag, x = 0, y;
    MPI_Irecv(&y, 1, MPI_INT, 0, 7, MPI_COMM_WORLD, &r);
    for (long i = 0; i < n; i++) MPI_Test(&r, &flag, MPI_STATUS_IGNORE);
    MPI_Send(&x, 1, MPI_INT, 0, 7, MPI_COMM_WORLD);
    MPI_Wait(&r, MPI_STATUS_IGNORE);
    MPI_Finalize();
    return 0;
}
C
    mpicc -O2 -o "$work/mpi" "$work/mpi.c"
    export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
    # Instructions in `main` of one run: bare|hark, a launcher (`-`: none),
    # then the program and its arguments.
    instructions() {
        local how=$1 pre=$2 out=$work/cg.out
        shift 2
        local cmd=(valgrind --tool=callgrind --toggle-collect=main --callgrind-out-file="$out" "$@")
        [ "$pre" = - ] || cmd=($pre "${cmd[@]}")
        if [ "$how" = hark ]; then
            "$hark" run -o "$work/run" -- "${cmd[@]}" >/dev/null 2>&1
            rm -rf "$work/run"
        else
            "${cmd[@]}" >/dev/null 2>&1
        fi
        grep -E '^(summary|totals):' "$out" | head -1 | awk '{print $2}'
    }
    for how in bare hark; do
        for cc in gcc clang; do
            b1=$(instructions $how - "$work/$cc" "$n" 0)
            b2=$(instructions $how - "$work/$cc" $((2 * n)) 0)
            r1=$(instructions $how - "$work/$cc" 0 "$n")
            r2=$(instructions $how - "$work/$cc" 0 $((2 * n)))
            echo "$cc $how: $(((b2 - b1) / n)) instructions per barrier, $(((r2 - r1) / n)) per region (n=$n)"
        done
        t1=$(instructions $how "mpirun -np 1" "$work/mpi" "$n")
        t2=$(instructions $how "mpirun -np 1" "$work/mpi" $((2 * n)))
        echo "MPI_Test $how: $(((t2 - t1) / n)) instructions per call (n=$n)"
    done
    exit 0
fi
median() { sort -n | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }
cat > "$work/thread.c" <<'C'
#include <pthread.h>
#include <unistd.h>
static void *idle(void *a) { (void)a; for (;;) pause(); return 0; }
__attribute__((constructor)) static void start(void) {
    pthread_t t;
    pthread_create(&t, 0, idle, 0);
}
C
gcc -O2 -shared -fPIC -o "$work/thread.so" "$work/thread.c" -lpthread
small=$((n / 10))
# One run of $cc with B barriers and R regions: "ns-per-barrier ns-per-region",
# and for hark the events it lost appended to $work/lost.
one() {
    local how=$1 cc=$2 b=$3 r=$4
    case $how in
    bare) "$work/$cc" "$b" "$r" ;;
    thread) LD_PRELOAD=$work/thread.so "$work/$cc" "$b" "$r" ;;
    hark)
        (cd "$work" && "$hark" run -o "$work/run" -- "$work/$cc" "$b" "$r" 2>/dev/null | tail -1)
        grep -o '[0-9,]* lost' "$work/run/summary.txt" | tr -d , | awk '{print $1}' >> "$work/lost"
        rm -rf "$work/run"
        ;;
    esac
}
# Medians over the rounds of one size: total ns of the barriers, of the regions.
totals() {
    local how=$1 cc=$2 b=$3 r=$4
    : > "$work/b"; : > "$work/r"
    for _ in $(seq "$rounds"); do
        local out
        out=$(one "$how" "$cc" "$b" "$r")
        echo "$out" | awk -v k="$b" '{printf "%.0f\n", $1 * k}' >> "$work/b"
        echo "$out" | awk -v k="$r" '{printf "%.0f\n", $2 * k}' >> "$work/r"
    done
    echo "$(median < "$work/b") $(median < "$work/r")"
}
for cc in gcc clang; do
    for how in bare thread hark; do
        : > "$work/lost"
        read -r b1 r1 <<< "$(totals $how $cc $small $small)"
        read -r b2 r2 <<< "$(totals $how $cc "$n" "$n")"
        lost=""
        [ $how = hark ] && lost=", $(awk '{s += $1} END {print s + 0}' "$work/lost") events lost in all"
        awk -v cc=$cc -v how=$how -v b1="$b1" -v b2="$b2" -v r1="$r1" -v r2="$r2" -v d=$((n - small)) -v lost="$lost" -v rounds="$rounds" -v n="$n" \
            'BEGIN {printf "%s %s: barrier %.1f ns, region %.1f ns (marginal, medians of %d at %d and %d%s)\n", cc, how, (b2 - b1) / d, (r2 - r1) / d, rounds, n / 10, n, lost}'
    done
done
