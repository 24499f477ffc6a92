/* What a program sees of MPI_COMM_WORLD, printed as one line per rank:
 * size, rank, MPI_APPNUM, whether every member shares this program's
 * MPI_APPNUM, and checks of the calls a virtualised world must answer as a
 * real one does. Run alone or MPMD beside other programs (world_view_f.F90);
 * under HARK_VIRTUALISE=1 each program must see only itself. */
#include <mpi.h>
#include <stdio.h>
#include <string.h>

int main(int argc, char **argv) {
    MPI_Init(&argc, &argv);
    int rank, size, flag, *attr, appnum = 0, usize = -1;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    MPI_Comm_get_attr(MPI_COMM_WORLD, MPI_APPNUM, &attr, &flag);
    if (flag) appnum = *attr;
    MPI_Comm_get_attr(MPI_COMM_WORLD, MPI_UNIVERSE_SIZE, &attr, &flag);
    if (flag) usize = *attr;

    /* Every member of this world is of this program? */
    int lo, hi;
    MPI_Allreduce(&appnum, &lo, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
    MPI_Allreduce(&appnum, &hi, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
    int alone = lo == hi;

    /* Comparisons, a duplicate, the world's name. */
    int same, dup_cmp;
    MPI_Comm dup;
    MPI_Comm_compare(MPI_COMM_WORLD, MPI_COMM_WORLD, &same);
    MPI_Comm_dup(MPI_COMM_WORLD, &dup);
    MPI_Comm_compare(MPI_COMM_WORLD, dup, &dup_cmp);
    char name[MPI_MAX_OBJECT_NAME];
    int len;
    MPI_Comm_get_name(MPI_COMM_WORLD, name, &len);

    /* A ring over the world: each rank receives its left neighbour's id. */
    int right = (rank + 1) % size, left = (rank + size - 1) % size;
    int mine = appnum * 100 + rank, got = -1;
    MPI_Sendrecv(&mine, 1, MPI_INT, right, 7, &got, 1, MPI_INT, left, 7, MPI_COMM_WORLD,
                 MPI_STATUS_IGNORE);
    int ring = got == appnum * 100 + left;

    /* An intercommunicator between pairs, with the world as peer. */
    int remote = -1;
    if (size % 2 == 0) {
        MPI_Comm inter;
        MPI_Intercomm_create(MPI_COMM_SELF, 0, MPI_COMM_WORLD, rank ^ 1, 9, &inter);
        int other = -1;
        MPI_Sendrecv(&mine, 1, MPI_INT, 0, 3, &other, 1, MPI_INT, 0, 3, inter, MPI_STATUS_IGNORE);
        remote = other;
        MPI_Comm_free(&inter);
    }

    /* An error handler set on the world: a rank past its size is an error. */
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    int rc = MPI_Send(&mine, 1, MPI_INT, size, 1, MPI_COMM_WORLD);
    MPI_Errhandler eh;
    MPI_Comm_get_errhandler(MPI_COMM_WORLD, &eh);
    int returns = rc != MPI_SUCCESS && eh == MPI_ERRORS_RETURN;
    MPI_Errhandler_free(&eh);
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_ARE_FATAL);

    /* Collectives on the world. Programs alone in their world each run a
     * different number of different collectives: in a shared world that
     * would mismatch. */
    int rounds = alone ? 20 + 30 * appnum : 10, ok = 1;
    for (int i = 0; i < rounds; i++) {
        int v = i + rank, sum = 0;
        if (!alone || appnum % 2 == 0) {
            MPI_Allreduce(&v, &sum, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
            ok &= sum == i * size + size * (size - 1) / 2;
        } else {
            int all[64];
            MPI_Bcast(&v, 1, MPI_INT, 0, MPI_COMM_WORLD);
            ok &= v == i;
            MPI_Allgather(&rank, 1, MPI_INT, all, 1, MPI_INT, MPI_COMM_WORLD);
            for (int r = 0; r < size && r < 64; r++) ok &= all[r] == r;
            MPI_Barrier(MPI_COMM_WORLD);
        }
    }
    MPI_Comm_free(&dup);
    printf("c appnum=%d size=%d rank=%d alone=%d universe=%d same=%d dup=%d name=%s ring=%d "
           "remote=%d errors_return=%d collectives=%d\n",
           appnum, size, rank, alone, usize, same == MPI_IDENT,
           dup_cmp == MPI_CONGRUENT, name, ring, remote, returns, ok);
    fflush(stdout);
    MPI_Finalize();
    return 0;
}
