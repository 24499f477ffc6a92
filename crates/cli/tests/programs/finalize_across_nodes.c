/* MPI_Finalize after point-to-point traffic between two nodes, without
 * Hark: ranks 0 and 1 (one node) each send 20 messages of SIZE bytes
 * (default 1024), alternately to ranks 2 and 3 (the other node), which
 * answer with one message each; then every rank calls MPI_Finalize, all
 * together. MPICH 4.0 over UCX (TCP) hung in MPI_Finalize in 1 of 3 runs
 * across two emulated nodes, and in 6 of 6 with two duplicated
 * communicators and a ping-pong with rank 0 added, as Hark's probes make
 * (docs/analysers.md, "Finalizing together").
 *   finalize_across_nodes [SIZE]   run with 4 ranks, 2 per node */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>

int main(int argc, char **argv) {
    MPI_Init(&argc, &argv);
    int rank, size, n = argc > 1 ? atoi(argv[1]) : 1024;
    static char b[1 << 16];
    if (n > (int)sizeof b) n = sizeof b;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    if (size == 4) {
        if (rank < 2) {
            MPI_Request r[20];
            for (int i = 0; i < 20; i++)
                MPI_Isend(b, n, MPI_BYTE, 2 + i % 2, 7, MPI_COMM_WORLD, &r[i]);
            MPI_Waitall(20, r, MPI_STATUSES_IGNORE);
            MPI_Recv(b, 1, MPI_BYTE, 2 + rank, 9, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        } else {
            for (int i = 0; i < 20; i++)
                MPI_Recv(b, n, MPI_BYTE, i % 2, 7, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
            MPI_Send(b, 1, MPI_BYTE, rank - 2, 9, MPI_COMM_WORLD);
        }
    }
    MPI_Finalize();
    if (rank == 0) printf("finalized %d\n", size);
    return 0;
}
