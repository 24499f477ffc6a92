/* Rank 0 forks a child that writes 1000 bytes to a file and leaves with
 * _exit; then rank 1 sends rank 0 five messages. A forked child is a child
 * process of rank 0, not a rank: world rank 1 must stay rank 1. */
#include <fcntl.h>
#include <mpi.h>
#include <stdio.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

int main(int argc, char **argv) {
    MPI_Init(&argc, &argv);
    int rank;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    if (rank == 0) {
        pid_t pid = fork();
        if (pid == 0) {
            char buf[1000];
            memset(buf, 'x', sizeof buf);
            int fd = open("child.out", O_WRONLY | O_CREAT | O_TRUNC, 0644);
            if (fd < 0 || write(fd, buf, sizeof buf) != (ssize_t)sizeof buf) _exit(3);
            close(fd);
            _exit(0);
        }
        int status = 0;
        waitpid(pid, &status, 0);
        if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
            fprintf(stderr, "child failed\n");
            MPI_Abort(MPI_COMM_WORLD, 1);
        }
    }
    int value = 0;
    for (int i = 0; i < 5; i++) {
        if (rank == 1) MPI_Send(&i, 1, MPI_INT, 0, 7, MPI_COMM_WORLD);
        if (rank == 0) MPI_Recv(&value, 1, MPI_INT, 1, 7, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    }
    MPI_Finalize();
    return 0;
}
