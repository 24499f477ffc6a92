#!/usr/bin/env bash
# What an OpenMP event costs under the probe: a program times, with its own
# clock, explicit barriers and empty parallel regions on one thread
# (OMP_NUM_THREADS=1: no waiting, only the runtime's and the probe's work),
# for gcc (libgomp, wrapped GOMP_* entry points) and clang (LLVM libomp,
# wrapped __kmpc_* entry points, and OMPT callbacks with HARK_OMPT=1). Prints ns per barrier (one OMP_BARRIER event) and per
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
# - hark: under `hark run`, as users run it, with the events it lost;
# - hark-ompt (clang): the same with HARK_OMPT=1, libomp measured through
#   OMPT instead of its entry points.
#
# Each is the marginal cost: ROUNDS runs at N/10 and at N events each,
# medians, and (time(N) - time(N/10)) / (N - N/10), so that what a run
# costs once (start-up, `hark run` starting its server beside the program)
# does not pass for a per-event cost. The rounds alternate the variants.
#
# With --instructions, counts instead, with callgrind, the instructions in
# `main` and below (not the probe's shipper thread, not start-up) of N and
# 2N barriers, and of N and 2N regions, bare and under `hark run` (and for
# clang with HARK_OMPT=1 too): the
# difference over N is the instructions per barrier and per region, the
# same on a loaded machine as on a quiet one; and the same for an MPI_Test
# loop at np 1 (mpicc, mpirun), the model of a cheap event.
#
#   scripts/bench-openmp.sh [N] [ROUNDS]          (default 2000000 5)
#   scripts/bench-openmp.sh --instructions [N]    (default 20000)
#
# MPI=1 measures as the MPI per-call number is measured (`bench-hark-run.sh`):
# the same program with `MPI_Init`/`MPI_Finalize` around it, built with
# Open MPI's `mpicc` (gcc, and clang through OMPI_CC), run at np 1 by
# `mpirun` at its default binding (one core), bare and under
# `hark run -- mpirun`. Such a process is multi-threaded without Hark (Open
# MPI's own progress threads), so the second-thread column is left out: the
# futex cost it shows is paid bare. The same run times an `MPI_Iprobe` loop
# (one event a call) the same way, the MPI event an OpenMP event is to cost
# no more than.
#
# WORK=K puts K iterations of an empty loop after every barrier and after
# every region (the same bare and under Hark), so that one thread makes
# fewer events a second: a
# barrier of 15 ns alone makes more than the analysis server takes, and
# the events it cannot take are dropped, which costs the program less than
# a kept one and so flatters the number. The lost events are printed.
#
# With MPI=1, FLOOR=1 adds two variants per runtime, timed in the same
# rounds: floor0, a C library that only reaches the barrier (a wrapper of
# `GOMP_barrier`; of `__kmpc_barrier`), and floor1, the same reading the
# clock at both ends and storing a 48-byte record: what any tool that times
# barriers pays, and so how much of Hark's cost is Hark's; and for clang
# tool0, an OMPT tool with an empty `sync_region_wait` callback, which
# makes libomp do its tool work (the floor of hark-ompt).
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
#ifdef WITH_MPI
#include <mpi.h>
#endif
#ifndef WORK
#define WORK 0
#endif
static long long now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec * 1000000000LL + t.tv_nsec;
}
int main(int argc, char **argv) {
    /* N, or N barriers and M regions */
    long n = atol(argv[1]), m = argc > 2 ? atol(argv[2]) : n;
#ifdef WITH_MPI
    MPI_Init(&argc, &argv);
#endif
    long long t0 = now();
#pragma omp parallel
    for (long i = 0; i < n; i++) {
#pragma omp barrier
        for (int k = 0; k < WORK; k++) __asm__ volatile("");
    }
    long long t1 = now();
    for (long i = 0; i < m; i++) {
#pragma omp parallel
        { __asm__ volatile("" ::: "memory"); }
        for (int k = 0; k < WORK; k++) __asm__ volatile("");
    }
    long long t2 = now();
    printf("%.1f %.1f\n", (double)(t1 - t0) / (n ? n : 1), (double)(t2 - t1) / (m ? m : 1));
#ifdef WITH_MPI
    MPI_Finalize();
#endif
    return 0;
}
C
mpi=${MPI:-0}
launch=()
flags=(-O2 -fopenmp -DWORK="${WORK:-0}")
if [ "$mpi" = 1 ]; then
    mpicc.openmpi "${flags[@]}" -DWITH_MPI -o "$work/gcc" "$work/omp_cost.c"
    OMPI_CC=clang mpicc.openmpi "${flags[@]}" -DWITH_MPI -o "$work/clang" "$work/omp_cost.c"
    # The MPI event it is held against, in the same rounds: the per-call
    # benchmark's own program (`overhead iprobe N 1`: one timed repetition).
    mpicc.openmpi -O2 -o "$work/iprobe" "$root/tests/programs/mpi/bench/overhead.c"
    export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
    launch=(mpirun.openmpi -np 1)
else
    gcc "${flags[@]}" -o "$work/gcc" "$work/omp_cost.c"
    clang "${flags[@]}" -o "$work/clang" "$work/omp_cost.c"
fi
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
        if [ "$how" != bare ]; then
            local ompt=0
            [ "$how" = hark-ompt ] && ompt=1
            HARK_OMPT=$ompt "$hark" run -o "$work/run" -- "${cmd[@]}" >/dev/null 2>&1
            rm -rf "$work/run"
        else
            "${cmd[@]}" >/dev/null 2>&1
        fi
        grep -E '^(summary|totals):' "$out" | head -1 | awk '{print $2}'
    }
    for how in bare hark hark-ompt; do
        for cc in gcc clang; do
            [ $how = hark-ompt ] && [ $cc = gcc ] && continue
            b1=$(instructions $how - "$work/$cc" "$n" 0)
            b2=$(instructions $how - "$work/$cc" $((2 * n)) 0)
            r1=$(instructions $how - "$work/$cc" 0 "$n")
            r2=$(instructions $how - "$work/$cc" 0 $((2 * n)))
            echo "$cc $how: $(((b2 - b1) / n)) instructions per barrier, $(((r2 - r1) / n)) per region (n=$n)"
        done
        [ $how = hark-ompt ] && continue
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
# and for hark and hark-ompt the events it lost appended to $work/lost-$how.
one() {
    local how=$1 cc=$2 b=$3 r=$4
    local args=("$b" "$r")
    [ "$cc" = iprobe ] && args=(iprobe "$b" 1)
    case $how in
    bare) "${launch[@]}" "$work/$cc" "${args[@]}" ;;
    thread) LD_PRELOAD=$work/thread.so "$work/$cc" "${args[@]}" ;;
    floor0 | floor1 | tool0) "${launch[@]}" -x LD_PRELOAD="$work/$cc-$how.so" "$work/$cc" "${args[@]}" ;;
    hark | hark-ompt)
        local ompt=0
        [ $how = hark-ompt ] && ompt=1
        (cd "$work" && HARK_OMPT=$ompt "$hark" run -o "$work/run" -- "${launch[@]}" "$work/$cc" "${args[@]}" 2>/dev/null | tail -1)
        grep -o '[0-9,]* lost' "$work/run/summary.txt" | tr -d , | awk '{print $1}' >> "$work/lost-$how"
        rm -rf "$work/run"
        ;;
    esac
}
# The rounds alternate the variants (each round runs every variant at both
# sizes, in turn), so that a machine that drifts moves them all alike.
# Appends one run's total ns of the barriers and of the regions to
# $work/$how-$size.b and .r.
sample() {
    local how=$1 cc=$2 k=$3 out
    out=$(one "$how" "$cc" "$k" "$k")
    echo "$out" | awk -v k="$k" '{printf "%.0f\n", $1 * k}' >> "$work/$how-$k.b"
    echo "$out" | awk -v k="$k" '{printf "%.0f\n", $2 * k}' >> "$work/$how-$k.r"
}
hows="bare thread hark" programs="gcc clang"
[ "$mpi" = 1 ] && hows="bare hark" programs="gcc clang iprobe"
if [ "$mpi" = 1 ] && [ "${FLOOR:-0}" = 1 ]; then
    # What any tool pays that times a barrier, built in C beside the probe:
    # floor0 only reaches the barrier (a `GOMP_barrier` that calls
    # libgomp's; an OMPT tool with an empty `sync_region_wait` callback),
    # floor1 also reads the clock at both ends and stores a 48-byte record
    # into a ring that stays in the cache.
    cat > "$work/floor.c" <<'C'
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdint.h>
#include <x86intrin.h>
static uint64_t ring[512 * 6], t0;
static unsigned long k;
static inline void stamp(int begin, uint64_t what) {
#if STAMP
    uint64_t t = __rdtsc();
    if (begin) {
        t0 = t;
        return;
    }
    uint64_t *e = &ring[(k++ % 512) * 6];
    e[0] = t0, e[1] = t, e[2] = what, e[3] = e[4] = e[5] = 0;
#else
    (void)begin, (void)what;
#endif
}
#ifdef GOMP
void GOMP_barrier(void) {
    static void (*real)(void);
    if (!real) real = (void (*)(void))dlsym(RTLD_NEXT, "GOMP_barrier");
    stamp(1, 0);
    real();
    stamp(0, 0);
}
#elif KMPC
void __kmpc_barrier(void *loc, int gtid) {
    static void (*real)(void *, int);
    if (!real) real = (void (*)(void *, int))dlsym(RTLD_NEXT, "__kmpc_barrier");
    stamp(1, 0);
    real(loc, gtid);
    stamp(0, 0);
}
#else
#include <omp-tools.h>
static void wait_cb(ompt_sync_region_t kind, ompt_scope_endpoint_t ep, ompt_data_t *p,
                    ompt_data_t *t, const void *c) {
    (void)p, (void)t, (void)c;
    stamp(ep == ompt_scope_begin, kind);
}
static int init(ompt_function_lookup_t lookup, int dev, ompt_data_t *d) {
    (void)dev, (void)d;
    ((ompt_set_callback_t)lookup("ompt_set_callback"))(ompt_callback_sync_region_wait,
                                                        (ompt_callback_t)wait_cb);
    return 1;
}
static void fini(ompt_data_t *d) { (void)d; }
ompt_start_tool_result_t *ompt_start_tool(unsigned v, const char *r) {
    (void)v, (void)r;
    static ompt_start_tool_result_t res = {init, fini, {0}};
    return &res;
}
#endif
C
    for k in 0 1; do
        gcc -O2 -shared -fPIC -DGOMP -DSTAMP=$k -o "$work/gcc-floor$k.so" "$work/floor.c" -ldl
        clang -O2 -shared -fPIC -DKMPC -DSTAMP=$k -o "$work/clang-floor$k.so" "$work/floor.c" -ldl
    done
    clang -O2 -shared -fPIC -DSTAMP=0 -o "$work/clang-tool0.so" "$work/floor.c"
fi
for cc in $programs; do
    rm -f "$work"/*.b "$work"/*.r
    : > "$work/lost-hark"
    : > "$work/lost-hark-ompt"
    these=$hows
    [ "$mpi" = 1 ] && [ "${FLOOR:-0}" = 1 ] && [ "$cc" != iprobe ] && these="bare floor0 floor1 hark"
    [ "$mpi" = 1 ] && [ "${FLOOR:-0}" = 1 ] && [ "$cc" = clang ] && these="$these tool0"
    [ "$cc" = clang ] && these="$these hark-ompt"
    for _ in $(seq "$rounds"); do
        for how in $these; do
            sample "$how" "$cc" "$small"
            sample "$how" "$cc" "$n"
        done
    done
    for how in $these; do
        b1=$(median < "$work/$how-$small.b") r1=$(median < "$work/$how-$small.r")
        b2=$(median < "$work/$how-$n.b") r2=$(median < "$work/$how-$n.r")
        lost=""
        case $how in hark*) lost=", $(awk '{s += $1} END {print s + 0}' "$work/lost-$how") events lost in all" ;; esac
        awk -v cc=$cc -v how=$how -v b1="$b1" -v b2="$b2" -v r1="$r1" -v r2="$r2" -v d=$((n - small)) -v lost="$lost" -v rounds="$rounds" -v n="$n" \
            'BEGIN {
                what = cc == "iprobe" ? sprintf("MPI_Iprobe %.1f ns", (b2 - b1) / d) : sprintf("barrier %.1f ns, region %.1f ns", (b2 - b1) / d, (r2 - r1) / d)
                printf "%s %s: %s (marginal, medians of %d at %d and %d%s)\n", cc, how, what, rounds, n / 10, n, lost
            }'
    done
done
