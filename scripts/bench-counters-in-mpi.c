/* What reading the counters around every MPI call costs
 * (`hark run --counters-in-mpi`, BENCHMARKS.md, "Counts inside MPI
 * functions"): ROUNDS rounds of CALLS `MPI_Iprobe` calls that find
 * nothing (a call the probe wraps and records), timed by the program:
 *
 *   mpicc -O2 -o /tmp/bench-counters-in-mpi scripts/bench-counters-in-mpi.c
 *   hark run [--counters LIST] [--counters-in-mpi] -- mpirun -np 1 /tmp/bench-counters-in-mpi 5 200000
 *
 * prints one line per round: `ns per call N`. */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

static double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec + t.tv_nsec * 1e-9;
}

int main(int argc, char **argv) {
    MPI_Init(&argc, &argv);
    int rounds = argc > 1 ? atoi(argv[1]) : 5;
    long calls = argc > 2 ? atol(argv[2]) : 200000;
    for (int k = 0; k < rounds; k++) {
        double a = now();
        for (long i = 0; i < calls; i++) {
            int flag;
            MPI_Iprobe(MPI_ANY_SOURCE, 0, MPI_COMM_WORLD, &flag, MPI_STATUS_IGNORE);
        }
        double b = now();
        printf("ns per call %.1f\n", (b - a) / calls * 1e9);
    }
    MPI_Finalize();
    return 0;
}
