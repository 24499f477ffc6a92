/* Rank 3 is killed (SIGKILL) after a first round of messages; ranks 0-2 go
 * on exchanging among themselves and finish. Run on 4 ranks. The survivors
 * leave with exit(0), not MPI_Finalize: Open MPI 4.1's finalize waits for
 * every process of the job, dead or not. */
#include <mpi.h>
#include <signal.h>
#include <stdio.h>
#include <unistd.h>

int main(int argc, char **argv) {
  int rank, i;
  double d[8] = {0};
  MPI_Comm three;
  MPI_Init(&argc, &argv);
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  /* First round: everyone sends 1 double to rank 0. */
  if (rank == 0) {
    for (i = 1; i < 4; i++) MPI_Recv(d, 1, MPI_DOUBLE, i, 1, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
  } else {
    MPI_Send(d, 1, MPI_DOUBLE, 0, 1, MPI_COMM_WORLD);
  }
  /* The survivors' communicator, made while all four are alive. */
  MPI_Comm_split(MPI_COMM_WORLD, rank == 3 ? MPI_UNDEFINED : 0, rank, &three);
  if (rank == 3) {
    int flag, k;
    /* The probe's periodic flush (HARK_FLUSH_MS) hands a thread's partial
     * buffer over at its next event: make a few, slowly, then die. */
    for (k = 0; k < 10; k++) {
      usleep(100 * 1000);
      MPI_Iprobe(MPI_ANY_SOURCE, 0, MPI_COMM_SELF, &flag, MPI_STATUS_IGNORE);
    }
    usleep(200 * 1000);
    raise(SIGKILL);
  }
  /* Second round among 0-2: 50 allreduces of 2 doubles. */
  for (i = 0; i < 50; i++) MPI_Allreduce(MPI_IN_PLACE, d, 2, MPI_DOUBLE, MPI_SUM, three);
  MPI_Comm_free(&three);
  printf("rank %d done\n", rank);
  fflush(stdout);
  /* Stay until rank 3 is gone: mpirun kills whatever is left of a job whose
   * processes exit without MPI_Finalize. */
  usleep(1500 * 1000);
  return 0;
}
