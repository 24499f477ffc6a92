#!/usr/bin/env bash
# What reading CPU availability costs a rank: the time the probe's shipping
# thread spends on a CPU with the readings off (`HARK_CPU_MS=0`), at the
# default period (100 ms) and at 1 ms (a hundred times as many readings, so
# that the cost per reading stands out of the noise), for ranks that spin
# for SECONDS. Each rank reads its own `hark-shipper` thread's
# `se.sum_exec_runtime` from /proc/self/task/*/sched before it finalises.
#
#   scripts/bench-cpu-sampling.sh [SECONDS] [NP] [ROUNDS]
#
# Needs a built `hark` and `libhark.so` (`cargo build --release -p hark-cli
# -p hark-probe`; HARK=path/to/hark to choose one) and Open MPI. Prints, per
# setting and round, the shipper's CPU time per rank as a share of a core;
# the difference from `HARK_CPU_MS=0` is the readings' cost (the target:
# at most 1 % of a core per rank at the default period).
set -euo pipefail
seconds=${1:-10}
np=${2:-2}
rounds=${3:-3}
root=$(cd "$(dirname "$0")/.." && pwd)
hark=${HARK:-$root/target/release/hark}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
cat > "$work/spin.c" <<'C'
#include <mpi.h>
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
static double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec + t.tv_nsec * 1e-9;
}
/* The hark-shipper thread's time on a CPU, in seconds (-1 if none). */
static double shipper(void) {
    DIR *d = opendir("/proc/self/task");
    struct dirent *e;
    double s = -1;
    while (d && (e = readdir(d))) {
        char p[256], line[256];
        snprintf(p, sizeof p, "/proc/self/task/%s/comm", e->d_name);
        FILE *f = fopen(p, "r");
        if (!f)
            continue;
        int it = fgets(line, sizeof line, f) && strncmp(line, "hark-shipper", 12) == 0;
        fclose(f);
        if (!it)
            continue;
        snprintf(p, sizeof p, "/proc/self/task/%s/sched", e->d_name);
        if (!(f = fopen(p, "r")))
            continue;
        while (fgets(line, sizeof line, f))
            if (strncmp(line, "se.sum_exec_runtime", 19) == 0)
                s = atof(strchr(line, ':') + 1) / 1e3;
        fclose(f);
    }
    if (d)
        closedir(d);
    return s;
}
int main(int argc, char **argv) {
    MPI_Init(&argc, &argv);
    double t0 = now(), until = t0 + atof(argv[1]);
    volatile double x = 1;
    while (now() < until)
        for (int i = 0; i < 10000; i++)
            x = x * 1.0000001 + 1e-9;
    double wall = now() - t0, s = shipper();
    printf("shipper %.6f of a core (%.4f s in %.2f s)\n", s / wall, s, wall);
    MPI_Finalize();
    return 0;
}
C
mpicc.openmpi -O2 -o "$work/spin" "$work/spin.c"
for round in $(seq "$rounds"); do
  for ms in 0 100 1; do
    HARK_CPU_MS=$ms "$hark" run -q --no-http -o "$work/run-$ms-$round" -- \
      mpirun.openmpi --oversubscribe -np "$np" "$work/spin" "$seconds" |
      sed "s/^/round $round HARK_CPU_MS=$ms: /"
  done
done
