/* Every MPI 4.0 family Hark wraps, on two ranks: large-count (`_c`)
 * point-to-point and collectives, partitioned communication with a late
 * sender (rank 0 sleeps before each MPI_Start of its partitioned send),
 * persistent collectives started three times, MPI_Isendrecv(_replace),
 * MPI_Comm_idup_with_info and the Sessions functions. Where the library is
 * older than MPI 4.0 (Open MPI 4.1) only the MPI-3 part runs. Prints
 * "mpi4 ok <version>" on rank 0 when every result checks out. */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#define CHECK(x)                                                         \
    do {                                                                 \
        if ((x) != MPI_SUCCESS) {                                        \
            fprintf(stderr, "mpi4_surface: %s failed at line %d\n", #x, __LINE__); \
            MPI_Abort(MPI_COMM_WORLD, 2);                                \
        }                                                                \
    } while (0)

static double buf[64], rbuf[64];

static void mpi3_part(int rank, int peer) {
    MPI_Request r[2];
    CHECK(MPI_Isend(buf, 8, MPI_DOUBLE, peer, 10, MPI_COMM_WORLD, &r[0]));
    CHECK(MPI_Irecv(rbuf, 8, MPI_DOUBLE, peer, 10, MPI_COMM_WORLD, &r[1]));
    CHECK(MPI_Waitall(2, r, MPI_STATUSES_IGNORE));
    if (rank == 0)
        CHECK(MPI_Send(buf, 4, MPI_DOUBLE, 1, 11, MPI_COMM_WORLD));
    else
        CHECK(MPI_Recv(rbuf, 4, MPI_DOUBLE, 0, 11, MPI_COMM_WORLD, MPI_STATUS_IGNORE));
    CHECK(MPI_Allreduce(buf, rbuf, 2, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD));
    CHECK(MPI_Barrier(MPI_COMM_WORLD));
}

#if MPI_VERSION >= 4
static void large_counts(int rank, int peer) {
    MPI_Request r[2];
    if (rank == 0)
        CHECK(MPI_Send_c(buf, 64, MPI_DOUBLE, 1, 1, MPI_COMM_WORLD));
    else
        CHECK(MPI_Recv_c(rbuf, 64, MPI_DOUBLE, 0, 1, MPI_COMM_WORLD, MPI_STATUS_IGNORE));
    CHECK(MPI_Isend_c(buf, 32, MPI_DOUBLE, peer, 2, MPI_COMM_WORLD, &r[0]));
    CHECK(MPI_Irecv_c(rbuf, 32, MPI_DOUBLE, peer, 2, MPI_COMM_WORLD, &r[1]));
    CHECK(MPI_Waitall(2, r, MPI_STATUSES_IGNORE));
    CHECK(MPI_Sendrecv_c(buf, 16, MPI_DOUBLE, peer, 3, rbuf, 16, MPI_DOUBLE, peer, 3,
                         MPI_COMM_WORLD, MPI_STATUS_IGNORE));
    CHECK(MPI_Allreduce_c(buf, rbuf, 8, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD));
    /* A count past 32 bits: a broadcast on MPI_COMM_SELF moves nothing, so
     * the small buffer is never read, but its bytes are 2^32 + 16. */
    CHECK(MPI_Bcast_c(buf, ((MPI_Count)1 << 32) + 16, MPI_BYTE, 0, MPI_COMM_SELF));
}

static void partitioned(int rank) {
    MPI_Request p;
    int list[1] = {3};
    if (rank == 0) {
        CHECK(MPI_Psend_init(buf, 4, 8, MPI_DOUBLE, 1, 4, MPI_COMM_WORLD, MPI_INFO_NULL, &p));
        for (int i = 0; i < 2; i++) {
            usleep(300000); /* the late sender */
            CHECK(MPI_Start(&p));
            CHECK(MPI_Pready(0, p));
            CHECK(MPI_Pready_range(1, 2, p));
            CHECK(MPI_Pready_list(1, list, p));
            CHECK(MPI_Wait(&p, MPI_STATUS_IGNORE));
        }
    } else {
        CHECK(MPI_Precv_init(rbuf, 4, 8, MPI_DOUBLE, 0, 4, MPI_COMM_WORLD, MPI_INFO_NULL, &p));
        for (int i = 0; i < 2; i++) {
            int flag = 0;
            CHECK(MPI_Start(&p));
            CHECK(MPI_Parrived(p, 0, &flag));
            CHECK(MPI_Wait(&p, MPI_STATUS_IGNORE));
        }
    }
    CHECK(MPI_Request_free(&p));
}

static void persistent_collectives(void) {
    MPI_Request r[3];
    CHECK(MPI_Allreduce_init(buf, rbuf, 4, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD, MPI_INFO_NULL, &r[0]));
    CHECK(MPI_Bcast_init(buf, 4, MPI_DOUBLE, 0, MPI_COMM_WORLD, MPI_INFO_NULL, &r[1]));
    CHECK(MPI_Barrier_init(MPI_COMM_WORLD, MPI_INFO_NULL, &r[2]));
    for (int i = 0; i < 3; i++)
        for (int k = 0; k < 3; k++) {
            CHECK(MPI_Start(&r[k]));
            CHECK(MPI_Wait(&r[k], MPI_STATUS_IGNORE));
        }
    for (int k = 0; k < 3; k++) CHECK(MPI_Request_free(&r[k]));
}

static void sendrecv_dup_sessions(int peer) {
    MPI_Request r;
    MPI_Comm dup, from_group;
    MPI_Session s;
    MPI_Group g;
    MPI_Info info;
    char name[256];
    int n = 0, len = sizeof name;
    CHECK(MPI_Isendrecv(buf, 8, MPI_DOUBLE, peer, 5, rbuf, 8, MPI_DOUBLE, peer, 5, MPI_COMM_WORLD, &r));
    CHECK(MPI_Wait(&r, MPI_STATUS_IGNORE));
    CHECK(MPI_Isendrecv_replace(buf, 8, MPI_DOUBLE, peer, 6, peer, 6, MPI_COMM_WORLD, &r));
    CHECK(MPI_Wait(&r, MPI_STATUS_IGNORE));
    CHECK(MPI_Comm_idup_with_info(MPI_COMM_WORLD, MPI_INFO_NULL, &dup, &r));
    CHECK(MPI_Wait(&r, MPI_STATUS_IGNORE));
    CHECK(MPI_Barrier(dup));
    CHECK(MPI_Comm_free(&dup));

    CHECK(MPI_Session_init(MPI_INFO_NULL, MPI_ERRORS_RETURN, &s));
    CHECK(MPI_Session_get_num_psets(s, MPI_INFO_NULL, &n));
    CHECK(MPI_Session_get_nth_pset(s, MPI_INFO_NULL, 0, &len, name));
    CHECK(MPI_Session_get_info(s, &info));
    CHECK(MPI_Info_free(&info));
    CHECK(MPI_Session_get_pset_info(s, "mpi://WORLD", &info));
    CHECK(MPI_Info_free(&info));
    CHECK(MPI_Group_from_session_pset(s, "mpi://WORLD", &g));
    CHECK(MPI_Comm_create_from_group(g, "hark.mpi4_surface", MPI_INFO_NULL, MPI_ERRORS_RETURN,
                                     &from_group));
    CHECK(MPI_Barrier(from_group));
    CHECK(MPI_Comm_free(&from_group));
    CHECK(MPI_Group_free(&g));
    CHECK(MPI_Session_finalize(&s));
}
#endif

int main(int argc, char **argv) {
    int rank, size;
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    if (size != 2) {
        if (rank == 0) fprintf(stderr, "mpi4_surface: run on 2 ranks\n");
        MPI_Abort(MPI_COMM_WORLD, 1);
    }
    for (int i = 0; i < 64; i++) buf[i] = i + rank;
    int peer = 1 - rank;
    mpi3_part(rank, peer);
#if MPI_VERSION >= 4
    large_counts(rank, peer);
    partitioned(rank);
    if (rank == 1 && rbuf[31] != 31.0) {
        fprintf(stderr, "mpi4_surface: partitioned data wrong: %g\n", rbuf[31]);
        MPI_Abort(MPI_COMM_WORLD, 3);
    }
    persistent_collectives();
    sendrecv_dup_sessions(peer);
#endif
    if (rank == 0) printf("mpi4 ok %d.%d\n", MPI_VERSION, MPI_SUBVERSION);
    MPI_Finalize();
    return 0;
}
