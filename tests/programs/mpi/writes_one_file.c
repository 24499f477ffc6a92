/* Each rank writes 1000 bytes to its own file, and rank 0 prints one line.
   Nothing else it does is I/O: whatever else a probe records as I/O is the
   MPI library's own traffic (its launcher sockets), not the program's. */
#include <fcntl.h>
#include <mpi.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

int main(int argc, char **argv) {
    int rank;
    char name[64], buf[1000];
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    snprintf(name, sizeof name, "out-%d.dat", rank);
    memset(buf, 'x', sizeof buf);
    int fd = open(name, O_CREAT | O_WRONLY | O_TRUNC, 0644);
    if (fd < 0 || write(fd, buf, sizeof buf) != sizeof buf) return 1;
    close(fd);
    MPI_Barrier(MPI_COMM_WORLD);
    if (rank == 0) printf("done\n");
    MPI_Finalize();
    return 0;
}
