/* ROUNDS times (argv[1], default 4): rank 0 sleeps 100 ms, then every rank
 * enters MPI_Barrier, which they all leave when rank 0 arrives; then every
 * rank sleeps 30 ms outside MPI, so that each barrier's time in the time
 * slices stands apart and ends where the barrier ended. Used with one
 * rank's clock skewed (HARK_TEST_CLOCK_SKEW_NS) to check the aligned
 * timeline. */
#include <mpi.h>
#include <stdlib.h>
#include <time.h>

static void sleep_ms(long ms) {
    struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
    while (nanosleep(&ts, &ts) != 0) {
    }
}

int main(int argc, char **argv) {
    int rank, rounds = argc > 1 ? atoi(argv[1]) : 4;
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    for (int i = 0; i < rounds; i++) {
        if (rank == 0) {
            sleep_ms(100);
        }
        MPI_Barrier(MPI_COMM_WORLD);
        sleep_ms(30);
    }
    MPI_Finalize();
    return 0;
}
