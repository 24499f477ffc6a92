/* Synthetic MPI flood for the server benchmarks (BENCHMARKS.md, ## Server): each
 * rank exchanges small messages with its ring neighbours and reduces, as fast as
 * it can, for N iterations. Build: mpicc -O2 -o mpi_flood mpi_flood.c */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
int main(int argc, char **argv) {
    MPI_Init(&argc, &argv);
    int rank, size;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    long n = argc > 1 ? atol(argv[1]) : 100000;
    int next = (rank + 1) % size, prev = (rank + size - 1) % size;
    double out[8] = {0}, in[8], sum;
    double t0 = MPI_Wtime();
    for (long i = 0; i < n; i++) {
        MPI_Request r[2];
        MPI_Irecv(in, 8, MPI_DOUBLE, prev, 0, MPI_COMM_WORLD, &r[0]);
        MPI_Isend(out, 8, MPI_DOUBLE, next, 0, MPI_COMM_WORLD, &r[1]);
        MPI_Waitall(2, r, MPI_STATUSES_IGNORE);
        if (i % 16 == 0) {
            double x = i;
            MPI_Allreduce(&x, &sum, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
        }
    }
    double t = MPI_Wtime() - t0;
    if (rank == 0) printf("%ld iterations in %.2f s\n", n, t);
    MPI_Finalize();
    return 0;
}
