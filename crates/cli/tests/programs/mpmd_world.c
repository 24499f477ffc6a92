/* Two programs of an MPMD job that talk to each other through
 * MPI_COMM_WORLD (copies of this one, under two names).
 *   mpmd_world N
 * Every rank of the world sends N messages to its mirror in the other half
 * of MPI_COMM_WORLD (rank r to (r + size/2) % size) and receives as many,
 * then takes part in an Allreduce over the world. It prints the world's
 * size and the Allreduce's sum, and exits 1 if a message came from the
 * wrong rank: a virtualised world (one program's ranks only) would make
 * the mirror a rank of the same program, or no rank at all. */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>

int main(int argc, char **argv) {
    MPI_Init(&argc, &argv);
    int rank, size, appnum = -1, flag = 0, *attr;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    MPI_Comm_get_attr(MPI_COMM_WORLD, MPI_APPNUM, &attr, &flag);
    if (flag) appnum = *attr;
    int n = argc > 1 ? atoi(argv[1]) : 10;
    int peer = (rank + size / 2) % size, bad = 0;
    for (int i = 0; i < n; i++) {
        int out[2] = {rank, appnum}, in[2] = {-1, -1};
        MPI_Sendrecv(out, 2, MPI_INT, peer, 7, in, 2, MPI_INT, peer, 7, MPI_COMM_WORLD,
                     MPI_STATUS_IGNORE);
        if (in[0] != peer || in[1] == appnum) bad = 1;
    }
    int one = 1, sum = 0;
    MPI_Allreduce(&one, &sum, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
    printf("rank %d of %d (program %d): sum %d%s\n", rank, size, appnum, sum,
           bad ? ", a message from the wrong rank" : "");
    MPI_Finalize();
    return bad;
}
