/* MPI_Pcontrol and the user API's pause share one state. Run on 2 ranks.
 * Paused, calls are not recorded, but communicators made meanwhile are
 * still known when recording resumes, and collectives still count in the
 * per-communicator sequence numbers (rank 0 alone pauses around one). */
#include <mpi.h>
#include "hark.h"

int main(int argc, char **argv) {
  int rank, flag;
  char buf[16] = {0};
  MPI_Comm dup, solo;
  MPI_Init(&argc, &argv);
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  int peer = 1 - rank;
  MPI_Barrier(MPI_COMM_WORLD);                       /* recorded */
  MPI_Pcontrol(0);
  MPI_Barrier(MPI_COMM_WORLD);                       /* paused */
  MPI_Comm_dup(MPI_COMM_WORLD, &dup);                /* paused, dup still known */
  MPI_Sendrecv_replace(buf, 8, MPI_BYTE, peer, 1, peer, 1, dup, MPI_STATUS_IGNORE);
  MPI_Pcontrol(1);
  MPI_Sendrecv_replace(buf, 16, MPI_BYTE, peer, 2, peer, 2, dup, MPI_STATUS_IGNORE);
  HARK_PAUSE();                                      /* the user API pauses MPI too */
  MPI_Barrier(MPI_COMM_WORLD);
  MPI_Iprobe(MPI_ANY_SOURCE, 9, MPI_COMM_WORLD, &flag, MPI_STATUS_IGNORE);
  MPI_Comm_split(MPI_COMM_WORLD, rank, 0, &solo);
  HARK_RESUME();
  MPI_Barrier(solo);                                 /* recorded, on the split */
  MPI_Pcontrol(0);
  HARK_RESUME();                                     /* and lifts MPI_Pcontrol(0) */
  MPI_Barrier(MPI_COMM_WORLD);                       /* recorded */
  if (rank == 0) MPI_Pcontrol(0);                    /* ranks pause differently: */
  MPI_Barrier(MPI_COMM_WORLD);                       /* only rank 1 records it */
  if (rank == 0) MPI_Pcontrol(1);
  MPI_Barrier(MPI_COMM_WORLD);                       /* same sequence number on both */
  MPI_Comm_free(&solo);
  MPI_Comm_free(&dup);
  MPI_Finalize();
  return 0;
}
