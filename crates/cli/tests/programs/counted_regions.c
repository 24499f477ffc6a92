/* Regions whose software counts the program measures of itself:
 *
 *   counted_regions PAGES SLEEPS
 *
 * Each rank, in region "touch", maps PAGES fresh pages and writes one byte
 * to each (one minor page fault per page), and in region "sleep" sleeps
 * 1 ms SLEEPS times (one voluntary context switch each). Around each
 * region it reads its own thread's counts (getrusage(RUSAGE_THREAD):
 * minor faults, voluntary switches) and prints, per rank:
 *
 *   touch RANK PAGES MINFLT
 *   sleep RANK SLEEPS NVCSW
 */
#define _GNU_SOURCE
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>
#include "hark.h"

static struct rusage now(void) {
    struct rusage u;
    getrusage(RUSAGE_THREAD, &u);
    return u;
}

int main(int argc, char **argv) {
    MPI_Init(&argc, &argv);
    int rank;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    long pages = argc > 1 ? atol(argv[1]) : 1000;
    long sleeps = argc > 2 ? atol(argv[2]) : 20;
    long page = sysconf(_SC_PAGESIZE);

    char *m = mmap(NULL, pages * page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (m == MAP_FAILED) {
        perror("mmap");
        MPI_Abort(MPI_COMM_WORLD, 1);
    }
    struct rusage a = now();
    HARK_REGION_BEGIN("touch");
    for (long i = 0; i < pages; i++) {
        m[i * page] = 1;
    }
    HARK_REGION_END("touch");
    struct rusage b = now();
    printf("touch %d %ld %ld\n", rank, pages, b.ru_minflt - a.ru_minflt);

    a = now();
    HARK_REGION_BEGIN("sleep");
    for (long i = 0; i < sleeps; i++) {
        struct timespec t = {0, 1000000L};
        while (nanosleep(&t, &t) != 0) {
        }
    }
    HARK_REGION_END("sleep");
    b = now();
    printf("sleep %d %ld %ld\n", rank, sleeps, b.ru_nvcsw - a.ru_nvcsw);
    fflush(stdout);

    MPI_Barrier(MPI_COMM_WORLD);
    munmap(m, pages * page);
    MPI_Finalize();
    return 0;
}
