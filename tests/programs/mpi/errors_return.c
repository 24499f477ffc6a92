/* Calls MPI rejects, with MPI_ERRORS_RETURN: the probe must record them and
 * never turn them into an abort (it must not hand a rejected handle back to
 * MPI). Run on 2 ranks. */
#include <mpi.h>
#include <stdio.h>

int main(int argc, char **argv) {
  int buf[4] = {0}, rc1, rc2, rc3;
  MPI_Init(&argc, &argv);
  MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
  rc1 = MPI_Send(buf, 1, MPI_INT, 99, 0, MPI_COMM_WORLD);            /* no rank 99 */
  rc2 = MPI_Send(buf, 1, MPI_DATATYPE_NULL, 0, 0, MPI_COMM_WORLD);   /* no type */
  rc3 = MPI_Bcast(buf, -1, MPI_INT, 0, MPI_COMM_WORLD);              /* bad count */
  printf("errors %d %d %d\n", rc1 != MPI_SUCCESS, rc2 != MPI_SUCCESS, rc3 != MPI_SUCCESS);
  MPI_Finalize();
  return 0;
}
