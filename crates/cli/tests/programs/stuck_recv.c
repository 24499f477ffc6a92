/* Barriers until a file named by argv[1] exists (checked by rank 0 and
 * broadcast), pausing 2 ms between them; then, with argv[2] = "hang",
 * rank 0 waits forever in MPI_Recv for a message nobody sends, the others
 * in a barrier. Rank 0 writes the number of loop barriers to argv[1].count
 * first. Used by the service's control tests. Every rank ends itself after
 * ten minutes (SIGALRM), so that a test that fails before it stops or kills
 * the job leaves nothing spinning behind it. */
#include <mpi.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

int main(int argc, char **argv) {
    alarm(600);
    MPI_Init(&argc, &argv);
    int rank;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    int stop = 0;
    long n = 0;
    while (!stop) {
        MPI_Barrier(MPI_COMM_WORLD);
        n++;
        if (rank == 0)
            stop = access(argv[1], F_OK) == 0;
        MPI_Bcast(&stop, 1, MPI_INT, 0, MPI_COMM_WORLD);
        usleep(2000);
    }
    if (rank == 0) {
        /* How many barriers each rank completed, for the test to compare. */
        char name[4096];
        snprintf(name, sizeof name, "%s.count", argv[1]);
        FILE *f = fopen(name, "w");
        if (f) {
            fprintf(f, "%ld\n", n);
            fclose(f);
        }
    }
    if (argc > 2 && strcmp(argv[2], "hang") == 0) {
        if (rank == 0) {
            int x;
            MPI_Recv(&x, 1, MPI_INT, 1, 99, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        } else {
            MPI_Barrier(MPI_COMM_WORLD);
        }
    }
    if (rank == 0)
        printf("%ld barriers\n", n);
    MPI_Finalize();
    return 0;
}
