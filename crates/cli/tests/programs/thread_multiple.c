/* MPI_THREAD_MULTIPLE: every OpenMP thread of two ranks exchanges messages
 * with the thread of its number on the other rank, all at once, under its
 * own tag: thread t sends (t + 1) * 100 doubles and receives them back,
 * <iters> times (rank 0 sends first). Around it, on the master, an
 * MPI_Bcast, an MPI_Barrier and an MPI_Allreduce. Each thread times its
 * own MPI calls with CLOCK_MONOTONIC (the master those three too) and
 * prints, once the program is done:
 *   thread <rank> <t> <mpi_ns> <sends and receives>
 * With "pthreads" as third argument the threads are the program's own
 * pthreads instead, which end before MPI_Finalize; each also prints the
 * CPU time it had (CLOCK_THREAD_CPUTIME_ID) when its exchange was done:
 *   cpu <rank> <t> <cpu_ns>
 * A library that does not give MPI_THREAD_MULTIPLE makes rank 0 print
 *   refused <provided>
 * and the program end at once.
 * Usage: thread_multiple <threads> <iters> [pthreads] */
#include <mpi.h>
#include <omp.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define MAX_THREADS 16

static long long now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

static int rank, iters;
static long long mpi_ns[MAX_THREADS], calls[MAX_THREADS], cpu[MAX_THREADS];

/* Thread t's messages with thread t of the other rank. */
static void exchange(int t) {
    int n = (t + 1) * 100, peer = 1 - rank;
    double *buf = calloc(n, sizeof(double));
    for (int i = 0; i < iters; i++) {
        long long t0 = now();
        if (rank == 0) {
            MPI_Send(buf, n, MPI_DOUBLE, peer, t, MPI_COMM_WORLD);
            MPI_Recv(buf, n, MPI_DOUBLE, peer, t, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        } else {
            MPI_Recv(buf, n, MPI_DOUBLE, peer, t, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
            MPI_Send(buf, n, MPI_DOUBLE, peer, t, MPI_COMM_WORLD);
        }
        mpi_ns[t] += now() - t0;
        calls[t] += 2;
    }
    free(buf);
    struct timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    cpu[t] = ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

static void *run(void *t) {
    exchange((int)(long)t);
    return NULL;
}

int main(int argc, char **argv) {
    int provided, size;
    MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    if (provided < MPI_THREAD_MULTIPLE) {
        if (rank == 0) printf("refused %d\n", provided);
        MPI_Finalize();
        return 0;
    }
    int threads = argc > 1 ? atoi(argv[1]) : 3;
    int pthreads = argc > 3 && strcmp(argv[3], "pthreads") == 0;
    iters = argc > 2 ? atoi(argv[2]) : 50;
    if (size != 2 || threads < 1 || threads > MAX_THREADS) MPI_Abort(MPI_COMM_WORLD, 2);
    long long t0 = now();
    MPI_Bcast(&iters, 1, MPI_INT, 0, MPI_COMM_WORLD);
    MPI_Barrier(MPI_COMM_WORLD);
    mpi_ns[0] += now() - t0;
    if (pthreads) {
        pthread_t ids[MAX_THREADS];
        for (long t = 0; t < threads; t++) pthread_create(&ids[t], NULL, run, (void *)t);
        for (int t = 0; t < threads; t++) pthread_join(ids[t], NULL);
    } else {
#pragma omp parallel num_threads(threads)
        exchange(omp_get_thread_num());
    }
    double v = rank, sum;
    t0 = now();
    MPI_Allreduce(&v, &sum, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
    mpi_ns[0] += now() - t0;
    MPI_Finalize();
    for (int t = 0; t < threads; t++)
        printf("thread %d %d %lld %lld\n", rank, t, mpi_ns[t], calls[t]);
    for (int t = 0; pthreads && t < threads; t++) printf("cpu %d %d %lld\n", rank, t, cpu[t]);
    fflush(stdout);
    return 0;
}
