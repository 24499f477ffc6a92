/* A load for the report-latency benchmark: each rank calls MPI_Iprobe N
 * times (argv[1], default 25,000,000), one event per call, then MPI_Barrier.
 * At np 4 and the default, the run records 10^8 events. */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>

int main(int argc, char **argv) {
    MPI_Init(&argc, &argv);
    long n = argc > 1 ? atol(argv[1]) : 25000000L;
    int flag = 0, rank;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    for (long i = 0; i < n; i++)
        MPI_Iprobe(MPI_ANY_SOURCE, 12345, MPI_COMM_WORLD, &flag, MPI_STATUS_IGNORE);
    MPI_Barrier(MPI_COMM_WORLD);
    if (rank == 0) printf("many_events: %ld MPI_Iprobe calls per rank\n", n);
    MPI_Finalize();
    return 0;
}
