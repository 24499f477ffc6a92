/* Known MPI calls with known bytes, for crates/probe/tests/mpi_*.rs.
 * Run with 4 ranks. Every call here is listed, with its expected record,
 * in crates/probe/tests/mpi_c_programs_are_recorded_exactly.rs. */
#include <mpi.h>
#include <stdio.h>
#include <string.h>

int main(int argc, char **argv) {
  int rank, size, i;
  double d[64];
  int ints[64];
  MPI_Status st;
  MPI_Request rq[8];
  memset(d, 0, sizeof d);
  memset(ints, 0, sizeof ints);

  MPI_Init(&argc, &argv);
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);

  /* Blocking ring: 10 doubles to the right, tag 7. */
  if (rank % 2 == 0) {
    MPI_Send(d, 10, MPI_DOUBLE, (rank + 1) % size, 7, MPI_COMM_WORLD);
    MPI_Recv(d, 10, MPI_DOUBLE, (rank + size - 1) % size, 7, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
  } else {
    MPI_Recv(d, 10, MPI_DOUBLE, (rank + size - 1) % size, 7, MPI_COMM_WORLD, &st);
    MPI_Send(d, 10, MPI_DOUBLE, (rank + 1) % size, 7, MPI_COMM_WORLD);
  }

  /* Short receive from ANY_SOURCE/ANY_TAG: rank 1 sends 3 ints (tag 5) to 0,
   * which posts room for 64. */
  if (rank == 1) MPI_Send(ints, 3, MPI_INT, 0, 5, MPI_COMM_WORLD);
  if (rank == 0) MPI_Recv(ints, 64, MPI_INT, MPI_ANY_SOURCE, MPI_ANY_TAG, MPI_COMM_WORLD, MPI_STATUS_IGNORE);

  /* Everyone but 0 sends 4 ints (tag = rank) to 0, which receives them
   * with Irecv(ANY_SOURCE, ANY_TAG) + Waitany. Rank i sends only when 0 says
   * go (an empty message, tag 99), so message i matches receive i. */
  if (rank == 0) {
    for (i = 0; i < size - 1; i++)
      MPI_Irecv(ints + 4 * i, 4, MPI_INT, MPI_ANY_SOURCE, MPI_ANY_TAG, MPI_COMM_WORLD, &rq[i]);
    for (i = 0; i < size - 1; i++) {
      int idx;
      MPI_Send(NULL, 0, MPI_BYTE, i + 1, 99, MPI_COMM_WORLD);
      MPI_Waitany(size - 1, rq, &idx, MPI_STATUS_IGNORE);
    }
  } else {
    MPI_Recv(NULL, 0, MPI_BYTE, 0, 99, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    MPI_Isend(ints, 4, MPI_INT, 0, rank, MPI_COMM_WORLD, &rq[0]);
    MPI_Wait(&rq[0], &st);
  }

  /* Testsome: rank 0 sends 2 doubles (tag 9) to each other rank; they
   * receive with Irecv + Testsome until done. */
  if (rank == 0) {
    for (i = 1; i < size; i++) MPI_Isend(d, 2, MPI_DOUBLE, i, 9, MPI_COMM_WORLD, &rq[i - 1]);
    MPI_Waitall(size - 1, rq, MPI_STATUSES_IGNORE);
  } else {
    int done = 0, outcount, idx[1];
    MPI_Irecv(d, 2, MPI_DOUBLE, MPI_ANY_SOURCE, 9, MPI_COMM_WORLD, &rq[0]);
    while (!done) {
      MPI_Testsome(1, rq, &outcount, idx, MPI_STATUSES_IGNORE);
      if (outcount > 0) done = 1;
    }
  }

  /* Persistent: two rounds of 8 bytes each way between pairs (0,1), (2,3). */
  {
    int partner = rank ^ 1, round;
    char sb[8], rb[8];
    MPI_Send_init(sb, 8, MPI_BYTE, partner, 3, MPI_COMM_WORLD, &rq[0]);
    MPI_Recv_init(rb, 8, MPI_BYTE, partner, 3, MPI_COMM_WORLD, &rq[1]);
    for (round = 0; round < 2; round++) {
      MPI_Startall(2, rq);
      MPI_Waitall(2, rq, MPI_STATUSES_IGNORE);
    }
    MPI_Request_free(&rq[0]);
    MPI_Request_free(&rq[1]);
  }

  /* Sendrecv with a derived type (vector of 3 blocks of 2 ints = 24 bytes)
   * and a send to MPI_PROC_NULL, and a zero-count send. */
  {
    MPI_Datatype vec;
    MPI_Type_vector(3, 2, 4, MPI_INT, &vec);
    MPI_Type_commit(&vec);
    MPI_Sendrecv(ints, 1, vec, (rank + 1) % size, 11, ints + 32, 6, MPI_INT,
                 (rank + size - 1) % size, 11, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    MPI_Type_free(&vec);
    MPI_Send(ints, 5, MPI_INT, MPI_PROC_NULL, 1, MPI_COMM_WORLD);
    MPI_Send(ints, 0, MPI_INT, (rank + 1) % size, 2, MPI_COMM_WORLD);
    MPI_Recv(ints, 0, MPI_INT, (rank + size - 1) % size, 2, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
  }

  /* Probe, then receive what was probed. */
  if (rank == 2) MPI_Send(d, 6, MPI_DOUBLE, 3, 13, MPI_COMM_WORLD);
  if (rank == 3) {
    MPI_Probe(MPI_ANY_SOURCE, 13, MPI_COMM_WORLD, &st);
    MPI_Recv(d, 6, MPI_DOUBLE, st.MPI_SOURCE, 13, MPI_COMM_WORLD, &st);
  }

  /* Collectives on world. */
  MPI_Barrier(MPI_COMM_WORLD);
  MPI_Bcast(d, 4, MPI_DOUBLE, 1, MPI_COMM_WORLD);
  MPI_Allreduce(MPI_IN_PLACE, d, 3, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
  MPI_Reduce(ints, ints + 8, 2, MPI_INT, MPI_MAX, 0, MPI_COMM_WORLD);
  MPI_Gather(ints, 1, MPI_INT, ints + 16, 1, MPI_INT, 2, MPI_COMM_WORLD);
  MPI_Alltoall(ints, 2, MPI_INT, ints + 16, 2, MPI_INT, MPI_COMM_WORLD);
  {
    int counts[4] = {1, 2, 3, 4}, displs[4] = {0, 1, 3, 6};
    MPI_Allgatherv(ints, rank + 1, MPI_INT, ints + 16, counts, displs, MPI_INT, MPI_COMM_WORLD);
  }

  /* Split into odd/even (world ranks {0,2} and {1,3}), reversed order by key;
   * collectives on it; a dup of it; free both. */
  {
    MPI_Comm half, dup;
    MPI_Comm_split(MPI_COMM_WORLD, rank % 2, -rank, &half);
    MPI_Bcast(d, 2, MPI_DOUBLE, 0, half); /* root = highest world rank of the half */
    MPI_Comm_dup(half, &dup);
    MPI_Allreduce(d, d + 8, 1, MPI_DOUBLE, MPI_SUM, dup);
    {
      int r;
      MPI_Comm_rank(dup, &r);
      MPI_Send(d, 1, MPI_DOUBLE, 1 - r, 21, dup); /* to the other member */
    }
    MPI_Recv(d, 1, MPI_DOUBLE, MPI_ANY_SOURCE, 21, dup, MPI_STATUS_IGNORE);
    MPI_Comm_free(&dup);
    MPI_Comm_free(&half);
  }

  MPI_Finalize();
  return 0;
}
