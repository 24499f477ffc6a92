/* Ranks that end badly, for the loss accounting.
 *   die segv N   every rank calls MPI_Barrier N times; then rank 1 writes
 *                through a null pointer, and rank 0 waits for it in MPI_Recv
 *   die call N   as segv, but rank 1 calls through a null function pointer
 *   die abort N  rank 0 calls MPI_Barrier on MPI_COMM_SELF N times and
 *                MPI_Abort; rank 1 calls it N + 1 times and waits in MPI_Recv
 *   die loop N   every rank calls MPI_Barrier N times, writes its pid to
 *                ready-<rank>, and goes on calling it every millisecond
 *                until killed */
#include <mpi.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

int main(int argc, char **argv) {
    MPI_Init(&argc, &argv);
    int rank, x = 0;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    const char *mode = argc > 1 ? argv[1] : "";
    int n = argc > 2 ? atoi(argv[2]) : 50;
    if (strcmp(mode, "segv") == 0) {
        for (int i = 0; i < n; i++) MPI_Barrier(MPI_COMM_WORLD);
        if (rank == 1) *(volatile int *)0 = 1;
        MPI_Recv(&x, 1, MPI_INT, 1, 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    } else if (strcmp(mode, "call") == 0) {
        for (int i = 0; i < n; i++) MPI_Barrier(MPI_COMM_WORLD);
        void (*volatile nowhere)(void) = 0;
        if (rank == 1) nowhere();
        MPI_Recv(&x, 1, MPI_INT, 1, 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    } else if (strcmp(mode, "abort") == 0) {
        if (rank == 0) {
            for (int i = 0; i < n; i++) MPI_Barrier(MPI_COMM_SELF);
            sleep(1); /* rank 1 is waiting by now */
            MPI_Abort(MPI_COMM_WORLD, 3);
        }
        for (int i = 0; i < n + 1; i++) MPI_Barrier(MPI_COMM_SELF);
        MPI_Recv(&x, 1, MPI_INT, 0, 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    } else if (strcmp(mode, "loop") == 0) {
        for (int i = 0;; i++) {
            MPI_Barrier(MPI_COMM_WORLD);
            if (i + 1 == n) {
                char name[32], tmp[40];
                snprintf(name, sizeof name, "ready-%d", rank);
                snprintf(tmp, sizeof tmp, "%s.tmp", name);
                FILE *f = fopen(tmp, "w");
                fprintf(f, "%d\n", (int)getpid());
                fclose(f);
                rename(tmp, name);
            }
            usleep(1000);
        }
    }
    MPI_Finalize();
    return 0;
}
