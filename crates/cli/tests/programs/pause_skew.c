/* Two ranks exchange a message each way every iteration; recording is
 * paused on each rank a moment apart, as `hark ctl pause` reaches ranks:
 *   pause_skew N   rank 0 pauses before iteration 10, rank 1 before 11;
 *                  both resume before iteration 20; N iterations in all. */
#include <mpi.h>
#include <stdlib.h>

int main(int argc, char **argv) {
    MPI_Init(&argc, &argv);
    int rank, n = argc > 1 ? atoi(argv[1]) : 100;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    int peer = 1 - rank, out = rank, in = -1;
    for (int i = 0; i < n; i++) {
        if (i == 10 + rank) MPI_Pcontrol(0);
        if (i == 20) MPI_Pcontrol(1);
        MPI_Request r;
        MPI_Irecv(&in, 1, MPI_INT, peer, 7, MPI_COMM_WORLD, &r);
        MPI_Send(&out, 1, MPI_INT, peer, 7, MPI_COMM_WORLD);
        MPI_Wait(&r, MPI_STATUS_IGNORE);
    }
    MPI_Finalize();
    return 0;
}
