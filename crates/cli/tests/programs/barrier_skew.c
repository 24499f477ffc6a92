/* Rank 0 sleeps 200 ms, then every rank enters MPI_Barrier: every rank
 * leaves it at the same instant, after rank 0 arrives. Then every rank
 * sleeps 50 ms outside MPI, so that the barrier's time in the time slices
 * ends where the barrier ended. Used with one rank's clock skewed
 * (HARK_TEST_CLOCK_SKEW_NS) to check the aligned timeline. */
#include <mpi.h>
#include <time.h>

static void sleep_ms(long ms) {
    struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
    while (nanosleep(&ts, &ts) != 0) {
    }
}

int main(int argc, char **argv) {
    int rank;
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    if (rank == 0) {
        sleep_ms(200);
    }
    MPI_Barrier(MPI_COMM_WORLD);
    sleep_ms(50);
    MPI_Finalize();
    return 0;
}
