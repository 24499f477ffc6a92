/* Per-call cost of MPI calls, for the probe's overhead benchmark
 * (crates/probe/benches/mpi_overhead.rs). Run on 2 ranks:
 *   overhead iprobe|test|pingpong N REPS [PAUSE]
 * Rank 0 prints one line per repetition: nanoseconds per call (iprobe, test)
 * or per round trip (pingpong). With PAUSE, every rank then sleeps PAUSE
 * seconds before MPI_Finalize: under Hark its stream stays open and idle
 * (scripts/bench_analysers.py, PAUSE). */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

int main(int argc, char **argv) {
  int rank, size, peer, i, r, flag;
  long n, reps;
  char buf[8] = {0}, sbuf[8] = {0};
  MPI_Request req;
  MPI_Init(&argc, &argv);
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  peer = (rank + 1) % size;
  if (argc < 4) {
    if (rank == 0) fprintf(stderr, "usage: overhead iprobe|test|pingpong N REPS\n");
    MPI_Abort(MPI_COMM_WORLD, 2);
  }
  n = atol(argv[2]);
  reps = atol(argv[3]);
  for (r = 0; r < reps + 1; r++) { /* the first repetition warms up */
    double t0, t1;
    MPI_Barrier(MPI_COMM_WORLD);
    if (strcmp(argv[1], "iprobe") == 0) {
      t0 = MPI_Wtime();
      for (i = 0; i < n; i++) MPI_Iprobe(MPI_ANY_SOURCE, 1, MPI_COMM_WORLD, &flag, MPI_STATUS_IGNORE);
      t1 = MPI_Wtime();
    } else if (strcmp(argv[1], "test") == 0) {
      /* A receive nothing matches until the end. */
      MPI_Irecv(buf, 8, MPI_BYTE, peer, 2, MPI_COMM_WORLD, &req);
      t0 = MPI_Wtime();
      for (i = 0; i < n; i++) MPI_Test(&req, &flag, MPI_STATUS_IGNORE);
      t1 = MPI_Wtime();
      MPI_Barrier(MPI_COMM_WORLD);
      {
        MPI_Request sreq;
        MPI_Isend(sbuf, 8, MPI_BYTE, (rank + size - 1) % size, 2, MPI_COMM_WORLD, &sreq);
        MPI_Wait(&req, MPI_STATUS_IGNORE);
        MPI_Wait(&sreq, MPI_STATUS_IGNORE);
      }
    } else {
      t0 = MPI_Wtime();
      for (i = 0; i < n; i++) {
        if (rank == 0) {
          MPI_Send(buf, 8, MPI_BYTE, 1, 3, MPI_COMM_WORLD);
          MPI_Recv(buf, 8, MPI_BYTE, 1, 3, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        } else {
          MPI_Recv(buf, 8, MPI_BYTE, 0, 3, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
          MPI_Send(buf, 8, MPI_BYTE, 0, 3, MPI_COMM_WORLD);
        }
      }
      t1 = MPI_Wtime();
    }
    if (rank == 0 && r > 0) printf("%.2f\n", (t1 - t0) * 1e9 / n);
  }
  if (argc > 4) {
    double pause = atof(argv[4]);
    struct timespec ts = {(time_t)pause, (long)((pause - (time_t)pause) * 1e9)};
    while (pause > 0 && nanosleep(&ts, &ts) != 0) {
    }
  }
  MPI_Finalize();
  return 0;
}
