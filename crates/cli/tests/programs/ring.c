/* A ring with known counts, for checking Hark's numbers by construction.
 *
 * usage: ring [ROUNDS [INTS]]   (defaults 100 rounds of 1000 ints)
 *
 * The ranks of each program of the job (split by MPI_APPNUM, so an MPMD
 * launch gives each program its own ring) pass a message around: per round
 * each rank calls MPI_Isend (INTS ints to its right neighbour), MPI_Recv
 * (from its left), MPI_Wait, and MPI_Allreduce (one double). Then one
 * MPI_Barrier on MPI_COMM_WORLD. So every rank makes exactly ROUNDS calls of
 * MPI_Isend, MPI_Recv, MPI_Wait and MPI_Allreduce, sends ROUNDS * INTS * 4
 * bytes to its right neighbour, and rank 0 of each program prints one line
 * (named after its executable) that does not depend on timing. */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int main(int argc, char **argv) {
    MPI_Init(&argc, &argv);
    int rounds = argc > 1 ? atoi(argv[1]) : 100;
    int ints = argc > 2 ? atoi(argv[2]) : 1000;
    int wrank, *appnum, flag = 0;
    MPI_Comm_rank(MPI_COMM_WORLD, &wrank);
    MPI_Comm_get_attr(MPI_COMM_WORLD, MPI_APPNUM, &appnum, &flag);
    MPI_Comm comm;
    MPI_Comm_split(MPI_COMM_WORLD, flag ? *appnum : 0, wrank, &comm);
    int rank, size;
    MPI_Comm_rank(comm, &rank);
    MPI_Comm_size(comm, &size);

    int *out = malloc(sizeof(int) * ints), *in = malloc(sizeof(int) * ints);
    long long check = 0;
    double total = 0;
    for (int r = 0; r < rounds; r++) {
        for (int i = 0; i < ints; i++) out[i] = rank + r + i;
        MPI_Request req;
        MPI_Isend(out, ints, MPI_INT, (rank + 1) % size, r, comm, &req);
        MPI_Recv(in, ints, MPI_INT, (rank + size - 1) % size, r, comm, MPI_STATUS_IGNORE);
        MPI_Wait(&req, MPI_STATUS_IGNORE);
        check += in[ints - 1];
        double mine = (double)in[0], sum = 0;
        MPI_Allreduce(&mine, &sum, 1, MPI_DOUBLE, MPI_SUM, comm);
        total += sum;
    }
    MPI_Barrier(MPI_COMM_WORLD);
    if (rank == 0)
        printf("%s: %d ranks, %d rounds of %d ints, checksum %lld, total %.0f\n",
               strrchr(argv[0], '/') ? strrchr(argv[0], '/') + 1 : argv[0], size, rounds, ints,
               check, total);
    free(out);
    free(in);
    MPI_Comm_free(&comm);
    MPI_Finalize();
    return 0;
}
