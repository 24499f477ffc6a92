/* Ends with a status of its own after a clean MPI_Finalize.
 *   exit_after_finalize CODE   every rank calls MPI_Barrier 10 times and
 *                              MPI_Finalize; then rank 0 exits with CODE,
 *                              the others with 0 */
#include <mpi.h>
#include <stdlib.h>

int main(int argc, char **argv) {
    MPI_Init(&argc, &argv);
    int rank;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    for (int i = 0; i < 10; i++) MPI_Barrier(MPI_COMM_WORLD);
    MPI_Finalize();
    return rank == 0 && argc > 1 ? atoi(argv[1]) : 0;
}
