/* OpenMP threads that keep their CPUs busy and time themselves.
 *
 * Rounds of a parallel region of <threads> threads in which every thread
 * spins until it has had <unit_ms> more of CPU time; between rounds (with
 * MPI) an MPI_Allreduce on the master. Each thread sums, over its spins,
 * the wall time (CLOCK_MONOTONIC) and its own CPU time
 * (CLOCK_THREAD_CPUTIME_ID): a spinning thread never sleeps, so the wall
 * time it did not run is time it waited for a CPU. It also reads its CPU
 * time since it started as late as it can: a worker at the end of its last
 * spin, the master at the end of main, less what it had used by the time
 * the program's own constructor ran (the loader's work before the probe's
 * constructor). Once the program is done it prints:
 *   cpu <rank> <t> <cpu_ns> <spin_wall_ns> <spin_cpu_ns>
 * Run with OMP_WAIT_POLICY=passive, so that a thread waiting at a barrier
 * sleeps instead of spinning on untimed CPU.
 * Usage: omp_cpu_time <threads> <unit_ms> <rounds> */
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#ifdef WITH_MPI
#include <mpi.h>
#endif

#define MAX_THREADS 64

static long long clock_ns(clockid_t c) {
    struct timespec ts;
    clock_gettime(c, &ts);
    return ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

static long long at_start;

__attribute__((constructor)) static void started(void) {
    at_start = clock_ns(CLOCK_THREAD_CPUTIME_ID);
}

int main(int argc, char **argv) {
    int threads = argc > 1 ? atoi(argv[1]) : 3;
    long long unit = (argc > 2 ? atoll(argv[2]) : 60) * 1000000LL;
    int rounds = argc > 3 ? atoi(argv[3]) : 3;
    int rank = 0;
#ifdef WITH_MPI
    int provided;
    MPI_Init_thread(&argc, &argv, MPI_THREAD_FUNNELED, &provided);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
#endif
    if (threads < 1 || threads > MAX_THREADS) return 2;
    static long long cpu[MAX_THREADS], wall[MAX_THREADS], spun[MAX_THREADS];
    for (int r = 0; r < rounds; r++) {
#pragma omp parallel num_threads(threads)
        {
            int t = omp_get_thread_num();
            long long w0 = clock_ns(CLOCK_MONOTONIC);
            long long c0 = clock_ns(CLOCK_THREAD_CPUTIME_ID), c;
            volatile double x = 1.0;
            do {
                for (int i = 0; i < 1000; i++) x = x * 1.0000001 + 1e-9;
                c = clock_ns(CLOCK_THREAD_CPUTIME_ID);
            } while (c - c0 < unit);
            wall[t] += clock_ns(CLOCK_MONOTONIC) - w0;
            spun[t] += c - c0;
            if (t > 0) cpu[t] = clock_ns(CLOCK_THREAD_CPUTIME_ID);
        }
#ifdef WITH_MPI
        double v = r, sum;
        MPI_Allreduce(&v, &sum, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
#endif
    }
#ifdef WITH_MPI
    MPI_Finalize();
#endif
    cpu[0] = clock_ns(CLOCK_THREAD_CPUTIME_ID) - at_start;
    for (int t = 0; t < threads; t++)
        printf("cpu %d %d %lld %lld %lld\n", rank, t, cpu[t], wall[t], spun[t]);
    fflush(stdout);
    return 0;
}
