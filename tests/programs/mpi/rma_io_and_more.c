/* The rest of the families on 4 ranks: non-blocking collectives, Idup,
 * matched probes, cancel, Iprobe, Alltoallw, a cartesian topology with a
 * neighbourhood collective, an inter-communicator, one-sided operations and
 * MPI-IO. Expected records: rma_io_and_more.expected. */
#include <mpi.h>
#include <stdio.h>
#include <string.h>
#include <stdlib.h>

int main(int argc, char **argv) {
  int rank, size, i, flag = 0;
  int ints[64];
  double d[64];
  MPI_Request rq[4];
  MPI_Status st;
  memset(ints, 0, sizeof ints);
  memset(d, 0, sizeof d);
  MPI_Init(&argc, &argv);
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);

  /* Non-blocking collectives and Idup. */
  {
    MPI_Comm dup;
    MPI_Iallreduce(d, d + 8, 2, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD, &rq[0]);
    MPI_Ibcast(ints, 3, MPI_INT, 2, MPI_COMM_WORLD, &rq[1]);
    MPI_Comm_idup(MPI_COMM_WORLD, &dup, &rq[2]);
    MPI_Waitall(3, rq, MPI_STATUSES_IGNORE);
    MPI_Barrier(dup);
    MPI_Comm_free(&dup);
  }

  /* Matched probe: 1 sends 5 ints (tag 3) to 0, which Mprobes and Mrecvs. */
  if (rank == 1) MPI_Send(ints, 5, MPI_INT, 0, 3, MPI_COMM_WORLD);
  if (rank == 0) {
    MPI_Message msg;
    MPI_Mprobe(MPI_ANY_SOURCE, 3, MPI_COMM_WORLD, &msg, &st);
    MPI_Mrecv(ints, 64, MPI_INT, &msg, MPI_STATUS_IGNORE);
  }

  /* Iprobe until found: 3 sends 2 doubles (tag 4) to 2. */
  if (rank == 3) MPI_Send(d, 2, MPI_DOUBLE, 2, 4, MPI_COMM_WORLD);
  if (rank == 2) {
    while (!flag) MPI_Iprobe(3, 4, MPI_COMM_WORLD, &flag, MPI_STATUS_IGNORE);
    MPI_Recv(d, 2, MPI_DOUBLE, 3, 4, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
  }

  /* A receive nobody sends to, cancelled. */
  MPI_Irecv(ints, 1, MPI_INT, MPI_ANY_SOURCE, 777, MPI_COMM_WORLD, &rq[0]);
  MPI_Cancel(&rq[0]);
  MPI_Wait(&rq[0], &st);

  /* Alltoallw: one int to each rank, as MPI_INT. */
  {
    int counts[4] = {1, 1, 1, 1}, displs[4] = {0, 4, 8, 12};
    MPI_Datatype types[4] = {MPI_INT, MPI_INT, MPI_INT, MPI_INT};
    MPI_Alltoallw(ints, counts, displs, types, ints + 32, counts, displs, types, MPI_COMM_WORLD);
  }

  /* A periodic ring as a 1-d cartesian topology; neighbour alltoall of 2
   * doubles with each of the 2 neighbours. */
  {
    MPI_Comm ring;
    int dims[1] = {4}, periods[1] = {1};
    MPI_Cart_create(MPI_COMM_WORLD, 1, dims, periods, 0, &ring);
    MPI_Neighbor_alltoall(d, 2, MPI_DOUBLE, d + 16, 2, MPI_DOUBLE, ring);
    MPI_Comm_free(&ring);
  }

  /* An inter-communicator between {0,1} and {2,3}; a broadcast of 3 ints
   * from world rank 0 to the remote group. */
  {
    MPI_Comm half, inter;
    int low = rank < 2;
    MPI_Comm_split(MPI_COMM_WORLD, low, rank, &half);
    MPI_Intercomm_create(half, 0, MPI_COMM_WORLD, low ? 2 : 0, 5, &inter);
    if (low)
      MPI_Bcast(ints, 3, MPI_INT, rank == 0 ? MPI_ROOT : MPI_PROC_NULL, inter);
    else
      MPI_Bcast(ints, 3, MPI_INT, 0, inter);
    MPI_Comm_free(&inter);
    MPI_Comm_free(&half);
  }

  /* One-sided: a window of 16 doubles; each rank puts 2 doubles into its
   * right neighbour and gets 1 from its left, between fences; then, in a
   * passive-target epoch on rank 0's window: an accumulate of 3 doubles;
   * an atomic read of 2 doubles as ARMCI-style libraries do it
   * (`Get_accumulate` with `MPI_NO_OP`: the origin is ignored, the result
   * counts); a fetch-and-add of one double and a request-based
   * fetch-and-add of one double. (No compare-and-swap: Open MPI 4.1's
   * emulated one crashes in its shared-memory transport when single-copy
   * transfers are on.) */
  {
    MPI_Win win;
    double *base;
    MPI_Win_allocate(16 * sizeof(double), sizeof(double), MPI_INFO_NULL, MPI_COMM_WORLD, &base, &win);
    MPI_Win_fence(0, win);
    MPI_Put(d, 2, MPI_DOUBLE, (rank + 1) % size, 0, 2, MPI_DOUBLE, win);
    MPI_Get(d + 4, 1, MPI_DOUBLE, (rank + size - 1) % size, 4, 1, MPI_DOUBLE, win);
    MPI_Win_fence(0, win);
    MPI_Win_lock(MPI_LOCK_SHARED, 0, 0, win);
    MPI_Accumulate(d, 3, MPI_DOUBLE, 0, 8, 3, MPI_DOUBLE, MPI_SUM, win);
    MPI_Get_accumulate(NULL, 0, MPI_DOUBLE, d + 6, 2, MPI_DOUBLE, 0, 8, 2, MPI_DOUBLE, MPI_NO_OP, win);
    MPI_Fetch_and_op(d, d + 8, MPI_DOUBLE, 0, 10, MPI_SUM, win);
    MPI_Request r;
    MPI_Rget_accumulate(d, 1, MPI_DOUBLE, d + 9, 1, MPI_DOUBLE, 0, 12, 1, MPI_DOUBLE, MPI_SUM, win, &r);
    MPI_Wait(&r, MPI_STATUS_IGNORE);
    MPI_Win_unlock(0, win);
    MPI_Win_free(&win);
  }

  /* MPI-IO: each rank writes 16 bytes at offset 16*rank, collectively reads
   * them back, reads 16 bytes at 4 before the end (a short read of 4), and
   * reads the first 16 bytes without blocking. (Open MPI 4.1's non-blocking
   * read past the end never completes, hence the blocking short read.) */
  {
    MPI_File fh;
    char path[256], data[16];
    const char *dir = getenv("HARK_TEST_DIR");
    snprintf(path, sizeof path, "%s/mpiio.dat", dir ? dir : "/tmp");
    memset(data, 'a' + rank, sizeof data);
    MPI_File_open(MPI_COMM_WORLD, path, MPI_MODE_CREATE | MPI_MODE_RDWR, MPI_INFO_NULL, &fh);
    MPI_File_write_at(fh, 16 * rank, data, 16, MPI_BYTE, MPI_STATUS_IGNORE);
    MPI_File_sync(fh);
    MPI_Barrier(MPI_COMM_WORLD);
    MPI_File_read_at_all(fh, 16 * rank, data, 16, MPI_BYTE, &st);
    MPI_File_read_at(fh, 16 * size - 4, data, 16, MPI_BYTE, MPI_STATUS_IGNORE);
    MPI_File_iread_at(fh, 0, data, 16, MPI_BYTE, &rq[0]);
    MPI_Wait(&rq[0], MPI_STATUS_IGNORE);
    MPI_File_close(&fh);
  }

  MPI_Finalize();
  return 0;
}
