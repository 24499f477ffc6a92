/* Busy computation, no sleeping: each rank spins for argv[1] ms of wall
 * time between two barriers. Every rank measures its own main thread from
 * the start of main to MPI_Finalize: wall time (CLOCK_MONOTONIC) and time
 * on a CPU (CLOCK_THREAD_CPUTIME_ID). A thread that never sleeps was
 * runnable all the time it did not run, so it waited for a CPU
 * `wall - cpu`. Where the kernel has /proc/self/schedstat, its waiting
 * time is printed too. Rank 0 prints one line per rank:
 *   cpu <rank> <wall_ns> <cpu_ns> <schedstat_wait_ns or -1>          */
#define _GNU_SOURCE
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

static long long ns(clockid_t c) {
    struct timespec t;
    clock_gettime(c, &t);
    return (long long)t.tv_sec * 1000000000LL + t.tv_nsec;
}

static long long schedstat_wait(void) {
    FILE *f = fopen("/proc/thread-self/schedstat", "r");
    if (!f)
        return -1;
    long long run = 0, wait = -1;
    if (fscanf(f, "%lld %lld", &run, &wait) != 2)
        wait = -1;
    fclose(f);
    return wait;
}

int main(int argc, char **argv) {
    long long wall0 = ns(CLOCK_MONOTONIC), cpu0 = ns(CLOCK_THREAD_CPUTIME_ID);
    long long wait0 = schedstat_wait();
    MPI_Init(&argc, &argv);
    int rank, size;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    long long ms = argc > 1 ? atoll(argv[1]) : 2000;
    MPI_Barrier(MPI_COMM_WORLD);
    volatile double x = 1.0;
    long long until = ns(CLOCK_MONOTONIC) + ms * 1000000LL;
    while (ns(CLOCK_MONOTONIC) < until)
        for (int i = 0; i < 10000; i++)
            x = x * 1.0000001 + 1e-9;
    MPI_Barrier(MPI_COMM_WORLD);
    long long wait1 = schedstat_wait();
    long long mine[3] = {ns(CLOCK_MONOTONIC) - wall0, ns(CLOCK_THREAD_CPUTIME_ID) - cpu0,
                         wait0 < 0 || wait1 < 0 ? -1 : wait1 - wait0};
    long long *all = malloc(sizeof mine * size);
    MPI_Gather(mine, 3, MPI_LONG_LONG, all, 3, MPI_LONG_LONG, 0, MPI_COMM_WORLD);
    if (rank == 0)
        for (int r = 0; r < size; r++)
            printf("cpu %d %lld %lld %lld\n", r, all[3 * r], all[3 * r + 1], all[3 * r + 2]);
    free(all);
    MPI_Finalize();
    return 0;
}
