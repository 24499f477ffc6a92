/* Makes and frees many communicators, as codes that split a communicator
 * for every step do (Quantum ESPRESSO defines about 1,650 a second), with
 * waits of known length on some of them.
 *
 * usage: many_comms COMMS EVERY MS
 *
 * Step i (0 <= i < COMMS) splits MPI_COMM_WORLD into one communicator of
 * every rank (the members of MPI_COMM_WORLD again), calls MPI_Barrier on it
 * and frees it. On every EVERY-th step (i % EVERY == EVERY - 1) rank
 * (i / EVERY) % size first sleeps MS milliseconds without MPI, so every
 * other rank waits about MS in that barrier. At the end rank 0 prints
 * `late R N` per rank R: the barriers it was late to. */
#define _POSIX_C_SOURCE 200809L
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

int main(int argc, char **argv) {
    MPI_Init(&argc, &argv);
    int rank, size;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    if (argc != 4) {
        if (rank == 0)
            fprintf(stderr, "usage: many_comms COMMS EVERY MS\n");
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
    long comms = atol(argv[1]), every = atol(argv[2]), ms = atol(argv[3]);
    for (long i = 0; i < comms; i++) {
        MPI_Comm c;
        MPI_Comm_split(MPI_COMM_WORLD, 0, rank, &c);
        if (i % every == every - 1 && (i / every) % size == rank) {
            struct timespec t = {ms / 1000, (ms % 1000) * 1000000L};
            while (nanosleep(&t, &t) != 0) {
            }
        }
        MPI_Barrier(c);
        MPI_Comm_free(&c);
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
