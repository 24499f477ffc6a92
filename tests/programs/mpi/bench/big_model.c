/* A program whose model is as large as asked, for timing the analysers'
 * merge (BENCHMARKS.md, "Merging over MPI (issue 9)").
 *
 * usage: big_model PATHS STEPS
 *
 * Each of STEPS steps visits PATHS region call paths (a region "outer%d"
 * holding "inner%d", PATHS distinct pairs in all, each path named by the
 * probe's user API), and in each path exchanges a message with every other
 * rank (MPI_Sendrecv to rank + k, k = 1..size-1) and runs an
 * MPI_Allreduce: the model grows with PATHS (call paths) x ranks x
 * destinations, and its time slices with STEPS. PATHS=1 gives a small
 * model. */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include "../../../../include/hark.h"

int main(int argc, char **argv) {
    MPI_Init(&argc, &argv);
    int paths = argc > 1 ? atoi(argv[1]) : 1, steps = argc > 2 ? atoi(argv[2]) : 10;
    int rank, size;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    int out[64] = {0}, in[64];
    char outer[32], inner[32];
    for (int s = 0; s < steps; s++) {
        for (int p = 0; p < paths; p++) {
            snprintf(outer, sizeof outer, "outer%d", p % 16);
            snprintf(inner, sizeof inner, "inner%d", p);
            HARK_REGION_BEGIN(outer);
            HARK_REGION_BEGIN(inner);
            for (int k = 1; k < size; k++)
                MPI_Sendrecv(out, 1 + p % 64, MPI_INT, (rank + k) % size, p, in, 64, MPI_INT,
                             (rank + size - k) % size, p, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
            double v = rank, sum;
            MPI_Allreduce(&v, &sum, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
            HARK_REGION_END(inner);
            HARK_REGION_END(outer);
        }
    }
    if (rank == 0) printf("big_model: %d paths, %d steps, %d ranks\n", paths, steps, size);
    MPI_Finalize();
    return 0;
}
