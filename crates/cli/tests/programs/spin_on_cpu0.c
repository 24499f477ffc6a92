/* Each rank pins its main thread to CPU 0 and spins for argv[1] ms of wall
 * time between MPI_Init and MPI_Finalize: ranks of different jobs that
 * share one core. Rank 0 prints its spin's span on the wall clock,
 * `span FROM_NS TO_NS` (CLOCK_REALTIME), then, per second of the wall
 * clock it spun in, the time its main thread was on a CPU in it
 * (CLOCK_THREAD_CPUTIME_ID): `cpu SECOND CPU_NS WALL_NS`.              */
#define _GNU_SOURCE
#include <mpi.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#define MAX_SECONDS 1000

static long long ns(clockid_t c) {
    struct timespec t;
    clock_gettime(c, &t);
    return (long long)t.tv_sec * 1000000000LL + t.tv_nsec;
}

int main(int argc, char **argv) {
    MPI_Init(&argc, &argv);
    int rank;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    cpu_set_t one;
    CPU_ZERO(&one);
    CPU_SET(0, &one);
    if (sched_setaffinity(0, sizeof one, &one) != 0) {
        perror("sched_setaffinity");
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
    long long ms = argc > 1 ? atoll(argv[1]) : 1000;
    static long long second[MAX_SECONDS], cpu[MAX_SECONDS], wall[MAX_SECONDS];
    int n = 0;
    long long from = ns(CLOCK_REALTIME), until = from + ms * 1000000LL;
    long long now = from, cpu_at = ns(CLOCK_THREAD_CPUTIME_ID), wall_at = from;
    volatile double x = 1.0;
    while (now < until) {
        for (int i = 0; i < 10000; i++)
            x = x * 1.0000001 + 1e-9;
        long long t = ns(CLOCK_REALTIME);
        if (t / 1000000000LL != now / 1000000000LL || t >= until) {
            long long c = ns(CLOCK_THREAD_CPUTIME_ID);
            if (n < MAX_SECONDS) {
                second[n] = now / 1000000000LL;
                cpu[n] = c - cpu_at;
                wall[n] = t - wall_at;
                n++;
            }
            cpu_at = c;
            wall_at = t;
        }
        now = t;
    }
    if (rank == 0) {
        printf("span %lld %lld\n", from, now);
        for (int i = 0; i < n; i++)
            printf("cpu %lld %lld %lld\n", second[i], cpu[i], wall[i]);
    }
    MPI_Finalize();
    return 0;
}
