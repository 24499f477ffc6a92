/* A ring with a known number of calls per rank, for the sampling test.
 * Each iteration: even ranks MPI_Send 64 ints to the next rank, then
 * MPI_Recv 64 ints from the previous one (odd ranks the other way round),
 * one 100-byte pwrite() to /dev/null, one MPI_Bcast of rank 0's stop flag,
 * a 2 ms sleep. Phase 1 runs until the file argv[1] exists, phase 2 until
 * argv[2] exists (rank 0 looks, the flag is broadcast, so every rank runs
 * as many iterations); phase 3 runs exactly argv[3] more. Rank 0 writes
 * argv[1].ready after its first iteration, and the total to argv[1].count
 * at the end. */
#include <fcntl.h>
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

static int rank, size;
static int fd;

static void body(int *stop) {
    int out[64], in[64];
    char line[100] = {0};
    for (int i = 0; i < 64; i++)
        out[i] = rank + i;
    int next = (rank + 1) % size, prev = (rank + size - 1) % size;
    if (rank % 2 == 0) {
        MPI_Send(out, 64, MPI_INT, next, 7, MPI_COMM_WORLD);
        MPI_Recv(in, 64, MPI_INT, prev, 7, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    } else {
        MPI_Recv(in, 64, MPI_INT, prev, 7, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        MPI_Send(out, 64, MPI_INT, next, 7, MPI_COMM_WORLD);
    }
    if (pwrite(fd, line, sizeof line, 0) != sizeof line)
        MPI_Abort(MPI_COMM_WORLD, 2);
    MPI_Bcast(stop, 1, MPI_INT, 0, MPI_COMM_WORLD);
    usleep(2000);
}

int main(int argc, char **argv) {
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    fd = open("/dev/null", O_WRONLY);
    long n = 0, more = atol(argv[3]);
    for (int phase = 1; phase <= 2; phase++) {
        int stop = 0;
        while (!stop) {
            if (rank == 0)
                stop = access(argv[phase], F_OK) == 0;
            body(&stop);
            if (n++ == 0 && rank == 0) {
                char name[4096];
                snprintf(name, sizeof name, "%s.ready", argv[1]);
                fclose(fopen(name, "w"));
            }
        }
    }
    int stop = 0;
    for (long i = 0; i < more; i++, n++)
        body(&stop);
    if (rank == 0) {
        char name[4096];
        snprintf(name, sizeof name, "%s.count", argv[1]);
        FILE *f = fopen(name, "w");
        if (f) {
            fprintf(f, "%ld\n", n);
            fclose(f);
        }
    }
    MPI_Finalize();
    return 0;
}
