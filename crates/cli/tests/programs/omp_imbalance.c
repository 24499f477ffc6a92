/* A hybrid program with known per-thread imbalance that times itself.
 *
 * Rounds of: (from the second round on) serial work on the master for half
 * a unit (the master counts all its time out of regions and MPI as work);
 * then a parallel region in which thread t works (t + 1) units,
 * waits at an explicit barrier, works (n - t) / 2 units more and meets the
 * others at the region's end; then (with MPI) an MPI_Allreduce on the
 * master. Each thread times its own work and both barrier waits with
 * CLOCK_MONOTONIC (the end barrier's wait ends when the master is back
 * from the region) and prints, once the program is done:
 *   thread <rank> <t> <work_ns> <barrier_ns>
 * Built with -DWITH_MPI for the MPI version (MPI_THREAD_FUNNELED).
 * Usage: omp_imbalance <unit_ms> <rounds> */
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#ifdef WITH_MPI
#include <mpi.h>
#endif

#define MAX_THREADS 64

static long long now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

/* Spins for ns nanoseconds of wall time; returns the time it took. */
static long long spin(long long ns) {
    long long t0 = now(), t;
    volatile double x = 1.0;
    do {
        for (int i = 0; i < 1000; i++) x = x * 1.0000001 + 1e-9;
        t = now();
    } while (t - t0 < ns);
    return t - t0;
}

int main(int argc, char **argv) {
    long long unit = (argc > 1 ? atoll(argv[1]) : 20) * 1000000LL;
    int rounds = argc > 2 ? atoi(argv[2]) : 5;
    int rank = 0;
#ifdef WITH_MPI
    int provided;
    MPI_Init_thread(&argc, &argv, MPI_THREAD_FUNNELED, &provided);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
#endif
    static long long work[MAX_THREADS], barrier[MAX_THREADS], done[MAX_THREADS];
    int threads = 1;
    /* The master's serial time counts whole, glue included: on a loaded
     * machine it may be preempted anywhere, and that is time outside MPI
     * and OpenMP too. */
    long long mark = now();
    for (int r = 0; r < rounds; r++) {
        if (r > 0) spin(unit / 2);
        work[0] += now() - mark;
#pragma omp parallel
        {
            int t = omp_get_thread_num(), n = omp_get_num_threads();
            if (t == 0) threads = n;
            work[t] += spin((t + 1) * unit);
            long long b0 = now();
#pragma omp barrier
            barrier[t] += now() - b0;
            work[t] += spin((n - t) * unit / 2);
            done[t] = now();
        }
        long long joined = now();
        for (int t = 0; t < threads; t++) barrier[t] += joined - done[t];
        mark = joined;
#ifdef WITH_MPI
        double v = r, sum;
        work[0] += now() - mark;
        MPI_Allreduce(&v, &sum, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
        mark = now();
#endif
    }
    work[0] += now() - mark;
#ifdef WITH_MPI
    MPI_Finalize();
#endif
    for (int t = 0; t < threads; t++)
        printf("thread %d %d %lld %lld\n", rank, t, work[t], barrier[t]);
    /* Written now, not behind the OpenMP runtime's shutdown at exit. */
    fflush(stdout);
    return 0;
}
