// Two threads calling MPI at MPI_THREAD_MULTIPLE, in C++. Run on 2 ranks.
// Thread t of rank 0 sends three messages of 8*(t+1) bytes with tag 100+t
// to rank 1, whose thread t receives them from MPI_ANY_SOURCE; then each
// thread does an allreduce on its own duplicate of MPI_COMM_WORLD.
#include <mpi.h>
#include <cstdio>
#include <thread>
#include <vector>

int main(int argc, char **argv) {
  int provided = 0, rank = 0;
  MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
  if (provided < MPI_THREAD_MULTIPLE) {
    std::printf("MPI_THREAD_MULTIPLE not provided (%d)\n", provided);
    MPI_Abort(MPI_COMM_WORLD, 2);
  }
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm dups[2];
  MPI_Comm_dup(MPI_COMM_WORLD, &dups[0]);
  MPI_Comm_dup(MPI_COMM_WORLD, &dups[1]);
  std::vector<std::thread> threads;
  for (int t = 0; t < 2; t++) {
    threads.emplace_back([t, rank, &dups] {
      std::vector<double> buf(2 * 4, 0.0);
      for (int i = 0; i < 3; i++) {
        if (rank == 0)
          MPI_Send(buf.data(), t + 1, MPI_DOUBLE, 1, 100 + t, MPI_COMM_WORLD);
        else
          MPI_Recv(buf.data(), 8, MPI_DOUBLE, MPI_ANY_SOURCE, 100 + t, MPI_COMM_WORLD,
                   MPI_STATUS_IGNORE);
      }
      double x = t, y = 0;
      MPI_Allreduce(&x, &y, 1, MPI_DOUBLE, MPI_SUM, dups[t]);
    });
  }
  for (auto &th : threads) th.join();
  MPI_Comm_free(&dups[0]);
  MPI_Comm_free(&dups[1]);
  MPI_Finalize();
  return 0;
}
