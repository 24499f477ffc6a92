/* Makes and frees many communicators, as codes that split a communicator
 * for every step do (Quantum ESPRESSO defines about 1,650 a second), with
 * waits of known length on some of them.
 *
 * usage: many_comms COMMS EVERY MS [PAIRS]
 *
 * Step i (0 <= i < COMMS) splits MPI_COMM_WORLD into one communicator of
 * every rank (the members of MPI_COMM_WORLD again), calls MPI_Barrier on it
 * and frees it. On every EVERY-th step (i % EVERY == EVERY - 1) rank
 * (i / EVERY) % size first sleeps MS milliseconds without MPI, so every
 * other rank waits about MS in that barrier. At the end rank 0 prints
 * `late R N` per rank R: the barriers it was late to.
 *
 * Then, PAIRS times (none without the argument), two communicators of
 * every rank are live at once, A made before B: rank 1 sends to rank 0 on
 * A, sleeps MS milliseconds and sends on B, while rank 0 receives on B
 * first, then on A. MPI matches within a communicator, so rank 0 waits
 * about MS for B's message with A's already there: Late Sender, in the
 * wrong order, PAIRS times. */
#define _POSIX_C_SOURCE 200809L
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

/* Sleeps `pause` without MPI, whatever signals come. */
static void sleep_for(struct timespec pause) {
    while (nanosleep(&pause, &pause) != 0) {
    }
}

int main(int argc, char **argv) {
    MPI_Init(&argc, &argv);
    int rank, size;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    if (argc != 4 && argc != 5) {
        if (rank == 0)
            fprintf(stderr, "usage: many_comms COMMS EVERY MS [PAIRS]\n");
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
    long comms = atol(argv[1]), every = atol(argv[2]), ms = atol(argv[3]);
    long pairs = argc == 5 ? atol(argv[4]) : 0;
    struct timespec pause = {ms / 1000, (ms % 1000) * 1000000L};
    for (long i = 0; i < comms; i++) {
        MPI_Comm c;
        MPI_Comm_split(MPI_COMM_WORLD, 0, rank, &c);
        if (i % every == every - 1 && (i / every) % size == rank)
            sleep_for(pause);
        MPI_Barrier(c);
        MPI_Comm_free(&c);
    }
    for (long j = 0; j < pairs && size > 1; j++) {
        MPI_Comm a, b;
        MPI_Comm_split(MPI_COMM_WORLD, 0, rank, &a);
        MPI_Comm_split(MPI_COMM_WORLD, 0, rank, &b);
        int x = (int)j, y = 0;
        if (rank == 1) {
            MPI_Request r;
            MPI_Isend(&x, 1, MPI_INT, 0, 0, a, &r);
            sleep_for(pause);
            MPI_Send(&x, 1, MPI_INT, 0, 0, b);
            MPI_Wait(&r, MPI_STATUS_IGNORE);
        } else if (rank == 0) {
            MPI_Recv(&y, 1, MPI_INT, 1, 0, b, MPI_STATUS_IGNORE);
            MPI_Recv(&y, 1, MPI_INT, 1, 0, a, MPI_STATUS_IGNORE);
        }
        MPI_Comm_free(&a);
        MPI_Comm_free(&b);
    }
    if (rank == 0) {
        for (int r = 0; r < size; r++) {
            long late = 0;
            for (long i = every - 1; i < comms; i += every)
                late += (i / every) % size == r;
            printf("late %d %ld\n", r, late);
        }
    }
    MPI_Finalize();
    return 0;
}
