/* Where each rank runs and what its clock reads, for tests on emulated nodes.
 *
 * usage: where_and_when
 *
 * Every rank reads CLOCK_MONOTONIC, sums the ranks with MPI_Allreduce (so
 * the job communicates across its nodes), and prints one line:
 *   rank R of S on HOST monotonic NS sum SUM
 * Lines of different ranks may interleave in any order. */
#include <mpi.h>
#include <stdio.h>
#include <time.h>
#include <unistd.h>

int main(int argc, char **argv) {
    MPI_Init(&argc, &argv);
    int rank, size;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    char host[256] = "";
    gethostname(host, sizeof host - 1);
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    long long ns = (long long)ts.tv_sec * 1000000000LL + ts.tv_nsec;
    int sum = 0;
    MPI_Allreduce(&rank, &sum, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
    printf("rank %d of %d on %s monotonic %lld sum %d\n", rank, size, host, ns, sum);
    fflush(stdout);
    MPI_Finalize();
    return 0;
}
