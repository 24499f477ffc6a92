/* Two MPI_Send call sites on different lines, each waiting a known time.
 *
 * Rank 0 sends a 4 MiB message (too big to go eagerly, so the send waits
 * for its receive) from SEND_A, then from SEND_B, REPS times each; rank 1
 * sleeps A_MS before each receive of the first and B_MS before each of
 * the second: Late Receiver at SEND_A for A_MS per call, at SEND_B for
 * B_MS. The test reads the lines from the markers in this file. */
#define _POSIX_C_SOURCE 200809L
#include <mpi.h>
#include <stdlib.h>
#include <time.h>

enum { BIG = 4 << 20, REPS = 3, A_MS = 100, B_MS = 250 };

static void sleep_ms(long ms) {
    struct timespec t = {ms / 1000, (ms % 1000) * 1000000L};
    nanosleep(&t, NULL);
}

/* Kept out of line so that each send is a call of its own. */
__attribute__((noinline)) static void send_a(char *buf) {
    MPI_Send(buf, BIG, MPI_CHAR, 1, 1, MPI_COMM_WORLD); /* SEND_A */
}

__attribute__((noinline)) static void send_b(char *buf) {
    MPI_Send(buf, BIG, MPI_CHAR, 1, 2, MPI_COMM_WORLD); /* SEND_B */
}

int main(int argc, char **argv) {
    int rank;
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    char *buf = calloc(BIG, 1);
    for (int k = 0; k < REPS; k++) {
        if (rank == 0) {
            send_a(buf);
            send_b(buf);
        } else if (rank == 1) {
            sleep_ms(A_MS);
            MPI_Recv(buf, BIG, MPI_CHAR, 0, 1, MPI_COMM_WORLD, MPI_STATUS_IGNORE); /* RECV_A */
            sleep_ms(B_MS);
            MPI_Recv(buf, BIG, MPI_CHAR, 0, 2, MPI_COMM_WORLD, MPI_STATUS_IGNORE); /* RECV_B */
        }
        MPI_Barrier(MPI_COMM_WORLD);
    }
    free(buf);
    MPI_Finalize();
    return 0;
}
