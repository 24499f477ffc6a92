/* A writer rank that dies in the middle of a run.
 *   dies_mid_run HOW N RANK
 * Every rank calls MPI_Barrier N times, then MPI_Iprobe every millisecond
 * for 2.5 s (the probe ships its partly filled buffers every second, and
 * sends them from inside these calls), and writes ready-<rank>. Then rank
 * RANK dies: HOW = abort (abort(), SIGABRT), kill (SIGKILL to itself), or
 * wait (every rank loops on MPI_Iprobe until killed from outside), or
 * live (no rank dies: every rank goes on calling MPI_Iprobe for 3 s more,
 * then ends normally); after a death the others
 * call MPI_Barrier once more and are stuck there with the dead rank, until
 * the launcher ends them. */
#include <mpi.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec + t.tv_nsec * 1e-9;
}

int main(int argc, char **argv) {
    MPI_Init(&argc, &argv);
    int rank, flag;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    const char *how = argc > 1 ? argv[1] : "abort";
    int n = argc > 2 ? atoi(argv[2]) : 50;
    int dying = argc > 3 ? atoi(argv[3]) : 1;
    for (int i = 0; i < n; i++) MPI_Barrier(MPI_COMM_WORLD);
    double until = now() + 2.5;
    while (now() < until) {
        MPI_Iprobe(MPI_ANY_SOURCE, 99, MPI_COMM_WORLD, &flag, MPI_STATUS_IGNORE);
        usleep(1000);
    }
    char name[32], tmp[40];
    snprintf(name, sizeof name, "ready-%d", rank);
    snprintf(tmp, sizeof tmp, "%s.tmp", name);
    FILE *f = fopen(tmp, "w");
    fprintf(f, "%d\n", (int)getpid());
    fclose(f);
    rename(tmp, name);
    if (rank == dying) {
        if (strcmp(how, "abort") == 0) abort();
        if (strcmp(how, "kill") == 0) kill(getpid(), SIGKILL);
    }
    if (strcmp(how, "live") == 0) {
        until = now() + 3.0;
        while (now() < until) {
            MPI_Iprobe(MPI_ANY_SOURCE, 99, MPI_COMM_WORLD, &flag, MPI_STATUS_IGNORE);
            usleep(1000);
        }
    }
    if (strcmp(how, "wait") == 0) {
        for (;;) {
            MPI_Iprobe(MPI_ANY_SOURCE, 99, MPI_COMM_WORLD, &flag, MPI_STATUS_IGNORE);
            usleep(1000);
        }
    }
    MPI_Barrier(MPI_COMM_WORLD);
    MPI_Finalize();
    return 0;
}
