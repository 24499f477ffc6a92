/* Started without arguments it is a wrapper: it runs itself with the
 * argument "mpi" (fork, then exec, and waits), as a launcher script of the
 * program's own name would. With "mpi" it is the MPI program: each rank
 * sends 10 messages to the next. */
#include <mpi.h>
#include <stdio.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

int main(int argc, char **argv) {
    if (argc < 2 || strcmp(argv[1], "mpi") != 0) {
        pid_t pid = fork();
        if (pid == 0) {
            execl("/proc/self/exe", argv[0], "mpi", (char *)NULL);
            _exit(127);
        }
        int status = 0;
        if (pid < 0 || waitpid(pid, &status, 0) < 0) return 1;
        return WIFEXITED(status) ? WEXITSTATUS(status) : 1;
    }
    MPI_Init(&argc, &argv);
    int rank, size, v = 0;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    for (int i = 0; i < 10; i++) {
        MPI_Sendrecv(&rank, 1, MPI_INT, (rank + 1) % size, 0, &v, 1, MPI_INT,
                     (rank + size - 1) % size, 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    }
    MPI_Finalize();
    if (rank == 0) printf("done\n");
    return 0;
}
