/* A known load imbalance, for checking the POP efficiencies.
 *
 * usage: imbalance UNIT_MS ROUNDS
 *
 * In each of ROUNDS rounds rank r works outside MPI for (r + 1) * UNIT_MS
 * milliseconds, then calls MPI_Barrier. Time outside MPI is therefore
 * ROUNDS * (r + 1) * UNIT_MS per rank, and the load balance (mean over max)
 * of N ranks is (N + 1) / (2 N).
 *
 * The work is a sleep (nanosleep), not a busy loop: on a machine with fewer
 * cores than ranks, busy ranks and the ranks spinning in MPI_Barrier take the
 * cores from one another, and a rank that has finished its loop is often
 * switched out before it reaches the barrier, stretching its time outside
 * MPI by tens of milliseconds (a load balance of 0.638 instead of 0.625 was
 * seen at 4 ranks on 2 cores).
 *
 * A loaded machine still wakes a sleeping rank late, and that lateness is
 * work outside MPI too: the imbalance that happened is not the injected one.
 * So each rank also times, on CLOCK_MONOTONIC, what it spends between
 * returning from one MPI call and entering the next, and rank 0 prints every
 * rank's total as "useful_ns r0 r1 ...": the test compares Hark with that
 * as well as with the injected ratio. */
#define _POSIX_C_SOURCE 200809L
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

static long long now_ns(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec * 1000000000LL + t.tv_nsec;
}

static void work_ms(long ms) {
    struct timespec t = {ms / 1000, ms % 1000 * 1000000L};
    while (nanosleep(&t, &t) != 0) {
    }
}

int main(int argc, char **argv) {
    MPI_Init(&argc, &argv);
    int rank, size;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    if (argc != 3) {
        if (rank == 0) fprintf(stderr, "usage: imbalance UNIT_MS ROUNDS\n");
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
    long unit = atol(argv[1]);
    int rounds = atoi(argv[2]);
    long long useful = 0;
    long long left_mpi = now_ns();
    for (int k = 0; k < rounds; k++) {
        work_ms((rank + 1) * unit);
        useful += now_ns() - left_mpi;
        MPI_Barrier(MPI_COMM_WORLD);
        left_mpi = now_ns();
    }
    long long *all = malloc(sizeof(long long) * (size_t)size);
    MPI_Gather(&useful, 1, MPI_LONG_LONG, all, 1, MPI_LONG_LONG, 0, MPI_COMM_WORLD);
    if (rank == 0) {
        printf("imbalance: %d ranks, %d rounds done\nuseful_ns", size, rounds);
        for (int r = 0; r < size; r++) printf(" %lld", all[r]);
        printf("\n");
    }
    free(all);
    MPI_Finalize();
    return 0;
}
