/* MPI_Comm_spawn: one parent spawns two children of the same program; over
 * the intercommunicator the parent sends each child 8 bytes and each child
 * replies with 16; all disconnect. Prints "parent done" / "child N done". */
#include <mpi.h>
#include <stdio.h>
#include <string.h>

int main(int argc, char **argv) {
  MPI_Comm parent, inter;
  char buf[16] = {0};
  int rank, errs[2], i;
  MPI_Init(&argc, &argv);
  MPI_Comm_get_parent(&parent);
  if (parent == MPI_COMM_NULL) {
    MPI_Comm_spawn(argv[0], MPI_ARGV_NULL, 2, MPI_INFO_NULL, 0, MPI_COMM_WORLD, &inter, errs);
    for (i = 0; i < 2; i++) MPI_Send(buf, 8, MPI_BYTE, i, 5, inter);
    for (i = 0; i < 2; i++) MPI_Recv(buf, 16, MPI_BYTE, i, 6, inter, MPI_STATUS_IGNORE);
    MPI_Comm_disconnect(&inter);
    printf("parent done\n");
  } else {
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Recv(buf, 8, MPI_BYTE, 0, 5, parent, MPI_STATUS_IGNORE);
    MPI_Send(buf, 16, MPI_BYTE, 0, 6, parent);
    MPI_Comm_disconnect(&parent);
    printf("child %d done\n", rank);
  }
  MPI_Finalize();
  return 0;
}
