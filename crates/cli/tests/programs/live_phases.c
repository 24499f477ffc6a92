/* A job in two phases of known length, for watching a run while it runs.
 *
 * usage: phases P2P_SECONDS TOTAL_SECONDS
 *
 * Until P2P_SECONDS (rank 0's clock, broadcast every 50 steps with
 * MPI_Bcast) every step is an MPI_Sendrecv around the ring; after it, an
 * MPI_Allreduce; each step also computes for about 200 us. At
 * TOTAL_SECONDS every rank stops, and rank 0 prints one line that does not
 * depend on timing. */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>

static volatile double sink;

static void compute(double seconds) {
    double end = MPI_Wtime() + seconds, x = 0;
    while (MPI_Wtime() < end)
        for (int i = 0; i < 100; i++) x += i * 0.5;
    sink = x;
}

int main(int argc, char **argv) {
    MPI_Init(&argc, &argv);
    double p2p = argc > 1 ? atof(argv[1]) : 2, total = argc > 2 ? atof(argv[2]) : 4;
    int rank, size;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    int out[1000] = {0}, in[1000];
    double t0 = MPI_Wtime();
    for (;;) {
        double t = MPI_Wtime() - t0;
        MPI_Bcast(&t, 1, MPI_DOUBLE, 0, MPI_COMM_WORLD);
        if (t >= total) break;
        for (int s = 0; s < 50; s++) {
            if (t < p2p) {
                MPI_Sendrecv(out, 1000, MPI_INT, (rank + 1) % size, 0, in, 1000, MPI_INT,
                             (rank + size - 1) % size, 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
            } else {
                double v = rank, sum;
                MPI_Allreduce(&v, &sum, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
            }
            compute(200e-6 * (1 + rank % 2));
        }
    }
    if (rank == 0) printf("phases: %d ranks done\n", size);
    MPI_Finalize();
    return 0;
}
