/* Rounds of three regions of equal work inside a region "step", an exchange
 * with MPI inside a region and an MPI_Allreduce outside any region:
 *
 *   phases ROUNDS WORK_US [SLOW_REGION EXTRA_US]
 *
 * Each of "assemble", "solve" and "update" takes WORK_US µs per round;
 * the region named SLOW_REGION takes EXTRA_US µs more (the injected
 * slowdown `hark diff` must find). "exchange" sends to the next rank and
 * receives from the previous one (MPI_Sendrecv). */
#include <mpi.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include "hark.h"

/* Sleeps rather than spins: on a shared, oversubscribed machine a sleeping
 * rank takes what it asked for, a spinning one competes for the cores. */
static void busy(long us) {
    struct timespec t = {us / 1000000L, (us % 1000000L) * 1000L};
    while (nanosleep(&t, &t) != 0) {
    }
}

static const char *slow = "";
static long extra = 0;

static void work(const char *name, long us) {
    HARK_REGION_BEGIN(name);
    busy(us + (strcmp(name, slow) == 0 ? extra : 0));
    HARK_REGION_END(name);
}

int main(int argc, char **argv) {
    MPI_Init(&argc, &argv);
    int rank, size;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    int rounds = argc > 1 ? atoi(argv[1]) : 10;
    long us = argc > 2 ? atol(argv[2]) : 1000;
    if (argc > 4) {
        slow = argv[3];
        extra = atol(argv[4]);
    }
    double buf[64] = {0}, in[64];
    for (int i = 0; i < rounds; i++) {
        HARK_REGION_BEGIN("step");
        work("assemble", us);
        work("solve", us);
        work("update", us);
        HARK_REGION_BEGIN("exchange");
        MPI_Sendrecv(buf, 64, MPI_DOUBLE, (rank + 1) % size, 0, in, 64, MPI_DOUBLE,
                     (rank + size - 1) % size, 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        HARK_REGION_END("exchange");
        HARK_REGION_END("step");
        double x = rank, sum;
        MPI_Allreduce(&x, &sum, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
    }
    MPI_Finalize();
    return 0;
}
